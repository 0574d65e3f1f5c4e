#!/usr/bin/env python3
"""The timm sweep (or the torchvision one) compiled and stepped for training
(docs/timm-sweep.md, "Training"): for every model that run_zoo.py exported
into WORK (WORK/NAME/model.onnx and its data), ppcc --train -b 2 at -pp 1, 2
and 4 with the loss cross-entropy:OUTPUT against labels 3 and 7 (mse:OUTPUT
against zeros where the first output is not [batch, classes]: a
segmentation map), and one step of each plan on pprt's default backend over
the export's two images: every output of the -pp 2 and -pp 4 steps (the
loss, every weight's gradient, the running statistics) must be the -pp 1
step's bytes, and every gradient finite. A model ppcc refuses is listed
with ppcc's message. Not in CI: about 11 minutes on 2 cores for the timm
sweep with the exports in place.

The exports are inference exports (eval mode, constants folded), as users
have them; docs/training.md says how to export for training. Correctness
against autograd is the train tests' (tests/train): this checks that the
whole sweep compiles, splits and steps, and that the split changes no bit.

Usage: train_sweep.py WORK [--models A,B] [--pp 2,4]   (env: PPCC, PPRT)"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

ap = argparse.ArgumentParser()
ap.add_argument("work")
ap.add_argument("--models")
ap.add_argument("--pp", default="2,4")
args = ap.parse_args()
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
splits = [int(p) for p in args.pp.split(",")]


def run(argv, timeout=900):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def one(name):
    d = os.path.join(args.work, name)
    model = os.path.join(d, "model.onnx")
    t = os.path.join(d, "train")
    shutil.rmtree(t, ignore_errors=True)
    os.makedirs(os.path.join(t, "data"))
    g = onnx.load(model, load_external_data=False).graph
    out = g.output[0].name
    x = [f for f in os.listdir(os.path.join(d, "data")) if f.endswith(".npy")]
    for f in x:
        shutil.copy(os.path.join(d, "data", f), os.path.join(t, "data", f))
    exp = os.path.join(d, "expected", out + ".npy")  # onnxruntime's output, when the export's dims are symbolic
    dims = list(np.load(exp, mmap_mode="r").shape) if os.path.exists(exp) else \
        [v.dim_value if v.dim_value > 0 else 2 for v in g.output[0].type.tensor_type.shape.dim]
    if len(dims) == 2:  # classes: cross-entropy against labels 3 and 7
        loss = f"cross-entropy:{out}"
        np.save(os.path.join(t, "data", "labels.npy"), np.array([3, 7], np.int64))
    else:  # a segmentation map and the like: the mean square against zeros
        loss = f"mse:{out}"
        np.save(os.path.join(t, "data", "target.npy"), np.zeros(dims, np.float32))
    row = {"model": name}
    t0 = time.time()
    outs = {}
    for pp in [1] + splits:
        plan = os.path.join(t, f"pp{pp}.plan")
        r = run([PPCC, model, "--train", "--loss", loss, "-b", "2", "-pp", str(pp), "-q", "-o", plan])
        if r.returncode:
            row["result"] = f"ppcc -pp {pp} exit {r.returncode}: {r.stderr.strip().splitlines()[-1][:300]}"
            return row
        o = os.path.join(t, f"out{pp}")
        r = run([PPRT, plan, os.path.join(t, "data"), "-o", o, "-q"])
        if r.returncode:
            row["result"] = f"pprt -pp {pp} exit {r.returncode}: {r.stderr.strip()[-300:]}"
            return row
        outs[pp] = o
    files = sorted(os.listdir(outs[1]))
    grads = [f for f in files if f.endswith(".grad.npy")]
    row["weights"] = len(grads)
    row["loss"] = float(np.load(os.path.join(outs[1], "loss.npy")).ravel()[0])
    bad = [f for f in grads if not np.isfinite(np.load(os.path.join(outs[1], f))).all()]
    if bad:
        row["result"] = f"non-finite gradients: {bad[:3]}"
        return row
    for pp in splits:
        got = sorted(os.listdir(outs[pp]))
        if got != files:
            row["result"] = f"-pp {pp} writes other outputs than -pp 1"
            return row
        diff = [f for f in files
                if open(os.path.join(outs[1], f), "rb").read() != open(os.path.join(outs[pp], f), "rb").read()]
        if diff:
            row["result"] = f"-pp {pp}: {len(diff)} outputs differ from -pp 1 ({diff[:3]})"
            return row
    row["seconds"] = round(time.time() - t0, 1)
    row["result"] = "pass"
    return row


names = args.models.split(",") if args.models else sorted(
    n for n in os.listdir(args.work) if os.path.exists(os.path.join(args.work, n, "model.onnx")))
rows = []
for n in names:
    try:
        r = one(n)
    except subprocess.TimeoutExpired as e:
        r = {"model": n, "result": f"timed out: {' '.join(e.cmd[:2])}"}
    except OSError as e:  # a binary replaced under the sweep
        r = {"model": n, "result": f"could not run: {e}"}
    rows.append(r)
    print(f"{r['model']}: {r['result']}" + (f" ({r['weights']} weights, loss {r['loss']:.4g}, {r['seconds']} s)"
                                            if r["result"] == "pass" else ""), flush=True)
ok = sum(r["result"] == "pass" for r in rows)
print(f"train_sweep: {ok} of {len(rows)} models compile at -pp 1, {args.pp} and step with every split's bytes "
      f"those of -pp 1")
sys.exit(0 if ok == len(rows) else 1)
