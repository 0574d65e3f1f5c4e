/* unroll.c: control flow and sequences out of the graph, during the infer
 * pass (fold.c calls pp_unroll_node on each such node as its sweep reaches
 * it, so every value the node reads is already inferred and, where it can
 * be, folded to a constant). What it does:
 *
 *   Loop      each iteration's body instantiated as plain nodes, placed
 *             before the Loop, whose loop-carried inputs then become the
 *             body's outputs; the sweep runs through those nodes (folding
 *             what it can) and meets the Loop again for the next iteration.
 *             The trip count, and the condition where there is one, must be
 *             known at compile time by then, else the Loop is refused
 *             naming why. At the end the carried outputs are Identities of
 *             the last values and the scan outputs a Concat of each
 *             iteration's value, unsqueezed.
 *   If        the branch its (compile-time) condition selects, instantiated.
 *   sequences a sequence is a list of values known here (pp_value.seq):
 *             SequenceEmpty/Construct/Insert/Erase build the list,
 *             SequenceAt becomes an Identity of an element, SequenceLength
 *             a constant, SplitToSequence a Split (and Squeezes),
 *             ConcatFromSequence a Concat (of Unsqueezes, with new_axis).
 *             Positions must be compile-time constants.
 *
 * Nodes made from a subgraph keep the module scope of the node they came
 * from and its name with "@iterK" (Loop) or "@then"/"@else" (If) appended.
 * Bounded: at most PP_UNROLL_MAX_ITERS iterations per Loop and
 * PP_UNROLL_MAX_NODES nodes added in all (GPT-J-6B's export would add about
 * 23000: 28 layers x 2 loops x 32 iterations x 13 nodes, all folded away;
 * far more makes the later passes slow, which a fuzzer finds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/op_fns.h" /* pp_norm_axis, pp_const_ints */
#include "passes.h"

#define PP_UNROLL_MAX_ITERS 16384
#define PP_UNROLL_MAX_NODES (1 << 15)

/* ---- small helpers ----------------------------------------------------------------- */

static pp_status fail_at(const pp_graph *g, int i, pp_err *err, pp_status code, const char *what) {
    char d[320];
    return PP_FAIL(err, code, "%s: %s", pp_node_desc(g, i, d, sizeof d), what);
}

/* A new value named after `hint`, made unique. */
static pp_status new_value(pp_graph *g, const char *hint, int *v, pp_err *err) {
    char name[512];
    snprintf(name, sizeof name, "%.480s", hint);
    for (int k = 1; pp_graph_find(g, name) >= 0; k++) snprintf(name, sizeof name, "%.480s__%d", hint, k);
    return pp_graph_add_value(g, name, v, err);
}

/* An int64 scalar constant (shape []): a loop's iteration number, a sequence's length. */
static pp_status scalar_i64(pp_graph *g, const char *hint, int64_t val, int *v, pp_err *err) {
    const pp_shape sh = {0, {0}};
    return pp_graph_add_const(g, hint, PP_I64, &sh, &val, v, err);
}

/* v's single integer (or bool) value, which must be a compile-time constant;
 * `what` names v in the message. */
static pp_status const_scalar(pp_graph *g, int i, int v, const char *what, int64_t *out,
                              pp_err *err) {
    char d[320], s[96];
    pp_value *val = &g->values[v];
    if (!val->is_const || val->is_seq)
        return PP_FAIL(err, PP_EUNSUP, "%s: %s ('%s') is not known at compile time (it depends on "
                       "the data); only control flow and sequence positions that constant folding "
                       "resolves can be unrolled", pp_node_desc(g, i, d, sizeof d), what, val->name);
    int64_t n;
    PP_TRY(pp_shape_numel(&val->shape, &n, err));
    if (n != 1 || val->shape.rank > 1)
        return PP_FAIL(err, PP_EINVAL, "%s: %s must hold one value, has shape %s",
                       pp_node_desc(g, i, d, sizeof d), what, pp_shape_str(&val->shape, s, sizeof s));
    PP_TRY(pp_value_align(g, v, err));
    val = &g->values[v];
    switch (val->dtype) {
    case PP_I64: *out = *(const int64_t *)val->data; return PP_OK;
    case PP_I32: *out = *(const int32_t *)val->data; return PP_OK;
    case PP_BOOL: *out = *(const uint8_t *)val->data != 0; return PP_OK;
    default:
        return PP_FAIL(err, PP_EINVAL, "%s: %s has element type %s, expected an integer or bool",
                       pp_node_desc(g, i, d, sizeof d), what, pp_dtype_name(val->dtype));
    }
}

