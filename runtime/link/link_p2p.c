/* link_p2p.c: one side of a boundary between device buffers of two
 * processes over a point-to-point transport (link.h pprt_link_p2p, p2p.h).
 *
 * Each of the `depth` buffers is [256-byte header][message] in device
 * memory; the header (magic, micro-batch tag, size) goes up from a pinned
 * slot before a send and comes down into it after a receive, on the same
 * communication stream, so the tag travels with its message and a message
 * of the wrong size is refused. Per buffer one event, recorded after its
 * transfer and its header copy:
 *
 *   sender    acquire: a buffer never used, else the oldest one sent, once
 *             its event completed; submit: header up, send, record, keep
 *             it in the ring of buffers in flight; drain: every event
 *   receiver  at the first receive (not while the links are being built: a
 *             receive posted then could wait for the peer's executor)
 *             one is posted into every buffer (n_msgs in all); receive:
 *             the oldest posted buffer once its event completed and its
 *             header checked; release: post the next receive into it
 *
 * Waits poll the event and the transport's asynchronous error, so a
 * communicator fault ends the wait with the transport's words (and aborts
 * the communicator) instead of hanging; close() aborts it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"
#include "p2p.h"

#define HDR 256
#define MAGIC 0x32503250544d5050ULL /* "PPMTP2P2" */

typedef struct {
    uint64_t magic;
    int64_t tag;
    uint64_t bytes;
} hdr;

typedef struct {
    pprt_link base;
    pprt_p2p *c;
    const pprt_mem_ops *mem;
    int dev;
    pprt_stream *stream;
    bool sender;
    int64_t n_msgs, posted;
    unsigned char **buf; /* depth device buffers of HDR + bytes */
    unsigned char *pin;  /* depth pinned header slots */
    pprt_event **ev;
    int *ring, head, count; /* buffers with a transfer posted, oldest first */
    int fresh;              /* sender: buffers never lent out */
    bool primed;            /* receiver: its first receives posted */
    atomic_bool closed;
    char who[200];
} p2p_link;

static pp_status check_cb(void *ctx, pp_err *err) {
    p2p_link *L = ctx;
    return L->c->ops->check(L->c, err);
}

/* Name the boundary and what was going on in a failure. */
static pp_status fail_at(p2p_link *L, pp_status s, const char *doing, int64_t mb, pp_err *err) {
    if (s == PP_OK) return s;
    if (!atomic_load(&L->closed)) L->c->ops->abort(L->c);
    const pp_err e = *err; /* PP_FAIL keeps a first error: start over */
    *err = (pp_err){0};
    if (mb >= 0) return PP_FAIL(err, s, "%s: %s (while %s micro-batch %lld)", L->who, e.msg, doing, (long long)mb);
    return PP_FAIL(err, s, "%s: %s (%s)", L->who, e.msg, doing);
}

static pp_status await(p2p_link *L, int i, const char *doing, int64_t mb, pp_err *err) {
    pp_err e = {0};
    pp_status s = pprt_event_poll(L->mem, L->ev[i], &L->closed, check_cb, L, &e);
    if (s != PP_OK && atomic_load(&L->closed)) return PP_FAIL(err, PP_ERUNTIME, "link closed (pipeline stopped)");
    if (s != PP_OK) *err = e;
    return fail_at(L, s, doing, mb, err);
}

static int find_buf(const p2p_link *L, const void *msg) {
    for (int i = 0; i < L->base.depth; i++)
        if (L->buf[i] + HDR == msg) return i;
    return -1;
}

static void push(p2p_link *L, int i) {
    L->ring[(L->head + L->count) % L->base.depth] = i;
    L->count++;
}

static int pop(p2p_link *L) {
    int i = L->ring[L->head];
    L->head = (L->head + 1) % L->base.depth;
    L->count--;
    return i;
}

static pp_status closed_or(p2p_link *L, bool bad, const char *what, pp_err *err) {
    if (atomic_load(&L->closed)) return PP_FAIL(err, PP_ERUNTIME, "link closed (pipeline stopped)");
    if (bad) return PP_FAIL(err, PP_ERUNTIME, "internal: %s: %s", L->who, what);
    return PP_OK;
}

