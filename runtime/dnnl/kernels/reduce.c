/* reduce.c: reductions over [outer, n, inner] (reduce.h). A task is one
 * output row (inner 1: n neighbouring floats, 16 partial sums) or one block
 * of up to COLS columns of an outer index (n rows of them, a sum per
 * column; with `lanes`, 16 partial sums per column as in a row). Plain C
 * loops that the compiler vectorizes; no reassociation, so the bits are those
 * of the C source whatever the ISA. */
#include "reduce.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../cpu/bf16.h"

#define LANES 16
#define COLS 64

bool pprt_reduce_plan(const int64_t *dims, int rank, const bool *mask, int kind, pprt_reduce *p) {
    memset(p, 0, sizeof *p);
    if (kind <= PPRT_RED_NONE || kind > PPRT_RED_MIN || rank < 0) return false;
    int first = -1, last = -1;
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] <= 0) return false;
        if (!mask[d] || dims[d] == 1) continue;
        if (first < 0) first = d;
        last = d;
    }
    for (int d = 0; d < rank; d++) {
        if (first >= 0 && d >= first && d <= last) {
            if (!mask[d] && dims[d] != 1) return false; /* a kept axis inside the run */
            n *= dims[d];
        } else if (first >= 0 && d > last) {
            inner *= dims[d];
        } else {
            outer *= dims[d];
        }
    }
    *p = (pprt_reduce){.kind = kind, .outer = outer, .n = n, .inner = inner};
    return true;
}

bool pprt_reduce_channels(pprt_reduce *p, int64_t N, int64_t C, int64_t vec, bool bf16) {
    if (p->inner != 1 || p->n < 2 || p->outer != N * C || vec < 2 || C % vec) return false;
    p->outer = N * (C / vec);
    p->inner = vec;
    p->lanes = true;
    p->bf16 = bf16;
    return true;
}

static inline float finish(int kind, double acc, int64_t n) {
    switch (kind) {
    case PPRT_RED_MEAN: return (float)(acc / (double)n);
    case PPRT_RED_L2: return (float)sqrt(acc);
    default: return (float)acc;
    }
}

/* The loops below, one per kind of term so that each vectorizes, are built
 * for AVX-512, AVX2 and the baseline (target_clones picks by the CPU): each
 * sum is its own lane, so every build gives the same bits. Not under
 * ThreadSanitizer: the clones' resolvers run before its runtime starts and
 * crash in it (docs/testing.md, "ThreadSanitizer"). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

/* the terms of a sum: x, |x|, x^2 */
#define BY_TERM(kind, LOOP)                                                                                  \
    switch (kind) {                                                                                          \
    case PPRT_RED_L1: LOOP(fabs((double)v)); break;                                                          \
    case PPRT_RED_L2:                                                                                        \
    case PPRT_RED_SUMSQUARE: LOOP((double)v * (double)v); break;                                             \
    default: LOOP((double)v); break;                                                                         \
    }

/* one output from n neighbouring floats */
CLONES static float row(int kind, const float *x, int64_t n) {
    if (kind == PPRT_RED_MAX || kind == PPRT_RED_MIN) {
        const bool mx = kind == PPRT_RED_MAX;
        float m = mx ? -INFINITY : INFINITY;
        bool num = false;
        for (int64_t j = 0; j < n; j++) {
            const float v = x[j];
            num |= v == v;
            m = (mx ? v > m : v < m) ? v : m; /* NaN compares false: skipped */
        }
        return num ? m : NAN;
    }
    double acc[LANES] = {0};
    int64_t j = 0;
#define ROW(T)                                                                                               \
    for (; j + LANES <= n; j += LANES)                                                                       \
        for (int l = 0; l < LANES; l++) {                                                                    \
            const float v = x[j + l];                                                                        \
            acc[l] += T;                                                                                     \
        }                                                                                                    \
    for (int l = 0; j + l < n; l++) {                                                                        \
        const float v = x[j + l];                                                                            \
        acc[l] += T;                                                                                         \
    }
    BY_TERM(kind, ROW)
#undef ROW
    double s = 0;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return finish(kind, s, n);
}

/* the w floats of x's row j (stride inner): where x holds bfloat16, their
 * floats in tmp */
static inline const float *at(const void *x, int64_t j, int64_t inner, int w, bool bf16, float *tmp) {
    if (!bf16) return (const float *)x + j * inner;
    const uint16_t *h = (const uint16_t *)x + j * inner;
    for (int i = 0; i < w; i++) tmp[i] = pprt_bf16_float(h[i]);
    return tmp;
}

/* w columns of n rows at stride inner, one output each; lanes: each summed
 * in row()'s order; bf16: x holds bfloat16 */
CLONES static void cols(int kind, const void *x, float *y, int64_t n, int64_t inner, int w, bool lanes, bool bf16) {
    float tmp[COLS];
    if (kind == PPRT_RED_MAX || kind == PPRT_RED_MIN) {
        const bool mx = kind == PPRT_RED_MAX;
        float m[COLS];
        bool num[COLS];
        for (int i = 0; i < w; i++) m[i] = mx ? -INFINITY : INFINITY, num[i] = false;
        for (int64_t j = 0; j < n; j++) {
            const float *r = at(x, j, inner, w, bf16, tmp);
            if (mx)
                for (int i = 0; i < w; i++) num[i] |= r[i] == r[i], m[i] = r[i] > m[i] ? r[i] : m[i];
            else
                for (int i = 0; i < w; i++) num[i] |= r[i] == r[i], m[i] = r[i] < m[i] ? r[i] : m[i];
        }
        for (int i = 0; i < w; i++) y[i] = num[i] ? m[i] : NAN;
        return;
    }
    /* column i's term j in acc[j % LANES][i] (lanes: the partials of row()),
     * else all in acc[0][i], one sum in index order (the reference's) */
    const int np = lanes ? LANES : 1;
    double acc[LANES][COLS];
    memset(acc, 0, (size_t)np * sizeof acc[0]);
#define COL(T)                                                                                               \
    for (int64_t j = 0; j < n; j++) {                                                                        \
        const float *r = at(x, j, inner, w, bf16, tmp);                                                      \
        double *a = acc[lanes ? j % LANES : 0];                                                              \
        for (int i = 0; i < w; i++) {                                                                        \
            const float v = r[i];                                                                            \
            a[i] += T;                                                                                       \
        }                                                                                                    \
    }
    BY_TERM(kind, COL)
#undef COL
    for (int i = 0; i < w; i++) {
        double sum = 0;
        for (int l = 0; l < np; l++) sum += acc[l][i];
        y[i] = finish(kind, sum, n);
    }
}

void pprt_reduce_run(const pprt_reduce *p, const void *xv, float *y, int threads) {
    const float *x = xv;
    const uint16_t *h = xv;
    const int64_t nb = p->inner == 1 ? 1 : (p->inner + COLS - 1) / COLS, tasks = p->outer * nb;
    if (threads < 1 || tasks < 2 || (double)p->outer * (double)p->n * (double)p->inner < 32768) threads = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t t = 0; t < tasks; t++) {
        if (p->inner == 1) {
            y[t] = row(p->kind, x + t * p->n, p->n);
            continue;
        }
        const int64_t o = t / nb, c = (t % nb) * COLS;
        const int w = (int)(p->inner - c < COLS ? p->inner - c : COLS);
        const int64_t off = o * p->n * p->inner + c;
        cols(p->kind, p->bf16 ? (const void *)(h + off) : (const void *)(x + off), y + o * p->inner + c, p->n,
             p->inner, w, p->lanes, p->bf16);
    }
}