/* Value v as a sequence (fails naming the node when it is not one). */
static pp_status get_seq(const pp_graph *g, int i, int v, const pp_value **out, pp_err *err) {
    char d[320];
    if (v < 0 || !g->values[v].is_seq)
        return PP_FAIL(err, PP_EINVAL, "%s: input '%s' is not a sequence",
                       pp_node_desc(g, i, d, sizeof d), v < 0 ? "" : g->values[v].name);
    *out = &g->values[v];
    return PP_OK;
}

static pp_status set_seq(pp_graph *g, int v, const int *elems, int n, pp_dtype dt, pp_err *err) {
    int *copy = pp_arena_alloc(&g->arena, pp_count(n) * sizeof *copy);
    if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (n) memcpy(copy, elems, (size_t)n * sizeof *copy);
    pp_value *val = &g->values[v];
    val->is_seq = true;
    val->seq = copy;
    val->n_seq = n;
    val->dtype = dt;
    val->shape = (pp_shape){0, {0}};
    return PP_OK;
}

static pp_attr *attrs_new(pp_graph *g, int n) { return pp_arena_alloc(&g->arena, pp_count(n) * sizeof(pp_attr)); }

static pp_attr attr_int(const char *name, int64_t v) {
    return (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v};
}

static pp_status attr_ints(pp_graph *g, const char *name, const int64_t *v, int n, pp_attr *a,
                           pp_err *err) {
    int64_t *copy = pp_arena_alloc(&g->arena, pp_count(n) * sizeof *copy);
    if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (n) memcpy(copy, v, (size_t)n * sizeof *copy);
    *a = (pp_attr){.name = name, .type = PP_ATTR_INTS, .ints = copy, .n = n};
    return PP_OK;
}

/* Insert a node at *at (then *at and *self, the node being unrolled, move
 * on by one), with the scope of *self; outputs are filled by the caller. */
static pp_status insert(pp_graph *g, int *at, int *self, pp_op op, const char *name, int n_in,
                        int n_out, int *idx, pp_err *err) {
    PP_TRY(pp_graph_insert_node(g, *at, op, name, n_in, n_out, idx, err));
    (*at)++, (*self)++;
    const pp_node *src = &g->nodes[*self];
    pp_node *n = &g->nodes[*idx];
    n->scope = src->scope, n->n_scope = src->n_scope;
    n->extra = src->extra, n->n_extra = src->n_extra;
    return PP_OK;
}

/* Unsqueeze (or Squeeze) x at `axis` into a new value: before opset 13 the
 * axes are an attribute, from 13 an input. */
