/* pprt.h: the runtime's public C API: load and verify a plan, run samples
 * through it as a pipeline of micro-batches, collect statistics.
 *
 * The runtime knows plans, never ONNX graphs or the IR. */
#ifndef PPRT_H
#define PPRT_H

#include "../plan/plan.h"

#define PPRT_VERSION "0.1.0"

/* The loaded plan (pprt_plan, pprt_plan_load, ...) is the plan library's: plan/plan.h. */

/* ---- running -------------------------------------------------------------------- */

/* Samples for one graph input or output: n samples stacked along dim 0. */
typedef struct pprt_array {
    void *data;
    int64_t n; /* samples */
} pprt_array;

/* Backends (runtime/backend.h: the registry) run the stages. */
struct pprt_backend;

/* Arithmetic of the executors that can trade precision for speed (oneDNN):
 * PPRT_BF16 computes convolutions and matrix products in bfloat16 (inputs
 * and weights rounded to 8 significant bits, sums in f32) and may keep
 * activations between them in bf16. Plans, inputs and outputs stay f32. */
typedef enum { PPRT_F32 = 0, PPRT_BF16 = 1, PPRT_TF32 = 2, PPRT_FP16 = 3 } pprt_precision;
/* (PPRT_TF32 and PPRT_FP16: the CUDA executor only, runtime/cuda/cuda_backend.h.) */

/* A hook around each micro-batch of a stage (training's schedules,
 * runtime/train.c): enter returns when stage `stage` of replica `replica`
 * may run micro-batch mb (its inputs are there and its output buffer
 * taken), leave says it ran; stop (the pipeline failed) makes every enter
 * return at once from then on. The threaded driver only. */
typedef struct pprt_gate {
    void *ctx;
    void (*enter)(void *ctx, int replica, int stage, int64_t mb);
    void (*leave)(void *ctx, int replica, int stage, int64_t mb);
    void (*stop)(void *ctx);
} pprt_gate;

typedef struct pprt_run_opts {
    int depth;      /* micro-batches in flight per boundary (>= 1) */
    bool trace;     /* record a timeline (pprt_stats.trace): when each stage ran each micro-batch */
    bool trace_nodes; /* with trace: also how long each node took (the executor's node_seconds) */
    bool pin;       /* pin stage threads to distinct cores when there are enough */
    bool progress;  /* progress bar on stderr */
    bool quiet;     /* no notes on stderr (pprt -q): errors only */
    bool explain;   /* with quiet: the executors' and the devices' notes all the same (the host fallbacks, which
                     * device each stage is on): a training run's first step, whose later steps make the same
                     * executors again */
    bool node_times; /* per-node times are wanted (--profile): executors that pay for them measure them */
    const struct pprt_backend *backend; /* runs each stage; NULL: the reference kernels */
    int threads;    /* intra-op threads per stage, for executors that use them; 0: cores / stages */
    int warmup;     /* untimed micro-batches (copies of each replica's first) run through the whole
                     * pipeline before the timed ones; their outputs dropped, their times in no
                     * statistic, profile or trace (pprt's command line: 1 unless --warmup) */
    pprt_precision precision;
    /* data-parallel pipelines of the plan's stages, each on a contiguous share
     * of the micro-batches (threaded driver; 0 or 1: one; the MPI driver takes
     * pprt_mpi_cfg.replicas) */
    int replicas;
    const pprt_gate *gate; /* NULL: none */
    /* a zb-h1 plan: each device's stash and what its B keeps for W share
     * their entries (pprt_stash_share; the schedule caps what a device
     * holds: 1F1B, ZB-H1) */
    bool share_keep;
    /* NULL: the outputs go into the output arrays pprt_run allocates.
     * Else each micro-batch's outputs are handed to take_outputs as they
     * reach the pipeline's end, and pprt_run allocates no output array
     * (training: each micro-batch's gradients summed as they come, not kept
     * M times over). Threaded driver only. */
    const struct pprt_output_hook *take_outputs;
    /* NULL: each run creates its stages' executors and destroys them. Else
     * they come from and go back to this keeper (runtime/keep.h: a training
     * run's executors made once, kept across its steps). Both drivers. */
    struct pprt_keeper *keep;
} pprt_run_opts;

