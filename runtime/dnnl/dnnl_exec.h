/* dnnl_exec.h: internal to runtime/dnnl/, the oneDNN executor's pieces.
 *
 *   exec.c      the executor: create (build every node, restart on a
 *               declined layout), run, destroy; the op table; the backend
 *   steps.c     the step list and the memories steps read and write:
 *               descriptors, tensors seen through them, shared buffers,
 *               reorders, weights reordered once, steps of pprt's own kernels
 *   postops.c   the nodes a primitive absorbs as post-ops
 *   arena.c     the activations' arena, by lifetime in each tensor's layout
 *   report.c    the counts (pprt --stats-json) and PPRT_DNNL_VERBOSE
 *   options.c   the PPRT_DNNL_* settings; headroom.c: room for oneDNN's
 *               allocations under ulimit -v; wshare.c: weights shared by replicas
 *   conv.c matmul.c pool.c norm.c softmax.c eltwise.c binary.c views.c ...
 *               (convgrad.c: the convolution's gradients; gradref.c: other
 *               gradients on the reference kernels in parts over the threads)
 *               one family of ops each: its build function and table row,
 *               and the run functions of the steps of pprt's kernels it uses
 *   families.def  which family builds each op
 *   kernels/    pprt's own AVX2/AVX-512/AMX kernels (plain C over bytes)
 *
 * A family's build function turns node n into steps (dn_push_pd and kin,
 * dn_own_step and dn_push_own for pprt's kernels) or declines it
 * (PP_EUNSUP: the node runs on the reference kernels). */
#ifndef PPRT_DNNL_EXEC_H
#define PPRT_DNNL_EXEC_H

#include <pthread.h>
#include <dnnl.h>

#include "../backend.h"
#include "../kernels.h"
#include "../nodes.h"
#include "kernels/layout.h"
#include "kernels/nanfix.h"

/* a step's arguments: a Concat's inputs and its output (DenseNet-201's
 * widest takes 49 inputs) */
#define MAX_ARGS 66

/* A squeeze-and-excitation Mul (x times a per-sample, per-channel scale
 * k) that the pointwise convolution after it applies as it stages its
 * source (pwconv.h): the Mul writes nothing, the convolution reads x and
 * k. */
typedef struct dn_pre {
    int xi, si;            /* x and k; xi -1: none */
    dnnl_memory_desc_t k_md; /* k as stored */
    bool k_bf16;
    int64_t k_stride;      /* elements from one sample's k to the next's (0: one for all) */
} dn_pre;

/* The settings from PPRT_DNNL_* environment variables (options.c lists
 * them with their defaults and meanings). */
typedef struct pprt_dnnl_opts {
    int64_t verbose;    /* PPRT_DNNL_VERBOSE: 0, 1, 2 */
    bool propagate;     /* PPRT_DNNL_LAYOUT=blocked: tensors between oneDNN nodes in their producer's layout */
    bool fuse;          /* PPRT_DNNL_FUSE: look for nodes to absorb as post-ops */
    bool residual_sum;  /* PPRT_DNNL_RESIDUAL=sum: residual Z by a sum post-op (copied first unless in place),
                         * else (binary) by a binary add */
    bool inplace;       /* PPRT_DNNL_INPLACE: an output may take over a dying input's bytes */
    double small_us;    /* PPRT_DNNL_SMALL_US: work below which a primitive runs on one thread */
    bool wino;          /* PPRT_DNNL_WINO: 3x3 stride-1 f32 convolutions by Winograd */
    int64_t wino_tile;  /* PPRT_DNNL_WINO_TILE: our kernel's tile: 0 chosen per node, 2 or 4 */
    bool
        conv_blocked; /* PPRT_DNNL_CONV_BLOCKED: 2-D f32 convolutions in channel blocks where a JIT kernel takes them */
    bool views;         /* PPRT_DNNL_VIEWS: Reshape and its kin alias their input */
    bool weight_t;      /* PPRT_DNNL_WEIGHT_T: a product reads the weight a Transpose of it would copy */
    bool operand_t;     /* PPRT_DNNL_OPERAND_T: a batched product reads a transposed operand through strides */
    bool gelu_grad;     /* PPRT_DNNL_GELU_GRAD: Gelu's gradient on oneDNN's eltwise backward */
    bool half_products; /* PPRT_DNNL_HALF_PRODUCTS: products of bf16 values widened to f32 on bf16 kernels */
    bool half_weights;  /* PPRT_DNNL_HALF_WEIGHTS: their weights' roundings reordered once a step (halfprod.c) */
    bool casts;         /* PPRT_DNNL_CASTS: Casts between f32 and bf16 / f16 on pprt's vector kernel (gradref.c) */
    int64_t rows_max;   /* PPRT_DNNL_ROWS_MAX: matrix products with fewer rows as 1x1 convolutions (unset:
                         * 4096 below AVX-512, 0 on AVX-512; matmul.c) */
    bool keep_send;     /* PPRT_DNNL_KEEP_SEND: a sent tensor the stage also reads stays in the arena */
    bool keep_send_auto; /* it was unset: then not in a training plan (exec.c) */
    bool silu;          /* PPRT_DNNL_SILU: pp.SiLU on our kernel where it wins */
    bool share_weights; /* PPRT_DNNL_SHARE_WEIGHTS: a stage's executors (replicas) share reordered weights */
} pprt_dnnl_opts;

