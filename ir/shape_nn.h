/* shape_nn.h: what the nn family's shape functions (ir/shape_nn.c) work out
 * from attributes and constant inputs, in a form the reference kernels
 * (runtime/cpu/ref_nn.c) reuse, so that inference and execution can never
 * disagree on the meaning of an attribute: ConvTranspose geometry, reduction
 * axes, Softmax's (outer, axis, inner) split, Einsum equations, TopK and
 * Resize parameters, Transpose's permutation, Slice's window.
 *
 * Each parser takes pp_tinfo inputs: in ppcc those of the graph (data only
 * for constants), in a kernel those built from its tensors (data always
 * present). Errors name the attribute or input. Internal to ir/,
 * runtime/cpu/ and passes/batch.c (which reads an op's axes as its kernel
 * does). */
#ifndef PP_SHAPE_NN_H
#define PP_SHAPE_NN_H

#include "geom.h"

/* ConvTranspose: x [N, C, spatial...], w [C, M/group, k...]. Fills g (pad0 /
 * pad1 are the head / tail padding removed from the full output; pad1 may be
 * negative when output_shape asks for more than the full output: those
 * trailing positions are zero plus bias) and *group. */
pp_status pp_convt_geom(pp_attrs a, const pp_shape *x, const pp_shape *w, pp_geom *g,
                        int64_t *group, pp_err *err);

/* Col2Im: input [N, C * prod(block_shape), L] of float or double, the
 * constant image_shape and block_shape (k values each, 1 <= k <= 6), the
 * attributes dilations, pads (begin values, then end values) and strides.
 * nb[d]: the blocks along spatial axis d, whose product L must be input
 * dim 2; the output [N, C, image_shape...]. */
typedef struct pp_col2im {
    int k;
    int64_t n, c, kvol, L;
    int64_t img[PP_MAX_DIMS], blk[PP_MAX_DIMS], dil[PP_MAX_DIMS], stride[PP_MAX_DIMS], pad0[PP_MAX_DIMS],
        nb[PP_MAX_DIMS];
} pp_col2im;
pp_status pp_col2im_parse(pp_attrs a, const pp_tinfo *in, pp_col2im *g, pp_err *err);

/* Transpose: perm[rank] from the 'perm' attribute (absent: the axes
 * reversed); fails unless it is a permutation of 0..rank-1. */
pp_status pp_transpose_perm(pp_attrs a, int rank, int64_t *perm, pp_err *err);

/* DepthToSpace and SpaceToDepth (op) over x [N, C, H, W]: the output seen
 * as six dims, dim[6] (row-major, the output's own order), and for each the
 * stride in elements of the input it reads (sst[6]). DepthToSpace: output
 * [N, C/b^2, H, b, W, b], from the input seen as [N, b, b, C/b^2, H, W]
 * (mode DCR, the default) or [N, C/b^2, b, b, H, W] (CRD). SpaceToDepth:
 * output [N, b, b, C, H/b, W/b] from the input seen as [N, C, H/b, b, W/b,
 * b]. Fails naming the attribute or dim that does not fit. */
pp_status pp_space_depth(pp_op op, pp_attrs a, const pp_shape *x, int64_t *dim, int64_t *sst, pp_err *err);

/* Slice: from the attributes (opset < 10) or the constant inputs starts,
 * ends, axes and steps, per axis of the input the first element taken and
 * the step between elements (axes not sliced: 0 and 1), and the output
 * shape. */
typedef struct pp_slice {
    int64_t first[PP_MAX_DIMS], step[PP_MAX_DIMS];
    pp_shape out;
} pp_slice;
pp_status pp_slice_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_slice *s, pp_err *err);

/* Pad: from the attributes (opset < 11) or the constant inputs pads and
 * axes, the mode (constant or not), per axis of the input the pad before it
 * (negative: elements cut off), the output shape, the mode, and the
 * constant value where it is a known float (the default 0 included). */
typedef struct pp_pad {
    int64_t begin[PP_MAX_DIMS];
    pp_shape out;
    bool value_known;
    int mode; /* 0 constant, 1 reflect, 2 edge, 3 wrap (runtime/cpu/pad_src.h's order) */
    float value;
} pp_pad;
pp_status pp_pad_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_pad *p, pp_err *err);
/* CenterCropPad: the constant input shape and attribute axes as a Pad of
 * zeros (constant mode, value 0): begin[a] is where the input starts in the
 * output, negative where it is cropped (at floor((dim - size) / 2)). */
pp_status pp_centercrop_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_pad *p, pp_err *err);

/* Reductions (ReduceMean, ReduceSum, ...): the reduced axes of x, from the
 * 'axes' attribute or input (by opset), keepdims and noop_with_empty_axes.
 * axes_in: the optional axes input (NULL or dtype PP_UNDEFINED when absent).
 * On return mask[d] tells whether axis d is reduced (all false for a no-op). */
typedef struct pp_reduce {
    bool mask[PP_MAX_DIMS];
    bool keepdims;
} pp_reduce;
pp_status pp_reduce_parse(pp_op op, pp_attrs a, const pp_tinfo *x, const pp_tinfo *axes_in,
                          pp_reduce *r, pp_err *err);

/* Attention's views of its scores x [..., S, T] (ppcc's pattern, passes/fuse.c, and the CUDA planner's, which
 * must agree): whether fs is x (rank 3 or 4) with its leading dim split in two (rank + 1, fs[0] * fs[1] = x[0], the
 * rest kept: BART's frame per head, Swin's per window); whether c scales x per head (c's dims, right-aligned, all 1
 * but the -3rd, which is x's heads, at least 2: SwinV2's logit scale [H, 1, 1]). */
