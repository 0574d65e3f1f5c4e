/* shape_grad.c: shape and cost functions of the backward ops
 * (ir/ops_grad.def) that ppcc --train emits. */
#include "op_fns.h"
#include "geom.h"
#include "shape_nn.h"
#include "shape_attn.h"
#include "shape_rnn.h"

#include <math.h>

static pp_status need_f32(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; supported: f32", what, pp_dtype_name(t->dtype));
    return PP_OK;
}

static bool same_shape(const pp_shape *a, const pp_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

/* the 'shape' attribute: the shape of what the op computes the gradient of */
static pp_status attr_shape(pp_attrs a, pp_shape *s, pp_err *err) {
    int n;
    PP_TRY(pp_attr_ints(a, "shape", s->dim, PP_MAX_DIMS, &n, err));
    if (n < 3) return PP_FAIL(err, PP_EINVAL, "attribute 'shape' has %d dims, expected 3 or more", n);
    for (int i = 0; i < n; i++)
        if (s->dim[i] < 0) return PP_FAIL(err, PP_EINVAL, "attribute 'shape' has a negative dim");
    s->rank = n;
    return PP_OK;
}

pp_status shape_UNARYGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    const char *op;
    PP_TRY(pp_attr_string(a, "op", NULL, &op, err));
    if (!op) return PP_FAIL(err, PP_EINVAL, "attribute 'op' is missing");
    static const char *const what[3] = {"input X", "output Y", "gradient dY"};
    for (int k = 0; k < 3; k++) {
        PP_TRY(need_f32(&in[k], what[k], err));
        if (!same_shape(&in[k].shape, &in[0].shape))
            return PP_FAIL(err, PP_EINVAL, "%s's shape differs from input X's", what[k]);
    }
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[0].shape};
    return PP_OK;
}

double flops_UNARYGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 4 * pp_numel_d(&out[0]);
}

/* dY and the other operand, float32, of the rank of 'shape' */
static pp_status conv_grad(pp_attrs a, const pp_tinfo *in, pp_tinfo *out, pp_err *err) {
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    PP_TRY(need_f32(&in[1], "input 1", err));
    pp_shape s;
    PP_TRY(attr_shape(a, &s, err));
    if (s.rank != in[0].shape.rank || s.rank != in[1].shape.rank)
        return PP_FAIL(err, PP_EINVAL, "attribute 'shape' has rank %d, dY %d, input 1 %d", s.rank,
                       in[0].shape.rank, in[1].shape.rank);
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    return PP_OK;
}

pp_status shape_CONVGRADX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    return conv_grad(a, in, out, err);
}

pp_status shape_CONVGRADW(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    return conv_grad(a, in, out, err);
}

/* as the forward Conv: 2 x dY's elements x (input channels per group x kernel volume) */
static double conv_flops(const pp_tinfo *dy, const pp_shape *w) {
    double kvol = 1;
    for (int i = 1; i < w->rank; i++) kvol *= (double)w->dim[i];
    return 2.0 * pp_numel_d(dy) * kvol;
}

double flops_CONVGRADX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    return conv_flops(&in[0], &in[1].shape);
}

double flops_CONVGRADW(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)n_out;
    return conv_flops(&in[0], &out[0].shape);
}

pp_status shape_MAXPOOLGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    PP_TRY(need_f32(&in[1], "input X", err));
    if (in[0].shape.rank != in[1].shape.rank)
        return PP_FAIL(err, PP_EINVAL, "dY has rank %d, X %d", in[0].shape.rank, in[1].shape.rank);
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[1].shape};
    return PP_OK;
}

/* a pool's gradient: dY's elements times the window's taps */
static double pool_grad_flops(pp_attrs a, const pp_tinfo *dy) {
    int64_t ks[PP_MAX_DIMS];
    int nk = 0;
    double kvol = 1;
    if (pp_attr_ints(a, "kernel_shape", ks, PP_MAX_DIMS, &nk, NULL) == PP_OK)
        for (int i = 0; i < nk; i++) kvol *= (double)ks[i];
    return pp_numel_d(dy) * kvol;
}

