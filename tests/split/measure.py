#!/usr/bin/env python3
"""ppcc --measure on the digits sample (about 5 s).

With the real pprt: the split compiles from measured times (the report says
every op was measured), runs, and gives -pp 1's outputs bit for bit; the
temporary directory is gone afterwards, also when pprt fails.

With a stand-in pprt ($PPCC_PPRT, this script with --fake): what ppcc asks
of it (a one-stage plan, 3 micro-batches of random inputs shaped like the
model's input with values in (-1, 1), one untimed, a thread count of the
cores over the stages unless --measure-args gives one) and what ppcc does
with the profile it writes back: node k of the profile costs 2^k ms (or
2^(7-k)), so the min-max split has one unique answer (the heaviest node
alone in its stage), and each stage's estimate is the sum of its nodes'
times plus its message over the link.

--search --measure: a profile at each micro-batch size, the plan's options
say --measure. A SIGTERM or SIGINT to ppcc while pprt runs stops pprt,
removes the directory and exits 128 + the signal, with no plan.

Errors: no pprt, a pprt that fails (its exit 2, bad input, is ppcc's exit 2;
another status is exit 1), --measure with --profile or --max-batch,
--measure-runs 0, --measure-args without --measure: exit 2 with a message.

Usage: measure.py WORKDIR (env: PPCC, PPRT, SRC)."""
import json
import os
import shutil
import subprocess
import sys

if len(sys.argv) > 1 and sys.argv[1] == "--fake":
    # pprt PLAN DATA -o OUT -q --warmup 1 --profile PROF [--threads T] ...
    import numpy as np
    args = sys.argv[2:]
    rec = {"argv": args}
    data = args[1]
    rec["files"] = {f: [list(a.shape), str(a.dtype), float(a.min()), float(a.max())]
                    for f in sorted(os.listdir(data)) for a in [np.load(os.path.join(data, f))]}
    with open(os.environ["FAKE_LOG"] + f".{os.getpid()}", "w") as f:
        json.dump(rec, f)
    os.replace(os.environ["FAKE_LOG"] + f".{os.getpid()}", os.environ["FAKE_LOG"])  # copies run side by side
    with open(os.environ["FAKE_LOG"] + ".calls", "a") as f:
        f.write(json.dumps({"shape": rec["files"]["input.npy"][0], "cpus": sorted(os.sched_getaffinity(0)),
                            "profile": args[args.index("--profile") + 1]}) + "\n")
    batch = rec["files"]["input.npy"][0][0] // int(os.environ.get("FAKE_RUNS", "3"))
    names = json.load(open(os.environ["FAKE_NAMES"]))
    rev = os.environ.get("FAKE_REVERSE") == "1"
    prof = args[args.index("--profile") + 1]
    scale = 3.0 if prof.endswith(".1") else 1.0  # the second of two copies side by side: 3x the times
    with open(prof, "w") as f:
        f.write('{"micro_batch": %d, "unit": "ms", "device": "fake", "nodes": {\n' % batch)
        f.write(",\n".join(f'  "{n}": {scale * 2.0 ** ((len(names) - 1 - k) if rev else k):.6f}'
                            for k, n in enumerate(names)))
        f.write("\n}}\n")
    if os.environ.get("FAKE_SLEEP"):
        import signal
        import time
        if os.environ.get("FAKE_DEAF") == "1":  # a copy that misses the signal passed on
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(os.environ["FAKE_LOG"] + ".sleeping", "w").close()
        time.sleep(float(os.environ["FAKE_SLEEP"]))
    sys.exit(int(os.environ.get("FAKE_EXIT", "0")))

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
work = os.path.abspath(sys.argv[1])
os.makedirs(work, exist_ok=True)
os.chdir(work)
MODEL = os.path.join(SRC, "samples/digits/model.onnx")
DATA = os.path.join(SRC, "samples/digits/data")
TMP = os.path.join(work, "tmp")
shutil.rmtree(TMP, ignore_errors=True)  # what a failed run left must not fail this one
os.makedirs(TMP)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(argv, code=0, env=None):
    e = dict(os.environ, TMPDIR=TMP, **(env or {}))
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=e)
    if r.returncode != code:
        failures.append(f"{' '.join(argv)}: exit {r.returncode} (want {code}): {r.stderr.strip()[:600]}")
    check(os.listdir(TMP) == [], f"{' '.join(argv)}: left {os.listdir(TMP)} in TMPDIR")
    return r


