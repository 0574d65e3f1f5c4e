#!/usr/bin/env python3
"""The ops of issue 22 through ppcc and pprt, against onnxruntime and NumPy.

Each case is a small ONNX model built here with onnx.helper, its inputs
drawn with a fixed seed (edge values included: 0, -0, NaN, +-inf where the op
defines them). It is compiled unbatched (ppcc -b 0; control-flow cases also
at -pp 2) and run on the reference kernels and, where pprt has it, on
oneDNN; every output must match onnxruntime's within the case's tolerance
(NaN where onnxruntime has NaN; onnx's reference evaluator for the one form
onnxruntime 1.32 refuses, an attention mask shorter than the keys), and, for
the elementwise math, a NumPy formula too. The error cases must exit 2 (ppcc, or pprt for a bad value at
run time) with a message naming the node and the reason.

Cases: the unary math (trigonometric, hyperbolic, Round, Softsign, Mish,
Celu, ThresholdedRelu, Swish, Sign, Shrink, IsNaN, IsInf), the bitwise ops,
DepthToSpace (both modes) and SpaceToDepth, a Conv's layer scale (folded into its
weights unless a scale is 0), a Pad by zero before a Conv or AveragePool (folded into their
padding where that is the same by definition; the cases that must stay unfolded), ReduceMean over
every spatial axis (GlobalAveragePool by ppcc, and the reductions that must stay), an Expand read only by
ops that broadcast anyway (removed by ppcc where that gives the same shapes; the cases that keep it), a LayerNorm
written out (one LayerNormalization from ppcc, with or without a shift; the cases it must leave), torch's GroupNorm
written out (one pp.GroupNorm; the cases it must leave), Pow by 2 and 3
(edge values, overflow), Resize by nearest neighbour (four coordinate transforms, four roundings, ranks 3 to
5), BatchNormalization in training mode
(five outputs before opset 14, three from it, a weight standardization folded by ppcc,
refused over batched samples), OneHot (negative and out-of-range indices, float indices, each axis, in
micro-batches), CenterCropPad (odd crops and pads, crop and pad on different axes, 1-D to 4-D, integer and bool
data, in micro-batches; the batch axis cropped or padded refused), Col2Im (1-D to 3-D; dilations, strides and
pads; float and double; in micro-batches at -pp 1 and 2, the batch on the blocks' axes refused; also against
NumPy's formula), LpPool (p 1, 2, 3; 1-D to 3-D; pads, dilations, ceil_mode, SAME_UPPER), AffineGrid
(2-D, 3-D, axes of one pixel) and a spatial transformer (AffineGrid
of the input's Shape, then GridSample; in micro-batches at -pp 1 and 2), Hardmax (ties, a NaN), TopK with NaN
(largest and smallest, ties with NaN and signed zeros, infinities, each axis, f32 and f64, sorted=0; onnxruntime's
order and indices, and NumPy's), LpNormalization (a line of zeros), CumProd (NumPy's cumprod), QuantizeLinear and DequantizeLinear (int8, uint8, int16, uint16 per tensor, axis
and block; halves, saturation, infinities; a Q-DQ Conv in micro-batches), GridSample (every mode, padding and align_corners in 2-D, 3-D volumes, a
1-D line, exact pixel centres and halves, a NaN point, the batch in micro-batches at -pp 1 and 2), EyeLike, ScatterElements with each reduction, RMSNormalization,
RotaryEmbedding (4-D with position_ids, 3-D, interleaved, partial), Attention
(causal, bool / float / short masks, GQA in 3-D, scale, softcap, past
key/value with present outputs), and Loop / If / sequence graphs (constant
and computed trip counts, a condition that stops the loop early, scan
outputs, a loop building a sequence, nested loops, SplitToSequence,
SequenceInsert/Erase/At/Length, ConcatFromSequence with new_axis), and
LSTM, GRU and RNN (bidirectional, reverse, sequence_lens with a 0,
initial states, peepholes, clip, input_forget, linear_before_reset, other
activations, an absent Y, layout 1 against onnxruntime's layout 0, opsets 7,
14 and 22), their batch analysis (layout 1 cut into micro-batches gives the
bytes of the whole batch; the batch on X's sequence axis is refused), and
PyTorch's nn.LSTM exported with a dynamic batch through ppcc -b 2 at -pp 1
and 2 (skipped without torch).

Usage: run.py WORKDIR (env: PPCC, PPRT). About 15 s on 2 busy cores. Exit 0 when every case
passes, 1 otherwise (each failure printed). On a GPU machine (tests/cuda/gpu_day.sh):
PP_OPS_BACKENDS=cuda (the backends each case runs on, comma-separated, instead of ref, dnnl and
cuda-emu where the build has them),
PP_OPS_ONLY=REGEX (only the cases whose name it matches run pprt; the PyTorch cases are skipped),
PP_OPS_IR=N (the models' IR version at most N, for an older onnxruntime than the onnx package)."""
import os
import re
import subprocess
import sys

import numpy as np

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper
except ImportError as e:
    print(f"ops: {e}; skipped")
    sys.exit(77)

WORK = sys.argv[1]
os.makedirs(WORK, exist_ok=True)
HAVE_DNNL = subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0
# cuda-emu where pprt was built with the CUDA backend: the CUDA step list (own kernels, cuDNN's and
# cuBLASLt's operations as the descriptors say, host fallbacks) on the host, against the same oracles
HAVE_EMU = subprocess.run([PPRT, "--backend", "cuda-emu", "--version"], capture_output=True).returncode == 0
BACKENDS = ["ref"] + (["dnnl"] if HAVE_DNNL else []) + (["cuda-emu"] if HAVE_EMU else [])
if os.environ.get("PP_OPS_BACKENDS"):
    BACKENDS = os.environ["PP_OPS_BACKENDS"].split(",")
ONLY = re.compile(os.environ["PP_OPS_ONLY"]) if os.environ.get("PP_OPS_ONLY") else None
MAX_IR = int(os.environ.get("PP_OPS_IR", "0"))


def wanted(name):
    return ONLY is None or ONLY.search(name) is not None
rng = np.random.default_rng(22)
failures, n_cases = [], 0

NP2TP = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.float16): TP.FLOAT16, np.dtype(np.float64): TP.DOUBLE, np.dtype(np.int64): TP.INT64,
         np.dtype(np.int32): TP.INT32, np.dtype(np.int16): TP.INT16, np.dtype(np.int8): TP.INT8,
         np.dtype(np.uint8): TP.UINT8, np.dtype(np.uint16): TP.UINT16, np.dtype(np.uint32): TP.UINT32, np.dtype(np.bool_): TP.BOOL}


def vi(name, a):
    return helper.make_tensor_value_info(name, NP2TP[a.dtype], list(a.shape))


