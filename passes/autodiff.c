/* autodiff.c: see autodiff.h. Reverse mode over the node order: the nodes
 * are topologically ordered, so walking them backwards meets every
 * consumer of a value before its producer, and the gradient of a value is
 * complete (summed over its consumers, in node order) when its producer's
 * rule reads it. The backward nodes are appended, each after what it reads,
 * so the order stays topological. */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "../ir/op_fns.h"

const pp_grad_row pp_grad_table[PP_OP_COUNT] = {
#define PP_GRAD(E, RULE, SLOTS) [PP_OP_##E] = {RULE, SLOTS},
#define PP_OP(e, name, mi, ma, no, tr)
#include "../ir/ops.def"
#undef PP_OP
#undef PP_GRAD
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D) [PP_OP_##E] = {pp_grad_unary, 1},
#include "../ir/ops_unary.def"
#undef PP_UNARY_GRAD
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
};

struct pp_ad {
    pp_graph *g;
    int n_fwd_values;   /* values that existed before the backward graph */
    bool *wants;        /* [n_fwd_values] */
    int *grad;          /* [n_fwd_values]: the value holding d loss / d v, or -1 */
    int node;           /* the forward node whose rule runs */
    int seq;            /* backward node counter, for unique names */
    int n_fwd_nodes;    /* the forward graph's nodes (the first ones) */
    bool in_loss;       /* emitting the loss: its nodes are named /loss/OP_k */
};

pp_graph *pp_ad_graph(pp_ad *ad) { return ad->g; }

int pp_ad_gy(pp_ad *ad, int node, int k) {
    const pp_node *n = &ad->g->nodes[node];
    if (k >= n->n_out || n->out[k] < 0 || n->out[k] >= ad->n_fwd_values) return -1;
    return ad->grad[n->out[k]];
}

bool pp_ad_wants(pp_ad *ad, int v) { return v >= 0 && v < ad->n_fwd_values && ad->wants[v]; }

