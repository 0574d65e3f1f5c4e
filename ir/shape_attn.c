/* shape_attn.c: shape inference and FLOPs of the ops in ops_attn.def
 * (RMSNormalization, RotaryEmbedding, Attention: opset 23), and the parsers
 * of shape_attn.h that the reference kernels share.
 *
 * Element types: float32 only (PP_EUNSUP otherwise, naming the input), as
 * the other normalizations; position_ids and nonpad_kv_seqlen are int64, the
 * attention mask bool or float32. */
#include "shape_attn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_fns.h"

static bool present(const pp_tinfo *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

static pp_status need_i64(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->dtype != PP_I64)
        return PP_FAIL(err, PP_EINVAL, "%s must be int64, got %s", what, pp_dtype_name(t->dtype));
    return PP_OK;
}

/* t has exactly the dims want[0..n) (any of them < 0: not checked). */
static pp_status need_dims(const pp_tinfo *t, const int64_t *want, int n, const char *what,
                           pp_err *err) {
    bool ok = t->shape.rank == n;
    for (int i = 0; ok && i < n; i++) ok = want[i] < 0 || t->shape.dim[i] == want[i];
    if (ok) return PP_OK;
    char got[96], exp[128] = "[";
    size_t len = 1;
    for (int i = 0; i < n && len < sizeof exp; i++)
        len += (size_t)(want[i] < 0 ? snprintf(exp + len, sizeof exp - len, "%s?", i ? "," : "")
                                    : snprintf(exp + len, sizeof exp - len, "%s%lld", i ? "," : "",
                                               (long long)want[i]));
    if (len < sizeof exp - 1) strcat(exp, "]");
    return PP_FAIL(err, PP_EINVAL, "%s has shape %s, expected %s", what,
                   pp_shape_str(&t->shape, got, sizeof got), exp);
}

/* A positive integer attribute, required (`need`) or 0 when absent. */
static pp_status pos_attr(pp_attrs a, const char *name, bool need, int64_t *out, pp_err *err) {
    *out = 0;
    if (!pp_attr_find(a, name)) {
        if (need) return PP_FAIL(err, PP_EINVAL, "attribute '%s' is required for 3-D inputs", name);
        return PP_OK;
    }
    PP_TRY(pp_attr_int(a, name, 0, out, err));
    if (*out < 1 || *out > ((int64_t)1 << 30))
        return PP_FAIL(err, PP_EINVAL, "attribute '%s'=%lld must be positive", name, (long long)*out);
    return PP_OK;
}

/* ---- RMSNormalization ------------------------------------------------------------- */

/* RMSNormalization(X, scale; axis, epsilon, stash_type): Y = X / sqrt(mean of
 * X^2 over dims [axis, rank) + epsilon) * scale; scale broadcasts to those
 * dims. */
pp_status shape_RMSNORM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(pp_need_float_half(&in[0], "input X", err));
    PP_TRY(pp_need_same_float(&in[1], &in[0], "input scale", err));
    PP_TRY(pp_need_rank(&in[0], 1, PP_MAX_DIMS, "input X", err));
    const pp_shape *x = &in[0].shape;
    int64_t axis64, stash;
    int axis;
    PP_TRY(pp_attr_int(a, "axis", -1, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", &axis, err));
    float eps;
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    if (!(eps >= 0.0f) || isinf(eps))
        return PP_FAIL(err, PP_EINVAL, "attribute 'epsilon'=%g must be finite and >= 0", (double)eps);
    PP_TRY(pp_attr_int(a, "stash_type", 1, &stash, err));
    if (stash != 1)
        return PP_FAIL(err, PP_EUNSUP, "attribute 'stash_type'=%lld: only 1 (float) is supported",
                       (long long)stash);
    /* scale broadcasts (right-aligned) to the normalized dims */
    const pp_shape *s = &in[1].shape;
    bool ok = s->rank <= x->rank - axis;
    for (int i = 0; ok && i < s->rank; i++) {
        int64_t d = s->dim[s->rank - 1 - i], xd = x->dim[x->rank - 1 - i];
        ok = d == xd || d == 1;
    }
    if (!ok) {
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL, "input scale has shape %s, which does not broadcast to the "
                       "normalized dims (from axis %d) of X %s", pp_shape_str(s, s1, sizeof s1),
                       axis, pp_shape_str(x, s2, sizeof s2));
    }
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    return PP_OK;
}