/* pprt_run_opts.take_outputs: called from the thread that ran a replica's
 * last stage, micro-batch by micro-batch in that replica's order (replicas
 * concurrently), with mb the micro-batch's index in the whole run and msg
 * the last stage's outgoing message (output i at p->stages[last].out.off[i],
 * the plan's micro-batch of rows). A failure stops the run. The outputs at
 * the sink are those whose pprt_io.stage is the last and that are not in
 * its device-local tail; a training plan's device-local ones (pprt_stage.
 * n_local) go to take_local from the thread of the stage that made them,
 * with its outgoing message (output i at p->stages[stage].out.off[slot]),
 * each stage's micro-batches in its order. */
typedef struct pprt_output_hook {
    void *ctx;
    pp_status (*take)(void *ctx, int64_t mb, const void *msg, pp_err *err);
    pp_status (*take_local)(void *ctx, int stage, int64_t mb, const void *msg, pp_err *err);
    /* non-NULL and true while take_local reads no byte of msg (the device
     * optimizer folds the gradients on the device, runtime/dopt.h): a stage
     * on a device then skips copying its message down and hands msg NULL */
    const bool *local_unread;
} pprt_output_hook;

/* What a stage executor is created with (runtime/exec.h). */
typedef struct pprt_exec_cfg {
    int threads;            /* intra-op threads it may use (>= 1) */
    pprt_precision precision;
    /* a device backend's stage: the device it runs on, its messages in that
     * device's memory (the links put them there); -1: messages in host
     * memory (host backends, and tests of a device executor on host messages) */
    int device;
    bool quiet;      /* no notes on stderr (pprt -q) */
    bool node_times; /* measure each node's time even where that costs (the CUDA executor: events, no graphs) */
    /* the version of the trained weights the executor is made at (keep.h's, as its reload gets it; set by the
     * keeper; 0: unknown, as outside a training run) */
    unsigned long weights_version;
} pprt_exec_cfg;

/* What a stage's executor made of its nodes, in words every backend
 * shares, for pprt's report and --stats-json (pprt_exec_ops.counts; an
 * executor without it, such as the reference one, ran every node on the
 * reference kernels). Each node counts once: library + own + fused + views
 * + reference = nodes. */
typedef struct pprt_exec_counts {
    int nodes;          /* the stage's nodes */
    int library;        /* whose kernel is a library's (oneDNN's primitives; cuDNN, cuBLASLt) */
    int own;            /* on the backend's own kernels (pprt's CPU kernels under dnnl; the CUDA kernels) */
    int fused;          /* absorbed into another node's kernel (post-ops, a pre-op, fusion) */
    int views;          /* running as nothing: the output is the input's bytes */
    int reference;      /* on the reference kernels (the host fallback) */
    int layout_changes; /* steps per micro-batch that change a tensor's layout (oneDNN's reorders) */
    int copies;         /* steps per micro-batch that copy bytes (residual copies) */
    int in_place;       /* outputs written over the bytes of an input that dies there (residual sums, binary ops) */
    int own_layout;     /* tensors kept in a layout of the backend's own (oneDNN's blocked ones) */
    double weight_bytes; /* weights prepared once, at load (reordered, converted, packed) */
    long graph_captures; /* CUDA graphs captured (cuda; cuda-emu counts the same without a graph, gcache.h) */
    long graph_replays;  /* micro-batches replayed from a captured graph */
    double weight_upload_bytes; /* weight bytes copied from the host into its device copy so far (cuda, cuda-emu) */
} pprt_exec_counts;
#define PPRT_EXEC_COUNTS 13 /* the fields above, for messages of doubles */

