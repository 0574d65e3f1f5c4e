#!/usr/bin/env bash
# The recipe for a new float unary op (ir/ops_unary.def) is the whole story:
# in a scratch copy of the tree, one row is added (a made-up op, PpTestCube:
# alpha * x^3, attribute alpha, default 2) and nothing else; ppcc and pprt
# are built there, and the op runs on every backend of that build (ref, dnnl,
# cuda-emu; cuda's kernels are compiled with it where nvcc is found) and
# matches NumPy. With PP_RECIPE_KEEP=1 the scratch tree is left for a look.
# Environment: SRC (the source tree), PY (a Python with numpy and onnx).
set -euo pipefail
SRC=${SRC:?} PY=${PY:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pp_recipe.XXXXXX")
[ "${PP_RECIPE_KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
tar -C "$SRC" --exclude=./build --exclude='./build*' --exclude=./.venv --exclude=./.git -cf - . | tar -C "$tmp" -xf -
mkdir -p "$tmp/src"
shopt -s dotglob
for f in "$tmp"/*; do [ "$f" = "$tmp/src" ] || mv "$f" "$tmp/src/"; done
cd "$tmp/src"

# the row: all a float unary op is
cat >>ir/ops_unary.def <<'ROW'
PP_UNARY(PPTESTCUBE,      "PpTestCube",      0, 3, "alpha", 2.0f, NULL, 0.0f,
         P0 * v * v * v)
ROW

cmake -S . -B ../build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build ../build --target ppcc pprt -j "$(nproc)" >../build.log 2>&1 || { tail -40 ../build.log; exit 1; }

"$PY" - "$tmp" <<'PYEOF'
import os, subprocess, sys
import numpy as np, onnx
from onnx import helper, TensorProto
tmp = sys.argv[1]
ppcc, pprt = f"{tmp}/build/ppcc", f"{tmp}/build/pprt"
backends = subprocess.run([pprt, "--backend", "list"], capture_output=True, text=True).stdout.split()
backends = [b for b in ("ref", "dnnl", "cuda-emu") if b in backends]
assert "ref" in backends and "cuda-emu" in backends, backends
rng = np.random.default_rng(1)
checked = 0
for tt, nt, tol in ((TensorProto.FLOAT, np.float32, 1e-6), (TensorProto.DOUBLE, np.float64, 1e-15)):
    for attrs, alpha in (({}, 2.0), ({"alpha": -0.75}, -0.75)):
        node = helper.make_node("PpTestCube", ["x"], ["y"], **attrs)
        # a Relu after it: a chain through another op, so cuda-emu runs it inside a stage
        g = helper.make_graph([node, helper.make_node("Relu", ["y"], ["z"])], "cube",
                              [helper.make_tensor_value_info("x", tt, ["N", 300])],
                              [helper.make_tensor_value_info("z", tt, ["N", 300])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
        onnx.save(m, f"{tmp}/cube.onnx")
        x = (rng.standard_normal((6, 300)) * 4).astype(nt)
        x.flat[:4] = [0.0, -0.0, np.inf, np.nan]
        os.makedirs(f"{tmp}/in", exist_ok=True)
        np.save(f"{tmp}/in/x.npy", x)
        want = np.maximum(alpha * x.astype(np.float64) ** 3, 0)
        subprocess.run([ppcc, f"{tmp}/cube.onnx", "-pp", "2", "-b", "2", "-o", f"{tmp}/cube.bin", "-q"], check=True)
        for be in backends:
            out = f"{tmp}/out_{be}"
            subprocess.run([pprt, f"{tmp}/cube.bin", f"{tmp}/in", "-o", out, "-q", "--backend", be], check=True)
            got = np.load(f"{out}/z.npy")
            assert got.dtype == nt and got.shape == x.shape, (be, got.dtype, got.shape)
            ok = np.isclose(got, want, rtol=tol, atol=0, equal_nan=True)
            if not ok.all():
                i = int(np.argmin(ok.ravel()))
                sys.exit(f"recipe: PpTestCube on {be} ({nt.__name__}, alpha {alpha}): {int((~ok).sum())} of "
                         f"{ok.size} values off, e.g. x={x.ravel()[i]!r}: got {got.ravel()[i]!r}, want {want.ravel()[i]!r}")
            checked += 1
print(f"recipe: PpTestCube (one row in ir/ops_unary.def) right on {', '.join(backends)}: {checked} runs")
PYEOF
