/* ref.h: internals shared by the reference kernel files (ref_*.c): the
 * per-op kernel prototypes named by ops.def rows, and the float GEMM. */
#ifndef PPRT_REF_H
#define PPRT_REF_H

#include "../kernels.h"

typedef pp_status pprt_kernel(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                              int n_out, pprt_scratch *scratch, pp_err *err);
#define PP_OP(e, name, mi, ma, no, tr) pprt_kernel kern_##e;
#include "../../ir/ops.def"
#undef PP_OP

/* float16 and bfloat16 computed in float32 (ref_math.c): kern runs on f32
 * copies of the half inputs, and its f32 outputs are rounded (nearest even)
 * into the half ones. PPRT_LIFT(kern) at a kernel's top does it when any of
 * its tensors is half: the elementwise ops, and the products, Softmax and
 * the norms that ppcc --precision bf16|fp16 stores in half
 * (passes/precision.c). */
bool pprt_any_half(const pprt_tensor *in, int n_in, const pprt_tensor *out, int n_out);
pp_status pprt_lift_half(pprt_kernel *kern, pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err);
#define PPRT_LIFT(KERN)                                                            \
    do {                                                                           \
        if (pprt_any_half(in, n_in, out, n_out))                                   \
            return pprt_lift_half(KERN, attrs, in, n_in, out, n_out, scratch, err); \
    } while (0)

/* C[M,N] = A[M,K] * B[K,N]; element (r,c) of A is A[r*a_rs + c*a_cs] (same for
 * B), C row-major with leading dimension ldc, overwritten. Deterministic: the
 * summation order depends only on K. scratch: pprt_sgemm_scratch_bytes(),
 * 64-byte aligned. */
void pprt_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t a_rs, int64_t a_cs,
                const float *B, int64_t b_rs, int64_t b_cs, float *C, int64_t ldc, float *scratch);
size_t pprt_sgemm_scratch_bytes(void);

/* pp.BatchNormGrad's kernel (ref_grad.c) over channels [c0, c1) of dY, X
 * [N, C, S] (plain), writing those channels of dX and of dscale and dB
 * (NULL: not wanted); mean_in and var_in unread in training mode. Each
 * channel's sums in the same order whatever the range: the oneDNN
 * executor runs ranges of channels on its threads (runtime/dnnl/gradref.c)
 * with the kernel's bits. */
void pprt_bn_grad_channels(const float *dy, const float *x, const float *sc, const float *mean_in,
                           const float *var_in, float *dx, float *dsc, float *db, int64_t N, int64_t C, int64_t S,
                           float eps, bool training, int64_t c0, int64_t c1);

/* pp.LayerNormGrad's kernel (ref_grad.c) in two passes, as the oneDNN
 * executor runs it on its threads (runtime/dnnl/gradref.c) with the
 * kernel's bits: pprt_ln_grad_rows writes rows [o0, o1) of dX ([outer,
 * inner] rows, each with its own statistics) and each row's mean and
 * 1 / sqrt(var + eps) into mu[o] and inv[o]; pprt_ln_grad_cols then writes
 * columns [c0, c1) of dscale and dB, each summed over the rows in order. */
void pprt_ln_grad_rows(const float *x, const float *dy, const float *scale, float *dx, double *mu, double *inv,
                       int64_t inner, double eps, int64_t o0, int64_t o1);
void pprt_ln_grad_cols(const float *x, const float *dy, const double *mu, const double *inv, float *ds, float *db,
                       int64_t outer, int64_t inner, int64_t c0, int64_t c1);

/* RMSNormalization's kernel (ref_attn.c) over rows [o0, o1) of x [outer,
 * inner] into y, sc the scale expanded to the row's inner elements: each
 * row's sum of squares in double over eight partials in a fixed order,
 * whatever the range (the oneDNN executor runs ranges of rows on its
 * threads, runtime/dnnl/gradref.c, on vector copies of this,
 * runtime/dnnl/kernels/rmsrow.c: the same bits). */
void pprt_rms_rows(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0, int64_t o1);

/* BatchNormalization's kernel (ref_kernels.c) over channels [c0, c1) of X
 * [N, C, inner] (plain) into Y; train: the channel's own statistics, and
 * st[0..3] (NULL: not wanted) the running mean and variance, the mean and
 * 1 / sqrt(var + eps). Each channel the same whatever the range (the oneDNN
 * executor's runtime/dnnl/gradref.c runs ranges on its threads). */
