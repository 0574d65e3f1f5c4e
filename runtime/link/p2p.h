/* p2p.h: a point-to-point transport between the two processes of one
 * boundary, moving device buffers on a device stream (link_p2p.c builds the
 * link on it). Implementations: NCCL (comm/p2p_nccl.c: a two-rank communicator
 * per boundary, ncclSend/ncclRecv), an emulation of it over the MPI engine
 * for cuda-emu's host-addressable device memory (comm/p2p_emu.c), and the
 * tests' in-process fake (tests/unit/test_links.c).
 *
 * Opening one (p2p_nccl.c, p2p_emu.c) initializes the communicator within
 * --mpi-timeout, then makes a grouped warm-up send and receive of a byte
 * each way and waits for it (bounded too): NCCL connects two ranks at their
 * first operation, which must meet the peer's, and both are in their
 * start-up here; later sends and receives find the connection made.
 *
 * send and recv queue the transfer on the stream and return; the transfer
 * completes in stream order (an event recorded after it says when). check
 * reports an asynchronous error of the communicator (a peer gone, a network
 * or device fault), naming the call it came from; it is polled while the
 * link waits. abort ends the communicator's pending transfers (they fail
 * rather than hang) and may be called from another thread. */
#ifndef PPRT_P2P_H
#define PPRT_P2P_H

#include <stdlib.h>

#include "../mem.h"

/* PPRT_P2P_OLD_START=1: the start-up order before issue 57, kept so the
 * tests can show the stall it had: no warm-up send/receive after a
 * communicator's init, and the receiving side posts its receives while its
 * links are still being built (under NCCL's lazy connection the first of
 * them waits for the peer's first send, which comes only once the peer's
 * executor is built). */
static inline int pprt_p2p_old_start(void) {
    const char *v = getenv("PPRT_P2P_OLD_START");
    return v && v[0] == '1';
}

typedef struct pprt_p2p pprt_p2p;

typedef struct pprt_p2p_ops {
    const char *name; /* "NCCL", "emulated NCCL" */
    pp_status (*send)(pprt_p2p *c, const void *buf, size_t n, pprt_stream *s, pp_err *err);
    pp_status (*recv)(pprt_p2p *c, void *buf, size_t n, pprt_stream *s, pp_err *err);
    pp_status (*check)(pprt_p2p *c, pp_err *err);
    void (*abort)(pprt_p2p *c);
    void (*destroy)(pprt_p2p *c); /* after the stream it used has drained */
} pprt_p2p_ops;

struct pprt_p2p {
    const pprt_p2p_ops *ops;
};

#endif
