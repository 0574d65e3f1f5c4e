/* grad_math.c: gradient rules of the elementwise ops and reductions
 * (ir/ops_math.def, ir/ops_unary.def, the reductions of ops_nn.def). Each
 * rule reads the gradient of its node's outputs and gives each input that
 * wants one its share, undoing broadcasting (autodiff.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"

#define IN(k) (ad_node(ad, node)->in[k])

static const pp_node *ad_node(pp_ad *ad, int node) { return &pp_ad_graph(ad)->nodes[node]; }

/* give input k the gradient gk, summed back to its shape */
static pp_status give_to(pp_ad *ad, int node, int k, int gk, pp_err *err) {
    const int x = IN(k);
    if (!pp_ad_wants(ad, x)) return PP_OK;
    int r;
    PP_TRY(pp_ad_unbroadcast(ad, gk, x, &r, err));
    return pp_ad_give(ad, x, r, err);
}

pp_status pp_grad_identity(pp_ad *ad, int node, pp_err *err) {
    return pp_ad_give(ad, IN(0), pp_ad_gy(ad, node, 0), err);
}

pp_status pp_grad_neg(pp_ad *ad, int node, pp_err *err) {
    int r;
    PP_TRY(pp_ad_op1(ad, PP_OP_NEG, pp_ad_gy(ad, node, 0), &r, err));
    return pp_ad_give(ad, IN(0), r, err);
}

pp_status pp_grad_add(pp_ad *ad, int node, pp_err *err) {
    const int gy = pp_ad_gy(ad, node, 0);
    PP_TRY(give_to(ad, node, 0, gy, err));
    return give_to(ad, node, 1, gy, err);
}

pp_status pp_grad_sub(pp_ad *ad, int node, pp_err *err) {
    const int gy = pp_ad_gy(ad, node, 0);
    PP_TRY(give_to(ad, node, 0, gy, err));
    if (!pp_ad_wants(ad, IN(1))) return PP_OK;
    int ng;
    PP_TRY(pp_ad_op1(ad, PP_OP_NEG, gy, &ng, err));
    return give_to(ad, node, 1, ng, err);
}

pp_status pp_grad_mul(pp_ad *ad, int node, pp_err *err) {
    const int gy = pp_ad_gy(ad, node, 0), a = IN(0), b = IN(1);
    if (pp_ad_wants(ad, a)) {
        int r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, b, &r, err));
        PP_TRY(give_to(ad, node, 0, r, err));
    }
    if (pp_ad_wants(ad, b)) {
        int r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, a, &r, err));
        PP_TRY(give_to(ad, node, 1, r, err));
    }
    return PP_OK;
}

/* y = a / b: da = gy / b, db = -gy * y / b */
pp_status pp_grad_div(pp_ad *ad, int node, pp_err *err) {
    const int gy = pp_ad_gy(ad, node, 0), b = IN(1), y = ad_node(ad, node)->out[0];
    if (pp_ad_graph(ad)->values[y].dtype != PP_F32) return pp_ad_fail(ad, node, err, "an integer division has no gradient");
    if (pp_ad_wants(ad, IN(0))) {
        int r;
        PP_TRY(pp_ad_op2(ad, PP_OP_DIV, gy, b, &r, err));
        PP_TRY(give_to(ad, node, 0, r, err));
    }
    if (pp_ad_wants(ad, b)) {
        int m, d, r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y, &m, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_DIV, m, b, &d, err));
        PP_TRY(pp_ad_op1(ad, PP_OP_NEG, d, &r, err));
        PP_TRY(give_to(ad, node, 1, r, err));
    }
    return PP_OK;
}

/* Each op's derivative as ir/ops_unary.def writes it (PP_UNARY_GRAD), as text. */
static const char *const grad_formulas[PP_OP_COUNT] = {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D) [PP_OP_##E] = #D,
#include "../ir/ops_unary.def"
#undef PP_UNARY_GRAD
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
};

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether op's derivative reads the identifier c: 'v' (the input) or 'w'
 * (the output); true where the op has no formula here. */
static bool formula_reads(pp_op op, char c) {
    const char *f = grad_formulas[op];
    if (!f) return true;
    for (const char *p = f; *p; p++)
        if (*p == c && (p == f || !ident_char(p[-1])) && !ident_char(p[1])) return true;
    return false;
}

/* Gelu with approximate='tanh': y = x/2 (1 + t), t = tanh(c (x + a x^3)), c = sqrt(2/pi), a = 0.044715, so
 * dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3a x^2), written out in ops (pp.UnaryGrad's formulas are keyed by op) */
