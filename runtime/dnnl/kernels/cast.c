/* cast.c: see cast.h. The bf16 rounding is integer arithmetic on the
 * float's bits (u + 0x7fff + the kept lowest bit, the upper half), with the
 * NaN lanes replaced by the quiet NaN of their sign; the float16 roundings
 * are F16C's vcvtps2ph / vcvtph2ps (to nearest even, subnormals kept),
 * with the NaN lanes replaced by the reference's canonical NaN. Tails go
 * through masks (AVX-512) or the plain C loop (AVX2). */
#include "cast.h"

#include <stdbool.h>
#include <string.h>

#include "../../cpu/bf16.h"

static void cast_c(pprt_cast_kind kind, const void *x, void *y, size_t n) {
    switch (kind) {
    case PPRT_CAST_F32_BF16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)y)[i] = pprt_bf16_of_float(((const float *)x)[i]);
        break;
    case PPRT_CAST_BF16_F32:
        for (size_t i = 0; i < n; i++) ((float *)y)[i] = pprt_bf16_float(((const uint16_t *)x)[i]);
        break;
    case PPRT_CAST_F32_F16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)y)[i] = pprt_f16_of_float(((const float *)x)[i]);
        break;
    default:
        for (size_t i = 0; i < n; i++) ((float *)y)[i] = pprt_f16_float(((const uint16_t *)x)[i]);
        break;
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2_ATTR __attribute__((target("avx2,fma,f16c")))
#define AVX512_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))

/* ---- AVX2: 8 lanes ---- */

/* the eight 32-bit lanes' low halves, in order (each fits 16 bits) */
AVX2_ATTR static inline __m128i narrow8(__m256i v) {
    const __m256i p = _mm256_packus_epi32(v, v); /* per 128-bit half: lanes 0-3, 0-3 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

AVX2_ATTR static size_t avx2_f32_bf16(const float *x, uint16_t *y, size_t n) {
    const __m256i one = _mm256_set1_epi32(1), r7 = _mm256_set1_epi32(0x7fff), abs = _mm256_set1_epi32(0x7fffffff),
                  inf = _mm256_set1_epi32(0x7f800000), sgn = _mm256_set1_epi32(0x8000), qn = _mm256_set1_epi32(0x7fc0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i)), hi = _mm256_srli_epi32(u, 16);
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, r7), _mm256_and_si256(hi, one)), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        const __m256i q = _mm256_or_si256(_mm256_and_si256(hi, sgn), qn);
        _mm_storeu_si128((__m128i *)(y + i), narrow8(_mm256_blendv_epi8(r, q, nan)));
    }
    return i;
}

AVX2_ATTR static size_t avx2_bf16_f32(const uint16_t *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(w, 16));
    }
    return i;
}

AVX2_ATTR static size_t avx2_f32_f16(const float *x, uint16_t *y, size_t n) {
    const __m256i sgn = _mm256_set1_epi32(0x8000), qn = _mm256_set1_epi32(0x7e00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256i u = _mm256_castps_si256(v);
        const __m128i q = narrow8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), sgn), qn));
        const __m128i nan = _mm256_castsi256_si128(
            _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)),
                                                        _mm256_setzero_si256()),
                                     0x08));
        _mm_storeu_si128((__m128i *)(y + i), _mm_blendv_epi8(h, q, nan));
    }
    return i;
}

AVX2_ATTR static size_t avx2_f16_f32(const uint16_t *x, float *y, size_t n) {
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    const __m256i sgn = _mm256_set1_epi32((int)0x80000000u), qn = _mm256_set1_epi32(0x7fc00000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        const __m256 v = _mm256_cvtph_ps(h);
        const __m256i nan = _mm256_cvtepi16_epi32(_mm_cmpgt_epi16(_mm_and_si128(h, abs), inf));
        const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_castps_si256(v), sgn), qn);
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_blendv_epi8(_mm256_castps_si256(v), q, nan));
    }
    return i;
}

/* ---- AVX-512: 16 lanes, the tail under a mask ---- */

AVX512_ATTR static void avx512_f32_bf16(const float *x, uint16_t *y, size_t n) {
    const __m512i one = _mm512_set1_epi32(1), r7 = _mm512_set1_epi32(0x7fff), abs = _mm512_set1_epi32(0x7fffffff),
                  inf = _mm512_set1_epi32(0x7f800000), sgn = _mm512_set1_epi32(0x8000), qn = _mm512_set1_epi32(0x7fc0);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512i u = _mm512_maskz_loadu_epi32(m, x + i), hi = _mm512_srli_epi32(u, 16);
        const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, r7), _mm512_and_si512(hi, one)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        const __m512i q = _mm512_or_si512(_mm512_and_si512(hi, sgn), qn);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q)));
    }
}

AVX512_ATTR static void avx512_bf16_f32(const uint16_t *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
        _mm512_mask_storeu_epi32(y + i, m, _mm512_slli_epi32(w, 16));
    }
}

AVX512_ATTR static void avx512_f32_f16(const float *x, uint16_t *y, size_t n) {
    const __m512i sgn = _mm512_set1_epi32(0x8000), qn = _mm512_set1_epi32(0x7e00);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        const __m256i q =
            _mm512_cvtepi32_epi16(_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 16), sgn), qn));
        _mm256_mask_storeu_epi16(y + i, m, _mm256_mask_blend_epi16(nan, h, q));
    }
}

AVX512_ATTR static void avx512_f16_f32(const uint16_t *x, float *y, size_t n) {
    const __m256i abs = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
    const __m512i sgn = _mm512_set1_epi32((int)0x80000000u), qn = _mm512_set1_epi32(0x7fc00000);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m256i h = _mm256_maskz_loadu_epi16(m, x + i);
        const __m512i v = _mm512_castps_si512(_mm512_cvtph_ps(h));
        const __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(h, abs), inf);
        const __m512i q = _mm512_or_si512(_mm512_and_si512(v, sgn), qn);
        _mm512_mask_storeu_epi32(y + i, m, _mm512_mask_blend_epi32(nan, v, q));
    }
}
#endif

void pprt_cast(pprt_isa isa, pprt_cast_kind kind, const void *x, void *y, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
    if (isa >= PPRT_ISA_AVX512) {
        switch (kind) {
        case PPRT_CAST_F32_BF16: avx512_f32_bf16(x, y, n); return;
        case PPRT_CAST_BF16_F32: avx512_bf16_f32(x, y, n); return;
        case PPRT_CAST_F32_F16: avx512_f32_f16(x, y, n); return;
        default: avx512_f16_f32(x, y, n); return;
        }
    }
    const bool f16 = kind == PPRT_CAST_F32_F16 || kind == PPRT_CAST_F16_F32;
    if (isa >= PPRT_ISA_AVX2 && (!f16 || pprt_cpu_f16c())) {
        size_t done;
        switch (kind) {
        case PPRT_CAST_F32_BF16: done = avx2_f32_bf16(x, y, n); break;
        case PPRT_CAST_BF16_F32: done = avx2_bf16_f32(x, y, n); break;
        case PPRT_CAST_F32_F16: done = avx2_f32_f16(x, y, n); break;
        default: done = avx2_f16_f32(x, y, n); break;
        }
        const size_t xs = kind == PPRT_CAST_F32_BF16 || kind == PPRT_CAST_F32_F16 ? 4 : 2, ys = 6 - xs;
        cast_c(kind, (const char *)x + done * xs, (char *)y + done * ys, n - done);
        return;
    }
#else
    (void)isa;
#endif
    cast_c(kind, x, y, n);
}
