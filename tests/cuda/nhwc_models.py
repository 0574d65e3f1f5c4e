#!/usr/bin/env python3
"""The models of tests/cuda/nhwc.sh (pprt --cuda-layout nhwc: channels-last
convolutions, docs/cuda.md "Layouts").

  nhwc_models.py models DIR
      DIR/se.onnx, written with onnx.helper, random weights: Conv 3->16
      (3x3, stride 2) + Relu, a Pad at the end of H and W (TensorFlow's
      "same"), AveragePool 3x3 (stride 1, pad 1, pads not
      counted), a depthwise Conv 16->16 (groups 16) + Clip(0, 6), a
      squeeze-and-excitation gate (GlobalAveragePool, Conv 1x1 16->4 + SiLU,
      Conv 1x1 4->16, Sigmoid, Mul broadcast over H and W), a residual Add, a
      BatchNormalization after it (no convolution to fold it into), a Concat
      with the AveragePool's output along the channels, a Split of it into 8
      and 24 channels concatenated back the other way round,
      MaxPool 2 (stride 2), a ConvTranspose 32->16 (2x2, stride 2), a
      linear Resize by 1.5, a reflecting Pad (H by 1 and 1, W by 2 and 0), a Conv
      16->24 (stride 2) with its bias, a LayerNormalization
      over its channels between two Transposes (ConvNeXt's) added back to
      it, a per-channel
      Mul by a [24, 1, 1] constant, GlobalMaxPool, Flatten, Gemm 24->10;
      x [batch, 3, 20, 20], inputs DIR/data_se/x.npy (2 samples; one NaN in
      sample 1).
      DIR/resnet18.onnx: torchvision's ResNet-18 (10 classes, seeded random
      weights, random BatchNorm statistics), x [batch, 3, 64, 64], inputs
      DIR/data_resnet18/x.npy (2 samples).
      DIR/pos.onnx (pos_model): operands of fewer dims beside a channels-last
      tensor, one of them ([8, 6, 6]) not the same bytes channels-last.
  The references are half_models.py's (ort, error)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from half_models import write_model  # noqa: E402


def se_model(d):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(2254)
    inits, nodes = [], []

    def c(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def conv(x, cin, cout, k, name, stride=1, groups=1, bias=True):
        w = c(name + ".w", rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / (k * k * cin / groups)))
        ins = [x, w] + ([c(name + ".b", rng.standard_normal(cout) * 0.1)] if bias else [])
        nodes.append(helper.make_node("Conv", ins, [name], name=f"/{name}/Conv", pads=[k // 2] * 4,
                                      strides=[stride, stride], group=groups))
        return name

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=f"/{out}/{op}", **kw))
        return out

    h = node("Relu", [conv("x", 3, 16, 3, "stem", stride=2)], "stem_r")
    inits.append(numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64), "tf_pads"))
    h = node("Pad", [h, "tf_pads"], "tf_pad", mode="constant")   # TensorFlow's "same": one more at the end
    h = node("AveragePool", [h], "avg", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)
    h = node("Clip", [conv(h, 16, 16, 3, "dw", groups=16), c("lo", 0.0), c("hi", 6.0)], "dw_r")
    g = node("GlobalAveragePool", [h], "se_gap")
    g = conv(g, 16, 4, 1, "se1")
    g = node("Mul", [g, node("Sigmoid", [g], "se1_s")], "se1_r")   # SiLU (EfficientNet's gate): pp.SiLU in half
    g = node("Sigmoid", [conv(g, 4, 16, 1, "se2")], "se_s")
    h = node("Mul", [h, g], "se_mul")
    h = node("Add", [h, "avg"], "res")
    bn = [c("bn" + s, v) for s, v in ((".g", 1 + 0.1 * rng.standard_normal(16)), (".b", 0.1 * rng.standard_normal(16)),
                                      (".m", 0.1 * rng.standard_normal(16)), (".v", 0.5 + rng.random(16)))]
    h = node("BatchNormalization", [h] + bn, "bn", epsilon=1e-5)
    h = node("Concat", [h, "avg"], "cat", axis=1)
    inits.append(numpy_helper.from_array(np.array([8, 24], np.int64), "parts"))
    nodes.append(helper.make_node("Split", [h, "parts"], ["s8", "s24"], name="/split/Split", axis=1))
    h = node("Concat", ["s24", "s8"], "shuffled", axis=1)   # the channels' halves swapped (a shuffle)
    h = node("MaxPool", [h], "pool", kernel_shape=[2, 2], strides=[2, 2])
    up = [h, c("up.w", rng.standard_normal((32, 16, 2, 2)) * 0.25), c("up.b", 0.1 * rng.standard_normal(16))]
    h = node("ConvTranspose", up, "up", strides=[2, 2])   # [N, 16, 10, 10]
    inits.append(numpy_helper.from_array(np.array([1, 1, 1.5, 1.5], np.float32), "rs_scales"))
    h = node("Resize", [h, "", "rs_scales"], "rs", mode="linear")   # [N, 16, 15, 15]
    inits.append(numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 1, 0], np.int64), "refl_pads"))
    h = node("Pad", [h, "refl_pads"], "refl_pad", mode="reflect")
    hc = conv(h, 16, 24, 3, "head", stride=2)
    t = node("Transpose", [hc], "to_nhwc", perm=[0, 2, 3, 1])   # ConvNeXt's LayerNorm over the channels
    t = node("LayerNormalization", [t, c("ln.g", 1 + 0.1 * rng.standard_normal(24)), c("ln.b", 0.1 * rng.standard_normal(24))],
             "ln", axis=-1, epsilon=1e-6)
    t = node("Transpose", [t], "to_nchw", perm=[0, 3, 1, 2])
    h = node("Add", [hc, t], "head_res")
    h = node("Mul", [h, c("scale", 1 + 0.2 * rng.standard_normal((24, 1, 1)))], "scaled")
    h = node("GlobalMaxPool", [h], "gmp")
    h = node("Flatten", [h], "flat")
    node("Gemm", [h, c("fc.w", rng.standard_normal((10, 24)) * 0.3), c("fc.b", rng.standard_normal(10) * 0.1)], "y",
         transB=1)
    x = rng.standard_normal((2, 3, 20, 20)).astype(np.float32)
    x[1, 2, 5, 7] = np.nan
    write_model(d, "se", nodes, inits, [3, 20, 20], [10], x)


def resnet18(d):
    import torch
    import torchvision

    torch.manual_seed(1854)
    net = torchvision.models.resnet18(num_classes=10).eval()
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.normal_(1, 0.1)
                mod.bias.normal_(0, 0.1)
    x = torch.randn(2, 3, 64, 64)
    torch.onnx.export(net, x, os.path.join(d, "resnet18.onnx"), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17)
    os.makedirs(os.path.join(d, "data_resnet18"), exist_ok=True)
    np.save(os.path.join(d, "data_resnet18", "x.npy"), x.numpy())


def pos_model(d):
    """Operands of fewer dims beside a channels-last tensor: Conv 3->8 (3x3), Add of a [8, 6, 6] position table
    (channels and pixels: not the same bytes channels-last), Mul by a [6, 6] table and Add of a [8, 1, 1] bias
    (the same bytes either way), Relu, Conv 8->4; x [batch, 3, 6, 6], DIR/data_pos/x.npy (2 samples)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(77)
    c = lambda name, a: numpy_helper.from_array(np.asarray(a, np.float32), name)
    inits = [c("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3), c("pos", rng.standard_normal((8, 6, 6))),
             c("hw", 1 + 0.2 * rng.standard_normal((6, 6))), c("b", 0.1 * rng.standard_normal((8, 1, 1))),
             c("w2", rng.standard_normal((4, 8, 3, 3)) * 0.2)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="/c1/Conv"),
             helper.make_node("Add", ["c1", "pos"], ["p"], name="/pos/Add"),
             helper.make_node("Mul", ["p", "hw"], ["m"], name="/hw/Mul"),
             helper.make_node("Add", ["m", "b"], ["a"], name="/b/Add"),
             helper.make_node("Relu", ["a"], ["r"], name="/r/Relu"),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1], name="/c2/Conv")]
    write_model(d, "pos", nodes, inits, [3, 6, 6], [4, 6, 6], rng.standard_normal((2, 3, 6, 6)).astype(np.float32))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "models":
        se_model(sys.argv[2])
        resnet18(sys.argv[2])
        pos_model(sys.argv[2])
    else:
        sys.exit(__doc__)
