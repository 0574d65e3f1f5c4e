#!/usr/bin/env python3
"""Half storage against f32 storage at the same reduced precision (issue 54,
"Real reduced precision"; docs/cuda.md "Half storage").

For each model, micro-batch and precision P (fp16, bf16), two plans of the
same ONNX file on the same inputs, alternated --runs times (each keeps its
best rate):
  f32 storage   the f32 plan run with pprt --precision P: every tensor,
                weight and message f32, the products' compute type P
                (what the seventh lease timed: ViT-B/16 fp16 0.48x autocast
                at batch 32)
  half storage  ppcc --precision P: products, the values between them,
                weights and messages in P (f32 inside the kernels)
Each with the speed options given by --options (default: the defaults);
its rate (pprt --stats-json's steady_samples_per_s after --warmup 4) and
its error against onnxruntime's f32 outputs (CPU provider, the same inputs;
max |y - ref| / max |ref|); where onnxruntime does not import, against
pprt's own f32 plan (said in the row).

Inputs: WORK/MODEL/model.onnx and WORK/MODEL/data_B/ as bench/cuda_vs_torch.py
leaves them (it runs first on a GPU day), or --model-dir DIR with DIR/model.onnx
and DIR/data_B/ made with --make-data (8 micro-batches of normal(0, 1)).

Usage: half_storage.py --ppcc PPCC --pprt PPRT --work DIR --out FILE.md
       [--models vit_b_16,resnet50] [--batches 8,32] [--precisions fp16,bf16]
       [--backend cuda] [--runs 2] [--options '--cuda-stride-views on ...']
       [--make-data]"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--ppcc", required=True)
ap.add_argument("--pprt", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--models", default="vit_b_16,resnet50")
ap.add_argument("--batches", default="8,32")
ap.add_argument("--precisions", default="fp16,bf16")
ap.add_argument("--backend", default="cuda")
ap.add_argument("--runs", type=int, default=2)
ap.add_argument("--options", default="", help="pprt options for every run (e.g. the speed options)")
ap.add_argument("--make-data", action="store_true", help="write data_B/ where it is missing")
a = ap.parse_args()


def rel_err(y, ref):
    fin = np.isfinite(ref)
    return float(np.max(np.abs(y[fin].astype(np.float64) - ref[fin]))) / float(np.max(np.abs(ref[fin])))


def rate(js):
    return json.load(open(js))["steady_samples_per_s"]


def pprt(plan, data, out, extra):
    js = out + ".json"
    argv = [a.pprt, plan, data, "--backend", a.backend, "-q", "--warmup", "4", "--stats-json", js, "-o", out]
    argv += shlex.split(a.options) + extra
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{shlex.join(argv)}: exit {r.returncode}: {r.stderr[-400:]}")
    return rate(js)


def output(out):
    names = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
    return np.load(os.path.join(out, names[0]))


def reference(model, data, fallback):
    try:
        import onnxruntime as rt
    except ImportError:
        return output(fallback), "pprt's f32 plan (no onnxruntime here)"
    s = rt.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(data, i.name + ".npy")) for i in s.get_inputs()}
    return s.run(None, feeds)[0], "onnxruntime f32"


def make_data(model, data, b):
    import onnx
    m = onnx.load(model, load_external_data=False)
    os.makedirs(data, exist_ok=True)
    init = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(54)
    for i in m.graph.input:
        if i.name in init:
            continue
        dims = [8 * b if k == 0 else d.dim_value for k, d in enumerate(i.type.tensor_type.shape.dim)]
        np.save(os.path.join(data, i.name + ".npy"), rng.standard_normal(dims).astype(np.float32))


rows = [f"# half storage against f32 storage ({a.backend}; {time.strftime('%Y-%m-%d %H:%M')} UTC; "
        f"options: {a.options or 'the defaults'}; best of {a.runs} alternated runs)", "",
        "| model | batch | precision | f32 storage samples/s | half storage samples/s | half / f32 | "
        "f32 storage error | half storage error | against |", "|---|---|---|---|---|---|---|---|---|"]


def flush():
    with open(a.out, "w") as f:
        f.write("\n".join(rows) + "\n")


for m in [x for x in a.models.split(",") if x]:
    d = os.path.join(a.work, m)
    model = os.path.join(d, "model.onnx")
    if not os.path.exists(model):
        rows.append(f"| {m} | | | missing {model} | | | | | |")
        continue
    for b in [int(x) for x in a.batches.split(",") if x]:
        data = os.path.join(d, f"data_{b}")
        if not os.path.isdir(data):
            if not a.make_data:
                rows.append(f"| {m} | {b} | | missing {data} | | | | | |")
                continue
            make_data(model, data, b)
        p32 = os.path.join(d, f"b{b}_pp1.plan")
        if not os.path.exists(p32):
            subprocess.run([a.ppcc, model, "-b", str(b), "-o", p32, "-q"], check=True)
        o32 = os.path.join(d, f"hs_out_{b}_f32")
        pprt(p32, data, o32, [])
        ref, against = reference(model, data, o32)
        for prec in [x for x in a.precisions.split(",") if x]:
            ph = os.path.join(d, f"b{b}_pp1_{prec}.plan")
            subprocess.run([a.ppcc, model, "-b", str(b), "--precision", prec, "-o", ph, "-q"], check=True)
            best = {"f32": 0.0, "half": 0.0}
            outs = {"f32": os.path.join(d, f"hs_out_{b}_{prec}_f32st"), "half": os.path.join(d, f"hs_out_{b}_{prec}_half")}
            try:
                for _ in range(a.runs):
                    best["f32"] = max(best["f32"], pprt(p32, data, outs["f32"], ["--precision", prec]))
                    best["half"] = max(best["half"], pprt(ph, data, outs["half"], []))
            except RuntimeError as e:
                rows.append(f"| {m} | {b} | {prec} | failed: {str(e)[:200]} | | | | | |")
                flush()
                continue
            e32, eh = rel_err(output(outs["f32"]), ref), rel_err(output(outs["half"]), ref)
            rows.append(f"| {m} | {b} | {prec} | {best['f32']:.1f} | {best['half']:.1f} | "
                        f"{best['half'] / best['f32'] if best['f32'] else float('nan'):.2f}x | {e32:.2e} | {eh:.2e} | {against} |")
            print(rows[-1], flush=True)
            flush()
flush()
print(f"half_storage: {a.out}", file=sys.stderr)
