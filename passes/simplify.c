/* simplify.c: remove what does nothing.
 *
 *  - Identity and inference-mode Dropout;
 *  - data-movement ops whose output equals their input: Reshape, Flatten,
 *    Squeeze, Unsqueeze, Expand, Tile to the same shape; Transpose with the
 *    identity permutation; Cast to the same type; Pad by zero; Slice that
 *    keeps everything; Concat of one input;
 *  - an Expand whose readers are all elementwise ops that broadcast and give
 *    the same output from its input (a NumPy broadcast of a broadcast is
 *    the broadcast: ECA's and F.normalize's expand_as before a Mul or Div);
 *  - a Transpose of a Transpose of a weight or constant: one Transpose of it
 *    (none where the two undo each other);
 *  - dead code: nodes none of whose outputs is used or is a graph output;
 *  - duplicate constants (same type, shape and bytes) share one value.
 *
 * Ops are recognized by name, so this file does not depend on which rows the
 * op table has. A node whose output is a graph output is only removed when
 * its input is produced by another node (the graph output keeps its name). */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "../ir/op_fns.h"
#include "passes.h"

static bool is(const pp_node *n, pp_op op) { return n->op == op; }

static bool same_tensor(const pp_value *a, const pp_value *b) {
    return a->dtype == b->dtype && pp_shape_eq(&a->shape, &b->shape);
}

/* constant int input k of n holds only zeros (absent counts as zeros) */
static bool const_all(const pp_graph *g, const pp_node *n, int k, int64_t want, bool absent_ok) {
    if (k >= n->n_in || n->in[k] < 0) return absent_ok;
    const pp_value *v = &g->values[n->in[k]];
    if (!v->is_const || (v->dtype != PP_I64 && v->dtype != PP_I32)) return false;
    size_t cnt = v->nbytes / pp_dtype_size(v->dtype);
    for (size_t i = 0; i < cnt; i++) {
        int64_t x; /* read byte-wise: the constant may be unaligned (pp_value) */
        if (v->dtype == PP_I64) memcpy(&x, (const char *)v->data + 8 * i, 8);
        else {
            int32_t y;
            memcpy(&y, (const char *)v->data + 4 * i, 4);
            x = y;
        }
        if (x != want) return false;
    }
    return true;
}

/* value v is a constant float scalar of +-0 (f32, f64, f16 or bf16) */
static bool const_zero_scalar(const pp_graph *g, int v) {
    const pp_value *c = &g->values[v];
    if (!c->is_const || !c->data || c->nbytes != pp_dtype_size(c->dtype)) return false;
    if (c->dtype == PP_F32) {
        float f;
        memcpy(&f, c->data, 4);
        return f == 0.0f;
    }
    if (c->dtype == PP_F64) {
        double d;
        memcpy(&d, c->data, 8);
        return d == 0.0;
    }
    if (c->dtype == PP_F16 || c->dtype == PP_BF16) {
        uint16_t h;
        memcpy(&h, c->data, 2);
        return (h & 0x7fff) == 0;
    }
    return false;
}