bool pp_attn_frame_shape(const pp_shape *x, const pp_shape *fs);
bool pp_attn_head_shape(const pp_shape *c, const pp_shape *x);

/* Softmax / LogSoftmax: the input seen as [outer, n, inner], normalized along
 * n (opset >= 13: one axis; before: the input coerced to 2-D at 'axis'). */
pp_status pp_softmax_split(pp_attrs a, const pp_shape *x, int64_t *outer, int64_t *n,
                           int64_t *inner, pp_err *err);
/* LpNormalization: the axis (normalized) and p (1 or 2). */
pp_status pp_lpnorm_parse(pp_attrs a, const pp_shape *x, int *axis, int *p, pp_err *err);

/* Einsum: labels 0..51 are the letters a-z, A-Z; 52.. the dims covered by
 * '...' (right-aligned across operands, which broadcast there). */
#define PP_EINSUM_MAX_OPS 8
#define PP_EINSUM_LABELS (52 + PP_MAX_DIMS)
typedef struct pp_einsum {
    int n_ops;
    int rank[PP_EINSUM_MAX_OPS];
    int8_t lab[PP_EINSUM_MAX_OPS][PP_MAX_DIMS]; /* label of each operand dim */
    int out_rank;
    int8_t out_lab[PP_MAX_DIMS];
    bool used[PP_EINSUM_LABELS];                /* appears in some operand */
    bool in_out[PP_EINSUM_LABELS];              /* appears in the output */
    int64_t size[PP_EINSUM_LABELS];             /* extent of each label */
} pp_einsum;
pp_status pp_einsum_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_einsum *e, pp_err *err);

/* TopK: axis (normalized), k, largest, sorted. */
typedef struct pp_topk {
    int axis;
    int64_t k;
    bool largest, sorted;
} pp_topk;
pp_status pp_topk_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_topk *t, pp_err *err);

/* Resize (and the output geometry of every axis). */
typedef enum pp_resize_mode { PP_RS_NEAREST, PP_RS_LINEAR, PP_RS_CUBIC } pp_resize_mode;
typedef enum pp_resize_coord {
    PP_RC_HALF_PIXEL, PP_RC_HALF_PIXEL_SYMMETRIC, PP_RC_PYTORCH_HALF_PIXEL, PP_RC_ALIGN_CORNERS,
    PP_RC_ASYMMETRIC, PP_RC_TF_CROP_AND_RESIZE, PP_RC_TF_HALF_PIXEL_FOR_NN,
} pp_resize_coord;
typedef enum pp_resize_nearest {
    PP_RN_ROUND_PREFER_FLOOR, PP_RN_ROUND_PREFER_CEIL, PP_RN_FLOOR, PP_RN_CEIL,
} pp_resize_nearest;
typedef struct pp_resize {
    pp_resize_mode mode;
    pp_resize_coord coord;
    pp_resize_nearest nearest;
    float cubic_a, extrapolation;
    bool exclude_outside, antialias;
    int rank;
    int64_t out[PP_MAX_DIMS];     /* output dims */
    double scale[PP_MAX_DIMS];    /* scale used by the coordinate transform */
    double roi0[PP_MAX_DIMS], roi1[PP_MAX_DIMS]; /* tf_crop_and_resize region */
} pp_resize;
pp_status pp_resize_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_resize *r, pp_err *err);

/* GridSample: X [N, C, D1..Dk] sampled at grid [N, O1..Ok, k] (each point's
 * coordinates in [-1, 1], the last axis's first) into [N, C, O1..Ok]. Modes
 * bilinear, nearest, bicubic before opset 20 (4-D X only), linear, nearest,
 * cubic from 20 (any k >= 1). */
typedef enum pp_gs_mode { PP_GS_LINEAR, PP_GS_NEAREST, PP_GS_CUBIC } pp_gs_mode;
typedef enum pp_gs_pad { PP_GS_ZEROS, PP_GS_BORDER, PP_GS_REFLECTION } pp_gs_pad;
typedef struct pp_gridsample {
    pp_gs_mode mode;
    pp_gs_pad pad;
    bool align_corners;
    int k; /* spatial axes */
} pp_gridsample;
pp_status pp_gridsample_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_gridsample *g, pp_err *err);

/* AffineGrid: theta [N, 2, 3] (or [N, 3, 4]) and the constant size [N, C, H, W]
 * (or [N, C, D, H, W]): k = 2 (3) spatial axes, their extents in out[]. */
typedef struct pp_affinegrid {
    int k;
    bool align_corners;
    int64_t n, out[3];
} pp_affinegrid;
pp_status pp_affinegrid_parse(pp_attrs a, const pp_tinfo *in, pp_affinegrid *g, pp_err *err);
/* Point i of an axis of len in [-1, 1]: pixel centres (align_corners 0) or
 * the first and last pixels at -1 and 1 (1; a single pixel at 0, as PyTorch
 * and onnxruntime, where the ONNX reference puts it at -1: no node test has
 * one). The reference kernel's, and AffineGrid's gradient's
 * (passes/grad_tensor.c). */
static inline double pp_affine_base(bool align, int64_t i, int64_t len) {
    if (align) return len > 1 ? -1.0 + 2.0 * (double)i / (double)(len - 1) : 0.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

#endif
