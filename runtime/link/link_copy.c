/* link_copy.c: links between two places of one process (link.h):
 * pprt_link_between chooses, pprt_link_copy copies.
 *
 * A copy link owns `depth` buffers at each end (host ends pinned) and a copy
 * stream. Three queues of buffer pointers carry its state: the producer's
 * free buffers (each with the event of the copy that last read it), the
 * consumer's free buffers, and the consumer's filled ones (with their tags).
 *
 *   acquire  a free producer buffer; wait for the copy that last read it
 *   submit   a free consumer buffer; queue the copy into it on the stream,
 *            record that buffer's event; the consumer buffer goes on with
 *            the tag, the producer's back with the event to wait for
 *   receive  the next filled consumer buffer; wait for its event
 *   release  the consumer buffer is free again
 *
 * So up to `depth` copies are in flight while both stages compute; the only
 * waits are for a copy the next step needs.
 *
 * Between two devices the space says which side maps the other (mem.h
 * peer, which enables peer access both ways where it can): the copy is
 * queued on a stream of the producer's device where it maps the
 * consumer's, else of the consumer's device where that one maps the
 * producer's; where neither does it is staged through pinned host memory:
 * down on a stream of the producer's device into a pinned buffer, then, on
 * a stream of the consumer's device that waits for that copy's event, up
 * into the consumer's buffer. Each link says its path (pprt_link.path;
 * pprt --stats-json "boundaries"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pool.h"
#include "chan.h"
#include "link.h"

typedef struct {
    pprt_link base;
    const pprt_mem_ops *mem; /* the device space that copies */
    pprt_stream *stream;     /* on the device that copies (staged: the consumer's, up from pinned memory) */
    pprt_stream *down;       /* staged: on the producer's device, down into pinned memory */
    void **stage;            /* staged: depth pinned buffers, one per consumer buffer */
    pprt_event **ev_down;    /* staged: per consumer buffer, its copy down */
    int path;                /* PPRT_PEER_* between two devices; -1 host <-> device */
    void **pbuf, **cbuf;     /* depth each: at base.from, at base.to */
    pprt_event **ev;         /* per consumer buffer: the copy that filled it */
    pprt_chan *pfree, *cfree, *full;
    char name[160];
} copy_link;

/* Name the link in a failure of one of its calls. */
static pp_status named(const copy_link *c, pp_status s, pp_err *err) {
    if (s != PP_OK && strncmp(err->msg, "channel closed", 14) != 0) {
        const pp_err e = *err; /* PP_FAIL keeps a first error: start over */
        *err = (pp_err){0};
        PP_FAIL(err, s, "%s: %s", c->name, e.msg);
    }
    return s;
}

static int index_of(void *const *bufs, int n, const void *b) {
    for (int i = 0; i < n; i++)
        if (bufs[i] == b) return i;
    return -1;
}

static pp_status bad_buf(const copy_link *c, pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "internal: %s: a buffer that is not the link's", c->name);
}

static pp_status cp_acquire(pprt_link *l, void **buf, pp_err *err) {
    copy_link *c = (copy_link *)l;
    int64_t ev;
    PP_TRY(c->pfree->ops->recv(c->pfree, buf, &ev, err));
    if (ev > 0) return named(c, c->mem->wait(c->ev[ev - 1], err), err);
    return PP_OK;
}

