/* test_silu.c: our SiLU kernel (runtime/dnnl/kernels/silu.c) against x / (1 + e^-x)
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
 * - bf16 (pprt_silu_bf16, AVX-512 only): every one of the 65536 bf16 values
 *   within (2^-8 + 2e-4) |want| + 2e-36 of the exact SiLU of that value
 *   (the product rounded to bf16: half a unit, up to 2^-8 relative, plus
 *   the 1.4e-4 of its division-free sigmoid; below x = -88 the result is
 *   -0, where the exact value is under 2e-36 in size; measured: 3.95e-3
 *   relative), NaN -> NaN, +inf -> +inf, -inf -> NaN;
 *   the integer conversion and AVX512_BF16's instruction give the same
 *   bits (where the CPU has it), whatever the length and thread count.
 *
 * Exit 0 when all pass, 1 otherwise; 77 (skipped) on a CPU without AVX2+FMA. */
#include "runtime/isa.h"
#include "runtime/dnnl/kernels/silu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static double want_of(float x) { return (double)x / (1.0 + exp(-(double)x)); }

static float of_bf16(uint16_t h) {
    const uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* the bf16 kernel over every bf16 value */
static void check_bf16(void) {
    enum { M = 1 << 16 };
    uint16_t *x = malloc(M * sizeof *x), *y = malloc(M * sizeof *y), *y2 = malloc(M * sizeof *y2);
    for (int i = 0; i < M; i++) x[i] = (uint16_t)i;
    pprt_silu_bf16(x, y, M, 2);
    double worst = 0;
    for (int i = 0; i < M; i++) {
        const float xf = of_bf16(x[i]), got = of_bf16(y[i]);
        if (isnan(xf) || isinf(xf)) {
            CHECK(isnan(xf) || xf < 0 ? isnan(got) : got == xf, "bf16 silu(%g) = %g", xf, got);
            continue;
        }
        const double w = want_of(xf), err = fabs((double)got - w);
        if (err > (0x1p-8 + 2e-4) * fabs(w) + 2e-36) {
            CHECK(0, "bf16: x = %.9g: got %.9g, want %.9g", xf, got, w);
            if (check_failures > 10) break;
        }
        if (fabs(w) > 1e-30 && err / fabs(w) > worst) worst = err / fabs(w);
    }
    printf("silu bf16: worst relative error %.3g over all %d values\n", worst, M);
    for (int native = 0; native <= (pprt_silu_bf16_native() ? 1 : 0); native++)
        for (int threads = 1; threads <= 3; threads++) {
            pprt_silu_bf16_how(x, y2, M, threads, native);
            CHECK(memcmp(y, y2, M * sizeof *y) == 0, "bf16: %s conversion on %d threads differs",
                  native ? "AVX512_BF16's" : "the integer", threads);
        }
    for (int n = 1; n <= 40; n++) {
        uint16_t part[40];
        pprt_silu_bf16(x + 16257, part, (size_t)n, 1);
        CHECK(memcmp(part, y + 16257, (size_t)n * sizeof *part) == 0, "bf16: length %d differs", n);
    }
    memcpy(y2, x, M * sizeof *x);
    pprt_silu_bf16(y2, y2, M, 2);
    CHECK(memcmp(y, y2, M * sizeof *y) == 0, "bf16: in place differs");
    printf("silu bf16: %s\n", pprt_silu_bf16_native() ? "both conversions give the same bits"
                                                      : "the integer conversion only (no AVX512_BF16 here)");
    free(x), free(y), free(y2);
}

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
        if (pprt_silu_bf16_cpu()) check_bf16();
    } else {
        printf("silu: 8 lanes only (no AVX-512 here, or capped below it)\n");
    }
    free(x), free(y), free(y2);
    return check_summary("test_silu");
}
