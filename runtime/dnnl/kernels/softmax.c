/* softmax.c: Softmax and LogSoftmax over a middle axis (softmax.h). A task
 * is one block of `lanes` neighbouring columns of one outer index: three
 * passes down the n rows of the block (the maximum, then e^(x - max) and
 * its sum, then the scaling), each row's lanes one vector load. Columns past
 * the end of inner are masked off in the last block. */
#include "softmax.h"

#include "../../isa.h"

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

bool pprt_softmax_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }

#if defined(__x86_64__) || defined(__i386__)
#include "vexp.h"
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f")))

/* columns [c, c + w) of rows x[j * inner], j < n (w <= 8) */
AVX2 static void block8(const float *x, float *y, int64_t n, int64_t inner, int w, bool lg) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
    /* the maximum may miss a NaN (max_ps takes the second operand then): its
     * x - m is NaN all the same, and the sum spreads it to the column */
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j++) m = _mm256_max_ps(m, _mm256_maskload_ps(x + j * inner, mask));
    __m256 s = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        const __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + j * inner, mask), m);
        __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_set1_ps(PPRT_VEXP_LO), _CMP_LT_OQ), pprt_exp8(d));
        /* NaN stays NaN (x NaN, or +inf - +inf, or -inf - -inf) */
        e = _mm256_blendv_ps(e, d, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
        s = _mm256_add_ps(s, e);
        if (!lg) _mm256_maskstore_ps(y + j * inner, mask, e);
    }
    if (lg) {
        float sv[8], mv[8];
        _mm256_storeu_ps(sv, s), _mm256_storeu_ps(mv, m);
        for (int k = 0; k < 8; k++) sv[k] = mv[k] + logf(sv[k]);
        const __m256 ls = _mm256_loadu_ps(sv);
        for (int64_t j = 0; j < n; j++)
            _mm256_maskstore_ps(y + j * inner, mask, _mm256_sub_ps(_mm256_maskload_ps(x + j * inner, mask), ls));
    } else {
        const __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
        for (int64_t j = 0; j < n; j++)
            _mm256_maskstore_ps(y + j * inner, mask, _mm256_mul_ps(_mm256_maskload_ps(y + j * inner, mask), r));
    }
}

/* the same on 16 lanes, the same operations lane by lane */
AVX512 static void block16(const float *x, float *y, int64_t n, int64_t inner, int w, bool lg) {
    const __mmask16 mask = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j++) m = _mm512_max_ps(m, _mm512_maskz_loadu_ps(mask, x + j * inner));
    __m512 s = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j * inner), m);
        const __mmask16 below = _mm512_cmp_ps_mask(d, _mm512_set1_ps(PPRT_VEXP_LO), _CMP_LT_OQ);
        __m512 e = _mm512_maskz_mov_ps((__mmask16)~below, pprt_exp16(d));
        e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q), d);
        s = _mm512_add_ps(s, e);
        if (!lg) _mm512_mask_storeu_ps(y + j * inner, mask, e);
    }
    if (lg) {
        float sv[16], mv[16];
        _mm512_storeu_ps(sv, s), _mm512_storeu_ps(mv, m);
        for (int k = 0; k < 16; k++) sv[k] = mv[k] + logf(sv[k]);
        const __m512 ls = _mm512_loadu_ps(sv);
        for (int64_t j = 0; j < n; j++)
            _mm512_mask_storeu_ps(y + j * inner, mask, _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j * inner), ls));
    } else {
        const __m512 r = _mm512_div_ps(_mm512_set1_ps(1.0f), s);
        for (int64_t j = 0; j < n; j++)
            _mm512_mask_storeu_ps(y + j * inner, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, y + j * inner), r));
    }
}

void pprt_softmax_lanes(const pprt_softmax *s, const float *x, float *y, int threads, int lanes) {
    const int64_t nb = (s->inner + lanes - 1) / lanes, tasks = s->outer * nb;
    if (threads < 1 || (double)tasks * (double)s->n * lanes < 16384) threads = 1; /* under ~50 us */
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t o = t / nb, c = (t % nb) * lanes;
        const int w = (int)(s->inner - c < lanes ? s->inner - c : lanes);
        const int64_t at = o * s->n * s->inner + c;
        if (lanes == 16) block16(x + at, y + at, s->n, s->inner, w, s->log);
        else block8(x + at, y + at, s->n, s->inner, w, s->log);
    }
}

void pprt_softmax_run(const pprt_softmax *s, const float *x, float *y, int threads) {
    pprt_softmax_lanes(s, x, y, threads, pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : 8);
}

#else
void pprt_softmax_run(const pprt_softmax *s, const float *x, float *y, int threads) {
    (void)s, (void)x, (void)y, (void)threads;
}
void pprt_softmax_lanes(const pprt_softmax *s, const float *x, float *y, int threads, int lanes) {
    (void)s, (void)x, (void)y, (void)threads, (void)lanes;
}
#endif
