/* batch.c: does the model compute each sample on its own? pprt cuts the
 * samples into micro-batches of the plan's batch size (dim 0 of every input)
 * and runs each micro-batch through the graph by itself, so an op that
 * combines values of different samples (a Softmax or a reduction over the
 * batch axis, a MatMul contracting over it, a Gather along it, ...) would be
 * computed within each micro-batch alone: a silent wrong answer. This pass
 * follows the batch axis from the inputs to the outputs and refuses such a
 * graph (unless --allow-batch-mixing), naming the first node that mixes.
 *
 * Each value is either free of sample data (constants and what is computed
 * from them alone) or carries the batch on one axis. That axis may hold the
 * batch merged with other axes, as a Reshape makes it: its index is then
 * (o, b, i) in row-major order, o < outer, b < B, i < inner, so the axis has
 * outer * B * inner elements; a later Reshape can split it out again. Every
 * op has a rule that moves the axis (Transpose, Reshape, Gather on another
 * axis, a MatMul's row axis, ...), keeps it, or finds it mixed (reduced,
 * normalized, contracted, sorted, sliced or gathered along it, broadcast
 * against itself on another axis). Where the rule cannot follow the axis (a
 * Reshape that spreads the batch over several axes, an op it does not know,
 * data-dependent parameters) the pass refuses too: it cannot show that the
 * samples stay apart. A value free of sample data that meets the batch along
 * an axis of the same length must be the same at every position of the batch
 * (a constant [B, ...] of identical rows is fine; one that gives each sample
 * its own row is not, as micro-batches would all take the first rows).
 *
 * What a model computes from the batch size alone is followed like the
 * samples are, so that it can meet them after other ops: copies (rep), a
 * value free of sample data that holds B equal slices along a batch digit,
 * made by a Tile whose count is a multiple of B (DeBERTa's relative-position
 * table repeated for every sample against queries [B * heads, ...]: the
 * digit (1, B, heads)), an Expand of an axis of size 1 to B, or a constant
 * whose slices are equal (XLNet's position table expanded over the batch,
 * [2S, B, d], read by an Einsum left to run time). Every rule then holds for
 * copies as for samples: a micro-batch of b computes b of the same slices.
 * A node that reads copies and no samples and whose rule fails outputs a
 * value free of sample data; one that pairs copies with samples and fails
 * is judged as if the copies were free of sample data (shared_ok).
 *
 * And an arange over the batch (step): an integer constant whose slice b
 * is slice 0 + b x step, added to sample data, is a value that a micro-batch
 * computes other than the whole batch (its arange counts from 0), so only
 * views, integer casts, Adds and one Gather may read it: the Gather along a
 * batch axis that holds the samples one after the other, step rows each,
 * at u + b x step with u in [0, step) (its range known: ArgMax, ArgMin and
 * constants added), picks a row of sample b's own in the whole batch and
 * in every micro-batch alike (CLIP's pooler, last_hidden_state[arange(B),
 * input_ids.argmax(-1)], which torch exports as such a Gather).
 *
 * Only nodes that reach a graph output count. The pass works on copies of
 * the graph with the inputs' batch set to 2 or more and constants folded
 * (pp_batch_check says which): at 1 the batch axis could not be told from
 * other axes of size 1 where a Reshape places it. A model exported with a
 * fixed batch is not checked: its outputs are defined for that many samples
 * only. Not seen: a model that uses its batch size as a number (x /
 * x.shape[0]), as Shape is folded into a constant. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/op_fns.h"
#include "../ir/shape_nn.h"
#include "passes.h"

typedef struct bax {
    bool on;        /* carries the batch: sample data, or (rep) copies */
    /* on, but no sample data: B copies of one slice along the batch digit,
     * made from constants (a Tile or Expand to the batch's size, and what
     * is computed from such copies) */
    bool rep;
    int axis;
    int64_t outer, inner;
    /* integers: every element is u + step x the place of its sample in the
     * batch (its b), u in [lo, hi] when ranged. step != 0: an arange over the
     * batch was added to sample data (torch's x[arange(B), idx]) */
    bool ranged;
    int64_t lo, hi, step;
} bax;

typedef struct bctx {
    pp_graph *g;
    int64_t B;
    bax *st;            /* per value */
    bool *live;         /* per value: read by a node that counts, or a graph output */
    pp_tinfo *in, *out; /* the current node's tensors */
    bax *saved;         /* per input of the current node (rule) */
    bool lost;          /* the failure: lost track (else: mixes samples) */
    char why[512];
    /* the arange over the batch that the current Add adds (bcast), v -1: none */
    struct {
        int v;
        int64_t step, lo, hi;
    } iota;
} bctx;

/* The verdict on the current node, -1 to return: it mixes samples, or
 * (lost) the analysis cannot follow the batch through it. */
