#!/usr/bin/env bash
# Training on MPI ranks against training on threads (docs/training.md, "On
# MPI ranks"): the same -pp 2 training plan trained by `pprt` (threads) and by
# `mpirun -np 2 pprt` (a rank per device), then with --replicas 2 against
# `mpirun -np 4`, alternately, REPS times each: the median step time (the
# mean of steps 2.. of --log-json, the first step's executor set-up left
# out), the median CPU time of the whole command (user + system, every
# process and thread: on a shared machine the wall times depend on how much
# CPU the runs got, the CPU times less so) and whether the trained weights
# are the same bytes. Model: torchvision ResNet-18 (random weights,
# training-mode BatchNorm, 10 classes, 32x32 images, -b 4, 4 micro-batches a
# step, AdamW, --backend dnnl --threads 1). Prints a Markdown table.
# Usage: bench/train_mpi.sh [BUILD_DIR] [REPS] [PPRT]   (a build with MPI; PPRT: another
# pprt binary to time with BUILD_DIR's ppcc, e.g. an older build for a before/after)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
reps=${2:-3}
pprt=${3:-$build/pprt}
py=$root/.venv/bin/python
[ -x "$py" ] || py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
cd "$work"
"$py" "$root/tests/tools/export_resnet18.py" r18.onnx --batch 4 --size 32 --samples 64 \
  --data data --labels labels.npy 2> /dev/null
"$build/ppcc" r18.onnx --train --loss cross-entropy:logits -b 4 -pp 2 -o r18.plan -q
args=(r18.plan data --labels labels.npy --accumulate 4 --steps 6 --no-shuffle --optimizer adamw --lr 1e-3
      --backend dnnl --threads 1 -q)

# run NAME COMMAND...: appends "step_seconds cpu_seconds" to NAME.txt (the run's weights in NAME/)
run() {
  local name=$1
  shift
  "$py" - "$name" "$@" --save-weights "$name" --log-json "$name.json" >> "$name.txt" << 'PY'
import json, resource, subprocess, sys
subprocess.run(sys.argv[2:], check=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
st = json.load(open(sys.argv[1] + ".json"))["steps"][1:]
print(sum(4 * 4 / s["samples_per_s"] for s in st) / len(st), ru.ru_utime + ru.ru_stime)
PY
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq "$reps"); do
  run thr1 "$pprt" "${args[@]}"
  run mpi2 mpirun "${flags[@]}" -np 2 "$pprt" "${args[@]}"
  run thr2 "$pprt" "${args[@]}" --replicas 2
  run mpi4 mpirun "${flags[@]}" -np 4 "$pprt" "${args[@]}" --replicas 2
done
echo "| run | threads: step s | ranks: step s | ranks / threads | CPU s, threads | CPU s, ranks | weights |"
echo "|---|---:|---:|---:|---:|---:|---|"
for pair in "thr1 mpi2 -pp 2, 2 ranks" "thr2 mpi4 -pp 2 --replicas 2, 4 ranks"; do
  read -r a b label <<< "$pair"
  same=identical
  for f in "$a"/*.npy; do cmp -s "$f" "$b/$(basename "$f")" || same=DIFFERENT; done
  "$py" - "$a.txt" "$b.txt" "$label" "$same" << 'PY'
import statistics, sys
a = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
b = [tuple(map(float, l.split())) for l in open(sys.argv[2])]
ta, tb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
ca, cb = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
print(f"| {sys.argv[3]} | {ta:.3f} | {tb:.3f} | {tb / ta:.2f} | {ca:.1f} | {cb:.1f} | {sys.argv[4]} |")
PY
done
echo
echo "medians of $reps runs each, alternating; pprt: $pprt; $(nproc) cores," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average before: $load, after:" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
