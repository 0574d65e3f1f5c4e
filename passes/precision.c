/* precision.c: ppcc --train --precision bf16|fp16, mixed precision decided in
 * the graph before the split (so a cut never adds or moves a rounding), as
 * Cast nodes the autodiff differentiates like any other op.
 *
 * The policy (docs/training.md, "Mixed precision"): each product, Conv,
 * ConvTranspose, MatMul and Gemm, reads its float inputs rounded to the half
 * type H (activations, the f32 master weights and biases: Cast to H, Cast
 * back to f32) and its output is rounded to H the same way; every other op
 * (norms, softmax, reductions, the loss, the elementwise ops) runs in f32 on
 * what it is given. The kernels compute in f32 on the rounded values and the
 * Casts round to nearest even (runtime/cpu/ref_math.c): oneDNN's bf16
 * kernels would sum in another order, so every backend runs the same plan
 * the same way. The gradient of a Cast is the Cast back (grad_tensor.c): so
 * the gradients of the half values are rounded to H, a weight's gradient is
 * rounded to H and then summed over the micro-batches and stepped in f32, as
 * PyTorch's autograd does through autocast's casts.
 *
 * pp_train_autocast_stash, after the autodiff: a backward node that reads
 * a forward Cast's f32 copy of a half value reads its own Cast of the half
 * value instead (a Cast in the backward, of the reader's stage), so what the
 * forward stage keeps for its backward is the half value, not its f32 copy;
 * a weight's copy is made again from the weight in the backward (the stage
 * has its weights: nothing kept per micro-batch). ReLU, MaxPool and the views
 * of half values hold half values: the backward reads them through a half
 * copy too (exact).
 * This file is not the kernels (they compute in f32 and store what the
 * graph's dtypes say). */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool is_product(pp_op op) {
    return op == PP_OP_CONV || op == PP_OP_CONVTRANSPOSE || op == PP_OP_MATMUL || op == PP_OP_GEMM;
}

/* where a node goes in the new order: 4 x (the original node it belongs to) + 1 before it, 2 itself, 3 after */
typedef struct {
    int64_t key;
    int idx;
} place;

typedef struct {
    pp_graph *g;
    pp_dtype half;
    place *at;     /* per node */
    int cap;
    int *rounded;  /* per value: its f32 copy of the half value (-1: none) */
    int n_vals;
} ctx;

static pp_status grow_places(ctx *c, pp_err *err) {
    if (c->g->n_nodes <= c->cap) return PP_OK;
    const int cap = c->g->n_nodes * 2 + 16;
    place *p = realloc(c->at, (size_t)cap * sizeof *p);
    if (!p) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->at = p, c->cap = cap;
    return PP_OK;
}

/* A new value named after hint, unique, of x's shape and type dt. */
static pp_status new_value(pp_graph *g, const char *hint, int like, pp_dtype dt, int *idx, pp_err *err) {
    char name[512];
    snprintf(name, sizeof name, "%.480s", hint);
    for (int k = 1; pp_graph_find(g, name) >= 0; k++) snprintf(name, sizeof name, "%.480s__%d", hint, k);
    PP_TRY(pp_graph_add_value(g, name, idx, err));
    g->values[*idx].dtype = dt;
    g->values[*idx].shape = g->values[like].shape;
    return PP_OK;
}

/* Cast(x, to=dt) -> y (a new value when *y < 0), placed at key, with the
 * scope (and for a backward node, the gradient owner) of node `like`. */
