#!/usr/bin/env python3
"""Convolutions with NaN and inf in their input on a GPU: does each keep them?

A sweep of small Conv (+ bias, + residual Add, + Relu) models, 16 to 96
channels, groups 1 to depthwise, 1x1 to 7x7 kernels, a NaN and infinities
in the input: pprt on
PP_BACKEND (default cuda) against the reference kernels (`--backend ref`,
which follow onnxruntime's NaN semantics). The default mode (each
convolution alone in cuDNN, then pprt's epilogue kernel) must give the
reference's NaN and inf positions and its values within rtol 1e-3, atol
1e-4; `--cuda-conv-fusion on` (cuDNN's fused graphs, which dropped NaN on an
H200 on 2026-11-27) is run and reported, not judged. Prints one line per
model; exit 1 when the default mode differs anywhere.
Usage (on the GPU machine, after tests/cuda/gpu_env.sh): nan_conv.py WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

PPCC, PPRT = os.path.abspath(os.environ["PPCC"]), os.path.abspath(os.environ["PPRT"])
BE = os.environ.get("PP_BACKEND", "cuda")
WORK = sys.argv[1]
rng = np.random.default_rng(1)
bad = 0


def pprt(d, tag, *args):
    r = subprocess.run([PPRT, d + "/p.plan", d + "/data", "-o", f"{d}/o_{tag}", "-q", *args],
                       capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()[-300:]
    return np.load(f"{d}/o_{tag}/out.npy"), None


def differs(got, want):
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    if (nan_g != nan_w).any():
        return f"NaN at {int(nan_g.sum())} places, want {int(nan_w.sum())}"
    if (np.isinf(got) != np.isinf(want)).any() or (np.sign(got[np.isinf(got)]) != np.sign(want[np.isinf(got)])).any():
        return "inf elsewhere than the reference's"
    fin = np.isfinite(want)
    if not np.allclose(got[fin], want[fin], rtol=1e-3, atol=1e-4):
        return f"values off by up to {np.abs(got[fin] - want[fin]).max():.3g}"
    return None


# name, groups, bias, activation, residual, channels, kernel, stride, height x width (other sizes and
# kernels reach other engines: 1x1, 5x5 at stride 2, ConvNeXt's 7x7 depthwise, 56 x 56)
CASES = (("g1_bias_relu", 1, 1, "Relu", 0, 16, 3, 1, (9, 11)), ("g1_bias", 1, 1, None, 0, 16, 3, 1, (9, 11)),
         ("g1_nobias_relu", 1, 0, "Relu", 0, 16, 3, 1, (9, 11)), ("g1_resid_relu", 1, 1, "Relu", 1, 16, 3, 1, (9, 11)),
         ("g2_bias_relu", 2, 1, "Relu", 0, 16, 3, 1, (9, 11)), ("cpg2_bias", 8, 1, None, 0, 16, 3, 1, (9, 11)),
         ("cpg2_bias_relu", 8, 1, "Relu", 0, 16, 3, 1, (9, 11)), ("dw_bias_relu", 16, 1, "Relu", 0, 16, 3, 1, (9, 11)),
         ("dw_bias", 16, 1, None, 0, 16, 3, 1, (9, 11)), ("g1_c64_bias_relu", 1, 1, "Relu", 0, 64, 3, 1, (9, 11)),
         ("k1_c64_bias_relu", 1, 1, "Relu", 0, 64, 1, 1, (14, 14)), ("k5_s2_bias", 1, 1, None, 0, 32, 5, 2, (17, 17)),
         ("dw7_c96_bias", 96, 1, None, 0, 96, 7, 1, (14, 14)), ("g1_c64_56_bias_relu", 1, 1, "Relu", 0, 64, 3, 1, (56, 56)))
for name, group, bias, act, resid, C, k, s, (hh, ww) in CASES:
    x = rng.standard_normal((2, C, hh, ww)).astype(np.float32)
    x[0, 0, 0, 0], x[0, 1, hh // 2, ww // 2], x[1, C - 1, hh - 1, ww - 1] = np.nan, np.inf, -np.inf
    inits = [NH.from_array(rng.standard_normal((C, C // group, k, k)).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(NH.from_array(np.full(C, 0.5, np.float32), "b"))
        ins.append("b")
    p = k // 2
    nodes, cur = [H.make_node("Conv", ins, ["y"], group=group, pads=[p] * 4, strides=[s, s])], "y"
    if resid and s == 1:
        nodes.append(H.make_node("Add", [cur, "x"], ["r"]))
        cur = "r"
    if act:
        nodes.append(H.make_node(act, [cur], ["a"]))
        cur = "a"
    nodes.append(H.make_node("Identity", [cur], ["out"]))
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", TP.FLOAT, list(x.shape))],
                     [H.make_tensor_value_info("out", TP.FLOAT, None)], initializer=inits)
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    d = os.path.join(WORK, name)
    os.makedirs(d + "/data", exist_ok=True)
    onnx.save(m, d + "/m.onnx")
    np.save(d + "/data/x.npy", x)
    r = subprocess.run([PPCC, d + "/m.onnx", "-b", "0", "-q", "-o", d + "/p.plan"], capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL {name}: ppcc: {r.stderr.strip()[-300:]}")
        bad += 1
        continue
    want, err = pprt(d, "ref", "--backend", "ref")
    got, err2 = pprt(d, "alone", "--backend", BE)
    fused, err3 = pprt(d, "fused", "--backend", BE, "--cuda-conv-fusion", "on")
    if err or err2:
        print(f"FAIL {name}: pprt: {err or err2}")
        bad += 1
        continue
    why = differs(got, want)
    bad += why is not None
    print(f"{'FAIL' if why else 'ok  '} {name}: default {why or 'as the reference'} ({int(np.isnan(want).sum())} NaN); "
          f"fused graphs: {err3 or differs(fused, want) or 'as the reference'}")
print(f"nan_conv: {bad} model(s) off the reference on {BE}")
sys.exit(1 if bad else 0)
