/* test_bnchan.c: BatchNormalization in training mode and pp.BatchNormGrad,
 * the reference kernels (pprt_bn_channels, pprt_bn_grad_channels:
 * runtime/cpu/chan_sums.h) and the oneDNN executor's vector copies of them
 * (runtime/dnnl/kernels/bnchan.c, at the ISA pprt_cpu_isa() gives: ctest
 * runs this once as the CPU is and once capped by ONEDNN_MAX_CPU_ISA=AVX2),
 * against the definitions computed here in long double, two passes (the
 * mean, then the variance about it):
 *
 * - shapes with image rows shorter than, equal to and longer than the eight
 *   partial sums (S 1, 7, 8, 9, 49, 196, 700), N 1 to 8, and channels of
 *   four kinds: N(0, 1); 1000 + N(0, 0.01) (a mean 10^5 standard deviations
 *   from 0, where E[x^2] - E[x]^2 of unshifted double sums is off by more
 *   than a float ulp: this test fails so); a constant (variance exactly 0);
 *   -3 + N(0, 5);
 * - the forward: Y within 6 float ulps (2^-24) of |scale inv| (|x| +
 *   |mean|) + |B| of the long double value (Y is computed in float from the
 *   mean and scale inv rounded to float: five roundings of terms of that
 *   size); the mean, 1 / sqrt(var + eps) and the running mean and variance
 *   within one float ulp of the value plus 1e-12 of the channel's largest
 *   |x| (a double rounded once to float);
 * - the gradient, training and inference mode: dB and dscale within one
 *   float ulp plus 1e-12 of the sum of the terms' magnitudes, dX within one
 *   float ulp plus 1e-10 of |scale inv| (|dy| + |dB| / m + |x - mean| inv
 *   |dscale| / m) (the double's cancellations, far below float's);
 * - the vector copies give the reference's bits, element for element,
 *   whole and over two ranges of channels.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/bnchan.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"
#include "runtime/cpu/ref.h"


static const float ULP = 0x1p-24f;

typedef struct {
    long double mean, var, inv, db, ds, sdb, sds; /* sdb, sds: the sums of the terms' magnitudes */
} ref_stats;

/* The channel's statistics and, with dy, its gradient sums about `mean` (training: its own), in long double. */
static ref_stats ref_channel(const float *x, const float *dy, int64_t N, int64_t C, int64_t S, int64_t c, bool own,
                             double mean_in, double var_in, float eps) {
    ref_stats r = {0};
    const long double m = (long double)N * S;
    if (own) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) r.mean += x[(n * C + c) * S + i];
        r.mean /= m;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                const long double d = x[(n * C + c) * S + i] - r.mean;
                r.var += d * d;
            }
        r.var /= m;
    } else
        r.mean = mean_in, r.var = var_in;
    r.inv = 1.0L / sqrtl(r.var + eps);
    if (dy)
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t o = (n * C + c) * S + i;
                const long double t = dy[o] * (x[o] - r.mean) * r.inv;
                r.db += dy[o], r.sdb += fabsl((long double)dy[o]), r.ds += t, r.sds += fabsl(t);
            }
    return r;
}

static bool near(double got, long double want, long double tol) { return fabsl((long double)got - want) <= tol; }

static void fill(float *x, int64_t N, int64_t C, int64_t S, int kind0) {
    for (int64_t c = 0; c < C; c++) {
        const int kind = (int)((c + kind0) % 4);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                const double g = gauss();
                x[(n * C + c) * S + i] = (float)(kind == 0 ? g : kind == 1 ? 1000 + 0.01 * g : kind == 2 ? 2.5 : -3 + 5 * g);
            }
    }
}

