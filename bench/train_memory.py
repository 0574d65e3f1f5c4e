#!/usr/bin/env python3
"""Training memory: ppcc's estimate against what a pprt training run holds.

For each model (torchvision, random weights, 10 classes, 64x64 images),
exported for training (TrainingMode.TRAINING, no constant folding, opset
14): ppcc --train --loss cross-entropy:logits -b ROWS -pp P
--micro-batches M --report gives each device's estimated memory under 1F1B
and GPipe (report/report.c: 3 to 5 x its weights, as the optimizer keeps
0 to 2 buffers, its arenas, the messages its
stages send, its stash x the micro-batches the schedule keeps). Then
pprt --steps S (3) --accumulate M --backend ref under each schedule, with
--log-json: measured
  - per device, the most micro-batches its stash held at once (the
    schedule's count: 1F1B min(P - d, M), GPipe M) and their bytes;
  - the whole run's memory: the process's peak resident set less that of a
    pprt that only loaded its libraries (pprt --version) and less the data
    it read (the inputs and labels), set against the sum of the devices'
    estimates: threads share one process, so a device's own peak is not
    separately measurable; the stash (what the schedule changes) is.
The reference backend: oneDNN adds the weights it reorders (pprt
--stats-json's weight_bytes), which ppcc does not estimate. --optim: ppcc
--train's optimizer options (the plan records them; pprt trains with them).
Usage: bench/train_memory.py [--models resnet18,mobilenet_v2,vit] [-pp 2] [--micro-batches 8] [--rows 4] [--steps 3]
[--optim '--optimizer adamw']"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--models", default="resnet18,mobilenet_v2,vit")
ap.add_argument("-pp", type=int, default=2)
ap.add_argument("--micro-batches", type=int, default=8)
ap.add_argument("--rows", type=int, default=4)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--optim", default="--optimizer adamw")
ap.add_argument("--zb-h1", action="store_true", help="compile with ppcc --schedule zb-h1 and run under zb-h1 and 1F1B")
ap.add_argument("--ppcc", default=os.path.join(benchlib.ROOT, "build", "ppcc"))
ap.add_argument("--pprt", default=os.path.join(benchlib.ROOT, "build", "pprt"))
a = ap.parse_args()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402


class ViT(torch.nn.Module):
    """A small ViT (patches of 8, 4 layers of width 128, 4 heads) written with nn.TransformerEncoder."""

    def __init__(self):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 128, 8, 8)
        self.pos = torch.nn.Parameter(torch.randn(1, 64, 128) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True, norm_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 4)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.enc(t).mean(1))


def model_of(name):
    if name == "vit":
        return ViT()
    if name == "mobilenet_v2":  # its classifier's Dropout off: ppcc trains Dropout at ratio 0 only, for now
        return torchvision.models.mobilenet_v2(num_classes=10, dropout=0.0)
    return getattr(torchvision.models, name)(num_classes=10)


def report_rows(text):
    rows = {}
    lines = text.split("msgs_GPipe")[1].splitlines()[1:1 + a.pp]
    for ln in lines:
        c = ln.split()
        rows[int(c[0])] = {"stash": float(c[4]), "1f1b": float(c[6]), "gpipe": float(c[7])}
    return rows


def peak_rss_libs():
    out = subprocess.run(["/usr/bin/time", "-f", "%M", a.pprt, "--version"], capture_output=True, text=True)
    return int(out.stderr.strip().splitlines()[-1]) * 1024


print(f"# {benchlib.cpu_name()}; -pp {a.pp}, {a.micro_batches} micro-batches of {a.rows} rows, 64x64, ref backend, "
      f"{a.steps} steps, {a.optim}")
print("| model | schedule | estimate, MB (per device) | measured run, MB | estimate / measured | stash peaks (measured; "
      "the schedule's) |")
print("|---|---|---|---|---|---|")
libs = peak_rss_libs()
torch.manual_seed(0)
for name in a.models.split(","):
    with tempfile.TemporaryDirectory() as work:
        net = model_of(name)
        onnx_path = os.path.join(work, "m.onnx")
        torch.onnx.export(net, (torch.zeros(a.rows, 3, 64, 64),), onnx_path, input_names=["input"],
                          output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        plan = os.path.join(work, "t.plan")
        r = benchlib.sh([a.ppcc, onnx_path, "--train", "--loss", "cross-entropy:logits", "-b", str(a.rows), "-pp",
                         str(a.pp), "--micro-batches", str(a.micro_batches), "-o", plan, "--report", *shlex.split(a.optim),
                         *(["--schedule", "zb-h1"] if a.zb_h1 else [])])
        est = report_rows(r.stdout)
        data = os.path.join(work, "data")
        os.makedirs(data)
        n = a.rows * a.micro_batches * 2
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, 3, 64, 64)).astype(np.float32)
        y = rng.integers(0, 10, n).astype(np.int64)
        np.save(os.path.join(data, "input.npy"), x)
        np.save(os.path.join(data, "labels.npy"), y)
        for sched in ("zb-h1", "1f1b") if a.zb_h1 else ("1f1b", "gpipe"):
            log = os.path.join(work, f"{sched}.json")
            benchlib.sh([a.pprt, plan, data, "--steps", str(a.steps), "--accumulate", str(a.micro_batches), "--schedule", sched,
                         "--backend", "ref", "--log-json", log, "-q"])
            with open(log) as f:
                lg = json.load(f)
            measured = (lg["peak_rss"] - libs - x.nbytes - y.nbytes) / 1e6
            col = "gpipe" if sched == "gpipe" else "1f1b"  # zb-h1 keeps 1F1B's cap
            total = sum(e[col] for e in est.values())
            peaks = [d["stash_peak"] for d in lg["stash"]]
            want = [min(a.pp - d, a.micro_batches) if sched != "gpipe" else a.micro_batches for d in range(a.pp)]
            per = " + ".join(f"{est[d][col]:.1f}" for d in range(a.pp))
            if a.zb_h1:  # what B kept for W: the most entries at once, and an entry's MB
                peaks = [(d["stash_peak"], d["w_keep_peak"], round(d["w_keep_bytes"] / 1e6, 1)) for d in lg["stash"]]
            print(f"| {name} | {sched} | {total:.1f} ({per}) | {measured:.1f} | {total / measured:.3f} | "
                  f"{peaks}; {want} |", flush=True)