static pp_status gelu_tanh_grad(pp_ad *ad, int node, pp_err *err) {
    const int x = ad_node(ad, node)->in[0], gy = pp_ad_gy(ad, node, 0);
    int half, one, c, a, a3, x2, p, q, u, t, t2, s, h, e, f, k, m, w, d, r;
    PP_TRY(pp_ad_scalar(ad, 0.5f, &half, err));
    PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
    PP_TRY(pp_ad_scalar(ad, 0.7978845608028654f, &c, err));
    PP_TRY(pp_ad_scalar(ad, 0.044715f, &a, err));
    PP_TRY(pp_ad_scalar(ad, 3.0f * 0.044715f, &a3, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, x, x, &x2, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, a, x2, &p, err));      /* a x^2 */
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, one, p, &q, err));     /* 1 + a x^2 */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, x, q, &u, err));       /* x + a x^3 */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, c, u, &u, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_TANH, u, &t, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, t, t, &t2, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_SUB, one, t2, &s, err));    /* 1 - t^2 */
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, one, t, &h, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, half, h, &h, err));    /* (1 + t)/2 */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, a3, x2, &e, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, one, e, &e, err));     /* 1 + 3a x^2 */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, c, e, &f, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, s, f, &k, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, half, x, &m, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, m, k, &w, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, h, w, &d, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, d, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* every PP_UNARY_GRAD op: pp.UnaryGrad(x, y, gy), the forward node's
 * attributes passed on (alpha, beta, gamma: the kernel reads the op's own);
 * x or y in the other's slot where the derivative does not read it */
pp_status pp_grad_unary(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    if (n->op == PP_OP_GELU) {
        const char *ap;
        PP_TRY(pp_attr_string(pp_node_attrs(g, n), "approximate", "none", &ap, err));
        if (!strcmp(ap, "tanh")) return gelu_tanh_grad(ad, node, err);
        if (strcmp(ap, "none")) return pp_ad_fail(ad, node, err, "Gelu's approximate='%s' is not defined", ap);
    }
    pp_attr a[8];
    int na = 0;
    a[na++] = pp_ad_attr_str("op", pp_op_table[n->op].name);
    for (int k = 0; k < n->n_attrs && na < 8; k++)
        if (n->attrs[k].type == PP_ATTR_FLOAT) a[na++] = n->attrs[k];
    /* a slot whose operand the derivative does not read holds the other one,
     * so that the stage keeps only what the formula reads (Gelu's, Relu's: X;
     * Sigmoid's, Tanh's, Exp's: Y) */
    const int x = n->in[0], y = n->out[0];
    const bool rv = formula_reads(n->op, 'v'), rw = formula_reads(n->op, 'w');
    const int in[3] = {rv || !rw ? x : y, rw ? y : x, pp_ad_gy(ad, node, 0)};
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_UNARYGRAD, in, 3, a, na, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* A reduction's reduced axes into red[] (none: *noop, the op is an
 * identity) and its keepdims. */
static pp_status reduced_axes(pp_ad *ad, int node, bool *red, bool *noop_out, int64_t *keep, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const pp_attrs at = pp_node_attrs(g, n);
    const pp_shape xs = g->values[n->in[0]].shape;
    int64_t axes[PP_MAX_DIMS], noop;
    int na = 0;
    PP_TRY(pp_attr_int(at, "keepdims", 1, keep, err));
    PP_TRY(pp_attr_int(at, "noop_with_empty_axes", 0, &noop, err));
    if (n->n_in > 1 && n->in[1] >= 0) {
        const pp_value *av = &g->values[n->in[1]];
        if (!av->is_const || !av->data)
            return pp_ad_fail(ad, node, err, "its axes are computed at run time; a gradient needs them known");
        PP_TRY(pp_value_align(g, n->in[1], err));
        na = (int)(av->nbytes / 8);
        if (na > PP_MAX_DIMS) return pp_ad_fail(ad, node, err, "too many axes");
        memcpy(axes, g->values[n->in[1]].data, (size_t)na * 8);
    } else if (pp_attr_find(at, "axes")) {
        PP_TRY(pp_attr_ints(at, "axes", axes, PP_MAX_DIMS, &na, err));
    }
    for (int i = 0; i < xs.rank; i++) red[i] = na == 0;
    *noop_out = na == 0 && noop;
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + xs.rank : axes[i];
        if (a < 0 || a >= xs.rank) return pp_ad_fail(ad, node, err, "axis %lld is out of range", (long long)axes[i]);
        red[a] = true;
    }
    return PP_OK;
}

