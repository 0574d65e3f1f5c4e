#!/usr/bin/env bash
# One device call that does what a GPU day owes, in order of value, within
# SECS seconds (default 540: the device tool allows 600 a call): gpu_mini.sh's
# checks (carried zoo against onnxruntime and across the split, --profile,
# compute-sanitizer synccheck and initcheck, Einsum on cuBLASLt), then
# bench/cuda_vs_torch.py (ResNet-50 and ViT-B/16 exported there, pprt at
# -pp 1, 2, 3 against PyTorch eager on the same GPU, outputs compared; their
# --profile by op type, with --cuda-explain's engine choices; GPT under compute-sanitizer memcheck and initcheck), then
# the ONNX node tests that tests/conformance/expected_pass.txt lists, the
# kernels never run on a GPU first, in chunks so a chunk cut short loses
# only itself; between them tests/ops's cases on the GPU (OPS_SECS). Everything it finds goes to $OUT.
# Here: PP_CARRY_ZOO=1 tests/cuda/build_carry.sh. There (carry .gpu):
#   SECS=540 BENCH_SECS=240 bash tests/cuda/gpu_day.sh
# (MINI=0 BENCH_SECS=0 SAN=memcheck: only the node tests, each under compute-sanitizer)
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
# the device tool brings back 8 files of $OUT at most: the log there, everything else in
# /tmp/gday_files, packed into $OUT/gday.tgz on the way out (a timeout of the script's own included)
dest=${OUT:-/tmp/gday}; out=/tmp/gday_files; rm -rf "$out"; mkdir -p "$dest" "$out"
exec > >(tee "$dest/day.log") 2>&1
trap 'tar czf "$dest/gday.tgz" -C "$out" . 2>/dev/null' EXIT
t0=$SECONDS; budget=${SECS:-540}
left() { echo $((budget - (SECONDS - t0))); }
status=0
be=${PP_BACKEND:-cuda}   # cuda-emu, with MINI=0: a dry run here
[ "${MINI:-1}" = 0 ] || SECS=1 bash "$src/tests/cuda/gpu_mini.sh" || status=1
. "$src/tests/cuda/gpu_env.sh"

echo "== bench/cuda_vs_torch.py ($(date +%T), $(left) s left)"
bs=${BENCH_SECS:-240}; [ "$bs" -lt "$(left)" ] || bs=$(($(left) - 30))
[ "$bs" -le 0 ] || timeout "$bs" python3 "$src/bench/cuda_vs_torch.py" --pprt "$PPRT" --ppcc "$PPCC" --work /tmp/cvt \
  --backend $be --out "$out/cuda_vs_torch.md" ${BENCH_ARGS:-} --runs "${BENCH_RUNS:-2}" 2> "$out/bench.err" || { echo "bench: rc $?"; tail -5 "$out/bench.err"; status=1; }
cat "$out/cuda_vs_torch.md" 2>/dev/null
# where the GPU time goes: --profile at batch 8, -pp 1, summed by op type
# (and ViT at --precision tf32: on 2026-11-26 it ran only 9 % faster than f32, as if its products took no TF32)
# rate STATS_JSON: the steady-state samples/s; by_op PROFILE_JSON LABEL: its ms summed by op type
rate() { python3 -c "import json, sys; print(round(json.load(open(sys.argv[1]))['steady_samples_per_s'], 1))" "$1"; }
by_op() {
  python3 -c "
import collections, json, sys
t = json.load(open(sys.argv[1]))['nodes']; agg = collections.Counter()
for k, v in t.items(): agg[k.rsplit('/', 1)[-1].split('_')[0]] += v
print(sys.argv[2] + ', ms per micro-batch of 8: %.2f;' % sum(agg.values()), ', '.join('%s %.2f' % kv for kv in agg.most_common(8)))" "$1" "$2"
}
# MODEL:PRECISION[:narrow] (narrow: --cuda-wide-copies off, the copies as given)
for mp in resnet50:f32 vit_b_16:f32 vit_b_16:tf32 vit_b_16:f32:narrow; do
  IFS=: read -r m pr nar <<< "$mp"; d=/tmp/cvt/$m; [ -f $d/b8_pp1.plan ] || continue
  ex=(); [ "$be" != cuda ] || ex=(--cuda-explain)   # which cuDNN engine / cuBLASLt algorithm each step took
  [ -z "$nar" ] || ex+=(--cuda-wide-copies off)
  tag=${m}_$pr${nar:+_$nar}
  timeout 60 "$PPRT" $d/b8_pp1.plan $d/data_8 -o /tmp/cvt/prof_out --backend $be -q --warmup 4 --precision $pr \
    "${ex[@]}" --profile "$out/prof_$tag.json" 2> "$out/explain_$tag.txt" && by_op "$out/prof_$tag.json" "$m $pr${nar:+ $nar} profile"
done
# ResNet-50's convolutions at 1.6-2.3x PyTorch's time (2026-11-26): fused cuDNN graphs (conv + bias +
# residual + ReLU, runtime-fusion engines in f32) against the convolution alone + pprt's epilogue kernel
d=/tmp/cvt/resnet50
if [ "$be" = cuda ] && [ -f $d/b8_pp1.plan ]; then
  for r in 1 2; do for f in on off; do
    timeout 60 "$PPRT" $d/b8_pp1.plan $d/data_8 -o /tmp/cvt/fus_out --backend cuda -q --warmup 4 --cuda-conv-fusion $f \
      --stats-json /tmp/cvt/fus_$f.json $([ $r = 1 ] && echo --cuda-explain) 2> "$out/explain_resnet50_fusion_$f.txt" \
      && echo "ResNet-50 -b 8 --cuda-conv-fusion $f: $(rate /tmp/cvt/fus_$f.json) samples/s"
  done; done
