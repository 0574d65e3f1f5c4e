#!/usr/bin/env python3
"""Gradient rules under random attributes, against central finite differences.

tests/train/grads.py checks each rule on cases written by hand against
PyTorch autograd; this draws the attributes and shapes at random (a fixed
seed), as tests/bad/op_attrs.py does for the forward kernels, and needs no
torch: the oracle is the model's own loss evaluated in float64 by onnx's
reference evaluator (onnx.reference), differentiated by central differences,
where onnxruntime's float32 forward agrees with it (onnx 1.22's reference
ConvTranspose with dilations does not: such draws are skipped and counted),
and where the differences with steps 1e-6 and 1e-5 agree (its Erf computes
in float32 whatever the input type: such elements are left out and
counted).

Each case is one op over y = OP(x + p, w...): p a weight of x's shape (so
the op's input gradient is a weight's gradient), w the op's own float
weights (a Conv's filter and bias); the loss is ppcc's `mse:y` against a
random target. ppcc --train compiles it (a case ppcc refuses with exit 2,
an op or attribute without a gradient rule, is counted, not failed); pprt
runs one step on each backend it has (ref, dnnl, cuda-emu: the CUDA step
list's backward kernels on the host); every weight's gradient must match
the finite difference (eps 1e-6 in float64) at up to 8 drawn elements within
    |g - fd| <= 1e-3 |fd| + 1e-4 S
(float32 against float64), S the largest of: that weight's largest |fd|,
1e-3 of the case's largest, and the largest gradient the loss sends y (so
a gradient that is 0 by the math, a Softmax over an axis of 1, compares
its rounding on the scale of the gradients around it). Families: Conv and ConvTranspose (strides,
dilations, pads, groups, 1-3 spatial dims), MaxPool and AveragePool
(kernels, strides, pads, ceil_mode, count_include_pad), Pad (constant with
negative pads, reflect, edge, wrap), Slice (negative starts and steps), Gather (any axis,
negative indices, repeats), Transpose, ReduceSum and ReduceMean (any axes,
keepdims), Softmax and LogSoftmax (any axis), Split, Expand and Tile,
Einsum, and more (FAMILIES below: Shrink, Mod with fmod, CenterCropPad,
RotaryEmbedding with and without positions, CastLike, LpPool, LpNormalization,
GridSample with 1 to 3 spatial axes, AffineGrid, CumProd with zeros among them, ScatterElements and ScatterND
under reduction mul, max and min). Every
case runs at -pp 1; where ppcc splits it at -pp 2 too, each
backend's -pp 2 step must give its -pp 1 step's bits.
Usage: grad_fd.py WORK [--per-op N] [--seed S] [--only FAMILY] (env: PPCC, PPRT; PP_FD_PER_OP: at most that
many a family, whatever --per-op says)"""
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
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:
    print(f"grad_fd: {e}; skipped")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("work")
ap.add_argument("--per-op", type=int, default=12)
ap.add_argument("--seed", type=int, default=2026)
ap.add_argument("--only")
args = ap.parse_args()
if os.environ.get("PP_FD_PER_OP"):  # the sanitizer and release variants' cap (tests/build_variant.sh)
    args.per_op = min(args.per_op, int(os.environ["PP_FD_PER_OP"]))
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
BACKENDS = testlib.backends(PPRT)
rng = np.random.default_rng(args.seed)
failures, counts = [], {"cases": 0, "refused": 0, "checked": 0, "elements": 0, "disagree": 0, "split": 0, "imprecise": 0}
worst = [0.0, ""]


def pick(*xs):
    return xs[int(rng.integers(len(xs)))]


def dims(lo_rank, hi_rank, lo=1, hi=5):
    return [int(d) for d in rng.integers(lo, hi + 1, int(rng.integers(lo_rank, hi_rank + 1)))]


def fvals(shp):
    return rng.uniform(-2, 2, shp).astype(np.float32)