static pp_status squeeze_op(pp_graph *g, int *at, int *self, bool un, int x, int64_t axis,
                            const char *hint, int *y, pp_err *err) {
    const pp_op op = un ? PP_OP_UNSQUEEZE : PP_OP_SQUEEZE;
    const bool as_input = g->opset >= 13;
    int ni, c = -1;
    char name[512];
    snprintf(name, sizeof name, "%s/%s", hint, un ? "Unsqueeze" : "Squeeze");
    if (as_input) PP_TRY(pp_graph_add_ints(g, name, &axis, 1, &c, err));
    PP_TRY(insert(g, at, self, op, name, as_input ? 2 : 1, 1, &ni, err));
    PP_TRY(new_value(g, name, y, err));
    pp_node *n = &g->nodes[ni];
    n->in[0] = x;
    if (as_input) {
        n->in[1] = c;
    } else {
        pp_attr *a = attrs_new(g, 1);
        if (!a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        PP_TRY(attr_ints(g, "axes", &axis, 1, a, err));
        n = &g->nodes[ni];
        n->attrs = a, n->n_attrs = 1;
    }
    g->nodes[ni].out[0] = *y;
    return PP_OK;
}

/* Output value `out` of the node at *self becomes `v`: an alias when v is a
 * sequence, else an Identity node placed before *self. */
static pp_status bind_output(pp_graph *g, int *at, int *self, int out, int v, pp_err *err) {
    if (g->values[v].is_seq) {
        const pp_value *s = &g->values[v];
        return set_seq(g, out, s->seq, s->n_seq, s->dtype, err);
    }
    char name[512];
    snprintf(name, sizeof name, "%s/Identity", g->values[out].name);
    int ni;
    PP_TRY(insert(g, at, self, PP_OP_IDENTITY, name, 1, 1, &ni, err));
    g->nodes[ni].in[0] = v;
    g->nodes[ni].out[0] = out;
    return PP_OK;
}

/* ---- subgraphs -------------------------------------------------------------------------- */

static const pp_subgraph *graph_attr(const pp_graph *g, const pp_node *n, const char *name) {
    const pp_attr *a = pp_attr_find(pp_node_attrs(g, n), name);
    return a && a->type == PP_ATTR_GRAPH ? a->graph : NULL;
}

/* The tag of an instantiation of node n's subgraph: `what` ("iter3",
 * "then"), after the tags n's own name carries when n itself came from a
 * subgraph ("Loop_1@iter7" gives "iter7/iter3"), so that the names made in
 * nested instantiations never repeat. */
static void make_tag(const pp_node *n, const char *what, char *tag, size_t len) {
    const char *at = strchr(n->name, '@');
    if (at) snprintf(tag, len, "%.200s/%s", at + 1, what);
    else snprintf(tag, len, "%s", what);
}

/* Instantiate sg before the node at *self: local[0..sg->n_in) are bound by
 * the caller (the rest must be -1); outs[0..sg->n_out) receive the values of
 * its outputs. `tag` (make_tag) is appended to the names. */
static pp_status instantiate(pp_graph *g, int *self, const pp_subgraph *sg, int *local,
                             const char *tag, int *outs, size_t *added, pp_err *err) {
    int at = *self;
    char name[512];
    for (int k = 0; k < sg->n_nodes; k++) {
        const pp_subnode *sn = &sg->nodes[k];
        if (++*added > PP_UNROLL_MAX_NODES)
            return fail_at(g, *self, err, PP_EUNSUP, "unrolling it would add more than 32768 nodes");
        int in[PP_MAX_INPUTS];
        if (sn->n_in > PP_MAX_INPUTS)
            return fail_at(g, *self, err, PP_EUNSUP, "a subgraph node has more than 1024 inputs");
        const pp_node *owner = &g->nodes[*self];
        for (int j = 0; j < sn->n_in; j++) {
            const pp_subref r = sn->in[j];
            in[j] = r.kind == PP_SUB_LOCAL ? local[r.idx]
                    : r.kind == PP_SUB_CONST ? r.idx
                    : r.kind == PP_SUB_FREE ? owner->in[owner->n_in - sg->n_free + r.idx]
                                            : -1;
            if (r.kind == PP_SUB_LOCAL && in[j] < 0) {
                char d[320];
                return PP_FAIL(err, PP_EINVAL, "%s: subgraph node '%s' reads '%s' before it is "
                               "defined", pp_node_desc(g, *self, d, sizeof d), sn->name,
                               sg->local_names[r.idx]);
            }
        }
        snprintf(name, sizeof name, "%.200s@%s", sn->name, tag);
        int ni;
        PP_TRY(insert(g, &at, self, sn->op, name, sn->n_in, sn->n_out, &ni, err));
        pp_node *n = &g->nodes[ni];
        memcpy(n->in, in, (size_t)sn->n_in * sizeof *in);
        n->attrs = sn->attrs, n->n_attrs = sn->n_attrs;
        for (int j = 0; j < sn->n_out; j++) {
            int v;
            snprintf(name, sizeof name, "%.200s@%s", sg->local_names[sn->out[j]], tag);
            PP_TRY(new_value(g, name, &v, err));
            g->nodes[ni].out[j] = v;
            local[sn->out[j]] = v;
        }
    }
    const pp_node *owner = &g->nodes[*self];
    for (int j = 0; j < sg->n_out; j++) {
        const pp_subref r = sg->out[j];
        outs[j] = r.kind == PP_SUB_LOCAL ? local[r.idx]
                  : r.kind == PP_SUB_CONST ? r.idx
                  : r.kind == PP_SUB_FREE ? owner->in[owner->n_in - sg->n_free + r.idx]
                                          : -1;
        if (outs[j] < 0)
            return fail_at(g, *self, err, PP_EINVAL, "a subgraph output is not defined");
    }
    return PP_OK;
}

static pp_status unroll_if(pp_graph *g, int i, size_t *added, pp_err *err) {
    int64_t c;
    PP_TRY(const_scalar(g, i, g->nodes[i].in[0], "the condition", &c, err));
    const char *which = c ? "then_branch" : "else_branch";
    const pp_subgraph *sg = graph_attr(g, &g->nodes[i], which);
    if (!sg) return fail_at(g, i, err, PP_EINVAL, c ? "no then_branch" : "no else_branch");
    if (sg->n_in != 0 || sg->n_out != g->nodes[i].n_out) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s has %d inputs and %d outputs, expected 0 and %d", which,
                 sg->n_in, sg->n_out, g->nodes[i].n_out);
        return fail_at(g, i, err, PP_EINVAL, msg);
    }
    int *local = malloc(pp_count(sg->n_locals) * sizeof *local);
    int *outs = malloc(pp_count(sg->n_out) * sizeof *outs);
    pp_status s = local && outs ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) {
        memset(local, 0xff, pp_count(sg->n_locals) * sizeof *local);
        int self = i;
        char tag[256];
        make_tag(&g->nodes[i], c ? "then" : "else", tag, sizeof tag);
        s = instantiate(g, &self, sg, local, tag, outs, added, err);
        int at = self;
        for (int k = 0; k < sg->n_out && s == PP_OK; k++)
            s = bind_output(g, &at, &self, g->nodes[self].out[k], outs[k], err);
        if (s == PP_OK) g->nodes[self].dead = true;
    }
    free(local);
    free(outs);
    return s;
}

