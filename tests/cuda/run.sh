#!/usr/bin/env bash
# The CUDA backend without a GPU (ctest label cuda; docs/cuda.md):
#   1. the no-device contract: pprt links none of the CUDA libraries (they
#      are the module pprt_cuda.so's), pprt --version loads no module and
#      says so, a run on ref maps none of them; pprt --backend cuda --version
#      loads it and names the CUDA runtime, cuDNN, cuBLASLt and NCCL versions;
#      --backend cuda exits 2 with the driver's own message (skipped where a
#      GPU answers); a module not found, one whose library is missing and
#      one without the entry point exit 2 naming the module and the loader's
#      words, by --backend and by a stage's placement;
#   2. the nvcc flags: a kernel that needs local memory fails to build with
#      the flags this build gives runtime/cuda/kernels.cu (so the kernels that
#      did build have no spills and no local memory);
#   3. test_dnn: the cuDNN graph of every convolution of the CI zoo models
#      (at -pp 2), of their training plans' backward data and backward
#      filter convolutions, and of a sweep finalizes, a wrong dim is refused;
#   4. cuda-emu against ref: digits at -pp 1, 2, 3 (bit-identical across
#      splits, the recorded accuracy), every node on the host fallback, the
#      CI zoo models at -pp 1, 2, 3 (rtol 1e-3, atol 1e-4), the rest of the
#      zoo model_zoo exported at -pp 2 against onnxruntime with no node on
#      the host fallback, and the ONNX node
#      tests listed as passing (tests/conformance/run.py with
#      PPRT_EXTRA_ARGS=--backend cuda-emu); TopK with NaN and ties; Einsum
#      equations on cuBLASLt or the host (tests/cuda/einsum.py); ScatterND
#      and ScatterElements on their own kernel (tests/cuda/scatter.py);
#      NaN and inf through convolutions (tests/cuda/nan_conv.py); the
#      widened strided copies against the copies as given (test_copies.c
#      on the zoo plans and on tests/cuda/copies_models.py's models).
# 1-3 need a CUDA build (PP_CUDA=ON), else they say so and are skipped; 4
# runs in every build (the emulator is plain C). About 4 minutes on 2 cores
# with the zoo exports cached in $ZOO (the model_zoo test's cache).
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}" "${TEST_COPIES:?}"
out=$1
mkdir -p "$out" && cd "$out"
ZOO=${ZOO:-$out/zoo}
CMP="$PY $SRC/tests/tools/compare_npy.py"
fail() { echo "FAIL: $*"; exit 1; }

