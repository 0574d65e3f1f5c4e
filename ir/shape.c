/* shape.c: the entry point of shape and dtype inference (pp_infer), the
 * helpers the family files share, the core ops (Conv, BatchNormalization,
 * MaxPool, GlobalAveragePool, Gemm), plus
 * the window geometry of geom.h. Shared by ppcc (inference) and pprt's plan
 * loader (verification), so it only sees pp_tinfo, never the graph. */
#include "geom.h"
#include "op_fns.h"

#include <string.h>


pp_status pp_need_float(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; only f32 is supported",
                       what, pp_dtype_name(t->dtype));
    return PP_OK;
}

/* f32, or the half types that ppcc --precision bf16|fp16 stores (passes/precision.c; the kernels compute in
 * f32 on them and round what they write) */
pp_status pp_need_float_half(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->dtype != PP_F32 && t->dtype != PP_F16 && t->dtype != PP_BF16)
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; supported: f32, f16, bf16", what,
                       pp_dtype_name(t->dtype));
    return PP_OK;
}

/* t of ref's type, which pp_need_float_half accepted */
pp_status pp_need_same_float(const pp_tinfo *t, const pp_tinfo *ref, const char *what, pp_err *err) {
    if (t->dtype != ref->dtype)
        return PP_FAIL(err, PP_EINVAL, "%s has element type %s, expected %s (the first input's)", what,
                       pp_dtype_name(t->dtype), pp_dtype_name(ref->dtype));
    return PP_OK;
}

pp_status pp_need_rank(const pp_tinfo *t, int lo, int hi, const char *what, pp_err *err) {
    if (t->shape.rank < lo || t->shape.rank > hi)
        return PP_FAIL(err, PP_EINVAL, "%s has rank %d, expected %d..%d", what, t->shape.rank, lo,
                       hi);
    return PP_OK;
}

/* ---- geometry --------------------------------------------------------------- */

