/* ref_rnn.c: reference kernels of the ops in ir/ops_rnn.def: LSTM, GRU and
 * RNN (shapes and attributes as ir/shape_rnn.h describes them, read by its
 * parser, the very one shape inference used).
 *
 * Same rules as the other reference kernels: single-threaded, deterministic
 * (every sum in an order fixed by the shapes), float32 data; the gates'
 * products with x and h accumulate in double, the states are float. Each
 * sample's sequence runs by itself: per direction and sample, step by step,
 * one matrix-vector product per gate row. The equations are ONNX's (gate
 * order i, o, f, c for LSTM, z, r, h for GRU; peepholes i, o, f), with what
 * the definition leaves open done as onnxruntime does it: `clip` bounds the
 * input of every activation but not the cell state that h() reads;
 * input_forget makes f = 1 - i; the reverse direction of a sample with
 * sequence_lens L runs over its steps L-1 .. 0; steps at or past L give Y = 0;
 * Y_h and Y_c are the state after the sample's last step, 0 where L = 0. */
#include "ref.h"
#include "../../ir/shape_rnn.h"
#include "rnn_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* sum of a[i] * b[i] in double, four lanes (an order fixed by n). */
static inline double dot(const float *restrict a, const float *restrict b, int64_t n) {
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) s[l] += (double)a[i + l] * b[i + l];
    for (; i < n; i++) s[0] += (double)a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

typedef struct rnn_run {
    pp_op op;
    const pp_rnn *r;
    pprt_rnn_io io;
    double *g;          /* [G*H]: the gates' sums */
    float *h, *c, *tmp; /* [H] each: the state, and GRU's r (.) h or RNN's new h */
} rnn_run;

/* One step of direction d with input x: the state h (and c) updated. */
static void step(const rnn_run *u, int d, const float *x) {
    const pp_rnn *r = u->r;
    const int64_t H = r->H, I = r->I, GH = r->G * H;
    const float *W = u->io.W + d * GH * I, *R = u->io.R + d * GH * H;
    const float *wb = u->io.B ? u->io.B + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
    const pp_rnn_act *f = r->act[d];
    const float cl = r->clip;
    float *h = u->h, *c = u->c, *t = u->tmp;
    double *g = u->g;
    /* the gates whose sum is x W^T + h R^T + biases (GRU's h gate: apart) */
    const int64_t full = u->op == PP_OP_GRU ? 2 * H : GH;
    for (int64_t j = 0; j < full; j++)
        g[j] = dot(W + j * I, x, I) + dot(R + j * H, h, H) + (wb ? (double)wb[j] + rb[j] : 0.0);
    if (u->op == PP_OP_LSTM) {
        const float *p = u->io.P ? u->io.P + d * 3 * H : NULL;
        for (int64_t k = 0; k < H; k++) {
            const float cp = c[k];
            const float pi = p ? p[k] * cp : 0.0f, pf = p ? p[2 * H + k] * cp : 0.0f;
            const float i = act(&f[0], clipf((float)g[k] + pi, cl));
            const float fg = r->input_forget ? 1.0f - i : act(&f[0], clipf((float)g[2 * H + k] + pf, cl));
            const float cc = act(&f[1], clipf((float)g[3 * H + k], cl));
            const float cn = fg * cp + i * cc;
            const float o = act(&f[0], clipf((float)g[H + k] + (p ? p[H + k] * cn : 0.0f), cl));
            c[k] = cn;
            h[k] = o * act(&f[2], cn);
        }
    } else if (u->op == PP_OP_GRU) {
        /* z in g[0, H), r in g[H, 2H); t: r, then r (.) h */
        for (int64_t k = 0; k < 2 * H; k++) g[k] = act(&f[0], clipf((float)g[k], cl));
        const float *Wh = W + 2 * H * I, *Rh = R + 2 * H * H;
        const float *wbh = wb ? wb + 2 * H : NULL, *rbh = rb ? rb + 2 * H : NULL;
        if (!r->linear_before_reset)
            for (int64_t k = 0; k < H; k++) t[k] = (float)g[H + k] * h[k];
        for (int64_t k = 0; k < H; k++) {
            const double xw = dot(Wh + k * I, x, I) + (wbh ? wbh[k] : 0.0f);
            const double rbk = rbh ? rbh[k] : 0.0f;
            const double hr = r->linear_before_reset
                                  ? g[H + k] * (dot(Rh + k * H, h, H) + rbk)
                                  : dot(Rh + k * H, t, H) + rbk;
            g[2 * H + k] = act(&f[1], clipf((float)(xw + hr), cl));
        }
        for (int64_t k = 0; k < H; k++) {
            const float z = (float)g[k];
            h[k] = (1.0f - z) * (float)g[2 * H + k] + z * h[k];
        }
    } else {
        for (int64_t k = 0; k < H; k++) t[k] = act(&f[0], clipf((float)g[k], cl));
        memcpy(h, t, (size_t)H * sizeof(float));
    }
}

