/* rows.c: the row-order pass (inference, and a training graph's forward before
 * its gradient; --disable-pass rows turns it off).
 *
 * torch's MultiheadAttention with batch_first=True (torchvision's ViT, every
 * nn.TransformerEncoderLayer(batch_first=True)) exports a Transpose
 * [B, S, E] -> [S, B, E] before the QKV product and one back after the
 * output product. Both only reorder rows for ops that work row by row, yet
 * each moves the whole activation: two copies a layer on every backend. This
 * pass removes such a Transpose (the seed) and lets the ops after it run on
 * the rows in the order they are stored, carrying the pending reorder as a
 * layout (rlay) from value to value until an op needs the order the model
 * wrote:
 *   - ops that work per row (MatMul and Gemm with a constant right operand,
 *     LayerNormalization, Softmax and LogSoftmax over the last axis,
 *     elementwise ops with a constant that varies along the last axis
 *     only) need the last dim's elements in place, whatever the rows'
 *     order; where the reorder has moved them, a Transpose brings the last
 *     dim's elements together first (a partial one: the rows stay as they
 *     are stored);
 *   - ops that do not care about order at all (unary elementwise ops, a
 *     binary op with a scalar constant, or with two operands in the same
 *     layout) run as they are;
 *   - Reshape only regroups the stored elements (no node: the layout notes
 *     it), Slice slices the stored axis that holds the sliced dim (the
 *     stored tensor seen as its atoms first where that dim lies inside one);
 *   - a Transpose in the region becomes one over the stored tensor that
 *     reaches its output's order, or none where the order is the stored
 *     one (torch's Transpose back after the output product);
 *   - anything else reads the value made again in the model's order
 *     (Reshape, Transpose, Reshape after its producer).
 * Regions that meet (a node reading two seeds' values) are tried together,
 * and where that does not pay, each seed alone.
 * The rewrite is kept only where it moves fewer elements through
 * Transposes than the model did (elements of every Transpose made against
 * those of the seed and the region's Transposes), with no more Transposes
 * than it removes (each a launch on a GPU). Each op computes the same
 * rows with the same arithmetic, only stored in another order, so the
 * values are the model's own. A layer of torchvision's ViT goes from six
 * Transposes to four (the heads' three and one of the context), and none of
 * them is [B, S, E] <-> [S, B, E] any more (docs/design-notes.md, "Row
 * order"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/shape_nn.h"
#include "passes.h"

enum { RA = 2 * PP_MAX_DIMS }; /* atoms of a layout at most */

/* A region value as its stored tensor holds it: the value sv (shape ss) as
 * na atoms, its factors of more than one element in stored (row-major)
 * order, each a run of whole elements of one of ss's dims or a dim of it;
 * the logical value's dim d is the atoms g[d][0..ng[d]) in that order (none:
 * a dim of 1). */
typedef struct rlay {
    int sv;
    pp_shape ss;
    int na;
    int64_t a[RA];
    int nd;
    int ng[PP_MAX_DIMS];
    signed char g[PP_MAX_DIMS][RA];
} rlay;

typedef struct rctx {
    pp_graph *g;
    bool apply;      /* false: count only (the region's cost) */
    int n_orig, nv0; /* nodes and values before the pass */
    rlay *lay;       /* value -> its layout while in the region */
    bool *in;        /* value (< nv0) -> in the region */
    bool *made;      /* value (< nv0) -> made again in the model's order */
    int *prod;       /* value (< nv0) -> the original node after which it can be made again */
    int *before;     /* new node (index - n_orig) -> the original node it goes before */
    int n_new, cap_new;
    double removed, added; /* elements through Transposes: the model's gone, the ones made */
    int n_removed, n_added; /* and the Transposes themselves (each a launch on a GPU) */
    bool bad;              /* a reorder past PP_MAX_DIMS dims: the region is left alone */
    int *last_use;         /* value (< nv0) -> the last original node reading it (n_orig: a graph output) */
    int horizon;           /* the last reader of a region value so far */
    bool *seed;            /* node -> a seed of the region being walked */
    bool *fixed;           /* value (< nv0) -> no graph input reaches it (find_fixed) */
    int *sid;              /* value (< nv0) -> the seed its region grew from (a union-find over nodes: uf) */
    int *uf;               /* node -> its parent among the seeds that met (a region meets another at a node) */
    pp_err *err;
} rctx;

/* ---- layouts --------------------------------------------------------------------------------- */

static int64_t numel_of(const pp_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->dim[d];
    return n;
}

/* The atoms in the logical order (dims outer first, each dim's atoms in order). */
static int logical_order(const rlay *l, int *ord) {
    int n = 0;
    for (int d = 0; d < l->nd; d++)
        for (int k = 0; k < l->ng[d]; k++) ord[n++] = l->g[d][k];
    return n;
}

/* The logical value's shape. */
static pp_shape logical_shape(const rlay *l) {
    pp_shape s = {.rank = l->nd};
    for (int d = 0; d < l->nd; d++) {
        s.dim[d] = 1;
        for (int k = 0; k < l->ng[d]; k++) s.dim[d] *= l->a[l->g[d][k]];
    }
    return s;
}