static bool is_noop(const pp_graph *g, const pp_node *n) {
    if (n->n_in < 1 || n->in[0] < 0) return false;
    const pp_value *x = &g->values[n->in[0]], *y = &g->values[n->out[0]];
    if (is(n, PP_OP_IDENTITY)) return true;
    if (is(n, PP_OP_DROPOUT)) { /* its mask unread, and in inference or dropping nothing */
        if (n->n_out > 2 || (n->n_out == 2 && n->out[1] >= 0 &&
                             (pp_graph_is_output(g, n->out[1]) || pp_graph_consumers(g, n->out[1], NULL, 0) > 0)))
            return false;
        if (n->n_in < 3 || n->in[2] < 0) return true; /* inference unless training_mode is given ... */
        const pp_value *t = &g->values[n->in[2]];
        if (t->is_const && t->dtype == PP_BOOL && t->nbytes == 1 && !*(const uint8_t *)t->data) return true;
        /* ... and not a constant false; in training mode a constant ratio of 0 keeps every element and scales
         * by 1 / (1 - 0): y = x (torch's exports of models in training mode, Swin's nn.Dropout(0.0)) */
        return n->n_in >= 2 && n->in[1] >= 0 && const_zero_scalar(g, n->in[1]);
    }
    if (!same_tensor(x, y)) return false;
    /* a view, Expand, Tile or Cast that keeps type and shape keeps everything */
    if (pp_op_has(n->op, PP_TR_VIEW) || is(n, PP_OP_EXPAND) || is(n, PP_OP_TILE) || is(n, PP_OP_CAST))
        return true;
    if (is(n, PP_OP_CONCAT)) return n->n_in == 1;
    if (is(n, PP_OP_TRANSPOSE)) {
        const pp_attr *perm = pp_attr_find(pp_node_attrs(g, n), "perm");
        if (!perm) return x->shape.rank <= 1;
        for (int k = 0; k < perm->n; k++)
            if (perm->ints[k] != k) return false;
        return true;
    }
    if (is(n, PP_OP_PAD)) {
        const pp_attr *pads = pp_attr_find(pp_node_attrs(g, n), "pads");
        if (pads) {
            for (int k = 0; k < pads->n; k++)
                if (pads->ints[k]) return false;
            return true;
        }
        return const_all(g, n, 1, 0, false);
    }
    if (is(n, PP_OP_SLICE)) /* same shape with unit steps keeps everything */
        return n->n_in == 1 || const_all(g, n, 4, 1, true);
    return false;
}

/* Whether every reader of Expand n's output (at most 16 of them) broadcasts
 * its inputs (PRelu's one-way broadcast aside) and gets its own output shape
 * with the Expand's input read instead; the output is not a graph output. */
static bool expand_absorbed(const pp_graph *g, const pp_node *n) {
    if (!is(n, PP_OP_EXPAND) || n->n_in < 1 || n->in[0] < 0 || pp_graph_is_output(g, n->out[0])) return false;
    const int x = n->in[0], y = n->out[0];
    if (g->values[x].dtype != g->values[y].dtype) return false;
    int who[16];
    const int readers = pp_graph_consumers(g, y, who, 16); /* the use index */
    if (readers < 1 || readers > 16) return false;
    for (int i = 0; i < readers; i++) {
        const pp_node *r = &g->nodes[who[i]];
        if (!pp_op_has(r->op, PP_TR_BINARY) || is(r, PP_OP_PRELU) || r->n_out != 1) return false;
        pp_shape o = {0};
        for (int k = 0; k < r->n_in; k++) {
            if (r->in[k] < 0) return false;
            const pp_shape *sk = &g->values[r->in[k] == y ? x : r->in[k]].shape;
            pp_shape b;
            pp_err e = {0};
            if (pp_broadcast(k ? &o : sk, sk, &b, &e) != PP_OK) return false;
            o = b;
        }
        if (!pp_shape_eq(&o, &g->values[r->out[0]].shape)) return false;
    }
    return true;
}

/* XXH3 of a constant's bytes, mixed with its type and shape */
static uint64_t const_hash(const pp_value *v) {
    uint64_t h = XXH3_64bits(v->data ? v->data : "", v->nbytes);
    h ^= (uint64_t)v->dtype * 0x9E3779B97F4A7C15ull;
    for (int d = 0; d < v->shape.rank; d++) h = (h ^ (uint64_t)v->shape.dim[d]) * 1099511628211ull;
    return h;
}

