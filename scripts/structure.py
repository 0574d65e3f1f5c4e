#!/usr/bin/env python3
"""structure.py SOURCE_DIR: the structural rules of issue 53, checked.

- no C function (body braces at file level) longer than MAX_LINES lines in
  runtime/ and tools/ (.c, .h, .cu);
- no numbered `case N:` in the CUDA launcher (runtime/cuda/kernels.cu): its
  cases come from kernels.def's rows;
- no vector intrinsics in runtime/cpu/ (the reference kernels are plain C;
  pprt's own vector kernels live in runtime/dnnl/kernels/).

Prints each breach and exits 1, else says what it checked and exits 0.
Comments, strings and character literals are blanked before braces are
counted, so a brace in them does not count.
"""
import os
import re
import sys

MAX_LINES = 120


def blank(src):
    """src with comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src[i] in "\"'":
            j = i + 1
            while j < n and src[j] != src[i] and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j += 1
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


def functions(path):
    """(name, first line, lines) of each file-level brace block that follows a parameter list."""
    lines = blank(open(path, errors="replace").read()).split("\n")
    depth, start = 0, None
    for ln, line in enumerate(lines, 1):
        for ch in line:
            if ch == "{":
                if depth == 0:
                    start = ln
                depth += 1
            elif ch == "}" and depth > 0:
                depth -= 1
                if depth == 0 and start is not None:
                    head = " ".join(lines[max(0, start - 4):start])
                    head = head[:head.rfind("{")] if "{" in head else head
                    # a function: its head ends with a parameter list (no '=' of an initializer)
                    if re.search(r"\)\s*(__attribute__\s*\(\(.*\)\)\s*)?$", head.strip()) and "=" not in lines[start - 1]:
                        names = [w for w in re.findall(r"(\w+)\s*\(", head)
                                 if w not in ("if", "for", "while", "switch", "sizeof", "return", "__attribute__")]
                        yield (names[0] if names else "?"), start, ln - start + 1
                    start = None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad, n_fn = [], 0
    for top in ("runtime", "tools"):
        for dp, _, fs in os.walk(os.path.join(root, top)):
            for f in sorted(fs):
                if not f.endswith((".c", ".h", ".cu")):
                    continue
                p = os.path.join(dp, f)
                for name, at, length in functions(p):
                    n_fn += 1
                    if length > MAX_LINES:
                        bad.append(f"{os.path.relpath(p, root)}:{at}: {name} is {length} lines (at most {MAX_LINES})")
    launcher = os.path.join(root, "runtime", "cuda", "kernels.cu")
    for ln, line in enumerate(blank(open(launcher).read()).split("\n"), 1):
        if re.search(r"\bcase\s+[0-9]+\s*:", line):
            bad.append(f"runtime/cuda/kernels.cu:{ln}: a numbered case (kernels.def's rows make them)")
    for dp, _, fs in os.walk(os.path.join(root, "runtime", "cpu")):
        for f in sorted(fs):
            p = os.path.join(dp, f)
            for ln, line in enumerate(blank(open(p, errors="replace").read()).split("\n"), 1):
                if re.search(r"immintrin|x86intrin|\b_mm\d*_\w+|\b__m(128|256|512)", line):
                    bad.append(f"{os.path.relpath(p, root)}:{ln}: vector intrinsics in the reference kernels")
    for b in bad:
        print(b)
    print(f"structure: {n_fn} functions in runtime/ and tools/, the CUDA launcher, runtime/cpu/: "
          f"{len(bad)} breach{'es' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
