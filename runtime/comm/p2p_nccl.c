/* p2p_nccl.c: NCCL as the transport of a boundary between two GPU stages on
 * two ranks (p2p.h; link/link_p2p.c builds the link on it). Each boundary
 * has its own two-rank communicator (rank 0 the sending stage), so the
 * sends of one boundary and the receives of the next never share a
 * communicator's order. The sending rank makes the id (ncclGetUniqueId) and
 * it reaches the receiving rank in the start-up messages (sched_mpi.c's
 * handshake, through rank 0). The communicator is non-blocking: its
 * initialization, every ncclSend/ncclRecv that reports ncclInProgress and
 * the link's waits poll ncclCommGetAsyncError, so an NCCL fault ends with
 * NCCL's words, and ncclCommAbort ends what is pending. Every such poll
 * has a deadline (--mpi-timeout) and takes the mutex only around each NCCL
 * call, so an abort from another thread gets in between two polls.
 *
 * Right after the init both ranks make a grouped warm-up ncclSend and
 * ncclRecv of one byte each way and wait for it (within --mpi-timeout):
 * NCCL connects a pair of ranks lazily, at their first point-to-point
 * operation, which must meet the peer's; here both are in their start-up.
 * Without it the receiving rank's first ncclRecv would wait for the
 * sender's first ncclSend, after the sender's executor is built, and a
 * third rank's init, waiting on the receiving rank, could time out.
 *
 * NOT YET RUN ON A GPU (docs/cuda.md): without one the device calls before
 * it fail first; comm/p2p_emu.c runs the same link in CI. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../cuda/cuda_backend.h"
#include "engine.h"

_Static_assert(sizeof(ncclUniqueId) == PPRT_P2P_ID, "ncclUniqueId must fit the start-up message's id field");

typedef struct {
    pprt_p2p base;
    ncclComm_t comm;
    int peer;
    double timeout_s;   /* --mpi-timeout: the bound of every poll */
    pthread_mutex_t mu; /* each call on comm, against an abort from another thread */
    bool aborted;
} nccl_p2p;

static pp_status nccl_fail(pp_err *err, ncclComm_t comm, const char *call, ncclResult_t r) {
    const char *last = ncclGetLastError(comm);
    const char *hint = r == ncclInvalidUsage ? " (NCCL needs a GPU of its own per rank: --transport mpi lets ranks "
                                               "share one)" : "";
    return PP_FAIL(err, PP_ERUNTIME, "%s: %s%s%s%s", call, ncclGetErrorString(r), last && *last ? ": " : "",
                   last ? last : "", hint);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Poll a call that answered ncclInProgress until it is through (no other
 * thread uses comm: the init, the warm-up, the finalize). */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, double deadline) {
    while (r == ncclInProgress) {
        if (deadline > 0 && now() > deadline) return ncclInProgress;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclInternalError;
    }
    return r;
}

/* The same for a communicator an abort may end from another thread: the
 * mutex held only around each ncclCommGetAsyncError. */
static pp_status settle_shared(nccl_p2p *c, ncclResult_t r, const char *call, pp_err *err) {
    const double deadline = now() + c->timeout_s;
    while (r == ncclInProgress) {
        if (now() > deadline)
            return PP_FAIL(err, PP_ERUNTIME, "%s did not complete within %g s (--mpi-timeout)", call, c->timeout_s);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&c->mu);
        if (c->aborted) {
            pthread_mutex_unlock(&c->mu);
            return PP_FAIL(err, PP_ERUNTIME, "%s: the communicator was aborted", call);
        }
        if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess) r = ncclInternalError;
        pp_status s = r == ncclSuccess || r == ncclInProgress ? PP_OK : nccl_fail(err, c->comm, call, r);
        pthread_mutex_unlock(&c->mu);
        PP_TRY(s);
    }
    return r == ncclSuccess ? PP_OK : PP_FAIL(err, PP_ERUNTIME, "%s: %s", call, ncclGetErrorString(r));
}

static pp_status n_xfer(nccl_p2p *c, void *buf, size_t n, pprt_stream *s, bool send, pp_err *err) {
    const char *call = send ? "ncclSend" : "ncclRecv";
    pthread_mutex_lock(&c->mu);
    ncclResult_t r = c->aborted ? ncclInvalidUsage
                     : send     ? ncclSend(buf, n, ncclUint8, c->peer, c->comm, (cudaStream_t)s)
                                : ncclRecv(buf, n, ncclUint8, c->peer, c->comm, (cudaStream_t)s);
    pp_status st = PP_OK;
    if (c->aborted) st = PP_FAIL(err, PP_ERUNTIME, "%s: the communicator was aborted", call);
    else if (r != ncclSuccess && r != ncclInProgress) st = nccl_fail(err, c->comm, call, r);
    pthread_mutex_unlock(&c->mu);
    PP_TRY(st);
    return settle_shared(c, r, call, err); /* outside the mutex: an abort can end it */
}

static pp_status n_send(pprt_p2p *p, const void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return n_xfer((nccl_p2p *)p, (void *)buf, n, s, true, err);
}

static pp_status n_recv(pprt_p2p *p, void *buf, size_t n, pprt_stream *s, pp_err *err) {
    return n_xfer((nccl_p2p *)p, buf, n, s, false, err);
}

