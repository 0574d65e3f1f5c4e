#!/usr/bin/env python3
"""Gradients from ppcc --train against PyTorch autograd.

Each case is a small torch module with a loss, exported as a training
export is (TrainingMode.TRAINING, no constant folding, opset 14); ppcc
--train compiles the loss and the gradient of every weight, pprt runs it on
the reference kernels, on oneDNN and on cuda-emu (the CUDA step list on the
host: the part of a GPU run that runs here), and the loss and each weight's
gradient must match autograd's in float32 within rtol 1e-4 and an atol of
1e-5 of the largest gradient (sums run in another order on each side).
A weight placed before an op (x + p, p of x's shape) makes the op's input
gradient a weight's gradient, so input gradients are checked too; an op
followed by a square gets a gradient that depends on the data, which the
plan computes at run time (a gradient of the weights alone folds). The cases
cover every op that has a rule: Gemm, MatMul (batched, broadcast, 1-D),
Conv (strides, padding, dilation, groups, 1-D and 3-D), MaxPool (ties after
a Relu, padding, ceil_mode), GlobalAveragePool, the binary ops with
broadcasting, every unary op with a derivative row, Softmax, LogSoftmax,
ReduceSum and ReduceMean, Reshape and Flatten, the data movement ops
(Squeeze, Unsqueeze, Concat, Split by sizes, chunks, unbind and, written by
hand at opset 18, num_outputs; Slice with negative starts, steps and flips;
Gather of constant and data indices, repeated; GatherElements; Expand;
Pad, cropping too, reflect and edge; TopK's values; Trilu; DepthToSpace and
SpaceToDepth; ScatterElements (torch's scatter and scatter_add) and ScatterND;
Tile; Einsum with ellipses, broadcasting and labels of one operand; Where;
Cast; Shape), and the built-in losses; and a model whose gradient sum of
two readers crosses a cut (--split-at), and weight standardization (a
BatchNormalization in training mode over a weight's rows).
Usage: grads.py PPCC PPRT WORK"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import file_name, read_grad  # noqa: E402,F401

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_grads")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.manual_seed(0)
BACKENDS = ("ref", "dnnl", "cuda-emu")  # cuda-emu: the CUDA step list on the host (grad ops on their CUDA steps)


def export(mod, args, path, input_names, mode=None):
    torch.onnx.export(mod, args, path, input_names=input_names, output_names=["out"], opset_version=14,
                      training=mode or torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      keep_initializers_as_inputs=False)


def run_case(name, mod, inputs, loss="out", labels=None, target=None, torch_loss=None, rtol=1e-4, pp=1, mode=None,
             extra=()):
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    names = [f"x{i}" for i in range(len(inputs))]
    export(mod, tuple(inputs), path, names, mode)
    for n, v in zip(names, inputs):
        np.save(os.path.join(d, "data", n + ".npy"), v.numpy())
    if labels is not None:
        np.save(os.path.join(d, "data", "labels.npy"), labels.numpy())
    if target is not None:
        np.save(os.path.join(d, "data", "target.npy"), target.numpy())
    plan = os.path.join(d, "g.plan")
    batch = str(inputs[0].shape[0])
    r = subprocess.run([PPCC, path, "--train", "--loss", loss, "-b", batch, "-pp", str(pp), "-q", "-o", plan, *extra],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: ppcc exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return
    # the oracle
    mod.zero_grad()
    out = mod(*inputs)
    want_loss = torch_loss(out) if torch_loss else out
    want_loss.backward()
    want = {n: p.grad.detach().numpy() for n, p in mod.named_parameters() if p.grad is not None}
    for be in BACKENDS:
        o = os.path.join(d, "out_" + be)
        r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", o, "-q", "--backend", be],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name} on {be}: pprt exit {r.returncode}: {r.stderr.strip()[-400:]}")
        if r.returncode:
            continue
        got_loss = np.load(os.path.join(o, "loss.npy"))
        wl = want_loss.detach().numpy()
        check(np.allclose(got_loss, wl, rtol=rtol, atol=1e-6), f"{name} on {be}: loss {got_loss} want {wl}")
        for pn, g in want.items():
            got = read_grad(o, pn, g.shape, f"{name} on {be}")
            if got is None:
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


def probe(name, shape, f, mods=None, x=None, **kw):
    m = Probe(shape, f, mods)
    if x is None:
        x = torch.randn(*shape)
    run_case(name, m, [x], **kw)


# ---- products ---------------------------------------------------------------------------------
probe("gemm", (4, 6), lambda m, x: m.mods[0](x), [nn.Linear(6, 5)])
probe("gemm_nobias", (3, 7), lambda m, x: m.mods[0](x), [nn.Linear(7, 2, bias=False)])
probe("matmul_3d", (2, 3, 6), lambda m, x: m.mods[0](x), [nn.Linear(6, 4)])
W = nn.Parameter(torch.randn(5, 3))


class MM(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.a = nn.Parameter(torch.randn(*a))
        self.b = nn.Parameter(torch.randn(*b))

    def forward(self, x):
        return ((x @ self.a) @ self.b).square().sum() if x.dim() > 1 else ((self.a @ x) * self.b).sum()


run_case("matmul_broadcast", MM((4, 5), (2, 1, 5, 3)), [torch.randn(2, 3, 6, 4)])
run_case("matmul_1d", MM((3, 4), (3,)), [torch.randn(4)])

# ---- convolutions and pools -------------------------------------------------------------------
probe("conv", (2, 3, 7, 7), lambda m, x: m.mods[0](x), [nn.Conv2d(3, 4, 3)])
probe("conv_stride_pad", (2, 3, 9, 8), lambda m, x: m.mods[0](x), [nn.Conv2d(3, 5, 3, stride=2, padding=1)])
probe("conv_dil_group", (1, 4, 9, 9), lambda m, x: m.mods[0](x), [nn.Conv2d(4, 6, 3, dilation=2, groups=2, padding=2)])
probe("conv_depthwise", (2, 4, 6, 6), lambda m, x: m.mods[0](x), [nn.Conv2d(4, 4, 3, groups=4, padding=1, bias=False)])
probe("conv_1x1", (2, 6, 5, 5), lambda m, x: m.mods[0](x), [nn.Conv2d(6, 3, 1)])
probe("conv1d", (2, 3, 11), lambda m, x: m.mods[0](x), [nn.Conv1d(3, 4, 3, stride=2, padding=1)])
probe("conv3d", (1, 2, 5, 5, 4), lambda m, x: m.mods[0](x), [nn.Conv3d(2, 3, 3, padding=1)])
probe("maxpool_relu_ties", (2, 3, 8, 8), lambda m, x: F.max_pool2d(F.relu(x - 0.05), 2))
probe("maxpool_pad_stride", (2, 2, 9, 9), lambda m, x: F.max_pool2d(x, 3, stride=2, padding=1))
probe("maxpool_ceil", (1, 2, 7, 7), lambda m, x: F.max_pool2d(x, 2, ceil_mode=True))
probe("global_avg_pool", (2, 3, 5, 6), lambda m, x: F.adaptive_avg_pool2d(x, 1).flatten(1))

# ---- elementwise ------------------------------------------------------------------------------


class Bin(nn.Module):
    def __init__(self, f, a, b):
        super().__init__()
        self.f = f
        self.a = nn.Parameter(torch.randn(*a))
        self.b = nn.Parameter(torch.rand(*b) + 0.5)

    def forward(self, x):
        return (self.f(x + self.a, self.b) ** 2).sum()


for nm, f in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div)):
    run_case(f"{nm}_broadcast", Bin(f, (2, 3, 4), (3, 1)), [torch.randn(2, 3, 4)])
    run_case(f"{nm}_same", Bin(f, (3, 4), (3, 4)), [torch.randn(3, 4)])
probe("square_self", (3, 5), lambda m, x: x * x)
# Sign passes no gradient (PyTorch's is 0), Shrink passes it outside [-lambd, lambd], fmod's divisor gets
# -trunc(a / b) of it (2026-12-06; refused by name before)
probe("sign_plus", (3, 5), lambda m, x: torch.sign(x) * 0.5 + x * 1.5)
probe("hardshrink", (3, 4, 5), lambda m, x: F.hardshrink(x * 2, 0.6))
probe("softshrink", (3, 4, 5), lambda m, x: F.softshrink(x * 2, 0.4))
run_case("fmod_broadcast", Bin(torch.fmod, (2, 3, 4), (3, 1)), [torch.randn(2, 3, 4) * 3])
probe("neg", (3, 5), lambda m, x: -x)

UNARY = {
    "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu, "elu": lambda x: F.elu(x, 0.7),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "softplus": F.softplus, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "selu": F.selu, "exp": torch.exp, "sqrt": lambda x: torch.sqrt(x.abs() + 0.5),
    "log": lambda x: torch.log(x.abs() + 0.5), "reciprocal": lambda x: torch.reciprocal(x.abs() + 0.5),
    "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "atan": torch.atan, "softsign": F.softsign,
    "celu": lambda x: F.celu(x, 1.3), "floor": torch.floor, "silu": F.silu,
}
for nm, f in UNARY.items():
    probe(f"unary_{nm}", (3, 4, 5), lambda m, x, f=f: f(x * 2))

# ---- normalizing and reducing -----------------------------------------------------------------
probe("softmax_last", (3, 7), lambda m, x: F.softmax(x, -1))
probe("softmax_axis1", (2, 5, 3), lambda m, x: F.softmax(x, 1))
probe("logsoftmax", (4, 6), lambda m, x: F.log_softmax(x, 1))
probe("sum_keep", (2, 3, 4), lambda m, x: x.sum(1, keepdim=True))
probe("sum_all", (2, 3, 4), lambda m, x: x.sum().reshape(1))
probe("mean_axes", (2, 3, 4, 5), lambda m, x: x.mean((2, 3)))
probe("prod_dim", (3, 4, 2), lambda m, x: torch.prod(x, 1))  # ReduceProd (grad_fd.py draws zeros in it)
probe("reshape_flatten", (2, 3, 4), lambda m, x: x.reshape(6, 4).flatten() * 2)

# ---- data movement (grad_tensor.c) -----------------------------------------------------------


class Par(nn.Module):
    """A weight of its own, for an op's second operand."""

    def __init__(self, *shape):
        super().__init__()
        self.w = nn.Parameter(torch.randn(*shape))


