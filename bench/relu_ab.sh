#!/usr/bin/env bash
# What pprt's NaN-keeping Relu costs: each model at -b 8 (2 threads, 32
# samples) with PPRT_DNNL_RELU=nan (the default: an unfused Conv + Relu runs
# the convolution, then a clamp pass over its output) and =max (oneDNN's relu
# post-op, which gives 0 for NaN: for timings only), ROUNDS alternations.
# Prints samples/s per run, one line per model.
# Usage: bench/relu_ab.sh BUILD_DIR MODEL_DIR "model ..." [ROUNDS]
# (MODEL_DIR/NAME/model.onnx and MODEL_DIR/NAME/data32, as run_zoo.py and
# bench/cpu.sh leave them)
set -euo pipefail
build=$1 dir=$2 models=$3 rounds=${4:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in $models; do
  "$build/ppcc" "$dir/$m/model.onnx" -b 8 -o "$tmp/p.plan" -q
  line=$m
  for _ in $(seq "$rounds"); do
    for v in nan max; do
      PPRT_DNNL_RELU=$v "$build/pprt" "$tmp/p.plan" "$dir/$m/data32" -o "$tmp/out" -q --threads 2 --warmup 2 \
        --stats-json "$tmp/s.json" >/dev/null
      line="$line $v=$(python3 -c "import json, sys; print(round(json.load(open(sys.argv[1]))['samples_per_s'], 1))" "$tmp/s.json")"
      rm -rf "$tmp/out"
    done
  done
  echo "$line"
done
