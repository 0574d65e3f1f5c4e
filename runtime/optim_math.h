/* optim_math.h: the optimizers' arithmetic for one element (issue 56),
 * shared by the host trainer (train.c) and the CUDA backend's optimizer
 * kernel (kmath.h's pcu_opt, kernels.def's OPT row, which the device
 * optimizer runs: dopt.h): one float arithmetic, PyTorch's, so a weight
 * stepped on the host and on a device is the same bits.
 *
 *   SGD:   d = g (+ wd w); with momentum m = mu m + d (the first step: m =
 *          d), d = d + mu m (Nesterov) or m; w = w - lr d.
 *   AdamW: w = w (1 - lr wd); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
 *          w = w + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
 * The coefficients (pp_optstep) are formed once a step on the host, in
 * double and rounded to float once, as PyTorch forms them (train.c).
 *
 * Products go through PP_OPT_MUL: under nvcc __fmul_rn, which nvcc never
 * contracts with the following addition into an FMA (its default for a * b
 * + c); in C the plain product, as train.c wrote it before. Plain C11, no
 * arrays, no libc beyond <math.h>, so kmath.h may include it. */
#ifndef PPRT_OPTIM_MATH_H
#define PPRT_OPTIM_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PP_OPT_HD static __host__ __device__ __forceinline__
#else
#define PP_OPT_HD static inline
#endif
#ifdef __CUDA_ARCH__ /* nvcc's device pass */
#define PP_OPT_MUL(a, b) __fmul_rn((a), (b))
#else
#define PP_OPT_MUL(a, b) ((a) * (b))
#endif

/* The global norm's sum of squares: each weight's in double over chunks of
 * PP_OPT_CHUNK elements in order, then the chunks' sums in order (train.c
 * on the host, kmath.h's OPTG on a device: the same double). */
#define PP_OPT_CHUNK 4096

/* One step's coefficients over n elements. */
typedef struct pp_optstep {
    int32_t adamw;    /* 0: SGD */
    int32_t nesterov; /* SGD with momentum */
    int32_t has_m;    /* SGD: the momentum buffer holds an earlier step's (else it is set to d) */
    int32_t pad_;
    int64_t n;
    float lr, wd, mu;                                      /* SGD */
    float decay, b1, c1, b2, c2, neg_step, bc2s, eps, pad2_; /* AdamW */
} pp_optstep;

/* Element i: w stepped with its gradient g, m (SGD's momentum or AdamW's
 * first moment; NULL for plain SGD) and v (AdamW's second moment) updated. */
PP_OPT_HD void pp_optstep_at(const pp_optstep *k, float *w, const float *g, float *m, float *v, int64_t i) {
    if (!k->adamw) {
        float d = g[i];
        if (k->wd != 0) d = d + PP_OPT_MUL(k->wd, w[i]);
        if (k->mu != 0) {
            m[i] = k->has_m ? PP_OPT_MUL(k->mu, m[i]) + d : d;
            d = k->nesterov ? d + PP_OPT_MUL(k->mu, m[i]) : m[i];
        }
        w[i] = w[i] - PP_OPT_MUL(k->lr, d);
        return;
    }
    w[i] = PP_OPT_MUL(w[i], k->decay);
    m[i] = PP_OPT_MUL(m[i], k->b1) + PP_OPT_MUL(k->c1, g[i]);
    v[i] = PP_OPT_MUL(v[i], k->b2) + PP_OPT_MUL(PP_OPT_MUL(k->c2, g[i]), g[i]);
    const float denom = sqrtf(v[i]) / k->bc2s + k->eps;
    w[i] = w[i] + PP_OPT_MUL(k->neg_step, m[i]) / denom;
}

#endif