/* Loop(M, cond, v...) [+ free variables]: one iteration per call, or, when
 * the trip count or condition says stop, the outputs. */
static pp_status unroll_loop(pp_graph *g, int i, size_t *added, pp_err *err) {
    pp_node *n = &g->nodes[i];
    const pp_subgraph *sg = graph_attr(g, n, "body");
    if (!sg) return fail_at(g, i, err, PP_EINVAL, "attribute 'body' (a graph) is missing");
    const int n_carried = n->n_in - sg->n_free - 2, n_scan = n->n_out - n_carried;
    if (n_carried < 0 || n_scan < 0 || sg->n_in != 2 + n_carried || sg->n_out != 1 + n_carried + n_scan) {
        char msg[200];
        snprintf(msg, sizeof msg, "the body has %d inputs and %d outputs; with %d loop-carried "
                 "values and %d outputs it needs %d and %d", sg->n_in, sg->n_out,
                 n_carried < 0 ? 0 : n_carried, n->n_out, 2 + n_carried, 1 + n->n_out);
        return fail_at(g, i, err, PP_EINVAL, msg);
    }
    if (!n->loop) {
        pp_loop_state *st = pp_arena_alloc(&g->arena, sizeof *st);
        if (!st) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        st->n_scan = n_scan;
        st->scan = pp_arena_alloc(&g->arena, pp_count(n_scan) * sizeof *st->scan);
        if (!st->scan) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        g->nodes[i].loop = st;
        n = &g->nodes[i];
    }
    pp_loop_state *st = n->loop;
    int64_t trip = -1, cond = 1;
    if (n->in[0] >= 0) PP_TRY(const_scalar(g, i, g->nodes[i].in[0], "the trip count M", &trip, err));
    n = &g->nodes[i];
    if (n->in[1] >= 0)
        PP_TRY(const_scalar(g, i, n->in[1], st->iter ? "the condition the body computed"
                                                     : "the condition cond", &cond, err));
    n = &g->nodes[i];
    if (trip < 0 && n->in[1] < 0)
        return fail_at(g, i, err, PP_EINVAL, "a Loop with neither a trip count nor a condition "
                       "never ends");
    const bool go = cond && (trip < 0 || st->iter < trip);
    if (go) {
        if (st->iter >= PP_UNROLL_MAX_ITERS)
            return fail_at(g, i, err, PP_EUNSUP, "the Loop runs more than 16384 iterations: too "
                           "many to unroll");
        int *local = malloc(pp_count(sg->n_locals) * sizeof *local);
        int *outs = malloc(pp_count(sg->n_out) * sizeof *outs);
        pp_status s = local && outs ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
        char tag[256], hint[512], what[32];
        snprintf(what, sizeof what, "iter%lld", (long long)st->iter);
        make_tag(n, what, tag, sizeof tag);
        snprintf(hint, sizeof hint, "%.200s/%s", n->name, what);
        int64_t it = st->iter;
        const uint8_t yes = 1;
        const pp_shape scalar = {0, {0}};
        if (s == PP_OK) {
            memset(local, 0xff, pp_count(sg->n_locals) * sizeof *local);
            s = scalar_i64(g, hint, it, &local[0], err);
        }
        n = &g->nodes[i];
        if (s == PP_OK && n->in[1] < 0) s = pp_graph_add_const(g, hint, PP_BOOL, &scalar, &yes, &local[1], err);
        else if (s == PP_OK) local[1] = n->in[1];
        for (int c = 0; c < n_carried && s == PP_OK; c++) local[2 + c] = g->nodes[i].in[2 + c];
        int self = i;
        if (s == PP_OK) s = instantiate(g, &self, sg, local, tag, outs, added, err);
        if (s == PP_OK) {
            n = &g->nodes[self];
            if (n->in[1] >= 0) n->in[1] = outs[0];
            for (int c = 0; c < n_carried; c++) n->in[2 + c] = outs[1 + c];
            if (st->iter >= st->scan_cap) { /* grow every scan list */
                int cap = st->scan_cap ? 2 * st->scan_cap : 16;
                for (int k = 0; k < n_scan && s == PP_OK; k++) {
                    int *l = pp_arena_alloc(&g->arena, (size_t)cap * sizeof *l);
                    if (!l) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                    else if (st->iter) memcpy(l, st->scan[k], (size_t)st->iter * sizeof *l);
                    if (l) st->scan[k] = l;
                }
                st->scan_cap = cap;
            }
            for (int k = 0; k < n_scan && s == PP_OK; k++) st->scan[k][st->iter] = outs[1 + n_carried + k];
            st->iter++;
        }
        free(local);
        free(outs);
        return s;
    }
    /* done: carried outputs are the last values, scan outputs their stack */
    int self = i, at = i;
    for (int c = 0; c < n_carried; c++)
        PP_TRY(bind_output(g, &at, &self, g->nodes[self].out[c], g->nodes[self].in[2 + c], err));
    for (int k = 0; k < n_scan; k++) {
        const int out = g->nodes[self].out[n_carried + k];
        if (st->iter == 0)
            return fail_at(g, self, err, PP_EUNSUP, "the Loop runs 0 times, so its scan outputs "
                           "have no shape");
        if (st->iter > PP_MAX_INPUTS)
            return fail_at(g, self, err, PP_EUNSUP, "a scan output over more than 1024 "
                           "iterations is not supported");
        int *parts = malloc((size_t)st->iter * sizeof *parts);
        if (!parts) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        pp_status s = PP_OK;
        for (int64_t t = 0; t < st->iter && s == PP_OK; t++)
            s = squeeze_op(g, &at, &self, true, st->scan[k][t], 0, g->values[out].name, &parts[t], err);
        char name[512];
        snprintf(name, sizeof name, "%s/Concat", g->values[out].name);
        int ni = -1;
        if (s == PP_OK) s = insert(g, &at, &self, PP_OP_CONCAT, name, (int)st->iter, 1, &ni, err);
        pp_attr *a = s == PP_OK ? attrs_new(g, 1) : NULL;
        if (s == PP_OK && !a) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (s == PP_OK) {
            a[0] = attr_int("axis", 0);
            pp_node *cn = &g->nodes[ni];
            memcpy(cn->in, parts, (size_t)st->iter * sizeof *parts);
            cn->out[0] = out;
            cn->attrs = a, cn->n_attrs = 1;
        }
        free(parts);
        PP_TRY(s);
    }
    g->nodes[self].dead = true;
    return PP_OK;
}