def model(nodes, feeds, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", [vi(k, v) for k, v in feeds.items()],
                          [onnx.ValueInfoProto(name=o) for o in outputs],
                          initializer=[numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    # the outputs' types, as onnx's shape inference gives them
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    for o in m.graph.output:
        if o.name in inferred:
            o.CopyFrom(inferred[o.name])
    if MAX_IR:
        m.ir_version = min(m.ir_version, MAX_IR)
    return m


def write_case(name, m, feeds):
    """WORK/name/model.onnx and its inputs as WORK/name/data/NAME.npy; returns (dir, model path)."""
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    for k, v in feeds.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    return d, path


def run_ppcc_pprt(name, m, feeds, pp, backend, ppcc_args=()):
    d, path = write_case(name, m, feeds)
    tag = "_".join(a.strip("-") for a in ppcc_args)
    plan = os.path.join(d, f"pp{pp}{tag}.plan")
    r = subprocess.run([PPCC, path, "-b", "0", "-pp", str(pp), "-q", "-o", plan, *ppcc_args], capture_output=True,
                       text=True)
    if r.returncode:
        return None, f"ppcc -pp {pp} {' '.join(ppcc_args)}: exit {r.returncode}: {r.stderr.strip()[-300:]}"
    out = os.path.join(d, f"out_{pp}_{backend}{tag}")
    r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q", "--backend", backend],
                       capture_output=True, text=True)
    if r.returncode:
        return None, f"pprt -pp {pp} --backend {backend}: exit {r.returncode}: {r.stderr.strip()[-300:]}"
    return out, None


def close(got, want, rtol, atol):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if got.dtype.kind in "fc":
        ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            i = np.argwhere(~ok)[0]
            return (f"{int((~ok).sum())} of {got.size} values off (rtol {rtol:g}, atol {atol:g}); "
                    f"first at {list(i)}: {got[tuple(i)]!r}, want {want[tuple(i)]!r}")
        return None
    if not np.array_equal(got, want):
        i = np.argwhere(got != want)[0]
        return f"differs at {list(i)}: {got[tuple(i)]!r}, want {want[tuple(i)]!r}"
    return None


def ort_run(m, feeds, outputs, optimized=True):
    """onnxruntime's CPU outputs. optimized=False disables every graph rewrite
    (ORT_DISABLE_ALL), so each node runs as the ONNX semantics define it: the
    oracle for patterns onnxruntime would otherwise fuse into CPU-specific
    integer kernels (a Q-DQ Conv becomes a QLinearConv, whose AVX2 kernel
    without VNNI sums u8 x s8 pairs into saturating 16-bit lanes and so differs
    from the spec by whole quantization steps on such machines)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(outputs, feeds)


def ort_fused_note(name, m, feeds, outputs, want):
    """Informative only: how far onnxruntime's optimized path (fused integer
    kernels, which differ by CPU) is from the oracle on this machine. Printed,
    never a failure."""
    for o, w, g in zip(outputs, want, ort_run(m, feeds, outputs)):
        d = np.abs(g.astype(np.float64) - w.astype(np.float64))
        print(f"{name}: note: onnxruntime's optimized path differs from the ONNX semantics on {int((d > 0).sum())} "
              f"of {d.size} values of {o}, by up to {float(d.max()) if d.size else 0.0:g} (not a failure)")


def case(name, nodes, feeds, outputs, inits=(), opset=17, numpy_ref=None, rtol=1e-5, atol=1e-6, pps=(1,),
         oracle="onnxruntime"):
    """onnxruntime (or onnxruntime with its graph rewrites off, "onnxruntime-plain";
    or onnx's reference evaluator, for what onnxruntime does
    not implement, or oracle(feeds) -> list, a function) and
    numpy_ref(feeds) -> list, when given, against ppcc/pprt."""
    global n_cases
    if not wanted(name):
        return
    n_cases += 1
    m = model(nodes, feeds, outputs, inits, opset)
    try:
        if callable(oracle):
            want = oracle(feeds)
        elif oracle in ("onnxruntime", "onnxruntime-plain"):
            want = ort_run(m, feeds, outputs, optimized=oracle == "onnxruntime")
            if oracle == "onnxruntime-plain":
                ort_fused_note(name, m, feeds, outputs, want)
        else:
            from onnx.reference import ReferenceEvaluator
            want = ReferenceEvaluator(m).run(outputs, feeds)
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: {oracle} failed: {e}")
        return
    if numpy_ref is not None:
        for o, w, n in zip(outputs, want, numpy_ref(feeds)):
            bad = close(np.asarray(n, dtype=w.dtype), w, max(rtol, 1e-5), max(atol, 1e-6))
            if bad:
                failures.append(f"{name}: onnxruntime and NumPy disagree on {o}: {bad}")
    for pp in pps:
        for be in BACKENDS:
            out, err = run_ppcc_pprt(name, m, feeds, pp, be)
            if err:
                failures.append(f"{name}: {err}")
                continue
            for o, w in zip(outputs, want):
                bad = close(np.load(os.path.join(out, o + ".npy")), w, rtol, atol)
                if bad:
                    failures.append(f"{name} (-pp {pp}, {be}): {o}: {bad}")


def refused(name, nodes, feeds, outputs, want_text, inits=(), opset=17, code=2, tool="ppcc", backend="ref"):
    """ppcc (or pprt on `backend`) must exit `code` with want_text in its message."""
    global n_cases
    if not wanted(name):
        return
    n_cases += 1
    m = model(nodes, feeds, outputs, inits, opset)
    d, path = write_case(name, m, feeds)
    plan = os.path.join(d, "p.plan")
    r = subprocess.run([PPCC, path, "-b", "0", "-q", "-o", plan], capture_output=True, text=True)
    if tool == "pprt" and r.returncode == 0:
        r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", os.path.join(d, "out"), "-q",
                            "--backend", backend], capture_output=True, text=True)
    if r.returncode != code or want_text not in r.stderr:
        failures.append(f"{name}: {tool} exit {r.returncode} (want {code}), stderr {r.stderr.strip()[-300:]!r}, "
                        f"want text {want_text!r}")


def batched(name, nodes, feeds, outputs, inits=(), opset=17, rtol=1e-5, atol=1e-5, refuse=None, optimized=True):
    """Every input's dim 0 named N, so ppcc -b 2 cuts the 4 samples into micro-batches: pprt at -pp 1 and 2
    against onnxruntime on the whole batch (optimized=False: with its graph rewrites off, see ort_run);
    refuse: ppcc must exit 2 with this text instead."""
    global n_cases
    if not wanted(name):
        return
    n_cases += 1
    m = model(nodes, feeds, outputs, inits, opset)
    for i in m.graph.input:
        i.type.tensor_type.shape.dim[0].dim_param = "N"
    d, path = write_case(name, m, feeds)
    want = ort_run(m, feeds, outputs, optimized)
    for pp in (1, 2):
        plan = os.path.join(d, f"b2_pp{pp}.plan")
        r = subprocess.run([PPCC, path, "-b", "2", "-pp", str(pp), "-q", "-o", plan], capture_output=True, text=True)
        if refuse is not None:
            if r.returncode != 2 or refuse not in r.stderr:
                failures.append(f"{name}: ppcc -b 2 exit {r.returncode} (want 2, {refuse!r}): {r.stderr.strip()[-300:]}")
            return
        if r.returncode:
            failures.append(f"{name}: ppcc -b 2 -pp {pp}: {r.stderr.strip()[-300:]}")
            continue
        for be in BACKENDS:
            out = os.path.join(d, f"out{pp}_{be}")
            r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q", "--backend", be],
                               capture_output=True, text=True)
            for o, w in zip(outputs, want):
                bad = r.stderr.strip()[-300:] if r.returncode else close(np.load(os.path.join(out, o + ".npy")), w,
                                                                         rtol, atol)
                if bad:
                    failures.append(f"{name} (-pp {pp}, {be}): {o}: {bad}")


def f32(*shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def with_edges(a, edges):
    a = a.copy().ravel()
    a[:len(edges)] = edges
    return a.reshape(-1)


# ---- unary math ----------------------------------------------------------------------------
EDGE = [0.0, -0.0, np.nan, np.inf, -np.inf]
UNARY = [  # op, input range, edges, numpy formula, attrs, opset
    ("Sin", (-10, 10), EDGE, np.sin, {}, 7), ("Cos", (-10, 10), EDGE, np.cos, {}, 7),
    ("Tan", (-1.5, 1.5), EDGE[:3], np.tan, {}, 7), ("Asin", (-1, 1), [0.0, 1.0, -1.0, 2.0], np.arcsin, {}, 7),
    ("Acos", (-1, 1), [0.0, 1.0, -1.0, 2.0], np.arccos, {}, 7), ("Atan", (-10, 10), EDGE, np.arctan, {}, 7),
    ("Sinh", (-5, 5), EDGE, np.sinh, {}, 9), ("Cosh", (-5, 5), EDGE, np.cosh, {}, 9),
    ("Asinh", (-10, 10), EDGE, np.arcsinh, {}, 9), ("Acosh", (1, 10), [1.0, 0.5, np.inf], np.arccosh, {}, 9),
    ("Atanh", (-0.99, 0.99), [0.0, 1.0, -1.0, 2.0], np.arctanh, {}, 9),
    ("Round", (-5, 5), [0.5, 1.5, 2.5, -0.5, -2.5, np.nan, np.inf], np.round, {}, 11),
    ("Softsign", (-5, 5), [0.0, np.inf, -np.inf], lambda x: x / (1 + np.abs(x)), {}, 7),
    ("Mish", (-10, 10), [0.0, 30.0, -30.0], lambda x: x * np.tanh(np.log1p(np.exp(x.astype(np.float64)))), {}, 18),
    ("Celu", (-5, 5), [0.0], lambda x: np.maximum(0, x) + np.minimum(0, 0.7 * np.expm1(x / 0.7)), {"alpha": 0.7}, 12),
    ("ThresholdedRelu", (-2, 2), [0.3, 0.2999], lambda x: np.where(x > 0.3, x, 0), {"alpha": 0.3}, 10),
    ("Swish", (-10, 10), [0.0], lambda x: x / (1 + np.exp(-1.5 * x.astype(np.float64))), {"alpha": 1.5}, 24),
]
for op, (lo, hi), edges, fn, attrs, opset in UNARY:
    x = with_edges(f32(64, lo=lo, hi=hi), edges).reshape(4, 16)
    with np.errstate(all="ignore"):
        case(op.lower(), [helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset,
             numpy_ref=lambda f, fn=fn: [fn(f["x"])], rtol=2e-6, atol=1e-6)

x = with_edges(f32(3, 8), EDGE)
case("isnan", [helper.make_node("IsNaN", ["x"], ["y"])], {"x": x.reshape(3, 8)}, ["y"], opset=13,
     numpy_ref=lambda f: [np.isnan(f["x"])])
for neg, pos in ((1, 1), (0, 1), (1, 0)):
    case(f"isinf_{neg}{pos}", [helper.make_node("IsInf", ["x"], ["y"], detect_negative=neg, detect_positive=pos)],
         {"x": x.reshape(3, 8)}, ["y"], opset=10,
         numpy_ref=lambda f, n=neg, p=pos: [(np.isneginf(f["x"]) & bool(n)) | (np.isposinf(f["x"]) & bool(p))])
for dt in (np.float32, np.int32, np.int8, np.uint8):
    v = (rng.integers(-5, 6, (2, 9)) if dt != np.uint8 else rng.integers(0, 4, (2, 9))).astype(dt)
    if dt == np.float32:
        v = with_edges(v.astype(np.float32) + np.float32(0.25), [0.0, -0.0, np.nan, -np.inf]).reshape(2, 9)
    case(f"sign_{np.dtype(dt).name}", [helper.make_node("Sign", ["x"], ["y"])], {"x": v}, ["y"], opset=13,
         numpy_ref=lambda f: [np.sign(f["x"])])
for dt in (np.float32, np.int8):
    v = (f32(3, 7) * 2).astype(dt)
    case(f"shrink_{np.dtype(dt).name}", [helper.make_node("Shrink", ["x"], ["y"], bias=1.5, lambd=1.0)], {"x": v}, ["y"],
         opset=9)

# ---- bitwise -----------------------------------------------------------------------------------
a16 = rng.integers(-3000, 3000, (2, 3, 4)).astype(np.int16)
case("bitwise_not", [helper.make_node("BitwiseNot", ["x"], ["y"])], {"x": a16}, ["y"], opset=18,
     numpy_ref=lambda f: [np.invert(f["x"])])
a32, b32 = rng.integers(-2**31, 2**31, (3, 5)).astype(np.int32), rng.integers(-2**31, 2**31, (5,)).astype(np.int32)
for op, fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)):
    case(op.lower(), [helper.make_node(op, ["a", "b"], ["y"])], {"a": a32, "b": b32}, ["y"], opset=18,
         numpy_ref=lambda f, fn=fn: [fn(f["a"], f["b"])])
for dt in (np.uint8, np.uint32):
    a = rng.integers(0, 200, (4, 6)).astype(dt)
    s = rng.integers(0, 8, (6,)).astype(dt)
    for direction in ("LEFT", "RIGHT"):
        case(f"bitshift_{direction.lower()}_{np.dtype(dt).name}",
             [helper.make_node("BitShift", ["a", "s"], ["y"], direction=direction)], {"a": a, "s": s}, ["y"], opset=11)

# ---- DepthToSpace, SpaceToDepth (MobileViT-v2's and TResNet's pixel shuffles) ---------------------
for mode in ("DCR", "CRD"):
    case(f"depthtospace_{mode}_b3", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=3, mode=mode)],
         {"x": f32(2, 18, 4, 5)}, ["y"], opset=13, rtol=0, atol=0)
case("depthtospace_int64_b2", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)],
     {"x": rng.integers(-9, 9, (1, 8, 3, 2)).astype(np.int64)}, ["y"], opset=11, rtol=0, atol=0,
     oracle="reference")
for b in (2, 3):
    case(f"spacetodepth_b{b}", [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=b)],
         {"x": f32(2, 3, 6, 12)}, ["y"], opset=13, rtol=0, atol=0)
refused("depthtospace_channels", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, name="d2s")],
        {"x": f32(1, 6, 2, 2)}, ["y"], "not a multiple of blocksize^2")
refused("spacetodepth_size", [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, name="s2d")],
        {"x": f32(1, 3, 5, 4)}, ["y"], "not a multiple of blocksize 2")

# ---- BatchNormalization in training mode (timm's weight-standardized convolutions: BiT, NFNet) -----
# the statistics of the input itself; before opset 14 five outputs (running mean and variance, saved
# mean and inverse standard deviation, as onnxruntime gives them), from 14 training_mode=1 and three
C3 = {"s": np.linspace(0.5, 1.5, 3).astype(np.float32), "b": np.linspace(-1, 1, 3).astype(np.float32),
      "m": np.full(3, 0.5, np.float32), "v": np.full(3, 2.0, np.float32)}
case("batchnorm_training_opset13", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                                     ["y", "rm", "rv", "sm", "sv"], epsilon=1e-3, momentum=0.7)],
     {"x": f32(4, 3, 5, 2, lo=-2, hi=6)}, ["y", "rm", "rv", "sm", "sv"], inits=C3, opset=13, rtol=1e-5, atol=1e-5)
case("batchnorm_training_opset15", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                                     ["y", "rm", "rv"], training_mode=1, momentum=0.2)],
     {"x": f32(2, 3, 7, lo=-2, hi=6)}, ["y", "rm", "rv"], inits=C3, opset=15, rtol=1e-5, atol=1e-5,
     oracle="reference")
# the standardization of constant weights, folded by ppcc: no BatchNormalization left in the plan
W = rng.normal(0, 0.2, (4, 3, 3, 3)).astype(np.float32)
std_nodes = [helper.make_node("Reshape", ["w", "wshape"], ["w3"]),
             helper.make_node("BatchNormalization", ["w3", "ones", "zeros", "m4", "v4"],
                              ["wn", "o1", "o2", "o3", "o4"], epsilon=1e-6, momentum=1.0),
             helper.make_node("Reshape", ["wn", "wfull"], ["ws"]),
             helper.make_node("Conv", ["x", "ws"], ["y"], pads=[1, 1, 1, 1])]
std_inits = {"w": W, "wshape": np.array([1, 4, 27], np.int64), "wfull": np.array([4, 3, 3, 3], np.int64),
             "ones": np.ones(4, np.float32), "zeros": np.zeros(4, np.float32),
             "m4": W.reshape(4, -1).mean(1), "v4": W.reshape(4, -1).var(1)}
case("batchnorm_training_weight_standardization", std_nodes, {"x": f32(2, 3, 6, 6)}, ["y"], inits=std_inits,
     opset=13, rtol=1e-4, atol=1e-5)
def batch_dynamic(m):
    """m with dim 0 of its first input named, so ppcc -b may cut it into micro-batches."""
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    return m


d, path = write_case("batchnorm_training_weight_standardization", batch_dynamic(
    model(std_nodes, {"x": f32(2, 3, 6, 6)}, ["y"], std_inits, 13)), {"x": f32(2, 3, 6, 6)})
r = subprocess.run([PPCC, path, "-b", "1", "--dump-ir", "-q", "-o", os.path.join(d, "b1.plan")],
                   capture_output=True, text=True)
if r.returncode or "BatchNormalization" in r.stdout:
    failures.append(f"batchnorm_training_weight_standardization: not folded at -b 1 (exit {r.returncode}): "
                    f"{r.stderr.strip()[-300:]}")
# over the samples themselves it mixes them: refused when cut into micro-batches
n_cases += 1
d, path = write_case("batchnorm_training_batched", batch_dynamic(model(
    [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1, name="bn")],
    {"x": f32(2, 3, 4)}, ["y"], C3, 15)), {"x": f32(2, 3, 4)})
r = subprocess.run([PPCC, path, "-b", "1", "-q", "-o", os.path.join(d, "b1.plan")], capture_output=True, text=True)
if r.returncode != 2 or "normalizes with the mean and variance of the batch" not in r.stderr:
    failures.append(f"batchnorm_training_batched: ppcc -b 1 exit {r.returncode} (want 2): {r.stderr.strip()[-300:]}")

# ---- a layer scale after a Conv (ConvNeXt's, EfficientFormer's gamma), folded into its weights ------
# (a pointwise convolution, as in those blocks: a 3x3 one may run Winograd, which spreads an infinity over
# its tile, docs/design-notes.md "NaN and infinities")
Wc = rng.normal(0, 0.3, (4, 3, 1, 1)).astype(np.float32)
for tag, scale in (("per_channel", np.array([0.5, -2.0, 1e-3, 3.0], np.float32).reshape(4, 1, 1)),
                   ("scalar", np.array(0.25, np.float32)),
                   ("with_zero", np.array([0.5, 0.0, 1.0, 2.0], np.float32).reshape(1, 4, 1, 1))):
    xs = f32(2, 3, 6, 6)
    xs[0, 1, 2, 2] = np.inf  # an infinity through the convolution: x * (W * 0) must not hide x * W * 0's NaN
    ls_nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"]),
                helper.make_node("Mul", ["h", "s"], ["t"]), helper.make_node("Add", ["t", "r"], ["y"])]
    ls_inits = {"w": Wc, "b": np.linspace(-1, 1, 4).astype(np.float32), "s": scale}
    case(f"conv_layer_scale_{tag}", ls_nodes, {"x": xs, "r": f32(2, 4, 6, 6)}, ["y"], inits=ls_inits, opset=13,
         rtol=1e-5, atol=1e-5)
    d, path = write_case(f"conv_layer_scale_{tag}", model(ls_nodes, {"x": xs, "r": f32(2, 4, 6, 6)}, ["y"], ls_inits, 13),
                         {"x": xs, "r": f32(2, 4, 6, 6)})
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan")],
                       capture_output=True, text=True)
    folded = " Mul " not in r.stdout
    if r.returncode or folded != (tag != "with_zero"):
        failures.append(f"conv_layer_scale_{tag}: the Mul {'was' if folded else 'was not'} folded into the Conv "
                        f"(exit {r.returncode})")

# ---- a Pad by zero before a Conv or AveragePool becomes their padding --------------------------------------
# (torch's avg_pool2d(padding=1) exports as Pad + AveragePool, TensorFlow-style "same" convolutions as Pad +
# Conv): folded only where the result is the same by definition; onnxruntime runs the model as written
def pad_fold(name, pad_in, pads, user, feeds, want_folded, opset=13, value=None, axes=None, mode=None, also_out=False,
             inits=None):
    nodes, inits = [], dict(inits or {})
    pin = [pad_in]
    if opset >= 11:
        inits["pads"] = np.array(pads, np.int64)
        pin.append("pads")
        if value is not None or axes is not None:
            if value is not None:
                inits["cv"] = np.array(value, np.float32)
            pin.append("cv" if value is not None else "")
        if axes is not None:
            inits["axes"] = np.array(axes, np.int64)
            pin.append("axes")
        pad = helper.make_node("Pad", pin, ["p"], **({"mode": mode} if mode else {}))
    else:
        pad = helper.make_node("Pad", [pad_in], ["p"], pads=pads, **({"value": value} if value is not None else {}),
                               **({"mode": mode} if mode else {}))
    nodes = [pad, user]
    outs = ["y"] + (["p"] if also_out else [])
    case(name, nodes, feeds, outs, inits=inits, opset=opset, rtol=1e-5, atol=1e-5)
    d, path = write_case(name + "_ir", model(nodes, feeds, outs, inits, opset), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan")],
                       capture_output=True, text=True)
    folded = " Pad " not in r.stdout
    if r.returncode or folded != want_folded:
        failures.append(f"{name}: the Pad {'was' if folded else 'was not'} folded (exit {r.returncode}; want "
                        f"{'folded' if want_folded else 'kept'})")


xp = f32(2, 5, 9, 8)
xp[1, 2, 0, 0] = np.nan  # a NaN at the border stays in every window that reads it
def avgpool(**kw):
    return helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=kw.pop("k", [3, 3]), **kw)
pad_fold("pad_avgpool_inception", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(strides=[1, 1]), {"x": xp}, True)
pad_fold("pad_avgpool_own_pads_include", "x", [0, 0, 1, 0, 0, 0, 0, 1],
         avgpool(pads=[0, 1, 1, 0], count_include_pad=1, strides=[2, 1]), {"x": xp}, True)
pad_fold("pad_avgpool_own_pads_exclude", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(pads=[1, 0, 0, 1]), {"x": xp}, False)
pad_fold("pad_avgpool_ceil_mode", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(strides=[2, 2], ceil_mode=1), {"x": xp}, False)
pad_fold("pad_avgpool_window_in_padding", "x", [0, 0, 3, 0, 0, 0, 0, 0], avgpool(), {"x": xp}, False)
pad_fold("pad_avgpool_opset10", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, True, opset=10)
pad_fold("pad_avgpool_3d_axes", "x", [1, 0, 2, 1, 2, 0], avgpool(k=[3, 3, 3]), {"x": f32(1, 2, 5, 6, 7)}, True,
         opset=18, axes=[-3, -2, -1])
pad_fold("pad_avgpool_channel_axis", "x", [0, 1, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, False)
pad_fold("pad_avgpool_reflect", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, False, mode="reflect")
pad_fold("pad_avgpool_value_one", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, False, value=1.0)
pad_fold("pad_avgpool_value_minus_zero", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, False, value=-0.0)
pad_fold("pad_avgpool_pad_is_output", "x", [0, 0, 1, 1, 0, 0, 1, 1], avgpool(), {"x": xp}, False, also_out=True)
Wp = rng.normal(0, 0.3, (6, 5, 3, 3)).astype(np.float32)
bp = np.linspace(-1, 1, 6).astype(np.float32)
conv = helper.make_node("Conv", ["p", "w", "b"], ["y"], strides=[2, 2])
xc = f32(2, 5, 9, 8)
pad_fold("pad_conv_same_stride2", "x", [0, 0, 0, 0, 0, 0, 1, 1], conv, {"x": xc}, True, value=0.0,
         inits={"w": Wp, "b": bp})
pad_fold("pad_conv_own_pads_dilated", "x", [0, 0, 2, 1, 0, 0, 0, 3],
         helper.make_node("Conv", ["p", "w"], ["y"], pads=[1, 0, 1, 0], dilations=[2, 2]), {"x": xc}, True,
         inits={"w": Wp})
pad_fold("pad_conv_negative", "x", [0, 0, -1, 0, 0, 0, 1, 0], conv, {"x": xc}, False, inits={"w": Wp, "b": bp})
pad_fold("pad_conv_1x1_no_room", "x", [0, 0, 1, 1, 0, 0, 1, 1], helper.make_node("Conv", ["p", "w"], ["y"]),
         {"x": xc}, False, inits={"w": Wp[:, :, :1, :1].copy()})
pad_fold("pad_conv_auto_pad", "x", [0, 0, 1, 1, 0, 0, 1, 1],
         helper.make_node("Conv", ["p", "w"], ["y"], auto_pad="SAME_UPPER"), {"x": xc}, False, inits={"w": Wp})
pad_fold("pad_conv_1d_grouped", "x", [0, 0, 2, 0, 0, 1], helper.make_node("Conv", ["p", "w"], ["y"], group=2),
         {"x": f32(2, 4, 11)}, True, inits={"w": rng.normal(0, 0.3, (6, 2, 4)).astype(np.float32)})

# ---- convolutions of few channels a group (pprt's kernel on oneDNN: runtime/dnnl/kernels/gconv.c) -------------------
def grouped_conv(name, xshape, group, k, act=None, bias=True, edges=(), pps=(1, 2), **attrs):
    """A Conv of xshape[1] channels in and out in `group` groups, k x k,
    then act (Relu, or Clip to [0, 6]; ppcc makes them one pp.FusedConv)
    and a Sigmoid (which pprt's kernel does not absorb), against
    onnxruntime; edges: values written into the input (NaN or an infinity
    stays in its group's outputs)."""
    C = xshape[1]
    x = with_edges(f32(*xshape), list(edges)).reshape(xshape) if edges else f32(*xshape)
    inits = {"w": rng.normal(0, 0.4, (C, C // group, k, k)).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = f32(C, lo=-0.2, hi=0.2)
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], group=group, kernel_shape=[k, k], **attrs)]
    last = "c"
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["a"]))
        last = "a"
    elif act == "Clip":
        inits["lo"], inits["hi"] = np.array(0.0, np.float32), np.array(6.0, np.float32)
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["a"]))
        last = "a"
    nodes.append(helper.make_node("Sigmoid", [last], ["y"]))
    case(name, nodes, {"x": x}, ["y", last], inits=inits, rtol=1e-5, atol=1e-5, pps=pps)


