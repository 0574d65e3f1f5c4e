/* chan_mpi.c: a stage boundary between two ranks behind the channel
 * interface (chan.h), see engine.h. Messages are [64-byte header][payload];
 * the header carries the micro-batch index and the payload size, checked on
 * arrival. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define HDR 64
#define MAGIC 0x3147534d54525050ULL /* "PPRTMSG1" */

typedef struct link link;

typedef struct {
    pprt_chan base;
    link *L;
} end;

struct link {
    pprt_mpi *m;
    int peer;
    bool sender, closed;
    size_t bytes;
    int depth, refs;
    int64_t n_msgs, posted; /* messages in all; sends / receives posted so far */
    unsigned char **buf;    /* depth buffers of HDR + bytes */
    const pprt_mem_ops *pin; /* whose pinned memory they are, or NULL (host) */
    pprt_mpi_req **req;     /* the request on each buffer, NULL when none */
    int *ring, head, count; /* buffers with a request, in posting order */
    int fresh;              /* sender: buffers never handed out */
    end full, free_;
    char who[64];
};

typedef struct {
    uint64_t magic;
    int64_t mb;
    uint64_t bytes;
} hdr;

static int find_buf(const link *L, const void *payload) {
    for (int i = 0; i < L->depth; i++)
        if (L->buf[i] + HDR == payload) return i;
    return -1;
}

static void push(link *L, int i) {
    L->ring[(L->head + L->count) % L->depth] = i;
    L->count++;
}

static int pop(link *L) {
    int i = L->ring[L->head];
    L->head = (L->head + 1) % L->depth;
    L->count--;
    return i;
}

static pp_status post_recv(link *L, int i, pp_err *err) {
    PP_TRY(pprt_mpi_irecv(L->m, L->buf[i], HDR + L->bytes, L->peer, PPRT_TAG_DATA, &L->req[i], err,
                          "receiving micro-batch %lld from %s", (long long)L->posted, L->who));
    L->posted++;
    push(L, i);
    return PP_OK;
}

static pp_status closed_err(pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "channel closed (pipeline stopped)");
}

/* `full` on the sender: start sending a filled buffer. */
static pp_status full_send(pprt_chan *c, void *msg, int64_t tag, pp_err *err) {
    link *L = ((end *)c)->L;
    if (L->closed) return closed_err(err);
    int i = find_buf(L, msg);
    if (!L->sender || i < 0 || L->req[i] || L->posted >= L->n_msgs)
        return PP_FAIL(err, PP_ERUNTIME, "internal: bad send on the boundary to %s", L->who);
    hdr h = {MAGIC, tag, L->bytes};
    memcpy(L->buf[i], &h, sizeof h);
    PP_TRY(pprt_mpi_isend(L->m, L->buf[i], HDR + L->bytes, L->peer, PPRT_TAG_DATA, &L->req[i], err,
                          "sending micro-batch %lld to %s", (long long)tag, L->who));
    L->posted++;
    push(L, i);
    return PP_OK;
}

/* `free` on the sender: a buffer to fill. */
static pp_status free_recv(pprt_chan *c, void **msg, int64_t *tag, pp_err *err) {
    link *L = ((end *)c)->L;
    if (L->closed) return closed_err(err);
    if (!L->sender) return PP_FAIL(err, PP_ERUNTIME, "internal: bad receive on the boundary from %s", L->who);
    int i;
    if (L->fresh > 0) {
        i = L->depth - L->fresh--;
    } else {
        if (L->count == 0) return PP_FAIL(err, PP_ERUNTIME, "internal: no buffer for the boundary to %s", L->who);
        i = pop(L);
        PP_TRY(pprt_mpi_wait(L->m, L->req[i], err));
        L->req[i] = NULL;
    }
    *msg = L->buf[i] + HDR;
    *tag = 0;
    return PP_OK;
}

/* `full` on the receiver: the next message. */
static pp_status full_recv(pprt_chan *c, void **msg, int64_t *tag, pp_err *err) {
    link *L = ((end *)c)->L;
    if (L->closed) return closed_err(err);
    if (L->sender || L->count == 0)
        return PP_FAIL(err, PP_ERUNTIME, "internal: no message is expected from %s", L->who);
    int i = pop(L);
    PP_TRY(pprt_mpi_wait(L->m, L->req[i], err));
    L->req[i] = NULL;
    hdr h;
    memcpy(&h, L->buf[i], sizeof h);
    if (h.magic != MAGIC || h.bytes != L->bytes)
        return PP_FAIL(err, PP_ERUNTIME, "a malformed boundary message came from %s (do all ranks run "
                       "the same plan?)", L->who);
    *msg = L->buf[i] + HDR;
    *tag = h.mb;
    return PP_OK;
}

