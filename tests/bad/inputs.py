#!/usr/bin/env python3
"""Inputs a user cannot get wrong: each file feeds an input by name only
(issue 52). About 5 s.

A two-input plan, y = a - 2 b (a swap or a double feed changes every value),
and a one-input plan, y = 3 x, fed in every way pprt takes and every way it
must refuse:
- NAME.npy per input; one .npz whose keys are input names (np.savez and
  np.savez_compressed; the .npz given as the data itself); --input NAME=PATH
  (a .npy, FILE.npz:KEY) with and without a folder: the right outputs, against
  NumPy, and the mapping pprt prints ("input 'a' <- PATH (f32 [...])") and
  records in --stats-json;
- tokens.npy + mask.npy (named after no input), a.npy + am.npy, a missing
  file, an extra file, an .npz with an extra key, two sources for one
  input, --input for an input the plan lacks, a damaged .npz: exit 2 naming
  the culprit, and no output folder left behind; --ignore-extra runs;
- a one-input plan: the folder's only .npy whatever its name; one file per
  sample stacked in natural order (img2 before img10); --labels' file in the
  data folder is not taken for data;
- a graph input that also has an initializer (ppcc freezes it): data for it
  refused naming ppcc --const;
- outputs with NaN or infinity where no input had any: a warning naming the
  output and the counts; none when an input held a NaN.

Usage: inputs.py WORKDIR (env: PPCC, PPRT)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, finish, start  # noqa: E402

work = sys.argv[1]
start(work, "inputs")
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
rng = np.random.default_rng(52)


def save(path, nodes, ins, outs, inits=(), ir=8):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = ir
    onnx.save(m, path)


N = ["n", 4]
save("two.onnx", [helper.make_node("Mul", ["b", "two"], ["b2"]), helper.make_node("Sub", ["a", "b2"], ["y"])],
     [("a", N), ("b", N)], [("y", N)], [numpy_helper.from_array(np.float32(2), "two")])
save("one.onnx", [helper.make_node("Mul", ["x", "three"], ["y"])], [("x", N)], [("y", N)],
     [numpy_helper.from_array(np.float32(3), "three")])
for m in ("two", "one"):
    subprocess.run([PPCC, f"{m}.onnx", "-b", "2", "-q", "-o", f"{m}.plan"], check=True)
A = rng.standard_normal((5, 4)).astype(np.float32)
B = rng.standard_normal((5, 4)).astype(np.float32)
WANT = A - 2 * B


def folder(name, files):
    d = os.path.join(work, name)
    os.makedirs(d)
    for f, a in files.items():
        if f.endswith(".npz"):
            (np.savez_compressed if "comp" in f else np.savez)(os.path.join(d, f), **a)
        else:
            np.save(os.path.join(d, f), a)
    return d


def pprt(plan, data, *extra):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    argv = [PPRT, plan] + ([data] if data else []) + ["-o", out, *extra]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    y = np.load(os.path.join(out, "y.npy")) if r.returncode == 0 and os.path.exists(os.path.join(out, "y.npy")) else None
    return r, y, os.path.exists(out)


def runs(what, plan, data, want, *extra, mapping=()):
    r, y, _ = pprt(plan, data, *extra)
    check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    if r.returncode == 0:
        check(y is not None and np.array_equal(y, want), f"{what}: wrong outputs (a swap or a double feed?)")
        for line in mapping:
            check(line in r.stdout, f"{what}: the mapping line {line!r} is not in the output: {r.stdout[:600]!r}")
    return r


def refused(what, plan, data, texts, *extra):
    r, _, left = pprt(plan, data, *extra)
    ok = r.returncode == 2 and all(t in r.stderr for t in texts)
    check(ok, f"{what}: exit {r.returncode} (want 2), stderr {r.stderr.strip()[-400:]!r}, want {texts}")
    check(not left, f"{what}: refused, but an output folder was left behind")
    check("Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2,
          f"{what}: more than a message: {r.stderr[-400:]!r}")


# ---- the ways that work ----
d = folder("named", {"a.npy": A, "b.npy": B})
r = runs("NAME.npy", "two.plan", d, WANT, "--stats-json", "s.json",
         mapping=(f"input 'a' <- {d}/a.npy (f32 [5,4])", f"input 'b' <- {d}/b.npy (f32 [5,4])"))
if r.returncode == 0:
    st = json.load(open("s.json"))
    check([(i["name"], i["from"], i["dtype"], i["shape"]) for i in st.get("inputs", [])] ==
          [("a", f"{d}/a.npy", "f32", "[5,4]"), ("b", f"{d}/b.npy", "f32", "[5,4]")],
          f"--stats-json inputs: {st.get('inputs')}")
r, _, _ = pprt("two.plan", d, "-q")
check(r.returncode == 0 and "<-" not in r.stdout, f"-q still prints the mapping: {r.stdout!r}")
for kind in ("plain.npz", "comp.npz"):
    d = folder("npz_" + kind[:-4], {kind: {"b": B, "a": A}})
    runs(f"one {kind} in a folder", "two.plan", d, WANT, mapping=(f"input 'a' <- {d}/{kind}:a",))
    runs(f"{kind} as the data", "two.plan", os.path.join(d, kind), WANT)
d = folder("bind", {"x1.npy": A, "arch.npz": {"bb": B}})
runs("--input without a folder", "two.plan", None, WANT, "--input", f"a={d}/x1.npy", "--input", f"b={d}/arch.npz:bb",
     mapping=(f"input 'b' <- {d}/arch.npz:bb",))
d2 = folder("half", {"b.npy": B})
runs("--input beside a folder", "two.plan", d2, WANT, "--input", f"a={d}/x1.npy")

# ---- the ways that must be refused, naming the culprit ----
d = folder("swap", {"tokens.npy": A, "mask.npy": B})
refused("files named after no input", "two.plan", d, ["no data for input 'a'", f"{d}/a.npy", "mask.npy, tokens.npy"])
d = folder("double", {"a.npy": A, "am.npy": B})
refused("a.npy + am.npy", "two.plan", d, ["no data for input 'b'", "am.npy"])
d = folder("missing", {"a.npy": A})
refused("a missing file", "two.plan", d, ["no data for input 'b'", f"{d}/b.npy"])
d = folder("extra", {"a.npy": A, "b.npy": B, "token_type_ids.npy": A})
refused("an extra file", "two.plan", d, ["token_type_ids.npy", "feeds no input", "--ignore-extra"])
runs("an extra file, --ignore-extra", "two.plan", d, WANT, "--ignore-extra")
d = folder("extra_key", {"x.npz": {"a": A, "b": B, "c": A}})
refused("an .npz with an extra key", "two.plan", d, ["'c'", "match no input"])
d = folder("two_sources", {"a.npy": A, "b.npy": B, "x.npz": {"a": A}})
refused("two sources for one input", "two.plan", d, ["both give data for input 'a'"])
d = folder("bind_and_file", {"a.npy": A, "b.npy": B})
refused("--input and NAME.npy", "two.plan", d, ["both give data for input 'a'"], "--input", f"a={d}/b.npy")
refused("--input for no input", "two.plan", d, ["--input z=", "no input 'z'", "a, b"], "--input", f"z={d}/a.npy")
d = folder("damaged", {"x.npz": {"a": A, "b": B}})
with open(os.path.join(d, "x.npz"), "r+b") as f:
    f.truncate(os.path.getsize(os.path.join(d, "x.npz")) - 30)
refused("a damaged .npz", "two.plan", d, [f"{d}/x.npz"])
with open(os.path.join(d, "x.npz"), "wb") as f:
    f.write(rng.integers(0, 256, 4000).astype(np.uint8).tobytes())
refused("an .npz of random bytes", "two.plan", d, [f"{d}/x.npz", "not an .npz"])

# ---- a one-input plan ----
d = folder("only", {"whatever.npy": A})
runs("the folder's only .npy", "one.plan", d, 3 * A, mapping=(f"input 'x' <- {d}/whatever.npy (the folder's only",))
d = folder("samples", {f"img{k}.npy": A[k % 5][None] + k for k in range(1, 13)})
want = np.stack([A[k % 5] + k for k in range(1, 13)]) * 3
runs("one file per sample, natural order", "one.plan", d, want, mapping=("natural order: img1.npy .. img12.npy",))
d = folder("labels_here", {"x.npy": A, "labels.npy": np.zeros(5, np.int64)})
refused("labels.npy in the folder without --labels", "one.plan", d, ["labels.npy", "feeds no input"])

# ---- a graph input with an initializer: frozen by ppcc, data for it refused ----
save("frozen.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [("x", N), ("w", [4])], [("y", N)],
     [numpy_helper.from_array(np.ones(4, np.float32), "w")])
r = subprocess.run([PPCC, "frozen.onnx", "-b", "2", "-o", "frozen.plan"], capture_output=True, text=True)
check(r.returncode == 0 and "'w'" in r.stderr, f"ppcc on a graph input with an initializer: {r.stderr.strip()}")
d = folder("frozen", {"x.npy": A, "w.npy": np.zeros(4, np.float32)})
refused("data for a frozen input", "frozen.plan", d, ["'w'", "--const w=FILE.pb"])
refused("--input for a frozen input", "frozen.plan", folder("frozen2", {"x.npy": A}), ["'w'", "--const"],
        "--input", f"w={d}/w.npy")

# ---- NaN and infinity in outputs where no input had any ----
save("log.onnx", [helper.make_node("Log", ["x"], ["y"])], [("x", N)], [("y", N)])
subprocess.run([PPCC, "log.onnx", "-b", "2", "-q", "-o", "log.plan"], check=True)
X = np.abs(A) + 0.5
X[1, 2], X[3, 0], X[4, 1] = -1.0, 0.0, -2.0
d = folder("nan_out", {"x.npy": X})
r, y, _ = pprt("log.plan", d)
check(r.returncode == 0 and "output 'y' holds 2 NaN and 1 infinite value of 20" in r.stderr,
      f"NaN in the output: exit {r.returncode}, stderr {r.stderr.strip()!r}")
X[0, 0] = np.nan
d = folder("nan_in", {"x.npy": X})
r, y, _ = pprt("log.plan", d)
check(r.returncode == 0 and "warning" not in r.stderr, f"NaN in the input too: a warning anyway: {r.stderr.strip()!r}")

finish("inputs")
