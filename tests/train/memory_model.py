#!/usr/bin/env python3
"""The device memory model of a training plan (ppcc --train --memory-model cuda,
passes/train_memory.c) against byte counts computed here from the model's
parameter count N (PyTorch's own count of the weights that train):
  - fp16 + AdamW holds 8N bytes more than f32 + plain SGD (4N master + 2N
    working copy + 2N gradients + 8N moments against 4N + 4N), bf16 as fp16,
    f32 + AdamW 8N more than f32 + SGD;
  - --zero 1 lowers every dp=2 row of --devices 2 --search by (4N + 8N) / 2
    under fp16 + AdamW (master weights and moments halved) and by 8N / 2 under
    f32 (the moments alone), to the byte, and leaves the pp=2 rows (one
    replica) as they were;
  - activations, stash and messages at fp16 take less than their f32 bytes
    (0.86 measured: the policy's arenas keep f32 copies beside the half
    values; a GPU storing every activation in half would take about half);
  - --max-batch -pp 2 under the cuda model (with --recompute all too): the
    micro-batch found fits every device's 1F1B total as ppcc --report gives
    it under the cap less the default --reserve (1.5 GiB), the next one
    overflows a device;
  - the refusals: --zero 1 without the cuda model, --precision without
    --train, an unknown precision (exit 2, no plan);
  - the stash a micro-batch of a small timm ConvNeXt and ViT (ppcc --report,
    -pp 1) is 0.8-1.2x what PyTorch's autograd saves for the same step
    (saved_tensors_hooks, each storage once, weights aside), and the
    written-out LayerNorm and GELU (--disable-pass fuse) keep 1.3x more.
No GPU is needed: the model is a figure of ppcc (docs/training.md, "Memory on
a GPU"). Usage: memory_model.py PPCC WORK"""
import json
import os
import subprocess
import sys

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("skipped: no torch")
    sys.exit(77)

PPCC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
os.chdir(WORK)
failures = []
RESERVE = 1.5 * 2**30


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1),
                    nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