/* The settings, read from the environment at the first call (a malformed
 * value: PP_EINVAL naming the variable and the value, at every call). */
pp_status pprt_dnnl_opts_read(pprt_dnnl_opts *o, pp_err *err);

enum { STEP_MAIN, STEP_REORDER, STEP_COPY };
/* A convolution's Relu or Clip as oneDNN's fast post-op (which gives the
 * bound for NaN) between clearing and reading MXCSR's invalid flag; where
 * the flag is raised, or the guard is off, the exact path (the primitive
 * without it, then the NaN-keeping clamp) runs after it over the same
 * untouched source (nanfix.h, conv.c). A convolution with a residual
 * (GUARD_*_RUN) cannot run again where its fast primitive ran, which may
 * have summed into the residual's bytes: where its flag is raised, the
 * micro-batch runs again from the stage's input with the exact paths of
 * such steps (run_steps in exec.c). */
enum { GUARD_NONE, GUARD_FAST, GUARD_EXACT, GUARD_FAST_RUN, GUARD_EXACT_RUN };
/* shared buffers: reorder targets of a node's source, destination and computed weights, the
 * scratchpad, and up to four residuals read as post-op operands (dn_append_fused) */
enum { SLOT_SRC, SLOT_DST, SLOT_WEI, SLOT_SCRATCH, SLOT_OP0, N_SLOTS = SLOT_OP0 + 4 };

/* The bytes a step of pprt's own kernels reads and writes, by the role of
 * each of its args: DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD,
 * DNNL_ARG_SRC_2, and any other (SRC_1: a residual or a scale; DST_1: a
 * second output) as IO_OTHER. */
enum { IO_SRC, IO_DST, IO_SCRATCH, IO_OTHER, IO_SRC_2, N_IO };
/* A step of pprt's own kernels: its kernel over ctx (what the family that
 * built the step made for it) and the bytes its args point at now, on the
 * calling thread's OpenMP team of `team` threads. */
typedef void dn_run_fn(void *ctx, void *const io[N_IO], int team);

typedef struct step {
    dnnl_primitive_t prim;   /* a oneDNN primitive, or NULL: a step of pprt's own kernels, run */
    dn_run_fn *run;          /* (dn_own_step) */
    void *ctx;               /* what run reads (dn_own_step) */
    void (*drop)(void *ctx); /* frees what ctx holds (a kernel's plan) with the step, or NULL */
    const char *impl;        /* the kernel's name in PPRT_DNNL_VERBOSE=2's lines */
    int kind; /* STEP_*: the main primitive, an activation layout change, a residual copy */
    int guard; /* GUARD_*: a guarded Relu or Clip's fast primitive, or a step of its exact path */
    int threads; /* OpenMP threads it was created for and runs with (0: as the stage) */
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
} step;

typedef struct bind {
    dnnl_memory_t m;
    int tid; /* the memory's handle is ptr[tid]: set per run (received and sent
              * tensors) or once the arena is planned (activations); for a
              * kept sent tensor's message, msg[tid] (set per run) */
    bool msg;
} bind;

typedef struct patch {
    dnnl_memory_t m;
    int slot; /* the memory lives in shared buffer `slot` (set once it is allocated) */
} patch;

typedef struct mark {
    int steps, mems, binds, patches, owned, abinds, wrefs, wre, derived;
} mark;

/* A weight reordered at create into a buffer of the executor's own (not
 * shared): what pprt_exec_ops.reload reorders again from the tensor's bytes. */
typedef struct dn_wre {
    int tid;
    dnnl_memory_desc_t from, want;
    void *buf;
} dn_wre;

/* A reordered weight that the executors of one stage share (--replicas runs
 * several of them in one process; wshare.c): its source tensor, its
 * layout, its buffer, and how many executors hold it. */
