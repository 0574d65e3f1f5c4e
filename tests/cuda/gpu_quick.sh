#!/usr/bin/env bash
# A time-boxed GPU check for a lease of a few minutes (the device tool gives
# a session 15 minutes in all): what tests/cuda/run_on_gpu.sh does, in order
# of value, each part under its own timeout, with models carried from here
# (torch 1.13 exports, their onnxruntime outputs) in .gpu/zoo so nothing
# depends on the GPU machine's exporter.
# Here: PP_CARRY_ZOO=1 tests/cuda/build_carry.sh (after ctest -R model_zoo).
# There (device tool, carry .gpu): bash tests/cuda/gpu_quick.sh
# The first lease (2026-11-26, H200) took about 4 minutes for all but the
# node tests; run the node tests in --filter subsets, or with a longer
# timeout, once one test's time is known (1309 at 32 in parallel did not
# end within 270 s).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/gpu_quick}; mkdir -p "$out"
. "$src/tests/cuda/gpu_env.sh"
exec > >(tee "$out/gpu.log") 2>&1
date -u; nvidia-smi -L; "$PPRT" --backend cuda --version; ldd "$PPRT" "$(dirname "$PPRT")/pprt_cuda.so" | grep -E "cud|nccl|cublas|not found"
w=/tmp/gq; rm -rf $w; mkdir -p $w; cd $w
status=0
note() { echo "== $* ($(date +%T))"; }
bad() { echo "FAIL: $*"; status=1; }
CMP="python3 $src/tests/tools/compare_npy.py"
S=$src/samples/digits

note "digits: cuda vs ref at -pp 1, 2, 3; bits across splits; graphs on vs off"
"$PPCC" "$S/model.onnx" -pp 1 -b 16 -o d1.plan -q
"$PPRT" d1.plan "$S/data" -o ref_d --backend ref -q
for pp in 1 2 3; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  timeout 60 "$PPRT" d$pp.plan "$S/data" -o cu_d$pp --backend cuda --labels "$S/labels.npy" --stats-json d$pp.json || bad "digits -pp $pp"
  $CMP cu_d$pp/logits.npy ref_d/logits.npy --rtol 1e-3 --atol 1e-4 || bad "digits -pp $pp vs ref"
  cmp cu_d1/logits.npy cu_d$pp/logits.npy || bad "digits -pp $pp: other bits than -pp 1"
  timeout 60 "$PPRT" d$pp.plan "$S/data" -o cu_d${pp}_nog --backend cuda --cuda-graphs off -q || bad "graphs off"
  cmp cu_d$pp/logits.npy cu_d${pp}_nog/logits.npy || bad "digits -pp $pp: graphs on and off differ"
done
cat d2.json

