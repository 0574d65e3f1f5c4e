/* grad_nn.c: gradient rules of the network ops: Conv, pools, Gemm, MatMul,
 * Softmax and LogSoftmax (autodiff.h). */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "../ir/op_fns.h"
#include "../ir/shape_nn.h"

static const pp_node *ad_node(pp_ad *ad, int node) { return &pp_ad_graph(ad)->nodes[node]; }

/* The forward node's attributes plus 'shape' = shape (for the backward ops
 * that take a forward op's attributes). */
static int with_shape(const pp_node *n, const pp_shape *s, pp_attr *a, int max) {
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < max - 1; k++) a[na++] = n->attrs[k];
    a[na++] = pp_ad_attr_ints("shape", s->dim, s->rank);
    return na;
}

pp_status pp_grad_conv(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], w = n->in[1], b = n->n_in > 2 ? n->in[2] : -1, gy = pp_ad_gy(ad, node, 0);
    pp_attr a[16];
    if (pp_ad_wants(ad, x)) {
        const pp_shape xs = g->values[x].shape;
        const int na = with_shape(n, &xs, a, 16);
        const int in[2] = {gy, w};
        int r;
        PP_TRY(pp_ad_emit(ad, PP_OP_CONVGRADX, in, 2, a, na, &r, 1, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
        n = ad_node(ad, node);
    }
    if (pp_ad_wants(ad, w)) {
        const pp_shape ws = g->values[w].shape;
        const int na = with_shape(n, &ws, a, 16);
        const int in[2] = {gy, x};
        int r;
        PP_TRY(pp_ad_emit(ad, PP_OP_CONVGRADW, in, 2, a, na, &r, 1, err));
        PP_TRY(pp_ad_give(ad, w, r, err));
        n = ad_node(ad, node);
    }
    if (b >= 0 && pp_ad_wants(ad, b)) {
        const int rank = g->values[gy].shape.rank;
        int64_t axes[PP_MAX_DIMS];
        int na = 0;
        for (int i = 0; i < rank; i++)
            if (i != 1) axes[na++] = i;
        int r;
        PP_TRY(pp_ad_reduce_sum(ad, gy, axes, na, false, &r, err));
        PP_TRY(pp_ad_give(ad, b, r, err));
    }
    return PP_OK;
}

pp_status pp_grad_maxpool(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    if (pp_ad_gy(ad, node, 1) >= 0) return pp_ad_fail(ad, node, err, "its Indices output has no gradient");
    const int in[2] = {pp_ad_gy(ad, node, 0), n->in[0]};
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_MAXPOOLGRAD, in, 2, n->attrs, n->n_attrs, &r, 1, err));
    return pp_ad_give(ad, in[1], r, err);
}

/* y[n, c] = mean of x[n, c, ...]: each element gets gy / S */
pp_status pp_grad_globalavgpool(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    const pp_shape xs = g->values[x].shape;
    double S = 1;
    for (int i = 2; i < xs.rank; i++) S *= (double)xs.dim[i];
    int k, m, shape, e;
    PP_TRY(pp_ad_scalar(ad, (float)(1.0 / S), &k, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, pp_ad_gy(ad, node, 0), k, &m, err));
    PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", xs.dim, xs.rank, &shape, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EXPAND, m, shape, &e, err));
    return pp_ad_give(ad, x, e, err);
}

static pp_status gemm_op(pp_ad *ad, int a, int b, float alpha, int ta, int tb, int *out, pp_err *err) {
    const pp_attr at[3] = {pp_ad_attr_float("alpha", alpha), pp_ad_attr_int("transA", ta), pp_ad_attr_int("transB", tb)};
    const int in[2] = {a, b};
    return pp_ad_emit(ad, PP_OP_GEMM, in, 2, at, 3, out, 1, err);
}

/* Y = alpha A' B' + beta C, A' = A or its transpose (transA), B' likewise */
pp_status pp_grad_gemm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const pp_attrs at = pp_node_attrs(g, n);
    float alpha, beta;
    int64_t ta, tb;
    PP_TRY(pp_attr_float(at, "alpha", 1.0f, &alpha, err));
    PP_TRY(pp_attr_float(at, "beta", 1.0f, &beta, err));
    PP_TRY(pp_attr_int(at, "transA", 0, &ta, err));
    PP_TRY(pp_attr_int(at, "transB", 0, &tb, err));
    const int A = n->in[0], B = n->in[1], C = n->n_in > 2 ? n->in[2] : -1, gy = pp_ad_gy(ad, node, 0);
    static const int64_t swap[2] = {1, 0};
    if (pp_ad_wants(ad, A)) {
        /* dA' = alpha gy B'^T; dA = dA' or its transpose */
        int r;
        if (!ta) PP_TRY(gemm_op(ad, gy, B, alpha, 0, !tb, &r, err));
        else PP_TRY(gemm_op(ad, B, gy, alpha, (int)tb, 1, &r, err)); /* B' gy^T */
        PP_TRY(pp_ad_give(ad, A, r, err));
    }
    if (pp_ad_wants(ad, B)) {
        /* dB' = alpha A'^T gy; dB = dB' or its transpose */
        int r;
        if (!tb) PP_TRY(gemm_op(ad, A, gy, alpha, !ta, 0, &r, err));
        else PP_TRY(gemm_op(ad, gy, A, alpha, 1, (int)ta, &r, err)); /* gy^T A' */
        PP_TRY(pp_ad_give(ad, B, r, err));
    }
    (void)swap;
    if (C >= 0 && pp_ad_wants(ad, C)) {
        int gc = gy;
        if (beta != 1.0f) {
            int k;
            PP_TRY(pp_ad_scalar(ad, beta, &k, err));
            PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, k, &gc, err));
        }
        int r;
        PP_TRY(pp_ad_unbroadcast(ad, gc, C, &r, err));
        PP_TRY(pp_ad_give(ad, C, r, err));
    }
    return PP_OK;
}