pp_status pp_ad_fail(pp_ad *ad, int node, pp_err *err, const char *fmt, ...) {
    char msg[400], d[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return PP_FAIL(err, PP_EUNSUP, "--train: %s: %s", pp_node_desc(ad->g, node, d, sizeof d), msg);
}

pp_attr pp_ad_attr_int(const char *name, int64_t v) { return (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v}; }
pp_attr pp_ad_attr_ints(const char *name, const int64_t *v, int n) {
    return (pp_attr){.name = name, .type = PP_ATTR_INTS, .ints = v, .n = n};
}
pp_attr pp_ad_attr_float(const char *name, float v) { return (pp_attr){.name = name, .type = PP_ATTR_FLOAT, .f = v}; }
pp_attr pp_ad_attr_str(const char *name, const char *s) { return (pp_attr){.name = name, .type = PP_ATTR_STRING, .s = s}; }

/* a copy of a[0..n) in the graph's arena (names, strings and lists too) */
static pp_status copy_attrs(pp_graph *g, const pp_attr *a, int n, pp_attr **out, pp_err *err) {
    *out = NULL;
    if (!n) return PP_OK;
    pp_attr *c = pp_arena_alloc(&g->arena, (size_t)n * sizeof *c);
    if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        c[i] = a[i];
        c[i].name = pp_arena_strdup(&g->arena, a[i].name);
        if (!c[i].name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (a[i].type == PP_ATTR_STRING && a[i].s && !(c[i].s = pp_arena_strdup(&g->arena, a[i].s)))
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (a[i].type == PP_ATTR_INTS && a[i].n) {
            int64_t *v = pp_arena_alloc(&g->arena, (size_t)a[i].n * sizeof *v);
            if (!v) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            memcpy(v, a[i].ints, (size_t)a[i].n * sizeof *v);
            c[i].ints = v;
        }
        if (a[i].type == PP_ATTR_FLOATS && a[i].n) {
            float *v = pp_arena_alloc(&g->arena, (size_t)a[i].n * sizeof *v);
            if (!v) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            memcpy(v, a[i].floats, (size_t)a[i].n * sizeof *v);
            c[i].floats = v;
        }
    }
    *out = c;
    return PP_OK;
}

/* A new value named after hint, unique. */
static pp_status new_value(pp_graph *g, const char *hint, int *idx, pp_err *err) {
    char name[512];
    snprintf(name, sizeof name, "%.480s", hint);
    for (int k = 1; pp_graph_find(g, name) >= 0; k++) snprintf(name, sizeof name, "%.480s__%d", hint, k);
    return pp_graph_add_value(g, name, idx, err);
}

pp_status pp_ad_emit(pp_ad *ad, pp_op op, const int *in, int n_in, const pp_attr *a, int n_a, int *out,
                     int n_out, pp_err *err) {
    pp_graph *g = ad->g;
    const pp_node *f = &g->nodes[ad->node];
    char name[512];
    if (ad->in_loss) snprintf(name, sizeof name, "/loss/%s_%d", pp_op_table[op].name, ad->seq++);
    else snprintf(name, sizeof name, "%.400s_grad/%s_%d", f->name, pp_op_table[op].name, ad->seq++);
    int idx;
    PP_TRY(pp_graph_add_node(g, op, name, n_in, n_out, &idx, err));
    pp_node *n = &g->nodes[idx];
    f = &g->nodes[ad->node]; /* the array may have moved */
    if (!ad->in_loss) {
        n->scope = f->scope, n->n_scope = f->n_scope;
        n->backward = true;
        n->grad_of = f->name;
    }
    for (int k = 0; k < n_in; k++) n->in[k] = in[k];
    PP_TRY(copy_attrs(g, a, n_a, &n->attrs, err));
    n->n_attrs = n_a;
    for (int k = 0; k < n_out; k++) {
        char vn[600];
        snprintf(vn, sizeof vn, "%s_%d", name, k);
        int v;
        PP_TRY(new_value(g, vn, &v, err));
        g->nodes[idx].out[k] = v;
        g->values[v].producer = idx;
        out[k] = v;
    }
    return pp_node_infer(g, idx, err);
}

pp_status pp_ad_op1(pp_ad *ad, pp_op op, int x, int *y, pp_err *err) {
    return pp_ad_emit(ad, op, &x, 1, NULL, 0, y, 1, err);
}

pp_status pp_ad_op2(pp_ad *ad, pp_op op, int a, int b, int *y, pp_err *err) {
    const int in[2] = {a, b};
    return pp_ad_emit(ad, op, in, 2, NULL, 0, y, 1, err);
}

pp_status pp_ad_scalar(pp_ad *ad, float v, int *out, pp_err *err) {
    const pp_shape s = {.rank = 0};
    return pp_graph_add_const(ad->g, "grad_const", PP_F32, &s, &v, out, err);
}

pp_status pp_ad_reduce_sum(pp_ad *ad, int x, const int64_t *axes, int n, bool keepdims, int *out, pp_err *err) {
    if (n == 0) {
        *out = x;
        return PP_OK;
    }
    int ax;
    PP_TRY(pp_graph_add_ints(ad->g, "grad_axes", axes, n, &ax, err));
    const int in[2] = {x, ax};
    const pp_attr a = pp_ad_attr_int("keepdims", keepdims);
    return pp_ad_emit(ad, PP_OP_REDUCESUM, in, 2, &a, 1, out, 1, err);
}

pp_status pp_ad_reshape(pp_ad *ad, int x, const pp_shape *s, int *out, pp_err *err) {
    int sh;
    PP_TRY(pp_graph_add_ints(ad->g, "grad_axes", s->dim, s->rank, &sh, err));
    return pp_ad_op2(ad, PP_OP_RESHAPE, x, sh, out, err);
}

pp_status pp_ad_transpose(pp_ad *ad, int x, const int64_t *perm, int n, int *out, pp_err *err) {
    const pp_attr a = pp_ad_attr_ints("perm", perm, n);
    return pp_ad_emit(ad, PP_OP_TRANSPOSE, &x, 1, &a, 1, out, 1, err);
}

static bool same_shape(const pp_shape *a, const pp_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

pp_status pp_ad_unbroadcast(pp_ad *ad, int gv, int x, int *out, pp_err *err) {
    const pp_shape gs = ad->g->values[gv].shape, xs = ad->g->values[x].shape;
    if (same_shape(&gs, &xs)) {
        *out = gv;
        return PP_OK;
    }
    int64_t axes[PP_MAX_DIMS];
    int n = 0;
    const int lead = gs.rank - xs.rank;
    for (int i = 0; i < gs.rank; i++)
        if (i < lead || (xs.dim[i - lead] == 1 && gs.dim[i] != 1)) axes[n++] = i;
    int s;
    PP_TRY(pp_ad_reduce_sum(ad, gv, axes, n, true, &s, err));
    if (same_shape(&ad->g->values[s].shape, &xs)) {
        *out = s;
        return PP_OK;
    }
    return pp_ad_reshape(ad, s, &xs, out, err);
}

pp_status pp_ad_give(pp_ad *ad, int v, int gv, pp_err *err) {
    if (!pp_ad_wants(ad, v)) return PP_OK;
    const pp_value *val = &ad->g->values[v], *gval = &ad->g->values[gv];
    if (!same_shape(&val->shape, &gval->shape) || gval->dtype != val->dtype) {
        char a[128], b[128];
        pp_shape_str(&val->shape, a, sizeof a);
        pp_shape_str(&gval->shape, b, sizeof b);
        return pp_ad_fail(ad, ad->node, err, "the gradient of '%s' came out %s%s, the value is %s%s", val->name,
                          pp_dtype_name(gval->dtype), b, pp_dtype_name(val->dtype), a);
    }
    if (ad->grad[v] < 0) {
        ad->grad[v] = gv;
        return PP_OK;
    }
    int sum;
    PP_TRY(pp_ad_op2(ad, PP_OP_ADD, ad->grad[v], gv, &sum, err));
    ad->grad[v] = sum;
    return PP_OK;
}

/* ---- which weights train ------------------------------------------------------------------ */

static bool float_type(pp_dtype t) { return t == PP_F32; }
/* a value a gradient flows into: f32, or the half types --precision's Casts make (passes/precision.c) */
static bool grad_type(pp_dtype t) { return t == PP_F32 || t == PP_BF16 || t == PP_F16; }

/* --freeze PATTERN: the weight's name, a module path it lies under (its
 * name's or a consumer's scope), or a shell pattern over the name */
static bool frozen_by(const pp_graph *g, int v, const char *pat) {
    const char *name = g->values[v].name;
    const size_t lp = strlen(pat);
    if (!strcmp(name, pat) || (!strncmp(name, pat, lp) && name[lp] == '.')) return true;
    if (strpbrk(pat, "*?[") && !fnmatch(pat, name, 0)) return true;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        bool uses = false;
        for (int k = 0; k < n->n_in && !uses; k++) uses = n->in[k] == v;
        if (!uses) continue;
        for (int s = 0; s < n->n_scope; s++) {
            const char *sc = n->scope[s];
            if (!strcmp(sc, pat) || (!strncmp(sc, pat, lp) && sc[lp] == '.')) return true;
        }
    }
    return false;
}

pp_status pp_train_params(pp_graph *g, const pp_train_opts *t, pp_err *err) {
    if (g->opset < 13)
        return PP_FAIL(err, PP_EUNSUP, "--train: the model is opset %d; ppcc trains models of opset 13 or "
                       "later (export with opset_version=13 or more)", g->opset);
    bool *cand = calloc(pp_count(g->n_values), 1);
    if (!cand) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        const unsigned slots = pp_grad_table[n->op].slots;
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v < 0 || !g->values[v].is_const || !float_type(g->values[v].dtype)) continue;
            /* a weight is an initializer: not a Constant node's value (an epsilon, an exponent, a
             * mask value), nor a constant ppcc folded */
            if (g->values[v].producer >= 0 || !g->values[v].is_initializer) continue;
            /* an op without a rule: every float input would need one */
            if (!pp_grad_table[n->op].rule || (k < 32 && (slots >> k) & 1)) cand[v] = true;
        }
    }
    int used[PP_MAX_FREEZE] = {0}, n_params = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (!cand[v]) continue;
        bool fz = false;
        for (int p = 0; p < t->n_freeze; p++)
            if (frozen_by(g, v, t->freeze[p])) fz = true, used[p]++;
        if (fz) continue;
        g->values[v].is_param = true;
        g->values[v].is_const = false;
        n_params++;
    }
    free(cand);
    for (int p = 0; p < t->n_freeze; p++)
        if (!used[p])
            return PP_FAIL(err, PP_EINVAL, "--freeze %s matches no weight of the model (give a module path as "
                           "--split-at takes it, a weight's name, or a pattern like 'layer1.*')", t->freeze[p]);
    if (!n_params) return PP_FAIL(err, PP_EINVAL, "--train: no weight is left to train (every float initializer is frozen)");
    return PP_OK;
}