double flops_MAXPOOLGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)n_in, (void)out, (void)n_out;
    return pool_grad_flops(a, &in[0]);
}

/* ---- pp.SliceGrad, pp.GatherGrad (passes/grad_tensor.c) ------------------------------------ */

/* 'shape' of any rank from 1 up, no negative dim */
static pp_status attr_any_shape(pp_attrs a, pp_shape *s, pp_err *err) {
    int n;
    if (!pp_attr_find(a, "shape")) return PP_FAIL(err, PP_EINVAL, "attribute 'shape' is missing");
    PP_TRY(pp_attr_ints(a, "shape", s->dim, PP_MAX_DIMS, &n, err));
    if (n < 1) return PP_FAIL(err, PP_EINVAL, "attribute 'shape' is empty");
    for (int i = 0; i < n; i++)
        if (s->dim[i] < 0) return PP_FAIL(err, PP_EINVAL, "attribute 'shape' has a negative dim");
    s->rank = n;
    return PP_OK;
}

pp_status shape_SLICEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    pp_shape s;
    PP_TRY(attr_any_shape(a, &s, err));
    int64_t st[PP_MAX_DIMS], sp[PP_MAX_DIMS];
    int ns, np;
    PP_TRY(pp_attr_ints(a, "starts", st, PP_MAX_DIMS, &ns, err));
    PP_TRY(pp_attr_ints(a, "steps", sp, PP_MAX_DIMS, &np, err));
    const pp_shape *dy = &in[0].shape;
    if (dy->rank != s.rank || ns != s.rank || np != s.rank)
        return PP_FAIL(err, PP_EINVAL, "dY has rank %d, 'shape' %d, 'starts' %d values, 'steps' %d: expected "
                       "one rank", dy->rank, s.rank, ns, np);
    for (int i = 0; i < s.rank; i++) {
        if (!sp[i]) return PP_FAIL(err, PP_EINVAL, "'steps'[%d] is 0", i);
        if (!dy->dim[i]) continue;
        const int64_t last = st[i] + (dy->dim[i] - 1) * sp[i]; /* |values| < 2^62: dims and steps are bounded */
        if (st[i] < 0 || st[i] >= s.dim[i] || last < 0 || last >= s.dim[i])
            return PP_FAIL(err, PP_EINVAL, "axis %d: %lld elements from %lld by %lld leave [0, %lld)", i,
                           (long long)dy->dim[i], (long long)st[i], (long long)sp[i], (long long)s.dim[i]);
    }
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    return PP_OK;
}

double flops_SLICEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)out, (void)n_out;
    return 0;
}

pp_status shape_GATHERGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    if (in[1].dtype != PP_I64 && in[1].dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "input 'indices' has element type %s; expected int64 or int32",
                       pp_dtype_name(in[1].dtype));
    pp_shape s;
    PP_TRY(attr_any_shape(a, &s, err));
    int64_t axis;
    PP_TRY(pp_attr_int(a, "axis", 0, &axis, err));
    if (axis < 0 || axis >= s.rank)
        return PP_FAIL(err, PP_EINVAL, "attribute 'axis'=%lld is outside [0, %d)", (long long)axis, s.rank);
    const pp_shape *ix = &in[1].shape;
    pp_shape want = {.rank = s.rank - 1 + ix->rank};
    if (want.rank > PP_MAX_DIMS) return PP_FAIL(err, PP_EUNSUP, "dY would have rank %d (at most %d)", want.rank, PP_MAX_DIMS);
    int r = 0;
    for (int i = 0; i < axis; i++) want.dim[r++] = s.dim[i];
    for (int i = 0; i < ix->rank; i++) want.dim[r++] = ix->dim[i];
    for (int i = (int)axis + 1; i < s.rank; i++) want.dim[r++] = s.dim[i];
    if (!same_shape(&want, &in[0].shape)) {
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL, "dY has shape %s, expected %s (shape[:axis] + indices' shape + "
                       "shape[axis+1:])", pp_shape_str(&in[0].shape, s1, sizeof s1), pp_shape_str(&want, s2, sizeof s2));
    }
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    return PP_OK;
}

