/* module_cuda.c: the CUDA module's entry point (cuda_backend.h): the "cuda"
 * row of the registry, the CUDA libraries' versions and the NCCL transport.
 * Built into pprt_cuda.so with exec_cuda.c, dnn.c, mem_cuda.c, kernels.cu
 * and comm/p2p_nccl.c; everything else it calls (the planner, the options,
 * the fallback) is pprt's, which exports its symbols to it. Only
 * pprt_cuda_module_entry is exported (the module is built with hidden
 * visibility). */
#include <stdio.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "../backend.h"
#include "../module.h"
#include "cuda_backend.h"
#include "cuplan.h"

#ifdef PPRT_WITH_NCCL
#include "../comm/engine.h"
#endif

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

static void cuda_versions(char *buf, size_t cap) {
    int rt = 0, drv = 0, nccl = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 where no driver is installed */
    ncclGetVersion(&nccl);
    const size_t dnn = cudnnGetVersion();
    const size_t lt = cublasLtGetVersion();
    char d[64];
    if (drv) snprintf(d, sizeof d, "driver supports CUDA %d.%d", drv / 1000, drv % 1000 / 10);
    else snprintf(d, sizeof d, "no CUDA driver");
    snprintf(buf, cap, "CUDA runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLASLt %zu.%zu.%zu, NCCL %d.%d.%d; %s", rt / 1000,
             rt % 1000 / 10, dnn / 10000, dnn % 10000 / 100, dnn % 100, lt / 10000, lt % 10000 / 100, lt % 100,
             nccl / 10000, nccl % 10000 / 100, nccl % 100, d);
}

static void cuda_describe(FILE *f) {
    char v[256];
    cuda_versions(v, sizeof v);
    fprintf(f, "  cuda: %s\n", v);
}

static const pprt_backend cuda = {
    .name = "cuda",
    .what = "GPUs: cuDNN graphs, cuBLASLt matmuls, pprt's kernels, host fallback (docs/cuda.md)",
    .unavailable = cuda_unavailable,
    .route = pcu_op_route,
    .exec = &pprt_exec_cuda,
    .mem = PPRT_MEM_DEVICE,
    .space = &pprt_mem_cuda,
    .precision = cuda_precision,
    .describe = cuda_describe,
    .opts = &pprt_cuda_opts, /* pprt's: one table for cuda and cuda-emu */
};

#ifdef PPRT_WITH_NCCL
static pp_status nccl_id(unsigned char *id, pp_err *err) { return pprt_nccl_id(id, err); }

static pp_status nccl_open(struct pprt_mpi *m, int peer, bool first, const unsigned char *id, int device,
                           struct pprt_p2p **out, pp_err *err) {
    return pprt_nccl_open(m, peer, first, id, device, out, err);
}
#endif

__attribute__((visibility("default"))) const pprt_cuda_module *pprt_cuda_module_entry(void) {
    static const pprt_cuda_module m = {
        .abi = PPRT_MODULE_ABI,
        .version = PPRT_VERSION,
        .layout = PPRT_CUDA_MODULE_LAYOUT,
        .backend = &cuda,
        .versions = cuda_versions,
#ifdef PPRT_WITH_NCCL
        .nccl_id = nccl_id,
        .nccl_open = nccl_open,
#endif
    };
    return &m;
}
