#!/usr/bin/env python3
"""A ppcc --ref-weights plan whose model file changes while pprt runs
(issue 23): cut short (pprt read past the new end: SIGBUS, turned into a
clean error) or overwritten with zeros in place. Either way pprt must exit 1
naming the file, and write no output under its final name (nor leave a
temporary one); an unchanged file gives outputs that match numpy.

The run is caught in the middle deterministically: pprt is stopped (SIGSTOP)
as soon as its stage threads exist, the file is changed, and pprt continued.
Both backends (the reference kernels read the mapped weights on every
micro-batch; oneDNN reads them at create and, for some, on its own threads).
About 10 s (release), 40 s under ASan. Usage: ref_changed.py WORKDIR
(env: PPCC, PPRT)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []
count = 0

# an MLP of four 512x512 layers (1 MiB each: referenced, not copied), -pp 2
rng = np.random.default_rng(7)
D, L, N = 512, 4, 3072
ws = [(rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32) for _ in range(L)]
nodes, prev = [], "x"
for i in range(L):
    nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
    nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i}"]))
    prev = f"h{i}"
nodes[-1].output[0] = "y"
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", D])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", D])],
                      [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(ws)])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
# every weight 64-byte aligned in the file, so that pprt reads it there on
# every micro-batch (a misaligned one is copied when the stage is built):
# then cutting the file short makes a kernel read past its end (SIGBUS).
# The graph's name pads the first weight, each weight's doc_string the next.
for _ in range(50):
    model_bytes = model.SerializeToString()
    offs = [model_bytes.index(w.tobytes()[:64]) for w in ws]
    bad = [i for i, o in enumerate(offs) if o % 64]
    if not bad:
        break
    i = bad[0]
    if i == 0:
        model.graph.name += "_" * (64 - offs[0] % 64)
    else:
        t = model.graph.initializer[i - 1]
        t.doc_string += "_" * (64 - offs[i] % 64)
else:
    print("FAIL: could not align the weights in the model file")
    sys.exit(1)
os.makedirs("data")
x = rng.standard_normal((N, D)).astype(np.float32)
np.save("data/x.npy", x)
want = x
for w in ws:
    want = np.maximum(want @ w, 0)


def restore():
    with open("model.onnx", "wb") as f:
        f.write(model_bytes)


restore()
r = subprocess.run([PPCC, "model.onnx", "-pp", "2", "-b", "64", "--ref-weights", "-q", "-o", "ref.plan"],
                   capture_output=True, text=True)
if r.returncode != 0:
    print("FAIL: ppcc --ref-weights:", r.stderr)
    sys.exit(1)
backends = [["--backend", "ref"]]
if "--backend" in subprocess.run([PPRT, "--help"], capture_output=True, text=True).stdout and \
        subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0:
    backends.append(["--backend", "dnnl"])


def threads(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def change_mid_run(tag, backend, change):
    """Run pprt, stop it once its stage threads run, change the model file,
    continue it: it must exit 1 naming the file, with no outputs."""
    global count
    count += 1
    restore()
    out = f"out_{tag}"
    p = subprocess.Popen([PPRT, "ref.plan", "data", "-o", out, "-q", "--no-pin"] + backend,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    caught = False
    deadline = time.time() + 120
    while p.poll() is None and time.time() < deadline:
        if threads(p.pid) >= 3:  # the main thread and both stage threads: the run is on
            os.kill(p.pid, signal.SIGSTOP)
            caught = threads(p.pid) >= 3
            change()
            os.kill(p.pid, signal.SIGCONT)
            break
        time.sleep(0.001)
    try:
        _, err = p.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        p.kill()
        failures.append(f"{tag}: hung")
        return
    if not caught:
        failures.append(f"{tag}: the run ended before it could be stopped (exit {p.returncode}); raise N")
        return
    left = os.listdir(out) if os.path.isdir(out) else []
    bad = [w for w in ("Sanitizer", "runtime error:", "Segmentation", "Bus error") if w in err]
    if p.returncode != 1 or "model.onnx" not in err or "no outputs are written" not in err or bad or left:
        failures.append(f"{tag}: exit {p.returncode} (want 1 naming model.onnx), files {left}, "
                        f"stderr {err.strip()[:400]!r}")
    print(f"  {tag}: exit {p.returncode}: {err.strip()[:200]}")
    return err


def truncate():
    os.truncate("model.onnx", len(model_bytes) // 3)


def zeros():
    m = bytearray(model_bytes)
    at = model_bytes.index(ws[1].tobytes()[:64])
    m[at:at + ws[1].nbytes] = bytes(ws[1].nbytes)
    with open("model.onnx", "r+b") as f:  # in place: the same file, as a careless copy would
        f.write(m)


for backend in backends:
    name = backend[1]
    err = change_mid_run(f"{name}: cut short", backend, truncate)
    # the reference kernels read the (aligned) weights in place on every
    # micro-batch: the read past the end is what pprt reports
    if name == "ref" and err is not None and "was cut short while pprt read it" not in err:
        failures.append(f"ref: cut short: the message does not say a read failed: {err.strip()[:300]!r}")
    change_mid_run(f"{name}: overwritten with zeros", backend, zeros)
    # unchanged: exit 0 and numpy's answer
    count += 1
    restore()
    r = subprocess.run([PPRT, "ref.plan", "data", "-o", f"ok_{name}", "-q"] + backend,
                       capture_output=True, text=True)
    if r.returncode != 0 or not np.allclose(np.load(f"ok_{name}/y.npy"), want, rtol=1e-3, atol=1e-4):
        failures.append(f"{name}: unchanged file: exit {r.returncode}, {r.stderr.strip()[:300]!r}")

print(f"ref_changed: {count - len(failures)}/{count} cases right ({', '.join(b[1] for b in backends)})")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
