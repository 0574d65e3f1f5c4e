#!/usr/bin/env bash
# Stages on MPI ranks (runtime/comm), on localhost:
#   - digits (-pp 2 -b 16) under mpirun -np 2: outputs bit-identical to the
#     threaded runtime, PyTorch's accuracy, statistics, --check (a pass, and a
#     mismatch that every rank exits 1 on), --profile; --warmup 0 and 3 too;
#   - torchvision ResNet-50 (batch 4, exported here) at -pp 2 and -pp 4 -b 1
#     under -np 2 and -np 4: bit-identical to the threaded runtime;
#   - --replicas 2 on -np 4 with the -pp 2 plans: bit-identical;
#   - a ppcc --ref-weights plan (a two-layer MLP made here) on 2 ranks, each
#     reading its stage's weights from the model file: bit-identical to the
#     whole plan on threads;
#   - a rank bound to one core cuts --threads 2 to one thread, with a warning;
#   - errors: -np that is not stages x replicas (every rank says so, exit 2),
#     ranks given different options (--backend, --precision, --threads, --depth,
#     --warmup, --check and its tolerances, --labels: every rank exits 2 naming it),
#     rank 0 failing to read the data (the other rank names it, exit 2);
#   - a rank killed with SIGKILL mid-run (tests/mpi/kill.sh), with mpirun
#     ending the job and with pprt's own heartbeats finding it.
# Built without MPI: pprt must refuse mpirun's environment and the MPI
# options with exit 2 (--replicas is not one of them any more: it runs on
# threads); then the test is skipped (exit 77).
#
# usage: run.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC, PP_MPI=ON|OFF, MPIRUN)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
"$PPCC" "$S/model.onnx" -pp 2 -b 16 -o d2.plan -q

# stats FILE COND: the --stats-json FILE, read as JSON into s, meets the Python condition COND
stats() { "$PY" -c "import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }
. "$SRC/tests/mpi/common.sh"

if [ "${PP_MPI:-OFF}" != ON ]; then
  expect_rc 2 nompi1.txt env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$PPRT" d2.plan "$S/data" -o x
  expect_msg nompi1.txt "built without MPI.*OMPI_COMM_WORLD_SIZE=2"
  expect_rc 2 nompi2.txt "$PPRT" d2.plan "$S/data" -o x --transport mpi
  expect_msg nompi2.txt "built without MPI.*--transport"
  expect_rc 2 nompi3.txt env PMI_SIZE=2 "$PPRT" d2.plan "$S/data" -o x --mpi-timeout 5
  expect_msg nompi3.txt "built without MPI"
  echo "mpi: pprt was built without MPI and refuses mpirun and the MPI options; skipping the MPI runs"
  exit 77
fi
if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" > /dev/null; then
  echo "mpi: no mpirun (MPIRUN='${MPIRUN:-}'); skipping"
  exit 77
fi

mpi_env
# the reference kernels in both runtimes, when this pprt has a choice
BK=()
# (through a file: with pipefail, grep -q leaving early can kill pprt's
# longer-than-a-buffer help with SIGPIPE, and the test would take the
# pipeline's failure for "no --backend")
"$PPRT" --help > help.txt
"$PPRT" --version > version.txt
grep -q -- --backend help.txt && BK=(--backend ref)
same() { cmp "$1" "$2" || { echo "FAIL: $3: $1 and $2 differ"; exit 1; }; }

# ---- digits: -pp 2 -b 16 on 2 ranks ----------------------------------------------
want_acc=$(cat "$S/accuracy.txt")
"$PPRT" d2.plan "$S/data" -o d_thr -q "${BK[@]}"
expect_rc 0 d_mpi.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o d_mpi --labels "$S/labels.npy" \
  --stats-json d.json --profile prof.json "${BK[@]}"
same d_thr/logits.npy d_mpi/logits.npy "digits, 2 ranks vs threads"
# no warm-up, and three (their copies through the ranks' channels, dropped at the writer): the same bits
for w in 0 3; do
  expect_rc 0 d_w$w.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o d_w$w -q --warmup $w --stats-json d_w$w.json "${BK[@]}"
  same d_thr/logits.npy d_w$w/logits.npy "digits, 2 ranks --warmup $w vs threads"
  stats d_w$w.json "s['micro_batches'] == 23 and s['warmup_micro_batches'] == $w" || { echo "FAIL: --warmup $w stats"; exit 1; }
done
acc=$(awk '/^accuracy:/ {print $2}' d_mpi.txt)
[ "$acc" = "$want_acc" ] || { echo "FAIL: digits on 2 ranks: accuracy $acc, PyTorch measured $want_acc"; exit 1; }
expect_msg d_mpi.txt "^pprt: 360 samples, 23 micro-batches of 16, 2 stages"
expect_msg d_mpi.txt "^stage 1: busy"
"$PY" - d.json prof.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["samples"] == 360 and s["micro_batches"] == 23, s
assert len(s["stages"]) == 2 and all(st["busy_s"] > 0 for st in s["stages"]), s
assert s["samples_per_s"] > 0 and 0 <= s["bubble"] < 1 and s["latency_ms"]["p99"] >= s["latency_ms"]["mean"] > 0, s
# the default warm-up (one micro-batch) runs under mpirun too; percentiles in order
L = s["latency_ms"]
assert s["warmup_micro_batches"] == 1 and 0 < L["median"] <= L["p90"] <= L["p95"] <= L["p99"], s
p = json.load(open(sys.argv[2]))
assert p["micro_batch"] == 16 and len(p["nodes"]) == 8 and all(v >= 0 for v in p["nodes"].values()), p
# each rank's executor counts reach the writer: the reference executor runs every node itself
assert s["backend"] == "ref" and sum(st["nodes"] for st in s["stages"]) == 8, s
assert all(st["reference_nodes"] == st["nodes"] >= 1 and st["library_nodes"] + st["own_nodes"] == 0
           for st in s["stages"]), s
PY
# ---- a ppcc --ref-weights plan on 2 ranks: each reads its weights from the model ----
"$PY" - <<'PY'
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(3)
w1, w2 = (rng.standard_normal((256, 256)).astype(np.float32) / 16 for _ in range(2))
g = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                       helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 256])],
                      [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "mlp.onnx")
