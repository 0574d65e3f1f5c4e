#!/usr/bin/env bash
# The device optimizer (runtime/dopt.h, issue 56) against the host's update
# (--host-optimizer), without a GPU (cuda-emu runs the kernels' per-thread
# functions, so its bits are the GPU engine's arithmetic):
#   - digits (samples/digits) at -pp 1 and 2: SGD with momentum and clipping
#     over 2 micro-batches, AdamW with clipping over 3; fp16 (--precision
#     fp16) with forced overflows (--loss-scale dynamic:2^30, interval 3:
#     steps skipped, the scale halving and growing, docs/training.md);
#   - torchvision ResNet-18 (random weights, training-mode BatchNorm, 4
#     images of 64x64) at -pp 1 and 2: SGD with momentum and clipping over 2
#     micro-batches (3 steps), AdamW (2 steps);
#   the trained weights the same bytes on the device and on the host, and at
#   -pp 1 and 2; the log says which optimizer stepped (the first step is the
#   host's: the executors exist after it) and the weights uploaded from the
#   host after the first step: none for digits, the fp16 runs' loss-scale
#   seed only (4 bytes a stage reading it) where the scale moved, ResNet-18's
#   BatchNorm running statistics only (their bytes, from the saved weights,
#   once or twice: each stage holding a copy), where the host's path uploads
#   every trained weight each step;
#   - the step's last run folding bucket by bucket (PPRT_EARLY_FOLD=1, the
#     fold of the replicas' chain, train.c dev_chain; one-chunk buckets) on
#     ResNet-18 at -pp 2, digits' AdamW at -pp 1 and fp16 at -pp 2: the
#     whole fold's bits;
#   - a checkpoint written from the device copy and resumed gives the bits
#     of the run not stopped; a stage on the reference kernels
#     (--placement 0:cuda-emu,1:ref) keeps the host's update, and the log
#     says why.
# About 2 minutes on 2 cores. usage: train_dopt.sh WORK_DIR   (env: PPCC,
# PPRT, PY, SRC; TRAIN_BACKEND=cuda runs it on a GPU: tests/cuda/gpu_day.sh)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
S=$SRC/samples/digits
be=${TRAIN_BACKEND:-cuda-emu}
"$PY" "$SRC/tests/tools/export_resnet18.py" r18.onnx --batch 4 --size 64 --samples 8 \
  --data rdata --labels rlabels.npy 2> /dev/null
# run NAME PLAN DATA LABELS ARGS...: on the device optimizer (NAME.dev) and the host's (NAME.host)
run() {
  local name=$1 plan=$2 data=$3 labels=$4; shift 4
  for h in dev host; do
    local a=""; [ $h = host ] && a=--host-optimizer
    "$PPRT" "$plan" "$data" --labels "$labels" --no-shuffle --backend $be --save-weights "$name.$h" \
      --log-json "$name.$h.json" -q $a "$@" 2>"$name.$h.err" || fail "$name ($h): $(tail -2 "$name.$h.err")"
  done
}
for pp in 1 2; do
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp $pp -o d$pp.plan -q
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp $pp --precision fp16 --loss-scale dynamic \
    -o h$pp.plan -q
  "$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 -pp $pp -o r$pp.plan -q
  run dsgd$pp d$pp.plan "$S/data" "$S/labels.npy" --steps 6 --accumulate 2 --optimizer sgd --lr 0.05 --momentum 0.9 \
    --clip-norm 0.5
  run dadam$pp d$pp.plan "$S/data" "$S/labels.npy" --steps 6 --accumulate 3 --optimizer adamw --lr 3e-3 --clip-norm 1
  run dfp16$pp h$pp.plan "$S/data" "$S/labels.npy" --steps 18 --optimizer sgd --lr 0.01 --momentum 0.9 \
    --loss-scale dynamic:1073741824 --loss-scale-interval 3
  run rsgd$pp r$pp.plan rdata rlabels.npy --steps 3 --accumulate 2 --optimizer sgd --lr 0.05 --momentum 0.9 \
    --clip-norm 1
  run radam$pp r$pp.plan rdata rlabels.npy --steps 2 --optimizer adamw --lr 1e-3
done
# the step's last run folding bucket by bucket (PPRT_EARLY_FOLD=1: the fold the replicas' chain uses, here on
# threads with a thread waiting for each bucket; one-chunk buckets): the whole fold's bits
early() {
  local name=$1 plan=$2 data=$3 labels=$4; shift 4
  PPRT_EARLY_FOLD=1 PPRT_CHAIN_BUCKET=4096 "$PPRT" "$plan" "$data" --labels "$labels" --no-shuffle --backend $be \
    --save-weights "$name.early" --log-json "$name.early.json" -q "$@" 2>"$name.early.err" \
    || fail "$name (early fold): $(tail -2 "$name.early.err")"
}
early rsgd2 r2.plan rdata rlabels.npy --steps 3 --accumulate 2 --optimizer sgd --lr 0.05 --momentum 0.9 --clip-norm 1
rm -f r1.plan r2.plan   # ran: 45 MB each
early dadam1 d1.plan "$S/data" "$S/labels.npy" --steps 6 --accumulate 3 --optimizer adamw --lr 3e-3 --clip-norm 1
early dfp162 h2.plan "$S/data" "$S/labels.npy" --steps 18 --optimizer sgd --lr 0.01 --momentum 0.9 \
  --loss-scale dynamic:1073741824 --loss-scale-interval 3
