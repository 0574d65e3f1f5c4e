/* test_silu.c: our SiLU kernel (runtime/cpu/silu.c) against x / (1 + e^-x)
 * computed here in double.
 *
 * - 2^20 values evenly over [-90, 90] and 2^16 random ones over [-20, 20]:
 *   |got - want| <= 4e-7 |want| + 2e-36 (measured: 2.9e-7 relative; below
 *   x = -87.3 the result is -0, where the exact value is under 1.1e-36 in
 *   size);
 * - the values the reference kernel (x * (1 / (1 + expf(-x)))) gives exactly:
 *   0 -> 0, +inf -> +inf, -inf -> NaN, NaN -> NaN, x < -88 -> -0 or a value
 *   below 1e-36 in size, x > 20 -> x within 4e-7;
 * - lengths 1 to 40 (tails), and 1, 2 and 3 threads: the same bytes for
 *   every element whatever the length and the thread count; in place.
 *
 * Exit 0 when all pass, 1 otherwise; 77 (skipped) on a CPU without AVX2+FMA. */
#include "runtime/cpu/isa.h"
#include "runtime/cpu/silu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static double want_of(float x) { return (double)x / (1.0 + exp(-(double)x)); }

int main(void) {
    if (!pprt_silu_cpu()) {
        printf("SKIP: this CPU has no AVX2+FMA\n");
        return 77;
    }
    enum { N = (1 << 20) + (1 << 16) };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *y2 = malloc(N * sizeof(float));
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < (1 << 20); i++) x[i] = -90.0f + 180.0f * (float)i / (float)(1 << 20);
    for (int i = 1 << 20; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 40.0 - 20.0);
    }
    pprt_silu(x, y, N, 2);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        const double w = want_of(x[i]), err = fabs((double)y[i] - w);
        if (err > 4e-7 * fabs(w) + 2e-36) {
            CHECK(0, "x = %.9g: got %.9g, want %.9g", x[i], y[i], w);
            if (check_failures > 10) break;
        }
        if (fabs(w) > 1e-30 && err / fabs(w) > worst) worst = err / fabs(w);
    }
    printf("silu: worst relative error %.3g over %d values\n", worst, N);

    /* the reference kernel's special values */
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -88.5f, -1e30f, 20.5f, 1e30f};
    float o[9];
    pprt_silu(sp, o, 9, 1);
    CHECK(o[0] == 0 && o[1] == 0, "silu(+-0) = %g, %g", o[0], o[1]);
    CHECK(isinf(o[2]) && o[2] > 0, "silu(+inf) = %g", o[2]);
    CHECK(isnan(o[3]), "silu(-inf) = %g, want NaN (as x * sigmoid(x))", o[3]);
    CHECK(isnan(o[4]), "silu(NaN) = %g", o[4]);
    CHECK(fabsf(o[5]) < 1e-36f && fabsf(o[6]) < 1e-36f, "silu(-88.5) = %g, silu(-1e30) = %g", o[5], o[6]);
    CHECK(fabsf(o[7] - 20.5f) <= 4e-7f * 20.5f && o[8] == 1e30f, "silu(20.5) = %.9g, silu(1e30) = %g", o[7], o[8]);

    /* lengths and threads: the same bytes; in place */
    for (int threads = 1; threads <= 3; threads++) {
        pprt_silu(x, y2, N, threads);
        CHECK(memcmp(y, y2, N * sizeof(float)) == 0, "%d threads differ from 2", threads);
    }
    for (int n = 1; n <= 40; n++) {
        float part[40];
        pprt_silu(x + 3, part, (size_t)n, 1);
        CHECK(memcmp(part, y + 3, (size_t)n * sizeof(float)) == 0, "length %d differs", n);
    }
    memcpy(y2, x, N * sizeof(float));
    pprt_silu(y2, y2, N, 2);
    CHECK(memcmp(y, y2, N * sizeof(float)) == 0, "in place differs");
    /* 8 and 16 lanes: the same arithmetic, the same bits (special values too) */
    if (pprt_cpu_isa() >= PPRT_ISA_AVX512) {
        for (int lanes = 8; lanes <= 16; lanes += 8) {
            pprt_silu_lanes(x, y2, N, 2, lanes);
            CHECK(memcmp(y, y2, N * sizeof(float)) == 0, "%d lanes differ from pprt_silu's", lanes);
            float o2[9];
            pprt_silu_lanes(sp, o2, 9, 1, lanes);
            CHECK(memcmp(o, o2, sizeof o) == 0, "%d lanes: special values differ", lanes);
        }
        printf("silu: 8 and 16 lanes give the same bits\n");
    } else {
        printf("silu: 8 lanes only (no AVX-512 here, or capped below it)\n");
    }
    free(x), free(y), free(y2);
    return check_summary("test_silu");
}