/* ReduceSum, ReduceMean: the gradient spread back over the reduced axes */
pp_status pp_grad_reduce(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const pp_shape xs = g->values[n->in[0]].shape;
    bool red[PP_MAX_DIMS], noop;
    int64_t keep;
    PP_TRY(reduced_axes(ad, node, red, &noop, &keep, err));
    if (noop) return pp_ad_give(ad, n->in[0], pp_ad_gy(ad, node, 0), err);
    pp_shape kept = xs;
    double count = 1;
    for (int i = 0; i < xs.rank; i++)
        if (red[i]) count *= (double)xs.dim[i], kept.dim[i] = 1;
    /* what the rule reads of its node, before the emits below move the node array */
    const bool mean_op = n->op == PP_OP_REDUCEMEAN;
    const int x = n->in[0];
    int gy = pp_ad_gy(ad, node, 0), r, shape, e;
    if (!keep) PP_TRY(pp_ad_reshape(ad, gy, &kept, &gy, err));
    if (mean_op) {
        int k;
        PP_TRY(pp_ad_scalar(ad, (float)(1.0 / count), &k, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, k, &r, err));
        gy = r;
    }
    PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", xs.dim, xs.rank, &shape, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EXPAND, gy, shape, &e, err));
    return pp_ad_give(ad, x, e, err);
}

/* |x|: gy sign(x) (0 at 0, as PyTorch) */
pp_status pp_grad_abs(pp_ad *ad, int node, pp_err *err) {
    int s, r;
    PP_TRY(pp_ad_op1(ad, PP_OP_SIGN, IN(0), &s, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, pp_ad_gy(ad, node, 0), s, &r, err));
    return pp_ad_give(ad, IN(0), r, err);
}

/* y = a^b: da = gy b a^(b-1), db = gy y ln(a) (PyTorch's, where a > 0);
 * an exponent of 2 gives da = gy 2a exactly */
pp_status pp_grad_pow(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int a = IN(0), b = IN(1), y = ad_node(ad, node)->out[0], gy = pp_ad_gy(ad, node, 0);
    if (g->values[a].dtype != PP_F32 || g->values[b].dtype != PP_F32)
        return pp_ad_fail(ad, node, err, "Pow's gradient is taken over f32 base and exponent only");
    if (pp_ad_wants(ad, a)) {
        const pp_value *bv = &g->values[b];
        int d;
        if (bv->is_const && bv->data && bv->nbytes == 4 && *(const float *)bv->data == 2.0f) {
            int two;
            PP_TRY(pp_ad_scalar(ad, 2.0f, &two, err));
            PP_TRY(pp_ad_op2(ad, PP_OP_MUL, a, two, &d, err));
        } else {
            int one, bm1, p;
            PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
            PP_TRY(pp_ad_op2(ad, PP_OP_SUB, b, one, &bm1, err));
            PP_TRY(pp_ad_op2(ad, PP_OP_POW, a, bm1, &p, err));
            PP_TRY(pp_ad_op2(ad, PP_OP_MUL, b, p, &d, err));
        }
        int r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, d, &r, err));
        PP_TRY(give_to(ad, node, 0, r, err));
    }
    if (pp_ad_wants(ad, b)) {
        int l, m, r;
        PP_TRY(pp_ad_op1(ad, PP_OP_LOG, a, &l, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, y, l, &m, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, m, &r, err));
        PP_TRY(give_to(ad, node, 1, r, err));
    }
    return PP_OK;
}

/* Dropout: the identity where it keeps every element (inference, or ratio
 * 0); training with a ratio above 0 would need its mask (not yet) */
pp_status pp_grad_dropout(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    bool training = false;
    double ratio = 0.5;
    if (n->n_in > 2 && n->in[2] >= 0) {
        const pp_value *t = &g->values[n->in[2]];
        if (!t->is_const || !t->data) return pp_ad_fail(ad, node, err, "its training_mode is computed at run time");
        training = *(const uint8_t *)t->data != 0;
    }
    if (n->n_in > 1 && n->in[1] >= 0) {
        const pp_value *r = &g->values[n->in[1]];
        if (!r->is_const || !r->data || r->nbytes < 4) return pp_ad_fail(ad, node, err, "its ratio is computed at run time");
        ratio = r->dtype == PP_F64 ? *(const double *)r->data : *(const float *)r->data;
    }
    if (training && ratio != 0)
        return pp_ad_fail(ad, node, err, "Dropout in training mode with ratio %g: training with dropout (a seeded "
                          "mask) is not there yet; export with the ratio at 0 or in eval mode", ratio);
    if (pp_ad_gy(ad, node, 1) >= 0) return pp_ad_fail(ad, node, err, "its mask output has no gradient");
    return pp_ad_give(ad, n->in[0], pp_ad_gy(ad, node, 0), err);
}
/* ---- selections and pass-throughs (issue 55, part A) ----------------------------------------- */