probe("squeeze_unsqueeze", (2, 1, 3), lambda m, x: x.squeeze(1).unsqueeze(0).unsqueeze(-1) * 2)
probe("concat_axis1", (2, 3, 4), lambda m, x: torch.cat([x[:, :1] * 3, x, torch.tanh(x), m.mods[0].w], 1), [Par(2, 2, 4)])
probe("concat_last", (3, 4), lambda m, x: torch.cat([m.mods[0].w, x, x], -1), [Par(3, 1)])
probe("split_sizes_unused", (2, 6, 3), lambda m, x: torch.cat(torch.split(x, [1, 3, 2], dim=1)[::2], 1) ** 2)
probe("split_chunk_all", (4, 6), lambda m, x: torch.stack(x.chunk(3, 1), 0) * torch.arange(3.0).reshape(3, 1, 1))
probe("split_unbind", (2, 3, 5), lambda m, x: x.unbind(1)[0] * 2 + x.unbind(1)[2])
probe("slice_unit", (3, 7, 4), lambda m, x: x[:, 1:5] ** 2)
probe("slice_negative", (3, 7), lambda m, x: x[-2:, -4:-1])
probe("slice_steps", (3, 9, 8), lambda m, x: x[:, 1:8:3, ::2] ** 2)
probe("slice_flip", (2, 5, 4), lambda m, x: torch.flip(x, [1, 2])[:, :, 1:] ** 2)
probe("slice_empty_out", (2, 5), lambda m, x: torch.cat([x[:, 3:3], x[:, 1:2]], 1))
probe("gather_scalar_index", (2, 5, 3), lambda m, x: x[:, 2] * x[:, -1])
probe("gather_repeated", (4, 5), lambda m, x: x[:, [0, 2, 2, 4, 2]] ** 2)
probe("gather_axis0", (6, 3), lambda m, x: x[[5, 0, 5]])


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.fc = nn.Linear(4, 3)

    def forward(self, ids):
        return (self.fc(self.emb(ids)) ** 2).sum()


