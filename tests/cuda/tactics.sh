#!/usr/bin/env bash
# The convolution tactic cache without a GPU (docs/cuda.md, "The convolution
# tactic cache"): test_tactics (signatures, table lines, malformed tables
# refused naming the line, the built-in tables parsed); a convolution's
# signature is the same in every split (tests/cuda/overlap_models.py's
# ResNet-like model at -pp 1, 2 and 3: each node's signature in every stage
# it lands in), so a table chooses the same engine whatever the cut; pprt
# --cuda-tactics refuses a malformed or missing table with exit 2, naming
# the file and line, and takes auto, off and a good table; the fp16 plan's
# signatures NHWC (--cuda-layout auto) and the same at -pp 1, 2, 3. About 3 s.
# usage: tactics.sh WORK_DIR   (env: PPCC, PPRT, PY, SRC, TEST_TACTICS)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${PY:?}" "${SRC:?}" "${TEST_TACTICS:?}"
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
fail() { echo "FAIL: $*"; exit 1; }
"$TEST_TACTICS" || fail "test_tactics"
"$PY" "$SRC/tests/cuda/overlap_models.py" . >/dev/null
for pp in 1 2 3; do
  "$PPCC" resnet_like.onnx -pp $pp -b 4 -o r$pp.plan -q
  "$TEST_TACTICS" --sigs r$pp.plan | sort > sigs$pp.txt
done
n=$(wc -l < sigs1.txt)
[ "$n" -ge 5 ] || fail "the -pp 1 plan has $n convolution steps, want 5 or more"
for pp in 2 3; do
  cmp -s sigs1.txt sigs$pp.txt || fail "-pp $pp: other convolution signatures than -pp 1: $(diff sigs1.txt sigs$pp.txt | head)"
done
echo "ok: $n convolutions, the same signatures at -pp 1, 2, 3"
# a half plan's convolutions are channels-last by default (pprt --cuda-layout auto): each signature says so, and the
# layout rule reads the whole plan, so the signatures stay the same at -pp 2 and 3
for pp in 1 2 3; do
  "$PPCC" resnet_like.onnx -pp $pp -b 4 --precision fp16 -o h$pp.plan -q
  "$TEST_TACTICS" --sigs h$pp.plan | sort > hsigs$pp.txt
done
[ "$(grep -c ' nhwc$' hsigs1.txt)" = "$(wc -l < hsigs1.txt)" ] && [ "$(wc -l < hsigs1.txt)" = "$n" ] \
  || fail "the fp16 plan's signatures: $(grep -c ' nhwc$' hsigs1.txt) of $(wc -l < hsigs1.txt) NHWC, want all $n"
for pp in 2 3; do
  cmp -s hsigs1.txt hsigs$pp.txt || fail "fp16 -pp $pp: other signatures than -pp 1: $(diff hsigs1.txt hsigs$pp.txt | head)"
done
echo "ok: the fp16 plan's $n convolutions NHWC by their signatures, the same at -pp 1, 2, 3"
# pprt: a table from those signatures (made-up engines: cuda-emu runs no cuDNN) is taken; bad ones are refused
awk -F'\t' '!seen[$2]++ {print $2 "\t" NR "\t2:1,14:3\t0\t1.5"}' sigs1.txt > good.tsv
for t in auto off good.tsv; do
  "$PPRT" r2.plan resnet_like --backend cuda-emu --cuda-tactics $t -q -o o_$t > run.txt 2>&1 || fail "--cuda-tactics $t: $(cat run.txt)"
done
cmp -s o_auto/y.npy o_good.tsv/y.npy || fail "--cuda-tactics good.tsv changed cuda-emu's outputs"
printf 'fwd a\t1\t-\t0\t1\nfwd a\t2\t-\t0\t1\n' > twice.tsv
printf '# a comment\nfwd a\t1\tknob\t0\t1\n' > knob.tsv
for bad in "twice.tsv:'fwd a' is there twice" "knob.tsv:line 2: the knobs are not" "missing.tsv:cannot open"; do
  f=${bad%%:*} want=${bad#*:}
  set +e; "$PPRT" r1.plan resnet_like --backend cuda-emu --cuda-tactics $f -q > err.txt 2>&1; rc=$?; set -e
  [ $rc = 2 ] || fail "--cuda-tactics $f: exit $rc, want 2: $(cat err.txt)"
  grep -q -- "$want" err.txt || fail "--cuda-tactics $f: the message does not say '$want': $(cat err.txt)"
  grep -q -- "$f" err.txt || fail "--cuda-tactics $f: the message does not name the file: $(cat err.txt)"
done
echo "ok: --cuda-tactics auto, off and a table taken; a doubled signature, a bad knob and a missing file refused (exit 2)"
