/* backend_cuda.c: the CUDA backends in the registry (backend.h):
 *   cuda-emu  the step list of plan_cuda.c run on the host by emu.c; built
 *             always (it needs no CUDA), the oracle of the GPU engine;
 *   cuda      the step list on GPUs (exec_cuda.c), in builds with CUDA;
 *             unavailable where no device answers, with the driver's words.
 * Their command-line options and versions come from options.c. Both keep
 * their messages on a device: the links (link/link.h) put them in the
 * memory spaces of mem_cuda.c (GPUs) and mem_emu.c (the emulated devices,
 * host memory registered as theirs) and copy them between spaces. */
#include <stdio.h>

#include "../backend.h"
#include "cuda_backend.h"
#include "cuplan.h"
#include "mem_emu.h"

#ifdef PPRT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static void cuda_describe(FILE *f) {
    char v[256];
    pprt_cuda_versions(v, sizeof v);
    fprintf(f, "  cuda: %s\n", v);
}

static int cuda_option(int argc, char **argv, int *i, char *msg, size_t cap) {
    return pprt_cuda_option(argc, argv, i, msg, cap);
}

/* The emulator takes every precision and computes f32. */
static bool emu_precision(pprt_precision pr, bool *here) {
    *here = pr == PPRT_F32;
    return true;
}

const pprt_backend pprt_backend_cuda_emu = {
    .name = "cuda-emu",
    .what = "the cuda backend's step list run on the host (docs/cuda.md): how CI checks it without a GPU",
    .route = pcu_op_route,
    .exec = &pprt_exec_cuda_emu,
    .mem = PPRT_MEM_DEVICE,
    .space = &pprt_mem_cuda_emu,
    .precision = emu_precision,
    .describe = cuda_describe,
    .option = cuda_option,
    .usage = pprt_cuda_usage,
};

#ifdef PPRT_WITH_CUDA

static const char *cuda_unavailable(void) {
    static char why[160];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, sizeof why, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return why;
    }
    return n > 0 ? NULL : "no CUDA device";
}

static bool cuda_precision(pprt_precision pr, bool *here) {
    *here = true;
    return pr == PPRT_F32 || pr == PPRT_BF16 || pr == PPRT_TF32 || pr == PPRT_FP16;
}

const pprt_backend pprt_backend_cuda = {
    .name = "cuda",
    .what = "GPUs: cuDNN graphs, cuBLASLt matmuls, pprt's kernels, host fallback (docs/cuda.md)",
    .unavailable = cuda_unavailable,
    .route = pcu_op_route,
    .exec = &pprt_exec_cuda,
    .mem = PPRT_MEM_DEVICE,
    .space = &pprt_mem_cuda,
    .precision = cuda_precision,
    .describe = cuda_describe,
    .option = cuda_option,
    .usage = pprt_cuda_usage,
};

#endif
