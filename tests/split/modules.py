#!/usr/bin/env python3
"""Module paths as PyTorch names them, on every model of the zoo (issue 51).

For each model tests/models/zoo.py exports (the CI zoo's CNNs and
transformers; model_zoo exports them first, and this test exports those
missing when it runs alone), rebuilt in PyTorch:
1. Which modules own an op after export, found without ppcc's rule: each
   node name's scopes ("/stages/stages.1/blocks/blocks.0/conv_dw/Conv") are
   walked down the real module tree, a component matching the module below
   the current one whose name ends with it as the exporter writes names
   (the last attribute name and the indices after it: "blocks.0" for
   stages.1.blocks.0; "relu_1" for relu called a second time). Every
   module on the way owns the op.
2. `ppcc --modules` must list exactly those modules, with ops, by the names
   of PyTorch's named_modules() (no doubled "stages.1.blocks.blocks.0", no
   module ppcc invents), and each with as many ops as the walk counted.
3. `ppcc --split-at M` compiles for every such module (a sample of SPLITS
   modules spread through the graph, the deepest of each stretch, on models
   with more; all of them with PP_MODULES_ALL=1), but where it cannot cut:
   a module that starts at the first op, or whose ops ppcc fused into the
   first op's chain, is refused for leaving the first stage empty; one whose
   ops ppcc folded away or fused into another module's, for leaving no op
   to cut before.
4. For RUNS of them (the deepest in each part of the graph) the plan runs
   at --threads 1 and gives the same bits as the -pp 1 plan (a cut never
   changes which kernels run).
5. On ResNet-50 and DistilBERT (--dim seq): the options `pprt --info`
   prints recompile the model to a byte-identical plan (issue 52).

Usage: modules.py WORKDIR ZOO_DIR [--models a,b] (env: PPCC, PPRT). About
2-4 minutes on 2 cores once the zoo is exported (the transformers' compiles
are most of it)."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
SPLITS = 1 << 30 if os.environ.get("PP_MODULES_ALL") else 40
RUNS = 3
work, zoo_dir = sys.argv[1], sys.argv[2]
only = sys.argv[sys.argv.index("--models") + 1].split(",") if "--models" in sys.argv else None
os.makedirs(work, exist_ok=True)
try:
    import torch  # noqa: F401
    import onnx
    import zoo
except ImportError as e:
    print(f"modules: {e}; skipped")
    sys.exit(77)

failures = []


def unqualified(path):
    """The exporter's scope component for module `path`: its last attribute
    name and the Sequential / ModuleList indices after it."""
    atoms = path.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isdigit():
            return ".".join(atoms[i:])
    return path


def owners(model_path, names):
    """{module path: ops} from the ONNX node names walked down the module tree
    `names` (named_modules()), and the components that matched no module."""
    by_comp = {}
    for p in names:
        by_comp.setdefault(unqualified(p), []).append(p)
    own, unknown = {}, set()
    m = onnx.load(model_path, load_external_data=False)
    for node in m.graph.node:
        if not node.name.startswith("/") or node.op_type == "Constant":
            continue
        comps = node.name.split("/")[1:-1]
        cur, chain = "", []
        for c in comps:
            cands = [p for p in by_comp.get(c, ()) if not cur or p.startswith(cur + ".")]
            rep = re.fullmatch(r"(.+)_\d+", c)
            if not cands and rep:  # a module called again: the exporter's "relu_1", "relu_2" for relu
                cands = [p for p in by_comp.get(rep.group(1), ()) if not cur or p.startswith(cur + ".")]
            if not cands:
                unknown.add(f"{node.name} ({c!r} under {cur or 'the model'!r})")
                chain = []
                break
            cur = min(cands, key=len)
            chain.append(cur)
        for p in chain:
            own[p] = own.get(p, 0) + 1
    return own, unknown


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def spread(mods, k):
    """k modules spread through the graph: the list (in graph order) cut into
    k stretches, from each the deepest (most nested) module."""
    if len(mods) <= k:
        return list(mods)
    out = []
    for j in range(k):
        part = mods[j * len(mods) // k:(j + 1) * len(mods) // k]
        out.append(max(part, key=lambda p: (p.count("."), -part.index(p))))
    return out


def check(name):
    d = os.path.join(zoo_dir, name)
    path = os.path.join(d, "model.onnx")
    meta = json.load(open(os.path.join(d, "meta.json")))
    args = meta.get("compile_args") or ["-b", "1"]
    torch.manual_seed(0)
    names = [n for n, _ in zoo.REGISTRY[name].build().named_modules() if n]
    own, unknown = owners(path, names)
    for u in sorted(unknown)[:5]:
        failures.append(f"{name}: node scope matches no module of named_modules(): {u}")
    r = run([PPCC, path, *args, "--modules"])
    if r.returncode:
        failures.append(f"{name}: ppcc --modules: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        return
    listed = [line.split("\t") for line in r.stdout.splitlines() if line]
    ppcc_ops = {p: int(n) for p, n, _ in listed if int(n) > 0}
    order = [p for p, n, _ in listed if int(n) > 0]
    first_op = {p: f for p, n, f in listed}
    known = set(names)
    invented = sorted(set(ppcc_ops) - known)
    missing = sorted(set(own) - set(ppcc_ops))
    if invented:
        failures.append(f"{name}: ppcc names {len(invented)} module(s) named_modules() does not have, e.g. "
                        f"{invented[:3]}")
    if missing:
        failures.append(f"{name}: {len(missing)} module(s) owning ops that ppcc does not list, e.g. {missing[:3]}")
    wrong = [(p, ppcc_ops[p], own[p]) for p in own if p in ppcc_ops and ppcc_ops[p] != own[p]]
    if wrong:
        failures.append(f"{name}: op counts differ from the walk's (module, ppcc, walk): {wrong[:3]}")
    # children of a container below the top level ("stages.1.blocks.0"): the names ppcc once doubled
    nested = sum(1 for p in own if "." in unqualified(p) and unqualified(p) != p)
    # 3: --split-at compiles at each (a sample); the first op's module is refused
    # (refused, rightly: a module whose ops start the graph, or that ppcc's passes fused into the first op's
    # chain, leaves the first stage empty; one whose ops were all folded into constants, such as a rotary
    # embedding's tables, or fused into another module's, leaves no op to cut before)
    first_node = listed[0][2] if listed else None
    tried, refused, can = 0, 0, []
    for p in spread(order, SPLITS):
        r = run([PPCC, path, *args, "--split-at", p, "-q", "-o", os.devnull])
        tried += 1
        if r.returncode == 2 and ("would be empty" in r.stderr or "left no op to cut before" in r.stderr):
            refused += 1
            if first_op[p] != first_node and "would be empty" in r.stderr and p.split(".")[0] != order[0]:
                failures.append(f"{name}: --split-at {p}: refused as starting the graph: {r.stderr.strip()[-200:]}")
        elif first_op[p] == first_node:
            failures.append(f"{name}: --split-at {p} (starts at the first op): exit {r.returncode}, want 2")
        elif r.returncode:
            failures.append(f"{name}: --split-at {p}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        else:
            can.append(p)
    # 4: RUNS of them run, bit-identical to -pp 1
    data = os.path.join(d, "data")
    outs = {}
    for tag, extra in [("pp1", [])] + [(f"at_{p}", ["--split-at", p])
                                       for p in spread(can, RUNS)]:
        plan, out = os.path.join(work, f"{name}.plan"), os.path.join(work, f"{name}_{tag}")
        r = run([PPCC, path, *args, *extra, "-q", "-o", plan])
        if r.returncode == 0:
            r = run([PPRT, plan, data, "-o", out, "-q", "--threads", "1"])
        if r.returncode:
            failures.append(f"{name} {tag}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            continue
        outs[tag] = {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        shutil.rmtree(out, ignore_errors=True)
        os.remove(plan)
        if tag != "pp1" and "pp1" in outs:
            for f, a in outs[tag].items():
                if not np.array_equal(a, outs["pp1"][f], equal_nan=True):
                    failures.append(f"{name} --split-at {tag[3:]}: {f} not bit-identical to -pp 1")
    print(f"modules: {name}: {len(own)} modules own ops ({nested} indexed below the top level), ppcc lists "
          f"{len(ppcc_ops)}; --split-at tried at {tried} ({refused} refused as leaving no op or an empty stage), "
          f"ran at {len(outs) - 1}", flush=True)


def round_trip(name):
    """The options `pprt --info` prints recompile a zoo model to the same plan, byte for byte (issue 52)."""
    d = os.path.join(zoo_dir, name)
    path = os.path.join(d, "model.onnx")
    meta = json.load(open(os.path.join(d, "meta.json")))
    args = meta.get("compile_args") or ["-b", "1"]
    a, b = os.path.join(work, "rt_a.plan"), os.path.join(work, "rt_b.plan")
    for extra in (["-pp", "2"], ["-pp", "3", "--policy", "flops", "--depth", "3"]):
        r = run([PPCC, path, *args, *extra, "-q", "-o", a])
        info = run([PPRT, "--info", a]).stdout.splitlines() if r.returncode == 0 else []
        opts = info[0].split("options: ", 1)[1] if info and "options: " in info[0] else None
        if opts is None:
            failures.append(f"{name} {extra}: no plan or no options line: {r.stderr.strip()[-200:]}")
            continue
        r = run([PPCC, path, *shlex.split(opts), "-q", "-o", b])
        same = False
        if r.returncode == 0:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                same = fa.read() == fb.read()
        if not same:
            failures.append(f"{name} {extra}: pprt --info's options '{opts}' recompile to another plan "
                            f"(exit {r.returncode}: {r.stderr.strip()[-200:]})")
        print(f"modules: {name} {' '.join(extra)}: the options line '{opts}' recompiles to the same plan: {same}")
    for f in (a, b):
        if os.path.exists(f):
            os.remove(f)


NAMED = {"efficientnet_b0": ["features.3.0.block.1"]}
models = only or [n for n, s in zoo.REGISTRY.items() if s.tag == "fast"]
done = 0
for n in models:
    if not os.path.exists(os.path.join(zoo_dir, n, "expected")):  # run alone: export it as model_zoo does
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "zoo.py"), "export", n,
                            os.path.join(zoo_dir, n), "--batch", "2"], capture_output=True, text=True)
        if r.returncode:
            failures.append(f"{n}: export failed: {r.stderr.strip()[-300:]}")
            continue
    check(n)
    for at in NAMED.get(n, ()):  # named in the issue: PyTorch's model.features[3][0].block[1]
        r = run([PPCC, os.path.join(zoo_dir, n, "model.onnx"), "--split-at", at, "--report-json",
                 os.path.join(work, "named.json"), "-q", "-o", os.devnull])
        first = json.load(open(os.path.join(work, "named.json")))["stages"][1]["first_node"] if r.returncode == 0 else ""
        if r.returncode or "/block/block.1/" not in first or "/features.3/features.3.0/" not in first:
            failures.append(f"{n}: --split-at {at}: exit {r.returncode}, stage 1 starts at {first!r}: "
                            f"{r.stderr.strip()[-200:]}")
        else:
            print(f"modules: {n}: --split-at {at} cuts before {first}")
    if n in ("resnet50", "distilbert"):
        round_trip(n)
    done += 1
for f in failures:
    print("FAIL:", f)
if done == 0:
    print("modules: no zoo model could be exported; nothing checked")
    sys.exit(1)
print(f"modules: {done} models, {len(failures)} failures")
sys.exit(1 if failures else 0)
