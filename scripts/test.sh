#!/usr/bin/env bash
# The README's second command: set up, build, and run the whole test suite
# (unit, end-to-end, bad input, real models, the ASan+UBSan build and the
# -O3 Release build).
# Extra arguments go to ctest, e.g. scripts/test.sh -L fast
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j 2 "$@"