static int verdict(bctx *c, bool lost, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int verdict(bctx *c, bool lost, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->lost = lost;
    return -1;
}
#define mixes(c, ...) verdict((c), false, __VA_ARGS__)
#define lost(c, ...) verdict((c), true, __VA_ARGS__)

/* A parser of the op's attributes and constant inputs (shape_nn.h) failed:
 * its axes or bounds are unknown, so the batch is lost. */
static int unread(bctx *c, pp_status s, const pp_err *e) {
    return s == PP_OK ? 0 : lost(c, "its parameters cannot be read (%s)", e->msg);
}

static bool carries(const bctx *c, int v) { return v >= 0 && c->st[v].on; }
static const pp_shape *shp(const bctx *c, int v) { return &c->g->values[v].shape; }
static const char *vname(const bctx *c, int v) { return c->g->values[v].name; }
static bool same_split(bax a, bax b) { return a.outer == b.outer && a.inner == b.inner; }
static bax moved(bax s, int axis) {
    s.axis = axis;
    return s;
}

static int64_t prod(const pp_shape *s, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= s->dim[d];
    return p;
}

/* ---- values free of sample data: the same at every position of the batch? ---------- */

static bool elementwise(pp_op op);

/* Value v (no sample data) has the same slices at every b of the digit
 * (outer, B, inner) of its axis `axis`: copies the analysis followed (rep),
 * its constant bytes, or what made it (ConstantOfShape, an Expand or an
 * elementwise op of such values). */
static bool uniform(const bctx *c, int v, int axis, int64_t outer, int64_t inner, int depth) {
    const pp_value *x = &c->g->values[v];
    const int64_t dim = x->shape.dim[axis];
    const bax r = c->st[v];
    if (c->B == 1 || dim == 1 || prod(&x->shape, 0, x->shape.rank) == 0) return true;
    if (dim != outer * c->B * inner || depth > 32) return false;
    if (r.on && r.rep && r.axis == axis && r.outer == outer && r.inner == inner) return true;
    if (x->is_const) {
        unsigned bits = pp_dtype_bits(x->dtype);
        if (!x->data || bits % 8) return false;
        const size_t row = (size_t)(prod(&x->shape, axis + 1, x->shape.rank) * inner) * (bits / 8);
        const int64_t blocks = prod(&x->shape, 0, axis) * outer;
        const unsigned char *p = x->data;
        for (int64_t k = 0; k < blocks; k++, p += row * (size_t)c->B)
            for (int64_t b = 1; b < c->B; b++)
                if (memcmp(p, p + row * (size_t)b, row)) return false;
        return true;
    }
    if (x->producer < 0) return false;
    const pp_node *n = &c->g->nodes[x->producer];
    if (n->op == PP_OP_CONSTANTOFSHAPE) return true;
    if (n->op != PP_OP_EXPAND && !elementwise(n->op)) return false;
    const int last = n->op == PP_OP_EXPAND || n->op == PP_OP_CASTLIKE ? 1 : n->n_in;
    for (int k = 0; k < last; k++) {
        if (n->in[k] < 0) continue;
        const pp_shape *s = shp(c, n->in[k]);
        const int j = axis - (x->shape.rank - s->rank);
        if (j >= 0 && s->dim[j] != 1 && !uniform(c, n->in[k], j, outer, inner, depth + 1))
            return false;
    }
    return true;
}

/* Value v (no sample data) meets the batch `b` of another operand at its
 * axis j (its dims aligned to the output's): fine when j does not exist, has
 * size 1 (broadcast) or is uniform. */
static int shared_ok(bctx *c, int v, int j, bax b) {
    if (v < 0 || j < 0 || shp(c, v)->dim[j] == 1 || uniform(c, v, j, b.outer, b.inner, 0)) return 0;
    return lost(c, "'%s' holds no sample data but is not the same at every position of the batch "
                "axis (its axis %d): each micro-batch would take its first slices, not those of "
                "its samples' places in the whole batch", vname(c, v), j);
}

/* Element i of integer constant x (its bytes may be unaligned). */
static int64_t int_at(const pp_value *x, int64_t i) {
    if (x->dtype == PP_I32) {
        int32_t v;
        memcpy(&v, (const char *)x->data + i * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, (const char *)x->data + i * 8, 8);
    return v;
}

/* The smallest and largest element of integer constant v. */
static bool int_range(const bctx *c, int v, int64_t *lo, int64_t *hi) {
    const pp_value *x = &c->g->values[v];
    const int64_t n = prod(&x->shape, 0, x->shape.rank);
    if (!x->is_const || !x->data || (x->dtype != PP_I64 && x->dtype != PP_I32) || n < 1) return false;
    *lo = INT64_MAX, *hi = INT64_MIN;
    for (int64_t i = 0; i < n; i++) {
        const int64_t e = int_at(x, i);
        *lo = e < *lo ? e : *lo, *hi = e > *hi ? e : *hi;
    }
    return true;
}

/* Integer constant v (no sample data) along its axis j, read as the batch
 * digit (b.outer, B, b.inner): is each slice b the slice 0 plus b x step,
 * step != 0 (an arange over the batch, scaled: torch exports x[arange(B),
 * idx] as a Gather from x flattened, at idx + arange(B) x rows)? *lo, *hi:
 * the range of slice 0. At a micro-batch the same graph makes the arange
 * over the micro-batch: the place of each sample in it. */
static bool iota_of(const bctx *c, int v, int j, bax b, int64_t *step, int64_t *lo, int64_t *hi) {
    const pp_value *x = &c->g->values[v];
    if (j < 0 || !x->is_const || !x->data || (x->dtype != PP_I64 && x->dtype != PP_I32) || c->B < 2 ||
        x->shape.dim[j] != b.outer * c->B * b.inner)
        return false;
    const int64_t row = prod(&x->shape, j + 1, x->shape.rank) * b.inner;
    const int64_t blocks = prod(&x->shape, 0, j) * b.outer;
    if (row < 1) return false;
    *lo = INT64_MAX, *hi = INT64_MIN;
    if (__builtin_sub_overflow(int_at(x, row), int_at(x, 0), step) || *step == 0) return false;
    for (int64_t k = 0; k < blocks; k++) {
        const int64_t base = k * c->B * row;
        for (int64_t e = 0; e < row; e++) {
            const int64_t v0 = int_at(x, base + e);
            *lo = v0 < *lo ? v0 : *lo, *hi = v0 > *hi ? v0 : *hi;
            for (int64_t bb = 1; bb < c->B; bb++) {
                int64_t d, want;
                if (__builtin_mul_overflow(bb, *step, &d) || __builtin_add_overflow(v0, d, &want) ||
                    int_at(x, base + bb * row + e) != want)
                    return false;
            }
        }
    }
    return true;
}

/* ---- the rules ------------------------------------------------------------------------ */

/* NumPy broadcasting of inputs [first, last) into the output shape `o`. An
 * Add may add one arange over the batch (iota_of) to sample data: c->iota. */
static int bcast(bctx *c, const pp_node *n, int first, int last, const pp_shape *o, bax *res) {
    res->on = false;
    int who = -1;
    for (int k = first; k < last; k++) {
        int v = n->in[k];
        if (!carries(c, v)) continue;
        bax s = c->st[v];
        const int a = s.axis + (o->rank - shp(c, v)->rank);
        if (shp(c, v)->dim[s.axis] != o->dim[a])
            return lost(c, "it broadcasts the batch axis of '%s' (size %lld) to %lld", vname(c, v),
                        (long long)shp(c, v)->dim[s.axis], (long long)o->dim[a]);
        if (res->on && (res->axis != a || !same_split(*res, s)))
            return mixes(c, "it combines '%s' and '%s', whose samples lie along different axes "
                         "(%d and %d of the output), so every sample meets every other",
                         vname(c, who), vname(c, v), res->axis, a);
        *res = moved(s, a);
        who = v;
    }
    if (!res->on) return 0;
    for (int k = first; k < last; k++) {
        int v = n->in[k];
        if (v < 0 || carries(c, v)) continue;
        const int j = res->axis - (o->rank - shp(c, v)->rank);
        if (n->op == PP_OP_ADD && c->iota.v < 0 && !res->rep && j >= 0 && shp(c, v)->dim[j] != 1 &&
            iota_of(c, v, j, *res, &c->iota.step, &c->iota.lo, &c->iota.hi)) {
            c->iota.v = v;
            continue;
        }
        if (shared_ok(c, v, j, *res)) return -1;
    }
    return 0;
}

/* The batch digit (stride, size B) of a row-major tensor of shape `in`,
 * re-read as `out` (Reshape, Flatten): the axis that holds it whole (at
 * most one does, as B > 1). */
static int reshape_rule(bctx *c, bax s, const pp_shape *in, const pp_shape *out, bax *res) {
    const int64_t stride = s.inner * prod(in, s.axis + 1, in->rank), span = stride * c->B;
    char a[128], b[128];
    if (span <= 0) { /* an empty tensor: no values to mix */
        *res = (bax){0};
        return 0;
    }
    for (int k = 0; k < out->rank; k++) {
        const int64_t p = prod(out, k + 1, out->rank), d = out->dim[k];
        if (p <= 0 || d <= 0 || stride % p || (p * d) % span) continue;
        *res = (bax){.on = true, .axis = k, .outer = p * d / span, .inner = stride / p};
        return 0;
    }
    return lost(c, "it reshapes %s to %s, which spreads the batch (axis %d, %lld samples) over "
                "several axes", pp_shape_str(in, a, sizeof a), pp_shape_str(out, b, sizeof b),
                s.axis, (long long)c->B);
}

/* MatMul: [..., M, K] x [..., K, N] -> [..., M, N] (1-D operands promoted). */
static int matmul_rule(bctx *c, const pp_node *n, bax *res) {
    const pp_shape *o = &c->out[0].shape;
    const int R = o->rank;
    res->on = false;
    int who = -1;
    for (int k = 0; k < 2; k++) {
        const int v = n->in[k];
        if (!carries(c, v)) continue;
        const bax s = c->st[v];
        const int r = shp(c, v)->rank;
        int a;
        if (r == 1 || (k == 0 && s.axis == r - 1) || (k == 1 && s.axis == r - 2))
            return mixes(c, "it sums products over the batch axis of '%s' (its axis %d, the one "
                         "the product contracts)", vname(c, v), s.axis);
        const bool other_1d = shp(c, n->in[1 - k])->rank == 1;
        if (s.axis >= r - 2) { /* A's rows or B's columns */
            a = k == 0 && !other_1d ? R - 2 : R - 1;
        } else { /* a batch dim: the output's batch dims are aligned right before [M, N] */
            a = other_1d ? s.axis : s.axis + (R - r);
            if (shp(c, v)->dim[s.axis] != o->dim[a])
                return lost(c, "it broadcasts the batch axis of '%s' (size %lld) to %lld",
                            vname(c, v), (long long)shp(c, v)->dim[s.axis], (long long)o->dim[a]);
        }
        if (res->on && (res->axis != a || !same_split(*res, s)))
            return mixes(c, "it multiplies '%s' by '%s' with their samples on different axes (%d "
                         "and %d of the output): every sample meets every other", vname(c, who),
                         vname(c, v), res->axis, a);
        *res = moved(s, a);
        who = v;
    }
    if (!res->on || res->axis >= R - 2) return 0;
    for (int k = 0; k < 2; k++) { /* a shared operand along a broadcast batch dim */
        const int v = n->in[k];
        if (carries(c, v) || shp(c, v)->rank < 3) continue;
        if (shared_ok(c, v, res->axis - (R - shp(c, v)->rank), *res)) return -1;
    }
    return 0;
}

static int gemm_rule(bctx *c, const pp_node *n, bax *res) {
    pp_attrs a = pp_node_attrs(c->g, n);
    int64_t ta = 0, tb = 0;
    pp_err e = {0};
    (void)pp_attr_int(a, "transA", 0, &ta, &e);
    (void)pp_attr_int(a, "transB", 0, &tb, &e);
    res->on = false;
    if (carries(c, n->in[0])) {
        bax s = c->st[n->in[0]];
        if (s.axis != (ta ? 1 : 0))
            return mixes(c, "it sums products over the batch axis of '%s' (the one it contracts)",
                         vname(c, n->in[0]));
        *res = moved(s, 0);
    }
    if (carries(c, n->in[1])) {
        bax s = c->st[n->in[1]];
        if (s.axis != (tb ? 0 : 1))
            return mixes(c, "it sums products over the batch axis of '%s' (the one it contracts)",
                         vname(c, n->in[1]));
        if (res->on)
            return mixes(c, "it multiplies two operands that both carry samples, the rows of one "
                         "by the columns of the other: every sample meets every other");
        *res = moved(s, 1);
    }
    if (n->n_in > 2 && n->in[2] >= 0) {
        bax cs;
        if (bcast(c, n, 2, 3, &c->out[0].shape, &cs)) return -1;
        if (cs.on && res->on && (cs.axis != res->axis || !same_split(cs, *res)))
            return mixes(c, "it adds C, whose samples lie along output axis %d, to a product "
                         "whose samples lie along axis %d", cs.axis, res->axis);
        if (cs.on) *res = cs;
        else if (res->on && shared_ok(c, n->in[2], res->axis - (2 - shp(c, n->in[2])->rank), *res))
            return -1;
    }
    return 0;
}

static int einsum_rule(bctx *c, const pp_node *n, bax *res) {
    pp_einsum e;
    pp_err err = {0};
    if (unread(c, pp_einsum_parse(pp_node_attrs(c->g, n), c->in, n->n_in, &e, &err), &err)) return -1;
    int lab = -1, who = -1;
    res->on = false;
    for (int k = 0; k < e.n_ops; k++) {
        if (!carries(c, n->in[k])) continue;
        bax s = c->st[n->in[k]];
        int l = e.lab[k][s.axis];
        int times = 0;
        for (int d = 0; d < e.rank[k]; d++) times += e.lab[k][d] == l;
        if (times > 1)
            return lost(c, "'%s' repeats the label of its batch axis (a diagonal)", vname(c, n->in[k]));
        if (shp(c, n->in[k])->dim[s.axis] != e.size[l])
            return lost(c, "it broadcasts the batch axis of '%s'", vname(c, n->in[k]));
        if (lab >= 0 && (l != lab || !same_split(*res, s)))
            return mixes(c, "it multiplies '%s' and '%s', whose samples lie along different "
                         "labels: every sample meets every other", vname(c, who), vname(c, n->in[k]));
        lab = l, who = n->in[k];
        *res = s;
    }
    if (lab < 0) return 0;
    res->axis = -1;
    for (int d = 0; d < e.out_rank; d++)
        if (e.out_lab[d] == lab) res->axis = d;
    if (res->axis < 0)
        return mixes(c, "it sums over the batch axis of '%s' (its label is not in the output)",
                     vname(c, who));
    for (int k = 0; k < e.n_ops; k++) {
        if (carries(c, n->in[k])) continue;
        for (int d = 0; d < e.rank[k]; d++)
            if (e.lab[k][d] == lab && shared_ok(c, n->in[k], d, *res)) return -1;
    }
    return 0;
}

/* ONNX Pad's pads at axis `axis`: both zero? */
static int pad_rule(bctx *c, const pp_node *n, bax s) {
    pp_attrs a = pp_node_attrs(c->g, n);
    int64_t pads[2 * PP_MAX_DIMS], axes[PP_MAX_DIMS];
    int np = 0, na = -1;
    pp_err e = {0};
    pp_status st = a.opset < 11 ? pp_attr_ints(a, "pads", pads, 2 * PP_MAX_DIMS, &np, &e)
                                : pp_const_ints(&c->in[1], "pads", pads, 2 * PP_MAX_DIMS, &np, &e);
    if (st == PP_OK && a.opset >= 11 && n->n_in > 3 && n->in[3] >= 0)
        st = pp_const_ints(&c->in[3], "axes", axes, PP_MAX_DIMS, &na, &e);
    if (st != PP_OK) return lost(c, "its pads are not known at compile time (%s)", e.msg);
    const int r = c->in[0].shape.rank;
    if (na < 0) {
        na = np / 2;
        for (int k = 0; k < na; k++) axes[k] = k;
    }
    for (int k = 0; k < na && 2 * na == np; k++)
        if ((axes[k] < 0 ? axes[k] + r : axes[k]) == s.axis && (pads[k] || pads[na + k]))
            return mixes(c, "it pads the batch axis (%lld before, %lld after): samples that do "
                         "not exist, placed within each micro-batch", (long long)pads[k],
                         (long long)pads[na + k]);
    return 0;
}

static int int_axis(bctx *c, const pp_node *n, const char *name, int64_t def, int rank, int *axis) {
    int64_t v;
    pp_err e = {0};
    if (pp_attr_int(pp_node_attrs(c->g, n), name, def, &v, &e) != PP_OK ||
        pp_norm_axis(v, rank, name, axis, &e) != PP_OK)
        return lost(c, "its attribute '%s' cannot be read (%s)", name, e.msg);
    return 0;
}

/* Is constant index tensor t 0, 1, ..., len-1 (a Gather that keeps every sample in place)? */
static bool is_iota(const pp_tinfo *t, int64_t len) {
    int64_t v[64];
    int n;
    if (t->shape.rank != 1 || t->shape.dim[0] != len || len > 64 ||
        pp_const_ints(t, "indices", v, 64, &n, NULL) != PP_OK)
        return false;
    for (int i = 0; i < n; i++)
        if (v[i] != i) return false;
    return true;
}

/* Gather along the data's batch axis at indices b x step + u, b the place
 * of the index's sample in the batch (an arange over it added) and u its
 * own data: each sample picks a row u of its own when the batch axis holds
 * the samples one after the other, step rows each (outer 1, inner step),
 * and u lies in [0, step). Then a micro-batch, whose arange counts its own
 * samples, picks the same rows from its own part of the data. */
static int own_rows_rule(bctx *c, int axis, bax d, bax x, bax *res) {
    if (d.axis != axis || d.outer != 1 || d.inner != x.step || !x.ranged || x.lo < 0 || x.hi >= x.step)
        return lost(c, "its indices are each sample's place in the batch times %lld plus sample "
                    "data%s, which does not pick rows of the sample's own: the data holds the "
                    "batch on axis %d (%lld rows a sample, %lld groups of samples), the gather "
                    "runs along axis %d", (long long)x.step,
                    x.ranged ? "" : " of unknown range", d.axis, (long long)d.inner,
                    (long long)d.outer, axis);
    *res = moved(x, axis + x.axis);
    return 0;
}

static int gather_rule(bctx *c, const pp_node *n, bax *res) {
    int axis;
    if (int_axis(c, n, "axis", 0, c->in[0].shape.rank, &axis)) return -1;
    const int qi = c->in[1].shape.rank;
    const bool cd = carries(c, n->in[0]), ci = carries(c, n->in[1]);
    if (ci && c->st[n->in[1]].step) {
        if (!cd)
            return lost(c, "its indices are each sample's place in the batch plus sample data, "
                        "into data that holds no samples");
        return own_rows_rule(c, axis, c->st[n->in[0]], c->st[n->in[1]], res);
    }
    if (cd && ci)
        return mixes(c, "both its data and its indices carry samples: each sample's indices pick "
                     "from every sample's data");
    if (ci) {
        *res = moved(c->st[n->in[1]], axis + c->st[n->in[1]].axis);
        return 0;
    }
    bax s = c->st[n->in[0]];
    if (s.axis == axis) {
        if (s.outer == 1 && s.inner == 1 && is_iota(&c->in[1], c->B)) {
            *res = s;
            return 0;
        }
        return mixes(c, "it gathers along the batch axis (axis %d): it picks samples by their "
                     "place in the micro-batch", axis);
    }
    *res = moved(s, s.axis < axis ? s.axis : s.axis + qi - 1);
    return 0;
}

static int gather_elements_rule(bctx *c, const pp_node *n, bax *res) {
    int axis;
    if (int_axis(c, n, "axis", 0, c->in[0].shape.rank, &axis)) return -1;
    const bool cd = carries(c, n->in[0]), ci = carries(c, n->in[1]);
    if (cd && c->st[n->in[0]].axis == axis)
        return mixes(c, "it gathers along the batch axis (axis %d)", axis);
    if (cd && ci) {
        bax a = c->st[n->in[0]], b = c->st[n->in[1]];
        if (a.axis != b.axis || !same_split(a, b))
            return mixes(c, "its data and indices carry samples on different axes");
        *res = a;
        return 0;
    }
    *res = c->st[n->in[cd ? 0 : 1]];
    if (res->axis == axis) return 0; /* per-sample indices into shared data */
    if (c->in[0].shape.dim[res->axis] != c->in[1].shape.dim[res->axis])
        return mixes(c, "its indices cover %lld of the batch axis' %lld positions",
                     (long long)c->in[1].shape.dim[res->axis], (long long)c->in[0].shape.dim[res->axis]);
    return shared_ok(c, n->in[cd ? 1 : 0], res->axis, *res);
}

/* GridSample: sample n of X read at sample n's grid points, so both carry
 * the samples on axis 0 (as the output does); one of them alone may, where
 * the other is the same at every position of axis 0. Samples on any other
 * axis (a spatial one is interpolated over) mix. */
static int gridsample_rule(bctx *c, const pp_node *n, bax *res) {
    const bool cx = carries(c, n->in[0]), cg = carries(c, n->in[1]);
    for (int k = 0; k < 2; k++)
        if ((k ? cg : cx) && c->st[n->in[k]].axis != 0)
            return mixes(c, "its input %s carries samples on axis %d, not on axis 0 (where X and grid pair them)",
                         k ? "grid" : "X", c->st[n->in[k]].axis);
    *res = c->st[n->in[cx ? 0 : 1]];
    if (cx && cg)
        return same_split(c->st[n->in[0]], c->st[n->in[1]]) ? 0
                                                              : mixes(c, "X and grid split their samples differently");
    return shared_ok(c, n->in[cx ? 1 : 0], 0, *res);
}

/* Component `comp` of ScatterND's index tuples (indices ix, of rank q) as
 * a constant broadcast over the tuples' q-1 leading dims: *src, its dims
 * right-aligned with them. From the folded indices themselves (a view of
 * every comp-th element), or, when they were too large to fold, from the
 * graph that builds them as torch exports an assignment to slices
 * (x[:, :, a:, b:] = u, index_put): a Concat along the last axis of one
 * component each, a folded constant [..., 1] or an Unsqueeze (or Reshape)
 * to [..., 1] of an Expand of a small constant, a Range reshaped to lie
 * along one axis (mvitv2_tiny's relative-position update: its tuples take
 * 137 MB at the analysis' batch of 7, over the folding's 64 MB). False where
 * it is neither. */
typedef struct comp_view {
    const void *data;
    pp_dtype dtype;
    int64_t dim[PP_MAX_DIMS], stride[PP_MAX_DIMS]; /* in elements; over the q-1 leading dims */
} comp_view;

static bool index_component(const bctx *c, int ix_v, const pp_tinfo *ix, int comp, comp_view *cv) {
    const int q = ix->shape.rank, k = (int)ix->shape.dim[q - 1];
    if (ix->data) {
        cv->data = (const char *)ix->data + (size_t)comp * pp_dtype_size(ix->dtype);
        cv->dtype = ix->dtype;
        int64_t st = k;
        for (int d = q - 2; d >= 0; d--) cv->dim[d] = ix->shape.dim[d], cv->stride[d] = st, st *= ix->shape.dim[d];
        return true;
    }
    const pp_graph *g = c->g;
    const int cat = g->values[ix_v].producer;
    if (cat < 0 || g->nodes[cat].op != PP_OP_CONCAT || g->nodes[cat].n_in != k) return false;
    int v = g->nodes[cat].in[comp];
    if (v < 0) return false;
    const pp_value *cvv = &g->values[v];
    if (cvv->is_const && cvv->data && cvv->dtype == ix->dtype && cvv->shape.rank == q &&
        cvv->shape.dim[q - 1] == 1) { /* folded: a constant of the tuples' dims */
        int64_t st = 1;
        for (int d = q - 2; d >= 0; d--) {
            if (cvv->shape.dim[d] != ix->shape.dim[d]) return false;
            cv->dim[d] = cvv->shape.dim[d], cv->stride[d] = st, st *= cvv->shape.dim[d];
        }
        cv->data = cvv->data;
        cv->dtype = cvv->dtype;
        return true;
    }
    const int un = g->values[v].producer;
    if (un < 0 || (g->nodes[un].op != PP_OP_UNSQUEEZE && g->nodes[un].op != PP_OP_RESHAPE)) return false;
    const int u = g->nodes[un].in[0];
    const pp_shape *us = &g->values[u].shape, *vs = &g->values[v].shape;
    if (vs->rank != q || us->rank != q - 1 || vs->dim[q - 1] != 1) return false;
    for (int d = 0; d < q - 1; d++)
        if (us->dim[d] != vs->dim[d] || us->dim[d] != ix->shape.dim[d]) return false;
    const int ex = g->values[u].producer;
    if (ex < 0 || g->nodes[ex].op != PP_OP_EXPAND) return false;
    const pp_value *src = &g->values[g->nodes[ex].in[0]];
    if (!src->is_const || !src->data || src->dtype != ix->dtype || src->shape.rank > q - 1) return false;
    const int lead = q - 1 - src->shape.rank;
    int64_t st = 1;
    for (int d = q - 2; d >= 0; d--) {
        const int64_t sd = d < lead ? 1 : src->shape.dim[d - lead];
        if (sd != 1 && sd != us->dim[d]) return false;
        cv->dim[d] = us->dim[d];
        cv->stride[d] = sd == 1 ? 0 : st;
        st *= sd;
    }
    cv->data = src->data;
    cv->dtype = src->dtype;
    return true;
}

/* Does component `comp` of every index tuple (cv) equal the tuple's own
 * position along axis u of the indices' leading dims (each sample written
 * from its own place: shifted[:, 1:] = ids[:, :-1])? Only the positions
 * along u are read where the component does not vary along the other axes. */
static bool tuples_follow(const comp_view *cv, int q, int u, int64_t dim) {
    if (cv->dim[u] != dim) return false;
    bool flat = true;
    for (int d = 0; d < q - 1; d++) flat = flat && (d == u || cv->dim[d] == 1 || cv->stride[d] == 0);
    int64_t idx[PP_MAX_DIMS] = {0}, total = 1;
    for (int d = 0; d < q - 1; d++) total *= flat && d != u ? 1 : cv->dim[d];
    for (int64_t t = 0; t < total; t++) {
        int64_t off = 0, rest = t;
        for (int d = q - 2; d >= 0; d--) {
            const int64_t n = flat && d != u ? 1 : cv->dim[d];
            idx[d] = rest % n;
            rest /= n;
            off += idx[d] * cv->stride[d];
        }
        int64_t v = cv->dtype == PP_I64 ? ((const int64_t *)cv->data)[off] : ((const int32_t *)cv->data)[off];
        if (v < 0) v += dim;
        if (v != idx[u]) return false;
    }
    return true;
}

/* ScatterND(data, indices, updates): updates has shape indices.shape[:-1] +
 * data.shape[k:], k the tuples' length. The batch may lie along data's
 * slice axes (>= k: the tuples address other axes) or along an addressed one
 * when every tuple's component there is the tuple's own position along a
 * leading axis of the indices (index_component: their values folded, or
 * built as torch builds them for an assignment to slices). */
static int scatternd_rule(bctx *c, const pp_node *n, bax *res) {
    const pp_tinfo *ix = &c->in[1];
    const int q = ix->shape.rank;
    const int k = (int)ix->shape.dim[q - 1];
    if (carries(c, n->in[1]))
        return lost(c, "its index tuples carry sample data: where a sample's values go depends "
                    "on data");
    if (ix->dtype != PP_I64 && ix->dtype != PP_I32)
        return lost(c, "its index tuples are not int64 or int32");
    const bool cd = carries(c, n->in[0]), cu = carries(c, n->in[2]);
    bax d = cd ? c->st[n->in[0]] : (bax){0}, u = cu ? c->st[n->in[2]] : (bax){0};
    int ua = -1; /* the updates' axis that matches the data's batch axis */
    if (cd && d.axis >= k) {
        ua = q - 1 + (d.axis - k);
    } else if (!cd && u.axis >= q - 1) {
        d = moved(u, k + (u.axis - (q - 1)));
        ua = u.axis;
    } else { /* the tuples address the batch axis */
        const int64_t dim = c->in[0].shape.dim[cd ? d.axis : 0];
        bool known = true;
        for (int a = 0; a < q - 1 && ua < 0; a++) {
            if (cu && a != u.axis) continue;
            for (int comp = 0; comp < k && ua < 0; comp++) {
                if (cd && comp != d.axis) continue;
                comp_view cv;
                if (!index_component(c, n->in[1], ix, comp, &cv)) {
                    known = false;
                    continue;
                }
                if (tuples_follow(&cv, q, a, cd ? dim : c->in[0].shape.dim[comp])) {
                    ua = a;
                    if (!cd) d = (bax){.on = true, .axis = comp, .outer = 1, .inner = 1};
                }
            }
        }
        if (ua < 0 && !known)
            return lost(c, "its index tuples are not known at compile time");
        if (ua < 0 || d.outer != 1 || d.inner != 1)
            return mixes(c, "its index tuples address the batch axis other than each at its own "
                         "place: it writes to samples by their place in the micro-batch");
    }
    if (cu && (u.axis != ua || !same_split(u, d)))
        return mixes(c, "its updates carry samples on another axis than the data");
    if (!cu && shared_ok(c, n->in[2], ua, d)) return -1;
    if (!cd && shared_ok(c, n->in[0], d.axis, d)) return -1;
    *res = d;
    return 0;
}

/* Concat: the inputs share every axis but the one joined. */
static int concat_rule(bctx *c, const pp_node *n, bax *res) {
    int ax, who = -1;
    if (int_axis(c, n, "axis", 0, c->out[0].shape.rank, &ax)) return -1;
    res->on = false;
    for (int k = 0; k < n->n_in; k++) {
        const int v = n->in[k];
        if (!carries(c, v)) continue;
        const bax s = c->st[v];
        if (s.axis == ax)
            return mixes(c, "it concatenates along the batch axis (%d): each micro-batch's samples "
                         "would sit between other inputs' rows in another order than the whole "
                         "batch's", ax);
        if (res->on && (s.axis != res->axis || !same_split(s, *res)))
            return mixes(c, "it joins '%s' and '%s', whose samples lie along different axes",
                         vname(c, who), vname(c, v));
        *res = s, who = v;
    }
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !carries(c, n->in[k]) && shared_ok(c, n->in[k], res->axis, *res))
            return -1;
    return 0;
}

/* LSTM, GRU, RNN: each sample's sequence runs by itself. The batch lies on
 * X's axis 1 (layout 1: 0), sequence_lens' axis 0, initial_h's and
 * initial_c's axis 1 (layout 1: 0); W, R, B and P hold no sample data. *res:
 * Y's state (axis 2, layout 1: 0); out_state moves it for Y_h and Y_c. */
static int rnn_rule(bctx *c, const pp_node *n, bax *res) {
    static const char *const names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h",
                                        "initial_c", "P"};
    int64_t layout = 0;
    pp_err e = {0};
    if (pp_attr_int(pp_node_attrs(c->g, n), "layout", 0, &layout, &e) != PP_OK)
        return lost(c, "its attribute 'layout' cannot be read (%s)", e.msg);
    const int nb = layout ? 0 : 1; /* the batch axis of X, initial_h, initial_c */
    const int want[8] = {nb, -1, -1, -1, 0, nb, nb, -1};
    int who = -1;
    res->on = false;
    for (int k = 0; k < n->n_in && k < 8; k++) {
        const int v = n->in[k];
        if (!carries(c, v)) continue;
        const bax s = c->st[v];
        if (want[k] < 0)
            return lost(c, "its input %s ('%s') carries sample data", names[k], vname(c, v));
        if (k == 0 && s.axis != nb)
            return mixes(c, "its input X carries the batch on axis %d, the %s axis: %s", s.axis,
                         s.axis == 2 ? "input features'" : "sequence's",
                         s.axis == 2 ? "every sample meets every other in the products with W"
                                     : "the state flows from sample to sample");
        if (s.axis != want[k])
            return mixes(c, "its input %s carries the batch on axis %d, not on axis %d with the "
                         "sequences", names[k], s.axis, want[k]);
        if (res->on && !same_split(*res, s))
            return mixes(c, "'%s' and '%s' hold their samples in different orders", vname(c, who),
                         vname(c, v));
        *res = s, who = v;
    }
    for (int k = 0; k < n->n_in && k < 8; k++)
        if (want[k] >= 0 && n->in[k] >= 0 && !carries(c, n->in[k]) &&
            shared_ok(c, n->in[k], want[k], *res))
            return -1;
    res->axis = layout ? 0 : 2;
    return 0;
}