grouped_conv("gconv_2_relu", (2, 16, 9, 11), 8, 3, "Relu", pads=[1, 1, 1, 1],
             edges=[np.nan, 0, 0, np.inf])  # a NaN and an inf in channel 0's group (channels 0 and 1)
grouped_conv("gconv_4_s2_clip", (2, 32, 10, 9), 8, 3, "Clip", strides=[2, 2], pads=[1, 0, 1, 1])
grouped_conv("gconv_2_dilated_no_bias", (1, 32, 12, 12), 16, 3, bias=False, dilations=[2, 2], pads=[2, 2, 2, 2])
grouped_conv("gconv_2_24ch", (2, 24, 7, 8), 12, 3, "Relu", auto_pad="SAME_UPPER")
grouped_conv("gconv_2_5x5_s2", (1, 16, 15, 13), 8, 5, strides=[2, 2], pads=[2, 2, 2, 2])
grouped_conv("gconv_8", (1, 32, 6, 6), 4, 3, "Relu", pads=[1, 1, 1, 1])  # oneDNN's JIT kernel

# ---- ReduceMean over every spatial axis (timm's squeeze-and-excitation) becomes GlobalAveragePool -----------
def spatial_mean(name, shape, want_gap, opset=13, axes=None, keepdims=None):
    feeds = {"x": f32(*shape)}
    feeds["x"].flat[3] = np.nan
    feeds["x"].flat[-1] = np.inf
    inits, ins, kw = {}, ["x"], {}
    if keepdims is not None:
        kw["keepdims"] = keepdims
    if axes is not None and opset >= 18:
        inits["axes"] = np.array(axes, np.int64)
        ins.append("axes")
    elif axes is not None:
        kw["axes"] = axes
    nodes = [helper.make_node("ReduceMean", ins, ["y"], **kw)]
    case(name, nodes, feeds, ["y"], inits=inits, opset=opset, rtol=1e-5, atol=1e-6)
    d, path = write_case(name + "_ir", model(nodes, feeds, ["y"], inits, opset), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan")],
                       capture_output=True, text=True)
    gap = re.search(r" s\d+ GlobalAveragePool ", r.stdout) is not None
    if r.returncode or gap != want_gap:
        failures.append(f"{name}: the ReduceMean {'became' if gap else 'did not become'} GlobalAveragePool "
                        f"(exit {r.returncode})")


spatial_mean("mean_spatial_se", (2, 5, 7, 6), True, axes=[2, 3])
spatial_mean("mean_spatial_opset18_negative", (2, 5, 7, 6), True, opset=18, axes=[-1, -2], keepdims=1)
spatial_mean("mean_spatial_5d", (2, 3, 4, 5, 3), True, axes=[4, 2, 3])
spatial_mean("mean_spatial_no_keepdims", (2, 5, 7, 6), False, axes=[2, 3], keepdims=0)
spatial_mean("mean_spatial_with_channels", (2, 5, 7, 6), False, axes=[1, 2, 3])
spatial_mean("mean_spatial_one_axis", (2, 5, 7, 6), False, axes=[3])
spatial_mean("mean_spatial_rank3", (2, 5, 7), False, axes=[2])
spatial_mean("mean_spatial_all_axes", (2, 5, 7, 6), False, opset=18)

# ---- an Expand that its readers' own broadcasting makes redundant (ECA's and F.normalize's expand_as) ------
def expand_absorbed(name, xshape, eshape, shape, readers, want_gone):
    feeds = {"x": f32(*xshape), "e": f32(*eshape, lo=0.5, hi=2.0)}
    feeds["e"].flat[0] = np.nan
    inits = {"shape": np.array(shape, np.int64)}
    nodes = [helper.make_node("Expand", ["e", "shape"], ["big"])] + readers
    outs = [n.output[0] for n in readers]
    case(name, nodes, feeds, outs, inits=inits, opset=13, rtol=1e-5, atol=1e-6)
    d, path = write_case(name + "_ir", model(nodes, feeds, outs, inits, 13), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan")],
                       capture_output=True, text=True)
    gone = " Expand " not in r.stdout
    if r.returncode or gone != want_gone:
        failures.append(f"{name}: the Expand {'was' if gone else 'was not'} removed (exit {r.returncode})")


M = helper.make_node
# ECA: a per-channel scale expanded to the feature map, then Mul: removed
expand_absorbed("expand_eca_mul", (2, 6, 5, 4), (2, 6, 1, 1), [2, 6, 5, 4], [M("Mul", ["x", "big"], ["y"])], True)
# F.normalize: x / norm.expand_as(x); and a Max reading it beside the Div
expand_absorbed("expand_normalize_div", (3, 4, 7), (3, 4, 1), [3, 4, 7], [M("Div", ["x", "big"], ["y"]),
                M("Max", ["big", "x"], ["w"])], True)
# the expanded shape is wider than the other operand's: the result needs it, kept
expand_absorbed("expand_needed_shape", (1, 6, 1, 4), (2, 6, 1, 1), [2, 6, 5, 4], [M("Add", ["x", "big"], ["y"])], False)
# a reader that does not broadcast (Relu) keeps it, the Mul beside it too
expand_absorbed("expand_relu_reader", (2, 6, 5, 4), (2, 6, 1, 1), [2, 6, 5, 4], [M("Mul", ["x", "big"], ["y"]),
                M("Relu", ["big"], ["r"])], False)
# a graph output keeps it
expand_absorbed("expand_graph_output", (2, 6, 5, 4), (2, 6, 1, 1), [2, 6, 5, 4], [M("Mul", ["x", "big"], ["y"]),
                M("Identity", ["big"], ["big_out"])], False)

# ---- x * HardSigmoid(x; 1/6, 0.5) (torch's hardswish before opset 14) becomes HardSwish -------------------
# after a Conv, whose oneDNN kernel then takes it as a post-op; a HardSigmoid of other parameters stays
Wh = rng.normal(0, 0.5, (4, 3, 1, 1)).astype(np.float32)
for tag, alpha, fuses in (("hardswish", 1.0 / 6.0, True), ("other_alpha", 0.2, False)):
    xs = f32(2, 3, 5, 5, lo=-8, hi=8)
    xs[0, :, 0, :3] = [[np.nan, np.inf, -np.inf]] * 3  # NaN stays NaN, x * 1 for +inf, -inf * 0 is NaN
    hs_nodes = [helper.make_node("Conv", ["x", "w"], ["h"]),
                helper.make_node("HardSigmoid", ["h"], ["g"], alpha=alpha, beta=0.5),
                helper.make_node("Mul", ["h", "g"], ["y"])]
    feeds = {"x": xs}
    case(f"conv_{tag}", hs_nodes, feeds, ["y"], inits={"w": Wh}, opset=13, rtol=1e-5, atol=1e-6)
    d, path = write_case(f"conv_{tag}_ir", model(hs_nodes, feeds, ["y"], {"w": Wh}, 13), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan"),
                        "--export-stages", os.path.join(d, "stages")], capture_output=True, text=True)
    if r.returncode or (" HardSwish " in r.stdout) != fuses:
        failures.append(f"conv_{tag}: HardSwish {'missing' if fuses else 'made'} (exit {r.returncode})")
    # Conv and HardSwish are one chain (one kernel), so one unit: -pp 2 is refused and says so
    r = subprocess.run([PPCC, path, "-b", "0", "-pp", "2", "-q", "-o", os.path.join(d, "pp2.plan")],
                       capture_output=True, text=True)
    if fuses and (r.returncode != 2 or "(1 units: its 2 ops" not in r.stderr):
        failures.append(f"conv_{tag}: ppcc -pp 2 exit {r.returncode} (want 2 naming 1 unit of 2 ops): {r.stderr.strip()}")
    elif fuses:
        # --export-stages writes it back for opset 13 (no HardSwish there): onnxruntime runs the stage
        so = ort.SessionOptions()
        so.log_severity_level = 3
        st = ort.InferenceSession(os.path.join(d, "stages", "stage_0.onnx"), so, providers=["CPUExecutionProvider"])
        got = st.run(None, feeds)[0]
        want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        bad = close(got, want, 1e-6, 1e-7)
        if bad:
            failures.append(f"conv_{tag}: the exported stage: {bad}")

# ---- LayerNorm written out (torch before opset 17) becomes LayerNormalization, with or without a shift ------
# (timm's LayerNorm2d of caformer: no bias, so the pattern ends at Mul); Pow by 2 runs on oneDNN as a square
def layernorm_fused(name, tail, want_inputs, exp=2.0, shape=(2, 3, 5, 8), opset=18):
    """x -> ReduceMean, Sub, Pow(exp), ReduceMean, Add eps, Sqrt, Div, Mul gamma, then `tail` nodes reading
    'm'; want_inputs: the LayerNormalization's input count after ppcc, 0 for none. Before opset 17 (no
    LayerNormalization in ONNX) ppcc --export-stages writes it back as these ops: onnxruntime runs the stage"""
    x = f32(*shape)
    x[0, 0, 0, :3] = [np.nan, 1.0, 2.0]  # a row with NaN is NaN
    x[0, 0, 1, :] = 5.0  # a constant row: zero variance, eps alone
    feeds = {"x": x, "r": f32(*shape)}
    inits = {"two": np.array(exp, np.float32), "eps": np.array(1e-6, np.float32),
             "gamma": f32(shape[-1], lo=0.5, hi=1.5), "beta": f32(shape[-1], lo=-0.5, hi=0.5)}
    if opset >= 18:
        inits["axes"] = np.array([-1], np.int64)
        mean = lambda a, y: M("ReduceMean", [a, "axes"], [y])  # noqa: E731
    else:
        mean = lambda a, y: M("ReduceMean", [a], [y], axes=[-1])  # noqa: E731
    nodes = [mean("x", "mu"), M("Sub", ["x", "mu"], ["d"]), M("Pow", ["d", "two"], ["p"]),
             mean("p", "var"), M("Add", ["var", "eps"], ["ve"]), M("Sqrt", ["ve"], ["sd"]),
             M("Div", ["d", "sd"], ["n"]), M("Mul", ["n", "gamma"], ["m"])] + tail
    outs = [t.output[0] for t in tail] or ["m"]
    outs += ["m"] if tail and any(t.op_type == "Identity" for t in tail) else []
    case(name, nodes, feeds, outs, inits=inits, opset=opset, rtol=1e-4, atol=1e-5)
    d, path = write_case(name + "_ir", model(nodes, feeds, outs, inits, opset), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan"),
                        "--export-stages", os.path.join(d, "stages")], capture_output=True, text=True)
    ln = [l for l in r.stdout.splitlines() if " LayerNormalization " in l]
    got = len(ln[0].split(" <- ")[1].split(" | ")[0].split(", ")) if ln else 0
    if r.returncode or got != want_inputs:
        failures.append(f"{name}: LayerNormalization with {got} inputs, want {want_inputs} (exit {r.returncode}):"
                        f" {r.stdout.strip()[-600:]} {r.stderr.strip()[-300:]}")
        return
    # (from opset 17 the stage holds onnxruntime's LayerNormalization: another order of sums)
    stage_as_model(name, d, path, feeds, outs, *((1e-6, 1e-7) if opset < 17 else (1e-4, 1e-5)))