fi
# strided copies widened (the default since 2026-11-27, not yet timed on a GPU) against as given
# (its profile: vit_b_16 f32 narrow above): ViT-B/16's Transposes and Gathers were 3.2 of 14.3 ms a
# micro-batch of 8 on the sixth lease
d=/tmp/cvt/vit_b_16
if [ -f $d/b8_pp1.plan ]; then
  for r in 1 2; do for w in on off; do
    timeout 60 "$PPRT" $d/b8_pp1.plan $d/data_8 -o /tmp/cvt/wide_out_$w --backend $be -q --warmup 4 --cuda-wide-copies $w \
      --stats-json /tmp/cvt/wide_$w.json && echo "ViT-B/16 -b 8 --cuda-wide-copies $w: $(rate /tmp/cvt/wide_$w.json) samples/s"
  done; done
  cmp /tmp/cvt/wide_out_on/*.npy /tmp/cvt/wide_out_off/*.npy && echo "ViT-B/16: the same output bytes with copies widened and as given" \
    || { echo "FAIL: ViT-B/16's output differs with --cuda-wide-copies off"; status=1; }
fi
# the row kernels in lanes (GPT's LayerNorms) under compute-sanitizer
if [ "$be" = cuda ]; then
  for tool in memcheck initcheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$PPRT" $Z/gpt/auto_2.plan $Z/gpt/data -o /tmp/gday_san \
      --backend cuda --cuda-graphs off -q > "$out/san_gpt_$tool.txt" 2>&1 || { echo "FAIL: compute-sanitizer $tool on GPT"; status=1; }
    echo "GPT -pp 2 $tool: $(tail -1 "$out/san_gpt_$tool.txt")"
  done
fi

# tests/ops's cases (the fusions ppcc added after the last lease: pp.GroupNorm on the norm kernel per
# channel, LayerNorm without shift, HardSwish, Pow by 2, layer scales; the RNNs on the host fallback)
# on $be against onnxruntime, within OPS_SECS (default 150; 0 skips)
os=${OPS_SECS:-150}; [ "$os" -lt "$(($(left) - 20))" ] || os=$(($(left) - 20))
if [ "$os" -gt 0 ]; then
  echo "== tests/ops on $be ($(date +%T), $(left) s left)"
  PP_OPS_BACKENDS=$be PP_OPS_IR=10 PP_OPS_ONLY=${OPS_ONLY:-.} timeout "$os" python3 "$src/tests/ops/run.py" /tmp/gday_ops \
    > "$out/ops.txt" 2>&1 || { echo "ops: rc $?"; status=1; }
  grep -E "^ops: [0-9]+ cases|^FAIL" "$out/ops.txt" | head -30
fi

echo "== ONNX node tests on $be ($(date +%T), $(left) s left)"
w=/tmp/gday_nt; rm -rf $w; mkdir -p $w/all && tar xzf "$src/.gpu/node.tgz" -C $w/all
python3 - "$src" $w <<'EOF'
import os, shutil, sys
src, w = sys.argv[1:]
listed = [t.strip() for t in open(os.path.join(src, "tests/conformance/expected_pass.txt")) if t.strip()]
first = ("depthtospace", "spacetodepth", "lstm", "gru", "rnn", "training_mode", "attention", "rotary", "resize", "einsum", "scatter", "tril", "triu", "_pad", "test_sin", "test_cos",
         "test_tan", "sign", "shrink", "isnan", "isinf", "bitwise", "bitshift", "top_k", "dropout",
         # own kernels added on 2026-11-27, never run on a GPU yet
         "gridsample", "quantizelinear", "hardmax", "l1normalization", "l2normalization", "lpnormalization", "lppool", "onehot", "affine_grid", "cumprod")
new = [t for t in listed if any(k in t for k in first)]
rest = [t for t in listed if t not in new]
chunks = [new] + [rest[i::4] for i in range(4)]
for i, ts in enumerate(chunks):
    os.makedirs(os.path.join(w, f"c{i}"))
    for t in ts:
        if os.path.isdir(os.path.join(w, "all/node", t)):
            shutil.move(os.path.join(w, "all/node", t), os.path.join(w, f"c{i}", t))
    print(f"chunk {i}: {len(ts)} tests")
EOF
# SAN=memcheck (or racecheck, initcheck, synccheck): every node test's pprt under compute-sanitizer
if [ -n "${SAN:-}" ]; then
  printf '#!/bin/sh\nexec compute-sanitizer --tool %s --error-exitcode 9 %s "$@"\n' "$SAN" "$PPRT" > $w/pprt_san
  chmod +x $w/pprt_san; export PPRT=$w/pprt_san
fi
for i in ${CHUNKS:-0 1 2 3 4}; do   # CHUNKS="3 4 0 1 2": another order (a lease that ran some already)
  [ "$(left)" -gt 20 ] || { echo "out of time before chunk $i"; break; }
  PPRT_EXTRA_ARGS="--backend $be" timeout $(($(left) - 5)) python3 "$src/tests/conformance/run.py" -j 16 \
    --node-dir $w/c$i --filter test_ --timeout 30 --list-failures --json "$out/conf_c$i.json" > "$out/conf_c$i.txt" 2>&1
  rc=$?; echo "chunk $i: rc $rc: $(grep -E 'listed-op tests:|regression|did not pass|tests in' "$out/conf_c$i.txt" | tr '\n' ' ')"
  [ $rc = 0 ] || { status=1; grep -A30 "did not pass" "$out/conf_c$i.txt" | head -30; }
done
date -u; echo "gpu day: $([ $status = 0 ] && echo all passed || echo FAILURES above) ($((SECONDS - t0)) s)"; exit $status
