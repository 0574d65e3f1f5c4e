/* ktable.h: the own kernels' tables, generated from kernels.def (one row a
 * kernel) with kmath.h's functions: the kind enum, the operands a launch
 * carries and, in C, what the emulator and the lint ask of a kernel (its
 * thread's call, the operands it writes, element sizes and extents, its
 * parameter block's size and its name). kernels.cu expands the same rows
 * into the __global__ wrappers and the launcher's cases, so a kind, its
 * parameter block and its operands cannot disagree between the GPU and the
 * emulator. Valid C11 and CUDA C++; the functions are C only (the emulator's
 * and the lint's). */
#ifndef PPRT_CUDA_KTABLE_H
#define PPRT_CUDA_KTABLE_H

#include <stddef.h>

#include "kmath.h"

#define PCU_BLOCK 256      /* threads per block of every own kernel */
#if PCU_BLOCK != PCU_ROW_LANES
#error "a block-per-row kernel (kernels.def PCU_ROWS) is launched in blocks of PCU_BLOCK threads"
#endif
#if PCU_FA_LANES != PCU_BLOCK || PCU_FA_BK % (2 * PCU_FA_TPR) || PCU_FA_DL * PCU_FA_TPR != PCU_FA_DNARROW || \
    PCU_FA_DL * 2 * PCU_FA_TPR != PCU_FA_DMAX || PCU_FA_BK / PCU_FA_TPR != PCU_FA_KLMAX
#error "the fused attention kernel (kmath.h): a block's lanes cover its query rows, a lane's columns its heads"
#endif
#define PCU_KERNEL_OPS 16  /* operands of an own kernel at most (the recurrence's 16) */

typedef enum pcu_kernel_kind {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) PCU_K_##NAME,
#include "kernels.def"
#undef PCU_KERNEL
    PCU_K_COUNT
} pcu_kernel_kind;

/* A launch's operands, by value (cuplan.h's order; NULL where absent). */
typedef struct pcu_kops {
    void *p[PCU_KERNEL_OPS];
} pcu_kops;

#ifndef __CUDACC__

#include <stdbool.h>

/* ---- Extents too long for a row ---------------------------------------------------------- */

/* The largest and the lowest offset an odometer of rank dims reaches. */
static inline int64_t pcu_span(int rank, const int64_t *dim, const int64_t *st) {
    int64_t hi = 0;
    for (int d = 0; d < rank; d++)
        if (dim[d] > 0 && st[d] > 0) hi += (dim[d] - 1) * st[d];
    return hi;
}

static inline int64_t pcu_span_low(int rank, const int64_t *dim, const int64_t *st) {
    int64_t lo = 0;
    for (int d = 0; d < rank; d++)
        if (dim[d] > 0 && st[d] < 0) lo += (dim[d] - 1) * st[d];
    return lo;
}

static inline int64_t pcu_perm_extent(const pcu_perm *p, int j) {
    const int out = p->gdim >= 0 ? 2 : 1;
    if (j == out) return p->dst_off + pcu_span(p->rank, p->dim, p->dst_st) + 1;
    if (p->gdim >= 0 && j == 1) return p->dim[p->gdim]; /* indices 0 .. G-1, stride 1 */
    /* source: lowest and highest element reachable */
    int64_t dim[PCU_MAXD], st[PCU_MAXD];
    for (int d = 0; d < p->rank; d++) {
        dim[d] = d == p->gdim ? p->glen : p->mod[d] > 0 ? p->mod[d] : p->pad ? p->sdim[d] : p->dim[d];
        st[d] = d == p->gdim ? p->gsrc_st : p->sst[d];
    }
    if (p->src_off + pcu_span_low(p->rank, dim, st) < 0) return -1;
    return p->src_off + pcu_span(p->rank, dim, st) + 1;
}

static inline int64_t pcu_resize_extent(const pcu_resize *r, int j) {
    int64_t n = 1;
    for (int d = 0; d < r->rank; d++) n *= r->in[d];
    return j == 0 ? n : r->n;
}

static inline int64_t pcu_gather_el_extent(const pcu_gather_el *g, int j) {
    if (j == 1 || j == 2) return g->n;
    int64_t hi = 0; /* x: the largest offset any index may reach */
    for (int d = 0; d < g->rank; d++) hi += ((d == g->axis ? g->len : g->dim[d]) - 1) * g->xst[d];
    return hi + 1;
}

/* indices, updates: every one read; y: its elements */
static inline int64_t pcu_scatter_extent(const pcu_scatter *c, int j) {
    const int64_t n_upd = c->nd ? c->run * c->slice : c->threads * c->run;
    return j == 0 ? (c->nd ? c->run * c->q : n_upd) : j == 1 ? n_upd : c->yn;
}

