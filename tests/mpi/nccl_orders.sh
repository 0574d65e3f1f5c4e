#!/usr/bin/env bash
# The NCCL link's start-up and failure orders on the emulated NCCL (ctest
# mpi_nccl_orders, labels mpi and cuda; about 60 s). comm/p2p_emu.c models
# NCCL's lazy connection (a communicator's first operation waits for the
# peer's first), a slow peer (PPRT_EMU_NCCL_DELAY) and a dead one
# (PPRT_EMU_NCCL_DIE); digits at -pp 3 on three ranks of cuda-emu:
#   - lazy connection, a slow peer: rank 0's first send 4 s late (an
#     executor slow to build) with --mpi-timeout 2, and rank 1's init 1.5 s
#     late with --mpi-timeout 5: bit-identical to the threaded run; the same
#     late send in the order before issue 57 (PPRT_P2P_OLD_START=1: no
#     warm-up, receives posted while the links are built) stalls rank 1 and
#     the run fails within the timeout, named (rank 2's init or rank 1's
#     wait for the connection, whichever ends first: so the emulation shows
#     the fault the new order removes); two ranks in the old order still get through
#     (the lazy connection meets the first send);
#   - the ranks' devices described to the writer: none differ, no warning;
#     PPRT_EMU_SMS=1:100 (rank 1's emulated device has 100 SMs): one warning
#     naming both, --stats-json devices_differ true and each stage's SMs;
#   - a peer that joins too late (rank 1's init 8 s late, --mpi-timeout 2):
#     every rank exits 1, the message naming ncclCommInitRankConfig and the
#     timeout;
#   - a dead peer at each phase (rank 1 killed at its init, its warm-up, its
#     first receive, its sixth; rank 0 at its third send; rank 2 at its
#     init), under mpirun --enable-recovery so that pprt's own detection
#     must end the survivors: each exits nonzero within the bound, with a
#     message naming the dead rank.
# usage: nccl_orders.sh WORK_DIR   (env: PPCC, PPRT, SRC, PP_MPI, MPIRUN)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
if [ "${PP_MPI:-OFF}" != ON ] || [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" > /dev/null; then
  echo "mpi_nccl_orders: this build has no MPI (or no mpirun): skipping"
  exit 77
fi
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
M=("$MPIRUN" "${flags[@]}")
export LSAN_OPTIONS="suppressions=$SRC/tests/mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
below() { awk -v t="$1" -v b="$2" 'BEGIN { exit !(t < b) }'; }
run() { # run WANT LOG ENV... -- PPRT_ARGS...: mpirun -np $NP, every variable passed on
  local want=$1 log=$2 rc=0 envs=() xs=()
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); xs+=(-x "${1%%=*}"); shift; done
  shift
  env "${envs[@]}" timeout -k 10 120 "${M[@]}" "${xs[@]}" -np "${NP:-3}" "$PPRT" "$@" > "$log" 2>&1 || rc=$?
  [ $rc = "$want" ] || { echo "FAIL: exit $rc, expected $want: ${envs[*]} $*"; sed 's/^/  | /' "$log"; exit 1; }
}

for pp in 2 3; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  "$PPRT" d$pp.plan "$S/data" -o thr$pp --backend cuda-emu -q
done
A=(--backend cuda-emu --transport nccl -q)

# ---- lazy connection and slow peers: the right result ----------------------------------------
t0=$(now)
run 0 slow_send.txt PPRT_EMU_NCCL_DELAY=0:send:0:4000 -- d3.plan "$S/data" -o slow_send "${A[@]}" --mpi-timeout 2
cmp thr3/logits.npy slow_send/logits.npy || fail "rank 0's first send 4 s late: other outputs"
echo "ok: rank 0's first send 4 s late, --mpi-timeout 2: bit-identical to threads ($(secs $t0) s)"
run 0 slow_init.txt PPRT_EMU_NCCL_DELAY=1:init:0:1500 -- d3.plan "$S/data" -o slow_init "${A[@]}" --mpi-timeout 5
cmp thr3/logits.npy slow_init/logits.npy || fail "rank 1's init 1.5 s late: other outputs"
echo "ok: rank 1's NCCL init 1.5 s late, --mpi-timeout 5: bit-identical to threads"
NP=2 run 0 old2.txt PPRT_P2P_OLD_START=1 -- d2.plan "$S/data" -o old2 "${A[@]}" --mpi-timeout 5
cmp thr2/logits.npy old2/logits.npy || fail "two ranks in the old start-up order: other outputs"
echo "ok: two ranks in the old start-up order (no warm-up; the lazy connection made by the first send): bit-identical"
t0=$(now)
run 1 old3.txt PPRT_P2P_OLD_START=1 PPRT_EMU_NCCL_DELAY=0:send:0:4000 -- d3.plan "$S/data" -o old3 "${A[@]}" \
  --mpi-timeout 2
took=$(secs $t0)
# rank 2's init times out, or rank 1's bounded wait for the connection ends it first: a race
for r in 0 1 2; do
  grep -Eq "^pprt: rank $r \(stage $r\): .*(ncclCommInitRankConfig|ncclRecv) did not complete within 2 s \(--mpi-timeout\)" old3.txt \
    || { cat old3.txt; fail "the old order with a late first send: rank $r names no timeout"; }
