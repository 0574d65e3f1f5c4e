#!/usr/bin/env python3
"""Random attributes and shapes for single-op models, valid and not: ppcc and
pprt must exit 0 or 2 (2 with an 'error:' line), never crash, hang or trip a
sanitizer; where both ppcc/pprt and onnxruntime run a model, their outputs
must agree (rtol 1e-4, atol 1e-5; NaN where the other has NaN).

The models are built with onnx.helper without onnx.checker (many are invalid
on purpose); inputs are finite random values. Every case runs on each backend
pprt has (ref, dnnl, cuda-emu): the CUDA planner must hand what it cannot
take to the host fallback, whose reference kernel then says why. A fixed seed
(--seed), so a failure reproduces; each failing case's folder is kept.
Usage: op_attrs.py WORKDIR [--per-op N] [--seed S] [--only OP]
(env: PPCC, PPRT). Exit 0: no failure; 1: failures (listed); 77: no onnx."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper
except ImportError as e:
    print(f"op_attrs: {e}; skipped")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("work")
ap.add_argument("--per-op", type=int, default=int(os.environ.get("PP_ATTRS_PER_OP", "8")))
ap.add_argument("--seed", type=int, default=20261127)
ap.add_argument("--only", default=None)
args = ap.parse_args()
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
os.makedirs(args.work, exist_ok=True)
rng = np.random.default_rng(args.seed)
BACKENDS = testlib.backends(PPRT)
NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.INT64: np.int64, TP.INT32: np.int32, TP.INT8: np.int8,
      TP.UINT8: np.uint8}
failures, counts = [], {"cases": 0, "ran": 0, "refused": 0, "compared": 0, "ort_shape": 0}


def pick(*xs):
    return xs[int(rng.integers(len(xs)))]


def shape(lo_rank, hi_rank, lo=1, hi=5):
    return [int(d) for d in rng.integers(lo, hi + 1, int(rng.integers(lo_rank, hi_rank + 1)))]


def fvals(shp, dt=np.float32):
    return rng.uniform(-3, 3, shp).astype(dt)


def inferred_shape(m):
    """y's shape by ONNX's shape inference, or None where it has none."""
    try:
        t = onnx.shape_inference.infer_shapes(m).graph.output[0].type.tensor_type
        if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
            return None
        return tuple(d.dim_value for d in t.shape.dim)
    except Exception:
        return None


def run_case(name, node, feeds, inits, out_type, opset, compare=True, oracle="onnxruntime"):
    """One model: node over graph inputs `feeds` (name -> array) and
    initializers `inits`; one output 'y' of element type out_type. compare:
    False where pprt departs from onnxruntime on purpose (docs/design-notes.md);
    oracle "reference": onnx's reference evaluator, where onnxruntime departs
    from the definition (design notes)."""
    counts["cases"] += 1
    d = os.path.join(args.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "data"))
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for k, v in feeds.items()]
    g = helper.make_graph([node], name, ins, [helper.make_tensor_value_info("y", out_type, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    for k, v in feeds.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    bad = []

    def check(tool, r):
        if r is None:
            bad.append(f"{tool}: hung")
            return False
        crash = [w for w in ("Sanitizer", "runtime error:", "Segmentation", "Aborted") if w in r.stderr]
        if r.returncode not in (0, 2) or crash or (r.returncode == 2 and "error:" not in r.stderr):
            bad.append(f"{tool}: exit {r.returncode}: {r.stderr.strip()[-300:]!r}")
            return False
        return r.returncode == 0

    def run(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return None

    plan = os.path.join(d, "p.plan")
    r = run([PPCC, path, "-b", "0", "-q", "-o", plan])
    ok = check("ppcc", r)
    if os.environ.get("PP_ATTRS_WHY") and r is not None and r.returncode == 2:
        print(f"{name}: {r.stderr.strip()[-200:]}")
    want = None
    try:
        if not compare:
            raise ValueError("not compared")
        if oracle == "reference":
            from onnx.reference import ReferenceEvaluator
            with np.errstate(all="ignore"):
                want = ReferenceEvaluator(m).run(None, feeds)[0]
        else:
            so = ort.SessionOptions()
            so.log_severity_level = 4
            want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    except Exception:
        want = None
    if ok:
        counts["ran"] += 1
        for be in BACKENDS:
            out = os.path.join(d, "out_" + be)
            if not check(f"pprt --backend {be}", run([PPRT, plan, os.path.join(d, "data"), "-q", "-o", out,
                                                       "--backend", be])):
                continue
            if want is None or not os.path.exists(os.path.join(out, "y.npy")):
                continue
            got = np.load(os.path.join(out, "y.npy"))
            counts["compared"] += 1
            w = np.asarray(want)
            if got.shape != w.shape:
                if got.shape == inferred_shape(m):  # onnxruntime's kernel against ONNX's own shape inference
                    counts["ort_shape"] += 1
                    continue
                bad.append(f"{be}: shape {got.shape}, onnxruntime {w.shape}")
            elif got.dtype.kind == "f":
                if not np.allclose(got, w.astype(got.dtype), rtol=1e-4, atol=1e-5, equal_nan=True):
                    i = np.unravel_index(np.argmax(np.abs(np.nan_to_num(got - w))), got.shape)
                    bad.append(f"{be}: differs from onnxruntime, first large at {i}: {got[i]} vs {w[i]}")
            elif not np.array_equal(got, w):
                bad.append(f"{be}: differs from onnxruntime")
    else:
        counts["refused"] += 1
    if bad:
        failures.append(f"{name}: " + "; ".join(bad))
    else:
        shutil.rmtree(d, ignore_errors=True)


def axis_in(rank):
    return int(rng.integers(-rank - 1, rank + 1))  # one past either end: refused


def case_hardmax(i):
    s = shape(1, 4)
    run_case(f"hardmax_{i}", helper.make_node("Hardmax", ["x"], ["y"], axis=axis_in(len(s))), {"x": fvals(s)}, {},
             TP.FLOAT, pick(11, 13))


def case_lpnorm(i):
    s = shape(1, 4)
    dt = pick(np.float32, np.float64)
    run_case(f"lpnorm_{i}", helper.make_node("LpNormalization", ["x"], ["y"], axis=axis_in(len(s)), p=pick(0, 1, 2, 3)),
             {"x": fvals(s, dt)}, {}, TP.FLOAT if dt == np.float32 else TP.DOUBLE, pick(1, 22))


def pool_attrs(k):
    a = {"kernel_shape": [int(v) for v in rng.integers(0, 5, k)]}
    if rng.random() < 0.5:
        a["strides"] = [int(v) for v in rng.integers(0, 4, k)]
    if rng.random() < 0.4:
        a["auto_pad"] = pick("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "BOGUS")
    elif rng.random() < 0.6:
        a["pads"] = [int(v) for v in rng.integers(0, 4, 2 * k)]
    if rng.random() < 0.4:
        a["dilations"] = [int(v) for v in rng.integers(0, 3, k)]
    if rng.random() < 0.3:
        a["ceil_mode"] = 1
    return a


def case_lppool(i):
    k = int(rng.integers(1, 4))
    s = shape(2, 2, 1, 3) + shape(k, k, 1, 7)
    a = pool_attrs(k if rng.random() < 0.9 else k + 1)
    a["p"] = pick(0, 1, 2, 3)
    run_case(f"lppool_{i}", helper.make_node("LpPool", ["x"], ["y"], **a), {"x": fvals(s)}, {}, TP.FLOAT, pick(11, 18))


def case_onehot(i):
    s = shape(0, 3)
    it = pick(np.int64, np.int32, np.float32, np.int8)
    idx = rng.integers(-6, 7, s).astype(it)
    depth = np.array(pick(-1, 0, 1, 3, 5, 6), pick(np.int64, np.float32))
    vt = pick(np.float32, np.int64, np.int32)
    vals = np.array([0, 1] if rng.random() < 0.9 else [0, 1, 2], vt)
    r = len(s) + 1
    run_case(f"onehot_{i}", helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis_in(r)),
             {"i": idx}, {"depth": depth, "values": vals}, helper.np_dtype_to_tensor_dtype(np.dtype(vt)), 11)


def case_affinegrid(i):
    k = pick(2, 3)
    n = int(rng.integers(1, 4))
    size = [n, int(rng.integers(1, 4))] + [int(v) for v in rng.integers(-1, 6, k)]
    if rng.random() < 0.2:
        size = size[:-1]
    tshape = [n if rng.random() < 0.9 else n + 1, k, k + 1] if rng.random() < 0.9 else [n, k + 1, k]
    align = pick(0, 1)
    # a one-pixel axis under align_corners: at 0 as PyTorch, where onnxruntime puts it at 1 (design notes)
    run_case(f"affinegrid_{i}", helper.make_node("AffineGrid", ["theta", "size"], ["y"], align_corners=align),
             {"theta": fvals(tshape)}, {"size": np.array(size, np.int64)}, TP.FLOAT, 20,
             compare=not (align and 1 in size[2:]))


def case_gridsample(i):
    k = pick(1, 2, 3)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    x = [n, c] + shape(k, k, 1, 5)
    g = [n if rng.random() < 0.9 else n + 1] + shape(k, k, 1, 4) + [k if rng.random() < 0.9 else k + 1]
    mode = pick("linear", "nearest", "cubic", "bilinear", "bicubic", "nope")
    a = dict(mode=mode, padding_mode=pick("zeros", "border", "reflection", "nope"), align_corners=pick(0, 1))
    run_case(f"gridsample_{i}", helper.make_node("GridSample", ["x", "grid"], ["y"], **a),
             {"x": fvals(x), "grid": fvals(g) / 2}, {}, TP.FLOAT, 20 if k != 2 or mode in ("linear", "cubic") else 16)


def case_cumprod(i):
    s = shape(1, 3)
    run_case(f"cumprod_{i}", helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=pick(0, 1), reverse=pick(0, 1)),
             {"x": fvals(s) / 2}, {"axis": np.array(axis_in(len(s)), pick(np.int64, np.int32))}, TP.FLOAT, 26)


def case_quant(i):
    s = shape(1, 3, 1, 6)
    axis = axis_in(len(s))
    a = {"axis": axis}
    sshape = [] if rng.random() < 0.3 else [int(rng.integers(1, 7))]
    if rng.random() < 0.3:
        a["block_size"] = int(rng.integers(0, 4))
        sshape = list(s)
        ax = axis % len(s) if -len(s) <= axis < len(s) else 0
        sshape[ax] = int(rng.integers(1, 4))
    scale = rng.uniform(0.05, 1, sshape).astype(np.float32)
    zt = pick(np.int8, np.uint8)
    zp = rng.integers(0, 20, sshape).astype(zt)
    if rng.random() < 0.5:
        run_case(f"quantize_{i}", helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **a), {"x": fvals(s)},
                 {"s": scale, "z": zp}, helper.np_dtype_to_tensor_dtype(np.dtype(zt)), 21)
    else:
        run_case(f"dequantize_{i}", helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **a),
                 {"x": rng.integers(0, 100, s).astype(zt)}, {"s": scale, "z": zp}, TP.FLOAT, 21)


def case_centercroppad(i):
    s = shape(1, 4, 0 if rng.random() < 0.2 else 1, 6)
    na = int(rng.integers(0, len(s) + 2))
    axes = [int(a) for a in rng.integers(-len(s) - 1, len(s) + 1, na)]
    dt = pick(np.float32, np.int64, np.int8)
    with_axes = rng.random() < 0.7
    cnt = (len(axes) if with_axes else len(s)) + (1 if rng.random() < 0.1 else 0)
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"])
    if rng.random() < 0.15:  # an attribute CenterCropPad does not have: ignored
        node.attribute.append(helper.make_attribute("mode", pick("edge", "reflect", "wrap")))
    if with_axes:
        node.attribute.append(helper.make_attribute("axes", axes, attr_type=onnx.AttributeProto.INTS))
    run_case(f"centercroppad_{i}", node,
             {"x": (fvals(s) * 10).astype(dt)},
             {"shape": rng.integers(-1 if rng.random() < 0.1 else 0, 8, cnt).astype(pick(np.int64, np.int32))},
             helper.np_dtype_to_tensor_dtype(np.dtype(dt)), 18)


def case_col2im(i):
    k = pick(1, 2, 3)
    img = [int(v) for v in rng.integers(1, 7, k)]
    blk = [int(v) for v in rng.integers(1, 4, k)]
    a = {}
    if rng.random() < 0.6:
        a["strides"] = [int(v) for v in rng.integers(0 if rng.random() < 0.1 else 1, 3, k)]
    if rng.random() < 0.6:
        a["dilations"] = [int(v) for v in rng.integers(1, 3, k)]
    if rng.random() < 0.6:
        a["pads"] = [int(v) for v in rng.integers(0, 3, 2 * k + (1 if rng.random() < 0.1 else 0))]
    st, dl = a.get("strides", [1] * k), a.get("dilations", [1] * k)
    pd = a.get("pads", [0] * (2 * k))
    L = 1
    for d in range(k):  # blocks as the definition counts them (a wrong count some of the time)
        span = img[d] + pd[d] + pd[k + d if k + d < len(pd) else d] - dl[d] * (blk[d] - 1) - 1
        L *= max(span // max(st[d], 1) + 1, 0)
    L += 1 if rng.random() < 0.1 else 0
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    kvol = int(np.prod(blk))
    dt = pick(np.float32, np.float64)
    run_case(f"col2im_{i}", helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], **a),
             {"x": fvals([n, c * kvol, max(L, 0)], dt)},
             {"image_shape": np.array(img, np.int64), "block_shape": np.array(blk, np.int64)},
             TP.FLOAT if dt == np.float32 else TP.DOUBLE, 18,
             # onnxruntime 1.32 places dilated blocks with pads (and 3-D ones) elsewhere than the definition, and has no double Col2Im
             oracle="reference" if max(dl) > 1 or dt == np.float64 else "onnxruntime")


def case_pad(i):
    s = shape(1, 4, 0 if rng.random() < 0.2 else 1, 5)  # an empty input now and then
    mode = pick("constant", "reflect", "edge", "wrap")
    pads = [int(v) for v in rng.integers(-3, 4, 2 * len(s))]  # negative: cut off, to nothing some of the time
    run_case(f"pad_{i}", helper.make_node("Pad", ["x", "p"], ["y"], mode=mode), {"x": fvals(s)},
             {"p": np.array(pads, np.int64)}, TP.FLOAT, 18)


def ints_attr(node, name, vals):
    node.attribute.append(helper.make_attribute(name, [int(v) for v in vals], attr_type=onnx.AttributeProto.INTS))
    return node


def case_slice(i):
    s = shape(1, 4, 1, 6)
    n = int(rng.integers(1, len(s) + 1))
    ax = [int(a) - (len(s) if rng.random() < 0.3 else 0) for a in rng.permutation(len(s))[:n]]
    if rng.random() < 0.1:
        ax[-1] = ax[0]  # an axis twice: refused
    st = [int(v) for v in rng.integers(-8, 8, n)]
    en = [int(pick(v, 2**62, -2**62)) for v in rng.integers(-8, 8, n)]
    sp = [int(pick(1, 1, 2, 3, -1, -2, -1 if rng.random() < 0.9 else 0)) for _ in range(n)]
    ins = {"starts": np.array(st, np.int64), "ends": np.array(en, np.int64), "axes": np.array(ax, np.int64),
           "steps": np.array(sp, np.int64)}
    run_case(f"slice_{i}", helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"]), {"x": fvals(s)},
             ins, TP.FLOAT, 13)


def case_gather(i):
    s = shape(1, 3, 1, 5)
    ax = axis_in(len(s))
    d = s[ax] if -len(s) <= ax < len(s) else 3
    idx = rng.integers(-d - (1 if rng.random() < 0.15 else 0), d, shape(0, 2, 1, 3))
    run_case(f"gather_{i}", helper.make_node("Gather", ["x", "i"], ["y"], axis=ax), {"x": fvals(s)},
             {"i": idx.astype(pick(np.int64, np.int32))}, TP.FLOAT, 13)


def case_transpose(i):
    s = shape(1, 5, 1, 4)
    perm = list(rng.permutation(len(s)))
    if rng.random() < 0.15:
        perm[0] = perm[-1] if len(perm) > 1 else 5
    run_case(f"transpose_{i}", ints_attr(helper.make_node("Transpose", ["x"], ["y"]), "perm", perm),
             {"x": fvals(s)}, {}, TP.FLOAT, 13)


def case_reduce(i):
    s = shape(1, 4, 1, 5)
    op = pick("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")
    axes = sorted(set(int(a) for a in rng.integers(-len(s), len(s) + (1 if rng.random() < 0.1 else 0),
                                                   int(rng.integers(0, len(s) + 1)))))
    x = fvals(s)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    a = {"keepdims": pick(0, 1)}
    if rng.random() < 0.3:
        a["noop_with_empty_axes"] = pick(0, 1)
    opset = 18
    run_case(f"reduce_{i}", helper.make_node(op, ["x", "axes"] if axes else ["x"], ["y"], **a), {"x": x},
             {"axes": np.array(axes, np.int64)} if axes else {}, TP.FLOAT, opset)


def case_softmax(i):
    s = shape(1, 4)
    run_case(f"softmax_{i}", helper.make_node(pick("Softmax", "LogSoftmax"), ["x"], ["y"], axis=axis_in(len(s))),
             {"x": fvals(s)}, {}, TP.FLOAT, pick(11, 13))


def case_topk(i):
    s = shape(1, 3, 1, 6)
    ax = axis_in(len(s))
    d = s[ax] if -len(s) <= ax < len(s) else 3
    k = int(rng.integers(0, d + 2))
    run_case(f"topk_{i}", helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=ax, largest=pick(0, 1), sorted=1),
             {"x": fvals(s)}, {"k": np.array([k], np.int64)}, TP.FLOAT, 11)


def case_split(i):
    s = shape(1, 3, 1, 7)
    ax = axis_in(len(s))
    d = s[ax] if -len(s) <= ax < len(s) else 3
    parts = [int(v) for v in rng.multinomial(d, [0.5, 0.5])] if rng.random() < 0.8 else [d, 1]
    run_case(f"split_{i}", helper.make_node("Split", ["x", "split"], ["y", "z"], axis=ax), {"x": fvals(s)},
             {"split": np.array(parts, np.int64)}, TP.FLOAT, 13)


def case_expand_tile(i):
    s = shape(1, 3, 1, 3)
    if rng.random() < 0.5:
        tgt = [int(pick(1, d, 2 * d, 3)) for d in s] if rng.random() < 0.8 else [2] + [int(d) for d in s]
        run_case(f"expand_{i}", helper.make_node("Expand", ["x", "shape"], ["y"]), {"x": fvals(s)},
                 {"shape": np.array(tgt, np.int64)}, TP.FLOAT, 13)
    else:
        rep = [int(v) for v in rng.integers(0 if rng.random() < 0.1 else 1, 4, len(s) + (rng.random() < 0.1))]
        run_case(f"tile_{i}", helper.make_node("Tile", ["x", "r"], ["y"]), {"x": fvals(s)},
                 {"r": np.array(rep, np.int64)}, TP.FLOAT, 13)


def case_conv(i):
    k = pick(1, 2, 3)
    n, g = int(rng.integers(1, 3)), pick(1, 1, 2, 3)
    c, oc = g * int(rng.integers(1, 3)), g * int(rng.integers(1, 3))
    ks = [int(v) for v in rng.integers(1, 4, k)]
    x = [n, c] + [int(v) for v in rng.integers(1, 8, k)]
    a = {"group": g if rng.random() < 0.95 else g + 1}
    for name, lo, hi, cnt in (("strides", 1, 3, k), ("dilations", 1, 3, k), ("pads", 0, 3, 2 * k)):
        if rng.random() < 0.5:
            a[name] = [int(v) for v in rng.integers(lo if rng.random() < 0.9 else 0, hi, cnt)]
    if rng.random() < 0.2:
        a["auto_pad"] = pick("SAME_UPPER", "SAME_LOWER", "VALID")
        a.pop("pads", None)
    ins = {"w": fvals([oc, c // g] + ks) / 3}
    names = ["x", "w"]
    if rng.random() < 0.5:
        ins["b"] = fvals([oc])
        names.append("b")
    op = pick("Conv", "Conv", "ConvTranspose")
    if op == "ConvTranspose":
        ins["w"] = fvals([c, oc // g] + ks) / 3
        if "b" in ins:
            ins["b"] = fvals([oc // g * g])
        if rng.random() < 0.3 and "strides" in a:
            a["output_padding"] = [int(v) for v in rng.integers(0, 2, k)]
    run_case(f"conv_{i}", helper.make_node(op, names, ["y"], **a), {"x": fvals(x)},
             {kk: v for kk, v in ins.items()}, TP.FLOAT, 13)


def case_pools(i):
    k = int(rng.integers(1, 4))
    s = shape(2, 2, 1, 3) + shape(k, k, 1, 7)
    a = pool_attrs(k)
    op = pick("MaxPool", "AveragePool")
    if op == "AveragePool" and rng.random() < 0.5:
        a["count_include_pad"] = 1
    a.pop("dilations", None) if op == "AveragePool" and rng.random() < 0.5 else None
    run_case(f"pool_{i}", helper.make_node(op, ["x"], ["y"], **a), {"x": fvals(s)}, {}, TP.FLOAT, pick(12, 19))


def case_resize(i):
    s = [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + shape(1, 2, 1, 6)
    mode = pick("nearest", "linear", "cubic")
    a = dict(mode=mode, coordinate_transformation_mode=pick("half_pixel", "asymmetric", "align_corners",
                                                              "pytorch_half_pixel", "tf_half_pixel_for_nearest"))
    if mode == "nearest":
        a["nearest_mode"] = pick("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
    if mode == "cubic":
        a["cubic_coeff_a"] = pick(-0.75, -0.5)
        a["exclude_outside"] = pick(0, 1)
    if rng.random() < 0.5:
        sizes = [s[0], s[1]] + [int(v) for v in rng.integers(1, 10, len(s) - 2)]
        ins = {"roi": np.array([], np.float32), "scales": np.array([], np.float32), "sizes": np.array(sizes, np.int64)}
    else:
        sc = [1.0, 1.0] + [float(pick(0.5, 0.75, 1.0, 1.5, 2.0, 3.0)) for _ in s[2:]]
        ins = {"roi": np.array([], np.float32), "scales": np.array(sc, np.float32)}
    run_case(f"resize_{i}", helper.make_node("Resize", ["x"] + list(ins), ["y"], **a), {"x": fvals(s)}, ins,
             TP.FLOAT, 13)


def case_d2s(i):
    b = pick(1, 2, 3)
    s = [int(rng.integers(1, 3)), b * b * int(rng.integers(1, 3)) + (1 if rng.random() < 0.1 else 0),
         int(rng.integers(1, 4)), int(rng.integers(1, 4))]
    if rng.random() < 0.5:
        run_case(f"d2s_{i}", helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=b, mode=pick("DCR", "CRD")),
                 {"x": fvals(s)}, {}, TP.FLOAT, 13)
    else:
        s2 = [s[0], s[1], s[2] * b + (1 if rng.random() < 0.1 else 0), s[3] * b]
        run_case(f"s2d_{i}", helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=b), {"x": fvals(s2)}, {},
                 TP.FLOAT, 13)


def case_elements(i):
    s = shape(1, 3, 1, 5)
    ax = axis_in(len(s))
    a = ax if -len(s) <= ax < len(s) else 0
    ishape = [int(rng.integers(1, d + 1)) for d in s]
    d = s[a]
    idx = rng.integers(-d - (1 if rng.random() < 0.1 else 0), d, ishape).astype(np.int64)
    if rng.random() < 0.5:
        run_case(f"gatherel_{i}", helper.make_node("GatherElements", ["x", "i"], ["y"], axis=ax), {"x": fvals(s)},
                 {"i": idx}, TP.FLOAT, 13)
    else:
        red = pick("none", "add", "mul", "max", "min")
        if red == "none":  # distinct targets along the axis, so the order of the updates does not matter
            idx = np.argsort(rng.random(ishape), axis=a)[tuple(slice(0, e) for e in ishape)] % d
            idx = np.take(np.argsort(rng.random(s), axis=a), np.arange(ishape[a]), axis=a)
            idx = idx[tuple(slice(0, e) for e in ishape)].astype(np.int64)
        run_case(f"scatterel_{i}", helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=ax, reduction=red),
                 {"x": fvals(s)}, {"i": idx, "u": fvals(ishape)}, TP.FLOAT, 18)


def case_trilu_cumsum(i):
    s = shape(1, 4, 1, 5)
    if rng.random() < 0.5:
        run_case(f"trilu_{i}", helper.make_node("Trilu", ["x", "k"], ["y"], upper=pick(0, 1)), {"x": fvals(s)},
                 {"k": np.array(int(rng.integers(-6, 7)), np.int64)}, TP.FLOAT, 14)
    else:
        run_case(f"cumsum_{i}", helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=pick(0, 1),
                                                  reverse=pick(0, 1)),
                 {"x": fvals(s)}, {"axis": np.array(axis_in(len(s)), np.int64)}, TP.FLOAT, 14)


def case_einsum(i):
    eq, shapes = pick(("ij,jk->ik", ([3, 4], [4, 5])), ("bij,bjk->bik", ([2, 3, 4], [2, 4, 2])),
                      ("ii->i", ([4, 4],)), ("ij->", ([3, 4],)), ("ij,ij->ij", ([3, 4], [3, 4])),
                      ("bhid,bhjd->bhij", ([1, 2, 3, 4], [1, 2, 5, 4])), ("i,j->ij", ([3], [4])),
                      ("ij,jk,kl->il", ([2, 3], [3, 4], [4, 2])), ("ij,kj->ik", ([3, 4], [5, 4])),
                      ("...ij,...jk->...ik", ([2, 3, 4], [4, 2])), ("ij,jk->ik", ([3, 4], [5, 2])))
    names = [f"x{k}" for k in range(len(shapes))]
    run_case(f"einsum_{i}", helper.make_node("Einsum", names, ["y"], equation=eq),
             {n: fvals(sh) for n, sh in zip(names, shapes)}, {}, TP.FLOAT, 12)


CASES = {"Hardmax": case_hardmax, "LpNormalization": case_lpnorm, "LpPool": case_lppool, "OneHot": case_onehot,
         "AffineGrid": case_affinegrid, "GridSample": case_gridsample, "CumProd": case_cumprod,
         "QuantizeLinear": case_quant, "CenterCropPad": case_centercroppad, "Col2Im": case_col2im,
         "Pad": case_pad, "Slice": case_slice, "Gather": case_gather, "Transpose": case_transpose,
         "Reduce": case_reduce, "Softmax": case_softmax, "TopK": case_topk, "Split": case_split,
         "ExpandTile": case_expand_tile, "Conv": case_conv, "Pools": case_pools, "Resize": case_resize,
         "DepthSpace": case_d2s, "Elements": case_elements, "TriluCumSum": case_trilu_cumsum, "Einsum": case_einsum}
for op, fn in CASES.items():
    if args.only and args.only != op:
        continue
    for i in range(args.per_op):
        fn(i)
for f in failures:
    print("FAIL", f)
print(f"op_attrs: {counts['cases']} models ({counts['ran']} compiled, {counts['refused']} refused by ppcc), "
      f"{counts['compared']} outputs compared with onnxruntime on {', '.join(BACKENDS)} ({counts['ort_shape']} where "
      f"onnxruntime's output shape is not ONNX's inferred one, as pprt's is); {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
