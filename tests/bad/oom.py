#!/usr/bin/env python3
"""Out of memory is a clean failure (issue 23): ppcc and pprt (every backend)
under an address-space limit (ulimit -v, set in the child before exec) exit 0
with the right outputs, or 1 with a message that says what could not be
allocated and how much (and the stage, once stages run), never a signal: no
std::bad_alloc escaping oneDNN, no SIGSEGV in its JIT.

A small CNN made here (six convolutions, pools, a residual add, a Gemm:
several oneDNN kernels), -pp 2, swept from a limit where nothing fits up to
three limits in a row that run; then the digits sample. ASan reserves
terabytes of shadow memory, so under ASan the limits cannot be set and the
test is skipped (exit 77). About 20 s. Usage: oom.py WORKDIR (env: PPCC,
PPRT, SRC)."""
import os
import re
import resource
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
work = sys.argv[1]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)


def sanitized(exe):
    r = subprocess.run(["ldd", exe], capture_output=True, text=True)
    return "libasan" in r.stdout or "libtsan" in r.stdout


if sanitized(PPRT) or sanitized(PPCC):
    print("oom: a sanitizer build cannot run under ulimit -v (ASan maps terabytes of shadow); skipped")
    sys.exit(77)

failures = []
runs = 0
# what a clean out-of-memory message says: what failed, with a size
OOM = re.compile(r"(out of memory|cannot allocate|Cannot allocate memory|cannot start its thread|cannot get \d+ bytes)")
SIZE = re.compile(r"\d+(\.\d+)? ?(bytes|MiB)|\d{4,}[- ]byte|cannot get \d+ bytes")


def limited(limit_mb):
    def set_limit():
        b = limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return set_limit


def run_limited(argv, limit_mb):
    global runs
    runs += 1
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=limited(limit_mb))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, -999, "", "hung (120 s)")


def judge(tag, r, limit_mb, staged):
    """exit 0, or 1 with a clean out-of-memory message; never a signal."""
    err = r.stderr.strip()
    if r.returncode == 0:
        return True
    ok = r.returncode == 1 and OOM.search(err) and SIZE.search(err)
    # past loading, the message names the stage whose allocation failed
    if ok and staged and re.search(r"node '|arena|scratch|first micro-batch|its thread", err):
        ok = re.search(r"stage \d", err) is not None
    if not ok:
        failures.append(f"{tag} at {limit_mb} MiB: exit {r.returncode}: {err[-400:]!r}")
    return False


def loadable(exe):
    """The least limit (2 MiB steps) at which exe starts at all: below it the
    dynamic loader cannot map the shared libraries (exit 127, before main)."""
    lim = 4
    while subprocess.run([exe, "--version"], capture_output=True, preexec_fn=limited(lim)).returncode != 0:
        lim += 2
        if lim > 2048:
            failures.append(f"{exe} --version does not run under 2 GiB")
            break
    return lim


def sweep(tag, argv, start_mb, step_mb, check=None, staged=True):
    """Raise the limit from start_mb until three runs in a row succeed."""
    lim, good, first_ok = start_mb, 0, None
    while good < 3 and lim < 4096:
        for out in [a for a in argv if a.startswith("out_")]:
            shutil.rmtree(out, ignore_errors=True)
        r = run_limited(argv, lim)
        if judge(tag, r, lim, staged):
            good += 1
            first_ok = first_ok or lim
            if check:
                check(tag, lim)
        else:
            good = 0
        lim += step_mb
    if good < 3:
        failures.append(f"{tag}: never ran under limits up to {lim} MiB")
    return first_ok


# ---- the model ------------------------------------------------------------------------------
rng = np.random.default_rng(6)
F = TensorProto.FLOAT


def conv(name, x, cin, cout, k, stride, inits, nodes):
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    inits += [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_c"], name=f"/{name}/Conv",
                                  pads=[k // 2] * 4, strides=[stride, stride]))
    nodes.append(helper.make_node("Relu", [name + "_c"], [name], name=f"/{name}/Relu"))
    return name


inits, nodes = [], []
h = conv("c1", "x", 3, 32, 3, 1, inits, nodes)
h = conv("c2", h, 32, 64, 3, 2, inits, nodes)
r = conv("c3", h, 64, 64, 3, 1, inits, nodes)
r = conv("c4", r, 64, 64, 3, 1, inits, nodes)
nodes.append(helper.make_node("Add", [h, r], ["res"], name="/res/Add"))
nodes.append(helper.make_node("MaxPool", ["res"], ["mp"], name="/mp/MaxPool", kernel_shape=[2, 2], strides=[2, 2]))
h = conv("c5", "mp", 64, 128, 3, 1, inits, nodes)
h = conv("c6", h, 128, 256, 1, 1, inits, nodes)
nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"], name="/gap"))
nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="/flat"))
fw = (rng.standard_normal((10, 256)) / 16).astype(np.float32)
inits.append(numpy_helper.from_array(fw, "fc_w"))
nodes.append(helper.make_node("Gemm", ["flat", "fc_w"], ["y"], name="/fc/Gemm", transB=1))
g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", F, ["n", 3, 32, 32])],
                      [helper.make_tensor_value_info("y", F, ["n", 10])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "cnn.onnx")
os.makedirs("data")
np.save("data/x.npy", rng.standard_normal((8, 3, 32, 32)).astype(np.float32))

# ppcc under limits: a plan or a clean failure (its plan written whole or not at all)
sweep("ppcc", [PPCC, "cnn.onnx", "-pp", "2", "-b", "2", "-q", "-o", "lim.plan"], loadable(PPCC), 4, staged=False)
subprocess.run([PPCC, "cnn.onnx", "-pp", "2", "-b", "2", "-q", "-o", "cnn.plan"], check=True)
digits = os.path.join(SRC, "samples/digits")
subprocess.run([PPCC, os.path.join(digits, "model.onnx"), "-pp", "2", "-b", "16", "-q", "-o", "digits.plan"], check=True)

backends = [["--backend", "ref"]]
if subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0:
    backends.append(["--backend", "dnnl"])
firsts = []
pprt_min = loadable(PPRT)
for bk in backends:
    for plan, data, out in (("cnn.plan", "data", "y.npy"), ("digits.plan", os.path.join(digits, "data"), "logits.npy")):
        tag = f"pprt {bk[1]} {plan}"
        want_dir = f"want_{bk[1]}_{plan}"
        r = subprocess.run([PPRT, plan, data, "-o", want_dir, "-q"] + bk, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{tag} without a limit: exit {r.returncode}: {r.stderr[-300:]}")
            continue
        want = open(os.path.join(want_dir, out), "rb").read()

        def same(tag, lim, want=want, out=out):
            got_path = os.path.join("out_lim", out)
            if not os.path.exists(got_path) or open(got_path, "rb").read() != want:
                failures.append(f"{tag} at {lim} MiB: exit 0 but outputs differ from the unlimited run's")

        first = sweep(tag, [PPRT, plan, data, "-o", "out_lim", "-q"] + bk, pprt_min, 6, check=same)
        firsts.append(f"{bk[1]} {plan} from {first} MiB")

print(f"oom: {runs} runs under limits; {len(failures)} failures; ran: " + ", ".join(firsts))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