/* Atom i (size s) becomes atoms i (s / inner) and i + 1 (inner), both in the group that held it. */
static bool split_atom(rlay *l, int i, int64_t inner) {
    if (l->na >= RA) return false;
    for (int d = 0; d < l->nd; d++) {
        int at = -1;
        for (int k = 0; k < l->ng[d]; k++) {
            if (l->g[d][k] == i) at = k;
            if (l->g[d][k] > i) l->g[d][k]++;
        }
        if (at < 0) continue;
        memmove(&l->g[d][at + 2], &l->g[d][at + 1], (size_t)(l->ng[d] - at - 1));
        l->g[d][at + 1] = (signed char)(i + 1), l->ng[d]++;
    }
    memmove(&l->a[i + 2], &l->a[i + 1], (size_t)(l->na - i - 1) * sizeof l->a[0]);
    l->a[i + 1] = inner, l->a[i] /= inner, l->na++;
    return true;
}

/* The layout of Reshape(x) to shape y, x's layout l: each dim of y from
 * x's atoms innermost first, an atom split where a dim ends inside it.
 * false: y's dims do not fall on the atoms so (the value is made again). */
static bool lay_reshape(const rlay *l, const pp_shape *y, rlay *out) {
    *out = *l;
    int L[RA], nl = 0; /* the atoms innermost first in the logical order */
    for (int d = l->nd - 1; d >= 0; d--)
        for (int k = l->ng[d] - 1; k >= 0; k--) L[nl++] = l->g[d][k];
    if (y->rank > PP_MAX_DIMS) return false;
    signed char got[PP_MAX_DIMS][RA];
    int ng[PP_MAX_DIMS] = {0}, pos = 0;
    for (int d = y->rank - 1; d >= 0; d--) { /* (out keeps x's dims until the end: split_atom renumbers them) */
        int64_t need = y->dim[d];
        while (need > 1) {
            if (pos >= nl) return false;
            const int at = L[pos];
            const int64_t s = out->a[at];
            if (need % s == 0) {
                got[d][ng[d]++] = (signed char)at, need /= s, pos++;
            } else if (s % need == 0) { /* its inner part: a new atom at + 1 */
                if (!split_atom(out, at, need)) return false;
                for (int k = 0; k < nl; k++) L[k] += L[k] > at;
                for (int e = y->rank - 1; e >= d; e--)
                    for (int k = 0; k < ng[e]; k++) got[e][k] = (signed char)(got[e][k] + (got[e][k] > at));
                got[d][ng[d]++] = (signed char)(at + 1), need = 1;
            } else {
                return false;
            }
        }
    }
    if (pos != nl) return false;
    out->nd = y->rank;
    memset(out->ng, 0, sizeof out->ng);
    for (int d = 0; d < y->rank; d++) {
        out->ng[d] = ng[d];
        for (int k = 0; k < ng[d]; k++) out->g[d][k] = got[d][ng[d] - 1 - k]; /* outer first */
    }
    return true;
}

/* The layout with the atoms `ord` (a permutation of them) as the new stored order. */
static rlay lay_reordered(const rlay *l, const int *ord) {
    rlay o = *l;
    int where[RA];
    for (int k = 0; k < l->na; k++) o.a[k] = l->a[ord[k]], where[ord[k]] = k;
    for (int d = 0; d < l->nd; d++)
        for (int k = 0; k < l->ng[d]; k++) o.g[d][k] = (signed char)where[l->g[d][k]];
    return o;
}

/* Whether the last dim's atoms are the stored order's last ones, in order. */
static bool last_in_place(const rlay *l) {
    const int d = l->nd - 1, n = l->ng[d];
    for (int k = 0; k < n; k++)
        if (l->g[d][k] != l->na - n + k) return false;
    return true;
}

/* ---- nodes made ------------------------------------------------------------------------------ */

static pp_status new_value(rctx *R, const char *hint, int *v) {
    char name[600];
    for (int k = 0;; k++) {
        snprintf(name, sizeof name, "%s/rows_%d", hint, k);
        if (pp_graph_find(R->g, name) < 0) break;
    }
    return pp_graph_add_value(R->g, name, v, R->err);
}

/* A node placed before original node `at`, with the scope of node `like`. */
static pp_status new_node(rctx *R, pp_op op, const char *hint, int n_in, int at, int like, int *idx) {
    char name[600];
    /* (node names must be unique: ONNX checkers refuse a model of two alike, --export-stages writes one) */
    snprintf(name, sizeof name, "%s/rows_%s_%d", hint, pp_op_table[op].name, R->n_new);
    if (R->n_new == R->cap_new) {
        const int cap = R->cap_new ? 2 * R->cap_new : 16;
        int *b = realloc(R->before, (size_t)cap * sizeof *b);
        if (!b) return PP_FAIL(R->err, PP_ENOMEM, "out of memory");
        R->before = b, R->cap_new = cap;
    }
    PP_TRY(pp_graph_add_node(R->g, op, name, n_in, 1, idx, R->err));
    R->before[R->n_new++] = at;
    pp_node *n = &R->g->nodes[*idx];
    const pp_node *s = &R->g->nodes[like];
    n->scope = s->scope, n->n_scope = s->n_scope, n->extra = s->extra, n->n_extra = s->n_extra;
    return PP_OK;
}

