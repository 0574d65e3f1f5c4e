/* bf16.h: a bfloat16 as the float it is (its bits the float's upper
 * half), for the kernels that read --precision bf16 activations as they
 * are stored (gnorm.c, gconv.c, nanfix.c) and the reference kernels. */
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

/* f32 to bf16 as vcvtneps2bf16 rounds (bf16x16.h): to nearest even, a
 * denormal to a zero of its sign, a NaN quiet with its top bits */
static inline uint16_t pprt_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