/* Direction d of sample b. */
static void run_seq(const rnn_run *u, int d, int64_t b) {
    const pp_rnn *r = u->r;
    const pprt_rnn_io *io = &u->io;
    const int64_t S = r->S, H = r->H, I = r->I, L = rnn_len(r, io, b), st = rnn_state_at(r, d, b);
    const bool rev = r->reverse || d == 1;
    const size_t hb = (size_t)H * sizeof(float);
    if (io->h0 && L > 0) memcpy(u->h, io->h0 + st, hb);
    else memset(u->h, 0, hb);
    if (io->c0 && L > 0) memcpy(u->c, io->c0 + st, hb);
    else memset(u->c, 0, hb);
    for (int64_t s = 0; s < S; s++) {
        const int64_t t = rnn_time(s, L, rev);
        float *y = io->Y ? io->Y + rnn_y_at(r, t, d, b) : NULL;
        if (s >= L) {
            if (y) memset(y, 0, hb);
            continue;
        }
        step(u, d, io->X + rnn_x_row(r, t, b) * I);
        if (y) memcpy(y, u->h, hb);
    }
    if (io->Yh) memcpy(io->Yh + st, u->h, hb);
    if (io->Yc) memcpy(io->Yc + st, u->c, hb);
}

/* The forward op's first n_in inputs (a gradient op's too, which starts
 * with them): attributes parsed, sequence_lens checked, the inputs' bytes. */
static pp_status rnn_inputs(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, pp_rnn *r, pprt_rnn_io *io,
                            pp_err *err) {
    pp_tinfo ti[8];
    for (int i = 0; i < n_in && i < 8; i++) ti[i] = pprt_tinfo_of(&in[i]);
    PP_TRY(pp_rnn_parse(op, attrs, ti, n_in, r, err));
    const int32_t *lens = r->has_lens ? in[4].data : NULL;
    for (int64_t b = 0; lens && b < r->N; b++)
        if (lens[b] < 0 || lens[b] > r->S)
            return PP_FAIL(err, PP_EINVAL, "input sequence_lens[%lld] = %lld is outside [0, %lld] "
                           "(the sequence length)", (long long)b, (long long)lens[b], (long long)r->S);
    *io = (pprt_rnn_io){
        .X = in[0].data, .W = in[1].data, .R = in[2].data, .B = r->has_b ? in[3].data : NULL, .lens = lens,
        .h0 = r->has_h0 ? in[5].data : NULL, .c0 = r->has_c0 ? in[6].data : NULL,
        .P = r->has_p && n_in > 7 ? in[7].data : NULL,
    };
    return PP_OK;
}

pp_status pprt_rnn_read(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, const pprt_tensor *out, int n_out,
                        pp_rnn *r, pprt_rnn_io *io, pp_err *err) {
    PP_TRY(pprt_check_outputs(op, attrs, in, n_in, out, n_out, err));
    PP_TRY(rnn_inputs(op, attrs, in, n_in, r, io, err));
#define OUT(k) (n_out > (k) && out[k].dtype != PP_UNDEFINED ? (float *)out[k].data : NULL)
    io->Y = OUT(0), io->Yh = OUT(1), io->Yc = OUT(2);
#undef OUT
    return PP_OK;
}

