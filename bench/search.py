#!/usr/bin/env python3
"""bench/search.py: does `ppcc --search` pick the fastest configuration?

For each model (torchvision ResNet-50, EfficientNet-B0, ViT-B/16; random
weights, exported by tests/models/export_torchvision.py), on this machine's
two cores taken as two devices of one core each:

1. Profiles: `ppcc -pp 1 -b B`, then `pprt --threads 1 --warmup 1 --profile`
   for every micro-batch size B of BATCHES (8 micro-batches each), on both
   cores at once (two processes, as every candidate keeps both cores busy:
   they share the memory bandwidth and the last-level cache, which a core
   profiled alone does not see), PROFILE_REPS rounds in which the sizes take
   turns: each node's time is its least over the rounds and the two cores
   (on a shared machine the other runs were slowed by other work).
2. The search: `ppcc --devices 2 --search --samples S --batch-sizes BATCHES
   --profile (all of them)`: its table of estimated throughputs.
3. Every candidate of that search space measured: pp in {1, 2}, dp = 2 / pp,
   micro-batch in BATCHES, S samples (random images, the same for all):
     pp=2, dp=1   `ppcc -pp 2 -b B --profile ...` (the search's cut), one
                  pprt, `--threads 1` (a core per stage, pinned), --warmup 1
     pp=1, dp=2   `ppcc -pp 1 -b B`, two pprt processes at once, each on
                  one core (taskset) and half the samples, --threads 1,
                  --warmup 1; the run takes the slower one's wall time
   (dp=2 is two processes, not `mpirun --replicas 2`: the script was
   written when pprt had no --warmup under mpirun; it has one now, with the
   same default of 1, but the figures in bench/RESULTS.md were measured this
   way, so the method stays.) Throughput = S / wall, pprt's own wall
   time (--stats-json: plan loading, executor creation and the warm-up
   excluded). The candidates take turns, REPS rounds; the table shows each
   one's best and median.
4. The verdict: the search's pick against the fastest measured (best of the
   rounds): within 5%?

Usage: bench/search.py [BUILD_DIR] [REPS]   (default build/, 5)
Environment: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), BATCHES
(default "1 2 4 8"), SAMPLES (default 64), PROFILE_REPS (default 3),
MODEL_DIR (NAME/model.onnx exported before is used as it is), JSON (write
every figure there too).
Prints Markdown (the tables of bench/RESULTS.md) on stdout."""
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from benchlib import ROOT, cpu_name, each_model, export, sh

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
PROFILE_REPS = int(os.environ.get("PROFILE_REPS", "3"))
MODELS = os.environ.get("MODELS", "resnet50 efficientnet_b0 vit_b_16").split()
BATCHES = [int(b) for b in os.environ.get("BATCHES", "1 2 4 8").split()]
SAMPLES = int(os.environ.get("SAMPLES", "64"))
PPCC, PPRT = os.path.join(BUILD, "ppcc"), os.path.join(BUILD, "pprt")
CPUS = sorted(os.sched_getaffinity(0))
if len(CPUS) < 2:
    sys.exit("bench/search.py: needs two CPUs")


def data_dir(work, x, tag):
    d = os.path.join(work, "data_" + tag)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "input.npy"), x)
    return d


def stats(path):
    return json.load(open(path))


def least_profile(runs, path):
    """Write the profile (pprt --profile's format, which ppcc reads line by
    line) whose node times are the least of the runs'."""
    nodes = {n: min(r["nodes"][n] for r in runs) for n in runs[0]["nodes"]}
    with open(path, "w") as f:
        f.write(f'{{"micro_batch": {runs[0]["micro_batch"]}, "device": {json.dumps(runs[0]["device"])}, "nodes": {{\n')
        f.write(",\n".join(f"  {json.dumps(n)}: {t:.6f}" for n, t in nodes.items()))
        f.write("\n}}\n")


def run_pp2(plan, data, work):
    s = os.path.join(work, "pp2.json")
    sh([PPRT, plan, data, "--threads", "1", "--warmup", "1", "-q", "-o", os.path.join(work, "o"), "--stats-json", s])
    st = stats(s)
    return SAMPLES / st["wall_s"], st


def run_dp2(plan, halves, work):
    procs = []
    for k, d in enumerate(halves):
        s = os.path.join(work, f"dp{k}.json")
        argv = ["taskset", "-c", str(CPUS[k]), PPRT, plan, d, "--threads", "1", "--warmup", "1", "-q", "-o",
                os.path.join(work, f"o{k}"), "--stats-json", s]
        procs.append((subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), s))
    walls = []
    for p, s in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"pprt (dp=2): exit {p.returncode}: {err.strip()[-500:]}")
        walls.append(stats(s)["wall_s"])
    return SAMPLES / max(walls), {"walls": walls}


