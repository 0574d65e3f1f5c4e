/* link.h: links carry boundary messages between the stages of a pipeline.
 *
 * A link joins a producer (a stage's outgoing side) to a consumer (the next
 * stage's incoming side) and owns the `depth` buffers that circulate between
 * them: the producer acquires a free buffer, its executor fills it, it
 * submits it with its micro-batch tag; the consumer receives it, its
 * executor reads it, it releases it back. A link knows the place (memory
 * space and device, mem.h) at each end, and the buffers it lends each end
 * are in that end's place: when the places differ the link copies, so no
 * executor and no driver ever copies a message itself.
 *
 * The ordering contract with the executors: run() returns when its
 * outgoing message is complete and its incoming one no longer read (a CUDA
 * executor synchronizes its stream, which its error flag needs anyway). So
 * a link may start copying or sending a buffer as soon as it is submitted;
 * its copies run on the link's own stream, and an event recorded after them
 * is what receive() waits for before it hands the buffer on, and what
 * acquire() waits for before it lends a buffer out again.
 *
 * The ends of the whole pipeline are links too: a source fills stage 0's
 * incoming message from the input arrays on receive, and a sink copies the
 * last stage's outgoing message into the output arrays on submit
 * (link_data.c). So every stage runs the same loop (stage_loop.c) whatever
 * its position and whatever carries its messages.
 *
 * close() wakes every waiter on either side, and every later call fails:
 * how an error anywhere stops a pipeline without a hang. A link whose ends
 * live in different processes (MPI, NCCL) exists on each side and
 * implements that side's calls; the other side's return an error.
 *
 * Implementations:
 *   link_chans.c  two channels of buffer pointers: the in-process queue
 *                 (host buffers, or device buffers when both ends share a
 *                 device), and one side of an MPI boundary (comm/chan_mpi.c)
 *   link_copy.c   in one process between two places: peer copies between
 *                 devices, pinned staging between host and device
 *   link_stage.c  a host link seen from a device end (the pipeline's source
 *                 and sink, an MPI boundary): pinned buffers and a copy, on
 *                 the stage's thread or overlapped on a thread of its own
 *   link_p2p.c    one side of a boundary between device buffers of two
 *                 processes over a point-to-point transport (p2p.h: NCCL)
 *   link_data.c   the source and the sink */
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
    pprt_place from, to; /* the place at the producer's end and at the consumer's */
    size_t bytes;      /* of one message */
    int depth;         /* buffers in circulation */
    bool fills;        /* receive() does work of the consumer's stage (the source cuts a micro-batch):
                        * the stage loop times it as the stage's */
    const char *path;  /* how a message crosses, in words (pprt_link_between's links; NULL: not said) */
};

/* Between two threads of this process: `depth` host buffers of `bytes`
 * (64-byte aligned), on two bounded queues. */
pp_status pprt_link_queue(size_t bytes, int depth, pprt_link **out, pp_err *err);
/* The same with the buffers at `at` (a device: both ends there). */
pp_status pprt_link_queue_at(const pprt_place *at, size_t bytes, int depth, pprt_link **out, pp_err *err);

/* Between two stages of this process at places `from` and `to`: host
 * buffers on queues when both are on the host (pprt_link_queue), device
 * buffers on queues when both are on one device, else a copy link
 * (pprt_link_copy). `name` ("stage 0 -> stage 1") goes into its errors. */
pp_status pprt_link_between(const pprt_place *from, const pprt_place *to, size_t bytes, int depth, const char *name,
                            pprt_link **out, pp_err *err);

/* In one process between two different places: `depth` buffers at each end
 * (pinned where an end is the host), one copy stream (on the source's
 * device, else the destination's); submit() queues the copy of the
 * producer's buffer into a free consumer buffer and returns; receive()
 * waits for that copy's event; acquire() lends a producer buffer whose copy
 * completed. Two devices: a peer copy. */
pp_status pprt_link_copy(const pprt_place *from, const pprt_place *to, size_t bytes, int depth, const char *name,
                         pprt_link **out, pp_err *err);

/* The source of a pipeline: receive() returns its own buffer (laid out as
 * stage 0's incoming message) filled with the next micro-batch of `inputs`
 * (n samples each; the last micro-batch zero-padded), tagged with its place
 * in the sequence: the first `warmup` carry micro-batch 0. If t_start is not
 * NULL, t_start[mb] gets the time micro-batch mb (past the warm-up) was cut.
 * pin: NULL, or the device space whose pinned memory holds the buffer (stage
 * 0 on a device: then wrap it in pprt_link_staged). */
