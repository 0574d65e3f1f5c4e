#!/usr/bin/env python3
"""(grads_norms.py: written beside grads.py at the same time, with its own
helpers; its cases are the normalizations', pools' and selections':
BatchNorm, LayerNorm, InstanceNorm, AveragePool, GlobalMaxPool,
ReduceMax/Min, Clip, Max/Min, Sum/Mean, Where, Cast, Dropout; and the Scatter
reductions mul, max and min (ties, zeros) against scatter_reduce. The cases it
shared with grads.py are gone; its harness is to be folded into grads.py's.)
Gradients from ppcc --train against PyTorch autograd.

Each case is a small torch module with a loss, exported as a training
export is (TrainingMode.TRAINING, no constant folding, opset 14); ppcc
--train compiles the loss and the gradient of every weight, pprt runs it on
the reference kernels, on oneDNN and on cuda-emu, and the loss and each weight's
gradient must match autograd's in float32 within rtol 1e-4 and an atol of
1e-5 of the largest gradient (sums run in another order on each side).
A weight placed before an op (x + p, p of x's shape) makes the op's input
gradient a weight's gradient, so input gradients are checked too. The cases
cover every op that has a rule: Gemm, MatMul (batched, broadcast, 1-D),
Conv (strides, padding, dilation, groups, 1-D and 3-D), MaxPool (ties after
a Relu, padding, ceil_mode), GlobalAveragePool, the binary ops with
broadcasting, every unary op with a derivative row, Softmax, LogSoftmax,
ReduceSum and ReduceMean, Reshape and Flatten, and the built-in losses;
BatchNormalization in training and inference mode (behind a Conv, which
the fuse pass must then leave alone), LayerNorm as torch writes it out at
opset 14 (fused into LayerNormalization before the gradient, and, with
--disable-pass fuse, the written-out ops' own rules) and as
LayerNormalization at 17, InstanceNormalization and
torch's GroupNorm, AveragePool (pads counted or not, ceil_mode, 1-D to
3-D), GlobalMaxPool, ReduceMax/Min (ties shared), Clip, Max/Min (ties),
Sum/Mean, Where, Cast, Dropout as an identity; then (issue 55, part B)
ConvTranspose (1-D to 3-D, strides, padding, output_padding, dilation,
groups), RNN (Tanh, Relu), LSTM and GRU (bidirectional, 2 layers, batch_first, initial
states; GRU's linear_before_reset 0 against a GRU written out in torch),
ReduceL1/L2/SumSquare/LogSumExp/LogSum, Resize (nearest, linear, cubic,
align_corners, up and down), PRelu, CumSum, and, written with
onnx.helper since torch 1.13 does not export them, GroupNormalization
(opset 18 and 21), RMSNormalization and Attention (opset 23: GQA, causal,
softcap, bool and trained float masks) against their definitions in torch.
Refused, exit 2 and named: LSTM with clip or other activations, a
training-mode Dropout whose mask output is read. Training-mode Dropout:
tests/train/dropout.py. Ops torch does not export are made by editing the exported graph
(patch=). PP_TRAIN_CASES=REGEX runs only the cases it finds in their names.
Every case also runs on cuda-emu (the CUDA step list), whose gradients must
meet the same bounds; the normalizations' and the 1-D and 2-D resizes'
cases (NO_HOST) must have no step on its host fallback there.
Usage: grads.py PPCC PPRT WORK"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import host_steps  # noqa: E402

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_grads_norms")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.manual_seed(0)
BACKENDS = ("ref", "dnnl", "cuda-emu")  # cuda-emu: the CUDA step list run on the host
# the cases whose gradient ops have CUDA steps (pp.LayerNormGrad, pp.InstanceNormGrad, pp.ResizeGrad over at most
# two axes): on cuda-emu, no step of theirs may run on the host fallback (but layernorm_broadcast_scale_op17's and
# groupnorm_op21_rank2's forward ops, a LayerNormalization with a broadcast scale and a GroupNormalization of rank 2,
# which the CUDA planner leaves to the host)
NO_HOST = r"layernorm_(?!broadcast).*op17|instancenorm|groupnorm_(?!op21_rank2)|resize_(?!trilinear)|gridsample|stn_"
ONLY = os.environ.get("PP_TRAIN_CASES")  # a regular expression: run only the cases it finds in their names


def file_name(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def export(mod, args, path, input_names, opset=14, train=True, patch=None):
    torch.onnx.export(mod, args, path, input_names=input_names, output_names=["out"], opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL,
                      do_constant_folding=False, keep_initializers_as_inputs=False)
    if patch:  # the exported graph edited into the op under test (one torch does not export)
        import onnx
        m = onnx.load(path)
        patch(m.graph)
        onnx.save(m, path)


def check_no_host(name, be, plan, data):
    """on cuda-emu, a NO_HOST case's plan runs with no step on the host fallback"""
    if be == "cuda-emu" and re.search(NO_HOST, name):
        h = host_steps(PPRT, plan, data)
        check(h == 0, f"{name} on {be}: {h} steps on the host fallback (--cuda-explain), want 0")


def run_case(name, mod, inputs, loss="out", labels=None, target=None, torch_loss=None, rtol=1e-4, pp=1, opset=14,
             train=True, train_export=None, patch=None, freeze=None, args=(), ops=None):
    """train: the module's mode for the oracle, and the export's unless train_export says otherwise;
    freeze: a module path given to --freeze, whose weights must then have no gradient output; args: more
    ppcc options; ops: (ops the gradient graph must have, ops it must not) by ppcc --dump-ir=autodiff"""
    if ONLY and not re.search(ONLY, name):
        return
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    names = [f"x{i}" for i in range(len(inputs))]
    te = train if train_export is None else train_export
    mod.train(te)
    export(mod, tuple(inputs), path, names, opset, te, patch)
    mod.train(train)
    for n, v in zip(names, inputs):
        np.save(os.path.join(d, "data", n + ".npy"), v.numpy())
    if labels is not None:
        np.save(os.path.join(d, "data", "labels.npy"), labels.numpy())
    if target is not None:
        np.save(os.path.join(d, "data", "target.npy"), target.numpy())
    plan = os.path.join(d, "g.plan")
    batch = str(inputs[0].shape[0])
    r = subprocess.run([PPCC, path, "--train", "--loss", loss, "-b", batch, "-pp", str(pp), "-q", "-o", plan,
                        *args] + (["--freeze", freeze] if freeze else []), capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: ppcc exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return
    if ops:
        r = subprocess.run([PPCC, path, "--train", "--loss", loss, "-b", batch, "-q", "-o", plan + ".dump",
                            "--dump-ir=autodiff", *args], capture_output=True, text=True)
        have = set(re.findall(r"^%\d+ s-?\d+ (\S+)", r.stdout, re.M))
        check(r.returncode == 0 and set(ops[0]) <= have and not set(ops[1]) & have,
              f"{name}: the gradient graph's ops {sorted(have)}: want {ops[0]} among them and none of {ops[1]}")
    # the oracle
    mod.zero_grad()
    out = mod(*inputs)
    want_loss = torch_loss(out) if torch_loss else out
    want_loss.backward()
    want = {n: p.grad.detach().numpy() for n, p in mod.named_parameters() if p.grad is not None}
    frozen = [n for n in want if freeze and n.startswith(freeze + ".")]
    for n in frozen:
        del want[n]
    for be in BACKENDS:
        o = os.path.join(d, "out_" + be)
        r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", o, "-q", "--backend", be],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name} on {be}: pprt exit {r.returncode}: {r.stderr.strip()[-400:]}")
        if r.returncode:
            continue
        check_no_host(name, be, plan, os.path.join(d, "data"))
        got_loss = np.load(os.path.join(o, "loss.npy"))
        wl = want_loss.detach().numpy()
        check(np.allclose(got_loss, wl, rtol=rtol, atol=1e-6), f"{name} on {be}: loss {got_loss} want {wl}")
        for pn in frozen:
            check(not os.path.exists(os.path.join(o, file_name(pn + ".grad") + ".npy")),
                  f"{name} on {be}: the frozen '{pn}' has a gradient output")
        for pn, g in want.items():
            f = os.path.join(o, file_name(pn + ".grad") + ".npy")
            check(os.path.exists(f), f"{name} on {be}: no gradient of '{pn}' among {sorted(os.listdir(o))}")
            if not os.path.exists(f):
                continue
            got = np.load(f)
            check(got.shape == g.shape, f"{name} on {be}: '{pn}' gradient shape {got.shape}, want {g.shape}")
            if got.shape != g.shape:
                continue
            atol = 1e-5 * max(1.0, float(np.abs(g).max()))
            ok = np.isclose(got, g, rtol=rtol, atol=atol)
            if not ok.all():
                i = tuple(np.argwhere(~ok)[0])
                check(False, f"{name} on {be}: '{pn}' gradient: {int((~ok).sum())} of {g.size} off; first at {list(i)}"
                      f": {got[i]!r}, want {g[i]!r}")
            else:
                check(True, "")


