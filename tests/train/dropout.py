#!/usr/bin/env python3
"""Training-mode Dropout (ppcc --train's pp.Dropout, pprt's dropout_seed).

The mask is specified, not random: element i of a micro-batch is kept when
u_i >= ratio, u_i the top 53 bits of mix(base ^ i) / 2^53, base =
mix(mix(mix(seed) ^ key) ^ counter), mix splitmix64's step, key the FNV-1a
hash of the Dropout node's name shifted right by 2. This file computes it
in NumPy on its own and checks:
  * one run of the gradient plan (dropout_seed given as data) at -pp 1 and
    2, on ref, dnnl and cuda-emu (the CUDA kernel's mask): the loss and every gradient match PyTorch autograd
    of the same network with its Dropouts replaced by multiplication with
    those masks (rtol 1e-4, atol 1e-5 of the largest gradient);
  * pprt's own mask (a Dropout of ones, read back from the plan's output) on
    ref and cuda-emu: the specified one, element for element; its kept
    fraction at ratios 0.1, 0.5, 0.9 over 65536 elements: within
    5 standard deviations of 1 - ratio; a negative counter keeps everything;
  * pprt --epochs (2 micro-batches a step, 3 steps, SGD): the weights match
    PyTorch trained with the masks of counters 0..5 (micro-batch m of step s
    gets (s - 1) * M + m; within 1e-5 + 1e-4 relative), so the masks differ
    across micro-batches and steps, and -pp 1, -pp 2, --replicas 2 and -pp 2
    with --recompute all (the masks drawn again in the backward stages) give
    the same bits.
Usage: dropout.py PPCC PPRT WORK"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import file_name, mask  # noqa: E402

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_dropout")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

class Net(nn.Module):
    """Linear, GELU, Dropout(0.5), Linear, Dropout(0.2) over [N, T, C], mean over T, Linear: the masks
    given to forward() replace the Dropouts (the oracle); without them the Dropouts run (the export)"""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(6, 16), nn.Linear(16, 8), nn.Linear(8, 5)
        self.d1, self.d2 = nn.Dropout(0.5), nn.Dropout(0.2)

    def forward(self, x, masks=None):
        h = F.gelu(self.fc1(x))
        h = h * masks[0] if masks is not None else self.d1(h)
        h = self.fc2(h)
        h = h * masks[1] if masks is not None else self.d2(h)
        return self.head(h.mean(1))


torch.manual_seed(0)
net = Net()
N, T = 4, 3
os.makedirs("data", exist_ok=True)
net.train()
torch.onnx.export(net, (torch.randn(N, T, 6),), "net.onnx", input_names=["x"], output_names=["out"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
drops = [n.name for n in onnx.load("net.onnx").graph.node if n.op_type == "Dropout"]
check(len(drops) == 2, f"the export has {len(drops)} Dropouts, want 2")
SHAPES = [(N, T, 16), (N, T, 8)]
RATIOS = [0.5, 0.2]

plans = {}
for pp in (1, 2):
    plans[pp] = f"net_pp{pp}.plan"
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:out", "-b", str(N), "-pp", str(pp),
                        "-q", "-o", plans[pp]], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc -pp {pp}: exit {r.returncode}: {r.stderr[-400:]}")
# --recompute all: each backward stage draws its forward's masks again (a pure function of dropout_seed)
r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:out", "-b", str(N), "-pp", "2",
                    "--recompute", "all", "-q", "-o", "net_pp2_rc.plan"], capture_output=True, text=True)
check(r.returncode == 0, f"ppcc -pp 2 --recompute all: exit {r.returncode}: {r.stderr[-400:]}")


def oracle(x, labels, seed, counter):
    masks = [torch.tensor(mask(d, rt, seed, counter, s)) for d, rt, s in zip(drops, RATIOS, SHAPES)]
    net.zero_grad()
    loss = F.cross_entropy(net(x, masks), labels)
    loss.backward()
    return loss.item(), {n: p.grad.numpy().copy() for n, p in net.named_parameters()}


# ---- one run of the gradient plan, dropout_seed given --------------------------------------------
x = torch.randn(N, T, 6)
labels = torch.randint(0, 5, (N,))
np.save("data/x.npy", x.numpy())
np.save("data/labels.npy", labels.numpy())
for seed, counter in ((7, 0), (7, 1), (123456789, 42)):
    np.save("data/dropout_seed.npy", np.array([seed, counter], np.int64))
    wl, want = oracle(x, labels, seed, counter)
    M = max(float(np.abs(w).max()) for w in want.values())
    for pp in (1, 2):
        for be in ("ref", "dnnl", "cuda-emu"):
            tag = f"seed {seed} counter {counter} -pp {pp} on {be}"
            o = f"out_{seed}_{counter}_{pp}_{be}"
            if not os.path.exists(plans[pp]):
                continue
            r = subprocess.run([PPRT, plans[pp], "data", "-o", o, "-q", "--backend", be], capture_output=True,
                               text=True)
            check(r.returncode == 0, f"{tag}: pprt exit {r.returncode}: {r.stderr[-400:]}")
            if r.returncode:
                continue
            gl = float(np.load(os.path.join(o, "loss.npy")))
            check(abs(gl - wl) <= 1e-4 * abs(wl) + 1e-6, f"{tag}: loss {gl} want {wl}")
            for n, w in want.items():
                f = os.path.join(o, file_name(n + ".grad") + ".npy")
                g = np.load(f) if os.path.exists(f) else None
                ok = g is not None and g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-5 * M)
                check(ok, f"{tag}: '{n}' gradient off by "
                          f"{float(np.abs(g - w).max()) if g is not None and g.shape == w.shape else 'shape'}")
# two counters give two masks (and two losses)
l0 = float(np.load("out_7_0_1_ref/loss.npy")) if os.path.exists("out_7_0_1_ref/loss.npy") else None
l1 = float(np.load("out_7_1_1_ref/loss.npy")) if os.path.exists("out_7_1_1_ref/loss.npy") else None
check(l0 is not None and l1 is not None and l0 != l1, f"counters 0 and 1 give the same loss {l0}")

# ---- the kept fraction of pprt's own mask ------------------------------------------------------------


class Ones(nn.Module):
    def __init__(self, ratio):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.d = nn.Dropout(ratio)

    def forward(self, x):
        return self.d(x * self.w)


R, C = 64, 1024
for ratio in (0.1, 0.5, 0.9):
    d = f"keep_{ratio}"
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    m = Ones(ratio).train()
    torch.onnx.export(m, (torch.ones(R, C),), f"{d}/m.onnx", input_names=["x"], output_names=["out"],
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    r = subprocess.run([PPCC, f"{d}/m.onnx", "--train", "--loss", "mse:out", "-b", str(R), "-q", "-o", f"{d}/p.plan"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"ratio {ratio}: ppcc exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode:
        continue
    np.save(f"{d}/data/x.npy", np.ones((R, C), np.float32))
    np.save(f"{d}/data/target.npy", np.zeros((R, C), np.float32))
    name = [n.name for n in onnx.load(f"{d}/m.onnx").graph.node if n.op_type == "Dropout"][0]
    for counter, be in ((5, "ref"), (-1, "ref"), (5, "cuda-emu"), (-1, "cuda-emu")):
        np.save(f"{d}/data/dropout_seed.npy", np.array([3, counter], np.int64))
        o = f"{d}/out{counter}_{be}"
        r = subprocess.run([PPRT, f"{d}/p.plan", f"{d}/data", "-o", o, "-q", "--backend", be], capture_output=True,
                           text=True)
        check(r.returncode == 0, f"ratio {ratio}: pprt exit {r.returncode}: {r.stderr[-300:]}")
        if r.returncode:
            continue
        y = np.load(f"{o}/out.npy")
        want = mask(name, ratio, 3, counter, (R, C))
        check(np.array_equal(y, want), f"ratio {ratio} counter {counter} on {be}: pprt's mask is not the specified "
                                       f"one ({int((y != want).sum())} elements differ)")
        if be != "ref":
            continue
        if counter >= 0:
            kept, n = float((y != 0).mean()), R * C
            sd = (ratio * (1 - ratio) / n) ** 0.5
            check(abs(kept - (1 - ratio)) <= 5 * sd, f"ratio {ratio}: kept {kept:.4f}, want {1 - ratio} +- {5 * sd:.4f}")
            print(f"ratio {ratio}: kept {kept:.4f} of {n} (expected {1 - ratio}, sd {sd:.4f})")
        else:
            check(bool((y == 1).all()), f"ratio {ratio}: a negative counter drops elements")

# ---- pprt --epochs: the masks per micro-batch and step, -pp 1 / 2 / --replicas 2 ---------------------
ACC, STEPS, LR, SEED = 2, 3, 0.1, 11
xs = torch.randn(N * ACC, T, 6)
ls = torch.randint(0, 5, (N * ACC,))
os.makedirs("tdata", exist_ok=True)
np.save("tdata/x.npy", xs.numpy())
np.save("tdata/labels.npy", ls.numpy())
init = {n: p.detach().clone() for n, p in net.named_parameters()}
runs = {}
plans["rc"] = "net_pp2_rc.plan"
for tag, pp, extra in (("pp1", 1, []), ("pp2", 2, []), ("pp2_rep2", 2, ["--replicas", "2"]), ("pp2_rc", "rc", [])):
    out = f"w_{tag}"
    r = subprocess.run([PPRT, plans[pp], "tdata", "--steps", str(STEPS), "--accumulate", str(ACC), "--no-shuffle",
                        "--seed", str(SEED), "--optimizer", "sgd", "--lr", str(LR), "--save-weights", out, "-q",
                        *extra], capture_output=True, text=True)
    check(r.returncode == 0, f"--epochs {tag}: exit {r.returncode}: {r.stderr[-400:]}")
    if r.returncode == 0:
        runs[tag] = {n: np.load(os.path.join(out, file_name(n) + ".npy")) for n in init}
# PyTorch: the same steps, micro-batch m of step s with the masks of counter (s - 1) * ACC + m
with torch.no_grad():
    for n, p in net.named_parameters():
        p.copy_(init[n])
for s in range(1, STEPS + 1):
    acc = {n: 0 for n in init}
    for m in range(ACC):
        _, g = oracle(xs[m * N:(m + 1) * N], ls[m * N:(m + 1) * N], SEED, (s - 1) * ACC + m)
        for n in acc:
            acc[n] = acc[n] + g[n] / ACC
    with torch.no_grad():
        for n, p in net.named_parameters():
            p -= LR * torch.tensor(acc[n])
for tag, w in runs.items():
    for n, p in net.named_parameters():
        want = p.detach().numpy()
        check(np.allclose(w[n], want, rtol=1e-4, atol=1e-5),
              f"--epochs {tag}: '{n}' off PyTorch's by {float(np.abs(w[n] - want).max()):.3g}")
for tag in ("pp2", "pp2_rep2", "pp2_rc"):
    if "pp1" in runs and tag in runs:
        check(all(np.array_equal(runs["pp1"][n], runs[tag][n]) for n in init),
              f"--epochs: {tag}'s weights are not -pp 1's bits")

testlib.finish("train_dropout")
