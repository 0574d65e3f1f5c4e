/* p2p_emu.c: an emulation of the NCCL transport (p2p.h) for cuda-emu's
 * device memory, which the host can read: pprt --backend cuda-emu
 * --transport nccl under mpirun runs the NCCL link (link_p2p.c) with all of
 * its state (streams, events, depth, headers, the id handed out in the
 * start-up messages, the error polling and the abort) over the MPI engine,
 * so CI exercises the link a GPU job uses.
 *
 * Its "communicator init" exchanges the id each side was given (the sender
 * generated it, rank 0 forwarded it in the go-ahead) and refuses a
 * mismatch, within --mpi-timeout as ncclCommInitRankConfig is; a send or
 * receive is a call on the link's emulated stream (mem_emu.c) that makes
 * the MPI transfer and waits for it, so transfers complete in stream order
 * as ncclSend/ncclRecv do.
 *
 * NCCL connects two ranks lazily: the first send or receive between them
 * sets up the connection, and does not get through until the peer makes
 * its own first call. The emulation models it: the first operation of a
 * communicator (the warm-up pprt_p2p_warmup issues right after init, or,
 * without it, the first send or receive) blocks its caller until the peer's
 * first operation, for --mpi-timeout at most (then it fails naming the
 * call and the peer). So a rank that posted its receives while still
 * building its links (the order before issue 57, PPRT_P2P_OLD_START=1)
 * stalls here as it would under NCCL.
 *
 * Injections, for the tests (RANK the world rank; OP init, warm, send or
 * recv; N counts the communicator's operations of the kind from 0; a rank
 * with two NCCL boundaries counts each communicator's own):
 *   PPRT_EMU_NCCL_FAIL=RANK:OP:N     that operation fails as a communicator
 *                                    error, which the link finds when it
 *                                    polls (ncclCommGetAsyncError's part)
 *   PPRT_EMU_NCCL_DELAY=RANK:OP:N:MS the call waits MS ms first (a slow
 *                                    peer: send:0 models a late first send,
 *                                    an executor that takes long to build)
 *   PPRT_EMU_NCCL_DIE=RANK:OP:N      the process kills itself (SIGKILL) at
 *                                    that call: a dead peer at that phase */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/mem_emu.h"
#include "engine.h"

enum { OP_NONE, OP_INIT, OP_WARM, OP_SEND, OP_RECV, OP_N };

typedef struct {
    int op;   /* OP_NONE: no injection */
    long at;  /* the operation's count */
    long ms;  /* delay */
} hook;

typedef struct {
    pprt_p2p base;
    pprt_mpi *m;
    int peer;
    char who[64];
    pthread_mutex_t mu;
    bool failed, aborted;
    char msg[400];
    long n[OP_N];     /* operations run so far, by OP_* (PPRT_EMU_NCCL_FAIL counts these) */
    long calls[OP_N]; /* calls made so far (DELAY and DIE count these) */
    int fail_op;
    long fail_at;
    hook delay, die;
    bool connected; /* the first operation met the peer's */
} emu_p2p;

typedef struct {
    emu_p2p *c;
    void *buf;
    size_t n;
    int op;
} xfer;

static int op_of(const char *op) {
    return !strcmp(op, "init") ? OP_INIT : !strcmp(op, "warm") ? OP_WARM : !strcmp(op, "send") ? OP_SEND
           : !strcmp(op, "recv") ? OP_RECV : OP_NONE;
}

/* An injection variable for this rank: RANK:OP:N[:MS]. */
static hook hook_of(const char *var, int rank) {
    const char *v = getenv(var);
    char op[8] = "";
    int r = -1;
    hook h = {OP_NONE, -1, 0};
    if (v && sscanf(v, "%d:%7[a-z]:%ld:%ld", &r, op, &h.at, &h.ms) >= 3 && r == rank) h.op = op_of(op);
    return h;
}

/* The injections for this rank. */
static void injected(emu_p2p *c) {
    const hook f = hook_of("PPRT_EMU_NCCL_FAIL", c->m->rank);
    c->fail_op = f.op;
    c->fail_at = f.at;
    c->delay = hook_of("PPRT_EMU_NCCL_DELAY", c->m->rank);
    c->die = hook_of("PPRT_EMU_NCCL_DIE", c->m->rank);
}