pp_status pp_geom_make(pp_attrs attrs, const pp_shape *x, const int64_t *kernel,
                       bool allow_ceil, pp_geom *g, pp_err *err) {
    memset(g, 0, sizeof *g);
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > PP_MAX_SPATIAL)
        return PP_FAIL(err, PP_EUNSUP, "input rank %d: 1 to %d spatial dims supported", x->rank,
                       PP_MAX_SPATIAL);
    g->nsp = nsp;
    int64_t ks[PP_MAX_DIMS], st[PP_MAX_DIMS], dl[PP_MAX_DIMS], pd[2 * PP_MAX_DIMS];
    int nk, ns, nd, np;
    PP_TRY(pp_attr_ints(attrs, "kernel_shape", ks, PP_MAX_DIMS, &nk, err));
    PP_TRY(pp_attr_ints(attrs, "strides", st, PP_MAX_DIMS, &ns, err));
    PP_TRY(pp_attr_ints(attrs, "dilations", dl, PP_MAX_DIMS, &nd, err));
    PP_TRY(pp_attr_ints(attrs, "pads", pd, 2 * PP_MAX_DIMS, &np, err));
    if (!kernel) {
        if (nk != nsp)
            return PP_FAIL(err, PP_EINVAL, "attribute 'kernel_shape' has %d values, expected %d",
                           nk, nsp);
        kernel = ks;
    } else if (nk && nk != nsp) {
        return PP_FAIL(err, PP_EINVAL, "attribute 'kernel_shape' has %d values, expected %d", nk,
                       nsp);
    } else if (nk) {
        for (int i = 0; i < nsp; i++)
            if (ks[i] != kernel[i])
                return PP_FAIL(err, PP_EINVAL,
                               "attribute 'kernel_shape' disagrees with the weight's shape");
    }
    if (ns && ns != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'strides' has %d values, expected %d", ns, nsp);
    if (nd && nd != nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'dilations' has %d values, expected %d", nd, nsp);
    if (np && np != 2 * nsp)
        return PP_FAIL(err, PP_EINVAL, "attribute 'pads' has %d values, expected %d", np, 2 * nsp);
    int64_t ceil_mode = 0;
    PP_TRY(pp_attr_int(attrs, "ceil_mode", 0, &ceil_mode, err));
    if (ceil_mode && !allow_ceil)
        return PP_FAIL(err, PP_EINVAL, "attribute 'ceil_mode' is not valid here");
    const char *auto_pad;
    PP_TRY(pp_attr_string(attrs, "auto_pad", "NOTSET", &auto_pad, err));
    int mode = !strcmp(auto_pad, "NOTSET")       ? 0
               : !strcmp(auto_pad, "VALID")      ? 1
               : !strcmp(auto_pad, "SAME_UPPER") ? 2
               : !strcmp(auto_pad, "SAME_LOWER") ? 3
                                                 : -1;
    if (mode < 0) return PP_FAIL(err, PP_EINVAL, "attribute 'auto_pad' has unknown value '%s'", auto_pad);
    for (int i = 0; i < nsp; i++) {
        g->in[i] = x->dim[2 + i];
        g->k[i] = kernel[i];
        g->stride[i] = ns ? st[i] : 1;
        g->dil[i] = nd ? dl[i] : 1;
        g->pad0[i] = (np && mode == 0) ? pd[i] : 0;
        g->pad1[i] = (np && mode == 0) ? pd[nsp + i] : 0;
        if (g->k[i] < 1 || g->k[i] > (1 << 20))
            return PP_FAIL(err, PP_EINVAL, "kernel dim %d is %lld, expected 1..2^20", i, (long long)g->k[i]);
        if (g->stride[i] < 1 || g->stride[i] > (1 << 20))
            return PP_FAIL(err, PP_EINVAL, "attribute 'strides'[%d] is %lld, expected >= 1", i, (long long)g->stride[i]);
        if (g->dil[i] < 1 || g->dil[i] > (1 << 20))
            return PP_FAIL(err, PP_EINVAL, "attribute 'dilations'[%d] is %lld, expected >= 1", i, (long long)g->dil[i]);
        if (g->pad0[i] < 0 || g->pad1[i] < 0 || g->pad0[i] > (1 << 20) || g->pad1[i] > (1 << 20))
            return PP_FAIL(err, PP_EINVAL, "attribute 'pads' has a negative or absurd value");
        if (g->in[i] < 0 || g->in[i] > ((int64_t)1 << 40))
            return PP_FAIL(err, PP_EINVAL, "spatial input dim %d is %lld", i, (long long)g->in[i]);
        int64_t ext = g->dil[i] * (g->k[i] - 1) + 1; /* effective window */
        if (mode >= 2) {
            int64_t o = (g->in[i] + g->stride[i] - 1) / g->stride[i];
            int64_t total = (o - 1) * g->stride[i] + ext - g->in[i];
            if (total < 0) total = 0;
            g->pad0[i] = mode == 2 ? total / 2 : total - total / 2;
            g->pad1[i] = total - g->pad0[i];
            g->out[i] = o;
            continue;
        }
        int64_t span = g->in[i] + g->pad0[i] + g->pad1[i] - ext;
        if (span < 0)
            return PP_FAIL(err, PP_EINVAL,
                           "window (%lld) is larger than the padded input (%lld) in spatial dim %d",
                           (long long)ext, (long long)(g->in[i] + g->pad0[i] + g->pad1[i]), i);
        if (ceil_mode) {
            g->out[i] = (span + g->stride[i] - 1) / g->stride[i] + 1;
            /* the last window must start inside the input or left padding */
            if ((g->out[i] - 1) * g->stride[i] >= g->in[i] + g->pad0[i]) g->out[i]--;
        } else {
            g->out[i] = span / g->stride[i] + 1;
        }
    }
    return PP_OK;
}

/* ---- per-op shape functions --------------------------------------------------- */



pp_status shape_CONV(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                            pp_err *err) {
    (void)n_out;
    const pp_shape *x = &in[0].shape, *w = &in[1].shape;
    PP_TRY(pp_need_float_half(&in[0], "input X", err));
    PP_TRY(pp_need_same_float(&in[1], &in[0], "weight W", err));
    PP_TRY(pp_need_rank(&in[0], 3, 2 + PP_MAX_SPATIAL, "input X", err));
    if (w->rank != x->rank)
        return PP_FAIL(err, PP_EINVAL, "weight W has rank %d, expected %d (same as X)", w->rank, x->rank);
    int64_t group;
    PP_TRY(pp_attr_int(a, "group", 1, &group, err));
    if (group < 1 || x->dim[1] % group || w->dim[0] % group)
        return PP_FAIL(err, PP_EINVAL, "attribute 'group'=%lld does not divide channels %lld and filters %lld",
                       (long long)group, (long long)x->dim[1], (long long)w->dim[0]);
    if (w->dim[1] * group != x->dim[1])
        return PP_FAIL(err, PP_EINVAL, "weight W has %lld input channels per group, expected %lld",
                       (long long)w->dim[1], (long long)(x->dim[1] / group));
    if (n_in > 2 && in[2].dtype != PP_UNDEFINED) {
        PP_TRY(pp_need_same_float(&in[2], &in[0], "bias B", err));
        if (in[2].shape.rank != 1 || in[2].shape.dim[0] != w->dim[0])
            return PP_FAIL(err, PP_EINVAL, "bias B must have shape [%lld]", (long long)w->dim[0]);
    }
    pp_geom g;
    PP_TRY(pp_geom_make(a, x, &w->dim[2], false, &g, err));
    out[0].dtype = in[0].dtype; /* f32, or a half plan's f16 / bf16 (computed in f32, rounded) */
    out[0].shape.rank = x->rank;
    out[0].shape.dim[0] = x->dim[0];
    out[0].shape.dim[1] = w->dim[0];
    for (int i = 0; i < g.nsp; i++) out[0].shape.dim[2 + i] = g.out[i];
    return PP_OK;
}

bool pp_bn_training(pp_attrs a, int n_out) {
    int64_t training = 0;
    pp_err e = {0};
    if (a.opset >= 14) return pp_attr_int(a, "training_mode", 0, &training, &e) == PP_OK && training != 0;
    return n_out > 1;
}

/* Training mode (pp_bn_training) normalizes with the input's own mean and
 * (population) variance per channel, as PyTorch and onnxruntime do; the
 * other outputs, where the node has them, are as onnxruntime gives them:
 * the running mean and variance (input_mean * momentum + batch mean * (1 -
 * momentum), the same for the variance), then before opset 14 the saved
 * mean (the batch's) and the saved inverse standard deviation, 1 / sqrt(var
 * + epsilon). timm's weight-standardized convolutions (BiT, NFNet) export
 * their weights' standardization so; on constant weights it folds. */
pp_status shape_BATCHNORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                                 int n_out, pp_err *err) {
    (void)n_in;
    PP_TRY(pp_need_float_half(&in[0], "input X", err));
    PP_TRY(pp_need_rank(&in[0], 2, PP_MAX_DIMS, "input X", err));
    int64_t training = 0, spatial = 1;
    PP_TRY(pp_attr_int(a, "training_mode", 0, &training, err));
    PP_TRY(pp_attr_int(a, "spatial", 1, &spatial, err));
    if (training != 0 && training != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'training_mode'=%lld must be 0 or 1", (long long)training);
    const bool train = pp_bn_training(a, n_out);
    if (a.opset >= 14 && !train && n_out > 1)
        return PP_FAIL(err, PP_EINVAL, "%d outputs with training_mode=0: the running mean and variance "
                       "exist only in training", n_out);
    if (a.opset >= 14 && n_out > 3)
        return PP_FAIL(err, PP_EINVAL, "%d outputs; from opset 14 there are at most 3", n_out);
    if (spatial != 1) return PP_FAIL(err, PP_EUNSUP, "attribute 'spatial'=0 is not supported");
    static const char *names[] = {"", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; i++) {
        PP_TRY(pp_need_float(&in[i], names[i], err));
        if (in[i].shape.rank != 1 || in[i].shape.dim[0] != in[0].shape.dim[1])
            return PP_FAIL(err, PP_EINVAL, "%s must have shape [%lld]", names[i],
                           (long long)in[0].shape.dim[1]);
    }
    /* Y in X's type where X is half (ppcc --precision's half storage: scale, B and the statistics stay f32,
     * as opset 15's T1 and T2 allow); else f32, the statistics f32 always */
    const pp_dtype yt = in[0].dtype == PP_F16 || in[0].dtype == PP_BF16 ? in[0].dtype : PP_F32;
    out[0] = (pp_tinfo){yt, in[0].shape, NULL};
    for (int k = 1; k < n_out; k++) out[k] = (pp_tinfo){PP_F32, in[1].shape, NULL};
    return PP_OK;
}

pp_status shape_MAXPOOL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                               pp_err *err) {
    (void)n_in;
    pp_dtype t = in[0].dtype;
    if (t != PP_F32 && t != PP_F64 && t != PP_I8 && t != PP_U8 && t != PP_F16 && t != PP_BF16)
        return PP_FAIL(err, PP_EUNSUP, "input X has element type %s; supported: f32, f64, i8, u8, f16, bf16",
                       pp_dtype_name(t));
    PP_TRY(pp_need_rank(&in[0], 3, 2 + PP_MAX_SPATIAL, "input X", err));
    int64_t so;
    PP_TRY(pp_attr_int(a, "storage_order", 0, &so, err));
    if (so != 0 && so != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'storage_order'=%lld must be 0 or 1", (long long)so);
    pp_geom g;
    PP_TRY(pp_geom_make(a, &in[0].shape, NULL, true, &g, err));
    out[0].dtype = t;
    out[0].shape = in[0].shape;
    for (int i = 0; i < g.nsp; i++) out[0].shape.dim[2 + i] = g.out[i];
    if (n_out > 1) out[1] = (pp_tinfo){PP_I64, out[0].shape, NULL}; /* Indices */
    return PP_OK;
}

/* NumPy-style multidirectional broadcasting. */
pp_status pp_broadcast(const pp_shape *a, const pp_shape *b, pp_shape *o, pp_err *err) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    o->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return PP_FAIL(err, PP_EINVAL, "shapes %s and %s cannot be broadcast",
                           pp_shape_str(a, sa, sizeof sa), pp_shape_str(b, sb, sizeof sb));
        }
        o->dim[i] = da == 1 ? db : da;
    }
    return PP_OK;
}


