/* kernels.cu: the __global__ wrappers of the own kernels: thread i of a
 * launch calls the per-thread function of kmath.h that the emulator calls in
 * its loop, with the step's parameter block in device memory (uploaded once
 * at create) and its operands as pointers. One launcher for the C engine
 * (exec_cuda.c). Built by nvcc with warnings as errors and ptxas refusing
 * spills and local memory (CMakeLists.txt). */
#include <cuda_runtime.h>

#include "kmath.h"

#define PCU_TID (blockIdx.x * (int64_t)blockDim.x + threadIdx.x)

__global__ void pcu_k_ew(const pcu_ew *__restrict__ k, void *y, const void *x0, const void *x1, const void *x2,
                         int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_ew_at(k, y, x0, x1, x2, i);
}

__global__ void pcu_k_perm(const pcu_perm *__restrict__ k, void *y, const void *x, const void *g, int *err, int64_t n,
                           int ptype) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_perm_at(k, y, x, g, err, i, ptype);
}

__global__ void pcu_k_red(const pcu_red *__restrict__ k, void *y, const float *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_red_at(k, y, x, i);
}

__global__ void pcu_k_softmax(const pcu_softmax *__restrict__ k, float *y, const float *x, double *part, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_softmax_at(k, y, x, part, i);
}

__global__ void pcu_k_norm(const pcu_norm *__restrict__ k, float *y, const float *x, const float *s, const float *b,
                           float *m, float *v, double *part, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_norm_at(k, y, x, s, b, m, v, part, i);
}

__global__ void pcu_k_bn(const pcu_bn *__restrict__ k, float *y, const float *x, const float *s, const float *b,
                         const float *m, const float *v, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_bn_at(k, y, x, s, b, m, v, i);
}

__global__ void pcu_k_pool(const pcu_pool *__restrict__ k, float *y, const float *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_pool_at(k, y, x, i);
}

__global__ void pcu_k_resize(const pcu_resize *__restrict__ k, float *y, const float *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_resize_at(k, y, x, i);
}

__global__ void pcu_k_quant(const pcu_quant *__restrict__ k, void *y, const void *x, const float *scale, const void *zp,
                            int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_quant_at(k, y, x, scale, zp, i);
}

__global__ void pcu_k_gridsample(const pcu_gridsample *__restrict__ k, float *y, const float *x, const float *grid,
                                 int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_gridsample_at(k, y, x, grid, i);
}

__global__ void pcu_k_line(const pcu_line *__restrict__ k, void *y, const void *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_line_at(k, y, x, i);
}

__global__ void pcu_k_onehot(const pcu_onehot *__restrict__ k, void *y, const void *idx, const void *values, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_onehot_at(k, y, idx, values, i);
}

__global__ void pcu_k_affgrid(const pcu_affgrid *__restrict__ k, void *y, const void *theta, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_affgrid_at(k, y, theta, i);
}

__global__ void pcu_k_col2im(const pcu_col2im *__restrict__ k, void *y, const void *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_col2im_at(k, y, x, i);
}

__global__ void pcu_k_rnn(const pcu_rnn *__restrict__ k, const float *X, const float *W, const float *R, const float *B,
                          const int32_t *lens, const float *h0, const float *c0, const float *P, float *Y, float *Yh,
                          float *Yc, const float *hin, float *hout, float *c, float *zr, float *t, int *err, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_rnn_at(k, X, W, R, B, lens, h0, c0, P, Y, Yh, Yc, hin, hout, c, zr, t, err, i);
}

__global__ void pcu_k_cumsum(const pcu_cumsum *__restrict__ k, void *y, const void *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_cumsum_at(k, y, x, i);
}

__global__ void pcu_k_gather_el(const pcu_gather_el *__restrict__ k, void *y, const void *x, const void *idx, int *err,
                                int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_gather_el_at(k, y, x, idx, err, i);
}

__global__ void pcu_k_topk(const pcu_topk *__restrict__ k, void *yv, int64_t *yi, const void *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_topk_at(k, yv, yi, x, i);
}

__global__ void pcu_k_scatter(const pcu_scatter *__restrict__ k, void *y, const void *idx, const void *upd, int *err,
                              int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_scatter_at(k, y, idx, upd, err, i);
}

__global__ void pcu_k_trilu(const pcu_trilu *__restrict__ k, void *y, const void *x, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_trilu_at(k, y, x, i);
}

__global__ void pcu_k_rope(const pcu_rope *__restrict__ k, float *y, const float *x, const float *c, const float *s,
                           const int64_t *pos, int *err, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_rope_at(k, y, x, c, s, pos, err, i);
}

__global__ void pcu_k_attn(const pcu_attn *__restrict__ k, float *y, float *qk, double *sc, const float *q,
                           const float *kk, const float *v, const void *m, const float *pk, const float *pv,
                           const int64_t *nonpad, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_attn_at(k, y, qk, sc, q, kk, v, m, pk, pv, nonpad, i);
}

