/* cscale.c: see cscale.h. Work is cut into tasks of about TASK elements:
 * rows of a channel (plain), or runs of pixels of one channel vector
 * (channels last, blocked), so a single sample of few pixels and many
 * channels still spreads over the threads. */
#include "cscale.h"


#include "../../cpu/bf16.h"
#include "../../isa.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { TASK = 4096 };

static inline float k_at(const void *k, int64_t i, bool kb) {
    return kb ? pprt_bf16_float(((const uint16_t *)k)[i]) : ((const float *)k)[i];
}

/* f32, plain C: ns pixels of vec channels from channel c0 (vec 1: ns
 * elements of channel c0), k the sample's row */
static void part_c(const float *x, float *y, int64_t ns, int64_t vec, int64_t c0, int64_t C, const void *k,
                   bool kb) {
    if (vec == 1) {
        const float s = k_at(k, c0, kb);
        for (int64_t i = 0; i < ns; i++) y[i] = x[i] * s;
        return;
    }
    float kv[16];
    for (int64_t j0 = 0; j0 < vec; j0 += 16) { /* 16 channels at a time, k read once */
        const int64_t w = vec - j0 < 16 ? vec - j0 : 16;
        for (int64_t j = 0; j < w; j++) kv[j] = c0 + j0 + j < C ? k_at(k, c0 + j0 + j, kb) : 0.0f;
        for (int64_t p = 0; p < ns; p++)
            for (int64_t j = 0; j < w; j++) y[p * vec + j0 + j] = x[p * vec + j0 + j] * kv[j];
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include "bf16x16.h"

/* 16 values of k from channel c (lanes at or past C: 0) */
PPRT_AVX512BW static inline __m512 k16(const void *k, int64_t c, int64_t C, bool kb) {
    return pprt_f32x16_load(k, c, pprt_tail16(C - c), kb);
}

PPRT_AVX512BW static void part_f32(const float *x, float *y, int64_t ns, int64_t vec, int64_t c0, int64_t C,
                                   const void *k, bool kb) {
    if (vec == 1) {
        const __m512 s = _mm512_set1_ps(k_at(k, c0, kb));
        for (int64_t i = 0; i < ns; i += 16) {
            const __mmask16 m = pprt_tail16(ns - i);
            _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s));
        }
        return;
    }
    for (int64_t j = 0; j < vec; j += 16) {
        const __mmask16 m = pprt_tail16(vec - j);
        const __m512 s = k16(k, c0 + j, C, kb);
        for (int64_t p = 0; p < ns; p++)
            _mm512_mask_storeu_ps(y + p * vec + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + p * vec + j), s));
    }
}

#define PART_BF16(name, attr, round)                                                                           \
    attr static void name(const uint16_t *x, uint16_t *y, int64_t ns, int64_t vec, int64_t c0, int64_t C,      \
                          const void *k, bool kb) {                                                            \
        if (vec == 1) {                                                                                        \
            const __m512 s = _mm512_set1_ps(k_at(k, c0, kb));                                                  \
            for (int64_t i = 0; i < ns; i += 16) {                                                             \
                const __mmask16 m = pprt_tail16(ns - i);                                                       \
                const __m512 v = pprt_f32x16_of_bf16(_mm256_maskz_loadu_epi16(m, x + i));                      \
                _mm256_mask_storeu_epi16(y + i, m, round(_mm512_mul_ps(v, s)));                                \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t j = 0; j < vec; j += 16) {                                                                \
            const __mmask16 m = pprt_tail16(vec - j);                                                          \
            const __m512 s = k16(k, c0 + j, C, kb);                                                            \
            for (int64_t p = 0; p < ns; p++) {                                                                 \
                const __m512 v = pprt_f32x16_of_bf16(_mm256_maskz_loadu_epi16(m, x + p * vec + j));            \
                _mm256_mask_storeu_epi16(y + p * vec + j, m, round(_mm512_mul_ps(v, s)));                      \
            }                                                                                                  \
        }                                                                                                      \
    }
PART_BF16(part_bf16, PPRT_AVX512BW, pprt_bf16x16_of)
PART_BF16(part_bf16_native, PPRT_AVX512BF16, pprt_bf16x16_native)

bool pprt_cscale_bf16_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX512; }
#else
bool pprt_cscale_bf16_cpu(void) { return false; }
#endif

void pprt_cscale_run(const pprt_cscale *c, const void *x, void *y, const void *k, int threads) {
    const pprt_layout *l = &c->l;
    const int64_t vec = l->vec, blocks = vec == 1 ? l->C : (l->C + vec - 1) / vec;
    /* pixels a task: a plain row cut into TASK elements, else TASK / vec pixels (at least one) */
    const int64_t chunk = vec == 1 ? TASK : TASK / vec > 0 ? TASK / vec : 1;
    const int64_t parts = (l->S + chunk - 1) / chunk, tasks = l->N * blocks * parts;
    const size_t esz = c->bf16 ? 2 : 4;
#if defined(__x86_64__) || defined(__i386__)
    const bool wide = pprt_cpu_isa() >= PPRT_ISA_AVX512, native = c->bf16 && pprt_cpu_avx512bf16();
#endif
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && tasks > 1)
#endif
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t part = t % parts, nb = t / parts, n = nb / blocks, cb = nb % blocks;
        const int64_t s0 = part * chunk, ns = l->S - s0 < chunk ? l->S - s0 : chunk;
        const int64_t off = n * l->stride_n + cb * l->stride_c + s0 * vec, c0 = vec == 1 ? cb : cb * vec;
        const void *kn = (const char *)k + (size_t)(n * c->k_stride_n) * (c->k_bf16 ? 2 : 4);
        const void *xs = (const char *)x + (size_t)off * esz;
        void *ys = (char *)y + (size_t)off * esz;
#if defined(__x86_64__) || defined(__i386__)
        if (c->bf16) {
            if (native) part_bf16_native(xs, ys, ns, vec, c0, l->C, kn, c->k_bf16);
            else part_bf16(xs, ys, ns, vec, c0, l->C, kn, c->k_bf16);
            continue;
        }
        if (wide) {
            part_f32(xs, ys, ns, vec, c0, l->C, kn, c->k_bf16);
            continue;
        }
#endif
        part_c(xs, ys, ns, vec, c0, l->C, kn, c->k_bf16);
    }
    (void)threads;
}