/* `free` on the receiver: the buffer is read; receive the next message in it. */
static pp_status free_send(pprt_chan *c, void *msg, int64_t tag, pp_err *err) {
    (void)tag;
    link *L = ((end *)c)->L;
    if (L->closed) return closed_err(err);
    int i = find_buf(L, msg);
    if (L->sender || i < 0 || L->req[i])
        return PP_FAIL(err, PP_ERUNTIME, "internal: bad buffer returned on the boundary from %s", L->who);
    return L->posted < L->n_msgs ? post_recv(L, i, err) : PP_OK;
}

static pp_status refuse_send(pprt_chan *c, void *msg, int64_t tag, pp_err *err) {
    (void)c, (void)msg, (void)tag;
    return PP_FAIL(err, PP_ERUNTIME, "internal: this end of an MPI boundary does not send");
}

static pp_status refuse_recv(pprt_chan *c, void **msg, int64_t *tag, pp_err *err) {
    (void)c, (void)msg, (void)tag;
    return PP_FAIL(err, PP_ERUNTIME, "internal: this end of an MPI boundary does not receive");
}

static void link_close(pprt_chan *c) { ((end *)c)->L->closed = true; }

static void link_free(link *L) {
    if (L->buf)
        for (int i = 0; i < L->depth; i++) {
            if (L->pin) L->pin->free_pinned(L->buf[i]);
            else free(L->buf[i]);
        }
    free(L->buf);
    free(L->req);
    free(L->ring);
    free(L);
}

/* Buffers with a request still posted stay allocated: MPI may still write
 * them (the process is ending on a failure then). */
static void link_destroy(pprt_chan *c) {
    link *L = ((end *)c)->L;
    if (--L->refs > 0) return;
    if (L->count == 0) link_free(L);
}

static const pprt_chan_ops sender_full = {full_send, refuse_recv, link_close, link_destroy};
static const pprt_chan_ops sender_free = {refuse_send, free_recv, link_close, link_destroy};
static const pprt_chan_ops receiver_full = {refuse_send, full_recv, link_close, link_destroy};
static const pprt_chan_ops receiver_free = {free_send, refuse_recv, link_close, link_destroy};

pp_status pprt_mpi_chan_create(pprt_mpi *m, int peer, bool sender, size_t bytes, int depth,
                               int64_t n_msgs, const pprt_mem_ops *pin, pprt_chan **full, pprt_chan **free_,
                               pp_err *err) {
    *full = *free_ = NULL;
    if (depth < 1) return PP_FAIL(err, PP_EINVAL, "--depth must be >= 1, got %d", depth);
    link *L = calloc(1, sizeof *L);
    if (!L) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    L->m = m;
    L->peer = peer;
    L->sender = sender;
    L->bytes = bytes;
    L->depth = depth;
    L->n_msgs = n_msgs;
    L->fresh = sender ? depth : 0;
    L->refs = 2;
    L->pin = pin;
    pprt_mpi_describe(m, peer, L->who, sizeof L->who);
    L->buf = calloc((size_t)depth, sizeof *L->buf);
    L->req = calloc((size_t)depth, sizeof *L->req);
    L->ring = calloc((size_t)depth, sizeof *L->ring);
    if (!L->buf || !L->req || !L->ring) {
        link_free(L);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < depth; i++) {
        void *b = NULL;
        if (pin) {
            pp_status s = pin->alloc_pinned(HDR + bytes, &b, err);
            if (s != PP_OK) {
                link_free(L);
                return s;
            }
        } else if (posix_memalign(&b, 64, HDR + bytes) != 0) {
            link_free(L);
            return PP_FAIL(err, PP_ENOMEM, "cannot allocate %d buffers of %zu bytes for the boundary with %s",
                           depth, bytes, L->who);
        }
        L->buf[i] = b;
    }
    for (int i = 0; !sender && i < depth && L->posted < n_msgs; i++) {
        pp_status s = post_recv(L, i, err);
        if (s != PP_OK) return s; /* the requests own the link now: keep it */
    }
    L->full.base.ops = sender ? &sender_full : &receiver_full;
    L->free_.base.ops = sender ? &sender_free : &receiver_free;
    L->full.L = L->free_.L = L;
    *full = &L->full.base;
    *free_ = &L->free_.base;
    return PP_OK;
}
