/* shape_nn.c: shape inference and FLOPs of the ops in ops_nn.def:
 * ConvTranspose, Col2Im, AveragePool, GlobalMaxPool, InstanceNormalization,
 * LayerNormalization, GroupNormalization, MatMul, Einsum, Softmax,
 * LogSoftmax, the Reduce* family, ArgMax/ArgMin, TopK and Resize.
 * (Conv, BatchNormalization, MaxPool, GlobalAveragePool and Gemm live in
 * shape.c and cost.c.)
 *
 * The parsers declared in shape_nn.h (ConvTranspose geometry, reduction axes,
 * Softmax split, Einsum equation, TopK and Resize parameters) are also what
 * runtime/cpu/ref_nn.c runs on, so an attribute means the same thing at
 * compile time and at run time. Inputs that decide an output's shape (TopK's
 * K, Reduce* axes, Resize's roi/scales/sizes) must be constants known at
 * compile time.
 *
 * Element types: f32 everywhere; f64 for MatMul, Einsum, Softmax/LogSoftmax,
 * the reductions, ArgMax/ArgMin and TopK; integer types where the op is
 * integer-meaningful (MatMul and Einsum: int32/int64; reductions: int32/int64,
 * plus bool/int8/uint8 for ReduceMax/ReduceMin; ArgMax/ArgMin and TopK: all
 * 8- to 64-bit integers). Anything else fails with PP_EUNSUP. */
#include "shape_nn.h"
#include "op_fns.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

static bool present(const pp_tinfo *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

/* Fail unless t's type is one of ok[0..n); the message lists them. */
static pp_status need_dtype(const pp_tinfo *t, const char *what, const pp_dtype *ok, int n,
                            pp_err *err) {
    for (int i = 0; i < n; i++)
        if (t->dtype == ok[i]) return PP_OK;
    char list[160] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                                pp_dtype_name(ok[i]));
    return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; supported: %s", what,
                   pp_dtype_name(t->dtype), list);
}

static const pp_dtype T_F[] = {PP_F32};
static const pp_dtype T_FD[] = {PP_F32, PP_F64};
static const pp_dtype T_FDI[] = {PP_F32, PP_F64, PP_I32, PP_I64};
/* the ops ppcc --precision bf16|fp16 stores in half (passes/precision.c): f32 inside the kernels */
static const pp_dtype T_FH[] = {PP_F32, PP_F16, PP_BF16};
static const pp_dtype T_FDH[] = {PP_F32, PP_F64, PP_F16, PP_BF16};
static const pp_dtype T_FDIH[] = {PP_F32, PP_F64, PP_I32, PP_I64, PP_F16, PP_BF16};
static const pp_dtype T_MINMAX[] = {PP_F32, PP_F64, PP_I32, PP_I64, PP_I8, PP_U8, PP_BOOL, PP_F16, PP_BF16};
static const pp_dtype T_ORDER[] = {PP_F32, PP_F64, PP_I8, PP_U8, PP_I16, PP_U16,
                                   PP_I32, PP_U32, PP_I64, PP_U64};
static const pp_dtype T_ORDERH[] = {PP_F32, PP_F64, PP_I8, PP_U8, PP_I16, PP_U16, /* ArgMax, ArgMin */
                                    PP_I32, PP_U32, PP_I64, PP_U64, PP_F16, PP_BF16};
#define NT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static pp_status need_same_dtype(const pp_tinfo *t, const pp_tinfo *ref, const char *what,
                                 pp_err *err) {
    if (t->dtype != ref->dtype)
        return PP_FAIL(err, PP_EINVAL, "%s has element type %s, expected %s (as input 0)", what,
                       pp_dtype_name(t->dtype), pp_dtype_name(ref->dtype));
    return PP_OK;
}

/* t must be 1-D with n elements. */
static pp_status need_vec(const pp_tinfo *t, int64_t n, const char *what, pp_err *err) {
    if (t->shape.rank != 1 || t->shape.dim[0] != n)
        return PP_FAIL(err, PP_EINVAL, "%s must have shape [%lld]", what, (long long)n);
    return PP_OK;
}

