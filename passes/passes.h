/* passes.h: the passes that turn an imported graph into a staged graph ready
 * for lowering, the pass pipeline that runs them in order, and the report. */
#ifndef PP_PASSES_H
#define PP_PASSES_H

#include <stdio.h>

#include "../ir/args.h"
#include "../ir/ir.h"
#include "autodiff.h"

typedef enum pp_policy {
    PP_POLICY_AUTO = 0, /* min bottleneck time incl. transfers, under memory caps */
    PP_POLICY_UNIFORM,  /* equal op count */
    PP_POLICY_PARAMS,   /* equal parameter bytes over top-level modules (ColossalAI "balanced") */
    PP_POLICY_FLOPS,    /* equal FLOPs */
    PP_POLICY_MEMORY,   /* equal estimated memory */
    PP_POLICY_CUSTOM,   /* --split-at / --exec-seq */
} pp_policy;

const char *pp_policy_name(pp_policy p);
bool pp_policy_parse(const char *s, pp_policy *out);

#define PP_MAX_SPLITS 256
#define PP_MAX_PROFILES 32 /* as many as --search tries micro-batch sizes (ppcc --measure) */
#define PP_MAX_BATCH_SIZES 32

/* The machine the cost model assumes (docs/partitioning.md). Placement: the
 * devices are numbered host by host, `devices_per_host` on each (0: all on
 * one host); replica r's stage s runs on device r x stages + s (mpirun's
 * --map-by slot), so a cut between stages on two hosts goes over the
 * network (net_gbps), the others over link_gbps. */
typedef struct pp_target {
    double gflops;        /* sustained GFLOP/s of one stage's device */
    double mem_gbps;      /* memory bandwidth, GB/s */
    double link_gbps;     /* stage-to-stage bandwidth within a host, GB/s */
    double net_gbps;      /* stage-to-stage bandwidth between hosts, GB/s */
    int devices_per_host; /* 0: every device on one host */
} pp_target;

typedef struct pp_compile_opts {
    int n_stages;       /* -pp; 0 = from the custom split */
    pp_policy policy;
    bool verify_each;   /* run the verifier between passes */
    pp_target target;   /* every stage's, unless placed or given per stage */
    unsigned target_set; /* which of target's figures the command line gave: 1 gflops, 2 mem, 4 link */
    pp_place place_all; /* --placement without a stage number */
    pp_place place[PP_MAX_SPLITS + 1];
    pp_target stage_target[PP_MAX_SPLITS + 1]; /* --gflops S:X,...: per stage, where stage_set says */
    unsigned char stage_set[PP_MAX_SPLITS + 1];
    int depth;          /* micro-batches in flight per boundary (memory estimate) */
    int micro_batches;  /* for the bubble estimate in the report */
    /* under memory caps or the memory policy, splits of up to this many
     * units use the quadratic DP, longer ones the O(p n log n) probes
     * (default 2048; tests set 0 or INT_MAX to compare the two) */
    int dp_max_units;
    int replicas;       /* data-parallel copies of the pipeline (pprt --replicas): placement */
    /* custom splits: cut before each of these modules */
    int n_split_at;
    const char *split_at[PP_MAX_SPLITS];
    const char *exec_seq;   /* file with a ColossalAI-style exec_seq list */
    /* pprt --profile outputs: measured node times replace the roofline; of
     * several (one per micro-batch size), the one measured nearest the
     * graph's micro-batch is used (pp_apply_profiles) */
    int n_profiles;
    const char *profiles[PP_MAX_PROFILES];
    /* memory caps in bytes; cap_all applies to stages without their own */
    size_t cap_all;
    /* what each device holds besides the plan (the runtime, a CUDA context,
     * the data): the plan gets a cap minus this (--reserve) */
    size_t reserve;
    bool reserve_set;       /* --reserve given (else the device memory model's default applies) */
    int n_caps;
    int cap_stage[PP_MAX_SPLITS];
    size_t cap_bytes[PP_MAX_SPLITS];
    /* debugging: IR dumps and passes turned off */
    const char *dump_ir;  /* NULL: none; "": after the last pass; "all"; or a pass name */
    FILE *dump_to;        /* default stdout */
    const char *dump_dot; /* Graphviz file of the staged graph */
    int n_disabled;
    const char *disabled[16];
    /* compile a graph that mixes samples across the batch axis anyway
     * (passes/batch.c; the plan records the node) */
    bool allow_batch_mixing;
    bool quiet;           /* no warnings on stderr */
    /* --search and --max-batch (passes/search.c); not part of the plan's
     * options: the plan records the -pp and -b they chose */
    int devices;          /* --devices N */
    bool search, max_batch;
    int64_t samples;      /* samples per run, for the micro-batch count and the bubble */
    int n_batch_sizes;    /* --batch-sizes; 0: 1, 2, 4, ... up to 64 and the samples */
    int64_t batch_sizes[PP_MAX_BATCH_SIZES];
    /* --train: compile the gradient of the loss (passes/autodiff.c) */
    bool train_on;
    pp_train_opts train;
    /* internal: > 0, a training split's one cut, before forward node
     * train_cut (--policy memory at -pp 2 sets it: pp_train_memory_cut) */
    int train_cut;
} pp_compile_opts;

