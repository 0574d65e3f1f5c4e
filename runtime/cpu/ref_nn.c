/* ref_nn.c: reference kernels of the ops in ir/ops_nn.def (ConvTranspose, Col2Im,
 * AveragePool, GlobalMaxPool, the normalizations, MatMul, Einsum,
 * Softmax/LogSoftmax, the reductions, ArgMax/ArgMin, TopK, Resize).
 *
 * Same rules as ref_kernels.c: single-threaded, deterministic (every output
 * is reduced in an order fixed by the shapes), no aliasing, errors as a
 * pp_status. Attributes and constant inputs are parsed by the functions of
 * ir/shape_nn.h, the very ones shape inference used, so the two agree.
 *   - ConvTranspose, MatMul (f32) and the two-operand Einsum (f32) run on
 *     pprt_sgemm; ConvTranspose scatters the GEMM's columns (col2im).
 *   - means, variances and sums accumulate in double.
 *   - Resize is separable: one 1-D pass per resized axis, each output
 *     coordinate a short list of (input index, weight) taps. */
#include "ref.h"
#include "../../ir/op_fns.h"
#include "../../ir/scalar.h"
#include "../../ir/shape_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------------- */

static bool present(const pprt_tensor *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Check every output against what shape inference says it must be: the kernels
 * below trust the shapes from then on. */
static pp_status check_outputs(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in,
                               const pprt_tensor *out, int n_out, pp_err *err) {
    pp_tinfo ti[PP_EINSUM_MAX_OPS > 5 ? PP_EINSUM_MAX_OPS : 5], to[3];
    const char *name = pp_op_table[op].name;
    if (n_in < pp_op_table[op].min_inputs || n_in > pp_op_table[op].max_inputs ||
        n_in > (int)(sizeof ti / sizeof ti[0]))
        return PP_FAIL(err, PP_EINVAL, "%s kernel: %d inputs", name, n_in);
    if (n_out < 1 || n_out > pp_op_table[op].max_outputs || n_out > 3)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: %d outputs", name, n_out);
    for (int i = 0; i < n_in; i++) {
        ti[i] = pprt_tinfo_of(&in[i]);
        if (in[i].dtype != PP_UNDEFINED && !in[i].data && numel(&in[i].shape) > 0)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: input %d has no data", name, i);
    }
    pp_err e = {0};
    if (pp_infer(op, attrs, ti, n_in, to, n_out, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s kernel: %s", name, e.msg);
    for (int k = 0; k < n_out; k++) {
        if (out[k].dtype != to[k].dtype)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: output %d has type %s, expected %s", name,
                           k, pp_dtype_name(out[k].dtype), pp_dtype_name(to[k].dtype));
        PP_TRY(pprt_need_shape(&out[k], &to[k].shape, "output", err));
        if (!out[k].data && numel(&out[k].shape) > 0)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: output %d has no data", name, k);
    }
    return PP_OK;
}

/* Scratch: sgemm packing space followed by `extra` bytes (64-aligned). */
static pp_status gemm_scratch(pprt_scratch *scratch, size_t extra, float **packs, void **rest,
                              const char *op, pp_err *err) {
    size_t a = pp_align_up(pprt_sgemm_scratch_bytes(), 64), total;
    if (pp_add_ovf(a, pp_align_up(extra, 64), &total) || pp_align_up(extra, 64) < extra)
        return PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", op);
    unsigned char *p = pprt_scratch_get(scratch, total);
    if (!p) return PP_FAIL(err, PP_ENOMEM, "%s kernel: cannot get %zu bytes of scratch", op, total);
    *packs = (float *)p;
    if (rest) *rest = p + a;
    return PP_OK;
}

/* bytes for n elements of size sz, overflow-checked */
static pp_status nbytes(int64_t n, size_t sz, size_t *out, const char *op, pp_err *err) {
    if (n < 0 || pp_mul_ovf((size_t)n, sz, out))
        return PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", op);
    return PP_OK;
}


/* ---- ConvTranspose ------------------------------------------------------------------ */

/* GEMM output rows per chunk: at most this many floats of columns. */
#define CT_CHUNK_FLOATS ((int64_t)1 << 20)

pp_status kern_CONVTRANSPOSE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                             int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_CONVTRANSPOSE); /* a half plan's: in f32 on the half values, Y rounded once */
    PP_TRY(check_outputs(PP_OP_CONVTRANSPOSE, attrs, in, n_in, out, n_out, err));
    pp_geom pg;
    int64_t group;
    PP_TRY(pp_convt_geom(attrs, &in[0].shape, &in[1].shape, &pg, &group, err));
    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t N = in[0].shape.dim[0], C = in[0].shape.dim[1], Mg = in[1].shape.dim[1];
    const int64_t M = Mg * group, Cg = C / group;
    const int64_t kvol = g.k[0] * g.k[1] * g.k[2];
    const int64_t Pin = g.in[0] * g.in[1] * g.in[2], P = g.out[0] * g.out[1] * g.out[2];
    const int64_t rows = Mg * kvol; /* GEMM rows: (output channel, kernel tap) */
    const float *xd = in[0].data, *wd = in[1].data;
    const float *bd = present(in, n_in, 2) ? in[2].data : NULL;
    float *yd = out[0].data;
    int64_t total = N * M * P;
    if (total == 0) return PP_OK;
    memset(yd, 0, (size_t)total * sizeof(float));

    int64_t rb = Pin ? CT_CHUNK_FLOATS / Pin : rows;
    if (rb < 1) rb = 1;
    if (rb > rows) rb = rows;
    size_t colb = 0;
    PP_TRY(nbytes(rb * Pin, sizeof(float), &colb, "ConvTranspose", err));
    float *packs = NULL;
    void *colv = NULL;
    PP_TRY(gemm_scratch(scratch, colb, &packs, &colv, "ConvTranspose", err));
    float *col = colv;

    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            const float *xg = xd + (n * C + gi * Cg) * Pin; /* [Cg, Pin] */
            const float *wg = wd + gi * Cg * rows;          /* [Cg, rows] */
            float *yg = yd + (n * M + gi * Mg) * P;
            for (int64_t r0 = 0; r0 < rows; r0 += rb) {
                const int64_t nr = min64(rb, rows - r0);
                /* col[r, i] = sum_c W[c, r0 + r] * X[c, i] */
                pprt_sgemm(nr, Pin, Cg, wg + r0, 1, rows, xg, Pin, 1, col, Pin, packs);
                for (int64_t r = 0; r < nr; r++) {
                    const int64_t row = r0 + r, m = row / kvol, t = row % kvol;
                    const int64_t ka = t / (g.k[1] * g.k[2]), kb = (t / g.k[2]) % g.k[1],
                                  ke = t % g.k[2];
                    float *ym = yg + m * P;
                    const float *cr = col + r * Pin;
                    const int64_t off2 = ke * g.d[2] - g.p[2];
                    int64_t lo, hi;
                    pprt_stride_range(g.in[2], g.out[2], g.s[2], off2, &lo, &hi);
                    if (lo == hi) continue;
                    for (int64_t i0 = 0; i0 < g.in[0]; i0++) {
                        const int64_t o0 = i0 * g.s[0] + ka * g.d[0] - g.p[0];
                        if (o0 < 0 || o0 >= g.out[0]) continue;
                        for (int64_t i1 = 0; i1 < g.in[1]; i1++) {
                            const int64_t o1 = i1 * g.s[1] + kb * g.d[1] - g.p[1];
                            if (o1 < 0 || o1 >= g.out[1]) continue;
                            const float *restrict src = cr + (i0 * g.in[1] + i1) * g.in[2];
                            float *restrict dst = ym + (o0 * g.out[1] + o1) * g.out[2] + off2;
                            const int64_t s = g.s[2];
                            for (int64_t i2 = lo; i2 < hi; i2++) dst[i2 * s] += src[i2];
                        }
                    }
                }
            }
            if (bd) pprt_add_bias(yg, bd + gi * Mg, Mg, P);
        }
    return PP_OK;
}

/* ---- Col2Im -------------------------------------------------------------------------------- */

/* y[n, c, p] = the sum of x[n, c * kvol + t, b] over the block offsets t
 * (row-major over block_shape) whose block b covers image point p (p = b *
 * stride - pad + t * dilation on every axis: at most one b for each t). A
 * gather: each point sums its contributions in double, in the order of t,
 * and is rounded once (the ONNX reference and onnxruntime scatter in float,
 * in that order too). */
pp_status kern_COL2IM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                      pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_COL2IM, attrs, in, n_in, out, n_out, err));
    const pp_tinfo ti[3] = {pprt_tinfo_of(&in[0]), pprt_tinfo_of(&in[1]), pprt_tinfo_of(&in[2])};
    pp_col2im g;
    PP_TRY(pp_col2im_parse(attrs, ti, &g, err));
    const int k = g.k;
    int64_t P = 1;
    for (int d = 0; d < k; d++) P *= g.img[d];
    const bool f64 = in[0].dtype == PP_F64;
    const float *xf = in[0].data;
    const double *xd = in[0].data;
    for (int64_t pl = 0; pl < g.n * g.c; pl++) {
        const int64_t base = pl * g.kvol * g.L; /* x[n, c * kvol + t, b] = base + t * L + b */
        int64_t o[PP_MAX_DIMS] = {0};
        for (int64_t p = 0; p < P; p++) {
            double acc = 0;
            int64_t t[PP_MAX_DIMS] = {0};
            for (int64_t tt = 0; tt < g.kvol; tt++) {
                int64_t b = 0;
                bool hit = true;
                for (int d = 0; d < k && hit; d++) {
                    const int64_t q = o[d] + g.pad0[d] - t[d] * g.dil[d];
                    hit = q >= 0 && q % g.stride[d] == 0 && q / g.stride[d] < g.nb[d];
                    b = b * g.nb[d] + q / g.stride[d];
                }
                if (hit) {
                    const int64_t at = base + tt * g.L + b;
                    acc += f64 ? xd[at] : (double)xf[at];
                }
                for (int d = k - 1; d >= 0; d--) { /* the next offset */
                    if (++t[d] < g.blk[d]) break;
                    t[d] = 0;
                }
            }
            if (f64) ((double *)out[0].data)[pl * P + p] = acc;
            else ((float *)out[0].data)[pl * P + p] = (float)acc;
            for (int d = k - 1; d >= 0; d--) { /* the next image point */
                if (++o[d] < g.img[d]) break;
                o[d] = 0;
            }
        }
    }
    return PP_OK;
}

/* ---- AveragePool -------------------------------------------------------------------------- */

/* The window of output (o0, o1, o2) over the taps inside the input, in
 * order: the sum of x (p 0) or of |x|^p, and the taps' count. */
