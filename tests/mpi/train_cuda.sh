#!/usr/bin/env bash
# Training with device stages on MPI ranks (runtime/comm/train_mpi.c,
# runtime/train.c; docs/training.md "On MPI ranks"), on cuda-emu, without a
# GPU: every run's saved weights compared byte for byte (cmp of every .npy)
# with the threaded cuda-emu run of the same plan and options, and every
# step's loss (--log-json) equal to it:
#   - digits (-pp 2, -b 8) at -np 2 and at -np 4 (--replicas 2), 1F1B and
#     GPipe, AdamW and SGD with momentum, both with clipping, over
#     --transport mpi (device messages through pinned host memory) and
#     --transport nccl (the NCCL link over the emulated NCCL); with --eval;
#     the log saying which path the replicas' sums took and which optimizer
#     stepped: the device optimizer on each rank from step 2 (its own device's
#     weights), the sums chained device to device at --transport nccl with
#     replicas, on the host at --transport mpi;
#   - a zb-h1 plan (its W stages on the devices, a third thread a rank) at
#     -np 2 and 4, both transports: the threads' bits, the 1F1B plan's;
#   - 3 replicas (-np 6, 5 micro-batches a step: shares of 1, 2, 2) with
#     buckets of one 4096-element chunk (PPRT_CHAIN_BUCKET): each weight a
#     bucket of its own;
#   - fp16 with --loss-scale dynamic from 2^30 (9 steps skipped first, the
#     scale halving) at -np 4 (--replicas 2), both transports: every step's
#     scale and the weights the threads';
#   - a placement splitting a device's two stages between cuda-emu and the
#     host (the stash in pinned memory) at -np 4: the host's chain and update;
#   - torchvision ResNet-18 (random weights, training-mode BatchNorm, 32x32,
#     batch 2, 4 micro-batches) at -np 2 and -np 4 --replicas 2 over NCCL,
#     AdamW and SGD with clipping: its 102 weights and running statistics;
#     at -np 4 with buckets of 1M elements and of one chunk (a bucket a
#     weight), the last run folding bucket by bucket as its steps write them
#     and the chain's thread sending some of rank 0's buckets before its
#     backward ended (the log's chain_buckets_before_run_end);
#   - --checkpoint under the device chain, then --resume: the unbroken run;
#   - an emulated NCCL failure in the replicas' chain ends every rank (exit
#     1) naming the call and the rank, and so does one on a boundary while
#     the chain's thread waits for the last run's buckets; a rank killed mid-step (-pp 1 x 3
#     replicas, the chain on the devices) ends every rank within
#     --mpi-timeout, naming the dead rank (tests/mpi/kill.sh, both modes).
# About 120 s on 2 cores. Built without MPI, or without cuda-emu: skipped (77).
#
# usage: train_cuda.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC, PP_MPI=ON|OFF, MPIRUN)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
"$PPRT" --backend list > backends.txt
grep -q '^cuda-emu ' backends.txt || { echo "mpi_train_cuda: no cuda-emu backend; skipping"; exit 77; }
. "$SRC/tests/mpi/common.sh"
mpi_require mpi_train_cuda
mpi_env
checks=0

same_run() { # same_run A B: the same .npy files byte for byte, every step's loss and held-out record equal
  same_dirs "$1" "$2"
  same_losses "$1.json" "$2.json"
}
# paths LOG OPTIMIZER CHAIN: the run's optimizer (host, device) and gradient chain (a word), step 1 the host's
paths() {
  "$PY" - "$@" << 'EOF'
import json, sys
log, opt, chain = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
st = log["steps"]
assert log["optimizer"] == opt, (sys.argv[1], log["optimizer"], log.get("optimizer_why"))
assert log["gradient_chain"].startswith(chain), (sys.argv[1], log["gradient_chain"])
assert log["optimizer_steps"] == "each rank its own device's weights", log["optimizer_steps"]
assert st[0]["optimizer"] == "host" and all(s["optimizer"] == opt for s in st[1:]), [s["optimizer"] for s in st]
EOF
  checks=$((checks + 1))
}

