#!/usr/bin/env python3
"""The batch check (passes/batch.c): ppcc refuses to cut into micro-batches a
model that mixes samples across the batch axis, naming the node and why, and
compiles every model that keeps its samples apart.

  - one small model per kind of op that mixes samples (Softmax, LogSoftmax,
    reductions, ArgMax, TopK, CumSum, normalizations, MatMul / Gemm / Einsum
    contracting over the batch, products that pair samples, Gather, Slice,
    Concat, Split, Pad, Tile, Trilu, Resize, ScatterND, GatherElements along
    it, MaxPool's Indices, a Reshape that spreads the batch, a per-sample
    constant, an output with the batch on another axis): exit 2, the message
    names the node (name, index in the model, op) and the reason;
  - the same ops along other axes, and the batch followed through Reshapes
    that merge and split it, Transposes, Squeeze/Unsqueeze, broadcasts,
    Gather, Concat, Split, Slice and batched MatMul: they compile, and pprt
    at -b 2, -pp 1 and 2, on 5 samples (three micro-batches, the last padded)
    matches onnxruntime on the whole batch (rtol 1e-4, atol 1e-5);
  - -b 0 (no batch axis: the conformance tests' mode) is never checked;
  - the issue's case, softmax(linear(x), dim=0) exported by PyTorch with a
    dynamic batch: refused at -b 1 and -b 2 with its message; with -b 4 and
    --allow-batch-mixing, 4 samples match PyTorch and onnxruntime, `pprt
    --info` names the node, and 5 samples run with a warning;
  - BART's shift_tokens_right (ScatterND writing each sample's row from its
    own place) compiles; an assignment to slices over every sample
    (x[:, :, 1:, 1:] = ..., MViT-v2's) runs at -pp 1 and 2 and matches
    onnxruntime, with index tuples small enough to fold and too large to.

Usage: run.py WORKDIR (env: PPCC, PPRT). About 2 s."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
failures = []
count = 0
rng = np.random.default_rng(0)
QUIET = ort.SessionOptions()
QUIET.log_severity_level = 4  # the proofs run models that fail at 4 samples on purpose


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    """nodes: helper nodes; inputs: (name, shape with 'N' for the batch)."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = name + ".onnx"
    onnx.save(m, path)
    return path


def node(op, ins, outs, name, **kw):
    return helper.make_node(op, ins, outs if isinstance(outs, list) else [outs], name=name, **kw)


