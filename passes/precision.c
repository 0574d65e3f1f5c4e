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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/kernels.h"
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
    bool finite;   /* its Casts to half saturate (attribute pp_finite: the inference policy's) */
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
    const bool finite = c->finite && (dt == PP_F16 || dt == PP_BF16);
    pp_attr *a = pp_arena_alloc(&g->arena, sizeof *a * 2);
    if (!a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    a[0] = (pp_attr){.name = "to", .type = PP_ATTR_INT, .i = (int64_t)dt};
    /* finite values past the half type's range to its largest finite (ir/shape_math.c, "pp_finite"), as the
     * constants are converted (half_const): a mask of -3.4e38 computed in f32 stays finite in half */
    a[1] = (pp_attr){.name = "pp_finite", .type = PP_ATTR_INT, .i = 1};
    pp_node *n = &g->nodes[idx];
    const pp_node *l = &g->nodes[like];
    n->attrs = a, n->n_attrs = finite ? 2 : 1;
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

/* ---- ppcc --precision bf16|fp16 without --train: half storage for inference ---------------------------------- */

/* The inference policy (docs/usage.md, "Half precision for inference"):
 * after the fusions, before the split. A node runs in half (its float inputs
 * and outputs in the half type H, the kernel computing in f32 inside and
 * rounding what it writes) when it is a product (Conv, pp.FusedConv,
 * ConvTranspose, MatMul, Gemm, Einsum), or an op with a half path
 * (half_slots) that reads a half value or
 * feeds a node that wants half (wants_half); its f32 constants are
 * converted to H here (nearest even, the reference Cast's bits; fp16's
 * finite values past 65504 saturate there rather than become infinities:
 * an attention mask's -3.4e38 stays a finite -65504, and 0 times it 0; bf16
 * the same past 3.39e38, where f32's largest rounds up; and so do the Casts
 * to half this pass inserts, attribute pp_finite), its
 * f32 activations get a Cast to H. Every other op reads f32: a Cast back
 * before it. The graph's inputs stay f32 (one Cast to H each, at the first
 * half reader) and so do its outputs (the last half value's producer writes
 * NAME.half, a Cast writes NAME).
 * Because it is in the graph, a cut never adds a rounding and the messages
 * between stages carry the half values. */

/* The input slots of op that hold its data of type T (read in half when the
 * node runs in half), 0 where the op has no half path; ~0u: every slot. */
static unsigned half_slots(pp_op op) {
    switch (op) {
    case PP_OP_MATMUL: return 3u;
    case PP_OP_GEMM:
    case PP_OP_CONVTRANSPOSE:
    case PP_OP_CONV: return 7u;      /* X, W, B */
    case PP_OP_FUSEDCONV: return 15u; /* and the residual */
    case PP_OP_LAYERNORM:  /* X, Scale, B: f32 statistics inside */
    case PP_OP_GROUPNORM:
    case PP_OP_FUSEDGN:
    case PP_OP_INSTANCENORM: return 7u;
    case PP_OP_RMSNORM: return 3u;
    case PP_OP_SOFTMAX:
    case PP_OP_LOGSOFTMAX:
    case PP_OP_MAXPOOL:       /* exact in half */
    case PP_OP_AVGPOOL:       /* the means in f32 */
    case PP_OP_LPPOOL:        /* the sums of |x|^p in double, as in f32 */
    case PP_OP_GLOBALAVGPOOL:
    case PP_OP_TRANSPOSE:
    case PP_OP_SLICE:
    case PP_OP_GATHER:
    case PP_OP_EXPAND:
    case PP_OP_SPLIT:
    case PP_OP_DROPOUT:
    case PP_OP_BATCHNORM:     /* X; scale, B and the statistics stay f32 */
    case PP_OP_RESIZE:        /* X; roi and scales stay f32 */
    case PP_OP_REDUCEMEAN:    /* the sums in f32 or wider; not ReduceSum and friends, whose sums fp16 may not hold */
    case PP_OP_REDUCEL2:      /* a norm: sqrt of the sum, about max |x| * sqrt(n) (F.normalize's) */
    case PP_OP_REDUCEMAX:     /* exact in half */
    case PP_OP_REDUCEMIN:
    case PP_OP_GLOBALMAXPOOL:
    case PP_OP_ARGMAX:
    case PP_OP_ARGMIN: return 1u;
    case PP_OP_PAD: return 5u; /* the data and the constant value */
    case PP_OP_CONCAT:
    case PP_OP_EINSUM: return ~0u; /* (a product: every float operand) */
    case PP_OP_CAST: return 0u; /* reads any type as it is (below) */
    case PP_OP_POW:        /* autocast's f32 ops: x^2 of fp16 overflows past 256 (an unfused RMSNorm's) */
    case PP_OP_EXP:
    case PP_OP_LOG:
    case PP_OP_RECIPROCAL:
    case PP_OP_SOFTPLUS: return 0u;
    default: break;
    }
    if (pp_op_has(op, PP_TR_VIEW)) return 1u;
    if (pp_op_has(op, PP_TR_UNARY) || pp_op_has(op, PP_TR_BINARY)) return ~0u;
    return 0u;
}

/* ops that read a value of any type as it is: no Cast back before them */
static bool reads_any(pp_op op) { return op == PP_OP_CAST || op == PP_OP_SHAPE || op == PP_OP_SIZE; }

static bool is_half_dt(pp_dtype t) { return t == PP_F16 || t == PP_BF16; }

/* the products the inference policy stores in half */
static bool half_product(pp_op op) {
    return op == PP_OP_MATMUL || op == PP_OP_GEMM || op == PP_OP_CONV || op == PP_OP_FUSEDCONV ||
           op == PP_OP_CONVTRANSPOSE || op == PP_OP_EINSUM;
}

typedef struct {
    ctx c;
    int n_vals;        /* values before the pass */
    int *to_half;      /* per value: its half copy (a converted constant or a Cast), -1 none */
    int *to_f32;       /* per value made half: its f32 copy (a Cast back), -1 none */
    bool *made;        /* per value: made half by this pass (was f32) */
    bool *wanted;      /* per value: read in half by a node that wants half (wants_half) */
    bool *wants;       /* per node (before the pass): it runs in half if it can */
} ictx;

/* Which nodes want half, back to front: a product of floats, and an op with
 * a half path one of whose outputs a node that wants half reads in a half
 * slot (a LayerNorm before a product, the views between a convolution and a
 * product). With the forward rule (infer_node: an op with a half path
 * reading a half value runs in half) the half region is every op with a half
 * path between products, and none between two f32-only ops (a Relu between
 * two f32 convolutions stays f32: no Casts for nothing). */
static void wants_half(ictx *x, int n0) {
    pp_graph *g = x->c.g;
    for (int i = n0 - 1; i >= 0; i--) {
        const pp_node *n = &g->nodes[i];
        const unsigned slots = half_slots(n->op);
        bool w = half_product(n->op);
        for (int k = 0; !w && slots && k < n->n_out; k++) w = n->out[k] >= 0 && x->wanted[n->out[k]];
        x->wants[i] = w;
        for (int k = 0; w && k < n->n_in && k < 32; k++)
            if (n->in[k] >= 0 && (slots >> k & 1u) && !g->values[n->in[k]].is_const) x->wanted[n->in[k]] = true;
    }
}

/* constant v converted to the half type at compile time, with the Cast
 * kernel pprt runs (nearest even, subnormals kept), finite values past the
 * type's range saturating to its largest finite (fp16 +-65504, bf16 +-3.39e38) */
static pp_status half_const(ictx *x, int v, int *out, pp_err *err) {
    pp_graph *g = x->c.g;
    PP_TRY(pp_value_align(g, v, err));
    const pp_value *val = &g->values[v];
    int64_t n;
    PP_TRY(pp_shape_numel(&val->shape, &n, err));
    uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof *h); /* (pp_graph_add_const copies it into the arena) */
    if (!h) return PP_FAIL(err, PP_ENOMEM, "out of memory converting '%s' to %s", val->name, pp_dtype_name(x->c.half));
    pp_attr to = {.name = "to", .type = PP_ATTR_INT, .i = (int64_t)x->c.half};
    pprt_tensor tin = {PP_F32, val->shape, (void *)val->data}, tout = {x->c.half, val->shape, h};
    pprt_scratch scratch = {0};
    pp_err e = {0};
    pp_status s = pprt_ref_kernels[PP_OP_CAST]((pp_attrs){&to, 1, 17}, &tin, 1, &tout, 1, &scratch, &e);
    pprt_scratch_free(&scratch);
    if (s != PP_OK) {
        free(h);
        return PP_FAIL(err, s, "converting '%s' to %s: %s", val->name, pp_dtype_name(x->c.half), e.msg);
    }
    /* finite past the type's range (fp16's 65504; bf16's 3.39e38, where f32's largest rounds up): its largest
     * finite, as the Casts to half this pass inserts (pp_finite) */
    pprt_half_finite(val->data, h, x->c.half, 0, n);
    char hint[512];
    snprintf(hint, sizeof hint, "%.480s.%s", val->name ? val->name : "w", pp_dtype_name(x->c.half));
    const pp_shape sh = val->shape;
    s = pp_graph_add_const(g, hint, x->c.half, &sh, h, out, err);
    free(h);
    return s;
}

