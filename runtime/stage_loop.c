/* stage_loop.c: see stage_loop.h. */
#include <string.h>

#include "nodes.h"
#include "stage_loop.h"


/* The timeline of micro-batch mb: stores only (pprt.h, PPRT_TRACE_T). */
static void record(pprt_stage_run *r, int64_t mb, double ready, double start, double kernels, double end) {
    pprt_trace_track *t = r->trace;
    double *row = t->t + (size_t)mb * PPRT_TRACE_T;
    row[0] = ready, row[1] = start, row[2] = kernels, row[3] = end;
    if (!r->prev_ns) return;
    const double *ns = r->ex->node_seconds(r->x);
    if (mb < t->n_node_mb)
        for (int j = 0; j < t->n_nodes; j++) t->node_s[(size_t)mb * (size_t)t->n_nodes + (size_t)j] = ns[j] - r->prev_ns[j];
    memcpy(r->prev_ns, ns, (size_t)t->n_nodes * sizeof *ns);
}

/* The bytes of the outgoing message out for the device-local outputs' taker: out itself on the host, else
 * a copy down from the stage's device (the taker reads them: a GPU's memory is not the host's). */
static pp_status local_msg(pprt_stage_run *r, const void *out, const void **msg, pp_err *err) {
    *msg = out;
    const pprt_mem_ops *m = r->local_mem;
    if (!m) return PP_OK;
    if (r->local_unread && *r->local_unread) { /* the taker reads no byte of it */
        *msg = NULL;
        return PP_OK;
    }
    if (!r->local_buf) {
        PP_TRY(m->alloc_pinned(r->local_bytes, &r->local_buf, err));
        PP_TRY(m->stream_new(r->local_dev, &r->local_stream, err));
        PP_TRY(m->event_new(r->local_dev, &r->local_ev, err));
    }
    PP_TRY(m->copy(r->local_stream, r->local_buf, PPRT_ON_HOST, out, r->local_dev, r->local_bytes, err));
    PP_TRY(m->record(r->local_ev, r->local_stream, err));
    PP_TRY(m->wait(r->local_ev, err));
    *msg = r->local_buf;
    return PP_OK;
}

static pp_status stage_loop(pprt_stage_run *r, int64_t k0, int64_t k1, bool *own, pp_err *err);

/* local_msg's buffer, stream and event, once the loop is over */
static void local_free(pprt_stage_run *r) {
    const pprt_mem_ops *m = r->local_mem;
    if (m && r->local_stream) m->stream_free(r->local_stream); /* after its copies completed */
    if (m && r->local_ev) m->event_free(r->local_ev);
    if (m && r->local_buf) m->free_pinned(r->local_buf);
    r->local_stream = NULL, r->local_ev = NULL, r->local_buf = NULL;
}

pp_status pprt_stage_loop(pprt_stage_run *r, int64_t k0, int64_t k1, bool *own, pp_err *err) {
    const pp_status s = stage_loop(r, k0, k1, own, err);
    local_free(r);
    return s;
}

static pp_status stage_loop(pprt_stage_run *r, int64_t k0, int64_t k1, bool *own, pp_err *err) {
    *own = false;
    for (int64_t k = k0; k < k1; k++) {
        void *in, *out;
        int64_t tag = k;
        const int64_t mb = k < r->warmup ? 0 : k - r->warmup;
        /* a source's receive cuts the micro-batch: the stage's own work, timed
         * from when it has somewhere to put its output (as any stage's run) */
        double ready, start;
        if (r->in->fills) {
            PP_TRY(r->out->ops->acquire(r->out, &out, err));
            ready = start = pprt_now_s();
            PP_TRY(r->in->ops->receive(r->in, &in, &tag, err));
        } else {
            PP_TRY(r->in->ops->receive(r->in, &in, &tag, err));
            ready = pprt_now_s();
            PP_TRY(r->out->ops->acquire(r->out, &out, err));
            start = pprt_now_s();
        }
        if (tag != k) {
            *own = true;
            return PP_FAIL(err, PP_ERUNTIME, "stage %d: received micro-batch %lld out of order, expected %lld",
                           r->stage, (long long)(r->mb_offset + tag - (tag < r->warmup ? tag : r->warmup)),
                           (long long)(r->mb_offset + mb));
        }
        if (r->gate) {
            r->gate->enter(r->gate->ctx, r->replica, r->stage, r->mb_offset + mb);
            start = pprt_now_s();
        }
        const double kernels = r->in->fills ? pprt_now_s() : start;
        pp_err e = {0};
        pp_status s = r->stash_in ? pprt_stash_pop(r->stash_in, in, &e) : PP_OK;
        if (s == PP_OK) s = r->ex->run(r->x, in, out, &e);
        if (s == PP_OK && r->stash_out) s = pprt_stash_push(r->stash_out, in, out, &e);
        if (s == PP_OK && r->local && k >= r->warmup) {
            const void *msg = out;
            s = local_msg(r, out, &msg, &e);
            if (s == PP_OK) s = r->local(r->local_ctx, r->stage, r->mb_offset + mb, msg, &e);
        }
        const double end = pprt_now_s();
        if (r->gate) r->gate->leave(r->gate->ctx, r->replica, r->stage, r->mb_offset + mb);
        if (k >= r->warmup) r->busy += end - start;
        if (r->trace && s == PP_OK && k >= r->warmup) record(r, mb, ready, start, kernels, end);
        else if (r->prev_ns && s == PP_OK) memcpy(r->prev_ns, r->ex->node_seconds(r->x), sizeof(double) * (size_t)r->trace->n_nodes);
        if (s != PP_OK) {
            *own = true;
            return PP_WRAP(err, &e, s, "stage %d, micro-batch %lld: %s", r->stage, (long long)(r->mb_offset + mb), e.msg);
        }
        PP_TRY(r->in->ops->release(r->in, in, err));
        PP_TRY(r->out->ops->submit(r->out, out, k, err));
    }
    return PP_OK;
}