__global__ void pcu_k_epi(const pcu_epi *__restrict__ k, float *y, const float *b, const float *r, int64_t n) {
    const int64_t i = PCU_TID;
    if (i < n) pcu_epi_at(k, y, b, r, i);
}

/* Launch own kernel `kind` (pcu_kernel_kind, in the order of cuplan.h) over
 * n threads, PCU_BLOCK = 256 per block, on stream; param: its parameter block
 * in device memory; op: its operands (cuplan.h's order, NULL where absent;
 * PCU_KERNEL_OPS at most).
 * Returns the cudaError_t of the launch. */
extern "C" int pcu_launch(int kind, const void *param, void *const *op, int *err, long long n, int ptype,
                          void *stream) {
    const unsigned blocks = (unsigned)((n + 255) / 256);
    cudaStream_t s = (cudaStream_t)stream;
    float *const *f = (float *const *)op;
    switch (kind) {
    case 0: {
        const pcu_ew *k = (const pcu_ew *)param; /* nin is in device memory: the engine passes all three */
        pcu_k_ew<<<blocks, 256, 0, s>>>(k, op[3], op[0], op[1], op[2], n);
        break;
    }
    case 1: pcu_k_perm<<<blocks, 256, 0, s>>>((const pcu_perm *)param, op[2], op[0], op[1], err, n, ptype); break;
    case 2: pcu_k_red<<<blocks, 256, 0, s>>>((const pcu_red *)param, op[1], f[0], n); break;
    case 3: pcu_k_softmax<<<blocks, 256, 0, s>>>((const pcu_softmax *)param, f[1], f[0], (double *)op[2], n); break;
    case 4:
        pcu_k_norm<<<blocks, 256, 0, s>>>((const pcu_norm *)param, f[3], f[0], f[1], f[2], f[4], f[5], (double *)op[6], n);
        break;
    case 5: pcu_k_bn<<<blocks, 256, 0, s>>>((const pcu_bn *)param, f[5], f[0], f[1], f[2], f[3], f[4], n); break;
    case 6: pcu_k_pool<<<blocks, 256, 0, s>>>((const pcu_pool *)param, f[1], f[0], n); break;
    case 7: pcu_k_epi<<<blocks, 256, 0, s>>>((const pcu_epi *)param, f[0], f[1], f[2], n); break;
    case 8: pcu_k_resize<<<blocks, 256, 0, s>>>((const pcu_resize *)param, f[1], f[0], n); break;
    case 9: pcu_k_cumsum<<<blocks, 256, 0, s>>>((const pcu_cumsum *)param, op[1], op[0], n); break;
    case 11: pcu_k_topk<<<blocks, 256, 0, s>>>((const pcu_topk *)param, op[1], (int64_t *)op[2], op[0], n); break;
    case 12: pcu_k_scatter<<<blocks, 256, 0, s>>>((const pcu_scatter *)param, op[2], op[0], op[1], err, n); break;
    case 13: pcu_k_trilu<<<blocks, 256, 0, s>>>((const pcu_trilu *)param, op[1], op[0], n); break;
    case 14:
        pcu_k_rope<<<blocks, 256, 0, s>>>((const pcu_rope *)param, f[4], f[0], f[1], f[2], (const int64_t *)op[3], err, n);
        break;
    case 15:
        pcu_k_attn<<<blocks, 256, 0, s>>>((const pcu_attn *)param, f[7], f[8], (double *)op[9], f[0], f[1], f[2], op[3],
                                          f[4], f[5], (const int64_t *)op[6], n);
        break;
    case 16: pcu_k_quant<<<blocks, 256, 0, s>>>((const pcu_quant *)param, op[3], op[0], f[1], op[2], n); break;
    case 17: pcu_k_gridsample<<<blocks, 256, 0, s>>>((const pcu_gridsample *)param, f[2], f[0], f[1], n); break;
    case 18: pcu_k_line<<<blocks, 256, 0, s>>>((const pcu_line *)param, op[1], op[0], n); break;
    case 19: pcu_k_onehot<<<blocks, 256, 0, s>>>((const pcu_onehot *)param, op[2], op[0], op[1], n); break;
    case 20: pcu_k_affgrid<<<blocks, 256, 0, s>>>((const pcu_affgrid *)param, op[1], op[0], n); break;
    case 21:
        pcu_k_rnn<<<blocks, 256, 0, s>>>((const pcu_rnn *)param, f[0], f[1], f[2], f[3], (const int32_t *)op[4], f[5],
                                         f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13], f[14], f[15], err, n);
        break;
    case 22: pcu_k_col2im<<<blocks, 256, 0, s>>>((const pcu_col2im *)param, op[1], op[0], n); break;
    case 10: pcu_k_gather_el<<<blocks, 256, 0, s>>>((const pcu_gather_el *)param, op[2], op[0], op[1], err, n); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
