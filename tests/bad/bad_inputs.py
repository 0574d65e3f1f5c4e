#!/usr/bin/env python3
"""Bad input, handled cleanly: every case must make ppcc or pprt exit with
code 2 and print a message containing the expected words (naming the culprit),
never crash (a sanitizer report, a signal) or hang.

The bad ONNX models are built here with the onnx package's helpers; the
truncated and corrupted files are cut from the bundled digits sample and a plan
compiled from it. Usage: bad_inputs.py WORKDIR (env: PPCC, PPRT, SRC)."""
import os
import shutil
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
expect("bad profile", [PPCC, os.path.join(DIGITS, "model.onnx"), "--profile", write("prof.json", b"{}\n"), "-o", "x.plan"],
       "not a pprt --profile file")
expect("missing exec-seq", [PPCC, os.path.join(DIGITS, "model.onnx"), "--exec-seq", "nope.txt", "-o", "x.plan"],
       "--exec-seq: cannot open")
expect("unknown module", [PPCC, os.path.join(DIGITS, "model.onnx"), "--split-at", "stem.conv9", "-o", "x.plan"],
       "no module 'stem.conv9' in the model; closest:")
expect("bad memory cap", [PPCC, os.path.join(DIGITS, "model.onnx"), "--max-memory", "lots"], "is not a size")
expect("caps too small", [PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "2", "--max-memory", "1KB", "-o", "x.plan"],
       "no split into 2 stages fits the memory caps")
D = os.path.join(DIGITS, "model.onnx")
expect("--search without devices", [PPCC, D, "--search"], "--search needs --devices N")
expect("--devices without --search", [PPCC, D, "--devices", "2"], "--devices is for --search")
expect("--devices 0", [PPCC, D, "--devices", "0", "--search"], "--devices needs a count")
expect("--search and --max-batch", [PPCC, D, "--devices", "2", "--search", "--max-batch"], "not both")
expect("--max-batch without caps", [PPCC, D, "--max-batch"], "--max-batch needs the caps")
expect("--max-batch with -b", [PPCC, D, "--max-batch", "-b", "4", "--max-memory", "1GB"], "leave out -b")
expect("--search with -b 0", [PPCC, D, "--devices", "2", "--search", "-b", "0"], "-b 0 has no micro-batch")
expect("--search with an exec_seq", [PPCC, D, "--devices", "2", "--search", "--split-at", "stem.conv2"],
       "--search chooses the cuts itself")
expect("bad --batch-sizes", [PPCC, D, "--devices", "2", "--search", "--batch-sizes", "1,x"], "--batch-sizes needs")
expect("bad --samples", [PPCC, D, "--devices", "2", "--search", "--samples", "0"], "--samples needs")
expect("--search, nothing fits", [PPCC, D, "--devices", "2", "--search", "--max-memory", "1KB"],
       "no configuration of 2 devices fits")
expect("bad dump pass", [PPCC, os.path.join(DIGITS, "model.onnx"), "--dump-ir=nosuch", "-o", "x.plan"], "no such pass")
expect("unwritable output", [PPCC, os.path.join(DIGITS, "model.onnx"), "-o", "no/such/dir/p.plan"],
       "cannot create")
assert not os.path.exists("t.plan") and not os.path.exists("x.plan"), "a failed compile left a plan"

