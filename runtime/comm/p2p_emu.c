/* p2p_emu.c: an emulation of the NCCL transport (p2p.h) for cuda-emu's
 * device memory, which the host can read: pprt --backend cuda-emu
 * --transport nccl under mpirun runs the NCCL link (link_p2p.c) with all of
 * its state (streams, events, depth, headers, the id handed out in the
 * start-up messages, the error polling and the abort) over the MPI engine,
 * so CI exercises the link a GPU job uses.
 *
 * Its "communicator init" exchanges the id each side was given (the sender
 * generated it, rank 0 forwarded it in the go-ahead) and refuses a
 * mismatch; a send or receive is a call on the link's emulated stream
 * (mem_emu.c) that makes the MPI transfer and waits for it, so transfers
 * complete in stream order as ncclSend/ncclRecv do. PPRT_EMU_NCCL_FAIL=
 * RANK:OP:N (OP init, send or recv; N counts that rank's operations of the
 * kind from 0) makes that operation fail as a communicator error, which the
 * link finds when it polls (ncclCommGetAsyncError's part). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/mem_emu.h"
#include "engine.h"

enum { OP_NONE, OP_INIT, OP_SEND, OP_RECV };

typedef struct {
    pprt_p2p base;
    pprt_mpi *m;
    int peer;
    char who[64];
    pthread_mutex_t mu;
    bool failed, aborted;
    char msg[400];
    long n[4];          /* operations so far, by OP_* */
    int fail_op;
    long fail_at;
} emu_p2p;

typedef struct {
    emu_p2p *c;
    void *buf;
    size_t n;
    int op;
} xfer;

/* PPRT_EMU_NCCL_FAIL for this rank: which operation fails. */
static void injected(emu_p2p *c) {
    const char *v = getenv("PPRT_EMU_NCCL_FAIL");
    char op[8] = "";
    int rank = -1;
    long at = -1;
    if (!v || sscanf(v, "%d:%7[a-z]:%ld", &rank, op, &at) != 3 || rank != c->m->rank) return;
    c->fail_op = !strcmp(op, "init") ? OP_INIT : !strcmp(op, "send") ? OP_SEND : !strcmp(op, "recv") ? OP_RECV : OP_NONE;
    c->fail_at = at;
}

static const char *call_of(int op) {
    return op == OP_INIT ? "ncclCommInitRankConfig" : op == OP_SEND ? "ncclSend" : "ncclRecv";
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

static pp_status queue(emu_p2p *c, void *buf, size_t n, pprt_stream *s, int op, pp_err *err) {
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
    if (fails_now(c, OP_INIT)) {
        pp_status s = PP_FAIL(err, PP_ERUNTIME, "%s", c->msg);
        e_destroy(&c->base);
        return s;
    }
    /* the emulated bootstrap: both ends must hold the same id */
    unsigned char theirs[PPRT_P2P_ID];
    pprt_mpi_req *rs = NULL, *rr = NULL;
    pp_status s = pprt_mpi_isend(m, id, PPRT_P2P_ID, peer, PPRT_TAG_P2P, &rs, err, "ncclCommInitRankConfig with %s", c->who);
    if (s == PP_OK) s = pprt_mpi_irecv(m, theirs, PPRT_P2P_ID, peer, PPRT_TAG_P2P, &rr, err, "ncclCommInitRankConfig with %s", c->who);
    if (s == PP_OK) s = pprt_mpi_wait(m, rs, err);
    if (s == PP_OK) s = pprt_mpi_wait(m, rr, err);
    if (s == PP_OK && memcmp(theirs, id, PPRT_P2P_ID) != 0)
        s = PP_FAIL(err, PP_ERUNTIME, "ncclCommInitRankConfig: %s holds another NCCL id than this rank (the id did "
                    "not travel intact in the start-up messages)", c->who);
    if (s != PP_OK) {
        e_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return PP_OK;
}
