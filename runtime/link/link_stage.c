/* link_stage.c: a host link seen from a device end (link.h): the
 * pipeline's source and sink, and the MPI channels, when the stage they
 * serve is on a device. The host link's buffers are pinned in the device's
 * space (the source, the sink and chan_mpi.c allocate them so).
 *
 * pprt_link_staged: one device buffer, a stream and an event; the copy
 * between the two runs on the stage's thread, which waits for it before it
 * goes on (serial: the GPU idles while the host cuts, uploads, downloads).
 *
 * pprt_link_staged_overlap: `nbuf` device buffers, a copy stream, an event
 * per buffer and a thread of its own (the pump) that does the host link's
 * side, so the copies and the host's cutting and writing overlap the
 * stage's compute:
 *
 *   the device stage consumes (the source): the pump takes the host link's
 *   next buffer (the source cuts the micro-batch into it), a free device
 *   buffer, queues the upload on the copy stream, records that buffer's
 *   event and waits for it (the host buffer is then read, so it goes
 *   back), and queues the device buffer with its tag; receive() takes it,
 *   release() puts it back among the free ones. So micro-batch k+1 is cut
 *   and uploaded while the stage computes k.
 *
 *   the device stage produces (the sink): acquire() takes a free device
 *   buffer, submit() queues it with its tag for the pump and returns; the
 *   pump takes the host link's buffer, queues the download on the copy
 *   stream, records and waits for that buffer's event (the host needs the
 *   bytes), gives the device buffer back and submits the host buffer (the
 *   sink writes the output arrays). drain() waits until the pump has
 *   handed on everything submitted. So micro-batch k is downloaded and
 *   written while the stage computes k+1.
 *
 * The executor's run() has completed its outgoing message and is done with
 * its incoming one when it returns (link.h's ordering contract), so the
 * copies wait for no compute; only the pump waits for copies, never the
 * stage's thread (unless the pump is behind). The host link is used by the
 * pump alone. A failure of the pump (a copy, the host link) closes the link
 * and is what the stage's next call returns. The emulated space (cuda-emu)
 * runs the same code over its stream threads and counted events. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pool.h"
#include "chan.h"
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
    if (g->dbuf) pprt_pool_dev_free(g->mem, g->dev, g->dbuf);
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
    g->base = (pprt_link){&staged_ops, dev_consumes ? h : *dev, dev_consumes ? *dev : h, host->bytes, 1, host->fills, NULL};
    g->host = host;
    g->mem = dev->mem;
    g->dev = dev->device;
    g->consumes = dev_consumes;
    char d[64];
    pprt_place_name(dev, d, sizeof d);
    snprintf(g->name, sizeof g->name, "%s (pinned host memory %s %s)", name, dev_consumes ? "->" : "<-", d);
    pp_status s = g->mem->stream_new(g->dev, &g->stream, err);
    if (s == PP_OK) s = g->mem->event_new(g->dev, &g->ev, err);
    if (s == PP_OK) s = pprt_pool_dev_alloc(g->mem, g->dev, host->bytes, &g->dbuf, err);
    if (s != PP_OK) {
        s = named(g, s, err);
        st_destroy(&g->base);
        return s;
    }
    *out = &g->base;
    return PP_OK;
}

/* ---- overlapped: nbuf device buffers and a pump thread ------------------------------------------ */

typedef struct {
    pprt_link base;
    pprt_link *host;
    const pprt_mem_ops *mem;
    int dev, nbuf;
    bool consumes;
    int64_t n_msgs;            /* consumer side: what the pump cuts in all */
    pprt_stream *stream;
    pprt_event **ev;           /* per device buffer: its last copy */
    void **dbuf;
    pprt_chan *free_, *full;   /* device buffers: free (stage <- pump or stage), filled (pump <-> stage) */
    pthread_t pump;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, failed;         /* stop: closed from outside; failed: the pump's own error, in perr */
    pp_err perr;
    int64_t submitted, handed; /* producer side: buffers the stage submitted, the pump handed on */
    char name[160];
} overlap;

static int ov_index(const overlap *g, const void *b) {
    for (int i = 0; i < g->nbuf; i++)
        if (g->dbuf[i] == b) return i;
    return -1;
}

static void ov_close(pprt_link *l) {
    overlap *g = (overlap *)l;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    g->free_->ops->close(g->free_);
    g->full->ops->close(g->full);
    g->host->ops->close(g->host);
}

/* The pump failed with e: keep its error (unless the link was closed from
 * outside first: then e is only that stop) and close the link, which wakes
 * the stage. */
