#!/usr/bin/env python3
"""pprt trains a ppcc --train plan: against PyTorch, and bit for bit across splits.

A small convolutional network (Conv, Relu, MaxPool, a residual Add,
GlobalAveragePool, Gemm) starts from the same random weights in PyTorch and
in a plan compiled from its training export; both train on the digits
sample (8x8 images, 10 classes; 300 samples to train on, 60 held out) for
20 epochs, micro-batches of 16 rows, 2 per step, in the same shuffled order
(pprt's order, written here again from its definition in runtime/train.c),
with AdamW, then SGD with Nesterov momentum, a warm-up and a cosine schedule. Checked:
  - each step's loss within 2% of PyTorch's (relative, plus 1e-3 absolute for
    losses near 0), and each trained weight tensor no further from PyTorch's
    than 3x what rounding alone moves PyTorch's own run (the same steps with
    each step's 32 rows in one forward instead of two of 16: over 180 steps
    such a run ends up to 1.5% off in loss, some 1e-2 in weights);
  - the held-out accuracy of pprt's weights at least PyTorch's minus 0.5%;
  - the trained weights bit-identical at -pp 1, 2 and 4 (ref), and at -pp 1
    and 2 on dnnl, and with the log's records parsing as JSON;
  - ppcc --save-onnx puts the trained weights back into the model, which
    onnxruntime runs to PyTorch's logits (a stray or misshapen weight file
    refused);
  - --eval's accuracy is the one PyTorch finds for pprt's weights; the
    log's stash peaks are the schedules' (1F1B: min(P - d, M), GPipe: M),
    --curves draws a point per step and per epoch; a run
    stopped and resumed from its checkpoint, one on 2 replicas, and runs
    under the GPipe and the flow schedule end with the weights of an
    unbroken single-replica 1F1B run, bit for bit, and so does a plan compiled
    with --recompute all, whose device 0 keeps under a quarter of the stash;
  - plans compiled with --schedule zb-h1 (each device's backward split into
    B and a W stage) at -pp 2 and 4, under zb-h1, 1F1B and GPipe: the
    weights of -pp 1, bit for bit (ref; dnnl against dnnl's -pp 1); under
    zb-h1 at M = 4 each device holds min(P - d, M) micro-batches at most, as
    under 1F1B; zb-h1 on a plan without W stages exits 2; the backward cut
    carries no weight gradient (each device's leave at its own stage);
  - executors kept across steps (runtime/keep.h) give the bits of executors
    made every step (PPRT_TRAIN_FRESH=1) on ref and dnnl, -pp 1 and 2,
    zb-h1, 2 replicas and --eval; after the first step none is made;
  - a loss that turns NaN stops with the step named, exit 1; data that does
    not fit the plan exits 2.
Usage: run.py PPCC PPRT WORK"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import digits_net  # noqa: E402

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_run")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.manual_seed(0)
ROWS, ACC, EPOCHS = 16, 2, 20
M64 = (1 << 64) - 1


def mix(s):
    s = (s + 0x9E3779B97F4A7C15) & M64
    z = s
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return s, z ^ (z >> 31)


def order(n, seed, epoch):
    perm = list(range(n))
    s = (seed ^ ((0x5851F42D4C957F2D * (epoch + 1)) & M64)) & M64
    for i in range(n - 1, 0, -1):
        s, z = mix(s)
        j = z % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


X = np.load(os.path.join(SRC, "samples", "digits", "data", "input.npy"))
Y = np.load(os.path.join(SRC, "samples", "digits", "labels.npy")).astype(np.int64)
XT, YT, XH, YH = X[:300], Y[:300], X[300:], Y[300:]
os.makedirs("data", exist_ok=True)
np.save("data/input.npy", XT)
np.save("data/labels.npy", YT)

net0 = digits_net()
init = {k: v.clone() for k, v in net0.state_dict().items()}
torch.onnx.export(net0, (torch.zeros(ROWS, 1, 8, 8),), "net.onnx", input_names=["input"], output_names=["logits"],
                  opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def torch_train(opt_name, seed, whole=False):
    """PyTorch's run; whole: each step's rows in one forward (a mean over 32
    rows, not of two means over 16): the same training up to rounding, whose
    distance from the first measures how far rounding alone carries a run."""
    net = digits_net()
    net.load_state_dict(init)
    if opt_name == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=4e-3, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=1e-4)
    per_epoch = len(XT) // (ROWS * ACC)
    total = per_epoch * EPOCHS
    losses = []
    step = 0
    for ep in range(EPOCHS):
        perm = order(len(XT), seed, ep)
        for k in range(per_epoch):
            step += 1
            if opt_name == "sgd":  # cosine from 0.2 to 0.01 after 10 warm-up steps
                for g in opt.param_groups:
                    g["lr"] = (0.2 * step / 10 if step <= 10 else
                               0.01 + 0.5 * (0.2 - 0.01) * (1 + np.cos(np.pi * (step - 10) / (total - 10))))
            opt.zero_grad()
            tot = 0.0
            ls = []
            for j in range(ACC):
                idx = perm[(k * ACC + j) * ROWS:(k * ACC + j + 1) * ROWS]
                out = net(torch.from_numpy(XT[idx]))
                ls.append(F.cross_entropy(out, torch.from_numpy(YT[idx])))
            tot = sum(ls) / ACC
            if whole:
                idx = perm[k * ACC * ROWS:(k + 1) * ACC * ROWS]
                tot = F.cross_entropy(net(torch.from_numpy(XT[idx])), torch.from_numpy(YT[idx]))
            tot.backward()
            opt.step()
            losses.append(float(tot))
    return net, losses


def pprt_train(plan, opt_args, seed, backend="ref", tag="", fresh=False, full=False):
    """The trained weights and each step's loss (full: and the log's steps)."""
    out = f"w_{tag}"
    log = f"log_{tag}.json"
    r = subprocess.run([PPRT, plan, "data", "--epochs", str(EPOCHS), "--accumulate", str(ACC), "--seed", str(seed),
                        "--backend", backend, "--save-weights", out, "--log-json", log, "-q", *opt_args],
                       capture_output=True, text=True, env={**os.environ, "PPRT_TRAIN_FRESH": "1" if fresh else "0"})
    check(r.returncode == 0, f"{tag}: pprt exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if r.returncode:
        return None, None
    with open(log) as f:
        rec = json.load(f)
    w = {os.path.splitext(n)[0]: np.load(os.path.join(out, n)) for n in os.listdir(out)}
    return w, rec["steps"] if full else [s["loss"] for s in rec["steps"]]


def accuracy(weights):
    net = digits_net()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    with torch.no_grad():
        return float((net(torch.from_numpy(XH)).argmax(1).numpy() == YH).mean())


plans = {}
for pp in (1, 2, 4):
    plans[pp] = f"t{pp}.plan"
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp",
                        str(pp), "-q", "-o", plans[pp]], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc -pp {pp}: exit {r.returncode}: {r.stderr[-300:]}")
# --schedule zb-h1: each device's backward split into B (input gradients) and a W stage (weight gradients);
# at -pp 1 the whole backward is W (B is empty: its input gradients go nowhere)
for pp in (1, 2, 4):
    plans[f"z{pp}"] = f"z{pp}.plan"
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp",
                        str(pp), "--schedule", "zb-h1", "-q", "-o", plans[f"z{pp}"]], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc -pp {pp} --schedule zb-h1: exit {r.returncode}: {r.stderr[-300:]}")

OPTS = {
    "adamw": ["--optimizer", "adamw", "--lr", "4e-3", "--weight-decay", "0.01"],
    "sgd": ["--optimizer", "sgd", "--lr", "0.2", "--momentum", "0.9", "--nesterov", "--weight-decay", "1e-4",
            "--lr-schedule", "cosine", "--lr-min", "0.01", "--warmup-steps", "10"],
}
for name, args in OPTS.items():
    seed = 7 if name == "adamw" else 11
    tnet, tl = torch_train(name, seed)
    wnet, _ = torch_train(name, seed, whole=True)
    w1, l1 = pprt_train(plans[1], args, seed, tag=f"{name}_pp1")
    if w1 is None:
        continue
    check(len(l1) == len(tl), f"{name}: {len(l1)} steps, PyTorch {len(tl)}")
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(l1, tl)) if abs(a - b) > 0.02 * abs(b) + 1e-3]
    check(not bad, f"{name}: {len(bad)} of {len(tl)} step losses off by more than 2%; first: step {bad[0][0] + 1}: "
          f"{bad[0][1]:.6f} vs PyTorch {bad[0][2]:.6f}" if bad else "")
    check(tl[-1] < 0.7 * tl[0], f"{name}: PyTorch's loss went from {tl[0]:.4f} to {tl[-1]:.4f}: the case does not train")
    ts, ws = tnet.state_dict(), wnet.state_dict()
    for k, v in w1.items():
        want = ts[k].numpy()
        err = float(np.abs(v - want).max())
        drift = float(np.abs(ws[k].numpy() - want).max())
        tol = max(3 * drift, 1e-4 * max(1.0, float(np.abs(want).max())))
        check(err <= tol, f"{name}: weight {k} off PyTorch's by {err:.3g}; PyTorch's own rounding drift is "
              f"{drift:.3g}, the tolerance {tol:.3g}")
    acc_p, acc_t = accuracy(w1), accuracy({k: v.numpy() for k, v in ts.items()})
    check(acc_p >= acc_t - 0.005, f"{name}: held-out accuracy {acc_p:.4f}, PyTorch's {acc_t:.4f}")
    print(f"{name}: loss {tl[0]:.4f} -> {tl[-1]:.4f} (PyTorch) / {l1[0]:.4f} -> {l1[-1]:.4f} (pprt); held-out "
          f"accuracy {acc_p:.4f} (pprt) / {acc_t:.4f} (PyTorch); largest step-loss difference "
          f"{max(abs(a - b) / abs(b) for a, b in zip(l1, tl)):.2e} relative")
    runs = [(pp, "ref", []) for pp in (2, 4)] + [(pp, "dnnl", []) for pp in (1, 2)]
    # the zb-h1 plans (20 steps each, against -pp 1's 20) under --schedule zb-h1 (W deferred), 1F1B and GPipe
    # (W right after its B): -pp 1's bits
    zb = ["--schedule", "zb-h1"]
    runs += [(pp, be, ["--steps", "20", *extra]) for pp, be, extra in (
        (1, "ref", []), (1, "dnnl", []), ("z1", "ref", zb), ("z2", "ref", zb), ("z4", "ref", zb), ("z4", "ref", []),
        ("z2", "ref", ["--schedule", "gpipe"]), ("z1", "dnnl", zb), ("z2", "dnnl", zb))]
    base = {"ref": w1}
    for pp, be, extra in runs:
        w, _ = pprt_train(plans[pp], args + extra, seed, backend=be, tag=f"{name}_pp{pp}_{be}{''.join(extra)}")
        if w is None:
            continue
        key = be + ("-20" if "--steps" in extra else "")
        if key not in base:
            base[key] = w
            continue
        same = all(np.array_equal(w[k], base[key][k]) for k in base[key])
        check(same, f"{name}: weights at -pp {pp} {' '.join(extra)} on {be} differ from -pp 1's")

# ppcc --save-onnx: the model with pprt's trained weights, which onnxruntime runs as PyTorch runs them
if os.path.isdir("w_adamw_pp1"):
    r = subprocess.run([PPCC, "net.onnx", "--save-onnx", "trained.onnx", "--weights", "w_adamw_pp1"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "with 8 weights" in r.stdout, f"--save-onnx: exit {r.returncode}: {r.stdout}{r.stderr}")
    if r.returncode == 0:
        import onnxruntime
        y, = onnxruntime.InferenceSession("trained.onnx").run(["logits"], {"input": XH[:16]})
        w = {os.path.splitext(n)[0]: np.load(os.path.join("w_adamw_pp1", n)) for n in os.listdir("w_adamw_pp1")}
        net = digits_net()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        with torch.no_grad():
            want = net(torch.from_numpy(XH[:16])).numpy()
        check(np.allclose(y, want, rtol=1e-5, atol=1e-5), f"--save-onnx: onnxruntime's logits {y[0, :3]} vs "
              f"PyTorch's {want[0, :3]}")
    os.makedirs("wbad", exist_ok=True)
    np.save("wbad/nothing.npy", np.zeros(3, np.float32))
    r = subprocess.run([PPCC, "net.onnx", "--save-onnx", "bad.onnx", "--weights", "wbad"], capture_output=True, text=True)
    check(r.returncode == 2 and "nothing.npy names no initializer" in r.stderr and not os.path.exists("bad.onnx"),
          f"--save-onnx with a stray file: exit {r.returncode}: {r.stderr[-200:]}")
    np.save("wbad/nothing.npy", np.zeros(3, np.float32))
    os.remove("wbad/nothing.npy")
    np.save("wbad/fc.bias.npy", np.zeros(11, np.float32))
    r = subprocess.run([PPCC, "net.onnx", "--save-onnx", "bad.onnx", "--weights", "wbad"], capture_output=True, text=True)
    check(r.returncode == 2 and "initializer 'fc.bias' has another type or shape" in r.stderr,
          f"--save-onnx with a wrong shape: exit {r.returncode}: {r.stderr[-200:]}")

# --eval: the held-out accuracy pprt prints is the one its weights give in PyTorch
os.makedirs("held", exist_ok=True)
np.save("held/input.npy", XH[:48])
np.save("held/labels.npy", YH[:48])
r = subprocess.run([PPRT, plans[2], "data", "--epochs", "3", "--accumulate", "2", "--optimizer", "adamw", "--lr",
                    "4e-3", "--eval", "held", "--save-weights", "w_eval", "--log-json", "log_eval.json",
                    "--curves", "curves.html"], capture_output=True, text=True)
check(r.returncode == 0, f"--eval: exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("held-out:")]
    w = {os.path.splitext(n)[0]: np.load(os.path.join("w_eval", n)) for n in os.listdir("w_eval")}
    net = digits_net()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    with torch.no_grad():
        want = float((net(torch.from_numpy(XH[:48])).argmax(1).numpy() == YH[:48]).mean())
    check(line and abs(float(line[0].split("accuracy ")[1]) - want) < 6e-5, f"--eval: {line}, PyTorch says {want}")
    with open("log_eval.json") as f:
        ep = json.load(f)["epochs"]
    check(len(ep) == 3 and abs(ep[-1]["eval_accuracy"] - want) < 1e-12, f"--eval: the log's epochs {ep}")
    with open("log_eval.json") as f:
        log = json.load(f)
    busy = [st["stage_busy_s"] for st in log["steps"]]
    check(all(len(b) == 4 and min(b) > 0 for b in busy), f"--log-json: each step's stage busy seconds: {busy[:2]}")
    # 1F1B: device d keeps min(P - d, M) micro-batches' stashes: 2 and 1 at -pp 2, M = 2
    peaks = [d["stash_peak"] for d in log["stash"]]
    check(peaks == [2, 1], f"--log-json: the stash held at most {peaks} micro-batches under 1F1B, expected [2, 1]")
    # --curves: one page, a point per step in the loss line, a held-out point per epoch
    with open("curves.html") as f:
        page = f.read()
    line = page.split('data-label="step loss"')[1].split('points="')[1].split('"')[0].split()
    check(page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>") and len(line) == len(log["steps"]),
          f"--curves: {len(line)} points in the loss line for {len(log['steps'])} steps")
    check(page.count('class="point" data-label="held-out accuracy"') == 3, "--curves: 3 held-out accuracy points")

# The executors a training run makes once and keeps (runtime/keep.h: the first step creates them, each later step
# has them re-read the updated weights) against PPRT_TRAIN_FRESH=1 (each step makes its own, as before issue 55):
# the same bits on ref and dnnl, -pp 1 and 2, zb-h1's W stages, 2 replicas (oneDNN's reordered weights shared
# between them, wshare.c) and --eval passes between steps; the log counts each step's executors: the first step
# makes one a stage (and W stage, and replica), the later ones none (the fresh run: every step all of them)
KEEP = [(1, "ref", []), (2, "dnnl", []), (1, "dnnl", []), ("z2", "dnnl", ["--schedule", "zb-h1"]),
        (2, "dnnl", ["--replicas", "2"]), (2, "dnnl", ["--replicas", "2", "--eval", "held"]),
        (2, "dnnl", ["--schedule", "gpipe", "--eval", "held"])]
for pp, be, extra in KEEP:
    tag = f"keep_{pp}_{be}{''.join(extra)}"
    args = OPTS["adamw"] + ["--steps", "12", *extra]
    wk, sk = pprt_train(plans[pp], args, 5, backend=be, tag=tag, full=True)
    wf, sf = pprt_train(plans[pp], args, 5, backend=be, tag=tag + "_fresh", fresh=True, full=True)
    if wk is None or wf is None:
        continue
    same = sorted(wk) == sorted(wf) and all(wk[k].tobytes() == wf[k].tobytes() for k in wk)
    check(same, f"{tag}: kept executors' weights differ from fresh ones': "
          f"{[k for k in wk if k in wf and wk[k].tobytes() != wf[k].tobytes()][:3]}")
    made = [st["executors_created"] for st in sk]
    n = made[0]
    # a held-out pass's executors count in the next step's record; on fewer replicas than the steps' it has more
    # threads a stage, so kept executors are made again for it (and again for the next step)
    if "--eval" not in extra:
        check(n > 0 and [st["executors_created"] for st in sf] == [n] * len(sf),
              f"{tag}: PPRT_TRAIN_FRESH=1 made {[st['executors_created'] for st in sf]} executors a step, want {n} each")
        check(made[1:] == [0] * (len(made) - 1) and all(st["executors_reloaded"] == n for st in sk[1:]) and
              not any(st["executors_refused_reload"] for st in sk),
              f"{tag}: executors made each step {made}, reloaded {[st['executors_reloaded'] for st in sk]}")
print(f"kept executors: the same bits as fresh ones in {len(KEEP)} runs; none made after the first step")

# --resume: stopped at step 13 with checkpoints every 5, then resumed: the weights of an unbroken run
common = ["--epochs", "4", "--accumulate", "2", "--optimizer", "adamw", "--lr", "4e-3", "--seed", "3", "-q"]
runs = [["--save-weights", "full"], ["--steps", "13", "--checkpoint", "ck", "--save-every", "5"],
        ["--resume", "ck", "--save-weights", "resumed"],
        # a checkpoint names weights, not stages: the -pp 2 run's resumed on the -pp 4 plan (and its zb-h1 form)
        ["--resume", "ck", "--save-weights", "resumed4", "PLAN", plans[4]],
        ["--resume", "ck", "--schedule", "zb-h1", "--save-weights", "resumedz1", "PLAN", plans["z1"]],
        ["--replicas", "2", "--save-weights", "rep2"],
        ["--schedule", "gpipe", "--save-weights", "gpipe", "--log-json", "log_gpipe.json"], ["--schedule", "flow", "--save-weights", "flow"],
        ["--schedule", "gpipe", "--save-weights", "recompute", "PLAN", "t2rc.plan"],
        # --eval under GPipe: the gate counts each run's micro-batches (it hung on the step's counts before)
        ["--schedule", "gpipe", "--eval", "held", "--save-weights", "gpipe_eval"],
        ["--replicas", "2", "--schedule", "zb-h1", "--save-weights", "rep2zb", "PLAN", "z2.plan"]]
# --recompute all: the backward stages compute their forward again; the same weights, a smaller stash
stash = {}
for name, extra in (("t2b.plan", []), ("t2rc.plan", ["--recompute", "all"])):
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp", "2",
                        *extra, "-o", name, "--report"], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc {extra}: exit {r.returncode}: {r.stderr[-300:]}")
    if r.returncode == 0:
        rows = [ln.split() for ln in r.stdout.split("GPipe_total")[1].splitlines()[1:3]]
        stash[name] = [float(row[4]) for row in rows]
        # device-local gradients: the backward cut (device 1's backward -> device 0's) carries the gradient
        # of the activation at the cut and what device 0's backward reads, not device 1's weights' gradients
        cut = [ln for ln in r.stdout.splitlines() if ln.startswith("cut 2 -> 3")]
        check(cut and ".grad[" not in cut[0] and "fc.weight" not in cut[0],
              f"{extra}: the backward cut relays weight gradients: {cut[:1]}")
if len(stash) == 2:
    # device 0 keeps the 16x4x4 input of conv2 (and conv1's 16x1x8x8 input) instead of every activation
    check(stash["t2rc.plan"][0] < 0.25 * stash["t2b.plan"][0],
          f"--recompute all: device 0's stash {stash['t2rc.plan'][0]} MB, without {stash['t2b.plan'][0]} MB")
# zb-h1 at M = 4: a device holds no more micro-batches than under 1F1B (min(P - d, M), from its forward until
# its W ran), the log has each W stage's busy seconds and the formula (P-1)/(3M+P-1); a plan without W stages
# is refused under zb-h1
r = subprocess.run([PPRT, plans["z2"], "data", "--steps", "6", "--accumulate", "4", "--schedule", "zb-h1", "-q",
                    "--log-json", "log_zb.json"], capture_output=True, text=True)
check(r.returncode == 0, f"zb-h1 at M = 4: exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    with open("log_zb.json") as f:
        log = json.load(f)
    held = [d["held_peak"] for d in log["stash"]]
    check(held == [2, 1], f"zb-h1: the devices held at most {held} micro-batches, expected 1F1B's [2, 1]")
    busy = log["steps"][-1]["stage_busy_s"]
    check(len(busy) == 6 and min(busy[4:]) > 0, f"zb-h1: the stages' busy seconds (4 of the chain, 2 W): {busy}")
    check(abs(log["bubble_formula"] - 1 / 13) < 1e-12, f"zb-h1: bubble_formula {log['bubble_formula']}, expected 1/13")
    check(all("w_keep_peak" in d and d["w_keep_peak"] <= d["held_peak"] for d in log["stash"]),
          f"zb-h1: what B kept for W: {log['stash']}")
    # the stash and W's keep take their entries from one pool (each the larger size): device 0 allocated at most its
    # cap (2) of them for both, where apart the two FIFOs' entries added up (the last device's stash rides in the
    # message: W's entries alone)
    d0 = log["stash"][0]
    check(0 < d0["keep_bytes"] <= 2 * max(d0["stash_bytes"], d0["w_keep_bytes"]),
          f"zb-h1: device 0's stash and W entries took {d0['keep_bytes']} bytes, more than 2 of "
          f"max({d0['stash_bytes']}, {d0['w_keep_bytes']})")
r = subprocess.run([PPRT, plans[2], "data", "--steps", "1", "--accumulate", "2", "--schedule", "zb-h1", "-q"],
                   capture_output=True, text=True)
check(r.returncode == 2 and "compile it with ppcc --train --schedule zb-h1" in r.stderr,
      f"zb-h1 on a plan without W stages: exit {r.returncode}: {r.stderr[-300:]}")
for extra, msg in ((["--train", "--loss", "cross-entropy:logits", "-pp", "2", "--recompute", "2"],
                    "--recompute 2: the plan has 2 devices (0..1)"),
                   (["--recompute", "all"], "--recompute is an option of --train"),
                   (["--schedule", "zb-h1"], "--schedule is an option of --train"),
                   (["--train", "--loss", "cross-entropy:logits", "--recompute", "0,0"], "device 0 named twice"),
                   (["--train", "--loss", "cross-entropy:logits", "--recompute", "some"], "expected 'all' or device")):
    r = subprocess.run([PPCC, "net.onnx", *([] if "--search" in extra or "--max-batch" in extra else ["-b", str(ROWS)]),
                        *extra, "-o", "refused.plan"], capture_output=True, text=True)
    check(r.returncode == 2 and msg in r.stderr and not os.path.exists("refused.plan"),
          f"ppcc {extra}: exit {r.returncode}: {r.stderr[-200:]}")
for extra in runs:
    plan = extra[-1] if "PLAN" in extra else plans[2]
    extra = extra[:-2] if "PLAN" in extra else extra
    r = subprocess.run([PPRT, plan, "data", *common, *extra], capture_output=True, text=True)
    check(r.returncode == 0, f"{extra}: exit {r.returncode}: {r.stderr[-300:]}")
for other in ("resumed", "resumed4", "resumedz1", "rep2", "gpipe", "flow", "recompute", "gpipe_eval", "rep2zb"):
    if os.path.isdir("full") and os.path.isdir(other):
        same = sorted(os.listdir("full")) == sorted(os.listdir(other)) and all(
            np.array_equal(np.load(os.path.join("full", n)), np.load(os.path.join(other, n))) for n in os.listdir("full"))
        check(same, f"{other}: the weights differ from the unbroken single-replica run's")
check(not os.path.exists("ck.tmp") and not os.path.exists("ck.old"), "a checkpoint left its temporary folder")
if os.path.exists("log_gpipe.json"):  # GPipe keeps every micro-batch of a step on each device
    with open("log_gpipe.json") as f:
        peaks = [d["stash_peak"] for d in json.load(f)["stash"]]
    check(peaks == [2, 2], f"GPipe: the stash held at most {peaks} micro-batches, expected [2, 2]")
r = subprocess.run([PPRT, plans[2], "data", *common, "--resume", "nowhere"], capture_output=True, text=True)
check(r.returncode != 0 and "nowhere" in r.stderr, f"--resume nowhere: exit {r.returncode}: {r.stderr[-200:]}")

# --max-batch and --search on a training plan's memory (passes/train_memory.c, the figures ppcc --report prints
# and bench/train_memory.py holds against pprt's measured peak): the micro-batch found is the largest at which
# every device's 1F1B total fits the cap, the next one overflows a device; the search's fitting candidates too


def device_totals(b, pp=2):
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(b), "-pp", str(pp),
                        "--report", "-o", "sized.plan"], capture_output=True, text=True)
    check(r.returncode == 0, f"ppcc -b {b}: exit {r.returncode}: {r.stderr[-300:]}")
    rows = [ln.split() for ln in r.stdout.split("GPipe_total")[1].splitlines()[1:1 + pp]] if r.returncode == 0 else []
    return [float(row[6]) for row in rows]


cap = max(device_totals(24)) + 0.02  # MB: micro-batch 24 fits, by construction
r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-pp", "2", "--max-batch",
                    "--max-memory", f"{cap:.3f}MB"], capture_output=True, text=True)
check(r.returncode == 0 and "largest micro-batch:" in r.stdout, f"--train --max-batch: exit {r.returncode}: "
      f"{r.stderr[-300:]}")
if r.returncode == 0 and "largest micro-batch:" in r.stdout:
    best = int(r.stdout.split("largest micro-batch:")[1].split()[0])
    check(best >= 24 and "limited by device" in r.stdout, f"--train --max-batch found {best} (24 fits): {r.stdout}")
    at, over = device_totals(best), device_totals(best + 1)
    check(max(at) <= cap + 1e-3 < max(over) + 2e-3, f"--train --max-batch {best} under {cap:.3f} MB: the report "
          f"gives {at} MB there and {over} MB at {best + 1}")
r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "--devices", "2", "--search",
                    "--max-memory", f"{cap:.3f}MB", "--samples", "64", "--batch-sizes", "8,16,64"],
                   capture_output=True, text=True)
check(r.returncode == 0 and "best: -pp" in r.stdout, f"--train --search: exit {r.returncode}: {r.stdout[-400:]}"
      f"{r.stderr[-300:]}")
if r.returncode == 0:
    fits = [ln.split() for ln in r.stdout.split("timed_at")[1].split("does not fit")[0].splitlines()[1:] if ln.strip()]
    seen = {(int(f[1]), int(f[3])) for f in fits}
    check({(1, 8), (2, 8), (1, 16), (2, 16)} <= seen, f"--train --search: candidates that fit {sorted(seen)}")
    check(all(float(f[9]) <= cap + 1e-3 for f in fits), f"--train --search: a fitting candidate over {cap:.3f} MB")
    check("training device" in r.stdout.split("does not fit")[-1], f"--train --search: micro-batch 64 should not fit "
          f"{cap:.3f} MB: {r.stdout[-400:]}")

# the cost model's optimizer share: a device's backward stage carries, per micro-batch, its weights' gradient sum
# (3 touches of their bytes) and 1/M of the recorded optimizer's step (AdamW's 7 touches, SGD with momentum 5,
# plain SGD 3) at the target's memory rate (10 GB/s by default)
for opt, touches in ((["--optimizer", "adamw"], 7), (["--momentum", "0.9"], 5), ([], 3)):
    est = {}
    for M in (1, 8):
        r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), *opt,
                            "--micro-batches", str(M), "--report-json", f"cost{M}.json", "-o", "cost.plan", "-q"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"ppcc --micro-batches {M}: exit {r.returncode}: {r.stderr[-300:]}")
        if r.returncode == 0:
            with open(f"cost{M}.json") as f:
                est[M] = json.load(f)["stages"]
    if len(est) == 2:
        w = sum(np.load(os.path.join("full", n)).nbytes for n in os.listdir("full")) if os.path.isdir("full") else 0
        want = w * (touches - touches / 8) / 10e9 * 1e3  # ms: the optimizer's share at M = 1 less at M = 8
        got = est[1][1]["est_time_ms"] - est[8][1]["est_time_ms"]
        check(w > 0 and abs(got - want) <= 1e-3 * want, f"{opt}: the backward stage's time at 1 micro-batch less at "
              f"8: {got:.6g} ms, for {w} bytes of weights {want:.6g} ms")
        check(est[1][0]["est_time_ms"] == est[8][0]["est_time_ms"], "the forward stage's time moved with --micro-batches")

# --profile and --trace of a training run (threads): every node of the plan's four stages timed (the backward's
# too), the times the means over the steps after the first, each stage's no more than the time the stage loop
# measured it busy in those steps (--log-json's stage_busy_s, an independent clock); ppcc --train --profile
# prices every op by them; the timeline holds the last step's micro-batches on each stage. Refused: --stats-json
# (an inference run's), exit 2.
STEPS = 4
r = subprocess.run([PPRT, plans[2], "data", "--steps", str(STEPS), "--accumulate", "4", "--backend", "ref", "-q",
                    "--profile", "prof.json", "--trace", "trace.json", "--log-json", "prof_log.json"],
                   capture_output=True, text=True)
check(r.returncode == 0, f"--profile: exit {r.returncode}: {r.stderr[-300:]}")
if r.returncode == 0:
    prof = json.load(open("prof.json"))["nodes"]
    info = subprocess.run([PPRT, plans[2], "--info", "--json"], capture_output=True, text=True)
    steps = json.load(open("prof_log.json"))["steps"]
    busy = [sum(st["stage_busy_s"][v] for st in steps[1:]) / (4 * (STEPS - 1)) * 1e3 for v in range(4)]
    names = {}
    for ln in subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp",
                              "2", "--dump-ir", "-o", "/dev/null"], capture_output=True, text=True).stdout.splitlines():
        f = ln.split()
        if len(f) > 2 and f[0].startswith("%") and f[1][0] == "s" and "name=" in ln:
            names[ln.rsplit("name=", 1)[1].strip()] = int(f[1][1:].rstrip("W"))
    missing = [n for n in names if n not in prof]
    check(names and not missing, f"--profile: {len(missing)} of the plan's {len(names)} nodes untimed: {missing[:4]}")
    for v in range(4):
        got = sum(ms for n, ms in prof.items() if names.get(n) == v)
        check(0 < got <= 1.1 * busy[v] + 0.05, f"--profile: stage {v}'s nodes {got:.3f} ms a micro-batch, the stage "
              f"busy {busy[v]:.3f} ms")
    check(any(names.get(n, 0) >= 2 and ms > 0 for n, ms in prof.items()), "--profile: no backward node timed")
    r = subprocess.run([PPCC, "net.onnx", "--train", "--loss", "cross-entropy:logits", "-b", str(ROWS), "-pp", "2",
                        "--profile", "prof.json", "--report", "-o", "prof.plan"], capture_output=True, text=True)
    n_ops = len(names)
    check(r.returncode == 0 and f"op times: {n_ops} of {n_ops} ops measured" in r.stdout,
          f"ppcc --train --profile: exit {r.returncode}, {[ln for ln in r.stdout.splitlines() if 'op times' in ln]}")
    tr = json.load(open("trace.json"))
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    spans = {}
    for e in ev:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("micro-batch"):
            spans[e.get("tid")] = spans.get(e.get("tid"), 0) + 1
    check(len(spans) == 4 and all(c == 4 for c in spans.values()),
          f"--trace: micro-batch spans per track {spans}, want 4 tracks of the last step's 4")
r = subprocess.run([PPRT, plans[2], "data", "--steps", "1", "-q", "--stats-json", "s.json"], capture_output=True,
                   text=True)
check(r.returncode == 2 and "--log-json" in r.stderr, f"--stats-json in training: exit {r.returncode}, {r.stderr[-200:]}")

# a loss that turns NaN: stops with the step and micro-batch named (exit 1); bad data (exit 2)
os.makedirs("nan", exist_ok=True)
xn = XT.copy()
xn[40] = np.nan
np.save("nan/input.npy", xn)
np.save("nan/labels.npy", YT)
r = subprocess.run([PPRT, plans[1], "nan", "--epochs", "1", "--no-shuffle", "-q"], capture_output=True, text=True)
check(r.returncode == 1 and "step 3, micro-batch 0: the loss is nan" in r.stderr,
      f"nan: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
r = subprocess.run([PPRT, plans[1], "nan", "--epochs", "1", "--no-shuffle", "--skip-nonfinite", "-q"],
                   capture_output=True, text=True)
check(r.returncode == 0, f"nan --skip-nonfinite: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
os.makedirs("bad", exist_ok=True)
np.save("bad/input.npy", XT[:, :, :4])
np.save("bad/labels.npy", YT)
r = subprocess.run([PPRT, plans[1], "bad", "--epochs", "1", "-q"], capture_output=True, text=True)
check(r.returncode == 2 and "input.npy" in r.stderr and "input 'input' takes" in r.stderr,
      f"bad shape: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
np.save("bad/input.npy", XT[:20])
np.save("bad/labels.npy", YT[:20])
r = subprocess.run([PPRT, plans[1], "bad", "--epochs", "1", "--accumulate", "2", "-q"], capture_output=True, text=True)
check(r.returncode == 2 and "one step takes 2 micro-batches of 16" in r.stderr,
      f"too few samples: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
np.save("bad/labels.npy", YT[:20].astype(np.int32))
np.save("bad/input.npy", XT[:20])
r = subprocess.run([PPRT, plans[1], "bad", "--epochs", "1", "-q"], capture_output=True, text=True)
check(r.returncode == 2 and "labels" in r.stderr, f"int32 labels: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
r = subprocess.run([PPRT, os.path.join(SRC, "samples", "digits", "model.onnx"), "data", "--epochs", "1", "-q"],
                   capture_output=True, text=True)
check(r.returncode == 2, f"a model for a plan: exit {r.returncode}")

testlib.finish("train_run")