/* the last two axes of a rank-r value swapped */
static pp_status t_last2(pp_ad *ad, int x, int *out, pp_err *err) {
    const int r = pp_ad_graph(ad)->values[x].shape.rank;
    int64_t perm[PP_MAX_DIMS];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    return pp_ad_transpose(ad, x, perm, r, out, err);
}

/* NumPy matmul: 1-D operands are made [1, K] and [K, 1] and the gradient of
 * the result taken in that form */
pp_status pp_grad_matmul(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    int A = n->in[0], B = n->in[1];
    const int A0 = A, B0 = B;
    int gy = pp_ad_gy(ad, node, 0);
    const pp_shape as = g->values[A].shape, bs = g->values[B].shape;
    if (as.rank == 1) {
        const pp_shape s = {.rank = 2, .dim = {1, as.dim[0]}};
        PP_TRY(pp_ad_reshape(ad, A, &s, &A, err));
    }
    if (bs.rank == 1) {
        const pp_shape s = {.rank = 2, .dim = {bs.dim[0], 1}};
        PP_TRY(pp_ad_reshape(ad, B, &s, &B, err));
    }
    if (as.rank == 1 || bs.rank == 1) {
        /* gy in the 2-D form: the broadcast batch dims, then M, N */
        const pp_shape a2 = g->values[A].shape, b2 = g->values[B].shape;
        pp_shape ba = a2, bb = b2, o;
        ba.rank -= 2, bb.rank -= 2;
        PP_TRY(pp_broadcast(&ba, &bb, &o, err));
        o.dim[o.rank] = a2.dim[a2.rank - 2], o.dim[o.rank + 1] = b2.dim[b2.rank - 1];
        o.rank += 2;
        PP_TRY(pp_ad_reshape(ad, gy, &o, &gy, err));
    }
    if (pp_ad_wants(ad, A0)) {
        int bt, r, u;
        PP_TRY(t_last2(ad, B, &bt, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MATMUL, gy, bt, &r, err));
        PP_TRY(pp_ad_unbroadcast(ad, r, A, &u, err));
        if (A != A0) PP_TRY(pp_ad_reshape(ad, u, &as, &u, err));
        PP_TRY(pp_ad_give(ad, A0, u, err));
    }
    const pp_shape a = g->values[A].shape, b = g->values[B].shape;
    if (pp_ad_wants(ad, B0) && b.rank == 2 && a.rank > 2) {
        /* a weight against rows of any batch shape (a Linear on [N, T, K]): one product over every row,
         * [rows, K]^T [rows, N] as PyTorch's Linear takes it, not a product per batch index summed
         * afterwards, which holds batch x K x N (0.47 GB a sample for ConvNeXt-XL's last MLPs) */
        int64_t rows = 1;
        for (int i = 0; i < a.rank - 1; i++) rows *= a.dim[i];
        const pp_shape a2 = {.rank = 2, .dim = {rows, a.dim[a.rank - 1]}}, g2 = {.rank = 2, .dim = {rows, b.dim[1]}};
        int ar, gr, u;
        PP_TRY(pp_ad_reshape(ad, A, &a2, &ar, err));
        PP_TRY(pp_ad_reshape(ad, gy, &g2, &gr, err));
        PP_TRY(gemm_op(ad, ar, gr, 1.0f, 1, 0, &u, err));
        if (B != B0) PP_TRY(pp_ad_reshape(ad, u, &bs, &u, err));
        PP_TRY(pp_ad_give(ad, B0, u, err));
    } else if (pp_ad_wants(ad, B0)) {
        int at, r, u;
        PP_TRY(t_last2(ad, A, &at, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MATMUL, at, gy, &r, err));
        PP_TRY(pp_ad_unbroadcast(ad, r, B, &u, err));
        if (B != B0) PP_TRY(pp_ad_reshape(ad, u, &bs, &u, err));
        PP_TRY(pp_ad_give(ad, B0, u, err));
    }
    return PP_OK;
}

static pp_status softmax_axis(pp_ad *ad, int node, int64_t *axis, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "axis", -1, axis, err));
    const int r = g->values[n->in[0]].shape.rank;
    if (*axis < 0) *axis += r;
    if (*axis < 0 || *axis >= r) return pp_ad_fail(ad, node, err, "axis out of range");
    return PP_OK;
}