static double pool_window(const pp_geom3 *g, const float *x, int64_t o0, int64_t o1, int64_t o2, int64_t p,
                          int64_t *cnt) {
    double sum = 0;
    *cnt = 0;
    for (int64_t a = 0; a < g->k[0]; a++) {
        int64_t i0 = o0 * g->s[0] - g->p[0] + a * g->d[0];
        if (i0 < 0 || i0 >= g->in[0]) continue;
        for (int64_t b = 0; b < g->k[1]; b++) {
            int64_t i1 = o1 * g->s[1] - g->p[1] + b * g->d[1];
            if (i1 < 0 || i1 >= g->in[1]) continue;
            const float *row = x + (i0 * g->in[1] + i1) * g->in[2];
            for (int64_t e = 0; e < g->k[2]; e++) {
                int64_t i2 = o2 * g->s[2] - g->p[2] + e * g->d[2];
                if (i2 < 0 || i2 >= g->in[2]) continue;
                sum += p ? pow(fabs((double)row[i2]), (double)p) : (double)row[i2];
                (*cnt)++;
            }
        }
    }
    return sum;
}

pp_status kern_AVGPOOL(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_AVGPOOL);
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_AVGPOOL, attrs, in, n_in, out, n_out, err));
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, &in[0].shape, NULL, true, &pg, err));
    int64_t cip;
    PP_TRY(pp_attr_int(attrs, "count_include_pad", 0, &cip, err));
    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t planes = in[0].shape.dim[0] * in[0].shape.dim[1];
    const int64_t Pin = g.in[0] * g.in[1] * g.in[2], P = g.out[0] * g.out[1] * g.out[2];
    const float *xd = in[0].data;
    float *yd = out[0].data;
    /* per dim and output position: taps inside the input, and inside input+pads */
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = xd + pl * Pin;
        float *y = yd + pl * P;
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                    const int64_t o[3] = {o0, o1, o2};
                    int64_t padded = 1;
                    for (int i = 0; i < 3; i++) {
                        int64_t c = 0;
                        for (int64_t j = 0; j < g.k[i]; j++) {
                            int64_t t = o[i] * g.s[i] - g.p[i] + j * g.d[i];
                            if (t >= -g.p[i] && t < g.in[i] + g.p1[i]) c++;
                        }
                        padded *= c;
                    }
                    int64_t cnt;
                    const double sum = pool_window(&g, x, o0, o1, o2, 0, &cnt);
                    int64_t div = cip ? padded : cnt;
                    *y++ = (float)(div ? sum / (double)div : NAN);
                }
    }
    return PP_OK;
}

/* ---- LpPool ---------------------------------------------------------------------------------- */

/* (sum of |x|^p over the window)^(1/p), in double; pads add nothing. */
pp_status kern_LPPOOL(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                      pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_LPPOOL);
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_LPPOOL, attrs, in, n_in, out, n_out, err));
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, &in[0].shape, NULL, true, &pg, err));
    int64_t p;
    PP_TRY(pp_attr_int(attrs, "p", 2, &p, err));
    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t planes = in[0].shape.dim[0] * in[0].shape.dim[1];
    const int64_t Pin = g.in[0] * g.in[1] * g.in[2];
    float *y = out[0].data;
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                    int64_t cnt;
                    const double sum = pool_window(&g, (const float *)in[0].data + pl * Pin, o0, o1, o2, p, &cnt);
                    *y++ = (float)pow(sum, 1.0 / (double)p);
                }
    return PP_OK;
}

/* ---- GlobalMaxPool ------------------------------------------------------------------------- */

pp_status kern_GLOBALMAXPOOL(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                             int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_GLOBALMAXPOOL); /* half: widened and narrowed exactly */
    PP_TRY(check_outputs(PP_OP_GLOBALMAXPOOL, attrs, in, n_in, out, n_out, err));
    const pp_shape *xs = &in[0].shape;
    const int64_t planes = xs->dim[0] * xs->dim[1], S = numel(xs) / (planes ? planes : 1);
    for (int64_t p = 0; p < planes; p++) {
        /* NaN is skipped, only NaN gives NaN; the max of nothing is -inf */
        double m = -INFINITY;
        bool num = false, nan = false;
        for (int64_t i = 0; i < S; i++) {
            double v = in[0].dtype == PP_F32 ? ((const float *)in[0].data)[p * S + i]
                                              : ((const double *)in[0].data)[p * S + i];
            if (v != v) nan = true;
            else if (num = true, v > m) m = v;
        }
        if (nan && !num) m = NAN;
        if (out[0].dtype == PP_F32) ((float *)out[0].data)[p] = (float)m;
        else ((double *)out[0].data)[p] = m;
    }
    return PP_OK;
}

/* ---- normalizations ------------------------------------------------------------------------- */

/* Mean and 1/sqrt(var + eps) of n floats with stride 1, in double. */
static void moments(const float *x, int64_t n, double eps, double *mean, double *inv) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double m = n ? s / (double)n : 0.0, v = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = x[i] - m;
        v += d * d;
    }
    v = n ? v / (double)n : 0.0;
    *mean = m;
    *inv = 1.0 / sqrt(v + eps);
}

pp_status kern_INSTANCENORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                            int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_INSTANCENORM); /* a half plan's: in f32, Y rounded */
    PP_TRY(check_outputs(PP_OP_INSTANCENORM, attrs, in, n_in, out, n_out, err));
    float eps;
    PP_TRY(pp_attr_float(attrs, "epsilon", 1e-5f, &eps, err));
    const pp_shape *xs = &in[0].shape;
    const int64_t N = xs->dim[0], C = xs->dim[1];
    int64_t S = 1;
    for (int i = 2; i < xs->rank; i++) S *= xs->dim[i];
    const float *x = in[0].data, *sc = in[1].data, *b = in[2].data;
    float *y = out[0].data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *xp = x + (n * C + c) * S;
            float *yp = y + (n * C + c) * S;
            double m, inv;
            moments(xp, S, eps, &m, &inv);
            const double s = inv * sc[c], bb = b[c];
            for (int64_t i = 0; i < S; i++) yp[i] = (float)((xp[i] - m) * s + bb);
        }
    return PP_OK;
}

/* Expand t (broadcast to the trailing dims of x from `axis`) into dst[inner]. */
static void expand_tail(const pprt_tensor *t, const pp_shape *x, int axis, float *dst) {
    const int nr = x->rank - axis;
    int64_t dims[PP_MAX_DIMS], strides[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0};
    int64_t st = 1, inner = 1;
    for (int i = nr - 1; i >= 0; i--) {
        int ti = i - (nr - t->shape.rank);
        int64_t td = ti >= 0 ? t->shape.dim[ti] : 1;
        dims[i] = x->dim[axis + i];
        strides[i] = td == 1 ? 0 : st;
        st *= td;
        inner *= dims[i];
    }
    const float *src = t->data;
    for (int64_t k = 0; k < inner; k++) {
        int64_t off = 0;
        for (int i = 0; i < nr; i++) off += idx[i] * strides[i];
        dst[k] = src[off];
        for (int i = nr - 1; i >= 0; i--) {
            if (++idx[i] < dims[i]) break;
            idx[i] = 0;
        }
    }
}

pp_status kern_LAYERNORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_LAYERNORM);
    PP_TRY(check_outputs(PP_OP_LAYERNORM, attrs, in, n_in, out, n_out, err));
    const pp_shape *xs = &in[0].shape;
    int axis;
    float eps;
    int64_t outer, inner;
    PP_TRY(pp_norm_rows(attrs, xs, &axis, &eps, &outer, &inner, err));
    const bool has_b = present(in, n_in, 2);
    size_t nb = 0;
    PP_TRY(nbytes(2 * inner, sizeof(float), &nb, "LayerNormalization", err));
    float *sc = pprt_scratch_get(scratch, nb);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "LayerNormalization kernel: out of memory");
    float *bs = sc + inner;
    expand_tail(&in[1], xs, axis, sc);
    if (has_b) expand_tail(&in[2], xs, axis, bs);
    else memset(bs, 0, (size_t)inner * sizeof(float));
    const float *x = in[0].data;
    float *y = out[0].data;
    float *mean_o = n_out > 1 ? out[1].data : NULL, *inv_o = n_out > 2 ? out[2].data : NULL;
    for (int64_t o = 0; o < outer; o++) {
        const float *xp = x + o * inner;
        float *yp = y + o * inner;
        double m, inv;
        moments(xp, inner, eps, &m, &inv);
        for (int64_t i = 0; i < inner; i++) yp[i] = (float)((xp[i] - m) * inv * sc[i] + bs[i]);
        if (mean_o) mean_o[o] = (float)m;
        if (inv_o) inv_o[o] = (float)inv;
    }
    return PP_OK;
}

void pprt_ref_groupnorm(const float *x, float *y, int64_t N, int64_t C, int64_t S, int64_t G, float eps,
                        const float *sc, const float *b, pprt_gn_affine how) {
    const int64_t Cg = C / G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++) {
            const int64_t base = (n * C + gi * Cg) * S;
            double m, inv;
            moments(x + base, Cg * S, eps, &m, &inv);
            for (int64_t c = 0; c < Cg; c++) {
                const int64_t ch = gi * Cg + c, pi = how == PPRT_GN_PER_GROUP ? gi : ch;
                const float *xp = x + base + c * S;
                float *yp = y + base + c * S;
                if (how == PPRT_GN_AFTER) {
                    const float s = sc[ch], bb = b[ch];
                    for (int64_t i = 0; i < S; i++) yp[i] = (float)((xp[i] - m) * inv) * s + bb;
                    continue;
                }
                const double s = inv * sc[pi], bb = b[pi];
                for (int64_t i = 0; i < S; i++) yp[i] = (float)((xp[i] - m) * s + bb);
            }
        }
}

pp_status pprt_groupnorm_kernel(pp_op op, pprt_gn_affine how, pp_attrs attrs, const pprt_tensor *in, int n_in,
                                pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(check_outputs(op, attrs, in, n_in, out, n_out, err));
    const pp_shape *xs = &in[0].shape;
    int64_t G;
    float eps;
    PP_TRY(pp_attr_int(attrs, "num_groups", 1, &G, err));
    PP_TRY(pp_attr_float(attrs, "epsilon", 1e-5f, &eps, err));
    int64_t S = 1;
    for (int i = 2; i < xs->rank; i++) S *= xs->dim[i];
    pprt_ref_groupnorm(in[0].data, out[0].data, xs->dim[0], xs->dim[1], S, G, eps, in[1].data, in[2].data, how);
    return PP_OK;
}

pp_status kern_GROUPNORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_GROUPNORM); /* a half plan's: in f32, Y rounded */
    return pprt_groupnorm_kernel(PP_OP_GROUPNORM, attrs.opset >= 21 ? PPRT_GN_PER_CHANNEL : PPRT_GN_PER_GROUP,
                                 attrs, in, n_in, out, n_out, err);
}

/* ---- MatMul --------------------------------------------------------------------------------- */

/* Batched products over a broadcast batch: for each output batch index, the
 * element offsets of A's and B's matrices. */
typedef struct bcast_iter {
    int nb;
    int64_t dim[PP_MAX_DIMS], sa[PP_MAX_DIMS], sb[PP_MAX_DIMS], idx[PP_MAX_DIMS];
    int64_t oa, ob;
} bcast_iter;

/* a, b: the operands' batch shapes (possibly of different ranks); mat_a,
 * mat_b: elements per matrix. */
