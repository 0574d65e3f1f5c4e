#!/usr/bin/env python3
"""pprt --backend cuda against PyTorch eager on the same GPU (the GPU day,
tests/cuda/run_on_gpu.sh): ResNet-50 and ViT-B/16 from tests/models/zoo.py at
micro-batch 1, 8, 32, pprt at -pp 1 and -pp 2 on one GPU, PyTorch as
model.cuda().eval() under torch.no_grad() in f32 with TF32 off (pprt's
default precision is strict f32). Samples per second, each the best of three
runs of 64 batches after a warm-up. Writes a Markdown table.
Usage: cuda_vs_torch.py --pprt PPRT --ppcc PPCC --zoo DIR --out FILE.md"""
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
ap.add_argument("--zoo", required=True)
ap.add_argument("--out", required=True)
a = ap.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
rows = ["| model | batch | PyTorch eager (samples/s) | pprt -pp 1 | pprt -pp 2 | -pp 1 / PyTorch |",
        "|---|---|---|---|---|---|"]
for name in ["resnet50", "vit_b_16"]:
    spec = zoo.REGISTRY[name]
    model = spec.build().cuda().eval()
    for b in [1, 8, 32]:
        d = os.path.join(a.zoo, f"bench_{name}_{b}")
        if not os.path.exists(os.path.join(d, "model.onnx")):
            zoo.export_model(name, d, batch=b)
        x = torch.randn(b, *spec.input_shape, device="cuda")
        with torch.no_grad():
            for _ in range(5):
                model(x)
            torch.cuda.synchronize()
            best = 0
            for _ in range(3):
                t = time.perf_counter()
                for _ in range(64):
                    model(x)
                torch.cuda.synchronize()
                best = max(best, 64 * b / (time.perf_counter() - t))
        data = os.path.join(d, "bench_data")
        os.makedirs(data, exist_ok=True)
        inp = np.random.rand(64 * b, *spec.input_shape).astype(np.float32)
        import onnx
        iname = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False).graph.input[0].name
        np.save(os.path.join(data, iname + ".npy"), inp)
        got = {}
        for pp in [1, 2]:
            plan = os.path.join(d, f"p{pp}.plan")
            subprocess.run([a.ppcc, os.path.join(d, "model.onnx"), "-pp", str(pp), "-b", str(b), "-o", plan, "-q"], check=True)
            rates = []
            for _ in range(3):
                subprocess.run([a.pprt, plan, data, "--backend", "cuda", "-q", "--warmup", "4", "--stats-json",
                                os.path.join(d, "s.json"), "-o", os.path.join(d, "out")], check=True)
                rates.append(json.load(open(os.path.join(d, "s.json")))["samples_per_s"])
            got[pp] = max(rates)
        rows.append(f"| {name} | {b} | {best:.1f} | {got[1]:.1f} | {got[2]:.1f} | {got[1] / best:.2f} |")
open(a.out, "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
