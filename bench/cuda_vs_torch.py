#!/usr/bin/env python3
"""pprt --backend cuda against PyTorch eager on the same GPU, in one script:
ResNet-50 and ViT-B/16 from tests/models/zoo.py (the same weights in both:
built under one seed, made non-trivial by zoo.make_nontrivial, exported once
with a dynamic batch axis by the zoo's TorchScript export). At micro-batch
1, 8 and 32: PyTorch as model.cuda().eval() under torch.no_grad() in f32 with
TF32 off (pprt's default precision is strict f32), the best of RUNS timed
loops of ITERS batches after a warm-up; pprt at -pp 1, 2 and 3 (the stages
all on the one GPU, each with its own stream) on ITERS batches, its steady-state
rate (`--stats-json` steady_samples_per_s, after `--warmup 4`), the best of
RUNS processes. pprt's outputs are checked against PyTorch's on the same
inputs (max abs error over max |y|). Rows are written as they finish, so a
run cut short keeps what it measured.
Usage: cuda_vs_torch.py --pprt PPRT --ppcc PPCC --work DIR --out FILE.md
       [--models resnet50,vit_b_16] [--batches 1,8,32] [--iters 32] [--runs 3]"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
import zoo  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--pprt", required=True)
ap.add_argument("--ppcc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--models", default="resnet50,vit_b_16")
ap.add_argument("--batches", default="1,8,32")
ap.add_argument("--pp", default="1,2,3", help="pipeline depths, all stages on the one GPU")
ap.add_argument("--iters", type=int, default=32)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--backend", default="cuda", help="pprt backend (dnnl or ref: a dry run on a machine without a GPU)")
a = ap.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

PPS = [int(p) for p in a.pp.split(",")]
dev = "cuda" if a.backend == "cuda" else "cpu"
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
rows = [f"GPU: {torch.cuda.get_device_name(0) if dev == 'cuda' else 'none (dry run, pprt --backend ' + a.backend + ')'}; torch {torch.__version__}; "
        f"{a.iters} batches per timed loop, best of {a.runs}", "",
        "| model | batch | PyTorch eager (samples/s) | "
        + " | ".join(f"pprt -pp {p}" for p in PPS) + " | " + " | ".join(f"-pp {p} / PyTorch" for p in PPS)
        + " | pprt vs PyTorch (max abs err / max abs y) |",
        "|---|---|---|" + "---|" * (2 * len(PPS)) + "---|"]


def flush():
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(rows) + "\n")
    os.replace(tmp, a.out)


def export(name, d):
    """The zoo's weights and TorchScript export, batch axis dynamic."""
    spec = zoo.REGISTRY[name]
    torch.manual_seed(0)
    np.random.seed(0)
    model = spec.build()
    zoo.make_nontrivial(model, 0)
    model.eval()
    path = os.path.join(d, "model.onnx")
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        mha = any(isinstance(m, (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer))
                  for m in model.modules())
        if not mha:
            for p in model.parameters():
                p.requires_grad_(False)
        x = torch.randn((2,) + tuple(spec.input_shape))
        t = time.time()
        with torch.set_grad_enabled(mha):
            zoo._export(model, (x,), path + ".tmp", zoo.OPSETS, ["input"], [spec.output],
                        {"input": {0: "batch"}, spec.output: {0: "batch"}})
        os.replace(path + ".tmp", path)
        print(f"[bench] {name}: exported in {time.time() - t:.1f} s", file=sys.stderr, flush=True)
    for p in model.parameters():
        p.requires_grad_(False)
    return spec, model.to(dev).eval(), path


flush()
for name in a.models.split(","):
    d = os.path.join(a.work, name)
    spec, model, onnx_path = export(name, d)
    for b in [int(s) for s in a.batches.split(",")]:
        gen = torch.Generator().manual_seed(b)
        inp = torch.randn((a.iters * b,) + tuple(spec.input_shape), generator=gen)
        xs = [inp[i * b:(i + 1) * b].to(dev) for i in range(a.iters)]
        with torch.no_grad():
            for x in xs[:4]:
                model(x)
            sync()
            best = 0.0
            for _ in range(a.runs):
                t = time.perf_counter()
                for x in xs:
                    model(x)
                sync()
                best = max(best, a.iters * b / (time.perf_counter() - t))
            y_torch = torch.cat([model(x).float().cpu() for x in xs]).numpy()
        del xs
        data = os.path.join(d, f"data_{b}")
        os.makedirs(data, exist_ok=True)
        np.save(os.path.join(data, "input.npy"), inp.numpy())
        got, err = {}, {}
        for pp in PPS:
            plan = os.path.join(d, f"b{b}_pp{pp}.plan")
            subprocess.run([a.ppcc, onnx_path, "-pp", str(pp), "-b", str(b), "-o", plan, "-q"], check=True)
            rates = []
            for _ in range(a.runs):
                js = os.path.join(d, "s.json")
                r = subprocess.run([a.pprt, plan, data, "--backend", a.backend, "-q", "--warmup", "4",
                                    "--stats-json", js, "-o", os.path.join(d, "out")])
                if r.returncode != 0:
                    break
                rates.append(json.load(open(js))["steady_samples_per_s"])
            got[pp] = max(rates) if rates else float("nan")
            try:
                y = np.load(os.path.join(d, "out", spec.output + ".npy"))
                err[pp] = float(np.max(np.abs(y.astype(np.float64) - y_torch))) / float(np.max(np.abs(y_torch)))
            except (OSError, ValueError) as e:
                err[pp] = f"no output ({e})"
        e = "; ".join(f"-pp {pp}: {v:.1e}" if isinstance(v, float) else f"-pp {pp}: {v}" for pp, v in err.items())
        rows.append(f"| {name} | {b} | {best:.1f} | " + " | ".join(f"{got[p]:.1f}" for p in PPS) + " | "
                    + " | ".join(f"{got[p] / best:.2f}" for p in PPS) + f" | {e} |")
        print(rows[-1], flush=True)
        flush()
