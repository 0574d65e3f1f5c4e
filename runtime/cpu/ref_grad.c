/* ref_grad.c: reference kernels of the backward ops (ir/ops_grad.def) that
 * ppcc --train emits. Plain loops, sums in double, deterministic: the
 * oracle the faster backends are checked against, as the forward kernels. */
#include <math.h>
#include <string.h>

#include "chan_sums.h"
#include "ref.h"
#include "../../ir/geom.h"
#include "../../ir/op_fns.h"

/* ---- pp.UnaryGrad ----------------------------------------------------------------------- */

/* The derivative of each op of ir/ops_unary.def that has one: d_E(v, w,
 * P0, P1) with v the input, w the output, in double. */
#define K(x) ((double)(x))
#define EW(f) f
#define P0 p0
#define P1 p1
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D)                                                                    \
    static double d_##E(double v, double w, double p0, double p1) {                            \
        (void)v, (void)w, (void)p0, (void)p1;                                                  \
        return (D);                                                                            \
    }
#include "../../ir/ops_unary.def"
#undef PP_UNARY_GRAD
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#undef P0
#undef P1
#undef EW
#undef K

typedef double deriv_fn(double v, double w, double p0, double p1);

/* The op's derivative and the names and defaults of its float attributes. */
typedef struct unary_row {
    pp_op op;
    const char *a0, *a1;
    float d0, d1;
} unary_row;

static const unary_row unary_rows[] = {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) {PP_OP_##E, A0, A1, D0, D1},
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) {PP_OP_##E, NULL, NULL, 0.0f, 0.0f},
#define PP_EW_FORMULA(E, F)
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
};

static deriv_fn *deriv_of(pp_op op) {
    switch (op) {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D) case PP_OP_##E: return d_##E;
#include "../../ir/ops_unary.def"
#undef PP_UNARY_GRAD
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
    default: return NULL;
    }
}

pp_status kern_UNARYGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                         pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_UNARYGRAD, attrs, in, n_in, out, n_out, err));
    const char *name;
    PP_TRY(pp_attr_string(attrs, "op", NULL, &name, err));
    pp_op op;
    deriv_fn *d = name && pp_op_lookup(name, &op) ? deriv_of(op) : NULL;
    if (!d) return PP_FAIL(err, PP_EUNSUP, "pp.UnaryGrad kernel: '%s' has no derivative", name ? name : "");
    float p0 = 0, p1 = 0;
    for (size_t r = 0; r < sizeof unary_rows / sizeof *unary_rows; r++)
        if (unary_rows[r].op == op) {
            if (unary_rows[r].a0) PP_TRY(pp_attr_float(attrs, unary_rows[r].a0, unary_rows[r].d0, &p0, err));
            if (unary_rows[r].a1) PP_TRY(pp_attr_float(attrs, unary_rows[r].a1, unary_rows[r].d1, &p1, err));
        }
    int64_t n;
    PP_TRY(pprt_numel_of(&out[0], &n, err));
    const float *x = in[0].data, *y = in[1].data, *dy = in[2].data;
    float *dx = out[0].data;
    if (op == PP_OP_RELU) { /* the same bits as the formula's (dY times 1 or 0), without a call per element, and
                             * without a branch: one on the sign of X, mispredicted half the time, cost 5x */
        const float *restrict xr = x, *restrict gy = dy;
        float *restrict gx = dx;
        const int64_t cnt = n; /* n's address was taken: a copy the loop may keep in a register */
        for (int64_t i = 0; i < cnt; i++) { /* dY's bits where X > 0, else those of dY * 0, chosen by a mask */
            const float z = gy[i] * 0.0f;
            uint32_t g, h;
            memcpy(&g, &gy[i], 4), memcpy(&h, &z, 4);
            const uint32_t keep = 0u - (uint32_t)(xr[i] > 0), r = (g & keep) | (h & ~keep);
            memcpy(&gx[i], &r, 4);
        }
        return PP_OK;
    }
    for (int64_t i = 0; i < n; i++) dx[i] = (float)((double)dy[i] * d(x[i], y[i], p0, p1));
    return PP_OK;
}

/* ---- pp.ConvGradX, pp.ConvGradW: im2col and the reference GEMM, deterministic ---------------- */

/* The problem of a Conv with input shape xs and weight shape ws, checked
 * against dY. */
