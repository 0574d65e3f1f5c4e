#!/usr/bin/env python3
"""The models and checks of tests/cuda/precision.sh (pprt --precision
tf32|bf16|fp16 on cuda-emu: the products read A and B as cuBLASLt's compute
type reads them, docs/cuda.md "Reduced precision").

  precision_models.py models DIR
      DIR/mm.onnx: MatMul x [B, 5, 48] by a weight [48, 24], then a Gemm
      (transB, bias: cuBLASLt's epilogue) by [16, 24]: y [B*5, 16] after a
      Reshape; inputs DIR/data_mm/x.npy (3 samples) whose values and
      weights are a few bits plus a small perturbation, so that rounding
      them to the half types changes the products by about 1e-3 .. 1e-2;
      the first 8 of x's last axis tiny (float16 subnormals) and w1's rows
      for them as large, so that float16 and TF32 round apart.
      PRECISION_BIG=1: x [8, 197, 768], w1 [768, 768], w2 [768, 768] (ViT-B/16's
      products at batch 8), for models, expect and which alike.
  precision_models.py expect DIR PRECISION
      DIR/want_PRECISION.npy: the same products in float64 over the
      inputs and weights rounded to nearest even to the type (NumPy's
      float16; bfloat16 and TF32 on the float32 bits), the intermediate
      product rounded as its inputs to the second one; the bias unrounded.
      An independent model of the rounding, not pprt's code.
  precision_models.py error GOT REF
      prints max |got - ref| over max |ref| (finite values of ref only).
  precision_models.py which DIR GOT
      GOT (DIR/mm.onnx's output) against the four models of expect (f32,
      tf32, bf16, fp16): each one's error as above and the closest, which
      says how a GPU's products read their inputs (gpu_day part 5)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

B, S, K, N, M = 3, 5, 48, 24, 16
if os.environ.get("PRECISION_BIG") == "1":  # ViT-B/16's sizes at batch 8 (a GPU's library may choose its kernels by size)
    B, S, K, N, M = 8, 197, 768, 768, 768


def weights():
    rng = np.random.default_rng(5477)

    def few_bits(*shape):  # k / 8 plus a perturbation of about 2^-9 relative
        base = rng.integers(-16, 17, size=shape).astype(np.float64) / 8.0
        base[base == 0] = 0.125
        return (base * (1.0 + rng.uniform(-1, 1, size=shape) * 2.0 ** -9)).astype(np.float32)

    w1, w2, bias, x = few_bits(K, N), few_bits(M, N), rng.uniform(-1, 1, size=M).astype(np.float32), few_bits(B, S, K)
    # the first 8 of K: x tiny (2^-18: float16 subnormals, a few bits left) and w1 large (2^14, below
    # float16's 65504), so that float16 and TF32 (the same 10 bits of mantissa, TF32 with f32's
    # exponents) round them apart
    x[..., :8] *= np.float32(2.0 ** -18)
    w1[:8] *= np.float32(2.0 ** 14)
    return w1, w2, bias, x


def models(d):
    w1, w2, bias, x = weights()
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h"]),
             n("Reshape", ["h", "shape"], ["h2"]),
             n("Gemm", ["h2", "w2", "bias"], ["y"], transB=1)]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(bias, "bias"), numpy_helper.from_array(np.array([-1, N], np.int64), "shape")]
    g = helper.make_graph(nodes, "precision_mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B * S, M])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "mm.onnx"))
    os.makedirs(os.path.join(d, "data_mm"), exist_ok=True)
    np.save(os.path.join(d, "data_mm", "x.npy"), x)


def round_to(a, prec):
    a = np.asarray(a, np.float32)
    if prec == "f32":
        return a.astype(np.float64)
    if prec == "fp16":
        return a.astype(np.float16).astype(np.float64)
    drop = {"bf16": 16, "tf32": 13}[prec]  # low mantissa bits dropped, round to nearest even
    u = a.view(np.uint32).astype(np.uint64)
    u = (u + (1 << (drop - 1)) - 1 + ((u >> drop) & 1)) >> drop << drop
    return (u & 0xffffffff).astype(np.uint32).view(np.float32).astype(np.float64)


def expect(d, prec):
    w1, w2, bias, x = weights()
    h = (round_to(x, prec) @ round_to(w1, prec)).astype(np.float32)  # D of the first product, f32
    y = round_to(h.reshape(-1, N), prec) @ round_to(w2, prec).T + bias.astype(np.float64)
    np.save(os.path.join(d, f"want_{prec}.npy"), y.astype(np.float32))


def error(got, ref):
    g, r = np.load(got).astype(np.float64), np.load(ref).astype(np.float64)
    fin = np.isfinite(r)
    print("%.3e" % (np.max(np.abs(g[fin] - r[fin])) / np.max(np.abs(r[fin]))))


def which(d, got):
    g = np.load(got).astype(np.float64)
    errs = {}
    for prec in ("f32", "tf32", "bf16", "fp16"):
        expect(d, prec)
        r = np.load(os.path.join(d, f"want_{prec}.npy")).astype(np.float64)
        errs[prec] = np.max(np.abs(g - r)) / np.max(np.abs(r))
    print(", ".join("%s %.1e" % kv for kv in errs.items()) + "; closest: " + min(errs, key=errs.get))


if __name__ == "__main__":
    if sys.argv[1] == "models":
        models(sys.argv[2])
    elif sys.argv[1] == "expect":
        expect(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "error":
        error(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "which":
        which(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: precision_models.py models DIR | expect DIR PRECISION | error GOT REF | which DIR GOT")
