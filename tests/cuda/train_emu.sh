#!/usr/bin/env bash
# Training on the CUDA step list, without a GPU (cuda-emu; issue "Training on
# GPUs"): the backward ops on their CUDA steps (pp.ConvGradX and
# pp.ConvGradW as cuDNN's backward data and backward filter, pp.UnaryGrad,
# pp.BatchNormGrad, pp.MaxPoolGrad and the training-mode BatchNormalization
# as own kernels), so a GPU runs the same step list:
#   - digits (samples/digits) and torchvision ResNet-18 (random weights,
#     exported in training mode, the same 4 images of 64x64 each step, as
#     tests/train/models.py) at -pp 1 and 2: no node of any stage on the
#     host fallback (--cuda-explain);
#   - 20 AdamW steps of digits and 3 SGD steps of ResNet-18 with momentum:
#     the trained weights the same bits at -pp 1 and 2; digits within 1e-5
#     (relative, in norm) of the reference kernels' weights; ResNet-18's
#     losses within 1e-3 (relative) of the reference's at each step
#     (measured 1.5e-5; with random weights its BatchNorms sit at ReLU kinks
#     where the convolutions' sum order can move a mask, tests/train/models.py,
#     so weights are not compared after steps; one step's gradients are,
#     there: 1.2e-5 from PyTorch's);
#   - a small net exported at opset 17 whose backward has the December
#     kernels (pp.InstanceNormGrad, pp.ResizeGrad of a bilinear upsampling,
#     pp.SliceGrad of a stepped Slice, pp.LayerNormGrad): no host step, a
#     step of each kind on the list, 3 SGD steps the same bits at -pp 1, 2
#     and within 1e-5 (in norm) of the reference's weights.
#   - zb-h1 plans (the W stages on their backward stage's device) of digits
#     and ResNet-18 at -pp 2: -pp 1's bits, no node on the host;
#   - executors kept across steps (runtime/keep.h) give the bits of executors
#     made every step (PPRT_TRAIN_FRESH=1); after the first step none is
#     made, and after the second no CUDA graph is captured.
# About 30 s. usage: train_emu.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC;
# TRAIN_BACKEND=cuda runs it on a GPU: tests/cuda/gpu_day.sh part 2t)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
S=$SRC/samples/digits
be=${TRAIN_BACKEND:-cuda-emu}
"$PY" - 2>/dev/null <<'PY'
import numpy as np, torch, torchvision
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10).train()
x = torch.randn(4, 3, 64, 64)
import inspect
# torch 2.9+ (the GPU machine's) exports through dynamo by default: the TorchScript exporter, as torch 1.13's
kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
torch.onnx.export(net, (x,), "r18.onnx", input_names=["input"], output_names=["logits"], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "b"}, "logits": {0: "b"}}, **kw)
import os
os.makedirs("rdata", exist_ok=True)
rng = np.random.default_rng(1)
a = rng.standard_normal((4, 3, 64, 64)).astype(np.float32)
np.save("rdata/input.npy", np.concatenate([a] * 3))
np.save("rlabels.npy", np.concatenate([rng.integers(0, 10, 4)] * 3).astype(np.int64))
# the gradient ops of the December kernels: InstanceNorm, a bilinear upsampling (two axes), a Slice with steps,
# LayerNormalization (opset 17)
import torch.nn as nn
class Net17(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.fc = nn.Linear(8 * 8 * 8, 32)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)
    def forward(self, x):
        x = torch.relu(self.inorm(self.conv(x)))
        x = nn.functional.interpolate(x, scale_factor=2, mode="bilinear")[:, :, ::2, 1::2]
        return self.head(self.norm(self.fc(x.flatten(1))))
