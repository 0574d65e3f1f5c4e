/* microbatch.h: what every driver of a plan does the same way, whether its
 * stages are threads of one process (runtime/sched.c) or MPI ranks
 * (runtime/comm/sched_mpi.c): cut micro-batch `mb` out of the input arrays
 * into stage 0's incoming message (zero-padding the last one), copy the last
 * stage's outgoing message back into the output arrays (dropping the
 * padding), and turn measured times into a pprt_stats. No MPI here. */
#ifndef PPRT_MICROBATCH_H
#define PPRT_MICROBATCH_H

#include "pprt.h"

/* Samples per micro-batch: the plan's batch, 1 for an unbatched plan. */
int64_t pprt_mb_size(const pprt_plan *p);
/* Micro-batches needed for n samples. */
int64_t pprt_mb_count(const pprt_plan *p, int64_t n);

/* R data-parallel pipelines (--replicas) over a run of n samples in M
 * micro-batches of b: replica k takes micro-batches [pprt_share_lo(s, k),
 * pprt_share_lo(s, k + 1)), contiguous, the counts differing by one at most;
 * the same shares for the threaded and the MPI driver. */
typedef struct pprt_shares {
    int64_t b, M; /* micro-batch size, micro-batches in all */
    int64_t n;    /* samples */
    int R;
} pprt_shares;

static inline int64_t pprt_share_lo(const pprt_shares *s, int k) { return s->M * k / s->R; }
/* replica k's micro-batches */
static inline int64_t pprt_share_mbs(const pprt_shares *s, int k) {
    return pprt_share_lo(s, k + 1) - pprt_share_lo(s, k);
}
/* replica k's first sample and its samples (the padding of the last micro-batch not counted) */
static inline int64_t pprt_share_first(const pprt_shares *s, int k) { return pprt_share_lo(s, k) * s->b; }
static inline int64_t pprt_share_samples(const pprt_shares *s, int k) {
    int64_t end = pprt_share_lo(s, k + 1) * s->b;
    if (end > s->n) end = s->n;
    const int64_t c = end - pprt_share_first(s, k);
    return c > 0 ? c : 0;
}

/* inputs[i] holds n samples of plan input i; msg is laid out as
 * p->stages[0].in. Copies samples [mb*B, mb*B+B) (those that exist) and
 * zeroes the rest. */
void pprt_mb_fill(const pprt_plan *p, const pprt_array *inputs, int64_t n, int64_t mb, void *msg);

/* msg is laid out as the last stage's out; outputs[i].data has room for n
 * samples of plan output i. Copies the samples of micro-batch mb that exist
 * (the outputs that leave there: not a training plan's device-local ones). */
void pprt_mb_drain(const pprt_plan *p, const void *msg, int64_t n, int64_t mb, const pprt_array *outputs);
/* Likewise from stage s's outgoing message: the outputs that leave there
 * (pprt_io.stage), its device-local tail's (local) or the others. */
void pprt_mb_drain_stage(const pprt_plan *p, int s, bool local, const void *msg, int64_t n, int64_t mb,
                         const pprt_array *outputs);

/* The nearest rank of the pct-th percentile of m sorted values (1-based):
 * ceil(pct * m / 100), at least 1 and at most m; the percentile is the
 * value of that rank, one of the values, never an interpolation. pct 50 is
 * the median (the lower middle one of an even count). m >= 1, 0 < pct <= 100. */
int64_t pprt_nearest_rank(int64_t m, int pct);

/* Fill the timing part of *st (everything but peak_rss and node_ms) for a
 * run of n samples in m micro-batches of `batch` (0: one unbatched run) over
 * `stages` stages, each run by `replicas` pipelines: busy[s] is stage s's busy
 * time summed over the replicas, t_start[k] and t_end[k] when micro-batch k
 * entered the first stage and left the last (seconds, one clock; m entries).
 * Latency is t_end - t_start per micro-batch: its mean and its median, p90,
 * p95 and p99 by nearest rank (pprt_nearest_rank). st->stages and
 * st->latency_ms are allocated (caller frees). */
pp_status pprt_stats_fill(pprt_stats *st, int64_t n, int64_t m, int64_t batch, double wall_s, int stages,
                          int replicas, const double *busy, const double *t_start, const double *t_end,
                          pp_err *err);

#endif
