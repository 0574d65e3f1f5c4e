/* silu.c: SiLU on AVX2 and FMA (16 lanes on AVX-512), as the graph it comes
 * from computes it: y = x * sigmoid(x), sigmoid(x) = 1 / (1 + e^-x). e^-x = 2^t with
 * t = -x log2(e), 2^t = 2^round(t) * 2^f, f in [-1/2, 1/2], 2^f by its
 * degree-6 Taylor polynomial (truncation error 1.2e-7 relative). x is clamped to [-87.3, 87.3] so the exponent trick stays
 * in range; below -87.3 (where e^-x nearly overflows f32) sigmoid is 0, as in
 * the reference kernel once e^-x overflows, so -inf gives NaN, and a NaN
 * stays NaN.
 *
 * oneDNN's AVX2 swish (eltwise, or a convolution's post-op) costs 1.1 to 1.4
 * ns per element on the Zen 3 VM; this about 0.55 in cache (docs/design-
 * notes.md, "Our own SiLU"). Tails go through the same 8-lane code on a
 * padded copy, and threads take whole blocks, so every element is computed
 * the same way whatever the array's length or the thread count. */
#include "silu.h"

#include "isa.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256 silu8(__m256 x) {
    /* x clamped to [-87.3, 87.3], so |t| < 126; t's fraction f with
     * log2(e) in two parts (Cody and Waite), so f keeps its precision for
     * large |x| */
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(87.3f));
    const __m256 hi = _mm256_set1_ps(-1.44269502162933349609375f), lo = _mm256_set1_ps(-1.925963033500011079e-8f);
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(xc, hi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_fmadd_ps(xc, lo, _mm256_fmsub_ps(xc, hi, r));
    __m256 p = _mm256_set1_ps(1.5403530393e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108665e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650696e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718056e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    /* times 2^r: r added to the exponent field (p in [0.7, 1.42], |r| <= 126) */
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(r), 23);
    const __m256 ex = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    __m256 sig = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(ex, _mm256_set1_ps(1.0f)));
    sig = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ), sig);
    return _mm256_mul_ps(x, sig);
}

AVX2 static void silu_block(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, silu8(_mm256_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

/* The same arithmetic on 16 lanes (AVX-512 F): every operation is the 8-lane
 * one's (IEEE fused multiply-adds, rounding to nearest, division), so the
 * bits are the same as silu8's, element by element. */
#define AVX512 __attribute__((target("avx512f")))

AVX512 static inline __m512 silu16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(87.3f));
    const __m512 hi = _mm512_set1_ps(-1.44269502162933349609375f), lo = _mm512_set1_ps(-1.925963033500011079e-8f);
    const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(xc, hi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_fmadd_ps(xc, lo, _mm512_fmsub_ps(xc, hi, r));
    __m512 p = _mm512_set1_ps(1.5403530393e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(r), 23);
    const __m512 ex = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
    const __m512 sig = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(ex, _mm512_set1_ps(1.0f)));
    /* sigmoid 0 below -87.3 (a NaN x compares false and keeps its NaN) */
    const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    return _mm512_mul_ps(x, _mm512_maskz_mov_ps((__mmask16)~below, sig));
}

AVX512 static void silu_block16(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        float buf[16] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm512_storeu_ps(buf, silu16(_mm512_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

bool pprt_silu_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }
/* AVX2: 0.55-0.68 ns per element against oneDNN's 1.1-1.4 (Zen 3); AVX-512:
 * EfficientNet-B0 f32 on Zen 5 (docs/design-notes.md, "Our own SiLU") */
bool pprt_silu_wins(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }

#define BLOCK 4096 /* elements per task: 16 KiB in, 16 KiB out */

void pprt_silu_lanes(const float *x, float *y, size_t n, int threads, int lanes) {
    const long nb = (long)((n + BLOCK - 1) / BLOCK);
    if (threads < 1 || nb < 2) threads = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long b = 0; b < nb; b++) {
        const size_t lo = (size_t)b * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        if (lanes == 16) silu_block16(x + lo, y + lo, len);
        else silu_block(x + lo, y + lo, len);
    }
}

void pprt_silu(const float *x, float *y, size_t n, int threads) {
    pprt_silu_lanes(x, y, n, threads, pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : 8);
}

#else
bool pprt_silu_cpu(void) { return false; }
bool pprt_silu_wins(void) { return false; }
void pprt_silu(const float *x, float *y, size_t n, int threads) { (void)x, (void)y, (void)n, (void)threads; }
void pprt_silu_lanes(const float *x, float *y, size_t n, int threads, int lanes) {
    (void)x, (void)y, (void)n, (void)threads, (void)lanes;
}
#endif