typedef struct dn_wshared dn_wshared;

/* A list that grows: a[0 .. n-1] of cap allocated (ROOM makes room for one more). */
#define DN_LIST(T) \
    struct {       \
        T *a;      \
        int n, cap; \
    }

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    unsigned long wversion; /* the trained weights' version it was made at (pprt_exec_cfg.weights_version; 0:
                             * unknown) */
    pprt_dnnl_opts o;       /* the PPRT_DNNL_* settings */
    pprt_node_runner nodes; /* runs the nodes in order, timed; those without steps on the fallback */
    unsigned char *arena;
    void **ptr; /* tensor id -> bytes, refreshed per message for RECV/SEND */
    void **msg; /* tensor id -> its place in the outgoing message (kept SEND tensors) */
    /* oneDNN */
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_attr_t attr_reorder;
    /* what the build made, freed with the executor (dn_rollback undoes a declined node's part) */
    DN_LIST(step) steps;
    DN_LIST(dnnl_memory_t) mems;
    DN_LIST(bind) binds;     /* memories whose handles are set per run or once (bind) */
    DN_LIST(bind) abinds;    /* memories over activations, handles set by dn_plan_arena */
    DN_LIST(patch) patches;  /* memories in shared buffers */
    DN_LIST(void *) owned;   /* buffers of the executor's own (reordered weights, kernels' plans' bytes) */
    DN_LIST(dn_wshared *) wrefs; /* the shared reordered weights this executor holds (wshare.c) */
    DN_LIST(dn_wre) wre;         /* the weights reordered into its own buffers (reload does them again) */
    /* nodes whose kernels took something from the values of a weight that
     * varies (pprt_tdesc.varies: packed, transformed, folded, or a choice
     * made on them): reload cannot redo those in place, the first named */
    int derived;
    const char *derived_what;
    int weight_views;  /* 2-D Transposes of weights read through by their products (dn_through_views) */
    int operand_views; /* Transposes of activations' last two axes read through by batched products */
    struct {
        int first, n; /* the out steps: kept SEND tensors copied into the message, at the end of the run */
    } out;
    struct {                     /* shared buffers, by SLOT_* */
        size_t bytes[N_SLOTS];
        void *buf[N_SLOTS];
    } slot;
    struct {             /* per node */
        bool *on_dnnl;   /* try oneDNN (false after a primitive was declined) */
        bool *absorbed;  /* runs as post-ops of the primitive before it (or, a Mul, in the
                          * staging of the pointwise convolution after it: pre) */
        dn_pre *pre;     /* the Mul whose scaling a pointwise convolution takes over (xi -1: none) */
        int *first;      /* first step, -1 for a reference or absorbed node */
        int *nsteps;
        bool *conv_blk;  /* a convolution PPRT_DNNL_CONV_BLOCKED may put in channel blocks */
        unsigned char *through; /* bit k: input k read through the Transpose that wrote it, from that
                                 * Transpose's input (matmul.c: dn_through_views) */
        bool *half;             /* a product whose operands hold bf16 values (halfprod.c): built on oneDNN's
                                 * bf16 kernels first (PPRT_DNNL_HALF_PRODUCTS), f32 if they decline it */
    } nd;
    struct {                 /* per tensor */
        unsigned char *kind; /* its kind here: a SEND tensor that this stage also reads is kept as an
                              * ACTIVATION (in the arena, in its producer's layout) and copied into the
                              * message once, at the end of the run (the out steps) */
        int *cons;           /* number of consuming inputs in this stage */
        int *writer;         /* the node writing it, -1 for weights and received tensors */
        int *last;           /* the last node reading it, -1 for none */
        int *wreads;         /* a weight's rounding to bf16: the products' operands that read the weight in its
                              * place (halfprod.c), through the Casts that widened it */
        /* The arena is this executor's own, planned once every node is built
         * (dn_plan_arena), from when each activation is actually written and
         * read and how large it is in its layout: */
        int *born;           /* the node that writes it (writer, or the absorbing primitive) */
        size_t *need;        /* bytes (plain, or its oneDNN layout's) */
        bool *ghost;         /* never written (the output of an absorbed node's input) */
        int *alias;          /* the tensor whose bytes it takes over (a residual summed in place), or -1 */
        bool *flex;          /* may be stored in a oneDNN layout */
        bool *blocked;       /* stored in lay[] (not plain) */
        dnnl_memory_desc_t *lay;
    } tn;
    struct { /* the node being built (build_all sets it) */
        int n_fused;
        int fused[4];       /* the nodes it absorbs as post-ops */
        int fused_other[4]; /* per absorbed node: its other operand (binary ops), else -1 */
        int n_whole;        /* binary post-op operands with the destination's dims (no */
        dnnl_memory_desc_t whole[4]; /* broadcast), as dn_append_fused gave them */
        int threads;        /* threads of the primitives being created (0: unknown) */
        bool half;          /* its operands read as bf16 copies, its output f32 (nd.half) */
        int node;           /* its index */
    } bld;
    int half_products;      /* products built on bf16 kernels in this f32 run (nd.half, PPRT_DNNL_VERBOSE) */
    int half_views;         /* Casts to f32 of bf16 values that run as nothing: their products read the bf16 */
    int half_weights;       /* of their operands, weights' roundings reordered from the weight once a step */
    int stage_threads; /* the stage's intra-op threads (pprt_exec_cfg) */
    int threads;       /* OpenMP threads last set in the stage thread */
    bool bf16;         /* convolutions and matrix products in bf16 (pprt_exec_cfg) */
    bool own_silu;     /* SiLU on our kernel (runtime/dnnl/kernels/silu.c), not absorbed by the node
                        * before: f32 on AVX2 and AVX-512 CPUs, bf16 on AVX-512 ones
                        * (PPRT_DNNL_SILU=0: never) */
    bool ran;          /* a micro-batch ran on thread `runner` (its OpenMP threads exist) */
    pthread_t runner;
    struct {
        bool on;            /* GUARD_FAST steps run (the self-check of the first run passed) */
        bool exact;         /* this pass over the nodes runs GUARD_EXACT_RUN steps, not GUARD_FAST_RUN ones */
        bool redo;          /* a GUARD_FAST_RUN step raised the flag: the micro-batch runs again */
        int64_t exact_runs; /* micro-batches that ran again so (PPRT_DNNL_VERBOSE) */
    } guard;
    struct { /* statistics (PPRT_DNNL_VERBOSE, --stats-json) */
        size_t arena, owned, weights;
        size_t wshared; /* of weights: reordered by another executor of the stage (wshare.c) */
    } bytes;
};

