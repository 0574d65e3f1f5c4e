/* chan_sums.h: BatchNormalization in training mode and pp.BatchNormGrad
 * over channels [c0, c1) of an [N, C, S] tensor, the bodies of the
 * reference kernels (ref_kernels.c, ref_grad.c) and of the oneDNN
 * executor's own copies (runtime/dnnl/kernels/bnchan.c, which compiles
 * these same functions for AVX2 and AVX-512 and picks one by the CPU).
 *
 * A channel's sums: one pass, in double, of d = x - shift (shift: the
 * channel's first element in training, a shifted sum keeps E[d^2] - E[d]^2
 * from cancelling), its square and, for the gradient, dy and dy d, over
 * eight partial sums each: element i of an image row goes to partial
 * i mod 8, rows in image order, and the eight fold in a fixed tree. The
 * order depends on N and S alone, never on the range of channels a caller
 * runs (the oneDNN executor runs ranges on its threads), the stage or the
 * vector width: every operation is a double addition, subtraction or
 * multiplication of IEEE rounding (C11, so no contraction into fused
 * multiply-adds), the compiler's vectors only run the eight partials side
 * by side, so each ISA's copy gives the reference's bits. Plain C, no
 * intrinsics. The forward reads X twice (the sums, then Y), the gradient
 * X and dY twice (the sums, then dX). */
#ifndef PPRT_CHAN_SUMS_H
#define PPRT_CHAN_SUMS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PPRT_CHAN_LANES = 8 };

#define PPRT_CHAN_INLINE static inline __attribute__((always_inline))

PPRT_CHAN_INLINE double pprt_lanes_fold(const double a[PPRT_CHAN_LANES]) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* The channel's sums: [0] of d = x - shift, [1] of d^2, and with dy, [2]
 * of dy, [3] of dy d, over x[(n C + c) S + i], n < N, i < S. The bodies
 * below take it as an argument: the vector copies pass their own, which
 * add the same terms into the same partials (bnchan.c). */
typedef void pprt_chan_sums_fn(const float *x, const float *dy, int64_t N, int64_t C, int64_t S, int64_t c,
                               double shift, double out[4]);

static inline void pprt_chan_sums(const float *x, const float *dy, int64_t N, int64_t C, int64_t S, int64_t c,
                                     double shift, double out[4]) {
    double a[PPRT_CHAN_LANES] = {0}, q[PPRT_CHAN_LANES] = {0}, g[PPRT_CHAN_LANES] = {0}, h[PPRT_CHAN_LANES] = {0};
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = (n * C + c) * S;
        const float *restrict p = x + o;
        int64_t i = 0;
        if (dy) {
            const float *restrict e = dy + o;
            for (; i + PPRT_CHAN_LANES <= S; i += PPRT_CHAN_LANES)
                for (int k = 0; k < PPRT_CHAN_LANES; k++) {
                    const double d = (double)p[i + k] - shift, y = e[i + k];
                    a[k] += d, q[k] += d * d, g[k] += y, h[k] += y * d;
                }
            for (; i < S; i++) {
                const int k = (int)(i % PPRT_CHAN_LANES);
                const double d = (double)p[i] - shift, y = e[i];
                a[k] += d, q[k] += d * d, g[k] += y, h[k] += y * d;
            }
        } else {
            for (; i + PPRT_CHAN_LANES <= S; i += PPRT_CHAN_LANES)
                for (int k = 0; k < PPRT_CHAN_LANES; k++) {
                    const double d = (double)p[i + k] - shift;
                    a[k] += d, q[k] += d * d;
                }
            for (; i < S; i++) {
                const int k = (int)(i % PPRT_CHAN_LANES);
                const double d = (double)p[i] - shift;
                a[k] += d, q[k] += d * d;
            }
        }
    }
    out[0] = pprt_lanes_fold(a), out[1] = pprt_lanes_fold(q), out[2] = pprt_lanes_fold(g), out[3] = pprt_lanes_fold(h);
}

/* Mean and population variance from the shifted sums over m elements
 * (m > 0): mean = shift + s0 / m, var = s1 / m - (s0 / m)^2, at least 0. */
