/* fuzz_onnx.c: libFuzzer target for the ONNX importer and the passes behind
 * it. Any byte string must be imported and compiled into two stages, or
 * rejected with an error: no crash, leak, hang or undefined behaviour. A
 * model that imports is also compiled for training (--train --loss
 * mse:FIRST_OUTPUT -pp 2): the gradient rules, the row-order pass on the
 * forward graph and the training split see the same inputs. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../backend/backend.h"
#include "../../frontend/frontend.h"
#include "../../passes/autodiff.h"
#include "../../passes/passes.h"

static void compile(const uint8_t *data, size_t size, bool train) {
    pp_graph g;
    pp_err err = {0};
    pp_import_opts io = {0};
    if (pp_import_onnx_mem(data, size, &io, &g, &err) != PP_OK) return;
    pp_compile_opts co;
    pp_compile_opts_init(&co);
    co.n_stages = g.n_nodes >= 2 ? 2 : 1;
    co.quiet = true;
    char loss[600];
    bool ok = true;
    if (train) {
        ok = g.n_outputs > 0;
        if (ok) snprintf(loss, sizeof loss, "mse:%.580s", g.values[g.outputs[0]].name);
        ok = ok && pp_loss_parse(loss, &co.train, &err) == PP_OK;
        co.train_on = true;
    }
    if (ok && pp_run_passes(&g, &co, &err) == PP_OK) {
        pp_lowered low;
        if (pp_lower(&g, "fuzz", "fuzz", NULL, &low, &err) == PP_OK) pp_lowered_free(&low);
    }
    pp_graph_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    compile(data, size, false);
    compile(data, size, true);
    return 0;
}