static void *ov_fail(overlap *g, const pp_err *e) {
    pthread_mutex_lock(&g->mu);
    if (!g->stop && !g->failed) {
        g->failed = true;
        g->perr = (pp_err){0};
        PP_WRAP(&g->perr, e, e->code ? e->code : PP_ERUNTIME, "%s: %s", g->name, e->msg);
    }
    pthread_mutex_unlock(&g->mu);
    ov_close(&g->base);
    return NULL;
}

/* A stage-side call failed with s: the pump's error if it failed (the
 * channel's "closed" is only its consequence), else s as it is. */
static pp_status ov_status(overlap *g, pp_status s, pp_err *err) {
    if (s == PP_OK) return s;
    pthread_mutex_lock(&g->mu);
    if (g->failed) {
        *err = g->perr;
        s = g->perr.code ? g->perr.code : PP_ERUNTIME;
    }
    pthread_mutex_unlock(&g->mu);
    return s;
}

/* Copy n bytes on the copy stream into or out of device buffer i and wait. */
static pp_status ov_copy_wait(overlap *g, int i, void *dst, int dst_dev, const void *src, int src_dev, pp_err *err) {
    PP_TRY(g->mem->copy(g->stream, dst, dst_dev, src, src_dev, g->base.bytes, err));
    PP_TRY(g->mem->record(g->ev[i], g->stream, err));
    return g->mem->wait(g->ev[i], err);
}

static void *pump_in(void *arg) { /* the source's side: cut, upload, hand on */
    overlap *g = arg;
    for (int64_t k = 0; k < g->n_msgs; k++) {
        pp_err e = {0};
        void *h, *d;
        int64_t tag, unused;
        if (g->host->ops->receive(g->host, &h, &tag, &e) != PP_OK) return ov_fail(g, &e);
        if (g->free_->ops->recv(g->free_, &d, &unused, &e) != PP_OK) return ov_fail(g, &e);
        const int i = ov_index(g, d);
        if (i < 0) return ov_fail(g, &(pp_err){.code = PP_ERUNTIME, .msg = "internal: a buffer that is not the link's"});
        if (ov_copy_wait(g, i, d, g->dev, h, PPRT_ON_HOST, &e) != PP_OK ||
            g->host->ops->release(g->host, h, &e) != PP_OK || g->full->ops->send(g->full, d, tag, &e) != PP_OK)
            return ov_fail(g, &e);
    }
    return NULL;
}

static void *pump_out(void *arg) { /* the sink's side: download, give back, write */
    overlap *g = arg;
    for (;;) {
        pp_err e = {0};
        void *h, *d;
        int64_t tag;
        if (g->full->ops->recv(g->full, &d, &tag, &e) != PP_OK) return ov_fail(g, &e); /* closed: the end */
        const int i = ov_index(g, d);
        if (i < 0) return ov_fail(g, &(pp_err){.code = PP_ERUNTIME, .msg = "internal: a buffer that is not the link's"});
        if (g->host->ops->acquire(g->host, &h, &e) != PP_OK || ov_copy_wait(g, i, h, PPRT_ON_HOST, d, g->dev, &e) != PP_OK ||
            g->free_->ops->send(g->free_, d, 0, &e) != PP_OK || g->host->ops->submit(g->host, h, tag, &e) != PP_OK)
            return ov_fail(g, &e);
        pthread_mutex_lock(&g->mu);
        g->handed++;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
}

static pp_status ov_misuse(const overlap *g, pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "internal: %s: used from the wrong side, or a buffer that is not the link's",
                   g->name);
}

static pp_status ov_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    overlap *g = (overlap *)l;
    if (!g->consumes) return ov_misuse(g, err);
    return ov_status(g, g->full->ops->recv(g->full, buf, tag, err), err);
}

static pp_status ov_release(pprt_link *l, void *buf, pp_err *err) {
    overlap *g = (overlap *)l;
    if (!g->consumes || ov_index(g, buf) < 0) return ov_misuse(g, err);
    return ov_status(g, g->free_->ops->send(g->free_, buf, 0, err), err);
}

static pp_status ov_acquire(pprt_link *l, void **buf, pp_err *err) {
    overlap *g = (overlap *)l;
    int64_t unused;
    if (g->consumes) return ov_misuse(g, err);
    return ov_status(g, g->free_->ops->recv(g->free_, buf, &unused, err), err);
}

static pp_status ov_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    overlap *g = (overlap *)l;
    if (g->consumes || ov_index(g, buf) < 0) return ov_misuse(g, err);
    pthread_mutex_lock(&g->mu);
    g->submitted++;
    pthread_mutex_unlock(&g->mu);
    return ov_status(g, g->full->ops->send(g->full, buf, tag, err), err);
}

