#!/usr/bin/env python3
"""The oneDNN backend against the reference backend (the oracle).

pprt --backend dnnl must give the outputs of pprt --backend ref within
rtol 1e-3 / atol 1e-4, whatever the layouts between nodes (the default:
oneDNN's blocked layouts where every consumer takes them; and
PPRT_DNNL_LAYOUT=plain), the threads per stage (1 and 2, which must give
the same bits: -pp N runs a stage on fewer threads than -pp 1), the nodes absorbed
as post-ops and the outputs written in place of an input (residual sums,
binary ops) (the default, and neither:
PPRT_DNNL_FUSE=0 PPRT_DNNL_INPLACE=0), the residual of pp.FusedConv as a
binary post-op (PPRT_DNNL_RESIDUAL=binary), SiLU on oneDNN's swish rather
than pprt's own kernel (PPRT_DNNL_SILU=0) and the
pipeline split, on:
  - small models written here, one per family of covered ops, each compiled
    with all passes (fused ops: pp.FusedConv with residual and Relu/Clip,
    pp.SiLU, LayerNormalization, Gelu, Gemm) and with --disable-pass fuse
    (Conv, BatchNormalization, Relu, Add, Sigmoid, Mul ... one by one), with
    nodes oneDNN does not cover in between (they fall back, per node, to the
    reference kernels); each model also lists ops that must have run on
    oneDNN (PPRT_DNNL_VERBOSE=2), so a silent fallback fails the test;
  - the digits sample at -pp 1, 2, 3 and micro-batches 16 and 7 (and its
    accuracy equals the recorded PyTorch accuracy);
  - the golden models of tests/golden.
Usage: run.py WORKDIR   (env: PPCC, PPRT; exit 77 when pprt has no oneDNN)"""
import json
import os
import re
import shutil
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
SRC = os.environ.get("SRC", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RTOL, ATOL = 1e-3, 1e-4
F = TensorProto.FLOAT
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
failures = []
checked = 0

ver = subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True, text=True)
if ver.returncode != 0:
    print("SKIP: this pprt was built without oneDNN")
    sys.exit(77)
# oneDNN has bf16 kernels from AVX-512 up; elsewhere --precision bf16 must
# warn and give the f32 outputs bit for bit (checked instead of the bf16 error)
HAVE_BF16 = "bf16 kernels on this CPU: yes" in ver.stdout
# the vector ISA pprt's kernels and choices assume (runtime/isa.h): the
# CPU's, capped by ONEDNN_MAX_CPU_ISA as oneDNN caps itself (ctest's
# dnnl_avx2 runs this file so on AVX-512 machines)
ISA = re.search(r"vector ISA: (\w+)", ver.stdout).group(1)
# pprt's AMX kernel for bf16 pointwise convolutions (runtime/dnnl/kernels/pwconv.h): Intel Xeons with AMX
HAVE_AMX = "AMX pointwise kernel: yes" in ver.stdout
print(f"dnnl: {ver.stdout.strip()}")
if os.environ.get("ONEDNN_MAX_CPU_ISA") and "capped by" not in ver.stdout:
    print(f"SKIP: ONEDNN_MAX_CPU_ISA={os.environ['ONEDNN_MAX_CPU_ISA']} caps nothing on this CPU ({ISA}): "
          "the uncapped run already took these paths")
    sys.exit(77)
# What pprt promises about bits (docs/design-notes.md): the same plan, backend
# and threads per stage give the same bits whatever the split; another thread
# count gives the same bits on the reference kernels and, on oneDNN, where its
# kernels are AVX2 ones (pprt's own Winograd and SiLU included); on AVX-512,
# oneDNN picks kernels by the thread count (its Winograd F(2x2,3x3) or
# F(4x4,3x3), and work splits within them), so only the tolerances hold.
THREADS_INVARIANT = ISA == "avx2"
BF16_WARNING = "has no bf16 kernels on this CPU"


def run(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} -> exit {r.returncode}: {gist(r.stderr)}")
    return r


def gist(stderr, tail=40):
    """A failed run's stderr without the per-node listing of PPRT_DNNL_VERBOSE, its last lines first (where
    an error or a sanitizer's report is: a log shortened in the middle keeps them), then the start"""
    lines = [x for x in stderr.strip().splitlines() if not re.match(r"^  /\S+\s", x)]
    if len(lines) <= tail:
        return "\n".join(lines)
    return "\n".join(["(the last lines)"] + lines[-tail:] + ["(the first lines)"] + lines[:5])


def compare(tag, got_dir, want_dir):
    global checked
    names = sorted(f for f in os.listdir(want_dir) if f.endswith(".npy"))
    if not names:
        failures.append(f"{tag}: no outputs in {want_dir}")
    for f in names:
        want, got = np.load(os.path.join(want_dir, f)), np.load(os.path.join(got_dir, f))
        checked += 1
        if want.shape != got.shape or want.dtype != got.dtype:
            failures.append(f"{tag}: {f}: {got.dtype}{got.shape}, expected {want.dtype}{want.shape}")
        elif not np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True):
            err = np.abs(got.astype(np.float64) - want)
            failures.append(f"{tag}: {f}: max abs error {err.max():.3g} (rtol {RTOL}, atol {ATOL})")


def dnnl_ops(stderr):
    """Ops of the nodes that ran on oneDNN, from PPRT_DNNL_VERBOSE=2."""
    return {m.group(1) for m in re.finditer(r"^  \S+\s+(\S+)\s", stderr, re.M)}


def counts(stderr):
    """Nodes absorbed as post-ops, outputs in place of their input, views, over the stages."""
    post = sum(int(m) for m in re.findall(r"\((\d+) as post-ops\)", stderr))
    inplace = sum(int(m) for m in re.findall(r"\((\d+) outputs in place of their input\)", stderr))
    views = sum(int(m) for m in re.findall(r"(\d+) views of their input's bytes", stderr))
    return post, inplace, views


seen = {"post-ops": 0, "in place": 0, "views": 0}
POOL_OPS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}
# --precision bf16 (8-bit mantissas: up to 0.4% per rounding, sums in f32),
# against the reference: the largest error within BF16_TOL x the output's
# largest magnitude (a squashing output, Tanh of values up to 4, turns 1% of
# its input's range into 4% of its own; a Floor turns rounding into steps of
# 1); and some outputs must differ from f32 at all, or bf16 did not take
# effect. A binary post-op reading its operand in the wrong layout gave 0.81
# and 1.55 of the largest magnitude here (AVX512_BF16 without AMX).
BF16_TOL = 5e-2
bf16 = {"outputs": 0, "differ": 0, "worst": 0.0, "worst_rms": 0.0, "fallback": 0}


def compare_bf16(tag, got_dir, want_dir, f32_dir):
    for f in sorted(x for x in os.listdir(want_dir) if x.endswith(".npy")):
        want, got = np.load(os.path.join(want_dir, f)), np.load(os.path.join(got_dir, f))
        if want.shape != got.shape or want.dtype != got.dtype:
            failures.append(f"{tag}: {f}: {got.dtype}{got.shape}, expected {want.dtype}{want.shape}")
            continue
        if want.dtype != np.float32 or not want.size:
            continue
        diff = got.astype(np.float64) - want
        scale = float(np.max(np.abs(want))) or 1.0
        err = float(np.max(np.abs(diff))) / scale
        rms = float(np.sqrt(np.mean(diff ** 2)) / (np.sqrt(np.mean(want.astype(np.float64) ** 2)) or 1.0))
        bf16["outputs"] += 1
        bf16["worst"] = max(bf16["worst"], err)
        bf16["worst_rms"] = max(bf16["worst_rms"], rms)
        if not np.array_equal(got, np.load(os.path.join(f32_dir, f))):
            bf16["differ"] += 1
        if not err <= BF16_TOL:
            failures.append(f"{tag}: {f}: bf16 error {err:.3g} of the largest magnitude (allowed {BF16_TOL}), "
                            f"RMS {rms:.3g} of the output's")


def check_plan(tag, plan, data, must=(), pps=None, extra_runs=True):
    """Reference run, then oneDNN runs in every mode, compared with it."""
    ref = os.path.join(work, tag + "_ref")
    shutil.rmtree(ref, ignore_errors=True)
    run([PPRT, plan, data, "--backend", "ref", "-q", "-o", ref])
    modes = [("blocked_t1", {}, ["--threads", "1"]), ("blocked_t2", {}, ["--threads", "2"]),
             ("plain_t1", {"PPRT_DNNL_LAYOUT": "plain"}, ["--threads", "1"]),
             ("simple_t1", {"PPRT_DNNL_FUSE": "0", "PPRT_DNNL_INPLACE": "0", "PPRT_DNNL_VIEWS": "0"},
              ["--threads", "1"]),
             ("binres_t1", {"PPRT_DNNL_RESIDUAL": "binary"}, ["--threads", "1"]),
             ("swish_t1", {"PPRT_DNNL_SILU": "0"}, ["--threads", "1"]),
             ("convblk_t1", {"PPRT_DNNL_CONV_BLOCKED": "1"}, ["--threads", "1"])]
    if not extra_runs:
        modes = modes[:1]
    else:
        modes.append(("bf16_t1", {}, ["--threads", "1", "--precision", "bf16"]))
    for mode, env, args in modes:
        out = os.path.join(work, f"{tag}_{mode}")
        shutil.rmtree(out, ignore_errors=True)  # no outputs left from an earlier run to compare
        stats = os.path.join(work, f"{tag}_{mode}.json")
        r = run([PPRT, plan, data, "--backend", "dnnl", "-q", "--no-pin", "-o", out, "--stats-json", stats] + args,
                env={"PPRT_DNNL_VERBOSE": "2", **env})
        if mode.startswith("bf16") and not HAVE_BF16:
            f32_out = os.path.join(work, f"{tag}_blocked_t1")
            if BF16_WARNING not in r.stderr:
                failures.append(f"{tag} [{mode}]: no warning that bf16 runs in f32 on this CPU")
            for f in sorted(x for x in os.listdir(out) if x.endswith(".npy")):
                if not np.array_equal(np.load(os.path.join(out, f)), np.load(os.path.join(f32_out, f))):
                    failures.append(f"{tag} [{mode}]: {f}: bf16 without bf16 kernels is not the f32 output")
            bf16["fallback"] += 1
        elif mode.startswith("bf16"):
            compare_bf16(f"{tag} [{mode}]", out, ref, os.path.join(work, f"{tag}_blocked_t1"))
        else:
            compare(f"{tag} [{mode}]", out, ref)
        if mode == "blocked_t2" and THREADS_INVARIANT:
            # the thread count must not change a bit: -pp N gives a stage
            # fewer threads than -pp 1 has, and the splits are bit-identical
            for f in sorted(x for x in os.listdir(out) if x.endswith(".npy")):
                if not np.array_equal(np.load(os.path.join(out, f)),
                                      np.load(os.path.join(work, f"{tag}_blocked_t1", f))):
                    failures.append(f"{tag}: {f}: 2 threads gave other bits than 1")
        if mode == "blocked_t1":
            post, inplace, nviews = counts(r.stderr)
            # --stats-json carries the same counts, stage by stage
            st = json.load(open(stats))
            got = tuple(sum(x[k] for x in st["stages"]) for k in ("fused_nodes", "outputs_in_place", "view_nodes"))
            if got != (post, inplace, nviews) or st["backend"] != "dnnl" or \
                    any(sum(x[k + "_nodes"] for k in ("library", "own", "fused", "view", "reference")) != x["nodes"]
                        for x in st["stages"]):
                failures.append(f"{tag}: --stats-json counts {st['stages']} do not match the verbose report "
                                f"(post-ops, in place, views) {(post, inplace, nviews)}")
            seen["post-ops"] += post
            seen["in place"] += inplace
            seen["views"] += nviews
            # oneDNN's reference kernels (ref:any) run hundreds of times slower than its
            # JIT ones (Swin-T's attention products with their window bias, 800x): no
            # node may run one (pprt takes its own kernel instead). Not Concat: its
            # ref:any is a JIT reorder of each input into its place in the output
            slow = [l.split()[0] for l in r.stderr.splitlines()
                    if l.startswith("  ") and " ref:any" in l and l.split()[1] != "Concat"]
            if slow:
                failures.append(f"{tag}: {slow} ran oneDNN's reference kernel (ref:any)")
            # a pool reading a plain tensor (received at a cut) ran oneDNN's simple_nchw
            # kernel, 14x slower than the JIT one it gets after a reorder into nChw8c
            # (pprt:maxpool_nan, the NaN pass after max pooling, is ours)
            # (a GlobalAveragePool absorbed into the pass of the SiLU before it, "post-op", is pprt's)
            slow = [l.split()[0] for l in r.stderr.splitlines()
                    if l.startswith("  ") and l.split()[1] in POOL_OPS and
                    not all(k.startswith("jit") for k in l.split()[2:]
                            if not k.startswith(("reorder:", "pprt:")) and k != "post-op")]
            if slow:
                failures.append(f"{tag}: pools {slow} did not run a oneDNN JIT kernel")
            missing = set(must) - dnnl_ops(r.stderr)
            if missing:
                failures.append(f"{tag}: {sorted(missing)} did not run on oneDNN:\n{r.stderr}")
    return ref


