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
#      bench/RESULTS.md.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-/tmp/gpu_day}}
mkdir -p "$out"
bin=$src/.gpu/bin
export PPCC=$bin/ppcc PPRT=$bin/pprt PY=python3 SRC=$src
# the CUDA libraries of the machine's Python packages (nvidia-*-cu13)
libs=$(python3 -c "
import glob, os, site
d = [p for s in site.getsitepackages() for p in glob.glob(os.path.join(s, 'nvidia', '**', 'lib'), recursive=True)]
print(':'.join(sorted(set(d))))")
export LD_LIBRARY_PATH=$bin:$libs:${LD_LIBRARY_PATH:-}
log=$out/gpu_day.log
exec > >(tee "$log") 2>&1
date -u; nvidia-smi -L; "$PPRT" --version
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

note "throughput against PyTorch eager (same GPU)"
python3 "$src/bench/cuda_vs_torch.py" --pprt "$PPRT" --ppcc "$PPCC" --zoo zoo --out "$out/throughput.md" \
  || bad "throughput"
cat "$out/throughput.md" 2>/dev/null
echo "gpu day: $([ $status = 0 ] && echo all passed || echo FAILURES above)"
exit $status
