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

/* The one body of both widths: P(op) is the width's intrinsic _mmW_op, V
 * and VI its float and int vectors, ROUND its round-to-integer intrinsic,
 * F2I and I2F its casts between them. */
#define PPRT_VEXP_BODY(P, V, VI, ROUND, F2I, I2F)                                                          \
    {                                                                                                      \
        const V xc = P(min_ps)(P(max_ps)(x, P(set1_ps)(PPRT_VEXP_LO)), P(set1_ps)(PPRT_VEXP_HI));          \
        const V hi = P(set1_ps)(1.44269502162933349609375f), lo = P(set1_ps)(1.925963033500011079e-8f);    \
        const V r = P(ROUND)(P(mul_ps)(xc, hi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);             \
        const V f = P(fmadd_ps)(xc, lo, P(fmsub_ps)(xc, hi, r));                                           \
        V p = P(set1_ps)(1.5403530393e-4f);                                                                \
        p = P(fmadd_ps)(p, f, P(set1_ps)(1.3333558146e-3f));                                               \
        p = P(fmadd_ps)(p, f, P(set1_ps)(9.6181291076e-3f));                                               \
        p = P(fmadd_ps)(p, f, P(set1_ps)(5.5504108665e-2f));                                               \
        p = P(fmadd_ps)(p, f, P(set1_ps)(2.4022650696e-1f));                                               \
        p = P(fmadd_ps)(p, f, P(set1_ps)(6.9314718056e-1f));                                               \
        p = P(fmadd_ps)(p, f, P(set1_ps)(1.0f));                                                           \
        /* times 2^r: r added to the exponent field (p in [0.7, 1.42], |r| <= 126) */                      \
        const VI e = P(slli_epi32)(P(cvtps_epi32)(r), 23);                                                 \
        return P(I2F)(P(add_epi32)(P(F2I)(p), e));                                                         \
    }
#define PPRT_VEXP_MM256(op) _mm256_##op
#define PPRT_VEXP_MM512(op) _mm512_##op

__attribute__((target("avx2,fma"))) static inline __m256 pprt_exp8(__m256 x)
    PPRT_VEXP_BODY(PPRT_VEXP_MM256, __m256, __m256i, round_ps, castps_si256, castsi256_ps)

__attribute__((target("avx512f"))) static inline __m512 pprt_exp16(__m512 x)
    PPRT_VEXP_BODY(PPRT_VEXP_MM512, __m512, __m512i, roundscale_ps, castps_si512, castsi512_ps)

#endif