double flops_GATHERGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    return pp_numel_d(&in[0]);
}

pp_status shape_BATCHNORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)a, (void)n_in;
    static const char *const what[5] = {"gradient dY", "input X", "scale", "mean", "var"};
    for (int k = 0; k < 5; k++) PP_TRY(need_f32(&in[k], what[k], err));
    if (!same_shape(&in[0].shape, &in[1].shape)) return PP_FAIL(err, PP_EINVAL, "dY's shape differs from X's");
    if (in[1].shape.rank < 2) return PP_FAIL(err, PP_EINVAL, "X has rank %d, expected 2 or more", in[1].shape.rank);
    const int64_t C = in[1].shape.dim[1];
    for (int k = 2; k < 5; k++)
        if (in[k].shape.rank != 1 || in[k].shape.dim[0] != C)
            return PP_FAIL(err, PP_EINVAL, "%s must have shape [%lld]", what[k], (long long)C);
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[1].shape};
    for (int k = 1; k < n_out; k++) out[k] = (pp_tinfo){.dtype = PP_F32, .shape = in[2].shape};
    return PP_OK;
}

double flops_BATCHNORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 8 * pp_numel_d(&out[0]);
}

/* ---- the normalizations' gradients ------------------------------------------------------------ */

/* dY and X: float32, the same shape, rank lo or more */
static pp_status dy_x(const pp_tinfo *in, int lo, pp_err *err) {
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    PP_TRY(need_f32(&in[1], "input X", err));
    PP_TRY(pp_need_rank(&in[1], lo, PP_MAX_DIMS, "input X", err));
    if (!same_shape(&in[0].shape, &in[1].shape)) return PP_FAIL(err, PP_EINVAL, "dY's shape differs from X's");
    return PP_OK;
}

/* a float32 vector of X's channels (dim 1) */
static pp_status channel_vec(const pp_tinfo *t, const pp_tinfo *x, const char *what, pp_err *err) {
    PP_TRY(need_f32(t, what, err));
    if (t->shape.rank != 1 || t->shape.dim[0] != x->shape.dim[1])
        return PP_FAIL(err, PP_EINVAL, "%s must have shape [%lld]", what, (long long)x->shape.dim[1]);
    return PP_OK;
}

static void norm_grad_outputs(const pp_tinfo *in, const pp_shape *ps, pp_tinfo *out, int n_out) {
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[1].shape};
    for (int k = 1; k < n_out; k++) out[k] = (pp_tinfo){.dtype = PP_F32, .shape = *ps};
}



pp_status shape_LAYERNORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in;
    PP_TRY(dy_x(in, 1, err));
    int axis;
    float eps;
    int64_t outer, inner;
    PP_TRY(pp_norm_rows(a, &in[1].shape, &axis, &eps, &outer, &inner, err));
    PP_TRY(need_f32(&in[2], "scale", err));
    pp_shape want = {.rank = in[1].shape.rank - axis};
    for (int i = axis; i < in[1].shape.rank; i++) want.dim[i - axis] = in[1].shape.dim[i];
    if (!same_shape(&in[2].shape, &want))
        return PP_FAIL(err, PP_EINVAL, "scale's shape is not X's dims from axis %d on", axis);
    norm_grad_outputs(in, &want, out, n_out);
    return PP_OK;
}

double flops_LAYERNORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 10 * pp_numel_d(&out[0]);
}