/* a float32 0/1 of a bool value */
static pp_status to_float(pp_ad *ad, int b, int *out, pp_err *err) {
    const pp_attr to = pp_ad_attr_int("to", 1); /* FLOAT */
    return pp_ad_emit(ad, PP_OP_CAST, &b, 1, &to, 1, out, 1, err);
}

/* Where(cond, gy, 0) (or Where(cond, 0, gy) when flip) */
static pp_status gate(pp_ad *ad, int cond, int gy, bool flip, int *out, pp_err *err) {
    int zero;
    PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
    const int in[3] = {cond, flip ? zero : gy, flip ? gy : zero};
    return pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, out, 1, err);
}

/* Clip: the gradient passes where min <= x <= max (PyTorch's clamp; its
 * hardtanh and relu6 differ only at the bounds themselves) */
pp_status pp_grad_clip(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], lo = n->n_in > 1 ? n->in[1] : -1, hi = n->n_in > 2 ? n->in[2] : -1;
    const int gy = pp_ad_gy(ad, node, 0);
    int cond = -1;
    if (lo >= 0) PP_TRY(pp_ad_op2(ad, PP_OP_GREATEROREQUAL, x, lo, &cond, err));
    if (hi >= 0) {
        int c;
        PP_TRY(pp_ad_op2(ad, PP_OP_LESSOREQUAL, x, hi, &c, err));
        if (cond >= 0) PP_TRY(pp_ad_op2(ad, PP_OP_AND, cond, c, &cond, err));
        else cond = c;
    }
    if (cond < 0) return pp_ad_give(ad, x, gy, err);
    int r;
    PP_TRY(gate(ad, cond, gy, false, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Shrink: the gradient passes where x < -lambd or x > lambd (PyTorch's
 * hardshrink and softshrink; 0 at the bounds themselves, as theirs) */
pp_status pp_grad_shrink(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    float lambd;
    PP_TRY(pp_attr_float(pp_node_attrs(g, ad_node(ad, node)), "lambd", 0.5f, &lambd, err));
    const int x = IN(0), gy = pp_ad_gy(ad, node, 0);
    int lo, hi, below, above, out, r;
    PP_TRY(pp_ad_scalar(ad, -lambd, &lo, err));
    PP_TRY(pp_ad_scalar(ad, lambd, &hi, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_LESS, x, lo, &below, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_GREATER, x, hi, &above, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_OR, below, above, &out, err));
    PP_TRY(gate(ad, out, gy, false, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Mod of floats (fmod=1, which ONNX requires of them): a - b * trunc(a / b),
 * so a's gradient is gy and b's is -gy * trunc(a / b) (PyTorch's fmod),
 * trunc(q) written as Sign(q) * Floor(|q|); each summed back over its
 * broadcast */
pp_status pp_grad_mod(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int a = IN(0), b = IN(1), gy = pp_ad_gy(ad, node, 0);
    if (g->values[ad_node(ad, node)->out[0]].dtype != PP_F32)
        return pp_ad_fail(ad, node, err, "an integer Mod has no gradient");
    if (pp_ad_wants(ad, a)) PP_TRY(give_to(ad, node, 0, gy, err));
    if (!pp_ad_wants(ad, b)) return PP_OK;
    int q, aq, fl, sg, t, m, r;
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, a, b, &q, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_ABS, q, &aq, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_FLOOR, aq, &fl, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_SIGN, q, &sg, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, sg, fl, &t, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, t, &m, err));
    PP_TRY(pp_ad_op1(ad, PP_OP_NEG, m, &r, err));
    return give_to(ad, node, 1, r, err);
}

/* Max, Min of one or two inputs: the gradient goes to the larger (smaller)
 * one, half to each where they are equal (PyTorch's maximum, minimum) */
pp_status pp_grad_extreme2(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    const int gy = pp_ad_gy(ad, node, 0);
    if (n->n_in == 1) return pp_ad_give(ad, n->in[0], gy, err);
    if (n->n_in > 2)
        return pp_ad_fail(ad, node, err, "%s of %d inputs: the gradient rule takes one or two", pp_op_table[n->op].name,
                          n->n_in);
    const int a = n->in[0], b = n->in[1];
    int win, tie, wf, tf, half, th, ma;
    PP_TRY(pp_ad_op2(ad, n->op == PP_OP_MAX ? PP_OP_GREATER : PP_OP_LESS, a, b, &win, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, a, b, &tie, err));
    PP_TRY(to_float(ad, win, &wf, err));
    PP_TRY(to_float(ad, tie, &tf, err));
    PP_TRY(pp_ad_scalar(ad, 0.5f, &half, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, tf, half, &th, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, wf, th, &ma, err)); /* a's share: 1, 1/2 or 0 */
    if (pp_ad_wants(ad, a)) {
        int r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, ma, &r, err));
        PP_TRY(give_to(ad, node, 0, r, err));
    }
    if (pp_ad_wants(ad, b)) {
        int one, mb, r;
        PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_SUB, one, ma, &mb, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, mb, &r, err));
        PP_TRY(give_to(ad, node, 1, r, err));
    }
    return PP_OK;
}

