/* nanfix.c: NaN-faithful passes for the oneDNN executor (nanfix.h). */
#include "nanfix.h"

#include "../../cpu/bf16.h"

#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(_OPENMP)
#include <xmmintrin.h>
#define FPGUARD 1
#else
#define FPGUARD 0
#endif

static void clamp(const float *restrict x, float *restrict y, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v < lo ? lo : v > hi ? hi : v;
    }
}

static void clamp_inplace(float *y, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        const float v = y[i];
        y[i] = v < lo ? lo : v > hi ? hi : v;
    }
}

/* The clamp over bfloat16 in place: a value inside [lo, hi] (and NaN) keeps
 * its bits, one outside becomes the bound rounded to bfloat16 (to nearest
 * even, as oneDNN rounds). */
static uint16_t bf16_of(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static void clamp_bf16(uint16_t *y, size_t n, float lo, float hi) {
    const uint16_t blo = bf16_of(lo), bhi = bf16_of(hi);
    for (size_t i = 0; i < n; i++) {
        const float v = pprt_bf16_float(y[i]);
        y[i] = v < lo ? blo : v > hi ? bhi : y[i];
    }
}

/* Whether x is NaN, from its bits (a branch-free test that vectorizes) */
static inline int is_nan_bits(const float *x) {
    uint32_t u;
    memcpy(&u, x, sizeof u);
    return (u & 0x7fffffffu) > 0x7f800000u;
}

/* Rows holding a NaN become all NaN. It follows every softmax over the last
 * axis, so it must cost little next to it: a branch-free test of each row
 * (it vectorizes), the outer rows shared by the threads (as a scalar loop
 * with an early exit on one thread it took 4 of caformer_s18's softmax's
 * 5 ms, [8, 10, 196, 196]). */
static void rows(const pprt_nanfix *f, float *y, int threads) {
    const int64_t outer = f->outer, len = f->len, inner = f->inner;
    (void)threads;
    const bool share = outer > 1 && outer * len * inner > (1 << 15) && threads > 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (share)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            float *r = y + o * len * inner + i;
            int nan = 0;
            if (inner == 1)
                for (int64_t j = 0; j < len; j++) nan |= is_nan_bits(&r[j]);
            else
                for (int64_t j = 0; j < len; j++) nan |= is_nan_bits(&r[j * inner]);
            if (nan)
                for (int64_t j = 0; j < len; j++) r[j * inner] = NAN;
        }
}

static int64_t at(const pprt_nanfix_layout *l, int nd, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += (d == 1 ? idx[d] / l->cblock : idx[d]) * l->stride[d];
    return off + idx[1] % l->cblock;
}

/* Element i of a float or bfloat16 buffer, as a float (exact), and back
 * (exact for the values max pooling gives: a source value or NaN). */
static float get(const pprt_nanfix *f, const void *b, int64_t i) {
    return f->bf16 ? pprt_bf16_float(((const uint16_t *)b)[i]) : ((const float *)b)[i];
}
static void set(const pprt_nanfix *f, void *b, int64_t i, float v) {
    if (!f->bf16) {
        ((float *)b)[i] = v;
        return;
    }
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    ((uint16_t *)b)[i] = v != v ? 0x7fc0 : (uint16_t)(u >> 16);
}

/* The window of output o (n, c, spatial) over the source: NaN skipped,
 * -inf a value, only NaN (or nothing) gives NaN. */
static float window_max(const pprt_nanfix *f, const void *x, const int64_t *o) {
    const int nd = 2 + f->nsp;
    int64_t idx[5] = {o[0], o[1], 0, 0, 0}, e[3] = {0, 0, 0};
    float m = -INFINITY;
    bool any = false;
    for (;;) {
        bool inside = true;
        for (int d = 0; d < f->nsp; d++) {
            idx[2 + d] = o[2 + d] * f->stride[d] - f->pad[d] + e[d] * f->dil[d];
            inside &= idx[2 + d] >= 0 && idx[2 + d] < f->in[d];
        }
        if (inside) {
            const float v = get(f, x, at(&f->src, nd, idx));
            if (v == v && (!any || v > m)) m = v, any = true;
        }
        int d = f->nsp - 1;
        while (d >= 0 && ++e[d] == f->k[d]) e[d--] = 0;
        if (d < 0) break;
    }
    return any ? m : NAN;
}

