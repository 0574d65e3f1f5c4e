#!/usr/bin/env bash
# The README's second command: set up, build, and run the whole test suite
# (unit, end-to-end, bad input, real models, the ASan+UBSan build and the
# -O3 Release build).
# Extra arguments go to ctest, e.g. scripts/test.sh -L fast. The sanitizer and
# Release builds leave a few slow sweeps to the main build (VARIANT_EXCLUDE in
# tests/CMakeLists.txt); PP_FULL_VARIANTS=1 scripts/test.sh runs them there too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)"
# the suite's files peak at about 3.4 GB under build/ (the zoo's exported
# models, the sanitizer and release builds, the tests running at the time:
# each removes its work directory once it passes, tests/clean_pass.sh), 3.7 GB
# with .venv: say what is free, so a run that fills the disk says why
free_mb=$(df -Pm build | awk 'NR == 2 {print $4}')
echo "disk: $free_mb MB free under build/ (the suite needs about 3800 MB)"
[ "$free_mb" -ge 3800 ] || echo "warning: less disk than the suite needs; tests may fail with 'No space left on device'"
ctest --test-dir build --output-on-failure -j 2 "$@"
