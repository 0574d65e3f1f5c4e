#!/usr/bin/env python3
"""The differential tester: random graphs (gen.py) compiled at random
pipeline depths and policies, run on pprt's oneDNN and reference backends
and on onnxruntime, compared.

For each case: a random model, micro-batch (-b 1..3), sample count (1..7,
so the last micro-batch is often padded), -pp 1..4 with a random policy (or
--split-at modules, or --disable-pass fuse), pprt's --depth and --threads.
Checked (the CUDA backend's step list through its emulator, cuda-emu, too):
  - ppcc compiles it (the graph is valid, its ops supported and its samples
    independent: a refusal is a finding) and nothing crashes or hangs;
  - pprt --backend dnnl, ref and cuda-emu, -pp N, each within rtol 1e-3 /
    atol 1e-4 of onnxruntime run on all samples at once (integers and bools
    exactly), and within the same tolerance of each other;
  - --backend ref at -pp N bit-identical to --backend ref at -pp 1.
A failing case is shrunk (outputs, nodes bypassed or cut into new graph
inputs, options simplified, while it still fails the same way) and saved as
a regression: tests/difftest/regressions/NAME/{model.onnx, data/, case.json}
(with --save; else under WORKDIR/found). Regressions are replayed first on
every run; a case.json with "status": "open" is a known, reported failure
(reported, not counted), "fixed" must pass.

Usage:
  run.py WORKDIR --ci                    replay, then cases 0-119 of seed 1 and 0-59 of seed 2 (fixed:
                                         CI gives the same verdict on the same tree, on any machine)
  run.py WORKDIR --minutes 30 --seed S [--save]
  run.py WORKDIR --seed S --case I [-v]  one case again (what a failure prints)
  run.py WORKDIR --replay                the regressions only
(env: PPCC, PPRT; exit 1 on a new failure or a "fixed" regression failing)."""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
REGRESSIONS = os.path.join(HERE, "regressions")
RTOL, ATOL = 1e-3, 1e-4
HAVE_DNNL = subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0
ORT_OPTS = ort.SessionOptions()
ORT_OPTS.log_severity_level = 4
stats = {"cases": 0, "compiles": 0, "runs": 0, "invalid": 0}
covered = {}  # feature -> cases that had it


def coverage(model, plan, dnnl_stats):
    """What the case exercised: tensors crossing cuts by kind, and what the
    oneDNN executor made of the nodes (from pprt --info and --stats-json)."""
    feats = set()
    r = sh([PPRT, "--info", plan])
    stages, sends = [], []
    for line in (r.stdout if r else "").splitlines():
        if line.startswith("stage "):
            stages.append([])
            sends.append([])
        elif line.startswith("  sends:"):
            sends[-1] = [t.split("[")[0] for t in line.split()[1:]]
        elif line.startswith("  ") and stages:
            stages[-1].append(line.split()[-1])
    stage_of = {nm: k for k, names in enumerate(stages) for nm in names}
    dtype, made_in, read_in = {}, {}, {}
    for vi in list(model.graph.input) + list(model.graph.output):
        dtype[vi.name] = vi.type.tensor_type.elem_type
    for nd in model.graph.node:
        for o in nd.output:
            made_in[o] = stage_of.get(nd.name)
        for i in nd.input:
            read_in.setdefault(i, set()).add(stage_of.get(nd.name))
    try:
        for vi in shape_inference.infer_shapes(model).graph.value_info:
            dtype[vi.name] = vi.type.tensor_type.elem_type
    except Exception:
        pass
    outs = {o.name for o in model.graph.output}
    for k, names in enumerate(sends):
        for t in names:
            feats.add("a tensor crosses a cut")
            if dtype.get(t) not in (None, onnx.TensorProto.FLOAT):
                feats.add(f"{onnx.TensorProto.DataType.Name(dtype[t]).lower()} tensors cross a cut")
            if t in outs and any(s is not None and s > k for s in read_in.get(t, ())):
                feats.add("a graph output is read by a later stage")
            if made_in.get(t) == k and k in read_in.get(t, ()):
                feats.add("a sent tensor is read in its own stage too")
            if k + 1 < len(sends) and t in sends[k + 1]:
                feats.add("a tensor passes through a stage (skip connection)")
    for st in dnnl_stats:
        for key, what in (("own_layout_tensors", "oneDNN keeps tensors in blocked layouts"), ("view_nodes", "views of bytes"),
                          ("fused_nodes", "post-ops fused"), ("reference_nodes", "reference nodes among oneDNN ones"),
                          ("outputs_in_place", "outputs written in place")):
            if st.get(key):
                feats.add(what)
    for f in feats:
        covered[f] = covered.get(f, 0) + 1


