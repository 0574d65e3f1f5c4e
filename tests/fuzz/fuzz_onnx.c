/* fuzz_onnx.c: libFuzzer target for the ONNX importer and the passes behind
 * it. Any byte string must be imported and compiled into two stages, or
 * rejected with an error: no crash, leak, hang or undefined behaviour. */
#include <stddef.h>
#include <stdint.h>

#include "../../backend/backend.h"
#include "../../frontend/frontend.h"
#include "../../passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pp_graph g;
    pp_err err = {0};
    pp_import_opts io = {0};
    if (pp_import_onnx_mem(data, size, &io, &g, &err) != PP_OK) return 0;
    pp_compile_opts co;
    pp_compile_opts_init(&co);
    co.n_stages = g.n_nodes >= 2 ? 2 : 1;
    if (pp_run_passes(&g, &co, &err) == PP_OK) {
        pp_lowered low;
        if (pp_lower(&g, "fuzz", "fuzz", NULL, &low, &err) == PP_OK) pp_lowered_free(&low);
    }
    pp_graph_free(&g);
    return 0;
}