"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o t2.plan -q
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 1 -o t1.plan -q
"$PY" -c "
import numpy as np, os
x = np.load('$S/data/input.npy'); y = np.load('$S/labels.npy')
os.makedirs('held', exist_ok=True); np.save('held/input.npy', x[-40:]); np.save('held/labels.npy', y[-40:])"
common=(--labels "$S/labels.npy" --accumulate 4 --seed 3 --steps 5 --backend cuda-emu -q)
for sched in 1f1b gpipe; do
  for opt in "--optimizer adamw --lr 2e-3 --weight-decay 0.01 --clip-norm 0.5" \
             "--optimizer sgd --lr 0.05 --momentum 0.9 --clip-norm 0.5"; do
    read -r -a o <<< "$opt"
    tag=$sched-${o[1]}
    ev=(); [ "$sched" = 1f1b ] && ev=(--eval held)
    expect_rc 0 th-$tag.txt "$PPRT" t2.plan "$S/data" "${common[@]}" --schedule $sched "${o[@]}" "${ev[@]}" \
      --save-weights th-$tag --log-json th-$tag.json
    for tr in mpi nccl; do
      for np_ in 2 4; do
        r=mpi$np_-$tr-$tag
        expect_rc 0 $r.txt "${M[@]}" -np $np_ "$PPRT" t2.plan "$S/data" "${common[@]}" --schedule $sched "${o[@]}" \
          "${ev[@]}" --transport $tr --replicas $((np_ / 2)) --save-weights $r --log-json $r.json
        same_run th-$tag $r
      done
      paths mpi2-$tr-$tag.json device none
      if [ $tr = nccl ]; then paths mpi4-$tr-$tag.json device devices; else paths mpi4-$tr-$tag.json host host; fi
    done
  done
done
echo "mpi_train_cuda: digits on cuda-emu at -np 2 and 4 (--replicas 2), 1F1B and GPipe, AdamW and SGD with clipping," \
  "--transport mpi and nccl, --eval: the threaded run's bits; the device optimizer on every rank, the sums chained" \
  "on the devices over NCCL"

# a zb-h1 plan (each device's backward split into B and a W stage, the W stage on its rank's device, a third
# thread): under --schedule zb-h1, the 1F1B plan's bits on threads, and the threads' on the ranks, both transports,
# -np 2 and -np 4 (--replicas 2); the device optimizer on each rank takes the W stage's weights too
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --schedule zb-h1 -o z2.plan -q
zo=(--optimizer adamw --lr 2e-3 --weight-decay 0.01 --clip-norm 0.5 --schedule zb-h1)
expect_rc 0 th-z.txt "$PPRT" z2.plan "$S/data" "${common[@]}" "${zo[@]}" --save-weights th-z --log-json th-z.json
same_dirs th-1f1b-adamw th-z
for tr in mpi nccl; do
  for np_ in 2 4; do
    expect_rc 0 z$np_-$tr.txt "${M[@]}" -np $np_ "$PPRT" z2.plan "$S/data" "${common[@]}" "${zo[@]}" --transport $tr \
      --replicas $((np_ / 2)) --save-weights z$np_-$tr --log-json z$np_-$tr.json
    same_run th-z z$np_-$tr
  done
  paths z2-$tr.json device none
done
echo "mpi_train_cuda: a zb-h1 plan of digits on cuda-emu, its W stages on the devices: the 1F1B plan's bits on" \
  "threads, the threads' at -np 2 and 4 (--replicas 2) over --transport mpi and nccl, the device optimizer"

# 3 replicas, each weight a bucket of its own
c5=(--labels "$S/labels.npy" --accumulate 5 --seed 4 --steps 4 --backend cuda-emu -q --optimizer sgd --lr 0.05
    --momentum 0.9 --clip-norm 0.5)
expect_rc 0 th5.txt "$PPRT" t2.plan "$S/data" "${c5[@]}" --save-weights th5 --log-json th5.json
expect_rc 0 mpi6.txt "${M[@]}" -np 6 -x PPRT_CHAIN_BUCKET=4096 "$PPRT" t2.plan "$S/data" "${c5[@]}" --transport nccl \
  --replicas 3 --save-weights mpi6 --log-json mpi6.json
same_run th5 mpi6
paths mpi6.json device devices
echo "mpi_train_cuda: 3 replicas (-np 6, shares of 1, 2 and 2 micro-batches), one-chunk buckets: the threaded run's bits"

# fp16 with a dynamic loss scale from 2^30 (the first steps overflow and are skipped, then it grows every 3 clean
# steps): on the ranks each device's optimizer skips and scales by rank 0's verdict, as threads do; the scales and
# the weights the threads', bit for bit
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --precision fp16 \
  --loss-scale dynamic:1073741824 --loss-scale-interval 3 -o f16.plan -q
cf=(--labels "$S/labels.npy" --accumulate 4 --seed 5 --steps 16 --backend cuda-emu -q --optimizer sgd --lr 0.05
    --momentum 0.9)
expect_rc 0 f16-th.txt "$PPRT" f16.plan "$S/data" "${cf[@]}" --save-weights f16-th --log-json f16-th.json
for tr in mpi nccl; do
  expect_rc 0 f16-$tr.txt "${M[@]}" -np 4 "$PPRT" f16.plan "$S/data" "${cf[@]}" --transport $tr --replicas 2 \
    --save-weights f16-$tr --log-json f16-$tr.json
  same_run f16-th f16-$tr
  "$PY" - f16-th.json f16-$tr.json << 'PYEND'
