/* silu.c: SiLU on AVX2 and FMA, as the graph it comes from computes it:
 * y = x * sigmoid(x), sigmoid(x) = 1 / (1 + e^-x). e^-x = 2^t with
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

bool pprt_silu_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }
bool pprt_silu_wins(void) { return pprt_cpu_isa() == PPRT_ISA_AVX2; }

#define BLOCK 4096 /* elements per task: 16 KiB in, 16 KiB out */

void pprt_silu(const float *x, float *y, size_t n, int threads) {
    const long nb = (long)((n + BLOCK - 1) / BLOCK);
    if (threads < 1 || nb < 2) threads = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long b = 0; b < nb; b++) {
        const size_t lo = (size_t)b * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        silu_block(x + lo, y + lo, len);
    }
}

#else
bool pprt_silu_cpu(void) { return false; }
bool pprt_silu_wins(void) { return false; }
void pprt_silu(const float *x, float *y, size_t n, int threads) { (void)x, (void)y, (void)n, (void)threads; }
#endif