def sh(argv, timeout=120):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def crashed(r):
    return r.returncode < 0 or any(w in r.stderr for w in ("Sanitizer", "runtime error:", "Segmentation", "Aborted"))


def norm_msg(msg):
    """An error message without names and numbers: what kind of failure."""
    msg = msg.strip().splitlines()[-1] if msg.strip() else "?"
    msg = re.sub(r"'[^']*'", "'X'", msg)
    return re.sub(r"\d+", "N", msg)[:160]


def compare(got, want, exact):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"type/shape {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    if exact:
        return None if got.tobytes() == want.tobytes() else "bits differ"
    if got.dtype.kind != "f":
        return None if np.array_equal(got, want) else f"{int((got != want).sum())} of {got.size} values differ"
    ok = np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    if ok.all():
        return None
    i = np.unravel_index(int(np.argmin(ok)), ok.shape)
    return f"{int((~ok).sum())} of {ok.size} values outside, first at {list(i)}: {got[i]} vs {want[i]}"


def make_data(model, vocab, samples, rng):
    data = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [samples] + [d.dim_value for d in t.shape.dim[1:]]
        dt = helper.tensor_dtype_to_np_dtype(t.elem_type)
        if t.elem_type == onnx.TensorProto.BOOL:
            data[i.name] = rng.random(shape) < 0.5
        elif dt.kind in "iu":
            data[i.name] = rng.integers(0, max(vocab, 1), shape).astype(dt)
        else:
            data[i.name] = rng.standard_normal(shape).astype(dt)
    return data


def random_opts(rng, model):
    n = len(model.graph.node)
    o = {"b": int(rng.integers(1, 4)), "pp": int(rng.integers(1, min(4, max(n, 1)) + 1)),
         "policy": str(rng.choice(["auto", "auto", "uniform", "flops", "memory", "params"])),
         "depth": int(rng.integers(1, 4)), "threads": int(rng.choice([0, 1, 2])), "flags": []}
    data = {i.name for i in model.graph.input}  # modules of nodes that read data (others fold away)
    for nd in model.graph.node:
        if any(i in data for i in nd.input):
            data.update(nd.output)
    blocks = sorted({nd.name.split("/")[1] for nd in model.graph.node
                     if nd.name.count("/") >= 2 and any(i in data for i in nd.input)}, key=lambda b: int(b[3:]))
    if len(blocks) > 1 and rng.random() < 0.15:
        o["split_at"] = sorted(rng.choice(blocks[1:], size=int(rng.integers(1, min(3, len(blocks) - 1) + 1)),
                                          replace=False).tolist(), key=lambda b: int(b[3:]))
        o["pp"] = len(o["split_at"]) + 1
    if rng.random() < 0.2:
        o["flags"].append("--disable-pass=fuse")
    return o


def ppcc_argv(model, o, pp, plan):
    argv = [PPCC, model, "-b", str(o["b"]), "-q", "-o", plan]
    if o.get("split_at") and pp > 1:
        argv += ["--split-at", ",".join(o["split_at"])]
    else:
        argv += ["-pp", str(pp), "--policy", o["policy"] if pp > 1 else "auto"]
    for f in o["flags"]:
        argv += f.split("=")
    return argv


