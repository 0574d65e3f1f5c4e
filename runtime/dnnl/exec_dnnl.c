/* exec_dnnl.c: the oneDNN stage executor. Same contract as the reference
 * executor (exec_ref.c): it binds every tensor of a stage to its bytes and
 * runs the nodes in order; but each node that oneDNN covers runs as oneDNN
 * primitives, created once in create(), and every other node (op, attribute
 * or element type outside the list below, or a primitive oneDNN declines)
 * runs its reference kernel. The decision is per node, at create time.
 *
 * On oneDNN (f32 tensors; computed in f32, or bf16 on request, see Precision):
 *   Conv, pp.FusedConv     convolution (1-3 spatial dims, groups, dilations);
 *                          bias; the residual Z by a sum post-op; relu / clip
 *   Gemm, MatMul           matmul (batched, batch dims broadcast); Gemm's C as
 *                          a binary-add post-op, alpha as output scale
 *   MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool     pooling (a
 *                          source in a layout without a JIT kernel, plain or
 *                          another ISA's blocks, reordered into one with)
 *   BatchNormalization     inference, global statistics
 *   LayerNormalization     scale over the whole normalized extent
 *   Softmax, LogSoftmax    softmax (accurate / log)
 *   Relu LeakyRelu Elu Sigmoid Tanh Gelu pp.SiLU Exp Log Sqrt Abs Neg Clip
 *   HardSwish Softplus     eltwise
 *   Add Sub Mul Div Max Min Sum (two inputs)   binary, one operand broadcast
 *   Reshape Flatten Squeeze Unsqueeze Transpose   views (no step) or a reorder
 *   Slice (unit steps)     reorder from a sub-memory of the plain input
 *
 * Post-ops. A convolution, MatMul or Gemm absorbs the eltwise and binary
 * nodes right after it that only refine its output (bias Add, Gelu, SiLU,
 * a scale ...): they become post-ops and are skipped when the stage runs
 * (PPRT_DNNL_FUSE=0: never). What it may absorb stays inside the chains of
 * passes/fuse.c's pp_fusion_chains, which ppcc never cuts, so the split
 * never changes a kernel. A binary operand of the output's shape is read
 * in the layout the primitive writes its output in, or the node absorbs
 * nothing (whole_operands_fit).
 *
 * Layouts. A tensor whose consumers are all oneDNN nodes that take any
 * layout (convolution source and residual, pooling, BatchNormalization,
 * eltwise, binary) is stored in the layout its producer prefers (NHWC or
 * channel-blocked, as oneDNN picks) instead of the plain row-major one;
 * everywhere else tensors are plain, and a reorder converts on the way in or
 * out of a primitive (into a few shared temporary buffers).
 * PPRT_DNNL_LAYOUT=plain keeps every tensor plain.
 *
 * Winograd. An f32 2-D 3x3 stride-1 convolution without groups or dilation
 * uses oneDNN's Winograd kernel where it has one (F(2x2,3x3) or F(4x4,3x3),
 * AVX-512; in a channel-blocked layout, so with a reorder in and out): on
 * ResNet-50's shapes 1.2-1.8x faster than the direct kernel, within the same
 * tolerances (PPRT_DNNL_WINO=0: direct only). Where oneDNN has none (AVX2)
 * and the node absorbs nothing, our own kernel runs it (wino.h: nChw8c in
 * and out, F(4x4,3x3) or F(2x2,3x3) per node; PPRT_DNNL_WINO_TILE=2 or 4
 * forces one), 2-3x faster than oneDNN's direct AVX2 kernel. The choice
 * depends on the node alone, so outputs stay bit-identical whatever the
 * split and thread count.
 * Views. Reshape, Flatten, Squeeze, Unsqueeze and a Transpose that moves
 * only 1-long axes rename bytes: where the input is a plain arena tensor
 * that dies there, the output takes over its bytes (an alias in the arena
 * plan) and the node runs as nothing; elsewhere (a received input, a sent
 * output, an input read again later) the reference kernel copies. A
 * Transpose that moves the last axis is a oneDNN reorder, threaded; one
 * that keeps it stays on the reference kernel, which copies whole rows.
 * PPRT_DNNL_VIEWS=0: always copy.
 * PPRT_DNNL_FOLLOW=1 (off by default) lets a convolution read a source stored
 * in another layout as it is, where a non-reference kernel takes it: fewer
 * reorders (2-4% on ResNet-50), but the kernel then depends on the producer's
 * layout, so on where the stages are cut, and -pp N outputs are no longer
 * bit-identical to -pp 1's.
 *
 * Memory. Weights are reordered once, at create time, into the layout each
 * primitive asks for (owned copies). Primitives use a user scratchpad: one
 * buffer per stage, sized for the largest. Activations get this executor's
 * own arena, planned once every node is built (plan_arena): from when each
 * is written (early, for an absorbed node's output; never, for what an
 * absorbed node read) to its last reader, at its size in its layout; and a
 * pp.FusedConv whose residual Z dies there takes over Z's bytes and sums in
 * place instead of copying Z (PPRT_DNNL_INPLACE=0: always copy). Messages
 * stay where the scheduler puts them; a tensor the stage sends and also reads
 * is kept in the arena like an activation (in its producer's layout, so its
 * readers need no reorder and a residual can be summed in place) and copied
 * into the outgoing message once, after the last node (the out steps;
 * PPRT_DNNL_KEEP_SEND=0: written straight into the message, plain).
 *
 * Threads: oneDNN here runs on OpenMP. The executor is created on the stage's
 * own thread (so the OpenMP team it starts belongs to that thread: libgomp
 * spins only while its threads do not outnumber the cores, and a team made by
 * another thread would count), and primitives are created and run with the
 * stage's threads (pprt_exec_cfg, pprt --threads) as the thread's OpenMP team
 * size; but a primitive with less than about 100 us of work
 * (PPRT_DNNL_SMALL_US) is created for and runs on one thread: waking a team
 * costs more than it saves there.
 *
 * Precision (pprt_exec_cfg, pprt --precision bf16): convolutions read bf16
 * sources and weights and write bf16 where the output stays between oneDNN
 * nodes (else f32); pooling, eltwise and binary nodes keep the element type
 * of what they read; matrix products read bf16 copies of A and B (B's made
 * once when constant) and write f32. Weights are converted once, at create
 * time; activations by the reorders that already change layouts.
 *
 * PPRT_DNNL_VERBOSE=1 prints, per stage, the nodes on oneDNN, absorbed and on
 * the reference kernels, the reorders and copies per micro-batch and the
 * memory taken; =2 adds each node's primitive implementations and why a
 * node was declined. */
#ifdef PPRT_WITH_DNNL

#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dnnl.h>
#include <dnnl_debug.h>

#include "../../ir/geom.h"
#include "../../ir/op_fns.h"
#include "../../ir/shape_nn.h"
#include "../backend.h"
#include "../kernels.h"
#include "../cpu/isa.h"
#include "../cpu/headroom.h"
#include "../cpu/nanfix.h"
#include "../cpu/silu.h"
#include "../cpu/wino.h"

#define MAX_ARGS 10

/* Whether oneDNN computes bf16 on this CPU (AVX-512 and up); where it does
 * not, --precision bf16 runs in f32 (and pprt warns). */
static bool dnnl_has_bf16(void);

enum { STEP_MAIN, STEP_REORDER, STEP_COPY };
/* shared buffers: reorder targets of a node's source and destination, and the scratchpad */
enum { SLOT_SRC, SLOT_DST, SLOT_WEI, SLOT_SCRATCH, N_SLOTS };

typedef struct step {
    dnnl_primitive_t prim; /* NULL for a step of our own Winograd kernel (wino) */
    pprt_wino *wino;       /* args: SRC, DST, SCRATCHPAD, and SRC_1 (the residual) if any */
    float lo, hi;          /* wino: the clamp after bias and residual */
    size_t silu;           /* > 0: a step of our SiLU kernel over this many floats (args: SRC, DST) */
    pprt_nanfix fix;       /* kind > 0: a pass of our own for NaN (nanfix.h; args: SRC, DST) */
    int kind; /* STEP_*: the main primitive, an activation layout change, a residual copy */
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
    int steps, mems, binds, patches, owned, abinds;
} mark;

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    unsigned char *arena;
    void **ptr; /* tensor id -> bytes, refreshed per message for RECV/SEND */
    void **msg; /* tensor id -> its place in the outgoing message (kept SEND tensors) */
    unsigned char *kind; /* tensor id -> its kind here: a SEND tensor that this stage
                          * also reads is kept as an ACTIVATION (in the arena, in
                          * its producer's layout) and copied into the message
                          * once, at the end of the run (the out steps) */
    int out_first, n_out; /* the out steps */
    const pprt_backend *fallback; /* runs the nodes left to it (backend.h: the reference kernels) */
    pprt_node_ctx fb;
    double *node_s;
    /* oneDNN */
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_attr_t attr_reorder;
    bool *on_dnnl;   /* per node: try oneDNN (false after a primitive was declined) */
    bool *absorbed;  /* per node: runs as post-ops of the primitive before it */
    int *first;      /* per node: first step, -1 for a reference or absorbed node */
    int *nsteps;
    step *steps;
    int n_steps, cap_steps;
    dnnl_memory_t *mems;
    int n_mems, cap_mems;
    bind *binds;
    int n_binds, cap_binds;
    patch *patches;
    int n_patches, cap_patches;
    void **owned;
    int n_owned, cap_owned;
    size_t slot_bytes[N_SLOTS];
    void *slot_buf[N_SLOTS];
    /* layouts */
    int *cons;                /* per tensor: number of consuming inputs in this stage */
    int *writer;              /* per tensor: the node writing it, -1 for weights and received tensors */
    int *last;                /* per tensor: the last node reading it, -1 for none */
    /* The arena is this executor's own, planned once every node is built
     * (plan_arena), from when each activation is actually written and read
     * and how large it is in its layout: */
    int *born;                /* per tensor: the node that writes it (writer, or the absorbing primitive) */
    size_t *need;             /* per tensor: bytes (plain, or its oneDNN layout's) */
    bool *ghost;              /* per tensor: never written (the output of an absorbed node's input) */
    int *alias;               /* per tensor: the tensor whose bytes it takes over (a residual
                               * summed in place), or -1 */
    int n_abinds, cap_abinds;
    bind *abinds;             /* memories over activations, handles set by plan_arena */
    size_t arena_bytes;
    /* the nodes the node being built absorbs as post-ops (build_all sets them) */
    int n_fused;
    int fused[4];
    int fused_other[4];       /* per absorbed node: its other operand (binary ops), else -1 */
    int n_whole;              /* binary post-op operands of the node being built with the */
    dnnl_memory_desc_t whole[4]; /* destination's dims (no broadcast), as append_fused gave them */
    bool fuse;                /* look for nodes to absorb (PPRT_DNNL_FUSE=0: never) */
    bool *flex;               /* per tensor: may be stored in a oneDNN layout */
    bool *blocked;            /* per tensor: stored in lay[] (not plain) */
    dnnl_memory_desc_t *lay;
    bool propagate;
    bool inplace;             /* a residual's bytes may be taken over by the output (PPRT_DNNL_INPLACE=0: never) */
    bool residual_sum;        /* residual Z by a sum post-op (copied first unless in place), or
                               * a binary add (PPRT_DNNL_RESIDUAL=binary) */
    int stage_threads;        /* the stage's intra-op threads (pprt_exec_cfg) */
    bool bf16;                /* convolutions and matrix products in bf16 (pprt_exec_cfg) */
    int threads;              /* OpenMP threads last set in the stage thread */
    int build_threads;        /* threads of the primitives being created (0: unknown) */
    double small_us;          /* work below which a primitive runs on one thread (PPRT_DNNL_SMALL_US) */
    bool follow;              /* convolutions read a blocked source as it is where they can (PPRT_DNNL_FOLLOW) */
    bool views;               /* Reshape and its kin alias their input (PPRT_DNNL_VIEWS) */
    bool wino;                /* 3x3 stride-1 f32 convolutions by Winograd where oneDNN has it (PPRT_DNNL_WINO) */
    bool own_silu;            /* SiLU on our kernel (runtime/cpu/silu.c), not absorbed by the node
                               * before: f32 on AVX2 CPUs without AVX-512 (PPRT_DNNL_SILU=0: never) */
    int wino_tile;            /* our kernel's tile: 0 chosen per node, 2 or 4 (PPRT_DNNL_WINO_TILE) */
    int64_t rows_max;         /* matrix products with fewer rows as 1x1 convolutions (PPRT_DNNL_ROWS_MAX) */
    /* statistics (PPRT_DNNL_VERBOSE) */
    size_t owned_bytes, weight_bytes;
    int verbose;
    bool ran; /* a micro-batch ran (its OpenMP threads exist) */
    bool relu_max; /* PPRT_DNNL_RELU=max: oneDNN's relu post-op, which gives 0 for NaN (A/B timings) */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pp_status dn_fail(pp_err *err, const char *what, dnnl_status_t s) {
    return PP_FAIL(err, s == dnnl_unimplemented ? PP_EUNSUP : PP_ERUNTIME, "oneDNN %s: %s", what,
                   dnnl_status2str(s));
}

#define DN(call, what)                                             \
    do {                                                           \
        dnnl_status_t dn_s_ = (call);                              \
        if (dn_s_ != dnnl_success) return dn_fail(err, what, dn_s_); \
    } while (0)

static bool grow(void **a, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *n = realloc(*a, (size_t)nc * elem);
    if (!n) return false;
    *a = n;
    *cap = nc;
    return true;
}
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

/* ---- OpenMP team size of the calling thread ------------------------------------------ */

typedef void omp_set_fn(int);
typedef int omp_get_fn(void);

/* omp_set_num_threads and omp_get_max_threads of the OpenMP runtime oneDNN
 * was linked with (found at run time, so this file needs no OpenMP flags of
 * its own); NULL when there is none. */
static omp_set_fn *omp_setter(void) {
    static omp_set_fn *fn;
    static bool looked;
    if (!looked) {
        union {
            void *p;
            omp_set_fn *f;
        } u = {.p = dlsym(RTLD_DEFAULT, "omp_set_num_threads")};
        fn = u.f;
        looked = true; /* benign race: every thread finds the same symbol */
    }
    return fn;
}

static omp_get_fn *omp_getter(void) {
    static omp_get_fn *fn;
    static bool looked;
    if (!looked) {
        union {
            void *p;
            omp_get_fn *f;
        } u = {.p = dlsym(RTLD_DEFAULT, "omp_get_max_threads")};
        fn = u.f;
        looked = true;
    }
    return fn;
}

/* Set the calling thread's OpenMP team size (oneDNN reads it when it creates
 * and runs primitives); t <= 0: leave it. */
static void set_threads(int t) {
    omp_set_fn *set = omp_setter();
    if (t > 0 && set) set(t);
}


/* ---- memory descriptors and objects ----------------------------------------------------- */

static const pprt_tdesc *T(const pprt_exec *x, int tid) { return &x->st->t[tid]; }

/* Threads for node n's primitives: one for work so small that waking more
 * threads costs more than it saves (estimated from the node's FLOPs and the
 * bytes it touches, weights included (a matrix-vector product is all
 * weights): under x->small_us microseconds on one core), else the
 * stage's. On the 2-core machine of bench/RESULTS.md a parallel region costs
 * about 1 us while libgomp's threads spin, 50-80 us once they sleep (as they
 * did when primitives were created on another thread, which made 500 us the
 * best threshold then); with the executor on the stage thread EfficientNet-B0
 * at -b 1 runs best with 30-100 us and ResNet-50 does not care. */
static int node_threads(const pprt_exec *x, const pprt_node *n, int stage_threads) {
    if (stage_threads <= 1) return stage_threads;
    double bytes = 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0) bytes += (double)T(x, n->in[k])->nbytes;
    for (int k = 0; k < n->n_out; k++) bytes += (double)T(x, n->out[k])->nbytes;
    const double us = n->flops / 40e3 + bytes / 8e3; /* ~40 GFLOP/s, ~8 GB/s */
    return us < x->small_us ? 1 : stage_threads;
}

static int64_t numel_of(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

/* Plain row-major f32 descriptor over dims (rank 0: one element). */
static pp_status plain_md(const int64_t *dims, int nd, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d, s;
    if (nd == 0) {
        d[0] = 1;
        nd = 1;
    } else {
        for (int i = 0; i < nd; i++) d[i] = dims[i];
    }
    dnnl_dim_t st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        s[i] = st;
        st *= d[i] > 0 ? d[i] : 1;
    }
    DN(dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, s), "memory descriptor");
    return PP_OK;
}

/* A descriptor of element type dt whose layout the primitive picks. */
static pp_status any_md(const int64_t *dims, int nd, dnnl_data_type_t dt, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d;
    for (int i = 0; i < nd; i++) d[i] = dims[i];
    DN(dnnl_memory_desc_init_by_tag(md, nd, d, dt, dnnl_format_tag_any), "memory descriptor");
    return PP_OK;
}

/* The plain f32 descriptor of tensor tid. Every descriptor this executor
 * makes is f32: a tensor of another element type never gets one (a reorder
 * through it would move 4 bytes per element whatever its size). */