typedef struct conv_prob {
    pp_geom3 g;
    int64_t N, C, Cout, group, Cg, Mg, kvol, Pin, P;
} conv_prob;

static pp_status conv_prob_make(const char *op, pp_attrs attrs, const pp_shape *xs, const pp_shape *ws,
                                const pprt_tensor *dy, conv_prob *c, pp_err *err) {
    PP_TRY(pp_attr_int(attrs, "group", 1, &c->group, err));
    c->N = xs->dim[0], c->C = xs->dim[1], c->Cout = ws->dim[0];
    if (xs->rank != ws->rank || c->group < 1 || c->C % c->group || c->Cout % c->group ||
        ws->dim[1] * c->group != c->C)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: group %lld does not fit X and W", op, (long long)c->group);
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, xs, &ws->dim[2], false, &pg, err));
    pp_shape want = {.rank = xs->rank, .dim = {c->N, c->Cout}};
    for (int i = 0; i < pg.nsp; i++) want.dim[2 + i] = pg.out[i];
    PP_TRY(pprt_need_shape(dy, &want, "dY", err));
    c->g = pp_geom3_lift(&pg);
    c->Cg = c->C / c->group, c->Mg = c->Cout / c->group;
    c->kvol = c->g.k[0] * c->g.k[1] * c->g.k[2];
    c->Pin = c->g.in[0] * c->g.in[1] * c->g.in[2];
    c->P = c->g.out[0] * c->g.out[1] * c->g.out[2];
    return PP_OK;
}

/* Calls BODY(xi, oi) for every output position oi whose window reads input
 * position xi through kernel offset (ka, kb, ke). */
#define CONV_WINDOW(g, ka, kb, ke, BODY)                                                           \
    for (int64_t o0 = 0; o0 < (g).out[0]; o0++) {                                                  \
        const int64_t i0 = o0 * (g).s[0] - (g).p[0] + (ka) * (g).d[0];                             \
        if (i0 < 0 || i0 >= (g).in[0]) continue;                                                   \
        for (int64_t o1 = 0; o1 < (g).out[1]; o1++) {                                              \
            const int64_t i1 = o1 * (g).s[1] - (g).p[1] + (kb) * (g).d[1];                         \
            if (i1 < 0 || i1 >= (g).in[1]) continue;                                               \
            for (int64_t o2 = 0; o2 < (g).out[2]; o2++) {                                          \
                const int64_t i2 = o2 * (g).s[2] - (g).p[2] + (ke) * (g).d[2];                     \
                if (i2 < 0 || i2 >= (g).in[2]) continue;                                           \
                const int64_t xi = (i0 * (g).in[1] + i1) * (g).in[2] + i2;                         \
                const int64_t oi = (o0 * (g).out[1] + o1) * (g).out[2] + o2;                       \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    }

/* col[K x P] of one image's group: row (c, ka, kb, ke), column the output
 * position, the input element that kernel offset reads there (0 in the
 * padding). col2im adds such a matrix back into the image. */
static void im2col3(const float *x, const conv_prob *c, float *col) {
    const pp_geom3 *g = &c->g;
    float *dst = col;
    for (int64_t ic = 0; ic < c->Cg; ic++)
        for (int64_t ka = 0; ka < g->k[0]; ka++)
            for (int64_t kb = 0; kb < g->k[1]; kb++)
                for (int64_t ke = 0; ke < g->k[2]; ke++, dst += c->P) {
                    const float *xc = x + ic * c->Pin;
                    memset(dst, 0, (size_t)c->P * sizeof *dst);
                    CONV_WINDOW(*g, ka, kb, ke, dst[oi] = xc[xi])
                }
}

static void col2im3(const float *col, const conv_prob *c, float *x) {
    const pp_geom3 *g = &c->g;
    const float *src = col;
    for (int64_t ic = 0; ic < c->Cg; ic++)
        for (int64_t ka = 0; ka < g->k[0]; ka++)
            for (int64_t kb = 0; kb < g->k[1]; kb++)
                for (int64_t ke = 0; ke < g->k[2]; ke++, src += c->P) {
                    float *xc = x + ic * c->Pin;
                    CONV_WINDOW(*g, ka, kb, ke, xc[xi] += src[oi])
                }
}

/* scratch: the GEMM's, then col (K x P floats), then a [Mg x K] product */
static float *conv_scratch(const char *op, const conv_prob *c, pprt_scratch *scratch, float **col, float **prod,
                           pp_err *err) {
    const size_t K = (size_t)(c->Cg * c->kvol), g = pp_align_up(pprt_sgemm_scratch_bytes(), 64);
    size_t ncol, nprod, need;
    if (__builtin_mul_overflow(K, (size_t)c->P * sizeof(float), &ncol) ||
        __builtin_mul_overflow(K, (size_t)c->Mg * sizeof(float), &nprod) ||
        __builtin_add_overflow(g, pp_align_up(ncol, 64) + nprod, &need)) {
        PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", op);
        return NULL;
    }
    unsigned char *sc = pprt_scratch_get(scratch, need);
    if (!sc) {
        PP_FAIL(err, PP_ENOMEM, "%s kernel: cannot get %zu bytes of scratch", op, need);
        return NULL;
    }
    *col = (float *)(sc + g);
    *prod = (float *)(sc + g + pp_align_up(ncol, 64));
    return (float *)sc;
}

/* dX of each image and group: col = W_g^T dY_g (K x P), added back into the
 * image (col2im) */
pp_status kern_CONVGRADX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                         pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_CONVGRADX, attrs, in, n_in, out, n_out, err));
    conv_prob c;
    PP_TRY(conv_prob_make("pp.ConvGradX", attrs, &out[0].shape, &in[1].shape, &in[0], &c, err));
    const float *dy = in[0].data, *w = in[1].data;
    float *dx = out[0].data;
    memset(dx, 0, (size_t)(c.N * c.C * c.Pin) * sizeof *dx);
    const int64_t K = c.Cg * c.kvol;
    if (K == 0 || c.P == 0 || c.Mg == 0) return PP_OK;
    float *col, *prod, *gs = conv_scratch("pp.ConvGradX", &c, scratch, &col, &prod, err);
    if (!gs) return err->code;
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t gi = 0; gi < c.group; gi++) {
            /* A = W_g^T: W_g is [Mg x K] row-major, so element (k, m) is at m K + k */
            pprt_sgemm(K, c.P, c.Mg, w + gi * c.Mg * K, 1, K, dy + (n * c.Cout + gi * c.Mg) * c.P, c.P, 1, col, c.P,
                       gs);
            col2im3(col, &c, dx + (n * c.C + gi * c.Cg) * c.Pin);
        }
    return PP_OK;
}

