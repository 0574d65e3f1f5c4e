"""What the training tests share: the file a plan output lands in, a
weight's gradient read back from pprt's outputs with its presence and shape
checked, one run of a gradient plan at a split and backend, two runs'
outputs compared bit for bit, and one step's loss and gradients against
PyTorch's."""
import os

import numpy as np

from testlib import check


def file_name(name):
    """The file name pprt gives a tensor name (ir/base.c pp_file_name): any
    character outside [A-Za-z0-9._-] becomes '_'."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def read_grad(out_dir, weight, shape, what):
    """pprt's gradient of `weight` in out_dir, or None (a failed check says
    why) when it is missing or not of `shape`."""
    f = os.path.join(out_dir, file_name(weight + ".grad") + ".npy")
    check(os.path.exists(f), f"{what}: no gradient of '{weight}' among {sorted(os.listdir(out_dir))}")
    if not os.path.exists(f):
        return None
    g = np.load(f)
    check(g.shape == tuple(shape), f"{what}: '{weight}' gradient shape {g.shape}, want {tuple(shape)}")
    return g if g.shape == tuple(shape) else None


# ---- pp.Dropout's mask (runtime/cpu/ref_grad.c), written out on its own ----------------------

M64 = (1 << 64) - 1


def mix(z):
    z = (z + 0x9e3779b97f4a7c15) & M64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def mix_np(z):
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def key_of(name):
    h = 0xcbf29ce484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001b3) & M64
    return h >> 2


def mask(name, ratio, seed, counter, shape):
    """the scaled mask (0 or 1/(1-ratio)) pp.Dropout draws; counter < 0: ones"""
    n = int(np.prod(shape))
    if counter < 0:
        return np.ones(shape, np.float32)
    base = mix(mix(mix(seed & M64) ^ key_of(name)) ^ (counter & M64))
    u = (mix_np(np.uint64(base) ^ np.arange(n, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    r32 = float(np.float32(ratio))  # the attribute is a float32
    scale = np.float32(1.0 / (1.0 - r32)) if r32 < 1 else np.float32(0)
    return np.where(u >= np.float32(ratio), scale, np.float32(0)).astype(np.float32).reshape(shape)


def digits_net():
    """The small residual CNN the training tests train on samples/digits (8x8 images, 10 classes): three 3x3
    convolutions of 16 channels, a max pool, a residual add, global average pooling and a Linear; PyTorch's
    default initialization (seed it before)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
            self.conv3 = nn.Conv2d(16, 16, 3, padding=1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.relu(x + self.conv3(F.relu(self.conv2(x))))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    return Net()


def step_run(ppcc, pprt, model, d, batch, pp, be, tag):
    """One run of model's gradient plan (cross-entropy on its output 'out', a micro-batch of `batch`) at -pp pp on
    backend be over d/data: the plan compiled once into d/pp{pp}.plan, the outputs into d/out_{be}_pp{pp}.
    Returns that folder, or None (a failed check says why)."""
    import subprocess
    plan = os.path.join(d, f"pp{pp}.plan")
    if not os.path.exists(plan):
        r = subprocess.run([ppcc, model, "--train", "--loss", "cross-entropy:out", "-b", str(batch), "-pp", str(pp),
                            "-q", "-o", plan], capture_output=True, text=True)
        check(r.returncode == 0, f"{tag}: ppcc exit {r.returncode}: {r.stderr.strip()[-500:]}")
        if r.returncode:
            return None
    o = os.path.join(d, f"out_{be}_pp{pp}")
    r = subprocess.run([pprt, plan, os.path.join(d, "data"), "-o", o, "-q", "--backend", be], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"{tag}: pprt exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return None if r.returncode else o


def host_steps_of(stderr):
    """The host-fallback steps in the stderr of a pprt run with --cuda-explain (its per-stage summary lines,
    "... N on the host"), summed; None without such lines."""
    lines = [ln for ln in stderr.splitlines() if "steps a micro-batch" in ln]
    return sum(int(ln.rsplit(",", 1)[1].split()[0]) for ln in lines) if lines else None


def host_steps(pprt, plan, data, be="cuda-emu"):
    """The host-fallback steps of every stage of `plan` run once over `data` on backend be (host_steps_of);
    None when the run fails."""
    import subprocess
    r = subprocess.run([pprt, plan, data, "-o", os.path.join(os.path.dirname(plan), "explain_out"), "-q", "--backend",
                        be, "--cuda-explain"], capture_output=True, text=True)
    return None if r.returncode else host_steps_of(r.stderr)


def check_same_outputs(a, b, what):
    """The output folders a and b hold the same files with the same bits (skipped where either is missing)."""
    if os.path.isdir(a) and os.path.isdir(b):
        check(sorted(os.listdir(a)) == sorted(os.listdir(b)) and all(
            np.array_equal(np.load(os.path.join(a, f)), np.load(os.path.join(b, f))) for f in os.listdir(a)),
            f"{what}: not the same bits")


def check_step(out_dir, want_loss, want, tag, rtol, atol_of_max):
    """pprt's loss and gradients in out_dir against PyTorch's (want: weight
    name -> gradient): the loss within rtol 1e-4; each gradient element within
    rtol |w| + atol_of_max x max(its tensor's largest |w|, 1e-3 x the largest
    of all). Returns the worst error beyond rtol, as a share of that largest."""
    M = max(float(np.abs(w).max()) for w in want.values())
    got_loss = np.load(os.path.join(out_dir, "loss.npy"))
    check(np.allclose(got_loss, want_loss, rtol=1e-4, atol=1e-6), f"{tag}: loss {got_loss} want {want_loss}")
    err = 0.0
    for pn, w in want.items():
        g = read_grad(out_dir, pn, w.shape, tag)
        if g is None:
            continue
        big = max(float(np.abs(w).max()), 1e-3 * M)
        excess = np.abs(g - w) - rtol * np.abs(w)
        err = max(err, float(excess.max()) / max(big, 1e-30))
        ok = excess <= atol_of_max * big
        if not ok.all():
            i = tuple(np.argwhere(~ok)[0])
            check(False, f"{tag}: '{pn}' gradient: {int((~ok).sum())} of {w.size} off; first at {list(i)}: "
                  f"{g[i]!r}, want {w[i]!r} (largest {big:.3g})")
        else:
            check(True, "")
    return err
