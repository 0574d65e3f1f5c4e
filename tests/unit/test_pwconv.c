/* test_pwconv.c: the AMX pointwise convolution (runtime/dnnl/kernels/pwconv.c)
 * against sums computed here in double over the same bf16 operands.
 *
 * Shapes with channel counts that are and are not multiples of the tiles
 * (K 16, 24, 40, 144, 1152; N 16, 24, 40, 96, 320), rows that end a block
 * short (1, 17, 49, 2 x 56 x 56 = 6272), each with no activation, SiLU and
 * Sigmoid; with the squeeze-and-excitation scale (per sample, in f32 and in
 * bf16; the product x * k rounded to bf16 first, as cscale.h rounds it,
 * which the reference does with pprt_bf16_round) and a residual (apart and
 * in place, y = z). Each output is within 2^-7 of the reference's
 * magnitude plus 1e-3 of the row's largest term (one bf16 rounding of the
 * result, SiLU's 1.4e-4 and the f32 sums' order), a NaN in the source
 * gives NaN through every activation (Sigmoid included), outputs beyond N
 * are untouched, and 1, 2 and 3 threads give the same bits.
 * On a CPU without AMX (or under ONEDNN_MAX_CPU_ISA below it) the kernel
 * is not used by pprt; the test says so and checks only that it declines
 * shapes it does not fit. Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/pwconv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/cpu/bf16.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct tcase {
    int64_t samples, spatial, K, N;
    pprt_pw_act act;
    int scale;   /* 0 none, 1 f32, 2 bf16 */
    int resid;   /* 0 none, 1 apart, 2 in place */
} tcase;

static void run_case(const tcase *t) {
    char name[160];
    snprintf(name, sizeof name, "rows %lldx%lld K %lld N %lld act %d scale %d residual %d", (long long)t->samples,
             (long long)t->spatial, (long long)t->K, (long long)t->N, (int)t->act, t->scale, t->resid);
    check_case = name;
    const int64_t rows = t->samples * t->spatial, K = t->K, N = t->N;
    uint16_t *x = malloc((size_t)(rows * K) * 2), *z = malloc((size_t)(rows * N + 8) * 2);
    uint16_t *y[3];
    float *w = malloc(sizeof(float) * (size_t)(N * K)), *b = malloc(sizeof(float) * (size_t)N);
    float *kf = malloc(sizeof(float) * (size_t)(t->samples * K));
    uint16_t *kh = malloc((size_t)(t->samples * K) * 2);
    for (int64_t i = 0; i < rows * K; i++) x[i] = pprt_bf16_round((float)(rnd() * 6 - 3));
    x[(rows - 1) * K + K / 2] = 0x7fc0; /* a NaN: the last row's outputs are NaN, whatever the activation */
    for (int64_t i = 0; i < rows * N + 8; i++) z[i] = pprt_bf16_round((float)(rnd() * 4 - 2));
    for (int64_t i = 0; i < N * K; i++) w[i] = (float)((rnd() * 2 - 1) / sqrt((double)K));
    for (int64_t i = 0; i < N; i++) b[i] = (float)(rnd() - 0.5);
    for (int64_t i = 0; i < t->samples * K; i++) {
        kh[i] = pprt_bf16_round((float)(rnd() * 1.5));
        kf[i] = t->scale == 2 ? pprt_bf16_float(kh[i]) : (float)(rnd() * 1.5);
    }
    const pprt_pw_shape sh = {.rows = rows, .K = K, .N = N, .act = t->act, .scale = t->scale > 0,
                              .k_bf16 = t->scale == 2, .rows_per_sample = t->spatial, .k_stride = K};
    pprt_pw *p = NULL;
    pp_err e = {0};
    CHECK(pprt_pw_create(&sh, w, b, 3, &p, &e) == PP_OK, "create: %s", e.msg);
    if (!p) goto out;
    const void *k = t->scale == 2 ? (const void *)kh : (const void *)kf;
    for (int th = 0; th < 3; th++) {
        y[th] = malloc((size_t)(rows * N + 8) * 2);
        if (t->resid == 2) memcpy(y[th], z, (size_t)(rows * N + 8) * 2);
        else for (int64_t i = 0; i < rows * N + 8; i++) y[th][i] = 0x7fc1; /* a NaN the kernel never writes */
        pprt_pw_run(p, x, y[th], t->scale ? k : NULL, t->resid == 2 ? y[th] : t->resid ? z : NULL, th + 1);
    }
    CHECK(!memcmp(y[0], y[1], (size_t)(rows * N + 8) * 2) && !memcmp(y[0], y[2], (size_t)(rows * N + 8) * 2),
          "1, 2 and 3 threads give different bits");
    CHECK(y[0][rows * N] == (t->resid == 2 ? z[rows * N] : 0x7fc1), "written past the output");
    int bad = 0;
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t s = r / t->spatial;
        for (int64_t n = 0; n < N; n++) {
            double acc = b[n], mag = fabs(b[n]);
            for (int64_t c = 0; c < K; c++) {
                float xv = pprt_bf16_float(x[r * K + c]);
                if (t->scale) xv = pprt_bf16_float(pprt_bf16_round(xv * kf[s * K + c]));
                const double term = (double)xv * pprt_bf16_float(pprt_bf16_round(w[n * K + c]));
                acc += term, mag += fabs(term);
            }
            if (t->act == PPRT_PW_SILU) acc = acc / (1 + exp(-acc));
            else if (t->act == PPRT_PW_SIGMOID) acc = 1 / (1 + exp(-acc));
            if (t->resid) acc += pprt_bf16_float(z[r * N + n]), mag += fabs(pprt_bf16_float(z[r * N + n]));
            const double got = pprt_bf16_float(y[0][r * N + n]);
            const double err = fabs(got - acc), tol = fabs(acc) / 128 + 1e-3 * mag;
            const bool ok = isnan(acc) ? isnan(got) != 0 : err <= tol;
            if (!ok && bad++ < 3)
                CHECK_FAIL("row %lld column %lld: %.6g, want %.6g (tolerance %.3g)", (long long)r, (long long)n, got,
                           acc, tol);
            if (err / (mag + 1e-30) > worst) worst = err / (mag + 1e-30);
        }
    }
    check_count++;
    if (bad) check_failures++;
    for (int th = 0; th < 3; th++) free(y[th]);