def run_case(model_path, data_dir, o, work):
    """Returns (kind, detail) of the first failure, or None."""
    model = onnx.load(model_path)
    feeds = {f[:-4]: np.load(os.path.join(data_dir, f)) for f in os.listdir(data_dir)}
    try:
        sess = ort.InferenceSession(model_path, ORT_OPTS, providers=["CPUExecutionProvider"])
        want = dict(zip([x.name for x in sess.get_outputs()], sess.run(None, feeds)))
    except Exception as e:  # not a valid model: a generator (or shrinker) slip, not a finding
        return ("invalid", str(e).splitlines()[0][:200])
    plans = {}
    for pp in sorted({1, o["pp"]}):
        plan = os.path.join(work, f"p{pp}.plan")
        stats["compiles"] += 1
        r = sh(ppcc_argv(model_path, o, pp, plan))
        if r is None:
            return ("ppcc hangs", f"-pp {pp}")
        if crashed(r):
            return ("ppcc crashes", r.stderr[-400:])
        if r.returncode:
            if any(w in r.stderr for w in ("more stages than", "--split-at: no module", "stage would be empty",
                                           "stage before it would be empty")):
                return ("skip", r.stderr.strip())
            return ("ppcc: " + norm_msg(r.stderr), r.stderr.strip()[-600:])
        plans[pp] = plan
    outs = {}
    for pp, backend in ((1, "ref"), (o["pp"], "ref"), (o["pp"], "dnnl" if HAVE_DNNL else "ref"), (o["pp"], "cuda-emu")):
        key = (pp, backend)
        if key in outs:
            continue
        d = os.path.join(work, f"o{pp}{backend}")
        shutil.rmtree(d, ignore_errors=True)
        argv = [PPRT, plans[pp], data_dir, "-q", "-o", d, "--backend", backend, "--depth", str(o["depth"])]
        if o["threads"] and backend == "dnnl":
            argv += ["--threads", str(o["threads"])]
        if backend in ("dnnl", "cuda-emu"):
            argv += ["--stats-json", os.path.join(work, f"stats_{backend}.json")]
        stats["runs"] += 1
        r = sh(argv)
        if r is None:
            return (f"pprt {backend} hangs", " ".join(argv))
        if crashed(r):
            return (f"pprt {backend} crashes", r.stderr[-400:])
        if r.returncode:
            return (f"pprt {backend}: " + norm_msg(r.stderr), r.stderr.strip()[-600:])
        outs[key] = {k: np.load(os.path.join(d, k + ".npy")) for k in want}
    ref1, ref = outs[(1, "ref")], outs[(o["pp"], "ref")]
    dnnl = outs[(o["pp"], "dnnl")] if HAVE_DNNL else ref
    emu = outs[(o["pp"], "cuda-emu")]
    st = json.load(open(os.path.join(work, "stats_dnnl.json")))["stages"] if HAVE_DNNL else []
    coverage(model, plans[o["pp"]], st)
    emu_st = json.load(open(os.path.join(work, "stats_cuda-emu.json")))["stages"]
    if any(x["reference_nodes"] for x in emu_st):
        covered["nodes on cuda-emu's host fallback"] = covered.get("nodes on cuda-emu's host fallback", 0) + 1
    for k, w in want.items():
        for kind, got, exp, exact in (("ref vs onnxruntime", ref[k], w, False),
                                      ("dnnl vs onnxruntime", dnnl[k], w, False),
                                      ("dnnl vs ref", dnnl[k], ref[k], False),
                                      ("cuda-emu vs onnxruntime", emu[k], w, False),
                                      ("ref -pp N vs -pp 1 bits", ref[k], ref1[k], True)):
            why = compare(got, exp, exact)
            if why:
                return (kind, f"output '{k}': {why}")
    return None


# ---- shrinking ----------------------------------------------------------------------------------

def prune(model):
    """Drop nodes, initializers and inputs no output needs."""
    g = model.graph
    need = {o.name for o in g.output}
    keep = []
    for nd in reversed(list(g.node)):
        if any(x in need for x in nd.output):
            keep.append(nd)
            need.update(i for i in nd.input if i)
    del g.node[:]
    g.node.extend(reversed(keep))
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    ins = [i for i in g.input if i.name in need]
    del g.input[:]
    g.input.extend(ins)


def value_types(model):
    """name -> (elem_type, [dims or names]) for every value (symbolic batch 'N')."""
    m = shape_inference.infer_shapes(model)
    out = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = (t.elem_type, [d.dim_param or d.dim_value for d in t.shape.dim])
    for t in m.graph.initializer:
        out[t.name] = (t.data_type, list(t.dims))
    return out


def size(model, data, o):
    """What the shrinker makes smaller: nodes first, then outputs, inputs,
    options and samples."""
    g = model.graph
    opts = o["pp"] + o["b"] + (o["depth"] != 2) + (o["threads"] != 0) + len(o["flags"]) + bool(o.get("split_at"))
    return len(g.node) * 10000 + len(g.output) * 1000 + len(g.input) * 100 + opts * 10 + \
        next(iter(data.values())).shape[0]


