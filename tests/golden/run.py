#!/usr/bin/env python3
"""Golden IR tests and fusion equivalence.

For each committed model tests/golden/NAME.onnx:
  1. `ppcc NAME.onnx --dump-ir=all` must print exactly tests/golden/NAME.ir
     (the IR after every pass); --update rewrites the .ir files.
  2. The compiled plan (all passes) and the plan compiled with
     --disable-pass fuse --disable-pass simplify must both match onnxruntime on
     seeded random inputs (rtol 1e-4, atol 1e-5): each fusion is numerically
     the unfused graph.
  3. Properties a reader of the dumps relies on: after the passes no Identity,
     Dropout or BatchNormalization is left, and every shape is static.
Usage: run.py WORKDIR [--update]   (env: PPCC, PPRT)"""
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
update = "--update" in sys.argv
os.makedirs(work, exist_ok=True)
failures = []


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} -> exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


models = sorted(f[:-5] for f in os.listdir(HERE) if f.endswith(".onnx"))
for name in models:
    model = os.path.join(HERE, name + ".onnx")
    # 1. golden text
    text = run([PPCC, model, "--dump-ir=all", "-q", "-o", os.path.join(work, name + ".plan")])
    golden = os.path.join(HERE, name + ".ir")
    if update:
        with open(golden, "w") as f:
            f.write(text)
    elif not os.path.exists(golden) or open(golden).read() != text:
        failures.append(f"{name}: IR dump differs from {golden} (diff it; --update if intended)")
        with open(os.path.join(work, name + ".ir.got"), "w") as f:
            f.write(text)
    # 3. properties of the final IR
    final = text.split("# ir partition:")[1]
    for op in (" Identity ", " Dropout ", " BatchNormalization "):
        if op in final:
            failures.append(f"{name}: {op.strip()} left after the passes")
    if "?" in final:
        failures.append(f"{name}: a shape is not static after the passes")
    # 2. numerics against onnxruntime, fused and unfused
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    data = os.path.join(work, name + "_data")
    os.makedirs(data, exist_ok=True)
    feeds = {}
    for i in sess.get_inputs():
        feeds[i.name] = rng.standard_normal(i.shape).astype(np.float32)
        np.save(os.path.join(data, i.name + ".npy"), feeds[i.name])
    want = sess.run(None, feeds)
    variants = {"all passes": [], "unfused": ["--disable-pass", "fuse", "--disable-pass", "simplify"]}
    for label, extra in variants.items():
        plan = os.path.join(work, f"{name}_{extra and 'unfused' or 'fused'}.plan")
        out = os.path.join(work, f"{name}_{extra and 'unfused' or 'fused'}_out")
        run([PPCC, model, "-q", "-o", plan] + extra)
        run([PPRT, plan, data, "-o", out, "-q"])
        for o, w in zip(sess.get_outputs(), want):
            got = np.load(os.path.join(out, o.name + ".npy"))
            if got.shape != w.shape or not np.allclose(got, w, rtol=1e-4, atol=1e-5):
                err = np.abs(got - w).max() if got.shape == w.shape else "shape"
                failures.append(f"{name} ({label}): output {o.name} differs from onnxruntime (max err {err})")

print(f"golden: {len(models)} models, {len(failures)} failure(s)" + (" (updated)" if update else ""))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
