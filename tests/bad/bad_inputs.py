#!/usr/bin/env python3
"""Bad input, handled cleanly: every case must make ppcc or pprt exit with
code 2 and print a message containing the expected words (naming the culprit),
never crash (a sanitizer report, a signal) or hang.

The bad ONNX models are built here with the onnx package's helpers; the
truncated and corrupted files are cut from the bundled digits sample and a plan
compiled from it. Usage: bad_inputs.py WORKDIR (env: PPCC, PPRT, SRC)."""
import os
import subprocess
import sys

import numpy as np

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
DIGITS = os.path.join(SRC, "samples/digits")
failures = []
count = 0


def expect(name, argv, want, code=2):
    """Run argv; it must exit with `code` and stderr must contain `want`."""
    global count
    count += 1
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        failures.append(f"{name}: hung (60 s)")
        return
    err = r.stderr
    bad = [w for w in ("Sanitizer", "runtime error:", "Segmentation", "Aborted") if w in err]
    if r.returncode != code or want not in err or bad:
        failures.append(f"{name}: exit {r.returncode} (want {code}), stderr: {err.strip()[:400]!r}"
                        f" (want text {want!r})")


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---- ppcc: files that are not (whole) ONNX models ------------------------------------
model = open(os.path.join(DIGITS, "model.onnx"), "rb").read()
expect("text file", [PPCC, write("text.onnx", b"hello, I am not a model\n")], "not an ONNX model")
expect("empty file", [PPCC, write("empty.onnx", b"")], "empty")
expect("missing file", [PPCC, "does-not-exist.onnx"], "cannot open")
expect("directory", [PPCC, "."], "not a regular file")
for cut in (1, 7, 64, 1000, 30000, len(model) // 2, len(model) - 1):
    expect(f"truncated at {cut}", [PPCC, write(f"trunc{cut}.onnx", model[:cut]), "-o", "t.plan"],
           "ppcc: error:")
expect("-pp 0", [PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "0"], "-pp needs")
expect("-pp too large", [PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "99", "-o", "x.plan"],
       "more stages than the graph has ops")
expect("unknown option", [PPCC, "--frobnicate"], "unknown option")
expect("unwritable output", [PPCC, os.path.join(DIGITS, "model.onnx"), "-o", "no/such/dir/p.plan"],
       "cannot create")
assert not os.path.exists("t.plan") and not os.path.exists("x.plan"), "a failed compile left a plan"

# ---- ppcc: well-formed protobuf, bad or unsupported models ---------------------------
try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    onnx = None
    print("bad_inputs: onnx not importable, skipping the hand-made bad models", file=sys.stderr)

if onnx is not None:
    F = TensorProto.FLOAT

    def save(name, nodes, inputs, outputs, inits=(), opset=13, domain_opsets=()):
        g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
        ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domain_opsets]
        m = helper.make_model(g, opset_imports=ops)
        m.ir_version = 8
        path = name + ".onnx"
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        return path

    x = helper.make_tensor_value_info("x", F, [1, 4])
    y = helper.make_tensor_value_info("y", F, [1, 4])
    expect("unsupported op", [PPCC, save("softmax", [helper.make_node("Softmax", ["x"], ["y"], name="/head/Softmax")], [x], [y])],
           "node '/head/Softmax' (#0, Softmax): op 'Softmax' is not supported")
    expect("foreign domain", [PPCC, save("msdomain", [helper.make_node("FusedGemm", ["x"], ["y"], name="fg", domain="com.microsoft")],
                                         [x], [y], domain_opsets=[("com.microsoft", 1)])],
           "domain 'com.microsoft' is not supported")
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, [1, 4])])
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    expect("control flow", [PPCC, save("iff", [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=then)],
                                       [x], [y], inits=[cond])], "control flow (If)")
    expect("dangling input", [PPCC, save("dangling", [helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [x], [y])],
           "input 'nowhere' is not a graph input")
    expect("duplicate output", [PPCC, save("dup", [helper.make_node("Relu", ["x"], ["y"], name="a"),
                                                   helper.make_node("Relu", ["x"], ["y"], name="b")], [x], [y])],
           "'y' is defined twice")
    bad_raw = helper.make_tensor("w", F, [4], np.zeros(4, np.float32).tobytes(), raw=True)
    bad_raw.raw_data = np.zeros(3, np.float32).tobytes()
    expect("raw_data size", [PPCC, save("rawsize", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], inits=[bad_raw])],
           "raw_data holds 12 bytes, expected 16")
    neg = helper.make_tensor("w", F, [4], np.zeros(4, np.float32).tobytes(), raw=True)
    neg.dims[0] = -4
    expect("negative dim", [PPCC, save("negdim", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], inits=[neg])],
           "dimension 0 is negative")
    huge = helper.make_tensor("w", F, [4], np.zeros(4, np.float32).tobytes(), raw=True)
    del huge.dims[:]
    huge.dims.extend([1 << 40, 1 << 40])
    expect("overflowing dims", [PPCC, save("overflow", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], inits=[huge])],
           "overflows")
    xs = helper.make_tensor_value_info("x", F, ["batch", "seq"])
    expect("symbolic dim", [PPCC, save("symdim", [helper.make_node("Relu", ["x"], ["y"], name="r")], [xs], [y])],
           "--dim seq=VALUE")
    expect("old opset", [PPCC, save("opset5", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], opset=5)],
           "opset 5 is not supported")
    expect("missing graph output", [PPCC, save("noout", [helper.make_node("Relu", ["x"], ["z"], name="r")], [x], [y])],
           "graph output 'y' is produced by no node")
    x4 = helper.make_tensor_value_info("x", F, [1, 3, 8, 8])
    y4 = helper.make_tensor_value_info("y", F, None)
    w = helper.make_tensor("w", F, [8, 2, 3, 3], np.zeros(8 * 2 * 9, np.float32).tobytes(), raw=True)
    expect("conv channels", [PPCC, save("convch", [helper.make_node("Conv", ["x", "w"], ["y"], name="/c/Conv")], [x4], [y4], inits=[w])],
           "node '/c/Conv' (#0, Conv): weight W has 2 input channels per group, expected 3")
    expect("maxpool indices", [PPCC, save("mpidx", [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="mp", kernel_shape=[2, 2])],
                                          [x4], [y4])], "2 outputs, 1 supported")
    expect("bad auto_pad", [PPCC, save("autopad", [helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], auto_pad="WEIRD")],
                                       [x4], [y4])], "auto_pad' has unknown value 'WEIRD'")
    b = helper.make_tensor("b", F, [5, 3], np.zeros(15, np.float32).tobytes(), raw=True)
    expect("gemm inner dims", [PPCC, save("gemmk", [helper.make_node("Gemm", ["x", "b"], ["y"], name="fc")], [x], [y], inits=[b])],
           "inner dimensions differ")
    expect("fixed batch vs -b", [PPCC, save("fixedb", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y]), "-b", "4"],
           "fixed batch dimension 1")