class Probe(nn.Module):
    """loss = sum(f(x + p) * R): p (x's shape) carries f's input gradient;
    the weights f owns carry theirs."""

    def __init__(self, shape, f, mods=None, out_shape=None, seed=1):
        super().__init__()
        self.p = nn.Parameter(torch.randn(*shape) * 0.1)
        self.f = f
        self.mods = nn.ModuleList(mods or [])
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            o = self.fwd(torch.zeros(*shape))
        self.register_buffer("R", torch.randn(*o.shape, generator=g))

    def fwd(self, x):
        return self.f(self, x + self.p)

    def forward(self, x):
        return (self.fwd(x) * self.R).sum()


def probe(name, shape, f, mods=None, x=None, p0=False, **kw):
    m = Probe(shape, f, mods)
    if p0:  # p = 0: x + p is x exactly, so x's ties stay ties
        with torch.no_grad():
            m.p.zero_()
    if x is None:
        x = torch.randn(*shape)
    run_case(name, m, [x], **kw)


# ---- normalizations, pools, selections (issue 55, part A) -------------------------------------


def rand_affine(*mods):
    """random affine parameters (and running statistics), so that scale and bias are not 1 and 0"""
    with torch.no_grad():
        for m in mods:
            for t in (getattr(m, "weight", None), getattr(m, "bias", None)):
                if t is not None:
                    t.copy_(torch.randn(t.shape) * 0.5 + (1.0 if t is m.weight else 0.0))
            if getattr(m, "running_mean", None) is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape) * 0.3)
                m.running_var.copy_(torch.rand(m.running_var.shape) + 0.5)
    return list(mods)


# BatchNormalization in training mode: the batch's statistics (pp.BatchNormGrad)
probe("batchnorm_train_2d", (4, 3, 5, 5), lambda m, x: m.mods[0](x), rand_affine(nn.BatchNorm2d(3)))
probe("batchnorm_train_1d", (6, 4, 7), lambda m, x: m.mods[0](x), rand_affine(nn.BatchNorm1d(4)))
probe("batchnorm_train_rank2", (8, 5), lambda m, x: m.mods[0](x), rand_affine(nn.BatchNorm1d(5, eps=1e-3)))
probe("batchnorm_train_3d", (2, 3, 3, 4, 2), lambda m, x: m.mods[0](x), rand_affine(nn.BatchNorm3d(3)))
probe("conv_bn_relu_train", (2, 3, 6, 6), lambda m, x: F.relu(m.mods[1](m.mods[0](x))),
      rand_affine(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)))


def bn_inference(g):
    """the BatchNormalizations made inference-mode ones (torch's eval export folds a BatchNorm after a
    Conv into it; this keeps the pair for ppcc's fuse pass to see)"""
    for n in g.node:
        if n.op_type == "BatchNormalization":
            for a in n.attribute:
                if a.name == "training_mode":
                    a.i = 0
            del n.output[1:]


# in inference mode: the running statistics, fixed (an eval export; the Conv + BatchNorm pair, which
# ppcc's fuse pass folds for inference, as a training export edited)
probe("batchnorm_eval", (3, 4, 5, 5), lambda m, x: m.mods[0](x), rand_affine(nn.BatchNorm2d(4)), train=False)
probe("conv_bn_eval", (2, 3, 6, 6), lambda m, x: m.mods[1](m.mods[0](x)),
      rand_affine(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)), train=False, train_export=True,
      patch=bn_inference)
probe("conv_bn_eval_frozen_bn", (2, 3, 6, 6), lambda m, x: m.mods[1](m.mods[0](x)),
      rand_affine(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)), train=False, train_export=True,
      patch=bn_inference, freeze="mods.1")
# LayerNorm: torch's opset-14 export writes it out (ReduceMean, Sub, Pow, Sqrt, Div, ...), which ppcc
# --train fuses into LayerNormalization before the gradient (passes/fuse.c, pp_fuse_train); opset 17
# exports LayerNormalization (pp.LayerNormGrad); the written-out ops' own rules with the fuse pass off
LN_FUSED = (("LayerNormalization", "pp.LayerNormGrad"), ("ReduceMean", "Pow", "Sqrt"))
for ov in (14, 17):
    probe(f"layernorm_last_op{ov}", (2, 3, 8), lambda m, x: m.mods[0](x), rand_affine(nn.LayerNorm(8)), opset=ov,
          ops=LN_FUSED)
probe("layernorm_last_op14_unfused", (2, 3, 8), lambda m, x: m.mods[0](x), rand_affine(nn.LayerNorm(8)),
      args=("--disable-pass", "fuse"), ops=(("ReduceMean", "Pow", "Sqrt"), ("LayerNormalization",)))
for ov in (14, 17):
    probe(f"layernorm_2dims_op{ov}", (2, 3, 4, 5), lambda m, x: m.mods[0](x), rand_affine(nn.LayerNorm([4, 5])),
          opset=ov)
probe("layernorm_nobias_op17", (3, 6), lambda m, x: F.layer_norm(x, (6,), m.mods[0].weight, None, 1e-3),
      [nn.LayerNorm(6)], opset=17)


def expand_into_layernorm(g):
    """the Expands of LayerNormalization's scale and bias dropped: the op broadcasts them itself"""
    expands = {n.output[0]: n for n in g.node if n.op_type == "Expand"}
    for n in g.node:
        if n.op_type == "LayerNormalization":
            for k in (1, 2):
                e = expands.get(n.input[k]) if k < len(n.input) else None
                if e is not None:
                    n.input[k] = e.input[0]
                    g.node.remove(e)


