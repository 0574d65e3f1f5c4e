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
counts=$("$PY" "$SRC/tests/cuda/wide_ew_models.py" .)
want=$(echo "$counts" | sed -n 1p) want16=$(echo "$counts" | sed -n 2p)
# ab TAG MODEL DATA WANT RTOL ATOL: the model at -pp 1 and 2, the wide kernel on and off, against ref; $got: the steps
ab() {
  local t=$1 m=$2 d=$3 want=$4 rtol=$5 atol=$6 f b
  for pp in 1 2; do "$PPCC" "$m" -pp $pp -b 1 -o $t$pp.plan -q; done
  "$PPRT" ${t}1.plan "$d" --backend ref -q -o ${t}ref
  "$PPRT" ${t}1.plan "$d" --backend cuda-emu -q -o ${t}off1
  "$PPRT" ${t}1.plan "$d" --backend cuda-emu -q -o ${t}on1 --cuda-wide-elementwise on --cuda-explain 2> explain_$t.txt
  got=$(grep -c "elementwise, 16 bytes a thread" explain_$t.txt || true)
  [ "$got" = "$want" ] || fail "$t: --cuda-wide-elementwise on: $got steps 16 bytes a thread, want $want: $(cat explain_$t.txt)"
  "$PPRT" ${t}2.plan "$d" --backend cuda-emu -q -o ${t}on2 --cuda-wide-elementwise on
  for f in ${t}ref/*.npy; do
    b=$(basename "$f")
    cmp -s "${t}on1/$b" "${t}off1/$b" || fail "$t $b: --cuda-wide-elementwise on gives other bytes than off"
    cmp -s "${t}on1/$b" "${t}on2/$b" || fail "$t $b: --cuda-wide-elementwise on: -pp 2 gives other bits than -pp 1"
    $CMP "${t}on1/$b" "$f" --rtol $rtol --atol $atol > cmp.txt || fail "$t $b: against ref: $(cat cmp.txt)"
  done
}
ab f32 wide_ew.onnx data "$want" 1e-5 1e-6; got32=$got
# f16: eight elements a thread, near ref (half's rounding)
ab f16 wide_ew_f16.onnx data16 "$want16" 2e-3 1e-3; got16=$got
for f in test_add test_mul test_sub test_div test_pow test_prelu test_relu test_sigmoid test_tanh test_elu \
         test_leakyrelu test_max_ test_min_ test_sum_; do
  PPRT_EXTRA_ARGS="--backend cuda-emu --cuda-wide-elementwise on" "$PY" "$SRC/tests/conformance/run.py" -j 2 \
    --filter "$f" > "conf_$f.txt" 2>&1 || fail "node tests '$f' with --cuda-wide-elementwise on: $(tail -20 "conf_$f.txt")"
done
echo "wide elementwise: $got32 f32 steps four a thread and $got16 f16 steps eight a thread, the same bytes as off at -pp 1 and 2, within 1e-5 (f16: 2e-3) of ref; node tests pass"