/* Output k's state, where an op's outputs hold the batch on different axes:
 * the recurrent ops' Y_h and Y_c ([D, N, H]) have no sequence axis before Y's
 * ([S, D, N, H]; layout 1: the batch first in all). */
static bax out_state(const pp_node *n, int k, bax res) {
    const bool rnn = n->op == PP_OP_LSTM || n->op == PP_OP_GRU || n->op == PP_OP_RNN;
    return rnn && k > 0 && res.on && res.axis == 2 ? moved(res, 1) : res;
}

/* The ops whose every input may carry samples, and their rules. */
typedef int multi_fn(bctx *c, const pp_node *n, bax *res);
static multi_fn *multi_rule(pp_op op) {
    switch (op) {
    case PP_OP_CONCAT: return concat_rule;
    case PP_OP_MATMUL: return matmul_rule;
    case PP_OP_GEMM: return gemm_rule;
    case PP_OP_EINSUM: return einsum_rule;
    case PP_OP_GATHER: return gather_rule;
    case PP_OP_GATHERELEMENTS: return gather_elements_rule;
    case PP_OP_GRIDSAMPLE: return gridsample_rule;
    case PP_OP_SCATTERND: return scatternd_rule;
    case PP_OP_LSTM: case PP_OP_GRU: case PP_OP_RNN: return rnn_rule;
    default: return NULL;
    }
}