/* uses[v]: how many live node inputs read value v */
static int *count_uses(const pp_graph *g) {
    int *uses = calloc(pp_count(g->n_values), sizeof *uses);
    if (!uses) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) uses[g->nodes[i].in[k]]++;
    }
    return uses;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static pp_status share_constants(pp_graph *g, pp_err *err) {
    int n = 0;
    uint64_t *keys = malloc(sizeof(uint64_t) * 2 * pp_count(g->n_values));
    int *uses = count_uses(g);
    if (!keys || !uses) {
        free(keys), free(uses);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_const && uses[v] > 0 && !g->values[v].is_state) {
            keys[2 * n] = const_hash(&g->values[v]);
            keys[2 * n + 1] = (uint64_t)v;
            n++;
        }
    qsort(keys, (size_t)n, 2 * sizeof(uint64_t), cmp_u64);
    pp_status s = pp_graph_index_uses(g, err); /* replace_uses then visits only the readers */
    for (int i = 1; i < n && s == PP_OK; i++) {
        /* walk back over the run of equal hashes to the first true duplicate */
        for (int j = i - 1; j >= 0 && keys[2 * j] == keys[2 * i]; j--) {
            const pp_value *a = &g->values[keys[2 * j + 1]], *b = &g->values[keys[2 * i + 1]];
            if (same_tensor(a, b) && a->nbytes == b->nbytes &&
                (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0)) {
                pp_graph_replace_uses(g, (int)keys[2 * i + 1], (int)keys[2 * j + 1]);
                break;
            }
        }
    }
    free(keys);
    free(uses);
    pp_graph_drop_uses(g);
    return s;
}

/* A Transpose's permutation into p (absent: the reversal); false if odd. */
static bool perm_of(const pp_graph *g, const pp_node *n, int rank, int64_t *p) {
    const pp_attr *a = pp_attr_find(pp_node_attrs(g, n), "perm");
    if (a && (a->type != PP_ATTR_INTS || a->n != rank)) return false;
    for (int k = 0; k < rank; k++) {
        p[k] = a ? a->ints[k] : rank - 1 - k;
        if (p[k] < 0 || p[k] >= rank) return false;
    }
    return true;
}

/* Transpose n of a Transpose of a weight or constant: n transposes the
 * weight itself, by the two permutations composed (the identity: removed
 * below). A gradient graph has these: the backward's Transpose of a
 * Linear's Transpose(W), which then reads W, not a copy of it that each
 * micro-batch in flight would keep. */
static pp_status transpose_of_weight(pp_graph *g, int i, pp_err *err) {
    pp_node *n = &g->nodes[i];
    if (!is(n, PP_OP_TRANSPOSE) || n->n_in != 1 || n->in[0] < 0) return PP_OK;
    const int t = g->values[n->in[0]].producer;
    if (t < 0 || g->nodes[t].dead || !is(&g->nodes[t], PP_OP_TRANSPOSE) || g->nodes[t].n_in != 1) return PP_OK;
    const int w = g->nodes[t].in[0];
    if (w < 0 || !(g->values[w].is_param || g->values[w].is_const)) return PP_OK;
    const int r = g->values[w].shape.rank;
    int64_t p[PP_MAX_DIMS], q[PP_MAX_DIMS];
    if (r < 1 || !perm_of(g, &g->nodes[t], r, p) || !perm_of(g, n, r, q)) return PP_OK;
    pp_attr *a = pp_arena_alloc(&g->arena, sizeof *a);
    int64_t *c = pp_arena_alloc(&g->arena, sizeof *c * (size_t)r);
    if (!a || !c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int k = 0; k < r; k++) c[k] = p[q[k]]; /* y[k] = t[q[k]] = w[p[q[k]]] */
    *a = (pp_attr){.name = "perm", .type = PP_ATTR_INTS, .ints = c, .n = r};
    n->attrs = a, n->n_attrs = 1;
    n->in[0] = w;
    return pp_graph_note_use(g, w, i, err);
}

/* Transpose n ([1, 0]) of a Gemm without C that only n reads: n becomes
 * the Gemm of the operands swapped ((A'B')^T = B'^T A'^T), and the Gemm
 * dies below. A gradient graph has these where a Linear reads Transpose(W):
 * W's gradient is the transpose of the product giving B's, a copy of the
 * whole weight per micro-batch (ViT-B/16 three a layer) where the product
 * can write it in W's own orientation. */