static pp_status n_check(pprt_p2p *p, pp_err *err) {
    nccl_p2p *c = (nccl_p2p *)p;
    pthread_mutex_lock(&c->mu);
    pp_status st = PP_OK;
    ncclResult_t r = ncclSuccess;
    if (c->aborted) st = PP_FAIL(err, PP_ERUNTIME, "ncclCommGetAsyncError: the communicator was aborted");
    else if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess || (r != ncclSuccess && r != ncclInProgress))
        st = nccl_fail(err, c->comm, "ncclCommGetAsyncError", r);
    pthread_mutex_unlock(&c->mu);
    return st;
}

static void n_abort(pprt_p2p *p) {
    nccl_p2p *c = (nccl_p2p *)p;
    pthread_mutex_lock(&c->mu);
    if (!c->aborted && c->comm) ncclCommAbort(c->comm);
    c->aborted = true;
    pthread_mutex_unlock(&c->mu);
}

static void n_destroy(pprt_p2p *p) {
    nccl_p2p *c = (nccl_p2p *)p;
    if (!c) return;
    if (!c->aborted && c->comm) {
        ncclResult_t r = ncclCommFinalize(c->comm);
        if (settle(c->comm, r, now() + 10) == ncclSuccess) ncclCommDestroy(c->comm);
        else ncclCommAbort(c->comm);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static const pprt_p2p_ops nccl_ops = {"NCCL", n_send, n_recv, n_check, n_abort, n_destroy};

pp_status pprt_nccl_id(unsigned char id[PPRT_P2P_ID], pp_err *err) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(err, NULL, "ncclGetUniqueId", r);
    memcpy(id, &u, PPRT_P2P_ID);
    return PP_OK;
}

/* The grouped warm-up: one byte to the peer and one from it, on a stream
 * of its own, waited for within --mpi-timeout (NCCL's async error polled). */
static pp_status warm_up(nccl_p2p *c, int device, pp_err *err) {
    cudaStream_t st = NULL;
    unsigned char *d = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&d, 2);
    if (e == cudaSuccess) e = cudaMemsetAsync(d, 0, 2, st);
    if (e != cudaSuccess) {
        if (st) cudaStreamDestroy(st);
        return PP_FAIL(err, PP_ERUNTIME, "the NCCL warm-up on device %d: %s (%s)", device, cudaGetErrorString(e),
                       cudaGetErrorName(e));
    }
    const double deadline = now() + c->timeout_s;
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(d, 1, ncclUint8, c->peer, c->comm, st);
    if (r == ncclSuccess || r == ncclInProgress) r = ncclRecv(d + 1, 1, ncclUint8, c->peer, c->comm, st);
    ncclResult_t g = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = g;
    r = settle(c->comm, r, deadline);
    pp_status s = PP_OK;
    if (r == ncclInProgress)
        s = PP_FAIL(err, PP_ERUNTIME, "ncclGroupEnd (the warm-up send/receive) did not complete within %g s "
                    "(--mpi-timeout): the peer has not made its own", c->timeout_s);
    else if (r != ncclSuccess)
        s = nccl_fail(err, c->comm, "ncclGroupEnd (the warm-up send/receive)", r);
    while (s == PP_OK && (e = cudaStreamQuery(st)) == cudaErrorNotReady) {
        ncclResult_t a = ncclSuccess;
        if (ncclCommGetAsyncError(c->comm, &a) != ncclSuccess || (a != ncclSuccess && a != ncclInProgress))
            s = nccl_fail(err, c->comm, "ncclCommGetAsyncError (the warm-up send/receive)", a);
        else if (now() > deadline)
            s = PP_FAIL(err, PP_ERUNTIME, "the warm-up send/receive did not complete within %g s (--mpi-timeout)",
                        c->timeout_s);
        else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (s == PP_OK && e != cudaSuccess)
        s = PP_FAIL(err, PP_ERUNTIME, "the NCCL warm-up on device %d: %s (%s)", device, cudaGetErrorString(e),
                    cudaGetErrorName(e));
    if (s == PP_OK) { /* a stuck stream is left as it is: the rank fails and ends */
        cudaFree(d);
        cudaStreamDestroy(st);
    }
    return s;
}

pp_status pprt_nccl_open(pprt_mpi *m, int peer, bool first, const unsigned char id[PPRT_P2P_ID], int device,
                         pprt_p2p **out, pp_err *err) {
    *out = NULL;
    cudaError_t e = cudaSetDevice(pprt_cuda_phys(device));
    if (e != cudaSuccess)
        return PP_FAIL(err, e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ? PP_EUNSUP : PP_ERUNTIME,
                       "cudaSetDevice(%d): %s (%s)", device, cudaGetErrorString(e), cudaGetErrorName(e));
    nccl_p2p *c = calloc(1, sizeof *c);
    if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->base.ops = &nccl_ops;
    c->peer = first ? 1 : 0;
    c->timeout_s = m->timeout_s;
    (void)peer;
    pthread_mutex_init(&c->mu, NULL);
    ncclUniqueId u;
    memcpy(&u, id, PPRT_P2P_ID);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, 2, u, first ? 0 : 1, &cfg);
    if (c->comm) r = settle(c->comm, r, now() + m->timeout_s);
    pp_status s = PP_OK;
    if (r == ncclInProgress)
        s = PP_FAIL(err, PP_ERUNTIME, "ncclCommInitRankConfig did not complete within %g s (--mpi-timeout)",
                    m->timeout_s);
    else if (r != ncclSuccess)
        s = nccl_fail(err, c->comm, "ncclCommInitRankConfig", r);
    if (s == PP_OK && !pprt_p2p_old_start()) s = warm_up(c, device, err);
    if (s != PP_OK) {
        if (c->comm) ncclCommAbort(c->comm);
        c->comm = NULL;
        c->aborted = true;
        n_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return PP_OK;
}
