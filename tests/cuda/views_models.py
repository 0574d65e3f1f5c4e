#!/usr/bin/env python3
"""The model tests/cuda/stride_views.sh runs with --cuda-stride-views on and
off (written with onnx.helper, random weights): views.onnx, each pattern its
own output, inputs DIR/data_views/*.npy (3 samples, NaN and +-inf among
sample 1's values):
  a: MatMul(x, Transpose(k)) over [batch, 2, 5, 4] x [batch, 2, 6, 4] with
     the last two axes swapped (folds: cuBLASLt's transpose flag);
  b: a Slice along a batch axis (axis 1, 1:5 of 6) feeding a MatMul with a
     packed [batch, 4, 8, 3] (folds at micro-batch 1: its batch dims walk
     as one; at 2 they do not: a copy);
  c: a Gather of one index (2) along axis 1 feeding a MatMul with a weight
     (folds at micro-batch 1: one product of the gathered rows), and the
     same with an index tensor of shape [1] (the dim kept);
  d: a Split along axis 1 into 2 and 4: the second part feeds a MatMul
     (folds), the first a Relu (a copy);
  e: the torch 1.13 MultiheadAttention export ViT-B/16 has ([S, B, 3E] after
     a Transpose, q, k, v as Slices of the last axis, Reshape [S, -1, D],
     Transposes into heads, q divided by sqrt(D), MatMul, Softmax, MatMul,
     the heads back by a Transpose, Reshape, Transpose, a Gemm-like
     MatMul): S = 9, E = 12, 3 heads of 4;
  f: a Transpose read by a MatMul and by a Relu (no fold: a copy);
  g: a Transpose that is a graph output and feeds a MatMul (no fold);
  h: MatMul -> Transpose(0, 2, 1, 3) a graph output (the product writes the
     Transpose's output, in the output message), and MatMul -> Transpose
     with one row (M = 1);
  i: a Gemm (transB) over the Gather of one index along axis 1 of a
     [batch, 3, 6] input (ViT's class token into its head).
usage: views_models.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(5455)
n = helper.make_node


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def v(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def w(*shape, s=0.5):
    return (rng.standard_normal(shape) * s).astype(np.float32)


S, E, H, D = 9, 12, 3, 4
inits = [c("wc", w(5, 4)), c("i2", np.array(2, np.int64)), c("i2v", np.array([2], np.int64)),
         c("s0", np.array([1], np.int64)), c("e0", np.array([5], np.int64)), c("ax1", np.array([1], np.int64)),
         c("wd", w(4, 3)), c("split", np.array([2, 4], np.int64)),
         c("q0", np.array([0], np.int64)), c("q1", np.array([E], np.int64)), c("q2", np.array([2 * E], np.int64)),
         c("q3", np.array([3 * E], np.int64)), c("ax2", np.array([2], np.int64)),
         c("heads", np.array([S, -1, D], np.int64)), c("back", np.array([S, -1, E], np.int64)),
         c("sqrtd", np.array(np.sqrt(D), np.float32)), c("wo", w(E, E)), c("wf", w(7, 3)), c("wg", w(4, 2)),
         c("wh", w(2, 6, 6)), c("wh1", w(1, 6, 5)), c("wi", w(4, 6)), c("bi", w(4)), c("i0", np.array(0, np.int64))]
nodes = [
    n("Transpose", ["ka"], ["kaT"], name="/a/Transpose", perm=[0, 1, 3, 2]),
    n("MatMul", ["xa", "kaT"], ["ya"], name="/a/MatMul"),
    n("Slice", ["xb", "s0", "e0", "ax1"], ["xbs"], name="/b/Slice"),
    n("MatMul", ["xbs", "wb"], ["yb"], name="/b/MatMul"),
    n("Gather", ["xc", "i2"], ["xcg"], name="/c/Gather", axis=1),
    n("MatMul", ["xcg", "wc"], ["yc"], name="/c/MatMul"),
    n("Gather", ["xc", "i2v"], ["xcg1"], name="/c/Gather_1", axis=1),
    n("MatMul", ["xcg1", "wc"], ["yc1"], name="/c/MatMul_1"),
    n("Split", ["xd", "split"], ["xd1", "xd2"], name="/d/Split", axis=1),
    n("Relu", ["xd1"], ["yd1"], name="/d/Relu"),
    n("MatMul", ["xd2", "wd"], ["yd2"], name="/d/MatMul"),
    # e: torch 1.13's MultiheadAttention as ViT-B/16 exports it
    n("Transpose", ["xe"], ["xt"], name="/e/Transpose", perm=[1, 0, 2]),
    n("Slice", ["xt", "q0", "q1", "ax2"], ["qs"], name="/e/Slice"),
    n("Slice", ["xt", "q1", "q2", "ax2"], ["ks"], name="/e/Slice_1"),
    n("Slice", ["xt", "q2", "q3", "ax2"], ["vs"], name="/e/Slice_2"),
    n("Reshape", ["qs", "heads"], ["qr"], name="/e/Reshape"),
    n("Transpose", ["qr"], ["qh"], name="/e/Transpose_1", perm=[1, 0, 2]),
    n("Reshape", ["ks", "heads"], ["kr"], name="/e/Reshape_1"),
    n("Reshape", ["vs", "heads"], ["vr"], name="/e/Reshape_2"),
    n("Transpose", ["vr"], ["vh"], name="/e/Transpose_2", perm=[1, 0, 2]),
    n("Div", ["qh", "sqrtd"], ["qd"], name="/e/Div"),
    n("Transpose", ["kr"], ["kT"], name="/e/Transpose_3", perm=[1, 2, 0]),
    n("MatMul", ["qd", "kT"], ["sc"], name="/e/MatMul_1"),
    n("Softmax", ["sc"], ["pr"], name="/e/Softmax", axis=-1),
    n("MatMul", ["pr", "vh"], ["ctx"], name="/e/MatMul_2"),
    n("Transpose", ["ctx"], ["ct"], name="/e/Transpose_4", perm=[1, 0, 2]),
    n("Reshape", ["ct", "back"], ["c2"], name="/e/Reshape_3"),
    n("Transpose", ["c2"], ["c3"], name="/e/Transpose_5", perm=[1, 0, 2]),
    n("MatMul", ["c3", "wo"], ["ye"], name="/e/MatMul_3"),
    # f, g: views that must stay copies
    n("Transpose", ["xf"], ["xfT"], name="/f/Transpose", perm=[0, 2, 1]),
    n("MatMul", ["xfT", "wf"], ["yf"], name="/f/MatMul"),
    n("Relu", ["xfT"], ["yf2"], name="/f/Relu"),
    n("Transpose", ["xg"], ["yg1"], name="/g/Transpose", perm=[0, 2, 1]),
    n("MatMul", ["yg1", "wg"], ["yg"], name="/g/MatMul"),
    # h: a product writing a Transpose's output
    n("MatMul", ["xh", "wh"], ["hm"], name="/h/MatMul"),
    n("Transpose", ["hm"], ["yh"], name="/h/Transpose", perm=[0, 2, 1, 3]),
    n("MatMul", ["xh1", "wh1"], ["hm1"], name="/h/MatMul_1"),
    n("Transpose", ["hm1"], ["yh1"], name="/h/Transpose_1", perm=[0, 2, 1]),
    # i: a Gemm over a Gather of one index
    n("Gather", ["xi", "i0"], ["xig"], name="/i/Gather", axis=1),
    n("Gemm", ["xig", "wi", "bi"], ["yi"], name="/i/Gemm", transB=1),
]
ins = {"xa": ["batch", 2, 5, 4], "ka": ["batch", 2, 6, 4], "xb": ["batch", 6, 8, 8], "wb": ["batch", 4, 8, 3],
       "xc": ["batch", 3, 7, 5], "xd": ["batch", 6, 4, 4], "xe": ["batch", S, 3 * E], "xf": ["batch", 7, 5],
       "xg": ["batch", 4, 3], "xh": ["batch", 2, 5, 6], "xh1": ["batch", 1, 6], "xi": ["batch", 3, 6]}
outs = [v("ya", ["batch", 2, 5, 6]), v("yb", ["batch", 4, 8, 3]), v("yc", ["batch", 7, 4]),
        v("yc1", ["batch", 1, 7, 4]), v("yd1", ["batch", 2, 4, 4]), v("yd2", ["batch", 4, 4, 3]),
        v("ye", ["batch", S, E]), v("yf", ["batch", 5, 3]), v("yf2", ["batch", 5, 7]), v("yg1", ["batch", 3, 4]),
        v("yg", ["batch", 3, 2]), v("yh", ["batch", 5, 2, 6]), v("yh1", ["batch", 5, 1]), v("yi", ["batch", 4])]
g = helper.make_graph(nodes, "views", [v(k, s) for k, s in ins.items()], outs, initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
os.makedirs(os.path.join(d, "data_views"), exist_ok=True)
onnx.save(m, os.path.join(d, "views.onnx"))
for k, s in ins.items():
    x = rng.standard_normal([3] + s[1:]).astype(np.float32)
    if k in ("xa", "xe", "xc"):
        x.reshape(3, -1)[1, 3] = np.nan
        x.reshape(3, -1)[1, 7] = np.inf
        x.reshape(3, -1)[1, 11] = -np.inf
    np.save(os.path.join(d, "data_views", k + ".npy"), x)