static pp_status tensor_plain(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err) {
    if (T(x, tid)->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "tensor '%s' is %s, not f32", T(x, tid)->name,
                       pp_dtype_name(T(x, tid)->dtype));
    return plain_md(T(x, tid)->shape.dim, T(x, tid)->shape.rank, md, err);
}

/* The layout tensor tid is stored in. */
static pp_status tensor_layout(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err) {
    if (x->blocked[tid]) {
        *md = x->lay[tid];
        return PP_OK;
    }
    return tensor_plain(x, tid, md, err);
}

static pp_status new_mem(pprt_exec *x, const dnnl_memory_desc_t *md, void *handle, dnnl_memory_t *out,
                         pp_err *err) {
    if (!GROW(x->mems, x->cap_mems, x->n_mems + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    DN(dnnl_memory_create(out, md, x->eng, handle), "memory");
    x->mems[x->n_mems++] = *out;
    return PP_OK;
}

/* A memory over tensor tid's bytes, seen through md. */
static pp_status tensor_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out,
                            pp_err *err) {
    const int kind = x->kind[tid];
    const bool varies = kind == PPRT_RECV || kind == PPRT_SEND;
    /* Every oneDNN memory over a tensor's own bytes is f32 (bf16 copies go
     * through shared buffers); one over a message slot or a weight must not
     * reach past the tensor's bytes, which its neighbours own. */
    if (T(x, tid)->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "tensor '%s' is %s, not f32", T(x, tid)->name, pp_dtype_name(T(x, tid)->dtype));
    if (kind != PPRT_ACTIVATION && dnnl_memory_desc_get_size(md) > T(x, tid)->nbytes)
        return PP_FAIL(err, PP_ERUNTIME, "tensor '%s': a %zu-byte oneDNN memory over its %zu bytes", T(x, tid)->name,
                       dnnl_memory_desc_get_size(md), T(x, tid)->nbytes);
    PP_TRY(new_mem(x, md, kind == PPRT_WEIGHT ? x->ptr[tid] : DNNL_MEMORY_NONE, out, err));
    if (varies) {
        if (!GROW(x->binds, x->cap_binds, x->n_binds + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->binds[x->n_binds++] = (bind){*out, tid, false};
    } else if (kind == PPRT_ACTIVATION) {
        if (!GROW(x->abinds, x->cap_abinds, x->n_abinds + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->abinds[x->n_abinds++] = (bind){*out, tid, false};
        size_t b = dnnl_memory_desc_get_size(md);
        if (b > x->need[tid]) x->need[tid] = b;
    }
    return PP_OK;
}

/* A memory in shared buffer `slot` (its handle is set once the buffers are allocated). */
static pp_status slot_mem(pprt_exec *x, const dnnl_memory_desc_t *md, int slot, dnnl_memory_t *out,
                          pp_err *err) {
    PP_TRY(new_mem(x, md, DNNL_MEMORY_NONE, out, err));
    if (!GROW(x->patches, x->cap_patches, x->n_patches + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->patches[x->n_patches++] = (patch){*out, slot};
    size_t b = dnnl_memory_desc_get_size(md);
    if (b > x->slot_bytes[slot]) x->slot_bytes[slot] = b;
    return PP_OK;
}

static void *own_alloc(pprt_exec *x, size_t bytes) {
    void *b = NULL;
    if (!GROW(x->owned, x->cap_owned, x->n_owned + 1)) return NULL;
    if (posix_memalign(&b, 64, bytes ? bytes : 64) != 0) return NULL;
    memset(b, 0, bytes);
    x->owned[x->n_owned++] = b;
    x->owned_bytes += bytes;
    return b;
}

/* ---- steps ------------------------------------------------------------------------------ */

static pp_status push_step(pprt_exec *x, dnnl_primitive_desc_t pd, int kind, const dnnl_exec_arg_t *args,
                           int nargs, pp_err *err) {
    if (!GROW(x->steps, x->cap_steps, x->n_steps + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    step s = {.kind = kind, .nargs = nargs, .threads = x->build_threads};
    memcpy(s.args, args, (size_t)nargs * sizeof *args);
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sp && dnnl_memory_desc_get_size(sp) > 0) {
        dnnl_memory_t m;
        PP_TRY(slot_mem(x, sp, SLOT_SCRATCH, &m, err));
        s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m};
    }
    DN(dnnl_primitive_create(&s.prim, pd), "primitive");
    x->steps[x->n_steps++] = s;
    return PP_OK;
}

/* Create the primitive of pd (then destroyed) as a step; pd is destroyed either way. */
static pp_status push_pd(pprt_exec *x, dnnl_primitive_desc_t pd, int kind, const dnnl_exec_arg_t *args,
                         int nargs, pp_err *err) {
    pp_status s = push_step(x, pd, kind, args, nargs, err);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

static pp_status push_reorder(pprt_exec *x, dnnl_memory_t src, dnnl_memory_t dst, int kind, pp_err *err) {
    const dnnl_memory_desc_t *smd, *dmd;
    DN(dnnl_memory_get_memory_desc(src, &smd), "memory query");
    DN(dnnl_memory_get_memory_desc(dst, &dmd), "memory query");
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, smd, x->eng, dmd, x->eng, x->attr_reorder), "reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    return push_pd(x, pd, kind, a, 2, err);
}

/* A weight (constant) tensor in the layout `want`: reordered now, once, into an owned buffer. */
static pp_status weight_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                            dnnl_memory_t *out, pp_err *err) {
    if (dnnl_memory_desc_equal(from, want)) return tensor_mem(x, tid, want, out, err);
    size_t bytes = dnnl_memory_desc_get_size(want);
    void *buf = own_alloc(x, bytes);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for a reordered weight", bytes);
    x->weight_bytes += bytes;
    dnnl_memory_t src;
    PP_TRY(tensor_mem(x, tid, from, &src, err));
    PP_TRY(new_mem(x, want, buf, out, err));
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, from, x->eng, want, x->eng, NULL), "weight reorder");
    dnnl_primitive_t r;
    dnnl_status_t s = dnnl_primitive_create(&r, pd);
    dnnl_primitive_desc_destroy(pd);
    DN(s, "weight reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, *out}};
    s = dnnl_primitive_execute(r, x->strm, 2, a);
    if (s == dnnl_success) s = dnnl_stream_wait(x->strm);
    dnnl_primitive_destroy(r);
    DN(s, "weight reorder");
    return PP_OK;
}

/* Input tensor tid, seen through `cur` (its layout, or a view of its plain
 * bytes), as the primitive wants it: its own memory when `cur` is `want`,
 * else a reorder (every run) into shared buffer `slot`. */
static pp_status bind_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *cur, const dnnl_memory_desc_t *want,
                           int slot, dnnl_memory_t *out, pp_err *err) {
    if (dnnl_memory_desc_equal(cur, want)) return tensor_mem(x, tid, want, out, err);
    dnnl_memory_t src;
    PP_TRY(tensor_mem(x, tid, cur, &src, err));
    PP_TRY(slot_mem(x, want, slot, out, err));
    return push_reorder(x, src, *out, STEP_REORDER, err);
}

static pp_status bind_input(pprt_exec *x, int tid, const dnnl_memory_desc_t *want, int slot, dnnl_memory_t *out,
                            pp_err *err) {
    dnnl_memory_desc_t cur;
    PP_TRY(tensor_layout(x, tid, &cur, err));
    return bind_view(x, tid, &cur, want, slot, out, err);
}

/* Input tensor tid read through md, a view of its plain bytes with other
 * dims (matrices, [outer, n, inner]): for consumers that never let the
 * tensor take another layout, so it is plain. */
static pp_status plain_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out, pp_err *err) {
    if (x->blocked[tid]) return PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, tid)->name);
    return tensor_mem(x, tid, md, out, err);
}

/* Plain input tensor tid seen through md, converted to want (md with another
 * element type) by a reorder into shared buffer `slot` every run, or itself
 * when want is md. */
static pp_status cast_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *want,
                           int slot, dnnl_memory_t *out, pp_err *err) {
    if (dnnl_memory_desc_equal(md, want)) return plain_view(x, tid, md, out, err);
    dnnl_memory_t src;
    PP_TRY(plain_view(x, tid, md, &src, err));
    PP_TRY(slot_mem(x, want, slot, out, err));
    return push_reorder(x, src, *out, STEP_REORDER, err);
}

/* Output tensor tid written by a primitive in layout `have`. A tensor that
 * may take any layout is stored in `have`; otherwise it is plain and, when
 * `have` is not, the primitive writes shared buffer SLOT_DST and *post (to
 * push after the primitive) reorders that into the tensor. */
typedef struct post {
    dnnl_memory_t src, dst; /* src NULL: nothing to do */
} post;

static pp_status bind_output(pprt_exec *x, int tid, const dnnl_memory_desc_t *have, dnnl_memory_t *out, post *po,
                             pp_err *err) {
    po->src = NULL;
    dnnl_memory_desc_t plain;
    PP_TRY(tensor_plain(x, tid, &plain, err));
    if (x->flex[tid] && !dnnl_memory_desc_equal(have, &plain)) {
        x->blocked[tid] = true;
        x->lay[tid] = *have;
        return tensor_mem(x, tid, have, out, err);
    }
    if (dnnl_memory_desc_equal(have, &plain)) return tensor_mem(x, tid, &plain, out, err);
    PP_TRY(slot_mem(x, have, SLOT_DST, out, err));
    po->src = *out;
    return tensor_mem(x, tid, &plain, &po->dst, err);
}

static pp_status push_post(pprt_exec *x, const post *po, pp_err *err) {
    return po->src ? push_reorder(x, po->src, po->dst, STEP_REORDER, err) : PP_OK;
}

static pp_status new_attr(dnnl_primitive_attr_t *a, pp_err *err) {
    DN(dnnl_primitive_attr_create(a), "attributes");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(*a, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*a);
        *a = NULL;
        return dn_fail(err, "attributes", s);
    }
    return PP_OK;
}

/* ---- node helpers ------------------------------------------------------------------------ */

static pp_attrs attrs_of(const pprt_exec *x, const pprt_node *n) {
    return (pp_attrs){n->attrs, n->n_attrs, x->p->opset};
}

static bool has_in(const pprt_node *n, int k) { return k < n->n_in && n->in[k] >= 0; }

static bool f32(const pprt_exec *x, int tid) { return T(x, tid)->dtype == PP_F32; }

static bool is_weight(const pprt_exec *x, int tid) { return T(x, tid)->kind == PPRT_WEIGHT; }

/* An output nobody reads: an arena tensor without consumers. */
static bool unused(const pprt_exec *x, int tid) {
    return x->kind[tid] == PPRT_ACTIVATION && x->cons[tid] == 0;
}

static pp_status unsup(pp_err *err, const char *why) { return PP_FAIL(err, PP_EUNSUP, "%s", why); }

/* Every tensor of the node is f32 (absent inputs aside) and non-empty. */
static pp_status need_f32_nonempty(const pprt_exec *x, const pprt_node *n, pp_err *err) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && (!f32(x, n->in[k]) || numel_of(&T(x, n->in[k])->shape) == 0))
            return unsup(err, "an input is not a non-empty f32 tensor");
    if (!f32(x, n->out[0]) || numel_of(&T(x, n->out[0])->shape) == 0)
        return unsup(err, "the output is not a non-empty f32 tensor");
    for (int k = 1; k < n->n_out; k++)
        if (!unused(x, n->out[k])) return unsup(err, "an optional output is used");
    return PP_OK;
}

/* ---- post-ops: nodes absorbed by the primitive before them ---------------------------------- */

static pp_status eltwise_of(const pprt_exec *x, const pprt_node *n, dnnl_alg_kind_t *alg, float *alpha,
                            float *beta, pp_err *err);
static bool binary_alg(pp_op op, dnnl_alg_kind_t *alg, bool *commutes);
static void align_dims(const pp_shape *s, int r, int64_t *d);
static dnnl_status_t append_relu(const pprt_exec *x, dnnl_post_ops_t po, int *idx);

/* The output of the node being built: that of its last absorbed node, if any. */
static int final_out(const pprt_exec *x, const pprt_node *n) {
    return x->n_fused ? x->st->nodes[x->fused[x->n_fused - 1]].out[0] : n->out[0];
}

/* Descriptor of tensor o as the second source of a binary post-op of a
 * primitive whose destination is `dst`, for an op whose output has shape ys
 * (o broadcasts to it: dims right-aligned, broadcast dims 1). When dst has
 * ys's dims: o's layout if it is stored in a oneDNN layout, else a plain
 * view. When the primitive sees the output reshaped (a matrix product's
 * folded rows), only a whole plain operand, a scalar or one along the last
 * dim can follow. */
static pp_status operand_md(const pprt_exec *x, int o, const pp_shape *ys, const dnnl_memory_desc_t *dst,
                            dnnl_memory_desc_t *md, pp_err *err) {
    const int r = ys->rank > 0 ? ys->rank : 1;
    int64_t d[PP_MAX_DIMS], yd[PP_MAX_DIMS];
    pp_shape os = T(x, o)->shape, y1 = *ys;
    if (y1.rank == 0) y1.rank = 1, y1.dim[0] = 1;
    align_dims(&os, r, d);
    align_dims(&y1, r, yd);
    bool same = dst->ndims == r, whole = true, last = true;
    for (int i = 0; i < r; i++) {
        same = same && dst->dims[i] == yd[i];
        whole = whole && d[i] == yd[i];
        last = last && (i == r - 1 ? d[i] == yd[i] : d[i] == 1);
    }
    if (same) {
        if (!x->blocked[o]) return plain_md(d, r, md, err);
        if (os.rank != r) return unsup(err, "blocked operand of another rank");
        *md = x->lay[o];
        return PP_OK;
    }
    if (x->blocked[o]) return unsup(err, "blocked operand of a reshaped output");
    const int nd = dst->ndims;
    int64_t v[DNNL_MAX_NDIMS];
    int64_t n_o = numel_of(&T(x, o)->shape);
    for (int i = 0; i < nd; i++) v[i] = whole ? dst->dims[i] : 1;
    if (!whole && n_o != 1) {
        if (!last || dst->dims[nd - 1] != yd[r - 1]) return unsup(err, "operand broadcast across folded rows");
        v[nd - 1] = yd[r - 1];
    }
    return plain_md(v, nd, md, err);
}

/* Descriptor of tensor o as the second source of a binary post-op of a
 * matrix product run as a 1x1 convolution over NHWC [1, N, M, 1] (rows as
 * pixels, see ROWS_AS_PIXELS_MAX): o is read as NHWC too, so it must be
 * plain and either whole (its last dim N, M x N elements), a row of N, or a
 * scalar. */
static pp_status rows_operand_md(const pprt_exec *x, int o, int64_t M, int64_t N, dnnl_memory_desc_t *md,
                                 pp_err *err) {
    const pp_shape *os = &T(x, o)->shape;
    const int64_t n_o = numel_of(os), last = os->rank ? os->dim[os->rank - 1] : 1;
    dnnl_dims_t d = {1, 1, 1, 1};
    if (x->blocked[o]) return unsup(err, "blocked operand");
    if (n_o == M * N && last == N) d[1] = N, d[2] = M;
    else if (n_o == N && last == N) d[1] = N;
    else if (n_o != 1) return unsup(err, "operand broadcast across rows");
    DN(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_nhwc), "memory descriptor");
    return PP_OK;
}

/* Append the absorbed nodes' post-ops to po (whose first one is post-op
 * number `idx`) for a primitive with destination `dst`, or, where rows is
 * not NULL, for a matrix product of rows[0] x rows[1] run as a 1x1
 * convolution (rows_operand_md); the memories of binary operands go to args. */
static pp_status append_fused(pprt_exec *x, dnnl_post_ops_t po, int idx, const dnnl_memory_desc_t *dst,
                              const int64_t *rows, dnnl_exec_arg_t *args, int *nargs, pp_err *err) {
    x->n_whole = 0;
    for (int f = 0; f < x->n_fused; f++, idx++) {
        const pprt_node *b = &x->st->nodes[x->fused[f]];
        dnnl_alg_kind_t alg;
        float alpha, beta;
        bool commutes;
        if (binary_alg(b->op, &alg, &commutes)) {
            const int o = x->fused_other[f];
            dnnl_memory_desc_t md;
            dnnl_memory_t m;
            if (rows) PP_TRY(rows_operand_md(x, o, rows[0], rows[1], &md, err));
            else PP_TRY(operand_md(x, o, &T(x, b->out[0])->shape, dst, &md, err));
            if (!rows && dst && md.ndims == dst->ndims && !memcmp(md.dims, dst->dims, sizeof(md.dims[0]) * (size_t)md.ndims))
                x->whole[x->n_whole++] = md;
            DN(dnnl_post_ops_append_binary(po, alg, &md), "binary post-op");
            PP_TRY(tensor_mem(x, o, &md, &m, err));
            args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, m};
        } else {
            PP_TRY(eltwise_of(x, b, &alg, &alpha, &beta, err));
            if (alg == dnnl_eltwise_relu && alpha == 0) {
                idx--; /* the loop counts one */
                DN(append_relu(x, po, &idx), "eltwise post-op");
            } else {
                DN(dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta), "eltwise post-op");
            }
        }
    }
    return PP_OK;
}

