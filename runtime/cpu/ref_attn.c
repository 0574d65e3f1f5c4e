/* ref_attn.c: reference kernels of the ops in ir/ops_attn.def:
 * RMSNormalization, RotaryEmbedding and Attention (opset 23).
 *
 * Same rules as the other reference kernels: single-threaded, deterministic
 * (every sum in an order fixed by the shapes), float32 data; sums of squares
 * and attention's dot products, softmax sums and weighted sums accumulate in
 * double. Inputs and attributes are read by the parsers of ir/shape_attn.h,
 * the very ones shape inference used. Attention follows the ONNX definition
 * step by step: scores = (Q K^T) * scale, softcap (c * tanh(s / c)), + mask
 * (bool false, positions past the mask's last dim, the causal upper triangle
 * and keys past nonpad_kv_seqlen all count as -inf), softmax (a row masked
 * out entirely gives NaN, as the definition does), times V. */
#include "chan_sums.h"
#include "ref.h"
#include "../../ir/op_fns.h" /* pp_norm_rows */
#include "../../ir/shape_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- RMSNormalization ------------------------------------------------------------ */

pp_status kern_RMSNORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_RMSNORM);
    PP_TRY(pprt_check_outputs(PP_OP_RMSNORM, attrs, in, n_in, out, n_out, err));
    const pp_shape *xs = &in[0].shape, *ss = &in[1].shape;
    int axis;
    float eps;
    int64_t outer, inner;
    PP_TRY(pp_norm_rows(attrs, xs, &axis, &eps, &outer, &inner, err));
    /* the scale expanded to the normalized dims */
    size_t nb;
    if (pp_mul_ovf((size_t)inner, sizeof(float), &nb))
        return PP_FAIL(err, PP_ENOMEM, "RMSNormalization kernel: scratch size overflows");
    float *sc = pprt_scratch_get(scratch, nb ? nb : 1);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "RMSNormalization kernel: out of memory");
    const int nr = xs->rank - axis;
    int64_t idx[PP_MAX_DIMS] = {0}, st[PP_MAX_DIMS], acc = 1;
    for (int i = nr - 1; i >= 0; i--) {
        int si = i - (nr - ss->rank);
        int64_t d = si >= 0 ? ss->dim[si] : 1;
        st[i] = d == 1 ? 0 : acc;
        acc *= d;
    }
    const float *s = in[1].data;
    for (int64_t k = 0; k < inner; k++) {
        int64_t off = 0;
        for (int i = 0; i < nr; i++) off += idx[i] * st[i];
        sc[k] = s[off];
        for (int i = nr - 1; i >= 0; i--) {
            if (++idx[i] < xs->dim[axis + i]) break;
            idx[i] = 0;
        }
    }
    pprt_rms_rows(in[0].data, sc, out[0].data, inner, eps, 0, outer);
    return PP_OK;
}

/* (ref.h) The row's sum of squares over chan_sums.h's eight partials (element i into partial i mod 8, folded
 * in its fixed tree; each square exact in double), so runtime/dnnl/kernels/rmsrow.c's vector copies give these
 * bits. */
void pprt_rms_rows(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o++) {
        const float *xp = x + o * inner;
        float *yp = y + o * inner;
        double a[PPRT_CHAN_LANES] = {0};
        int64_t i = 0;
        for (; i + PPRT_CHAN_LANES <= inner; i += PPRT_CHAN_LANES)
            for (int k = 0; k < PPRT_CHAN_LANES; k++) a[k] += (double)xp[i + k] * xp[i + k];
        for (int k = 0; i < inner; i++, k++) a[k] += (double)xp[i] * xp[i];
        const double inv = 1.0 / sqrt(pprt_lanes_fold(a) / (double)(inner ? inner : 1) + eps);
        for (i = 0; i < inner; i++) yp[i] = (float)(xp[i] * inv * sc[i]);
    }
}

/* ---- RotaryEmbedding --------------------------------------------------------------- */

