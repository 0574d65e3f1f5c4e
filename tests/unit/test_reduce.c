/* test_reduce.c: our reductions (runtime/cpu/reduce.c) against the
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
 * - the plan refuses axes that are not neighbours (0 and 2 of [3, 4, 5]).
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/cpu/reduce.h"

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
    printf("worst relative error over the last axes: %.2g\n", worst);
    return check_summary("test_reduce");
}
