#!/usr/bin/env bash
# Static launch and copy counts per model (issue 54), without a GPU and
# without running a micro-batch: test_counts plans every stage as the CUDA
# executors do, lints it and counts its launches (own kernels, strided
# copies, cuBLASLt products, cuDNN convolutions and their epilogue kernels,
# device copies) and the strided or device copies whose output a product
# reads (docs/cuda.md, "Launch counts"). Asserted on the zoo's ViT-B/16
# (torch 1.13's export of torchvision's, 12 layers):
#   micro-batch 1: at most 27 launches a layer with the defaults (26.9: the
#     Transposes between [S, 1, E] and [1, S, E] move no byte, so they are
#     aliases as Reshapes are); with --cuda-stride-views on no strided copy
#     feeds a product and at most 21 launches a layer, 15 with
#     --cuda-fused-attention on (14.8; 21.9 without the views: the kernel
#     takes q's Mul or Div by its scale and reads q through the views),
#     9 with --cuda-row-kernels on too (8.6: the residual Adds inside the
#     LayerNorms' steps);
#   micro-batch 8: at most 24, 15 and 9 launches a layer (23.8, 14.8 and
#     8.7: ppcc's row-order pass leaves no [B, S, E] <-> [S, B, E] Transpose,
#     and the fused kernel writes the context in [B, S, H, D] order through
#     the Reshape and Transpose the pass leaves; without the pass 25.8, 15.8
#     and 9.7 with the context a copy, 26, 17 and 11 before the kernel wrote
#     through a Reshape); with the views alone 3 strided copies a layer still
#     feed a product (the heads of Q, K and V, [B*H, S, D] over [B, S, 3E]:
#     B and H at strides no one batch stride of cuBLASLt's gives), with the
#     fused attention (two batch levels) none;
#   micro-batch 32: the launches a layer of micro-batch 8 with the defaults
#     and with the three options; the options move at most 0.6 of the
#     defaults' bytes a layer (test_counts' model of traffic); the half
#     plan (ppcc --precision fp16) at most 2 launches more than f32's (its
#     two Casts) and at most 0.6 of its bytes a layer, both ways;
#   -pp 2 and 3: every stage linted with the views.
# And on cuda-emu with views on: GPT (and U-Net where the zoo has it) at
# -pp 1 and 2, the same bytes as views off at -pp 1.
# About 1 minute once the zoo is exported (ViT's plans are 350 MB each: one
# at a time). usage: launch_counts.sh WORK_DIR (env: PPCC, PPRT, PY, SRC,
# TEST_COUNTS, ZOO)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}" "${TEST_COUNTS:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
ZOO=${ZOO:-$out/zoo}
fail() { echo "FAIL: $*"; exit 1; }
for m in vit_b_16 gpt; do
  [ -d "$ZOO/$m/expected" ] || "$PY" "$SRC/tests/models/zoo.py" export $m "$ZOO/$m" --batch 2 >/dev/null
done
# ViT-B/16: model, micro-batch, options, the most launches a layer, whether no copy may feed a product
check() {
  local plan=$1 opts=$2 max=$3 nocopy=$4
  "$TEST_COUNTS" $opts --layers 12 --max-per-layer $max $nocopy $plan > counts.txt 2> err.txt \
    || fail "ViT-B/16 ($plan, $opts): $(cat err.txt)"
  echo "ok: ViT-B/16 $plan ${opts:-(defaults)}: $(tail -1 counts.txt | sed 's/^[^:]*: //')"
}
"$PPCC" "$ZOO/vit_b_16/model.onnx" -b 1 -o vit.plan -q
check vit.plan "" 27 ""
check vit.plan "--fused-attention" 22 ""
check vit.plan "--stride-views" 21 --no-copy-to-product
check vit.plan "--stride-views --fused-attention" 15 --no-copy-to-product
check vit.plan "--stride-views --fused-attention --row-kernels" 9 --no-copy-to-product
"$PPCC" "$ZOO/vit_b_16/model.onnx" -b 8 -o vit.plan -q
feeding() { tail -1 counts.txt | sed -n 's/.*strided copies (\([0-9]*\) feeding a product).*/\1/p'; }
check vit.plan "--stride-views" 24 ""
n=$(feeding); [ "$n" -le 36 ] || fail "ViT-B/16 -b 8 with views: $n strided copies feed a product, want at most 36 (3 a layer)"
check vit.plan "--stride-views --fused-attention" 15 --no-copy-to-product
check vit.plan "--stride-views --fused-attention --row-kernels" 9 --no-copy-to-product
# micro-batch 32 (where ViT in half precision was furthest behind autocast on the seventh lease): the steps
# of micro-batch 8, launch for launch (no choice of the planner's depends on the micro-batch between 8 and
# 32), and the options together move at most 0.6 of the defaults' bytes (1,015 against 1,946 MB a layer)
per_layer() { tail -1 counts.txt | sed -n "s/.*; \([0-9.]*\) launches and \([0-9.]*\) MB moved per layer.*/\\$1/p"; }
OPTS="--stride-views --fused-attention --row-kernels"
"$TEST_COUNTS" --layers 12 vit.plan > counts.txt; l8=$(per_layer 1)
"$TEST_COUNTS" $OPTS --layers 12 vit.plan > counts.txt; l8o=$(per_layer 1)
"$PPCC" "$ZOO/vit_b_16/model.onnx" -b 32 -o vit.plan -q
"$TEST_COUNTS" --layers 12 vit.plan > counts.txt 2> err.txt || fail "ViT-B/16 -b 32: $(cat err.txt)"
l32=$(per_layer 1); mb=$(per_layer 2)
"$TEST_COUNTS" $OPTS --layers 12 vit.plan > counts.txt 2> err.txt || fail "ViT-B/16 -b 32 ($OPTS): $(cat err.txt)"
l32o=$(per_layer 1); mbo=$(per_layer 2)
[ -n "$l8" ] && [ "$l32" = "$l8" ] && [ "$l32o" = "$l8o" ] \
  || fail "ViT-B/16 -b 32: $l32 launches a layer ($l32o with the options), -b 8 $l8 ($l8o)"