/* The half copy of f32 value v that node i reads. */
static pp_status want_half(ictx *x, int i, int v, int *out, pp_err *err) {
    pp_graph *g = x->c.g;
    if (x->to_half[v] >= 0) {
        *out = x->to_half[v];
        return PP_OK;
    }
    int h = -1;
    if (g->values[v].is_const && g->values[v].data) {
        PP_TRY(half_const(x, v, &h, err));
    } else {
        /* an activation rounded where it is made (a cut after it sends the half value), an input before its
         * first half reader */
        const int p = g->values[v].producer;
        PP_TRY(cast(&x->c, v, x->c.half, p >= 0 ? x->c.at[p].key / 4 * 4 + 3 : 4 * (int64_t)i + 1, p >= 0 ? p : i,
                    false, &h, err));
    }
    x->to_half[v] = h;
    *out = h;
    return PP_OK;
}

/* Node i's inputs for its kind: half where it runs in half, f32 copies of
 * the values this pass made half where it does not. */
static pp_status infer_node(ictx *x, int i, pp_err *err) {
    pp_graph *g = x->c.g;
    const pp_op op = g->nodes[i].op;
    const unsigned slots = half_slots(op);
    bool half = false;
    for (int k = 0; k < g->nodes[i].n_in; k++) {
        const int v = g->nodes[i].in[k];
        if (v < 0 || k >= 32 || !(slots >> k & 1u)) continue;
        const pp_value *val = &g->values[v];
        if (half_product(op)) half |= val->dtype == PP_F32 || is_half_dt(val->dtype);
        else half |= !val->is_const && ((v < x->n_vals && x->made[v]) || (x->wants[i] && val->dtype == PP_F32));
        /* an embedding: a Gather from a constant f32 table whose rows a half op reads takes the table in half
         * (converted with the weights) instead of a Cast of its rows */
        half |= op == PP_OP_GATHER && k == 0 && x->wants[i] && val->is_const && val->data && val->dtype == PP_F32;
    }
    for (int k = 0; k < g->nodes[i].n_in; k++) {
        const int v = g->nodes[i].in[k];
        if (v < 0) continue;
        int r = v;
        if (half && k < 32 && (slots >> k & 1u) && g->values[v].dtype == PP_F32) {
            PP_TRY(want_half(x, i, v, &r, err));
        } else if (!(half && k < 32 && (slots >> k & 1u)) && v < x->n_vals && x->made[v] && !reads_any(op)) {
            if (x->to_f32[v] < 0) PP_TRY(cast(&x->c, v, PP_F32, 4 * (int64_t)i + 1, i, false, &x->to_f32[v], err));
            r = x->to_f32[v];
        }
        g->nodes[i].in[k] = r;
    }
    if (!half) return PP_OK;
    PP_TRY(pp_node_infer(g, i, err));
    for (int k = 0; k < g->nodes[i].n_out; k++) {
        const int y = g->nodes[i].out[k];
        if (y >= 0 && y < x->n_vals && is_half_dt(g->values[y].dtype)) x->made[y] = true;
    }
    return PP_OK;
}

