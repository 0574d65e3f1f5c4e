/* link_stage.c: a host link seen from a device end (link.h,
 * pprt_link_staged): the pipeline's source and sink, and the MPI channels,
 * when the stage they serve is on a device. The host link's buffers are
 * pinned in the device's space (the source, the sink and chan_mpi.c
 * allocate them so); this link owns one device buffer, a stream and an
 * event, and copies between the two on the stage's thread, waiting for the
 * copy before it goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

typedef struct {
    pprt_link base;
    pprt_link *host;
    const pprt_mem_ops *mem;
    int dev;
    pprt_stream *stream;
    pprt_event *ev;
    void *dbuf;
    bool consumes, lent;
    char name[160];
} staged;

static pp_status named(const staged *g, pp_status s, pp_err *err) {
    if (s != PP_OK) {
        const pp_err e = *err; /* PP_FAIL keeps a first error: start over */
        *err = (pp_err){0};
        PP_FAIL(err, s, "%s: %s", g->name, e.msg);
    }
    return s;
}

static pp_status misuse(const staged *g, pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "internal: %s: used from the wrong side, or its one buffer is lent out", g->name);
}

/* Copy n bytes on the link's stream and wait for them. */
static pp_status copy_wait(staged *g, void *dst, int dst_dev, const void *src, int src_dev, pp_err *err) {
    PP_TRY(named(g, g->mem->copy(g->stream, dst, dst_dev, src, src_dev, g->base.bytes, err), err));
    PP_TRY(named(g, g->mem->record(g->ev, g->stream, err), err));
    return named(g, g->mem->wait(g->ev, err), err);
}

static pp_status st_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    staged *g = (staged *)l;
    if (!g->consumes || g->lent) return misuse(g, err);
    void *h;
    PP_TRY(g->host->ops->receive(g->host, &h, tag, err));
    PP_TRY(copy_wait(g, g->dbuf, g->dev, h, PPRT_ON_HOST, err));
    PP_TRY(g->host->ops->release(g->host, h, err));
    g->lent = true;
    *buf = g->dbuf;
    return PP_OK;
}

static pp_status st_release(pprt_link *l, void *buf, pp_err *err) {
    staged *g = (staged *)l;
    if (!g->consumes || !g->lent || buf != g->dbuf) return misuse(g, err);
    g->lent = false;
    return PP_OK;
}

static pp_status st_acquire(pprt_link *l, void **buf, pp_err *err) {
    staged *g = (staged *)l;
    if (g->consumes || g->lent) return misuse(g, err);
    g->lent = true;
    *buf = g->dbuf;
    return PP_OK;
}

static pp_status st_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    staged *g = (staged *)l;
    if (g->consumes || !g->lent || buf != g->dbuf) return misuse(g, err);
    void *h;
    PP_TRY(g->host->ops->acquire(g->host, &h, err));
    PP_TRY(copy_wait(g, h, PPRT_ON_HOST, g->dbuf, g->dev, err));
    g->lent = false;
    return g->host->ops->submit(g->host, h, tag, err);
}

static pp_status st_drain(pprt_link *l, pp_err *err) {
    staged *g = (staged *)l;
    return g->host->ops->drain ? g->host->ops->drain(g->host, err) : PP_OK;
}

static void st_close(pprt_link *l) {
    staged *g = (staged *)l;
    g->host->ops->close(g->host);
}

static void st_destroy(pprt_link *l) {
    staged *g = (staged *)l;
    if (!g) return;
    if (g->stream) g->mem->stream_free(g->stream);
    if (g->ev) g->mem->event_free(g->ev);
    if (g->dbuf) g->mem->free(g->dev, g->dbuf);
    if (g->host) g->host->ops->destroy(g->host);
    free(g);
}

static const pprt_link_ops staged_ops = {st_acquire, st_submit, st_receive, st_release, st_drain, st_close, st_destroy};

pp_status pprt_link_staged(pprt_link *host, const pprt_place *dev, bool dev_consumes, const char *name,
                           pprt_link **out, pp_err *err) {
    *out = NULL;
    if (pprt_place_is_host(dev)) {
        host->ops->destroy(host);
        return PP_FAIL(err, PP_ERUNTIME, "internal: %s: staging for a host end", name);
    }
    staged *g = calloc(1, sizeof *g);
    if (!g) {
        host->ops->destroy(host);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    const pprt_place h = pprt_place_host();
    g->base = (pprt_link){&staged_ops, dev_consumes ? h : *dev, dev_consumes ? *dev : h, host->bytes, 1, host->fills};
    g->host = host;
    g->mem = dev->mem;
    g->dev = dev->device;
    g->consumes = dev_consumes;
    char d[64];
    pprt_place_name(dev, d, sizeof d);
    snprintf(g->name, sizeof g->name, "%s (pinned host memory %s %s)", name, dev_consumes ? "->" : "<-", d);
    pp_status s = g->mem->stream_new(g->dev, &g->stream, err);
    if (s == PP_OK) s = g->mem->event_new(g->dev, &g->ev, err);
    if (s == PP_OK) s = g->mem->alloc(g->dev, host->bytes, &g->dbuf, err);
    if (s != PP_OK) {
        s = named(g, s, err);
        st_destroy(&g->base);
        return s;
    }
    *out = &g->base;
    return PP_OK;
}