def build(name, node, x, weights, consts, opset):
    """the model y = node(x + p, weights..., consts...) in float `dt` (float32 for ppcc, float64 for the
    oracle): x a graph input, p and the float weights initializers, the int constants initializers."""
    def model(dt):
        t = TP.FLOAT if dt == np.float32 else TP.DOUBLE
        add = helper.make_node("Add", ["x", "p"], ["xp"])
        outs = [helper.make_tensor_value_info("y", t, None)]
        inits = [numpy_helper.from_array(np.zeros(x.shape, dt), "p")]
        inits += [numpy_helper.from_array(v.astype(dt), k) for k, v in weights.items()]
        # (a constant named f_*: a float operand of the op in the model's type, RotaryEmbedding's caches)
        inits += [numpy_helper.from_array(v.astype(dt) if k.startswith("f_") else v, k) for k, v in consts.items()]
        g = helper.make_graph([add, node], name, [helper.make_tensor_value_info("x", t, list(x.shape))], outs,
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m
    return model


def run(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None


def oracles_agree(m32, x, y0):
    """onnxruntime's float32 forward against the reference evaluator's float64 one (rtol 1e-4 / atol 1e-4 of
    the largest): onnx 1.22's reference ConvTranspose with dilations gave other values than onnxruntime, torch
    and pprt (which agree), and finite differences of a wrong forward would fail a right gradient. A case where
    onnxruntime does not run is kept."""
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 4
        o = ort.InferenceSession(m32.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    except Exception:
        return True
    big = max(float(np.abs(y0).max()), 1e-6)
    return o.shape == y0.shape and bool(np.all(np.abs(o - y0) <= 1e-4 * np.abs(y0) + 1e-4 * big))


def case(name, node, x, weights, consts, opset):
    """one drawn case: compile, one step, every weight's gradient against central differences"""
    if args.only and not name.startswith(args.only):
        return
    model = build(name, node, x, weights, consts, opset)
    m32 = model(np.float32)
    try:  # the oracle first: a case the definition itself refuses is not drawn again
        y0 = ReferenceEvaluator(model(np.float64)).run(None, {"x": x.astype(np.float64)})[0]
    except Exception:
        return
    if y0.size == 0 or not np.all(np.isfinite(y0)):
        return
    if not oracles_agree(m32, x, y0):
        counts["disagree"] += 1
        return
    counts["cases"] += 1
    d = os.path.join(args.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "data"))
    target = rng.uniform(-1, 1, y0.shape).astype(np.float32).astype(np.float64)  # (pprt's target, in float64)
    path = os.path.join(d, "model.onnx")
    onnx.save(m32, path)
    np.save(os.path.join(d, "data", "x.npy"), x)
    np.save(os.path.join(d, "data", "target.npy"), target.astype(np.float32))  # (exact)
    bad = []
    outs = {}
    for pp, be in [(pp, b) for b in BACKENDS for pp in (1, 2)]:
        plan = os.path.join(d, f"pp{pp}.plan")
        if not os.path.exists(plan):
            r = run([PPCC, path, "--train", "--loss", "mse:y", "-b", str(x.shape[0]), "-pp", str(pp), "-q", "-o",
                     plan])
            if r is None or r.returncode not in (0, 2) or (r.returncode == 2 and "error:" not in r.stderr):
                bad.append(f"ppcc -pp {pp}: {'hung' if r is None else f'exit {r.returncode}: {r.stderr.strip()[-300:]!r}'}")
                break
            if r.returncode == 2:
                if pp == 1:
                    counts["refused"] += 1
                    if os.environ.get("PP_FD_WHY"):
                        print(f"{name}: {r.stderr.strip()[-200:]}")
                    break
                continue  # (-pp 2 of a graph too small to split is refused: fine)
        out = os.path.join(d, f"out{pp}_{be}")
        r = run([PPRT, plan, os.path.join(d, "data"), "-q", "-o", out, "--backend", be])
        if r is None or r.returncode != 0:
            bad.append(f"pprt -pp {pp} on {be}: {'hung' if r is None else f'exit {r.returncode}: {r.stderr.strip()[-300:]!r}'}")
            continue
        outs[(pp, be)] = out
    for be in BACKENDS:  # a split changes no bit on any backend (the same threads a stage)
        if (1, be) not in outs or (2, be) not in outs:
            continue
        counts["split"] += be == "ref"
        a_dir, b_dir = outs[(1, be)], outs[(2, be)]
        for f in sorted(os.listdir(a_dir)):
            a, b = os.path.join(a_dir, f), os.path.join(b_dir, f)
            if not os.path.exists(b) or open(a, "rb").read() != open(b, "rb").read():
                bad.append(f"-pp 2 on {be}: {f} not -pp 1's bits")
    params = {"p": np.zeros(x.shape)} | {k: v.astype(np.float64) for k, v in weights.items()}

    def loss(k, v):
        mm = model(np.float64)
        for init in mm.graph.initializer:
            if init.name == k:
                init.CopyFrom(numpy_helper.from_array(v, k))
        y = ReferenceEvaluator(mm).run(None, {"x": x.astype(np.float64)})[0]
        return float(np.mean((y - target) ** 2))

    fds = {}
    for k, v in params.items():  # the elements drawn and their central differences, once for every backend
        if not any(pp == 1 for pp, _ in outs):
            break
        idx = rng.choice(v.size, min(8, v.size), replace=False)
        fd = np.empty(len(idx))
        keep = np.ones(len(idx), bool)
        for j, e in enumerate(idx):
            two = []
            for eps in (1e-6, 1e-5):
                up, dn = v.copy().ravel(), v.copy().ravel()
                up[e] += eps
                dn[e] -= eps
                two.append((loss(k, up.reshape(v.shape)) - loss(k, dn.reshape(v.shape))) / (2 * eps))
            fd[j] = two[0]
            # two steps that disagree: the evaluator is not float64 there (its Erf computes in float32), or the
            # loss is not smooth at this point; the element is left out and counted
            keep[j] = abs(two[0] - two[1]) <= 1e-6 * max(abs(two[0]), 1e-3)
        counts["imprecise"] += int((~keep).sum())
        fds[k] = (idx[keep], fd[keep])
    # a weight's scale: its largest difference, at least 1e-3 of the case's largest and the largest gradient the
    # loss sends y (a gradient 0 by the math, a Softmax over an axis of 1, is rounding on that scale)
    big = max([float(np.abs(fd).max()) for _, fd in fds.values() if len(fd)] + [0.0])
    upstream = float(np.abs(2 * (y0 - target)).max()) / y0.size
    for (pp, be), out in outs.items():
        if pp != 1:
            continue
        counts["checked"] += 1
        for k, v in params.items():
            f = os.path.join(out, k + ".grad.npy")
            if not os.path.exists(f):
                bad.append(f"{be}: no gradient of {k}")
                continue
            g = np.load(f)
            if g.shape != v.shape:
                bad.append(f"{be}: {k}'s gradient of shape {g.shape}, want {v.shape}")
                continue
            idx, fd = fds[k]
            if not len(idx):
                continue
            got = g.ravel()[idx].astype(np.float64)
            scale = max(float(np.abs(fd).max()), 1e-3 * big, upstream)
            excess = (np.abs(got - fd) - 1e-3 * np.abs(fd)) / scale
            counts["elements"] += len(idx)
            rel = float(np.abs(got - fd).max()) / scale
            if rel > worst[0]:
                worst[:] = [rel, f"{name}:{k} on {be}"]
            if not np.all(excess <= 1e-4):
                j = int(np.argmax(excess))
                bad.append(f"{be}: {k}'s gradient at element {int(idx[j])}: {got[j]:.6g}, finite difference "
                           f"{fd[j]:.6g}")
    if bad:
        failures.append(f"{name}: " + "; ".join(bad))
    else:
        shutil.rmtree(d, ignore_errors=True)


def ints(node, name, vals):
    node.attribute.append(helper.make_attribute(name, [int(v) for v in vals], attr_type=onnx.AttributeProto.INTS))
    return node


def fam_conv(i):
    k = pick(1, 2, 2, 3)
    g = pick(1, 1, 2)
    c, oc = g * int(rng.integers(1, 3)), g * int(rng.integers(1, 3))
    ks = [int(v) for v in rng.integers(1, 4, k)]
    x = fvals([int(rng.integers(1, 3)), c] + [int(v) for v in rng.integers(3, 7 if k < 3 else 5, k)])
    a = {"group": g}
    for nm, lo, hi, cnt in (("strides", 1, 3, k), ("dilations", 1, 3, k), ("pads", 0, 3, 2 * k)):
        if rng.random() < 0.5:
            a[nm] = [int(v) for v in rng.integers(lo, hi, cnt)]
    op = pick("Conv", "Conv", "ConvTranspose")
    w = fvals([oc, c // g] + ks) / 2 if op == "Conv" else fvals([c, oc // g] + ks) / 2
    weights = {"w": w}
    if rng.random() < 0.5:
        weights["b"] = fvals([oc])
    case(f"conv_{i}", helper.make_node(op, ["xp"] + list(weights), ["y"], **a), x, weights, {}, 13)


def fam_pool(i):
    k = int(rng.integers(1, 3))
    x = fvals(dims(2, 2, 1, 2) + [int(v) for v in rng.integers(3, 7, k)])
    ks = [int(v) for v in rng.integers(1, 4, k)]
    a = {"kernel_shape": ks}
    if rng.random() < 0.5:
        a["strides"] = [int(v) for v in rng.integers(1, 3, k)]
    if rng.random() < 0.5:
        a["pads"] = [int(rng.integers(0, ks[j % k])) for j in range(2 * k)]
    op = pick("MaxPool", "AveragePool")
    if rng.random() < 0.3:
        a["ceil_mode"] = 1
    if op == "AveragePool" and rng.random() < 0.5:
        a["count_include_pad"] = 1
    case(f"pool_{i}", helper.make_node(op, ["xp"], ["y"], **a), x, {}, {}, 13)


def fam_pad(i):
    s = dims(1, 4, 2, 5)
    mode = pick("constant", "reflect", "edge", "wrap")
    if mode == "constant":
        pads = [int(v) for v in rng.integers(-1, 3, 2 * len(s))]  # negative: cropped
    else:  # reflect copies at most n - 1 on a side, wrap n
        pads = [int(rng.integers(0, s[j % len(s)] if mode == "reflect" else s[j % len(s)] + 1 if mode == "wrap"
                                 else 4)) for j in range(2 * len(s))]
    case(f"pad_{i}", helper.make_node("Pad", ["xp", "pads"], ["y"], mode=mode), fvals(s), {},
         {"pads": np.array(pads, np.int64)}, 19 if mode == "wrap" else 18)


def fam_slice(i):
    s = dims(1, 4, 2, 6)
    n = int(rng.integers(1, len(s) + 1))
    ax = [int(a) for a in rng.permutation(len(s))[:n]]
    st = [int(v) for v in rng.integers(-6, 6, n)]
    en = [int(pick(v, 2**62, -2**62)) for v in rng.integers(-6, 6, n)]
    sp = [int(pick(1, 2, 3, -1, -2)) for _ in range(n)]
    case(f"slice_{i}", helper.make_node("Slice", ["xp", "st", "en", "ax", "sp"], ["y"]), fvals(s), {},
         {"st": np.array(st, np.int64), "en": np.array(en, np.int64), "ax": np.array(ax, np.int64),
          "sp": np.array(sp, np.int64)}, 13)


def fam_gather(i):
    s = dims(1, 3, 1, 5)
    ax = int(rng.integers(-len(s), len(s)))
    idx = rng.integers(-s[ax], s[ax], dims(0, 2, 1, 4)).astype(np.int64)
    case(f"gather_{i}", helper.make_node("Gather", ["xp", "i"], ["y"], axis=ax), fvals(s), {}, {"i": idx}, 13)


def fam_transpose(i):
    s = dims(1, 5, 1, 4)
    case(f"transpose_{i}", ints(helper.make_node("Transpose", ["xp"], ["y"]), "perm", rng.permutation(len(s))),
         fvals(s), {}, {}, 13)


def fam_reduce(i):
    s = dims(1, 4, 1, 4)
    axes = sorted(set(int(a) for a in rng.integers(-len(s), len(s), int(rng.integers(1, len(s) + 1)))))
    case(f"reduce_{i}", helper.make_node(pick("ReduceSum", "ReduceMean"), ["xp", "axes"], ["y"], keepdims=pick(0, 1)),
         fvals(s), {}, {"axes": np.array(axes, np.int64)}, 18)


def fam_reduceprod(i):
    """ReduceProd with exact zeros in the input now and then (none, one or more in a slice: the product of the
    others is then the rest's product at the zero and 0 elsewhere, or 0 everywhere)"""
    s = dims(1, 3, 1, 3)
    axes = sorted(set(int(a) for a in rng.integers(-len(s), len(s), int(rng.integers(1, len(s) + 1)))))
    x = rng.uniform(0.5, 1.5, s).astype(np.float32) * rng.choice([-1, 1], s).astype(np.float32)
    x[rng.random(s) < pick(0.0, 0.15, 0.4)] = 0
    case(f"reduceprod_{i}", helper.make_node("ReduceProd", ["xp", "axes"], ["y"], keepdims=pick(0, 1)), x, {},
         {"axes": np.array(axes, np.int64)}, 18)


def fam_softmax(i):
    s = dims(1, 4, 1, 5)
    case(f"softmax_{i}", helper.make_node(pick("Softmax", "LogSoftmax"), ["xp"], ["y"],
                                          axis=int(rng.integers(-len(s), len(s)))), fvals(s), {}, {}, 13)


def fam_split(i):
    s = dims(1, 3, 2, 6)
    ax = int(rng.integers(-len(s), len(s)))
    parts = [int(v) for v in rng.multinomial(s[ax] - 1, [0.5, 0.5])]
    parts[0] += 1
    # the first part is y; the second is read by nothing ppcc must keep (a dead output)
    case(f"split_{i}", helper.make_node("Split", ["xp", "parts"], ["y", "z"], axis=ax), fvals(s), {},
         {"parts": np.array(parts, np.int64)}, 13)


def fam_expand(i):
    s = dims(1, 3, 1, 3)
    if rng.random() < 0.5:
        tgt = [int(pick(1, dd, 3)) if dd == 1 else dd for dd in s]
        tgt = ([2] if rng.random() < 0.3 else []) + tgt
        case(f"expand_{i}", helper.make_node("Expand", ["xp", "shape"], ["y"]), fvals(s), {},
             {"shape": np.array(tgt, np.int64)}, 13)
    else:
        case(f"tile_{i}", helper.make_node("Tile", ["xp", "r"], ["y"]), fvals(s), {},
             {"r": rng.integers(1, 4, len(s)).astype(np.int64)}, 13)


def fam_einsum(i):
    eq, xs, ws = pick(("ij,jk->ik", [3, 4], [4, 5]), ("bij,bjk->bik", [2, 3, 4], [2, 4, 2]),
                      ("ij,kj->ik", [3, 4], [5, 4]), ("bhid,bhjd->bhij", [1, 2, 3, 4], [1, 2, 5, 4]),
                      ("ij,ij->i", [3, 4], [3, 4]), ("...ij,jk->...ik", [2, 3, 4], [4, 2]), ("i,j->ij", [3], [4]))
    case(f"einsum_{i}", helper.make_node("Einsum", ["xp", "w"], ["y"], equation=eq), fvals(xs), {"w": fvals(ws)}, {},
         13)


def fam_gemm(i):
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    ta, tb = pick(0, 1), pick(0, 1)
    x = fvals([k, m] if ta else [m, k])
    weights = {"w": fvals([n, k] if tb else [k, n])}
    names = ["xp", "w"]
    if rng.random() < 0.7:
        weights["c"] = fvals(pick([n], [1, n], [m, n], [m, 1], [1]))
        names.append("c")
    case(f"gemm_{i}", helper.make_node("Gemm", names, ["y"], transA=ta, transB=tb, alpha=pick(1.0, 0.5, -2.0),
                                       beta=pick(1.0, 0.25)), x, weights, {}, 13)


def fam_matmul(i):
    k = int(rng.integers(1, 5))
    xs = dims(0, 2, 1, 3) + [int(rng.integers(1, 5)), k]
    ws = dims(0, 2, 1, 3)[-max(0, len(xs) - 2):] + [k, int(rng.integers(1, 5))] if rng.random() < 0.7 else [k]
    if rng.random() < 0.2:
        xs = [k]
    case(f"matmul_{i}", helper.make_node("MatMul", ["xp", "w"], ["y"]), fvals(xs), {"w": fvals(ws)}, {}, 13)


def broadcast_of(s):
    """a shape that broadcasts against s (ones in places, fewer dims now and then)"""
    b = [dd if rng.random() < 0.6 else 1 for dd in s]
    return b[int(rng.integers(0, len(b) + 1)):] if rng.random() < 0.3 else b


def fam_binary(i):
    s = dims(1, 4, 1, 4)
    op = pick("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")
    w = fvals(broadcast_of(s))
    x = fvals(s)
    if op == "Pow":
        x = np.abs(x) + 0.5  # (a positive base: x + p stays above 0, p starting at 0)
    if op == "Div":
        w = np.sign(w) * (np.abs(w) + 0.5)
    if rng.random() < 0.5:  # the weight on the left
        case(f"binary_{i}", helper.make_node(op, ["w", "xp"], ["y"]), x, {"w": w}, {}, 13)
    else:
        case(f"binary_{i}", helper.make_node(op, ["xp", "w"], ["y"]), x, {"w": w}, {}, 13)


def fam_unary(i):
    s = dims(1, 3, 1, 5)
    # (not Erf, nor Gelu's erf form: onnx's reference evaluator computes erf in float32 and its derivative
    # differs from the true one by up to 1%; grads.py checks both against torch)
    op = pick("Exp", "Tanh", "Sigmoid", "Sqrt", "Log", "Neg", "Reciprocal", "Softplus", "Sin", "Cos", "Atan",
              "Elu", "Selu", "LeakyRelu", "HardSigmoid", "Softsign", "Celu", "Gelu")
    x = fvals(s)
    if op in ("Sqrt", "Log", "Reciprocal"):
        x = np.abs(x) + 0.5
    opset = 20 if op == "Gelu" else 13
    a = {"approximate": "tanh"} if op == "Gelu" else {}
    case(f"unary_{i}", helper.make_node(op, ["xp"], ["y"], **a), x, {}, {}, opset)


def fam_layernorm(i):
    s = dims(2, 4, 1, 5)
    ax = int(rng.integers(-len(s), len(s)))
    ns = s[ax:] if ax >= 0 else s[len(s) + ax:]
    weights = {"g": fvals(ns)}
    names = ["xp", "g"]
    if rng.random() < 0.7:
        weights["b"] = fvals(ns)
        names.append("b")
    case(f"layernorm_{i}", helper.make_node("LayerNormalization", names, ["y"], axis=ax,
                                            epsilon=pick(1e-5, 1e-3)), fvals(s), weights, {}, 17)


def fam_concat(i):
    s = dims(1, 4, 1, 4)
    ax = int(rng.integers(-len(s), len(s)))
    ws = list(s)
    ws[ax] = int(rng.integers(1, 4))
    names = pick(["xp", "w"], ["w", "xp"], ["w", "xp", "w"])
    case(f"concat_{i}", helper.make_node("Concat", names, ["y"], axis=ax), fvals(s), {"w": fvals(ws)}, {}, 13)


def fam_gather_elements(i):
    s = dims(1, 3, 1, 5)
    ax = int(rng.integers(-len(s), len(s)))
    ishape = [int(rng.integers(1, dd + 1)) for dd in s]
    ishape[ax] = int(rng.integers(1, 6))
    idx = rng.integers(-s[ax], s[ax], ishape).astype(np.int64)
    case(f"gatherel_{i}", helper.make_node("GatherElements", ["xp", "i"], ["y"], axis=ax), fvals(s), {}, {"i": idx}, 13)


def fam_resize(i):
    s = [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + dims(1, 2, 2, 5)
    mode = pick("nearest", "linear")
    a = dict(mode=mode, coordinate_transformation_mode=pick("half_pixel", "asymmetric", "align_corners",
                                                              "pytorch_half_pixel"))
    if mode == "nearest":
        a["nearest_mode"] = pick("round_prefer_floor", "floor", "ceil")
    sizes = s[:2] + [int(v) for v in rng.integers(1, 9, len(s) - 2)]
    case(f"resize_{i}", helper.make_node("Resize", ["xp", "", "", "sizes"], ["y"], **a), fvals(s), {},
         {"sizes": np.array(sizes, np.int64)}, 13)


def fam_instnorm(i):
    s = [int(rng.integers(1, 3)), int(rng.integers(1, 4))] + dims(1, 2, 2, 5)
    case(f"instnorm_{i}", helper.make_node("InstanceNormalization", ["xp", "g", "b"], ["y"], epsilon=1e-5),
         fvals(s), {"g": fvals([s[1]]), "b": fvals([s[1]])}, {}, 13)


def fam_batchnorm(i):
    s = [int(rng.integers(2, 4)), int(rng.integers(1, 4))] + dims(0, 2, 1, 4)
    c = s[1]
    consts = {"mean": np.zeros(c, np.float32), "var": np.ones(c, np.float32)}
    node = helper.make_node("BatchNormalization", ["xp", "g", "b", "mean", "var"], ["y"], epsilon=1e-5,
                            momentum=0.9, training_mode=1)
    case(f"batchnorm_{i}", node, fvals(s), {"g": fvals([c]), "b": fvals([c])}, consts, 15)


def fam_where(i):
    s = dims(1, 3, 1, 4)
    cond = rng.random(broadcast_of(s)) < 0.5
    case(f"where_{i}", helper.make_node("Where", ["c", "xp", "w"], ["y"]), fvals(s), {"w": fvals(broadcast_of(s))},
         {"c": cond}, 13)


def fam_topk(i):
    s = dims(1, 3, 1, 6)
    ax = int(rng.integers(-len(s), len(s)))
    k = int(rng.integers(1, s[ax] + 1))
    node = helper.make_node("TopK", ["xp", "k"], ["y", "idx"], axis=ax, largest=pick(0, 1), sorted=pick(0, 1))
    case(f"topk_{i}", node, fvals(s), {}, {"k": np.array([k], np.int64)}, 13)


def fam_trilu(i):
    s = dims(2, 4, 1, 5)
    consts = {"k": np.array(int(rng.integers(-3, 4)), np.int64)} if rng.random() < 0.7 else {}
    case(f"trilu_{i}", helper.make_node("Trilu", ["xp"] + list(consts), ["y"], upper=pick(0, 1)), fvals(s), {},
         consts, 14)


def fam_depthspace(i):
    b = pick(1, 2, 3)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    if rng.random() < 0.5:
        node = helper.make_node("DepthToSpace", ["xp"], ["y"], blocksize=b, mode=pick("DCR", "CRD"))
        x = fvals([n, c * b * b] + dims(2, 2, 1, 3))
    else:
        node = helper.make_node("SpaceToDepth", ["xp"], ["y"], blocksize=b)
        x = fvals([n, c] + [b * v for v in dims(2, 2, 1, 3)])
    case(f"depthspace_{i}", node, x, {}, {}, 13)


def fam_scatternd(i):
    s = dims(1, 3, 1, 4)
    k = int(rng.integers(1, len(s) + 1))
    rows = int(np.prod(s[:k]))
    red = pick("none", "add")
    t = int(rng.integers(1, rows + 1))
    # reduction none: distinct tuples (ONNX leaves repeats undefined); add: repeats welcome
    flat = rng.permutation(rows)[:t] if red == "none" else rng.integers(0, rows, t)
    tup = np.stack(np.unravel_index(flat, s[:k]), -1).astype(np.int64)
    tup = np.where(rng.random(tup.shape) < 0.3, tup - np.array(s[:k]), tup)  # negative now and then
    lead = [t] if t % 2 or rng.random() < 0.5 else [2, t // 2]
    idx = tup.reshape(lead + [k])
    node = helper.make_node("ScatterND", ["xp", "i", "u"], ["y"], reduction=red)
    case(f"scatternd_{i}", node, fvals(s), {"u": fvals(lead + s[k:])}, {"i": idx}, 16)


def fam_scatter_elements(i):
    s = dims(1, 3, 1, 5)
    ax = int(rng.integers(-len(s), len(s)))
    red = pick("none", "add")
    ishape = [int(rng.integers(1, dd + 1)) for dd in s]
    # along the axis, distinct places per line under reduction none
    lines = int(np.prod(ishape)) // ishape[ax]
    per = [rng.permutation(s[ax])[:ishape[ax]] if red == "none" else rng.integers(0, s[ax], ishape[ax])
           for _ in range(lines)]
    idx = np.moveaxis(np.array(per, np.int64).reshape([d for j, d in enumerate(ishape) if j != ax % len(s)]
                                                      + [ishape[ax]]), -1, ax % len(s))
    idx = np.where(rng.random(idx.shape) < 0.3, idx - s[ax], idx)
    node = helper.make_node("ScatterElements", ["xp", "i", "u"], ["y"], axis=ax, reduction=red)
    case(f"scatterel_{i}", node, fvals(s), {"u": fvals(ishape)}, {"i": idx}, 16)


def fam_shrink(i):
    s = dims(1, 3, 1, 5)
    lam = float(rng.uniform(0, 1.2))
    x = fvals(s)
    x = np.where(np.abs(np.abs(x) - lam) < 0.05, x + 0.1 * np.sign(x), x).astype(np.float32)  # off the kinks
    node = helper.make_node("Shrink", ["xp"], ["y"], lambd=lam, bias=float(rng.uniform(-1, 1)))
    case(f"shrink_{i}", node, x, {}, {}, 13)


def fam_mod(i):
    s = dims(1, 3, 1, 4)
    b = fvals(broadcast_of(s))
    b = (np.sign(b) * (np.abs(b) + 0.5)).astype(np.float32)
    if rng.random() < 0.5:  # the weight the divisor
        case(f"mod_{i}", helper.make_node("Mod", ["xp", "w"], ["y"], fmod=1), fvals(s) * 3, {"w": b}, {}, 13)
    else:  # x the divisor, kept off 0 (p starts at 0)
        x = fvals(s)
        x = (np.sign(x) * (np.abs(x) + 0.5)).astype(np.float32)
        case(f"mod_{i}", helper.make_node("Mod", ["w", "xp"], ["y"], fmod=1), x, {"w": fvals(broadcast_of(s)) * 3},
             {}, 13)


def fam_centercrop(i):
    s = dims(1, 4, 1, 6)
    tgt = [max(1, d + int(rng.integers(-3, 4))) for d in s]
    if rng.random() < 0.5:  # some axes, negative now and then
        axes = sorted(int(a) for a in rng.choice(len(s), int(rng.integers(1, len(s) + 1)), replace=False))
        shape = [tgt[a] for a in axes]
        axes = [a - len(s) if rng.random() < 0.3 else a for a in axes]
        node = helper.make_node("CenterCropPad", ["xp", "sh"], ["y"], axes=axes)
    else:
        shape, node = tgt, helper.make_node("CenterCropPad", ["xp", "sh"], ["y"])
    case(f"centercrop_{i}", node, fvals(s), {}, {"sh": np.array(shape, np.int64)}, 18)


def fam_rotary(i):
    b, sq, h = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 3))
    d = 2 * int(rng.integers(1, 4))
    rot = pick(0, d, 2 * int(rng.integers(1, d // 2 + 1)))
    half = (rot or d) // 2
    three_d = rng.random() < 0.5
    x = fvals([b, sq, h * d] if three_d else [b, h, sq, d])
    at = {"interleaved": int(rng.integers(0, 2)), "rotary_embedding_dim": rot}
    if three_d:
        at["num_heads"] = h
    if rng.random() < 0.5:  # a cache of positions, read through position_ids
        npos = sq + int(rng.integers(0, 3))
        ang = rng.uniform(-3, 3, (npos, half))
        c = {"f_cos": np.cos(ang).astype(np.float32), "f_sin": np.sin(ang).astype(np.float32),
             "pos": rng.integers(0, npos, (b, sq)).astype(np.int64)}
        node = helper.make_node("RotaryEmbedding", ["xp", "f_cos", "f_sin", "pos"], ["y"], **at)
    else:
        ang = rng.uniform(-3, 3, (b, sq, half))
        c = {"f_cos": np.cos(ang).astype(np.float32), "f_sin": np.sin(ang).astype(np.float32)}
        node = helper.make_node("RotaryEmbedding", ["xp", "f_cos", "f_sin"], ["y"], **at)
    case(f"rotary_{i}", node, x, {}, c, 23)


def fam_castlike(i):
    s = dims(1, 3, 1, 5)
    case(f"castlike_{i}", helper.make_node("CastLike", ["xp", "f_like"], ["y"]), fvals(s), {},
         {"f_like": np.zeros((), np.float32)}, 15)


def away_from_0(x):
    return (np.sign(x) * (np.abs(x) + 0.3)).astype(np.float32)


def fam_lppool(i):
    nsp = int(rng.integers(1, 3))
    s = [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + dims(nsp, nsp, 2, 6)
    k = [int(rng.integers(1, min(3, d) + 1)) for d in s[2:]]
    at = {"kernel_shape": k, "p": int(pick(1, 2, 3))}
    if rng.random() < 0.5:
        at["strides"] = [int(rng.integers(1, 3)) for _ in k]
    if rng.random() < 0.4:
        at["pads"] = [int(rng.integers(0, kk)) for kk in k] * 2
    if rng.random() < 0.3:
        at["ceil_mode"] = 1
    case(f"lppool_{i}", helper.make_node("LpPool", ["xp"], ["y"], **at), away_from_0(fvals(s)), {}, {}, 18)


def fam_lpnorm(i):
    # (p = 2 only: onnx 1.22's reference evaluator sums x, not |x|, for p = 1; grads_norms.py checks p = 1)
    s = dims(1, 3, 1, 5)
    node = helper.make_node("LpNormalization", ["xp"], ["y"], axis=int(rng.integers(-len(s), len(s))), p=2)
    case(f"lpnorm_{i}", node, away_from_0(fvals(s)), {}, {}, 13)


def fam_gridsample(i):
    # opset 20's N-D form (1 to 3 spatial axes) with points in [-1.2, 1.2]: some outside, where the padding
    # decides. X's gradient only: onnx 1.22's reference evaluator rounds the coordinates to float32, so central
    # differences along the grid are off by 0.1% and more (a 1-D case: -0.160772 against the exact -0.160554);
    # grads_norms.py checks the grid's gradient against torch's (opset 16's 2-D form, every mode and padding)
    k = int(rng.integers(1, 4))
    s = [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + dims(k, k, 2, 5)
    o = dims(k, k, 1, 4)
    mode = pick("linear", "nearest", "cubic") if k < 3 else pick("linear", "nearest")
    at = {"mode": mode, "padding_mode": pick("zeros", "border", "reflection"), "align_corners": int(pick(0, 1))}
    grid = rng.uniform(-1.2, 1.2, [s[0]] + o + [k]).astype(np.float32)
    case(f"gridsample_{i}", helper.make_node("GridSample", ["xp", "f_grid"], ["y"], **at), fvals(s), {},
         {"f_grid": grid}, 20)


def fam_affinegrid(i):
    k = int(rng.integers(2, 4))
    n = int(rng.integers(1, 3))
    size = [n, int(rng.integers(1, 3))] + dims(k, k, 1, 5)
    node = helper.make_node("AffineGrid", ["xp", "sz"], ["y"], align_corners=int(pick(0, 1)))
    case(f"affinegrid_{i}", node, fvals([n, k, k + 1]), {}, {"sz": np.array(size, np.int64)}, 20)


def fam_cumprod(i):
    """CumProd (opset 26) with exact zeros now and then, one or more in a line, exclusive and reverse drawn"""
    s = dims(1, 3, 1, 5)
    x = rng.uniform(0.5, 1.5, s).astype(np.float32) * rng.choice([-1, 1], s).astype(np.float32)
    x[rng.random(s) < pick(0.0, 0.15, 0.4)] = 0
    node = helper.make_node("CumProd", ["xp", "ax"], ["y"], exclusive=int(pick(0, 1)), reverse=int(pick(0, 1)))
    case(f"cumprod_{i}", node, x, {}, {"ax": np.array(int(rng.integers(-len(s), len(s))), np.int64)}, 26)


def fam_scatter_reduce(i):
    """ScatterElements and ScatterND (opset 18) under reduction mul, max and min, repeated places welcome: no tie
    among continuous draws (ties are grads.py's, against torch); mul with exact zeros among the updates now and
    then, a place's lone zero and several"""
    red, s = pick("mul", "max", "min"), dims(1, 3, 1, 4)
    if rng.random() < 0.5:
        k = int(rng.integers(1, len(s) + 1))
        t = int(rng.integers(1, 2 * int(np.prod(s[:k])) + 1))
        tup = np.stack(np.unravel_index(rng.integers(0, int(np.prod(s[:k])), t), s[:k]), -1).astype(np.int64)
        tup = np.where(rng.random(tup.shape) < 0.3, tup - np.array(s[:k]), tup)
        lead = [t] if t % 2 or rng.random() < 0.5 else [2, t // 2]
        idx, ushape = tup.reshape(lead + [k]), lead + s[k:]
        node = helper.make_node("ScatterND", ["xp", "i", "u"], ["y"], reduction=red)
    else:
        ax = int(rng.integers(-len(s), len(s)))
        ishape = [int(rng.integers(1, dd + 1)) for dd in s]
        ishape[ax] = int(rng.integers(1, 2 * s[ax] + 1))  # more updates than places: repeats
        idx = rng.integers(0, s[ax], ishape).astype(np.int64)
        idx, ushape = np.where(rng.random(idx.shape) < 0.3, idx - s[ax], idx), ishape
        node = helper.make_node("ScatterElements", ["xp", "i", "u"], ["y"], axis=ax, reduction=red)
    u = fvals(ushape)
    if red == "mul":
        u = rng.uniform(0.6, 1.4, ushape).astype(np.float32) * rng.choice([-1, 1], ushape).astype(np.float32)
        u[rng.random(ushape) < pick(0.0, 0.2, 0.4)] = 0
    case(f"scatterred_{i}", node, fvals(s), {"u": u}, {"i": idx}, 18)


# (not GroupNormalization: onnx's reference evaluator computes it in float32, so a step of 1e-6 can vanish in its
# rounding and both differences read 0; grads_norms.py checks it against torch)
FAMILIES = {"reduceprod": fam_reduceprod, "scatternd": fam_scatternd, "scatterel": fam_scatter_elements,
            "topk": fam_topk, "trilu": fam_trilu, "depthspace": fam_depthspace, "batchnorm": fam_batchnorm,
            "where": fam_where, "gemm": fam_gemm, "matmul": fam_matmul, "binary": fam_binary, "unary": fam_unary,
            "layernorm": fam_layernorm, "concat": fam_concat, "gatherel": fam_gather_elements, "resize": fam_resize,
            "instnorm": fam_instnorm, "conv": fam_conv, "pool": fam_pool, "pad": fam_pad, "slice": fam_slice,
            "gather": fam_gather, "transpose": fam_transpose, "reduce": fam_reduce, "softmax": fam_softmax,
            "split": fam_split, "expand": fam_expand, "einsum": fam_einsum,
            # (2026-12-06: at the end, so the families above draw what they drew before)
            "shrink": fam_shrink, "mod": fam_mod, "centercrop": fam_centercrop, "rotary": fam_rotary,
            "castlike": fam_castlike, "lppool": fam_lppool, "lpnorm": fam_lpnorm, "gridsample": fam_gridsample,
            "affinegrid": fam_affinegrid, "cumprod": fam_cumprod, "scatterred": fam_scatter_reduce}
os.makedirs(args.work, exist_ok=True)
for fam, fn in FAMILIES.items():
    for i in range(args.per_op):
        fn(i)
for f in failures:
    print("FAIL", f)
print(f"grad_fd: on {', '.join(BACKENDS)}: {counts['cases']} cases ({counts['refused']} refused by ppcc; {counts['disagree']} more drawn where "
      f"onnxruntime and the reference evaluator disagree, skipped), {counts['checked']} steps "
      f"checked ({counts['split']} cases also at -pp 2 on every backend, the same bits), "
      f"{counts['elements']} gradient elements against central differences ({counts['imprecise']} drawn where "
      f"two steps disagree, left out); the largest difference "
      f"{worst[0]:.2e} of its weight's largest ({worst[1]}); {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