static void bcast_init(bcast_iter *it, const pp_shape *a, const pp_shape *b, int64_t mat_a,
                       int64_t mat_b) {
    memset(it, 0, sizeof *it);
    int nb = a->rank > b->rank ? a->rank : b->rank;
    it->nb = nb;
    int64_t ka = mat_a, kb = mat_b;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - a->rank), ib = i - (nb - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        it->dim[i] = da > db ? da : db;
        it->sa[i] = da == 1 ? 0 : ka;
        it->sb[i] = db == 1 ? 0 : kb;
        ka *= da;
        kb *= db;
    }
}

static void bcast_next(bcast_iter *it) {
    for (int i = it->nb - 1; i >= 0; i--) {
        it->oa += it->sa[i];
        it->ob += it->sb[i];
        if (++it->idx[i] < it->dim[i]) return;
        it->oa -= it->sa[i] * it->dim[i];
        it->ob -= it->sb[i] * it->dim[i];
        it->idx[i] = 0;
    }
}

/* Naive product for the non-f32 types: C[M,N] = A[M,K] B[K,N], row-major. */
static void matmul_generic(pp_dtype t, int64_t M, int64_t N, int64_t K, const void *A,
                           int64_t oa, const void *B, int64_t ob, void *C, int64_t oc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            if (t == PP_F64) {
                const double *a = (const double *)A + oa + i * K, *b = (const double *)B + ob + j;
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += a[k] * b[k * N];
                ((double *)C)[oc + i * N + j] = s;
            } else if (t == PP_I64) {
                const int64_t *a = (const int64_t *)A + oa + i * K, *b = (const int64_t *)B + ob + j;
                uint64_t s = 0; /* wraps like two's complement */
                for (int64_t k = 0; k < K; k++) s += (uint64_t)a[k] * (uint64_t)b[k * N];
                ((int64_t *)C)[oc + i * N + j] = (int64_t)s;
            } else {
                const int32_t *a = (const int32_t *)A + oa + i * K, *b = (const int32_t *)B + ob + j;
                uint32_t s = 0;
                for (int64_t k = 0; k < K; k++) s += (uint32_t)a[k] * (uint32_t)b[k * N];
                ((int32_t *)C)[oc + i * N + j] = (int32_t)s;
            }
        }
}

pp_status kern_MATMUL(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_MATMUL);
    PP_TRY(check_outputs(PP_OP_MATMUL, attrs, in, n_in, out, n_out, err));
    const pp_shape *as = &in[0].shape, *bs = &in[1].shape;
    const int64_t K = as->dim[as->rank - 1];
    const int64_t M = as->rank >= 2 ? as->dim[as->rank - 2] : 1;
    const int64_t N = bs->rank >= 2 ? bs->dim[bs->rank - 1] : 1;
    if (numel(&out[0].shape) == 0) return PP_OK;
    pp_shape ba = {.rank = as->rank > 2 ? as->rank - 2 : 0};
    pp_shape bb = {.rank = bs->rank > 2 ? bs->rank - 2 : 0};
    for (int i = 0; i < ba.rank; i++) ba.dim[i] = as->dim[i];
    for (int i = 0; i < bb.rank; i++) bb.dim[i] = bs->dim[i];
    const pp_dtype t = in[0].dtype;
    if (t != PP_F32) {
        bcast_iter it;
        bcast_init(&it, &ba, &bb, M * K, K * N);
        const int64_t batches = numel(&out[0].shape) / (M * N);
        for (int64_t bi = 0; bi < batches; bi++, bcast_next(&it))
            matmul_generic(t, M, N, K, in[0].data, it.oa, in[1].data, it.ob, out[0].data,
                           bi * M * N);
        return PP_OK;
    }
    float *packs = NULL;
    PP_TRY(gemm_scratch(scratch, 0, &packs, NULL, "MatMul", err));
    const float *A = in[0].data, *B = in[1].data;
    float *Y = out[0].data;
    if (bb.rank == 0) {
        /* B is one matrix (or vector): fold A's batch dims into M, one GEMM */
        const int64_t rows = numel(&out[0].shape) / N; /* N > 0: the output is not empty */
        pprt_sgemm(rows, N, K, A, K, 1, B, N, 1, Y, N, packs);
        return PP_OK;
    }
    bcast_iter it;
    bcast_init(&it, &ba, &bb, M * K, K * N);
    const int64_t batches = numel(&out[0].shape) / (M * N);
    for (int64_t bi = 0; bi < batches; bi++, bcast_next(&it))
        pprt_sgemm(M, N, K, A + it.oa, K, 1, B + it.ob, N, 1, Y + bi * M * N, N, packs);
    return PP_OK;
}

/* ---- Einsum ----------------------------------------------------------------------------------- */

/* Element stride of each label in operand i (summed over repeated labels, so a
 * repeated label walks the diagonal; 0 where the operand broadcasts). */
static void einsum_strides(const pp_einsum *e, int i, const pp_shape *s, int64_t *st) {
    for (int l = 0; l < PP_EINSUM_LABELS; l++) st[l] = 0;
    int64_t k = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int l = e->lab[i][d];
        if (!(s->dim[d] == 1 && e->size[l] != 1)) st[l] += k;
        k *= s->dim[d];
    }
}

