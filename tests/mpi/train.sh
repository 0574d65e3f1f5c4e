#!/usr/bin/env bash
# Training on MPI ranks (pprt --steps under mpirun, runtime/comm/train_mpi.c),
# on localhost, with the digits sample's network trained as ppcc --train
# compiles it (-b 8, -pp 2; -pp 3 for the kill):
#   - -np 2 (2 devices) and -np 4 (2 devices x --replicas 2), under 1F1B and
#     GPipe, AdamW and SGD with momentum: the saved weights byte-identical
#     to the threaded run of the same plan and options (cmp of every .npy),
#     and the per-step losses of --log-json equal to the threaded run's; at
#     -np 2 each device's stash counts (stash_peak, stash_bytes, held_peak)
#     in rank 0's log the threaded run's;
#   - --eval: the held-out loss and accuracy equal to the threaded run's;
#   - zb-h1 plans (a W stage per device, run on its rank) under --schedule
#     zb-h1 and 1f1b, -pp 2 at -np 2 and 4 and -pp 4 at -np 4: the threaded
#     run's bits and losses, the stash and W-keep counts within the schedule's;
#   - executors kept across steps (the default) against PPRT_TRAIN_FRESH=1 on
#     dnnl at -np 4: the same bits;
#   - --checkpoint/--save-every then --resume under mpirun: the weights of
#     an unbroken run; files written by rank 0 only (no DIR.tmp left);
#   - --profile gathered to rank 0 (every node of the four stages timed,
#     each stage within its rank's busy time; ppcc --train --profile takes
#     it), and --trace (the last step's timeline: a track per stage named by
#     its rank, each micro-batch in the stages' order);
#   - refusals, exit 2 on every rank, naming the culprit: -np that is not
#     devices x replicas, another plan on one rank, another --accumulate on
#     one rank, --replicas above --accumulate;
#   - a rank killed mid-training (tests/mpi/kill.sh on a -pp 3 plan), with
#     mpirun ending the job and with pprt's own heartbeats finding it.
# Built without MPI: skipped (exit 77; tests/mpi/run.sh checks the refusal).
#
# usage: train.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC, PP_MPI=ON|OFF, MPIRUN)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
. "$SRC/tests/mpi/common.sh"
mpi_require mpi_train
mpi_env
BK=()
"$PPRT" --help > help.txt
grep -q -- --backend help.txt && BK=(--backend ref)

checks=0

"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 -o t2.plan -q
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 3 -o t3.plan -q
# held-out data: the last 80 samples
"$PY" -c "
import numpy as np, os
x = np.load('$S/data/input.npy'); y = np.load('$S/labels.npy')
os.makedirs('held', exist_ok=True); np.save('held/input.npy', x[-80:]); np.save('held/labels.npy', y[-80:])"
base=(--labels "$S/labels.npy" --accumulate 4 --seed 3 "${BK[@]}" -q)
common=("${base[@]}" --steps 6)

for sched in 1f1b gpipe; do
  for opt in "--optimizer adamw --lr 2e-3 --weight-decay 0.01" "--optimizer sgd --lr 0.05 --momentum 0.9"; do
    read -r -a o <<< "$opt"
    tag=$sched-${o[1]}
    expect_rc 0 th-$tag.txt "$PPRT" t2.plan "$S/data" "${common[@]}" --schedule $sched "${o[@]}" --eval held \
      --save-weights th-$tag --log-json th-$tag.json
    for np_ in 2 4; do
      reps=$((np_ / 2))
      expect_rc 0 mpi$np_-$tag.txt "${M[@]}" -np $np_ "$PPRT" t2.plan "$S/data" "${common[@]}" --schedule $sched \
        "${o[@]}" --eval held --replicas $reps --save-weights mpi$np_-$tag --log-json mpi$np_-$tag.json
      same_dirs th-$tag mpi$np_-$tag
      same_losses th-$tag.json mpi$np_-$tag.json
    done
    # each device's stash at -np 2 (gathered to rank 0's log since 2026-12-05; 0 before): the threads' counts
    "$PY" - th-$tag.json mpi2-$tag.json << 'PYEND'
