/* grad_tensor.c: gradient rules of the data-movement ops (ir/ops_tensor.def)
 * and of Where, Cast and Einsum (autodiff.h): Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Concat, Split, Slice, Gather, GatherElements,
 * Expand, Tile, Pad (every mode), TopK's values, Trilu, DepthToSpace,
 * SpaceToDepth, ScatterElements and ScatterND (every reduction), Shape,
 * Size and ConstantOfShape (nothing flows). The backward ops they emit are ONNX ops where one does
 * the job (Slice, Concat, Pad, ReduceSum, Where, ScatterElements, Einsum)
 * and pp.SliceGrad, pp.GatherGrad (ir/ops_grad.def) where none does. */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "../ir/op_fns.h"
#include "../ir/shape_nn.h"

/* Reshape, Flatten: the gradient takes the input's shape back */
pp_status pp_grad_reshape(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = g->nodes[node].in[0];
    const pp_shape xs = g->values[x].shape;
    int r;
    PP_TRY(pp_ad_reshape(ad, pp_ad_gy(ad, node, 0), &xs, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Transpose: the gradient goes back through the inverse permutation */
pp_status pp_grad_transpose(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = &g->nodes[node];
    const int x = n->in[0], r = g->values[x].shape.rank;
    int64_t perm[PP_MAX_DIMS], inv[PP_MAX_DIMS];
    int np = 0;
    if (pp_attr_find(pp_node_attrs(g, n), "perm")) PP_TRY(pp_attr_ints(pp_node_attrs(g, n), "perm", perm, PP_MAX_DIMS, &np, err));
    if (!np)
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    else if (np != r)
        return pp_ad_fail(ad, node, err, "perm has %d entries for rank %d", np, r);
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r) return pp_ad_fail(ad, node, err, "perm is not a permutation");
        inv[perm[i]] = i;
    }
    int t;
    PP_TRY(pp_ad_transpose(ad, pp_ad_gy(ad, node, 0), inv, r, &t, err));
    return pp_ad_give(ad, x, t, err);
}

/* ---- part B: Squeeze/Unsqueeze to Einsum (issue 55) ---------------------------------------- */

static const pp_node *ad_node(pp_ad *ad, int node) { return &pp_ad_graph(ad)->nodes[node]; }

/* the node's input types and shapes, constants' bytes aligned for the
 * shared parsers of ir/shape_nn.h */
static pp_status node_tinfo(pp_ad *ad, int node, pp_tinfo *in, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && g->values[n->in[k]].is_const && g->values[n->in[k]].data)
            PP_TRY(pp_value_align(g, n->in[k], err));
    pp_node_tinfo(g, ad_node(ad, node), in, NULL);
    return PP_OK;
}

/* attribute 'axis' (default dflt) normalized to [0, rank) */
static pp_status node_axis(pp_ad *ad, int node, int64_t dflt, int rank, int *axis, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    int64_t a;
    PP_TRY(pp_attr_int(pp_node_attrs(g, ad_node(ad, node)), "axis", dflt, &a, err));
    if (a < -rank || a >= rank) return pp_ad_fail(ad, node, err, "axis %lld is outside [-%d, %d)", (long long)a, rank, rank);
    *axis = (int)(a < 0 ? a + rank : a);
    return PP_OK;
}

/* float32 v everywhere in shape s: a scalar expanded */
static pp_status filled(pp_ad *ad, const pp_shape *s, float v, int *out, pp_err *err) {
    int z, sh;
    PP_TRY(pp_ad_scalar(ad, v, &z, err));
    PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", s->dim, s->rank, &sh, err));
    return pp_ad_op2(ad, PP_OP_EXPAND, z, sh, out, err);
}

static pp_status zeros(pp_ad *ad, const pp_shape *s, int *out, pp_err *err) { return filled(ad, s, 0.0f, out, err); }

/* an int64 constant from a node's input, at most max values */
static pp_status const_ints(pp_ad *ad, int node, int k, const char *what, int64_t *v, int max, int *n, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = ad_node(ad, node)->in[k];
    if (x < 0 || !g->values[x].is_const || !g->values[x].data || g->values[x].dtype != PP_I64)
        return pp_ad_fail(ad, node, err, "its %s is not a constant int64 tensor; the gradient needs it known", what);
    PP_TRY(pp_value_align(g, x, err));
    const size_t cnt = g->values[x].nbytes / 8;
    if (cnt > (size_t)max) return pp_ad_fail(ad, node, err, "its %s has %zu values, more than %d", what, cnt, max);
    memcpy(v, g->values[x].data, cnt * 8);
    *n = (int)cnt;
    return PP_OK;
}

/* Shape, Size: integer outputs, no gradient flows (their row's slot mask is 0) */
pp_status pp_grad_none(pp_ad *ad, int node, pp_err *err) {
    (void)ad, (void)node, (void)err;
    return PP_OK;
}

static bool cast_float(pp_dtype t) { return t == PP_F32 || t == PP_BF16 || t == PP_F16; }

