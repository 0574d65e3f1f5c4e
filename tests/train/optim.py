#!/usr/bin/env python3
"""The optimizer in the plan, its buffers, and the loss scale (issue 55).

On the digits sample's network (samples/digits/model.onnx, -pp 2, rows of
8, 64 samples, 2 micro-batches a step), checked:
  - a plan compiled with the optimizer's options (AdamW with decay, clipping,
    warm-up and cosine; SGD with Nesterov momentum and decay) trains to the
    same bits as a plan compiled without them run with the same options given
    to pprt; pprt --info and ppcc --report name the optimizer;
  - an option given to pprt overrides the plan's: one note line on stderr
    naming it and the plan's value (none under -q), and the weights those of
    the plain plan run with the same options;
  - the loader refuses a plan whose optimizer fields are out of range (the
    metadata patched in place, its checksums made right again): exit 2, the
    field named; ppcc refuses the options without --train (exit 2);
  - the optimizer's buffers: a checkpoint holds NAME.m.npy and NAME.v.npy
    for AdamW, NAME.m.npy only for SGD with momentum, neither for plain SGD;
    ppcc --report counts 5, 4 and 3 x the weights, its totals differing by
    the device's weights exactly;
  - --loss-scale: a static power of two (1024, 1/8) gives the weights of an
    unscaled run bit for bit (AdamW and SGD with momentum); 3 (not a power
    of two) within rounding (1e-3 of a tensor's largest for AdamW, 2e-5 SGD); a scale recorded by ppcc is pprt's;
    --loss-scale dynamic:2^127 overflows the f32 gradients: the log's scale
    per step follows PyTorch GradScaler's rule (written out here: halve on
    an overflow, double after 2000 clean steps) over the steps it skipped,
    at least one is skipped, the count at the log's end agrees, a skipped
    step leaves the weights as they were, bit for bit, and a run resumed
    from a checkpoint ends with the unbroken run's weights and scale; 2000
    clean steps double the scale; under mpirun (when there) a static scale
    gives the threads' bits and dynamic scaling is refused (exit 2).
Usage: optim.py PPCC PPRT WORK"""
import ctypes
import ctypes.util
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402

PPCC, PPRT, WORK = sys.argv[1:4]
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL = os.path.join(SRC, "samples", "digits", "model.onnx")
testlib.start(WORK, "train_optim")
import numpy as np  # noqa: E402

X = np.load(os.path.join(SRC, "samples", "digits", "data", "input.npy"))[:64]
Y = np.load(os.path.join(SRC, "samples", "digits", "labels.npy")).astype(np.int64)[:64]
os.makedirs("data")
np.save("data/input.npy", X)
np.save("data/labels.npy", Y)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def compile_plan(out, opts=(), pp=2):
    r = run([PPCC, MODEL, "-pp", str(pp), "-b", "8", "--train", "--loss", "cross-entropy:logits", "-q", "-o", out,
             *opts])
    check(r.returncode == 0, f"ppcc {' '.join(opts)}: {r.stderr.strip()[:300]}")
    return r


def train(plan, out, opts=(), steps=6, quiet=True, log=None):
    argv = [PPRT, plan, "data", "--steps", str(steps), "--accumulate", "2", "--save-weights", out, *opts]
    argv += ["-q"] if quiet else []
    argv += ["--log-json", log] if log else []
    r = run(argv)
    check(r.returncode == 0, f"pprt {plan} {' '.join(opts)}: exit {r.returncode}: {r.stderr.strip()[:300]}")
    return r


def weights(d):
    return {f: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))} if os.path.isdir(d) else {}


def same_bits(a, b):
    wa, wb = weights(a), weights(b)
    return bool(wa) and wa.keys() == wb.keys() and all(wa[k].tobytes() == wb[k].tobytes() for k in wa)


def notes(r):
    return [ln for ln in r.stderr.splitlines() if ln.startswith("pprt: note: the command line overrides")]


