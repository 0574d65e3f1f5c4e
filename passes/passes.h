/* passes.h: the passes that turn an imported graph into a staged graph ready
 * for lowering, and the pass pipeline that runs them in order. */
#ifndef PP_PASSES_H
#define PP_PASSES_H

#include <stdio.h>

#include "../ir/ir.h"

typedef enum pp_policy {
    PP_POLICY_UNIFORM = 0, /* equal op count per stage */
} pp_policy;

typedef struct pp_compile_opts {
    int n_stages;     /* -pp */
    pp_policy policy;
    bool verify_each; /* run the verifier between passes */
} pp_compile_opts;

/* The whole pipeline: verify, infer, partition, boundaries, memory plan. */
pp_status pp_run_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err);

/* Individual passes (each documented in its file). */
pp_status pp_partition(pp_graph *g, const pp_compile_opts *o, pp_err *err);
pp_status pp_boundaries(pp_graph *g, pp_err *err);
pp_status pp_memplan(pp_graph *g, pp_err *err);

/* Stage in which value v becomes available: its producer's stage, -1 for
 * graph inputs, -2 for constants (available everywhere). */
int pp_value_def_stage(const pp_graph *g, int v);

/* Per-stage table and the tensors crossing each cut (passes/report.c). */
void pp_report_print(FILE *f, const pp_graph *g);

#endif
