#!/usr/bin/env bash
# CPU speed: pprt on oneDNN against onnxruntime and PyTorch, side by side.
#
# 1. Throughput. For each model (torchvision ResNet-50, EfficientNet-B0,
#    ViT-B/16; random weights, exported by tests/models/export_torchvision.py;
#    a model that ppcc cannot compile or pprt cannot run is reported and
#    skipped) and micro-batch (-b 1, -b 8), on the same input images:
#      pprt       ppcc -b B -pp 1; pprt --threads 2 --warmup 1 (oneDNN, f32)
#      pprt bf16  the same plan, pprt --precision bf16
#      ort        onnxruntime (PyPI, .venv), CPUExecutionProvider,
#                 intra_op_num_threads=2, inter_op_num_threads=1, batches of B
#      torch      PyTorch eager, torch.set_num_threads(2), no_grad, batches of B
#      pprt 2 replicas  the same plan, pprt --replicas 2 --threads 1 (f32 and bf16;
#                 REPLICAS=0 leaves them out): two pipelines of one thread, a
#                 second table
#    The runners take turns (pprt, ort, torch, pprt bf16, pprt, ...) REPS times;
#    the table shows each one's median samples/s and the ratios. pprt's figure
#    is its own (--stats-json: wall time of the run; plan loading, primitive
#    creation and the one warm-up micro-batch excluded); onnxruntime and
#    PyTorch get one untimed warm-up batch, and keep every batch's outputs
#    until their clock stops, as pprt keeps every sample's. PyTorch (Debian's build, generic
#    BLAS) runs the first of the batches that fit in about 10 s (at least one),
#    and is left out where its warm-up batch takes more than 20 s, or where
#    the model is not torchvision's (MODEL_DIR's timm sweep models).
# 2. Pipeline cost: the same model at -pp 1 with 2 threads against -pp 2 with
#    one thread (and core) per stage, on 32 micro-batches (fill and drain of
#    the pipeline: 1/33 of the run), taking turns PP_ROUNDS times; each ratio
#    is the median of the rounds' ratios, with their range; -pp 2 split twice:
#    by ppcc's roofline estimates (the default), by measured op times
#    (pprt --profile of the -pp 1 plan on one thread, then ppcc --profile),
#    and by ppcc --measure (which does the same by itself on random inputs;
#    its compile time is in the last column).
#    Also each run's steady-state rate (pprt's steady_samples_per_s: from the
#    first micro-batch out to the last, so without the fill and drain).
# 3. bf16 accuracy: the digits sample at f32 and bf16: top-1 agreement, the
#    largest difference relative to the largest logit, accuracy on its labels.
# 4. Compile time: ppcc -pp 2 on ResNet-50 and ViT-L/16 (COMPILE_MODELS),
#    median of 3 runs after one untimed run (page cache warm): wall time to a
#    new plan file, its CPU time, and wall time over an existing plan; each
#    for a whole plan and a --ref-weights one (weights left in the model
#    file), with the wall time of a pprt run of 2 samples on the plan (what
#    the plan costs at load).
#
# Usage: bench/cpu.sh [BUILD_DIR] [REPS]   (builds nothing: expects BUILD_DIR/ppcc and
#        BUILD_DIR/pprt, default build/; REPS default 5)
# Environment: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), BATCHES (default "1 8"),
#              SAMPLES (images per throughput run, default 32; ViT-B/16 runs half as many),
#              COMPILE_MODELS (default "resnet50 vit_l_16"), SECTIONS (default "1 2 3 4"),
#              PP_ROUNDS (rounds of section 2, default the larger of REPS and 5), REPLICAS (0: no
#              --replicas 2 runs in section 1),
#              MODEL_DIR (models exported before: NAME/model.onnx and NAME/data are
#              used as they are, else exported into a temporary directory)
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
export COMPILE_MODELS=${COMPILE_MODELS:-"resnet50 vit_l_16"} SECTIONS=${SECTIONS:-"1 2 3 4"}
export PP_ROUNDS=${PP_ROUNDS:-$(( reps > 5 ? reps : 5 ))} MODEL_DIR=${MODEL_DIR:-}
exec "$py" - <<'PY'
import json, os, statistics, subprocess, sys, time
import numpy as np