"$PY" -c "import sys; sys.exit(not $mbo <= 0.6 * $mb)" \
  || fail "ViT-B/16 -b 32: the options move $mbo MB a layer, the defaults $mb: want at most 0.6 of it"
echo "ok: ViT-B/16 -b 32: the launches a layer of -b 8 ($l8, $l8o with the options); $mb MB moved a layer, $mbo with the options"
# half storage (ppcc --precision fp16, docs/usage.md "Half precision for inference"), micro-batch 32: no more launches than f32
# but the two Casts at the model's ends (the image into fp16, the logits out of it), at most 0.6 of f32's bytes
# a layer (measured 0.54 with the defaults, 0.50 with the options)
total() { tail -1 counts.txt | sed -n 's/^[^:]*: \([0-9]*\) launches.*/\1/p'; }
for o in "" "$OPTS"; do
  "$TEST_COUNTS" $o --layers 12 vit.plan > counts.txt; n32=$(total); m32=$(per_layer 2)
  "$PPCC" "$ZOO/vit_b_16/model.onnx" -b 32 --precision fp16 -o vit16.plan -q
  "$TEST_COUNTS" $o --layers 12 vit16.plan > counts.txt 2> err.txt || fail "ViT-B/16 fp16 ${o:-(defaults)}: $(cat err.txt)"
  n16=$(total); m16=$(per_layer 2)
  [ "$n16" -le $(( n32 + 2 )) ] || fail "ViT-B/16 -b 32 fp16 ${o:-(defaults)}: $n16 launches, f32 $n32"
  "$PY" -c "import sys; sys.exit(not $m16 <= 0.6 * $m32)" \
    || fail "ViT-B/16 -b 32 fp16 ${o:-(defaults)}: $m16 MB a layer, f32 $m32: want at most 0.6 of it"
  echo "ok: ViT-B/16 -b 32 fp16 ${o:-(defaults)}: $n16 launches (f32 $n32), $m16 MB moved a layer (f32 $m32)"
done
rm -f vit16.plan
for pp in 2 3; do
  "$PPCC" "$ZOO/vit_b_16/model.onnx" -pp $pp -o vit.plan -q
  "$TEST_COUNTS" --stride-views --fused-attention vit.plan > counts.txt 2> err.txt || fail "ViT-B/16 -pp $pp: $(cat err.txt)"
done
rm -f vit.plan
echo "ok: ViT-B/16 -pp 2, 3: every stage linted with views on"
# the small zoo models on cuda-emu: views on give views off's bytes, at -pp 1 and 2
for m in gpt unet; do
  [ -f "$ZOO/$m/model.onnx" ] || { echo "skip: $m (not in $ZOO)"; continue; }
  for pp in 1 2; do "$PPCC" "$ZOO/$m/model.onnx" -pp $pp -o $m.$pp.plan -q; done
  "$PPRT" $m.1.plan "$ZOO/$m/data" --backend cuda-emu -q -o off_$m
  for pp in 1 2; do
    "$PPRT" $m.$pp.plan "$ZOO/$m/data" --backend cuda-emu -q -o on_${m}_$pp --cuda-stride-views on
    for f in off_$m/*.npy; do cmp -s "$f" on_${m}_$pp/$(basename "$f") || fail "$m -pp $pp: other bytes with views on"; done
  done
  echo "ok: $m: $("$TEST_COUNTS" --stride-views $m.1.plan | tail -1 | sed 's/^[^:]*: //'); the same bytes at -pp 1, 2"
  rm -f $m.*.plan
done