double flops_RMSNORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 4.0 * pp_numel_d(&out[0]);
}

/* ---- RotaryEmbedding ------------------------------------------------------------- */

pp_status pp_rope_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_rope *r, pp_err *err) {
    memset(r, 0, sizeof *r);
    PP_TRY(pp_need_float(&in[0], "input X", err));
    PP_TRY(pp_need_float(&in[1], "input cos_cache", err));
    PP_TRY(pp_need_float(&in[2], "input sin_cache", err));
    const pp_shape *x = &in[0].shape;
    int64_t heads, rot, il;
    PP_TRY(pos_attr(a, "num_heads", x->rank == 3, &heads, err));
    PP_TRY(pp_attr_int(a, "rotary_embedding_dim", 0, &rot, err));
    PP_TRY(pp_attr_int(a, "interleaved", 0, &il, err));
    if (il != 0 && il != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'interleaved'=%lld must be 0 or 1", (long long)il);
    r->interleaved = il;
    if (x->rank == 4) {
        r->B = x->dim[0], r->H = x->dim[1], r->S = x->dim[2], r->D = x->dim[3];
    } else if (x->rank == 3) {
        r->three_d = true;
        r->B = x->dim[0], r->S = x->dim[1], r->H = heads;
        if (x->dim[2] % heads)
            return PP_FAIL(err, PP_EINVAL, "input X's hidden size %lld is not a multiple of "
                           "num_heads=%lld", (long long)x->dim[2], (long long)heads);
        r->D = x->dim[2] / heads;
    } else {
        return PP_FAIL(err, PP_EINVAL, "input X has rank %d, expected 3 or 4", x->rank);
    }
    r->rot = rot ? rot : r->D;
    if (r->rot < 0 || r->rot > r->D || r->rot % 2)
        return PP_FAIL(err, PP_EINVAL, "the rotary dim %lld must be even and at most the head "
                       "size %lld", (long long)r->rot, (long long)r->D);
    r->has_pos = present(in, n_in, 3);
    const int64_t half = r->rot / 2;
    if (r->has_pos) {
        PP_TRY(need_i64(&in[3], "input position_ids", err));
        const int64_t ps[2] = {r->B, r->S}, cs[2] = {-1, half};
        PP_TRY(need_dims(&in[3], ps, 2, "input position_ids", err));
        PP_TRY(need_dims(&in[1], cs, 2, "input cos_cache (with position_ids)", err));
    } else {
        const int64_t cs[3] = {r->B, r->S, half};
        PP_TRY(need_dims(&in[1], cs, 3, "input cos_cache (without position_ids)", err));
    }
    if (!pp_shape_eq(&in[1].shape, &in[2].shape)) {
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL, "input sin_cache has shape %s, cos_cache %s",
                       pp_shape_str(&in[2].shape, s1, sizeof s1),
                       pp_shape_str(&in[1].shape, s2, sizeof s2));
    }
    return PP_OK;
}

pp_status shape_ROTARYEMBEDDING(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                                int n_out, pp_err *err) {
    (void)n_out;
    pp_rope r;
    PP_TRY(pp_rope_parse(a, in, n_in, &r, err));
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}

double flops_ROTARYEMBEDDING(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                             int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 3.0 * pp_numel_d(&out[0]);
}

/* ---- Attention ----------------------------------------------------------------- */

