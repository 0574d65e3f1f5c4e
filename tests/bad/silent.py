#!/usr/bin/env python3
"""Input that used to give a silent wrong answer (exit 0) now gives the right
one or a clean refusal (issue 23):

  - names that collide as file names ('y:0' and 'y_0' are both y_0.npy):
    ppcc refuses them (exit 2, naming both), for outputs and for inputs;
    names that do not collide keep their own files, each right;
  - an initializer that the model also lists as a graph input: ppcc freezes
    it (warning from IR version 4 on, where ONNX makes it a default), pprt
    refuses data for it (exit 2) where onnxruntime would use the data, and
    ppcc --const NAME=FILE.pb compiles in the value onnxruntime is fed: the
    outputs equal onnxruntime's in both cases;
  - --labels with a class out of range (10 of 10 classes, -1, 2^40): exit 2
    before the run, no outputs written.

Each case runs in well under a second (about 5 s in all, ASan build ~15 s).
Usage: silent.py WORKDIR (env: PPCC, PPRT)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
F = TensorProto.FLOAT
ort.set_default_logger_severity(3)
failures = []
count = 0


def run(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, -1, "", "hung (120 s)")


def expect(name, argv, want, code=2):
    """argv must exit with `code`, stderr containing every string of `want`."""
    global count
    count += 1
    r = run(argv)
    bad = [w for w in ("Sanitizer", "runtime error:", "Segmentation", "Aborted") if w in r.stderr]
    want = [want] if isinstance(want, str) else want
    if r.returncode != code or any(w not in r.stderr for w in want) or bad:
        failures.append(f"{name}: exit {r.returncode} (want {code}), stderr {r.stderr.strip()[:500]!r} "
                        f"(want {want!r})")
    return r


def save(path, nodes, inputs, outputs, inits=(), ir_version=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = ir_version
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def close(name, got, want, tol=1e-6):
    global count
    count += 1
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        failures.append(f"{name}: outputs differ from onnxruntime's: {got.ravel()[:6]} vs {want.ravel()[:6]}")


rng = np.random.default_rng(23)
x = rng.standard_normal((5, 4)).astype(np.float32)
os.makedirs("xd")
np.save("xd/x.npy", x)
vi = helper.make_tensor_value_info

# ---- names that collide as file names ----------------------------------------------------
outs = save("outs.onnx", [helper.make_node("Relu", ["x"], ["y:0"]), helper.make_node("Neg", ["x"], ["y_0"])],
            [vi("x", F, ["n", 4])], [vi("y:0", F, ["n", 4]), vi("y_0", F, ["n", 4])])
expect("outputs y:0 and y_0", [PPCC, outs, "-o", "outs.plan"],
       ["graph outputs 'y:0' and 'y_0' would both be written to the file 'y_0.npy'"])
ins = save("ins.onnx", [helper.make_node("Sub", ["a:0", "a_0"], ["y"])],
           [vi("a:0", F, ["n", 4]), vi("a_0", F, ["n", 4])], [vi("y", F, ["n", 4])])
expect("inputs a:0 and a_0", [PPCC, ins, "-o", "ins.plan"],
       ["graph inputs 'a:0' and 'a_0' would both be read from the file 'a_0.npy'"])
# names that map to distinct files: each output in its own file, each right
fine = save("fine.onnx", [helper.make_node("Relu", ["x:0"], ["y:0"]), helper.make_node("Neg", ["x:0"], ["y:1"])],
            [vi("x:0", F, ["n", 4])], [vi("y:0", F, ["n", 4]), vi("y:1", F, ["n", 4])])
r = run([PPCC, fine, "-o", "fine.plan", "-q"])
os.makedirs("fd")
np.save("fd/x_0.npy", x)
r2 = run([PPRT, "fine.plan", "fd", "-o", "fine_out", "-q"]) if r.returncode == 0 else r
if r2.returncode != 0:
    failures.append(f"distinct ':' names: exit {r2.returncode}: {r2.stderr.strip()[:300]}")
else:
    want = ort_run(fine, {"x:0": x})
    close("y:0 in y_0.npy", np.load("fine_out/y_0.npy"), want[0])
    close("y:1 in y_1.npy", np.load("fine_out/y_1.npy"), want[1])

# ---- an initializer also listed as a graph input -----------------------------------------
w = rng.standard_normal(4).astype(np.float32)
w_fed = rng.standard_normal(4).astype(np.float32)
for irv in (3, 8):
    path = save(f"frozen{irv}.onnx", [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                [vi("x", F, ["n", 4]), vi("w", F, [4])], [vi("y", F, ["n", 4])], [numpy_helper.from_array(w, "w")],
                ir_version=irv)
    r = run([PPCC, path, "-o", f"frozen{irv}.plan"])
    warned = "graph input 'w' also has an initializer" in r.stderr
    count += 1
    if r.returncode != 0 or warned != (irv >= 4):
        failures.append(f"IR {irv}: ppcc exit {r.returncode}, warning {'given' if warned else 'missing'} "
                        f"(want one only from IR 4 on): {r.stderr.strip()[:300]}")
        continue
    # no data for w: the model's value, as onnxruntime uses when w is not fed
    r = run([PPRT, f"frozen{irv}.plan", "xd", "-o", f"fo{irv}", "-q"])
    if r.returncode != 0:
        failures.append(f"IR {irv}: pprt without data for w: exit {r.returncode}: {r.stderr.strip()[:300]}")
    else:
        close(f"IR {irv}: frozen default", np.load(f"fo{irv}/y.npy"), ort_run(path, {"x": x})[0])
    # data for w: onnxruntime uses it (IR >= 4) or refuses it (IR 3); pprt refuses, in both layouts
    if irv >= 4:
        close("onnxruntime uses a fed default", ort_run(path, {"x": x, "w": w_fed})[0],
              np.maximum(x * w_fed, 0))
    os.makedirs(f"wd{irv}")
    np.save(f"wd{irv}/x.npy", x)
    np.save(f"wd{irv}/w.npy", w_fed)
    expect(f"IR {irv}: w.npy given", [PPRT, f"frozen{irv}.plan", f"wd{irv}", "-o", f"fw{irv}"],
           [f"wd{irv}/w.npy holds data for 'w'", "ppcc --const w=FILE.pb"])
    os.makedirs(f"pd{irv}")
    for k, (name, a) in enumerate((("x", x), ("w", w_fed))):
        with open(f"pd{irv}/input_{k}.pb", "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())
    expect(f"IR {irv}: input_1.pb names w", [PPRT, f"frozen{irv}.plan", f"pd{irv}", "-o", f"fw{irv}"],
           [f"input_1.pb holds data for 'w'"])
    count += 1
    if os.path.exists(f"fw{irv}"):
        failures.append(f"IR {irv}: a refused run wrote outputs")
    # --const w=FILE.pb: the value onnxruntime is fed
    r = run([PPCC, path, "--const", f"w=pd{irv}/input_1.pb", "-o", f"fc{irv}.plan", "-q"])
    r = run([PPRT, f"fc{irv}.plan", "xd", "-o", f"fc{irv}", "-q"]) if r.returncode == 0 else r
    if r.returncode != 0:
        failures.append(f"IR {irv}: --const w: exit {r.returncode}: {r.stderr.strip()[:300]}")
    else:
        close(f"IR {irv}: --const w", np.load(f"fc{irv}/y.npy"), np.maximum(x * w_fed, 0))
        if irv >= 4:
            close(f"IR {irv}: --const w vs onnxruntime", np.load(f"fc{irv}/y.npy"),
                  ort_run(path, {"x": x, "w": w_fed})[0])
# a frozen input whose file name collides with an input's: refused at compile time
path = save("frozen_coll.onnx", [helper.make_node("Add", ["w_0", "w:0"], ["y"])],
            [vi("w_0", F, ["n", 4]), vi("w:0", F, [4])], [vi("y", F, ["n", 4])], [numpy_helper.from_array(w, "w:0")])
expect("frozen w:0 and input w_0", [PPCC, path, "-o", "fcoll.plan", "-q"], "'w_0' and 'w:0' would both be read")

# ---- --labels out of range ---------------------------------------------------------------
cls = save("cls.onnx", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, ["n", 4])], [vi("y", F, ["n", 4])])
run([PPCC, cls, "-o", "cls.plan", "-q"])
for tag, labels, want in (("= classes", np.array([0, 1, 2, 3, 4], np.int64), "label 4 is class 4, expected 0..3"),
                          ("-1", np.array([0, -1, 2, 3, 1], np.int64), "label 1 is class -1, expected 0..3"),
                          ("2^40", np.array([0, 1, 1 << 40, 3, 1], np.int64), "label 2 is class 1099511627776"),
                          ("int32 -1", np.array([-1, 1, 2, 3, 1], np.int32), "label 0 is class -1")):
    np.save("labels.npy", labels)
    expect(f"--labels {tag}", [PPRT, "cls.plan", "xd", "-o", "lab_out", "--labels", "labels.npy"], want)
count += 1
if os.path.exists("lab_out"):
    failures.append("--labels out of range: the refused run wrote outputs")
np.save("labels.npy", np.array([0, 1, 2, 3, 0], np.int64))
r = run([PPRT, "cls.plan", "xd", "-o", "lab_ok", "--labels", "labels.npy"])
top1 = (np.argmax(np.maximum(x, 0), axis=1) == np.array([0, 1, 2, 3, 0])).sum()
count += 1
if r.returncode != 0 or f"({top1}/5, top-1" not in r.stdout:
    failures.append(f"--labels in range: exit {r.returncode}, want {top1}/5: {r.stdout.strip()[-200:]} {r.stderr.strip()[:200]}")

print(f"silent: {count - len(failures)}/{count} cases right")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
