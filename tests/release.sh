#!/usr/bin/env bash
# Build the project as a Release (-O3 -DNDEBUG) in a separate tree and run its
# fast tests: GCC's -O3 inlining reaches warnings (-Wmaybe-uninitialized,
# -Wstringop-*) that the default RelWithDebInfo (-O2) build does not, and
# -Werror turns them into a failed build; NDEBUG drops the assert()s.
set -euo pipefail
src=$1 build=$2 py=$3
cmake -S "$src" -B "$build" -DPP_PYTHON="$py" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
ctest --test-dir "$build" -L fast --output-on-failure
