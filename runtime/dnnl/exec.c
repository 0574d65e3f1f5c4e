/* exec.c: the oneDNN stage executor. Same contract as the reference
 * executor (exec_ref.c): it binds every tensor of a stage to its bytes and
 * runs the nodes in order; but each node that oneDNN covers runs as oneDNN
 * primitives, created once in create(), and every other node (op, attribute
 * or element type outside the list below, or a primitive oneDNN declines)
 * runs its reference kernel (the registry's fallback, through the node loop
 * of runtime/nodes.c). The decision is per node, at create time.
 *
 * On oneDNN (f32 tensors; computed in f32, or bf16 on request, see Precision),
 * one family of ops a file (dnnl_exec.h lists the files; families.def is the
 * op table):
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
 * Layouts. A tensor whose consumers are all oneDNN nodes that take any
 * layout (convolution source and residual, pooling, BatchNormalization,
 * eltwise, binary) is stored in the layout its producer prefers (NHWC or
 * channel-blocked, as oneDNN picks) instead of the plain row-major one;
 * everywhere else tensors are plain, and a reorder converts on the way in or
 * out of a primitive (into a few shared temporary buffers).
 * PPRT_DNNL_LAYOUT=plain keeps every tensor plain.
 *
 * Post-ops (postops.c): a convolution, MatMul or Gemm absorbs the eltwise and
 * binary nodes after it inside one of ppcc's fusion chains.
 *
 * Memory. Weights are reordered once, at create time, into the layout each
 * primitive asks for (owned copies). Primitives use a user scratchpad: one
 * buffer per stage, sized for the largest. Activations get this executor's
 * own arena, planned once every node is built (arena.c): from when each
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

#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl_debug.h>

#include "headroom.h"
#include "../isa.h"
#include "../pool.h"
#include "kernels/pwconv.h"
#include "kernels/rnn_gemm.h"
#include "kernels/silu.h"
#include "../nodes.h"
#include "dnnl_exec.h"

/* Whether oneDNN computes bf16 on this CPU (AVX-512 and up); where it does
 * not, --precision bf16 runs in f32 (and pprt warns). */
static bool dnnl_has_bf16(void);

/* ---- OpenMP team size of the calling thread ------------------------------------------ */

/* omp_set_num_threads and omp_get_max_threads of the OpenMP runtime oneDNN
 * was linked with (found at run time, so this file needs no OpenMP flags of
 * its own); NULL when there is none. */
static void (*omp_set)(int);
static int (*omp_get)(void);
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;

static void omp_find(void) {
    void *set = dlsym(RTLD_DEFAULT, "omp_set_num_threads"), *get = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (set) memcpy(&omp_set, &set, sizeof set); /* POSIX: data and function pointers convert */
    if (get) memcpy(&omp_get, &get, sizeof get);
}

/* Set the calling thread's OpenMP team size (oneDNN reads it when it creates
 * and runs primitives); t <= 0: leave it. */
static void set_threads(int t) {
    pthread_once(&omp_once, omp_find);
    if (t > 0 && omp_set) omp_set(t);
}

/* Threads for node n's primitives: one for work so small that waking more
 * threads costs more than it saves (estimated from the node's FLOPs and the
 * bytes it touches, weights included (a matrix-vector product is all
 * weights): under x->o.small_us microseconds on one core), else the
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
    return us < x->o.small_us ? 1 : stage_threads;
}

/* ---- the op table ---------------------------------------------------------------------------- */

/* op -> the family that builds it (families.def); a row given twice does not compile */
static const dn_family *const families[PP_OP_COUNT] = {
#define DN_OP(op, family) [PP_OP_##op] = &dn_##family,
#include "families.def"
#undef DN_OP
};

const dn_family *dn_family_of(pp_op op) { return (unsigned)op < PP_OP_COUNT ? families[op] : NULL; }

