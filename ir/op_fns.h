/* op_fns.h: prototypes of the per-op functions named by ops.def rows, so the
 * functions can live in one file per op family (shape_*.c / cost in the same
 * files, kernels in runtime/cpu/ref_*.c) while the tables are built in one
 * place. Internal to ir/ and runtime/cpu/ (passes/batch.c uses the shared
 * helpers below). */
#ifndef PP_OP_FNS_H
#define PP_OP_FNS_H

#include "base.h"

/* Shape and type inference: fill out[0..n_out) (dtype and shape) from the
 * inputs (in[i].dtype == PP_UNDEFINED: absent optional input; in[i].data:
 * the bytes of a constant input, else NULL) and attributes. Inputs have
 * known, non-negative dims; counts are within the op table's bounds. */
typedef pp_status pp_shape_fn(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                              pp_err *err);
/* FLOPs of one node (an estimate of work for the cost model). */
typedef double pp_flops_fn(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                           int n_out);

#define PP_OP(e, name, mi, ma, no, tr) pp_shape_fn shape_##e; pp_flops_fn flops_##e;
#include "ops.def"
#undef PP_OP

/* Shared helpers for shape functions (ir/shape.c). */
/* Whether a BatchNormalization node normalizes with the statistics of its
 * input (training) rather than its input_mean and input_var: training_mode=1
 * from opset 14; before it, any output beyond Y (the running and saved
 * statistics exist only in training). Every backend asks this one function. */
bool pp_bn_training(pp_attrs a, int n_out);
/* NumPy multidirectional broadcasting of a and b into o. */
pp_status pp_broadcast(const pp_shape *a, const pp_shape *b, pp_shape *o, pp_err *err);
/* An elementwise loop over merged dims: appends the output's next dim d, along which input q
 * varies iff f[q] (q < k), to the *nd merged dims dim[] and var[q][]: a dim of 1 is dropped,
 * one along which the inputs vary as along the last merged dim multiplies it. */
static inline void pp_bcast_merge(int64_t d, const bool *f, int k, int64_t *dim,
                                  bool (*var)[PP_MAX_DIMS], int *nd) {
    if (d == 1) return;
    bool same = *nd > 0;
    for (int q = 0; q < k && same; q++) same = var[q][*nd - 1] == f[q];
    if (same) {
        dim[*nd - 1] *= d;
        return;
    }
    dim[*nd] = d;
    for (int q = 0; q < k; q++) var[q][*nd] = f[q];
    (*nd)++;
}
/* Normalize axis in [-rank, rank) to [0, rank); fails naming the attribute. */
pp_status pp_norm_axis(int64_t axis, int rank, const char *what, int *out, pp_err *err);
/* A normalization over the dims of x from attribute 'axis' (default -1) on:
 * that axis, outer rows of inner elements, and attribute 'epsilon' (default
 * 1e-5); shared by LayerNormalization's and RMSNormalization's kernels. */
pp_status pp_norm_rows(pp_attrs a, const pp_shape *x, int *axis, float *eps, int64_t *outer, int64_t *inner,
                       pp_err *err);
/* Read a constant integer tensor (int64 or int32) of at most max values into
 * out; fails with PP_EUNSUP when t is not a constant (data == NULL). */
pp_status pp_const_ints(const pp_tinfo *t, const char *what, int64_t *out, int max, int *n,
                        pp_err *err);
/* Fail unless t is float32 / has rank in [lo, hi]; `what` names it. */
pp_status pp_need_float(const pp_tinfo *t, const char *what, pp_err *err);
pp_status pp_need_float_half(const pp_tinfo *t, const char *what, pp_err *err);
pp_status pp_need_same_float(const pp_tinfo *t, const pp_tinfo *ref, const char *what, pp_err *err);
pp_status pp_need_rank(const pp_tinfo *t, int lo, int hi, const char *what, pp_err *err);
/* Gemm's attributes: transA, transB (0 or not), alpha, beta. */
typedef struct pp_gemm {
    int64_t ta, tb;
    float alpha, beta;
} pp_gemm;
pp_status pp_gemm_attrs(pp_attrs a, pp_gemm *g, pp_err *err);
/* Element count as double (for cost functions). */
double pp_numel_d(const pp_tinfo *t);

/* QuantizeLinear and DequantizeLinear (ir/shape_math.c): how the scale and
 * zero point (inputs 1 and 2) map onto x. Quantized types int8, uint8,
 * int16, uint16 (and int32 input to Dequantize, without a zero point);
 * scale f32; per tensor, per axis (opset 13) or in blocks along one axis
 * (opset 21). */
typedef struct pp_quant {
    bool per_tensor;
    int axis;      /* per axis or blocked: the axis of x the scale runs along */
    int64_t block; /* blocked: elements of that axis per scale; 0: per axis or per tensor */
    int64_t len, inner; /* per axis or blocked: x's extent on the axis, elements after it (per tensor: 1, 1) */
    bool has_zp;
    pp_dtype q;    /* the quantized type: Quantize's output, Dequantize's input */
    int64_t lo, hi; /* the quantized type's range (Quantize saturates to it) */
} pp_quant;
pp_status pp_quant_parse(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_quant *q, pp_err *err);

#endif
