"""benchlib.py: what the Python benchmarks in bench/ share: running a tool,
exporting a torchvision model (or taking one exported before from
MODEL_DIR/NAME/model.onnx), the CPU's name, input data tiled to a sample
count (also from the shell scripts: `benchlib.py tile SRC DST N`), a pprt
--profile summed by op type (`benchlib.py by_op PROFILE LABEL BATCH`)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(argv, code=0):
    """Run argv; its exit status must be `code`, else RuntimeError with its stderr's end."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != code:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode} (want {code}): {r.stderr.strip()[-500:]}")
    return r


def export(name, work):
    """The path of NAME's model.onnx: MODEL_DIR's when there, else exported
    into WORK by tests/models/export_torchvision.py (random weights)."""
    mine = os.path.join(os.environ.get("MODEL_DIR", ""), name)
    if os.environ.get("MODEL_DIR") and os.path.exists(os.path.join(mine, "model.onnx")):
        return os.path.join(mine, "model.onnx")
    d = os.path.join(work, name)
    sh([sys.executable, os.path.join(ROOT, "tests/models/export_torchvision.py"), "--model", name, "--out", d,
        "--batch", "2"])
    return os.path.join(d, "model.onnx")


def cpu_name():
    lscpu = sh(["lscpu"]).stdout
    return next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name:")), "?")


def each_model(models, bench_model):
    """bench_model(name, work) for each model, in one temporary directory;
    a model whose export or run fails is reported and skipped."""
    import tempfile
    out = []
    with tempfile.TemporaryDirectory() as work:
        for name in models:
            try:
                out.append(bench_model(name, work))
            except RuntimeError as e:
                print(f"{name}: skipped: {e}", file=sys.stderr)
    return out


def tile(src, dst, n):
    """Each .npy of directory src repeated along its first axis and cut to n rows, into directory dst."""
    import numpy as np
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".npy"):
            a = np.load(os.path.join(src, f))
            np.save(os.path.join(dst, f), np.concatenate([a] * (-(-n // a.shape[0])))[:n])


def by_op(profile):
    """pprt --profile's milliseconds per micro-batch summed by op type (a Counter): the node name's last part up
    to '_' (a Cast ppcc made is 'to', a gradient node its op)"""
    import collections
    import json
    agg = collections.Counter()
    for k, v in json.load(open(profile))["nodes"].items():
        agg[k.rsplit("/", 1)[-1].split("_")[0]] += v
    return agg


if __name__ == "__main__":
    if sys.argv[1:2] == ["tile"] and len(sys.argv) == 5:
        tile(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1:2] == ["by_op"] and len(sys.argv) == 5:
        agg = by_op(sys.argv[2])
        print(f"{sys.argv[3]}, ms per micro-batch of {sys.argv[4]}: {sum(agg.values()):.2f};",
              ", ".join(f"{k} {v:.2f}" for k, v in agg.most_common(8)))
    else:
        sys.exit("usage: benchlib.py tile SRC DST N | benchlib.py by_op PROFILE LABEL BATCH")