static double load_d(const void *p, pp_dtype t, int64_t i) {
    switch (t) {
    case PP_F32: return ((const float *)p)[i];
    case PP_F64: return ((const double *)p)[i];
    case PP_I32: return ((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

static int64_t load_i(const void *p, pp_dtype t, int64_t i) {
    switch (t) {
    case PP_I8: return ((const int8_t *)p)[i];
    case PP_U8: return ((const uint8_t *)p)[i];
    case PP_BOOL: return ((const uint8_t *)p)[i] != 0;
    case PP_I16: return ((const int16_t *)p)[i];
    case PP_U16: return ((const uint16_t *)p)[i];
    case PP_I32: return ((const int32_t *)p)[i];
    case PP_U32: return ((const uint32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

/* Any operand count and label pattern: loop over the output labels, then
 * over the summed ones, multiplying the operands' elements. */
static void einsum_generic(const pp_einsum *e, const pprt_tensor *in, int n_in, pprt_tensor *o) {
    int labs[PP_EINSUM_LABELS], nl = 0;
    for (int d = 0; d < e->out_rank; d++) labs[nl++] = e->out_lab[d];
    const int n_outl = nl;
    for (int l = 0; l < PP_EINSUM_LABELS; l++)
        if (e->used[l] && !e->in_out[l]) labs[nl++] = l;
    int64_t st[PP_EINSUM_MAX_OPS][PP_EINSUM_LABELS];
    for (int i = 0; i < n_in; i++) einsum_strides(e, i, &in[i].shape, st[i]);
    int64_t inner = 1;
    for (int j = n_outl; j < nl; j++) inner *= e->size[labs[j]];
    const int64_t total = numel(&o->shape);
    const bool is_int = o->dtype == PP_I32 || o->dtype == PP_I64;
    int64_t idx[PP_EINSUM_LABELS] = {0}, off[PP_EINSUM_MAX_OPS] = {0};
    for (int64_t oi = 0; oi < total; oi++) {
        double acc = 0;
        uint64_t iacc = 0;
        int64_t sidx[PP_EINSUM_LABELS] = {0}, soff[PP_EINSUM_MAX_OPS];
        for (int i = 0; i < n_in; i++) soff[i] = off[i];
        for (int64_t s = 0; s < inner; s++) {
            if (is_int) {
                uint64_t p = 1;
                for (int i = 0; i < n_in; i++) p *= (uint64_t)load_i(in[i].data, in[i].dtype, soff[i]);
                iacc += p;
            } else {
                double p = 1;
                for (int i = 0; i < n_in; i++) p *= load_d(in[i].data, in[i].dtype, soff[i]);
                acc += p;
            }
            for (int j = nl - 1; j >= n_outl; j--) {
                int l = labs[j];
                for (int i = 0; i < n_in; i++) soff[i] += st[i][l];
                if (++sidx[j] < e->size[l]) break;
                for (int i = 0; i < n_in; i++) soff[i] -= st[i][l] * e->size[l];
                sidx[j] = 0;
            }
        }
        switch (o->dtype) {
        case PP_F32: ((float *)o->data)[oi] = (float)acc; break;
        case PP_F64: ((double *)o->data)[oi] = acc; break;
        case PP_I32: ((int32_t *)o->data)[oi] = (int32_t)(uint32_t)iacc; break;
        default: ((int64_t *)o->data)[oi] = (int64_t)iacc; break;
        }
        for (int j = n_outl - 1; j >= 0; j--) {
            int l = labs[j];
            for (int i = 0; i < n_in; i++) off[i] += st[i][l];
            if (++idx[j] < e->size[l]) break;
            for (int i = 0; i < n_in; i++) off[i] -= st[i][l] * e->size[l];
            idx[j] = 0;
        }
    }
}

/* dst (contiguous, dims[0..nd) row-major) = src read with strides st[]. */
static void gather_f32(const float *src, int nd, const int64_t *dims, const int64_t *st,
                       float *dst) {
    int64_t total = 1;
    for (int i = 0; i < nd; i++) total *= dims[i];
    if (total == 0) return;
    int64_t idx[3 * PP_MAX_DIMS] = {0}, off = 0;
    const int64_t in_n = nd ? dims[nd - 1] : 1, in_s = nd ? st[nd - 1] : 0;
    for (int64_t done = 0; done < total; done += in_n) {
        for (int64_t j = 0; j < in_n; j++) dst[done + j] = src[off + j * in_s];
        for (int i = nd - 2; i >= 0; i--) {
            off += st[i];
            if (++idx[i] < dims[i]) break;
            off -= st[i] * dims[i];
            idx[i] = 0;
        }
    }
}

/* Two f32 operands without diagonals, broadcasting or labels private to one
 * operand: batch (in A, B, out), M (A, out), N (B, out), K (A, B) labels;
 * pack A to [batch, M, K] and B to [batch, K, N], one GEMM per batch into
 * [batch, M, N], then permute into the output's label order. */
static bool einsum_gemm_ok(const pp_einsum *e, const pprt_tensor *in, int n_in) {
    if (n_in != 2 || in[0].dtype != PP_F32) return false;
    for (int i = 0; i < 2; i++) {
        bool seen[PP_EINSUM_LABELS] = {false};
        for (int d = 0; d < e->rank[i]; d++) {
            int l = e->lab[i][d];
            if (seen[l] || in[i].shape.dim[d] != e->size[l]) return false; /* diagonal / bcast */
            seen[l] = true;
        }
    }
    for (int l = 0; l < PP_EINSUM_LABELS; l++) {
        if (!e->used[l] || e->in_out[l]) continue;
        bool a = false, b = false;
        for (int d = 0; d < e->rank[0]; d++) a |= e->lab[0][d] == l;
        for (int d = 0; d < e->rank[1]; d++) b |= e->lab[1][d] == l;
        if (!(a && b)) return false; /* summed in one operand only */
    }
    return true;
}

static pp_status einsum_gemm(const pp_einsum *e, const pprt_tensor *in, pprt_tensor *o,
                             pprt_scratch *scratch, pp_err *err) {
    int8_t bl[PP_MAX_DIMS], ml[PP_MAX_DIMS], nl_[PP_MAX_DIMS], kl[PP_MAX_DIMS];
    int nbl = 0, nml = 0, nnl = 0, nkl = 0;
    bool inA[PP_EINSUM_LABELS] = {false}, inB[PP_EINSUM_LABELS] = {false};
    for (int d = 0; d < e->rank[0]; d++) inA[e->lab[0][d]] = true;
    for (int d = 0; d < e->rank[1]; d++) inB[e->lab[1][d]] = true;
    for (int d = 0; d < e->out_rank; d++) {
        int l = e->out_lab[d];
        if (inA[l] && inB[l]) bl[nbl++] = (int8_t)l;
        else if (inA[l]) ml[nml++] = (int8_t)l;
        else nl_[nnl++] = (int8_t)l;
    }
    for (int d = 0; d < e->rank[0]; d++) {
        int l = e->lab[0][d];
        if (!e->in_out[l]) kl[nkl++] = (int8_t)l;
    }
    int64_t Bt = 1, M = 1, N = 1, K = 1;
    for (int i = 0; i < nbl; i++) Bt *= e->size[bl[i]];
    for (int i = 0; i < nml; i++) M *= e->size[ml[i]];
    for (int i = 0; i < nnl; i++) N *= e->size[nl_[i]];
    for (int i = 0; i < nkl; i++) K *= e->size[kl[i]];
    int64_t sa[PP_EINSUM_LABELS], sb[PP_EINSUM_LABELS];
    einsum_strides(e, 0, &in[0].shape, sa);
    einsum_strides(e, 1, &in[1].shape, sb);
    size_t ba = 0, bbb = 0, bc = 0, tot = 0;
    PP_TRY(nbytes(Bt * M * K, sizeof(float), &ba, "Einsum", err));
    PP_TRY(nbytes(Bt * K * N, sizeof(float), &bbb, "Einsum", err));
    PP_TRY(nbytes(Bt * M * N, sizeof(float), &bc, "Einsum", err));
    ba = pp_align_up(ba, 64);
    bbb = pp_align_up(bbb, 64);
    if (pp_add_ovf(ba, bbb, &tot) || pp_add_ovf(tot, bc, &tot))
        return PP_FAIL(err, PP_ENOMEM, "Einsum kernel: scratch size overflows");
    float *packs = NULL;
    void *rest = NULL;
    PP_TRY(gemm_scratch(scratch, tot, &packs, &rest, "Einsum", err));
    float *pa = rest, *pb = (float *)((unsigned char *)rest + ba),
          *pc = (float *)((unsigned char *)rest + ba + bbb);
    int64_t dims[3 * PP_MAX_DIMS], st[3 * PP_MAX_DIMS];
    int nd = 0;
    /* A -> [batch..., M..., K...] */
    for (int i = 0; i < nbl; i++) dims[nd] = e->size[bl[i]], st[nd++] = sa[bl[i]];
    for (int i = 0; i < nml; i++) dims[nd] = e->size[ml[i]], st[nd++] = sa[ml[i]];
    for (int i = 0; i < nkl; i++) dims[nd] = e->size[kl[i]], st[nd++] = sa[kl[i]];
    gather_f32(in[0].data, nd, dims, st, pa);
    nd = 0; /* B -> [batch..., K..., N...] */
    for (int i = 0; i < nbl; i++) dims[nd] = e->size[bl[i]], st[nd++] = sb[bl[i]];
    for (int i = 0; i < nkl; i++) dims[nd] = e->size[kl[i]], st[nd++] = sb[kl[i]];
    for (int i = 0; i < nnl; i++) dims[nd] = e->size[nl_[i]], st[nd++] = sb[nl_[i]];
    gather_f32(in[1].data, nd, dims, st, pb);
    for (int64_t b = 0; b < Bt; b++)
        pprt_sgemm(M, N, K, pa + b * M * K, K, 1, pb + b * K * N, N, 1, pc + b * M * N, N, packs);
    /* [batch, M, N] -> output order: strides of each output label in pc */
    int64_t lst[PP_EINSUM_LABELS] = {0}, k = 1;
    for (int i = nnl - 1; i >= 0; i--) lst[nl_[i]] = k, k *= e->size[nl_[i]];
    for (int i = nml - 1; i >= 0; i--) lst[ml[i]] = k, k *= e->size[ml[i]];
    for (int i = nbl - 1; i >= 0; i--) lst[bl[i]] = k, k *= e->size[bl[i]];
    nd = 0;
    for (int d = 0; d < e->out_rank; d++)
        dims[nd] = e->size[e->out_lab[d]], st[nd++] = lst[e->out_lab[d]];
    gather_f32(pc, nd, dims, st, o->data);
    return PP_OK;
}

pp_status kern_EINSUM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_EINSUM); /* a half plan's: in f32 on the half values, the output rounded once */
    PP_TRY(check_outputs(PP_OP_EINSUM, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[PP_EINSUM_MAX_OPS];
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_einsum e;
    PP_TRY(pp_einsum_parse(attrs, ti, n_in, &e, err));
    if (numel(&out[0].shape) == 0) return PP_OK;
    if (einsum_gemm_ok(&e, in, n_in)) return einsum_gemm(&e, in, &out[0], scratch, err);
    einsum_generic(&e, in, n_in, &out[0]);
    return PP_OK;
}

/* ---- Softmax, LogSoftmax ------------------------------------------------------------------------ */

static pp_status softmax_common(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in,
                                pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(check_outputs(op, attrs, in, n_in, out, n_out, err));
    int64_t outer, n, inner;
    PP_TRY(pp_softmax_split(attrs, &in[0].shape, &outer, &n, &inner, err));
    const bool lg = op == PP_OP_LOGSOFTMAX;
    if (outer * n * inner == 0) return PP_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i;
            if (in[0].dtype == PP_F32) {
                const float *x = (const float *)in[0].data + base;
                float *y = (float *)out[0].data + base;
                float m = -INFINITY;
                for (int64_t j = 0; j < n; j++) {
                    const float v = x[j * inner];
                    if (v > m || v != v) m = m != m ? m : v;
                }
                double s = 0;
                for (int64_t j = 0; j < n; j++) {
                    const double e = exp((double)x[j * inner] - (double)m);
                    s += e;
                    if (!lg) y[j * inner] = (float)e;
                }
                if (lg) {
                    const double ls = log(s) + (double)m;
                    for (int64_t j = 0; j < n; j++) y[j * inner] = (float)((double)x[j * inner] - ls);
                } else {
                    const double r = 1.0 / s;
                    for (int64_t j = 0; j < n; j++) y[j * inner] = (float)(y[j * inner] * r);
                }
            } else {
                const double *x = (const double *)in[0].data + base;
                double *y = (double *)out[0].data + base;
                double m = -INFINITY;
                for (int64_t j = 0; j < n; j++) {
                    const double v = x[j * inner];
                    if (v > m || v != v) m = m != m ? m : v;
                }
                double s = 0;
                for (int64_t j = 0; j < n; j++) s += exp(x[j * inner] - m);
                const double ls = log(s);
                for (int64_t j = 0; j < n; j++)
                    y[j * inner] = lg ? x[j * inner] - m - ls : exp(x[j * inner] - m) / s;
            }
        }
    return PP_OK;
}

pp_status kern_SOFTMAX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_SOFTMAX);
    (void)scratch;
    return softmax_common(PP_OP_SOFTMAX, attrs, in, n_in, out, n_out, err);
}

pp_status kern_LOGSOFTMAX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                          int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_LOGSOFTMAX);
    (void)scratch;
    return softmax_common(PP_OP_LOGSOFTMAX, attrs, in, n_in, out, n_out, err);
}

/* ---- Hardmax, LpNormalization ---------------------------------------------------------------------- */

static double ld_fd(const void *p, bool f64, int64_t i) { return f64 ? ((const double *)p)[i] : ((const float *)p)[i]; }

static void st_fd(void *p, bool f64, int64_t i, double v) {
    if (f64) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}

/* One line of n elements, `inner` apart, from offset at of x into y. */
typedef void line_fn(const void *x, void *y, bool f64, int64_t at, int64_t n, int64_t inner, int p);

static void each_line(const pprt_tensor *x, pprt_tensor *y, int64_t outer, int64_t n, int64_t inner, line_fn *f,
                      int p) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) f(x->data, y->data, x->dtype == PP_F64, o * n * inner + i, n, inner, p);
}

/* 1 at the first largest element of the line, 0 elsewhere; a line holding a
 * NaN is NaN throughout (its largest is undefined). */
static void hardmax_line(const void *x, void *y, bool f64, int64_t at, int64_t n, int64_t inner, int p) {
    (void)p;
    int64_t best = 0;
    bool nan = false;
    for (int64_t k = 0; k < n; k++) {
        const double v = ld_fd(x, f64, at + k * inner);
        if (isnan(v)) nan = true;
        else if (v > ld_fd(x, f64, at + best * inner)) best = k;
    }
    for (int64_t k = 0; k < n; k++) st_fd(y, f64, at + k * inner, nan ? NAN : (double)(k == best));
}

pp_status kern_HARDMAX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                       pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_HARDMAX, attrs, in, n_in, out, n_out, err));
    int64_t outer, n, inner;
    PP_TRY(pp_softmax_split(attrs, &in[0].shape, &outer, &n, &inner, err));
    each_line(&in[0], &out[0], outer, n, inner, hardmax_line, 0);
    return PP_OK;
}

/* x / ||x||_p along the line, the norm summed in double; a line of zeros
 * stays zeros (as onnxruntime), a NaN in a line makes it NaN. */
static void lpnorm_line(const void *x, void *y, bool f64, int64_t at, int64_t n, int64_t inner, int p) {
    double s = 0;
    for (int64_t k = 0; k < n; k++) {
        const double v = ld_fd(x, f64, at + k * inner);
        s += p == 1 ? fabs(v) : v * v;
    }
    const double norm = p == 1 ? s : sqrt(s);
    for (int64_t k = 0; k < n; k++) st_fd(y, f64, at + k * inner, norm == 0 ? 0 : ld_fd(x, f64, at + k * inner) / norm);
}

pp_status kern_LPNORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                      pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_LPNORM, attrs, in, n_in, out, n_out, err));
    int axis, p;
    PP_TRY(pp_lpnorm_parse(attrs, &in[0].shape, &axis, &p, err));
    const pp_shape *s = &in[0].shape;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= s->dim[d];
    for (int d = axis + 1; d < s->rank; d++) inner *= s->dim[d];
    each_line(&in[0], &out[0], outer, s->dim[axis], inner, lpnorm_line, p);
    return PP_OK;
}

/* ---- reductions ----------------------------------------------------------------------------------- */

/* The input split into kept dims (outer odometer, one output each) and
 * reduced dims (inner odometer); adjacent dims of one kind are merged when
 * contiguous. */
typedef struct red_plan {
    int nk, nr;
    int64_t kd[PP_MAX_DIMS], ks[PP_MAX_DIMS], rd[PP_MAX_DIMS], rs[PP_MAX_DIMS];
    int64_t n_out, n_red;
} red_plan;