/* Cast: float32 to float32 passes the gradient on; between f32 and a half
 * type (--precision's Casts, passes/precision.c) the gradient is cast back:
 * to the half type the gradient of a half value, to f32 the f32 value's.
 * CastLike(x, like) alike (its like input takes none). */
pp_status pp_grad_cast(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const pp_dtype a = g->values[n->in[0]].dtype, b = g->values[n->out[0]].dtype;
    if (!cast_float(a) || !cast_float(b) || (a != PP_F32 && b != PP_F32))
        return pp_ad_fail(ad, node, err, "a %s from %s to %s has no gradient (ppcc trains in f32, and casts between "
                          "f32 and bf16 or fp16)", pp_op_table[n->op].name, pp_dtype_name(a), pp_dtype_name(b));
    const int x = n->in[0], gy = pp_ad_gy(ad, node, 0);
    if (a == b) return pp_ad_give(ad, x, gy, err);
    const pp_attr to = pp_ad_attr_int("to", (int64_t)a);
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_CAST, &gy, 1, &to, 1, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* CenterCropPad: cropping and padding are each other's adjoints with the
 * same centring (the start at floor(|in - out| / 2) on both ways), so the
 * gradient is CenterCropPad(gy) back to x's shape (every axis: the ones not
 * cropped or padded keep their size) */
pp_status pp_grad_centercroppad(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    int sh, r;
    PP_TRY(pp_graph_add_ints(g, "grad_shape", xs.dim, xs.rank, &sh, err));
    const int in[2] = {gy, sh};
    PP_TRY(pp_ad_emit(ad, PP_OP_CENTERCROPPAD, in, 2, NULL, 0, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* AffineGrid: grid[n, point] = theta[n] (x, y[, z], 1) with the point's
 * base coordinates (pp_affine_base, x along the last axis), linear in
 * theta: dtheta[n] = dgrid[n]^T B, B the [points, k + 1] constant of the
 * base coordinates, one batched MatMul (the grid's gradient [N, P, k]
 * transposed) */
pp_status pp_grad_affinegrid(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int th = n->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape ys = g->values[n->out[0]].shape;
    int64_t align;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "align_corners", 0, &align, err));
    const int k = ys.rank - 2;
    if (g->values[th].dtype != PP_F32 || k < 2 || k > 3 || ys.dim[ys.rank - 1] != k)
        return pp_ad_fail(ad, node, err, "the gradient rule takes f32 theta and 2 or 3 spatial axes");
    int64_t P = 1;
    for (int d = 0; d < k; d++) P *= ys.dim[1 + d];
    if (P < 1 || P > ((int64_t)1 << 26)) return pp_ad_fail(ad, node, err, "%lld points: 1 to 2^26", (long long)P);
    float *b = malloc(sizeof *b * (size_t)(P * (k + 1)));
    if (!b) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        for (int d = k - 1; d >= 0; d--) {
            b[p * (k + 1) + (k - 1 - d)] = (float)pp_affine_base(align == 1, rest % ys.dim[1 + d], ys.dim[1 + d]);
            rest /= ys.dim[1 + d];
        }
        b[p * (k + 1) + k] = 1.0f;
    }
    const pp_shape bs = {.rank = 2, .dim = {P, k + 1}}, fs = {.rank = 3, .dim = {ys.dim[0], P, k}};
    int bc, fl, tr, r;
    pp_status s = pp_graph_add_const(g, "affine_base", PP_F32, &bs, b, &bc, err);
    free(b);
    PP_TRY(s);
    static const int64_t perm[3] = {0, 2, 1};
    PP_TRY(pp_ad_reshape(ad, gy, &fs, &fl, err));
    PP_TRY(pp_ad_transpose(ad, fl, perm, 3, &tr, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MATMUL, tr, bc, &r, err));
    return pp_ad_give(ad, th, r, err);
}