/* ---- the op table (exec.c, families.def) ---------------------------------------------- */

typedef pp_status dn_build_fn(pprt_exec *x, const pprt_node *n, pp_err *err);

typedef struct dn_family {
    dn_build_fn *build;
    unsigned any_in; /* bit k: reads input k in whatever layout it is stored in */
    int n_in;        /* > 0: any_in holds only for nodes with this many inputs */
    bool (*any_if)(const pprt_exec *x, const pprt_node *n); /* non-NULL: any_in holds only where it holds */
    bool postop;     /* may be absorbed as an eltwise post-op by the node before (dn_find_fusable) */
    bool view;       /* an aliased output counts as a view, not an output in place (report.c) */
} dn_family;

#define DN_FAMILY(name) extern const dn_family dn_##name;
DN_FAMILY(conv)
DN_FAMILY(transpose)
DN_FAMILY(unarygrad)
DN_FAMILY(matmul)
DN_FAMILY(gemm)
DN_FAMILY(pool)
DN_FAMILY(batchnorm)
DN_FAMILY(layernorm)
DN_FAMILY(groupnorm)
DN_FAMILY(fusedgn)
DN_FAMILY(resample)
DN_FAMILY(softmax)
DN_FAMILY(eltwise)
DN_FAMILY(binary)
DN_FAMILY(view)
DN_FAMILY(slice)
DN_FAMILY(pad)
DN_FAMILY(split)
DN_FAMILY(reduce)
DN_FAMILY(concat)
DN_FAMILY(convgradx)
DN_FAMILY(convgradw)
#undef DN_FAMILY

/* The family that builds op, or NULL: the reference kernels run it. */
const dn_family *dn_family_of(pp_op op);

/* ---- errors and small helpers --------------------------------------------------------- */

pp_status dn_fail(pp_err *err, const char *what, dnnl_status_t s);

#define DN(call, what)                                             \
    do {                                                           \
        dnnl_status_t dn_s_ = (call);                              \
        if (dn_s_ != dnnl_success) return dn_fail(err, what, dn_s_); \
    } while (0)

bool dn_grow(void **a, int *cap, int need, size_t elem);
#define ROOM(list) dn_grow((void **)&(list).a, &(list).cap, (list).n + 1, sizeof *(list).a)

static inline const pprt_tdesc *T(const pprt_exec *x, int tid) { return &x->st->t[tid]; }