run_case("gather_embedding_data", Embed(), [torch.tensor([[1, 3, 3, 6], [0, 3, 1, 1]])])
GE = torch.tensor([[0, 0, 2], [1, 3, 3], [4, 0, 1]])
probe("gather_elements", (3, 5), lambda m, x: torch.gather(x, 1, GE) ** 2)
probe("gather_elements_axis0", (4, 3), lambda m, x: torch.gather(x, 0, GE.clamp(max=3)))
probe("expand", (3, 1), lambda m, x: x.expand(2, 3, 4) ** 2)
probe("expand_param", (2, 3, 4), lambda m, x: x * m.mods[0].w.expand(2, 3, 4), [Par(1, 4)])
probe("pad_constant", (2, 3, 4), lambda m, x: F.pad(x, (1, 2, 0, 1)))
probe("pad_crop", (2, 3, 5), lambda m, x: F.pad(x, (-1, 2, 1, -1), value=0.5) ** 2)
# reflect and edge (torch's replicate): each border element's gradient also goes to the element it copied
probe("pad_reflect", (2, 3, 5), lambda m, x: F.pad(x, (2, 4), mode="reflect") ** 2)
probe("pad_reflect_2d", (1, 2, 4, 5), lambda m, x: F.pad(x, (1, 3, 3, 1), mode="reflect") ** 2)
probe("pad_replicate", (1, 2, 3, 4), lambda m, x: F.pad(x, (2, 1, 0, 3), mode="replicate") ** 2)
probe("pad_replicate_3d", (1, 1, 2, 3, 2), lambda m, x: F.pad(x, (1, 2, 2, 0, 1, 1), mode="replicate") ** 2)
# TopK's values, Trilu, DepthToSpace (torch's pixel_shuffle) and SpaceToDepth (pixel_unshuffle): added 2026-12-05
probe("topk_values", (3, 6), lambda m, x: torch.topk(x, 3, dim=1).values ** 2)
probe("topk_smallest", (2, 5, 3), lambda m, x: torch.topk(x, 2, dim=1, largest=False).values ** 2)
probe("triu", (2, 4, 5), lambda m, x: torch.triu(x, 1) ** 2)
probe("tril", (4, 4), lambda m, x: torch.tril(x, -1) ** 2)
probe("pixel_shuffle", (1, 8, 2, 3), lambda m, x: F.pixel_shuffle(x, 2) ** 2)
probe("pixel_unshuffle", (1, 2, 4, 6), lambda m, x: F.pixel_unshuffle(x, 2) ** 2)
probe("tile", (2, 3), lambda m, x: x.repeat(2, 1) * x.repeat(2, 1))
probe("tile_rank_up", (3, 1, 2), lambda m, x: x.repeat(2, 1, 3, 2) ** 2)
probe("einsum_bmm", (2, 3, 4), lambda m, x: torch.einsum("bij,jk->bik", x, m.mods[0].w), [Par(4, 5)])
probe("einsum_attn", (2, 2, 3, 4), lambda m, x: torch.einsum("bhqd,bhkd->bhqk", x, x * 2))
probe("einsum_transpose_sum", (3, 4), lambda m, x: torch.einsum("ij->ji", x) + torch.einsum("ij->", x))
probe("einsum_ellipsis_bcast", (2, 3, 4), lambda m, x: torch.einsum("...ij,...jk->...ik", x, m.mods[0].w), [Par(1, 4, 2)])
probe("einsum_own_label", (3, 4), lambda m, x: torch.einsum("ij,kl->ik", x, m.mods[0].w), [Par(2, 5)])
probe("einsum_three", (3, 4), lambda m, x: torch.einsum("ij,jk,k->i", x, m.mods[0].w, m.mods[1].w), [Par(4, 2), Par(2)])
MASK = torch.rand(3, 4) > 0.4
probe("where", (2, 3, 4), lambda m, x: torch.where(MASK, x, m.mods[0].w), [Par(3, 1)])
probe("where_same", (3, 4), lambda m, x: torch.where(MASK, x, x * 3))
# nn.MultiheadAttention's export: Slice of the packed projection, Transpose, batched MatMul; on dnnl
# its weight is read transposed forward and plain backward (a shared reorder once mixed the two up)
probe("multihead_attention", (2, 5, 8), lambda m, x: m.mods[0](x, x, x, need_weights=False)[0] ** 2,
      [nn.MultiheadAttention(8, 2, batch_first=True)])
