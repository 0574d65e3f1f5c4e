#!/usr/bin/env python3
"""The models and checks of tests/cuda/half_storage.sh (ppcc --precision
fp16|bf16 without --train: half storage for inference, docs/usage.md "Half
precision").

  half_models.py models DIR
      DIR/cnn.onnx: a small CNN written with onnx.helper, random weights:
      Conv 3->16 (3x3, pad 1) + BatchNormalization + Relu, MaxPool 2, a
      residual block (Conv 16->16 + BN + Relu, Conv 16->16 + BN, Add, Relu),
      GlobalAveragePool, Flatten, Gemm 16->32 (transB, bias), Relu, Gemm
      32->10; x [batch, 3, 16, 16], inputs DIR/data_cnn/x.npy (4 samples).
      DIR/mix.onnx: the inference ops a half plan stores in half since
      2026-12-06 (passes/precision.c's half_slots), each where a real model
      has it: a reflecting Pad before a Conv, a Concat then an unfolded
      BatchNormalization (DenseNet's), squeeze-and-excitation by ReduceMean,
      spatial attention by ReduceMax over the channels, a constant Pad (value
      0.25) before a Conv, InstanceNormalization, ConvTranspose (stride
      2, bias) normalized over its channels by ReduceL2, beside a linear
      Resize (U-Net's up paths), attention over the pixels by two Einsums
      (MaxViT's), LpPool (p 2), GlobalMaxPool, Gemm; x [batch, 3, 16, 16],
      DIR/data_mix/x.npy (4 samples).
      (tests/cuda/fattn_models.py writes the ViT-like blocks, vit.onnx.)
  half_models.py ort MODEL DATA OUT
      onnxruntime's f32 outputs of MODEL over DATA/*.npy into OUT/NAME.npy
      (the whole batch at once): the independent reference.
  half_models.py error GOT REF
      prints max |got - ref| over max |ref| (over the finite values of
      ref); exits 1 where a NaN of one is not a NaN of the other."""
import os
import sys

import numpy as np


