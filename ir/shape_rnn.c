/* shape_rnn.c: shape inference and FLOPs of the ops in ops_rnn.def (LSTM,
 * GRU, RNN), and the parser of shape_rnn.h that the reference kernels share.
 *
 * Element types: float32 only (PP_EUNSUP otherwise, naming the input);
 * sequence_lens is int32, as ONNX defines it. */
#include "shape_rnn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "op_fns.h"

static bool present(const pp_tinfo *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

/* Input k (`what`) is float32 of exactly the dims want[0..n). */
static pp_status need_f32_dims(const pp_tinfo *t, const int64_t *want, int n, const char *what,
                               pp_err *err) {
    if (t->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; only f32 is supported", what,
                       pp_dtype_name(t->dtype));
    bool ok = t->shape.rank == n;
    for (int i = 0; ok && i < n; i++) ok = t->shape.dim[i] == want[i];
    if (ok) return PP_OK;
    char got[96], exp[128] = "[";
    size_t len = 1;
    for (int i = 0; i < n && len < sizeof exp; i++)
        len += (size_t)snprintf(exp + len, sizeof exp - len, "%s%lld", i ? "," : "",
                                (long long)want[i]);
    if (len < sizeof exp - 1) strcat(exp, "]");
    return PP_FAIL(err, PP_EINVAL, "%s has shape %s, expected %s", what,
                   pp_shape_str(&t->shape, got, sizeof got), exp);
}

/* The activation functions by name (case as onnxruntime: any), whether each
 * takes alpha and beta, ONNX's defaults (those of the op of that name), and
 * whether a value must be given: ThresholdedRelu's, Affine's and
 * ScaledTanh's defaults differ between ONNX (1.0, 1.0 and 0.0, none) and
 * onnxruntime (0), so neither is guessed. */
static const struct {
    const char *name;
    pp_rnn_fn fn;
    bool uses_a, uses_b, need;
    float alpha, beta;
} act_names[] = {
    {"Sigmoid", PP_RNN_SIGMOID, false, false, false, 0, 0},
    {"Tanh", PP_RNN_TANH, false, false, false, 0, 0},
    {"Relu", PP_RNN_RELU, false, false, false, 0, 0},
    {"HardSigmoid", PP_RNN_HARDSIGMOID, true, true, false, 0.2f, 0.5f},
    {"Affine", PP_RNN_AFFINE, true, true, true, 0, 0},
    {"LeakyRelu", PP_RNN_LEAKYRELU, true, false, false, 0.01f, 0},
    {"ThresholdedRelu", PP_RNN_THRESHOLDEDRELU, true, false, true, 0, 0},
    {"ScaledTanh", PP_RNN_SCALEDTANH, true, true, true, 0, 0},
    {"Elu", PP_RNN_ELU, true, false, false, 1.0f, 0},
    {"Softsign", PP_RNN_SOFTSIGN, false, false, false, 0, 0},
    {"Softplus", PP_RNN_SOFTPLUS, false, false, false, 0, 0},
};

/* The next of attribute attr's n values (vals[*i], then *i moves on) into
 * *out, for activation fn; none left: *out keeps its default, unless `need`
 * (no agreed default), which is refused. */
static pp_status take_param(const char *fn, const char *attr, const float *vals, int n, int *i, bool need,
                            float *out, pp_err *err) {
    if (*i < n) *out = vals[(*i)++];
    else if (need)
        return PP_FAIL(err, PP_EUNSUP, "activation %s needs a value in attribute '%s' (it has %d, all "
                       "taken by the functions before it): its default is not agreed on", fn, attr, n);
    return PP_OK;
}

/* The activations of both directions into r->act (r->D, r->n_act set). */
/* An int attribute that must be 0 or 1 (absent: 0). */
static pp_status flag_attr(pp_attrs a, const char *name, bool *out, pp_err *err) {
    int64_t v;
    PP_TRY(pp_attr_int(a, name, 0, &v, err));
    if (v != 0 && v != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute '%s'=%lld must be 0 or 1", name, (long long)v);
    *out = v;
    return PP_OK;
}

static pp_status parse_acts(pp_op op, pp_attrs a, pp_rnn *r, pp_err *err) {
    static const char *const lstm_def[] = {"Sigmoid", "Tanh", "Tanh"};
    static const char *const gru_def[] = {"Sigmoid", "Tanh"};
    static const char *const rnn_def[] = {"Tanh"};
    const char *const *names;
    const float *alphas, *betas;
    int n, na, nb;
    PP_TRY(pp_attr_strings(a, "activations", &names, &n, err));
    PP_TRY(pp_attr_floats(a, "activation_alpha", &alphas, &na, err));
    PP_TRY(pp_attr_floats(a, "activation_beta", &betas, &nb, err));
    const bool def = !pp_attr_find(a, "activations");
    if (def) {
        names = op == PP_OP_LSTM ? lstm_def : op == PP_OP_GRU ? gru_def : rnn_def;
        n = r->n_act;
    } else if (n != r->n_act * r->D) {
        return PP_FAIL(err, PP_EINVAL, "attribute 'activations' has %d names, expected %d (%d per "
                       "direction, %d direction%s)", n, r->n_act * r->D, r->n_act, r->D,
                       r->D > 1 ? "s" : "");
    }
    int ia = 0, ib = 0;
    for (int d = 0; d < r->D; d++)
        for (int k = 0; k < r->n_act; k++) {
            const char *nm = names[def ? k : d * r->n_act + k];
            size_t e = 0;
            while (e < sizeof act_names / sizeof act_names[0] && strcasecmp(nm, act_names[e].name))
                e++;
            if (e == sizeof act_names / sizeof act_names[0])
                return PP_FAIL(err, PP_EUNSUP, "attribute 'activations': '%s' (name %d) is not "
                               "supported; supported: Sigmoid, Tanh, Relu, HardSigmoid, Affine, "
                               "LeakyRelu, ThresholdedRelu, ScaledTanh, Elu, Softsign, Softplus",
                               nm, def ? k : d * r->n_act + k);
            pp_rnn_act *t = &r->act[d][k];
            t->fn = act_names[e].fn;
            t->alpha = act_names[e].alpha, t->beta = act_names[e].beta;
            if (act_names[e].uses_a)
                PP_TRY(take_param(act_names[e].name, "activation_alpha", alphas, na, &ia,
                                  act_names[e].need, &t->alpha, err));
            if (act_names[e].uses_b)
                PP_TRY(take_param(act_names[e].name, "activation_beta", betas, nb, &ib,
                                  act_names[e].need, &t->beta, err));
            if (!isfinite(t->alpha) || !isfinite(t->beta))
                return PP_FAIL(err, PP_EINVAL, "activation %s: alpha %g and beta %g must be finite",
                               act_names[e].name, (double)t->alpha, (double)t->beta);
        }
    return PP_OK;
}

pp_status pp_rnn_parse(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_rnn *r, pp_err *err) {
    memset(r, 0, sizeof *r);
    r->G = op == PP_OP_LSTM ? 4 : op == PP_OP_GRU ? 3 : 1;
    r->n_act = op == PP_OP_LSTM ? 3 : op == PP_OP_GRU ? 2 : 1;
    int64_t layout, hs;
    const char *dir;
    PP_TRY(pp_attr_int(a, "layout", 0, &layout, err));
    if (layout != 0 && layout != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'layout'=%lld must be 0 or 1", (long long)layout);
    r->layout = layout;
    PP_TRY(pp_attr_string(a, "direction", "forward", &dir, err));
    if (!strcmp(dir, "bidirectional")) r->D = 2;
    else if (!strcmp(dir, "forward") || !strcmp(dir, "reverse"))
        r->D = 1, r->reverse = dir[0] == 'r';
    else
        return PP_FAIL(err, PP_EINVAL, "attribute 'direction'='%s' must be forward, reverse or "
                       "bidirectional", dir);
    /* X: [S, N, I] (layout 1: [N, S, I]) */
    const pp_tinfo *x = &in[0];
    if (x->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "input X has element type %s; only f32 is supported",
                       pp_dtype_name(x->dtype));
    if (x->shape.rank != 3)
        return PP_FAIL(err, PP_EINVAL, "input X has rank %d, expected 3 ([%s, input_size])",
                       x->shape.rank, r->layout ? "batch, seq" : "seq, batch");
    r->S = x->shape.dim[r->layout ? 1 : 0];
    r->N = x->shape.dim[r->layout ? 0 : 1];
    r->I = x->shape.dim[2];
    /* the hidden size: the attribute, else from R, which must then fit it */
    const pp_tinfo *w = &in[1], *rr = &in[2];
    if (rr->shape.rank != 3)
        return PP_FAIL(err, PP_EINVAL, "input R has rank %d, expected 3 ([num_directions, %d*"
                       "hidden_size, hidden_size])", rr->shape.rank, r->G);
    PP_TRY(pp_attr_int(a, "hidden_size", rr->shape.dim[2], &hs, err));
    if (hs < 1 || hs > ((int64_t)1 << 30))
        return PP_FAIL(err, PP_EINVAL, "the hidden size %lld (attribute 'hidden_size', else R's "
                       "last dim) must be positive", (long long)hs);
    r->H = hs;
    const int64_t GH = r->G * r->H;
    const int64_t ws[3] = {r->D, GH, r->I}, rs[3] = {r->D, GH, r->H};
    char what[96];
    snprintf(what, sizeof what, "input W (%s, hidden_size %lld)", dir, (long long)r->H);
    PP_TRY(need_f32_dims(w, ws, 3, what, err));
    snprintf(what, sizeof what, "input R (%s, hidden_size %lld)", dir, (long long)r->H);
    PP_TRY(need_f32_dims(rr, rs, 3, what, err));
    if ((r->has_b = present(in, n_in, 3))) {
        const int64_t bs[2] = {r->D, 2 * GH};
        PP_TRY(need_f32_dims(&in[3], bs, 2, "input B", err));
    }
    if ((r->has_lens = present(in, n_in, 4))) {
        const pp_tinfo *l = &in[4];
        if (l->dtype != PP_I32)
            return PP_FAIL(err, PP_EINVAL, "input sequence_lens must be int32, got %s",
                           pp_dtype_name(l->dtype));
        if (l->shape.rank != 1 || l->shape.dim[0] != r->N) {
            char s[96];
            return PP_FAIL(err, PP_EINVAL, "input sequence_lens has shape %s, expected [%lld] "
                           "(the batch size)", pp_shape_str(&l->shape, s, sizeof s),
                           (long long)r->N);
        }
    }
    const int64_t hsh[3] = {r->layout ? r->N : r->D, r->layout ? r->D : r->N, r->H};
    if ((r->has_h0 = present(in, n_in, 5)))
        PP_TRY(need_f32_dims(&in[5], hsh, 3, "input initial_h", err));
    if (op == PP_OP_LSTM) {
        if ((r->has_c0 = present(in, n_in, 6)))
            PP_TRY(need_f32_dims(&in[6], hsh, 3, "input initial_c", err));
        if ((r->has_p = present(in, n_in, 7))) {
            const int64_t ps[2] = {r->D, 3 * r->H};
            PP_TRY(need_f32_dims(&in[7], ps, 2, "input P", err));
        }
        PP_TRY(flag_attr(a, "input_forget", &r->input_forget, err));
    }
    if (op == PP_OP_GRU) PP_TRY(flag_attr(a, "linear_before_reset", &r->linear_before_reset, err));
    PP_TRY(pp_attr_float(a, "clip", INFINITY, &r->clip, err));
    if (!(r->clip > 0.0f))
        return PP_FAIL(err, PP_EINVAL, "attribute 'clip'=%g must be positive", (double)r->clip);
    return parse_acts(op, a, r, err);
}

static pp_status shape_rnn(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                           int n_out, pp_err *err) {
    pp_rnn r;
    PP_TRY(pp_rnn_parse(op, a, in, n_in, &r, err));
    const pp_shape y = r.layout ? (pp_shape){4, {r.N, r.S, r.D, r.H}}
                                : (pp_shape){4, {r.S, r.D, r.N, r.H}};
    const pp_shape yh = r.layout ? (pp_shape){3, {r.N, r.D, r.H}} : (pp_shape){3, {r.D, r.N, r.H}};
    out[0] = (pp_tinfo){PP_F32, y, NULL};
    for (int k = 1; k < n_out; k++) out[k] = (pp_tinfo){PP_F32, yh, NULL};
    return PP_OK;
}

pp_status shape_LSTM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    return shape_rnn(PP_OP_LSTM, a, in, n_in, out, n_out, err);
}

pp_status shape_GRU(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    return shape_rnn(PP_OP_GRU, a, in, n_in, out, n_out, err);
}

pp_status shape_RNN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    return shape_rnn(PP_OP_RNN, a, in, n_in, out, n_out, err);
}

/* Per step, sample and direction: the gates' products with x and h, and
 * about 8 operations per gate value (biases, activations, the update). */
static double flops_rnn(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in) {
    pp_rnn r;
    if (pp_rnn_parse(op, a, in, n_in, &r, NULL) != PP_OK) return 0;
    const double gh = (double)r.G * (double)r.H;
    return (double)r.S * (double)r.N * r.D * (2.0 * gh * (double)(r.I + r.H) + 8.0 * gh);
}

double flops_LSTM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    return flops_rnn(PP_OP_LSTM, a, in, n_in);
}

double flops_GRU(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    return flops_rnn(PP_OP_GRU, a, in, n_in);
}

double flops_RNN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    return flops_rnn(PP_OP_RNN, a, in, n_in);
}