def report_stages(text):
    """(ops, est_ms, send_MB, first, last) per stage row of ppcc --report."""
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 11 and f[0].isdigit() and f[9] == "..":
            rows.append((int(f[1]), float(f[7]), float(f[6]), f[8], f[10]))
    return rows


# the real pprt
run([PPCC, MODEL, "-pp", "1", "-b", "16", "-q", "-o", "one.plan"])
run([PPRT, "one.plan", DATA, "-q", "-o", "out1", "--profile", "real.json"])
names = list(json.load(open("real.json"))["nodes"])
check(len(names) == 8, f"digits' profile names {len(names)} nodes, want 8: {names}")
real = json.load(open("real.json"))
check(real.get("unit") == "ms", f"pprt's profile names its unit {real.get('unit')!r}, want 'ms'")
# ppcc reads the unit: a profile in another is refused (not taken as ms), one without any is ms (older pprt)
with open("real.json") as f:
    text = f.read()
with open("in_s.json", "w") as f:
    json.dump({**real, "unit": "s"}, f)
with open("no_unit.json", "w") as f:
    json.dump({k: v for k, v in real.items() if k != "unit"}, f)
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "in_s.json", "-q", "-o", "x.plan"], 2)
check('times in "s", expected "ms"' in r.stderr, f"a profile in seconds: {r.stderr[:400]}")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "no_unit.json", "--report", "-o", "nu.plan"])
check("op times: 8 of 8 ops measured" in r.stdout, f"a profile without a unit: {r.stdout[:400]}")
# ppcc reads a profile as JSON, not as pprt's layout: the same profile re-saved by Python's json.dump (one
# line, keys in another order) gives the same plan byte for byte; broken JSON is refused naming the file
with open("redumped.json", "w") as f:
    json.dump(dict(reversed(list(real.items()))), f)
run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "real.json", "-q", "-o", "pa.plan"])
run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "redumped.json", "-q", "-o", "pb.plan"])
with open("pa.plan", "rb") as a, open("pb.plan", "rb") as b:
    pa, pb = a.read(), b.read()
check(pa == pb, "a profile re-saved by json.dump gives another plan")  # (a plan records no profile's path)
with open("broken.json", "w") as f:
    f.write(text[:len(text) // 2])
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "broken.json", "-q", "-o", "x.plan"], 2)
check("broken.json: not JSON" in r.stderr, f"a broken profile: {r.stderr[:400]}")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--report", "-o", "m.plan"])
check("op times: 8 of 8 ops measured" in r.stdout, f"--measure's report: {r.stdout[:600]}")
check("--measure: pprt timed 8 of 8 ops" in r.stderr, f"--measure's note: {r.stderr[:600]}")
run([PPRT, "m.plan", DATA, "-q", "-o", "out2", "--threads", "1"])
for f in ("logits.npy",):
    with open(os.path.join("out1", f), "rb") as a, open(os.path.join("out2", f), "rb") as b:
        check(a.read() == b.read(), f"--measure's split gives other outputs than -pp 1 ({f})")
# pprt names an unbalanced roofline split and the remedy; not a measured one
run([PPCC, MODEL, "-pp", "2", "-b", "16", "--gflops", "0:100000,1:0.001", "-q", "-o", "skew.plan"])
r = run([PPRT, "skew.plan", DATA, "-o", "out_skew", "--threads", "1"])
check("imbalance: stage 0 was busy" in r.stdout and "ppcc --measure" in r.stdout, f"a skewed split's run: {r.stdout}")
r = run([PPRT, "m.plan", DATA, "-o", "out_m", "--threads", "1"])
check("imbalance:" not in r.stdout, f"a measured split's run: {r.stdout}")
# nor a split by another policy (it does not balance time: --measure would not move it)
run([PPCC, MODEL, "-pp", "2", "-b", "16", "--policy", "uniform", "--gflops", "0:100000,1:0.001", "-q", "-o", "uni.plan"])
r = run([PPRT, "uni.plan", DATA, "-o", "out_uni", "--threads", "1"])
check("imbalance:" not in r.stdout, f"a uniform-policy split's run: {r.stdout}")

# stages placed on one backend: profiled there; on two: refused (one profile cannot price both)
run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--placement", "0:ref,1:ref", "-q", "-o", "pl.plan"])
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--placement", "0:ref,1:dnnl", "-q", "-o", "x.plan"], 2)
check("times one kind of device" in r.stderr and "stage 1 on dnnl" in r.stderr, f"mixed placement: {r.stderr[:400]}")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--profile", "real.json", "--placement", "0:ref,1:dnnl", "-o", "pw.plan"])
check("warning: --placement puts stage 0 on ref and stage 1 on dnnl" in r.stderr, f"--profile, mixed placement: "
      f"{r.stderr[:400]}")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--measure-args", "--backend nosuch", "-q", "-o", "x.plan"], 2)
