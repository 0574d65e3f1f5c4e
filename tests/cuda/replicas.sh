#!/usr/bin/env bash
# Replicas of device stages on the threaded runtime (pprt --replicas R with
# cuda-emu, no mpirun; runtime/sched.c place_stages): replica k's stages
# take the devices after replica k - 1's (k x the plan's devices + the
# stage's own index, modulo the emulator's 4), as MPI ranks would.
#   - inference, digits at -pp 2: --replicas 1, 2 and 3 (the third replica
#     back on devices 0 and 1) the same bytes, also with the emulator's
#     copies delayed (PPRT_EMU_DELAY_US); the notes name each replica's
#     device and boundary path, and the first device two replicas share;
#     --stats-json counts the replicas;
#   - a device of another kind in replica 1 only (PPRT_EMU_SMS=3:114): one
#     warning naming it, "devices_differ" true;
#   - training: each replica's executors keep their own copies of the
#     weights on the device optimizer (dopt.h), and the replicas' gradient
#     sums chain device to device in replica order (train.c thr_chain:
#     replica r adds its held micro-batches onto replica r - 1's sums, bucket
#     by bucket; the last one's sums copied back to the others). Digits at
#     -pp 2 with 2 and 3 replicas (1F1B, GPipe, a zb-h1 plan whose W stages
#     sit on their replica's backward device, one-chunk buckets, fp16 with
#     dynamic loss scaling and skipped steps, --eval after each epoch, a
#     checkpoint resumed), the
#     chain's copies issued from either side or staged through pinned
#     memory (PPRT_EMU_PEER), and ResNet-18 (training-mode BatchNorm, 32x32):
#     every step's loss and the saved weights the bits of one replica, no
#     trained weight uploaded after step 1 (each replica's uploads one
#     replica's); --host-optimizer the same bits with the
#     host stepping;
#   - a stage failing mid-step while the chain's thread waits for a bucket
#     (a Gather index out of range in either replica's micro-batch): exit 2
#     with its message, no hang.
# About 40 s. usage: replicas.sh WORK_DIR (env: PPCC, PPRT, PY, SRC;
# REPL_BACKEND=cuda runs it on a GPU; REPL_QUICK=1: inference at 2 replicas
# and digits' 1F1B training alone, the GPU day's part 2c.7)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
S=$SRC/samples/digits
be=${REPL_BACKEND:-cuda-emu}
ndev=4 # cuda-emu's devices (mem_emu.h); on a GPU the machine's
[ "$be" = cuda-emu ] || ndev=${PPRT_CUDA_ALIAS:-$(nvidia-smi -L | grep -c "^GPU")} # (logical devices where aliased)
"$PPCC" "$S/model.onnx" -pp 2 -b 16 -o d2.plan -q
"$PPRT" d2.plan "$S/data" -o one -q --backend "$be"
quick=${REPL_QUICK:-0}
reps=(2 3); [ "$quick" = 1 ] && reps=(2)
for r in "${reps[@]}"; do
  for delay in 0 300; do
    PPRT_EMU_DELAY_US=$delay "$PPRT" d2.plan "$S/data" -o "r${r}_$delay" --backend "$be" --replicas $r \
      --stats-json "s$r.json" > "log$r.txt" 2>&1 || { cat "log$r.txt"; fail "--replicas $r: the run failed"; }
    cmp one/logits.npy "r${r}_$delay/logits.npy" || fail "--replicas $r (delay $delay us): other outputs than one"
  done
  for k in $(seq 0 $((r - 1))); do
    for i in 0 1; do
      dev=$(((k * 2 + i) % ndev))
      grep -q "^pprt: stage $i of replica $k on $be device $dev: " "log$r.txt" ||
        fail "--replicas $r: no note placing stage $i of replica $k on device $dev: $(grep 'replica' "log$r.txt")"
    done
    grep -q "^pprt: boundary stage 0 -> stage 1 of replica $k: " "log$r.txt" ||
      fail "--replicas $r: no path for replica $k's boundary"
  done
  # replicas on fewer devices than their stages: one note naming the first device two of them share
  n=$(grep -c "^pprt: note: replica .* shares $be device" "log$r.txt" || true)
  [ "$n" = $((r * 2 > ndev ? 1 : 0)) ] || fail "--replicas $r on $ndev devices: $n notes of a shared device"
  [ $((r * 2)) -le "$ndev" ] || grep -q "^pprt: note: replica 2's stage 0 shares $be device 0 with replica 0's stage 0" \
    "log$r.txt" || fail "--replicas $r: the shared device's note: $(grep 'shares' "log$r.txt")"
  "$PY" -c "import json, sys; j = json.load(open('s$r.json')); sys.exit(0 if j['replicas'] == $r else j['replicas'])" ||
    fail "--replicas $r: --stats-json"
  echo "ok: inference --replicas $r: the bytes of one replica, replica k's stages on devices 2k, 2k + 1 (mod $ndev)"
