/* bnorm.c: see bnorm.h. */
#include "bnorm.h"

#include <math.h>
#include <stdlib.h>

struct pprt_bnorm {
    pprt_layout l;
    bool relu;
    int64_t cp; /* channels padded to a multiple of vec */
    float *m, *k, *b; /* cp each; 0 for the padding channels, which so stay 0 */
};

pp_status pprt_bnorm_create(const pprt_layout *l, const float *scale, const float *bias, const float *mean,
                            const float *var, float eps, bool relu, pprt_bnorm **out, pp_err *err) {
    *out = NULL;
    if (l->N < 1 || l->C < 1 || l->S < 1 || l->vec < 1)
        return PP_FAIL(err, PP_EUNSUP, "BatchNormalization kernel: layout");
    pprt_bnorm *b = calloc(1, sizeof *b);
    const int64_t cp = l->vec > 1 ? (l->C + l->vec - 1) / l->vec * l->vec : l->C;
    if (b) b->m = calloc((size_t)cp * 3, sizeof(float));
    if (!b || !b->m) {
        free(b);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    b->l = *l, b->relu = relu, b->cp = cp, b->k = b->m + cp, b->b = b->m + 2 * cp;
    for (int64_t c = 0; c < l->C; c++) {
        b->m[c] = mean[c];
        b->k[c] = (float)((double)scale[c] / sqrt((double)var[c] + (double)eps));
        b->b[c] = bias[c];
    }
    *out = b;
    return PP_OK;
}

static inline float one(float x, float m, float k, float b, bool relu) {
    const float y = (x - m) * k + b;
    return relu && y < 0 ? 0.0f : y;
}

/* n channel vectors of v channels from channel c0 (the arrays' offset) */
static void vectors(const float *restrict x, float *restrict y, int64_t n, int64_t v, const float *restrict m,
                    const float *restrict k, const float *restrict b, bool relu) {
    for (int64_t i = 0; i < n; i++, x += v, y += v)
        for (int64_t j = 0; j < v; j++) y[j] = one(x[j], m[j], k[j], b[j], relu);
}

static void vectors_inplace(float *y, int64_t n, int64_t v, const float *restrict m, const float *restrict k,
                            const float *restrict b, bool relu) {
    for (int64_t i = 0; i < n; i++, y += v)
        for (int64_t j = 0; j < v; j++) y[j] = one(y[j], m[j], k[j], b[j], relu);
}

void pprt_bnorm_run(const pprt_bnorm *bn, const float *x, float *y, int threads) {
    const pprt_layout *l = &bn->l;
    const bool relu = bn->relu;
    (void)threads;
    if (l->vec == 1) { /* plain: a channel's S elements contiguous */
        const int64_t rows = l->N * l->C;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && rows > 1)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / l->C, c = r % l->C, off = n * l->stride_n + c * l->stride_c;
            const float m = bn->m[c], k = bn->k[c], b = bn->b[c];
            float *yo = y + off;
            if (x == y)
                for (int64_t s = 0; s < l->S; s++) yo[s] = one(yo[s], m, k, b, relu);
            else
                for (int64_t s = 0; s < l->S; s++) yo[s] = one(x[off + s], m, k, b, relu);
        }
        return;
    }
    /* channels last (one block of C) or blocked: per sample and block, S vectors of vec channels */
    const int64_t blocks = bn->cp / l->vec, tasks = l->N * blocks;
    const int64_t chunk = l->S > 64 ? 64 : l->S, parts = (l->S + chunk - 1) / chunk;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && tasks * parts > 1)
    for (int64_t t = 0; t < tasks * parts; t++) {
        const int64_t task = t / parts, part = t % parts, n = task / blocks, cb = task % blocks;
        const int64_t s0 = part * chunk, ns = l->S - s0 < chunk ? l->S - s0 : chunk;
        const int64_t off = n * l->stride_n + cb * l->stride_c + s0 * l->vec, c0 = cb * l->vec;
        if (x == y) vectors_inplace(y + off, ns, l->vec, bn->m + c0, bn->k + c0, bn->b + c0, relu);
        else vectors(x + off, y + off, ns, l->vec, bn->m + c0, bn->k + c0, bn->b + c0, relu);
    }
}

bool pprt_bnorm_relu(const pprt_bnorm *b) { return b->relu; }
size_t pprt_bnorm_bytes(const pprt_bnorm *b) { return sizeof *b + (size_t)b->cp * 3 * sizeof(float); }

void pprt_bnorm_free(pprt_bnorm *b) {
    if (!b) return;
    free(b->m);
    free(b);
}
