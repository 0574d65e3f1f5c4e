/* shape_rnn.h: the parser of LSTM's, GRU's and RNN's inputs and attributes,
 * shared by shape inference (ir/shape_rnn.c) and the reference kernels
 * (runtime/cpu/ref_rnn.c), so the two read them the same way. Internal to
 * ir/ and runtime/cpu/. */
#ifndef PP_SHAPE_RNN_H
#define PP_SHAPE_RNN_H

#include "base.h"

/* The activation functions ONNX's recurrent ops name (attribute
 * activations), with their alpha and beta. */
typedef enum pp_rnn_fn {
    PP_RNN_SIGMOID, PP_RNN_TANH, PP_RNN_RELU, PP_RNN_HARDSIGMOID, PP_RNN_AFFINE,
    PP_RNN_LEAKYRELU, PP_RNN_THRESHOLDEDRELU, PP_RNN_SCALEDTANH, PP_RNN_ELU, PP_RNN_SOFTSIGN,
    PP_RNN_SOFTPLUS,
} pp_rnn_fn;

typedef struct pp_rnn_act {
    pp_rnn_fn fn;
    float alpha, beta;
} pp_rnn_act;

/* LSTM(X, W, R[, B, sequence_lens, initial_h, initial_c, P]) -> Y, Y_h, Y_c;
 * GRU and RNN the same without initial_c, P and Y_c. G gates (LSTM 4: i, o,
 * f, c; GRU 3: z, r, h; RNN 1) of H values each:
 *   X [S, N, I] (layout 1: [N, S, I]), W [D, G*H, I], R [D, G*H, H],
 *   B [D, 2*G*H] (W's biases, then R's), sequence_lens [N] int32,
 *   initial_h, initial_c [D, N, H] (layout 1: [N, D, H]), P [D, 3*H] (i, o, f);
 *   Y [S, D, N, H] (layout 1: [N, S, D, H]), Y_h, Y_c as initial_h.
 * D = 2 directions (forward, then reverse) when bidirectional, else 1.
 * act[d][k]: direction d's activations (f, g, h for LSTM; f, g for GRU; f
 * for RNN), as onnxruntime reads them: a list of one direction's serves
 * both, and activation_alpha / activation_beta are consumed in order by the
 * functions that take them, the rest of ONNX's defaults for that op. */
typedef struct pp_rnn {
    int G, D, n_act;
    int64_t S, N, I, H;
    bool layout, reverse;                  /* reverse: direction "reverse" (D = 1) */
    bool has_b, has_lens, has_h0, has_c0, has_p;
    bool input_forget, linear_before_reset;
    float clip;                            /* INFINITY: no clip */
    pp_rnn_act act[2][3];
} pp_rnn;

pp_status pp_rnn_parse(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_rnn *r, pp_err *err);

#endif
