#!/usr/bin/env python3
"""ppcc --export-stages on the model zoo: every stage a valid ONNX model that
onnxruntime runs, and the stages chained give the whole model's outputs.

For each model of tests/models/zoo.py (exported with random weights and
onnxruntime's outputs on the whole model as the reference, cached in
WORKDIR/NAME like tests/models/run_zoo.py) and each -pp in 2 and 4:
  - ppcc MODEL -pp N -b 1 --export-stages DIR --report-json R;
  - DIR holds stages.json and exactly stage_0.onnx .. stage_{N-1}.onnx (with
    .onnx.data beside those that have large weights), as many as the report's
    stages;
  - onnx.checker.check_model(path, full_check=True) passes on every stage
    (full check: also strict shape inference);
  - stage K's graph inputs are the model's inputs (K = 0) or exactly stage
    K-1's graph outputs, by name and in order, and the last stage's outputs
    are the model's; stages.json says the same, with each tensor's element
    type by name as the stage's model declares it ("f32", not ONNX's 1),
    and is format ppcc-stages version 2 (the report ppcc-report version 1);
  - no op of ppcc's own ("pp." domain or name) is left, and every node is in
    the default ONNX domain;
  - onnxruntime runs the stages one after the other, each sample alone (the
    plan's micro-batch is 1), feeding each stage what the one before it gave;
    the last stage's outputs are within rtol 1e-4 (atol 1e-5) of
    onnxruntime's on the whole model.
Exits 1 when anything fails; prints one line per model and -pp with the
stage count, the ops written per stage and the largest error.

--small instead runs, in seconds, a model built here with every pattern the
fusion pass rewrites (BatchNormalization into Conv, Conv + Add + Relu,
Conv + Clip, x * Sigmoid(x), MatMul + Add, the decomposed LayerNorm, the Erf
GELU) at opsets 10, 13, 17 and 20, at -pp 1, 2 and 3: the same checks, plus
that each fused op comes back in the form its opset has (Clip bounds as
attributes before 11, LayerNormalization from 17, Gelu from 20, else their
decompositions); and the rules for the directory: a second export replaces
the first, a file or a directory holding other files is refused (exit 2,
left as it was), a failing compile leaves nothing, nothing temporary stays.

Usage: run.py WORKDIR [--models a,b] [--pp 2,4] | run.py WORKDIR --small
(env: PPCC; models cached in WORKDIR/NAME)"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from harness import finish, zoo_dir  # noqa: E402

PPCC = os.environ["PPCC"]
MODELS = ["resnet50", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "densenet121",
          "convnext_tiny", "swin_t", "vit_b_16", "unet", "gpt"]
RTOL, ATOL = 1e-4, 1e-5


def onnx_type_name(elem_type):
    """ONNX's element type as pprt names it: bool, else NumPy's kind and bits (f32, i64, u8)."""
    dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    return "bool" if dt.kind == "b" else f"{dt.kind}{8 * dt.itemsize}"


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def check(name, d, pp, problems, model=None, want_ops=None):
    model = model or os.path.join(d, "model.onnx")
    out = os.path.join(d, f"stages_pp{pp}")
    rep = os.path.join(d, f"stages_pp{pp}.json")
    plan = os.path.join(d, "stages.plan")
    shutil.rmtree(out, ignore_errors=True)
    found = len(problems)
    t0 = time.time()
    r = subprocess.run([PPCC, model, "-pp", str(pp), "-b", "1", "-q", "-o", plan,
                        "--report-json", rep, "--export-stages", out], capture_output=True, text=True)
    t_compile = time.time() - t0
    if r.returncode != 0:
        problems.append(f"{name} -pp {pp}: ppcc failed: {r.stderr.strip()}")
        return None
    report = json.load(open(rep))
    n = len(report["stages"])
    files = sorted(os.listdir(out))
    want = {"stages.json"} | {f"stage_{k}.onnx" for k in range(n)}
    extra = set(files) - want - {f"stage_{k}.onnx.data" for k in range(n)}
    if not want <= set(files) or extra:
        problems.append(f"{name} -pp {pp}: files {files}, expected stages.json and stage_0..{n - 1}.onnx")
        return None
    meta = json.load(open(os.path.join(out, "stages.json")))
    if meta.get("format") != "ppcc-stages" or meta.get("version") != 2:
        problems.append(f"{name} -pp {pp}: stages.json is {meta.get('format')!r} version {meta.get('version')!r}, "
                        "expected 'ppcc-stages' version 2")
    if report.get("format") != "ppcc-report" or report.get("version") != 1:
        problems.append(f"{name} -pp {pp}: --report-json is {report.get('format')!r} version "
                        f"{report.get('version')!r}, expected 'ppcc-report' version 1")
    src = onnx.load(model, load_external_data=False)
    model_in = [i.name for i in src.graph.input if i.name not in {t.name for t in src.graph.initializer}]
    model_out = [o.name for o in src.graph.output]
    if meta["model_inputs"] != model_in or meta["model_outputs"] != model_out or len(meta["stages"]) != n:
        problems.append(f"{name} -pp {pp}: stages.json names {meta['model_inputs']} -> {meta['model_outputs']} "
                        f"with {len(meta['stages'])} stages; the model has {model_in} -> {model_out}, the report {n}")
    prev_out = model_in
    ops = []
    all_ops = set()
    for k in range(n):
        path = os.path.join(out, f"stage_{k}.onnx")
        try:
            onnx.checker.check_model(path, full_check=True)
        except Exception as e:  # noqa: BLE001 - the checker's message is the finding
            problems.append(f"{name} -pp {pp}: stage {k} fails onnx.checker: {str(e).splitlines()[0]}")
            return None
        m = onnx.load(path, load_external_data=False)
        ins = [i.name for i in m.graph.input]
        outs = [o.name for o in m.graph.output]
        if ins != prev_out:
            problems.append(f"{name} -pp {pp}: stage {k} takes {ins[:4]}..., the stage before gives {prev_out[:4]}...")
        js = meta["stages"][k]
        if [t["name"] for t in js["inputs"]] != ins or [t["name"] for t in js["outputs"]] != outs:
            problems.append(f"{name} -pp {pp}: stages.json disagrees with stage_{k}.onnx on its inputs or outputs")
        # element types by name, as the stage's model declares them (NumPy's kind and bits: f32, i64, bool)
        types = {v.name: onnx_type_name(v.type.tensor_type.elem_type) for v in [*m.graph.input, *m.graph.output]}
        bad_types = [(t["name"], t["dtype"], types.get(t["name"])) for t in [*js["inputs"], *js["outputs"]]
                     if t["dtype"] != types.get(t["name"])]
        if bad_types:
            problems.append(f"{name} -pp {pp}: stages.json's dtypes (name, written, the model's): {bad_types[:3]}")
        bad = [nd.op_type for nd in m.graph.node if nd.domain not in ("", "ai.onnx") or nd.op_type.startswith("pp.")]
        if bad:
            problems.append(f"{name} -pp {pp}: stage {k} still has ops {sorted(set(bad))}")
        ops.append(len(m.graph.node))
        all_ops.update(nd.op_type for nd in m.graph.node)
        prev_out = outs
    if prev_out != model_out:
        problems.append(f"{name} -pp {pp}: the last stage gives {prev_out}, the model {model_out}")
        return None
    for op, present in (want_ops or {}).items():
        if (op in all_ops) != present:
            problems.append(f"{name} -pp {pp}: {op} {'missing from' if present else 'in'} the stages ({sorted(all_ops)})")
    # chain the stages on every sample, one at a time (the plan's micro-batch)
    inputs = {f[:-4]: np.load(os.path.join(d, "data", f)) for f in os.listdir(os.path.join(d, "data"))}
    expected = {f[:-4]: np.load(os.path.join(d, "expected", f)) for f in os.listdir(os.path.join(d, "expected"))}
    sessions = [session(os.path.join(out, f"stage_{k}.onnx")) for k in range(n)]
    samples = next(iter(inputs.values())).shape[0]
    got = {o: [] for o in model_out}
    for i in range(samples):
        feed = {k: v[i:i + 1] for k, v in inputs.items()}
        for k, s in enumerate(sessions):
            names = [o.name for o in s.get_outputs()]
            res = s.run(None, {x.name: feed[x.name] for x in s.get_inputs()})
            feed = dict(zip(names, res))
        for o in model_out:
            got[o].append(feed[o])
    worst = 0.0
    for o in model_out:
        g, w = np.concatenate(got[o]), expected[o]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name} -pp {pp}: output {o} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
            continue
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(err.max()))
        if not np.all(err <= ATOL + RTOL * np.abs(w.astype(np.float64))):
            i = int(np.argmax(err - RTOL * np.abs(w)))
            problems.append(f"{name} -pp {pp}: output {o} differs from onnxruntime on the whole model: max abs "
                            f"error {err.max():.3g} (at {g.flat[i]:.6g}, expected {w.flat[i]:.6g}), tolerance "
                            f"rtol {RTOL} atol {ATOL}")
    if len(problems) == found:  # passed: the stages and the plan (ViT-B/16's: 1 GB) go, failures keep theirs
        shutil.rmtree(out, ignore_errors=True)
        os.remove(plan)
    return {"stages": n, "ops": ops, "err": worst, "compile_s": t_compile}


def patterns_model(path, opset):
    """[1,4,8,8] through every pattern the fusion pass rewrites, at `opset`."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(opset)
    inits = []

    def c(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def w(name, *shape):
        return c(name, rng.standard_normal(shape) * 0.3)

    N = helper.make_node
    clip = (N("Clip", ["c3"], ["k3"], name="/block/clip/Clip", min=0.0, max=6.0) if opset < 11 else
            N("Clip", ["c3", c("lo", 0.0), c("hi", 6.0)], ["k3"], name="/block/clip/Clip"))
    axes = {"axes": [-1]} if opset < 18 else {}
    ax_in = [] if opset < 18 else [numpy_helper.from_array(np.array([-1], np.int64), "ax").name]
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), "ax"))
    nodes = [
        N("Conv", ["x", w("w1", 8, 4, 3, 3), w("b1", 8)], ["c1"], name="/stem/conv/Conv", pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1", c("g", rng.uniform(0.5, 1.5, 8)), w("be", 8), w("mu", 8),
                                 c("var", rng.uniform(0.5, 2, 8))], ["n1"], name="/stem/bn/BatchNormalization"),
        N("Relu", ["n1"], ["r1"], name="/stem/relu/Relu"),
        N("Conv", ["r1", w("w2", 8, 8, 3, 3), w("b2", 8)], ["c2"], name="/block/conv1/Conv", pads=[1, 1, 1, 1]),
        N("Add", ["c2", "r1"], ["a2"], name="/block/Add"),
        N("Relu", ["a2"], ["r2"], name="/block/relu/Relu"),
        N("Conv", ["r2", w("w3", 8, 8, 1, 1), w("b3", 8)], ["c3"], name="/block/conv2/Conv"),
        clip,
        N("Sigmoid", ["k3"], ["s4"], name="/act/Sigmoid"),
        N("Mul", ["k3", "s4"], ["m4"], name="/act/Mul"),
        N("GlobalAveragePool", ["m4"], ["p5"], name="/pool/GlobalAveragePool"),
        N("Flatten", ["p5"], ["f5"], name="/Flatten"),
        N("MatMul", ["f5", w("w6", 8, 16)], ["mm6"], name="/fc/MatMul"),
        N("Add", ["mm6", w("b6", 16)], ["y6"], name="/fc/Add"),
        N("ReduceMean", ["y6"] + ax_in, ["mu7"], name="/ln/ReduceMean", **axes),
        N("Sub", ["y6", "mu7"], ["d7"], name="/ln/Sub"),
        N("Pow", ["d7", c("two", 2.0)], ["p7"], name="/ln/Pow"),
        N("ReduceMean", ["p7"] + ax_in, ["v7"], name="/ln/ReduceMean_1", **axes),
        N("Add", ["v7", c("eps", 1e-5)], ["ve7"], name="/ln/Add"),
        N("Sqrt", ["ve7"], ["sd7"], name="/ln/Sqrt"),
        N("Div", ["d7", "sd7"], ["n7"], name="/ln/Div"),
        N("Mul", ["n7", c("gam", rng.uniform(0.5, 1.5, 16))], ["g7"], name="/ln/Mul"),
        N("Add", ["g7", w("bet", 16)], ["l7"], name="/ln/Add_1"),
        N("Div", ["l7", c("sq2", np.sqrt(2.0))], ["d8"], name="/gelu/Div"),
        N("Erf", ["d8"], ["e8"], name="/gelu/Erf"),
        N("Add", ["e8", c("one", 1.0)], ["a8"], name="/gelu/Add"),
        N("Mul", ["l7", "a8"], ["m8"], name="/gelu/Mul"),
        N("Mul", ["m8", c("half", 0.5)], ["g8"], name="/gelu/Mul_1"),
        N("MatMul", ["g8", w("w9", 16, 4)], ["y"], name="/head/MatMul"),
    ]
    g = helper.make_graph(nodes, "patterns", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = {10: 5, 13: 7, 17: 8, 20: 9}[opset]
    onnx.save(m, path)


def small(work, problems):
    """the fusion patterns at four opsets, and the directory rules"""
    for opset in (10, 13, 17, 20):
        d = os.path.join(work, f"patterns{opset}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "data"))
        os.makedirs(os.path.join(d, "expected"))
        model = os.path.join(d, "model.onnx")
        patterns_model(model, opset)
        x = np.random.default_rng(1).standard_normal((3, 4, 8, 8)).astype(np.float32)
        np.save(os.path.join(d, "data", "x.npy"), x)
        s = session(model)
        np.save(os.path.join(d, "expected", "y.npy"), np.concatenate([s.run(None, {"x": x[i:i + 1]})[0] for i in range(3)]))
        want = {"LayerNormalization": opset >= 17, "Gelu": opset >= 20, "Erf": opset < 20, "Clip": True,
                "Sigmoid": True, "BatchNormalization": False, "Gemm": True}
        for pp in (1, 2, 3):
            res = check(f"patterns opset {opset}", d, pp, problems, model, want)
            if res:
                print(f"patterns opset {opset:2d} -pp {pp}: {res['stages']} stages, ops {res['ops']}, max abs err "
                      f"{res['err']:.2g}")
    # the directory rules
    model = os.path.join(work, "patterns13", "model.onnx")
    out = os.path.join(work, "dirs")
    shutil.rmtree(out, ignore_errors=True)

    def ppcc(*extra):
        return subprocess.run([PPCC, model, "-q", "-o", os.path.join(work, "dirs.plan")] + list(extra),
                              capture_output=True, text=True)

    def leftovers():
        return [f for f in os.listdir(work) if f.startswith("dirs") and (".tmp-" in f or ".old-" in f)]

    r1 = ppcc("-pp", "3", "--export-stages", out)
    r2 = ppcc("-pp", "2", "--export-stages", out + "/")  # replaces the first export
    files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if r1.returncode or r2.returncode or "stage_2.onnx" in files or "stage_1.onnx" not in files:
        problems.append(f"export twice into one directory: exits {r1.returncode}, {r2.returncode} "
                        f"({r2.stderr.strip()}), files {files}")
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine\n")
    r = ppcc("-pp", "3", "--export-stages", out)
    if r.returncode != 2 or "notes.txt" not in r.stderr or "stage_2.onnx" in os.listdir(out):
        problems.append(f"export into a directory holding another file: exit {r.returncode}, {r.stderr.strip()!r}")
    open(os.path.join(work, "dirs_file"), "w").close()
    r = ppcc("--export-stages", os.path.join(work, "dirs_file"))
    if r.returncode != 2 or "not a directory" not in r.stderr or os.path.getsize(os.path.join(work, "dirs_file")):
        problems.append(f"export onto a file: exit {r.returncode}, {r.stderr.strip()!r}")
    r = ppcc("--export-stages", os.path.join(work, "no", "such", "dir"))
    if r.returncode != 2 or "cannot create" not in r.stderr:
        problems.append(f"export under a missing directory: exit {r.returncode}, {r.stderr.strip()!r}")
    r = ppcc("-pp", "99", "--export-stages", os.path.join(work, "dirs_never"))
    if r.returncode != 2 or os.path.exists(os.path.join(work, "dirs_never")):
        problems.append(f"a failing compile with --export-stages: exit {r.returncode}, directory left: "
                        f"{os.path.exists(os.path.join(work, 'dirs_never'))}")
    if leftovers():
        problems.append(f"temporary directories left behind: {leftovers()}")
    print("directory rules checked")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pp", default="2,4")
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    problems = []
    if a.small:
        small(a.work, problems)
        return finish(problems, 13)
    t_all = time.time()
    models, pps = a.models.split(","), [int(p) for p in a.pp.split(",")]
    for name in models:
        try:
            d = zoo_dir(name, a.work)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {e}")
            continue
        for pp in pps:
            t0 = time.time()
            res = check(name, d, pp, problems)
            if res:
                print(f"{name:20s} -pp {pp}: {res['stages']} stages, ops {res['ops']}, max abs err "
                      f"{res['err']:.2g}, ppcc {res['compile_s']:.2f} s, all {time.time() - t0:.1f} s", flush=True)
    print(f"{time.time() - t_all:.0f} s in all")
    return finish(problems, len(models) * len(pps))


if __name__ == "__main__":
    sys.exit(main())
