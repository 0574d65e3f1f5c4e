#!/usr/bin/env python3
"""ONNX backend node tests through ppcc and pprt.

For every test folder of the onnx package's node tests (onnx/backend/test/
data/node/test_*: model.onnx and test_data_set_N/{input,output}_K.pb), compile
the model unbatched and run every data set with the output check:

    ppcc model.onnx -b 0 [--const NAME=test_data_set_N/input_K.pb]... -o PLAN
    pprt PLAN test_data_set_N --check -o OUT

Graph inputs that decide an output's shape (the shape of Reshape, the axes of
a Reduce*, the repeats of Tile, ...: SHAPE_SLOTS below, and whatever graph
inputs those values are computed from, stopping at Shape and Size) are bound
as constants with --const, from the data set's own file. The data set is
passed to pprt as it is: pprt matches input_K.pb files to plan inputs by the
tensor's name and skips files that name no plan input, which is what the bound
inputs' files are (see runtime/io.h).

Each test passes or fails with a one-line reason: ppcc's or pprt's error
message, the first MISMATCH line of the check, a time-out or a crash.

Files next to this script:
  expected_pass.txt    tests that must pass; any of them failing fails the run
  known_failures.txt   test<TAB>reason for the failing tests whose ops are all
                       in LISTED_OPS (the ops this project means to support)
`--update` rewrites both from the run (with --filter: only the entries of the
tests that ran); without it the run is compared with them, and newly passing
tests are reported (run --update to record them).

Usage: run.py [--update] [--filter SUBSTRING] [--list-failures] [--json FILE]
              [-j N] [--timeout S] [--node-dir DIR]
Environment: PPCC, PPRT (default: build/ppcc, build/pprt of the source tree);
PPRT_EXTRA_ARGS: more pprt arguments, split like a shell does (for example
"--backend ref" or "--backend dnnl --threads 1").
Exit status: 0 no regression, 1 an expected pass failed, 2 bad usage,
77 the node tests are not available (onnx missing): skipped.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
EXPECTED_PASS = os.path.join(HERE, "expected_pass.txt")
KNOWN_FAILURES = os.path.join(HERE, "known_failures.txt")

# The ops the project means to support: the "listed-op" figures count the
# tests whose ops are all among these.
LISTED_OPS = frozenset("""
Conv ConvTranspose BatchNormalization InstanceNormalization LayerNormalization
GroupNormalization Relu LeakyRelu PRelu Elu Selu Sigmoid HardSigmoid HardSwish Tanh
Softplus Erf Gelu Clip Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal Floor
Ceil Min Max Sum Mean MatMul Gemm Einsum MaxPool AveragePool GlobalAveragePool
GlobalMaxPool ReduceMean ReduceSum ReduceMax ReduceMin ReduceL2 Softmax LogSoftmax
Flatten Reshape Transpose Squeeze Unsqueeze Concat Split Slice Gather GatherElements
Shape Size Constant ConstantOfShape Expand Tile Where Equal Less Greater LessOrEqual
GreaterOrEqual Not And Or Cast Range Pad Resize GridSample Identity Dropout CumSum TopK ArgMax
QuantizeLinear DequantizeLinear CumProd Hardmax LpNormalization AffineGrid LpPool OneHot CenterCropPad Col2Im
Trilu DepthToSpace SpaceToDepth
Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Sign Round Softsign Mish Celu
ThresholdedRelu Shrink Swish IsNaN IsInf Mod EyeLike ScatterND ScatterElements
BitwiseNot BitwiseAnd BitwiseOr BitwiseXor BitShift
RMSNormalization RotaryEmbedding Attention LSTM GRU RNN
Loop If SequenceEmpty SequenceConstruct SequenceInsert SequenceAt SequenceErase
SequenceLength SplitToSequence ConcatFromSequence
""".split())

# Input slots whose values decide output shapes (or an axis): a graph input
# reaching one of them is bound to its data set's value at compile time.
REDUCE_OPS = ("ReduceMean ReduceSum ReduceMax ReduceMin ReduceL1 ReduceL2 ReduceProd "
              "ReduceLogSum ReduceLogSumExp ReduceSumSquare").split()
SHAPE_SLOTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4),
    "ConstantOfShape": (0,), "Range": (0, 1, 2), "Pad": (1, 2, 3), "Resize": (1, 2, 3),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "CumSum": (1,),
    "OneHot": (1,),
    # not in the brief's list, same nature
    "Upsample": (1,), "CenterCropPad": (1,), "Col2Im": (1, 2), "AffineGrid": (1,),
    # control flow and sequence positions: ppcc unrolls them at compile time
    # (docs/ir.md), so a trip count, condition, split or position must be known
    "Loop": (0, 1), "If": (0,), "SplitToSequence": (1,), "SequenceAt": (1,),
    "SequenceInsert": (2,), "SequenceErase": (1,),
    **{op: (1,) for op in REDUCE_OPS},
}
# Values computed by these depend on their input's shape only (static).
SHAPE_ONLY_OPS = ("Shape", "Size")


def die(msg, code=2):
    print(f"run.py: {msg}", file=sys.stderr)
    sys.exit(code)


# ---- looking at a test ---------------------------------------------------------------

def all_nodes(graph):
    """The graph's nodes, and those of its subgraphs (If, Loop, Scan)."""
    from onnx import AttributeProto
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from all_nodes(g)