pp_status shape_GLOBALAVGPOOL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                                     int n_out, pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(pp_need_float_half(&in[0], "input X", err));
    PP_TRY(pp_need_rank(&in[0], 3, PP_MAX_DIMS, "input X", err));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    for (int i = 2; i < in[0].shape.rank; i++) out[0].shape.dim[i] = 1;
    return PP_OK;
}


pp_status shape_GEMM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                            pp_err *err) {
    (void)n_out;
    PP_TRY(pp_need_float_half(&in[0], "input A", err));
    PP_TRY(pp_need_same_float(&in[1], &in[0], "input B", err));
    PP_TRY(pp_need_rank(&in[0], 2, 2, "input A", err));
    PP_TRY(pp_need_rank(&in[1], 2, 2, "input B", err));
    pp_gemm g;
    PP_TRY(pp_gemm_attrs(a, &g, err));
    int64_t m = in[0].shape.dim[g.ta ? 1 : 0], k = in[0].shape.dim[g.ta ? 0 : 1];
    int64_t kb = in[1].shape.dim[g.tb ? 1 : 0], n = in[1].shape.dim[g.tb ? 0 : 1];
    if (k != kb)
        return PP_FAIL(err, PP_EINVAL, "inner dimensions differ: A gives K=%lld, B gives K=%lld",
                       (long long)k, (long long)kb);
    out[0].dtype = in[0].dtype;
    out[0].shape = (pp_shape){.rank = 2, .dim = {m, n}};
    if (n_in > 2 && in[2].dtype != PP_UNDEFINED) {
        PP_TRY(pp_need_same_float(&in[2], &in[0], "input C", err));
        pp_shape o;
        PP_TRY(pp_broadcast(&in[2].shape, &out[0].shape, &o, err));
        if (!pp_shape_eq(&o, &out[0].shape))
            return PP_FAIL(err, PP_EINVAL, "input C does not broadcast to [%lld,%lld]",
                           (long long)m, (long long)n);
    }
    return PP_OK;
}

