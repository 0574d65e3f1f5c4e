/* fold.c: shape inference with constant folding, in one sweep over the
 * nodes: each node's shapes are inferred, then, if its inputs are all
 * constants, it is run once, here, with the reference kernels, and its
 * outputs become constants (so a later Reshape sees its shape as a constant);
 * Shape and Size of a value whose shape is static fold without running
 * anything. Control flow and sequence ops are unrolled as the sweep meets
 * them (unroll.c), so the nodes they become are inferred and folded too. This turns the Shape -> Gather -> Unsqueeze -> Concat -> Reshape
 * chains exporters emit into plain constants.
 *
 * Bounded in memory: an output above PP_FOLD_MAX_OUTPUT bytes is not folded
 * (a crafted ConstantOfShape cannot make the compiler allocate gigabytes),
 * nor is anything once PP_FOLD_MAX_TOTAL bytes have been folded. Bounded in
 * time: each fold's work is estimated from the cost model before it runs
 * (its FLOPs, or an Einsum's terms, plus the bytes it touches), and one above
 * PP_FOLD_MAX_WORK operations, or any once PP_FOLD_MAX_WORK_TOTAL have been
 * spent, is left to run time and marked (pp_node.fold_skipped; the IR dump
 * says "unfolded=...", ppcc prints a note). The reference kernels run about
 * 0.5-5 G such operations a second, so folding costs seconds at most: a
 * constant Einsum abcdef,ghijkl-> of 10^12 terms used to fold for minutes. */
#include <stdlib.h>
#include <string.h>

#include "../runtime/kernels.h"
#include "passes.h"

#define PP_FOLD_MAX_OUTPUT ((size_t)64 << 20)
#define PP_FOLD_MAX_TOTAL ((size_t)1 << 30)
#define PP_FOLD_MAX_WORK 1e9
#define PP_FOLD_MAX_WORK_TOTAL 4e9

/* Shape / Size of a static shape. */
static pp_status fold_shape_op(pp_graph *g, int i, bool *done, pp_err *err) {
    pp_node *n = &g->nodes[i];
    const pp_value *x = &g->values[n->in[0]];
    int v;
    if (n->op == PP_OP_SIZE) {
        int64_t cnt;
        PP_TRY(pp_shape_numel(&x->shape, &cnt, err));
        pp_shape sh = {0, {0}};
        PP_TRY(pp_graph_add_const(g, g->values[n->out[0]].name, PP_I64, &sh, &cnt, &v, err));
    } else {
        int64_t start = 0, end = x->shape.rank, r = x->shape.rank;
        PP_TRY(pp_attr_int(pp_node_attrs(g, n), "start", 0, &start, err));
        PP_TRY(pp_attr_int(pp_node_attrs(g, n), "end", r, &end, err));
        if (start < 0) start += r;
        if (end < 0) end += r;
        start = start < 0 ? 0 : start > r ? r : start;
        end = end < 0 ? 0 : end > r ? r : end;
        int64_t dims[PP_MAX_DIMS];
        int cnt = 0;
        for (int64_t d = start; d < end; d++) dims[cnt++] = x->shape.dim[d];
        pp_shape sh = {1, {cnt}};
        PP_TRY(pp_graph_add_const(g, g->values[n->out[0]].name, PP_I64, &sh, dims, &v, err));
    }
    n = &g->nodes[i]; /* add_const may have moved the value array, not the nodes */
    if (!pp_graph_is_output(g, n->out[0])) {
        if (!g->uses) PP_TRY(pp_graph_index_uses(g, err)); /* dropped by an unrolling */
        n = &g->nodes[i];
        pp_graph_replace_uses(g, n->out[0], v);
        n->dead = true;
        *done = true;
    }
    return PP_OK;
}