/* Sum: every input takes the gradient; Mean: its share */
pp_status pp_grad_sum(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    int gy = pp_ad_gy(ad, node, 0);
    const int n_in = n->n_in;
    if (n->op == PP_OP_MEAN && n_in > 1) {
        int k;
        PP_TRY(pp_ad_scalar(ad, (float)(1.0 / n_in), &k, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, k, &gy, err));
    }
    for (int k = 0; k < n_in; k++) PP_TRY(give_to(ad, node, k, gy, err));
    return PP_OK;
}


/* ReduceMax, ReduceMin: the gradient goes to the elements equal to the
 * result, shared evenly among ties (PyTorch's amax, amin and max()) */
pp_status pp_grad_reduce_extreme(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    const pp_shape xs = g->values[x].shape;
    bool red[PP_MAX_DIMS], noop;
    int64_t keep;
    PP_TRY(reduced_axes(ad, node, red, &noop, &keep, err));
    if (noop) return pp_ad_give(ad, x, pp_ad_gy(ad, node, 0), err);
    pp_shape kept = xs;
    int64_t axes[PP_MAX_DIMS];
    int na = 0;
    for (int i = 0; i < xs.rank; i++)
        if (red[i]) kept.dim[i] = 1, axes[na++] = i;
    int y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    if (!keep) {
        PP_TRY(pp_ad_reshape(ad, y, &kept, &y, err));
        PP_TRY(pp_ad_reshape(ad, gy, &kept, &gy, err));
    }
    int eq, mask, cnt, share, r;
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, x, y, &eq, err));
    PP_TRY(to_float(ad, eq, &mask, err));
    PP_TRY(pp_ad_reduce_sum(ad, mask, axes, na, true, &cnt, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, gy, cnt, &share, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, mask, share, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* ReduceProd's derivative at each element: the product of the others in its reduced slice. Without a zero in
 * the slice that is the product over the slice divided by the element; with one zero, the product of the rest at
 * the zero and 0 elsewhere; with more, 0 everywhere. The zeros are replaced by 1 for the products. */
static pp_status prod_others(pp_ad *ad, int x, const bool *red, int rank, int *d, pp_err *err) {
    int64_t axes[PP_MAX_DIMS];
    int na = 0;
    for (int i = 0; i < rank; i++)
        if (red[i]) axes[na++] = i;
    int zero, one, z, zf, cnt, x1, ax, ps, q, c0, c1, zc1, inner;
    PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
    PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, x, zero, &z, err));
    PP_TRY(to_float(ad, z, &zf, err));
    PP_TRY(pp_ad_reduce_sum(ad, zf, axes, na, true, &cnt, err));
    const int w1[3] = {z, one, x};
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, w1, 3, NULL, 0, &x1, 1, err));
    const pp_attr a[2] = {pp_ad_attr_int("keepdims", 1), pp_ad_attr_ints("axes", axes, na)};
    if (pp_ad_graph(ad)->opset >= 18) { /* the axes an input since opset 18, an attribute before */
        PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", axes, na, &ax, err));
        const int pin[2] = {x1, ax};
        PP_TRY(pp_ad_emit(ad, PP_OP_REDUCEPROD, pin, 2, a, 1, &ps, 1, err));
    } else {
        PP_TRY(pp_ad_emit(ad, PP_OP_REDUCEPROD, &x1, 1, a, 2, &ps, 1, err));
    }
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, ps, x1, &q, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, cnt, zero, &c0, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, cnt, one, &c1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_AND, z, c1, &zc1, err));
    const int w2[3] = {zc1, ps, zero};
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, w2, 3, NULL, 0, &inner, 1, err));
    const int w3[3] = {c0, q, inner};
    return pp_ad_emit(ad, PP_OP_WHERE, w3, 3, NULL, 0, d, 1, err);
}

