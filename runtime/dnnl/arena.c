/* arena.c: the oneDNN executor's own arena for the activations, planned once
 * every node is built: from when each is actually written (early, for an
 * absorbed node's output; never, for what an absorbed node read) to its last
 * reader, at its size in its layout. */
#include <stdlib.h>

#include "../../ir/pack.h"
#include "dnnl_exec.h"
#include "../pool.h"

/* The arena: every activation gets its bytes for the nodes from its birth
 * to its last reader (absorbed intermediates get none); an output that
 * takes over a residual's bytes shares them, the group living from the
 * first birth to the last reading of any member. The groups are packed by
 * ir/pack.h, largest first (equal sizes: the earlier born, then the lower
 * tensor id), each at the lowest 64-aligned offset clear of the groups
 * placed so far whose lifetimes meet its own. Sets ptr[] and every
 * activation memory's handle. */
pp_status dn_plan_arena(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    const int n = st->n_tensors;
    pp_pack_item *g = calloc(pp_count(n), sizeof *g), *packed = calloc(pp_count(n), sizeof *packed);
    int *root = malloc(pp_count(n) * sizeof *root), *slot = malloc(pp_count(n) * sizeof *slot);
    pp_status r = PP_OK;
    if (!g || !packed || !root || !slot) {
        r = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    for (int t = 0; t < n; t++) {
        int q = t;
        for (int hops = 0; x->tn.alias[q] >= 0 && hops < n; hops++) q = x->tn.alias[q];
        root[t] = q;
        g[t] = (pp_pack_item){.start = -1, .end = -2};
    }
    for (int t = 0; t < n; t++) {
        if (x->tn.kind[t] != PPRT_ACTIVATION || x->tn.ghost[t]) continue;
        pp_pack_item *G = &g[root[t]];
        const int b = x->tn.born[t], e = x->tn.last[t] > b ? x->tn.last[t] : b;
        if (G->end < G->start) *G = (pp_pack_item){.start = b, .end = e};
        if (b < G->start) G->start = b;
        if (e > G->end) G->end = e;
        if (x->tn.need[t] > G->size) G->size = x->tn.need[t];
    }
    int ng = 0;
    for (int t = 0; t < n; t++) {
        if (root[t] != t || g[t].end < g[t].start) continue;
        slot[t] = ng;
        packed[ng] = g[t];
        packed[ng++].key = ((int64_t)g[t].start + 1) * ((int64_t)n + 1) + t;
    }
    size_t total;
    if ((r = pp_pack(packed, ng, 64, PP_PACK_FIRST_FIT, &total, err)) != PP_OK) goto out;
    void *arena = pprt_pool_alloc(total);
    if (!arena) {
        r = PP_FAIL(err, PP_ENOMEM, "cannot allocate a %zu-byte arena", total);
        goto out;
    }
    x->arena = arena;
    x->bytes.arena = total;
    for (int t = 0; t < n; t++) {
        if (x->tn.kind[t] != PPRT_ACTIVATION) continue;
        const int q = root[t];
        x->ptr[t] = x->tn.ghost[t] || g[q].end < g[q].start ? NULL : x->arena + packed[slot[q]].off;
    }
    for (int i = 0; i < x->abinds.n && r == PP_OK; i++) {
        dnnl_status_t ds = dnnl_memory_set_data_handle(x->abinds.a[i].m, x->ptr[x->abinds.a[i].tid]);
        if (ds != dnnl_success) r = dn_fail(err, "memory", ds);
    }
out:
    free(g);
    free(packed);
    free(root);
    free(slot);
    return r;
}