def bench_model(name, work):
    model = export(name, work)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, 3, 224, 224)).astype(np.float32)
    full = data_dir(work, x, "all")
    halves = [data_dir(work, x[: SAMPLES // 2], "a"), data_dir(work, x[SAMPLES // 2:], "b")]
    # 1. profiles on one core
    profiles = []
    plans, dirs, runs = {}, {}, {b: [] for b in BATCHES}
    for b in BATCHES:
        plans[b] = os.path.join(work, f"{name}_pp1_b{b}.plan")
        sh([PPCC, model, "-pp", "1", "-b", str(b), "-o", plans[b], "-q"])
        dirs[b] = data_dir(work, np.resize(x, (8 * b,) + x.shape[1:]), f"prof{b}")
    for k in range(PROFILE_REPS):  # the sizes take turns, so a slow spell hits them alike
        for b in BATCHES:
            # both cores at once, as every candidate runs: the cores share the
            # memory bandwidth and the last-level cache
            procs = []
            for c in range(2):
                one = os.path.join(work, f"{name}_prof_b{b}_{k}_{c}.json")
                argv = ["taskset", "-c", str(CPUS[c]), PPRT, plans[b], dirs[b], "--threads", "1", "--warmup", "1",
                        "-q", "-o", os.path.join(work, f"o{c}"), "--profile", one]
                procs.append((subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), one))
            for p, one in procs:
                _, err = p.communicate()
                if p.returncode != 0:
                    raise RuntimeError(f"pprt --profile: exit {p.returncode}: {err.strip()[-500:]}")
                runs[b].append(json.load(open(one)))
    for b in BATCHES:
        prof = os.path.join(work, f"{name}_prof_b{b}.json")
        least_profile(runs[b], prof)
        profiles.append(prof)
    pflags = [a for p in profiles for a in ("--profile", p)]
    # 2. the search
    sj = os.path.join(work, f"{name}_search.json")
    t0 = time.time()
    r = sh([PPCC, model, "--devices", "2", "--search", "--samples", str(SAMPLES), "--batch-sizes",
            ",".join(map(str, BATCHES)), "--report-json", sj, *pflags])
    search_wall = time.time() - t0
    search = stats(sj)["search"]
    table = r.stdout
    # 3. every candidate, measured
    plans = {}
    for c in search["candidates"]:
        pp, b = c["pp"], c["micro_batch"]
        plan = os.path.join(work, f"{name}_pp{pp}_b{b}.plan")
        if pp == 2:
            sh([PPCC, model, "-pp", "2", "-b", str(b), "-o", plan, "-q", *pflags])
        plans[(pp, c["dp"], b)] = plan
    measured = {k: [] for k in plans}
    for rep in range(REPS):
        for k, plan in plans.items():
            pp, dp, b = k
            rate, _ = run_pp2(plan, full, work) if pp == 2 else run_dp2(plan, halves, work)
            measured[k].append(rate)
    rows = []
    for rank, c in enumerate(search["candidates"], 1):
        k = (c["pp"], c["dp"], c["micro_batch"])
        rows.append({"pp": k[0], "dp": k[1], "micro_batch": k[2], "search_rank": rank, "fits": c["fits"],
                     "est_samples_per_s": c["est_samples_per_s"], "measured": measured[k],
                     "best": max(measured[k]), "median": statistics.median(measured[k])})
    fastest = max(rows, key=lambda r: r["best"])
    pick = rows[0]
    return {"model": name, "rows": rows, "pick": pick, "fastest": fastest, "search_s": search_wall,
            "search_table": table, "device": search["device"]}


def main():
    for t in (PPCC, PPRT):
        if not os.access(t, os.X_OK):
            sys.exit(f"bench/search.py: no {t} (build first)")
    cpu = cpu_name()
    load = os.getloadavg()
    results = each_model(MODELS, bench_model)
    load_end = os.getloadavg()
    print(f"CPU: {cpu}, {len(CPUS)} CPUs; {platform.node()}; {time.strftime('%Y-%m-%d %H:%M')}; "
          f"load average {load[0]:.2f} at the start, {load_end[0]:.2f} at the end")
    print(f"Command: `bench/search.py {os.path.relpath(BUILD, ROOT)} {REPS}` (SAMPLES={SAMPLES}, "
          f"BATCHES=\"{' '.join(map(str, BATCHES))}\")\n")
    for res in results:
        print(f"### {res['model']}\n")
        print(f"search: {res['search_s']:.2f} s (ppcc wall time, profiles of \"{res['device']}\")\n")
        print("| search rank | pp | dp | micro-batch | est samples/s | measured samples/s (best) | median | "
              "best / fastest |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        f = res["fastest"]["best"]
        for r in res["rows"]:
            print(f"| {r['search_rank']} | {r['pp']} | {r['dp']} | {r['micro_batch']} | {r['est_samples_per_s']:.2f} | "
                  f"{r['best']:.2f} | {r['median']:.2f} | {r['best'] / f:.3f} |")
        p = res["pick"]
        verdict = "within 5%" if p["best"] >= 0.95 * f else "NOT within 5%"
        print(f"\npick: pp={p['pp']} dp={p['dp']} -b {p['micro_batch']}: {p['best']:.2f} samples/s, "
              f"{p['best'] / f:.3f} of the fastest measured (pp={res['fastest']['pp']} dp={res['fastest']['dp']} "
              f"-b {res['fastest']['micro_batch']}): {verdict}\n")
    if os.environ.get("JSON"):
        with open(os.environ["JSON"], "w") as fh:
            json.dump({"cpu": cpu, "load": [load, load_end], "results": results}, fh, indent=1)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
