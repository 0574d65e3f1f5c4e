#!/usr/bin/env bash
# The GPU day: run this first whenever a GPU is lent, fix what it finds, and
# record the date, the GPU and the results in docs/cuda.md.
# Here: tests/cuda/build_carry.sh (builds .gpu/bin). There (in the repo root,
# with .gpu carried): bash tests/cuda/run_on_gpu.sh [OUT_DIR]
#   1. own kernels under compute-sanitizer (memcheck, racecheck, synccheck,
#      initcheck): digits and the CI zoo at -pp 2 on --backend cuda;
#   2. digits, the ONNX node tests and the CI zoo on cuda against ref at -pp 1,
#      2, 3 (rtol 1e-3, atol 1e-4): pass counts and the largest error;
#   3. bit identity across splits (-pp 1 vs 2 vs 3 on one GPU), and graphs on
#      against off;
#   4. throughput at -b 1, 8, 32 for -pp 1 and -pp 2 against PyTorch eager on
#      the same GPU (bench/cuda_vs_torch.py), a Markdown table for
#      bench/RESULTS.md;
#   5. device links (issue 26): CPU and GPU stages in one pipeline on
#      threads (pinned staging both ways) against ref; three stages on one
#      GPU (device queues) against -pp 1; and, where this machine has
#      mpirun and build_carry.sh made .gpu/bin/mpi/pprt (PP_CARRY_MPI=1):
#      2 ranks on the one GPU with --transport mpi, bit-identical to threads,
#      a CPU rank and a GPU rank, and --transport nccl on the one GPU, which
#      NCCL refuses: the refusal must be a message naming
#      ncclCommInitRankConfig on both ranks within --mpi-timeout, not a hang.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-/tmp/gpu_day}}
mkdir -p "$out"
. "$src/tests/cuda/gpu_env.sh"
export PY=python3 SRC=$src
log=$out/gpu_day.log
exec > >(tee "$log") 2>&1
date -u; nvidia-smi -L; "$PPRT" --backend cuda --version # (loads the CUDA module: the libraries' versions)
work=$out/work; mkdir -p "$work"; cd "$work"
S=$src/samples/digits
status=0
note() { echo "== $*"; }
bad() { echo "FAIL: $*"; status=1; }
CMP="python3 $src/tests/tools/compare_npy.py"

note "digits: cuda vs ref at -pp 1, 2, 3; bits across splits; graphs on vs off"
"$PPCC" "$S/model.onnx" -pp 1 -b 16 -o d1.plan -q
"$PPRT" d1.plan "$S/data" -o ref_d --backend ref -q
for pp in 1 2 3; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  "$PPRT" d$pp.plan "$S/data" -o cu_d$pp --backend cuda --labels "$S/labels.npy" --stats-json d$pp.json || bad "digits -pp $pp"
  $CMP cu_d$pp/logits.npy ref_d/logits.npy --rtol 1e-3 --atol 1e-4 || bad "digits -pp $pp vs ref"
  cmp cu_d1/logits.npy cu_d$pp/logits.npy || bad "digits -pp $pp: other bits than -pp 1"
  "$PPRT" d$pp.plan "$S/data" -o cu_d${pp}_nog --backend cuda --cuda-graphs off -q || bad "graphs off"
  cmp cu_d$pp/logits.npy cu_d${pp}_nog/logits.npy || bad "digits -pp $pp: graphs on and off differ"
done

note "compute-sanitizer on the own kernels (digits -pp 2, sync after each step)"
for tool in memcheck racecheck synccheck initcheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" d2.plan "$S/data" -o san_$tool --backend cuda --cuda-graphs off -q \
    > san_$tool.txt 2>&1 || { bad "compute-sanitizer $tool"; tail -20 san_$tool.txt; }
  $CMP san_$tool/logits.npy ref_d/logits.npy --rtol 1e-3 --atol 1e-4 >/dev/null || bad "$tool run: wrong logits"
done