/* dx = y (gy - sum(gy y)) over the axis */
pp_status pp_grad_softmax(pp_ad *ad, int node, pp_err *err) {
    int64_t axis;
    PP_TRY(softmax_axis(ad, node, &axis, err));
    const int y = ad_node(ad, node)->out[0], x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    int m, s, d, r;
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y, &m, err));
    PP_TRY(pp_ad_reduce_sum(ad, m, &axis, 1, true, &s, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_SUB, gy, s, &d, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, y, d, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* dx = gy - exp(y) sum(gy) over the axis */
pp_status pp_grad_logsoftmax(pp_ad *ad, int node, pp_err *err) {
    int64_t axis;
    PP_TRY(softmax_axis(ad, node, &axis, err));
    const int y = ad_node(ad, node)->out[0], x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    int s, e, m, r;
    PP_TRY(pp_ad_reduce_sum(ad, gy, &axis, 1, true, &s, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_EXP, y, &e, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, e, s, &m, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_SUB, gy, m, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* BatchNormalization: pp.BatchNormGrad, in training mode over the batch's
 * own statistics; the running statistics' outputs carry no gradient */
pp_status pp_grad_batchnorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    for (int k = 1; k < n->n_out; k++)
        if (pp_ad_gy(ad, node, k) >= 0) return pp_ad_fail(ad, node, err, "its statistics' outputs have no gradient");
    float eps;
    PP_TRY(pp_attr_float(pp_node_attrs(g, n), "epsilon", 1e-5f, &eps, err));
    const bool training = pp_bn_training(pp_node_attrs(g, n), n->n_out);
    const pp_attr a[2] = {pp_ad_attr_float("epsilon", eps), pp_ad_attr_int("training_mode", training)};
    const int in[5] = {pp_ad_gy(ad, node, 0), n->in[0], n->in[1], n->in[3], n->in[4]};
    const int X = n->in[0], sc = n->in[1], B = n->in[2];
    int r[3];
    PP_TRY(pp_ad_emit(ad, PP_OP_BATCHNORMGRAD, in, 5, a, 2, r, 3, err));
    PP_TRY(pp_ad_give(ad, X, r[0], err));
    PP_TRY(pp_ad_give(ad, sc, r[1], err));
    return pp_ad_give(ad, B, r[2], err);
}

/* ---- normalizations and pools (issue 55, part A) --------------------------------------------- */

/* The outputs past the first (running or saved statistics) have no gradient. */
static pp_status stats_outputs(pp_ad *ad, int node, const char *what, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    for (int k = 1; k < n->n_out; k++)
        if (pp_ad_gy(ad, node, k) >= 0)
            return pp_ad_fail(ad, node, err, "its output %d (%s) is read on the way to the loss; it has no gradient",
                              k, what);
    return PP_OK;
}

/* give X, scale and B the three outputs of a normalization's backward op */
static pp_status give3(pp_ad *ad, const int *v, const int *r, pp_err *err) {
    for (int k = 0; k < 3; k++)
        if (v[k] >= 0) PP_TRY(pp_ad_give(ad, v[k], r[k], err));
    return PP_OK;
}

pp_status pp_grad_instancenorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    float eps;
    PP_TRY(pp_attr_float(pp_node_attrs(g, n), "epsilon", 1e-5f, &eps, err));
    const pp_attr a = pp_ad_attr_float("epsilon", eps);
    const int in[3] = {pp_ad_gy(ad, node, 0), n->in[0], n->in[1]};
    const int v[3] = {n->in[0], n->in[1], n->in[2]};
    int r[3];
    PP_TRY(pp_ad_emit(ad, PP_OP_INSTANCENORMGRAD, in, 3, &a, 1, r, 3, err));
    return give3(ad, v, r, err);
}

/* pp.LayerNormGrad over scale of X's dims [axis, rank): a broadcast scale is
 * expanded to them, and its gradient (and B's) summed back */
pp_status pp_grad_layernorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    PP_TRY(stats_outputs(ad, node, "Mean or InvStdDev", err));
    const pp_node *n = ad_node(ad, node);
    int axis;
    float eps;
    int64_t outer, inner;
    PP_TRY(pp_norm_rows(pp_node_attrs(g, n), &g->values[n->in[0]].shape, &axis, &eps, &outer, &inner, err));
    const pp_shape xs = g->values[n->in[0]].shape;
    pp_shape tail = {.rank = xs.rank - axis};
    for (int i = axis; i < xs.rank; i++) tail.dim[i - axis] = xs.dim[i];
    const int x = n->in[0], scale = n->in[1], B = n->n_in > 2 ? n->in[2] : -1;
    int sc = scale;
    const pp_shape ss = g->values[scale].shape;
    bool same = ss.rank == tail.rank;
    for (int i = 0; same && i < ss.rank; i++) same = ss.dim[i] == tail.dim[i];
    if (!same) {
        int sh;
        PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", tail.dim, tail.rank, &sh, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_EXPAND, scale, sh, &sc, err));
    }
    const pp_attr a[2] = {pp_ad_attr_int("axis", axis), pp_ad_attr_float("epsilon", eps)};
    const int in[3] = {pp_ad_gy(ad, node, 0), x, sc};
    int r[3];
    PP_TRY(pp_ad_emit(ad, PP_OP_LAYERNORMGRAD, in, 3, a, 2, r, 3, err));
    PP_TRY(pp_ad_give(ad, x, r[0], err));
    if (pp_ad_wants(ad, scale)) {
        int u;
        PP_TRY(pp_ad_unbroadcast(ad, r[1], scale, &u, err));
        PP_TRY(pp_ad_give(ad, scale, u, err));
    }
    if (B >= 0 && pp_ad_wants(ad, B)) {
        int u;
        PP_TRY(pp_ad_unbroadcast(ad, r[2], B, &u, err));
        PP_TRY(pp_ad_give(ad, B, u, err));
    }
    return PP_OK;
}

pp_status pp_grad_avgpool(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    pp_attr a[16];
    if (n->n_attrs > 15)
        return pp_ad_fail(ad, node, err, "it has %d attributes, more than AveragePool has", n->n_attrs);
    const int na = with_shape(n, &xs, a, 16);
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_AVGPOOLGRAD, &gy, 1, a, na, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* LpPool: y = (sum over a window of |x|^p)^(1/p), so each window holding x
 * adds gy y^(1-p) sign(x) |x|^(p-1): the gradient is sign(x) |x|^(p-1)
 * times the window sums' adjoint (pp.AvgPoolGrad with sum=1, the pool's
 * geometry) of gy y^(1-p). A window of zeros makes y^(1-p) infinite and
 * its elements' gradients NaN, as PyTorch's lp_pool does. */
pp_status pp_grad_lppool(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    int64_t p;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "p", 2, &p, err));
    if (p < 1 || p > 64) return pp_ad_fail(ad, node, err, "p=%lld: the gradient rule takes p from 1 to 64", (long long)p);
    pp_attr a[16];
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < 14; k++)
        if (strcmp(n->attrs[k].name, "p")) a[na++] = n->attrs[k];
    a[na++] = pp_ad_attr_ints("shape", xs.dim, xs.rank);
    a[na++] = pp_ad_attr_int("sum", 1);
    int gz = gy, s, f;
    if (p > 1) {
        int e, yp;
        PP_TRY(pp_ad_scalar(ad, (float)(1 - p), &e, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_POW, y, e, &yp, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, yp, &gz, err));
    }
    PP_TRY(pp_ad_emit(ad, PP_OP_AVGPOOLGRAD, &gz, 1, a, na, &s, 1, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_SIGN, x, &f, err));
    if (p > 1) {
        int ab, e, ap, sf;
        PP_TRY(pp_ad_op1(ad, PP_OP_ABS, x, &ab, err));
        PP_TRY(pp_ad_scalar(ad, (float)(p - 1), &e, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_POW, ab, e, &ap, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, f, ap, &sf, err));
        f = sf;
    }
    int r;
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, f, s, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* LpNormalization: y = x / n with n = ||x||_p along the axis, so
 * dx = (gy - d sum(gy y)) / n with d = y for p = 2 and sign(x) for p = 1
 * (the sum along the axis, kept); a line of zeros gives NaN, as its y */
