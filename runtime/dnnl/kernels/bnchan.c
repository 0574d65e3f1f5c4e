/* bnchan.c: see bnchan.h. The bodies are chan_sums.h's always-inline
 * functions, compiled by each wrapper below for its target (the float
 * loops that write Y and dX 16 or 8 lanes wide), with the channel's sums
 * written here in intrinsics: GCC 12 vectorizes chan_sums.h's eight partial
 * sums only in part (scalar conversions, lanes shuffled into vectors). The
 * eight partials are one vector of 8 doubles (AVX-512) or two of 4 (AVX2):
 * lane k takes element i of each row with i mod 8 = k, rows in image order,
 * by the same double operations as the plain loop (C11 contracts no
 * multiply-add into an FMA), so the same bits; a row's last S mod 8
 * elements masked (AVX-512), or added one by one into the partials stored
 * to memory (AVX2), as chan_sums.h adds them. */
#include "bnchan.h"

#include "../../cpu/chan_sums.h"
#include "../../isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX2 __attribute__((target("avx2")))

static void fold4(const double *a, const double *q, const double *g, const double *h, double out[4]) {
    out[0] = pprt_lanes_fold(a), out[1] = pprt_lanes_fold(q), out[2] = pprt_lanes_fold(g), out[3] = pprt_lanes_fold(h);
}

AVX512 static void sums_avx512(const float *x, const float *dy, int64_t N, int64_t C, int64_t S, int64_t c,
                               double shift, double out[4]) {
    const __m512d sh = _mm512_set1_pd(shift);
    __m512d a = _mm512_setzero_pd(), q = a, g = a, h = a;
    const __mmask8 tail = (__mmask8)((1u << (S % 8)) - 1);
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = (n * C + c) * S;
        const float *p = x + o, *e = dy ? dy + o : NULL;
        int64_t i = 0;
        if (e) {
            for (; i + 8 <= S; i += 8) {
                const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + i)), sh);
                const __m512d y = _mm512_cvtps_pd(_mm256_loadu_ps(e + i));
                a = _mm512_add_pd(a, d), q = _mm512_add_pd(q, _mm512_mul_pd(d, d));
                g = _mm512_add_pd(g, y), h = _mm512_add_pd(h, _mm512_mul_pd(y, d));
            }
            if (i < S) {
                const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(tail, p + i)), sh);
                const __m512d y = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(tail, e + i));
                a = _mm512_mask_add_pd(a, tail, a, d), q = _mm512_mask_add_pd(q, tail, q, _mm512_mul_pd(d, d));
                g = _mm512_mask_add_pd(g, tail, g, y), h = _mm512_mask_add_pd(h, tail, h, _mm512_mul_pd(y, d));
            }
        } else {
            for (; i + 8 <= S; i += 8) {
                const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + i)), sh);
                a = _mm512_add_pd(a, d), q = _mm512_add_pd(q, _mm512_mul_pd(d, d));
            }
            if (i < S) {
                const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(tail, p + i)), sh);
                a = _mm512_mask_add_pd(a, tail, a, d), q = _mm512_mask_add_pd(q, tail, q, _mm512_mul_pd(d, d));
            }
        }
    }
    double A[8], Q[8], G[8], H[8];
    _mm512_storeu_pd(A, a), _mm512_storeu_pd(Q, q), _mm512_storeu_pd(G, g), _mm512_storeu_pd(H, h);
    fold4(A, Q, G, H, out);
}

/* The partials [0, 4) in lo, [4, 8) in hi. */
typedef struct {
    __m256d lo, hi;
} acc8;

AVX2 static inline void acc8_store(acc8 v, double *t) { _mm256_storeu_pd(t, v.lo), _mm256_storeu_pd(t + 4, v.hi); }
AVX2 static inline acc8 acc8_load(const double *t) { return (acc8){_mm256_loadu_pd(t), _mm256_loadu_pd(t + 4)}; }

