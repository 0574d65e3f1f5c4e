#!/usr/bin/env python3
"""Training throughput: pprt against PyTorch eager on the same CPU.

For each model (torchvision, random weights, 1000 classes), exported for
training (TrainingMode.TRAINING, no constant folding, opset 14): one
optimizer step (SGD, lr 1e-3) on a batch of B 224x224 images with
cross-entropy, timed as the median of --steps steps after one untimed,
  - PyTorch 1.13 eager, torch.set_num_threads(T), model.train();
  - pprt: ppcc --train --loss cross-entropy:logits -b B -pp P, then
    pprt --steps N+1 --backend dnnl --threads T, the median of the steps'
    samples/s from --log-json, the first left out.
Prints samples/s for each and the ratio pprt/PyTorch, and pprt's measured
bubble at -pp 2 (2 micro-batches of B/2 a step, 1F1B) next to (P-1)/(M+P-1);
then the CPU seconds of a step (every thread of the process, user and
system, the same median steps; pprt's from --log-json's cpu_s) for PyTorch
and -pp 1, and pprt's share of PyTorch's. On a shared machine the rates
follow the load; the CPU seconds much less so, most under --passive
(OMP_WAIT_POLICY=passive for both, set before PyTorch loads libgomp: the
OpenMP threads sleep instead of spinning while they wait).
With --fresh, -pp 1 runs a second time under PPRT_TRAIN_FRESH=1 (each
step makes its stages' executors, as before issue 55; runtime/keep.h),
right after the kept run: its samples/s, kept/fresh, and the kept run's
median seconds a step in the executors' weight reload (oneDNN's reorders).
Usage: bench/train.py [--models vit_b_16,resnet50] [--batch 8] [--threads 2] [--steps 3] [--passive] [--fresh]"""
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
ap.add_argument("--models", default="resnet50,vit_b_16")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--passive", action="store_true", help="OMP_WAIT_POLICY=passive for PyTorch and pprt")
ap.add_argument("--fresh", action="store_true", help="also -pp 1 with PPRT_TRAIN_FRESH=1 (executors made every step)")
ap.add_argument("--ppcc", default=os.path.join(benchlib.ROOT, "build", "ppcc"))
ap.add_argument("--pprt", default=os.path.join(benchlib.ROOT, "build", "pprt"))
a = ap.parse_args()
if a.passive:
    os.environ["OMP_WAIT_POLICY"] = "passive"  # before torch loads libgomp; pprt inherits it

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

torch.set_num_threads(a.threads)
B = a.batch


def torch_rate(model, x, y):
    """Samples/s and CPU seconds of a step (process CPU time: every thread), medians after the first step."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times, cpus = [], []
    for k in range(a.steps + 1):
        t, c = time.perf_counter(), time.process_time()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if k:
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
    return B / statistics.median(times), statistics.median(cpus)


def pprt_rate(model_path, work, pp, acc, fresh=False):
    plan = os.path.join(work, f"t{pp}.plan")
    rows = B // acc
    benchlib.sh([a.ppcc, model_path, "--train", "--loss", "cross-entropy:logits", "-b", str(rows), "-pp", str(pp),
                 "-q", "-o", plan])
    log = os.path.join(work, f"log{pp}.json")
    os.environ["PPRT_TRAIN_FRESH"] = "1" if fresh else "0"
    benchlib.sh([a.pprt, plan, os.path.join(work, "data"), "--steps", str(a.steps + 1), "--accumulate", str(acc),
                 "--optimizer", "sgd", "--lr", "1e-3", "--backend", "dnnl", "--threads", str(a.threads), "--no-shuffle",
                 "-q", "--log-json", log])
    steps = json.load(open(log))["steps"][1:]
    pprt_rate.reload_s = statistics.median(s.get("reload_s", 0) for s in steps)
    return (statistics.median(s["samples_per_s"] for s in steps), statistics.median(s["bubble"] for s in steps),
            statistics.median(s["cpu_s"] for s in steps))


print(f"# training throughput, batch {B}, {a.threads} threads, {benchlib.cpu_name()}"
      f"{', OMP_WAIT_POLICY=passive' if a.passive else ''}, load average {os.getloadavg()[0]:.1f}")
print(f"{'model':<12} {'PyTorch/s':>10} {'pprt pp1/s':>11} {'ratio':>6} {'pprt pp2/s':>11} {'bubble':>7} {'formula':>8}"
      f" {'PyTorch cpu s':>14} {'pprt pp1 cpu s':>15} {'cpu ratio':>10}"
      + (f" {'fresh pp1/s':>12} {'kept/fresh':>11} {'reload s':>9}" if a.fresh else ""))
for name in a.models.split(","):
    with tempfile.TemporaryDirectory() as work:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(num_classes=1000).train()
        x, y = torch.randn(B, 3, 224, 224), torch.randint(0, 1000, (B,))
        path = os.path.join(work, "model.onnx")
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        os.makedirs(os.path.join(work, "data"))
        np.save(os.path.join(work, "data", "input.npy"), np.concatenate([x.numpy()] * (a.steps + 1)))
        np.save(os.path.join(work, "data", "labels.npy"), np.concatenate([y.numpy()] * (a.steps + 1)))
        tr, tc = torch_rate(model, x, y)
        try:
            p1, _, c1 = pprt_rate(path, work, 1, 1)
            rl = pprt_rate.reload_s
            f1 = pprt_rate(path, work, 1, 1, fresh=True)[0] if a.fresh else 0
            p2, bub, _ = pprt_rate(path, work, 2, 2)
        except RuntimeError as e:
            print(f"{name:<12} {tr:>10.2f}  pprt failed: {e}")
            continue
        print(f"{name:<12} {tr:>10.2f} {p1:>11.2f} {p1 / tr:>6.2f} {p2:>11.2f} {100 * bub:>6.1f}% "
              f"{100 * (2 - 1) / (2 + 2 - 1):>7.1f}% {tc:>14.2f} {c1:>15.2f} {c1 / tc:>10.2f}"
              + (f" {f1:>12.2f} {p1 / f1:>11.2f} {rl:>9.3f}" if a.fresh else ""))
print(f"# load average at the end {os.getloadavg()[0]:.1f}")
