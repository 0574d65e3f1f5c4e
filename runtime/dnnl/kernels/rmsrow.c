/* rmsrow.c: see rmsrow.h. Lane k of the accumulators is the reference's
 * partial k: an AVX-512 vector of 8 doubles, or two AVX2 vectors of 4; a
 * row's last inner mod 8 squares added one by one into the stored
 * partials, as the reference adds them. Each square of a float is exact in
 * double and C11 contracts no multiply-add into an FMA, so the sums are
 * the reference's; y's two double products and the rounding to float are
 * the reference's operations in the reference's order. */
#include "rmsrow.h"

#include <math.h>

#include "../../cpu/chan_sums.h"
#include "../../cpu/ref.h"
#include "../../isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX2 __attribute__((target("avx2")))

/* 1 / sqrt(mean of the squares + eps) from the row's eight partials, the row's tail added into them */
static double row_inv(double a[PPRT_CHAN_LANES], const float *xp, int64_t i, int64_t inner, float eps) {
    for (int k = 0; i < inner; i++, k++) a[k] += (double)xp[i] * xp[i];
    return 1.0 / sqrt(pprt_lanes_fold(a) / (double)(inner ? inner : 1) + eps);
}

AVX512 static void rows_avx512(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0,
                               int64_t o1) {
    for (int64_t o = o0; o < o1; o++) {
        const float *xp = x + o * inner;
        float *yp = y + o * inner;
        __m512d acc = _mm512_setzero_pd();
        int64_t i = 0;
        for (; i + 8 <= inner; i += 8) {
            const __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(xp + i));
            acc = _mm512_add_pd(acc, _mm512_mul_pd(d, d));
        }
        double a[8];
        _mm512_storeu_pd(a, acc);
        const double inv = row_inv(a, xp, i, inner, eps);
        const __m512d iv = _mm512_set1_pd(inv);
        for (i = 0; i + 8 <= inner; i += 8) {
            const __m512d d = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(xp + i)), iv),
                                            _mm512_cvtps_pd(_mm256_loadu_ps(sc + i)));
            _mm256_storeu_ps(yp + i, _mm512_cvtpd_ps(d));
        }
        for (; i < inner; i++) yp[i] = (float)(xp[i] * inv * sc[i]);
    }
}

AVX2 static void rows_avx2(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0,
                           int64_t o1) {
    for (int64_t o = o0; o < o1; o++) {
        const float *xp = x + o * inner;
        float *yp = y + o * inner;
        __m256d lo = _mm256_setzero_pd(), hi = lo;
        int64_t i = 0;
        for (; i + 8 <= inner; i += 8) {
            const __m256 v = _mm256_loadu_ps(xp + i);
            const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            const __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            lo = _mm256_add_pd(lo, _mm256_mul_pd(d0, d0)), hi = _mm256_add_pd(hi, _mm256_mul_pd(d1, d1));
        }
        double a[8];
        _mm256_storeu_pd(a, lo), _mm256_storeu_pd(a + 4, hi);
        const double inv = row_inv(a, xp, i, inner, eps);
        const __m256d iv = _mm256_set1_pd(inv);
        for (i = 0; i + 4 <= inner; i += 4) {
            const __m256d d = _mm256_mul_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(xp + i)), iv),
                                            _mm256_cvtps_pd(_mm_loadu_ps(sc + i)));
            _mm_storeu_ps(yp + i, _mm256_cvtpd_ps(d));
        }
        for (; i < inner; i++) yp[i] = (float)(xp[i] * inv * sc[i]);
    }
}
#define RMSROW_ISA pprt_cpu_isa()
#else
#define RMSROW_ISA PPRT_ISA_BASE
#endif

const char *pprt_rmsrow_isa(void) { return pprt_isa_name(RMSROW_ISA); }

void pprt_rmsrow(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0, int64_t o1) {
    switch (RMSROW_ISA) {
#if defined(__x86_64__) || defined(__i386__)
    case PPRT_ISA_AVX512: rows_avx512(x, sc, y, inner, eps, o0, o1); break;
    case PPRT_ISA_AVX2: rows_avx2(x, sc, y, inner, eps, o0, o1); break;
#endif
    default: pprt_rms_rows(x, sc, y, inner, eps, o0, o1); break;
    }
}
