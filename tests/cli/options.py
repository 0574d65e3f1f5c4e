#!/usr/bin/env python3
"""Every option of ppcc and pprt, as their --help lists them (so a new row of
an option table is covered the day it is added), table-driven:

- an option that takes a value parses as `--opt value` and as `--opt=value`
  (and under each of its names: -o/--output, -pp/--pp) with the same effect:
  the same plan byte for byte, the same outputs, or the same message, as the
  row of VALUES says; an option in --help without a row here fails the test
  (add one);
- the same option with its value left out (last on the line), and with a bad
  value where the row gives one: exit 2 and one line `TOOL: error: NAME ...`
  then `try 'TOOL --help'`; a long flag given a value (`--report=1`) is
  refused the same way;
- the options line of `pprt --info`, given to ppcc again, compiles a
  byte-identical plan: on samples/digits (every recorded option of the
  splitting table at least once) and on a zoo model (mobilenet_v3_small,
  exported here by tests/models/zoo.py with random weights, or taken from
  $ZOO/mobilenet_v3_small when the zoo has been exported).

About a minute. Usage: options.py WORKDIR (env: PPCC, PPRT, SRC; ZOO optional)."""
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clilib import (DATA, DIGITS, M, PPCC, PPRT, SRC, check, finish, fixtures, pprt_row_argv, run,  # noqa: E402
                    same_tree, start)  # noqa: E402

start(sys.argv[1])
import numpy as np  # noqa: E402


def help_rows(tool):
    """The option rows of TOOL --help: [(names, value or None)], value being
    what the help shows after the name ('N', 'FILE', '[=PASS]' for a value
    that may only be glued on)."""
    r = run([tool, "--help"])
    check(r.returncode == 0, f"{tool} --help: exit {r.returncode}")
    rows = []
    for ln in r.stdout.splitlines():
        m = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", ln)
        if not m:
            continue
        names, arg = [], None
        for item in m.group(1).split(", "):
            parts = item.split(" ", 1)
            name = parts[0]
            if "[=" in name:
                name, arg = name.split("[=")[0], "[=" + name.split("[=")[1]
            elif len(parts) > 1:
                arg = parts[1]
            names.append(name)
        rows.append((names, arg))
    return rows


fixtures()
r = run([PPRT, "base.plan", DATA, "-q", "-o", "plain.out"])
check(r.returncode == 0, f"digits plain run: {r.stderr}")

