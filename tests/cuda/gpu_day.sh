#!/usr/bin/env bash
# One device call that does what a GPU day owes, in order of value, within
# SECS seconds (default 510, 8.5 minutes: run it with the device tool's
# timeout_s 560 so a call cut short still returns its log). Issue 54's
# order (2026-12):
#   1. build: the carried binaries (.gpu/bin, from tests/cuda/build_carry.sh
#      here: the GPU machine has no protobuf-c to build with) load the CUDA
#      module and name the libraries; the commit they were built from;
#   2. --cuda-overlap on the GPU: digits at -pp 1, 2, 3 and the small
#      ResNet-like model of tests/cuda/overlap_models.py, the same bytes
#      with the pipeline's ends overlapped and not; a stage failing mid-run
#      with overlap on exits 2 (no hang); 2b. --cuda-row-kernels on: the
#      rows of tests/cuda/row_models.py against ref, under racecheck and
#      memcheck; 2c. two GPUs on one (issue 57; TWO_SECS, default 130): two
#      logical devices aliased onto GPU 0 (PPRT_CUDA_ALIAS) with a peer copy
#      and with the staged path (PPRT_CUDA_PEER=none), bit-identical to one
#      device; the graph cache at --depth 8 (8 captures a stage); the
#      devices described; tests/cuda/nccl_probe.c: a one-rank grouped self
#      send/receive, an init whose peer never joins still pending at a 5 s
#      deadline and aborted; --transport mpi on two ranks of the GPU where
#      the machine has MPI; then, with the part's time left, the two
#      paths under compute-sanitizer synccheck (racecheck for the staged);
#      replicas of device stages on threads (tests/cuda/replicas.sh, four
#      logical devices), the bits of one replica;
#      2t. training (issue 56): digits and ResNet-18 trained on the GPU at
#      -pp 1, 2 (tests/cuda/train_emu.sh), digits on two MPI ranks of the GPU
#      (and 4, --replicas 2) bit-identical to threads (2t.mpi, where the
#      carried MPI is), a training step under memcheck and
#      racecheck, the device optimizer against the host's update (bits:
#      tests/cuda/train_dopt.sh; ResNet-18's step time either way), tests/cuda/train_memory_gpu.py (ppcc's device memory
#      model beside PyTorch AMP's peak, the context against --reserve),
#      bench/train_cuda.py (ResNet-50's gradients against PyTorch, its step
#      rate at batch 32 against eager f32 and AMP);
#      2h. mixed-precision training on the half route (--cuda-half-products; HALFTRAIN_SECS, default 120):
#      tests/cuda/train_half.sh on the GPU, then ResNet-50 bf16 at batch 32 against PyTorch eager AMP fp16 and
#      bf16 (bench/train_cuda.py --precision bf16) and its -pp 1 and -pp 2 bits;
#   3. the ONNX node tests on cuda, a quick pass (NODE=quick, default: every
#      NODE_STRIDE-th listed test, within NODE_SECS (60); NODE=all: all of them
#      in five chunks, CHUNKS and SAN as before; NODE=0: none), then the
#      Softmax and LayerNorm node tests with --cuda-row-kernels on;
#   4. bench/cuda_vs_torch.py, the fair benchmark: ResNet-50 and ViT-B/16 at
#      batch 1, 8 and 32 (BENCH_BATCHES), pprt -pp 1 and 2 (BENCH_PP) with
#      --cuda-overlap on (BENCH_OVERLAP; off,on for the A/B) against PyTorch eager host to host and
#      device-resident, f32 strict (BENCH_SECS, default 210), then fp16 and
#      bf16 rows, half plans (ppcc --precision; BENCH_HALF_STORAGE=0: the f32
#      plans at pprt --precision), against autocast channels_last (BENCH_HALF_SECS, default 75;
#      0 skips), then the torch.compile column (BENCH_COMPILE_SECS, default
#      90; compile time excluded, printed); BENCH_RUNS alternated rounds
#      (default 2), BENCH_ARGS added to each call;
#   5. with time left (EXTRA=1, the default): 5f, nan_conv.py (NaN through the fused convolution graphs, the
#      ReLU's NaN propagation set since 2026-12-06); 5t, the convolution tactic cache: test_dnn --tune over
#      ResNet-50's convolutions (TACTIC_SECS, default 60) into $out/tactics/ (commit it), ResNet-50 with the
#      table against --cuda-tactics off, -pp 2 with it bit-identical to -pp 1; which inputs the products read at each --precision
#      (tests/cuda/precision_models.py's MatMul against NumPy's roundings); 5h. half storage (ppcc
#      --precision fp16|bf16) against f32 storage, ViT-B/16 and ResNet-50 at batch 8 and 32, rates and
#      errors against onnxruntime f32 (bench/half_storage.py, HALF_STORAGE_SECS); 5n. ResNet-50's half plans at
#      batch 8 and 32 with --cuda-layout nchw and nhwc against autocast channels_last (LAYOUT_SECS, default 110),
#      -pp 2 at nhwc bit-identical to -pp 1; 5m. half_models.py's mix model (the half plan's BatchNormalization,
#      ConvTranspose, Resize, Pad and reductions, 2026-12-06) against onnxruntime; 5s. ViT-B/16 fp16 at batch 32 and 8
#      with its attention on cuDNN's fused-attention engine (--cuda-sdpa) against pprt's kernel; 5w. a Llama-7B-shaped
#      attention (heads of 128: the fused kernel's wide geometry) f32 and bf16 fused against unfused; ViT-B/16 at fp16, batch 32 and 8,
#      with the speed options (views, fused attention, row kernels, wide elementwise) together on and off;
#      ViT-B/16 with the row kernels
#      in one block against in lanes, with the fused attention on and off
#      (rates, outputs, steps), with the strided views on and off at batch 1
#      and 8 (rates, bytes, launches, -pp 2 against -pp 1), ViT-B/16 at batch 8 and 32 with the options on,
#      ppcc's row-order pass against --disable-pass rows, ViT-B/16 at bf16 as at fp16 above and fp16's
#      profile at batch 32 with the options off and on, the profiles by op type at batch
#      8 (with --cuda-explain), ViT's and ResNet-50's --cuda-wide-elementwise
#      A/B, ViT's --cuda-wide-copies A/B, ResNet-50's
#      --cuda-conv-fusion A/B, GPT under memcheck and initcheck, tests/ops on
#      cuda (OPS_SECS, default 0 now), each only if the time left allows it.
# EARLY=0 skips parts 2-2b', TRAIN_SECS=0 part 2t, HALFTRAIN_SECS=0 part 2h, TWO_SECS=0 part 2c, NODE=0 part 3: the
# next lease's plan (docs/cuda.md, "The GPU day") runs the day as two calls (470 and 290 s),
# one for speed (issue 54), one for training (issue 56).
# MINI=1 runs gpu_mini.sh's checks (the zoo against onnxruntime, nan_conv.py,
# synccheck/initcheck, einsum) before all this (off by default since 2026-12:
# they passed on six leases). The log comes back as $OUT/day.log, the tables
# as $OUT/cvt_*.md, everything else packed in $OUT/gday.tgz (the device tool
# returns 8 files at most).
# Here: PP_CARRY_ZOO=1 tests/cuda/build_carry.sh. There (carry .gpu):
#   bash tests/cuda/gpu_day.sh                   (about 8 minutes)
#   NODE=all MINI=0 BENCH_SECS=0 BENCH_HALF_SECS=0 BENCH_COMPILE_SECS=0 SAN=memcheck SECS=480 bash tests/cuda/gpu_day.sh
#                                                (only the node tests, each under compute-sanitizer)
# Without a GPU: DRY=1 bash tests/cuda/gpu_day.sh runs the same script on
# cuda-emu with the binaries of PP_GPU_BIN (default build/), the node tests
# thinned, the benchmark as --dry-run (its command lines), no sanitizer.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dry=${DRY:-0}
if [ "$dry" = 1 ]; then
  export PP_GPU_BIN=${PP_GPU_BIN:-$src/build} PP_BACKEND=cuda-emu
  NODE_STRIDE=${NODE_STRIDE:-60}; EXTRA=${EXTRA:-0}
