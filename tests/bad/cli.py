#!/usr/bin/env python3
"""The command line people already know (GNU conventions), table-driven:

- every option of ppcc and pprt that takes a value parses as `--opt value`
  and as `--opt=value` with the same effect: the same plan (byte for byte),
  the same reports, the same outputs, or the same message, as the row says;
  the backends' options too (cuda-emu);
- bad usage: exit 2, exactly two lines on stderr, `TOOL: error: ...` and
  `try 'TOOL --help'`, never the whole help; an unknown option near a known
  one gets "did you mean"; a flag given a value (`--report=1`) is refused;
- ppcc --dim: a NAME no input has (exit 2, naming the dims the model has),
  a VALUE <= 0 (exit 2);
- every output path in a missing folder: exit 2 before any work, nothing
  left behind; ppcc -o naming the model file (same path, another spelling,
  a symbolic link) refused, the model intact;
- the options line of `pprt --info`, pasted back into ppcc, compiles a
  byte-identical plan (digits, and a small model with a symbolic batch and
  a symbolic seq dim compiled with --dim);
- both helps list --help and --version, and the main options first.

About 30 s. Usage: cli.py WORKDIR (env: PPCC, PPRT, SRC)."""
import filecmp
import json
import os
import re
import shlex
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from clilib import (DATA, DIGITS, M, PPCC, PPRT, check, finish, fixtures, pprt_row_argv, run,  # noqa: E402
                    same_tree, start)  # noqa: E402

start(sys.argv[1])
import numpy as np  # noqa: E402


fixtures()

# ---- ppcc: every option in both forms --------------------------------------------------
# (option, value, other arguments, model, what is compared: plan = the plan and
# any {f} file; stdout = what it prints; rc = that both succeed)
PPCC_ROWS = [
    ("--pp", "2", [], M, "plan"),
    ("--output", "{f}", [], M, "plan"),
    ("--policy", "flops", [], M, "plan"),
    ("--split-at", "stem.conv2", [], M, "plan"),
    ("--exec-seq", "seq.txt", [], M, "plan"),
    ("--profile", "prof.json", [], M, "plan"),
    ("--max-memory", "100MB", [], M, "plan"),
    ("--reserve", "1KB", [], M, "plan"),
    ("--placement", "ref", [], M, "plan"),
    ("--gflops", "0:50,1:70", [], M, "plan"),
    ("--mem-gbps", "7", [], M, "plan"),
    ("--link-gbps", "3", [], M, "plan"),
    ("--net-gbps", "0.5", ["--devices-per-host", "1"], M, "plan"),
    ("--devices-per-host", "1", [], M, "plan"),
    ("--replicas", "2", ["--devices-per-host", "1"], M, "plan"),
    ("--depth", "3", [], M, "plan"),
    ("--micro-batches", "4", [], M, "plan"),
    ("--disable-pass", "fuse", [], M, "plan"),
    ("--dump-dot", "{f}", [], M, "plan"),
    ("--report-json", "{f}", [], M, "plan"),
    ("--report-html", "{f}", [], M, "plan"),
    ("--export-stages", "{f}", [], M, "plan"),
    ("--dim", "seq=5", [], "small.onnx", "plan"),
    ("--const", "s=s.pb", [], "const.onnx", "plan"),
    ("--devices", "2", ["--search", "--batch-sizes", "1,2"], M, "stdout"),
    ("--batch-sizes", "1,2", ["--search", "--devices", "2"], M, "stdout"),
    ("--samples", "64", ["--search", "--devices", "2", "--batch-sizes", "1,2"], M, "stdout"),
    ("--measure-runs", "1", ["--measure"], M, "rc"),
    ("--measure-procs", "1", ["--measure", "--measure-runs", "1"], M, "rc"),
    ("--measure-args", "--warmup 0", ["--measure", "--measure-runs", "1"], M, "rc"),
]
for k, (opt, val, extra, model, cmp) in enumerate(PPCC_ROWS):
    got = {}
    for form in ("sep", "eq"):
        f = f"c{k}_{form}"
        v = val.replace("{f}", f)
        args = [opt, v] if form == "sep" else [f"{opt}={v}"]
        pp = [] if opt in ("--pp", "--const") else ["-pp", "2"]
        if opt == "--dim":
            pp += ["-b", "2"]
        if opt == "--const":
            pp += ["-b", "2"]
        plan = f if opt == "--output" else f + ".plan"
        argv = [PPCC, model] + pp + args + extra + ([] if opt == "--output" or cmp == "stdout" else ["-o", plan])
        if cmp != "stdout":
            argv.append("-q")
        r = run(argv, timeout=300)
        check(r.returncode == 0, f"ppcc {opt} ({form}): exit {r.returncode}: {r.stderr.strip()[:300]}")
        got[form] = (r, plan, f)
    (a, pa, fa), (b, pb, fb) = got["sep"], got["eq"]
    if cmp == "plan":
        check(same_tree(pa, pb), f"ppcc {opt}: '{opt} {val}' and '{opt}={val}' give different plans")
        if "{f}" in val and opt != "--output":
            check(same_tree(fa, fb), f"ppcc {opt}: '{opt} {val}' and '{opt}={val}' write different files")
    elif cmp == "stdout":  # the search's own time ("0.01 s") left out
        sa, sb = (re.sub(r"[0-9.]+ s$", "", x.stdout, flags=re.M) for x in (a, b))
        check(sa == sb and sa, f"ppcc {opt}: the two forms print differently:\n{a.stdout[-300:]}\n{b.stdout[-300:]}")
    else:
        check(os.path.exists(pa) and os.path.exists(pb), f"ppcc {opt}: no plan from one of the forms")

