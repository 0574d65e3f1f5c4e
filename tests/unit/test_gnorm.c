/* test_gnorm.c: our pp.GroupNorm kernel (runtime/dnnl/kernels/gnorm.c) against the
 * normalization computed here in double, and against the reference kernel.
 *
 * Three shapes: N 3, C 21 in 3 groups over 5 x 7 pixels (one part, a tail
 * of 3 pixels after the 8-pixel steps, 21 channels: not a multiple of 8 or
 * 16); N 2, C 12 in 4 groups over 37 x 41 pixels (24 parts of 64, the last
 * of 45); N 2, C 32 in one group over 10 x 10. Values with some channels
 * offset by 1000 (a mean far from zero: the variance must not cancel), one
 * group with a NaN, one with +inf, one sample's group constant (variance 0,
 * eps alone). Checks:
 * - every finite result within 2e-6 of (float)((x - mean) / sqrt(var +
 *   eps)) * scale + bias (moments in double here, two passes) relative to
 *   |t * scale| + |bias|; a group with NaN or inf all NaN;
 * - the reference kernel (pprt_ref_groupnorm, PPRT_GN_AFTER) within the
 *   same bound;
 * - the same values laid out plain, channels last, and in blocks of 8 and
 *   16 channels: the same bits for every element, mean and inverse
 *   deviation in every layout, on 1, 2 and 3 threads, in place and not
 *   (some channels mix magnitudes from 1e-6 to 1e6, so that another order
 *   of the sums shows in the moments' bits); blocked padding channels
 *   written 0.
 * - with a Relu or SiLU after it (plain, channels last, blocks of 16): the
 *   bits of the plain run's outputs with the activation applied after;
 * - a bf16 source (the values rounded to bf16): the bits the same values
 *   give as f32.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/gnorm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layouts.h"
#include "runtime/cpu/ref.h"
#include "runtime/dnnl/kernels/silu.h"

typedef struct {
    int64_t N, C, G, S;
} shape;

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double rnd(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

static void run_shape(const shape *h) {
    const int64_t N = h->N, C = h->C, G = h->G, S = h->S, Cg = C / G, total = N * C * S;
    const float eps = 1e-5f;
    float *x = malloc(sizeof(float) * (size_t)total), *sc = malloc(sizeof(float) * (size_t)C),
          *bi = malloc(sizeof(float) * (size_t)C), *want = malloc(sizeof(float) * (size_t)total),
          *ref = malloc(sizeof(float) * (size_t)total), *first = malloc(sizeof(float) * (size_t)total);
    for (int64_t c = 0; c < C; c++) sc[c] = (float)(rnd() * 4 - 2), bi[c] = (float)(rnd() * 2 - 1);
    /* magnitudes from 1e-6 to 1e6 in some channels, so that the order of the sums shows in their bits */
    for (int64_t i = 0; i < total; i++) {
        const int64_t c = i / S % C;
        x[i] = (float)(rnd() * 6 - 3) + (c % 5 == 1 ? 1000.0f : 0.0f);
        if (c % 4 == 2) x[i] *= i % 3 == 0 ? 1e-6f : i % 3 == 1 ? 1e6f : 1.0f;
    }
    /* sample 0: a NaN in group 0, +inf in the last group (when there are two); the last sample's group 0 constant */
    x[S / 2] = NAN;
    if (G > 1) x[(C - 1) * S] = INFINITY;
    for (int64_t i = 0; i < Cg * S; i++) x[(N - 1) * C * S + i] = 2.5f;
    /* the double reference, plain order */
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const float *xg = x + (n * C + g * Cg) * S;
            double m = 0, v = 0;
            for (int64_t i = 0; i < Cg * S; i++) m += xg[i];
            m /= (double)(Cg * S);
            for (int64_t i = 0; i < Cg * S; i++) v += ((double)xg[i] - m) * ((double)xg[i] - m);
            const double inv = 1.0 / sqrt(v / (double)(Cg * S) + eps);
            for (int64_t i = 0; i < Cg * S; i++) {
                const int64_t c = g * Cg + i / S;
                want[(n * C + g * Cg) * S + i] = (float)((xg[i] - m) * inv) * sc[c] + bi[c];
            }
        }
    pprt_ref_groupnorm(x, ref, N, C, S, G, eps, sc, bi, PPRT_GN_AFTER);
    bool have_first = false;
    double *stats = malloc(sizeof(double) * 2 * (size_t)(N * C)); /* the first run's mean and inv */
    const int64_t vecs[4] = {1, C, 8, 16};
    for (int v = 0; v < 4; v++) {
        const int64_t vec = vecs[v], n_el = N * lay_padded(h->C, vec) * S;
        pprt_layout l = lay_layout(h->N, h->C, h->S, vec);
        pprt_gnorm *gn;
        pp_err e = {0};
        if (pprt_gnorm_create(&l, G, eps, sc, bi, PPRT_GN_ACT_NONE, false, &gn, &e) != PP_OK) {
            CHECK_FAIL("create (C %lld, vec %lld): %s", (long long)C, (long long)vec, e.msg);
            continue;
        }
        float *in = calloc((size_t)n_el, sizeof(float)), *out = malloc(sizeof(float) * (size_t)n_el);
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t s = 0; s < S; s++) in[lay_at(h->C, h->S, vec, n, c, s)] = x[(n * C + c) * S + s];
        for (int threads = 1; threads <= 3; threads++)
            for (int inplace = 0; inplace < 2; inplace++) {
                float *y = inplace ? malloc(sizeof(float) * (size_t)n_el) : out;
                if (inplace) memcpy(y, in, sizeof(float) * (size_t)n_el);
                else memset(y, 0x7f, sizeof(float) * (size_t)n_el); /* padding must be written */
                pprt_gnorm_run(gn, inplace ? y : in, y, threads);
                int bad = 0;
                for (int64_t n = 0; n < N && bad < 3; n++)
                    for (int64_t c = 0; c < C && bad < 3; c++)
                        for (int64_t s = 0; s < S && bad < 3; s++) {
                            const int64_t p = (n * C + c) * S + s;
                            const float got = y[lay_at(h->C, h->S, vec, n, c, s)];
                            if (!have_first) {
                                const float w = want[p];
                                const double t = fabs((double)(w - bi[c]));
                                const double tol = 2e-6 * (t + fabs(bi[c])) + 1e-30;
                                bool ok = isnan(w) ? isnan(got) : fabs((double)got - w) <= tol;
                                bool ok_ref = isnan(w) ? isnan(ref[p]) : fabs((double)ref[p] - w) <= tol;
                                if (!ok || !ok_ref) {
                                    CHECK_FAIL("C %lld (%lld,%lld,%lld): %.9g, reference kernel %.9g, want %.9g",
                                               (long long)C, (long long)n, (long long)c, (long long)s, got, ref[p], w);
                                    bad++;
                                }
                                first[p] = got;
                            } else if (lay_bits(got) != lay_bits(first[p]) && !(isnan(got) && isnan(first[p]))) {
                                CHECK_FAIL("C %lld vec %lld, %d threads%s, (%lld,%lld,%lld): %.9g, plain gave %.9g",
                                           (long long)C, (long long)vec, threads, inplace ? ", in place" : "",
                                           (long long)n, (long long)c, (long long)s, got, first[p]);
                                bad++;
                            } else {
                                check_count++;
                            }
                        }
                for (int64_t n = 0; n < N; n++)
                    for (int64_t c = 0; c < C; c++) {
                        double m, iv, *f = stats + 2 * (n * C + c);
                        pprt_gnorm_stats(gn, n, c, &m, &iv);
                        if (!have_first) f[0] = m, f[1] = iv;
                        else if (memcmp(&m, &f[0], sizeof m) || memcmp(&iv, &f[1], sizeof iv))
                            CHECK_FAIL("C %lld vec %lld, %d threads: sample %lld channel %lld: mean %.17g inv %.17g, "
                                       "plain gave %.17g %.17g", (long long)C, (long long)vec, threads, (long long)n,
                                       (long long)c, m, iv, f[0], f[1]);
                    }
                have_first = true;
                if (vec == 8 || vec == 16)
                    for (int64_t i = 0; i < n_el; i++)
                        if (i % vec + (i / (S * vec)) % (lay_padded(h->C, vec) / vec) * vec >= C && y[i] != 0) {
                            CHECK_FAIL("C %lld vec %lld: padding element %lld is %g", (long long)C, (long long)vec,
                                       (long long)i, y[i]);
                            break;
                        }
                if (inplace) free(y);
            }
        free(in);
        free(out);
        pprt_gnorm_free(gn);
    }
    /* with a Relu or SiLU after it: exactly those of the plain run's outputs (silu.h's kernel), in
     * three layouts, on 2 threads */
    for (int act = PPRT_GN_ACT_RELU; act <= PPRT_GN_ACT_SILU; act++) {
        if (act == PPRT_GN_ACT_SILU && !pprt_silu_cpu()) continue;
        float *fx = malloc(sizeof(float) * (size_t)total);
        memcpy(fx, first, sizeof(float) * (size_t)total);
        if (act == PPRT_GN_ACT_SILU) pprt_silu_serial(fx, fx, (size_t)total);
        else
            for (int64_t i = 0; i < total; i++) fx[i] = fx[i] < 0.0f ? 0.0f : fx[i];
        const int64_t avecs[3] = {1, C, 16};
        for (int v = 0; v < 3; v++) {
            const int64_t vec = avecs[v], n_el = N * lay_padded(h->C, vec) * S;
            pprt_layout l = lay_layout(h->N, h->C, h->S, vec);
            pprt_gnorm *gn;
            pp_err e = {0};
            if (pprt_gnorm_create(&l, G, eps, sc, bi, (pprt_gn_act)act, false, &gn, &e) != PP_OK) {
                CHECK_FAIL("create (act %d): %s", act, e.msg);
                continue;
            }
            CHECK(pprt_gnorm_act(gn) == (pprt_gn_act)act, "act %d", (int)pprt_gnorm_act(gn));
            float *in = calloc((size_t)n_el, sizeof(float)), *y = malloc(sizeof(float) * (size_t)n_el);
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t s = 0; s < S; s++) in[lay_at(h->C, h->S, vec, n, c, s)] = x[(n * C + c) * S + s];
            pprt_gnorm_run(gn, in, y, 2);
            int bad = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t p = (n * C + c) * S + s;
                        const float got = y[lay_at(h->C, h->S, vec, n, c, s)];
                        if (lay_bits(got) != lay_bits(fx[p]) && !(isnan(got) && isnan(fx[p])) && bad++ < 3)
                            CHECK_FAIL("C %lld vec %lld act %d (%lld,%lld,%lld): %.9g, want %.9g", (long long)C,
                                       (long long)vec, act, (long long)n, (long long)c, (long long)s, got, fx[p]);
                    }
            CHECK(bad == 0, "C %lld vec %lld act %d: %d outputs differ", (long long)C, (long long)vec, act, bad);
            free(in), free(y);
            pprt_gnorm_free(gn);
        }
        free(fx);
    }
    /* a bf16 source: the bits of the same values as f32 (plain, channels last, blocks of 16; SiLU after) */
    {
        const int64_t bvecs[3] = {1, C, 16};
        for (int v = 0; v < 3; v++) {
            const int64_t vec = bvecs[v], n_el = N * lay_padded(h->C, vec) * S;
            pprt_layout l = lay_layout(h->N, h->C, h->S, vec);
            const pprt_gn_act act = pprt_silu_cpu() ? PPRT_GN_ACT_SILU : PPRT_GN_ACT_RELU;
            pprt_gnorm *g16, *g32;
            pp_err e = {0};
            if (pprt_gnorm_create(&l, G, eps, sc, bi, act, true, &g16, &e) != PP_OK ||
                pprt_gnorm_create(&l, G, eps, sc, bi, act, false, &g32, &e) != PP_OK) {
                CHECK_FAIL("create (bf16): %s", e.msg);
                continue;
            }
            uint16_t *in16 = calloc((size_t)n_el, sizeof(uint16_t));
            float *in32 = calloc((size_t)n_el, sizeof(float)), *y16 = malloc(sizeof(float) * (size_t)n_el),
                  *y32 = malloc(sizeof(float) * (size_t)n_el);
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t i = lay_at(h->C, h->S, vec, n, c, s);
                        uint32_t u = lay_bits(x[(n * C + c) * S + s]);
                        u = isnan(x[(n * C + c) * S + s]) ? u | 0x400000u : u + 0x7fffu + ((u >> 16) & 1u);
                        in16[i] = (uint16_t)(u >> 16);
                        u = (uint32_t)in16[i] << 16;
                        memcpy(&in32[i], &u, sizeof u);
                    }
            pprt_gnorm_run(g16, in16, y16, 2);
            pprt_gnorm_run(g32, in32, y32, 2);
            int bad = 0;
            for (int64_t i = 0; i < n_el; i++)
                if (lay_bits(y16[i]) != lay_bits(y32[i]) && !(isnan(y16[i]) && isnan(y32[i])) && bad++ < 3)
                    CHECK_FAIL("C %lld vec %lld bf16 source: element %lld: %.9g, its f32 copy gives %.9g",
                               (long long)C, (long long)vec, (long long)i, y16[i], y32[i]);
            CHECK(bad == 0, "C %lld vec %lld: %d outputs differ with a bf16 source", (long long)C, (long long)vec, bad);
            free(in16), free(in32), free(y16), free(y32);
            pprt_gnorm_free(g16);
            pprt_gnorm_free(g32);
        }
    }
    /* the NaN group and the inf group are all NaN, the constant group is bias alone */
    CHECK(isnan(first[Cg * S - 1]), "sample 0 group 0 (a NaN in it): %g", first[Cg * S - 1]);
    if (G > 1) CHECK(isnan(first[C * S - 1]), "sample 0's last group (+inf in it): %g", first[C * S - 1]);
    CHECK(first[(N - 1) * C * S] == bi[0], "a constant group: %g, want its bias %g", first[(N - 1) * C * S], bi[0]);
    free(x), free(sc), free(bi), free(want), free(ref), free(first), free(stats);
}

int main(void) {
    const shape shapes[3] = {{3, 21, 3, 35}, {2, 12, 4, 37 * 41}, {2, 32, 1, 100}};
    CHECK(pprt_gnorm_part(35) == 64 && pprt_gnorm_part(37 * 41) == 64 && pprt_gnorm_part(12544) == 392,
          "part sizes %lld %lld %lld", (long long)pprt_gnorm_part(35), (long long)pprt_gnorm_part(37 * 41),
          (long long)pprt_gnorm_part(12544));
    for (int k = 0; k < 3; k++) run_shape(&shapes[k]);
    return check_summary("gnorm");
}
