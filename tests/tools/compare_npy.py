#!/usr/bin/python3
"""compare_npy.py - compare two .npy files elementwise (test helper).

Usage: compare_npy.py GOT.npy WANT.npy [--rtol 1e-3] [--atol 1e-4] [--exact]
Checks shape and dtype, then |got - want| <= atol + rtol * |want|
(or byte-exact equality with --exact). Prints one summary line:
  max_abs_err=... max_rel_err=... shape=... OK|MISMATCH (n/total ...)
max_rel_err is taken over elements whose wanted value is non-zero. In the
tolerance mode NaN matches NaN and an infinity only matches itself; --exact
compares the raw bytes (so -0.0 != 0.0 and NaN payloads matter).
Exit status: 0 match, 1 mismatch (incl. shape/dtype/NaN differences),
2 bad usage or unreadable file.
"""
import argparse
import sys

import numpy as np


class UsageParser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"compare_npy.py: error: {message}", file=sys.stderr)
        sys.exit(2)


def load(path, what):
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        print(f"error: cannot read {what} file '{path}': {e}", file=sys.stderr)
        sys.exit(2)


def main():
    ap = UsageParser(description="compare two .npy arrays")
    ap.add_argument("got")
    ap.add_argument("want")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--exact", action="store_true",
                    help="require bytewise-identical contents")
    a = ap.parse_args()
    if a.rtol < 0 or a.atol < 0:
        ap.error("--rtol and --atol must be non-negative")

    got = load(a.got, "GOT")
    want = load(a.want, "WANT")
    shape = "x".join(str(d) for d in want.shape) or "scalar"
    if got.shape != want.shape:
        print(f"shape mismatch: got {got.shape} want {want.shape} MISMATCH")
        return 1
    if got.dtype != want.dtype:
        print(f"dtype mismatch: got {got.dtype} want {want.dtype} "
              f"shape={shape} MISMATCH")
        return 1

    total = want.size
    numeric = got.dtype.kind in "biufc"
    if numeric:
        ctype = np.complex128 if got.dtype.kind == "c" else np.float64
        g = got.astype(ctype).reshape(-1)
        w = want.astype(ctype).reshape(-1)
        gnan, wnan = np.isnan(g), np.isnan(w)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(g == w, 0.0, np.abs(g - w))  # equal infs -> 0
        diff[gnan & wnan] = 0.0                          # NaN == NaN here
        nan_mismatch = gnan ^ wnan
        awant = np.abs(w)
        ok_d = diff[~nan_mismatch]
        max_abs = float(ok_d.max()) if ok_d.size else 0.0
        # relative error is only defined where want != 0
        rel_sel = ~nan_mismatch & (awant > 0) & np.isfinite(awant)
        max_rel = float((diff[rel_sel] / awant[rel_sel]).max()) \
            if rel_sel.any() else 0.0
        if nan_mismatch.any():
            max_abs = max_rel = float("nan")
    else:
        max_abs = max_rel = float("nan")

    if a.exact:
        isz = got.dtype.itemsize
        gb = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
        wb = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
        bad_mask = (gb.reshape(total, isz) != wb.reshape(total, isz)).any(
            axis=1) if total and isz else np.zeros(total, bool)
    elif numeric:
        with np.errstate(invalid="ignore"):
            bad_mask = ~(diff <= a.atol + a.rtol * awant)
        bad_mask[gnan & wnan] = False
        # an infinity only matches the same infinity (tolerance is inf too)
        bad_mask |= (np.isinf(g) | np.isinf(w)) & (g != w)
    else:
        bad_mask = (got != want).reshape(-1)
    nbad = int(np.count_nonzero(bad_mask))
    verdict = "OK" if nbad == 0 else "MISMATCH"
    print(f"max_abs_err={max_abs:.6g} max_rel_err={max_rel:.6g} "
          f"shape={shape} {verdict} ({nbad}/{total} elements out of "
          f"tolerance)")
    return 0 if nbad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