/* Graph output y, made half: its producer writes y.half, y is the Cast of it to f32 (its name and place kept). */
static pp_status output_f32(ictx *x, int y, pp_err *err) {
    pp_graph *g = x->c.g;
    const int p = g->values[y].producer;
    char vn[600];
    snprintf(vn, sizeof vn, "%.480s.%s", g->values[y].name ? g->values[y].name : "y", pp_dtype_name(x->c.half));
    int h;
    PP_TRY(new_value(g, vn, y, x->c.half, &h, err));
    g->values[h].producer = p;
    for (int k = 0; k < g->nodes[p].n_out; k++)
        if (g->nodes[p].out[k] == y) g->nodes[p].out[k] = h;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == y) g->nodes[i].in[k] = h;
    g->values[y].dtype = PP_F32;
    PP_TRY(pp_node_infer(g, p, err)); /* y.half's size */
    int yy = y;
    return cast(&x->c, h, PP_F32, x->c.at[p].key / 4 * 4 + 3, p, false, &yy, err);
}

pp_status pp_infer_autocast(pp_graph *g, int precision, pp_err *err) {
    if (precision == PP_PREC_F32) return PP_OK;
    ictx x = {.c = {.g = g, .half = precision == PP_PREC_BF16 ? PP_BF16 : PP_F16, .finite = true,
                    .n_vals = g->n_values},
              .n_vals = g->n_values};
    const int n0 = g->n_nodes;
    x.to_half = malloc(pp_count(g->n_values) * sizeof *x.to_half);
    x.to_f32 = malloc(pp_count(g->n_values) * sizeof *x.to_f32);
    x.made = calloc(pp_count(g->n_values), sizeof *x.made);
    x.wanted = calloc(pp_count(g->n_values), sizeof *x.wanted);
    x.wants = calloc(pp_count(n0), sizeof *x.wants);
    pp_status s = x.to_half && x.to_f32 && x.made && x.wanted && x.wants ? grow_places(&x.c, err)
                                                                          : PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) wants_half(&x, n0);
    for (int v = 0; s == PP_OK && v < x.n_vals; v++) x.to_half[v] = x.to_f32[v] = -1;
    for (int i = 0; s == PP_OK && i < n0; i++) x.c.at[i] = (place){4 * (int64_t)i + 2, i};
    for (int i = 0; s == PP_OK && i < n0; i++) s = infer_node(&x, i, err);
    for (int k = 0; s == PP_OK && k < g->n_outputs; k++) {
        const int y = g->outputs[k];
        if (y < x.n_vals && x.made[y] && g->values[y].producer >= 0) s = output_f32(&x, y, err);
    }
    if (s == PP_OK) s = reorder(&x.c, err);
    if (s == PP_OK) g->precision = precision;
    free(x.to_half);
    free(x.to_f32);
    free(x.made);
    free(x.wanted);
    free(x.wants);
    free(x.c.at);
    return s;
}