import json, sys
a, b = ([(s["stash_peak"], s["stash_bytes"], s["held_peak"]) for s in json.load(open(f))["stash"]] for f in sys.argv[1:3])
assert a == b and all(p > 0 and n > 0 for p, n, _ in a), (a, b)
PYEND
    checks=$((checks + 1))
  done
done
echo "mpi_train: -np 2 and -np 4 (--replicas 2), 1F1B and GPipe, AdamW and SGD: weights and losses bit-identical to threads, the stash counts of -np 2 the threads'"

# executors kept across the steps (runtime/keep.h; each rank reloads its two after rank 0's weights come) against
# executors made every step (PPRT_TRAIN_FRESH=1), on oneDNN, whose reordered weights must follow the updates
if "$PPRT" --backend list 2>&1 | grep -q "^dnnl "; then
  kf=("${common[@]}" --backend dnnl --threads 1 --optimizer adamw --lr 2e-3 --eval held --replicas 2)
  expect_rc 0 keep.txt "${M[@]}" -np 4 -x PPRT_TRAIN_FRESH=0 "$PPRT" t2.plan "$S/data" "${kf[@]}" --save-weights keep \
    --log-json keep.json
  expect_rc 0 fresh.txt "${M[@]}" -np 4 -x PPRT_TRAIN_FRESH=1 "$PPRT" t2.plan "$S/data" "${kf[@]}" --save-weights fresh \
    --log-json fresh.json
  same_dirs keep fresh
  same_losses keep.json fresh.json
  echo "mpi_train: executors kept across steps under mpirun (dnnl, -np 4): the bits of executors made every step"
fi

# -pp 1 on 2 ranks (--replicas 2, each rank its replica's one device): the -pp 2 threaded run's bits
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 1 -o t1.plan -q
expect_rc 0 p1.txt "${M[@]}" -np 2 "$PPRT" t1.plan "$S/data" "${common[@]}" --optimizer adamw --lr 2e-3 \
  --weight-decay 0.01 --eval held --replicas 2 --save-weights p1-mpi
same_dirs th-1f1b-adamw p1-mpi
echo "mpi_train: -pp 1 x --replicas 2 on 2 ranks: the bits of -pp 2 on threads"

# BatchNorm in training mode: the running statistics' folds go round the replicas with the gradients
"$PY" - << 'PYEOF'
import torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1, s.b1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8)
        s.c2, s.b2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
        s.fc = nn.Linear(16, 10)
    def forward(s, x):
        x = torch.relu(s.b1(s.c1(x)))
        x = torch.relu(s.b2(s.c2(x)))
        return s.fc(x.mean((2, 3)))