/* Expand: the broadcast summed back */
pp_status pp_grad_expand(pp_ad *ad, int node, pp_err *err) {
    const int x = ad_node(ad, node)->in[0];
    int r;
    PP_TRY(pp_ad_unbroadcast(ad, pp_ad_gy(ad, node, 0), x, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Where(c, a, b): a's share where c holds, b's elsewhere, summed back */
pp_status pp_grad_where(pp_ad *ad, int node, pp_err *err) {
    const int gy = pp_ad_gy(ad, node, 0);
    for (int k = 1; k <= 2; k++) {
        const pp_node *n = ad_node(ad, node);
        const int x = n->in[k], c = n->in[0];
        if (!pp_ad_wants(ad, x)) continue;
        int z, w, r;
        PP_TRY(pp_ad_scalar(ad, 0.0f, &z, err));
        const int in[3] = {c, k == 1 ? gy : z, k == 1 ? z : gy};
        PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &w, 1, err));
        PP_TRY(pp_ad_unbroadcast(ad, w, x, &r, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    return PP_OK;
}

/* g's elements [lo, hi) along axis, in steps of step (-1: from hi - 1 down to lo; a step of 1: no steps input) */
static pp_status axis_slice(pp_ad *ad, int g, int axis, int64_t lo, int64_t hi, int64_t step, int *out, pp_err *err) {
    pp_graph *gr = pp_ad_graph(ad);
    const int64_t st = step > 0 ? lo : hi - 1, en = step > 0 ? hi : lo > 0 ? lo - 1 : -((int64_t)1 << 62), ax = axis;
    int in[5] = {g, -1, -1, -1, -1};
    PP_TRY(pp_graph_add_ints(gr, "grad_axes", &st, 1, &in[1], err));
    PP_TRY(pp_graph_add_ints(gr, "grad_axes", &en, 1, &in[2], err));
    PP_TRY(pp_graph_add_ints(gr, "grad_axes", &ax, 1, &in[3], err));
    if (step != 1) PP_TRY(pp_graph_add_ints(gr, "grad_axes", &step, 1, &in[4], err));
    return pp_ad_emit(ad, PP_OP_SLICE, in, step != 1 ? 5 : 4, NULL, 0, out, 1, err);
}

/* Concat: each input's part of the gradient, sliced out along the axis */
pp_status pp_grad_concat(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int gy = pp_ad_gy(ad, node, 0), rank = g->values[gy].shape.rank;
    int axis;
    PP_TRY(node_axis(ad, node, 0, rank, &axis, err));
    int64_t off = 0;
    const int n_in = ad_node(ad, node)->n_in;
    for (int k = 0; k < n_in; k++) {
        const int x = ad_node(ad, node)->in[k];
        if (x < 0) continue;
        const int64_t len = g->values[x].shape.dim[axis];
        if (pp_ad_wants(ad, x)) {
            int r;
            PP_TRY(axis_slice(ad, gy, axis, off, off + len, 1, &r, err));
            PP_TRY(pp_ad_give(ad, x, r, err));
        }
        off += len;
    }
    return PP_OK;
}

/* Split (a 'split' input, attribute, or num_outputs: the outputs' shapes
 * say it all): the outputs' gradients concatenated, zeros for an output the
 * loss does not read */
pp_status pp_grad_split(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = ad_node(ad, node)->in[0];
    int axis;
    PP_TRY(node_axis(ad, node, 0, g->values[x].shape.rank, &axis, err));
    const int n_out = ad_node(ad, node)->n_out;
    if (n_out > PP_MAX_INPUTS) return pp_ad_fail(ad, node, err, "%d outputs, more than Concat takes", n_out);
    int parts[PP_MAX_INPUTS];
    for (int k = 0; k < n_out; k++) {
        parts[k] = pp_ad_gy(ad, node, k);
        if (parts[k] < 0) {
            const pp_shape s = g->values[ad_node(ad, node)->out[k]].shape;
            PP_TRY(zeros(ad, &s, &parts[k], err));
        }
    }
    int r;
    const pp_attr a = pp_ad_attr_int("axis", axis);
    if (n_out == 1) return pp_ad_give(ad, x, parts[0], err);
    PP_TRY(pp_ad_emit(ad, PP_OP_CONCAT, parts, n_out, &a, 1, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* Slice: where the slice read, the gradient; zeros elsewhere. Unit steps: a
 * Pad of zeros around it; other steps (negative ones too): pp.SliceGrad */
pp_status pp_grad_slice(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    pp_tinfo in[PP_MAX_INPUTS];
    PP_TRY(node_tinfo(ad, node, in, err));
    pp_slice sl;
    pp_err e = {0};
    if (pp_slice_parse(pp_node_attrs(g, ad_node(ad, node)), in, ad_node(ad, node)->n_in, &sl, &e) != PP_OK)
        return pp_ad_fail(ad, node, err, "%s", e.msg);
    const int x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    bool unit = true;
    for (int d = 0; d < xs.rank; d++) unit &= sl.step[d] == 1;
    int r;
    if (unit) {
        int64_t pads[2 * PP_MAX_DIMS];
        bool any = false;
        for (int d = 0; d < xs.rank; d++) {
            pads[d] = sl.first[d];
            pads[xs.rank + d] = xs.dim[d] - sl.first[d] - sl.out.dim[d];
            any |= pads[d] || pads[xs.rank + d];
        }
        if (!any) return pp_ad_give(ad, x, gy, err);
        int p;
        PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", pads, 2 * xs.rank, &p, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_PAD, gy, p, &r, err));
    } else {
        const pp_attr a[3] = {pp_ad_attr_ints("shape", xs.dim, xs.rank), pp_ad_attr_ints("starts", sl.first, xs.rank),
                              pp_ad_attr_ints("steps", sl.step, xs.rank)};
        PP_TRY(pp_ad_emit(ad, PP_OP_SLICEGRAD, &gy, 1, a, 3, &r, 1, err));
    }
    return pp_ad_give(ad, x, r, err);
}

/* g (of length len along axis) placed at [before, n - after) of a zero tensor of length n there, added to acc */
static pp_status axis_place_add(pp_ad *ad, int acc, int g, int axis, int rank, int64_t before, int64_t after,
                                int *out, pp_err *err) {
    int64_t pads[2 * PP_MAX_DIMS] = {0};
    pads[axis] = before, pads[rank + axis] = after;
    int p, placed = g;
    if (before || after) {
        PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", pads, 2 * rank, &p, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_PAD, g, p, &placed, err));
    }
    return pp_ad_op2(ad, PP_OP_ADD, acc, placed, out, err);
}

/* One axis of a reflect, edge or wrap Pad undone: g has n + b + e elements along axis (b, e >= 0); the middle n
 * are x's own, and each border element came from one of x's, whose gradient it adds to: edge, x[0] and x[n-1]
 * (each border summed); reflect, x[b..1] and x[n-2..n-1-e] (each border reversed); wrap, x[n-b..n-1] and
 * x[0..e-1]. */
static pp_status pad_axis_grad(pp_ad *ad, int mode, int g, int axis, int rank, int64_t n, int64_t b, int64_t e,
                               int *out, pp_err *err) {
    int acc;
    PP_TRY(axis_slice(ad, g, axis, b, b + n, 1, &acc, err));
    for (int side = 0; side < 2; side++) {
        const int64_t len = side ? e : b, at = side ? b + n : 0;
        if (!len) continue;
        int part, before;
        if (mode == 2) { /* edge: the border summed into its end element */
            int sl;
            const int64_t ax = axis;
            PP_TRY(axis_slice(ad, g, axis, at, at + len, 1, &sl, err));
            PP_TRY(pp_ad_reduce_sum(ad, sl, &ax, 1, true, &part, err));
            before = side ? (int)(n - 1) : 0;
            PP_TRY(axis_place_add(ad, acc, part, axis, rank, before, n - before - 1, &acc, err));
            continue;
        }
        PP_TRY(axis_slice(ad, g, axis, at, at + len, mode == 1 ? -1 : 1, &part, err));
        const int64_t bf = mode == 1 ? (side ? n - 1 - len : 1) : (side ? 0 : n - len);
        PP_TRY(axis_place_add(ad, acc, part, axis, rank, bf, n - bf - len, &acc, err));
    }
    *out = acc;
    return PP_OK;
}

/* Pad: constant mode, the gradient is the middle, a Pad by the negated pads
 * (which also puts zeros back where a negative pad cropped). reflect, edge and
 * wrap: each border element also passes its gradient to the element of x it
 * copied, one axis at a time, the last axis padded first undone first (the
 * modes pad axis by axis: a corner is the copy of a copy); their pads must
 * not be negative, nor reach past what the mode can copy. */
pp_status pp_grad_pad(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    pp_tinfo in[PP_MAX_INPUTS];
    PP_TRY(node_tinfo(ad, node, in, err));
    pp_pad pd;
    pp_err e = {0};
    if (pp_pad_parse(pp_node_attrs(g, ad_node(ad, node)), in, ad_node(ad, node)->n_in, &pd, &e) != PP_OK)
        return pp_ad_fail(ad, node, err, "%s", e.msg);
    const int x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    if (pd.mode != 0) {
        static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
        for (int d = 0; d < xs.rank; d++) {
            const int64_t b = pd.begin[d], en = pd.out.dim[d] - xs.dim[d] - b, n = xs.dim[d];
            const int64_t most = pd.mode == 1 ? n - 1 : pd.mode == 3 ? n : INT64_MAX; /* edge: any, from n >= 1 */
            if (b < 0 || en < 0 || b > most || en > most || (n == 0 && (b || en)))
                return pp_ad_fail(ad, node, err, "Pad's gradient in mode '%s' takes pads from 0 to %s on each side "
                                  "of an axis of n elements (reflect n - 1, wrap n, edge any with n >= 1), not %lld "
                                  "and %lld on axis %d of %lld", modes[pd.mode & 3], pd.mode == 2 ? "any" : "n",
                                  (long long)b, (long long)en, d, (long long)n);
        }
        int r = gy;
        for (int d = xs.rank - 1; d >= 0; d--) {
            const int64_t b = pd.begin[d], en = pd.out.dim[d] - xs.dim[d] - b;
            if (b || en) PP_TRY(pad_axis_grad(ad, pd.mode, r, d, xs.rank, xs.dim[d], b, en, &r, err));
        }
        return pp_ad_give(ad, x, r, err);
    }
    int64_t pads[2 * PP_MAX_DIMS];
    bool any = false;
    for (int d = 0; d < xs.rank; d++) {
        pads[d] = -pd.begin[d];
        pads[xs.rank + d] = -(pd.out.dim[d] - xs.dim[d] - pd.begin[d]);
        any |= pads[d] || pads[xs.rank + d];
    }
    if (!any) return pp_ad_give(ad, x, gy, err);
    int p, r;
    PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", pads, 2 * xs.rank, &p, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_PAD, gy, p, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Gather: the rows of the gradient added back where they were read
 * (pp.GatherGrad; repeated indices sum) */
pp_status pp_grad_gather(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = ad_node(ad, node)->in[0], idx = ad_node(ad, node)->in[1];
    const pp_shape xs = g->values[x].shape;
    int axis;
    PP_TRY(node_axis(ad, node, 0, xs.rank, &axis, err));
    const pp_attr a[2] = {pp_ad_attr_ints("shape", xs.dim, xs.rank), pp_ad_attr_int("axis", axis)};
    const int in[2] = {pp_ad_gy(ad, node, 0), idx};
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_GATHERGRAD, in, 2, a, 2, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* x's gradient from output 0's, whose elements node read from x at indices idx along its 'axis' (default dflt):
 * ScatterElements with reduction add into zeros */
static pp_status scatter_back(pp_ad *ad, int node, int x, int idx, int64_t dflt, pp_err *err) {
    const pp_shape xs = pp_ad_graph(ad)->values[x].shape;
    int axis, z, r;
    PP_TRY(node_axis(ad, node, dflt, xs.rank, &axis, err));
    PP_TRY(zeros(ad, &xs, &z, err));
    const pp_attr a[2] = {pp_ad_attr_int("axis", axis), pp_ad_attr_str("reduction", "add")};
    const int in[3] = {z, idx, pp_ad_gy(ad, node, 0)};
    PP_TRY(pp_ad_emit(ad, PP_OP_SCATTERELEMENTS, in, 3, a, 2, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* GatherElements: its indices input names the places */
pp_status pp_grad_gatherelements(pp_ad *ad, int node, pp_err *err) {
    return scatter_back(ad, node, ad_node(ad, node)->in[0], ad_node(ad, node)->in[1], 0, err);
}

/* TopK's values: each gradient element back where its value was read (the indices output names the place; the
 * k indices along the axis are distinct), zeros elsewhere: GatherElements' rule with TopK's own indices */
pp_status pp_grad_topk(pp_ad *ad, int node, pp_err *err) {
    const int idx = ad_node(ad, node)->n_out > 1 ? ad_node(ad, node)->out[1] : -1;
    if (idx < 0) return pp_ad_fail(ad, node, err, "TopK without its indices output: the gradient needs them");
    return scatter_back(ad, node, ad_node(ad, node)->in[0], idx, -1, err);
}

/* A Scatter's reduction (ONNX's names) */
typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } scatter_red;

static pp_status scatter_reduction(pp_ad *ad, int node, scatter_red *red, pp_err *err) {
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const char *r = "none";
    (void)pp_attr_string(pp_node_attrs(pp_ad_graph(ad), ad_node(ad, node)), "reduction", "none", &r, NULL);
    for (int i = 0; i < 5; i++)
        if (!strcmp(r, names[i])) {
            *red = (scatter_red)i;
            return PP_OK;
        }
    return pp_ad_fail(ad, node, err, "its reduction '%s' is none of ONNX's (none, add, mul, max, min)", r);
}

/* The places node (a ScatterElements, Scatter or ScatterND) writes, read from v (of the data's shape): a value
 * of the updates' shape. ScatterElements: GatherElements at its indices. ScatterND: v seen as [rows, the rest]
 * (its first k dims one, k the index tuples' length), each tuple's row number computed in the graph (the indices
 * need not be constants; a negative index counts from the end: Mod by the dim), and a Gather of those rows. */
static pp_status scatter_read(pp_ad *ad, int node, int v, int *out, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], idx = n->in[1];
    if (n->op != PP_OP_SCATTERND) {
        int axis;
        PP_TRY(node_axis(ad, node, 0, g->values[x].shape.rank, &axis, err));
        const pp_attr a = pp_ad_attr_int("axis", axis);
        const int in[2] = {v, idx};
        return pp_ad_emit(ad, PP_OP_GATHERELEMENTS, in, 2, &a, 1, out, 1, err);
    }
    const pp_shape xs = g->values[x].shape, is = g->values[idx].shape;
    const int k = is.rank > 0 ? (int)is.dim[is.rank - 1] : 0;
    if (g->values[idx].dtype != PP_I64 || k < 1 || k > xs.rank)
        return pp_ad_fail(ad, node, err, "index tuples of %d (%s) for data of rank %d", k,
                          pp_dtype_name(g->values[idx].dtype), xs.rank);
    int64_t dims[PP_MAX_DIMS], strides[PP_MAX_DIMS], flat[PP_MAX_DIMS], R = 1;
    for (int j = k - 1; j >= 0; j--) dims[j] = xs.dim[j], strides[j] = R, R *= xs.dim[j];
    flat[0] = R;
    for (int j = k; j < xs.rank; j++) flat[1 + j - k] = xs.dim[j];
    const int64_t last = -1;
    int dc, sc, fs, m, p, rows, f;
    PP_TRY(pp_graph_add_ints(g, "grad_axes", dims, k, &dc, err));
    PP_TRY(pp_graph_add_ints(g, "grad_axes", strides, k, &sc, err));
    PP_TRY(pp_graph_add_ints(g, "grad_axes", flat, 1 + xs.rank - k, &fs, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MOD, idx, dc, &m, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, m, sc, &p, err));
    PP_TRY(pp_ad_reduce_sum(ad, p, &last, 1, false, &rows, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_RESHAPE, v, fs, &f, err));
    const pp_attr a = pp_ad_attr_int("axis", 0);
    const int in[2] = {f, rows};
    return pp_ad_emit(ad, PP_OP_GATHER, in, 2, &a, 1, out, 1, err);
}

/* base (of the data's shape) with vals (of the updates') scattered in as node scatters, under reduction red
 * (a string: "none", "add", "mul") */
static pp_status scatter_into(pp_ad *ad, int node, int base, int vals, const char *red, int *out, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const bool nd = n->op == PP_OP_SCATTERND;
    int axis = 0;
    if (!nd) PP_TRY(node_axis(ad, node, 0, pp_ad_graph(ad)->values[n->in[0]].shape.rank, &axis, err));
    const pp_attr a[2] = {pp_ad_attr_str("reduction", red), pp_ad_attr_int("axis", axis)};
    const int in[3] = {base, n->in[1], vals};
    return pp_ad_emit(ad, nd ? PP_OP_SCATTERND : PP_OP_SCATTERELEMENTS, in, 3, a, nd ? 1 : 2, out, 1, err);
}

/* a float 0/1 of a bool value, in the type of float value like */
static pp_status mask_of(pp_ad *ad, int b, int like, int *out, pp_err *err) {
    const pp_attr to = pp_ad_attr_int("to", (int64_t)pp_ad_graph(ad)->values[like].dtype); /* ONNX's numbering */
    return pp_ad_emit(ad, PP_OP_CAST, &b, 1, &to, 1, out, 1, err);
}

/* data's gradient through a Scatter whose updates replace (none) or add (add): the output's whole (add), or with
 * the written places zeroed (none: zeros scattered into it) */
static pp_status scatter_data(pp_ad *ad, int node, bool add, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], u = n->in[2], gy = pp_ad_gy(ad, node, 0);
    if (!pp_ad_wants(ad, x)) return PP_OK;
    if (add) return pp_ad_give(ad, x, gy, err);
    const pp_shape us = g->values[u].shape;
    int z, r;
    PP_TRY(zeros(ad, &us, &z, err));
    PP_TRY(scatter_into(ad, node, gy, z, "none", &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Reduction max or min: the output is the extreme of the data and the updates written to each place; its
 * gradient goes to those equal to it, shared evenly among them (PyTorch's scatter_reduce with amax or amin and
 * include_self: a tie splits the gradient). A place whose output is NaN equals nothing: no gradient. */
static pp_status scatter_extreme(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], u = n->in[2], y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    int yu, eu, mu, ed, md, cnt, one, cnt1, gs, r;
    PP_TRY(scatter_read(ad, node, y, &yu, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, u, yu, &eu, err));
    PP_TRY(mask_of(ad, eu, u, &mu, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, x, y, &ed, err));
    PP_TRY(mask_of(ad, ed, x, &md, err));
    PP_TRY(scatter_into(ad, node, md, mu, "add", &cnt, err)); /* how many share each place's gradient */
    PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MAX, cnt, one, &cnt1, err)); /* 0 only where the output is NaN */
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, gy, cnt1, &gs, err));
    if (pp_ad_wants(ad, x)) {
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gs, md, &r, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    if (!pp_ad_wants(ad, u)) return PP_OK;
    int gu;
    PP_TRY(scatter_read(ad, node, gs, &gu, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gu, mu, &r, err));
    return pp_ad_give(ad, u, r, err);
}

/* Reduction mul: each place's output is its data times the updates written there. The data's gradient is the
 * output's times those updates' product (ones scattered by mul); an update's, the output's times the product of
 * the rest (the data and the other updates there): y / u where u is not 0; at a zero that is its place's only
 * zero update, the product with it made 1; at a zero among several, 0 (y / 1 = 0). */
static pp_status scatter_prod(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], u = n->in[2], y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    int zero, one, r;
    PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
    PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
    if (pp_ad_wants(ad, x)) {
        int ones, pu;
        PP_TRY(filled(ad, &xs, 1.0f, &ones, err));
        PP_TRY(scatter_into(ad, node, ones, u, "mul", &pu, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, pu, &r, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    if (!pp_ad_wants(ad, u)) return PP_OK;
    int uz, uzf, z, zs, zc, c1, single, um, r2, gr2, a, gyy, b0, u1, b;
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, u, zero, &uz, err));
    PP_TRY(mask_of(ad, uz, u, &uzf, err));
    PP_TRY(zeros(ad, &xs, &z, err));
    PP_TRY(scatter_into(ad, node, z, uzf, "add", &zs, err));
    PP_TRY(scatter_read(ad, node, zs, &zc, err)); /* the zero updates at each update's place */
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, zc, one, &c1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_AND, uz, c1, &single, err));
    const int w1[3] = {single, one, u};
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, w1, 3, NULL, 0, &um, 1, err));
    PP_TRY(scatter_into(ad, node, x, um, "mul", &r2, err)); /* the product with a lone zero made 1 */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, r2, &gr2, err));
    PP_TRY(scatter_read(ad, node, gr2, &a, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y, &gyy, err));
    PP_TRY(scatter_read(ad, node, gyy, &b0, err));
    const int w2[3] = {uz, one, u};
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, w2, 3, NULL, 0, &u1, 1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, b0, u1, &b, err));
    const int w3[3] = {single, a, b};
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, w3, 3, NULL, 0, &r, 1, err));
    return pp_ad_give(ad, u, r, err);
}

