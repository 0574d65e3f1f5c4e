#!/usr/bin/env bash
# pprt --precision tf32|bf16|fp16 on cuda-emu (issue 54, docs/cuda.md
# "Reduced precision"). On a GPU these change only the libraries' compute
# types (cuBLASLt 32F_FAST_TF32, _FAST_16BF, _FAST_16F; cuDNN's engine
# filter): every tensor stays f32, the step list is the f32 one. cuda-emu
# now models the products' part (until 2026-12-05 it warned and ran f32):
#   - the step list at each precision is f32's: the same launches and
#     strided copies (--cuda-explain's tally), no conversion step; with the
#     views, the fused attention and the row kernels too;
#   - a MatMul and a Gemm with a bias epilogue (precision_models.py): the
#     outputs within rtol 1e-5 / atol 1e-4 (outputs up to about 10) of
#     NumPy's float64 products over the inputs rounded to nearest even to
#     TF32, bfloat16 or float16 (an independent model of the rounding),
#     where the f32 products are not, and closer to it than to the other
#     three roundings (gpu_day part 5 asks a GPU the same question);
#   - tests/cuda/fattn_models.py's two ViT-like blocks: the error over the
#     largest |output| against ref's f32 at most 5e-3 (fp16, tf32) and
#     4e-2 (bf16), bf16's larger than fp16's (8 bits of mantissa against
#     11), -pp 2 the same bits as -pp 1 (the rounding is per product, so a
#     split changes nothing).
# About 10 s. usage: precision.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
CMP="$PY $SRC/tests/tools/compare_npy.py"
M="$PY $SRC/tests/cuda/precision_models.py"
tally() { grep -o '[0-9]* launches: .*' "$1" | head -1; }
$M models .
"$PY" "$SRC/tests/cuda/fattn_models.py" . > /dev/null
"$PPCC" mm.onnx -b 0 -o mm.plan -q  # the Gemm over every sample's rows: whole tensors
for pp in 1 2; do "$PPCC" vit.onnx -pp $pp -b 1 -o vit_$pp.plan -q; done
"$PPRT" vit_1.plan data_vit --backend ref -q -o ref_vit
for opts in "" "--cuda-stride-views on --cuda-fused-attention on --cuda-row-kernels on"; do
  tag=$([ -z "$opts" ] && echo defaults || echo options)
  "$PPRT" vit_1.plan data_vit --backend cuda-emu -q -o vit_f32_$tag --cuda-explain $opts 2> ex_f32_$tag.txt
  "$PPRT" mm.plan data_mm --backend cuda-emu -q -o mm_f32 $opts
  $M expect . f32
  $CMP mm_f32/y.npy want_f32.npy --rtol 1e-5 --atol 1e-4 > cmp.txt || fail "mm f32 $tag against NumPy: $(cat cmp.txt)"
  for pr in tf32 bf16 fp16; do
    "$PPRT" vit_1.plan data_vit --backend cuda-emu -o vit_${pr}_$tag --precision $pr --cuda-explain $opts \
      > log_$pr.txt 2> ex_${pr}_$tag.txt
    ! grep -q 'runs in f32' ex_${pr}_$tag.txt || fail "$pr $tag: cuda-emu warned that it runs f32"
    [ "$(tally ex_${pr}_$tag.txt)" = "$(tally ex_f32_$tag.txt)" ] \
      || fail "ViT-like $pr $tag: other steps than f32: '$(tally ex_${pr}_$tag.txt)' against '$(tally ex_f32_$tag.txt)'"
    ! cmp -s vit_${pr}_$tag/y.npy vit_f32_$tag/y.npy || fail "ViT-like $pr $tag: f32's bytes (no rounding took effect)"
    e=$($M error vit_${pr}_$tag/y.npy ref_vit/y.npy)
    lim=$([ $pr = bf16 ] && echo 4e-2 || echo 5e-3)
    "$PY" -c "import sys; sys.exit(not float('$e') <= $lim)" || fail "ViT-like $pr $tag: error $e over the largest output, want <= $lim"
    eval "err_$pr=$e"
    "$PPRT" vit_2.plan data_vit --backend cuda-emu -q -o vit2_$pr --precision $pr $opts
    cmp -s vit2_$pr/y.npy vit_${pr}_$tag/y.npy || fail "ViT-like $pr $tag: -pp 2 gives other bits than -pp 1"
    "$PPRT" mm.plan data_mm --backend cuda-emu -q -o mm_$pr --precision $pr $opts
    $M expect . $pr
    $CMP mm_$pr/y.npy want_$pr.npy --rtol 1e-5 --atol 1e-4 > cmp.txt || fail "mm $pr $tag against NumPy's rounding: $(cat cmp.txt)"
    # the tolerance tells the rounding apart: f32's products are outside it; and of the four roundings
    # (f32, TF32, bfloat16, float16: tiny inputs set float16 apart from TF32) this one is the closest
    ! $CMP mm_f32/y.npy want_$pr.npy --rtol 1e-5 --atol 1e-4 > cmp.txt || fail "mm $pr $tag: f32's products within the tolerance"
    w=$($M which . mm_$pr/y.npy); [ "${w##*closest: }" = $pr ] || fail "mm $pr $tag: closest to another rounding: $w"
  done
  "$PY" -c "import sys; sys.exit(not $err_bf16 > $err_fp16)" || fail "$tag: bf16's error $err_bf16 not above fp16's $err_fp16"
  echo "ok: $tag${opts:+ ($opts)}: $(tally ex_f32_$tag.txt); the same steps at tf32, bf16, fp16; error over the largest" \
       "output against ref: tf32 $err_tf32, bf16 $err_bf16, fp16 $err_fp16; -pp 2 the same bits; the MatMul and Gemm as NumPy rounds"
done
