#!/usr/bin/env python3
"""A/B of one PPRT_DNNL_* setting: pprt -pp 1 -b 8 --threads 2 --warmup 1 on 16 samples of each model,
VAR=0 and VAR=1 alternated ROUNDS times (default 3), the best rate of each; the output's largest
difference between the two (relative to its largest value) and the reorders per micro-batch.

Usage: env_ab.py VAR MODEL_DIR MODEL... (MODEL_DIR/MODEL/model.onnx and MODEL_DIR/MODEL/data/*.npy, as
tests/models/zoo.py and the timm sweep export them; env: PPCC, PPRT, ROUNDS)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPCC = os.environ.get("PPCC", os.path.join(SRC, "build/ppcc"))
PPRT = os.environ.get("PPRT", os.path.join(SRC, "build/pprt"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
if len(sys.argv) < 4:
    sys.exit(__doc__)
var, mdir = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    d = os.path.join(mdir, name)
    w = tempfile.mkdtemp(prefix="env_ab_")
    os.makedirs(w + "/data")
    for f in os.listdir(d + "/data"):
        a = np.load(os.path.join(d, "data", f))
        np.save(os.path.join(w, "data", f), np.concatenate([a] * (-(-16 // a.shape[0])))[:16])
    r = subprocess.run([PPCC, d + "/model.onnx", "-pp", "1", "-b", "8", "-q", "-o", w + "/p.plan"], capture_output=True)
    if r.returncode:
        print(f"{name}: ppcc failed", flush=True)
        continue
    best, reo, ok = {0: 0.0, 1: 0.0}, {}, True
    for _ in range(ROUNDS):
        for v in (0, 1):
            r = subprocess.run([PPRT, w + "/p.plan", w + "/data", "-q", "--threads", "2", "--warmup", "1", "-o",
                                f"{w}/o{v}", "--stats-json", f"{w}/s{v}.json"], capture_output=True, text=True,
                               env=dict(os.environ, **{var: str(v)}))
            if r.returncode:
                print(f"{name}: pprt failed: {r.stderr.strip()[-200:]}", flush=True)
                ok = False
                break
            s = json.load(open(f"{w}/s{v}.json"))
            best[v] = max(best[v], s["samples_per_s"])
            reo[v] = s["stages"][0]["layout_changes_per_micro_batch"]
        if not ok:
            break
    if not ok:
        continue
    diff = 0.0
    for o in sorted(f for f in os.listdir(f"{w}/o0") if f.endswith(".npy")):
        a, b = np.load(f"{w}/o0/{o}"), np.load(f"{w}/o1/{o}")
        diff = max(diff, float(np.max(np.abs(a - b))) / (float(np.max(np.abs(a))) + 1e-30))
    print(f"{name}: {best[1] / best[0]:.3f} ({best[0]:.1f} -> {best[1]:.1f} samples/s; reorders {reo[0]} -> {reo[1]}; "
          f"rel diff {diff:.1e})", flush=True)