def stage_as_model(name, d, path, feeds, outs, rtol, atol):
    """ppcc --export-stages' one stage (d/stages/stage_0.onnx) runs in onnxruntime as the model at path does"""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    stage = ort.InferenceSession(os.path.join(d, "stages", "stage_0.onnx"), so, providers=["CPUExecutionProvider"])
    whole = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for o, got_o, want_o in zip(outs, stage.run(outs, feeds), whole.run(outs, feeds)):
        bad = close(got_o, want_o, rtol, atol)
        if bad:
            failures.append(f"{name}: the exported stage: {o}: {bad}")


layernorm_fused("ln_written_shift", [M("Add", ["m", "beta"], ["y"])], 3)
layernorm_fused("ln_written_no_shift", [], 2)
# an Add of a computed tensor (a residual) is no shift: the pattern ends at Mul, the Add stays
layernorm_fused("ln_written_residual_after", [M("Add", ["m", "r"], ["y"])], 2)
# Mul's output read twice (a graph output too): still one LayerNormalization ending there
layernorm_fused("ln_written_mul_read_twice", [M("Add", ["m", "beta"], ["y"]), M("Identity", ["m"], ["m_copy"])], 2)
layernorm_fused("ln_written_cube", [], 0, exp=3.0)
layernorm_fused("ln_written_no_shift_opset13", [], 2, opset=13)
layernorm_fused("ln_written_shift_opset13", [M("Add", ["m", "beta"], ["y"])], 3, opset=13)
# Pow by a constant 2 on oneDNN's square (x * x: the reference's bits), and by 3 on the reference kernel
for tag, e in (("square", 2.0), ("cube", 3.0)):
    xs = with_edges(f32(4, 7, lo=-20, hi=20), EDGE + [3e19, -3e19, 1e-30, -1e-30, 1.5]).reshape(4, 7)
    case(f"pow_{tag}", [M("Pow", ["x", "e"], ["y"])], {"x": xs}, ["y"], inits={"e": np.array(e, np.float32)},
         opset=15, numpy_ref=lambda f, e=e: [np.power(f["x"].astype(np.float64), e).astype(np.float32)],
         rtol=1e-7 if e == 2.0 else 1e-6, atol=0.0)

# ---- Hugging Face's RMSNorm and GPT-2's tanh GELU written out become RMSNormalization and Gelu(tanh) ---------
def fused_written(name, nodes, feeds, outs, inits, want_op, want_count, opset=17, rtol=1e-4, atol=1e-5):
    """nodes against onnxruntime on every backend; ppcc --dump-ir must hold want_count nodes of want_op (0:
    the pattern must stay as written), and ppcc --export-stages' stage (the fused node written back as these
    ops where the opset lacks it) must run in onnxruntime as the model does"""
    case(name, nodes, feeds, outs, inits=inits, opset=opset, rtol=rtol, atol=atol)
    d, path = write_case(name + "_ir", model(nodes, feeds, outs, inits, opset), feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan"),
                        "--export-stages", os.path.join(d, "stages")], capture_output=True, text=True)
    got = sum(1 for line in r.stdout.splitlines() if f" {want_op} " in line and " <- " in line)
    if r.returncode or got != want_count:
        failures.append(f"{name}: {got} {want_op} nodes, want {want_count} (exit {r.returncode}): "
                        f"{r.stderr.strip()[-300:]}")
        return
    stage_as_model(name, d, path, feeds, outs, rtol, atol)


def rmsnorm_written(name, want, opset=17, div=False, weight_first=True, axis=-1, shape=(2, 5, 16)):
    """LlamaRMSNorm as torch exports it: Pow 2, ReduceMean over `axis` (keepdims), Add eps, Sqrt, Reciprocal
    (or Div of 1 by it), Mul by x, Mul by a weight of the last dim; a row of zeros (eps alone), a NaN, a row
    of large values"""
    x = f32(*shape)
    x[0, 0, :] = 0.0
    x[0, 1, 3] = np.nan
    x[1, 2, :] *= 1e3
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-6, np.float32), "one": np.array(1.0, np.float32),
             "w": f32(shape[-1], lo=0.5, hi=1.5)}
    if opset >= 18:
        inits["axes"] = np.array([axis], np.int64)
        mean = M("ReduceMean", ["p", "axes"], ["var"])
    else:
        mean = M("ReduceMean", ["p"], ["var"], axes=[axis])
    inv = M("Div", ["one", "sd"], ["inv"]) if div else M("Reciprocal", ["sd"], ["inv"])
    nodes = [M("Pow", ["x", "two"], ["p"]), mean, M("Add", ["var", "eps"], ["ve"]), M("Sqrt", ["ve"], ["sd"]), inv,
             M("Mul", ["x", "inv"], ["n"]), M("Mul", ["w", "n"] if weight_first else ["n", "w"], ["y"])]
    fused_written(name, nodes, {"x": x}, ["y"], inits, "RMSNormalization", want, opset=opset)


rmsnorm_written("rms_written", 1)
rmsnorm_written("rms_written_div_opset18", 1, opset=18, div=True, weight_first=False)
rmsnorm_written("rms_written_mean_not_last", 0, axis=-2)  # a mean over another axis: no RMSNorm


def gelu_tanh_written(name, want, half_first=True, cubic=0.044715):
    """gelu_new as torch exports it: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), the 0.5 first or
    last; edge values (NaN, +-inf, large)"""
    x = with_edges(f32(4, 9, lo=-6, hi=6), EDGE + [30.0, -30.0]).reshape(4, 9)
    inits = {"half": np.array(0.5, np.float32), "three": np.array(3.0, np.float32),
             "c": np.array(cubic, np.float32), "k": np.array(np.sqrt(2 / np.pi), np.float32),
             "one": np.array(1.0, np.float32)}
    nodes = [M("Pow", ["x", "three"], ["p"]), M("Mul", ["p", "c"], ["m"]), M("Add", ["x", "m"], ["s"]),
             M("Mul", ["s", "k"], ["d"]), M("Tanh", ["d"], ["t"]), M("Add", ["t", "one"], ["a"])]
    if half_first:
        nodes += [M("Mul", ["x", "half"], ["h"]), M("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [M("Mul", ["x", "a"], ["xa"]), M("Mul", ["xa", "half"], ["y"])]
    fused_written(name, nodes, {"x": x}, ["y"], inits, "Gelu", want)


gelu_tanh_written("gelu_tanh_written", 1)
gelu_tanh_written("gelu_tanh_written_half_last", 1, half_first=False)
gelu_tanh_written("gelu_tanh_written_other_cubic", 0, cubic=0.5)  # not GELU's constant: stays as written


# ---- GroupNorm as torch exports it (Reshape, InstanceNormalization, Reshape, Mul, Add) becomes pp.GroupNorm ----
def groupnorm_fused(name, shape, groups, want, affine=("scale", "bias"), in_scale=1.0, shape_op=False, mul_full=False,
                    opset=17):
    """x [N, C, ...] -> Reshape [0, G, -1] -> InstanceNormalization(in_scale, 0) -> Reshape back (through
    Shape(x) when shape_op, as torch writes it) -> Mul by a [C, 1, ...] scale -> Add of a [C, 1, ...] bias
    (`affine`: which of the two; mul_full: the Mul's operand has x's whole shape, so it is no scale).
    want: the pp.GroupNorm node's num_groups after ppcc, 0 for none. Against onnxruntime on every backend;
    the reference kernels must give the bits of the unfused nodes (ppcc --disable-pass fuse); cuda-emu
    within rtol 1e-5 of them; the exported stage (the nodes written back) runs in onnxruntime as the
    model does."""
    x = f32(*shape)
    x[0, 0].flat[:2] = [np.nan, 1.0]  # a NaN makes its sample's group NaN
    x[-1, -1] = 7.5  # a constant channel; with groups == C a constant group: zero variance, eps alone
    x[0, -1].flat[0] = 1e4  # an outlier far from the group's mean
    C, rank = shape[1], len(shape)
    pshape = [C] + [1] * (rank - 2)
    inits = {"grp": np.array([0, groups, -1], np.int64), "ones": np.full(groups, in_scale, np.float32),
             "zeros": np.zeros(groups, np.float32), "scale": f32(*pshape, lo=0.5, hi=1.5),
             "bias": f32(*pshape, lo=-0.5, hi=0.5), "full": f32(*shape, lo=0.5, hi=1.5)}
    nodes = [M("Reshape", ["x", "grp"], ["g"]), M("InstanceNormalization", ["g", "ones", "zeros"], ["n"], epsilon=1e-5)]
    if shape_op:
        nodes += [M("Shape", ["x"], ["xs"]), M("Reshape", ["n", "xs"], ["r"])]
    else:
        inits["back"] = np.array([0] + list(shape[1:]), np.int64)
        nodes += [M("Reshape", ["n", "back"], ["r"])]
    cur = "r"
    if "scale" in affine:
        nodes.append(M("Mul", [cur, "full" if mul_full else "scale"], ["m"]))
        cur = "m"
    if "bias" in affine:
        nodes.append(M("Add", ["bias", cur], ["y"]))  # the constant first: the Add is matched either way round
        cur = "y"
    # a Relu (absorbed by pprt's kernel on oneDNN), then a Flatten, so that -pp 2 has two units to cut
    nodes += [M("Relu", [cur], ["act"]), M("Flatten", ["act"], ["out"], axis=1)]
    feeds, outs = {"x": x}, ["out"]
    case(name, nodes, feeds, outs, inits=inits, opset=opset, rtol=1e-5, atol=1e-5, pps=(1, 2))
    if not wanted(name):
        return
    m = model(nodes, feeds, outs, inits, opset)
    d, path = write_case(name + "_ir", m, feeds)
    r = subprocess.run([PPCC, path, "-b", "0", "--dump-ir", "-q", "-o", os.path.join(d, "ir.plan"),
                        "--export-stages", os.path.join(d, "stages")], capture_output=True, text=True)
    gn = [l for l in r.stdout.splitlines() if " pp.GroupNorm " in l]
    got = int(re.search(r"num_groups=(\d+)", gn[0]).group(1)) if gn else 0
    if r.returncode or got != want or len(gn) > 1:
        failures.append(f"{name}: {len(gn)} pp.GroupNorm of {got} groups, want one of {want} (exit {r.returncode}): "
                        f"{r.stdout.strip()[-600:]} {r.stderr.strip()[-300:]}")
        return
    # the reference kernels: the same bits with the fusion as without it; the CUDA backend's step
    # list (its normalization kernel, per channel) on the host within rtol 1e-5 of them
    res = {}
    for key, backend, args in (("ref", "ref", ()), ("unfused", "ref", ("--disable-pass", "fuse")),
                               ("emu", "cuda-emu", ())):
        o, e = run_ppcc_pprt(name + "_ir", m, feeds, 1, backend, args)
        if e:
            failures.append(f"{name}: {e}")
            return
        res[key] = np.load(os.path.join(o, "out.npy"))
    if res["ref"].tobytes() != res["unfused"].tobytes():
        failures.append(f"{name}: the reference kernels give other bits with pp.GroupNorm than without: "
                        f"{close(res['ref'], res['unfused'], 0, 0)}")
    bad = close(res["emu"], res["ref"], 1e-5, 1e-5)
    if bad:
        failures.append(f"{name}: cuda-emu: {bad}")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    stage = ort.InferenceSession(os.path.join(d, "stages", "stage_0.onnx"), so, providers=["CPUExecutionProvider"])
    whole = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    bad = close(stage.run(outs, feeds)[0], whole.run(outs, feeds)[0], 1e-6, 1e-7)
    if bad:
        failures.append(f"{name}: the exported stage: {bad}")


groupnorm_fused("gn_written", (2, 8, 5, 7), 4, 4)
groupnorm_fused("gn_written_shape_op", (3, 6, 4, 4), 3, 3, shape_op=True)
groupnorm_fused("gn_written_no_affine", (2, 8, 5, 7), 2, 2, affine=())
groupnorm_fused("gn_written_scale_only", (2, 8, 5, 7), 2, 2, affine=("scale",))
groupnorm_fused("gn_written_bias_only", (2, 8, 5, 7), 2, 2, affine=("bias",))
groupnorm_fused("gn_written_one_group", (2, 12, 6, 5), 1, 1)  # poolformer's GroupNorm1
groupnorm_fused("gn_written_per_channel", (2, 5, 6, 5), 5, 5)  # groups == channels
groupnorm_fused("gn_written_rank3", (2, 6, 33), 3, 3)
groupnorm_fused("gn_written_rank5", (1, 4, 3, 4, 5), 2, 2)
groupnorm_fused("gn_written_many_parts", (2, 16, 40, 41), 4, 4)  # 1640 pixels: several parts of pprt's kernel
# an InstanceNormalization scale other than 1 is not this pattern: left as it is
groupnorm_fused("gn_written_in_scale", (2, 8, 5, 7), 4, 0, in_scale=1.5)
# a Mul by a whole tensor is no per-channel scale: the pattern ends before it (no scale, the Add not reached)
groupnorm_fused("gn_written_mul_full", (2, 8, 5, 7), 4, 4, mul_full=True)

# ---- Resize by nearest neighbour (pprt's gather on oneDNN builds) against onnxruntime --------------------------
for tag, shape, scales, ct, nm in (("up2_asymmetric_floor", (2, 3, 5, 7), [1, 1, 2, 2], "asymmetric", "floor"),
                                   ("up17_half_pixel_ceil", (2, 3, 5, 7), [1, 1, 1.7, 1.3], "half_pixel",
                                    "round_prefer_ceil"),
                                   ("down_align_corners", (1, 2, 10, 8), [1, 1, 0.6, 0.5], "align_corners",
                                    "round_prefer_floor"),
                                   ("rank3_pytorch_half_pixel", (2, 4, 11), [1, 1, 2.5], "pytorch_half_pixel",
                                    "round_prefer_floor"),
                                   ("rank5_asymmetric_ceil", (1, 2, 3, 4, 5), [1, 1, 2, 1.5, 0.8], "asymmetric",
                                    "ceil")):
    xr = with_edges(f32(*shape), EDGE).reshape(shape)
    # (align_corners at whole output lengths: where scale * input length is fractional, onnxruntime
    # divides by the output length less one and pprt, as ONNX's reference, by scale * length less one)
    case(f"resize_nearest_{tag}", [M("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                                     coordinate_transformation_mode=ct, nearest_mode=nm)],
         {"x": xr}, ["y"], inits={"scales": np.array(scales, np.float32)}, opset=13, rtol=0.0, atol=0.0)

# ---- QuantizeLinear, DequantizeLinear --------------------------------------------------------------------
# int8, uint8, int16, uint16 per tensor, per axis and in blocks; halves (to even), saturation, NaN and the
# infinities; a Q-DQ pair around a Conv (a quantized model's pattern) cut into micro-batches at -pp 1 and 2
def qx(*shape, s=0.5):
    """values in [-80 s, 80 s], the first ones halfway between quantization steps of s, huge, infinite"""
    x = f32(*shape, lo=-80 * s, hi=80 * s)
    return with_edges(x, [0.5 * s, 1.5 * s, 2.5 * s, -0.5 * s, -2.5 * s, 1e9, -1e9, np.inf, -np.inf]).reshape(shape)


QT = {"int8": (TP.INT8, np.int8), "uint8": (TP.UINT8, np.uint8), "int16": (TP.INT16, np.int16),
      "uint16": (TP.UINT16, np.uint16)}
for qt, (tp, npt) in QT.items():
    zp0 = np.array(3 if npt in (np.uint8, np.uint16) else -2, npt)
    sq = 0.5 if qt.endswith("8") else 2.0 ** -7
    case(f"quantize_{qt}_tensor", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
         {"x": qx(2, 3, 4, s=sq)}, ["y"], inits={"s": np.float32(sq), "z": zp0}, opset=21)
    case(f"dequantize_{qt}_axis", [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
         {"x": np.iinfo(npt).min + rng.integers(0, np.iinfo(npt).max - np.iinfo(npt).min, (2, 3, 4)).astype(npt)},
         ["y"], inits={"s": np.array([0.5, 0.25, 2.0], np.float32), "z": np.array([0, 1, 2], npt)}, opset=21)
case("quantize_int8_axis_no_zp", [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=-1, output_dtype=TP.INT8)],
     {"x": qx(3, 5)}, ["y"], inits={"s": np.linspace(0.1, 2, 5).astype(np.float32)}, opset=21)
case("quantize_uint8_blocked", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)],
     {"x": qx(2, 5, 3)}, ["y"], inits={"s": rng.uniform(0.1, 1, (2, 3, 3)).astype(np.float32),
                                       "z": rng.integers(0, 255, (2, 3, 3)).astype(np.uint8)}, opset=21)
case("dequantize_int16_blocked", [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=0, block_size=3)],
     {"x": rng.integers(-30000, 30000, (7, 2)).astype(np.int16)}, ["y"],
     inits={"s": rng.uniform(0.1, 1, (3, 2)).astype(np.float32)}, opset=21)
case("dequantize_int32", [helper.make_node("DequantizeLinear", ["x", "s"], ["y"])],
     {"x": rng.integers(-2 ** 31, 2 ** 31 - 1, (4, 5)).astype(np.int32)}, ["y"], inits={"s": np.float32(1e-3)},
     opset=13)
refused("quantize_float8", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")],
        {"x": qx(3, 4)}, ["y"], "quantized type f8e4m3fn (17) is not supported",
        inits={"s": np.float32(1), "z": numpy_helper.to_array(helper.make_tensor("z", TP.FLOAT8E4M3FN, [], [0]))},
        opset=21)
refused("quantize_scale_shape", [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, name="q")],
        {"x": qx(3, 4)}, ["y"], "it must be [4]", inits={"s": np.ones(2, np.float32)}, opset=21)