/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp, ReduceProd: gy
 * (kept dims) times the reduction's derivative, an x-shaped value: sign(x),
 * x / y (0 where the norm is 0, as PyTorch's norm), 2x, exp(x - y), the
 * product of the others (prod_others) */
pp_status pp_grad_reduce_norm(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    const pp_op op = n->op;
    const pp_shape xs = g->values[x].shape;
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    bool red[PP_MAX_DIMS], noop;
    int64_t keep;
    PP_TRY(reduced_axes(ad, node, red, &noop, &keep, err));
    if (noop) return pp_ad_fail(ad, node, err, "noop_with_empty_axes without axes: no gradient rule for it");
    pp_shape kept = xs;
    for (int i = 0; i < xs.rank; i++)
        if (red[i]) kept.dim[i] = 1;
    int y = ad_node(ad, node)->out[0], gy = pp_ad_gy(ad, node, 0), d, r;
    if (!keep) {
        PP_TRY(pp_ad_reshape(ad, y, &kept, &y, err));
        PP_TRY(pp_ad_reshape(ad, gy, &kept, &gy, err));
    }
    switch (op) {
    case PP_OP_REDUCEL1: PP_TRY(pp_ad_op1(ad, PP_OP_SIGN, x, &d, err)); break;
    case PP_OP_REDUCESUMSQUARE: {
        int two;
        PP_TRY(pp_ad_scalar(ad, 2.0f, &two, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, x, two, &d, err));
        break;
    }
    case PP_OP_REDUCELOGSUMEXP: {
        int s;
        PP_TRY(pp_ad_op2(ad, PP_OP_SUB, x, y, &s, err));
        PP_TRY(pp_ad_op1(ad, PP_OP_EXP, s, &d, err));
        break;
    }
    case PP_OP_REDUCEPROD: PP_TRY(prod_others(ad, x, red, xs.rank, &d, err)); break;
    default: { /* ReduceL2 */
        int q, zero, z;
        PP_TRY(pp_ad_op2(ad, PP_OP_DIV, x, y, &q, err));
        PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, y, zero, &z, err));
        const int in[3] = {z, zero, q};
        PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &d, 1, err));
        break;
    }
    }
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, d, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* ---- Dropout in training mode (issue 55, part B) -------------------------------------------- */

/* the Dropout's ratio when it is a constant nonzero in training mode, else < 0 */
static double training_ratio(const pp_graph *g, const pp_node *n) {
    if (n->n_in < 3 || n->in[2] < 0 || n->in[1] < 0) return -1;
    const pp_value *t = &g->values[n->in[2]], *r = &g->values[n->in[1]];
    if (!t->is_const || !t->data || t->dtype != PP_BOOL || !*(const uint8_t *)t->data) return -1;
    if (!r->is_const || !r->data) return -1;
    const double v = r->dtype == PP_F64 ? *(const double *)r->data : r->dtype == PP_F32 ? *(const float *)r->data : -1;
    return v > 0 ? v : -1;
}

/* Whether n is a Dropout in training mode with a constant ratio of 0 whose
 * mask output nobody reads: an Identity (timm's Mlp and attention keep
 * nn.Dropout(0.0) modules, which a training export writes as Dropout) */
static bool keeps_all(const pp_graph *g, const pp_node *n) {
    if (n->n_in < 3 || n->in[2] < 0 || n->in[1] < 0) return false;
    const pp_value *t = &g->values[n->in[2]], *r = &g->values[n->in[1]];
    if (!t->is_const || !t->data || t->dtype != PP_BOOL || !*(const uint8_t *)t->data) return false;
    if (!r->is_const || !r->data || (r->dtype != PP_F32 && r->dtype != PP_F64)) return false;
    if ((r->dtype == PP_F64 ? *(const double *)r->data : *(const float *)r->data) != 0) return false;
    if (n->n_out > 1 && n->out[1] >= 0 && (g->values[n->out[1]].n_uses > 0 || g->values[n->out[1]].is_output))
        return false;
    return true;
}

