#!/usr/bin/env bash
# A/B of two builds of pprt on the same plans: speed and bits.
#
# For each model of the CI zoo's exports (build/tests/zoo/NAME: model.onnx and
# data, tiled to SAMPLES samples) the plan is compiled by each build's ppcc
# (the script says whether the two plans are byte-identical) and the NEW
# build's plan is run by both pprts in turns, REPS times, at -pp 1 (2 threads)
# and -pp 2 (1 thread per stage), micro-batch BATCH, oneDNN f32, one warm-up
# micro-batch. It prints each side's median samples/s (pprt --stats-json: the
# run's wall time, plan loading and primitive creation excluded), the ratio
# NEW / OLD with its range over the rounds, and whether the outputs are
# bit-identical.
#
# usage: bench/ab.sh OLD_BUILD NEW_BUILD [REPS]
#   env: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), BATCH (8),
#        SAMPLES (32), ZOO (build/tests/zoo of NEW's source tree)
set -euo pipefail
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd) reps=${3:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-"resnet50 efficientnet_b0 vit_b_16"} BATCH=${BATCH:-8} SAMPLES=${SAMPLES:-32}
ZOO=${ZOO:-$src/build/tests/zoo}
PY=${PY:-$src/.venv/bin/python}
w=$(mktemp -d /tmp/ab.XXXXXX)
trap 'rm -rf "$w"' EXIT
echo "A/B: OLD $old, NEW $new; $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}'), $(nproc) CPUs; $(date -u '+%F %H:%M') UTC; load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| model | -pp | OLD samples/s | NEW samples/s | NEW / OLD (range) | plans identical | outputs identical |"
echo "|---|---|---|---|---|---|---|"
for m in $MODELS; do
  d=$ZOO/$m
  [ -f "$d/model.onnx" ] || { echo "| $m | | not exported at $d (run the zoo first) | | | | |"; continue; }
  mkdir -p "$w/$m/data"
  "$PY" "$src/bench/benchlib.py" tile "$d/data" "$w/$m/data" "$SAMPLES"
  for pp in 1 2; do
    "$new/ppcc" "$d/model.onnx" -pp $pp -b "$BATCH" -o "$w/$m/new$pp.plan" -q
    "$old/ppcc" "$d/model.onnx" -pp $pp -b "$BATCH" -o "$w/$m/old$pp.plan" -q
    same_plan=$(cmp -s "$w/$m/new$pp.plan" "$w/$m/old$pp.plan" && echo yes || echo no)
    rm -f "$w/$m/old$pp.plan"
    th=$(( pp == 1 ? 2 : 1 ))
    : > "$w/rates"
    for r in $(seq "$reps"); do
      for side in old new; do
        eval b=\$$side
        "$b/pprt" "$w/$m/new$pp.plan" "$w/$m/data" -o "$w/$m/out_$side" --threads $th --warmup 1 -q \
          --stats-json "$w/s.json"
        echo "$side $("$PY" -c "import json; print(json.load(open('$w/s.json'))['samples_per_s'])")" >> "$w/rates"
      done
    done
    same_out=yes
    for f in "$w/$m/out_new"/*.npy; do cmp -s "$f" "$w/$m/out_old/$(basename "$f")" || same_out=no; done
    "$PY" - "$w/rates" "$m" "$pp" "$same_plan" "$same_out" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
o = [float(v) for s, v in rows if s == "old"]
n = [float(v) for s, v in rows if s == "new"]
ratios = [b / a for a, b in zip(o, n)]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {statistics.median(o):.2f} | {statistics.median(n):.2f} | "
      f"{statistics.median(n) / statistics.median(o):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
      f"{sys.argv[4]} | {sys.argv[5]} |")
PYEOF
  done
done
echo
echo "(REPS=$reps alternations, BATCH=$BATCH, SAMPLES=$SAMPLES; load $(cut -d' ' -f1 /proc/loadavg) at the end)"