# a quantized model's pattern: activations and weights through Q-DQ pairs around a Conv, in micro-batches
qdq_nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
qdq_inits = {"sx": np.float32(0.05), "zx": np.uint8(128), "wq": rng.integers(-127, 127, (4, 3, 3, 3)).astype(np.int8),
             "sw": rng.uniform(0.002, 0.01, 4).astype(np.float32), "sy": np.float32(0.1), "zy": np.uint8(0)}
qdq_x = f32(4, 3, 6, 6)


def qdq_conv_np(feeds):
    """The ONNX semantics of qdq_nodes in NumPy: QuantizeLinear rounds x / scale half to even and saturates,
    DequantizeLinear is (q - zero point) * scale, the Conv a float sum (here in float64)."""
    i = qdq_inits

    def quant(v, s, z):
        return np.clip(np.rint(v / s) + np.float32(z), 0, 255).astype(np.uint8)

    xd = (quant(feeds["x"], i["sx"], i["zx"]).astype(np.float32) - np.float32(i["zx"])) * i["sx"]
    wd = i["wq"].astype(np.float32) * i["sw"][:, None, None, None]
    xp = np.pad(xd.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    n, _, hh, ww = xd.shape
    c = np.zeros((n, wd.shape[0], hh, ww))
    for dy in range(3):
        for dx in range(3):
            c += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + hh, dx:dx + ww], wd[:, :, dy, dx].astype(np.float64))
    r = np.maximum(c.astype(np.float32), 0)
    return [(quant(r, i["sy"], i["zy"]).astype(np.float32) - np.float32(i["zy"])) * i["sy"]]


# The oracle is onnxruntime with its graph rewrites off (ort_run: its fused QLinearConv differs from the spec by
# whole steps on AVX2 machines without VNNI), checked against the NumPy semantics above; the optimized path's
# difference is printed, not asserted.
case("qdq_conv", qdq_nodes, {"x": qdq_x}, ["y"], inits=qdq_inits, opset=13, pps=(1, 2), oracle="onnxruntime-plain",
     numpy_ref=qdq_conv_np)
# (one quantization step apart where a sum lands on a tie: pprt may sum the convolution in another order)
batched("qdq_conv_batched", qdq_nodes, {"x": qdq_x}, ["y"], qdq_inits, 13, rtol=0, atol=0.1 + 1e-6, optimized=False)

# ---- AffineGrid, and a spatial transformer (AffineGrid then GridSample) ----------------------------------
# an axis of one pixel under align_corners: PyTorch puts it at 0, onnxruntime at 1, the ONNX reference at -1 (no
# node test has one); pprt follows PyTorch, which trained the model, checked against PyTorch's formula in NumPy
def affine_torch(dims, align):
    def f(feeds):
        k = len(dims) - 2
        axes = [(np.linspace(-1, 1, L) if L > 1 else np.zeros(1)) if align else (2 * np.arange(L) + 1) / L - 1
                for L in dims[2:]]
        mesh = np.meshgrid(*axes, indexing="ij")
        base = np.stack([m.ravel() for m in mesh[::-1]] + [np.ones(mesh[0].size)], 1)  # x first, then 1
        g = np.einsum("nrc,pc->npr", feeds["theta"].astype(np.float64), base)
        return [g.reshape(dims[0], *dims[2:], k).astype(np.float32)]
    return f


for dims, align in (((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1), ((2, 1, 4, 1, 6), 0), ((2, 1, 4, 1, 6), 1),
                    ((3, 2, 1, 4), 1), ((3, 2, 1, 4), 0)):
    k = len(dims) - 2
    case(f"affinegrid_{k}d_{'x'.join(map(str, dims[2:]))}_a{align}",
         [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)],
         {"theta": f32(dims[0], k, k + 1, lo=-1.5, hi=1.5)}, ["grid"], inits={"size": np.array(dims, np.int64)},
         opset=20, oracle=affine_torch(dims, align) if align and 1 in dims[2:] else "onnxruntime")
stn_nodes = [helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("AffineGrid", ["theta", "xs"], ["grid"]),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="border")]
stn_x, stn_t = f32(4, 3, 6, 5), f32(4, 2, 3, lo=-1.2, hi=1.2)
case("stn", stn_nodes, {"x": stn_x, "theta": stn_t}, ["y"], opset=20)
batched("stn_batched", stn_nodes, {"x": stn_x, "theta": stn_t}, ["y"], opset=20)

# ---- LpPool --------------------------------------------------------------------------------------------------
for name, shape, attrs, opset in (("p2_2d", (2, 3, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]), 18),
                                  ("p1_1d", (2, 3, 9), dict(kernel_shape=[3], p=1), 18),
                                  ("p3_dil_ceil", (1, 2, 8, 9), dict(kernel_shape=[2, 3], dilations=[2, 1], strides=[2, 2],
                                                                     ceil_mode=1, p=3), 18),
                                  ("same_upper_3d", (1, 2, 4, 5, 6), dict(kernel_shape=[2, 2, 3], auto_pad="SAME_UPPER"), 18),
                                  ("opset11", (2, 3, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2]), 11)):
    case(f"lppool_{name}", [helper.make_node("LpPool", ["x"], ["y"], **attrs)], {"x": f32(*shape)}, ["y"], opset=opset,
         rtol=1e-5, atol=1e-5)

# ---- OneHot --------------------------------------------------------------------------------------------------
oh_i = np.array([[0, 3, -1, 5], [-5, -6, 2, 4]], np.int64)  # -6 and 5: no class for depth 5
for axis in (-1, 0, 1):
    case(f"onehot_axis{axis}", [helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)], {"i": oh_i},
         ["y"], inits={"depth": np.array(5, np.int64), "values": np.array([-1, 7], np.int64)}, opset=11)
case("onehot_float_indices", [helper.make_node("OneHot", ["i", "depth", "values"], ["y"])],
     {"i": np.array([0.0, 1.7, -1.5, 2.9, 3.0], np.float32)}, ["y"],
     inits={"depth": np.array(4.0, np.float32), "values": np.array([0.5, 2.0], np.float32)}, opset=11)
batched("onehot_batched", [helper.make_node("OneHot", ["i", "depth", "values"], ["h"], axis=1),
                           helper.make_node("Cast", ["h"], ["y"], to=TP.FLOAT)],
        {"i": np.array([[1, 2], [0, 0], [2, -1], [1, 1]], np.int64)}, ["y"],
        {"depth": np.array(3, np.int64), "values": np.array([0, 1], np.int64)}, 11)

# ---- CenterCropPad (onnxruntime runs it as its function body: Slice and Pad) ---------------------------------
def ccp(axes=None):
    return helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp", **({} if axes is None else {"axes": axes}))


for name, x, shape, axes in (
        ("crop_odd", f32(2, 7, 9), [4, 6], [1, 2]),          # 3 and 3 cut: one before, two after
        ("pad_odd", f32(2, 3, 4), [6, 7], [-2, -1]),         # 3 and 3 added: one before, two after
        ("crop_and_pad", f32(3, 8, 5), [5, 8], [1, -1]),     # crop one axis, pad another
        ("all_axes", f32(2, 5, 6), [2, 4, 9], None),         # no axes: every axis, one left as it is
        ("axes_unsorted", f32(4, 6, 3), [5, 2], [2, 0]),
        ("1d", f32(7), [4], None),
        ("4d_int8", rng.integers(-100, 100, (2, 3, 5, 4)).astype(np.int8), [1, 6, 3], [1, 2, -1]),
        ("int64", rng.integers(-9, 9, (5, 4)).astype(np.int64), [2, 7], [0, 1]),
        ("bool", rng.integers(0, 2, (3, 6)).astype(np.bool_), [5, 3], None)):
    case(f"centercroppad_{name}", [ccp(axes)], {"x": x}, ["y"], inits={"shape": np.array(shape, np.int64)},
         opset=18, rtol=0, atol=0)
# a stray 'mode' attribute changes nothing (the CUDA route once took it for Pad's); an empty input padded
ccp_mode = ccp([1])
ccp_mode.attribute.append(helper.make_attribute("mode", "edge"))
case("centercroppad_stray_mode", [ccp_mode], {"x": f32(2, 4)}, ["y"], inits={"shape": np.array([8], np.int64)},
     opset=18, rtol=0, atol=0, oracle=lambda f: [np.pad(f["x"], ((0, 0), (2, 2)))])
case("centercroppad_empty_input", [ccp([0])], {"x": f32(0, 3)}, ["y"], inits={"shape": np.array([2], np.int64)},
     opset=18, rtol=0, atol=0, oracle=lambda f: [np.zeros((2, 3), np.float32)])
case("pad_empty_input", [helper.make_node("Pad", ["x", "p"], ["y"])], {"x": f32(2, 0)}, ["y"],
     inits={"p": np.array([0, 1, 0, 2], np.int64)}, opset=18, rtol=0, atol=0)
case("centercroppad_int32_shape", [ccp([-1])], {"x": f32(2, 9)}, ["y"], inits={"shape": np.array([4], np.int32)},
     opset=18, rtol=0, atol=0, oracle="reference")  # onnxruntime 1.32's function body mixes int32 and int64
batched("centercroppad_batched", [ccp([2, 3]), helper.make_node("Relu", ["y"], ["z"])], {"x": f32(4, 3, 7, 6)}, ["z"],
        {"shape": np.array([4, 9], np.int64)}, 18)
batched("centercroppad_batch_axis", [ccp([0, 2]), helper.make_node("Relu", ["y"], ["z"])], {"x": f32(4, 3, 7)}, ["z"],
        {"shape": np.array([2, 4], np.int64)}, 18, refuse="crops the batch axis (0)")
batched("centercroppad_batch_axis_kept", [ccp([0, 2]), helper.make_node("Relu", ["y"], ["z"])], {"x": f32(4, 3, 7)},
        ["z"], {"shape": np.array([4, 4], np.int64)}, 18, refuse="the batch axis (0)")
refused("centercroppad_shape_input", [ccp([1])], {"x": f32(2, 5), "shape": np.array([3], np.int64)}, ["y"],
        "node 'ccp' (#0, CenterCropPad): input 'shape' must be a constant known at compile time", opset=18)