/* pprt --ops: each family in words, through the same table */
static const char *dnnl_route(pp_op op) {
    static const struct {
        const dn_family *f;
        const char *words;
    } said[] = {{&dn_conv, "oneDNN convolution (2 or 4 channels a group: pprt's kernel)"},
                {&dn_matmul, "oneDNN matmul"},
                {&dn_gemm, "oneDNN matmul"},
                {&dn_pool, "oneDNN pooling"},
                {&dn_batchnorm,
                 "pprt's kernel (else oneDNN batch norm; training mode: reference, in parts over the threads)"},
                {&dn_layernorm, "oneDNN layer norm"},
                {&dn_groupnorm, "oneDNN layer norm (+ binary for scale and bias)"},
                {&dn_fusedgn, "pprt's kernel (else oneDNN layer norm + binary)"},
                {&dn_resample, "oneDNN resampling (linear, half_pixel; else reference)"},
                {&dn_softmax, "oneDNN softmax (pprt's kernel over a middle axis)"},
                {&dn_eltwise, "oneDNN eltwise"},
                {&dn_binary, "oneDNN binary"},
                {&dn_view, "view (no copy) or reorder"},
                {&dn_slice, "oneDNN reorder"},
                {&dn_pad, "pprt's row copies"},
                {&dn_reduce, "pprt's kernel (neighbouring axes)"},
                {&dn_split, "pprt's row copies"},
                {&dn_convgradx, "oneDNN convolution backward data"},
                {&dn_convgradw, "oneDNN convolution backward weights"}};
    if (op == PP_OP_LSTM || op == PP_OP_GRU || op == PP_OP_RNN) return "pprt's kernel on oneDNN's sgemm";
    if (op == PP_OP_UNARYGRAD) return "oneDNN eltwise backward (Gelu's), else reference, in parts over the threads";
    if (op == PP_OP_MAXPOOLGRAD || op == PP_OP_BATCHNORMGRAD || op == PP_OP_LAYERNORMGRAD)
        return "reference, in parts over the threads";
    if (op == PP_OP_TRANSPOSE) return "view (no copy), oneDNN reorder, or pprt's row copies (last axis kept)";
    if (op == PP_OP_GLOBALAVGPOOL) return "pprt's kernel (after a SiLU on pprt's kernel: in its pass)";
    if (op == PP_OP_MUL) return "oneDNN binary (by a scale per channel: pprt's kernel)";
    const dn_family *f = dn_family_of(op);
    for (size_t i = 0; f && i < sizeof said / sizeof *said; i++)
        if (said[i].f == f) return said[i].words;
    return f ? "oneDNN" : NULL;
}

/* Whether node n reads its input k in whatever layout it is stored in. */
static bool accepts_any(const pprt_exec *x, const pprt_node *n, int k) {
    const dn_family *f = dn_family_of(n->op);
    return f && (f->n_in == 0 || n->n_in == f->n_in) && k < 32 && (f->any_in >> k & 1u) &&
           (!f->any_if || f->any_if(x, n));
}

int dn_team(void) {
    pthread_once(&omp_once, omp_find);
    return omp_get ? omp_get() : 1;
}

mark dn_mark_now(const pprt_exec *x) {
    return (mark){x->steps.n, x->mems.n, x->binds.n, x->patches.n, x->owned.n, x->abinds.n, x->wrefs.n, x->wre.n,
                  x->derived};
}

void dn_rollback(pprt_exec *x, mark m) {
    for (int i = m.steps; i < x->steps.n; i++) {
        if (x->steps.a[i].prim) dnnl_primitive_destroy(x->steps.a[i].prim);
        if (x->steps.a[i].drop) x->steps.a[i].drop(x->steps.a[i].ctx);
    }
    for (int i = m.mems; i < x->mems.n; i++) dnnl_memory_destroy(x->mems.a[i]);
    for (int i = m.owned; i < x->owned.n; i++) pprt_pool_free(x->owned.a[i]);
    dn_wshare_release(x, m.wrefs);
    x->steps.n = m.steps, x->mems.n = m.mems, x->binds.n = m.binds, x->patches.n = m.patches,
    x->owned.n = m.owned, x->abinds.n = m.abinds, x->wre.n = m.wre, x->derived = m.derived;
    if (!x->derived) x->derived_what = NULL;
}

static void reset_tensor(pprt_exec *x, int tid) {
    const pprt_tdesc *t = T(x, tid);
    x->tn.blocked[tid] = false;
    x->tn.born[tid] = x->tn.writer[tid];
    x->tn.need[tid] = t->nbytes;
    x->tn.ghost[tid] = false;
    x->tn.alias[tid] = -1;
    if (t->kind == PPRT_WEIGHT) x->ptr[tid] = (void *)t->data;
    else if (x->tn.kind[tid] == PPRT_ACTIVATION) x->ptr[tid] = NULL; /* dn_plan_arena */
}

static void teardown(pprt_exec *x) {
    dn_rollback(x, (mark){0, 0, 0, 0, 0, 0, 0, 0, 0});
    pprt_pool_free(x->arena);
    x->arena = NULL;
    x->bytes.arena = 0;
    for (int i = 0; i < N_SLOTS; i++) {
        pprt_pool_free(x->slot.buf[i]);
        x->slot.buf[i] = NULL;
        x->slot.bytes[i] = 0;
    }
    for (int i = 0; i < x->st->n_tensors; i++) reset_tensor(x, i);
    x->bytes.owned = x->bytes.weights = x->bytes.wshared = 0;
}

/* Weights of a --ref-weights plan that lie misaligned in the model file are
 * copied as the nodes reading them are built (nodes.h), and a copy that only
 * one node reads is freed once that node is built on oneDNN without a step
 * that reads it at run time (oneDNN reordered it into its own layout): the
 * stage holds one copy of its weights, at no time two. */
typedef struct steps_since {
    const pprt_exec *x;
    int first; /* the node's first step */
} steps_since;

