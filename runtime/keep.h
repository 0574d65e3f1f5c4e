/* keep.h: the executor keeper: a training run's stage executors made once,
 * by its first step, and kept across its steps (issues 55 and 56), not
 * created and destroyed by every pipeline run.
 *
 * The trainer (train.c) owns one and passes it in pprt_run_opts.keep; a
 * driver (sched.c, comm/train_mpi.c) asks it for a stage's executor where it
 * would create one (pprt_keeper_exec, on the stage's thread, so oneDNN's
 * OpenMP threads belong to it as before) and hands it back where it would
 * destroy it (pprt_keeper_done). Without a keeper (NULL) both are the plain
 * create and destroy. Each (stage, replica) has one slot: the W stages of
 * zb-h1 (stage index n_stages + d) and every replica their own.
 *
 * When the trainer has changed the bytes of the weights (pprt_tdesc.data
 * with `varies`: an optimizer update, a checkpoint read, MPI's weights from
 * rank 0), it says so (pprt_keeper_changed); each kept executor then
 * re-reads them (pprt_exec_ops.reload) when it is next asked for, on its
 * stage's thread. An executor that cannot re-read them (its reload says
 * PP_EUNSUP: it derived something from their values at create that it
 * cannot redo) is destroyed and made again, as are executors asked for
 * with another backend or another configuration (pprt_exec_cfg) than they
 * were made with, so none is ever stale.
 *
 * A fresh keeper (PPRT_TRAIN_FRESH=1, the old behaviour for A/B tests)
 * keeps nothing: every executor is destroyed when handed back; it only
 * counts. Not thread-safe between slots' owners and the trainer: the
 * trainer calls changed, counts and free between runs, the stage threads
 * touch only their own slot. */
#ifndef PPRT_KEEP_H
#define PPRT_KEEP_H

#include "exec.h"

typedef struct pprt_keeper pprt_keeper;

/* What the executors of the runs since the last pprt_keeper_counts did. */
typedef struct pprt_keep_counts {
    long created;       /* executors created (a fresh keeper: every run's) */
    long reloaded;      /* kept ones that re-read their weights */
    long refused;       /* kept ones whose reload refused (PP_EUNSUP): made again, and counted in created */
    double reload_s;    /* seconds in reload, summed over the stages (each on its own thread) */
    double create_s;    /* seconds in create, likewise */
    long captures;      /* CUDA graphs captured (pprt_exec_counts.graph_captures; cuda-emu counts them too) */
    double uploads;     /* weight bytes uploaded to devices by create and reload (pprt_exec_counts.weight_upload_bytes) */
} pprt_keep_counts;

/* For plan p's stages (and W stages) times `replicas` slots; fresh: keep nothing. */
pp_status pprt_keeper_new(const pprt_plan *p, int replicas, bool fresh, pprt_keeper **out, pp_err *err);
/* Every kept executor destroyed, then the keeper. NULL is fine. */
void pprt_keeper_free(pprt_keeper *k);
/* The weights' bytes changed: every kept executor reloads before its next run. */
void pprt_keeper_changed(pprt_keeper *k);
/* The counts since the last call (or the keeper's start), then zeroed. */
void pprt_keeper_counts(pprt_keeper *k, pprt_keep_counts *c);

/* Stage `stage`'s executor for replica `replica`: the kept one (reloaded
 * if the weights changed), or a new one made with cfg. k NULL: ops->create. */
pp_status pprt_keeper_exec(pprt_keeper *k, const pprt_exec_ops *ops, const pprt_plan *p, int stage, int replica,
                           const pprt_exec_cfg *cfg, pprt_exec **x, pp_err *err);
/* The kept executor of (stage, replica) and its table, or NULL (none yet,
 * a fresh keeper's, k NULL): for the trainer between runs (dopt.h). */
pprt_exec *pprt_keeper_peek(pprt_keeper *k, int stage, int replica, const pprt_exec_ops **ops);

/* The run is done with x (NULL is fine): kept, or destroyed (k NULL, a fresh keeper). */
void pprt_keeper_done(pprt_keeper *k, const pprt_exec_ops *ops, int stage, int replica, pprt_exec *x);

#endif
