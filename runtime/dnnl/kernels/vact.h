/* vact.h: the logistic sigmoid and tanh on 8 lanes (AVX2 and FMA), for the
 * gate arithmetic of LSTM on matrix products (rnn_gemm.c). Both through
 * vexp.h's e^x:
 *   sigmoid(x) = 1 / (1 + e^-x), as the reference kernel writes it (below
 *     -87.3, where e^-x would overflow, about 1.2e-38 instead of 0);
 *   tanh(x) = sign(x) (1 - 2 / (e^2|x| + 1)) for |x| >= 1/4, where the
 *     subtraction loses at most 2 bits; below, the odd Taylor polynomial
 *     to x^9 (truncation under 1e-8 relative), so tiny |x| keep their
 *     relative precision; -0 stays -0, +-inf gives +-1.
 * A NaN stays NaN in both. Errors: tests/unit/test_vact.c bounds them
 * against double (sigmoid 4e-7 relative, tanh 6e-7 relative).
 * Include only on x86 (the functions carry their own target attributes). */
#ifndef PPRT_VACT_H
#define PPRT_VACT_H

#include <immintrin.h>

#include "vexp.h"

__attribute__((target("avx2,fma"))) static inline __m256 pprt_sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = pprt_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    return _mm256_blendv_ps(s, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2,fma"))) static inline __m256 pprt_tanh8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 a = _mm256_andnot_ps(sign, x);
    const __m256 e = pprt_exp8(_mm256_add_ps(a, a));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 a2 = _mm256_mul_ps(a, a);
    __m256 p = _mm256_set1_ps(62.0f / 2835.0f);
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-17.0f / 315.0f));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(2.0f / 15.0f));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-1.0f / 3.0f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(a, a2), p, a);
    const __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.25f), _CMP_LT_OQ));
    const __m256 r = _mm256_or_ps(t, _mm256_and_ps(x, sign));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#endif