torch.manual_seed(3)
torch.onnx.export(Net17().train(), (torch.randn(4, 3, 8, 8),), "n17.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, **kw)
os.makedirs("ndata", exist_ok=True)
np.save("ndata/input.npy", np.concatenate([rng.standard_normal((4, 3, 8, 8)).astype(np.float32)] * 3))
np.save("nlabels.npy", np.concatenate([rng.integers(0, 10, 4)] * 3).astype(np.int64))
PY
no_host() { # LOG: every stage line of --cuda-explain says 0 on the host
  grep -q "steps a micro-batch" "$1" || fail "$1: no --cuda-explain summary"
  ! grep "steps a micro-batch" "$1" | grep -qv " 0 on the host" || fail "nodes on the host: $(grep -v ' 0 on the host' "$1" | grep 'steps a micro' | head -2)"
}
for pp in 1 2; do
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp $pp -o d$pp.plan -q
  "$PPRT" d$pp.plan "$S/data" --labels "$S/labels.npy" --steps 20 --no-shuffle --optimizer adamw --lr 3e-3 \
    --backend $be --cuda-explain --save-weights demu$pp 2>dlog$pp.txt >/dev/null || fail "digits -pp $pp: $(tail -2 dlog$pp.txt)"
  no_host dlog$pp.txt
  "$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 -pp $pp -o r$pp.plan -q
  "$PPRT" r$pp.plan rdata --labels rlabels.npy --steps 3 --no-shuffle --optimizer sgd --lr 0.05 --momentum 0.9 \
    --backend $be --cuda-explain --save-weights remu$pp --log-json rlog$pp.json 2>rerr$pp.txt >/dev/null \
    || fail "ResNet-18 -pp $pp: $(tail -2 rerr$pp.txt)"
  no_host rerr$pp.txt
  "$PPCC" n17.onnx --train --loss cross-entropy:logits -b 4 -pp $pp -o n$pp.plan -q
  "$PPRT" n$pp.plan ndata --labels nlabels.npy --steps 3 --no-shuffle --optimizer sgd --lr 0.05 --momentum 0.9 \
    --backend $be --cuda-explain --save-weights nemu$pp --log-json nlog$pp.json 2>nerr$pp.txt >/dev/null \
    || fail "the opset-17 net -pp $pp: $(tail -2 nerr$pp.txt)"
  no_host nerr$pp.txt
  for k in "normalization gradient" "slice gradient" "resize gradient"; do
    grep -q "$k" nerr$pp.txt || fail "the opset-17 net -pp $pp: no $k step"
  done
done
# --schedule zb-h1 (each device's backward split into B and a W stage, the W stage on B's device: its
# backend, memory and device optimizer): digits and ResNet-18 at -pp 2 give -pp 1's bits, no node on the host,
# each W stage placed beside its backward stage and busy, the optimizer on the devices
"$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp 2 --schedule zb-h1 -o dz.plan -q
"$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 -pp 2 --schedule zb-h1 -o rz.plan -q
"$PPRT" dz.plan "$S/data" --labels "$S/labels.npy" --steps 20 --no-shuffle --optimizer adamw --lr 3e-3 \
  --backend $be --schedule zb-h1 --cuda-explain --save-weights demuz --log-json dlogz.json 2>dlogz.txt >/dev/null \
  || fail "digits zb-h1: $(tail -2 dlogz.txt)"
"$PPRT" rz.plan rdata --labels rlabels.npy --steps 3 --no-shuffle --optimizer sgd --lr 0.05 --momentum 0.9 \
  --backend $be --schedule zb-h1 --cuda-explain --save-weights remuz --log-json rlogz.json 2>rerrz.txt >/dev/null \
  || fail "ResNet-18 zb-h1: $(tail -2 rerrz.txt)"
for log in dlogz.txt rerrz.txt; do
  no_host $log
  for sb in 4:3 5:2; do
    grep -q "stage ${sb%:*} (a W stage) on .*, beside its backward stage ${sb#*:}" $log \
      || fail "$log: W stage ${sb%:*} not placed beside stage ${sb#*:}: $(grep 'a W stage' $log)"
  done
done
"$PY" - <<'PY' || fail "zb-h1 on $be"
import json, os, sys
import numpy as np
bad = []
for a, b, log in (("demu1", "demuz", "dlogz.json"), ("remu1", "remuz", "rlogz.json")):
    names = sorted(os.listdir(a))
    diff = [n for n in names if np.load(os.path.join(a, n)).tobytes() != np.load(os.path.join(b, n)).tobytes()]
    if diff or names != sorted(os.listdir(b)):
        bad.append(f"{b}: {len(diff)} of {len(names)} tensors differ from -pp 1's: {diff[:3]}")
    d = json.load(open(log))
    busy = [s["stage_busy_s"] for s in d["steps"]]
    if d["optimizer"] != "device" or any(len(x) != 6 or min(x[4:]) <= 0 for x in busy):
        bad.append(f"{log}: optimizer {d['optimizer']}, the stages' busy seconds {busy[-1]} (6, the W stages busy)")
    if not all(s["w_keep_bytes"] > 0 for s in d["stash"]):
        bad.append(f"{log}: what B keeps for W: {d['stash']}")
print(("FAIL " + "; ".join(bad)) if bad else "zb-h1: digits and ResNet-18 at -pp 2 with their W stages on the "
      "devices: -pp 1's bits, the optimizer on the devices")
sys.exit(1 if bad else 0)
PY
# executors kept across steps (runtime/keep.h) against executors made every step (PPRT_TRAIN_FRESH=1): the same
# bits; after the first step no executor is made (so no cuDNN graph planned, no weight space allocated) and from
# the third no CUDA graph captured (the links' device messages come back at the same addresses, pool.h; the
# second step still captures the pairs of messages the first one's eager runs had not met); made afresh, every
# step captures again
for f in 0 1; do
  PPRT_TRAIN_FRESH=$f "$PPRT" d2.plan "$S/data" --labels "$S/labels.npy" --steps 6 --accumulate 4 --no-shuffle \
    --optimizer adamw --lr 3e-3 --backend $be --save-weights keep$f --log-json keep$f.json -q 2>keep$f.txt \
    || fail "digits -pp 2, PPRT_TRAIN_FRESH=$f: $(tail -2 keep$f.txt)"
done
"$PY" - <<'PY' || fail "kept executors"
import json, os, sys
import numpy as np
k, f = (json.load(open(f"keep{i}.json"))["steps"] for i in (0, 1))
names = sorted(os.listdir("keep0"))
diff = [n for n in names if np.load(f"keep0/{n}").tobytes() != np.load(f"keep1/{n}").tobytes()]
made, fmade = [s["executors_created"] for s in k], [s["executors_created"] for s in f]
caps, fcaps = [s["graph_captures"] for s in k], [s["graph_captures"] for s in f]
bad = []
if diff or names != sorted(os.listdir("keep1")) or not names: bad.append(f"weights differ: {diff[:3]}")
if made != [4, 0, 0, 0, 0, 0] or fmade != [4] * 6: bad.append(f"executors made a step: kept {made}, fresh {fmade}")
# under AddressSanitizer the pool keeps no block (pool.h), so the messages' addresses change and graphs are captured
if (any(caps[2:]) and "ASAN_OPTIONS" not in os.environ) or min(fcaps) < 1:
    bad.append(f"graph captures a step: kept {caps}, fresh {fcaps}")
print(("FAIL " + "; ".join(bad)) if bad else f"kept executors: the bits of fresh ones; executors made {made}, "
      f"graphs captured {caps} a step (fresh: {fcaps})")
sys.exit(1 if bad else 0)
PY
# the first step's executors say where each stage runs and what went to the host, the later steps nothing;
# a device's forward and backward stages share its GPU (-pp 2: stages 0 and 3 on device 0, 1 and 2 on 1)
"$PPRT" d2.plan "$S/data" --labels "$S/labels.npy" --steps 3 --backend $be --cuda-host-ops pp.UnaryGrad \
  2>notes.txt >/dev/null || fail "digits with --cuda-host-ops pp.UnaryGrad: $(tail -2 notes.txt)"
n=$(grep -c "on the host fallback" notes.txt)
[ "$n" = 2 ] || fail "3 steps with the activation gradients on the host: $n notes of host fallbacks, want 2 (a stage each of the first step): $(cat notes.txt)"
if [ "$be" = cuda-emu ]; then
  for sd in 0:0 3:0 1:1 2:1; do
    grep -q "stage ${sd%:*} on cuda-emu device ${sd#*:}:" notes.txt || fail "stage ${sd%:*} not on device ${sd#*:}: $(grep 'on cuda-emu device' notes.txt)"
  done
fi
"$PPRT" d1.plan "$S/data" --labels "$S/labels.npy" --steps 20 --no-shuffle --optimizer adamw --lr 3e-3 --backend ref \
  --save-weights dref -q
"$PPRT" r1.plan rdata --labels rlabels.npy --steps 3 --no-shuffle --optimizer sgd --lr 0.05 --momentum 0.9 \
  --backend ref --save-weights rref --log-json rlogref.json -q
"$PPRT" n1.plan ndata --labels nlabels.npy --steps 3 --no-shuffle --optimizer sgd --lr 0.05 --momentum 0.9 \
  --backend ref --save-weights nref --log-json nlogref.json -q
TRAIN_BACKEND=$be "$PY" - <<'PY' || fail "the trained weights"
import json, os, sys
import numpy as np
bad = 0
for a, b in (("demu1", "demu2"), ("remu1", "remu2"), ("nemu1", "nemu2")):
    names = sorted(os.listdir(a))
    diff = [n for n in names if np.load(os.path.join(a, n)).tobytes() != np.load(os.path.join(b, n)).tobytes()]
    if diff or names != sorted(os.listdir(b)):
        print(f"FAIL {a} and {b}: {len(diff)} of {len(names)} tensors differ: {diff[:3]}"); bad += 1
def worst_of(ref, got):
    """The largest distance, relative and in norm, of a tensor in folder got from its namesake in ref."""
    w = 0.0
    for n in os.listdir(ref):
        r = np.load(os.path.join(ref, n)).astype(np.float64)
        e = np.load(os.path.join(got, n)).astype(np.float64)
        w = max(w, float(np.linalg.norm(e - r) / max(np.linalg.norm(r), 1e-30)))
    return w
worst = worst_of("dref", "demu1")
if worst > 1e-5:
    print(f"FAIL digits: cuda-emu's weights {worst:.3g} (relative, in norm) from the reference's"); bad += 1
nworst = worst_of("nref", "nemu1")
if nworst > 1e-5:
    print(f"FAIL the opset-17 net: the weights {nworst:.3g} (relative, in norm) from the reference's"); bad += 1
def losses(p):
    return [r["loss"] for r in json.load(open(p))["steps"]]
le, lr = losses("rlog1.json"), losses("rlogref.json")
if len(le) != 3 or len(lr) != 3 or any(abs(a - b) > 1e-3 * abs(b) for a, b in zip(le, lr)):
    print(f"FAIL ResNet-18 losses: cuda-emu {le}, ref {lr}"); bad += 1
print(f"{os.environ.get('TRAIN_BACKEND', 'cuda-emu')}: digits: 20 AdamW steps, the same bits at -pp 1, 2, {worst:.2g} from ref; ResNet-18: 3 SGD steps, "
      f"the same bits at -pp 1, 2, losses {', '.join(f'{a:.6f}' for a in le)} (ref {', '.join(f'{b:.6f}' for b in lr)}); "
      f"the opset-17 net (InstanceNorm, bilinear upsampling, a stepped Slice, LayerNorm): 3 SGD steps, the same bits "
      f"at -pp 1, 2, {nworst:.2g} from ref")
sys.exit(1 if bad else 0)
PY
echo "ok: training on the CUDA step list ($be): no node on the host, the same bits across splits"
