# Sourced by the MPI test scripts (run.sh, cuda.sh, train.sh): what each of
# them needs the same way.
#   expect_rc WANT LOG COMMAND...  run it (120 s at most), its exit status must be WANT
#   expect_msg LOG REGEX [COUNT]   LOG has at least COUNT (1) lines matching REGEX
#   same_dirs A B                  the same .npy files in A and B, byte for byte (exit 1 naming
#                                  the first that differs); checks += their count
#   same_losses LOG_A LOG_B        two --log-json logs: every step's loss and the held-out
#                                  records equal (a training run's); checks += 1
#   mpi_require NAME               exit 77 (skipped), saying so as NAME, where pprt was
#                                  built without MPI or there is no mpirun
#   mpi_kill_both PLAN DATA DIR    tests/mpi/kill.sh on PLAN (KILL_ARGS its options) with plain
#                                  mpirun and with --enable-recovery, into DIR_default and DIR_recovery
#   mpi_env                        M=(mpirun and its flags) for this user, MPIFLAGS
#                                  exported (kill.sh), and Open MPI's settings for
#                                  ASan builds: its own leaks are not the project's
#                                  (lsan.supp names its libraries); whole stacks,
#                                  and its plugins kept loaded, so the names resolve
same_dirs() {
  local n=0 f
  for f in "$1"/*.npy; do
    cmp -s "$f" "$2/$(basename "$f")" || { echo "FAIL: $f differs from $2/$(basename "$f")"; exit 1; }
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] && [ "$n" = "$(ls "$2"/*.npy | wc -l)" ] || { echo "FAIL: $1 and $2 hold other files"; exit 1; }
  checks=$((${checks:-0} + n))
}
same_losses() {
  "$PY" - "$1" "$2" << 'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
assert la == lb and len(la) > 0, (la, lb)
ea = [(e["eval_loss"], e["eval_accuracy"]) for e in a["epochs"]]
eb = [(e["eval_loss"], e["eval_accuracy"]) for e in b["epochs"]]
assert ea == eb, (ea, eb)
EOF
  checks=$((${checks:-0} + 1))
}
mpi_require() {
  if [ "${PP_MPI:-OFF}" != ON ]; then echo "$1: pprt was built without MPI; skipping"; exit 77; fi
  if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" > /dev/null; then echo "$1: no mpirun; skipping"; exit 77; fi
}
mpi_kill_both() {
  bash "$SRC/tests/mpi/kill.sh" "$1" "$2" "${3}_default" default
  bash "$SRC/tests/mpi/kill.sh" "$1" "$2" "${3}_recovery" recovery
}
expect_rc() {
  local want=$1 log=$2 rc=0
  shift 2
  timeout -k 10 120 "$@" > "$log" 2>&1 || rc=$?
  if [ $rc != "$want" ]; then
    echo "FAIL: exit $rc, expected $want: $*"; sed 's/^/  | /' "$log"; exit 1
  fi
}
expect_msg() {
  local n
  n=$(grep -Ec -e "$2" "$1" || true)
  if [ "${n:-0}" -lt "${3:-1}" ]; then
    echo "FAIL: expected ${3:-1} line(s) matching '$2' in $1, found $n"; sed 's/^/  | /' "$1"; exit 1
  fi
}
mpi_env() {
  local flags=(--oversubscribe)
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
  export MPIFLAGS="${flags[*]}"
  M=("$MPIRUN" "${flags[@]}")
  export LSAN_OPTIONS="suppressions=$SRC/tests/mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
  export OMPI_MCA_mca_base_component_disable_dlclose=1
}