/* dW_g = sum over the images of dY_g col^T (Mg x K), the images in order */
pp_status kern_CONVGRADW(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                         pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_CONVGRADW, attrs, in, n_in, out, n_out, err));
    conv_prob c;
    PP_TRY(conv_prob_make("pp.ConvGradW", attrs, &in[1].shape, &out[0].shape, &in[0], &c, err));
    const float *dy = in[0].data, *x = in[1].data;
    float *dw = out[0].data;
    const int64_t K = c.Cg * c.kvol;
    memset(dw, 0, (size_t)(c.Cout * K) * sizeof *dw);
    if (K == 0 || c.P == 0 || c.Mg == 0) return PP_OK;
    float *col, *prod, *gs = conv_scratch("pp.ConvGradW", &c, scratch, &col, &prod, err);
    if (!gs) return err->code;
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t gi = 0; gi < c.group; gi++) {
            im2col3(x + (n * c.C + gi * c.Cg) * c.Pin, &c, col);
            /* B = col^T: element (p, k) of it is col[k P + p] */
            pprt_sgemm(c.Mg, K, c.P, dy + (n * c.Cout + gi * c.Mg) * c.P, c.P, 1, col, 1, c.P, prod, K, gs);
            float *dwg = dw + gi * c.Mg * K;
            for (int64_t i = 0; i < c.Mg * K; i++) dwg[i] += prod[i];
        }
    return PP_OK;
}

/* ---- pp.MaxPoolGrad ------------------------------------------------------------------------ */

/* Calls BODY with xi, the input position, for each tap of output position
 * (o0, o1, o2)'s window that lies inside the input, in row-major order (the
 * pools' gradients: MaxPool's, AveragePool's). */
