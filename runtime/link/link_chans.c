/* link_chans.c: a link (link.h) over two channels that carry buffer
 * pointers: `full` forward from the producer, `free_` back from the
 * consumer. The in-process links (pprt_link_queue, and the device queue of
 * pprt_link_between when both ends share a device) are two bounded queues
 * and the buffers they own; an MPI link (comm/chan_mpi.c) is one side's
 * pair of MPI channels, which own their buffers. */
#include <stdlib.h>

#include "../pool.h"
#include "chan.h"
#include "link.h"

typedef struct {
    pprt_link base;
    pprt_chan *full, *free_;
    void **bufs; /* owned, freed with their space's free (host: pprt_mem_host's, the pool's) */
    int n_bufs;
    pprt_place owner;
    bool drains; /* drain() waits for every buffer to come back */
} chan_link;

static void free_bufs(const pprt_place *owner, void **bufs, int n) {
    for (int i = 0; i < n; i++) {
        /* the host's free, not free(): a pool block (pool.h) must go back to the pool, or the next
         * training step allocates and faults in its pages again (a GB a step on ResNet-50) */
        if (pprt_place_is_host(owner)) pprt_mem_host.free(0, bufs[i]);
        else pprt_pool_dev_free(owner->mem, owner->device, bufs[i]);
    }
    free(bufs);
}

static pp_status no_chan(pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "internal: this side of the link has no such channel");
}

static pp_status cl_acquire(pprt_link *l, void **buf, pp_err *err) {
    chan_link *c = (chan_link *)l;
    int64_t tag;
    return c->free_ ? c->free_->ops->recv(c->free_, buf, &tag, err) : no_chan(err);
}

static pp_status cl_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    chan_link *c = (chan_link *)l;
    return c->full ? c->full->ops->send(c->full, buf, tag, err) : no_chan(err);
}

static pp_status cl_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    chan_link *c = (chan_link *)l;
    return c->full ? c->full->ops->recv(c->full, buf, tag, err) : no_chan(err);
}

static pp_status cl_release(pprt_link *l, void *buf, pp_err *err) {
    chan_link *c = (chan_link *)l;
    return c->free_ ? c->free_->ops->send(c->free_, buf, 0, err) : no_chan(err);
}

static pp_status cl_drain(pprt_link *l, pp_err *err) {
    chan_link *c = (chan_link *)l;
    for (int d = 0; c->drains && d < l->depth; d++) {
        void *buf;
        PP_TRY(cl_acquire(l, &buf, err));
    }
    return PP_OK;
}

static void cl_close(pprt_link *l) {
    chan_link *c = (chan_link *)l;
    if (c->full) c->full->ops->close(c->full);
    if (c->free_) c->free_->ops->close(c->free_);
}

static void cl_destroy(pprt_link *l) {
    chan_link *c = (chan_link *)l;
    if (!c) return;
    if (c->full) c->full->ops->destroy(c->full);
    if (c->free_) c->free_->ops->destroy(c->free_);
    free_bufs(&c->owner, c->bufs, c->n_bufs);
    free(c);
}

static const pprt_link_ops chan_link_ops = {cl_acquire, cl_submit, cl_receive, cl_release,
                                            cl_drain,   cl_close,  cl_destroy};

pp_status pprt_link_chans(pprt_chan *full, pprt_chan *free_, void **bufs, int n_bufs, const pprt_place *owner,
                          size_t bytes, int depth, bool drains, pprt_link **out, pp_err *err) {
    *out = NULL;
    const pprt_place own = owner ? *owner : pprt_place_host();
    chan_link *c = calloc(1, sizeof *c);
    if (!c) {
        if (full) full->ops->destroy(full);
        if (free_) free_->ops->destroy(free_);
        free_bufs(&own, bufs, n_bufs);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    c->base = (pprt_link){&chan_link_ops, own, own, bytes, depth, false,
                          pprt_place_is_host(&own) ? "a queue of host buffers (no copy)" : "one device: a queue of its buffers (no copy)"};
    c->full = full;
    c->free_ = free_;
    c->bufs = bufs;
    c->n_bufs = n_bufs;
    c->owner = own;
    c->drains = drains;
    for (int i = 0; i < n_bufs; i++) {
        pp_status s = free_->ops->send(free_, bufs[i], 0, err);
        if (s != PP_OK) {
            cl_destroy(&c->base);
            return s;
        }
    }
    *out = &c->base;
    return PP_OK;
}

/* `depth` buffers at `at` (host: 64-byte aligned) on two queues. */
pp_status pprt_link_queue_at(const pprt_place *at, size_t bytes, int depth, pprt_link **out, pp_err *err) {
    *out = NULL;
    if (depth < 1) return PP_FAIL(err, PP_EINVAL, "a link needs at least one buffer, got depth %d", depth);
    pprt_chan *full = NULL, *free_ = NULL;
    void **bufs = calloc((size_t)depth, sizeof *bufs);
    if (!bufs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = pprt_queue_create(depth, &full, err);
    if (s == PP_OK) s = pprt_queue_create(depth, &free_, err);
    int n = 0;
    for (; s == PP_OK && n < depth; n++) {
        s = pprt_place_is_host(at) ? pprt_mem_host.alloc(0, bytes, &bufs[n], err)
                                   : pprt_pool_dev_alloc(at->mem, at->device, bytes, &bufs[n], err);
        if (s != PP_OK) bufs[n] = NULL;
    }
    if (s != PP_OK) {
        if (full) full->ops->destroy(full);
        if (free_) free_->ops->destroy(free_);
        free_bufs(at, bufs, n);
        return s;
    }
    return pprt_link_chans(full, free_, bufs, depth, at, bytes, depth, false, out, err);
}

pp_status pprt_link_queue(size_t bytes, int depth, pprt_link **out, pp_err *err) {
    const pprt_place host = pprt_place_host();
    return pprt_link_queue_at(&host, bytes, depth, out, err);
}