static pp_status bool_attr(pp_attrs a, const char *name, int64_t def, bool *out, pp_err *err) {
    int64_t v;
    PP_TRY(pp_attr_int(a, name, def, &v, err));
    if (v != 0 && v != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute '%s'=%lld must be 0 or 1", name, (long long)v);
    *out = v != 0;
    return PP_OK;
}

static int64_t numel_i(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

/* A constant float tensor (f32 or f64) of at most max values. */
static pp_status const_floats(const pp_tinfo *t, const char *what, double *out, int max, int *n,
                              pp_err *err) {
    if (t->dtype != PP_F32 && t->dtype != PP_F64)
        return PP_FAIL(err, PP_EUNSUP, "%s must be float or double, got %s", what,
                       pp_dtype_name(t->dtype));
    int64_t cnt = numel_i(&t->shape);
    if (cnt > max)
        return PP_FAIL(err, PP_EINVAL, "%s has %lld values, at most %d expected", what,
                       (long long)cnt, max);
    if (cnt > 0 && !t->data)
        return PP_FAIL(err, PP_EUNSUP,
                       "%s must be a constant known at compile time (a data-dependent shape is "
                       "not supported)", what);
    for (int64_t i = 0; i < cnt; i++)
        out[i] = t->dtype == PP_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
    *n = (int)cnt;
    return PP_OK;
}

/* A constant integer list; an empty tensor needs no bytes. */
static pp_status const_ints0(const pp_tinfo *t, const char *what, int64_t *out, int max, int *n,
                             pp_err *err) {
    if (t->shape.rank > 1)
        return PP_FAIL(err, PP_EINVAL, "%s must be 1-D, has rank %d", what, t->shape.rank);
    if (numel_i(&t->shape) == 0 && (t->dtype == PP_I64 || t->dtype == PP_I32)) {
        *n = 0;
        return PP_OK;
    }
    return pp_const_ints(t, what, out, max, n, err);
}

static pp_status string_choice(pp_attrs a, const char *name, const char *def,
                               const char *const *choices, int n, int *out, pp_err *err) {
    const char *s;
    PP_TRY(pp_attr_string(a, name, def, &s, err));
    for (int i = 0; i < n; i++)
        if (choices[i] && !strcmp(s, choices[i])) {
            *out = i;
            return PP_OK;
        }
    return PP_FAIL(err, PP_EINVAL, "attribute '%s' has unknown value '%s'", name, s);
}

/* ---- ConvTranspose ---------------------------------------------------------------- */

pp_status pp_convt_geom(pp_attrs a, const pp_shape *x, const pp_shape *w, pp_geom *g,
                        int64_t *group, pp_err *err) {
    memset(g, 0, sizeof *g);
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > PP_MAX_SPATIAL)
        return PP_FAIL(err, PP_EUNSUP, "input X has rank %d: 1 to %d spatial dims supported",
                       x->rank, PP_MAX_SPATIAL);
    if (w->rank != x->rank)
        return PP_FAIL(err, PP_EINVAL, "weight W has rank %d, expected %d (same as X)", w->rank,
                       x->rank);
    g->nsp = nsp;
    PP_TRY(pp_attr_int(a, "group", 1, group, err));
    if (*group < 1 || x->dim[1] % *group)
        return PP_FAIL(err, PP_EINVAL, "attribute 'group'=%lld does not divide the %lld input "
                       "channels", (long long)*group, (long long)x->dim[1]);
    if (w->dim[0] != x->dim[1])
        return PP_FAIL(err, PP_EINVAL, "weight W has %lld input channels (dim 0), X has %lld",
                       (long long)w->dim[0], (long long)x->dim[1]);
    int64_t ks[PP_MAX_DIMS], st[PP_MAX_DIMS], dl[PP_MAX_DIMS], pd[2 * PP_MAX_DIMS],
        op[PP_MAX_DIMS], os[PP_MAX_DIMS];
    int nk, ns, nd, np, nop, nos;
    PP_TRY(pp_attr_ints(a, "kernel_shape", ks, PP_MAX_DIMS, &nk, err));
    PP_TRY(pp_attr_ints(a, "strides", st, PP_MAX_DIMS, &ns, err));
    PP_TRY(pp_attr_ints(a, "dilations", dl, PP_MAX_DIMS, &nd, err));
    PP_TRY(pp_attr_ints(a, "pads", pd, 2 * PP_MAX_DIMS, &np, err));
    PP_TRY(pp_attr_ints(a, "output_padding", op, PP_MAX_DIMS, &nop, err));
    PP_TRY(pp_attr_ints(a, "output_shape", os, PP_MAX_DIMS, &nos, err));
    if (nk && nk != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'kernel_shape' has %d values, expected %d", nk,
                       nsp);
    for (int i = 0; i < nk; i++)
        if (ks[i] != w->dim[2 + i])
            return PP_FAIL(err, PP_EINVAL,
                           "attribute 'kernel_shape' disagrees with the weight's shape");
    if (ns && ns != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'strides' has %d values, expected %d", ns, nsp);
    if (nd && nd != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'dilations' has %d values, expected %d", nd,
                       nsp);
    if (np && np != 2 * nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'pads' has %d values, expected %d", np,
                       2 * nsp);
    if (nop && nop != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'output_padding' has %d values, expected %d",
                       nop, nsp);
    /* output_shape: the spatial dims, or (as some exporters write) the whole shape */
    if (nos && nos != nsp && nos != nsp + 2)
        return PP_FAIL(err, PP_EINVAL, "attribute 'output_shape' has %d values, expected %d",
                       nos, nsp);
    const int64_t *osp = nos == nsp + 2 ? os + 2 : os;
    static const char *const pads_modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    int mode = 0;
    PP_TRY(string_choice(a, "auto_pad", "NOTSET", pads_modes, 4, &mode, err));
    const int64_t LIM = (int64_t)1 << 20;
    for (int i = 0; i < nsp; i++) {
        g->in[i] = x->dim[2 + i];
        g->k[i] = w->dim[2 + i];
        g->stride[i] = ns ? st[i] : 1;
        g->dil[i] = nd ? dl[i] : 1;
        int64_t opad = nop ? op[i] : 0;
        if (g->in[i] < 1 || g->in[i] > ((int64_t)1 << 40))
            return PP_FAIL(err, PP_EUNSUP, "input X spatial dim %d is %lld, expected >= 1", i,
                           (long long)g->in[i]);
        if (g->k[i] < 1 || g->k[i] > LIM)
            return PP_FAIL(err, PP_EINVAL, "kernel dim %d is %lld, expected 1..2^20", i,
                           (long long)g->k[i]);
        if (g->stride[i] < 1 || g->stride[i] > LIM)
            return PP_FAIL(err, PP_EINVAL, "attribute 'strides'[%d]=%lld, expected >= 1", i,
                           (long long)g->stride[i]);
        if (g->dil[i] < 1 || g->dil[i] > LIM)
            return PP_FAIL(err, PP_EINVAL, "attribute 'dilations'[%d]=%lld, expected >= 1", i,
                           (long long)g->dil[i]);
        if (opad < 0 || opad > LIM)
            return PP_FAIL(err, PP_EINVAL, "attribute 'output_padding'[%d]=%lld, expected >= 0",
                           i, (long long)opad);
        /* onnxruntime refuses it too: the extra rows would lie past every input's reach */
        if (opad >= g->stride[i])
            return PP_FAIL(err, PP_EINVAL, "attribute 'output_padding'[%d]=%lld, expected less than the "
                           "stride %lld", i, (long long)opad, (long long)g->stride[i]);
        const int64_t full = g->stride[i] * (g->in[i] - 1) + opad + g->dil[i] * (g->k[i] - 1) + 1;
        if (nos || mode >= 2) {
            int64_t out;
            if (nos) {
                out = osp[i];
                if (out < 0 || out > ((int64_t)1 << 40))
                    return PP_FAIL(err, PP_EINVAL, "attribute 'output_shape'[%d]=%lld is invalid",
                                   i, (long long)out);
            } else {
                out = g->in[i] * g->stride[i];
            }
            int64_t total = full - out;
            /* more output than the full result: an output_shape less than a stride past it gets zeros
             * (plus bias) at the end, as output_padding would (the node tests, onnxruntime); further,
             * or from auto_pad SAME, no one agrees: onnxruntime refuses such an output_shape and
             * shrinks a SAME output to the full result, the ONNX reference refuses the former and
             * puts a SAME_UPPER output's extra zeros first */
            if (total < 0 && (!nos || -total >= g->stride[i]))
                return PP_FAIL(err, PP_EUNSUP, "spatial dim %d: the output asked for (%lld, by %s) is larger than "
                               "the full transposed convolution (%lld) by %lld, not less than the stride %lld; "
                               "implementations disagree on where the extra zeros go, so it is refused", i,
                               (long long)out, nos ? "attribute 'output_shape'" : "auto_pad SAME: input x stride",
                               (long long)full, (long long)-total, (long long)g->stride[i]);
            if (total < 0) {
                g->pad0[i] = 0;
            } else if (mode == 2) { /* SAME_UPPER: the extra padding goes at the end */
                g->pad0[i] = total / 2;
            } else {
                g->pad0[i] = total - total / 2;
            }
            g->pad1[i] = total - g->pad0[i];
            g->out[i] = out;
        } else {
            g->pad0[i] = (np && mode == 0) ? pd[i] : 0;
            g->pad1[i] = (np && mode == 0) ? pd[nsp + i] : 0;
            if (g->pad0[i] < 0 || g->pad1[i] < 0 || g->pad0[i] > LIM || g->pad1[i] > LIM)
                return PP_FAIL(err, PP_EINVAL, "attribute 'pads' has a negative or absurd value");
            g->out[i] = full - g->pad0[i] - g->pad1[i];
            if (g->out[i] < 0)
                return PP_FAIL(err, PP_EINVAL, "attribute 'pads' removes more than the whole "
                               "output in spatial dim %d", i);
        }
    }
    return PP_OK;
}

pp_status shape_CONVTRANSPOSE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                              int n_out, pp_err *err) {
    (void)n_out;
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(need_same_dtype(&in[1], &in[0], "weight W", err));
    pp_geom g;
    int64_t group;
    PP_TRY(pp_convt_geom(a, &in[0].shape, &in[1].shape, &g, &group, err));
    const int64_t M = in[1].shape.dim[1] * group;
    if (present(in, n_in, 2)) {
        PP_TRY(need_same_dtype(&in[2], &in[0], "bias B", err));
        PP_TRY(need_vec(&in[2], M, "bias B", err));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = in[0].shape.rank;
    out[0].shape.dim[0] = in[0].shape.dim[0];
    out[0].shape.dim[1] = M;
    for (int i = 0; i < g.nsp; i++) out[0].shape.dim[2 + i] = g.out[i];
    return PP_OK;
}

double flops_CONVTRANSPOSE(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                           int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    /* every input element meets (M/group) * kernel volume weights */
    double kvol = 1;
    for (int i = 1; i < in[1].shape.rank; i++) kvol *= (double)in[1].shape.dim[i];
    return 2.0 * pp_numel_d(&in[0]) * kvol;
}

/* ---- Col2Im ------------------------------------------------------------------------------- */

/* Col2Im's attribute `name`: k values (pads: 2k) of at least lo, into
 * out[2 * PP_MAX_DIMS]; absent: def each. */
static pp_status col2im_attr(pp_attrs a, const char *name, int k, int64_t def, int64_t lo, int64_t *out, pp_err *err) {
    int n;
    PP_TRY(pp_attr_ints(a, name, out, 2 * PP_MAX_DIMS, &n, err));
    const int want = !strcmp(name, "pads") ? 2 * k : k;
    if (!pp_attr_find(a, name)) {
        for (int i = 0; i < want; i++) out[i] = def;
        return PP_OK;
    }
    if (n != want)
        return PP_FAIL(err, PP_EINVAL, "attribute '%s' has %d values; the image has %d spatial axes, so %d are needed",
                       name, n, k, want);
    for (int i = 0; i < n; i++)
        if (out[i] < lo)
            return PP_FAIL(err, PP_EINVAL, "attribute '%s' holds %lld at %d; its values must be >= %lld", name,
                           (long long)out[i], i, (long long)lo);
    return PP_OK;
}

pp_status pp_col2im_parse(pp_attrs a, const pp_tinfo *in, pp_col2im *g, pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input 'input'", T_FD, NT(T_FD), err));
    PP_TRY(pp_need_rank(&in[0], 3, 3, "input 'input'", err));
    int ni, nb;
    int64_t img[PP_MAX_DIMS], blk[PP_MAX_DIMS];
    PP_TRY(const_ints0(&in[1], "input 'image_shape'", img, PP_MAX_DIMS, &ni, err));
    PP_TRY(const_ints0(&in[2], "input 'block_shape'", blk, PP_MAX_DIMS, &nb, err));
    if (in[1].shape.rank != 1 || in[2].shape.rank != 1)
        return PP_FAIL(err, PP_EINVAL, "inputs 'image_shape' and 'block_shape' must be 1-D, have ranks %d and %d",
                       in[1].shape.rank, in[2].shape.rank);
    if (ni < 1 || ni > PP_MAX_DIMS - 2)
        return PP_FAIL(err, PP_EUNSUP, "input 'image_shape' has %d values; 1 to %d spatial axes are supported", ni,
                       PP_MAX_DIMS - 2);
    if (nb != ni)
        return PP_FAIL(err, PP_EINVAL, "input 'block_shape' has %d values, input 'image_shape' %d", nb, ni);
    const int k = g->k = ni;
    int64_t dil[2 * PP_MAX_DIMS], str[2 * PP_MAX_DIMS], pads[2 * PP_MAX_DIMS];
    PP_TRY(col2im_attr(a, "dilations", k, 1, 1, dil, err));
    PP_TRY(col2im_attr(a, "strides", k, 1, 1, str, err));
    PP_TRY(col2im_attr(a, "pads", k, 0, 0, pads, err));
    const pp_shape *x = &in[0].shape;
    g->n = x->dim[0];
    g->kvol = 1;
    g->L = 1;
    for (int d = 0; d < k; d++) {
        if (img[d] < 1 || blk[d] < 1)
            return PP_FAIL(err, PP_EINVAL, "axis %d: image_shape %lld and block_shape %lld must be positive", d,
                           (long long)img[d], (long long)blk[d]);
        int64_t span, room; /* the block's extent with dilations; the padded image */
        if (__builtin_mul_overflow(dil[d], blk[d] - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
            __builtin_add_overflow(img[d], pads[d], &room) || __builtin_add_overflow(room, pads[k + d], &room))
            return PP_FAIL(err, PP_EINVAL, "axis %d: the block or the padded image overflows", d);
        if (span > room)
            return PP_FAIL(err, PP_EINVAL, "axis %d: a block spans %lld (block_shape %lld, dilation %lld), more than "
                           "the padded image's %lld", d, (long long)span, (long long)blk[d], (long long)dil[d],
                           (long long)room);
        g->img[d] = img[d], g->blk[d] = blk[d], g->dil[d] = dil[d], g->stride[d] = str[d];
        g->pad0[d] = pads[d];
        g->nb[d] = (room - span) / str[d] + 1;
        if (__builtin_mul_overflow(g->kvol, blk[d], &g->kvol) || __builtin_mul_overflow(g->L, g->nb[d], &g->L))
            return PP_FAIL(err, PP_EINVAL, "the block's or the blocks' count overflows");
    }
    if (x->dim[1] % g->kvol)
        return PP_FAIL(err, PP_EINVAL, "input 'input' has %lld values a block (axis 1), not a multiple of the "
                       "block's %lld (block_shape's product)", (long long)x->dim[1], (long long)g->kvol);
    g->c = x->dim[1] / g->kvol;
    if (x->dim[2] != g->L) {
        char s1[96] = "";
        size_t len = 0;
        for (int d = 0; d < k && len < sizeof s1; d++)
            len += (size_t)snprintf(s1 + len, sizeof s1 - len, "%s%lld", d ? " x " : "", (long long)g->nb[d]);
        return PP_FAIL(err, PP_EINVAL, "input 'input' has %lld blocks (axis 2); image_shape, block_shape, dilations, "
                       "pads and strides make %s = %lld", (long long)x->dim[2], s1, (long long)g->L);
    }
    return PP_OK;
}

pp_status shape_COL2IM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    pp_col2im g;
    PP_TRY(pp_col2im_parse(a, in, &g, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = g.k + 2;
    out[0].shape.dim[0] = g.n;
    out[0].shape.dim[1] = g.c;
    for (int d = 0; d < g.k; d++) out[0].shape.dim[2 + d] = g.img[d];
    return PP_OK;
}

/* one add per input value */
double flops_COL2IM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    return pp_numel_d(&in[0]);
}

/* ---- AveragePool, GlobalMaxPool ------------------------------------------------------ */

/* AveragePool's and LpPool's output: X (f32, or a half plan's f16 / bf16:
 * computed in f32; 1-3 spatial axes) through the window the attributes give. */
static pp_status window_pool_shape(pp_attrs a, const pp_tinfo *in, pp_tinfo *out, pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(pp_need_rank(&in[0], 3, 2 + PP_MAX_SPATIAL, "input X", err));
    pp_geom g;
    PP_TRY(pp_geom_make(a, &in[0].shape, NULL, true, &g, err));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    for (int i = 0; i < g.nsp; i++) out[0].shape.dim[2 + i] = g.out[i];
    return PP_OK;
}

pp_status shape_AVGPOOL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    bool cip;
    PP_TRY(bool_attr(a, "count_include_pad", 0, &cip, err));
    return window_pool_shape(a, in, out, err);
}

/* LpPool: AveragePool's window (auto_pad, pads, strides, dilations and
 * ceil_mode from opset 18), p >= 1. */
pp_status shape_LPPOOL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    int64_t p;
    PP_TRY(pp_attr_int(a, "p", 2, &p, err));
    if (p < 1) return PP_FAIL(err, PP_EINVAL, "attribute 'p'=%lld is not a positive integer", (long long)p);
    return window_pool_shape(a, in, out, err);
}

double flops_LPPOOL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return 3.0 * flops_AVGPOOL(a, in, n_in, out, n_out);
}