done
[ ! -e old3 ] || fail "a failed run wrote outputs"
echo "ok: the same late send in the old order stalls rank 1 (its first receive waits for the connection) and fails, named on every rank ($took s): $(grep -o '[a-zA-Z]* did not complete within 2 s' old3.txt | head -1)"

# ---- the devices described across ranks: one kind, then rank 1 on another (PPRT_EMU_SMS) -------------
run 0 dev_same.txt PPRT_EMU_SMS= -- d3.plan "$S/data" -o dev_same "${A[@]}" --stats-json dev_same.json
run 0 dev_diff.txt PPRT_EMU_SMS=1:100 -- d3.plan "$S/data" -o dev_diff "${A[@]}" --stats-json dev_diff.json
! grep -q warning dev_same.txt || fail "one kind of device: $(grep warning dev_same.txt)"
n=$(grep -c "^pprt: warning: rank 1 (stage 1)'s device (cuda-emu, compute capability 9.0, 100 SMs; .*) differs from rank 0 (stage 0)'s (cuda-emu, 9.0, 132 SMs" dev_diff.txt || true)
[ "$n" = 1 ] || { cat dev_diff.txt; fail "rank 1 on a 100-SM device: $n warnings, expected 1"; }
for f in same:False:132,132,132 diff:True:132,100,132; do
  IFS=: read -r tag differ sms <<< "$f"
  got=$("${PY:-python3}" -c "import json, sys; j = json.load(open(sys.argv[1])); print(j['devices_differ'], ','.join(str(s['device']['sms']) for s in j['stages']))" dev_$tag.json)
  [ "$got" = "$differ $sms" ] || fail "--stats-json of dev_$tag: '$got', expected '$differ $sms'"
done
cmp dev_same/logits.npy dev_diff/logits.npy || fail "the emulated SM count changed the outputs"
echo "ok: the ranks' devices reach the writer: no warning for one kind; rank 1 on 100 SMs: one warning, devices_differ true"

# ---- a peer that joins too late --------------------------------------------------------------
t0=$(now)
NP=2 run 1 late.txt PPRT_EMU_NCCL_DELAY=1:init:0:8000 -- d2.plan "$S/data" -o late "${A[@]}" --mpi-timeout 2
took=$(secs $t0)
below "$took" 12 || fail "a peer 8 s late with --mpi-timeout 2: the ranks took $took s"
grep -q "^pprt: rank 0 (stage 0): error: .*ncclCommInitRankConfig did not complete within 2 s (--mpi-timeout): rank 1 (stage 1) has not joined" late.txt \
  || { cat late.txt; fail "a peer 8 s late: rank 0 does not name the init timeout"; }
grep -q "^pprt: rank 1 (stage 1): stopped: rank 0 (stage 0) failed: .*ncclCommInitRankConfig" late.txt \
  || { cat late.txt; fail "a peer 8 s late: rank 1 does not say why it stopped"; }
echo "ok: a peer 8 s late with --mpi-timeout 2: both ranks exit 1 after $took s, naming ncclCommInitRankConfig"

# ---- a dead peer at each phase -------------------------------------------------------------
# --enable-recovery: Open MPI leaves the survivors running; pprt's heartbeats and bounded waits end them
T=3 bound=12
for die in 1:init:0 1:warm:0 1:recv:0 1:recv:5 0:send:2 2:init:0; do
  dead=${die%%:*} tag=$(echo "$die" | tr : _)
  rm -rf "dead_$tag" && mkdir "dead_$tag"
  t0=$(now)
  env PPRT_EMU_NCCL_DIE=$die timeout -k 5 60 "${M[@]}" --enable-recovery -x PPRT_EMU_NCCL_DIE -np 3 sh -c \
    '"$0" "$@"; echo $? > '"dead_$tag"'/rc.$OMPI_COMM_WORLD_RANK' \
    "$PPRT" d3.plan "$S/data" -o "dead_$tag/out" "${A[@]}" --mpi-timeout $T > "dead_$tag.txt" 2>&1 || true
  took=$(secs $t0)
  below "$took" $bound || { cat "dead_$tag.txt"; fail "rank $dead dead at $die: the job took $took s (bound $bound)"; }
  grep -q "^pprt: rank $dead: PPRT_EMU_NCCL_DIE=$die: this rank dies now" "dead_$tag.txt" \
    || { cat "dead_$tag.txt"; fail "$die: rank $dead did not die there"; }
  for r in 0 1 2; do
    [ $r = "$dead" ] && continue
    [ -f "dead_$tag/rc.$r" ] || { cat "dead_$tag.txt"; fail "$die: rank $r recorded no exit status"; }
    [ "$(cat "dead_$tag/rc.$r")" != 0 ] || { cat "dead_$tag.txt"; fail "$die: rank $r exited 0"; }
    grep -q "^pprt: rank $r (stage $r): .*rank $dead (stage $dead)" "dead_$tag.txt" \
      || { cat "dead_$tag.txt"; fail "$die: rank $r does not name rank $dead"; }
  done
  [ ! -e "dead_$tag/out" ] || fail "$die: a failed run wrote outputs"
  echo "ok: rank $dead dead at $die: the ranks exit $(cat dead_$tag/rc.* | tr '\n' ' ')after $took s, naming it: $(grep -m1 -o "rank $dead (stage $dead) [a-z ]*" "dead_$tag.txt" | grep -v dies | head -1)"
done
echo "mpi_nccl_orders: all passed"
