/* test_softmax.c: our Softmax / LogSoftmax over a middle axis
 * (runtime/dnnl/kernels/softmax.c) against the definition computed here in double,
 * y = e^(x - max) / sum e^(x - max) (log: x - max - log sum), column by
 * column of [outer, n, inner].
 *
 * - 300 random shapes (outer 1-4, n 1-400, inner 2-70, so tails of both
 *   lane widths), values over [-30, 30], some -inf: Softmax within
 *   2e-6 |want| + 1e-9 (measured: 2.7e-6 relative at most,
 *   on the smallest values, where x - max rounds in float), LogSoftmax within
 *   2e-6 (1 + |want|); a -inf gives exactly 0 (Softmax) or -inf (LogSoftmax);
 * - a column with a NaN, one with +inf and one all -inf come out all NaN,
 *   as the reference kernel's do, and their neighbours are untouched;
 * - the same bytes on 1, 2 and 3 threads, on 8 and 16 lanes (where the CPU
 *   has AVX-512), and in place.
 *
 * Exit 0 when all pass, 1 otherwise; 77 (skipped) on a CPU without AVX2+FMA. */
#include "runtime/isa.h"
#include "runtime/dnnl/kernels/softmax.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static double worst_rel;

/* the definition, in double, column by column; NaN columns as the reference kernel */
static void check_case_of(const pprt_softmax *s, const float *x, const float *y, const char *what) {
    check_case = what;
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            const float *xc = x + o * s->n * s->inner + i;
            const float *yc = y + o * s->n * s->inner + i;
            double m = -INFINITY;
            bool nan = false;
            for (int64_t j = 0; j < s->n; j++) {
                const double v = xc[j * s->inner];
                nan |= isnan(v) || v == INFINITY;
                if (v > m) m = v;
            }
            nan |= m == -INFINITY; /* all -inf: -inf - -inf */
            double sum = 0;
            for (int64_t j = 0; j < s->n && !nan; j++) sum += exp(xc[j * s->inner] - m);
            for (int64_t j = 0; j < s->n; j++) {
                const double v = xc[j * s->inner], got = yc[j * s->inner];
                if (nan) {
                    CHECK(isnan(got), "column %lld of outer %lld has a NaN, +inf or only -inf: got %g, want NaN",
                          (long long)i, (long long)o, got);
                    continue;
                }
                if (v == -INFINITY) {
                    CHECK(got == (s->log ? -INFINITY : 0.0), "a -inf gave %g", got);
                    continue;
                }
                const double want = s->log ? v - m - log(sum) : exp(v - m) / sum;
                const double tol = s->log ? 2e-6 * (1 + fabs(want)) : 2e-6 * want + 1e-9;
                CHECK(fabs(got - want) <= tol, "[%lld, %lld, %lld] of [%lld, %lld, %lld]: got %.9g, want %.9g",
                      (long long)o, (long long)j, (long long)i, (long long)s->outer, (long long)s->n,
                      (long long)s->inner, got, want);
                if (!s->log && want > 1e-30 && fabs(got - want) / want > worst_rel) worst_rel = fabs(got - want) / want;
            }
        }
}

/* every way of running it gives the bytes of the first */
static void same_bytes(const pprt_softmax *s, const float *x, const float *y, size_t count, const char *what) {
    float *z = malloc(count * sizeof(float));
    check_case = what;
    for (int lanes = 8; lanes <= 16; lanes += 8) {
        if (lanes == 16 && pprt_cpu_isa() < PPRT_ISA_AVX512) continue;
        for (int t = 1; t <= 3; t++) {
            pprt_softmax_lanes(s, x, z, t, lanes);
            CHECK(memcmp(z, y, count * sizeof(float)) == 0, "%d lanes on %d threads: other bytes", lanes, t);
        }
        memcpy(z, x, count * sizeof(float));
        pprt_softmax_lanes(s, z, z, 2, lanes);
        CHECK(memcmp(z, y, count * sizeof(float)) == 0, "%d lanes in place: other bytes", lanes);
    }
    free(z);
}

static void one(pprt_softmax s, int specials, const char *what) {
    const size_t count = (size_t)(s.outer * s.n * s.inner);
    float *x = malloc(count * sizeof(float)), *y = malloc(count * sizeof(float));
    for (size_t k = 0; k < count; k++) x[k] = (float)(unit() * 60 - 30);
    for (size_t k = 0; k < count / 50; k++) x[(size_t)(unit() * (double)count)] = -INFINITY;
    if (specials && s.n > 1 && s.inner > 3) { /* columns 0-2 of the last outer: NaN, +inf, all -inf */
        const int64_t base = (s.outer - 1) * s.n * s.inner;
        x[base + (s.n / 2) * s.inner] = NAN;
        x[base + (s.n - 1) * s.inner + 1] = INFINITY;
        for (int64_t j = 0; j < s.n; j++) x[base + j * s.inner + 2] = -INFINITY;
    }
    pprt_softmax_run(&s, x, y, 1);
    check_case_of(&s, x, y, what);
    same_bytes(&s, x, y, count, what);
    free(x), free(y);
}

int main(void) {
    if (!pprt_softmax_cpu()) {
        printf("SKIP: this CPU has no AVX2+FMA\n");
        return 77;
    }
    char what[96];
    for (int c = 0; c < 300; c++) {
        pprt_softmax s = {.outer = 1 + (int64_t)(unit() * 4), .n = 1 + (int64_t)(unit() * 400),
                          .inner = 2 + (int64_t)(unit() * 69), .log = c % 2};
        snprintf(what, sizeof what, "%s [%lld, %lld, %lld]", s.log ? "LogSoftmax" : "Softmax", (long long)s.outer,
                 (long long)s.n, (long long)s.inner);
        one(s, c % 3 == 0, what);
    }
    /* large enough that the threads share the work: CoaT's [8 * 8, 196, 8]
     * and a segmentation head's [2, 21, 64 * 64] */
    one((pprt_softmax){.outer = 64, .n = 196, .inner = 8}, 1, "Softmax [64, 196, 8]");
    one((pprt_softmax){.outer = 2, .n = 21, .inner = 4096}, 1, "Softmax [2, 21, 4096]");
    one((pprt_softmax){.outer = 2, .n = 21, .inner = 4096, .log = true}, 1, "LogSoftmax [2, 21, 4096]");
    printf("worst relative error of Softmax: %.2g\n", worst_rel);
    return check_summary("test_softmax");
}
