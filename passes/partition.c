/* partition.c: assign every node to a stage. Stages are contiguous ranges of
 * the (topological) node order, so every node lands in exactly one stage and
 * data only flows forward. Policy `uniform`: equal op counts (the first
 * n % P stages take one op more). */
#include "passes.h"

pp_status pp_partition(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    int p = o->n_stages;
    if (p < 1) return PP_FAIL(err, PP_EINVAL, "-pp must be at least 1, got %d", p);
    if (p > g->n_nodes)
        return PP_FAIL(err, PP_EINVAL,
                       "-pp %d asks for more stages than the graph has ops (%d): a stage would be "
                       "empty",
                       p, g->n_nodes);
    switch (o->policy) {
    case PP_POLICY_UNIFORM:
        for (int i = 0; i < g->n_nodes; i++)
            g->nodes[i].stage = (int)((int64_t)i * p / g->n_nodes);
        break;
    default:
        return PP_FAIL(err, PP_EUNSUP, "unknown partitioning policy %d", (int)o->policy);
    }
    g->n_stages = p;
    return PP_OK;
}
