"""What the two command-line tests share (tests/bad/cli.py: the GNU
conventions, bad usage, output paths; tests/cli/options.py: every option of
both helps in both forms): the work folder, the check counter, running a
tool, comparing outputs, and the files their rows use (two small models, an
exec_seq file and the digits plans). Env: PPCC, PPRT, SRC."""
import filecmp
import os
import subprocess
import sys

import numpy as np

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
DIGITS = os.path.join(SRC, "samples/digits")
M = os.path.join(DIGITS, "model.onnx")
DATA = os.path.join(DIGITS, "data")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures, finish  # noqa: E402,F401  (the tests import them from here)
import testlib  # noqa: E402


def start(work):
    """A fresh work folder, made the current one; exit 77 (skipped) without onnx."""
    testlib.start(work, "cli")


def run(argv, timeout=300, env=None):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def pprt_row_argv(args, extra, f, output):
    """pprt's command line for an option row: args (the option as spelled)
    on base.plan and the digits data, with the row's extra arguments, where
    "--plan P" picks another plan and "--no-data" leaves the data out; the
    outputs go to f.out (to f itself when the row is the output option,
    `output` true). Returns (argv, the outputs' folder)."""
    plan, data, more = "base.plan", [DATA], list(extra)
    if "--plan" in more:
        plan = more[more.index("--plan") + 1]
        del more[more.index("--plan"):more.index("--plan") + 2]
    if "--no-data" in more:
        data = []
        more.remove("--no-data")
    out = f if output else f + ".out"
    return [PPRT, plan] + data + list(args) + more + ([] if output else ["-o", out]), out


def same_tree(a, b):
    """Two files, or two folders holding the same files with the same bytes."""
    if os.path.isdir(a) != os.path.isdir(b):
        return False
    if not os.path.isdir(a):
        return os.path.exists(a) and os.path.exists(b) and filecmp.cmp(a, b, shallow=False)
    if sorted(os.listdir(a)) != sorted(os.listdir(b)):
        return False
    return all(same_tree(os.path.join(a, n), os.path.join(b, n)) for n in os.listdir(a))


def small_model(path):
    """y = sigmoid(tanh(relu(x W1) W2) W3), x [batch, seq, 4]: several kernels to split."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 3])
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (4, 8)), ("w2", (8, 8)), ("w3", (8, 3)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["h2"]), helper.make_node("Tanh", ["h2"], ["t2"]),
             helper.make_node("MatMul", ["t2", "w3"], ["h3"]), helper.make_node("Sigmoid", ["h3"], ["y"])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "small", [x], [y], inits),
                                opset_imports=[helper.make_opsetid("", 13)]), path)


def const_model(path):
    """y = relu(x * s), s bound by --const (its value in s.pb)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "c", [x, s], [y]),
                                opset_imports=[helper.make_opsetid("", 13)]), path)
    with open("s.pb", "wb") as f:
        f.write(numpy_helper.from_array(np.array([1, -2, 3, 4], np.float32), "s").SerializeToString())


def fixtures():
    """small.onnx, const.onnx (+ s.pb), seq.txt, and digits compiled as
    one.plan (-pp 1, with its profile prof.json), base.plan (-pp 2),
    ref.plan (-pp 2 --ref-weights) and train.plan (--train -pp 2, rows of 8;
    its data tdata/: digits' first 64 samples and their labels)."""
    small_model("small.onnx")
    const_model("const.onnx")
    with open("seq.txt", "w") as f:
        f.write("stem\nSPLIT_NODE\nblock\nhead\n")
    r = run([PPCC, M, "-q", "-o", "one.plan"])
    check(r.returncode == 0, f"digits -pp 1: {r.stderr}")
    r = run([PPRT, "one.plan", DATA, "-q", "-o", "one.out", "--profile", "prof.json"])
    check(r.returncode == 0, f"digits profile: {r.stderr}")
    r = run([PPCC, M, "-pp", "2", "-q", "-o", "base.plan"])
    check(r.returncode == 0, f"digits -pp 2: {r.stderr}")
    r = run([PPCC, M, "-pp", "2", "-q", "--ref-weights", "-o", "ref.plan"])
    check(r.returncode == 0, f"digits --ref-weights: {r.stderr}")
    r = run([PPCC, M, "-pp", "2", "-b", "8", "--train", "--loss", "cross-entropy:logits", "-q", "-o", "train.plan"])
    check(r.returncode == 0, f"digits --train: {r.stderr}")
    os.makedirs("wts", exist_ok=True)  # a weight for --save-onnx --weights
    np.save("wts/head.fc.bias.npy", np.zeros(10, np.float32))
    os.makedirs("tdata", exist_ok=True)
    np.save("tdata/input.npy", np.load(os.path.join(DATA, "input.npy"))[:64])
    np.save("tdata/labels.npy", np.load(os.path.join(os.path.dirname(DATA), "labels.npy"))[:64])
