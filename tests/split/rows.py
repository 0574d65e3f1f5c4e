#!/usr/bin/env python3
"""ppcc's row-order pass (passes/rows.c; --disable-pass rows turns it off).

Models: torch 1.13 exports of nn.MultiheadAttention and
nn.TransformerEncoderLayer with batch_first=True (the [B, S, E] <-> [S, B, E]
Transposes the pass removes), and of a module that permutes to [S, B, E]
itself and runs two batch_first=False layers; and graphs written with
onnx.helper for the cases the pass must get right: a region value that is
also a graph output and read by an op outside the region, a residual Add of
two values in the same layout, a Slice of a dim that is not the last, a
Softmax and a LayerNorm over the last axis and a Div by a scalar inside the
region, a Slice of part of a dim a Reshape split off, a Gemm whose rows the seed reordered, a Mul by a scalar of more dims than the stored
tensor before a Slice, 20 Gemms reading one region value, and two seeds the pass must
leave alone (the reorder read by a ReduceSum over the reordered axis, and a
Transpose that moves the last axis).

For each model, at micro-batch 2 (and -pp 2 for the attention):
  - the pass's plan on the reference kernels gives the very bytes of the
    plan without it (each op computes the same rows, only stored in
    another order), and both are within rtol 1e-4 / atol 1e-5 of
    onnxruntime's run of the model as exported (the independent oracle);
  - the default CPU backend (oneDNN where built) within the same tolerance;
  - every stage as ONNX (ppcc --export-stages) loads in onnxruntime;
  - Transposes in `ppcc --dump-ir`: fewer with the pass where it applies
    (the [B, S, E] <-> [S, B, E] pair gone: 4 a layer of attention instead
    of 6, also where a module permutes around a batch_first=False layer,
    whose residual Add joins two regions), the same where it must not.
The three torch models again exported for training: one `ppcc --train`
step (mse) with the pass and without, each against torch autograd, and
fewer Transposes in the training graph with it; and the module that
permutes around two layers with Dropout of p = 0.3: the same step with the pass and without (the masks drawn by
element position, so the pass must leave Dropout the model's order).
usage: rows.py WORK_DIR (env: PPCC, PPRT)"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
rng = np.random.default_rng(2027)
problems, cases = [], 0
B, S, E, H = 2, 7, 16, 4


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def export(module, name, x):
    module.eval()  # (with gradients on: torch 1.13's fused fast path, which does not export, stays off)
    torch.onnx.export(module, (torch.from_numpy(x),), name + ".onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17)


class MHA(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(E, H, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0] + x


class SeqFirst(torch.nn.Module):
    """the permutes written in forward(), around two batch_first=False layers"""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.layer = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, 32, dropout=dropout), 2,
                                                 enable_nested_tensor=False)

    def forward(self, x):
        return self.layer(x.transpose(0, 1)).transpose(0, 1)


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def hand_models():
    """graphs the exports do not have; name -> (model, the pass applies)"""
    n = helper.make_node
    f = TensorProto.FLOAT
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
    out = {}
    # region: Transpose [B,S,E]->[S,B,E], MatMul, Add bias, Softmax(-1), Div by scalar (any order), LayerNorm(-1),
    # a residual Add of two region values (same layout), MatMul, back with a Transpose to [B,S,E]; the first
    # MatMul's output also read by a ReduceMean (not per row: it reads the value made again in [S,B,E] order)
    inits = [c("w1", w(E, E)), c("b1", w(E)), c("two", np.array(2.0, np.float32)), c("g", w(E)), c("bt", w(E)),
             c("w2", w(E, 8))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("MatMul", ["t", "w1"], ["m"]), n("Add", ["b1", "m"], ["a"]),
             n("Softmax", ["a"], ["s"], axis=-1), n("Div", ["s", "two"], ["d"]),
             n("LayerNormalization", ["d", "g", "bt"], ["ln"], axis=-1), n("Add", ["ln", "d"], ["r"]),
             n("ReduceMean", ["m"], ["mm"], axes=[2], keepdims=1), n("Transpose", ["mm"], ["y2"], perm=[1, 0, 2]),
             n("MatMul", ["r", "w2"], ["p"]), n("Transpose", ["p"], ["y"], perm=[1, 0, 2])]
    g = helper.make_graph(nodes, "rowwise", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", S, 8]),
                           helper.make_tensor_value_info("y2", f, ["batch", S, 1])], initializer=inits)
    out["rowwise"] = (g, True)
    # a Slice of the batch dim inside the region (its own atom), then a Reshape that splits E and a Transpose back
    inits = [c("st", np.array([1], np.int64)), c("en", np.array([S - 1], np.int64)), c("ax", np.array([0], np.int64)),
             c("shp", np.array([S - 2, -1, 4, E // 4], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("Slice", ["t", "st", "en", "ax"], ["sl"]),
             n("Reshape", ["sl", "shp"], ["rs"]), n("Transpose", ["rs"], ["y"], perm=[1, 0, 2, 3])]
    g = helper.make_graph(nodes, "slice", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", S - 2, 4, E // 4])], initializer=inits)
    out["slice"] = (g, True)
    # a Slice inside a stored dim: the Reshape splits E into (2, E/2), the Slice takes part of E/2 (the stored
    # tensor seen as its atoms first), then back to [B, S, .] with the Transpose
    inits = [c("w1", w(E, E)), c("sh", np.array([S, -1, 2, E // 2], np.int64)), c("s0", np.array([1], np.int64)),
             c("s1", np.array([5], np.int64)), c("ax", np.array([3], np.int64)), c("sh2", np.array([S, -1, 8], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("MatMul", ["t", "w1"], ["m"]), n("Reshape", ["m", "sh"], ["r"]),
             n("Slice", ["r", "s0", "s1", "ax"], ["sl"]), n("Reshape", ["sl", "sh2"], ["r2"]),
             n("Transpose", ["r2"], ["y"], perm=[1, 0, 2])]
    g = helper.make_graph(nodes, "inner", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", S, 8])], initializer=inits)
    out["inner"] = (g, True)
    # a Gemm over the reordered rows ([S*B, E] after the seed), its output reshaped back and transposed to [B, S, N]
    inits = [c("flat", np.array([-1, E], np.int64)), c("wg", w(6, E)), c("bg", w(6)),
             c("back", np.array([S, -1, 6], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("Reshape", ["t", "flat"], ["f2"]),
             n("Gemm", ["f2", "wg", "bg"], ["gm"], transB=1), n("Reshape", ["gm", "back"], ["gb"]),
             n("Transpose", ["gb"], ["y"], perm=[1, 0, 2])]
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", S, 6])], initializer=inits)
    out["gemm"] = (g, True)
    # left alone: the reorder is read by a ReduceSum over the reordered axis, and a Transpose moving the last axis
    inits = [c("w1", w(E, E)), c("axes", np.array([0], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("MatMul", ["t", "w1"], ["m"]),
             n("ReduceSum", ["m", "axes"], ["rsum"], keepdims=1), n("Transpose", ["rsum"], ["y"], perm=[1, 0, 2]),
             n("Transpose", ["x"], ["y2"], perm=[0, 2, 1])]
    g = helper.make_graph(nodes, "alone", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", 1, E]),
                           helper.make_tensor_value_info("y2", f, ["batch", E, S])], initializer=inits)
    out["alone"] = (g, False)
    # a Mul by a [1,1,1,1,1] scalar after a Reshape that raised the rank above the stored tensor's: its output has
    # the scalar's rank (ones in front), so the Slice of S (a stored dim) that follows must slice the right axis
    inits = [c("shp", np.array([S, -1, 4, 1, E // 4], np.int64)), c("k", np.full((1, 1, 1, 1, 1), 2.0, np.float32)),
             c("s0", np.array([1], np.int64)), c("s1", np.array([5], np.int64)), c("ax", np.array([0], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("Reshape", ["t", "shp"], ["r"]), n("Mul", ["r", "k"], ["m"]),
             n("Slice", ["m", "s0", "s1", "ax"], ["sl"]), n("Transpose", ["sl"], ["y"], perm=[1, 0, 2, 3, 4])]
    g = helper.make_graph(nodes, "scalar5", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info("y", f, ["batch", 4, 4, 1, E // 4])], initializer=inits)
    out["scalar5"] = (g, True)
    # 20 Gemms reading one region value, each through a Reshape to [rows, E] that the pass adds (the graph's nodes
    # move while a Gemm is taken: the ASan build sees a stale node there), each back to [B, S, 6]
    inits = [c("flat", np.array([-1, E], np.int64)), c("back", np.array([S, -1, 6], np.int64))]
    nodes = [n("Transpose", ["x"], ["t"], perm=[1, 0, 2]), n("Reshape", ["t", "flat"], ["f2"])]
    for i in range(20):
        inits.append(c(f"w{i}", w(6, E)))
        nodes += [n("Gemm", ["f2", f"w{i}"], [f"g{i}"], transB=1), n("Reshape", [f"g{i}", "back"], [f"b{i}"]),
                  n("Transpose", [f"b{i}"], [f"y{i}"], perm=[1, 0, 2])]
    g = helper.make_graph(nodes, "gemms", [helper.make_tensor_value_info("x", f, ["batch", S, E])],
                          [helper.make_tensor_value_info(f"y{i}", f, ["batch", S, 6]) for i in range(20)], initializer=inits)
    out["gemms"] = (g, True)
    return out


def transposes(plan_args):
    ir = run([PPCC] + plan_args + ["--dump-ir", "-q", "-o", os.devnull])
    return len(re.findall(r"^%\d+ s\d+ Transpose ", ir, re.M))


def check(name, applies, pp=(1,)):
    global cases
    x = rng.standard_normal((3, S, E)).astype(np.float32)
    os.makedirs(f"data_{name}", exist_ok=True)
    np.save(f"data_{name}/x.npy", x)
    sess = ort.InferenceSession(name + ".onnx", providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
    with_rows, without = transposes([name + ".onnx", "-b", "2"]), transposes([name + ".onnx", "-b", "2", "--disable-pass", "rows"])
    cases += 1
    if applies and not with_rows < without:
        problems.append(f"{name}: {with_rows} Transposes with the pass, {without} without: want fewer")
    if not applies and with_rows != without:
        problems.append(f"{name}: {with_rows} Transposes with the pass, {without} without: the pass must leave it")
    for p in pp:
        # (with the stages as ONNX models: each must load in onnxruntime, whose checker refuses two nodes of one
        # name, which the pass once made)
        run([PPCC, name + ".onnx", "-b", "2", "-pp", str(p), "-o", f"{name}_{p}.plan", "-q", "--export-stages",
             f"{name}_{p}_stages"])
        for k in range(p):
            cases += 1
            try:
                ort.InferenceSession(f"{name}_{p}_stages/stage_{k}.onnx", providers=["CPUExecutionProvider"])
            except Exception as e:  # (onnxruntime's own exception types)
                problems.append(f"{name} -pp {p}: stage {k} as ONNX does not load in onnxruntime: {str(e)[:300]}")
        run([PPCC, name + ".onnx", "-b", "2", "-pp", str(p), "--disable-pass", "rows", "-o", f"{name}_{p}n.plan", "-q"])
        for plan, backend in ((f"{name}_{p}.plan", "ref"), (f"{name}_{p}n.plan", "ref"), (f"{name}_{p}.plan", None)):
            tag = f"{plan}_{backend or 'cpu'}"
            run([PPRT, plan, f"data_{name}", "-q", "-o", tag] + (["--backend", backend] if backend else []))
        for o, ref in want.items():
            cases += 1
            got = np.load(f"{name}_{p}.plan_ref/{o}.npy")
            if open(f"{name}_{p}.plan_ref/{o}.npy", "rb").read() != open(f"{name}_{p}n.plan_ref/{o}.npy", "rb").read():
                problems.append(f"{name} -pp {p} {o}: other bytes with the pass than without (reference kernels)")
            for tag in ("ref", "cpu"):
                got = np.load(f"{name}_{p}.plan_{tag}/{o}.npy")
                if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-4, atol=1e-5):
                    err = np.abs(got - ref).max() if got.shape == ref.shape else f"shape {got.shape} vs {ref.shape}"
                    problems.append(f"{name} -pp {p} {o} ({tag}): {err} from onnxruntime")
    print(f"{name}: {without} Transposes -> {with_rows} with the pass")


x0 = rng.standard_normal((B, S, E)).astype(np.float32)
torch.manual_seed(7)
export(MHA(), "mha", x0)
export(torch.nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True), "layer", x0)
export(SeqFirst(), "seqfirst", x0)
hand = hand_models()
for name, (g, applies) in hand.items():
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, name + ".onnx")
check("mha", True, pp=(1, 2))
check("layer", True)
# the seed's rows and the attention's output (a second seed's region) meet at the residual Add: the two regions
# walked together (docs/design-notes.md, "Row order")
check("seqfirst", True)
for name, (g, applies) in hand.items():
    check(name, applies)


def export_train(module, name, x):
    """module exported as for training (TrainingMode.TRAINING, no constant folding, opset 14) to NAME_train.onnx"""
    path = name + "_train.onnx"
    module.train()
    torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return path


def train_check(name, module, x):
    """ppcc --train runs the pass on the forward graph before its gradient: one step (mse against a target) of
    the module exported for training, with the pass and without, each against torch autograd (the loss within
    rtol 1e-4, every gradient within rtol 1e-3 plus 1e-5 of the largest |gradient| of its weight: the weights'
    sums run over the rows in another order with the pass, so its bits are not the pass-off plan's), the
    Transposes of the training graph fewer with it."""
    global cases
    path = export_train(module, name, x)
    target = rng.standard_normal(x.shape).astype(np.float32)
    module.zero_grad()
    loss = ((module(torch.from_numpy(x)) - torch.from_numpy(target)) ** 2).mean()
    loss.backward()
    want = {n: q.grad.numpy() for n, q in module.named_parameters() if q.grad is not None}
    os.makedirs(f"train_{name}", exist_ok=True)
    np.save(f"train_{name}/x.npy", x)
    np.save(f"train_{name}/target.npy", target)
    counts = []
    for extra in ([], ["--disable-pass", "rows"]):
        args = [path, "--train", "--loss", "mse:y", "-b", str(x.shape[0])] + extra
        counts.append(transposes(args))
        tag = f"{name} training{' without the pass' if extra else ''}"
        plan, out = f"{name}_train{len(extra)}.plan", f"{name}_train{len(extra)}_out"
        run([PPCC] + args + ["-q", "-o", plan])
        run([PPRT, plan, f"train_{name}", "-q", "-o", out, "--backend", "ref"])
        cases += 1
        got = float(np.load(f"{out}/loss.npy"))
        if not np.isclose(got, loss.item(), rtol=1e-4, atol=1e-6):
            problems.append(f"{tag}: loss {got}, torch {loss.item()}")
        for w, ref in want.items():
            cases += 1
            f = f"{out}/" + "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in w + ".grad") + ".npy"
            g = np.load(f) if os.path.exists(f) else None
            if g is None or g.shape != ref.shape:
                problems.append(f"{tag}: no gradient of {w} of shape {ref.shape}")
            elif not np.all(np.abs(g - ref) <= 1e-3 * np.abs(ref) + 1e-5 * max(float(np.abs(ref).max()), 1e-30)):
                problems.append(f"{tag}: {w}'s gradient {np.abs(g - ref).max():.3g} from torch's")
    cases += 1
    if not counts[0] < counts[1]:
        problems.append(f"{name} training: {counts[0]} Transposes with the pass, {counts[1]} without: want fewer")
    print(f"{name} training: {counts[1]} Transposes -> {counts[0]} with the pass, {len(want)} gradients against torch")


def dropout_check(name, module, x):
    """A Dropout of p > 0 draws its mask by element position (pp.Dropout), so the pass must hand it the value in
    the model's order: one step with the pass and without gives the same loss and gradients within rtol 1e-4 /
    atol 1e-6 (a mask applied to other elements would move them by far more)."""
    global cases
    path = export_train(module, name, x)
    os.makedirs(f"train_{name}", exist_ok=True)
    np.save(f"train_{name}/x.npy", x)
    np.save(f"train_{name}/target.npy", rng.standard_normal(x.shape).astype(np.float32))
    np.save(f"train_{name}/dropout_seed.npy", np.array([5, 0], np.int64))  # (pp.Dropout's seed and counter)
    outs = []
    for extra in ([], ["--disable-pass", "rows"]):
        plan, out = f"{name}_train{len(extra)}.plan", f"{name}_train{len(extra)}_out"
        run([PPCC, path, "--train", "--loss", "mse:y", "-b", str(x.shape[0]), "-q", "-o", plan] + extra)
        run([PPRT, plan, f"train_{name}", "-q", "-o", out, "--backend", "ref"])
        outs.append(out)
    files = sorted(f for f in os.listdir(outs[1]) if f.endswith(".npy"))
    cases += 1
    if "loss.npy" not in files or sorted(f for f in os.listdir(outs[0]) if f.endswith(".npy")) != files:
        problems.append(f"{name}: other outputs with the pass than without: {files[:5]}")
        return
    for f in files:
        cases += 1
        a, b = np.load(f"{outs[0]}/{f}"), np.load(f"{outs[1]}/{f}")
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-6):
            problems.append(f"{name}: {f} with the pass {np.abs(a - b).max() if a.shape == b.shape else a.shape} "
                            "from without (the Dropout masks moved?)")
    print(f"{name}: {len(files)} outputs the same with the pass and without")


torch.manual_seed(11)
train_check("mha", MHA(), x0)
train_check("layer", torch.nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True), x0)
train_check("seqfirst", SeqFirst(), x0)
dropout_check("seqfirst_dropout", SeqFirst(0.3), x0)
for p in problems:
    print("FAIL:", p)
print(f"{cases - min(cases, len(problems))} passed, {min(cases, len(problems))} failed")
sys.exit(1 if problems else 0)