#define POOL_TAPS(g, o0, o1, o2, BODY)                                                             \
    for (int64_t ka_ = 0; ka_ < (g).k[0]; ka_++) {                                                 \
        const int64_t i0_ = (o0) * (g).s[0] - (g).p[0] + ka_ * (g).d[0];                           \
        if (i0_ < 0 || i0_ >= (g).in[0]) continue;                                                 \
        for (int64_t kb_ = 0; kb_ < (g).k[1]; kb_++) {                                             \
            const int64_t i1_ = (o1) * (g).s[1] - (g).p[1] + kb_ * (g).d[1];                       \
            if (i1_ < 0 || i1_ >= (g).in[1]) continue;                                             \
            for (int64_t ke_ = 0; ke_ < (g).k[2]; ke_++) {                                         \
                const int64_t i2_ = (o2) * (g).s[2] - (g).p[2] + ke_ * (g).d[2];                   \
                if (i2_ < 0 || i2_ >= (g).in[2]) continue;                                         \
                const int64_t xi = (i0_ * (g).in[1] + i1_) * (g).in[2] + i2_;                      \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    }

/* The input position (in its plane) of output (o0, o1, o2)'s largest tap,
 * the first largest, a NaN first (the first NaN of the window is its
 * maximum); -1 when no tap lies inside the input. */
static int64_t maxpool_best(const pp_geom3 *g, const float *xp, int64_t o0, int64_t o1, int64_t o2) {
    int64_t best = -1;
    float bv = 0;
    bool nan_seen = false;
    POOL_TAPS(*g, o0, o1, o2, if (!nan_seen && (best < 0 || xp[xi] > bv || isnan(xp[xi]))) {
        best = xi;
        bv = xp[xi];
        nan_seen = isnan(bv);
    })
    return best;
}

enum { MPG_RUN = 64 }; /* outputs a run */

/* maxpool_best of outputs (o0, o1, o2), o2 in [a, a + w), w <= MPG_RUN,
 * whose taps along the last axis all lie inside the input, into best[]
 * (positions below 2^31): the same taps in the same order for each, tap by
 * tap over the run, with selects, so the compiler runs the outputs side by
 * side (one output at a time, a branch on which tap is largest mispredicted
 * and the comparisons formed a chain: 1.5% of a ResNet-50 training step). */
static void maxpool_run(const pp_geom3 *g, const float *xp, int64_t o0, int64_t o1, int64_t a, int64_t w,
                        int64_t *best) {
    int32_t bi[MPG_RUN], ns[MPG_RUN]; /* ns: all ones once the output's maximum is a NaN */
    float bv[MPG_RUN];
    bool any = false;
    for (int64_t ka = 0; ka < g->k[0]; ka++) {
        const int64_t i0 = o0 * g->s[0] - g->p[0] + ka * g->d[0];
        if (i0 < 0 || i0 >= g->in[0]) continue;
        for (int64_t kb = 0; kb < g->k[1]; kb++) {
            const int64_t i1 = o1 * g->s[1] - g->p[1] + kb * g->d[1];
            if (i1 < 0 || i1 >= g->in[1]) continue;
            for (int64_t ke = 0; ke < g->k[2]; ke++) {
                const int32_t s2 = (int32_t)g->s[2];
                const int32_t off = (int32_t)((i0 * g->in[1] + i1) * g->in[2] - g->p[2] + ke * g->d[2] + a * s2);
                const float *restrict xr = xp + off;
                if (!any) { /* the first tap: every output's, taken */
                    for (int32_t j = 0; j < (int32_t)w; j++)
                        bi[j] = off + j * s2, bv[j] = xr[j * s2], ns[j] = -(int32_t)(bv[j] != bv[j]);
                    any = true;
                    continue;
                }
                for (int32_t j = 0; j < (int32_t)w; j++) { /* masks of all ones or zeros: GCC 12 vectorizes these */
                    const float v = xr[j * s2];
                    const int32_t nan = -(int32_t)(v != v), take = ~ns[j] & (-(int32_t)(v > bv[j]) | nan);
                    bi[j] = (take & (off + j * s2)) | (~take & bi[j]);
                    bv[j] = take ? v : bv[j];
                    ns[j] |= take & nan;
                }
            }
        }
    }
    for (int64_t j = 0; j < w; j++) best[j] = any ? bi[j] : -1;
}

pp_status kern_MAXPOOLGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                           pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_MAXPOOLGRAD, attrs, in, n_in, out, n_out, err));
    const pprt_tensor *x = &in[1];
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, &x->shape, NULL, true, &pg, err));
    pp_shape want = {.rank = x->shape.rank, .dim = {x->shape.dim[0], x->shape.dim[1]}};
    for (int i = 0; i < pg.nsp; i++) want.dim[2 + i] = pg.out[i];
    PP_TRY(pprt_need_shape(&in[0], &want, "dY", err));
    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t planes = x->shape.dim[0] * x->shape.dim[1];
    const int64_t Pin = g.in[0] * g.in[1] * g.in[2], P = g.out[0] * g.out[1] * g.out[2];
    /* the outputs [lo, hi) along the last axis whose taps there all lie inside (none when a
     * plane's positions do not fit 31 bits) */
    int64_t lo = (g.p[2] + g.s[2] - 1) / g.s[2], hi = 0;
    if (g.in[2] - 1 + g.p[2] - (g.k[2] - 1) * g.d[2] >= 0)
        hi = (g.in[2] - 1 + g.p[2] - (g.k[2] - 1) * g.d[2]) / g.s[2] + 1;
    if (hi > g.out[2]) hi = g.out[2];
    if (lo > hi || Pin >= INT32_MAX / 2) lo = hi = g.out[2];
    const float *dy = in[0].data, *xd = x->data;
    float *dx = out[0].data;
    memset(dx, 0, (size_t)(planes * Pin) * sizeof *dx);
    int64_t best[MPG_RUN];
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = xd + pl * Pin, *dyp = dy + pl * P;
        float *dxp = dx + pl * Pin;
        for (int64_t o0 = 0, oi = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2];) { /* in output order: the sums into dX in that order */
                    int64_t w = 1;
                    if (o2 >= lo && o2 < hi) {
                        w = hi - o2 < MPG_RUN ? hi - o2 : MPG_RUN;
                        maxpool_run(&g, xp, o0, o1, o2, w, best);
                    } else
                        best[0] = maxpool_best(&g, xp, o0, o1, o2);
                    for (int64_t j = 0; j < w; j++, oi++)
                        if (best[j] >= 0) dxp[best[j]] += dyp[oi];
                    o2 += w;
                }
    }
    return PP_OK;
}

