#!/usr/bin/env python3
"""The seed notes' four timm 0.9.2 models exported for training, at the notes'
input sizes: random weights, num_classes=10, TrainingMode.TRAINING, no
constant folding, opset 14, dynamic batch (docs/training.md, "The export").
Stochastic depth is off (drop_path_rate 0: its training-mode draw does not export).
A model over 2 GB is saved with its weights as external data
(model.onnx.data, one file), which ppcc reads beside model.onnx.

Usage: bench/notes_export.py OUTDIR [MODEL ...]   (default: the four; a model
whose OUTDIR/NAME/model.onnx exists is kept). Each export runs in its own
process (the 1B-parameter eva_giant traces in about 12 GB).
Used by bench/notes_table.py; exports never go into the repository."""
import gc
import json
import os
import shutil
import subprocess
import sys
import time

# name as the notes write it (timm 0.9.2 resolves the old names to these tags), input side
MODELS = {
    "swinv2_large_window12to16_192to256.ms_in22k_ft_in1k": 256,
    "convnext_xlarge.fb_in22k_ft_in1k": 224,
    "tf_efficientnet_l2.ns_jft_in1k": 800,
    "eva_giant_patch14_336.clip_ft_in1k": 336,
}


def short(name):
    return name.split(".")[0]


def export_one(name, side, d):
    import torch
    import timm
    import onnx
    torch.manual_seed(0)
    torch.set_num_threads(1)
    t0 = time.time()
    # drop_path_rate 0: training-mode DropPath draws with bernoulli_, which torch 1.13 cannot export
    model = timm.create_model(name, pretrained=False, num_classes=10, exportable=True, drop_path_rate=0.0)
    model.train()
    nparams = sum(p.numel() for p in model.parameters())
    for p in model.parameters():   # no autograd while tracing: the trace would keep every activation
        p.requires_grad_(False)
    tmp = os.path.join(d, ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    x = torch.randn(1, 3, side, side)
    with torch.no_grad():
        torch.onnx.export(model, (x,), os.path.join(tmp, "model.onnx"), input_names=["input"],
                          output_names=["logits"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    del model
    gc.collect()
    files = os.listdir(tmp)
    big = len(files) > 1
    if big:  # torch wrote one file per initializer: one data file instead
        m = onnx.load(os.path.join(tmp, "model.onnx"), load_external_data=True)
        shutil.rmtree(tmp)
        onnx.save_model(m, os.path.join(d, "model.onnx.part"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
        del m
        os.chmod(os.path.join(d, "model.onnx.data"), 0o644)
    else:
        os.replace(os.path.join(tmp, "model.onnx"), os.path.join(d, "model.onnx.part"))
        shutil.rmtree(tmp)
    meta = {"name": name, "input": [3, side, side], "params": nparams, "external_data": big,
            "seconds": round(time.time() - t0, 1), "timm": timm.__version__, "torch": torch.__version__}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(os.path.join(d, "model.onnx.part"), os.path.join(d, "model.onnx"))  # whole or not at all


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--one":
        name, d = sys.argv[2], sys.argv[3]
        export_one(name, MODELS[name], d)
        return 0
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    rc = 0
    for n in names:
        full = next((m for m in MODELS if m == n or short(m) == n), None)
        if full is None:
            print(f"notes_export.py: unknown model {n}: one of {', '.join(MODELS)}", file=sys.stderr)
            return 2
        d = os.path.join(out, short(full))
        if os.path.exists(os.path.join(d, "model.onnx")):
            continue
        os.makedirs(d, exist_ok=True)
        t = time.time()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", full, d])
        print(f"notes_export.py: {short(full)}: {'ok' if r.returncode == 0 else 'FAILED'} "
              f"({time.time() - t:.0f} s)", file=sys.stderr, flush=True)
        rc = rc or r.returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
