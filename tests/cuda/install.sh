#!/usr/bin/env bash
# The CUDA module after cmake --install (ctest install_module, builds with
# CUDA only; docs/cuda.md, "The module"): the installed pprt finds
# PREFIX/lib/pprt/pprt_cuda.so from its own folder (not the build tree's),
# loads it only for --backend cuda, and names it when it is gone.
# usage: install.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$out/prefix" >/dev/null
p=$out/prefix/bin/pprt
[ -f "$out/prefix/lib/pprt/pprt_cuda.so" ] || fail "no lib/pprt/pprt_cuda.so installed"
"$p" --version | grep -qF "cuda: $out/prefix/bin/../lib/pprt/pprt_cuda.so (not loaded" \
  || fail "installed pprt --version: $("$p" --version | grep 'cuda:')"
"$p" --backend cuda --version | grep -Eq 'cuda: CUDA runtime [0-9.]+, cuDNN' \
  || fail "installed pprt --backend cuda --version: $("$p" --backend cuda --version | grep 'cuda')"
mv "$out/prefix/lib/pprt/pprt_cuda.so" "$out/moved.so"
set +e; "$p" --backend cuda --version > "$out/v.txt" 2>&1; set -e
grep -qF "module pprt_cuda.so not found (looked for $out/prefix/bin/pprt_cuda.so, $out/prefix/bin/../lib/pprt/pprt_cuda.so" "$out/v.txt" \
  || fail "module gone: $(cat "$out/v.txt")"
PPRT_CUDA_MODULE=$out/moved.so "$p" --backend cuda --version | grep -Eq 'cuda: CUDA runtime [0-9.]+, cuDNN' \
  || fail "PPRT_CUDA_MODULE does not name the module"
rm -rf "$out"
echo "ok: the installed pprt loads lib/pprt/pprt_cuda.so, names it when gone, takes PPRT_CUDA_MODULE"
