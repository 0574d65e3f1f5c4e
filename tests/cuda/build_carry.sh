#!/usr/bin/env bash
# Build what tests/cuda/run_on_gpu.sh needs into one ignored folder small
# enough to carry to a GPU machine (the device tool's 64 MiB): ppcc, pprt, the
# CUDA module pprt_cuda.so beside pprt (where pprt looks for it) and the
# project's own shared libraries they need beyond glibc and CUDA's
# (protobuf-c, xxhash, cJSON, zlib), with RPATH $ORIGIN. CUDA, cuDNN, cuBLASLt and NCCL
# are the module's, linked dynamically and found there by the loader (run_on_gpu.sh points
# LD_LIBRARY_PATH at the Python packages' nvidia/*/lib folders). No oneDNN,
# no MPI: the GPU machine has neither. PP_CARRY_MPI=1 also builds an MPI
# pprt into DIR/bin/mpi and copies this machine's Open MPI into DIR/ompi
# (tests/cuda/carry_ompi.sh), which gpu_day.sh's 2c.5 runs from.
# usage: [PP_CARRY_ZOO=1] tests/cuda/build_carry.sh [DIR]   (default .gpu, which .gitignore lists)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$src/.gpu}
cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DPP_WITH_CUDA=ON -DPP_WITH_DNNL=OFF -DPP_WITH_MPI=OFF \
      -DCMAKE_BUILD_RPATH='$ORIGIN' >/dev/null
cmake --build "$dir/build" -j2 --target ppcc pprt test_kmath nccl_probe test_dnn >/dev/null
mkdir -p "$dir/bin"
cp "$dir/build/ppcc" "$dir/build/pprt" "$dir/build/pprt_cuda.so" "$dir/build/nccl_probe" "$dir/build/tests/test_dnn" "$dir/bin/"
bash "$src/tests/cuda/copy_libs.sh" "$dir/bin" "$dir/build/pprt" "$dir/build/ppcc" # beyond glibc's
rm -rf "$dir/build"
# what gpu_day.sh prints first: the commit these binaries were built from
{ echo "built from $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes') on $(date -u '+%F %T') UTC"; } > "$dir/bin/BUILD"
if [ "${PP_CARRY_MPI:-0}" = 1 ]; then
  cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DPP_WITH_CUDA=ON -DPP_WITH_DNNL=OFF -DPP_WITH_MPI=ON \
        -DCMAKE_BUILD_RPATH='$ORIGIN/..' >/dev/null
  cmake --build "$dir/build" -j2 --target pprt >/dev/null
  mkdir -p "$dir/bin/mpi"
  cp "$dir/build/pprt" "$dir/build/pprt_cuda.so" "$dir/bin/mpi/" # (this module has the NCCL transport)
  rm -rf "$dir/build"
  # and this machine's Open MPI, which the GPU machine lacks (about 18 MB; gpu_day.sh's 2c.5 uses it)
  bash "$src/tests/cuda/carry_ompi.sh" "$dir/ompi" > /dev/null
fi
# PP_CARRY_ZOO=1: what tests/cuda/gpu_quick.sh runs on, from this machine's
# CI zoo (ctest model_zoo exports it into build/tests/zoo): -pp 1 and -pp 2
# plans compiled by the carried ppcc, data and onnxruntime outputs of U-Net, GPT and
# MobileNetV3-small and Llama's model.onnx, about 48 MB: with the node tests
# below and the tracked tree, just over the device tool's 64 MiB (thin it)
if [ "${PP_CARRY_ZOO:-0}" = 1 ]; then
  zoo=${ZOO:-$src/build/tests/zoo}
  for m in unet gpt mobilenet_v3_small; do
    [ -f "$zoo/$m/model.onnx" ] || { echo "build_carry: no $zoo/$m/model.onnx (run ctest -R model_zoo first)" >&2; exit 2; }
    mkdir -p "$dir/zoo/$m"
    for pp in 1 2; do "$dir/bin/ppcc" "$zoo/$m/model.onnx" -pp $pp -o "$dir/zoo/$m/auto_$pp.plan" -q; done
    cp -r "$zoo/$m/data" "$zoo/$m/expected" "$dir/zoo/$m/"
  done
  if [ -f "$zoo/llama/model.onnx" ]; then
    mkdir -p "$dir/zoo/llama"
    cp -r "$zoo/llama/model.onnx" "$zoo/llama/data" "$zoo/llama/expected" "$zoo/llama/meta.json" "$dir/zoo/llama/"
  fi
fi
# the ONNX node tests (7 MB), which gpu_day.sh and gpu_quick.sh run; PP_CARRY_NODE=0 leaves them out. gpu_day.sh
# needs no zoo: with the zoo the folder (62 MB) and the tracked tree (6 MB) passed the device tool's 64 MiB
# (2026-12-04, the first call of that day's lease refused)
if [ "${PP_CARRY_NODE:-1}" = 1 ]; then
  node=$("${PY:-$src/.venv/bin/python}" -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
  tar czf "$dir/node.tgz" -C "$node" node
fi
du -sh "$dir"
