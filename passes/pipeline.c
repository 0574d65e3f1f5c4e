/* pipeline.c: the pass list, as straight-line calls. With verify_each the IR
 * verifier runs after every pass that changes the graph, so a broken pass is
 * caught where it broke, not three passes later. */
#include "passes.h"

pp_status pp_run_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    PP_TRY(pp_graph_verify(g, err));
    PP_TRY(pp_graph_infer(g, err));
    PP_TRY(pp_partition(g, o, err));
    PP_TRY(pp_boundaries(g, err));
    PP_TRY(pp_memplan(g, err));
    if (o->verify_each) PP_TRY(pp_graph_verify(g, err));
    return PP_OK;
}