/* ScatterElements, the old Scatter and ScatterND: reduction none or add, the data's gradient by scatter_data and
 * the updates' the output's read where they were written (with reduction none ONNX leaves repeated indices
 * undefined, and so does this); mul, max and min by their own rules */
static pp_status grad_scatter(pp_ad *ad, int node, pp_err *err) {
    scatter_red red = RED_NONE;
    PP_TRY(scatter_reduction(ad, node, &red, err));
    if (red == RED_MAX || red == RED_MIN) return scatter_extreme(ad, node, err);
    if (red == RED_MUL) return scatter_prod(ad, node, err);
    PP_TRY(scatter_data(ad, node, red == RED_ADD, err));
    const int u = ad_node(ad, node)->in[2];
    if (!pp_ad_wants(ad, u)) return PP_OK;
    int r;
    PP_TRY(scatter_read(ad, node, pp_ad_gy(ad, node, 0), &r, err));
    return pp_ad_give(ad, u, r, err);
}

pp_status pp_grad_scatterelements(pp_ad *ad, int node, pp_err *err) { return grad_scatter(ad, node, err); }

pp_status pp_grad_scatternd(pp_ad *ad, int node, pp_err *err) { return grad_scatter(ad, node, err); }

/* Trilu keeps a triangle of each matrix: the gradient is the same triangle of the output's gradient */
pp_status pp_grad_trilu(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], k = n->n_in > 1 ? n->in[1] : -1;
    int64_t upper;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "upper", 1, &upper, err));
    const int in[2] = {pp_ad_gy(ad, node, 0), k};
    const pp_attr a = pp_ad_attr_int("upper", upper);
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_TRILU, in, k >= 0 ? 2 : 1, &a, 1, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* DepthToSpace and SpaceToDepth move each element to one place, and the
 * gradient moves it back: DepthToSpace in DCR mode and SpaceToDepth undo
 * each other; DepthToSpace in CRD mode ([N, C*b*b, H, W], channel c's b*b
 * block channels c*b*b + i*b + j) is undone by viewing the gradient as [N,
 * C, H, b, W, b] and moving the two b's before H. */