/* Elementwise ops, from the op table's traits: output[i] is f of the inputs'
 * elements at i (NumPy broadcasting), so the samples stay where they are.
 * Besides the PP_TR_UNARY and PP_TR_BINARY rows: Identity (a view),
 * CastLike (input 1 gives only a type) and inference-mode Dropout. */
static bool elementwise(pp_op op) {
    return pp_op_has(op, PP_TR_UNARY) || pp_op_has(op, PP_TR_BINARY) || op == PP_OP_IDENTITY ||
           op == PP_OP_CASTLIKE || op == PP_OP_DROPOUT;
}

/* The batch must stay on axes before `from` (normalizations over [from, rank)). */
static int norm_from(bctx *c, bax s, int from, const char *what) {
    if (s.axis >= from)
        return mixes(c, "%s over axes %d.. of the input, which include the batch axis (%d)", what,
                     from, s.axis);
    return 0;
}

/* The rule of node n (c->in, c->out filled; some input carries the
 * batch): the states of its outputs into outs[] (zeroed by the caller), or
 * -1 with c->why. Where the inputs carry the batch is all it reads (and a
 * Gather's indices' arange, own_rows_rule): whether they are copies (rep),
 * and what values an output holds (facts), are the caller's. */
static int apply(bctx *c, const pp_node *n, bax *outs) {
    const int x = n->in[0];
    const bax s = carries(c, x) ? c->st[x] : (bax){0};
    const int rank = c->in[0].shape.rank;
    pp_attrs a = pp_node_attrs(c->g, n);
    bax res = s;
    const char *opname = pp_op_table[n->op].name;
    if (n->op == PP_OP_CASTLIKE) {
        if (!s.on) return 0; /* only the type of the other input is used */
    } else if (elementwise(n->op)) {
        if (bcast(c, n, 0, n->n_in, &c->out[0].shape, &res)) return -1;
    } else {
        /* the other rules read their data from input 0 (those of multi_rule:
         * from every input); parameters carry no samples */
        multi_fn *multi = multi_rule(n->op);
        bool params = false;
        const int last = n->op == PP_OP_FUSEDCONV && n->n_in > 3 ? 3 : n->n_in; /* its input 3: a residual */
        for (int k = multi ? n->n_in : 1; k < last; k++) params |= carries(c, n->in[k]);
        if (params)
            return lost(c, "a parameter input (weights, shape, axes, bounds, ...) carries sample "
                        "data");
        if (multi) {
            if (multi(c, n, &res)) return -1;
        } else switch (n->op) {
        case PP_OP_CONV: case PP_OP_CONVTRANSPOSE: case PP_OP_FUSEDCONV: case PP_OP_MAXPOOL:
        case PP_OP_AVGPOOL: case PP_OP_LPPOOL: case PP_OP_GLOBALAVGPOOL: case PP_OP_GLOBALMAXPOOL:
        case PP_OP_GROUPNORM: case PP_OP_FUSEDGN:
            if (!s.on)
                return lost(c, "its data input carries no samples but another input does");
            if (s.axis != 0)
                return mixes(c, "%s its input across axis %d, which carries the batch",
                             n->op == PP_OP_GROUPNORM || n->op == PP_OP_FUSEDGN ? "it normalizes" : "it slides a window over",
                             s.axis);
            if (n->op == PP_OP_MAXPOOL && n->n_out > 1 && n->out[1] >= 0 && c->live[n->out[1]])
                return mixes(c, "its Indices output counts positions through the whole batch, "
                             "so a sample's indices depend on its place in the micro-batch");
            if (n->op == PP_OP_FUSEDCONV && n->n_in > 3 && n->in[3] >= 0) {
                bax r;
                if (bcast(c, n, 3, 4, &c->out[0].shape, &r)) return -1;
                if (r.on && (r.axis != 0 || !same_split(r, s)))
                    return mixes(c, "its residual input carries samples on axis %d", r.axis);
            }
            break;
        case PP_OP_ONEHOT: { /* the class axis, new at 'axis' of the output, moves the samples' axis after it */
            int ax;
            if (int_axis(c, n, "axis", -1, rank + 1, &ax)) return -1;
            res = moved(s, s.axis < ax ? s.axis : s.axis + 1);
            break;
        }
        case PP_OP_AFFINEGRID:
            if (s.axis != 0) return mixes(c, "its theta carries samples on axis %d, not 0", s.axis);
            break;
        case PP_OP_COL2IM: /* [N, C * block, L] -> [N, C, image...]: the samples stay on axis 0 */
            if (s.axis != 0)
                return mixes(c, "it sums the blocks of its input's axes 1 and 2 into an image, and axis %d carries "
                             "the batch", s.axis);
            break;
        case PP_OP_QUANTIZELINEAR: case PP_OP_DEQUANTIZELINEAR: {
            pp_quant q;
            pp_err e = {0};
            if (unread(c, pp_quant_parse(n->op, a, c->in, n->n_in, &q, &e), &e)) return -1;
            if (!q.per_tensor && q.axis == s.axis)
                return lost(c, "its scale runs along the batch axis (%d): each sample would take the scale of its "
                            "place in the micro-batch", s.axis);
            break;
        }
        case PP_OP_DEPTHTOSPACE: case PP_OP_SPACETODEPTH:
            if (s.axis != 0)
                return mixes(c, "it moves values between its input's channel and spatial axes, and "
                             "axis %d carries the batch", s.axis);
            break;
        case PP_OP_INSTANCENORM: case PP_OP_BATCHNORM: {
            if (n->op == PP_OP_BATCHNORM && pp_bn_training(a, n->n_out))
                return mixes(c, "in training mode it normalizes with the mean and variance of "
                             "the batch");
            if (n->op == PP_OP_INSTANCENORM && s.axis > 1)
                return mixes(c, "it normalizes over axes 2.., which include the batch axis (%d)",
                             s.axis);
            if (s.axis == 1)
                return lost(c, "the batch lies along the channel axis, so each sample would take "
                            "the parameters of its place in the micro-batch");
            break;
        }
        case PP_OP_LAYERNORM: case PP_OP_RMSNORM: {
            int ax;
            if (int_axis(c, n, "axis", -1, rank, &ax) || norm_from(c, s, ax, "it normalizes")) return -1;
            break;
        }
        case PP_OP_LPNORM: {
            int ax, p;
            pp_err e = {0};
            if (unread(c, pp_lpnorm_parse(a, &c->in[0].shape, &ax, &p, &e), &e)) return -1;
            if (ax == s.axis) return mixes(c, "it normalizes along the batch axis (%d)", ax);
            break;
        }
        case PP_OP_SOFTMAX: case PP_OP_LOGSOFTMAX: case PP_OP_HARDMAX: {
            int ax;
            if (int_axis(c, n, "axis", a.opset >= 13 ? -1 : 1, rank, &ax)) return -1;
            if (a.opset < 13 && norm_from(c, s, ax, "it normalizes (opset < 13: as a 2-D input)"))
                return -1;
            if (s.axis == ax)
                return mixes(c, "%s normalizes over axis %d, the batch axis", opname, ax);
            break;
        }
        case PP_OP_REDUCEMEAN: case PP_OP_REDUCESUM: case PP_OP_REDUCEMAX: case PP_OP_REDUCEMIN:
        case PP_OP_REDUCEPROD: case PP_OP_REDUCEL1: case PP_OP_REDUCEL2:
        case PP_OP_REDUCESUMSQUARE: case PP_OP_REDUCELOGSUM: case PP_OP_REDUCELOGSUMEXP: {
            pp_reduce r;
            pp_err e = {0};
            if (unread(c, pp_reduce_parse(n->op, a, &c->in[0], n->n_in > 1 ? &c->in[1] : NULL, &r, &e), &e))
                return -1;
            if (r.mask[s.axis])
                return mixes(c, "it reduces over the batch axis (%d)", s.axis);
            int before = 0;
            for (int d = 0; d < s.axis; d++) before += r.mask[d];
            res = moved(s, r.keepdims ? s.axis : s.axis - before);
            break;
        }
        case PP_OP_ARGMAX: case PP_OP_ARGMIN: {
            int ax;
            int64_t keep = 1;
            pp_err e = {0};
            (void)pp_attr_int(a, "keepdims", 1, &keep, &e);
            if (int_axis(c, n, "axis", 0, rank, &ax)) return -1;
            if (ax == s.axis) return mixes(c, "it compares along the batch axis (%d)", ax);
            res = moved(s, !keep && ax < s.axis ? s.axis - 1 : s.axis);
            break;
        }
        case PP_OP_TOPK: {
            pp_topk t;
            pp_err e = {0};
            if (unread(c, pp_topk_parse(a, c->in, n->n_in, &t, &e), &e)) return -1;
            if (t.axis == s.axis) return mixes(c, "it sorts along the batch axis (%d)", t.axis);
            break;
        }
        case PP_OP_CUMSUM: case PP_OP_CUMPROD: {
            int64_t v[1];
            int cnt, ax;
            pp_err e = {0};
            if (pp_const_ints(&c->in[1], "axis", v, 1, &cnt, &e) != PP_OK || cnt != 1 ||
                pp_norm_axis(v[0], rank, "axis", &ax, &e) != PP_OK)
                return lost(c, "its axis is not known at compile time");
            if (ax == s.axis)
                return mixes(c, "it %s along the batch axis (%d)", n->op == PP_OP_CUMSUM ? "sums" : "multiplies", ax);
            break;
        }
        case PP_OP_TRILU:
            if (s.axis >= rank - 2)
                return mixes(c, "it masks the matrix of its last two axes by row and column, and "
                             "one of them is the batch axis (%d)", s.axis);
            break;
        case PP_OP_RESIZE: {
            pp_resize r;
            pp_err e = {0};
            if (unread(c, pp_resize_parse(a, c->in, n->n_in, &r, &e), &e)) return -1;
            if (r.out[s.axis] != c->in[0].shape.dim[s.axis] || r.scale[s.axis] != 1.0 ||
                r.coord == PP_RC_TF_CROP_AND_RESIZE)
                return mixes(c, "it interpolates along the batch axis (%d)", s.axis);
            break;
        }
        case PP_OP_TRANSPOSE: {
            int64_t perm[PP_MAX_DIMS];
            pp_err e = {0};
            if (pp_transpose_perm(a, rank, perm, &e) != PP_OK) return lost(c, "%s", e.msg);
            for (int d = 0; d < rank; d++)
                if (perm[d] == s.axis) res = moved(s, d);
            break;
        }
        case PP_OP_EXPAND:
            if (bcast(c, n, 0, 1, &c->out[0].shape, &res)) return -1;
            break;
        case PP_OP_TILE: {
            int64_t rep[PP_MAX_DIMS];
            int cnt;
            pp_err e = {0};
            if (pp_const_ints(&c->in[1], "repeats", rep, PP_MAX_DIMS, &cnt, &e) != PP_OK ||
                cnt != rank)
                return lost(c, "its repeats are not known at compile time");
            if (rep[s.axis] != 1)
                return mixes(c, "it repeats the batch axis %lld times", (long long)rep[s.axis]);
            break;
        }
        case PP_OP_PAD:
            if (pad_rule(c, n, s)) return -1;
            break;
        case PP_OP_CENTERCROPPAD: {
            pp_pad pd;
            pp_err e = {0};
            if (unread(c, pp_centercrop_parse(a, c->in, n->n_in, &pd, &e), &e)) return -1;
            const int64_t from = c->in[0].shape.dim[s.axis], to = pd.out.dim[s.axis];
            if (to != from)
                return mixes(c, "it %s the batch axis (%d) from %lld to %lld positions: samples chosen, or "
                             "made up, by their place in the micro-batch", to < from ? "crops" : "pads", s.axis,
                             (long long)from, (long long)to);
            break;
        }
        case PP_OP_SLICE: {
            pp_slice sl;
            pp_err e = {0};
            if (unread(c, pp_slice_parse(a, c->in, n->n_in, &sl, &e), &e)) return -1;
            if (sl.first[s.axis] != 0 || sl.step[s.axis] != 1 ||
                sl.out.dim[s.axis] != c->in[0].shape.dim[s.axis])
                return mixes(c, "it takes part of the batch axis (%lld of %lld positions from %lld, "
                             "step %lld): samples chosen by their place in the micro-batch",
                             (long long)sl.out.dim[s.axis], (long long)c->in[0].shape.dim[s.axis],
                             (long long)sl.first[s.axis], (long long)sl.step[s.axis]);
            break;
        }
        case PP_OP_SPLIT: {
            int ax;
            if (int_axis(c, n, "axis", 0, rank, &ax)) return -1;
            if (ax == s.axis && n->n_out > 1)
                return mixes(c, "it splits along the batch axis (%d): samples go to outputs by "
                             "their place in the micro-batch", ax);
            break;
        }
        case PP_OP_CONSTANTOFSHAPE: case PP_OP_RANGE:
            return lost(c, "its output's shape or values come from sample data");
        case PP_OP_SHAPE: case PP_OP_SIZE:
            return 0; /* the shape alone (see the header: the batch size as a number is not followed) */
        default:
            if (pp_op_has(n->op, PP_TR_VIEW)) { /* Reshape, Flatten, Squeeze, Unsqueeze: the same bytes */
                if (reshape_rule(c, s, &c->in[0].shape, &c->out[0].shape, &res)) return -1;
                break;
            }
            return lost(c, "the batch analysis does not know op %s", opname);
        }
    }
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        const pp_shape *o = shp(c, n->out[k]);
        const bax r = out_state(n, k, res);
        /* the rule's answer must fit the output, else the analysis is wrong: refuse */
        if (r.on && (r.axis < 0 || r.axis >= o->rank || r.outer < 1 || r.inner < 1 ||
                     o->dim[r.axis] != r.outer * c->B * r.inner))
            return lost(c, "the analysis lost the batch axis at output '%s'", vname(c, n->out[k]));
        outs[k] = r;
    }
    return 0;
}

