#!/usr/bin/env bash
# cuda-emu's messages in the emulated device space on the threaded driver
# (test_devlinks.c says what each run checks): digits at -pp 1, 2, 3 with
# every stage on cuda-emu, and heterogeneous placements (host stages between
# device stages, stages sharing a device, dnnl where this build has it).
# About 5 s. usage: devlinks.sh WORK_DIR   (env: PPCC, TEST_DEVLINKS, SRC, PPRT)
set -euo pipefail
: "${PPCC:?}" "${TEST_DEVLINKS:?}" "${SRC:?}" "${PPRT:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
S=$SRC/samples/digits
X=$S/data/input.npy
for pp in 1 2 3; do
  "$PPCC" "$S/model.onnx" -pp $pp -b 16 -o d$pp.plan -q
  "$TEST_DEVLINKS" d$pp.plan "$X" --all
done
cpu=ref
"$PPRT" --backend list | grep -q '^dnnl .*oneDNN' && ! "$PPRT" --backend list | grep -q '^dnnl .*unavailable' && cpu=dnnl
placements=("0:ref,1:cuda-emu,2:$cpu" "0:cuda-emu,1:$cpu,2:cuda-emu" "0:cuda-emu:1,1:cuda-emu:1,2:cuda-emu:3"
            "0:cpu,1:cuda-emu,2:ref")
for pl in "${placements[@]}"; do
  "$PPCC" "$S/model.onnx" -pp 3 -b 16 --placement "$pl" -o h.plan -q
  "$TEST_DEVLINKS" h.plan "$X"
done
"$PPCC" "$S/model.onnx" -pp 2 -b 16 --placement 0:cpu,1:cuda-emu -o h2.plan -q
"$TEST_DEVLINKS" h2.plan "$X"
echo "devlinks: all passed"
