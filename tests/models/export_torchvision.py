#!/usr/bin/python3
"""export_torchvision.py - export a randomly initialised torchvision model to
ONNX together with a test input and the PyTorch reference output.

Usage:
  export_torchvision.py --model resnet50 --out DIR [--batch 2] [--seed 0]
                        [--image-size 224] [--opset 13] [--keep-bn]
Writes DIR/model.onnx (input "input", output "output", dynamic axis "batch"),
DIR/data/input.npy and DIR/expected/output.npy (both float32).
No weights are downloaded: default init, but every BatchNorm2d gets random
running stats / affine params from a seeded generator so that BN handling
errors change the result. By default the exporter folds BN into Conv
(eval mode + constant folding); --keep-bn keeps BatchNormalization nodes.
"""
import argparse
import collections
import os
import sys
import time
import warnings

import numpy as np
import torch
import torchvision


def randomize_batchnorm(model, seed):
    # Ranges chosen so a random resnet50 gives outputs of order 1..10
    # (gamma in [0.5,1.5) blows up to ~1e3, gamma <= 1.0 decays to ~0.3).
    g = torch.Generator().manual_seed(seed + 2)
    n = 0
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=g) * 1.0 + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(c, generator=g) * 0.7 + 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(c, generator=g) * 0.1)
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True,
                    help="torchvision.models constructor name, e.g. resnet50")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--keep-bn", action="store_true",
                    help="export BatchNormalization nodes instead of "
                         "letting the exporter fold them into Conv")
    args = ap.parse_args()

    t0 = time.time()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    ctor = getattr(torchvision.models, args.model, None)
    if ctor is None or not callable(ctor):
        print(f"error: torchvision.models has no model '{args.model}'",
              file=sys.stderr)
        return 2
    model = ctor(weights=None)
    nbn = randomize_batchnorm(model, args.seed)
    model.eval()

    gen = torch.Generator().manual_seed(args.seed + 1)
    hw = args.image_size
    x = torch.randn(args.batch, 3, hw, hw, generator=gen)
    with torch.no_grad():
        y = model(x)
    if isinstance(y, (tuple, list)):
        y = y[0]
    if isinstance(y, dict):
        y = next(iter(y.values()))

    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "expected"), exist_ok=True)
    model_path = os.path.join(args.out, "model.onnx")
    mode = (torch.onnx.TrainingMode.PRESERVE if args.keep_bn
            else torch.onnx.TrainingMode.EVAL)
    with warnings.catch_warnings():
        # PRESERVE + constant folding warns about training mode; the model
        # is in eval mode, so the warning does not apply.
        warnings.filterwarnings("ignore", message=".*constant folding.*")
        torch.onnx.export(
            model, x, model_path, opset_version=args.opset,
            input_names=["input"], output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            do_constant_folding=True, training=mode)
    xin = x.numpy().astype(np.float32)
    yout = y.numpy().astype(np.float32)
    np.save(os.path.join(args.out, "data", "input.npy"), xin)
    np.save(os.path.join(args.out, "expected", "output.npy"), yout)
    print(f"{args.model}: randomized {nbn} BatchNorm2d layers; "
          f"input {list(xin.shape)} -> output {list(yout.shape)} "
          f"(mean {yout.mean():.4g}, std {yout.std():.4g})")
    print(f"wrote {model_path} ({os.path.getsize(model_path)} bytes)")

    try:
        import onnx
        m = onnx.load(model_path)
        counts = collections.Counter(n.op_type for n in m.graph.node)
        print(f"ONNX op types ({sum(counts.values())} nodes):")
        for op, c in sorted(counts.items()):
            print(f"  {op}: {c}")
    except ImportError:
        print("onnx not importable; skipping op-type listing")
    print(f"done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
