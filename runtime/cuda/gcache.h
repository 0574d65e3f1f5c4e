/* gcache.h: a stage's CUDA graphs, one per pair of message buffers (plain
 * C, shared by the engine, exec_cuda.c, and the emulator, emu.c, which
 * keeps the same cache with no graph in it, so CI counts the captures a GPU
 * would make).
 *
 * A graph bakes in the addresses of the incoming and outgoing messages. The
 * links circulate a fixed set of buffers on each side (their --depth, a
 * few more for copy links), and a stage meets pairs of them in a cycle
 * whose length can reach the product of the two counts (the least common
 * multiple of the ring sizes): 16 pairs at --depth 4 or 5 on both sides,
 * more beyond. A cache of a fixed 16 graphs (before issue 57) then evicted
 * every graph before its pair came back, and every micro-batch captured
 * again. This one is sized from the buffers seen: it holds up to (distinct
 * incoming buffers) x (distinct outgoing ones) graphs, PCU_GRAPHS_MAX at
 * most, so once every buffer has been seen no graph is evicted and no
 * micro-batch captures again; past PCU_GRAPHS_MAX the least recently used
 * goes. Captures, replays and evictions are counted (pprt --stats-json,
 * "cuda_graph_captures"). */
#ifndef PPRT_CUDA_GCACHE_H
#define PPRT_CUDA_GCACHE_H

#include <stdint.h>
#include <stdlib.h>

#define PCU_GRAPHS_MAX 4096 /* graphs kept per stage at most (the product of 64 buffers a side) */
#define PCU_GRAPH_BUFS 64   /* distinct buffers per side tracked (more: the cache stays at PCU_GRAPHS_MAX) */

typedef struct pcu_gentry {
    const void *in;
    const void *out;
    void *graph; /* the engine's cudaGraphExec_t; the emulator's a marker */
    uint64_t used;
} pcu_gentry;

typedef struct pcu_gcache {
    pcu_gentry *e;
    int n, cap_alloc;
    const void *ins[PCU_GRAPH_BUFS], *outs[PCU_GRAPH_BUFS];
    int n_in, n_out;
    uint64_t clock;
    long captures, replays, evictions;
} pcu_gcache;

static inline void pcu_gcache_note(const void **set, int *n, const void *p) {
    for (int i = 0; i < *n; i++)
        if (set[i] == p) return;
    if (*n < PCU_GRAPH_BUFS) set[(*n)++] = p;
}

/* How many graphs the cache holds now: every pair of the buffers seen. */
static inline int pcu_gcache_cap(const pcu_gcache *c) {
    const long want = (long)(c->n_in > 0 ? c->n_in : 1) * (c->n_out > 0 ? c->n_out : 1);
    return c->n_in >= PCU_GRAPH_BUFS || c->n_out >= PCU_GRAPH_BUFS || want > PCU_GRAPHS_MAX ? PCU_GRAPHS_MAX
                                                                                            : (int)want;
}

/* The graph of this pair (counted as a replay), or NULL (the caller
 * captures one and puts it). Notes both buffers either way. */
static inline void *pcu_gcache_find(pcu_gcache *c, const void *in, const void *out) {
    pcu_gcache_note(c->ins, &c->n_in, in);
    pcu_gcache_note(c->outs, &c->n_out, out);
    for (int i = 0; i < c->n; i++)
        if (c->e[i].in == in && c->e[i].out == out) {
            c->e[i].used = ++c->clock;
            c->replays++;
            return c->e[i].graph;
        }
    return NULL;
}

/* Keep a new capture of this pair. When the cache is at its size the least
 * recently used graph goes: *evicted is it (the caller destroys it), else
 * NULL. Returns 0, or -1 out of memory (the graph is then not kept: *evicted
 * is the new graph, for the caller to destroy after running it). */
static inline int pcu_gcache_put(pcu_gcache *c, const void *in, const void *out, void *graph, void **evicted) {
    *evicted = NULL;
    c->captures++;
    const int cap = pcu_gcache_cap(c);
    int k = -1;
    if (c->n >= cap) {
        k = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[k].used) k = i;
        *evicted = c->e[k].graph;
        c->evictions++;
    } else {
        if (c->n == c->cap_alloc) {
            const int m = c->cap_alloc ? 2 * c->cap_alloc : 16;
            pcu_gentry *e = realloc(c->e, (size_t)m * sizeof *e);
            if (!e) {
                *evicted = graph;
                return -1;
            }
            c->e = e, c->cap_alloc = m;
        }
        k = c->n++;
    }
    c->e[k] = (pcu_gentry){in, out, graph, ++c->clock};
    return 0;
}

/* Hand every graph to `destroy`, then forget them. */
static inline void pcu_gcache_free(pcu_gcache *c, void (*destroy)(void *graph)) {
    for (int i = 0; destroy && i < c->n; i++) destroy(c->e[i].graph);
    free(c->e);
    c->e = NULL;
    c->n = c->cap_alloc = 0;
}

#endif