/* Whether every whole binary post-op operand of the node being built (see
 * append_fused) lies in the layout of the destination that primitive pd
 * writes (element types aside). oneDNN 2.6 takes an operand in another
 * layout without complaint, and some kernels then read it as if it had the
 * destination's: a gemm convolution on an AVX-512 CPU in bf16, adding a
 * residual stored channel-blocked, gave errors of 0.8 of the output's
 * largest magnitude. Such a node absorbs nothing instead (the binary op
 * runs on its own primitive, which reads each operand in its layout). */
static bool whole_operands_fit(const pprt_exec *x, const_dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    for (int k = 0; k < x->n_whole; k++) {
        dnnl_memory_desc_t md = x->whole[k];
        md.data_type = dst->data_type;
        if (!dnnl_memory_desc_equal(&md, dst)) return false;
    }
    return true;
}

/* ---- Conv, pp.FusedConv ------------------------------------------------------------------ */

/* A convolution primitive descriptor: algorithm alg reading src, over the
 * weights, bias (NULL: none) and destination descriptors and g's geometry. */
static dnnl_status_t conv_pd(dnnl_primitive_desc_t *pd, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *src,
                             const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *dst,
                             const pp_geom *g, const_dnnl_primitive_attr_t attr, dnnl_engine_t eng) {
    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < g->nsp; i++) {
        strides[i] = g->stride[i];
        dil[i] = g->dil[i] - 1;
        pl[i] = g->pad0[i];
        pr[i] = g->pad1[i];
    }
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, src, w, b, dst,
                                                                 strides, dil, pl, pr);
    *pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &cd, attr, eng, NULL);
    if (s != dnnl_success) *pd = NULL;
    return s;
}

/* nChw8c (oneDNN's aBcd8b) over 4-D dims: what oneDNN's AVX2 kernels keep
 * between nodes, and what our Winograd kernel reads and writes. */
static pp_status blk8_md(const int64_t *dims, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    DN(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_aBcd8b), "memory descriptor");
    return PP_OK;
}

/* Node n (a 3x3 stride-1 2-D convolution, f32, no groups or dilation, with
 * constant weights and bias, absorbing no other node) as a step of our own
 * Winograd kernel (wino.h) over nChw8c source and destination, for a CPU
 * where oneDNN has no Winograd kernel. Z (or -1) is the residual, read as it
 * is when stored as nChw8c, else reordered into a shared buffer first (as
 * the source is); the output never takes over Z's bytes. */
static pp_status build_wino(pprt_exec *x, const pprt_wino_shape *sh, int xi, int wi, int bi, int zi, int yi,
                            float lo, float hi, pp_err *err) {
    dnnl_memory_desc_t xmd, ymd, scmd;
    PP_TRY(blk8_md(T(x, xi)->shape.dim, &xmd, err));
    PP_TRY(blk8_md(T(x, yi)->shape.dim, &ymd, err));
    pprt_wino *wn;
    PP_TRY(pprt_wino_create(sh, x->ptr[wi], bi >= 0 ? x->ptr[bi] : NULL, x->stage_threads, &wn, err));
    const dnnl_dims_t scb = {(dnnl_dim_t)pprt_wino_scratch_bytes(wn)};
    dnnl_memory_t sm, dm, scm, zm = NULL;
    post out;
    pp_status r;
    dnnl_status_t ds = dnnl_memory_desc_init_by_tag(&scmd, 1, scb, dnnl_u8, dnnl_a);
    if (ds != dnnl_success) r = dn_fail(err, "memory descriptor", ds);
    else if ((r = bind_input(x, xi, &xmd, SLOT_SRC, &sm, err)) == PP_OK &&
             (r = bind_output(x, yi, &ymd, &dm, &out, err)) == PP_OK &&
             (r = slot_mem(x, &scmd, SLOT_SCRATCH, &scm, err)) == PP_OK && zi >= 0)
        r = bind_input(x, zi, &ymd, SLOT_WEI, &zm, err); /* SLOT_WEI: the weights here are constant */
    if (r == PP_OK && !GROW(x->steps, x->cap_steps, x->n_steps + 1)) r = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (r != PP_OK) {
        pprt_wino_free(wn);
        return r;
    }
    step s = {.kind = STEP_MAIN, .threads = x->build_threads, .wino = wn, .lo = lo, .hi = hi, .nargs = 3};
    s.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    s.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    s.args[2] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scm};
    if (zm) s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, zm};
    x->steps[x->n_steps++] = s;
    x->weight_bytes += pprt_wino_weight_bytes(wn);
    x->owned_bytes += pprt_wino_weight_bytes(wn);
    return push_post(x, &out, err);
}

/* Output yi of node n takes over the bytes of its input xi (stored as xmd)
 * where n is xi's last reader and yi will be stored as the primitive writes
 * it (dst_md equal to xmd; arena activations both): no second buffer to
 * fill, so fewer bytes through the caches. For primitives that allow dst ==
 * src (oneDNN's eltwise, binary with src0, and a convolution's sum post-op
 * with its residual). PPRT_DNNL_INPLACE=0: never. */
static pp_status write_in_place(pprt_exec *x, const pprt_node *n, int xi, const dnnl_memory_desc_t *xmd, int yi,
                                const dnnl_memory_desc_t *dst_md, pp_err *err) {
    dnnl_memory_desc_t yp;
    PP_TRY(tensor_plain(x, yi, &yp, err));
    if (x->inplace && x->last[xi] == (int)(n - x->st->nodes) && x->kind[xi] == PPRT_ACTIVATION &&
        x->kind[yi] == PPRT_ACTIVATION && !x->ghost[xi] && x->alias[yi] < 0 && dnnl_memory_desc_equal(xmd, dst_md) &&
        (x->flex[yi] || dnnl_memory_desc_equal(dst_md, &yp)))
        x->alias[yi] = xi;
    return PP_OK;
}


/* The bytes the memories of a step of our own kernels point at now. */
static dnnl_status_t step_ptrs(const step *s, void *p[4]) {
    for (int i = 0; i < 4; i++) p[i] = NULL; /* source, destination, scratch, residual */
    for (int i = 0; i < s->nargs; i++) {
        const int a = s->args[i].arg;
        const int k = a == DNNL_ARG_SRC ? 0 : a == DNNL_ARG_DST ? 1 : a == DNNL_ARG_SCRATCHPAD ? 2 : 3;
        dnnl_status_t ds = dnnl_memory_get_data_handle(s->args[i].memory, &p[k]);
        if (ds != dnnl_success) return ds;
    }
    return dnnl_success;
}

/* Run a step of our Winograd kernel on them, on the calling thread's OpenMP
 * team (set for the step by dnnl_run). */
static dnnl_status_t run_wino(const step *s) {
    void *p[4];
    dnnl_status_t ds = step_ptrs(s, p);
    if (ds != dnnl_success) return ds;
    omp_get_fn *get = omp_getter();
    pprt_wino_run(s->wino, p[0], p[1], p[3], s->lo, s->hi, p[2], get ? get() : 1);
    return dnnl_success;
}

/* The same for a step of our SiLU kernel (args: SRC, DST). */
static dnnl_status_t run_silu(const step *s) {
    void *p[4];
    dnnl_status_t ds = step_ptrs(s, p);
    if (ds != dnnl_success) return ds;
    omp_get_fn *get = omp_getter();
    pprt_silu(p[0], p[1], s->silu, get ? get() : 1);
    return dnnl_success;
}

/* The same for a NaN pass of ours (nanfix.h; args: SRC, DST). */
static dnnl_status_t run_fix(const step *s) {
    void *p[4];
    dnnl_status_t ds = step_ptrs(s, p);
    if (ds != dnnl_success) return ds;
    omp_get_fn *get = omp_getter();
    pprt_nanfix_run(&s->fix, p[0], p[1], get ? get() : 1);
    return dnnl_success;
}

/* Append step f of ours reading src and writing dst (which may be the same memory). */
static pp_status push_fix(pprt_exec *x, const pprt_nanfix *f, dnnl_memory_t src, dnnl_memory_t dst, pp_err *err) {
    if (!GROW(x->steps, x->cap_steps, x->n_steps + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    step st = {.kind = STEP_MAIN, .threads = x->build_threads, .nargs = 2, .fix = *f};
    st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
    st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
    x->steps[x->n_steps++] = st;
    return PP_OK;
}

/* A NaN-keeping clamp to [lo, hi] over every float of md's buffer (a
 * blocked layout's padding too: it stays 0 when lo <= 0 <= hi, which the
 * callers check). */
static pprt_nanfix clamp_fix(const dnnl_memory_desc_t *md, float lo, float hi) {
    const bool bf16 = md->data_type == dnnl_bf16;
    return (pprt_nanfix){.kind = PPRT_NANFIX_CLAMP, .n = dnnl_memory_desc_get_size(md) / (bf16 ? 2 : sizeof(float)),
                         .lo = lo, .hi = hi, .bf16 = bf16};
}

/* Relu as oneDNN post-ops that keep NaN: its relu (and clip) computes
 * max(x, 0), which gives 0 for NaN; elu with alpha 0 is x > 0 ? x :
 * 0 * (exp(x) - 1), NaN for NaN and -0 for the rest, and the linear 1x + 0
 * makes those +0 (docs/design-notes.md, "NaN and infinities"). */
static dnnl_status_t append_relu(const pprt_exec *x, dnnl_post_ops_t po, int *idx) {
    if (x->relu_max) { /* PPRT_DNNL_RELU=max: oneDNN's relu, for A/B timings only */
        (*idx)++;
        return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0);
    }
    dnnl_status_t s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_elu, 0, 0);
    if (s == dnnl_success) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f, 0);
    *idx += 2;
    return s;
}

static pp_status build_conv(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    const int xi = n->in[0], wi = n->in[1], yi = final_out(x, n);
    const int bi = has_in(n, 2) ? n->in[2] : -1, zi = has_in(n, 3) ? n->in[3] : -1;
    const pp_shape *xs = &T(x, xi)->shape, *ws = &T(x, wi)->shape, *ys = &T(x, yi)->shape;
    const int nd = xs->rank;
    if (nd < 3 || nd > 5 || ws->rank != nd) return unsup(err, "rank");
    /* the residual: added by a binary post-op reading Z, or copied into the
     * destination for a sum post-op */
    const bool zsum = zi >= 0 && x->residual_sum;
    dnnl_memory_desc_t z_md;
    /* bf16: sources and weights in bf16; the output too where it stays
     * between oneDNN nodes (else f32, as the reference kernels read it) */
    const dnnl_data_type_t cdt = x->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t dst_any;
    PP_TRY(any_md(ys->dim, nd, x->flex[yi] ? cdt : dnnl_f32, &dst_any, err));

    if (zi >= 0 && !zsum) PP_TRY(operand_md(x, zi, ys, &dst_any, &z_md, err));
    int64_t group;
    PP_TRY(pp_attr_int(a, "group", 1, &group, err));
    const int64_t C = xs->dim[1], OC = ws->dim[0];
    if (group < 1 || C % group || OC % group || ws->dim[1] * group != C) return unsup(err, "group");
    pp_geom g;
    PP_TRY(pp_geom_make(a, xs, &ws->dim[2], false, &g, err));
    for (int i = 0; i < g.nsp; i++)
        if (g.out[i] != ys->dim[2 + i]) return unsup(err, "geometry");
    if (zi >= 0 && !pp_shape_eq(&T(x, zi)->shape, ys)) return unsup(err, "residual shape");
    const char *act = "";
    float lo = -INFINITY, hi = INFINITY;
    if (n->op == PP_OP_FUSEDCONV) {
        PP_TRY(pp_attr_string(a, "activation", "", &act, err));
        PP_TRY(pp_attr_float(a, "clip_min", -INFINITY, &lo, err));
        PP_TRY(pp_attr_float(a, "clip_max", INFINITY, &hi, err));
        if (strcmp(act, "") && strcmp(act, "Relu") && strcmp(act, "Clip")) return unsup(err, "activation");
        if (!strcmp(act, "Clip") && !(lo <= hi)) return unsup(err, "clip bounds");
    }

    dnnl_memory_desc_t src_any, w_any, w_plain, b_md;
    int64_t wd[6];
    int wn = 0;
    if (group > 1) wd[wn++] = group;
    wd[wn++] = OC / group;
    wd[wn++] = ws->dim[1];
    for (int i = 2; i < nd; i++) wd[wn++] = ws->dim[i];
    PP_TRY(any_md(xs->dim, nd, cdt, &src_any, err));
    PP_TRY(any_md(wd, wn, cdt, &w_any, err));
    PP_TRY(plain_md(wd, wn, &w_plain, err));
    PP_TRY(plain_md(&OC, 1, &b_md, err));
    const dnnl_memory_desc_t *bias = bi >= 0 ? &b_md : NULL;
    const bool wino_shape = x->wino && !x->bf16 && nd == 4 && group == 1 && ws->dim[2] == 3 && ws->dim[3] == 3 &&
                            g.stride[0] == 1 && g.stride[1] == 1 && g.dil[0] == 1 && g.dil[1] == 1;
    /* our own Winograd kernel where oneDNN has none (below AVX-512), for a
     * node absorbing nothing, with constant weights and bias. The choice
     * depends on the node alone (never on its neighbours' layouts), so
     * outputs do not depend on where the stages are cut. */
    const pprt_wino_shape wsh = {xs->dim[0], C, OC, xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3],
                                 g.pad0[0],  g.pad0[1], x->wino_tile};
    if (wino_shape && x->n_fused == 0 && is_weight(x, wi) && (bi < 0 || is_weight(x, bi)) && pprt_wino_cpu() &&
        pprt_wino_fits(&wsh)) {
        dnnl_primitive_desc_t theirs = NULL;
        conv_pd(&theirs, dnnl_convolution_winograd, &src_any, &w_any, bias, &dst_any, &g, NULL, x->eng);
        if (theirs) dnnl_primitive_desc_destroy(theirs);
        else return build_wino(x, &wsh, xi, wi, bi, zi, yi, !strcmp(act, "Relu") ? 0.0f : lo, hi, err);
    }
    /* Relu: oneDNN's relu gives 0 for NaN, so a pass of ours clamps after
     * the primitive (nanfix.h); only when nodes after it are absorbed too,
     * the NaN-keeping post-ops of append_relu (slower: an exp per element,
     * which its Winograd kernels do not take). Clip: oneDNN's gives a bound
     * for NaN, so always such a pass, and nothing absorbed after it. */
    const bool relu = !strcmp(act, "Relu"), relu_pass = relu && !x->n_fused && !x->relu_max;
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_post_ops_t po = NULL;
    dnnl_exec_arg_t args[MAX_ARGS];
    int na = 0, idx = 0;
    dnnl_memory_t zm;
    pp_status r = PP_OK;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && zsum) s = dnnl_post_ops_append_sum(po, 1.0f), idx++;
    if (s == dnnl_success && zi >= 0 && !zsum) {
        s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &z_md), idx++;
        if (s == dnnl_success && (r = tensor_mem(x, zi, &z_md, &zm, err)) == PP_OK)
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, zm};
    }
    if (s == dnnl_success && relu && !relu_pass) s = append_relu(x, po, &idx);
    const bool clamp = !strcmp(act, "Clip") || relu_pass;
    if (relu_pass) lo = 0, hi = INFINITY;
    if (clamp && (x->n_fused || lo > 0 || hi < 0)) r = unsup(err, "Clip with post-ops or a bound beyond 0");
    if (s == dnnl_success && r == PP_OK) r = append_fused(x, po, idx, &dst_any, NULL, args, &na, err);
    if (s == dnnl_success && r == PP_OK) s = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success && r == PP_OK && wino_shape) /* none where oneDNN has no such kernel: direct below */
        conv_pd(&pd, dnnl_convolution_winograd, &src_any, &w_any, bias, &dst_any, &g, attr, x->eng);
    const bool wino = pd != NULL;
    if (s == dnnl_success && r == PP_OK && !pd)
        s = conv_pd(&pd, dnnl_convolution_direct, &src_any, &w_any, bias, &dst_any, &g, attr, x->eng);
    if (s == dnnl_success && r == PP_OK && x->follow && !wino && x->blocked[xi]) {
        /* a source already in a blocked layout: take it as it is when a
         * non-reference kernel reads that layout (saves a reorder) */
        const dnnl_memory_desc_t *cur = &x->lay[xi];
        dnnl_primitive_desc_t fpd = NULL;
        const char *impl = "ref";
        if (cur->data_type == cdt &&
            !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), cur) &&
            conv_pd(&fpd, dnnl_convolution_direct, cur, &w_any, bias, &dst_any, &g, attr, x->eng) == dnnl_success &&
            dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
            strncmp(impl, "ref", 3) && strncmp(impl, "gemm", 4)) {
            dnnl_primitive_desc_destroy(pd);
            pd = fpd;
        } else if (fpd)
            dnnl_primitive_desc_destroy(fpd);
    }
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    PP_TRY(r);
    DN(s, "convolution");
    if (!whole_operands_fit(x, pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "a binary post-op operand in another layout than the output");
    }

    dnnl_memory_t sm, wm, bm = NULL, dm;
    post out;
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* the sum in place: when this node is Z's last reader and Z is stored as
     * the primitive writes its output (an arena activation both), the output
     * takes over Z's bytes and Z is not copied */
    bool in_place = false;
    if (zsum && zi != xi && zi != wi && zi != bi) {
        dnnl_memory_desc_t zl;
        if ((r = tensor_layout(x, zi, &zl, err)) != PP_OK || (r = write_in_place(x, n, zi, &zl, yi, dst_md, err)) != PP_OK)
            goto fail;
        in_place = x->alias[yi] == zi;
    }
    /* a constant W is reordered once; a computed one every run */
    if (is_weight(x, wi)) r = weight_mem(x, wi, &w_plain, w_md, &wm, err);
    else if (x->blocked[wi]) r = PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, wi)->name);
    else r = bind_view(x, wi, &w_plain, w_md, SLOT_WEI, &wm, err);
    if (r != PP_OK) goto fail;
    if (bi >= 0 && (r = plain_view(x, bi, &b_md, &bm, err)) != PP_OK) goto fail;
    if ((r = bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK) goto fail;
    if ((r = bind_input(x, xi, src_md, SLOT_SRC, &sm, err)) != PP_OK) goto fail;
    if (zsum && !in_place) {
        /* the sum post-op accumulates into the destination: copy Z there first */
        dnnl_memory_desc_t zl;
        if ((r = tensor_layout(x, zi, &zl, err)) != PP_OK || (r = tensor_mem(x, zi, &zl, &zm, err)) != PP_OK ||
            (r = push_reorder(x, zm, dm, STEP_COPY, err)) != PP_OK)
            goto fail;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wm};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    if (bi >= 0) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
    const pprt_nanfix f = clamp ? clamp_fix(dst_md, lo, hi) : (pprt_nanfix){0}; /* dst_md dies with pd */
    if ((r = push_pd(x, pd, STEP_MAIN, args, na, err)) != PP_OK) return r;
    if (clamp) PP_TRY(push_fix(x, &f, dm, dm, err));
    return push_post(x, &out, err);
fail:
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* ---- pooling -------------------------------------------------------------------------- */

/* md as nanfix.h's layout: plain, or blocked on channels (dim 1) only. */
static bool fix_layout(const dnnl_memory_desc_t *md, pprt_nanfix_layout *l) {
    if (md->format_kind != dnnl_blocked || md->offset0 != 0 || md->ndims > 5) return false;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks > 1 || (b->inner_nblks == 1 && b->inner_idxs[0] != 1)) return false;
    l->cblock = b->inner_nblks ? b->inner_blks[0] : 1;
    for (int d = 0; d < md->ndims; d++) l->stride[d] = b->strides[d];
    return true;
}