static bool int_type(pp_dtype t) { return t == PP_I64 || t == PP_I32; }

/* Inputs that hold arange values (step != 0) are not the same in a
 * micro-batch as in the whole batch: only the ops that carry them to a
 * Gather that cancels them (own_rows_rule) may read them. */
static int step_ok(bctx *c, const pp_node *n) {
    for (int k = 0; k < n->n_in; k++) {
        const int v = n->in[k];
        if (!carries(c, v) || !c->st[v].step) continue;
        const bool ok = n->op == PP_OP_ADD || (n->op == PP_OP_GATHER && k == 1) ||
                        (k == 0 && (pp_op_has(n->op, PP_TR_VIEW) ||
                                    (n->op == PP_OP_CAST && int_type(c->out[0].dtype))));
        if (!ok)
            return lost(c, "'%s' holds each sample's place in the batch (an arange over the batch "
                        "added to sample data), which a micro-batch counts from 0 again: only a "
                        "Gather of each sample's own rows may read it", vname(c, v));
    }
    return 0;
}

/* a + b, or false on overflow */
static bool add_to(int64_t *a, int64_t b) { return !__builtin_add_overflow(*a, b, a); }

/* The values of the outputs (outs[], on): copies when every input that
 * carries the batch is (rep), and the integer facts: the range of ArgMax and
 * ArgMin, kept by views and casts to int32/int64, summed by Add (with the
 * arange bcast found). */
