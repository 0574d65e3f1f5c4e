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

pp_status pprt_rnn_read(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, const pprt_tensor *out, int n_out,
                        pp_rnn *r, pprt_rnn_io *io, pp_err *err) {
    PP_TRY(pprt_check_outputs(op, attrs, in, n_in, out, n_out, err));
    pp_tinfo ti[8];
    for (int i = 0; i < n_in && i < 8; i++) ti[i] = pprt_tinfo_of(&in[i]);
    PP_TRY(pp_rnn_parse(op, attrs, ti, n_in, r, err));
    const int32_t *lens = r->has_lens ? in[4].data : NULL;
    for (int64_t b = 0; lens && b < r->N; b++)
        if (lens[b] < 0 || lens[b] > r->S)
            return PP_FAIL(err, PP_EINVAL, "input sequence_lens[%lld] = %lld is outside [0, %lld] "
                           "(the sequence length)", (long long)b, (long long)lens[b], (long long)r->S);
#define OUT(k) (n_out > (k) && out[k].dtype != PP_UNDEFINED ? (float *)out[k].data : NULL)
    *io = (pprt_rnn_io){
        .X = in[0].data, .W = in[1].data, .R = in[2].data, .B = r->has_b ? in[3].data : NULL, .lens = lens,
        .h0 = r->has_h0 ? in[5].data : NULL, .c0 = r->has_c0 ? in[6].data : NULL, .P = r->has_p ? in[7].data : NULL,
        .Y = OUT(0), .Yh = OUT(1), .Yc = OUT(2),
    };
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