if [ "${PP_CUDA:-OFF}" = ON ]; then
  libs='libcudart|libcublas|libcudnn|libnccl|libcuda\.'
  ! readelf -d "$PPRT" | grep NEEDED | grep -Eq "$libs" || fail "pprt links CUDA libraries: $(readelf -d "$PPRT" | grep NEEDED)"
  v=$("$PPRT" --version)
  echo "$v" | grep -q 'cuda: .*pprt_cuda.so (not loaded' || fail "pprt --version does not say the module is not loaded: $v"
  v=$("$PPRT" --backend cuda --version)
  echo "$v" | grep -Eq 'cuda: CUDA runtime [0-9]+\.[0-9]+, cuDNN [0-9]+\.[0-9]+\.[0-9]+, cuBLASLt [0-9.]+, NCCL [0-9.]+' \
    || fail "pprt --backend cuda --version does not name the CUDA libraries: $v"
  echo "ok: pprt links no CUDA library; --version loads no module, --backend cuda --version names them"
  "$PPCC" "$SRC/samples/digits/model.onnx" -pp 2 -o d2.plan -q
  "$PPCC" "$SRC/samples/digits/model.onnx" -pp 2 --placement 0:cpu,1:cuda -o d2g.plan -q
  # a run on the CPU maps none of them (the loader's own trace of what it opens)
  LD_DEBUG=libs "$PPRT" d2.plan "$SRC/samples/digits/data" --backend ref -q 2>ld.txt >/dev/null
  ! grep -Eq "$libs|pprt_cuda" ld.txt || fail "a run on ref loads: $(grep -E "$libs|pprt_cuda" ld.txt | head -3)"
  echo "ok: a run on ref maps no CUDA library"
  # the module cannot be loaded: exit 2, its path and the loader's words
  printf 'int pp_f(void) { return 0; }\n' > stub.c
  cc -shared -fPIC -o libpp_gone.so -Wl,-soname,libpp_gone.so.1 stub.c
  cc -shared -fPIC -o needs_gone.so stub.c -Wl,--no-as-needed -L. -lpp_gone
  rm libpp_gone.so
  cc -shared -fPIC -o libstub.so stub.c
  for m in "$out/none.so:module $out/none.so not found" \
           "$out/needs_gone.so:cannot load module $out/needs_gone.so: libpp_gone.so.1: cannot open shared object file" \
           "$out/libstub.so:module $out/libstub.so has no entry point pprt_cuda_module_entry"; do
    for how in "d2.plan --backend cuda" "d2g.plan"; do
      set +e; PPRT_CUDA_MODULE=${m%%:*} "$PPRT" $how "$SRC/samples/digits/data" -q 2>err.txt; rc=$?; set -e
      [ $rc = 2 ] || fail "$how with PPRT_CUDA_MODULE=${m%%:*}: exit $rc, want 2: $(cat err.txt)"
      grep -qF "${m#*:}" err.txt || fail "$how with PPRT_CUDA_MODULE=${m%%:*}: want '${m#*:}': $(cat err.txt)"
    done
    echo "ok: exit 2, $(cat err.txt)"
  done
  if nvidia-smi -L >/dev/null 2>&1; then
    echo "skip: a GPU answers here, so the no-device contract is not checked"
  else
    set +e; "$PPRT" d2.plan "$SRC/samples/digits/data" --backend cuda -q 2>err.txt; rc=$?; set -e
    [ $rc = 2 ] || fail "--backend cuda without a GPU: exit $rc, want 2: $(cat err.txt)"
    grep -q "CUDA driver version is insufficient\|no CUDA-capable device" err.txt || fail "no driver message: $(cat err.txt)"
    echo "ok: no device: exit 2, $(cat err.txt)"
  fi
  printf '__global__ void s(float *y, const float *x, int n) { float a[64]; for (int j = 0; j < 64; j++) a[j] = x[(threadIdx.x * 7 + j * 13) %% n];\n  float t = 0; for (int j = 0; j < 64; j++) t += a[(j * 5 + (int)x[j]) & 63]; y[threadIdx.x] = t; }\n' > spill.cu
  if "$NVCC" -c spill.cu -o spill.o -arch=sm_90 -Werror all-warnings -Xptxas=-warn-spills,-warn-lmem-usage,-Werror 2>/dev/null; then
    fail "nvcc built a kernel with local memory under the build's flags"
  fi
  echo "ok: nvcc refuses local memory and spills"
else
  echo "skip: this build has no CUDA (PP_WITH_CUDA): the version, no-device, nvcc and cuDNN checks"
fi

# the CI zoo models, exported once (shared with the model_zoo test's cache)
ZOO_MODELS="resnet50 vit_b_16 densenet121 unet gpt"
for m in $ZOO_MODELS; do
  [ -f "$ZOO/$m/expected/.done" ] || [ -d "$ZOO/$m/expected" ] || \
    "$PY" "$SRC/tests/models/zoo.py" export $m "$ZOO/$m" --batch 2 >/dev/null
  "$PPCC" "$ZOO/$m/model.onnx" -pp 2 -o $m.2.plan -q