probe("shape_zeros_like", (3, 4), lambda m, x: x * x.shape[1] + torch.zeros_like(x))


def onnx_case(name, nodes, weights, x, torch_f, opset=18):
    """A graph written by hand (ops torch 1.13 does not export at opset 14):
    out = sum(nodes(x, weights) * R), R random; the oracle is torch_f over the
    same weights."""
    from onnx import TensorProto, helper, numpy_helper
    g = torch.Generator().manual_seed(3)
    ws = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
    y = torch_f(x, ws)
    R = torch.randn(*y.shape, generator=g)
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()] + [numpy_helper.from_array(R.numpy(), "R")]
    nodes = nodes + [helper.make_node("Mul", ["y", "R"], ["yr"]),
                     helper.make_node("ReduceSum", ["yr"], ["out"], keepdims=0)]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x0", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [])], inits)
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "data", "x0.npy"), x.numpy())
    (y * R).sum().backward()
    plan = os.path.join(d, "g.plan")
    r = subprocess.run([PPCC, os.path.join(d, "model.onnx"), "--train", "--loss", "out", "-b", str(x.shape[0]), "-q",
                        "-o", plan], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: ppcc exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return
    o = os.path.join(d, "out")
    r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", o, "-q"], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: pprt exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return
    for k, w in ws.items():
        got, want = np.load(os.path.join(o, k + ".grad.npy")), w.grad.numpy()
        check(got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5 * max(1, np.abs(want).max())),
              f"{name}: '{k}' gradient {got.ravel()[:4]} want {want.ravel()[:4]}")


