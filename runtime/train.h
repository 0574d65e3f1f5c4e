/* train.h: training with a gradient plan (ppcc --train; pprt --epochs or
 * --steps). docs/training.md is the whole story.
 *
 * A step is `accumulate` micro-batches, each the plan's rows (its inputs'
 * first dim) drawn from the data in a seeded order; they run through the
 * plan's stages as a pipeline (pprt_run: the forward stages, then the
 * backward ones, several micro-batches in flight), each giving its loss and
 * every weight's gradient; the gradients are averaged in micro-batch order
 * and the optimizer updates the weights (in memory, shared by the forward
 * and the backward stage that read them) before the next step. Everything
 * that decides a bit is fixed: the sample order, the order of the sums, the
 * optimizer's float arithmetic; so the trained weights do not depend on -pp. */
#ifndef PPRT_TRAIN_H
#define PPRT_TRAIN_H

#include <stdio.h>

#include "../ir/optim.h"
#include "pprt.h"

/* How a device orders its forward and backward stage: 1F1B (a forward only
 * while fewer than P - d micro-batches await their backward on device d),
 * GPipe (every forward of the step, then every backward), or as the data
 * comes (the two stages of a device run at once, as two devices'). */
/* zb-h1: a plan compiled with ppcc --train --schedule zb-h1 (its W stages deferred into the idle time) */
typedef enum { PPRT_SCHED_1F1B = 0, PPRT_SCHED_GPIPE = 1, PPRT_SCHED_FLOW = 2, PPRT_SCHED_ZBH1 = 3 } pprt_schedule;

/* Training on MPI ranks (comm/train_mpi.c; NULL in pprt_train_opts.dist:
 * threads). Rank r runs device r % P of replica r / P (P = the plan's
 * devices): both of the device's stages, on two threads, its stash between
 * them in the process. Replica k takes micro-batches [M k / R, M (k+1) / R)
 * of each step; device 0 of each replica (its "leader") holds the
 * pipeline's ends, so its sink receives the loss and every gradient of its
 * micro-batches. The replicas' sums go round in replica order (train.c):
 * leader k folds its micro-batches onto leader k-1's partial sum, in
 * micro-batch order, and passes it on; rank 0 gets the whole step's sum
 * from the last leader, steps the optimizer and sends every rank the new
 * weights. */
enum { PPRT_DIST_BUSY = 9 }; /* pprt_train_dist.busy's figures */

typedef struct pprt_train_dist {
    void *ctx;
    int rank, size;     /* this rank, the ranks */
    int devices;        /* P: the ranks of one replica */
    int replica, replicas;
    /* This rank's two stages through one run of M micro-batches: on a
     * leader `ins` are its micro-batches and o->take_outputs gets its
     * sink's messages, tagged from mb0. Every rank of the replica calls it. */
    pp_status (*run)(void *ctx, const pprt_plan *p, const pprt_array *ins, int64_t M, int64_t mb0,
                     const pprt_run_opts *o, pp_err *err);
    /* Blocking transfers of training's own messages to and from a rank. */
    pp_status (*send)(void *ctx, int rank, const void *buf, size_t bytes, pp_err *err);
    pp_status (*recv)(void *ctx, int rank, void *buf, size_t bytes, pp_err *err);
    /* The replicas' chain of gradient sums on the devices (--transport nccl
     * with replicas: train.c dev_chain, on a thread of its own while the
     * run goes on): dev_chain says it is open, and
     * dsend/drecv move device memory (this rank's backward stage's device)
     * to and from the rank of the same device in another replica, device to
     * device, returning once the transfer completed. */
    bool dev_chain;
    pp_status (*dsend)(void *ctx, int rank, const void *dev_buf, size_t bytes, pp_err *err);
    pp_status (*drecv)(void *ctx, int rank, void *dev_buf, size_t bytes, pp_err *err);
    /* From another thread: the chain's transfers under way and to come fail at once (the step failed; the
     * chain's thread, in dsend or drecv, ends). */
    void (*dstop)(void *ctx);
    /* The last run's seconds in this rank's forward and backward stage's
     * executors and its wall seconds (the rank's device time): the log's
     * stage_busy_s and bubble; then its device's stash: the most entries it
     * held at once and an entry's bytes (0, 0: none), the log's stash_peak
     * and stash_bytes; then, in a zb-h1 plan, its W stage's executor seconds
     * and what its B kept for it: the most entries at once and an entry's
     * bytes (0, 0, 0: none); last the bytes of the entries the stash and W's
     * keep allocated (pprt_stash_entry_bytes). */
    void (*busy)(void *ctx, double out[PPRT_DIST_BUSY]);
    /* pprt --profile (pprt_run_opts.node_times): the last run's mean ms a
     * micro-batch of each node of this rank's two stages, written at their
     * places in `out` (the plan's nodes, stage by stage, as
     * pprt_profile_write orders them; the other entries untouched), with the
     * executors' backend and threads; false: none measured. */
    bool (*node_ms)(void *ctx, double *out, const char **backend, int *threads);
    /* pprt --trace (pprt_run_opts.trace): keep_trace after each training
     * step keeps its run's timeline (a held-out pass's does not replace it);
     * gather_trace at the end, on every rank of replica 0: rank 0 gets the
     * last step's timeline of every stage in *out (the caller frees it:
     * pprt_trace_free), the others NULL. */
    void (*keep_trace)(void *ctx);
    pp_status (*gather_trace)(void *ctx, pprt_precision precision, pprt_trace **out, pp_err *err);
} pprt_train_dist;

