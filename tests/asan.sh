#!/usr/bin/env bash
# Build the project with ASan+UBSan in a separate tree and run its fast tests.
set -euo pipefail
src=$1 build=$2 py=$3
cmake -S "$src" -B "$build" -DPP_SANITIZE=ON -DPP_PYTHON="$py" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" -L fast --output-on-failure
