#!/usr/bin/env bash
# pprt --cuda-layout nchw|nhwc|auto: channels-last convolutions for inference
# plans (issue 54; docs/cuda.md "Layouts"). On cuda-emu, against onnxruntime's
# f32 outputs (the independent reference) and the NCHW run:
#   - nhwc_models.py's SE-like CNN (strided, depthwise and 1x1 convolutions,
#     AveragePool, Clip, a squeeze-and-excitation gate whose Mul broadcasts
#     over H and W, a residual Add, a BatchNormalization no convolution
#     absorbs, a Concat along the channels, a Split and Concat that swap the
#     channels' halves, MaxPool, a ConvTranspose, a constant
#     and a reflecting Pad and a linear Resize (channels-last: no transpose), ConvNeXt's LayerNorm
#     over the channels between two Transposes, a per-channel Mul,
#     GlobalMaxPool)
#     and torchvision's ResNet-18, and the zoo's ResNet-50 and EfficientNet-B0
#     (SiLU, sigmoid gates, depthwise convolutions) where they have been
#     exported ($ZOO/resnet50, $ZOO/efficientnet_b0), as fp16 and bf16 plans at
#     --cuda-layout nhwc:
#       no node on the host fallback, the nodes run channels-last counted
#       (--stats-json own_layout_tensors > 0), the error against onnxruntime's
#       f32 within the stated bound (max |error| over max |output|; measured
#       2026-12-05 on cuda-emu, the bounds about 3x: SE fp16 5.5e-4 -> 2e-3,
#       bf16 3.9e-3 -> 1.5e-2; ResNet-18 fp16 2.2e-3 -> 7e-3, bf16 8.7e-3 ->
#       3e-2; ResNet-50 fp16 6.0e-4 -> 2e-3, bf16 5.7e-3 -> 2e-2;
#       EfficientNet-B0 fp16 5.3e-4 -> 2e-3, bf16 5.5e-3 -> 2e-2), bf16's above
#       fp16's, NaN where onnxruntime has NaN (the SE model's sample 1);
#       the same bits as --cuda-layout nchw (the emulator reads the NHWC
#       operands through the strides cuDNN is given and sums in NCHW's order;
#       the pools' taps in one order: test_kmath) -- on a GPU only up to the
#       sums' order, other engines;
#       -pp 2 the same bits as -pp 1 (the layout rule reads the whole plan);
#       the transposes counted (--stats-json layout_changes_per_micro_batch):
#       one at -pp 1 (the image into NHWC: the model's own Transposes around
#       the LayerNorm cost none), and at -pp 2 two more for each
#       tensor of the cut (ppcc --report) that has several channels and
#       spatial dims (NCHW on the message: copied out, copied back in);
#   - the messages stay NCHW: the SE plan at -pp 2 with one stage on cuda-emu
#     (NHWC) and the other on the reference kernels (ppcc --placement), both
#     ways, within the bound of onnxruntime;
#   - the SE fp16 plan with --cuda-conv-fusion on, the convolutions on the host
#     fallback (--cuda-host-ops Conv), and the views and wide elementwise
#     options: nhwc the same bits as nchw;
#   - a [C, H, W] operand added to a convolution's output, [H, W] and [C, 1, 1]
#     ones (nhwc_models.py's pos model): nchw's bits at nhwc;
#   - --cuda-layout auto: a half plan channels-last, an f32 plan NCHW; nhwc on
#     the f32 plan: nchw's bits.
# About 15 s (90 s with the zoo's two models). usage: nhwc.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC; ZOO optional)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
H="$PY $SRC/tests/cuda/half_models.py"
"$PY" "$SRC/tests/cuda/nhwc_models.py" models . > models.log 2>&1 || fail "nhwc_models.py models: $(tail -3 models.log)"
le() { "$PY" -c "import sys; sys.exit(not float('$1') <= float('$2'))"; }
js() { "$PY" -c "import json,sys; d=json.load(open('$1')); print(sum(s['$2'] for s in d['stages']))"; }
declare -A LIM=([se_fp16]=2e-3 [se_bf16]=1.5e-2 [resnet18_fp16]=7e-3 [resnet18_bf16]=3e-2 [resnet50_fp16]=2e-3
                [resnet50_bf16]=2e-2 [efficientnet_b0_fp16]=2e-3 [efficientnet_b0_bf16]=2e-2)
