/* chan_sums.h: the sums over one channel of an [N, C, S] tensor that the
 * BatchNormalization kernel and its gradient's (ref_kernels.c, ref_grad.c)
 * take, in double, over eight partial sums: element i of each image row
 * goes to partial i mod 8, rows in image order, and the eight fold in a
 * fixed tree. The order depends on N and S alone, so a channel's sum has
 * the same bits whatever range of channels a caller runs (the oneDNN
 * executor runs ranges on its threads, runtime/dnnl/gradref.c) and in
 * whatever stage. One running sum, as before, was a chain of dependent
 * double additions, 4 cycles an element; eight run side by side. Plain C
 * (the compiler may vectorize it), no intrinsics. */
#ifndef PPRT_CHAN_SUMS_H
#define PPRT_CHAN_SUMS_H

#include <stdbool.h>
#include <stdint.h>

enum { PPRT_CHAN_LANES = 8 };

static inline double pprt_lanes_fold(const double a[PPRT_CHAN_LANES]) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* Sum of x[(n C + c) S + i] - shift over n < N, i < S; with sq, of its square. */
static inline double pprt_chan_sum(const float *x, int64_t N, int64_t C, int64_t S, int64_t c, double shift, bool sq) {
    double a[PPRT_CHAN_LANES] = {0};
    for (int64_t n = 0; n < N; n++) {
        const float *p = x + (n * C + c) * S;
        int64_t i = 0;
        if (sq) {
            for (; i + PPRT_CHAN_LANES <= S; i += PPRT_CHAN_LANES)
                for (int k = 0; k < PPRT_CHAN_LANES; k++) {
                    const double d = p[i + k] - shift;
                    a[k] += d * d;
                }
        } else {
            for (; i + PPRT_CHAN_LANES <= S; i += PPRT_CHAN_LANES)
                for (int k = 0; k < PPRT_CHAN_LANES; k++) a[k] += p[i + k] - shift;
        }
        for (; i < S; i++) {
            const double d = p[i] - shift;
            a[i % PPRT_CHAN_LANES] += sq ? d * d : d;
        }
    }
    return pprt_lanes_fold(a);
}

/* The gradient's two sums: *sdy of dy, *sdyx of dy (x - mean) inv, over the
 * same elements in the same partials. */
static inline void pprt_chan_sum_dy(const float *dy, const float *x, int64_t N, int64_t C, int64_t S, int64_t c,
                                    double mean, double inv, double *sdy, double *sdyx) {
    double a[PPRT_CHAN_LANES] = {0}, b[PPRT_CHAN_LANES] = {0};
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = (n * C + c) * S;
        const float *g = dy + o, *p = x + o;
        int64_t i = 0;
        for (; i + PPRT_CHAN_LANES <= S; i += PPRT_CHAN_LANES)
            for (int k = 0; k < PPRT_CHAN_LANES; k++) {
                a[k] += g[i + k];
                b[k] += g[i + k] * (p[i + k] - mean) * inv;
            }
        for (; i < S; i++) {
            a[i % PPRT_CHAN_LANES] += g[i];
            b[i % PPRT_CHAN_LANES] += g[i] * (p[i] - mean) * inv;
        }
    }
    *sdy = pprt_lanes_fold(a), *sdyx = pprt_lanes_fold(b);
}

#endif