static pp_status kern_rnn(pp_op op, pp_attrs attrs, const pprt_tensor *in,
                          int n_in, pprt_tensor *out, int n_out, pprt_scratch *scratch,
                          pp_err *err) {
    const char *name = pp_op_table[op].name;
    pp_rnn r;
    pprt_rnn_io io;
    PP_TRY(pprt_rnn_read(op, attrs, in, n_in, out, n_out, &r, &io, err));
    const int64_t GH = r.G * r.H;
    size_t nb;
    if (pp_mul_ovf((size_t)GH, sizeof(double), &nb) ||
        nb > SIZE_MAX - 3 * (size_t)r.H * sizeof(float))
        return PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", name);
    double *g = pprt_scratch_get(scratch, nb + 3 * (size_t)r.H * sizeof(float));
    if (!g) return PP_FAIL(err, PP_ENOMEM, "%s kernel: out of memory", name);
    float *h = (float *)(g + GH);
    const rnn_run u = {.op = op, .r = &r, .io = io, .g = g, .h = h, .c = h + r.H, .tmp = h + 2 * r.H};
    for (int d = 0; d < r.D; d++)
        for (int64_t b = 0; b < r.N; b++) run_seq(&u, d, b);
    return PP_OK;
}

pp_status kern_LSTM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                    pprt_scratch *scratch, pp_err *err) {
    return kern_rnn(PP_OP_LSTM, attrs, in, n_in, out, n_out, scratch, err);
}

pp_status kern_GRU(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    return kern_rnn(PP_OP_GRU, attrs, in, n_in, out, n_out, scratch, err);
}

pp_status kern_RNN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    return kern_rnn(PP_OP_RNN, attrs, in, n_in, out, n_out, scratch, err);
}

/* ---- pp.LSTMGrad ------------------------------------------------------------------------------ */

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* What the three gradient kernels sum, in double: dX, dW, dR over G gate
 * rows a direction, and the bias's gradient: G values a direction, which
 * both halves (Wb, Rb) take, or 2 G where the halves differ (apart). */
typedef struct rnn_sums {
    double *dx, *dw, *dr, *db;
    int64_t nx, nw, nr, nb, G;
    bool apart;
} rnn_sums;

static bool sums_alloc(rnn_sums *u, const pp_rnn *r, int64_t G, bool apart) {
    const int64_t nb = r->D * G * (apart ? 2 : 1);
    *u = (rnn_sums){.nx = r->S * r->N * r->I, .nw = r->D * G * r->I, .nr = r->D * G * r->H, .nb = nb, .G = G,
                    .apart = apart};
    u->dx = calloc((size_t)(u->nx ? u->nx : 1), sizeof *u->dx), u->dw = calloc((size_t)(u->nw ? u->nw : 1), sizeof *u->dw);
    u->dr = calloc((size_t)(u->nr ? u->nr : 1), sizeof *u->dr), u->db = calloc((size_t)(nb > 0 ? nb : 1), sizeof *u->db);
    return u->dx && u->dw && u->dr && u->db;
}

/* dX, dW, dR, dB out as float (outputs 0..3); a bias gradient summed once a
 * direction goes to both of the direction's halves. */
static void sums_write(const rnn_sums *u, int D, pprt_tensor *out) {
    float *ox = out[0].data, *ow = out[1].data, *orr = out[2].data, *ob = out[3].data;
    for (int64_t i = 0; i < u->nx; i++) ox[i] = (float)u->dx[i];
    for (int64_t i = 0; i < u->nw; i++) ow[i] = (float)u->dw[i];
    for (int64_t i = 0; i < u->nr; i++) orr[i] = (float)u->dr[i];
    if (u->apart)
        for (int64_t i = 0; i < u->nb; i++) ob[i] = (float)u->db[i];
    else
        for (int d = 0; d < D; d++)
            for (int64_t j = 0; j < u->G; j++)
                ob[d * 2 * u->G + j] = ob[d * 2 * u->G + u->G + j] = (float)u->db[d * u->G + j];
}

