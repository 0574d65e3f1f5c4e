#!/usr/bin/env python3
"""NaN and infinities, per op family, on every CPU-side backend: ref, dnnl
and cuda-emu (the CUDA step list on the host: its own kernels' math,
runtime/cuda/kmath.h, is the GPU's) (issue 23; docs/design-notes.md, "NaN and
infinities").

The rule: a NaN in gives NaN out wherever onnxruntime gives NaN, an
infinity gives what IEEE arithmetic gives, and a finite result stays finite
and equal (rtol 1e-4, atol 1e-5) -- checked against onnxruntime (CPU) for
convolutions with Relu or Clip (fused by ppcc and, with --disable-pass fuse,
not), Relu, LeakyRelu, Clip, Max, Min, AveragePool, Softmax, LogSoftmax, the
sum-like reductions, BatchNormalization, LayerNormalization, MatMul, Gemm,
and a small CNN fed an all-NaN and an all-infinite image.

Max-selecting ops (MaxPool, GlobalMaxPool, ReduceMax, ReduceMin, ArgMax,
ArgMin) have no coherent NaN semantics in onnxruntime: its ReduceMax of
[0, NaN, 2, 3] is 2, its vectorized MaxPool of [1, 3, NaN, -1] is -1, and it
answers windows of -inf with -FLT_MAX. pprt skips NaN (a window or row of
only NaN gives NaN; ArgMax/ArgMin its first index), and these are checked
against that rule computed here with numpy.

One exception, documented: a 3x3 stride-1 convolution that oneDNN computes
with Winograd turns an infinite input into NaN at the outputs it reaches
(its transforms subtract inputs); there the check is "NaN or the same
infinity where onnxruntime is infinite, equal elsewhere".

About 15 s (ASan build: 60 s). Usage: run.py WORKDIR (env: PPCC, PPRT)."""
import os
import platform
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
ort.set_default_logger_severity(3)
F = TensorProto.FLOAT
nan, inf = np.nan, np.inf
rng = np.random.default_rng(23)
failures = []
checks = 0
BACKENDS = ["ref"]
if subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0:
    BACKENDS.append("dnnl")
# cuda-emu: the CUDA step list on the host (own kernels' per-element math is the GPU's, runtime/cuda/kmath.h)
if subprocess.run([PPRT, "--backend", "cuda-emu", "--version"], capture_output=True).returncode == 0:
    BACKENDS.append("cuda-emu")
