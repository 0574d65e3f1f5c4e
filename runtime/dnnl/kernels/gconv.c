/* gconv.c: see gconv.h. A task is one output row of one sample and one
 * vector of channels; the weights are repacked once per vector of output
 * channels as [tap][m][lane] (lane c's weight for input channel c ^ m of
 * its group), the bias as one vector per chunk, 0 in padding lanes. */
#include "gconv.h"

#include "../../cpu/bf16.h"
#include "../../isa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pprt_gconv {
    pprt_gconv_shape s;
    pprt_layout in, out;
    int lanes;            /* 16, 8, or 1 (the portable loop) */
    int64_t nch;          /* vectors of channels (padding included) */
    int64_t cp;           /* the output's channels, padding included */
    int64_t ow_lo, ow_hi; /* the output columns whose taps are all inside the input */
    bool clamp, bf16;     /* bf16: the source holds bfloat16 values */
    float lo, hi;
    float *wv, *bv;       /* repacked, bias 0 where none (vector kernel; NULL for the portable loop) */
    float *w, *b;         /* as given, bias 0 where none (portable loop; NULL for the vector kernel) */
    size_t bytes;
};

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define GC_L 16
#define GC_V __m512
#define GC_TARGET __attribute__((target("avx512f")))
#define GC_LD _mm512_loadu_ps
#define GC_LDBF(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define GC_ST _mm512_storeu_ps
#define GC_FMA _mm512_fmadd_ps
#define GC_SET1 _mm512_set1_ps
#define GC_XOR1(v) _mm512_permute_ps(v, 0xB1)
#define GC_XOR2(v) _mm512_permute_ps(v, 0x4E)
#define GC_XOR3(v) _mm512_permute_ps(v, 0x1B)
#define GC_SWAP4(v) _mm512_shuffle_f32x4(v, v, 0xB1)
#define GC_CLAMP(v, lo, hi)                                                                                    \
    _mm512_mask_mov_ps(_mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo),                      \
                       _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi)
#define GC_KEEP(v, k) _mm512_maskz_mov_ps((__mmask16)((1u << (k)) - 1u), v)
#include "gconv_body.h"
#undef GC_L
#undef GC_V
#undef GC_TARGET
#undef GC_LD
#undef GC_LDBF
#undef GC_ST
#undef GC_FMA
#undef GC_SET1
#undef GC_XOR1
#undef GC_XOR2
#undef GC_XOR3
#undef GC_SWAP4
#undef GC_CLAMP
#undef GC_KEEP

#define GC_L 8
#define GC_V __m256
#define GC_TARGET __attribute__((target("avx2,fma")))
#define GC_LD _mm256_loadu_ps
#define GC_LDBF(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define GC_ST _mm256_storeu_ps
#define GC_FMA _mm256_fmadd_ps
#define GC_SET1 _mm256_set1_ps
#define GC_XOR1(v) _mm256_permute_ps(v, 0xB1)
#define GC_XOR2(v) _mm256_permute_ps(v, 0x4E)
#define GC_XOR3(v) _mm256_permute_ps(v, 0x1B)
#define GC_SWAP4(v) _mm256_permute2f128_ps(v, v, 0x01)
/* blendv takes the second operand where the mask's lane is set; a NaN
 * compares false both times and stays */
#define GC_CLAMP(v, lo, hi) gc_clamp8(v, lo, hi)
#define GC_KEEP(v, k) _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(k), \
                                                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))))
__attribute__((target("avx2,fma"))) static inline __m256 gc_clamp8(__m256 v, __m256 lo, __m256 hi) {
    v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}
#include "gconv_body.h"
#define GC_VECTOR 1
#endif

bool pprt_gconv_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }
int pprt_gconv_lanes(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : 8; }

bool pprt_gconv_fits(const pprt_gconv_shape *s) {
    return (s->cpg == 2 || s->cpg == 4 || s->cpg == 8) && s->C % s->cpg == 0 && s->N > 0 && s->C > 0 && s->H > 0 &&
           s->W > 0 && s->OH > 0 && s->OW > 0 && s->KH > 0 && s->KW > 0 && s->sh > 0 && s->sw > 0 && s->dh > 0 &&
           s->dw > 0 && s->ph >= 0 && s->pw >= 0;
}

bool pprt_gconv_layout_ok(const pprt_layout *l, int lanes) {
    if (lanes == 1) return l->vec >= 1;
    return l->vec > 1 && l->vec % lanes == 0;
}

/* element (n, c, pixel p) of layout l (layout.h) */
static inline int64_t at(const pprt_layout *l, int64_t n, int64_t c, int64_t p) {
    return n * l->stride_n + (c / l->vec) * l->stride_c + p * l->vec + c % l->vec;
}

static int64_t padded(const pprt_layout *l) {
    return l->vec > 1 && l->vec != l->C ? (l->C + l->vec - 1) / l->vec * l->vec : l->C;
}