/* Reshape x to shape `to` into value *y (made when *y < 0), before node `at`. */
static pp_status emit_reshape(rctx *R, int x, const pp_shape *to, int at, int like, int *y) {
    const char *hint = R->g->nodes[like].name;
    int c, ni;
    PP_TRY(pp_graph_add_ints(R->g, hint, to->dim, to->rank, &c, R->err));
    if (*y < 0) PP_TRY(new_value(R, hint, y));
    PP_TRY(new_node(R, PP_OP_RESHAPE, hint, 2, at, like, &ni));
    pp_node *n = &R->g->nodes[ni];
    n->in[0] = x, n->in[1] = c, n->out[0] = *y;
    return PP_OK;
}

static pp_status emit_transpose(rctx *R, int x, const int64_t *perm, int rank, int at, int like, int *y) {
    const char *hint = R->g->nodes[like].name;
    int ni;
    int64_t *p = pp_arena_alloc(&R->g->arena, pp_count(rank) * sizeof *p);
    pp_attr *a = pp_arena_alloc(&R->g->arena, sizeof *a);
    if (!p || !a) return PP_FAIL(R->err, PP_ENOMEM, "out of memory");
    memcpy(p, perm, (size_t)rank * sizeof *p);
    *a = (pp_attr){.name = "perm", .type = PP_ATTR_INTS, .ints = p, .n = rank};
    if (*y < 0) PP_TRY(new_value(R, hint, y));
    PP_TRY(new_node(R, PP_OP_TRANSPOSE, hint, 1, at, like, &ni));
    pp_node *n = &R->g->nodes[ni];
    n->in[0] = x, n->out[0] = *y, n->attrs = a, n->n_attrs = 1;
    return PP_OK;
}

/* The stored tensor of l brought to the atom order `ord`, then given shape
 * `to` (into *y: made when < 0), before node `at`: a Reshape into the runs
 * of atoms that stay together, their Transpose, a Reshape to `to` (each only
 * where it does something, but one node at least). Counts the Transpose's
 * elements in R->added. */
static pp_status emit_order(rctx *R, const rlay *l, const int *ord, const pp_shape *to, int at, int like, int *y) {
    int run_of[RA], nr = 0; /* atom -> its run, runs numbered in stored order */
    int64_t pos[RA];
    for (int k = 0; k < l->na; k++) pos[ord[k]] = k;
    for (int k = 0; k < l->na; k++) run_of[k] = k > 0 && pos[k] == pos[k - 1] + 1 ? run_of[k - 1] : nr++;
    if (nr > PP_MAX_DIMS) { /* (no Transpose of that many dims: the region is left alone) */
        R->bad = true;
        return PP_OK;
    }
    pp_shape pre = {.rank = nr ? nr : 1, .dim = {1}}, mid = pre;
    for (int r = 0; r < nr; r++) pre.dim[r] = 1;
    for (int k = 0; k < l->na; k++) pre.dim[run_of[k]] *= l->a[k];
    int64_t perm[RA];
    int np = 0;
    for (int k = 0; k < l->na; k++)
        if (k == 0 || run_of[ord[k]] != run_of[ord[k - 1]]) perm[np++] = run_of[ord[k]];
    bool ident = true;
    for (int r = 0; r < np; r++) ident = ident && perm[r] == r, mid.dim[r] = pre.dim[perm[r]];
    if (!ident) R->added += (double)numel_of(&l->ss), R->n_added++;
    if (!R->apply) return PP_OK;
    int x = l->sv;
    if (!ident) {
        if (!pp_shape_eq(&pre, &l->ss)) {
            int t = -1;
            PP_TRY(emit_reshape(R, x, &pre, at, like, &t));
            x = t;
        }
        const bool last = pp_shape_eq(&mid, to);
        int t = last ? *y : -1;
        PP_TRY(emit_transpose(R, x, perm, nr, at, like, &t));
        if (last) return *y = t, PP_OK;
        x = t;
    } else if (*y < 0 && pp_shape_eq(&l->ss, to)) {
        *y = x;
        return PP_OK;
    }
    return emit_reshape(R, x, to, at, like, y);
}

/* Region value v made again in the model's order (once), right after the
 * node that made it: its readers outside the region read it unchanged. */
static pp_status make_again(rctx *R, int v) {
    if (R->made[v]) return PP_OK;
    R->made[v] = true;
    int ord[RA];
    (void)logical_order(&R->lay[v], ord);
    const pp_shape to = logical_shape(&R->lay[v]);
    int y = v;
    return emit_order(R, &R->lay[v], ord, &to, R->prod[v] + 1, R->prod[v], &y);
}

/* ---- the region ------------------------------------------------------------------------------ */

static bool is_region(const rctx *R, int v) { return v >= 0 && v < R->nv0 && R->in[v]; }

static int uf_find(const rctx *R, int a) {
    while (R->uf[a] != a) a = R->uf[a];
    return a;
}

static int uf_union(rctx *R, int a, int b) {
    a = uf_find(R, a), b = uf_find(R, b);
    if (a != b) R->uf[a > b ? a : b] = a < b ? a : b; /* (the first seed names the set) */
    return a < b ? a : b;
}

/* Value v, made by original node ci, joins the region with layout l; the
 * seeds of ci's region operands meet there. */