/* ---- the loss -------------------------------------------------------------------------------- */

pp_status pp_loss_parse(const char *spec, pp_train_opts *t, pp_err *err) {
    static const struct {
        const char *prefix;
        pp_loss_kind kind;
    } kinds[] = {{"cross-entropy:", PP_LOSS_CROSS_ENTROPY}, {"mse:", PP_LOSS_MSE}};
    t->loss = PP_LOSS_OUTPUT;
    t->loss_output = spec;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (!strncmp(spec, kinds[k].prefix, strlen(kinds[k].prefix))) {
            t->loss = kinds[k].kind;
            t->loss_output = spec + strlen(kinds[k].prefix);
        }
    if (!*t->loss_output)
        return PP_FAIL(err, PP_EINVAL, "--loss %s: name the output, as in cross-entropy:logits, mse:y or a "
                       "scalar output's name", spec);
    return PP_OK;
}

static pp_status add_graph_input(pp_graph *g, const char *name, pp_dtype dt, const pp_shape *s, int *v, pp_err *err) {
    if (pp_graph_find(g, name) >= 0)
        return PP_FAIL(err, PP_EINVAL, "--train: the model already has a value named '%s', the name of the %s "
                       "input the loss adds", name, name);
    PP_TRY(pp_graph_add_value(g, name, v, err));
    g->values[*v].dtype = dt;
    g->values[*v].shape = *s;
    g->values[*v].nbytes = 0;
    PP_TRY(pp_shape_nbytes(s, dt, &g->values[*v].nbytes, err));
    return pp_graph_add_input(g, *v, err);
}

