/* rnn_common.h: what the reference kernels of LSTM, GRU and RNN
 * (ref_rnn.c) and the matrix-product ones (rnn_gemm.c) share: how the
 * node's tensors are read and laid out, the activations and the clip, so
 * both apply the same function to the same sum at the same place. */
#ifndef PPRT_RNN_COMMON_H
#define PPRT_RNN_COMMON_H

#include <math.h>

#include "../../ir/shape_rnn.h"
#include "../kernels.h"

/* The node's tensors (ir/shape_rnn.h); NULL for an absent one. */
typedef struct pprt_rnn_io {
    const float *X, *W, *R, *B, *h0, *c0, *P;
    const int32_t *lens;
    float *Y, *Yh, *Yc;
} pprt_rnn_io;

/* Node `op`'s outputs checked, its attributes parsed into *r, every
 * sequence_lens value checked against the sequence length (PP_EINVAL
 * naming it) and the tensors' bytes in *io (ref_rnn.c). */
pp_status pprt_rnn_read(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, const pprt_tensor *out, int n_out,
                        pp_rnn *r, pprt_rnn_io *io, pp_err *err);

/* Sample b's sequence length. */
static inline int64_t rnn_len(const pp_rnn *r, const pprt_rnn_io *io, int64_t b) { return io->lens ? io->lens[b] : r->S; }
/* Step s of sample b's sequence of length L in a direction (rev: reverse)
 * is its time index L-1-s; steps at or past L keep their own index. */
static inline int64_t rnn_time(int64_t s, int64_t L, bool rev) { return s >= L ? s : rev ? L - 1 - s : s; }
/* X's row of time t, sample b ([S, N, I]; layout 1: [N, S, I]). */
static inline int64_t rnn_x_row(const pp_rnn *r, int64_t t, int64_t b) { return r->layout ? b * r->S + t : t * r->N + b; }
/* Y's offset of (t, d, b) ([S, D, N, H]; layout 1: [N, S, D, H]). */
static inline int64_t rnn_y_at(const pp_rnn *r, int64_t t, int d, int64_t b) {
    return (r->layout ? (b * r->S + t) * r->D + d : (t * r->D + d) * r->N + b) * r->H;
}
/* The states' offset of (d, b) ([D, N, H]; layout 1: [N, D, H]). */
static inline int64_t rnn_state_at(const pp_rnn *r, int d, int64_t b) {
    return (r->layout ? b * r->D + d : d * r->N + b) * r->H;
}

static inline float act(const pp_rnn_act *a, float x) {
    switch (a->fn) {
    case PP_RNN_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case PP_RNN_TANH: return tanhf(x);
    case PP_RNN_RELU: return x > 0.0f ? x : 0.0f;
    case PP_RNN_HARDSIGMOID: {
        const float y = a->alpha * x + a->beta;
        return y > 1.0f ? 1.0f : y > 0.0f ? y : 0.0f;
    }
    case PP_RNN_AFFINE: return a->alpha * x + a->beta;
    case PP_RNN_LEAKYRELU: return x >= 0.0f ? x : a->alpha * x;
    case PP_RNN_THRESHOLDEDRELU: return x > a->alpha ? x : 0.0f;
    case PP_RNN_SCALEDTANH: return a->alpha * tanhf(a->beta * x);
    case PP_RNN_ELU: return x >= 0.0f ? x : a->alpha * expm1f(x);
    case PP_RNN_SOFTSIGN: return x / (1.0f + fabsf(x));
    case PP_RNN_SOFTPLUS: return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    }
    return x;
}

/* x bounded to [-c, c] (NaN stays NaN; c = INFINITY: no bound). */
static inline float clipf(float x, float c) { return x > c ? c : x < -c ? -c : x; }

#endif
