/* chan.h: the channel interface: how a boundary message moves from one stage
 * to the next. A channel carries message pointers with a tag (the micro-batch
 * index). close() wakes every waiter; operations on a closed channel fail, so
 * an error anywhere can stop the whole pipeline without a hang.
 *
 * Implementations: runtime/link/chan_queue.c (an in-process bounded queue
 * between threads) and runtime/comm/chan_mpi.c (between MPI ranks); the
 * links (runtime/link/) own the buffers that move over them. */
#ifndef PPRT_CHAN_H
#define PPRT_CHAN_H

#include "../../ir/base.h"

typedef struct pprt_chan pprt_chan;

typedef struct pprt_chan_ops {
    pp_status (*send)(pprt_chan *c, void *msg, int64_t tag, pp_err *err);
    pp_status (*recv)(pprt_chan *c, void **msg, int64_t *tag, pp_err *err);
    void (*close)(pprt_chan *c);
    void (*destroy)(pprt_chan *c);
} pprt_chan_ops;

struct pprt_chan {
    const pprt_chan_ops *ops;
};

/* A bounded FIFO for threads of one process; send blocks while full. */
pp_status pprt_queue_create(int capacity, pprt_chan **out, pp_err *err);

#endif
