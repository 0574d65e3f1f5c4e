/* silu16.h: SiLU (and the sigmoid in it) of 16 f32 values with the arithmetic sized to a bf16
 * result (silu.c's bf16 pass and the epilogue of pwconv.c's convolution):
 * e^-x = 2^t, t = -x log2(e) clamped to [-150, 150] (beyond, 2^t is 0 or
 * overflows to inf, so sigmoid is 1 or 0 as for the reference), 2^t =
 * 2^round(t) * 2^f by vscalefps (which saturates to 0 and inf), 2^f by a
 * degree-3 polynomial on [-1/2, 1/2] (relative error 7.5e-5), 1 / (1 +
 * e^-x) by vrcp14ps (2^-14), so sigmoid is within 1.4e-4 of exact; y = x *
 * sigmoid keeps a NaN or an infinity of x (-inf: NaN, as -inf * 0 in the
 * reference). No division: oneDNN's swish post-op divides, and in bf16,
 * where AMX makes the convolutions cheap, that division was most of
 * EfficientNet-B0's time (bench/RESULTS.md). */
#ifndef PPRT_SILU16_H
#define PPRT_SILU16_H

#if defined(__x86_64__) || defined(__i386__)
#include "bf16x16.h"

PPRT_AVX512BW static inline __m512 pprt_sigmoid16_for_bf16(__m512 x) {
    __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(-1.44269502f));
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(150.0f)); /* NaN: comes back by x */
    const __m512 r = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, r);
    __m512 p = _mm512_set1_ps(5.5171669e-2f); /* relative minimax (Lawson) coefficients */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4261115e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9326097e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.9992806e-1f));
    const __m512 e = _mm512_scalef_ps(p, r);
    return _mm512_rcp14_ps(_mm512_add_ps(e, _mm512_set1_ps(1.0f)));
}

/* the sigmoid alone, a NaN kept (pprt_sigmoid16_for_bf16 gives 1 for it:
 * the clamp's max takes -150 over a NaN) */
PPRT_AVX512BW static inline __m512 pprt_sigmoid16_nan_for_bf16(__m512 x) {
    return _mm512_mask_mov_ps(pprt_sigmoid16_for_bf16(x), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

PPRT_AVX512BW static inline __m512 pprt_silu16_for_bf16(__m512 x) {
    return _mm512_mul_ps(x, pprt_sigmoid16_for_bf16(x));
}

#endif
#endif