/* Whether any of y's n values has the bits of the type's lowest finite
 * value: a branch-free pass over chunks (so it vectorizes), the chunks
 * shared by `threads` OpenMP threads. It reads every output of every max
 * pool, so it must cost no more than a copy: as a scalar loop with an
 * early exit it took 5 of Inception-v3's 9 ms of max pooling (-b 8). */
static bool any_lowest(const pprt_nanfix *f, const void *y, size_t n, int threads) {
    const size_t chunk = 1u << 14, n_chunks = (n + chunk - 1) / chunk;
    int hit = 0;
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : hit) if (n_chunks > 4 && threads > 1)
    for (size_t c = 0; c < n_chunks; c++) {
        const size_t i0 = c * chunk, m = n - i0 < chunk ? n - i0 : chunk;
        int h = 0;
        if (f->bf16) {
            const uint16_t *p = (const uint16_t *)y + i0;
            for (size_t i = 0; i < m; i++) h |= p[i] == 0xff7f;
        } else {
            const uint32_t *p = (const uint32_t *)y + i0; /* -FLT_MAX: 0xff7fffff */
            for (size_t i = 0; i < m; i++) h |= p[i] == 0xff7fffffu;
        }
        hit |= h;
    }
    return hit != 0;
}

static void maxpool(const pprt_nanfix *f, const void *x, void *y, int threads) {
    /* oneDNN starts every window at the type's lowest value and skips NaN:
     * only windows that ended there (rare) can be wrong */
    float lowest = -FLT_MAX;
    if (f->bf16) { /* bfloat16's lowest: 0xff7f */
        const uint32_t u = 0xff7f0000u;
        memcpy(&lowest, &u, sizeof lowest);
    }
    if (!any_lowest(f, y, f->dst_n, threads)) return;
    const int nd = 2 + f->nsp;
    int64_t o[5] = {0, 0, 0, 0, 0};
    for (;;) {
        const int64_t off = at(&f->dst, nd, o);
        if (get(f, y, off) == lowest) set(f, y, off, window_max(f, x, o));
        int d = nd - 1;
        while (d >= 0) {
            const int64_t size = d == 0 ? f->N : d == 1 ? f->C : f->out[d - 2];
            if (++o[d] < size) break;
            o[d--] = 0;
        }
        if (d < 0) break;
    }
}

void pprt_nanfix_run(const pprt_nanfix *f, const float *src, float *dst, int threads) {
    switch (f->kind) {
    case PPRT_NANFIX_CLAMP: {
        /* a memory-bound pass: split in large chunks over the threads */
        const size_t chunk = 1u << 16, n_chunks = (f->n + chunk - 1) / chunk;
        (void)threads;
#pragma omp parallel for num_threads(threads) schedule(static) if (n_chunks > 1 && threads > 1)
        for (size_t c = 0; c < n_chunks; c++) {
            const size_t i = c * chunk, m = f->n - i < chunk ? f->n - i : chunk;
            if (f->bf16) {
                if (src != dst) memcpy((uint16_t *)dst + i, (const uint16_t *)src + i, m * sizeof(uint16_t));
                clamp_bf16((uint16_t *)dst + i, m, f->lo, f->hi);
            } else if (src == dst) clamp_inplace(dst + i, m, f->lo, f->hi);
            else clamp(src + i, dst + i, m, f->lo, f->hi);
        }
        break;
    }
    case PPRT_NANFIX_ROWS: rows(f, dst, threads); break;
    case PPRT_NANFIX_MAXPOOL: maxpool(f, src, dst, threads); break;
    default: break;
    }
}

bool pprt_fpguard_built(void) { return FPGUARD; }

void pprt_fpguard_clear(int threads) {
#if FPGUARD
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    _mm_setcsr(_mm_getcsr() & ~(unsigned)_MM_EXCEPT_INVALID);
#else
    (void)threads;
#endif
}

bool pprt_fpguard_raised(int threads) {
#if FPGUARD
    unsigned flags = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : 1) reduction(| : flags)
    flags |= _mm_getcsr() & _MM_EXCEPT_INVALID;
    return flags != 0;
#else
    (void)threads;
    return true;
#endif
}
