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


def expect(name, argv, want, code=2, timeout=60):
    """Run argv; it must exit with `code` and stderr must contain `want`."""
    global count
    count += 1
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        failures.append(f"{name}: hung ({timeout} s)")
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
expect("--loss of an unknown kind", [PPCC, os.path.join(DIGITS, "model.onnx"), "--train", "--loss", "hinge:logits", "-b",
                                    "8", "-o", "x.plan"], "no output 'hinge:logits' (its outputs: 'logits'); --loss takes")
expect("bad profile", [PPCC, os.path.join(DIGITS, "model.onnx"), "--profile", write("prof.json", b"{}\n"), "-o", "x.plan"],
       "not a pprt --profile file")
# a node time JSON reads as infinite (1e999) or past 1e9 ms: the cost model's sums went infinite, the split arbitrary
for t in (b"1e999", b"1e300", b"-1"):
    expect(f"profile time {t.decode()}", [PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "2", "--profile", write(
        "prof_t.json", b'{"micro_batch": 8, "unit": "ms", "nodes": {"/stem/conv1/conv/Conv": ' + t + b'}}'), "-o",
        "x.plan"], "node '/stem/conv1/conv/Conv': expected \"node name\": milliseconds in 0..1e9")
expect("missing exec-seq", [PPCC, os.path.join(DIGITS, "model.onnx"), "--exec-seq", "nope.txt", "-o", "x.plan"],
       "--exec-seq: cannot open")
# a list of nothing but commas, and more split points than a plan holds (those past 256 were dropped without a word)
expect("--split-at ,", [PPCC, os.path.join(DIGITS, "model.onnx"), "--split-at", ",", "-o", "x.plan"],
       "--split-at ',' names no module")
expect("--split-at 300 points", [PPCC, os.path.join(DIGITS, "model.onnx"), "--split-at", ",".join(["block"] * 300),
                                 "-o", "x.plan"], "--split-at: more than 256 split points")
expect("unknown module", [PPCC, os.path.join(DIGITS, "model.onnx"), "--split-at", "stem.conv9", "-o", "x.plan"],
       "no module 'stem.conv9' in the model; closest:")
expect("bad memory cap", [PPCC, os.path.join(DIGITS, "model.onnx"), "--max-memory", "lots"], "is not a size")
expect("--max-memory for a stage the split lacks", [PPCC, os.path.join(DIGITS, "model.onnx"), "--max-memory", "5:1GiB", "-o", "x.plan"],
       "--max-memory 5:...: there is no stage 5, the split has 1 stage (0..0)")
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
expect("unwritable html report", [PPCC, os.path.join(DIGITS, "model.onnx"), "-o", "h.plan", "--report-html",
                                   "no/such/dir/r.html"], "cannot create")
expect("html report needs a file", [PPCC, os.path.join(DIGITS, "model.onnx"), "--report-html"], "--report-html needs")
expect("export-stages needs a directory", [PPCC, os.path.join(DIGITS, "model.onnx"), "--export-stages"],
       "--export-stages needs")
expect("export-stages onto a file", [PPCC, os.path.join(DIGITS, "model.onnx"), "-o", "h.plan", "--export-stages",
                                     write("a_file", b"keep me")], "exists and is not a directory")
expect("export-stages into a missing directory", [PPCC, os.path.join(DIGITS, "model.onnx"), "-o", "h.plan",
                                                  "--export-stages", "no/such/dir/stages"], "cannot create")