import os; os.makedirs("mlp_data", exist_ok=True)
np.save("mlp_data/x.npy", rng.standard_normal((6, 256)).astype(np.float32))
PY
"$PPCC" mlp.onnx -pp 2 -b 2 -q -o mlp_whole.plan
"$PPCC" mlp.onnx -pp 2 -b 2 --ref-weights -q -o mlp_ref.plan
"$PPRT" --info mlp_ref.plan > mlp_ref_info.txt
grep -q "weights referenced in: .*/mlp.onnx" mlp_ref_info.txt || { echo "FAIL: mlp_ref.plan names no model file"; exit 1; }
"$PPRT" mlp_whole.plan mlp_data -o mlp_thr -q "${BK[@]}"
expect_rc 0 mlp_mpi.txt "${M[@]}" -np 2 "$PPRT" mlp_ref.plan mlp_data -o mlp_mpi -q "${BK[@]}"
same mlp_thr/y.npy mlp_mpi/y.npy "--ref-weights plan on 2 ranks vs the whole plan on threads"

# a rank bound to one core (mpirun --bind-to core) gets one intra-op thread,
# however many cores the machine has; unbound, its share of them
"$PPCC" "$S/model.onnx" -pp 1 -b 16 -o d1.plan -q
expect_rc 0 bind.txt "${M[@]}" -np 1 --bind-to core "$PPRT" d1.plan "$S/data" -o d_bind -q --threads 2
expect_msg bind.txt "^pprt: warning: 1 rank x 2 threads exceed the 1 cores this rank may use; using 1 thread per rank"
if [ "$(nproc --all)" -ge 2 ] && [ "$("$PY" -c 'import os; print(len(os.sched_getaffinity(0)))')" -ge 2 ]; then
  expect_rc 0 nobind.txt "${M[@]}" -np 1 --bind-to none "$PPRT" d1.plan "$S/data" -o d_bind -q --threads 2
  if grep -q "warning" nobind.txt; then echo "FAIL: an unbound rank was cut to fewer threads"; cat nobind.txt; exit 1; fi
fi
# with oneDNN the counts are the executor's own: the ranks report what the
# same plan's threads report
if "$PPRT" --backend dnnl --version >/dev/null 2>&1; then
  "$PPRT" d2.plan "$S/data" -o d_thr_dnnl -q --backend dnnl --stats-json dt.json
  expect_rc 0 d_mpi_dnnl.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o d_mpi_dnnl -q --backend dnnl \
    --stats-json dm.json
  "$PY" - dt.json dm.json <<'PY'
