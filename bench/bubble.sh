#!/usr/bin/env bash
# Pipeline bubble of pprt on torchvision ResNet-50 (random weights): for
# -pp 1, 2, 4 and micro-batch 1, 4, 8 over the same 32 images, the measured
# bubble (1 - sum of stage busy time / (stages x wall)) next to the ideal
# fill-and-drain figure (p-1)/(m+p-1), throughput, and whether the outputs are
# bit-identical across pipeline depths. Prints a Markdown table.
# Usage: bench/bubble.sh [BUILD_DIR]   (run scripts/sample.sh or a build first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
py=$root/.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$root/tests/models/export_torchvision.py" --model resnet50 --out "$work/r50" --batch 32 >/dev/null
echo "| pp | micro-batch | micro-batches | samples/s | measured bubble | ideal bubble | outputs vs pp 1 |"
echo "|---:|---:|---:|---:|---:|---:|---|"
for b in 1 4 8; do
  for pp in 1 2 4; do
    "$build/ppcc" "$work/r50/model.onnx" -pp $pp -b $b -q -o "$work/p.plan"
    "$build/pprt" "$work/p.plan" "$work/r50/data" -o "$work/out_${b}_$pp" -q --backend ref --stats-json "$work/s.json"
    same=$([ $pp = 1 ] && echo "-" || (cmp -s "$work/out_${b}_1/output.npy" "$work/out_${b}_$pp/output.npy" && echo identical || echo DIFFERENT))
    "$py" - "$work/s.json" $pp $b "$same" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); p, b, same = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
m = s["micro_batches"]
print(f"| {p} | {b} | {m} | {s['samples_per_s']:.2f} | {100*s['bubble']:.1f}% | {100*(p-1)/(m+p-1):.1f}% | {same} |")
PY
  done
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