o=(--labels "$S/labels.npy" --accumulate 2 --no-shuffle --optimizer adamw --lr 3e-3 --clip-norm 0.5 --backend $be -q)
"$PPRT" d2.plan "$S/data" "${o[@]}" --steps 3 --checkpoint ck --save-every 3 || fail "the checkpoint run"
"$PPRT" d2.plan "$S/data" "${o[@]}" --steps 6 --resume ck --save-weights resumed || fail "the resumed run"
"$PPRT" d2.plan "$S/data" "${o[@]}" --steps 6 --save-weights whole || fail "the run not stopped"
if [ "$be" = cuda-emu ]; then
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp 2 --placement 0:cuda-emu,1:ref -o m2.plan -q
  "$PPRT" m2.plan "$S/data" --labels "$S/labels.npy" --steps 2 --log-json mixed.json -q || fail "the mixed placement"
fi
"$PY" - "$be" <<'PY' || fail "the device optimizer"
import json, os, sys
import numpy as np
be = sys.argv[1]
bad, said = [], []
def weights(d):
    return {n: np.load(f"{d}/{n}").tobytes() for n in sorted(os.listdir(d))}
def same(a, b, what):
    wa, wb = weights(a), weights(b)
    diff = [n for n in wa if wa[n] != wb.get(n)]
    if not wa or diff or sorted(wa) != sorted(wb): bad.append(f"{what}: {len(diff)} of {len(wa)} weights differ ({diff[:2]})")
for run in ("dsgd", "dadam", "dfp16", "rsgd", "radam"):
    for pp in (1, 2):
        same(f"{run}{pp}.dev", f"{run}{pp}.host", f"{run} -pp {pp}, device against host")
        dev, host = (json.load(open(f"{run}{pp}.{h}.json")) for h in ("dev", "host"))
        opt = [s["optimizer"] for s in dev["steps"]]
        if dev["optimizer"] != "device" or opt[0] != "host" or set(opt[1:]) != {"device"}:
            bad.append(f"{run} -pp {pp}: the device optimizer did not step: {dev['optimizer']} "
                       f"{dev.get('optimizer_why')}, steps {opt}")
        if host["optimizer"] != "host" or host.get("optimizer_why") != "--host-optimizer":
            bad.append(f"{run} -pp {pp} --host-optimizer: {host['optimizer']}, {host.get('optimizer_why')}")
        up = [s["weight_upload_bytes"] for s in dev["steps"][1:]]
        hup = [s["weight_upload_bytes"] for s in host["steps"][1:]]
        if run.startswith("r"):  # the running statistics, re-read after each step (each stage holding a copy)
            want = sum(np.load(f"{run}{pp}.dev/{n}").nbytes for n in os.listdir(f"{run}{pp}.dev") if "running" in n)
            ok = want > 0 and all(u in (want, 2 * want) for u in up)
        elif run == "dfp16":  # the loss-scale seed (4 bytes a stage reading it) where the scale moved
            ok = all(u % 4 == 0 and u <= 16 for u in up) and any(u for u in up)
        else:
            want, ok = 0, all(u == 0 for u in up)
        if not ok: bad.append(f"{run} -pp {pp}: weight bytes uploaded after the first step {up}")
        if min(hup) <= max(up): bad.append(f"{run} -pp {pp}: the host's path uploaded {hup}, the device's {up}")
        if pp == 1: said.append(f"{run} {up[-1]:.0f} B a step (host {hup[-1]:.0f})")
    same(f"{run}1.dev", f"{run}2.dev", f"{run} -pp 1 against -pp 2")
fp = json.load(open("dfp161.dev.json"))
skips = [s["skipped"] for s in fp["steps"]]
scales = [s["loss_scale"] for s in fp["steps"]]
if not any(skips[1:]) or all(skips) or not any(b > a for a, b in zip(scales, scales[1:])):
    bad.append(f"fp16: want overflows skipped on the device path and the scale growing after a clean interval: "
               f"skipped {skips}, scales {scales}")
same("resumed", "whole", "a checkpoint of the device copy resumed")
folds = []
for run in ("rsgd2", "dadam1", "dfp162"):
    same(f"{run}.early", f"{run}.dev", f"{run}: the last run folding by bucket against the whole fold")
    e = json.load(open(f"{run}.early.json"))
    if e.get("chain_buckets", 0) < 2 or e["chain_buckets"] % (len(e["steps"]) - 1):
        bad.append(f"{run}: the early fold waited for {e.get('chain_buckets')} buckets over {len(e['steps'])} steps")
    folds.append(f"{run} {e.get('chain_buckets', 0) // (len(e['steps']) - 1)}")
if be == "cuda-emu":
    m = json.load(open("mixed.json"))
    if m["optimizer"] != "host" or "runs on ref" not in m.get("optimizer_why", ""):
        bad.append(f"a stage on ref: {m['optimizer']}, {m.get('optimizer_why')}")
print(("FAIL " + "; ".join(bad)) if bad else
      f"device optimizer: the host's bits (digits SGD, AdamW, fp16 with {sum(skips)} of {len(skips)} steps skipped; "
      f"ResNet-18 SGD, AdamW) at -pp 1 and 2, the same across them; weights uploaded after step 1: {'; '.join(said)}; "
      f"the last run folding by bucket (buckets a step: {', '.join(folds)}): the same bits")
sys.exit(1 if bad else 0)
PY