static int facts(bctx *c, const pp_node *n, bool rep, bax *outs) {
    for (int k = 0; k < n->n_out; k++) {
        outs[k].rep = outs[k].on && rep;
        outs[k].ranged = false, outs[k].lo = outs[k].hi = outs[k].step = 0;
    }
    bax *o = &outs[0];
    if (rep || !o->on || !int_type(c->out[0].dtype)) return 0;
    const bax x = carries(c, n->in[0]) ? c->st[n->in[0]] : (bax){0};
    if (n->op == PP_OP_ARGMAX || n->op == PP_OP_ARGMIN) {
        int ax;
        if (int_axis(c, n, "axis", 0, c->in[0].shape.rank, &ax)) return -1;
        o->ranged = c->in[0].shape.dim[ax] > 0;
        o->lo = 0, o->hi = c->in[0].shape.dim[ax] - 1;
    } else if (pp_op_has(n->op, PP_TR_VIEW) || n->op == PP_OP_IDENTITY || n->op == PP_OP_CAST) {
        o->ranged = x.ranged && int_type(c->in[0].dtype), o->lo = x.lo, o->hi = x.hi, o->step = x.step;
    } else if (n->op == PP_OP_ADD) {
        bool ok = true;
        o->ranged = true;
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            int64_t lo, hi;
            if (carries(c, v)) {
                ok = ok && add_to(&o->step, c->st[v].step);
                o->ranged = o->ranged && c->st[v].ranged;
                lo = c->st[v].lo, hi = c->st[v].hi;
            } else if (v == c->iota.v) {
                ok = ok && add_to(&o->step, c->iota.step);
                lo = c->iota.lo, hi = c->iota.hi;
            } else if (!int_range(c, v, &lo, &hi)) {
                o->ranged = false;
                continue;
            }
            o->ranged = o->ranged && add_to(&o->lo, lo) && add_to(&o->hi, hi);
        }
        if (!ok) return lost(c, "its arange over the batch overflows");
    }
    if (o->ranged) { /* every value, u + step x b for b < B, fits the type (no wrapping) */
        const int64_t lim = c->out[0].dtype == PP_I32 ? INT32_MAX : INT64_MAX;
        int64_t reach, lo, hi;
        o->ranged = o->step != INT64_MIN && !__builtin_mul_overflow(o->step < 0 ? -o->step : o->step, c->B, &reach) &&
                    !__builtin_sub_overflow(o->lo, reach, &lo) && !__builtin_add_overflow(o->hi, reach, &hi) &&
                    lo >= -lim && hi <= lim;
    }
    if (!o->ranged) o->lo = o->hi = 0;
    return 0;
}

