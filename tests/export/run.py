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
    are the model's; stages.json says the same;
  - no op of ppcc's own ("pp." domain or name) is left, and every node is in
    the default ONNX domain;
  - onnxruntime runs the stages one after the other, each sample alone (the
    plan's micro-batch is 1), feeding each stage what the one before it gave;
    the last stage's outputs are within rtol 1e-4 (atol 1e-5) of
    onnxruntime's on the whole model.
Exits 1 when anything fails; prints one line per model and -pp with the
stage count, the ops written per stage and the largest error.

Usage: run.py WORKDIR [--models a,b] [--pp 2,4]
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
ZOO = os.path.join(HERE, "..", "models", "zoo.py")
PPCC = os.environ["PPCC"]
MODELS = ["resnet50", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "densenet121",
          "convnext_tiny", "swin_t", "vit_b_16", "unet", "gpt"]
RTOL, ATOL = 1e-4, 1e-5


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def export_model(name, work):
    d = os.path.join(work, name)
    if not os.path.exists(os.path.join(d, "expected")):
        r = subprocess.run([sys.executable, ZOO, "export", name, d, "--batch", "2"], capture_output=True,
                           text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError("export failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    return d


def check(name, d, pp, problems):
    model = os.path.join(d, "model.onnx")
    out = os.path.join(d, f"stages_pp{pp}")
    rep = os.path.join(d, f"stages_pp{pp}.json")
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    r = subprocess.run([PPCC, model, "-pp", str(pp), "-b", "1", "-q", "-o", os.path.join(d, "stages.plan"),
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
    src = onnx.load(model, load_external_data=False)
    model_in = [i.name for i in src.graph.input if i.name not in {t.name for t in src.graph.initializer}]
    model_out = [o.name for o in src.graph.output]
    if meta["model_inputs"] != model_in or meta["model_outputs"] != model_out or len(meta["stages"]) != n:
        problems.append(f"{name} -pp {pp}: stages.json names {meta['model_inputs']} -> {meta['model_outputs']} "
                        f"with {len(meta['stages'])} stages; the model has {model_in} -> {model_out}, the report {n}")
    prev_out = model_in
    ops = []
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
        bad = [nd.op_type for nd in m.graph.node if nd.domain not in ("", "ai.onnx") or nd.op_type.startswith("pp.")]
        if bad:
            problems.append(f"{name} -pp {pp}: stage {k} still has ops {sorted(set(bad))}")
        ops.append(len(m.graph.node))
        prev_out = outs
    if prev_out != model_out:
        problems.append(f"{name} -pp {pp}: the last stage gives {prev_out}, the model {model_out}")
        return None
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
    return {"stages": n, "ops": ops, "err": worst, "compile_s": t_compile}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pp", default="2,4")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    problems = []
    t_all = time.time()
    for name in a.models.split(","):
        try:
            d = export_model(name, a.work)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {e}")
            continue
        for pp in (int(p) for p in a.pp.split(",")):
            t0 = time.time()
            res = check(name, d, pp, problems)
            if res:
                print(f"{name:20s} -pp {pp}: {res['stages']} stages, ops {res['ops']}, max abs err "
                      f"{res['err']:.2g}, ppcc {res['compile_s']:.2f} s, all {time.time() - t0:.1f} s", flush=True)
    print(f"{time.time() - t_all:.0f} s in all")
    for p in problems:
        print("FAIL:", p)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