import json, sys
a, b = (json.load(open(f))["steps"] for f in sys.argv[1:3])
sa, sb = [s["loss_scale"] for s in a], [s["loss_scale"] for s in b]
assert sa == sb, (sa, sb)
assert any(s["skipped"] for s in a) and not all(s["skipped"] for s in a) and len(set(sa)) > 2, sa
PYEND
  checks=$((checks + 1))
done
echo "mpi_train_cuda: fp16 with a dynamic loss scale (skipped steps, backoff, growth) at -np 4 (--replicas 2), both" \
  "transports: the threads' scales and bits"

# a placement that puts a device's forward on cuda-emu and its backward on the host (its stash then in pinned host
# memory, the emulated GPU's side copying down) and the other device on ref: the host's chain and update
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --placement 0:ref,1:cuda-emu -o mix.plan -q
cm=(--labels "$S/labels.npy" --accumulate 4 --seed 3 --steps 4 -q --optimizer sgd --lr 0.05 --momentum 0.9)
expect_rc 0 mix-th.txt "$PPRT" mix.plan "$S/data" "${cm[@]}" --save-weights mix-th --log-json mix-th.json
expect_rc 0 mix-mpi4.txt "${M[@]}" -np 4 "$PPRT" mix.plan "$S/data" "${cm[@]}" --transport nccl --replicas 2 \
  --save-weights mix-mpi4 --log-json mix-mpi4.json
same_run mix-th mix-mpi4
echo "mpi_train_cuda: a device's stages split between cuda-emu and the host (--placement), -np 4: the threaded run's bits"

# ResNet-18, training-mode BatchNorm: the running statistics go round the host's chain, the gradients the devices'
"$PY" "$SRC/tests/tools/export_resnet18.py" r18.onnx --batch 2 --size 32 --samples 16 \
  --data rdata --labels rlabels.npy 2> /dev/null
"$PPCC" r18.onnx --train --loss cross-entropy:logits -b 2 -pp 2 -o r2.plan -q
rc=(--labels rlabels.npy --accumulate 4 --steps 3 --no-shuffle --backend cuda-emu -q)
for opt in "--optimizer adamw --lr 1e-3 --clip-norm 1.0" "--optimizer sgd --lr 0.05 --momentum 0.9 --clip-norm 1.0"; do
  read -r -a o <<< "$opt"
  tag=r18-${o[1]}
  expect_rc 0 th-$tag.txt "$PPRT" r2.plan rdata "${rc[@]}" "${o[@]}" --save-weights th-$tag --log-json th-$tag.json
  for np_ in 2 4; do
    bk=(); [ $np_ = 4 ] && [ "${o[1]}" = sgd ] && bk=(-x PPRT_CHAIN_BUCKET=4096) # each weight a bucket of its own
    expect_rc 0 mpi$np_-$tag.txt "${M[@]}" -np $np_ "${bk[@]}" "$PPRT" r2.plan rdata "${rc[@]}" "${o[@]}" \
      --transport nccl --replicas $((np_ / 2)) --save-weights mpi$np_-$tag --log-json mpi$np_-$tag.json
    same_run th-$tag mpi$np_-$tag
  done
  paths mpi4-$tag.json device devices
done
ls mpi4-r18-sgd | grep -q running_mean || { echo "FAIL: no running statistics among ResNet-18's weights"; exit 1; }
# the chain inside the backward: rank 0 (device 0 of replica 0) sends buckets while its backward still runs; with
# one-chunk buckets it has one per weight of its device
"$PY" - mpi4-r18-adamw.json mpi4-r18-sgd.json << 'PYEND'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
steps = len(a["steps"]) - 1  # the first step is the host's
for l in (a, b):
    assert l["chain_buckets"] % steps == 0 and l["chain_buckets_folded_mid_run"] == l["chain_buckets"], l
