#!/usr/bin/env python3
"""100 SGD steps of ResNet-18: pprt's trajectory against PyTorch's (a benchmark: minutes, not a ctest).

torchvision's ResNet-18 (10 classes, random weights, BatchNorm in training
mode), N random SIZE x SIZE images with random labels, steps of 2
micro-batches of ROWS in the data's order (--no-shuffle), SGD with momentum
MOM and lr LR, 100 steps: ppcc --train -pp 2,
pprt on the reference kernels; PyTorch 1.13 takes the same steps (each
micro-batch its own forward, so its own BatchNorm statistics; the step's
loss the mean of the two) in float32, and again in float64, whose distance
from the float32 run is how far rounding alone carries this trajectory.
Reported (and checked, the run failing otherwise):
  - the largest relative difference of a step's loss from PyTorch's
    float32 one over the run, within 3x the float64 run's largest plus 1%
    (a chaotic trajectory's single steps cross: step by step the float64
    run is sometimes nearer, sometimes further);
  - every trained weight and running statistic no further from PyTorch's
    float32 one than 3x the float32 run's distance from the float64 run,
    or 1e-5 of the tensor's largest value where that is larger.
Usage: bench/train_trajectory.py WORK [--size 32] [--rows 8] [--lr 0.005] [--momentum 0.9]"""
import json
import os
import subprocess
import sys

import argparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "train"))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import file_name  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("work")
ap.add_argument("--size", type=int, default=32)
ap.add_argument("--rows", type=int, default=8)
ap.add_argument("--lr", type=float, default=0.005)
ap.add_argument("--momentum", type=float, default=0.9)
ap.add_argument("--ppcc", default=os.path.join(ROOT, "build", "ppcc"))
ap.add_argument("--pprt", default=os.path.join(ROOT, "build", "pprt"))
a = ap.parse_args()
PPCC, PPRT, WORK = a.ppcc, a.pprt, a.work
testlib.start(WORK, "train_trajectory")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

STEPS, ROWS, ACC, N, LR, MOM, SIZE = 100, a.rows, 2, 16 * a.rows, a.lr, a.momentum, a.size
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10).train()
x = torch.randn(N, 3, SIZE, SIZE)
y = torch.randint(0, 10, (N,))
torch.onnx.export(net, (x[:ROWS],), "resnet18.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
start = {k: v.clone() for k, v in net.state_dict().items()}  # after the export's forward, as the model holds them
os.makedirs("data", exist_ok=True)
np.save("data/input.npy", x.numpy())
np.save("data/labels.npy", y.numpy())


def benchlib_cpu():
    r = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in r.splitlines() if ln.startswith("Model name:")), "?")


def torch_run(dtype):
    m = torchvision.models.resnet18(num_classes=10).train()
    m.load_state_dict(start)
    m = m.to(dtype)
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOM)
    xs = x.to(dtype)
    losses = []
    per_epoch = N // (ROWS * ACC)
    for k in range(STEPS):
        base = (k % per_epoch) * ROWS * ACC
        opt.zero_grad()
        ls = [F.cross_entropy(m(xs[base + j * ROWS:base + (j + 1) * ROWS]), y[base + j * ROWS:base + (j + 1) * ROWS])
              for j in range(ACC)]
        loss = sum(ls) / ACC
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return {k: v.double().numpy() for k, v in m.state_dict().items()}, losses


w32, l32 = torch_run(torch.float32)
w64, l64 = torch_run(torch.float64)

r = subprocess.run([PPCC, "resnet18.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp", "2",
                    "-q", "-o", "r2.plan"], capture_output=True, text=True)
check(r.returncode == 0, f"ppcc: exit {r.returncode}: {r.stderr[-300:]}")
r = subprocess.run([PPRT, "r2.plan", "data", "--steps", str(STEPS), "--accumulate", str(ACC), "--no-shuffle",
                    "--optimizer", "sgd", "--lr", str(LR), "--momentum", str(MOM), "--backend", "ref",
                    "--save-weights", "after", "--log-json", "log.json", "-q"], capture_output=True, text=True)
check(r.returncode == 0, f"pprt: exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    with open("log.json") as f:
        got = [s["loss"] for s in json.load(f)["steps"]]
    check(len(got) == STEPS, f"{len(got)} steps logged")
    # the trajectory as a whole: a chaotic run's single steps cross (pprt's loss nearer float64's one step, further
    # the next), so the largest step-loss difference over the run is set against float64's largest
    worst_loss = max(abs(p - q) / abs(q) for p, q in zip(got, l32))
    drift_loss = max(abs(p - q) / abs(q) for p, q in zip(l64, l32))
    check(worst_loss <= 3 * drift_loss + 0.01, f"the largest step-loss difference {worst_loss:.3g} (relative) is over "
          f"3x float64's {drift_loss:.3g} + 1%")
    check(l32[-1] < 0.5 * l32[0], f"PyTorch's loss went {l32[0]:.4f} -> {l32[-1]:.4f}: the case does not train")
    worst, n = 0.0, 0
    for k, want in w32.items():
        if "num_batches_tracked" in k:
            continue
        f = os.path.join("after", file_name(k) + ".npy")
        check(os.path.exists(f), f"no trained tensor {k}")
        if not os.path.exists(f):
            continue
        g = np.load(f).astype(np.float64)
        err = float(np.abs(g - want).max())
        drift = float(np.abs(w64[k] - want).max())
        tol = max(3 * drift, 1e-5 * float(np.abs(want).max()))
        check(err <= tol, f"{k}: {err:.3g} off PyTorch's float32 weights; float64 is {drift:.3g} off them "
              f"(tolerance {tol:.3g})")
        worst = max(worst, err / tol)
        n += 1
    print(f"{benchlib_cpu()}; {SIZE}x{SIZE}, {ROWS} rows x {ACC}, lr {LR}, momentum {MOM}")
    print(f"{STEPS} SGD steps: loss {l32[0]:.4f} -> {l32[-1]:.4f} (PyTorch f32) / {got[0]:.4f} -> {got[-1]:.4f} (pprt); "
          f"largest step-loss difference {worst_loss:.2e} (f64 vs f32: {drift_loss:.2e}); {n} tensors, the largest "
          f"difference {worst:.2f} of its tolerance")

testlib.finish("train_trajectory")