static inline int64_t numel_of(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static inline pp_attrs attrs_of(const pprt_exec *x, const pprt_node *n) {
    return (pp_attrs){n->attrs, n->n_attrs, x->p->opset};
}

static inline bool has_in(const pprt_node *n, int k) { return k < n->n_in && n->in[k] >= 0; }

static inline bool f32(const pprt_exec *x, int tid) { return T(x, tid)->dtype == PP_F32; }

static inline bool is_weight(const pprt_exec *x, int tid) { return T(x, tid)->kind == PPRT_WEIGHT; }
/* Tensor tid as shape inference reads a node's input: its bytes only where
 * it is a weight (a constant); dtype PP_UNDEFINED for an absent input (-1). */
static inline pp_tinfo dn_tinfo(const pprt_exec *x, int tid) {
    return tid < 0 ? (pp_tinfo){.dtype = PP_UNDEFINED}
                   : (pp_tinfo){T(x, tid)->dtype, T(x, tid)->shape, is_weight(x, tid) ? x->ptr[tid] : NULL};
}

/* An output nobody reads: an arena tensor without consumers. */
static inline bool unused(const pprt_exec *x, int tid) {
    return x->tn.kind[tid] == PPRT_ACTIVATION && x->tn.cons[tid] == 0;
}

static inline pp_status unsup(pp_err *err, const char *why) { return PP_FAIL(err, PP_EUNSUP, "%s", why); }

/* The output of the node being built: that of its last absorbed node, if any. */
static inline int final_out(const pprt_exec *x, const pprt_node *n) {
    return x->bld.n_fused ? x->st->nodes[x->bld.fused[x->bld.n_fused - 1]].out[0] : n->out[0];
}

/* Every tensor of the node is f32 (absent inputs aside) and non-empty. */
pp_status dn_need_f32_nonempty(const pprt_exec *x, const pprt_node *n, pp_err *err);

/* ---- the executor (exec.c) ------------------------------------------------------------ */

/* OpenMP threads of the calling thread's team (1 without OpenMP). */
int dn_team(void);
mark dn_mark_now(const pprt_exec *x);
/* Undo what was created since m (a node oneDNN declined halfway). */
void dn_rollback(pprt_exec *x, mark m);

/* ---- weights shared by a stage's executors (wshare.c) -------------------------------------- */

/* Weight tensor tid reordered from `from` to `want`, as the stage's other
 * executors (replicas in this process) already made it or as this one makes
 * it now and offers them (wshare.c): *out (a new memory of x) shows its
 * bytes, held by x until dn_wshare_release. */
/* Whether any of a node's weights (tensor ids, -1: none) varies; if so the
 * node's kernel derived something from their values at create (`what`
 * names it): the executor cannot reload (dn_derived counts it). */
bool dn_derived(pprt_exec *x, const char *what, int t0, int t1, int t2, int t3);
/* matmul.c: whether every reader of node ni's output (a Transpose or a
 * view) reads through it, from its input (the nodes' through bits), and the
 * pass that makes such nodes run as nothing */
bool dn_read_through(const pprt_exec *x, int ni);
/* The tensor that input tid of node ni could be read from in place of tid:
 * the first input of tid's writer, into *w the writer, where tid is an
 * activation of this stage only this stage reads and that input a plain
 * activation or received tensor read last by the writer (then nothing is
 * written in place over it before ni) or by ni or later; else -1. And
 * dn_read_src: input k of ni reads src so (its through bit set, src's life
 * made to reach ni). */
int dn_writer_input(const pprt_exec *x, int tid, int ni, int *w);
void dn_read_src(pprt_exec *x, int ni, int k, int src);
/* halfprod.c: half[ni] for each product node whose operands hold bf16 values widened to f32; the count.
 * dn_widens_bf16: whether Cast node n widens bf16 to f32. dn_half_input: input k of product ni (tensor tid
 * seen through cur, a plain f32 view of its bytes, or NULL: as it is stored) as the primitive wants it
 * (want): where the node is built on bf16 kernels and the bf16 tensor the Cast widened into tid can be
 * read in its place, from that tensor's bytes (its through bit set, its life made to reach ni: the Cast
 * runs as nothing where every reader does so); else as dn_cast_view (cur) or dn_bind_input (NULL). */
int dn_half_products(pprt_exec *x, bool *half);
bool dn_widens_bf16(const pprt_exec *x, const pprt_node *n);
pp_status dn_half_input(pprt_exec *x, int ni, int k, int tid, const dnnl_memory_desc_t *cur,
                        const dnnl_memory_desc_t *want, int slot, dnnl_memory_t *out, pp_err *err);
void dn_through_views(pprt_exec *x);
/* The shared reordered weights x holds, reordered again from their tensors'
 * bytes where they vary, once per version (wshare.c). */
pp_status dn_wshare_reload(pprt_exec *x, unsigned long version, pp_err *err);
/* from (over bytes) reordered into want (over buf), as create did. */
pp_status dn_reorder_into(pprt_exec *x, const dnnl_memory_desc_t *from, const void *bytes,
                          const dnnl_memory_desc_t *want, void *buf, pp_err *err);
pp_status dn_wshare_get(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                        dnnl_memory_t *out, pp_err *err);
/* Gives back x's shared weights from the n-th on (a rollback, the end). */
void dn_wshare_release(pprt_exec *x, int n);

/* ---- descriptors, memories and steps (steps.c) ------------------------------------------ */

/* Plain row-major f32 descriptor over dims (rank 0: one element). */
pp_status dn_plain_md(const int64_t *dims, int nd, dnnl_memory_desc_t *md, pp_err *err);
/* A descriptor of element type dt whose layout the primitive picks. */
pp_status dn_any_md(const int64_t *dims, int nd, dnnl_data_type_t dt, dnnl_memory_desc_t *md, pp_err *err);
/* Which of stage st's nodes are convolutions whose tensors, over the whole
 * plan, meet only convolutions and ops that run in any layout (conv.c):
 * out[ni] for each of st's nodes. A function of the plan alone, so every
 * split gives the same answer. */
pp_status dn_conv_blocked_nodes(const pprt_plan *p, const pprt_stage *st, bool *out, pp_err *err);
/* The plain f32 descriptor of tensor tid (an error for other element types). */
pp_status dn_tensor_plain(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err);
/* The layout tensor tid is stored in. */
pp_status dn_tensor_layout(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err);
pp_status dn_new_mem(pprt_exec *x, const dnnl_memory_desc_t *md, void *handle, dnnl_memory_t *out, pp_err *err);
/* A memory over tensor tid's bytes, seen through md. */
pp_status dn_tensor_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out, pp_err *err);
/* A memory in shared buffer `slot` (its handle is set once the buffers are allocated). */
pp_status dn_slot_mem(pprt_exec *x, const dnnl_memory_desc_t *md, int slot, dnnl_memory_t *out, pp_err *err);
/* A zeroed, 64-aligned buffer the executor owns (NULL: out of memory). */
void *dn_own_alloc(pprt_exec *x, size_t bytes);
/* Create the primitive of pd as a step of kind `kind`; pd is destroyed either way. */
pp_status dn_push_pd(pprt_exec *x, dnnl_primitive_desc_t pd, int kind, const dnnl_exec_arg_t *args, int nargs,
                     pp_err *err);
