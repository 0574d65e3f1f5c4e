#!/usr/bin/env python3
"""The model tests/cuda/wide_elementwise.sh runs with --cuda-wide-elementwise
on and off: f32 elementwise nodes over x [batch, 8, 16], written with
onnx.helper, some in the shapes the four-a-thread kernel takes (a whole
operand, a bias over the last axis, a scalar, the same operand twice, Sum's
in-place chain) and some it must leave (a last axis of 6, a per-row scalar
[batch, 8, 1] over a last axis of 6, Where, a Cast). Inputs DIR/data/x.npy
and w.npy (3 samples; NaN, infinities and signed zeros among them).
Prints how many of its elementwise nodes the kernel should take (each one
step): wide_elementwise.sh compares it with --cuda-explain's count.
Also DIR/wide_ew_f16.onnx: f16 nodes over [batch, 8, 16] that the kernel
takes eight a thread and one over [batch, 8, 6] it leaves, inputs in
DIR/data16 (printed second: how many it takes).
usage: wide_ew_models.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(54)
n = helper.make_node


def c(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def v(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


inits = [c("bias", rng.standard_normal(16)), c("two", 2.0), c("slope", rng.random(16)),
         c("bias6", rng.standard_normal(6)), c("half", 0.5)]
wide = [  # nodes over [batch, 8, 16] (or broadcasting into it): the kernel takes them
    n("Add", ["x", "bias"], ["a"], name="add_bias"),
    n("Mul", ["a", "x"], ["b"], name="mul_whole"),
    n("Relu", ["b"], ["r"], name="relu"),
    n("Sigmoid", ["a"], ["s"], name="sigmoid"),
    n("Div", ["s", "two"], ["dv"], name="div_scalar"),
    n("PRelu", ["x", "slope"], ["pr"], name="prelu"),
    n("Max", ["pr", "dv"], ["mx"], name="max"),
    n("Pow", ["s", "two"], ["pw"], name="pow"),
    n("LeakyRelu", ["x"], ["lr"], name="leaky", alpha=0.2),
    n("Tanh", ["lr"], ["th"], name="tanh"),
    n("Sub", ["th", "th"], ["zz"], name="sub_same"),
    n("Exp", ["x"], ["ex"], name="exp"),
    n("Sum", ["r", "mx", "pw"], ["sm"], name="sum3"),  # two steps: r + mx, then + pw into the output
    n("Mul", ["x", "rowscale"], ["rs"], name="mul_row_scalar_wide"),
]
n_wide = len(wide) + 1  # Sum of three is two steps
narrow = [  # over [batch, 8, 6] or types the kernel leaves to the element kernel
    n("Add", ["w", "bias6"], ["w1"], name="add_bias6"),
    n("Mul", ["w1", "wscale"], ["w2"], name="mul_row_scalar"),
    n("Greater", ["w2", "half"], ["g"], name="greater"),
    n("Where", ["g", "w2", "w1"], ["w3"], name="where"),
    n("Cast", ["w3"], ["w4"], name="cast", to=TensorProto.FLOAT16),
]
pre = [n("ReduceMax", ["x"], ["rowscale"], name="rowscale", axes=[2], keepdims=1),
       n("ReduceMax", ["w"], ["wscale"], name="wscale", axes=[2], keepdims=1)]
outs = [v(o, ["batch", 8, 16]) for o in ["b", "zz", "ex", "sm", "rs"]] + \
       [v("w3", ["batch", 8, 6]), v("w4", ["batch", 8, 6], TensorProto.FLOAT16)]
g = helper.make_graph(pre + wide + narrow, "wide_ew", [v("x", ["batch", 8, 16]), v("w", ["batch", 8, 6])], outs,
                      initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, os.path.join(d, "wide_ew.onnx"))
os.makedirs(os.path.join(d, "data"), exist_ok=True)
x = rng.standard_normal((3, 8, 16)).astype(np.float32)
x[1, 2, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
w = rng.standard_normal((3, 8, 6)).astype(np.float32)
w[2, 1, :3] = [np.nan, np.inf, -0.0]
np.save(os.path.join(d, "data", "x.npy"), x)
np.save(os.path.join(d, "data", "w.npy"), w)

# f16 throughout (a model stored in half, as ppcc --precision fp16 makes one): eight elements a thread
h16 = [numpy_helper.from_array(rng.standard_normal(16).astype(np.float16), "bias_h"),
       numpy_helper.from_array(np.asarray(2.0, np.float16), "two_h"),
       numpy_helper.from_array(rng.standard_normal(6).astype(np.float16), "bias6_h")]
wide_h = [
    n("Add", ["xh", "bias_h"], ["ah"], name="add_bias_h"),
    n("Mul", ["ah", "xh"], ["bh"], name="mul_whole_h"),
    n("Relu", ["bh"], ["rh"], name="relu_h"),
    n("Sigmoid", ["ah"], ["sh"], name="sigmoid_h"),
    n("Div", ["sh", "two_h"], ["dh"], name="div_scalar_h"),
    n("Tanh", ["rh"], ["th"], name="tanh_h"),
    n("Sub", ["th", "dh"], ["zh"], name="sub_h"),
]
narrow_h = [n("Add", ["wh", "bias6_h"], ["w1h"], name="add_bias6_h")]
F16 = TensorProto.FLOAT16
gh = helper.make_graph(wide_h + narrow_h, "wide_ew_f16", [v("xh", ["batch", 8, 16], F16), v("wh", ["batch", 8, 6], F16)],
                       [v(o, ["batch", 8, 16], F16) for o in ["bh", "zh"]] + [v("w1h", ["batch", 8, 6], F16)],
                       initializer=h16)
mh = helper.make_model(gh, opset_imports=[helper.make_opsetid("", 14)])
mh.ir_version = 8
onnx.checker.check_model(mh)
onnx.save(mh, os.path.join(d, "wide_ew_f16.onnx"))
os.makedirs(os.path.join(d, "data16"), exist_ok=True)
xh = (4 * rng.standard_normal((3, 8, 16))).astype(np.float16)  # Mul's products past 65504 overflow to inf
xh[1, 2, :6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 300.0]
np.save(os.path.join(d, "data16", "xh.npy"), xh)
np.save(os.path.join(d, "data16", "wh.npy"), rng.standard_normal((3, 8, 6)).astype(np.float16))
print(n_wide)
print(len(wide_h))
