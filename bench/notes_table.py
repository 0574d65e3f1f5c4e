#!/usr/bin/env python3
"""The seed notes' table with ppcc's column: the largest training batch on two
24 GB GPUs with two replicas (dp=2) against a two-stage pipeline (pp=2), for
the notes' four timm 0.9.2 models at their input sizes (random weights, 10
classes), fp16 mixed precision and AdamW, by ppcc's device memory model
(--memory-model cuda, docs/training.md "Memory on a GPU"):
  dp=2   ppcc --max-batch -pp 1 --micro-batches 1: the batch per replica, x2
  dp=2 ZeRO-1: the same with --replicas 2 --zero 1
  pp=2   ppcc --max-batch -pp 2 --micro-batches 4 (ColossalAI's
         NUM_MICRO_BATCHES = 2 x pp in the notes' hybrid example): the
         micro-batch, x4 (1F1B: device 0 keeps 2 micro-batches, device 1 one)
  pp=2 recompute: the same with --recompute all
  pp=2 memory: the same with --policy memory (the cut that balances the
         two devices' training totals: passes/partition_train.c)
  pp=2 at the notes' cut: -pp 2 --split-at (the notes' SPLIT_NODE), the
         micro-batch bisected here by compiling (--max-batch takes the auto
         split only; a plan whose device is over the cap is refused, exit 2)
each with --max-memory 24GiB (an RTX 3090's 24 GiB) and the model's default
--reserve (1.5 GiB: CUDA context, libraries, allocator). Exports come from
bench/notes_export.py (WORK, default /work/exports/notes; never the
repository). Writes WORK/results/*.json (or --out DIR) and prints the
Markdown table.

Usage: bench/notes_table.py [BUILD_DIR] [--work DIR] [--out DIR] [--models a,b] [--cap 24GiB]"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTES = {  # the notes' measured batches (ColossalAI 0.2.8, torch 1.13.1, 2 x RTX 3090): dp=2, pp=2
    "swinv2_large_window12to16_192to256": ("256x256", 196, 90, 120),
    "convnext_xlarge": ("224x224", 350, 140, 200),
    "tf_efficientnet_l2": ("800x800", 480, 1, 4),
    "eva_giant_patch14_336": ("336x336", 1013, 6, None),
}
COMMON = ["--train", "--loss", "cross-entropy:logits", "--optimizer", "adamw", "--memory-model", "cuda",
          "--precision", "fp16", "--loss-scale", "dynamic", "--max-batch"]
RUNS = {  # name: (extra options, the batch in micro-batches: dp=2's two replicas, pp=2's four micro-batches a step)
    "dp2": (["-pp", "1", "--micro-batches", "1"], 2),
    "dp2_zero1": (["-pp", "1", "--micro-batches", "1", "--replicas", "2", "--zero", "1"], 2),
    "pp2": (["-pp", "2", "--micro-batches", "4"], 4),
    "pp2_recompute": (["-pp", "2", "--micro-batches", "4", "--recompute", "all"], 4),
    "pp2_memory": (["-pp", "2", "--micro-batches", "4", "--policy", "memory"], 4),
}


# the notes' exec_seq cut (SPLIT_NODE before this module); eva_giant's pp=2 was not measured: its middle block
SPLITS = {"swinv2_large_window12to16_192to256": "layers.1", "convnext_xlarge": "stages.1.blocks.2",
          "tf_efficientnet_l2": "blocks.2", "eva_giant_patch14_336": "blocks.20"}


def fits_at(ppcc, model, split, b, cap, out):
    plan = os.path.join(out, "probe.plan")
    r = subprocess.run([ppcc, os.path.join(WORK, model, "model.onnx"), *COMMON[:-1], "-pp", "2", "--split-at", split,
                        "--micro-batches", "4", "-b", str(b), "--max-memory", cap, "--ref-weights", "-q", "-o", plan],
                       capture_output=True, text=True)
    if os.path.exists(plan):
        os.remove(plan)
    if r.returncode == 2 and "training device" in r.stderr:
        return False, r.stderr.strip().splitlines()[-1]
    if r.returncode:
        raise RuntimeError(f"{model} -b {b} --split-at {split}: exit {r.returncode}: {r.stderr[-300:]}")
    return True, ""


def notes_split(ppcc, model, cap, out):
    t = time.time()
    lo, hi, why = 0, 1, ""
    try:
        while hi <= 4096:
            ok, w = fits_at(ppcc, model, SPLITS[model], hi, cap, out)
            if not ok:
                why = w
                break
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok, w = fits_at(ppcc, model, SPLITS[model], mid, cap, out)
            if ok:
                lo = mid
            else:
                hi, why = mid, w
    except RuntimeError as e:
        return {"error": str(e)[:300]}
    return {"micro_batch": lo, "split_at": SPLITS[model], "over": why, "seconds": round(time.time() - t, 1)}


def run(ppcc, model, name, extra, cap, out):
    js = os.path.join(out, f"{model}.{name}.json")
    t = time.time()
    r = subprocess.run([ppcc, os.path.join(WORK, model, "model.onnx"), *COMMON, *extra, "--max-memory", cap,
                        "--report-json", js], capture_output=True, text=True)
    with open(os.path.join(out, f"{model}.{name}.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:200]}
    with open(js) as f:
        mb = json.load(f)["max_batch"]
    mb["seconds"] = round(time.time() - t, 1)
    return mb


def cell(mb, per):
    if "error" in mb:
        return "error"
    b = mb["micro_batch"]
    return f"{b * per}" + (f" ({per} x {b})" if per > 1 else "")


def limit(mb):
    lim = mb.get("limit", {})
    if "error" in mb or lim.get("stage", -1) < 0:
        return "-"
    return f"device {lim['stage']}"


def main():
    global WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/work/exports/notes")
    ap.add_argument("--models", default=",".join(NOTES))
    ap.add_argument("--cap", default="24GiB")
    ap.add_argument("--out", help="where the JSON, the logs and the table go (default WORK/results)")
    a = ap.parse_args()
    WORK = a.work
    ppcc = os.path.join(a.build, "ppcc")
    out = a.out or os.path.join(WORK, "results")
    os.makedirs(out, exist_ok=True)
    models = a.models.split(",")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "notes_export.py"), WORK, *models])
    if r.returncode:
        print("notes_table.py: an export failed (bench/notes_export.py's messages above)", file=sys.stderr)
    rows = []
    for m in models:
        if not os.path.exists(os.path.join(WORK, m, "model.onnx")):
            rows.append(f"| {m} | {NOTES[m][0]} | not exported |")
            continue
        with open(os.path.join(WORK, m, "meta.json")) as f:
            meta = json.load(f)
        res = {k: run(ppcc, m, k, extra, a.cap, out) for k, (extra, _) in RUNS.items()}
        res["pp2_notes_cut"] = notes_split(ppcc, m, a.cap, out)
        with open(os.path.join(out, f"{m}.summary.json"), "w") as f:
            json.dump({"meta": meta, "runs": res}, f, indent=1)
        size, params, n_dp, n_pp = NOTES[m]
        cells = [cell(res[k], RUNS[k][1]) for k in RUNS] + [cell(res["pp2_notes_cut"], 4)]
        secs = "/".join(str(res[k].get("seconds", "-")) for k in [*RUNS, "pp2_notes_cut"])
        rows.append(f"| {m} | {size} | {meta['params'] / 1e6:.0f}M | {n_dp} | {n_pp if n_pp else '?'} | "
                    + " | ".join(cells) + f" | {limit(res['pp2'])} | {secs} |")
        print(rows[-1], flush=True)
    head = ("| model | input | params | notes dp=2 | notes pp=2 | ppcc dp=2 | ppcc dp=2 ZeRO-1 | ppcc pp=2 (M=4) | "
            "ppcc pp=2 --recompute all | ppcc pp=2 --policy memory | ppcc pp=2 at the notes' cut | pp=2 limited by | "
            "ppcc s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    table = head + "\n" + "\n".join(rows)
    with open(os.path.join(out, "notes_table.md"), "w") as f:
        f.write(table + "\n")
    print(table)


if __name__ == "__main__":
    WORK = None
    main()
