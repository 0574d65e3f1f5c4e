/* pipeline.c: the pass list, as straight-line calls. With verify_each the IR
 * verifier runs after every pass that changes the graph, so a broken pass is
 * caught where it broke, not three passes later. */
#include "passes.h"

/* pprt cuts samples along dim 0: every output must carry the micro-batch
 * there too (inputs were checked at import). */
static pp_status check_batch(const pp_graph *g, pp_err *err) {
    if (g->batch == 0) return PP_OK;
    for (int i = 0; i < g->n_outputs; i++) {
        const pp_value *v = &g->values[g->outputs[i]];
        if (v->shape.rank < 1 || v->shape.dim[0] != g->batch)
            return PP_FAIL(err, PP_EINVAL,
                           "graph output '%s' does not carry the batch (%lld) on dim 0; compile "
                           "with -b 0 to run whole tensors without micro-batching",
                           v->name, (long long)g->batch);
    }
    return PP_OK;
}

pp_status pp_run_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    PP_TRY(pp_graph_verify(g, err));
    PP_TRY(pp_graph_infer(g, err));
    PP_TRY(check_batch(g, err));
    PP_TRY(pp_partition(g, o, err));
    PP_TRY(pp_boundaries(g, err));
    PP_TRY(pp_memplan(g, err));
    if (o->verify_each) PP_TRY(pp_graph_verify(g, err));
    return PP_OK;
}