/* ---- pp.SliceGrad ------------------------------------------------------------------------- */

pp_status kern_SLICEGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                         pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_SLICEGRAD, attrs, in, n_in, out, n_out, err));
    int64_t st[PP_MAX_DIMS], sp[PP_MAX_DIMS], xstr[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0};
    int ns, np;
    PP_TRY(pp_attr_ints(attrs, "starts", st, PP_MAX_DIMS, &ns, err));
    PP_TRY(pp_attr_ints(attrs, "steps", sp, PP_MAX_DIMS, &np, err));
    const pp_shape *xs = &out[0].shape, *ys = &in[0].shape;
    const int r = xs->rank;
    int64_t nx, ny;
    PP_TRY(pprt_numel_of(&out[0], &nx, err));
    PP_TRY(pprt_numel_of(&in[0], &ny, err));
    float *dx = out[0].data;
    const float *dy = in[0].data;
    memset(dx, 0, (size_t)nx * sizeof *dx);
    if (!ny) return PP_OK;
    pp_shape_strides(xs, xstr);
    /* walk dY in order; off: dX's offset of the current element */
    int64_t off = 0;
    for (int d = 0; d < r; d++) off += st[d] * xstr[d];
    for (int64_t i = 0; i < ny; i++) {
        dx[off] = dy[i];
        for (int d = r - 1; d >= 0; d--) {
            off += sp[d] * xstr[d];
            if (++idx[d] < ys->dim[d]) break;
            off -= ys->dim[d] * sp[d] * xstr[d];
            idx[d] = 0;
        }
    }
    return PP_OK;
}

/* ---- pp.GatherGrad ------------------------------------------------------------------------ */

/* Sums in float, in the order of the indices (an embedding's rows are
 * large; a double copy of the table would double its gradient's memory). */