def models(d):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5455)
    inits, nodes = [], []

    def c(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def conv_bn(x, cin, cout, name, relu=True):
        w = c(name + ".w", rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (9 * cin)))
        b = c(name + ".b", rng.standard_normal(cout) * 0.1)
        nodes.append(helper.make_node("Conv", [x, w, b], [name + "_c"], name=f"/{name}/Conv", pads=[1, 1, 1, 1]))
        bn = [c(name + s, v) for s, v in ((".g", 1 + 0.1 * rng.standard_normal(cout)),
                                          (".beta", 0.1 * rng.standard_normal(cout)),
                                          (".mean", 0.1 * rng.standard_normal(cout)),
                                          (".var", 0.5 + rng.random(cout)))]
        nodes.append(helper.make_node("BatchNormalization", [name + "_c"] + bn, [name + "_bn"],
                                      name=f"/{name}/BatchNormalization", epsilon=1e-5))
        if not relu:
            return name + "_bn"
        nodes.append(helper.make_node("Relu", [name + "_bn"], [name + "_r"], name=f"/{name}/Relu"))
        return name + "_r"

    h = conv_bn("x", 3, 16, "stem")
    nodes.append(helper.make_node("MaxPool", [h], ["pool"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]))
    a = conv_bn("pool", 16, 16, "block.conv1")
    b = conv_bn(a, 16, 16, "block.conv2", relu=False)
    nodes += [helper.make_node("Add", [b, "pool"], ["res"], name="/block/Add"),
              helper.make_node("Relu", ["res"], ["res_r"], name="/block/Relu"),
              helper.make_node("GlobalAveragePool", ["res_r"], ["gap"], name="/gap/GlobalAveragePool"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="/Flatten"),
              helper.make_node("Gemm", ["flat", c("fc1.w", rng.standard_normal((32, 16)) * 0.3),
                                        c("fc1.b", rng.standard_normal(32) * 0.1)], ["fc1"], name="/fc1/Gemm",
                               transB=1),
              helper.make_node("Relu", ["fc1"], ["fc1_r"], name="/fc1/Relu"),
              helper.make_node("Gemm", ["fc1_r", c("fc2.w", rng.standard_normal((10, 32)) * 0.3),
                                        c("fc2.b", rng.standard_normal(10) * 0.1)], ["y"], name="/fc2/Gemm",
                               transB=1)]
    write_model(d, "cnn", nodes, inits, [3, 16, 16], [10], rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    mix(d, rng)


def mix(d, rng):
    """DIR/mix.onnx (the module's doc)"""
    from onnx import helper, numpy_helper

    inits, nodes = [], []

    def c(name, a, dt=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(a, dt), name))
        return name

    def n(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=f"/{out}/{op}", **kw))
        return out

    def conv(x, cin, cout, k, name, op="Conv", **kw):
        shape = (cin, cout, k, k) if op == "ConvTranspose" else (cout, cin, k, k)
        w = c(name + ".w", rng.standard_normal(shape) * np.sqrt(2.0 / (k * k * cin)))
        return n(op, [x, w, c(name + ".b", rng.standard_normal(cout) * 0.1)], name, **kw)

    p1 = n("Pad", ["x", c("pads1", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)], "pad1", mode="reflect")
    r1 = n("Relu", [conv(p1, 3, 8, 3, "conv1")], "relu1")
    cat = n("Concat", [r1, conv("x", 3, 8, 1, "conv1x1")], "cat", axis=1)
    bn = [c("bn" + s, v) for s, v in ((".g", 1 + 0.1 * rng.standard_normal(16)), (".beta", 0.1 * rng.standard_normal(16)),
                                      (".mean", 0.1 * rng.standard_normal(16)), (".var", 0.5 + rng.random(16)))]
    r2 = n("Relu", [n("BatchNormalization", [cat] + bn, "bn", epsilon=1e-5)], "relu2")
    se = n("Sigmoid", [conv(n("ReduceMean", [r2], "se_mean", axes=[2, 3], keepdims=1), 16, 16, 1, "se_fc")], "se_gate")
    s1 = n("Mul", [r2, se], "se_mul")
    sp = n("Sigmoid", [n("ReduceMax", [s1], "sp_max", axes=[1], keepdims=1)], "sp_gate")
    pool = n("MaxPool", [n("Mul", [s1, sp], "sp_mul")], "pool", kernel_shape=[2, 2], strides=[2, 2])
    p2 = n("Pad", [pool, c("pads2", [0, 0, 1, 1, 0, 0, 1, 1], np.int64), c("pad_value", 0.25)], "pad2", mode="constant")
    inorm = n("InstanceNormalization", [conv(p2, 16, 16, 3, "conv2"), c("in.g", 1 + 0.1 * rng.standard_normal(16)),
                                        c("in.b", 0.1 * rng.standard_normal(16))], "inorm", epsilon=1e-5)
    up = conv(inorm, 16, 8, 2, "up", op="ConvTranspose", strides=[2, 2])
    l2 = n("Clip", [n("ReduceL2", [up], "up_l2", axes=[1], keepdims=1), c("l2_min", 1e-6)], "up_l2c")
    up = n("Div", [up, l2], "up_normalized")  # F.normalize over the channels
    rs = n("Resize", [pool, "", c("scales", [1, 1, 2, 2])], "resize", mode="linear",
           coordinate_transformation_mode="half_pixel")
    s2 = n("Relu", [n("Add", [up, conv(rs, 16, 8, 1, "rs_fc")], "up_add")], "up_relu")
    t = n("Reshape", [s2, c("flat_hw", [0, 8, 256], np.int64)], "tokens")
    sc = n("Mul", [n("Einsum", [t, t], "scores", equation="bci,bcj->bij"), c("scale", 8 ** -0.5)], "scaled")
    att = n("Einsum", [t, n("Softmax", [sc], "attn", axis=-1)], "att", equation="bcj,bij->bci")
    s3 = n("Add", [s2, n("Reshape", [att, c("back_hw", [0, 8, 16, 16], np.int64)], "att_img")], "att_add")
    lp = n("LpPool", [s3], "lp", kernel_shape=[2, 2], strides=[2, 2], p=2)
    flat = n("Flatten", [n("GlobalMaxPool", [lp], "gmp")], "flat")
    n("Gemm", [flat, c("fc.w", rng.standard_normal((10, 8)) * 0.3), c("fc.b", rng.standard_normal(10) * 0.1)], "y",
      transB=1)
    write_model(d, "mix", nodes, inits, [3, 16, 16], [10], rng.standard_normal((4, 3, 16, 16)).astype(np.float32))


def write_model(d, name, nodes, inits, x_dims, y_dims, x):
    """DIR/NAME.onnx of a graph from input x [batch, *x_dims] to y [batch, *y_dims] (opset 17, checked), and the
    samples x as DIR/data_NAME/x.npy (the builders of this file and nhwc_models.py)."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"] + x_dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"] + y_dims)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name + ".onnx"))
    os.makedirs(os.path.join(d, "data_" + name), exist_ok=True)
    np.save(os.path.join(d, "data_" + name, "x.npy"), x)


def ort(model, data, out):
    import onnxruntime as rt

    s = rt.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(data, i.name + ".npy")) for i in s.get_inputs()}
    os.makedirs(out, exist_ok=True)
    for o, v in zip(s.get_outputs(), s.run(None, feeds)):
        np.save(os.path.join(out, o.name + ".npy"), v)


def error(got, ref):
    g, r = np.load(got).astype(np.float64), np.load(ref).astype(np.float64)
    if g.shape != r.shape or not np.array_equal(np.isnan(g), np.isnan(r)):
        print(f"NaN where the other has none (or shapes {g.shape}, {r.shape})")
        sys.exit(1)
    fin = np.isfinite(r)
    print(f"{np.max(np.abs(g[fin] - r[fin])) / np.max(np.abs(r[fin])):.3e}")


if __name__ == "__main__":
    if sys.argv[1] == "models":
        models(sys.argv[2])
    elif sys.argv[1] == "ort":
        ort(*sys.argv[2:5])
    elif sys.argv[1] == "error":
        error(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