pp_status shape_INSTANCENORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in;
    PP_TRY(dy_x(in, 3, err));
    PP_TRY(channel_vec(&in[2], &in[1], "scale", err));
    float eps;
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    norm_grad_outputs(in, &in[2].shape, out, n_out);
    return PP_OK;
}

double flops_INSTANCENORMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 10 * pp_numel_d(&out[0]);
}

/* ---- pp.AvgPoolGrad ----------------------------------------------------------------------------- */

pp_status shape_AVGPOOLGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    pp_shape s;
    PP_TRY(attr_shape(a, &s, err));
    pp_geom g;
    PP_TRY(pp_geom_make(a, &s, NULL, true, &g, err));
    pp_shape want = {.rank = s.rank, .dim = {s.dim[0], s.dim[1]}};
    for (int i = 0; i < g.nsp; i++) want.dim[2 + i] = g.out[i];
    if (!same_shape(&in[0].shape, &want)) return PP_FAIL(err, PP_EINVAL, "dY's shape is not the pool's output shape");
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    return PP_OK;
}

double flops_AVGPOOLGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)n_in, (void)out, (void)n_out;
    return pool_grad_flops(a, &in[0]);
}

/* ---- pp.Dropout (training mode, passes/grad_math.c pp_train_dropout) ------------------------ */

pp_status shape_DROPOUTTRAIN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "input X", err));
    if (in[1].dtype != PP_I64 || pp_numel_d(&in[1]) != 2)
        return PP_FAIL(err, PP_EINVAL, "input seed must be int64 of 2 elements (seed, counter)");
    float ratio;
    PP_TRY(pp_attr_float(a, "ratio", 0.5f, &ratio, err));
    if (!(ratio >= 0.0f && ratio <= 1.0f))
        return PP_FAIL(err, PP_EINVAL, "attribute 'ratio'=%g is outside [0, 1]", ratio);
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[0].shape};
    out[1] = (pp_tinfo){.dtype = PP_F32, .shape = in[0].shape};
    return PP_OK;
}

double flops_DROPOUTTRAIN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 4.0 * pp_numel_d(&out[0]);
}

/* ---- pp.ResizeGrad (passes/grad_nn.c) ------------------------------------------------------- */

pp_status shape_RESIZEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    pp_shape s;
    PP_TRY(attr_any_shape(a, &s, err));
    pp_tinfo ti[4];
    for (int i = 0; i < n_in && i < 4; i++) ti[i] = in[i];
    ti[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    pp_resize r;
    PP_TRY(pp_resize_parse(a, ti, n_in, &r, err));
    bool same = r.rank == in[0].shape.rank;
    for (int d = 0; same && d < r.rank; d++) same = r.out[d] == in[0].shape.dim[d];
    if (!same) return PP_FAIL(err, PP_EINVAL, "dY's shape is not the Resize output of 'shape'");
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = s};
    return PP_OK;
}

double flops_RESIZEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    return flops_RESIZE(a, in, n_in, &in[0], 1);
}

/* ---- pp.AttentionGrad (passes/grad_nn.c) ---------------------------------------------------- */

pp_status shape_ATTENTIONGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    pp_attn t;
    PP_TRY(pp_attn_parse(a, in + 1, n_in - 1, &t, err));
    const pp_shape y = t.three_d ? (pp_shape){3, {t.B, t.Sq, t.Hq * t.Dv}} : (pp_shape){4, {t.B, t.Hq, t.Sq, t.Dv}};
    bool same = in[0].shape.rank == y.rank;
    for (int d = 0; same && d < y.rank; d++) same = in[0].shape.dim[d] == y.dim[d];
    if (!same) return PP_FAIL(err, PP_EINVAL, "dY's shape is not Attention's output shape");
    for (int k = 0; k < 3; k++) out[k] = (pp_tinfo){.dtype = PP_F32, .shape = in[1 + k].shape};
    if (n_out > 3) out[3] = (pp_tinfo){PP_F32, {4, {t.B, t.Hq, t.Sq, t.T}}, NULL};
    return PP_OK;
}