done
if [ "${PP_CUDA:-OFF}" = ON ]; then
  # and their training plans (a 1-image micro-batch, MSE on the first output):
  # every pp.ConvGradX (backward data) and pp.ConvGradW (backward filter)
  for m in resnet50 densenet121 unet; do
    o=$("$PY" -c "import onnx, sys; print(onnx.load(sys.argv[1], load_external_data=False).graph.output[0].name)" "$ZOO/$m/model.onnx")
    "$PPCC" "$ZOO/$m/model.onnx" --train --loss "mse:$o" -b 1 -pp 2 -o $m.t2.plan -q
  done
  # a bf16 training plan: its products on the half route, the backward ones' graphs on BFLOAT16 tensors
  o=$("$PY" -c "import onnx, sys; print(onnx.load(sys.argv[1], load_external_data=False).graph.output[0].name)" "$ZOO/resnet50/model.onnx")
  "$PPCC" "$ZOO/resnet50/model.onnx" --train --loss "mse:$o" -b 1 -pp 2 --precision bf16 -o resnet50.tb2.plan -q
  # and, with each GPU description committed for this cuDNN (tests/cuda/devprop/, captured on a GPU day),
  # every graph's execution plan as the executors choose it, finalized for that GPU without it
  dp=(); for f in "$SRC"/tests/cuda/devprop/*.json; do [ -f "$f" ] && dp+=(--devprop "$f"); done
  # a half ViT-B/16 (ppcc --precision fp16): each of its 12 attention patterns, planned as the GPU day runs it
  # (--cuda-fused-attention, --cuda-stride-views), fits cuDNN's fused attention and its graph finalizes
  "$PPCC" "$ZOO/vit_b_16/model.onnx" -pp 2 --precision fp16 -o vit_b_16.h2.plan -q
  "$TEST_DNN" "${dp[@]}" *.2.plan *.t2.plan resnet50.tb2.plan vit_b_16.h2.plan > test_dnn.out || { cat test_dnn.out; fail "test_dnn"; }
  grep -q 'vit_b_16.h2.plan: 12 fused attention steps, 12 as cuDNN graphs, 0 on pprt' test_dnn.out || \
    { cat test_dnn.out; fail "test_dnn: ViT-B/16 fp16's attention steps are not all cuDNN graphs"; }
  tail -2 test_dnn.out
  echo "ok: test_dnn (every convolution graph, and ViT-B/16 fp16's 12 attention graphs)"
fi
for m in $ZOO_MODELS; do rm -f $m.2.plan $m.t2.plan $m.tb2.plan $m.h2.plan; done # (compiled again below, one plan at a time)

# cuda-emu against ref: digits
S=$SRC/samples/digits
want_acc=$(cat "$S/accuracy.txt")
"$PPRT" d2.plan "$S/data" -o ref_digits --backend ref -q 2>/dev/null || { "$PPCC" "$S/model.onnx" -pp 2 -o d2.plan -q; "$PPRT" d2.plan "$S/data" -o ref_digits --backend ref -q; }
for pp in 1 2 3; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  "$PPRT" d$pp.plan "$S/data" -o emu_digits_$pp --backend cuda-emu --labels "$S/labels.npy" > run.txt
  acc=$(awk '/^accuracy:/ {print $2}' run.txt)
  [ "$acc" = "$want_acc" ] || fail "digits -pp $pp on cuda-emu: accuracy $acc, PyTorch measured $want_acc"
  $CMP emu_digits_$pp/logits.npy ref_digits/logits.npy --rtol 1e-4 --atol 1e-5
  cmp emu_digits_1/logits.npy emu_digits_$pp/logits.npy || fail "cuda-emu: digits -pp $pp differs from -pp 1"
done
"$PPRT" d2.plan "$S/data" -o emu_host --backend cuda-emu --cuda-host-only --stats-json host.json -q
cmp emu_host/logits.npy ref_digits/logits.npy || fail "every node on the host fallback: not the reference's bits"
"$PY" -c "
import json; s = json.load(open('host.json'))
assert all(x['reference_nodes'] == x['nodes'] for x in s['stages']), s" || fail "host-only counts"
echo "ok: digits on cuda-emu at -pp 1, 2, 3 and on the host fallback"

# the CI zoo: -pp 1, 2, 3 on cuda-emu against -pp 1 on ref; no host fallback
# (plans hold their weights, ViT-B/16's 330 MB: each is compiled when needed
# and goes once used, so the test needs the disk of one plan at a time, as
# CI's disk is finite)
for m in $ZOO_MODELS; do
  for pp in 1 2 3; do
    "$PPCC" "$ZOO/$m/model.onnx" -pp $pp -o $m.$pp.plan -q
    [ $pp = 1 ] && "$PPRT" $m.1.plan "$ZOO/$m/data" -o ref_$m --backend ref -q --threads 1
    "$PPRT" $m.$pp.plan "$ZOO/$m/data" -o emu_${m}_$pp --backend cuda-emu -q --stats-json $m.$pp.json
    for f in ref_$m/*.npy; do $CMP emu_${m}_$pp/$(basename $f) $f --rtol 1e-3 --atol 1e-4 >/dev/null || fail "$m -pp $pp: $($CMP emu_${m}_$pp/$(basename $f) $f --rtol 1e-3 --atol 1e-4)"; done
    # no host fallback: every node of the CI zoo has a GPU step (U-Net's
    # Resize too, since the own resize kernel)
    "$PY" -c "
import json, sys; s = json.load(open(sys.argv[1]))
assert sum(x['reference_nodes'] for x in s['stages']) == 0, [x['reference_nodes'] for x in s['stages']]" \
      $m.$pp.json || fail "$m -pp $pp: nodes on the host fallback"
    [ $pp != 2 ] || "$TEST_COPIES" $m.2.plan >> copies.txt 2>&1 || fail "$m -pp 2: widened strided copies: $(grep FAIL copies.txt | head -3)"
    case "$pp $m" in "2 unet" | "2 gpt") ;; *) rm -f $m.$pp.plan ;; esac # (those two: the --cuda-host-ops runs below)
  done
  echo "ok: $m on cuda-emu at -pp 1, 2, 3"
done

# the rest of the zoo that model_zoo exported (transformers: Llama, Mistral,
# GPT-J, DistilBERT, BART; Swin-T, ConvNeXt, EfficientNet, MobileNetV3,
# RegNet): -pp 2 on cuda-emu against onnxruntime's outputs, no host fallback
more=0
for m in llama mistral gptj distilbert bart_small swin_t convnext_tiny efficientnet_b0 mobilenet_v3_small regnet_y_400mf; do
  [ -f "$ZOO/$m/meta.json" ] && [ -d "$ZOO/$m/expected" ] || { echo "skip: $m (not exported by model_zoo here)"; continue; }
  args=$("$PY" -c "import json, sys; print(' '.join(json.load(open(sys.argv[1])).get('compile_args', [])))" "$ZOO/$m/meta.json")
  # shellcheck disable=SC2086
  "$PPCC" "$ZOO/$m/model.onnx" -pp 2 $args -o more_$m.plan -q
  "$PPRT" more_$m.plan "$ZOO/$m/data" -o emu_more_$m --backend cuda-emu -q --stats-json more_$m.json
  for f in "$ZOO/$m"/expected/*.npy; do
    $CMP emu_more_$m/$(basename $f) $f --rtol 1e-3 --atol 1e-4 >/dev/null || fail "$m -pp 2 on cuda-emu vs onnxruntime: $($CMP emu_more_$m/$(basename $f) $f --rtol 1e-3 --atol 1e-4)"
  done
  "$PY" -c "
import json, sys; s = json.load(open(sys.argv[1]))
assert sum(x['reference_nodes'] for x in s['stages']) == 0, [x['reference_nodes'] for x in s['stages']]" \
    more_$m.json || fail "$m -pp 2: nodes on the host fallback"
  "$TEST_COPIES" more_$m.plan >> copies.txt 2>&1 || fail "$m -pp 2: widened strided copies: $(grep FAIL copies.txt | head -3)"
  rm -f more_$m.plan
  more=$((more + 1))
done
echo "ok: $more more zoo models on cuda-emu at -pp 2 against onnxruntime, none on the host fallback"

# a convolution or product without a library engine goes to the host and the
# stage is planned again (its node a HOST step over its own tensors): the
# U-Net (ConvTranspose, fused and plain Conv) and GPT (MatMul with a bias Add
# joined to its step) with those ops forced there, against ref
for m in unet gpt; do
  "$PPRT" $m.2.plan "$ZOO/$m/data" -o emu_hostops_$m --backend cuda-emu -q --stats-json hostops_$m.json \
    --cuda-host-ops Conv,pp.FusedConv,ConvTranspose,MatMul,Gemm || fail "$m --cuda-host-ops"
  for f in ref_$m/*.npy; do $CMP emu_hostops_$m/$(basename $f) $f --rtol 1e-3 --atol 1e-4 >/dev/null || fail "$m --cuda-host-ops: $($CMP emu_hostops_$m/$(basename $f) $f --rtol 1e-3 --atol 1e-4)"; done
  "$PY" -c "
import json, sys; s = json.load(open(sys.argv[1]))
assert sum(x['reference_nodes'] for x in s['stages']) > 1, s" hostops_$m.json || fail "$m --cuda-host-ops: nothing on the host"
done
set +e; "$PPRT" d2.plan "$S/data" -o x --backend cuda-emu --cuda-host-ops NoSuchOp -q 2>err.txt; rc=$?; set -e
[ $rc = 2 ] && grep -q "NoSuchOp" err.txt || fail "--cuda-host-ops NoSuchOp: exit $rc, $(cat err.txt)"
echo "ok: library fallback (--cuda-host-ops) on cuda-emu"

# TopK's own kernel against the reference kernel's order, NaN and ties
# included (the ONNX node tests have neither NaN nor ties across rows):
# every axis and direction, values and indices bit for bit
"$PY" - <<'PY'
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
for largest in (0, 1):
    for axis in (0, 1):
        g = helper.make_graph(
            [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 17])],
            [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("i", TensorProto.INT64, None)],
            [numpy_helper.from_array(np.array([5], np.int64), "k")])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"topk_{largest}_{axis}.onnx")
rng = np.random.default_rng(1)
x = rng.integers(-3, 4, size=(6, 17)).astype(np.float32)
x[rng.random((6, 17)) < 0.2] = np.nan
x[0, :] = np.nan
import os
os.makedirs("topk_data", exist_ok=True)
np.save("topk_data/x.npy", x)
PY
for f in topk_*.onnx; do
  "$PPCC" $f -b 0 -o topk.plan -q
  "$PPRT" topk.plan topk_data -o topk_ref --backend ref -q
  "$PPRT" topk.plan topk_data -o topk_emu --backend cuda-emu -q --stats-json topk.json
  cmp topk_ref/v.npy topk_emu/v.npy && cmp topk_ref/i.npy topk_emu/i.npy || fail "$f: TopK on cuda-emu differs from ref"
  "$PY" -c "import json; assert sum(s['reference_nodes'] for s in json.load(open('topk.json'))['stages']) == 0" \
    || fail "$f: TopK not on its own kernel"
done
echo "ok: TopK with NaN and ties: the own kernel gives the reference's bits"

# Einsum: matrix products on cuBLASLt steps, the rest on the host, all right
"$PY" "$SRC/tests/cuda/einsum.py" einsum > einsum.txt 2>&1 || { cat einsum.txt; fail "einsum"; }
tail -1 einsum.txt
# ScatterElements and ScatterND on their own kernel: onnxruntime, the reference's bits, every reduction
"$PY" "$SRC/tests/cuda/scatter.py" scatter > scatter.txt 2>&1 || { cat scatter.txt; fail "scatter"; }
tail -1 scatter.txt
# NaN and inf through convolutions (the GPU script; here the emulator's step list, both fusion modes)
PP_BACKEND=cuda-emu "$PY" "$SRC/tests/cuda/nan_conv.py" nan_conv > nan_conv.txt 2>&1 || { cat nan_conv.txt; fail "nan_conv"; }
tail -1 nan_conv.txt

# the strided copies widened (dims merged, 16 bytes a thread: plan_cuda.c's
# perm_widen) against the copies as given, byte for byte over random data:
# the zoo plans above, and 120 generated models of the copy ops
# (tests/cuda/copies_models.py: random shapes, windows, steps, gathers,
# broadcasts, four element types, in the arena and on the messages); at
# least 30 of those widened (48 of 141 copies when written)
rm -rf copies && "$PY" "$SRC/tests/cuda/copies_models.py" copies 120
for f in copies/*.onnx; do "$PPCC" "$f" -b 0 -o "${f%.onnx}.plan" -q || fail "ppcc $f"; done
"$TEST_COPIES" --min-wide 30 copies/*.plan >> copies.txt 2>&1 || fail "widened strided copies: $(grep FAIL copies.txt | head -3)"
echo "ok: widened strided copies as the copies given: $(grep -c 'strided copies,' copies.txt) plans, $(grep -o '[0-9]* widened' copies.txt | awk '{w += $1} END {print w}') copies widened"
rm -rf copies

# the ONNX node tests that pass on ref must pass on cuda-emu
PPRT_EXTRA_ARGS="--backend cuda-emu" "$PY" "$SRC/tests/conformance/run.py" || fail "conformance on cuda-emu"
echo "cuda: all checks passed"
