#!/usr/bin/env python3
"""Einsum on the CUDA backend's planner, run on cuda-emu: each equation
below, with random shapes, against onnxruntime (rtol 1e-4, atol 1e-5), and
where it went: those that are matrix products (batched, transposed, outer,
with '...', with several labels per role) must become one cuBLASLt step and
no host step; diagonals, one-sided sums, three operands and layouts where no
matrix dim has unit stride must stay on the host fallback (right answer
there too).
Usage: einsum.py WORKDIR   (env: PPCC, PPRT; PP_BACKEND=cuda on a GPU machine,
default cuda-emu; without onnxruntime there, pprt --backend ref is the oracle)"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

try:
    import onnxruntime as ort
except ImportError:  # a GPU machine without it: the reference kernels are the oracle
    ort = None

PPCC, PPRT = os.path.abspath(os.environ["PPCC"]), os.path.abspath(os.environ["PPRT"])
BACKEND = os.environ.get("PP_BACKEND", "cuda-emu")
# (equation, shapes, on cuBLASLt?)
CASES = [
    ("ij,jk->ik", [(5, 7), (7, 3)], True),
    ("ij,kj->ik", [(5, 7), (3, 7)], True),
    ("ji,jk->ik", [(7, 5), (7, 3)], True),
    ("ij,jk->ki", [(5, 7), (7, 3)], True),
    ("bij,bjk->bik", [(4, 5, 7), (4, 7, 3)], True),
    ("bhqd,bhkd->bhqk", [(2, 3, 6, 8), (2, 3, 5, 8)], True),
    ("bhqk,bhkd->bhqd", [(2, 3, 6, 5), (2, 3, 5, 8)], True),
    ("bnd,dm->bnm", [(3, 4, 6), (6, 5)], True),
    ("bqhd,bkhd->bhqk", [(2, 6, 3, 8), (2, 5, 3, 8)], False),  # batch b,h not mergeable in A: host
    ("i,j->ij", [(6,), (4,)], True),
    ("i,i->", [(9,), (9,)], True),
    ("ij,ij->i", [(5, 7), (5, 7)], True),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)], True),
    ("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)], True),
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)], True),
    ("bij,jk", [(3, 4, 5), (5, 2)], True),  # implicit output: bik
    ("ii,ij->j", [(5, 5), (5, 3)], False),  # a diagonal
    ("ij,jk->i", [(5, 7), (7, 3)], False),  # k summed over one operand
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], False),  # three operands
]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    rng = np.random.default_rng(7)
    bad = 0
    for c, (eq, shapes, lt) in enumerate(CASES):
        names = [f"x{i}" for i in range(len(shapes))]
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)]
        g = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=eq)], "g", ins,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        onnx.save(m, f"e{c}.onnx")
        data = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
        os.makedirs(f"e{c}_data", exist_ok=True)
        for n, v in data.items():
            np.save(f"e{c}_data/{n}.npy", v)
        # the model has no batch dim: -b 0 runs it as is
        subprocess.run([PPCC, f"e{c}.onnx", "-b", "0", "-o", f"e{c}.plan", "-q"], check=True)
        if ort:
            want = ort.InferenceSession(f"e{c}.onnx", providers=["CPUExecutionProvider"]).run(None, data)[0]
        else:
            subprocess.run([PPRT, f"e{c}.plan", f"e{c}_data", "-o", f"e{c}_ref", "--backend", "ref", "-q"], check=True)
            want = np.load(f"e{c}_ref/y.npy")
        subprocess.run([PPRT, f"e{c}.plan", f"e{c}_data", "-o", f"e{c}_out", "--backend", BACKEND, "-q",
                        "--stats-json", f"e{c}.json"], check=True)
        got = np.load(f"e{c}_out/y.npy")
        host = sum(s["reference_nodes"] for s in json.load(open(f"e{c}.json"))["stages"])
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
        where = "host" if host else "cuBLASLt"
        if not ok:
            print(f"FAIL: {eq} {shapes}: differs from {'onnxruntime' if ort else 'ref'} (max abs {np.abs(got - want).max():.3g})")
            bad += 1
        elif (host == 0) != lt:
            print(f"FAIL: {eq} {shapes}: ran on {where}, want {'cuBLASLt' if lt else 'host'}")
            bad += 1
        else:
            print(f"ok: {eq} {shapes}: {where}")
    print(f"einsum: {len(CASES) - bad} of {len(CASES)} as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