import onnx  # noqa: E402
from onnx import helper  # noqa: E402

xs = torch.randn(2, 6)
onnx_case("split_num_outputs", [helper.make_node("Add", ["x0", "w"], ["a"]),
                                helper.make_node("Split", ["a"], ["s0", "s1", "s2"], axis=1, num_outputs=3),
                                helper.make_node("Mul", ["s0", "s2"], ["y"])],
          {"w": np.random.RandomState(0).randn(2, 6).astype(np.float32)}, xs,
          lambda x, w: (x + w["w"])[:, 0:2] * (x + w["w"])[:, 4:6])
onnx_case("cast_f32", [helper.make_node("Cast", ["w"], ["c"], to=1), helper.make_node("Mul", ["x0", "c"], ["y"])],
          {"w": np.random.RandomState(1).randn(2, 6).astype(np.float32)}, xs, lambda x, w: x * w["w"], opset=14)

# ---- built-in losses --------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1))


labels = torch.tensor([3, 1, 0, 9, 9, 2])
run_case("cross_entropy", Net(), [torch.randn(6, 1, 8, 8)], loss="cross-entropy:out", labels=labels,
         torch_loss=lambda o: F.cross_entropy(o, labels))
tgt = torch.randn(6, 10)
run_case("mse", Net(), [torch.randn(6, 1, 8, 8)], loss="mse:out", target=tgt, torch_loss=lambda o: F.mse_loss(o, tgt))
run_case("cross_entropy_pp2", Net(), [torch.randn(6, 1, 8, 8)], loss="cross-entropy:out", labels=labels,
         torch_loss=lambda o: F.cross_entropy(o, labels), pp=2)

# ---- BatchNormalization (training mode: the batch's statistics; eval mode: fixed ones), Dropout at ratio 0


def bn_probe(name, shape, bn, train=True):
    m = Probe(shape, lambda m, x: m.mods[0](x), [bn])
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    if not train:
        bn.eval()
    run_case(name, m, [torch.randn(*shape) * 2 + 0.3],
             mode=None if train else torch.onnx.TrainingMode.PRESERVE)