typedef struct pprt_train_opts {
    int64_t epochs;       /* passes over the data (used when steps is 0) */
    int64_t steps;        /* optimizer steps; 0: epochs x the steps in one */
    int accumulate;       /* micro-batches per step (>= 1) */
    int schedule_kind;    /* pprt_schedule */
    /* the optimizer, its learning-rate schedule and loss scale (ir/optim.h):
     * the plan's, with pprt's command line over it */
    pp_optim opt;
    uint64_t seed;        /* the sample order of each epoch */
    bool shuffle;         /* false: the data's own order every epoch */
    bool skip_nonfinite;  /* a step whose loss or gradients are not finite is skipped, not an error */
    /* the optimizer's step on the host for every stage (A/B against the device
     * optimizer, runtime/dopt.h, which stages on cuda and cuda-emu otherwise use) */
    bool host_optimizer;
    const char *labels;   /* the 'labels' input's file (NULL: DATA_DIR/labels.npy) */
    const char *log_json; /* a record per step (NULL: none) */
    const char *curves;   /* the log's curves as an HTML page (runtime/curves.c; NULL: none) */
    const char *save_dir; /* the trained weights, NAME.npy each (NULL: none) */
    const char *eval_dir; /* held-out data: its loss and accuracy after each epoch (NULL: none) */
    const char *checkpoint; /* where --save-every writes (whole or not at all) */
    int64_t save_every;   /* a checkpoint every so many steps, and at the end (0: none) */
    const char *resume;   /* a checkpoint to go on from: the run continues bit for bit as if never stopped */
    bool quiet;
    bool progress;        /* a line per step on stderr (or every so many) */
    const pprt_train_dist *dist; /* MPI ranks (above); NULL: threads */
} pprt_train_opts;

void pprt_train_opts_init(pprt_train_opts *o);

typedef struct pprt_train_stats {
    int64_t steps, samples;
    double first_loss, last_loss; /* means over a step's micro-batches */
    double wall_s;
    int64_t skipped;              /* steps skipped (skip_nonfinite) */
    double eval_loss, eval_accuracy; /* the last --eval's (accuracy NaN: no logits) */
    double bubble;                /* the devices' idle share, the mean over the steps */
    double bubble_formula;        /* (P - 1) / (M + P - 1), M a replica's micro-batches per step */
    /* pprt_run_opts.node_times (pprt --profile): each node's mean ms a micro-batch over the steps after the
     * first (which makes the executors and pays the page faults), or the first where it is the only one, in
     * profile.node_ms, with the backend, precision and threads that measured them (pprt_profile_write);
     * pprt_run_opts.trace (pprt --trace): the last step's timeline in profile.trace. The caller frees both
     * (free, pprt_trace_free); the other fields are unset. */
    pprt_stats profile;
} pprt_train_stats;

/* Train: the data from dir (NAME.npy for each plan input but the labels,
 * each [N, ...] with the plan's shape after dim 0), the run options for each
 * step's pipeline. PP_EINVAL for data that does not fit the plan, PP_ERUNTIME
 * for a loss that is not finite (the step and micro-batch named). */
pp_status pprt_train(const pprt_plan *p, const char *dir, const pprt_train_opts *o, const pprt_run_opts *run,
                     pprt_train_stats *st, pp_err *err);

#endif