/* ---- sequences ---------------------------------------------------------------------------- */

/* A position into a sequence of n (insert: n + 1 places), negative from the end. */
static pp_status seq_pos(pp_graph *g, int i, int v, int64_t def, int64_t n, bool insert_pos,
                         int64_t *pos, pp_err *err) {
    *pos = def;
    if (v >= 0) PP_TRY(const_scalar(g, i, v, "the position", pos, err));
    const int64_t hi = insert_pos ? n : n - 1;
    if (*pos < -n || *pos > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "position %lld is out of range [%lld, %lld] of a sequence of %lld",
                 (long long)*pos, (long long)-n, (long long)hi, (long long)n);
        return fail_at(g, i, err, PP_EINVAL, msg);
    }
    if (*pos < 0) *pos += n;
    return PP_OK;
}

/* Node i becomes op with inputs in[0..n_in) and attributes a[0..n_attrs). */
static pp_status become(pp_graph *g, int i, pp_op op, const int *in, int n_in, pp_attr *a,
                        int n_attrs, pp_err *err) {
    int *ni = calloc(pp_count(n_in), sizeof *ni);
    if (!ni) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(ni, in, (size_t)n_in * sizeof *ni);
    pp_node *n = &g->nodes[i];
    free(n->in);
    n->in = ni, n->n_in = n_in, n->op = op;
    n->attrs = a, n->n_attrs = n_attrs;
    return PP_OK;
}