torch.onnx.export(Net().train(), (torch.zeros(8, 1, 8, 8),), "bn.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
PYEOF
"$PPCC" bn.onnx --train --loss cross-entropy:logits -b 8 -pp 2 -o bn.plan -q
bn=(--labels "$S/labels.npy" --accumulate 3 --seed 3 --steps 6 "${BK[@]}" -q --optimizer sgd --lr 0.05 --momentum 0.9)
expect_rc 0 bn-th.txt "$PPRT" bn.plan "$S/data" "${bn[@]}" --save-weights bn-th
expect_rc 0 bn-mpi.txt "${M[@]}" -np 4 "$PPRT" bn.plan "$S/data" "${bn[@]}" --replicas 2 --save-weights bn-mpi
same_dirs bn-th bn-mpi
ls bn-mpi | grep -q running_mean || { echo "FAIL: no running statistics among the trained weights"; ls bn-mpi; exit 1; }
echo "mpi_train: BatchNorm's running statistics, 3 micro-batches over 2 replicas at -np 4: bit-identical to threads"

# the ranks' busy time reaches rank 0's log: every stage busy each step, the devices' idle share between 0 and 1
# (0 and all-zero busy times before 2026-12-05), the bubble line printed
expect_rc 0 busy.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" --labels "$S/labels.npy" --accumulate 4 --seed 3 \
  --steps 3 "${BK[@]}" --replicas 2 --log-json busy.json
grep -q "^bubble: [0-9.]*% of the devices' time idle" busy.txt || { echo "FAIL: no bubble line: $(cat busy.txt)"; exit 1; }
"$PY" - busy.json << 'PYEND'
import json, sys
log = json.load(open(sys.argv[1]))
for s in log["steps"]:
    assert len(s["stage_busy_s"]) == 4 and all(b > 0 for b in s["stage_busy_s"]) and 0 < s["bubble"] < 1, s
assert 0 < log["bubble"] < 1, log["bubble"]
PYEND
checks=$((checks + 2))
echo "mpi_train: -np 4 --replicas 2: every stage's busy time and the idle share in rank 0's log"

# pprt --profile under mpirun (each rank's two stages' node times, gathered to rank 0 at the end): every node of the
# four stages timed, each stage's nodes no more than the busy time its rank measured in the steps after the first
# (--log-json's stage_busy_s, an independent clock), ppcc --train --profile prices every op by it
expect_rc 0 prof.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" --labels "$S/labels.npy" --accumulate 4 --seed 3 \
  --steps 4 "${BK[@]}" --replicas 2 --log-json prof_log.json --profile prof.json
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --dump-ir -o /dev/null > t2_ir.txt
"$PY" - prof.json prof_log.json t2_ir.txt << 'PYEND'
import json, sys
prof = json.load(open(sys.argv[1]))["nodes"]
steps = json.load(open(sys.argv[2]))["steps"]
stage = {}
for ln in open(sys.argv[3]):
    f = ln.split()
    if len(f) > 2 and f[0].startswith("%") and f[1][0] == "s" and "name=" in ln:
        stage[ln.rsplit("name=", 1)[1].strip()] = int(f[1][1:].rstrip("W"))
missing = [n for n in stage if n not in prof]
assert stage and not missing, f"{len(missing)} of {len(stage)} nodes untimed: {missing[:4]}"
# 4 micro-batches a step over 2 replicas: 2 a rank
busy = [sum(s["stage_busy_s"][v] for s in steps[1:]) / (2 * (len(steps) - 1)) * 1e3 for v in range(4)]
for v in range(4):
    got = sum(ms for n, ms in prof.items() if stage.get(n) == v)
    assert 0 < got <= 1.1 * busy[v] + 0.05, f"stage {v}: its nodes {got:.3f} ms a micro-batch, busy {busy[v]:.3f} ms"
PYEND
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --profile prof.json --report -o prof.plan > prof_rep.txt
grep -q "op times: \([0-9]*\) of \1 ops measured" prof_rep.txt || { echo "FAIL: ppcc --train --profile: $(grep 'op times' prof_rep.txt)"; exit 1; }
# --trace under mpirun: the last step's timeline of replica 0's ranks on rank 0's clock, a track per stage named by
# its rank, each with that replica's 2 micro-batches, every micro-batch later on each next stage than on the one
# before it (forward 0 -> 1, then backward 2 -> 3)
expect_rc 0 trace.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" --labels "$S/labels.npy" --accumulate 4 --seed 3 \
  --steps 3 "${BK[@]}" --replicas 2 -q --trace trace.json
"$PY" - trace.json << 'PYEND'
import json, sys
tr = json.load(open(sys.argv[1]))
ev = tr["traceEvents"] if isinstance(tr, dict) else tr
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
want = {0: "rank 0: stage 0", 1: "rank 1: stage 1", 2: "rank 1: stage 2", 3: "rank 0: stage 3"}
assert sorted(names.values()) == sorted(want.values()), names
start = {}
for e in ev:
    if e.get("ph") == "X" and str(e.get("name", "")).startswith("micro-batch "):
        stage = [k for k, v in want.items() if v == names[e["tid"]]][0]
        start[(stage, int(e["name"].split()[1]))] = e["ts"]
assert sorted(start) == [(s, j) for s in range(4) for j in range(2)], sorted(start)
for j in range(2):
    for s in range(3):
        assert start[(s + 1, j)] > start[(s, j)], (j, s, start)
PYEND
checks=$((checks + 4))
echo "mpi_train: --profile and --trace at -np 4 --replicas 2: every node of the 4 stages timed on its rank, the last step's timeline, gathered to rank 0"

# --recompute all (each backward stage computes its forward again) under --schedule flow: the same bits
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --recompute all -o t2r.plan -q
expect_rc 0 rc-th.txt "$PPRT" t2r.plan "$S/data" "${common[@]}" --schedule flow --optimizer adamw --lr 2e-3 \
  --save-weights rc-th
expect_rc 0 rc-mpi.txt "${M[@]}" -np 4 "$PPRT" t2r.plan "$S/data" "${common[@]}" --schedule flow --optimizer adamw \
  --lr 2e-3 --replicas 2 --save-weights rc-mpi
same_dirs rc-th rc-mpi
echo "mpi_train: a --recompute all plan under --schedule flow at -np 4: bit-identical to threads"

# ZB-H1 plans (ppcc --train --schedule zb-h1: each device's backward split into B and a W stage; under mpirun
# the W stage runs on a third thread of its device's rank, through the gate, on what B kept for it): under
# --schedule zb-h1 and 1f1b (W right after its B), -pp 2 at -np 2 and at -np 4 (--replicas 2), -pp 4 at -np 4:
# the threaded run's weights and losses; the stash and W-keep entries' bytes as on threads, their peaks within
# the schedule's cap; every stage busy on its rank. Until 2026-12-06 the ranks never ran the W stages:
# --schedule 1f1b trained on without the weight gradients (grad norm 0), zb-h1 was refused.
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 2 --schedule zb-h1 -o z2.plan -q
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 8 -pp 4 --schedule zb-h1 -o z4.plan -q
zo=(--optimizer adamw --lr 2e-3 --weight-decay 0.01)
for sched in zb-h1 1f1b; do
  for run in z2:2:1 z2:4:2 z4:4:1; do
    IFS=: read -r plan np_ reps <<< "$run"
    tag=$plan-$sched-r$reps
    expect_rc 0 th-$tag.txt "$PPRT" $plan.plan "$S/data" "${common[@]}" --schedule $sched "${zo[@]}" \
      --replicas $reps --save-weights th-$tag --log-json th-$tag.json
    expect_rc 0 mpi-$tag.txt "${M[@]}" -np $np_ "$PPRT" $plan.plan "$S/data" "${common[@]}" --schedule $sched \
      "${zo[@]}" --replicas $reps --save-weights mpi-$tag --log-json mpi-$tag.json
    same_dirs th-$tag mpi-$tag
    same_losses th-$tag.json mpi-$tag.json
    "$PY" - th-$tag.json mpi-$tag.json << 'PYEND'
import json, sys
t, m = (json.load(open(f)) for f in sys.argv[1:3])
# the peaks are not compared: when a deferred W runs depends on when the next device's messages come
keys = ("stash_peak", "stash_bytes", "held_peak", "w_keep_peak", "w_keep_bytes")
a, b = ([tuple(s[k] for k in keys) for s in d["stash"]] for d in (t, m))
P = len(a)
assert [(x[1], x[4]) for x in a] == [(x[1], x[4]) for x in b], (a, b)
for run in (a, b):
    for d, x in enumerate(run):  # 1F1B's cap: device d holds at most P - d; -pp 4's device 2 has no W node
        assert 1 <= x[0] <= x[2] <= P - d and x[3] <= x[2] and x[1] > 0 and (x[3] > 0) == (x[4] > 0), (d, x, a, b)
assert any(x[4] for x in a), a
# the stash and W's keep share one pool of entries (each the larger size): at most the cap of them for both
for d_ in (t, m):
    for d, x in enumerate(d_["stash"]):
        assert 0 < x["keep_bytes"] <= (P - d) * max(x["stash_bytes"], x["w_keep_bytes"]), (d, x)
for st in m["steps"]:  # forward, backward, then the W stages (busy where they have nodes)
    busy = st["stage_busy_s"]
    assert len(busy) == 3 * P and all(v > 0 for v in busy[:2 * P]), busy
    assert all((busy[2 * P + d] > 0) == (a[d][4] > 0) for d in range(P)), (busy, a)
assert all(s.get("grad_norm", 0) > 0 for s in m["steps"]), m["steps"]
PYEND
    checks=$((checks + 1))
  done
done
echo "mpi_train: zb-h1 plans under --schedule zb-h1 and 1f1b at -np 2, -np 4 (--replicas 2, and -pp 4): bit-identical to threads, the W stages run on their ranks"

# oneDNN, one thread per stage in both runs (its results may depend on the threads): the same bits
"$PPRT" --backend list > backends.txt
if grep -q '^dnnl ' backends.txt; then
  dn=(--labels "$S/labels.npy" --accumulate 4 --seed 3 --steps 6 --backend dnnl --threads 1 -q --optimizer adamw --lr 2e-3)
  expect_rc 0 dn-th.txt "$PPRT" t2.plan "$S/data" "${dn[@]}" --save-weights dn-th
  expect_rc 0 dn-mpi.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${dn[@]}" --replicas 2 --save-weights dn-mpi
  same_dirs dn-th dn-mpi
  echo "mpi_train: --backend dnnl --threads 1 at -np 4: bit-identical to threads"
fi

# checkpoints under mpirun: 3 steps, then --resume to 6, as an unbroken run
adam=(--optimizer adamw --lr 2e-3)
expect_rc 0 ck1.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${base[@]}" --steps 3 "${adam[@]}" --replicas 2 \
  --checkpoint ck --save-every 2
[ -f ck/state.json ] && [ ! -e ck.tmp ] || { echo "FAIL: no whole checkpoint ck"; ls -la; exit 1; }
expect_rc 0 ck2.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${common[@]}" "${adam[@]}" --replicas 2 --resume ck \
  --save-weights resumed
expect_rc 0 ck3.txt "$PPRT" t2.plan "$S/data" "${common[@]}" "${adam[@]}" --save-weights unbroken
same_dirs unbroken resumed
echo "mpi_train: --checkpoint then --resume under mpirun: the unbroken run's weights"
# --checkpoint naming a file: rank 0 refuses it before the first step, every rank ends (exit 2), the file untouched
echo mine > ckfile
expect_rc 2 ckf.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${base[@]}" --steps 3 "${adam[@]}" --replicas 2 \
  --checkpoint ckfile --save-every 2
expect_msg ckf.txt "'ckfile' is a regular file, not a checkpoint's folder"
[ "$(cat ckfile)" = mine ] && [ ! -e ckfile.old ] || { echo "FAIL: --checkpoint moved or changed the file ckfile"; exit 1; }

# refusals: every rank exits 2, naming the culprit
expect_rc 2 e1.txt "${M[@]}" -np 3 "$PPRT" t2.plan "$S/data" "${common[@]}"
expect_msg e1.txt "2 devices and --replicas is 1, so mpirun -np must be 2"
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 4 -pp 2 -o t2b.plan -q
expect_rc 2 e2.txt "${M[@]}" -np 1 "$PPRT" t2.plan "$S/data" "${common[@]}" : -np 1 "$PPRT" t2b.plan "$S/data" "${common[@]}"
expect_msg e2.txt "loaded a different plan file than rank 0"
expect_rc 2 e3.txt "${M[@]}" -np 1 "$PPRT" t2.plan "$S/data" "${common[@]}" : -np 1 "$PPRT" t2.plan "$S/data" \
  "${common[@]}" --accumulate 2
expect_msg e3.txt "trains with another --accumulate than rank 0"
expect_rc 2 e3s.txt "${M[@]}" -np 1 "$PPRT" t2.plan "$S/data" "${common[@]}" : -np 1 "$PPRT" t2.plan "$S/data" \
  "${common[@]}" --loss-scale 8
expect_msg e3s.txt "trains with another --loss-scale than rank 0"
expect_rc 2 e3d.txt "${M[@]}" -np 1 "$PPRT" t2.plan "$S/data" "${common[@]}" --loss-scale dynamic:8 : -np 1 "$PPRT" \
  t2.plan "$S/data" "${common[@]}" --loss-scale dynamic:8 --loss-scale-interval 3
expect_msg e3d.txt "trains with another loss scale rule than rank 0"
expect_rc 2 e4.txt "${M[@]}" -np 4 "$PPRT" t2.plan "$S/data" "${common[@]}" --accumulate 1 --replicas 2
expect_msg e4.txt "--replicas 2: each replica takes whole micro-batches"
checks=$((checks + 10))
echo "mpi_train: refusals (-np, another plan, another --accumulate, --loss-scale or scale rule, --replicas over" \
  "--accumulate): exit 2, named"

# a rank killed mid-training: 3 devices on 3 ranks, long enough to be killed
export KILL_ARGS="--labels $S/labels.npy --steps 100000 ${BK[*]}"
mpi_kill_both "$out/t3.plan" "$S/data" "$out/kill"
checks=$((checks + 2))
echo "mpi_train: $checks checks passed"
