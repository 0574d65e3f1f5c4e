#!/usr/bin/env bash
# A mixed-precision training plan's products on the half route (pprt
# --cuda-half-products, default on; runtime/cuda/plan_cuda.c, half_route),
# on the CUDA step list without a GPU (cuda-emu):
#   - digits (samples/digits: convolutions with a bias, a Gemm) and
#     torchvision ResNet-18 (random weights, training mode, 4 images of 64x64
#     as tests/cuda/train_emu.sh) at --precision bf16 and fp16 (a dynamic
#     loss scale; digits from 2^16 with --loss-scale-interval 3, so overflows
#     skip steps and the scale backs off and grows again), at -pp 1 and 2;
#   - the half route taken where the graph says: the products --cuda-explain
#     counts on it, summed over the stages, are those whose every float input
#     a Cast from the half type wrote and whose output one Cast to it alone
#     reads, counted here from ppcc --dump-ir (digits: all 14; ResNet-18: 56 of
#     62, the other 6 are the data gradients of each downsampling block's two
#     convolutions, summed in f32 before their Cast), the same at -pp 1 and 2,
#     and none with --cuda-half-products off;
#   - the same bits with the route on and off (the emulated half product lifts
#     the half values to f32, sums in the f32 step's order and rounds once, as
#     the Cast does) and at -pp 1 and 2 (the route is decided over the whole
#     plan; ppcc's devices make their own copies of half values, so no cut
#     falls between a product and its Casts: none converted; ResNet-18 at -pp 2
#     compiled with --policy memory --disable-pass remake sends an f32 copy, which the
#     stage converts: the same bits, at least one tensor so converted);
#   - against the reference kernels (--backend ref, the same plan): digits'
#     weights within 1e-3 (relative, in norm; measured 7e-5 bf16, 6e-5 fp16),
#     losses within 1e-2 (measured 2e-3), the fp16 run skipping exactly the
#     reference's steps (some, not all); ResNet-18's first loss within 5e-3
#     (measured 8e-4 bf16, 6e-5 fp16: half roundings of sums in another
#     order; with random weights its BatchNorms sit at ReLU kinks, so later
#     steps drift apart by a few percent on both routes alike, train_emu.sh).
# About 35 s of CPU. usage: train_half.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC;
# TRAIN_BACKEND=cuda runs it on a GPU: tests/cuda/gpu_day.sh part 2h, where the
# bits on and off are not compared: cuBLASLt and cuDNN sum in orders of
# their own)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
S=$SRC/samples/digits
be=${TRAIN_BACKEND:-cuda-emu}
"$PY" - 2>/dev/null <<'PY'
import inspect, os
import numpy as np, torch, torchvision
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=10).train()
kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
torch.onnx.export(net, (torch.randn(4, 3, 64, 64),), "r18.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "b"}, "logits": {0: "b"}}, **kw)
os.makedirs("rdata", exist_ok=True)
rng = np.random.default_rng(1)
np.save("rdata/input.npy", np.concatenate([rng.standard_normal((4, 3, 64, 64)).astype(np.float32)] * 2))
np.save("rlabels.npy", np.concatenate([rng.integers(0, 10, 4)] * 2).astype(np.int64))
PY
[ -s r18.onnx ] || fail "ResNet-18 not exported"
for prec in bf16 fp16; do
  dscale=() rscale=() dint=()
  if [ $prec = fp16 ]; then dscale=(--loss-scale dynamic:65536) rscale=(--loss-scale dynamic) dint=(--loss-scale-interval 3); fi
  for pp in 1 2; do
    "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 -pp $pp --precision $prec "${dscale[@]}" \
      -o d$prec$pp.plan -q
    "$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 -pp $pp --precision $prec "${rscale[@]}" -o r$prec$pp.plan -q
  done
  # a device that gets its half values' f32 copies over the cut (ppcc makes its own copies unless told not to)
  "$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 -pp 2 --precision $prec "${rscale[@]}" \
    --policy memory --disable-pass remake -o r${prec}2x.plan -q
  "$PPCC" "$S/model.onnx" --train --loss cross-entropy:logits -b 16 --precision $prec "${dscale[@]}" --dump-ir \
    -o /dev/null -q >d$prec.ir
  "$PPCC" r18.onnx --train --loss cross-entropy:logits -b 4 --precision $prec "${rscale[@]}" --dump-ir -o /dev/null \
    -q >r$prec.ir
  for run in 1:on 2:on 1:off; do
    pp=${run%:*} hp=${run#*:}
    "$PPRT" d$prec$pp.plan "$S/data" --labels "$S/labels.npy" --steps 20 --no-shuffle --optimizer adamw --lr 3e-3 \
      "${dint[@]}" --backend $be --cuda-explain --cuda-half-products $hp --save-weights wd$prec$pp$hp \
      --log-json ld$prec$pp$hp.json 2>ed$prec$pp$hp.txt >/dev/null || fail "digits $prec -pp $pp $hp: $(tail -2 ed$prec$pp$hp.txt)"
    "$PPRT" r$prec$pp.plan rdata --labels rlabels.npy --steps 2 --no-shuffle --optimizer sgd --lr 0.01 \
      --backend $be --cuda-explain --cuda-half-products $hp --save-weights wr$prec$pp$hp \
      --log-json lr$prec$pp$hp.json 2>er$prec$pp$hp.txt >/dev/null || fail "ResNet-18 $prec -pp $pp $hp: $(tail -2 er$prec$pp$hp.txt)"
  done
  "$PPRT" r${prec}2x.plan rdata --labels rlabels.npy --steps 2 --no-shuffle --optimizer sgd --lr 0.01 \
    --backend $be --cuda-explain --save-weights wr${prec}2xon --log-json lr${prec}2xon.json 2>er${prec}2xon.txt \
    >/dev/null || fail "ResNet-18 $prec -pp 2 (copies sent): $(tail -2 er${prec}2xon.txt)"
  "$PPRT" d${prec}1.plan "$S/data" --labels "$S/labels.npy" --steps 20 --no-shuffle --optimizer adamw --lr 3e-3 \
    "${dint[@]}" --backend ref --save-weights wd${prec}ref --log-json ld${prec}ref.json -q
  "$PPRT" r${prec}1.plan rdata --labels rlabels.npy --steps 1 --no-shuffle --optimizer sgd --lr 0.01 --backend ref \
    --log-json lr${prec}ref.json -q
  rm -f r${prec}1.plan r${prec}2.plan r${prec}2x.plan   # ran: 45 MB each
done
TRAIN_BACKEND=$be "$PY" - <<'PY' || fail "the half route"
import json, os, re, sys
import numpy as np
bad = []
emu = os.environ["TRAIN_BACKEND"] == "cuda-emu"
PRODUCTS = ("Conv", "Gemm", "MatMul", "pp.ConvGradX", "pp.ConvGradW")

def expected(ir):
    """(products with a float input a Cast from a half type wrote, those whose every float input such a Cast
    wrote and whose output one Cast to the half type alone reads), from ppcc --dump-ir"""
    nodes = []
    for line in open(ir):
        m = re.match(r"%\d+ s\d+ (\S+) (.*?) <- (.*?) \|", line)
        if m:
            outs = [(o.rpartition(":")[0], o.rpartition(":")[2].split("[")[0]) for o in m.group(2).split(", ")]
            nodes.append((m.group(1), outs, [i.strip().lstrip("$") for i in m.group(3).split(",") if i.strip()]))
    dtype = {o: t for _, outs, _ in nodes for o, t in outs}
    writer = {o: (op, ins) for op, outs, ins in nodes for o, _ in outs}
    readers = {}
    for op, outs, ins in nodes:
        for i in ins:
            readers.setdefault(i, []).append((op, outs[0][1]))
    def from_half(t):
        w = writer.get(t)
        return w is not None and w[0] == "Cast" and dtype.get(t) == "f32" and dtype.get(w[1][0]) in ("bf16", "f16")
    cand = half = 0
    for op, outs, ins in nodes:
        if op not in PRODUCTS or not any(from_half(i) for i in ins):
            continue
        cand += 1
        r = readers.get(outs[0][0], [])
        half += all(from_half(i) for i in ins) and len(r) == 1 and r[0][0] == "Cast" and r[0][1] in ("bf16", "f16")
    return cand, half

def counted(log):
    """(half, candidates, converted across a cut) summed over the stages' --cuda-explain lines"""
    h = c = cut = 0
    for line in open(log):
        m = re.search(r"half products: (\d+) of (\d+) on the half tensors \(\d+ Casts skipped, (\d+) tensors", line)
        if m:
            h, c, cut = h + int(m.group(1)), c + int(m.group(2)), cut + int(m.group(3))
    return h, c, cut

def same(a, b):
    names = sorted(os.listdir(a))
    diff = [n for n in names if np.load(os.path.join(a, n)).tobytes() != np.load(os.path.join(b, n)).tobytes()]
    return not diff and names == sorted(os.listdir(b)) and names, diff[:3]

def worst_of(ref, got):
    w = 0.0
    for n in os.listdir(ref):
        r, e = (np.load(os.path.join(d, n)).astype(np.float64) for d in (ref, got))
        w = max(w, float(np.linalg.norm(e - r) / max(np.linalg.norm(r), 1e-30)))
    return w

def steps(p):
    return json.load(open(p))["steps"]

cuts, lines = 0, []
for prec in ("bf16", "fp16"):
    for m, name, want_cand in (("d", "digits", 14), ("r", "ResNet-18", 62)):
        cand, half = expected(f"{m}{prec}.ir")
        if cand != want_cand or half < 1:
            bad.append(f"{name} {prec}: the IR has {cand} mixed-precision products ({half} for the half route), "
                       f"want {want_cand}")
        got = {run: counted(f"e{m}{prec}{run}.txt") for run in ("1on", "2on", "1off")}
        if got["2on"][2]:
            bad.append(f"{name} {prec}: {got['2on'][2]} tensors converted across the cut at -pp 2: ppcc's devices "
                       f"make their own copies of half values (partition_train.c remake_copies)")
        if m == "r":  # the copies sent over the cut (--disable-pass remake): converted, the same bits
            x = counted(f"er{prec}2xon.txt")
            cuts += x[2]
            if x[:2] != (half, cand):
                bad.append(f"ResNet-18 {prec} -pp 2, copies sent: half products {x[:2]}, the IR says {half} of {cand}")
            ok, diff = same(f"wr{prec}1on", f"wr{prec}2xon")
            if not ok:
                bad.append(f"ResNet-18 {prec} -pp 2, copies sent: other weights than -pp 1's: {diff}")
        if got["1on"][:2] != (half, cand) or got["2on"][:2] != (half, cand) or got["1off"][:2] != (0, cand):
            bad.append(f"{name} {prec}: half products (on, of) at -pp 1 {got['1on'][:2]}, -pp 2 {got['2on'][:2]}, "
                       f"off {got['1off'][:2]}; the IR says {half} of {cand}")
        pairs = (("1on", "2on"),) + ((("1on", "1off"),) if emu else ())
        for a, b in pairs:
            ok, diff = same(f"w{m}{prec}{a}", f"w{m}{prec}{b}")
            if not ok:
                bad.append(f"{name} {prec}: the weights of {a} and {b} differ: {diff}")
        lines.append(f"{name} {prec}: {half} of {cand} products on the half route at -pp 1 and 2")
    w = worst_of(f"wd{prec}ref", f"wd{prec}1on")
    e, r = steps(f"ld{prec}1on.json"), steps(f"ld{prec}ref.json")
    dl = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(e, r))
    sk, skr = [bool(s.get("skipped")) for s in e], [bool(s.get("skipped")) for s in r]
    if w > 1e-3 or dl > 1e-2 or len(e) != 20:
        bad.append(f"digits {prec}: weights {w:.3g} and losses {dl:.3g} (relative) from the reference's")
    if sk != skr or (prec == "fp16" and (not any(sk) or all(sk))):
        bad.append(f"digits {prec}: steps skipped {sk}, the reference's {skr}")
    l0, l0r = steps(f"lr{prec}1on.json")[0]["loss"], steps(f"lr{prec}ref.json")[0]["loss"]
    if abs(l0 - l0r) > 5e-3 * abs(l0r):
        bad.append(f"ResNet-18 {prec}: first loss {l0}, the reference's {l0r}")
    lines.append(f"digits {prec}: weights {w:.2g} from ref, {sum(sk)} steps skipped as ref's; ResNet-18 {prec}: "
                 f"first loss {l0:.6f} (ref {l0r:.6f})")
if not cuts:
    bad.append("no split fell between a product and its Casts (ResNet-18 -pp 2 with --disable-pass remake): the "
               "conversion across a cut went untested")
for b in bad:
    print("FAIL", b)
print("\n".join(lines) + f"\n{cuts} tensors converted across the cuts at -pp 2 with --disable-pass remake (none without)")
sys.exit(1 if bad else 0)
PY
echo "ok: the half route ($be): taken as the graph says, the bits of the f32 route and the same across splits"