/* Whether a step of the node being built reads [bytes, bytes + n) (or its handle is unknown). */
static bool steps_read(void *ctx, const void *bytes, size_t n) {
    const steps_since *c = ctx;
    const uintptr_t lo = (uintptr_t)bytes, hi = lo + n;
    for (int i = c->first; i < c->x->steps.n; i++)
        for (int a = 0; a < c->x->steps.a[i].nargs; a++) {
            void *h = NULL;
            if (dnnl_memory_get_data_handle(c->x->steps.a[i].args[a].memory, &h) != dnnl_success ||
                ((uintptr_t)h >= lo && (uintptr_t)h < hi))
                return true;
        }
    return false;
}

static void drop_weights(pprt_exec *x, const pprt_node *n, int first_step) {
    steps_since c = {x, first_step};
    pprt_node_weights_release(x->p, x->st, n, x->ptr, x->tn.cons, steps_read, &c);
}

static pp_status out_steps(pprt_exec *x, pp_err *err);

/* What a failed build of node n left: its steps and its outputs' layouts */
static void undo_node(pprt_exec *x, const pprt_node *n, mark m) {
    dn_rollback(x, m);
    for (int f = 0; f < x->bld.n_fused; f++) reset_tensor(x, x->st->nodes[x->bld.fused[f]].out[0]);
    for (int k = 0; k < n->n_out; k++) reset_tensor(x, n->out[k]);
    x->bld.n_fused = 0;
    x->nd.through[n - x->st->nodes] = 0;
}

/* Node ni's primitives (x->bld says for how many threads, and whether on
 * bf16 kernels), absorbing the nodes after it where it can, else alone. */
static pp_status build_node(pprt_exec *x, int ni, mark m, pp_err *e) {
    const pprt_stage *st = x->st;
    const pprt_node *n = &st->nodes[ni];
    x->bld.node = ni;
    dn_find_fusable(x, ni);
    x->bld.n_whole = 0;
    pp_status s = pprt_node_weights(x->p, st, n, x->ptr, e);
    for (int f = 0; f < x->bld.n_fused && s == PP_OK; f++)
        s = pprt_node_weights(x->p, st, &st->nodes[x->bld.fused[f]], x->ptr, e);
    x->nd.through[ni] = 0;
    if (s == PP_OK) s = dn_family_of(n->op)->build(x, n, e);
    if (s != PP_OK && s != PP_ENOMEM && x->bld.n_fused) {
        /* again without absorbing the nodes after it */
        if (x->o.verbose >= 2)
            fprintf(stderr, "pprt dnnl: stage %d: node '%s' (%s) absorbs no post-ops: %s\n", st->index, n->name,
                    pp_op_table[n->op].name, e->msg);
        undo_node(x, n, m);
        *e = (pp_err){0};
        s = dn_family_of(n->op)->build(x, n, e);
    }
    return s;
}

/* One attempt at building every node. *restart: a node was declined whose
 * input another node had already stored in a oneDNN layout (build again). */