PPRT_CHAN_INLINE void pprt_chan_stats(const double s[4], double shift, double m, double *mean, double *var) {
    const double d = s[0] / m, v = s[1] / m - d * d;
    *mean = shift + d, *var = v > 0 ? v : 0;
}

/* BatchNormalization over channels [c0, c1) (ref.h, pprt_bn_channels). */
PPRT_CHAN_INLINE void pprt_bn_channels_body(const float *x, const float *scale, const float *B, const float *mean,
                                            const float *var, float *y, float *const st[4], int64_t N, int64_t C,
                                            int64_t inner, float eps, float momentum, bool train, int64_t c0,
                                            int64_t c1, pprt_chan_sums_fn *sums) {
    const double cnt = (double)N * (double)inner;
    for (int64_t c = c0; c < c1; c++) {
        double mu = mean[c], v = var[c];
        if (train && cnt > 0) { /* the channel's own statistics: the mean and the population variance */
            const double shift = x[c * inner];
            double s[4];
            sums(x, NULL, N, C, inner, c, shift, s);
            pprt_chan_stats(s, shift, cnt, &mu, &v);
        } else if (train) {
            mu = 0, v = 0;
        }
        if (train) {
            const double keep = momentum, take = 1.0 - (double)momentum;
            const double stats[4] = {mean[c] * keep + mu * take, var[c] * keep + v * take, mu,
                                     1.0 / sqrt(v + (double)eps)};
            for (int k = 0; k < 4; k++)
                if (st[k]) st[k][c] = (float)stats[k];
        }
        /* y = (x - mean) * (scale / sqrt(var + eps)) + B, in float */
        const float s = (float)((double)scale[c] / sqrt(v + (double)eps));
        const float m = (float)mu, b = B[c];
        for (int64_t n = 0; n < N; n++) {
            const float *restrict xp = x + (n * C + c) * inner;
            float *restrict yp = y + (n * C + c) * inner;
            for (int64_t i = 0; i < inner; i++) yp[i] = (xp[i] - m) * s + b;
        }
    }
}

/* pp.BatchNormGrad over channels [c0, c1) (ref.h, pprt_bn_grad_channels).
 * With d = x - mean, inv = 1 / sqrt(var + eps) and m elements a channel:
 * dB = sum dy, dscale = inv sum dy d, and dX = scale inv (dy - dB / m -
 * d inv dscale / m) with the batch's statistics (training), scale inv dy
 * with given ones. */
PPRT_CHAN_INLINE void pprt_bn_grad_body(const float *dy, const float *x, const float *sc, const float *mean_in,
                                        const float *var_in, float *dx, float *dsc, float *db, int64_t N, int64_t C,
                                        int64_t S, float eps, bool training, int64_t c0, int64_t c1,
                                        pprt_chan_sums_fn *sums) {
    const double m = (double)N * (double)S;
    for (int64_t c = c0; c < c1; c++) {
        double mean = training ? 0 : mean_in[c], var = training ? 0 : var_in[c];
        const double shift = training ? (m > 0 ? x[c * S] : 0) : mean;
        double s[4];
        sums(x, dy, N, C, S, c, shift, s);
        if (training && m > 0) pprt_chan_stats(s, shift, m, &mean, &var);
        const double inv = 1.0 / sqrt(var + (double)eps);
        /* sum dy (x - mean) = sum dy d' - (mean - shift) sum dy, d' = x - shift */
        const double sdy = s[2], sdyx = inv * (s[3] - (mean - shift) * s[2]);
        if (dsc) dsc[c] = (float)sdyx;
        if (db) db[c] = (float)sdy;
        const double g = sc[c] * inv, a = m > 0 ? sdy / m : 0, b = m > 0 ? inv * sdyx / m : 0;
        for (int64_t n = 0; n < N; n++) {
            const int64_t o = (n * C + c) * S;
            const float *restrict gy = dy + o, *restrict xp = x + o;
            float *restrict gx = dx + o;
            if (training && m > 0)
                for (int64_t i = 0; i < S; i++) gx[i] = (float)(g * (gy[i] - a - (xp[i] - mean) * b));
            else
                for (int64_t i = 0; i < S; i++) gx[i] = (float)(g * gy[i]);
        }
    }
}

#endif