static pp_status cp_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    copy_link *c = (copy_link *)l;
    if (index_of(c->pbuf, l->depth, buf) < 0) return bad_buf(c, err);
    void *dst;
    int64_t unused;
    PP_TRY(c->cfree->ops->recv(c->cfree, &dst, &unused, err));
    const int i = index_of(c->cbuf, l->depth, dst);
    if (i < 0) return bad_buf(c, err);
    if (c->path == PPRT_PEER_STAGED) {
        PP_TRY(named(c, c->mem->copy(c->down, c->stage[i], PPRT_ON_HOST, buf, l->from.device, l->bytes, err), err));
        PP_TRY(named(c, c->mem->record(c->ev_down[i], c->down, err), err));
        PP_TRY(named(c, c->mem->stream_wait(c->stream, c->ev_down[i], err), err));
        PP_TRY(named(c, c->mem->copy(c->stream, dst, l->to.device, c->stage[i], PPRT_ON_HOST, l->bytes, err), err));
    } else {
        PP_TRY(named(c, c->mem->copy(c->stream, dst, l->to.device, buf, l->from.device, l->bytes, err), err));
    }
    PP_TRY(named(c, c->mem->record(c->ev[i], c->stream, err), err));
    PP_TRY(c->full->ops->send(c->full, dst, tag, err));
    return c->pfree->ops->send(c->pfree, buf, i + 1, err);
}

static pp_status cp_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    copy_link *c = (copy_link *)l;
    PP_TRY(c->full->ops->recv(c->full, buf, tag, err));
    const int i = index_of(c->cbuf, l->depth, *buf);
    if (i < 0) return bad_buf(c, err);
    return named(c, c->mem->wait(c->ev[i], err), err);
}

static pp_status cp_release(pprt_link *l, void *buf, pp_err *err) {
    copy_link *c = (copy_link *)l;
    if (index_of(c->cbuf, l->depth, buf) < 0) return bad_buf(c, err);
    return c->cfree->ops->send(c->cfree, buf, 0, err);
}

static void cp_close(pprt_link *l) {
    copy_link *c = (copy_link *)l;
    pprt_chan *ch[3] = {c->pfree, c->cfree, c->full};
    for (int k = 0; k < 3; k++)
        if (ch[k]) ch[k]->ops->close(ch[k]);
}

static void free_end(const copy_link *c, const pprt_place *at, void **bufs, int n) {
    for (int i = 0; bufs && i < n; i++) {
        if (!bufs[i]) continue;
        if (pprt_place_is_host(at)) c->mem->free_pinned(bufs[i]);
        else pprt_pool_dev_free(c->mem, at->device, bufs[i]);
    }
    free(bufs);
}

static void cp_destroy(pprt_link *l) {
    copy_link *c = (copy_link *)l;
    if (!c) return;
    if (c->stream) c->mem->stream_free(c->stream); /* after its copies */
    if (c->down) c->mem->stream_free(c->down);
    for (int i = 0; c->ev && i < l->depth; i++)
        if (c->ev[i]) c->mem->event_free(c->ev[i]);
    for (int i = 0; c->ev_down && i < l->depth; i++)
        if (c->ev_down[i]) c->mem->event_free(c->ev_down[i]);
    for (int i = 0; c->stage && i < l->depth; i++)
        if (c->stage[i]) c->mem->free_pinned(c->stage[i]);
    free(c->ev);
    free(c->ev_down);
    free(c->stage);
    free_end(c, &l->from, c->pbuf, l->depth);
    free_end(c, &l->to, c->cbuf, l->depth);
    pprt_chan *ch[3] = {c->pfree, c->cfree, c->full};
    for (int k = 0; k < 3; k++)
        if (ch[k]) ch[k]->ops->destroy(ch[k]);
    free(c);
}

static const pprt_link_ops copy_ops = {cp_acquire, cp_submit, cp_receive, cp_release, NULL, cp_close, cp_destroy};

static pp_status alloc_end(const copy_link *c, const pprt_place *at, void **b, pp_err *err) {
    return pprt_place_is_host(at) ? c->mem->alloc_pinned(c->base.bytes, b, err)
                                  : pprt_pool_dev_alloc(c->mem, at->device, c->base.bytes, b, err);
}