static void red_plan_make(const pp_shape *x, const bool *mask, red_plan *p) {
    memset(p, 0, sizeof *p);
    int64_t st[PP_MAX_DIMS], k = 1;
    for (int d = x->rank - 1; d >= 0; d--) st[d] = k, k *= x->dim[d];
    p->n_out = p->n_red = 1;
    for (int d = 0; d < x->rank; d++) {
        if (mask[d]) {
            if (p->nr && p->rs[p->nr - 1] == st[d] * x->dim[d]) {
                p->rd[p->nr - 1] *= x->dim[d];
                p->rs[p->nr - 1] = st[d];
            } else {
                p->rd[p->nr] = x->dim[d];
                p->rs[p->nr++] = st[d];
            }
            p->n_red *= x->dim[d];
        } else {
            if (p->nk && p->ks[p->nk - 1] == st[d] * x->dim[d]) {
                p->kd[p->nk - 1] *= x->dim[d];
                p->ks[p->nk - 1] = st[d];
            } else {
                p->kd[p->nk] = x->dim[d];
                p->ks[p->nk++] = st[d];
            }
            p->n_out *= x->dim[d];
        }
    }
}

/* Visit the reduced elements of the output at input offset `base`: calls
 * back with runs of n elements at stride s. */
#define RED_RUNS(p, base, BODY)                                                       \
    do {                                                                              \
        int64_t ridx_[PP_MAX_DIMS] = {0}, roff_ = (base);                             \
        const int64_t rn_ = (p)->nr ? (p)->rd[(p)->nr - 1] : 1;                       \
        const int64_t rstr_ = (p)->nr ? (p)->rs[(p)->nr - 1] : 0;                     \
        if ((p)->n_red == 0) break;                                                   \
        for (;;) {                                                                    \
            const int64_t run_off = roff_, run_n = rn_, run_s = rstr_;                \
            BODY;                                                                     \
            int i_ = (p)->nr - 2;                                                     \
            for (; i_ >= 0; i_--) {                                                   \
                roff_ += (p)->rs[i_];                                                 \
                if (++ridx_[i_] < (p)->rd[i_]) break;                                 \
                roff_ -= (p)->rs[i_] * (p)->rd[i_];                                   \
                ridx_[i_] = 0;                                                        \
            }                                                                         \
            if (i_ < 0) break;                                                        \
        }                                                                             \
    } while (0)

static double red_float(pp_op op, const red_plan *p, const void *x, pp_dtype t, int64_t base) {
    const float *xf = x;
    const double *xd = x;
#define V(i) (t == PP_F32 ? (double)xf[i] : xd[i])
    double acc;
    switch (op) {
    case PP_OP_REDUCEMAX:
    case PP_OP_REDUCEMIN: {
        /* NaN is skipped; only NaN gives NaN (docs/design-notes.md, "NaN
         * and infinities") */
        const bool mx = op == PP_OP_REDUCEMAX;
        bool num = false, nan = false;
        acc = mx ? -INFINITY : INFINITY;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) {
                double v = V(run_off + j * run_s);
                if (v != v) nan = true;
                else if (num = true, mx ? v > acc : v < acc) acc = v;
            }
        });
        return nan && !num ? NAN : acc;
    }
    case PP_OP_REDUCEPROD:
        acc = 1;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) acc *= V(run_off + j * run_s);
        });
        return acc;
    case PP_OP_REDUCELOGSUMEXP: {
        double m = -INFINITY;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) {
                double v = V(run_off + j * run_s);
                if (v > m || v != v) m = m != m ? m : v;
            }
        });
        if (m != m || m == INFINITY) return m;
        if (m == -INFINITY) m = 0; /* empty, or all -inf: log(0) = -inf */
        acc = 0;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) acc += exp(V(run_off + j * run_s) - m);
        });
        return log(acc) + m;
    }
    default:
        break;
    }
    acc = 0;
    RED_RUNS(p, base, {
        for (int64_t j = 0; j < run_n; j++) {
            double v = V(run_off + j * run_s);
            switch (op) {
            case PP_OP_REDUCEL1: acc += fabs(v); break;
            case PP_OP_REDUCEL2:
            case PP_OP_REDUCESUMSQUARE: acc += v * v; break;
            default: acc += v; break;
            }
        }
    });
#undef V
    switch (op) {
    case PP_OP_REDUCEMEAN: return acc / (double)p->n_red;
    case PP_OP_REDUCEL2: return sqrt(acc);
    case PP_OP_REDUCELOGSUM: return log(acc);
    default: return acc;
    }
}

/* Integer types: exact int64 arithmetic (wrapping); the empty max/min is the
 * type's lowest/highest value. */
static int64_t red_int(pp_op op, const red_plan *p, const void *x, pp_dtype t, int64_t base,
                       int64_t tmin, int64_t tmax) {
    uint64_t acc;
    switch (op) {
    case PP_OP_REDUCEMAX:
    case PP_OP_REDUCEMIN: {
        const bool mx = op == PP_OP_REDUCEMAX;
        int64_t m = mx ? tmin : tmax;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) {
                int64_t v = load_i(x, t, run_off + j * run_s);
                if (mx ? v > m : v < m) m = v;
            }
        });
        return m;
    }
    case PP_OP_REDUCEPROD:
        acc = 1;
        RED_RUNS(p, base, {
            for (int64_t j = 0; j < run_n; j++) acc *= (uint64_t)load_i(x, t, run_off + j * run_s);
        });
        return (int64_t)acc;
    default:
        break;
    }
    acc = 0;
    RED_RUNS(p, base, {
        for (int64_t j = 0; j < run_n; j++) {
            int64_t v = load_i(x, t, run_off + j * run_s);
            switch (op) {
            case PP_OP_REDUCEL1: acc += (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v); break;
            case PP_OP_REDUCESUMSQUARE: acc += (uint64_t)v * (uint64_t)v; break;
            default: acc += (uint64_t)v; break;
            }
        }
    });
    if (op == PP_OP_REDUCEMEAN) return p->n_red ? (int64_t)acc / p->n_red : 0;
    return (int64_t)acc;
}

static pp_status reduce_common(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in,
                               pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(check_outputs(op, attrs, in, n_in, out, n_out, err));
    pp_tinfo x = pprt_tinfo_of(&in[0]), ax = n_in > 1 ? pprt_tinfo_of(&in[1]) : (pp_tinfo){0};
    pp_reduce r;
    PP_TRY(pp_reduce_parse(op, attrs, &x, n_in > 1 ? &ax : NULL, &r, err));
    red_plan p;
    red_plan_make(&in[0].shape, r.mask, &p);
    const pp_dtype t = in[0].dtype;
    int64_t tmin = INT64_MIN, tmax = INT64_MAX;
    switch (t) {
    case PP_I8: tmin = INT8_MIN, tmax = INT8_MAX; break;
    case PP_U8: tmin = 0, tmax = UINT8_MAX; break;
    case PP_BOOL: tmin = 0, tmax = 1; break;
    case PP_I32: tmin = INT32_MIN, tmax = INT32_MAX; break;
    default: break;
    }
    int64_t kidx[PP_MAX_DIMS] = {0}, base = 0;
    for (int64_t o = 0; o < p.n_out; o++) {
        if (t == PP_F32 || t == PP_F64) {
            double v = red_float(op, &p, in[0].data, t, base);
            if (t == PP_F32) ((float *)out[0].data)[o] = (float)v;
            else ((double *)out[0].data)[o] = v;
        } else {
            int64_t v = red_int(op, &p, in[0].data, t, base, tmin, tmax);
            switch (t) {
            case PP_I8: ((int8_t *)out[0].data)[o] = (int8_t)(uint8_t)v; break;
            case PP_U8: ((uint8_t *)out[0].data)[o] = (uint8_t)v; break;
            case PP_BOOL: ((uint8_t *)out[0].data)[o] = v != 0; break;
            case PP_I32: ((int32_t *)out[0].data)[o] = (int32_t)(uint32_t)v; break;
            default: ((int64_t *)out[0].data)[o] = v; break;
            }
        }
        for (int i = p.nk - 1; i >= 0; i--) {
            base += p.ks[i];
            if (++kidx[i] < p.kd[i]) break;
            base -= p.ks[i] * p.kd[i];
            kidx[i] = 0;
        }
    }
    return PP_OK;
}

#define PP_REDUCE_KERN(E)                                                                     \
    pp_status kern_##E(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,     \
                       int n_out, pprt_scratch *scratch, pp_err *err) {                      \
        PPRT_LIFT(kern_##E); /* half: in f32, the output rounded */                          \
        return reduce_common(PP_OP_##E, attrs, in, n_in, out, n_out, err);                   \
    }
PP_REDUCE_KERN(REDUCEMEAN)
PP_REDUCE_KERN(REDUCESUM)
PP_REDUCE_KERN(REDUCEMAX)
PP_REDUCE_KERN(REDUCEMIN)
PP_REDUCE_KERN(REDUCEPROD)
PP_REDUCE_KERN(REDUCEL1)
PP_REDUCE_KERN(REDUCEL2)
PP_REDUCE_KERN(REDUCESUMSQUARE)
PP_REDUCE_KERN(REDUCELOGSUM)
PP_REDUCE_KERN(REDUCELOGSUMEXP)

/* ---- ordering: ArgMax, ArgMin, TopK ------------------------------------------------------------ */

/* Values compared through one of three exact key types. */
typedef enum { K_DBL, K_I64, K_U64 } key_kind;

static key_kind key_of(pp_dtype t) {
    return t == PP_I64 ? K_I64 : t == PP_U64 ? K_U64 : K_DBL;
}

typedef union key {
    double d;
    int64_t i;
    uint64_t u;
} key;

static key load_key(const void *p, pp_dtype t, int64_t i) {
    key k;
    switch (t) {
    case PP_F32: k.d = ((const float *)p)[i]; break;
    case PP_F64: k.d = ((const double *)p)[i]; break;
    case PP_I64: k.i = ((const int64_t *)p)[i]; break;
    case PP_U64: k.u = ((const uint64_t *)p)[i]; break;
    default: k.d = (double)load_i(p, t, i); break;
    }
    return k;
}

/* a > b for ArgMax and ArgMin; NaN is never greater, and every number is
 * greater than NaN (so they skip NaN, and give the first index for only NaN).
 * TopK orders NaN otherwise (topk_gt). */
static bool key_gt(key_kind kk, key a, key b) {
    switch (kk) {
    case K_I64: return a.i > b.i;
    case K_U64: return a.u > b.u;
    default: return (b.d != b.d && a.d == a.d) || a.d > b.d;
    }
}

static bool key_eq(key_kind kk, key a, key b) {
    switch (kk) {
    case K_I64: return a.i == b.i;
    case K_U64: return a.u == b.u;
    default: return a.d == b.d || (a.d != a.d && b.d != b.d);
    }
}

static pp_status arg_common(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in,
                            pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(check_outputs(op, attrs, in, n_in, out, n_out, err));
    int64_t axis64, last;
    int axis;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, in[0].shape.rank, "attribute 'axis'", &axis, err));
    PP_TRY(pp_attr_int(attrs, "select_last_index", 0, &last, err));
    const pp_shape *xs = &in[0].shape;
    int64_t outer = 1, inner = 1, n = xs->dim[axis];
    for (int i = 0; i < axis; i++) outer *= xs->dim[i];
    for (int i = axis + 1; i < xs->rank; i++) inner *= xs->dim[i];
    const key_kind kk = key_of(in[0].dtype);
    const bool mx = op == PP_OP_ARGMAX;
    int64_t *y = out[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i;
            key best = load_key(in[0].data, in[0].dtype, base);
            int64_t bi = 0;
            for (int64_t j = 1; j < n; j++) {
                key v = load_key(in[0].data, in[0].dtype, base + j * inner);
                bool better = mx ? key_gt(kk, v, best) : key_gt(kk, best, v);
                /* ArgMin skips NaN too: a number beats a NaN best, a NaN never wins */
                if (kk == K_DBL && !mx && v.d != v.d) better = false;
                if (kk == K_DBL && !mx && best.d != best.d && v.d == v.d) better = true;
                if (better || (last && key_eq(kk, v, best))) {
                    best = v;
                    bi = j;
                }
            }
            y[o * inner + i] = bi;
        }
    return PP_OK;
}

