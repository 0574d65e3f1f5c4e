/* rnn_act.h: the activations and the clip of LSTM, GRU and RNN, shared by
 * the reference kernels (ref_rnn.c) and the matrix-product ones
 * (rnn_gemm.c), so both apply the same function to the same sum. */
#ifndef PPRT_RNN_ACT_H
#define PPRT_RNN_ACT_H

#include <math.h>

#include "../../ir/shape_rnn.h"

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