static void join(rctx *R, int v, int ci, const rlay *l) {
    R->in[v] = true, R->prod[v] = ci, R->lay[v] = *l;
    if (R->last_use[v] > R->horizon) R->horizon = R->last_use[v];
    int s = R->seed[ci] && (R->g->nodes[ci].op == PP_OP_TRANSPOSE) && !is_region(R, R->g->nodes[ci].in[0]) ? ci : -1;
    for (int k = 0; k < R->g->nodes[ci].n_in; k++) {
        const int x = R->g->nodes[ci].in[k];
        if (is_region(R, x)) s = s < 0 ? uf_find(R, R->sid[x]) : uf_union(R, s, R->sid[x]);
    }
    R->sid[v] = s;
}

/* A value outside the region that no data reaches: a constant, a weight that trains (a variable until the gradient
 * is built), or one computed from those alone (a training graph's nn.Linear weight Transpose, which fold leaves). */
static bool const_value(const rctx *R, int v) {
    return v >= 0 && !is_region(R, v) && (v < R->nv0 ? R->fixed[v] : R->g->values[v].is_const);
}

/* R->fixed: the values that no graph input reaches, in one walk of the nodes in their order. */
static void find_fixed(rctx *R) {
    const pp_graph *g = R->g;
    for (int v = 0; v < R->nv0; v++)
        R->fixed[v] = g->values[v].producer < 0 && (g->values[v].is_const || g->values[v].is_param);
    for (int i = 0; i < R->n_orig; i++) {
        const pp_node *n = &g->nodes[i];
        bool all = !n->dead && n->n_in > 0;
        for (int k = 0; all && k < n->n_in; k++) all = n->in[k] < 0 || R->fixed[n->in[k]];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) R->fixed[n->out[k]] = all || g->values[n->out[k]].is_const;
    }
}

/* A constant operand that varies along the last dim only (of length K), of rank at most `rank`. */
static bool along_last(const pp_value *c, int64_t K, int rank) {
    if (c->shape.rank > rank) return false;
    for (int d = 0; d + 1 < c->shape.rank; d++)
        if (c->shape.dim[d] != 1) return false;
    return c->shape.rank == 0 || c->shape.dim[c->shape.rank - 1] == K || c->shape.dim[c->shape.rank - 1] == 1;
}

static int64_t attr_or(const pp_graph *g, const pp_node *n, const char *name, int64_t def) {
    int64_t v = def;
    return pp_attr_int(pp_node_attrs(g, n), name, def, &v, NULL) == PP_OK ? v : def;
}

/* A binary elementwise op's other operand o (value ov) beside a region operand of layout l: 'a' where the
 * op may run in any order (a scalar constant, or a region value of the same layout), 'r' where per row
 * (a constant along the last dim only), else 0. */
static int binary_kind(const rctx *R, const pp_value *ov, int o, const rlay *l) {
    if (is_region(R, o)) { /* the same layout: any order */
        const rlay *m = &R->lay[o];
        bool same = m->na == l->na && !memcmp(m->a, l->a, (size_t)l->na * sizeof l->a[0]) && m->nd == l->nd;
        for (int d = 0; same && d < l->nd; d++)
            same = m->ng[d] == l->ng[d] && !memcmp(m->g[d], l->g[d], (size_t)l->ng[d]);
        return same ? 'a' : 0; /* (the same elements in the same order; its stored shape may differ: reshaped) */
    }
    if (!const_value(R, o)) return 0;
    if (ov->shape.rank == 0 || numel_of(&ov->shape) == 1) return ov->shape.rank <= l->nd ? 'a' : 0;
    return along_last(ov, logical_shape(l).dim[l->nd - 1], l->nd) ? 'r' : 0;
}

/* How node c reads its region operand: 'r' per row (the last dim in place), 'a' in any order, 0: not in the region. */
static int row_kind(const rctx *R, const pp_node *c, const rlay *l) {
    const pp_graph *g = R->g;
    if (c->n_out != 1) return 0;
    if (!is_region(R, c->in[0])) { /* a binary op's right operand */
        if (c->n_in != 2 || !pp_op_has(c->op, PP_TR_BINARY) || !is_region(R, c->in[1])) return 0;
        return binary_kind(R, &g->values[c->in[0]], c->in[0], l);
    }
    switch (c->op) {
    case PP_OP_MATMUL:
        return c->n_in == 2 && const_value(R, c->in[1]) && g->values[c->in[1]].shape.rank == 2 ? 'r' : 0;
    case PP_OP_GEMM: {
        if (l->nd != 2 || attr_or(g, c, "transA", 0) != 0 || !const_value(R, c->in[1]) ||
            g->values[c->in[1]].shape.rank != 2)
            return 0;
        const int64_t N = g->values[c->in[1]].shape.dim[attr_or(g, c, "transB", 0) ? 0 : 1];
        return c->n_in < 3 || c->in[2] < 0 || (const_value(R, c->in[2]) && along_last(&g->values[c->in[2]], N, 2))
                   ? 'r'
                   : 0;
    }
    case PP_OP_LAYERNORM:
        for (int k = 1; k < c->n_in; k++)
            if (c->in[k] >= 0 && !const_value(R, c->in[k])) return 0;
        return attr_or(g, c, "axis", -1) == -1 && c->n_out == 1 ? 'r' : 0;
    case PP_OP_SOFTMAX:
    case PP_OP_LOGSOFTMAX: return attr_or(g, c, "axis", g->opset >= 13 ? -1 : 1) == -1 ? 'r' : 0;
    default: break;
    }
    /* (Identity: a training graph's forward runs the pass before simplify, with the Dropouts of p = 0 torch
     * exported as Identity still there) */
    if ((pp_op_has(c->op, PP_TR_UNARY) || c->op == PP_OP_IDENTITY) && c->n_in == 1) return 'a';
    if (!pp_op_has(c->op, PP_TR_BINARY) || c->n_in != 2) return 0;
    return binary_kind(R, &g->values[c->in[1]], c->in[1], l);
}

