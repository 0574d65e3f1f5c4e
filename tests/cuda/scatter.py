#!/usr/bin/env python3
"""ScatterElements and ScatterND on the CUDA backend's own kernel, run on
cuda-emu: against onnxruntime (floats within rtol 1e-6, integers exactly)
and bit for bit against pprt's reference kernels, with no host step:
every reduction (repeated positions: the reference's order), negative
indices, each axis, int32 and int64 indices (ScatterElements), float, double, float16 and
integer data; a KV-cache-like update of whole slices; an index out of
range fails the run with exit 2 and a message saying so. And Trilu with a
constant k (upper and lower, k inside and beyond the matrix; float, double,
int64: onnxruntime's types) on its own kernel the same way.
Usage: scatter.py WORKDIR   (env: PPCC, PPRT; PP_BACKEND=cuda on a GPU machine,
default cuda-emu; without onnxruntime there, only the reference's bits)"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

try:
    import onnxruntime as ort
except ImportError:  # a GPU machine without it: the reference kernels' bits only
    ort = None

PPCC, PPRT = os.path.abspath(os.environ["PPCC"]), os.path.abspath(os.environ["PPRT"])
BACKEND = os.environ.get("PP_BACKEND", "cuda-emu")
rng = np.random.default_rng(11)


def elements_case(shape, attr_axis, red, dt, it, dup):
    axis = attr_axis % len(shape)
    data = (rng.standard_normal(shape) * 4).astype(dt)
    ishape = list(shape)
    ishape[axis] = max(1, shape[axis] - 1) if not dup else shape[axis] + 2
    n = shape[axis]
    if dup:
        idx = rng.integers(-n, n, size=ishape)
    else:  # distinct positions along the axis in every line
        idx = np.argsort(rng.random([*ishape[:axis], n, *ishape[axis + 1:]]), axis=axis)
        idx = np.take(idx, range(ishape[axis]), axis=axis) - (n if rng.random() < 0.5 else 0)
    upd = (rng.standard_normal(ishape) * 4).astype(dt)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=attr_axis, reduction=red)
    return node, {"x": data, "i": idx.astype(it), "u": upd}


def nd_case(shape, q, n_tup, red, dt, it, dup):
    data = (rng.standard_normal(shape) * 4).astype(dt)
    n_tup = n_tup if dup else min(n_tup, int(np.prod(shape[:q])))
    if dup:
        idx = np.stack([rng.integers(-shape[c], shape[c], size=n_tup) for c in range(q)], axis=-1)
    else:
        flat = rng.permutation(int(np.prod(shape[:q])))[:n_tup]
        idx = np.stack(np.unravel_index(flat, shape[:q]), axis=-1)
    upd = (rng.standard_normal([n_tup, *shape[q:]]) * 4).astype(dt)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)
    return node, {"x": data, "i": idx.astype(it), "u": upd}


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    cases = []
    for red in ["none", "add", "mul", "max", "min"]:
        for dt in [np.float32, np.float64, np.int64, np.int32, np.uint8]:
            cases.append(elements_case((4, 5, 3), int(rng.integers(0, 3)), red, dt, np.int32, red != "none"))
            cases.append(nd_case((4, 5, 3), int(rng.integers(1, 4)), 5, red, dt, np.int64, red != "none"))
    cases.append(elements_case((6, 7), -1, "none", np.float16, np.int64, False))
    cases.append(nd_case((2, 16, 8), 2, 3, "none", np.float32, np.int64, False))  # a KV cache: rows of a [b, t, d] cache
    cases.append(nd_case((5, 4), 2, 20, "add", np.float32, np.int64, True))  # many small updates, repeated
    for upper in (0, 1):  # Trilu with a constant k (its own kernel too)
        for kk, dt in ((0, np.float32), (2, np.int64), (-1, np.float64), (-9, np.float32), (7, np.int64)):
            x = (rng.standard_normal((3, 4, 6)) * 4).astype(dt)
            node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
            cases.append((node, {"x": x}, numpy_helper.from_array(np.array(kk, np.int64), "k")))
    bad = 0
    for c, (node, data, *init) in enumerate(cases):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                            for k, v in data.items()],
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(data["x"].dtype), None)],
                              init)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), f"s{c}.onnx")
        os.makedirs(f"s{c}_data", exist_ok=True)
        for k, v in data.items():
            np.save(f"s{c}_data/{k}.npy", v)
        what = f"{node.op_type} {dict((a.name, helper.get_attribute_value(a)) for a in node.attribute)} {data['x'].dtype} {data['x'].shape}"
        subprocess.run([PPCC, f"s{c}.onnx", "-b", "0", "-o", f"s{c}.plan", "-q"], check=True)
        subprocess.run([PPRT, f"s{c}.plan", f"s{c}_data", "-o", f"s{c}_ref", "--backend", "ref", "-q"], check=True)
        subprocess.run([PPRT, f"s{c}.plan", f"s{c}_data", "-o", f"s{c}_emu", "--backend", BACKEND, "-q",
                        "--stats-json", f"s{c}.json"], check=True)
        host = sum(s["reference_nodes"] for s in json.load(open(f"s{c}.json"))["stages"])
        got, ref = np.load(f"s{c}_emu/y.npy"), np.load(f"s{c}_ref/y.npy")
        want = ort.InferenceSession(f"s{c}.onnx", providers=["CPUExecutionProvider"]).run(None, data)[0] if ort else ref
        close = np.array_equal(got, want) if got.dtype.kind in "iu" else np.allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
        if host:
            print(f"FAIL: {what}: {host} node(s) on the host")
        elif got.tobytes() != ref.tobytes():
            print(f"FAIL: {what}: other bits than the reference kernel")
        elif not close:
            print(f"FAIL: {what}: differs from onnxruntime (max abs {np.abs(got.astype(float) - want.astype(float)).max():.3g})")
        else:
            continue
        bad += 1
    # an index out of range: exit 2, said
    node, data = nd_case((4, 5), 1, 2, "none", np.float32, np.int64, False)
    data["i"][1, 0] = 9
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                        for k, v in data.items()], [helper.make_tensor_value_info("y", 1, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), "oor.onnx")
    os.makedirs("oor_data", exist_ok=True)
    for k, v in data.items():
        np.save(f"oor_data/{k}.npy", v)
    subprocess.run([PPCC, "oor.onnx", "-b", "0", "-o", "oor.plan", "-q"], check=True)
    r = subprocess.run([PPRT, "oor.plan", "oor_data", "-o", "oor_out", "--backend", BACKEND, "-q"], capture_output=True,
                       text=True)
    if r.returncode != 2 or "out of range" not in r.stderr:
        print(f"FAIL: an index out of range: exit {r.returncode}: {r.stderr.strip()}")
        bad += 1
    print(f"scatter, trilu: {len(cases) + 1 - bad} of {len(cases) + 1} cases as expected ({len(cases)} on own kernels, "
          f"one index out of range)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