check("pprt exited with status 2" in r.stderr and "nosuch" in r.stderr, f"a failing pprt: {r.stderr[:600]}")
check(not os.path.exists("x.plan"), "a failed --measure wrote a plan")

# a stand-in pprt
with open("names.json", "w") as f:
    json.dump(names, f)
fake = os.path.join(work, "fake_pprt")
with open(fake, "w") as f:
    f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} --fake \"$@\"\n")
os.chmod(fake, 0o755)
cores = len(os.sched_getaffinity(0))
import numpy as np
sample = list(np.load(os.path.join(DATA, "input.npy")).shape[1:])
for rev in ("0", "1"):
    env = {"PPCC_PPRT": fake, "FAKE_LOG": os.path.join(work, "fake.json"), "FAKE_NAMES": os.path.join(work, "names.json"),
           "FAKE_REVERSE": rev}
    r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--report", "-o", f"f{rev}.plan"], env=env)
    rec = json.load(open("fake.json"))
    a = rec["argv"]
    want_t = str(max(1, cores // 2))
    check(a[2:9] == ["-o", a[3], "-q", "--warmup", "1", "--profile", a[8]] and a.count("--threads") == 1 and
          a[a.index("--threads") + 1] == want_t, f"pprt's arguments: {a} (want --threads {want_t})")
    check(list(rec["files"]) == ["input.npy"] and rec["files"]["input.npy"][0] == [48] + sample and
          rec["files"]["input.npy"][1] == "float32" and -1 < rec["files"]["input.npy"][2] < 0 <
          rec["files"]["input.npy"][3] < 1, f"the inputs ppcc wrote: {rec['files']}")
    rows = report_stages(r.stdout)
    # two copies side by side (one per stage, on 2+ cores): the mean of 1x and 3x
    mean = 2.0 if min(2, cores) == 2 else 1.0
    t = [mean * 2.0 ** ((7 - k) if rev == "1" else k) for k in range(8)]
    # the heaviest node (2^7 ms) alone; every other split has a stage over 2^7 + 2^6
    want = (1, names[0], names[0]) if rev == "1" else (7, names[0], names[-2])
    check(len(rows) == 2 and (rows[0][0], rows[0][3], rows[0][4]) == want, f"split by the fake times ({rev}): {rows}")
    if len(rows) == 2:
        first = 1 if rev == "1" else 7
        sums = [sum(t[:first]), sum(t[first:])]
        for s in range(2):
            link_ms = rows[s][2] * 1e6 / 10e9 * 1e3  # the report's send_MB over the default 10 GB/s link
            check(abs(rows[s][1] - sums[s] - link_ms) < 0.002, f"stage {s} est_ms {rows[s][1]}: want the profile's "
                  f"{sums[s]} ms + {link_ms:.4f} ms sending ({rev})")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "--measure-args", "--threads 3 --backend ref",
         "--measure-runs", "2", "-q", "-o", "f.plan"], env=dict(env, FAKE_RUNS="2"))
a = json.load(open("fake.json"))
check(a["argv"].count("--threads") == 1 and a["argv"][-4:] == ["--threads", "3", "--backend", "ref"],
      f"--measure-args: {a['argv']}")
check(a["files"]["input.npy"][0] == [32] + sample, f"--measure-runs 2: inputs {a['files']}")
# --search: one profile per micro-batch size, each with the cores over --devices threads, as many
# copies side by side as devices share the cores, each on its own
calls = os.path.join(work, "fake.json.calls")
if os.path.exists(calls):
    os.remove(calls)
r = run([PPCC, MODEL, "--devices", "2", "--search", "--batch-sizes", "4,16", "--samples", "64", "--measure", "-o",
         "s.plan"], env=env)
got = [json.loads(x) for x in open(calls)] if os.path.exists(calls) else []
procs = min(2, cores)
check(sorted(g["shape"][0] for g in got) == [12] * procs + [48] * procs and all(g["shape"][1:] == sample for g in got),
      f"--search --measure profiled inputs {got}, want micro-batches 4 and 16, {procs} copies each")
