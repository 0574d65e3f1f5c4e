#!/usr/bin/env bash
# Build what tests/cuda/run_on_gpu.sh needs into one ignored folder small
# enough to carry to a GPU machine (the device tool's 64 MiB): ppcc, pprt and
# the project's own shared libraries they need beyond glibc and CUDA's
# (protobuf-c, xxhash), with RPATH $ORIGIN. CUDA, cuDNN, cuBLASLt and NCCL
# are linked dynamically and found there by the loader (run_on_gpu.sh points
# LD_LIBRARY_PATH at the Python packages' nvidia/*/lib folders). No oneDNN,
# no MPI: the GPU machine has neither. PP_CARRY_MPI=1 also builds an MPI
# pprt into DIR/bin/mpi, for a GPU machine that has an MPI compatible with
# this one's (run_on_gpu.sh runs its MPI part only where it loads).
# usage: tests/cuda/build_carry.sh [DIR]   (default .gpu, which .gitignore lists)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$src/.gpu}
cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DPP_WITH_CUDA=ON -DPP_WITH_DNNL=OFF -DPP_WITH_MPI=OFF \
      -DCMAKE_BUILD_RPATH='$ORIGIN' >/dev/null
cmake --build "$dir/build" -j2 --target ppcc pprt test_kmath >/dev/null
mkdir -p "$dir/bin"
cp "$dir/build/ppcc" "$dir/build/pprt" "$dir/bin/"
for lib in $(ldd "$dir/build/pprt" "$dir/build/ppcc" | awk '/protobuf-c|xxhash/ {print $3}' | sort -u); do cp -L "$lib" "$dir/bin/"; done
rm -rf "$dir/build"
if [ "${PP_CARRY_MPI:-0}" = 1 ]; then
  cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DPP_WITH_CUDA=ON -DPP_WITH_DNNL=OFF -DPP_WITH_MPI=ON \
        -DCMAKE_BUILD_RPATH='$ORIGIN/..' >/dev/null
  cmake --build "$dir/build" -j2 --target pprt >/dev/null
  mkdir -p "$dir/bin/mpi"
  cp "$dir/build/pprt" "$dir/bin/mpi/"
  rm -rf "$dir/build"
fi
du -sh "$dir"