pp_status kern_GATHERGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                          pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_GATHERGRAD, attrs, in, n_in, out, n_out, err));
    int64_t axis, J, nx;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis, err));
    PP_TRY(pprt_numel_of(&in[1], &J, err));
    PP_TRY(pprt_numel_of(&out[0], &nx, err));
    const pp_shape *xs = &out[0].shape;
    int64_t outer = 1, inner = 1;
    const int64_t D = xs->dim[axis];
    for (int i = 0; i < axis; i++) outer *= xs->dim[i];
    for (int i = (int)axis + 1; i < xs->rank; i++) inner *= xs->dim[i];
    float *dx = out[0].data;
    const float *dy = in[0].data;
    memset(dx, 0, (size_t)nx * sizeof *dx);
    for (int64_t j = 0; j < J; j++) {
        int64_t k = in[1].dtype == PP_I64 ? ((const int64_t *)in[1].data)[j] : ((const int32_t *)in[1].data)[j];
        if (k < -D || k >= D)
            return PP_FAIL(err, PP_EINVAL, "pp.GatherGrad kernel: index %lld (element %lld) is outside [-%lld, %lld)",
                           (long long)k, (long long)j, (long long)D, (long long)D);
        if (k < 0) k += D;
        for (int64_t o = 0; o < outer; o++) {
            float *d = dx + (o * D + k) * inner;
            const float *s = dy + (o * J + j) * inner;
            for (int64_t e = 0; e < inner; e++) d[e] += s[e];
        }
    }
    return PP_OK;
}

/* ---- pp.BatchNormGrad ------------------------------------------------------------------------ */

/* (ref.h) */
void pprt_bn_grad_channels(const float *dy, const float *x, const float *sc, const float *mean_in,
                           const float *var_in, float *dx, float *dsc, float *db, int64_t N, int64_t C, int64_t S,
                           float eps, bool training, int64_t c0, int64_t c1) {
    pprt_bn_grad_body(dy, x, sc, mean_in, var_in, dx, dsc, db, N, C, S, eps, training, c0, c1, pprt_chan_sums);
}

pp_status kern_BATCHNORMGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                             pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_BATCHNORMGRAD, attrs, in, n_in, out, n_out, err));
    float eps;
    int64_t training;
    PP_TRY(pp_attr_float(attrs, "epsilon", 1e-5f, &eps, err));
    PP_TRY(pp_attr_int(attrs, "training_mode", 0, &training, err));
    const pp_shape *xs = &in[1].shape;
    int64_t S = 1;
    for (int i = 2; i < xs->rank; i++) S *= xs->dim[i];
    pprt_bn_grad_channels(in[0].data, in[1].data, in[2].data, in[3].data, in[4].data, out[0].data,
                          n_out > 1 ? out[1].data : NULL, n_out > 2 ? out[2].data : NULL, xs->dim[0], xs->dim[1], S,
                          eps, training != 0, 0, xs->dim[1]);
    return PP_OK;
}

/* ---- the normalizations' gradients ------------------------------------------------------------ *
 * With x^ = (x - mean) / sqrt(var + eps) over a group of M elements with its
 * own statistics and g = dY * scale: dX = (g - mean(g) - x^ mean(g x^)) /
 * sqrt(var + eps); dscale = sum of dY x^, dB = sum of dY, over the elements
 * that share the parameter. All in double. */

/* One instance's group: the M elements x[base ..], one scale; its sums
 * added to *dscale and *dB. */
static void norm_group_grad(const float *x, const float *dy, float *dx, int64_t base, int64_t M, float scale,
                            double eps, double *dscale, double *dB) {
    if (M == 0) return;
    x += base, dy += base, dx += base;
    double s = 0, q = 0;
    for (int64_t i = 0; i < M; i++) s += x[i];
    const double mu = s / (double)M;
    for (int64_t i = 0; i < M; i++) {
        const double d = x[i] - mu;
        q += d * d;
    }
    const double inv = 1.0 / sqrt(q / (double)M + eps);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < M; i++) {
        const double xh = (x[i] - mu) * inv, g = (double)dy[i] * scale;
        sg += g, sgx += g * xh;
        *dscale += (double)dy[i] * xh, *dB += dy[i];
    }
    const double mg = sg / (double)M, mgx = sgx / (double)M;
    for (int64_t i = 0; i < M; i++) {
        const double xh = (x[i] - mu) * inv;
        dx[i] = (float)(inv * ((double)dy[i] * scale - mg - xh * mgx));
    }
}