def bound_inputs(graph):
    """Names of the graph inputs that reach a shape slot (SHAPE_SLOTS)."""
    inits = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in inits]
    producer = {}
    for n in graph.node:
        for o in n.output:
            if o:
                producer[o] = n
    todo = [n.input[k] for n in graph.node for k in SHAPE_SLOTS.get(n.op_type, ())
            if k < len(n.input) and n.input[k]]
    seen, bound = set(), set()
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            bound.add(v)
        elif v in producer and producer[v].op_type not in SHAPE_ONLY_OPS:
            todo.extend(x for x in producer[v].input if x)
    return [i for i in inputs if i in bound]  # model order


def tensor_name(path):
    from onnx import TensorProto
    t = TensorProto()
    try:
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
    except Exception:  # not a TensorProto (sequence and optional tests)
        return None
    return t.name


def input_files(dataset, graph_inputs):
    """{graph input name: input_K.pb path} of a data set: by the tensor's
    name, else by position K among the graph inputs."""
    files = {}
    for f in os.listdir(dataset):
        m = re.fullmatch(r"input_(\d+)\.pb", f)
        if not m:
            continue
        path = os.path.join(dataset, f)
        name = tensor_name(path)
        k = int(m.group(1))
        if not name and k < len(graph_inputs):
            name = graph_inputs[k]
        if name:
            files.setdefault(name, path)
    return files


# ---- running a test -------------------------------------------------------------------

class Result:
    def __init__(self, name, ops, listed):
        self.name, self.ops, self.listed = name, ops, listed
        self.status, self.reason, self.seconds = "pass", "", 0.0

    def fail(self, status, reason):
        self.status, self.reason = status, reason
        return self


def clean(text, paths):
    """One line of a tool's output, with long machine-specific paths cut."""
    for p, short in paths:
        text = text.replace(p + "/", short).replace(p, short.rstrip("/"))
    return " ".join(text.split())


def tool_failure(tool, r, paths):
    """(status, reason) of a ppcc or pprt run that did not succeed."""
    out = (r.stdout or "") + "\n" + (r.stderr or "")
    if r.returncode < 0:
        last = [line for line in out.splitlines() if line.strip()]
        tail = clean(last[-1], paths)[:200] if last else ""
        return "crash", f"{tool} died of signal {-r.returncode}" + (f": {tail}" if tail else "")
    if tool == "pprt":
        for line in (r.stdout or "").splitlines():
            if "MISMATCH" in line:
                return "mismatch", clean(line, paths)
    for line in (r.stderr or "").splitlines():
        if line.startswith(f"{tool}: error: "):
            msg = clean(line[len(tool) + 9:], paths)
            return ("compile" if tool == "ppcc" else "run"), msg
    for w in ("Sanitizer", "runtime error:"):
        if w in out:
            line = next(line for line in out.splitlines() if w in line)
            return "crash", f"{tool}: {clean(line, paths)[:200]}"
    last = [line for line in out.splitlines() if line.strip()]
    return ("compile" if tool == "ppcc" else "run",
            f"{tool} exited {r.returncode}" + (f": {clean(last[-1], paths)[:200]}" if last else ""))


