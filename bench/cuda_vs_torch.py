#!/usr/bin/env python3
"""pprt --backend cuda against PyTorch on the same GPU, like for like, in one
script (issue 54: "a fair benchmark first").

Models: ResNet-50 and ViT-B/16 from tests/models/zoo.py (the same weights in
both: built under one seed, made non-trivial by zoo.make_nontrivial,
exported once with a dynamic batch axis by the zoo's TorchScript export).

Columns, for each model, micro-batch and precision (rows):
  PyTorch eager, host to host   each batch uploaded from pageable host memory
                                (x.to("cuda")) and its output downloaded
                                (y.cpu()) inside the timed loop: what pprt's
                                figure includes (its inputs are cut out of
                                host arrays and its outputs written back)
  PyTorch eager, device         the inputs on the GPU before the timer starts,
                                one synchronize per loop (the bar
                                bench/RESULTS.md used up to the sixth lease)
  torch.compile, device         inductor's default mode on the device-resident
                                loop, where torch >= 2 has it (--compile
                                names the precisions; compile time excluded
                                from the rate and printed beside it); else a
                                line saying why it was skipped
  onnxruntime-gpu, host to host the same ONNX file on onnxruntime's CUDA
                                execution provider (TF32 off in f32), where
                                it is installed with that provider
  TensorRT, device              the same ONNX file built by tensorrt's
                                parser (TF32 off in f32, FP16/BF16 flags in
                                those rows), where the tensorrt package
                                imports; NOT YET RUN ANYWHERE (no machine
                                of this project has had it)
  pprt -pp P [overlap]          pprt on the same inputs, one process per run,
                                its steady-state rate (`--stats-json`
                                steady_samples_per_s after `--warmup 4`),
                                every stage on the one GPU; `overlap`: with
                                `--cuda-overlap on` (the pipeline's ends
                                double-buffered on copy streams, docs/cuda.md)
Every contender runs once per round and the rounds alternate (--runs), so a
slow spell of the machine hits all of them; each column keeps its best.

Strictness: f32 rows run PyTorch with TF32 off (cudnn.allow_tf32 = False,
cuda.matmul.allow_tf32 = False, float32 matmul precision "highest") and pprt
at its default strict f32. Some PyTorch kernels take tensor cores whatever
these flags say (the memory-efficient attention of ViT's
scaled_dot_product_attention is documented to run 3xTF32 in f32): the
script records torch.profiler's CUDA kernel names per model and precision
(eager, device-resident, at the first batch size) into the output, so a
reader sees which kernels ran. fp16/bf16 rows: PyTorch under
torch.autocast(dtype) with the model and inputs channels_last, pprt with
`--precision fp16|bf16`; both compared against PyTorch f32 on the same
inputs (max abs error over max |y|).

Rows are written as they finish, so a run cut short keeps what it measured.
Without a GPU: --dry-run prints every command line and configuration and
exits; --backend ref|dnnl|cuda-emu runs PyTorch on the CPU in f32 (a check of
the script, not a benchmark).

Usage: cuda_vs_torch.py --pprt PPRT --ppcc PPCC --work DIR --out FILE.md
       [--models resnet50,vit_b_16] [--batches 1,8,32] [--pp 1,2,3]
       [--overlap off,on] [--precisions f32,fp16,bf16] [--compile f32]
       [--iters 32] [--runs 3] [--layout nchw|nhwc|auto] [--dry-run]"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog="See the module docstring (the top of this file) for each column's method.")
ap.add_argument("--pprt", required=True)
ap.add_argument("--ppcc", required=True)
ap.add_argument("--work", required=True, help="exports, plans, data and outputs go here")
ap.add_argument("--out", required=True, help="the Markdown table (rewritten as each row finishes)")
ap.add_argument("--models", default="resnet50,vit_b_16")
ap.add_argument("--batches", default="1,8,32")
ap.add_argument("--pp", default="1,2,3", help="pipeline depths, all stages on the one GPU")
ap.add_argument("--overlap", default="off",
                help="pprt columns per -pp: off, on (--cuda-overlap on) or off,on (both, alternated)")
ap.add_argument("--precisions", default="f32", help="rows: f32, fp16, bf16 (PyTorch autocast channels_last)")
ap.add_argument("--compile", default="f32",
                help="precisions that get a torch.compile column (empty: none); skipped without inductor")
ap.add_argument("--iters", type=int, default=32, help="batches per timed loop")
ap.add_argument("--runs", type=int, default=3, help="alternated rounds; each column keeps its best")
ap.add_argument("--profile-kernels", type=int, default=12,
                help="torch.profiler kernel names kept per model and precision (0: no profile)")
ap.add_argument("--backend", default="cuda",
                help="pprt backend; anything but cuda runs PyTorch on the CPU in f32 (a check of the script)")
ap.add_argument("--half-storage", action="store_true",
                help="fp16/bf16 rows: pprt runs a half plan (ppcc --precision: activations, weights and messages in "
                     "the half type) instead of the f32 plan at pprt --precision (every tensor f32, the products' "
                     "compute type half)")
ap.add_argument("--layout", default="", choices=["", "nchw", "nhwc", "auto"],
                help="pprt --cuda-layout for every pprt column (empty: pprt's default, auto: half plans channels-last); "
                     "the columns' labels say it")
ap.add_argument("--dry-run", action="store_true", help="print the command lines and configurations, run nothing")
a = ap.parse_args()

PPS = [int(p) for p in a.pp.split(",") if p]
OVL = [o for o in a.overlap.split(",") if o]
PRECS = [p for p in a.precisions.split(",") if p]
COMPILE = {p for p in a.compile.split(",") if p}
BATCHES = [int(s) for s in a.batches.split(",") if s]
MODELS = [m for m in a.models.split(",") if m]
for o in OVL:
    if o not in ("off", "on"):
        ap.error(f"--overlap takes off, on or off,on, got '{a.overlap}'")
for p in PRECS:
    if p not in ("f32", "fp16", "bf16"):
        ap.error(f"--precisions takes f32, fp16, bf16, got '{p}'")
GPU = a.backend == "cuda"


def pprt_label(pp, ovl):
    return f"pprt -pp {pp}" + (" overlap" if ovl == "on" else "") + (f" {a.layout}" if a.layout else "")


def half_plan(prec):
    """Whether the rows of prec run a half plan (--half-storage)."""
    return a.half_storage and prec != "f32"


def pprt_argv(plan, data, out, js, prec, ovl):
    argv = [a.pprt, plan, data, "--backend", a.backend, "-q", "--warmup", "4", "--stats-json", js, "-o", out]
    if prec != "f32" and not half_plan(prec):
        argv += ["--precision", prec]
    argv += ["--cuda-overlap", ovl]  # said either way: the default changed (off until 2026-12-04's lease)
    if a.layout:
        argv += ["--cuda-layout", a.layout]
    return argv


def pprt_out(d, pp, ovl):
    return os.path.join(d, f"out_{pp}_{ovl}")


def ppcc_argv(onnx_path, pp, b, plan, prec="f32"):
    return [a.ppcc, onnx_path, "-pp", str(pp), "-b", str(b), "-o", plan, "-q"] + (
        ["--precision", prec] if half_plan(prec) else [])


def plan_path(d, b, pp, prec):
    return os.path.join(d, f"b{b}_pp{pp}" + (f"_{prec}" if half_plan(prec) else "") + ".plan")


# ---- what this machine's Python has ---------------------------------------------------------------

def probe():
    """(torch module or None, {column: None if usable else why not})."""
    why = {}
    try:
        import torch
    except ImportError as e:
        return None, {"torch": f"torch does not import ({e})"}
    major = int(torch.__version__.split(".")[0])
    if not GPU:
        why["compile"] = "no GPU (--backend is not cuda)"
    elif major < 2 or not hasattr(torch, "compile"):
        why["compile"] = f"torch {torch.__version__} has no torch.compile (needs torch >= 2)"
    else:
        try:
            import torch._inductor  # noqa: F401
        except Exception as e:  # noqa: BLE001 (any import failure means no inductor)
            why["compile"] = f"torch {torch.__version__} has no inductor ({type(e).__name__}: {e})"
    try:
        import onnxruntime as ort
        prov = ort.get_available_providers()
        if "CUDAExecutionProvider" not in prov:
            why["ort"] = f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (providers: {', '.join(prov)}): " \
                         "onnxruntime-gpu is not installed"
        elif not GPU:
            why["ort"] = "no GPU (--backend is not cuda)"
    except ImportError as e:
        why["ort"] = f"onnxruntime does not import ({e})"
    try:
        import tensorrt  # noqa: F401
        if not GPU:
            why["trt"] = "no GPU (--backend is not cuda)"
    except ImportError as e:
        why["trt"] = f"the tensorrt package does not import ({e}); the device tool cannot fetch it there, only carry " \
                     "wheels (about 1 GB with its libraries: over the 64 MiB a call carries)"
    return torch, why


torch, WHY = probe()
if torch is None and not a.dry_run:
    sys.exit(f"cuda_vs_torch: {WHY['torch']}")


def columns(prec):
    cols = ["PyTorch eager h2h", "PyTorch eager dev"]
    if prec in COMPILE and "compile" not in WHY:
        cols.append("torch.compile dev")
    if prec == "f32" and "ort" not in WHY:
        cols.append("onnxruntime-gpu h2h")
    if "trt" not in WHY:
        cols.append("TensorRT dev")
    cols += [pprt_label(pp, o) for pp in PPS for o in OVL]
    return cols


def skipped_lines():
    lines = []
    for k, name in (("compile", "torch.compile"), ("ort", "onnxruntime-gpu"), ("trt", "TensorRT")):
        if k in WHY:
            lines.append(f"- {name}: skipped: {WHY[k]}")
        elif k == "compile" and not COMPILE:
            lines.append("- torch.compile: available, not asked for (--compile is empty)")
    return lines


if a.dry_run:
    print(f"# cuda_vs_torch --dry-run: torch {torch.__version__ if torch else 'absent'}; backend {a.backend}")
    for ln in skipped_lines():
        print(ln)
    for m in MODELS:
        d = os.path.join(a.work, m)
        print(f"## {m}: export {os.path.join(d, 'model.onnx')} (zoo.py weights, TorchScript export, batch dynamic)")
        for prec in PRECS:
            for b in BATCHES:
                print(f"### {m} {prec} batch {b}: columns: {', '.join(columns(prec))}")
                data = os.path.join(d, f"data_{b}")
                for pp in PPS:
                    plan = plan_path(d, b, pp, prec)
                    print("  " + shlex.join(ppcc_argv(os.path.join(d, "model.onnx"), pp, b, plan, prec)))
                    for o in OVL:
                        print("  " + shlex.join(pprt_argv(plan, data, pprt_out(d, pp, o), os.path.join(d, "s.json"), prec, o)))
    print(f"# {a.runs} alternated rounds of {a.iters} batches; nothing ran (--dry-run)")
    sys.exit(0)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
import zoo  # noqa: E402

# the same strictness as pprt's default f32 on every PyTorch path
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
if hasattr(torch, "set_float32_matmul_precision"):
    torch.set_float32_matmul_precision("highest")
dev = "cuda" if GPU else "cpu"
sync = torch.cuda.synchronize if GPU else (lambda: None)
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}

head = []
if GPU:
    head.append(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"cuDNN {torch.backends.cudnn.version()}")
else:
    head.append(f"GPU: none (a check of the script: pprt --backend {a.backend}, PyTorch on the CPU); "
                f"torch {torch.__version__}")
head += [f"{a.iters} batches per timed loop, {a.runs} alternated rounds, each column its best; "
         "PyTorch TF32 off (cudnn.allow_tf32, cuda.matmul.allow_tf32, matmul precision 'highest'); "
         "h2h: inputs uploaded from pageable host memory and outputs downloaded inside the timed loop; "
         "dev: inputs on the GPU before the timer; fp16/bf16 rows: PyTorch autocast, model and inputs channels_last; "
         "pprt: steady-state samples/s of --stats-json after --warmup 4; err: max abs error over max |y| against "
         "PyTorch f32 on the same inputs"] + skipped_lines()
tables = {}     # precision -> [header rows..., rows...]
notes = []      # compile times, kernel names


def flush():
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(head) + "\n")
        for prec, rows in tables.items():
            f.write(f"\n### {prec}" + (" (pprt: half plans, ppcc --precision)" if half_plan(prec) else "") + "\n\n" + "\n".join(rows) + "\n")
        if notes:
            f.write("\n" + "\n".join(notes) + "\n")
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


def rel_err(y, ref):
    return float(np.max(np.abs(y.astype(np.float64) - ref))) / float(np.max(np.abs(ref)))


# ---- the contenders: each a function of nothing returning samples/s -------------------------------

def torch_loop(fn, xs, b):
    """Run fn over xs once untimed (warm-up, 4 batches) then timed; samples/s."""
    with torch.no_grad():
        for x in xs[:4]:
            fn(x)
        sync()
        t = time.perf_counter()
        for x in xs:
            fn(x)
        sync()
        return len(xs) * b / (time.perf_counter() - t)


def autocast(prec):
    if prec == "f32" or not GPU:
        return torch.autocast("cpu", enabled=False)
    return torch.autocast("cuda", dtype=DT[prec])


def kernel_names(fn, x, model_name, prec):
    """torch.profiler's CUDA kernels of a few eager calls, by device time."""
    if not GPU or a.profile_kernels <= 0:
        return
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), autocast(prec):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn(x)
            sync()
    rows = []
    for ev in prof.key_averages():
        t = getattr(ev, "self_device_time_total", None)
        if t is None:
            t = getattr(ev, "self_cuda_time_total", 0)
        if t > 0:
            rows.append((t, ev.count, ev.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows) or 1
    notes.append(f"PyTorch eager kernels, {model_name} {prec}, batch {x.shape[0]} (torch.profiler, 3 calls, share of "
                 f"GPU time; names with tf32, xmma, fmha, cutlass or sm90 tell which ran on tensor cores):")
    for t, n, k in rows[:a.profile_kernels]:
        notes.append(f"- {100 * t / total:.1f} % ({n // 3} a call) `{k[:160]}`")
    tc = sorted({k for _, _, k in rows if any(s in k.lower() for s in ("tf32", "xmma", "fmha", "cutlass", "sm90"))})
    if tc:
        notes.append("  tensor-core-looking kernels: " + "; ".join(f"`{k[:100]}`" for k in tc[:8]))
    notes.append("")


def ort_session(onnx_path):
    import onnxruntime as ort
    opts = {"use_tf32": "0", "cudnn_conv_algo_search": "DEFAULT"}
    return ort.InferenceSession(onnx_path, providers=[("CUDAExecutionProvider", opts)])


def trt_runner(onnx_path, b, spec, prec):
    """A TensorRT engine for batch b, run on torch's device buffers (not yet run anywhere)."""
    import tensorrt as trt
    log = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(log)
    net = builder.create_network(0)
    parser = trt.OnnxParser(net, log)
    with open(onnx_path, "rb") as f:
        if not parser.parse(f.read()):
            raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    cfg = builder.create_builder_config()
    if hasattr(trt.BuilderFlag, "TF32"):
        cfg.clear_flag(trt.BuilderFlag.TF32)
    if prec == "fp16":
        cfg.set_flag(trt.BuilderFlag.FP16)
    elif prec == "bf16" and hasattr(trt.BuilderFlag, "BF16"):
        cfg.set_flag(trt.BuilderFlag.BF16)
    shape = (b,) + tuple(spec.input_shape)
    prof = builder.create_optimization_profile()
    prof.set_shape(net.get_input(0).name, shape, shape, shape)
    cfg.add_optimization_profile(prof)
    eng = trt.Runtime(log).deserialize_cuda_engine(builder.build_serialized_network(net, cfg))
    ctx = eng.create_execution_context()
    iname, oname = net.get_input(0).name, net.get_output(0).name
    ctx.set_input_shape(iname, shape)
    y = torch.empty(tuple(ctx.get_tensor_shape(oname)), device=dev, dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream

    def run(x):
        ctx.set_tensor_address(iname, x.data_ptr())
        ctx.set_tensor_address(oname, y.data_ptr())
        ctx.execute_async_v3(stream)
        return y
    return run


def bench_row(name, d, spec, model, onnx_path, b, prec, y_ref_by_b):
    gen = torch.Generator().manual_seed(b)
    inp = torch.randn((a.iters * b,) + tuple(spec.input_shape), generator=gen)
    xs_host = [inp[i * b:(i + 1) * b].clone() for i in range(a.iters)]   # pageable, contiguous
    data = os.path.join(d, f"data_{b}")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), inp.numpy())
    # the reference of every row: PyTorch f32 strict (NCHW, no autocast), device-resident, the same inputs
    if b not in y_ref_by_b:
        model.to(memory_format=torch.contiguous_format)
        with torch.no_grad():
            y_ref_by_b[b] = torch.cat([model(x.to(dev)).float().cpu() for x in xs_host]).numpy()
    y_ref = y_ref_by_b[b]
    cl = prec != "f32" and GPU
    mf = torch.channels_last if cl else torch.contiguous_format
    m = model.to(memory_format=mf)   # (in place: nn.Module.to returns the module)
    xs_dev = [x.to(dev, memory_format=mf) for x in xs_host]
    cols = columns(prec)
    best = {c: 0.0 for c in cols}
    err = {}
    contenders = {}

    def eager_h2h():
        with autocast(prec):
            return torch_loop(lambda x: m(x.to(dev, memory_format=mf)).cpu(), xs_host, b)

    def eager_dev():
        with autocast(prec):
            return torch_loop(m, xs_dev, b)
    contenders["PyTorch eager h2h"] = eager_h2h
    contenders["PyTorch eager dev"] = eager_dev
    with torch.no_grad(), autocast(prec):
        y_t = torch.cat([m(x).float().cpu() for x in xs_dev]).numpy()
    err["PyTorch eager"] = rel_err(y_t, y_ref)
    if "torch.compile dev" in cols:
        t = time.time()
        try:
            cm = torch.compile(m)
            with torch.no_grad(), autocast(prec):
                cm(xs_dev[0])
                sync()
            ct = time.time() - t
            notes.append(f"torch.compile {name} {prec} batch {b}: compiled in {ct:.1f} s (not in the rate)")

            def compiled():
                with autocast(prec):
                    return torch_loop(cm, xs_dev, b)
            contenders["torch.compile dev"] = compiled
            with torch.no_grad(), autocast(prec):
                err["torch.compile"] = rel_err(torch.cat([cm(x).float().cpu() for x in xs_dev]).numpy(), y_ref)
        except Exception as e:  # noqa: BLE001 (reported in the table's notes, the row goes on)
            notes.append(f"torch.compile {name} {prec} batch {b}: failed after {time.time() - t:.1f} s: "
                         f"{type(e).__name__}: {str(e)[:300]}")
    if "onnxruntime-gpu h2h" in cols:
        try:
            sess = ort_session(onnx_path)
            iname = sess.get_inputs()[0].name
            xs_np = [x.numpy() for x in xs_host]

            def ort_h2h():
                sess.run(None, {iname: xs_np[0]})
                t0 = time.perf_counter()
                for x in xs_np:
                    sess.run(None, {iname: x})
                return len(xs_np) * b / (time.perf_counter() - t0)
            contenders["onnxruntime-gpu h2h"] = ort_h2h
            err["onnxruntime-gpu"] = rel_err(np.concatenate([sess.run(None, {iname: x})[0] for x in xs_np]), y_ref)
        except Exception as e:  # noqa: BLE001
            notes.append(f"onnxruntime-gpu {name} batch {b}: failed: {type(e).__name__}: {str(e)[:300]}")
    if "TensorRT dev" in cols:
        try:
            t = time.time()
            run = trt_runner(onnx_path, b, spec, prec)
            notes.append(f"TensorRT {name} {prec} batch {b}: engine built in {time.time() - t:.1f} s (not in the rate)")
            xs_c = [x.contiguous() for x in xs_dev]
            contenders["TensorRT dev"] = lambda: torch_loop(run, xs_c, b)
            err["TensorRT"] = rel_err(torch.cat([run(x).float().cpu() for x in xs_c]).numpy(), y_ref)
        except Exception as e:  # noqa: BLE001
            notes.append(f"TensorRT {name} {prec} batch {b}: failed: {type(e).__name__}: {str(e)[:300]}")
    plans = {}
    for pp in PPS:
        plans[pp] = plan_path(d, b, pp, prec)
        if not os.path.exists(plans[pp]):
            subprocess.run(ppcc_argv(onnx_path, pp, b, plans[pp], prec), check=True)
    for pp in PPS:
        for o in OVL:
            lab = pprt_label(pp, o)
            out = pprt_out(d, pp, o)

            def pprt_run(pp=pp, o=o, out=out):
                js = os.path.join(d, "s.json")
                r = subprocess.run(pprt_argv(plans[pp], data, out, js, prec, o), stderr=subprocess.PIPE, text=True)
                if r.returncode != 0:
                    print(f"[bench] {' '.join(pprt_argv(plans[pp], data, out, js, prec, o))}: rc {r.returncode}: "
                          f"{r.stderr.strip()[-400:]}", file=sys.stderr, flush=True)
                    return float("nan")
                return json.load(open(js))["steady_samples_per_s"]
            contenders[lab] = pprt_run
    for _ in range(a.runs):   # alternated rounds
        for c, fn in contenders.items():
            r = fn()
            if r == r:  # not NaN
                best[c] = max(best[c], r)
    for pp in PPS:
        for o in OVL:
            try:
                y = np.load(os.path.join(pprt_out(d, pp, o), spec.output + ".npy"))
                err[pprt_label(pp, o)] = rel_err(y, y_ref)
            except (OSError, ValueError) as e:
                err[pprt_label(pp, o)] = f"no output ({e})"
    # overlap on and off must give the same bytes
    for pp in PPS:
        if len(OVL) == 2:
            f0, f1 = (os.path.join(pprt_out(d, pp, o), spec.output + ".npy") for o in OVL)
            if os.path.exists(f0) and os.path.exists(f1):
                same = open(f0, "rb").read() == open(f1, "rb").read()
                err[f"-pp {pp} overlap"] = "same bytes as off" if same else "DIFFERENT BYTES FROM OFF"
    if prec not in tables:
        tables[prec] = ["| model | batch | " + " | ".join(cols) + " | "
                        + " | ".join(f"{c} / eager h2h" for c in cols if c.startswith("pprt"))
                        + " | " + " | ".join(f"{c} / eager dev" for c in cols if c.startswith("pprt")) + " | err |",
                        "|---|---|" + "---:|" * (len(cols) + 2 * sum(c.startswith("pprt") for c in cols)) + "---|"]
    h2h, dv = best["PyTorch eager h2h"], best["PyTorch eager dev"]
    e = "; ".join(f"{k}: {v:.1e}" if isinstance(v, float) else f"{k}: {v}" for k, v in err.items())
    pcols = [c for c in cols if c.startswith("pprt")]
    tables[prec].append(f"| {name} | {b} | " + " | ".join(f"{best[c]:.1f}" for c in cols) + " | "
                        + " | ".join(f"{best[c] / h2h:.2f}" if h2h else "-" for c in pcols) + " | "
                        + " | ".join(f"{best[c] / dv:.2f}" if dv else "-" for c in pcols) + f" | {e} |")
    print(tables[prec][-1], flush=True)
    if b == BATCHES[0]:
        kernel_names(m, xs_dev[0], name, prec)
    flush()
    del xs_dev


flush()
for prec in PRECS:
    if prec != "f32" and not GPU:
        head.append(f"- {prec} rows: skipped (no GPU)")
        flush()
        continue
    for name in MODELS:
        d = os.path.join(a.work, name)
        spec, model, onnx_path = export(name, d)
        refs = {}
        for b in BATCHES:
            bench_row(name, d, spec, model, onnx_path, b, prec, refs)
        del model
        if GPU:
            torch.cuda.empty_cache()
