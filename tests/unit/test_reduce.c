/* test_reduce.c: our reductions (runtime/dnnl/kernels/reduce.c) against the
 * definition computed here: a sum in double in index order (the reference
 * kernel's), |x| for L1, x^2 for L2 and SumSquare, / n for Mean, sqrt for
 * L2; Max and Min skip NaN, NaN only when all are NaN.
 *
 * - 400 random cases: rank 1 to 5, dims 1 to 7, the reduced axes one run of
 *   neighbours (1-long axes anywhere), every kind, values over [-8, 8] with
 *   some NaN, +-inf and -0 in a third of them: over an axis before the last
 *   the same bits as the definition; over the last axes within 1e-6
 *   relative (16 partial sums; measured: none differs after rounding to
 *   float), NaN where it has NaN;
 * - large ones that the threads share: caformer's channel mean of
 *   [8, 64, 56, 56] over axis 1, a per-token mean of [8 * 196, 384] over the
 *   last axis, convnextv2's ReduceL2 over the spatial axes of
 *   [8, 160, 14, 14];
 * - the same bytes on 1, 2 and 3 threads;
 * - the plan refuses axes that are not neighbours (0 and 2 of [3, 4, 5]);
 * - a reduction over the spatial axes of a tensor stored channels last or
 *   blocked on 8 or 16 channels (pprt_reduce_channels), float or bfloat16:
 *   every kind, NaN, inf and -0 among the values, the same bits as from its
 *   plain float copy on 1 and 3 threads; refused where C is not a multiple of the block, where a
 *   channel or sample axis is reduced, or where the plan is not spatial.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/reduce.h"

#include "runtime/cpu/bf16.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static const char *names[] = {"", "Sum", "Mean", "L1", "L2", "SumSquare", "Max", "Min"};
static double worst;

static float definition(int kind, const float *x, int64_t n, int64_t stride) {
    if (kind == PPRT_RED_MAX || kind == PPRT_RED_MIN) {
        double m = kind == PPRT_RED_MAX ? -INFINITY : INFINITY;
        bool num = false;
        for (int64_t j = 0; j < n; j++) {
            const double v = x[j * stride];
            if (v != v) continue;
            num = true;
            if (kind == PPRT_RED_MAX ? v > m : v < m) m = v;
        }
        return num ? (float)m : NAN;
    }
    double acc = 0;
    for (int64_t j = 0; j < n; j++) {
        const double v = x[j * stride];
        acc += kind == PPRT_RED_L1 ? fabs(v) : kind == PPRT_RED_L2 || kind == PPRT_RED_SUMSQUARE ? v * v : v;
    }
    return (float)(kind == PPRT_RED_MEAN ? acc / (double)n : kind == PPRT_RED_L2 ? sqrt(acc) : acc);
}

static void one(const int64_t *dims, int rank, const bool *mask, int kind, bool specials, const char *what) {
    int64_t total = 1;
    for (int i = 0; i < rank; i++) total *= dims[i];
    float *x = malloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < total; i++) x[i] = (float)(rnd() % 16001) / 1000.0f - 8.0f;
    if (specials)
        for (int64_t i = 0; i < total / 10 + 1; i++) {
            const float sp[4] = {NAN, INFINITY, -INFINITY, -0.0f};
            x[rnd() % total] = sp[rnd() % 4];
        }
    pprt_reduce p;
    check_case = what;
    if (!pprt_reduce_plan(dims, rank, mask, kind, &p)) {
        CHECK_FAIL("the plan refused neighbouring axes");
        free(x);
        return;
    }
    const int64_t outs = p.outer * p.inner;
    float *y = malloc((size_t)outs * sizeof(float)), *z = malloc((size_t)outs * sizeof(float));
    pprt_reduce_run(&p, x, y, 1);
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t i = 0; i < p.inner; i++) {
            const float want = definition(kind, x + o * p.n * p.inner + i, p.n, p.inner), got = y[o * p.inner + i];
            if (isnan(want) || p.inner > 1 || kind >= PPRT_RED_MAX || isinf(want)) {
                CHECK(memcmp(&got, &want, 4) == 0 || (isnan(got) && isnan(want)),
                      "%s output %lld: got %.9g, want %.9g (the same bits)", names[kind], (long long)(o * p.inner + i),
                      got, want);
            } else {
                const double e = fabs((double)got - want) / (fabs(want) > 1e-30 ? fabs(want) : 1.0);
                CHECK(e <= 1e-6, "%s output %lld: got %.9g, want %.9g", names[kind], (long long)o, got, want);
                if (e > worst) worst = e;
            }
        }
    for (int t = 2; t <= 3; t++) {
        pprt_reduce_run(&p, x, z, t);
        CHECK(memcmp(y, z, (size_t)outs * sizeof(float)) == 0, "%d threads: other bytes", t);
    }
    free(x), free(y), free(z);
}

/* x [N, C, S] plain stored with channels in vectors of vec (vec == C:
 * channels last), the spatial axes inside them: [N, C / vec, S, vec];
 * bf16: as bfloat16 (x's values are bfloat16 ones), else float */