double flops_AVGPOOL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)in, (void)n_in, (void)n_out;
    int64_t ks[PP_MAX_DIMS];
    int nk = 0;
    double kvol = 1;
    if (pp_attr_ints(a, "kernel_shape", ks, PP_MAX_DIMS, &nk, NULL) == PP_OK)
        for (int i = 0; i < nk; i++) kvol *= (double)ks[i];
    return pp_numel_d(&out[0]) * kvol;
}

pp_status shape_GLOBALMAXPOOL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                              int n_out, pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input X", T_FDH, NT(T_FDH), err));
    PP_TRY(pp_need_rank(&in[0], 3, PP_MAX_DIMS, "input X", err));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    for (int i = 2; i < in[0].shape.rank; i++) out[0].shape.dim[i] = 1;
    return PP_OK;
}

double flops_GLOBALMAXPOOL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                           int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    return pp_numel_d(&in[0]);
}

/* ---- normalizations ------------------------------------------------------------------ */

static pp_status eps_attr(pp_attrs a, float *eps, pp_err *err) {
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, eps, err));
    if (!(*eps >= 0.0f) || isinf(*eps))
        return PP_FAIL(err, PP_EINVAL, "attribute 'epsilon'=%g must be finite and >= 0",
                       (double)*eps);
    return PP_OK;
}

static pp_status stash_attr(pp_attrs a, pp_err *err) {
    int64_t st;
    PP_TRY(pp_attr_int(a, "stash_type", 1, &st, err));
    if (st != 1)
        return PP_FAIL(err, PP_EUNSUP, "attribute 'stash_type'=%lld: only 1 (float) is supported",
                       (long long)st);
    return PP_OK;
}

pp_status shape_INSTANCENORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                             int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(pp_need_rank(&in[0], 3, PP_MAX_DIMS, "input X", err));
    PP_TRY(need_same_dtype(&in[1], &in[0], "scale", err));
    PP_TRY(need_same_dtype(&in[2], &in[0], "B", err));
    PP_TRY(need_vec(&in[1], in[0].shape.dim[1], "scale", err));
    PP_TRY(need_vec(&in[2], in[0].shape.dim[1], "B", err));
    float eps;
    PP_TRY(eps_attr(a, &eps, err));
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}

double flops_INSTANCENORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                          int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 5.0 * pp_numel_d(&out[0]);
}

/* t broadcasts (right-aligned, dims equal or 1) to x's dims [axis, rank). */
static pp_status need_bcast_tail(const pp_tinfo *t, const pp_shape *x, int axis, const char *what,
                                 pp_err *err) {
    int nr = x->rank - axis;
    bool ok = t->shape.rank <= nr;
    for (int i = 0; ok && i < t->shape.rank; i++) {
        int64_t d = t->shape.dim[t->shape.rank - 1 - i], xd = x->dim[x->rank - 1 - i];
        if (d != xd && d != 1) ok = false;
    }
    if (!ok) {
        pp_shape tail = {.rank = nr};
        for (int i = 0; i < nr; i++) tail.dim[i] = x->dim[axis + i];
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL, "%s has shape %s, which does not broadcast to the "
                       "normalized shape %s", what, pp_shape_str(&t->shape, s1, sizeof s1),
                       pp_shape_str(&tail, s2, sizeof s2));
    }
    return PP_OK;
}