pp_status dn_push_reorder(pprt_exec *x, dnnl_memory_t src, dnnl_memory_t dst, int kind, pp_err *err);
/* *s: a step of pprt's own kernels (kind STEP_MAIN, no args yet) that runs
 * `run` over ctx: over a copy of the `size` bytes at ctx, which the executor
 * keeps as long as the step, or (size 0) over ctx itself, a kernel's plan.
 * Once the step is pushed, drop (NULL: none) frees what ctx holds when the
 * step goes (dn_rollback); until then that stays the caller's. impl names
 * the kernel in PPRT_DNNL_VERBOSE=2's lines. */
pp_status dn_own_step(pprt_exec *x, dn_run_fn *run, const void *ctx, size_t size, void (*drop)(void *),
                      const char *impl, step *s, pp_err *err);
/* Append s, a step of our own kernels (dn_own_step; its args set). */
pp_status dn_push_own(pprt_exec *x, step s, pp_err *err);
/* Push step s of our own kernels reading plain tensor `in` (SRC) and writing
 * tensor `out` (DST) through dn_bind_output, with its reorder after it where
 * `out` is stored in another layout. */
pp_status dn_push_own_io(pprt_exec *x, step s, int in, int out, pp_err *err);
/* md as the layout of pprt's kernels that read any layout (runtime/dnnl/kernels/layout.h):
 * f32 or bf16 (the strides count elements; which types a kernel reads is
 * its builder's test); plain, channels last or blocked on channels only;
 * the spatial dims packed, innermost. */
bool dn_own_layout(const dnnl_memory_desc_t *md, pprt_layout *l);
/* Step st of pprt's kernels (dn_own_step; its kernel's plan `bytes`)
 * from input xi read as src_md to output yi written as dst_md, then the
 * output's reorder if it is stored otherwise. *taken: the step list holds
 * the kernel now (dn_rollback frees it); where false the caller frees it. */