import json, sys
t, m = (json.load(open(f)) for f in sys.argv[1:])
keys = ("nodes", "library_nodes", "own_nodes", "fused_nodes", "view_nodes", "reference_nodes",
        "layout_changes_per_micro_batch", "copies_per_micro_batch", "outputs_in_place", "own_layout_tensors",
        "weights_prepared_bytes")
got = [[st[k] for k in keys] for st in m["stages"]]
assert m["backend"] == "dnnl" and got == [[st[k] for k in keys] for st in t["stages"]], (t, m)
assert all(st["library_nodes"] + st["own_nodes"] > 0 for st in m["stages"]), m
PY
fi
# --check: a pass, then a mismatch: the writer reports it, every rank exits 1
expect_rc 0 d_check.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o d_check -q --check --rtol 1e-3 --atol 1e-4 "${BK[@]}"
expect_msg d_check.txt "logits.*OK"
mkdir -p wrong && "$PY" -c "import numpy as np, sys; np.save('wrong/logits.npy', np.load(sys.argv[1]) + 1)" "$S/expected/logits.npy"
expect_rc 1 d_bad.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o d_bad -q --expected wrong "${BK[@]}"
expect_msg d_bad.txt "MISMATCH"
# replicas: 2 pipelines of 2 stages
expect_rc 0 d_rep.txt "${M[@]}" -np 4 "$PPRT" d2.plan "$S/data" -o d_rep --replicas 2 --labels "$S/labels.npy" "${BK[@]}"
same d_thr/logits.npy d_rep/logits.npy "digits, 2 replicas x 2 ranks vs threads"
expect_msg d_rep.txt "^accuracy: $want_acc "
expect_msg d_rep.txt "^mpi: 4 ranks, 2 replicas of 2 stages"
echo "mpi: digits on 2 ranks and on 2 replicas x 2 ranks: bit-identical to threads, accuracy $want_acc"

# ---- ResNet-50, batch 4: -pp 2 and -pp 4 at -b 1 -----------------------------------
"$PY" "$SRC/tests/models/export_torchvision.py" --model resnet50 --out r50 --batch 4 > export.txt
for pp in 2 4; do
  "$PPCC" r50/model.onnx -pp $pp -b 1 -o r$pp.plan -q
  "$PPRT" r$pp.plan r50/data -o r_thr$pp -q "${BK[@]}"
  expect_rc 0 r_mpi$pp.txt "${M[@]}" -np $pp "$PPRT" r$pp.plan r50/data -o r_mpi$pp -q "${BK[@]}"
  same r_thr$pp/output.npy r_mpi$pp/output.npy "ResNet-50 -pp $pp, $pp ranks vs threads"
done
same r_thr2/output.npy r_thr4/output.npy "ResNet-50 -pp 2 vs -pp 4"
expect_rc 0 r_rep.txt "${M[@]}" -np 4 "$PPRT" r2.plan r50/data -o r_rep -q --replicas 2 "${BK[@]}"
same r_thr2/output.npy r_rep/output.npy "ResNet-50 -pp 2, 2 replicas x 2 ranks vs threads"
"$PY" "$SRC/tests/tools/compare_npy.py" r_mpi4/output.npy r50/expected/output.npy --rtol 1e-3 --atol 1e-4
rm -f r2.plan r4.plan r50/model.onnx # (passed; 0.3 GB of weights CI's disk need not hold)
echo "mpi: ResNet-50 on 2 and 4 ranks and on 2 replicas x 2 ranks: bit-identical to threads"

# ---- the U-Net: skip connections cross every cut ----------------------------------------
"$PY" "$SRC/tests/models/zoo.py" export unet unet --batch 2 > unet_export.txt
for pp in 2 4; do
  "$PPCC" unet/model.onnx -pp $pp -b 1 -o u$pp.plan -q
  "$PPRT" u$pp.plan unet/data -o u_thr$pp -q "${BK[@]}"
  expect_rc 0 u_mpi$pp.txt "${M[@]}" -np $pp "$PPRT" u$pp.plan unet/data -o u_mpi$pp -q "${BK[@]}"
  same u_thr$pp/output.npy u_mpi$pp/output.npy "U-Net -pp $pp, $pp ranks vs threads"
done
"$PY" "$SRC/tests/tools/compare_npy.py" u_mpi4/output.npy unet/expected/output.npy --rtol 1e-3 --atol 1e-4
echo "mpi: U-Net on 2 and 4 ranks: bit-identical to threads"

