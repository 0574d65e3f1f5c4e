/* bf16x16.h: 16 bf16 values to and from f32 on AVX-512, for pprt's kernels
 * over --precision bf16 tensors (silu.c, cscale.c). A bf16 is the upper half
 * of an f32; rounding to it is AVX512_BF16's vcvtneps2bf16's: to nearest
 * even, a denormal to a zero of its sign, a NaN quiet with its top bits. The
 * integer steps give the same bits where the CPU lacks that instruction
 * (tests/unit/test_silu.c compares the two over every bf16 input). */
#ifndef PPRT_BF16X16_H
#define PPRT_BF16X16_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#define PPRT_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))
#define PPRT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* 16 bf16 values as f32 (exact) */
PPRT_AVX512BW static inline __m512 pprt_f32x16_of_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* to bf16 by integer steps: + 0x7fff + the kept part's lowest bit, then the
 * NaN and denormal cases */
PPRT_AVX512BW static inline __m256i pprt_bf16x16_of(__m512 y) {
    const __m512i b = _mm512_castps_si512(y);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i rb = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
    rb = _mm512_mask_or_epi32(rb, nan, _mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    const __mmask16 tiny = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7f800000));
    rb = _mm512_mask_mov_epi32(rb, tiny, _mm512_srli_epi32(_mm512_and_si512(b, _mm512_set1_epi32((int)0x80000000u)), 16));
    return _mm512_cvtepi32_epi16(rb);
}

/* the same by the instruction (AVX512_BF16): one for the ten above */
PPRT_AVX512BF16 static inline __m256i pprt_bf16x16_native(__m512 y) { return (__m256i)_mm512_cvtneps_pbh(y); }

/* The lanes of a vector holding the next w of a row's values: all for w >=
 * 16, none for w <= 0. */
static inline __mmask16 pprt_tail16(int64_t w) {
    return w >= 16 ? (__mmask16)0xffff : w <= 0 ? (__mmask16)0 : (__mmask16)((1u << w) - 1);
}

/* The lanes m of 16 values at p + i, f32 or (bf16) bf16, as f32 (the other lanes 0). */
PPRT_AVX512BW static inline __m512 pprt_f32x16_load(const void *p, int64_t i, __mmask16 m, bool bf16) {
    return bf16 ? pprt_f32x16_of_bf16(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i))
                : _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

#endif
#endif
