#!/usr/bin/env bash
# A/B of a ppcc option on one build: speed, CPU seconds and bits.
#
# For each model of the CI zoo's exports (build/tests/zoo/NAME, its data
# tiled to SAMPLES samples) two plans are compiled by the same ppcc, A with
# the default options and B with FLAGS added (e.g. "--disable-pass rows"),
# and run by the same pprt in turns, REPS times, at -pp 1 (2 threads),
# micro-batch BATCH, the default CPU backend, one warm-up micro-batch. It
# prints each side's median samples/s (pprt --stats-json: the run's wall
# time, plan loading and primitive creation excluded) and CPU seconds per
# run (user + system of the whole process, from /usr/bin/time), the ratio
# A / B with its range over the rounds, the Transposes in each plan's IR and
# whether the outputs are bit-identical.
#
# usage: bench/pass_ab.sh FLAGS [REPS]
#   env: MODELS (default "vit_b_16 swin_t"), BATCH (8), SAMPLES (32),
#        BUILD (build/ of this source tree), ZOO (BUILD/tests/zoo)
set -euo pipefail
flags=$1 reps=${2:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$src/build}
MODELS=${MODELS:-"vit_b_16 swin_t"} BATCH=${BATCH:-8} SAMPLES=${SAMPLES:-32}
ZOO=${ZOO:-$BUILD/tests/zoo}
PY=${PY:-$src/.venv/bin/python}
w=$(mktemp -d /tmp/pass_ab.XXXXXX)
trap 'rm -rf "$w"' EXIT
echo "A/B: A the defaults, B with \`$flags\`; $BUILD; $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}'), $(nproc) CPUs; $(date -u '+%F %H:%M') UTC; load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| model | Transposes A / B | A samples/s | B samples/s | A / B (range) | A CPU s | B CPU s | outputs identical |"
echo "|---|---|---|---|---|---|---|---|"
for m in $MODELS; do
  d=$ZOO/$m
  [ -f "$d/model.onnx" ] || { echo "| $m | not exported at $d (run the zoo first) | | | | | | |"; continue; }
  mkdir -p "$w/$m/data"
  "$PY" "$src/bench/benchlib.py" tile "$d/data" "$w/$m/data" "$SAMPLES"
  "$BUILD/ppcc" "$d/model.onnx" -b "$BATCH" -o "$w/$m/a.plan" -q
  # shellcheck disable=SC2086
  "$BUILD/ppcc" "$d/model.onnx" -b "$BATCH" $flags -o "$w/$m/b.plan" -q
  ta=$("$BUILD/ppcc" "$d/model.onnx" -b "$BATCH" --dump-ir -q -o /dev/null | grep -c ' Transpose ' || true)
  # shellcheck disable=SC2086
  tb=$("$BUILD/ppcc" "$d/model.onnx" -b "$BATCH" $flags --dump-ir -q -o /dev/null | grep -c ' Transpose ' || true)
  : > "$w/rates"
  for r in $(seq "$reps"); do
    for side in a b; do
      /usr/bin/time -f "%U %S" -o "$w/time" "$BUILD/pprt" "$w/$m/$side.plan" "$w/$m/data" -o "$w/$m/out_$side" \
        --threads 2 --warmup 1 -q --stats-json "$w/s.json"
      echo "$side $("$PY" -c "import json; print(json.load(open('$w/s.json'))['samples_per_s'])") $(awk '{print $1 + $2}' "$w/time")" >> "$w/rates"
    done
  done
  same_out=yes
  for f in "$w/$m/out_a"/*.npy; do cmp -s "$f" "$w/$m/out_b/$(basename "$f")" || same_out=no; done
  "$PY" - "$w/rates" "$m" "$ta / $tb" "$same_out" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
a = [float(v) for s, v, c in rows if s == "a"]
b = [float(v) for s, v, c in rows if s == "b"]
ca = [float(c) for s, v, c in rows if s == "a"]
cb = [float(c) for s, v, c in rows if s == "b"]
ratios = [x / y for x, y in zip(a, b)]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | "
      f"{statistics.median(a) / statistics.median(b):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
      f"{statistics.median(ca):.2f} | {statistics.median(cb):.2f} | {sys.argv[4]} |")
PYEOF
done
echo
echo "(REPS=$reps alternations, BATCH=$BATCH, SAMPLES=$SAMPLES; load $(cut -d' ' -f1 /proc/loadavg) at the end)"