pp_status kern_ARGMAX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_ARGMAX); /* half x: widened exactly */
    return arg_common(PP_OP_ARGMAX, attrs, in, n_in, out, n_out, err);
}

pp_status kern_ARGMIN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_ARGMIN); /* half x: widened exactly */
    return arg_common(PP_OP_ARGMIN, attrs, in, n_in, out, n_out, err);
}

/* a > b in TopK's order, which is onnxruntime's and PyTorch's (not ArgMax's):
 * NaN above every number (+inf included), all NaNs equal, -0 == +0. So
 * largest gives the NaNs first and smallest gives them last. */
static bool topk_gt(key_kind kk, key a, key b) {
    if (kk == K_DBL) return (a.d != a.d && b.d == b.d) || a.d > b.d;
    return key_gt(kk, a, b);
}

/* Stable merge sort of idx[0..n) by keys[idx] in topk_gt's order (descending
 * when largest, else ascending), so equal keys, NaNs among themselves and -0
 * with +0, keep the lower index first: onnxruntime's order and indices (with
 * sorted=1; with sorted=0 it returns the same elements in an order it does not
 * define, and pprt returns them sorted). PyTorch orders equal keys as it
 * happens to (its indices among ties differ from onnxruntime's); pprt follows
 * onnxruntime, the ONNX oracle. */
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, const key *keys, key_kind kk,
                     bool largest) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = min64(lo + w, n), hi = min64(lo + 2 * w, n);
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                key ka = keys[idx[a]], kb = keys[idx[b]];
                bool take_b = largest ? topk_gt(kk, kb, ka) : topk_gt(kk, ka, kb);
                tmp[k++] = take_b ? idx[b++] : idx[a++];
            }
            while (a < mid) tmp[k++] = idx[a++];
            while (b < hi) tmp[k++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

pp_status kern_TOPK(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    PP_TRY(check_outputs(PP_OP_TOPK, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[2] = {pprt_tinfo_of(&in[0]), n_in > 1 ? pprt_tinfo_of(&in[1]) : (pp_tinfo){0}};
    pp_topk tk;
    PP_TRY(pp_topk_parse(attrs, ti, n_in, &tk, err));
    const pp_shape *xs = &in[0].shape;
    int64_t outer = 1, inner = 1, n = xs->dim[tk.axis], k = tk.k;
    for (int i = 0; i < tk.axis; i++) outer *= xs->dim[i];
    for (int i = tk.axis + 1; i < xs->rank; i++) inner *= xs->dim[i];
    if (k == 0 || outer * inner == 0) return PP_OK;
    size_t nb = 0;
    PP_TRY(nbytes(n, 2 * sizeof(int64_t) + sizeof(key), &nb, "TopK", err));
    unsigned char *sc = pprt_scratch_get(scratch, nb);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "TopK kernel: out of memory");
    key *keys = (key *)sc;
    int64_t *idx = (int64_t *)(keys + n), *tmp = idx + n;
    const key_kind kk = key_of(in[0].dtype);
    const size_t es = pp_dtype_size(in[0].dtype);
    const unsigned char *x = in[0].data;
    unsigned char *vals = out[0].data;
    int64_t *inds = n_out > 1 ? out[1].data : NULL;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i, obase = o * k * inner + i;
            for (int64_t j = 0; j < n; j++) {
                keys[j] = load_key(x, in[0].dtype, base + j * inner);
                idx[j] = j;
            }
            sort_idx(idx, tmp, n, keys, kk, tk.largest);
            for (int64_t j = 0; j < k; j++) {
                memcpy(vals + (size_t)(obase + j * inner) * es,
                       x + (size_t)(base + idx[j] * inner) * es, es);
                if (inds) inds[obase + j * inner] = idx[j];
            }
        }
    return PP_OK;
}

/* ---- Resize --------------------------------------------------------------------------------------- */

static double cubic_w(double x, double A) {
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The source coordinate of output position o along axis d. */
static double resize_coord(const pp_resize *r, int d, int64_t in, int64_t o) {
    const double s = r->scale[d], ow = s * (double)in, on = (double)r->out[d];
    const double x = (double)o;
    switch (r->coord) {
    case PP_RC_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case PP_RC_HALF_PIXEL_SYMMETRIC: {
        const double adj = on / ow, center = (double)in / 2.0, offset = center * (1 - adj);
        return offset + (x + 0.5) / s - 0.5;
    }
    case PP_RC_PYTORCH_HALF_PIXEL: return r->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0.0;
    /* as ONNX's reference: the fractional target length scale * in */
    case PP_RC_ALIGN_CORNERS: return ow == 1 ? 0.0 : x * (double)(in - 1) / (ow - 1);
    case PP_RC_ASYMMETRIC: return x / s;
    case PP_RC_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case PP_RC_TF_CROP_AND_RESIZE: {
        const double a = r->roi0[d], b = r->roi1[d];
        if (r->out[d] > 1) return a * (double)(in - 1) + x * (b - a) * (double)(in - 1) / (on - 1);
        return 0.5 * (a + b) * (double)(in - 1);
    }
    }
    return 0;
}

/* Taps per output coordinate along axis d: 1 for nearest; for linear / cubic
 * the filter support (1 or 2) stretched by 1/scale when antialiasing a
 * downscale. */
static int64_t resize_ntaps(const pp_resize *r, int d, int64_t *start, double *s) {
    if (r->mode == PP_RS_NEAREST) {
        *start = 0;
        *s = 1;
        return 1;
    }
    const double support = r->mode == PP_RS_LINEAR ? 1.0 : 2.0;
    *s = r->antialias && r->scale[d] < 1.0 ? r->scale[d] : 1.0;
    *start = (int64_t)floor(-support / *s) + 1;
    return 2 - 2 * *start;
}

/* The tap table of axis d: for output o, input indices idx[o*n + j] (clamped
 * to the input) with weights w[o*n + j]; ext[o] marks tf_crop_and_resize
 * positions outside the input (they take extrapolation_value). */
static void resize_table(const pp_resize *r, int d, int64_t in, int64_t *idx, double *w,
                         bool *ext) {
    int64_t start;
    double s;
    const int64_t n = resize_ntaps(r, d, &start, &s);
    for (int64_t o = 0; o < r->out[d]; o++) {
        const double x = resize_coord(r, d, in, o);
        int64_t *ix = idx + o * n;
        double *wt = w + o * n;
        ext[o] = r->coord == PP_RC_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1));
        const double fl = floor(x);
        const bool integral = x == fl;
        if (r->mode == PP_RS_NEAREST) {
            int64_t i = (int64_t)fl;
            if (!integral) {
                const double frac = x - fl;
                switch (r->nearest) {
                case PP_RN_ROUND_PREFER_FLOOR: i += frac > 0.5; break;
                case PP_RN_ROUND_PREFER_CEIL: i += frac >= 0.5; break;
                case PP_RN_FLOOR: break;
                case PP_RN_CEIL: i += 1; break;
                }
            }
            ix[0] = i < 0 ? 0 : i >= in ? in - 1 : i;
            wt[0] = 1.0;
            continue;
        }
        /* taps i with weight K((i - x) * s); the window as in ONNX's reference
         * (an integral x counts as the right end of the interval left of it) */
        const double ratio = integral ? 1.0 : x - fl;
        const int64_t first = (integral ? (int64_t)x - 1 : (int64_t)fl) + start;
        double sum = 0;
        for (int64_t j = 0; j < n; j++) {
            const double arg = ((double)(start + j) - ratio) * s;
            double v = r->mode == PP_RS_LINEAR ? (fabs(arg) < 1 ? 1 - fabs(arg) : 0)
                                               : cubic_w(arg, r->cubic_a);
            const int64_t i = first + j;
            if (r->exclude_outside && (i < 0 || i >= in)) v = 0;
            ix[j] = i < 0 ? 0 : i >= in ? in - 1 : i;
            wt[j] = v;
            sum += v;
        }
        if ((r->antialias || r->exclude_outside) && sum != 0)
            for (int64_t j = 0; j < n; j++) wt[j] /= sum;
    }
}

/* Whether axis d is left as it is (the reference skips such axes too). */
static bool resize_identity(const pp_resize *r, int d, int64_t in) {
    if (r->out[d] != in) return false;
    if (r->coord == PP_RC_TF_CROP_AND_RESIZE) return r->roi0[d] == 0.0 && r->roi1[d] == 1.0;
    return fabs(r->scale[d] - 1.0) <= 1e-9;
}

bool pprt_resize_nearest_map(const pp_resize *r, int d, int64_t in, int64_t *idx) {
    const int64_t n = r->out[d];
    if (r->mode != PP_RS_NEAREST || n <= 0 || in <= 0) return false;
    if (resize_identity(r, d, in)) {
        for (int64_t o = 0; o < n; o++) idx[o] = o;
        return true;
    }
    double *w = malloc((size_t)n * sizeof *w);
    bool *ext = malloc((size_t)n * sizeof *ext), ok = w && ext;
    if (ok) resize_table(r, d, in, idx, w, ext);
    for (int64_t o = 0; ok && o < n; o++) ok = !ext[o];
    free(w);
    free(ext);
    return ok;
}

/* dst[outer, out_d, inner] = the taps of axis d applied to src[outer, in_d, inner]. */
static void resize_pass(const pp_resize *r, int d, int64_t outer, int64_t in_d, int64_t inner,
                        const float *src, float *dst, const int64_t *idx, const double *w,
                        const bool *ext, double *row) {
    const int64_t od = r->out[d];
    int64_t start;
    double s;
    const int64_t n = resize_ntaps(r, d, &start, &s);
    const float xv = r->extrapolation;
    for (int64_t b = 0; b < outer; b++) {
        const float *sb = src + b * in_d * inner;
        float *db = dst + b * od * inner;
        if (inner == 1) { /* the innermost axis: one dot product per output */
            for (int64_t o = 0; o < od; o++) {
                if (ext[o]) {
                    db[o] = xv;
                    continue;
                }
                double acc = 0;
                for (int64_t j = 0; j < n; j++) acc += w[o * n + j] * sb[idx[o * n + j]];
                db[o] = (float)acc;
            }
            continue;
        }
        for (int64_t o = 0; o < od; o++) {
            float *dp = db + o * inner;
            if (ext[o]) {
                for (int64_t i = 0; i < inner; i++) dp[i] = xv;
                continue;
            }
            if (n == 1) {
                memcpy(dp, sb + idx[o] * inner, (size_t)inner * sizeof(float));
                continue;
            }
            for (int64_t i = 0; i < inner; i++) row[i] = 0;
            for (int64_t j = 0; j < n; j++) {
                const double wt = w[o * n + j];
                if (wt == 0) continue;
                const float *sp = sb + idx[o * n + j] * inner;
                for (int64_t i = 0; i < inner; i++) row[i] += wt * sp[i];
            }
            for (int64_t i = 0; i < inner; i++) dp[i] = (float)row[i];
        }
    }
}