static pp_status cast(ctx *c, int x, pp_dtype dt, int64_t key, int like, bool backward, int *y, pp_err *err) {
    pp_graph *g = c->g;
    char name[512]; /* unique: the value's name, and for a backward copy its reader's too */
    const char *xn = g->values[x].name ? g->values[x].name : "v";
    if (backward) snprintf(name, sizeof name, "%.300s/%.200s/to_%s", g->nodes[like].name, xn, pp_dtype_name(dt));
    else snprintf(name, sizeof name, "%.480s/to_%s", xn, pp_dtype_name(dt));
    if (*y < 0) {
        char vn[600];
        snprintf(vn, sizeof vn, "%.480s.%s", g->values[x].name ? g->values[x].name : "v", pp_dtype_name(dt));
        PP_TRY(new_value(g, vn, x, dt, y, err));
    }
    int idx;
    PP_TRY(pp_graph_add_node(g, PP_OP_CAST, name, 1, 1, &idx, err));
    pp_attr *a = pp_arena_alloc(&g->arena, sizeof *a);
    if (!a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *a = (pp_attr){.name = "to", .type = PP_ATTR_INT, .i = (int64_t)dt};
    pp_node *n = &g->nodes[idx];
    const pp_node *l = &g->nodes[like];
    n->attrs = a, n->n_attrs = 1;
    n->in[0] = x, n->out[0] = *y;
    n->scope = l->scope, n->n_scope = l->n_scope;
    if (backward) n->backward = true, n->grad_of = l->grad_of;
    g->values[*y].producer = idx;
    PP_TRY(grow_places(c, err));
    c->at[idx] = (place){key, idx};
    return pp_node_infer(g, idx, err);
}

static int by_key(const void *a, const void *b) {
    const place *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The nodes in the order of their keys (stable: the order they were made). */
static pp_status reorder(ctx *c, pp_err *err) {
    pp_graph *g = c->g;
    qsort(c->at, (size_t)g->n_nodes, sizeof *c->at, by_key);
    pp_node *nn = malloc((size_t)g->n_nodes * sizeof *nn);
    if (!nn) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) nn[i] = g->nodes[c->at[i].idx];
    memcpy(g->nodes, nn, (size_t)g->n_nodes * sizeof *nn);
    free(nn);
    return pp_graph_verify(g, err);
}

/* The f32 copy of x rounded to the half type that product node p reads. */
static pp_status round_input(ctx *c, int p, int x, int *out, pp_err *err) {
    pp_graph *g = c->g;
    if (x < c->n_vals && c->rounded[x] >= 0) {
        *out = c->rounded[x];
        return PP_OK;
    }
    if (g->values[x].dtype != PP_F32) {
        *out = x;
        return PP_OK;
    }
    /* an activation is rounded where it is made (so a cut after it sends the half value), a weight or an input
     * beside its first product */
    const int prod = g->values[x].producer;
    int h = -1, f = -1;
    const int64_t at_h = prod >= 0 ? c->at[prod].key / 4 * 4 + 3 : 4 * (int64_t)p + 1;
    PP_TRY(cast(c, x, c->half, at_h, prod >= 0 ? prod : p, false, &h, err));
    PP_TRY(cast(c, h, PP_F32, 4 * (int64_t)p + 1, p, false, &f, err));
    if (x < c->n_vals) c->rounded[x] = f;
    *out = f;
    return PP_OK;
}

/* Product node p: its inputs rounded, and its output y rounded in place: p
 * now writes y0 (a new value), Cast(y0, H) -> h, Cast(h, f32) -> y, so y
 * keeps its name, its readers and its place among the graph's outputs. */
static pp_status round_product(ctx *c, int p, pp_err *err) {
    pp_graph *g = c->g;
    for (int k = 0; k < g->nodes[p].n_in; k++) {
        const int x = g->nodes[p].in[k];
        if (x < 0) continue;
        int r;
        PP_TRY(round_input(c, p, x, &r, err));
        g->nodes[p].in[k] = r;
    }
    const int y = g->nodes[p].out[0];
    if (y < 0 || g->values[y].dtype != PP_F32) return PP_OK;
    char vn[600];
    snprintf(vn, sizeof vn, "%.480s.acc", g->values[y].name ? g->values[y].name : "v");
    int y0, h = -1;
    PP_TRY(new_value(g, vn, y, PP_F32, &y0, err));
    g->nodes[p].out[0] = y0;
    g->values[y0].producer = p;
    int yy = y;
    PP_TRY(cast(c, y0, c->half, 4 * (int64_t)p + 3, p, false, &h, err));
    PP_TRY(cast(c, h, PP_F32, 4 * (int64_t)p + 3, p, false, &yy, err));
    if (y < c->n_vals) c->rounded[y] = y;
    return PP_OK;
}

pp_status pp_train_autocast(pp_graph *g, const pp_train_opts *t, pp_err *err) {
    if (t->optim.precision == PP_PREC_F32) return PP_OK;
    ctx c = {.g = g, .half = t->optim.precision == PP_PREC_BF16 ? PP_BF16 : PP_F16, .n_vals = g->n_values};
    const int n0 = g->n_nodes;
    c.rounded = malloc(pp_count(g->n_values) * sizeof *c.rounded);
    pp_status s = c.rounded ? grow_places(&c, err) : PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int v = 0; s == PP_OK && v < g->n_values; v++) c.rounded[v] = -1;
    for (int i = 0; s == PP_OK && i < n0; i++) c.at[i] = (place){4 * (int64_t)i + 2, i};
    for (int i = 0; s == PP_OK && i < n0; i++)
        if (is_product(g->nodes[i].op)) s = round_product(&c, i, err);
    if (s == PP_OK) s = reorder(&c, err);
    free(c.rounded);
    free(c.at);
    return s;
}