pp_status pprt_link_copy(const pprt_place *from, const pprt_place *to, size_t bytes, int depth, const char *name,
                         pprt_link **out, pp_err *err) {
    *out = NULL;
    if (depth < 1) return PP_FAIL(err, PP_EINVAL, "a link needs at least one buffer, got depth %d", depth);
    const pprt_place *dev = pprt_place_is_host(from) ? to : from; /* whose stream copies */
    if (pprt_place_is_host(dev))
        return PP_FAIL(err, PP_ERUNTIME, "internal: %s: a copy link between two host ends", name);
    copy_link *c = calloc(1, sizeof *c);
    if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->base = (pprt_link){&copy_ops, *from, *to, bytes, depth, false, NULL};
    c->mem = dev->mem;
    c->path = -1;
    if (!pprt_place_is_host(from) && !pprt_place_is_host(to) && from->device != to->device) {
        c->path = c->mem->peer(from->device, to->device);
        if (c->path != PPRT_PEER_SRC) dev = to; /* the consumer's side maps, or copies up from pinned memory */
    }
    c->base.path = c->path == PPRT_PEER_SRC      ? "peer copy issued by the producer's device (it maps the consumer's)"
                   : c->path == PPRT_PEER_DST    ? "peer copy issued by the consumer's device (it maps the producer's)"
                   : c->path == PPRT_PEER_STAGED ? "staged through pinned host memory (no peer access either way)"
                   : pprt_place_is_host(from)    ? "host -> device through pinned memory"
                                                 : "device -> host through pinned memory";
    char f[64], t[64];
    pprt_place_name(from, f, sizeof f);
    pprt_place_name(to, t, sizeof t);
    snprintf(c->name, sizeof c->name, "%s (%s -> %s)", name, f, t);
    c->pbuf = calloc((size_t)depth, sizeof *c->pbuf);
    c->cbuf = calloc((size_t)depth, sizeof *c->cbuf);
    c->ev = calloc((size_t)depth, sizeof *c->ev);
    pp_status s = c->pbuf && c->cbuf && c->ev ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) s = pprt_queue_create(depth, &c->pfree, err);
    if (s == PP_OK) s = pprt_queue_create(depth, &c->cfree, err);
    if (s == PP_OK) s = pprt_queue_create(depth, &c->full, err);
    if (s == PP_OK) s = c->mem->stream_new(dev->device, &c->stream, err);
    if (s == PP_OK && c->path == PPRT_PEER_STAGED) {
        c->stage = calloc((size_t)depth, sizeof *c->stage);
        c->ev_down = calloc((size_t)depth, sizeof *c->ev_down);
        s = c->stage && c->ev_down ? c->mem->stream_new(from->device, &c->down, err)
                                   : PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (int i = 0; i < depth && s == PP_OK; i++) {
            s = c->mem->alloc_pinned(bytes, &c->stage[i], err);
            if (s == PP_OK) s = c->mem->event_new(from->device, &c->ev_down[i], err);
        }
    }
    for (int i = 0; i < depth && s == PP_OK; i++) {
        s = alloc_end(c, from, &c->pbuf[i], err);
        if (s == PP_OK) s = alloc_end(c, to, &c->cbuf[i], err);
        if (s == PP_OK) s = c->mem->event_new(dev->device, &c->ev[i], err);
        if (s == PP_OK) s = c->pfree->ops->send(c->pfree, c->pbuf[i], 0, err);
        if (s == PP_OK) s = c->cfree->ops->send(c->cfree, c->cbuf[i], 0, err);
    }
    if (s != PP_OK) {
        s = named(c, s, err);
        cp_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return PP_OK;
}

pp_status pprt_link_between(const pprt_place *from, const pprt_place *to, size_t bytes, int depth, const char *name,
                            pprt_link **out, pp_err *err) {
    const bool fh = pprt_place_is_host(from), th = pprt_place_is_host(to);
    if (fh && th) return pprt_link_queue(bytes, depth, out, err);
    if (!fh && !th && from->mem != to->mem)
        return PP_FAIL(err, PP_EUNSUP, "%s: a link between two device spaces (%s and %s) is not supported; place both "
                       "stages on one backend", name, from->mem->name, to->mem->name);
    if (!fh && !th && from->device == to->device) return pprt_link_queue_at(from, bytes, depth, out, err);
    return pprt_link_copy(from, to, bytes, depth, name, out, err);
}