B, W, SRC = os.environ["BUILD"], os.environ["WORK"], os.environ["SRC"]
REPS, SAMPLES = int(os.environ["REPS"]), int(os.environ["SAMPLES"])
PP_ROUNDS = int(os.environ["PP_ROUNDS"])
MODELS, BATCHES = os.environ["MODELS"].split(), [int(b) for b in os.environ["BATCHES"].split()]
REPLICAS = os.environ.get("REPLICAS", "1") != "0"
PY = sys.executable
# oneDNN has bf16 kernels from AVX-512 up; elsewhere pprt runs bf16 in f32
# and there is nothing to measure
BF16 = "bf16 kernels on this CPU: yes" in subprocess.run([f"{B}/pprt", "--version"], capture_output=True,
                                                         text=True).stdout


def sh(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def pprt_runner(plan, data, threads, precision="f32", steady=None, replicas=1):
    """Runs pprt, returns its samples/s; appends its steady-state rate to `steady` if given."""
    def run():
        s = os.path.join(W, "stats.json")
        sh([f"{B}/pprt", plan, data, "--backend", "dnnl", "--threads", str(threads), "--warmup", "1", "-q",
            "--precision", precision, "-o", os.path.join(W, "out"), "--stats-json", s]
           + (["--replicas", str(replicas)] if replicas > 1 else []))
        st = json.load(open(s))
        if steady is not None:
            steady.append(st["steady_samples_per_s"])
        return st["samples_per_s"]
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
        # the outputs kept, as pprt keeps every sample's (since 2026-11-26: dropping them let
        # onnxruntime reuse one output's memory, while pprt writes all of them to fresh pages)
        t0 = time.perf_counter()
        outs = [sess.run(None, {name: xb}) for xb in batches]
        dt = time.perf_counter() - t0
        del outs
        return len(x) / dt
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
    if not hasattr(torchvision.models, name):  # a model of MODEL_DIR from elsewhere (the timm sweep)
        print(f"{name}: not a torchvision model, PyTorch left out", file=sys.stderr)
        return None
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
            outs = [m(xb) for xb in batches]  # kept, as pprt and onnxruntime keep theirs
            dt = time.perf_counter() - t0
            del outs
            return sum(len(xb) for xb in batches) / dt
    return run


SECTIONS = os.environ["SECTIONS"].split()
lscpu = sh(["lscpu"]).stdout
field = lambda k: next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith(k + ":")), "?")
flags = field("Flags").split()
import onnxruntime, torch
load0 = os.getloadavg()[0]
print(f"machine: {field('Model name')}, {field('CPU(s)')} CPUs ({field('Core(s) per socket')} cores per socket, "
      f"{field('Thread(s) per core')} thread per core), {field('L2 cache')} L2, widest vectors: "
      f"{'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'SSE'}, bf16 units: "
      f"{', '.join(f for f in flags if f in ('avx512_bf16', 'amx_bf16')) or 'none'}; onnxruntime "
      f"{onnxruntime.__version__}, PyTorch {torch.__version__}; {REPS} repetitions, median samples/s; "
      f"load average {load0:.1f} at the start")


def export(name):
    """The exported model's directory; None (and a message) when the export fails."""
    mine = os.path.join(os.environ.get("MODEL_DIR", ""), name)
    if os.environ.get("MODEL_DIR") and os.path.exists(os.path.join(mine, "model.onnx")):
        return mine
    d = os.path.join(W, name)
    if not os.path.exists(os.path.join(d, "model.onnx")):
        try:
            sh([PY, f"{SRC}/tests/models/export_torchvision.py", "--model", name, "--out", d, "--batch", "2"])
        except subprocess.CalledProcessError as e:
            print(f"{name}: export failed, skipped: {e.stderr.strip()[-300:]}", file=sys.stderr)
            return None
    return d