static pp_status build_all(pprt_exec *x, bool *restart, pp_err *err) {
    const pprt_stage *st = x->st;
    *restart = false;
    x->out.n = 0;
    x->half_products = 0, x->half_weights = 0;
    memset(x->tn.wreads, 0, (size_t)st->n_tensors * sizeof *x->tn.wreads);
    for (int i = 0; i < st->n_tensors; i++)
        x->tn.flex[i] = x->o.propagate && x->tn.kind[i] == PPRT_ACTIVATION && x->tn.cons[i] > 0 && f32(x, i);
    if (x->o.propagate)
        for (int ni = 0; ni < st->n_nodes; ni++) {
            const pprt_node *n = &st->nodes[ni];
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0 && !(x->nd.on_dnnl[ni] && accepts_any(x, n, k))) x->tn.flex[n->in[k]] = false;
        }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        x->nd.first[ni] = -1;
        x->nd.nsteps[ni] = 0;
        x->nd.absorbed[ni] = false;
        x->nd.through[ni] = 0;
        x->nd.pre[ni].xi = -1;
    }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if (!x->nd.on_dnnl[ni] || x->nd.absorbed[ni]) continue;
        mark m = dn_mark_now(x);
        pp_err e = {0};
        x->bld.threads = node_threads(x, n, x->threads);
        /* under ulimit -v: room for what oneDNN allocates (headroom.h) */
        pp_status hs = pprt_headroom_enter(PPRT_HEADROOM_BYTES + pprt_headroom_team(x->bld.threads, false), &e);
        if (hs != PP_OK) return PP_FAIL(err, hs, "node '%s' (%s): %s", n->name, pp_op_table[n->op].name, e.msg);
        set_threads(x->bld.threads);
        x->bld.half = x->nd.half[ni];
        pp_status s = build_node(x, ni, m, &e);
        if (s != PP_OK && s != PP_ENOMEM && x->bld.half) {
            /* a product of bf16 values oneDNN's bf16 kernels decline: in f32 */
            if (x->o.verbose >= 2)
                fprintf(stderr, "pprt dnnl: stage %d: node '%s' (%s) in f32, not on bf16 kernels: %s\n", st->index,
                        n->name, pp_op_table[n->op].name, e.msg);
            undo_node(x, n, m);
            x->bld.half = x->nd.half[ni] = false;
            e = (pp_err){0};
            s = build_node(x, ni, m, &e);
        }
        x->half_products += s == PP_OK && x->bld.half;
        x->bld.half = false;
        pprt_headroom_team(x->bld.threads, true);
        pprt_headroom_leave();
        for (int f = 0; f < x->bld.n_fused && s == PP_OK; f++) x->nd.absorbed[x->bld.fused[f]] = true;
        int fused[4], n_fused = s == PP_OK ? x->bld.n_fused : 0;
        memcpy(fused, x->bld.fused, sizeof fused);
        x->bld.n_fused = 0;
        set_threads(x->threads);
        x->bld.threads = x->threads;
        if (s == PP_ENOMEM) return PP_FAIL(err, s, "node '%s': %s", n->name, e.msg);
        if (s != PP_OK) {
            dn_rollback(x, m);
            for (int k = 0; k < n->n_out; k++) reset_tensor(x, n->out[k]);
            x->nd.on_dnnl[ni] = false;
            x->nd.through[ni] = 0; /* the reference kernel reads the Transpose's output */
            if (x->o.verbose >= 2)
                fprintf(stderr, "pprt dnnl: stage %d: node '%s' (%s) on the reference kernel: %s\n", st->index,
                        n->name, pp_op_table[n->op].name, e.msg);
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0 && x->tn.flex[n->in[k]]) *restart = true;
            if (x->nd.pre[ni].xi >= 0) *restart = true; /* the Mul before it wrote nothing: build it again */
            if (*restart) return PP_OK;
            continue;
        }
        x->nd.first[ni] = m.steps;
        x->nd.nsteps[ni] = x->steps.n - m.steps;
        drop_weights(x, n, m.steps);
        for (int f = 0; f < n_fused; f++) drop_weights(x, &st->nodes[fused[f]], m.steps);
    }
    dn_through_views(x);
    /* the reference nodes read their weights as they are */
    for (int ni = 0; ni < st->n_nodes; ni++)
        if (x->nd.first[ni] < 0 && !x->nd.absorbed[ni])
            PP_TRY(pprt_node_weights(x->p, st, &st->nodes[ni], x->ptr, err));
    /* the shared buffers, now that their sizes are known */
    for (int i = 0; i < N_SLOTS; i++) {
        if (!x->slot.bytes[i]) continue;
        if (!(x->slot.buf[i] = pprt_pool_alloc(x->slot.bytes[i]))) {
            return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes of oneDNN buffers", x->slot.bytes[i]);
        }
    }
    for (int i = 0; i < x->patches.n; i++) {
        dnnl_status_t s = dnnl_memory_set_data_handle(x->patches.a[i].m, x->slot.buf[x->patches.a[i].slot]);
        if (s != dnnl_success) return dn_fail(err, "memory", s);
    }
    /* the out steps: each kept SEND tensor, from its layout into the message */
    x->out.first = x->steps.n;
    pp_err e = {0};
    pp_status hs = pprt_headroom_enter(PPRT_HEADROOM_BYTES, &e);
    if (hs != PP_OK) return PP_FAIL(err, hs, "the copies of its outputs into the message: %s", e.msg);
    hs = out_steps(x, err);
    pprt_headroom_leave();
    if (hs != PP_OK) return hs;
    x->out.n = x->steps.n - x->out.first;
    return dn_plan_arena(x, err);
}

/* The reorders of build_all that copy each kept SEND tensor into the message. */
static pp_status out_steps(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    for (int t = 0; t < st->n_tensors; t++) {
        if (st->t[t].kind != PPRT_SEND || x->tn.kind[t] != PPRT_ACTIVATION) continue;
        dnnl_memory_desc_t cur, plain;
        dnnl_memory_t from, to;
        PP_TRY(dn_tensor_layout(x, t, &cur, err));
        PP_TRY(dn_tensor_plain(x, t, &plain, err));
        PP_TRY(dn_tensor_mem(x, t, &cur, &from, err));
        if (dnnl_memory_desc_get_size(&plain) > st->t[t].nbytes)
            return PP_FAIL(err, PP_ERUNTIME, "sent tensor '%s': %zu bytes plain, %zu in its message slot",
                           st->t[t].name, dnnl_memory_desc_get_size(&plain), st->t[t].nbytes);
        PP_TRY(dn_new_mem(x, &plain, DNNL_MEMORY_NONE, &to, err));
        if (!ROOM(x->binds)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->binds.a[x->binds.n++] = (bind){to, t, true};
        PP_TRY(dn_push_reorder(x, from, to, STEP_REORDER, err));
    }
    return PP_OK;
}

/* ---- the executor ------------------------------------------------------------------------------------ */

static void dnnl_destroy(pprt_exec *x);

/* oneDNN's sgemm as rnn_gemm.h takes it */
static int dn_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) != dnnl_success;
}