static pp_status post_recv(p2p_link *L, int i, pp_err *err) {
    const int64_t mb = L->posted;
    pp_status s = L->c->ops->recv(L->c, L->buf[i], HDR + L->base.bytes, L->stream, err);
    if (s == PP_OK) s = L->mem->copy(L->stream, L->pin + (size_t)i * HDR, PPRT_ON_HOST, L->buf[i], L->dev, HDR, err);
    if (s == PP_OK) s = L->mem->record(L->ev[i], L->stream, err);
    PP_TRY(fail_at(L, s, "posting the receive of", mb, err));
    L->posted++;
    push(L, i);
    return PP_OK;
}

/* ---- sender ------------------------------------------------------------------------------------------ */

static pp_status p_acquire(pprt_link *l, void **buf, pp_err *err) {
    p2p_link *L = (p2p_link *)l;
    PP_TRY(closed_or(L, !L->sender || (L->fresh == 0 && L->count == 0), "no buffer to lend", err));
    int i;
    if (L->fresh > 0) {
        i = l->depth - L->fresh--;
    } else {
        const int64_t mb = L->posted - L->count;
        i = pop(L);
        PP_TRY(await(L, i, "sending", mb, err));
    }
    *buf = L->buf[i] + HDR;
    return PP_OK;
}

static pp_status p_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    p2p_link *L = (p2p_link *)l;
    const int i = find_buf(L, buf);
    PP_TRY(closed_or(L, !L->sender || i < 0 || L->posted >= L->n_msgs, "a send it cannot take", err));
    hdr h = {MAGIC, tag, l->bytes};
    unsigned char *slot = L->pin + (size_t)i * HDR;
    memcpy(slot, &h, sizeof h);
    pp_status s = L->mem->copy(L->stream, L->buf[i], L->dev, slot, PPRT_ON_HOST, HDR, err);
    if (s == PP_OK) s = L->c->ops->send(L->c, L->buf[i], HDR + l->bytes, L->stream, err);
    if (s == PP_OK) s = L->mem->record(L->ev[i], L->stream, err);
    PP_TRY(fail_at(L, s, "sending", tag, err));
    L->posted++;
    push(L, i);
    return PP_OK;
}

static pp_status p_drain(pprt_link *l, pp_err *err) {
    p2p_link *L = (p2p_link *)l;
    while (L->sender && L->count > 0) {
        const int64_t mb = L->posted - L->count;
        PP_TRY(await(L, pop(L), "sending", mb, err));
    }
    L->fresh = L->sender ? l->depth : 0;
    return PP_OK;
}

/* ---- receiver ---------------------------------------------------------------------------------------- */

static pp_status prime(p2p_link *L, pp_err *err) {
    for (int i = 0; !L->primed && i < L->base.depth && L->posted < L->n_msgs; i++) PP_TRY(post_recv(L, i, err));
    L->primed = true;
    return PP_OK;
}

static pp_status p_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    p2p_link *L = (p2p_link *)l;
    if (!L->sender && !atomic_load(&L->closed)) PP_TRY(prime(L, err));
    PP_TRY(closed_or(L, L->sender || L->count == 0, "no message is expected", err));
    const int64_t mb = L->posted - L->count;
    const int i = pop(L);
    PP_TRY(await(L, i, "receiving", mb, err));
    hdr h;
    memcpy(&h, L->pin + (size_t)i * HDR, sizeof h);
    if (h.magic != MAGIC || h.bytes != l->bytes)
        return fail_at(L, PP_FAIL(err, PP_ERUNTIME, "a malformed message arrived (%llu bytes, expected %zu: do all "
                                  "ranks run the same plan?)", (unsigned long long)h.bytes, l->bytes),
                       "receiving", mb, err);
    *buf = L->buf[i] + HDR;
    *tag = h.tag;
    return PP_OK;
}

static pp_status p_release(pprt_link *l, void *buf, pp_err *err) {
    p2p_link *L = (p2p_link *)l;
    const int i = find_buf(L, buf);
    PP_TRY(closed_or(L, L->sender || i < 0, "a buffer that is not the link's came back", err));
    return L->posted < L->n_msgs ? post_recv(L, i, err) : PP_OK;
}

