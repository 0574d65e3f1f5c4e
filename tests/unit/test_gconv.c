/* test_gconv.c: our grouped convolution kernel (runtime/dnnl/kernels/gconv.c) against
 * the convolution computed here in double, term by term in the usual order
 * (input channel j of the group, then kh, then kw).
 *
 * Five shapes: 2 channels a group (24 channels, 3x3, stride 1, pad 1; and
 * 64 channels at stride 2 over an odd size, dla46x_c's kind), 4 a group
 * (32 channels, 3x3 stride 2 pad 1, the output's last column reaching past
 * the input), 8 a group (32 channels, a 5x3 kernel with dilation 2, strides
 * 1 and 2, pads 2 and 1), and a 3-pixel-wide input (no run of four columns
 * with every tap inside). Checks:
 * - every result of the portable loop within 1e-6 of the double sum,
 *   relative to the sum of the terms' magnitudes;
 * - the same bits in every layout the kernel takes (plain on the portable
 *   loop; channels last, blocks of 8 and 16 on the portable loop and on 8
 *   and 16 lanes where the CPU has them), on 1, 2 and 3 threads; padding
 *   channels of a blocked output written 0 (the output filled with NaN
 *   first);
 * - Relu [0, inf) and Clip [-0.5, 0.75]: the clamp of the unclamped bits,
 *   a NaN kept;
 * - a bf16 source (values exact in bf16): the bits of the same values as
 *   f32, in plain, channels-last and 16-blocked layouts, every width;
 * - an infinity in one input channel: NaN or infinity only in outputs of
 *   that channel's group, every other output the same bits as without it.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/gconv.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layouts.h"
#include "runtime/isa.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static double rnd(void) { /* uniform in [-1, 1) */
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) / 4503599627370496.0 - 1.0;
}

/* x (plain) into layout vec, padding channels 0 */
static float *lay(const float *x, int64_t N, int64_t C, int64_t S, int64_t vec) {
    float *y = calloc((size_t)(N * lay_padded(C, vec) * S), sizeof(float));
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) y[lay_at(C, S, vec, n, c, s)] = x[(n * C + c) * S + s];
    return y;
}

/* the kernel over plain x (laid out as vec_in), y read back as plain; NULL
 * where the kernel refuses the combination. *pad_ok: padding written 0. */
static float *run_src(const pprt_gconv_shape *s, const float *x, const float *w, const float *b, float lo, float hi,
                      int64_t vec_in, int64_t vec_out, int lanes, int threads, bool bf16, bool *pad_ok) {
    const int64_t S = s->H * s->W, OS = s->OH * s->OW, C = s->C;
    const pprt_layout li = lay_layout(s->N, C, S, vec_in), lo_ = lay_layout(s->N, C, OS, vec_out);
    pprt_gconv *g;
    pp_err e = {0};
    if (pprt_gconv_create(s, &li, &lo_, w, b, lo, hi, bf16, lanes, &g, &e) != PP_OK) return NULL;
    float *xi = lay(x, s->N, C, S, vec_in);
    if (bf16) { /* the upper halves (x holds values exact in bf16), in place */
        const size_t nx = (size_t)(s->N * lay_padded(C, vec_in) * S);
        uint16_t *h = (uint16_t *)xi;
        for (size_t i = 0; i < nx; i++) h[i] = (uint16_t)(lay_bits(xi[i]) >> 16);
    }
    const size_t ny = (size_t)(s->N * lay_padded(C, vec_out) * OS);
    float *yo = malloc(ny * sizeof(float));
    for (size_t i = 0; i < ny; i++) yo[i] = NAN;
    pprt_gconv_run(g, xi, yo, threads);
    float *y = malloc((size_t)(s->N * C * OS) * sizeof(float));
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < OS; p++) y[(n * C + c) * OS + p] = yo[lay_at(C, OS, vec_out, n, c, p)];
    *pad_ok = true;
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t c = C; c < lay_padded(C, vec_out); c++)
            for (int64_t p = 0; p < OS; p++) *pad_ok = *pad_ok && lay_bits(yo[lay_at(C, OS, vec_out, n, c, p)]) == 0;
    pprt_gconv_free(g);
    free(xi);
    free(yo);
    return y;
}