refused("centercroppad_shape_count", [ccp([0, 1])], {"x": f32(2, 5)}, ["y"],
        "node 'ccp' (#0, CenterCropPad): input 'shape' has 3 values for 2 axes", inits={"shape": np.array([1, 2, 3], np.int64)},
        opset=18)
refused("centercroppad_axis_twice", [ccp([1, -1])], {"x": f32(2, 5)}, ["y"],
        "attribute 'axes' names axis 1 twice", inits={"shape": np.array([2, 3], np.int64)}, opset=18)

# ---- Col2Im ----------------------------------------------------------------------------------------------------
def col2im(**attrs):
    return helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], name="c2i", **attrs)


def col2im_blocks(image, block, dil=None, pads=None, strides=None):
    """The blocks along each spatial axis (ONNX's formula)."""
    k = len(image)
    dil, strides, pads = dil or [1] * k, strides or [1] * k, pads or [0] * (2 * k)
    return [(image[d] + pads[d] + pads[k + d] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(k)]


def col2im_np(x, image, block, dil=None, pads=None, strides=None):
    """Col2Im by its definition: block b's offset t lands on image point b * stride - pad + t * dilation."""
    k = len(image)
    dil, strides, pads = dil or [1] * k, strides or [1] * k, pads or [0] * (2 * k)
    nb = col2im_blocks(image, block, dil, pads, strides)
    xr = x.astype(np.float64).reshape(x.shape[0], -1, *block, *nb)
    y = np.zeros((x.shape[0], xr.shape[1], *image))
    for t in np.ndindex(*block):
        for b in np.ndindex(*nb):
            p = [b[d] * strides[d] - pads[d] + t[d] * dil[d] for d in range(k)]
            if all(0 <= p[d] < image[d] for d in range(k)):
                y[(slice(None), slice(None), *p)] += xr[(slice(None), slice(None), *t, *b)]
    return y.astype(x.dtype)


# oracle: onnxruntime, but the ONNX reference where onnxruntime 1.32 has no kernel (double) or places 3-D blocks
# with dilations elsewhere than the definition (its Col2imNd; 2-D and 1-D dilations agree); NumPy's formula in all
for name, n, c, image, block, attrs, dt, oracle in (
        ("2d", 2, 3, [5, 5], [2, 2], {}, np.float32, "onnxruntime"),
        ("2d_dil_stride_pads", 2, 2, [7, 6], [3, 2], dict(dilations=[2, 1], strides=[2, 3], pads=[1, 0, 2, 1]),
         np.float32, "onnxruntime"),
        ("2d_overlap_f64", 1, 2, [6, 5], [3, 3], dict(pads=[1, 1, 1, 1]), np.float64, "reference"),
        ("1d", 3, 2, [9], [3], dict(strides=[2], pads=[1, 1]), np.float32, "onnxruntime"),
        ("1d_dilation", 1, 1, [10], [3], dict(dilations=[3], pads=[0, 2]), np.float32, "onnxruntime"),
        ("3d_stride_pads", 2, 2, [4, 5, 3], [2, 3, 2], dict(strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 0]), np.float32,
         "onnxruntime"),
        ("3d_dilation", 2, 2, [5, 4, 6], [2, 2, 3], dict(dilations=[2, 1, 2], strides=[2, 1, 3], pads=[1, 0, 2, 0, 1, 1]),
         np.float32, "reference")):
    L = int(np.prod(col2im_blocks(image, block, attrs.get("dilations"), attrs.get("pads"), attrs.get("strides"))))
    x = rng.uniform(-3, 3, (n, c * int(np.prod(block)), L)).astype(dt)
    case(f"col2im_{name}", [col2im(**attrs)], {"x": x}, ["y"], opset=18, rtol=1e-5, atol=1e-5, oracle=oracle,
         inits={"image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)},
         numpy_ref=lambda f, i=image, b=block, a=attrs: [col2im_np(f["x"], i, b, a.get("dilations"), a.get("pads"),
                                                                   a.get("strides"))])
batched("col2im_batched", [col2im(strides=[2, 1], pads=[1, 0, 0, 1]), helper.make_node("Relu", ["y"], ["z"])],
        {"x": f32(4, 3 * 4, int(np.prod(col2im_blocks([5, 4], [2, 2], None, [1, 0, 0, 1], [2, 1]))))}, ["z"],
        {"image_shape": np.array([5, 4], np.int64), "block_shape": np.array([2, 2], np.int64)}, 18)
batched("col2im_batch_on_channels", [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),  # blocks of 1
                                     helper.make_node("Col2Im", ["t", "image_shape", "block_shape"], ["y"])],
        {"x": f32(4, 2, 9)}, ["y"], {"image_shape": np.array([3, 3], np.int64),
                                     "block_shape": np.array([1, 1], np.int64)}, 18,
        refuse="it sums the blocks of its input's axes 1 and 2 into an image, and axis 1 carries the batch")
C2I = {"image_shape": np.array([4, 4], np.int64), "block_shape": np.array([2, 2], np.int64)}
refused("col2im_image_shape_input", [col2im()], {"x": f32(1, 4, 9), "image_shape": C2I["image_shape"]}, ["y"],
        "node 'c2i' (#0, Col2Im): input 'image_shape' must be a constant known at compile time",
        inits={"block_shape": C2I["block_shape"]}, opset=18)
refused("col2im_blocks_count", [col2im()], {"x": f32(1, 4, 8)}, ["y"],
        "node 'c2i' (#0, Col2Im): input 'input' has 8 blocks (axis 2); image_shape, block_shape, dilations, pads and "
        "strides make 3 x 3 = 9", inits=C2I, opset=18)
refused("col2im_channels", [col2im()], {"x": f32(1, 6, 9)}, ["y"],
        "input 'input' has 6 values a block (axis 1), not a multiple of the block's 4", inits=C2I, opset=18)
refused("col2im_pads_count", [col2im(pads=[1, 1])], {"x": f32(1, 4, 9)}, ["y"],
        "attribute 'pads' has 2 values; the image has 2 spatial axes, so 4 are needed", inits=C2I, opset=18)
refused("col2im_block_too_big", [col2im(dilations=[4, 1])], {"x": f32(1, 4, 9)}, ["y"],
        "axis 0: a block spans 5 (block_shape 2, dilation 4), more than the padded image's 4", inits=C2I,
        opset=18)

# ---- Hardmax, LpNormalization, CumProd ----------------------------------------------------------------------
hx = f32(2, 5, 4)
hx[0, 2, 1] = hx[0, 4, 1] = 9.0  # a tie: the first wins
for opset, axis in ((11, 1), (13, 1), (13, -1), (13, 0)):
    case(f"hardmax_opset{opset}_axis{axis}", [helper.make_node("Hardmax", ["x"], ["y"], axis=axis)], {"x": hx}, ["y"],
         opset=opset)
hn = f32(2, 5)
hn[1, 3] = np.nan


def hardmax_nan(feeds):  # a line holding a NaN is NaN (onnxruntime gives it zeros, or a 1 past the NaN)
    x = feeds["x"]
    y = (np.arange(5)[None, :] == np.nanargmax(x, axis=1)[:, None]).astype(np.float32)
    y[np.isnan(x).any(axis=1)] = np.nan
    return [y]


case("hardmax_nan", [helper.make_node("Hardmax", ["x"], ["y"])], {"x": hn}, ["y"], opset=13, oracle=hardmax_nan)
lx = f32(3, 4, 5)
lx[1, :, 2] = 0  # a line of zeros along axis 1 stays zeros
for p_ in (1, 2):
    for axis in (1, -1):
        case(f"lpnorm_p{p_}_axis{axis}", [helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p_)],
             {"x": lx}, ["y"], opset=22)
# f64 lines and grids (values no float holds), other index and value types: the CUDA kernels' other branches
hx64 = rng.uniform(-3, 3, (3, 4, 5))
hx64[1, 2, 3] = hx64[0, 2, 3] + 1e-12  # larger only in f64
case("hardmax_f64_axis0", [helper.make_node("Hardmax", ["x"], ["y"], axis=0)], {"x": hx64}, ["y"],
     opset=13, oracle=lambda f: [(np.arange(3)[:, None, None] == np.argmax(f["x"], 0)[None]).astype(np.float64)])
lx64 = rng.uniform(-3, 3, (3, 4, 5))
lx64[:, 1, 2] = 0
case("lpnorm_f64_p2_axis0", [helper.make_node("LpNormalization", ["x"], ["y"], axis=0, p=2)],
     {"x": lx64}, ["y"], opset=22, rtol=1e-12, atol=1e-14)
case("affinegrid_f64_2d", [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0)],
     {"theta": rng.uniform(-1.5, 1.5, (2, 2, 3))}, ["grid"],
     inits={"size": np.array((2, 3, 4, 5), np.int64)}, opset=20, rtol=1e-12, atol=1e-14)
for it, vt in ((np.int32, np.float64), (np.uint8, np.int8), (np.float64, np.float32), (np.int8, np.int32)):
    ix = np.array([[0, 3, 2], [1, 4, 0]]).astype(it) if it != np.int8 else np.array([[0, -1, 2], [-4, 5, 1]], it)
    case(f"onehot_{np.dtype(it).name}_{np.dtype(vt).name}",
         [helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=0)], {"i": ix}, ["y"],
         inits={"depth": np.array(4, np.int64), "values": np.array([3, -2], vt)}, opset=11,
         oracle=lambda f, vt=vt: [np.where(np.arange(4)[:, None, None] == np.where(f["i"].astype(np.int64) < 0,
                                                                                    f["i"].astype(np.int64) + 4,
                                                                                    f["i"].astype(np.int64))[None],
                                           vt(-2), vt(3)).astype(vt)])
refused("lpnorm_p3", [helper.make_node("LpNormalization", ["x"], ["y"], p=3, name="lp")], {"x": lx}, ["y"],
        "attribute 'p'=3 is not 1 or 2", opset=22)


def cumprod_ref(axis, exclusive, reverse):
    def f(feeds):
        x = feeds["x"]
        if reverse:
            x = np.flip(x, axis)
        if exclusive:
            x = np.concatenate([np.ones_like(np.take(x, [0], axis)), np.delete(x, -1, axis)], axis)
        y = np.cumprod(x, axis, dtype=x.dtype)
        return [np.flip(y, axis) if reverse else y]
    return f


for dt, xs in (("f32", rng.uniform(0.5, 1.5, (3, 6)).astype(np.float32)),
               ("i64", rng.integers(-3, 4, (3, 6)).astype(np.int64))):
    for exclusive in (0, 1):
        for reverse in (0, 1):
            case(f"cumprod_{dt}_e{exclusive}_r{reverse}",
                 [helper.make_node("CumProd", ["x", "ax"], ["y"], exclusive=exclusive, reverse=reverse)], {"x": xs},
                 ["y"], inits={"ax": np.array(1, np.int64)}, opset=26, oracle=cumprod_ref(1, exclusive, reverse))

# ---- GridSample ------------------------------------------------------------------------------------------
# Every mode, padding and align_corners at opset 16 (4-D) against onnxruntime, on points reaching past the image
# (the padding rules) and points landing on pixel centres and halfway between them (nearest's rounding to even);
# opset 20's names, 3-D volumes and 1-D lines; the batch cut into micro-batches at -pp 1 and 2; the refusals
def gs_grid(shape, align, lengths):
    """grid values in [-1.4, 1.4], the first ones on exact pixel centres and halves along each axis"""
    g = rng.uniform(-1.4, 1.4, shape).astype(np.float32)
    flat = g.reshape(-1, shape[-1])
    for j in range(min(len(flat), 12)):
        for a, L in enumerate(lengths):  # coordinate a is the axis of length L
            pos = (j - 2) / 2.0  # -1, -0.5, 0, 0.5, ... in pixels
            flat[j, a] = 2 * pos / (L - 1) - 1 if align else (2 * pos + 1) / L - 1
    return g


for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for align in (0, 1):
            case(f"gridsample_{mode}_{pad}_a{align}",
                 [helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad, align_corners=align)],
                 {"x": f32(2, 3, 5, 6), "grid": gs_grid((2, 4, 7, 2), align, (6, 5))}, ["y"], opset=16,
                 rtol=1e-5, atol=1e-5)
for mode, pad, shape, gshape in (("linear", "reflection", (2, 2, 4, 5, 6), (2, 3, 4, 2, 3)),
                                 ("nearest", "border", (2, 2, 4, 5, 6), (2, 3, 4, 2, 3)),
                                 ("linear", "zeros", (1, 3, 9), (1, 7, 1)), ("cubic", "border", (1, 2, 6, 7), (1, 5, 3, 2))):
    for align in (0, 1):
        # (onnxruntime 1.32 samples 4-D and 5-D inputs only: onnx's reference evaluator for the 1-D line)
        case(f"gridsample20_{mode}_{pad}_{len(shape) - 2}d_a{align}",
             [helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad, align_corners=align)],
             {"x": f32(*shape), "grid": gs_grid(gshape, align, shape[:1:-1])}, ["y"], opset=20, rtol=1e-5, atol=1e-5,
             oracle="onnxruntime" if len(shape) > 3 else "reference")
# a NaN coordinate: NaN in every channel at that point (onnxruntime casts floor(NaN) to an integer, undefined
# behaviour in C++); elsewhere onnxruntime's values
gs_nan = gs_grid((1, 3, 4, 2), 0, (6, 5))
gs_nan[0, 1, 2, 0] = np.nan


def gs_nan_oracle(feeds):
    g = feeds["grid"].copy()
    g[0, 1, 2, 0] = 0
    m = model([helper.make_node("GridSample", ["x", "grid"], ["y"])], feeds, ["y"], (), 16)
    y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {**feeds, "grid": g})[0]
    y[0, :, 1, 2] = np.nan
    return [y]


case("gridsample_nan_point", [helper.make_node("GridSample", ["x", "grid"], ["y"])],
     {"x": f32(1, 3, 5, 6), "grid": gs_nan}, ["y"], opset=16, oracle=gs_nan_oracle)
