#!/usr/bin/env python3
"""The models tests/cuda/overlap.sh runs with the pipeline's ends overlapped
(--cuda-overlap on) and not: written with onnx.helper, random weights.

  resnet_like.onnx  conv stem, two residual blocks (Conv, Relu, Conv, Add,
                    Relu), a strided Conv, GlobalAveragePool, Flatten, Gemm:
                    x [batch, 3, 24, 24] -> y [batch, 10]
  gather.onnx       Gather of a constant table by an int64 input: idx
                    [batch, 4] -> y [batch, 4, 6]; an index past the table
                    fails the stage ("index out of range")
and their inputs: resnet_like/input.npy (20 samples), gather_ok/idx.npy and
gather_bad/idx.npy (sample 13 holds index 99).
usage: overlap_models.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(54)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def save(nodes, inits, ins, outs, name):
    g = helper.make_graph(nodes, name, ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))


n = helper.make_node
nodes, inits = [], [w("stem.w", 8, 3, 3, 3), w("stem.b", 8)]
nodes += [n("Conv", ["x", "stem.w", "stem.b"], ["s"], name="/stem/Conv", pads=[1, 1, 1, 1]),
          n("Relu", ["s"], ["h0"], name="/stem/Relu")]
for b in range(2):
    h, p = f"h{b}", f"/layer{b}"
    inits += [w(f"b{b}.w1", 8, 8, 3, 3), w(f"b{b}.b1", 8), w(f"b{b}.w2", 8, 8, 3, 3), w(f"b{b}.b2", 8)]
    nodes += [n("Conv", [h, f"b{b}.w1", f"b{b}.b1"], [f"c{b}a"], name=f"{p}/conv1/Conv", pads=[1, 1, 1, 1]),
              n("Relu", [f"c{b}a"], [f"r{b}a"], name=f"{p}/relu1/Relu"),
              n("Conv", [f"r{b}a", f"b{b}.w2", f"b{b}.b2"], [f"c{b}b"], name=f"{p}/conv2/Conv", pads=[1, 1, 1, 1]),
              n("Add", [f"c{b}b", h], [f"a{b}"], name=f"{p}/Add"),
              n("Relu", [f"a{b}"], [f"h{b + 1}"], name=f"{p}/relu2/Relu")]
inits += [w("down.w", 16, 8, 3, 3), w("down.b", 16), w("fc.w", 10, 16), w("fc.b", 10)]
nodes += [n("Conv", ["h2", "down.w", "down.b"], ["d"], name="/down/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
          n("Relu", ["d"], ["dr"], name="/down/Relu"),
          n("GlobalAveragePool", ["dr"], ["gp"], name="/GlobalAveragePool"),
          n("Flatten", ["gp"], ["f"], name="/Flatten", axis=1),
          n("Gemm", ["f", "fc.w", "fc.b"], ["y"], name="/fc/Gemm", transB=1)]
save(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 24, 24])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], "resnet_like")
os.makedirs(os.path.join(out, "resnet_like"), exist_ok=True)
np.save(os.path.join(out, "resnet_like", "x.npy"), rng.standard_normal((20, 3, 24, 24)).astype(np.float32))

save([n("Gather", ["table", "idx"], ["y"], name="/Gather", axis=0)], [w("table", 10, 6)],
     [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", 4])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6])], "gather")
idx = rng.integers(0, 10, (16, 4)).astype(np.int64)
for d, bad in (("gather_ok", False), ("gather_bad", True)):
    os.makedirs(os.path.join(out, d), exist_ok=True)
    v = idx.copy()
    if bad:
        v[13, 2] = 99
    np.save(os.path.join(out, d, "idx.npy"), v)
