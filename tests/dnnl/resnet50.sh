#!/usr/bin/env bash
# torchvision ResNet-50 (random weights, BatchNormalization kept so that ppcc
# folds it) on the oneDNN backend: at -pp 1 and 2, in oneDNN's layouts and in
# plain layouts (PPRT_DNNL_LAYOUT=plain), with 1 and 2 threads per stage, the
# outputs are within rtol 1e-3 / atol 1e-4 of the reference backend's and of
# PyTorch's; every convolution, pool and the Gemm run on oneDNN, and Flatten
# as a view of the pooled tensor's bytes at -pp 1; in oneDNN's
# layouts at -pp 1 with direct convolutions only (PPRT_DNNL_WINO=0) no
# reorder remains (the average pool, pprt's kernel runtime/dnnl/kernels/gap.c, reads
# the blocked tensor as stored and writes the plain one Flatten views; one
# reorder before Flatten while it was oneDNN's pooling) and the 16
# residuals are summed in place;
# with Winograd (the default) all 13 3x3 stride-1 convolutions use it:
# oneDNN's kernel where it has one (AVX-512), each with a reorder in and out
# of its blocked layout (27 reorders); elsewhere pprt's own AVX2 kernel
# (runtime/dnnl/kernels/wino.c), which works in oneDNN's AVX2 layout nChw8c, so again
# none.
# Exit 77 (skipped) when pprt was built without oneDNN.
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}"
out=$1
"$PPRT" --backend dnnl --version >/dev/null 2>&1 || { echo "SKIP: this pprt was built without oneDNN"; exit 77; }
rm -rf "$out" && mkdir -p "$out" && cd "$out"
"$PY" "$SRC/tests/models/export_torchvision.py" --model resnet50 --out r50 --batch 2 --keep-bn > export.txt
cmp_npy() { "$PY" "$SRC/tests/tools/compare_npy.py" "$1" "$2" --rtol 1e-3 --atol 1e-4; echo; }
for pp in 1 2; do
  "$PPCC" r50/model.onnx -pp $pp -b 1 -q -o r$pp.plan
  "$PPRT" r$pp.plan r50/data --backend ref -o ref$pp -q
  cmp_npy ref$pp/output.npy r50/expected/output.npy
  for mode in blocked plain wino; do
    layout=$mode wino=0
    [ $mode = wino ] && layout=blocked wino=1
    for t in 1 2; do
      [ $pp = 2 ] && [ $t = 2 ] && continue # 2 stages x 2 threads: more than the 2 cores of the CI machine
      o=dnnl_${pp}_${mode}_$t
      PPRT_DNNL_WINO=$wino PPRT_DNNL_LAYOUT=$layout PPRT_DNNL_VERBOSE=2 "$PPRT" r$pp.plan r50/data --backend dnnl --threads $t -o $o -q 2> $o.log.all
      grep -v "^  " $o.log.all > $o.log || true
      n_wino=$(grep -c "wino" $o.log.all || true)
      echo "-pp $pp $mode, $t thread(s), $n_wino Winograd convolutions: $(cat $o.log | tr '\n' ' ')"
      cmp_npy $o/output.npy ref$pp/output.npy
      cmp_npy $o/output.npy r50/expected/output.npy
      # every node on oneDNN; Flatten a view of its input's bytes (no copy),
      # unless its input arrives from another stage (then the reference kernel copies)
      n_ref=$(grep -c "reference: Flatten;" $o.log || true)
      n_all=$(grep -c "nodes on oneDNN" $o.log)
      n_views=$(grep -o "[0-9]* views of their input's bytes" $o.log | awk '{s += $1} END {print s + 0}')
      if [ "$n_all" != "$pp" ] || grep "reference:" $o.log | grep -qv "reference: Flatten;"; then
        echo "FAIL: -pp $pp: nodes other than Flatten ran on the reference kernels"; cat $o.log; exit 1
      fi
      [ $((n_ref + n_views)) = 1 ] || { echo "FAIL: expected Flatten once, as a view or a copy (views $n_views, copies $n_ref)"; cat $o.log; exit 1; }
      if [ $mode != plain ] && [ $pp = 1 ] && [ "$n_views" != 1 ]; then
        echo "FAIL: -pp 1: Flatten should be a view of the pooled tensor"; cat $o.log; exit 1
      fi
      if [ $mode = blocked ] && [ $pp = 1 ] && ! grep -q " 0 reorders and 0 residual copies per micro-batch (16 outputs in place of their input)" $o.log; then
        echo "FAIL: -pp 1 in oneDNN layouts should need no reorder and sum all 16 residuals in place"
        cat $o.log; exit 1
      fi
      [ $wino = 0 ] && [ "$n_wino" != 0 ] && { echo "FAIL: PPRT_DNNL_WINO=0 still used Winograd"; exit 1; }
      n_own=$(grep -c "pprt:wino_[24]x3" $o.log.all || true)
      if [ $mode = wino ] && grep -q -w avx2 /proc/cpuinfo && grep -q -w fma /proc/cpuinfo; then
        [ "$n_wino" = 13 ] || { echo "FAIL: $n_wino Winograd convolutions, want all 13 3x3 stride-1 ones"; exit 1; }
      fi
      if [ $mode = wino ] && [ $pp = 1 ] && [ "$n_wino" = 13 ]; then
        # oneDNN's Winograd kernels (AVX-512) write channel blocks, and the 1x1 convolutions beside them
        # take the same blocks (PPRT_DNNL_CONV_BLOCKED, the default): no reorder (27 before it)
        if [ "$n_own" = 13 ] || [ "$n_own" = 0 ]; then want=0; else want=; fi
        [ -z "$want" ] || grep -q " $want reorders and 0 residual copies per micro-batch (16 outputs in place of their input)" $o.log || {
          echo "FAIL: -pp 1 with Winograd ($n_own of 13 on pprt's kernel) should need $want reorders and sum all 16 residuals in place"
          cat $o.log; exit 1; }
      fi
    done
  done
done
rm -f r1.plan r2.plan r50/model.onnx # (passed; 0.3 GB of weights CI's disk need not hold)
echo "resnet50 on oneDNN: -pp 1, 2; blocked and plain layouts, Winograd; 1 and 2 threads: matches the reference backend and PyTorch"
