#!/usr/bin/env bash
# Start-up cost of pprt (issue 53): wall time and peak RSS of
#   1. pprt --version
#   2. the digits sample on the reference kernels (scripts/sample.sh's plan:
#      ppcc -pp 2 -b 16; pprt --backend ref --labels ... -o DIR)
# and, for reference, 3. pprt --backend cuda --version (which loads the CUDA
# module where pprt has one; before issue 53 the same as 1.).
# REPS runs of each (default 11); prints the median and the minimum wall time
# and the median peak RSS (/usr/bin/time's "Maximum resident set size"), and
# how many CUDA libraries the process mapped (LD_DEBUG=libs: cudart,
# cuBLAS(Lt), cuDNN, NCCL, the CUDA module). Compare two pprts:
#   bench/startup.sh build/pprt /tmp/old/pprt
# (ppcc from build/ compiles the plan once; each pprt runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PPCC=${PPCC:-build/ppcc}
REPS=${REPS:-11}
[ $# -gt 0 ] || set -- build/pprt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PPCC" samples/digits/model.onnx -pp 2 -b 16 -o "$tmp/digits.plan" -q
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; $(date -u +%F)"
# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {print NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
measure() { # label, command...
  local label=$1; shift
  : > "$tmp/t"
  for _ in $(seq "$REPS"); do # wall time from bash's clock (time's %e has 10 ms steps), peak RSS from time
    local t0=$EPOCHREALTIME
    /usr/bin/time -f '%M' -o "$tmp/one" "$@" >/dev/null 2>&1
    local t1=$EPOCHREALTIME
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}') $(cat "$tmp/one")" >> "$tmp/t"
  done
  local libs
  libs=$(LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep 'calling init:' \
    | { grep -oE '(libcudart|libcublasLt|libcublas|libcudnn[a-z_]*|libnccl|pprt_cuda)\.so' || true; } | sort -u | wc -l)
  printf '  %-30s %6.3f s median (min %.3f), %4d MB peak RSS, %d CUDA libraries mapped\n' "$label" \
    "$(cut -d' ' -f1 "$tmp/t" | median)" "$(cut -d' ' -f1 "$tmp/t" | sort -g | head -1)" \
    "$(( $(cut -d' ' -f2 "$tmp/t" | median | cut -d. -f1) / 1024 ))" "$libs"
}
for pprt in "$@"; do
  echo "$pprt ($REPS runs each):"
  measure "pprt --version" "$pprt" --version
  measure "digits on ref (-pp 2 -b 16)" "$pprt" "$tmp/digits.plan" samples/digits/data --backend ref \
    --labels samples/digits/labels.npy -o "$tmp/out"
  if "$pprt" --backend cuda --version >/dev/null 2>&1; then
    measure "pprt --backend cuda --version" "$pprt" --backend cuda --version
  fi
done