pp_status pp_gemm_attrs(pp_attrs a, pp_gemm *g, pp_err *err) {
    PP_TRY(pp_attr_int(a, "transA", 0, &g->ta, err));
    PP_TRY(pp_attr_int(a, "transB", 0, &g->tb, err));
    PP_TRY(pp_attr_float(a, "alpha", 1.0f, &g->alpha, err));
    return pp_attr_float(a, "beta", 1.0f, &g->beta, err);
}

pp_status pp_norm_rows(pp_attrs a, const pp_shape *x, int *axis, float *eps, int64_t *outer, int64_t *inner,
                       pp_err *err) {
    int64_t axis64;
    PP_TRY(pp_attr_int(a, "axis", -1, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", axis, err));
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, eps, err));
    *outer = *inner = 1;
    for (int i = 0; i < *axis; i++) *outer *= x->dim[i];
    for (int i = *axis; i < x->rank; i++) *inner *= x->dim[i];
    return PP_OK;
}

pp_status pp_norm_axis(int64_t axis, int rank, const char *what, int *out, pp_err *err) {
    if (axis < -rank || axis >= rank)
        return PP_FAIL(err, PP_EINVAL, "%s=%lld is out of range [%d, %d)", what, (long long)axis,
                       -rank, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PP_OK;
}

pp_status pp_const_ints(const pp_tinfo *t, const char *what, int64_t *out, int max, int *n,
                        pp_err *err) {
    if (!t->data)
        return PP_FAIL(err, PP_EUNSUP,
                       "%s must be a constant known at compile time (a data-dependent shape is "
                       "not supported)", what);
    if (t->dtype != PP_I64 && t->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "%s must be int64 or int32, got %s", what,
                       pp_dtype_name(t->dtype));
    int64_t cnt;
    PP_TRY(pp_shape_numel(&t->shape, &cnt, err));
    if (cnt > max)
        return PP_FAIL(err, PP_EUNSUP, "%s has %lld values, at most %d supported", what,
                       (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++)
        out[i] = t->dtype == PP_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *n = (int)cnt;
    return PP_OK;
}

double pp_numel_d(const pp_tinfo *t) {
    double n = 1;
    for (int i = 0; i < t->shape.rank; i++) n *= (double)t->shape.dim[i];
    return n;
}

/* ---- the table and the entry point -------------------------------------------- */

static pp_shape_fn *const shape_fns[PP_OP_COUNT] = {
#define PP_OP(e, name, mi, ma, no, tr) [PP_OP_##e] = shape_##e,
#include "ops.def"
#undef PP_OP
};
_Static_assert(sizeof shape_fns / sizeof shape_fns[0] == PP_OP_COUNT, "shape table out of step");

pp_status pp_infer(pp_op op, pp_attrs attrs, const pp_tinfo *in, int n_in, pp_tinfo *out,
                   int n_out, pp_err *err) {
    if ((int)op < 0 || op >= PP_OP_COUNT) return PP_FAIL(err, PP_EINVAL, "unknown op %d", (int)op);
    const pp_op_info *info = &pp_op_table[op];
    if (n_in < info->min_inputs || n_in > info->max_inputs)
        return PP_FAIL(err, PP_EINVAL, "%s takes %d to %d inputs, got %d", info->name,
                       info->min_inputs, info->max_inputs, n_in);
    if (n_out < 1 || n_out > info->max_outputs)
        return PP_FAIL(err, PP_EUNSUP, "%s: %d outputs requested, %d supported", info->name, n_out,
                       info->max_outputs);
    for (int i = 0; i < info->min_inputs; i++)
        if (in[i].dtype == PP_UNDEFINED)
            return PP_FAIL(err, PP_EINVAL, "%s: required input %d is missing", info->name, i);
    for (int i = 0; i < n_in; i++) {
        if (in[i].dtype == PP_UNDEFINED) continue;
        for (int d = 0; d < in[i].shape.rank; d++)
            if (in[i].shape.dim[d] < 0)
                return PP_FAIL(err, PP_EINVAL, "input %d has an unknown dimension %d", i, d);
    }
    memset(out, 0, sizeof *out * (size_t)n_out);
    PP_TRY(shape_fns[op](attrs, in, n_in, out, n_out, err));
    for (int i = 0; i < n_out; i++) {
        size_t nb;
        PP_TRY(pp_shape_nbytes(&out[i].shape, out[i].dtype, &nb, err));
    }
    return PP_OK;
}