pp_status pp_grad_lpnorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    int64_t axis, p;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "axis", -1, &axis, err));
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "p", 2, &p, err));
    const int rank = g->values[x].shape.rank;
    if (axis < 0) axis += rank;
    if (p != 1 && p != 2) return pp_ad_fail(ad, node, err, "p=%lld: LpNormalization takes 1 or 2", (long long)p);
    const pp_attr ax = pp_ad_attr_ints("axes", &axis, 1), kd = pp_ad_attr_int("keepdims", 1);
    const pp_attr ra[2] = {ax, kd};
    int nrm, gyy, sm, d, t, u, r;
    PP_TRY(pp_ad_emit(ad, p == 2 ? PP_OP_REDUCEL2 : PP_OP_REDUCEL1, &x, 1, ra, 2, &nrm, 1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y, &gyy, err));
    PP_TRY(pp_ad_reduce_sum(ad, gyy, &axis, 1, true, &sm, err));
    if (p == 2) d = y;
    else PP_TRY(pp_ad_op1(ad, PP_OP_SIGN, x, &d, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, d, sm, &t, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_SUB, gy, t, &u, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, u, nrm, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* GridSample(X, grid): pp.GridSampleGrad gives both gradients at once
 * (the taps found once); each goes where one is wanted */
pp_status pp_grad_gridsample(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], grid = n->in[1];
    const pp_attr *at = n->attrs;
    const int n_at = n->n_attrs;
    const int in[3] = {pp_ad_gy(ad, node, 0), x, grid};
    int r[2];
    PP_TRY(pp_ad_emit(ad, PP_OP_GRIDSAMPLEGRAD, in, 3, at, n_at, r, 2, err));
    if (pp_ad_wants(ad, x)) PP_TRY(pp_ad_give(ad, x, r[0], err));
    if (pp_ad_wants(ad, grid)) PP_TRY(pp_ad_give(ad, grid, r[1], err));
    return PP_OK;
}

/* GlobalMaxPool is MaxPool with the whole plane as its window: pp.MaxPoolGrad
 * routes each plane's gradient to its first largest element, as PyTorch's
 * adaptive_max_pool does */
pp_status pp_grad_globalmaxpool(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    const pp_shape xs = g->values[x].shape;
    if (xs.rank < 3) return pp_ad_fail(ad, node, err, "its input has rank %d; the gradient needs 3 or more", xs.rank);
    if (xs.rank - 2 > 3)
        return pp_ad_fail(ad, node, err, "its input has %d spatial dims; the gradient takes 1 to 3", xs.rank - 2);
    const pp_attr a = pp_ad_attr_ints("kernel_shape", &xs.dim[2], xs.rank - 2);
    const int in[2] = {pp_ad_gy(ad, node, 0), x};
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_MAXPOOLGRAD, in, 2, &a, 1, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* ---- ConvTranspose, GroupNormalization (issue 55, part B) ----------------------------------- */

/* ConvTranspose(x, W) is Conv's input gradient with x in dY's place, over the
 * output's shape: so its own gradients are a Conv of gy (dx, the adjoint of
 * the adjoint) and Conv's weight gradient with x as dY and gy as the input
 * (dW); the bias sums gy over all but the channels. The padding is the one
 * the forward op resolved (auto_pad, output_shape, output_padding). */
pp_status pp_grad_convtranspose(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], w = n->in[1], b = n->n_in > 2 ? n->in[2] : -1, gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape, ws = g->values[w].shape, ys = g->values[gy].shape;
    pp_geom geo;
    int64_t group;
    PP_TRY(pp_convt_geom(pp_node_attrs(g, n), &xs, &ws, &geo, &group, err));
    int64_t st[PP_MAX_DIMS], dl[PP_MAX_DIMS], pd[2 * PP_MAX_DIMS], ks[PP_MAX_DIMS];
    for (int i = 0; i < geo.nsp; i++) {
        st[i] = geo.stride[i], dl[i] = geo.dil[i], ks[i] = geo.k[i];
        pd[i] = geo.pad0[i], pd[geo.nsp + i] = geo.pad1[i];
        /* the Conv of gy must come back to x's size: output_padding below the stride */
        const int64_t span = ys.dim[2 + i] + pd[i] + pd[geo.nsp + i] - dl[i] * (ks[i] - 1) - 1;
        if (span < 0 || span / st[i] + 1 != xs.dim[2 + i])
            return pp_ad_fail(ad, node, err, "spatial dim %d: the output of %lld does not map back onto the "
                              "input's %lld (an output_padding at or above the stride); no gradient rule for it",
                              i, (long long)ys.dim[2 + i], (long long)xs.dim[2 + i]);
    }
    pp_attr a[6] = {pp_ad_attr_ints("strides", st, geo.nsp), pp_ad_attr_ints("dilations", dl, geo.nsp),
                    pp_ad_attr_ints("pads", pd, 2 * geo.nsp), pp_ad_attr_int("group", group),
                    pp_ad_attr_ints("kernel_shape", ks, geo.nsp)};
    if (pp_ad_wants(ad, x)) {
        const int in[2] = {gy, w};
        int r;
        PP_TRY(pp_ad_emit(ad, PP_OP_CONV, in, 2, a, 5, &r, 1, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    if (pp_ad_wants(ad, w)) {
        a[5] = pp_ad_attr_ints("shape", ws.dim, ws.rank);
        const int in[2] = {x, gy};
        int r;
        PP_TRY(pp_ad_emit(ad, PP_OP_CONVGRADW, in, 2, a, 6, &r, 1, err));
        PP_TRY(pp_ad_give(ad, w, r, err));
    }
    if (b >= 0 && pp_ad_wants(ad, b)) {
        int64_t axes[PP_MAX_DIMS];
        int na = 0;
        for (int i = 0; i < ys.rank; i++)
            if (i != 1) axes[na++] = i;
        int r;
        PP_TRY(pp_ad_reduce_sum(ad, gy, axes, na, false, &r, err));
        PP_TRY(pp_ad_give(ad, b, r, err));
    }
    return PP_OK;
}

/* GroupNormalization: x viewed as Z = [N, G, C/G, S] (S the spatial
 * elements), x^ = LayerNormalization of Z over its last two axes (recomputed
 * here), y = x^ scale + bias with scale and bias per group (opset 18) or per
 * channel (opset 21). dbias, dscale: gy and gy x^ summed to the scale's
 * shape; dx: pp.LayerNormGrad of gy scale with unit scale. */
pp_status pp_grad_groupnorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const pp_attrs at = pp_node_attrs(g, n);
    int64_t G;
    float eps;
    PP_TRY(pp_attr_int(at, "num_groups", 1, &G, err));
    PP_TRY(pp_attr_float(at, "epsilon", 1e-5f, &eps, err));
    const bool per_channel = at.opset >= 21;
    const int x = n->in[0], scale = n->in[1], bias = n->in[2], gy = pp_ad_gy(ad, node, 0);
    const pp_shape xs = g->values[x].shape;
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    int64_t S = 1;
    for (int i = 2; i < xs.rank; i++) S *= xs.dim[i];
    const int64_t Cg = xs.dim[1] / G;
    const pp_shape zs = {.rank = 4, .dim = {xs.dim[0], G, Cg, S}};
    const pp_shape ss = {.rank = 4, .dim = {1, G, per_channel ? Cg : 1, 1}};
    const pp_shape one_s = {.rank = 2, .dim = {Cg, S}};
    int xz, gz, sz, ones, xh, dxh, gx;
    PP_TRY(pp_ad_reshape(ad, x, &zs, &xz, err));
    PP_TRY(pp_ad_reshape(ad, gy, &zs, &gz, err));
    PP_TRY(pp_ad_reshape(ad, scale, &ss, &sz, err));
    {
        float *u = malloc((size_t)(Cg * S) * sizeof *u);
        if (!u) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (int64_t i = 0; i < Cg * S; i++) u[i] = 1.0f;
        const pp_status s = pp_graph_add_const(g, "grad_groupnorm_ones", PP_F32, &one_s, u, &ones, err);
        free(u);
        PP_TRY(s);
    }
    const pp_attr la[2] = {pp_ad_attr_int("axis", 2), pp_ad_attr_float("epsilon", eps)};
    const int lin[2] = {xz, ones};
    PP_TRY(pp_ad_emit(ad, PP_OP_LAYERNORM, lin, 2, la, 2, &xh, 1, err));
    if (pp_ad_wants(ad, bias)) {
        int u, r;
        PP_TRY(pp_ad_unbroadcast(ad, gz, sz, &u, err));
        PP_TRY(pp_ad_reshape(ad, u, &g->values[bias].shape, &r, err));
        PP_TRY(pp_ad_give(ad, bias, r, err));
    }
    if (pp_ad_wants(ad, scale)) {
        int m, u, r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gz, xh, &m, err));
        PP_TRY(pp_ad_unbroadcast(ad, m, sz, &u, err));
        PP_TRY(pp_ad_reshape(ad, u, &g->values[scale].shape, &r, err));
        PP_TRY(pp_ad_give(ad, scale, r, err));
    }
    if (pp_ad_wants(ad, x)) {
        int r[3];
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gz, sz, &dxh, err));
        const int in[3] = {dxh, xz, ones};
        PP_TRY(pp_ad_emit(ad, PP_OP_LAYERNORMGRAD, in, 3, la, 2, r, 3, err));
        PP_TRY(pp_ad_reshape(ad, r[0], &xs, &gx, err));
        PP_TRY(pp_ad_give(ad, x, gx, err));
    }
    return PP_OK;
}