class LNBroadcast(nn.Module):
    """LayerNormalization over [4, 5] with a scale of shape [1, 5] and a bias of [5]"""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 5))
        self.b = nn.Parameter(torch.randn(5))
        self.R = torch.randn(3, 4, 5)

    def forward(self, x):
        return (F.layer_norm(x, (4, 5), self.w.expand(4, 5), self.b.expand(4, 5)) * self.R).sum()


run_case("layernorm_broadcast_scale_op17", LNBroadcast(), [torch.randn(3, 4, 5)], opset=17,
         patch=expand_into_layernorm)
probe("linear_layernorm_gelu", (4, 6), lambda m, x: F.gelu(m.mods[1](m.mods[0](x))),
      rand_affine(nn.Linear(6, 8), nn.LayerNorm(8)), ops=(LN_FUSED[0] + ("Gelu",), LN_FUSED[1] + ("Erf",)))
# x * Sigmoid(x) (torch's SiLU at opset 14) fused into pp.SiLU before the gradient, and as written
probe("silu_fused", (3, 4, 5), lambda m, x: F.silu(x * 2), ops=(("pp.SiLU",), ("Sigmoid",)))
probe("silu_unfused", (3, 4, 5), lambda m, x: F.silu(x * 2), args=("--disable-pass", "fuse"),
      ops=(("Sigmoid",), ("pp.SiLU",)))
probe("linear_layernorm_gelu_unfused", (4, 6), lambda m, x: F.gelu(m.mods[1](m.mods[0](x))),
      rand_affine(nn.Linear(6, 8), nn.LayerNorm(8)), args=("--disable-pass", "fuse"),
      ops=(("Erf", "ReduceMean"), ("Gelu", "LayerNormalization")))
# InstanceNormalization, and torch's GroupNorm (InstanceNormalization between Reshapes; its affine
# weights go through Unsqueeze, a data-movement rule)
probe("instancenorm_2d", (2, 4, 5, 5), lambda m, x: m.mods[0](x), rand_affine(nn.InstanceNorm2d(4, affine=True)))
probe("instancenorm_1d", (3, 2, 9), lambda m, x: m.mods[0](x), rand_affine(nn.InstanceNorm1d(2, affine=True)))
probe("groupnorm_noaffine", (2, 6, 4, 4), lambda m, x: m.mods[0](x), [nn.GroupNorm(3, 6, affine=False)])


def pad_into_pool(g):
    """torch exports an AveragePool that counts its padding as a Pad and the pool: the Pad's pads put back
    into the pool as count_include_pad=1 (the Pad's gradient is not this rule's)"""
    import onnx
    from onnx import numpy_helper
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    for pad in [n for n in g.node if n.op_type == "Pad"]:
        pool = next(n for n in g.node if n.op_type == "AveragePool" and n.input[0] == pad.output[0])
        p = numpy_helper.to_array(consts[pad.input[1]].attribute[0].t).tolist()
        r = len(p) // 2
        for a in pool.attribute:
            if a.name == "pads":
                a.ints[:] = p[2:r] + p[r + 2:]
        pool.attribute.append(onnx.helper.make_attribute("count_include_pad", 1))
        pool.input[0] = pad.input[0]
        g.node.remove(pad)


# AveragePool: padding counted or not, ceil_mode, 1-D to 3-D (pp.AvgPoolGrad)
probe("avgpool_2", (2, 3, 8, 8), lambda m, x: F.avg_pool2d(x, 2), patch=pad_into_pool)
probe("avgpool_pad_count", (2, 2, 7, 7), lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True),
      patch=pad_into_pool)
probe("avgpool_pad_nocount", (2, 2, 7, 7), lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))
probe("avgpool_ceil_nocount", (1, 2, 8, 9), lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                                       count_include_pad=False))
probe("avgpool_ceil_count", (1, 2, 6, 6), lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
      patch=pad_into_pool)
probe("avgpool_1d", (2, 3, 10), lambda m, x: F.avg_pool1d(x, 3, 2, 1), patch=pad_into_pool)
probe("avgpool_3d", (1, 2, 5, 4, 6), lambda m, x: F.avg_pool3d(x, 2, (1, 2, 2)), patch=pad_into_pool)


def to_global_maxpool(g):
    for n in g.node:
        if n.op_type == "MaxPool":
            n.op_type = "GlobalMaxPool"
            del n.attribute[:]


probe("global_max_pool", (2, 3, 5, 4), lambda m, x: F.adaptive_max_pool2d(x, 1), patch=to_global_maxpool)
probe("reducemax_axis", (3, 4, 5), lambda m, x: x.amax(1))
probe("reducemin_keep", (3, 4, 5), lambda m, x: x.amin((0, 2), keepdim=True))
probe("reducemax_all", (3, 4), lambda m, x: x.max().reshape(1))
XT = torch.randint(-2, 3, (4, 6)).float()  # integers: ties, shared evenly
probe("reducemax_ties", (4, 6), lambda m, x: x.amax(1), x=XT, p0=True)
# Clip (min, max or both; bounds not weights), Max/Min of two (ties share), Where, Cast, Dropout
probe("clip_both", (3, 4, 5), lambda m, x: torch.clamp(x, -0.4, 0.3))
probe("clip_min", (3, 4, 5), lambda m, x: torch.clamp(x, min=-0.2))
probe("clip_max", (3, 4, 5), lambda m, x: torch.clamp(x, max=0.1))
probe("relu6", (3, 4, 5), lambda m, x: F.relu6(x * 8))
probe("hardtanh", (3, 4, 5), lambda m, x: F.hardtanh(x * 3))


class MaxMin(nn.Module):
    def __init__(self, f, a, b, ties=False):
        super().__init__()
        self.f = f
        self.a = nn.Parameter(torch.zeros(*a) if ties else torch.randn(*a))
        self.b = nn.Parameter(torch.zeros(*b) if ties else torch.randn(*b))
        self.register_buffer("R", torch.randn(*torch.broadcast_shapes(a, b)))

    def forward(self, x):
        return (self.f(x + self.a, self.b) * self.R).sum()


run_case("max_broadcast", MaxMin(torch.maximum, (2, 3, 4), (3, 1)), [torch.randn(2, 3, 4)])
run_case("min_broadcast", MaxMin(torch.minimum, (3, 4), (4,)), [torch.randn(3, 4)])
run_case("max_ties", MaxMin(torch.maximum, (3, 4), (3, 4), ties=True), [torch.randint(-1, 2, (3, 4)).float()])
run_case("min_ties", MaxMin(torch.minimum, (3, 4), (1, 4), ties=True), [torch.randint(-1, 2, (3, 4)).float()])


class WhereMod(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(3, 4))
        self.b = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return (torch.where(x > 0, x * self.a, self.b) ** 2).sum()


run_case("where", WhereMod(), [torch.randn(2, 3, 4)])
probe("cast_f32", (3, 4), lambda m, x: x.to(torch.float32) * 2)
probe("dropout_p0", (3, 4), lambda m, x: F.dropout(x * 2, 0.0, True))