/* A call of kind op begins: die or wait first where the injections say. */
static void call_begins(emu_p2p *c, int op) {
    pthread_mutex_lock(&c->mu);
    const long k = c->calls[op]++;
    pthread_mutex_unlock(&c->mu);
    if (c->die.op == op && c->die.at == k) {
        fprintf(stderr, "pprt: rank %d: PPRT_EMU_NCCL_DIE=%s: this rank dies now\n", c->m->rank,
                getenv("PPRT_EMU_NCCL_DIE"));
        fflush(stderr);
        raise(SIGKILL);
    }
    if (c->delay.op == op && c->delay.at == k && c->delay.ms > 0) {
        struct timespec ts = {c->delay.ms / 1000, (c->delay.ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
}

static const char *call_of(int op) {
    return op == OP_INIT ? "ncclCommInitRankConfig" : op == OP_WARM ? "ncclGroupEnd (the warm-up send/receive)"
           : op == OP_SEND ? "ncclSend" : "ncclRecv";
}

/* Count an operation; whether it is the one PPRT_EMU_NCCL_FAIL fails (mu held). */
static bool fails_now(emu_p2p *c, int op) {
    const long k = c->n[op]++;
    if (c->fail_op != op || k != c->fail_at) return false;
    c->failed = true;
    snprintf(c->msg, sizeof c->msg, "%s: remote process exited or there was a network error (emulated NCCL: "
             "PPRT_EMU_NCCL_FAIL=%s)", call_of(op), getenv("PPRT_EMU_NCCL_FAIL"));
    return true;
}

static void run_xfer(void *arg) {
    xfer *x = arg;
    emu_p2p *c = x->c;
    pthread_mutex_lock(&c->mu);
    const bool skip = c->failed || c->aborted || fails_now(c, x->op);
    pthread_mutex_unlock(&c->mu);
    if (!skip) {
        pprt_mpi_req *r = NULL;
        pp_err e = {0};
        pp_status s = x->op == OP_SEND
                          ? pprt_mpi_isend(c->m, x->buf, x->n, c->peer, PPRT_TAG_P2P, &r, &e, "%s to %s",
                                           call_of(x->op), c->who)
                          : pprt_mpi_irecv(c->m, x->buf, x->n, c->peer, PPRT_TAG_P2P, &r, &e, "%s from %s",
                                           call_of(x->op), c->who);
        if (s == PP_OK) s = pprt_mpi_wait(c->m, r, &e); /* a failure there ends the process */
        if (s != PP_OK) {
            pthread_mutex_lock(&c->mu);
            c->failed = true;
            snprintf(c->msg, sizeof c->msg, "%s: %.300s", call_of(x->op), e.msg);
            pthread_mutex_unlock(&c->mu);
        }
    }
    free(x);
}

/* Send n bytes to the peer and receive n from it (tag P2P), for
 * --mpi-timeout at most, an abort ending it sooner. The buffers are the
 * exchange's own: on a failure a request may still hold them, so they are
 * left to the process's end (a failure ends it). */
static pp_status exchange(emu_p2p *c, const void *mine, void *theirs, size_t n, int op, const char *what, pp_err *err) {
    unsigned char *b = malloc(2 * n);
    if (!b) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(b, mine, n);
    pprt_mpi_req *rs = NULL, *rr = NULL;
    PP_TRY(pprt_mpi_isend(c->m, b, n, c->peer, PPRT_TAG_P2P, &rs, err, "%s with %s", call_of(op), c->who));
    PP_TRY(pprt_mpi_irecv(c->m, b + n, n, c->peer, PPRT_TAG_P2P, &rr, err, "%s with %s", call_of(op), c->who));
    const double t0 = pprt_mpi_now(), deadline = t0 + c->m->timeout_s;
    bool sent = false, got = false;
    while (!sent || !got) {
        pthread_mutex_lock(&c->mu);
        const bool aborted = c->aborted;
        pthread_mutex_unlock(&c->mu);
        if (aborted) return PP_FAIL(err, PP_ERUNTIME, "%s: the communicator was aborted", call_of(op));
        const double t = pprt_mpi_now();
        if (t >= deadline)
            return PP_FAIL(err, PP_ERUNTIME, "%s did not complete within %g s (--mpi-timeout): %s %s (emulated NCCL)",
                           call_of(op), c->m->timeout_s, c->who, what);
        const double step = t + 0.05 < deadline ? t + 0.05 : deadline;
        if (!sent) sent = pprt_mpi_wait_until(c->m, rs, step);
        else got = pprt_mpi_wait_until(c->m, rr, step);
    }
    memcpy(theirs, b + n, n);
    free(b);
    return PP_OK;
}

/* NCCL's lazy connection: the communicator's first operation gets through
 * once the peer made its first (the caller blocks until then). */
static pp_status connect_lazily(emu_p2p *c, int op, pp_err *err) {
    if (c->connected) return PP_OK;
    const unsigned char tok = 0x5a;
    unsigned char got = 0;
    PP_TRY(exchange(c, &tok, &got, 1, op, "made no NCCL call on this communicator: the connection, made by the "
                    "first send or receive, waits for both ranks", err));
    c->connected = true;
    return PP_OK;
}

static pp_status queue(emu_p2p *c, void *buf, size_t n, pprt_stream *s, int op, pp_err *err) {
    call_begins(c, op);
    PP_TRY(connect_lazily(c, op, err));
    xfer *x = malloc(sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *x = (xfer){c, buf, n, op};
    pp_status st = pprt_emu_call(s, run_xfer, x, err);
    if (st != PP_OK) free(x);
    return st;
}

static pp_status e_send(pprt_p2p *p, const void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return queue((emu_p2p *)p, (void *)buf, n, s, OP_SEND, err);
}

static pp_status e_recv(pprt_p2p *p, void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return queue((emu_p2p *)p, buf, n, s, OP_RECV, err);
}

static pp_status e_check(pprt_p2p *p, pp_err *err) {
    emu_p2p *c = (emu_p2p *)p;
    pthread_mutex_lock(&c->mu);
    pp_status s = c->failed ? PP_FAIL(err, PP_ERUNTIME, "%s", c->msg)
                  : c->aborted ? PP_FAIL(err, PP_ERUNTIME, "ncclCommGetAsyncError: the communicator was aborted")
                               : PP_OK;
    pthread_mutex_unlock(&c->mu);
    return s;
}

static void e_abort(pprt_p2p *p) {
    emu_p2p *c = (emu_p2p *)p;
    pthread_mutex_lock(&c->mu);
    c->aborted = true;
    pthread_mutex_unlock(&c->mu);
}

static void e_destroy(pprt_p2p *p) {
    emu_p2p *c = (emu_p2p *)p;
    if (!c) return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static const pprt_p2p_ops emu_ops = {"emulated NCCL", e_send, e_recv, e_check, e_abort, e_destroy};

pp_status pprt_p2p_emu_id(unsigned char id[PPRT_P2P_ID], pp_err *err) {
    (void)err;
    /* unique enough for a check that the right one arrived */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12);
    memcpy(id, "pprt emulated NCCL id", 21);
    for (int i = 24; i < PPRT_P2P_ID; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        id[i] = (unsigned char)x;
    }
    return PP_OK;
}

pp_status pprt_p2p_emu_open(pprt_mpi *m, int peer, const unsigned char id[PPRT_P2P_ID], pprt_p2p **out, pp_err *err) {
    *out = NULL;
    emu_p2p *c = calloc(1, sizeof *c);
    if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->base.ops = &emu_ops;
    c->m = m;
    c->peer = peer;
    pthread_mutex_init(&c->mu, NULL);
    pprt_mpi_describe(m, peer, c->who, sizeof c->who);
    injected(c);
    call_begins(c, OP_INIT);
    if (fails_now(c, OP_INIT)) {
        pp_status s = PP_FAIL(err, PP_ERUNTIME, "%s", c->msg);
        e_destroy(&c->base);
        return s;
    }
    /* the emulated bootstrap: both ends must hold the same id, within --mpi-timeout */
    unsigned char theirs[PPRT_P2P_ID];
    pp_status s = exchange(c, id, theirs, PPRT_P2P_ID, OP_INIT, "has not joined the communicator", err);
    if (s == PP_OK && memcmp(theirs, id, PPRT_P2P_ID) != 0)
        s = PP_FAIL(err, PP_ERUNTIME, "ncclCommInitRankConfig: %s holds another NCCL id than this rank (the id did "
                    "not travel intact in the start-up messages)", c->who);
    /* the warm-up: the connection made now, while both ranks are here */
    if (s == PP_OK && !pprt_p2p_old_start()) {
        call_begins(c, OP_WARM);
        s = connect_lazily(c, OP_WARM, err);
    }
    if (s != PP_OK) {
        e_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return PP_OK;
}