pp_status pp_grad_depthspace(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], gy = pp_ad_gy(ad, node, 0);
    const bool d2s = n->op == PP_OP_DEPTHTOSPACE;
    int64_t b;
    const char *mode = "DCR";
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "blocksize", 0, &b, err));
    if (d2s) PP_TRY(pp_attr_string(pp_node_attrs(g, n), "mode", "DCR", &mode, err));
    const pp_shape xs = g->values[x].shape;
    if (b < 1 || xs.rank != 4) return pp_ad_fail(ad, node, err, "blocksize %lld over rank %d", (long long)b, xs.rank);
    int r;
    if (!d2s || !strcmp(mode, "DCR")) { /* (mode read before the first emit, which may move the node's storage) */
        const pp_attr a[2] = {pp_ad_attr_int("blocksize", b), pp_ad_attr_str("mode", "DCR")};
        PP_TRY(pp_ad_emit(ad, d2s ? PP_OP_SPACETODEPTH : PP_OP_DEPTHTOSPACE, &gy, 1, a, d2s ? 1 : 2, &r, 1, err));
        return pp_ad_give(ad, x, r, err);
    }
    const int64_t C = xs.dim[1] / (b * b), H = xs.dim[2], W = xs.dim[3];
    const pp_shape six = {.rank = 6, .dim = {xs.dim[0], C, H, b, W, b}};
    const int64_t perm[6] = {0, 1, 3, 5, 2, 4};
    int v, t;
    PP_TRY(pp_ad_reshape(ad, gy, &six, &v, err));
    PP_TRY(pp_ad_transpose(ad, v, perm, 6, &t, err));
    PP_TRY(pp_ad_reshape(ad, t, &xs, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Tile: the output seen as [r0, d0, r1, d1, ...] (a tile's index outside
 * the element's), summed over the tiles */
pp_status pp_grad_tile(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    int64_t rep[PP_MAX_DIMS];
    int nr = 0;
    PP_TRY(const_ints(ad, node, 1, "input 'repeats'", rep, PP_MAX_DIMS, &nr, err));
    if (nr != xs.rank) return pp_ad_fail(ad, node, err, "'repeats' has %d values for rank %d", nr, xs.rank);
    pp_shape split = {.rank = 0};
    int64_t axes[PP_MAX_DIMS];
    int na = 0;
    for (int d = 0; d < xs.rank; d++) {
        if (rep[d] != 1) {
            if (split.rank >= PP_MAX_DIMS) goto too_many;
            axes[na++] = split.rank;
            split.dim[split.rank++] = rep[d];
        }
        if (split.rank >= PP_MAX_DIMS) goto too_many;
        split.dim[split.rank++] = xs.dim[d];
    }
    if (!na) return pp_ad_give(ad, x, gy, err);
    int s, r;
    PP_TRY(pp_ad_reshape(ad, gy, &split, &s, err));
    PP_TRY(pp_ad_reduce_sum(ad, s, axes, na, false, &r, err));
    return pp_ad_give(ad, x, r, err);
too_many:
    return pp_ad_fail(ad, node, err, "the gradient would need more than %d dims (%d tiled axes of rank %d)", PP_MAX_DIMS,
                      na, xs.rank);
}

/* Einsum: operand i's gradient is the einsum of the output's gradient with
 * the other operands into operand i's labels ("out,s_j...->s_i"). The
 * labels of '...' get letters of their own; a '...' dim of 1 that
 * broadcasts, and a label only operand i has, are summed away by that
 * einsum and put back by a Reshape and an Expand. A label repeated within
 * operand i (a diagonal) is refused. */
pp_status pp_grad_einsum(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    pp_tinfo in[PP_MAX_INPUTS];
    PP_TRY(node_tinfo(ad, node, in, err));
    pp_einsum e;
    pp_err pe = {0};
    const int n_ops = ad_node(ad, node)->n_in;
    if (pp_einsum_parse(pp_node_attrs(g, ad_node(ad, node)), in, n_ops, &e, &pe) != PP_OK)
        return pp_ad_fail(ad, node, err, "%s", pe.msg);
    for (int i = 0; i < n_ops; i++)
        if (in[i].dtype != PP_F32) return pp_ad_fail(ad, node, err, "operand %d is %s; the gradient is f32", i, pp_dtype_name(in[i].dtype));
    /* a letter per label, then a letter per broadcasting '...' dim of 1 */
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    bool taken[52] = {0};
    char of[PP_EINSUM_LABELS];
    for (int l = 0; l < 52; l++) taken[l] = e.used[l], of[l] = letters[l];
    int next = 0;
#define FREE_LETTER(dst)                                                                                   \
    do {                                                                                               \
        while (next < 52 && taken[next]) next++;                                                       \
        if (next >= 52) return pp_ad_fail(ad, node, err, "the gradient's equation needs more than 52 letters"); \
        taken[next] = true;                                                                            \
        (dst) = letters[next];                                                                         \
    } while (0)
    for (int l = 52; l < PP_EINSUM_LABELS; l++)
        if (e.used[l]) FREE_LETTER(of[l]);
    char term[PP_EINSUM_MAX_OPS][PP_MAX_DIMS + 1], out[PP_MAX_DIMS + 1];
    for (int i = 0; i < n_ops; i++) {
        for (int d = 0; d < e.rank[i]; d++) {
            const int l = e.lab[i][d];
            if (l >= 52 && in[i].shape.dim[d] == 1 && e.size[l] != 1) FREE_LETTER(term[i][d]);
            else term[i][d] = of[l];
        }
        term[i][e.rank[i]] = 0;
    }
#undef FREE_LETTER
    for (int d = 0; d < e.out_rank; d++) out[d] = of[e.out_lab[d]];
    out[e.out_rank] = 0;
    const int gy = pp_ad_gy(ad, node, 0);
    for (int i = 0; i < n_ops; i++) {
        const int x = ad_node(ad, node)->in[i];
        if (!pp_ad_wants(ad, x)) continue;
        const pp_shape xs = g->values[x].shape;
        for (int d = 0; d < e.rank[i]; d++)
            if (strchr(term[i] + d + 1, term[i][d]))
                return pp_ad_fail(ad, node, err, "operand %d repeats the label '%c' (a diagonal): no gradient rule", i,
                                  term[i][d]);
        /* the labels of operand i that the output or another operand has */
        char keep[PP_MAX_DIMS + 1];
        int nk = 0;
        pp_shape kept = xs;
        bool dropped = false;
        for (int d = 0; d < e.rank[i]; d++) {
            bool elsewhere = strchr(out, term[i][d]) != NULL;
            for (int j = 0; j < n_ops && !elsewhere; j++) elsewhere = j != i && strchr(term[j], term[i][d]);
            if (elsewhere) keep[nk++] = term[i][d];
            else kept.dim[d] = 1, dropped = true;
        }
        keep[nk] = 0;
        char eq[8 * (PP_MAX_DIMS + 2) + PP_MAX_DIMS + 8];
        int len = snprintf(eq, sizeof eq, "%s", out);
        int ops[PP_EINSUM_MAX_OPS], no = 0;
        ops[no++] = gy;
        for (int j = 0; j < n_ops; j++)
            if (j != i) {
                len += snprintf(eq + len, sizeof eq - (size_t)len, ",%s", term[j]);
                ops[no++] = ad_node(ad, node)->in[j];
            }
        snprintf(eq + len, sizeof eq - (size_t)len, "->%s", keep);
        const pp_attr a = pp_ad_attr_str("equation", eq);
        int r;
        PP_TRY(pp_ad_emit(ad, PP_OP_EINSUM, ops, no, &a, 1, &r, 1, err));
        if (dropped) {
            int s, sh;
            PP_TRY(pp_ad_reshape(ad, r, &kept, &s, err));
            r = s;
            bool expand = false;
            for (int d = 0; d < xs.rank; d++) expand |= kept.dim[d] != xs.dim[d];
            if (expand) {
                PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", xs.dim, xs.rank, &sh, err));
                PP_TRY(pp_ad_op2(ad, PP_OP_EXPAND, s, sh, &r, err));
            }
        }
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    return PP_OK;
}
