#!/usr/bin/env bash
# f32 elementwise steps four elements a thread (--cuda-wide-elementwise on:
# kmath.h pcu_ewv_at, 16-byte loads and stores on a GPU) on cuda-emu:
# tests/cuda/wide_ew_models.py's nodes take the kernel where their shapes
# allow it and only there (--cuda-explain's count against the generator's),
# the outputs are the very bytes of the element-a-thread kernel (off) at
# -pp 1 and 2, and within rtol 1e-5 / atol 1e-6 of ref (NaN where ref has
# NaN); the ONNX node tests of a dozen elementwise ops pass with it (their
# whole-operand cases merge into one dim that the kernel takes). About 20 s.
# usage: wide_elementwise.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
CMP="$PY $SRC/tests/tools/compare_npy.py"
want=$("$PY" "$SRC/tests/cuda/wide_ew_models.py" .)
for pp in 1 2; do "$PPCC" wide_ew.onnx -pp $pp -b 1 -o w$pp.plan -q; done
"$PPRT" w1.plan data --backend ref -q -o ref
"$PPRT" w1.plan data --backend cuda-emu -q -o off1
"$PPRT" w1.plan data --backend cuda-emu -q -o on1 --cuda-wide-elementwise on --cuda-explain 2> explain.txt
got=$(grep -c "elementwise, four a thread" explain.txt || true)
[ "$got" = "$want" ] || fail "--cuda-wide-elementwise on: $got steps four a thread, want $want: $(cat explain.txt)"
"$PPRT" w2.plan data --backend cuda-emu -q -o on2 --cuda-wide-elementwise on
for f in ref/*.npy; do
  b=$(basename "$f")
  cmp -s "on1/$b" "off1/$b" || fail "$b: --cuda-wide-elementwise on gives other bytes than off"
  cmp -s "on1/$b" "on2/$b" || fail "$b: --cuda-wide-elementwise on: -pp 2 gives other bits than -pp 1"
  $CMP "on1/$b" "$f" --rtol 1e-5 --atol 1e-6 > cmp.txt || fail "$b: against ref: $(cat cmp.txt)"
done
for f in test_add test_mul test_sub test_div test_pow test_prelu test_relu test_sigmoid test_tanh test_elu \
         test_leakyrelu test_max_ test_min_ test_sum_; do
  PPRT_EXTRA_ARGS="--backend cuda-emu --cuda-wide-elementwise on" "$PY" "$SRC/tests/conformance/run.py" -j 2 \
    --filter "$f" > "conf_$f.txt" 2>&1 || fail "node tests '$f' with --cuda-wide-elementwise on: $(tail -20 "conf_$f.txt")"
done
echo "wide elementwise: $got steps four a thread, the same bytes as off at -pp 1 and 2, within 1e-5 of ref; node tests pass"