pp_status kern_RESIZE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_RESIZE); /* a half plan's X and Y: in f32, Y rounded */
    PP_TRY(check_outputs(PP_OP_RESIZE, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[4];
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_resize r;
    PP_TRY(pp_resize_parse(attrs, ti, n_in, &r, err));
    const pp_shape *xs = &in[0].shape;
    const int64_t total_out = numel(&out[0].shape);
    if (total_out == 0) return PP_OK;
    /* the passes; the largest intermediate, row and tap table */
    int axes[PP_MAX_DIMS], na = 0;
    pp_shape cur = *xs;
    int64_t biggest = 0, widest = 1, table = 1;
    for (int d = 0; d < xs->rank; d++) {
        if (resize_identity(&r, d, xs->dim[d])) continue;
        axes[na++] = d;
        cur.dim[d] = r.out[d];
        int64_t n = numel(&cur), inner = 1, start;
        double s;
        for (int k = d + 1; k < xs->rank; k++) inner *= cur.dim[k];
        if (inner > widest) widest = inner;
        if (n > biggest) biggest = n;
        int64_t nt = resize_ntaps(&r, d, &start, &s);
        if (nt > ((int64_t)1 << 20) || r.out[d] * nt > ((int64_t)1 << 40))
            return PP_FAIL(err, PP_EUNSUP, "Resize kernel: %lld taps per output along axis %d",
                           (long long)nt, d);
        if (r.out[d] * nt > table) table = r.out[d] * nt;
    }
    if (na == 0) {
        memcpy(out[0].data, in[0].data, (size_t)total_out * sizeof(float));
        return PP_OK;
    }
    /* scratch: two ping-pong buffers, a row of doubles, the tap table */
    size_t sz[5] = {0}, off[5], total = 0;
    PP_TRY(nbytes(na > 1 ? biggest : 0, sizeof(float), &sz[0], "Resize", err));
    sz[1] = na > 2 ? sz[0] : 0;
    PP_TRY(nbytes(widest, sizeof(double), &sz[2], "Resize", err));
    PP_TRY(nbytes(table, sizeof(int64_t), &sz[3], "Resize", err));
    PP_TRY(nbytes(table, sizeof(double), &sz[4], "Resize", err));
    for (int i = 0; i < 5; i++) {
        off[i] = total;
        size_t a = pp_align_up(sz[i], 64);
        if (a < sz[i] || pp_add_ovf(total, a, &total))
            return PP_FAIL(err, PP_ENOMEM, "Resize kernel: scratch size overflows");
    }
    size_t ext_off = total;
    if (pp_add_ovf(total, (size_t)biggest + 64, &total)) /* ext: out[d] <= biggest */
        return PP_FAIL(err, PP_ENOMEM, "Resize kernel: scratch size overflows");
    unsigned char *sc = pprt_scratch_get(scratch, total);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "Resize kernel: cannot get %zu bytes", total);
    float *buf[2] = {(float *)(sc + off[0]), (float *)(sc + off[1])};
    double *row = (double *)(sc + off[2]);
    int64_t *idx = (int64_t *)(sc + off[3]);
    double *w = (double *)(sc + off[4]);
    bool *ext = (bool *)(sc + ext_off);
    const float *src = in[0].data;
    cur = *xs;
    for (int k = 0; k < na; k++) {
        const int d = axes[k];
        int64_t outer = 1, inner = 1;
        for (int q = 0; q < d; q++) outer *= cur.dim[q];
        for (int q = d + 1; q < cur.rank; q++) inner *= cur.dim[q];
        float *dst = k == na - 1 ? (float *)out[0].data : buf[k % 2];
        resize_table(&r, d, cur.dim[d], idx, w, ext);
        resize_pass(&r, d, outer, cur.dim[d], inner, src, dst, idx, w, ext, row);
        cur.dim[d] = r.out[d];
        src = dst;
    }
    return PP_OK;
}

/* pp.ResizeGrad: the forward's separable passes transposed, last axis
 * first: each output's gradient added, with its taps' weights, to the input
 * positions they read (in double, in a fixed order); an extrapolated output
 * (tf_crop_and_resize) passes none. */
pp_status kern_RESIZEGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                          int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_RESIZEGRAD, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[4];
    for (int i = 0; i < n_in && i < 4; i++) ti[i] = pprt_tinfo_of(&in[i]);
    ti[0] = (pp_tinfo){.dtype = PP_F32, .shape = out[0].shape};
    pp_resize r;
    PP_TRY(pp_resize_parse(attrs, ti, n_in, &r, err));
    const pp_shape xs = out[0].shape;
    int axes[PP_MAX_DIMS], na = 0;
    pp_shape sh[PP_MAX_DIMS + 1];
    sh[0] = xs;
    int64_t biggest = numel(&xs), table = 1;
    for (int d = 0; d < xs.rank; d++) {
        if (resize_identity(&r, d, xs.dim[d])) continue;
        sh[na + 1] = sh[na];
        sh[na + 1].dim[d] = r.out[d];
        if (numel(&sh[na + 1]) > biggest) biggest = numel(&sh[na + 1]);
        int64_t start;
        double s;
        const int64_t nt = resize_ntaps(&r, d, &start, &s);
        if (nt > ((int64_t)1 << 20) || r.out[d] * nt > ((int64_t)1 << 40))
            return PP_FAIL(err, PP_EUNSUP, "pp.ResizeGrad kernel: %lld taps per output along axis %d",
                           (long long)nt, d);
        if (r.out[d] * nt > table) table = r.out[d] * nt;
        axes[na++] = d;
    }
    const int64_t ny = numel(&in[0].shape), nx = numel(&xs);
    float *dx = out[0].data;
    if (na == 0) {
        memcpy(dx, in[0].data, (size_t)nx * sizeof *dx);
        return PP_OK;
    }
    double *buf[2] = {malloc((size_t)biggest * sizeof(double)), malloc((size_t)biggest * sizeof(double))};
    int64_t *idx = malloc((size_t)table * sizeof *idx);
    double *w = malloc((size_t)table * sizeof *w);
    bool *ext = malloc((size_t)biggest * sizeof *ext);
    pp_status st = PP_OK;
    if (!buf[0] || !buf[1] || !idx || !w || !ext) {
        st = PP_FAIL(err, PP_ENOMEM, "pp.ResizeGrad kernel: out of memory");
        goto done;
    }
    const float *dy = in[0].data;
    for (int64_t i = 0; i < ny; i++) buf[0][i] = dy[i];
    int cur = 0;
    for (int k = na - 1; k >= 0; k--) {
        const int d = axes[k];
        const pp_shape *src = &sh[k]; /* the pass's input shape: the gradient goes back to it */
        int64_t outer = 1, inner = 1;
        for (int q = 0; q < d; q++) outer *= src->dim[q];
        for (int q = d + 1; q < src->rank; q++) inner *= src->dim[q];
        const int64_t in_d = src->dim[d], od = r.out[d];
        int64_t start;
        double s;
        const int64_t n = resize_ntaps(&r, d, &start, &s);
        resize_table(&r, d, in_d, idx, w, ext);
        const double *g = buf[cur];
        double *gx = buf[1 - cur];
        for (int64_t i = 0; i < outer * in_d * inner; i++) gx[i] = 0;
        for (int64_t b = 0; b < outer; b++)
            for (int64_t o = 0; o < od; o++) {
                if (ext[o]) continue;
                const double *gp = g + (b * od + o) * inner;
                for (int64_t j = 0; j < n; j++) {
                    const double wt = w[o * n + j];
                    if (wt == 0) continue;
                    double *xp = gx + (b * in_d + idx[o * n + j]) * inner;
                    for (int64_t i = 0; i < inner; i++) xp[i] += wt * gp[i];
                }
            }
        cur = 1 - cur;
    }
    for (int64_t i = 0; i < nx; i++) dx[i] = (float)buf[cur][i];
done:
    free(buf[0]), free(buf[1]), free(idx), free(w), free(ext);
    return st;
}

/* ---- GridSample ------------------------------------------------------------------------------ */

/* One axis's taps: input indices (-1: outside, a zero) and weights, and
 * for the gradient each weight's derivative by the normalized coordinate
 * (dw: 0 where the coordinate was clamped or the mode is nearest; set only
 * when gs_axis is asked for it). */
typedef struct gs_taps {
    int n;
    int64_t idx[4];
    double w[4], dw[4];
} gs_taps;

/* Integer position i of an axis of len through the padding rule. */
static int64_t gs_pixel(const pp_gridsample *g, int64_t i, int64_t len, double lo, double hi) {
    switch (g->pad) {
    case PP_GS_ZEROS: return i < 0 || i >= len ? -1 : i;
    case PP_GS_BORDER: return i < 0 ? 0 : i >= len ? len - 1 : i;
    case PP_GS_REFLECTION: {
        const int64_t r = (int64_t)pp_reflect((double)i, lo, hi);
        return r < 0 ? 0 : r >= len ? len - 1 : r;
    }
    }
    return -1;
}

/* Keys' cubic convolution weights (a = -0.75, as PyTorch and the ONNX
 * reference) of the taps at x0-1 .. x0+2 for fraction f = x - x0. */