def dropout_off(g):
    """the Dropout's training_mode made a constant false and its ratio 0.3: inference (torch's eval
    export leaves no Dropout)"""
    import onnx
    from onnx import numpy_helper
    prod = {o: n for n in g.node for o in n.output}
    d = next(n for n in g.node if n.op_type == "Dropout")
    for k, v in ((1, np.array(0.3, np.float32)), (2, np.array(False))):
        c = prod[d.input[k]]
        del c.attribute[:]
        c.attribute.append(onnx.helper.make_attribute("value", numpy_helper.from_array(v)))


probe("dropout_inference", (3, 4), lambda m, x: F.dropout(x * 2, 0.0, True), patch=dropout_off)


def adds_to(op, n_in):
    """the chain of Adds (x + a) + b edited into one op of n_in inputs (Sum, Mean)"""
    def patch(g):
        adds = [n for n in g.node if n.op_type == "Add"]
        if n_in == 3:
            first, second = adds[0], adds[1]
            second.input[:] = [first.input[0], first.input[1], second.input[1]]
            g.node.remove(first)
            second.op_type = op
        else:
            adds[0].op_type = op
    return patch


class Variadic(nn.Module):
    """the oracle of Sum / Mean (x + a + b) over n inputs, scaled by 1/n for Mean"""

    def __init__(self, n, scale):
        super().__init__()
        self.n, self.scale = n, scale
        self.a = nn.Parameter(torch.randn(3, 4))
        self.b = nn.Parameter(torch.randn(4))
        self.R = torch.randn(2, 3, 4)

    def forward(self, x):
        s = x + self.a + self.b if self.n == 3 else x + self.a
        if not torch.onnx.is_in_onnx_export():
            s = s * self.scale
        return (s * self.R).sum()


run_case("sum3", Variadic(3, 1.0), [torch.randn(2, 3, 4)], patch=adds_to("Sum", 3))
run_case("sum2", Variadic(2, 1.0), [torch.randn(2, 3, 4)], patch=adds_to("Sum", 2))
run_case("mean3", Variadic(3, 1 / 3), [torch.randn(2, 3, 4)], patch=adds_to("Mean", 3))
run_case("mean2", Variadic(2, 0.5), [torch.randn(2, 3, 4)], patch=adds_to("Mean", 2))

# ---- ConvTranspose, ReduceL1/L2/SumSquare/LogSumExp, GroupNormalization (issue 55, part B) -----

class ConvT(nn.Module):
    """sum(convtranspose(x + p) * R): the input gradient through p, the weight's and the bias's"""

    def __init__(self, conv, xshape, seed=3):
        super().__init__()
        self.p = nn.Parameter(torch.randn(*xshape) * 0.1)
        self.conv = conv
        with torch.no_grad():
            o = conv(torch.zeros(*xshape))
        self.register_buffer("R", torch.randn(*o.shape, generator=torch.Generator().manual_seed(seed)))

    def forward(self, x):
        return (self.conv(x + self.p) * self.R).sum()


for nm, conv, xs in [
        ("convt2d", nn.ConvTranspose2d(3, 4, 3), (2, 3, 5, 5)),
        ("convt2d_stride_pad_outpad", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), (2, 4, 4, 5)),
        ("convt2d_dilation_groups", nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), dilation=(2, 1), groups=2,
                                                      padding=(2, 0)), (1, 4, 5, 4)),
        ("convt2d_nobias", nn.ConvTranspose2d(2, 3, 4, stride=2, padding=1, bias=False), (2, 2, 3, 3)),
        ("convt1d", nn.ConvTranspose1d(3, 2, 5, stride=3, padding=2, output_padding=2), (2, 3, 6)),
        ("convt3d", nn.ConvTranspose3d(2, 2, 2, stride=2), (1, 2, 2, 3, 2))]:
    run_case(nm, ConvT(conv, xs), [torch.randn(*xs)])

probe("reduce_l2_axis1", (2, 5, 3), lambda m, x: x.norm(p=2, dim=1))
probe("reduce_l2_keepdims_all", (3, 4), lambda m, x: x.norm(p=2, dim=(0, 1), keepdim=True) * x)
probe("reduce_l2_normalize", (2, 6, 4), lambda m, x: F.normalize(x, dim=-1))
probe("reduce_l1_axis_neg", (2, 3, 4), lambda m, x: x.norm(p=1, dim=-1))
probe("reduce_l1_keepdims", (4, 5), lambda m, x: x.norm(p=1, dim=0, keepdim=True) * x)
probe("reduce_logsumexp", (2, 5, 3), lambda m, x: torch.logsumexp(x * 3, 1))
probe("reduce_logsumexp_keep", (3, 6), lambda m, x: torch.logsumexp(x, -1, keepdim=True) - x)


def to_sum_square(g):
    """Pow(x, 2) -> ReduceSum(axes) edited into ReduceSumSquare(x) with the axes as its attribute (opset 14)"""
    import onnx
    from onnx import numpy_helper
    prod = {o: n for n in g.node for o in n.output}
    rs = next(n for n in g.node if n.op_type == "ReduceSum")
    pw = prod[rs.input[0]]
    axes = numpy_helper.to_array(prod[rs.input[1]].attribute[0].t).tolist()
    rs.op_type = "ReduceSumSquare"
    rs.input[:] = [pw.input[0]]
    rs.attribute.append(onnx.helper.make_attribute("axes", axes))
    g.node.remove(pw)


probe("reduce_sumsquare", (2, 5, 3), lambda m, x: (x ** 2).sum(dim=1), patch=to_sum_square)
probe("reduce_sumsquare_keep", (3, 4), lambda m, x: (x ** 2).sum(dim=(0, 1), keepdim=True) * x, patch=to_sum_square)