/* Whether node n is an LSTM, GRU or RNN over float32 (rnn_gemm.h); the
 * node stays a reference node to the executor (plain tensors in and out). */
bool dn_rnn_by_gemm(const pprt_exec *x, const pprt_node *n) {
    if ((n->op != PP_OP_LSTM && n->op != PP_OP_GRU && n->op != PP_OP_RNN)) return false;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && k != 4 && x->st->t[n->in[k]].dtype != PP_F32) return false;
    return true;
}

static pp_status run_rnn(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pprt_node_ctx *c = &x->nodes.fb;
    for (int k = 0; k < n->n_in; k++)
        c->tin[k] = n->in[k] < 0 ? (pprt_tensor){PP_UNDEFINED, {0, {0}}, NULL}
                                 : (pprt_tensor){x->st->t[n->in[k]].dtype, x->st->t[n->in[k]].shape, x->ptr[n->in[k]]};
    for (int k = 0; k < n->n_out; k++)
        c->tout[k] = (pprt_tensor){x->st->t[n->out[k]].dtype, x->st->t[n->out[k]].shape, x->ptr[n->out[k]]};
    if (x->stage_threads > 0 && x->threads != x->stage_threads) {
        set_threads(x->stage_threads);
        x->threads = x->stage_threads;
    }
    pp_err e = {0};
    pp_status s = pprt_rnn_gemm(n->op, (pp_attrs){n->attrs, n->n_attrs, x->p->opset}, c->tin, n->n_in, c->tout,
                                n->n_out, &c->scratch, dn_sgemm, dn_team(), &e);
    if (s != PP_OK) return PP_WRAP(err, &e, s, "node '%s' (%s): %s", n->name, pp_op_table[n->op].name, e.msg);
    return PP_OK;
}

/* Node ni's steps, if it has any, or the RNNs' kernel (else the runner
 * hands it to the fallback). */
static pp_status run_node(void *ctx, int ni, bool *ran, pp_err *err) {
    pprt_exec *x = ctx;
    *ran = x->nd.first[ni] >= 0;
    if (!*ran && dn_rnn_by_gemm(x, &x->st->nodes[ni])) {
        *ran = true;
        return run_rnn(x, &x->st->nodes[ni], err);
    }
    if (!*ran && dn_ref_by_parts(x, &x->st->nodes[ni])) {
        *ran = true;
        return dn_ref_parts_run(x, &x->st->nodes[ni], err);
    }
    bool exact = true; /* whether a guard's exact path runs */
    for (int k = 0; k < x->nd.nsteps[ni] && *ran; k++) {
        const step *s = &x->steps.a[x->nd.first[ni] + k];
        if ((s->guard == GUARD_FAST && !x->guard.on) || (s->guard == GUARD_EXACT && !exact)) continue;
        if ((s->guard == GUARD_FAST_RUN && (!x->guard.on || x->guard.exact)) ||
            (s->guard == GUARD_EXACT_RUN && x->guard.on && !x->guard.exact))
            continue;
        const int t = s->threads > 0 && x->stage_threads > 0 ? s->threads : x->stage_threads;
        if (t > 0 && t != x->threads) {
            set_threads(t);
            x->threads = t;
        }
        const bool fast = s->guard == GUARD_FAST || s->guard == GUARD_FAST_RUN;
        if (fast) pprt_fpguard_clear(x->stage_threads);
        dnnl_status_t ds = dn_run_step(s, x->strm);
        if (s->guard == GUARD_FAST) exact = pprt_fpguard_raised(x->stage_threads);
        if (s->guard == GUARD_FAST_RUN && pprt_fpguard_raised(x->stage_threads)) x->guard.redo = true;
        if (ds != dnnl_success) {
            const pprt_node *n = &x->st->nodes[ni];
            return PP_FAIL(err, PP_ERUNTIME, "node '%s' (%s): oneDNN: %s", n->name, pp_op_table[n->op].name,
                           dnnl_status2str(ds));
        }
    }
    return PP_OK;
}

