#!/usr/bin/env python3
"""Mixed-precision training's cost: ppcc --train --precision bf16|fp16 against f32.

torchvision's ResNet-18 (random weights, 10 classes, BatchNorm in training
mode, ROWS images of SIZE x SIZE a micro-batch), exported for training;
ppcc --train --loss cross-entropy:logits -b ROWS -pp P at each precision
(fp16 with --loss-scale dynamic), then pprt --steps S --accumulate M on
each backend: the time per step (the median of the log's steps after the
first) and the process's peak resident set (the log's peak_rss), each as a ratio
against the f32 plan's on the same backend in this script; and the
estimate of ppcc --report (its stash and 1F1B total per device). The peer
in the same script: PyTorch eager f32 and its CPU autocast (bf16), the same
steps (their ratio is the one to set pprt's against: pprt's products still
run in f32 on rounded values, docs/training.md).
Usage: bench/mixed_precision.py [--rows 4] [--size 64] [-pp 2] [--steps 4] [--accumulate 2]
[--backends ref,dnnl] [--threads 2]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rows", type=int, default=4)
ap.add_argument("--size", type=int, default=64)
ap.add_argument("-pp", type=int, default=2)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--accumulate", type=int, default=2)
ap.add_argument("--backends", default="ref,dnnl")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--ppcc", default=os.path.join(benchlib.ROOT, "build", "ppcc"))
ap.add_argument("--pprt", default=os.path.join(benchlib.ROOT, "build", "pprt"))
a = ap.parse_args()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402


work = tempfile.mkdtemp(prefix="mixed_bench_")
os.chdir(work)
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10)
init = {k: v.clone() for k, v in net.state_dict().items()}
torch.onnx.export(net, (torch.zeros(a.rows, 3, a.size, a.size),), "m.onnx", input_names=["input"],
                  output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
n = a.rows * a.accumulate
X = np.random.default_rng(0).standard_normal((n, 3, a.size, a.size)).astype(np.float32)
Y = np.random.default_rng(1).integers(0, 10, n).astype(np.int64)
os.makedirs("data")
np.save("data/input.npy", X)
np.save("data/labels.npy", Y)

print(f"# ResNet-18, {a.rows} images of {a.size}x{a.size} a micro-batch, {a.accumulate} a step, -pp {a.pp}, "
      f"{a.steps} SGD steps, {benchlib.cpu_name()}, load {os.getloadavg()[0]:.1f}")
print("| backend | precision | s/step | x f32 | peak RSS MB | x f32 | stash MB per device (report) | 1F1B total MB |")
print("|---|---|---|---|---|---|---|---|")
for backend in a.backends.split(","):
    base = None
    for prec in ("f32", "bf16", "fp16"):
        extra = ["--loss-scale", "dynamic"] if prec == "fp16" else []
        plan = f"{prec}.plan"
        rep = subprocess.run([a.ppcc, "m.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(a.rows), "-pp",
                              str(a.pp), "--precision", prec, "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9",
                              "--micro-batches", str(a.accumulate), "--report", "-o", plan, *extra],
                             capture_output=True, text=True)
        if rep.returncode:
            sys.exit(f"ppcc {prec}: {rep.stderr[-400:]}")
        rows = rep.stdout.split("msgs_GPipe")[1].splitlines()[1:1 + a.pp] if "msgs_GPipe" in rep.stdout else []
        stash = "/".join(r.split()[4] for r in rows)
        total = "/".join(r.split()[6] for r in rows)
        r = subprocess.run([a.pprt, plan, "data", "--steps", str(a.steps), "--accumulate", str(a.accumulate),
                            "--no-shuffle", "--backend", backend, "--threads", str(a.threads), "-q", "--log-json",
                            f"{prec}_{backend}.json"], capture_output=True, text=True)
        if r.returncode:
            print(f"| {backend} | {prec} | pprt exit {r.returncode}: {r.stderr.strip()[-200:]} |")
            continue
        log = json.load(open(f"{prec}_{backend}.json"))
        steps, rss = log["steps"], log.get("peak_rss", 0) / 2 ** 20
        secs = [n / s["samples_per_s"] for s in steps[1:] if s.get("samples_per_s")] or [float("nan")]
        t = statistics.median(secs)
        base = base or (t, rss)
        print(f"| {backend} | {prec} | {t:.3f} | {t / base[0]:.2f} | {rss:.0f} | {rss / base[1]:.2f} | {stash} | "
              f"{total} |")

# the peer: PyTorch eager, f32 and CPU autocast bf16, the same micro-batches and steps
torch.set_num_threads(a.threads)
eager = {}
for tag, ac in (("f32", False), ("autocast bf16", True)):
    m = torchvision.models.resnet18(num_classes=10)
    m.load_state_dict(init)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        for j in range(a.accumulate):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ac):
                out = m(torch.from_numpy(X[j * a.rows:(j + 1) * a.rows]))
            (F.cross_entropy(out.float(), torch.from_numpy(Y[j * a.rows:(j + 1) * a.rows])) / a.accumulate).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    eager[tag] = statistics.median(times[1:] or times)
    print(f"PyTorch eager {tag}: {eager[tag]:.3f} s/step ({eager[tag] / eager['f32']:.2f} x its f32)")