/* Defaults: auto policy, 1 stage, depth 2, 8 micro-batches, CPU figures. */
void pp_compile_opts_init(pp_compile_opts *o);
/* Where stage s runs, and the figures its time is estimated with: those
 * given for the stage (--gflops S:X), else those of its placement's kind of
 * device where the command line gave none (a GPU's for cuda), else the
 * common ones. */
pp_place pp_stage_place(const pp_compile_opts *o, int s);
/* The first of stages 1..n-1 placed on another backend than stage 0, or 0
 * when all n share one (a profile times one kind of device). */
int pp_stage_other_backend(const pp_compile_opts *o, int n);
pp_target pp_stage_target(const pp_compile_opts *o, int s);
/* The command-line options (passes/options.c): their option table
 * (ir/args.h, rows over a pp_compile_opts), which ppcc parses and lists in
 * --help with its own. Its rows marked PP_OPT_RECORD, written by
 * pp_opts_text, are the canonical text of the options for the plan's
 * provenance: options ppcc takes, which compile the same plan again (only
 * the figures given, numbers that read back exactly), but no paths
 * ("--exec-seq (file)"). */
const pp_opt *pp_compile_opts_table(int *n);
/* Frees the --split-at names. */
void pp_compile_opts_free(pp_compile_opts *o);

/* The whole pipeline: verify, infer, scopes, partition, boundaries, memory
 * plan, stage costs; memory caps checked on the result. It is the two halves
 * below, one after the other: the passes that do not depend on the split
 * (up to fusion, and the profile's times), then the split and what follows
 * it. pp_run_split_passes may run again on the same graph with other
 * options after pp_unsplit (the search does). */
pp_status pp_run_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err);
pp_status pp_run_front_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err);
pp_status pp_run_split_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err);
/* Forget the split: stages, boundaries, arenas and stage costs. */
void pp_unsplit(pp_graph *g);

/* Pass names, in order: import infer simplify fuse partition (infer folds
 * constants as it goes; --disable-pass fold keeps it from folding). */
extern const char *const pp_pass_names[];

/* Individual passes (each documented in its file). */
pp_status pp_scopes(pp_graph *g, pp_err *err);
pp_status pp_fold(pp_graph *g, pp_err *err);
/* Control flow and sequences (passes/unroll.c): node i (a Loop, an If, a
 * sequence op, or an op reading a sequence) is rewritten into plain nodes
 * placed at i and after, or marked dead; the caller (pp_fold's sweep) then
 * looks at position i again. *added counts the nodes added, for the bound. */
pp_status pp_unroll_node(pp_graph *g, int i, size_t *added, pp_err *err);
pp_status pp_simplify(pp_graph *g, pp_err *err);
pp_status pp_fuse(pp_graph *g, pp_err *err);
/* The row-order pass (passes/rows.c, inference): a Transpose that only
 * reorders the rows of row-wise ops after it is removed, those ops run on
 * the rows as stored, and the order is restored only where an op needs it,
 * where that moves fewer elements through Transposes. *changed: whether
 * the graph changed (the caller verifies and infers it again). */