/* The region operand of per-row node c (layout l) as it will read it: the
 * last dim's atoms brought to the end of the stored order where the seed
 * moved them (a Transpose, counted), then shaped [rows..., K] as node c
 * takes it (Gemm: [rows, K]). *lin: its layout. */
static pp_status row_operand(rctx *R, int ci, const rlay *l, bool two_d, int min_rank, rlay *lin) {
    *lin = *l;
    const int64_t K = logical_shape(l).dim[l->nd - 1];
    int y = -1;
    pp_shape to = {.rank = two_d || min_rank < 2 ? 2 : min_rank}; /* [1..., rows, K] */
    for (int d = 0; d < to.rank; d++) to.dim[d] = 1;
    to.dim[to.rank - 2] = numel_of(&l->ss) / (K ? K : 1), to.dim[to.rank - 1] = K;
    if (!last_in_place(l)) { /* the rows as stored, the last dim's atoms after them */
        int ord[RA], n = 0;
        bool last[RA] = {false};
        for (int k = 0; k < l->ng[l->nd - 1]; k++) last[l->g[l->nd - 1][k]] = true;
        for (int k = 0; k < l->na; k++)
            if (!last[k]) ord[n++] = k;
        for (int k = 0; k < l->ng[l->nd - 1]; k++) ord[n++] = l->g[l->nd - 1][k];
        *lin = lay_reordered(l, ord);
        PP_TRY(emit_order(R, l, ord, &to, ci, ci, &y));
        lin->sv = y, lin->ss = to;
        return PP_OK;
    }
    const pp_shape *ss = &l->ss;
    if (ss->rank >= min_rank && (!two_d || ss->rank == 2) && ss->dim[ss->rank - 1] == K) return PP_OK;
    lin->ss = to;
    if (R->apply) {
        PP_TRY(emit_reshape(R, l->sv, &to, ci, ci, &y));
        lin->sv = y;
    }
    return PP_OK;
}

/* Per-row or any-order node ci on the region (kind 'r' or 'a'): it reads
 * the stored tensor and writes a stored one; its output joins the region. */
static pp_status take_rowwise(rctx *R, int ci, int kind) {
    pp_graph *g = R->g;
    const pp_node *c = &g->nodes[ci];
    const int slot = is_region(R, c->in[0]) ? 0 : 1, v = c->out[0];
    rlay lin = R->lay[c->in[slot]];
    if (kind == 'r') {
        const bool gemm = c->op == PP_OP_GEMM;
        const int min_rank = c->op == PP_OP_MATMUL                                  ? 2
                             : c->n_in == 2 && pp_op_has(c->op, PP_TR_BINARY) ? g->values[c->in[1 - slot]].shape.rank
                                                                              : 1;
        PP_TRY(row_operand(R, ci, &R->lay[c->in[slot]], gemm, min_rank, &lin));
        c = &g->nodes[ci]; /* (row_operand may add nodes: g->nodes moves) */
    }
    rlay out = lin;
    const int k1 = c->n_in == 2 && pp_op_has(c->op, PP_TR_BINARY) ? c->in[1 - slot] : -1;
    if (k1 >= 0 && !is_region(R, k1) && g->values[k1].shape.rank > out.ss.rank) { /* a constant of more dims than */
        const int r = g->values[k1].shape.rank, sh = r - out.ss.rank; /* the stored tensor: ones before its dims */
        memmove(&out.ss.dim[sh], &out.ss.dim[0], (size_t)out.ss.rank * sizeof out.ss.dim[0]);
        for (int d = 0; d < sh; d++) out.ss.dim[d] = 1;
        out.ss.rank = r;
    }
    if (c->op == PP_OP_MATMUL || c->op == PP_OP_GEMM) { /* the last dim's atoms become one of N */
        const pp_value *w = &g->values[c->in[1]];
        const int64_t N = c->op == PP_OP_GEMM && attr_or(g, c, "transB", 0) ? w->shape.dim[0] : w->shape.dim[1];
        const int d = out.nd - 1;
        out.na -= out.ng[d], out.ng[d] = 0;
        if (N > 1) out.a[out.na] = N, out.g[d][out.ng[d]++] = (signed char)out.na++;
        out.ss.dim[out.ss.rank - 1] = N;
    }
    join(R, v, ci, &out);
    if (!R->apply) return PP_OK;
    int sv;
    PP_TRY(new_value(R, g->values[v].name, &sv));
    int other = -1;
    if (c->n_in == 2 && is_region(R, c->in[1 - slot])) { /* the same layout, its stored shape made lin's */
        const rlay *m = &R->lay[c->in[1 - slot]];
        other = m->sv;
        if (!pp_shape_eq(&m->ss, &lin.ss)) {
            int y = -1;
            PP_TRY(emit_reshape(R, m->sv, &lin.ss, ci, ci, &y));
            other = y;
        }
    }
    c = &g->nodes[ci];
    c->in[slot] = lin.sv;
    if (other >= 0) c->in[1 - slot] = other;
    c->out[0] = sv;
    R->lay[v].sv = sv;
    return PP_OK;
}