/* 2 P doubles of scratch, zeroed: the sums of dscale and dB */
static pp_status param_sums(const char *op, pprt_scratch *scratch, int64_t P, double **acc, pp_err *err) {
    size_t need;
    if (__builtin_mul_overflow((size_t)(2 * P), sizeof(double), &need))
        return PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", op);
    *acc = pprt_scratch_get(scratch, need ? need : 1);
    if (!*acc) return PP_FAIL(err, PP_ENOMEM, "%s kernel: cannot get %zu bytes of scratch", op, need);
    memset(*acc, 0, need);
    return PP_OK;
}

static void param_out(const double *acc, int64_t P, pprt_tensor *out) {
    float *ds = out[1].data, *db = out[2].data;
    for (int64_t k = 0; k < P; k++) ds[k] = (float)acc[k], db[k] = (float)acc[P + k];
}

pp_status kern_INSTANCENORMGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                                pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_INSTANCENORMGRAD, attrs, in, n_in, out, n_out, err));
    float eps;
    PP_TRY(pp_attr_float(attrs, "epsilon", 1e-5f, &eps, err));
    const pp_shape *xs = &in[1].shape;
    const int64_t N = xs->dim[0], C = xs->dim[1];
    int64_t S = 1;
    for (int i = 2; i < xs->rank; i++) S *= xs->dim[i];
    double *acc;
    PP_TRY(param_sums("pp.InstanceNormGrad", scratch, C, &acc, err));
    const float *dy = in[0].data, *x = in[1].data, *scale = in[2].data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            norm_group_grad(x, dy, out[0].data, (n * C + c) * S, S, scale[c], eps, acc + c, acc + C + c);
    param_out(acc, C, out);
    return PP_OK;
}

void pprt_ln_grad_rows(const float *x, const float *dy, const float *scale, float *dx, double *mu, double *inv,
                       int64_t inner, double eps, int64_t o0, int64_t o1) {
    const double M = (double)inner;
    for (int64_t o = o0; o < o1; o++) {
        const float *xr = x + o * inner, *dyr = dy + o * inner;
        double s = 0, q = 0, sg = 0, sgx = 0;
        for (int64_t b = 0; b < inner; b++) s += xr[b];
        const double m = s / M;
        for (int64_t b = 0; b < inner; b++) {
            const double d = xr[b] - m;
            q += d * d;
        }
        const double iv = 1.0 / sqrt(q / M + eps);
        for (int64_t b = 0; b < inner; b++) {
            const double xh = (xr[b] - m) * iv, g = (double)dyr[b] * scale[b];
            sg += g, sgx += g * xh;
        }
        const double mg = sg / M, mgx = sgx / M;
        for (int64_t b = 0; b < inner; b++) {
            const double xh = (xr[b] - m) * iv;
            dx[o * inner + b] = (float)(iv * ((double)dyr[b] * scale[b] - mg - xh * mgx));
        }
        mu[o] = m, inv[o] = iv;
    }
}

void pprt_ln_grad_cols(const float *x, const float *dy, const double *mu, const double *inv, float *ds, float *db,
                       int64_t outer, int64_t inner, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
        double a = 0, b = 0;
        for (int64_t o = 0; o < outer; o++) {
            const int64_t i = o * inner + c;
            a += (double)dy[i] * ((x[i] - mu[o]) * inv[o]);
            b += dy[i];
        }
        ds[c] = (float)a, db[c] = (float)b;
    }
}

/* The rows with their own statistics, then the parameters' sums over the
 * rows: norm_group_grad's arithmetic for a group of one row, in the two
 * passes that the oneDNN executor splits between its threads. */
pp_status kern_LAYERNORMGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                             pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_LAYERNORMGRAD, attrs, in, n_in, out, n_out, err));
    int axis;
    float eps;
    int64_t outer, inner;
    PP_TRY(pp_norm_rows(attrs, &in[1].shape, &axis, &eps, &outer, &inner, err));
    double *st;
    PP_TRY(param_sums("pp.LayerNormGrad", scratch, outer, &st, err)); /* each row's mean and 1/std */
    const float *dy = in[0].data, *x = in[1].data;
    pprt_ln_grad_rows(x, dy, in[2].data, out[0].data, st, st + outer, inner, eps, 0, outer);
    pprt_ln_grad_cols(x, dy, st, st + outer, out[1].data, out[2].data, outer, inner, 0, inner);
    return PP_OK;
}