models="se resnet18"
for z in resnet50 efficientnet_b0; do
  if [ -n "${ZOO:-}" ] && [ -f "$ZOO/$z/model.onnx" ]; then
    # the zoo's files read where they are (ResNet-50: 97 MB; the work directory stays small)
    ln -sf "$ZOO/$z/model.onnx" $z.onnx && ln -sfn "$ZOO/$z/data" data_$z
    models="$models $z"
  else
    echo "note: no exported zoo model \$ZOO/$z: left out"
  fi
done
for m in $models; do
  $H ort $m.onnx data_$m ort_$m
  b=$(case $m in resnet50|efficientnet_b0) echo 1;; *) echo 2;; esac)
  # the tensors of the cut that have channels and spatial dims: each is copied out of NHWC and back in
  cutn=$("$PPCC" $m.onnx -b $b -pp 2 --precision fp16 --report -o /dev/null -q | sed -n 's/^cut 0 -> 1 ([^)]*): //p' |
         tr ' ' '\n' | "$PY" -c "
import re, sys
n = 0
for t in sys.stdin.read().split():
    d = re.search(r'\[([0-9,]+)\]$', t)
    s = [int(v) for v in d.group(1).split(',')] if d else []
    n += len(s) == 4 and s[1] > 1 and s[2] * s[3] > 1
print(n)")
  for pr in fp16 bf16; do
    for pp in 1 2; do "$PPCC" $m.onnx -b $b -pp $pp --precision $pr -o ${m}_${pr}_$pp.plan -q; done
    "$PPRT" ${m}_${pr}_1.plan data_$m --backend cuda-emu -q -o e1 --cuda-layout nhwc --cuda-explain --stats-json s1.json 2> ex.txt
    grep -q ' 0 host steps' ex.txt || fail "$m $pr: nodes on the host fallback: $(grep -o '[0-9]* host steps' ex.txt)"
    o=$(cd ort_$m && ls *.npy)
    e=$($H error e1/$o ort_$m/$o) || fail "$m $pr: $e"
    le "$e" "${LIM[${m}_$pr]}" || fail "$m $pr: error $e against onnxruntime's f32, want <= ${LIM[${m}_$pr]}"
    eval "err_${m}_$pr=$e"
    nh=$(js s1.json own_layout_tensors); t1=$(js s1.json layout_changes_per_micro_batch)
    [ "$nh" -gt 0 ] || fail "$m $pr: no node ran channels-last"
    [ "$t1" = 1 ] || fail "$m $pr -pp 1: $t1 transposes, want 1 (the image)"
    "$PPRT" ${m}_${pr}_1.plan data_$m --backend cuda-emu -q -o en --cuda-layout nchw --stats-json sn.json
    [ "$(js sn.json own_layout_tensors)" = 0 ] && [ "$(js sn.json layout_changes_per_micro_batch)" = 0 ] \
      || fail "$m $pr: --cuda-layout nchw ran nodes channels-last"
    for f in e1/*.npy; do cmp -s "$f" "en/${f#e1/}" || fail "$m $pr: nhwc gives other bits than nchw ($f)"; done
    "$PPRT" ${m}_${pr}_2.plan data_$m --backend cuda-emu -q -o e2 --cuda-layout nhwc --stats-json s2.json
    for f in e1/*.npy; do cmp -s "$f" "e2/${f#e1/}" || fail "$m $pr: -pp 2 gives other bits than -pp 1 ($f)"; done
    t2=$(js s2.json layout_changes_per_micro_batch)
    [ "$t2" = $(( 1 + 2 * cutn )) ] || fail "$m $pr -pp 2: $t2 transposes, want $(( 1 + 2 * cutn )) (the image, $cutn NHWC tensors of the cut out and in)"
    [ $m = se ] || rm -f ${m}_${pr}_[12].plan   # read again below for se only
    echo "ok: $m $pr: error $e against onnxruntime's f32 (bound ${LIM[${m}_$pr]}), $nh nodes channels-last, nchw's bits, -pp 2 the same bits; transposes $t1 at -pp 1, $t2 at -pp 2 ($cutn tensors of the cut)"
  done
  eval "le \$err_${m}_fp16 \$err_${m}_bf16" || fail "$m: fp16's error above bf16's"
done
# the messages stay NCHW: one stage on the reference kernels
for pl in 0:cuda-emu,1:ref 0:ref,1:cuda-emu; do
  "$PPCC" se.onnx -b 2 -pp 2 --precision fp16 --placement $pl -o mix.plan -q
  "$PPRT" mix.plan data_se -q -o em --cuda-layout nhwc
  e=$($H error em/y.npy ort_se/y.npy) || fail "placement $pl: $e"
  le "$e" 2e-3 || fail "placement $pl: error $e against onnxruntime's f32 (an NHWC message read as NCHW?)"
  echo "ok: SE fp16 -pp 2 on $pl: error $e (the message NCHW)"
done
# other routes: the same bits either layout
for o in "--cuda-conv-fusion on" "--cuda-host-ops Conv" "--cuda-stride-views on --cuda-wide-elementwise on"; do
  for l in nchw nhwc; do "$PPRT" se_fp16_2.plan data_se --backend cuda-emu -q -o o_$l --cuda-layout $l $o; done
  cmp -s o_nchw/y.npy o_nhwc/y.npy || fail "SE fp16 -pp 2 $o: nhwc gives other bits than nchw"
  echo "ok: SE fp16 -pp 2 $o: nhwc the same bits as nchw"
done
# operands of fewer dims beside a channels-last tensor (a [C, H, W] table added to a convolution's output was read
# in NHWC order as if it were NHWC, 2026-12-05): nchw's bits at nhwc, within the bound of onnxruntime
"$PPCC" pos.onnx -b 2 --precision fp16 -o pos.plan -q
$H ort pos.onnx data_pos ort_pos
for l in nchw nhwc; do "$PPRT" pos.plan data_pos --backend cuda-emu -q -o pos_$l --cuda-layout $l; done
cmp -s pos_nchw/y.npy pos_nhwc/y.npy || fail "pos fp16: nhwc gives other bits than nchw (a rank-3 operand read channels-last)"
e=$($H error pos_nhwc/y.npy ort_pos/y.npy) || fail "pos: $e"
le "$e" 2e-3 || fail "pos fp16: error $e against onnxruntime's f32 (2e-3)"
echo "ok: rank-3 and rank-2 operands beside channels-last tensors: nchw's bits, error $e against onnxruntime's f32"
# auto: half channels-last, f32 NCHW unless asked
"$PPCC" se.onnx -b 2 -o se_f32.plan -q
"$PPRT" se_fp16_1.plan data_se --backend cuda-emu -q -o a16 --stats-json a16.json
"$PPRT" se_f32.plan data_se --backend cuda-emu -q -o a32 --stats-json a32.json
[ "$(js a16.json own_layout_tensors)" -gt 0 ] || fail "--cuda-layout auto: the fp16 plan ran NCHW"
[ "$(js a32.json own_layout_tensors)" = 0 ] || fail "--cuda-layout auto: the f32 plan ran channels-last"
"$PPRT" se_f32.plan data_se --backend cuda-emu -q -o n32 --cuda-layout nhwc --stats-json n32.json
[ "$(js n32.json own_layout_tensors)" -gt 0 ] && cmp -s a32/y.npy n32/y.npy || fail "the f32 plan at nhwc: not nchw's bits"
echo "ok: --cuda-layout auto: fp16 channels-last, f32 NCHW; the f32 plan at nhwc gives nchw's bits"
