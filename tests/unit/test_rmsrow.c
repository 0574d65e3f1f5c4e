/* test_rmsrow.c: RMSNormalization's rows, the reference kernel
 * (pprt_rms_rows, runtime/cpu/ref.h: eight double partials of the squares in
 * a fixed order) and the oneDNN executor's vector copy of it
 * (runtime/dnnl/kernels/rmsrow.c, at the ISA pprt_cpu_isa() gives: ctest runs
 * this once as the CPU is and once capped by ONEDNN_MAX_CPU_ISA=AVX2),
 * against the definition computed here in long double, y = x * scale /
 * sqrt(mean(x^2) + eps):
 *
 * - rows of 1, 3, 7, 8, 9, 17, 64, 255, 256 and 2048 elements (shorter than,
 *   equal to and longer than the eight partials, with and without a tail), 1
 *   to 5 rows, values N(0, 1), rows scaled by 1e-3 and 1e3, a row of zeros
 *   (eps alone), NaN and inf in some rows;
 * - the reference within 4 float ulps (2^-24) of |y| of the long double
 *   value, NaN exactly where the definition has NaN;
 * - the vector copy gives the reference's bits, element for element, whole
 *   and over two ranges of rows.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/rmsrow.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"
#include "runtime/cpu/ref.h"


static void test_shape(int64_t rows, int64_t inner, int kind) {
    char name[64];
    snprintf(name, sizeof name, "%lld rows of %lld, kind %d", (long long)rows, (long long)inner, kind);
    check_case = name;
    const size_t n = (size_t)(rows * inner);
    float *x = malloc(n * sizeof *x), *sc = malloc((size_t)inner * sizeof *sc), *yr = malloc(n * sizeof *yr),
          *yv = malloc(n * sizeof *yv), *yp = malloc(n * sizeof *yp);
    for (int64_t r = 0; r < rows; r++) {
        const double scale = kind == 1 ? 1e-3 : kind == 2 ? 1e3 : 1.0;
        for (int64_t i = 0; i < inner; i++) x[r * inner + i] = kind == 3 && r == 0 ? 0.0f : (float)(gauss() * scale);
        if (kind == 4 && r == rows - 1) x[r * inner + inner / 2] = r % 2 ? INFINITY : NAN;
    }
    for (int64_t i = 0; i < inner; i++) sc[i] = (float)(0.5 + uni());
    const float eps = 1e-6f;
    pprt_rms_rows(x, sc, yr, inner, eps, 0, rows);
    for (int64_t r = 0; r < rows; r++) {
        long double ss = 0;
        for (int64_t i = 0; i < inner; i++) ss += (long double)x[r * inner + i] * x[r * inner + i];
        const long double inv = 1.0L / sqrtl(ss / inner + eps);
        for (int64_t i = 0; i < inner; i++) {
            const long double want = x[r * inner + i] * inv * sc[i];
            const float got = yr[r * inner + i];
            if (isnan((double)want) || isnan(got)) {
                CHECK(isnan((double)want) == isnan(got), "row %lld element %lld: %g, the definition %Lg",
                      (long long)r, (long long)i, (double)got, want);
                continue;
            }
            CHECK(fabsl(got - want) <= 4 * 0x1p-24L * fabsl(want) + 1e-30L,
                  "row %lld element %lld: %.9g, the definition %.12Lg", (long long)r, (long long)i, (double)got, want);
        }
    }
    pprt_rmsrow(x, sc, yv, inner, eps, 0, rows);
    const int64_t mid = rows / 2;
    pprt_rmsrow(x, sc, yp, inner, eps, mid, rows);
    pprt_rmsrow(x, sc, yp, inner, eps, 0, mid);
    CHECK(memcmp(yv, yr, n * sizeof *yr) == 0, "the %s copy is not the reference's bits", pprt_rmsrow_isa());
    CHECK(memcmp(yp, yr, n * sizeof *yr) == 0, "the %s copy over two ranges is not the reference's bits",
          pprt_rmsrow_isa());
    free(x), free(sc), free(yr), free(yv), free(yp);
}

int main(void) {
    rng_state = 0x2545F4914F6CDD1Dull;
    printf("test_rmsrow: the vector copy at ISA %s\n", pprt_rmsrow_isa());
    const int64_t inners[] = {1, 3, 7, 8, 9, 17, 64, 255, 256, 2048};
    for (size_t k = 0; k < sizeof inners / sizeof inners[0]; k++)
        for (int kind = 0; kind < 5; kind++) test_shape(1 + (int64_t)((k + (size_t)kind) % 5), inners[k], kind);
    check_case = "";
    return check_summary("test_rmsrow");
}
