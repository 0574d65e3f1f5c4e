#!/usr/bin/env python3
"""copies_models.py DIR [N]: N small ONNX models (default 120) of the copy ops
the CUDA planner runs as strided copies (Transpose, Concat, Split, Slice with
steps, Gather along an axis, Expand, Tile, DepthToSpace), random shapes whose
innermost sizes are multiples of 4 or not, in f32, f16, int64 and uint8, each
op between two Neg or Not nodes (so its tensors lie in the stage's arena) or
straight on the graph's input and output (the message spaces). For
tests/cuda/run.sh, which compiles them (ppcc -b 0) and runs test_copies on
the plans: the widened copies byte for byte against the copies as given."""
import os
import random
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

TYPES = [(TensorProto.FLOAT, np.float32), (TensorProto.FLOAT16, np.float16), (TensorProto.INT64, np.int64),
         (TensorProto.UINT8, np.uint8)]


def shape(rng, rank):
    return [rng.choice([1, 2, 3, 4, 5, 8, 12, 16]) for _ in range(rank)]


def model(rng, i):
    et, nt = rng.choice(TYPES)
    rank = rng.randint(1, 5)
    x = shape(rng, rank)
    kind = rng.choice(["transpose", "concat", "split", "slice", "gather", "expand", "tile", "d2s"])
    wrap = rng.random() < 0.7 and et != TensorProto.UINT8  # Neg before and after (arena tensors)
    inits, nodes, ins = [], [], [("x", x)]
    if kind == "transpose":
        perm = list(range(rank))
        rng.shuffle(perm)
        nodes.append(helper.make_node("Transpose", ["a"], ["b"], perm=perm))
        y = [x[p] for p in perm]
    elif kind == "concat":
        ax = rng.randrange(rank)
        x2 = list(x)
        x2[ax] = rng.choice([1, 3, 4, 8])
        ins.append(("x2", x2))
        nodes.append(helper.make_node("Concat", ["a", "x2"], ["b"], axis=ax))
        y = list(x)
        y[ax] += x2[ax]
    elif kind == "split":
        ax = rng.randrange(rank)
        x[ax] = max(x[ax], 2)
        ins[0] = ("x", x)
        first = rng.randint(1, x[ax] - 1)
        inits.append(numpy_helper.from_array(np.array([first, x[ax] - first], np.int64), "sp"))
        nodes.append(helper.make_node("Split", ["a", "sp"], ["b", "b2"], axis=ax))
        y = list(x)
        y[ax] = first
    elif kind == "slice":
        ax = rng.randrange(rank)
        x[ax] = max(x[ax], 4)
        ins[0] = ("x", x)
        step = rng.choice([1, 1, 2, -1])
        st, en = (1, x[ax]) if step > 0 else (x[ax] - 1, 0)
        for nm, v in (("st", st), ("en", en), ("ax", ax), ("step", step)):
            inits.append(numpy_helper.from_array(np.array([v], np.int64), nm))
        nodes.append(helper.make_node("Slice", ["a", "st", "en", "ax", "step"], ["b"]))
        y = list(x)
        y[ax] = len(range(st, en, step))
    elif kind == "gather":
        ax = rng.randrange(rank)
        idx = np.array([rng.randrange(-x[ax], x[ax]) for _ in range(rng.randint(1, 3))], np.int64)
        inits.append(numpy_helper.from_array(idx, "idx"))
        nodes.append(helper.make_node("Gather", ["a", "idx"], ["b"], axis=ax))
        y = x[:ax] + [len(idx)] + x[ax + 1:]
    elif kind == "expand":
        y = [d if d != 1 else rng.choice([1, 4, 3]) for d in x]
        inits.append(numpy_helper.from_array(np.array(y, np.int64), "shp"))
        nodes.append(helper.make_node("Expand", ["a", "shp"], ["b"]))
    elif kind == "tile":
        rep = [rng.choice([1, 1, 2, 3]) for _ in x]
        inits.append(numpy_helper.from_array(np.array(rep, np.int64), "rep"))
        nodes.append(helper.make_node("Tile", ["a", "rep"], ["b"]))
        y = [d * r for d, r in zip(x, rep)]
    else:  # DepthToSpace on [N, C*4, H, W]
        x = [rng.choice([1, 2]), 4 * rng.choice([1, 2, 4]), rng.choice([2, 3, 4]), rng.choice([4, 5, 8])]
        ins[0] = ("x", x)
        nodes.append(helper.make_node("DepthToSpace", ["a"], ["b"], blocksize=2, mode=rng.choice(["DCR", "CRD"])))
        y = [x[0], x[1] // 4, x[2] * 2, x[3] * 2]
    pre = [helper.make_node("Neg", ["x"], ["a"])] if wrap else [helper.make_node("Identity", ["x"], ["a"])]
    post = [helper.make_node("Neg", ["b"], ["y"])] if wrap else [helper.make_node("Identity", ["b"], ["y"])]
    outs = [helper.make_tensor_value_info("y", et, y)]
    if kind == "split":
        outs.append(helper.make_tensor_value_info("b2", et, None))
    g = helper.make_graph(pre + nodes + post, f"copies_{i}_{kind}",
                          [helper.make_tensor_value_info(n, et, s) for n, s in ins], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, kind


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261127)
    for i in range(n):
        m, kind = model(rng, i)
        save(m, os.path.join(out, f"c{i:03d}_{kind}.onnx"))


if __name__ == "__main__":
    main()
