#!/usr/bin/env python3
"""How balanced are the -pp 2 cuts ppcc's roofline picks, priced with measured times?

For each CASE (model.onnx:batch:profile.json, the profile written by
`pprt --profile` of a -pp 1 plan at that batch) and each rate pair, compiles
`ppcc -pp 2 -b batch --gflops G --mem-gbps M`, reads the stage of every node
from --dump-ir and sums the profile's node times per stage; prints the slower
stage over the mean (1.0: a perfect split), then the same for the cut ppcc
makes from the profile itself (--profile). A model of the split: no pipeline
runs, so no noise from the host, but no transfer or contention either.

Usage: bench/split_rates.py [--ppcc PATH] [--rates G/M,G/M,...] CASE...
  CASE: model.onnx:batch:profile.json, optionally @ and more ppcc arguments
  (model.onnx:8:prof.json@--dim seq=32); bench/split_profiles.sh writes
  the profiles of the CI zoo's models and prints the cases.
"""
import argparse
import json
import re
import os
import subprocess
import sys
import tempfile


def imbalance(ppcc, model, batch, prof, extra):
    model, _, more = model.partition("@")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([ppcc, model, "-b", str(batch), "-pp", "2", "-o", os.path.join(d, "p.plan"), "--dump-ir"]
                           + more.split() + extra, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"split_rates: ppcc failed on {model}: {r.stderr.strip()}")
    times = json.load(open(prof))["nodes"]
    stage = [0.0, 0.0]
    for line in r.stdout.splitlines():
        m = re.match(r"%\d+ s(\d) .* name=(\S+)$", line)
        if m and m.group(2) in times:
            stage[int(m.group(1))] += times[m.group(2)]
    return max(stage) / (sum(stage) / 2) if sum(stage) > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppcc", default="build/ppcc")
    ap.add_argument("--rates", default="25/10,40/8,55/6,60/10,100/10,40/4,80/6,120/8")
    ap.add_argument("cases", nargs="+", help="model.onnx:batch:profile.json")
    a = ap.parse_args()
    cases = []
    for c in a.cases:
        c, _, more = c.partition("@")
        m, b, p = c.rsplit(":", 2)
        cases.append((m + ("@" + more if more else ""), b, p))
    rows = [(f"--gflops {g} --mem-gbps {m}", ["--gflops", g, "--mem-gbps", m])
            for g, m in (r.split("/") for r in a.rates.split(","))]
    print("| rates | " + " | ".join(f"{c[0].split('@')[0].split('/')[-2]} -b {c[1]}" for c in cases) + " |")
    print("|---|" + "---:|" * len(cases))
    for name, extra in rows:
        got = [imbalance(a.ppcc, m, b, p, extra) for m, b, p in cases]
        print(f"| {name} | " + " | ".join(f"{x:.3f}" for x in got) + " |", flush=True)
    got = [imbalance(a.ppcc, m, b, p, ["--profile", p]) for m, b, p in cases]
    print("| --profile | " + " | ".join(f"{x:.3f}" for x in got) + " |")


if __name__ == "__main__":
    main()