/* The loss nodes, differentiated with the rest: they are ordinary ops. */
static pp_status build_loss(pp_ad *ad, const pp_train_opts *t, int y, int *loss, pp_err *err) {
    pp_graph *g = ad->g;
    const pp_value *yv = &g->values[y];
    if (t->loss == PP_LOSS_OUTPUT) {
        if (yv->shape.rank != 0 && !(yv->shape.rank == 1 && yv->shape.dim[0] == 1))
            return PP_FAIL(err, PP_EINVAL, "--loss %s: the output is not a scalar (its shape has %d dims); "
                           "give cross-entropy:%s or mse:%s for a built-in loss", t->loss_output,
                           yv->shape.rank, t->loss_output, t->loss_output);
        if (yv->dtype != PP_F32)
            return PP_FAIL(err, PP_EUNSUP, "--loss %s: the loss is %s, ppcc trains on f32", t->loss_output,
                           pp_dtype_name(yv->dtype));
        *loss = y;
        if (yv->shape.rank == 1) {
            const pp_shape s0 = {.rank = 0};
            PP_TRY(pp_ad_reshape(ad, y, &s0, loss, err));
        }
        return PP_OK;
    }
    if (yv->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "--loss %s: the output is %s, the loss needs f32", t->loss_output,
                       pp_dtype_name(yv->dtype));
    const double numel = (double)yv->nbytes / 4;
    if (t->loss == PP_LOSS_MSE) {
        const pp_shape ys = yv->shape;
        int tgt, d, sq, s, k;
        PP_TRY(add_graph_input(g, PP_TARGET_NAME, PP_F32, &ys, &tgt, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_SUB, y, tgt, &d, err));
        PP_TRY(pp_ad_op2(ad, PP_OP_MUL, d, d, &sq, err));
        int64_t axes[PP_MAX_DIMS];
        for (int i = 0; i < ys.rank; i++) axes[i] = i;
        PP_TRY(pp_ad_reduce_sum(ad, sq, axes, ys.rank, false, &s, err));
        PP_TRY(pp_ad_scalar(ad, (float)(1.0 / numel), &k, err));
        return pp_ad_op2(ad, PP_OP_MUL, s, k, loss, err);
    }
    /* cross-entropy: the logits [N, C] (or [N, C, d...], classes on axis 1) */
    if (yv->shape.rank < 2)
        return PP_FAIL(err, PP_EINVAL, "--loss cross-entropy:%s: the output has %d dims; expected logits [N, C]",
                       t->loss_output, yv->shape.rank);
    const pp_shape ys = yv->shape;
    pp_shape ls = {.rank = ys.rank - 1, .dim = {ys.dim[0]}};
    for (int i = 2; i < ys.rank; i++) ls.dim[i - 1] = ys.dim[i];
    int lab, lsm, depth, vals, oh, prod, s, k;
    PP_TRY(add_graph_input(g, PP_LABELS_NAME, PP_I64, &ls, &lab, err));
    const pp_attr ax1 = pp_ad_attr_int("axis", 1);
    PP_TRY(pp_ad_emit(ad, PP_OP_LOGSOFTMAX, &y, 1, &ax1, 1, &lsm, 1, err));
    const int64_t C = ys.dim[1];
    PP_TRY(pp_graph_add_ints(ad->g, "grad_axes", &C, 1, &depth, err));
    const float ov[2] = {0, 1};
    const pp_shape vs = {.rank = 1, .dim = {2}};
    PP_TRY(pp_graph_add_const(g, "grad_onehot", PP_F32, &vs, ov, &vals, err));
    const int ohin[3] = {lab, depth, vals};
    PP_TRY(pp_ad_emit(ad, PP_OP_ONEHOT, ohin, 3, &ax1, 1, &oh, 1, err));
    PP_TRY(pp_ad_op2(ad, PP_OP_MUL, lsm, oh, &prod, err));
    int64_t axes[PP_MAX_DIMS];
    for (int i = 0; i < ys.rank; i++) axes[i] = i;
    PP_TRY(pp_ad_reduce_sum(ad, prod, axes, ys.rank, false, &s, err));
    PP_TRY(pp_ad_scalar(ad, (float)(-1.0 / (numel / (double)C)), &k, err));
    return pp_ad_op2(ad, PP_OP_MUL, s, k, loss, err);
}