static void sums_free(rnn_sums *u) { free(u->dx), free(u->dw), free(u->dr), free(u->db); }

/* Back through time, per direction and sample: the sequence recomputed as
 * step() computes it (i, o, f, c~ and the states kept per step), then from
 * the last step back: dh = dY_t + dh', dc = dc' + dh o (1 - tanh(c)^2), the
 * gates' sums' gradients da (order i, o, f, c) into dW (by x), dR (by h
 * before the step), dB (both halves), dX (W^T da) and the step's dh' = R^T da,
 * dc' = dc f. Sums in double, in a fixed order; the states' gradients at the
 * start go to dinitial_h, dinitial_c. */
pp_status kern_LSTMGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                        pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_LSTMGRAD, attrs, in, n_in, out, n_out, err));
    pp_rnn r;
    pprt_rnn_io io;
    PP_TRY(rnn_inputs(PP_OP_LSTM, attrs, in, n_in < 7 ? n_in : 7, &r, &io, err));
#define GRAD_IN(k) (n_in > (k) && in[k].dtype != PP_UNDEFINED ? (const float *)in[k].data : NULL)
    const float *dY = GRAD_IN(7), *dYh = GRAD_IN(8), *dYc = GRAD_IN(9);
#undef GRAD_IN
    const float *X = io.X, *W = io.W, *R = io.R, *B = io.B, *h0 = io.h0, *c0 = io.c0;
    const int32_t *lens = io.lens;
    const int64_t S = r.S, N = r.N, I = r.I, H = r.H, GH = 4 * H;
    rnn_sums u;
    const bool sums = sums_alloc(&u, &r, GH, false);
    double *dx = u.dx, *dw = u.dw, *dr = u.dr, *db = u.db;
    /* per step: i, o, f, c~, c, h before, c before (7 H) */
    float *keep = malloc((size_t)(S ? S : 1) * 7 * (size_t)H * sizeof *keep);
    double *da = malloc((size_t)(GH + 2 * H) * sizeof *da), *dh = da + GH, *dc = dh + H;
    double *g = malloc((size_t)GH * sizeof *g);
    float *hs = malloc((size_t)(H > 0 ? 2 * H : 1) * sizeof *hs), *cs = hs + H;
    float *oh = out[4].data, *oc = out[5].data;
    pp_status st = PP_OK;
    if (!sums || !keep || !da || !g || !hs) {
        st = PP_FAIL(err, PP_ENOMEM, "pp.LSTMGrad kernel: out of memory");
        goto done;
    }
    for (int d = 0; d < r.D; d++) {
        const float *Wd = W + d * GH * I, *Rd = R + d * GH * H;
        const float *wb = B ? B + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        const bool rev = r.reverse || d == 1;
        for (int64_t b = 0; b < N; b++) {
            const int64_t L = lens ? lens[b] : S, so = rnn_state_at(&r, d, b);
            /* forward */
            for (int64_t k = 0; k < H; k++) {
                hs[k] = h0 && L > 0 ? h0[so + k] : 0.0f;
                cs[k] = c0 && L > 0 ? c0[so + k] : 0.0f;
            }
            for (int64_t s = 0; s < L; s++) {
                const float *x = X + rnn_x_row(&r, rnn_time(s, L, rev), b) * I;
                float *kp = keep + s * 7 * H;
                memcpy(kp + 5 * H, hs, (size_t)H * sizeof *hs);
                memcpy(kp + 6 * H, cs, (size_t)H * sizeof *cs);
                for (int64_t j = 0; j < GH; j++)
                    g[j] = dot(Wd + j * I, x, I) + dot(Rd + j * H, hs, H) + (wb ? (double)wb[j] + rb[j] : 0.0);
                for (int64_t k = 0; k < H; k++) {
                    const float i = sigm((float)g[k]), o = sigm((float)g[H + k]), f = sigm((float)g[2 * H + k]);
                    const float cc = tanhf((float)g[3 * H + k]), cn = f * cs[k] + i * cc;
                    kp[k] = i, kp[H + k] = o, kp[2 * H + k] = f, kp[3 * H + k] = cc, kp[4 * H + k] = cn;
                    cs[k] = cn;
                    hs[k] = o * tanhf(cn);
                }
            }
            /* backward */
            for (int64_t k = 0; k < H; k++) {
                dh[k] = dYh && L > 0 ? dYh[so + k] : 0.0;
                dc[k] = dYc && L > 0 ? dYc[so + k] : 0.0;
            }
            for (int64_t s = L - 1; s >= 0; s--) {
                const int64_t t = rnn_time(s, L, rev);
                const float *x = X + rnn_x_row(&r, t, b) * I;
                const float *kp = keep + s * 7 * H, *hp = kp + 5 * H, *cp = kp + 6 * H;
                if (dY)
                    for (int64_t k = 0; k < H; k++) dh[k] += dY[rnn_y_at(&r, t, d, b) + k];
                for (int64_t k = 0; k < H; k++) {
                    const double i = kp[k], o = kp[H + k], f = kp[2 * H + k], cc = kp[3 * H + k];
                    const double tc = tanh((double)kp[4 * H + k]);
                    const double dct = dc[k] + dh[k] * o * (1 - tc * tc);
                    da[k] = dct * cc * i * (1 - i);
                    da[H + k] = dh[k] * tc * o * (1 - o);
                    da[2 * H + k] = dct * cp[k] * f * (1 - f);
                    da[3 * H + k] = dct * i * (1 - cc * cc);
                    dc[k] = dct * f;
                }
                double *dxr = dx + rnn_x_row(&r, t, b) * I;
                for (int64_t j = 0; j < GH; j++) {
                    const double a = da[j];
                    double *dwr = dw + (d * GH + j) * I, *drr = dr + (d * GH + j) * H;
                    const float *wr = Wd + j * I;
                    for (int64_t e = 0; e < I; e++) dwr[e] += a * x[e], dxr[e] += a * wr[e];
                    for (int64_t e = 0; e < H; e++) drr[e] += a * hp[e];
                    db[d * GH + j] += a;
                }
                for (int64_t e = 0; e < H; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < GH; j++) acc += da[j] * Rd[j * H + e];
                    dh[e] = acc;
                }
            }
            for (int64_t k = 0; k < H; k++) oh[so + k] = (float)dh[k], oc[so + k] = (float)dc[k];
        }
    }
    sums_write(&u, r.D, out);
