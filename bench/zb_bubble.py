#!/usr/bin/env python3
"""The idle share of pprt's training schedules, ZB-H1 against 1F1B and GPipe.

torchvision's ResNet-18 (10 classes, random weights, BatchNorm in training
mode), images of --size x --size, micro-batches of --batch rows, --accumulate
M of them a step: ppcc --train -pp P once as usual and once with --schedule
zb-h1 (each device's backward split into B and a W stage), then pprt --steps
N+1 under 1F1B and GPipe (the plain plan) and ZB-H1 (the split one), on
--backend with --threads per stage. From --log-json, the first step left
out: the median measured bubble (1 - the devices' busy time over P x wall),
the schedule's formula ((P-1)/(M+P-1); ZB-H1's (P-1)/(3M+P-1) takes F, B and
W alike), samples/s, each stage's mean busy seconds a step (W stages last),
each device's most micro-batches held. Prints a Markdown table.
Usage: bench/zb_bubble.py [--pp 2] [--accumulate 8] [--steps 4] [--backend dnnl] [--threads 1]"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--pp", type=int, default=2)
ap.add_argument("--accumulate", type=int, default=8)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--size", type=int, default=64)
ap.add_argument("--backend", default="dnnl")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
a = ap.parse_args()
PPCC, PPRT = os.path.join(a.build, "ppcc"), os.path.join(a.build, "pprt")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

work = tempfile.mkdtemp(prefix="zb_bubble_")
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10).train()
x = torch.randn(a.batch, 3, a.size, a.size)
onnx = os.path.join(work, "r18.onnx")
torch.onnx.export(net, (x,), onnx, input_names=["input"], output_names=["logits"], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
data = os.path.join(work, "data")
os.makedirs(data)
n = a.batch * a.accumulate
np.save(os.path.join(data, "input.npy"), np.random.default_rng(0).standard_normal((n, 3, a.size, a.size), np.float32))
np.save(os.path.join(data, "labels.npy"), np.arange(n, dtype=np.int64) % 10)
plans = {}
for name, extra in (("plain", []), ("zb", ["--schedule", "zb-h1"])):
    plans[name] = os.path.join(work, f"{name}.plan")
    subprocess.run([PPCC, onnx, "--train", "--loss", "cross-entropy:logits", "-b", str(a.batch), "-pp", str(a.pp),
                    *extra, "-q", "-o", plans[name]], check=True)
print(f"ResNet-18, {a.size}x{a.size}, -pp {a.pp}, {a.accumulate} micro-batches of {a.batch} a step, --backend "
      f"{a.backend} --threads {a.threads}, median of {a.steps} steps after one")
print()
print("| schedule | plan | samples/s | measured bubble | formula | stage busy s a step (chain, then W) | held |")
print("|---|---|---:|---:|---:|---|---|")
for sched, plan in (("1f1b", "plain"), ("gpipe", "plain"), ("zb-h1", "zb"), ("1f1b", "zb")):
    log = os.path.join(work, f"{sched}_{plan}.json")
    subprocess.run([PPRT, plans[plan], data, "--steps", str(a.steps + 1), "--accumulate", str(a.accumulate),
                    "--schedule", sched, "--backend", a.backend, "--threads", str(a.threads), "-q",
                    "--log-json", log], check=True)
    with open(log) as f:
        r = json.load(f)
    steps = r["steps"][1:]
    busy = [statistics.mean(s["stage_busy_s"][i] for s in steps) for i in range(len(steps[0]["stage_busy_s"]))]
    print(f"| {sched} | {plan} | {statistics.median(s['samples_per_s'] for s in steps):.2f} | "
          f"{100 * statistics.median(s['bubble'] for s in steps):.1f}% | {100 * r['bubble_formula']:.1f}% | "
          f"{' '.join(f'{b:.3f}' for b in busy)} | {[d['held_peak'] for d in r['stash']]} |")
print()
cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
print(f"machine: {os.cpu_count()} cores, {cpu}")
shutil.rmtree(work)