/* ---- the pass ------------------------------------------------------------------------------ */

/* An Identity from value in to a new value named name (a graph output). */
static pp_status named_output(pp_graph *g, int in, const char *name, const char *node_name, pp_err *err) {
    if (pp_graph_find(g, name) >= 0)
        return PP_FAIL(err, PP_EINVAL, "--train: the model already has a value named '%s', a name the gradient "
                       "graph gives one of its outputs", name);
    int out, id;
    PP_TRY(pp_graph_add_value(g, name, &out, err));
    PP_TRY(pp_graph_add_node(g, PP_OP_IDENTITY, node_name, 1, 1, &id, err));
    g->nodes[id].in[0] = in;
    g->nodes[id].out[0] = out;
    g->nodes[id].backward = strcmp(name, PP_LOSS_NAME) != 0;
    PP_TRY(pp_node_infer(g, id, err));
    return pp_graph_add_output(g, out, err);
}

/* Whether weight v reaches a BatchNormalization as its mean or variance input, which carries no gradient (in
 * training mode the running statistics; in inference mode none is passed). An export with constant folding of
 * weight standardization (timm's StdConv2d: BiT, NFNet) copies the weight into the statistics' path. */
static bool reaches_bn_stats(const pp_graph *g, int v) {
    bool *r = calloc(pp_count(g->n_values), 1), hit = false;
    if (!r) return false;
    r[v] = true;
    for (int i = 0; i < g->n_nodes && !hit; i++) {
        const pp_node *n = &g->nodes[i];
        bool in = false;
        for (int k = 0; k < n->n_in; k++) in = in || (n->in[k] >= 0 && r[n->in[k]]);
        if (!in) continue;
        if (n->op == PP_OP_BATCHNORM && n->n_in == 5)
            hit = (n->in[3] >= 0 && r[n->in[3]]) || (n->in[4] >= 0 && r[n->in[4]]);
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) r[n->out[k]] = true;
    }
    free(r);
    return hit;
}

