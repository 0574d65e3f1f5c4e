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
for pp in 1 2; do "$PPCC" wide_ew.onnx -pp $pp -b 1 -o w$pp.plan -q; done
"$PPRT" w1.plan data --backend ref -q -o ref
"$PPRT" w1.plan data --backend cuda-emu -q -o off1
"$PPRT" w1.plan data --backend cuda-emu -q -o on1 --cuda-wide-elementwise on --cuda-explain 2> explain.txt
got=$(grep -c "elementwise, 16 bytes a thread" explain.txt || true)
[ "$got" = "$want" ] || fail "--cuda-wide-elementwise on: $got steps four a thread, want $want: $(cat explain.txt)"
"$PPRT" w2.plan data --backend cuda-emu -q -o on2 --cuda-wide-elementwise on
for f in ref/*.npy; do
  b=$(basename "$f")
  cmp -s "on1/$b" "off1/$b" || fail "$b: --cuda-wide-elementwise on gives other bytes than off"
  cmp -s "on1/$b" "on2/$b" || fail "$b: --cuda-wide-elementwise on: -pp 2 gives other bits than -pp 1"
  $CMP "on1/$b" "$f" --rtol 1e-5 --atol 1e-6 > cmp.txt || fail "$b: against ref: $(cat cmp.txt)"
done
# f16: eight elements a thread, the same bytes as the element kernel, -pp 2 as -pp 1, near ref (half's rounding)
for pp in 1 2; do "$PPCC" wide_ew_f16.onnx -pp $pp -b 1 -o h$pp.plan -q; done
"$PPRT" h1.plan data16 --backend ref -q -o href
"$PPRT" h1.plan data16 --backend cuda-emu -q -o hoff1
"$PPRT" h1.plan data16 --backend cuda-emu -q -o hon1 --cuda-wide-elementwise on --cuda-explain 2> explain16.txt
got16=$(grep -c "elementwise, 16 bytes a thread" explain16.txt || true)
[ "$got16" = "$want16" ] || fail "f16, --cuda-wide-elementwise on: $got16 steps 16 bytes a thread, want $want16: $(cat explain16.txt)"
"$PPRT" h2.plan data16 --backend cuda-emu -q -o hon2 --cuda-wide-elementwise on
for f in href/*.npy; do
  b=$(basename "$f")
  cmp -s "hon1/$b" "hoff1/$b" || fail "f16 $b: --cuda-wide-elementwise on gives other bytes than off"
  cmp -s "hon1/$b" "hon2/$b" || fail "f16 $b: --cuda-wide-elementwise on: -pp 2 gives other bits than -pp 1"
  $CMP "hon1/$b" "$f" --rtol 2e-3 --atol 1e-3 > cmp.txt || fail "f16 $b: against ref: $(cat cmp.txt)"
done
for f in test_add test_mul test_sub test_div test_pow test_prelu test_relu test_sigmoid test_tanh test_elu \
         test_leakyrelu test_max_ test_min_ test_sum_; do
  PPRT_EXTRA_ARGS="--backend cuda-emu --cuda-wide-elementwise on" "$PY" "$SRC/tests/conformance/run.py" -j 2 \
    --filter "$f" > "conf_$f.txt" 2>&1 || fail "node tests '$f' with --cuda-wide-elementwise on: $(tail -20 "conf_$f.txt")"
done
echo "wide elementwise: $got f32 steps four a thread and $got16 f16 steps eight a thread, the same bytes as off at -pp 1 and 2, within 1e-5 (f16: 2e-3) of ref; node tests pass"
