#!/usr/bin/python3
"""make_digits.py - build the 'digits' sample for ppcc/pprt.

Trains a small residual CNN on scikit-learn's bundled 8x8 handwritten digits,
exports it to ONNX (opset 13, dynamic batch) and writes, next to this script:
  model.onnx, data/input.npy, labels.npy, expected/logits.npy, accuracy.txt
The exported graph uses only Conv, BatchNormalization, Relu, MaxPool, Add,
GlobalAveragePool, Flatten and Gemm (plus possibly Identity).
Deterministic: fixed seeds, single thread, fixed stratified split.
"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOWED_OPS = {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add",
               "GlobalAveragePool", "Flatten", "Gemm", "Identity"}


class ConvBN(nn.Module):
    def __init__(self, cin, cout, relu=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU() if relu else None

    def forward(self, x):
        x = self.bn(self.conv(x))
        return self.relu(x) if self.relu is not None else x


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = ConvBN(1, 16)
        self.conv2 = ConvBN(16, 32)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.conv2(self.conv1(x)))


class ResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = ConvBN(ch, ch)
        self.conv2 = ConvBN(ch, ch, relu=False)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv2(self.conv1(x)) + x)


class Head(nn.Module):
    def __init__(self, ch, ncls):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(ch, ncls)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(x), 1))


class DigitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = Stem()
        self.block = ResBlock(32)
        self.head = Head(32, 10)

    def forward(self, x):
        return self.head(self.block(self.stem(x)))


def main():
    t0 = time.time()
    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(1)

    ds = load_digits()
    x = (ds.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = ds.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=0.2, random_state=0, stratify=y)
    x_tr = np.ascontiguousarray(x_tr, dtype=np.float32)
    x_te = np.ascontiguousarray(x_te, dtype=np.float32)
    y_tr = np.ascontiguousarray(y_tr, dtype=np.int64)
    y_te = np.ascontiguousarray(y_te, dtype=np.int64)

    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(0)
    epochs, bs = 12, 32
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        print(f"epoch {ep + 1}/{epochs} train_loss={total / len(xt):.4f}")

    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x_te)).numpy().astype(np.float32)
    acc = float((logits.argmax(axis=1) == y_te).mean())

    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "expected"), exist_ok=True)
    model_path = os.path.join(HERE, "model.onnx")
    torch.onnx.export(
        model, torch.from_numpy(x_te[:1]), model_path,
        opset_version=13, input_names=["input"], output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        do_constant_folding=True)
    np.save(os.path.join(HERE, "data", "input.npy"), x_te)
    np.save(os.path.join(HERE, "labels.npy"), y_te)
    np.save(os.path.join(HERE, "expected", "logits.npy"), logits)
    with open(os.path.join(HERE, "accuracy.txt"), "w") as f:
        f.write(f"{acc:.6f}\n")
    print(f"test accuracy: {acc:.6f} ({len(y_te)} test images)")

    # Optional checks with onnx / onnxruntime.
    ok = True
    try:
        import onnx
        m = onnx.load(model_path)
        ops = sorted({n.op_type for n in m.graph.node})
        print("ONNX op types:", ", ".join(ops))
        bad = set(ops) - ALLOWED_OPS
        if bad:
            print("ERROR: unexpected op types:", ", ".join(sorted(bad)))
            ok = False
    except ImportError:
        print("onnx not importable; skipping op-type listing")
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(model_path,
                                    providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input": x_te})[0]
        err = float(np.max(np.abs(got - logits)))
        print(f"onnxruntime max_abs_err vs PyTorch: {err:.3g}")
        if err > 1e-4:
            print("ERROR: onnxruntime logits differ by more than 1e-4")
            ok = False
    except ImportError:
        print("onnxruntime not importable; skipping ONNX Runtime check")
    print(f"done in {time.time() - t0:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