bn_probe("batchnorm2d_train", (4, 3, 5, 5), nn.BatchNorm2d(3))
bn_probe("batchnorm1d_train", (6, 5), nn.BatchNorm1d(5))
bn_probe("batchnorm3d_train", (2, 2, 3, 4, 3), nn.BatchNorm3d(2, eps=1e-3))
bn_probe("batchnorm2d_eval", (4, 3, 5, 5), nn.BatchNorm2d(3), train=False)
probe("conv_bn_relu", (2, 3, 8, 8), lambda m, x: F.relu(m.mods[1](m.mods[0](x))),
      [nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)])
probe("dropout_ratio0", (3, 7), lambda m, x: m.mods[0](x) * 2, [nn.Dropout(0.0)])

# ScatterElements (torch.scatter, scatter_add) and ScatterND (an assignment through indices): the data's gradient
# with the written places zeroed (or whole, for add), the updates' read back where they went; added 2026-12-05
SE = torch.tensor([[3, 0], [1, 4], [2, 1]])
probe("scatter_elements", (3, 5), lambda m, x: torch.scatter(x, 1, SE, m.mods[0].w * 2) ** 2, [Par(3, 2)])
# (torch 1.13 exports scatter_add below opset 16 as a ScatterElements into zeros plus an Add, which repeated indices
# break; grad_fd.py draws reduction add itself)
probe("scatter_add", (3, 5), lambda m, x: torch.scatter_add(x, 1, SE, m.mods[0].w) ** 2, [Par(3, 2)])


class Assign(nn.Module):
    """y = x with rows 1 and 3 of axis 1 replaced by a weight's (an index_put: ScatterND)"""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(2, 4, 3) * 0.1)
        self.w = nn.Parameter(torch.randn(2, 2, 3))

    def forward(self, x):
        y = (x + self.p).clone()
        y[:, torch.tensor([1, 3])] = self.w * 3
        return (y ** 2 * torch.arange(1.0, 13.0).reshape(4, 3)).sum()


run_case("scatternd_assign", Assign(), [torch.randn(2, 4, 3)])


