#!/usr/bin/env python3
"""pprt --trace: the timeline is valid Chrome trace event JSON and says what
happened.

No trace processor runs offline here (the `perfetto` package on PyPI fetches
its trace_processor_shell binary from the network on first use), so the file
is checked against the format as documented ("Trace Event Format", the JSON
Object Format that chrome://tracing and Perfetto read):
  - a JSON object whose traceEvents is a list; every event has name, ph, pid,
    tid; "X" events a numeric ts and a dur >= 0; "M" events name one of
    process_name, thread_name, thread_sort_index with args; "s"/"f" flow
    events an id, each start matched by one finish with a later or equal ts,
    on the next stage's track;
  - one track (tid, named by thread_name) per stage (per rank under mpirun),
    no other;
  - on each track, one micro-batch span per micro-batch, in order, not
    overlapping; with --profile every node span lies inside a micro-batch
    span of its track and node spans do not overlap (they nest);
  - node spans name the plan's nodes of that stage (pprt --info);
  - the bubble can be seen: the idle share of the tracks over the run equals
    the bubble pprt reports in --stats-json (within 0.002), stage 1 starts
    its first micro-batch only after stage 0 finished it (the fill), and
    every micro-batch reaches the last stage after it left the first;
  - the latencies: otherData.latency_ms lists one per micro-batch, each
    what the spans allow (from the end of its first stage's span to the end
    of its last stage's, at least; from the start of the first to the start
    of the last stage's next span on that track, or the run's end, at most:
    the sink takes it on that thread in between), and --stats-json's mean, median,
    p90, p95 and p99 are NumPy's over that list (nearest rank:
    np.percentile(method="inverted_cdf")), in that order.
The default --warmup (1) runs in every case but one, which has --warmup 0;
the warm-up never shows: the spans are the M timed micro-batches.
Runs the digits sample at -pp 2 and -pp 3 on the threaded runtime, with and
without --profile, and as two replicas (--replicas 2), and at -pp 1 with
--warmup 0; with --mpi instead under mpirun (-np 2 with --profile; -np 4 with
--replicas 2 and --warmup 3), exit 77
(skipped) when pprt was built without MPI.
Usage: run.py WORKDIR [--mpi] (env: PPCC, PPRT, SRC; for --mpi MPIRUN and
PP_MPI=ON)."""
import json
import os
import re

import numpy as np
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from harness import finish, run  # noqa: E402

PPCC, PPRT, SRC = os.environ["PPCC"], os.environ["PPRT"], os.environ["SRC"]
DIGITS = os.path.join(SRC, "samples", "digits")
problems = []


def plan_nodes(plan):
    """stage -> its node names, from pprt --info"""
    out = run([PPRT, "--info", plan])
    stages, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"stage (\d+): ", line)
        if m:
            cur = int(m.group(1))
            stages[cur] = []
        elif cur is not None and line.startswith("  ") and not line.startswith("  sends:"):
            stages[cur].append(line.split(None, 1)[1])
    return stages


