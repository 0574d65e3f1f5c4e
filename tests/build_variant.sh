#!/usr/bin/env bash
# Build the project in a separate tree with extra cmake options and run its
# fast tests there. The asan test passes -DPP_SANITIZE=ON (ASan+UBSan, the
# options below make every finding fatal); the release test passes
# -DCMAKE_BUILD_TYPE=Release: GCC's -O3 inlining reaches warnings
# (-Wmaybe-uninitialized, -Wstringop-*) that the default RelWithDebInfo (-O2)
# build does not, -Werror turns them into a failed build, and NDEBUG drops the
# assert()s.
# usage: build_variant.sh SRC BUILD_DIR PYTHON [CMAKE_OPTION...]
set -euo pipefail
src=$1 build=$2 py=$3
shift 3
cmake -S "$src" -B "$build" -DPP_PYTHON="$py" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# fewer random single-op models than the main build draws (tests/bad/op_attrs.py): the variants are
# there for memory errors and -O3 warnings, the main build's run for coverage (82 s under ASan at 8)
export PP_ATTRS_PER_OP=${PP_ATTRS_PER_OP:-3}
# and fewer gradient cases a family (tests/train/grad_fd.py: 38 families of 15 in the main build, about
# 90 s there; the variants look for memory errors in the same rules, not for more draws)
export PP_FD_PER_OP=${PP_FD_PER_OP:-5}
# VARIANT_EXCLUDE (a ctest -E regex): fast tests this variant leaves to the
# main build, where a second run adds time but no finding of the kind the
# variant is for (PP_FULL_VARIANTS=1 runs them all, as scripts/test.sh's full
# run does)
if [ -n "${VARIANT_EXCLUDE:-}" ] && [ -z "${PP_FULL_VARIANTS:-}" ]; then
  ctest --test-dir "$build" -L fast -E "$VARIANT_EXCLUDE" --output-on-failure
else
  ctest --test-dir "$build" -L fast --output-on-failure
fi
# passed: the tests' work directories (plans, inputs, outputs: about 250 MB a
# variant) go, the build stays for the next run (CI's disk is finite)
find "$build/tests" -mindepth 1 -maxdepth 1 -type d ! -name CMakeFiles -exec rm -rf {} +
