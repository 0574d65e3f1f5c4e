/* nodes.c: see nodes.h. */
#include "nodes.h"

#include <stdlib.h>
#include <time.h>

double pprt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

pp_status pprt_node_runner_init(pprt_node_runner *r, const pprt_plan *p, const pprt_stage *st, void *const *ptr,
                                pp_err *err) {
    *r = (pprt_node_runner){.p = p, .st = st, .ptr = ptr, .fallback = pprt_backend_fallback()};
    r->node_s = calloc(pp_count(st->n_nodes), sizeof *r->node_s);
    if (!r->node_s) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    return PP_OK;
}

void pprt_node_runner_free(pprt_node_runner *r) {
    pprt_node_ctx_free(&r->fb);
    free(r->node_s);
    r->node_s = NULL;
}

pp_status pprt_run_nodes(pprt_node_runner *r, pp_err *err) {
    const pprt_stage *st = r->st;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (r->skip && r->skip[ni]) continue;
        const double t0 = pprt_now_s();
        bool ran = false;
        pp_status s = r->own ? r->own(r->ctx, ni, &ran, err) : PP_OK;
        if (s == PP_OK && !ran) {
            if (!r->fallback)
                return PP_FAIL(err, PP_ERUNTIME, "node '%s' (%s): no backend to fall back to", st->nodes[ni].name,
                               pp_op_table[st->nodes[ni].op].name);
            s = r->fallback->run_node(r->p, st, &st->nodes[ni], r->ptr, &r->fb, err);
        }
        r->node_s[ni] += pprt_now_s() - t0;
        if (s != PP_OK) return s;
    }
    return PP_OK;
}

pp_status pprt_node_weights(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void **ptr, pp_err *err) {
    for (int k = 0; k < n->n_in; k++) {
        const int tid = n->in[k];
        if (tid < 0 || st->t[tid].kind != PPRT_WEIGHT || ptr[tid]) continue;
        PP_TRY(pprt_stage_weight(p, st->index, tid, err));
        ptr[tid] = (void *)st->t[tid].data;
    }
    return PP_OK;
}

void pprt_node_weights_release(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void **ptr,
                               const int *cons, bool (*read)(void *ctx, const void *bytes, size_t nbytes), void *ctx) {
    for (int k = 0; k < n->n_in; k++) {
        const int tid = n->in[k];
        if (tid < 0 || !st->t[tid].copy || cons[tid] != 1 || read(ctx, st->t[tid].data, st->t[tid].nbytes)) continue;
        pprt_stage_weight_release(p, st->index, tid);
        ptr[tid] = NULL;
    }
}
