"""What the Python tests share: a fresh work folder, the skip when onnx is
missing (exit 77, which ctest counts as skipped), a list of failures with a
count of checks, the closing report (exit 1 on a failure), and the backends
a pprt was built with. A test puts
tests/ on sys.path and imports what it uses."""
import os
import shutil
import subprocess
import sys

failures = []
_count = [0]


def start(work, name):
    """A fresh work folder, made the current one; exit 77 without onnx."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    try:
        import onnx  # noqa: F401
    except ImportError:
        print(f"{name}: onnx not importable; skipped")
        sys.exit(77)


def check(cond, msg):
    _count[0] += 1
    if not cond:
        failures.append(msg)


def count():
    return _count[0]


def finish(name):
    """Each failure on a line and exit 1, or the count of checks passed."""
    if failures:
        print(f"{name}: {len(failures)} of {_count[0]} checks failed:")
        for f in failures:
            print("  FAIL: " + f)
        sys.exit(1)
    print(f"{name}: {_count[0]} checks passed")


def backends(pprt, names=("ref", "dnnl", "cuda-emu")):
    """Those of names this pprt was built with (`pprt --backend B --version` exits 0)."""
    return [b for b in names
            if subprocess.run([pprt, "--backend", b, "--version"], capture_output=True).returncode == 0]