/* Whether primitive descriptor pd runs one of oneDNN's JIT kernels. */
static bool jit_impl(const_dnnl_primitive_desc_t pd) {
    const char *impl = "ref";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return strncmp(impl, "jit", 3) == 0;
}

static pp_status pool_pd(pprt_exec *x, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *src,
                         const dnnl_memory_desc_t *dst, const dnnl_dim_t *strides, const dnnl_dim_t *kernel,
                         const dnnl_dim_t *dil, const dnnl_dim_t *pl, const dnnl_dim_t *pr, dnnl_primitive_desc_t *pd,
                         pp_err *err) {
    dnnl_pooling_v2_desc_t d;
    DN(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, alg, src, dst, strides, kernel, dil, pl, pr),
       "pooling");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_status_t s = dnnl_primitive_desc_create(pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "pooling");
    return PP_OK;
}

static pp_status build_pool(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    const int xi = n->in[0], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape, *ys = &T(x, yi)->shape;
    const int nd = xs->rank;
    if (nd < 3 || nd > 5) return unsup(err, "rank");
    dnnl_alg_kind_t alg = dnnl_pooling_max;
    dnnl_dims_t strides, kernel, dil, pl, pr;
    const int nsp = nd - 2;
    if (n->op == PP_OP_GLOBALAVGPOOL || n->op == PP_OP_GLOBALMAXPOOL) {
        alg = n->op == PP_OP_GLOBALAVGPOOL ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max;
        for (int i = 0; i < nsp; i++) {
            strides[i] = 1;
            kernel[i] = xs->dim[2 + i];
            dil[i] = pl[i] = pr[i] = 0;
        }
    } else {
        pp_geom g;
        PP_TRY(pp_geom_make(a, xs, NULL, true, &g, err));
        int64_t cip = 0;
        if (n->op == PP_OP_AVGPOOL) {
            PP_TRY(pp_attr_int(a, "count_include_pad", 0, &cip, err));
            alg = cip ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
        }
        for (int i = 0; i < nsp; i++) {
            const int64_t ext = g.dil[i] * (g.k[i] - 1) + 1;
            if (g.out[i] != ys->dim[2 + i]) return unsup(err, "geometry");
            strides[i] = g.stride[i];
            kernel[i] = g.k[i];
            dil[i] = g.dil[i] - 1;
            pl[i] = g.pad0[i];
            /* right padding that gives out[i] windows (more than pad1 under ceil_mode) */
            int64_t r = g.pad1[i];
            if ((g.in[i] + g.pad0[i] + r - ext) / g.stride[i] + 1 != g.out[i])
                r = (g.out[i] - 1) * g.stride[i] + ext - g.in[i] - g.pad0[i];
            pr[i] = r;
            /* windows entirely in the padding, and padding counted beyond the
             * explicit pads, differ from the ONNX definition */
            if (pl[i] >= ext || pr[i] >= ext || pr[i] < 0) return unsup(err, "padding as large as the window");
            if (cip && pr[i] > g.pad1[i]) return unsup(err, "count_include_pad with ceil_mode padding");
        }
    }
    dnnl_memory_desc_t src, dst_any;
    PP_TRY(tensor_layout(x, xi, &src, err));
    PP_TRY(any_md(ys->dim, nd, src.data_type, &dst_any, err));
    dnnl_primitive_desc_t pd;
    PP_TRY(pool_pd(x, alg, &src, &dst_any, strides, kernel, dil, pl, pr, &pd, err));
    if (nd >= 4 && x->propagate && !jit_impl(pd)) {
        /* a source in a layout no JIT kernel takes gets oneDNN's simple_nchw
         * or ref kernel, 14x slower than its JIT ones on digits' first pool
         * after a cut: a plain one (a received tensor, a plan input), or one
         * blocked by a producer whose kernel is for another ISA (AVX2's 8
         * channels on an AVX-512 CPU). Read it reordered into the first
         * layout a JIT kernel takes: AVX-512's 16-channel blocks, AVX2's 8,
         * channels last. */
        static const dnnl_format_tag_t tags[2][3] = {{dnnl_aBcd16b, dnnl_aBcd8b, dnnl_acdb},
                                                     {dnnl_aBcde16b, dnnl_aBcde8b, dnnl_acdeb}};
        for (int k = 0; k < 3; k++) {
            dnnl_memory_desc_t blk;
            dnnl_primitive_desc_t bpd = NULL;
            if (dnnl_memory_desc_init_by_tag(&blk, nd, src.dims, src.data_type, tags[nd - 4][k]) != dnnl_success)
                continue;
            if (pool_pd(x, alg, &blk, &dst_any, strides, kernel, dil, pl, pr, &bpd, err) != PP_OK) continue;
            if (!jit_impl(bpd)) {
                dnnl_primitive_desc_destroy(bpd);
                continue;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = bpd;
            src = blk;
            break;
        }
    }
    pp_status r;
    dnnl_memory_t sm, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* max pooling: oneDNN answers a window of only NaN or -inf with -FLT_MAX,
     * which a pass of ours after it corrects (nanfix.h) */
    pprt_nanfix fix = {0};
    if (alg == dnnl_pooling_max) {
        const bool bf16 = src.data_type == dnnl_bf16;
        fix = (pprt_nanfix){.kind = PPRT_NANFIX_MAXPOOL, .nsp = nsp, .N = xs->dim[0], .C = xs->dim[1], .bf16 = bf16,
                            .dst_n = dnnl_memory_desc_get_size(dst_md) / (bf16 ? 2 : sizeof(float))};
        for (int i = 0; i < nsp; i++) {
            fix.in[i] = xs->dim[2 + i], fix.out[i] = ys->dim[2 + i], fix.k[i] = kernel[i];
            fix.stride[i] = strides[i], fix.dil[i] = dil[i] + 1, fix.pad[i] = pl[i];
        }
        if ((src.data_type != dnnl_f32 && !bf16) || dst_md->data_type != src.data_type || !fix_layout(&src, &fix.src) ||
            !fix_layout(dst_md, &fix.dst)) {
            dnnl_primitive_desc_destroy(pd);
            return unsup(err, "a layout that the max pooling NaN pass cannot read");
        }
    }
    if ((r = bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (r = bind_input(x, xi, &src, SLOT_SRC, &sm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    PP_TRY(push_pd(x, pd, STEP_MAIN, args, 2, err));
    if (fix.kind) PP_TRY(push_fix(x, &fix, sm, dm, err));
    return push_post(x, &out, err);
}

/* ---- BatchNormalization ------------------------------------------------------------------- */

static pp_status build_bn(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    const int xi = n->in[0], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape;
    if (xs->rank < 2 || xs->rank > 5) return unsup(err, "rank");
    for (int k = 1; k < 5; k++)
        if (T(x, n->in[k])->shape.rank != 1 || T(x, n->in[k])->shape.dim[0] != xs->dim[1])
            return unsup(err, "statistics shape");
    float eps;
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    dnnl_memory_desc_t src, cmd;
    PP_TRY(tensor_layout(x, xi, &src, err));
    PP_TRY(plain_md(&xs->dim[1], 1, &cmd, err));
    dnnl_batch_normalization_desc_t d;
    DN(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_inference, &src, eps,
                                                  dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift),
       "batch normalization");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "batch normalization");
    pp_status r;
    dnnl_memory_t sm, dm, m[4];
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    for (int k = 0; k < 4; k++)
        if ((r = tensor_mem(x, n->in[1 + k], &cmd, &m[k], err)) != PP_OK) goto fail;
    if ((r = bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (r = bind_input(x, xi, src_md, SLOT_SRC, &sm, err)) != PP_OK)
        goto fail;
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, sm},       {DNNL_ARG_DST, dm},      {DNNL_ARG_SCALE, m[0]},
                               {DNNL_ARG_SHIFT, m[1]},   {DNNL_ARG_MEAN, m[2]},   {DNNL_ARG_VARIANCE, m[3]}};
    PP_TRY(push_pd(x, pd, STEP_MAIN, args, 6, err));
    return push_post(x, &out, err);
fail:
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* ---- LayerNormalization -------------------------------------------------------------------- */

static pp_status build_ln(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    const int xi = n->in[0], si = n->in[1], bi = has_in(n, 2) ? n->in[2] : -1, yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape;
    int64_t axis64, stash;
    int axis;
    float eps;
    PP_TRY(pp_attr_int(a, "axis", -1, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, xs->rank, "attribute 'axis'", &axis, err));
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    PP_TRY(pp_attr_int(a, "stash_type", 1, &stash, err));
    if (stash != 1) return unsup(err, "stash_type");
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < axis; i++) dims[0] *= xs->dim[i];
    for (int i = axis; i < xs->rank; i++) dims[1] *= xs->dim[i];
    /* scale and bias must cover the normalized extent (no broadcasting) */
    if (numel_of(&T(x, si)->shape) != dims[1] || (bi >= 0 && numel_of(&T(x, bi)->shape) != dims[1]))
        return unsup(err, "broadcast scale or bias");
    dnnl_memory_desc_t data, stat, vec;
    PP_TRY(plain_md(dims, 2, &data, err));
    PP_TRY(plain_md(dims, 1, &stat, err));
    PP_TRY(plain_md(&dims[1], 1, &vec, err));
    dnnl_layer_normalization_desc_t d;
    DN(dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_inference, &data, &stat, eps,
                                                  dnnl_use_scale | (bi >= 0 ? dnnl_use_shift : 0)),
       "layer normalization");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "layer normalization");
    pp_status r = PP_OK;
    dnnl_exec_arg_t args[6];
    int na = 0;
    dnnl_memory_t m;
    if ((r = plain_view(x, xi, &data, &m, err)) != PP_OK) goto fail;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m};
    if ((r = tensor_mem(x, yi, &data, &m, err)) != PP_OK) goto fail;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m};
    if ((r = tensor_mem(x, si, &vec, &m, err)) != PP_OK) goto fail;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE, m};
    if (bi >= 0) {
        if ((r = tensor_mem(x, bi, &vec, &m, err)) != PP_OK) goto fail;
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SHIFT, m};
    }
    /* statistics the primitive computes on the side, when it asks for memory for them */
    static const int stat_args[2] = {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    for (int k = 0; k < 2; k++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, stat_args[k]);
        if (!md || md->ndims == 0) continue;
        void *buf = own_alloc(x, dnnl_memory_desc_get_size(md));
        if (!buf) {
            r = PP_FAIL(err, PP_ENOMEM, "out of memory");
            goto fail;
        }
        if ((r = new_mem(x, md, buf, &m, err)) != PP_OK) goto fail;
        args[na++] = (dnnl_exec_arg_t){stat_args[k], m};
    }
    return push_pd(x, pd, STEP_MAIN, args, na, err);
fail:
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* ---- Softmax, LogSoftmax ----------------------------------------------------------------------- */

