#!/usr/bin/env python3
"""Small ONNX models, one per pass feature, for the golden IR tests.

Each is written with the onnx helpers, with fixed names and seeded weights,
so re-running this script gives the same files (they are committed; run.py
uses the committed copies). Node names imitate PyTorch's module paths so the
dumps show scopes.

  conv_block    Conv+BN+Relu, Conv+BN, residual Add, Relu, Identity, Dropout,
                GlobalAveragePool, Flatten, MatMul+Add (2-D): BN folding,
                Conv+Add+Relu fusion, no-op removal, MatMul+Add -> Gemm
  transformer   the decomposed LayerNorm, the Erf GELU, x*Sigmoid(x), a 3-D
                MatMul, and a Shape -> Gather -> Unsqueeze -> Concat -> Reshape
                chain: folding, LayerNorm / GELU / SiLU fusion
  dead_code     an unused branch, duplicate constants, a no-op Reshape/Transpose
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="ppcc-golden")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))


def conv_block():
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.2
    bn = lambda p, c: [init(f"{p}.weight", rng.uniform(0.5, 1.5, c).astype(np.float32)),
                       init(f"{p}.bias", w(c)), init(f"{p}.running_mean", w(c)),
                       init(f"{p}.running_var", rng.uniform(0.5, 1.5, c).astype(np.float32))]
    inits = [init("conv1.weight", w(8, 3, 3, 3)), init("conv1.bias", w(8)), *bn("bn1", 8),
             init("conv2.weight", w(8, 8, 3, 3)), *bn("bn2", 8),
             init("fc.weight", w(8, 5)), init("fc.bias", w(5))]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"], ["b1"], name="/bn1/BatchNormalization"),
        n("Relu", ["b1"], ["r1"], name="/relu/Relu"),
        n("Conv", ["r1", "conv2.weight"], ["c2"], name="/block/conv2/Conv", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c2", "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var"], ["b2"], name="/block/bn2/BatchNormalization"),
        n("Add", ["b2", "r1"], ["a"], name="/block/Add"),
        n("Relu", ["a"], ["r2"], name="/block/relu/Relu"),
        n("Identity", ["r2"], ["i"], name="/Identity"),
        n("Dropout", ["i"], ["d"], name="/drop/Dropout"),
        n("GlobalAveragePool", ["d"], ["p"], name="/pool/GlobalAveragePool"),
        n("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
        n("MatMul", ["f", "fc.weight"], ["mm"], name="/fc/MatMul"),
        n("Add", ["mm", "fc.bias"], ["y"], name="/fc/Add"),
    ]
    save("conv_block", nodes, [helper.make_tensor_value_info("x", F, [2, 3, 8, 8])],
         [helper.make_tensor_value_info("y", F, [2, 5])], inits)


def transformer():
    d, h = 8, 16
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3
    inits = [init("ln.weight", rng.uniform(0.5, 1.5, d).astype(np.float32)), init("ln.bias", w(d)),
             init("fc1.weight", w(d, h)), init("fc1.bias", w(h)), init("fc2.weight", w(h, d)),
             init("two", np.array(2.0, np.float32)), init("eps", np.array(1e-5, np.float32)),
             init("sqrt2", np.array(1.4142135381698608, np.float32)), init("one", np.array(1.0, np.float32)),
             init("half", np.array(0.5, np.float32)), init("zero_i", np.array([0], np.int64)),
             init("idx0", np.array(0, np.int64)), init("idx1", np.array(1, np.int64)),
             init("minus1", np.array([-1], np.int64))]
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["x"], ["mu"], name="/blocks/blocks.0/norm1/ReduceMean", axes=[-1], keepdims=1),
        n("Sub", ["x", "mu"], ["dx"], name="/blocks/blocks.0/norm1/Sub"),
        n("Pow", ["dx", "two"], ["sq"], name="/blocks/blocks.0/norm1/Pow"),
        n("ReduceMean", ["sq"], ["var"], name="/blocks/blocks.0/norm1/ReduceMean_1", axes=[-1], keepdims=1),
        n("Add", ["var", "eps"], ["ve"], name="/blocks/blocks.0/norm1/Add"),
        n("Sqrt", ["ve"], ["sd"], name="/blocks/blocks.0/norm1/Sqrt"),
        n("Div", ["dx", "sd"], ["nx"], name="/blocks/blocks.0/norm1/Div"),
        n("Mul", ["nx", "ln.weight"], ["gx"], name="/blocks/blocks.0/norm1/Mul"),
        n("Add", ["gx", "ln.bias"], ["ln"], name="/blocks/blocks.0/norm1/Add_1"),
        n("MatMul", ["ln", "fc1.weight"], ["h0"], name="/blocks/blocks.0/mlp/fc1/MatMul"),
        n("Add", ["h0", "fc1.bias"], ["h1"], name="/blocks/blocks.0/mlp/fc1/Add"),
        n("Div", ["h1", "sqrt2"], ["g0"], name="/blocks/blocks.0/mlp/act/Div"),
        n("Erf", ["g0"], ["g1"], name="/blocks/blocks.0/mlp/act/Erf"),
        n("Add", ["g1", "one"], ["g2"], name="/blocks/blocks.0/mlp/act/Add"),
        n("Mul", ["h1", "g2"], ["g3"], name="/blocks/blocks.0/mlp/act/Mul"),
        n("Mul", ["g3", "half"], ["g4"], name="/blocks/blocks.0/mlp/act/Mul_1"),
        n("MatMul", ["g4", "fc2.weight"], ["o"], name="/blocks/blocks.0/mlp/fc2/MatMul"),
        n("Sigmoid", ["o"], ["s"], name="/blocks/blocks.0/gate/Sigmoid"),
        n("Mul", ["o", "s"], ["silu"], name="/blocks/blocks.0/gate/Mul"),
        n("Add", ["silu", "x"], ["res"], name="/blocks/blocks.0/Add"),
        # flatten the tokens the way exporters do: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
        n("Shape", ["res"], ["shp"], name="/Shape"),
        n("Gather", ["shp", "idx0"], ["b"], name="/Gather", axis=0),
        n("Unsqueeze", ["b", "zero_i"], ["bu"], name="/Unsqueeze"),
        n("Concat", ["bu", "minus1"], ["newshape"], name="/Concat", axis=0),
        n("Reshape", ["res", "newshape"], ["y"], name="/Reshape"),
    ]
    save("transformer", nodes, [helper.make_tensor_value_info("x", F, [2, 4, d])],
         [helper.make_tensor_value_info("y", F, [2, 4 * d])], inits)


def dead_code():
    inits = [init("a", np.arange(6, dtype=np.float32)), init("a_copy", np.arange(6, dtype=np.float32)),
             init("shape", np.array([2, 6], np.int64))]
    n = helper.make_node
    nodes = [
        n("Add", ["x", "a"], ["p"], name="/left/Add"),
        n("Add", ["x", "a_copy"], ["q"], name="/right/Add"),
        n("Relu", ["q"], ["unused"], name="/dead/Relu"),
        n("Reshape", ["p", "shape"], ["p2"], name="/Reshape"),
        n("Transpose", ["p2"], ["p3"], name="/Transpose", perm=[0, 1]),
        n("Add", ["p3", "q"], ["y"], name="/out/Add"),
    ]
    save("dead_code", nodes, [helper.make_tensor_value_info("x", F, [2, 6])],
         [helper.make_tensor_value_info("y", F, [2, 6])], inits)


if __name__ == "__main__":
    conv_block()
    transformer()
    dead_code()
    print("wrote conv_block.onnx transformer.onnx dead_code.onnx")
