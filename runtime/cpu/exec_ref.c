/* exec_ref.c: the CPU reference executor: binds each tensor of a stage to its
 * bytes (weights in the mapped plan, activations in the stage arena, boundary
 * tensors in the messages) and runs the reference kernels in node order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../kernels.h"
#include "../nodes.h"
#include "../pool.h"

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    unsigned char *arena;
    void **ptr; /* tensor id -> bytes, refreshed per message for RECV/SEND */
    pprt_node_runner nodes; /* every node on ref_node, timed (pprt --profile) */
};

static pp_status ref_node(void *ctx, int ni, bool *ran, pp_err *err) {
    pprt_exec *x = ctx;
    pprt_node_ctx *c = &x->nodes.fb;
    *ran = true;
    return pprt_ref_node(x->p, x->st, &x->st->nodes[ni], x->ptr, c->tin, c->tout, &c->scratch, err);
}

static pp_status ref_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                            pp_err *err) {
    (void)cfg; /* single-threaded, f32 (pprt refuses --precision bf16 for it) */
    PP_TRY(pprt_stage_weights(p, st->index, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->p = p;
    x->st = st;
    x->ptr = calloc(pp_count(st->n_tensors), sizeof *x->ptr);
    void *arena = NULL;
    pp_err e = {0};
    if (!x->ptr || pprt_node_runner_init(&x->nodes, p, st, x->ptr, &e) != PP_OK ||
        !(arena = pprt_pool_alloc(st->arena_bytes))) {
        pprt_node_runner_free(&x->nodes);
        free(x->ptr);
        free(x);
        return PP_FAIL(err, PP_ENOMEM, "cannot allocate its %zu-byte arena", st->arena_bytes); /* the caller names the stage */
    }
    x->arena = arena;
    x->nodes.own = ref_node;
    x->nodes.ctx = x;
    for (int i = 0; i < st->n_tensors; i++) {
        const pprt_tdesc *t = &st->t[i];
        if (t->kind == PPRT_WEIGHT) x->ptr[i] = (void *)t->data;
        else if (t->kind == PPRT_ACTIVATION) x->ptr[i] = x->arena + t->offset;
    }
    *out = x;
    return PP_OK;
}

pp_status pprt_ref_node(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void *const *ptr,
                        pprt_tensor *tin, pprt_tensor *tout, pprt_scratch *scratch, pp_err *err) {
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) {
            tin[k] = (pprt_tensor){PP_UNDEFINED, {0, {0}}, NULL};
            continue;
        }
        const pprt_tdesc *t = &st->t[n->in[k]];
        tin[k] = (pprt_tensor){t->dtype, t->shape, ptr[n->in[k]]};
    }
    for (int k = 0; k < n->n_out; k++) {
        const pprt_tdesc *t = &st->t[n->out[k]];
        tout[k] = (pprt_tensor){t->dtype, t->shape, ptr[n->out[k]]};
    }
    pp_err e = {0};
    pp_status s = pprt_ref_kernels[n->op]((pp_attrs){n->attrs, n->n_attrs, p->opset}, tin, n->n_in, tout, n->n_out,
                                          scratch, &e);
    if (s != PP_OK) return PP_WRAP(err, &e, s, "node '%s' (%s): %s", n->name, pp_op_table[n->op].name, e.msg);
    return PP_OK;
}

void pprt_pass_through(const pprt_stage *st, const void *in_msg, void *out_msg) {
    for (int i = 0; i < st->out.n; i++) {
        const pprt_tdesc *t = st->out.t[i];
        if (t->kind == PPRT_RECV)
            memcpy((unsigned char *)out_msg + st->out.off[i], (const unsigned char *)in_msg + st->in.off[t->offset],
                   t->nbytes);
    }
}

static pp_status ref_run(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    const pprt_stage *st = x->st;
    for (int i = 0; i < st->in.n; i++) x->ptr[st->recv[i]] = (unsigned char *)in_msg + st->in.off[i];
    /* a SEND tensor at its own slot (a training plan's stash may list it again) */
    for (int i = 0; i < st->out.n; i++)
        if (st->out.t[i]->kind == PPRT_SEND && st->out.t[i]->offset == (size_t)i)
            x->ptr[st->send[i]] = (unsigned char *)out_msg + st->out.off[i];
    PP_TRY(pprt_run_nodes(&x->nodes, err));
    pprt_pass_through(st, in_msg, out_msg);
    return PP_OK;
}

static void ref_destroy(pprt_exec *x) {
    if (!x) return;
    pprt_node_runner_free(&x->nodes);
    pprt_pool_free(x->arena);
    free(x->ptr);
    free(x);
}

static const double *ref_node_seconds(const pprt_exec *x) { return x->nodes.node_s; }

/* reload NULL: it reads the weights in place (ptr[] at their data, which a trainer's binding keeps) */
static const pprt_exec_ops exec_ref = {"ref", ref_create, ref_run, ref_destroy, ref_node_seconds, NULL, NULL, NULL};

static pp_status ref_run_node(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void *const *ptr,
                              pprt_node_ctx *ctx, pp_err *err) {
    return pprt_ref_node(p, st, n, ptr, ctx->tin, ctx->tout, &ctx->scratch, err);
}

const pprt_backend pprt_backend_ref = {
    .name = "ref",
    .what = "the reference kernels in plain C: deterministic, single-threaded, every op",
    .exec = &exec_ref,
    .mem = PPRT_MEM_HOST,
    .multithreaded = false,
    .run_node = ref_run_node,
};

/* ---- counts (exec.h) ------------------------------------------------------------ */

void pprt_exec_counts_of(const pprt_exec_ops *ops, const pprt_exec *x, const pprt_stage *st,
                         pprt_exec_counts *c) {
    memset(c, 0, sizeof *c);
    if (ops && ops->counts && x) {
        ops->counts(x, c);
        return;
    }
    c->nodes = c->reference = st->n_nodes;
}