done:
    sums_free(&u), free(keep), free(da), free(g), free(hs);
    return st;
}

/* ---- pp.GRUGrad ------------------------------------------------------------------------------- */

/* One GRU step for pp.GRUGrad from state hs (updated), keeping z, r, h~,
 * the state before and R_h h + Rb_h in kp[0..5H); q, g: scratch. */
static void gru_step(const pp_rnn *r, const float *x, const float *Wd, const float *Rd, const float *wb,
                     const float *rb, float *hs, float *q, double *g, float *kp) {
    const int64_t H = r->H, I = r->I;
    memcpy(kp + 3 * H, hs, (size_t)H * sizeof *hs);
    for (int64_t j = 0; j < 2 * H; j++)
        g[j] = dot(Wd + j * I, x, I) + dot(Rd + j * H, hs, H) + (wb ? (double)wb[j] + rb[j] : 0.0);
    for (int64_t k = 0; k < 2 * H; k++) kp[k] = sigm((float)g[k]); /* z, r */
    for (int64_t k = 0; k < H; k++) q[k] = kp[H + k] * hs[k];
    for (int64_t k = 0; k < H; k++) {
        const double xw = dot(Wd + (2 * H + k) * I, x, I) + (wb ? wb[2 * H + k] : 0.0f);
        const double rbk = rb ? rb[2 * H + k] : 0.0f;
        const double u = dot(Rd + (2 * H + k) * H, hs, H) + rbk;
        const double hr = r->linear_before_reset ? kp[H + k] * u : dot(Rd + (2 * H + k) * H, q, H) + rbk;
        kp[4 * H + k] = (float)u;
        kp[2 * H + k] = tanhf((float)(xw + hr));
    }
    for (int64_t k = 0; k < H; k++) hs[k] = (1.0f - kp[k]) * kp[2 * H + k] + kp[k] * hs[k];
}