static float *run(const pprt_gconv_shape *s, const float *x, const float *w, const float *b, float lo, float hi,
                  int64_t vec_in, int64_t vec_out, int lanes, int threads, bool *pad_ok) {
    return run_src(s, x, w, b, lo, hi, vec_in, vec_out, lanes, threads, false, pad_ok);
}

static void run_shape(const char *name, const pprt_gconv_shape *s) {
    check_case = name;
    const int64_t C = s->C, cpg = s->cpg, S = s->H * s->W, OS = s->OH * s->OW, T = s->KH * s->KW;
    const size_t nx = (size_t)(s->N * C * S), ny = (size_t)(s->N * C * OS), nw = (size_t)(C * cpg * T);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc((size_t)C * sizeof(float));
    for (size_t i = 0; i < nx; i++) x[i] = (float)rnd();
    for (size_t i = 0; i < nw; i++) w[i] = (float)(rnd() * 0.5);
    for (int64_t c = 0; c < C; c++) b[c] = (float)(rnd() * 0.1);
    bool pad_ok;
    float *base = run(s, x, w, b, -INFINITY, INFINITY, 1, 1, 1, 1, &pad_ok);
    CHECK(base != NULL, "the portable loop refused the shape");
    if (!base) return;
    /* against double */
    int bad = 0;
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < s->OH; oh++)
                for (int64_t ow = 0; ow < s->OW; ow++) {
                    double acc = b[c], mag = fabs(b[c]);
                    for (int64_t j = 0; j < cpg; j++)
                        for (int64_t kh = 0; kh < s->KH; kh++)
                            for (int64_t kw = 0; kw < s->KW; kw++) {
                                const int64_t ih = oh * s->sh - s->ph + kh * s->dh, iw = ow * s->sw - s->pw + kw * s->dw;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue;
                                const double t = (double)w[((c * cpg + j) * s->KH + kh) * s->KW + kw] *
                                                 x[(n * C + c / cpg * cpg + j) * S + ih * s->W + iw];
                                acc += t, mag += fabs(t);
                            }
                    const float y = base[(n * C + c) * OS + oh * s->OW + ow];
                    if (!(fabs(y - acc) <= 1e-6 * mag + 1e-30) && bad++ < 5)
                        CHECK_FAIL("y[%lld,%lld,%lld,%lld] = %.9g, double %.9g (terms %.3g)", (long long)n, (long long)c,
                                   (long long)oh, (long long)ow, y, acc, mag);
                }
    CHECK(bad == 0, "%d outputs off the double sum", bad);
    /* every layout, lane count and thread count: the same bits */
    const int64_t vecs[] = {1, C, 8, 16};
    const int lanes_all[] = {1, 8, 16};
    int runs = 0;
    for (int li = 0; li < 3; li++) {
        const int lanes = lanes_all[li];
        if (lanes == 8 && !pprt_gconv_cpu()) continue;
        if (lanes == 16 && pprt_cpu_isa() < PPRT_ISA_AVX512) continue;
        for (int vi = 0; vi < 4; vi++)
            for (int vo = 0; vo < 4; vo++) {
                if (lanes > 1 && (vecs[vi] == 1 || vecs[vo] == 1)) continue;
                for (int t = 1; t <= 3; t++) {
                    float *y = run(s, x, w, b, -INFINITY, INFINITY, vecs[vi], vecs[vo], lanes, t, &pad_ok);
                    const bool takes = vecs[vi] % (lanes > 1 ? lanes : 1) == 0 && vecs[vo] % (lanes > 1 ? lanes : 1) == 0;
                    CHECK((y != NULL) == takes, "lanes %d, in %lld, out %lld: %s", lanes, (long long)vecs[vi],
                          (long long)vecs[vo], y ? "taken" : "refused");
                    if (!y) continue;
                    runs++;
                    size_t diff = 0;
                    for (size_t i = 0; i < ny; i++) diff += lay_bits(y[i]) != lay_bits(base[i]);
                    CHECK(diff == 0, "lanes %d, in %lld, out %lld, %d threads: %zu outputs differ in bits", lanes,
                          (long long)vecs[vi], (long long)vecs[vo], t, diff);
                    CHECK(pad_ok, "lanes %d, out %lld: padding not 0", lanes, (long long)vecs[vo]);
                    free(y);
                }
            }
    }
    CHECK(runs >= 12, "only %d runs compared", runs);
    /* clamps, with a NaN in the input */
    const int best = pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : pprt_gconv_cpu() ? 8 : 1;
    const int64_t vb = best == 1 ? 1 : 16;
    float *xn = malloc(nx * sizeof(float));
    memcpy(xn, x, nx * sizeof(float));
    xn[S / 2 + 1] = NAN; /* sample 0, channel 0 (an odd column: the dilated case reads no even one) */
    float *un = run(s, xn, w, b, -INFINITY, INFINITY, 1, 1, 1, 2, &pad_ok);
    const float bounds[2][2] = {{0.0f, INFINITY}, {-0.5f, 0.75f}};
    for (int k = 0; k < 2; k++) {
        const float lo = bounds[k][0], hi = bounds[k][1];
        float *y = run(s, xn, w, b, lo, hi, vb, vb, best, 2, &pad_ok);
        CHECK(y != NULL, "clamp run refused");
        size_t diff = 0, nans = 0;
        for (size_t i = 0; y && i < ny; i++) {
            const float u = un[i], want = u < lo ? lo : u > hi ? hi : u;
            diff += lay_bits(y[i]) != lay_bits(want);
            nans += isnan(y[i]);
        }
        CHECK(diff == 0, "clamp [%g, %g]: %zu outputs are not the clamp of the unclamped bits", lo, hi, diff);
        CHECK(nans > 0, "clamp [%g, %g]: the NaN was lost", lo, hi);
        free(y);
    }
    /* a bf16 source: the bits its values give as f32 (x rounded to bf16 by truncation: exact either way) */
    float *xh = malloc(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) {
        const uint32_t u = lay_bits(x[i]) & 0xFFFF0000u;
        memcpy(&xh[i], &u, 4);
    }
    float *want = run(s, xh, w, b, 0.0f, INFINITY, 1, 1, 1, 1, &pad_ok);
    const int64_t vh[] = {1, C, 16};
    for (int k = 0; k < 3; k++)
        for (int lanes = 1; lanes <= best; lanes *= (lanes == 1 ? 8 : 2)) {
            float *y = run_src(s, xh, w, b, 0.0f, INFINITY, vh[k], vh[k], lanes, 2, true, &pad_ok);
            if (!y) continue;
            size_t diff = 0;
            for (size_t i = 0; i < ny; i++) diff += lay_bits(y[i]) != lay_bits(want[i]);
            CHECK(diff == 0, "bf16 source, layout %lld, lanes %d: %zu outputs differ from the f32 source's", (long long)vh[k],
                  lanes, diff);
            free(y);
        }
    free(want), free(xh);
    /* an infinity stays in its group */
    float *xi = malloc(nx * sizeof(float));
    memcpy(xi, x, nx * sizeof(float));
    const int64_t cinf = cpg + 1; /* group 1 */
    xi[(0 * C + cinf) * S + S / 2 + 1] = INFINITY;
    float *yi = run(s, xi, w, b, -INFINITY, INFINITY, vb, vb, best, 2, &pad_ok);
    size_t leaked = 0, nonfinite = 0;
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < OS; p++) {
                const size_t i = (size_t)((n * C + c) * OS + p);
                if (n == 0 && c / cpg == cinf / cpg) nonfinite += !isfinite(yi[i]);
                else leaked += lay_bits(yi[i]) != lay_bits(base[i]);
            }
    CHECK(leaked == 0, "an infinity in channel %lld changed %zu outputs of other groups", (long long)cinf, leaked);
    CHECK(nonfinite > 0, "the infinity reached no output of its group");
    free(yi), free(xi), free(un), free(xn), free(base), free(x), free(w), free(b);
}

int main(void) {
    const struct {
        const char *name;
        pprt_gconv_shape s;
    } cases[] = {
        /* N, C, cpg, H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw */
        {"cpg2 3x3 s1", {2, 24, 2, 9, 11, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1}},
        {"cpg2 3x3 s2", {1, 64, 2, 15, 13, 8, 7, 3, 3, 2, 2, 1, 1, 1, 1}},
        {"cpg4 3x3 s2 past the end", {2, 32, 4, 10, 10, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1}},
        {"cpg8 5x3 dilated", {1, 32, 8, 12, 14, 8, 8, 5, 3, 1, 2, 2, 2, 2, 1}},
        {"cpg2 narrow", {3, 16, 2, 6, 3, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_shape(cases[i].name, &cases[i].s);
    check_case = "";
    return check_summary("test_gconv");
}
