/* boundary.c: the values that cross each cut. Boundary i (0 <= i < P-1)
 * holds every non-constant value available in stages <= i (graph inputs count
 * as stage -1) that a node of a stage > i consumes, or that is a graph output
 * (in a training plan, less what a device keeps for its own backward: the
 * stash, below; and less the outputs a backward stage makes that no later
 * stage reads, its device's weight gradients: they leave the pipeline at
 * that stage, `local`, and lower.c lists them after its send list).
 * Skip connections therefore pass through intermediate stages unchanged.
 * Values are listed in value-index order, which is deterministic. */
#include "passes.h"

#include <stdlib.h>

int pp_value_def_stage(const pp_graph *g, int v) {
    const pp_value *val = &g->values[v];
    if (val->is_const) return -2;
    if (val->producer < 0) return -1;
    return g->nodes[val->producer].stage;
}

/* A training plan (passes/partition_train.c): a value that device d's
 * backward stage 2P-1-d reads and its forward stage d already has (made
 * there, or received) stays on the device, in its stash: it counts as read
 * at stage d, and d's stash lists it (lower.c appends the stash to stage d's
 * send list and to stage 2P-1-d's recv list). */
static int stash_use(pp_graph *g, int v, int u, bool *stashed) {
    const int P = g->train_devices, a = pp_value_def_stage(g, v);
    *stashed = false;
    if (!P || u < P || a >= P) return u;
    const int d = 2 * P - 1 - u;
    if (a > d) return u;
    *stashed = true;
    return d;
}

static pp_status add_to(pp_boundary *st, const pp_graph *g, int v, pp_err *err) {
    for (int i = 0; i < st->n; i++)
        if (st->vals[i] == v) return PP_OK;
    int *nv = realloc(st->vals, sizeof(int) * (size_t)(st->n + 1));
    if (!nv) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    st->vals = nv;
    st->vals[st->n++] = v;
    st->bytes += g->values[v].nbytes;
    return PP_OK;
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

pp_status pp_boundaries(pp_graph *g, pp_err *err) {
    int p = g->n_stages;
    int *last = malloc(sizeof(int) * pp_count(g->n_values));
    if (!last) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (g->train_devices && (!(g->stash = calloc((size_t)g->train_devices, sizeof *g->stash)) ||
                             !(g->local = calloc((size_t)g->train_devices, sizeof *g->local)) ||
                             !(g->wkeep = calloc((size_t)g->train_devices, sizeof *g->wkeep)))) {
        free(last);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) last[v] = -3;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0 || g->values[v].is_const) continue;
            bool stashed;
            const int u = stash_use(g, v, g->nodes[i].stage, &stashed);
            /* zb-h1: what a W node reads that W does not make, B keeps for it */
            const int pr = g->values[v].producer, st = g->nodes[i].stage;
            const bool wkeep = g->nodes[i].wpass && !(pr >= 0 && g->nodes[pr].wpass && g->nodes[pr].stage == st);
            if (wkeep) {
                pp_status s = add_to(&g->wkeep[2 * g->train_devices - 1 - st], g, v, err);
                if (s != PP_OK) {
                    free(last);
                    return s;
                }
            }
            if (stashed) {
                pp_status s = add_to(&g->stash[u], g, v, err);
                if (s != PP_OK) {
                    free(last);
                    return s;
                }
            }
            if (u > last[v]) last[v] = u;
        }
    for (int d = 0; d < g->train_devices; d++) { /* value order, as the boundaries */
        if (g->stash[d].n > 1) qsort(g->stash[d].vals, (size_t)g->stash[d].n, sizeof(int), cmp_int);
        if (g->wkeep[d].n > 1) qsort(g->wkeep[d].vals, (size_t)g->wkeep[d].n, sizeof(int), cmp_int);
    }
    for (int k = 0; k < g->n_outputs; k++) { /* leaves the last stage, or its own backward stage */
        const int v = g->outputs[k], P = g->train_devices, u = pp_value_def_stage(g, v);
        if (P && u >= P && last[v] <= u) {
            pp_status s = add_to(&g->local[2 * P - 1 - u], g, v, err);
            if (s != PP_OK) {
                free(last);
                return s;
            }
        } else last[v] = p;
    }
    g->bounds = calloc((size_t)(p > 1 ? p - 1 : 1), sizeof *g->bounds);
    if (!g->bounds) {
        free(last);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int b = 0; b < p - 1; b++) {
        pp_boundary *bd = &g->bounds[b];
        for (int pass = 0; pass < 2; pass++) { /* count, then fill */
            int n = 0;
            for (int v = 0; v < g->n_values; v++) {
                int def = pp_value_def_stage(g, v);
                if (def == -2 || def > b || last[v] <= b) continue;
                if (pass) {
                    bd->vals[n] = v;
                    bd->bytes += g->values[v].nbytes;
                }
                n++;
            }
            if (!pass) {
                bd->vals = malloc(sizeof(int) * pp_count(n));
                if (!bd->vals) {
                    free(last);
                    return PP_FAIL(err, PP_ENOMEM, "out of memory");
                }
            }
            bd->n = n;
        }
    }
    free(last);
    return PP_OK;
}