refused("gridsample_bad_grid", [helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs")],
        {"x": f32(2, 3, 5, 6), "grid": f32(2, 4, 7, 3)}, ["y"], "input grid has shape [2,4,7,3]", opset=16)
refused("gridsample_mode_of_opset20_at_16", [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear")],
        {"x": f32(2, 3, 5, 6), "grid": f32(2, 4, 7, 2)}, ["y"], "attribute 'mode'='linear' is not one of bilinear",
        opset=16)
# samples in micro-batches: X and grid both carry them (-b 2 of 4, at -pp 1 and 2); a constant grid of the
# whole batch's 4 samples cannot pair with micro-batches of 2: refused, naming the grid
gs_x, gs_g = f32(4, 3, 5, 6), gs_grid((4, 4, 7, 2), 0, (6, 5))
gs_nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("GridSample", ["r", "grid"], ["s"], name="gs"),
            helper.make_node("Mul", ["s", "two"], ["y"])]
batched("gridsample_batched_both", gs_nodes, {"x": gs_x, "grid": gs_g}, ["y"], {"two": np.float32(2)}, 16)
batched("gridsample_batched_constant_grid", gs_nodes, {"x": gs_x}, ["y"], {"two": np.float32(2), "grid": gs_g}, 16,
        refuse="input grid has shape [4,4,7,2]")

# ---- EyeLike, ScatterElements ---------------------------------------------------------------------
case("eyelike_k1_int32", [helper.make_node("EyeLike", ["x"], ["y"], k=1, dtype=TP.INT32)], {"x": f32(4, 6)}, ["y"],
     opset=9, numpy_ref=lambda f: [np.eye(4, 6, 1, dtype=np.int32)])
case("eyelike_km2", [helper.make_node("EyeLike", ["x"], ["y"], k=-2)], {"x": f32(5, 3)}, ["y"], opset=9,
     numpy_ref=lambda f: [np.eye(5, 3, -2, dtype=np.float32)])
data = f32(3, 5)
idx = np.array([[1, -1, 0], [4, 2, 2], [0, 0, 3]], np.int64)  # repeats within rows: reductions combine them
upd = f32(3, 3)
for red in ("add", "mul", "max", "min"):
    case(f"scatter_elements_{red}", [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction=red)],
         {"d": data, "u": upd}, ["y"], inits={"i": idx}, opset=18)
case("scatter_elements_none", [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0)],
     {"d": data, "u": upd[:2]}, ["y"], inits={"i": np.array([[2, 0, 1], [0, 1, 2]], np.int64)}, opset=18)

# ---- RMSNormalization, RotaryEmbedding -------------------------------------------------------------
x = f32(2, 3, 8)
case("rms_axis_last", [helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-3)], {"x": x, "s": f32(8)},
     ["y"], opset=23, numpy_ref=lambda f: [f["x"] / np.sqrt((f["x"] ** 2).mean(-1, keepdims=True) + 1e-3) * f["s"]])
case("rms_axis1_bcast", [helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1)], {"x": x, "s": f32(1, 8)},
     ["y"], opset=23)
B, H, S, D = 2, 3, 5, 8
pos = rng.integers(0, 10, (B, S)).astype(np.int64)
cos, sin = f32(10, D // 2, lo=-1, hi=1), f32(10, D // 2, lo=-1, hi=1)
for il in (0, 1):
    case(f"rotary_4d_pos_il{il}", [helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], interleaved=il)],
         {"x": f32(B, H, S, D), "c": cos, "s": sin, "p": pos}, ["y"], opset=23)
case("rotary_3d_partial", [helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], num_heads=H,
                                            rotary_embedding_dim=4)],
     {"x": f32(B, S, H * D), "c": f32(B, S, 2, lo=-1, hi=1), "s": f32(B, S, 2, lo=-1, hi=1)}, ["y"], opset=23)

# ---- Attention ----------------------------------------------------------------------------------------
B, Hq, Hkv, Sq, Skv, D = 2, 4, 2, 5, 7, 8
q4, k4, v4 = f32(B, Hq, Sq, D), f32(B, Hq, Skv, D), f32(B, Hq, Skv, D)


def att(name, ins, outs=("y",), oracle="onnxruntime", **attrs):
    feeds = dict(ins)
    names = [k if k else "" for k in ["q", "k", "v", "mask" if "mask" in feeds else "", "pk" if "pk" in feeds else "",
                                      "pv" if "pv" in feeds else ""]]
    while names and not names[-1]:
        names.pop()
    case(name, [helper.make_node("Attention", names, list(outs), **attrs)], feeds,
         [o for o in outs if o], opset=23, rtol=1e-4, atol=1e-5, oracle=oracle)


att("attention_4d", {"q": q4, "k": k4, "v": v4})
att("attention_4d_causal_scaled", {"q": q4, "k": k4, "v": v4}, is_causal=1, scale=0.2)
att("attention_bool_mask", {"q": q4, "k": k4, "v": v4, "mask": rng.random((Sq, Skv)) > 0.3})
att("attention_float_mask_4d", {"q": q4, "k": k4, "v": v4, "mask": f32(B, 1, Sq, Skv)})
# onnxruntime 1.32 refuses a mask shorter than the keys, which ONNX allows
att("attention_short_mask_causal", {"q": q4, "k": k4, "v": v4, "mask": f32(Sq, Skv - 2)}, is_causal=1,
    oracle="onnx.reference")
att("attention_softcap", {"q": q4 * 4, "k": k4, "v": v4}, softcap=2.0)
att("attention_gqa_3d", {"q": f32(B, Sq, Hq * D), "k": f32(B, Skv, Hkv * D), "v": f32(B, Skv, Hkv * 6)},
    q_num_heads=Hq, kv_num_heads=Hkv, is_causal=1)
att("attention_past_present", {"q": q4, "k": f32(B, Hkv, Skv, D), "v": f32(B, Hkv, Skv, D), "pk": f32(B, Hkv, 3, D),
                               "pv": f32(B, Hkv, 3, D)}, outs=("y", "present_k", "present_v"), is_causal=1)
att("attention_qk_output", {"q": q4, "k": k4, "v": v4, "mask": f32(Sq, Skv)}, outs=("y", "", "", "qk"),
    qk_matmul_output_mode=2)

# ---- control flow and sequences ----------------------------------------------------------------------------
I64, BOOL, F = TP.INT64, TP.BOOL, TP.FLOAT
sv = helper.make_tensor_value_info
T = helper.make_tensor
x = f32(2, 3)

# Loop, constant trip count: acc = acc * 0.5 + x * i (x from the enclosing graph); scan output acc
body = helper.make_graph(
    [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["x", "fi"], ["xi"]),
     helper.make_node("Mul", ["acc", "half"], ["ah"]), helper.make_node("Add", ["ah", "xi"], ["acc2"]),
     helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["acc2"], ["scan"])],
    "body", [sv("i", I64, []), sv("c", BOOL, []), sv("acc", F, [2, 3])],
    [sv("c2", BOOL, []), sv("acc2", F, [2, 3]), sv("scan", F, [2, 3])],
    initializer=[numpy_helper.from_array(np.array(0.5, np.float32), "half")])
case("loop_const_trip", [helper.make_node("Loop", ["m", "", "a0"], ["acc", "stack"], body=body)],
     {"x": x, "a0": f32(2, 3)}, ["acc", "stack"], inits={"m": np.array(4, np.int64)}, opset=13, pps=(1, 2))

# Loop, trip count computed (Shape of x -> Gather), stopped early by the body's condition (i < 1)
body2 = helper.make_graph(
    [helper.make_node("Less", ["i", "one"], ["c2"]), helper.make_node("Add", ["acc", "x"], ["acc2"])],
    "body2", [sv("i", I64, []), sv("c", BOOL, []), sv("acc", F, [2, 3])], [sv("c2", BOOL, []), sv("acc2", F, [2, 3])],
    initializer=[numpy_helper.from_array(np.array(1, np.int64), "one")])
case("loop_computed_trip_early_stop",
     [helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Gather", ["shp", "ax"], ["m"], axis=0),
      helper.make_node("Loop", ["m", "t", "x"], ["acc"], body=body2)],
     {"x": x}, ["acc"], inits={"ax": np.array(1, np.int64), "t": np.array(True)}, opset=13)

# a Loop building a sequence (as GPT-J's export does), then ConcatFromSequence
body3 = helper.make_graph(
    [helper.make_node("SequenceAt", ["parts", "i"], ["p"]), helper.make_node("Unsqueeze", ["p", "ax0"], ["pu"]),
     helper.make_node("Concat", ["pu", "pu"], ["pp"], axis=0), helper.make_node("SequenceInsert", ["s", "pp"], ["s2"]),
     helper.make_node("Identity", ["c"], ["c2"])],
    "body3", [sv("i", I64, []), sv("c", BOOL, []), helper.make_tensor_sequence_value_info("s", F, None)],
    [sv("c2", BOOL, []), helper.make_tensor_sequence_value_info("s2", F, None)],
    initializer=[numpy_helper.from_array(np.array([0], np.int64), "ax0")])
case("loop_builds_sequence",
     [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0),
      helper.make_node("SequenceLength", ["parts"], ["n"]), helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
      helper.make_node("Loop", ["n", "", "e"], ["s"], body=body3),
      helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1),
      helper.make_node("Relu", ["y"], ["out"])],
     {"x": x}, ["out"], opset=13, pps=(1, 2))

# nested: an inner Loop reads a value of the outer body (a free variable two scopes down)
inner = helper.make_graph([helper.make_node("Add", ["a", "step"], ["a2"]), helper.make_node("Identity", ["ic"], ["ic2"])],
                          "inner", [sv("j", I64, []), sv("ic", BOOL, []), sv("a", F, [2, 3])],
                          [sv("ic2", BOOL, []), sv("a2", F, [2, 3])])
outer = helper.make_graph(
    [helper.make_node("Mul", ["x", "acc"], ["step"]),
     helper.make_node("Loop", ["two", "", "acc"], ["acc2"], body=inner), helper.make_node("Identity", ["c"], ["c2"])],
    "outer", [sv("i", I64, []), sv("c", BOOL, []), sv("acc", F, [2, 3])], [sv("c2", BOOL, []), sv("acc2", F, [2, 3])],
    initializer=[numpy_helper.from_array(np.array(2, np.int64), "two")])
case("loop_nested", [helper.make_node("Loop", ["three", "", "x"], ["y"], body=outer)], {"x": x * 0.3}, ["y"],
     inits={"three": np.array(3, np.int64)}, opset=13)

# If on a constant condition, its branch reading the enclosing graph
then_b = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [sv("t", F, [2, 3])])
else_b = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [sv("e", F, [2, 3])])
for c in (True, False):
    case(f"if_const_{c}", [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)], {"x": x},
         ["y"], inits={"c": np.array(c)}, opset=13)

# sequence ops without a loop
case("sequence_ops",
     [helper.make_node("SplitToSequence", ["x", "sp"], ["s"], axis=1),
      helper.make_node("SequenceConstruct", ["x", "x"], ["s2"]),
      helper.make_node("SequenceInsert", ["s", "x", "pos"], ["s3"]),
      helper.make_node("SequenceErase", ["s3", "first"], ["s4"]),
      helper.make_node("SequenceAt", ["s4", "last"], ["a"]),
      helper.make_node("SequenceLength", ["s4"], ["n"]),
      helper.make_node("ConcatFromSequence", ["s4"], ["cat"], axis=1),
      helper.make_node("ConcatFromSequence", ["s2"], ["stk"], axis=0, new_axis=1)],
     {"x": f32(2, 5)}, ["a", "n", "cat", "stk"],
     inits={"sp": np.array([2, 3], np.int64), "pos": np.array(1, np.int64), "first": np.array(0, np.int64),
            "last": np.array(-1, np.int64)}, opset=13)

