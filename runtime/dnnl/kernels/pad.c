/* pad.c: Pad as rows copied and filled (pad.h). Trailing axes that are
 * neither padded nor cut merge into the span, the element count per index
 * of the innermost padded axis; each unit (an index of the axes before it)
 * is then the padded indices before, one copy of the input's segment, the
 * padded indices after: fills in constant mode, else each padded index a
 * copy of the span it reads. */
#include "pad.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

bool pprt_pad_plan(const int64_t *dims, const int64_t *out_dims, const int64_t *begin, int rank, int mode, float value,
                   pprt_pad *p) {
    memset(p, 0, sizeof *p);
    if (rank < 1 || rank > PPRT_PAD_MAX + 1 || mode < PPRT_PAD_CONSTANT || mode > PPRT_PAD_WRAP) return false;
    for (int i = 0; i < rank; i++) {
        if (out_dims[i] <= 0 || dims[i] < 0) return false;
        if (mode != PPRT_PAD_CONSTANT && (dims[i] == 0 || begin[i] < 0 || out_dims[i] < dims[i] + begin[i]))
            return false;
    }
    /* the span: trailing axes where input and output agree */
    int last = rank - 1;
    int64_t span = 1;
    while (last > 0 && begin[last] == 0 && dims[last] == out_dims[last]) span *= dims[last--];
    int64_t st = span * dims[last];
    for (int i = last - 1; i >= 0; i--) {
        p->out[i] = out_dims[i], p->in[i] = dims[i], p->begin[i] = begin[i];
        p->stride[i] = st;
        st *= dims[i];
    }
    p->n = last, p->mode = mode;
    p->span = span;
    p->seg_out = out_dims[last] * span, p->seg_in = dims[last] * span;
    p->n_in = dims[last], p->b_in = begin[last];
    /* output index o reads input o - begin: o from max(begin, 0), input from max(-begin, 0) */
    const int64_t b = begin[last], first_in = b < 0 ? -b : 0;
    const int64_t first_out = b <= 0 ? 0 : b < out_dims[last] ? b : out_dims[last]; /* a cut end may leave no copy */
    int64_t len = dims[last] - first_in;
    if (len > out_dims[last] - first_out) len = out_dims[last] - first_out;
    if (len < 0) len = 0;
    p->before = first_out, p->skip = first_in, p->len = len;
    p->units = 1;
    for (int i = 0; i < last; i++) p->units *= (size_t)out_dims[i];
    p->value = value;
    return true;
}

static void fill(float *d, int64_t n, float v) {
    if (v == 0.0f && !signbit(v)) memset(d, 0, (size_t)n * sizeof(float));
    else for (int64_t i = 0; i < n; i++) d[i] = v;
}

/* output indices [k0, k1) of the segment: fills, or the spans they read */
static void padded(const pprt_pad *p, const float *src, float *d, int64_t k0, int64_t k1) {
    if (p->mode == PPRT_PAD_CONSTANT) {
        fill(d + k0 * p->span, (k1 - k0) * p->span, p->value);
        return;
    }
    for (int64_t k = k0; k < k1; k++)
        memcpy(d + k * p->span, src + pprt_pad_src(p->mode, k, p->b_in, p->n_in) * p->span,
               (size_t)p->span * sizeof(float));
}

static void run_unit(const pprt_pad *p, const float *src, float *dst, size_t u) {
    float *d = dst + (int64_t)u * p->seg_out;
    int64_t off = 0;
    size_t q = u;
    for (int i = p->n - 1; i >= 0; i--) {
        const int64_t o = pprt_pad_src(p->mode, (int64_t)(q % (size_t)p->out[i]), p->begin[i], p->in[i]);
        q /= (size_t)p->out[i];
        if (o < 0) { /* constant mode, outside the input */
            fill(d, p->seg_out, p->value);
            return;
        }
        off += o * p->stride[i];
    }
    const float *s = src + off;
    const int64_t out_n = p->seg_out / p->span;
    padded(p, s, d, 0, p->before);
    if (p->len > 0) memcpy(d + p->before * p->span, s + p->skip * p->span, (size_t)(p->len * p->span) * sizeof(float));
    padded(p, s, d, p->before + p->len, out_n);
}

void pprt_pad_run(const pprt_pad *p, const float *src, float *dst, int threads) {
    const size_t bytes = p->units * (size_t)p->seg_out * sizeof(float);
    if (threads < 1 || bytes < (64u << 10) || p->units < 2) threads = 1; /* as permute.c: 64 KiB a thread */
    const long nu = (long)p->units;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long u = 0; u < nu; u++) run_unit(p, src, dst, (size_t)u);
}