pp_status shape_LAYERNORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input X", err));
    const pp_shape *x = &in[0].shape;
    int64_t axis64;
    int axis;
    PP_TRY(pp_attr_int(a, "axis", -1, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", &axis, err));
    float eps;
    PP_TRY(eps_attr(a, &eps, err));
    PP_TRY(stash_attr(a, err));
    PP_TRY(need_same_dtype(&in[1], &in[0], "Scale", err));
    PP_TRY(need_bcast_tail(&in[1], x, axis, "Scale", err));
    if (present(in, n_in, 2)) {
        PP_TRY(need_same_dtype(&in[2], &in[0], "B", err));
        PP_TRY(need_bcast_tail(&in[2], x, axis, "B", err));
    }
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    pp_shape st = *x;
    for (int i = axis; i < x->rank; i++) st.dim[i] = 1;
    for (int k = 1; k < n_out; k++) out[k] = (pp_tinfo){PP_F32, st, NULL};
    return PP_OK;
}

double flops_LAYERNORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 6.0 * pp_numel_d(&out[0]);
}

pp_status shape_GROUPNORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(pp_need_rank(&in[0], 2, PP_MAX_DIMS, "input X", err));
    const pp_shape *x = &in[0].shape;
    int64_t G;
    const pp_attr *ga = pp_attr_find(a, "num_groups");
    if (!ga) return PP_FAIL(err, PP_EINVAL, "attribute 'num_groups' is required");
    PP_TRY(pp_attr_int(a, "num_groups", 1, &G, err));
    if (G < 1 || x->dim[1] % G)
        return PP_FAIL(err, PP_EINVAL, "attribute 'num_groups'=%lld does not divide the %lld "
                       "channels", (long long)G, (long long)x->dim[1]);
    float eps;
    PP_TRY(eps_attr(a, &eps, err));
    PP_TRY(stash_attr(a, err));
    /* opset 18: scale and bias per group; opset 21: per channel */
    const int64_t n = a.opset >= 21 ? x->dim[1] : G;
    const char *sn = a.opset >= 21 ? "scale (opset >= 21: one per channel)"
                                   : "scale (opset < 21: one per group)";
    const char *bn = a.opset >= 21 ? "bias (opset >= 21: one per channel)"
                                   : "bias (opset < 21: one per group)";
    PP_TRY(need_same_dtype(&in[1], &in[0], "scale", err));
    PP_TRY(need_same_dtype(&in[2], &in[0], "bias", err));
    PP_TRY(need_vec(&in[1], n, sn, err));
    PP_TRY(need_vec(&in[2], n, bn, err));
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    return PP_OK;
}

double flops_GROUPNORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 5.0 * pp_numel_d(&out[0]);
}

/* ---- MatMul ---------------------------------------------------------------------------- */

pp_status shape_MATMUL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input A", T_FDIH, NT(T_FDIH), err));
    PP_TRY(need_same_dtype(&in[1], &in[0], "input B", err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input A", err));
    PP_TRY(pp_need_rank(&in[1], 1, PP_MAX_DIMS, "input B", err));
    const pp_shape *as = &in[0].shape, *bs = &in[1].shape;
    int64_t ka = as->dim[as->rank - 1];
    int64_t kb = bs->rank == 1 ? bs->dim[0] : bs->dim[bs->rank - 2];
    if (ka != kb)
        return PP_FAIL(err, PP_EINVAL, "inner dimensions differ: A gives K=%lld, B gives K=%lld",
                       (long long)ka, (long long)kb);
    pp_shape ba = {.rank = as->rank > 2 ? as->rank - 2 : 0};
    pp_shape bb = {.rank = bs->rank > 2 ? bs->rank - 2 : 0};
    for (int i = 0; i < ba.rank; i++) ba.dim[i] = as->dim[i];
    for (int i = 0; i < bb.rank; i++) bb.dim[i] = bs->dim[i];
    pp_shape o;
    PP_TRY(pp_broadcast(&ba, &bb, &o, err));
    if (as->rank >= 2) o.dim[o.rank++] = as->dim[as->rank - 2];
    if (bs->rank >= 2) {
        if (o.rank >= PP_MAX_DIMS)
            return PP_FAIL(err, PP_EUNSUP, "the output would have more than %d dims",
                           PP_MAX_DIMS);
        o.dim[o.rank++] = bs->dim[bs->rank - 1];
    }
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    return PP_OK;
}

double flops_MATMUL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)n_out;
    return 2.0 * pp_numel_d(&out[0]) * (double)in[0].shape.dim[in[0].shape.rank - 1];
}

/* ---- Einsum ------------------------------------------------------------------------------ */

static int letter_label(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* Parse one term (no spaces) into labels; *ell: position of '...' or -1. */
static pp_status einsum_term(const char *s, size_t len, int8_t *labs, int *nl, int *ell,
                             pp_err *err) {
    *nl = 0;
    *ell = -1;
    for (size_t i = 0; i < len;) {
        if (s[i] == '.') {
            if (!(i + 2 < len && s[i + 1] == '.' && s[i + 2] == '.'))
                return PP_FAIL(err, PP_EINVAL, "attribute 'equation': a lone '.'");
            if (*ell >= 0)
                return PP_FAIL(err, PP_EINVAL, "attribute 'equation': '...' twice in one term");
            *ell = *nl;
            i += 3;
            continue;
        }
        int l = letter_label(s[i]);
        if (l < 0)
            return PP_FAIL(err, PP_EINVAL, "attribute 'equation': unexpected character '%c'",
                           s[i]);
        if (*nl >= PP_MAX_DIMS)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'equation': a term has more than %d "
                           "labels", PP_MAX_DIMS);
        labs[(*nl)++] = (int8_t)l;
        i++;
    }
    return PP_OK;
}