static pp_status dnnl_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                             pp_err *err) {
    pprt_dnnl_opts o;
    PP_TRY(pprt_dnnl_opts_read(&o, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->o = o;
    x->p = p;
    x->st = st;
    const size_t nt = pp_count(st->n_tensors), nn = pp_count(st->n_nodes);
    x->ptr = calloc(nt, sizeof *x->ptr);
    x->msg = calloc(nt, sizeof *x->msg);
    x->tn.kind = calloc(nt, sizeof *x->tn.kind);
    x->nd.on_dnnl = calloc(nn, sizeof *x->nd.on_dnnl);
    x->nd.absorbed = calloc(nn, sizeof *x->nd.absorbed);
    x->nd.pre = calloc(nn, sizeof *x->nd.pre);
    x->tn.writer = calloc(nt, sizeof *x->tn.writer);
    x->tn.last = calloc(nt, sizeof *x->tn.last);
    x->tn.wreads = calloc(nt, sizeof *x->tn.wreads);
    x->tn.born = calloc(nt, sizeof *x->tn.born);
    x->tn.need = calloc(nt, sizeof *x->tn.need);
    x->tn.alias = calloc(nt, sizeof *x->tn.alias);
    x->tn.ghost = calloc(nt, sizeof *x->tn.ghost);
    x->nd.first = calloc(nn, sizeof *x->nd.first);
    x->nd.nsteps = calloc(nn, sizeof *x->nd.nsteps);
    x->tn.cons = calloc(nt, sizeof *x->tn.cons);
    x->tn.flex = calloc(nt, sizeof *x->tn.flex);
    x->tn.blocked = calloc(nt, sizeof *x->tn.blocked);
    x->nd.conv_blk = calloc(nn ? nn : 1, sizeof *x->nd.conv_blk);
    x->nd.through = calloc(nn ? nn : 1, sizeof *x->nd.through);
    x->nd.half = calloc(nn ? nn : 1, sizeof *x->nd.half);
    x->tn.lay = calloc(nt, sizeof *x->tn.lay);
    if (!x->ptr || !x->msg || !x->tn.kind || !x->nd.on_dnnl || !x->nd.absorbed || !x->nd.pre || !x->tn.writer ||
        !x->tn.last || !x->tn.wreads || !x->tn.born || !x->tn.need || !x->tn.alias || !x->tn.ghost || !x->nd.first || !x->nd.nsteps ||
        !x->tn.cons || !x->tn.flex || !x->tn.blocked || !x->nd.conv_blk || !x->nd.through || !x->nd.half || !x->tn.lay ||
        pprt_node_runner_init(&x->nodes, p, st, x->ptr, err) != PP_OK) {
        dnnl_destroy(x);
        return PP_FAIL(err, PP_ENOMEM, "stage %d: out of memory", st->index);
    }
    x->nodes.own = run_node;
    x->nodes.ctx = x;
    x->nodes.skip = x->nd.absorbed;
    if (x->o.conv_blocked) {
        pp_status cs = dn_conv_blocked_nodes(p, st, x->nd.conv_blk, err);
        if (cs != PP_OK) {
            dnnl_destroy(x);
            return cs;
        }
    }
    for (int i = 0; i < st->n_tensors; i++) x->tn.writer[i] = x->tn.last[i] = -1;
    for (int i = 0; i < st->n_tensors; i++) x->tn.kind[i] = (unsigned char)st->t[i].kind;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        x->nd.on_dnnl[ni] = dn_family_of(n->op) != NULL;
        x->nd.first[ni] = -1;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) x->tn.cons[n->in[k]]++, x->tn.last[n->in[k]] = ni;
        for (int k = 0; k < n->n_out; k++) x->tn.writer[n->out[k]] = ni;
    }
    /* a sent tensor this stage also reads stays in the arena (PPRT_DNNL_KEEP_SEND=0: never; unset: not in a
     * training plan, where a forward stage sends, as its stash, nearly every activation it makes, all of them
     * plain for the reference BatchNorm nodes between the convolutions: keeping them doubled the arena,
     * 977 MB on ResNet-50 at batch 8, and copied them into the message once more, for no layout gained;
     * where a tensor lives changes no bit) */
    if (x->o.propagate && x->o.keep_send && !(x->o.keep_send_auto && p->train_devices > 0))
        for (int i = 0; i < st->n_tensors; i++)
            if (st->t[i].kind == PPRT_SEND && x->tn.cons[i] > 0 && x->tn.writer[i] >= 0 && st->t[i].dtype == PP_F32) {
                x->tn.kind[i] = PPRT_ACTIVATION;
                x->tn.last[i] = st->n_nodes; /* until the out steps */
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
    const int caller_threads = dn_team();
    x->stage_threads = cfg->threads > 0 ? cfg->threads : 1;
    x->wversion = cfg->weights_version;
    x->bf16 = cfg->precision == PPRT_BF16 && dnnl_has_bf16(); /* else f32: pprt warns */
    if (!x->bf16 && x->o.half_products && dnnl_has_bf16()) dn_half_products(x, x->nd.half);
    x->own_silu = (x->bf16 ? pprt_silu_bf16_cpu() : pprt_silu_wins()) && x->o.silu;
    x->threads = x->stage_threads;
    x->bld.threads = x->threads;
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
    if (x->o.verbose) { /* stages create their executors at once: one report at a time */
        flockfile(stderr);
        dn_report(x);
        funlockfile(stderr);
    }
    *out = x;
    return PP_OK;
}

static pp_status run_steps(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err);

/* Whether this stage's guarded steps may take their fast path (dnnl_exec.h,
 * GUARD_*): on the stage's thread and team, oneDNN's relu over n floats,
 * once without a NaN (the flag must stay clear) and once with a NaN in the
 * middle of each thread's share of the work in turn, and at the last
 * element (each must raise it). Any failure, a CPU or OpenMP runtime whose
 * flags do not reach pprt_fpguard_raised among them, turns the guard off:
 * the exact path then always runs. Only for a stage that has such steps. */
static bool guard_check(pprt_exec *x) {
    bool guarded = false; /* a stage without a guarded step has nothing to check */
    for (int i = 0; i < x->steps.n && !guarded; i++)
        guarded = x->steps.a[i].guard == GUARD_FAST || x->steps.a[i].guard == GUARD_FAST_RUN;
    if (!guarded || !pprt_fpguard_built()) return false;
    const int team = x->stage_threads > 0 ? x->stage_threads : 1;
    const int64_t n = (int64_t)team << 16;
    float *buf = malloc((size_t)n * sizeof *buf);
    dnnl_memory_desc_t md;
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t m = NULL;
    const dnnl_dims_t dims = {n};
    bool ok = buf && dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a) == dnnl_success &&
              dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, dnnl_eltwise_relu, &md, 0, 0) ==
                  dnnl_success &&
              dnnl_primitive_desc_create(&pd, &ed, NULL, x->eng, NULL) == dnnl_success &&
              dnnl_primitive_create(&prim, pd) == dnnl_success &&
              dnnl_memory_create(&m, &md, x->eng, buf) == dnnl_success;
    set_threads(team);
    x->threads = team;
    for (int k = -1; ok && k <= team; k++) {
        for (int64_t i = 0; i < n; i++) buf[i] = (i & 1) ? 1.0f : -1.0f;
        if (k >= 0) buf[k < team ? k * (n / team) + n / team / 2 : n - 1] = NAN;
        pprt_fpguard_clear(team);
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}};
        ok = dnnl_primitive_execute(prim, x->strm, 2, args) == dnnl_success &&
             dnnl_stream_wait(x->strm) == dnnl_success && pprt_fpguard_raised(team) == (k >= 0);
    }
    if (m) dnnl_memory_destroy(m);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    free(buf);
    if (x->o.verbose) fprintf(stderr, "pprt: dnnl: the Relu/Clip guard is %s on this stage's %d thread%s\n",
                              ok ? "on" : "off (the exact path always)", team, team == 1 ? "" : "s");
    return ok;
}