static pp_status w_stage_loop(pprt_stage_run *r, void *in_buf, void *out_buf, int64_t k0, int64_t k1,
                              bool (*stopped)(void *stop_ctx), void *stop_ctx, pp_err *err);

pp_status pprt_w_stage_loop(pprt_stage_run *r, void *in_buf, void *out_buf, int64_t k0, int64_t k1,
                            bool (*stopped)(void *stop_ctx), void *stop_ctx, pp_err *err) {
    const pp_status s = w_stage_loop(r, in_buf, out_buf, k0, k1, stopped, stop_ctx, err);
    local_free(r);
    return s;
}

static pp_status w_stage_loop(pprt_stage_run *r, void *in_buf, void *out_buf, int64_t k0, int64_t k1,
                              bool (*stopped)(void *stop_ctx), void *stop_ctx, pp_err *err) {
    for (int64_t k = k0; k < k1 && !stopped(stop_ctx); k++) {
        pp_err e = {0};
        const int64_t mb = r->mb_offset + (k < r->warmup ? 0 : k - r->warmup);
        pp_status s = r->stash_in ? pprt_stash_pop_wait(r->stash_in, in_buf, &e) : PP_OK;
        if (s == PP_OK && r->gate) r->gate->enter(r->gate->ctx, r->replica, r->stage, mb);
        const double t0 = pprt_now_s();
        if (s == PP_OK) s = r->ex->run(r->x, in_buf, out_buf, &e);
        if (k >= r->warmup) r->busy += pprt_now_s() - t0;
        if (r->gate) r->gate->leave(r->gate->ctx, r->replica, r->stage, mb);
        if (s == PP_OK && r->local && k >= r->warmup) {
            const void *msg = out_buf;
            s = local_msg(r, out_buf, &msg, &e); /* from the device where the stage is on one */
            if (s == PP_OK) s = r->local(r->local_ctx, r->stage, mb, msg, &e);
        }
        if (s != PP_OK)
            return PP_WRAP(err, &e, s, "stage %d (a W stage), micro-batch %lld: %s", r->stage, (long long)mb, e.msg);
    }
    return PP_OK;
}

/* the place's memory space (the host's pool for a host place) */
static const pprt_mem_ops *place_mem(const pprt_place *at) { return at->mem ? at->mem : &pprt_mem_host; }

pp_status pprt_w_bufs_new(const pprt_place *at, const pprt_stage *st, int stage, void **in, void **out,
                          pp_err *err) {
    const pprt_mem_ops *m = place_mem(at);
    *in = *out = NULL;
    pp_err e = {0};
    pp_status s = m->alloc(at->device, st->in.bytes + 64, in, &e);
    if (s == PP_OK) s = m->alloc(at->device, st->out.bytes + 64, out, &e);
    if (s == PP_OK) return PP_OK;
    if (*in) m->free(at->device, *in);
    *in = NULL;
    return PP_WRAP(err, &e, s, "stage %d: its messages: %s", stage, e.msg);
}

void pprt_w_bufs_free(const pprt_place *at, void *in, void *out) {
    const pprt_mem_ops *m = place_mem(at);
    if (in) m->free(at->device, in);
    if (out) m->free(at->device, out);
}