/* Q, K, V's heads and sizes into t. */
static pp_status attn_qkv(pp_attrs a, const pp_tinfo *in, pp_attn *t, pp_err *err) {
    static const char *const names[] = {"input Q", "input K", "input V"};
    for (int i = 0; i < 3; i++) PP_TRY(pp_need_float(&in[i], names[i], err));
    const pp_shape *q = &in[0].shape, *k = &in[1].shape, *v = &in[2].shape;
    if ((q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank)
        return PP_FAIL(err, PP_EINVAL, "inputs Q, K, V have ranks %d, %d, %d; expected all 3 or "
                       "all 4", q->rank, k->rank, v->rank);
    int64_t hq, hkv;
    t->three_d = q->rank == 3;
    PP_TRY(pos_attr(a, "q_num_heads", t->three_d, &hq, err));
    PP_TRY(pos_attr(a, "kv_num_heads", t->three_d, &hkv, err));
    t->B = q->dim[0];
    if (k->dim[0] != t->B || v->dim[0] != t->B)
        return PP_FAIL(err, PP_EINVAL, "inputs Q, K, V have batch sizes %lld, %lld, %lld",
                       (long long)t->B, (long long)k->dim[0], (long long)v->dim[0]);
    if (t->three_d) {
        t->Hq = hq, t->Hkv = hkv, t->Sq = q->dim[1], t->Skv = k->dim[1];
        if (q->dim[2] % hq || k->dim[2] % hkv || v->dim[2] % hkv)
            return PP_FAIL(err, PP_EINVAL, "hidden sizes Q %lld, K %lld, V %lld are not multiples "
                           "of q_num_heads=%lld / kv_num_heads=%lld", (long long)q->dim[2],
                           (long long)k->dim[2], (long long)v->dim[2], (long long)hq,
                           (long long)hkv);
        t->D = q->dim[2] / hq;
        if (k->dim[2] / hkv != t->D)
            return PP_FAIL(err, PP_EINVAL, "K's head size %lld differs from Q's %lld",
                           (long long)(k->dim[2] / hkv), (long long)t->D);
        t->Dv = v->dim[2] / hkv;
        if (v->dim[1] != t->Skv)
            return PP_FAIL(err, PP_EINVAL, "V has %lld positions, K %lld", (long long)v->dim[1],
                           (long long)t->Skv);
    } else {
        t->Hq = q->dim[1], t->Hkv = k->dim[1], t->Sq = q->dim[2], t->Skv = k->dim[2];
        t->D = q->dim[3], t->Dv = v->dim[3];
        if (k->dim[3] != t->D)
            return PP_FAIL(err, PP_EINVAL, "K's head size %lld differs from Q's %lld",
                           (long long)k->dim[3], (long long)t->D);
        if (v->dim[1] != t->Hkv || v->dim[2] != t->Skv)
            return PP_FAIL(err, PP_EINVAL, "V has %lld heads and %lld positions, K %lld and %lld",
                           (long long)v->dim[1], (long long)v->dim[2], (long long)t->Hkv,
                           (long long)t->Skv);
    }
    if (t->Hkv < 1 || t->Hq % t->Hkv)
        return PP_FAIL(err, PP_EINVAL, "%lld query heads are not a multiple of %lld key/value "
                       "heads", (long long)t->Hq, (long long)t->Hkv);
    return PP_OK;
}

pp_status pp_attn_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_attn *t, pp_err *err) {
    memset(t, 0, sizeof *t);
    PP_TRY(attn_qkv(a, in, t, err));
    /* past key and value: both or neither */
    bool pk = present(in, n_in, 4), pv = present(in, n_in, 5);
    if (pk != pv)
        return PP_FAIL(err, PP_EINVAL, "inputs past_key and past_value must be given together");
    if (pk) {
        PP_TRY(pp_need_float(&in[4], "input past_key", err));
        PP_TRY(pp_need_float(&in[5], "input past_value", err));
        t->P = in[4].shape.rank == 4 ? in[4].shape.dim[2] : 0;
        const int64_t ks[4] = {t->B, t->Hkv, t->P, t->D}, vs[4] = {t->B, t->Hkv, t->P, t->Dv};
        PP_TRY(need_dims(&in[4], ks, 4, "input past_key", err));
        PP_TRY(need_dims(&in[5], vs, 4, "input past_value", err));
    }
    t->T = t->P + t->Skv;
    if (present(in, n_in, 6)) {
        if (pk)
            return PP_FAIL(err, PP_EINVAL, "input nonpad_kv_seqlen cannot be used with past_key "
                           "and past_value");
        PP_TRY(need_i64(&in[6], "input nonpad_kv_seqlen", err));
        const int64_t ns[1] = {t->B};
        PP_TRY(need_dims(&in[6], ns, 1, "input nonpad_kv_seqlen", err));
        t->has_nonpad = true;
    }
    /* the mask broadcasts to [B, Hq, Sq, T]; its last dim may be shorter */
    if (present(in, n_in, 3)) {
        const pp_tinfo *m = &in[3];
        if (m->dtype != PP_BOOL && m->dtype != PP_F32)
            return PP_FAIL(err, PP_EUNSUP, "input attn_mask has element type %s; supported: bool, "
                           "f32", pp_dtype_name(m->dtype));
        if (m->shape.rank < 1 || m->shape.rank > 4)
            return PP_FAIL(err, PP_EINVAL, "input attn_mask has rank %d, expected 1 to 4",
                           m->shape.rank);
        const int64_t full[4] = {t->B, t->Hq, t->Sq, t->T};
        t->mask.rank = 4;
        for (int i = 0; i < 4; i++) {
            int mi = i - (4 - m->shape.rank);
            int64_t d = mi >= 0 ? m->shape.dim[mi] : 1;
            bool ok = i == 3 ? d <= full[3] : d == full[i] || d == 1;
            if (!ok) {
                char s[96];
                return PP_FAIL(err, PP_EINVAL, "input attn_mask has shape %s, which does not "
                               "broadcast to [%lld,%lld,%lld,%lld] (batch, query heads, query "
                               "positions, keys)", pp_shape_str(&m->shape, s, sizeof s),
                               (long long)full[0], (long long)full[1], (long long)full[2],
                               (long long)full[3]);
            }
            t->mask.dim[i] = d;
        }
        t->has_mask = true;
        t->mask_bool = m->dtype == PP_BOOL;
    }
    int64_t causal, mode, prec;
    PP_TRY(pp_attr_int(a, "is_causal", 0, &causal, err));
    if (causal != 0 && causal != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'is_causal'=%lld must be 0 or 1", (long long)causal);
    t->causal = causal;
    PP_TRY(pp_attr_int(a, "qk_matmul_output_mode", 0, &mode, err));
    if (mode < 0 || mode > 3)
        return PP_FAIL(err, PP_EINVAL, "attribute 'qk_matmul_output_mode'=%lld must be 0 to 3",
                       (long long)mode);
    t->qk_mode = (int)mode;
    /* softmax runs in float (or wider) whatever softmax_precision asks */
    PP_TRY(pp_attr_int(a, "softmax_precision", PP_F32, &prec, err));
    if (prec != PP_F32 && prec != PP_F16 && prec != PP_BF16 && prec != PP_F64)
        return PP_FAIL(err, PP_EINVAL, "attribute 'softmax_precision'=%lld is not a float type",
                       (long long)prec);
    PP_TRY(pp_attr_float(a, "softcap", 0.0f, &t->softcap, err));
    if (!(t->softcap >= 0.0f) || isinf(t->softcap))
        return PP_FAIL(err, PP_EINVAL, "attribute 'softcap'=%g must be finite and >= 0",
                       (double)t->softcap);
    PP_TRY(pp_attr_float(a, "scale", (float)(1.0 / sqrt((double)(t->D ? t->D : 1))), &t->scale,
                         err));
    if (!isfinite(t->scale))
        return PP_FAIL(err, PP_EINVAL, "attribute 'scale'=%g must be finite", (double)t->scale);
    return PP_OK;
}

pp_status shape_ATTENTION(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    pp_attn t;
    PP_TRY(pp_attn_parse(a, in, n_in, &t, err));
    pp_shape y = t.three_d ? (pp_shape){3, {t.B, t.Sq, t.Hq * t.Dv}}
                           : (pp_shape){4, {t.B, t.Hq, t.Sq, t.Dv}};
    out[0] = (pp_tinfo){PP_F32, y, NULL};
    if (n_out > 1) out[1] = (pp_tinfo){PP_F32, {4, {t.B, t.Hkv, t.T, t.D}}, NULL};
    if (n_out > 2) out[2] = (pp_tinfo){PP_F32, {4, {t.B, t.Hkv, t.T, t.Dv}}, NULL};
    if (n_out > 3) out[3] = (pp_tinfo){PP_F32, {4, {t.B, t.Hq, t.Sq, t.T}}, NULL};
    return PP_OK;
}

double flops_ATTENTION(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)out, (void)n_out;
    pp_attn t;
    if (pp_attn_parse(a, in, n_in, &t, NULL) != PP_OK) return 0;
    const double rows = (double)t.B * (double)t.Hq * (double)t.Sq * (double)t.T;
    return rows * (2.0 * (double)(t.D + t.Dv) + 6.0);
}