# --dump-ir's value is optional: --dump-ir=PASS (glued) and --dump-ir alone
r1 = run([PPCC, M, "--dump-ir=import", "-q", "-o", "d1.plan"])
r2 = run([PPCC, M, "--dump-ir", "-q", "-o", "d2.plan"])
check(r1.returncode == 0 and r1.stdout.startswith("# ir import"), f"--dump-ir=import: {r1.stderr[:200]} {r1.stdout[:100]}")
check(r2.returncode == 0 and "# ir" in r2.stdout, f"--dump-ir: {r2.stderr[:200]}")
r = run([PPCC, M, "--dump-ir", "import", "-q", "-o", "d3.plan"])  # a separate word is the model's place
check(r.returncode == 2 and "unexpected argument 'import'" in r.stderr, f"--dump-ir import: {r.stderr[:200]}")

# ---- pprt: every option in both forms --------------------------------------------------
np.save("labels.npy", np.load(os.path.join(DIGITS, "labels.npy")))
PPRT_ROWS = [
    ("--output", "{f}", [], "out"),
    ("--labels", os.path.join(DIGITS, "labels.npy"), [], "accuracy"),
    ("--depth", "3", [], "out"),
    ("--threads", "1", [], "out"),
    ("--warmup", "0", [], "out"),
    ("--precision", "f32", [], "out"),
    ("--backend", "ref", [], "out"),
    ("--replicas", "2", [], "out"),
    ("--rtol", "1e-3", [], "check"),
    ("--atol", "1e-4", [], "check"),
    ("--expected", os.path.join(DIGITS, "expected"), [], "check"),
    ("--stats-json", "{f}", [], "json"),
    ("--profile", "{f}", [], "json"),
    ("--trace", "{f}", [], "json"),
    ("--input", "input=" + os.path.join(DATA, "input.npy"), ["--no-data"], "out"),
    ("--model", M, ["--plan", "ref.plan"], "out"),
    ("--mpi-timeout", "5", [], "stderr"),
    ("--transport", "mpi", [], "stderr"),
    ("--devices", "0", ["--backend", "cuda-emu"], "out"),
    ("--cuda-graphs", "off", ["--backend", "cuda-emu"], "out"),
    ("--cuda-wide-copies", "off", ["--backend", "cuda-emu"], "out"),
    ("--cuda-conv-fusion", "off", ["--backend", "cuda-emu"], "out"),
    ("--cuda-host-ops", "Conv", ["--backend", "cuda-emu"], "out"),
]
for k, (opt, val, extra, cmp) in enumerate(PPRT_ROWS):
    got = {}
    for form in ("sep", "eq"):
        f = f"r{k}_{form}"
        v = val.replace("{f}", f)
        args = [opt, v] if form == "sep" else [f"{opt}={v}"]
        argv, out = pprt_row_argv(args, extra, f, opt == "--output")
        r = run(argv, timeout=300)
        got[form] = (r, out, f)
        if cmp != "stderr":
            check(r.returncode == 0, f"pprt {opt} ({form}): exit {r.returncode}: {r.stderr.strip()[:300]}")
    (a, oa, fa), (b, ob, fb) = got["sep"], got["eq"]
    if cmp == "out":
        check(same_tree(oa, ob), f"pprt {opt}: the two forms give different outputs")
        if "--backend" not in (opt, *extra):  # another backend's sums may differ in the last bits
            check(same_tree(oa, "r0_sep"), f"pprt {opt}: outputs differ from the plain run's")
        else:
            y, want = np.load(os.path.join(oa, "logits.npy")), np.load(os.path.join("r0_sep", "logits.npy"))
            check(np.allclose(y, want, rtol=1e-4, atol=1e-5), f"pprt {opt}: outputs far from the plain run's")
    elif cmp == "accuracy":
        acc = [[ln for ln in x.stdout.splitlines() if ln.startswith("accuracy:")] for x in (a, b)]
        check(acc[0] and acc[0] == acc[1], f"pprt {opt}: accuracy lines {acc}")
    elif cmp == "check":
        ck = [[ln for ln in x.stdout.splitlines() if "check" in ln.lower()] for x in (a, b)]
        check(ck[0] == ck[1], f"pprt {opt}: check lines differ: {ck}")
    elif cmp == "json":
        ks = []
        for x in (fa, fb):
            try:
                j = json.load(open(x))
                ks.append(sorted(j) if isinstance(j, dict) else type(j).__name__)
            except (OSError, ValueError) as e:
                ks.append(str(e))
        check(ks[0] == ks[1] and not isinstance(ks[0], str), f"pprt {opt}: the files differ in kind: {ks}")
    else:  # both refused the same way (no mpirun here)
        check(a.returncode == b.returncode == 2 and a.stderr == b.stderr,
              f"pprt {opt}: {a.returncode} {b.returncode}: {a.stderr[:200]!r} vs {b.stderr[:200]!r}")

