/* kernels.cu: the __global__ wrappers of the own kernels and their launcher,
 * both expanded from kernels.def: thread i of a launch runs its row's call,
 * the expression the emulator runs for its thread i (ktable.h,
 * pcu_kernel_call), over the same operands, with the step's parameter block
 * in device memory (uploaded once at create). One launcher for the C engine
 * (exec_cuda.c). Built by nvcc with warnings as errors and ptxas refusing
 * spills and local memory (CMakeLists.txt). */
#include <cuda_runtime.h>

#include "ktable.h"

#define PCU_TID (blockIdx.x * (int64_t)blockDim.x + threadIdx.x)

/* An operand pointer that becomes whatever pointer type the kmath function's
 * parameter wants (C converts void * by itself; C++ does not). */
struct pcu_kptr {
    void *p;
    __device__ pcu_kptr(void *q) : p(q) {}
    template <class T> __device__ operator T *() const { return (T *)p; }
};

/* The rows' expressions see operand j as OP(j), NONE as a null pointer. */
#define OP(j) pcu_kptr(op.p[j])
#define NONE pcu_kptr(nullptr)

#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)                                        \
    __global__ void pcu_k_##stem(const pcu_##stem *__restrict__ k, pcu_kops op, int *err, int64_t n, int ptype) { \
        const int64_t i = PCU_TID;                                                                                 \
        (void)err;                                                                                                 \
        (void)ptype;                                                                                               \
        if (i < n) call;                                                                                           \
    }
/* a block per row: the row and the partials in shared memory, a barrier after each phase */
#define PCU_ROWS(NAME, stem, u, desc, writes, esize, extent, phases, call)                                           \
    __global__ void pcu_k_##stem(const pcu_##stem *__restrict__ k, pcu_kops op, int *err, int64_t n, int ptype) { \
        __shared__ float row[PCU_ROW_MAX];                                                                         \
        __shared__ double part[2 * PCU_ROW_LANES];                                                                 \
        const int64_t r = blockIdx.x;                                                                              \
        const int l = (int)threadIdx.x;                                                                            \
        (void)err, (void)ptype, (void)n;                                                                           \
        for (int ph = 0; ph < (phases); ph++) {                                                                    \
            call;                                                                                                  \
            __syncthreads();                                                                                       \
        }                                                                                                          \
    }
/* a cooperative kernel: its shared memory, the lane's state in registers, a barrier after each phase */
#define PCU_COOP(NAME, stem, u, desc, writes, esize, extent, phases, call)                                           \
    __global__ void pcu_k_##stem(const pcu_##stem *__restrict__ k, pcu_kops op, int *err, int64_t n, int ptype) { \
        __shared__ pcu_##stem##_sh shm;                                                                            \
        pcu_##stem##_sh *sh = &shm;                                                                                \
        pcu_##stem##_lane lane;                                                                                    \
        pcu_##stem##_lane *st = &lane;                                                                             \
        const int64_t r = blockIdx.x;                                                                              \
        const int l = (int)threadIdx.x;                                                                            \
        const int nph = (phases);                                                                                  \
        (void)err, (void)ptype, (void)n;                                                                           \
        for (int ph = 0; ph < nph; ph++) {                                                                         \
            call;                                                                                                  \
            __syncthreads();                                                                                       \
        }                                                                                                          \
    }
#include "kernels.def"
#undef PCU_COOP
#undef PCU_ROWS
#undef PCU_KERNEL

#undef OP
#undef NONE

/* Launch own kernel `kind` (pcu_kernel_kind) over n threads, PCU_BLOCK per
 * block, on stream; param: its parameter block in device memory; op: its
 * operands (cuplan.h's order, NULL where absent; PCU_KERNEL_OPS of them).
 * Returns the cudaError_t of the launch. */
extern "C" int pcu_launch(int kind, const void *param, void *const *op, int *err, long long n, int ptype,
                          void *stream) {
    const unsigned blocks = (unsigned)((n + PCU_BLOCK - 1) / PCU_BLOCK);
    cudaStream_t s = (cudaStream_t)stream;
    pcu_kops o;
    for (int j = 0; j < PCU_KERNEL_OPS; j++) o.p[j] = op[j];
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)                  \
    case PCU_K_##NAME:                                                                      \
        pcu_k_##stem<<<blocks, PCU_BLOCK, 0, s>>>((const pcu_##stem *)param, o, err, n, ptype); \
        break;
#include "kernels.def"
#undef PCU_KERNEL
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
