#!/usr/bin/env bash
# A/B of two builds of pprt, or of two sets of ppcc options on one build:
# speed, CPU seconds and bits.
#
# For each model of the CI zoo's exports (build/tests/zoo/NAME: model.onnx and
# data, tiled to SAMPLES samples) the plan is compiled by each build's ppcc,
# with OLD_FLAGS or NEW_FLAGS added (the script says whether the two plans
# are byte-identical). Without flags NEW's plan is run by both pprts (the
# builds compared); with flags each side runs its own plan on its own pprt
# (pass the same build twice to compare options, e.g. OLD_FLAGS="--disable-pass
# rows"). In turns, REPS times, at -pp 1 (2 threads) and -pp 2 (1 thread per
# stage), micro-batch BATCH, the default CPU backend, one warm-up
# micro-batch. It prints each side's median samples/s (pprt --stats-json: the
# run's wall time, plan loading and primitive creation excluded) and CPU
# seconds a run (user + system of the whole pprt process, /usr/bin/time), the
# ratio NEW / OLD with its range over the rounds, and whether the outputs are
# bit-identical.
#
# usage: bench/ab.sh OLD_BUILD NEW_BUILD [REPS]
#   env: MODELS (default "resnet50 efficientnet_b0 vit_b_16"), BATCH (8),
#        SAMPLES (32), PPS (-pp values, default "1 2"), OLD_FLAGS, NEW_FLAGS,
#        ZOO (build/tests/zoo of NEW's source tree)
set -euo pipefail
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd) reps=${3:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-"resnet50 efficientnet_b0 vit_b_16"} BATCH=${BATCH:-8} SAMPLES=${SAMPLES:-32} PPS=${PPS:-"1 2"}
OLD_FLAGS=${OLD_FLAGS:-} NEW_FLAGS=${NEW_FLAGS:-}
ZOO=${ZOO:-$src/build/tests/zoo}
PY=${PY:-$src/.venv/bin/python}
own=$([ -n "$OLD_FLAGS$NEW_FLAGS" ] && echo 1 || echo 0) # each side its own plan
w=$(mktemp -d /tmp/ab.XXXXXX)
trap 'rm -rf "$w"' EXIT
echo "A/B: OLD $old ${OLD_FLAGS:+(ppcc $OLD_FLAGS)}, NEW $new ${NEW_FLAGS:+(ppcc $NEW_FLAGS)}; $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}'), $(nproc) CPUs; $(date -u '+%F %H:%M') UTC; load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| model | -pp | OLD samples/s | NEW samples/s | NEW / OLD (range) | OLD CPU s | NEW CPU s | plans identical | outputs identical |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in $MODELS; do
  d=$ZOO/$m
  [ -f "$d/model.onnx" ] || { echo "| $m | | not exported at $d (run the zoo first) | | | | | | |"; continue; }
  mkdir -p "$w/$m/data"
  "$PY" "$src/bench/benchlib.py" tile "$d/data" "$w/$m/data" "$SAMPLES"
  for pp in $PPS; do
    # shellcheck disable=SC2086
    "$new/ppcc" "$d/model.onnx" -pp $pp -b "$BATCH" $NEW_FLAGS -o "$w/$m/new$pp.plan" -q
    # shellcheck disable=SC2086
    "$old/ppcc" "$d/model.onnx" -pp $pp -b "$BATCH" $OLD_FLAGS -o "$w/$m/old$pp.plan" -q
    same_plan=$(cmp -s "$w/$m/new$pp.plan" "$w/$m/old$pp.plan" && echo yes || echo no)
    [ "$own" = 1 ] || rm -f "$w/$m/old$pp.plan"
    th=$(( pp == 1 ? 2 : 1 ))
    : > "$w/rates"
    for r in $(seq "$reps"); do
      for side in old new; do
        eval b=\$$side
        plan=$w/$m/new$pp.plan; [ "$own" = 0 ] || plan=$w/$m/$side$pp.plan
        /usr/bin/time -f "%U %S" -o "$w/time" "$b/pprt" "$plan" "$w/$m/data" -o "$w/$m/out_$side" --threads $th \
          --warmup 1 -q --stats-json "$w/s.json"
        echo "$side $("$PY" -c "import json; print(json.load(open('$w/s.json'))['samples_per_s'])") $(awk '{print $1 + $2}' "$w/time")" >> "$w/rates"
      done
    done
    same_out=yes
    for f in "$w/$m/out_new"/*.npy; do cmp -s "$f" "$w/$m/out_old/$(basename "$f")" || same_out=no; done
    "$PY" - "$w/rates" "$m" "$pp" "$same_plan" "$same_out" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
o = [float(v) for s, v, c in rows if s == "old"]
n = [float(v) for s, v, c in rows if s == "new"]
co = [float(c) for s, v, c in rows if s == "old"]
cn = [float(c) for s, v, c in rows if s == "new"]
ratios = [b / a for a, b in zip(o, n)]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {statistics.median(o):.2f} | {statistics.median(n):.2f} | "
      f"{statistics.median(n) / statistics.median(o):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
      f"{statistics.median(co):.2f} | {statistics.median(cn):.2f} | {sys.argv[4]} | {sys.argv[5]} |")
PYEOF
  done
done
echo
echo "(REPS=$reps alternations, BATCH=$BATCH, SAMPLES=$SAMPLES; load $(cut -d' ' -f1 /proc/loadavg) at the end)"
