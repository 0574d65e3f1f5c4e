#!/usr/bin/env bash
# The shortest useful GPU check (about 10 s on an H200, then node-test
# subsets until SECS seconds have passed): for a lease with only a few
# minutes left. Carried zoo against onnxruntime at -pp 1 and 2 and bit
# identity across the split; --profile's GPU node times; compute-sanitizer
# synccheck and initcheck on digits -pp 2; tests/cuda/einsum.py on cuda
# (scatter.py too when SECS > 240); then ONNX node tests on cuda in
# --filter subsets.
# Here: PP_CARRY_ZOO=1 tests/cuda/build_carry.sh. There (carry .gpu):
#   SECS=120 bash tests/cuda/gpu_mini.sh [FILTER...]
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/cuda/gpu_env.sh"
CMP="python3 $src/tests/tools/compare_npy.py"; S=$src/samples/digits
end=$((SECONDS + ${SECS:-120}))
w=/tmp/gmini; rm -rf $w; mkdir -p $w; cd $w; date -u; nvidia-smi -L
status=0
for m in unet mobilenet_v3_small gpt; do
  for pp in 1 2; do
    timeout 40 "$PPRT" $Z/$m/auto_$pp.plan $Z/$m/data -o cu_${m}_$pp --backend cuda -q || { echo "FAIL: $m -pp $pp"; status=1; }
    for f in $Z/$m/expected/*.npy; do
      $CMP cu_${m}_$pp/$(basename $f) $f --rtol 1e-3 --atol 1e-4 || { echo "FAIL: $m -pp $pp vs onnxruntime"; status=1; }
    done
  done
  for f in cu_${m}_1/*.npy; do cmp $f cu_${m}_2/$(basename $f) || { echo "FAIL: $m: -pp 2 other bits"; status=1; }; done
done
# --profile: per-node GPU times from events between steps (never run on a GPU before)
timeout 40 "$PPRT" $Z/gpt/auto_2.plan $Z/gpt/data -o prof --backend cuda -q --profile gpt.prof \
  && python3 -c "import json; t = json.load(open('gpt.prof'))['nodes']; print('profile:', sum(v > 0 for v in t.values()), 'of', len(t), 'nodes timed')" \
  || { echo "FAIL: --profile on cuda"; status=1; }
"$PPCC" $S/model.onnx -pp 2 -b 16 -o d2.plan -q
# ppcc --measure with a GPU profile (never run on a GPU before)
PPCC_PPRT="$PPRT" timeout 60 "$PPCC" $S/model.onnx -pp 2 -b 16 --measure --measure-args "--backend cuda" --report \
    -o dm.plan > measure.txt 2>&1 \
  && grep -q "op times: 8 of 8 ops measured" measure.txt \
  && timeout 40 "$PPRT" dm.plan $S/data -o cu_dm --backend cuda -q \
  && $CMP cu_dm/logits.npy $S/expected/logits.npy --rtol 1e-3 --atol 1e-4 \
  || { echo "FAIL: ppcc --measure on cuda"; cat measure.txt; status=1; }
# cuDNN's fused graphs (--cuda-conv-fusion on; off, each convolution alone plus the epilogue
# kernel, is the default): the same answers on digits
timeout 40 "$PPRT" d2.plan $S/data -o cu_d2_fused --backend cuda -q --cuda-conv-fusion on \
  && $CMP cu_d2_fused/logits.npy $S/expected/logits.npy --rtol 1e-3 --atol 1e-4 \
  || { echo "FAIL: --cuda-conv-fusion on"; status=1; }
# NaN and inf through convolutions (the default must keep them as the reference kernels do;
# the fused graphs are reported: some of cuDNN's dropped NaN on an H200, 2026-11-27)
timeout 60 python3 $src/tests/cuda/nan_conv.py $w/nan_conv > nan_conv.txt 2>&1 || { echo "FAIL: nan_conv.py"; status=1; }
cat nan_conv.txt
for tool in synccheck initcheck; do
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" d2.plan $S/data -o san_$tool --backend cuda \
    --cuda-graphs off -q > san_$tool.txt 2>&1 || { echo "FAIL: compute-sanitizer $tool"; status=1; }
  tail -1 san_$tool.txt
done
# Einsum's cuBLASLt layouts (transposed operands and outputs, batches, outer and inner products) on the GPU
PP_BACKEND=cuda timeout 90 python3 $src/tests/cuda/einsum.py einsum > einsum.txt 2>&1 || { echo "FAIL: einsum.py"; status=1; }
tail -1 einsum.txt; grep FAIL einsum.txt
# the scatter and trilu kernels (about 100 s): with a longer lease
if [ "${SECS:-120}" -gt 240 ]; then
  PP_BACKEND=cuda timeout 200 python3 $src/tests/cuda/scatter.py scatter > scatter.txt 2>&1 || { echo "FAIL: scatter.py"; status=1; }
  tail -1 scatter.txt; grep FAIL scatter.txt
fi
mkdir -p node && tar xzf $src/.gpu/node.tgz -C node
# first the kernels that have never run on a GPU (added after the 2026-11-26 leases), then the rest
filters=("$@"); [ ${#filters[@]} -gt 0 ] || filters=(test_attention test_rotary test_resize_ test_einsum test_scatter \
  test_tril test_triu _pad test_sin test_cos test_tan test_sign test_shrink test_isnan test_isinf test_bitwise \
  test_bitshift test_top_k test_mul test_add test_sub test_div test_pow test_sqrt test_exp test_log test_gelu test_elu)
for f in "${filters[@]}"; do
  [ $SECONDS -lt $end ] || { echo "out of time before $f"; break; }
  r=$(PPRT_EXTRA_ARGS="--backend cuda" timeout $((end - SECONDS)) python3 $src/tests/conformance/run.py -j 16 \
      --node-dir node/node --filter "$f" --timeout 20 2>&1 | grep -E "listed-op tests:|regression" | tr '\n' ' ')
  echo "$f: ${r:-(no test, or out of time)}"
  case "$r" in *"no regression"*|"") ;; *) status=1 ;; esac
done
date -u; echo "gpu mini: $([ $status = 0 ] && echo all passed || echo FAILURES above)"; exit $status
