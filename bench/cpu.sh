#!/usr/bin/env bash
# CPU speed: pprt on oneDNN against onnxruntime and PyTorch, side by side.
#
# For each model (torchvision ResNet-50, EfficientNet-B0, ViT-B/16; random
# weights, exported by tests/models/export_torchvision.py; a model that ppcc
# cannot compile or pprt cannot run is reported and skipped) and micro-batch
# (-b 1, -b 8), on the same input images:
#   pprt      ppcc -b B -pp 1; pprt --backend dnnl --threads 2
#   ort       onnxruntime (PyPI, .venv), CPUExecutionProvider,
#             intra_op_num_threads=2, inter_op_num_threads=1, batches of B
#   torch     PyTorch eager, torch.set_num_threads(2), no_grad, batches of B
#   pprt pp2  ppcc -b B -pp 2; pprt --backend dnnl --threads 1 (one core per stage)
# The runners take turns (pprt, ort, torch, pprt pp2, pprt, ort, ...) REPS
# times and the table shows each one's median samples/s and the ratios.
# pprt's figure is its own (--stats-json: wall time of the run, plan loading
# and primitive creation excluded, the first, cold micro-batch included);
# onnxruntime and PyTorch get one untimed warm-up batch. The images are the
# exporter's two, repeated. PyTorch (Debian's build, generic BLAS) runs the
# first of the batches that fit in about 10 s (at least one), and is left out
# where its warm-up batch takes more than 20 s (ViT-B/16: about 10 s per image).
#
# Usage: bench/cpu.sh [BUILD_DIR] [REPS]   (builds nothing: expects BUILD_DIR/ppcc and
#        BUILD_DIR/pprt, default build/; REPS default 5)
# Environment: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), BATCHES (default "1 8"),
#              SAMPLES (images per run, default 32; ViT-B/16 runs half as many)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
reps=${2:-5}
py=$root/.venv/bin/python
for t in ppcc pprt; do [ -x "$build/$t" ] || { echo "bench/cpu.sh: no $build/$t (build first)" >&2; exit 2; }; done
"$build/pprt" --backend dnnl --version >/dev/null 2>&1 || { echo "bench/cpu.sh: $build/pprt has no oneDNN backend" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export BUILD=$build WORK=$work REPS=$reps SRC=$root
export MODELS=${MODELS:-"resnet50 efficientnet_b0 vit_b_16"} BATCHES=${BATCHES:-"1 8"} SAMPLES=${SAMPLES:-32}
exec "$py" - <<'PY'
import json, os, statistics, subprocess, sys, time
import numpy as np

B, W, SRC = os.environ["BUILD"], os.environ["WORK"], os.environ["SRC"]
REPS, SAMPLES = int(os.environ["REPS"]), int(os.environ["SAMPLES"])
MODELS, BATCHES = os.environ["MODELS"].split(), [int(b) for b in os.environ["BATCHES"].split()]
PY = sys.executable


def sh(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def pprt_runner(plan, data, threads):
    def run():
        s = os.path.join(W, "stats.json")
        sh([f"{B}/pprt", plan, data, "--backend", "dnnl", "--threads", str(threads), "-q",
            "-o", os.path.join(W, "out"), "--stats-json", s])
        return json.load(open(s))["samples_per_s"]
    return run


def ort_runner(model, x, b):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    batches = [x[i:i + b] for i in range(0, len(x), b)]
    sess.run(None, {name: batches[0]})

    def run():
        t0 = time.perf_counter()
        for xb in batches:
            sess.run(None, {name: xb})
        return len(x) / (time.perf_counter() - t0)
    return run


def torch_runner(name, x, b):
    """None when one batch takes more than 20 s."""
    # the model the exporter built: same seed, same randomized BatchNorm
    # statistics (fresh default weights decay to denormals, which are slow)
    import torch, torchvision
    sys.path.insert(0, f"{SRC}/tests/models")
    from export_torchvision import randomize_batchnorm
    torch.set_num_threads(2)
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    randomize_batchnorm(m, 0)
    m.eval()
    batches = [torch.from_numpy(x[i:i + b]) for i in range(0, len(x), b)]
    with torch.no_grad():
        t0 = time.perf_counter()
        m(batches[0])
        dt = time.perf_counter() - t0
        if dt > 20:
            return None
        batches = batches[:max(1, int(10 / dt))]

    def run():
        with torch.no_grad():
            t0 = time.perf_counter()
            for xb in batches:
                m(xb)
            return sum(len(xb) for xb in batches) / (time.perf_counter() - t0)
    return run


lscpu = sh(["lscpu"]).stdout
field = lambda k: next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith(k + ":")), "?")
import onnxruntime, torch
load0 = os.getloadavg()[0]
print(f"machine: {field('Model name')}, {field('CPU(s)')} CPUs ({field('Core(s) per socket')} cores per socket, "
      f"{field('Thread(s) per core')} thread per core), {field('L2 cache')} L2; onnxruntime {onnxruntime.__version__}, "
      f"PyTorch {torch.__version__}; {REPS} repetitions, median samples/s; load average {load0:.1f} at the start")
