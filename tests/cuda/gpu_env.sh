# Sourced by the GPU scripts (run_on_gpu.sh, gpu_quick.sh, gpu_mini.sh) with
# src set: the carried binaries in .gpu/bin, the CUDA libraries of the GPU
# machine's Python packages (nvidia-*-cu13) on the loader's path.
bin=${PP_GPU_BIN:-$src/.gpu/bin}; Z=$src/.gpu/zoo   # PP_GPU_BIN: gpu_day.sh's dry run here
libs=$(python3 -c "
import glob, os, site
d = [p for s in site.getsitepackages() for p in glob.glob(os.path.join(s, 'nvidia', '**', 'lib'), recursive=True)]
print(':'.join(sorted(set(d))))")
export LD_LIBRARY_PATH=$bin:$libs:${LD_LIBRARY_PATH:-}
export PPCC=$bin/ppcc PPRT=$bin/pprt