double flops_ATTENTIONGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    return 2.0 * flops_ATTENTION(a, in + 1, n_in - 1, NULL, 0);
}

/* ---- pp.LSTMGrad (passes/grad_nn.c) --------------------------------------------------------- */

pp_status shape_LSTMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_rnn r;
    PP_TRY(pp_rnn_parse(PP_OP_LSTM, a, in, n_in < 7 ? n_in : 7, &r, err));
    if (r.has_p || r.input_forget || r.clip != INFINITY)
        return PP_FAIL(err, PP_EUNSUP, "peepholes, input_forget and clip have no LSTM gradient");
    for (int d = 0; d < r.D; d++)
        if (r.act[d][0].fn != PP_RNN_SIGMOID || r.act[d][1].fn != PP_RNN_TANH || r.act[d][2].fn != PP_RNN_TANH)
            return PP_FAIL(err, PP_EUNSUP, "activations other than Sigmoid, Tanh, Tanh have no LSTM gradient");
    const pp_shape st = r.layout ? (pp_shape){3, {r.N, r.D, r.H}} : (pp_shape){3, {r.D, r.N, r.H}};
    const pp_shape y = r.layout ? (pp_shape){4, {r.N, r.S, r.D, r.H}} : (pp_shape){4, {r.S, r.D, r.N, r.H}};
    const pp_shape *want[3] = {&y, &st, &st};
    for (int k = 0; k < 3 && 7 + k < n_in; k++)
        if (in[7 + k].dtype != PP_UNDEFINED) {
            PP_TRY(need_f32(&in[7 + k], "an output's gradient", err));
            if (!pp_shape_eq(&in[7 + k].shape, want[k]))
                return PP_FAIL(err, PP_EINVAL, "the gradient of output %d has another shape than the output", k);
        }
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[0].shape};
    out[1] = (pp_tinfo){.dtype = PP_F32, .shape = in[1].shape};
    out[2] = (pp_tinfo){.dtype = PP_F32, .shape = in[2].shape};
    out[3] = (pp_tinfo){PP_F32, {2, {r.D, 8 * r.H}}, NULL};
    out[4] = (pp_tinfo){.dtype = PP_F32, .shape = st};
    out[5] = (pp_tinfo){.dtype = PP_F32, .shape = st};
    return PP_OK;
}

double flops_LSTMGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)out, (void)n_out;
    /* the forward again and twice its products back: 3 x 2 (G H (I + H)) per step and sample */
    const double S = (double)in[0].shape.dim[0] * (double)in[0].shape.dim[1];
    const double GH = (double)in[1].shape.dim[1], I = (double)in[1].shape.dim[2], H = (double)in[2].shape.dim[2];
    return 6.0 * S * GH * (I + H) * (double)in[1].shape.dim[0];
}

/* ---- pp.GRUGrad (passes/grad_nn.c) ---------------------------------------------------------- */