assert open("a_file", "rb").read() == b"keep me", "--export-stages changed a file in its way"
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
    # control flow is unrolled at compile time: what it depends on must be known then
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, [1, 4])])
    c_in = helper.make_tensor_value_info("c", TensorProto.BOOL, [1])
    expect("If on data", [PPCC, save("iff", [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=then)],
                                     [x, c_in], [y]), "-b", "0", "-o", "x.plan"],
           "node 'branch' (#0, If): the condition ('c') is not known at compile time")
    m_in = helper.make_tensor_value_info("m", TensorProto.INT64, [1])
    body = helper.make_graph([helper.make_node("Identity", ["cin"], ["cout"]), helper.make_node("Relu", ["v"], ["v2"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v", F, [1, 4])],
                             [helper.make_tensor_value_info("cout", TensorProto.BOOL, []), helper.make_tensor_value_info("v2", F, [1, 4])])
    expect("Loop on data", [PPCC, save("loop", [helper.make_node("Loop", ["m", "", "x"], ["y"], name="/blk/Loop", body=body)],
                                       [x, m_in], [y]), "-b", "0", "-o", "x.plan"],
           "node '/blk/Loop' (#0, Loop): the trip count M ('m') is not known at compile time")
    expect("Scan", [PPCC, save("scan", [helper.make_node("Scan", ["x"], ["y"], name="sc", body=body, num_scan_inputs=1)], [x], [y])],
           "control flow (Scan) is not supported")
    seq_out = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="mk")], "seqout", [x],
                                [helper.make_tensor_sequence_value_info("s", F, [1, 4])])
    m = helper.make_model(seq_out, opset_imports=[helper.make_opsetid("", 13)])
    with open("seqout.onnx", "wb") as f:
        f.write(m.SerializeToString())
    expect("sequence output", [PPCC, "seqout.onnx", "-o", "x.plan"], "graph output 's' is a sequence")
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
    expect("unsupported attribute value", [PPCC, save("bnspatial", [helper.make_node(
        "BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"], name="/bn/BatchNormalization", spatial=0)],
        [x4], [y4], inits=bnp, opset=7)], "attribute 'spatial'=0 is not supported")
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

    # ---- refused when compiled, not on every run ------------------------------------
    x15 = helper.make_tensor_value_info("x", F, [1, 5])
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "idx")
    expect("Gather: constant index out of range", [PPCC, save("gather_oob", [helper.make_node("Gather", ["x", "idx"], ["y"], name="/emb/Gather", axis=1)],
                                                             [x15], [helper.make_tensor_value_info("y", F, [1, 2])], inits=[idx]), "-o", "x.plan"],
           "node '/emb/Gather' (#0, Gather): constant input 'indices' holds 7 (element 1), out of range for axis 1 of size 5")
    idx = numpy_helper.from_array(np.array([[0, -6]], np.int64), "idx")
    expect("GatherElements: constant index out of range", [PPCC, save("gather_el_oob", [helper.make_node("GatherElements", ["x", "idx"], ["y"], name="ge", axis=1)],
                                                                      [x15], [helper.make_tensor_value_info("y", F, [1, 2])], inits=[idx]), "-o", "x.plan"],
           "holds -6 (element 1), out of range for axis 1 of size 5")
    wt = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    expect("ConvTranspose: output_padding >= stride", [PPCC, save("convt_opad", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="/up/ConvTranspose",
                                                                                                  strides=[2, 2], output_padding=[2, 1])],
                                                                 [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])], [y4], inits=[wt]), "-o", "x.plan"],
           "node '/up/ConvTranspose' (#0, ConvTranspose): attribute 'output_padding'[0]=2, expected less than the stride 2")
    w1 = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    expect("ConvTranspose: SAME output past the full result", [PPCC, save("convt_same", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up",
                                                                                                          strides=[3, 1], auto_pad="SAME_UPPER")],
                                                                          [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])], [y4], inits=[w1]), "-o", "x.plan"],
           "node 'up' (#0, ConvTranspose): spatial dim 0: the output asked for (12, by auto_pad SAME: input x stride) is larger than the full "
           "transposed convolution (10) by 2, not less than the stride 3")
    expect("ConvTranspose: output_shape a stride past the full result", [PPCC, save("convt_oshape", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up",
                                                                                                              strides=[2, 2], output_shape=[9, 8])],
                                                                              [helper.make_tensor_value_info("x", F, [1, 1, 3, 3])], [y4], inits=[wt]), "-o", "x.plan"],
           "node 'up' (#0, ConvTranspose): spatial dim 0: the output asked for (9, by attribute 'output_shape') is larger than the full "
           "transposed convolution (7) by 2, not less than the stride 2")
    long_out = "logits_" + "o" * 250
    expect("an output name too long for a file", [PPCC, save("longout", [helper.make_node("Relu", ["x"], [long_out], name="r")], [x],
                                                                 [helper.make_tensor_value_info(long_out, F, [1, 4])]), "-o", "x.plan"],
           "graph output 'logits_ooo")
    expect("an input name too long for a file", [PPCC, save("longin", [helper.make_node("Relu", [long_out], ["y"], name="r")],
                                                                [helper.make_tensor_value_info(long_out, F, [1, 4])], [y]), "-o", "x.plan"],
           "has a 257-byte name, too long for its data file")
    ok_out = "o" * 240  # the longest name that fits: NAME.npy.tmp.XXXXXX in 255 bytes
    subprocess.run([PPCC, save("okout", [helper.make_node("Relu", ["x"], [ok_out], name="r")], [x],
                               [helper.make_tensor_value_info(ok_out, F, [1, 4])]), "-o", "okout.plan", "-q"], check=True)
    os.makedirs("okout_data", exist_ok=True)
    np.save("okout_data/x.npy", np.ones((3, 4), np.float32))
    r = subprocess.run([PPRT, "okout.plan", "okout_data", "-o", "okout_o", "-q"], capture_output=True, text=True)
    count += 1
    if r.returncode != 0 or not os.path.exists(f"okout_o/{ok_out}.npy"):
        failures.append(f"a 240-byte output name: exit {r.returncode}, {r.stderr.strip()[:300]!r}")

    # ---- constant folding within a work budget ------------------------------------
    import time
    ones6 = np.ones((10,) * 6, np.float32)
    big_einsum = save("einsum_fold", [helper.make_node("Einsum", ["a", "b"], ["s"], equation="abcdef,ghijkl->", name="/big/Einsum"),
                                      helper.make_node("Add", ["x1", "s"], ["y1"], name="/add/Add")],
                      [helper.make_tensor_value_info("x1", F, [1])], [helper.make_tensor_value_info("y1", F, [1])],
                      inits=[numpy_helper.from_array(ones6, "a"), numpy_helper.from_array(ones6 + 1, "b")])
    t0 = time.time()
    r = subprocess.run([PPCC, big_einsum, "-b", "0", "-o", "einsum.plan", "--dump-ir=infer"], capture_output=True,
                       text=True, timeout=60)
    dt = time.time() - t0
    count += 1
    if r.returncode != 0 or dt > 2 or "unfolded=2e+12-ops-over-budget" not in r.stdout or \
            "'/big/Einsum' (Einsum), an estimated 2e+12 operations" not in r.stderr:
        failures.append(f"constant Einsum of 10^12 terms: exit {r.returncode} after {dt:.2f} s (want 0 in under 2 s, "
                        f"left to run time and said so): {r.stderr.strip()[:300]!r}")
    small = save("einsum_small", [helper.make_node("Einsum", ["a", "b"], ["s"], equation="ij,jk->ik", name="/small/Einsum"),
                                  helper.make_node("Add", ["x2", "s"], ["y2"], name="/add/Add")],
                  [helper.make_tensor_value_info("x2", F, [4, 4])], [helper.make_tensor_value_info("y2", F, [4, 4])],
                  inits=[numpy_helper.from_array(np.eye(4, dtype=np.float32), "a"),
                         numpy_helper.from_array(np.ones((4, 4), np.float32), "b")])
    r = subprocess.run([PPCC, small, "-b", "0", "-q", "-o", "einsum_small.plan", "--dump-ir=infer"], capture_output=True,
                       text=True, timeout=60)
    count += 1
    if r.returncode != 0 or "Einsum" in r.stdout or r.stderr:
        failures.append(f"a small constant Einsum is still folded: exit {r.returncode}, {r.stdout[:300]!r} {r.stderr[:300]!r}")

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

