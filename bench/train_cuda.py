#!/usr/bin/env python3
"""Training on one GPU: pprt --backend cuda against PyTorch on the same GPU
(issue "Training on GPUs"; for the GPU day, tests/cuda/gpu_day.sh part 2t).

For each model (torchvision, random weights, 1000 classes), exported for
training (TrainingMode.TRAINING, no constant folding, opset 14):
  1. one step's loss and every weight gradient on --check-batch images:
     pprt (`ppcc --train -pp 1`, `pprt PLAN DATA -o OUT --backend cuda`,
     which writes the gradients) against PyTorch f32 on the GPU with TF32
     off in cuDNN and matmuls: the loss's relative difference and the
     largest per-tensor difference in norm (relative);
  2. throughput of an SGD step (lr 1e-3) at --batch images, the median of
     --steps steps after one untimed: PyTorch eager f32 (strict, as above),
     PyTorch eager with AMP (fp16 autocast, GradScaler, model and inputs
     channels_last: issue 56's bar), and pprt f32 at -pp 1 (one micro-batch
     a step; its inputs uploaded from the host each step, PyTorch's already
     on the GPU); the ratios pprt / each.
With --precision bf16|fp16 (gpu_day.sh part 2h) pprt trains a mixed-precision
plan (`ppcc --train --precision P`, fp16 with `--loss-scale dynamic`; its
products on the half route, pprt --cuda-half-products, whose count
--cuda-explain gives is printed), PyTorch's AMP runs at fp16 (the issue's bar)
and at bf16 (autocast bfloat16, no scaler), eager f32 is left out, and with
--split-bits 2 SGD steps at -pp 1 and -pp 2 are compared byte for byte (the
trained weights). --no-check skips step 1.
Usage: bench/train_cuda.py [--models resnet50] [--batch 32] [--check-batch 8] [--steps 5]
       [--ppcc build/ppcc] [--pprt build/pprt] [--backend cuda] [--precision f32|bf16|fp16]
       [--no-check] [--split-bits]"""
import argparse
import contextlib
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--models", default="resnet50")
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--check-batch", type=int, default=8)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--ppcc", default=os.path.join(benchlib.ROOT, "build", "ppcc"))
ap.add_argument("--pprt", default=os.path.join(benchlib.ROOT, "build", "pprt"))
ap.add_argument("--backend", default="cuda")
ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "fp16"])
ap.add_argument("--no-check", action="store_true")
ap.add_argument("--split-bits", action="store_true")
ap.add_argument("--profile", action="store_true",
                help="after the rate, 2 more steps under pprt --profile: the step's milliseconds by op type")
a = ap.parse_args()
# ppcc's options for a mixed-precision plan
PREC = [] if a.precision == "f32" else ["--precision", a.precision] + (["--loss-scale", "dynamic"] if a.precision == "fp16" else [])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

dev = "cuda" if torch.cuda.is_available() else "cpu"
warnings.filterwarnings("ignore")  # the exports' notes on BatchNorm's num_batches_tracked
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")


def file_name(w):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in w)


def torch_grads(model, x, y):
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    return float(loss), {k: p.grad.detach().cpu().numpy() for k, p in model.named_parameters()}


def torch_rate(model, x, y, amp, amp_dtype="fp16"):
    x, y = x.to(dev), y.to(dev)
    if amp:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler(enabled=amp and amp_dtype == "fp16" and dev == "cuda")
    hdt = torch.float16 if amp_dtype == "fp16" else torch.bfloat16
    times = []
    for k in range(a.steps + 1):
        if dev == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        half = amp and dev == "cuda"
        with torch.autocast(device_type=dev, dtype=hdt) if half else contextlib.nullcontext():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if dev == "cuda":
            torch.cuda.synchronize()
        if k:
            times.append(time.perf_counter() - t)
    return a.batch / statistics.median(times)


def check(work, path, model, name):
    xc = torch.randn(a.check_batch, 3, 224, 224)
    yc = torch.randint(0, 1000, (a.check_batch,))
    os.makedirs(os.path.join(work, "check"))
    np.save(os.path.join(work, "check", "input.npy"), xc.numpy())
    np.save(os.path.join(work, "check", "labels.npy"), yc.numpy())
    plan, out = os.path.join(work, "c.plan"), os.path.join(work, "cout")
    benchlib.sh([a.ppcc, path, "--train", "--loss", "cross-entropy:logits", "-b", str(a.check_batch), "-q", "-o", plan])
    t = time.perf_counter()
    benchlib.sh([a.pprt, plan, os.path.join(work, "check"), "-o", out, "-q", "--backend", a.backend])
    secs = time.perf_counter() - t
    loss, want = torch_grads(model, xc, yc)
    got_loss = float(np.load(os.path.join(out, "loss.npy")))
    worst, where = 0.0, ""
    for k, w in want.items():
        f = os.path.join(out, file_name(k + ".grad") + ".npy")
        if not os.path.exists(f):
            return f"{name}: no gradient of {k}"
        rel = float(np.linalg.norm(np.load(f).astype(np.float64) - w) / (np.linalg.norm(w) + 1e-30))
        if rel > worst:
            worst, where = rel, k
    return (f"{name}: one step of {a.check_batch} images on {a.backend} ({secs:.1f} s with start-up): loss {got_loss:.6f} "
            f"(PyTorch {loss:.6f}, {abs(got_loss - loss) / abs(loss):.1e} apart); {len(want)} gradients, the worst "
            f"{worst:.2e} from PyTorch's in norm ({where})")