static pp_status build_softmax(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    int64_t dims[3];
    PP_TRY(pp_softmax_split(a, &T(x, n->in[0])->shape, &dims[0], &dims[1], &dims[2], err));
    dnnl_memory_desc_t md;
    PP_TRY(plain_md(dims, 3, &md, err));
    dnnl_softmax_v2_desc_t d;
    DN(dnnl_softmax_v2_forward_desc_init(&d, dnnl_forward_inference,
                                         n->op == PP_OP_LOGSOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate, &md,
                                         &md, 1),
       "softmax");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "softmax");
    pp_status r;
    dnnl_memory_t sm, dm;
    if ((r = plain_view(x, n->in[0], &md, &sm, err)) != PP_OK ||
        (r = tensor_mem(x, n->out[0], &md, &dm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    PP_TRY(push_pd(x, pd, STEP_MAIN, args, 2, err));
    /* a row with a NaN or +inf is all NaN, as in the reference kernel (oneDNN
     * gives NaN only where the row had one; nanfix.h) */
    const pprt_nanfix f = {.kind = PPRT_NANFIX_ROWS, .outer = dims[0], .len = dims[1], .inner = dims[2]};
    return push_fix(x, &f, dm, dm, err);
}

/* ---- eltwise ------------------------------------------------------------------------------------ */

/* The eltwise algorithm of a unary op; false when oneDNN has none for it. */
/* Whether node n clamps (Relu, Clip with constant
 * bounds; ONNX's default bounds are the float range): then it runs as a
 * NaN-keeping clamp of ours to [lo, hi], as oneDNN's relu and clip give 0 or
 * a bound for NaN. */
static bool clamp_of(const pprt_exec *x, const pprt_node *n, float *lo, float *hi) {
    pp_attrs a = attrs_of(x, n);
    *lo = 0, *hi = INFINITY;
    if (n->op == PP_OP_RELU) return true;
    if (n->op != PP_OP_CLIP) return false;
    *lo = -FLT_MAX, *hi = FLT_MAX;
    if (a.opset < 11)
        return pp_attr_float(a, "min", -FLT_MAX, lo, NULL) == PP_OK &&
               pp_attr_float(a, "max", FLT_MAX, hi, NULL) == PP_OK && *lo <= *hi;
    for (int k = 1; k < 3; k++) {
        if (!has_in(n, k)) continue;
        const int b = n->in[k];
        if (!is_weight(x, b) || numel_of(&T(x, b)->shape) != 1 || !T(x, b)->data) return false;
        *(k == 1 ? lo : hi) = *(const float *)T(x, b)->data;
    }
    return *lo <= *hi; /* also not NaN */
}

static pp_status eltwise_of(const pprt_exec *x, const pprt_node *n, dnnl_alg_kind_t *alg, float *alpha,
                            float *beta, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    *alpha = *beta = 0;
    switch (n->op) {
    case PP_OP_RELU: *alg = dnnl_eltwise_relu; return PP_OK;
    case PP_OP_LEAKYRELU: /* alpha 0 is not Relu: 0 * -inf is NaN, which oneDNN's max(x, 0) does not give */
        *alg = dnnl_eltwise_relu;
        PP_TRY(pp_attr_float(a, "alpha", 0.01f, alpha, err));
        return *alpha == 0 ? unsup(err, "LeakyRelu with alpha 0") : PP_OK;
    case PP_OP_ELU: *alg = dnnl_eltwise_elu; return pp_attr_float(a, "alpha", 1.0f, alpha, err);
    case PP_OP_SIGMOID: *alg = dnnl_eltwise_logistic; return PP_OK;
    case PP_OP_TANH: *alg = dnnl_eltwise_tanh; return PP_OK;
    case PP_OP_SILU: *alg = dnnl_eltwise_swish, *alpha = 1.0f; return PP_OK;
    case PP_OP_LOG: *alg = dnnl_eltwise_log; return PP_OK;
    case PP_OP_SQRT: *alg = dnnl_eltwise_sqrt; return PP_OK;
    case PP_OP_ABS: *alg = dnnl_eltwise_abs; return PP_OK;
    case PP_OP_NEG: *alg = dnnl_eltwise_linear, *alpha = -1.0f; return PP_OK;
    case PP_OP_HARDSWISH: *alg = dnnl_eltwise_hardswish; return PP_OK;
    case PP_OP_SOFTPLUS: *alg = dnnl_eltwise_soft_relu; return PP_OK;
    case PP_OP_GELU: {
        const char *ap;
        PP_TRY(pp_attr_string(a, "approximate", "none", &ap, err));
        if (!strcmp(ap, "none")) *alg = dnnl_eltwise_gelu_erf;
        else if (!strcmp(ap, "tanh")) *alg = dnnl_eltwise_gelu_tanh;
        else return unsup(err, "approximate");
        return PP_OK;
    }
    /* oneDNN's clip gives a bound for NaN, its exp inf: ours or the reference kernels */
    case PP_OP_CLIP: return unsup(err, "NaN: oneDNN's clip gives a bound for it");
    case PP_OP_EXP: return unsup(err, "NaN: oneDNN's exp gives inf for it");
    default: return unsup(err, "op");
    }
}

static pp_status build_eltwise(pprt_exec *x, const pprt_node *n, pp_err *err) {
    PP_TRY(need_f32_nonempty(x, n, err));
    dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
    float alpha = 1, beta = 0, lo, hi;
    const bool own_clamp = clamp_of(x, n, &lo, &hi); /* then the primitive only lays out */
    if (own_clamp) alg = dnnl_eltwise_linear;
    else PP_TRY(eltwise_of(x, n, &alg, &alpha, &beta, err));
    dnnl_memory_desc_t src;
    PP_TRY(tensor_layout(x, n->in[0], &src, err));
    if (own_clamp && ((lo > 0 || hi < 0) && dnnl_memory_desc_get_size(&src) != T(x, n->in[0])->nbytes))
        return unsup(err, "a clamp that would change a blocked layout's padding");
    if (own_clamp && src.data_type != dnnl_f32 && src.data_type != dnnl_bf16)
        return unsup(err, "a clamp of other than f32 or bf16");
    dnnl_eltwise_desc_t d;
    DN(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, alg, &src, alpha, beta), "eltwise");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "eltwise");
    pp_status r;
    dnnl_memory_t sm, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if ((r = write_in_place(x, n, n->in[0], &src, n->out[0], dst_md, err)) != PP_OK ||
        (r = bind_output(x, n->out[0], dst_md, &dm, &out, err)) != PP_OK ||
        (r = bind_input(x, n->in[0], &src, SLOT_SRC, &sm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    if (own_clamp) {
        const pprt_nanfix f = clamp_fix(&src, lo, hi);
        dnnl_primitive_desc_destroy(pd);
        PP_TRY(push_fix(x, &f, sm, dm, err));
        return push_post(x, &out, err);
    }
    if (n->op == PP_OP_SILU && x->own_silu && src.data_type == dnnl_f32 && dnnl_memory_desc_equal(&src, dst_md)) {
        /* our kernel over every float of the layout (a blocked one's
         * padding included: silu(0) = 0 keeps it zero) */
        step st = {.kind = STEP_MAIN, .threads = x->build_threads, .nargs = 2,
                   .silu = dnnl_memory_desc_get_size(&src) / sizeof(float)};
        dnnl_primitive_desc_destroy(pd);
        if (!st.silu) return unsup(err, "empty");
        if (!GROW(x->steps, x->cap_steps, x->n_steps + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        st.args[0] = args[0], st.args[1] = args[1];
        x->steps[x->n_steps++] = st;
        return push_post(x, &out, err);
    }
    PP_TRY(push_pd(x, pd, STEP_MAIN, args, 2, err));
    return push_post(x, &out, err);
}

/* ---- views: Reshape, Flatten, Squeeze, Unsqueeze, Transpose ---------------------------------- */

/* Whether Transpose perm of shape s keeps the bytes in place: the axes
 * longer than 1 keep their order, so only 1-long axes move. */
static bool moves_no_bytes(const pp_shape *s, const int64_t *perm) {
    int64_t prev = -1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[perm[i]] == 1) continue;
        if (perm[i] < prev) return false;
        prev = perm[i];
    }
    return true;
}

/* A Transpose that does move bytes: one oneDNN reorder from a strided view
 * of the (plain) input to the plain output, threaded like the other nodes
 * (the reference kernel copies element by element on one thread). */
static pp_status build_transpose(pprt_exec *x, const pprt_node *n, const int64_t *perm, pp_err *err) {
    const pp_shape *s = &T(x, n->in[0])->shape;
    dnnl_dims_t d, st;
    int64_t ist[PP_MAX_DIMS];
    pp_shape_strides(s, ist);
    for (int i = 0; i < s->rank; i++) d[i] = s->dim[perm[i]], st[i] = ist[perm[i]];
    dnnl_memory_desc_t from, to;
    DN(dnnl_memory_desc_init_by_strides(&from, s->rank, d, dnnl_f32, st), "memory descriptor");
    PP_TRY(tensor_plain(x, n->out[0], &to, err));
    dnnl_memory_t sm, dm;
    post po;
    PP_TRY(plain_view(x, n->in[0], &from, &sm, err));
    PP_TRY(bind_output(x, n->out[0], &to, &dm, &po, err));
    PP_TRY(push_reorder(x, sm, dm, STEP_MAIN, err));
    return push_post(x, &po, err);
}

/* A node that only renames the bytes of its input runs as nothing: its
 * output takes over the input's arena bytes (an alias, see plan_arena)
 * where the input is a plain arena tensor that dies there. Elsewhere
 * (a received input, a sent output, an input read later) the reference
 * kernel copies. A Transpose that moves bytes is a reorder. */
static pp_status build_view(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (!x->views) return unsup(err, "views are off (PPRT_DNNL_VIEWS=0)");
    const int in = n->in[0], out = n->out[0], ni = (int)(n - x->st->nodes);
    if (!f32(x, in) || !f32(x, out) || numel_of(&T(x, in)->shape) == 0)
        return unsup(err, "not a non-empty f32 tensor");
    if (T(x, in)->nbytes != T(x, out)->nbytes) return unsup(err, "input and output sizes differ");
    if (n->op == PP_OP_TRANSPOSE) {
        const pp_shape *s = &T(x, in)->shape;
        int64_t perm[PP_MAX_DIMS];
        /* a bad perm is the reference kernel's to report */
        if (pp_transpose_perm(attrs_of(x, n), s->rank, perm, err) != PP_OK) return unsup(err, "bad 'perm'");
        if (!moves_no_bytes(s, perm)) {
            /* rows stay whole: the reference kernel copies them as fast */
            if (perm[s->rank - 1] == s->rank - 1) return unsup(err, "the last axis stays (copied by rows)");
            return build_transpose(x, n, perm, err);
        }
    }
    if (x->kind[in] != PPRT_ACTIVATION || x->kind[out] != PPRT_ACTIVATION || x->blocked[in] || x->ghost[in] ||
        x->last[in] != ni || x->alias[out] >= 0)
        return unsup(err, "its input is not an arena tensor that dies here (copied)");
    x->alias[out] = in;
    return PP_OK;
}

/* A Slice with unit steps: one oneDNN reorder from a sub-memory of the
 * plain input (the window at its offset, the input's strides) to the plain
 * output, threaded (the reference kernel copies on one thread). ViT's three
 * per layer take the query, key and value out of one [197, 1, 2304] product. */
static pp_status build_slice(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0], out = n->out[0];
    if (!f32(x, in) || !f32(x, out) || numel_of(&T(x, out)->shape) == 0)
        return unsup(err, "not a non-empty f32 tensor");
    if (x->blocked[in]) return unsup(err, "its input is in a blocked layout");
    pp_tinfo ti[5];
    if (n->n_in > 5) return unsup(err, "more than 5 inputs");
    for (int k = 0; k < n->n_in; k++) {
        const int t = n->in[k];
        ti[k] = t < 0 ? (pp_tinfo){.dtype = PP_UNDEFINED}
                      : (pp_tinfo){T(x, t)->dtype, T(x, t)->shape, is_weight(x, t) ? x->ptr[t] : NULL};
    }
    pp_slice sl;
    /* starts and ends are constants in every plan ppcc writes; anything else is the reference kernel's */
    if (pp_slice_parse(attrs_of(x, n), ti, n->n_in, &sl, err) != PP_OK) return unsup(err, "not a constant window");
    const pp_shape *s = &T(x, in)->shape;
    if (!pp_shape_eq(&sl.out, &T(x, out)->shape)) return unsup(err, "the window is not the output's shape");
    dnnl_dims_t dims, offs;
    for (int d = 0; d < s->rank; d++) {
        if (sl.step[d] != 1) return unsup(err, "a step other than 1");
        dims[d] = sl.out.dim[d], offs[d] = sl.first[d];
    }
    dnnl_memory_desc_t whole, part, to;
    PP_TRY(tensor_plain(x, in, &whole, err));
    DN(dnnl_memory_desc_init_submemory(&part, &whole, dims, offs), "sub-memory descriptor");
    PP_TRY(tensor_plain(x, out, &to, err));
    dnnl_memory_t sm, dm;
    post po;
    PP_TRY(plain_view(x, in, &part, &sm, err));
    PP_TRY(bind_output(x, out, &to, &dm, &po, err));
    PP_TRY(push_reorder(x, sm, dm, STEP_MAIN, err));
    return push_post(x, &po, err);
}

/* ---- binary ------------------------------------------------------------------------------------- */

/* Shape s right-aligned to rank r (leading 1s). */
static void align_dims(const pp_shape *s, int r, int64_t *d) {
    for (int i = 0; i < r; i++) {
        int k = i - (r - s->rank);
        d[i] = k >= 0 ? s->dim[k] : 1;
    }
}

/* The format tag of a plain, channels-last or channel-blocked descriptor; undef for others. */
static dnnl_format_tag_t tag_of(const dnnl_memory_desc_t *md) {
    static const dnnl_format_tag_t t3[] = {dnnl_acb, dnnl_aBc16b, dnnl_aBc8b, dnnl_aBc4b, dnnl_abc},
                                   t4[] = {dnnl_acdb, dnnl_aBcd16b, dnnl_aBcd8b, dnnl_aBcd4b, dnnl_abcd},
                                   t5[] = {dnnl_acdeb, dnnl_aBcde16b, dnnl_aBcde8b, dnnl_aBcde4b, dnnl_abcde};
    const dnnl_format_tag_t *c = md->ndims == 3 ? t3 : md->ndims == 4 ? t4 : md->ndims == 5 ? t5 : NULL;
    for (int i = 0; c && i < 5; i++) {
        dnnl_memory_desc_t t;
        if (dnnl_memory_desc_init_by_tag(&t, md->ndims, md->dims, md->data_type, c[i]) == dnnl_success &&
            dnnl_memory_desc_equal(&t, md))
            return c[i];
    }
    return dnnl_format_tag_undef;
}

static bool binary_alg(pp_op op, dnnl_alg_kind_t *alg, bool *commutes) {
    *commutes = true;
    switch (op) {
    case PP_OP_ADD: case PP_OP_SUM: *alg = dnnl_binary_add; return true;
    case PP_OP_MUL: *alg = dnnl_binary_mul; return true;
    /* not Max and Min: oneDNN's give the other operand for a NaN in the first */
    case PP_OP_SUB: *alg = dnnl_binary_sub, *commutes = false; return true;
    case PP_OP_DIV: *alg = dnnl_binary_div, *commutes = false; return true;
    default: return false;
    }
}

static bool full_operand(const pprt_exec *x, const pprt_node *n, int k) {
    return pp_shape_eq(&T(x, n->in[k])->shape, &T(x, n->out[0])->shape);
}

static pp_status build_binary(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (n->n_in != 2) return unsup(err, "not two inputs");
    PP_TRY(need_f32_nonempty(x, n, err));
    dnnl_alg_kind_t alg;
    bool commutes;
    if (!binary_alg(n->op, &alg, &commutes)) return unsup(err, "op");
    int i0 = n->in[0], i1 = n->in[1];
    const int yi = n->out[0];
    const pp_shape *ys = &T(x, yi)->shape;
    /* oneDNN broadcasts the second source only */
    if (!full_operand(x, n, 0)) {
        if (!commutes || !full_operand(x, n, 1)) return unsup(err, "first operand broadcast");
        int t = i0;
        i0 = i1, i1 = t;
    }
    const int r = ys->rank > 0 ? ys->rank : 1;
    int64_t d1[PP_MAX_DIMS], dy[PP_MAX_DIMS];
    pp_shape ys1 = *ys;
    if (ys1.rank == 0) ys1.rank = 1, ys1.dim[0] = 1;
    align_dims(&ys1, r, dy);
    pp_shape s1 = T(x, i1)->shape;
    align_dims(&s1, r, d1);
    for (int i = 0; i < r; i++)
        if (d1[i] != dy[i] && d1[i] != 1) return unsup(err, "broadcast");
    /* m0: the full operand as stored; c1: the other as stored (dims aligned
     * to the output's rank); m1: the other as the primitive reads it: in m0's
     * format where either is blocked (oneDNN's fast binary kernels want one
     * format; mixed, as where a plain tensor received at a cut meets a
     * blocked one, it runs ref:any, hundreds of times slower), else as stored */
    dnnl_memory_desc_t m0, c1, m1, dst;
    PP_TRY(tensor_layout(x, i0, &m0, err));
    if (x->blocked[i1]) {
        if (T(x, i1)->shape.rank != r) return unsup(err, "blocked operand of another rank");
        c1 = x->lay[i1];
    } else {
        PP_TRY(plain_md(d1, r, &c1, err));
    }
    m1 = c1;
    if (pp_shape_eq(&T(x, i1)->shape, ys) && (x->blocked[i0] || x->blocked[i1])) {
        m1 = m0;
    } else if (x->blocked[i0] || x->blocked[i1]) {
        dnnl_format_tag_t tag = tag_of(&m0);
        dnnl_dims_t dd;
        for (int i = 0; i < r; i++) dd[i] = d1[i];
        if (tag == dnnl_format_tag_undef) return unsup(err, "layout of the full operand");
        DN(dnnl_memory_desc_init_by_tag(&m1, r, dd, c1.data_type, tag), "memory descriptor");
    }
    dst = m0; /* the output takes the first source's layout */
    if (ys->rank == 0) { /* scalars: one-element vectors */
        PP_TRY(plain_md(dy, 1, &m0, err));
        c1 = m1 = dst = m0;
    }
    dnnl_binary_desc_t d;
    DN(dnnl_binary_desc_init(&d, alg, &m0, &m1, &dst), "binary");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &d, attr, x->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "binary");
    pp_status rs;
    dnnl_memory_t a0, a1, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* oneDNN 2.6.3's binary, in place over a blocked layout with padded
     * channels (C not a multiple of the block) and a broadcast second
     * source, leaves the destination as it was (found by tests/difftest):
     * such a node writes a buffer of its own */
    bool padded = false;
    for (int i = 0; i < m0.ndims; i++) padded |= m0.padded_dims[i] != m0.dims[i];
    const bool bcast = !pp_shape_eq(&T(x, i1)->shape, ys);
    rs = i0 == i1 || ys->rank == 0 || (padded && bcast) ? PP_OK : write_in_place(x, n, i0, &m0, yi, dst_md, err);
    if (rs != PP_OK || (rs = bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (rs = tensor_mem(x, i0, &m0, &a0, err)) != PP_OK ||
        (rs = is_weight(x, i1) ? weight_mem(x, i1, &c1, &m1, &a1, err)
                               : bind_view(x, i1, &c1, &m1, SLOT_SRC, &a1, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return rs;
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC_0, a0}, {DNNL_ARG_SRC_1, a1}, {DNNL_ARG_DST, dm}};
    PP_TRY(push_pd(x, pd, STEP_MAIN, args, 3, err));
    return push_post(x, &out, err);
}

/* ---- MatMul, Gemm ------------------------------------------------------------------------------- */

/* dst = alpha * (A x B) [+ C]: the common part of MatMul and Gemm. A, B: the
 * descriptors to read the inputs through (B reordered once when constant);
 * cmd: C's descriptor (NULL: none) with its memory cm. */
/* The end of a primitive's set-up: when it went well so far (s, r), attach
 * po (NULL: none) to attr and create *pd for op descriptor d; po and attr
 * are destroyed either way, and the first failure is reported (what names
 * the primitive). */
static pp_status finish_pd(pprt_exec *x, const_dnnl_op_desc_t d, dnnl_primitive_attr_t attr, dnnl_post_ops_t po,
                           dnnl_status_t s, pp_status r, const char *what, dnnl_primitive_desc_t *pd, pp_err *err) {
    *pd = NULL;
    if (s == dnnl_success && r == PP_OK && po) s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (s == dnnl_success && r == PP_OK) s = dnnl_primitive_desc_create(pd, d, attr, x->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    PP_TRY(r);
    DN(s, what);
    return PP_OK;
}

static pp_status matmul_common(pprt_exec *x, int ai, const dnnl_memory_desc_t *am, int bi,
                               const dnnl_memory_desc_t *bm, int yi, const dnnl_memory_desc_t *ym, float alpha,
                               const dnnl_memory_desc_t *cmd, dnnl_memory_t cm, pp_err *err) {
    const bool wconst = is_weight(x, bi);
    /* bf16: A and B read as bf16 copies (B's made once when constant), the
     * output and the post-ops stay f32 */
    const dnnl_data_type_t cdt = x->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_c = *am, b_c = *bm, b_any;
    if (x->bf16) {
        DN(dnnl_memory_desc_init_by_strides(&a_c, am->ndims, am->dims, cdt, am->format_desc.blocking.strides),
           "memory descriptor");
        DN(dnnl_memory_desc_init_by_strides(&b_c, bm->ndims, bm->dims, cdt, bm->format_desc.blocking.strides),
           "memory descriptor");
    }
    b_any = b_c;
    if (wconst) {
        dnnl_dims_t d;
        for (int i = 0; i < bm->ndims; i++) d[i] = bm->dims[i];
        DN(dnnl_memory_desc_init_by_tag(&b_any, bm->ndims, d, cdt, dnnl_format_tag_any), "matmul weights");
        /* A single row makes this a matrix-vector product. With B stored
         * K x N (what oneDNN picks) its gemv splits K between threads and
         * sums the parts, so the output's last bits depend on the thread
         * count, and -pp 2 (one thread a stage) stops matching -pp 1 (two):
         * seen on AVX2. Stored N x K the gemv splits the outputs instead,
         * each dot product on one thread, as fast or faster. */
        if (bm->ndims == 2 && am->ndims == 2 && am->dims[0] == 1) {
            dnnl_dims_t st = {1, d[0]};
            DN(dnnl_memory_desc_init_by_strides(&b_any, 2, d, cdt, st), "matmul weights");
        }
    }
    dnnl_matmul_desc_t d;
    DN(dnnl_matmul_desc_init(&d, &a_c, &b_any, NULL, ym), "matmul");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_status_t s = dnnl_success;
    dnnl_post_ops_t po = NULL;
    dnnl_exec_arg_t args[MAX_ARGS];
    int na = 0;
    pp_status r = PP_OK;
    if (alpha != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (s == dnnl_success && (cmd || x->n_fused)) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success && cmd) {
            s = dnnl_post_ops_append_binary(po, dnnl_binary_add, cmd);
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, cm};
        }
        if (s == dnnl_success) r = append_fused(x, po, cmd ? 1 : 0, ym, NULL, args, &na, err);
    }
    dnnl_primitive_desc_t pd;
    PP_TRY(finish_pd(x, &d, attr, po, s, r, "matmul", &pd, err));
    if (!whole_operands_fit(x, pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "a binary post-op operand in another layout than the output");
    }
    dnnl_memory_t a, b, y;
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if ((r = cast_view(x, ai, am, &a_c, SLOT_SRC, &a, err)) != PP_OK ||
        (r = wconst ? weight_mem(x, bi, bm, w_md, &b, err) : cast_view(x, bi, bm, &b_c, SLOT_WEI, &b, err)) != PP_OK ||
        (r = tensor_mem(x, yi, ym, &y, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, a};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, b};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, y};
    return push_pd(x, pd, STEP_MAIN, args, na, err);
}

/* ---- a matrix product with constant weights as a 1x1 convolution ----------------------------- */

static mark mark_now(const pprt_exec *x);
static void rollback(pprt_exec *x, mark m);

/* Rows below which a product A (M x K) * B (K x N) with constant B runs as a
 * 1x1 convolution over NHWC [1, K, M, 1] (the rows as pixels: A's and the
 * output's plain bytes as they are) instead of a matmul. On AVX2, oneDNN
 * 2.6's gemm-based matmul is uneven at few rows (ViT-B/16 at micro-batch 1,
 * 197 rows, two threads: 177 GFLOP/s for N = 2304 but 91 for N = 3072, and 46
 * on one thread), where its 1x1 convolution kernel holds 180-195 (90-95 on
 * one thread) for every shape; at 1576 rows (micro-batch 8) single products
 * are level, and the whole ViT-B/16 runs 5-10% faster with the convolution.
 * Larger row counts are not measured, so they keep the matmul.
 * PPRT_DNNL_ROWS_MAX overrides it (0: never). */
#define ROWS_AS_PIXELS_MAX 4096

/* y (M x N, plain) = A (tensor ai, plain M x K) * B (constant tensor bi seen
 * through bm, K x N with any strides) + the bias ci (-1: none; a row of N,
 * or whole M x N), then the absorbed nodes, as a 1x1 convolution (see
 * ROWS_AS_PIXELS_MAX). f32 only. PP_EUNSUP where it does not apply (the
 * caller rolls back and builds a matmul). */
static pp_status matmul_rows(pprt_exec *x, int ai, int bi, const dnnl_memory_desc_t *bm, int ci, int yi, int64_t M,
                             int64_t K, int64_t N, pp_err *err) {
    if (x->bf16 || !is_weight(x, bi) || M >= x->rows_max || x->blocked[ai]) return unsup(err, "not rows");
    int64_t n_c = 0;
    if (ci >= 0) {
        const pp_shape *cs = &T(x, ci)->shape;
        n_c = numel_of(cs);
        if (x->blocked[ci] || (cs->rank && cs->dim[cs->rank - 1] != N) || (n_c != N && n_c != M * N))
            return unsup(err, "bias shape");
    }
    const dnnl_dims_t sd = {1, K, M, 1}, wd = {N, K, 1, 1}, dd = {1, N, M, 1}, bd = {N};
    const dnnl_dims_t wst = {bm->format_desc.blocking.strides[1], bm->format_desc.blocking.strides[0], 1, 1};
    const dnnl_dims_t one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t s4, w4, wfrom, d4, b1;
    DN(dnnl_memory_desc_init_by_tag(&s4, 4, sd, dnnl_f32, dnnl_nhwc), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&d4, 4, dd, dnnl_f32, dnnl_nhwc), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&w4, 4, wd, dnnl_f32, dnnl_format_tag_any), "memory descriptor");
    DN(dnnl_memory_desc_init_by_strides(&wfrom, 4, wd, dnnl_f32, wst), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&b1, 1, bd, dnnl_f32, dnnl_a), "memory descriptor");
    const bool bias = ci >= 0 && n_c == N; /* a whole M x N C is a binary post-op instead */
    dnnl_convolution_desc_t cd;
    DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s4, &w4,
                                                  bias ? &b1 : NULL, &d4, one, zero, zero, zero),
       "convolution");
    dnnl_primitive_attr_t attr;
    PP_TRY(new_attr(&attr, err));
    dnnl_post_ops_t po = NULL;
    dnnl_exec_arg_t args[MAX_ARGS];
    int na = 0, idx = 0;
    pp_status r = PP_OK;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && ci >= 0 && !bias) {
        dnnl_memory_desc_t cmd;
        dnnl_memory_t cm;
        s = dnnl_memory_desc_init_by_tag(&cmd, 4, dd, dnnl_f32, dnnl_nhwc);
        if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &cmd), idx++;
        if (s == dnnl_success && (r = tensor_mem(x, ci, &cmd, &cm, err)) == PP_OK)
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, cm};
    }
    const int64_t rows[2] = {M, N};
    if (s == dnnl_success && r == PP_OK) r = append_fused(x, po, idx, NULL, rows, args, &na, err);
    dnnl_primitive_desc_t pd;
    PP_TRY(finish_pd(x, &cd, attr, po, s, r, "convolution", &pd, err));
    const char *impl = "ref";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if (strncmp(impl, "jit", 3)) { /* only a JIT kernel beats the matmul */
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "no JIT 1x1 convolution");
    }
    dnnl_memory_t a, b, y, bm_ = NULL;
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if ((r = plain_view(x, ai, &s4, &a, err)) != PP_OK || (r = weight_mem(x, bi, &wfrom, w_md, &b, err)) != PP_OK ||
        (r = tensor_mem(x, yi, &d4, &y, err)) != PP_OK || (bias && (r = plain_view(x, ci, &b1, &bm_, err)) != PP_OK)) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, a};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, b};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, y};
    if (bias) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm_};
    return push_pd(x, pd, STEP_MAIN, args, na, err);
}