/* Resize: pp.ResizeGrad over the forward's roi, scales and sizes and its
 * attributes (any mode: the taps' weights transposed) */
pp_status pp_grad_resize(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    const pp_shape xs = g->values[x].shape;
    pp_attr a[16];
    if (n->n_attrs > 15) return pp_ad_fail(ad, node, err, "it has %d attributes, more than Resize has", n->n_attrs);
    const int na = with_shape(n, &xs, a, 16);
    int in[4] = {pp_ad_gy(ad, node, 0), -1, -1, -1};
    const int n_in = n->n_in;
    for (int k = 1; k < n_in && k < 4; k++) in[k] = n->in[k];
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_RESIZEGRAD, in, n_in < 4 ? n_in : 4, a, na, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* RotaryEmbedding: each pair (x1, x2) turns by its angle (y1 = x1 cos -
 * x2 sin, y2 = x2 cos + x1 sin), a linear map whose transpose turns by the
 * opposite angle: the gradient is the same op on gy with the sine negated
 * (the same attributes and positions). The caches take none: a weight that
 * trains reaching them is refused. */
pp_status pp_grad_rotaryembedding(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], cs = n->in[1], sn = n->in[2], pos = n->n_in > 3 ? n->in[3] : -1;
    const pp_attr *at = n->attrs;
    const int n_at = n->n_attrs;
    if (pp_ad_wants(ad, cs) || pp_ad_wants(ad, sn))
        return pp_ad_fail(ad, node, err, "its cos or sin cache is computed from a weight that trains: the gradient "
                          "rule takes the input X's gradient only (freeze that weight with --freeze)");
    int neg, r;
    PP_TRY(pp_ad_op1(ad, PP_OP_NEG, sn, &neg, err));
    const int in[4] = {pp_ad_gy(ad, node, 0), cs, neg, pos};
    PP_TRY(pp_ad_emit(ad, PP_OP_ROTARYEMBEDDING, in, pos >= 0 ? 4 : 3, at, n_at, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* Attention (opset 23): pp.AttentionGrad, which recomputes each row's
 * probabilities; a float mask that trains (a learned position bias) takes
 * dS summed back over its broadcast dims. Its present_key, present_value and
 * qk outputs pass no gradient, nor do the past key and value get one. */
pp_status pp_grad_attention(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    for (int k = 1; k < n->n_out; k++)
        if (pp_ad_gy(ad, node, k) >= 0)
            return pp_ad_fail(ad, node, err, "its output %d (present key/value or the scores) is read on the way to "
                              "the loss; only the output Y has a gradient rule", k);
    const int n_in = n->n_in;
    int in[8] = {pp_ad_gy(ad, node, 0), -1, -1, -1, -1, -1, -1, -1};
    for (int k = 0; k < n_in && k < 7; k++) in[1 + k] = n->in[k];
    for (int k = 4; k < 6 && k < n_in; k++)
        if (pp_ad_wants(ad, n->in[k]))
            return pp_ad_fail(ad, node, err, "its past_%s needs a gradient; the rule gives Q, K, V and the mask theirs",
                              k == 4 ? "key" : "value");
    const int mask = n_in > 3 ? n->in[3] : -1;
    const bool mask_grad = mask >= 0 && pp_ad_wants(ad, mask);
    if (mask_grad) {
        const pp_value *mv = &g->values[mask];
        const pp_value *kv = &g->values[n->in[1]];
        /* T: the keys (no past here when the mask trains: checked below) */
        const int64_t T = kv->shape.rank == 4 ? kv->shape.dim[2] : kv->shape.dim[1];
        if (mv->dtype != PP_F32 || mv->shape.rank < 1 || mv->shape.dim[mv->shape.rank - 1] != T ||
            (n_in > 4 && n->in[4] >= 0))
            return pp_ad_fail(ad, node, err, "its attn_mask trains: the rule takes a float mask over all %lld keys "
                              "and no past", (long long)T);
    }
    pp_attr a[16];
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < 16; k++) a[na++] = n->attrs[k];
    const int q = n->in[0], k_ = n->in[1], v = n->in[2];
    int r[4];
    PP_TRY(pp_ad_emit(ad, PP_OP_ATTENTIONGRAD, in, 1 + (n_in < 7 ? n_in : 7), a, na, r, mask_grad ? 4 : 3, err));
    const int vals[3] = {q, k_, v};
    for (int k = 0; k < 3; k++)
        if (pp_ad_wants(ad, vals[k])) PP_TRY(pp_ad_give(ad, vals[k], r[k], err));
    if (mask_grad) {
        int u;
        PP_TRY(pp_ad_unbroadcast(ad, r[3], mask, &u, err));
        PP_TRY(pp_ad_give(ad, mask, u, err));
    }
    return PP_OK;
}

/* RMSNormalization (opset 23) over X's dims [axis, rank): r = 1 /
 * sqrt(mean(x^2) + eps), x^ = x r, y = x^ scale. dscale: gy x^ summed to the
 * scale's shape; dx = r (d - x^ mean(d x^)), d = gy scale (means over the
 * normalized dims; r recomputed here) */
pp_status pp_grad_rmsnorm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], scale = n->in[1], gy = pp_ad_gy(ad, node, 0);
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    int axis;
    float eps;
    int64_t outer, inner;
    const pp_shape xs = g->values[x].shape;
    PP_TRY(pp_norm_rows(pp_node_attrs(g, n), &xs, &axis, &eps, &outer, &inner, err));
    int64_t axes[PP_MAX_DIMS];
    int na = 0;
    for (int i = axis; i < xs.rank; i++) axes[na++] = i;
    int sq, ss, inv_n, ms, e, me, rt, r, xh;
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, x, x, &sq, err));
    PP_TRY(pp_ad_reduce_sum(ad, sq, axes, na, true, &ss, err));
    PP_TRY(pp_ad_scalar(ad, (float)(1.0 / (double)(inner ? inner : 1)), &inv_n, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, ss, inv_n, &ms, err));
    PP_TRY(pp_ad_scalar(ad, eps, &e, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, ms, e, &me, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_SQRT, me, &rt, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_RECIPROCAL, rt, &r, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, x, r, &xh, err));
    if (pp_ad_wants(ad, scale)) {
        int m, u;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, xh, &m, err));
        PP_TRY(pp_ad_unbroadcast(ad, m, scale, &u, err));
        PP_TRY(pp_ad_give(ad, scale, u, err));
    }
    if (pp_ad_wants(ad, x)) {
        int d, dx, s, mdx, t, df, out;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, scale, &d, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, d, xh, &dx, err));
        PP_TRY(pp_ad_reduce_sum(ad, dx, axes, na, true, &s, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, s, inv_n, &mdx, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, xh, mdx, &t, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_SUB, d, t, &df, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, df, r, &out, err));
        PP_TRY(pp_ad_give(ad, x, out, err));
    }
    return PP_OK;
}

