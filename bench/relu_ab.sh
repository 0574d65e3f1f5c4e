#!/usr/bin/env bash
# What pprt's NaN-keeping Relu and Clip cost: each model at -b 8 (2 threads,
# 32 samples) under each of two settings, ROUNDS alternations; samples/s per
# run, one line per model. Settings (env A and B, default
# PPRT_DNNL_GUARD=0 and PPRT_DNNL_GUARD=1): the exact path always (the
# convolution, then a clamp pass over its output) against the guarded
# fast post-op; PPRT_DNNL_RELU=max is oneDNN's relu with NaN lost (timings
# only).
# Usage: [A=VAR=V B=VAR=V] bench/relu_ab.sh BUILD_DIR MODEL_DIR "model ..." [ROUNDS]
# (MODEL_DIR/NAME/model.onnx and MODEL_DIR/NAME/data32, as run_zoo.py and
# bench/cpu.sh leave them)
set -euo pipefail
build=$1 dir=$2 models=$3 rounds=${4:-3}
A=${A:-PPRT_DNNL_GUARD=0} B=${B:-PPRT_DNNL_GUARD=1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in $models; do
  "$build/ppcc" "$dir/$m/model.onnx" -b 8 -o "$tmp/p.plan" -q
  line=$m
  for _ in $(seq "$rounds"); do
    for v in "$A" "$B"; do
      env "$v" "$build/pprt" "$tmp/p.plan" "$dir/$m/data32" -o "$tmp/out" -q --threads 2 --warmup 2 \
        --stats-json "$tmp/s.json" >/dev/null
      line="$line $v:$(python3 -c "import json, sys; print(round(json.load(open(sys.argv[1]))['samples_per_s'], 1))" "$tmp/s.json")"
      rm -rf "$tmp/out"
    done
  done
  echo "$line"
done