static void gs_cubic(double f, double *c) {
    const double a = -0.75, x1 = f + 1, x2 = 1 - f, x3 = 2 - f;
    c[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
    c[1] = ((a + 2) * f - (a + 3)) * f * f + 1;
    c[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
    c[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

/* Their derivatives by f (x1 = f + 1 and f grow with it, x2 = 1 - f and
 * x3 = 2 - f shrink). */
static void gs_cubic_d(double f, double *c) {
    const double a = -0.75, x1 = f + 1, x2 = 1 - f, x3 = 2 - f;
    c[0] = (3 * a * x1 - 10 * a) * x1 + 8 * a;
    c[1] = (3 * (a + 2) * f - 2 * (a + 3)) * f;
    c[2] = -(3 * (a + 2) * x2 - 2 * (a + 3)) * x2;
    c[3] = -((3 * a * x3 - 10 * a) * x3 + 8 * a);
}

/* The taps along an axis of len for normalized coordinate v; false where
 * the coordinate is NaN (or becomes NaN: reflection of an infinity). As
 * PyTorch and onnxruntime: the coordinate in float arithmetic, the padding
 * rule applied to each tap's integer position (for linear and nearest the
 * same values as the ONNX reference's clamp or reflection of the
 * coordinate first; for cubic PyTorch's, which the reference does not
 * follow under border and reflection padding). */
static bool gs_axis(const pp_gridsample *g, float v, int64_t len, bool grad, gs_taps *t) {
    const float Lf = (float)len;
    const float xf = g->align_corners ? (v + 1.0f) / 2.0f * (Lf - 1.0f) : ((v + 1.0f) * Lf - 1.0f) / 2.0f;
    const double L = (double)len, lo = g->align_corners ? 0.0 : -0.5, hi = g->align_corners ? L - 1 : L - 0.5;
    double x = g->mode == PP_GS_NEAREST ? nearbyint((double)xf) : (double)xf; /* halves to even, as PyTorch */
    /* dx / dv: the unnormalizing scale, 0 where the coordinate is clamped */
    double dxdv = g->mode == PP_GS_NEAREST ? 0.0 : g->align_corners ? (L - 1) / 2 : L / 2;
    if (grad) memset(t->dw, 0, sizeof t->dw);
    if (isnan(x)) return false;
    if (x < -8 || x > L + 7) { /* far outside: a place whose taps give the same pixels */
        if (g->pad == PP_GS_ZEROS) {
            t->n = 1, t->idx[0] = -1, t->w[0] = 1;
            return true;
        }
        if (g->pad == PP_GS_BORDER) x = x < 0 ? -8 : L + 7, dxdv = 0;
        else x = lo + fmod(fmod(x - lo, 2 * (hi - lo)) + 2 * (hi - lo), 2 * (hi - lo)); /* whole periods */
        if (isnan(x)) return false;
    }
    const double x0 = floor(x), f = x - x0;
    const int64_t i0 = (int64_t)x0;
    if (g->mode == PP_GS_NEAREST) {
        t->n = 1, t->idx[0] = gs_pixel(g, i0, len, lo, hi), t->w[0] = 1;
    } else if (g->mode == PP_GS_LINEAR) {
        t->n = 2;
        t->idx[0] = gs_pixel(g, i0, len, lo, hi), t->w[0] = 1 - f, t->dw[0] = -dxdv;
        t->idx[1] = gs_pixel(g, i0 + 1, len, lo, hi), t->w[1] = f, t->dw[1] = dxdv;
    } else {
        t->n = 4;
        gs_cubic(f, t->w);
        for (int j = 0; j < 4; j++) t->idx[j] = gs_pixel(g, i0 - 1 + j, len, lo, hi);
        if (grad) {
            gs_cubic_d(f, t->dw);
            for (int j = 0; j < 4; j++) t->dw[j] *= dxdv;
        }
    }
    return true;
}

/* Each output point: the taps of every axis, their combinations as (offset
 * into one channel's image, weight product; a zero tap contributes
 * nothing), then every channel's weighted sum in double. A NaN coordinate
 * gives NaN in every channel. */
pp_status kern_GRIDSAMPLE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                          pprt_scratch *scratch, pp_err *err) {
    PP_TRY(check_outputs(PP_OP_GRIDSAMPLE, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[2] = {pprt_tinfo_of(&in[0]), pprt_tinfo_of(&in[1])};
    pp_gridsample g;
    PP_TRY(pp_gridsample_parse(attrs, ti, n_in, &g, err));
    const pp_shape *xs = &in[0].shape;
    const int k = g.k;
    const int64_t N = xs->dim[0], C = xs->dim[1];
    int64_t S = 1, P = 1, combos = 1;
    for (int d = 0; d < k; d++) {
        S *= xs->dim[2 + d];
        P *= out[0].shape.dim[2 + d];
        combos *= g.mode == PP_GS_CUBIC ? 4 : g.mode == PP_GS_LINEAR ? 2 : 1;
    }
    if (N * C * P == 0) return PP_OK;
    size_t b_off, b_w, total;
    PP_TRY(nbytes(combos, sizeof(int64_t), &b_off, "GridSample", err));
    PP_TRY(nbytes(combos, sizeof(double), &b_w, "GridSample", err));
    if (pp_add_ovf(pp_align_up(b_off, 64), b_w, &total))
        return PP_FAIL(err, PP_ENOMEM, "GridSample kernel: scratch size overflows");
    unsigned char *sc = pprt_scratch_get(scratch, total);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "GridSample kernel: cannot get %zu bytes", total);
    int64_t *off = (int64_t *)sc;
    double *w = (double *)(sc + pp_align_up(b_off, 64));
    const float *x = in[0].data, *grid = in[1].data;
    float *y = out[0].data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < P; p++) {
            const float *pt = grid + (n * P + p) * k;
            gs_taps t[PP_MAX_DIMS];
            bool ok = true;
            /* spatial axis d (X's axis 2 + d) takes the point's coordinate k - 1 - d */
            for (int d = 0; d < k && ok; d++) ok = gs_axis(&g, pt[k - 1 - d], xs->dim[2 + d], false, &t[d]);
            float *yp = y + n * C * P + p;
            if (!ok) {
                for (int64_t c = 0; c < C; c++) yp[c * P] = NAN;
                continue;
            }
            /* the combinations, the last axis fastest */
            int64_t m = 0;
            int pick[PP_MAX_DIMS] = {0};
            for (;;) {
                int64_t o = 0;
                double wt = 1;
                bool zero = false;
                for (int d = 0; d < k; d++) {
                    const int64_t i = t[d].idx[pick[d]];
                    if (i < 0) zero = true;
                    o = o * xs->dim[2 + d] + (i < 0 ? 0 : i);
                    wt *= t[d].w[pick[d]];
                }
                if (!zero) off[m] = o, w[m] = wt, m++;
                int d = k - 1;
                while (d >= 0 && ++pick[d] == t[d].n) pick[d--] = 0;
                if (d < 0) break;
            }
            const float *xn = x + n * C * S;
            for (int64_t c = 0; c < C; c++) {
                const float *xc = xn + c * S;
                double acc = 0;
                for (int64_t j = 0; j < m; j++) acc += w[j] * (double)xc[off[j]];
                yp[c * P] = (float)acc;
            }
        }
    return PP_OK;
}

/* pp.GridSampleGrad(dY, X, grid) -> (dX, dgrid): the forward's taps again
 * (gs_axis) for each output point, sample by sample. dX: each tap's weight
 * times dY added in double, in the points' order, then rounded (no atomics
 * anywhere: the bits are the order's). dgrid: for each axis, the sum over
 * the channels and taps of dY X times the tap's weight with that axis's
 * weight replaced by its derivative (the forward's function differentiated
 * as it is computed: a clamped or nearest coordinate gives 0, a reflected
 * one the slope of the taps it lands on). A NaN coordinate: dgrid NaN at
 * the point, nothing to dX. */
pp_status kern_GRIDSAMPLEGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                              pprt_scratch *scratch, pp_err *err) {
    PP_TRY(check_outputs(PP_OP_GRIDSAMPLEGRAD, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[2] = {pprt_tinfo_of(&in[1]), pprt_tinfo_of(&in[2])};
    pp_gridsample g;
    PP_TRY(pp_gridsample_parse(attrs, ti, 2, &g, err));
    const pp_shape *xs = &in[1].shape;
    const int k = g.k;
    const int64_t N = xs->dim[0], C = xs->dim[1];
    int64_t S = 1, P = 1;
    for (int d = 0; d < k; d++) S *= xs->dim[2 + d], P *= in[2].shape.dim[1 + d];
    size_t need;
    if (__builtin_mul_overflow((size_t)(C * S), sizeof(double), &need))
        return PP_FAIL(err, PP_ENOMEM, "pp.GridSampleGrad kernel: scratch size overflows");
    double *acc = pprt_scratch_get(scratch, need ? need : 1);
    if (!acc) return PP_FAIL(err, PP_ENOMEM, "pp.GridSampleGrad kernel: cannot get %zu bytes of scratch", need);
    const float *dy = in[0].data, *x = in[1].data, *grid = in[2].data;
    float *dx = out[0].data, *dg = out[1].data;
    for (int64_t n = 0; n < N; n++) {
        memset(acc, 0, need);
        for (int64_t p = 0; p < P; p++) {
            const float *pt = grid + (n * P + p) * k;
            float *gp = dg + (n * P + p) * k;
            gs_taps t[PP_MAX_DIMS];
            bool ok = true;
            for (int d = 0; d < k && ok; d++) ok = gs_axis(&g, pt[k - 1 - d], xs->dim[2 + d], true, &t[d]);
            if (!ok) {
                for (int d = 0; d < k; d++) gp[d] = NAN;
                continue;
            }
            double dsum[PP_MAX_DIMS] = {0};
            int pick[PP_MAX_DIMS] = {0};
            for (;;) { /* the combinations, the last axis fastest, as the forward */
                int64_t o = 0;
                double wt = 1;
                bool zero = false;
                for (int d = 0; d < k; d++) {
                    const int64_t i = t[d].idx[pick[d]];
                    zero |= i < 0;
                    o = o * xs->dim[2 + d] + (i < 0 ? 0 : i);
                    wt *= t[d].w[pick[d]];
                }
                for (int64_t c = 0; !zero && c < C; c++) {
                    const double gyv = (double)dy[(n * C + c) * P + p];
                    acc[c * S + o] += wt * gyv;
                    const double xv = (double)x[(n * C + c) * S + o] * gyv;
                    for (int d = 0; d < k; d++) { /* this axis's weight by its derivative */
                        double wd = t[d].dw[pick[d]];
                        for (int e = 0; e < k && wd != 0; e++)
                            if (e != d) wd *= t[e].w[pick[e]];
                        dsum[d] += wd * xv;
                    }
                }
                int d = k - 1;
                while (d >= 0 && ++pick[d] == t[d].n) pick[d--] = 0;
                if (d < 0) break;
            }
            for (int d = 0; d < k; d++) gp[k - 1 - d] = (float)dsum[d];
        }
        for (int64_t j = 0; j < C * S; j++) dx[n * C * S + j] = (float)acc[j];
    }
    return PP_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------------ */

/* grid[n, point, r] = theta[n, r, :] . (x, y[, z], 1), x along the last axis;
 * sums in double. */
pp_status kern_AFFINEGRID(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                          pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(check_outputs(PP_OP_AFFINEGRID, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[2] = {pprt_tinfo_of(&in[0]), pprt_tinfo_of(&in[1])};
    pp_affinegrid g;
    PP_TRY(pp_affinegrid_parse(attrs, ti, &g, err));
    const int k = g.k;
    int64_t P = 1;
    for (int d = 0; d < k; d++) P *= g.out[d];
    const bool f64 = in[0].dtype == PP_F64;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t p = 0; p < P; p++) {
            double base[4] = {0, 0, 0, 1}; /* x, y[, z], 1: the last spatial axis first */
            int64_t rest = p;
            for (int d = k - 1; d >= 0; d--) {
                base[k - 1 - d] = pp_affine_base(g.align_corners, rest % g.out[d], g.out[d]);
                rest /= g.out[d];
            }
            base[k] = 1;
            for (int r = 0; r < k; r++) {
                double acc = 0;
                for (int c = 0; c <= k; c++) {
                    const int64_t at = (n * k + r) * (k + 1) + c;
                    acc += (f64 ? ((const double *)in[0].data)[at] : (double)((const float *)in[0].data)[at]) * base[c];
                }
                const int64_t o = (n * P + p) * k + r;
                if (f64) ((double *)out[0].data)[o] = acc;
                else ((float *)out[0].data)[o] = (float)acc;
            }
        }
    return PP_OK;
}
