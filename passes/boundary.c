/* boundary.c: the values that cross each cut. Boundary i (0 <= i < P-1)
 * holds every non-constant value available in stages <= i (graph inputs count
 * as stage -1) that a node of a stage > i consumes, or that is a graph output.
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

pp_status pp_boundaries(pp_graph *g, pp_err *err) {
    int p = g->n_stages;
    int *last = malloc(sizeof(int) * pp_count(g->n_values));
    if (!last) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) last[v] = -3;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && g->nodes[i].stage > last[v]) last[v] = g->nodes[i].stage;
        }
    for (int k = 0; k < g->n_outputs; k++) last[g->outputs[k]] = p; /* leaves the last stage */
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