/* matmul_rows where it applies, else nothing built (*done false). */
static pp_status try_rows(pprt_exec *x, int ai, int bi, const dnnl_memory_desc_t *bm, int ci, int yi, int64_t M,
                          int64_t K, int64_t N, bool *done, pp_err *err) {
    mark m = mark_now(x);
    pp_err e = {0};
    pp_status r = matmul_rows(x, ai, bi, bm, ci, yi, M, K, N, &e);
    *done = r == PP_OK;
    if (r == PP_OK || r == PP_EUNSUP) {
        if (!*done) rollback(x, m);
        return PP_OK;
    }
    *err = e;
    return r;
}

static pp_status build_matmul(pprt_exec *x, const pprt_node *n, pp_err *err) {
    PP_TRY(need_f32_nonempty(x, n, err));
    const int ai = n->in[0], bi = n->in[1], yi = final_out(x, n);
    pp_shape as = T(x, ai)->shape, bs = T(x, bi)->shape;
    if (as.rank < 1 || bs.rank < 1) return unsup(err, "rank");
    if (as.rank == 1) as = (pp_shape){2, {1, as.dim[0]}};
    if (bs.rank == 1) bs = (pp_shape){2, {bs.dim[0], 1}};
    const int64_t M = as.dim[as.rank - 2], K = as.dim[as.rank - 1], N = bs.dim[bs.rank - 1];
    if (bs.dim[bs.rank - 2] != K) return unsup(err, "inner dims");
    dnnl_memory_desc_t am, bm, ym;
    if (bs.rank == 2) {
        /* one right-hand matrix: A's batch dims fold into its rows */
        int64_t ad[2] = {numel_of(&as) / K, K}, yd[2] = {ad[0], N};
        PP_TRY(plain_md(ad, 2, &am, err));
        PP_TRY(plain_md(bs.dim, 2, &bm, err));
        PP_TRY(plain_md(yd, 2, &ym, err));
        bool done;
        PP_TRY(try_rows(x, ai, bi, &bm, -1, yi, ad[0], K, N, &done, err));
        if (done) return PP_OK;
    } else {
        const int r = as.rank > bs.rank ? as.rank : bs.rank;
        if (r > DNNL_MAX_NDIMS) return unsup(err, "rank");
        int64_t ad[PP_MAX_DIMS], bd[PP_MAX_DIMS], yd[PP_MAX_DIMS];
        align_dims(&as, r, ad);
        align_dims(&bs, r, bd);
        for (int i = 0; i < r - 2; i++) {
            if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1) return unsup(err, "batch broadcast");
            yd[i] = ad[i] > bd[i] ? ad[i] : bd[i];
        }
        yd[r - 2] = M, yd[r - 1] = N;
        PP_TRY(plain_md(ad, r, &am, err));
        PP_TRY(plain_md(bd, r, &bm, err));
        PP_TRY(plain_md(yd, r, &ym, err));
    }
    return matmul_common(x, ai, &am, bi, &bm, yi, &ym, 1.0f, NULL, NULL, err);
}

static pp_status build_gemm(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs at = attrs_of(x, n);
    PP_TRY(need_f32_nonempty(x, n, err));
    const int ai = n->in[0], bi = n->in[1], ci = has_in(n, 2) ? n->in[2] : -1, yi = final_out(x, n);
    const pp_shape *as = &T(x, ai)->shape, *bs = &T(x, bi)->shape;
    if (as->rank != 2 || bs->rank != 2) return unsup(err, "rank");
    int64_t ta, tb;
    float alpha, beta;
    PP_TRY(pp_attr_int(at, "transA", 0, &ta, err));
    PP_TRY(pp_attr_int(at, "transB", 0, &tb, err));
    PP_TRY(pp_attr_float(at, "alpha", 1.0f, &alpha, err));
    PP_TRY(pp_attr_float(at, "beta", 1.0f, &beta, err));
    const int64_t M = ta ? as->dim[1] : as->dim[0], K = ta ? as->dim[0] : as->dim[1];
    const int64_t N = tb ? bs->dim[0] : bs->dim[1];
    if ((tb ? bs->dim[1] : bs->dim[0]) != K) return unsup(err, "inner dims");
    dnnl_memory_desc_t am, bm, ym, cmd;
    dnnl_dims_t ad = {M, K}, as_ = {ta ? 1 : K, ta ? M : 1}, bd = {K, N}, bs_ = {tb ? 1 : N, tb ? K : 1};
    DN(dnnl_memory_desc_init_by_strides(&am, 2, ad, dnnl_f32, as_), "memory descriptor");
    DN(dnnl_memory_desc_init_by_strides(&bm, 2, bd, dnnl_f32, bs_), "memory descriptor");
    int64_t yd[2] = {M, N};
    PP_TRY(plain_md(yd, 2, &ym, err));
    if (!ta && alpha == 1.0f && (ci < 0 || beta == 0.0f || beta == 1.0f)) {
        bool done;
        PP_TRY(try_rows(x, ai, bi, &bm, beta != 0.0f ? ci : -1, yi, M, K, N, &done, err));
        if (done) return PP_OK;
    }
    dnnl_memory_t cm = NULL;
    if (ci >= 0 && beta != 0.0f) {
        /* C broadcasts to [M, N] (BLAS and onnxruntime ignore it when beta is 0) */
        const pp_shape *cs = &T(x, ci)->shape;
        if (cs->rank > 2) return unsup(err, "C rank");
        int64_t cd[2] = {cs->rank >= 2 ? cs->dim[0] : 1, cs->rank >= 1 ? cs->dim[cs->rank - 1] : 1};
        if ((cd[0] != M && cd[0] != 1) || (cd[1] != N && cd[1] != 1)) return unsup(err, "C shape");
        PP_TRY(plain_md(cd, 2, &cmd, err));
        if (beta == 1.0f) {
            PP_TRY(plain_view(x, ci, &cmd, &cm, err));
        } else {
            if (!is_weight(x, ci)) return unsup(err, "beta with a computed C");
            const int64_t cn = cd[0] * cd[1];
            float *c = own_alloc(x, (size_t)cn * sizeof(float));
            if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            const float *src = (const float *)T(x, ci)->data;
            for (int64_t i = 0; i < cn; i++) c[i] = beta * src[i];
            PP_TRY(new_mem(x, &cmd, c, &cm, err));
        }
    }
    return matmul_common(x, ai, &am, bi, &bm, yi, &ym, alpha, cm ? &cmd : NULL, cm, err);
}

/* ---- per node ------------------------------------------------------------------------------------ */

typedef pp_status build_fn(pprt_exec *x, const pprt_node *n, pp_err *err);

static build_fn *builder_of(pp_op op) {
    switch (op) {
    case PP_OP_CONV: case PP_OP_FUSEDCONV: return build_conv;
    case PP_OP_MAXPOOL: case PP_OP_AVGPOOL: case PP_OP_GLOBALAVGPOOL: case PP_OP_GLOBALMAXPOOL: return build_pool;
    case PP_OP_BATCHNORM: return build_bn;
    case PP_OP_LAYERNORM: return build_ln;
    case PP_OP_SOFTMAX: case PP_OP_LOGSOFTMAX: return build_softmax;
    case PP_OP_MATMUL: return build_matmul;
    case PP_OP_GEMM: return build_gemm;
    case PP_OP_RELU: case PP_OP_LEAKYRELU: case PP_OP_ELU: case PP_OP_SIGMOID: case PP_OP_TANH:
    case PP_OP_SILU: case PP_OP_EXP: case PP_OP_LOG: case PP_OP_SQRT: case PP_OP_ABS: case PP_OP_NEG:
    case PP_OP_HARDSWISH: case PP_OP_SOFTPLUS: case PP_OP_GELU: case PP_OP_CLIP:
        return build_eltwise;
    case PP_OP_ADD: case PP_OP_SUB: case PP_OP_MUL: case PP_OP_DIV: case PP_OP_MAX: case PP_OP_MIN: case PP_OP_SUM:
        return build_binary;
    case PP_OP_RESHAPE: case PP_OP_FLATTEN: case PP_OP_SQUEEZE: case PP_OP_UNSQUEEZE: case PP_OP_TRANSPOSE:
        return build_view;
    case PP_OP_SLICE: return build_slice;
    default: return NULL;
    }
}

/* Whether node n reads its input k in whatever layout it is stored in. */
static bool accepts_any(const pprt_node *n, int k) {
    build_fn *b = builder_of(n->op);
    if (b == build_conv) return k == 0 || k == 3;
    if (b == build_pool || b == build_bn || b == build_eltwise) return k == 0;
    if (b == build_binary) return n->n_in == 2;
    return false;
}

static mark mark_now(const pprt_exec *x) {
    return (mark){x->n_steps, x->n_mems, x->n_binds, x->n_patches, x->n_owned, x->n_abinds};
}

/* Undo what was created since m (a node oneDNN declined halfway). */
static void rollback(pprt_exec *x, mark m) {
    for (int i = m.steps; i < x->n_steps; i++) {
        if (x->steps[i].prim) dnnl_primitive_destroy(x->steps[i].prim);
        pprt_wino_free(x->steps[i].wino);
    }
    for (int i = m.mems; i < x->n_mems; i++) dnnl_memory_destroy(x->mems[i]);
    for (int i = m.owned; i < x->n_owned; i++) free(x->owned[i]);
    x->n_steps = m.steps, x->n_mems = m.mems, x->n_binds = m.binds, x->n_patches = m.patches,
    x->n_owned = m.owned, x->n_abinds = m.abinds;
}