pp_status pp_einsum_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_einsum *e, pp_err *err) {
    memset(e, 0, sizeof *e);
    const char *eq;
    PP_TRY(pp_attr_string(a, "equation", NULL, &eq, err));
    if (!eq) return PP_FAIL(err, PP_EINVAL, "attribute 'equation' is required");
    char buf[256];
    size_t n = 0;
    for (const char *p = eq; *p; p++) {
        if (*p == ' ' || *p == '\t') continue;
        if (n + 1 >= sizeof buf)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'equation' is too long");
        buf[n++] = *p;
    }
    buf[n] = 0;
    const char *arrow = strstr(buf, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - buf) : n;
    if (n_in > PP_EINSUM_MAX_OPS)
        return PP_FAIL(err, PP_EUNSUP, "at most %d operands are supported", PP_EINSUM_MAX_OPS);
    e->n_ops = n_in;
    /* left-hand side terms */
    int8_t labs[PP_EINSUM_MAX_OPS][PP_MAX_DIMS];
    int nl[PP_EINSUM_MAX_OPS], ellpos[PP_EINSUM_MAX_OPS];
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i < lhs_len && buf[i] != ',') continue;
        if (k >= n_in)
            return PP_FAIL(err, PP_EINVAL, "attribute 'equation' has more terms than the %d "
                           "inputs", n_in);
        PP_TRY(einsum_term(buf + start, i - start, labs[k], &nl[k], &ellpos[k], err));
        k++;
        start = i + 1;
    }
    if (k != n_in)
        return PP_FAIL(err, PP_EINVAL, "attribute 'equation' has %d terms for %d inputs", k,
                       n_in);
    /* ellipsis extents, right-aligned across operands */
    int n_ell = 0;
    int ell_rank[PP_EINSUM_MAX_OPS];
    for (int i = 0; i < n_in; i++) {
        int r = in[i].shape.rank;
        ell_rank[i] = 0;
        if (ellpos[i] < 0) {
            if (r != nl[i])
                return PP_FAIL(err, PP_EINVAL, "input %d has rank %d, its equation term has %d "
                               "labels", i, r, nl[i]);
        } else {
            if (r < nl[i])
                return PP_FAIL(err, PP_EINVAL, "input %d has rank %d, fewer than the %d labels "
                               "of its term", i, r, nl[i]);
            ell_rank[i] = r - nl[i];
            if (ell_rank[i] > n_ell) n_ell = ell_rank[i];
        }
    }
    for (int l = 0; l < PP_EINSUM_LABELS; l++) e->size[l] = -1;
    for (int i = 0; i < n_in; i++) {
        int d = 0;
        e->rank[i] = in[i].shape.rank;
        for (int j = 0; j <= nl[i]; j++) {
            if (j == ellpos[i])
                for (int q = 0; q < ell_rank[i]; q++, d++)
                    e->lab[i][d] = (int8_t)(52 + n_ell - ell_rank[i] + q);
            if (j < nl[i]) e->lab[i][d++] = labs[i][j];
        }
        for (d = 0; d < e->rank[i]; d++) {
            int l = e->lab[i][d];
            int64_t sz = in[i].shape.dim[d];
            e->used[l] = true;
            if (e->size[l] < 0 || e->size[l] == 1) {
                if (e->size[l] == 1 && sz != 1 && l < 52)
                    return PP_FAIL(err, PP_EINVAL, "label '%c' has extents 1 and %lld",
                                   l < 26 ? 'a' + l : 'A' + l - 26, (long long)sz);
                e->size[l] = sz;
            } else if (sz != e->size[l] && !(sz == 1 && l >= 52)) {
                if (l >= 52)
                    return PP_FAIL(err, PP_EINVAL, "the dims covered by '...' do not broadcast");
                return PP_FAIL(err, PP_EINVAL, "label '%c' has extents %lld and %lld",
                               l < 26 ? 'a' + l : 'A' + l - 26, (long long)e->size[l],
                               (long long)sz);
            }
        }
    }
    /* right-hand side */
    if (arrow) {
        int8_t ol[PP_MAX_DIMS];
        int onl, oell;
        PP_TRY(einsum_term(arrow + 2, strlen(arrow + 2), ol, &onl, &oell, err));
        if (strstr(arrow + 2, "->"))
            return PP_FAIL(err, PP_EINVAL, "attribute 'equation' has two '->'");
        if (oell < 0 && n_ell > 0)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'equation': the output omits '...' while "
                           "the inputs have dims under '...'");
        int r = 0;
        for (int j = 0; j <= onl; j++) {
            if (j == oell)
                for (int q = 0; q < n_ell; q++) {
                    if (r >= PP_MAX_DIMS) goto too_many;
                    e->out_lab[r++] = (int8_t)(52 + q);
                }
            if (j < onl) {
                int l = ol[j];
                if (!e->used[l])
                    return PP_FAIL(err, PP_EINVAL, "attribute 'equation': output label '%c' is "
                                   "in no input", l < 26 ? 'a' + l : 'A' + l - 26);
                if (e->in_out[l])
                    return PP_FAIL(err, PP_EINVAL, "attribute 'equation': output label '%c' "
                                   "repeats", l < 26 ? 'a' + l : 'A' + l - 26);
                if (r >= PP_MAX_DIMS) goto too_many;
                e->out_lab[r++] = (int8_t)l;
                e->in_out[l] = true;
            }
        }
        for (int q = 0; q < n_ell; q++) e->in_out[52 + q] = true;
        e->out_rank = r;
    } else {
        /* implicit output: '...' dims, then the letters seen once, in ASCII order */
        int cnt[52] = {0};
        for (int i = 0; i < n_in; i++)
            for (int j = 0; j < nl[i]; j++) cnt[labs[i][j]]++;
        int r = 0;
        for (int q = 0; q < n_ell; q++) {
            if (r >= PP_MAX_DIMS) goto too_many;
            e->out_lab[r++] = (int8_t)(52 + q);
            e->in_out[52 + q] = true;
        }
        static const int order[52] = {
            26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
            44, 45, 46, 47, 48, 49, 50, 51, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
            10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};
        for (int j = 0; j < 52; j++) {
            int l = order[j];
            if (cnt[l] != 1) continue;
            if (r >= PP_MAX_DIMS) goto too_many;
            e->out_lab[r++] = (int8_t)l;
            e->in_out[l] = true;
        }
        e->out_rank = r;
    }
    return PP_OK;
too_many:
    return PP_FAIL(err, PP_EUNSUP, "the Einsum output would have more than %d dims", PP_MAX_DIMS);
}

pp_status shape_EINSUM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_out;
    for (int i = 0; i < n_in; i++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", i);
        if (i == 0) PP_TRY(need_dtype(&in[0], what, T_FDIH, NT(T_FDIH), err));
        else PP_TRY(need_same_dtype(&in[i], &in[0], what, err));
    }
    pp_einsum e;
    PP_TRY(pp_einsum_parse(a, in, n_in, &e, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = e.out_rank;
    for (int i = 0; i < e.out_rank; i++) out[0].shape.dim[i] = e.size[e.out_lab[i]];
    return PP_OK;
}

double flops_EINSUM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    pp_einsum e;
    if (pp_einsum_parse(a, in, n_in, &e, NULL) != PP_OK) return 0;
    /* one multiply-add per operand per point of the full index space */
    double pts = 1;
    for (int l = 0; l < PP_EINSUM_LABELS; l++)
        if (e.used[l]) pts *= (double)e.size[l];
    return pts * (n_in > 1 ? 2.0 * (n_in - 1) : 1.0);
}

/* ---- Softmax, LogSoftmax -------------------------------------------------------------------- */

bool pp_attn_frame_shape(const pp_shape *x, const pp_shape *fs) {
    if (x->rank < 3 || x->rank > 4 || fs->rank != x->rank + 1 || fs->dim[1] < 1 || fs->dim[0] * fs->dim[1] != x->dim[0])
        return false;
    for (int d = 1; d < x->rank; d++)
        if (fs->dim[d + 1] != x->dim[d]) return false;
    return true;
}

bool pp_attn_head_shape(const pp_shape *c, const pp_shape *x) {
    if (c->rank < 3 || c->rank > x->rank || x->dim[x->rank - 3] < 2 || c->dim[c->rank - 3] != x->dim[x->rank - 3])
        return false;
    for (int d = 0; d < c->rank; d++)
        if (d != c->rank - 3 && c->dim[d] != 1) return false;
    return true;
}

pp_status pp_softmax_split(pp_attrs a, const pp_shape *x, int64_t *outer, int64_t *n,
                           int64_t *inner, pp_err *err) {
    int r = x->rank;
    int64_t axis64;
    PP_TRY(pp_attr_int(a, "axis", a.opset >= 13 ? -1 : 1, &axis64, err));
    if (r == 0) { /* a scalar: a single element */
        if (axis64 != 0 && axis64 != -1)
            return PP_FAIL(err, PP_EINVAL, "attribute 'axis'=%lld is out of range for a scalar",
                           (long long)axis64);
        *outer = *n = *inner = 1;
        return PP_OK;
    }
    int axis;
    PP_TRY(pp_norm_axis(axis64, r, "attribute 'axis'", &axis, err));
    if (a.opset < 13) { /* coerced to 2-D: [dims before axis, dims from axis on] */
        *outer = 1;
        for (int i = 0; i < axis; i++) *outer *= x->dim[i];
        *n = 1;
        for (int i = axis; i < r; i++) *n *= x->dim[i];
        *inner = 1;
        return PP_OK;
    }
    *outer = 1;
    for (int i = 0; i < axis; i++) *outer *= x->dim[i];
    *n = x->dim[axis];
    *inner = 1;
    for (int i = axis + 1; i < r; i++) *inner *= x->dim[i];
    return PP_OK;
}

pp_status shape_SOFTMAX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input", T_FDH, NT(T_FDH), err));
    int64_t o, n, i;
    PP_TRY(pp_softmax_split(a, &in[0].shape, &o, &n, &i, err));
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}

pp_status shape_LOGSOFTMAX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                           pp_err *err) {
    return shape_SOFTMAX(a, in, n_in, out, n_out, err);
}

double flops_SOFTMAX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 5.0 * pp_numel_d(&out[0]);
}

double flops_LOGSOFTMAX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                        int n_out) {
    return flops_SOFTMAX(a, in, n_in, out, n_out);
}

/* Hardmax: Softmax's axis (coerced to 2-D before opset 13). */
pp_status shape_HARDMAX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    return shape_SOFTMAX(a, in, n_in, out, n_out, err);
}

double flops_HARDMAX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return pp_numel_d(&out[0]);
}