pp_status pp_train_dropout(pp_graph *g, pp_err *err) {
    int seed = -1;
    bool changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != PP_OP_DROPOUT) continue;
        if (keeps_all(g, &g->nodes[i])) {
            /* an Identity, which simplify removes after the gradient: the backward
             * then reads the Dropout's input, not a copy of it kept beside it */
            pp_node *n = &g->nodes[i];
            if (n->n_out > 1 && n->out[1] >= 0) g->values[n->out[1]].producer = -1; /* unread: dropped */
            n->op = PP_OP_IDENTITY;
            n->n_in = n->n_out = 1;
            n->attrs = NULL, n->n_attrs = 0;
            changed = true;
            continue;
        }
        const double ratio = training_ratio(g, &g->nodes[i]);
        if (ratio < 0) continue;
        if (g->nodes[i].n_out > 1 && g->nodes[i].out[1] >= 0) {
            const pp_value *mv = &g->values[g->nodes[i].out[1]];
            if (mv->n_uses > 0 || mv->is_output) {
                char d[320];
                return PP_FAIL(err, PP_EUNSUP, "--train: %s: its mask output is read; training-mode Dropout is "
                               "trained with its own seeded mask, and the ONNX mask output is not kept",
                               pp_node_desc(g, i, d, sizeof d));
            }
        }
        if (seed < 0) {
            if (pp_graph_find(g, PP_DROPOUT_SEED_NAME) >= 0)
                return PP_FAIL(err, PP_EINVAL, "--train: the model already has a value named '%s', the input "
                               "the training-mode Dropouts read", PP_DROPOUT_SEED_NAME);
            const pp_shape s2 = {.rank = 1, .dim = {2}};
            PP_TRY(pp_graph_add_value(g, PP_DROPOUT_SEED_NAME, &seed, err));
            g->values[seed].dtype = PP_I64;
            g->values[seed].shape = s2;
            g->values[seed].nbytes = 16;
            PP_TRY(pp_graph_add_input(g, seed, err));
        }
        /* the key: FNV-1a of the node's name, 62 bits (an int attribute) */
        uint64_t h = 0xcbf29ce484222325ull;
        for (const char *c = g->nodes[i].name; c && *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
        char nm[512];
        snprintf(nm, sizeof nm, "%.480s.mask", g->nodes[i].name ? g->nodes[i].name : "dropout");
        int mask;
        for (int k = 1; pp_graph_find(g, nm) >= 0; k++)
            snprintf(nm, sizeof nm, "%.480s.mask__%d", g->nodes[i].name ? g->nodes[i].name : "dropout", k);
        PP_TRY(pp_graph_add_value(g, nm, &mask, err));
        pp_attr *a = pp_arena_alloc(&g->arena, 2 * sizeof *a);
        int *out = realloc(g->nodes[i].out, 2 * sizeof *out);
        if (!a || !out) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        pp_node *n = &g->nodes[i];
        n->out = out;
        if (n->n_out > 1 && n->out[1] >= 0) g->values[n->out[1]].producer = -1; /* unread: dropped */
        n->out[1] = mask;
        n->n_out = 2;
        g->values[mask].producer = i;
        a[0] = (pp_attr){.name = "ratio", .type = PP_ATTR_FLOAT, .f = (float)ratio};
        a[1] = (pp_attr){.name = "key", .type = PP_ATTR_INT, .i = (int64_t)(h >> 2)};
        n->attrs = a, n->n_attrs = 2;
        n->op = PP_OP_DROPOUTTRAIN;
        n->in[1] = seed;
        n->n_in = 2;
    }
    return seed >= 0 || changed ? pp_graph_verify(g, err) : PP_OK;
}

/* pp.Dropout: dX = gy mask (the mask the forward drew) */
pp_status pp_grad_dropout_train(pp_ad *ad, int node, pp_err *err) {
    const pp_node *n = ad_node(ad, node);
    if (pp_ad_gy(ad, node, 1) >= 0) return pp_ad_fail(ad, node, err, "its mask output has no gradient");
    const int x = n->in[0], mask = n->out[1];
    int r;
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, pp_ad_gy(ad, node, 0), mask, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* ---- PRelu, ReduceLogSum, CumSum (issue 55, part B) ----------------------------------------- */

/* y = x where x > 0, else slope x: dx = gy where x > 0, else gy slope;
 * dslope = gy x where x <= 0, summed to the slope's shape (PyTorch's prelu) */
pp_status pp_grad_prelu(pp_ad *ad, int node, pp_err *err) {
    const int x = IN(0), slope = IN(1), gy = pp_ad_gy(ad, node, 0);
    if (pp_ad_graph(ad)->values[x].dtype != PP_F32)
        return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    int zero, pos;
    PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_GREATER, x, zero, &pos, err));
    if (pp_ad_wants(ad, x)) {
        int gs, r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, slope, &gs, err));
        const int in[3] = {pos, gy, gs};
        PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &r, 1, err));
        PP_TRY(pp_ad_give(ad, x, r, err));
    }
    if (pp_ad_wants(ad, slope)) {
        int gx, r;
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, x, &gx, err));
        PP_TRY(gate(ad, pos, gx, true, &r, err));
        PP_TRY(give_to(ad, node, 1, r, err));
    }
    return PP_OK;
}