class TwoReaders(nn.Module):
    """One value read by two 1x1 convolutions, the first's Add after the second: ppcc fuses the Conv and its Add
    where the Add is, after the second convolution, while the gradient's sum of the two readers' parts is the
    first's rule's. A cut before the first (--split-at c1) put that sum on the later device's backward, before the
    part it reads (dpn48b's dual path blocks, the timm training sweep of 2026-12-05)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 6, 3, padding=1)
        self.c1 = nn.Conv2d(6, 6, 1)
        self.c2 = nn.Conv2d(6, 4, 1)
        self.head = nn.Linear(10, 3)

    def forward(self, x):
        r = self.stem(x)
        y = torch.relu(r)
        a = self.c1(y)
        b = self.c2(y)
        return self.head(torch.cat([a + r, b], 1).mean((2, 3)))


class StdConv(nn.Module):
    """Weight standardization as timm's StdConv2d writes it (BiT, NFNet): F.batch_norm over the weight's rows in
    training mode, whose export reads the weight twice (the BatchNormalization's input and, through ReduceMeans,
    its unused running statistics)"""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, 3, 3))
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        w = F.batch_norm(self.w.reshape(1, 4, -1), None, None, training=True, momentum=0.0, eps=1e-6)
        return self.fc(F.conv2d(x, w.reshape_as(self.w), padding=1).mean((2, 3)))


run_case("weight_standardization", StdConv(), [torch.randn(2, 3, 6, 6)], loss="cross-entropy:out",
         labels=torch.tensor([1, 2]), torch_loss=lambda o: F.cross_entropy(o, torch.tensor([1, 2])))
run_case("two_readers_cut", TwoReaders(), [torch.randn(2, 3, 5, 5)], loss="cross-entropy:out",
         labels=torch.tensor([2, 0]), torch_loss=lambda o: F.cross_entropy(o, torch.tensor([2, 0])), pp=2,
         extra=("--split-at", "c1"))
# ---- refused, exit 2, the culprit named ------------------------------------------------------


def refused(name, mod, inputs, args, want, fold=False):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    if fold:  # an inference export: eval mode, constants folded
        torch.onnx.export(mod.eval(), tuple(inputs), path, input_names=[f"x{i}" for i in range(len(inputs))],
                          output_names=["out"], opset_version=14)
    else:
        export(mod, tuple(inputs), path, [f"x{i}" for i in range(len(inputs))])
    r = subprocess.run([PPCC, path, "-b", str(inputs[0].shape[0]), "-q", "-o", os.path.join(d, "g.plan"), *args],
                       capture_output=True, text=True)
    check(r.returncode == 2 and want in r.stderr, f"{name}: exit {r.returncode}, stderr {r.stderr.strip()[-300:]!r}, "
          f"want exit 2 and {want!r}")
    check(not os.path.exists(os.path.join(d, "g.plan")), f"{name}: a plan was written")


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.fc(x))


class ArgPath(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        i = self.fc(x).argmax(1, keepdim=True).float()
        return (i * self.w).sum().reshape(1)




class Diagonal(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return (x * torch.einsum("ii->i", self.w)).sum().reshape(1)


x4 = torch.randn(5, 4)
refused("not_scalar", Lin(), [x4], ["--train", "--loss", "out"], "not a scalar")
refused("no_such_output", Lin(), [x4], ["--train", "--loss", "cross-entropy:logits"], "no output 'logits'")
refused("freeze_nothing", Lin(), [x4], ["--train", "--loss", "mse:out", "--freeze", "body"],
        "--freeze body matches no weight")
refused("freeze_all", Lin(), [x4], ["--train", "--loss", "mse:out", "--freeze", "fc,head"], "no weight is left")
refused("argmax_path", ArgPath(), [x4], ["--train", "--loss", "out"], "does not reach the loss")
refused("einsum_diagonal", Diagonal(), [x4], ["--train", "--loss", "out"], "repeats the label 'i' (a diagonal)")
refused("loss_without_train", Lin(), [x4], ["--loss", "mse:out"], "--loss is an option of --train")
refused("train_without_loss", Lin(), [x4], ["--train"], "--train needs --loss")
# weight standardization exported for inference: constant folding copies the weight into the statistics' path,
# whose copy reaches no gradient (the timm sweep's NFNet and BiT models): named, with the export that works
refused("stdconv_inference_export", StdConv(), [torch.randn(2, 3, 6, 6)], ["--train", "--loss", "cross-entropy:out"],
        "reaches the loss only through a BatchNormalization's mean or variance input", fold=True)


# --freeze: the frozen module's weights have no gradient output, the others match autograd
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


two = Two()
d = os.path.join(WORK, "freeze")
os.makedirs(os.path.join(d, "data"), exist_ok=True)
export(two, (x4,), os.path.join(d, "model.onnx"), ["x0"])
np.save(os.path.join(d, "data", "x0.npy"), x4.numpy())
np.save(os.path.join(d, "data", "target.npy"), np.zeros((5, 3), np.float32))
r = subprocess.run([PPCC, os.path.join(d, "model.onnx"), "--train", "--loss", "mse:out", "--freeze", "body", "-b", "5",
                    "-q", "-o", os.path.join(d, "g.plan")], capture_output=True, text=True)
check(r.returncode == 0, f"freeze: ppcc exit {r.returncode}: {r.stderr[-300:]}")
r = subprocess.run([PPRT, os.path.join(d, "g.plan"), os.path.join(d, "data"), "-o", os.path.join(d, "out"), "-q"],
                   capture_output=True, text=True)
check(r.returncode == 0, f"freeze: pprt exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    got = sorted(os.listdir(os.path.join(d, "out")))
    check(got == ["head.bias.grad.npy", "head.weight.grad.npy", "loss.npy", "out.npy"], f"freeze: outputs {got}")
    F.mse_loss(two(x4), torch.zeros(5, 3)).backward()
    g = np.load(os.path.join(d, "out", "head.weight.grad.npy"))
    check(np.allclose(g, two.head.weight.grad.numpy(), rtol=1e-4, atol=1e-6), "freeze: head.weight gradient")

testlib.finish("train_grads")
