#!/usr/bin/env python3
"""bench/memory.py: ppcc's memory estimate against what pprt measures.

For each model (torchvision ResNet-50, EfficientNet-B0, ViT-B/16; random
weights, tests/models/export_torchvision.py), one stage (-pp 1):

1. Activation memory at micro-batch B (ACT_BATCHES): ppcc's estimate is the
   stage's memory less its weights (`--report-json`: the activation arena plus
   --depth x (the input and output messages)); pprt's measure is how much its
   resident set grew while it ran two micro-batches: peak_rss_bytes less
   rss_loaded_bytes (--stats-json: the RSS once the plan was loaded and
   checked, the executor created and the data read, before the first
   micro-batch), on the reference backend (`--backend ref`, which runs the
   plan's own arena) and, for comparison, on oneDNN (which plans its own
   arena and adds scratch buffers, so its figure is not what the plan says).
2. --max-batch against a real run: R (what the process holds besides the
   plan: binary, libraries, the samples) is measured once, as pprt's
   rss_loaded_bytes at micro-batch 1 less the plan's weights; a cap C is set so that about TARGET samples fit; `ppcc --max-batch -pp 1
   --max-memory C --reserve R` gives B; pprt runs micro-batches of B (and
   B+1) on the same samples (--backend ref): its peak RSS must be within C
   at B, and `ppcc -b B+1` must not fit.

Usage: bench/memory.py [BUILD_DIR]   (default build/)
Environment: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), ACT_BATCHES
(default "8 16"), TARGET (default 24), MODEL_DIR (NAME/model.onnx exported
before is used as it is). Prints Markdown on stdout."""
import json
import os
import sys
import time

import numpy as np

from benchlib import ROOT, cpu_name, each_model, export, sh

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
MODELS = os.environ.get("MODELS", "resnet50 efficientnet_b0 vit_b_16").split()
ACT_BATCHES = [int(b) for b in os.environ.get("ACT_BATCHES", "8 16").split()]
TARGET = int(os.environ.get("TARGET", "24"))
MB_SAMPLES = 32
PPCC, PPRT = os.path.join(BUILD, "ppcc"), os.path.join(BUILD, "pprt")


def data(work, n, tag):
    d = os.path.join(work, "data_" + tag)
    os.makedirs(d, exist_ok=True)
    x = np.random.default_rng(0).standard_normal((n, 3, 224, 224)).astype(np.float32)
    np.save(os.path.join(d, "input.npy"), x)
    return d


def estimate(model, b, work, *extra):
    rj = os.path.join(work, "r.json")
    plan = os.path.join(work, "m.plan")
    sh([PPCC, model, "-pp", "1", "-b", str(b), "-o", plan, "-q", "--report-json", rj, *extra])
    st = json.load(open(rj))["stages"][0]
    return plan, st


def measure(plan, d, backend, work):
    sj = os.path.join(work, "s.json")
    sh([PPRT, plan, d, "--backend", backend, "--threads", "1", "-q", "-o", os.path.join(work, "o"),
        "--stats-json", sj])
    s = json.load(open(sj))
    return s["peak_rss_bytes"], s["rss_loaded_bytes"]


def bench_model(name, work):
    model = export(name, work)
    act = []
    for b in ACT_BATCHES:
        plan, st = estimate(model, b, work)
        d = data(work, 2 * b, f"act{b}")
        est = st["memory_bytes"] - st["params_bytes"]
        row = {"batch": b, "est": est, "arena": st["peak_activation_bytes"]}
        for backend in ("ref", "dnnl"):
            peak, loaded = measure(plan, d, backend, work)
            row[backend] = peak - loaded
        act.append(row)
    # --max-batch against a run
    d = data(work, MB_SAMPLES, "mb")
    plan1, st1 = estimate(model, 1, work)
    _, loaded1 = measure(plan1, d, "ref", work)
    reserve = loaded1 - st1["params_bytes"]
    _, st2 = estimate(model, 2, work)
    per = st2["memory_bytes"] - st1["memory_bytes"]
    cap = ((reserve + st1["memory_bytes"] + (TARGET - 1) * per) // 1000000 + 1) * 1000000
    rj = os.path.join(work, "mb.json")
    t0 = time.time()
    sh([PPCC, model, "--max-batch", "-pp", "1", "--max-memory", str(cap), "--reserve", str(reserve),
        "--report-json", rj])
    mb_s = time.time() - t0
    mb = json.load(open(rj))["max_batch"]
    B = mb["micro_batch"]
    planB, stB = estimate(model, B, work, "--max-memory", str(cap), "--reserve", str(reserve))
    peakB, loadedB = measure(planB, d, "ref", work)
    over = sh([PPCC, model, "-pp", "1", "-b", str(B + 1), "--max-memory", str(cap), "--reserve", str(reserve),
               "-o", os.path.join(work, "x.plan"), "-q"], code=2).stderr.strip()
    planC, stC = estimate(model, B + 1, work)
    peakC, _ = measure(planC, d, "ref", work)
    return {"model": name, "act": act, "reserve": reserve, "cap": cap, "batch": B, "max_batch_s": mb_s,
            "probes": mb["probes"], "est_B": stB["memory_bytes"] + reserve, "peak_B": peakB, "loaded_B": loadedB,
            "est_B1": stC["memory_bytes"] + reserve, "peak_B1": peakC, "over_msg": over,
            "limit": mb["limit"]}


def main():
    cpu = cpu_name()
    res = each_model(MODELS, bench_model)
    M = 1e6
    print(f"CPU: {cpu}; {time.strftime('%Y-%m-%d %H:%M')}; load average {os.getloadavg()[0]:.2f}")
    print(f"Command: `bench/memory.py {os.path.relpath(BUILD, ROOT)}` (ACT_BATCHES=\"{' '.join(map(str, ACT_BATCHES))}\", "
          f"TARGET={TARGET})\n")
    print("Activation memory, one stage: ppcc's estimate (arena + depth x messages) against pprt's RSS growth "
          "while running two micro-batches\n")
    print("| model | micro-batch | estimate MB (arena) | measured MB, ref | estimate / measured | measured MB, "
          "oneDNN |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in res:
        for a in r["act"]:
            print(f"| {r['model']} | {a['batch']} | {a['est'] / M:.1f} ({a['arena'] / M:.1f}) | {a['ref'] / M:.1f} | "
                  f"{a['est'] / a['ref']:.3f} | {a['dnnl'] / M:.1f} |")
    print("\n--max-batch against a run (-pp 1, reference kernels, 32 samples)\n")
    print("| model | reserve MB | cap MB | max micro-batch B (probes, s) | estimate at B MB (+ reserve) | "
          "peak RSS at B MB (once loaded) | within the cap | estimate at B+1 MB | peak RSS at B+1 MB |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in res:
        print(f"| {r['model']} | {r['reserve'] / M:.1f} | {r['cap'] / M:.0f} | {r['batch']} ({r['probes']}, "
              f"{r['max_batch_s']:.2f}) | {r['est_B'] / M:.1f} | {r['peak_B'] / M:.1f} ({r['loaded_B'] / M:.1f}) | "
              f"{'yes' if r['peak_B'] <= r['cap'] else 'NO'} | {r['est_B1'] / M:.1f} | {r['peak_B1'] / M:.1f} |")
    for r in res:
        print(f"\n{r['model']}, -b B+1: `{r['over_msg']}`")
    return 0 if res else 1


if __name__ == "__main__":
    sys.exit(main())
