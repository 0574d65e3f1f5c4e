#!/usr/bin/env bash
# End to end on the bundled digits CNN: compile at -pp 1, 2, 3 and two
# micro-batch sizes, run, and check against PyTorch: the logits the training
# script recorded (rtol 1e-3, atol 1e-4) and its measured accuracy (exact).
# Splitting must not change a single bit at the same threads per stage (1
# here); compiling twice gives the same plan.
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
# stats FILE COND: the --stats-json FILE, read as JSON into s, meets the Python condition COND
stats() { "$PY" -c "import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
want_acc=$(cat "$S/accuracy.txt")
for b in 16 7; do
  for pp in 1 2 3; do
    "$PPCC" "$S/model.onnx" -pp $pp -b $b -o d_${b}_$pp.plan -q
    "$PPRT" d_${b}_$pp.plan "$S/data" -o out_${b}_$pp --threads 1 --labels "$S/labels.npy" --stats-json s.json > run.txt
    acc=$(awk '/^accuracy:/ {print $2}' run.txt)
    if [ "$acc" != "$want_acc" ]; then
      echo "FAIL: -b $b -pp $pp accuracy $acc, PyTorch measured $want_acc"; exit 1
    fi
    "$PY" "$SRC/tests/tools/compare_npy.py" out_${b}_$pp/logits.npy "$S/expected/logits.npy" --rtol 1e-3 --atol 1e-4
    cmp out_${b}_1/logits.npy out_${b}_$pp/logits.npy || { echo "FAIL: -pp $pp differs from -pp 1"; exit 1; }
    stats s.json "s['samples'] == 360 and s['micro_batches'] > 0 and s['replicas'] == 1" || { echo "FAIL: stats json"; cat s.json; exit 1; }
    # latency percentiles (nearest rank) in order; one warm-up micro-batch by default
    "$PY" -c "
import json
s = json.load(open('s.json'))
L = s['latency_ms']
assert s['warmup_micro_batches'] == 1 and L['percentiles'] == 'nearest-rank', s
assert 0 < L['median'] <= L['p90'] <= L['p95'] <= L['p99'], L" || { echo "FAIL: latency percentiles"; cat s.json; exit 1; }
    grep -q "^latency per micro-batch: mean [0-9.]* ms, median [0-9.]* ms, p90 [0-9.]* ms, p95 [0-9.]* ms, p99 [0-9.]* ms$" run.txt &&
      grep -q "^throughput: .* (after 1 warm-up micro-batch)$" run.txt || { echo "FAIL: the summary's latency"; cat run.txt; exit 1; }
    # the steady rate counts the samples after the first micro-batch out over
    # at most the wall time: at least (360 - b) / wall
    "$PY" -c "
import json, sys
s, b = json.load(open('s.json')), int(sys.argv[1])
assert s['steady_samples_per_s'] >= (360 - b) / s['wall_s'] * 0.999, s" $b || { echo "FAIL: steady rate"; exit 1; }
  done
done
# one .npy per sample (odd ones with a leading 1) gives the same outputs
mkdir -p per_sample
"$PY" -c "
import numpy as np, sys
x = np.load(sys.argv[1])
for i in range(len(x)): np.save('per_sample/s%04d.npy' % i, x[i] if i % 2 else x[i:i+1])" "$S/data/input.npy"
"$PPRT" d_16_2.plan per_sample -o out_per_sample -q --threads 1
# one micro-batch has no steady state
"$PY" -c "
import numpy as np
np.save('one.npy', np.load('$S/data/input.npy')[:16])" && mkdir -p one && mv one.npy one/input.npy
"$PPRT" d_16_2.plan one -o out_one -q --stats-json one.json
stats one.json "s['steady_samples_per_s'] == 0" || { echo "FAIL: a steady rate from one micro-batch"; cat one.json; exit 1; }
cmp out_16_2/logits.npy out_per_sample/logits.npy || { echo "FAIL: per-sample files differ"; exit 1; }
# --warmup 0 times the first micro-batch too, and changes no bit; --warmup 5 neither
for w in 0 5; do
  "$PPRT" d_16_2.plan "$S/data" -o out_w$w -q --threads 1 --warmup $w --stats-json w$w.json
  cmp out_16_2/logits.npy out_w$w/logits.npy || { echo "FAIL: --warmup $w changed the outputs"; exit 1; }
  stats w$w.json "s['micro_batches'] == 23 and s['warmup_micro_batches'] == $w" || { echo "FAIL: --warmup $w stats"; cat w$w.json; exit 1; }
done
stats s.json "'peak_rss_bytes' in s" || { echo "FAIL: stats json has no peak RSS"; exit 1; }
# measured op times drive the split: profile one stage, compile two from it
"$PPRT" d_16_1.plan "$S/data" -o out_prof -q --profile prof.json
"$PPCC" "$S/model.onnx" -pp 2 -b 16 --profile prof.json -o prof.plan -q
"$PPRT" prof.plan "$S/data" -o out_prof2 -q --threads 1
cmp out_16_1/logits.npy out_prof2/logits.npy || { echo "FAIL: profiled split differs"; exit 1; }
# the profile's summary on stdout: per stage its nodes' summed ms and its 5
# slowest nodes with their share of that sum, which agree with the file
# ("unit": "ms") and pprt --info's stages; -q prints none of it
"$PPRT" d_16_2.plan "$S/data" -o out_prof3 --threads 1 --profile prof3.json > prof3.txt
"$PPRT" --info d_16_2.plan > info2.txt
"$PPRT" d_16_2.plan "$S/data" -o out_prof4 --threads 1 -q --profile prof4.json > prof4.txt
[ ! -s prof4.txt ] || { echo "FAIL: pprt -q --profile printed"; cat prof4.txt; exit 1; }
"$PY" - prof3.json prof3.txt info2.txt <<'PY' || { echo "FAIL: the profile's summary"; cat prof3.txt; exit 1; }
import json, re, sys
prof = json.load(open(sys.argv[1]))
assert prof["unit"] == "ms" and prof["micro_batch"] == 16, {k: prof[k] for k in prof if k != "nodes"}
stages, cur = {}, None  # stage -> its node names, from pprt --info
for line in open(sys.argv[3]):
    m = re.match(r"stage (\d+): ", line)
    if m:
        cur = stages.setdefault(int(m.group(1)), [])
    elif cur is not None and line.startswith("  ") and not line.startswith("  sends:"):
        cur.append(line.split(None, 1)[1].strip())
text = open(sys.argv[2]).read()
assert "profile: mean ms per micro-batch" in text, text
for s, names in stages.items():
    total = sum(prof["nodes"][n] for n in names)
    block = text.split(f"\nstage {s}: ")[-1] if f"\nstage {s}: " in text else ""
    head = re.match(r"([\d.]+) ms in (\d+) nodes?\n", block)
    assert head and abs(float(head.group(1)) - total) <= 1e-3 and int(head.group(2)) == len(names), (s, block[:200])
    rows = re.findall(r"^ +([\d.]+) ms +([\d.]+)% +(\S+) +(\S+)$", block[head.end():].split("\nstage ")[0],
                      re.M)
    want = sorted((n for n in names if prof["nodes"][n] > 0), key=lambda n: -prof["nodes"][n])[:5]
    assert len(rows) == len(want) >= 1, (s, rows, want)
    shares = [float(r[1]) for r in rows]
    assert sum(shares) <= 100 + 0.05 * len(rows), (s, shares)  # each rounded to 0.1
    for (ms, share, op, name), w in zip(rows, want):
        assert abs(prof["nodes"][name] - prof["nodes"][w]) <= 1e-6, (name, w)  # the slowest, in order (ties aside)
        assert abs(float(ms) - prof["nodes"][name]) <= 6e-4, (ms, name)
        assert abs(float(share) - 100 * prof["nodes"][name] / total) <= 0.051, (share, name, total)
PY
# the executor's counts: every node of the plan (the profile names each once)
# on one kernel or the other, in whichever stage ran it
"$PY" -c "
import json
s, p = json.load(open('s.json')), json.load(open('prof.json'))
assert s['format'] == 'pprt-stats' and s['version'] == 2, s
assert sum(x['nodes'] for x in s['stages']) == len(p['nodes']), (s, p)
assert all(sum(x[k + '_nodes'] for k in ('library', 'own', 'fused', 'view', 'reference')) == x['nodes'] >= 1
           for x in s['stages']), s
assert s['backend'] in ('ref', 'dnnl'), s
assert s['backend'] == 'dnnl' or all(x['reference_nodes'] == x['nodes'] for x in s['stages']), s" ||
  { echo "FAIL: executor counts in the stats json"; cat s.json; exit 1; }
"$PPCC" "$S/model.onnx" -pp 2 -b 16 -o again.plan -q
cmp d_16_2.plan again.plan || { echo "FAIL: recompiling gave a different plan"; exit 1; }
# an output path that is not a regular file is written in place: a rename
# over /dev/null (the atomic write of a regular file) would replace the
# device node with a file (as root) or fail (as anyone else)
"$PPCC" "$S/model.onnx" -pp 2 -b 16 -o /dev/null -q
"$PPRT" d_16_2.plan "$S/data" -o out_null -q --stats-json /dev/null --profile /dev/null
[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device"; exit 1; }
# The shell holds the FIFO open read-write (fd 3) before pprt starts: pprt
# refuses a FIFO that no process reads, and a reader started in the
# background may not have reached its open() yet on a loaded machine (CI
# failed that way once, 2026-11-27). The JSON fits the pipe's buffer; it is
# read back without blocking (fd 3 is also a writer, so no EOF would come).
rm -f fifo && mkfifo fifo
exec 3<>fifo
"$PPRT" d_16_2.plan "$S/data" -o out_fifo -q --stats-json fifo
"$PY" -c "
import os, sys
os.set_blocking(3, False)
data = b''
while True:
    try:
        chunk = os.read(3, 65536)
    except BlockingIOError:
        break
    if not chunk:
        break
    data += chunk
sys.stdout.buffer.write(data)" > from_fifo.json
exec 3<&-
[ -p fifo ] && stats from_fifo.json "s['samples'] == 360" || { echo "FAIL: --stats-json into a FIFO"; exit 1; }
# stage threads are pinned inside the CPUs the process may use (taskset, a
# cpuset), never to CPUs outside them; with fewer CPUs than stages x
# threads, not at all. The mask comes from the OS (Python), not from pprt.
last=$("$PY" -c "import os; print(max(os.sched_getaffinity(0)))")
n_cpu=$("$PY" -c "import os; print(len(os.sched_getaffinity(0)))")
taskset -c "$last" "$PPRT" d_16_1.plan "$S/data" -o out_pin -q --threads 2 --stats-json pin1.json 2> pin1.txt
grep -q "^pprt: warning: 1 stage x 2 threads exceed the 1 cores this process may use; using 1 thread per stage" pin1.txt ||
  { echo "FAIL: 2 threads on one allowed CPU without a warning"; cat pin1.txt; exit 1; }
taskset -c "$last" "$PPRT" d_16_2.plan "$S/data" -o out_pin -q --threads 1 --stats-json pin2.json
"$PPRT" d_16_2.plan "$S/data" -o out_pin -q --threads 1 --stats-json pin3.json
"$PY" -c "
import json, os, sys
last, n = int(sys.argv[1]), int(sys.argv[2])
one = json.load(open('pin1.json'))['stages']
assert [x['cpus'] for x in one] == [str(last)], one
two = json.load(open('pin2.json'))['stages']
assert [x['cpus'] for x in two] == ['', ''], two
mine = sorted(os.sched_getaffinity(0))
free = json.load(open('pin3.json'))['stages']
want = [str(mine[0]), str(mine[1])] if n >= 2 else ['', '']
assert [x['cpus'] for x in free] == want, (free, mine)" "$last" "$n_cpu" ||
  { echo "FAIL: stage threads pinned outside the affinity mask"; cat pin1.json pin2.json pin3.json; exit 1; }
# --replicas R: R pipelines side by side on shares of the micro-batches
# (at -b 16 the 360 samples are 23 micro-batches, the last padded: shares
# of 11/12 and 7/8/8), outputs in input order and bit-identical to one
# pipeline, every replica through its own warm-up; the statistics count every
# sample and micro-batch, the profile every node once
for b in 16 7; do
  for pp in 1 2; do
    for r in 2 3; do
      "$PPRT" d_${b}_$pp.plan "$S/data" -o out_r${r}_${b}_$pp -q --threads 1 --replicas $r --warmup 2 \
        --labels "$S/labels.npy" --stats-json rs.json --profile rp.json > rrun.txt
      cmp out_${b}_1/logits.npy out_r${r}_${b}_$pp/logits.npy ||
        { echo "FAIL: -b $b -pp $pp --replicas $r differs from one pipeline"; exit 1; }
      acc=$(awk '/^accuracy:/ {print $2}' rrun.txt)
      [ "$acc" = "$want_acc" ] || { echo "FAIL: --replicas $r accuracy $acc, want $want_acc"; exit 1; }
      "$PY" -c "
import json, math, sys
b, pp, r = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s, p = json.load(open('rs.json')), json.load(open('rp.json'))
assert s['samples'] == 360 and s['micro_batches'] == math.ceil(360 / b) and s['replicas'] == r, s
assert len(s['stages']) == pp and all(x['busy_s'] > 0 for x in s['stages']), s
assert len(p['nodes']) == sum(x['nodes'] for x in s['stages']), (p, s)
assert all(v >= 0 for v in p['nodes'].values()), p" $b $pp $r ||
        { echo "FAIL: --replicas $r statistics or profile"; cat rs.json; exit 1; }
    done
  done
done
# a replica with no micro-batch is refused before the run, naming the count
set +e
"$PPRT" d_16_1.plan "$S/data" -o out_rbad -q --replicas 24 2> rbad.txt; rc=$?
set -e
[ $rc = 2 ] && grep -q "replicas 24: the run has only 23 micro-batches" rbad.txt ||
  { echo "FAIL: --replicas beyond the micro-batches: exit $rc"; cat rbad.txt; exit 1; }
[ ! -e out_rbad/logits.npy ] || { echo "FAIL: outputs written by a refused run"; exit 1; }
set +e
"$PPRT" d_16_1.plan "$S/data" -o out_rbad -q --replicas 0 2> rbad.txt; rc=$?
set -e
[ $rc = 2 ] && grep -q "replicas needs 1..4096" rbad.txt || { echo "FAIL: --replicas 0: exit $rc"; cat rbad.txt; exit 1; }
# (replicas of device stages on threads: tests/cuda/replicas.sh)
echo "digits: accuracy $want_acc at -pp 1,2,3 and -b 16,7; logits within tolerance; splits bit-identical; replicas bit-identical"