# Resize as torch exports F.interpolate: nearest (floor, asymmetric), linear, bilinear and
# trilinear with and without align_corners, bicubic, up and down, by scale and by size
for nm, shape, kw in [
        ("resize_nearest_x2", (2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
        ("resize_nearest_size", (2, 2, 5, 7), dict(size=(8, 3), mode="nearest")),
        ("resize_linear_1d", (2, 3, 7), dict(scale_factor=2.5, mode="linear")),
        ("resize_bilinear", (2, 2, 4, 5), dict(scale_factor=(2, 3), mode="bilinear")),
        ("resize_bilinear_corners", (2, 2, 5, 4), dict(size=(9, 7), mode="bilinear", align_corners=True)),
        ("resize_bilinear_down", (1, 3, 8, 9), dict(size=(3, 4), mode="bilinear")),
        ("resize_trilinear", (1, 2, 3, 4, 3), dict(scale_factor=2, mode="trilinear")),
        ("resize_bicubic", (1, 2, 4, 5), dict(size=(7, 9), mode="bicubic")),
        ("resize_bicubic_corners", (1, 1, 5, 4), dict(scale_factor=2, mode="bicubic", align_corners=True))]:
    probe(nm, shape, lambda m, x, kw=kw: F.interpolate(x, **kw))


def onnx_case(name, build, params, inputs, torch_loss, opset, rtol=1e-4, consts=None):
    """a model written with onnx.helper (an op torch 1.13 does not export): build(params, inputs) ->
    (nodes, output) of a scalar 'out'; each param an initializer that trains, compared with autograd's
    gradient of torch_loss(params, inputs) on both backends; consts: initializers that do not (indices)"""
    if ONLY and not re.search(ONLY, name):
        return
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    nodes = build()
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                        for k, v in inputs.items()],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [])],
                          [numpy_helper.from_array(v, k) for k, v in {**params, **(consts or {})}.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    for k, v in inputs.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    plan = os.path.join(d, "g.plan")
    r = subprocess.run([PPCC, path, "--train", "--loss", "out", "-b", str(next(iter(inputs.values())).shape[0]),
                        "-q", "-o", plan], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: ppcc exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    wl = torch_loss(tp, {k: torch.tensor(v) for k, v in inputs.items()})
    wl.backward()
    want = {k: t.grad.numpy() for k, t in tp.items()}
    for be in BACKENDS:
        o = os.path.join(d, "out_" + be)
        r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", o, "-q", "--backend", be],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name} on {be}: pprt exit {r.returncode}: {r.stderr.strip()[-400:]}")
        if r.returncode:
            continue
        check_no_host(name, be, plan, os.path.join(d, "data"))
        got = np.load(os.path.join(o, "loss.npy"))
        check(np.allclose(got, wl.detach().numpy(), rtol=rtol, atol=1e-6), f"{name} on {be}: loss {got} want {wl}")
        M = max(float(np.abs(w).max()) for w in want.values())
        for k, w in want.items():
            f = os.path.join(o, file_name(k + ".grad") + ".npy")
            check(os.path.exists(f), f"{name} on {be}: no gradient of '{k}'")
            if os.path.exists(f):
                gg = np.load(f)
                err = float(np.abs(gg - w).max()) if gg.shape == w.shape else float("inf")
                check(gg.shape == w.shape and np.allclose(gg, w, rtol=rtol, atol=1e-5 * M),
                      f"{name} on {be}: '{k}' off by {err:.3g} (largest {M:.3g})")


def groupnorm_case(name, xshape, G, opset, eps=1e-5):
    """GroupNormalization(x + p, scale, bias) * R summed: scale and bias per group at opset 18, per channel at
    21; the oracle F.group_norm with the affine part spread over the channels"""
    from onnx import helper
    rng = np.random.default_rng(len(name))
    C = xshape[1]
    n = C if opset >= 21 else G
    params = {"p": (rng.standard_normal(xshape) * 0.1).astype(np.float32),
              "scale": rng.standard_normal(n).astype(np.float32),
              "bias": rng.standard_normal(n).astype(np.float32),
              "R": rng.standard_normal(xshape).astype(np.float32)}
    inputs = {"x": rng.standard_normal(xshape).astype(np.float32)}

    def build():
        return [helper.make_node("Add", ["x", "p"], ["xp"]),
                helper.make_node("GroupNormalization", ["xp", "scale", "bias"], ["y"], num_groups=G, epsilon=eps),
                helper.make_node("Mul", ["y", "R"], ["yr"]),
                helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    def torch_loss(tp, ti):
        y = F.group_norm(ti["x"] + tp["p"], G, eps=eps)
        sh = (1, C) + (1,) * (len(xshape) - 2)
        rep = 1 if opset >= 21 else C // G
        sc = tp["scale"].repeat_interleave(rep).reshape(sh)
        b = tp["bias"].repeat_interleave(rep).reshape(sh)
        return ((y * sc + b) * tp["R"]).sum()

    onnx_case(name, build, params, inputs, torch_loss, opset)


def attention_case(name, B, Hq, Hkv, Sq, Skv, D, Dv, three_d=False, causal=0, scale=None, softcap=0.0, mask=None):
    """Attention (opset 23) of Q, K, V = inputs + weights, summed against R; mask: None, 'float' (a trained
    bias [Sq, Skv], broadcast) or 'bool' ([B, 1, Sq, Skv], an input). The oracle: the definition in torch,
    query head h reading key/value head h // (Hq / Hkv)"""
    from onnx import helper
    rng = np.random.default_rng(len(name) + 7)
    qs, ks, vs = (B, Hq, Sq, D), (B, Hkv, Skv, D), (B, Hkv, Skv, Dv)
    if three_d:
        qs, ks, vs = (B, Sq, Hq * D), (B, Skv, Hkv * D), (B, Skv, Hkv * Dv)
    ys = (B, Sq, Hq * Dv) if three_d else (B, Hq, Sq, Dv)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    params = {"pq": f(*qs) * 0.5, "pk": f(*ks) * 0.5, "pv": f(*vs), "R": f(*ys)}
    inputs = {"xq": f(*qs), "xk": f(*ks), "xv": f(*vs)}
    if mask == "float":
        params["bias"] = f(Sq, Skv)
    if mask == "bool":
        mb = rng.random((B, 1, Sq, Skv)) > 0.3
        mb[..., 0] = True  # no row masked out entirely
        inputs["m"] = mb
    attrs = dict(is_causal=causal)
    if three_d:
        attrs.update(q_num_heads=Hq, kv_num_heads=Hkv)
    if scale is not None:
        attrs["scale"] = scale
    if softcap:
        attrs["softcap"] = softcap

    def build():
        mname = {"float": "bias", "bool": "m"}.get(mask, "")
        ins = ["q", "k", "v"] + ([mname] if mname else [])
        return [helper.make_node("Add", ["xq", "pq"], ["q"]), helper.make_node("Add", ["xk", "pk"], ["k"]),
                helper.make_node("Add", ["xv", "pv"], ["v"]), helper.make_node("Attention", ins, ["y"], **attrs),
                helper.make_node("Mul", ["y", "R"], ["yr"]),
                helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    def torch_loss(tp, ti):
        q, k, v = ti["xq"] + tp["pq"], ti["xk"] + tp["pk"], ti["xv"] + tp["pv"]
        if three_d:
            q = q.reshape(B, Sq, Hq, D).transpose(1, 2)
            k = k.reshape(B, Skv, Hkv, D).transpose(1, 2)
            v = v.reshape(B, Skv, Hkv, Dv).transpose(1, 2)
        k, v = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1)
        s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / D ** 0.5)
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        if mask == "float":
            s = s + tp["bias"]
        if mask == "bool":
            s = s.masked_fill(~ti["m"], float("-inf"))
        if causal:
            s = s.masked_fill(torch.ones(Sq, Skv, dtype=torch.bool).triu(1), float("-inf"))
        y = torch.softmax(s, -1) @ v
        if three_d:
            y = y.transpose(1, 2).reshape(B, Sq, Hq * Dv)
        return (y * tp["R"]).sum()

    onnx_case(name, build, params, inputs, torch_loss, 23)


attention_case("attention_4d", 2, 2, 2, 3, 5, 4, 4)
attention_case("attention_4d_causal_dv", 2, 2, 1, 4, 4, 4, 6, causal=1)
attention_case("attention_3d_gqa_bias", 2, 4, 2, 3, 5, 4, 3, three_d=True, mask="float", scale=0.3)
attention_case("attention_bool_mask_softcap", 2, 3, 3, 4, 6, 5, 5, mask="bool", softcap=2.0)


# PRelu (one slope, a slope per channel), CumSum (plain, reverse, exclusive), ReduceLogSum,
# RMSNormalization (opset 23)
probe("prelu_one", (2, 3, 4), lambda m, x: m.mods[0](x), [nn.PReLU(1, 0.3)])
probe("prelu_channels", (2, 4, 3, 3), lambda m, x: m.mods[0](x), [nn.PReLU(4)])
probe("cumsum", (2, 5, 3), lambda m, x: torch.cumsum(x, 1))


def cumsum_attr(name, v):
    def patch(g):
        import onnx
        next(n for n in g.node if n.op_type == "CumSum").attribute.append(onnx.helper.make_attribute(name, v))
    return patch


probe("cumsum_reverse", (3, 6), lambda m, x: torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])
      if not torch.onnx.is_in_onnx_export() else torch.cumsum(x, 1), patch=cumsum_attr("reverse", 1))