# ---- the plan's optimizer against the same options given to pprt -----------------------------
compile_plan("plain.plan")
CONFIGS = {
    "adamw": ["--optimizer", "adamw", "--lr", "0.004", "--weight-decay", "0.01", "--clip-norm", "0.5",
              "--warmup-steps", "2", "--lr-schedule", "cosine", "--lr-min", "0.0001", "--beta2", "0.99"],
    "sgd": ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--nesterov", "--weight-decay", "0.001"],
}
for name, opts in CONFIGS.items():
    compile_plan(f"{name}.plan", opts)
    train(f"{name}.plan", f"w_{name}_plan")
    train("plain.plan", f"w_{name}_opts", opts)
    check(same_bits(f"w_{name}_plan", f"w_{name}_opts"),
          f"{name}: the plan's recorded optimizer and the same options given to pprt train to different weights")
    info = run([PPRT, "--info", f"{name}.plan"]).stdout
    check(f"optimizer: {name}, lr {opts[3]}" in info, f"{name}: pprt --info does not name the optimizer: {info[:600]}")
    rep = run([PPCC, MODEL, "-pp", "2", "-b", "8", "--train", "--loss", "cross-entropy:logits", "-o", "r.plan",
               "--report", *opts]).stdout
    check(f"optimizer: {name}, lr {opts[3]}" in rep, f"{name}: ppcc --report does not name the optimizer")
train("plain.plan", "w_none")
check(not same_bits("w_none", "w_adamw_plan"), "the adamw plan trains as the plain plan does: its optimizer unused")

# ---- an override: said once, and it wins ------------------------------------------------------
r = train("adamw.plan", "w_over", ["--lr", "0.01", "--clip-norm", "0"], quiet=False)
n = notes(r)
check(len(n) == 1 and "--lr 0.01 (the plan's: 0.004)" in n[0] and "--clip-norm 0 (the plan's: 0.5)" in n[0],
      f"override: want one note naming --lr and --clip-norm with the plan's values, got {n}")
over = [o for o in CONFIGS["adamw"]]
over[over.index("--lr") + 1] = "0.01"
over[over.index("--clip-norm") + 1] = "0"
train("plain.plan", "w_over_opts", over)
check(same_bits("w_over", "w_over_opts"), "override: the weights are not those of the options given to pprt")
r = train("adamw.plan", "w_over_q", ["--lr", "0.01"], quiet=True)
check(not r.stderr.strip(), f"override under -q: stderr {r.stderr[:200]!r}")
r = train("adamw.plan", "w_plain_again", [], quiet=False)
check(not notes(r), "no option given: no note")

# ---- ppcc: the options are --train's -------------------------------------------------------------
r = run([PPCC, MODEL, "--lr", "0.1", "-o", "x.plan"])
check(r.returncode == 2 and "for --train" in r.stderr and not os.path.exists("x.plan"),
      f"ppcc --lr without --train: exit {r.returncode}: {r.stderr[:200]}")

# ---- the loader: corrupt optimizer fields --------------------------------------------------------
XXH = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
XXH.XXH3_64bits.restype = ctypes.c_uint64
XXH.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def varint(b, i):
    x, s = 0, 0
    while True:
        x |= (b[i] & 0x7F) << s
        s += 7
        i += 1
        if not b[i - 1] & 0x80:
            return x, i