static void test_shape(int64_t N, int64_t C, int64_t S, int kind0) {
    char name[96];
    snprintf(name, sizeof name, "N %lld C %lld S %lld", (long long)N, (long long)C, (long long)S);
    check_case = name;
    const int64_t n_el = N * C * S;
    const float eps = 1e-5f, momentum = 0.9f;
    float *x = malloc(sizeof(float) * (size_t)n_el), *dy = malloc(sizeof(float) * (size_t)n_el);
    float *y1 = malloc(sizeof(float) * (size_t)n_el), *y2 = malloc(sizeof(float) * (size_t)n_el);
    float *sc = malloc(sizeof(float) * (size_t)C * 12);
    float *b = sc + C, *rm = sc + 2 * C, *rv = sc + 3 * C, *st1 = sc + 4 * C, *st2 = sc + 8 * C;
    fill(x, N, C, S, kind0);
    for (int64_t i = 0; i < n_el; i++) dy[i] = (float)gauss();
    for (int64_t c = 0; c < C; c++)
        sc[c] = (float)(uni() * 2 - 1), b[c] = (float)(uni() - 0.5), rm[c] = (float)gauss(), rv[c] = (float)(0.5 + uni());
    float *const s1[4] = {st1, st1 + C, st1 + 2 * C, st1 + 3 * C}, *const s2[4] = {st2, st2 + C, st2 + 2 * C, st2 + 3 * C};

    /* the forward */
    pprt_bn_channels(x, sc, b, rm, rv, y1, s1, N, C, S, eps, momentum, true, 0, C);
    for (int64_t c = 0; c < C; c++) {
        const ref_stats r = ref_channel(x, NULL, N, C, S, c, true, 0, 0, eps);
        long double xmax = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) xmax = fmaxl(xmax, fabsl((long double)x[(n * C + c) * S + i]));
        const long double keep = momentum, take = 1 - keep;
        const long double want[4] = {rm[c] * keep + r.mean * take, rv[c] * keep + r.var * take, r.mean, r.inv};
        const long double scale_of[4] = {xmax, xmax * xmax, xmax, 0};
        for (int k = 0; k < 4; k++)
            CHECK(near(s1[k][c], want[k], 2 * ULP * fabsl(want[k]) + 1e-12L * scale_of[k]),
                  "statistic %d of channel %lld: %.9g, want %.9Lg", k, (long long)c, s1[k][c], want[k]);
        const long double k = sc[c] * r.inv;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t o = (n * C + c) * S + i;
                const long double want_y = (x[o] - r.mean) * k + b[c];
                const long double tol = 6 * ULP * (fabsl(k) * (fabsl((long double)x[o]) + fabsl(r.mean)) + fabsl((long double)b[c]));
                if (!near(y1[o], want_y, tol)) {
                    CHECK_FAIL("Y at channel %lld element %lld: %.9g, want %.9Lg (tolerance %.3Lg)", (long long)c,
                               (long long)o, y1[o], want_y, tol);
                    break;
                }
            }
    }
    /* the vector copy: the same bits, whole and over two ranges */
    for (int split = 0; split < 2; split++) {
        memset(y2, 0, sizeof(float) * (size_t)n_el), memset(st2, 0, sizeof(float) * (size_t)C * 4);
        const int64_t mid = split ? C / 2 : C;
        pprt_bnchan_fwd(x, sc, b, rm, rv, y2, s2, N, C, S, eps, momentum, true, 0, mid);
        pprt_bnchan_fwd(x, sc, b, rm, rv, y2, s2, N, C, S, eps, momentum, true, mid, C);
        CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)n_el), "forward Y: not the reference's bits (split %d)", split);
        CHECK(!memcmp(st1, st2, sizeof(float) * (size_t)C * 4), "forward statistics: not the reference's bits");
    }

    /* the gradient */
    for (int training = 0; training <= 1; training++) {
        float *ds1 = st1, *db1 = st1 + C, *ds2 = st2, *db2 = st2 + C;
        pprt_bn_grad_channels(dy, x, sc, rm, rv, y1, ds1, db1, N, C, S, eps, training, 0, C);
        const long double m = (long double)N * S;
        for (int64_t c = 0; c < C; c++) {
            const ref_stats r = ref_channel(x, dy, N, C, S, c, training, rm[c], rv[c], eps);
            CHECK(near(db1[c], r.db, 2 * ULP * fabsl(r.db) + 1e-12L * r.sdb), "dB of channel %lld (training %d): %.9g, want %.9Lg",
                  (long long)c, training, db1[c], r.db);
            CHECK(near(ds1[c], r.ds, 2 * ULP * fabsl(r.ds) + 1e-12L * r.sds),
                  "dscale of channel %lld (training %d): %.9g, want %.9Lg", (long long)c, training, ds1[c], r.ds);
            const long double g = sc[c] * r.inv;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) {
                    const int64_t o = (n * C + c) * S + i;
                    const long double xh = (x[o] - r.mean) * r.inv;
                    const long double want = training ? g * (dy[o] - r.db / m - xh * r.ds / m) : g * dy[o];
                    const long double tol = 2 * ULP * fabsl(want) +
                                            1e-10L * fabsl(g) * (fabsl((long double)dy[o]) + fabsl(r.db / m) + fabsl(xh * r.ds / m));
                    if (!near(y1[o], want, tol)) {
                        CHECK_FAIL("dX at channel %lld element %lld (training %d): %.9g, want %.9Lg", (long long)c,
                                   (long long)o, training, y1[o], want);
                        break;
                    }
                }
        }
        for (int split = 0; split < 2; split++) {
            memset(y2, 0, sizeof(float) * (size_t)n_el), memset(st2, 0, sizeof(float) * (size_t)C * 2);
            const int64_t mid = split ? (C + 1) / 2 : C;
            pprt_bnchan_grad(dy, x, sc, rm, rv, y2, ds2, db2, N, C, S, eps, training, 0, mid);
            pprt_bnchan_grad(dy, x, sc, rm, rv, y2, ds2, db2, N, C, S, eps, training, mid, C);
            CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)n_el), "dX: not the reference's bits (training %d)", training);
            CHECK(!memcmp(st1, st2, sizeof(float) * (size_t)C * 2), "dscale, dB: not the reference's bits (training %d)",
                  training);
        }
    }
    free(x), free(dy), free(y1), free(y2), free(sc);
}

int main(void) {
    printf("test_bnchan: the vector copies at ISA %s\n", pprt_bnchan_isa());
    const int64_t shapes[][3] = {{1, 3, 1}, {8, 4, 1}, {4, 5, 7}, {2, 3, 8}, {3, 4, 9},
                                 {2, 6, 49}, {8, 4, 196}, {1, 5, 700}, {5, 3, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        test_shape(shapes[k][0], shapes[k][1], shapes[k][2], (int)k);
    check_case = "";
    return check_summary("test_bnchan");
}