class Shrinker:
    def __init__(self, model, data, o, kind, work, vocab):
        self.model, self.data, self.o, self.kind, self.work, self.vocab = model, data, o, kind, work, vocab
        self.tries = 0
        self.seen = set()

    def fails(self, model, data, o):
        self.tries += 1
        d = os.path.join(self.work, "shrink")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "data"))
        onnx.save(model, os.path.join(d, "model.onnx"))
        for k, v in data.items():
            np.save(os.path.join(d, "data", k + ".npy"), v)
        res = run_case(os.path.join(d, "model.onnx"), os.path.join(d, "data"), o, d)
        return res is not None and res[0] == self.kind

    def attempt(self, model, data=None, o=None):
        model = onnx.ModelProto.FromString(model.SerializeToString())
        prune(model)
        if not model.graph.node or not model.graph.input:
            return False
        data = {i.name: (data or self.data)[i.name] for i in model.graph.input}
        o = o or self.o
        key = hashlib.sha1(model.SerializeToString() + json.dumps(o, sort_keys=True).encode() +
                           b"".join(v.tobytes() for v in data.values())).hexdigest()
        if key in self.seen or size(model, data, o) >= size(self.model, self.data, self.o) or self.tries >= 400:
            return False
        self.seen.add(key)
        if self.fails(model, data, o):
            self.model, self.data, self.o = model, data, o
            return True
        return False

    def run(self, budget_s=120):
        t0 = time.time()
        progress = True
        while progress and time.time() - t0 < budget_s:
            progress = False
            g = self.model.graph
            for k in range(len(g.output)):  # fewer outputs
                if len(self.model.graph.output) > 1 and k < len(self.model.graph.output):
                    m = onnx.ModelProto.FromString(self.model.SerializeToString())
                    del m.graph.output[k]
                    progress |= self.attempt(m)
            for key, vals in (("pp", range(1, self.o["pp"])), ("b", range(1, self.o["b"])),
                              ("depth", (2,)), ("threads", (0,)), ("flags", ([],)), ("split_at", (None,))):
                for v in vals:
                    if self.o.get(key) != v:
                        o = dict(self.o, **{key: v})
                        if key == "split_at":
                            o.pop("split_at")
                        if self.attempt(self.model, o=o):
                            progress = True
                            break
            samples = next(iter(self.data.values())).shape[0]
            if samples > 1:
                progress |= self.attempt(self.model, {k: v[:max(1, samples // 2)] for k, v in self.data.items()})
            types = value_types(self.model)
            for nd in reversed(list(self.model.graph.node)):
                if time.time() - t0 > budget_s:
                    break
                out = nd.output[0]
                if out not in types:
                    continue
                # bypass: an input of the same type and shape takes the node's place
                for i in nd.input:
                    if i and types.get(i) == types[out]:
                        if self.attempt(self.rewire(nd, out, i)):
                            progress = True
                            break
                else:
                    # cut: the node's output becomes a graph input
                    et, shp = types[out]
                    if shp and shp[0] == "N" and all(isinstance(d, int) and d > 0 for d in shp[1:]):
                        m = self.rewire(nd, out, None)
                        m.graph.input.append(helper.make_tensor_value_info(out, et, shp))
                        data = dict(self.data)
                        data[out] = make_data(m, self.vocab or 3, samples, np.random.default_rng(0))[out]
                        progress |= self.attempt(m, data)
                if progress:
                    break
        return self.model, self.data, self.o

    def rewire(self, nd, old, new):
        m = onnx.ModelProto.FromString(self.model.SerializeToString())
        g = m.graph
        idx = [i for i, x in enumerate(g.node) if list(x.output) == list(nd.output)][0]
        del g.node[idx]
        if new is None:
            return m
        for x in g.node:
            for k, name in enumerate(x.input):
                if name == old:
                    x.input[k] = new
        for o in g.output:
            if o.name == old:  # keep the output's name: an Identity
                g.node.append(helper.make_node("Identity", [new], [old], name="/shrink/Identity"))
        return m


def save_regression(model, data, o, kind, detail, origin, root):
    h = hashlib.sha1(model.SerializeToString() + json.dumps(o, sort_keys=True).encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")[:40]
    d = os.path.join(root, f"{slug}-{h}")
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, v in data.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"kind": kind, "detail": detail, "origin": origin, "options": o, "status": "open",
                   "note": ""}, f, indent=1)
    return d


# ---- drivers ------------------------------------------------------------------------------------

def one_case(seed, case, work, found_root, shrink=True, verbose=False):
    """Generate, run and (on failure) shrink and save case `case` of `seed`.
    Returns the failure kind or None."""
    rng = np.random.default_rng([seed, case])
    model, vocab = gen.make(int(rng.integers(1 << 62)))
    if model is None:
        return None
    o = random_opts(rng, model)
    data = make_data(model, vocab, int(rng.integers(1, 8)), rng)
    d = os.path.join(work, "case")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "data"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, v in data.items():
        np.save(os.path.join(d, "data", k + ".npy"), v)
    stats["cases"] += 1
    res = run_case(os.path.join(d, "model.onnx"), os.path.join(d, "data"), o, d)
    if verbose:
        print(f"seed {seed} case {case}: {len(model.graph.node)} nodes, options {o}: {res or 'pass'}")
    if res is None or res[0] == "skip":
        return None
    if res[0] == "invalid":
        stats["invalid"] += 1
        return None
    kind, detail = res
    print(f"FAIL seed {seed} case {case}: {kind}: {detail}", flush=True)
    if not shrink:
        return kind
    s = Shrinker(model, data, o, kind, work, vocab)
    m, dt, oo = s.run()
    where = save_regression(m, dt, oo, kind, detail, f"run.py --seed {seed} --case {case}", found_root)
    print(f"  shrunk from {len(model.graph.node)} to {len(m.graph.node)} nodes in {s.tries} runs: {where}", flush=True)
    return kind


def replay(work):
    """Every saved regression: 'fixed' ones must pass; 'open' ones are reported."""
    bad, opened, n = [], [], 0
    if not os.path.isdir(REGRESSIONS):
        return bad, opened, n
    for name in sorted(os.listdir(REGRESSIONS)):
        d = os.path.join(REGRESSIONS, name)
        case = json.load(open(os.path.join(d, "case.json")))
        w = os.path.join(work, "replay", name)
        os.makedirs(w, exist_ok=True)
        n += 1
        res = run_case(os.path.join(d, "model.onnx"), os.path.join(d, "data"), case["options"], w)
        if case["status"] == "open":
            opened.append(f"{name}: {'still fails: ' + res[0] if res else 'passes now: mark it fixed'}")
        elif res:
            bad.append(f"regression {name} fails again: {res[0]}: {res[1]}")
    return bad, opened, n


def campaign(seed, seconds, work, found_root, verbose, cases=None):
    t0, case, kinds = time.time(), 0, {}
    while (case < cases) if cases is not None else (time.time() - t0 < seconds):
        k = one_case(seed, case, work, found_root, verbose=verbose)
        if k:
            kinds[k] = kinds.get(k, 0) + 1
        case += 1
    return case, kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("--minutes", type=float)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--case", type=int)
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("--save", action="store_true", help="save shrunk failures under tests/difftest/regressions")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    found = REGRESSIONS if a.save else os.path.join(a.work, "found")
    t0 = time.time()
    if a.case is not None:
        k = one_case(a.seed or 1, a.case, a.work, found, verbose=True)
        return 1 if k else 0
    bad, opened, n = replay(a.work)
    print(f"difftest: {n} regressions replayed, {len(bad)} failing, {len(opened)} open")
    for x in bad + opened:
        print("  " + x)
    if a.replay:
        return 1 if bad else 0
    runs = []
    if a.ci:
        # Fixed seeds and case counts, not a time budget or a fresh seed:
        # the gate must give the same verdict on the same tree whatever the
        # machine's speed. New seeds are for --minutes runs (exploration),
        # whose findings are saved here as regressions.
        runs = [(1, None, 120), (2, None, 60)]
    else:
        seed = a.seed if a.seed is not None else int(time.time()) % 1000003
        runs = [(seed, a.seconds or 60 * (a.minutes or 1), None)]
    failed = {}
    for seed, secs, ncases in runs:
        if ncases is not None:
            print(f"difftest: seed {seed}, cases 0-{ncases - 1} (one again: tests/difftest/run.py WORKDIR --seed {seed} "
                  f"--case I -v)", flush=True)
        else:
            print(f"difftest: seed {seed} for {secs:.0f} s (again: tests/difftest/run.py WORKDIR --seed {seed} "
                  f"--seconds {secs:.0f})", flush=True)
        cases, kinds = campaign(seed, secs, a.work, found, a.v, ncases)
        print(f"difftest: seed {seed}: {cases} cases, failures: {kinds or 'none'}", flush=True)
        for k, c in kinds.items():
            failed[k] = failed.get(k, 0) + c
    print(f"difftest: {stats['cases']} cases, {stats['compiles']} compiles, {stats['runs']} pprt runs, "
          f"{stats['invalid']} invalid models skipped, in {time.time() - t0:.0f} s; cases with:")
    for f, c in sorted(covered.items(), key=lambda kv: -kv[1]):
        print(f"  {c:6d}  {f}")
    if failed:
        print(f"difftest: new failures {failed}; shrunk models under {found}")
    return 1 if failed or bad else 0


if __name__ == "__main__":
    sys.exit(main())