pp_status dn_push_own_any(pprt_exec *x, step st, size_t bytes, int xi, const dnnl_memory_desc_t *src_md, int yi,
                          const dnnl_memory_desc_t *dst_md, bool *taken, pp_err *err);
/* Whether node n (on no oneDNN primitive) runs on runtime/dnnl/kernels/rnn_gemm.h rather than the reference kernel. */
bool dn_rnn_by_gemm(const pprt_exec *x, const pprt_node *n);
/* Whether node n (on no oneDNN primitive: pp.UnaryGrad, pp.MaxPoolGrad,
 * pp.BatchNormGrad, pp.LayerNormGrad, BatchNormalization, RMSNormalization) runs on its reference kernel in
 * parts over the stage's threads (gradref.c), with the reference's bits;
 * dn_ref_parts_run runs it. */
bool dn_ref_by_parts(const pprt_exec *x, const pprt_node *n);
pp_status dn_ref_parts_run(pprt_exec *x, const pprt_node *n, pp_err *err);
/* Append a NaN pass f of ours reading src and writing dst (which may be the same memory). */
pp_status dn_push_fix(pprt_exec *x, const pprt_nanfix *f, dnnl_memory_t src, dnnl_memory_t dst, pp_err *err);
/* A NaN-keeping clamp to [lo, hi] over every float of md's buffer. */
pprt_nanfix dn_clamp_fix(const dnnl_memory_desc_t *md, float lo, float hi);
/* Run step s (a primitive on stream strm, or one of our own kernels). */
dnnl_status_t dn_run_step(const step *s, dnnl_stream_t strm);
/* Weight tensor tid reordered from `from` to `want` into buf, which *out
 * (a new memory of x) then shows. */
pp_status dn_reorder_weight(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                            void *buf, dnnl_memory_t *out, pp_err *err);
/* A weight (constant) tensor in the layout `want`: reordered now, once,
 * into an owned buffer, or one the stage's other executors share
 * (PPRT_DNNL_SHARE_WEIGHTS, wshare.c). */
pp_status dn_weight_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                        dnnl_memory_t *out, pp_err *err);
/* Input tensor tid, seen through `cur`, as the primitive wants it: its own
 * memory when `cur` is `want`, else a reorder (every run) into shared buffer `slot`. */
pp_status dn_bind_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *cur, const dnnl_memory_desc_t *want,
                       int slot, dnnl_memory_t *out, pp_err *err);
/* dn_bind_view from the layout tid is stored in. */
pp_status dn_bind_input(pprt_exec *x, int tid, const dnnl_memory_desc_t *want, int slot, dnnl_memory_t *out,
                        pp_err *err);
/* Plain input tensor tid read through md, a view of its plain bytes with other dims. */
pp_status dn_plain_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out, pp_err *err);
/* Plain input tensor tid seen through md, converted to want (md with another element type). */
pp_status dn_cast_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *want,
                       int slot, dnnl_memory_t *out, pp_err *err);

/* Output tensor tid written by a primitive in layout `have`. A tensor that
 * may take any layout is stored in `have`; otherwise it is plain and, when
 * `have` is not, the primitive writes shared buffer SLOT_DST and *post (to
 * push after the primitive) reorders that into the tensor. */
typedef struct post {
    dnnl_memory_t src, dst; /* src NULL: nothing to do */
} post;

pp_status dn_bind_output(pprt_exec *x, int tid, const dnnl_memory_desc_t *have, dnnl_memory_t *out, post *po,
                         pp_err *err);
pp_status dn_push_post(pprt_exec *x, const post *po, pp_err *err);
/* Primitive attributes with a user scratchpad. */
pp_status dn_new_attr(dnnl_primitive_attr_t *a, pp_err *err);
/* The end of a primitive's set-up: when it went well so far (s, r), attach
 * po (NULL: none) to attr and create *pd for op descriptor d; po and attr
 * are destroyed either way, and the first failure is reported (what names
 * the primitive). */
pp_status dn_finish_pd(pprt_exec *x, const_dnnl_op_desc_t d, dnnl_primitive_attr_t attr, dnnl_post_ops_t po,
                       dnnl_status_t s, pp_status r, const char *what, dnnl_primitive_desc_t *pd, pp_err *err);
/* *pd for op descriptor d with attributes of a user scratchpad only (what names the primitive). */
pp_status dn_plain_pd(pprt_exec *x, const_dnnl_op_desc_t d, const char *what, dnnl_primitive_desc_t *pd,
                      pp_err *err);