# ---- ppcc: messages nested deeper than protobuf-c's recursion can take -------------------
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(num, payload):  # a length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def nested(levels, inner, head, tail=lambda k: b""):
    """Bytes of `levels` wrappers around `inner`: wrapper k is head(k) + field(...) + tail(k) as built by
    head(k, child_len) giving (bytes before the child, bytes after it). Built outside-in in one pass (the
    lengths first), so 100k levels cost linear time."""
    sizes = [len(inner)]
    for k in reversed(range(levels)):
        pre, post = head(k, sizes[-1])
        sizes.append(len(pre) + sizes[-1] + len(post))
    sizes.reverse()
    out = bytearray()
    posts = []
    for k in range(levels):
        pre, post = head(k, sizes[k + 1])
        out += pre
        posts.append(post)
    out += inner
    for post in reversed(posts):
        out += post
    return bytes(out)


def model_bytes(graph):
    return varint(1 << 3) + varint(8) + field(7, graph) + field(8, varint(2 << 3) + varint(13))


relu_node = field(1, field(1, b"x") + field(2, b"y") + field(4, b"Relu"))
tensor_type = field(1, varint(1 << 3) + varint(1))  # TypeProto{tensor_type{elem_type: FLOAT}}
# a graph input whose TypeProto is a Sequence of a Sequence of ... 5000 levels (10000 messages)
deep_type = nested(5000, tensor_type, lambda k, n: (varint(4 << 3 | 2) + varint(n + len(varint(n)) + 1) +
                                                    varint(1 << 3 | 2) + varint(n), b""))