static pp_status refuse_send(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    (void)buf, (void)tag;
    return closed_or((p2p_link *)l, true, "this side receives", err);
}

static pp_status refuse_acquire(pprt_link *l, void **buf, pp_err *err) {
    (void)buf;
    return closed_or((p2p_link *)l, true, "this side receives", err);
}

static pp_status refuse_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    (void)buf, (void)tag;
    return closed_or((p2p_link *)l, true, "this side sends", err);
}

static pp_status refuse_release(pprt_link *l, void *buf, pp_err *err) {
    (void)buf;
    return closed_or((p2p_link *)l, true, "this side sends", err);
}

static void p_close(pprt_link *l) {
    p2p_link *L = (p2p_link *)l;
    if (!atomic_exchange(&L->closed, true)) L->c->ops->abort(L->c);
}

static void p_destroy(pprt_link *l) {
    p2p_link *L = (p2p_link *)l;
    if (!L) return;
    if (L->stream) L->mem->stream_free(L->stream); /* its transfers done, or aborted */
    if (L->c) L->c->ops->destroy(L->c);
    for (int i = 0; L->ev && i < l->depth; i++)
        if (L->ev[i]) L->mem->event_free(L->ev[i]);
    for (int i = 0; L->buf && i < l->depth; i++)
        if (L->buf[i]) L->mem->free(L->dev, L->buf[i]);
    if (L->pin) L->mem->free_pinned(L->pin);
    free(L->ev);
    free(L->buf);
    free(L->ring);
    free(L);
}

static const pprt_link_ops sender_ops = {p_acquire, p_submit, refuse_receive, refuse_release, p_drain, p_close, p_destroy};
static const pprt_link_ops receiver_ops = {refuse_acquire, refuse_send, p_receive, p_release, NULL, p_close, p_destroy};

pp_status pprt_link_p2p(pprt_p2p *c, const pprt_place *at, bool sender, size_t bytes, int depth, int64_t n_msgs,
                        const char *who, pprt_link **out, pp_err *err) {
    *out = NULL;
    if (depth < 1 || pprt_place_is_host(at)) {
        c->ops->destroy(c);
        return PP_FAIL(err, PP_EINVAL, "%s: needs device buffers and depth >= 1, got %s and %d", who,
                       pprt_place_is_host(at) ? "host memory" : "a device", depth);
    }
    p2p_link *L = calloc(1, sizeof *L);
    if (!L) {
        c->ops->destroy(c);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    const pprt_place h = pprt_place_host();
    L->base = (pprt_link){sender ? &sender_ops : &receiver_ops, sender ? *at : h, sender ? h : *at, bytes, depth, false, NULL};
    L->c = c;
    L->mem = at->mem;
    L->dev = at->device;
    L->sender = sender;
    L->n_msgs = n_msgs;
    L->fresh = sender ? depth : 0;
    atomic_init(&L->closed, false);
    snprintf(L->who, sizeof L->who, "%s", who);
    L->buf = calloc((size_t)depth, sizeof *L->buf);
    L->ev = calloc((size_t)depth, sizeof *L->ev);
    L->ring = calloc((size_t)depth, sizeof *L->ring);
    pp_status s = L->buf && L->ev && L->ring ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) s = L->mem->stream_new(L->dev, &L->stream, err);
    if (s == PP_OK) s = L->mem->alloc_pinned((size_t)depth * HDR, (void **)&L->pin, err);
    for (int i = 0; i < depth && s == PP_OK; i++) {
        s = L->mem->alloc(L->dev, HDR + bytes, (void **)&L->buf[i], err);
        if (s == PP_OK) s = L->mem->event_new(L->dev, &L->ev[i], err);
    }
    if (s != PP_OK) {
        s = fail_at(L, s, "setting up", -1, err);
        p_destroy(&L->base);
        return s;
    }
    if (!sender && pprt_p2p_old_start()) s = prime(L, err); /* the order before issue 57 */
    if (s != PP_OK) {
        p_close(&L->base);
        p_destroy(&L->base);
        return s;
    }
    *out = &L->base;
    return PP_OK;
}