def images(d, n, tag):
    data = os.path.join(d, f"data{tag}")
    x = np.load(os.path.join(d, "data", "input.npy"))
    x = np.ascontiguousarray(np.concatenate([x] * (n // len(x) + 1))[:n])
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), x)
    return data, x


def fmt(v):
    return f"{v:.2f}" if v else "-"


# ---- 1. throughput -------------------------------------------------------------------------------
rows = []
for name in (MODELS if "1" in SECTIONS else []):
    n = SAMPLES // 2 if name.startswith("vit") else SAMPLES
    d = export(name)
    if not d:
        continue
    model = os.path.join(d, "model.onnx")
    data, x = images(d, n, n)
    for b in BATCHES:
        runners = {}
        try:
            plan = os.path.join(W, f"{name}_{b}_1.plan")
            sh([f"{B}/ppcc", model, "-b", str(b), "-pp", "1", "-q", "-o", plan])
            runners["pprt"] = pprt_runner(plan, data, 2)
            runners["pprt"]()  # runs at all (and warms the page cache)
            if BF16:
                runners["pprt_bf16"] = pprt_runner(plan, data, 2, "bf16")
                runners["pprt_bf16"]()
            if REPLICAS:  # the same cores as two pipelines of one thread (--replicas 2)
                runners["pprt_r2"] = pprt_runner(plan, data, 1, replicas=2)
                if BF16:
                    runners["pprt_bf16_r2"] = pprt_runner(plan, data, 1, "bf16", replicas=2)
        except subprocess.CalledProcessError as e:
            print(f"{name} -b {b}: ppcc/pprt failed, skipped: {e.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        runners["ort"] = ort_runner(model, x, b)
        runners["torch"] = torch_runner(name, x, b)
        if runners["torch"] is None:
            print(f"{name} -b {b}: PyTorch left out (more than 20 s per batch, or no such torchvision model)",
                  file=sys.stderr)
            del runners["torch"]
        got = {k: [] for k in runners}
        for _ in range(REPS):
            for k in ("pprt", "ort", "torch", "pprt_bf16", "pprt_r2", "pprt_bf16_r2"):
                if k in runners:
                    got[k].append(runners[k]())
        med = {k: statistics.median(v) for k, v in got.items()}
        rows.append((name, b, n, med))
        print(f"{name} -b {b}: " + ", ".join(f"{k} {[round(v, 2) for v in got[k]]}" for k in got), file=sys.stderr)
        del runners
if rows:
    print("\n| model | batch | samples | pprt f32 | onnxruntime f32 | PyTorch f32 | pprt / ort | pprt / torch "
          "| pprt bf16 | pprt bf16 / ort f32 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, b, n, m in rows:
        t, h = m.get("torch"), m.get("pprt_bf16")
        print(f"| {name} | {b} | {n} | {m['pprt']:.2f} | {m['ort']:.2f} | {fmt(t)} | {m['pprt'] / m['ort']:.2f} | "
              f"{fmt(t and m['pprt'] / t)} | {fmt(h)} | {fmt(h and h / m['ort'])} |")
    if not BF16:
        print("(bf16: oneDNN has no bf16 kernels on this CPU, not measured)")
    if REPLICAS:
        print("\nThe same plans as two pipelines of one thread each on the same two cores (pprt --replicas 2 "
              "--threads 1), against the same onnxruntime runs:\n")
        print("| model | batch | pprt f32, 2 replicas | / ort | / pprt f32 | pprt bf16, 2 replicas | / ort f32 "
              "| / pprt bf16 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, b, n, m in rows:
            r, rh, h = m.get("pprt_r2"), m.get("pprt_bf16_r2"), m.get("pprt_bf16")
            print(f"| {name} | {b} | {fmt(r)} | {fmt(r and r / m['ort'])} | {fmt(r and r / m['pprt'])} | {fmt(rh)} "
                  f"| {fmt(rh and rh / m['ort'])} | {fmt(rh and h and rh / h)} |")

# ---- 2. pipeline cost ----------------------------------------------------------------------------
rows = []
for name in (MODELS if "2" in SECTIONS else []):
    d = export(name)
    if not d:
        continue
    model = os.path.join(d, "model.onnx")
    for b in BATCHES:
        n = 32 * b
        data, _ = images(d, n, f"pp{n}")
        runs, steady = {}, {1: [], 2: [], "2p": [], "2m": []}
        for pp, t in ((1, 2), (2, 1)):
            plan = os.path.join(W, f"{name}_{b}_{pp}.plan")
            sh([f"{B}/ppcc", model, "-b", str(b), "-pp", str(pp), "-q", "-o", plan])
            runs[pp] = pprt_runner(plan, data, t, steady=steady[pp])
        prof, plan = os.path.join(W, "prof.json"), os.path.join(W, f"{name}_{b}_2p.plan")
        sh([f"{B}/pprt", os.path.join(W, f"{name}_{b}_1.plan"), data, "--threads", "1", "--warmup", "1", "-q",
            "-o", os.path.join(W, "out"), "--profile", prof])
        sh([f"{B}/ppcc", model, "-b", str(b), "-pp", "2", "--profile", prof, "-q", "-o", plan])
        runs["2p"] = pprt_runner(plan, data, 1, steady=steady["2p"])
        plan = os.path.join(W, f"{name}_{b}_2m.plan")
        t0 = time.time()
        sh([f"{B}/ppcc", model, "-b", str(b), "-pp", "2", "--measure", "-q", "-o", plan])
        measure_s = time.time() - t0
        runs["2m"] = pprt_runner(plan, data, 1, steady=steady["2m"])
        got = {1: [], 2: [], "2p": [], "2m": []}
        for _ in range(PP_ROUNDS):
            for pp in (1, 2, "2p", "2m"):
                got[pp].append(runs[pp]())
        # ratios within a round (runs seconds apart), then their median: the
        # host's slow spells, minutes long here, shift both sides of a ratio
        ratio = lambda num, den: [x / y for x, y in zip(num, den)]
        r = {"roof": ratio(got[2], got[1]), "meas": ratio(got["2p"], got[1]), "auto": ratio(got["2m"], got[1]),
             "steady": ratio(steady["2p"], steady[1]), "steady_auto": ratio(steady["2m"], steady[1])}
        rows.append((name, b, n, {k: statistics.median(v) for k, v in got.items()},
                     {k: (statistics.median(v), min(v), max(v)) for k, v in r.items()}, measure_s))
        print(f"{name} -b {b} x 32: " + ", ".join(f"pp{k} {[round(v, 2) for v in got[k]]}" for k in got) +
              f"; steady pp1 {[round(v, 2) for v in steady[1]]}, pp2p {[round(v, 2) for v in steady['2p']]}, "
              f"pp2m {[round(v, 2) for v in steady['2m']]}",
              file=sys.stderr)
if rows:
    rng = lambda t: f"{t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f})"
    print(f"\n{PP_ROUNDS} rounds; ratios: the median of the rounds' ratios (their range in brackets)")
    print("\n| model | batch | samples | -pp 1, 2 threads | -pp 2, 1 thread per stage, roofline split | pp 2 / pp 1 "
          "| -pp 2, hand-measured split | pp 2 / pp 1 | -pp 2, `ppcc --measure` split | pp 2 / pp 1 "
          "| steady state: hand-measured, `--measure` (pp 2 / pp 1) | ppcc --measure s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, b, n, m, r, ms in rows:
        print(f"| {name} | {b} | {n} | {m[1]:.2f} | {m[2]:.2f} | {rng(r['roof'])} | {m['2p']:.2f} | "
              f"{rng(r['meas'])} | {m['2m']:.2f} | {rng(r['auto'])} | {rng(r['steady'])}, {rng(r['steady_auto'])} "
              f"| {ms:.1f} |")

# ---- 3. bf16 accuracy on digits ------------------------------------------------------------------
if "3" in SECTIONS and not BF16:
    print("\ndigits bf16 accuracy: oneDNN has no bf16 kernels on this CPU, not measured")
elif "3" in SECTIONS:
    digits = os.path.join(SRC, "samples", "digits")
    plan = os.path.join(W, "digits.plan")
    sh([f"{B}/ppcc", os.path.join(digits, "model.onnx"), "-b", "16", "-pp", "2", "-q", "-o", plan])
    res = {}
    for prec in ("f32", "bf16"):
        o = os.path.join(W, f"digits_{prec}")
        r = sh([f"{B}/pprt", plan, os.path.join(digits, "data"), "--backend", "dnnl", "--precision", prec,
                "-o", o, "--labels", os.path.join(digits, "labels.npy")])
        acc = next(l.split()[1] for l in r.stdout.splitlines() if l.startswith("accuracy:"))
        res[prec] = (np.load(os.path.join(o, os.listdir(o)[0])), acc)
    a32, a16 = res["f32"][0], res["bf16"][0]
    rel = float(np.max(np.abs(a16.astype(np.float64) - a32)) / np.max(np.abs(a32)))
    agree = float(np.mean(a32.argmax(-1) == a16.argmax(-1)))
    print(f"\ndigits ({len(a32)} images, -pp 2): bf16 against f32: top-1 agreement {agree:.4f}, largest difference "
          f"{rel:.3g} of the largest logit; accuracy f32 {res['f32'][1]}, bf16 {res['bf16'][1]}")

# ---- 4. compile time -----------------------------------------------------------------------------
if "4" in SECTIONS:
    print("\n| model | plan | plan MB | ppcc -pp 2 wall s, new plan file | ppcc CPU s (user + sys) "
          "| wall s, over the previous plan | pprt wall s, load + 2 samples |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in os.environ["COMPILE_MODELS"].split():
        d = export(name)
        if not d:
            continue
        model = os.path.join(d, "model.onnx")
        for kind, extra in (("whole", []), ("--ref-weights", ["--ref-weights"])):
            plan = os.path.join(W, "c.plan")
            argv = [f"{B}/ppcc", model, "-b", "1", "-pp", "2", "-q", "-o", plan] + extra
            sh(argv)
            fresh, cpu, over, run = [], [], [], []
            for _ in range(3):
                # a new file: the wall time includes ppcc's fsync of the whole plan
                # (written whole or not at all), not the filesystem freeing the
                # blocks of a plan it replaces, which rename() waits for (about 1 s
                # per GB here); the third column times that case
                os.remove(plan)
                r0 = os.times()
                t0 = time.perf_counter()
                sh(argv)
                fresh.append(time.perf_counter() - t0)
                r1 = os.times()
                cpu.append(r1.children_user + r1.children_system - r0.children_user - r0.children_system)
                t0 = time.perf_counter()
                sh(argv)
                over.append(time.perf_counter() - t0)
                # what the plan costs its user: pprt from start to exit (checks,
                # weights copied or reordered, both stages' primitives, 2 samples)
                t0 = time.perf_counter()
                sh([f"{B}/pprt", plan, os.path.join(d, "data"), "-q", "-o", os.path.join(W, "c_out")])
                run.append(time.perf_counter() - t0)
            print(f"| {name} ({os.path.getsize(model) / 1e6:.0f} MB ONNX) | {kind} | {os.path.getsize(plan) / 1e6:.1f} | "
                  f"{statistics.median(fresh):.2f} | {statistics.median(cpu):.2f} | {statistics.median(over):.2f} | "
                  f"{statistics.median(run):.2f} |")
print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
PY