# ---- small models ---------------------------------------------------------------------------------

class Model:
    def __init__(self, name, inputs, opset=20):
        self.name, self.opset = name, opset
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes, self.inits, self.k = [], [], 0
        self.inputs = [helper.make_tensor_value_info(n, F, ["N"] + list(s)) for n, s in inputs]
        self.shapes = dict(inputs)

    def const(self, arr):
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name))
        return name

    def rand(self, *shape, scale=1.0):
        return self.const(self.rng.standard_normal(shape) * scale)

    def op(self, op, ins, n_out=1, **attrs):
        self.k += 1
        outs = [f"t{self.k}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=f"/{op}_{self.k}", **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k, group=1, bias=True, **a):
        k = list(k)
        fan = cin // group * int(np.prod(k))
        ins = [x, self.rand(cout, cin // group, *k, scale=1.5 / np.sqrt(fan))]
        if bias:
            ins.append(self.rand(cout, scale=0.1))
        return self.op("Conv", ins, kernel_shape=k, group=group, **a)

    def bn(self, x, c):
        r = self.rng
        return self.op("BatchNormalization", [x, self.const(r.uniform(0.5, 1.5, c)), self.const(r.normal(0, 0.1, c)),
                                              self.const(r.normal(0, 0.1, c)), self.const(r.uniform(0.5, 1.5, c))],
                       epsilon=1e-5)

    def save(self, outputs):
        outs = [helper.make_tensor_value_info(o, F, None) for o in outputs]
        g = helper.make_graph(self.nodes, self.name, self.inputs, outs, initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="dnnl-test")
        m.ir_version = 9
        path = os.path.join(work, self.name + ".onnx")
        onnx.save(m, path)
        return path

    def data(self, n=5, scale=1.0):
        d = os.path.join(work, self.name + "_data")
        os.makedirs(d, exist_ok=True)
        for name, shape in self.shapes.items():
            np.save(os.path.join(d, name + ".npy"),
                    (self.rng.standard_normal((n, *shape)) * scale).astype(np.float32))
        return d


def cnn():
    """Convolutions of every kind (a 3x3 stride-1 one that oneDNN may run by
    Winograd), BN, residual, Clip, SiLU, a squeeze-excite
    block (broadcast Mul), broadcast constants, pools with ceil_mode and
    padding, Gemm; channel counts that are not multiples of 16."""
    m = Model("cnn", [("x", (3, 17, 17))])
    a = m.op("Relu", [m.conv("x", 3, 16, (3, 3), pads=[1, 1, 1, 1])])
    a = m.op("Relu", [m.conv(a, 16, 16, (3, 3), pads=[1, 1, 1, 1])])  # Winograd where oneDNN has it
    b = m.op("Relu", [m.bn(m.conv(a, 16, 24, (3, 3), bias=False, strides=[2, 2], pads=[1, 1, 1, 1]), 24)])
    c = m.op("Clip", [m.conv(b, 24, 24, (3, 3), group=24, pads=[1, 1, 1, 1]), m.const(0.0), m.const(6.0)])
    d = m.op("Relu", [m.op("Add", [m.conv(c, 24, 24, (1, 1)), b])])
    f = m.op("Mul", [d, m.op("Sigmoid", [d])])
    g = m.op("GlobalAveragePool", [f])
    h = m.op("Relu", [m.conv(g, 24, 8, (1, 1))])
    i = m.op("Sigmoid", [m.conv(h, 8, 24, (1, 1))])
    j = m.op("Mul", [f, i])
    k = m.conv(j, 24, 32, (3, 3), group=2, dilations=[2, 2], pads=[2, 1, 2, 3])
    l = m.op("Add", [m.const(m.rng.normal(0, 0.1, (32, 1, 1))), m.op("Mul", [k, m.rand(1, 32, 1, 1)])])
    n = m.op("MaxPool", [m.op("Tanh", [l])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    o = m.op("AveragePool", [n], kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1)
    p = m.op("AveragePool", [o], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    q = m.op("Flatten", [m.op("GlobalMaxPool", [p])])
    y = m.op("Gemm", [q, m.rand(10, 32, scale=0.3), m.rand(10)], transB=1)
    return m.save([y, n]), m.data(), ["Conv", "Relu", "Clip", "Add", "Mul", "Sigmoid", "GlobalAveragePool",
                                      "Tanh", "MaxPool", "AveragePool", "GlobalMaxPool", "Gemm"]


def wino():
    """3x3 stride-1 convolutions, which pprt's own Winograd kernel
    (runtime/dnnl/kernels/wino.c) runs where oneDNN has none (AVX2): 10x10 images
    (partial 4x4 tiles), no padding, Clip, and a ResNet basic block whose
    residual (pp.FusedConv's Z) crosses the stage cuts at -pp 2 and 3, and
    a bare Conv (no activation) at the end."""
    m = Model("wino", [("x", (16, 10, 10))])
    a = m.op("Relu", [m.conv("x", 16, 16, (3, 3), pads=[1, 1, 1, 1])])
    b = m.op("Relu", [m.conv(a, 16, 32, (3, 3), pads=[1, 1, 1, 1])])
    c = m.op("Relu", [m.conv(b, 32, 32, (3, 3), pads=[1, 1, 1, 1])])
    d = m.op("Relu", [m.op("Add", [m.conv(c, 32, 32, (3, 3), pads=[1, 1, 1, 1]), b])])
    e = m.op("Clip", [m.conv(d, 32, 16, (3, 3)), m.const(-1.0), m.const(1.0)])
    f = m.conv(e, 16, 16, (3, 3), pads=[1, 0, 2, 1])
    return m.save([f]), m.data(), ["Conv"]


def conv_nd():
    """1-D and 3-D convolutions and pools, auto_pad, asymmetric pads, more eltwise ops."""
    m = Model("conv_nd", [("x", (4, 20)), ("v", (2, 6, 6, 6)), ("s", (3, 9, 9))])
    a = m.op("Elu", [m.conv("x", 4, 8, (3,), strides=[2], pads=[1, 2])], alpha=0.7)
    a = m.op("LeakyRelu", [m.op("MaxPool", [a], kernel_shape=[2], strides=[2])], alpha=0.2)
    a = m.op("AveragePool", [a], kernel_shape=[3], pads=[1, 1])
    v = m.op("MaxPool", [m.op("Relu", [m.conv("v", 2, 4, (3, 3, 3), pads=[1] * 6)])], kernel_shape=[2, 2, 2],
             strides=[2, 2, 2])
    v = m.op("GlobalAveragePool", [m.op("Softplus", [m.conv(v, 4, 4, (1, 1, 1))])])
    s = m.op("HardSwish", [m.conv("s", 3, 8, (3, 3), strides=[2, 2], auto_pad="SAME_UPPER")])
    s = m.op("Abs", [m.conv(s, 8, 8, (2, 2), auto_pad="SAME_LOWER")])
    s = m.op("Log", [m.op("Add", [m.op("Sqrt", [s]), m.const(1.0)])])
    s = m.op("Neg", [m.op("Exp", [m.op("Tanh", [s])])])
    # (Exp runs on the reference kernels: oneDNN's gives inf for NaN; docs/design-notes.md)
    return m.save([a, v, s]), m.data(), ["Conv", "Elu", "LeakyRelu", "MaxPool", "AveragePool", "Relu", "Softplus",
                                         "GlobalAveragePool", "HardSwish", "Abs", "Sqrt", "Log", "Neg", "Add"]


def mlp():
    """A transformer block: MatMul (constant and computed right-hand sides,
    batched, broadcast), bias Add, Gelu (erf, tanh), LayerNormalization over
    one and two axes, attention Softmax, binary ops with scalars."""
    m = Model("mlp", [("x", (8, 16))])
    h = m.op("Gelu", [m.op("Add", [m.op("MatMul", ["x", m.rand(16, 32, scale=0.25)]), m.rand(32, scale=0.1)])])
    h = m.op("Add", ["x", m.op("MatMul", [h, m.rand(32, 16, scale=0.2)])])
    ln = m.op("LayerNormalization", [h, m.rand(16), m.rand(16, scale=0.1)], n_out=1, axis=-1, epsilon=1e-5)
    q = m.op("MatMul", [ln, m.rand(16, 16, scale=0.25)])
    k = m.op("MatMul", [ln, m.rand(16, 16, scale=0.25)])
    v = m.op("MatMul", [ln, m.rand(16, 16, scale=0.25)])
    s = m.op("Div", [m.op("MatMul", [q, m.op("Transpose", [k], perm=[0, 2, 1])]), m.const(4.0)])
    att = m.op("MatMul", [m.op("Softmax", [s], axis=-1), v])
    o = m.op("Gelu", [m.op("Sub", [att, m.rand(16)])], approximate="tanh")
    o = m.op("Max", [m.op("Min", [o, m.const(1.5)]), m.rand(8, 16)])
    o = m.op("LayerNormalization", [o, m.rand(8, 16)], axis=1, epsilon=1e-3)
    b = m.op("MatMul", [m.op("Unsqueeze", [o, m.const_i64([1])]), m.rand(3, 16, 4, scale=0.3)])
    return m.save([m.op("LogSoftmax", [b], axis=-1), m.op("Sigmoid", [att])]), m.data(), \
        ["MatMul", "Add", "Gelu", "LayerNormalization", "Softmax", "Div", "Sub", "LogSoftmax", "Sigmoid"]
    # (Max and Min run on the reference kernels: oneDNN's give the other operand for NaN)


def const_i64(self, v):
    self.k += 1
    name = f"c{self.k}"
    self.inits.append(numpy_helper.from_array(np.asarray(v, dtype=np.int64), name))
    return name


Model.const_i64 = const_i64


def gemm():
    """Gemm: transposes, alpha and beta, every shape of C, a computed C."""
    m = Model("gemm", [("x", (12,))])
    a = m.op("Gemm", ["x", m.rand(12, 6, scale=0.3), m.rand(6)])
    b = m.op("Gemm", ["x", m.rand(6, 12, scale=0.3), m.rand(1, 6)], transB=1, alpha=0.5, beta=2.0)
    c = m.op("Gemm", [a, m.rand(6, 6, scale=0.3), b], alpha=1.5)  # C computed, [N, 6]
    d = m.op("Gemm", [c, m.rand(6, 4, scale=0.3), m.rand(1)], beta=-1.0)
    t = m.op("Transpose", ["x"], perm=[1, 0])
    e = m.op("Gemm", [t, m.rand(12, 3, scale=0.3)], transA=1)
    return m.save([d, e]), m.data(), ["Gemm"]


def gemv():
    """Gemm at micro-batch 1 (a matrix-vector product), K large enough for
    oneDNN to share it between threads."""
    m = Model("gemv", [("x", (1024,))])
    h = m.op("Relu", [m.op("Gemm", ["x", m.rand(256, 1024, scale=0.03), m.rand(256)], transB=1)])
    return m.save([m.op("Gemm", [h, m.rand(256, 1000, scale=0.06), m.rand(1000)])]), m.data(), ["Gemm"]


def fallback():
    """oneDNN nodes around nodes it does not cover (Floor, ConvTranspose,
    MaxPool with Indices, Reshape), a convolution output read by both kinds."""
    m = Model("fallback", [("x", (4, 10, 10))])
    a = m.conv("x", 4, 16, (3, 3), pads=[1, 1, 1, 1])
    b = m.op("Floor", [m.op("Mul", [a, m.const(3.0)])])
    c = m.op("Relu", [m.conv(b, 16, 16, (3, 3), pads=[1, 1, 1, 1])])
    d = m.op("ConvTranspose", [c, m.rand(16, 8, 2, 2, scale=0.2)], strides=[2, 2])
    e, idx = m.op("MaxPool", [d], n_out=2, kernel_shape=[2, 2], strides=[2, 2])
    f = m.conv(e, 8, 16, (1, 1))
    g = m.op("Reshape", [a, m.const_i64([0, 16, 100])])
    return m.save([f, g, idx, c]), m.data(), ["Conv", "Mul", "Relu"]


def mixed():
    """A squeeze-and-excitation block whose full operand is plain (an
    eltwise of the plain input, as a tensor received at a cut is) and whose
    broadcast scale comes blocked out of a convolution: the binary op reads
    both in one format (a JIT kernel), and so does an Add of a plain and a
    blocked full-shaped tensor."""
    m = Model("mixed", [("x", (16, 6, 6))])
    s = m.op("Sigmoid", ["x"])
    c = m.op("Relu", [m.conv("x", 16, 16, (3, 3), pads=[1, 1, 1, 1])])
    scale = m.op("Sigmoid", [m.conv(m.op("GlobalAveragePool", [c]), 16, 16, (1, 1))])
    y = m.op("Mul", [s, scale])
    return m.save([m.op("Add", [m.op("Tanh", ["x"]), m.op("Relu", [m.conv(y, 16, 16, (1, 1))])])]), m.data(), \
        ["Mul", "Add", "Conv", "GlobalAveragePool"]


def views():
    """Nodes that only rename bytes (Reshape, Flatten, Squeeze, Unsqueeze, a
    Transpose that moves only 1-long axes) run as views of their input's
    arena bytes where the input dies there, and copy elsewhere: an input read
    again later, the stage's received input, a graph output. A view feeds a
    residual summed in place (aliases of aliases). A Transpose that moves the
    last axis is a oneDNN reorder; one that keeps it, pprt's row copies (a
    small one, and one large enough for the threads to share)."""
    m = Model("views", [("x", (4, 6, 6)), ("y", (6, 8))])
    a = m.conv("x", 4, 8, (3, 3), pads=[1, 1, 1, 1])
    f = m.op("Flatten", [a], axis=1)                                     # a dies here: a view
    z = m.op("Reshape", [f, m.const_i64([0, 8, 6, 6])])                   # a view of a view
    r = m.op("Relu", [m.op("Add", [m.conv("x", 4, 8, (3, 3), pads=[1, 1, 1, 1]), z])])  # Z summed in place
    u = m.op("Unsqueeze", [r, m.const_i64([2])])                           # [N, 8, 1, 6, 6]
    t = m.op("Transpose", [u], perm=[0, 2, 1, 3, 4])                       # only the 1-long axis moves
    s = m.op("Squeeze", [t, m.const_i64([1])])                             # [N, 8, 6, 6]
    g = m.op("Relu", [s])
    kept = m.op("Reshape", [g, m.const_i64([0, 48, 6])])                   # g is read again below: a copy
    h = m.op("Add", [m.op("Reshape", [kept, m.const_i64([0, 8, 6, 6])]), g])
    yr = m.op("Reshape", ["y", m.const_i64([0, 48])])                      # a received input: a copy
    yt = m.op("Transpose", [m.op("MatMul", ["y", m.rand(8, 5, scale=0.3)])], perm=[0, 2, 1])  # last axis moves
    # rows stay (the Reshape moves the second axis's extent: its input is read plain, as `tokens` does not)
    yk = m.op("Transpose", [m.op("Reshape", [yt, m.const_i64([0, 2, 5, 3])])], perm=[0, 2, 1, 3])
    yb = m.op("Reshape", [m.op("MatMul", ["y", m.rand(8, 4096, scale=0.3)]), m.const_i64([0, 6, 64, 8, 8])])
    yb = m.op("Relu", [m.op("Transpose", [yb], perm=[0, 3, 1, 2, 4])])   # rows of 8 floats, 196 KiB a sample
    out = m.op("Flatten", [m.op("Sigmoid", [h])], axis=1)                  # a graph output
    return m.save([out, m.op("Mul", [yr, m.const(2.0)]), yk, yb]), m.data(), \
        ["Flatten", "Reshape", "Unsqueeze", "Squeeze", "Transpose", "MatMul"]


def tokens():
    """PVT-v2's and SegFormer's token blocks: a product's [N, H*W, C] tokens
    permuted to [N, C, H*W] and reshaped to [N, C, H, W] for a depthwise
    convolution (the MLP) or a strided one (the attention's spatial
    reduction), then reshaped and permuted back for a Gelu or a
    LayerNormalization. The Transpose leaves its output channels-last, the
    Reshape keeps that layout, the convolution reads and writes it as it is,
    and the way back is views too: no reorder (ran as 37 reorders a
    micro-batch of pvt_v2_b0, 1.6x slower). Then Reshapes of convolutions'
    outputs in their layouts: merging the spatial axes of a channel-blocked
    layout (a view), of one whose channels are padded (24 in blocks of 16),
    of an output read again later (a copy), an Unsqueeze and Squeeze around a
    Relu, a Reshape into a graph output, and a Flatten that merges the
    channels (read plain)."""
    m = Model("tokens", [("x", (36, 16)), ("y", (8, 6, 6))])
    h = m.op("Add", [m.op("MatMul", ["x", m.rand(16, 32, scale=0.3)]), m.rand(32, scale=0.1)])
    img = m.op("Reshape", [m.op("Transpose", [h], perm=[0, 2, 1]), m.const_i64([0, 32, 6, 6])])
    dw = m.conv(img, 32, 32, (3, 3), group=32, pads=[1, 1, 1, 1])
    t = m.op("Gelu", [m.op("Transpose", [m.op("Reshape", [dw, m.const_i64([0, 32, 36])])], perm=[0, 2, 1])])
    mlp = m.op("Add", [m.op("MatMul", [t, m.rand(32, 16, scale=0.2)]), "x"])
    img2 = m.op("Reshape", [m.op("Transpose", [mlp], perm=[0, 2, 1]), m.const_i64([0, 16, 6, 6])])
    sr = m.op("Reshape", [m.conv(img2, 16, 16, (2, 2), strides=[2, 2]), m.const_i64([0, 16, 9])])
    kv = m.op("LayerNormalization", [m.op("Transpose", [sr], perm=[0, 2, 1]), m.rand(16), m.rand(16, scale=0.1)],
              axis=-1, epsilon=1e-5)
    c = m.op("Relu", [m.conv("y", 8, 32, (3, 3), pads=[1, 1, 1, 1])])
    merged = m.op("Tanh", [m.op("Reshape", [c, m.const_i64([0, 32, 36])])])       # c dies here: a view
    c24 = m.conv("y", 8, 24, (1, 1))
    padded = m.op("Softmax", [m.op("Reshape", [c24, m.const_i64([0, 24, 36])])], axis=-1)  # read plain
    c2 = m.conv("y", 8, 16, (3, 3), pads=[1, 1, 1, 1])
    again = m.op("Sigmoid", [m.op("Reshape", [c2, m.const_i64([0, 16, 3, 12])])])  # c2 is read again: a copy
    u = m.op("Squeeze", [m.op("Relu", [m.op("Unsqueeze", [c2, m.const_i64([2])])]), m.const_i64([2])])
    back = m.conv(m.op("Add", [u, c2]), 16, 16, (1, 1))
    out = m.op("Reshape", [m.conv(back, 16, 16, (1, 1)), m.const_i64([0, 16, 36])])  # a graph output
    flat = m.op("Flatten", [m.op("Relu", [m.conv("y", 8, 16, (1, 1))])])          # channels merged: plain
    return m.save([mlp, kv, merged, padded, again, out, flat]), m.data(), \
        ["MatMul", "Transpose", "Reshape", "Conv", "Gelu", "LayerNormalization", "Unsqueeze", "Squeeze", "Flatten"]


def slices():
    """Slices with unit steps are oneDNN reorders from a sub-memory of the
    plain input: along the last axis (attention's query, key and value out of
    one product; a negative start, an end past the axis), along a middle axis,
    of a graph input, of a convolution's output (written plain for it).
    Steps other than 1 (forward and backward) stay on the reference kernel."""
    m = Model("slices", [("x", (6, 10)), ("y", (4, 6, 6))])
    p = m.op("MatMul", ["x", m.rand(10, 24, scale=0.3)])                  # [N, 6, 24]

    def sl(t, starts, ends, axes, steps=None):
        ins = [t, m.const_i64(starts), m.const_i64(ends), m.const_i64(axes)]
        return m.op("Slice", ins + ([m.const_i64(steps)] if steps else []))
    q, k = sl(p, [0], [8], [2]), sl(p, [8], [16], [-1])
    v = sl(p, [-8], [2 ** 40], [2])
    att = m.op("Relu", [m.op("Mul", [m.op("Add", [q, k]), v])])
    mid = m.op("Mul", [m.op("Tanh", [sl(p, [1, 4], [5, 20], [1, 2])]), m.const(2.0)])  # two axes at once
    inp = sl("x", [2], [6], [1])                                             # a graph input
    stepped = sl(p, [0], [24], [2], [3])                                     # steps: the reference kernel
    back = sl(p, [-1], [-25], [2], [-2])
    blk = sl(m.conv("y", 4, 16, (3, 3), pads=[1, 1, 1, 1]), [3], [11], [1])  # channels 3..10 of a convolution
    return m.save([att, mid, inp, stepped, back, m.op("Relu", [blk])]), m.data(), ["Slice", "MatMul"]


def cut_types():
    """int64 and bool tensors that cross every cut and are read again in the
    stage that makes them (written by reference nodes, beside f32 tensors in
    the same message): a sent tensor the stage also reads is kept in the
    arena and copied into the message after the last node, at its own
    element size (once copied as 4-byte floats: an int64 lost half its bytes,
    a bool overwrote its neighbours in the message: DistilBERT at -pp 4)."""
    m = Model("cut_types", [("x", (4, 6, 6))])
    a = m.op("Relu", [m.conv("x", 4, 8, (3, 3), pads=[1, 1, 1, 1])])
    mask = m.op("Greater", [a, m.const(0.3)])                              # bool
    ints = m.op("Cast", [mask], to=TensorProto.INT64)                       # int64
    b = m.op("Where", [mask, a, m.const(0.0)])                              # both read where they are made
    c = m.op("Mul", [m.op("Cast", [ints], to=F), a])
    d = m.op("Relu", [m.conv(m.op("Add", [b, c]), 8, 8, (3, 3), pads=[1, 1, 1, 1])])
    e = m.op("Relu", [m.conv(d, 8, 8, (3, 3), pads=[1, 1, 1, 1])])
    f = m.op("Relu", [m.conv(e, 8, 8, (3, 3), pads=[1, 1, 1, 1])])
    out = m.op("Where", [mask, f, m.op("Cast", [ints], to=F)])              # and again after every cut
    total = m.op("Cast", [m.op("ReduceSum", [ints, m.const_i64([1, 2, 3])], keepdims=0)], to=F)
    return m.save([out, total]), m.data(), []


def windows():
    """Window attention as Swin-T exports it: a product of per-window heads
    with its position bias broadcast over the batch (a post-op oneDNN has
    only its reference kernel for), the shifted-window mask over a 5-D view
    (broadcast over the batch and the heads), and a squeeze-excite scale per
    sample and channel (RegNetY) over 24 channels in groups of 8, a blocked
    layout's; none may run oneDNN's reference kernel (check_plan). Then
    DenseNet's concatenation of features in blocked layouts, and of a
    blocked tensor with a plain one."""
    m = Model("windows", [("x", (4, 6, 8)), ("y", (24, 5, 5)), ("z", (8, 196, 16))])
    s = m.op("MatMul", [m.op("Mul", ["x", m.const(0.35)]), m.op("Transpose", ["x"], perm=[0, 1, 3, 2])])
    s = m.op("Add", [s, m.rand(1, 4, 6, 6)])
    s5 = m.op("Add", [m.op("Reshape", [s, m.const_i64([0, 2, 2, 6, 6])]), m.rand(1, 2, 1, 6, 6, scale=3.0)])
    a = m.op("MatMul", [m.op("Softmax", [m.op("Reshape", [s5, m.const_i64([0, 4, 6, 6])])], axis=-1), "x"])
    c = m.op("Relu", [m.conv("y", 24, 24, (3, 3), group=3, pads=[1, 1, 1, 1])])
    e = m.op("Sigmoid", [m.conv(m.op("GlobalAveragePool", [c]), 24, 24, (1, 1))])
    # (a LogSoftmax over the heads and a Softmax over CoaT's tokens: not the
    # last axis, which oneDNN has only its reference kernel for, so pprt's
    # kernel takes them; the second large enough for two threads to share)
    # CoaT's pad of one token in front (and one cut off the end of the
    # channels): pprt's row copies
    zp = m.op("Pad", ["z", m.const_i64([0, 0, 1, 0, 0, 0, 0, -1])], mode="constant")
    # (reductions over the heads, the tokens and channels, the channels: pprt's
    # kernel; a Split of the channels, 4 and 12: pprt's row copies)
    zs = m.op("Split", ["z", m.const_i64([4, 12])], n_out=2, axis=-1)
    # DenseNet's feature concatenation: blocked outputs of convolutions, and
    # one beside a plain model input
    f = m.op("Concat", [m.op("Mul", [c, e]), c, m.op("Relu", [m.conv(c, 24, 16, (1, 1))])], axis=1)
    g = m.op("Concat", [m.op("Relu", [m.bn(f, 64)]), "y"], axis=1)
    return m.save([m.op("LogSoftmax", [a], axis=1), g, m.op("Softmax", [m.op("Mul", [zp, m.const(4.0)])], axis=2),
                   m.op("ReduceMean", ["z", m.const_i64([1])]), m.op("ReduceL2", ["z", m.const_i64([2, 3])], keepdims=0),
                   m.op("ReduceMax", ["z", m.const_i64([-1])])] + zs), \
        m.data(), \
        ["MatMul", "Softmax", "Conv", "Mul", "Concat", "BatchNormalization", "Pad", "ReduceMean", "ReduceL2", "ReduceMax", "Split"]


def metaformer():
    """EfficientFormer's and PoolFormer's blocks: y = x + ls1 * (AvgPool(x) -
    x); z = y + ls2 * Conv(Gelu(Conv(y))), the last two absorbed by the second
    convolution as post-ops with the residual y as a whole operand; then a
    product whose residual is a convolution's (blocked) output. At -pp 2 and
    3 a cut leaves some residual plain that -pp 1 has blocked: the kernel a
    node takes and which nodes it absorbs must not depend on that
    (efficientformer_l1 of the timm sweep lost bit identity so). Last a
    BatchNormalization after a Concat of a convolution's output and one made
    early, which a cut leaves plain: its kernel must not depend on the
    Concat's layout either (tf_mixnet_s at -pp 4)."""
    m = Model("metaformer", [("x", (3, 16, 16))])
    x = m.op("Relu", [m.conv("x", 3, 32, (3, 3), pads=[1, 1, 1, 1])])
    early = m.conv(x, 32, 16, (1, 1))
    for _ in range(3):
        p = m.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                 count_include_pad=0)
        y = m.op("Add", [x, m.op("Mul", [m.op("Sub", [p, x]), m.rand(32, 1, 1)])])
        h = m.conv(m.op("Gelu", [m.conv(y, 32, 64, (1, 1))]), 64, 32, (1, 1))
        x = m.op("Add", [y, m.op("Mul", [h, m.rand(32, 1, 1)])])
    r = m.conv(x, 32, 32, (1, 1))
    t = m.op("Add", [m.op("MatMul", [x, m.rand(16, 16, scale=0.3)]), r])
    c = m.op("Relu", [m.bn(m.op("Concat", [early, m.conv(x, 32, 24, (1, 1))], axis=1), 40)])
    return m.save([t, c]), m.data(), ["Conv", "AveragePool", "MatMul", "BatchNormalization"]


def convformer():
    """ConvFormer's and CAFormer's blocks as timm exports them before opset
    17: a LayerNorm2d without shift written out between two Transposes
    ([N, C, H, W] -> [N, H, W, C] and back; ppcc makes it one
    LayerNormalization of two inputs), StarReLU (Relu, Pow by 2, a scale and
    a bias; a convolution absorbs all four), a depthwise 7x7 convolution and
    the residual Add. A Transpose reads a convolution's output in the layout
    the convolution wrote: where that input dies there, the Transpose takes
    over its bytes; where it is read again (the residual), one copy. The
    Transpose after the normalization leaves its output channels-last for
    the convolution (a view). Then a Transpose of a model input feeding an
    Add with a convolution's output, one that moves the last axis of a
    convolution's output before a Softmax (plain), and a Pow by 3
    (the reference kernel)."""
    m = Model("convformer", [("x", (3, 10, 10)), ("z", (10, 10, 24))], opset=13)

    def ln2d(t, c):
        h = m.op("Transpose", [t], perm=[0, 2, 3, 1])
        d = m.op("Sub", [h, m.op("ReduceMean", [h], axes=[-1])])
        v = m.op("ReduceMean", [m.op("Pow", [d, m.const(2.0)])], axes=[-1])
        n = m.op("Div", [d, m.op("Sqrt", [m.op("Add", [v, m.const(1e-6)])])])
        return m.op("Transpose", [m.op("Mul", [n, m.const(m.rng.uniform(0.5, 1.5, c))])], perm=[0, 3, 1, 2])

    def star_relu(t):
        r = m.op("Pow", [m.op("Relu", [t]), m.const(2.0)])
        return m.op("Add", [m.op("Mul", [m.const(0.8), r]), m.const(-0.1)])

    x0 = m.conv("x", 3, 24, (2, 2), pads=[1, 1, 0, 0])  # (no Winograd: its output layout has inner blocks)
    h = star_relu(m.conv(ln2d(x0, 24), 24, 48, (1, 1), bias=False))
    h = m.conv(h, 48, 48, (7, 7), group=48, pads=[3, 3, 3, 3], bias=False)
    x1 = m.op("Add", [x0, m.conv(h, 48, 24, (1, 1), bias=False)])
    y = m.conv(star_relu(m.conv(ln2d(x1, 24), 24, 32, (1, 1))), 32, 24, (1, 1))
    zt = m.op("Add", [m.op("Transpose", ["z"], perm=[0, 3, 1, 2]), m.conv(y, 24, 24, (1, 1))])
    # (scaled down, and the cube of the first convolution's output: bf16's errors through five
    # convolutions and two squares, then a cube, passed its 5%)
    s = m.op("Softmax", [m.op("Transpose", [m.op("Mul", [m.conv(zt, 24, 16, (1, 1)), m.const(0.25)])],
                              perm=[0, 1, 3, 2])], axis=-1)
    c = m.op("Pow", [m.op("Tanh", [x0]), m.const(3.0)])
    return m.save([s, c]), m.data(), ["Conv", "Pow", "Transpose", "Softmax", "Tanh"]


def patch_embed():
    """PiT's patch embedding: a 16x16 convolution of stride 8 from 3 channels
    plus a position embedding of the output's [1, C, H, W] shape. As a
    binary post-op that embedding left oneDNN only its gemm convolution on
    AVX-512 (13-40 ms against 2.7 for brgconv and the Add apart, pit_ti_224):
    the convolution then absorbs nothing."""
    m = Model("patch_embed", [("x", (3, 40, 40))])
    y = m.op("Add", [m.conv("x", 3, 32, (16, 16), strides=[8, 8]), m.rand(1, 32, 4, 4)])
    return m.save([m.op("Flatten", [y])]), m.data(), ["Conv", "Add"]


def norms():
    """InstanceNormalization and GroupNormalization on oneDNN's layer
    normalization, then the scale and bias by a binary primitive: an instance
    norm with a scale and bias per channel; torch's GroupNorm export (Reshape
    to one group, an InstanceNormalization with scale 1 and bias 0, Reshape
    back, Mul, Add: ppcc's pp.GroupNorm, on pprt's kernel; unfused, the
    InstanceNormalization needs no binary step); a 1-D one whose scale is
    all ones but bias is not; GroupNormalization before opset 21 (a scale
    and bias per group)."""
    m = Model("norms", [("x", (8, 6, 6))])
    c = m.conv("x", 8, 8, (3, 3), pads=[1, 1, 1, 1])
    a = m.op("InstanceNormalization", [c, m.const(m.rng.uniform(0.5, 1.5, 8)), m.rand(8, scale=0.1)], epsilon=1e-5)
    r = m.op("Reshape", [a, m.const_i64([0, 1, -1])])
    i = m.op("InstanceNormalization", [r, m.const(np.ones(1)), m.const(np.zeros(1))], epsilon=1e-5)
    b = m.op("Add", [m.op("Mul", [m.op("Reshape", [i, m.const_i64([0, 8, 6, 6])]), m.rand(8, 1, 1)]), m.rand(8, 1, 1)])
    l = m.op("InstanceNormalization", [m.op("Reshape", [b, m.const_i64([0, 8, 36])]), m.const(np.ones(8)),
                                       m.rand(8, scale=0.1)], epsilon=1e-3)
    g = m.op("GroupNormalization", [m.op("Relu", [c]), m.const(m.rng.uniform(0.5, 1.5, 4)), m.rand(4, scale=0.1)],
             num_groups=4, epsilon=1e-5)
    return m.save([l, g]), m.data(), ["InstanceNormalization", "GroupNormalization"]


def groupnorm():
    """timm's GroupNorm as torch exports it (Reshape to [N, G, -1], an
    InstanceNormalization with scale 1 and bias 0, Reshape back, Mul, Add)
    after convolutions, as in efficientnet_b0_gn and ResNetV2: ppcc makes
    each one pp.GroupNorm, which runs on pprt's kernel in the layout the
    convolution wrote, so no convolution after the first needs a reorder
    (the written-out form read plain: 98 reorders per micro-batch in
    efficientnet_b0_gn). Four, three and one groups, one without the affine
    step; SiLU after two of them and a Relu after one, which pprt's kernel
    applies in its last pass."""
    m = Model("groupnorm", [("x", (3, 12, 12))], opset=17)

    def gn(t, c, g, affine=True):
        r = m.op("Reshape", [t, m.const_i64([0, g, -1])])
        i = m.op("InstanceNormalization", [r, m.const(np.ones(g)), m.const(np.zeros(g))], epsilon=1e-5)
        b = m.op("Reshape", [i, m.const_i64([0, c, 12, 12])])
        if not affine:
            return b
        return m.op("Add", [m.op("Mul", [b, m.const(m.rng.uniform(0.5, 1.5, (c, 1, 1)))]), m.rand(c, 1, 1, scale=0.1)])

    def silu(t):
        return m.op("Mul", [t, m.op("Sigmoid", [t])])

    # (2x2, not 3x3: no Winograd, whose output layout has inner blocks that the depthwise convolution reorders)
    a = silu(gn(m.conv("x", 3, 24, (2, 2), pads=[1, 1, 0, 0]), 24, 4))
    b = silu(gn(m.conv(a, 24, 24, (3, 3), group=24, pads=[1, 1, 1, 1]), 24, 3))
    c = m.op("Relu", [gn(m.conv(b, 24, 32, (1, 1)), 32, 1)])
    d = gn(m.conv(c, 32, 32, (1, 1)), 32, 4, affine=False)
    return m.save([m.conv(d, 32, 8, (1, 1))]), m.data(), ["Conv"]


def grouped():
    """Convolutions of few channels a group (ResNeXt, DLA-X): 2 a group
    with a Relu, 4 a group at stride 2 with a Clip, 2 a group dilated
    without a bias, 2 a group over 24 channels (not a multiple of 16) with
    a Sigmoid after it that a convolution would absorb: on pprt's kernel
    (runtime/dnnl/kernels/gconv.c), which absorbs nothing. Left to oneDNN: 8 a group
    (its JIT kernel is faster), and 2 a group whose residual Add becomes
    part of pp.FusedConv."""
    m = Model("grouped", [("x", (3, 14, 13))])
    a = m.op("Relu", [m.conv(m.conv("x", 3, 16, (1, 1)), 16, 16, (3, 3), group=8, pads=[1, 1, 1, 1])])
    b = m.op("Clip", [m.conv(a, 16, 32, (1, 1)), m.const(np.float32(0.0)), m.const(np.float32(6.0))])
    b = m.op("Clip", [m.conv(b, 32, 32, (3, 3), group=8, strides=[2, 2], pads=[1, 0, 1, 1]),
                      m.const(np.float32(0.0)), m.const(np.float32(6.0))])
    c = m.conv(b, 32, 32, (3, 3), group=16, bias=False, dilations=[2, 2], pads=[2, 2, 2, 2])
    d = m.op("Sigmoid", [m.conv(m.conv(c, 32, 24, (1, 1)), 24, 24, (3, 3), group=12, pads=[1, 1, 1, 1])])
    e = m.conv(m.conv(d, 24, 32, (1, 1)), 32, 32, (3, 3), group=4, pads=[1, 1, 1, 1])
    f = m.op("Add", [m.conv(e, 32, 32, (3, 3), group=16, pads=[1, 1, 1, 1]), e])
    return m.save([f]), m.data(), ["Conv"]


def regblock():
    """RegNetZ's block: a 1x1 convolution, a grouped 3x3 one (16 channels a group, which oneDNN runs
    in channel blocks), a squeeze-excite gate, a 1x1 convolution and the residual Add, twice. With
    PPRT_DNNL_CONV_BLOCKED (the default) the 1x1 convolutions take channel blocks too, as nothing
    in their group of tensors needs another layout: no reorder between the convolutions."""
    m = Model("regblock", [("x", (32, 10, 10))])
    t = "x"
    for _ in range(2):
        a = m.op("Relu", [m.conv(t, 32, 64, (1, 1))])
        b = m.op("Relu", [m.conv(a, 64, 64, (3, 3), group=4, pads=[1, 1, 1, 1])])
        se = m.op("Sigmoid", [m.conv(m.op("Relu", [m.conv(m.op("GlobalAveragePool", [b]), 64, 8, (1, 1))]),
                                     8, 64, (1, 1))])
        t = m.op("Add", [m.conv(m.op("Mul", [b, se]), 64, 32, (1, 1)), t])
    return m.save([t]), m.data(), ["Conv"]


def grn():
    """ConvNeXt-V2's global response normalization between two 1x1
    convolutions: ReduceL2 over the spatial axes, its mean over the
    channels, a Div, then gamma * (x * Nx) + beta + x. The ReduceL2 reads
    the convolution's output in the layout oneDNN wrote (channels last or
    blocked on channels), so the Muls and Adds stay in it and neither
    convolution reorders (the ReduceL2 had read a plain copy, which turned
    the rest plain: 5 ms a block in convnextv2_atto's first stage). A second
    one over 24 channels (not a multiple of 16: a padded 16-block is read
    through a plain copy) after a Relu that the convolution absorbs."""
    m = Model("grn", [("x", (8, 9, 7))], opset=17)

    def block(t, c):
        gx = m.op("ReduceL2", [t], axes=[2, 3], keepdims=1)
        nx = m.op("Div", [gx, m.op("Add", [m.op("ReduceMean", [gx], axes=[1], keepdims=1), m.const(np.float32(1e-6))])])
        y = m.op("Mul", [m.rand(1, c, 1, 1), m.op("Mul", [t, nx])])
        return m.op("Add", [m.op("Add", [y, m.rand(1, c, 1, 1, scale=0.1)]), t])

    a = m.conv(m.conv("x", 8, 16, (3, 3), pads=[1, 1, 1, 1]), 16, 32, (1, 1))
    b = m.conv(block(a, 32), 32, 24, (1, 1))
    c = m.conv(block(m.op("Relu", [b]), 24), 24, 8, (1, 1))
    return m.save([c]), m.data(), ["Conv", "ReduceL2", "ReduceMean"]


def norms21():
    """GroupNormalization from opset 21: a scale and bias per channel."""
    m = Model("norms21", [("x", (8, 5, 7))], opset=21)
    g = m.op("GroupNormalization", ["x", m.const(m.rng.uniform(0.5, 1.5, 8)), m.rand(8, scale=0.1)],
             num_groups=2, epsilon=1e-5)
    return m.save([g]), m.data(), ["GroupNormalization"]


def mbconv():
    """EfficientNet's MBConv block twice: 1x1 expansion, SiLU, depthwise 3x3,
    SiLU, squeeze-and-excitation (GlobalAveragePool of that SiLU's output,
    1x1 down, SiLU, 1x1 up, Sigmoid, Mul), 1x1 projection, residual; 32
    expanded channels (whole 16-channel blocks) in the first, 24 in the
    second. The squeeze-excite nodes are named in module bN.se, so
    --split-at b1.se cuts between the SiLU and the pool that pprt runs in one
    pass (runtime/dnnl/kernels/gap.h)."""
    m = Model("mbconv", [("x", (16, 12, 12))])

    def named(t, name):  # rename the node that made t
        m.nodes[-1].name = name
        return t

    def silu(t, name=None):
        sg = m.op("Sigmoid", [t])
        y = m.op("Mul", [t, sg])
        return named(y, name) if name else y

    def block(x, ce, tag):
        e = silu(m.conv(x, 16, ce, (1, 1)))
        d = silu(m.conv(e, ce, ce, (3, 3), group=ce, pads=[1, 1, 1, 1]))
        s = named(m.op("GlobalAveragePool", [d]), f"/{tag}/se/GlobalAveragePool")
        s = silu(m.conv(s, ce, 8, (1, 1)))
        s = m.op("Sigmoid", [m.conv(s, 8, ce, (1, 1))])
        z = named(m.op("Mul", [d, s]), f"/{tag}/se/Mul")
        return m.op("Add", [m.conv(z, ce, 16, (1, 1)), x])

    b = block(block("x", 32, "b1"), 24, "b2")
    y = m.op("Gemm", [m.op("Flatten", [m.op("GlobalAveragePool", [b])]), m.rand(10, 16, scale=0.3), m.rand(10)],
             transB=1)
    return m.save([y, b]), m.data(), ["Conv", "GlobalAveragePool", "Mul", "Gemm"]


def resize():
    """Resize on oneDNN's resampling (linear, half_pixel or
    pytorch_half_pixel): 2x up from a convolution's output (blocked where
    the convolution is in the same stage), 2x down, 1.5x up, 1-D; and one
    with align_corners, which oneDNN does not compute, on the reference
    kernel in between. Nearest on pprt's gather (three coordinate
    transforms and roundings)."""
    m = Model("resize", [("x", (8, 6, 6))])
    c = m.conv("x", 8, 8, (3, 3), pads=[1, 1, 1, 1])
    e = ""
    up = m.op("Resize", [c, e, m.const([1, 1, 2, 2])], mode="linear", coordinate_transformation_mode="half_pixel")
    mid = m.op("Resize", [m.op("Relu", [c]), e, m.const([1, 1, 1.5, 1.5])], mode="linear",
               coordinate_transformation_mode="pytorch_half_pixel")
    down = m.op("Resize", [up, e, m.const([1, 1, 0.5, 0.5])], mode="linear",
                coordinate_transformation_mode="half_pixel")
    corners = m.op("Resize", [mid, e, m.const([1, 1, 2, 2])], mode="linear",
                   coordinate_transformation_mode="align_corners")
    one = m.op("Resize", [m.op("Reshape", [corners, m.const_i64([0, 8, 324])]), e, m.const([1, 1, 2])],
               mode="linear", coordinate_transformation_mode="half_pixel")
    # nearest (pprt's gather with the reference kernel's index maps): torch's nn.Upsample (asymmetric,
    # floor), 1.5x with half_pixel rounding half down, 0.6x down with align_corners rounding half up
    # (tf_crop_and_resize, whose extrapolation keeps it on the reference kernel, is refused over
    # micro-batches: the conformance tests run it)
    near = m.op("Resize", [c, e, m.const([1, 1, 2, 2])], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    near = m.op("Resize", [near, e, m.const([1, 1, 1.5, 1.5])], mode="nearest",
                coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor")
    near = m.op("Resize", [near, e, m.const([1, 1, 0.6, 0.6])], mode="nearest",
                coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil")
    return m.save([down, one, near]), m.data(), ["Resize"]


# ---- run everything --------------------------------------------------------------------------------

for make in (cnn, wino, conv_nd, mlp, gemm, gemv, fallback, mixed, views, tokens, slices, cut_types, windows,
             metaformer, convformer, patch_embed, norms, groupnorm, grouped, regblock, grn, norms21, resize, mbconv):
    model, data, must = make()
    name = os.path.basename(model)[:-5]
    for variant, flags in (("fused", []), ("unfused", ["--disable-pass", "fuse"])):
        pps = (1, 3) if name == "cnn" else (1, 2, 3) if name in ("wino", "views", "tokens", "slices", "windows",
                                                                 "metaformer",
                                                                 "convformer", "norms", "groupnorm",
                                                                 "grouped", "regblock", "grn", "resize",
                                                                 "mbconv") else \
            (1, 2, 3, 4) if name == "cut_types" else (1,)
        for pp in pps:
            plan = os.path.join(work, f"{name}_{variant}_{pp}.plan")
            try:
                batch = "1" if name == "gemv" else "2"
                # MaxPool's Indices count through the whole batch: ppcc refuses to cut it
                # into micro-batches unless told (both backends run the same plan here)
                mix = ["--allow-batch-mixing"] if name == "fallback" else []
                run([PPCC, model, "-b", batch, "-pp", str(pp), "-q", "-o", plan] + flags + mix)
                # the fused ops replace some of the listed ones
                req = must if variant == "unfused" else [o for o in must if o not in (
                    "Relu", "Add", "Clip", "Sigmoid", "Mul", "Gelu")]
                if name in ("views", "tokens", "slices") and pp > 1:  # a view whose input or output crosses a cut copies
                    req = ["MatMul"]
                check_plan(f"{name}_{variant}_pp{pp}", plan, data, req, extra_runs=True)
            except RuntimeError as e:
                failures.append(f"{name} {variant} -pp {pp}: {e}")

def verbose_run(name, level="2"):
    """NAME's fused -pp 1 plan on oneDNN with PPRT_DNNL_VERBOSE=level (its report on stderr)"""
    return run([PPRT, os.path.join(work, f"{name}_fused_1.plan"), os.path.join(work, f"{name}_data"), "--backend",
                "dnnl", "-q", "-o", os.path.join(work, f"{name}_verbose")], env={"PPRT_DNNL_VERBOSE": level})


# wino: the kernel of a node never depends on the split, so -pp 2 and 3 give
# -pp 1's bits; on an AVX2 CPU without AVX-512 (where oneDNN has no Winograd)
# all six convolutions of the fused plan run on pprt's own kernel
# views: likewise (a view where the input dies in the stage, a copy where it
# crosses a cut: the same bytes)
# windows: a BatchNormalization after a Concat whose inputs a cut leaves
# plain: its kernel (and so its bits) must not depend on the split (the
# zoo's DenseNet-121 at -pp 4 is the model that showed it: tests/models)
# metaformer: likewise for a residual absorbed as a post-op (see the model)
for name, pp, mode in ((n, k, m) for n in ("wino", "views", "tokens", "slices", "windows", "metaformer", "convformer",
                                           "norms", "groupnorm", "grouped", "regblock", "grn", "resize", "mbconv")
                       for k in (2, 3)
                       for m in ("blocked_t1", "convblk_t1")):
    # convblk: PPRT_DNNL_CONV_BLOCKED=1 chooses a convolution's layout from the node alone too
    d1, dn = (os.path.join(work, f"{name}_fused_pp{k}_{mode}") for k in (1, pp))
    if os.path.isdir(d1) and os.path.isdir(dn):
        for f in sorted(x for x in os.listdir(d1) if x.endswith(".npy")):
            if not np.array_equal(np.load(os.path.join(d1, f)), np.load(os.path.join(dn, f))):
                failures.append(f"{name} [{mode}]: {f}: -pp {pp} gave other bits than -pp 1")
# mbconv: each block's squeeze-excite on pprt's kernels: the GlobalAveragePool
# in the pass of the SiLU whose output it pools (pprt:silu_gap; the pool a
# "post-op") where that SiLU is on pprt's kernel (AVX2 and up), the Mul by
# the scale on pprt:cscale. A cut between the SiLU and the pool (--split-at
# b1.se,b2.se: the pools alone on pprt:gap, reading a received plain
# tensor) changes no bit of the outputs: the sums' order is the shape's
# (gap.h); in bf16 too (the means rounded once either way)
try:
    r = verbose_run("mbconv")
    fused = len(re.findall(r"pp\.SiLU\s+pprt:silu_gap", r.stderr))
    scaled = len(re.findall(r"\sMul\s+pprt:cscale", r.stderr))
    if (ISA in ("avx2", "avx512") and fused != 2) or scaled != 2:
        failures.append(f"mbconv: {fused} SiLU+pool passes, {scaled} Muls on pprt:cscale (want 2 and 2):\n{r.stderr}")
    cut = os.path.join(work, "mbconv_cut.plan")
    run([PPCC, os.path.join(work, "mbconv.onnx"), "-b", "2", "-pp", "3", "--split-at", "b1.se,b2.se", "-q", "-o", cut])
    for prec in (["f32"] + (["bf16"] if HAVE_BF16 else [])):
        outs = {}
        for tag, plan in (("one", os.path.join(work, "mbconv_fused_1.plan")), ("cut", cut)):
            outs[tag] = os.path.join(work, f"mbconv_{tag}_{prec}")
            rr = run([PPRT, plan, os.path.join(work, "mbconv_data"), "--backend", "dnnl", "-q", "--no-pin",
                      "--threads", "1", "--precision", prec, "-o", outs[tag]], env={"PPRT_DNNL_VERBOSE": "2"})
            if tag == "cut" and len(re.findall(r"GlobalAveragePool\s+pprt:gap", rr.stderr)) < 2:
                failures.append(f"mbconv cut [{prec}]: the pools after the cut are not on pprt:gap:\n{rr.stderr}")
            # bf16 on AMX: every 1x1 convolution on pprt:pw, the expansions and the squeeze's
            # first with their SiLU, its second with the Sigmoid, the projections applying the
            # Mul before them as they read (the Mul a "pre-op") and adding the residual
            if prec == "bf16" and HAVE_AMX:
                want = {r"pprt:pw_silu:amx": 4, r"pprt:pw_sigmoid:amx": 2, r"\sMul\s+pre-op": 2}
                got = {k: len(re.findall(k, rr.stderr)) for k in want}
                if (tag == "one" and got != want) or (tag == "cut" and got[r"pprt:pw_silu:amx"] < 2):
                    failures.append(f"mbconv {tag} [bf16]: {got} on pprt's AMX kernel (want {want}):\n{rr.stderr}")
        for f in sorted(x for x in os.listdir(outs["one"]) if x.endswith(".npy")):
            if not np.array_equal(np.load(os.path.join(outs["one"], f)), np.load(os.path.join(outs["cut"], f))):
                failures.append(f"mbconv [{prec}]: {f}: the cut between SiLU and pool gave other bits than -pp 1")
except RuntimeError as e:
    failures.append(f"mbconv: {e}")

if ISA == "avx2":
    try:
        r = verbose_run("wino")
        own = len(re.findall(r"pprt:wino_[24]x3:avx2", r.stderr))
        if own != 6:
            failures.append(f"wino: {own} of 6 convolutions on pprt's Winograd kernel:\n{r.stderr}")
    except RuntimeError as e:
        failures.append(f"wino: {e}")

# SiLU: on AVX2 without AVX-512, pprt's own kernel (runtime/dnnl/kernels/silu.c) runs
# it, not absorbed by the convolution before it
if ISA == "avx2":
    try:
        r = verbose_run("cnn")
        if not re.search(r"pp\.SiLU\s+pprt:silu(:avx2|_gap)", r.stderr):
            failures.append(f"cnn: pp.SiLU is not on pprt's SiLU kernel:\n{r.stderr}")
    except RuntimeError as e:
        failures.append(f"cnn: {e}")

# views: at -pp 1 (fused) eight nodes are views: Flatten(a), the Reshape
# after it, Unsqueeze, the Transpose of a 1-long axis, Squeeze, the Reshape
# of the copy `kept`, the one of yt and the one of yb's product; the other
# three copy (an input read again, a received input, a graph output)
try:
    vs = os.path.join(work, "views_stats.json")
    r = run([PPRT, os.path.join(work, "views_fused_1.plan"), os.path.join(work, "views_data"), "--backend", "dnnl",
             "-q", "-o", os.path.join(work, "views_verbose"), "--stats-json", vs], env={"PPRT_DNNL_VERBOSE": "1"})
    if counts(r.stderr)[2] != 8:
        failures.append(f"views: {counts(r.stderr)[2]} views at -pp 1, expected 8:\n{r.stderr}")
    if json.load(open(vs))["stages"][0]["view_nodes"] != 8:
        failures.append(f"views: --stats-json: {json.load(open(vs))['stages']}, expected 8 views")
    r = verbose_run("views")
    rows = len(re.findall(r"Transpose\s+pprt:permute_rows", r.stderr))
    if rows != 2:
        failures.append(f"views: {rows} Transposes on pprt's row copies, expected 2:\n{r.stderr}")
except RuntimeError as e:
    failures.append(f"views: {e}")

# tokens: PVT's MLP permutes the product's tokens and reshapes them into an
# image for the depthwise convolution: the first Transpose and the Reshapes
# on both sides of the convolution are views on every ISA; on AVX-512,
# where oneDNN's depthwise kernel reads and writes channels-last, the
# convolution reorders nothing and the Transpose back is a view too (before:
# a copy, a reorder in and one out of the convolution, one after the Gelu)
try:
    err = verbose_run("tokens").stderr
    lines = [l.split() for l in err.splitlines() if l.startswith("  ")]
    first = {}
    for l in lines:
        first.setdefault(l[1], []).append(l[2:])
    ok = first["Transpose"][0] == [] and first["Reshape"][0] == [] and first["Reshape"][1] == []
    if ISA == "avx512":
        ok = ok and first["Transpose"][1] == [] and not any(k.startswith("reorder:") for k in first["Conv"][0])
    if not ok:
        failures.append(f"tokens: the tokens' Transposes and Reshapes around the depthwise convolution are not "
                        f"views, or the convolution reorders:\n{err}")
except (RuntimeError, KeyError, IndexError) as e:
    failures.append(f"tokens: {e}")

# regblock: on AVX-512 the convolutions share channel blocks (no reorder between them: one for the
# plain input, one for the plain output at most), where oneDNN's own choices (PPRT_DNNL_CONV_BLOCKED=0)
# put the 1x1 convolutions in nhwc beside the grouped ones in blocks
if ISA == "avx512":
    try:
        got, err = {}, {}
        for v in ("1", "0"):
            r = run([PPRT, os.path.join(work, "regblock_fused_1.plan"), os.path.join(work, "regblock_data"), "--backend",
                     "dnnl", "-q", "-o", os.path.join(work, f"regblock_blk{v}"), "--threads", "1"],
                    env={"PPRT_DNNL_VERBOSE": "2", "PPRT_DNNL_CONV_BLOCKED": v})
            got[v], err[v] = int(re.search(r"(\d+) reorders", r.stderr).group(1)), r.stderr
        # the grouped convolutions and the gated products read their sources as stored (the squeeze-excite's
        # [N, C, 1, 1] tensors may reorder: they cost nothing)
        lines = [l.split() for l in err["1"].splitlines() if l.startswith("  ")]
        bad = [l[0] for l in lines if (l[1] == "Mul" or (l[1] == "pp.FusedConv" and "jit:avx512_core" in l[2:]))
               and any(k.startswith("reorder:") for k in l[2:])]
        if bad or got["0"] <= got["1"]:
            failures.append(f"regblock: {bad} reorder their source in channel blocks; {got['1']} reorders a "
                            f"micro-batch against {got['0']} on oneDNN's own choices:\n{err['1']}")
    except (RuntimeError, AttributeError) as e:
        failures.append(f"regblock: {e}")

# CSPDarkNet's block: a 3x3 stride-1 convolution, a LeakyRelu and a residual Add. On AVX-512 the
# convolution keeps oneDNN's Winograd kernel and absorbs nothing, in oneDNN's layouts and with
# PPRT_DNNL_CONV_BLOCKED=1 (whose matching layouts would let it absorb both as post-ops, which take
# Winograd away: 2.5x slower on CSPDarkNet-53's shapes); the outputs against the reference kernels
if ISA == "avx512":
    try:
        m = Model("csp", [("x", (16, 12, 12))])
        a = m.op("LeakyRelu", [m.conv("x", 16, 32, (1, 1))], alpha=0.1)
        b = m.op("Add", [m.op("LeakyRelu", [m.conv(a, 32, 32, (3, 3), pads=[1, 1, 1, 1])], alpha=0.1), a])
        cm, cd = m.save([m.conv(b, 32, 16, (1, 1))]), m.data()
        cp = os.path.join(work, "csp.plan")
        run([PPCC, cm, "-b", "2", "-q", "-o", cp])
        run([PPRT, cp, cd, "--backend", "ref", "-q", "-o", os.path.join(work, "csp_ref")])
        for v in ("0", "1"):
            out = os.path.join(work, f"csp_blk{v}")
            r = run([PPRT, cp, cd, "--backend", "dnnl", "-q", "--threads", "1", "-o", out],
                    env={"PPRT_DNNL_VERBOSE": "2", "PPRT_DNNL_CONV_BLOCKED": v})
            conv3 = [l for l in r.stderr.splitlines() if l.startswith("  ") and " Conv " in l][1]
            if "wino" not in conv3:
                failures.append(f"csp [PPRT_DNNL_CONV_BLOCKED={v}]: the 3x3 convolution is not on Winograd:\n"
                                f"{r.stderr}")
            compare(f"csp [PPRT_DNNL_CONV_BLOCKED={v}]", out, os.path.join(work, "csp_ref"))
    except (RuntimeError, IndexError) as e:
        failures.append(f"csp: {e}")

# windows: on AVX2 and AVX-512 the LogSoftmax over the heads and the Softmax
# over the tokens run on pprt's kernel (runtime/dnnl/kernels/softmax.c); the Pad on
# pprt's row copies (runtime/dnnl/kernels/pad.c), the reductions on its kernel
# (runtime/dnnl/kernels/reduce.c), the Split on its row copies (runtime/dnnl/kernels/rowcopy.c)
if ISA in ("avx2", "avx512"):
    try:
        r = verbose_run("windows")
        cols = len(re.findall(r"Softmax\s+pprt:softmax_cols", r.stderr))
        if cols != 2:
            failures.append(f"windows: {cols} of 2 middle-axis softmaxes on pprt's kernel:\n{r.stderr}")
        if not re.search(r"Pad\s+pprt:pad", r.stderr):
            failures.append(f"windows: the Pad is not on pprt's row copies:\n{r.stderr}")
        if not re.search(r"Split\s+pprt:rowcopy pprt:rowcopy", r.stderr):
            failures.append(f"windows: the Split is not on pprt's row copies:\n{r.stderr}")
        red = len(re.findall(r"Reduce\w+\s+pprt:reduce", r.stderr))
        if red != 3:
            failures.append(f"windows: {red} of 3 reductions on pprt's kernel:\n{r.stderr}")
    except RuntimeError as e:
        failures.append(f"windows: {e}")

# convformer: ppcc made each written-out LayerNorm2d one LayerNormalization
# (no shift); StarReLU's Pow is a post-op of the convolution before it; the
# Transposes after the normalizations (a plain input that dies there, read
# by a convolution) are views, on every ISA
try:
    err = verbose_run("convformer").stderr
    lines = [l.split() for l in err.splitlines() if l.startswith("  ")]
    ln = sum(1 for l in lines if l[1] == "LayerNormalization")
    pow_post = sum(1 for l in lines if l[1] == "Pow" and l[2:] == ["post-op"])
    t_views = sum(1 for l in lines if l[1] == "Transpose" and len(l) == 2)
    if ln != 2 or pow_post != 2 or t_views < 2:
        failures.append(f"convformer: {ln} LayerNormalizations (want 2), {pow_post} Pows as post-ops (want 2), "
                        f"{t_views} Transposes as views (want 2 or more):\n{err}")
except RuntimeError as e:
    failures.append(f"convformer: {e}")

# groupnorm: four pp.GroupNorm, each on pprt's kernel with no reorder before
# it, the two SiLUs and the Relu after them applied by it, and no
# convolution after the first reorders its source (the last one its output,
# into the model's plain output)
try:
    err = verbose_run("groupnorm").stderr
    lines = [l.split() for l in err.splitlines() if l.startswith("  ")]
    gn = [l[2:] for l in lines if l[1] == "pp.GroupNorm"]
    convs = [l for l in lines if l[1] == "Conv"]
    want = [["pprt:gnorm_silu"], ["pprt:gnorm_silu"], ["pprt:gnorm_relu"], ["pprt:gnorm"]]
    if gn != want or len(convs) != 5 or any(l[2].startswith("reorder:") for l in convs[1:]):
        failures.append(f"groupnorm: want pp.GroupNorm on {want} and 4 convolutions without a reorder of their "
                        f"source:\n{err}")
except RuntimeError as e:
    failures.append(f"groupnorm: {e}")

# grouped: four convolutions on pprt's kernel (16 lanes on AVX-512 where 16
# divide the channels, else 8), the one of 8 a group and the one with the
# residual on oneDNN's
if ISA in ("avx2", "avx512"):
    try:
        err = verbose_run("grouped").stderr
        want = ["avx512", "avx512", "avx512", "avx2"] if ISA == "avx512" else ["avx2"] * 4
        got = re.findall(r"(?:Conv|pp\.FusedConv)\s+(?:reorder:\S+ )?pprt:gconv:(\w+)\s*$", err, re.M)
        absorbed = [l for l in err.splitlines() if "Sigmoid" in l and "post-op" in l]
        if got != want or absorbed:
            failures.append(f"grouped: want convolutions on pprt:gconv:{want}, the Sigmoid not absorbed:\n{err}")
    except RuntimeError as e:
        failures.append(f"grouped: {e}")

# patch_embed: on AVX-512 the convolution runs a JIT kernel, not oneDNN's gemm one
if ISA == "avx512":
    try:
        err = verbose_run("patch_embed").stderr
        conv = [l for l in err.splitlines() if l.startswith("  ") and l.split()[1] == "Conv"]
        if len(conv) != 1 or "gemm" in conv[0] or "ref" in conv[0]:
            failures.append(f"patch_embed: the convolution ran oneDNN's gemm or reference kernel:\n{err}")
    except RuntimeError as e:
        failures.append(f"patch_embed: {e}")

# resize: the three nearest Resizes run on pprt's gather
try:
    err = verbose_run("resize").stderr
    near = len(re.findall(r"Resize\s+pprt:nearest", err))
    if near != 3:
        failures.append(f"resize: {near} of 3 nearest Resizes on pprt's gather:\n{err}")
except RuntimeError as e:
    failures.append(f"resize: {e}")

# slices: at -pp 1 (fused) the Add of query and key, the Mul by the value and
# the Tanh write over their (first) input, which dies there (binary and
# eltwise ops in place); the other nodes' outputs are graph outputs (in the
# outgoing message) or have no input that dies at them
try:
    r = verbose_run("slices", "1")
    if counts(r.stderr)[1] != 3:
        failures.append(f"slices: {counts(r.stderr)[1]} outputs in place at -pp 1, expected 3:\n{r.stderr}")
except RuntimeError as e:
    failures.append(f"slices: {e}")

# mlp: matrix products with constant weights and few rows run as oneDNN 1x1
# convolutions (matmul_rows in runtime/dnnl/matmul.c) where oneDNN has a JIT
# kernel for them, by default on AVX2 CPUs only (on AVX-512 its brgemm matmul
# is faster), with PPRT_DNNL_ROWS_MAX set on AVX-512 ones too; the checks
# above compared them (and the settings below the AVX-512 route)
for env, want in (({}, ISA == "avx2"), ({"PPRT_DNNL_ROWS_MAX": "4096"}, ISA in ("avx2", "avx512"))):
    try:
        r = run([PPRT, os.path.join(work, "mlp_fused_1.plan"), os.path.join(work, "mlp_data"), "--backend", "dnnl",
                 "-q", "-o", os.path.join(work, "mlp_verbose")], env={"PPRT_DNNL_VERBOSE": "2", **env})
        rows = len(re.findall(r"^  \S+\s+MatMul\s+jit_1x1", r.stderr, re.M))
        if want != (rows > 0):
            failures.append(f"mlp {env} on {ISA}: {rows} MatMuls ran as 1x1 convolutions, expected "
                            f"{'some' if want else 'none'}:\n{r.stderr}")
    except RuntimeError as e:
        failures.append(f"mlp: {e}")

# settings (runtime/dnnl/options.c): a malformed PPRT_DNNL_* value, or a
# variable no setting has, is bad input, exit 2, the message naming the
# variable (and the value); an empty one
# is the default, and a documented non-default value runs and matches the
# reference kernels (the others, LAYOUT FUSE INPLACE VIEWS RESIDUAL SILU, are
# modes of check_plan above)
for var, val in (("PPRT_DNNL_WINO_TILE", "3"), ("PPRT_DNNL_SMALL_US", "abc"), ("PPRT_DNNL_FUSE", "yes"),
                 ("PPRT_DNNL_LAYOUT", "nhwc"), ("PPRT_DNNL_ROWS_MAX", "-1"), ("PPRT_DNNL_VERBOSE", "9")):
    r = subprocess.run([PPRT, os.path.join(work, "mlp_fused_1.plan"), os.path.join(work, "mlp_data"), "--backend",
                        "dnnl", "-q", "-o", os.path.join(work, "bad_setting")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, var: val})
    if r.returncode != 2 or f"{var}={val}" not in r.stderr:
        failures.append(f"settings: {var}={val} gave exit {r.returncode} (expected 2 naming it): {r.stderr.strip()}")
# a PPRT_DNNL_* name no row reads (a removed switch, a typo): exit 2 naming it, never ignored
for var in ("PPRT_DNNL_RELU", "PPRT_DNNL_GCONV", "PPRT_DNNL_WINOO"):
    r = subprocess.run([PPRT, os.path.join(work, "mlp_fused_1.plan"), os.path.join(work, "mlp_data"), "--backend",
                        "dnnl", "-q", "-o", os.path.join(work, "bad_setting")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, var: "1"})
    if r.returncode != 2 or var not in r.stderr:
        failures.append(f"settings: unknown {var} gave exit {r.returncode} (expected 2 naming it): {r.stderr.strip()}")
for var, val in (("PPRT_DNNL_WINO_TILE", ""), ("PPRT_DNNL_WINO_TILE", "2"), ("PPRT_DNNL_SMALL_US", "0.5"),
                 ("PPRT_DNNL_ROWS_MAX", "0"), ("PPRT_DNNL_ROWS_MAX", "4096"),
                 ("PPRT_DNNL_KEEP_SEND", "0")):
    try:
        run([PPRT, os.path.join(work, "mlp_fused_1.plan"), os.path.join(work, "mlp_data"), "--backend", "dnnl", "-q",
             "-o", os.path.join(work, "good_setting")], env={var: val})
        compare(f"settings: {var}={val}", os.path.join(work, "good_setting"), os.path.join(work, "mlp_fused_pp1_ref"))
    except RuntimeError as e:
        failures.append(f"settings: {var}={val}: {e}")

# digits: -pp 1, 2, 3 at micro-batch 16 and 7, accuracy as recorded
digits = os.path.join(SRC, "samples", "digits")
want_acc = open(os.path.join(digits, "accuracy.txt")).read().strip()
for b in (16, 7):
    for pp in (1, 2, 3):
        plan = os.path.join(work, f"digits_{b}_{pp}.plan")
        try:
            run([PPCC, os.path.join(digits, "model.onnx"), "-pp", str(pp), "-b", str(b), "-q", "-o", plan])
            check_plan(f"digits_b{b}_pp{pp}", plan, os.path.join(digits, "data"),
                       ["pp.FusedConv", "MaxPool", "GlobalAveragePool", "Gemm"], extra_runs=(pp == 2))
            r = run([PPRT, plan, os.path.join(digits, "data"), "--backend", "dnnl", "-o",
                     os.path.join(work, "digits_acc"), "--labels", os.path.join(digits, "labels.npy")])
            acc = re.search(r"^accuracy: (\S+)", r.stdout, re.M).group(1)
            if acc != want_acc:
                failures.append(f"digits -b {b} -pp {pp}: accuracy {acc}, PyTorch measured {want_acc}")
        except RuntimeError as e:
            failures.append(f"digits -b {b} -pp {pp}: {e}")

# digits in bf16: top-1 agreement with f32 and the accuracy
digits_bf16 = ""
try:
    plan = os.path.join(work, "digits_16_1.plan")
    outs = {}
    for prec in ("f32", "bf16"):
        outs[prec] = os.path.join(work, f"digits_{prec}")
        r = run([PPRT, plan, os.path.join(digits, "data"), "--backend", "dnnl", "--precision", prec, "-o",
                 outs[prec], "--labels", os.path.join(digits, "labels.npy")])
        acc = float(re.search(r"^accuracy: (\S+)", r.stdout, re.M).group(1))
        outs[prec + "_acc"] = acc
    a32 = np.load(os.path.join(outs["f32"], os.listdir(outs["f32"])[0]))
    a16 = np.load(os.path.join(outs["bf16"], os.listdir(outs["bf16"])[0]))
    agree = float(np.mean(a32.argmax(-1) == a16.argmax(-1)))
    rel = float(np.max(np.abs(a16.astype(np.float64) - a32)) / np.max(np.abs(a32)))
    digits_bf16 = (f"digits bf16: top-1 agreement with f32 {agree:.4f}, max error {rel:.3g} of the largest "
                   f"logit, accuracy {outs['bf16_acc']:.6f} (f32 {outs['f32_acc']:.6f})")
    if not HAVE_BF16:
        digits_bf16 = "digits bf16: this CPU has no bf16 kernels; --precision bf16 warned and ran in f32"
        if not np.array_equal(a16, a32):
            failures.append("digits: --precision bf16 without bf16 kernels is not the f32 output")
    elif np.array_equal(a16, a32):
        failures.append("digits: --precision bf16 gave the f32 logits bit for bit: bf16 did not take effect")
    elif agree < 0.99 or outs["bf16_acc"] < outs["f32_acc"] - 0.01 or not rel <= BF16_TOL:
        failures.append(digits_bf16)
except (RuntimeError, AttributeError, IndexError) as e:
    failures.append(f"digits bf16: {e}")

# the golden models, all passes and unfused, on seeded random inputs
golden = os.path.join(SRC, "tests", "golden")
for f in sorted(os.listdir(golden)):
    if not f.endswith(".onnx"):
        continue
    name = f[:-5]
    g = onnx.load(os.path.join(golden, f))
    rng = np.random.default_rng(3)
    data = os.path.join(work, f"golden_{name}_data")
    os.makedirs(data, exist_ok=True)
    inits = {i.name for i in g.graph.initializer}
    for vi in g.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value if d.dim_value > 0 else 2 for d in vi.type.tensor_type.shape.dim]
        np.save(os.path.join(data, vi.name + ".npy"), rng.standard_normal([3] + shape[1:]).astype(np.float32))
    for variant, flags in (("fused", []), ("unfused", ["--disable-pass", "fuse", "--disable-pass", "simplify"])):
        plan = os.path.join(work, f"golden_{name}_{variant}.plan")
        try:
            run([PPCC, os.path.join(golden, f), "-q", "-o", plan] + flags)
            check_plan(f"golden_{name}_{variant}", plan, data)
        except RuntimeError as e:
            failures.append(f"golden {name} {variant}: {e}")

if HAVE_BF16 and not bf16["outputs"]:
    failures.append("no output was checked in bf16")
if bf16["outputs"] and not bf16["differ"]:
    failures.append("--precision bf16 gave the f32 outputs bit for bit everywhere: bf16 did not take effect")
# the paths the modes switch off must have been taken in the default mode
for what, n in seen.items():
    if n == 0:
        failures.append(f"no node ran {what} in the default mode: those paths went untested")
# grn: the first ReduceL2 reads the convolution's output as oneDNN wrote it
# (no reorder after the convolution, none before the next one)
if ISA in ("avx2", "avx512"):
    try:
        err = verbose_run("grn").stderr
        lines = [l.split() for l in err.splitlines() if l.startswith("  ")]
        i = next(k for k, l in enumerate(lines) if l[1] == "ReduceL2")
        prod = max(k for k in range(i) if lines[k][1] in ("Conv", "pp.FusedConv"))
        cons = next(k for k in range(i, len(lines)) if lines[k][1] in ("Conv", "pp.FusedConv"))
        ps, cs = lines[prod][2:], lines[cons][2:]
        kp = next(k for k, s in enumerate(ps) if not s.startswith("reorder"))
        kc = max(k for k, s in enumerate(cs) if not s.startswith("reorder"))
        after, before = ps[kp + 1:], cs[:kc]  # the producer's steps after its kernel, the consumer's before its
        if lines[i][2:] != ["pprt:reduce"] or any("reorder" in s for s in after + before):
            failures.append(f"grn: want the ReduceL2 on pprt:reduce and no reorder around it:\n{err}")
    except (RuntimeError, StopIteration, ValueError) as e:
        failures.append(f"grn: {e}")

# --replicas: the replicas of a stage (executors in one process) share its
# reordered weights (runtime/dnnl/wshare.c): each weight reordered once, by
# whichever executor needs it first, so the two executors' "reordered by
# another executor" add up to one copy; PPRT_DNNL_SHARE_WEIGHTS=0: none
# shared; the outputs are those of one pipeline either way, bit for bit.
# (5x5 and 1x1 convolutions: oneDNN's on every ISA; pprt's own Winograd
# kernel, which 3x3 ones take on AVX2, packs weights of its own, unshared)
try:
    m = Model("wshare", [("x", (32, 12, 12))])
    h = m.op("Relu", [m.conv("x", 32, 512, (5, 5), pads=[2, 2, 2, 2])])
    path = m.save([m.conv(h, 512, 256, (1, 1))])
    data = m.data(n=4)
    plan = os.path.join(work, "wshare.plan")
    run([PPCC, path, "-b", "1", "-q", "-o", plan])
    outs = {}
    for tag, reps, share in (("one", "1", "1"), ("shared", "2", "1"), ("apart", "2", "0")):
        outs[tag] = os.path.join(work, f"wshare_{tag}")
        r = run([PPRT, plan, data, "--backend", "dnnl", "--threads", "1", "--replicas", reps, "-q", "-o", outs[tag]],
                env={"PPRT_DNNL_VERBOSE": "1", "PPRT_DNNL_SHARE_WEIGHTS": share})
        got = [(float(a), float(b)) for a, b in re.findall(
            r"([0-9.]+) MB reordered weights \(([0-9.]+) MB of them reordered by another executor", r.stderr)]
        if len(got) != int(reps) or (reps == "2" and got[0][0] != got[1][0]) or got[0][0] < 2.0:
            failures.append(f"wshare {tag}: want {reps} executors' reports of the same weights (>= 2 MB):\n{r.stderr}")
        elif share == "0" and any(b != 0 for _, b in got):
            failures.append(f"wshare {tag}: weights shared under PPRT_DNNL_SHARE_WEIGHTS=0:\n{r.stderr}")
        elif tag == "shared" and abs(got[0][1] + got[1][1] - got[0][0]) > 0.15:
            failures.append(f"wshare {tag}: the executors shared {got[0][1]} + {got[1][1]} MB of {got[0][0]} MB "
                            f"(want one copy in all):\n{r.stderr}")
    for tag in ("shared", "apart"):
        for f in sorted(x for x in os.listdir(outs["one"]) if x.endswith(".npy")):
            checked += 1
            if not np.array_equal(np.load(os.path.join(outs["one"], f)), np.load(os.path.join(outs[tag], f))):
                failures.append(f"wshare {tag}: {f}: --replicas 2 gave other bits than one pipeline")
except RuntimeError as e:
    failures.append(f"wshare: {e}")

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print(f"dnnl: {checked} outputs of the oneDNN backend match the reference backend "
      f"(rtol {RTOL}, atol {ATOL}): op models fused/unfused, digits, golden; blocked and plain layouts, "
      f"1 and 2 threads ({'the same bits' if THREADS_INVARIANT else 'bits not compared on ' + ISA}), "
      f"with and without post-op fusion ({seen['post-ops']} nodes absorbed) and outputs "
      f"in place of an input ({seen['in place']}), views without a copy ({seen['views']}); " +
      (f"bf16: {bf16['outputs']} outputs within {BF16_TOL} of their largest magnitude (worst "
       f"{bf16['worst']:.3g}, RMS {bf16['worst_rms']:.3g} of the output's, {bf16['differ']} differ from f32)"
       if HAVE_BF16 else
       f"bf16: no bf16 kernels on this CPU, {bf16['fallback']} runs warned and gave the f32 outputs") +
      f"\n{digits_bf16}")