static inline int64_t pcu_attn_extent(const pcu_attn *t, int j) {
    const int64_t e[10] = {t->B * t->Hq * t->Sq * t->D, t->B * t->Hkv * t->Skv * t->D, t->B * t->Hkv * t->Skv * t->Dv,
                           t->mdim[0] * t->mdim[1] * t->mdim[2] * t->mdim[3], t->B * t->Hkv * t->P * t->D,
                           t->B * t->Hkv * t->P * t->Dv, t->B, t->B * t->Hq * t->Sq * t->Dv, t->rows * t->T,
                           t->rows * t->T};
    return j >= 0 && j < 10 ? e[j] : -1;
}

/* Q, K, V, Y: the last batch's (every stride >= 0) last element + 1 */
static inline int64_t pcu_fattn_extent(const pcu_fattn *k, int j) {
    if (k->nb < 1 || k->nh < 1 || k->grp < 1 || k->nb % k->nh || k->nh % k->grp || j < 0 || j > 7 ||
        (j == 4 && !k->mask) || (j == 5 && !k->where) || (j == 6 && (!k->fmask || k->fwn < 1 || (k->nb / k->nh) % k->fwn)))
        return -1;
    if (j == 7) return k->scale_op == 3 ? k->nh : -1;
    const int64_t B = k->nb / k->nh, H = k->nh - 1, G = (k->nh - 1) / k->grp, W = k->fmask ? k->fwn : 1;
    const int64_t e[7] = {(B - 1) * k->qb + H * k->qh + (k->Sq - 1) * k->qi + (k->D - 1) * k->qe,
                          (B - 1) * k->kb + G * k->kh + (k->T - 1) * k->kj + (k->D - 1) * k->ke,
                          (B - 1) * k->vb + G * k->vh + (k->T - 1) * k->vj + (k->Dv - 1) * k->ve,
                          (B - 1) * k->yb + H * k->yh + (k->Sq - 1) * k->yi + k->Dv - 1,
                          (B - 1) * k->mb + H * k->mh + (k->Sq - 1) * k->mi + (k->T - 1) * k->mj,
                          (B - 1) * k->cb + H * k->ch + (k->Sq - 1) * k->ci + (k->T - 1) * k->cj,
                          (B / W - 1) * k->fb + (W - 1) * k->fw + H * k->fh + (k->Sq - 1) * k->fi + (k->T - 1) * k->fj};
    return e[j] + 1;
}

static inline int64_t pcu_rnn_extent(const pcu_rnn *r, int j) {
    const int64_t GH = r->G * r->H, dnh = r->D * r->N * r->H;
    const int64_t e[16] = {r->S * r->N * r->I, r->D * GH * r->I, r->D * GH * r->H, r->D * 2 * GH, r->N, dnh, dnh,
                           r->D * 3 * r->H, r->S * dnh, dnh, dnh, dnh, dnh, dnh, 2 * dnh, dnh};
    return j >= 0 && j < 16 ? e[j] : -1;
}

/* ---- The rows' tables ----------------------------------------------------------------------- */

/* The rows' expressions see the operands as OP(j) over op[], NONE as NULL. */
#define OP(j) (op[j])
#define NONE NULL

/* Thread i of own kernel `kind` with parameter block param over operands
 * op[] (PCU_KERNEL_OPS of them, NULL where absent): what the GPU's thread i
 * runs (the emulator's loop calls this). */
static inline void pcu_kernel_call(int kind, const void *param, void *const *op, int *err, int64_t i, int ptype) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: {                                                     \
        const pcu_##stem *k = (const pcu_##stem *)param;                     \
        call;                                                                \
        break;                                                               \
    }
#include "kernels.def"
#undef PCU_KERNEL
    default: break;
    }
    (void)ptype;
    (void)err;
}

/* Phases of a block-per-row kernel (kernels.def PCU_ROWS), 0 for the others. */
static inline int pcu_kernel_phases(int kind) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)
#define PCU_ROWS(NAME, stem, u, desc, writes, esize, extent, phases, call) \
    case PCU_K_##NAME: return (phases);
#include "kernels.def"
#undef PCU_ROWS
#undef PCU_KERNEL
    default: return 0;
    }
}

/* Lane l of row r of block-per-row kernel `kind` in phase ph, with the
 * block's shared row (PCU_ROW_MAX floats) and partials (2 * PCU_ROW_LANES
 * doubles): what the GPU's thread l of block r runs between barriers. */
static inline void pcu_kernel_phase_call(int kind, const void *param, void *const *op, int ph, int64_t r, int l,
                                         float *row, double *part) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)
