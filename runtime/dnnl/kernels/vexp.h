/* vexp.h: e^x on 8 lanes (AVX2 and FMA) and 16 lanes (AVX-512 F), the one
 * exponential of pprt's own vector kernels (SiLU in silu.c, Softmax in
 * softmax.c). e^x = 2^t with t = x log2(e), 2^t = 2^round(t) * 2^f, f in
 * [-1/2, 1/2], 2^f by its degree-6 Taylor polynomial (truncation error
 * 1.2e-7 relative); log2(e) in two parts (Cody and Waite) so f keeps its
 * precision for large |x|. x is clamped to [-87.3, 87.3] so the exponent
 * trick stays in range (|round(t)| <= 126): below -87.3 the caller decides
 * (SiLU and Softmax take 0); a NaN comes out as e^-87.3, so callers that
 * must keep NaN test for it. Both widths do the same IEEE operations in the
 * same order, so they give the same bits lane by lane.
 * Include only on x86 (the functions carry their own target attributes). */
#ifndef PPRT_VEXP_H
#define PPRT_VEXP_H

#include <immintrin.h>

#define PPRT_VEXP_LO (-87.3f)
#define PPRT_VEXP_HI 87.3f

__attribute__((target("avx2,fma"))) static inline __m256 pprt_exp8(__m256 x) {
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(PPRT_VEXP_LO)), _mm256_set1_ps(PPRT_VEXP_HI));
    const __m256 hi = _mm256_set1_ps(1.44269502162933349609375f), lo = _mm256_set1_ps(1.925963033500011079e-8f);
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
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

__attribute__((target("avx512f"))) static inline __m512 pprt_exp16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(PPRT_VEXP_LO)), _mm512_set1_ps(PPRT_VEXP_HI));
    const __m512 hi = _mm512_set1_ps(1.44269502162933349609375f), lo = _mm512_set1_ps(1.925963033500011079e-8f);
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
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
}

#endif
