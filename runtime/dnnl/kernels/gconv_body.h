/* gconv_body.h: the vector kernel of gconv.c on GC_L lanes, included by it
 * once per width with GC_L, GC_V (the vector type) and GC_TARGET defined,
 * and these operations on GC_V: GC_LD, GC_ST, GC_FMA(a, b, c) = a * b + c
 * rounded once, GC_LDBF (GC_L bf16 as floats), GC_SET1, GC_XOR1/2/3 (lane i takes lane i ^ m within each
 * four), GC_SWAP4 (lane i takes lane i ^ 4; GC_L >= 8), GC_CLAMP(v, lo, hi)
 * (v < lo ? lo : v > hi ? hi : v, lane by lane, NaN kept), GC_KEEP(v, k)
 * (lanes k and above set to 0). Not a header of its own. */

#define GC_CAT2(a, b) a##b
#define GC_CAT(a, b) GC_CAT2(a, b)
#define GC_NM(x) GC_CAT(x, GC_L)

/* lane i of the result: lane i ^ m of v (m < 8, a constant once inlined) */
GC_TARGET __attribute__((always_inline)) static inline GC_V GC_NM(gc_shuf)(GC_V v, int m) {
    if (m & 4) v = GC_SWAP4(v);
    switch (m & 3) {
    case 1: return GC_XOR1(v);
    case 2: return GC_XOR2(v);
    case 3: return GC_XOR3(v);
    default: return v;
    }
}

GC_TARGET __attribute__((always_inline)) static inline void GC_NM(gc_put)(const pprt_gconv *g, float *p, GC_V v,
                                                                          int tail) {
    if (g->clamp) v = GC_CLAMP(v, GC_SET1(g->lo), GC_SET1(g->hi));
    if (tail) v = GC_KEEP(v, tail);
    GC_ST(p, v);
}

/* GC_L source elements at element offset i: floats, or bf16 (the floats
 * they are: their bits the upper half) */
GC_TARGET __attribute__((always_inline)) static inline GC_V GC_NM(gc_ldx)(const void *x, int64_t i, const bool bf16) {
    return bf16 ? GC_LDBF((const uint16_t *)x + i) : GC_LD((const float *)x + i);
}

/* Output row oh of sample n, channels [k * GC_L, (k + 1) * GC_L), for
 * groups of cpg and a bf16 source or not (constants once inlined); four
 * pixels at a time where every tap of the row is inside the input, else
 * one. */
GC_TARGET __attribute__((always_inline)) static inline void GC_NM(gc_row_cpg)(const pprt_gconv *g, const void *x,
                                                                              float *y, int64_t n, int64_t oh,
                                                                              int64_t k, const int cpg,
                                                                              const bool bf16) {
    const pprt_gconv_shape *s = &g->s;
    const int64_t c0 = k * GC_L, iv = g->in.vec, ov = g->out.vec, KW = s->KW;
    const int64_t xs = s->sw * iv; /* from one output pixel's taps to the next one's */
    const float *wk = g->wv + k * s->KH * KW * cpg * GC_L;
    const int64_t xb = n * g->in.stride_n + (c0 / iv) * g->in.stride_c + c0 % iv; /* element offsets in x */
    float *yb = y + n * g->out.stride_n + (c0 / ov) * g->out.stride_c + c0 % ov + oh * s->OW * ov;
    const int64_t valid = s->C - c0; /* channels of the vector before the padding */
    if (valid <= 0) { /* all padding */
        for (int64_t ow = 0; ow < s->OW; ow++) GC_ST(yb + ow * ov, GC_SET1(0.0f));
        return;
    }
    const int tail = valid < GC_L ? (int)valid : 0;
    const GC_V b = GC_LD(g->bv + c0);
    int64_t ow = 0;
    while (ow < s->OW) {
        if (ow >= g->ow_lo && ow + 3 <= g->ow_hi) {
            GC_V a0 = b, a1 = b, a2 = b, a3 = b;
            for (int64_t kh = 0; kh < s->KH; kh++) {
                const int64_t ih = oh * s->sh - s->ph + kh * s->dh;
                if (ih < 0 || ih >= s->H) continue;
                const int64_t xr = xb + (ih * s->W + ow * s->sw - s->pw) * iv;
                const float *wt = wk + kh * KW * cpg * GC_L;
                for (int64_t kw = 0; kw < KW; kw++, wt += cpg * GC_L) {
                    const int64_t xp = xr + kw * s->dw * iv;
                    const GC_V x0 = GC_NM(gc_ldx)(x, xp, bf16), x1 = GC_NM(gc_ldx)(x, xp + xs, bf16),
                               x2 = GC_NM(gc_ldx)(x, xp + 2 * xs, bf16), x3 = GC_NM(gc_ldx)(x, xp + 3 * xs, bf16);
                    for (int m = 0; m < cpg; m++) {
                        const GC_V wm = GC_LD(wt + m * GC_L);
                        a0 = GC_FMA(wm, GC_NM(gc_shuf)(x0, m), a0);
                        a1 = GC_FMA(wm, GC_NM(gc_shuf)(x1, m), a1);
                        a2 = GC_FMA(wm, GC_NM(gc_shuf)(x2, m), a2);
                        a3 = GC_FMA(wm, GC_NM(gc_shuf)(x3, m), a3);
                    }
                }
            }
            GC_NM(gc_put)(g, yb + ow * ov, a0, tail);
            GC_NM(gc_put)(g, yb + (ow + 1) * ov, a1, tail);
            GC_NM(gc_put)(g, yb + (ow + 2) * ov, a2, tail);
            GC_NM(gc_put)(g, yb + (ow + 3) * ov, a3, tail);
            ow += 4;
            continue;
        }
        GC_V a = b;
        for (int64_t kh = 0; kh < s->KH; kh++) {
            const int64_t ih = oh * s->sh - s->ph + kh * s->dh;
            if (ih < 0 || ih >= s->H) continue;
            const float *wt = wk + kh * KW * cpg * GC_L;
            for (int64_t kw = 0; kw < KW; kw++, wt += cpg * GC_L) {
                const int64_t iw = ow * s->sw - s->pw + kw * s->dw;
                if (iw < 0 || iw >= s->W) continue;
                const GC_V xv = GC_NM(gc_ldx)(x, xb + (ih * s->W + iw) * iv, bf16);
                for (int m = 0; m < cpg; m++) a = GC_FMA(GC_LD(wt + m * GC_L), GC_NM(gc_shuf)(xv, m), a);
            }
        }
        GC_NM(gc_put)(g, yb + ow * ov, a, tail);
        ow++;
    }
}

GC_TARGET static void GC_NM(gc_row)(const pprt_gconv *g, const void *x, float *y, int64_t n, int64_t oh, int64_t k) {
    const int c = (int)g->s.cpg + (g->bf16 ? 100 : 0);
    switch (c) {
    case 2: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 2, false); break;
    case 4: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 4, false); break;
    case 8: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 8, false); break;
    case 102: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 2, true); break;
    case 104: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 4, true); break;
    default: GC_NM(gc_row_cpg)(g, x, y, n, oh, k, 8, true); break;
    }
}

#undef GC_NM
#undef GC_CAT
#undef GC_CAT2
