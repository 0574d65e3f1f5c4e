#!/usr/bin/env python3
"""ppcc's device memory model (--memory-model cuda --precision fp16, AdamW)
beside PyTorch's own mixed-precision training of the same model and batch
on a GPU: torch.cuda.max_memory_allocated over two steps (autocast fp16,
GradScaler, AdamW; the second step holds the moments), and the CUDA
context's cost (what cudaMemGetInfo says is used once the context, cuDNN
and cuBLAS are up, before the model): that is what --reserve stands for.

Two modes:
  here (no GPU):  train_memory_gpu.py --estimate PPCC OUT.json
      exports each case for training (torch 1.13, TrainingMode.TRAINING),
      runs `ppcc -pp 1 -b B --train --memory-model cuda --precision fp16
      --optimizer adamw --report` and keeps each device's figures;
      tests/cuda/train_memory_est.json is its output, committed.
  there (a GPU, torch with CUDA): train_memory_gpu.py [EST.json]
      trains each case two steps and prints one row per case: PyTorch's
      peak allocated, ppcc's estimate (without --reserve), their ratio, and
      the context's bytes against the 1.5 GiB default reserve. Under a
      minute on an H200; needs torchvision only (timm's case is skipped
      where timm does not import). Exit 0 unless a case fails to run.
What differs by design (docs/training.md, "Memory on a GPU"): autocast keeps
f32 weights and f32 gradients (4N + 4N) and caches fp16 copies (2N) where
ppcc's model has f32 master weights, an fp16 working copy and fp16
gradients (4N + 2N + 2N); PyTorch saves fused kernels' inputs where ppcc
stashes what each exported op's gradient reads."""
import json
import os
import subprocess
import sys
import time

CASES = [  # name, builder, input side, batch
    ("resnet50", "torchvision.models.resnet50", 224, 64),
    ("vit_b_16", "torchvision.models.vit_b_16", 224, 32),
    ("convnext_tiny", "timm:convnext_tiny", 224, 64),
]


def build(spec):
    import torch  # noqa: F401
    if spec.startswith("timm:"):
        import timm
        return timm.create_model(spec[5:], pretrained=False, num_classes=10, drop_path_rate=0.0)
    mod, fn = spec.rsplit(".", 1)
    import importlib
    return getattr(importlib.import_module(mod), fn)(num_classes=10)


def estimate(ppcc, out):
    import torch
    res = {}
    work = os.path.join(os.path.dirname(os.path.abspath(out)), "train_memory_est.work")
    os.makedirs(work, exist_ok=True)
    for name, spec, side, b in CASES:
        try:
            net = build(spec)
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        torch.manual_seed(0)
        net.train()
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(net, (torch.zeros(2, 3, side, side),), path, input_names=["input"],
                          output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        r = subprocess.run([ppcc, path, "--train", "--loss", "cross-entropy:logits", "-b", str(b), "-pp", "1",
                            "--memory-model", "cuda", "--precision", "fp16", "--loss-scale", "dynamic", "--optimizer", "adamw", "--report",
                            "-o", os.path.join(work, name + ".plan")], capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: ppcc failed: {r.stderr[-300:]}")
            continue
        head = r.stdout.split("GPipe_total")[1].splitlines()[0].split()
        row = r.stdout.split("GPipe_total")[1].splitlines()[1].split()
        cols = ["device", "stages", "weights", "arenas", "stash", "1F1B_keeps", "1F1B_total", "GPipe_total"] + head
        fig = dict(zip(cols, row))
        res[name] = {"spec": spec, "side": side, "batch": b,
                     "params": sum(p.numel() for p in net.parameters()),
                     "estimate_bytes": float(fig["1F1B_total"]) * 1e6,
                     "state_bytes": float(fig["state"]) * 1e6, "arenas_bytes": float(fig["arenas"]) * 1e6,
                     "stash_bytes": float(fig["stash"]) * 1e6, "msgs_bytes": float(fig["msgs_1F1B"]) * 1e6}
        print(name, res[name])
    with open(out + ".tmp", "w") as f:
        json.dump({"ppcc": "-pp 1 --memory-model cuda --precision fp16 --optimizer adamw", "cases": res}, f, indent=1)
    os.replace(out + ".tmp", out)
    return 0


def measure(est_path):
    import torch
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 77
    with open(est_path) as f:
        est = json.load(f)["cases"]
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = False
    free0, total = torch.cuda.mem_get_info()
    x = torch.randn(8, 3, 32, 32, device=dev)
    torch.nn.functional.conv2d(x, torch.randn(8, 3, 3, 3, device=dev)).sum().item()   # cuDNN up
    (x.flatten(1) @ torch.randn(3072, 8, device=dev)).sum().item()                     # cuBLAS up
    del x
    torch.cuda.empty_cache()
    free1, _ = torch.cuda.mem_get_info()
    ctx = total - free1
    print(f"device {torch.cuda.get_device_name()}: {total / 2**30:.1f} GiB; used by the context, cuDNN and cuBLAS: "
          f"{ctx / 2**30:.2f} GiB (ppcc's default --reserve for the cuda model: 1.50 GiB)")
    print("| model | batch | params | PyTorch AMP peak allocated GB | ppcc estimate GB | ppcc / PyTorch | s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rc = 0
    for name, e in est.items():
        t = time.time()
        try:
            net = build(e["spec"]).to(dev).train()
        except ImportError as ex:
            print(f"| {name} | skipped: {ex} |")
            continue
        try:
            opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
            scaler = torch.cuda.amp.GradScaler()
            xb = torch.randn(e["batch"], 3, e["side"], e["side"], device=dev)
            yb = torch.randint(0, 10, (e["batch"],), device=dev)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()  # the f32 weights, before the steps
            for _ in range(2):
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.cross_entropy(net(xb), yb)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            print(f"| {name} | {e['batch']} | {e['params'] / 1e6:.1f}M | {peak / 1e9:.2f} (weights {base / 1e9:.2f}) | "
                  f"{e['estimate_bytes'] / 1e9:.2f} | {e['estimate_bytes'] / peak:.2f} | {time.time() - t:.1f} |",
                  flush=True)
        except RuntimeError as ex:
            print(f"| {name} | failed: {str(ex)[:200]} |")
            rc = 1
        del net
        torch.cuda.empty_cache()
    return rc


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) >= 2 and sys.argv[1] == "--estimate":
        sys.exit(estimate(sys.argv[2], sys.argv[3]))
    sys.exit(measure(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "train_memory_est.json")))
