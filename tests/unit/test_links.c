/* test_links.c: the links' state machines without a GPU (labels fast, cuda;
 * about 3 s). Memory is cuda-emu's emulated device space (mem_emu.c: every
 * copy checked against the registry of device and pinned memory, stream
 * operations delayed by PPRT_EMU_DELAY_US to widen the windows a missing
 * wait would leave); the NCCL link (link_p2p.c) runs over a fake
 * transport defined here: two in-process ends that meet in a rendezvous
 * per transfer, as ncclSend/ncclRecv do, and that can fail an operation or
 * see their peer abort.
 *
 *   p2p       order and payload; depth (the sender runs exactly depth
 *             messages ahead of a receiver that has asked for none: its
 *             receives are posted at its first receive; 2 x depth + 1
 *             once it took one, and one more per message taken); close on either side wakes the waiter;
 *             a transport failure on either side fails both, naming the
 *             call; two replicas' pairs at once keep their own sequences
 *   copy      pprt_link_between over host, device 0, device 1 and device 1
 *             again: the copies each boundary needs, and no others
 *   staging   a device end staged over a host link whose buffers are not
 *             pinned is refused with the space's words
 *   loop      the stage loop (stage_loop.c) as the threaded driver runs it,
 *             over all of these links between stages on host, emulated
 *             devices and a fake NCCL boundary: every message through, in
 *             order; then an executor failing mid-run: its loop reports its
 *             own error, the others stop on closed links, nothing hangs */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../runtime/cuda/mem_emu.h"
#include "../../runtime/link/link.h"
#include "../../runtime/link/p2p.h"
#include "../../runtime/stage_loop.h"
#include "check.h"

static const pprt_mem_ops *EMU = &pprt_mem_cuda_emu;
#define FLOATS 1000
#define BYTES (FLOATS * sizeof(float))

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the fake transport --------------------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const void *send_buf; /* the one send waiting for its receive */
    size_t send_n;
    bool send_taken;
    bool broken[2]; /* side i failed or aborted */
} wire;

enum { F_SEND, F_RECV };

typedef struct {
    pprt_p2p base;
    wire *w;
    int side;           /* 0 sends, 1 receives */
    int fail_op;        /* F_SEND or F_RECV fails at its fail_at-th call; -1: none */
    long fail_at, ops;
    bool failed;
    char msg[128];
} fake;

typedef struct {
    fake *f;
    void *buf;
    size_t n;
} fx;

static void w_fail(fake *f, const char *call) {
    f->failed = true;
    f->w->broken[f->side] = true;
    snprintf(f->msg, sizeof f->msg, "%s: injected failure", call);
    pthread_cond_broadcast(&f->w->cv);
}

static void run_send(void *arg) {
    fx *x = arg;
    fake *f = x->f;
    wire *w = f->w;
    pthread_mutex_lock(&w->mu);
    if (f->fail_op == F_SEND && f->ops++ == f->fail_at) w_fail(f, "ncclSend");
    while (w->send_buf && !w->broken[0] && !w->broken[1]) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->broken[0] && !w->broken[1]) {
        w->send_buf = x->buf, w->send_n = x->n, w->send_taken = false;
        pthread_cond_broadcast(&w->cv);
        while (!w->send_taken && !w->broken[0] && !w->broken[1]) pthread_cond_wait(&w->cv, &w->mu);
        w->send_buf = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    free(x);
}

static void run_recv(void *arg) {
    fx *x = arg;
    fake *f = x->f;
    wire *w = f->w;
    pthread_mutex_lock(&w->mu);
    if (f->fail_op == F_RECV && f->ops++ == f->fail_at) w_fail(f, "ncclRecv");
    while ((!w->send_buf || w->send_taken) && !w->broken[0] && !w->broken[1]) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->broken[0] && !w->broken[1]) {
        memcpy(x->buf, w->send_buf, x->n < w->send_n ? x->n : w->send_n);
        w->send_taken = true;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    free(x);
}

static pp_status f_queue(pprt_p2p *c, void *buf, size_t n, pprt_stream *s, void (*fn)(void *), pp_err *err) {
    fx *x = malloc(sizeof *x);
    *x = (fx){(fake *)c, buf, n};
    return pprt_emu_call(s, fn, x, err);
}

static pp_status f_send(pprt_p2p *c, const void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return f_queue(c, (void *)buf, n, s, run_send, err);
}