def check(tag, path, stats_path, stages, replicas, nodes_on, node_names):
    fail = lambda msg: problems.append(f"{tag}: {msg}")  # noqa: E731
    doc = json.load(open(path))
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return fail("not a JSON object with a traceEvents list")
    ev = doc["traceEvents"]
    for e in ev:
        for k in ("name", "ph", "pid", "tid"):
            if k not in e:
                return fail(f"event without '{k}': {e}")
        if e["ph"] == "X":
            if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                return fail(f"complete event without ts/dur >= 0: {e}")
        elif e["ph"] == "M":
            if e["name"] not in ("process_name", "thread_name", "thread_sort_index") or "args" not in e:
                return fail(f"bad metadata event: {e}")
        elif e["ph"] in ("s", "f"):
            if "id" not in e or not isinstance(e.get("ts"), (int, float)):
                return fail(f"flow event without id/ts: {e}")
        else:
            return fail(f"unexpected phase {e['ph']!r}")
    names = {e["tid"]: e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    tracks = stages * replicas
    if len(names) != tracks or len(set(names.values())) != tracks:
        fail(f"{len(names)} named tracks {sorted(names.values())}, expected {tracks}")
    used = {e["tid"] for e in ev if e["ph"] != "M"}
    if not used <= set(names):
        fail(f"events on unnamed tracks {sorted(used - set(names))}")
    stats = json.load(open(stats_path))
    M = stats["micro_batches"]
    spans, busy = {}, 0.0
    t_lo, t_hi = float("inf"), 0.0
    stage_of = {}
    for tid in names:
        mbs = sorted((e for e in ev if e["tid"] == tid and e.get("cat") == "micro-batch"), key=lambda e: e["ts"])
        stage = {e["args"]["stage"] for e in mbs}
        if len(stage) != 1:
            fail(f"track {names[tid]} holds micro-batches of stages {stage}")
            continue
        stage_of[tid] = stage.pop()
        for a, b in zip(mbs, mbs[1:]):
            if b["ts"] < a["ts"] + a["dur"] - 1e-3 or b["args"]["micro_batch"] <= a["args"]["micro_batch"]:
                fail(f"track {names[tid]}: micro-batch spans overlap or run out of order "
                     f"({a['name']} then {b['name']})")
                break
        spans[tid] = {e["args"]["micro_batch"]: e for e in mbs}
        busy += sum(e["dur"] for e in mbs)
        if mbs:
            t_lo, t_hi = min(t_lo, mbs[0]["ts"]), max(t_hi, mbs[-1]["ts"] + mbs[-1]["dur"])
        nodes = sorted((e for e in ev if e["tid"] == tid and e.get("cat") == "node"), key=lambda e: e["ts"])
        if nodes_on and not nodes:
            fail(f"track {names[tid]}: no node spans with --profile")
        if not nodes_on and nodes:
            fail(f"track {names[tid]}: node spans without --profile")
        j = 0
        for n in nodes:  # inside a micro-batch span of this track, not overlapping the one before
            while j < len(mbs) and mbs[j]["ts"] + mbs[j]["dur"] < n["ts"] + n["dur"] - 1e-3:
                j += 1
            if j == len(mbs) or n["ts"] < mbs[j]["ts"] - 1e-3:
                fail(f"track {names[tid]}: node span {n['name']} at {n['ts']} lies outside every micro-batch span")
                break
            if n["name"] not in node_names[stage_of[tid]]:
                fail(f"track {names[tid]}: node span {n['name']!r} is not a node of stage {stage_of[tid]}")
                break
        for a, b in zip(nodes, nodes[1:]):
            if b["ts"] < a["ts"] + a["dur"] - 1e-3:
                fail(f"track {names[tid]}: node spans {a['name']} and {b['name']} overlap")
                break
    per_stage = {}
    for tid, s in stage_of.items():
        per_stage.setdefault(s, set()).update(spans[tid])
    for s in range(stages):
        if per_stage.get(s) != set(range(M)):
            fail(f"stage {s} ran micro-batches {sorted(per_stage.get(s, []))[:5]}..., expected 0..{M - 1}")
    # flows: each start has one finish, later, on the next stage's track
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    want_flows = (stages - 1) * M
    if len(starts) != want_flows or set(starts) != set(ends):
        fail(f"{len(starts)} flow starts and {len(ends)} finishes, expected {want_flows} matched pairs")
    for i, s in starts.items():
        f = ends.get(i)
        if f and (f["ts"] < s["ts"] - 1e-3 or stage_of.get(f["tid"]) != stage_of.get(s["tid"], -9) + 1):
            fail(f"flow {i} goes from {names.get(s['tid'])} at {s['ts']} to {names.get(f['tid'])} at {f['ts']}")
            break
    # the bubble
    wall_us = 1e6 * stats["wall_s"]
    idle = 1 - busy / (tracks * wall_us) if wall_us > 0 else 0
    if abs(idle - stats["bubble"]) > 0.002:
        fail(f"idle share of the tracks {idle:.4f} differs from pprt's bubble {stats['bubble']:.4f}")
    if t_hi - t_lo > wall_us * 1.01 + 1:
        fail(f"spans cover {t_hi - t_lo:.0f} us, more than the run's wall time {wall_us:.0f} us")
    for tid0, s0 in stage_of.items():
        for tid1, s1 in stage_of.items():
            if s1 != s0 + 1 or (replicas > 1 and names[tid0].split("replica")[-1] != names[tid1].split("replica")[-1]):
                continue
            for mb, a in spans[tid0].items():
                b = spans[tid1].get(mb)
                if b and b["ts"] < a["ts"] + a["dur"] - 1e-3:
                    fail(f"micro-batch {mb} started on {names[tid1]} before {names[tid0]} finished it")
                    break
    # the latencies behind --stats-json's figures
    lat = doc.get("otherData", {}).get("latency_ms")
    if not isinstance(lat, list) or len(lat) != M:
        fail(f"otherData.latency_ms: {str(lat)[:80]}, expected {M} latencies")
    else:
        # the track of the last stage holding each micro-batch, and its next span there
        last_track, nxt = {}, {}
        for tid, st_ in stage_of.items():
            if st_ == stages - 1:
                order = sorted(spans[tid])
                for i, mb in enumerate(order):
                    last_track[mb] = spans[tid][mb]
                    nxt[mb] = spans[tid][order[i + 1]]["ts"] if i + 1 < len(order) else 1e6 * stats["wall_s"]
        first_of = {mb: e for tid, st_ in stage_of.items() if st_ == 0 for mb, e in spans[tid].items()}
        for mb, l_ms in enumerate(lat):
            a, b = first_of.get(mb), last_track.get(mb)
            if not a or not b:
                continue
            # the source cuts the micro-batch inside its first stage's span; the sink takes it on the last
            # stage's thread after that stage's span and before its next span there (or the run's end)
            lo_us, hi_us = (b["ts"] + b["dur"]) - (a["ts"] + a["dur"]), nxt[mb] - a["ts"]
            if not lo_us - 1 <= 1e3 * l_ms <= hi_us + 1:
                fail(f"micro-batch {mb}: latency {l_ms} ms outside what its spans allow, "
                     f"[{lo_us / 1e3:.4f}, {hi_us / 1e3:.4f}] ms")
                break
        x = np.array(lat)
        got = stats["latency_ms"]
        want = {"mean": float(x.mean())}
        for k, q in (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            want[k] = float(np.percentile(x, q, method="inverted_cdf"))
        for k, v in want.items():
            if abs(got.get(k, -1) - v) > 1.5e-4:
                fail(f"--stats-json latency {k} {got.get(k)} ms, NumPy over the trace's latencies {v:.6f} ms")
        if not got["median"] <= got["p90"] <= got["p95"] <= got["p99"]:
            fail(f"percentiles out of order: {got}")
        if got.get("percentiles") != "nearest-rank":
            fail(f"--stats-json names percentiles {got.get('percentiles')!r}, expected 'nearest-rank'")
    first = [spans[t][0]["ts"] for t in spans if 0 in spans[t]]
    return {"events": len(ev), "bytes": os.path.getsize(path), "idle": idle, "bubble": stats["bubble"],
            "fill_us": (max(first) - min(first)) if first else 0}


def main():
    work = sys.argv[1]
    mpi_only = "--mpi" in sys.argv[2:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(DIGITS, "data")
    cases = []
    plan1 = os.path.join(work, "digits1.plan")
    run([PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", "1", "-b", "16", "-q", "-o", plan1])
    for pp in (2, 3):
        plan = os.path.join(work, f"digits{pp}.plan")
        run([PPCC, os.path.join(DIGITS, "model.onnx"), "-pp", str(pp), "-b", "16", "-q", "-o", plan])
        names = plan_nodes(plan)
        for prof in (False, True):
            if not mpi_only:
                cases.append((f"threads -pp {pp}{' --profile' if prof else ''}", plan, pp, 1, prof, names, [], []))
        if not mpi_only:  # two pipelines of threads: a track per stage of each replica
            cases.append((f"threads -pp {pp} --replicas 2", plan, pp, 2, pp == 3, names, [], []))
    if not mpi_only:
        cases.append(("threads -pp 1 --warmup 0", plan1, 1, 1, True, plan_nodes(plan1), [], ["--warmup", "0"]))
    if mpi_only:
        if os.environ.get("PP_MPI") != "ON" or not os.environ.get("MPIRUN"):
            print("trace: pprt built without MPI (or no mpirun): skipped")
            return 77
        mpi = [os.environ["MPIRUN"], "--allow-run-as-root", "--oversubscribe"]
        plan = os.path.join(work, "digits2.plan")
        names = plan_nodes(plan)
        cases.append(("mpirun -np 2 --profile", plan, 2, 1, True, names, mpi + ["-np", "2"], []))
        cases.append(("mpirun -np 4 --replicas 2 --warmup 3", plan, 2, 2, False, names, mpi + ["-np", "4"],
                      ["--warmup", "3"]))
    for k, (tag, plan, pp, reps, prof, names, launcher, extra) in enumerate(cases):
        tr, st = os.path.join(work, f"t{k}.json"), os.path.join(work, f"s{k}.json")
        argv = launcher + [PPRT, plan, data, "-o", os.path.join(work, f"out{k}"), "-q", "--trace", tr,
                           "--stats-json", st, "--backend", "ref", *extra]
        if reps > 1:
            argv += ["--replicas", str(reps)]
        if prof:
            argv += ["--profile", os.path.join(work, f"p{k}.json")]
        try:
            run(argv)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{tag}: {e}")
            continue
        res = check(tag, tr, st, pp, reps, prof, names)
        if res:
            print(f"{tag:28s} {res['events']:6d} events, {res['bytes'] / 1e3:7.1f} kB, idle {res['idle']:.3f} "
                  f"(pprt's bubble {res['bubble']:.3f}), fill {res['fill_us']:.0f} us")
    # bad input: a trace file that cannot be written
    r = subprocess.run([PPRT, os.path.join(work, "digits2.plan"), data, "-o", os.path.join(work, "outx"), "-q",
                        "--trace", os.path.join(work, "no", "such", "dir", "t.json")], capture_output=True, text=True)
    if r.returncode != 2 or "cannot create" not in r.stderr:
        problems.append(f"--trace into a missing directory: exit {r.returncode}, {r.stderr.strip()[:200]!r}")
    return finish(problems, len(cases) + 1)


if __name__ == "__main__":
    sys.exit(main())
