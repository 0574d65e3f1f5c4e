"""harness.py: what the test scripts of tests/export, tests/report and
tests/trace share: running a command, the zoo's cached exports, and the
closing lines ("FAIL: ..." per problem, then "N passed, M failed")."""
import os
import subprocess
import sys

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "zoo.py")


def run(argv, timeout=300):
    """stdout of argv; an exception naming the command and its error if it fails"""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def zoo_dir(name, work):
    """WORKDIR/NAME holding the zoo model NAME (model.onnx, data/, expected/),
    exported by tests/models/zoo.py unless already there (as run_zoo.py does)"""
    d = os.path.join(work, name)
    if not os.path.exists(os.path.join(d, "expected")):
        r = subprocess.run([sys.executable, ZOO, "export", name, d, "--batch", "2"], capture_output=True, text=True,
                           timeout=1800)
        if r.returncode != 0:
            raise RuntimeError("export failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    return d


def finish(problems, cases):
    """print the problems and the closing line; the exit status"""
    for p in problems:
        print("FAIL:", p)
    failed = min(len(problems), cases)
    print(f"{cases - failed} passed, {failed} failed")
    return 1 if problems else 0
