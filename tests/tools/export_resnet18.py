#!/usr/bin/env python3
"""torchvision's ResNet-18 (seed 0, random weights, 10 classes) exported for
training (opset 14, BatchNorm in training mode, the batch dim dynamic) and
random data for it: the tests and benchmarks that train it on ranks and
devices share this (tests/mpi/train_cuda.sh, tests/cuda/train_dopt.sh,
bench/train_mpi.sh).

usage: export_resnet18.py ONNX --batch B --size S --samples N --data DIR --labels FILE
(DIR/input.npy: N images of S x S, standard normal; FILE: N labels 0-9; seed 1)"""
import argparse
import inspect
import os

import numpy as np
import torch
import torchvision

ap = argparse.ArgumentParser()
ap.add_argument("onnx")
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--size", type=int, required=True)
ap.add_argument("--samples", type=int, required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--labels", required=True)
a = ap.parse_args()
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10).train()
kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
torch.onnx.export(net, (torch.randn(a.batch, 3, a.size, a.size),), a.onnx, input_names=["input"],
                  output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, dynamic_axes={"input": {0: "b"}, "logits": {0: "b"}}, **kw)
os.makedirs(a.data, exist_ok=True)
rng = np.random.default_rng(1)
np.save(os.path.join(a.data, "input.npy"), rng.standard_normal((a.samples, 3, a.size, a.size)).astype(np.float32))
np.save(a.labels, rng.integers(0, 10, a.samples).astype(np.int64))
