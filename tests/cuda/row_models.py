#!/usr/bin/env python3
"""The model tests/cuda/row_kernels.sh runs with --cuda-row-kernels on and
off: a ViT block's row ops, written with onnx.helper, random weights.
  x [batch, 197, 768] -> LayerNormalization (scale, bias, mean and
      inv_std_dev outputs) -> y_ln, mean, inv; LogSoftmax of y_ln -> y_lsm;
      the heads' scores (x as [batch, 197, 12, 64], MatMul of the query and
      key layouts) [batch, 12, 197, 197] -> Softmax -> y_sm
  z [batch, 4, 1000] -> LayerNormalization without bias -> y_ln2
  a pre-norm layer's residual stream: r1 = x + y_lsm -> LayerNormalization
      -> y_ln3; r2 = r1 + y_ln3 -> LayerNormalization -> y_ln4 (r1 has two
      readers, so the fused step writes it; r2 only the LayerNorm's)
Inputs DIR/data/x.npy and z.npy (3 samples; a NaN in a row of sample 1).
usage: row_models.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(54)
n = helper.make_node


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def v(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


inits = [c("g", (rng.random(768) + 0.5).astype(np.float32)), c("b", (rng.random(768) - 0.5).astype(np.float32)),
         c("g2", (rng.random(1000) + 0.5).astype(np.float32)), c("heads", np.array([0, 197, 12, 64], np.int64))]
nodes = [
    n("LayerNormalization", ["x", "g", "b"], ["y_ln", "mean", "inv"], name="/ln/LayerNormalization", axis=-1,
      epsilon=1e-6),
    n("LogSoftmax", ["y_ln"], ["y_lsm"], name="/lsm/LogSoftmax", axis=-1),
    n("Reshape", ["x", "heads"], ["h"], name="/heads/Reshape"),
    n("Transpose", ["h"], ["q"], name="/heads/Transpose", perm=[0, 2, 1, 3]),
    n("Transpose", ["h"], ["kt"], name="/heads/TransposeK", perm=[0, 2, 3, 1]),
    n("MatMul", ["q", "kt"], ["s"], name="/attn/MatMul"),
    n("Softmax", ["s"], ["y_sm"], name="/attn/Softmax", axis=-1),
    n("LayerNormalization", ["z", "g2"], ["y_ln2"], name="/ln2/LayerNormalization", axis=-1),
    n("Add", ["x", "y_lsm"], ["r1"], name="/res1/Add"),
    n("LayerNormalization", ["r1", "g", "b"], ["y_ln3"], name="/ln3/LayerNormalization", axis=-1, epsilon=1e-6),
    n("Add", ["r1", "y_ln3"], ["r2"], name="/res2/Add"),
    n("LayerNormalization", ["r2", "g", "b"], ["y_ln4"], name="/ln4/LayerNormalization", axis=-1, epsilon=1e-6),
]
outs = [v("y_ln", ["batch", 197, 768]), v("mean", ["batch", 197, 1]), v("inv", ["batch", 197, 1]),
        v("y_lsm", ["batch", 197, 768]), v("y_sm", ["batch", 12, 197, 197]), v("y_ln2", ["batch", 4, 1000]),
        v("y_ln4", ["batch", 197, 768])]
g = helper.make_graph(nodes, "rows", [v("x", ["batch", 197, 768]), v("z", ["batch", 4, 1000])], outs,
                      initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
os.makedirs(os.path.join(d, "data"), exist_ok=True)
onnx.save(m, os.path.join(d, "rows.onnx"))
x = (rng.standard_normal((3, 197, 768)) * 2).astype(np.float32)
x[1, 5, 100] = np.nan
np.save(os.path.join(d, "data", "x.npy"), x)
np.save(os.path.join(d, "data", "z.npy"), (rng.standard_normal((3, 4, 1000)) * 3 + 1).astype(np.float32))