void pprt_bn_channels(const float *x, const float *scale, const float *B, const float *mean, const float *var,
                      float *y, float *const st[4], int64_t N, int64_t C, int64_t inner, float eps, float momentum,
                      bool train, int64_t c0, int64_t c1);

/* Argument checks shared by the kernel files (ref_kernels.c). */
pp_status pprt_need_f32(const pprt_tensor *t, const char *what, pp_err *err);
pp_status pprt_need_counts(const char *op, int n_in, int lo, int hi, int n_out, pp_err *err);
pp_status pprt_need_shape(const pprt_tensor *t, const pp_shape *want, const char *what, pp_err *err);
/* Op o's inputs (at most 8) infer, as at compile time, the types and shapes
 * of its outputs (at most 4), and out[] has them; an output of type
 * PP_UNDEFINED (one nobody asked for) is not checked. For the kernels that
 * take their shapes from the shared parsers (ref_attn.c, ref_rnn.c). */
pp_status pprt_check_outputs(pp_op o, pp_attrs attrs, const pprt_tensor *in, int n_in, const pprt_tensor *out,
                             int n_out, pp_err *err);
pp_status pprt_numel_of(const pprt_tensor *t, int64_t *n, pp_err *err);
/* out[0] = bytes of in[0] (same type and byte size). */
pp_status pprt_copy_bytes(const char *op, const pprt_tensor *in, int n_in, pprt_tensor *out,
                          int n_out, pp_err *err);

/* y[m * P + p] += b[m] for m < M, p < P: the bias of M channels over P
 * positions each (Conv, ConvTranspose). */
static inline void pprt_add_bias(float *restrict y, const float *restrict b, int64_t M, int64_t P) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t p = 0; p < P; p++) y[m * P + p] += b[m];
}

/* A kernel tensor as the pp_tinfo the shared parsers of ir/shape_nn.h take
 * (its data always present). */
static inline pp_tinfo pprt_tinfo_of(const pprt_tensor *t) { return (pp_tinfo){t->dtype, t->shape, t->data}; }

/* GroupNormalization of x [N, C, S] in G groups into y (ref_nn.c): each
 * group's mean and variance in double, then per element, by `how`: (x -
 * mean) / sqrt(var + eps) * scale + bias rounded once, scale and bias per
 * group (opset < 21) or per channel (opset 21); or (pp.GroupNorm) the
 * normalized value rounded to float, then * scale[c] and + bias[c] in float,
 * as the Mul and Add after an InstanceNormalization compute them. */
typedef enum { PPRT_GN_PER_GROUP, PPRT_GN_PER_CHANNEL, PPRT_GN_AFTER } pprt_gn_affine;
void pprt_ref_groupnorm(const float *x, float *y, int64_t N, int64_t C, int64_t S, int64_t G, float eps,
                        const float *sc, const float *b, pprt_gn_affine how);
/* The kernel of op (GroupNormalization, pp.GroupNorm) over its tensors:
 * the outputs checked, num_groups and epsilon read, then the above. */
pp_status pprt_groupnorm_kernel(pp_op op, pprt_gn_affine how, pp_attrs attrs, const pprt_tensor *in, int n_in,
                                pprt_tensor *out, int n_out, pp_err *err);

/* Conv/pool window geometry: pp_geom, and pp_geom3_lift to three spatial
 * dims (ir/geom.h). */
#include "../../ir/geom.h"
/* Positions o in [0, n) whose index o*s + off lies in [0, limit): the
 * half-open range [*lo, *hi), possibly empty. */
void pprt_stride_range(int64_t n, int64_t limit, int64_t s, int64_t off, int64_t *lo, int64_t *hi);

/* The input index of each output index along axis d of nearest Resize r
 * (mode PP_RS_NEAREST) over an input extent `in`, as the reference kernel
 * picks them: idx[r->out[d]] (o itself along an axis it leaves as it is).
 * False where a position lies outside the input (tf_crop_and_resize's
 * extrapolation value) or memory runs out (ref_nn.c; the oneDNN executor's
 * gather, runtime/dnnl/kernels/nearest.h, takes its maps from it). */
#include "../../ir/shape_nn.h"
bool pprt_resize_nearest_map(const pp_resize *r, int d, int64_t in, int64_t *idx);

#endif