pp_status pp_row_order(pp_graph *g, bool *changed, pp_err *err);
/* Of pp_fuse, only the fusions that are an op's own semantics and whose op
 * has a gradient rule: the decomposed LayerNorm into LayerNormalization, the
 * Erf GELU into Gelu, x * Sigmoid(x) into pp.SiLU. ppcc --train runs it
 * before pp_autodiff, so that the
 * gradient reads (and the stages keep) X rather than each intermediate;
 * weights that train (is_param) may be the LayerNorm's scale and shift. */
pp_status pp_fuse_train(pp_graph *g, pp_err *err);
/* The chains that a backend may run as one kernel (passes/fuse.c): a
 * convolution, MatMul or Gemm followed by up to PP_CHAIN_LINKS nodes, each
 * elementwise (an activation, binary arithmetic) on the output of the one
 * before, which nothing else reads. glued[i] (n_nodes entries): node i
 * belongs to the chain of the node before it. The partitioner never cuts
 * before a glued node, so every stage holds whole chains, and a split never
 * changes which kernels run (docs/design-notes.md, "What pprt promises
 * about bits"). */
#define PP_CHAIN_LINKS 4
pp_status pp_fusion_chains(const pp_graph *g, bool *glued, pp_err *err);
/* The attention patterns (passes/fuse.c; ir/base.h PP_PATTERN_ATTENTION):
 * MatMul, [Where], [Mul or Div by a constant scalar], [Where], [Add of a mask],
 * Softmax over the last axis, MatMul (at most one Where), each link's output
 * read by the next alone, f32 (or a half plan's
 * type throughout). tail[i] (n_nodes entries): the last MatMul of the
 * pattern node i opens, else -1; keep[i]: node i lies after the first node
 * of a pattern, or after the Mul or Div of its Q by a constant scalar read
 * by it alone (torch's q / sqrt(d)), and at or before its last (other nodes
 * between them included), so the partitioner never cuts before it and the
 * pattern stays whole in one stage with Q's scale, whatever the split. The mark
 * changes no CPU backend's kernels (only the CUDA backends read it). */
pp_status pp_attention_chains(const pp_graph *g, bool *keep, int *tail, pp_err *err);
/* The mask of an attention pattern's Add node a (passes/fuse.c): scores is the pattern's value it adds to; the
 * other input, of type t, broadcast to the scores' shape (right-aligned, each dim the scores' or 1; BERT's
 * [B, 1, 1, T] padding, Llama's [B, 1, S, T] causal plus padding); -1: not such an Add. */
int pp_attn_mask(const pp_graph *g, int a, int scores, pp_dtype t);
/* The Where node a of an attention pattern (passes/fuse.c) that keeps the scores (its value `scores`, either
 * branch) where a bool condition broadcast to their shape says and puts a constant scalar of type t elsewhere
 * (GPT-2's causal masked_fill before or after the scale, DistilBERT's padding): a, or -1. */
int pp_attn_where(const pp_graph *g, int a, int scores, pp_dtype t);
/* Follow the batch axis (dim 0 of the inputs) through the graph and fail,
 * naming the node, where samples are mixed or the axis is lost (passes/batch.c);
 * with `allow`, record that node in g->batch_mixing instead. No-op at -b 0. */
pp_status pp_batch_check(pp_graph *g, bool allow, pp_err *err);
/* Graphviz DOT of the staged graph: stages as clusters, boundary tensors marked. */
pp_status pp_dump_dot(const char *path, const pp_graph *g, pp_err *err);
pp_status pp_partition(pp_graph *g, const pp_compile_opts *o, pp_err *err);
/* The split of a gradient graph (passes/partition_train.c): -pp P makes 2P
 * stages, s the forward of split s and 2P-1-s its backward. */
pp_status pp_partition_train(pp_graph *g, const pp_compile_opts *o, pp_err *err);
/* --train --policy memory -pp 2: the cut (a forward node index, for
 * o->train_cut) whose two devices' totals under 1F1B (passes/train_memory.c:
 * the weights' state, the arenas, the stash of the micro-batches each keeps,
 * the messages) have the smallest maximum: bisection for the first cut where
 * device 0 holds at least what device 1 does (its total grows as the cut
 * moves later, device 1's shrinks, but for the messages at the cut and the
 * arenas), then the best of the four distinct cuts before it and the two
 * after it. Each trial runs the split passes on a copy of the unsplit
 * gradient graph g, caps aside: about 15-30 a compile. */
