#!/usr/bin/env python3
"""Half plans of timm and torchvision models on cuda-emu against onnxruntime's f32 (docs/usage.md, "Half
precision for inference"; not in CI: about 40 minutes on 2 cores for the default list, the emulator's
convolutions being plain loops).

For each model (random weights, 10 classes where timm builds it; 64x64 unless its input size is fixed): the
export at opset 17 with a dynamic batch, onnxruntime's f32 outputs of two images, then ppcc --precision fp16
and bf16 at -b 1 and pprt --backend cuda-emu on them: the Casts in the plan (ppcc --dump-ir: 2 where the
whole model is half, its input's and its output's), the steps on the host fallback (--cuda-explain; 0 where
every op has a CUDA route in half) and max |error| over max |output| against onnxruntime's f32. Prints one
line per model and precision; exits 1 if a run fails or gives NaN where onnxruntime has none.

Usage: half_sweep.py WORK [timm:NAME | tv:NAME ...]   (env: PPCC, PPRT)"""
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = ["timm:resnet18", "timm:efficientnet_b0", "timm:mobilenetv3_small_100", "timm:convnext_atto",
           "timm:deit_tiny_patch16_224", "timm:swin_tiny_patch4_window7_224", "timm:coatnet_0_rw_224",
           "timm:poolformer_s12", "timm:edgenext_xx_small", "timm:regnetz_b16", "timm:levit_128",
           "timm:mobilevit_xs", "timm:ghostnet_100", "timm:dla34", "timm:xcit_nano_12_p16_224",
           "timm:cait_xxs24_224", "timm:resnet50_gn", "tv:densenet121", "tv:shufflenet_v2_x0_5"]


def build(spec):
    src, name = spec.split(":", 1)
    if src == "timm":
        import timm
        m = timm.create_model(name, pretrained=False, num_classes=10)
        cfg = m.default_cfg
        size = cfg.get("input_size", (3, 224, 224))[1]
        return m.eval(), size if cfg.get("fixed_input_size", False) else min(size, 64)
    import torchvision.models as tm
    return getattr(tm, name)().eval(), 64


def main():
    work, specs = sys.argv[1], sys.argv[2:] or DEFAULT
    bad = 0
    for spec in specs:
        d = os.path.join(work, spec.replace(":", "_"))
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        model, size = build(spec)
        x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
        path = os.path.join(d, "m.onnx")
        torch.onnx.export(model, x[:1], path, opset_version=17, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
        np.save(os.path.join(d, "data", "x.npy"), x.numpy())
        subprocess.run([sys.executable, os.path.join(HERE, "..", "cuda", "half_models.py"), "ort", path,
                        os.path.join(d, "data"), os.path.join(d, "ort")], check=True)
        for pr in ("fp16", "bf16"):
            plan = os.path.join(d, pr + ".plan")
            ir = subprocess.run([PPCC, path, "-b", "1", "--precision", pr, "--dump-ir", "-q", "-o", plan],
                                capture_output=True, text=True)
            casts = sum(" Cast " in ln and " <- " in ln for ln in ir.stdout.splitlines())
            r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "--backend", "cuda-emu", "-q", "-o",
                                os.path.join(d, "out_" + pr), "--cuda-explain"], capture_output=True, text=True)
            host = re.findall(r"(\d+) host steps", r.stderr)
            if ir.returncode or r.returncode:
                print(f"{spec} {pr}: FAIL: {(ir.stderr + r.stderr).strip()[-300:]}", flush=True)
                bad += 1
                continue
            g = np.load(os.path.join(d, "out_" + pr, "y.npy")).astype(np.float64)
            w = np.load(os.path.join(d, "ort", "y.npy")).astype(np.float64)
            nan = bool(np.isnan(g).any() and not np.isnan(w).any())
            err = float(np.nanmax(np.abs(g - w)) / np.nanmax(np.abs(w)))
            bad += nan
            print(f"{spec} {pr}: {casts} Casts, {host[-1] if host else '?'} host steps, error {err:.1e}"
                  f"{' NaN' if nan else ''}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
