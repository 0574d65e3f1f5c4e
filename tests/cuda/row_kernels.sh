#!/usr/bin/env bash
# The row kernels in one block (--cuda-row-kernels on: Softmax, LogSoftmax
# and LayerNorm over the last axis as one launch of a block per row, kmath.h
# "Rows in one block") on cuda-emu, which runs their phases with the GPU's
# barriers between them: tests/cuda/row_models.py's ViT-like rows (197 and
# 768 floats, rows of 1000, a NaN) take the new kernels (--cuda-explain
# names them) and give ref's outputs within rtol 1e-5 / atol 1e-6, the same
# bits at -pp 2 as at -pp 1; the ONNX node tests of Softmax, LogSoftmax,
# LayerNormalization and RMSNormalization pass with it (their expected outputs); the residual
# Adds before two of the LayerNorms run inside their steps (no step of
# their own), the same bits as the split that separates them. About 10 s.
# usage: row_kernels.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
CMP="$PY $SRC/tests/tools/compare_npy.py"
"$PY" "$SRC/tests/cuda/row_models.py" .
for pp in 1 2; do "$PPCC" rows.onnx -pp $pp -b 1 -o r$pp.plan -q; done
"$PPRT" r1.plan data --backend ref -q -o ref
"$PPRT" r1.plan data --backend cuda-emu -q -o on1 --cuda-row-kernels on --cuda-explain 2> explain.txt
n=$(grep -c "in one block" explain.txt || true)
[ "$n" = 6 ] || fail "--cuda-row-kernels on: $n steps in one block, want 6 (four LayerNorms, Softmax, LogSoftmax): $(cat explain.txt)"
# the two residual Adds run inside their LayerNorms' steps (plan_add_ln): no step of their own
! grep -q "node '/res[12]/Add'" explain.txt || fail "--cuda-row-kernels on: a residual Add kept its own step: $(cat explain.txt)"
"$PPRT" r2.plan data --backend cuda-emu -q -o on2 --cuda-row-kernels on
# a cut between the first residual Add and its LayerNorm: the Add its own step in stage 0, the same bits
"$PPCC" rows.onnx -b 1 --split-at ln3 -o r3.plan -q
"$PPRT" r3.plan data --backend cuda-emu -q -o on3 --cuda-row-kernels on --cuda-explain 2> explain3.txt
grep -q "stage 0 node '/res1/Add': elementwise" explain3.txt || fail "--split-at ln3: the first residual Add is not its own step in stage 0: $(cat explain3.txt)"
for f in ref/*.npy; do
  b=$(basename "$f")
  $CMP "on1/$b" "$f" --rtol 1e-5 --atol 1e-6 > cmp.txt || fail "$b: --cuda-row-kernels on against ref: $(cat cmp.txt)"
  cmp -s "on1/$b" "on2/$b" || fail "$b: --cuda-row-kernels on: -pp 2 gives other bits than -pp 1"
  cmp -s "on1/$b" "on3/$b" || fail "$b: --cuda-row-kernels on: the Add apart from its LayerNorm gives other bits"
done
for f in softmax layer_norm rms_normalization; do
  PPRT_EXTRA_ARGS="--backend cuda-emu --cuda-row-kernels on" "$PY" "$SRC/tests/conformance/run.py" -j 2 --filter "$f" \
    > conf_$f.txt 2>&1 || fail "node tests '$f' with --cuda-row-kernels on: $(tail -20 conf_$f.txt)"
  grep "no regression" conf_$f.txt
done
echo "row kernels: 6 steps in one block, within 1e-5 of ref, -pp 2 the same bits; node tests pass"