# ---- ppcc: well-formed protobuf, bad or unsupported models ---------------------------
try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
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
    expect("unsupported op", [PPCC, save("strnorm", [helper.make_node("StringNormalizer", ["x"], ["y"], name="/head/Norm")], [x], [y])],
           "node '/head/Norm' (#0, StringNormalizer): op 'StringNormalizer' is not supported")
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
    xh = helper.make_tensor_value_info("x", F, [1 << 20, 1 << 20])
    expect("input larger than memory", [PPCC, save("huge", [helper.make_node("Relu", ["x"], ["y"], name="r")], [xh], [y])],
           "more than this machine's memory")
    xs = helper.make_tensor_value_info("x", F, ["batch", "seq"])
    expect("symbolic dim", [PPCC, save("symdim", [helper.make_node("Relu", ["x"], ["y"], name="r")], [xs], [y])],
           "--dim seq=VALUE")
    expect("old opset", [PPCC, save("opset5", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], opset=5)],
           "opset 5 is not supported")
    expect("missing graph output", [PPCC, save("noout", [helper.make_node("Relu", ["x"], ["z"], name="r")], [x], [y])],
           "graph output 'y' is produced by no node")
    x4 = helper.make_tensor_value_info("x", F, [1, 3, 8, 8])
    y4 = helper.make_tensor_value_info("y", F, None)
    bnp = [helper.make_tensor(k, F, [3], np.ones(3, np.float32).tobytes(), raw=True) for k in ("s", "bb", "m", "v")]
    expect("unsupported attribute value", [PPCC, save("bntrain", [helper.make_node(
        "BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"], name="/bn/BatchNormalization", training_mode=1)],
        [x4], [y4], inits=bnp, opset=15)], "attribute 'training_mode'=1 (training) is not supported")
    w = helper.make_tensor("w", F, [8, 2, 3, 3], np.zeros(8 * 2 * 9, np.float32).tobytes(), raw=True)
    expect("conv channels", [PPCC, save("convch", [helper.make_node("Conv", ["x", "w"], ["y"], name="/c/Conv")], [x4], [y4], inits=[w])],
           "node '/c/Conv' (#0, Conv): weight W has 2 input channels per group, expected 3")
    expect("extra output", [PPCC, save("reluidx", [helper.make_node("Relu", ["x"], ["y", "idx"], name="r")],
                                       [x4], [y4])], "2 outputs, 1 supported")
    expect("bad auto_pad", [PPCC, save("autopad", [helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], auto_pad="WEIRD")],
                                       [x4], [y4])], "auto_pad' has unknown value 'WEIRD'")
    b = helper.make_tensor("b", F, [5, 3], np.zeros(15, np.float32).tobytes(), raw=True)
    expect("gemm inner dims", [PPCC, save("gemmk", [helper.make_node("Gemm", ["x", "b"], ["y"], name="fc")], [x], [y], inits=[b])],
           "inner dimensions differ")
    expect("fixed batch vs -b", [PPCC, save("fixedb", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y]), "-b", "4"],
           "fixed batch dimension 1")

    # ---- ppcc --const: graph inputs bound to TensorProto files ----------------------
    w_in = helper.make_tensor_value_info("w", F, [4])
    addw = save("addw", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x, w_in], [y])
    good_w = write("w.pb", numpy_helper.from_array(np.ones(4, np.float32), "w").SerializeToString())
    expect("--const missing file", [PPCC, addw, "-b", "0", "--const", "w=no-such.pb", "-o", "c.plan"],
           "cannot open 'no-such.pb'")
    expect("--const not an input", [PPCC, addw, "-b", "0", "--const", "nope=w.pb", "-o", "c.plan"],
           "the model has no graph input 'nope' (its inputs: 'x', 'w')")
    write("w3.pb", numpy_helper.from_array(np.ones(3, np.float32), "w").SerializeToString())
    expect("--const wrong shape", [PPCC, addw, "-b", "0", "--const", "w=w3.pb", "-o", "c.plan"],
           "graph input 'w' is declared f32 [4], the file holds f32 [3]")
    write("wi.pb", numpy_helper.from_array(np.ones(4, np.int64), "w").SerializeToString())
    expect("--const wrong type", [PPCC, addw, "-b", "0", "--const", "w=wi.pb", "-o", "c.plan"],
           "declared f32 [4], the file holds i64 [4]")
    good = open(good_w, "rb").read()
    expect("--const truncated file", [PPCC, addw, "-b", "0", "--const", "w=" + write("wt.pb", good[:len(good) - 3]), "-o", "c.plan"],
           "wt.pb: not an ONNX TensorProto")
    short_raw = numpy_helper.from_array(np.ones(4, np.float32), "w")
    short_raw.raw_data = short_raw.raw_data[:12]
    expect("--const raw_data size", [PPCC, addw, "-b", "0", "--const", "w=" + write("ws.pb", short_raw.SerializeToString()), "-o", "c.plan"],
           "raw_data holds 12 bytes, expected 16")
    expect("--const empty file", [PPCC, addw, "-b", "0", "--const", "w=" + write("we.pb", b""), "-o", "c.plan"],
           "the file is empty")
    expect("--const twice", [PPCC, addw, "-b", "0", "--const", "w=w.pb", "--const", "w=w.pb", "-o", "c.plan"],
           "--const w is given twice")
    expect("--const no '='", [PPCC, addw, "--const", "w"], "--const needs NAME=FILE.pb")
    assert not os.path.exists("c.plan"), "a failed compile left a plan"

    # ---- pprt: ONNX test data (input_K.pb) and --check ---------------------------------
    relu = save("relu", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y])
    subprocess.run([PPCC, relu, "-b", "0", "-q", "-o", "relu.plan"], check=True)
    xs = np.array([[-1, 0, 1, 2]], np.float32)
    shutil.rmtree("pbdata", ignore_errors=True)
    shutil.rmtree("pbbad", ignore_errors=True)
    os.makedirs("pbdata", exist_ok=True)
    write("pbdata/input_0.pb", numpy_helper.from_array(xs, "x").SerializeToString())
    expect("--check missing expected", [PPRT, "relu.plan", "pbdata", "--check", "-o", "o"],
           "no expected value for output 'y'")
    expect("--check missing --expected dir", [PPRT, "relu.plan", "pbdata", "--expected", "no-such-dir", "-o", "o"],
           "no-such-dir/y.npy")
    write("pbdata/output_0.pb", numpy_helper.from_array(xs, "y").SerializeToString())
    expect("--check mismatch", [PPRT, "relu.plan", "pbdata", "--check", "-o", "o"],
           "output 'y' does not match", code=1)
    write("pbdata/output_0.pb", numpy_helper.from_array(np.maximum(xs, 0), "y").SerializeToString())
    r = subprocess.run([PPRT, "relu.plan", "pbdata", "--check", "-o", "o"], capture_output=True, text=True)
    if r.returncode != 0 or "OK" not in r.stdout:
        failures.append(f"--check on matching data: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
    write("pbdata/output_0.pb", b"\x08")
    expect("--check corrupt expected", [PPRT, "relu.plan", "pbdata", "--check", "-o", "o"],
           "output_0.pb: not an ONNX TensorProto")
    os.makedirs("pbbad", exist_ok=True)
    write("pbbad/input_0.pb", numpy_helper.from_array(xs, "x").SerializeToString()[:-2])
    expect("truncated input_0.pb", [PPRT, "relu.plan", "pbbad", "-o", "o"], "input_0.pb: not an ONNX TensorProto")
    write("pbbad/input_0.pb", numpy_helper.from_array(np.zeros((2, 4), np.float32), "x").SerializeToString())
    expect("input_0.pb wrong shape", [PPRT, "relu.plan", "pbbad", "-o", "o"], "input 'x' expects f32 [1,4]")
    write("pbbad/input_0.pb", numpy_helper.from_array(xs, "other").SerializeToString())
    expect("input_0.pb names no input", [PPRT, "relu.plan", "pbbad", "-o", "o"],
           "no data for input 'x'")
    typed = TensorProto(name="x", data_type=F, dims=[1, 4], float_data=[1.0, 2.0, 3.0])
    write("pbbad/input_0.pb", typed.SerializeToString())
    expect("input_0.pb short float_data", [PPRT, "relu.plan", "pbbad", "-o", "o"],
           "float_data holds 3 values, expected 4")
    expect("--rtol negative", [PPRT, "relu.plan", "pbdata", "--rtol", "-1"], "--rtol needs a tolerance")

# ---- ppcc: external data that tries to escape the model's directory ---------------------
if onnx is not None:
    from onnx.external_data_helper import set_external_data

    def ext_model(tag, location, offset=None, length=None, make_file=True):
        """The digits model with one initializer moved to external data."""
        d = os.path.join(work, "ext_" + tag)
        os.makedirs(d, exist_ok=True)
        m = onnx.load(os.path.join(DIGITS, "model.onnx"))
        t = max(m.graph.initializer, key=lambda t: len(t.raw_data))
        raw = t.raw_data
        if make_file:
            with open(os.path.join(work, "weights.bin"), "wb") as f:
                f.write(raw)
        kw = {"location": location}
        if offset is not None:
            kw["offset"] = offset
        if length is not None:
            kw["length"] = length
        set_external_data(t, **kw)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        path = os.path.join(d, "model.onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        return path, len(raw)

    p, n = ext_model("abs", os.path.join(work, "weights.bin"))
    expect("external: absolute path", [PPCC, p, "-o", "x.plan"], "must be a relative path")
    p, n = ext_model("dotdot", "../weights.bin")
    expect("external: .. escape", [PPCC, p, "-o", "x.plan"], "escapes the model's directory")
    p, n = ext_model("link", "w.bin")
    if os.path.lexists(os.path.join(work, "ext_link", "w.bin")):
        os.remove(os.path.join(work, "ext_link", "w.bin"))
    os.symlink(os.path.join(work, "weights.bin"), os.path.join(work, "ext_link", "w.bin"))
    expect("external: symbolic link", [PPCC, p, "-o", "x.plan"], "symbolic link")
    p, n = ext_model("hard", "w.bin")
    if os.path.lexists(os.path.join(work, "ext_hard", "w.bin")):
        os.remove(os.path.join(work, "ext_hard", "w.bin"))
    os.link(os.path.join(work, "weights.bin"), os.path.join(work, "ext_hard", "w.bin"))
    expect("external: hard link", [PPCC, p, "-o", "x.plan"], "hard links")
    p, n = ext_model("ok", "w.bin")
    write(os.path.join(work, "ext_ok", "w.bin"), open(os.path.join(work, "weights.bin"), "rb").read())
    r = subprocess.run([PPCC, p, "-o", "ext_ok.plan", "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"external data inside the directory refused: {r.stderr.strip()}")
    for tag, off, ln, want in (("negoff", -4, None, "offset '-4' is not a non-negative integer"),
                               ("bigoff", 1 << 20, None, "lies outside"),
                               ("badlen", 0, 12, "external data length 12, expected"),
                               ("junklen", 0, "12x", "is not a non-negative integer")):
        p, n = ext_model(tag, "w.bin")
        write(os.path.join(work, "ext_" + tag, "w.bin"), open(os.path.join(work, "weights.bin"), "rb").read())
        mm = onnx.load(p, load_external_data=False)
        t = max(mm.graph.initializer, key=lambda t: len(t.external_data))
        del t.external_data[:]
        for k, v in (("location", "w.bin"), ("offset", off), ("length", ln)):
            if v is not None:
                e = t.external_data.add()
                e.key, e.value = k, str(v)
        with open(p, "wb") as f:
            f.write(mm.SerializeToString())
        expect(f"external: {tag}", [PPCC, p, "-o", "x.plan"], want)
    p, n = ext_model("missing", "nothere.bin")
    expect("external: missing file", [PPCC, p, "-o", "x.plan"], "nothere.bin")

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
os.makedirs("persample", exist_ok=True)
np.save("persample/a.npy", np.zeros((1, 8, 8), np.float32))
np.save("persample/b.npy", np.zeros((1, 8, 7), np.float32))
expect("per-sample file of the wrong shape", [PPRT, "good.plan", "persample"], "b.npy: one sample of input 'input'")
os.makedirs("empty", exist_ok=True)
expect("no data files", [PPRT, "good.plan", "empty"], "no data for input 'input'")
np.save("labels_short.npy", np.zeros(3, np.int64))
expect("labels length", [PPRT, "good.plan", data, "-o", "o", "--labels", "labels_short.npy"], "class indices")
expect("depth 0", [PPRT, "good.plan", data, "--depth", "0"], "--depth needs")
expect("warmup negative", [PPRT, "good.plan", data, "--warmup", "-1"], "--warmup needs")
expect("warmup not a number", [PPRT, "good.plan", data, "--warmup", "two"], "--warmup needs")
expect("unknown precision", [PPRT, "good.plan", data, "--precision", "fp8"], "--precision needs f32 or bf16")
expect("bf16 on the reference kernels", [PPRT, "good.plan", data, "--backend", "ref", "--precision", "bf16"],
       "--precision bf16 needs the oneDNN backend")

# ---- pprt: a --ref-weights plan whose model file moved, changed or is not a file ------------
def ref_weights_cases():
    from onnx import TensorProto, helper, numpy_helper
    import onnx
    rng = np.random.default_rng(7)
    w = rng.standard_normal((256, 256)).astype(np.float32)  # 256 KiB: referenced, not copied
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y0"]), helper.make_node("Relu", ["y0"], ["y"])], "ref",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 256])], [numpy_helper.from_array(w, "w")])
    shutil.rmtree("ref", ignore_errors=True)
    os.makedirs("ref")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "ref/model.onnx")
    x = rng.standard_normal((3, 256)).astype(np.float32)
    os.makedirs("ref/data", exist_ok=True)
    np.save("ref/data/x.npy", x)
    r = subprocess.run([PPCC, "ref/model.onnx", "--ref-weights", "-o", "ref.plan"], capture_output=True, text=True)
    if r.returncode != 0 or os.path.getsize("ref.plan") > 64 << 10:
        failures.append(f"--ref-weights compile: exit {r.returncode}, {r.stderr.strip()[:300]!r}, "
                        f"plan {os.path.getsize('ref.plan') if os.path.exists('ref.plan') else 0} bytes (want < 64 KiB)")
        return
    # it runs, and right (numpy's product; float32 sums in another order)
    r = subprocess.run([PPRT, "ref.plan", "ref/data", "-o", "ref_out", "-q"], capture_output=True, text=True)
    y = np.load("ref_out/y.npy") if r.returncode == 0 else None
    if y is None or not np.allclose(y, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4):
        failures.append(f"--ref-weights run: exit {r.returncode}, {r.stderr.strip()[:300]!r}")
    model = open("ref/model.onnx", "rb").read()
    at = model.index(w.tobytes()[:64]) + 1000  # a byte inside the weight
    changed = bytearray(model)
    changed[at] ^= 0x40
    os.rename("ref/model.onnx", "ref/moved.onnx")
    expect("ref-weights: model moved", [PPRT, "ref.plan", "ref/data"], "pprt --model FILE names where the model is now")
    expect("ref-weights: --model of another size", [PPRT, "ref.plan", "ref/data", "--model", write("ref/cut.onnx", model[:-1])],
           "the plan was compiled from one of")
    expect("ref-weights: --model with a changed weight", [PPRT, "ref.plan", "ref/data", "--model",
                                                          write("ref/changed.onnx", bytes(changed))], "the file changed")
    expect("ref-weights: --model is a directory", [PPRT, "ref.plan", "ref/data", "--model", "ref"], "is not a regular file")
    os.mkfifo("ref/fifo.onnx")
    expect("ref-weights: --model is a FIFO", [PPRT, "ref.plan", "ref/data", "--model", "ref/fifo.onnx"], "is not a regular file")
    expect("ref-weights: --model needs a file", [PPRT, "ref.plan", "ref/data", "--model"], "--model needs")
    # the moved model, named: runs, and gives the same outputs
    r = subprocess.run([PPRT, "ref.plan", "ref/data", "-o", "ref_out2", "-q", "--model", "ref/moved.onnx"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists("ref_out2/y.npy") or \
            open("ref_out2/y.npy", "rb").read() != open("ref_out/y.npy", "rb").read():
        failures.append(f"--ref-weights with --model: exit {r.returncode}, {r.stderr.strip()[:300]!r}")


ref_weights_cases()

print(f"bad_inputs: {count - len(failures)}/{count} cases rejected cleanly")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
