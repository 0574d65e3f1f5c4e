#!/usr/bin/env bash
# Stages on MPI ranks against stages on threads: the same 2-stage plan run by
# `pprt` (2 stage threads) and by `mpirun -np 2 pprt` (2 ranks), alternately,
# REPS times each; the median pipeline throughput (pprt's samples/s: samples
# over the wall time of the pipeline itself, set-up excluded), the median time
# of the whole command (process start, plan and data loading, MPI set-up and
# finalization included) and the median CPU time (user + system, every
# process and thread) the command took: on a machine shared with other work
# the wall times depend on how much CPU the runs got, the CPU times do not. Models: torchvision ResNet-50 (random weights,
# 16 images, -pp 2 -b 1) and the digits sample (its 360 images repeated 100
# times, -pp 2 -b 16). Prints a Markdown table.
# Usage: bench/mpi.sh [BUILD_DIR] [REPS]   (a build with MPI: cmake finds libopenmpi-dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
reps=${2:-5}
py=$root/.venv/bin/python
[ -x "$py" ] || py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
bk=()
"$build/pprt" --help > /tmp/pprt_help.$$ && grep -q -- --backend /tmp/pprt_help.$$ && bk=(--backend ref); rm -f /tmp/pprt_help.$$

"$py" "$root/tests/models/export_torchvision.py" --model resnet50 --out "$work/r50" --batch 16 >/dev/null
"$build/ppcc" "$work/r50/model.onnx" -pp 2 -b 1 -q -o "$work/r50.plan"
mkdir -p "$work/digits"
"$py" -c "import numpy as np, sys; np.save(sys.argv[2], np.tile(np.load(sys.argv[1]), (100, 1, 1, 1)))" \
  "$root/samples/digits/data/input.npy" "$work/digits/input.npy"
"$build/ppcc" "$root/samples/digits/model.onnx" -pp 2 -b 16 -q -o "$work/digits.plan"

# run NAME OUT_DIR COMMAND...: appends "samples_per_s wall_seconds cpu_seconds" to $work/NAME.txt
run() {
  local name=$1 out=$2
  shift 2
  "$py" - "$work/s.json" "$@" -o "$out" -q --stats-json "$work/s.json" "${bk[@]}" >> "$work/$name.txt" <<'PY'
import json, resource, subprocess, sys, time
t0 = time.monotonic()
subprocess.run(sys.argv[2:], check=True)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.load(open(sys.argv[1]))["samples_per_s"], wall, ru.ru_utime + ru.ru_stime)
PY
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "| model | plan | samples | 2 threads: samples/s | 2 ranks: samples/s | ranks / threads | whole command, threads | whole command, ranks | CPU, threads | CPU, ranks | outputs |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for model in r50 digits; do
  case $model in
    r50) data=$work/r50/data label="ResNet-50" plan="-pp 2 -b 1" out=output.npy ;;
    digits) data=$work/digits label="digits" plan="-pp 2 -b 16" out=logits.npy ;;
  esac
  for i in $(seq "$reps"); do
    run ${model}_thr "$work/${model}_thr" "$build/pprt" "$work/$model.plan" "$data"
    run ${model}_mpi "$work/${model}_mpi" mpirun "${flags[@]}" -np 2 "$build/pprt" "$work/$model.plan" "$data"
  done
  same=$(cmp -s "$work/${model}_thr/$out" "$work/${model}_mpi/$out" && echo identical || echo DIFFERENT)
  "$py" - "$work/${model}_thr.txt" "$work/${model}_mpi.txt" "$label" "$plan" "$same" "$data" <<'PY'
import glob, statistics, sys
import numpy as np
thr = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
mpi = [tuple(map(float, l.split())) for l in open(sys.argv[2])]
label, plan, same, data = sys.argv[3:7]
n = len(np.load(glob.glob(data + "/*.npy")[0], mmap_mode="r"))
t = statistics.median(x[0] for x in thr); m = statistics.median(x[0] for x in mpi)
tc = statistics.median(x[1] for x in thr); mc = statistics.median(x[1] for x in mpi)
tu = statistics.median(x[2] for x in thr); mu = statistics.median(x[2] for x in mpi)
print(f"| {label} | {plan} | {n} | {t:.1f} | {m:.1f} | {m / t:.2f} | {tc:.2f} s | {mc:.2f} s | {tu:.2f} s | {mu:.2f} s | {same} |")
PY
done
echo
echo "medians of $reps runs each, alternating; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); kernels: ${bk[*]:-default}; load average before: $load"