# ---- errors --------------------------------------------------------------------------
expect_rc 2 e_np.txt "${M[@]}" -np 3 "$PPRT" d2.plan "$S/data" -o e_np -q
# every rank says why: its own error, or (when another's abort came first) that rank's
expect_msg e_np.txt "^pprt: rank [0-2]: (error|stopped: rank [0-2] failed): the plan has 2 stages and --replicas is 1, so mpirun -np must be 2" 3
expect_rc 2 e_np2.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o e_np2 -q --replicas 2
expect_msg e_np2.txt "mpirun -np must be 4 \(stages x replicas\); it started 2 ranks" 2
expect_rc 2 e_data.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$out/no-such-dir" -o e_data -q
# a rank names its stage once it knows it: an abort can arrive before that
expect_msg e_data.txt "^pprt: rank 0( \(stage 0\))?: error: cannot open data directory"
expect_msg e_data.txt "^pprt: rank 1( \(stage 1\))?: stopped: rank 0( \(stage 0\))? failed: cannot open data directory"
[ ! -e e_data ] && [ ! -e e_np ] || { echo "FAIL: a failed run wrote outputs"; exit 1; }
# a FIFO as rank 0's data and as the writer's output: refused at once (rank 0
# used to block in open() while its heartbeats kept the job alive forever)
mkdir -p fifo_data fifo_out && rm -f fifo_data/input.npy fifo_out/logits.npy
mkfifo fifo_data/input.npy fifo_out/logits.npy
expect_rc 2 e_fifo.txt "${M[@]}" -np 2 "$PPRT" d2.plan fifo_data -o e_fifo -q
expect_msg e_fifo.txt "^pprt: rank 0( \(stage 0\))?: error: 'fifo_data/input.npy' is not a regular file \(it is a FIFO\)"
expect_msg e_fifo.txt "^pprt: rank 1( \(stage 1\))?: stopped: rank 0( \(stage 0\))? failed"
expect_rc 2 e_fifo2.txt "${M[@]}" -np 2 "$PPRT" d2.plan "$S/data" -o fifo_out -q
expect_msg e_fifo2.txt "^pprt: rank 1( \(stage 1\))?: error: cannot write 'fifo_out/logits.npy': it is a FIFO that no process reads"
echo "mpi: wrong -np, unreadable data and FIFOs exit 2 on every rank, with the reason"
# ranks sent SIGTERM/SIGINT/SIGHUP mid-run (while writing, half the time) leave no temporary output
"$PY" "$SRC/tests/bad/signals.py" "$out/signals" 8 --mpi "${M[@]}"
# ranks given different options that change results (mpirun's MPMD form gives
# each rank its own command line): every rank exits 2, naming the option
diff_opts=("--backend ref" "--threads 1" "--depth 3" "--warmup 0" "--check" "--rtol 0.1" "--atol 0.5"
           "--labels $S/labels.npy")
grep -q -- --backend help.txt || diff_opts=("--threads 1" "--depth 3" "--warmup 0" "--check" "--rtol 0.1")
grep -q "bf16 kernels on this CPU: yes" version.txt && diff_opts+=("--precision bf16")
for opt in "${diff_opts[@]}"; do
  # shellcheck disable=SC2086
  expect_rc 2 e_opt.txt "${M[@]}" -np 1 "$PPRT" d2.plan "$S/data" -o e_opt -q : -np 1 "$PPRT" d2.plan "$S/data" -o e_opt -q $opt
  expect_msg e_opt.txt "^pprt: rank 0 \(stage 0\): error: rank 1 \(stage 1\) runs with ${opt%% *} .*, rank 0 with ${opt%% *} .*: every rank must get the same options"
  expect_msg e_opt.txt "^pprt: rank 1 \(stage 1\): stopped: rank 0 \(stage 0\) failed: .*every rank must get the same options"
  [ ! -e e_opt ] || { echo "FAIL: ranks with different options ($opt) wrote outputs"; exit 1; }
done
echo "mpi: ranks given different options (${#diff_opts[@]} cases) exit 2 on every rank, naming the option"

# ---- a rank killed mid-run -------------------------------------------------------------
mkdir -p big
"$PY" -c "import numpy as np, sys; np.save('big/input.npy', np.tile(np.load(sys.argv[1]), (300, 1, 1, 1)))" "$S/data/input.npy"
"$PPCC" "$S/model.onnx" -pp 3 -b 16 -o d3.plan -q
export PPRT MPIRUN
mpi_kill_both "$out/d3.plan" "$out/big" "$out/kill"
echo "mpi: all passed"
