#!/usr/bin/env bash
# The pipeline's ends overlapped (--cuda-overlap on: link_stage.c's
# pprt_link_staged_overlap, the inputs cut and uploaded and the outputs
# downloaded and written on threads of their own) on cuda-emu, whose streams
# are threads and whose events are counted, so the ordering the GPU relies
# on runs here: outputs bit-identical to --cuda-overlap off for digits at
# -pp 1, 2, 3 and a small ResNet-like model (tests/cuda/overlap_models.py)
# at -pp 1, 2, at --depth 2 and 4, with warm-up micro-batches, and with
# PPRT_EMU_DELAY_US widening the windows a missing wait would leave open (a
# copy not waited for gives other bytes: checked by hand, docs/cuda.md);
# a stage that fails mid-run with overlap on (a Gather index out of range)
# ends the run with its own message, exit 2, no hang.
# About 20 s. usage: overlap.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
"$PY" "$SRC/tests/cuda/overlap_models.py" .
S=$SRC/samples/digits
n=0
# same MODEL DATA PP DEPTH WARMUP: off, then on (widened windows), the same bytes
same() {
  local m=$1 data=$2 pp=$3 depth=$4 warm=$5
  "$PPCC" "$m" -pp "$pp" -b 4 -o p.plan -q
  "$PPRT" p.plan "$data" --backend cuda-emu -q -o off --depth "$depth" --warmup "$warm" --cuda-overlap off
  PPRT_EMU_DELAY_US=${DELAY:-200} timeout 120 "$PPRT" p.plan "$data" --backend cuda-emu -q -o on --depth "$depth" \
    --warmup "$warm" --cuda-overlap on || fail "$(basename "$m") -pp $pp --depth $depth: --cuda-overlap on failed"
  for f in off/*.npy; do
    cmp -s "$f" "on/$(basename "$f")" || fail "$(basename "$m") -pp $pp --depth $depth --warmup $warm: other bytes with --cuda-overlap on"
  done
  n=$((n + 1))
}
for pp in 1 2 3; do same "$S/model.onnx" "$S/data" $pp 2 1; done
same "$S/model.onnx" "$S/data" 2 4 3
for pp in 1 2; do
  same resnet_like.onnx resnet_like $pp 2 0
  same resnet_like.onnx resnet_like $pp 4 2
done
same gather.onnx gather_ok 1 2 1
# a stage failing mid-run: its own message, exit 2, within the timeout
"$PPCC" gather.onnx -b 4 -o g.plan -q
set +e
timeout 30 "$PPRT" g.plan gather_bad --backend cuda-emu -q -o bad --cuda-overlap on 2> bad.txt
rc=$?
set -e
[ $rc = 2 ] && grep -q "index is out of range" bad.txt || fail "a failing stage with --cuda-overlap on: exit $rc: $(cat bad.txt)"
echo "overlap: $n runs bit-identical with --cuda-overlap on and off; a failing stage exits 2 with its message"