pp_status pp_train_memory_cut(const pp_graph *g, const pp_compile_opts *o, int *cut, pp_err *err);
pp_status pp_boundaries(pp_graph *g, pp_err *err);
pp_status pp_memplan(pp_graph *g, pp_err *err);
pp_status pp_stage_costs(pp_graph *g, const pp_compile_opts *o, pp_err *err);
/* Read a pprt --profile file and set each node's measured time (passes/profile.c);
 * reports how many nodes it matched. */
pp_status pp_apply_profile(pp_graph *g, const char *path, int *matched, pp_err *err);
/* Of o's profiles (which must all name the same device kind), apply the one
 * measured at the micro-batch nearest g->batch (by ratio; the larger on a
 * tie), its times scaled linearly to g->batch. *used gets that profile's
 * micro-batch (0: no profile), device its device kind (may be NULL). */
pp_status pp_apply_profiles(pp_graph *g, const pp_compile_opts *o, int *matched, int64_t *used,
                            char *device, size_t device_len, pp_err *err);
/* The first line of a profile: its micro-batch and device kind ("" when the
 * file predates device kinds). */
pp_status pp_profile_header(const char *path, int64_t *batch, char *device, size_t device_len,
                            pp_err *err);

/* The memory cap of `stage` in bytes for the plan: its own, else the one
 * for every stage, less the --reserve (at least 1 byte); 0: none. */
size_t pp_stage_cap(const pp_compile_opts *o, int stage);

/* Bandwidth (GB/s) of the cut after stage `cut` of a `stages`-stage pipeline
 * run as o->replicas replicas: the slowest over the replicas, by placement
 * (pp_target). */
double pp_cut_link_gbps(const pp_compile_opts *o, int stages, int cut);

/* Stage in which value v becomes available: its producer's stage, -1 for
 * graph inputs, -2 for constants (available everywhere). */
int pp_value_def_stage(const pp_graph *g, int v);

/* Module lookup (passes/scope.c): first node index inside module `path`
 * (qualified, e.g. "layer1.2"), or -1. On -1, `hint` gets up to three closest
 * existing module paths ("layer1.1, layer1.2, layer2"). */
int pp_module_first_node(const pp_graph *g, const char *path, char *hint, size_t hint_len);
bool pp_node_in_module(const pp_node *n, const char *path);
/* Last node index inside module `path`, or -1. */
int pp_module_last_node(const pp_graph *g, const char *path);
/* Whether the model, as imported, names module `path` (a node's scope or a
 * parameter's name), whether or not any node of it is left. */
bool pp_model_names_module(const pp_graph *g, const char *path);
/* A module path in the doubled form earlier ppcc versions showed for the
 * children of nested Sequentials ("stages.1.blocks.blocks.0"): the module's
 * name now ("stages.1.blocks.0"), or NULL when `path` is no such old name. */
typedef struct pp_module_alias {
    const char *old, *name;
} pp_module_alias;
const char *pp_module_alias_of(const pp_graph *g, const char *path);
/* ppcc --modules: every module path the model names, in graph order of its
 * first op, one a line: "PATH<TAB>OPS<TAB>FIRST_OP" (OPS its ops as imported,
 * FIRST_OP that op's node name), then the modules only a parameter names,
 * with 0 and "-". */
void pp_modules_print(FILE *f, const pp_graph *g);
/* Entry k of a module list (an exec_seq: names[0..n-1], each module's first
 * and last node, -1 for a name with no op) names no op. Whether it is a module
 * that existed but left no op (true: msg says why, for a warning) or a name
 * that matches nothing plausible (false: msg says why not, for the error).
 * The rule (docs/partitioning.md): its parent module exists; no op of a
 * module lies between the listed modules around it; and the model names it,
 * or it is a BatchNorm-like name (bn, norm, a Sequential index) right after a
 * module ending in a Conv, or a Dropout or Identity. */
bool pp_module_left_no_op(const pp_graph *g, const char *const *names, const int *first, const int *last, int n,
                          int k, char *msg, size_t len);

/* Estimated time of one node on the target, seconds (roofline). */
double pp_node_time(const pp_node *n, const pp_target *t);