/* Demote the copies among n's inputs (rep) to values free of sample data,
 * and back: the analysis as it was before it followed copies, where a rule
 * that pairs copies and samples refuses (shared_ok checks the copies then). */
static void demote(bctx *c, const pp_node *n, bax *saved, bool back) {
    for (int k = 0; k < n->n_in; k++) {
        const int v = n->in[k];
        if (v < 0) continue;
        if (back) {
            if (saved[k].on) c->st[v] = saved[k];
            continue;
        }
        saved[k] = carries(c, v) && c->st[v].rep ? c->st[v] : (bax){0};
        if (saved[k].on) c->st[v] = (bax){0};
    }
}

/* Node n reads no sample data. Its outputs are copies (rep) where it makes
 * them: a Tile whose count along an axis is a multiple of the batch (T = o
 * x B copies of an axis of size d: the batch digit (o, B, d)), an Expand of
 * an axis of size 1 to the batch's size; or where a constant input holds
 * them (uniform along an axis of the batch's size, or a multiple q of it,
 * read as (1, B, q) or (q, B, 1)) and the op's rule carries them to an
 * output. These are what a model computes from the batch size alone (a
 * relative-position table repeated for every sample); whatever else it
 * computes stays free of sample data. */
static void seed(bctx *c, const pp_node *n, bax *outs) {
    const int64_t B = c->B;
    const pp_shape *in = &c->in[0].shape, *o = &c->out[0].shape;
    bax r = {.on = true, .rep = true, .axis = -1};
    if (n->op == PP_OP_TILE) {
        int64_t rep[PP_MAX_DIMS];
        int cnt;
        pp_err e = {0};
        if (pp_const_ints(&c->in[1], "repeats", rep, PP_MAX_DIMS, &cnt, &e) != PP_OK || cnt != in->rank) return;
        for (int pass = 0; pass < 2 && r.axis < 0; pass++)
            for (int d = 0; d < in->rank && r.axis < 0; d++)
                if (in->dim[d] > 0 && rep[d] > 0 && (pass ? rep[d] % B == 0 : rep[d] == B))
                    r.axis = d, r.outer = rep[d] / B, r.inner = in->dim[d];
    } else if (n->op == PP_OP_EXPAND) {
        for (int d = 0; d < o->rank && r.axis < 0; d++) {
            const int j = d - (o->rank - in->rank);
            if (o->dim[d] == B && (j < 0 || in->dim[j] == 1)) r.axis = d, r.outer = r.inner = 1;
        }
    }
    if (r.axis >= 0) {
        outs[0] = r;
        c->st[n->out[0]] = r;
        return;
    }
    if (n->op == PP_OP_SHAPE || n->op == PP_OP_SIZE) return;
    const int last = elementwise(n->op) || multi_rule(n->op) ? n->n_in : 1; /* the data inputs */
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < last; k++) {
            const int v = n->in[k];
            if (v < 0 || !c->g->values[v].is_const || !c->g->values[v].data) continue;
            const pp_shape *s = shp(c, v);
            for (int d = 0; d < s->rank; d++) {
                const int64_t q = s->dim[d] / B;
                if (s->dim[d] < B || s->dim[d] % B || (q == 1) == (pass == 1)) continue;
                for (int split = 0; split < (q == 1 ? 1 : 2); split++) {
                    r.axis = d, r.outer = split ? q : 1, r.inner = split ? 1 : q;
                    if (!uniform(c, v, d, r.outer, r.inner, 0)) continue;
                    c->st[v] = r;
                    memset(outs, 0, sizeof *outs * (size_t)n->n_out);
                    c->iota.v = -1;
                    const bool ok = apply(c, n, outs) == 0 && facts(c, n, true, outs) == 0;
                    bool carried = false;
                    c->st[v] = (bax){0};
                    for (int j = 0; j < n->n_out; j++) carried = carried || (n->out[j] >= 0 && outs[j].on);
                    if (!ok || !carried) continue;
                    for (int j = 0; j < n->n_out; j++)
                        if (n->out[j] >= 0 && outs[j].on) c->st[n->out[j]] = outs[j];
                    return;
                }
            }
        }
    }
}

