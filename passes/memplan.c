/* memplan.c: activation memory per stage. Every value a stage produces and
 * does not hand on (boundary-out values live in the outgoing message) gets an
 * offset in the stage's one arena. Lifetimes are [producing node, last
 * consuming node] in node order; two values may share bytes only when their
 * lifetimes do not overlap. Placement (ir/pack.h, best fit): largest first,
 * each into the smallest gap between already placed, lifetime-overlapping
 * buffers that fits it, else after the highest of them. Offsets and sizes
 * are 64-byte aligned. */
#include "passes.h"

#include <stdlib.h>

#include "../ir/pack.h"

#define ALIGN 64

/* Nodes first..last (inclusive) form stage s; leaves[v] == s + 1 marks the
 * values that leave it (its outgoing boundary, or the graph outputs). */
static pp_status plan_stage(pp_graph *g, int s, int first, int last, const int *leaves, int *slot, pp_err *err) {
    int cap = 0;
    for (int i = first; i <= last; i++) cap += g->nodes[i].n_out;
    pp_pack_item *bufs = calloc(pp_count(cap), sizeof *bufs);
    int *val = malloc(sizeof(int) * pp_count(cap));
    if (!bufs || !val) {
        free(bufs), free(val);
        return PP_FAIL(err, PP_ENOMEM, "out of memory in memory planning");
    }
    int n = 0;
    for (int i = first; i <= last; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int v = g->nodes[i].out[k];
            if (v < 0) continue;
            const pp_value *pv = &g->values[v];
            if (pv->is_const || pv->producer != i || leaves[v] == s + 1 || slot[v] >= 0) continue;
            slot[v] = n;
            val[n] = v;
            bufs[n++] = (pp_pack_item){.start = i, .end = i, .size = pp_align_up(pv->nbytes, ALIGN), .key = v};
        }
    /* lifetime ends at the last consumer inside the stage */
    for (int i = first; i <= last; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && slot[v] >= 0 && i > bufs[slot[v]].end) bufs[slot[v]].end = i;
        }
    for (int j = 0; j < n; j++) slot[val[j]] = -1; /* ready for the next stage */
    size_t arena;
    pp_status st = pp_pack(bufs, n, ALIGN, PP_PACK_BEST_FIT, &arena, err);
    if (st == PP_OK) {
        for (int j = 0; j < n; j++) g->values[val[j]].arena_off = (int64_t)bufs[j].off;
        g->stage_arena[s] = arena;
    }
    free(bufs);
    free(val);
    return st;
}

pp_status pp_memplan(pp_graph *g, pp_err *err) {
    free(g->stage_arena);
    g->stage_arena = calloc((size_t)g->n_stages, sizeof *g->stage_arena);
    int *leaves = malloc(sizeof(int) * pp_count(g->n_values)), *slot = malloc(sizeof(int) * pp_count(g->n_values));
    if (!g->stage_arena || !leaves || !slot) {
        free(leaves), free(slot);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) g->values[v].arena_off = -1, leaves[v] = 0, slot[v] = -1;
    for (int s = 0; s < g->n_stages - 1; s++)
        for (int i = 0; i < g->bounds[s].n; i++)
            if (pp_value_def_stage(g, g->bounds[s].vals[i]) == s) leaves[g->bounds[s].vals[i]] = s + 1;
    for (int d = 0; g->stash && d < g->train_devices; d++) /* kept for the device's backward: in the message */
        for (int i = 0; i < g->stash[d].n; i++)
            if (pp_value_def_stage(g, g->stash[d].vals[i]) == d) leaves[g->stash[d].vals[i]] = d + 1;
    for (int d = 0; g->wkeep && d < g->train_devices; d++) /* kept by B for its W: in B's message */
        for (int i = 0; i < g->wkeep[d].n; i++)
            if (pp_value_def_stage(g, g->wkeep[d].vals[i]) == 2 * g->train_devices - 1 - d)
                leaves[g->wkeep[d].vals[i]] = 2 * g->train_devices - d;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->values[g->outputs[k]].producer >= 0)
            leaves[g->outputs[k]] = g->nodes[g->values[g->outputs[k]].producer].stage + 1;
    pp_status st = PP_OK;
    /* stages are contiguous ranges of the node order */
    for (int s = 0, i = 0; s < g->n_stages && st == PP_OK; s++) {
        int first = i;
        while (i < g->n_nodes && g->nodes[i].stage == s) i++;
        st = plan_stage(g, s, first, i - 1, leaves, slot, err);
    }
    free(leaves), free(slot);
    return st;
}