static void store(const float *x, void *s, int64_t N, int64_t C, int64_t S, int64_t vec, bool bf16) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < S; j++) {
                const int64_t to = ((n * (C / vec) + c / vec) * S + j) * vec + c % vec;
                const float v = x[(n * C + c) * S + j];
                uint32_t u;
                memcpy(&u, &v, 4);
                if (bf16) ((uint16_t *)s)[to] = (uint16_t)(u >> 16);
                else ((float *)s)[to] = v;
            }
}

static void channels(const int64_t *dims, int rank, int kind, int64_t vec, bool bf16, const char *what) {
    int64_t total = 1, S = 1;
    for (int i = 0; i < rank; i++) total *= dims[i];
    for (int i = 2; i < rank; i++) S *= dims[i];
    const int64_t N = dims[0], C = dims[1];
    float *x = malloc((size_t)total * sizeof(float)), *s = malloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < total; i++) x[i] = (float)(rnd() % 16001) / 1000.0f - 8.0f;
    /* each channel's sum holds +L and -L (L up to 2^40): a double partial that
     * holds L rounds the small terms added to it to 2^-12, so the sum, small
     * again once -L comes, has other bits in another order of the terms */
    for (int64_t nc = 0; nc < N * C && S > 1; nc++) {
        const int64_t j1 = rnd() % S, j2 = (j1 + 1 + rnd() % (S - 1)) % S;
        const float L = (float)(1 + rnd() % 1000) * 0x1p30f;
        x[nc * S + j1] = L, x[nc * S + j2] = -L;
    }
    for (int i = 0; i < 3; i++) { /* three outputs NaN or inf */
        const float sp[4] = {NAN, INFINITY, -INFINITY, -0.0f};
        x[rnd() % total] = sp[rnd() % 4];
    }
    if (bf16) /* x's values rounded to bfloat16 (towards zero: its upper half), as floats */
        for (int64_t i = 0; i < total; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            x[i] = pprt_bf16_float((uint16_t)(u >> 16));
        }
    store(x, s, N, C, S, vec, bf16);
    bool mask[8] = {false};
    for (int i = 2; i < rank; i++) mask[i] = true;
    pprt_reduce p, q;
    check_case = what;
    if (!pprt_reduce_plan(dims, rank, mask, kind, &p) || !pprt_reduce_plan(dims, rank, mask, kind, &q) ||
        !pprt_reduce_channels(&q, N, C, vec, bf16)) {
        CHECK_FAIL("refused a reduction over the spatial axes");
        free(x), free(s);
        return;
    }
    float *y = malloc((size_t)(N * C) * sizeof(float)), *z = malloc((size_t)(N * C) * sizeof(float));
    pprt_reduce_run(&p, x, y, 1);
    for (int t = 1; t <= 3; t += 2) {
        pprt_reduce_run(&q, s, z, t);
        int bad = 0;
        for (int64_t i = 0; i < N * C; i++) bad += memcmp(&y[i], &z[i], 4) != 0;
        CHECK(bad == 0, "%s, %d thread(s): %d of %lld outputs other bits than from the plain copy", names[kind], t, bad,
              (long long)(N * C));
    }
    free(x), free(s), free(y), free(z);
}