typedef struct pprt_stage_stats {
    const char *backend; /* its executor's name (static) */
    double busy_s;
    double utilization; /* busy / wall */
    pprt_exec_counts exec;
    char cpus[64]; /* the CPUs its thread (and its intra-op threads) were pinned to, "0-3,8"; "": not pinned */
    /* a training plan's forward stage: the most micro-batches its device's
     * stash held at once (the largest over the replicas), and the bytes of
     * one (runtime/stash.c); 0 elsewhere */
    int stash_peak;
    size_t stash_bytes;
    /* a zb-h1 plan (pprt_plan.n_wstages), on the device's forward stage too:
     * its W stage's busy seconds, and the most micro-batches what its B kept
     * for W held at once, the bytes of one */
    double w_busy_s;
    int w_keep_peak;
    size_t w_keep_bytes;
    size_t keep_bytes; /* the entries the device's stash and W keep allocated (pprt_stash_entry_bytes; the most over
                        * the replicas) */
    /* its device, described at start (threaded driver; place[0] == 0: on the host) */
    struct {
        char place[48]; /* "cuda device 1" */
        char name[96];
        int cc_major, cc_minor, sms;
        char libs[128];
    } device;
    char path_out[96]; /* how its outgoing messages reach the next stage ("": the last stage, or not said) */
} pprt_stage_stats;

/* The CPUs this process may run on (its affinity mask, which taskset, a
 * cgroup's cpuset or a batch system sets): returns their count (>= 1; all the
 * online ones where the mask cannot be read) and writes the first max of
 * them, in increasing order, to ids (which may be NULL when max is 0). */
int pprt_cpus_allowed(int *ids, int max);

/* What a profile's times were measured on, into buf: the backend, its
 * precision, the intra-op threads per stage and the CPU's model name, e.g.
 * "dnnl f32, 1 thread per stage, AMD EPYC 9B45". ppcc --search treats
 * profiles with the same text as one device kind. */
void pprt_device_kind(const char *backend, pprt_precision precision, int threads, char *buf, size_t n);

/* The process's resident set now, bytes (/proc/self/statm; 0 where that
 * cannot be read). */
size_t pprt_rss_now(void);

/* The cores one of local_ranks MPI ranks on this machine may use: its share
 * of the machine's online cores, but no more than its affinity mask holds
 * (mpirun --bind-to core leaves it one); >= 1. */
int pprt_rank_cores(int local_ranks);

typedef struct pprt_stats {
    int64_t samples, micro_batches;
    int replicas;            /* pipelines that shared the micro-batches (--replicas) */
    double wall_s;
    double samples_per_s;
    /* from the first micro-batch out to the last: the samples finished in
     * between over that time, the pipeline's rate without its fill and
     * drain (0 for a single micro-batch) */
    double steady_samples_per_s;
    /* a micro-batch's latency: from when stage 0 took it to when the last
     * stage's output of it was in place; its mean over the timed
     * micro-batches and percentiles by nearest rank (the smallest latency
     * that at least that share of micro-batches do not exceed: one of the
     * measured values, no interpolation; the median is the lower middle one) */
    double latency_mean_ms, latency_median_ms, latency_p90_ms, latency_p95_ms, latency_p99_ms;
    double *latency_ms; /* micro_batches entries, in micro-batch order; caller frees */
    double bubble;           /* 1 - sum(busy) / (stages * wall) */
    size_t peak_rss;         /* bytes: the process's peak resident set so far */
    /* bytes: the resident set once every stage's executor existed (weights
     * mapped and reordered, data read), before the first micro-batch; peak_rss
     * minus this is what running the micro-batches added: the activations
     * touched, boundary buffers, kernels' scratch (0 under mpirun) */
    size_t rss_loaded;
    int n_stages;
    bool devices_differ; /* device stages on devices that differ (name, compute capability, SMs, libraries):
                          * bits may differ across the split */
    pprt_stage_stats *stages; /* n_stages entries, caller frees */
    const char *backend;      /* the executors' name (pprt_exec_ops.name: "dnnl"), "mixed" when the
                               * stages differ; static */
    int threads;              /* intra-op threads per stage (of the writing rank under mpirun) */
    pprt_precision precision; /* --precision */
    /* mean milliseconds per micro-batch of every node, stage by stage in
     * node order (sum of the stages' n_nodes entries); caller frees */
    double *node_ms;
    struct pprt_trace *trace; /* with pprt_run_opts.trace; pprt_trace_free */
} pprt_stats;