if procs == 2 and len(got) == 4:
    for b in (12, 48):
        two = [g for g in got if g["shape"][0] == b]
        check(not set(two[0]["cpus"]) & set(two[1]["cpus"]) and len(two[0]["cpus"]) == cores // 2,
              f"copies side by side share CPUs: {two}")
        check(two[0]["profile"] != two[1]["profile"], f"copies side by side write one profile: {two}")
check('timing: 2 pprt profiles of "fake' in r.stdout, f"--search --measure: {r.stdout[:500]}")
a = json.load(open("fake.json"))["argv"]
check(a[a.index("--threads") + 1] == str(max(1, cores // 2)), f"--search --measure's threads: {a}")
r = run([PPRT, "--info", "s.plan"])
check("--measure" in r.stdout and "--profile" not in r.stdout, f"the searched plan's options: {r.stdout[:800]}")
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "-q", "-o", "y.plan"], 1, env=dict(env, FAKE_EXIT="3"))
check("pprt exited with status 3" in r.stderr, f"a failing pprt: {r.stderr[:400]}")

# custom splits: the stages of --exec-seq's SPLIT_NODE entries or of --split-at set the threads and copies
with open("seq.txt", "w") as f:
    f.write("stem\nSPLIT_NODE\nblock\nSPLIT_NODE\nhead\n")
for split in (["--exec-seq", "seq.txt"], ["--split-at", "block,head"]):
    if os.path.exists(calls):
        os.remove(calls)
    r = run([PPCC, MODEL, "-b", "16", "--measure", "-q", "-o", "seq.plan"] + split, env=env)
    got = [json.loads(x) for x in open(calls)] if os.path.exists(calls) else []
    a = json.load(open("fake.json"))["argv"]
    check(len(got) == min(3, cores) and a[a.index("--threads") + 1] == str(max(1, cores // 3)),
          f"{split} (3 stages): {len(got)} copies, argv {a}; want {min(3, cores)} copies of {max(1, cores // 3)} "
          "threads")

# a signal while pprt runs: pprt is stopped, the directory removed, ppcc exits 128 + signal, no plan;
# copies that ignore the signal passed on are killed a few seconds later
import signal
import time
for argv, sig, deaf in (([], signal.SIGTERM, "0"), (["--devices", "2", "--search", "--batch-sizes", "4"], signal.SIGINT, "0"),
                        (["-pp", "2", "-b", "16"], signal.SIGINT, "1")):
    flag = os.path.join(work, "fake.json.sleeping")
    if os.path.exists(flag):
        os.remove(flag)
    cmd = [PPCC, MODEL, "--measure", "-q", "-o", "sig.plan"] + (argv or ["-pp", "2", "-b", "16"])
    p = subprocess.Popen(cmd, env=dict(os.environ, TMPDIR=TMP, FAKE_SLEEP="60", FAKE_DEAF=deaf, **env), stderr=subprocess.PIPE)
    t0 = time.time()
    while not os.path.exists(flag) and time.time() - t0 < 30:
        time.sleep(0.05)
    check(os.path.exists(flag), f"{cmd}: the stand-in pprt never started")
    os.kill(p.pid, sig)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    check(rc == 128 + sig, f"{cmd}: signal {int(sig)} while pprt ran: exit {rc}, want {128 + sig}")
    check(time.time() - t0 < 25, f"{cmd}: ppcc waited for pprt's sleep after a signal")
    check(os.listdir(TMP) == [], f"{cmd}: a signal left {os.listdir(TMP)} in TMPDIR")
    check(not os.path.exists("sig.plan"), f"{cmd}: an interrupted --measure wrote a plan")

# bad usage
r = run([PPCC, MODEL, "-pp", "2", "-b", "16", "--measure", "-q", "-o", "z.plan"], 2,
        env={"PPCC_PPRT": os.path.join(work, "no-such-pprt")})
check("cannot run pprt" in r.stderr and "no-such-pprt" in r.stderr, f"no pprt: {r.stderr[:400]}")
for argv, msg in ((["--measure", "--profile", "real.json"], "not both"),
                  (["--measure", "--max-batch", "--max-memory", "1MB"], "nothing to time"),
                  (["--measure", "--measure-runs", "0"], "--measure-runs"), (["--measure-args", "-q"], "for --measure")):
    r = run([PPCC, MODEL, "-pp", "2", "-q", "-o", "z.plan"] + argv, 2)
    check(msg in r.stderr, f"{argv}: {r.stderr[:300]}")
check(not os.path.exists("z.plan"), "bad usage wrote a plan")

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("measure: OK")
