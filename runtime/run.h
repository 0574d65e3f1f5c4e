/* run.h: what both drivers of a run share (sched.c: the stages as threads
 * of this process; comm/sched_mpi.c: one stage per MPI rank), internal to
 * the runtime: how a stage is set up (its intra-op threads, its executor's
 * configuration), what it records as it runs (pprt_stage_rec, one per stage
 * of each replica, with one flat message of doubles that carries it to the
 * writing rank) and the one function that turns the records into
 * pprt_stats (run.c); and the host's side (host.c; its public part,
 * pprt_cpus_allowed, pprt_device_kind, pprt_rss_now and pprt_rank_cores,
 * is in pprt.h). */
#ifndef PPRT_RUN_H
#define PPRT_RUN_H

#include <stddef.h>

#include "backend.h"
#include "microbatch.h"
#include "pprt.h"

/* ---- the host (host.c) ------------------------------------------------------------------ */

/* "0-3,8": the n CPUs of ids (increasing) as ranges, into buf; ending in
 * ",..." where the rest does not fit. */
void pprt_cpu_list(const int *ids, int n, char *buf, size_t cap);
/* The process's peak resident set so far, bytes (getrusage; 0 where that fails). */
size_t pprt_peak_rss(void);
/* The CPU seconds of every thread of the process so far (user and system;
 * 0 where the clock is missing): training's log reports them per step. */
double pprt_cpu_s(void);

/* ---- a stage's set-up (run.c) -------------------------------------------------------------- */

/* Intra-op threads of the run's stages: --threads, else `share` (the
 * cores this process may use over its stage threads; the threaded driver:
 * cores / (stages x replicas); a rank: pprt_rank_cores), at least 1. */
int pprt_run_threads(const pprt_run_opts *o, int share);
/* What a stage's executor is created with: `threads`, the options' precision,
 * quiet and node times, and the device of `at` (-1: on the host). */
pprt_exec_cfg pprt_stage_cfg(const pprt_run_opts *o, int threads, const pprt_place *at);

/* ---- what a stage records as it runs (run.c) ------------------------------------------------ */

/* One stage of one replica: its share of the micro-batches, what it
 * measured and its timeline. Its arrays lie in one flat message of doubles,
 * `msg` (`len` of them): a head (busy, peak RSS, loop start and end, its
 * micro-batch count, its executor's counts), then node_s, then t_start
 * (stage 0) and t_end (the last stage), then the trace's times and node
 * times; a rank sends msg to the writing rank as it is, after
 * pprt_rec_pack, and the writer reads it with pprt_rec_unpack into a
 * record set up by pprt_rec_init as the sender's was. */
typedef struct pprt_stage_rec {
    int stage, replica, rank; /* rank -1: a thread of the threaded driver */
    int64_t mb0, mbs;         /* its micro-batches mb0 .. mb0+mbs-1 of the run */
    double busy;              /* seconds in the executor (pprt_stage_run.busy) */
    double t_loop0, t_loop1;  /* when its timed loop began and ended (the writer's clock) */
    double rss;               /* the process's peak resident set, bytes */
    pprt_exec_counts counts;  /* what its executor made of the stage */
    int n_nodes;
    /* n_nodes: seconds per node over the timed micro-batches (until
     * pprt_rec_done: the executor's counters after the warm-up) */
    double *node_s;
    double *t_start, *t_end;  /* mbs each, stage 0's and the last stage's (the source's and sink's times); else NULL */
    pprt_trace_track tr;      /* --trace: tr.t, NULL without; tr.node_s, NULL without node times */
    double *prev_ns;          /* the stage loop's node counters (trace with node times), not in msg */
    long captures0, replays0; /* the executor's graph counts before the run (pprt_rec_base) */
    double *msg;
    size_t len;
} pprt_stage_rec;

/* Stage `stage` of replica `replica` (on `rank`, -1: a thread) of a run
 * shared as sh says: msg allocated (zeroed), the arrays pointed into it; with
 * trace its timeline, with node times when trace_nodes. */
pp_status pprt_rec_init(pprt_stage_rec *r, const pprt_plan *p, const pprt_shares *sh, int stage, int replica,
                        int rank, bool trace, bool trace_nodes, pp_err *err);
void pprt_rec_free(pprt_stage_rec *r);
/* Once the stage has its executor, before any micro-batch: its node and
 * trace counters and its graph counts so far, to subtract at the end (a
 * kept executor's ran on over earlier runs, keep.h). */
void pprt_rec_base(pprt_stage_rec *r, const pprt_exec_ops *ex, const pprt_exec *x);
/* After the warm-up: the executor's node counters, to subtract at the end. */
void pprt_rec_warm(pprt_stage_rec *r, const pprt_exec_ops *ex, const pprt_exec *x);
/* After the timed micro-batches: the busy time, the counts, each node's time past the warm-up. */
void pprt_rec_done(pprt_stage_rec *r, const pprt_plan *p, const pprt_exec_ops *ex, const pprt_exec *x, double busy);
/* Every time in it moved by `off` seconds (onto the writer's clock). */
void pprt_rec_shift(pprt_stage_rec *r, double off);
/* The head into msg; and back out of a received msg (a count of micro-batches
 * other than the share is an error naming the rank). */
void pprt_rec_pack(pprt_stage_rec *r);
pp_status pprt_rec_unpack(pprt_stage_rec *r, pp_err *err);

/* What the statistics say beside the records. */
typedef struct pprt_stats_ctx {
    int threads;              /* intra-op threads per stage */
    pprt_precision precision;
    /* each stage's backend (n_stages of them: the run's is theirs, or
     * "mixed"), or NULL: only `backend` is known (a rank knows its own) */
    const pprt_backend *const *be;
    const char *backend;
    bool trace;               /* move the records' timelines into stats->trace */
} pprt_stats_ctx;

/* *stats from the records of a run (n = stages x replicas of them, replica
 * k's stage i at k * n_stages + i): busy time per stage summed over the
 * replicas, the wall time from the first loop's start to the last one's
 * end, latencies from the first and last stages' times (pprt_stats_fill),
 * replica 0's counts per stage, each node's mean ms per micro-batch (its
 * warm-up left out), the peak RSS over the records, and with c->trace one
 * track per record. */
pp_status pprt_stats_of(const pprt_plan *p, const pprt_shares *sh, const pprt_stage_rec *recs, int n,
                        const pprt_stats_ctx *c, pprt_stats *stats, pp_err *err);

#endif