# ---- bad usage: one error line and the try line ----------------------------------------
BAD = [
    ([PPCC, M, "--frobnicate"], "unknown option '--frobnicate'"),
    ([PPCC, M, "--report-jsn", "r.json"], "did you mean --report-json?"),
    ([PPCC, M, "--report-jsn=r.json"], "did you mean --report-json?"),
    ([PPCC, M, "--allow-batch"], "did you mean --allow-batch-mixing?"),
    ([PPCC, M, "--polcy", "flops"], "did you mean --policy?"),
    ([PPCC, M, "-pp", "0"], "-pp needs a stage count"),
    ([PPCC, M, "--pp=0"], "--pp needs a stage count"),
    ([PPCC, M, "--report=1"], "--report takes no value"),
    ([PPCC, M, "--policy=bogus"], "unknown policy 'bogus'"),
    ([PPCC, M, "-o"], "-o needs a file name"),
    ([PPCC, M, "--output"], "--output needs a file name"),
    ([PPCC, M, "extra.onnx"], "unexpected argument 'extra.onnx'"),
    ([PPCC], "no model given"),
    ([PPCC, M, "--search", "--max-batch"], "not both"),
    ([PPCC, M, "--dim", "seq"], "--dim needs NAME=VALUE"),
    ([PPRT, "base.plan", DATA, "--frobnicate"], "unknown option '--frobnicate'"),
    ([PPRT, "base.plan", DATA, "--stat-json", "s.json"], "did you mean --stats-json?"),
    ([PPRT, "base.plan", DATA, "--devics", "0"], "did you mean --devices?"),
    ([PPRT, "base.plan", DATA, "--cuda-graph", "on"], "did you mean --cuda-graphs?"),
    ([PPRT, "base.plan", DATA, "--depth=0"], "--depth needs 1..1024"),
    ([PPRT, "base.plan", DATA, "--check=1"], "--check takes no value"),
    ([PPRT, "base.plan", DATA, "--cuda-sync=yes"], "--cuda-sync takes no value"),
    ([PPRT, "base.plan", DATA, "--cuda-graphs=maybe"], "--cuda-graphs"),
    ([PPRT, "base.plan", DATA, "--backend=nope"], "no such backend"),
    ([PPRT, "base.plan", DATA, "--backend", "cpu-ref"], "did you mean 'ref'?"),  # its former name
    ([PPCC, M, "--placement", "cpu-ref", "-o", "x.plan"], "did you mean 'ref'?"),
    ([PPCC, M, "-pp", "2", "--placement", "0:ref,1:cuda-emo", "-o", "x.plan"], "did you mean 'cuda-emu'?"),
    ([PPRT, "base.plan", DATA, "--precision", "f8"], "--precision needs"),
    ([PPRT, "base.plan", DATA, "extra"], "unexpected argument"),
    ([PPRT], "no plan given"),
]
for argv, want in BAD:
    tool = os.path.basename(argv[0])
    r = run(argv)
    lines = r.stderr.splitlines()
    name = " ".join(os.path.basename(a) for a in argv)
    check(r.returncode == 2, f"{name}: exit {r.returncode}, want 2")
    check(len(lines) == 2 and lines[0].startswith(f"{tool}: error: ") and want in lines[0]
          and lines[1] == f"try '{tool} --help'",
          f"{name}: want '{tool}: error: ...{want}...' and the try line, got {r.stderr[:400]!r}")