# ---- pprt: plans and data ---------------------------------------------------------------
subprocess.run([PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "2", "-b", "8", "-o", "good.plan", "-q"], check=True)
plan = open("good.plan", "rb").read()
data = os.path.join(DIGITS, "data")
expect("missing plan", [PPRT, "nope.plan", data], "cannot open plan")
expect("not a plan", [PPRT, write("text.plan", b"x" * 200), data], "expected magic")
expect("tiny plan", [PPRT, write("tiny.plan", b"PPCC"), data], "expected at least 128")
for cut in (130, len(plan) // 2, len(plan) - 1):
    expect(f"truncated plan {cut}", [PPRT, write(f"trunc{cut}.plan", plan[:cut]), data], "file size")
flip = bytearray(plan)
flip[-5] ^= 0x10
expect("flipped weight byte", [PPRT, write("flip.plan", bytes(flip)), data], "weights checksum")
flip = bytearray(plan)
flip[200] ^= 0x01
expect("flipped metadata byte", [PPRT, write("flipm.plan", bytes(flip)), data], "metadata checksum")
ver = bytearray(plan)
ver[8] = 7
expect("wrong version", [PPRT, write("ver.plan", bytes(ver)), data], "plan format version 7")
expect("missing data dir", [PPRT, "good.plan", "no-such-dir"], "cannot open data directory")
os.makedirs("wrongshape", exist_ok=True)
np.save("wrongshape/input.npy", np.zeros((5, 1, 8, 9), np.float32))
expect("wrong data shape", [PPRT, "good.plan", "wrongshape"], "input 'input' expects f32 [?,1,8,8]")
os.makedirs("wrongtype", exist_ok=True)
np.save("wrongtype/input.npy", np.zeros((5, 1, 8, 8), np.float64))
expect("wrong data type", [PPRT, "good.plan", "wrongtype"], "the file holds f64")
os.makedirs("notnpy", exist_ok=True)
write("notnpy/input.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr'")
expect("corrupt npy", [PPRT, "good.plan", "notnpy"], "truncated .npy header")
os.makedirs("empty", exist_ok=True)
expect("no data files", [PPRT, "good.plan", "empty"], "no data for input 'input'")
np.save("labels_short.npy", np.zeros(3, np.int64))
expect("labels length", [PPRT, "good.plan", data, "-o", "o", "--labels", "labels_short.npy"], "class indices")
expect("depth 0", [PPRT, "good.plan", data, "--depth", "0"], "--depth needs")

print(f"bad_inputs: {count - len(failures)}/{count} cases rejected cleanly")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