/* The dim of stored shape ss that is atom a alone (atoms of l), or -1. */
static int stored_dim(const pp_shape *ss, const rlay *l, int a) {
    for (int k = 0, at = 0; k < ss->rank; k++) {
        const int first = at;
        for (int64_t e = ss->dim[k]; e > 1 && at < l->na; at++) e /= l->a[at];
        if (first == a && at == a + 1) return k;
    }
    return -1;
}

/* Slice node ci of a region value: each sliced dim one atom that is a dim
 * of the stored tensor, sliced there. false: not so (the value is made again). */
static pp_status take_slice(rctx *R, int ci, bool *took) {
    pp_graph *g = R->g;
    const pp_node *c = &g->nodes[ci];
    const rlay *l = &R->lay[c->in[0]];
    *took = false;
    if (c->n_out != 1 || g->opset < 10) return PP_OK; /* (before 10 a Slice's ranges are attributes) */
    for (int k = 1; k < c->n_in; k++) {
        if (c->in[k] < 0) continue;
        if (!const_value(R, c->in[k])) return PP_OK;
        PP_TRY(pp_value_align(g, c->in[k], R->err));
    }
    pp_tinfo tin[5], tout[1];
    if (c->n_in > 5) return PP_OK;
    pp_node_tinfo(g, c, tin, tout);
    tin[0].shape = logical_shape(l);
    pp_slice sl;
    if (pp_slice_parse(pp_node_attrs(g, c), tin, c->n_in, &sl, NULL) != PP_OK) return PP_OK;
    rlay out = *l;
    bool split = false; /* the stored tensor seen as its atoms first (a sliced atom inside a stored dim) */
    int64_t st[PP_MAX_DIMS], en[PP_MAX_DIMS], ax[PP_MAX_DIMS], sp[PP_MAX_DIMS], cnts[PP_MAX_DIMS];
    int atoms[PP_MAX_DIMS], n = 0; /* each sliced dim's atom and count, set after the loop (a restart above) */
    for (int d = 0; d < l->nd; d++) {
        const int64_t len = tin[0].shape.dim[d], cnt = sl.out.dim[d];
        if (sl.first[d] == 0 && sl.step[d] == 1 && cnt == len) continue;
        if (l->ng[d] != 1 || sl.step[d] < 1 || cnt < 2) return PP_OK;
        const int a = l->g[d][0];
        int j = stored_dim(&out.ss, l, a);
        if (j < 0 && !split && l->na <= PP_MAX_DIMS) { /* every atom a dim: a Reshape, then this again */
            split = true, out.ss.rank = l->na, n = 0, d = -1;
            for (int k = 0; k < l->na; k++) out.ss.dim[k] = l->a[k];
            continue;
        }
        if (j < 0) return PP_OK;
        st[n] = sl.first[d], en[n] = sl.first[d] + (cnt - 1) * sl.step[d] + 1, ax[n] = j, sp[n] = sl.step[d];
        atoms[n] = a, cnts[n++] = cnt;
    }
    const pp_shape pre = out.ss; /* the stored tensor as the Slice reads it */
    for (int k = 0; k < n; k++) out.a[atoms[k]] = cnts[k], out.ss.dim[ax[k]] = cnts[k];
    *took = true;
    const int v = c->out[0];
    join(R, v, ci, &out);
    if (!R->apply) return PP_OK;
    const char *hint = c->name;
    int ci4[4], ni, sv, x = l->sv;
    if (split) { /* (made before the Slice: the same place, made first) */
        x = -1;
        PP_TRY(emit_reshape(R, l->sv, &pre, ci, ci, &x));
    }
    PP_TRY(pp_graph_add_ints(R->g, hint, st, n, &ci4[0], R->err));
    PP_TRY(pp_graph_add_ints(R->g, hint, en, n, &ci4[1], R->err));
    PP_TRY(pp_graph_add_ints(R->g, hint, ax, n, &ci4[2], R->err));
    PP_TRY(pp_graph_add_ints(R->g, hint, sp, n, &ci4[3], R->err));
    PP_TRY(new_value(R, g->values[v].name, &sv));
    PP_TRY(new_node(R, PP_OP_SLICE, hint, 5, ci, ci, &ni));
    pp_node *s = &g->nodes[ni];
    s->name = g->nodes[ci].name, s->src = g->nodes[ci].src;
    s->in[0] = x;
    for (int k = 0; k < 4; k++) s->in[k + 1] = ci4[k];
    s->out[0] = sv;
    g->nodes[ci].dead = true;
    R->lay[v].sv = sv;
    return PP_OK;
}

/* Transpose node ci of a region value: its output in the model's order
 * from the stored tensor (nothing moved where that is the stored order). */