assert b["chain_buckets"] // steps > 4 * (a["chain_buckets"] // steps), (a["chain_buckets"], b["chain_buckets"])
early = a["chain_buckets_before_run_end"] + b["chain_buckets_before_run_end"]
assert early >= 1, "no bucket left rank 0 before its backward ended"
print("mpi_train_cuda: rank 0's buckets a step: %d, %d; sent before its backward ended: %d of %d"
      % (a["chain_buckets"] // steps, b["chain_buckets"] // steps, early, a["chain_buckets"] + b["chain_buckets"]))
PYEND
checks=$((checks + 1))
echo "mpi_train_cuda: ResNet-18 (32x32, training-mode BatchNorm) at -np 2 and 4 (--replicas 2) over NCCL, AdamW and" \
  "SGD with clipping, buckets of 1M elements and of one chunk: the threaded run's bits"

# a checkpoint under the device chain, then --resume: the unbroken run's weights
ck=("${common[@]}" --optimizer adamw --lr 2e-3 --clip-norm 0.5 --transport nccl --replicas 2)
expect_rc 0 ck1.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${ck[@]}" --steps 3 --checkpoint ck --save-every 2
[ -f ck/state.json ] && [ ! -e ck.tmp ] || { echo "FAIL: no whole checkpoint ck"; ls -la; exit 1; }
expect_rc 0 ck2.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${ck[@]}" --resume ck --save-weights resumed \
  --log-json resumed.json
expect_rc 0 ck3.txt "$PPRT" t2.plan "$S/data" "${common[@]}" --optimizer adamw --lr 2e-3 --clip-norm 0.5 \
  --save-weights unbroken
for f in unbroken/*.npy; do cmp -s "$f" "resumed/$(basename "$f")" || { echo "FAIL: $f differs after --resume"; exit 1; }; done
checks=$((checks + 1))
echo "mpi_train_cuda: --checkpoint under the device chain (-np 4), then --resume: the unbroken run's weights"

# fault NAME NP INJECTION PLAN WHAT MSG STOPPED N ARGS...: an emulated NCCL fault (PPRT_EMU_NCCL_FAIL=INJECTION)
# ends every rank with exit 1 within 8 s, the failing rank saying MSG and N others STOPPED. Each rank's own exit
# status is recorded (NAME.rc.RANK) and mpirun is told not to abort the job at the first exit of 1
# (orte_abort_on_non_zero_status; it then exits 0): each rank stops on its own here, and mpirun's abort could
# kill a slower one before it says so (CI, 2026-12-06: rank 3 exited first and rank 2's line was missing)
fault() {
  local name=$1 np_=$2 inj=$3 plan=$4 what=$5 msg=$6 stopped=$7 n=$8 start took r
  shift 8
  start=$(date +%s)
  rm -f "$name".rc.*
  timeout -k 10 120 env OMPI_MCA_orte_abort_on_non_zero_status=0 "${M[@]}" -np "$np_" -x PPRT_EMU_NCCL_FAIL="$inj" \
    sh -c '"$0" "$@"; rc=$?; echo $rc > "'"$name"'.rc.$OMPI_COMM_WORLD_RANK"; exit $rc' \
    "$PPRT" "$plan" "$S/data" "$@" --mpi-timeout 10 > "$name.txt" 2>&1 || true
  took=$(($(date +%s) - start))
  for ((r = 0; r < np_; r++)); do
    [ "$(cat "$name.rc.$r" 2>/dev/null)" = 1 ] \
      || { echo "FAIL: $what: rank $r exited $(cat "$name.rc.$r" 2>/dev/null || echo '(none)'), want 1"
           sed 's/^/  | /' "$name.txt"; exit 1; }
  done
  expect_msg "$name.txt" "$msg"
  expect_msg "$name.txt" "$stopped" "$n"
  [ "$took" -le 8 ] || { echo "FAIL: $what took $took s to end the ranks"; exit 1; }
  checks=$((checks + 3))
  echo "mpi_train_cuda: $what: every rank exits 1 within ${took} s, naming it"
}
# a fault in the replicas' chain (rank 1 of -pp 1 x 3 replicas sends only there: its first send is step 2's first
# bucket)
fault fail 3 1:send:0 t1.plan "an emulated NCCL fault in the replicas' chain" \
  "rank 1 \(stage 0, replica 1\): error: .*the replicas' chain of sums to rank 2 .*ncclSend" \
  "rank [02] \(stage 0, replica [02]\): stopped: rank 1 \(stage 0, replica 1\) failed" 2 \
  --labels "$S/labels.npy" --accumulate 3 --steps 4 --backend cuda-emu --transport nccl --replicas 3 -q
# a run that fails while the chain's thread waits for its buckets (rank 1's backward boundary, send 5: in step 3,
# two micro-batches a step, the chain armed; the link finds the fault when it next polls, so the micro-batch it
# names varies): the thread is woken and stopped
fault fail2 4 1:send:5 t2.plan "a run failing while the chain's thread waits" \
  "rank 1 \(stage 1, replica 0\): error: the training boundary .*ncclSend.*micro-batch [0-9]" \
  "rank [023] \(stage [01], replica [01]\): stopped: rank 1 \(stage 1, replica 0\) failed" 3 \
  "${common[@]}" --transport nccl --replicas 2
# a rank killed mid-step
export KILL_ARGS="--labels $S/labels.npy --steps 100000 --accumulate 3 --backend cuda-emu --transport nccl --replicas 3"
mpi_kill_both "$out/t1.plan" "$S/data" "$out/kill"
checks=$((checks + 2))
echo "mpi_train_cuda: $checks checks passed"