static pp_status transpose_of_product(pp_graph *g, int i, pp_err *err) {
    pp_node *n = &g->nodes[i];
    if (!is(n, PP_OP_TRANSPOSE) || n->n_in != 1 || n->in[0] < 0 || n->n_out != 1) return PP_OK;
    const int v = n->in[0], q = g->values[v].producer;
    int64_t p[2];
    if (q < 0 || g->values[v].shape.rank != 2 || !perm_of(g, n, 2, p) || p[0] != 1) return PP_OK;
    const pp_node *m = &g->nodes[q];
    int one;
    if (m->dead || !is(m, PP_OP_GEMM) || m->n_out != 1 || m->n_in < 2 || (m->n_in > 2 && m->in[2] >= 0) ||
        m->in[0] < 0 || m->in[1] < 0 || pp_graph_is_output(g, v) || pp_graph_consumers(g, v, &one, 1) != 1)
        return PP_OK;
    const pp_attrs at = pp_node_attrs(g, m);
    float alpha;
    int64_t ta, tb;
    if (pp_attr_float(at, "alpha", 1.0f, &alpha, NULL) != PP_OK || pp_attr_int(at, "transA", 0, &ta, NULL) != PP_OK ||
        pp_attr_int(at, "transB", 0, &tb, NULL) != PP_OK)
        return PP_OK; /* the verifier names a bad attribute */
    pp_attr *a = pp_arena_alloc(&g->arena, 3 * sizeof *a);
    int *in = malloc(2 * sizeof *in); /* the graph frees a node's inputs */
    if (!a || !in) {
        free(in);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    a[0] = (pp_attr){.name = "alpha", .type = PP_ATTR_FLOAT, .f = alpha};
    a[1] = (pp_attr){.name = "transA", .type = PP_ATTR_INT, .i = !tb};
    a[2] = (pp_attr){.name = "transB", .type = PP_ATTR_INT, .i = !ta};
    in[0] = m->in[1], in[1] = m->in[0];
    n->op = PP_OP_GEMM;
    free(n->in);
    n->in = in, n->n_in = 2;
    n->attrs = a, n->n_attrs = 3;
    PP_TRY(pp_graph_note_use(g, in[0], i, err));
    PP_TRY(pp_graph_note_use(g, in[1], i, err));
    return pp_node_infer(g, i, err);
}

pp_status pp_simplify(pp_graph *g, pp_err *err) {
    PP_TRY(pp_graph_index_uses(g, err)); /* replace_uses then visits only the readers */
    for (int i = 0; i < g->n_nodes; i++) {
        PP_TRY(transpose_of_weight(g, i, err));
        PP_TRY(transpose_of_product(g, i, err));
        pp_node *n = &g->nodes[i];
        if (expand_absorbed(g, n)) {
            pp_graph_replace_uses(g, n->out[0], n->in[0]);
            n->dead = true;
            continue;
        }
        if (!is_noop(g, n)) continue;
        int x = n->in[0], y = n->out[0];
        if (pp_graph_is_output(g, y)) {
            const pp_value *xv = &g->values[x];
            if (xv->is_input || xv->is_const || pp_graph_is_output(g, x)) continue;
        }
        pp_graph_replace_uses(g, y, x);
        n->dead = true;
    }
    /* dead code, last to first so chains disappear in one sweep */
    int *uses = count_uses(g);
    if (!uses) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int k = 0; k < g->n_outputs; k++) uses[g->outputs[k]]++;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        pp_node *n = &g->nodes[i];
        if (n->dead) continue;
        bool used = false;
        for (int k = 0; k < n->n_out && !used; k++) used = uses[n->out[k]] > 0;
        if (used) continue;
        n->dead = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) uses[n->in[k]]--;
    }
    free(uses);
    pp_graph_compact(g);
    return share_constants(g, err);
}