static pp_status f_recv(pprt_p2p *c, void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return f_queue(c, buf, n, s, run_recv, err);
}

static pp_status f_check(pprt_p2p *c, pp_err *err) {
    fake *f = (fake *)c;
    pthread_mutex_lock(&f->w->mu);
    pp_status s = f->failed                ? PP_FAIL(err, PP_ERUNTIME, "%s", f->msg)
                  : f->w->broken[f->side] ? PP_FAIL(err, PP_ERUNTIME, "ncclCommGetAsyncError: aborted")
                  : f->w->broken[1 - f->side]
                      ? PP_FAIL(err, PP_ERUNTIME, "ncclCommGetAsyncError: remote process exited or there was a network error")
                      : PP_OK;
    pthread_mutex_unlock(&f->w->mu);
    return s;
}

static void f_abort(pprt_p2p *c) {
    fake *f = (fake *)c;
    pthread_mutex_lock(&f->w->mu);
    f->w->broken[f->side] = true;
    pthread_cond_broadcast(&f->w->cv);
    pthread_mutex_unlock(&f->w->mu);
}

static void f_destroy(pprt_p2p *c) { free(c); }

static const pprt_p2p_ops fake_ops = {"fake NCCL", f_send, f_recv, f_check, f_abort, f_destroy};

static wire *wire_new(void) {
    wire *w = calloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    return w;
}

