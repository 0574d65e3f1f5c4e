/* layouts.h: the layouts of runtime/dnnl/kernels/layout.h that the unit tests of
 * pprt's kernels reading any layout (bnorm, gnorm, gconv) lay values out
 * in: vec 1 plain, vec == C channels last, another vec (8, 16) blocked on
 * channels with the channel count padded to a multiple of it. */
#ifndef PP_TEST_LAYOUTS_H
#define PP_TEST_LAYOUTS_H

#include <stdint.h>
#include <string.h>

#include "runtime/dnnl/kernels/layout.h"

/* channels stored per pixel, padding included */
static inline int64_t lay_padded(int64_t C, int64_t vec) {
    return vec == 1 || vec == C ? C : (C + vec - 1) / vec * vec;
}

/* element (n, c, s) of N x C x S values in layout vec */
static inline int64_t lay_at(int64_t C, int64_t S, int64_t vec, int64_t n, int64_t c, int64_t s) {
    if (vec == 1) return (n * C + c) * S + s;
    if (vec == C) return (n * S + s) * C + c;
    const int64_t cp = lay_padded(C, vec);
    return ((n * (cp / vec) + c / vec) * S + s) * vec + c % vec;
}

/* the kernels' description of it */
static inline pprt_layout lay_layout(int64_t N, int64_t C, int64_t S, int64_t vec) {
    if (vec == 1) return (pprt_layout){N, C, S, 1, C * S, S};
    return (pprt_layout){N, C, S, vec, lay_padded(C, vec) * S, vec == C ? 0 : S * vec};
}

static inline uint32_t lay_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

#endif