static void reset_tensor(pprt_exec *x, int tid) {
    const pprt_tdesc *t = T(x, tid);
    x->blocked[tid] = false;
    x->born[tid] = x->writer[tid];
    x->need[tid] = t->nbytes;
    x->ghost[tid] = false;
    x->alias[tid] = -1;
    if (t->kind == PPRT_WEIGHT) x->ptr[tid] = (void *)t->data;
    else if (x->kind[tid] == PPRT_ACTIVATION) x->ptr[tid] = NULL; /* plan_arena */
}

static void teardown(pprt_exec *x) {
    rollback(x, (mark){0, 0, 0, 0, 0, 0});
    free(x->arena);
    x->arena = NULL;
    x->arena_bytes = 0;
    for (int i = 0; i < N_SLOTS; i++) {
        free(x->slot_buf[i]);
        x->slot_buf[i] = NULL;
        x->slot_bytes[i] = 0;
    }
    for (int i = 0; i < x->st->n_tensors; i++) reset_tensor(x, i);
    x->owned_bytes = x->weight_bytes = 0;
}

/* Whether tensors a and b share arena bytes. */

/* The nodes right after node ni that its primitive can absorb as post-ops:
 * each an eltwise op on the running result, or a binary op of it (whole)
 * and a tensor that exists before node ni runs; the running result read by
 * that node only and never sent. Only the very next nodes, so that nothing
 * runs in between (the last output is written when node ni runs: the
 * arena plan knows, see plan_arena). Only nodes the plan marks as chained
 * to the one before (ppcc's pp_fusion_chains, which no cut splits; every
 * node of a version 1 plan). */
static void find_fusable(pprt_exec *x, int ni) {
    x->n_fused = 0;
    const pprt_stage *st = x->st;
    const pp_op op = st->nodes[ni].op;
    if (!x->fuse || !(op == PP_OP_CONV || op == PP_OP_FUSEDCONV || op == PP_OP_MATMUL || op == PP_OP_GEMM)) return;
    int cur = st->nodes[ni].out[0];
    for (int bi = ni + 1; bi < st->n_nodes && x->n_fused < 4; bi++) {
        const pprt_node *b = &st->nodes[bi];
        /* only within one of ppcc's chains; (the plan's kind: a sent tensor
         * must be written even when kept) */
        if (!b->chain || !x->on_dnnl[bi] || T(x, cur)->kind != PPRT_ACTIVATION || x->cons[cur] != 1 || b->n_out != 1 ||
            !f32(x, b->out[0]) || !pp_shape_eq(&T(x, b->out[0])->shape, &T(x, cur)->shape))
            break;
        dnnl_alg_kind_t alg;
        float al, be;
        bool comm;
        int other = -1;
        if (binary_alg(b->op, &alg, &comm)) {
            if (b->n_in != 2) break;
            if (b->in[0] == cur) other = b->in[1];
            else if (b->in[1] == cur && comm) other = b->in[0];
            else break;
            if (other < 0 || other == cur || !f32(x, other) || x->born[other] >= ni) break;
        } else {
            pp_err e = {0};
            if (builder_of(b->op) != build_eltwise || b->in[0] != cur || !f32(x, cur) ||
                eltwise_of(x, b, &alg, &al, &be, &e) != PP_OK || (b->op == PP_OP_SILU && x->own_silu))
                break;
        }
        x->fused_other[x->n_fused] = other;
        x->fused[x->n_fused++] = bi;
        cur = b->out[0];
    }
    /* the intermediates are never written; the last output is, from node ni on */
    for (int f = 0; f < x->n_fused; f++) {
        const int o = st->nodes[x->fused[f]].out[0];
        if (f < x->n_fused - 1) x->ghost[o] = true;
        else x->born[o] = ni;
    }
    if (x->n_fused) x->ghost[st->nodes[ni].out[0]] = true;
}

/* The arena: every activation gets its bytes for the nodes from its birth
 * to its last reader (absorbed intermediates get none); an output that
 * takes over a residual's bytes shares them, the group living from the
 * first birth to the last reading of any member. Groups are placed largest
 * first, each at the lowest 64-aligned offset clear of the groups placed so
 * far whose lifetimes meet its own. Sets ptr[] and every activation
 * memory's handle. */
typedef struct agroup {
    int start, end;
    size_t size, off;
} agroup;

static int by_size(const void *a, const void *b, void *g_) {
    const agroup *g = g_;
    const int i = *(const int *)a, j = *(const int *)b;
    if (g[i].size != g[j].size) return g[i].size < g[j].size ? 1 : -1;
    return g[i].start != g[j].start ? (g[i].start < g[j].start ? -1 : 1) : (i > j) - (i < j);
}

static int by_off(const void *a, const void *b, void *g_) {
    const agroup *g = g_;
    const size_t x = g[*(const int *)a].off, y = g[*(const int *)b].off;
    return (x > y) - (x < y);
}

static pp_status plan_arena(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    const int n = st->n_tensors;
    agroup *g = calloc(pp_count(n), sizeof *g);
    int *root = malloc(pp_count(n) * sizeof *root), *order = malloc(pp_count(n) * sizeof *order);
    int *live = malloc(pp_count(n) * sizeof *live);
    pp_status r = PP_OK;
    if (!g || !root || !order || !live) {
        r = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    int ng = 0;
    for (int t = 0; t < n; t++) {
        int q = t;
        for (int hops = 0; x->alias[q] >= 0 && hops < n; hops++) q = x->alias[q];
        root[t] = q;
        g[t] = (agroup){.start = -1, .end = -2};
    }
    for (int t = 0; t < n; t++) {
        if (x->kind[t] != PPRT_ACTIVATION || x->ghost[t]) continue;
        agroup *G = &g[root[t]];
        const int b = x->born[t], e = x->last[t] > b ? x->last[t] : b;
        if (G->end < G->start) *G = (agroup){.start = b, .end = e};
        if (b < G->start) G->start = b;
        if (e > G->end) G->end = e;
        if (x->need[t] > G->size) G->size = x->need[t];
    }
    for (int t = 0; t < n; t++)
        if (root[t] == t && g[t].end >= g[t].start) order[ng++] = t;
    qsort_r(order, (size_t)ng, sizeof *order, by_size, g);
    size_t total = 0;
    for (int k = 0; k < ng; k++) {
        agroup *G = &g[order[k]];
        int nl = 0;
        for (int j = 0; j < k; j++) {
            const agroup *H = &g[order[j]];
            if (H->start <= G->end && G->start <= H->end) live[nl++] = order[j];
        }
        qsort_r(live, (size_t)nl, sizeof *live, by_off, g);
        size_t off = 0;
        for (int j = 0; j < nl; j++) {
            const agroup *H = &g[live[j]];
            if (off + G->size <= H->off) break;
            if (H->off + H->size > off) off = pp_align_up(H->off + H->size, 64);
        }
        G->off = off;
        if (off + G->size > total) total = off + G->size;
    }
    void *arena = NULL;
    if (posix_memalign(&arena, 64, total ? total : 64) != 0) {
        r = PP_FAIL(err, PP_ENOMEM, "cannot allocate a %zu-byte arena", total);
        goto out;
    }
    x->arena = arena;
    x->arena_bytes = total;
    for (int t = 0; t < n; t++)
        if (x->kind[t] == PPRT_ACTIVATION)
            x->ptr[t] = x->ghost[t] || g[root[t]].end < g[root[t]].start ? NULL : x->arena + g[root[t]].off;
    for (int i = 0; i < x->n_abinds && r == PP_OK; i++) {
        dnnl_status_t ds = dnnl_memory_set_data_handle(x->abinds[i].m, x->ptr[x->abinds[i].tid]);
        if (ds != dnnl_success) r = dn_fail(err, "memory", ds);
    }
out:
    free(g);
    free(root);
    free(order);
    free(live);
    return r;
}

/* One attempt at building every node. *restart: a node was declined whose
 * input another node had already stored in a oneDNN layout (build again). */
/* Weights of a --ref-weights plan that lie misaligned in the model file are
 * copied as the nodes reading them are built (pprt_stage_weight), and a copy
 * that only one node reads is freed once that node is built on oneDNN without
 * a step that reads it at run time (oneDNN reordered it into its own layout):
 * the stage holds one copy of its weights, at no time two. */
static pp_status have_weights(pprt_exec *x, const pprt_node *n, pp_err *err) {
    for (int k = 0; k < n->n_in; k++) {
        const int tid = n->in[k];
        if (tid < 0 || T(x, tid)->kind != PPRT_WEIGHT || x->ptr[tid]) continue;
        PP_TRY(pprt_stage_weight(x->p, x->st->index, tid, err));
        x->ptr[tid] = (void *)T(x, tid)->data;
    }
    return PP_OK;
}

static void drop_weights(pprt_exec *x, const pprt_node *n, int first_step) {
    for (int k = 0; k < n->n_in; k++) {
        const int tid = n->in[k];
        if (tid < 0 || !T(x, tid)->copy || x->cons[tid] != 1) continue;
        const uintptr_t lo = (uintptr_t)T(x, tid)->data, hi = lo + T(x, tid)->nbytes;
        bool read = false;
        for (int i = first_step; i < x->n_steps && !read; i++)
            for (int a = 0; a < x->steps[i].nargs && !read; a++) {
                void *h = NULL;
                read = dnnl_memory_get_data_handle(x->steps[i].args[a].memory, &h) != dnnl_success ||
                       ((uintptr_t)h >= lo && (uintptr_t)h < hi);
            }
        if (read) continue;
        pprt_stage_weight_release(x->p, x->st->index, tid);
        x->ptr[tid] = NULL;
    }
}

static pp_status out_steps(pprt_exec *x, pp_err *err);

static pp_status build_all(pprt_exec *x, bool *restart, pp_err *err) {
    const pprt_stage *st = x->st;
    *restart = false;
    x->n_out = 0;
    for (int i = 0; i < st->n_tensors; i++)
        x->flex[i] = x->propagate && x->kind[i] == PPRT_ACTIVATION && x->cons[i] > 0;
    if (x->propagate)
        for (int ni = 0; ni < st->n_nodes; ni++) {
            const pprt_node *n = &st->nodes[ni];
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0 && !(x->on_dnnl[ni] && accepts_any(n, k))) x->flex[n->in[k]] = false;
        }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        x->first[ni] = -1;
        x->nsteps[ni] = 0;
        x->absorbed[ni] = false;
    }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if (!x->on_dnnl[ni] || x->absorbed[ni]) continue;
        mark m = mark_now(x);
        pp_err e = {0};
        x->build_threads = node_threads(x, n, x->threads);
        /* under ulimit -v: room for what oneDNN allocates (headroom.h) */
        pp_status hs = pprt_headroom_enter(PPRT_HEADROOM_BYTES + pprt_headroom_team(x->build_threads, false), &e);
        if (hs != PP_OK) return PP_FAIL(err, hs, "node '%s' (%s): %s", n->name, pp_op_table[n->op].name, e.msg);
        set_threads(x->build_threads);
        find_fusable(x, ni);
        x->n_whole = 0;
        pp_status s = have_weights(x, n, &e);
        for (int f = 0; f < x->n_fused && s == PP_OK; f++) s = have_weights(x, &st->nodes[x->fused[f]], &e);
        if (s == PP_OK) s = builder_of(n->op)(x, n, &e);
        if (s != PP_OK && s != PP_ENOMEM && x->n_fused) {
            /* again without absorbing the nodes after it */
            rollback(x, m);
            for (int f = 0; f < x->n_fused; f++) reset_tensor(x, st->nodes[x->fused[f]].out[0]);
            for (int k = 0; k < n->n_out; k++) reset_tensor(x, n->out[k]);
            if (x->verbose >= 2)
                fprintf(stderr, "pprt dnnl: stage %d: node '%s' (%s) absorbs no post-ops: %s\n", st->index, n->name,
                        pp_op_table[n->op].name, e.msg);
            x->n_fused = 0;
            e = (pp_err){0};
            s = builder_of(n->op)(x, n, &e);
        }
        pprt_headroom_team(x->build_threads, true);
        pprt_headroom_leave();
        for (int f = 0; f < x->n_fused && s == PP_OK; f++) x->absorbed[x->fused[f]] = true;
        int fused[4], n_fused = s == PP_OK ? x->n_fused : 0;
        memcpy(fused, x->fused, sizeof fused);
        x->n_fused = 0;
        set_threads(x->threads);
        x->build_threads = x->threads;
        if (s == PP_ENOMEM) return PP_FAIL(err, s, "node '%s': %s", n->name, e.msg);
        if (s != PP_OK) {
            rollback(x, m);
            for (int k = 0; k < n->n_out; k++) reset_tensor(x, n->out[k]);
            x->on_dnnl[ni] = false;
            if (x->verbose >= 2)
                fprintf(stderr, "pprt dnnl: stage %d: node '%s' (%s) on the reference kernel: %s\n", st->index,
                        n->name, pp_op_table[n->op].name, e.msg);
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0 && x->flex[n->in[k]]) *restart = true;
            if (*restart) return PP_OK;
            continue;
        }
        x->first[ni] = m.steps;
        x->nsteps[ni] = x->n_steps - m.steps;
        drop_weights(x, n, m.steps);
        for (int f = 0; f < n_fused; f++) drop_weights(x, &st->nodes[fused[f]], m.steps);
    }
    /* the reference nodes read their weights as they are */
    for (int ni = 0; ni < st->n_nodes; ni++)
        if (x->first[ni] < 0 && !x->absorbed[ni]) PP_TRY(have_weights(x, &st->nodes[ni], err));
    /* the shared buffers, now that their sizes are known */
    for (int i = 0; i < N_SLOTS; i++) {
        if (!x->slot_bytes[i]) continue;
        if (posix_memalign(&x->slot_buf[i], 64, x->slot_bytes[i]) != 0) {
            x->slot_buf[i] = NULL;
            return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes of oneDNN buffers", x->slot_bytes[i]);
        }
    }
    for (int i = 0; i < x->n_patches; i++) {
        dnnl_status_t s = dnnl_memory_set_data_handle(x->patches[i].m, x->slot_buf[x->patches[i].slot]);
        if (s != dnnl_success) return dn_fail(err, "memory", s);
    }
    /* the out steps: each kept SEND tensor, from its layout into the message */
    x->out_first = x->n_steps;
    pp_err e = {0};
    pp_status hs = pprt_headroom_enter(PPRT_HEADROOM_BYTES, &e);
    if (hs != PP_OK) return PP_FAIL(err, hs, "the copies of its outputs into the message: %s", e.msg);
    hs = out_steps(x, err);
    pprt_headroom_leave();
    if (hs != PP_OK) return hs;
    x->n_out = x->n_steps - x->out_first;
    return plan_arena(x, err);
}

/* The reorders of build_all that copy each kept SEND tensor into the message. */
static pp_status out_steps(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    for (int t = 0; t < st->n_tensors; t++) {
        if (st->t[t].kind != PPRT_SEND || x->kind[t] != PPRT_ACTIVATION) continue;
        dnnl_memory_desc_t cur, plain;
        dnnl_memory_t from, to;
        PP_TRY(tensor_layout(x, t, &cur, err));
        PP_TRY(tensor_plain(x, t, &plain, err));
        PP_TRY(tensor_mem(x, t, &cur, &from, err));
        if (dnnl_memory_desc_get_size(&plain) > st->t[t].nbytes)
            return PP_FAIL(err, PP_ERUNTIME, "sent tensor '%s': %zu bytes plain, %zu in its message slot",
                           st->t[t].name, dnnl_memory_desc_get_size(&plain), st->t[t].nbytes);
        PP_TRY(new_mem(x, &plain, DNNL_MEMORY_NONE, &to, err));
        if (!GROW(x->binds, x->cap_binds, x->n_binds + 1)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->binds[x->n_binds++] = (bind){to, t, true};
        PP_TRY(push_reorder(x, from, to, STEP_REORDER, err));
    }
    return PP_OK;
}

static void dnnl_counts(const pprt_exec *x, pprt_exec_counts *c) {
    const pprt_stage *st = x->st;
    *c = (pprt_exec_counts){.nodes = st->n_nodes, .weight_bytes = (double)x->weight_bytes};
    for (int ni = 0; ni < st->n_nodes; ni++) {
        bool own = x->first[ni] >= 0 || x->absorbed[ni];
        c->own += own;
        c->reference += !own;
        c->post_ops += x->absorbed[ni];
    }
    for (int i = 0; i < x->n_steps; i++) {
        c->reorders += x->steps[i].kind == STEP_REORDER;
        c->copies += x->steps[i].kind == STEP_COPY;
    }
    for (int i = 0; i < st->n_tensors; i++) {
        c->blocked += x->blocked[i];
        if (x->alias[i] < 0) continue;
        if (builder_of(st->nodes[x->writer[i]].op) == build_view) c->views++;
        else c->in_place++;
    }
}

static void report(const pprt_exec *x) {
    const pprt_stage *st = x->st;
    pprt_exec_counts c;
    dnnl_counts(x, &c);
    char refs[512] = "";
    size_t len = 0;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (x->first[ni] >= 0 || x->absorbed[ni]) continue;
        const char *name = pp_op_table[st->nodes[ni].op].name;
        if (len < sizeof refs - 1 && !strstr(refs, name)) {
            int w = snprintf(refs + len, sizeof refs - len, "%s%s", len ? " " : "", name);
            if (w > 0) len += (size_t)w;
        }
    }
    fprintf(stderr,
            "pprt dnnl: stage %d: %d of %d nodes on oneDNN (%d as post-ops)%s%s; %d reorders and %d residual copies "
            "per micro-batch (%d outputs in place of their input); %d tensors in oneDNN layouts, %d views of their input's "
            "bytes; arena %.1f MB (the plan's %.1f MB); %.1f MB reordered weights, %.1f MB other buffers, %.1f MB "
            "shared\n",
            st->index, c.own, st->n_nodes, c.post_ops, len ? ", reference: " : "", refs, c.reorders, c.copies,
            c.in_place, c.blocked, c.views,
            (double)x->arena_bytes / 1e6, (double)st->arena_bytes / 1e6, (double)x->weight_bytes / 1e6,
            (double)(x->owned_bytes - x->weight_bytes) / 1e6,
            (double)(x->slot_bytes[0] + x->slot_bytes[1] + x->slot_bytes[2] + x->slot_bytes[3]) / 1e6);
    if (x->verbose < 2) return;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (x->absorbed[ni])
            fprintf(stderr, "  %-24s %-14s post-op\n", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name);
        if (x->first[ni] < 0) continue;
        fprintf(stderr, "  %-24s %-14s", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name);
        for (int k = 0; k < x->nsteps[ni]; k++) {
            const step *s = &x->steps[x->first[ni] + k];
            const_dnnl_primitive_desc_t pd;
            static const char *fixes[] = {"?", "pprt:clamp", "pprt:nan_rows", "pprt:maxpool_nan"};
            const char *impl = s->silu                       ? "pprt:silu:avx2"
                               : s->fix.kind                  ? fixes[s->fix.kind]
                               : !s->wino                     ? "?"
                               : pprt_wino_tile(s->wino) == 2 ? "pprt:wino_2x3:avx2"
                                                              : "pprt:wino_4x3:avx2";
            if (s->prim && dnnl_primitive_get_primitive_desc(s->prim, &pd) == dnnl_success)
                dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
            fprintf(stderr, " %s%s", s->kind == STEP_REORDER ? "reorder:" : s->kind == STEP_COPY ? "copy:" : "",
                    impl);
        }
        fputc('\n', stderr);
    }
}

