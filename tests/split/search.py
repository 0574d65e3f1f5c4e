#!/usr/bin/env python3
"""ppcc --search and --max-batch on the digits sample (about 5 s).

--search must report, for every candidate, exactly what `ppcc -pp P -b B`
reports for that configuration (memory, stage times), price it by the
documented model (recomputed here from the stage times: T = sum + (m-1) max,
m = ceil(ceil(S/B)/dp)), sort by it, mark what does not fit its caps (and a
direct compile of it must fail), and write the best plan byte-identical to a
direct compile. Profiles: the one nearest each micro-batch is used, profiles
of two device kinds are refused. --max-batch: the micro-batch it reports
compiles under the caps with `ppcc -pp P -b B`, and B+1 does not. Placement:
a cut between hosts costs its bytes over --net-gbps.

Usage: search.py WORKDIR (env: PPCC, PPRT, SRC)."""
import json
import math
import os
import subprocess
import sys

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
MODEL = os.path.join(SRC, "samples/digits/model.onnx")
DATA = os.path.join(SRC, "samples/digits/data")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(argv, code=0):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != code:
        failures.append(f"{' '.join(argv)}: exit {r.returncode} (want {code}): {r.stderr.strip()[:400]}")
    return r


def direct(pp, b, *extra):
    """Stage figures of a direct compile."""
    r = run([PPCC, MODEL, "-pp", str(pp), "-b", str(b), "-o", "direct.plan", "--report-json", "direct.json", "-q",
             *extra])
    if r.returncode != 0:
        return None
    doc = json.load(open("direct.json"))
    check(doc.get("format") == "ppcc-report" and doc.get("version") == 1, f"direct.json's format: {str(doc)[:120]}")
    # the tensors crossing each cut: element types by name
    check(all(t["dtype"] == "f32" for c in doc["cuts"] for t in c["tensors"]), f"cut dtypes: {doc['cuts']}")
    return doc["stages"]


S = 100
# profiles at micro-batch 1 and 4, one thread (a device of one core)
for b in (1, 4):
    run([PPCC, MODEL, "-b", str(b), "-o", f"p{b}.plan", "-q"])
    run([PPRT, f"p{b}.plan", DATA, "--threads", "1", "--warmup", "1", "-q", "-o", "o", "--profile", f"prof{b}.json"])
prof = ["--profile", "prof1.json", "--profile", "prof4.json"]

# ---- the search --------------------------------------------------------------------------------
r = run([PPCC, MODEL, "--devices", "2", "--search", "--samples", str(S), "--batch-sizes", "1,2,4,16",
         "--report-json", "search.json", *prof])