pp_status pprt_gconv_create(const pprt_gconv_shape *s, const pprt_layout *in, const pprt_layout *out,
                            const float *w, const float *bias, float lo, float hi, bool bf16, int lanes,
                            pprt_gconv **out_g, pp_err *err) {
    *out_g = NULL;
    if (!lanes) lanes = pprt_gconv_lanes();
    if (!pprt_gconv_fits(s) || in->N != s->N || out->N != s->N || in->C != s->C || out->C != s->C ||
        in->S != s->H * s->W || out->S != s->OH * s->OW)
        return PP_FAIL(err, PP_EUNSUP, "grouped convolution kernel: shape");
#ifndef GC_VECTOR
    if (lanes != 1) return PP_FAIL(err, PP_EUNSUP, "grouped convolution kernel: %d lanes on this build", lanes);
#endif
    if (!(lanes == 1 || (lanes == 8 && pprt_gconv_cpu()) || (lanes == 16 && pprt_cpu_isa() >= PPRT_ISA_AVX512)))
        return PP_FAIL(err, PP_EUNSUP, "grouped convolution kernel: %d lanes on this CPU", lanes);
    if (!pprt_gconv_layout_ok(in, lanes) || !pprt_gconv_layout_ok(out, lanes))
        return PP_FAIL(err, PP_EUNSUP, "grouped convolution kernel: layout");
    const int64_t T = s->KH * s->KW, C = s->C, cpg = s->cpg, cp = padded(out);
    const int64_t nch = lanes == 1 ? 1 : (cp + lanes - 1) / lanes;
    const size_t nwv = lanes == 1 ? 0 : (size_t)(nch * T * cpg * lanes), nbv = lanes == 1 ? 0 : (size_t)(nch * lanes);
    const size_t nw = lanes == 1 ? (size_t)(C * cpg * T) : 0, nb = lanes == 1 ? (size_t)C : 0;
    const size_t floats = nwv + nbv + nw + nb;
    pprt_gconv *g = calloc(1, sizeof *g);
    float *buf = g ? aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64) : NULL;
    if (!buf) {
        free(g);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    memset(buf, 0, floats * sizeof(float));
    *g = (pprt_gconv){.s = *s, .in = *in, .out = *out, .lanes = lanes, .nch = nch, .cp = cp,
                      .clamp = !(isinf(lo) && lo < 0 && isinf(hi) && hi > 0), .bf16 = bf16,
                      .lo = lo, .hi = hi, .wv = nwv ? buf : NULL, .bv = nwv ? buf + nwv : NULL,
                      .w = nw ? buf : NULL, .b = nw ? buf + nw : NULL, .bytes = sizeof *g + floats * sizeof(float)};
    if (nw) memcpy(g->w, w, nw * sizeof(float));
    if (nw && bias) memcpy(g->b, bias, (size_t)C * sizeof(float));
    for (int64_t k = 0; k < nch && lanes > 1; k++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t m = 0; m < cpg; m++)
                for (int64_t l = 0; l < lanes; l++) {
                    const int64_t c = k * lanes + l;
                    if (c >= C) continue;
                    const int64_t j = (c % cpg) ^ m;
                    g->wv[((k * T + t) * cpg + m) * lanes + l] = w[(c * cpg + j) * T + t];
                }
    for (int64_t c = 0; c < C && lanes > 1 && bias; c++) g->bv[c] = bias[c];
    /* columns whose taps are all inside: ow * sw - pw >= 0 and ow * sw - pw + (KW - 1) * dw <= W - 1 */
    g->ow_lo = (s->pw + s->sw - 1) / s->sw;
    const int64_t top = s->W - 1 - (s->KW - 1) * s->dw + s->pw;
    g->ow_hi = top < 0 ? -1 : top / s->sw;
    if (g->ow_hi > s->OW - 1) g->ow_hi = s->OW - 1;
    *out_g = g;
    return PP_OK;
}

/* The portable loop: output row oh of sample n, every channel (padding 0),
 * in gconv.h's order with fmaf, so the bits of the vector kernel. */
static inline float src_at(const pprt_gconv *g, const void *x, int64_t i) {
    return g->bf16 ? pprt_bf16_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

static void row_portable(const pprt_gconv *g, const void *x, float *y, int64_t n, int64_t oh) {
    const pprt_gconv_shape *s = &g->s;
    const int64_t cpg = s->cpg;
    for (int64_t ow = 0; ow < s->OW; ow++)
        for (int64_t c = 0; c < g->cp; c++) {
            float *yp = y + at(&g->out, n, c, oh * s->OW + ow);
            if (c >= s->C) {
                *yp = 0.0f;
                continue;
            }
            float a = g->b[c];
            for (int64_t kh = 0; kh < s->KH; kh++) {
                const int64_t ih = oh * s->sh - s->ph + kh * s->dh;
                if (ih < 0 || ih >= s->H) continue;
                for (int64_t kw = 0; kw < s->KW; kw++) {
                    const int64_t iw = ow * s->sw - s->pw + kw * s->dw;
                    if (iw < 0 || iw >= s->W) continue;
                    for (int64_t m = 0; m < cpg; m++) {
                        const int64_t j = (c % cpg) ^ m;
                        a = fmaf(g->w[((c * cpg + j) * s->KH + kh) * s->KW + kw],
                                 src_at(g, x, at(&g->in, n, c - c % cpg + j, ih * s->W + iw)), a);
                    }
                }
            }
            if (g->clamp) a = a < g->lo ? g->lo : a > g->hi ? g->hi : a;
            *yp = a;
        }
}

void pprt_gconv_run(const pprt_gconv *g, const void *x, float *y, int threads) {
    const int64_t rows = g->s.N * g->s.OH, items = rows * g->nch;
    if (threads < 1) threads = 1;
    if (threads > items) threads = (int)items;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t it = 0; it < items; it++) {
        const int64_t k = it % g->nch, r = it / g->nch, oh = r % g->s.OH, n = r / g->s.OH;
#ifdef GC_VECTOR
        if (g->lanes == 16) gc_row16(g, x, y, n, oh, k);
        else if (g->lanes == 8) gc_row8(g, x, y, n, oh, k);
        else
#endif
            row_portable(g, x, y, n, oh);
    }
}

int pprt_gconv_width(const pprt_gconv *g) { return g->lanes; }

size_t pprt_gconv_bytes(const pprt_gconv *g) { return g ? g->bytes : 0; }

void pprt_gconv_free(pprt_gconv *g) {
    if (!g) return;
    free(g->wv ? g->wv : g->w);
    free(g);
}
