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

/* Placed buffers by lifetime: a max-tree over the buffers in order of their
 * start, holding each placed buffer's end (-1: not placed yet). The placed
 * buffers whose lifetime meets [start, end] are those among the first `upto`
 * (start <= end) whose end is >= start: a descent that only enters subtrees
 * holding such an end, so its cost follows the number found. */
typedef struct {
    int size;
    int *tree;
} life_tree;

static void life_set(life_tree *t, int pos, int end) {
    int i = t->size + pos;
    t->tree[i] = end;
    for (i /= 2; i >= 1; i /= 2) t->tree[i] = t->tree[2 * i] > t->tree[2 * i + 1] ? t->tree[2 * i] : t->tree[2 * i + 1];
}

static void life_find(const life_tree *t, int node, int lo, int hi, int upto, int start, buf_t **by_start,
                      buf_t **out, int *n) {
    if (lo >= upto || t->tree[node] < start) return;
    if (hi - lo == 1) {
        out[(*n)++] = by_start[lo];
        return;
    }
    int mid = (lo + hi) / 2;
    life_find(t, 2 * node, lo, mid, upto, start, by_start, out, n);
    life_find(t, 2 * node + 1, mid, hi, upto, start, by_start, out, n);
}

static int by_start_then_v(const void *a, const void *b) {
    const buf_t *x = *(buf_t *const *)a, *y = *(buf_t *const *)b;
    return x->start != y->start ? (x->start > y->start) - (x->start < y->start) : x->v - y->v;
}

/* Nodes first..last (inclusive) form stage s; leaves[v] == s + 1 marks the
 * values that leave it (its outgoing boundary, or the graph outputs). */
static pp_status plan_stage(pp_graph *g, int s, int first, int last, const int *leaves, int *slot, pp_err *err) {
    int cap = 0;
    for (int i = first; i <= last; i++) cap += g->nodes[i].n_out;
    buf_t *bufs = calloc(pp_count(cap), sizeof *bufs);
    buf_t **live = calloc(pp_count(cap), sizeof *live), **by_start = calloc(pp_count(cap), sizeof *by_start);
    int size = 1;
    while (size < cap) size *= 2;
    life_tree lt = {size, malloc(sizeof(int) * 2 * (size_t)size)};
    int *pos = malloc(sizeof(int) * pp_count(cap));
    pp_status st = PP_OK;
    if (!bufs || !live || !by_start || !lt.tree || !pos) {
        st = PP_FAIL(err, PP_ENOMEM, "out of memory in memory planning");
        goto out;
    }
    int n = 0;
    for (int i = first; i <= last; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int v = g->nodes[i].out[k];
            const pp_value *val = &g->values[v];
            if (v < 0 || val->is_const || val->producer != i || leaves[v] == s + 1 || slot[v] >= 0) continue;
            slot[v] = n;
            bufs[n++] = (buf_t){v, i, i, pp_align_up(val->nbytes, ALIGN), 0};
        }
    /* lifetime ends at the last consumer inside the stage */
    for (int i = first; i <= last; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && slot[v] >= 0 && i > bufs[slot[v]].end) bufs[slot[v]].end = i;
        }
    for (int j = 0; j < n; j++) slot[bufs[j].v] = -1; /* ready for the next stage */
    qsort(bufs, (size_t)n, sizeof *bufs, by_size_desc);
    for (int j = 0; j < n; j++) by_start[j] = &bufs[j];
    qsort(by_start, (size_t)n, sizeof *by_start, by_start_then_v);
    for (int j = 0; j < n; j++) pos[by_start[j] - bufs] = j;
    for (int i = 0; i < 2 * size; i++) lt.tree[i] = -1;
    size_t arena = 0;
    for (int j = 0; j < n; j++) {
        /* the placed buffers whose lifetime overlaps this one's */
        int lo = 0, hi = n; /* upto: buffers starting at or before its end */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (by_start[mid]->start <= bufs[j].end) lo = mid + 1;
            else hi = mid;
        }
        int nl = 0;
        life_find(&lt, 1, 0, size, lo, bufs[j].start, by_start, live, &nl);
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
        if (pp_add_ovf(bufs[j].off, bufs[j].size, &top)) {
            st = PP_FAIL(err, PP_EINVAL, "arena size overflows");
            goto out;
        }
        if (top > arena) arena = top;
        g->values[bufs[j].v].arena_off = (int64_t)bufs[j].off;
        life_set(&lt, pos[j], bufs[j].end);
    }
    g->stage_arena[s] = arena;
out:
    free(bufs);
    free(live);
    free(by_start);
    free(lt.tree);
    free(pos);
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