probe("cumsum_exclusive", (2, 4, 3), lambda m, x: torch.cumsum(x, 2) - x
      if not torch.onnx.is_in_onnx_export() else torch.cumsum(x, 2), patch=cumsum_attr("exclusive", 1))


def to_log_sum(g):
    """ReduceSum(axes) -> Log edited into ReduceLogSum with the axes as its attribute (opset 14)"""
    import onnx
    from onnx import numpy_helper
    prod = {o: n for n in g.node for o in n.output}
    lg = next(n for n in g.node if n.op_type == "Log")
    rs = prod[lg.input[0]]
    axes = numpy_helper.to_array(prod[rs.input[1]].attribute[0].t).tolist()
    rs.op_type = "ReduceLogSum"
    rs.input[:] = [rs.input[0]]
    rs.output[:] = [lg.output[0]]
    rs.attribute.append(onnx.helper.make_attribute("axes", axes))
    g.node.remove(lg)


probe("reduce_logsum", (2, 5, 3), lambda m, x: torch.log((x * x + 0.5).sum(dim=1)), patch=to_log_sum)
probe("reduce_logsum_keep", (3, 4), lambda m, x: torch.log((x * x + 0.5).sum(dim=-1, keepdim=True)) * x,
      patch=to_log_sum)


def rmsnorm_case(name, xshape, axis, eps=1e-5, scale_shape=None):
    from onnx import helper
    rng = np.random.default_rng(len(name) + 11)
    ax = axis % len(xshape)
    sshape = scale_shape or xshape[ax:]
    params = {"p": (rng.standard_normal(xshape) * 0.1).astype(np.float32),
              "scale": rng.standard_normal(sshape).astype(np.float32),
              "R": rng.standard_normal(xshape).astype(np.float32)}
    inputs = {"x": rng.standard_normal(xshape).astype(np.float32)}

    def build():
        return [helper.make_node("Add", ["x", "p"], ["xp"]),
                helper.make_node("RMSNormalization", ["xp", "scale"], ["y"], axis=axis, epsilon=eps),
                helper.make_node("Mul", ["y", "R"], ["yr"]),
                helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    def torch_loss(tp, ti):
        x = ti["x"] + tp["p"]
        dims = tuple(range(ax, len(xshape)))
        y = x * torch.rsqrt((x * x).mean(dims, keepdim=True) + eps) * tp["scale"]
        return (y * tp["R"]).sum()

    onnx_case(name, build, params, inputs, torch_loss, 23)


rmsnorm_case("rmsnorm_last", (2, 3, 8), -1)
rmsnorm_case("rmsnorm_2dims", (2, 4, 3, 5), 2, eps=1e-3)
rmsnorm_case("rmsnorm_broadcast_scale", (3, 4, 6), 1, scale_shape=(1, 6))


class LSTMCase(nn.Module):
    """sum(lstm(x + p)'s Y * R) + sum(Y_h * R_h) + sum(Y_c * R_c), the initial states weights too"""

    def __init__(self, x_shape, hidden, layers=1, bidirectional=False, batch_first=False, states=False, seed=5):
        super().__init__()
        self.lstm = nn.LSTM(x_shape[-1], hidden, layers, bidirectional=bidirectional, batch_first=batch_first)
        self.p = nn.Parameter(torch.randn(*x_shape) * 0.1)
        D, N = layers * (2 if bidirectional else 1), x_shape[0 if batch_first else 1]
        self.h0 = nn.Parameter(torch.randn(D, N, hidden) * 0.5) if states else None
        self.c0 = nn.Parameter(torch.randn(D, N, hidden) * 0.5) if states else None
        with torch.no_grad():
            y, (h, c) = self.lstm(torch.zeros(*x_shape))
        gen = torch.Generator().manual_seed(seed)
        for nm, t in (("R", y), ("Rh", h), ("Rc", c)):
            self.register_buffer(nm, torch.randn(*t.shape, generator=gen))

    def forward(self, x):
        y, (h, c) = self.lstm(x + self.p, (self.h0, self.c0)) if self.h0 is not None else self.lstm(x + self.p)
        return (y * self.R).sum() + (h * self.Rh).sum() + (c * self.Rc).sum()


for nm, xs, kw in [("lstm", (4, 3, 5), dict(hidden=6)),
                   ("lstm_bidirectional_states", (5, 2, 3), dict(hidden=4, bidirectional=True, states=True)),
                   ("lstm_2layers_batch_first", (2, 6, 4), dict(hidden=5, layers=2, batch_first=True))]:
    run_case(nm, LSTMCase(xs, **kw), [torch.randn(*xs)])


def onnx_refused(name, nodes, params, inputs, outputs, want, opset=14):
    """a model written with onnx.helper that ppcc --train --loss out must refuse: exit 2, `want` in the message"""
    if ONLY and not re.search(ONLY, name):
        return
    import onnx
    from onnx import helper, numpy_helper
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    vi = lambda k, v: helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)  # noqa
    g = helper.make_graph(nodes, name, [vi(k, v) for k, v in inputs.items()], [vi(k, v) for k, v in outputs.items()],
                          [numpy_helper.from_array(v, k) for k, v in params.items()])
    path = os.path.join(d, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    r = subprocess.run([PPCC, path, "--train", "--loss", "out", "-q", "-o", os.path.join(d, "g.plan")],
                       capture_output=True, text=True)
    check(r.returncode == 2 and want in r.stderr, f"{name}: exit {r.returncode}, want 2 and '{want}': {r.stderr[-300:]}")


def lstm_refused(name, want, **attrs):
    from onnx import helper
    rng = np.random.default_rng(3)
    H, I = 3, 2
    params = {"W": rng.standard_normal((1, 4 * H, I)).astype(np.float32),
              "Rw": rng.standard_normal((1, 4 * H, H)).astype(np.float32)}
    nodes = [helper.make_node("LSTM", ["x", "W", "Rw"], ["y"], hidden_size=H, **attrs),
             helper.make_node("ReduceSum", ["y"], ["out"], keepdims=0)]
    onnx_refused(name, nodes, params, {"x": np.zeros((4, 2, I), np.float32)}, {"out": np.zeros((), np.float32)}, want)




class GRUCase(nn.Module):
    """sum(gru(x + p)'s Y * R) + sum(Y_h * R_h), the initial state a weight too (torch's GRU exports
    linear_before_reset=1)"""

    def __init__(self, x_shape, hidden, layers=1, bidirectional=False, batch_first=False, states=False, seed=6):
        super().__init__()
        self.gru = nn.GRU(x_shape[-1], hidden, layers, bidirectional=bidirectional, batch_first=batch_first)
        self.p = nn.Parameter(torch.randn(*x_shape) * 0.1)
        D, N = layers * (2 if bidirectional else 1), x_shape[0 if batch_first else 1]
        self.h0 = nn.Parameter(torch.randn(D, N, hidden) * 0.5) if states else None
        with torch.no_grad():
            y, h = self.gru(torch.zeros(*x_shape))
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("R", torch.randn(*y.shape, generator=gen))
        self.register_buffer("Rh", torch.randn(*h.shape, generator=gen))

    def forward(self, x):
        y, h = self.gru(x + self.p, self.h0) if self.h0 is not None else self.gru(x + self.p)
        return (y * self.R).sum() + (h * self.Rh).sum()


for nm, xs, kw in [("gru", (4, 3, 5), dict(hidden=6)),
                   ("gru_bidirectional_states", (5, 2, 3), dict(hidden=4, bidirectional=True, states=True)),
                   ("gru_2layers_batch_first", (2, 6, 4), dict(hidden=5, layers=2, batch_first=True))]:
    run_case(nm, GRUCase(xs, **kw), [torch.randn(*xs)])


class RNNCase(nn.Module):
    def __init__(self, x_shape, hidden, nonlinearity="tanh", bidirectional=False, states=False, seed=8):
        super().__init__()
        self.rnn = nn.RNN(x_shape[-1], hidden, nonlinearity=nonlinearity, bidirectional=bidirectional)
        self.p = nn.Parameter(torch.randn(*x_shape) * 0.1)
        self.h0 = nn.Parameter(torch.randn(2 if bidirectional else 1, x_shape[1], hidden) * 0.5) if states else None
        with torch.no_grad():
            y, h = self.rnn(torch.zeros(*x_shape))
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("R", torch.randn(*y.shape, generator=gen))
        self.register_buffer("Rh", torch.randn(*h.shape, generator=gen))

    def forward(self, x):
        y, h = self.rnn(x + self.p, self.h0) if self.h0 is not None else self.rnn(x + self.p)
        return (y * self.R).sum() + (h * self.Rh).sum()


run_case("rnn_tanh", RNNCase((5, 3, 4), 6), [torch.randn(5, 3, 4)])
run_case("rnn_relu_bidirectional_states", RNNCase((4, 2, 3), 5, "relu", True, True), [torch.randn(4, 2, 3)])


def gru_lbr0(g):
    """torch's GRU export with linear_before_reset 0: the other equation (the oracle below)"""
    import onnx
    n = next(n for n in g.node if n.op_type == "GRU")
    for a in list(n.attribute):
        if a.name == "linear_before_reset":
            n.attribute.remove(a)
    n.attribute.append(onnx.helper.make_attribute("linear_before_reset", 0))


class GRULbr0(nn.Module):
    """a one-layer GRU written out with h~ = tanh(W_h x + R_h (r h) + b): ONNX's linear_before_reset 0
    (the export is torch's GRU, edited)"""

    def __init__(self, S=4, N=3, I=5, H=4):
        super().__init__()
        self.gru = nn.GRU(I, H)
        self.p = nn.Parameter(torch.randn(S, N, I) * 0.1)
        self.register_buffer("R", torch.randn(S, N, H, generator=torch.Generator().manual_seed(9)))

    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return (self.gru(x + self.p)[0] * self.R).sum()
        g, H = self.gru, self.gru.hidden_size
        Wr, Wz, Wn = g.weight_ih_l0.split(H)
        Rr, Rz, Rn = g.weight_hh_l0.split(H)
        br, bz, bn = g.bias_ih_l0.split(H)
        cr, cz, cn = g.bias_hh_l0.split(H)
        h = torch.zeros(x.shape[1], H)
        ys = []
        for t in range(x.shape[0]):
            xt = x[t] + self.p[t]
            r = torch.sigmoid(xt @ Wr.T + br + h @ Rr.T + cr)
            z = torch.sigmoid(xt @ Wz.T + bz + h @ Rz.T + cz)
            n = torch.tanh(xt @ Wn.T + bn + (r * h) @ Rn.T + cn)
            h = (1 - z) * n + z * h
            ys.append(h)
        return (torch.stack(ys) * self.R).sum()


run_case("gru_linear_before_reset0", GRULbr0(), [torch.randn(4, 3, 5)], patch=gru_lbr0)

lstm_refused("lstm_clip_refused", "its clip has no gradient rule", clip=2.0)
lstm_refused("lstm_activations_refused", "activations other than Sigmoid, Tanh, Tanh", activations=["Relu", "Tanh", "Tanh"])


def dropout_mask_read():
    from onnx import helper
    params = {"w": np.ones((3, 4), np.float32), "ratio": np.array(0.5, np.float32), "train": np.array(True)}
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]),
             helper.make_node("Dropout", ["xw", "ratio", "train"], ["y", "mask"]),
             helper.make_node("ReduceSum", ["y"], ["out"], keepdims=0)]
    onnx_refused("dropout_mask_read_refused", nodes, params, {"x": np.zeros((3, 4), np.float32)},
                 {"out": np.zeros((), np.float32), "mask": np.zeros((3, 4), bool)}, "its mask output is read")