def w(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


def refused(label, path, words, batch="2", extra=(), proof=False):
    """ppcc must exit 2 and print every one of `words`. With `proof`, the
    refusal is shown right: compiled anyway (--allow-batch-mixing), 4 samples
    in two micro-batches do not give onnxruntime's answer on all 4."""
    global count
    count += 1
    r = subprocess.run([PPCC, path, "-b", batch, "-o", "x.plan", *extra], capture_output=True, text=True, timeout=60)
    missing = [x for x in words if x not in r.stderr]
    if r.returncode != 2 or missing or "Sanitizer" in r.stderr:
        failures.append(f"{label}: exit {r.returncode} (want 2), missing {missing}: {r.stderr.strip()[:500]!r}")
    if not proof:
        return
    sess = ort.InferenceSession(path, QUIET, providers=["CPUExecutionProvider"])
    feeds = {i.name: rng.standard_normal([4] + i.shape[1:]).astype(np.float32) for i in sess.get_inputs()}
    d, out = label.replace(" ", "_") + "_proof", label.replace(" ", "_") + "_proof_out"
    os.makedirs(d, exist_ok=True)
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
    r = subprocess.run([PPCC, path, "-b", "2", "--allow-batch-mixing", "-q", "-o", "proof.plan"], capture_output=True, text=True)
    r2 = subprocess.run([PPRT, "proof.plan", d, "-q", "-o", out], capture_output=True, text=True)
    if r.returncode or r2.returncode:
        failures.append(f"{label}: --allow-batch-mixing: {r.stderr.strip()[:300]} {r2.stderr.strip()[:300]}")
        return
    try:
        want = sess.run(None, feeds)
    except Exception:  # the model does not even take 4 samples at once
        return
    def same(got, v):
        return got.shape == v.shape and np.allclose(got, v, rtol=1e-4, atol=1e-5)
    if all(same(np.load(os.path.join(out, o.name + ".npy")), v) for o, v in zip(sess.get_outputs(), want)):
        failures.append(f"{label}: refused, yet two micro-batches of 2 give onnxruntime's answer on 4 samples")


def runs(label, path, inputs, samples=5):
    """Compiles at -b 2, -pp 1 and 2; matches onnxruntime on all samples at once."""
    global count
    count += 1
    d = label + "_data"
    os.makedirs(d, exist_ok=True)
    feeds = {n: rng.standard_normal((samples, *s[1:])).astype(np.float32) for n, s in inputs}
    for n, v in feeds.items():
        np.save(os.path.join(d, n + ".npy"), v)
    sess = ort.InferenceSession(path, QUIET, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for pp in ("1", "2"):
        r = subprocess.run([PPCC, path, "-b", "2", "-pp", pp, "-q", "-o", label + ".plan"], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{label} -pp {pp}: refused: {r.stderr.strip()[:500]}")
            return
        out = label + "_out" + pp
        r = subprocess.run([PPRT, label + ".plan", d, "-q", "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{label} -pp {pp}: pprt exit {r.returncode}: {r.stderr.strip()[:300]}")
            return
        for k, v in want.items():
            got = np.load(os.path.join(out, k + ".npy"))
            if got.shape != v.shape or not np.allclose(got, v, rtol=1e-4, atol=1e-5):
                failures.append(f"{label} -pp {pp}: output {k} differs from onnxruntime "
                                f"(shape {got.shape} vs {v.shape})")


X = [("x", ["N", 6])]
X3 = [("x", ["N", 4, 6])]
X4 = [("x", ["N", 2, 6, 6])]
lin = [node("MatMul", ["x", "W"], "h", "/fc/MatMul")]
W = [("W", w(6, 6))]

# ---- refused: each op kind that mixes samples -----------------------------------------------------
refused("softmax", save("softmax", lin + [node("Softmax", ["h"], "y", "/Softmax", axis=0)], X, ["y"], W),
        ["node '/Softmax' (#1, Softmax) mixes samples", "normalizes over axis 0, the batch axis",
         "micro-batch of 2", "-b equal to the number of samples", "--allow-batch-mixing"], proof=True)
refused("logsoftmax opset 11", save("logsm", [node("LogSoftmax", ["x"], "y", "/lsm", axis=0)], X3, ["y"], opset=11),
        ["node '/lsm' (#0, LogSoftmax) mixes samples", "opset < 13"], proof=True)
refused("reducemean", save("rmean", [node("ReduceMean", ["x"], "y", "/mean", axes=[0])], X3, ["y"]),
        ["node '/mean' (#0, ReduceMean)", "reduces over the batch axis (0)"])
refused("reducesum all", save("rsum", [node("Relu", ["x"], "r", "/relu"), node("ReduceSum", ["r"], "y", "/sum")], X3, ["y"]),
        ["node '/sum' (#1, ReduceSum)", "reduces over the batch axis"])
refused("argmax", save("argmax", [node("ArgMax", ["x"], "y", "/argmax", axis=0)], X, ["y"]),
        ["node '/argmax' (#0, ArgMax)", "compares along the batch axis"])
refused("topk", save("topk", [node("TopK", ["x", "k"], ["y", "i"], "/topk", axis=0)], X, ["y"], [("k", i64(1))]),
        ["node '/topk' (#0, TopK)", "sorts along the batch axis"])
refused("cumsum", save("cumsum", [node("CumSum", ["x", "ax"], "y", "/cumsum")], X, ["y"], [("ax", np.array(0, np.int64))]),
        ["node '/cumsum' (#0, CumSum)", "sums along the batch axis"], proof=True)
refused("layernorm", save("ln", [node("LayerNormalization", ["x", "s"], "y", "/ln", axis=0)], X3, ["y"], [("s", w(4, 6))], opset=17),
        ["node '/ln' (#0, LayerNormalization)", "normalizes over axes 0.."], proof=True)
refused("instancenorm", save("inorm", [node("Transpose", ["x"], "t", "/t", perm=[1, 2, 0]),
                                        node("InstanceNormalization", ["t", "s", "b"], "y", "/in")],
                              X3, ["y"], [("s", w(6)), ("b", w(6))]),
        ["node '/in' (#1, InstanceNormalization)", "include the batch axis (2)"])
refused("groupnorm", save("gnorm", [node("Transpose", ["x"], "t", "/t", perm=[1, 0, 2, 3]),
                                     node("GroupNormalization", ["t", "s", "b"], "y", "/gn", num_groups=1)],
                           X4, ["y"], [("s", w(1)), ("b", w(1))], opset=18),
        ["node '/gn' (#1, GroupNormalization)", "across axis 1, which carries the batch"])
refused("matmul contracts", save("mmk", [node("Transpose", ["x"], "t", "/t"), node("MatMul", ["t", "x"], "y", "/gram")], X, ["y"]),
        ["node '/gram' (#1, MatMul) mixes samples", "sums products over the batch axis"])
refused("gemm contracts", save("gemmk", [node("Gemm", ["x", "x"], "y", "/gemm", transA=1)], X, ["y"]),
        ["node '/gemm' (#0, Gemm)", "sums products over the batch axis"])
refused("einsum contracts", save("einsum", [node("Einsum", ["x", "x"], "y", "/ein", equation="ni,nj->ij")], X, ["y"], opset=12),
        ["node '/ein' (#0, Einsum)", "sums over the batch axis"])
refused("matmul pairs samples", save("mmpair", [node("Transpose", ["x"], "t", "/t"), node("MatMul", ["x", "t"], "y", "/pair")], X, ["y"]),
        ["node '/pair' (#1, MatMul)", "every sample meets every other"], proof=True)
refused("broadcast pairs samples", save("bpair", [node("Unsqueeze", ["x", "a1"], "u", "/u1"), node("Unsqueeze", ["x", "a0"], "v", "/u0"),
                                                   node("Sub", ["u", "v"], "y", "/diff")], X, ["y"], [("a1", i64(1)), ("a0", i64(0))]),
        ["node '/diff' (#2, Sub)", "lie along different axes"], proof=True)
refused("gather", save("gather", [node("Gather", ["x", "i"], "y", "/first", axis=0)], X, ["y"], [("i", i64(0))]),
        ["node '/first' (#0, Gather)", "gathers along the batch axis"])
refused("slice", save("slice", [node("Slice", ["x", "s", "e", "a"], "y", "/slice")], X, ["y"], [("s", i64(0)), ("e", i64(1)), ("a", i64(0))]),
        ["node '/slice' (#0, Slice)", "takes part of the batch axis"])
refused("concat", save("concat", [node("Concat", ["x", "x"], "y", "/cat", axis=0)], X, ["y"]),
        ["node '/cat' (#0, Concat)", "concatenates along the batch axis"])
refused("split", save("split", [node("Split", ["x"], ["a", "b"], "/split", axis=0), node("Sub", ["a", "b"], "y", "/d")], X, ["y"]),
        ["node '/split' (#0, Split)", "splits along the batch axis"])
refused("pad", save("pad", [node("Pad", ["x", "p"], "y", "/pad")], X, ["y"], [("p", i64(1, 0, 0, 0))]),
        ["node '/pad' (#0, Pad)", "pads the batch axis"])
refused("tile", save("tile", [node("Tile", ["x", "r"], "y", "/tile")], X, ["y"], [("r", i64(2, 1))]),
        ["node '/tile' (#0, Tile)", "repeats the batch axis"])
refused("trilu", save("trilu", [node("Trilu", ["x"], "y", "/tril", upper=0)], X, ["y"], opset=14),
        ["node '/tril' (#0, Trilu)", "one of them is the batch axis"], proof=True)
refused("resize", save("resize", [node("Resize", ["x", "", "sc"], "y", "/up")], X4, ["y"], [("sc", np.array([2, 1, 1, 1], np.float32))]),
        ["node '/up' (#0, Resize)", "interpolates along the batch axis"])
refused("gatherelements", save("gel", [node("GatherElements", ["x", "i"], "y", "/ge", axis=0)], X, ["y"], [("i", np.zeros((1, 6), np.int64))]),
        ["node '/ge' (#0, GatherElements)", "gathers along the batch axis"])
refused("scatternd", save("snd", [node("ScatterND", ["x", "i", "u"], "y", "/scatter")], X, ["y"], [("i", i64(0).reshape(1, 1)), ("u", w(1, 6))]),
        ["node '/scatter' (#0, ScatterND)", "address the batch axis"], proof=True)
refused("maxpool indices", save("mpi", [node("MaxPool", ["x"], ["p", "i"], "/pool", kernel_shape=[2, 2]),
                                         node("Cast", ["i"], "y", "/cast", to=F)], X4, ["p", "y"]),
        ["node '/pool' (#0, MaxPool)", "Indices output counts positions through the whole batch"], proof=True)
refused("reshape spreads", save("spread", [node("Reshape", ["x", "s"], "r", "/reshape"), node("Relu", ["r"], "y", "/relu")], X, ["y"],
                                [("s", i64(2, -1))]),
        ["node '/reshape' (#0, Reshape): the batch axis cannot be followed (seen with the batch at 7)",
         "reshapes [7,6] to [2,21], which spreads the batch", "may mix samples"])
refused("merged then reduced", save("merged", [node("Reshape", ["x", "s"], "r", "/flat"), node("Softmax", ["r"], "y", "/sm", axis=0)],
                                    X3, ["y"], [("s", i64(-1, 6))]),
        ["node '/sm' (#1, Softmax) mixes samples", "normalizes over axis 0"])
refused("moved then normalized", save("moved", [node("Transpose", ["x"], "t", "/t", perm=[1, 0, 2]), node("Softmax", ["t"], "y", "/sm", axis=1)],
                                      X3, ["y"]),
        ["node '/sm' (#1, Softmax) mixes samples", "axis 1, the batch axis"])
refused("per-sample constant", save("persample", [node("Add", ["x", "c"], "y", "/add")], X, ["y"], [("c", w(2, 6))]),
        ["node '/add' (#0, Add)", "'c' holds no sample data but is not the same at every position of the batch"], proof=True)
refused("output batch on axis 1", save("outaxis", [node("Transpose", ["x"], "y", "/t")], [("x", ["N", 6])], ["y"]),
        ["graph output 'y'", "carries the batch on axis 1, not 0"], batch="6")
refused("reduced, -b 1", save("rmean1", [node("ReduceMean", ["x"], "y", "/mean", axes=[0])], X3, ["y"]),
        ["node '/mean' (#0, ReduceMean)", "(seen with the batch at 7)", "micro-batch of 1"], batch="1")

# ---- not refused: the same ops along other axes, the batch followed --------------------------------
count += 1
r = subprocess.run([PPCC, "softmax.onnx", "-b", "0", "--dim", "N=3", "-q", "-o", "b0.plan"], capture_output=True, text=True)
if r.returncode != 0:
    failures.append(f"-b 0 (no batch axis) was checked: {r.stderr.strip()}")
count += 1
r = subprocess.run([PPCC, "softmax.onnx", "-b", "2", "--allow-batch-mixing", "-o", "allow.plan"], capture_output=True, text=True)
if r.returncode != 0 or "warning: node '/Softmax' (#1, Softmax)" not in r.stderr:
    failures.append(f"--allow-batch-mixing: exit {r.returncode}, {r.stderr.strip()!r}")

runs("other_axes", save("other_axes", [
    node("Softmax", ["x"], "a", "/sm", axis=-1), node("ReduceMean", ["a"], "b", "/mean", axes=[2]),
    node("LayerNormalization", ["x", "s"], "c", "/ln", axis=-1), node("CumSum", ["c", "ax"], "d", "/cs"),
    node("TopK", ["d", "k"], ["e", "ei"], "/topk", axis=-1), node("ArgMax", ["d"], "f", "/am", axis=2),
    node("Cast", ["f"], "ff", "/cast", to=F), node("Mul", ["e", "b"], "y", "/mul"),
    node("Add", ["ff", "b"], "z", "/add")], X3, ["y", "z"], [("s", w(6)), ("ax", np.array(1, np.int64)), ("k", i64(3))], opset=17), X3)
runs("followed", save("followed", [
    node("Reshape", ["x", "s1"], "a", "/merge"), node("MatMul", ["a", "W"], "b", "/fc"),           # [N*4, 6]
    node("Reshape", ["b", "s2"], "c", "/split"), node("Transpose", ["c"], "d", "/t", perm=[0, 2, 1]),  # [N, 6, 4]
    node("MatMul", ["c", "d"], "e", "/attn"), node("Softmax", ["e"], "f", "/sm", axis=-1),          # [N, 4, 4]
    node("Einsum", ["f", "c"], "g", "/ein", equation="nij,njk->nik"),
    node("Unsqueeze", ["g", "a1"], "h", "/unsq"), node("Squeeze", ["h", "a1"], "i", "/sq"),
    node("Gather", ["i", "gi"], "j", "/gather", axis=1), node("Slice", ["i", "st", "en", "ax"], "k", "/slice"),
    node("Concat", ["j", "k"], "l", "/cat", axis=1), node("Split", ["l"], ["m", "n"], "/splt", axis=2),
    node("Add", ["m", "n"], "o", "/add"), node("Flatten", ["o"], "p", "/flat", axis=1),
    node("Gemm", ["p", "G", "gb"], "y", "/head", transB=1)], X3, ["y"],
    [("s1", i64(-1, 6)), ("W", w(6, 6)), ("s2", i64(-1, 4, 6)), ("a1", i64(1)), ("gi", i64(3, 0)),
     ("st", i64(1)), ("en", i64(3)), ("ax", i64(1)), ("G", w(5, 12)), ("gb", w(5))]), X3)
runs("convs", save("convs", [
    node("Conv", ["x", "cw"], "a", "/conv", pads=[1, 1, 1, 1]), node("MaxPool", ["a"], "b", "/pool", kernel_shape=[2, 2]),
    node("InstanceNormalization", ["b", "s", "sb"], "c", "/in"), node("GlobalAveragePool", ["c"], "d", "/gap"),
    node("Reshape", ["d", "s2"], "e", "/flat"), node("Where", ["m", "e", "zero"], "y", "/where")], X4, ["y"],
    [("cw", w(3, 2, 3, 3)), ("s", w(3)), ("sb", w(3)), ("s2", i64(-1, 3)), ("m", np.array([True, False, True])),
     ("zero", np.zeros(1, np.float32))]), X4)

# ---- copies along the batch, and an arange over it (issue 53) ----------------------------------------
# A table computed from constants, tiled once per sample (DeBERTa's relative positions): the MatMul
# that makes it is over ppcc's folding budget (2^30 multiply-adds), so the Tile stays an op and the
# analysis follows its copies. Added to queries [N*3, 6] merged batch-major it keeps the samples
# apart; merged heads-major (row h*N + n) each sample would take the table's rows by its place.
X3H = [("x", ["N", 3, 6])]
big = [("A", (w(1024, 1024) / 32).astype(np.float32)), ("Wb", (w(1024, 512) / 32).astype(np.float32)),
       ("i0", np.array(0, np.int64)), ("a0", i64(0)), ("one", i64(1)), ("ps", i64(0, 0)), ("pe", i64(3, 6)),
       ("pa", i64(0, 1)), ("m6", i64(-1, 6)), ("b36", i64(-1, 3, 6)), ("h3", i64(3, -1, 6))]
table = [node("Shape", ["x"], "s", "/shape"), node("Gather", ["s", "i0"], "n", "/n", axis=0),
         node("Unsqueeze", ["n", "a0"], "n1", "/n1"), node("Concat", ["n1", "one"], "reps", "/reps", axis=0),
         node("MatMul", ["A", "Wb"], "big", "/rel/proj"), node("Slice", ["big", "ps", "pe", "pa"], "p", "/rel/slice"),
         node("Tile", ["p", "reps"], "pt", "/rel/repeat")]
runs("copies_tiled", save("copies_tiled", table + [
    node("Reshape", ["x", "m6"], "q", "/q"), node("Add", ["q", "pt"], "r", "/add"),
    node("Reshape", ["r", "b36"], "y", "/y")], X3H, ["y"], big), X3H)
refused("copies against heads-major rows", save("copies_heads", table + [
    node("Transpose", ["x"], "xt", "/t", perm=[1, 0, 2]), node("Reshape", ["xt", "m6"], "q", "/q"),
    node("Add", ["q", "pt"], "r", "/add"), node("Reshape", ["r", "h3"], "r3", "/r3"),
    node("Transpose", ["r3"], "y", "/y", perm=[1, 0, 2])], X3H, ["y"], big),
        ["node '/add' (#", "Add)", "'pt' holds no sample data but is not the same at every position"], proof=True)

# CLIP's pooler: x[arange(N), argmax] as torch exports it, a Gather from x flattened to [N*4, 6] at
# argmax + arange(N) * 4: each sample's own row. Refused: another stride, a reversed arange, the
# arange's values used as data.
ar = [("i0", np.array(0, np.int64)), ("z", np.array(0, np.int64)), ("o", np.array(1, np.int64)),
      ("mo", np.array(-1, np.int64)), ("four", np.array(4, np.int64)), ("three", np.array(3, np.int64)),
      ("ax2", i64(2)), ("a1", i64(1))]
def pooler(name, stride="four", reverse=False, tail=None):
    rng_nodes = ([node("Sub", ["n", "o"], "last", "/last"), node("Range", ["last", "mo", "mo"], "ar", "/arange")]
                 if reverse else [node("Range", ["z", "n", "o"], "ar", "/arange")])
    tail = tail or [node("Flatten", ["x"], "f", "/flat", axis=2), node("Gather", ["f", "idx"], "y", "/pool", axis=0)]
    return save(name, [node("Shape", ["x"], "s", "/shape"), node("Gather", ["s", "i0"], "n", "/n", axis=0)] + rng_nodes + [
        node("Mul", ["ar", stride], "ars", "/stride"), node("ReduceSum", ["x", "ax2"], "a", "/sum", keepdims=0),
        node("ArgMax", ["a"], "am", "/argmax", axis=1, keepdims=0), node("Add", ["am", "ars"], "idx", "/idx")] + tail,
        X3, ["y"], ar)
runs("arange_pooler", pooler("arange_pooler"), X3)
refused("arange of another stride", pooler("arange_stride3", stride="three"),
        ["node '/pool' (#", "Gather)", "each sample's place in the batch times 3", "4 rows a sample"], proof=True)
refused("reversed arange", pooler("arange_reversed", reverse=True),
        ["node '/pool' (#", "each sample's place in the batch times -4"], proof=True)
refused("arange as data", pooler("arange_data", tail=[node("Cast", ["idx"], "fi", "/float", to=F),
                                                      node("Unsqueeze", ["fi", "a1"], "y", "/y")]),
        ["node '/float' (#", "Cast)", "'idx' holds each sample's place in the batch"], proof=True)

# ---- the case, exported by PyTorch; BART's shift_tokens_right --------------------------------
try:
    import torch
except ImportError:
    torch = None
    print("batch: torch not importable, skipping the PyTorch cases", file=sys.stderr)
if torch is not None:
    class SoftmaxBatch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 1)

        def forward(self, x):
            return torch.softmax(self.fc(x), dim=0)

    class Shift(torch.nn.Module):  # transformers' shift_tokens_right, then an embedding
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 4)

        def forward(self, ids):
            s = ids.new_zeros(ids.shape)
            s[:, 1:] = ids[:, :-1].clone()
            s[:, 0] = 2
            return self.emb(s)

    torch.manual_seed(0)
    m = SoftmaxBatch().eval()
    x = torch.randn(4, 8)
    torch.onnx.export(m, x, "torch_softmax.onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13)
    with torch.no_grad():
        want = m(x).numpy()
    for b in ("1", "2"):
        refused(f"softmax(linear(x), dim=0) -b {b}", "torch_softmax.onnx",
                ["node '/Softmax' (#1, Softmax) mixes samples", "Softmax normalizes over axis 0, the batch axis",
                 f"each micro-batch of {b} on its own", "-b equal to the number of samples you run at once",
                 "--allow-batch-mixing"], batch=b)
    count += 1
    os.makedirs("sm_data", exist_ok=True)
    np.save("sm_data/x.npy", x.numpy())
    ort_y = ort.InferenceSession("torch_softmax.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    r = subprocess.run([PPCC, "torch_softmax.onnx", "-b", "4", "--allow-batch-mixing", "-q", "-o", "sm4.plan"], capture_output=True, text=True)
    r2 = subprocess.run([PPRT, "sm4.plan", "sm_data", "-q", "-o", "sm_out"], capture_output=True, text=True)
    got = np.load("sm_out/y.npy") if r2.returncode == 0 else None
    if r.returncode or r2.returncode or got is None or not np.allclose(got, want, rtol=1e-5, atol=1e-6) \
            or not np.allclose(got, ort_y, rtol=1e-5, atol=1e-6) or r2.stderr:
        failures.append(f"-b 4 --allow-batch-mixing on 4 samples: {r.stderr} {r2.stderr} got {got}, PyTorch {want.ravel()}")
    info = subprocess.run([PPRT, "--info", "sm4.plan"], capture_output=True, text=True).stdout
    if "mixes samples across the batch axis (compiled with --allow-batch-mixing): node '/Softmax'" not in info:
        failures.append(f"pprt --info does not name the mixing node: {info[:300]!r}")
    os.makedirs("sm5", exist_ok=True)
    np.save("sm5/x.npy", np.concatenate([x.numpy(), x.numpy()[:1]]))
    r = subprocess.run([PPRT, "sm4.plan", "sm5", "-q", "-o", "sm5_out"], capture_output=True, text=True)
    if r.returncode or "5 samples run as 2 micro-batches of 4, the last padded" not in r.stderr:
        failures.append(f"5 samples on a -b 4 mixing plan: exit {r.returncode}, no warning: {r.stderr!r}")

    torch.onnx.export(Shift().eval(), torch.randint(3, 50, (2, 7)), "shift.onnx", input_names=["ids"], output_names=["y"],
                      dynamic_axes={"ids": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, opset_version=14)
    for b in ("1", "2"):
        count += 1
        r = subprocess.run([PPCC, "shift.onnx", "-b", b, "--dim", "seq=7", "-q", "-o", "shift.plan"], capture_output=True, text=True)
        if r.returncode:
            failures.append(f"shift_tokens_right -b {b} refused: {r.stderr.strip()[:400]}")

    class SliceAdd(torch.nn.Module):  # MViT-v2's relative positions: attn[:, :, 1:, 1:] += rel
        def forward(self, x):
            a = x * 2.0
            a[:, :, 1:, 1:] = a[:, :, 1:, 1:] + torch.tanh(x[:, :, :-1, :-1])
            return a

    # torch exports the assignment as ScatterND over index tuples built from
    # Range, Expand and Concat; at 600 x 600 they take 80 MB at the analysis'
    # batch of 7, more than ppcc folds, so the batch rule reads them from the
    # graph that builds them (at 8 x 8 they fold)
    for side in (8, 601):
        torch.onnx.export(SliceAdd().eval(), torch.randn(2, 1, side, side), f"slice_add{side}.onnx", input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=14)
        runs(f"slice assignment {side}x{side} (ScatterND)", f"slice_add{side}.onnx", [("x", (5, 1, side, side))])

    class SliceShift(torch.nn.Module):  # all samples but the first written: depends on the place
        def forward(self, x):
            a = x * 2.0
            a[1:, :, 1:, 1:] = 0.5
            return a

    torch.onnx.export(SliceShift().eval(), torch.randn(3, 1, 601, 601), "slice_shift.onnx", input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=14)
    refused("slice assignment along the batch (ScatterND, not folded)", "slice_shift.onnx", ["ScatterND"])

for f in failures:
    print("FAIL:", f)
print(f"batch: {count - len(failures)} of {count} cases pass")
sys.exit(1 if failures else 0)
