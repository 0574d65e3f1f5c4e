#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan+UBSan) and run each for a bounded
# time from a seed corpus of real and hand-made inputs; then replay every
# input that ever crashed or that seeds a target (regress_*/, kept forever)
# and fail if any still crashes. Targets:
#   plan       the plan loader on whole files (most mutations die at the checksums)
#   plan_meta  the plan's metadata message, wrapped in a valid header with
#              correct checksums, mutated field by field; what loads runs on
#              the reference kernels (tests/fuzz/fuzz_plan_meta.c)
#   onnx       the ONNX importer and the passes
#   data       .npy and TensorProto (.pb) data files
# Prints each target's executions and edges covered. By default each target
# runs a fixed number of inputs (scaled to about SECONDS_PER_TARGET on the
# 2-core CI machine) from a fixed seed (FUZZ_SEED, default 1) and an empty
# corpus, so that CI's verdict does not depend on the machine's speed (a
# time limit let a faster machine reach a finding a slower one had not: CI
# on 2026-11-26). Not bit-for-bit repeatable even so: plan_meta runs stage
# threads, and two runs of 50,000 inputs added 591 and 561 corpus units. FUZZ_TIME=S explores for S seconds per target
# instead, keeping the corpus (FUZZ_SEED=0: a random seed); what it finds
# goes into regress_*/.
# Usage: run.sh SRC_DIR GEN_DIR WORK_DIR SECONDS_PER_TARGET   (env: PPCC, PY, FUZZ_SEED, FUZZ_TIME)
set -euo pipefail
src=$1 gen=$2 work=$3 secs=$4
mkdir -p "$work"
cd "$work"
CC=${FUZZ_CC:-clang}
targets="plan plan_meta onnx data"
flags="-std=c11 -O1 -g -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I$gen -I$src"
# everything but what needs oneDNN, MPI or the CUDA toolkit (runtime/dnnl, runtime/comm, the
# GPU files of runtime/cuda): the reference and cuda-emu backends
libsrc=$(ls "$src"/ir/*.c "$src"/frontend/*.c "$src"/passes/*.c "$src"/report/*.c "$src"/plan/*.c "$src"/backend/*.c "$src"/runtime/*.c \
  "$src"/runtime/link/*.c "$src"/runtime/cpu/*.c "$src"/runtime/cuda/*.c "$gen/onnx/onnx.pb-c.c" "$gen/plan.pb-c.c" "$gen/tactics_builtin.c" \
  | grep -v -e /exec_dnnl.c -e /exec_cuda.c -e /runtime/cuda/dnn.c -e /mem_cuda.c -e /module_cuda.c)
# the library once (instrumented, no main), then one link per target
rm -rf obj && mkdir -p obj
for f in $libsrc; do
  # shellcheck disable=SC2086
  $CC $flags -fsanitize=fuzzer-no-link -c "$f" -o "obj/$(echo "$f" | tr / _).o" &
  [ "$(jobs -r | wc -l)" -ge 2 ] && wait -n
done
wait
for t in $targets; do
  # shellcheck disable=SC2086
  $CC $flags -o fuzz_$t "$src/tests/fuzz/fuzz_$t.c" obj/*.o -lprotobuf-c -lxxhash -lz -lcjson -lm -lpthread
done
# seeds: valid plans and models, and the bad inputs of the test suite
for t in $targets; do rm -rf "seeds_$t" && mkdir -p "seeds_$t"; done
for m in "$src"/samples/digits/model.onnx "$src"/tests/golden/*.onnx; do
  cp "$m" seeds_onnx/
  for pp in 1 2; do "$PPCC" "$m" -pp $pp -q -o "seeds_plan/$(basename "$m" .onnx)_$pp.plan" 2>/dev/null || true; done
done
cp "$src"/samples/digits/data/*.npy "$src"/samples/digits/labels.npy seeds_data/ 2>/dev/null || true
if [ -n "${PY:-}" ] && "$PY" - <<'PYEOF'
# a --ref-weights plan: a 128 KiB weight left in its model file (the loader
# maps and hashes that file for every input that still names it); data files
# of many types and layouts
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
w = np.arange(128 * 256, dtype=np.float32).reshape(128, 256) / 1e4
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ref",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 128])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 256])], [numpy_helper.from_array(w, "w")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "ref_model.onnx")
rng = np.random.default_rng(0)
for i, (dt, shape) in enumerate([("<f4", (2, 3)), (">f8", (4,)), ("<f2", (1, 2, 2)), ("<i8", ()), ("|b1", (3, 1)),
                                  ("<u2", (0, 5)), ("|i1", (2, 2, 2)), ("<i4", (7,))]):
    a = (rng.standard_normal(shape) * 5).astype(dt)
    np.save(f"seeds_data/s{i}.npy", a)
    np.save(f"seeds_data/f{i}.npy", np.asfortranarray(a))
    if dt[1] != "f" or dt == "<f4":
        t = numpy_helper.from_array(a.astype(dt.replace(">", "<")), f"t{i}")
        open(f"seeds_data/t{i}.pb", "wb").write(t.SerializeToString())
typed = TensorProto(name="typed", data_type=TensorProto.FLOAT, dims=[2, 2], float_data=[1, 2, 3, 4])
open("seeds_data/typed.pb", "wb").write(typed.SerializeToString())
np.savez("seeds_data/plain.npz", a=np.arange(6, dtype=np.float32).reshape(2, 3), b=np.ones(4, np.int64))
np.savez_compressed("seeds_data/comp.npz", a=np.arange(6, dtype=np.float32).reshape(2, 3))
PYEOF
then
  "$PPCC" ref_model.onnx --ref-weights -q -o seeds_plan/ref_weights.plan
fi
# control flow: a Loop building a sequence from a computed trip count (as
# GPT-J's export does) and an If, for the subgraph reader and the unrolling
if [ -n "${PY:-}" ]; then
  "$PY" - <<'PYEOF' || true
import numpy as np, onnx
from onnx import TensorProto as TP, helper, numpy_helper
sv = helper.make_tensor_value_info
body = helper.make_graph(
    [helper.make_node("SequenceAt", ["parts", "i"], ["p"]), helper.make_node("SequenceInsert", ["s", "p"], ["s2"]),
     helper.make_node("Identity", ["c"], ["c2"])], "body",
    [sv("i", TP.INT64, []), sv("c", TP.BOOL, []), helper.make_tensor_sequence_value_info("s", TP.FLOAT, None)],
    [sv("c2", TP.BOOL, []), helper.make_tensor_sequence_value_info("s2", TP.FLOAT, None)])
br = helper.make_graph([helper.make_node("Neg", ["y"], ["z"])], "br", [], [sv("z", TP.FLOAT, [1, 4])])
g = helper.make_graph(
    [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1), helper.make_node("SequenceLength", ["parts"], ["n"]),
     helper.make_node("SequenceEmpty", [], ["e"]), helper.make_node("Loop", ["n", "", "e"], ["s"], body=body),
     helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1),
     helper.make_node("If", ["t"], ["out"], then_branch=br, else_branch=br)], "cf",
    [sv("x", TP.FLOAT, ["n", 4])], [sv("out", TP.FLOAT, ["n", 4])], [numpy_helper.from_array(np.array(True), "t")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "seeds_onnx/control_flow.onnx")
# the row-order pass (passes/rows.c): a batch-first Transpose before per-row ops, a Reshape that splits the last
# dim, a Slice of it, the Transpose back, and a reader outside the region (the value made again)
c = lambda n, a: numpy_helper.from_array(np.asarray(a), n)
nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]), helper.make_node("MatMul", ["t", "w"], ["m"]),
         helper.make_node("Add", ["b", "m"], ["a"]), helper.make_node("Softmax", ["a"], ["s"], axis=-1),
         helper.make_node("Reshape", ["s", "sh"], ["r"]), helper.make_node("Slice", ["r", "s0", "s1", "ax"], ["sl"]),
         helper.make_node("Reshape", ["sl", "sh2"], ["r2"]), helper.make_node("Transpose", ["r2"], ["y"], perm=[1, 0, 2]),
         helper.make_node("ReduceMean", ["m"], ["z0"], axes=[2], keepdims=1),
         helper.make_node("Transpose", ["z0"], ["z"], perm=[1, 0, 2])]
g = helper.make_graph(nodes, "rows", [sv("x", TP.FLOAT, ["n", 5, 8])], [sv("y", TP.FLOAT, ["n", 5, 4]), sv("z", TP.FLOAT, ["n", 5, 1])],
                      [c("w", np.ones((8, 8), np.float32) / 8), c("b", np.arange(8, dtype=np.float32)),
                       c("sh", np.array([5, -1, 2, 4], np.int64)), c("s0", np.array([1], np.int64)),
                       c("s1", np.array([3], np.int64)), c("ax", np.array([3], np.int64)),
                       c("sh2", np.array([5, -1, 4], np.int64))])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "seeds_onnx/rows.onnx")
PYEOF
fi
# plan_meta's seeds: the metadata section cut out of each seed plan (section 0:
# offset and size at bytes 40 and 48 of the header, little-endian)
for p in seeds_plan/*.plan; do
  off=$(od -An -t u8 -j 40 -N 8 "$p" | tr -d ' ') size=$(od -An -t u8 -j 48 -N 8 "$p" | tr -d ' ')
  dd if="$p" of="seeds_plan_meta/$(basename "$p" .plan).meta" iflag=skip_bytes,count_bytes skip="$off" count="$size" status=none
done
for t in $targets; do cp "$src"/tests/fuzz/regress_$t/* "seeds_$t/" 2>/dev/null || true; done
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
status=0
for t in $targets; do
  rm -rf "crashes_$t" && mkdir -p "corpus_$t" "crashes_$t"
  [ -n "${FUZZ_TIME:-}" ] || { rm -rf "corpus_$t" && mkdir "corpus_$t"; }
  # a fixed number of inputs per target from a fixed seed (about $secs s each on the 2-core CI
  # machine; 6x that at most), whatever the machine's speed. FUZZ_TIME=S explores for S
  # seconds instead (with FUZZ_SEED=0, a random seed, to look for new findings).
  case $t in plan) runs=1500000 ;; plan_meta) runs=50000 ;; *) runs=150000 ;; esac
  runs=$((runs * secs / 20))
  if [ -n "${FUZZ_TIME:-}" ]; then budget=(-max_total_time="$FUZZ_TIME"); else budget=(-runs="$runs" -max_total_time=$((secs * 6))); fi
  ./fuzz_$t -seed="${FUZZ_SEED:-1}" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="crashes_$t/" \
    -print_final_stats=1 "corpus_$t" "seeds_$t" > "fuzz_$t.log" 2>&1 || status=1
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "fuzz_$t.log" | grep -o "[0-9]*$" || echo "?")
  edges=$(grep -o "cov: [0-9]*" "fuzz_$t.log" | tail -1 | grep -o "[0-9]*$" || echo "?")
  echo "fuzz_$t: $execs executions, $edges edges covered"
  if ls crashes_$t/* >/dev/null 2>&1; then
    echo "fuzz_$t found crashes (copy them into tests/fuzz/regress_$t/ and fix):"; ls crashes_$t
    tail -30 "fuzz_$t.log"; status=1
  fi
  # regression corpus: every input that ever crashed must now be handled
  if ls "$src"/tests/fuzz/regress_$t/* >/dev/null 2>&1; then
    ./fuzz_$t "$src"/tests/fuzz/regress_$t/* > "regress_$t.log" 2>&1 || { echo "regress_$t fails"; tail -30 "regress_$t.log"; status=1; }
  fi
done
exit $status