/* Whether primitive descriptor pd runs one of oneDNN's JIT kernels. */
bool dn_jit_impl(const_dnnl_primitive_desc_t pd);
bool dn_ref_impl(const_dnnl_primitive_desc_t pd);
/* Builds a primitive descriptor reading its source in layout src. */
typedef pp_status dn_pd_make(pprt_exec *x, const dnnl_memory_desc_t *src, void *ctx, dnnl_primitive_desc_t *pd,
                             pp_err *err);
bool dn_fast_layout(pprt_exec *x, dnnl_memory_desc_t *src, bool unpadded, bool conv_first, dn_pd_make *make,
                    void *ctx, bool (*fast)(const_dnnl_primitive_desc_t), dnnl_primitive_desc_t *pd);
/* Output yi of node n takes over the bytes of its input xi where allowed
 * (an alias in the arena plan; PPRT_DNNL_INPLACE=0: never). */
pp_status dn_write_in_place(pprt_exec *x, const pprt_node *n, int xi, const dnnl_memory_desc_t *xmd, int yi,
                            const dnnl_memory_desc_t *dst_md, pp_err *err);

/* ---- post-ops (postops.c) ----------------------------------------------------------------- */

/* Whether node n runs on pwconv.h's kernel (conv.c), which absorbs a SiLU after it. */
bool dn_pw_takes(const pprt_exec *x, const pprt_node *n);
/* Whether Mul n (x xi in layout xmd, times k si stored as k_md, per
 * channel and contiguous) leaves its scaling to the pointwise convolution
 * right after it (dn_pre); if so it is set up to. */
bool dn_pw_pre_scale(pprt_exec *x, const pprt_node *n, int xi, int si, const dnnl_memory_desc_t *xmd,
                     const dnnl_memory_desc_t *k_md, int64_t k_stride);
/* The nodes right after node ni that its primitive can absorb (x->bld.fused). */
void dn_find_fusable(pprt_exec *x, int ni);
/* Descriptor of tensor o as the second source of a binary post-op of a
 * primitive whose destination is dst, for an op whose output has shape ys. */
pp_status dn_operand_md(const pprt_exec *x, int o, const pp_shape *ys, const dnnl_memory_desc_t *dst,
                        dnnl_memory_desc_t *md, pp_err *err);
/* Append the absorbed nodes' post-ops to po (see postops.c). */
pp_status dn_append_fused(pprt_exec *x, dnnl_post_ops_t po, int idx, const dnnl_memory_desc_t *dst,
                          const int64_t *rows, const dnnl_memory_desc_t *whole_as, dnnl_exec_arg_t *args,
                          int *nargs, pp_err *err);
/* Whether every whole binary post-op operand lies in the layout pd writes. */
bool dn_whole_operands_fit(const pprt_exec *x, const_dnnl_primitive_desc_t pd);
/* Relu as oneDNN post-ops that keep NaN; *idx counts the post-ops appended. */
dnnl_status_t dn_append_relu(dnnl_post_ops_t po, int *idx);

/* ---- shared by families ---------------------------------------------------------------------- */

/* GlobalAveragePool node g on pprt's kernel (pool.c, gap.h) reading its
 * input stored as src: alone (silu NULL), or in the pass of SiLU node silu
 * (on pprt's kernel, its output g's input, src the layout of its input and
 * output; silu_src and silu_dst their memories, bound by the caller).
 * *done false: not a case the kernel takes (nothing pushed). */
pp_status dn_push_gap(pprt_exec *x, const pprt_node *g, const dnnl_memory_desc_t *src, const pprt_node *silu,
                      dnnl_memory_t silu_src, dnnl_memory_t silu_dst, bool *done, pp_err *err);
/* The eltwise algorithm of a unary op (eltwise.c); PP_EUNSUP when oneDNN has none for it. */
pp_status dn_eltwise_of(const pprt_exec *x, const pprt_node *n, dnnl_alg_kind_t *alg, float *alpha, float *beta,
                        pp_err *err);
/* The binary algorithm of op (binary.c); false when oneDNN has none for it. */
bool dn_binary_alg(pp_op op, dnnl_alg_kind_t *alg, bool *commutes);
/* Shape s right-aligned to rank r (leading 1s). */
void dn_align_dims(const pp_shape *s, int r, int64_t *d);

/* ---- the arena (arena.c) and the report (report.c) ----------------------------------------- */

pp_status dn_plan_arena(pprt_exec *x, pp_err *err);
void dn_counts(const pprt_exec *x, pprt_exec_counts *c);
void dn_report(const pprt_exec *x);

#endif