AVX2 static void sums_avx2(const float *x, const float *dy, int64_t N, int64_t C, int64_t S, int64_t c, double shift,
                           double out[4]) {
    const __m256d sh = _mm256_set1_pd(shift);
    const __m256d z = _mm256_setzero_pd();
    acc8 a = {z, z}, q = a, g = a, h = a;
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = (n * C + c) * S;
        const float *p = x + o, *e = dy ? dy + o : NULL;
        int64_t i = 0;
        for (; i + 8 <= S; i += 8) {
            const __m256 xv = _mm256_loadu_ps(p + i);
            const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), sh);
            const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), sh);
            a.lo = _mm256_add_pd(a.lo, d0), a.hi = _mm256_add_pd(a.hi, d1);
            q.lo = _mm256_add_pd(q.lo, _mm256_mul_pd(d0, d0)), q.hi = _mm256_add_pd(q.hi, _mm256_mul_pd(d1, d1));
            if (e) {
                const __m256 yv = _mm256_loadu_ps(e + i);
                const __m256d y0 = _mm256_cvtps_pd(_mm256_castps256_ps128(yv));
                const __m256d y1 = _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1));
                g.lo = _mm256_add_pd(g.lo, y0), g.hi = _mm256_add_pd(g.hi, y1);
                h.lo = _mm256_add_pd(h.lo, _mm256_mul_pd(y0, d0)), h.hi = _mm256_add_pd(h.hi, _mm256_mul_pd(y1, d1));
            }
        }
        if (i < S) { /* the row's tail into the partials, one by one as chan_sums.h adds them */
            double A[8], Q[8], G[8], H[8];
            acc8_store(a, A), acc8_store(q, Q), acc8_store(g, G), acc8_store(h, H);
            for (int k = 0; i < S; i++, k++) {
                const double d = (double)p[i] - shift;
                A[k] += d, Q[k] += d * d;
                if (e) {
                    const double y = e[i];
                    G[k] += y, H[k] += y * d;
                }
            }
            a = acc8_load(A), q = acc8_load(Q), g = acc8_load(G), h = acc8_load(H);
        }
    }
    double A[8], Q[8], G[8], H[8];
    acc8_store(a, A), acc8_store(q, Q), acc8_store(g, G), acc8_store(h, H);
    fold4(A, Q, G, H, out);
}
#endif

#define BNCHAN_COPY(SUF, ATTR, SUMS)                                                                               \
    ATTR static void fwd_##SUF(const float *x, const float *scale, const float *B, const float *mean,             \
                               const float *var, float *y, float *const st[4], int64_t N, int64_t C, int64_t inner, \
                               float eps, float momentum, bool train, int64_t c0, int64_t c1) {                   \
        pprt_bn_channels_body(x, scale, B, mean, var, y, st, N, C, inner, eps, momentum, train, c0, c1, SUMS);     \
    }                                                                                                              \
    ATTR static void grad_##SUF(const float *dy, const float *x, const float *sc, const float *mean_in,           \
                                const float *var_in, float *dx, float *dsc, float *db, int64_t N, int64_t C,      \
                                int64_t S, float eps, bool training, int64_t c0, int64_t c1) {                    \
        pprt_bn_grad_body(dy, x, sc, mean_in, var_in, dx, dsc, db, N, C, S, eps, training, c0, c1, SUMS);          \
    }

BNCHAN_COPY(base, , pprt_chan_sums)
#if defined(__x86_64__) || defined(__i386__)
BNCHAN_COPY(avx2, AVX2, sums_avx2)
BNCHAN_COPY(avx512, AVX512, sums_avx512)
#define BNCHAN_ISA pprt_cpu_isa()
#else
#define BNCHAN_ISA PPRT_ISA_BASE
#endif

const char *pprt_bnchan_isa(void) { return pprt_isa_name(BNCHAN_ISA); }

void pprt_bnchan_fwd(const float *x, const float *scale, const float *B, const float *mean, const float *var, float *y,
                     float *const st[4], int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool train,
                     int64_t c0, int64_t c1) {
    switch (BNCHAN_ISA) {
#if defined(__x86_64__) || defined(__i386__)
    case PPRT_ISA_AVX512: fwd_avx512(x, scale, B, mean, var, y, st, N, C, inner, eps, momentum, train, c0, c1); break;
    case PPRT_ISA_AVX2: fwd_avx2(x, scale, B, mean, var, y, st, N, C, inner, eps, momentum, train, c0, c1); break;
#endif
    default: fwd_base(x, scale, B, mean, var, y, st, N, C, inner, eps, momentum, train, c0, c1); break;
    }
}

void pprt_bnchan_grad(const float *dy, const float *x, const float *sc, const float *mean_in, const float *var_in,
                      float *dx, float *dsc, float *db, int64_t N, int64_t C, int64_t S, float eps, bool training,
                      int64_t c0, int64_t c1) {
    switch (BNCHAN_ISA) {
#if defined(__x86_64__) || defined(__i386__)
    case PPRT_ISA_AVX512: grad_avx512(dy, x, sc, mean_in, var_in, dx, dsc, db, N, C, S, eps, training, c0, c1); break;
    case PPRT_ISA_AVX2: grad_avx2(dy, x, sc, mean_in, var_in, dx, dsc, db, N, C, S, eps, training, c0, c1); break;
#endif
    default: grad_base(dy, x, sc, mean_in, var_in, dx, dsc, db, N, C, S, eps, training, c0, c1); break;
    }
}