pp_status kern_ROTARYEMBEDDING(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                               int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_ROTARYEMBEDDING, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[4];
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_rope r;
    PP_TRY(pp_rope_parse(attrs, ti, n_in, &r, err));
    const float *x = in[0].data, *cc = in[1].data, *sc = in[2].data;
    const int64_t *pos = r.has_pos ? in[3].data : NULL;
    const int64_t half = r.rot / 2, max_pos = r.has_pos ? in[1].shape.dim[0] : 0;
    float *y = out[0].data;
    for (int64_t b = 0; b < r.B; b++)
        for (int64_t s = 0; s < r.S; s++) {
            int64_t row = b * r.S + s; /* cache row without position_ids */
            if (pos) {
                row = pos[b * r.S + s];
                if (row < 0 || row >= max_pos)
                    return PP_FAIL(err, PP_EINVAL, "RotaryEmbedding: position_ids[%lld][%lld] = "
                                   "%lld is out of range [0, %lld)", (long long)b, (long long)s,
                                   (long long)row, (long long)max_pos);
            }
            const float *c = cc + row * half, *sn = sc + row * half;
            for (int64_t h = 0; h < r.H; h++) {
                /* [B, H, S, D] or [B, S, H*D] */
                const int64_t base = r.three_d ? (b * r.S + s) * r.H * r.D + h * r.D
                                               : ((b * r.H + h) * r.S + s) * r.D;
                const float *xp = x + base;
                float *yp = y + base;
                for (int64_t i = 0; i < half; i++) {
                    const int64_t i1 = r.interleaved ? 2 * i : i;
                    const int64_t i2 = r.interleaved ? 2 * i + 1 : i + half;
                    const float x1 = xp[i1], x2 = xp[i2];
                    yp[i1] = c[i] * x1 - sn[i] * x2;
                    yp[i2] = sn[i] * x1 + c[i] * x2;
                }
                if (r.rot < r.D) memcpy(yp + r.rot, xp + r.rot, (size_t)(r.D - r.rot) * sizeof(float));
            }
        }
    return PP_OK;
}

/* ---- Attention ------------------------------------------------------------------- */

/* The mask's value (0 or -inf for a bool mask, the float as it is) at
 * [b, h, i, j] of [B, Hq, Sq, T]; past its last dim, -inf. */
static float mask_at(const pp_attn *t, const pprt_tensor *m, int64_t b, int64_t h, int64_t i,
                     int64_t j) {
    const pp_shape *s = &t->mask;
    if (j >= s->dim[3]) return -INFINITY;
    const int64_t c[4] = {s->dim[0] == 1 ? 0 : b, s->dim[1] == 1 ? 0 : h, s->dim[2] == 1 ? 0 : i, j};
    const int64_t off = ((c[0] * s->dim[1] + c[1]) * s->dim[2] + c[2]) * s->dim[3] + c[3];
    if (t->mask_bool) return ((const uint8_t *)m->data)[off] ? 0.0f : -INFINITY;
    return ((const float *)m->data)[off];
}