static pp_status split_to_sequence(pp_graph *g, int i, pp_err *err) {
    pp_node *n = &g->nodes[i];
    const pp_value *x = &g->values[n->in[0]];
    int64_t axis64, keep;
    int axis;
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "axis", 0, &axis64, err));
    PP_TRY(pp_attr_int(pp_node_attrs(g, n), "keepdims", 1, &keep, err));
    PP_TRY(pp_norm_axis(axis64, x->shape.rank, "attribute 'axis'", &axis, err));
    const int64_t dim = x->shape.dim[axis];
    const pp_dtype dt = x->dtype;
    int64_t sizes[PP_MAX_OUTPUTS];
    int cnt = 0;
    const bool has_split = n->n_in > 1 && n->in[1] >= 0;
    const char *too_many = "it splits into more than 64 parts, which is not supported";
    if (!has_split || g->values[n->in[1]].shape.rank == 0) {
        int64_t chunk = 1;
        if (has_split) PP_TRY(const_scalar(g, i, n->in[1], "input split", &chunk, err));
        if (chunk < 1) return fail_at(g, i, err, PP_EINVAL, "input split must be positive");
        for (int64_t d = 0; d < dim; d += chunk) {
            if (cnt == PP_MAX_OUTPUTS) return fail_at(g, i, err, PP_EUNSUP, too_many);
            sizes[cnt++] = dim - d < chunk ? dim - d : chunk;
        }
    } else {
        const pp_value *sp = &g->values[n->in[1]];
        if (!sp->is_const)
            return fail_at(g, i, err, PP_EUNSUP, "input split is not known at compile time");
        pp_tinfo t = {sp->dtype, sp->shape, sp->data};
        PP_TRY(pp_value_align(g, n->in[1], err));
        t.data = g->values[n->in[1]].data;
        pp_err e = {0};
        if (pp_const_ints(&t, "input split", sizes, PP_MAX_OUTPUTS, &cnt, &e) != PP_OK)
            return fail_at(g, i, err, e.code, e.msg);
        int64_t sum = 0;
        for (int k = 0; k < cnt; k++) sum += sizes[k];
        if (sum != dim) {
            char msg[160];
            snprintf(msg, sizeof msg, "input split sums to %lld, but the axis has %lld",
                     (long long)sum, (long long)dim);
            return fail_at(g, i, err, PP_EINVAL, msg);
        }
    }
    const bool squeeze = !has_split && keep == 0;
    const int out = n->out[0];
    int elems[PP_MAX_OUTPUTS];
    int self = i, at = i;
    if (cnt > 0) {
        char name[512];
        snprintf(name, sizeof name, "%s/Split", g->nodes[i].name);
        const bool as_input = g->opset >= 13;
        int c = -1, ni;
        if (as_input) PP_TRY(pp_graph_add_ints(g, name, sizes, cnt, &c, err));
        PP_TRY(insert(g, &at, &self, PP_OP_SPLIT, name, as_input ? 2 : 1, cnt, &ni, err));
        pp_attr *a = attrs_new(g, 2);
        if (!a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        a[0] = attr_int("axis", axis);
        if (!as_input) PP_TRY(attr_ints(g, "split", sizes, cnt, &a[1], err));
        pp_node *sn = &g->nodes[ni];
        sn->in[0] = g->nodes[self].in[0];
        if (as_input) sn->in[1] = c;
        sn->attrs = a, sn->n_attrs = as_input ? 1 : 2;
        for (int k = 0; k < cnt; k++) {
            char vn[512];
            snprintf(vn, sizeof vn, "%s/%d", g->values[out].name, k);
            PP_TRY(new_value(g, vn, &elems[k], err));
            g->nodes[ni].out[k] = elems[k];
        }
        for (int k = 0; k < cnt && squeeze; k++)
            PP_TRY(squeeze_op(g, &at, &self, false, elems[k], axis, g->values[elems[k]].name,
                              &elems[k], err));
    }
    PP_TRY(set_seq(g, out, elems, cnt, dt, err));
    g->nodes[self].dead = true;
    return PP_OK;
}