/* ---- the executor ------------------------------------------------------------------------------------ */

static void dnnl_destroy(pprt_exec *x);

/* An on/off setting from the environment: unset gives dflt, "0" off, anything else on. */
static bool env_flag(const char *name, bool dflt) {
    const char *v = getenv(name);
    return v ? strcmp(v, "0") != 0 : dflt;
}

static pp_status dnnl_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                             pp_err *err) {
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->p = p;
    x->st = st;
    x->fallback = pprt_backend_fallback();
    const size_t nt = pp_count(st->n_tensors), nn = pp_count(st->n_nodes);
    x->ptr = calloc(nt, sizeof *x->ptr);
    x->msg = calloc(nt, sizeof *x->msg);
    x->kind = calloc(nt, sizeof *x->kind);
    x->node_s = calloc(nn, sizeof *x->node_s);
    x->on_dnnl = calloc(nn, sizeof *x->on_dnnl);
    x->absorbed = calloc(nn, sizeof *x->absorbed);
    x->writer = calloc(nt, sizeof *x->writer);
    x->last = calloc(nt, sizeof *x->last);
    x->born = calloc(nt, sizeof *x->born);
    x->need = calloc(nt, sizeof *x->need);
    x->alias = calloc(nt, sizeof *x->alias);
    x->ghost = calloc(nt, sizeof *x->ghost);
    x->first = calloc(nn, sizeof *x->first);
    x->nsteps = calloc(nn, sizeof *x->nsteps);
    x->cons = calloc(nt, sizeof *x->cons);
    x->flex = calloc(nt, sizeof *x->flex);
    x->blocked = calloc(nt, sizeof *x->blocked);
    x->lay = calloc(nt, sizeof *x->lay);
    if (!x->ptr || !x->msg || !x->kind || !x->node_s || !x->on_dnnl || !x->absorbed || !x->writer || !x->last ||
        !x->born || !x->need || !x->alias || !x->ghost || !x->first || !x->nsteps || !x->cons || !x->flex ||
        !x->blocked || !x->lay) {
        dnnl_destroy(x);
        return PP_FAIL(err, PP_ENOMEM, "stage %d: out of memory", st->index);
    }
    const char *v = getenv("PPRT_DNNL_VERBOSE");
    x->verbose = v ? atoi(v) : 0;
    const char *lay = getenv("PPRT_DNNL_LAYOUT");
    x->propagate = !(lay && !strcmp(lay, "plain"));
    const char *rs = getenv("PPRT_DNNL_RESIDUAL");
    x->fuse = env_flag("PPRT_DNNL_FUSE", true);
    x->residual_sum = !(rs && !strcmp(rs, "binary"));
    x->inplace = env_flag("PPRT_DNNL_INPLACE", true);
    const char *su = getenv("PPRT_DNNL_SMALL_US");
    x->small_us = su ? atof(su) : 100;
    x->wino = env_flag("PPRT_DNNL_WINO", true);
    const char *wt = getenv("PPRT_DNNL_WINO_TILE");
    x->wino_tile = wt && (!strcmp(wt, "2") || !strcmp(wt, "4")) ? atoi(wt) : 0;
    x->follow = env_flag("PPRT_DNNL_FOLLOW", false);
    x->views = env_flag("PPRT_DNNL_VIEWS", true);
    const char *rl = getenv("PPRT_DNNL_RELU");
    x->relu_max = rl && !strcmp(rl, "max");
    const char *rm = getenv("PPRT_DNNL_ROWS_MAX");
    x->rows_max = rm ? atoll(rm) : ROWS_AS_PIXELS_MAX;
    for (int i = 0; i < st->n_tensors; i++) x->writer[i] = x->last[i] = -1;
    for (int i = 0; i < st->n_tensors; i++) x->kind[i] = (unsigned char)st->t[i].kind;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        x->on_dnnl[ni] = builder_of(n->op) != NULL;
        x->first[ni] = -1;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) x->cons[n->in[k]]++, x->last[n->in[k]] = ni;
        for (int k = 0; k < n->n_out; k++) x->writer[n->out[k]] = ni;
    }
    /* a sent tensor this stage also reads stays in the arena (PPRT_DNNL_KEEP_SEND=0: never) */
    if (x->propagate && env_flag("PPRT_DNNL_KEEP_SEND", true))
        for (int i = 0; i < st->n_tensors; i++)
            if (st->t[i].kind == PPRT_SEND && x->cons[i] > 0 && x->writer[i] >= 0 && st->t[i].dtype == PP_F32) {
                x->kind[i] = PPRT_ACTIVATION;
                x->last[i] = st->n_nodes; /* until the out steps */
            }
    for (int i = 0; i < st->n_tensors; i++) reset_tensor(x, i);
    dnnl_status_t ds = dnnl_engine_create(&x->eng, dnnl_cpu, 0);
    if (ds == dnnl_success) ds = dnnl_stream_create(&x->strm, x->eng, dnnl_stream_default_flags);
    if (ds == dnnl_success) ds = dnnl_primitive_attr_create(&x->attr_reorder);
    if (ds == dnnl_success) ds = dnnl_primitive_attr_set_scratchpad_mode(x->attr_reorder, dnnl_scratchpad_mode_user);
    if (ds != dnnl_success) {
        dnnl_destroy(x);
        return dn_fail(err, "engine", ds);
    }
    /* primitives are created for the stage's threads (oneDNN sizes some
     * kernels' work split then); the caller's setting is restored after */
    omp_get_fn *get = omp_getter();
    const int caller_threads = get ? get() : 0;
    x->stage_threads = cfg->threads > 0 ? cfg->threads : 1;
    x->bf16 = cfg->precision == PPRT_BF16 && dnnl_has_bf16(); /* else f32: pprt warns */
    x->own_silu = !x->bf16 && pprt_silu_wins() && env_flag("PPRT_DNNL_SILU", true);
    x->threads = x->stage_threads;
    x->build_threads = x->threads;
    set_threads(x->threads);
    /* Build; a declined node whose input was already laid out for it turns
     * into a reference node and the build starts over (each round declines
     * at least one more node, so this ends). */
    for (;;) {
        bool restart;
        pp_err e = {0};
        pp_status s = build_all(x, &restart, &e);
        if (s != PP_OK) {
            set_threads(caller_threads);
            dnnl_destroy(x);
            return PP_WRAP(err, &e, s, "%s", e.msg); /* the caller names the stage */
        }
        if (!restart) break;
        teardown(x);
    }
    set_threads(caller_threads);
    x->threads = 0; /* the stage thread's setting is not known yet */
    if (x->verbose) { /* stages create their executors at once: one report at a time */
        flockfile(stderr);
        report(x);
        funlockfile(stderr);
    }
    *out = x;
    return PP_OK;
}

static pp_status run_steps(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err);

static pp_status dnnl_run(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    if (x->ran) return run_steps(x, in_msg, out_msg, err);
    /* the first run starts the stage's OpenMP threads: room for them under ulimit -v */
    pp_err e = {0};
    pp_status s = pprt_headroom_enter(PPRT_HEADROOM_BYTES + pprt_headroom_team(x->stage_threads, false), &e);
    if (s != PP_OK)
        return PP_FAIL(err, s, "starting %d intra-op thread%s: %s", x->stage_threads, x->stage_threads == 1 ? "" : "s",
                       e.msg); /* the caller names the stage and micro-batch */
    s = run_steps(x, in_msg, out_msg, err);
    pprt_headroom_team(x->stage_threads, true);
    pprt_headroom_leave();
    x->ran = true;
    return s;
}

static pp_status run_steps(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    const pprt_stage *st = x->st;
    const int stage_threads = x->stage_threads;
    for (int i = 0; i < st->in.n; i++) x->ptr[st->recv[i]] = (unsigned char *)in_msg + st->in.off[i];
    for (int i = 0; i < st->out.n; i++)
        if (st->out.t[i]->kind == PPRT_SEND) {
            void *at = (unsigned char *)out_msg + st->out.off[i];
            if (x->kind[st->send[i]] == PPRT_SEND) x->ptr[st->send[i]] = at;
            else x->msg[st->send[i]] = at;
        }
    for (int i = 0; i < x->n_binds; i++) {
        const bind *b = &x->binds[i];
        dnnl_status_t s = dnnl_memory_set_data_handle(b->m, b->msg ? x->msg[b->tid] : x->ptr[b->tid]);
        if (s != dnnl_success) return dn_fail(err, "memory", s);
    }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if (x->absorbed[ni]) continue;
        double t0 = now_s();
        if (x->first[ni] >= 0) {
            for (int k = 0; k < x->nsteps[ni]; k++) {
                step *s = &x->steps[x->first[ni] + k];
                const int t = s->threads > 0 && stage_threads > 0 ? s->threads : stage_threads;
                if (t > 0 && t != x->threads) {
                    set_threads(t);
                    x->threads = t;
                }
                dnnl_status_t ds = s->wino       ? run_wino(s)
                                   : s->silu     ? run_silu(s)
                                   : s->fix.kind ? run_fix(s)
                                                 : dnnl_primitive_execute(s->prim, x->strm, s->nargs, s->args);
                if (ds != dnnl_success)
                    return PP_FAIL(err, PP_ERUNTIME, "node '%s' (%s): oneDNN: %s", n->name, pp_op_table[n->op].name,
                                   dnnl_status2str(ds));
            }
            x->node_s[ni] += now_s() - t0;
            continue;
        }
        pp_status s = x->fallback->run_node(x->p, st, n, x->ptr, &x->fb, err);
        x->node_s[ni] += now_s() - t0;
        if (s != PP_OK) return s;
    }
    for (int k = 0; k < x->n_out; k++) {
        step *s = &x->steps[x->out_first + k];
        dnnl_status_t ds = dnnl_primitive_execute(s->prim, x->strm, s->nargs, s->args);
        if (ds != dnnl_success)
            return PP_FAIL(err, PP_ERUNTIME, "copying a sent tensor into the message: oneDNN: %s",
                           dnnl_status2str(ds));
    }
    dnnl_status_t ds = dnnl_stream_wait(x->strm);
    if (ds != dnnl_success) return dn_fail(err, "stream", ds);
    pprt_pass_through(st, in_msg, out_msg);
    return PP_OK;
}

static void dnnl_destroy(pprt_exec *x) {
    if (!x) return;
    rollback(x, (mark){0, 0, 0, 0, 0, 0});
    for (int i = 0; i < N_SLOTS; i++) free(x->slot_buf[i]);
    free(x->steps);
    free(x->mems);
    free(x->binds);
    free(x->patches);
    free(x->owned);
    if (x->attr_reorder) dnnl_primitive_attr_destroy(x->attr_reorder);
    if (x->strm) dnnl_stream_destroy(x->strm);
    if (x->eng) dnnl_engine_destroy(x->eng);
    pprt_node_ctx_free(&x->fb);
    free(x->arena);
    free(x->ptr);
    free(x->msg);
    free(x->kind);
    free(x->node_s);
    free(x->on_dnnl);
    free(x->absorbed);
    free(x->writer);
    free(x->last);
    free(x->born);
    free(x->need);
    free(x->alias);
    free(x->abinds);
    free(x->ghost);
    free(x->first);
    free(x->nsteps);
    free(x->cons);
    free(x->flex);
    free(x->blocked);
    free(x->lay);
    free(x);
}

static const double *dnnl_node_seconds(const pprt_exec *x) { return x->node_s; }

/* Whether oneDNN has bf16 convolutions and matrix products on this CPU: it
 * has them from AVX-512 up (emulated on plain AVX-512, in hardware with
 * AVX512_BF16 or AMX), not on AVX2, where every such node would fall back
 * to the reference kernels. Asked once, of a small convolution and matmul. */
static bool has_bf16;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

static bool bf16_pd(const_dnnl_op_desc_t d, dnnl_engine_t eng) {
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, d, NULL, eng, NULL) != dnnl_success) return false;
    dnnl_primitive_desc_destroy(pd);
    return true;
}

static void probe_bf16(void) {
    dnnl_engine_t eng;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return;
    dnnl_memory_desc_t src, wei, dst, a, b, c;
    const dnnl_dims_t sd = {1, 16, 8, 8}, wd = {16, 16, 3, 3}, st = {1, 1}, pad = {1, 1}, md = {16, 16};
    dnnl_convolution_desc_t cd;
    dnnl_matmul_desc_t mmd;
    has_bf16 = dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
               dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
               dnnl_memory_desc_init_by_tag(&dst, 4, sd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
               dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                  NULL, &dst, st, pad, pad) == dnnl_success &&
               bf16_pd(&cd, eng) &&
               dnnl_memory_desc_init_by_tag(&a, 2, md, dnnl_bf16, dnnl_ab) == dnnl_success &&
               dnnl_memory_desc_init_by_tag(&b, 2, md, dnnl_bf16, dnnl_ab) == dnnl_success &&
               dnnl_memory_desc_init_by_tag(&c, 2, md, dnnl_f32, dnnl_ab) == dnnl_success &&
               dnnl_matmul_desc_init(&mmd, &a, &b, NULL, &c) == dnnl_success && bf16_pd(&mmd, eng);
    dnnl_engine_destroy(eng);
}

static bool dnnl_has_bf16(void) {
    pthread_once(&bf16_once, probe_bf16);
    return has_bf16;
}

static const pprt_exec_ops exec_dnnl = {"cpu-dnnl", dnnl_create, dnnl_run, dnnl_destroy, dnnl_node_seconds,
                                        dnnl_counts};

static void dnnl_describe(FILE *f) {
    fprintf(f, "  dnnl: bf16 kernels on this CPU: %s; vector ISA: %s%s\n",
            dnnl_has_bf16() ? "yes" : "no, --precision bf16 runs in f32", pprt_isa_name(pprt_cpu_isa()),
            pprt_isa_capped() ? ", capped by ONEDNN_MAX_CPU_ISA" : "");
}

/* The ops build_all may put on oneDNN (builder_of), f32 (the rest fall back). */
static bool dnnl_supports(const pprt_plan *p, const pprt_stage *st, const pprt_node *n) {
    (void)p;
    if (!builder_of(n->op)) return false;
    for (int k = 0; k < n->n_out; k++)
        if (st->t[n->out[k]].dtype != PP_F32) return false;
    return true;
}

static bool dnnl_precision(pprt_precision pr, bool *here) {
    *here = pr == PPRT_F32 || dnnl_has_bf16();
    return pr == PPRT_F32 || pr == PPRT_BF16;
}

const pprt_backend pprt_backend_dnnl = {
    .name = "dnnl",
    .what = "oneDNN primitives (Debian's libdnnl), the rest on the reference kernels",
    .supports = dnnl_supports,
    .exec = &exec_dnnl,
    .mem = PPRT_MEM_HOST,
    .multithreaded = true,
    .precision = dnnl_precision,
    .describe = dnnl_describe,
};

#endif /* PPRT_WITH_DNNL */