def run_test(test_dir, args):
    import onnx
    name = os.path.basename(test_dir)
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    try:
        model = onnx.load(os.path.join(test_dir, "model.onnx"), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - any load failure is the test's reason
        res = Result(name, [], False)
        return res.fail("compile", f"onnx cannot load the model: {str(e).splitlines()[0][:200]}")
    ops = sorted({n.op_type for n in all_nodes(model.graph)})
    res = Result(name, ops, all(op in LISTED_OPS for op in ops))
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
    bound = bound_inputs(model.graph)
    datasets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not datasets:
        return res.fail("compile", "no test_data_set_* folder")
    work = tempfile.mkdtemp(prefix=f"conf-{name}-")
    paths = [(work, ""), (test_dir, ""), (os.path.dirname(test_dir), "")]
    try:
        plan = None
        for ds in datasets:
            ds_dir = os.path.join(test_dir, ds)
            files = input_files(ds_dir, graph_inputs)
            consts = [f"{i}={files[i]}" for i in bound if i in files]
            if plan is None or consts:  # bound values may differ per data set
                plan = os.path.join(work, f"{ds}.plan")
                argv = [args.ppcc, os.path.join(test_dir, "model.onnx"), "-b", "0", "-q", "-o", plan]
                for c in consts:
                    argv += ["--const", c]
                r = run_tool(argv, deadline)
                if r is None:
                    return res.fail("timeout", f"ppcc timed out ({args.timeout:g} s)")
                if r.returncode != 0:
                    return res.fail(*tool_failure("ppcc", r, paths))
            argv = [args.pprt, plan, ds_dir, "--check", "-q", "--no-pin", "-o",
                    os.path.join(work, f"{ds}.out")] + args.pprt_extra
            r = run_tool(argv, deadline)
            if r is None:
                return res.fail("timeout", f"pprt timed out ({args.timeout:g} s)")
            if r.returncode != 0:
                status, reason = tool_failure("pprt", r, paths)
                if len(datasets) > 1:
                    reason = f"{ds}: {reason}"
                return res.fail(status, reason)
        return res
    finally:
        res.seconds = time.monotonic() - t0
        shutil.rmtree(work, ignore_errors=True)


def run_tool(argv, deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=left)
    except subprocess.TimeoutExpired:
        return None


# ---- the lists ---------------------------------------------------------------------------

def read_list(path):
    """Lines of a list file, without blank lines and '#' comments."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]


def write_list(path, header, lines):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for h in header:
            f.write(f"# {h}\n")
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)


def update_lists(results, ran_all):
    ran = {r.name for r in results}
    keep_pass = [] if ran_all else [t for t in read_list(EXPECTED_PASS) if t not in ran]
    keep_fail = [] if ran_all else [line for line in read_list(KNOWN_FAILURES)
                                    if line.split("\t")[0] not in ran]
    passes = sorted(set(keep_pass) | {r.name for r in results if r.status == "pass"})
    fails = sorted(keep_fail + [f"{r.name}\t{r.reason}" for r in results
                                if r.status != "pass" and r.listed])
    write_list(EXPECTED_PASS, ["ONNX node tests that must pass (tests/conformance/run.py fails",
                               "when one does not). Generated by run.py --update."], passes)
    write_list(KNOWN_FAILURES, ["Failing node tests whose ops are all in run.py's LISTED_OPS:",
                                "test<TAB>reason. Generated by run.py --update."], fails)
    print(f"updated {os.path.relpath(EXPECTED_PASS, SRC)} ({len(passes)} tests) and "
          f"{os.path.relpath(KNOWN_FAILURES, SRC)} ({len(fails)} tests)")


# ---- reporting ---------------------------------------------------------------------------

def reason_key(r):
    """Failure reasons grouped: node names and numbers left out."""
    if r.status in ("mismatch", "timeout", "crash"):
        return {"mismatch": "output mismatch", "timeout": "time-out",
                "crash": re.sub(r":.*", "", r.reason)}[r.status]
    k = re.sub(r"^.*?model\.onnx: ", "", r.reason)
    k = re.sub(r"node '[^']*' \(#\d+, (\w+)\)", r"\1", k)
    if "op '" in k and "is not supported" in k:
        return re.sub(r"^.*(op '[^']*' is not supported).*$", r"\1", k)
    k = re.sub(r"'[^']*'", "'…'", k)
    k = re.sub(r"\[[-?\d,]*\]", "[…]", k)
    return re.sub(r"\b\d+(\.\d+)?\b", "N", k)


def summary(results, out=sys.stdout):
    groups = [("all tests", results), ("listed-op tests", [r for r in results if r.listed])]
    statuses = ["pass", "mismatch", "compile", "run", "timeout", "crash"]
    print(f"\n{'':16s} {'total':>6s} " + " ".join(f"{s:>8s}" for s in statuses), file=out)
    for label, rs in groups:
        c = collections.Counter(r.status for r in rs)
        print(f"{label:16s} {len(rs):6d} " + " ".join(f"{c[s]:8d}" for s in statuses), file=out)
    for label, rs in groups:
        c = collections.Counter(reason_key(r) for r in rs if r.status != "pass")
        if c:
            print(f"\ntop failure reasons, {label}:", file=out)
            for k, n in c.most_common(10):
                print(f"  {n:5d}  {k}", file=out)
    for label, rs in groups:
        n_pass = sum(r.status == "pass" for r in rs)
        print(f"{label}: {n_pass}/{len(rs)} pass", file=out)


def write_json(path, results, elapsed):
    listed = [r for r in results if r.listed]
    doc = {
        "total": len(results), "pass": sum(r.status == "pass" for r in results),
        "listed_total": len(listed), "listed_pass": sum(r.status == "pass" for r in listed),
        "seconds": round(elapsed, 2),
        "tests": [{"name": r.name, "status": r.status, "reason": r.reason, "listed": r.listed,
                   "ops": r.ops, "seconds": round(r.seconds, 3)} for r in results],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true",
                    help="rewrite expected_pass.txt and known_failures.txt from this run")
    ap.add_argument("--filter", default="", metavar="SUBSTRING",
                    help="only the tests whose name contains SUBSTRING")
    ap.add_argument("--list-failures", action="store_true",
                    help="print every failing test with its reason")
    ap.add_argument("--json", metavar="FILE", help="write every test's result as JSON")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="tests run in parallel (default 2)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per test (default 60)")
    ap.add_argument("--node-dir", help="node test folder (default: the onnx package's)")
    args = ap.parse_args()
    if args.jobs < 1 or args.timeout <= 0:
        die("-j and --timeout must be positive")
    args.ppcc = os.path.abspath(os.environ.get("PPCC", os.path.join(SRC, "build", "ppcc")))
    args.pprt = os.path.abspath(os.environ.get("PPRT", os.path.join(SRC, "build", "pprt")))
    args.pprt_extra = shlex.split(os.environ.get("PPRT_EXTRA_ARGS", ""))
    for tool in (args.ppcc, args.pprt):
        if not os.access(tool, os.X_OK):
            die(f"'{tool}' is not an executable (build first, or set PPCC and PPRT)")
    node_dir = args.node_dir
    if not node_dir:
        try:
            import onnx
        except ImportError:
            die("the onnx package is not importable: skipped (scripts/setup.sh installs it "
                "into .venv)", 77)
        node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if not os.path.isdir(node_dir):
        die(f"no node tests at '{node_dir}' (onnx 1.22 ships them): skipped", 77)
    tests = sorted(d for d in os.listdir(node_dir)
                   if d.startswith("test_") and args.filter in d
                   and os.path.exists(os.path.join(node_dir, d, "model.onnx")))
    if not tests:
        die(f"no node test matches '{args.filter}'")

    t0 = time.monotonic()
    results = []
    tty = sys.stderr.isatty()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = [ex.submit(run_test, os.path.join(node_dir, t), args) for t in tests]
        for i, f in enumerate(futs):
            results.append(f.result())
            if tty:
                print(f"\r{i + 1}/{len(tests)}", end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    elapsed = time.monotonic() - t0

    if args.list_failures:
        for r in results:
            if r.status != "pass":
                print(f"{r.name}\t{r.status}\t{'listed' if r.listed else '-'}\t{r.reason}")
    summary(results)
    print(f"({len(results)} tests in {elapsed:.1f} s with {args.jobs} workers)")
    if args.json:
        write_json(args.json, results, elapsed)
    if args.update:
        update_lists(results, ran_all=not args.filter)
        return 0

    by_name = {r.name: r for r in results}
    expected = read_list(EXPECTED_PASS)
    regressions = [by_name[t] for t in expected if t in by_name and by_name[t].status != "pass"]
    vanished = [t for t in expected if not args.filter and t not in by_name]
    new_passes = [r.name for r in results if r.status == "pass" and r.name not in set(expected)]
    if new_passes:
        print(f"\n{len(new_passes)} test(s) pass that expected_pass.txt does not list "
              f"(run tests/conformance/run.py --update to record them):")
        for t in new_passes[:20]:
            print(f"  {t}")
        if len(new_passes) > 20:
            print(f"  ... and {len(new_passes) - 20} more")
    if regressions or vanished:
        print(f"\nFAIL: {len(regressions) + len(vanished)} expected pass(es) did not pass:")
        for r in regressions:
            print(f"  {r.name}: {r.status}: {r.reason}")
        for t in vanished:
            print(f"  {t}: no such node test in {node_dir}")
        return 1
    checked = sum(t in by_name for t in expected)
    print(f"\nconformance: no regression ({checked} expected passes checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