/* ---- the timeline (pprt --trace; runtime/trace.c) ------------------------------------------ */

/* One track: a stage's thread, or one MPI rank. Times are seconds on one
 * clock (CLOCK_MONOTONIC of the writing rank's host; other hosts' corrected
 * by their measured offset). Recording is four stores per micro-batch into
 * arrays allocated before the run; node times are differences of the
 * executor's per-node counters, for the first n_node_mb micro-batches. */
#define PPRT_TRACE_T 4 /* per micro-batch: input ready, start, kernels start, end */
#define PPRT_TRACE_NODE_CAP (4 << 20) /* node times kept per track, at most */
typedef struct pprt_trace_track {
    int stage, replica, rank; /* rank -1: a thread of the threaded runtime */
    int64_t mb0, n;           /* micro-batches mb0 .. mb0+n-1 of the run */
    double *t;                /* PPRT_TRACE_T x n */
    int n_nodes;              /* of the stage */
    int64_t n_node_mb;        /* micro-batches with node times (the first ones); 0: none */
    double *node_s;           /* n_node_mb x n_nodes seconds */
} pprt_trace_track;

typedef struct pprt_trace {
    int n_tracks;
    pprt_trace_track *tracks;
    double t0;   /* the run's start: 0 on the timeline */
    double bubble, wall_s;
    int replicas;
    /* each timed micro-batch's latency in ms, in micro-batch order (pprt_stats.latency_ms,
     * borrowed: the trace does not free it); NULL: not written */
    const double *latency_ms;
    int64_t n_latency;
} pprt_trace;

/* Micro-batches of node times a track of a stage with n_nodes nodes keeps. */
int64_t pprt_trace_node_mbs(int n_nodes, int64_t n);
void pprt_trace_free(pprt_trace *t);
/* Chrome trace event JSON (Perfetto, chrome://tracing): a track per stage or
 * rank, a span per micro-batch, nested spans per node when recorded, flow
 * arrows from each micro-batch's end on one stage to its start on the next.
 * Written whole or not at all. */
pp_status pprt_trace_write(const char *path, const pprt_plan *p, const pprt_trace *t, pp_err *err);

/* Write stats->node_ms as the profile `ppcc --profile` reads:
 * {"micro_batch": B, "unit": "ms", "device": "KIND", "nodes": {"NAME": MS, ...}}
 * on one line (ir/json.c), MS the node's mean milliseconds per micro-batch; KIND
 * names what the times were measured on (pprt_device_kind). */
pp_status pprt_profile_write(const char *path, const pprt_plan *p, const pprt_stats *stats,
                             pp_err *err);
/* Print, per stage, its nodes' summed time per micro-batch and its `top`
 * (at most 16) slowest nodes that took any time (ties in node order) with their op, milliseconds and share
 * of that sum (so the shares printed for a stage add up to 100% at most). */
void pprt_profile_summary(FILE *f, const pprt_plan *p, const pprt_stats *stats, int top);

/* Run `n` samples: inputs[i] holds n samples of plan input i; outputs[i].data
 * is allocated (n samples of plan output i; caller frees). Any stage error
 * stops the whole pipeline and is reported with its stage and micro-batch. */
pp_status pprt_run(const pprt_plan *p, const pprt_array *inputs, int64_t n, pprt_array *outputs,
                   const pprt_run_opts *o, pprt_stats *stats, pp_err *err);

#endif