static pp_status concat_from_sequence(pp_graph *g, int i, pp_err *err) {
    const pp_value *s = NULL;
    PP_TRY(get_seq(g, i, g->nodes[i].in[0], &s, err));
    int64_t axis, new_axis;
    PP_TRY(pp_attr_int(pp_node_attrs(g, &g->nodes[i]), "axis", 0, &axis, err));
    PP_TRY(pp_attr_int(pp_node_attrs(g, &g->nodes[i]), "new_axis", 0, &new_axis, err));
    if (new_axis != 0 && new_axis != 1)
        return fail_at(g, i, err, PP_EINVAL, "attribute 'new_axis' must be 0 or 1");
    const int cnt = s->n_seq;
    if (cnt == 0) return fail_at(g, i, err, PP_EUNSUP, "the sequence is empty: no shape to concatenate");
    if (cnt > PP_MAX_INPUTS) return fail_at(g, i, err, PP_EUNSUP, "more than 1024 elements");
    int *parts = malloc((size_t)cnt * sizeof *parts);
    if (!parts) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(parts, s->seq, (size_t)cnt * sizeof *parts);
    pp_status st = PP_OK;
    int self = i, at = i;
    for (int k = 0; k < cnt && new_axis && st == PP_OK; k++)
        st = squeeze_op(g, &at, &self, true, parts[k], axis, g->values[g->nodes[self].out[0]].name,
                        &parts[k], err);
    pp_attr *a = st == PP_OK ? attrs_new(g, 1) : NULL;
    if (st == PP_OK && !a) st = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (st == PP_OK) {
        a[0] = attr_int("axis", axis);
        st = become(g, self, PP_OP_CONCAT, parts, cnt, a, 1, err);
    }
    free(parts);
    return st;
}

/* ---- the entry point --------------------------------------------------------------------- */

