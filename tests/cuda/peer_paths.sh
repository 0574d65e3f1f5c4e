#!/usr/bin/env bash
# Peer copies' paths and the devices' descriptions on cuda-emu (ctest
# cuda_peer_paths, labels fast and cuda; about 10 s). Digits at -pp 3, each
# stage on its own emulated device. PPRT_EMU_PEER says which device maps
# which (mem_emu.c), and the emulator refuses a peer copy queued on a stream
# of a device that does not map the other end, so a link issuing its copy
# from the wrong side fails here:
#   - all (both ways), "1>0,2>1" (only the consumers map), "0>1" (boundary
#     0 -> 1 from the producer, 1 -> 2 with no mapping), none: each
#     boundary's path in --stats-json ("path_to_next") and in pprt's notes
#     is the one expected; the outputs bit-identical to the same plan on one
#     device, also with PPRT_EMU_DELAY_US widening the staged copies' race
#     windows;
#   - every device stage described (--stats-json "device": name, compute
#     capability, SMs, libraries); PPRT_EMU_SMS=1:114 gives stage 1's device
#     114 SMs: one warning that results may differ across the split, and
#     "devices_differ": true; none and false otherwise.
# usage: peer_paths.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
fail() { echo "FAIL: $*"; exit 1; }
"$PPCC" "$S/model.onnx" -pp 3 -b 16 --placement 0:cuda-emu:0,1:cuda-emu:1,2:cuda-emu:2 -o three.plan -q
"$PPCC" "$S/model.onnx" -pp 3 -b 16 --placement 0:cuda-emu:0,1:cuda-emu:0,2:cuda-emu:0 -o one.plan -q
"$PPRT" one.plan "$S/data" -o one -q
P=producer C=consumer G=staged
# paths: what boundary 0 -> 1 and 1 -> 2 must take
check() { # check NAME STATS STDERR WANT0 WANT1
  "$PY" - "$@" <<'PY'
import json, sys
name, stats, log, w0, w1 = sys.argv[1:6]
j = json.load(open(stats))
want = {"producer": "peer copy issued by the producer's device", "consumer": "peer copy issued by the consumer's device",
        "staged": "staged through pinned host memory"}
for b, w in enumerate([w0, w1]):
    got = j["stages"][b].get("path_to_next", "")
    if not got.startswith(want[w]):
        sys.exit(f"{name}: boundary {b} -> {b + 1} took '{got}', expected '{want[w]}...'")
    if f"pprt: boundary stage {b} -> stage {b + 1}: {want[w]}" not in open(log).read():
        sys.exit(f"{name}: pprt's notes do not say boundary {b} -> {b + 1} is '{want[w]}...'")
for i, s in enumerate(j["stages"]):
    d = s.get("device")
    if not d or d["place"] != f"cuda-emu device {i}" or d["sms"] <= 0 or not d["name"] or not d["compute_capability"]:
        sys.exit(f"{name}: stage {i} has no device description: {d}")
if j["devices_differ"]:
    sys.exit(f"{name}: devices_differ is true for one kind of device")
print(f"{name}: {w0}, {w1}")
PY
}
for spec in "all:$P:$P" "1>0,2>1:$C:$C" "0>1:$P:$G" "none:$G:$G"; do
  peer=${spec%%:*} rest=${spec#*:}
  w0=${rest%%:*} w1=${rest#*:}
  tag=$(echo "$peer" | tr -c 'a-z0-9' _)
  for delay in 0 300; do
    PPRT_EMU_PEER=$peer PPRT_EMU_DELAY_US=$delay "$PPRT" three.plan "$S/data" -o "o_${tag}_$delay" \
      --stats-json "s_$tag.json" > "log_$tag.txt" 2>&1 || { cat "log_$tag.txt"; fail "PPRT_EMU_PEER=$peer: the run failed"; }
    cmp one/logits.npy "o_${tag}_$delay/logits.npy" || fail "PPRT_EMU_PEER=$peer, delay $delay us: other outputs than on one device"
  done
  echo "ok: PPRT_EMU_PEER=$peer: $(check "paths" "s_$tag.json" "log_$tag.txt" "$w0" "$w1"); bit-identical to one device"
done
# the devices described, and a stage on another kind of device
PPRT_EMU_SMS=1:114 "$PPRT" three.plan "$S/data" -o odiff --stats-json sdiff.json -q 2> diff.txt
n=$(grep -c "^pprt: warning: stage 1's device (cuda-emu, compute capability 9.0, 114 SMs; .*) differs from stage 0's (cuda-emu, 9.0, 132 SMs; .*): results may not be bit-identical" diff.txt || true)
[ "$n" = 1 ] || { cat diff.txt; fail "PPRT_EMU_SMS=1:114: $n warnings about stage 1's device, expected 1"; }
"$PY" -c "
import json, sys
j = json.load(open('sdiff.json'))
sms = [s['device']['sms'] for s in j['stages']]
sys.exit(0 if j['devices_differ'] is True and sms == [132, 114, 132] else f'devices_differ {j[\"devices_differ\"]}, SMs {sms}')
" || fail "PPRT_EMU_SMS=1:114: --stats-json"
! grep -q "warning" log_all.txt || fail "a warning with one kind of device: $(grep warning log_all.txt)"
echo "ok: PPRT_EMU_SMS=1:114: one warning naming stage 1's 114 SMs against stage 0's 132, devices_differ true"
echo "cuda_peer_paths: all passed"