pp_status pp_lpnorm_parse(pp_attrs a, const pp_shape *x, int *axis, int *p, pp_err *err) {
    int64_t ax, pv;
    PP_TRY(pp_attr_int(a, "axis", -1, &ax, err));
    PP_TRY(pp_attr_int(a, "p", 2, &pv, err));
    if (pv != 1 && pv != 2) return PP_FAIL(err, PP_EINVAL, "attribute 'p'=%lld is not 1 or 2", (long long)pv);
    if (x->rank == 0) return PP_FAIL(err, PP_EINVAL, "input is a scalar; LpNormalization needs rank >= 1");
    PP_TRY(pp_norm_axis(ax, x->rank, "attribute 'axis'", axis, err));
    *p = (int)pv;
    return PP_OK;
}

pp_status shape_LPNORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_dtype(&in[0], "input", T_FD, NT(T_FD), err));
    int axis, p;
    PP_TRY(pp_lpnorm_parse(a, &in[0].shape, &axis, &p, err));
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}

double flops_LPNORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 3.0 * pp_numel_d(&out[0]);
}

/* ---- reductions ------------------------------------------------------------------------------ */

static const char *reduce_name(pp_op op) { return pp_op_table[op].name; }

pp_status pp_reduce_parse(pp_op op, pp_attrs a, const pp_tinfo *x, const pp_tinfo *axes_in,
                          pp_reduce *r, pp_err *err) {
    memset(r, 0, sizeof *r);
    const int rank = x->shape.rank;
    PP_TRY(bool_attr(a, "keepdims", 1, &r->keepdims, err));
    bool noop = false; /* set by bool_attr; initialized for GCC -O3, which cannot see that */
    PP_TRY(bool_attr(a, "noop_with_empty_axes", 0, &noop, err));
    /* ReduceSum takes axes as an input from opset 13, the others from 18 */
    const bool axes_as_input = a.opset >= (op == PP_OP_REDUCESUM ? 13 : 18);
    int64_t axes[PP_MAX_DIMS];
    int n = 0;
    bool have_input = axes_in && axes_in->dtype != PP_UNDEFINED;
    if (axes_as_input) {
        if (pp_attr_find(a, "axes"))
            return PP_FAIL(err, PP_EINVAL, "%s opset %d takes axes as an input, not an "
                           "attribute", reduce_name(op), a.opset);
        if (have_input) {
            if (axes_in->dtype != PP_I64)
                return PP_FAIL(err, PP_EINVAL, "input 'axes' must be int64, got %s",
                               pp_dtype_name(axes_in->dtype));
            PP_TRY(const_ints0(axes_in, "input 'axes'", axes, PP_MAX_DIMS, &n, err));
        }
    } else {
        if (have_input)
            return PP_FAIL(err, PP_EINVAL, "%s opset %d takes axes as an attribute, not an "
                           "input", reduce_name(op), a.opset);
        PP_TRY(pp_attr_ints(a, "axes", axes, PP_MAX_DIMS, &n, err));
        noop = false; /* the attribute exists from opset 13 (Sum) / 18 (others) only */
    }
    if (n == 0) {
        if (!noop)
            for (int d = 0; d < rank; d++) r->mask[d] = true;
        return PP_OK;
    }
    for (int i = 0; i < n; i++) {
        char what[48];
        snprintf(what, sizeof what, "axes[%d]", i);
        int ax;
        PP_TRY(pp_norm_axis(axes[i], rank, what, &ax, err));
        if (r->mask[ax])
            return PP_FAIL(err, PP_EINVAL, "axes[%d]=%lld repeats an axis", i, (long long)axes[i]);
        r->mask[ax] = true;
    }
    return PP_OK;
}

static pp_status shape_reduce(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                              pp_err *err) {
    switch (op) {
    case PP_OP_REDUCEMAX:
    case PP_OP_REDUCEMIN:
        PP_TRY(need_dtype(&in[0], "input data", T_MINMAX, NT(T_MINMAX), err));
        break;
    case PP_OP_REDUCEMEAN:
        PP_TRY(need_dtype(&in[0], "input data", T_FDIH, NT(T_FDIH), err));
        break;
    case PP_OP_REDUCEL2: /* (half: ppcc --precision, F.normalize's norm) */
        PP_TRY(need_dtype(&in[0], "input data", T_FDH, NT(T_FDH), err));
        break;
    case PP_OP_REDUCELOGSUM:
    case PP_OP_REDUCELOGSUMEXP:
        PP_TRY(need_dtype(&in[0], "input data", T_FD, NT(T_FD), err));
        break;
    default:
        PP_TRY(need_dtype(&in[0], "input data", T_FDI, NT(T_FDI), err));
    }
    pp_reduce r;
    PP_TRY(pp_reduce_parse(op, a, &in[0], n_in > 1 ? &in[1] : NULL, &r, err));
    const pp_shape *x = &in[0].shape;
    pp_shape o = {.rank = 0};
    for (int d = 0; d < x->rank; d++) {
        if (!r.mask[d]) o.dim[o.rank++] = x->dim[d];
        else if (r.keepdims) o.dim[o.rank++] = 1;
    }
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    return PP_OK;
}

#define PP_REDUCE_FNS(E)                                                                          \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,      \
                        pp_err *err) {                                                           \
        (void)n_out;                                                                             \
        return shape_reduce(PP_OP_##E, a, in, n_in, out, err);                                   \
    }                                                                                            \
    double flops_##E(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) { \
        (void)a, (void)n_in, (void)out, (void)n_out;                                             \
        return pp_numel_d(&in[0]);                                                               \
    }
PP_REDUCE_FNS(REDUCEMEAN)
PP_REDUCE_FNS(REDUCESUM)
PP_REDUCE_FNS(REDUCEMAX)
PP_REDUCE_FNS(REDUCEMIN)
PP_REDUCE_FNS(REDUCEPROD)
PP_REDUCE_FNS(REDUCEL1)
PP_REDUCE_FNS(REDUCEL2)
PP_REDUCE_FNS(REDUCESUMSQUARE)
PP_REDUCE_FNS(REDUCELOGSUM)
PP_REDUCE_FNS(REDUCELOGSUMEXP)

/* ---- ArgMax, ArgMin ------------------------------------------------------------------------ */

static pp_status shape_arg(pp_attrs a, const pp_tinfo *in, pp_tinfo *out, pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input data", T_ORDERH, NT(T_ORDERH), err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input data", err));
    int64_t axis64;
    int axis;
    bool keep = true, last = false; /* set by bool_attr (initialized for GCC -O3) */
    PP_TRY(pp_attr_int(a, "axis", 0, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, in[0].shape.rank, "attribute 'axis'", &axis, err));
    PP_TRY(bool_attr(a, "keepdims", 1, &keep, err));
    PP_TRY(bool_attr(a, "select_last_index", 0, &last, err));
    if (in[0].shape.dim[axis] == 0)
        return PP_FAIL(err, PP_EINVAL, "the reduced axis %d is empty", axis);
    pp_shape o = {.rank = 0};
    for (int d = 0; d < in[0].shape.rank; d++) {
        if (d != axis) o.dim[o.rank++] = in[0].shape.dim[d];
        else if (keep) o.dim[o.rank++] = 1;
    }
    out[0] = (pp_tinfo){PP_I64, o, NULL};
    return PP_OK;
}

pp_status shape_ARGMAX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_in, (void)n_out;
    return shape_arg(a, in, out, err);
}

pp_status shape_ARGMIN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_in, (void)n_out;
    return shape_arg(a, in, out, err);
}

double flops_ARGMAX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    return pp_numel_d(&in[0]);
}

double flops_ARGMIN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_ARGMAX(a, in, n_in, out, n_out);
}

/* ---- TopK ----------------------------------------------------------------------------------- */

