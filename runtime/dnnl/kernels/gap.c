/* gap.c: see gap.h. A task is one run of pixels of one group of channels:
 * one channel (plain), one block (blocked), or up to GROUP channels of each
 * pixel (channels last); it writes the runs' sums of its channels, and a
 * second loop adds them per channel. */
#include "gap.h"

#include "../../cpu/bf16.h"
#include "../../isa.h"
#include "silu.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { GROUP = 256 }; /* channels last: channels a task */

static int64_t runs_of(const pprt_gap *g) { return (g->l.S + PPRT_GAP_RUN - 1) / PPRT_GAP_RUN; }

/* channels last (one vector of all C channels a pixel), where tasks take GROUP channels of each pixel */
static bool last_of(const pprt_gap *g) { return g->l.vec > 1 && g->l.vec == g->l.C; }

/* channel groups a sample: channels (plain), GROUPs (channels last), blocks */
static int64_t groups_of(const pprt_gap *g) {
    const pprt_layout *l = &g->l;
    return l->vec == 1 ? l->C : last_of(g) ? (l->C + GROUP - 1) / GROUP : (l->C + l->vec - 1) / l->vec;
}

size_t pprt_gap_scratch(const pprt_gap *g) { return (size_t)(g->l.N * runs_of(g) * g->l.C) * sizeof(float); }

/* acc[k] = the sum of v[p * stride + k] over p < ns in a fixed order (gap.h):
 * pixel p into partial sum p % 4, each partial in order of p, then
 * (s0 + s1) + (s2 + s3); every channel on its own, so the same bits
 * whatever the vector width the compiler picks. Channels in blocks of 64
 * (four 16-lane sums a partial, kept in registers over the pixels), then of
 * 16, then one by one. */
#define ACC_BLOCK(T, get, KB)                                                                                  \
    for (; k0 + KB <= w; k0 += KB) {                                                                          \
        float a0[KB] = {0}, a1[KB] = {0}, a2[KB] = {0}, a3[KB] = {0};                                         \
        const T *q = v + k0;                                                                                  \
        int64_t p = 0;                                                                                        \
        for (; p + 4 <= ns; p += 4, q += 4 * stride)                                                          \
            for (int k = 0; k < KB; k++) {                                                                    \
                a0[k] += get(q[k]);                                                                           \
                a1[k] += get(q[stride + k]);                                                                  \
                a2[k] += get(q[2 * stride + k]);                                                              \
                a3[k] += get(q[3 * stride + k]);                                                              \
            }                                                                                                 \
        for (int k = 0; k < KB; k++) {                                                                        \
            if (p < ns) a0[k] += get(q[k]);                                                                   \
            if (p + 1 < ns) a1[k] += get(q[stride + k]);                                                      \
            if (p + 2 < ns) a2[k] += get(q[2 * stride + k]);                                                  \
            acc[k0 + k] = (a0[k] + a1[k]) + (a2[k] + a3[k]);                                                  \
        }                                                                                                     \
    }
#define ACC_FN(name, attr, T, get)                                                                             \
    attr static void name(const T *v, int64_t ns, int64_t stride, int64_t w, float *restrict acc) {           \
        int64_t k0 = 0;                                                                                       \
        ACC_BLOCK(T, get, 64)                                                                                 \
        ACC_BLOCK(T, get, 16)                                                                                 \
        ACC_BLOCK(T, get, 1)                                                                                  \
    }
#define AS_F32(v) (v)
#define ACC(name, attr) ACC_FN(name##_f32, attr, float, AS_F32) ACC_FN(name##_bf16, attr, uint16_t, pprt_bf16_float)
ACC(acc_c, )
#if defined(__x86_64__) || defined(__i386__)
ACC(acc_avx512, __attribute__((target("avx512f,avx512bw"))))
#endif

/* silu over n contiguous values, serially (within a task) */
static void silu_run(const pprt_gap *g, const void *x, void *y, int64_t n) {
    if (g->bf16) pprt_silu_bf16_serial(x, y, (size_t)n);
    else pprt_silu_serial(x, y, (size_t)n);
}

static void task(const pprt_gap *g, const void *x, void *y, float *part, int64_t t, bool wide) {
    const pprt_layout *l = &g->l;
    const int64_t J = runs_of(g), vec = l->vec, groups = groups_of(g);
    const bool last = last_of(g);
    int64_t n, grp, j;
    if (last) n = t / (J * groups), j = t / groups % J, grp = t % groups; /* pixels outer: memory order */
    else n = t / (groups * J), grp = t / J % groups, j = t % J;
    const int64_t s0 = j * PPRT_GAP_RUN, ns = l->S - s0 < PPRT_GAP_RUN ? l->S - s0 : PPRT_GAP_RUN;
    int64_t c0, w, off, stride;
    if (vec == 1) c0 = grp, w = 1, off = n * l->stride_n + grp * l->stride_c + s0, stride = 1;
    else if (last) {
        c0 = grp * GROUP, w = l->C - c0 < GROUP ? l->C - c0 : GROUP;
        off = n * l->stride_n + s0 * vec + c0, stride = vec;
    } else {
        c0 = grp * vec, w = l->C - c0 < vec ? l->C - c0 : vec;
        off = n * l->stride_n + grp * l->stride_c + s0 * vec, stride = vec;
    }
    const size_t esz = g->bf16 ? 2 : 4;
    const void *src = (const char *)x + (size_t)off * esz;
    if (g->silu) {
        void *dst = (char *)y + (size_t)off * esz;
        if (vec == 1) silu_run(g, src, dst, ns);
        else if (!last || w == vec) silu_run(g, src, dst, ns * vec); /* contiguous (a block's padding: silu(0) = 0) */
        else
            for (int64_t p = 0; p < ns; p++) silu_run(g, (const char *)src + (size_t)(p * vec) * esz,
                                                      (char *)dst + (size_t)(p * vec) * esz, w);
        src = dst;
    }
    float acc[GROUP];
#if defined(__x86_64__) || defined(__i386__)
    if (wide) {
        if (g->bf16) acc_avx512_bf16(src, ns, stride, w, acc);
        else acc_avx512_f32(src, ns, stride, w, acc);
    } else
#endif
    {
        if (g->bf16) acc_c_bf16(src, ns, stride, w, acc);
        else acc_c_f32(src, ns, stride, w, acc);
    }
    (void)wide;
    float *out = part + (n * J + j) * l->C + c0;
    for (int64_t k = 0; k < w; k++) out[k] = acc[k];
}

void pprt_gap_run(const pprt_gap *g, const void *x, void *y, void *mean, void *scratch, int threads) {
    const pprt_layout *l = &g->l;
    const int64_t J = runs_of(g), tasks = l->N * groups_of(g) * J, NC = l->N * l->C;
    float *part = scratch;
    const float S = (float)l->S;
    const bool wide = pprt_cpu_isa() >= PPRT_ISA_AVX512;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && tasks > 1)
#endif
    {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t t = 0; t < tasks; t++) task(g, x, y, part, t, wide);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t i = 0; i < NC; i++) {
            const int64_t n = i / l->C, c = i % l->C;
            const float *p = part + n * J * l->C + c;
            float s = p[0];
            for (int64_t j = 1; j < J; j++) s += p[j * l->C];
            const float m = s / S;
            if (g->out_bf16) ((uint16_t *)mean)[i] = pprt_bf16_round(m);
            else ((float *)mean)[i] = m;
        }
    }
    (void)threads;
}