def optimizer_fields(meta):
    """Plan field 15 (Optimizer), the metadata's last: {field: (offset, wire type)} of its fields."""
    i, found = 0, None
    while i < len(meta):
        key, i = varint(meta, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            _, i = varint(meta, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            n, i2 = varint(meta, i)
            if f == 15:
                found = (i2, i2 + n)
            i = i2 + n
    out = {}
    if found:
        i = found[0]
        while i < found[1]:
            key, i = varint(meta, i)
            out[key >> 3] = (i, key & 7)
            i = varint(meta, i)[1] if key & 7 == 0 else i + 8
    return out


def patched(src, dst, field, value):
    b = bytearray(open(src, "rb").read())
    moff, mlen = struct.unpack_from("<QQ", b, 32 + 8)
    meta = bytes(b[moff:moff + mlen])
    fields = optimizer_fields(meta)
    if field not in fields:
        return False
    at, wt = fields[field]
    if wt == 1:
        struct.pack_into("<d", b, moff + at, value)
    else:
        b[moff + at] = value  # a one-byte varint
    b[32 + 24:32 + 32] = struct.pack("<Q", XXH.XXH3_64bits(bytes(b[moff:moff + mlen]), mlen))
    b[96:104] = struct.pack("<Q", XXH.XXH3_64bits(bytes(b[:96]), 96))
    open(dst, "wb").write(b)
    return True


compile_plan("scaled.plan", CONFIGS["adamw"] + ["--loss-scale", "8"])
# field number, value, the name the message must give
CORRUPT = [(1, 7, "optimizer"), (2, -1.0, "lr"), (2, float("nan"), "lr"), (6, 1.5, "beta1"), (7, 2.0, "beta2"),
           (8, -1e-8, "eps"), (9, -0.5, "clip-norm"), (12, 1e9, "lr-min"), (13, -8.0, "loss-scale"),
           (13, float("inf"), "loss-scale")]
for field, value, name in CORRUPT:
    ok = patched("scaled.plan", "bad.plan", field, value)
    check(ok, f"field {field} not in the plan's optimizer")
    if not ok:
        continue
    r = run([PPRT, "bad.plan", "data", "--steps", "1", "-q"])
    check(r.returncode == 2 and f"the plan's optimizer: {name}: expected" in r.stderr,
          f"a plan with optimizer {name} = {value}: exit {r.returncode}, {r.stderr.strip()[:200]!r}")
check(patched("scaled.plan", "good.plan", 2, 0.004) and run([PPRT, "good.plan", "data", "--steps", "1", "-q"])
      .returncode == 0, "the patcher itself breaks the plan (the same value written back is refused)")

# ---- the optimizer's buffers ---------------------------------------------------------------------
BUFS = {"adamw": (["--optimizer", "adamw"], {".m", ".v"}, 5), "sgd-momentum": (["--momentum", "0.9"], {".m"}, 4),
        "sgd": ([], set(), 3)}
totals = {}
for name, (opts, kept, copies) in BUFS.items():
    compile_plan(f"b_{name}.plan", opts)
    train(f"b_{name}.plan", f"w_b_{name}", ["--checkpoint", f"ck_{name}", "--save-every", "2"], steps=2)
    files = os.listdir(f"ck_{name}") if os.path.isdir(f"ck_{name}") else []
    got = {e for e in (".m", ".v") if any(f.endswith(e + ".npy") for f in files)}
    check(got == kept and any(f.endswith(".npy") for f in files),
          f"{name}: the checkpoint keeps {sorted(got)}, want {sorted(kept)}")
    rep = run([PPCC, MODEL, "-pp", "2", "-b", "8", "--train", "--loss", "cross-entropy:logits", "-o", "r.plan",
               "--report", *opts]).stdout
    check(f"totals count {copies} x the weights" in rep, f"{name}: the report does not count {copies} x the weights")
    rows = rep.split("msgs_GPipe")[1].splitlines()[1:3] if "msgs_GPipe" in rep else []
    totals[name] = [[float(ln.split()[2]), float(ln.split()[6])] for ln in rows]  # weights, 1F1B total
for d in range(2):
    try:
        w = totals["sgd"][d][0]
        diffs = (totals["adamw"][d][1] - totals["sgd-momentum"][d][1], totals["sgd-momentum"][d][1] - totals["sgd"][d][1])
        check(all(abs(x - w) <= 0.0015 for x in diffs), f"device {d}: the totals differ by {diffs} MB, its weights {w}")
    except (KeyError, IndexError, ValueError) as e:
        check(False, f"device {d}: report rows unreadable: {e}")
r = run([PPRT, "b_sgd.plan", "data", "--steps", "3", "--accumulate", "2", "--resume", "ck_adamw", "-q"])
check(r.returncode == 2 and "optimizer" in r.stderr, f"resuming an adamw checkpoint with plain sgd: {r.stderr[:200]}")

# ---- the loss scale -------------------------------------------------------------------------------
for name in ("adamw", "sgd"):
    for s in ("1024", "0.125"):
        train(f"{name}.plan", f"w_{name}_s{s}", ["--loss-scale", s])
        check(same_bits(f"w_{name}_plan", f"w_{name}_s{s}"), f"{name}: --loss-scale {s} changes the weights' bits")
    # 3 is no power of two: rounding apart, which AdamW's division by the moments' root amplifies for
    # gradients near 0 (measured: 1.9e-4 of a tensor's largest for AdamW, 4.3e-6 for SGD)
    train(f"{name}.plan", f"w_{name}_s3", ["--loss-scale", "3"])
    a, b = weights(f"w_{name}_plan"), weights(f"w_{name}_s3")
    tol = 1e-3 if name == "adamw" else 2e-5
    far = max((float(np.abs(a[k] - b[k]).max() / np.abs(a[k]).max()) for k in a if k in b), default=1.0)
    check(a.keys() == b.keys() and far <= tol, f"{name}: --loss-scale 3 moves the weights {far:.2g} of a tensor's "
          f"largest, more than rounding ({tol})")
train("scaled.plan", "w_scaled", log="scaled.json")
lg = json.load(open("scaled.json")) if os.path.exists("scaled.json") else {"steps": []}
check(lg["steps"] and all(s.get("loss_scale") == 8 for s in lg["steps"]), "the plan's --loss-scale 8 is not pprt's")
check(same_bits("w_scaled", "w_adamw_plan"), "the plan's loss scale 8 changes the weights' bits")


def gradscaler(found_inf, init, growth=2.0, backoff=0.5, interval=2000):
    """PyTorch GradScaler's update rule: the scale each step used, and the last."""
    scale, tracker, used = init, 0, []
    for inf in found_inf:
        used.append(scale)
        if inf:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = scale * growth, 0
    return used, scale


K, INIT = 8, 2.0 ** 127
# AdamW at a constant rate (so that a run stopped early is the longer run's beginning), the scale the plan's
compile_plan("dyn.plan", ["--optimizer", "adamw", "--lr", "0.004", "--loss-scale", f"dynamic:{INIT!r}"])
train("dyn.plan", "w_dyn", steps=K, log="dyn.json")
lg = json.load(open("dyn.json")) if os.path.exists("dyn.json") else {"steps": []}
skipped = [s["skipped"] for s in lg["steps"]]
used, last = gradscaler(skipped, INIT)
check(len(skipped) == K and any(skipped), f"dynamic:2^127: no step skipped ({skipped})")
close = lambda a, b: a is not None and abs(a - b) <= 1e-13 * b  # noqa: E731 (the log's JSON: 15 digits)
check(all(close(s.get("loss_scale"), u) for s, u in zip(lg["steps"], used)) and close(lg.get("loss_scale"), last),
      f"dynamic: the scales {[s.get('loss_scale') for s in lg['steps']]} / {lg.get('loss_scale')}, GradScaler's "
      f"{used} / {last}")
check(lg.get("skipped_steps") == sum(skipped), f"skipped_steps {lg.get('skipped_steps')}, the steps say {sum(skipped)}")
j = next((i + 1 for i, s in enumerate(skipped) if s and i > 0), None)
if j:  # the weights after a skipped step j are those after step j - 1
    train("dyn.plan", "w_dyn_a", steps=j - 1)
    train("dyn.plan", "w_dyn_b", steps=j)
    check(same_bits("w_dyn_a", "w_dyn_b"), f"step {j} was skipped, yet it changed the weights")
    check(not same_bits("w_dyn_a", "w_none"), "the weights before the skipped step never trained")
else:
    check(False, f"no skipped step after the first among {skipped}")
# stopped at step 3 and resumed: the scale and its clean-step count come back with the weights
train("dyn.plan", "w_dyn_ck", ["--checkpoint", "ck_dyn", "--save-every", "3"], steps=3)
train("dyn.plan", "w_dyn_res", ["--resume", "ck_dyn"], steps=K, log="res.json")
res = json.load(open("res.json")) if os.path.exists("res.json") else {}
check(same_bits("w_dyn", "w_dyn_res") and close(res.get("loss_scale"), last),
      "dynamic scaling resumed from a checkpoint: not the unbroken run's weights and scale")
# growth: 2000 clean steps double the scale (2001 one-micro-batch steps of SGD, some 10 s)
r = run([PPRT, "sgd.plan", "data", "--steps", "2001", "--loss-scale", "dynamic:2", "--log-json", "grow.json", "-q"])
g = json.load(open("grow.json")) if r.returncode == 0 else {"steps": []}
sc = [s.get("loss_scale") for s in g["steps"]]
want, want_last = gradscaler([s["skipped"] for s in g["steps"]], 2.0)
check(len(sc) == 2001 and sc == want and sc[1999] == 2 and sc[2000] == 4 and g.get("loss_scale") == want_last,
      f"growth: scales {sc[:1]}..{sc[-2:]}, last {g.get('loss_scale')}; want {want[-2:]}, {want_last}")
# under mpirun (where this pprt has MPI and mpirun is there): a static scale gives the threads' bits, and so does a
# dynamic one
# (not under the ASan build: the mpi tests leave Open MPI's own memory alone, so do these)
MPIRUN = os.environ.get("MPIRUN") if os.environ.get("PP_MPI") == "ON" else None
if MPIRUN and shutil.which(MPIRUN) and "ASAN_OPTIONS" not in os.environ:
    mpi = [MPIRUN, "--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else []) + ["-np", "2", PPRT]
    r = run(mpi + ["adamw.plan", "data", "--steps", "6", "--accumulate", "2", "--loss-scale", "1024", "-q",
                   "--save-weights", "w_mpi"])
    check(r.returncode == 0 and same_bits("w_mpi", "w_adamw_plan"),
          f"mpirun -np 2, --loss-scale 1024: exit {r.returncode}, not the threads' weights: {r.stderr[-300:]}")
    # dynamic scaling: rank 0's verdict (an overflow, from the sums of squares) reaches every rank, whose scale
    # follows it: the threads' weights and scales, bit for bit; stopped at step 3 and resumed, the scale and its
    # count of clean steps reach every rank with the weights (without, the last device's rank seeds its loss
    # gradient with the plan's 2^127 again)
    scales = lambda d: [x.get("loss_scale") for x in d.get("steps", [])]  # noqa: E731
    r = run(mpi + ["dyn.plan", "data", "--steps", str(K), "--accumulate", "2", "-q", "--save-weights", "w_dyn_mpi",
                   "--log-json", "dyn_mpi.json"])
    lm = json.load(open("dyn_mpi.json")) if r.returncode == 0 else {}
    check(r.returncode == 0 and same_bits("w_dyn_mpi", "w_dyn") and scales(lm) == scales(lg),
          f"mpirun -np 2, dynamic scale: exit {r.returncode}, scales {scales(lm)} against the threads' {scales(lg)}, "
          f"or other weights: {r.stderr[-300:]}")
    r = run(mpi + ["dyn.plan", "data", "--steps", "3", "--accumulate", "2", "-q", "--checkpoint", "ck_dyn_mpi",
                   "--save-every", "3"])
    r2 = run(mpi + ["dyn.plan", "data", "--steps", str(K), "--accumulate", "2", "-q", "--resume", "ck_dyn_mpi",
                    "--save-weights", "w_dyn_mpi_res", "--log-json", "res_mpi.json"])
    rm = json.load(open("res_mpi.json")) if r.returncode == 0 and r2.returncode == 0 else {}
    check(r.returncode == 0 and r2.returncode == 0 and same_bits("w_dyn_mpi_res", "w_dyn") and
          close(rm.get("loss_scale"), last), f"mpirun -np 2, dynamic scale resumed: exit {r.returncode}/{r2.returncode}, "
          f"scale {rm.get('loss_scale')} (want {last}), or other weights: {(r.stderr + r2.stderr)[-300:]}")
else:
    print("train_optim: no mpirun, no MPI in pprt, or an ASan build: the mpirun checks left out")
testlib.finish("train_optim")
