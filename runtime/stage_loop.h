/* stage_loop.h: the one stage loop that every driver runs (the threaded
 * one in sched.c, the MPI one in comm/sched_mpi.c): per micro-batch,
 * receive the incoming message from the link before the stage, take a free
 * outgoing buffer from the link after it, run the stage's executor, hand
 * the incoming buffer back, pass the outgoing one on. The ends of the
 * pipeline are links too (link.h), so the first and the last stage run it
 * as the others do, and the loop never touches a message's bytes. */
#ifndef PPRT_STAGE_LOOP_H
#define PPRT_STAGE_LOOP_H

#include "link/link.h"
#include "stash.h"

typedef struct pprt_stage_run {
    int stage;               /* for messages */
    const pprt_exec_ops *ex;
    pprt_exec *x;
    pprt_link *in, *out;     /* the links before and after the stage */
    int warmup;              /* tags below it are warm-up copies (not timed) */
    int64_t mb_offset;       /* added to micro-batch numbers in messages (a replica's share) */
    double busy;             /* seconds spent in the executor past the warm-up, summed (and in
                              * cutting micro-batches out of the inputs: a source's receive) */
    /* --trace (pprt.h): where to record, or NULL; t[PPRT_TRACE_T x mb] for
     * micro-batches past the warm-up, node times for the first n_node_mb
     * of them (prev_ns: the executor's counters after the last run). */
    pprt_trace_track *trace;
    double *prev_ns;
    const pprt_gate *gate;   /* around each micro-batch's run (pprt.h), or NULL */
    /* a training plan's stash (stash.h): a forward stage pushes it after
     * each run, the backward stage of its device pops it before; NULL: none */
    pprt_stash *stash_out, *stash_in;
    int replica;             /* for the gate */
    /* a stage with device-local outputs (pprt_stage.n_local): each micro-batch's
     * outgoing message past the warm-up goes to local(local_ctx, stage,
     * mb_offset + its number, msg) before it goes on; NULL: none */
    pp_status (*local)(void *ctx, int stage, int64_t mb, const void *msg, pp_err *err);
    void *local_ctx;
    /* a stage on a device (local_mem non-NULL): its outgoing message is in
     * device local_dev's memory, so the loop copies it down (local_bytes)
     * into a pinned buffer of its own and hands local that; the buffer, its
     * stream and event are made at the first micro-batch and freed when the
     * loop returns */
    const pprt_mem_ops *local_mem;
    int local_dev;
    size_t local_bytes;
    void *local_buf;
    pprt_stream *local_stream;
    pprt_event *local_ev;
    const bool *local_unread; /* pprt_output_hook.local_unread: when true, a device stage hands local NULL */
} pprt_stage_run;

/* The loop over tags k0 .. k1-1 (the tags the source hands out, in order).
 * Returns PP_OK, or the first failure: a link that failed (closed because
 * the pipeline stopped, or a transport error) or the executor's error, with
 * the stage and micro-batch; *own then says whether the failure is this
 * stage's own (its executor, an out-of-order message) rather than a link
 * closed by someone else. */
pp_status pprt_stage_loop(pprt_stage_run *r, int64_t k0, int64_t k1, bool *own, pp_err *err);

/* A zb-h1 plan's W stage (a device's weight gradients) over tags k0 ..
 * k1-1: each micro-batch's incoming message popped, in order, from what its
 * B kept (stash_in, into in_buf), run through the gate (which defers it),
 * its device-local outputs handed on (local; copied down from its device
 * first where it runs on one, as pprt_stage_loop does). No links. Returns PP_OK, or
 * the first failure with the stage and micro-batch (a stash closed by a stop
 * is one); stopped(stop_ctx), asked before each micro-batch, ends the loop
 * early with PP_OK. */
pp_status pprt_w_stage_loop(pprt_stage_run *r, void *in_buf, void *out_buf, int64_t k0, int64_t k1,
                            bool (*stopped)(void *stop_ctx), void *stop_ctx, pp_err *err);
/* A W stage's incoming and outgoing messages (stage st, numbered stage)
 * where it runs: host memory, or the device's (a stage of a GPU backend) */
pp_status pprt_w_bufs_new(const pprt_place *at, const pprt_stage *st, int stage, void **in, void **out,
                          pp_err *err);
void pprt_w_bufs_free(const pprt_place *at, void *in, void *out);

#endif