# ---- the rows: an option's value, the other arguments it needs, what is compared, a bad value
# ppcc: (value, other arguments, model, compared: plan (the plan and any {f} file) | stdout | rc, bad value)
PPCC_VALUES = {
    "-pp": ("2", [], M, "plan", "0"),
    "-o": ("{f}", [], M, "plan", None),
    "-b": ("2", [], M, "plan", "x"),
    "--dim": ("seq=5", ["-b", "2"], "small.onnx", "plan", "seq"),
    "--const": ("s=s.pb", ["-b", "2"], "const.onnx", "plan", "s="),
    "--measure-args": ("--warmup 0", ["--measure", "--measure-runs", "1"], M, "rc", None),
    "--measure-runs": ("1", ["--measure"], M, "rc", "0"),
    "--measure-procs": ("1", ["--measure", "--measure-runs", "1"], M, "rc", "65"),
    "--report-json": ("{f}", [], M, "plan", None),
    "--report-html": ("{f}", [], M, "plan", None),
    "--export-stages": ("{f}", [], M, "plan", None),
    "--policy": ("flops", [], M, "plan", "bogus"),
    "--split-at": ("stem.conv2", [], M, "plan", None),
    "--exec-seq": ("seq.txt", [], M, "plan", None),
    "--profile": ("prof.json", [], M, "plan", None),
    "--max-memory": ("100MB", [], M, "plan", "lots"),
    "--reserve": ("1KB", [], M, "plan", "-1"),
    "--gflops": ("0:50,1:70", [], M, "plan", "0"),
    "--mem-gbps": ("7", [], M, "plan", "x"),
    "--link-gbps": ("3", [], M, "plan", "-3"),
    "--depth": ("3", [], M, "plan", "0"),
    "--placement": ("ref", [], M, "plan", "0:"),
    "--devices-per-host": ("1", [], M, "plan", "0"),
    "--net-gbps": ("0.5", ["--devices-per-host", "1"], M, "plan", "0"),
    "--replicas": ("2", ["--devices-per-host", "1"], M, "plan", "0"),
    "--disable-pass": ("fuse", [], M, "plan", None),
    "--micro-batches": ("4", [], M, "plan", "0"),
    "--devices": ("2", ["--search", "--batch-sizes", "1,2"], M, "stdout", "0"),
    "--batch-sizes": ("1,2", ["--search", "--devices", "2"], M, "stdout", "1,x"),
    "--samples": ("64", ["--search", "--devices", "2", "--batch-sizes", "1,2"], M, "stdout", "0"),
    "--dump-dot": ("{f}", [], M, "plan", None),
    "--dump-ir": ("import", [], M, "stdout", None),
    "--loss": ("cross-entropy:logits", ["--train", "-b", "2"], M, "plan", "mse:"),
    "--save-onnx": ("{f}", ["--weights", "wts"], M, "file", None),
    "--weights": ("wts", ["--save-onnx", "saved.onnx"], M, "file", None),
    "--freeze": ("stem", ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", ","),
    "--recompute": ("all", ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", "x"),
    "--schedule": ("zb-h1", ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", "zb"),
    # the device memory model (passes/train_memory.c): --precision is recorded, the other two change figures only
    "--precision": ("fp16", ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", "fp8"),
    "--memory-model": ("cuda", ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", "gpu"),
    "--zero": ("1", ["--train", "--loss", "cross-entropy:logits", "-b", "2", "--memory-model", "cuda"], M, "plan",
               "2"),
    # the optimizer (ir/optim.c's rows, which pprt shares): recorded in the plan
    **{k: (v, ["--train", "--loss", "cross-entropy:logits", "-b", "2"], M, "plan", bad) for k, v, bad in (
        ("--optimizer", "adamw", "adam"), ("--lr", "0.1", "-1"), ("--momentum", "0.9", "2"),
        ("--weight-decay", "0.01", "x"), ("--beta1", "0.8", "1"), ("--beta2", "0.99", "1"), ("--eps", "1e-6", "-1"),
        ("--clip-norm", "0.5", "-0.5"), ("--lr-schedule", "cosine", "linear"), ("--warmup-steps", "1", "-1"),
        ("--lr-min", "0.001", "x"), ("--loss-scale", "dynamic", "0"), ("--loss-scale-growth", "4", "0.5"),
        ("--loss-scale-backoff", "0.25", "2"), ("--loss-scale-interval", "3", "0"), ("--precision", "bf16", "fp8"))},
}
# pprt: (value, other arguments, compared: out | accuracy | check | json | stderr, bad value)
PPRT_VALUES = {
    "-o": ("{f}", [], "out", None),
    "--input": ("input=" + os.path.join(DATA, "input.npy"), ["--no-data"], "out", "input"),
    "--labels": (os.path.join(DIGITS, "labels.npy"), [], "accuracy", None),
    "--rtol": ("1e-3", [], "check", "-1"),
    "--atol": ("1e-4", [], "check", "x"),
    "--expected": (os.path.join(DIGITS, "expected"), [], "check", None),
    "--depth": ("3", [], "out", "0"),
    "--stats-json": ("{f}", [], "json", None),
    "--profile": ("{f}", [], "json", None),
    "--trace": ("{f}", [], "json", None),
    "--model": (M, ["--plan", "ref.plan"], "out", None),
    "--replicas": ("2", [], "out", "0"),
    "--backend": ("ref", [], "out", "nope"),
    "--threads": ("1", [], "out", "0"),
    "--precision": ("f32", [], "out", "f8"),
    "--warmup": ("0", [], "out", "-1"),
    "--mpi-timeout": ("5", [], "stderr", "0"),
    "--transport": ("mpi", [], "stderr", "tcp"),
    "--devices": ("0", ["--backend", "cuda-emu"], "out", None),
    "--cuda-graphs": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-wide-copies": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-conv-fusion": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-overlap": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-row-kernels": ("on", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-fused-attention": ("on", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-sdpa": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-stride-views": ("on", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-wide-elementwise": ("on", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-half-products": ("off", ["--backend", "cuda-emu"], "out", "maybe"),
    "--cuda-host-ops": ("Conv", ["--backend", "cuda-emu"], "out", None),
    "--cuda-tactics": ("off", ["--backend", "cuda-emu"], "out", "no-such-table.tsv"),
    "--cuda-layout": ("nhwc", ["--backend", "cuda-emu"], "out", "nchwc"),
    # training (train.plan on tdata/, two steps; compared: the trained weights)
    "--epochs": ("1", [], "train", "0"),
    "--steps": ("3", [], "train", "0"),
    "--accumulate": ("2", [], "train", "0"),
    "--optimizer": ("adamw", [], "train", "adam"),
    "--schedule": ("gpipe", [], "train", "zb"),
    "--lr": ("0.1", [], "train", "-1"),
    "--momentum": ("0.9", [], "train", "2"),
    "--weight-decay": ("0.01", [], "train", "x"),
    "--beta1": ("0.8", ["--optimizer", "adamw"], "train", "1"),
    "--beta2": ("0.99", ["--optimizer", "adamw"], "train", "1"),
    "--eps": ("1e-6", ["--optimizer", "adamw"], "train", "-1"),
    "--clip-norm": ("0.5", [], "train", "-0.5"),
    "--lr-schedule": ("cosine", [], "train", "linear"),
    "--warmup-steps": ("1", [], "train", "-1"),
    "--lr-min": ("0.001", ["--lr-schedule", "cosine"], "train", "x"),
    "--seed": ("5", [], "train", "-5"),
    "--log-json": ("{f}", [], "train", None),
    "--curves": ("{f}", [], "train", None),
    "--save-weights": ("{f}", [], "train", None),
    "--eval": ("tdata", [], "train", None),
    "--checkpoint": ("{f}", ["--save-every", "1"], "train", None),
    "--save-every": ("1", ["--checkpoint", "ck"], "train", "0"),
    "--resume": ("ck", [], "train", None),
    "--loss-scale": ("1024", [], "train", "0"),
    "--loss-scale-growth": ("4", ["--loss-scale", "dynamic"], "train", "0.5"),
    "--loss-scale-backoff": ("0.25", ["--loss-scale", "dynamic"], "train", "2"),
    "--loss-scale-interval": ("1", ["--loss-scale", "dynamic"], "train", "0"),
}


def one_error_line(r, tool, what, want=None):
    """exit 2, `TOOL: error: ...` (containing want) and the try line, nothing else."""
    lines = r.stderr.splitlines()
    check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2: {r.stderr[:300]!r}")
    check(len(lines) == 2 and lines[0].startswith(f"{tool}: error: ") and lines[1] == f"try '{tool} --help'"
          and (want is None or want in lines[0]), f"{what}: want one '{tool}: error: ' line"
          f"{' with ' + repr(want) if want else ''} and the try line, got {r.stderr[:400]!r}")


def forms(names, v):
    """Every spelling of an option with value v: each name, then value; each
    long name glued."""
    out = [[n, v] for n in names]
    out += [[f"{n}={v}"] for n in names if n.startswith("--")]
    return out


def ppcc_row(k, names, v):
    val, extra, model, cmp, bad = PPCC_VALUES[v]
    got = []
    for j, spelled in enumerate(forms(names, val)):
        f = f"c{k}_{j}"
        spelled = [s.replace("{f}", f) for s in spelled]
        if names[0] == "--dump-ir":  # its value only glued
            spelled = [f"--dump-ir={val}"] if j == 0 else []
            if j > 0:
                break
        pp = [] if names[0] in ("-pp", "--const") else ["-pp", "2"]
        plan = f if names[0] == "-o" else f + ".plan"
        argv = [PPCC, model] + pp + spelled + extra + ([] if names[0] == "-o" or cmp == "stdout" else ["-o", plan])
        if cmp != "stdout":
            argv.append("-q")
        r = run(argv)
        check(r.returncode == 0, f"ppcc {' '.join(spelled)}: exit {r.returncode}: {r.stderr.strip()[:300]}")
        got.append((r, plan, f, spelled))
    for r, plan, f, spelled in got[1:]:
        r0, plan0, f0, spelled0 = got[0]
        if cmp == "plan":
            check(same_tree(plan0, plan), f"ppcc: '{' '.join(spelled0)}' and '{' '.join(spelled)}' give different plans")
            if "{f}" in val and names[0] != "-o":
                check(same_tree(f0, f), f"ppcc: '{' '.join(spelled0)}' and '{' '.join(spelled)}' write different files")
        elif cmp == "file":  # --save-onnx: the model written, no plan
            written = f if names[0] == "--save-onnx" else "saved.onnx"
            check(os.path.getsize(written) > 1000 if os.path.exists(written) else False,
                  f"ppcc {' '.join(spelled)}: no model written")
        elif cmp == "stdout":  # the search's own time ("0.01 s") left out
            a, b = (re.sub(r"[0-9.]+ s$", "", x.stdout, flags=re.M) for x in (r0, r))
            check(a == b and a, f"ppcc {names[0]}: the forms print differently:\n{r0.stdout[-300:]}\n{r.stdout[-300:]}")
        else:
            check(os.path.exists(plan0) and os.path.exists(plan), f"ppcc {names[0]}: no plan from one of the forms")
    if names[0] == "--dump-ir":
        return
    for n in names:  # the value left out: the option last on the line
        one_error_line(run([PPCC, model, n]), "ppcc", f"ppcc {n} (no value)", n)
    if bad is not None:
        one_error_line(run([PPCC, model] + extra + [names[-1], bad, "-o", f"c{k}_bad.plan"]), "ppcc",
                       f"ppcc {names[-1]} {bad}", names[-1])
        check(not os.path.exists(f"c{k}_bad.plan"), f"ppcc {names[-1]} {bad}: a plan was written")


def pprt_row(k, names, v):
    val, extra, cmp, bad = PPRT_VALUES[v]
    got = []
    for j, spelled in enumerate(forms(names, val)):
        f = f"r{k}_{j}"
        spelled = [s.replace("{f}", f) for s in spelled]
        argv, out = pprt_row_argv(spelled, extra, f, names[0] == "-o")
        if cmp == "train":  # two steps of train.plan on tdata/ (three with --steps' value), weights to f.w
            out = f if names[0] == "--save-weights" else f + ".w"
            steps = [] if names[0] in ("--epochs", "--steps") else ["--steps", "2"]
            argv = [PPRT, "train.plan", "tdata", *steps, "-q", *spelled, *extra] + \
                ([] if names[0] == "--save-weights" else ["--save-weights", out])
        r = run(argv)
        if cmp != "stderr":
            check(r.returncode == 0, f"pprt {' '.join(spelled)}: exit {r.returncode}: {r.stderr.strip()[:300]}")
        got.append((r, out, f, spelled))
    r0, out0, f0, _ = got[0]
    for r, out, f, spelled in got:
        what = f"pprt {' '.join(spelled)}"
        if cmp == "out":
            if "--backend" in (names[0], *extra):  # another backend's sums may differ in the last bits
                y, want = np.load(os.path.join(out, "logits.npy")), np.load(os.path.join("plain.out", "logits.npy"))
                check(np.allclose(y, want, rtol=1e-4, atol=1e-5), f"{what}: outputs far from the plain run's")
                check(same_tree(out0, out), f"{what}: outputs differ from the first form's")
            else:
                check(same_tree("plain.out", out), f"{what}: outputs differ from the plain run's")
        elif cmp == "accuracy":
            acc = [[ln for ln in x.stdout.splitlines() if ln.startswith("accuracy:")] for x in (r0, r)]
            check(acc[0] and acc[0] == acc[1], f"{what}: accuracy lines {acc}")
        elif cmp == "check":
            ck = [[ln for ln in x.stdout.splitlines() if "check" in ln.lower()] for x in (r0, r)]
            check(ck[0] and ck[0] == ck[1], f"{what}: check lines differ: {ck}")
        elif cmp == "json":
            check(os.path.getsize(f) > 0 if os.path.exists(f) else False, f"{what}: no file {f}")
        elif cmp == "train":
            check(os.path.isdir(out) and same_tree(out0, out), f"{what}: trained weights differ from the first form's")
        else:  # refused the same way without mpirun
            check(r.returncode == r0.returncode == 2 and r.stderr == r0.stderr,
                  f"{what}: {r.returncode}: {r.stderr[:200]!r} vs {r0.stderr[:200]!r}")
    for n in names:
        one_error_line(run([PPRT, "base.plan", DATA, "-o", f"r{k}_none.out", n]), "pprt", f"pprt {n} (no value)", n)
    if bad is not None:
        one_error_line(run([PPRT, "base.plan", DATA, "-o", f"r{k}_bad.out"] + list(extra) + [names[-1], bad]),
                       "pprt", f"pprt {names[-1]} {bad}", None)
        check(not os.path.exists(f"r{k}_bad.out"), f"pprt {names[-1]} {bad}: outputs were written")


for tool, rows_fn, values in (("ppcc", ppcc_row, PPCC_VALUES), ("pprt", pprt_row, PPRT_VALUES)):
    exe = PPCC if tool == "ppcc" else PPRT
    rows = help_rows(exe)
    check(len(rows) > 20, f"{tool} --help lists {len(rows)} options")
    for k, (names, arg) in enumerate(rows):
        if arg is None:  # a flag: a value glued on is refused
            for n in names:
                if n.startswith("--"):
                    one_error_line(run([exe, "x", f"{n}=1"]), tool, f"{tool} {n}=1", f"{n} takes no value")
            continue
        key = next((n for n in names if n in values), None)
        check(key is not None, f"{tool} --help lists {' '.join(names)} {arg}, and this test has no row for it: add one")
        if key is not None:
            rows_fn(k, names, key)

# ---- pprt --info's options compile the same plan again -------------------------------------
def info_options(plan):
    r = run([PPRT, "--info", plan])
    line = r.stdout.splitlines()[0] if r.stdout else ""
    return line.split("options: ", 1)[1] if "options: " in line else None


def zoo_model():
    zoo = os.environ.get("ZOO")
    if zoo and os.path.exists(os.path.join(zoo, "mobilenet_v3_small", "model.onnx")):
        return os.path.join(zoo, "mobilenet_v3_small", "model.onnx")
    r = run([sys.executable, os.path.join(SRC, "tests/models/zoo.py"), "export", "mobilenet_v3_small", "mnv3",
             "--no-expected", "--no-torch", "--threads", "1"], timeout=600)
    check(r.returncode == 0, f"zoo export of mobilenet_v3_small: {r.stderr[-300:]}")
    return os.path.abspath("mnv3/model.onnx")


# the files a plan records as '(file)', put back in
FILES = {"--exec-seq (file)": "--exec-seq seq.txt", "--profile (file)": "--profile prof.json",
         "=(file)": "=s.pb"}
MNV3 = zoo_model()
CASES = [
    (M, []),
    (M, ["--pp=3", "-b", "4", "--policy", "flops", "--depth", "3", "--micro-batches", "4"]),
    (M, ["-pp", "2", "--gflops", "0:33.3,1:12", "--mem-gbps=7.25", "--link-gbps", "3", "--max-memory", "100MB",
         "--reserve", "1KB"]),
    (M, ["-pp", "2", "--placement", "0:ref,1:ref", "--devices-per-host", "1", "--net-gbps", "0.1",
         "--replicas", "2", "--max-memory", "0:1GB,1:2GB"]),
    (M, ["-pp", "2", "--split-at", "stem.conv2", "--disable-pass", "fuse", "--allow-batch-mixing"]),
    (M, ["--exec-seq", "seq.txt", "--ref-weights"]),
    (M, ["-pp", "2", "--profile", "prof.json", "--placement", "ref:0"]),
    ("small.onnx", ["-pp", "3", "-b", "3", "--dim=seq=7"]),
    ("const.onnx", ["-b", "2", "--const", "s=s.pb"]),
    (M, ["-pp", "2", "--search", "--devices", "2", "--batch-sizes", "1,2", "-o", "{out}"]),
    (M, ["-pp", "2", "-b", "2", "--train", "--loss", "cross-entropy:logits", "--optimizer", "adamw", "--lr", "0.004",
         "--nesterov", "--warmup-steps", "3", "--lr-schedule", "cosine", "--loss-scale", "dynamic:1024"]),
    (MNV3, ["-pp", "2"]),
    (MNV3, ["-pp", "4", "-b", "2", "--policy", "memory", "--gflops", "0:40", "--mem-gbps", "12", "--depth", "3",
            "--max-memory", "1GiB", "--placement", "ref", "--ref-weights"]),
    (MNV3, ["-pp", "3", "--split-at", "features.4,features.9", "--disable-pass", "fuse"]),
]
for k, (model, args) in enumerate(CASES):
    args = [a.replace("{out}", f"rt{k}a.plan") for a in args]
    r = run([PPCC, model] + args + ["-q"] + ([] if "-o" in args else ["-o", f"rt{k}a.plan"]))
    what = f"round trip {os.path.basename(model)} {' '.join(args)}"
    check(r.returncode == 0, f"{what}: {r.stderr[:300]}")
    opts = info_options(f"rt{k}a.plan")
    check(opts is not None, f"{what}: no options line")
    if opts is None:
        continue
    check(os.path.abspath(".") not in opts and "s.pb" not in opts and "seq.txt" not in opts, f"{what}: a path in '{opts}'")
    again = opts
    for rec, given in FILES.items():
        again = again.replace(rec, given)
    r = run([PPCC, model] + shlex.split(again) + ["-q", "-o", f"rt{k}b.plan"])
    check(r.returncode == 0, f"{what}: '{opts}' does not compile: {r.stderr[:300]}")
    check(same_tree(f"rt{k}a.plan", f"rt{k}b.plan"), f"{what}: '{opts}' compiles another plan")
    check(info_options(f"rt{k}b.plan") == opts, f"{what}: the options line changed")

finish("options")
