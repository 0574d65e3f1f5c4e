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
    bool quiet;
} ppcc_measure_opts;

/* g has been through pp_run_front_passes and is not split. Lower it as one
 * stage into a temporary directory, write random inputs for it, run pprt on
 * them with --profile (and --threads: the cores this process may use over
 * the stages co asks for, unless args give --threads), read the profile
 * back into the nodes' prof_s, remove the directory. pprt is $PPCC_PPRT,
 * else the pprt beside this ppcc, else the one on PATH. */
pp_status ppcc_measure(pp_graph *g, const pp_compile_opts *co, const ppcc_measure_opts *m, pp_err *err);

#endif