vi = field(11, field(1, b"x") + field(2, deep_type)) + field(12, field(1, b"y") + field(2, tensor_type))
deep = write("deep_type.onnx", model_bytes(relu_node + vi))
expect(f"type nested 5000 deep ({len(open(deep, 'rb').read()) // 1024} KB)", [PPCC, deep, "-o", "x.plan"],
       "more than the 100 levels ppcc accepts")
# 100k If nodes, each in the then_branch of the one before
if_head = lambda k, n: (varint(1 << 3 | 2) + varint(len(IF_FIXED) + 1 + len(varint(ATTR_FIXED_LEN + 1 + len(varint(n)) + n)) + ATTR_FIXED_LEN + 1 + len(varint(n)) + n) +
                        IF_FIXED + varint(5 << 3 | 2) + varint(ATTR_FIXED_LEN + 1 + len(varint(n)) + n) + ATTR_FIXED +
                        varint(6 << 3 | 2) + varint(n), b"")
IF_FIXED = field(1, b"c") + field(2, b"y") + field(4, b"If")
ATTR_FIXED = field(1, b"then_branch") + varint(20 << 3) + varint(5)
ATTR_FIXED_LEN = len(ATTR_FIXED)
deep_if = write("deep_if.onnx", model_bytes(nested(100000, relu_node, if_head)))
expect(f"100k nested If ({len(open(deep_if, 'rb').read()) >> 20} MB)", [PPCC, deep_if, "-o", "x.plan"],
       "more than the 100 levels ppcc accepts")
