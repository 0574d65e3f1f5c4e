/* link.h: links carry boundary messages between the stages of a pipeline.
 *
 * A link joins a producer (a stage's outgoing side) to a consumer (the next
 * stage's incoming side) and owns the `depth` buffers that circulate between
 * them: the producer acquires a free buffer, its executor fills it, it
 * submits it with its micro-batch tag; the consumer receives it, its
 * executor reads it, it releases it back. A link knows the memory space at
 * each end (host today; device and NCCL links later); its buffers are in
 * the space the executors at its ends want, so no driver ever copies a
 * message itself.
 *
 * The ends of the whole pipeline are links too: a source fills stage 0's
 * incoming message from the input arrays on receive, and a sink copies the
 * last stage's outgoing message into the output arrays on submit
 * (link_data.c). So every stage runs the same loop (stage.c) whatever its
 * position and whatever carries its messages.
 *
 * close() wakes every waiter on either side, and every later call fails:
 * how an error anywhere stops a pipeline without a hang. A link whose ends
 * live in different processes (MPI) exists on each side and implements that
 * side's calls; the other side's return an error.
 *
 * Implementations: link_chans.c (threads of one process, and the MPI
 * channels of comm/), link_data.c (source and sink). */
#ifndef PPRT_LINK_H
#define PPRT_LINK_H

#include "../backend.h"

typedef struct pprt_link pprt_link;

typedef struct pprt_link_ops {
    /* producer: a free buffer to fill (blocks until one is back) */
    pp_status (*acquire)(pprt_link *l, void **buf, pp_err *err);
    /* producer: the filled buffer goes on, tagged with its place in the
     * stage's sequence */
    pp_status (*submit)(pprt_link *l, void *buf, int64_t tag, pp_err *err);
    /* consumer: the next filled buffer and its tag (blocks) */
    pp_status (*receive)(pprt_link *l, void **buf, int64_t *tag, pp_err *err);
    /* consumer: done with it; it goes back to the producer */
    pp_status (*release)(pprt_link *l, void *buf, pp_err *err);
    /* producer: wait until every buffer submitted so far is back (the
     * transfers out of this process completed); NULL: nothing to wait for */
    pp_status (*drain)(pprt_link *l, pp_err *err);
    void (*close)(pprt_link *l);
    void (*destroy)(pprt_link *l);
} pprt_link_ops;

struct pprt_link {
    const pprt_link_ops *ops;
    pprt_mem from, to; /* the memory space at the producer's end and at the consumer's */
    size_t bytes;      /* of one message */
    int depth;         /* buffers in circulation */
    bool fills;        /* receive() does work of the consumer's stage (the source cuts a micro-batch):
                        * the stage loop times it as the stage's */
};

/* Between two threads of this process: `depth` host buffers of `bytes`
 * (64-byte aligned), on two bounded queues. */
pp_status pprt_link_queue(size_t bytes, int depth, pprt_link **out, pp_err *err);

/* The source of a pipeline: receive() returns its own buffer (laid out as
 * stage 0's incoming message) filled with the next micro-batch of `inputs`
 * (n samples each; the last micro-batch zero-padded), tagged with its place
 * in the sequence: the first `warmup` carry micro-batch 0. If t_start is not
 * NULL, t_start[mb] gets the time micro-batch mb (past the warm-up) was cut. */
pp_status pprt_link_source(const pprt_plan *p, const pprt_array *inputs, int64_t n, int warmup, double *t_start,
                           pprt_link **out, pp_err *err);
/* The sink: acquire() returns its own buffer (laid out as the last stage's
 * outgoing message); submit() copies its samples into `outputs` (room for n
 * samples each), dropping the warm-up's and the padding; t_end[mb] (if not
 * NULL) gets when micro-batch mb arrived, and `done` (if not NULL) is called
 * with the count so far. */
pp_status pprt_link_sink(const pprt_plan *p, const pprt_array *outputs, int64_t n, int warmup, double *t_end,
                         void (*done)(void *ctx, int64_t count), void *done_ctx, pprt_link **out, pp_err *err);

/* A link over a pair of channels (chan.h) that carry buffer pointers:
 * `full` forward and `free_` back; the link owns the channels, the array
 * bufs and its n_bufs buffers (freed with free()), which it puts on `free_`
 * at once (n_bufs 0, bufs NULL: the channels own their buffers, as MPI's
 * do). drains: drain() takes every buffer back (MPI: the sends completed).
 * Freed on failure too. For link_chans.c's queue link and comm/'s MPI. */
struct pprt_chan;
pp_status pprt_link_chans(struct pprt_chan *full, struct pprt_chan *free_, void **bufs, int n_bufs, size_t bytes,
                          int depth, bool drains, pprt_link **out, pp_err *err);

#endif