pp_status pp_fold(pp_graph *g, pp_err *err) {
    size_t total = 0;
    double work_total = 0;
    pprt_scratch scratch = {0};
    pp_status s = PP_OK;
    const pp_op shape_op = PP_OP_SHAPE, size_op = PP_OP_SIZE;
    s = pp_graph_index_uses(g, err); /* replace_uses then visits only the readers */
    size_t added = 0;
    for (int i = 0; i < g->n_nodes && s == PP_OK; i++) {
        if (g->nodes[i].dead) continue;
        bool seq_in = false;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            seq_in |= g->nodes[i].in[k] >= 0 && g->values[g->nodes[i].in[k]].is_seq;
        if (pp_op_is_control(g->nodes[i].op) || seq_in) { /* unrolled here: look again */
            s = pp_unroll_node(g, i, &added, err);
            /* unrolling inserts nodes (moving the ones after them) and rewires
             * inputs: the use index would miss readers. It is dropped, and
             * built again only when a fold replaces a value: rebuilding it
             * after each unrolling cost O(nodes) per iteration (a nested Loop
             * seed took 11 s under the fuzzer's sanitizers) */
            pp_graph_drop_uses(g);
            i--;
            continue;
        }
        if ((s = pp_node_infer(g, i, err)) != PP_OK) break;
        pp_node *n = &g->nodes[i];
        bool folded = false;
        if (n->op == shape_op || n->op == size_op) {
            s = fold_shape_op(g, i, &folded, err);
            continue;
        }
        bool all_const = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !g->values[n->in[k]].is_const) all_const = false;
        if (!all_const || n->n_in == 0) continue;
        size_t need = 0;
        bool is_out = false;
        for (int k = 0; k < n->n_out; k++) {
            need += g->values[n->out[k]].nbytes;
            is_out |= pp_graph_is_output(g, n->out[k]);
        }
        /* a graph output must be computed by the plan (constants cannot be outputs) */
        if (is_out || need > PP_FOLD_MAX_OUTPUT || total + need > PP_FOLD_MAX_TOTAL) continue;
        double work = n->cost.flops + n->cost.bytes; /* pp_node_infer just set the cost */
        if (!(work <= PP_FOLD_MAX_WORK && work_total + work <= PP_FOLD_MAX_WORK_TOTAL)) {
            n->fold_skipped = work > 0 ? work : 1;
            continue;
        }
        work_total += work;
        pprt_tensor tin[PP_MAX_INPUTS], tout[PP_MAX_OUTPUTS];
        void *bufs[PP_MAX_OUTPUTS] = {0};
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) {
                tin[k] = (pprt_tensor){PP_UNDEFINED, {0, {0}}, NULL};
                continue;
            }
            if (s == PP_OK) s = pp_value_align(g, n->in[k], err); /* kernels read typed */
            const pp_value *v = &g->values[n->in[k]];
            tin[k] = (pprt_tensor){v->dtype, v->shape, (void *)v->data};
        }
        for (int k = 0; k < n->n_out && s == PP_OK; k++) {
            const pp_value *v = &g->values[n->out[k]];
            bufs[k] = pp_arena_alloc(&g->arena, v->nbytes ? v->nbytes : 1);
            if (!bufs[k]) s = PP_FAIL(err, PP_ENOMEM, "out of memory folding constants");
            tout[k] = (pprt_tensor){v->dtype, v->shape, bufs[k]};
        }
        if (s != PP_OK) break;
        pp_err e = {0};
        if (pprt_ref_kernels[n->op](pp_node_attrs(g, n), tin, n->n_in, tout, n->n_out, &scratch, &e) != PP_OK)
            continue; /* leave it to run time, which reports the error in context */
        for (int k = 0; k < n->n_out; k++) {
            pp_value *v = &g->values[n->out[k]];
            v->is_const = true;
            v->data = bufs[k];
            v->producer = -1;
        }
        total += need;
        n->dead = true;
        folded = true;
        (void)folded;
    }
    pprt_scratch_free(&scratch);
    if (s != PP_OK) return s;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->values[g->outputs[k]].is_seq)
            return PP_FAIL(err, PP_EUNSUP, "graph output '%s' is a sequence; only tensors can be "
                           "outputs", g->values[g->outputs[k]].name);
    pp_graph_compact(g);
    return PP_OK;
}