note "device links: three stages on one GPU; CPU and GPU stages on threads"
timeout 60 "$PPRT" d3.plan "$S/data" -o cu_d3_one --backend cuda --devices 0 -q || bad "digits -pp 3 on GPU 0"
cmp cu_d1/logits.npy cu_d3_one/logits.npy || bad "three stages on one GPU: other bits than -pp 1"
for pl in 0:cpu,1:cuda 0:cuda,1:cpu,2:cuda 0:cpu,1:cuda,2:cpu; do
  n=$(echo $pl | tr ',' '\n' | wc -l); tag=${pl//[:,]/_}
  "$PPCC" "$S/model.onnx" -pp $n -b 16 --placement $pl -o het_$tag.plan -q
  timeout 60 "$PPRT" het_$tag.plan "$S/data" -o het_$tag -q || { bad "placement $pl"; continue; }
  $CMP het_$tag/logits.npy ref_d/logits.npy --rtol 1e-3 --atol 1e-4 || bad "placement $pl vs ref"
done

note "carried zoo (torch 1.13 exports): cuda vs onnxruntime, -pp 1 vs -pp 2 bits"
for m in unet gpt mobilenet_v3_small llama; do
  if [ -f $Z/$m/model.onnx ]; then
    args=$(python3 -c "import json;print(' '.join(json.load(open('$Z/$m/meta.json'))['compile_args']))")
    for pp in 1 2; do "$PPCC" $Z/$m/model.onnx -pp $pp $args -o $m.$pp.plan -q || bad "ppcc $m"; done
    p1=$m.1.plan; p2=$m.2.plan
  else p1=$Z/$m/auto_1.plan; p2=$Z/$m/auto_2.plan; fi
  for pp in 1 2; do
    eval p=\$p$pp
    timeout 120 "$PPRT" $p $Z/$m/data -o cu_${m}_$pp --backend cuda -q --stats-json $m.$pp.json || { bad "$m -pp $pp"; continue; }
    for f in $Z/$m/expected/*.npy; do $CMP cu_${m}_$pp/$(basename $f) $f --rtol 1e-3 --atol 1e-4 || bad "$m -pp $pp vs onnxruntime"; done
  done
  for f in cu_${m}_1/*.npy; do cmp $f cu_${m}_2/$(basename $f) || bad "$m -pp 2: other bits than -pp 1"; done
  python3 -c "import json;d=json.load(open('$m.2.json'));print('$m -pp 2: host (reference) kernels', [s['reference_nodes'] for s in d['stages']], 'of nodes', [s['nodes'] for s in d['stages']])" 
done

note "library fallback: convolutions and products on the host, the rest on the GPU"
for m in mobilenet_v3_small unet; do
  timeout 60 "$PPRT" $Z/$m/auto_2.plan $Z/$m/data -o hostops_$m --backend cuda --cuda-host-ops Conv,pp.FusedConv,ConvTranspose,MatMul,Gemm -q || bad "$m --cuda-host-ops"
  $CMP hostops_$m/output.npy $Z/$m/expected/output.npy --rtol 1e-3 --atol 1e-4 || bad "$m --cuda-host-ops vs onnxruntime"
done

note "ONNX node tests on cuda (this machine's onnx package)"
# the node tests of this project's onnx (1.22) travel as .gpu/node.tgz: newer onnx wheels ship none
nd=(); if [ -f $src/.gpu/node.tgz ]; then mkdir -p node_tests && tar xzf $src/.gpu/node.tgz -C node_tests && nd=(--node-dir node_tests/node); fi
PPRT_EXTRA_ARGS="--backend cuda" timeout 200 python3 $src/tests/conformance/run.py -j 16 "${nd[@]}" --json $out/conf_cuda.json --timeout 30 | tail -6

note "compute-sanitizer memcheck and racecheck: digits -pp 2"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" d2.plan "$S/data" -o san_$tool --backend cuda --cuda-graphs off -q \
    > san_$tool.txt 2>&1 || { bad "compute-sanitizer $tool"; tail -20 san_$tool.txt; }
  tail -2 san_$tool.txt
done

note "throughput: carried zoo, 256 samples (inputs tiled), cuda -pp 1 and 2, and ref -pp 1 on 1 thread for scale"
for m in unet gpt mobilenet_v3_small; do
  mkdir -p big_$m
  python3 -c "
import numpy as np, os
for f in os.listdir('$Z/$m/data'):
    a = np.load('$Z/$m/data/' + f); np.save('big_$m/' + f, np.concatenate([a] * (256 // a.shape[0])))"
  for pp in 1 2; do
    timeout 60 "$PPRT" $Z/$m/auto_$pp.plan big_$m -o /tmp/tp --backend cuda --warmup 8 --stats-json tp_$m.$pp.json -q || bad "$m 256 samples -pp $pp"
    python3 -c "import json;d=json.load(open('tp_$m.$pp.json'));print('$m -pp $pp cuda: %.1f samples/s steady, latency %.2f ms' % (d['steady_samples_per_s'], d['latency_ms']['mean']))" 2>/dev/null
  done
done
tar czf $out/work.tgz *.json san_*.txt 2>/dev/null
echo "gpu quick: $([ $status = 0 ] && echo all passed || echo FAILURES above)"
exit $status