dropout_mask_read()


groupnorm_case("groupnorm_op18", (2, 6, 4, 5), 3, 18)
groupnorm_case("groupnorm_op18_1group", (3, 4, 7), 1, 18)
groupnorm_case("groupnorm_op21", (2, 8, 3, 3), 4, 21)
groupnorm_case("groupnorm_op21_per_channel_groups", (2, 4, 5), 4, 21, eps=1e-3)
groupnorm_case("groupnorm_op21_rank2", (5, 6), 2, 21)



def lp_case(name, op, xshape, opset=18, **at):
    """LpNormalization or LpPool of x + p, summed against R, against the definition in torch: |x| summed (ONNX's;
    onnx's reference evaluator sums x itself for LpNormalization's p = 1, so grad_fd.py cannot check that), for
    LpPool the window sums of |x|^p (pads add zeros: an average with the pads counted, times the window), ^(1/p)"""
    from onnx import helper
    rng = np.random.default_rng(len(name) + 11)
    x = rng.standard_normal(xshape).astype(np.float32)
    x = np.sign(x) * (np.abs(x) + 0.2)  # off the kink of |x| at 0
    p_ = at.get("p", 2)
    if op == "LpPool":
        k, st, pads = at["kernel_shape"], at.get("strides", [1] * len(at["kernel_shape"])), at.get("pads")
        pd = pads[:len(k)] if pads else [0] * len(k)
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d}[len(k)]

        def f(v):
            return (pool(v.abs() ** p_, k, st, pd, count_include_pad=True) * float(np.prod(k))) ** (1.0 / p_)
        with torch.no_grad():
            oshape = f(torch.tensor(x)).shape
    else:
        ax = at.get("axis", -1)

        def f(v):
            return v / (v.abs().sum(ax, keepdim=True) if p_ == 1 else v.norm(dim=ax, keepdim=True))
        oshape = xshape
    params = {"p": (rng.standard_normal(xshape) * 0.05).astype(np.float32),
              "R": rng.standard_normal(tuple(oshape)).astype(np.float32)}

    def build():
        return [helper.make_node("Add", ["x", "p"], ["xp"]), helper.make_node(op, ["xp"], ["y"], **at),
                helper.make_node("Mul", ["y", "R"], ["yr"]), helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    onnx_case(name, build, params, {"x": x}, lambda tp, ti: (f(ti["x"] + tp["p"]) * tp["R"]).sum(), opset)


class GridS(nn.Module):
    """grid_sample(x + p, grid) * R summed: p carries X's gradient, the grid (a weight, points in [-1.2, 1.2]:
    some outside, where the padding decides) its own"""

    def __init__(self, xshape, out_hw, **kw):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.kw = kw
        self.p = nn.Parameter(torch.randn(*xshape, generator=g) * 0.1)
        self.grid = nn.Parameter(torch.rand(xshape[0], *out_hw, 2, generator=g) * 2.4 - 1.2)
        self.register_buffer("R", torch.randn(xshape[0], xshape[1], *out_hw, generator=g))

    def forward(self, x):
        return (F.grid_sample(x + self.p, self.grid, **self.kw) * self.R).sum()


# GridSample (2026-12-06; refused by name before): pp.GridSampleGrad against autograd, both gradients, every mode
# and padding (cubic border and reflection: PyTorch's taps, which the forward follows), both corner alignments
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for ac in (False, True):
            run_case(f"gridsample_{mode}_{pad}_{int(ac)}", GridS((2, 3, 5, 6), (4, 3), mode=mode, padding_mode=pad,
                                                                 align_corners=ac), [torch.randn(2, 3, 5, 6)], opset=16)

def stn_case(name, xshape, out_hw, align, mode="linear", pad="zeros"):
    """a spatial transformer: AffineGrid(theta) then GridSample(x, grid) at opset 20, theta a weight near the
    identity; the oracle F.affine_grid and F.grid_sample"""
    from onnx import helper, TensorProto
    rng = np.random.default_rng(len(name) + 3)
    N, C = xshape[0], xshape[1]
    theta = (np.tile(np.eye(2, 3), (N, 1, 1)) + rng.standard_normal((N, 2, 3)) * 0.2).astype(np.float32)
    params = {"theta": theta, "R": rng.standard_normal((N, C, *out_hw)).astype(np.float32)}
    size = [N, C, *out_hw]

    def build():
        return [helper.make_node("Constant", [], ["size"], value=helper.make_tensor("s", TensorProto.INT64, [4], size)),
                helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
                helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad, align_corners=align),
                helper.make_node("Mul", ["y", "R"], ["yr"]), helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    def torch_loss(tp, ti):
        grid = F.affine_grid(tp["theta"], size, align_corners=bool(align))
        tm = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
        y = F.grid_sample(ti["x"], grid, mode=tm, padding_mode=pad, align_corners=bool(align))
        return (y * tp["R"]).sum()

    onnx_case(name, build, params, {"x": rng.standard_normal(xshape).astype(np.float32)}, torch_loss, 20)


# AffineGrid (2026-12-06): theta's gradient through GridSample's grid gradient, a spatial transformer's training
stn_case("stn_affine_grid", (2, 3, 6, 5), (4, 4), 0)
stn_case("stn_affine_grid_aligned_border", (1, 2, 5, 7), (6, 3), 1, pad="border")
stn_case("stn_affine_grid_bicubic", (2, 1, 6, 6), (5, 5), 0, mode="cubic", pad="reflection")

# (2026-12-06: rules of their own; refused by name before)
lp_case("lpnorm_p1", "LpNormalization", (3, 5), opset=13, axis=-1, p=1)
lp_case("lpnorm_p2_axis1", "LpNormalization", (2, 4, 3), opset=13, axis=1, p=2)
lp_case("lppool_p2", "LpPool", (2, 3, 6, 5), kernel_shape=[2, 3], strides=[2, 1], p=2)
lp_case("lppool_p3_pads", "LpPool", (1, 2, 7), kernel_shape=[3], pads=[1, 1], p=3)
lp_case("lppool_p1", "LpPool", (2, 2, 4, 4), kernel_shape=[2, 2], p=1)


def scatter_reduce_case(name, op, red, x, idx, u, opset=18):
    """ScatterElements (axis 1) or ScatterND (tuples of one, into the rows) of x + p under reduction red, summed
    against R, against torch's scatter_reduce (include_self): ties among the data and the updates at a place share
    its gradient evenly (amax, amin), exact zeros among a product's updates (prod). p starts at zeros, so the ties
    and zeros drawn here are exact in the model"""
    from onnx import helper
    rng = np.random.default_rng(len(name) + 3)
    params = {"p": np.zeros_like(x), "u": u, "R": rng.standard_normal(x.shape).astype(np.float32)}
    tred = {"max": "amax", "min": "amin", "mul": "prod"}[red]
    dim = 1 if op == "ScatterElements" else 0
    tidx = torch.tensor(idx if op == "ScatterElements" else np.broadcast_to(idx, u.shape).copy())

    def build():
        at = {"axis": 1} if op == "ScatterElements" else {}
        return [helper.make_node("Add", ["x", "p"], ["xp"]), helper.make_node(op, ["xp", "i", "u"], ["y"],
                                                                            reduction=red, **at),
                helper.make_node("Mul", ["y", "R"], ["yr"]), helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]

    def loss(tp, ti):
        y = (ti["x"] + tp["p"]).scatter_reduce(dim, tidx, tp["u"], tred, include_self=True)
        return (y * tp["R"]).sum()
    onnx_case(name, build, params, {"x": x}, loss, opset, consts={"i": idx})


# (2026-12-06) the Scatter reductions mul, max and min (refused by name before); grad_fd.py draws them too
xa = np.array([[1.0, 2.0, 3.0, 0.5], [4.0, -1.0, 2.0, 2.0]], np.float32)
ia = np.array([[0, 0, 2, 3, 3], [1, 3, 3, 0, 2]], np.int64)
# ties: place (0, 0) data 1 with updates 1 and 1; (0, 3) data 0.5 below 2 and 2; (1, 3) data 2 with update 2
ua = np.array([[1.0, 1.0, 2.5, 2.0, 2.0], [-1.0, 2.0, 0.0, 3.0, 2.0]], np.float32)
for red in ("max", "min"):
    scatter_reduce_case(f"scatterel_{red}_ties", "ScatterElements", red, xa, ia, ua)
# products: (0, 0) two zero updates, (0, 3) one, (1, 3) one zero update and a zero datum elsewhere
um = np.array([[0.0, 0.0, 1.5, -0.5, 0.0], [2.0, 0.0, 1.5, -1.0, 0.7]], np.float32)
xm = xa.copy()
xm[1, 1] = 0.0
scatter_reduce_case("scatterel_mul_zeros", "ScatterElements", "mul", xm, ia, um)
xn = np.array([[1.0, 2.0, 0.0], [3.0, -1.0, 2.0], [0.5, 0.5, 0.5]], np.float32)
inn = np.array([[0], [2], [0], [2]], np.int64)
un = np.array([[1.0, 2.0, 0.0], [0.5, 0.5, 4.0], [0.0, 2.0, 1.0], [0.5, -3.0, 0.5]], np.float32)
for red in ("max", "min", "mul"):
    scatter_reduce_case(f"scatternd_{red}", "ScatterND", red, xn, inn, un)

testlib.finish("train_grads_norms")