/* LSTM: pp.LSTMGrad (back through time over the recomputed sequence) for
 * the common form: default activations, no clip, no input_forget, no
 * peepholes (its shape function refuses the rest, named) */
pp_status pp_grad_lstm(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    if (n->n_in > 7 && n->in[7] >= 0) return pp_ad_fail(ad, node, err, "peepholes (input P) have no gradient rule");
    {
        const pp_attrs at = pp_node_attrs(pp_ad_graph(ad), n);
        int64_t inf;
        PP_TRY(pp_attr_int(at, "input_forget", 0, &inf, err));
        if (pp_attr_find(at, "clip") || inf)
            return pp_ad_fail(ad, node, err, "its %s has no gradient rule", inf ? "input_forget" : "clip");
        const pp_attr *acts = pp_attr_find(at, "activations");
        static const char *const dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
        for (int k = 0; acts && k < acts->n; k++)
            if (acts->type != PP_ATTR_STRINGS || strcmp(acts->strs[k], dflt[k % 3]))
                return pp_ad_fail(ad, node, err, "activations other than Sigmoid, Tanh, Tanh have no gradient rule");
    }
    int in[10] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    const int n_fwd = n->n_in < 7 ? n->n_in : 7;
    int v[7];
    for (int k = 0; k < 7; k++) v[k] = in[k] = k < n_fwd ? n->in[k] : -1;
    for (int k = 0; k < 3; k++) in[7 + k] = pp_ad_gy(ad, node, k);
    pp_attr a[16];
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < 16; k++) a[na++] = n->attrs[k];
    int r[6];
    pp_status s = pp_ad_emit(ad, PP_OP_LSTMGRAD, in, 10, a, na, r, 6, err);
    if (s != PP_OK) return pp_ad_fail(ad, node, err, "%s", err->msg);
    /* X, W, R, B; sequence_lens has none; initial_h, initial_c */
    static const int slot[7] = {0, 1, 2, 3, -1, 4, 5};
    for (int k = 0; k < 7; k++)
        if (slot[k] >= 0 && v[k] >= 0 && pp_ad_wants(ad, v[k])) PP_TRY(pp_ad_give(ad, v[k], r[slot[k]], err));
    return PP_OK;
}