pp_status kern_ATTENTION(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_check_outputs(PP_OP_ATTENTION, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[7];
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_attn t;
    PP_TRY(pp_attn_parse(attrs, ti, n_in, &t, err));
    const float *Q = in[0].data, *K = in[1].data, *V = in[2].data;
    const float *PK = t.P ? in[4].data : NULL, *PV = t.P ? in[5].data : NULL;
    const int64_t *nonpad = t.has_nonpad ? in[6].data : NULL;
    float *Y = out[0].data;
    float *pres_k = n_out > 1 && out[1].dtype != PP_UNDEFINED ? out[1].data : NULL;
    float *pres_v = n_out > 2 && out[2].dtype != PP_UNDEFINED ? out[2].data : NULL;
    float *qk_out = n_out > 3 && out[3].dtype != PP_UNDEFINED ? out[3].data : NULL;
    size_t nb;
    if (pp_mul_ovf((size_t)t.T, sizeof(double), &nb))
        return PP_FAIL(err, PP_ENOMEM, "Attention kernel: scratch size overflows");
    double *sc = pprt_scratch_get(scratch, nb ? nb : 1);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "Attention kernel: out of memory");
    /* key/value j of head g in batch b: the past first, then K / V */
    const int64_t group = t.Hq / t.Hkv;
#define KV_ROW(X, PX, DIM, b, g, j)                                                       \
    ((j) < t.P ? (PX) + (((b) * t.Hkv + (g)) * t.P + (j)) * (DIM)                         \
     : t.three_d ? (X) + ((b) * t.Skv + (j) - t.P) * t.Hkv * (DIM) + (g) * (DIM)          \
                 : (X) + (((b) * t.Hkv + (g)) * t.Skv + (j) - t.P) * (DIM))
    for (int64_t b = 0; b < t.B; b++)
        for (int64_t g = 0; g < t.Hkv; g++)
            for (int64_t j = 0; j < t.T; j++) {
                const int64_t o = ((b * t.Hkv + g) * t.T + j);
                if (pres_k) memcpy(pres_k + o * t.D, KV_ROW(K, PK, t.D, b, g, j), (size_t)t.D * sizeof(float));
                if (pres_v) memcpy(pres_v + o * t.Dv, KV_ROW(V, PV, t.Dv, b, g, j), (size_t)t.Dv * sizeof(float));
            }
    const pprt_tensor *m = t.has_mask ? &in[3] : NULL;
    for (int64_t b = 0; b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++) {
            const int64_t g = h / group;
            for (int64_t i = 0; i < t.Sq; i++) {
                const float *q = t.three_d ? Q + (b * t.Sq + i) * t.Hq * t.D + h * t.D
                                           : Q + ((b * t.Hq + h) * t.Sq + i) * t.D;
                float *qk = qk_out ? qk_out + ((b * t.Hq + h) * t.Sq + i) * t.T : NULL;
                double mx = -INFINITY;
                for (int64_t j = 0; j < t.T; j++) {
                    const float *k = KV_ROW(K, PK, t.D, b, g, j);
                    double d = 0;
                    for (int64_t e = 0; e < t.D; e++) d += (double)q[e] * k[e];
                    float s = (float)(d * t.scale);
                    if (t.softcap > 0) s = t.softcap * tanhf(s / t.softcap);
                    if (qk && t.qk_mode <= 1) qk[j] = s;
                    float bias = m ? mask_at(&t, m, b, h, i, j) : 0.0f;
                    if (t.causal && j >= t.P && j - t.P > i) bias += -INFINITY;
                    if (nonpad && j >= nonpad[b]) bias += -INFINITY;
                    s += bias;
                    if (qk && t.qk_mode == 2) qk[j] = s;
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0;
                for (int64_t j = 0; j < t.T; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int64_t j = 0; j < t.T; j++) {
                    sc[j] /= sum;
                    if (qk && t.qk_mode == 3) qk[j] = (float)sc[j];
                }
                /* a row that is -inf everywhere gives NaN (-inf - -inf), as defined */
                float *y = t.three_d ? Y + (b * t.Sq + i) * t.Hq * t.Dv + h * t.Dv
                                     : Y + ((b * t.Hq + h) * t.Sq + i) * t.Dv;
                for (int64_t e = 0; e < t.Dv; e++) {
                    double a = 0;
                    for (int64_t j = 0; j < t.T; j++) a += sc[j] * KV_ROW(V, PV, t.Dv, b, g, j)[e];
                    y[e] = (float)a;
                }
            }
        }
#undef KV_ROW
    return PP_OK;
}

/* ---- pp.AttentionGrad ------------------------------------------------------------------------ */

/* Per query row: the scores and probabilities p as kern_ATTENTION forms
 * them, then dV_j += p_j dy, dp_j = dy . v_j, ds_j = p_j (dp_j - sum p dp)
 * (the gradient where the mask is added: dS), through the softcap's tanh,
 * times scale into dQ (by k_j) and dK_j (by q). Sums in double, in a fixed
 * order. */
pp_status kern_ATTENTIONGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                             int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_ATTENTIONGRAD, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[7];
    for (int i = 1; i < n_in; i++) ti[i - 1] = pprt_tinfo_of(&in[i]);
    pp_attn t;
    PP_TRY(pp_attn_parse(attrs, ti, n_in - 1, &t, err));
    const float *dY = in[0].data, *Q = in[1].data, *K = in[2].data, *V = in[3].data;
    const float *PK = t.P ? in[5].data : NULL, *PV = t.P ? in[6].data : NULL;
    const int64_t *nonpad = t.has_nonpad ? in[7].data : NULL;
    float *dS = n_out > 3 && out[3].dtype != PP_UNDEFINED ? out[3].data : NULL;
    const int64_t nq = t.B * t.Hq * t.Sq * t.D, nk = t.B * t.Hkv * t.Skv * t.D, nv = t.B * t.Hkv * t.Skv * t.Dv;
    double *dq = calloc((size_t)(nq ? nq : 1), sizeof *dq), *dk = calloc((size_t)(nk ? nk : 1), sizeof *dk);
    double *dv = calloc((size_t)(nv ? nv : 1), sizeof *dv), *p = malloc((size_t)(t.T ? t.T : 1) * 3 * sizeof *p);
    if (!dq || !dk || !dv || !p) {
        free(dq), free(dk), free(dv), free(p);
        return PP_FAIL(err, PP_ENOMEM, "pp.AttentionGrad kernel: out of memory");
    }
    double *dp = p + t.T, *th = p + 2 * t.T;
    const int64_t group = t.Hq / t.Hkv;
    /* the offset of key/value j (>= P) of head g in batch b, in K/V's layout */
#define KV_OFF(DIM, b, g, j)                                                                    \
    (t.three_d ? ((b) * t.Skv + (j) - t.P) * t.Hkv * (DIM) + (g) * (DIM)                       \
               : (((b) * t.Hkv + (g)) * t.Skv + (j) - t.P) * (DIM))
#define KV_ROW(X, PX, DIM, b, g, j)                                                             \
    ((j) < t.P ? (PX) + (((b) * t.Hkv + (g)) * t.P + (j)) * (DIM) : (X) + KV_OFF(DIM, b, g, j))
    const pprt_tensor *m = t.has_mask ? &in[4] : NULL;
    for (int64_t b = 0; b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++) {
            const int64_t g = h / group;
            for (int64_t i = 0; i < t.Sq; i++) {
                const int64_t qo = t.three_d ? (b * t.Sq + i) * t.Hq * t.D + h * t.D
                                             : ((b * t.Hq + h) * t.Sq + i) * t.D;
                const int64_t yo = t.three_d ? (b * t.Sq + i) * t.Hq * t.Dv + h * t.Dv
                                             : ((b * t.Hq + h) * t.Sq + i) * t.Dv;
                const float *q = Q + qo, *dy = dY + yo;
                double mx = -INFINITY;
                for (int64_t j = 0; j < t.T; j++) {
                    const float *k = KV_ROW(K, PK, t.D, b, g, j);
                    double d = 0;
                    for (int64_t e = 0; e < t.D; e++) d += (double)q[e] * k[e];
                    float s = (float)(d * t.scale);
                    th[j] = 1.0;
                    if (t.softcap > 0) {
                        const float tt = tanhf(s / t.softcap);
                        s = t.softcap * tt;
                        th[j] = 1.0 - (double)tt * tt;
                    }
                    float bias = m ? mask_at(&t, m, b, h, i, j) : 0.0f;
                    if (t.causal && j >= t.P && j - t.P > i) bias += -INFINITY;
                    if (nonpad && j >= nonpad[b]) bias += -INFINITY;
                    s += bias;
                    p[j] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0;
                for (int64_t j = 0; j < t.T; j++) sum += p[j] = exp(p[j] - mx);
                double pdp = 0;
                for (int64_t j = 0; j < t.T; j++) {
                    p[j] /= sum;
                    const float *v = KV_ROW(V, PV, t.Dv, b, g, j);
                    double a = 0;
                    for (int64_t e = 0; e < t.Dv; e++) a += (double)dy[e] * v[e];
                    dp[j] = a;
                    pdp += p[j] * a;
                    if (j >= t.P && p[j] != 0) {
                        double *dvr = dv + KV_OFF(t.Dv, b, g, j);
                        for (int64_t e = 0; e < t.Dv; e++) dvr[e] += p[j] * dy[e];
                    }
                }
                float *dsr = dS ? dS + ((b * t.Hq + h) * t.Sq + i) * t.T : NULL;
                for (int64_t j = 0; j < t.T; j++) {
                    const double ds = p[j] * (dp[j] - pdp);
                    if (dsr) dsr[j] = (float)ds;
                    const double ds0 = ds * th[j] * t.scale;
                    if (ds0 == 0) continue;
                    const float *k = KV_ROW(K, PK, t.D, b, g, j);
                    double *dqr = dq + qo;
                    for (int64_t e = 0; e < t.D; e++) dqr[e] += ds0 * k[e];
                    if (j >= t.P) {
                        double *dkr = dk + KV_OFF(t.D, b, g, j);
                        for (int64_t e = 0; e < t.D; e++) dkr[e] += ds0 * q[e];
                    }
                }
            }
        }
#undef KV_ROW
#undef KV_OFF
    float *oq = out[0].data, *ok = out[1].data, *ov = out[2].data;
    for (int64_t i = 0; i < nq; i++) oq[i] = (float)dq[i];
    for (int64_t i = 0; i < nk; i++) ok[i] = (float)dk[i];
    for (int64_t i = 0; i < nv; i++) ov[i] = (float)dv[i];
    free(dq), free(dk), free(dv), free(p);
    return PP_OK;
}
