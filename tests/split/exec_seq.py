#!/usr/bin/env python3
"""exec_seq names that match no module (about 3 s).

The ColossalAI exec_seq for torchvision's ResNet-50 names `bn1`, but a
default (inference-mode) PyTorch export folds every BatchNorm into the Conv
before it and leaves nothing named bn1: no node, no initializer. ppcc then
warns that the module left no op and splits anyway; a name that matches
nothing plausible stays an error (the rule: docs/partitioning.md). Checked
on a model built with the onnx helpers the way torch 1.13 names a default
export (folded weights as `onnx::Conv_N`, nodes as `/module/Op`), and on a
real torch export of a small Conv-BN-ReLU network when torch is there.

Usage: exec_seq.py WORKDIR (env: PPCC)."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PPCC = os.environ["PPCC"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
rng = np.random.default_rng(0)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def w(*s):
    return numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2)


def init(name, *s):
    t = w(*s)
    t.name = name
    return t


def resnet_like(path):
    """conv1 (BN folded) relu maxpool layer1 layer2 skip avgpool Flatten fc,
    as a default torch export names them: the folded Conv weights are
    onnx::Conv_N, nothing is named bn1; `skip` is an Identity module, which
    ppcc's simplify pass removes."""
    n = helper.make_node
    inits = [init("onnx::Conv_10", 8, 3, 3, 3), init("onnx::Conv_11", 8),
             init("onnx::Conv_12", 8, 8, 3, 3), init("onnx::Conv_13", 8),
             init("onnx::Conv_14", 8, 8, 3, 3), init("onnx::Conv_15", 8),
             init("fc.weight", 5, 8), init("fc.bias", 5)]
    nodes = [
        n("Conv", ["x", "onnx::Conv_10", "onnx::Conv_11"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="/relu/Relu"),
        n("MaxPool", ["r1"], ["m"], name="/maxpool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["m", "onnx::Conv_12", "onnx::Conv_13"], ["c2"], name="/layer1/layer1.0/conv1/Conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="/layer1/layer1.0/relu/Relu"),
        n("Conv", ["r2", "onnx::Conv_14", "onnx::Conv_15"], ["c3"], name="/layer2/layer2.0/conv1/Conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c3"], ["r3"], name="/layer2/layer2.0/relu/Relu"),
        n("Identity", ["r3"], ["i"], name="/skip/Identity"),
        n("GlobalAveragePool", ["i"], ["p"], name="/avgpool/GlobalAveragePool"),
        n("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
        n("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1),
    ]
    g = helper.make_graph(nodes, "resnet_like",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def ppcc(model, seq, *extra):
    with open("seq.txt", "w") as f:
        f.write("\n".join(seq) + "\n")
    r = subprocess.run([PPCC, model, "--exec-seq", "seq.txt", "-o", "seq.plan", "--report-json", "seq.json", *extra],
                       capture_output=True, text=True, timeout=60)
    stages = json.load(open("seq.json"))["stages"] if r.returncode == 0 else []
    if os.path.exists("seq.json"):
        os.remove("seq.json")
    return r, stages


def first_nodes(stages):
    return [s["first_node"] for s in stages]


resnet_like("rl.onnx")

# the seed notes' list: bn1 folded by the exporter -> a warning, the split goes on
r, st = ppcc("rl.onnx", ["conv1", "bn1", "relu", "maxpool", "layer1", "SPLIT_NODE", "layer2", "avgpool", "fc"])
check(r.returncode == 0, f"folded bn1: exit {r.returncode}: {r.stderr.strip()}")
want = ("ppcc: warning: seq.txt:2: module 'bn1' left no op in the graph: the exporter folded it into the Conv "
        "of 'conv1' before it (an inference-mode export folds a BatchNorm into the Conv it follows); the split "
        "goes on without it")
check(want in r.stderr, f"folded bn1: the warning is not {want!r}: {r.stderr.strip()!r}")
check(first_nodes(st) == ["/conv1/Conv", "/layer2/layer2.0/conv1/Conv"], f"folded bn1: stages {first_nodes(st)}")

# SPLIT_NODE before a module that left no op cuts before the next listed module with ops
r, st = ppcc("rl.onnx", ["conv1", "relu", "maxpool", "SPLIT_NODE", "bn2", "layer1", "layer2", "avgpool", "fc"])
check(r.returncode != 0 and "nothing shows that such a module existed" in r.stderr,
      f"bn2 after maxpool (no Conv before it) must be an error: exit {r.returncode}: {r.stderr.strip()}")
r, st = ppcc("rl.onnx", ["conv1", "relu", "maxpool", "layer1", "SPLIT_NODE", "dropout", "layer2", "avgpool", "fc"])
check(r.returncode == 0 and "module 'dropout' left no op in the graph: a Dropout or Identity exports to nothing"
      in r.stderr, f"dropout: exit {r.returncode}: {r.stderr.strip()}")
check(first_nodes(st) == ["/conv1/Conv", "/layer2/layer2.0/conv1/Conv"], f"dropout: stages {first_nodes(st)}")

# a module the model names whose op ppcc's simplify pass removed (the Identity of `skip`)
r, st = ppcc("rl.onnx", ["conv1", "relu", "maxpool", "layer1", "layer2", "skip", "avgpool", "fc"])
check(r.returncode == 0 and "module 'skip' left no op in the graph: the model names it" in r.stderr,
      f"skip: exit {r.returncode}: {r.stderr.strip()}")

# the same list in the layouts a user pastes: a name a line (plain or quoted, comments after), black's one line, a
# ColossalAI lambda tuple among the entries, one line past 1024 characters (fgets cut it before), and each
# listed entry on the line counts (only a line's first did before: a one-line list made one stage)
layouts = {
    "lines": ["conv1", "relu", "maxpool", "layer1 # the first layer", "SPLIT_NODE  # cut", "layer2", "avgpool", "fc"],
    "python": ["exec_seq = [", '    "conv1", "relu",', '    "maxpool",', '    "layer1",', '    "SPLIT_NODE",# cut',
               '    "layer2",', '    (lambda x: torch.flatten(x, 1), "behind"),', '    "avgpool", "fc",', "]"],
    "one_line": ['exec_seq = ["conv1", "relu", "maxpool", "layer1", "SPLIT_NODE", "layer2", "avgpool", "fc"]'],
    "lambda_one_line": ["exec_seq=['conv1','relu','maxpool','layer1',SPLIT_NODE,'layer2',(lambda x: x.mean((2, 3)), "
                        "'pool, then flatten'),'avgpool','fc']"],
    "long_line": ['exec_seq = ["conv1", "relu", "maxpool", "layer1",' + " " * 3000 + '"SPLIT_NODE", "layer2", '
                  '"avgpool", "fc"]'],
}
for name, seq in layouts.items():
    r, st = ppcc("rl.onnx", seq)
    check(r.returncode == 0 and first_nodes(st) == ["/conv1/Conv", "/layer2/layer2.0/conv1/Conv"],
          f"exec_seq laid out as {name}: exit {r.returncode}, stages {first_nodes(st)}: {r.stderr.strip()[:300]}")

# names that match nothing plausible stay errors, naming the closest modules
cases = [
    (["conv1", "relu", "maxpool", "layr1", "layer2", "avgpool", "fc"], "seq.txt:4: no module 'layr1' in the model; "
     "closest: layer1", "the graph has op '/layer1/layer1.0/conv1/Conv' between 'maxpool' and 'layer2'"),
    (["conv1", "xyz", "relu", "maxpool", "layer1", "layer2", "avgpool", "fc"], "no module 'xyz'",
     "nothing shows that such a module existed"),
    (["conv1", "relu", "maxpool", "layer1", "layer9.bn1", "layer2", "avgpool", "fc"], "no module 'layer9.bn1'",
     "its parent module 'layer9' is not in the model either"),
]
for seq, want1, want2 in cases:
    r, _ = ppcc("rl.onnx", seq)
    check(r.returncode == 2 and want1 in r.stderr and want2 in r.stderr,
          f"{seq}: exit {r.returncode} (want 2), stderr {r.stderr.strip()!r} (want {want1!r} and {want2!r})")

# module paths as PyTorch names them (named_modules()): a nested Sequential's child is
# stages.1.blocks.0, not stages.1.blocks.blocks.0 (that old form is accepted with a warning), and a module
# called twice (the exporter's "act", "act_1") is one module, act
def nested(path):
    n = helper.make_node
    inits = [init("stages.1.blocks.0.conv.weight", 4, 4, 3, 3), init("stages.1.blocks.1.conv.weight", 4, 4, 3, 3)]
    nodes = [n("Conv", ["x", "stages.1.blocks.0.conv.weight"], ["c0"], name="/stages/stages.1/blocks/blocks.0/conv/Conv",
               pads=[1, 1, 1, 1]),
             n("Relu", ["c0"], ["r0"], name="/act/Relu"),
             n("Conv", ["r0", "stages.1.blocks.1.conv.weight"], ["c1"], name="/stages/stages.1/blocks/blocks.1/conv/Conv",
               pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["y"], name="/act_1/Relu")]
    g = helper.make_graph(nodes, "nested", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8, 8])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


nested("nested.onnx")
r = subprocess.run([PPCC, "nested.onnx", "--modules"], capture_output=True, text=True, timeout=60)
mods = {l.split("\t")[0]: int(l.split("\t")[1]) for l in r.stdout.splitlines() if l}
want = {"stages": 2, "stages.1": 2, "stages.1.blocks": 2, "stages.1.blocks.0": 1, "stages.1.blocks.0.conv": 1,
        "stages.1.blocks.1": 1, "stages.1.blocks.1.conv": 1, "act": 2}
check(r.returncode == 0 and mods == want, f"nested --modules: exit {r.returncode}, {mods}, want {want}")
firsts = []
for at in ("stages.1.blocks.1", "stages.1.blocks.blocks.1"):
    r = subprocess.run([PPCC, "nested.onnx", "--split-at", at, "-o", "n.plan", "--report-json", "n.json"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"--split-at {at}: exit {r.returncode}: {r.stderr.strip()}")
    firsts.append(first_nodes(json.load(open("n.json"))["stages"]) if r.returncode == 0 else None)
    old = "blocks.blocks" in at
    check(old == ("the name earlier ppcc versions gave module 'stages.1.blocks.1'" in r.stderr),
          f"--split-at {at}: the old name's warning {'missing' if old else 'given'}: {r.stderr.strip()!r}")
check(firsts[0] == firsts[1] == ["/stages/stages.1/blocks/blocks.0/conv/Conv",
                                 "/stages/stages.1/blocks/blocks.1/conv/Conv"], f"nested cuts: {firsts}")
r = subprocess.run([PPCC, "nested.onnx", "--split-at", "act_1", "-o", "n.plan"], capture_output=True, text=True,
                   timeout=60)
# (act's first op is fused into the first Conv: the stage before it would be empty)
check(r.returncode == 2 and "gave module 'act'" in r.stderr and "would be empty" in r.stderr,
      f"--split-at act_1: exit {r.returncode}: {r.stderr}")

# a real default export (torch 1.13: eval mode, constant folding) of conv1-bn1-relu
try:
    import torch
    import torch.nn as nn
except ImportError:
    torch = None
if torch is None:
    print("exec_seq: torch is not installed: the real export is skipped")
else:
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            x = self.layer1(self.relu(self.bn1(self.conv1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    torch.manual_seed(0)
    net = Net().eval()
    torch.onnx.export(net, torch.randn(1, 3, 16, 16), "torch.onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    mp = onnx.load("torch.onnx")
    names = [n.name for n in mp.graph.node] + [i.name for i in mp.graph.initializer]
    check(not any("bn1" in s for s in names), f"the export kept something named bn1: {names}")
    r, st = ppcc("torch.onnx", ["conv1", "bn1", "relu", "SPLIT_NODE", "layer1", "avgpool", "fc"])
    check(r.returncode == 0 and "module 'bn1' left no op in the graph: the exporter folded it into the Conv of "
          "'conv1'" in r.stderr, f"torch export: exit {r.returncode}: {r.stderr.strip()}")
    check(len(st) == 2 and st[1]["first_node"].startswith("/layer1/"), f"torch export: stages {first_nodes(st)}")

for f in failures:
    print("FAIL:", f)
print(f"exec_seq: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
