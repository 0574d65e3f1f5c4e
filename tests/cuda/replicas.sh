#!/usr/bin/env bash
# Replicas of device stages on the threaded runtime (pprt --replicas R with
# cuda-emu, no mpirun; runtime/sched.c place_stages): replica k's stages
# take the devices after replica k - 1's (k x the plan's devices + the
# stage's own index, modulo the emulator's 4), as MPI ranks would.
#   - inference, digits at -pp 2: --replicas 1, 2 and 3 (the third replica
#     back on devices 0 and 1) the same bytes, also with the emulator's
#     copies delayed (PPRT_EMU_DELAY_US); the notes name each replica's
#     device and boundary path; --stats-json counts the replicas;
#   - a device of another kind in replica 1 only (PPRT_EMU_SMS=3:114): one
#     warning naming it, "devices_differ" true;
#   - training, digits at -pp 2 (1F1B, GPipe, and a zb-h1 plan whose W
#     stages sit on their replica's backward device), 2 and 3 replicas: every
#     step's loss and the saved weights the bits of one replica (whose device
#     optimizer steps from step 2), the replicas' sums folded on the host in
#     micro-batch order and the host stepping ("optimizer_why" says why).
# About 10 s. usage: replicas.sh WORK_DIR (env: PPCC, PPRT, PY, SRC;
# REPL_BACKEND=cuda runs it on a GPU)
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
for r in 2 3; do
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
# training
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o t2.plan -q
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --schedule zb-h1 -o tz.plan -q
train() { # PLAN TAG REPLICAS ACC [ARGS...]
  local plan=$1 tag=$2 r=$3 acc=$4
  shift 4
  "$PPRT" "$plan" "$S/data" --labels "$S/labels.npy" --steps 4 --accumulate "$acc" --no-shuffle --optimizer adamw \
    --lr 1e-3 --clip-norm 1 --backend "$be" --replicas "$r" --save-weights "w_$tag" --log-json "l_$tag.json" \
    "$@" > /dev/null 2> "e_$tag.txt" || { cat "e_$tag.txt"; fail "training $tag: the run failed"; }
}
same() { # A B: every saved weight and every step's loss alike; B's optimizer the host's, A's the device's from step 2
  for f in "w_$1"/*.npy; do cmp -s "$f" "w_$2/$(basename "$f")" || fail "$2: weight $(basename "$f") differs from $1's"; done
  "$PY" - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(f"l_{t}.json")) for t in sys.argv[1:3])
la, lb = ([s["loss"] for s in x["steps"]] for x in (a, b))
if la != lb:
    sys.exit(f"{sys.argv[2]}: losses {lb}, one replica's {la}")
if [s["optimizer"] for s in a["steps"]][1:] != ["device"] * 3:
    sys.exit(f"{sys.argv[1]}: one replica's optimizer {[s['optimizer'] for s in a['steps']]}")
if {s["optimizer"] for s in b["steps"]} != {"host"} or "--replicas" not in b.get("optimizer_why", ""):
    sys.exit(f"{sys.argv[2]}: optimizer {[s['optimizer'] for s in b['steps']]}, why {b.get('optimizer_why')}")
if b["steps"][-1]["gradient_chain"] != a["steps"][-1]["gradient_chain"]:
    sys.exit(f"{sys.argv[2]}: gradient chain {b['steps'][-1]['gradient_chain']}")
PY
}
train t2.plan one4 1 4
train t2.plan r2 2 4
same one4 r2
train t2.plan one4g 1 4 --schedule gpipe
train t2.plan r2g 2 4 --schedule gpipe
same one4g r2g
train t2.plan one5 1 5
train t2.plan r3 3 5 # shares of 1, 2 and 2 micro-batches
same one5 r3
train tz.plan onez 1 4 --schedule zb-h1
train tz.plan r2z 2 4 --schedule zb-h1
same onez r2z
for k in 0 1; do # stage 4 (a W stage) is device 0's: replica k's device 0 is 2k
  grep -q "^pprt: stage 4 (a W stage) of replica $k on $be device $((2 * k % ndev)), beside its backward stage 3" \
    e_r2z.txt || fail "zb-h1 --replicas 2: replica $k's W stage not on its device $((2 * k)): $(grep 'W stage' e_r2z.txt)"
done
for f in w_onez/*.npy; do cmp -s "$f" "w_one4/$(basename "$f")" || fail "zb-h1's weights differ from 1F1B's"; done
echo "ok: training --replicas 2 and 3 (1F1B, GPipe, zb-h1): the weights and losses of one replica, the host stepping"
echo "cuda_replicas: all passed"