/* As pp.LSTMGrad, for GRU (gates z, r, h): per step z, r, h~, the state
 * before and (linear_before_reset) R_h h + Rb_h kept; back: dz = dh (h -
 * h~), dh~ = dh (1 - z), the h gate's sum's gradient through tanh, then
 * r's through R_h (r (.) h, or r (.) (R_h h + Rb_h)), z's and r's through
 * sigmoid, into dW, dR, dB, dX and the step's dh. */
pp_status kern_GRUGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                       pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_GRUGRAD, attrs, in, n_in, out, n_out, err));
    pp_rnn r;
    pprt_rnn_io io;
    PP_TRY(rnn_inputs(PP_OP_GRU, attrs, in, n_in < 6 ? n_in : 6, &r, &io, err));
    const float *dY = n_in > 6 && in[6].dtype != PP_UNDEFINED ? in[6].data : NULL;
    const float *dYh = n_in > 7 && in[7].dtype != PP_UNDEFINED ? in[7].data : NULL;
    const float *X = io.X, *W = io.W, *R = io.R, *B = io.B, *h0 = io.h0;
    const int32_t *lens = io.lens;
    const int64_t S = r.S, N = r.N, I = r.I, H = r.H, GH = 3 * H;
    const bool lbr = r.linear_before_reset;
    rnn_sums u;
    const bool sums = sums_alloc(&u, &r, GH, true); /* Wb_h and Rb_h differ under linear_before_reset */
    double *dx = u.dx, *dw = u.dw, *dr = u.dr, *db = u.db;
    float *keep = malloc((size_t)(S ? S : 1) * 5 * (size_t)(H > 0 ? H : 1) * sizeof *keep); /* z, r, h~, h, u */
    double *da = malloc((size_t)(GH + 3 * H + 1) * sizeof *da), *dh = da + GH, *du = dh + H, *dn = du + H;
    double *g = malloc((size_t)(GH + 1) * sizeof *g);
    float *hs = malloc((size_t)(H > 0 ? 2 * H : 1) * sizeof *hs), *q = hs + H;
    float *oh = out[4].data;
    pp_status st = PP_OK;
    if (!sums || !keep || !da || !g || !hs) {
        st = PP_FAIL(err, PP_ENOMEM, "pp.GRUGrad kernel: out of memory");
        goto done;
    }
    for (int d = 0; d < r.D; d++) {
        const float *Wd = W + d * GH * I, *Rd = R + d * GH * H;
        const float *wb = B ? B + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        const bool rev = r.reverse || d == 1;
        for (int64_t b = 0; b < N; b++) {
            const int64_t L = lens ? lens[b] : S, so = rnn_state_at(&r, d, b);
            for (int64_t k = 0; k < H; k++) hs[k] = h0 && L > 0 ? h0[so + k] : 0.0f;
            for (int64_t s = 0; s < L; s++)
                gru_step(&r, X + rnn_x_row(&r, rnn_time(s, L, rev), b) * I, Wd, Rd, wb, rb, hs, q, g,
                         keep + s * 5 * H);
            for (int64_t k = 0; k < H; k++) dh[k] = dYh && L > 0 ? dYh[so + k] : 0.0;
            for (int64_t s = L - 1; s >= 0; s--) {
                const int64_t t = rnn_time(s, L, rev);
                const float *x = X + rnn_x_row(&r, t, b) * I, *kp = keep + s * 5 * H, *hp = kp + 3 * H;
                if (dY)
                    for (int64_t k = 0; k < H; k++) dh[k] += dY[rnn_y_at(&r, t, d, b) + k];
                for (int64_t k = 0; k < H; k++) {
                    const double z = kp[k], hn = kp[2 * H + k];
                    da[k] = dh[k] * (hp[k] - hn) * z * (1 - z);      /* z's sum */
                    da[2 * H + k] = dh[k] * (1 - z) * (1 - hn * hn); /* h's sum */
                    dn[k] = dh[k] * z;                               /* dh before the step, directly */
                }
                /* r: through the h gate's recurrent part */
                for (int64_t k = 0; k < H; k++) q[k] = kp[H + k] * hp[k];
                for (int64_t k = 0; k < H; k++) du[k] = 0;
                if (lbr) {
                    for (int64_t k = 0; k < H; k++) {
                        const double rr = kp[H + k];
                        da[H + k] = da[2 * H + k] * kp[4 * H + k] * rr * (1 - rr);
                        du[k] = da[2 * H + k] * rr; /* the gradient of R_h h + Rb_h */
                    }
                } else {
                    for (int64_t e = 0; e < H; e++) { /* d(r (.) h)_e = sum_k da_h[k] R_h[k, e] */
                        double acc = 0;
                        for (int64_t k = 0; k < H; k++) acc += da[2 * H + k] * Rd[(2 * H + k) * H + e];
                        const double rr = kp[H + e];
                        da[H + e] = acc * hp[e] * rr * (1 - rr);
                        dn[e] += acc * rr;
                    }
                }
                double *dxr = dx + rnn_x_row(&r, t, b) * I;
                for (int64_t j = 0; j < GH; j++) {
                    const double a = da[j];
                    double *dwr = dw + (d * GH + j) * I, *drr = dr + (d * GH + j) * H;
                    const float *wr = Wd + j * I;
                    for (int64_t e = 0; e < I; e++) dwr[e] += a * x[e], dxr[e] += a * wr[e];
                    db[d * 2 * GH + j] += a;
                    if (j < 2 * H) {
                        for (int64_t e = 0; e < H; e++) drr[e] += a * hp[e];
                        db[d * 2 * GH + GH + j] += a;
                    } else if (lbr) {
                        const double c = du[j - 2 * H];
                        for (int64_t e = 0; e < H; e++) drr[e] += c * hp[e];
                        db[d * 2 * GH + GH + j] += c;
                    } else {
                        for (int64_t e = 0; e < H; e++) drr[e] += a * q[e];
                        db[d * 2 * GH + GH + j] += a;
                    }
                }
                for (int64_t e = 0; e < H; e++) {
                    double acc = dn[e];
                    for (int64_t j = 0; j < 2 * H; j++) acc += da[j] * Rd[j * H + e];
                    if (lbr)
                        for (int64_t k = 0; k < H; k++) acc += du[k] * Rd[(2 * H + k) * H + e];
                    dh[e] = acc;
                }
            }
            for (int64_t k = 0; k < H; k++) oh[so + k] = (float)dh[k];
        }
    }
    sums_write(&u, r.D, out);