static pp_status take_transpose(rctx *R, int ci) {
    pp_graph *g = R->g;
    const pp_node *c = &g->nodes[ci];
    const rlay *l = &R->lay[c->in[0]];
    int64_t perm[PP_MAX_DIMS];
    PP_TRY(pp_transpose_perm(pp_node_attrs(g, c), l->nd, perm, R->err));
    rlay t = *l;
    for (int d = 0; d < l->nd; d++) {
        t.ng[d] = l->ng[perm[d]];
        memcpy(t.g[d], l->g[perm[d]], sizeof t.g[d]);
    }
    R->removed += (double)numel_of(&l->ss), R->n_removed++;
    if (R->seed[ci]) (void)uf_union(R, R->sid[c->in[0]], ci); /* (a seed read from another's region) */
    int ord[RA], y = c->out[0];
    (void)logical_order(&t, ord);
    const pp_shape to = logical_shape(&t);
    PP_TRY(emit_order(R, l, ord, &to, ci, ci, &y));
    if (R->apply) g->nodes[ci].dead = true;
    return PP_OK;
}

/* Node ci reads region values: take it into the region, or make them again. */
static pp_status visit(rctx *R, int ci) {
    pp_graph *g = R->g;
    const pp_node *c = &g->nodes[ci];
    const int x = c->in[0];
    if (c->op == PP_OP_RESHAPE && is_region(R, x) && c->n_out == 1 && (c->n_in < 2 || !is_region(R, c->in[1]))) {
        rlay out;
        const int v = c->out[0];
        if (lay_reshape(&R->lay[x], &g->values[v].shape, &out)) {
            join(R, v, ci, &out);
            if (R->apply) g->nodes[ci].dead = true;
            return PP_OK;
        }
    } else if (c->op == PP_OP_TRANSPOSE && is_region(R, x) && c->n_out == 1) {
        return take_transpose(R, ci);
    } else if (c->op == PP_OP_SLICE && is_region(R, x)) {
        bool took;
        PP_TRY(take_slice(R, ci, &took));
        if (took) return PP_OK;
    } else if (c->n_out == 1 && c->n_in >= 1) {
        const int slot = is_region(R, x) ? 0 : 1;
        const int kind = c->n_in > slot && is_region(R, c->in[slot]) ? row_kind(R, c, &R->lay[c->in[slot]]) : 0;
        const pp_shape ls = kind ? logical_shape(&R->lay[c->in[slot]]) : (pp_shape){0};
        if (kind && (c->op == PP_OP_MATMUL || c->op == PP_OP_GEMM || pp_shape_eq(&ls, &g->values[c->out[0]].shape)))
            return take_rowwise(R, ci, kind);
    }
    for (int k = 0; k < g->nodes[ci].n_in; k++) /* (make_again adds nodes: g->nodes moves) */
        if (is_region(R, g->nodes[ci].in[k])) PP_TRY(make_again(R, g->nodes[ci].in[k]));
    return PP_OK;
}

/* The seed's output as a region value: the Transpose's input as stored, its perm as the layout. */
static bool seed_layout(const rctx *R, int ti, rlay *l) {
    const pp_graph *g = R->g;
    const pp_node *t = &g->nodes[ti];
    const pp_value *x = &g->values[t->in[0]];
    int64_t perm[PP_MAX_DIMS];
    const int r = x->shape.rank;
    if (t->n_in != 1 || t->n_out != 1 || r < 2 || pp_transpose_perm(pp_node_attrs(g, t), r, perm, NULL) != PP_OK ||
        perm[r - 1] != r - 1 || numel_of(&x->shape) < 1)
        return false;
    *l = (rlay){.sv = t->in[0], .ss = x->shape, .nd = r};
    int atom[PP_MAX_DIMS];
    bool moves = false;
    for (int d = 0; d < r; d++) {
        atom[d] = -1;
        if (x->shape.dim[d] > 1) l->a[l->na] = x->shape.dim[d], atom[d] = l->na++;
    }
    for (int d = 0; d < r; d++) {
        if (atom[perm[d]] >= 0) l->g[d][l->ng[d]++] = (signed char)atom[perm[d]];
    }
    int ord[RA];
    const int n = logical_order(l, ord);
    for (int k = 0; k < n; k++) moves = moves || ord[k] != k;
    return moves;
}

/* The seeds marked in R->seed, walked together (a region may meet
 * another's at a node, which then reads both in one layout), counted
 * (apply false) or rewritten. */
