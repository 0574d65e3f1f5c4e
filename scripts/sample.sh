#!/usr/bin/env bash
# The README's first command: set up, build, compile the bundled digits CNN
# into a 2-stage plan, and run it over the held-out test images.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
./build/ppcc samples/digits/model.onnx -pp 2 -b 16 -o build/digits.plan --report
./build/pprt build/digits.plan samples/digits/data --labels samples/digits/labels.npy -o build/digits-out
echo "PyTorch measured accuracy: $(cat samples/digits/accuracy.txt)"
