#!/usr/bin/env bash
# ctest's wrapper for the tests whose work directories grow large (exported
# models, plans with their weights, trained weights: up to 1 GB a test). It
# runs the test and, once it has passed, removes its work directory, so that
# the suite's disk peak is the zoo's exports and the tests running at that
# moment, not the sum of every test's files (CI's disk is finite: a run on
# 2026-12-05 stopped at 'No space left on device'). A failed or skipped test
# keeps its files to be read; PP_KEEP_WORK=1 keeps every test's.
# usage: clean_pass.sh WORK_DIR COMMAND [ARG...]
set -u
work=$1
shift
case $work in
  /*/*) ;;
  *) echo "clean_pass.sh: '$work' is not an absolute work directory" >&2; exit 2 ;;
esac
"$@"
rc=$?
if [ "$rc" -eq 0 ] && [ -z "${PP_KEEP_WORK:-}" ]; then
  rm -rf -- "$work"
fi
exit "$rc"