N = sum(p.numel() for p in net.parameters())
torch.onnx.export(net, (torch.zeros(2, 3, 32, 32),), "net.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
TRAIN = ["net.onnx", "--train", "--loss", "cross-entropy:logits"]


def ppcc(*args):
    r = subprocess.run([PPCC, *TRAIN, *args], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc {' '.join(args)}: exit {r.returncode}: {r.stderr[-400:]}")
    return r


def search(tag, *args):
    """{(pp, dp, micro_batch): [(memory_bytes, state_bytes) per device]} of --devices 2 --search"""
    r = ppcc("--devices", "2", "--search", "--max-memory", "24GiB", "--batch-sizes", "4,16", "--memory-model",
             "cuda", "--report-json", f"{tag}.json", *args)
    if r.returncode:
        return {}
    with open(f"{tag}.json") as f:
        s = json.load(f)["search"]
    check(s.get("memory_model") == "cuda", f"{tag}: the search JSON names memory_model {s.get('memory_model')}")
    return {(c["pp"], c["dp"], c["micro_batch"]): [(st["memory_bytes"], st["params_bytes"]) for st in c["stages"]]
            for c in s["candidates"] if c["fits"]}


base = search("f32_sgd", "--precision", "f32")
# fp16 needs a loss scale (ppcc refuses it without); the scale changes no byte
rows = {k: search(k, "--precision", p, "--optimizer", "adamw", *(["--loss-scale", "dynamic"] if p == "fp16" else []), *z)
        for k, p, z in (("fp16", "fp16", []), ("bf16", "bf16", []), ("f32", "f32", []),
                        ("fp16_zero", "fp16", ["--zero", "1"]), ("f32_zero", "f32", ["--zero", "1"]))}
check(len(base) == 4 and all(len(v) == 4 for v in rows.values()), f"every search has 4 fitting rows: "
      f"{len(base)}, {[len(v) for v in rows.values()]}")
key = (1, 2, 4)
if key in base and all(key in v for v in rows.values()):
    state = lambda t: rows[t][key][0][1] if t in rows else base[key][0][1]  # noqa: E731
    check(state("fp16") - state("f32_sgd") == 8 * N, f"fp16 AdamW against f32 SGD: {state('fp16') - state('f32_sgd')} "
          f"bytes more, expected 8N = {8 * N}")
    check(state("bf16") == state("fp16"), f"bf16 {state('bf16')} against fp16 {state('fp16')} bytes of state")
    check(state("f32") - state("f32_sgd") == 8 * N, f"f32 AdamW against f32 SGD: {state('f32') - state('f32_sgd')} "
          f"bytes more, expected 8N = {8 * N}")
for t, want in (("fp16", (4 * N + 8 * N) // 2), ("f32", 8 * N // 2)):
    a, z = rows[t], rows[t + "_zero"]
    for k in sorted(set(a) & set(z)):
        got = [x[0] - y[0] for x, y in zip(a[k], z[k])]
        exp = [want if k[1] == 2 else 0] * len(got)
        check(all(abs(g - e) <= 1 for g, e in zip(got, exp)), f"--zero 1, {t}, pp {k[0]} dp {k[1]} micro-batch {k[2]}: "
              f"lower by {got} bytes, expected {exp}")
k16 = (1, 2, 16)
if k16 in rows["fp16"] and k16 in rows["f32"]:
    act = lambda t: rows[t][k16][0][0] - rows[t][k16][0][1]  # noqa: E731  (arenas, stash, messages, workspace)
    ws = 32 * 2**20
    ratio = (act("fp16") - ws) / (act("f32") - ws)
    # at most f32's, at least 40% of it: the --precision policy (passes/precision.c) keeps norms and the
    # elementwise ops in f32, and its arenas hold the f32 copies beside the half values products read (0.91
    # of f32's by the model before a half value and its f32 source were counted once; 0.86 since): the 45-60%
    # a GPU storing every activation in half would give needs half kernels that read half values directly
    check(0.4 <= ratio < 1.0, f"fp16's activations, stash and messages are {ratio:.3f} of f32's, expected 0.4-1.0")


def totals(b, extra):
    r = ppcc("-b", str(b), "-pp", "2", "--report", "-o", "sized.plan", *extra)
    if r.returncode or "GPipe_total" not in r.stdout:
        return []
    return [float(ln.split()[6]) * 1e6 for ln in r.stdout.split("GPipe_total")[1].splitlines()[1:3]]


CUDA16 = ["--memory-model", "cuda", "--precision", "fp16", "--loss-scale", "dynamic", "--optimizer", "adamw"]
for extra in (CUDA16, CUDA16 + ["--recompute", "all"], CUDA16 + ["--policy", "memory"]):
    at24 = totals(24, extra)
    if not at24:
        continue
    cap = RESERVE + max(at24) + 20e3
    r = ppcc("-pp", "2", "--max-batch", "--max-memory", f"{int(cap)}B", *extra)
    if r.returncode or "largest micro-batch:" not in r.stdout:
        check(False, f"--max-batch {extra}: {r.stdout[-400:]}")
        continue
    best = int(r.stdout.split("largest micro-batch:")[1].split()[0])
    check("cuda model at fp16" in r.stdout and "limited by device" in r.stdout, f"--max-batch {extra}: {r.stdout}")
    at, over = totals(best, extra), totals(best + 1, extra)
    check(best >= 24 and at and over and max(at) <= cap - RESERVE + 1e3 < max(over) + 2e3,
          f"--max-batch {extra} found {best} under {(cap - RESERVE) / 1e6:.3f} MB: the report gives {at} there and "
          f"{over} at {best + 1}")

# a zb-h1 plan (--schedule zb-h1, host model): what B keeps for W per micro-batch as the report gives it is the
# entry pprt's run keeps (its log's w_keep_bytes, from the plan's tensors), and the 1F1B totals count it at least
# twice over the unsplit plan's (W's incoming message, the tail of B's outgoing buffers, its entries);
# bench/train_memory.py --zb-h1 sets the whole against pprt's peak (within 8% on ResNet-18, ViT, MobileNetV2)
PPRT = os.environ.get("PPRT")
if PPRT:
    import numpy as np
    os.makedirs("zdata", exist_ok=True)
    rng = np.random.default_rng(0)
    np.save("zdata/input.npy", rng.standard_normal((8, 3, 32, 32)).astype(np.float32))
    np.save("zdata/labels.npy", rng.integers(0, 10, 8).astype(np.int64))

    def zb_report(*extra):
        r = ppcc("-b", "2", "-pp", "2", "--micro-batches", "4", "--report", "-o", "z.plan", *extra)
        if r.returncode:
            return [], []
        tot = [float(ln.split()[6]) for ln in r.stdout.split("GPipe_total")[1].splitlines()[1:3]]
        kept = [float(ln.split()[-1]) for ln in r.stdout.split("kept_for_W")[1].splitlines()[1:3]] if extra else []
        return tot, kept

    plain, _ = zb_report()
    zb, kept = zb_report("--schedule", "zb-h1")
    r = subprocess.run([PPRT, "z.plan", "zdata", "--steps", "1", "--accumulate", "4", "--schedule", "zb-h1", "-q",
                        "--log-json", "z.json"], capture_output=True, text=True)
    check(r.returncode == 0, f"pprt zb-h1: exit {r.returncode}: {r.stderr[-300:]}")
    run = [d["w_keep_bytes"] / 1e6 for d in json.load(open("z.json"))["stash"]] if r.returncode == 0 else []
    check(len(kept) == 2 and len(run) == 2 and all(abs(a - b) <= 6e-4 for a, b in zip(kept, run)) and max(kept) > 0,
          f"zb-h1: kept for W {kept} MB by the report, {run} MB by pprt's run")
    check(len(plain) == 2 and len(zb) == 2 and all(z - p >= 2 * k - 2e-3 for z, p, k in zip(zb, plain, kept)),
          f"zb-h1: the 1F1B totals {zb} MB against the unsplit plan's {plain}: not {kept} MB kept for W twice over")
    print(f"zb-h1: kept for W {kept} MB a micro-batch (pprt: {run}); 1F1B totals {zb} MB, unsplit {plain}")

# --policy memory at -pp 2 (passes/partition_train.c, pp_train_memory_cut): the cut whose devices' largest
# 1F1B total is smallest; no cut a user can name (--split-at each module of the Sequential) does better, nor
# the auto split
at64 = {sp: totals(64, CUDA16 + list(sp)) for sp in [("--policy", "memory"), ("--policy", "auto")] +
        [("--split-at", str(k)) for k in range(1, 10)]}
mem = at64.pop(("--policy", "memory"))
others = {" ".join(k): max(v) for k, v in at64.items() if v}
check(mem and len(others) == 10 and all(max(mem) <= m + 1e3 for m in others.values()),
      f"--policy memory's devices {mem} at micro-batch 64: some split has a smaller largest device: {others}")

# a micro-batch ppcc cannot compile (a tensor beyond this machine's memory) is one that does not fit, not an error
r = ppcc("-pp", "2", "--max-batch", "--max-memory", "100TiB", *CUDA16)
check(r.returncode == 0 and ("ppcc cannot compile it" in r.stdout or "every micro-batch up to" in r.stdout),
      f"--max-batch under 100TiB: exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")

for args, msg in ((["--zero", "1"], "--zero 1 is a figure of the device memory model"),
                  (["--precision", "fp8"], "--precision needs f32, bf16 or fp16, got 'fp8'")):
    r = subprocess.run([PPCC, *TRAIN, "-b", "4", *args, "-o", "refused.plan"], capture_output=True, text=True)
    check(r.returncode == 2 and msg in r.stderr and not os.path.exists("refused.plan"),
          f"ppcc {args}: exit {r.returncode}: {r.stderr[-300:]}")
# (--precision without --train is no longer refused: an inference plan's half storage, tests/cuda/half_storage.sh)



# ---- the stash against what PyTorch's autograd saves --------------------------------------------
def torch_saved_bytes(mod, x, labels):
    """the bytes PyTorch's autograd saves for the backward of cross-entropy(mod(x)): every tensor its
    backward functions keep (saved_tensors_hooks), each storage once, the weights not"""
    weights = {p.data_ptr() for p in mod.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        if st.data_ptr() not in weights:
            seen[st.data_ptr()] = st.nbytes() if hasattr(st, "nbytes") else st.size() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        nn.functional.cross_entropy(mod(x), labels)
    return sum(seen.values())


def ppcc_stash(path, b, *extra):
    """ppcc --report's stash per micro-batch of a -pp 1 training plan, bytes"""
    r = subprocess.run([PPCC, path, "--train", "--loss", "cross-entropy:out", "-b", str(b), "-pp", "1", "--report",
                        "-o", "stash.plan", *extra], capture_output=True, text=True)
    check(r.returncode == 0 and "GPipe_total" in r.stdout, f"ppcc {path} {extra}: exit {r.returncode}: {r.stderr[-300:]}")
    return float(r.stdout.split("GPipe_total")[1].splitlines()[1].split()[4]) * 1e6 if r.returncode == 0 else 0.0


# ppcc keeps per micro-batch what its gradient rules read. With LayerNorm and the Erf GELU fused before the
# gradient (passes/fuse.c, pp_fuse_train: their rules read X where the nine and five written-out ops' read
# every intermediate), a unary gradient keeping only what its derivative reads, timm's Dropout(0.0) an
# Identity and a Linear's Transpose(W) transposed back to W, that is about what PyTorch's autograd saves
# (0.99x on the ConvNeXt, 0.97x on the ViT, torch 1.13 on a Zen 4 VM; ppcc keeps the Transposes around
# ConvNeXt's LayerNorm as tensors where PyTorch keeps views, and PyTorch keeps LayerNorm's statistics);
# with --disable-pass fuse (the ops written out) 1.67x and 1.52x; 2.33x and 2.29x before those changes.
try:
    from timm.models.convnext import ConvNeXt
    from timm.models.vision_transformer import VisionTransformer
except Exception as e:  # noqa: BLE001
    print(f"the stash against PyTorch's: skipped, timm does not import ({type(e).__name__})")
else:
    torch.manual_seed(0)
    for name, mod, x in (("convnext", ConvNeXt(depths=(1, 1, 2, 1), dims=(32, 48, 64, 96), num_classes=10),
                          torch.randn(2, 3, 64, 64)),
                         ("vit", VisionTransformer(img_size=32, patch_size=4, embed_dim=96, depth=2, num_heads=3,
                                                   num_classes=10), torch.randn(2, 3, 32, 32))):
        mod.train()
        torch.onnx.export(mod, (x,), f"{name}.onnx", input_names=["x"], output_names=["out"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        want = torch_saved_bytes(mod, x, torch.tensor([1, 2]))
        got, unfused = ppcc_stash(f"{name}.onnx", 2), ppcc_stash(f"{name}.onnx", 2, "--disable-pass", "fuse")
        print(f"{name}: stash {got / 1e6:.3f} MB a micro-batch of 2, {got / want:.2f}x PyTorch's saved "
              f"{want / 1e6:.3f} MB; unfused {unfused / want:.2f}x")
        check(0.8 * want <= got <= 1.2 * want, f"{name}: ppcc's stash {got / 1e6:.3f} MB against PyTorch's saved "
              f"tensors {want / 1e6:.3f} MB, expected 0.8-1.2x")
        check(unfused >= 1.3 * got, f"{name}: the unfused stash {unfused / 1e6:.3f} MB is not 1.3x the fused "
              f"{got / 1e6:.3f} MB")

print(f"N = {N}; {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