static void wire_free(wire *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* The two sides of a fake NCCL boundary at emulated devices d0 -> d1. */
static void p2p_pair(wire *w, int d0, int d1, int depth, int64_t n, int fail_side, int fail_op, long fail_at,
                     pprt_link **snd, pprt_link **rcv) {
    pp_err e = {0};
    for (int side = 0; side < 2; side++) {
        fake *f = calloc(1, sizeof *f);
        *f = (fake){{&fake_ops}, w, side, side == fail_side ? fail_op : -1, fail_at, 0, false, ""};
        const pprt_place at = {EMU, side ? d1 : d0};
        pp_status s = pprt_link_p2p(&f->base, &at, side == 0, BYTES, depth, n, side ? "the fake boundary from 0" : "the fake boundary to 1",
                                    side ? rcv : snd, &e);
        CHECK(s == PP_OK, "p2p link side %d: %s", side, e.msg);
    }
}

/* ---- p2p: order, payload, depth, close, failures, replicas ------------------------------------------ */

typedef struct {
    pprt_link *l;
    int64_t n;
    int seed;
    pp_err err;
    pp_status s;
    volatile long done; /* messages through so far */
} side_job;

/* A failure closes the side's link, as a driver does (waking the other side). */
static void *fail_closes(side_job *j) {
    if (j->s != PP_OK) j->l->ops->close(j->l);
    return NULL;
}

static void *sender(void *arg) {
    side_job *j = arg;
    for (int64_t k = 0; k < j->n; k++) {
        void *b;
        if ((j->s = j->l->ops->acquire(j->l, &b, &j->err)) != PP_OK) return fail_closes(j);
        float *v = b;
        for (int i = 0; i < FLOATS; i++) v[i] = (float)(j->seed * 100000 + k * 1000 + i);
        if ((j->s = j->l->ops->submit(j->l, b, k, &j->err)) != PP_OK) return fail_closes(j);
        __atomic_store_n(&j->done, k + 1, __ATOMIC_SEQ_CST);
    }
    if (j->l->ops->drain) j->s = j->l->ops->drain(j->l, &j->err);
    return fail_closes(j);
}

static void *receiver(void *arg) {
    side_job *j = arg;
    for (int64_t k = 0; k < j->n; k++) {
        void *b;
        int64_t tag;
        if ((j->s = j->l->ops->receive(j->l, &b, &tag, &j->err)) != PP_OK) return fail_closes(j);
        const float *v = b;
        bool ok = tag == k;
        for (int i = 0; i < FLOATS && ok; i++) ok = v[i] == (float)(j->seed * 100000 + k * 1000 + i);
        if (!ok) {
            j->s = PP_FAIL(&j->err, PP_ERUNTIME, "message %lld: tag %lld or its payload is wrong", (long long)k,
                           (long long)tag);
            return fail_closes(j);
        }
        if ((j->s = j->l->ops->release(j->l, b, &j->err)) != PP_OK) return fail_closes(j);
        __atomic_store_n(&j->done, k + 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static long done_of(side_job *j) { return __atomic_load_n(&j->done, __ATOMIC_SEQ_CST); }

static void test_order_and_replicas(void) {
    enum { R = 2, N = 24 };
    wire *w[R];
    side_job js[R], jr[R];
    pthread_t ts[R], tr[R];
    for (int r = 0; r < R; r++) {
        w[r] = wire_new();
        pprt_link *snd = NULL, *rcv = NULL;
        p2p_pair(w[r], r, 2 + r, 2 + r, N, -1, -1, 0, &snd, &rcv);
        js[r] = (side_job){.l = snd, .n = N, .seed = r + 1};
        jr[r] = (side_job){.l = rcv, .n = N, .seed = r + 1};
    }
    for (int r = 0; r < R; r++) {
        pthread_create(&ts[r], NULL, sender, &js[r]);
        pthread_create(&tr[r], NULL, receiver, &jr[r]);
    }
    for (int r = 0; r < R; r++) {
        pthread_join(ts[r], NULL);
        pthread_join(tr[r], NULL);
        CHECK(js[r].s == PP_OK && done_of(&js[r]) == N, "replica %d sender: %s", r, js[r].err.msg);
        CHECK(jr[r].s == PP_OK && done_of(&jr[r]) == N, "replica %d receiver: %s", r, jr[r].err.msg);
        js[r].l->ops->destroy(js[r].l);
        jr[r].l->ops->destroy(jr[r].l);
        wire_free(w[r]);
    }
}

static void test_depth(void) {
    enum { DEPTH = 2, N = 12 };
    wire *w = wire_new();
    pprt_link *snd = NULL, *rcv = NULL;
    p2p_pair(w, 0, 1, DEPTH, N, -1, -1, 0, &snd, &rcv);
    side_job js = {.l = snd, .n = N, .seed = 7};
    pthread_t t;
    pthread_create(&t, NULL, sender, &js);
    /* it gets that far (however loaded the machine), then no further: a
     * receiver that has not asked for a message has posted no receive (they
     * are posted at its first receive, not while the links are built), so
     * only the sender's own depth buffers go out */
    for (int i = 0; i < 500 && done_of(&js) < DEPTH; i++) nap_ms(10);
    nap_ms(300);
    CHECK(done_of(&js) == DEPTH, "with no receive asked for the sender submitted %ld, expected depth = %d",
          done_of(&js), DEPTH);
    /* one message taken: one more goes */
    void *b;
    int64_t tag;
    pp_err e = {0};
    CHECK(rcv->ops->receive(rcv, &b, &tag, &e) == PP_OK && tag == 0, "receive: %s", e.msg);
    CHECK(rcv->ops->release(rcv, b, &e) == PP_OK, "release: %s", e.msg);
    for (int i = 0; i < 500 && done_of(&js) < 2 * DEPTH + 1; i++) nap_ms(10);
    nap_ms(200);
    CHECK(done_of(&js) == 2 * DEPTH + 1, "after one message taken the sender submitted %ld, expected %d",
          done_of(&js), 2 * DEPTH + 1);
    /* the rest, in order */
    side_job jr = {.l = rcv, .n = N, .seed = 7};
    for (int64_t k = 1; k < N; k++) {
        CHECK(rcv->ops->receive(rcv, &b, &tag, &e) == PP_OK && tag == k, "receive %lld: %s", (long long)k, e.msg);
        CHECK(((float *)b)[5] == (float)(7 * 100000 + k * 1000 + 5), "payload of message %lld", (long long)k);
        CHECK(rcv->ops->release(rcv, b, &e) == PP_OK, "release: %s", e.msg);
    }
    (void)jr;
    pthread_join(t, NULL);
    CHECK(js.s == PP_OK, "sender: %s", js.err.msg);
    /* the receiver takes no more than was sent */
    pp_err e2 = {0};
    CHECK(rcv->ops->receive(rcv, &b, &tag, &e2) != PP_OK && strstr(e2.msg, "no message is expected"),
          "a receive past the end: '%s'", e2.msg);
    snd->ops->destroy(snd);
    rcv->ops->destroy(rcv);
    wire_free(w);
}

typedef struct {
    pprt_link *l;
    bool recv;
    pp_status s;
    pp_err err;
} blocked_job;

static void *block_in(void *arg) {
    blocked_job *j = arg;
    void *b;
    int64_t tag;
    if (j->recv) j->s = j->l->ops->receive(j->l, &b, &tag, &j->err);
    else { /* a sender with no receiver: its third acquire waits for a send */
        for (int k = 0; k < 3 && j->s == PP_OK; k++) {
            j->s = j->l->ops->acquire(j->l, &b, &j->err);
            if (j->s == PP_OK && k < 2) j->s = j->l->ops->submit(j->l, b, k, &j->err);
        }
    }
    return NULL;
}

static void test_close(void) {
    for (int side = 0; side < 2; side++) {
        wire *w = wire_new();
        pprt_link *snd = NULL, *rcv = NULL;
        p2p_pair(w, 0, 1, 1, 8, -1, -1, 0, &snd, &rcv);
        /* side 0: the sender blocks (the receiver has one receive posted, and
         * takes nothing); side 1: the receiver blocks (nothing is sent) */
        blocked_job j = {.l = side ? rcv : snd, .recv = side == 1};
        pthread_t t;
        pthread_create(&t, NULL, block_in, &j);
        nap_ms(150);
        j.l->ops->close(j.l);
        pthread_join(t, NULL);
        CHECK(j.s != PP_OK && strstr(j.err.msg, "closed"), "side %d: close did not end the wait: '%s'", side, j.err.msg);
        void *b;
        int64_t tag;
        pp_err e = {0};
        pp_status later = side ? j.l->ops->receive(j.l, &b, &tag, &e) : j.l->ops->acquire(j.l, &b, &e);
        CHECK(later != PP_OK && strstr(e.msg, "closed"), "side %d: a call after close: '%s'", side, e.msg);
        /* the other side sees its peer gone */
        pprt_link *other = side ? snd : rcv;
        other->ops->close(other);
        snd->ops->destroy(snd);
        rcv->ops->destroy(rcv);
        wire_free(w);
    }
}

static void test_failures(void) {
    for (int side = 0; side < 2; side++) {
        enum { N = 10 };
        wire *w = wire_new();
        pprt_link *snd = NULL, *rcv = NULL;
        p2p_pair(w, 0, 1, 2, N, side, side ? F_RECV : F_SEND, 3, &snd, &rcv);
        side_job js = {.l = snd, .n = N, .seed = 3}, jr = {.l = rcv, .n = N, .seed = 3};
        pthread_t a, b;
        pthread_create(&a, NULL, sender, &js);
        pthread_create(&b, NULL, receiver, &jr);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        const char *call = side ? "ncclRecv: injected failure" : "ncclSend: injected failure";
        side_job *own = side ? &jr : &js, *peer = side ? &js : &jr;
        CHECK(own->s != PP_OK && strstr(own->err.msg, call) && strstr(own->err.msg, "the fake boundary"),
              "the failing side names the boundary and the call: '%s'", own->err.msg);
        CHECK(peer->s != PP_OK && (strstr(peer->err.msg, "remote process exited") || strstr(peer->err.msg, "closed")),
              "the other side fails too: '%s'", peer->err.msg);
        CHECK(done_of(own) < N && done_of(peer) < N, "side %d: the messages went through its failure (%ld, %ld)",
              side, done_of(own), done_of(peer));
        snd->ops->close(snd);
        rcv->ops->close(rcv);
        snd->ops->destroy(snd);
        rcv->ops->destroy(rcv);
        wire_free(w);
    }
}

/* ---- copy links: the copies each boundary needs ----------------------------------------------------- */

static void test_copies(void) {
    const pprt_place host = pprt_place_host(), d0 = {EMU, 0}, d1 = {EMU, 1};
    const pprt_place *from[4] = {&host, &d0, &d1, &d1}, *to[4] = {&d0, &d1, &d1, &host};
    const char *kind[4] = {"h2d", "peer", "none", "d2h"};
    enum { N = 9 };
    for (int c = 0; c < 4; c++) {
        pprt_link *l = NULL;
        pp_err e = {0};
        CHECK(pprt_link_between(from[c], to[c], BYTES, 2, "a test link", &l, &e) == PP_OK, "link %d: %s", c, e.msg);
        if (!l) continue;
        CHECK(l->from.device == from[c]->device && l->to.device == to[c]->device, "link %d: its places", c);
        pprt_emu_counts before, after;
        pprt_emu_counts_get(&before);
        side_job js = {.l = l, .n = N, .seed = 11 + c}, jr = {.l = l, .n = N, .seed = 11 + c};
        pthread_t a, b;
        pthread_create(&a, NULL, sender, &js);
        pthread_create(&b, NULL, receiver, &jr);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        CHECK(js.s == PP_OK && jr.s == PP_OK, "link %d (%s): %s%s", c, kind[c], js.err.msg, jr.err.msg);
        pprt_emu_counts_get(&after);
        const long h2d = after.h2d - before.h2d, d2h = after.d2h - before.d2h, peer = after.peer - before.peer,
                   d2d = after.d2d - before.d2d;
        const long want[4][4] = {{N, 0, 0, 0}, {0, 0, N, 0}, {0, 0, 0, 0}, {0, N, 0, 0}};
        CHECK(h2d == want[c][0] && d2h == want[c][1] && peer == want[c][2] && d2d == 0,
              "link %d (%s): %ld h2d, %ld d2h, %ld peer, %ld d2d copies", c, kind[c], h2d, d2h, peer, d2d);
        /* a closed copy link fails both sides at once */
        l->ops->close(l);
        void *buf;
        pp_err e2 = {0};
        CHECK(l->ops->acquire(l, &buf, &e2) != PP_OK, "link %d: acquire after close", c);
        l->ops->destroy(l);
    }
    /* a link between two device spaces is refused, naming both */
    pprt_mem_ops other_space = pprt_mem_cuda_emu;
    other_space.name = "other";
    const pprt_place other = {&other_space, 0};
    pprt_link *l = NULL;
    pp_err e = {0};
    CHECK(pprt_link_between(&d0, &other, BYTES, 2, "a test link", &l, &e) == PP_EUNSUP && !l &&
              strstr(e.msg, "cuda-emu and other"),
          "two device spaces: '%s'", e.msg);
}

static void test_staging_refused(void) {
    pprt_link *q = NULL, *g = NULL;
    pp_err e = {0};
    CHECK(pprt_link_queue(BYTES, 2, &q, &e) == PP_OK, "queue: %s", e.msg);
    const pprt_place d0 = {EMU, 0};
    CHECK(pprt_link_staged(q, &d0, false, "a staged test link", &g, &e) == PP_OK, "staged: %s", e.msg);
    void *b;
    CHECK(g->ops->acquire(g, &b, &e) == PP_OK, "acquire: %s", e.msg);
    CHECK(pprt_emu_check(b, BYTES, 0, "the lent buffer", &e) == PP_OK, "the device end lends device memory: %s", e.msg);
    pp_err e2 = {0};
    CHECK(g->ops->submit(g, b, 0, &e2) != PP_OK && strstr(e2.msg, "not pinned") && strstr(e2.msg, "a staged test link"),
          "a copy into host memory that is not pinned: '%s'", e2.msg);
    g->ops->destroy(g);
}

/* ---- the stage loop over every kind of link ---------------------------------------------------------- */

struct pprt_exec {
    pprt_place at;
    int fail_at; /* run index that fails, or -1 */
    int runs;
};

static pp_status inc_run(pprt_exec *x, const void *in, void *out, pp_err *err) {
    if (!pprt_place_is_host(&x->at)) {
        PP_TRY(pprt_emu_check(in, BYTES, x->at.device, "the incoming message", err));
        PP_TRY(pprt_emu_check(out, BYTES, x->at.device, "the outgoing message", err));
    }
    if (x->runs++ == x->fail_at) return PP_FAIL(err, PP_ERUNTIME, "the test's executor fails here");
    const float *a = in;
    float *b = out;
    for (int i = 0; i < FLOATS; i++) b[i] = a[i] + 1;
    return PP_OK;
}

static const pprt_exec_ops inc_ops = {"inc", NULL, inc_run, NULL, NULL, NULL, NULL, NULL};

typedef struct {
    pprt_stage_run run;
    int64_t n;
    pp_status s;
    pp_err err;
    bool own;
    pprt_link **all;
    int n_links;
} stage_job;

static void *stage_thread(void *arg) {
    stage_job *j = arg;
    j->s = pprt_stage_loop(&j->run, 0, j->n, &j->own, &j->err);
    if (j->s != PP_OK) /* the driver's part: stop everything */
        for (int i = 0; i < j->n_links; i++) j->all[i]->ops->close(j->all[i]);
    return NULL;
}

/* host -> [stage 0 @ host] -> [1 @ emu 0] -> [2 @ emu 1] =fake NCCL=> [3 @ emu 2] -> [4 @ emu 2] -> host */
static void test_stage_loop(int fail_stage) {
    enum { P = 5, N = 16 };
    const pprt_place host = pprt_place_host();
    const pprt_place at[P] = {host, {EMU, 0}, {EMU, 1}, {EMU, 2}, {EMU, 2}};
    pprt_link *links[P + 1] = {0}; /* links[i]: into stage i; links[P]: out of the last */
    pprt_link *extra = NULL;       /* the fake NCCL receiving side (stage 3's input) */
    wire *w = wire_new();
    pp_err e = {0};
    CHECK(pprt_link_queue(BYTES, 2, &links[0], &e) == PP_OK, "%s", e.msg);
    for (int b = 0; b < P - 1; b++) {
        if (b == 2) {
            p2p_pair(w, 1, 2, 2, N, -1, -1, 0, &links[3], &extra);
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "stage %d -> stage %d", b, b + 1);
        CHECK(pprt_link_between(&at[b], &at[b + 1], BYTES, 2, name, &links[b + 1], &e) == PP_OK, "%s", e.msg);
    }
    CHECK(pprt_link_between(&at[P - 1], &host, BYTES, 2, "the end", &links[P], &e) == PP_OK, "%s", e.msg);
    pprt_link *all[P + 2];
    for (int i = 0; i <= P; i++) all[i] = links[i];
    all[P + 1] = extra;
    struct pprt_exec ex[P];
    stage_job jobs[P];
    pthread_t th[P];
    for (int i = 0; i < P; i++) {
        ex[i] = (struct pprt_exec){at[i], i == fail_stage ? 5 : -1, 0};
        jobs[i] = (stage_job){.run = {.stage = i, .ex = &inc_ops, .x = &ex[i], .in = i == 3 ? extra : links[i],
                                      .out = i == 2 ? links[3] : links[i + 1]},
                              .n = N, .all = all, .n_links = P + 2};
        pthread_create(&th[i], NULL, stage_thread, &jobs[i]);
    }
    /* feed and drain from this thread and another */
    side_job feed = {.l = links[0], .n = N, .seed = 1}, drain = {.l = links[P], .n = N, .seed = 1};
    pthread_t tf;
    pthread_create(&tf, NULL, sender, &feed);
    long got = 0;
    for (int64_t k = 0; k < N; k++) {
        void *b;
        int64_t tag;
        if (links[P]->ops->receive(links[P], &b, &tag, &drain.err) != PP_OK) break;
        bool ok = tag == k;
        for (int i = 0; i < FLOATS && ok; i++) ok = ((float *)b)[i] == (float)(100000 + k * 1000 + i + P);
        CHECK(ok, "message %lld at the end: tag %lld or its payload is wrong", (long long)k, (long long)tag);
        links[P]->ops->release(links[P], b, &drain.err);
        got++;
    }
    if (fail_stage >= 0) /* the feeder may wait on a closed link, or have finished */
        links[0]->ops->close(links[0]);
    pthread_join(tf, NULL);
    for (int i = 0; i < P; i++) pthread_join(th[i], NULL);
    if (fail_stage < 0) {
        CHECK(got == N, "%ld of %d messages came through", got, N);
        for (int i = 0; i < P; i++) CHECK(jobs[i].s == PP_OK, "stage %d: %s", i, jobs[i].err.msg);
    } else {
        CHECK(got < N, "all messages came through a pipeline whose stage %d failed", fail_stage);
        for (int i = 0; i < P; i++) {
            if (i == fail_stage)
                CHECK(jobs[i].s != PP_OK && jobs[i].own && strstr(jobs[i].err.msg, "the test's executor fails here") &&
                          strstr(jobs[i].err.msg, "micro-batch 5"),
                      "stage %d's own failure: '%s'", i, jobs[i].err.msg);
            else
                CHECK(!jobs[i].own, "stage %d calls another's failure its own: '%s'", i, jobs[i].err.msg);
        }
    }
    for (int i = 0; i < P + 2; i++) all[i]->ops->close(all[i]);
    for (int i = 0; i < P + 2; i++) all[i]->ops->destroy(all[i]);
    wire_free(w);
}

int main(void) {
    setenv("PPRT_EMU_DELAY_US", "50", 1); /* before any stream exists */
    alarm(120);                             /* a hang is a failure */
    test_order_and_replicas();
    test_depth();
    test_close();
    test_failures();
    test_copies();
    test_staging_refused();
    test_stage_loop(-1);
    for (int s = 0; s < 5; s++) test_stage_loop(s);
    return check_summary("test_links");
}
