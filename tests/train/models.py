#!/usr/bin/env python3
"""One training step of torchvision's ResNet-18 against PyTorch autograd.

ResNet-18 (10 classes, random weights, BatchNormalization in training
mode), exported for training (TrainingMode.TRAINING, no constant folding,
opset 14), a batch of 4 images of 64x64, cross-entropy with integer labels:
ppcc --train at -pp 1, 2 and 4, pprt on the reference kernels (and oneDNN
at -pp 1); the loss and every one of the 62 weight gradients against
PyTorch's, which takes the same step in train mode. Tolerances: the loss
within rtol 1e-4; each gradient tensor within |g - w| <= 2e-3 |w| + 2e-4 x
its tensor's largest |w| (BatchNorm's backward divides by the batch's
standard deviation, so float sums in another order move a gradient more
than in a plain network). The gradients must also be the same bits at -pp
1, 2 and 4, at -pp 2 with --recompute all (each backward stage computing
its forward again instead of keeping it: the same ops on the same inputs),
and at -pp 2 and 4 compiled with --schedule zb-h1 (each device's backward
split into B and a W stage: the same nodes); at -pp 2 zb-h1 on oneDNN
within 5% as below. On oneDNN each gradient tensor must be within 5% of PyTorch's
in norm (measured: 1.2% at most): its convolutions sum in another order,
and random weights leave BatchNorm outputs at a ReLU's kink (a channel of
mostly zero outputs has a mean near 0 whose sign the order of the sum
decides: almost half of one channel of layer3.0.bn1), where the last bit
decides the mask and moves that channel's gradients and what lies before. Then 3 SGD steps of pprt on the reference kernels (--steps 3,
momentum 0.9) against PyTorch's: the losses within 1%, the BatchNorms'
running statistics (which pprt writes back after each step) within 1e-2 of
PyTorch's (the weights they come from drift apart as the losses do), and the
training export with the trained weights put back as an inference model
(ppcc --save-onnx --eval-mode) gives in onnxruntime the eval outputs PyTorch
gives with those weights and statistics, within 1e-4. Then one step of a
small U-Net (tests/models/zoo.py's, 32x32; its nearest upsampling's
gradient is pp.ResizeGrad) on ref and on cuda-emu at -pp 1 and 2 against
PyTorch, cuda-emu with no node on the host fallback, the same bits at both
splits and with pp.ResizeGrad on the host fallback.
Usage: models.py PPCC PPRT WORK"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import check_same_outputs, file_name, host_steps_of, read_grad  # noqa: E402,F401

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_models")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

torch.manual_seed(0)
N = 4


net = torchvision.models.resnet18(num_classes=10).train()
init = {k: v.clone() for k, v in net.state_dict().items()}
x = torch.randn(N, 3, 64, 64)
y = torch.tensor([1, 7, 3, 3])
torch.onnx.export(net, (x,), "resnet18.onnx", input_names=["input"], output_names=["logits"], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
# the export ran a forward in train mode: the running statistics moved once,
# and the model holds them so; PyTorch starts from the same state
start = {k: v.clone() for k, v in net.state_dict().items()}
os.makedirs("data", exist_ok=True)
np.save("data/input.npy", x.numpy())
np.save("data/labels.npy", y.numpy())

net.zero_grad()
loss = F.cross_entropy(net(x), y)
loss.backward()
want = {k: p.grad.numpy() for k, p in net.named_parameters()}
check(len(want) == 62, f"ResNet-18 has {len(want)} weights with gradients, expected 62")

outs, compared = {}, []
SAME_AS_PP1 = ((2, "ref"), (4, "ref"), (2, "ref-recompute-all"), (2, "ref-zb-h1"), (4, "ref-zb-h1"), (2, "cuda-emu"))
# rc "zb-h1": ppcc --schedule zb-h1, each device's backward split into B and a W stage (run here one after the
# other, as a plan runs on its own): the same nodes on the same inputs, so -pp 1's bits
for pp, be, rc in ((1, "ref", ""), (2, "ref", ""), (4, "ref", ""), (1, "dnnl", ""), (2, "ref", "all"),
                   (2, "ref", "zb-h1"), (4, "ref", "zb-h1"), (2, "dnnl", "zb-h1"), (1, "cuda-emu", ""),
                   (2, "cuda-emu", "")):
    plan = f"r{pp}{rc}{be if be != 'ref' else ''}.plan"
    opt = ["--schedule", rc] if rc == "zb-h1" else ["--recompute", rc] if rc else []
    r = subprocess.run([PPCC, "resnet18.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(N), "-pp", str(pp),
                        *opt, "-q", "-o", plan], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc -pp {pp}: exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode:
        continue
    o = f"out{pp}_{be}{rc}"
    if rc:
        be_key = f"{be}-zb-h1" if rc == "zb-h1" else f"ref-recompute-{rc}"
    r = subprocess.run([PPRT, plan, "data", "-o", o, "-q", "--backend", be], capture_output=True, text=True)
    check(r.returncode == 0, f"pprt -pp {pp} {be}: exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode:
        continue
    got_loss = float(np.load(os.path.join(o, "loss.npy")))
    check(abs(got_loss - float(loss)) <= 1e-4 * abs(float(loss)), f"-pp {pp} {be}: loss {got_loss} vs {float(loss)}")
    worst = 0.0
    for k, w in want.items():
        g = read_grad(o, k, w.shape, f"-pp {pp} {be}")
        if g is None:
            continue
        bound = 2e-3 * np.abs(w) + 2e-4 * float(np.abs(w).max())
        bad = np.abs(g - w) > bound
        worst = max(worst, float((np.abs(g - w) / (np.abs(w).max() + 1e-30)).max()))
        # oneDNN's convolutions sum in another order than PyTorch's; where a
        # BatchNorm output sits at a ReLU's kink (a channel whose outputs are
        # mostly 0 has a mean near 0, whose sign the summation order decides:
        # 45% of one channel of layer3.0.bn1 at 64x64), the last bit decides
        # the ReLU's mask and moves that channel's gradients, and what is
        # upstream of it
        if be == "ref":
            check(not bad.any(), f"-pp {pp} {be}: {k}: {int(bad.sum())} of {w.size} off; largest difference "
                  f"{float(np.abs(g - w).max()):.3g} of a largest |w| {float(np.abs(w).max()):.3g}")
        else:  # the whole tensor within 5% (in norm): measured 1.2% at most while the forward's 3x3
            # convolutions ran by Winograd, 8.4e-6 since a training plan runs them direct (AMD Zen 4);
            # cuda-emu (the CUDA step list: cuDNN's forward, backward data and backward filter
            # convolutions, the activation gradients on the own kernel) as oneDNN, its convolutions
            # summing in cuDNN's emulated order
            rel = float(np.linalg.norm(g - w) / (np.linalg.norm(w) + 1e-30))
            check(rel <= 0.05, f"-pp {pp} {be}: {k}: {100 * rel:.2f}% off in norm")
    key = (pp, be if not rc else be_key)
    base = (1, "cuda-emu" if be == "cuda-emu" else "ref")
    if key in SAME_AS_PP1 and base in outs:  # -pp 1's bits on the same kernels, compared now so the files can go
        a = outs[base]
        same = all(np.array_equal(np.load(os.path.join(a, n)), np.load(os.path.join(o, n))) for n in os.listdir(a))
        check(same, f"the gradients and running statistics at -pp {pp} ({key[1]}) differ from -pp 1's")
        compared.append(key)
    if key == base:
        outs[key] = o
    else:
        shutil.rmtree(o, ignore_errors=True)
    if plan != "r2.plan":  # r2.plan trains below; the others' 45 MB each go as soon as they ran
        os.remove(plan)
    print(f"-pp {pp} {be}{' ' + ' '.join(opt) if opt else ''}: loss {got_loss:.6f} (PyTorch {float(loss):.6f}); largest gradient difference "
          f"{worst:.2e} of its tensor's largest")
for pp, be in SAME_AS_PP1:
    check((pp, be) in compared, f"-pp {pp} ({be}): not compared with -pp 1's bits (a run failed or -pp 1's did)")

# three SGD steps with momentum (the same 4 images each step)
os.makedirs("steps", exist_ok=True)
np.save("steps/input.npy", np.concatenate([x.numpy()] * 3))
np.save("steps/labels.npy", np.concatenate([y.numpy()] * 3))
r = subprocess.run([PPRT, "r2.plan", "steps", "--steps", "3", "--no-shuffle", "--optimizer", "sgd", "--lr", "0.05",
                    "--momentum", "0.9", "--log-json", "steps.json", "--backend", "ref", "--save-weights", "after",
                    "-q"], capture_output=True, text=True)
check(r.returncode == 0, f"pprt --steps 3: exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    got = [s["loss"] for s in json.load(open("steps.json"))["steps"]]
    net.load_state_dict(start)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    ref = []
    for _ in range(3):
        opt.zero_grad()
        lo = F.cross_entropy(net(x), y)
        lo.backward()
        opt.step()
        ref.append(float(lo))
    check(all(abs(a - b) <= 0.01 * abs(b) for a, b in zip(got, ref)), f"SGD steps: losses {got} vs PyTorch's {ref}")
    print(f"3 SGD steps: losses {[round(v, 5) for v in got]} (PyTorch {[round(v, 5) for v in ref]})")
    # the BatchNorms' running statistics moved as PyTorch's did (unbiased variance, momentum 0.1)
    sd = net.state_dict()
    worst = 0.0
    for k, v in sd.items():
        if "running" not in k:
            continue
        f = os.path.join("after", file_name(k) + ".npy")
        check(os.path.exists(f), f"no running statistic {k} among the saved weights")
        if os.path.exists(f):
            e = float(np.abs(np.load(f) - v.numpy()).max() / (np.abs(v.numpy()).max() + 1e-30))
            worst = max(worst, e)
            check(e < 1e-2, f"{k}: {e:.2e} off PyTorch's after 3 steps")
    print(f"running statistics after 3 steps: within {worst:.2e} of PyTorch's")
    # the training export with the trained weights, made an inference model: onnxruntime gives PyTorch's eval outputs
    net.eval()
    r = subprocess.run([PPCC, "resnet18.onnx", "--save-onnx", "trained.onnx", "--weights", "after", "--eval-mode"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--save-onnx: exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode == 0:
        import onnxruntime
        got_y, = onnxruntime.InferenceSession("trained.onnx").run(["logits"], {"input": x.numpy()})
        # PyTorch's eval outputs with pprt's trained weights and statistics in the module
        sd = net.state_dict()
        for k in sd:
            f = os.path.join("after", file_name(k) + ".npy")
            if os.path.exists(f):
                sd[k] = torch.from_numpy(np.load(f))
        net.load_state_dict(sd)
        with torch.no_grad():
            want_y = net(x).numpy()
        e = float(np.abs(got_y - want_y).max() / np.abs(want_y).max())
        check(e < 1e-4, f"the trained model in onnxruntime: {e:.2e} off PyTorch's eval outputs with the same weights")
        print(f"trained ResNet-18 in onnxruntime (eval): within {e:.2e} of PyTorch's with the same weights")

# two BatchNorms whose running statistics start equal (exported on zeros: each running variance 0.9 in every
# channel): the statistics keep their own names through ppcc's passes (not merged as equal constants), and one
# step's write-back is PyTorch's for each
torch.manual_seed(1)
twin = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                           torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                           torch.nn.Linear(4 * 8 * 8, 10)).train()
torch.onnx.export(twin, (torch.zeros(2, 3, 8, 8),), "twin.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
check(torch.equal(twin[1].running_var, twin[4].running_var), "the twins' running variances start apart")
xt, yt = torch.randn(2, 3, 8, 8), torch.tensor([3, 5])
os.makedirs("twin", exist_ok=True)
np.save("twin/input.npy", xt.numpy())
np.save("twin/labels.npy", yt.numpy())
r = subprocess.run([PPCC, "twin.onnx", "--train", "--loss", "cross-entropy:logits", "-b", "2", "-q", "-o", "twin.plan"],
                   capture_output=True, text=True)
check(r.returncode == 0, f"twin: ppcc exit {r.returncode}: {r.stderr[-300:]}")
r = subprocess.run([PPRT, "twin.plan", "twin", "--steps", "1", "--optimizer", "sgd", "--lr", "0.1", "--save-weights",
                    "twin_after", "-q", "--backend", "ref"], capture_output=True, text=True)
check(r.returncode == 0, f"twin: pprt exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    twin(xt)  # PyTorch's forward in train mode moves the statistics as the step does
    for k in ("1.running_mean", "1.running_var", "4.running_mean", "4.running_var"):
        got = np.load(os.path.join("twin_after", k + ".npy"))
        want = twin.state_dict()[k].numpy()
        check(np.allclose(got, want, rtol=1e-5, atol=1e-6), f"twin: {k} {got} vs PyTorch's {want}")

# U-Net (tests/models/zoo.py's: BatchNorm in training mode, ConvTranspose and nearest Resize upsampling, skips
# concatenated) at 32x32, per-pixel cross-entropy, one step: on ref and on cuda-emu at -pp 1 and 2 each gradient
# within ResNet-18's bound on ref of PyTorch's (measured 5.6e-6 and 5.2e-6 of the tensor's largest; this seed
# leaves no BatchNorm channel at a ReLU's kink), cuda-emu with no node on the host fallback (pp.ResizeGrad,
# the upsampling's gradient, on the own kernel: --cuda-explain), the same bits at both splits and the same bits
# as with pp.ResizeGrad on the host fallback (--cuda-host-ops: the kernel gathers the reference's terms in its
# order)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import zoo  # noqa: E402

torch.manual_seed(2)
unet = zoo.UNet().train()
xu, yu = torch.randn(2, 3, 32, 32), torch.randint(0, 2, (2, 32, 32))
os.makedirs("unet/data", exist_ok=True)
torch.onnx.export(unet, (xu,), "unet/model.onnx", input_names=["x"], output_names=["out"], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
np.save("unet/data/x.npy", xu.numpy())
np.save("unet/data/labels.npy", yu.numpy())
unet.zero_grad()
lossu = F.cross_entropy(unet(xu), yu)
lossu.backward()
wantu = {k: p.grad.numpy() for k, p in unet.named_parameters()}
uouts = {}
for pp, be, extra in ((1, "ref", []), (1, "cuda-emu", ["--cuda-explain"]), (2, "cuda-emu", ["--cuda-explain"]),
                      (1, "cuda-emu", ["--cuda-host-ops", "pp.ResizeGrad", "--cuda-explain"])):
    tag = f"U-Net -pp {pp} on {be}{' ' + ' '.join(extra[:2]) if len(extra) > 1 else ''}"
    plan = f"unet/u{pp}.plan"
    if not os.path.exists(plan):
        r = subprocess.run([PPCC, "unet/model.onnx", "--train", "--loss", "cross-entropy:out", "-b", "2", "-pp",
                            str(pp), "-q", "-o", plan], capture_output=True, text=True)
        check(r.returncode == 0, f"{tag}: ppcc exit {r.returncode}: {r.stderr[-300:]}")
        if r.returncode:
            continue
    o = f"unet/out{pp}_{be}{len(extra)}"
    r = subprocess.run([PPRT, plan, "unet/data", "-o", o, "-q", "--backend", be, *extra], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"{tag}: pprt exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode:
        continue
    uouts[tag] = o
    if extra:  # the host steps of each stage: none, or U-Net's one pp.ResizeGrad where it is asked for
        host = host_steps_of(r.stderr)
        check(host == (1 if "--cuda-host-ops" in extra else 0), f"{tag}: {host} host steps")
        check("--cuda-host-ops" in extra or "resize gradient" in r.stderr, f"{tag}: no resize gradient kernel step")
    got = float(np.load(os.path.join(o, "loss.npy")))
    check(abs(got - float(lossu)) <= 1e-4 * abs(float(lossu)), f"{tag}: loss {got} vs {float(lossu)}")
    worst = 0.0
    for k, w in wantu.items():
        g = read_grad(o, k, w.shape, tag)
        if g is None:
            continue
        worst = max(worst, float((np.abs(g - w) / (np.abs(w).max() + 1e-30)).max()))
        bad = np.abs(g - w) > 2e-3 * np.abs(w) + 2e-4 * float(np.abs(w).max())
        check(not bad.any(), f"{tag}: {k}: {int(bad.sum())} of {w.size} off")
    print(f"{tag}: loss {got:.6f} (PyTorch {float(lossu):.6f}); {len(wantu)} gradients, the largest difference "
          f"{worst:.2e} of its tensor's largest")
emu = [o for t, o in uouts.items() if "cuda-emu" in t]
check(len(emu) == 3, f"U-Net: {len(emu)} of 3 cuda-emu runs")
for o in emu[1:]:
    check_same_outputs(emu[0], o, f"U-Net on cuda-emu: {o} against {emu[0]}")

testlib.finish("train_models")