fi
# the device tool brings back 8 files of $OUT at most: the log and the tables there, everything else in
# /tmp/gday_files, packed into $OUT/gday.tgz on the way out (a timeout of the script's own included)
dest=${OUT:-/tmp/gday}; out=/tmp/gday_files; rm -rf "$out"; mkdir -p "$dest" "$out"
exec > >(tee "$dest/day.log") 2>&1
trap 'tar czf "$dest/gday.tgz" -C "$out" . 2>/dev/null' EXIT
t0=$SECONDS; budget=${SECS:-510}
left() { echo $((budget - (SECONDS - t0))); }
# cap N: N, or what is left less a margin, whichever is smaller (<= 0: skip)
cap() { local l=$(($(left) - ${2:-15})); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
# within N: N, or what is left of the current part (until part_end), whichever is smaller
within() { local l=$((part_end - SECONDS)); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
status=0
be=${PP_BACKEND:-cuda}
# the seconds parts 2c and 2t leave for the benchmark (part 4): 300, or a margin where BENCH_SECS=0
keep=300; [ "${BENCH_SECS:-210}" = 0 ] && keep=15
[ "${MINI:-0}" = 0 ] || SECS=1 bash "$src/tests/cuda/gpu_mini.sh" || status=1
. "$src/tests/cuda/gpu_env.sh"

echo "== 1. build ($(date +%T), $(left) s left)"
cat "$bin/BUILD" 2>/dev/null || echo "no $bin/BUILD (binaries built before 2026-12, or not by build_carry.sh)"
if [ "$be" = cuda ]; then
  v=$("$PPRT" --backend cuda --version 2>&1); echo "$v" | grep 'cuda:'
  echo "$v" | grep -q 'cuda: CUDA runtime' || { echo "FAIL: the CUDA module does not load"; status=1; }
  nvidia-smi -L
  # the GPU's cuDNN description (issue 54: deviceless execution plans in CI), brought back in $OUT/gday.tgz
  # for a later session to commit under tests/cuda/devprop/; then used here at once without the device: every
  # convolution of digits' plans gets the executors' engine as a plan finalized from the description
  if [ -x "$bin/test_dnn" ]; then
    timeout 60 "$bin/test_dnn" --capture "$out" || { echo "FAIL: test_dnn --capture"; status=1; }
    for f in "$out"/*_cudnn*.json; do
      [ -f "$f" ] || continue
      "$PPCC" "$src/samples/digits/model.onnx" -pp 2 -o /tmp/gday_dp.plan -q
      "$PPCC" "$src/samples/digits/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o /tmp/gday_dp_t.plan -q
      timeout 120 "$bin/test_dnn" --devprop "$f" /tmp/gday_dp.plan /tmp/gday_dp_t.plan 2>&1 | tail -3 \
        || { echo "FAIL: test_dnn --devprop $(basename "$f")"; status=1; }
    done
  else
    echo "no $bin/test_dnn (binaries from before 2026-12-05): no cuDNN description captured"
  fi
fi

w=/tmp/gday_ovl; rm -rf $w; mkdir -p $w; S=$src/samples/digits
if [ "${EARLY:-1}" = 1 ]; then # parts 2, 2b, 2b' (EARLY=0 skips them: a second call of the day)
echo "== 2. --cuda-overlap on against off ($(date +%T), $(left) s left)"
python3 "$src/tests/cuda/overlap_models.py" $w > /dev/null || { echo "FAIL: overlap_models.py"; status=1; }
ovl() { # MODEL DATA PP DEPTH: the same bytes with the ends overlapped and not; each rate
  local m=$1 data=$2 pp=$3 dp=$4 tag; tag=$(basename "$m" .onnx)_$3_$4
  "$PPCC" "$m" -pp "$pp" -b 8 -o $w/p.plan -q || { echo "FAIL: ppcc $m"; status=1; return; }
  for o in off on; do
    timeout 60 "$PPRT" $w/p.plan "$data" --backend $be -q --depth "$dp" --warmup 2 --cuda-overlap $o -o $w/$tag.$o \
      --stats-json $w/$tag.$o.json || { echo "FAIL: $tag --cuda-overlap $o"; status=1; }
  done
  local same=yes; for f in $w/$tag.off/*.npy; do cmp -s "$f" "$w/$tag.on/$(basename "$f")" || same=no; done
  [ $same = yes ] || status=1
  echo "$tag: same bytes: $same; samples/s off $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['steady_samples_per_s']))" $w/$tag.off.json 2>/dev/null), on $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['steady_samples_per_s']))" $w/$tag.on.json 2>/dev/null)"
}
for pp in 1 2 3; do ovl "$S/model.onnx" "$S/data" $pp 2; done
ovl "$S/model.onnx" "$S/data" 2 4
for pp in 1 2; do ovl $w/resnet_like.onnx $w/resnet_like $pp 2; done
"$PPCC" $w/gather.onnx -b 4 -o $w/g.plan -q
timeout 30 "$PPRT" $w/g.plan $w/gather_bad --backend $be -q -o $w/g_bad --cuda-overlap on 2> $w/g_bad.txt; rc=$?
[ $rc = 2 ] && grep -q "index is out of range" $w/g_bad.txt && echo "a failing stage with --cuda-overlap on: exit 2, its message" \
  || { echo "FAIL: a failing stage with --cuda-overlap on: exit $rc: $(head -c 300 $w/g_bad.txt)"; status=1; }

echo "== 2b. --cuda-row-kernels on ($(date +%T), $(left) s left)"
python3 "$src/tests/cuda/row_models.py" $w/rows && "$PPCC" $w/rows/rows.onnx -b 1 -o $w/rows.plan -q \
  && "$PPRT" $w/rows.plan $w/rows/data --backend ref -q -o $w/rows_ref || { echo "FAIL: row_models.py"; status=1; }
timeout 60 "$PPRT" $w/rows.plan $w/rows/data --backend $be -q -o $w/rows_on --cuda-row-kernels on --cuda-explain \
  2> $w/rows_explain.txt || { echo "FAIL: --cuda-row-kernels on"; status=1; }
echo "steps in one block: $(grep -c 'in one block' $w/rows_explain.txt) (want 6: four LayerNorms, Softmax, LogSoftmax)"
for f in $w/rows_ref/*.npy; do
  python3 "$src/tests/tools/compare_npy.py" $w/rows_on/$(basename $f) $f --rtol 1e-5 --atol 1e-6 | tail -1 | sed "s|^|$(basename $f): |"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
if [ "$be" = cuda ]; then  # the barriers and shared memory as the hardware runs them
  for tool in racecheck memcheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $w/rows.plan $w/rows/data -o $w/rows_san \
      --backend cuda --cuda-graphs off --cuda-row-kernels on -q > "$out/san_rows_$tool.txt" 2>&1 \
      || { echo "FAIL: compute-sanitizer $tool, --cuda-row-kernels on"; status=1; }
    echo "row kernels $tool: $(tail -1 "$out/san_rows_$tool.txt")"
  done
fi
# 2b'. the fused attention (--cuda-fused-attention on, not yet on a GPU before this): tests/cuda/fattn_models.py's
# small model (12 patterns; since 2026-12-06 masks added and Wheres, read through their own strides, a head of 128
# in the kernel's wide geometry, BART's and Swin's frames, SwinV2's scale per head) and a ViT-like block against
# ref, then both under racecheck and memcheck
echo "== 2b'. --cuda-fused-attention on ($(date +%T), $(left) s left)"
wf=$w/fattn; mkdir -p $wf
if python3 "$src/tests/cuda/fattn_models.py" $wf > /dev/null; then
  for m in small vit; do
    "$PPCC" $wf/$m.onnx -b 1 -o $wf/$m.plan -q && "$PPRT" $wf/$m.plan $wf/data_$m --backend ref -q -o $wf/ref_$m \
      && timeout 60 "$PPRT" $wf/$m.plan $wf/data_$m --backend $be -q -o $wf/on_$m --cuda-fused-attention on --cuda-explain \
      2> $wf/ex_$m.txt || { echo "FAIL: --cuda-fused-attention on, $m"; status=1; continue; }
    bad=0
    for f in $wf/ref_$m/*.npy; do
      python3 "$src/tests/tools/compare_npy.py" $wf/on_$m/$(basename $f) $f --rtol 1e-4 --atol 1e-5 > $wf/cmp.txt || bad=$((bad + 1))
    done
    echo "$m: $(grep -c 'fused attention' $wf/ex_$m.txt) fused steps; outputs against ref (rtol 1e-4, atol 1e-5): $bad off"
    [ $bad = 0 ] || status=1
  done
  if [ "$be" = cuda ]; then
    for tool in racecheck memcheck; do
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $wf/vit.plan $wf/data_vit -o $wf/san \
        --backend cuda --cuda-graphs off --cuda-fused-attention on -q > "$out/san_fattn_$tool.txt" 2>&1 \
        || { echo "FAIL: compute-sanitizer $tool, --cuda-fused-attention on"; status=1; }
      echo "fused attention $tool: $(tail -1 "$out/san_fattn_$tool.txt")"
    done
    for tool in memcheck racecheck; do # (racecheck: the wide geometry's shared memory, pattern d)
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $wf/small.plan $wf/data_small -o $wf/san_s \
        --backend cuda --cuda-graphs off --cuda-fused-attention on -q > "$out/san_fattn_small_$tool.txt" 2>&1 \
        || { echo "FAIL: compute-sanitizer $tool, the small model's patterns"; status=1; }
      echo "fused attention $tool (masks, Wheres, heads of 128, frames, per-head scales): $(tail -1 "$out/san_fattn_small_$tool.txt")"
    done
  fi
else
  echo "FAIL: fattn_models.py"; status=1
fi

fi # EARLY
# 2t. training on the GPU (issue 56; never on a GPU before this), within TRAIN_SECS (default 240; like 2c it
# never eats into the 300 s kept for the benchmark; TRAIN_SECS=0 skips it): tests/cuda/train_emu.sh with
# TRAIN_BACKEND=$be (digits, ResNet-18 and an opset-17 net at -pp 1, 2: no node on the host, the same bits
# across splits, digits' and the net's weights and ResNet-18's losses against ref), one ResNet-18 training
# step under memcheck and racecheck (the backward kernels), then the opset-17 net's (the LayerNorm,
# InstanceNorm, slice and resize gradients' kernels), tests/cuda/train_memory_gpu.py (ppcc's device memory model beside
# PyTorch AMP's peak, the CUDA context against --reserve), then bench/train_cuda.py (ResNet-50: one step's
# loss and gradients against PyTorch f32, the step rate at batch 32 against eager f32 and AMP)
echo "== 2t. training ($(date +%T), $(left) s left)"
wt=$w/train
part_end=$((SECONDS + $(cap "${TRAIN_SECS:-240}" "$keep")))
if [ "$(within 150)" -lt 20 ]; then
  echo "skip: training (TRAIN_SECS, or the time left)"
elif PPCC=$PPCC PPRT=$PPRT PY=python3 SRC=$src TRAIN_BACKEND=$be timeout "$(within 150)" \
    bash "$src/tests/cuda/train_emu.sh" $wt > "$out/train_emu.txt" 2>&1; then
  tail -2 "$out/train_emu.txt"
else
  echo "FAIL: training on $be: $(tail -3 "$out/train_emu.txt")"; status=1
fi
# 2t.mpi training on two MPI ranks of the one GPU (issue 56; never on a GPU before this; about 10 s): digits at
# -pp 2, a rank per device, --transport mpi (NCCL wants a GPU per rank), 4 steps of 4 micro-batches, AdamW with
# clipping: every weight the same bytes as the threaded run and each rank's device optimizer stepping its own
# device's weights from step 2; then --replicas 2 on 4 ranks (the replicas' sums chained on the host over
# --transport mpi), the same bytes. The MPI pprt and Open MPI as 2c.5 finds them (PP_CARRY_MPI=1 build_carry.sh).
mp=$bin/mpi/pprt; [ "$dry" = 1 ] && mp=$PPRT # (here build/'s pprt has MPI)
ompi_env=true; command -v mpirun > /dev/null || [ ! -f "$src/.gpu/ompi/env.sh" ] || ompi_env=". $src/.gpu/ompi/env.sh"
if (d=$src/.gpu/ompi; eval "$ompi_env"; command -v mpirun > /dev/null) && [ -x "$mp" ] && [ "$(within 60)" -ge 30 ]; then
  mf=(--oversubscribe); [ "$(id -u)" = 0 ] && mf+=(--allow-run-as-root)
  t2m=$SECONDS; mkdir -p $wt/mpi
  ta=(--labels "$S/labels.npy" --accumulate 4 --steps 4 --seed 3 --optimizer adamw --lr 2e-3 --clip-norm 0.5 -q --backend $be)
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o $wt/mpi/t2.plan -q \
    && timeout "$(within 30)" "$PPRT" $wt/mpi/t2.plan "$S/data" "${ta[@]}" --save-weights $wt/mpi/th > "$out/train_mpi_th.txt" 2>&1 \
    || { echo "FAIL: 2t.mpi: the threaded run: $(tail -2 "$out/train_mpi_th.txt")"; status=1; }
  for np_ in 2 4; do
    [ "$(within 30)" -ge 15 ] || { echo "2t.mpi -np $np_: out of time"; break; }
    (d=$src/.gpu/ompi; eval "$ompi_env"; timeout -k 5 "$(within 30)" mpirun "${mf[@]}" -np $np_ "$mp" $wt/mpi/t2.plan \
      "$S/data" "${ta[@]}" --transport mpi --replicas $((np_ / 2)) --mpi-timeout 20 --save-weights $wt/mpi/m$np_ \
      --log-json $wt/mpi/m$np_.json) > "$out/train_mpi_$np_.txt" 2>&1 \
      || { echo "FAIL: 2t.mpi mpirun -np $np_ (rc $?): $(tail -3 "$out/train_mpi_$np_.txt")"; status=1; continue; }
    same=yes; for f in $wt/mpi/th/*.npy; do cmp -s "$f" $wt/mpi/m$np_/"$(basename "$f")" || same=no; done
    [ $same = yes ] || status=1
    echo "2t.mpi training, -np $np_ (--replicas $((np_ / 2))) on the one GPU over --transport mpi: same bytes as threads:" \
      "$same; $(python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print('optimizer', j['optimizer'], '(' + j['optimizer_steps'] + '), gradient chain:', j['gradient_chain'])" $wt/mpi/m$np_.json 2>&1)"
  done
  echo "2t.mpi: $((SECONDS - t2m)) s"
else
  echo "2t.mpi training on two ranks: skipped (no mpirun here and no .gpu/ompi, or no $bin/mpi/pprt: PP_CARRY_MPI=1 build_carry.sh)"
fi
if [ "$be" = cuda ] && [ -f $wt/r1.plan ]; then
  for tool in memcheck racecheck; do
    [ "$(within 90)" -ge 20 ] || { echo "skip: a training step under $tool (time)"; continue; }
    timeout "$(within 90)" compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $wt/r1.plan $wt/rdata --labels \
      $wt/rlabels.npy --steps 1 --backend cuda --cuda-graphs off -q > "$out/san_train_$tool.txt" 2>&1 \
      || { echo "FAIL: compute-sanitizer $tool, a ResNet-18 training step"; status=1; }
    echo "training step $tool: $(tail -1 "$out/san_train_$tool.txt")"
    [ -f $wt/n1.plan ] && [ "$(within 60)" -ge 15 ] || continue # the opset-17 net: the LayerNorm, InstanceNorm, slice and resize gradients
    timeout "$(within 60)" compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $wt/n1.plan $wt/ndata --labels \
      $wt/nlabels.npy --steps 1 --backend cuda --cuda-graphs off -q > "$out/san_train17_$tool.txt" 2>&1 \
      || { echo "FAIL: compute-sanitizer $tool, the opset-17 net's training step"; status=1; }
    echo "opset-17 training step $tool: $(tail -1 "$out/san_train17_$tool.txt")"
  done
  # the device optimizer (runtime/dopt.h; never on a GPU before this) against the host's update: the same bits
  # (tests/cuda/train_dopt.sh on cuda), then ResNet-18's step time either way (8 steps, 2 micro-batches; the
  # mean seconds of steps 3-8 from --log-json, and the weight bytes each uploaded a step), and with the step's last
  # run folding bucket by bucket (PPRT_EARLY_FOLD=1: what replicas do, that run outside the CUDA graph; the
  # figure that decides whether the early run should be captured as a second graph)
  if [ "$(within 150)" -ge 60 ]; then
    if PPCC=$PPCC PPRT=$PPRT PY=python3 SRC=$src TRAIN_BACKEND=cuda timeout "$(within 150)" \
        bash "$src/tests/cuda/train_dopt.sh" $w/dopt > "$out/train_dopt.txt" 2>&1; then
      tail -1 "$out/train_dopt.txt"
    else
      echo "FAIL: the device optimizer on cuda: $(tail -3 "$out/train_dopt.txt")"; status=1
    fi
    for h in dev host early; do
      a=""; [ $h = host ] && a=--host-optimizer
      e=0; [ $h = early ] && e=1
      PPRT_EARLY_FOLD=$e timeout "$(within 60)" "$PPRT" $wt/r1.plan $wt/rdata --labels $wt/rlabels.npy --steps 8 \
        --accumulate 2 --optimizer adamw --lr 1e-3 --backend $be --log-json $w/dopt_time_$h.json -q $a \
        > /dev/null 2>&1 || true
    done
    python3 - $w/dopt_time_dev.json $w/dopt_time_host.json $w/dopt_time_early.json <<'PY' || true
import json, sys
for f in sys.argv[1:]:
    try:
        j = json.load(open(f))
    except (OSError, ValueError) as e:
        print(f"{f}: no log ({e})")
        continue
    st = j["steps"][2:]
    how = " (the last run folding by bucket, ungraphed: PPRT_EARLY_FOLD=1)" if f.endswith("_early.json") else ""
    print(f"ResNet-18 step, {j['optimizer']} optimizer{how}: {sum(1 / s['samples_per_s'] for s in st) / len(st) * 8:.4f}"
          f" s (8 samples), weights uploaded {st[-1]['weight_upload_bytes']:.0f} B a step")
PY
  fi
  if [ "$(within 90)" -ge 30 ]; then
    timeout "$(within 90)" python3 "$src/tests/cuda/train_memory_gpu.py" "$src/tests/cuda/train_memory_est.json" \
      > "$out/train_memory_gpu.md" 2>&1 || { echo "FAIL or cut: train_memory_gpu.py: $(tail -2 "$out/train_memory_gpu.md")"; status=1; }
    cat "$out/train_memory_gpu.md"
  fi
  if [ "$(within 150)" -ge 40 ]; then
    timeout "$(within 150)" python3 "$src/bench/train_cuda.py" --ppcc "$PPCC" --pprt "$PPRT" > "$out/train_cuda.md" \
      2> "$out/train_cuda.err" || { echo "FAIL or cut: bench/train_cuda.py: $(tail -2 "$out/train_cuda.err")"; status=1; }
    cat "$out/train_cuda.md"
  else
    echo "skip: bench/train_cuda.py (time)"
  fi
fi

# 2h. mixed-precision training on the half route (issue 56; pprt --cuda-half-products, never on a GPU before
# this), within HALFTRAIN_SECS (default 120; like 2t it never eats into the 300 s kept for the benchmark;
# HALFTRAIN_SECS=0 skips it): tests/cuda/train_half.sh with TRAIN_BACKEND=$be (digits and ResNet-18 at bf16 and
# fp16, -pp 1 and 2: the products the IR names on the half route, the same bits across splits, the reference
# kernels within tolerances; on and off not compared on a GPU), then bench/train_cuda.py --precision bf16:
# ResNet-50 at batch 32, its step rate against PyTorch eager AMP fp16 and bf16 (the issue's bar: >= 1.0x), where
# the step's time goes by op type (--profile: BatchNorm's block per channel, the Casts), and
# 2 steps at -pp 1 against -pp 2 byte for byte (on cuda only: cuda-emu's convolutions at 224x224 take minutes)
echo "== 2h. mixed-precision training, the half route ($(date +%T), $(left) s left)"
part_end=$((SECONDS + $(cap "${HALFTRAIN_SECS:-120}" "$keep")))
if [ "$(within 60)" -lt 30 ]; then
  echo "skip: 2h (HALFTRAIN_SECS, or the time left)"
else
  th=50; [ "$dry" = 1 ] && th=110 # (cuda-emu: about 35 s of CPU)
  if PPCC=$PPCC PPRT=$PPRT PY=python3 SRC=$src TRAIN_BACKEND=$be timeout "$(within $th)" \
      bash "$src/tests/cuda/train_half.sh" $w/half > "$out/train_half.txt" 2>&1; then
    tail -6 "$out/train_half.txt"
  else
    echo "FAIL or cut: the half route on $be: $(tail -4 "$out/train_half.txt")"; status=1
  fi
  if [ "$be" = cuda ] && [ "$(within 90)" -ge 50 ]; then
    timeout "$(within 90)" python3 "$src/bench/train_cuda.py" --ppcc "$PPCC" --pprt "$PPRT" --precision bf16 \
      --no-check --split-bits --profile --steps 4 > "$out/train_half_bench.md" 2> "$out/train_half_bench.err" \
      || { echo "FAIL or cut: bench/train_cuda.py --precision bf16: $(tail -2 "$out/train_half_bench.err")"; status=1; }
    cat "$out/train_half_bench.md"
    grep -q "0 of [0-9]* weights differ" "$out/train_half_bench.md" || { echo "FAIL: 2h: -pp 1 and -pp 2 differ (or did not run)"; status=1; }
  else
    echo "skip: bench/train_cuda.py --precision bf16 (time, or not cuda)"
  fi
fi

# 2c. two GPUs on one (issue 57): the two-device paths on logical devices aliased onto GPU 0
# (PPRT_CUDA_ALIAS), within TWO_SECS (default 130; it never eats into the 300 s kept for the benchmark)
echo "== 2c. two GPUs on one ($(date +%T), $(left) s left)"
part_end=$((SECONDS + $(cap "${TWO_SECS:-130}" "$keep")))
if [ "$(within 60)" -lt 20 ]; then   # (TWO_SECS=0: before 2026-12-05 the part ran anyway, timeout -N failing it)
  echo "skip: 2c (TWO_SECS, or the time left)"
else
w2=/tmp/gday_two; rm -rf $w2; mkdir -p $w2
jget() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null; }
"$PPCC" "$S/model.onnx" -pp 2 -b 16 --placement 0:$be:0,1:$be:1 -o $w2/two.plan -q \
  && "$PPCC" "$S/model.onnx" -pp 2 -b 16 --placement 0:$be:0,1:$be:0 -o $w2/one.plan -q \
  && "$PPCC" "$S/model.onnx" -pp 3 -b 2 --placement 0:$be:0,1:$be:1,2:$be:2 -o $w2/three.plan -q \
  || { echo "FAIL: 2c: ppcc"; status=1; }
timeout "$(within 60)" "$PPRT" $w2/one.plan "$S/data" -o $w2/one -q || { echo "FAIL: 2c: digits -pp 2 on one device"; status=1; }
# 2c.1 a peer copy (both on GPU 0) and the staged path (PPRT_CUDA_PEER=none), each bit-identical to one device
# (under compute-sanitizer in 2c.6, with the time the part has left)
for peer in all none; do
  [ "$(within 30)" -ge 20 ] || { echo "2c.1 ($peer): out of time"; break; }
  env PPRT_CUDA_ALIAS=2 PPRT_CUDA_PEER=$peer PPRT_EMU_PEER=$peer timeout "$(within 60)" "$PPRT" $w2/two.plan "$S/data" \
    -o $w2/two_$peer -q --stats-json $w2/two_$peer.json || { echo "FAIL: 2c.1: two logical devices, peer $peer"; status=1; continue; }
  same=yes; cmp -s $w2/one/logits.npy $w2/two_$peer/logits.npy || { same=no; status=1; }
  echo "2c.1 two logical devices on GPU 0, peer $peer: path '$(jget $w2/two_$peer.json "j['stages'][0].get('path_to_next')")'; same bytes as one device: $same"
done
# 2c.2 the graph cache at --depth 8: one capture per pair of message buffers, none after (three logical devices)
if [ "$(within 60)" -ge 20 ]; then
  env PPRT_CUDA_ALIAS=3 timeout "$(within 60)" "$PPRT" $w2/three.plan "$S/data" -o $w2/g8 -q --depth 8 --stats-json $w2/g8.json \
    && env PPRT_CUDA_ALIAS=3 timeout "$(within 60)" "$PPRT" $w2/three.plan "$S/data" -o $w2/g0 -q --depth 8 --cuda-graphs off \
    || { echo "FAIL: 2c.2 --depth 8"; status=1; }
  caps=$(jget $w2/g8.json "[s['cuda_graph_captures'] for s in j['stages']]")
  echo "2c.2 --depth 8: graph captures per stage $caps (want [8, 8, 8]), replays $(jget $w2/g8.json "[s['cuda_graph_replays'] for s in j['stages']]")"
  [ "$caps" = "[8, 8, 8]" ] || status=1
  cmp -s $w2/g8/logits.npy $w2/g0/logits.npy && echo "2c.2 graphs on and off: same bytes" || { echo "FAIL: 2c.2 graphs change the bytes"; status=1; }
fi
# 2c.3 the devices described (name, compute capability, SMs, libraries); one kind of device: no warning
[ -f $w2/two_all.json ] && echo "2c.3 devices: $(jget $w2/two_all.json "'; '.join('%s: %s' % (s['device']['place'], ', '.join(str(v) for k, v in s['device'].items() if k != 'place')) for s in j['stages'])"); differ: $(jget $w2/two_all.json "j['devices_differ']") (want False)"
# 2c.4 NCCL on one GPU without MPI (tests/cuda/nccl_probe.c): a one-rank grouped self send/receive; an init
# whose peer never joins still in progress at a 5 s deadline, then ncclCommAbort returns
if [ "$be" = cuda ] && [ -x "$bin/nccl_probe" ]; then
  for t in "self" "nojoin 5"; do
    [ "$(within 30)" -ge 15 ] || { echo "2c.4 nccl_probe $t: out of time"; break; }
    timeout -k 5 "$(within 30)" "$bin/nccl_probe" $t > "$out/nccl_$t.txt" 2>&1; rc=$?
    grep -E '^(ok|FAIL|skip|NCCL)' "$out/nccl_$t.txt" | sed "s/^/2c.4 /"
    [ $rc = 0 ] || { echo "FAIL: 2c.4 nccl_probe $t: rc $rc$([ $rc = 124 ] && echo ' (a hang: cut by its timeout)')"; status=1; }
  done
else
  echo "2c.4 nccl_probe: skipped ($([ "$be" = cuda ] && echo "no $bin/nccl_probe: build_carry.sh builds it" || echo "cuda-emu"))"
fi
# 2c.5 --transport mpi, two ranks on the one GPU, bit-identical to threads (only where this machine has MPI)
# The GPU machine has no MPI: PP_CARRY_MPI=1 build_carry.sh carries this machine's Open MPI in .gpu/ompi
# (tests/cuda/carry_ompi.sh; ctest mpi_carry checks the copy stands alone), used where no mpirun is on PATH
mp=$bin/mpi/pprt; [ "$dry" = 1 ] && mp=$PPRT # (here build/'s pprt has MPI)
ompi_env=true; command -v mpirun > /dev/null || [ ! -f "$src/.gpu/ompi/env.sh" ] || ompi_env=". $src/.gpu/ompi/env.sh"
if (d=$src/.gpu/ompi; eval "$ompi_env"; command -v mpirun > /dev/null) && [ -x "$mp" ] && [ "$(within 60)" -ge 20 ]; then
  mf=(--oversubscribe); [ "$(id -u)" = 0 ] && mf+=(--allow-run-as-root)
  echo "2c.5 mpirun: $(d=$src/.gpu/ompi; eval "$ompi_env"; command -v mpirun)"
  (d=$src/.gpu/ompi; eval "$ompi_env"; timeout -k 5 "$(within 60)" mpirun "${mf[@]}" -np 2 "$mp" $w2/one.plan "$S/data" -o $w2/mpi \
    -q --backend $be --transport mpi --mpi-timeout 20) > "$out/mpi_two.txt" 2>&1 \
    || { echo "FAIL: 2c.5 mpirun -np 2 --transport mpi (rc $?): $(tail -3 "$out/mpi_two.txt")"; status=1; }
  cmp -s $w2/one/logits.npy $w2/mpi/logits.npy && echo "2c.5 --transport mpi, two ranks on GPU 0: same bytes as threads" \
    || { echo "FAIL: 2c.5 --transport mpi: other bytes"; status=1; }
else
  echo "2c.5 --transport mpi on two ranks: skipped (no mpirun here and no .gpu/ompi, or no $bin/mpi/pprt: PP_CARRY_MPI=1 build_carry.sh)"
fi

# 2c.7 replicas of device stages on threads (pprt --replicas 2 without mpirun; tests/cuda/replicas.sh, quick): four
# logical devices on GPU 0, inference the bytes of one replica, digits' training its weights with the replicas'
# sums chained between the devices (peer copies) and each replica's device optimizer stepping
if [ "$(within 60)" -ge 25 ]; then
  env PPCC=$PPCC PPRT=$PPRT PY=python3 SRC=$src PPRT_CUDA_ALIAS=4 REPL_BACKEND=$be REPL_QUICK=1 \
    timeout "$(within 60)" bash "$src/tests/cuda/replicas.sh" $w2/repl \
    > "$out/replicas.txt" 2>&1 || { echo "FAIL: 2c.7 replicas (rc $?): $(tail -3 "$out/replicas.txt")"; status=1; }
  grep -E "^(ok|FAIL)" "$out/replicas.txt" | sed "s/^/2c.7 /"
else
  echo "2c.7 replicas on threads: out of time"
fi

# 2c.6 the two-device paths under compute-sanitizer: synccheck, and racecheck for the staged path (two
# streams, an event between them), each where the part's time allows
if [ "$be" = cuda ]; then
  for pt in all:synccheck none:synccheck none:racecheck; do
    peer=${pt%%:*} tool=${pt#*:}
    [ "$(within 90)" -ge 30 ] || { echo "2c.6 $tool, peer $peer: out of time"; continue; }
    env PPRT_CUDA_ALIAS=2 PPRT_CUDA_PEER=$peer timeout "$(within 90)" compute-sanitizer --tool $tool --error-exitcode 9 \
      "$PPRT" $w2/two.plan "$S/data" -o $w2/san -q --cuda-graphs off > "$out/san_two_${peer}_$tool.txt" 2>&1 \
      || { echo "FAIL: 2c.6 compute-sanitizer $tool, peer $peer (rc $?)"; status=1; }
    echo "2c.6 $tool, peer $peer: $(tail -1 "$out/san_two_${peer}_$tool.txt")"
  done
fi
fi   # 2c

# ONNX node tests: quick (every NODE_STRIDE-th listed test, one chunk) or all (five chunks)
node_tests() {
  local mode=$1 nw=/tmp/gday_nt
  rm -rf $nw; mkdir -p $nw/all && tar xzf "$src/.gpu/node.tgz" -C $nw/all 2>/dev/null \
    || { [ "$dry" = 1 ] && python3 -c "import onnx, os, shutil, sys; shutil.copytree(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'), sys.argv[1])" $nw/all/node; } \
    || { echo "no node tests (.gpu/node.tgz: PP_CARRY_ZOO=1 build_carry.sh)"; status=1; return; }
  python3 - "$src" $nw "$mode" "${NODE_STRIDE:-5}" <<'EOF'
import os, shutil, sys
src, w, mode, stride = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
listed = [t.strip() for t in open(os.path.join(src, "tests/conformance/expected_pass.txt")) if t.strip()]
first = ("depthtospace", "spacetodepth", "lstm", "gru", "rnn", "training_mode", "attention", "rotary", "resize", "einsum", "scatter", "tril", "triu", "_pad", "test_sin", "test_cos",
         "test_tan", "sign", "shrink", "isnan", "isinf", "bitwise", "bitshift", "top_k", "dropout",
         # own kernels added on 2026-11-27
         "gridsample", "quantizelinear", "hardmax", "l1normalization", "l2normalization", "lpnormalization", "lppool", "onehot", "affine_grid", "cumprod")
if mode == "quick":
    chunks = [listed[::stride]]
else:
    new = [t for t in listed if any(k in t for k in first)]
    rest = [t for t in listed if t not in new]
    chunks = [new] + [rest[i::4] for i in range(4)]
for i, ts in enumerate(chunks):
    os.makedirs(os.path.join(w, f"c{i}"))
    for t in ts:
        if os.path.isdir(os.path.join(w, "all/node", t)):
            shutil.move(os.path.join(w, "all/node", t), os.path.join(w, f"c{i}", t))
    print(f"chunk {i}: {len(ts)} tests" + (f" (every {stride}th of {len(listed)} listed)" if mode == "quick" else ""))
EOF
  local PR=$PPRT
  # SAN=memcheck (or racecheck, initcheck, synccheck): every node test's pprt under compute-sanitizer
  if [ -n "${SAN:-}" ] && [ "$dry" != 1 ]; then
    printf '#!/bin/sh\nexec compute-sanitizer --tool %s --error-exitcode 9 %s "$@"\n' "$SAN" "$PPRT" > $nw/pprt_san
    chmod +x $nw/pprt_san; PR=$nw/pprt_san
  fi
  local chunks=0; [ "$mode" = quick ] || chunks=${CHUNKS:-0 1 2 3 4}
  local end=$((SECONDS + $2))
  for i in $chunks; do   # CHUNKS="3 4 0 1 2": another order (a lease that ran some already)
    local t=$((end - SECONDS)); [ $t -le $(($(left) - 5)) ] || t=$(($(left) - 5))
    [ $t -gt 15 ] || { echo "out of time before chunk $i"; break; }
    PPRT=$PR PPRT_EXTRA_ARGS="--backend $be" timeout $t python3 "$src/tests/conformance/run.py" -j 16 \
      --node-dir $nw/c$i --filter test_ --timeout 30 --list-failures --json "$out/conf_${mode}_c$i.json" > "$out/conf_${mode}_c$i.txt" 2>&1
    local rc=$?; echo "chunk $i: rc $rc: $(grep -E 'listed-op tests:|regression|did not pass|tests in' "$out/conf_${mode}_c$i.txt" | tr '\n' ' ')"
    [ $rc = 0 ] || { status=1; grep -A30 "did not pass" "$out/conf_${mode}_c$i.txt" | head -30; }
  done
}
# the node tests of the row kernels' ops with --cuda-row-kernels on (wherever node_tests left them)
row_node_tests() {
  local nw=/tmp/gday_nt f d
  # (and the elementwise ones with --cuda-wide-elementwise on: their whole-operand cases take the kernel)
  local opt
  for f in softmax layer_norm rms_normalization test_add test_mul test_div test_sub test_pow test_relu test_sigmoid; do for d in $nw/all/node $nw/c*; do
    ls "$d" 2>/dev/null | grep -q "$f" || continue
    [ "$(left)" -gt 320 ] || { echo "row kernels' node tests: no time left before the benchmark"; return; }
    case $f in softmax|layer_norm|rms_normalization) opt="--cuda-row-kernels on" ;; *) opt="--cuda-wide-elementwise on" ;; esac
    PPRT_EXTRA_ARGS="--backend $be $opt" timeout 60 python3 "$src/tests/conformance/run.py" -j 16 \
      --node-dir "$d" --filter $f --timeout 30 > "$out/conf_rows_${f}_$(basename "$d").txt" 2>&1
    local rc=$?; echo "$opt, $f in $(basename "$d"): rc $rc: $(grep -E 'regression' "$out/conf_rows_${f}_$(basename "$d").txt" | tr '\n' ' ')"
    [ $rc = 0 ] || status=1
  done; done
}
case ${NODE:-quick} in
  # (the quick pass leaves 300 s for the benchmark)
  quick) echo "== 3. ONNX node tests on $be, quick pass ($(date +%T), $(left) s left)"; node_tests quick "$(cap "${NODE_SECS:-60}" 300)" ;;
  all) echo "== 3. ONNX node tests on $be, all ($(date +%T), $(left) s left)"; node_tests all "$(cap 100000 5)" ;;
  *) echo "== 3. ONNX node tests: skipped (NODE=${NODE})" ;;
esac
[ "${NODE:-quick}" = 0 ] || row_node_tests

# the fair benchmark: PART SECS ARGS...: one bench/cuda_vs_torch.py call into $dest/cvt_PART.md
bench() {
  local part=$1 s; s=$(cap "$2" 20); shift 2
  [ "$s" -gt 0 ] || { echo "bench $part: skipped (no time left)"; return; }
  echo "== 4. bench/cuda_vs_torch.py, $part ($(date +%T), $(left) s left, $s s for it)"
  local dr=(); [ "$dry" != 1 ] || dr=(--dry-run)
  timeout "$s" python3 "$src/bench/cuda_vs_torch.py" --pprt "$PPRT" --ppcc "$PPCC" --work /tmp/cvt --backend $be \
    --models "${BENCH_MODELS:-resnet50,vit_b_16}" --batches "${BENCH_BATCHES:-1,8,32}" --runs "${BENCH_RUNS:-2}" \
    --out "$dest/cvt_$part.md" "$@" "${dr[@]}" ${BENCH_ARGS:-} 2> "$out/bench_$part.err"
  local rc=$?; [ $rc = 0 ] || { echo "bench $part: rc $rc$([ $rc = 124 ] && echo ' (cut by its time: the rows so far are kept)')"; tail -5 "$out/bench_$part.err"; [ $rc = 124 ] || status=1; }
  [ "$dry" = 1 ] && tail -4 "$out/bench_$part.err" || cat "$dest/cvt_$part.md" 2>/dev/null
}
# since the seventh lease the overlap is the default and the rows issue 54 asks for are -pp 1 and 2 at batch 1, 8 and
# 32 (BENCH_OVERLAP=off,on for the A/B again)
bench f32 "${BENCH_SECS:-210}" --pp "${BENCH_PP:-1,2}" --overlap "${BENCH_OVERLAP:-on}" --precisions f32 --compile ""
# (the half rows run half plans, ppcc --precision, since 2026-12-05: issue 54's fp16 and bf16 targets against
# autocast are for them; BENCH_HALF_STORAGE=0 runs the f32 plans at pprt --precision as the seventh lease did)
hst=(); [ "${BENCH_HALF_STORAGE:-1}" = 0 ] || hst=(--half-storage)
[ "${BENCH_HALF_SECS:-75}" = 0 ] || bench half "${BENCH_HALF_SECS:-75}" --pp "${BENCH_PP:-1,2}" --overlap "${BENCH_OVERLAP:-on}" \
  --precisions fp16,bf16 --compile "" --profile-kernels 0 "${hst[@]}"
[ "${BENCH_COMPILE_SECS:-90}" = 0 ] || bench compile "${BENCH_COMPILE_SECS:-90}" --pp "" --precisions f32 --compile f32 --profile-kernels 0

if [ "${EXTRA:-1}" = 1 ]; then
  echo "== 5. with the time left ($(date +%T), $(left) s left)"
  # where the GPU time goes: --profile at batch 8, -pp 1, summed by op type
  rate() { python3 -c "import json, sys; print(round(json.load(open(sys.argv[1]))['steady_samples_per_s'], 1))" "$1"; }
  # by_op PROFILE LABEL [BATCH]: the profile's ms per micro-batch (of BATCH, default 8) summed by op type
  by_op() { python3 "$src/bench/benchlib.py" by_op "$1" "$2" "${3:-8}"; }
  HALF_OPTS_=--cuda-stride-views,--cuda-fused-attention,--cuda-row-kernels,--cuda-wide-elementwise
  # ab TAG PLAN DATA OPTIONS RTOL ATOL [ARG...]: PLAN on DATA with OPTIONS (one, or several joined by commas,
  # each given on or off) on and off, alternated twice, every run with the ARGs (e.g. --precision fp16): the
  # rates and --cuda-explain's tally (the explain files in $out), whether the bytes are the same, and within
  # RTOL / ATOL of each other or the day fails; the outputs stay in /tmp/cvt/ab_TAG_on and _off
  ab() {
    local tag=$1 plan=$2 data=$3 opt=$4 rtol=$5 atol=$6 v o on off
    shift 6
    for v in on off; do
      local a=""; for o in ${opt//,/ }; do a+="$o $v "; done
      [ $v = on ] && on="on|$plan|$a$*" || off="off|$plan|$a$*"
    done
    ab_sides "$tag" "$data" "$rtol" "$atol" "$on" "$off"
  }
  # ab_sides TAG DATA RTOL ATOL "NAME|PLAN|ARGS" "NAME|PLAN|ARGS": two runs of a plan on DATA (each its plan and
  # its pprt ARGS, space-separated, no spaces inside one), alternated twice: the rates and --cuda-explain's tally
  # (the explain files in $out), whether the bytes are the same, and within RTOL / ATOL of each other or the day
  # fails; the outputs stay in /tmp/cvt/ab_TAG_NAME
  ab_sides() {
    local tag=$1 data=$2 rtol=$3 atol=$4 r side name plan args n1 n2
    shift 4
    n1=${1%%|*} n2=${2%%|*}
    for r in 1 2; do for side in "$@"; do
      IFS='|' read -r name plan args <<< "$side"
      # shellcheck disable=SC2086
      timeout 60 "$PPRT" "$plan" "$data" -o /tmp/cvt/ab_${tag}_$name --backend $be -q --warmup 4 $args --cuda-explain \
        --stats-json /tmp/cvt/ab_${tag}_$name.json 2> "$out/explain_${tag}_$name.txt" \
        && echo "$tag $name ($args): $(rate /tmp/cvt/ab_${tag}_$name.json) samples/s; $(grep -o '[0-9]* launches: .*' "$out/explain_${tag}_$name.txt" | head -1)" \
        || { echo "FAIL: $tag $name: $(tail -2 "$out/explain_${tag}_$name.txt")"; status=1; }
    done; done
    cmp -s /tmp/cvt/ab_${tag}_$n1/*.npy /tmp/cvt/ab_${tag}_$n2/*.npy && echo "$tag: the same bytes $n1 and $n2" \
      || echo "$tag: other bytes $n1 than $n2"
    python3 "$src/tests/tools/compare_npy.py" /tmp/cvt/ab_${tag}_$n1/*.npy /tmp/cvt/ab_${tag}_$n2/*.npy --rtol $rtol --atol $atol \
      > /tmp/cvt/ab_cmp.txt || { echo "FAIL: $tag's output $n1 against $n2"; status=1; }
    tail -1 /tmp/cvt/ab_cmp.txt | sed "s|^|$tag $n1 against $n2: |"
  }
  # 5f. NaN through cuDNN's fused convolution graphs (issue 54): since 2026-12-06 pprt sets CUDNN_PROPAGATE_NAN on
  # the graphs' ReLU (as cudnn-frontend does; unset, three of nan_conv.py's 14 models lost their NaN fused on an
  # H200, 2026-11-27). nan_conv.py judges the default (each convolution alone) and reports the fused graphs:
  # if every model's fused line now keeps the reference's NaN, --cuda-conv-fusion on (4-6 % on ResNet-50) can
  # become the default (about 15 s)
  if [ "$be" = cuda ] && [ "$(left)" -gt 60 ]; then
    echo "== 5f. nan_conv.py: NaN through the fused convolution graphs ($(date +%T), $(left) s left)"
    timeout 60 python3 "$src/tests/cuda/nan_conv.py" /tmp/gday_nan_conv > "$out/nan_conv.txt" 2>&1 \
      || { echo "FAIL: nan_conv.py (the default mode)"; status=1; }
    cat "$out/nan_conv.txt"
  fi
  # 5t. the convolution tactic cache (issue 54; docs/cuda.md "The convolution tactic cache"; never on a GPU before
  # this): test_dnn --tune times every deterministic engine config the heuristics offer for ResNet-50's
  # convolutions at batch 8 and 32 (strict f32, and the tf32/half signatures) into $out/tactics/<GPU>.tsv (bring
  # it back and commit it under runtime/cuda/tactics/), stdout per signature the heuristics' time against the
  # tuned one; then ResNet-50 at batch 32 and 8 with the table against --cuda-tactics off, alternated, and -pp 2
  # with the table bit-identical to -pp 1 with it (TACTIC_SECS, default 60, for the tuning)
  d=/tmp/cvt/resnet50; ts=$(cap "${TACTIC_SECS:-60}" 60)
  if [ "$be" = cuda ] && [ -x "$bin/test_dnn" ] && [ -f $d/b32_pp1.plan ] && [ "$ts" -gt 10 ]; then
    mkdir -p "$out/tactics"
    tab="$out/tactics/tuned.tsv"
    timeout $((ts + 20)) "$bin/test_dnn" --tune "$tab" --tune-fast --tune-secs "$ts" $d/b32_pp1.plan $d/b8_pp1.plan \
      > "$out/tune.txt" 2>&1 || { echo "FAIL: test_dnn --tune: $(tail -3 "$out/tune.txt")"; status=1; }
    grep -E "^tune: .* tactics into|heuristics engine" "$out/tune.txt" | tail -25
    name=$(grep -o '([^()]*_cudnn[0-9]*)' "$tab" 2>/dev/null | head -1 | tr -d '()')
    [ -n "$name" ] && cp "$tab" "$out/tactics/$name.tsv" && echo "tactic table: $out/tactics/$name.tsv (in gday.tgz)"
    for b in 32 8; do
      [ -f "$tab" ] && [ -f $d/b${b}_pp1.plan ] && [ "$(left)" -gt 60 ] || continue
      ab_sides resnet50_b${b}_tac $d/data_$b 1e-4 1e-5 "table|$d/b${b}_pp1.plan|--cuda-tactics $tab" \
        "off|$d/b${b}_pp1.plan|--cuda-tactics off"
      echo "resnet50 -b $b: $(grep -c 'tactic cache .*: took' "$out/explain_resnet50_b${b}_tac_table.txt") convolutions from the table"
      if [ -f $d/b${b}_pp2.plan ]; then
        timeout 60 "$PPRT" $d/b${b}_pp2.plan $d/data_$b -o /tmp/cvt/tac_${b}_pp2 --backend $be -q --cuda-tactics "$tab" \
          && { cmp -s /tmp/cvt/ab_resnet50_b${b}_tac_table/*.npy /tmp/cvt/tac_${b}_pp2/*.npy && echo "resnet50 -b $b with the table: -pp 2 bit-identical to -pp 1" \
               || { echo "FAIL: resnet50 -b $b with the table: -pp 2 differs from -pp 1"; status=1; }; }
      fi
    done
  else
    echo "5t. tactics: skipped ($be, test_dnn $([ -x "$bin/test_dnn" ] && echo found || echo missing), plans $([ -f $d/b32_pp1.plan ] && echo found || echo missing), $ts s)"
  fi
  # which inputs the GPU's products read at each --precision (docs/cuda.md, "Reduced precision": on the seventh
  # lease bf16's error equalled fp16's, where bfloat16 inputs would give about 8x): precision_models.py's MatMul
  # and Gemm against NumPy's products over inputs rounded to f32, TF32, bfloat16 and float16 (a few seconds)
  # (small products, then ViT-B/16's sizes at batch 8: PRECISION_BIG=1, as cuBLASLt chooses kernels by size)
  for big in 0 1; do
    pm=/tmp/cvt/prec$big; rm -rf $pm; mkdir -p $pm
    [ $big = 0 ] || [ "$dry" != 1 ] || break   # (minutes on cuda-emu)
    export PRECISION_BIG=$big
    if python3 "$src/tests/cuda/precision_models.py" models $pm && "$PPCC" $pm/mm.onnx -b 0 -o $pm/mm.plan -q; then
      for pr in f32 tf32 bf16 fp16; do
        timeout 30 "$PPRT" $pm/mm.plan $pm/data_mm --backend $be -q -o $pm/out_$pr --precision $pr --cuda-explain \
          2> "$out/explain_prec${big}_$pr.txt" \
          && echo "products$([ $big = 1 ] && echo ", ViT's sizes,") at --precision $pr, error against each rounding: $(python3 "$src/tests/cuda/precision_models.py" which $pm $pm/out_$pr/y.npy)" \
          || { echo "FAIL: precision_models' MatMul (big $big) at --precision $pr: $(tail -2 "$out/explain_prec${big}_$pr.txt")"; status=1; }
      done
    fi
    unset PRECISION_BIG
  done
  # half storage (ppcc --precision fp16|bf16, issue 54 "Real reduced precision", 2026-12-05; docs/cuda.md "Half
  # storage"): ViT-B/16 and ResNet-50 at batch 8 and 32, the f32 plan at pprt --precision P (f32 storage, what the
  # seventh lease timed) against the half plan, alternated, each its rate and its error against onnxruntime's f32
  # (pprt's f32 plan where onnxruntime does not import): bench/half_storage.py into $dest/cvt_half_storage.md
  # (HALF_STORAGE_SECS, default 150; 0 skips). Never run on a GPU before: the first cuBLASLt 16F/16BF products, cuDNN
  # HALF/BFLOAT16 graphs and half row kernels on a device; a failed row says which call
  hs=$(cap "${HALF_STORAGE_SECS:-150}" 30)
  if [ "$hs" -gt 30 ] && [ -f /tmp/cvt/vit_b_16/model.onnx ] && [ "$dry" != 1 ]; then
    d=/tmp/cvt/vit_b_16
    echo "== 5h. half storage against f32 storage ($(date +%T), $(left) s left, $hs s for it)"
    timeout "$hs" python3 "$src/bench/half_storage.py" --ppcc "$PPCC" --pprt "$PPRT" --work /tmp/cvt --backend $be \
      --models resnet50,vit_b_16 --batches 8,32 --runs 2 --out "$dest/cvt_half_storage.md" 2> "$out/half_storage.err" \
      || { echo "half_storage.py: rc $? (rows so far kept)"; tail -3 "$out/half_storage.err"; }
    cat "$dest/cvt_half_storage.md" 2>/dev/null
    # 5s. cuDNN's fused attention (--cuda-sdpa, default on, 2026-12-06; never on a GPU before): the fp16 plan's
    # ViT-B/16 at batch 32 and 8 with the speed options on, its 12 attention steps on cuDNN's engine (tensor cores)
    # against pprt's f32-arithmetic kernel: the rates, and within 2e-2 / 5e-3 of each other (each within about
    # 2e-3 of f32 on cuda-emu); --cuda-explain says per step which ran and why (explain_vit_sdpa_b*_on.txt)
    for b in 32 8; do
      [ -f $d/b${b}_pp1_fp16.plan ] && [ "$(left)" -gt 75 ] || continue
      ab vit_sdpa_b$b $d/b${b}_pp1_fp16.plan $d/data_$b --cuda-sdpa 2e-2 5e-3 --cuda-stride-views on \
        --cuda-fused-attention on --cuda-row-kernels on
      echo "ViT-B/16 fp16 -b $b --cuda-sdpa on: $(grep -c "cuDNN's fused-attention engine" \
        "$out/explain_vit_sdpa_b${b}_on.txt") of 12 attention steps on cuDNN's engine; \
        $(grep -m1 'attention on pprt' "$out/explain_vit_sdpa_b${b}_on.txt")"
    done
    # the half plans' ViT-B/16 at batch 8 with the speed options (fused attention, row kernels on the half types)
    [ -f /tmp/cvt/vit_b_16/b8_pp1_fp16.plan ] && [ "$(left)" -gt 90 ] && \
      ab vit_half_b8 /tmp/cvt/vit_b_16/b8_pp1_fp16.plan /tmp/cvt/vit_b_16/data_8 $HALF_OPTS_ 2e-2 5e-3
  fi
  # 5w. the fused kernel's wide geometry (heads over 64: tiles of 32 query rows and 16 keys, 2026-12-06's thirteenth
  # session; never on a GPU): a Llama-7B-shaped attention (32 heads of 128, 512 tokens, a causal mask) at batch 4,
  # the f32 plan (pprt's kernel) and the bf16 plan (cuDNN's SDPA where an engine takes it, else pprt's kernel),
  # --cuda-fused-attention on against off, alternated (about 30 s): whether the wide geometry beats two cuBLASLt
  # products and the softmax launches, before the option becomes a default
  wd=/tmp/cvt/wide
  if [ "$dry" != 1 ] && [ "$(left)" -gt 70 ] && mkdir -p $wd && python3 "$src/tests/cuda/fattn_models.py" $wd wide; then
    echo "== 5w. the fused kernel's wide geometry, heads of 128 ($(date +%T), $(left) s left)"
    for pr in f32 bf16; do
      [ "$(left)" -gt 50 ] || continue
      "$PPCC" $wd/wide.onnx -b 4 $([ $pr = bf16 ] && echo --precision bf16) -o $wd/wide_$pr.plan -q || continue
      ab wide_$pr $wd/wide_$pr.plan $wd/data_wide --cuda-fused-attention $([ $pr = f32 ] && echo 1e-3 1e-4 || echo 3e-2 1e-2)
      echo "wide $pr: $(grep -c "cuDNN's fused-attention engine" "$out/explain_wide_${pr}_on.txt") of 1 step on cuDNN's engine"
    done
  fi
  # 5n. channels-last convolutions (pprt --cuda-layout, issue 54, 2026-12-05; docs/cuda.md "Layouts"; never on a GPU
  # before): ResNet-50's half plans (fp16, bf16) at batch 8 and 32, pprt -pp 1 with --cuda-layout nchw and then nhwc
  # (auto, the default, is nhwc for half plans) against PyTorch autocast channels_last, into $dest/cvt_layout_nchw.md
  # and cvt_layout_nhwc.md (LAYOUT_SECS, default 110, split between the two; 0 skips); then the nhwc plan at -pp 2
  # against -pp 1, fp16 batch 8: the same bits (the layout rule reads the whole plan; a cut adds transposes only)
  ls_=$(cap "${LAYOUT_SECS:-110}" 30)
  if [ "$ls_" -gt 40 ]; then
    echo "== 5n. channels-last convolutions, ResNet-50 fp16/bf16 ($(date +%T), $(left) s left, $ls_ s for it)"
    for lay in nchw nhwc; do
      bench layout_$lay $(( ls_ / 2 - 5 )) --models resnet50 --batches 8,32 --pp 1 --overlap on --precisions fp16,bf16 \
        --compile "" --profile-kernels 0 --half-storage --layout $lay
    done
    d=/tmp/cvt/resnet50
    if [ -f $d/model.onnx ] && [ -d $d/data_8 ] && [ "$dry" != 1 ] && [ "$(left)" -gt 40 ]; then
      for pp in 1 2; do
        "$PPCC" $d/model.onnx -b 8 -pp $pp --precision fp16 -o /tmp/cvt/nhwc_pp$pp.plan -q \
          && "$PPRT" /tmp/cvt/nhwc_pp$pp.plan $d/data_8 --backend $be -q --cuda-layout nhwc -o /tmp/cvt/nhwc_o$pp \
               --stats-json "$out/nhwc_pp$pp.json" --cuda-explain 2> "$out/nhwc_explain_pp$pp.txt" \
          || { echo "FAIL: ResNet-50 fp16 -pp $pp at --cuda-layout nhwc: $(tail -2 "$out/nhwc_explain_pp$pp.txt")"; status=1; }
      done
      same=1; for f in /tmp/cvt/nhwc_o1/*.npy; do cmp -s "$f" "/tmp/cvt/nhwc_o2/${f##*/}" || same=0; done
      if ls /tmp/cvt/nhwc_o1/*.npy > /dev/null 2>&1 && [ $same = 1 ]; then
        echo "ok: ResNet-50 fp16 b8 --cuda-layout nhwc: -pp 2 the same bits as -pp 1"
      else
        echo "FAIL: ResNet-50 fp16 b8 --cuda-layout nhwc: -pp 2 gives other bits than -pp 1"; status=1
      fi
      grep -h "cuDNN engine\|engine" "$out/nhwc_explain_pp1.txt" | head -5
    fi
  fi
  # 5m. the ops a half plan stores in half since 2026-12-06 (docs/cuda.md "Half storage"; never on a GPU):
  # BatchNormalization (inference), ConvTranspose (cuDNN backward data on HALF / BFLOAT16, channels-last), Resize,
  # Pad, InstanceNormalization, ReduceMean, ReduceMax, ReduceL2, LpPool, GlobalMaxPool and Einsum (cuBLASLt 16F / 16BF):
  # tests/cuda/half_models.py's mix
  # model at fp16 and bf16 on $be
  # against onnxruntime's f32 within ctest cuda_half's bounds (4e-3, 3e-2), no host step, -pp 2 the same bits
  # as -pp 1 (about 10 s)
  hm=/tmp/half_mix
  if [ "$(left)" -gt 40 ] && rm -rf $hm && mkdir -p $hm && (cd $hm && python3 "$src/tests/cuda/half_models.py" models . \
       && python3 "$src/tests/cuda/half_models.py" ort mix.onnx data_mix ort_mix) > "$out/half_mix.txt" 2>&1; then
    echo "== 5m. the half plan's new half ops, tests/cuda/half_models.py's mix ($(date +%T), $(left) s left)"
    for pr in fp16 bf16; do
      lim=$([ $pr = fp16 ] && echo 4e-3 || echo 3e-2)
      ok=1
      for pp in 1 2; do
        "$PPCC" $hm/mix.onnx -b 2 -pp $pp --precision $pr -o $hm/m$pp.plan -q \
          && timeout 60 "$PPRT" $hm/m$pp.plan $hm/data_mix --backend $be -q -o $hm/o$pp --cuda-explain \
               2> $hm/explain_${pr}_$pp.txt || { echo "FAIL: mix $pr -pp $pp: $(tail -2 $hm/explain_${pr}_$pp.txt)"; ok=0; }
      done
      cp $hm/explain_${pr}_1.txt "$out/" 2>/dev/null
      [ $ok = 1 ] || { status=1; continue; }
      e=$(python3 "$src/tests/cuda/half_models.py" error $hm/o1/y.npy $hm/ort_mix/y.npy) || e="$e (NaN)"
      host=$(grep -o '[0-9]* host steps' $hm/explain_${pr}_1.txt | head -1)
      if python3 -c "import sys; sys.exit(not float('$e') <= $lim)" 2>/dev/null && [ "$host" = "0 host steps" ] \
         && cmp -s $hm/o1/y.npy $hm/o2/y.npy; then
        echo "ok: mix $pr on $be: error $e against onnxruntime's f32 (bound $lim), $host, -pp 2 the same bits"
      else
        echo "FAIL: mix $pr on $be: error $e (bound $lim), $host, -pp 2 $(cmp -s $hm/o1/y.npy $hm/o2/y.npy \
          && echo 'the same bits' || echo 'other bits')"; status=1
      fi
    done
  fi
  d=/tmp/cvt/vit_b_16
  # ViT-B/16 in half precision (issue 54: fp16 0.48x autocast at batch 32 on the seventh lease, 1.34x at 8).
  # At --precision fp16|bf16 every tensor stays f32 and the step list is f32's (docs/cuda.md, "Reduced
  # precision"; cuda-emu: the same launches, 88.7 MB moved a layer at batch 1 with the defaults, 57.1 with the
  # options below), so the f32 memory-bound steps weigh more than in f32: the speed options that default off
  # (views, fused attention, row kernels, wide elementwise) together on and off at batch 32 and 8, fp16 then
  # bf16 (outputs within rtol 2e-2 / atol 5e-3 of each other at fp16, 5e-2 / 5e-2 at bf16: the fused
  # attention's products are f32 where cuBLASLt's read half-rounded inputs), then fp16's profile at batch 32 by
  # op type with the defaults and on
  # (fp16 here; bf16 and the profiles after the views' A/B below, which decides defaults)
  HALF_OPTS=--cuda-stride-views,--cuda-fused-attention,--cuda-row-kernels,--cuda-wide-elementwise
  half_ab() {
    local pb pr b tol
    for pb in "$@"; do
      IFS=: read -r pr b <<< "$pb"
      [ -f $d/b${b}_pp1.plan ] && [ "$(left)" -gt 90 ] || continue
      # (tolerances from cuda-emu's errors on the zoo's ViT-B/16, whose largest output is 1.9: 1.8e-3 at fp16,
      # 1.5e-2 at bf16 against f32; on and off each that far from f32, so twice that apart at most, and more)
      if [ $pr = bf16 ]; then tol="5e-2 5e-2"; else tol="2e-2 5e-3"; fi
      ab vit_${pr}_b$b "$d/b${b}_pp1.plan" "$d/data_$b" $HALF_OPTS $tol --precision $pr
    done
  }
  half_ab fp16:32 fp16:8
  if [ -f $d/b8_pp1.plan ] && [ "$(left)" -gt 60 ]; then
    # ViT-B/16 at batch 8 with the row kernels in one block (and the residual Adds inside the LayerNorms) against
    # in lanes; with the fused attention (issue 54) on and off: 4 steps fewer a layer where the pattern fused,
    # within rtol 1e-4 / atol 1e-5 (the kernel sums in f32 in another order than cuBLASLt)
    ab vit_b8_rows "$d/b8_pp1.plan" "$d/data_8" --cuda-row-kernels 1e-4 1e-5
    ab vit_b8_fattn "$d/b8_pp1.plan" "$d/data_8" --cuda-fused-attention 1e-4 1e-5
    echo "ViT-B/16 -b 8: $(grep -c 'fused attention' "$out/explain_vit_b8_fattn_on.txt") fused attention steps"
  fi
  # ViT-B/16 with the strided views (--cuda-stride-views, issue 54: the Transposes, Slices and Gathers that feed
  # products folded into cuBLASLt's operands) on and off, at batch 1 (where every copy feeding a product folds)
  # and 8, and -pp 2 with views on bit-identical to -pp 1 with views on
  d=/tmp/cvt/vit_b_16
  for b in 1 8; do
    [ -f $d/b${b}_pp1.plan ] && [ "$(left)" -gt 60 ] || continue
    # (cuBLASLt may take another algorithm for a transposed or offset operand: other bytes are allowed)
    ab vit_b$b "$d/b${b}_pp1.plan" "$d/data_$b" --cuda-stride-views 1e-4 1e-5
    if [ -f $d/b${b}_pp2.plan ]; then
      timeout 60 "$PPRT" $d/b${b}_pp2.plan $d/data_$b -o /tmp/cvt/sv_out_${b}_pp2 --backend $be -q --cuda-stride-views on \
        && { cmp -s /tmp/cvt/ab_vit_b${b}_on/*.npy /tmp/cvt/sv_out_${b}_pp2/*.npy && echo "ViT-B/16 -b $b views on: -pp 2 bit-identical to -pp 1" \
             || { echo "FAIL: ViT-B/16 -b $b views on: -pp 2 differs from -pp 1"; status=1; }; }
    fi
  done
  # ppcc's row-order pass (2026-12-05, passes/rows.c; never on a GPU before): ViT-B/16 at batch 8 and 32 with the
  # speed options (views, fused attention, row kernels) on, the default plan (no [B, S, E] <-> [S, B, E] Transpose;
  # the fused kernel writes the context through the pass's Transpose) against one compiled with --disable-pass
  # rows, alternated; cuda-emu gives both the same bytes, so other bytes here are cuBLASLt's choice (rtol 1e-4)
  for b in 8 32; do
    [ -f $d/b${b}_pp1.plan ] && [ -d $d/data_$b ] && [ "$(left)" -gt 70 ] || continue
    "$PPCC" $d/model.onnx -b $b --disable-pass rows -o /tmp/cvt/norows_b$b.plan -q || { echo "FAIL: ppcc --disable-pass rows"; status=1; continue; }
    o="--cuda-stride-views on --cuda-fused-attention on --cuda-row-kernels on"
    ab_sides vit_b${b}_rowpass $d/data_$b 1e-4 1e-5 "rows|$d/b${b}_pp1.plan|$o" "norows|/tmp/cvt/norows_b$b.plan|$o"
  done
  # ViT-B/16 at bf16 with the speed options on and off, then fp16's profile at batch 32 by op type both ways
  d=/tmp/cvt/vit_b_16
  half_ab bf16:32 bf16:8
  for v in off on; do
    [ -f $d/b32_pp1.plan ] && [ "$(left)" -gt 60 ] || break
    args=(); for o in ${HALF_OPTS//,/ }; do args+=("$o" $v); done
    timeout 60 "$PPRT" $d/b32_pp1.plan $d/data_32 -o /tmp/cvt/prof_out --backend $be -q --warmup 4 --precision fp16 \
      "${args[@]}" --profile "$out/prof_vit_fp16_b32_$v.json" 2> "$out/explain_vit_fp16_b32_prof_$v.txt" \
      && by_op "$out/prof_vit_fp16_b32_$v.json" "vit_b_16 fp16 profile, options $v" 32
  done
  # elementwise steps 16 bytes a thread (--cuda-wide-elementwise, issue 54) on and off, ViT-B/16 and
  # ResNet-50 at batch 8: the same float arithmetic, but nvcc may contract a unary formula into FMAs
  # differently in the two kernels, so within rtol 1e-5 / atol 1e-6 (the steps that took the kernel are in
  # the explain files: "16 bytes a thread")
  for m in vit_b_16 resnet50; do
    d=/tmp/cvt/$m
    [ -f $d/b8_pp1.plan ] && [ "$(left)" -gt 60 ] || continue
    ab ${m}_b8 "$d/b8_pp1.plan" "$d/data_8" --cuda-wide-elementwise 1e-5 1e-6
    echo "$m -b 8: $(grep -c '16 bytes a thread' "$out/explain_${m}_b8_on.txt") steps 16 bytes a thread"
  done
  # MODEL:PRECISION[:narrow] (narrow: --cuda-wide-copies off, the copies as given)
  for mp in resnet50:f32 vit_b_16:f32 vit_b_16:tf32 vit_b_16:f32:narrow; do
    [ "$(left)" -gt 60 ] || { echo "profiles: out of time"; break; }
    IFS=: read -r m pr nar <<< "$mp"; d=/tmp/cvt/$m; [ -f $d/b8_pp1.plan ] || continue
    ex=(); [ "$be" != cuda ] || ex=(--cuda-explain)   # which cuDNN engine / cuBLASLt algorithm each step took
    [ -z "$nar" ] || ex+=(--cuda-wide-copies off)
    tag=${m}_$pr${nar:+_$nar}
    timeout 60 "$PPRT" $d/b8_pp1.plan $d/data_8 -o /tmp/cvt/prof_out --backend $be -q --warmup 4 --precision $pr \
      "${ex[@]}" --profile "$out/prof_$tag.json" 2> "$out/explain_$tag.txt" && by_op "$out/prof_$tag.json" "$m $pr${nar:+ $nar} profile"
  done
  # strided copies widened (the default) against as given (the same bytes or the day fails: rtol 0); ResNet-50's
  # fused cuDNN graphs (not NaN-faithful, docs/cuda.md) against the convolutions alone (the default)
  d=/tmp/cvt/vit_b_16
  [ -f $d/b8_pp1.plan ] && [ "$(left)" -gt 80 ] && ab vit_b8_copies "$d/b8_pp1.plan" "$d/data_8" --cuda-wide-copies 0 0
  d=/tmp/cvt/resnet50
  [ "$be" = cuda ] && [ -f $d/b8_pp1.plan ] && [ "$(left)" -gt 80 ] && ab resnet50_b8_fusion "$d/b8_pp1.plan" "$d/data_8" --cuda-conv-fusion 1e-3 1e-4
  # the row kernels in lanes (GPT's LayerNorms) under compute-sanitizer
  if [ "$be" = cuda ] && [ "$(left)" -gt 100 ] && [ -f $Z/gpt/auto_2.plan ]; then
    for tool in memcheck initcheck; do
      timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $Z/gpt/auto_2.plan $Z/gpt/data -o /tmp/gday_san \
        --backend cuda --cuda-graphs off -q > "$out/san_gpt_$tool.txt" 2>&1 || { echo "FAIL: compute-sanitizer $tool on GPT"; status=1; }
      echo "GPT -pp 2 $tool: $(tail -1 "$out/san_gpt_$tool.txt")"
    done
  fi
  # tests/ops's cases on $be against onnxruntime, within OPS_SECS (default 0 since 2026-12; 166 of 167 on the sixth lease)
  os=$(cap "${OPS_SECS:-0}" 20)
  if [ "$os" -gt 0 ]; then
    echo "== tests/ops on $be ($(date +%T), $(left) s left)"
    PP_OPS_BACKENDS=$be PP_OPS_IR=10 PP_OPS_ONLY=${OPS_ONLY:-.} timeout "$os" python3 "$src/tests/ops/run.py" /tmp/gday_ops \
      > "$out/ops.txt" 2>&1 || { echo "ops: rc $?"; status=1; }
    grep -E "^ops: [0-9]+ cases|^FAIL" "$out/ops.txt" | head -30
  fi
fi
date -u; echo "gpu day: $([ $status = 0 ] && echo all passed || echo FAILURES above) ($((SECONDS - t0)) s)"; exit $status