pp_status pprt_link_source(const pprt_plan *p, const pprt_array *inputs, int64_t n, int warmup, double *t_start,
                           const pprt_mem_ops *pin, pprt_link **out, pp_err *err);
/* The sink: acquire() returns its own buffer (laid out as the last stage's
 * outgoing message); submit() copies its samples into `outputs` (room for n
 * samples each), dropping the warm-up's and the padding; t_end[mb] (if not
 * NULL) gets when micro-batch mb arrived, and `done` (if not NULL) is called
 * with the count so far. pin: as for the source. */
pp_status pprt_link_sink(const pprt_plan *p, const pprt_array *outputs, int64_t n, int warmup, double *t_end,
                         void (*done)(void *ctx, int64_t count), void *done_ctx, const pprt_mem_ops *pin,
                         pprt_link **out, pp_err *err);
/* The sink hands each micro-batch's message to take (pprt_run_opts.take_outputs)
 * instead of writing the output arrays; mb0: the run's index of its first. */
void pprt_link_sink_take(pprt_link *sink, const pprt_output_hook *take, int64_t mb0);

/* A host link seen from a device end at `dev` (the link takes `host` over
 * and destroys it with itself): dev_consumes, the device stage consumes
 * (the pipeline's source, an MPI receiving side): receive() takes the host
 * link's next buffer, copies it into a device buffer through the pinned
 * memory the host link's buffers must be in, waits, and releases it; else
 * the device stage produces (the sink, an MPI sending side): submit() copies
 * its device buffer into a buffer acquired from the host link, waits and
 * submits that. The copy waits on the stage's own thread (not overlapped
 * with its compute). */
pp_status pprt_link_staged(pprt_link *host, const pprt_place *dev, bool dev_consumes, const char *name,
                           pprt_link **out, pp_err *err);

/* A link over a pair of channels (chan.h) that carry buffer pointers:
 * `full` forward and `free_` back; the link owns the channels, the array
 * bufs and its n_bufs buffers (in the memory of `owner`, freed with its
 * free(); NULL: host memory freed with free()), which it puts on `free_` at
 * once (n_bufs 0, bufs NULL: the channels own their buffers, as MPI's do).
 * drains: drain() takes every buffer back (MPI: the sends completed). Freed
 * on failure too. For link_chans.c's queue links and comm/'s MPI. */
struct pprt_chan;
pp_status pprt_link_chans(struct pprt_chan *full, struct pprt_chan *free_, void **bufs, int n_bufs,
                          const pprt_place *owner, size_t bytes, int depth, bool drains, pprt_link **out, pp_err *err);

/* One side of a boundary between two processes' device buffers over a
 * point-to-point transport (p2p.h; the link takes c over): `depth` buffers
 * at `at` (a 256-byte header with the micro-batch tag before each message),
 * a communication stream and an event per buffer. The sender sends each
 * submitted buffer (the header copied up from pinned memory first) and
 * lends it again once that send's event completed; the receiver keeps a
 * receive posted into every free buffer (n_msgs in all) and hands a buffer
 * on once its receive's event completed and its header checked. Every wait
 * polls the transport's error (ncclCommGetAsyncError): an error names
 * `who` ("the NCCL boundary to rank 1 (stage 1)") and the call, and aborts
 * the transport; close() aborts it too. */
/* The same, overlapped (link_stage.c says how): `nbuf` device buffers, a
 * copy stream and a thread of the link's own that does the host link's
 * side (the source's cutting, the sink's writing) and the copies, so they
 * overlap the device stage's compute; n_msgs: how many messages the device
 * stage will receive in all (dev_consumes: the pump cuts exactly these);
 * drain() (producer side) returns once every submitted message is written
 * out. */
pp_status pprt_link_staged_overlap(pprt_link *host, const pprt_place *dev, bool dev_consumes, int nbuf, int64_t n_msgs,
                                   const char *name, pprt_link **out, pp_err *err);

struct pprt_p2p;
pp_status pprt_link_p2p(struct pprt_p2p *c, const pprt_place *at, bool sender, size_t bytes, int depth,
                        int64_t n_msgs, const char *who, pprt_link **out, pp_err *err);

#endif