/* The outputs become the loss and the weights' gradients, in the order of
 * the weights. A weight the loss does not
 * reach is refused: it would not train, and the user asked it to. */
static pp_status outputs(pp_graph *g, pp_ad *ad, int loss, int y, pp_err *err) {
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].is_output = false;
    g->n_outputs = 0;
    PP_TRY(named_output(g, loss, PP_LOSS_NAME, "/loss/Identity", err));
    /* the output a built-in loss reads stays one (pprt's accuracy on --eval data) */
    if (y != loss) PP_TRY(pp_graph_add_output(g, y, err));
    for (int v = 0; v < ad->n_fwd_values; v++) {
        if (!g->values[v].is_param) continue;
        if (ad->grad[v] < 0) {
            int user = -1;
            for (int i = 0; i < g->n_nodes && user < 0; i++)
                for (int k = 0; k < g->nodes[i].n_in; k++)
                    if (g->nodes[i].in[k] == v) user = i;
            char d[320] = "no node";
            if (user >= 0) pp_node_desc(g, user, d, sizeof d);
            if (reaches_bn_stats(g, v))
                return PP_FAIL(err, PP_EINVAL, "--train: the weight '%s' (read by %s) reaches the loss only "
                               "through a BatchNormalization's mean or variance input, which carries no gradient: "
                               "--freeze it (an export with constant folding copies a weight into that path, as "
                               "for weight standardization; export with do_constant_folding=False and "
                               "training=torch.onnx.TrainingMode.TRAINING)", g->values[v].name, d);
            return PP_FAIL(err, PP_EINVAL, "--train: the weight '%s' (read by %s) does not reach the loss through "
                           "ops that have gradients (an ArgMax, an integer Cast, or an output the loss does not "
                           "read is on its way): --freeze it to keep it fixed", g->values[v].name, d);
        }
        char nm[512], nn[600];
        snprintf(nm, sizeof nm, "%s%s", g->values[v].name, PP_GRAD_SUFFIX);
        snprintf(nn, sizeof nn, "/grad/%s/Identity", g->values[v].name);
        PP_TRY(named_output(g, ad->grad[v], nm, nn, err));
    }
    /* a BatchNormalization in training mode: its running mean and variance,
     * for pprt to write back into the initializers they came from */
    for (int i = 0; i < ad->n_fwd_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->op != PP_OP_BATCHNORM || !pp_bn_training(pp_node_attrs(g, n), n->n_out) || n->n_out < 3) continue;
        for (int k = 1; k <= 2; k++) {
            const int src = n->in[2 + k], out = n->out[k];
            if (src < 0 || out < 0 || !g->values[src].is_initializer || g->values[src].is_param) continue;
            g->values[src].is_state = true;
            char nm[512], nn[600];
            snprintf(nm, sizeof nm, "%s%s", g->values[src].name, PP_RUNNING_SUFFIX);
            snprintf(nn, sizeof nn, "/running/%s/Identity", g->values[src].name);
            PP_TRY(named_output(g, out, nm, nn, err));
        }
    }
    return PP_OK;
}

void pp_train_params_fix(pp_graph *g) {
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_param) g->values[v].is_const = true;
}