int main(void) {
    char what[160];
    for (int c = 0; c < 400; c++) {
        const int rank = 1 + (int)(rnd() % 5), kind = 1 + c % 7;
        int64_t dims[8];
        bool mask[8] = {false};
        for (int i = 0; i < rank; i++) dims[i] = 1 + (int64_t)(rnd() % 7);
        const int a = (int)(rnd() % (unsigned)rank), b = a + (int)(rnd() % (unsigned)(rank - a));
        for (int i = a; i <= b; i++) mask[i] = true;
        if (rnd() % 4 == 0) { /* a 1-long axis outside the run, reduced or not */
            const int k = (int)(rnd() % (unsigned)rank);
            if (k < a || k > b) dims[k] = 1, mask[k] = rnd() % 2;
        }
        int n = snprintf(what, sizeof what, "case %d: %s dims", c, names[kind]);
        for (int i = 0; i < rank; i++)
            n += snprintf(what + n, sizeof what - (size_t)n, " %lld%s", (long long)dims[i], mask[i] ? "r" : "");
        one(dims, rank, mask, kind, c % 3 == 0, what);
    }
    one((int64_t[]){8, 64, 56, 56}, 4, (bool[]){false, true, false, false}, PPRT_RED_MEAN, false, "caformer channel mean");
    one((int64_t[]){8 * 196, 384}, 2, (bool[]){false, true}, PPRT_RED_MEAN, false, "token mean");
    one((int64_t[]){8, 160, 14, 14}, 4, (bool[]){false, false, true, true}, PPRT_RED_L2, true, "spatial L2");
    one((int64_t[]){8, 160, 14, 14}, 4, (bool[]){false, false, true, true}, PPRT_RED_MAX, true, "spatial max");
    pprt_reduce p;
    check_case = "axes 0 and 2";
    CHECK(!pprt_reduce_plan((int64_t[]){3, 4, 5}, 3, (bool[]){true, false, true}, PPRT_RED_SUM, &p),
          "planned axes that are not neighbours");
    for (int kind = 1; kind <= 7; kind++)
        for (int b = 0; b < 2; b++) {
            const char *t = b ? "bfloat16" : "float";
            snprintf(what, sizeof what, "%s over H, W of [3, 24, 5, 7] channels last, %s", names[kind], t);
            channels((int64_t[]){3, 24, 5, 7}, 4, kind, 24, b, what);
            snprintf(what, sizeof what, "%s over H, W of [2, 32, 9, 4] in 16-blocks, %s", names[kind], t);
            channels((int64_t[]){2, 32, 9, 4}, 4, kind, 16, b, what);
            snprintf(what, sizeof what, "%s over D, H, W of [2, 16, 3, 1, 6] in 8-blocks, %s", names[kind], t);
            channels((int64_t[]){2, 16, 3, 1, 6}, 5, kind, 8, b, what);
            snprintf(what, sizeof what, "%s over the 37 of [1, 80, 37] channels last, %s", names[kind], t);
            channels((int64_t[]){1, 80, 37}, 3, kind, 80, b, what);
        }
    channels((int64_t[]){8, 160, 56, 56}, 4, PPRT_RED_L2, 160, false, "convnextv2's spatial L2 at 56 x 56, channels last");
    channels((int64_t[]){8, 160, 56, 56}, 4, PPRT_RED_L2, 160, true, "the same in bfloat16");
    check_case = "channels: refusals";
    pprt_reduce_plan((int64_t[]){2, 24, 5, 7}, 4, (bool[]){false, false, true, true}, PPRT_RED_SUM, &p);
    CHECK(!pprt_reduce_channels(&p, 2, 24, 16, false), "took 24 channels in blocks of 16");
    pprt_reduce_plan((int64_t[]){2, 24, 5, 7}, 4, (bool[]){false, true, true, true}, PPRT_RED_SUM, &p);
    CHECK(!pprt_reduce_channels(&p, 2, 24, 24, false), "took a reduction over the channels too");
    pprt_reduce_plan((int64_t[]){2, 24, 5, 7}, 4, (bool[]){false, false, false, true}, PPRT_RED_SUM, &p);
    CHECK(!pprt_reduce_channels(&p, 2, 24, 24, false), "took a reduction over W alone");
    pprt_reduce_plan((int64_t[]){2, 24, 5, 7}, 4, (bool[]){false, true, false, false}, PPRT_RED_SUM, &p);
    CHECK(!pprt_reduce_channels(&p, 2, 24, 24, false), "took a reduction over the channels");
    printf("worst relative error over the last axes: %.2g\n", worst);
    return check_summary("test_reduce");
}