/* y = log(sum x): dx = gy / exp(y), spread over the reduced axes */
pp_status pp_grad_reducelogsum(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0];
    const pp_shape xs = g->values[x].shape;
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    bool red[PP_MAX_DIMS], noop;
    int64_t keep;
    PP_TRY(reduced_axes(ad, node, red, &noop, &keep, err));
    if (noop) return pp_ad_fail(ad, node, err, "noop_with_empty_axes without axes: no gradient rule for it");
    pp_shape kept = xs;
    for (int i = 0; i < xs.rank; i++)
        if (red[i]) kept.dim[i] = 1;
    int y = n->out[0], gy = pp_ad_gy(ad, node, 0), e, q, shape, r;
    if (!keep) {
        PP_TRY(pp_ad_reshape(ad, y, &kept, &y, err));
        PP_TRY(pp_ad_reshape(ad, gy, &kept, &gy, err));
    }
    PP_TRY(pp_ad_op1(ad, PP_OP_EXP, y, &e, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, gy, e, &q, err));
    PP_TRY(pp_graph_add_ints(pp_ad_graph(ad), "grad_axes", xs.dim, xs.rank, &shape, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EXPAND, q, shape, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* CumProd: gx_k sums gy_i times the product y_i has without x_k, over the
 * outputs i that read x_k. Before a line's first zero (in the product's
 * direction) that is the cumulative sum the other way of gy y, divided by
 * x_k; at the first zero it is the same sum of gy y', y' the cumulative
 * product with that zero taken as 1; past it every such product holds the
 * zero: 0. exclusive and reverse as the forward's, the sums the other way
 * (PyTorch's cumprod backward, which also handles zeros). */
pp_status pp_grad_cumprod(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], axis = n->in[1], y = n->out[0], gy = pp_ad_gy(ad, node, 0);
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    int64_t excl, rev;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "exclusive", 0, &excl, err));
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "reverse", 0, &rev, err));
    const pp_attr count[2] = {pp_ad_attr_int("exclusive", 0), pp_ad_attr_int("reverse", rev)};
    const pp_attr fwd[2] = {pp_ad_attr_int("exclusive", excl), pp_ad_attr_int("reverse", rev)};
    const pp_attr back[2] = {pp_ad_attr_int("exclusive", excl), pp_ad_attr_int("reverse", !rev)};
    int zero, one, z, zf, cz, none, cz1, first, xs, gyy, s1, a, x1, y1, gy1, s2, r0, r;
    PP_TRY(pp_ad_scalar(ad, 0.0f, &zero, err));
    PP_TRY(pp_ad_scalar(ad, 1.0f, &one, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, x, zero, &z, err));
    PP_TRY(to_float(ad, z, &zf, err));
    int in[3] = {zf, axis, -1};
    PP_TRY(pp_ad_emit(ad, PP_OP_CUMSUM, in, 2, count, 2, &cz, 1, err)); /* zeros so far, this one included */
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, cz, zero, &none, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_EQUAL, cz, one, &cz1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_AND, z, cz1, &first, err));
    in[0] = z, in[1] = one, in[2] = x;
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &xs, 1, err)); /* x, its zeros 1: a safe divisor */
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y, &gyy, err));
    in[0] = gyy, in[1] = axis;
    PP_TRY(pp_ad_emit(ad, PP_OP_CUMSUM, in, 2, back, 2, &s1, 1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_DIV, s1, xs, &a, err));
    in[0] = first, in[1] = one, in[2] = x;
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &x1, 1, err));
    in[0] = x1, in[1] = axis;
    PP_TRY(pp_ad_emit(ad, PP_OP_CUMPROD, in, 2, fwd, 2, &y1, 1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, gy, y1, &gy1, err));
    in[0] = gy1, in[1] = axis;
    PP_TRY(pp_ad_emit(ad, PP_OP_CUMSUM, in, 2, back, 2, &s2, 1, err));
    in[0] = first, in[1] = s2, in[2] = zero;
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &r0, 1, err));
    in[0] = none, in[1] = a, in[2] = r0;
    PP_TRY(pp_ad_emit(ad, PP_OP_WHERE, in, 3, NULL, 0, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}

/* CumSum: the gradient is the cumulative sum the other way (reverse
 * flipped, exclusive kept), over the same axis */
pp_status pp_grad_cumsum(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = ad_node(ad, node);
    const int x = n->in[0], axis = n->in[1];
    if (g->values[x].dtype != PP_F32) return pp_ad_fail(ad, node, err, "the gradient is taken over float32 only");
    int64_t excl, rev;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "exclusive", 0, &excl, err));
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "reverse", 0, &rev, err));
    const pp_attr a[2] = {pp_ad_attr_int("exclusive", excl), pp_ad_attr_int("reverse", !rev)};
    const int in[2] = {pp_ad_gy(ad, node, 0), axis};
    int r;
    PP_TRY(pp_ad_emit(ad, PP_OP_CUMSUM, in, 2, a, 2, &r, 1, err));
    return pp_ad_give(ad, x, r, err);
}