/* Ops whose output holds values of the half type when their float input does
 * (a max, a sign, a move): their f32 output is kept for the backward as a
 * half copy, which loses nothing. */
static bool exact_op(pp_op op) {
    return op == PP_OP_RELU || op == PP_OP_MAXPOOL || op == PP_OP_GLOBALMAXPOOL || op == PP_OP_NEG || op == PP_OP_ABS ||
           op == PP_OP_IDENTITY || op == PP_OP_FLATTEN || op == PP_OP_RESHAPE || op == PP_OP_SQUEEZE ||
           op == PP_OP_UNSQUEEZE || op == PP_OP_TRANSPOSE;
}

/* Per forward value: the half value it is an exact f32 copy of (-1: none), or
 * -2 where it holds half values with no half copy made yet (exact_op's output). */
static pp_status half_values(const pp_graph *g, int n0, int **out, pp_err *err) {
    int *hv = malloc(pp_count(g->n_values) * sizeof *hv);
    if (!hv) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) hv[v] = -1;
    for (int i = 0; i < n0; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->backward || n->n_out < 1 || n->out[0] < 0) continue;
        const int x = n->in[0], y = n->out[0];
        if (n->op == PP_OP_CAST && x >= 0 && g->values[y].dtype == PP_F32 &&
            (g->values[x].dtype == PP_BF16 || g->values[x].dtype == PP_F16))
            hv[y] = x;
        else if (exact_op(n->op) && x >= 0 && hv[x] != -1 && g->values[y].dtype == PP_F32)
            hv[y] = -2;
    }
    *out = hv;
    return PP_OK;
}

/* A half copy of forward value v (which holds half values): a forward Cast of
 * it to the half type there already (the next product's rounding), else one
 * made right after v's producer. */
static pp_status half_copy(ctx *c, int v, pp_dtype half, int *h, pp_err *err) {
    pp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->op == PP_OP_CAST && !n->backward && n->in[0] == v && g->values[n->out[0]].dtype == half) {
            *h = n->out[0];
            return PP_OK;
        }
    }
    const int p = g->values[v].producer;
    *h = -1;
    return cast(c, v, half, c->at[p].key / 4 * 4 + 3, p, false, h, err);
}

/* A forward reader of a value that holds half values (a ReLU's or a
 * MaxPool's of a product's output) reads, where a product's rounding of it
 * comes before the reader, that rounding's f32 copy instead: the same values,
 * so a cut between them sends the half value alone. */