doc = json.load(open("search.json"))
check(doc.get("format") == "ppcc-search" and doc.get("version") == 1, f"search.json's format: {str(doc)[:120]}")
res = doc["search"]
cands = res["candidates"]
check(len(cands) == 8, f"8 candidates (2 depths x 4 micro-batch sizes), got {len(cands)}")
check(res["device"].startswith(("ref ", "dnnl ")) and "1 thread per stage" in res["device"], f"device kind: {res['device']}")
check(r.stdout.count("\n") >= 10 and "best: -pp" in r.stdout, f"the table: {r.stdout}")
rates = [c["est_samples_per_s"] for c in cands]
check(rates == sorted(rates, reverse=True), f"not sorted by throughput: {rates}")
for c in cands:
    pp, dp, b = c["pp"], c["dp"], c["micro_batch"]
    check(dp == 2 // pp and c["fits"], f"candidate {c}")
    # the profile nearest the micro-batch by ratio (2 is as near 1 as 4: the larger)
    want_t = {1: 1, 2: 4, 4: 4, 16: 4}[b]
    check(c["timed_at_micro_batch"] == want_t, f"b {b}: timed at {c['timed_at_micro_batch']}, want {want_t}")
    st = direct(pp, b, *prof)
    if st is None:
        continue
    for k, s in enumerate(st):
        cs = c["stages"][k]
        check(cs["memory_bytes"] == s["memory_bytes"] and abs(cs["est_time_ms"] - s["est_time_ms"]) < 1e-6,
              f"pp {pp} b {b} stage {k}: search {cs}, ppcc -pp -b {s}")
    t = [s["est_time_ms"] for s in c["stages"]]
    m = math.ceil(math.ceil(S / b) / dp)
    run_ms = sum(t) + (m - 1) * max(t)
    check(c["micro_batches"] == m, f"pp {pp} b {b}: {c['micro_batches']} micro-batches, want {m}")
    # the stage times are printed to 1e-6 ms
    tol = (m + pp) * 1e-6
    check(abs(c["est_run_ms"] - run_ms) <= tol and abs(c["est_samples_per_s"] - S / run_ms * 1e3) <=
          c["est_samples_per_s"] * tol / run_ms, f"pp {pp} b {b}: run {c['est_run_ms']} ms, want {run_ms}")

# -o: the best plan, the same bytes as compiling its configuration directly
best = cands[0]
run([PPCC, MODEL, "--devices", "2", "--search", "--samples", str(S), "--batch-sizes", "1,2,4,16", "-q", "-o",
     "best.plan", *prof])
run([PPCC, MODEL, "-pp", str(best["pp"]), "-b", str(best["micro_batch"]), "-q", "-o", "same.plan", *prof])
check(open("best.plan", "rb").read() == open("same.plan", "rb").read(), "the search's plan differs from -pp -b")
run([PPRT, "best.plan", DATA, "-q", "-o", "o", "--threads", "1"])

# profiles of two device kinds are refused
run([PPRT, "p4.plan", DATA, "--threads", "2", "--no-pin", "-q", "-o", "o", "--profile", "prof4t2.json"])
r = run([PPCC, MODEL, "--devices", "2", "--search", "--profile", "prof1.json", "--profile", "prof4t2.json"], 2)
check("give the profiles of one device kind" in r.stderr, f"mixed device kinds: {r.stderr.strip()}")
# a profile written before the oneDNN and reference backends had one name each ("cpu-dnnl f32, ...",
# "cpu-ref f32, ...") is of today's kind
old = json.load(open("prof1.json"))
if old["device"].startswith(("dnnl ", "ref ")):
    old["device"] = "cpu-" + old["device"]
    json.dump(old, open("prof1old.json", "w"))
    run([PPCC, MODEL, "--devices", "2", "--search", "--profile", "prof1old.json", "--profile", "prof4.json"])

# ---- caps: what does not fit is marked, and does not compile either ---------------------------
# a cap between the smallest and the largest candidate's largest stage
mems = sorted(max(s["memory_bytes"] for s in c["stages"]) for c in cands)
cap = (mems[1] + mems[-2]) // 2
r = run([PPCC, MODEL, "--devices", "2", "--search", "--samples", str(S), "--batch-sizes", "1,2,4,16",
         "--max-memory", str(cap), "--report-json", "capped.json", *prof])
capped = json.load(open("capped.json"))["search"]["candidates"]
fit = [c for c in capped if c["fits"]]
check(0 < len(fit) < len(capped), f"cap {cap}: {len(fit)} of {len(capped)} fit")
check(all(c["fits"] for c in capped[:len(fit)]), "the fitting candidates come first")
check("does not fit:" in r.stdout, "the table lists what does not fit")
for c in capped:
    pp, b = c["pp"], c["micro_batch"]
    code = 0 if c["fits"] else 2
    rr = run([PPCC, MODEL, "-pp", str(pp), "-b", str(b), "--max-memory", str(cap), "-o", "c.plan", "-q", *prof], code)
    if c["fits"]:
        check(max(s["memory_bytes"] for s in c["stages"]) <= cap, f"pp {pp} b {b} fits but is over the cap")
    else:
        check(c["over_stage"] >= 0 and c["over_bytes"] > c["over_cap_bytes"] == cap and "cap" in c["why"],
              f"pp {pp} b {b}: why {c['why']!r}, over stage {c['over_stage']}")
r = run([PPCC, MODEL, "--devices", "2", "--search", "--max-memory", "10KB"], 2)
check("no configuration of 2 devices fits" in r.stderr, f"nothing fits: {r.stderr.strip()}")

# ---- --max-batch ----------------------------------------------------------------------------------
for pp, cap in ((1, "2MB"), (2, "1500KB")):
    r = run([PPCC, MODEL, "--max-batch", "-pp", str(pp), "--max-memory", cap, "--report-json", "mb.json"])
    doc = json.load(open("mb.json"))
    check(doc.get("format") == "ppcc-max-batch" and doc.get("version") == 1, f"mb.json's format: {str(doc)[:120]}")
    mb = doc["max_batch"]
    b = mb["micro_batch"]
    check(b > 1 and f"largest micro-batch: {b}" in r.stdout, f"-pp {pp} under {cap}: {r.stdout}")
    run([PPCC, MODEL, "-pp", str(pp), "-b", str(b), "--max-memory", cap, "-o", "mb.plan", "-q"], 0)
    run([PPCC, MODEL, "-pp", str(pp), "-b", str(b + 1), "--max-memory", cap, "-o", "mb.plan", "-q"], 2)
    lim = mb["limit"]
    check(lim["micro_batch"] == b + 1 and 0 <= lim["stage"] < pp and lim["need_bytes"] > lim["cap_bytes"],
          f"-pp {pp}: limit {lim}")
    check(f"limited by stage {lim['stage']}: at micro-batch {b + 1}" in r.stdout, f"-pp {pp}: {r.stdout}")
r = run([PPCC, MODEL, "--max-batch", "-pp", "2", "--max-memory", "10KB"], 2)
check("not even micro-batch 1 fits" in r.stderr, f"nothing fits: {r.stderr.strip()}")

# ---- placement: the cut between two hosts goes over --net-gbps --------------------------------
base = direct(4, 16, "--policy", "uniform")
placed = direct(4, 16, "--policy", "uniform", "--devices-per-host", "2", "--net-gbps", "0.5", "--link-gbps", "10")
if base and placed:
    for k in range(4):
        extra = placed[k]["est_time_ms"] - base[k]["est_time_ms"]
        send = base[k]["boundary_out_bytes"]
        want = send / 0.5e9 * 1e3 - send / 10e9 * 1e3 if k == 1 else 0.0  # devices 1 | 2: another host
        check(abs(extra - want) < 1e-6, f"stage {k}: {extra} ms more with the placement, want {want}")

for f in failures:
    print("FAIL:", f)
print(f"search: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
