/* gnorm.c: see gnorm.h. Three passes over a round of samples (as many as
 * fit in about 4 MiB, at least one, so that the second and third passes
 * read from the cache): the sums of x, the sums of (x - mean)^2, the
 * output. A task is one sample's part of P pixels, all channels. Plain C
 * loops that the compiler vectorizes (built for AVX-512, AVX2 and the
 * baseline); nothing is reassociated, so every build gives the bits of the
 * C source. */
#include "gnorm.h"

#include "../../cpu/bf16.h"
#include "silu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

#define CH 8                     /* plain: channels summed side by side */
#define ROUND_BYTES (4u << 20)   /* samples per round: about this many bytes of x */

struct pprt_gnorm {
    pprt_layout l;
    int64_t G, Cg, cp, P, parts, round;
    pprt_gn_act act;
    bool bf16;
    double eps;
    float *sc, *bi;       /* cp each; 0 for the padding channels */
    double *part;         /* round * parts * cp: each part's sum per channel */
    double *mean, *inv;   /* round * cp: the channel's group's */
};

int64_t pprt_gnorm_part(int64_t S) {
    int64_t p = (S + 31) / 32;
    p = (p + 7) / 8 * 8;
    return p < 64 ? 64 : p;
}

pp_status pprt_gnorm_create(const pprt_layout *l, int64_t groups, float eps, const float *scale,
                            const float *bias, pprt_gn_act act, bool bf16, pprt_gnorm **out, pp_err *err) {
    *out = NULL;
    if (l->N < 1 || l->C < 1 || l->S < 1 || l->vec < 1 || groups < 1 || l->C % groups)
        return PP_FAIL(err, PP_EUNSUP, "GroupNormalization kernel: layout");
    if (act == PPRT_GN_ACT_SILU && !pprt_silu_cpu())
        return PP_FAIL(err, PP_EUNSUP, "GroupNormalization kernel: SiLU needs AVX2 and FMA");
    const int64_t cp = l->vec > 1 ? (l->C + l->vec - 1) / l->vec * l->vec : l->C, P = pprt_gnorm_part(l->S);
    const int64_t parts = (l->S + P - 1) / P, bytes = cp * l->S * (int64_t)sizeof(float);
    int64_t round = bytes >= (int64_t)ROUND_BYTES ? 1 : (int64_t)ROUND_BYTES / bytes;
    if (round > l->N) round = l->N;
    pprt_gnorm *g = calloc(1, sizeof *g);
    if (g) {
        g->sc = calloc((size_t)cp * 2, sizeof(float));
        g->part = calloc((size_t)(round * parts * cp + 2 * round * cp), sizeof(double));
    }
    if (!g || !g->sc || !g->part) {
        if (g) free(g->sc), free(g->part);
        free(g);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    *g = (pprt_gnorm){.l = *l, .G = groups, .Cg = l->C / groups, .cp = cp, .P = P, .parts = parts,
                      .round = round, .act = act, .bf16 = bf16, .eps = eps, .sc = g->sc, .bi = g->sc + cp,
                      .part = g->part};
    g->mean = g->part + round * parts * cp;
    g->inv = g->mean + round * cp;
    memcpy(g->sc, scale, sizeof(float) * (size_t)l->C);
    memcpy(g->bi, bias, sizeof(float) * (size_t)l->C);
    *out = g;
    return PP_OK;
}

/* The terms of the two sums: x, and (x - mean)^2 (mc: the channel's mean);
 * the mean of channel c in each: none, m[c] */
#define TERM_X(v, mc) ((double)(v))
#define TERM_D2(v, mc) (((double)(v) - (mc)) * ((double)(v) - (mc)))
#define MEAN_X(c) 0.0
#define MEAN_D2(c) m[c]

/* Sample n's part p: into out[c] for every channel, the sum of TERM over
 * its pixels one after another (gnorm.h). Plain: eight channels at a time,
 * each its own sum (a vector of neighbouring pixels would split a channel's
 * sum); the other layouts hold a pixel's channels side by side. */
#define PART_SUMS(TERM, MEAN, T)                                                                              \
    const pprt_layout *l = &g->l;                                                                      \
    const int64_t s0 = p * g->P, s1 = s0 + g->P < l->S ? s0 + g->P : l->S;                                  \
    const T *xn = (const T *)x + n * l->stride_n;                                                            \
    if (l->vec == 1) {                                                                                       \
        int64_t c = 0;                                                                                       \
        for (; c + CH <= l->C; c += CH) {                                                                    \
            double a[CH] = {0}, mc[CH];                                                                      \
            (void)mc;                                                                                        \
            for (int k = 0; k < CH; k++) mc[k] = MEAN(c + k);                                                \
            for (int64_t s = s0; s < s1; s++)                                                                \
                for (int k = 0; k < CH; k++) a[k] += TERM(LD(xn[(c + k) * l->stride_c + s]), mc[k]);         \
            for (int k = 0; k < CH; k++) out[c + k] = a[k];                                                  \
        }                                                                                                    \
        for (; c < l->C; c++) {                                                                              \
            double a = 0;                                                                                    \
            const double mc = MEAN(c);                                                                       \
            (void)mc;                                                                                        \
            for (int64_t s = s0; s < s1; s++) a += TERM(LD(xn[c * l->stride_c + s]), mc);                    \
            out[c] = a;                                                                                      \
        }                                                                                                    \
        return;                                                                                              \
    }                                                                                                        \
    const int64_t v = l->vec;                                                                                \
    memset(out, 0, sizeof(double) * (size_t)g->cp);                                                          \
    for (int64_t c0 = 0; c0 < g->cp; c0 += v) {                                                              \
        const T *xb = xn + c0 / v * l->stride_c;                                                             \
        double *a = out + c0;                                                                                \
        for (int64_t s = s0; s < s1; s++) {                                                                  \
            const T *xs = xb + s * v;                                                                        \
            for (int64_t j = 0; j < v; j++) a[j] += TERM(LD(xs[j]), MEAN(c0 + j));                           \
        }                                                                                                    \
    }

/* act over n floats of y in place */
static void activate(pprt_gn_act act, float *y, int64_t n) {
    if (act == PPRT_GN_ACT_SILU) pprt_silu_serial(y, y, (size_t)n);
    else if (act == PPRT_GN_ACT_RELU)
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

/* Sample n's part p of the output, then act; m, iv: per channel */
#define OUTPUTS(T)                                                                                           \
    const pprt_layout *l = &g->l;                                                                      \
    const int64_t s0 = p * g->P, s1 = s0 + g->P < l->S ? s0 + g->P : l->S;                                  \
    const float *sc = g->sc, *bi = g->bi;                                                                    \
    const T *xt = (const T *)x;                                                                              \
    if (l->vec == 1) {                                                                                       \
        for (int64_t c = 0; c < l->C; c++) {                                                                 \
            const int64_t off = n * l->stride_n + c * l->stride_c;                                           \
            const T *xc = xt + off;                                                                          \
            float *yc = y + off;                                                                             \
            const double mc = m[c], ic = iv[c];                                                              \
            const float s = sc[c], b = bi[c];                                                                \
            for (int64_t i = s0; i < s1; i++) yc[i] = (float)(((double)LD(xc[i]) - mc) * ic) * s + b;        \
            activate(g->act, yc + s0, s1 - s0);                                                              \
        }                                                                                                    \
        return;                                                                                              \
    }                                                                                                        \
    const int64_t v = l->vec;                                                                                \
    for (int64_t c0 = 0; c0 < g->cp; c0 += v) {                                                              \
        const int64_t off = n * l->stride_n + c0 / v * l->stride_c;                                          \
        const int64_t real = l->C - c0 < v ? l->C - c0 : v; /* channels of this block that are not padding */ \
        for (int64_t s = s0; s < s1; s++) {                                                                  \
            const T *xs = xt + off + s * v;                                                                  \
            float *ys = y + off + s * v;                                                                     \
            for (int64_t j = 0; j < v; j++)                                                                  \
                ys[j] = (float)(((double)LD(xs[j]) - m[c0 + j]) * iv[c0 + j]) * sc[c0 + j] + bi[c0 + j];     \
            for (int64_t j = real; j < v; j++) ys[j] = 0.0f;                                                 \
        }                                                                                                    \
        activate(g->act, y + off + s0 * v, (s1 - s0) * v); /* the padding: Relu(0) = SiLU(0) = 0 */          \
    }

/* The three passes' functions for f32 and for bf16 sources */
#define LD(v) (v)
CLONES static void sums_x(const pprt_gnorm *g, const void *x, int64_t n, int64_t p, double *out) {
    PART_SUMS(TERM_X, MEAN_X, float)
}
CLONES static void sums_d2(const pprt_gnorm *g, const void *x, int64_t n, int64_t p, const double *m, double *out) {
    PART_SUMS(TERM_D2, MEAN_D2, float)
}
CLONES static void outputs(const pprt_gnorm *g, const void *x, float *y, int64_t n, int64_t p, const double *m,
                           const double *iv) {
    OUTPUTS(float)
}
#undef LD

#define LD(v) pprt_bf16_float(v)
CLONES static void sums_x_bf16(const pprt_gnorm *g, const void *x, int64_t n, int64_t p, double *out) {
    PART_SUMS(TERM_X, MEAN_X, uint16_t)
}
CLONES static void sums_d2_bf16(const pprt_gnorm *g, const void *x, int64_t n, int64_t p, const double *m,
                                double *out) {
    PART_SUMS(TERM_D2, MEAN_D2, uint16_t)
}
CLONES static void outputs_bf16(const pprt_gnorm *g, const void *x, float *y, int64_t n, int64_t p, const double *m,
                                const double *iv) {
    OUTPUTS(uint16_t)
}
#undef LD

/* Round sample i: from the parts' sums, per channel its group's mean (var:
 * false) or 1 / sqrt(variance + eps) (var: true) into dst. */
static void finish(const pprt_gnorm *g, int64_t i, bool var, double *dst) {
    const double count = (double)(g->Cg * g->l.S);
    const double *part = g->part + i * g->parts * g->cp;
    for (int64_t gi = 0; gi < g->G; gi++) {
        double t = 0;
        for (int64_t c = gi * g->Cg; c < (gi + 1) * g->Cg; c++) {
            double s = 0;
            for (int64_t p = 0; p < g->parts; p++) s += part[p * g->cp + c];
            t += s;
        }
        const double r = var ? 1.0 / sqrt(t / count + g->eps) : t / count;
        for (int64_t c = gi * g->Cg; c < (gi + 1) * g->Cg; c++) dst[c] = r;
    }
}

void pprt_gnorm_run(pprt_gnorm *g, const void *x, float *y, int threads) {
    const int64_t N = g->l.N, parts = g->parts, cp = g->cp;
    if (threads < 1) threads = 1;
    for (int64_t n0 = 0; n0 < N; n0 += g->round) {
        const int64_t nb = N - n0 < g->round ? N - n0 : g->round, tasks = nb * parts;
        const int t = tasks > 1 ? threads : 1;
        for (int pass = 0; pass < 3; pass++) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(t) schedule(static)
#endif
            for (int64_t k = 0; k < tasks; k++) {
                const int64_t i = k / parts, p = k % parts;
                double *out = g->part + k * cp;
                if (pass == 0) (g->bf16 ? sums_x_bf16 : sums_x)(g, x, n0 + i, p, out);
                else if (pass == 1) (g->bf16 ? sums_d2_bf16 : sums_d2)(g, x, n0 + i, p, g->mean + i * cp, out);
                else (g->bf16 ? outputs_bf16 : outputs)(g, x, y, n0 + i, p, g->mean + i * cp, g->inv + i * cp);
            }
            for (int64_t i = 0; pass < 2 && i < nb; i++) finish(g, i, pass == 1, (pass ? g->inv : g->mean) + i * cp);
        }
    }
}

pprt_gn_act pprt_gnorm_act(const pprt_gnorm *g) { return g->act; }

void pprt_gnorm_stats(const pprt_gnorm *g, int64_t i, int64_t c, double *mean, double *inv) {
    *mean = g->mean[i * g->cp + c];
    *inv = g->inv[i * g->cp + c];
}

size_t pprt_gnorm_bytes(const pprt_gnorm *g) {
    return sizeof *g + sizeof(float) * (size_t)(2 * g->cp) +
           sizeof(double) * (size_t)(g->round * g->parts * g->cp + 2 * g->round * g->cp);
}

void pprt_gnorm_free(pprt_gnorm *g) {
    if (!g) return;
    free(g->sc);
    free(g->part);
    free(g);
}