pp_status pp_topk_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_topk *t, pp_err *err) {
    memset(t, 0, sizeof *t);
    int64_t axis64;
    PP_TRY(pp_attr_int(a, "axis", -1, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, in[0].shape.rank, "attribute 'axis'", &t->axis, err));
    if (a.opset < 10) { /* k is an attribute */
        if (n_in > 1) return PP_FAIL(err, PP_EINVAL, "TopK opset %d takes k as an attribute", a.opset);
        if (!pp_attr_find(a, "k")) return PP_FAIL(err, PP_EINVAL, "attribute 'k' is required");
        PP_TRY(pp_attr_int(a, "k", 0, &t->k, err));
    } else {
        if (!present(in, n_in, 1)) return PP_FAIL(err, PP_EINVAL, "input 'K' is required");
        if (in[1].dtype != PP_I64)
            return PP_FAIL(err, PP_EINVAL, "input 'K' must be int64, got %s",
                           pp_dtype_name(in[1].dtype));
        if (numel_i(&in[1].shape) != 1 || in[1].shape.rank > 1)
            return PP_FAIL(err, PP_EINVAL, "input 'K' must hold exactly one value");
        int64_t k[1];
        int n;
        PP_TRY(pp_const_ints(&in[1], "input 'K'", k, 1, &n, err));
        t->k = k[0];
    }
    bool largest = true, sorted = true;
    if (a.opset >= 11) {
        PP_TRY(bool_attr(a, "largest", 1, &largest, err));
        PP_TRY(bool_attr(a, "sorted", 1, &sorted, err));
    }
    t->largest = largest;
    t->sorted = sorted;
    int64_t len = in[0].shape.dim[t->axis];
    if (t->k < 0 || t->k > len)
        return PP_FAIL(err, PP_EINVAL, "k=%lld is out of range [0, %lld] (the axis length)",
                       (long long)t->k, (long long)len);
    return PP_OK;
}

pp_status shape_TOPK(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input X", T_ORDER, NT(T_ORDER), err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input X", err));
    pp_topk t;
    PP_TRY(pp_topk_parse(a, in, n_in, &t, err));
    pp_shape o = in[0].shape;
    o.dim[t.axis] = t.k;
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    if (n_out > 1) out[1] = (pp_tinfo){PP_I64, o, NULL};
    return PP_OK;
}

double flops_TOPK(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    /* a sort of each slice */
    double n = pp_numel_d(&in[0]);
    return n * 8.0;
}

/* ---- Resize ------------------------------------------------------------------------------------ */

pp_status pp_resize_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_resize *r, pp_err *err) {
    memset(r, 0, sizeof *r);
    const int opset = a.opset;
    const pp_shape *x = &in[0].shape;
    const int rank = x->rank;
    r->rank = rank;
    /* inputs by opset: 10: X, scales; 11+: X, roi, scales, sizes */
    const int i_roi = opset >= 11 ? 1 : -1, i_scales = opset >= 11 ? 2 : 1,
              i_sizes = opset >= 11 ? 3 : -1;
    if (opset < 11 && n_in > 2)
        return PP_FAIL(err, PP_EINVAL, "Resize opset %d takes 2 inputs, got %d", opset, n_in);
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    int mode = 0;
    PP_TRY(string_choice(a, "mode", "nearest", modes, opset >= 11 ? 3 : 2, &mode, err));
    r->mode = (pp_resize_mode)mode;
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric",
                                         "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_crop_and_resize", "tf_half_pixel_for_nn"};
    int coord = PP_RC_ASYMMETRIC;
    if (opset >= 11) {
        PP_TRY(string_choice(a, "coordinate_transformation_mode", "half_pixel", coords, 7, &coord,
                             err));
        if (coord == PP_RC_HALF_PIXEL_SYMMETRIC && opset < 19)
            return PP_FAIL(err, PP_EINVAL, "'half_pixel_symmetric' needs opset 19");
        if (coord == PP_RC_TF_HALF_PIXEL_FOR_NN && opset >= 13)
            return PP_FAIL(err, PP_EINVAL, "'tf_half_pixel_for_nn' exists in opsets 11 and 12 "
                           "only");
    }
    r->coord = (pp_resize_coord)coord;
    int nm = PP_RN_FLOOR; /* opset 10 rounds down, as Upsample */
    if (opset >= 11) {
        static const char *const nmodes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                             "ceil"};
        PP_TRY(string_choice(a, "nearest_mode", "round_prefer_floor", nmodes, 4, &nm, err));
    }
    r->nearest = (pp_resize_nearest)nm;
    PP_TRY(pp_attr_float(a, "cubic_coeff_a", -0.75f, &r->cubic_a, err));
    PP_TRY(pp_attr_float(a, "extrapolation_value", 0.0f, &r->extrapolation, err));
    PP_TRY(bool_attr(a, "exclude_outside", 0, &r->exclude_outside, err));
    PP_TRY(bool_attr(a, "antialias", 0, &r->antialias, err));
    if (r->mode == PP_RS_NEAREST) r->antialias = false; /* linear and cubic only */
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    int policy = 0;
    PP_TRY(string_choice(a, "keep_aspect_ratio_policy", "stretch", policies, 3, &policy, err));
    /* axes */
    int64_t ax_raw[PP_MAX_DIMS];
    int n_axes;
    PP_TRY(pp_attr_ints(a, "axes", ax_raw, PP_MAX_DIMS, &n_axes, err));
    int axes[PP_MAX_DIMS];
    bool seen[PP_MAX_DIMS] = {false};
    if (n_axes == 0) {
        n_axes = rank;
        for (int i = 0; i < rank; i++) axes[i] = i;
    } else {
        for (int i = 0; i < n_axes; i++) {
            char what[48];
            snprintf(what, sizeof what, "attribute 'axes'[%d]", i);
            PP_TRY(pp_norm_axis(ax_raw[i], rank, what, &axes[i], err));
            if (seen[axes[i]])
                return PP_FAIL(err, PP_EINVAL, "attribute 'axes' repeats axis %d", axes[i]);
            seen[axes[i]] = true;
        }
    }
    for (int d = 0; d < rank; d++) {
        r->out[d] = x->dim[d];
        r->scale[d] = 1.0;
        r->roi0[d] = 0.0;
        r->roi1[d] = 1.0;
    }
    /* present and non-empty */
    bool has_scales = present(in, n_in, i_scales) && numel_i(&in[i_scales].shape) > 0;
    bool has_sizes = i_sizes >= 0 && present(in, n_in, i_sizes) && numel_i(&in[i_sizes].shape) > 0;
    if (has_scales == has_sizes)
        return PP_FAIL(err, PP_EINVAL, has_scales ? "give 'scales' or 'sizes', not both"
                                                  : "one of 'scales' and 'sizes' is required");
    if (r->coord == PP_RC_TF_CROP_AND_RESIZE) {
        if (!present(in, n_in, i_roi) || numel_i(&in[i_roi].shape) == 0)
            return PP_FAIL(err, PP_EINVAL, "'tf_crop_and_resize' needs the 'roi' input");
        double roi[2 * PP_MAX_DIMS];
        int nr;
        PP_TRY(const_floats(&in[i_roi], "input 'roi'", roi, 2 * PP_MAX_DIMS, &nr, err));
        if (nr != 2 * n_axes)
            return PP_FAIL(err, PP_EINVAL, "input 'roi' has %d values, expected %d", nr,
                           2 * n_axes);
        for (int i = 0; i < n_axes; i++) {
            r->roi0[axes[i]] = roi[i];
            r->roi1[axes[i]] = roi[n_axes + i];
        }
        if (has_scales)
            return PP_FAIL(err, PP_EUNSUP, "'tf_crop_and_resize' with 'scales' is not supported "
                           "(give 'sizes')");
    }
    if (has_scales) {
        if (policy != 0)
            return PP_FAIL(err, PP_EINVAL, "attribute 'keep_aspect_ratio_policy' applies to "
                           "'sizes' only");
        double sc[PP_MAX_DIMS];
        int ns;
        if (in[i_scales].dtype != PP_F32)
            return PP_FAIL(err, PP_EINVAL, "input 'scales' must be float, got %s",
                           pp_dtype_name(in[i_scales].dtype));
        PP_TRY(const_floats(&in[i_scales], "input 'scales'", sc, PP_MAX_DIMS, &ns, err));
        if (ns != n_axes)
            return PP_FAIL(err, PP_EINVAL, "input 'scales' has %d values, expected %d", ns,
                           n_axes);
        for (int i = 0; i < n_axes; i++) {
            int d = axes[i];
            if (!(sc[i] > 0) || isinf(sc[i]))
                return PP_FAIL(err, PP_EINVAL, "input 'scales'[%d]=%g must be positive", i, sc[i]);
            double o = floor(sc[i] * (double)x->dim[d]);
            if (o > (double)((int64_t)1 << 40))
                return PP_FAIL(err, PP_EINVAL, "input 'scales'[%d]=%g gives an absurd size", i,
                               sc[i]);
            r->scale[d] = sc[i];
            r->out[d] = (int64_t)o;
        }
    } else {
        int64_t sz[PP_MAX_DIMS];
        int ns;
        if (in[i_sizes].dtype != PP_I64)
            return PP_FAIL(err, PP_EINVAL, "input 'sizes' must be int64, got %s",
                           pp_dtype_name(in[i_sizes].dtype));
        PP_TRY(pp_const_ints(&in[i_sizes], "input 'sizes'", sz, PP_MAX_DIMS, &ns, err));
        if (ns != n_axes)
            return PP_FAIL(err, PP_EINVAL, "input 'sizes' has %d values, expected %d", ns, n_axes);
        for (int i = 0; i < n_axes; i++) {
            int d = axes[i];
            if (sz[i] < 0 || sz[i] > ((int64_t)1 << 40))
                return PP_FAIL(err, PP_EINVAL, "input 'sizes'[%d]=%lld is invalid", i,
                               (long long)sz[i]);
            if (x->dim[d] == 0 && sz[i] != 0)
                return PP_FAIL(err, PP_EINVAL, "cannot resize the empty axis %d", d);
            r->out[d] = sz[i];
            r->scale[d] = x->dim[d] ? (double)sz[i] / (double)x->dim[d] : 1.0;
        }
        if (policy != 0) {
            double s = policy == 1 ? INFINITY : 0.0;
            for (int i = 0; i < n_axes; i++) {
                double v = r->scale[axes[i]];
                s = policy == 1 ? (v < s ? v : s) : (v > s ? v : s);
            }
            for (int i = 0; i < n_axes; i++) {
                int d = axes[i];
                r->scale[d] = s;
                r->out[d] = (int64_t)(s * (double)x->dim[d] + 0.5);
            }
        }
    }
    return PP_OK;
}

