#!/usr/bin/env python3
"""Which nodes of real models still run on the reference kernels under pprt's oneDNN
executor, and what they cost.

For each model of the zoo with tag TAG (tests/models/zoo.py list), or each NAME given:
export it at batch 8 (tests/models/zoo.py export, into $WORK/NAME, kept for a rerun),
compile `ppcc -pp 1 -b 8`, run pprt on 16 samples (its data twice) with 2 threads, one
warm-up micro-batch, `PPRT_DNNL_VERBOSE=1` (whose "reference:" list names the op types
left on the reference kernels) and `--profile`; print one line per model: the summed node
time per micro-batch, each reference op type's time, the reorders per micro-batch, the
five op types that take the most. Plans, outputs and the tiled data are removed after
each model. The times come from one timed micro-batch: a map of where to look, not a
benchmark (bench/cpu.sh measures, against onnxruntime).

Usage: bench/ref_scan.py TAG [NAME...]   (env: PPCC, PPRT default build/; WORK default
/tmp/ref_scan). Found, 2026-11-26: the row-keeping Transposes and LSTM (docs/design-notes.md,
"The reference kernels the oneDNN executor still used")."""
import collections, json, os, re, shutil, subprocess, sys
import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = root + "/.venv/bin/python"
PPCC = os.environ.get("PPCC", os.path.join(root, "build", "ppcc"))
PPRT = os.environ.get("PPRT", os.path.join(root, "build", "pprt"))
tag = sys.argv[1]
names = sys.argv[2:]
if not names:
    out = subprocess.run([PY, root + "/tests/models/zoo.py", "list"], capture_output=True, text=True).stdout
    names = [l.split("\t")[0] for l in out.splitlines() if l.endswith("\t" + tag)]
W = os.environ.get("WORK", "/tmp/ref_scan")
os.makedirs(W, exist_ok=True)
for n in names:
    d = f"{W}/{n}"
    try:
        if not os.path.exists(d + "/model.onnx"):
            r = subprocess.run([PY, root + "/tests/models/zoo.py", "export", n, d, "--batch", "8"], capture_output=True,
                               text=True, timeout=900)
            if r.returncode:
                print(f"{n}: export failed", flush=True)
                shutil.rmtree(d, ignore_errors=True)
                continue
        os.makedirs(d + "/d16", exist_ok=True)
        for f in os.listdir(d + "/data"):
            x = np.load(f"{d}/data/{f}")
            np.save(f"{d}/d16/{f}", np.concatenate([x, x]))
        r = subprocess.run([PPCC, d + "/model.onnx", "-b", "8", "-pp", "1", "--dump-ir", "-o", d + "/p.plan", "-q"],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            print(f"{n}: ppcc failed: {r.stderr.strip()[-200:]}", flush=True)
            continue
        op = {}
        for line in r.stdout.splitlines():
            m = re.match(r"%\d+ s\d+ (\S+) .* name=(\S+)$", line)
            if m:
                op[m.group(2)] = m.group(1)
        env = dict(os.environ, PPRT_DNNL_VERBOSE="1")
        r = subprocess.run([PPRT, d + "/p.plan", d + "/d16", "--threads", "2", "--warmup", "1", "--profile",
                            d + "/prof.json", "-q", "-o", d + "/out"], capture_output=True, text=True, env=env,
                           timeout=1800)
        if r.returncode:
            print(f"{n}: pprt failed: {r.stderr.strip()[-200:]}", flush=True)
            continue
        refs = re.findall(r"reference: ([^;]*);", r.stderr)
        refops = set(" ".join(refs).split())
        reord = re.findall(r"(\d+) reorders", r.stderr)
        prof = json.load(open(d + "/prof.json"))["nodes"]
        by = collections.defaultdict(float)
        for k, v in prof.items():
            by[op.get(k, "?")] += v
        tot = sum(by.values())
        refms = {o: round(by.get(o, 0.0), 2) for o in refops}
        top = sorted(by.items(), key=lambda x: -x[1])[:5]
        print(f"{n}: {tot:.1f} ms; ref {refms}; reorders {reord}; top " +
              ", ".join(f"{k} {v:.1f}" for k, v in top), flush=True)
    except subprocess.TimeoutExpired:
        print(f"{n}: timeout", flush=True)
    finally:
        for f in ("p.plan", "out", "d16"):
            p = f"{d}/{f}"
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