out:
    pprt_pw_free(p);
    free(x), free(z), free(w), free(b), free(kf), free(kh);
    check_case = "";
}

int main(void) {
    /* shapes it must decline */
    const pprt_pw_shape odd = {.rows = 4, .K = 3, .N = 16}, big = {.rows = 4, .K = 16, .N = 8192};
    CHECK(!pprt_pw_fits(&odd) && !pprt_pw_fits(&big), "fits an odd or too wide shape");
    pprt_pw *p = NULL;
    pp_err e = {0};
    CHECK(pprt_pw_create(&odd, NULL, NULL, 1, &p, &e) == PP_EUNSUP && !p, "an odd channel count not declined");
    if (!pprt_pw_cpu()) {
        printf("test_pwconv: this CPU has no AMX (or ONEDNN_MAX_CPU_ISA caps it): the kernel is not used; "
               "only its declines checked\n");
        return check_summary("test_pwconv");
    }
    static const tcase cases[] = {
        {1, 1, 16, 16, PPRT_PW_NONE, 0, 0},     {1, 17, 24, 96, PPRT_PW_SILU, 0, 0},
        {1, 49, 40, 24, PPRT_PW_SIGMOID, 0, 0}, {2, 49, 1152, 320, PPRT_PW_NONE, 1, 0},
        {1, 1, 1152, 48, PPRT_PW_SILU, 0, 0},   {2, 3136, 16, 96, PPRT_PW_SILU, 0, 0},
        {2, 196, 144, 24, PPRT_PW_NONE, 2, 1},  {3, 17, 144, 40, PPRT_PW_NONE, 1, 2},
        {2, 33, 96, 40, PPRT_PW_NONE, 2, 2},    {1, 64, 32, 16, PPRT_PW_NONE, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    return check_summary("test_pwconv");
}