# ---- ppcc --dim ------------------------------------------------------------------------
r = run([PPCC, "small.onnx", "--dim", "sq=3", "-o", "dim1.plan"])
check(r.returncode == 2 and "'sq'" in r.stderr and "'batch', 'seq'" in r.stderr and r.stderr.startswith("ppcc: error:"),
      f"--dim sq=3: {r.returncode} {r.stderr[:300]}")
r = run([PPCC, M, "--dim", "seq=3", "-o", "dim2.plan"])
check(r.returncode == 2 and "'batch'" in r.stderr, f"digits --dim seq=3: {r.returncode} {r.stderr[:300]}")
for bad in ("seq=0", "seq=-1"):
    r = run([PPCC, "small.onnx", "--dim", bad, "-o", "dim3.plan"])
    check(r.returncode == 2 and "--dim needs NAME=VALUE" in r.stderr, f"--dim {bad}: {r.returncode} {r.stderr[:300]}")
check(not any(os.path.exists(p) for p in ("dim1.plan", "dim2.plan", "dim3.plan")), "a refused --dim left a plan")

# ---- output paths: refused before any work, nothing left behind --------------------------
os.makedirs("paths", exist_ok=True)
os.chdir("paths")
shutil.copy(M, "m.onnx")
before = sorted(os.listdir("."))
for opt in ("-o", "--output", "--report-json", "--report-html", "--export-stages", "--dump-dot"):
    argv = [PPCC, "m.onnx", "-pp", "2", "-q", "-o", "p.plan", opt, "nodir/x"]
    r = run(argv)
    check(r.returncode == 2 and "'nodir/x'" in r.stderr and "does not exist" in r.stderr and ".tmp" not in r.stderr,
          f"ppcc {opt} nodir/x: {r.returncode} {r.stderr[:300]}")
    check(sorted(os.listdir(".")) == before, f"ppcc {opt} nodir/x left {sorted(set(os.listdir('.')) - set(before))}")
open("afile", "w").close()
before = sorted(os.listdir("."))
r = run([PPCC, "m.onnx", "-pp", "2", "-q", "-o", "p.plan", "--report-json", "r.json", "--export-stages", "afile"])
check(r.returncode == 2 and "afile" in r.stderr, f"--export-stages on a file: {r.returncode} {r.stderr[:300]}")
check(sorted(os.listdir(".")) == before, f"--export-stages on a file left {sorted(set(os.listdir('.')) - set(before))}")
os.symlink("m.onnx", "link.onnx")
for out in ("m.onnx", "./m.onnx", "../paths/m.onnx", "link.onnx", os.path.abspath("m.onnx")):
    r = run([PPCC, "m.onnx", "-q", "-o", out])
    check(r.returncode == 2 and "is the model file" in r.stderr, f"-o {out} (the model): {r.returncode} {r.stderr[:300]}")
    r = run([PPCC, "m.onnx", "-q", "-o", "p.plan", "--report-json", out])
    check(r.returncode == 2 and "is the model file" in r.stderr, f"--report-json {out}: {r.returncode} {r.stderr[:300]}")