/* Min-max partition of a sequence (passes/partition.c), exposed for tests:
 * split units 0..n-1 into p non-empty contiguous ranges minimizing the
 * largest cost(i, j) (units i..j inclusive); cost returns a negative value
 * for an infeasible range. cuts[k] = first unit of stage k+1 (p-1 entries).
 * Returns the bottleneck, or a negative value when nothing is feasible. */
typedef double (*pp_range_cost)(void *ctx, int i, int j, int stage);
double pp_minmax_split(int n, int p, pp_range_cost cost, void *ctx, int *cuts);
/* The same result (bottleneck and cuts, ties broken alike) in O(p n log n)
 * evaluations, for costs that are never infeasible and, for a fixed end j and
 * stage, never grow as the range shrinks: cost(i + 1, j, k) <= cost(i, j, k). */
double pp_minmax_split_mono(int n, int p, pp_range_cost cost, void *ctx, int *cuts);

/* ---- search (passes/search.c) ---------------------------------------------------------- */

/* Imports the model with its inputs' micro-batch set to `batch`, into g
 * (the caller's frontend: passes never read ONNX themselves). */
typedef pp_status (*pp_import_fn)(void *ctx, int64_t batch, pp_graph *g, pp_err *err);

typedef struct pp_cand_stage {
    size_t memory, params, arena, buffers; /* buffers: depth x (messages in + out) */
    double est_ms;                         /* per micro-batch: compute + sending its cut */
} pp_cand_stage;

/* One configuration: pp stages x dp replicas, micro-batches of `batch`. */
typedef struct pp_candidate {
    int pp, dp;
    int64_t batch;
    int64_t micro_batches; /* of the busiest replica: ceil(ceil(samples / batch) / dp) */
    bool fits;
    char why[512];         /* when it does not fit: which stage needs how much against which cap */
    double run_ms;         /* estimated time for the run's samples */
    double samples_per_s;
    double bubble;         /* idle share of the stages over the run */
    double imbalance;      /* slowest stage over the mean */
    int64_t timed_at;      /* the profile's micro-batch used (0: roofline) */
    int n_stages;
    pp_cand_stage *stages;
    /* when it does not fit its caps: the stage that overflows most (-1: not a cap) */
    int over_stage;
    double over_need, over_cap;
} pp_candidate;

typedef struct pp_search_result {
    pp_candidate *c; /* fitting ones first, fastest first; then the others in search order */
    int n;
    int n_fit;
    char device[256]; /* the profiles' device kind; "" for the roofline */
    int imports;      /* micro-batch sizes imported and inferred */
    double seconds;   /* the search's wall time */
} pp_search_result;

/* Every pp in 1..o->devices with dp = devices / pp replicas, every micro-batch
 * size: the auto split under the caps, its memory and estimated throughput. */
pp_status pp_search(const pp_compile_opts *o, pp_import_fn imp, void *ctx, pp_search_result *r,
                    pp_err *err);
void pp_search_free(pp_search_result *r);
/* The micro-batch sizes the search tries: --batch-sizes, else 1, 2, 4, ...
 * up to 64 and the samples; into b (PP_MAX_BATCH_SIZES entries), the count. */
int pp_search_batch_sizes(const pp_compile_opts *o, int64_t *b);
void pp_search_print(FILE *f, const pp_search_result *r, const pp_compile_opts *o);
pp_status pp_search_json(const char *path, const pp_search_result *r, const pp_compile_opts *o,
                         pp_err *err);

typedef struct pp_max_batch_result {
    int pp;
    int64_t batch;          /* the largest micro-batch that fits (0: not even 1) */
    pp_candidate at;        /* the split at `batch` (stages, memory) */
    int64_t over_batch;     /* batch + 1 */
    int limit_stage;        /* the stage that does not fit at over_batch (-1: unknown) */
    double limit_need, limit_cap;
    char limit_why[512];
    int probes;
    double seconds;
} pp_max_batch_result;

/* The largest micro-batch at which the auto split into o->n_stages stages
 * fits o's memory caps: doubling, then bisection (fitting is taken to be
 * monotone in the micro-batch). */
pp_status pp_max_batch(const pp_compile_opts *o, pp_import_fn imp, void *ctx, pp_max_batch_result *r,
                       pp_err *err);
