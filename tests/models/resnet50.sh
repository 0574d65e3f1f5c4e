#!/usr/bin/env bash
# torchvision ResNet-50 (random weights, exported by the test itself) at
# -pp 1, 2 and 4: outputs within rtol 1e-3 / atol 1e-4 of PyTorch's, and every
# split bit-identical to -pp 1. Run twice: BatchNormalization folded by the
# exporter, and kept (--keep-bn) so the BatchNormalization kernel is covered.
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
for variant in folded keep-bn; do
  flag=""; [ $variant = keep-bn ] && flag=--keep-bn
  "$PY" "$SRC/tests/models/export_torchvision.py" --model resnet50 --out $variant --batch 2 $flag > export.txt
  for pp in 1 2 4; do
    "$PPCC" $variant/model.onnx -pp $pp -b 1 -o $variant/r$pp.plan --report > $variant/report$pp.txt
    "$PPRT" $variant/r$pp.plan $variant/data -o $variant/out$pp -q
    "$PY" "$SRC/tests/tools/compare_npy.py" $variant/out$pp/output.npy $variant/expected/output.npy --rtol 1e-3 --atol 1e-4
    cmp $variant/out1/output.npy $variant/out$pp/output.npy || { echo "FAIL: $variant -pp $pp differs from -pp 1"; exit 1; }
  done
done
echo "resnet50: -pp 1,2,4 match PyTorch (BN folded and kept), splits bit-identical"