#define PCU_ROWS(NAME, stem, u, desc, writes, esize, extent, phases, call) \
    case PCU_K_##NAME: {                                                 \
        const pcu_##stem *k = (const pcu_##stem *)param;                 \
        call;                                                            \
        break;                                                           \
    }
#include "kernels.def"
#undef PCU_ROWS
#undef PCU_KERNEL
    default: break;
    }
}

/* Phases of cooperative kernel `kind` (kernels.def PCU_COOP) with parameter
 * block param, 0 for the others; *sh_bytes and *lane_bytes: the sizes of its
 * block's shared memory and of a lane's state. */
static inline int pcu_kernel_coop(int kind, const void *param, size_t *sh_bytes, size_t *lane_bytes) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)
#define PCU_ROWS(NAME, stem, u, desc, writes, esize, extent, phases, call)
#define PCU_COOP(NAME, stem, u, desc, writes, esize, extent, phases, call) \
    case PCU_K_##NAME: {                                                 \
        const pcu_##stem *k = (const pcu_##stem *)param;                 \
        *sh_bytes = sizeof(pcu_##stem##_sh);                             \
        *lane_bytes = sizeof(pcu_##stem##_lane);                         \
        return (phases);                                                 \
    }
#include "kernels.def"
#undef PCU_COOP
#undef PCU_ROWS
#undef PCU_KERNEL
    default: *sh_bytes = *lane_bytes = 0; return 0;
    }
}

/* Lane l of block r of cooperative kernel `kind` in phase ph, with the
 * block's shared memory sh and the state of the block's lanes (lane l's at
 * lanes + l * lane_bytes): what the GPU's thread l of block r runs between
 * barriers. */
static inline void pcu_kernel_coop_call(int kind, const void *param, void *const *op, int ph, int64_t r, int l,
                                        void *shm, void *lanes) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call)
#define PCU_ROWS(NAME, stem, u, desc, writes, esize, extent, phases, call)
#define PCU_COOP(NAME, stem, u, desc, writes, esize, extent, phases, call) \
    case PCU_K_##NAME: {                                                 \
        const pcu_##stem *k = (const pcu_##stem *)param;                 \
        pcu_##stem##_sh *sh = (pcu_##stem##_sh *)shm;                    \
        pcu_##stem##_lane *st = (pcu_##stem##_lane *)lanes + l;          \
        call;                                                            \
        break;                                                           \
    }
#include "kernels.def"
#undef PCU_COOP
#undef PCU_ROWS
#undef PCU_KERNEL
    default: break;
    }
}

#undef OP
#undef NONE

/* The operands the kernel writes, a bit each (0 for an unknown kind). */
static inline unsigned pcu_kernel_writes(int kind, const void *param) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: {                                                     \
        const pcu_##stem *k = (const pcu_##stem *)param;                     \
        (void)k;                                                             \
        return (writes);                                                     \
    }
#include "kernels.def"
#undef PCU_KERNEL
    default: return 0;
    }
}

/* Whether an output may be an input's very bytes. */
static inline bool pcu_kernel_inplace(int kind) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: return (inplace) != 0;
#include "kernels.def"
#undef PCU_KERNEL
    default: return false;
    }
}

/* Bytes per element of operand j (0 for an unknown kind). */
static inline int pcu_kernel_esize_of(int kind, const void *param, int j) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: {                                                     \
        const pcu_##stem *k = (const pcu_##stem *)param;                     \
        (void)k, (void)j;                                                    \
        return (esize);                                                      \
    }
#include "kernels.def"
#undef PCU_KERNEL
    default: return 0;
    }
}

/* Elements of operand j the kernel reaches (-1: not known). */
static inline int64_t pcu_kernel_extent_of(int kind, const void *param, int j) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: {                                                     \
        const pcu_##stem *k = (const pcu_##stem *)param;                     \
        (void)k, (void)j;                                                    \
        return (extent);                                                     \
    }
#include "kernels.def"
#undef PCU_KERNEL
    default: return -1;
    }
}

/* Bytes of the parameter block (0 for an unknown kind). */
static inline size_t pcu_kernel_param_bytes(int kind) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: return sizeof(pcu_##stem);
#include "kernels.def"
#undef PCU_KERNEL
    default: return 0;
    }
}

/* "elementwise", "strided copy", ... ("kernel" for an unknown kind). */
static inline const char *pcu_kernel_name(int kind) {
    switch (kind) {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) \
    case PCU_K_##NAME: return desc;
#include "kernels.def"
#undef PCU_KERNEL
    default: return "kernel";
    }
}

#endif /* !__CUDACC__ */

#endif