/* Producer side: every submitted buffer written out by the host link (and
 * the host link drained, where it drains); consumer side: nothing. */
static pp_status ov_drain(pprt_link *l, pp_err *err) {
    overlap *g = (overlap *)l;
    if (g->consumes) return PP_OK;
    pthread_mutex_lock(&g->mu);
    while (g->handed < g->submitted && !g->stop && !g->failed) pthread_cond_wait(&g->cv, &g->mu);
    const bool ok = g->handed >= g->submitted;
    pthread_mutex_unlock(&g->mu);
    if (!ok) return ov_status(g, PP_FAIL(err, PP_ERUNTIME, "%s: closed before its outputs were written", g->name), err);
    return g->host->ops->drain ? g->host->ops->drain(g->host, err) : PP_OK;
}

static void ov_destroy(pprt_link *l) {
    overlap *g = (overlap *)l;
    if (!g) return;
    if (g->started) {
        ov_close(l); /* wakes the pump wherever it waits */
        pthread_join(g->pump, NULL);
    }
    if (g->stream) g->mem->stream_free(g->stream); /* after its copies */
    for (int i = 0; g->ev && i < g->nbuf; i++)
        if (g->ev[i]) g->mem->event_free(g->ev[i]);
    for (int i = 0; g->dbuf && i < g->nbuf; i++)
        if (g->dbuf[i]) pprt_pool_dev_free(g->mem, g->dev, g->dbuf[i]);
    free(g->ev);
    free(g->dbuf);
    if (g->free_) g->free_->ops->destroy(g->free_);
    if (g->full) g->full->ops->destroy(g->full);
    if (g->host) g->host->ops->destroy(g->host);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static const pprt_link_ops overlap_ops = {ov_acquire, ov_submit, ov_receive, ov_release, ov_drain, ov_close, ov_destroy};

pp_status pprt_link_staged_overlap(pprt_link *host, const pprt_place *dev, bool dev_consumes, int nbuf, int64_t n_msgs,
                                   const char *name, pprt_link **out, pp_err *err) {
    *out = NULL;
    if (pprt_place_is_host(dev) || nbuf < 1 || n_msgs < 0) {
        host->ops->destroy(host);
        return PP_FAIL(err, PP_ERUNTIME, "internal: %s: overlapped staging for a host end, %d buffers, %lld messages",
                       name, nbuf, (long long)n_msgs);
    }
    overlap *g = calloc(1, sizeof *g);
    if (!g) {
        host->ops->destroy(host);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    const pprt_place h = pprt_place_host();
    /* the stage sees `nbuf` buffers in flight; the pump cuts (source), so the stage does not */
    g->base = (pprt_link){&overlap_ops, dev_consumes ? h : *dev, dev_consumes ? *dev : h, host->bytes, nbuf, false, NULL};
    g->host = host;
    g->mem = dev->mem;
    g->dev = dev->device;
    g->nbuf = nbuf;
    g->consumes = dev_consumes;
    g->n_msgs = n_msgs;
    char d[64];
    pprt_place_name(dev, d, sizeof d);
    snprintf(g->name, sizeof g->name, "%s (pinned host memory %s %s, %d buffers overlapped)", name,
             dev_consumes ? "->" : "<-", d, nbuf);
    g->ev = calloc((size_t)nbuf, sizeof *g->ev);
    g->dbuf = calloc((size_t)nbuf, sizeof *g->dbuf);
    pp_status s = g->ev && g->dbuf ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) s = pprt_queue_create(nbuf, &g->free_, err);
    if (s == PP_OK) s = pprt_queue_create(nbuf, &g->full, err);
    if (s == PP_OK) s = g->mem->stream_new(g->dev, &g->stream, err);
    for (int i = 0; i < nbuf && s == PP_OK; i++) {
        s = g->mem->event_new(g->dev, &g->ev[i], err);
        if (s == PP_OK) s = pprt_pool_dev_alloc(g->mem, g->dev, host->bytes, &g->dbuf[i], err);
        if (s == PP_OK) s = g->free_->ops->send(g->free_, g->dbuf[i], 0, err);
    }
    if (s == PP_OK && (dev_consumes ? n_msgs > 0 : true)) {
        if (pthread_create(&g->pump, NULL, dev_consumes ? pump_in : pump_out, g) == 0) g->started = true;
        else s = PP_FAIL(err, PP_ERUNTIME, "cannot start its copy thread");
    }
    if (s != PP_OK) {
        const pp_err e = *err;
        *err = (pp_err){0};
        PP_FAIL(err, s, "%s: %s", g->name, e.msg);
        ov_destroy(&g->base);
        return s;
    }
    *out = &g->base;
    return PP_OK;
}
