/* memplan.c: activation memory per stage. Every value a stage produces and
 * does not hand on (boundary-out values live in the outgoing message) gets an
 * offset in the stage's one arena. Lifetimes are [producing node, last
 * consuming node] in node order; two values may share bytes only when their
 * lifetimes do not overlap. Placement: largest first, each into the smallest
 * gap between already placed, lifetime-overlapping buffers that fits it (best
 * fit), else after the highest of them. Offsets are 64-byte aligned. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64

typedef struct {
    int v;
    int start, end; /* node indices, inclusive */
    size_t size;
    size_t off;
} buf_t;

static int by_size_desc(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->v - y->v; /* deterministic tie-break */
}

static int by_off(const void *a, const void *b) {
    const buf_t *x = *(buf_t *const *)a, *y = *(buf_t *const *)b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->v - y->v;
}

/* true when v leaves stage s through its outgoing boundary (or is a graph output) */
static bool leaves_stage(const pp_graph *g, int s, int v) {
    if (s < g->n_stages - 1) {
        const pp_boundary *b = &g->bounds[s];
        for (int i = 0; i < b->n; i++)
            if (b->vals[i] == v) return true;
        return false;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

static pp_status plan_stage(pp_graph *g, int s, pp_err *err) {
    int n = 0;
    buf_t *bufs = calloc(pp_count(g->n_values), sizeof *bufs);
    buf_t **live = calloc(pp_count(g->n_values), sizeof *live);
    if (!bufs || !live) {
        free(bufs);
        free(live);
        return PP_FAIL(err, PP_ENOMEM, "out of memory in memory planning");
    }
    for (int v = 0; v < g->n_values; v++) {
        const pp_value *val = &g->values[v];
        if (val->is_const || val->producer < 0 || g->nodes[val->producer].stage != s) continue;
        if (leaves_stage(g, s, v)) continue;
        bufs[n] = (buf_t){v, val->producer, val->producer, pp_align_up(val->nbytes, ALIGN), 0};
        n++;
    }
    /* lifetime ends at the last consumer inside the stage */
    int *slot = malloc(sizeof(int) * pp_count(g->n_values));
    if (!slot) {
        free(bufs);
        free(live);
        return PP_FAIL(err, PP_ENOMEM, "out of memory in memory planning");
    }
    for (int v = 0; v < g->n_values; v++) slot[v] = -1;
    for (int j = 0; j < n; j++) slot[bufs[j].v] = j;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].stage != s) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && slot[v] >= 0 && i > bufs[slot[v]].end) bufs[slot[v]].end = i;
        }
    }
    free(slot);
    qsort(bufs, (size_t)n, sizeof *bufs, by_size_desc);
    size_t arena = 0;
    for (int j = 0; j < n; j++) {
        int nl = 0;
        for (int k = 0; k < j; k++)
            if (bufs[k].start <= bufs[j].end && bufs[j].start <= bufs[k].end) live[nl++] = &bufs[k];
        qsort(live, (size_t)nl, sizeof *live, by_off);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
        for (int k = 0; k < nl; k++) {
            if (live[k]->off > cursor) {
                size_t gap = live[k]->off - cursor;
                if (gap >= bufs[j].size && gap < best_gap) best = cursor, best_gap = gap;
            }
            size_t end = live[k]->off + live[k]->size;
            if (end > cursor) cursor = end;
        }
        bufs[j].off = best != SIZE_MAX ? best : cursor;
        size_t top;
        if (pp_add_ovf(bufs[j].off, bufs[j].size, &top))
            return free(bufs), free(live), PP_FAIL(err, PP_EINVAL, "arena size overflows");
        if (top > arena) arena = top;
        g->values[bufs[j].v].arena_off = (int64_t)bufs[j].off;
    }
    g->stage_arena[s] = arena;
    free(bufs);
    free(live);
    return PP_OK;
}

pp_status pp_memplan(pp_graph *g, pp_err *err) {
    free(g->stage_arena);
    g->stage_arena = calloc((size_t)g->n_stages, sizeof *g->stage_arena);
    if (!g->stage_arena) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) g->values[v].arena_off = -1;
    for (int s = 0; s < g->n_stages; s++) PP_TRY(plan_stage(g, s, err));
    return PP_OK;
}
