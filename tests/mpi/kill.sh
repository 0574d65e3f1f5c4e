#!/usr/bin/env bash
# Kill one rank of a running 3-rank pipeline with SIGKILL and check that the
# others are gone, nonzero, within the bound, with a message naming the dead
# rank.
#
# usage: kill.sh PLAN DATA_DIR WORK_DIR MODE     (env: PPRT, MPIRUN, MPIFLAGS,
#        KILL_ARGS: pprt's backend options, default --backend ref)
#   MODE default:  plain mpirun. Open MPI itself ends the job when a rank
#                  dies; mpirun's exit status must be nonzero, its message
#                  names the rank, every rank gone within the bound.
#   MODE recovery: mpirun --enable-recovery, so Open MPI leaves the survivors
#                  running and pprt's own heartbeats must find the dead rank:
#                  each survivor exits nonzero (a wrapper records its status)
#                  with a message naming rank 1, within --mpi-timeout + slack.
# The plan must run long enough (several seconds) to be killed mid-run: the
# ranks use the reference kernels (--backend ref), slow enough for that.
set -euo pipefail
: "${PPRT:?}" "${MPIRUN:?}"
plan=$1 data=$2 work=$3 mode=$4
timeout_s=10 bound=13 # --mpi-timeout 10, plus up to 3 s for the abort exchange
read -r -a flags <<< "${MPIFLAGS:-}"
read -r -a args <<< "${KILL_ARGS:---backend ref}"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
children() { ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' ' || true; }
rank_of() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }

# pprt processes of the job: children of mpirun, or of the recording wrappers
ranks_of_job() {
  local c g
  for c in $(children "$1"); do
    if [ "$mode" = recovery ]; then for g in $(children "$c"); do echo "$g"; done; else echo "$c"; fi
  done
}

if [ "$mode" = recovery ]; then
  "$MPIRUN" "${flags[@]}" --enable-recovery -np 3 sh -c \
    '"$0" "$@"; echo $? > rc.$OMPI_COMM_WORLD_RANK' \
    "$PPRT" "$plan" "$data" -o out -q "${args[@]}" --mpi-timeout $timeout_s > log 2>&1 &
else
  "$MPIRUN" "${flags[@]}" -np 3 "$PPRT" "$plan" "$data" -o out -q "${args[@]}" --mpi-timeout $timeout_s > log 2>&1 &
fi
job=$!

fail() {
  echo "FAIL ($mode): $*"
  sed 's/^/  | /' log
  kill -9 $(ranks_of_job $job) 2>/dev/null || true
  kill -9 $job 2>/dev/null || true
  exit 1
}

# wait for the three ranks, then let them run (set-up takes well under a second)
pids=() victim=""
for _ in $(seq 100); do
  pids=($(ranks_of_job $job))
  [ ${#pids[@]} -eq 3 ] && break
  sleep 0.1
done
[ ${#pids[@]} -eq 3 ] || fail "did not find 3 ranks of the job"
sleep 2
for p in "${pids[@]}"; do [ "$(rank_of "$p")" = 1 ] && victim=$p; done
[ -n "$victim" ] || fail "no rank 1 among ${pids[*]}"
kill -0 "$job" 2>/dev/null || fail "the job ended before the kill: the plan is too short"
kill -9 "$victim"
t0=$(now)

# every rank and mpirun gone within the bound
while :; do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  kill -0 "$job" 2>/dev/null && alive=1
  [ $alive = 0 ] && break
  awk -v e="$(elapsed "$t0")" -v b=$bound 'BEGIN { exit !(e > b) }' && fail "ranks still running $bound s after the kill"
  sleep 0.1
done
rc=0
wait $job || rc=$?
took=$(elapsed "$t0")
grep -q '^outputs:' log && fail "the run completed: the plan is too short to kill mid-run"

if [ "$mode" = recovery ]; then
  for r in 0 2; do
    [ -f rc.$r ] || fail "rank $r recorded no exit status"
    [ "$(cat rc.$r)" != 0 ] || fail "rank $r exited 0 after rank 1 died"
    grep -Eq "^pprt: rank $r \((stage [0-9]+(, replica [0-9]+)?)\): .*rank 1 \(stage [0-9]+(, replica 1)?\)" log ||
      fail "rank $r did not name rank 1"
  done
  grep -Eq "rank 1 \(stage [0-9]+(, replica 1)?\) is not responding" log || fail "no rank reported rank 1 as not responding"
  echo "kill ($mode${KILL_ARGS:+, $KILL_ARGS}): rank 1 killed; ranks 0 and 2 exited $(cat rc.0) and $(cat rc.2) after $took s, naming rank 1"
else
  [ $rc != 0 ] || fail "mpirun exited 0 after rank 1 died"
  grep -Eq "rank 1[ (]|rank 1$" log || fail "no message names rank 1"
  echo "kill ($mode): rank 1 killed; the job was gone after $took s, mpirun exit $rc, rank 1 named"
fi
