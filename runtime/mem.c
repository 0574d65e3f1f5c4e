/* mem.c: host memory as a space (mem.h), and what every space shares. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mem.h"
#include "pool.h"

static pp_status host_device(const pprt_stage *st, int local_rank, int *dev, pp_err *err) {
    (void)st, (void)local_rank, (void)err;
    *dev = PPRT_ON_HOST;
    return PP_OK;
}

static pp_status host_alloc(int dev, size_t bytes, void **p, pp_err *err) {
    (void)dev;
    if (!(*p = pprt_pool_alloc(bytes))) {
        return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes of host memory", bytes);
    }
    return PP_OK;
}

static void host_free(int dev, void *p) {
    (void)dev;
    pprt_pool_free(p);
}

static pp_status host_alloc_pinned(size_t bytes, void **p, pp_err *err) { return host_alloc(0, bytes, p, err); }

const pprt_mem_ops pprt_mem_host = {
    .name = "host",
    .kind = PPRT_MEM_HOST,
    .host_addressable = true,
    .device = host_device,
    .alloc = host_alloc,
    .free = host_free,
    .alloc_pinned = host_alloc_pinned,
    .free_pinned = pprt_pool_free,
};

void pprt_place_name(const pprt_place *p, char *buf, size_t n) {
    if (pprt_place_is_host(p)) snprintf(buf, n, "host");
    else snprintf(buf, n, "%s device %d", p->mem->name, p->device);
}

pp_status pprt_event_poll(const pprt_mem_ops *mem, pprt_event *e, const atomic_bool *stop,
                          pp_status (*poll)(void *ctx, pp_err *err), void *ctx, pp_err *err) {
    long nap_ns = 10000;
    for (;;) {
        bool done = false;
        PP_TRY(mem->query(e, &done, err));
        /* an error, or a close, that completed the event (an aborted transfer) counts too */
        if (poll) PP_TRY(poll(ctx, err));
        if (stop && atomic_load(stop)) return PP_FAIL(err, PP_ERUNTIME, "link closed (pipeline stopped)");
        if (done) return PP_OK;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000) nap_ns *= 2;
    }
}

/* One hop of pprt_dcopy_run on device `on`'s kept stream (made at its first copy), waited for. */
static pp_status dcopy_hop(pprt_dcopy *c, int on, void *dst, int ddev, const void *src, int sdev, size_t n,
                           pp_err *err) {
    const pprt_mem_ops *m = c->mem;
    int k = 0;
    while (k < c->n_q && c->q[k].dev != on) k++;
    const bool keep = k < PPRT_DCOPY_QUEUES;
    pprt_stream *s = k < c->n_q ? c->q[k].s : NULL;
    pprt_event *e = k < c->n_q ? c->q[k].e : NULL;
    pp_status st = PP_OK;
    if (!s) {
        st = m->stream_new(on, &s, err);
        if (st == PP_OK) st = m->event_new(on, &e, err);
        if (st == PP_OK && keep) c->q[c->n_q++] = (pprt_dcopy_q){.dev = on, .s = s, .e = e};
    }
    if (st == PP_OK) st = m->copy(s, dst, ddev, src, sdev, n, err);
    if (st == PP_OK) st = m->record(e, s, err);
    if (st == PP_OK) st = m->wait(e, err);
    if (st != PP_OK || !keep) { /* a failed stream is not kept for the next copy */
        if (keep && k < c->n_q) c->q[k] = c->q[--c->n_q];
        if (e) m->event_free(e);
        if (s) m->stream_free(s);
    }
    return st;
}

pp_status pprt_dcopy_run(pprt_dcopy *c, void *dst, int ddev, const void *src, int sdev, size_t n, pp_err *err) {
    const pprt_mem_ops *m = c->mem;
    if (!n) return PP_OK;
    if (!m || !m->copy || sdev < 0 || ddev < 0)
        return PP_FAIL(err, PP_ERUNTIME, "internal: a device to device copy outside a device space");
    const int path = sdev == ddev ? PPRT_PEER_SRC : m->peer(sdev, ddev);
    if (path != PPRT_PEER_STAGED)
        return dcopy_hop(c, path == PPRT_PEER_DST ? ddev : sdev, dst, ddev, src, sdev, n, err);
    if (c->cap < n) {
        if (c->pin) m->free_pinned(c->pin);
        c->pin = NULL, c->cap = 0;
        PP_TRY(m->alloc_pinned(n, &c->pin, err));
        c->cap = n;
    }
    PP_TRY(dcopy_hop(c, sdev, c->pin, PPRT_ON_HOST, src, sdev, n, err));
    return dcopy_hop(c, ddev, dst, ddev, c->pin, PPRT_ON_HOST, n, err);
}

void pprt_dcopy_free(pprt_dcopy *c) {
    for (int k = 0; k < c->n_q; k++) {
        c->mem->event_free(c->q[k].e);
        c->mem->stream_free(c->q[k].s);
    }
    c->n_q = 0;
    if (c->pin && c->mem) c->mem->free_pinned(c->pin);
    c->pin = NULL, c->cap = 0;
}
