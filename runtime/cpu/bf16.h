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

#endif