static pp_status region(rctx *R) {
    pp_graph *g = R->g;
    memset(R->in, 0, (size_t)R->nv0 * sizeof *R->in);
    memset(R->made, 0, (size_t)R->nv0 * sizeof *R->made);
    R->removed = R->added = 0, R->n_removed = R->n_added = 0, R->bad = false, R->horizon = -1;
    int first = -1;
    for (int i = 0; i < R->n_orig; i++)
        if (R->seed[i]) R->horizon = i, first = first < 0 ? i : first;
    /* past the last seed and the last reader of every region value (R->horizon): nothing more to see */
    for (int i = first; first >= 0 && i < R->n_orig && i <= R->horizon; i++) {
        const pp_node *c = &g->nodes[i];
        if (c->dead) continue;
        rlay l;
        if (R->seed[i] && !is_region(R, c->in[0]) && seed_layout(R, i, &l)) {
            join(R, c->out[0], i, &l);
            R->removed += (double)numel_of(&l.ss), R->n_removed++;
            if (R->apply) g->nodes[i].dead = true;
            continue;
        }
        bool reads = false;
        for (int k = 0; k < c->n_in; k++) reads = reads || is_region(R, c->in[k]);
        if (reads) PP_TRY(visit(R, i));
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (is_region(R, g->outputs[k])) PP_TRY(make_again(R, g->outputs[k]));
    return PP_OK;
}

/* Whether the seeds marked pay (fewer elements through Transposes); if so, rewritten. */
static pp_status try_seeds(rctx *R, bool *changed) {
    R->apply = false;
    PP_TRY(region(R));
    /* fewer elements moved, and no more Transposes (several small ones for one larger cost launches on a GPU) */
    if (R->bad || !(R->added < R->removed) || R->n_added > R->n_removed) return PP_OK;
    R->apply = true, *changed = true;
    return region(R);
}

/* The new nodes into the order: each before the original node it names
 * (in the order they were made). */
static pp_status place_new(rctx *R) {
    pp_graph *g = R->g;
    const int n = g->n_nodes, m = R->n_orig + 1;
    pp_node *nodes = malloc(pp_count(n) * sizeof *nodes);
    int *first = calloc((size_t)m + 1, sizeof *first), *order = malloc(pp_count(R->n_new) * sizeof *order);
    if (!nodes || !first || !order) {
        free(nodes), free(first), free(order);
        return PP_FAIL(R->err, PP_ENOMEM, "out of memory");
    }
    for (int k = 0; k < R->n_new; k++) first[R->before[k] + 1]++;
    for (int i = 0; i < m; i++) first[i + 1] += first[i];
    for (int k = 0; k < R->n_new; k++) order[first[R->before[k]]++] = k; /* (first[i]: now the end of i's) */
    int o = 0, e = 0;
    for (int i = 0; i < m; i++) {
        for (; e < first[i]; e++) nodes[o++] = g->nodes[R->n_orig + order[e]];
        if (i < R->n_orig) nodes[o++] = g->nodes[i];
    }
    memcpy(g->nodes, nodes, (size_t)n * sizeof *nodes);
    free(nodes), free(first), free(order);
    return PP_OK;
}

pp_status pp_row_order(pp_graph *g, bool *changed, pp_err *err) {
    *changed = false;
    rctx R = {.g = g, .n_orig = g->n_nodes, .nv0 = g->n_values, .err = err};
    R.lay = malloc(pp_count(R.nv0) * sizeof *R.lay);
    R.in = calloc(pp_count(R.nv0), sizeof *R.in);
    R.made = calloc(pp_count(R.nv0), sizeof *R.made);
    R.prod = calloc(pp_count(R.nv0), sizeof *R.prod);
    R.last_use = calloc(pp_count(R.nv0), sizeof *R.last_use);
    R.seed = calloc(pp_count(R.n_orig), sizeof *R.seed);
    R.sid = calloc(pp_count(R.nv0), sizeof *R.sid);
    R.uf = calloc(pp_count(R.n_orig), sizeof *R.uf);
    R.fixed = calloc(pp_count(R.nv0), sizeof *R.fixed);
    int *cand = malloc(pp_count(R.n_orig) * sizeof *cand), nc = 0;
    pp_status s = R.lay && R.in && R.made && R.prod && R.last_use && R.seed && R.sid && R.uf && R.fixed && cand
                      ? PP_OK
                      : PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; s == PP_OK && i < R.n_orig; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) R.last_use[g->nodes[i].in[k]] = i;
    for (int k = 0; s == PP_OK && k < g->n_outputs; k++) R.last_use[g->outputs[k]] = R.n_orig;
    if (s == PP_OK) find_fixed(&R);
    /* every candidate walked at once, to find which regions meet (R.uf); then each set of seeds that meet
     * together, and where that does not pay, each of its seeds alone, in order */
    for (int i = 0; s == PP_OK && i < R.n_orig; i++) {
        rlay l;
        R.uf[i] = i;
        if (g->nodes[i].op == PP_OP_TRANSPOSE && !R.fixed[g->nodes[i].in[0]] && seed_layout(&R, i, &l))
            R.seed[i] = true, cand[nc++] = i; /* (a weight's Transpose is not data) */
    }
    R.apply = false;
    if (s == PP_OK && nc) s = region(&R);
    for (int k = 0; s == PP_OK && k < nc; k++) {
        const int root = uf_find(&R, cand[k]);
        if (root != cand[k]) continue; /* (taken with its set's first seed) */
        int members = 0;
        for (int j = 0; j < nc; j++) members += R.seed[cand[j]] = uf_find(&R, cand[j]) == root && !g->nodes[cand[j]].dead;
        bool did = false;
        s = members ? try_seeds(&R, &did) : PP_OK;
        *changed = *changed || did;
        for (int j = 0; s == PP_OK && !did && members > 1 && j < nc; j++) {
            if (uf_find(&R, cand[j]) != root || g->nodes[cand[j]].dead) continue;
            for (int q = 0; q < nc; q++) R.seed[cand[q]] = q == j;
            bool one = false;
            s = try_seeds(&R, &one);
            *changed = *changed || one;
        }
    }
    free(cand);
    if (s == PP_OK && *changed) {
        s = place_new(&R);
        if (s == PP_OK) pp_graph_compact(g);
    }
    free(R.lay), free(R.in), free(R.made), free(R.prod), free(R.last_use), free(R.before), free(R.seed), free(R.sid),
        free(R.uf), free(R.fixed);
    return s;
}