static pp_status dnnl_run(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    if (x->ran && pthread_equal(x->runner, pthread_self())) return run_steps(x, in_msg, out_msg, err);
    /* the first run on this thread (a training run's kept executor, keep.h, runs on each step's stage thread):
     * its OpenMP team size is the thread's own setting, not known yet; the run starts the team's threads:
     * room for them under ulimit -v; the guard checked on this team */
    x->threads = 0;
    x->runner = pthread_self();
    pp_err e = {0};
    pp_status s = pprt_headroom_enter(PPRT_HEADROOM_BYTES + pprt_headroom_team(x->stage_threads, false), &e);
    if (s != PP_OK)
        return PP_FAIL(err, s, "starting %d intra-op thread%s: %s", x->stage_threads, x->stage_threads == 1 ? "" : "s",
                       e.msg); /* the caller names the stage and micro-batch */
    x->guard.on = guard_check(x);
    s = run_steps(x, in_msg, out_msg, err);
    pprt_headroom_team(x->stage_threads, true);
    pprt_headroom_leave();
    x->ran = true;
    return s;
}

static pp_status run_steps(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    const pprt_stage *st = x->st;
    for (int i = 0; i < st->in.n; i++) x->ptr[st->recv[i]] = (unsigned char *)in_msg + st->in.off[i];
    for (int i = 0; i < st->out.n; i++)
        if (st->out.t[i]->kind == PPRT_SEND && st->out.t[i]->offset == (size_t)i) { /* its own slot */
            void *at = (unsigned char *)out_msg + st->out.off[i];
            if (x->tn.kind[st->send[i]] == PPRT_SEND) x->ptr[st->send[i]] = at;
            else x->msg[st->send[i]] = at;
        }
    for (int i = 0; i < x->binds.n; i++) {
        const bind *b = &x->binds.a[i];
        dnnl_status_t s = dnnl_memory_set_data_handle(b->m, b->msg ? x->msg[b->tid] : x->ptr[b->tid]);
        if (s != dnnl_success) return dn_fail(err, "memory", s);
    }
    x->guard.redo = x->guard.exact = false;
    PP_TRY(pprt_run_nodes(&x->nodes, err));
    if (x->guard.redo) {
        /* a NaN met a residual convolution's fast Relu or Clip (GUARD_FAST_RUN):
         * everything again from the stage's input, which no step writes (in-place
         * outputs take only arena activations' bytes), those steps exactly */
        x->guard.exact = true;
        x->guard.exact_runs++;
        const pp_status s = pprt_run_nodes(&x->nodes, err);
        x->guard.exact = false;
        PP_TRY(s);
    }
    for (int k = 0; k < x->out.n; k++) {
        step *s = &x->steps.a[x->out.first + k];
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
    if (x->o.verbose && x->guard.exact_runs)
        fprintf(stderr,
                "pprt: dnnl: %lld micro-batch%s ran again on the exact paths (a NaN met a residual "
                "convolution's Relu or Clip)\n",
                (long long)x->guard.exact_runs, x->guard.exact_runs == 1 ? "" : "es");
    dn_rollback(x, (mark){0, 0, 0, 0, 0, 0, 0, 0, 0});
    for (int i = 0; i < N_SLOTS; i++) pprt_pool_free(x->slot.buf[i]);
    free(x->steps.a);
    free(x->mems.a);
    free(x->binds.a);
    free(x->patches.a);
    free(x->owned.a);
    free(x->wrefs.a);
    free(x->wre.a);
    if (x->attr_reorder) dnnl_primitive_attr_destroy(x->attr_reorder);
    if (x->strm) dnnl_stream_destroy(x->strm);
    if (x->eng) dnnl_engine_destroy(x->eng);
    pprt_node_runner_free(&x->nodes);
    pprt_pool_free(x->arena);
    free(x->ptr);
    free(x->msg);
    free(x->tn.kind);
    free(x->nd.on_dnnl);
    free(x->nd.absorbed);
    free(x->nd.pre);
    free(x->tn.writer);
    free(x->tn.last);
    free(x->tn.wreads);
    free(x->tn.born);
    free(x->tn.need);
    free(x->tn.alias);
    free(x->abinds.a);
    free(x->tn.ghost);
    free(x->nd.first);
    free(x->nd.nsteps);
    free(x->tn.cons);
    free(x->tn.flex);
    free(x->tn.blocked);
    free(x->nd.conv_blk);
    free(x->nd.through);
    free(x->nd.half);
    free(x->tn.lay);
    free(x);
}

static const double *dnnl_node_seconds(const pprt_exec *x) { return x->nodes.node_s; }

bool dn_derived(pprt_exec *x, const char *what, int t0, int t1, int t2, int t3) {
    const int t[4] = {t0, t1, t2, t3};
    bool v = false;
    for (int i = 0; i < 4; i++) v = v || (t[i] >= 0 && T(x, t[i])->kind == PPRT_WEIGHT && T(x, t[i])->varies);
    if (v && !x->derived++) x->derived_what = what;
    return v;
}

/* exec.h's reload: the weights that vary reordered again into the buffers
 * create reordered them into (the primitives, which read those buffers,
 * kept), shared ones once per version; the weights read in place need
 * nothing. A node whose kernel derived something else from them (dn_derived)
 * makes it refuse: the caller makes a fresh executor. */
static pp_status dnnl_reload(pprt_exec *x, unsigned long version, pp_err *err) {
    if (x->derived)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: %d node%s took what they run on from a trained weight's values "
                       "(%s)", x->st->index, x->derived, x->derived == 1 ? "" : "s", x->derived_what);
    /* one thread: the reorders are a copy each, memory-bound; a team of the stage's threads, started anew on each
     * step's stage thread, made them 3-10x slower on the loaded 2-core VM (ResNet-50's forward stage: 103 MB in
     * 0.15-0.87 s on 2 threads, 0.04-0.07 s on one; docs/training.md), and the stages reload side by side */
    set_threads(1);
    x->threads = 1; /* the thread's setting now (run_steps sets each step's) */
    for (int i = 0; i < x->wre.n; i++) {
        const dn_wre *r = &x->wre.a[i];
        if (T(x, r->tid)->varies) PP_TRY(dn_reorder_into(x, &r->from, T(x, r->tid)->data, &r->want, r->buf, err));
    }
    PP_TRY(dn_wshare_reload(x, version, err));
    x->wversion = version;
    return PP_OK;
}

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

static const pprt_exec_ops exec_dnnl = {"dnnl", dnnl_create, dnnl_run, dnnl_destroy, dnnl_node_seconds,
                                        dn_counts, dnnl_reload, NULL};

static void dnnl_describe(FILE *f) {
    fprintf(f, "  dnnl: bf16 kernels on this CPU: %s; vector ISA: %s%s; AMX pointwise kernel: %s\n",
            dnnl_has_bf16() ? "yes" : "no, --precision bf16 runs in f32", pprt_isa_name(pprt_cpu_isa()),
            pprt_isa_capped() ? ", capped by ONEDNN_MAX_CPU_ISA" : "",
            dnnl_has_bf16() && pprt_pw_cpu() ? "yes" : "no");
}

/* The ops build_all may put on oneDNN (families.def), f32 (the rest fall back). */
static bool dnnl_supports(const pprt_plan *p, const pprt_stage *st, const pprt_node *n) {
    (void)p;
    if (!dn_family_of(n->op)) return false;
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
    .route = dnnl_route,
    .exec = &exec_dnnl,
    .mem = PPRT_MEM_HOST,
    .multithreaded = true,
    .precision = dnnl_precision,
    .describe = dnnl_describe,
};