static void share_copies(pp_graph *g, int n0, const int *hv) {
    for (int c2 = 0; c2 < n0; c2++) {
        const pp_node *n2 = &g->nodes[c2];
        if (n2->backward || n2->op != PP_OP_CAST || g->values[n2->out[0]].dtype != PP_F32) continue;
        const int h = n2->in[0], c1 = h >= 0 ? g->values[h].producer : -1;
        if (c1 < 0 || g->nodes[c1].op != PP_OP_CAST || g->nodes[c1].backward) continue;
        const int v = g->nodes[c1].in[0], f = n2->out[0];
        if (v < 0 || hv[v] == -1 || g->values[v].dtype != PP_F32) continue;
        for (int r = c2 + 1; r < n0; r++) {
            pp_node *rn = &g->nodes[r];
            if (rn->backward) continue;
            for (int k = 0; k < rn->n_in; k++)
                if (rn->in[k] == v) rn->in[k] = f;
        }
    }
}

pp_status pp_train_autocast_stash(pp_graph *g, const pp_train_opts *t, pp_err *err) {
    if (t->optim.precision == PP_PREC_F32) return PP_OK;
    ctx c = {.g = g};
    const int n0 = g->n_nodes;
    const pp_dtype half = t->optim.precision == PP_PREC_BF16 ? PP_BF16 : PP_F16;
    const int nv0 = g->n_values;
    int *hv = NULL;
    PP_TRY(half_values(g, n0, &hv, err));
    share_copies(g, n0, hv);
    /* (the f32 copy, the gradient's owner) -> the backward's own copy */
    typedef struct {
        int v;
        const char *owner;
        int copy;
    } memo;
    memo *m = NULL;
    int n_m = 0, cap_m = 0;
    pp_status s = grow_places(&c, err);
    for (int i = 0; s == PP_OK && i < n0; i++) c.at[i] = (place){4 * (int64_t)i + 2, i};
    for (int i = 0; s == PP_OK && i < n0; i++) {
        if (!g->nodes[i].backward) continue;
        for (int k = 0; s == PP_OK && k < g->nodes[i].n_in; k++) {
            const int v = g->nodes[i].in[k];
            if (v < 0 || v >= nv0 || hv[v] == -1 || g->values[v].producer < 0 ||
                g->nodes[g->values[v].producer].backward)
                continue;
            if (hv[v] == -2 && (s = half_copy(&c, v, half, &hv[v], err)) != PP_OK) break;
            const int h = hv[v];
            int j = 0;
            while (j < n_m && !(m[j].v == v && m[j].owner == g->nodes[i].grad_of)) j++;
            if (j == n_m) {
                if (n_m == cap_m) {
                    memo *mm = realloc(m, (size_t)(cap_m = cap_m * 2 + 16) * sizeof *m);
                    if (!mm) {
                        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                        break;
                    }
                    m = mm;
                }
                /* a weight's half copy is made again from the weight (the stage's own), not kept per micro-batch */
                const int hp = g->values[h].producer, w = hp >= 0 ? g->nodes[hp].in[0] : -1;
                const bool weight = w >= 0 && g->nodes[hp].op == PP_OP_CAST && (g->values[w].is_param ||
                                                                                 g->values[w].is_const);
                int hb = -1, copy = -1;
                if (weight) s = cast(&c, w, half, 4 * (int64_t)i + 1, i, true, &hb, err);
                if (s == PP_OK) s = cast(&c, weight ? hb : h, PP_F32, 4 * (int64_t)i + 1, i, true, &copy, err);
                m[n_m++] = (memo){v, g->nodes[i].grad_of, copy};
            }
            if (s == PP_OK) g->nodes[i].in[k] = m[j].copy;
        }
    }
    if (s == PP_OK && n_m) s = reorder(&c, err);
    free(hv);
    free(m);
    free(c.at);
    return s;
}
