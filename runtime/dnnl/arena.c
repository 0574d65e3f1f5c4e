/* arena.c: the oneDNN executor's own arena for the activations, planned once
 * every node is built: from when each is actually written (early, for an
 * absorbed node's output; never, for what an absorbed node read) to its last
 * reader, at its size in its layout. */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>

#include "dnnl_exec.h"

/* The arena: every activation gets its bytes for the nodes from its birth
 * to its last reader (absorbed intermediates get none); an output that
 * takes over a residual's bytes shares them, the group living from the
 * first birth to the last reading of any member. Groups are placed largest
 * first, each at the lowest 64-aligned offset clear of the groups placed so
 * far whose lifetimes meet its own. Sets ptr[] and every activation
 * memory's handle. */
typedef struct agroup {
    int start, end;
    size_t size, off;
} agroup;

static int by_size(const void *a, const void *b, void *g_) {
    const agroup *g = g_;
    const int i = *(const int *)a, j = *(const int *)b;
    if (g[i].size != g[j].size) return g[i].size < g[j].size ? 1 : -1;
    return g[i].start != g[j].start ? (g[i].start < g[j].start ? -1 : 1) : (i > j) - (i < j);
}

static int by_off(const void *a, const void *b, void *g_) {
    const agroup *g = g_;
    const size_t x = g[*(const int *)a].off, y = g[*(const int *)b].off;
    return (x > y) - (x < y);
}

pp_status dn_plan_arena(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    const int n = st->n_tensors;
    agroup *g = calloc(pp_count(n), sizeof *g);
    int *root = malloc(pp_count(n) * sizeof *root), *order = malloc(pp_count(n) * sizeof *order);
    int *live = malloc(pp_count(n) * sizeof *live);
    pp_status r = PP_OK;
    if (!g || !root || !order || !live) {
        r = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    int ng = 0;
    for (int t = 0; t < n; t++) {
        int q = t;
        for (int hops = 0; x->alias[q] >= 0 && hops < n; hops++) q = x->alias[q];
        root[t] = q;
        g[t] = (agroup){.start = -1, .end = -2};
    }
    for (int t = 0; t < n; t++) {
        if (x->kind[t] != PPRT_ACTIVATION || x->ghost[t]) continue;
        agroup *G = &g[root[t]];
        const int b = x->born[t], e = x->last[t] > b ? x->last[t] : b;
        if (G->end < G->start) *G = (agroup){.start = b, .end = e};
        if (b < G->start) G->start = b;
        if (e > G->end) G->end = e;
        if (x->need[t] > G->size) G->size = x->need[t];
    }
    for (int t = 0; t < n; t++)
        if (root[t] == t && g[t].end >= g[t].start) order[ng++] = t;
    qsort_r(order, (size_t)ng, sizeof *order, by_size, g);
    size_t total = 0;
    for (int k = 0; k < ng; k++) {
        agroup *G = &g[order[k]];
        int nl = 0;
        for (int j = 0; j < k; j++) {
            const agroup *H = &g[order[j]];
            if (H->start <= G->end && G->start <= H->end) live[nl++] = order[j];
        }
        qsort_r(live, (size_t)nl, sizeof *live, by_off, g);
        size_t off = 0;
        for (int j = 0; j < nl; j++) {
            const agroup *H = &g[live[j]];
            if (off + G->size <= H->off) break;
            if (H->off + H->size > off) off = pp_align_up(H->off + H->size, 64);
        }
        G->off = off;
        if (off + G->size > total) total = off + G->size;
    }
    void *arena = NULL;
    if (posix_memalign(&arena, 64, total ? total : 64) != 0) {
        r = PP_FAIL(err, PP_ENOMEM, "cannot allocate a %zu-byte arena", total);
        goto out;
    }
    x->arena = arena;
    x->arena_bytes = total;
    for (int t = 0; t < n; t++)
        if (x->kind[t] == PPRT_ACTIVATION)
            x->ptr[t] = x->ghost[t] || g[root[t]].end < g[root[t]].start ? NULL : x->arena + g[root[t]].off;
    for (int i = 0; i < x->n_abinds && r == PP_OK; i++) {
        dnnl_status_t ds = dnnl_memory_set_data_handle(x->abinds[i].m, x->ptr[x->abinds[i].tid]);
        if (ds != dnnl_success) r = dn_fail(err, "memory", ds);
    }
out:
    free(g);
    free(root);
    free(order);
    free(live);
    return r;
}