if onnx is not None:  # the hand-made bytes are what they claim: onnx parses a shallow one
    m = onnx.load_from_string(model_bytes(nested(3, relu_node, if_head)))
    assert m.graph.node[0].op_type == "If" and m.graph.node[0].attribute[0].g.node[0].op_type == "If"
    t = onnx.load_from_string(model_bytes(relu_node + field(11, field(1, b"x") + field(2, nested(3, tensor_type, lambda k, n: (varint(4 << 3 | 2) + varint(n + len(varint(n)) + 1) + varint(1 << 3 | 2) + varint(n), b""))))))
    assert t.graph.input[0].type.sequence_type.elem_type.sequence_type.elem_type.sequence_type.elem_type.tensor_type.elem_type == 1

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
expect("where an error began, under -v", [PPRT, "good.plan", "no-such-dir", "-v"], "raised at runtime/data.c:")
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
expect("trace needs a file", [PPRT, "good.plan", data, "--trace"], "--trace needs")
expect("unwritable trace", [PPRT, "good.plan", data, "-o", "tr_out", "--trace", "no/such/dir/t.json"], "cannot create")
expect("warmup not a number", [PPRT, "good.plan", data, "--warmup", "two"], "--warmup needs")
expect("unknown precision", [PPRT, "good.plan", data, "--precision", "fp8"], "--precision needs f32, bf16, tf32 or fp16")
expect("bf16 on the reference kernels", [PPRT, "good.plan", data, "--backend", "ref", "--precision", "bf16"],
       "--precision bf16 needs a backend that computes it")

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
    with open("ref/huge.onnx", "wb") as f:  # 64 GiB, sparse: refused by its size, not after hashing it
        f.truncate(64 << 30)
    import time
    t0 = time.time()
    expect("ref-weights: --model is a 64 GiB sparse file", [PPRT, "ref.plan", "ref/data", "--model", "ref/huge.onnx"],
           "has 68719476736 bytes, the plan was compiled from one of")
    if time.time() - t0 > 5:
        failures.append(f"ref-weights: the 64 GiB --model took {time.time() - t0:.1f} s to refuse")
    os.remove("ref/huge.onnx")
    # the moved model, named: runs, and gives the same outputs
    r = subprocess.run([PPRT, "ref.plan", "ref/data", "-o", "ref_out2", "-q", "--model", "ref/moved.onnx"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists("ref_out2/y.npy") or \
            open("ref_out2/y.npy", "rb").read() != open("ref_out/y.npy", "rb").read():
        failures.append(f"--ref-weights with --model: exit {r.returncode}, {r.stderr.strip()[:300]!r}")


ref_weights_cases()


# ---- pprt --resume: a checkpoint whose state or arrays are not what the run needs ---------------
def checkpoint_cases():
    import json
    shutil.rmtree("ckpt", ignore_errors=True)  # a fresh folder of its own: the cases make and move folders
    os.makedirs("ckpt")
    os.chdir("ckpt")
    labels = os.path.join(DIGITS, "labels.npy")
    subprocess.run([PPCC, os.path.join(DIGITS, "model.onnx"), "--train", "--loss", "cross-entropy:logits", "-b", "8",
                    "-o", "train.plan", "-q"], check=True)
    run = [PPRT, "train.plan", data, "--labels", labels, "--optimizer", "adamw", "-q", "--steps", "4"]
    # a training plan without --steps or --epochs runs its graph once on one micro-batch: a data set's shape is
    # refused, the message saying how to train it
    expect("a training plan without --steps", [PPRT, "train.plan", data, "--labels", labels],
           "train.plan is a training plan: --steps N or --epochs N with --labels train it")
    subprocess.run(run[:-1] + ["2", "--checkpoint", "ck", "--save-every", "2"], check=True, timeout=120)
    os.makedirs("held")
    np.save("held/input.npy", np.zeros((16, 1, 8, 8), np.float32))
    expect("--eval without labels", run + ["--eval", "held"], "--eval held: cannot open 'held/labels.npy'")

    def corrupt(name, edit=None, arrays=None):
        d = "ck_" + name
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree("ck", d)
        if edit:
            with open(os.path.join(d, "state.json")) as f:
                st = json.load(f)
            edit(st)
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(st, f)
        if arrays:
            arrays(d)
        return d

    def setk(k, v):
        return lambda st: st.__setitem__(k, v)

    # counts out of range or not whole (a negative or huge step crashed pprt; a negative "updates" gave NaN losses)
    for key, val, want in (("step", -5, '"step" is -5: expected a whole number in 0..2^53'),
                           ("step", 1e300, '"step" is 1.0000000000000001e+300'), ("step", 2.5, '"step" is 2.5'),
                           ("step", "2", '"step" is missing or not a number'),
                           ("updates", -1, '"updates" is -1: expected a whole number in 0..the step'),
                           ("updates", 3, '"updates" is 3'), ("optimizer", 7, '"optimizer" is 7: expected 0 (sgd)'),
                           ("buffers", -2, '"buffers" is -2'), ("loss_scale", "abc", '"loss_scale" is not a positive'),
                           ("loss_scale", "-0x1p+16", '"loss_scale" is not a positive'),
                           ("scale_growth", 0.5, '"scale_growth" is 0.5')):
        expect(f"--resume, {key} {val!r}", run + ["--resume", corrupt(f"{key}", setk(key, val))], want)
    expect("--resume, no updates", run + ["--resume", corrupt("noupd", lambda st: st.pop("updates"))],
           '"updates" is missing or not a number')
    expect("--resume, another optimizer", run + ["--resume", corrupt("sgd", setk("optimizer", 0))],
           "made with --optimizer sgd, this run's is adamw")
    expect("--resume, another weight", run + ["--resume", corrupt("name", lambda st: st["weights"].__setitem__(1, "x"))],
           "weight 1 is 'x' in the checkpoint")
    expect("--resume, past the run", run + ["--resume", corrupt("past", setk("step", 9))], "at step 9, past the run's 4")
    expect("--resume, not JSON", run + ["--resume", corrupt("text", arrays=lambda d: write(d + "/state.json", b"{"))],
           "not JSON (a pprt checkpoint's state)")
    expect("--resume, a JSON list", run + ["--resume", corrupt("list", arrays=lambda d: write(d + "/state.json", b"[]"))],
           "is not a pprt checkpoint's state")
    expect("--resume, no state", run + ["--resume", corrupt("nostate", arrays=lambda d: os.remove(d + "/state.json"))],
           "cannot open")
    # the arrays: transposed (same count, another shape), another dtype, missing, cut short
    w = "head.fc.weight"
    expect("--resume, a transposed weight", run + ["--resume", corrupt("transposed", arrays=lambda d: np.save(
        f"{d}/{w}.npy", np.load(f"{d}/{w}.npy").T.copy()))], f"holds f32 [32,10], weight '{w}' is f32 [10,32]")
    expect("--resume, an f64 moment", run + ["--resume", corrupt("f64", arrays=lambda d: np.save(
        f"{d}/{w}.m.npy", np.load(f"{d}/{w}.m.npy").astype(np.float64)))], "holds f64 [10,32]")
    expect("--resume, a missing moment", run + ["--resume", corrupt("nomoment", arrays=lambda d: os.remove(
        f"{d}/{w}.v.npy"))], f"--resume ck_nomoment: cannot open 'ck_nomoment/{w}.v.npy'")
    expect("--resume, a cut array", run + ["--resume", corrupt("cut", arrays=lambda d: write(
        f"{d}/{w}.npy", open(f"{d}/{w}.npy", "rb").read()[:200]))], f"{w}.npy")
    # a FIFO or a directory as state.json: refused at once (pprt opened it with fopen and waited for a writer)
    def special(d, make):
        os.remove(d + "/state.json")
        make(d + "/state.json")
    expect("--resume, state.json a FIFO", run + ["--resume", corrupt("fifo", arrays=lambda d: special(d, os.mkfifo))],
           "it is a FIFO", timeout=20)
    expect("--resume, state.json a directory", run + ["--resume", corrupt("dir", arrays=lambda d: special(d, os.mkdir))],
           "it is a directory")
    r = subprocess.run(run + ["--resume", "ck"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        failures.append(f"--resume of the untouched checkpoint: exit {r.returncode}: {r.stderr.strip()[:300]!r}")
    # another --seed than the checkpoint's run: a warning (the order from here on is not that run's), not a refusal
    r = subprocess.run(run + ["--resume", "ck", "--seed", "5"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or "the checkpoint's run had --seed 0, this one 5" not in r.stderr:
        failures.append(f"--resume with another --seed: exit {r.returncode}, no warning: {r.stderr.strip()[:300]!r}")
    # --checkpoint DIR where something else lies: refused before the first step, the user's files untouched (pprt
    # moved a file or a folder of notes to DIR.old, then failed at the second save)
    save = run[:-1] + ["2", "--save-every", "1", "--checkpoint"]
    write("afile", b"hello\n")
    expect("--checkpoint, a file", save + ["afile"], "'afile' is a regular file, not a checkpoint's folder")
    os.makedirs("notes", exist_ok=True)
    write("notes/notes.txt", b"mine\n")
    expect("--checkpoint, a folder of notes", save + ["notes"], "the folder 'notes' holds 'notes.txt'")
    if open("afile", "rb").read() != b"hello\n" or os.listdir("notes") != ["notes.txt"] or \
            os.path.exists("afile.old") or os.path.exists("notes.old"):
        failures.append("--checkpoint refused, yet the user's file or folder was moved or changed")
    shutil.copytree("ck", "npyonly", ignore=shutil.ignore_patterns("state.json", ".pprt-checkpoint"))
    expect("--checkpoint, weights without a state", save + ["npyonly"], "holds .npy files but no state.json")
    os.symlink("ck", "cklink")
    expect("--checkpoint, a link", save + ["cklink"], "'cklink' is a symbolic link")
    write("ck.tmp", b"")
    expect("--checkpoint, DIR.tmp a file", save + ["ck"], "'ck.tmp' is a regular file")
    os.remove("ck.tmp")
    # a user's folder of arrays named DIR.old: a save would remove it after moving DIR there, so it is refused
    shutil.copytree("ck", "mine.old", ignore=shutil.ignore_patterns("state.json", ".pprt-checkpoint"))
    shutil.copytree("ck", "mine")
    expect("--checkpoint, a user's DIR.old", save + ["mine"], "the folder 'mine.old' holds .npy files that no pprt save")
    if sorted(os.listdir("mine.old")) != sorted(n for n in os.listdir("ck") if n.endswith(".npy")):
        failures.append("--checkpoint mine: the user's mine.old lost files")
    # weights 'w' and 'w.m': under SGD with momentum w's buffer and w.m's value would both be w.m.npy
    if onnx is not None:
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "w.m"],
                                                                                            ["logits"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 2])],
                              initializer=[numpy_helper.from_array(np.ones((4, 2), np.float32), "w"),
                                           numpy_helper.from_array(np.zeros(2, np.float32), "w.m")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        write("wm.onnx", m.SerializeToString())
        subprocess.run([PPCC, "wm.onnx", "--train", "--loss", "cross-entropy:logits", "-o", "wm.plan", "-q"], check=True)
        os.makedirs("wmdata")
        np.save("wmdata/x.npy", np.ones((16, 4), np.float32))
        np.save("wmdata/labels.npy", np.zeros(16, np.int64))
        expect("--checkpoint, weights 'w' and 'w.m'", [PPRT, "wm.plan", "wmdata", "--labels", "wmdata/labels.npy",
               "--steps", "1", "--momentum", "0.9", "--checkpoint", "wmck", "--save-every", "1", "-q"],
               "weight 'w''s first buffer and weight 'w.m''s value would both be the checkpoint's file 'w.m.npy'")
    # an interrupted save (DIR moved aside to DIR.old, a partial DIR.tmp): --resume DIR says where it is; resumed
    # from DIR.old, the next save clears both
    shutil.copytree("ck", "ck2.old")
    os.makedirs("ck2.tmp")
    shutil.copy("ck/state.json", "ck2.tmp/")
    expect("--resume, a save interrupted", run + ["--resume", "ck2"], "give --resume ck2.old")
    r = subprocess.run(run[:-1] + ["3", "--save-every", "1", "--checkpoint", "ck2", "--resume", "ck2.old"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or sorted(n for n in os.listdir(".") if n.startswith("ck2")) != ["ck2"]:
        failures.append(f"resumed from DIR.old: exit {r.returncode}, {r.stderr.strip()[:300]!r}, left "
                        f"{sorted(n for n in os.listdir('.') if n.startswith('ck2'))}")
    os.chdir("..")


checkpoint_cases()


# ---- FIFOs (and other special files) wherever a file is opened: refused at once, never a hang ----
def fifo_cases():
    import stat
    import threading
    d = os.path.join(work, "fifo")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)

    def fifo(*parts):
        path = os.path.join(d, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkfifo(path)
        return path

    def reader(path):
        """Open the FIFO for reading (without waiting for a writer) and drain it in a thread, up to the
        writer's close (a read before any writer came also gives b"": wait for data first)."""
        import time
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        got = []
        stop = threading.Event()

        def drain():
            buf, end = b"", time.time() + 20
            while time.time() < end and not stop.is_set():
                try:
                    b = os.read(fd, 1 << 16)
                except BlockingIOError:
                    b = None
                if b:
                    buf += b
                elif b == b"" and buf:
                    break
                else:
                    time.sleep(0.01)
            got.append(buf)
        t = threading.Thread(target=drain)
        t.daemon = True
        t.start()

        def close():  # the thread ends before the descriptor (whose number may be reused) is closed
            stop.set()
            t.join()
            os.close(fd)
        return close, t, got

    def fifo_expect(name, argv, want, code=2):
        expect("FIFO: " + name, argv, want, code=code, timeout=20)

    M = os.path.join(DIGITS, "model.onnx")
    isfifo = "is not a regular file (it is a FIFO)"
    # ppcc's inputs
    fifo_expect("model", [PPCC, fifo("model.onnx"), "-o", os.path.join(d, "x.plan")], isfifo)
    fifo_expect("--profile", [PPCC, M, "--profile", fifo("prof.json"), "-o", os.path.join(d, "x.plan")], isfifo)
    fifo_expect("--exec-seq", [PPCC, M, "--exec-seq", fifo("seq.txt"), "-o", os.path.join(d, "x.plan")], isfifo)
    if onnx is not None:
        fifo_expect("--const", [PPCC, addw, "-b", "0", "--const", "w=" + fifo("w.pb"), "-o", os.path.join(d, "x.plan")],
                    isfifo)
        p, n = ext_model("fifo", "w.bin")
        wpath = os.path.join(work, "ext_fifo", "w.bin")
        if os.path.lexists(wpath):
            os.remove(wpath)
        os.mkfifo(wpath)
        fifo_expect("external data", [PPCC, p, "-o", os.path.join(d, "x.plan")], isfifo)
    # ppcc's outputs: a plan is written with seeks, so a FIFO is refused even with a reader, before compiling
    fifo_expect("ppcc -o, no reader", [PPCC, M, "-o", fifo("p.plan")], "it is a FIFO, and this file is written with seeks")
    close, t, got = reader(fifo("p2.plan"))
    fifo_expect("ppcc -o, a reader", [PPCC, M, "-o", os.path.join(d, "p2.plan")], "written with seeks")
    close()
    fifo_expect("--report-json, no reader", [PPCC, M, "-o", os.path.join(d, "x.plan"), "--report-json", fifo("r.json")],
                "it is a FIFO that no process reads")
    close, t, got = reader(fifo("r2.json"))
    r = subprocess.run([PPCC, M, "-o", os.path.join(d, "x.plan"), "-q", "--report-json", os.path.join(d, "r2.json")],
                       capture_output=True, text=True, timeout=20)
    t.join(10)
    close()
    if r.returncode != 0 or not got or b'"stages"' not in got[0]:
        failures.append(f"FIFO: --report-json to a FIFO with a reader: exit {r.returncode}, {r.stderr.strip()[:300]!r}")
    r = subprocess.run([PPCC, M, "-o", "/dev/null", "-q"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        failures.append(f"ppcc -o /dev/null: exit {r.returncode}, {r.stderr.strip()[:300]!r}")
    # pprt's inputs
    fifo_expect("plan", [PPRT, fifo("f.plan"), data, "-o", os.path.join(d, "o")], "plan '" + os.path.join(d, "f.plan"))
    fifo_expect("input.npy", [PPRT, "good.plan", os.path.dirname(fifo("whole", "input.npy")), "-o", os.path.join(d, "o")],
                isfifo)
    ps = os.path.join(d, "persample")
    os.makedirs(ps)
    np.save(os.path.join(ps, "a.npy"), np.zeros((1, 8, 8), np.float32))
    fifo("persample", "b.npy")
    fifo_expect("per-sample .npy", [PPRT, "good.plan", ps, "-o", os.path.join(d, "o")], isfifo)
    fifo_expect("--labels", [PPRT, "good.plan", data, "-o", os.path.join(d, "o"), "--labels", fifo("labels.npy")], isfifo)
    if onnx is not None:
        fifo_expect("input_0.pb", [PPRT, "relu.plan", os.path.dirname(fifo("pb", "input_0.pb")), "-o", os.path.join(d, "o")],
                    isfifo)
        ex = os.path.join(d, "pbex")
        os.makedirs(ex)
        write(os.path.join(ex, "input_0.pb"), open("pbdata/input_0.pb", "rb").read())
        fifo("pbex", "output_0.pb")
        fifo_expect("output_0.pb (--check)", [PPRT, "relu.plan", ex, "--check", "-o", os.path.join(d, "o")], isfifo)
        fifo("expdir", "y.npy")
        fifo_expect("--expected", [PPRT, "relu.plan", "pbdata", "--expected", os.path.join(d, "expdir"), "-o",
                                   os.path.join(d, "o")], isfifo)
    if os.path.exists("ref.plan"):
        fifo_expect("--model", [PPRT, "ref.plan", "ref/data", "--model", fifo("model2.onnx"), "-o", os.path.join(d, "o")],
                    isfifo)
    # pprt's outputs: a FIFO at an output's name is written in place when a process reads it, refused at once
    # when none does; other special files are refused before the run
    fifo_expect("output, no reader", [PPRT, "good.plan", data, "-o", os.path.dirname(fifo("out", "logits.npy"))],
                "it is a FIFO that no process reads")
    close, t, got = reader(os.path.join(d, "out", "logits.npy"))
    r = subprocess.run([PPRT, "good.plan", data, "-q", "-o", os.path.join(d, "out")], capture_output=True, text=True,
                       timeout=20)
    t.join(10)
    close()
    subprocess.run([PPRT, "good.plan", data, "-q", "-o", os.path.join(d, "ref")], check=True, timeout=60)
    if r.returncode != 0 or not got or got[0] != open(os.path.join(d, "ref", "logits.npy"), "rb").read():
        failures.append(f"FIFO: an output FIFO with a reader: exit {r.returncode}, {r.stderr.strip()[:300]!r}")
    os.makedirs(os.path.join(d, "outdir", "logits.npy"))
    fifo_expect("output name is a directory", [PPRT, "good.plan", data, "-o", os.path.join(d, "outdir")],
                "it is a directory")
    fifo_expect("-o is a FIFO", [PPRT, "good.plan", data, "-o", fifo("odir")], "output directory")
    fifo_expect("--stats-json, no reader", [PPRT, "good.plan", data, "-q", "-o", os.path.join(d, "o"), "--stats-json",
                                            fifo("stats.json")], "it is a FIFO that no process reads")
    fifo_expect("--profile, no reader", [PPRT, "good.plan", data, "-q", "-o", os.path.join(d, "o"), "--profile",
                                         fifo("prof2.json")], "it is a FIFO that no process reads")
    for f in os.listdir(d):
        if ".tmp." in f:
            failures.append(f"FIFO cases left a temporary file {f}")


fifo_cases()

print(f"bad_inputs: {count - len(failures)}/{count} cases rejected cleanly")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