check(filecmp.cmp("m.onnx", M, shallow=False), "ppcc -o MODEL changed the model")
check(not os.path.exists("p.plan"), "a refused -o left a plan")
before = sorted(os.listdir("."))
for opt in ("--stats-json", "--profile", "--trace", "-o", "--output"):
    r = run([PPRT, "../base.plan", DATA, opt, "nodir/x"])
    check(r.returncode == 2 and "'nodir/x'" in r.stderr and "does not exist" in r.stderr,
          f"pprt {opt} nodir/x: {r.returncode} {r.stderr[:300]}")
    check("throughput" not in r.stdout and "input '" not in r.stdout, f"pprt {opt} nodir/x: ran first: {r.stdout[:200]}")
    check(sorted(os.listdir(".")) == before, f"pprt {opt} nodir/x left {sorted(set(os.listdir('.')) - set(before))}")
os.chdir("..")

# ---- pprt --info's options compile the same plan again -------------------------------------
def info_options(plan):
    r = run([PPRT, "--info", plan])
    line = r.stdout.splitlines()[0] if r.stdout else ""
    return line.split("options: ", 1)[1] if "options: " in line else None


CASES = [
    (M, []),
    (M, ["-pp", "2"]),
    (M, ["--pp=3", "-b", "4", "--policy", "flops"]),
    (M, ["-pp", "2", "--gflops", "0:33.3,1:12", "--mem-gbps=7.25", "--max-memory", "100MB", "--reserve", "1KB"]),
    (M, ["-pp", "2", "--placement", "0:ref,1:ref", "--devices-per-host", "1", "--net-gbps", "0.1"]),
    (M, ["-pp", "2", "--split-at", "stem.conv2", "--depth", "3", "--disable-pass", "fuse"]),
    (M, ["-pp", "2", "--ref-weights"]),
    ("small.onnx", ["-pp", "2", "--dim", "seq=5"]),
    ("small.onnx", ["-pp", "3", "-b", "3", "--dim=seq=7", "--allow-batch-mixing"]),
    ("const.onnx", ["-b", "2", "--const", "s=s.pb"]),
]
for k, (model, args) in enumerate(CASES):
    r = run([PPCC, model] + args + ["-q", "-o", f"rt{k}a.plan"])
    check(r.returncode == 0, f"round trip {args}: {r.stderr[:300]}")
    opts = info_options(f"rt{k}a.plan")
    check(opts is not None, f"round trip {args}: no options line")
    if opts is None:
        continue
    check(os.path.abspath(".") not in opts and "s.pb" not in opts, f"round trip {args}: a path in '{opts}'")
    again = shlex.split(opts.replace("=(file)", "=s.pb"))
    r = run([PPCC, model] + again + ["-q", "-o", f"rt{k}b.plan"])
    check(r.returncode == 0, f"round trip {args}: '{opts}' does not compile: {r.stderr[:300]}")
    check(same_tree(f"rt{k}a.plan", f"rt{k}b.plan"), f"round trip {args}: '{opts}' compiles another plan")
    check(info_options(f"rt{k}b.plan") == opts, f"round trip {args}: the options line changed")
opts = info_options("rt0a.plan") or ""
check(" -b " not in opts, f"a plan compiled without -b records '{opts}'")

# ---- help ---------------------------------------------------------------------------------
for tool, first, want in ((PPCC, ["-pp", "-o", "-b"], ["--help", "--version", "--output", "--pp", "=VALUE"]),
                          (PPRT, ["DATA_DIR", "-o"], ["--help", "--version", "--output", "=VALUE"])):
    r = run([tool, "--help"])
    check(r.returncode == 0, f"{tool} --help: exit {r.returncode}")
    for w in want:
        check(w in r.stdout, f"{os.path.basename(tool)} --help does not list {w}")
    lines = [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]
    check(lines[:len(first)] == first, f"{os.path.basename(tool)} --help: the first options are {lines[:4]}, want {first}")

finish("cli")
