/* bf16.h: bfloat16 and float16 to and from float on the bits: a bfloat16
 * as the float it is (its bits the float's upper half), for the kernels
 * that read --precision bf16 activations as they are stored (gnorm.c,
 * gconv.c, nanfix.c) and the reference kernels; the reference Cast's
 * roundings and its float16 widening (runtime/cpu/ref_math.c), which the
 * oneDNN executor's vector Casts (runtime/dnnl/kernels/cast.c) give too. */
#ifndef PPRT_BF16_H
#define PPRT_BF16_H

#include <stdint.h>
#include <string.h>

static inline float pprt_bf16_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* a float16 as a float, on the bits (a NaN comes out as the quiet NaN of its sign) */
static inline float pprt_f16_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    uint32_t u;
    if (e == 0) { /* zero or a subnormal, m 2^-24 (exact in a float) */
        const float v = (float)m * 0x1p-24f;
        memcpy(&u, &v, sizeof u);
        u |= sign;
    } else if (e == 31) {
        u = sign | (m ? 0x7fc00000u : 0x7f800000u);
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The reference Cast's roundings of a float, on its bits (ppcc --train
 * --precision casts every product's inputs and outputs: rounding from
 * double, as ref_math.c's narrow_float does for other sources, costs
 * several times the convolution); narrow_float's results, NaN included.
 * bf16: to nearest even, subnormals rounded as the others (not flushed:
 * compare pprt_bf16_round), a NaN the quiet NaN of its sign. */
static inline uint16_t pprt_bf16_of_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* f32 to bf16 as vcvtneps2bf16 rounds (bf16x16.h): to nearest even, a
 * denormal to a zero of its sign, a NaN quiet with its top bits (the
 * reference's rounding otherwise) */
static inline uint16_t pprt_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return pprt_bf16_of_float(f);
}

/* f16: to nearest even, subnormals kept, 65520 and up to infinity, a NaN 0x7e00 with its sign */
static inline uint16_t pprt_f16_of_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* 65520 and up (the tie above 65504 goes to the even infinity) */
    if (a <= 0x33000000u) return sign;           /* 2^-25 and below: 0 (2^-25 a tie to the even 0) */
    if (a < 0x38800000u) {                       /* below 2^-14: a subnormal, quantum 2^-24 */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        r += rem > half || (rem == half && (r & 1u));
        return sign | (uint16_t)r;
    }
    const uint32_t r = a - 0x38000000u; /* the exponent rebiased from 127 to 15 */
    return sign | (uint16_t)((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
}

#endif