pp_status pp_autodiff(pp_graph *g, const pp_train_opts *t, pp_err *err) {
    int y = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->values[g->outputs[i]].name, t->loss_output)) y = g->outputs[i];
    if (y < 0) {
        char names[400] = "";
        for (int i = 0; i < g->n_outputs && strlen(names) < 300; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "",
                     g->values[g->outputs[i]].name);
        return PP_FAIL(err, PP_EINVAL, "--loss: the model has no output '%s' (its outputs: %s); --loss takes "
                       "cross-entropy:OUTPUT, mse:OUTPUT, or OUTPUT where the model computes its loss", t->loss_output,
                       names);
    }
    g->optim = t->optim;
    pp_ad ad = {.g = g, .n_fwd_values = g->n_values, .node = 0};
    ad.wants = calloc(pp_count(g->n_values), sizeof *ad.wants);
    ad.grad = malloc(pp_count(g->n_values) * sizeof *ad.grad);
    pp_status s = PP_OK;
    if (!ad.wants || !ad.grad) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) ad.wants[v] = g->values[v].is_param, ad.grad[v] = -1;
    const int n_fwd = g->n_nodes;
    ad.n_fwd_nodes = n_fwd;
    /* forward: a node's outputs want a gradient when an input in one of its
     * gradient slots does */
    for (int i = 0; i < n_fwd; i++) {
        const pp_node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && ad.wants[n->in[k]] && (!pp_grad_table[n->op].rule || (k < 32 && (pp_grad_table[n->op].slots >> k) & 1)))
                any = true;
        for (int k = 0; k < n->n_out && any; k++)
            if (n->out[k] >= 0 && grad_type(g->values[n->out[k]].dtype)) ad.wants[n->out[k]] = true;
    }
    if (!ad.wants[y]) {
        s = PP_FAIL(err, PP_EINVAL, "--train: the output '%s' does not depend on any weight that trains", t->loss_output);
        goto done;
    }
    ad.node = g->values[y].producer >= 0 ? g->values[y].producer : 0;
    int loss;
    ad.in_loss = true;
    s = build_loss(&ad, t, y, &loss, err);
    ad.in_loss = false;
    if (s != PP_OK) goto done;
    /* the loss nodes are part of the forward graph: their outputs want gradients */
    {
        const int grown = g->n_values;
        bool *w2 = realloc(ad.wants, pp_count(grown) * sizeof *w2);
        int *g2 = w2 ? realloc(ad.grad, pp_count(grown) * sizeof *g2) : NULL;
        if (w2) ad.wants = w2;
        if (g2) ad.grad = g2;
        if (!w2 || !g2) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            goto done;
        }
        for (int v = ad.n_fwd_values; v < grown; v++) ad.wants[v] = false, ad.grad[v] = -1;
        ad.n_fwd_values = grown;
        for (int i = n_fwd; i < g->n_nodes; i++) {
            const pp_node *n = &g->nodes[i];
            bool any = false;
            for (int k = 0; k < n->n_in; k++) any |= n->in[k] >= 0 && ad.wants[n->in[k]];
            for (int k = 0; k < n->n_out && any; k++)
                if (grad_type(g->values[n->out[k]].dtype)) ad.wants[n->out[k]] = true;
        }
    }
    const int n_all = g->n_nodes;
    /* the loss gradient's seed: 1, a weight of its own name that no pass
     * folds (a variable until pp_train_params_fix), so that pprt can make it
     * the loss scale (--loss-scale: runtime/train.c binds it) */
    int one;
    const pp_shape s0 = {.rank = 0};
    const float unit = 1.0f;
    if ((s = pp_graph_add_const(g, PP_LOSS_SCALE_NAME, PP_F32, &s0, &unit, &one, err)) != PP_OK) goto done;
    g->values[one].is_param = g->values[one].is_state = true;
    g->values[one].is_const = false;
    if (g->values[loss].shape.rank != 0) {
        s = PP_FAIL(err, PP_EINVAL, "--train: the loss is not a scalar");
        goto done;
    }
    ad.grad[loss] = one;
    for (int i = n_all - 1; i >= 0; i--) {
        const pp_node *n = &g->nodes[i];
        bool has = false, needs = false;
        for (int k = 0; k < n->n_out; k++) has |= n->out[k] >= 0 && ad.grad[n->out[k]] >= 0;
        for (int k = 0; k < n->n_in; k++) needs |= pp_ad_wants(&ad, n->in[k]);
        if (!has || !needs) continue;
        const pp_grad_row *r = &pp_grad_table[n->op];
        if (!r->rule) {
            char d[320];
            s = PP_FAIL(err, PP_EUNSUP, "--train: %s has no gradient rule, and a weight that trains reaches the "
                        "loss through it (freeze the weights before it with --freeze, or leave the op out)",
                        pp_node_desc(g, i, d, sizeof d));
            goto done;
        }
        ad.node = i;
        if ((s = r->rule(&ad, i, err)) != PP_OK) goto done;
    }
    s = outputs(g, &ad, loss, t->loss == PP_LOSS_OUTPUT ? loss : y, err);
done:
    free(ad.wants);
    free(ad.grad);
    return s;
}