note "CI zoo: cuda vs ref at -pp 1, 2, 3"
for m in resnet50 vit_b_16 densenet121 unet gpt; do
  python3 "$src/tests/models/zoo.py" export $m zoo/$m --batch 2 >/dev/null || { bad "export $m"; continue; }
  "$PPCC" zoo/$m/model.onnx -pp 1 -o $m.1.plan -q
  "$PPRT" $m.1.plan zoo/$m/data -o ref_$m --backend ref -q
  for pp in 1 2 3; do
    "$PPCC" zoo/$m/model.onnx -pp $pp -o $m.$pp.plan -q
    "$PPRT" $m.$pp.plan zoo/$m/data -o cu_${m}_$pp --backend cuda -q --stats-json $m.$pp.json || { bad "$m -pp $pp"; continue; }
    for f in ref_$m/*.npy; do $CMP cu_${m}_$pp/$(basename $f) $f --rtol 1e-3 --atol 1e-4 || bad "$m -pp $pp vs ref"; done
    for f in cu_${m}_1/*.npy; do cmp $f cu_${m}_$pp/$(basename $f) || bad "$m -pp $pp: other bits than -pp 1"; done
  done
  compute-sanitizer --tool memcheck --error-exitcode 9 "$PPRT" $m.2.plan zoo/$m/data -o san_$m --backend cuda --cuda-graphs off -q \
    > san_$m.txt 2>&1 || { bad "memcheck $m"; tail -20 san_$m.txt; }
done

note "ONNX node tests on cuda"
PPRT_EXTRA_ARGS="--backend cuda" python3 "$src/tests/conformance/run.py" || bad "conformance on cuda"

note "device links: CPU and GPU stages on threads; three stages on one GPU"
"$PPRT" d3.plan "$S/data" -o cu_d3_one --backend cuda --devices 0 -q || bad "digits -pp 3 on GPU 0"
cmp cu_d1/logits.npy cu_d3_one/logits.npy || bad "digits -pp 3 on one GPU (device queues): other bits than -pp 1"
for pl in 0:cpu,1:cuda 0:cuda,1:cpu,2:cuda 0:cpu,1:cuda,2:cpu; do
  n=$(echo $pl | tr ',' '\n' | wc -l)
  "$PPCC" "$S/model.onnx" -pp $n -b 16 --placement $pl -o het.plan -q
  "$PPRT" het.plan "$S/data" -o het_${pl//[:,]/_} -q --stats-json het.json || { bad "placement $pl"; continue; }
  $CMP het_${pl//[:,]/_}/logits.npy ref_d/logits.npy --rtol 1e-3 --atol 1e-4 || bad "placement $pl vs ref"
done

MPIPPRT=$bin/mpi/pprt
if ! command -v mpirun >/dev/null 2>&1; then
  note "skip: no mpirun on this machine: the MPI device transports were not run on a GPU"
elif [ ! -x "$MPIPPRT" ] || ldd "$MPIPPRT" | grep -q "not found"; then
  note "skip: no loadable .gpu/bin/mpi/pprt (build_carry.sh with PP_CARRY_MPI=1, and this machine's MPI): MPI not run"
else
  note "MPI on one GPU: 2 ranks over --transport mpi; a CPU rank and a GPU rank; NCCL's refusal"
  MR=(mpirun --oversubscribe --allow-run-as-root)
  "${MR[@]}" -np 2 "$MPIPPRT" d2.plan "$S/data" -o mpi_d2 --backend cuda --transport mpi -q || bad "2 ranks, --transport mpi"
  cmp cu_d2/logits.npy mpi_d2/logits.npy || bad "2 ranks on one GPU over MPI: other bits than threads"
  "$PPCC" "$S/model.onnx" -pp 2 -b 16 --placement 0:cpu,1:cuda -o het2.plan -q
  "$PPRT" het2.plan "$S/data" -o het2_thr -q
  "${MR[@]}" -np 2 "$MPIPPRT" het2.plan "$S/data" -o het2_mpi -q || bad "CPU rank + GPU rank"
  cmp het2_thr/logits.npy het2_mpi/logits.npy || bad "CPU rank + GPU rank: other bits than threads"
  t0=$(date +%s)
  timeout 300 "${MR[@]}" -np 2 "$MPIPPRT" d2.plan "$S/data" -o nccl_one --backend cuda --transport nccl -q \
    --mpi-timeout 60 > nccl_one.txt 2>&1; rc=$?
  cat nccl_one.txt
  echo "NCCL with 2 ranks on one GPU: exit $rc after $(( $(date +%s) - t0 )) s"
  [ $rc != 0 ] && [ $rc != 124 ] || bad "NCCL on one GPU: exit $rc (0: NCCL took two ranks on one GPU after all; 124: a hang)"
  grep -q "ncclCommInitRankConfig" nccl_one.txt || bad "NCCL on one GPU: no message names ncclCommInitRankConfig"
fi

note "throughput against PyTorch eager (same GPU)"
python3 "$src/bench/cuda_vs_torch.py" --pprt "$PPRT" --ppcc "$PPCC" --work bench_work --out "$out/throughput.md" \
  || bad "throughput"
cat "$out/throughput.md" 2>/dev/null
echo "gpu day: $([ $status = 0 ] && echo all passed || echo FAILURES above)"
exit $status