/* The rule of node i: the states of its outputs, or -1 with c->why. A
 * node that reads copies (rep) and no samples outputs copies where its rule
 * carries them, else values free of sample data: either way no sample is
 * mixed with another. */
static int rule(bctx *c, int i) {
    const pp_node *n = &c->g->nodes[i];
    bax outs[PP_MAX_OUTPUTS];
    bax *saved = c->saved;
    pp_node_tinfo(c->g, n, c->in, c->out);
    bool any = false, rep = true, some_rep = false;
    for (int k = 0; k < n->n_in; k++) {
        if (!carries(c, n->in[k])) continue;
        any = true;
        rep = rep && c->st[n->in[k]].rep;
        some_rep = some_rep || c->st[n->in[k]].rep;
    }
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) c->st[n->out[k]] = (bax){0};
    memset(outs, 0, sizeof *outs * (size_t)n->n_out);
    if (!any) { /* computed from constants alone */
        seed(c, n, outs);
        return 0;
    }
    if (step_ok(c, n)) return -1;
    c->iota.v = -1;
    int r = apply(c, n, outs);
    if (r && rep) return 0; /* no sample data in or out */
    if (r && some_rep) { /* copies and samples: judged as before copies were followed */
        demote(c, n, saved, false);
        memset(outs, 0, sizeof *outs * (size_t)n->n_out);
        c->iota.v = -1;
        r = apply(c, n, outs);
        demote(c, n, saved, true);
        rep = false;
    }
    if (r || facts(c, n, rep, outs)) return -1;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) c->st[n->out[k]] = outs[k];
    return 0;
}

/* ---- the pass ------------------------------------------------------------------------- */

/* The analysis of g (shapes inferred, constants folded); the verdict for
 * the user's micro-batch `mb` into user->batch_mixing or err. */
static pp_status analyze(pp_graph *g, pp_graph *user, int64_t mb, bool allow, pp_err *err) {
    bctx c = {.g = g, .B = g->batch};
    c.st = calloc(pp_count(g->n_values), sizeof *c.st);
    c.live = calloc(pp_count(g->n_values), sizeof *c.live);
    c.in = calloc(PP_MAX_INPUTS, sizeof *c.in);
    c.out = calloc(PP_MAX_OUTPUTS, sizeof *c.out);
    c.saved = calloc(PP_MAX_INPUTS, sizeof *c.saved);
    bool *node_live = calloc(pp_count(g->n_nodes), sizeof *node_live);
    pp_status s = PP_OK;
    if (!c.st || !c.live || !c.in || !c.out || !c.saved || !node_live) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < g->n_outputs; k++) c.live[g->outputs[k]] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++) node_live[i] |= n->out[k] >= 0 && c.live[n->out[k]];
        if (node_live[i])
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0) c.live[n->in[k]] = true;
    }
    for (int k = 0; k < g->n_inputs; k++) c.st[g->inputs[k]] = (bax){.on = true, .axis = 0, .outer = 1, .inner = 1};
    int bad = -1;
    for (int i = 0; i < g->n_nodes && bad < 0; i++)
        if (node_live[i] && rule(&c, i)) bad = i;
    char where[400] = "";
    if (bad >= 0) {
        const pp_node *n = &g->nodes[bad];
        snprintf(where, sizeof where, "node '%s' (#%d, %s)", n->name, n->src >= 0 ? n->src : bad,
                 pp_op_table[n->op].name);
    }
    for (int k = 0; k < g->n_outputs && bad < 0; k++) {
        const int v = g->outputs[k];
        bax b = c.st[v];
        if (b.rep && (b.axis != 0 || b.outer != 1 || b.inner != 1)) b = (bax){0}; /* judged by its values */
        if (b.on ? b.axis != 0 || b.outer != 1 || b.inner != 1 || b.step : !uniform(&c, v, 0, 1, 1, 0)) {
            snprintf(where, sizeof where, "graph output '%s'", g->values[v].name);
            if (b.on && b.axis != 0)
                lost(&c, "it carries the batch on axis %d, not 0, so pprt would join the "
                     "micro-batches along the wrong axis", b.axis);
            else if (b.on && b.step)
                lost(&c, "it holds each sample's place in the batch (an arange over the batch), "
                     "which a micro-batch counts from 0 again");
            else if (b.on)
                lost(&c, "its dim 0 holds the batch merged with other axes (%lld groups of "
                     "samples, %lld rows a sample), so pprt would join the micro-batches in "
                     "another order", (long long)b.outer, (long long)b.inner);
            else
                lost(&c, "it holds no sample data but differs along dim 0");
            bad = g->n_nodes;
        }
    }
    if (bad < 0) goto done;
    if (allow) {
        char note[1024];
        snprintf(note, sizeof note, "%s: %s%s", where, c.lost ? "may mix samples: " : "", c.why);
        user->batch_mixing = pp_arena_strdup(&user->arena, note);
        if (!user->batch_mixing) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    char at[64] = "";
    if (g->batch != mb) snprintf(at, sizeof at, " (seen with the batch at %lld)", (long long)g->batch);
    if (c.lost)
        s = PP_FAIL(err, PP_EINVAL,
                    "%s: the batch axis cannot be followed%s: %s; so it may mix samples, and "
                    "pprt computes each micro-batch of %lld on its own. If the model computes "
                    "every sample by itself, compile with --allow-batch-mixing; else compile with "
                    "-b equal to the number of samples you run at once (the whole batch) and "
                    "--allow-batch-mixing",
                    where, at, c.why, (long long)mb);
    else
        s = PP_FAIL(err, PP_EINVAL,
                    "%s mixes samples%s: %s. pprt computes each micro-batch of %lld on its own, "
                    "so the result would differ from the whole batch's; compile with -b equal "
                    "to the number of samples you run at once (the whole batch) and "
                    "--allow-batch-mixing",
                    where, at, c.why, (long long)mb);
done:
    free(c.st);
    free(c.live);
    free(c.in);
    free(c.out);
    free(c.saved);
    free(node_live);
    return s;
}

/* The analysis on a copy of g with the batch at `P`; *ran is false when the
 * copy cannot be inferred at that batch (the model does not take it). */
static pp_status probe(pp_graph *g, int64_t P, bool allow, bool *ran, pp_err *err) {
    pp_graph cp;
    PP_TRY(pp_graph_clone(g, &cp, err));
    cp.batch = P;
    for (int k = 0; k < cp.n_inputs; k++) cp.values[cp.inputs[k]].shape.dim[0] = P;
    pp_err e = {0};
    *ran = pp_fold(&cp, &e) == PP_OK && pp_graph_verify(&cp, &e) == PP_OK;
    pp_status s = *ran ? analyze(&cp, g, g->batch, allow, err) : PP_OK;
    pp_graph_free(&cp);
    return s;
}

/* The graph is analyzed at the user's micro-batch (when 2 or more: at 1 the
 * batch axis cannot be told from other size-1 axes) and at 7 (5 for -b 7), a
 * batch the model's own constants are unlikely to hold: a Reshape to [2, -1]
 * written for an export at batch 2 keeps the samples apart at 2 only. */
pp_status pp_batch_check(pp_graph *g, bool allow, pp_err *err) {
    g->batch_mixing = NULL;
    /* -b 0: no batch axis; a batch fixed in the model: its outputs are defined
     * for exactly that many samples, and pprt can only run more as several
     * evaluations */
    if (g->batch == 0 || g->batch_fixed) return PP_OK;
    bool ran;
    if (g->batch > 1) PP_TRY(probe(g, g->batch, allow, &ran, err));
    if (g->batch_mixing) return PP_OK;
    return probe(g, g->batch == 7 ? 5 : 7, allow, &ran, err);
}