done:
    sums_free(&u), free(keep), free(da), free(g), free(hs);
    return st;
}

/* ---- pp.RNNGrad ------------------------------------------------------------------------------- */

/* As pp.GRUGrad, for RNN: h' = f(W x + R h + Wb + Rb), f Tanh or Relu, the
 * states kept per step; back: da = dh f'(h'), into dW, dR, dB (both
 * halves), dX and the step's dh = R^T da. */
pp_status kern_RNNGRAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                       pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_check_outputs(PP_OP_RNNGRAD, attrs, in, n_in, out, n_out, err));
    pp_rnn r;
    pprt_rnn_io io;
    PP_TRY(rnn_inputs(PP_OP_RNN, attrs, in, n_in < 6 ? n_in : 6, &r, &io, err));
    const float *dY = n_in > 6 && in[6].dtype != PP_UNDEFINED ? in[6].data : NULL;
    const float *dYh = n_in > 7 && in[7].dtype != PP_UNDEFINED ? in[7].data : NULL;
    const float *X = io.X, *W = io.W, *R = io.R, *B = io.B, *h0 = io.h0;
    const int32_t *lens = io.lens;
    const int64_t S = r.S, N = r.N, I = r.I, H = r.H;
    rnn_sums u;
    const bool sums = sums_alloc(&u, &r, H, false);
    double *dx = u.dx, *dw = u.dw, *dr = u.dr, *db = u.db;
    float *keep = malloc((size_t)(S + 1) * (size_t)(H > 0 ? H : 1) * sizeof *keep); /* the states, h0 first */
    double *da = malloc((size_t)(H > 0 ? 2 * H : 1) * sizeof *da), *dh = da + H;
    float *oh = out[4].data;
    pp_status st = PP_OK;
    if (!sums || !keep || !da) {
        st = PP_FAIL(err, PP_ENOMEM, "pp.RNNGrad kernel: out of memory");
        goto done;
    }
    for (int d = 0; d < r.D; d++) {
        const float *Wd = W + d * H * I, *Rd = R + d * H * H;
        const float *wb = B ? B + d * 2 * H : NULL, *rb = wb ? wb + H : NULL;
        const bool rev = r.reverse || d == 1, relu = r.act[d][0].fn == PP_RNN_RELU;
        for (int64_t b = 0; b < N; b++) {
            const int64_t L = lens ? lens[b] : S, so = rnn_state_at(&r, d, b);
            for (int64_t k = 0; k < H; k++) keep[k] = h0 && L > 0 ? h0[so + k] : 0.0f;
            for (int64_t s = 0; s < L; s++) {
                const float *x = X + rnn_x_row(&r, rnn_time(s, L, rev), b) * I, *hp = keep + s * H;
                float *hn = keep + (s + 1) * H;
                for (int64_t j = 0; j < H; j++) {
                    const float v = (float)(dot(Wd + j * I, x, I) + dot(Rd + j * H, hp, H) +
                                            (wb ? (double)wb[j] + rb[j] : 0.0));
                    hn[j] = relu ? (v > 0.0f ? v : 0.0f) : tanhf(v);
                }
            }
            for (int64_t k = 0; k < H; k++) dh[k] = dYh && L > 0 ? dYh[so + k] : 0.0;
            for (int64_t s = L - 1; s >= 0; s--) {
                const int64_t t = rnn_time(s, L, rev);
                const float *x = X + rnn_x_row(&r, t, b) * I, *hp = keep + s * H, *hn = hp + H;
                if (dY)
                    for (int64_t k = 0; k < H; k++) dh[k] += dY[rnn_y_at(&r, t, d, b) + k];
                for (int64_t k = 0; k < H; k++)
                    da[k] = dh[k] * (relu ? (hn[k] > 0.0f ? 1.0 : 0.0) : 1.0 - (double)hn[k] * hn[k]);
                double *dxr = dx + rnn_x_row(&r, t, b) * I;
                for (int64_t j = 0; j < H; j++) {
                    const double a = da[j];
                    double *dwr = dw + (d * H + j) * I, *drr = dr + (d * H + j) * H;
                    const float *wr = Wd + j * I;
                    for (int64_t e = 0; e < I; e++) dwr[e] += a * x[e], dxr[e] += a * wr[e];
                    for (int64_t e = 0; e < H; e++) drr[e] += a * hp[e];
                    db[d * H + j] += a;
                }
                for (int64_t e = 0; e < H; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < H; j++) acc += da[j] * Rd[j * H + e];
                    dh[e] = acc;
                }
            }
            for (int64_t k = 0; k < H; k++) oh[so + k] = (float)dh[k];
        }
    }
    sums_write(&u, r.D, out);
done:
    sums_free(&u), free(keep), free(da);
    return st;
}