/* GRU: pp.GRUGrad, as LSTM's (default activations, no clip; both
 * linear_before_reset forms) */
pp_status pp_grad_gru(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    {
        const pp_attrs at = pp_node_attrs(pp_ad_graph(ad), n);
        if (pp_attr_find(at, "clip")) return pp_ad_fail(ad, node, err, "its clip has no gradient rule");
        const pp_attr *acts = pp_attr_find(at, "activations");
        static const char *const dflt[2] = {"Sigmoid", "Tanh"};
        for (int k = 0; acts && k < acts->n; k++)
            if (acts->type != PP_ATTR_STRINGS || strcmp(acts->strs[k], dflt[k % 2]))
                return pp_ad_fail(ad, node, err, "activations other than Sigmoid, Tanh have no gradient rule");
    }
    int in[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    const int n_fwd = n->n_in < 6 ? n->n_in : 6;
    int v[6];
    for (int k = 0; k < 6; k++) v[k] = in[k] = k < n_fwd ? n->in[k] : -1;
    for (int k = 0; k < 2; k++) in[6 + k] = pp_ad_gy(ad, node, k);
    pp_attr a[16];
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < 16; k++) a[na++] = n->attrs[k];
    int r[5];
    pp_status s = pp_ad_emit(ad, PP_OP_GRUGRAD, in, 8, a, na, r, 5, err);
    if (s != PP_OK) return pp_ad_fail(ad, node, err, "%s", err->msg);
    static const int slot[6] = {0, 1, 2, 3, -1, 4}; /* X, W, R, B; sequence_lens has none; initial_h */
    for (int k = 0; k < 6; k++)
        if (slot[k] >= 0 && v[k] >= 0 && pp_ad_wants(ad, v[k])) PP_TRY(pp_ad_give(ad, v[k], r[slot[k]], err));
    return PP_OK;
}