/* ---- pp.AvgPoolGrad ---------------------------------------------------------------------------- */

pp_status kern_AVGPOOLGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                           pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_AVGPOOLGRAD, attrs, in, n_in, out, n_out, err));
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, &out[0].shape, NULL, true, &pg, err));
    int64_t cip, sum;
    PP_TRY(pp_attr_int(attrs, "count_include_pad", 0, &cip, err));
    PP_TRY(pp_attr_int(attrs, "sum", 0, &sum, err)); /* 1: the window sums' adjoint (LpPool's gradient) */
    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t planes = out[0].shape.dim[0] * out[0].shape.dim[1];
    const int64_t Pin = g.in[0] * g.in[1] * g.in[2], P = g.out[0] * g.out[1] * g.out[2];
    size_t need;
    if (__builtin_mul_overflow((size_t)Pin, sizeof(double), &need))
        return PP_FAIL(err, PP_ENOMEM, "pp.AvgPoolGrad kernel: scratch size overflows");
    double *acc = pprt_scratch_get(scratch, need ? need : 1);
    if (!acc) return PP_FAIL(err, PP_ENOMEM, "pp.AvgPoolGrad kernel: cannot get %zu bytes of scratch", need);
    const float *dy = in[0].data;
    float *dx = out[0].data;
    for (int64_t pl = 0; pl < planes; pl++) {
        memset(acc, 0, need);
        const float *dyp = dy + pl * P;
        for (int64_t o0 = 0, oi = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++, oi++) {
                    /* the divisor, as the forward kernel's: the taps inside the
                     * input, or inside the input and its pads */
                    const int64_t o[3] = {o0, o1, o2};
                    int64_t padded = 1, inside = 1;
                    for (int i = 0; i < 3; i++) {
                        int64_t cp = 0, ci = 0;
                        for (int64_t j = 0; j < g.k[i]; j++) {
                            const int64_t t = o[i] * g.s[i] - g.p[i] + j * g.d[i];
                            cp += t >= -g.p[i] && t < g.in[i] + g.p1[i];
                            ci += t >= 0 && t < g.in[i];
                        }
                        padded *= cp, inside *= ci;
                    }
                    const int64_t div = sum ? (inside > 0) : cip ? padded : inside;
                    if (!div) continue;
                    const double v = (double)dyp[oi] / (double)div;
                    POOL_TAPS(g, o0, o1, o2, acc[xi] += v)
                }
        float *dxp = dx + pl * Pin;
        for (int64_t i = 0; i < Pin; i++) dxp[i] = (float)acc[i];
    }
    return PP_OK;
}

/* ---- pp.Dropout (training mode) ------------------------------------------------------------- */

/* splitmix64's finalizer after its increment: a bijection of 64-bit words */
static uint64_t drop_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element i of a micro-batch is kept when u_i >= ratio, u_i the top 53 bits
 * of mix(base ^ i) as a double in [0, 1), base = mix(mix(mix(seed) ^ key) ^
 * counter): a function of (seed, key, counter, i) alone, so every split,
 * thread count and backend draws the same mask (tests/train/dropout.py
 * computes it independently in NumPy). */
pp_status kern_DROPOUTTRAIN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                            pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_DROPOUTTRAIN, attrs, in, n_in, out, n_out, err));
    float ratio;
    int64_t key;
    PP_TRY(pp_attr_float(attrs, "ratio", 0.5f, &ratio, err));
    PP_TRY(pp_attr_int(attrs, "key", 0, &key, err));
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    const int64_t *sc = in[1].data;
    const float *x = in[0].data;
    float *y = out[0].data, *m = out[1].data;
    const bool off = sc[1] < 0 || ratio <= 0.0f;
    const float scale = ratio >= 1.0f ? 0.0f : (float)(1.0 / (1.0 - (double)ratio));
    const uint64_t base = drop_mix(drop_mix(drop_mix((uint64_t)sc[0]) ^ (uint64_t)key) ^ (uint64_t)sc[1]);
    for (int64_t i = 0; i < n; i++) {
        float k = 1.0f;
        if (!off) {
            const double u = (double)(drop_mix(base ^ (uint64_t)i) >> 11) * 0x1p-53;
            k = u >= (double)ratio ? scale : 0.0f;
        }
        m[i] = k;
        y[i] = x[i] * k;
    }
    return PP_OK;
}