rows = []
for name in MODELS:
    n = SAMPLES // 2 if name.startswith("vit") else SAMPLES
    d = os.path.join(W, name)
    try:
        sh([PY, f"{SRC}/tests/models/export_torchvision.py", "--model", name, "--out", d, "--batch", "2"])
    except subprocess.CalledProcessError as e:
        print(f"{name}: export failed, skipped: {e.stderr.strip()[-300:]}", file=sys.stderr)
        continue
    model, data = os.path.join(d, "model.onnx"), os.path.join(d, f"data{n}")
    x = np.load(os.path.join(d, "data", "input.npy"))
    x = np.ascontiguousarray(np.concatenate([x] * (n // len(x) + 1))[:n])
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), x)
    for b in BATCHES:
        runners = {}
        try:
            for pp, t in ((1, 2), (2, 1)):
                plan = os.path.join(W, f"{name}_{b}_{pp}.plan")
                sh([f"{B}/ppcc", model, "-b", str(b), "-pp", str(pp), "-q", "-o", plan])
                runners[f"pprt_pp{pp}"] = pprt_runner(plan, data, t)
                runners[f"pprt_pp{pp}"]()  # runs at all (and warms the page cache)
        except subprocess.CalledProcessError as e:
            print(f"{name} -b {b}: ppcc/pprt failed, skipped: {e.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        runners["ort"] = ort_runner(model, x, b)
        runners["torch"] = torch_runner(name, x, b)
        if runners["torch"] is None:
            print(f"{name} -b {b}: PyTorch takes more than 20 s per batch, left out", file=sys.stderr)
            del runners["torch"]
        got = {k: [] for k in runners}
        for _ in range(REPS):
            for k in ("pprt_pp1", "ort", "torch", "pprt_pp2"):
                if k in runners:
                    got[k].append(runners[k]())
        med = {k: statistics.median(v) for k, v in got.items()}
        rows.append((name, b, n, med))
        print(f"{name} -b {b}: " + ", ".join(f"{k} {[round(v, 2) for v in got[k]]}" for k in got), file=sys.stderr)
        del runners

print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
print("| model | batch | samples | pprt dnnl -pp 1, 2 threads | onnxruntime, 2 threads | PyTorch, 2 threads "
      "| pprt / ort | pprt / torch | pprt -pp 2, 1 thread per stage | pp 2 / pp 1 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, b, n, m in rows:
    t = m.get("torch")
    torch_cells = (f"{t:.2f}", f"{m['pprt_pp1'] / t:.2f}") if t else ("-", "-")
    print(f"| {name} | {b} | {n} | {m['pprt_pp1']:.2f} | {m['ort']:.2f} | {torch_cells[0]} | "
          f"{m['pprt_pp1'] / m['ort']:.2f} | {torch_cells[1]} | {m['pprt_pp2']:.2f} | "
          f"{m['pprt_pp2'] / m['pprt_pp1']:.2f} |")
PY
