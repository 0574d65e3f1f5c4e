#!/usr/bin/env bash
# --cuda-stride-views on (issue 54: no copy that a stride can express) on
# cuda-emu, whose product sums in one order whatever the operands' layout, so
# a fold must give the very bytes of the copy it replaces:
#   - tests/cuda/views_models.py's patterns (a transposed operand, a Slice and
#     a Gather of one index along a batch axis, a Split, torch 1.13's
#     MultiheadAttention as ViT-B/16 exports it, a product writing a
#     Transpose's output in the output message, a Gemm over a Gather; and the
#     views that must stay copies: read by a Relu too, a graph output) and
#     fattn_models.py's ViT-like blocks, at micro-batch 1 and 2, -pp 1, 2, 3,
#     --cuda-fused-attention off and on: the same bytes as views off, -pp 2
#     and 3 the same bits as -pp 1, within rtol 1e-4 / atol 1e-5 of ref;
#   - the folds counted by test_counts (every stage linted: each product's
#     matrices inside the region its folded operand names): views.onnx folds
#     16 outputs at micro-batch 1 and 7 at 2, the ViT-like blocks 10 (at
#     micro-batch 2: 4, and 12 with the fused attention's two batch levels,
#     q's Gather over the heads Transpose among them: the kernel applies q's
#     Mul by its scale as it reads it;
#     views.onnx's torch heads at micro-batch 2 likewise: 11, q's Slice,
#     Reshape and Transpose read through its Div by sqrt(d)); with
#     views on at micro-batch 1 only the two that must stay copies (f, g)
#     feed a product; the two copies f and g stay (the Relu's and the graph
#     output's);
#   - digits at -pp 1, 2, 3: the same bytes with views on;
#   - the strided copies that read through a view, widened and as given, the
#     same bytes (test_copies --stride-views).
# About 40 s. usage: stride_views.sh WORK_DIR (env: PPCC, PPRT, PY, SRC, TEST_COUNTS, TEST_COPIES)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}" "${TEST_COUNTS:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
CMP="$PY $SRC/tests/tools/compare_npy.py"
"$PY" "$SRC/tests/cuda/views_models.py" .
"$PY" "$SRC/tests/cuda/fattn_models.py" .
cp -r "$SRC/samples/digits/data" data_digits
cp "$SRC/samples/digits/model.onnx" digits.onnx
folded() { "$TEST_COUNTS" $2 "$1" | tail -1 | sed -n 's/.*; \([0-9]*\) folded.*/\1/p'; }
to_product() { "$TEST_COUNTS" $2 "$1" | tail -1 | sed -n 's/.*strided copies (\([0-9]*\) feeding a product).*/\1/p'; }
# model micro-batch folds(on, -b) copies-feeding-a-product-with-views-on (- : not checked); the models as written
# (ppcc's row-order pass off: its own block below)
for c in "views 1 16 2" "views 2 7 -" "vit 1 10 0" "vit 2 4 -" "digits 16 0 0"; do
  set -- $c; m=$1; b=$2; want=$3; feed=$4
  for pp in 1 2 3; do "$PPCC" $m.onnx -pp $pp -b $b -o ${m}_$b.$pp.plan -q --disable-pass rows; done
  got=$(folded ${m}_$b.1.plan --stride-views) || fail "$m -b $b: test_counts: $("$TEST_COUNTS" --stride-views ${m}_$b.1.plan 2>&1 | grep FAIL)"
  [ "$got" = "$want" ] || fail "$m -b $b: $got outputs folded into products, want $want"
  if [ "$feed" != - ]; then
    f=$(to_product ${m}_$b.1.plan --stride-views)
    [ "$f" = "$feed" ] || fail "$m -b $b: $f strided copies feed a product with views on, want $feed"
  fi
  for pp in 1 2 3; do "$TEST_COUNTS" --stride-views --fused-attention ${m}_$b.$pp.plan > /dev/null || fail "$m -b $b -pp $pp: the lint"; done
  "$PPRT" ${m}_$b.1.plan data_$m --backend ref -q -o ref_${m}_$b
  for fa in off on; do
    "$PPRT" ${m}_$b.1.plan data_$m --backend cuda-emu -q -o off_${m}_${b}_$fa --cuda-fused-attention $fa
    for pp in 1 2 3; do
      "$PPRT" ${m}_$b.$pp.plan data_$m --backend cuda-emu -q -o on_${m}_${b}_${fa}_$pp --cuda-fused-attention $fa \
        --cuda-stride-views on
      for f in off_${m}_${b}_$fa/*.npy; do
        x=$(basename "$f")
        cmp -s "$f" on_${m}_${b}_${fa}_$pp/$x || fail "$m -b $b -pp $pp (fused attention $fa) $x: other bytes with views on than off at -pp 1"
      done
    done
    for f in ref_${m}_$b/*.npy; do
      x=$(basename "$f")
      $CMP on_${m}_${b}_${fa}_1/$x "$f" --rtol 1e-4 --atol 1e-5 > cmp.txt || fail "$m -b $b $x (fused attention $fa) against ref: $(cat cmp.txt)"
    done
  done
  echo "ok: $m -b $b: $got outputs folded, the same bytes as without at -pp 1, 2, 3, fused attention off and on"
done
# the ViT-like blocks at micro-batch 2: the heads ([B, H] over [B, S, 3, H, D]) are no one batch stride for
# cuBLASLt (4 folds: K's Transpose and the output's), but the fused kernel's two batch levels take Q (through
# its scale's Mul, which the kernel applies), K, V
got=$(folded vit_2.1.plan "--stride-views --fused-attention")
[ "$got" = 12 ] || fail "vit -b 2 with fused attention: $got outputs folded, want 12"
f=$(to_product vit_2.1.plan "--stride-views --fused-attention")
[ "$f" = 0 ] || fail "vit -b 2 with fused attention: $f strided copies feed a product, want 0"
# torch's heads at micro-batch 2 ([S, B*H, D] over [S, B, 3E]: B and H at two strides) as the fused kernel's
# two batch levels: views.onnx's e reads Q (through its Div, which the kernel applies), K and V from its input,
# 11 folds in all
got=$(folded views_2.1.plan "--stride-views --fused-attention")
[ "$got" = 11 ] || fail "views -b 2 with fused attention: $got outputs folded, want 11"
"$TEST_COUNTS" --stride-views --fused-attention --dump views_2.1.plan > dump2.txt
grep -q "fused attention node /e/MatMul_1 .* \[2 " dump2.txt || fail "views -b 2: e's fused attention does not read the input message through the views"
# the copies that read through a view (ViT-like's q: a Gather over the heads Transpose), widened and as given:
# the same bytes (test_copies runs each both ways through the kernel function the GPU runs)
[ -n "${TEST_COPIES:-}" ] && { "$TEST_COPIES" --stride-views views_1.1.plan views_2.1.plan vit_1.1.plan vit_2.1.plan > copies.txt 2>&1 \
  || fail "copies through views, widened against as given: $(grep FAIL copies.txt | head -3)"; }
# views.onnx's f and g stay copies (a Relu reads f's Transpose, g's is a graph output)
"$TEST_COUNTS" --stride-views --dump views_1.1.plan > dump.txt
for n in /f/Transpose /g/Transpose; do
  grep -q "strided copy node $n " dump.txt || fail "$n was folded (a non-product reads it, or it is a graph output)"
done
# ppcc's row-order pass (on by default): views.onnx's e (torch's heads) loses its [S, B, E] <-> [B, S, E]
# Transposes, the context's reorder becomes [B, H, S, D] -> [B, S, H, D] after a Reshape, which the fused kernel
# writes through (out_transpose over the Reshape: a two-level view); with views and fused attention on, at -pp 1
# and 2, the same bytes as the plan without the pass with views off
for m in views vit; do
  for b in 1 2; do
    for pp in 1 2; do "$PPCC" $m.onnx -pp $pp -b $b -o rows_${m}_$b.$pp.plan -q; done
    for fa in off on; do
      for pp in 1 2; do
        "$PPRT" rows_${m}_$b.$pp.plan data_$m --backend cuda-emu -q -o rows_${m}_${b}_${fa}_$pp --cuda-fused-attention $fa \
          --cuda-stride-views on
        for f in off_${m}_${b}_$fa/*.npy; do
          cmp -s "$f" rows_${m}_${b}_${fa}_$pp/$(basename "$f") \
            || fail "$m -b $b -pp $pp (fused attention $fa) $(basename "$f"): other bytes with the row-order pass than without"
        done
      done
    done
  done
done
strided() { "$TEST_COUNTS" $2 "$1" | tail -1 | sed -n 's/.* \([0-9]*\) strided copies.*/\1/p'; }
on=$(strided rows_views_2.1.plan "--stride-views --fused-attention"); off=$(strided views_2.1.plan "--stride-views --fused-attention")
[ -n "$on" ] && [ "$on" -lt "$off" ] || fail "views -b 2: $on strided copies with the row-order pass, $off without: want fewer"
"$TEST_COUNTS" --stride-views --fused-attention --dump rows_views_2.1.plan > dump3.txt
! grep -q "strided copy node /e/Transpose_5" dump3.txt || fail "views -b 2: e's context reorder is a copy, not the fused kernel's output"
echo "ok: the row-order pass: the same bytes on cuda-emu, $on strided copies at views -b 2 instead of $off"
echo "stride views: the same bytes as the copies on every pattern, the views that must stay copies stayed"