done
if [ "$be" = cuda-emu ]; then
  PPRT_EMU_SMS=3:114 "$PPRT" d2.plan "$S/data" -o odiff --replicas 2 --backend "$be" --stats-json sdiff.json -q \
    2> diff.txt || { cat diff.txt; fail "PPRT_EMU_SMS=3:114: the run failed"; }
  n=$(grep -c "^pprt: warning: stage 1 of replica 1's device (cuda-emu, compute capability 9.0, 114 SMs; .*) differs" \
    diff.txt || true)
  [ "$n" = 1 ] || { cat diff.txt; fail "PPRT_EMU_SMS=3:114: $n warnings naming replica 1's stage 1, expected 1"; }
  "$PY" -c "import json, sys; sys.exit(0 if json.load(open('sdiff.json'))['devices_differ'] is True else 1)" ||
    fail "PPRT_EMU_SMS=3:114: devices_differ is not true"
  ! grep -q warning "log2.txt" || fail "a warning with one kind of device: $(grep warning log2.txt)"
  echo "ok: a replica on another kind of device: one warning naming it, devices_differ true"
fi
# training: each replica's executors step their own copies of the weights on the device optimizer, the
# replicas' gradient sums chained device to device in replica order (train.c thr_chain)
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o t2.plan -q
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --schedule zb-h1 -o tz.plan -q
train() { # PLAN TAG REPLICAS [ARGS...]: digits unless ARGS name other data (--data DIR LABELS)
  local plan=$1 tag=$2 r=$3 data=$S/data labels=$S/labels.npy
  shift 3
  [ "${1:-}" = --data ] && { data=$2 labels=$3; shift 3; }
  "$PPRT" "$plan" "$data" --labels "$labels" --no-shuffle --backend "$be" --replicas "$r" --save-weights "w_$tag" \
    --log-json "l_$tag.json" "$@" > /dev/null 2> "e_$tag.txt" ||
    { cat "e_$tag.txt"; fail "training $tag: the run failed"; }
}
# same ONE MANY OPT: every saved weight and every step's loss (and loss scale) alike; ONE's optimizer the device's
# from step 2, MANY's OPT's (device: from step 2, the sums chained on the devices; host: every step, and why)
same() {
  for f in "w_$1"/*.npy; do
    cmp -s "$f" "w_$2/$(basename "$f")" || fail "$2: weight $(basename "$f") differs from $1's"
  done
  "$PY" - "$@" <<'PY'
import json, sys
one, many, opt = sys.argv[1:4]
a, b = (json.load(open(f"l_{t}.json")) for t in (one, many))
for k in ("loss", "loss_scale", "skipped"):
    la, lb = ([s.get(k) for s in x["steps"]] for x in (a, b))
    if la != lb:
        sys.exit(f"{many}: {k} {lb}, one replica's {la}")
oa, ob = ([s["optimizer"] for s in x["steps"]] for x in (a, b))
if oa[1:] != ["device"] * (len(oa) - 1):
    sys.exit(f"{one}: one replica's optimizer {oa}")
if opt == "device":
    if ob[1:] != ["device"] * (len(ob) - 1) or not b["gradient_chain"].startswith("devices (in process"):
        sys.exit(f"{many}: optimizer {ob}, gradient chain {b['gradient_chain']}, why {b.get('optimizer_why')}")
    # after step 1 each replica uploads what one replica does (nothing, the loss-scale seed where the scale moved,
    # the running statistics): never a trained weight
    ua, ub = ([s["weight_upload_bytes"] for s in x["steps"]] for x in (a, b))
    R = ub[0] // ua[0]
    if not b.get("chain_buckets") or R < 2 or ub != [u * R for u in ua]:
        sys.exit(f"{many}: chain buckets {b.get('chain_buckets')}, uploads {ub}, one replica's {ua}")
elif set(ob) != {"host"} or not b.get("optimizer_why"):
    sys.exit(f"{many}: optimizer {ob}, why {b.get('optimizer_why')}")
PY
}
o=(--steps 4 --optimizer adamw --lr 1e-3 --clip-norm 1)
train t2.plan one4 1 --accumulate 4 "${o[@]}"
train t2.plan r2 2 --accumulate 4 "${o[@]}"
same one4 r2 device
if [ "$quick" = 1 ]; then
  echo "ok: training --replicas 2 (digits, 1F1B): one replica's weights and losses, the sums chained on the devices"
  echo "cuda_replicas: all passed (quick)"
  exit 0
fi
train t2.plan r2host 2 --accumulate 4 "${o[@]}" --host-optimizer
same one4 r2host host
train t2.plan r2g 2 --accumulate 4 "${o[@]}" --schedule gpipe
train t2.plan one4g 1 --accumulate 4 "${o[@]}" --schedule gpipe
same one4g r2g device
train t2.plan one5 1 --accumulate 5 "${o[@]}"
train t2.plan r3 3 --accumulate 5 "${o[@]}" # shares of 1, 2 and 2 micro-batches, replica 2 back on devices 0, 1
same one5 r3 device
PPRT_CHAIN_BUCKET=4096 train t2.plan r3b 3 --accumulate 5 "${o[@]}" # a bucket a weight
same one5 r3b device
if [ "$be" = cuda-emu ]; then # the chain's copies: issued by either side, or staged through pinned memory
  for peer in "2>0,1>3" none; do
    PPRT_EMU_PEER=$peer train t2.plan "r2p_${peer//[^a-z0-9]/_}" 2 --accumulate 4 "${o[@]}"
    same one4 "r2p_${peer//[^a-z0-9]/_}" device
  done
fi
train tz.plan onez 1 --accumulate 4 "${o[@]}" --schedule zb-h1
train tz.plan r2z 2 --accumulate 4 "${o[@]}" --schedule zb-h1
same onez r2z device
for f in w_onez/*.npy; do cmp -s "$f" "w_one4/$(basename "$f")" || fail "zb-h1's weights differ from 1F1B's"; done
for k in 0 1; do # stage 4 (a W stage) is device 0's: replica k's device 0 is 2k
  grep -q "^pprt: stage 4 (a W stage) of replica $k on $be device $((2 * k % ndev)), beside its backward stage 3" \
    e_r2z.txt || fail "zb-h1 --replicas 2: replica $k's W stage not on device $((2 * k)): $(grep 'W stage' e_r2z.txt)"
done
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --precision fp16 --loss-scale dynamic \
  -o th.plan -q
"$PY" "$SRC/tests/tools/export_resnet18.py" r18.onnx --batch 2 --size 32 --samples 8 --data rdata \
  --labels rlabels.npy 2> /dev/null
"$PPCC" r18.onnx --train --loss cross-entropy:logits -b 2 -pp 2 -o r2.plan -q
h=(--steps 12 --accumulate 2 --optimizer sgd --lr 0.01 --momentum 0.9 --loss-scale dynamic:1073741824
   --loss-scale-interval 3)
train th.plan oneh 1 "${h[@]}"
train th.plan r2h 2 "${h[@]}"
same oneh r2h device
"$PY" -c "import json, sys; sys.exit(0 if any(s['skipped'] for s in json.load(open('l_r2h.json'))['steps']) else 1)" ||
  fail "fp16 from 2^30: no step skipped"
r=(--data rdata rlabels.npy --steps 2 --accumulate 4 --optimizer sgd --lr 0.05 --momentum 0.9 --clip-norm 1)
train r2.plan oner 1 "${r[@]}"
train r2.plan r2r 2 "${r[@]}"
same oner r2r device
# held-out data after each epoch (--eval) between the chain's steps: one replica's losses and accuracies
mkdir -p ev && cp "$S/data/input.npy" ev/ && cp "$S/labels.npy" ev/labels.npy
train t2.plan onee 1 --accumulate 4 "${o[@]/#4/24}" --eval ev
train t2.plan r2e 2 --accumulate 4 "${o[@]/#4/24}" --eval ev
same onee r2e device
"$PY" -c "
import json, sys
a, b = (json.load(open(f'l_{t}.json'))['epochs'] for t in ('onee', 'r2e'))
sys.exit(0 if a == b and len(a) >= 2 else f'--eval: {b}, one replica: {a}')" || fail "--eval under the chain"
# a checkpoint under the chain, resumed: the unbroken run's weights
train t2.plan ck 2 --accumulate 4 "${o[@]/#4/2}" --checkpoint ck --save-every 2
train t2.plan resumed 2 --accumulate 4 "${o[@]}" --resume ck
for f in w_r2/*.npy; do
  cmp -s "$f" "w_resumed/$(basename "$f")" || fail "--resume under the chain: $(basename "$f")"
done
echo "ok: training --replicas 2 and 3 (1F1B, GPipe, zb-h1, fp16 with skipped steps, ResNet-18's running statistics, --eval," \
  "a checkpoint resumed): one replica's weights and losses, the device optimizer stepping every replica's copy"
# a stage failing mid-step while the chain's thread waits (a Gather index out of range in replica 0's micro-batch,
# then in replica 1's): its own message, exit 2, at once
"$PY" - <<'PY'
import os
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
rng = np.random.default_rng(0)
inits = [nh.from_array(rng.standard_normal((20, 8)).astype(np.float32), "E"),
         nh.from_array((rng.standard_normal((8, 10)) * 0.3).astype(np.float32), "W"),
         nh.from_array(np.array([1], np.int64), "ax")]
nodes = [h.make_node("Gather", ["E", "ids"], ["e"]), h.make_node("ReduceMean", ["e", "ax"], ["m"], keepdims=0),
         h.make_node("MatMul", ["m", "W"], ["logits"])]
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, ["N", 4])],
                 [h.make_tensor_value_info("logits", T.FLOAT, ["N", 10])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), "gather.onnx")
np.save("glabels.npy", rng.integers(0, 10, 40).astype(np.int64))
for bad in (22, 35):  # step 2's micro-batch 0 (replica 0's) and 3 (replica 1's)
    ids = rng.integers(0, 20, (40, 4)).astype(np.int64)
    ids[bad, 2] = 25
    os.makedirs(f"gdata{bad}", exist_ok=True)
    np.save(f"gdata{bad}/ids.npy", ids)
PY
"$PPCC" gather.onnx --train --loss cross-entropy:logits -b 4 -pp 2 -o g.plan -q
for bad in 22 35; do
  set +e
  timeout 60 "$PPRT" g.plan gdata$bad --labels glabels.npy --steps 2 --accumulate 5 --no-shuffle --backend "$be" \
    --replicas 2 --optimizer sgd --lr 0.1 -q 2> gbad$bad.txt
  rc=$?
  set -e
  [ $rc = 2 ] && grep -q "micro-batch .*'Gather_0' (Gather): an index is out of range" gbad$bad.txt ||
    fail "a Gather failing in step 2 (sample $bad): exit $rc$([ $rc = 124 ] && echo ' (a hang)'): $(cat gbad$bad.txt)"
done
echo "ok: a stage failing mid-step under the chain (either replica): exit 2 with its message, no hang"
echo "cuda_replicas: all passed"
