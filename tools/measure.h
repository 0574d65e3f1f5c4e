/* measure.h: ppcc --measure, the split from measured op times without a
 * hand-made profile (measure.c). */
#ifndef PPCC_MEASURE_H
#define PPCC_MEASURE_H

#include "../passes/passes.h"

typedef struct ppcc_measure_opts {
    const char *model;   /* the model file: the one-stage plan references its weights */
    const char *options; /* provenance text for that plan */
    const char *args;    /* more pprt arguments, split at blanks (--measure-args); NULL: none */
    int runs;            /* timed micro-batches (--measure-runs) */
    int procs;           /* copies of pprt side by side (--measure-procs); 0: as many as stages share the
                          * cores (one on a GPU) */
    bool quiet;
} ppcc_measure_opts;

/* g has been through pp_run_front_passes and is not split. Lower it as one
 * stage into a temporary directory, write random inputs for it, run pprt on
 * them with --profile (and --threads: the cores this process may use over
 * the stages co asks for, unless args give --threads), read the profile
 * back into the nodes' prof_s, remove the directory. pprt is $PPCC_PPRT,
 * else the pprt beside this ppcc, else the one on PATH. */
pp_status ppcc_measure(pp_graph *g, const pp_compile_opts *co, const ppcc_measure_opts *m, pp_err *err);

/* --search: a profile at every micro-batch size the search will try (each
 * with the cores over --devices threads), kept in out's temporary directory
 * and named in co->profiles until ppcc_measured_free removes them. Both this
 * and ppcc_measure hold SIGINT, SIGTERM and SIGHUP back while their
 * directory exists (one that comes while pprt runs stops pprt); they are
 * delivered, to ppcc's handler, once it is removed. ppcc_measured_check:
 * PP_ERUNTIME when one is waiting (before writing a plan). */
typedef struct ppcc_measured {
    char dir[4096];
    char paths[PP_MAX_PROFILES][4200];
    int n;
} ppcc_measured;
pp_status ppcc_measure_search(pp_compile_opts *co, pp_import_fn imp, void *ctx, const ppcc_measure_opts *m,
                              ppcc_measured *out, pp_err *err);
pp_status ppcc_measured_check(pp_err *err);
void ppcc_measured_free(ppcc_measured *m, pp_compile_opts *co);

#endif
