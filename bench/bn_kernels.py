#!/usr/bin/env python3
"""The BatchNorm kernels of a training step against PyTorch's, one thread,
ResNet-50's shapes at batch 8 (every BatchNorm shape the model has).

pprt: build/bench_bn_kernels (bench/bn_kernels.c; built here if missing):
the training-mode forward and pp.BatchNormGrad as the oneDNN executor runs
them (runtime/dnnl/kernels/bnchan.c at the CPU's ISA, ONEDNN_MAX_CPU_ISA
caps it) and as the reference backend does. PyTorch 1.13 eager:
torch.batch_norm (training: the batch's statistics, the running ones
updated) and torch.ops.aten.native_batch_norm_backward with the forward's
saved mean and inverse std (what autograd calls), torch.set_num_threads(1).
Each the best of 7 runs, in nanoseconds an element; the last columns are
pprt's time over PyTorch's (below 1: pprt faster), and a line with the
totals over the shapes weighted by how often ResNet-50 has each.
Usage: bench/bn_kernels.py [--build build]"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(benchlib.ROOT, "build"))
a = ap.parse_args()
exe = os.path.join(a.build, "bench_bn_kernels")
if not os.path.exists(exe):
    benchlib.sh(["cmake", "--build", a.build, "--target", "bench_bn_kernels", "-j2"])

import torch  # noqa: E402

torch.set_num_threads(1)
# ResNet-50's BatchNorms at batch 8 by (C, H*W): how many the model has of each
COUNT = {(64, 12544): 1, (64, 3136): 6, (256, 3136): 4, (128, 3136): 1, (128, 784): 7, (512, 784): 5,
         (256, 784): 1, (256, 196): 11, (1024, 196): 7, (512, 196): 1, (512, 49): 5, (2048, 49): 4}


def best(fn, reps=7):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return min(t)


def torch_ns(n, c, s):
    """ns an element of PyTorch's training forward and its backward"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, c, s, generator=g).reshape(n, c, s, 1)
    dy = torch.randn(n, c, s, generator=g).reshape(n, c, s, 1)
    w, b, rm, rv = torch.ones(c), torch.zeros(c), torch.zeros(c), torch.ones(c)
    fwd = best(lambda: torch.batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5, False))
    _, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    bwd = best(lambda: torch.ops.aten.native_batch_norm_backward(dy, x, w, rm, rv, mean, invstd, True, 1e-5,
                                                                 [True, True, True]))
    return 1e9 * fwd / x.numel(), 1e9 * bwd / x.numel()


out = subprocess.run([exe, "8"], capture_output=True, text=True, check=True).stdout.splitlines()
isa = out[0].split()[-1]
print(f"# BatchNorm kernels, ResNet-50's shapes at batch 8, one thread, {benchlib.cpu_name()}, pprt at {isa}, "
      f"load average {os.getloadavg()[0]:.1f}; ns an element")
print(f"{'C':>5} {'HxW':>6} {'fwd pprt':>9} {'fwd ref':>8} {'fwd torch':>10} {'grad pprt':>10} {'grad ref':>9}"
      f" {'grad torch':>11} {'fwd ratio':>10} {'grad ratio':>11}")
tot = [0.0] * 6
for line in out[1:]:
    n, c, s, pf, pg, rf, rg = line.split()
    n, c, s = int(n), int(c), int(s)
    tf, tg = torch_ns(n, c, s)
    w = COUNT[(c, s)] * n * c * s
    for i, v in enumerate((float(pf), float(rf), tf, float(pg), float(rg), tg)):
        tot[i] += w * v
    print(f"{c:>5} {s:>6} {float(pf):>9.3f} {float(rf):>8.3f} {tf:>10.3f} {float(pg):>10.3f} {float(rg):>9.3f}"
          f" {tg:>11.3f} {float(pf) / tf:>10.2f} {float(pg) / tg:>11.2f}")
print(f"# a step's BatchNorms (ms, one thread): forward pprt {tot[0] / 1e6:.1f}, ref {tot[1] / 1e6:.1f}, "
      f"PyTorch {tot[2] / 1e6:.1f} ({tot[0] / tot[2]:.2f}x); gradient pprt {tot[3] / 1e6:.1f}, ref {tot[4] / 1e6:.1f}, "
      f"PyTorch {tot[5] / 1e6:.1f} ({tot[3] / tot[5]:.2f}x); load average {os.getloadavg()[0]:.1f}")
