#!/usr/bin/env bash
# Device stages on MPI ranks without a GPU (ctest mpi_cuda, labels mpi and
# cuda; about 60 s): cuda-emu keeps its messages in its emulated device
# memory, so every boundary runs a device transport:
#   - --transport mpi (pinned staging on both sides) and --transport nccl
#     (the NCCL link over the emulated NCCL, comm/p2p_emu.c) at -np 2 and
#     -np 4, and 2 replicas x 2 stages on 4 ranks: outputs bit-identical to
#     the threaded run of the same plan;
#   - heterogeneous placements (a CPU stage between device stages) on 3
#     ranks, both transports: bit-identical to threads, within tolerance of
#     ref;
#   - failures: an emulated NCCL error in a receive, a send and the
#     communicator's set-up (PPRT_EMU_NCCL_FAIL): every rank exits 1 within
#     seconds, the message names the rank and the NCCL call; a rank killed
#     mid-run while the others wait in the NCCL link (kill.sh, recovery
#     mode: pprt's heartbeats end them within --mpi-timeout);
#   - --backend cuda --transport nccl with no GPU (a build with CUDA): the
#     NCCL id is made and handed on, then both ranks exit 2 within seconds,
#     naming the CUDA call and the same id; skipped, saying so, in a build
#     without CUDA or where a GPU answers;
#   - ranks given different --transport refuse at set-up (exit 2), and
#     --transport outside mpirun is bad usage (exit 2).
# usage: cuda.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC, PP_MPI, PP_CUDA, MPIRUN)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
if [ "${PP_MPI:-OFF}" != ON ] || [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" > /dev/null; then
  echo "mpi_cuda: this build has no MPI (or no mpirun): skipping"
  exit 77
fi
. "$SRC/tests/mpi/common.sh"
mpi_env
fail() { echo "FAIL: $*"; exit 1; }
same() { cmp "$1" "$2" || fail "$3: $1 and $2 differ"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- cuda-emu on 2 and 4 ranks, both transports, and replicas ----------------------------
for pp in 2 4; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  "$PPRT" d$pp.plan "$S/data" -o thr$pp --backend cuda-emu -q
  for tr in mpi nccl; do
    expect_rc 0 run$pp$tr.txt "${M[@]}" -np $pp "$PPRT" d$pp.plan "$S/data" -o mpi$pp$tr --backend cuda-emu --transport $tr -q
    same thr$pp/logits.npy mpi$pp$tr/logits.npy "cuda-emu -pp $pp on $pp ranks over $tr"
  done
done
for tr in mpi nccl; do
  expect_rc 0 rep$tr.txt "${M[@]}" -np 4 "$PPRT" d2.plan "$S/data" -o rep$tr --backend cuda-emu --transport $tr \
    --replicas 2 --labels "$S/labels.npy"
  same thr2/logits.npy rep$tr/logits.npy "cuda-emu, 2 replicas x 2 ranks over $tr"
  grep -q "^accuracy: $(cat "$S/accuracy.txt") " rep$tr.txt || fail "replicas over $tr: accuracy"
done
echo "ok: cuda-emu on 2 and 4 ranks and 2 replicas x 2 ranks, --transport mpi and nccl: bit-identical to threads"

# ---- heterogeneous: a CPU stage between device stages ------------------------------------
"$PPRT" d2.plan "$S/data" -o ref2 --backend ref -q
for pl in "0:cuda-emu,1:cpu,2:cuda-emu" "0:cpu,1:cuda-emu,2:cuda-emu"; do
  "$PPCC" "$S/model.onnx" -pp 3 -b 16 --placement "$pl" -o h.plan -q
  "$PPRT" h.plan "$S/data" -o hthr -q
  for tr in mpi nccl; do
    expect_rc 0 h$tr.txt "${M[@]}" -np 3 "$PPRT" h.plan "$S/data" -o h$tr --transport $tr -q
    same hthr/logits.npy h$tr/logits.npy "placement $pl on 3 ranks over $tr"
  done
  "$PY" "$SRC/tests/tools/compare_npy.py" hnccl/logits.npy ref2/logits.npy --rtol 1e-3 --atol 1e-4 > /dev/null \
    || fail "placement $pl: not within tolerance of ref"
done
echo "ok: CPU and emulated device stages mixed on 3 ranks, both transports: bit-identical to threads, ref's values"

# ---- failures ----------------------------------------------------------------------------------
for f in 1:recv:3 0:send:4 1:init:0; do
  rank=${f%%:*} op=$(echo $f | cut -d: -f2)
  call=$( [ $op = recv ] && echo ncclRecv || { [ $op = send ] && echo ncclSend || echo ncclCommInitRankConfig; } )
  t0=$(now)
  expect_rc 1 fail_$op.txt env PPRT_EMU_NCCL_FAIL=$f "${M[@]}" -x PPRT_EMU_NCCL_FAIL -np 2 "$PPRT" d2.plan "$S/data" \
    -o fail_$op --backend cuda-emu --transport nccl -q --mpi-timeout 20
  took=$(secs $t0)
  awk -v t=$took 'BEGIN { exit !(t < 15) }' || fail "$f: the ranks took $took s to end"
  grep -q "^pprt: rank $rank (stage $rank): error: .*$call" fail_$op.txt || { cat fail_$op.txt; fail "$f: rank $rank does not name $call"; }
  other=$((1 - rank))
  grep -q "^pprt: rank $other (stage $other): stopped: rank $rank (stage $rank) failed: .*$call" fail_$op.txt \
    || { cat fail_$op.txt; fail "$f: rank $other does not say why it stopped"; }
  [ ! -e fail_$op ] || fail "$f: a failed run wrote outputs"
  echo "ok: an emulated $call failure on rank $rank: both ranks exit 1 after $took s, naming it"
done
# ranks given different --transport: refused in the handshake (exit 2), never a hang
for pair in "nccl mpi" "mpi nccl"; do
  set -- $pair
  expect_rc 2 mismatch.txt "${M[@]}" -np 1 "$PPRT" d2.plan "$S/data" -o mm --backend cuda-emu --transport $1 -q : \
    -np 1 "$PPRT" d2.plan "$S/data" -o mm --backend cuda-emu --transport $2 -q
  grep -q "^pprt: rank 0 (stage 0): error: rank 1 (stage 1) runs with --transport $2, rank 0 with --transport $1: every rank must get the same options" mismatch.txt \
    || { cat mismatch.txt; fail "--transport $1 on rank 0, $2 on rank 1: no clear refusal"; }
done
echo "ok: ranks with different --transport are refused at set-up"
mkdir -p big
"$PY" -c "import numpy as np, sys; np.save('big/input.npy', np.tile(np.load(sys.argv[1]), (60, 1, 1, 1)))" "$S/data/input.npy"
"$PPCC" "$S/model.onnx" -pp 3 -b 16 -o d3.plan -q
export PPRT MPIRUN
KILL_ARGS="--backend cuda-emu --transport nccl" bash "$SRC/tests/mpi/kill.sh" "$out/d3.plan" "$out/big" "$out/kill" recovery

# ---- real NCCL without a GPU ------------------------------------------------------------------------
if [ "${PP_CUDA:-OFF}" != ON ]; then
  echo "skip: this build has no CUDA: --backend cuda --transport nccl is not checked"
elif nvidia-smi -L > /dev/null 2>&1; then
  echo "skip: a GPU answers here: the no-GPU NCCL contract is not checked (tests/cuda/run_on_gpu.sh is)"
else
  t0=$(now)
  expect_rc 2 nccl.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o nccl --backend cuda --transport nccl -q
  took=$(secs $t0)
  awk -v t=$took 'BEGIN { exit !(t < 15) }' || fail "no GPU, NCCL: the ranks took $took s to end"
  for r in 0 1; do
    grep -Eq "^pprt: rank $r \(stage $r\): (error|stopped: rank [01] \(stage [01]\) failed): stage [01] on cuda; (to|from) rank [01] \(stage [01]\) over NCCL, id [0-9a-f]{8}: cudaGetDeviceCount" nccl.txt \
      || { cat nccl.txt; fail "rank $r: no line naming the NCCL boundary, its id and the CUDA call"; }
  done
  ids=$(grep -o 'over NCCL, id [0-9a-f]*' nccl.txt | sort -u | wc -l)
  [ "$ids" = 1 ] || { cat nccl.txt; fail "the ranks name $ids different NCCL ids"; }
  [ ! -e nccl ] || fail "a failed run wrote outputs"
  echo "ok: --backend cuda --transport nccl without a GPU: the id handed on, both ranks exit 2 after $took s: $(grep -o 'cudaGetDeviceCount.*' nccl.txt | head -1)"
fi
expect_rc 2 usage.txt "$PPRT" d2.plan "$S/data" -o x --transport nccl
grep -q "applies only under mpirun" usage.txt || fail "--transport outside mpirun: $(cat usage.txt)"
expect_rc 2 usage2.txt env OMPI_COMM_WORLD_SIZE=1 "$PPRT" d2.plan "$S/data" -o x --transport gloo
grep -q "transport needs nccl or mpi" usage2.txt || fail "--transport gloo: $(cat usage2.txt)"
echo "mpi_cuda: all passed"