void pp_max_batch_free(pp_max_batch_result *r);
void pp_max_batch_print(FILE *f, const pp_max_batch_result *r, const pp_compile_opts *o);
pp_status pp_max_batch_json(const char *path, const pp_max_batch_result *r, const pp_compile_opts *o,
                            pp_err *err);

/* ---- a training plan's devices (train_memory.c) ---- */

/* The weight copies pprt keeps while training with optimizer `opt`: the
 * plan's, the trainer's, the averaged gradients and the optimizer's buffers
 * (none for plain SGD, SGD's momentum, AdamW's two moments): 3 to 5. */
#define PP_TRAIN_WEIGHT_COPIES(opt) (3 + pp_optim_buffers(opt))

/* Device d's memory in bytes under pprt (train_memory.c says what is
 * counted), under 1F1B and GPipe with o->micro_batches micro-batches a step,
 * and its two stages' time per micro-batch. */
typedef struct pp_train_mem {
    double weights, arenas, stash;   /* stash: per micro-batch kept; weights: the plan's bytes (f32) */
    double wkeep;                    /* zb-h1: what B keeps for W per micro-batch (0: not a zb-h1 plan) */
    /* the weights' state: the plan's copy, the trainer's, gradients and the
     * optimizer's buffers (host), or master, working copy, gradients and
     * optimizer (cuda); workspace: the device model's kernel workspace */
    double master, working, grads, optim, state, workspace;
    int keep_1f1b;                   /* micro-batches 1F1B keeps stashed: min(P - d, M) */
    double msgs_1f1b, msgs_gpipe;    /* its stages' messages at pprt's depths */
    double total_1f1b, total_gpipe;
    double est_ms;                   /* forward + backward stage, per micro-batch */
} pp_train_mem;
void pp_train_memory(const pp_graph *g, const pp_compile_opts *o, int d, pp_train_mem *m);
/* The device memory model's options checked against each other, and
 * --reserve's default for the cuda model set where none was given
 * (PP_TRAIN_CUDA_RESERVE). */
pp_status pp_train_memory_opts(pp_compile_opts *o, pp_err *err);
/* What the model of o->train.memory_model counts, in words. */
void pp_train_memory_describe(const pp_compile_opts *o, char *buf, size_t n);
/* The storage type of --train --precision (train.optim.precision): PP_F32,
 * PP_BF16 or PP_F16. */
pp_dtype pp_train_dtype(const pp_train_opts *t);
/* --memory-model cuda without --reserve: the CUDA context with cuDNN's and
 * cuBLAS's kernels loaded (about 1 GiB for PyTorch 1.13 on CUDA 11) and
 * 0.5 GiB for the allocator's rounding and fragmentation and NCCL's
 * buffers (docs/training.md, "Memory on a GPU") */
#define PP_TRAIN_CUDA_RESERVE ((size_t)3 << 29)
/* the device model's kernel workspace: cuBLASLt's 32 MiB (the size NVIDIA
 * advises on Hopper); cuDNN's algorithms are chosen within what is left,
 * and its implicit-GEMM ones need none */
#define PP_TRAIN_CUDA_WORKSPACE ((double)(32u << 20))

/* The time per micro-batch of updating `bytes` of trained weights, on a
 * device at t's memory rate with M micro-batches a step: each micro-batch's
 * gradients summed into the step's (3 touches of the weight bytes: read
 * both, write the sum) and 1/M of the optimizer's step (3 + 2 x its
 * buffers: plain SGD reads the weights and gradients and writes the
 * weights, SGD's momentum and AdamW's moments are read and written too:
 * AdamW's 7). What the split and the stage costs add for a device's weights
 * (a device updating its own, as ranks or GPUs would: pprt's threads share
 * one trainer today). */
double pp_train_update_s(double bytes, int M, const pp_optim *opt, const pp_target *t);

/* Every JSON file ppcc writes (--report-json: the report, or --search's and
 * --max-batch's table) opens with "format" ("ppcc-report", "ppcc-search",
 * "ppcc-max-batch") and "version", this number, raised when a field changes
 * meaning or goes; element types are named as pp_dtype_name names them
 * ("f32", "i64", "bf16"), never by ONNX's enum numbers. The reports
 * themselves: report/report.h. */
#define PP_REPORT_JSON_VERSION 1

#endif