if os.environ.get("PP_NAN_BACKENDS"):  # on a GPU machine: PP_NAN_BACKENDS=cuda
    BACKENDS = os.environ["PP_NAN_BACKENDS"].split(",")


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def model(name, nodes, x_shape, inits=(), opset=17):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", F, x_shape)],
                          [helper.make_tensor_value_info("y", F, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = name + ".onnx"
    onnx.save(m, path)
    return path


def pprt_outputs(path, x, ppcc_args=(), backends=None):
    """{backend: y} from ppcc -b 0 and pprt on each backend (errors recorded);
    a backend "dnnl bf16" runs oneDNN with --precision bf16."""
    tag = os.path.splitext(path)[0] + "".join(a.replace("-", "") for a in ppcc_args)
    r = subprocess.run([PPCC, path, "-b", "0", "-q", "-o", tag + ".plan", *ppcc_args], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{tag}: ppcc exit {r.returncode}: {r.stderr.strip()[:300]}")
        return {}
    os.makedirs(tag + "_d", exist_ok=True)
    np.save(tag + "_d/x.npy", x)
    out = {}
    for bk in backends or BACKENDS:
        extra = ["--precision", "bf16"] if bk.endswith("bf16") else []
        r = subprocess.run([PPRT, tag + ".plan", tag + "_d", "-o", f"{tag}_{bk}", "-q", "--backend", bk.split()[0],
                            *extra], capture_output=True, text=True)
        bad = [w for w in ("Sanitizer", "runtime error:") if w in r.stderr]
        if r.returncode != 0 or bad:
            failures.append(f"{tag} on {bk}: exit {r.returncode}: {r.stderr.strip()[:300]}")
            continue
        out[bk] = np.load(f"{tag}_{bk}/y.npy")
    return out


def compare(tag, got, want, wino=False):
    """NaN exactly where want is NaN, the same infinities, finite values close.
    wino: NaN wherever want is NaN, and maybe elsewhere (a Winograd tile that
    a NaN or an infinity reaches is NaN in all its outputs); every value that
    is not NaN as above."""
    global checks
    checks += 1
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        failures.append(f"{tag}: shape {got.shape}, expected {want.shape}")
        return
    wn, gn = np.isnan(want), np.isnan(got)
    winf = np.isinf(want)
    ok_nan = gn == wn if not wino else gn | ~wn
    fin = ~wn & ~gn
    ok_inf = np.where(fin & (winf | np.isinf(got)), got == want, True)
    with np.errstate(invalid="ignore"):
        ok_val = np.where(fin & ~winf, np.abs(got - want) <= 1e-5 + 1e-4 * np.abs(want), True)
    bad = ~(ok_nan & ok_inf & ok_val)
    if bad.any():
        i = np.argwhere(bad)[0]
        failures.append(f"{tag}: {int(bad.sum())} of {bad.size} values differ, first at {tuple(int(v) for v in i)}: "
                        f"got {got[tuple(i)]}, expected {want[tuple(i)]}")


def against_ort(tag, path, x, wino=False, ppcc_args=()):
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for bk, got in pprt_outputs(path, x, ppcc_args).items():
        compare(f"{tag} [{bk}{' ' + ' '.join(ppcc_args) if ppcc_args else ''}]", got, want,
                wino=wino and bk == "dnnl")


def against_rule(tag, path, x, want):
    for bk, got in pprt_outputs(path, x).items():
        compare(f"{tag} [{bk}]", got, want)


def sprinkle(x, inf_too=True):
    """NaN, and (inf_too) +inf and -inf, at scattered places of x (a copy)."""
    x = x.copy()
    flat = x.reshape(-1)
    idx = rng.permutation(flat.size)
    k = max(1, flat.size // 40)
    flat[idx[:k]] = nan
    if inf_too:
        flat[idx[k:2 * k]] = inf
        flat[idx[2 * k:3 * k]] = -inf
    return x


# ---- convolutions with Relu and Clip, fused and not ------------------------------------------
x16 = rng.standard_normal((2, 16, 10, 10)).astype(np.float32)
for k, stride, wino in ((3, 2, False), (1, 1, False), (3, 1, True)):
    w = (rng.standard_normal((24, 16, k, k)) / (4 * k)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32) * 0.1
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4, strides=[stride] * 2)
    I = [init("w", w), init("b", b)]
    tag = f"conv{k}x{k}s{stride}"
    for act, nodes, extra in (("relu", [helper.make_node("Relu", ["c"], ["y"])], []),
                              ("clip", [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                               [init("lo", 0.0), init("hi", 0.5)])):
        path = model(f"{tag}_{act}", [conv] + nodes, list(x16.shape), I + extra)
        for fused in ((), ("--disable-pass", "fuse")):
            # NaN only through every kernel; infinities too where no Winograd runs
            against_ort(f"{tag}+{act}, NaN", path, sprinkle(x16, inf_too=False), wino=wino, ppcc_args=fused)
            against_ort(f"{tag}+{act}, NaN and inf", path, sprinkle(x16), wino=wino, ppcc_args=fused)
    against_ort(f"{tag} alone, NaN and inf", model(f"{tag}_plain", [helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], pads=[k // 2] * 4, strides=[stride] * 2)], list(x16.shape), I),
        sprinkle(x16), wino=wino)
# the same 3x3 stride-1 convolution without Winograd (PPRT_DNNL_WINO=0) follows exactly
os.environ["PPRT_DNNL_WINO"] = "0"
against_ort("conv3x3s1 without Winograd, NaN and inf", "conv3x3s1_plain.onnx", sprinkle(x16))
against_ort("conv3x3s1+relu without Winograd, NaN and inf", "conv3x3s1_relu.onnx", sprinkle(x16))
del os.environ["PPRT_DNNL_WINO"]
# a residual: Conv + Add + Relu (one pp.FusedConv)
w = (rng.standard_normal((16, 16, 1, 1)) / 4).astype(np.float32)
path = model("conv_res", [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["s"]),
                          helper.make_node("Relu", ["s"], ["y"])], list(x16.shape), [init("w", w)])
against_ort("conv+add+relu, NaN and inf", path, sprinkle(x16))

# the guard of a convolution's Relu or Clip (runtime/dnnl/conv.c, GUARD_*:
# oneDNN's max-based post-op, the exact path only where MXCSR's invalid flag
# says a NaN met it): convolutions large enough that both threads work, a
# single NaN or infinity at a time at the start, the middle and the end of
# the batch, so each thread in turn meets it while the other does not
xg = rng.standard_normal((4, 32, 28, 28)).astype(np.float32)
for k, group in ((1, 1), (3, 32)):
    w = (rng.standard_normal((32, 32 // group, k, k)) / (2 * k)).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "w"], ["c"], pads=[k // 2] * 4, group=group)
    for act, nodes, extra in (("relu", [helper.make_node("Relu", ["c"], ["y"])], []),
                              ("clip", [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                               [init("lo", 0.0), init("hi", 6.0)])):
        tag = f"guard_{k}x{k}g{group}_{act}"
        path = model(tag, [conv] + nodes, list(xg.shape), [init("w", w)] + extra)
        if act == "relu" and k == 1 and "dnnl" in BACKENDS and platform.machine() in ("x86_64", "AMD64"):
            r = subprocess.run([PPCC, path, "-b", "0", "-q", "-o", tag + "_v.plan"], capture_output=True, text=True)
            os.makedirs(tag + "_vd", exist_ok=True)
            np.save(tag + "_vd/x.npy", xg)
            # (--warmup 0: a warm-up copy of the micro-batch would meet the NaN, and run again, too)
            r = subprocess.run([PPRT, tag + "_v.plan", tag + "_vd", "-o", tag + "_vo", "-q", "--threads", "2",
                                "--warmup", "0"],
                               capture_output=True, text=True, env=dict(os.environ, PPRT_DNNL_VERBOSE="1"))
            checks += 1
            if "guard is on" not in r.stderr:
                failures.append(f"{tag}: the guard is not on (pprt: {r.stderr.strip()[-300:]})")
        for at in (0, xg.size // 2, xg.size - 1):
            for val in (nan, inf, -inf):
                x = xg.copy()
                x.reshape(-1)[at] = val
                against_ort(f"{tag}, {val} at {at}", path, x)

# the same with a residual (Conv + Add + Relu/Clip: one pp.FusedConv whose sum post-op may write into
# the residual's bytes, so the exact path cannot follow the fast one: GUARD_FAST_RUN, the micro-batch
# runs again), a NaN or an infinity at a time as above; with PPRT_DNNL_VERBOSE a NaN must make the
# micro-batch run again, finite inputs must not (an infinity may: inf - inf in the sum is NaN)
w = (rng.standard_normal((32, 32, 1, 1)) / 2).astype(np.float32)
for act, nodes, extra in (("relu", [helper.make_node("Relu", ["s"], ["y"])], []),
                          ("clip", [helper.make_node("Clip", ["s", "lo", "hi"], ["y"])],
                           [init("lo", 0.0), init("hi", 6.0)])):
    tag = f"guard_res_{act}"
    path = model(tag, [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["s"])] + nodes,
                 list(xg.shape), [init("w", w)] + extra)
    for at in (0, xg.size // 2, xg.size - 1):
        for val in (nan, inf, -inf):
            x = xg.copy()
            x.reshape(-1)[at] = val
            against_ort(f"{tag}, {val} at {at}", path, x)
    if "dnnl" in BACKENDS and platform.machine() in ("x86_64", "AMD64"):
        subprocess.run([PPCC, path, "-b", "0", "-q", "-o", tag + "_v.plan"], check=True)
        for val, again in ((nan, True), (1.0, False)):
            x = xg.copy()
            x[3, 5, 7, 9] = val
            os.makedirs(tag + "_vd", exist_ok=True)
            np.save(tag + "_vd/x.npy", x)
            # (--warmup 0: a warm-up copy of the micro-batch would meet the NaN, and run again, too)
            r = subprocess.run([PPRT, tag + "_v.plan", tag + "_vd", "-o", tag + "_vo", "-q", "--threads", "2",
                                "--warmup", "0"],
                               capture_output=True, text=True, env=dict(os.environ, PPRT_DNNL_VERBOSE="1"))
            checks += 1
            said = "1 micro-batch ran again" in r.stderr
            if r.returncode != 0 or "guard is on" not in r.stderr or said != again:
                failures.append(f"{tag}: {val} in the input: exit {r.returncode}, expected the guard on "
                                f"and {'one' if again else 'no'} micro-batch run again (pprt: {r.stderr.strip()[-400:]})")

# ---- elementwise: Relu, LeakyRelu, Clip, Max, Min ----------------------------------------------
v = np.tile(np.array([nan, 1, -2, inf, -inf, 0.5, -0.0, 3], np.float32), 64).reshape(2, 16, 4, 4)
one = init("one", np.ones((2, 16, 4, 4)))
for op, extra, inits in (("Relu", {}, []), ("LeakyRelu", {"alpha": 0.1}, []), ("LeakyRelu", {"alpha": 0.0}, []),
                         ("Clip", {}, [init("lo", -1.5), init("hi", 2.0)]), ("Clip", {}, [init("lo", 0.0)])):
    ins = ["a"] + [t.name for t in inits]
    # behind an Add, so that no convolution absorbs it
    path = model(f"{op}{len(inits)}{extra.get('alpha', '')}", [helper.make_node("Mul", ["x", "one"], ["a"]),
                 helper.make_node(op, ins, ["y"], **extra)], list(v.shape), [one] + inits)
    against_ort(f"{op} {extra or ''}{' bounds ' + str(len(inits)) if inits else ''}", path, v)
quarter = init("q", np.full((1, 16, 1, 1), 0.25))
for op in ("Max", "Min"):
    for order in (["x", "q"], ["q", "x"]):
        path = model(f"{op}_{order[0]}", [helper.make_node(op, order, ["y"])], list(v.shape), [quarter])
        against_ort(f"{op}({', '.join(order)})", path, v)

# ---- pools: averages against onnxruntime, maxima against the rule ------------------------------
xp = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
xp[0, 0, :2, :2] = nan            # a window of only NaN
xp[0, 1, :2, :2] = -inf           # a window of only -inf
xp[0, 2, :2, :2] = [[nan, -inf], [-inf, -inf]]
xp[0, 3, 0, 0] = nan              # NaN first
xp[0, 4, 1, 1] = nan              # NaN last
xp[0, 5, 2, 2] = inf
xp[0, 6] = nan                    # a plane of only NaN
xp[0, 7, 4:, 4:] = -inf


def nanmax_rule(a, axis):
    """Max skipping NaN; NaN where every value is NaN."""
    with np.errstate(invalid="ignore"):
        m = np.where(np.isnan(a), -inf, a).max(axis=axis)
        return np.where(np.isnan(a).all(axis=axis), nan, m)


win = xp.reshape(1, 16, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 16, 4, 4, 4)
against_rule("MaxPool 2x2 s2", model("mp2", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                                     list(xp.shape)), xp, nanmax_rule(win, 4))
pad = np.pad(xp, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=nan)  # padding is never selected
win3 = np.stack([pad[:, :, i:i + 8, j:j + 8] for i in range(3) for j in range(3)], axis=-1)
want3 = nanmax_rule(win3, 4)
against_rule("MaxPool 3x3 s1 p1", model("mp3", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)],
                                        list(xp.shape)), xp, want3)
# a large output: pprt's scan for windows oneDNN left at the lowest float runs in chunks shared by the
# threads; none in the first chunk (where the scan would stop), all-NaN windows in the last one and one
# between, an all -inf window at the end
xl = rng.standard_normal((2, 32, 80, 80)).astype(np.float32)
xl[1, 20, 10:12, 10:12] = nan
xl[1, 31, -2:, -2:] = nan
xl[1, 31, -2:, -4:-2] = -inf
winl = xl.reshape(2, 32, 40, 2, 40, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 32, 40, 40, 4)
against_rule("MaxPool 2x2 s2, 102400 outputs", model("mpl", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                                                             strides=[2, 2])], list(xl.shape)),
             xl, nanmax_rule(winl, 4))
against_rule("GlobalMaxPool", model("gmp", [helper.make_node("GlobalMaxPool", ["x"], ["y"])], list(xp.shape)), xp,
             nanmax_rule(xp.reshape(1, 16, 64), 2).reshape(1, 16, 1, 1))
against_ort("AveragePool 2x2 s2", model("ap", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                                        list(xp.shape)), xp)
against_ort("GlobalAveragePool", model("gap", [helper.make_node("GlobalAveragePool", ["x"], ["y"])], list(xp.shape)), xp)

# ---- softmax ---------------------------------------------------------------------------------
xs = rng.standard_normal((6, 8)).astype(np.float32)
xs[0, 3] = nan
xs[1, 2] = inf
xs[2, 5] = -inf
xs[3, :] = -inf
xs[4, [1, 6]] = inf
for op in ("Softmax", "LogSoftmax"):
    for axis in (-1, 0):
        path = model(f"{op}{axis}", [helper.make_node(op, ["x"], ["y"], axis=axis)], list(xs.shape))
        against_ort(f"{op} axis {axis}", path, xs)

# ---- reductions ------------------------------------------------------------------------------
xr = xp.reshape(16, 64)
ax = init("ax", [1])
ax.data_type = TensorProto.INT64
ax.ClearField("float_data")
ax.raw_data = np.array([1], np.int64).tobytes()
for op in ("ReduceSum", "ReduceMean", "ReduceL2", "ReduceLogSumExp"):
    against_ort(op, model(op, [helper.make_node(op, ["x", "ax"], ["y"], keepdims=0)], list(xr.shape), [ax], opset=18), xr)
against_rule("ReduceMax", model("ReduceMax", [helper.make_node("ReduceMax", ["x", "ax"], ["y"], keepdims=0)],
                                list(xr.shape), [ax], opset=18), xr, nanmax_rule(xr, 1))
against_rule("ReduceMin", model("ReduceMin", [helper.make_node("ReduceMin", ["x", "ax"], ["y"], keepdims=0)],
                                list(xr.shape), [ax], opset=18), xr, -nanmax_rule(-xr, 1))
for op in ("ArgMax", "ArgMin"):
    # NaN skipped (the first of equal values); a row of only NaN: index 0
    masked = np.where(np.isnan(xr), -inf if op == "ArgMax" else inf, xr)
    pick = np.argmax(masked, axis=1) if op == "ArgMax" else np.argmin(masked, axis=1)
    want = np.where(np.isnan(xr).all(axis=1), 0, pick).astype(np.float32)
    path = model(op, [helper.make_node(op, ["x"], ["i"], axis=1, keepdims=0), helper.make_node("Cast", ["i"], ["y"], to=F)],
                 list(xr.shape), opset=13)
    against_rule(op, path, xr, want)

# ---- normalizations and matrix products ----------------------------------------------------------
xb = sprinkle(rng.standard_normal((2, 8, 5, 5)).astype(np.float32))
sc = rng.random(8) + 0.5
against_ort("BatchNormalization", model("bn", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                                        list(xb.shape), [init("s", sc), init("b", sc - 1), init("m", sc / 3), init("v", sc)]), xb)
xl = sprinkle(rng.standard_normal((6, 32)).astype(np.float32))
against_ort("LayerNormalization", model("ln", [helper.make_node("LayerNormalization", ["x", "g", "be"], ["y"], axis=-1)],
                                        list(xl.shape), [init("g", np.ones(32)), init("be", np.zeros(32))]), xl)
wm = rng.standard_normal((32, 24)).astype(np.float32)
xm = rng.standard_normal((6, 32)).astype(np.float32)
xm[1, 3], xm[3, 7], xm[4, 0] = nan, inf, -inf
against_ort("MatMul", model("mm", [helper.make_node("MatMul", ["x", "w"], ["y"])], list(xm.shape), [init("w", wm)]), xm)
against_ort("Gemm+Relu", model("gemm", [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=0),
                                        helper.make_node("Relu", ["g"], ["y"])], list(xm.shape),
                               [init("w", wm), init("b", np.ones(24))]), xm)

# ---- a small CNN fed an all-NaN and an all-infinite image: never confident logits --------------
I, nodes, c_in = [], [], 3
h = "x"
for i, (c, k, s) in enumerate(((16, 7, 2), (16, 3, 1), (32, 3, 2))):
    I += [init(f"w{i}", rng.standard_normal((c, c_in, k, k)) / (k * np.sqrt(c_in))), init(f"b{i}", rng.standard_normal(c) * 0.1)]
    nodes += [helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[s, s]),
              helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
    h, c_in = f"r{i}", c
    if i == 0:
        nodes.append(helper.make_node("MaxPool", [h], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
        h = "mp"
nodes += [helper.make_node("GlobalAveragePool", [h], ["gap"]), helper.make_node("Flatten", ["gap"], ["f"]),
          helper.make_node("Gemm", ["f", "fw"], ["y"], transB=1)]
I.append(init("fw", rng.standard_normal((10, 32)) / 6))
cnn = model("cnn", nodes, [2, 3, 32, 32], I)
# with bf16 activations too, where oneDNN has bf16 kernels (its Relu and pool passes read bf16)
bf16 = "dnnl" in BACKENDS and "bf16 kernels on this CPU: yes" in subprocess.run(
    [PPRT, "--version"], capture_output=True, text=True).stdout
for tag, val in (("NaN", nan), ("+inf", inf), ("-inf", -inf)):
    img = np.full((2, 3, 32, 32), val, np.float32)
    want = ort.InferenceSession(cnn, providers=["CPUExecutionProvider"]).run(None, {"x": img})[0]
    for bk, got in pprt_outputs(cnn, img, backends=BACKENDS + (["dnnl bf16"] if bf16 else [])).items():
        checks += 1
        # the Winograd convolution may make NaN of onnxruntime's infinities, never a number
        if not (np.isnan(got) | (np.isinf(want) & ~np.isfinite(got)) | (got == want)).all() or \
                (np.isfinite(got) != np.isfinite(want)).any():
            failures.append(f"CNN on an all-{tag} image [{bk}]: {got.ravel()[:5]}, onnxruntime {want.ravel()[:5]}")

print(f"nan: {checks - len(failures)}/{checks} checks right on {', '.join(BACKENDS)}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