# ---- LSTM, GRU, RNN ------------------------------------------------------------------------------
RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def rnn_case(name, op, S=5, N=3, I=4, H=6, D=1, opset=14, lens=None, h0=False, c0=False, peep=False,
             layout=0, outs=None, oracle="onnxruntime", **attrs):
    """op over X [S, N, I] (layout 1: [N, S, I]), H values per gate and D
    directions: W, R, B (and P) initializers; X, sequence_lens, initial_h and
    initial_c graph inputs. outs: the node's outputs ("" for an absent one).
    oracle "layout0": onnxruntime (which refuses layout 1; onnx's reference
    evaluator mistakes the batch size there) on the same node with layout 0,
    its inputs and outputs transposed."""
    G = RNN_GATES[op]
    w = lambda *s: rng.uniform(-0.6, 0.6, s).astype(np.float32)  # noqa: E731
    feeds = {"X": f32(N, S, I) if layout else f32(S, N, I)}
    inits = {"W": w(D, G * H, I), "R": w(D, G * H, H), "B": w(D, 2 * G * H)}
    ins = ["X", "W", "R", "B", "", "", "", ""]
    hs = (N, D, H) if layout else (D, N, H)
    if lens is not None:
        feeds["sequence_lens"], ins[4] = np.array(lens, np.int32), "sequence_lens"
    if h0:
        feeds["initial_h"], ins[5] = f32(*hs, lo=-1, hi=1), "initial_h"
    if c0:
        feeds["initial_c"], ins[6] = f32(*hs, lo=-1, hi=1), "initial_c"
    if peep:
        inits["P"], ins[7] = w(D, 3 * H), "P"
    while not ins[-1]:
        ins.pop()
    outs = outs or (["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"])
    if D == 2:
        attrs["direction"] = "bidirectional"
    if layout:
        attrs["layout"] = 1
    named = [o for o in outs if o]
    if oracle == "layout0":
        def oracle(f, attrs=dict(attrs)):
            f = {k: np.ascontiguousarray(v.transpose(1, 0, 2)) if v.ndim == 3 else v for k, v in f.items()}
            attrs.pop("layout")
            m0 = model([helper.make_node(op, ins, outs, hidden_size=H, **attrs)], f, named, inits, opset)
            so = ort.SessionOptions()
            so.log_severity_level = 3
            got = ort.InferenceSession(m0.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(named, f)
            return [g.transpose(2, 0, 1, 3) if g.ndim == 4 else g.transpose(1, 0, 2) for g in got]
    case(name, [helper.make_node(op, ins, outs, name=name, hidden_size=H, **attrs)], feeds, named,
         inits=inits, opset=opset, rtol=1e-4, atol=1e-5, oracle=oracle)


rnn_case("lstm_bidir_all", "LSTM", D=2, opset=7, lens=[5, 2, 4], h0=True, c0=True, peep=True)
rnn_case("lstm_bidir_len0", "LSTM", D=2, opset=22, lens=[3, 0, 5], h0=True, c0=True)
# 21 hidden values: two vectors of 8 of the gates on vact.h (oneDNN backend, AVX2 and up) and 5 after them
rnn_case("lstm_h21_vector", "LSTM", D=2, H=21, I=7, lens=[5, 1, 4], h0=True, c0=True, peep=True)
rnn_case("lstm_h16_vector_acts", "LSTM", H=16, outs=["Y", "Y_h", "Y_c"], activations=["HardSigmoid", "Tanh", "Tanh"])
rnn_case("lstm_layout1", "LSTM", opset=22, layout=1, peep=True, outs=["Y", "Y_h"], oracle="layout0")
rnn_case("lstm_layout1_bidir", "LSTM", D=2, layout=1, lens=[5, 2, 4], h0=True, c0=True, peep=True,
         oracle="layout0")
rnn_case("lstm_reverse_clip_forget", "LSTM", direction="reverse", clip=0.5, input_forget=1, peep=True,
         h0=True, c0=True)
rnn_case("lstm_acts", "LSTM", D=2, outs=["", "Y_h", "Y_c"],
         activations=["HardSigmoid", "LeakyRelu", "Tanh", "Sigmoid", "Elu", "Softsign"],
         activation_alpha=[0.3, 0.1, 0.4], activation_beta=[0.4])
rnn_case("gru_bidir_lens", "GRU", D=2, lens=[5, 2, 4], h0=True, linear_before_reset=0)
rnn_case("gru_bidir_lens_lbr", "GRU", D=2, opset=7, lens=[5, 0, 4], h0=True, linear_before_reset=1)
rnn_case("gru_layout1", "GRU", layout=1, linear_before_reset=1, oracle="layout0")
# 19 hidden values: z, r and the new state 8 at a time on vact.h (oneDNN backend, AVX2 and up), 3 after
rnn_case("gru_h19_vector", "GRU", D=2, H=19, I=5, lens=[5, 2, 4], h0=True, linear_before_reset=0)
rnn_case("gru_h19_vector_lbr", "GRU", H=19, I=5, h0=True, linear_before_reset=1)
rnn_case("gru_acts_clip", "GRU", direction="reverse", clip=0.7, outs=["", "Y_h"],
         activations=["HardSigmoid", "Softplus"], activation_alpha=[0.3], activation_beta=[0.6])
rnn_case("rnn_relu_bidir", "RNN", D=2, opset=22, lens=[5, 2, 4], h0=True, activations=["Relu", "Tanh"])
rnn_case("rnn_layout1_bidir", "RNN", D=2, layout=1, lens=[1, 5, 3], h0=True, oracle="layout0",
         activations=["LeakyRelu", "ThresholdedRelu"], activation_alpha=[0.2, 0.1])

# the batch analysis: with layout 1 X, Y and Y_h hold the batch on axis 0 (micro-batches of 2 give
# the bytes of one of 4 on the reference kernels; on oneDNN, whose LSTM is matrix products over the
# micro-batch, the same within float rounding); with layout 0 an X of [N, S, I] runs the recurrence
# across the samples
n_cases += 2
lstm_w = {"W": f32(1, 16, 3, lo=-0.5, hi=0.5), "R": f32(1, 16, 4, lo=-0.5, hi=0.5), "B": f32(1, 32, lo=-0.5, hi=0.5)}
lx = {"x": f32(4, 5, 3)}
d, path = write_case("lstm_layout1_batched", batch_dynamic(model(
    [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh"], hidden_size=4, layout=1)], lx, ["y", "yh"],
    lstm_w, 14)), lx)
for be in BACKENDS if wanted("lstm_layout1_batched") else ():
    outs = []
    for b in ("4", "2"):
        plan, out = os.path.join(d, f"b{b}.plan"), os.path.join(d, f"out_b{b}_{be}")
        r = subprocess.run([PPCC, path, "-b", b, "-q", "-o", plan], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q", "--backend", be],
                               capture_output=True, text=True)
        if r.returncode:
            failures.append(f"lstm_layout1_batched -b {b} ({be}): exit {r.returncode}: {r.stderr.strip()[-300:]}")
            break
        outs.append([np.load(os.path.join(out, o + ".npy")) for o in ("y", "yh")])
    if len(outs) < 2:
        continue
    if be == "ref" and [a.tobytes() for a in outs[0]] != [a.tobytes() for a in outs[1]]:
        failures.append("lstm_layout1_batched: micro-batches of 2 differ from one batch of 4 on the reference kernels")
    for a, b2 in zip(*outs):
        if not np.allclose(a, b2, rtol=1e-5, atol=1e-6):
            failures.append(f"lstm_layout1_batched ({be}): micro-batches of 2 off one batch of 4 by "
                            f"{np.abs(a - b2).max():.2g}")
d, path = write_case("lstm_batch_on_seq", batch_dynamic(model(
    [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=4, name="lstm")], lx, ["y"], lstm_w, 14)), lx)
r = subprocess.run([PPCC, path, "-b", "2", "-q", "-o", os.path.join(d, "b2.plan")], capture_output=True, text=True)
if r.returncode != 2 or "its input X carries the batch on axis 0, the sequence's axis" not in r.stderr:
    failures.append(f"lstm_batch_on_seq: ppcc exit {r.returncode} (want 2): {r.stderr.strip()[-300:]}")

# PyTorch's nn.LSTM (2 layers, bidirectional, batch_first) exported with a dynamic batch: ppcc
# -b 2 follows the batch through it (the batch analysis), -pp 2 gives the bytes of -pp 1, and 6
# samples match onnxruntime and PyTorch. Once with zero initial states (constants), once with
# initial states computed from a second input, [N, 4, 16].
try:
    import warnings

    import torch
except ImportError:
    torch = None
    print("ops: torch is not importable: the PyTorch LSTM cases are skipped")


def torch_lstm(name, with_h0):
    global n_cases
    if ONLY is not None:
        return
    n_cases += 1
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x, h0=None):
            st = None
            if h0 is not None:
                h = h0.permute(1, 0, 2).contiguous()
                st = (h, torch.tanh(h))
            y, (hn, _) = self.lstm(x, st)
            return y, hn.permute(1, 0, 2).reshape(x.shape[0], -1)

    m = M().eval()
    feeds = {"x": rng.standard_normal((6, 10, 8)).astype(np.float32)}
    if with_h0:
        feeds["h0"] = rng.uniform(-1, 1, (6, 4, 16)).astype(np.float32)
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    args = tuple(torch.from_numpy(v[:2]) for v in feeds.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, args, path, input_names=list(feeds), output_names=["y", "h"], opset_version=14,
                          dynamic_axes={**{k: {0: "N"} for k in feeds}, "y": {0: "N"}, "h": {0: "N"}})
    for k, v in feeds.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    with torch.no_grad():
        ref = [t.numpy() for t in m(*(torch.from_numpy(v) for v in feeds.values()))]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(["y", "h"], feeds)
    got = {}
    for pp in (1, 2):
        plan, out = os.path.join(d, f"pp{pp}.plan"), os.path.join(d, f"out{pp}")
        r = subprocess.run([PPCC, path, "-b", "2", "-pp", str(pp), "-q", "-o", plan], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q"], capture_output=True, text=True)
        if r.returncode:
            failures.append(f"{name} -pp {pp}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            return
        got[pp] = [np.load(os.path.join(out, o + ".npy")) for o in ("y", "h")]
    for o, g1, g2, w, t in zip(("y", "h"), got[1], got[2], want, ref):
        for who, x in (("onnxruntime", w), ("PyTorch", t)):
            bad = close(g1, x, 1e-4, 1e-5)
            if bad:
                failures.append(f"{name}: {o} against {who}: {bad}")
        if g1.tobytes() != g2.tobytes():
            failures.append(f"{name}: {o} at -pp 2 differs from -pp 1")
    print(f"ops: {name}: max |pprt - onnxruntime| " +
          ", ".join(f"{o} {np.abs(g - w).max():.2g}" for o, g, w in zip("yh", got[1], want)) +
          "; |pprt - PyTorch| " + ", ".join(f"{o} {np.abs(g - t).max():.2g}" for o, g, t in zip("yh", got[1], ref)))


if torch is not None:
    torch_lstm("lstm_torch", False)
    torch_lstm("lstm_torch_h0", True)

# ---- refused ---------------------------------------------------------------------------------------
refused("attention_f16", [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att")],
        {k: f32(1, 2, 3, 4).astype(np.float16) for k in "qkv"}, ["y"],
        "node 'att' (#0, Attention): input Q has element type f16; only f32 is supported", opset=23)
# TopK with NaN: onnxruntime's and PyTorch's order, NaN above every number (+inf included), so largest gives
# the NaNs first and smallest last; equal keys (the NaNs among themselves, -0 with +0) by lower index, which is
# onnxruntime's (sorted=1) order. K is a constant, so cuda-emu runs TopK on its own kernel. Own generator, so
# the cases above and below draw what they drew before.
def topk_np(axis, k, largest):
    """TopK by a stable NumPy sort of (NaN flag, value with -0 as +0, index)."""
    def f(feeds):
        xm = np.moveaxis(feeds["x"], axis, -1)
        isn = np.isnan(xm)
        v = np.where(isn, 0, xm) + 0.0  # -0 -> +0
        pos = np.broadcast_to(np.arange(xm.shape[-1]), xm.shape)
        idx = np.lexsort((pos, -v, ~isn) if largest else (pos, v, isn), axis=-1)[..., :k]
        return [np.moveaxis(np.take_along_axis(xm, idx, -1), -1, axis), np.moveaxis(idx, -1, axis)]
    return f


tk_rng = np.random.default_rng(2024)
nan, inf = np.nan, np.inf
tk_rows = np.array([[1, nan, 3, nan, 2, -inf, inf],  # the issue's line, infinities after it
                    [nan] * 7,  # only NaN: indices 0..k-1 either way
                    [0, -0.0, 2, nan, -0.0, 2, 0],  # ties and signed zeros beside one NaN
                    [-inf, nan, -inf, inf, nan, inf, -nan]])  # NaN, -NaN and infinities tied
tk_pool = np.array([nan, -nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.5])
case("topk_nan_issue", [helper.make_node("TopK", ["x", "k"], ["v", "i"])],
     {"x": np.array([1, nan, 3, nan, 2], np.float32)}, ["v", "i"], inits={"k": np.array([2], np.int64)},
     numpy_ref=lambda f: [np.array([nan, nan], np.float32), np.array([1, 3])])
for dt in (np.float32, np.float64):
    tk_3d = tk_rng.choice(tk_pool, size=(2, 7, 3))
    for shape_name, x, axis, k in (("rows", tk_rows, -1, 2), ("rows", tk_rows, 1, 5), ("cols", tk_rows.T.copy(), 0, 3),
                                   ("mid", tk_3d, 1, 7), ("mid", tk_3d, 1, 1)):
        for largest in (1, 0):
            case(f"topk_nan_{np.dtype(dt).name}_{shape_name}_axis{axis}_k{k}_{'largest' if largest else 'smallest'}",
                 [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)],
                 {"x": x.astype(dt)}, ["v", "i"], inits={"k": np.array([k], np.int64)},
                 numpy_ref=topk_np(axis, k, largest))
# sorted=0: onnxruntime picks the same elements in an order ONNX leaves open; pprt returns them sorted
for largest in (1, 0):
    name = f"topk_nan_unsorted_{'largest' if largest else 'smallest'}"
    feeds = {"x": tk_rows.astype(np.float32)}
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest, sorted=0)
    case(name, [node], feeds, ["v", "i"], inits={"k": np.array([3], np.int64)}, oracle=topk_np(-1, 3, largest))
    if wanted(name):
        got = ort_run(model([node], feeds, ["v", "i"], inits={"k": np.array([3], np.int64)}), feeds, ["v", "i"])[1]
        if not np.array_equal(np.sort(got, -1), np.sort(topk_np(-1, 3, largest)(feeds)[1], -1)):
            failures.append(f"{name}: onnxruntime's sorted=0 picks other elements: {got.tolist()}")


refused("rotary_3d_no_heads", [helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rope")],
        {"x": f32(1, 3, 8), "c": f32(1, 3, 4), "s": f32(1, 3, 4)}, ["y"],
        "node 'rope' (#0, RotaryEmbedding): attribute 'num_heads' is required for 3-D inputs", opset=23)
refused("split_to_sequence_data_split", [helper.make_node("SplitToSequence", ["x", "sp"], ["s"], name="sts"),
                                         helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        {"x": f32(4, 2), "sp": np.array([1, 3], np.int64)}, ["y"],
        "node 'sts' (#0, SplitToSequence): input split is not known at compile time")
refused("scatter_elements_out_of_range", [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="sc")],
        {"d": f32(2, 2), "i": np.array([[0, 5]], np.int64), "u": f32(1, 2)}, ["y"],
        "node 'sc' (ScatterElements): ScatterElements: index 5 (at 1) is out of range [-2, 2)", tool="pprt")
refused("lstm_bad_activation", [helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="lstm", hidden_size=2,
                                             activations=["Sigmoid", "Gelu", "Tanh"])],
        {"x": f32(3, 1, 2), "w": f32(1, 8, 2), "r": f32(1, 8, 2)}, ["y"],
        "node 'lstm' (#0, LSTM): attribute 'activations': 'Gelu' (name 1) is not supported")
refused("gru_bad_w", [helper.make_node("GRU", ["x", "w", "r"], ["y"], name="gru", hidden_size=2,
                                      direction="bidirectional")],
        {"x": f32(3, 1, 2), "w": f32(1, 6, 2), "r": f32(2, 6, 2)}, ["y"],
        "node 'gru' (#0, GRU): input W (bidirectional, hidden_size 2) has shape [1,6,2], expected [2,6,2]")
refused("rnn_bad_lens", [helper.make_node("RNN", ["x", "w", "r", "", "n"], ["y"], name="rnn", hidden_size=2)],
        {"x": f32(3, 2, 2), "w": f32(1, 2, 2), "r": f32(1, 2, 2), "n": np.array([3, 4], np.int32)}, ["y"],
        "node 'rnn' (RNN): input sequence_lens[1] = 4 is outside [0, 3] (the sequence length)", tool="pprt")
if "cuda-emu" in BACKENDS:  # the recurrence's own kernel checks the lengths on the device
    refused("rnn_bad_lens_cuda", [helper.make_node("RNN", ["x", "w", "r", "", "n"], ["y"], name="rnn", hidden_size=2)],
            {"x": f32(3, 2, 2), "w": f32(1, 2, 2), "r": f32(1, 2, 2), "n": np.array([3, -1], np.int32)}, ["y"],
            "node 'rnn' (RNN): a sequence_lens value is outside [0, 3]", tool="pprt", backend="cuda-emu")

print(f"ops: {n_cases} cases on {', '.join(BACKENDS)}, {len(failures)} failure(s)")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