pp_status shape_GRUGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_rnn r;
    PP_TRY(pp_rnn_parse(PP_OP_GRU, a, in, n_in < 6 ? n_in : 6, &r, err));
    if (r.clip != INFINITY) return PP_FAIL(err, PP_EUNSUP, "clip has no GRU gradient");
    for (int d = 0; d < r.D; d++)
        if (r.act[d][0].fn != PP_RNN_SIGMOID || r.act[d][1].fn != PP_RNN_TANH)
            return PP_FAIL(err, PP_EUNSUP, "activations other than Sigmoid, Tanh have no GRU gradient");
    const pp_shape st = r.layout ? (pp_shape){3, {r.N, r.D, r.H}} : (pp_shape){3, {r.D, r.N, r.H}};
    const pp_shape y = r.layout ? (pp_shape){4, {r.N, r.S, r.D, r.H}} : (pp_shape){4, {r.S, r.D, r.N, r.H}};
    const pp_shape *want[2] = {&y, &st};
    for (int k = 0; k < 2 && 6 + k < n_in; k++)
        if (in[6 + k].dtype != PP_UNDEFINED) {
            PP_TRY(need_f32(&in[6 + k], "an output's gradient", err));
            if (!pp_shape_eq(&in[6 + k].shape, want[k]))
                return PP_FAIL(err, PP_EINVAL, "the gradient of output %d has another shape than the output", k);
        }
    for (int k = 0; k < 3; k++) out[k] = (pp_tinfo){.dtype = PP_F32, .shape = in[k].shape};
    out[3] = (pp_tinfo){PP_F32, {2, {r.D, 6 * r.H}}, NULL};
    out[4] = (pp_tinfo){.dtype = PP_F32, .shape = st};
    return PP_OK;
}

double flops_GRUGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_LSTMGRAD(a, in, n_in, out, n_out);
}

/* ---- pp.RNNGrad (passes/grad_nn.c) ---------------------------------------------------------- */

pp_status shape_RNNGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_rnn r;
    PP_TRY(pp_rnn_parse(PP_OP_RNN, a, in, n_in < 6 ? n_in : 6, &r, err));
    if (r.clip != INFINITY) return PP_FAIL(err, PP_EUNSUP, "clip has no RNN gradient");
    for (int d = 0; d < r.D; d++)
        if (r.act[d][0].fn != PP_RNN_TANH && r.act[d][0].fn != PP_RNN_RELU)
            return PP_FAIL(err, PP_EUNSUP, "activations other than Tanh and Relu have no RNN gradient");
    const pp_shape st = r.layout ? (pp_shape){3, {r.N, r.D, r.H}} : (pp_shape){3, {r.D, r.N, r.H}};
    const pp_shape y = r.layout ? (pp_shape){4, {r.N, r.S, r.D, r.H}} : (pp_shape){4, {r.S, r.D, r.N, r.H}};
    const pp_shape *want[2] = {&y, &st};
    for (int k = 0; k < 2 && 6 + k < n_in; k++)
        if (in[6 + k].dtype != PP_UNDEFINED) {
            PP_TRY(need_f32(&in[6 + k], "an output's gradient", err));
            if (!pp_shape_eq(&in[6 + k].shape, want[k]))
                return PP_FAIL(err, PP_EINVAL, "the gradient of output %d has another shape than the output", k);
        }
    for (int k = 0; k < 3; k++) out[k] = (pp_tinfo){.dtype = PP_F32, .shape = in[k].shape};
    out[3] = (pp_tinfo){PP_F32, {2, {r.D, 2 * r.H}}, NULL};
    out[4] = (pp_tinfo){.dtype = PP_F32, .shape = st};
    return PP_OK;
}

double flops_RNNGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_LSTMGRAD(a, in, n_in, out, n_out);
}

/* ---- pp.GridSampleGrad --------------------------------------------------------------------------- */

pp_status shape_GRIDSAMPLEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_f32(&in[0], "gradient dY", err));
    pp_tinfo y;
    PP_TRY(shape_GRIDSAMPLE(a, &in[1], 2, &y, 1, err));
    if (!same_shape(&in[0].shape, &y.shape)) return PP_FAIL(err, PP_EINVAL, "dY's shape is not GridSample's output shape");
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[1].shape};
    out[1] = (pp_tinfo){.dtype = PP_F32, .shape = in[2].shape};
    return PP_OK;
}

double flops_GRIDSAMPLEGRAD(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)n_out;
    pp_tinfo y = {.dtype = PP_F32, .shape = in[0].shape};
    return (2.0 + out[1].shape.dim[out[1].shape.rank - 1]) * flops_GRIDSAMPLE(a, &in[1], n_in - 1, &y, 1);
}
