#!/usr/bin/env bash
# The calibration of ppcc's default roofline rates (--gflops, --mem-gbps) on
# this CPU: one-core profiles of every model under the given directories
# (NAME/model.onnx and NAME/data/*.npy: the CI zoo's exports in
# build/tests/zoo, tests/models/export_torchvision.py's), then
# bench/split_rates.py prices the -pp 2 cut each rate pair gives with them.
#
# Each profile is what a stage of -pp 2 on two cores meets: `pprt --profile`
# of the model's -pp 1 plan at micro-batch BATCH on one thread, two copies at
# once pinned to cores 0 and 1 (sharing the memory bandwidth and the last
# level cache, as ppcc --measure does), the mean of the two per node; 3
# micro-batches after one warm-up. A zoo model's meta.json compile_args
# (--dim seq=32 ...) are passed to ppcc but for -b.
#
# usage: bench/split_profiles.sh DIR...   env: BATCH (8), RATES (split_rates.py's
#        --rates, default 25/10,50/10,100/10,200/10), OUT (keep the profiles there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$root/build} PY=${PY:-$root/.venv/bin/python} BATCH=${BATCH:-8}
RATES=${RATES:-25/10,50/10,100/10,200/10}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
cases=()
for dir in "$@"; do
  for d in "$dir"/*/; do
    d=${d%/} m=$(basename "$d")
    [ -f "$d/model.onnx" ] && [ -d "$d/data" ] || continue
    args=$("$PY" - "$d/meta.json" <<'PYEOF'
import json, os, sys
a = json.load(open(sys.argv[1])).get("compile_args") or [] if os.path.exists(sys.argv[1]) else []
out, i = [], 0
while i < len(a):
    if a[i] == "-b": i += 2; continue
    out.append(a[i]); i += 1
print(" ".join(out))
PYEOF
)
    w=$(mktemp -d)
    mkdir -p "$w/data"
    "$PY" "$root/bench/benchlib.py" tile "$d/data" "$w/data" $((3 * BATCH))
    # shellcheck disable=SC2086 # args: ppcc's words
    if "$B/ppcc" "$d/model.onnx" -pp 1 -b "$BATCH" $args -q -o "$w/p.plan"; then
      taskset -c 0 "$B/pprt" "$w/p.plan" "$w/data" --threads 1 --warmup 1 -q --profile "$w/a.json" -o "$w/oa" &
      taskset -c 1 "$B/pprt" "$w/p.plan" "$w/data" --threads 1 --warmup 1 -q --profile "$w/b.json" -o "$w/ob" &
      wait
      "$PY" - "$w/a.json" "$w/b.json" "$out/$m.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
nodes = {k: (v + b["nodes"].get(k, v)) / 2 for k, v in a["nodes"].items()}
with open(sys.argv[3], "w") as f:  # pprt --profile's own layout, which ppcc --profile reads line by line
    f.write(f'{{"micro_batch": {a["micro_batch"]}, "device": {json.dumps(a["device"])}, "nodes": {{\n')
    f.write(",\n".join(f"  {json.dumps(k)}: {v:.6f}" for k, v in nodes.items()) + "\n}}\n")
PYEOF
      cases+=("$d/model.onnx:$BATCH:$out/$m.json${args:+@$args}")
    else
      echo "split_profiles: $m: ppcc failed, left out" >&2
    fi
    rm -rf "$w"
  done
done
echo "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}'), $(date -u '+%F'), -b $BATCH; profiles in $out"
"$PY" "$root/bench/split_rates.py" --ppcc "$B/ppcc" --rates "$RATES" "${cases[@]}"