pp_status pp_unroll_node(pp_graph *g, int i, size_t *added, pp_err *err) {
    pp_node *n = &g->nodes[i];
    const pp_value *s = NULL;
    int64_t pos = 0;
    switch (n->op) {
    case PP_OP_LOOP: return unroll_loop(g, i, added, err);
    case PP_OP_IF: return unroll_if(g, i, added, err);
    case PP_OP_SPLITTOSEQUENCE: return split_to_sequence(g, i, err);
    case PP_OP_CONCATFROMSEQUENCE: return concat_from_sequence(g, i, err);
    case PP_OP_SEQUENCEEMPTY: {
        int64_t dt;
        PP_TRY(pp_attr_int(pp_node_attrs(g, n), "dtype", PP_F32, &dt, err));
        if (dt < 1 || dt > PP_I2 || pp_dtype_bits((pp_dtype)dt) == 0)
            return fail_at(g, i, err, PP_EUNSUP, "attribute 'dtype' is not a supported type");
        PP_TRY(set_seq(g, n->out[0], NULL, 0, (pp_dtype)dt, err));
        g->nodes[i].dead = true;
        return PP_OK;
    }
    case PP_OP_SEQUENCECONSTRUCT:
        for (int k = 0; k < n->n_in; k++) {
            const pp_value *v = &g->values[n->in[k]];
            if (v->is_seq || v->dtype != g->values[n->in[0]].dtype)
                return fail_at(g, i, err, PP_EINVAL, "its inputs must be tensors of one element type");
        }
        PP_TRY(set_seq(g, n->out[0], n->in, n->n_in, g->values[n->in[0]].dtype, err));
        g->nodes[i].dead = true;
        return PP_OK;
    case PP_OP_SEQUENCEINSERT: {
        PP_TRY(get_seq(g, i, n->in[0], &s, err));
        const pp_value *t = &g->values[n->in[1]];
        if (t->is_seq || (s->n_seq && t->dtype != s->dtype))
            return fail_at(g, i, err, PP_EINVAL, "the tensor's element type is not the sequence's");
        PP_TRY(seq_pos(g, i, n->n_in > 2 ? n->in[2] : -1, s->n_seq, s->n_seq, true, &pos, err));
        n = &g->nodes[i];
        s = &g->values[n->in[0]];
        int *e = malloc((size_t)(s->n_seq + 1) * sizeof *e);
        if (!e) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        memcpy(e, s->seq, (size_t)pos * sizeof *e);
        e[pos] = n->in[1];
        memcpy(e + pos + 1, s->seq + pos, (size_t)(s->n_seq - pos) * sizeof *e);
        pp_status st = set_seq(g, n->out[0], e, s->n_seq + 1, g->values[n->in[1]].dtype, err);
        free(e);
        g->nodes[i].dead = true;
        return st;
    }
    case PP_OP_SEQUENCEERASE: {
        PP_TRY(get_seq(g, i, n->in[0], &s, err));
        if (s->n_seq == 0) return fail_at(g, i, err, PP_EINVAL, "the sequence is empty");
        PP_TRY(seq_pos(g, i, n->n_in > 1 ? n->in[1] : -1, -1, s->n_seq, false, &pos, err));
        n = &g->nodes[i];
        s = &g->values[n->in[0]];
        int *e = malloc((size_t)s->n_seq * sizeof *e);
        if (!e) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        memcpy(e, s->seq, (size_t)pos * sizeof *e);
        memcpy(e + pos, s->seq + pos + 1, (size_t)(s->n_seq - pos - 1) * sizeof *e);
        pp_status st = set_seq(g, n->out[0], e, s->n_seq - 1, s->dtype, err);
        free(e);
        g->nodes[i].dead = true;
        return st;
    }
    case PP_OP_SEQUENCEAT: {
        PP_TRY(get_seq(g, i, n->in[0], &s, err));
        PP_TRY(seq_pos(g, i, n->in[1], 0, s->n_seq, false, &pos, err));
        const int elem = g->values[g->nodes[i].in[0]].seq[pos];
        return become(g, i, PP_OP_IDENTITY, &elem, 1, NULL, 0, err);
    }
    case PP_OP_SEQUENCELENGTH: {
        PP_TRY(get_seq(g, i, n->in[0], &s, err));
        int64_t len = s->n_seq;
        int c;
        char hint[512];
        snprintf(hint, sizeof hint, "%s/length", n->name);
        PP_TRY(scalar_i64(g, hint, len, &c, err));
        return become(g, i, PP_OP_IDENTITY, &c, 1, NULL, 0, err);
    }
    case PP_OP_IDENTITY: /* of a sequence: the same sequence */
        PP_TRY(get_seq(g, i, n->in[0], &s, err));
        PP_TRY(set_seq(g, n->out[0], s->seq, s->n_seq, s->dtype, err));
        g->nodes[i].dead = true;
        return PP_OK;
    default: {
        char msg[512];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && g->values[n->in[k]].is_seq) {
                snprintf(msg, sizeof msg, "input '%s' is a sequence; only the sequence ops take "
                         "one", g->values[n->in[k]].name);
                return fail_at(g, i, err, PP_EUNSUP, msg);
            }
        return fail_at(g, i, err, PP_EINVAL, "not a control flow or sequence op");
    }
    }
}