pp_status shape_RESIZE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_out;
    PP_TRY(need_dtype(&in[0], "input X", T_FH, NT(T_FH), err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input X", err));
    pp_resize r;
    PP_TRY(pp_resize_parse(a, in, n_in, &r, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = r.rank;
    for (int d = 0; d < r.rank; d++) out[0].shape.dim[d] = r.out[d];
    return PP_OK;
}

double flops_RESIZE(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)in, (void)n_in, (void)n_out;
    const char *mode = "nearest";
    pp_attr_string(a, "mode", "nearest", &mode, NULL);
    double per = !strcmp(mode, "cubic") ? 8.0 : !strcmp(mode, "linear") ? 4.0 : 0.0;
    return per * pp_numel_d(&out[0]);
}

/* ---- GridSample ---------------------------------------------------------------------------- */

pp_status pp_gridsample_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_gridsample *g, pp_err *err) {
    (void)n_in;
    PP_TRY(need_dtype(&in[0], "input X", T_F, NT(T_F), err));
    PP_TRY(need_dtype(&in[1], "input grid", T_F, NT(T_F), err));
    const bool old = a.opset < 20;
    PP_TRY(pp_need_rank(&in[0], old ? 4 : 3, old ? 4 : PP_MAX_DIMS, "input X", err));
    const pp_shape *x = &in[0].shape, *gr = &in[1].shape;
    char s1[96], s2[96];
    if (gr->rank != x->rank || gr->dim[0] != x->dim[0] || gr->dim[gr->rank - 1] != x->rank - 2)
        return PP_FAIL(err, PP_EINVAL,
                       "input grid has shape %s; with X of shape %s it must be [%lld, ..., %d] of rank %d "
                       "(a point of %d coordinates per sample and output position)",
                       pp_shape_str(gr, s1, sizeof s1), pp_shape_str(x, s2, sizeof s2), (long long)x->dim[0],
                       x->rank - 2, x->rank, x->rank - 2);
    int64_t align;
    PP_TRY(pp_attr_int(a, "align_corners", 0, &align, err));
    if (align != 0 && align != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'align_corners'=%lld is not 0 or 1", (long long)align);
    const char *mode, *pad;
    PP_TRY(pp_attr_string(a, "mode", old ? "bilinear" : "linear", &mode, err));
    PP_TRY(pp_attr_string(a, "padding_mode", "zeros", &pad, err));
    if (!strcmp(mode, old ? "bilinear" : "linear")) g->mode = PP_GS_LINEAR;
    else if (!strcmp(mode, "nearest")) g->mode = PP_GS_NEAREST;
    else if (!strcmp(mode, old ? "bicubic" : "cubic")) g->mode = PP_GS_CUBIC;
    else
        return PP_FAIL(err, PP_EINVAL, "attribute 'mode'='%s' is not one of %s (opset %d)", mode,
                       old ? "bilinear, nearest, bicubic" : "linear, nearest, cubic", a.opset);
    if (!strcmp(pad, "zeros")) g->pad = PP_GS_ZEROS;
    else if (!strcmp(pad, "border")) g->pad = PP_GS_BORDER;
    else if (!strcmp(pad, "reflection")) g->pad = PP_GS_REFLECTION;
    else
        return PP_FAIL(err, PP_EINVAL, "attribute 'padding_mode'='%s' is not one of zeros, border, reflection",
                       pad);
    g->align_corners = align == 1;
    g->k = x->rank - 2;
    return PP_OK;
}

pp_status shape_GRIDSAMPLE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_gridsample g;
    PP_TRY(pp_gridsample_parse(a, in, n_in, &g, err));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[1].shape;
    out[0].shape.dim[1] = in[0].shape.dim[1];
    for (int d = 2; d < in[0].shape.rank; d++) out[0].shape.dim[d] = in[1].shape.dim[d - 1];
    return PP_OK;
}

double flops_GRIDSAMPLE(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)in, (void)n_in, (void)n_out;
    const char *mode = "linear";
    pp_attr_string(a, "mode", "linear", &mode, NULL);
    const int k = out[0].shape.rank - 2;
    const double taps = !strcmp(mode, "nearest") ? 1.0 : pow(strstr(mode, "cubic") ? 4.0 : 2.0, k);
    return 2.0 * taps * pp_numel_d(&out[0]);
}

/* ---- AffineGrid ---------------------------------------------------------------------------- */

pp_status pp_affinegrid_parse(pp_attrs a, const pp_tinfo *in, pp_affinegrid *g, pp_err *err) {
    PP_TRY(need_dtype(&in[0], "input theta", T_FD, NT(T_FD), err));
    if (in[1].dtype != PP_I64)
        return PP_FAIL(err, PP_EINVAL, "input size has element type %s, not int64", pp_dtype_name(in[1].dtype));
    if (!in[1].data)
        return PP_FAIL(err, PP_EUNSUP, "input size decides the output's shape and is not known at compile time");
    int64_t sz[5];
    int cnt;
    PP_TRY(pp_const_ints(&in[1], "input size", sz, 5, &cnt, err));
    if (in[1].shape.rank != 1 || (cnt != 4 && cnt != 5))
        return PP_FAIL(err, PP_EINVAL, "input size holds %d values; it must be [N, C, H, W] or [N, C, D, H, W]", cnt);
    int64_t align;
    PP_TRY(pp_attr_int(a, "align_corners", 0, &align, err));
    if (align != 0 && align != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'align_corners'=%lld is not 0 or 1", (long long)align);
    g->k = cnt - 2;
    g->align_corners = align == 1;
    g->n = sz[0];
    for (int d = 0; d < cnt; d++)
        if (sz[d] < 0) return PP_FAIL(err, PP_EINVAL, "input size holds %lld at %d", (long long)sz[d], d);
    for (int d = 0; d < g->k; d++) g->out[d] = sz[2 + d];
    const pp_shape *t = &in[0].shape;
    if (t->rank != 3 || t->dim[0] != sz[0] || t->dim[1] != g->k || t->dim[2] != g->k + 1) {
        char s1[96];
        return PP_FAIL(err, PP_EINVAL, "input theta has shape %s; with size's %d values it must be [%lld, %d, %d]",
                       pp_shape_str(t, s1, sizeof s1), cnt, (long long)sz[0], g->k, g->k + 1);
    }
    return PP_OK;
}

pp_status shape_AFFINEGRID(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    pp_affinegrid g;
    PP_TRY(pp_affinegrid_parse(a, in, &g, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = g.k + 2;
    out[0].shape.dim[0] = g.n;
    for (int d = 0; d < g.k; d++) out[0].shape.dim[1 + d] = g.out[d];
    out[0].shape.dim[g.k + 1] = g.k;
    return PP_OK;
}

double flops_AFFINEGRID(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 8.0 * pp_numel_d(&out[0]);
}
