#!/usr/bin/env python3
"""own_model.py - the README's "Your own model" steps, run as written.

Usage: own_model.py WORK    (env: PPCC, PPRT, PY, SRC as tests/CMakeLists.txt sets)

Takes the fenced ```python and ```sh blocks of README.md's section "Your own
model" in order and runs them in WORK (emptied first): each python block
with $PY (else this interpreter), each sh block with bash, its commands
`ppcc` and `pprt` replaced by $PPCC and $PPRT. Every block must exit 0, the
last block that runs `pprt --check` must have printed a --check line ending
in OK for every output, with no MISMATCH, and the training block (`--epochs`)
must have printed its loss going down. Exit 77 (skip) when torch or onnxruntime is
missing."""
import os
import re
import shutil
import subprocess
import sys

SECTION = "## Your own model"
FENCE = re.compile(r"^```(\w*)\s*$")
COMMAND = re.compile(r"(^|[;&|(]\s*|\$\(\s*)(ppcc|pprt)\b", re.M)


def blocks(readme):
    text = open(readme, encoding="utf-8").read()
    if SECTION not in text:
        sys.exit(f"{readme}: no section '{SECTION}'")
    body = text.split(SECTION, 1)[1]
    body = re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]
    out, lang, cur = [], None, None
    for line in body.split("\n"):
        m = FENCE.match(line)
        if m and cur is None:
            lang, cur = m.group(1), []
        elif line.strip() == "```" and cur is not None:
            out.append((lang, "\n".join(cur) + "\n"))
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    work = os.path.abspath(sys.argv[1])
    src = os.environ.get("SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    py = os.environ.get("PY") or sys.executable
    ppcc, pprt = os.environ.get("PPCC"), os.environ.get("PPRT")
    if not ppcc or not pprt:
        sys.exit("own_model.py: PPCC and PPRT must name the built tools")
    have = subprocess.run([py, "-c", "import torch, onnxruntime, numpy"], capture_output=True)
    if have.returncode != 0:
        print("skip: torch, onnxruntime or numpy missing from", py)
        return 77
    steps = blocks(os.path.join(src, "README.md"))
    kinds = [lang for lang, _ in steps]
    if "python" not in kinds or "sh" not in kinds:
        sys.exit(f"README.md's '{SECTION}' needs ```python and ```sh blocks; it has {kinds}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    last = ""
    for k, (lang, code) in enumerate(steps):
        if lang == "python":
            path = os.path.join(work, f"step{k}.py")
            open(path, "w").write(code)
            cmd = [py, path]
        elif lang == "sh":
            code = COMMAND.sub(lambda m: m.group(1) + {"ppcc": '"$PPCC"', "pprt": '"$PPRT"'}[m.group(2)], code)
            path = os.path.join(work, f"step{k}.sh")
            open(path, "w").write("set -euo pipefail\n" + code)
            cmd = ["bash", path]
        else:
            continue  # output shown in the README, not a step
        print(f"--- step {k} ({lang}):\n{code.rstrip()}", flush=True)
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PPCC=ppcc, PPRT=pprt))
        print(r.stdout + r.stderr, end="", flush=True)
        if r.returncode != 0:
            print(f"FAIL: step {k} ({lang}) exited {r.returncode}")
            return 1
        if lang == "sh" and "--check" in code:
            last = r.stdout + r.stderr
        if lang == "sh" and "--epochs" in code:
            m = re.search(r"loss ([0-9.]+) at the first step, ([0-9.]+) at the last", r.stdout)
            if not m or not float(m.group(2)) < float(m.group(1)):
                print("FAIL: the training step printed no falling loss")
                return 1
    checks = [l for l in last.splitlines() if l.startswith("check:")]
    if not checks or any(not l.endswith(": OK") for l in checks) or "MISMATCH" in last:
        print("FAIL: the last step printed no passing --check line for every output")
        return 1
    print(f"ok: README's '{SECTION}' ran as written ({len(steps)} blocks; {len(checks)} outputs checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
