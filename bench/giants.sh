#!/usr/bin/env bash
# The seed notes' question for their four timm models (timm 0.9.2, random
# weights, at the notes' input sizes: 256, 224, 800 and 336 pixels): on two
# 24 GiB devices, how large a batch fits for inference with two replicas
# (dp=2: -pp 1 on each device) against a two-stage pipeline (pp=2)?
#
# For each model: tests/models/zoo.py exports it (tag `slow`; up to 4 GB, so
# one at a time, deleted afterwards unless KEEP=1), then
#   ppcc model.onnx --max-batch -pp 1 --max-memory 24GiB
#   ppcc model.onnx --max-batch -pp 2 --max-memory 24GiB              (--depth 2)
#   ppcc model.onnx --max-batch -pp 2 --max-memory 24GiB --depth 1
# (f32 weights and activations, no --reserve: the 24 GiB go to the plan).
# Prints one Markdown row per model and writes each --report-json to OUT.
#
# Usage: bench/giants.sh [BUILD_DIR]   Environment: WORK (default
# /tmp/giants.$$), OUT (default WORK/results), MODELS (default the four),
# CAP (default 24GiB), KEEP=1 keeps the exports.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
py=$root/.venv/bin/python
work=${WORK:-/tmp/giants.$$}
out=${OUT:-$work/results}
cap=${CAP:-24GiB}
models=${MODELS:-"swinv2_large_window12to16_192to256 convnext_xlarge tf_efficientnet_l2 eva_giant_patch14_336"}
mkdir -p "$work" "$out"
"$py" -c "import timm" 2>/dev/null || { echo "bench/giants.sh: needs timm (pip install timm==0.9.2)" >&2; exit 2; }
declare -A size=([swinv2_large_window12to16_192to256]=3,256,256 [convnext_xlarge]=3,224,224
                 [tf_efficientnet_l2]=3,800,800 [eva_giant_patch14_336]=3,336,336)
echo "| model | input | weights GB | dp=2: micro-batch per device (x2) | pp=2: micro-batch | limiting stage at pp=2 | pp=2, --depth 1 | ppcc s (pp=1, pp=2) |"
echo "|---|---|---:|---:|---:|---|---:|---|"
for m in $models; do
  d=$work/$m
  if [ ! -f "$d/model.onnx" ]; then
    "$py" "$root/tests/models/zoo.py" export "$m" "$d" --batch 1 --no-expected --no-torch \
      ${size[$m]:+--input-size ${size[$m]}} >"$out/$m.export.log" 2>&1 ||
      { echo "| $m | export failed: $(tail -1 "$out/$m.export.log") |"; continue; }
  fi
  t1=$( { /usr/bin/time -f %e "$build/ppcc" "$d/model.onnx" --max-batch -pp 1 --max-memory "$cap" \
          --report-json "$out/$m.pp1.json" >"$out/$m.pp1.txt"; } 2>&1 | tail -1)
  t2=$( { /usr/bin/time -f %e "$build/ppcc" "$d/model.onnx" --max-batch -pp 2 --max-memory "$cap" \
          --report-json "$out/$m.pp2.json" >"$out/$m.pp2.txt"; } 2>&1 | tail -1)
  "$build/ppcc" "$d/model.onnx" --max-batch -pp 2 --depth 1 --max-memory "$cap" \
    --report-json "$out/$m.pp2d1.json" >"$out/$m.pp2d1.txt"
  "$py" - "$m" "$d/meta.json" "$out/$m.pp1.json" "$out/$m.pp2.json" "$t1" "$t2" "$out/$m.pp2d1.json" <<'PY'
import json, sys
m, meta, p1, p2, t1, t2, p3 = sys.argv[1:]
meta = json.load(open(meta))
a, b = json.load(open(p1))["max_batch"], json.load(open(p2))["max_batch"]
c = json.load(open(p3))["max_batch"]
w = sum(s["params_bytes"] for s in b["at"]["stages"]) / 1e9
shape = "x".join(map(str, meta["input_shape"][1:]))
lim = b["limit"]
why = (f"stage {lim['stage']} ({lim['need_bytes'] / 2**30:.2f} GiB at {lim['micro_batch']})"
       if lim["stage"] >= 0 else lim["why"])
print(f"| {m} | {shape} | {w:.2f} | {a['micro_batch']} (x2 = {2 * a['micro_batch']}) | {b['micro_batch']} | "
      f"{why} | {c['micro_batch']} | {float(t1):.1f}, {float(t2):.1f} |")
PY
  [ "${KEEP:-0}" = 1 ] || rm -rf "$d"
done