def half_counts(stderr):
    """The half route's products (on it, of them) summed over the stages' --cuda-explain lines"""
    on = of = 0
    for line in stderr.splitlines():
        if "half products: " in line:
            w = line.split("half products: ")[1].split()
            on, of = on + int(w[0]), of + int(w[2])
    return on, of


def pprt_rate(work, path):
    plan, log = os.path.join(work, "t.plan"), os.path.join(work, "log.json")
    benchlib.sh([a.ppcc, path, "--train", "--loss", "cross-entropy:logits", "-b", str(a.batch), "-q", "-o", plan] + PREC)
    r = benchlib.sh([a.pprt, plan, os.path.join(work, "data"), "--steps", str(a.steps + 1), "--optimizer", "sgd",
                     "--lr", "1e-3", "--backend", a.backend, "--no-shuffle", "-q", "--log-json", log]
                    + (["--cuda-explain"] if PREC else []))
    if PREC:
        print(f"pprt {a.precision}: %d of %d products on the half route" % half_counts(r.stderr), flush=True)
    steps = json.load(open(log))["steps"][1:]
    if a.profile:
        print(profile(work, plan), flush=True)
    return statistics.median(s["samples_per_s"] for s in steps)


def profile(work, plan):
    """2 steps under pprt --profile (events around every step: no CUDA graph), the mean milliseconds a step
    summed by op type (benchlib.by_op)"""
    f = os.path.join(work, "prof.json")
    benchlib.sh([a.pprt, plan, os.path.join(work, "data"), "--steps", "2", "--optimizer", "sgd", "--lr", "1e-3",
                 "--backend", a.backend, "--no-shuffle", "-q", "--profile", f])
    agg = benchlib.by_op(f)
    return (f"pprt {a.precision} profile, ms a micro-batch of {a.batch} by op type: {sum(agg.values()):.1f} in all; "
            + ", ".join(f"{k} {v:.1f}" for k, v in agg.most_common(10)))


def split_bits(work, path):
    """2 SGD steps at -pp 1 and -pp 2: whether the trained weights are the same bytes"""
    dirs = []
    for pp in (1, 2):
        plan, w = os.path.join(work, "t.plan" if pp == 1 else f"s{pp}.plan"), os.path.join(work, f"sw{pp}")
        if pp > 1:  # (-pp 1: pprt_rate's plan)
            benchlib.sh([a.ppcc, path, "--train", "--loss", "cross-entropy:logits", "-b", str(a.batch), "-pp", str(pp),
                         "-q", "-o", plan] + PREC)
        benchlib.sh([a.pprt, plan, os.path.join(work, "data"), "--steps", "2", "--optimizer", "sgd", "--lr", "1e-3",
                     "--backend", a.backend, "--no-shuffle", "-q", "--save-weights", w])
        dirs.append(w)
    names = sorted(os.listdir(dirs[0]))
    diff = [n for n in names if open(os.path.join(dirs[0], n), "rb").read() != open(os.path.join(dirs[1], n), "rb").read()]
    return f"-pp 1 against -pp 2, 2 steps: {len(diff)} of {len(names)} weights differ" + (f" ({diff[:3]})" if diff else "")


gpu = torch.cuda.get_device_name(0) if dev == "cuda" else benchlib.cpu_name()
print(f"# training on one GPU ({gpu}), batch {a.batch}, SGD; PyTorch {torch.__version__}, f32 strict (no TF32)")
rows = []
for name in a.models.split(","):
    with tempfile.TemporaryDirectory() as work:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(num_classes=1000).train()
        x, y = torch.randn(a.batch, 3, 224, 224), torch.randint(0, 1000, (a.batch,))
        path = os.path.join(work, "model.onnx")
        # torch 2.9+ exports through dynamo by default: the TorchScript exporter, as torch 1.13's
        kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, (x[:2],), path, input_names=["input"], output_names=["logits"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, **kw)
        model = model.to(dev)
        try:
            if not a.no_check:
                print(check(work, path, model, name), flush=True)
        except RuntimeError as e:
            print(f"{name}: the gradient check failed: {e}", flush=True)
        os.makedirs(os.path.join(work, "data"))
        np.save(os.path.join(work, "data", "input.npy"), np.concatenate([x.numpy()] * (a.steps + 1)))
        np.save(os.path.join(work, "data", "labels.npy"), np.concatenate([y.numpy()] * (a.steps + 1)))
        # (PyTorch's columns: eager f32 and AMP fp16; with --precision, AMP fp16 and AMP bf16)
        first = torch_rate(model, x, y, bool(PREC), "fp16")
        amp = torch_rate(model, x, y, True, "bf16" if PREC else "fp16")
        try:
            mine = pprt_rate(work, path)
            if a.split_bits:
                print(f"{name} {a.precision}: {split_bits(work, path)}", flush=True)
        except RuntimeError as e:
            print(f"{name}: pprt failed: {e}", flush=True)
            continue
        rows.append((name, first, amp, mine))
cols = ("PyTorch eager AMP fp16", "PyTorch eager AMP bf16") if PREC else ("PyTorch eager f32", "PyTorch eager AMP fp16")
print(f"\n| model | batch | {cols[0]} | {cols[1]} | pprt {a.precision} -pp 1 | / {cols[0][14:]} | / {cols[1][14:]} |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, first, amp, mine in rows:
    print(f"| {name} | {a.batch} | {first:.1f} | {amp:.1f} | {mine:.1f} | {mine / first:.2f} | {mine / amp:.2f} |")
