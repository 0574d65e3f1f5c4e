#!/usr/bin/env bash
# End to end on the bundled digits CNN: compile at -pp 1, 2, 3 and two
# micro-batch sizes, run, and check against PyTorch: the logits the training
# script recorded (rtol 1e-3, atol 1e-4) and its measured accuracy (exact).
# Splitting must not change a single bit; compiling twice gives the same plan.
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
want_acc=$(cat "$S/accuracy.txt")
for b in 16 7; do
  for pp in 1 2 3; do
    "$PPCC" "$S/model.onnx" -pp $pp -b $b -o d_${b}_$pp.plan -q
    "$PPRT" d_${b}_$pp.plan "$S/data" -o out_${b}_$pp --labels "$S/labels.npy" --stats-json s.json > run.txt
    acc=$(awk '/^accuracy:/ {print $2}' run.txt)
    if [ "$acc" != "$want_acc" ]; then
      echo "FAIL: -b $b -pp $pp accuracy $acc, PyTorch measured $want_acc"; exit 1
    fi
    "$PY" "$SRC/tests/tools/compare_npy.py" out_${b}_$pp/logits.npy "$S/expected/logits.npy" --rtol 1e-3 --atol 1e-4
    cmp out_${b}_1/logits.npy out_${b}_$pp/logits.npy || { echo "FAIL: -pp $pp differs from -pp 1"; exit 1; }
    grep -q '"samples": 360' s.json || { echo "FAIL: stats json"; cat s.json; exit 1; }
  done
done
"$PPCC" "$S/model.onnx" -pp 2 -b 16 -o again.plan -q
cmp d_16_2.plan again.plan || { echo "FAIL: recompiling gave a different plan"; exit 1; }
echo "digits: accuracy $want_acc at -pp 1,2,3 and -b 16,7; logits within tolerance; splits bit-identical"