/* RNN: pp.RNNGrad (activation Tanh or Relu, no clip) */
pp_status pp_grad_rnn(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    {
        const pp_attrs at = pp_node_attrs(pp_ad_graph(ad), n);
        if (pp_attr_find(at, "clip")) return pp_ad_fail(ad, node, err, "its clip has no gradient rule");
        const pp_attr *acts = pp_attr_find(at, "activations");
        for (int k = 0; acts && k < acts->n; k++)
            if (acts->type != PP_ATTR_STRINGS || (strcmp(acts->strs[k], "Tanh") && strcmp(acts->strs[k], "Relu")))
                return pp_ad_fail(ad, node, err, "activations other than Tanh and Relu have no gradient rule");
    }
    int in[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    const int n_fwd = n->n_in < 6 ? n->n_in : 6;
    int v[6];
    for (int k = 0; k < 6; k++) v[k] = in[k] = k < n_fwd ? n->in[k] : -1;
    for (int k = 0; k < 2; k++) in[6 + k] = pp_ad_gy(ad, node, k);
    pp_attr a[16];
    int na = 0;
    for (int k = 0; k < n->n_attrs && na < 16; k++) a[na++] = n->attrs[k];
    int r[5];
    pp_status s = pp_ad_emit(ad, PP_OP_RNNGRAD, in, 8, a, na, r, 5, err);
    if (s != PP_OK) return pp_ad_fail(ad, node, err, "%s", err->msg);
    static const int slot[6] = {0, 1, 2, 3, -1, 4};
    for (int k = 0; k < 6; k++)
        if (slot[k] >= 0 && v[k] >= 0 && pp_ad_wants(ad, v[k])) PP_TRY(pp_ad_give(ad, v[k], r[slot[k]], err));
    return PP_OK;
}
