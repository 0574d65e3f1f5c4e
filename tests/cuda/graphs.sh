#!/usr/bin/env bash
# The CUDA graph cache on cuda-emu (ctest cuda_graph_cache, labels fast and
# cuda; about 10 s). cuda-emu keeps the engine's cache (runtime/cuda/gcache.h)
# with a marker where the engine keeps a graph, so --stats-json's
# "cuda_graph_captures" counts the captures a GPU would make. Digits at
# -pp 3, micro-batch 2 (180 micro-batches), every stage on cuda-emu:
#   - --depth 8 (threads; and stages on three emulated devices, copy links):
#     each stage captures once per pair of message buffers it meets (8) and
#     replays every later micro-batch; bit-identical to --cuda-graphs off;
#   - --depth 24: 24 pairs, more than the 16 graphs a stage kept before
#     issue 57 (that cache captured again every micro-batch): 24 captures;
#   - --cuda-graphs off, --cuda-sync, --profile: no capture.
# usage: graphs.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
fail() { echo "FAIL: $*"; exit 1; }
"$PPCC" "$S/model.onnx" -pp 3 -b 2 -o d.plan -q
"$PPCC" "$S/model.onnx" -pp 3 -b 2 --placement 0:cuda-emu:0,1:cuda-emu:1,2:cuda-emu:2 -o dev3.plan -q
"$PPRT" d.plan "$S/data" -o off --backend cuda-emu -q --cuda-graphs off
# check STATS WANT_CAPTURES: every stage captured WANT times and replayed every other micro-batch but the first
check() {
  "$PY" - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); want = int(sys.argv[2])
mbs = 180 + j.get("warmup_micro_batches", 0)
for s in j["stages"]:
    c, r = s["cuda_graph_captures"], s["cuda_graph_replays"]
    exp_r = mbs - 1 - want if want else 0
    if c != want or r != exp_r:
        sys.exit(f"stage {s['index']}: {c} captures and {r} replays, expected {want} and {exp_r}")
print(f"{len(j['stages'])} stages: {want} captures, {mbs - 1 - want if want else 0} replays each")
PY
}
for d in 8 24; do
  "$PPRT" d.plan "$S/data" -o g$d --backend cuda-emu -q --depth $d --stats-json s$d.json
  cmp off/logits.npy g$d/logits.npy || fail "--depth $d: graphs change the outputs"
  echo "--depth $d, threads: $(check s$d.json $d)" || fail "--depth $d"
done
"$PPRT" dev3.plan "$S/data" -o gdev -q --depth 8 --stats-json sdev.json
cmp off/logits.npy gdev/logits.npy || fail "three emulated devices: other outputs"
echo "--depth 8, three emulated devices (copy links): $(check sdev.json 8)"
for o in "--cuda-graphs off" "--cuda-sync" "--profile prof.json"; do
  "$PPRT" d.plan "$S/data" -o n --backend cuda-emu -q --depth 8 $o --stats-json sn.json
  echo "$o: $(check sn.json 0)"
done
echo "cuda_graph_cache: all passed"
