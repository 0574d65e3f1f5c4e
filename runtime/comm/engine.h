/* engine.h: the MPI engine's internal interface (engine.c), used by the MPI
 * channel (chan_mpi.c) and the MPI driver (sched_mpi.c).
 *
 * One engine thread per process makes every MPI call after MPI_Init_thread
 * (MPI_THREAD_SERIALIZED): other threads queue requests and wait on them.
 * The engine posts them, tests them with MPI_Test, receives control messages
 * on their own tag, sends a heartbeat to every rank and watches theirs. When
 * anything fails (an MPI call, a rank falling silent for the timeout, an
 * abort message from another rank) the engine reports it and ends the
 * process itself, so a thread blocked here never outlives a failure. */
#ifndef PPRT_COMM_ENGINE_H
#define PPRT_COMM_ENGINE_H

#include <mpi.h>
#include <pthread.h>

#include "comm.h"

/* Message tags: control messages, boundary messages, replica input shares,
 * replica output shares, statistics, timelines (pprt --trace), the emulated
 * NCCL's transfers (p2p_emu.c), training's sums and weights. */
enum { PPRT_TAG_CTRL = 7101, PPRT_TAG_DATA, PPRT_TAG_IN, PPRT_TAG_OUT, PPRT_TAG_STATS, PPRT_TAG_TRACE, PPRT_TAG_P2P,
       PPRT_TAG_TRAIN /* training (train_mpi.c): the replicas' gradient sums, the weights after a step */ };

#define PPRT_P2P_ID 128 /* bytes of a transport's id (ncclUniqueId) */

enum {
    PPRT_CTRL_HB = 1, /* heartbeat */
    PPRT_CTRL_ABORT,  /* code, text: the sender failed */
    PPRT_CTRL_ACK,    /* abort received */
    PPRT_CTRL_HELLO,  /* to rank 0: a[0] plan hash, a[1] depth, a[2] replicas, text host,
                       * text + PPRT_HOST_LEN the options that must agree (pprt_mpi_opts.agree),
                       * id the NCCL id of the boundary after the sender's stage */
    PPRT_CTRL_GO,     /* from rank 0: a[0] samples, a[1] 1 = same host as the writer, id the NCCL
                       * id of the boundary before the receiver's stage */
    PPRT_CTRL_PING,   /* to the writer: t[0] sender's clock */
    PPRT_CTRL_PONG,   /* t[0] echoed, t[1] writer's clock */
    PPRT_CTRL_DONE,   /* from the writer: code (exit status of the whole run) */
    PPRT_CTRL_WARM,   /* --warmup: to rank 0, the sender's warm-up micro-batches are through;
                       * from rank 0, everybody's are: start the timed run */
    PPRT_CTRL_DEV,    /* to the writer after set-up: a[0] 1 = a device stage, a[1], a[2] its compute
                       * capability, a[3] its SMs, text its name, text + 128 its libraries */
    PPRT_CTRL_TRAIN,  /* training (train_mpi.c): to rank 0, a[] the training options every rank must
                       * share; from rank 0, they agree */
};

/* Every control message has this fixed size (640 bytes). */
typedef struct pprt_ctrl {
    int32_t type, src, code, pad;
    int64_t a[6];
    double t[2];
    char text[432];
    unsigned char id[PPRT_P2P_ID];
} pprt_ctrl;

typedef struct pprt_mpi_req pprt_mpi_req;

enum { PPRT_HOST_LEN = 64 };

struct pprt_mpi {
    int rank, size;
    int replicas;       /* asked for */
    int stages;         /* 0 until pprt_mpi_bind */
    int stage, replica, writer;
    double timeout_s, hb_s;
    char host[PPRT_HOST_LEN];
    char agree[sizeof(((pprt_ctrl *)0)->text) - PPRT_HOST_LEN]; /* pprt_mpi_opts.agree */
    int transport;      /* PPRT_TRANSPORT_* (driver.h) */
    /* the NCCL ids of this rank's boundaries (all zero: none): the one after
     * its stage it made, the one before it as the go-ahead brought it */
    unsigned char id_out[PPRT_P2P_ID], id_in[PPRT_P2P_ID];
    /* engine thread and what it shares with the others, under mu */
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* to the engine: something to do */
    pthread_cond_t changed; /* from the engine: a request completed, a message arrived */
    bool stop;
    int waiters;
    bool new_wait;           /* a thread started waiting: poll fast again */
    const char *waiting_for; /* what a blocked thread waits for (message text), or NULL */
    pprt_mpi_req *pending;   /* queued, not yet posted, in order */
    pprt_mpi_req **pending_tail;
    pprt_mpi_req *active;    /* posted */
    pprt_ctrl ctrl_in;
    MPI_Request ctrl_req;
    pprt_ctrl *mbox;         /* control messages for the other threads */
    int mbox_n, mbox_cap;
    double *last_heard;
    MPI_Request *hb_req;
    pprt_ctrl hb_msg;
    double last_hb;
    bool heartbeats, watch;
    int phase;               /* ENGINE_RUN, ENGINE_ABORT, ENGINE_EXIT (engine.c) */
    int exit_code;
    double exit_deadline;
    bool *acked;
    pprt_mpi_req *exit_req;  /* the acknowledgement an exiting rank waits to send */
    bool run_complete;       /* the writer gathered everything */
};

/* "rank 3 (stage 1)", or "(stage 1, replica 1)" with replicas. */
void pprt_mpi_describe(const pprt_mpi *m, int rank, char *buf, size_t n);
double pprt_mpi_now(void);

/* Queue a non-blocking send or receive of `bytes` (split into pieces MPI's
 * int counts can hold); `what` names it in error messages ("receiving
 * micro-batch 3 from rank 1 (stage 1)"). */
pp_status pprt_mpi_isend(pprt_mpi *m, const void *buf, size_t bytes, int peer, int tag,
                         pprt_mpi_req **out, pp_err *err, const char *what, ...)
    __attribute__((format(printf, 8, 9)));
pp_status pprt_mpi_irecv(pprt_mpi *m, void *buf, size_t bytes, int peer, int tag,
                         pprt_mpi_req **out, pp_err *err, const char *what, ...)
    __attribute__((format(printf, 8, 9)));
/* Block until the request completed (and free it). A failure never comes
 * back here: the engine ends the process. */
pp_status pprt_mpi_wait(pprt_mpi *m, pprt_mpi_req *r, pp_err *err);
bool pprt_mpi_test(pprt_mpi *m, pprt_mpi_req *r);
/* Wait for r until `deadline` (pprt_mpi_now()'s clock): true, and r freed,
 * if it completed; false if not, r still pending (its buffer must stay
 * valid: the caller fails, and the process ends with r outstanding). */
bool pprt_mpi_wait_until(pprt_mpi *m, pprt_mpi_req *r, double deadline);

/* Send a control message (copied; the engine frees it when sent). */
pp_status pprt_mpi_send_ctrl(pprt_mpi *m, int peer, int type, const pprt_ctrl *body, pp_err *err);
/* Block until a control message of `type` from `src` arrives. */
pp_status pprt_mpi_wait_ctrl(pprt_mpi *m, int type, int src, pprt_ctrl *out, const char *what, pp_err *err);

/* The plan and the agreed options (pprt_mpi_opts.agree) the same on every
 * rank, and --depth, --replicas: rank 0 checks every rank's hello
 * (sched_mpi.c; training's start, train_mpi.c); *clock_off: this rank's
 * clock offset to rank 0's (0 on its host). */
pp_status pprt_mpi_agree(pprt_mpi *m, const pprt_plan *p, int depth, double *clock_off, pp_err *err);

/* ---- the MPI channel (chan_mpi.c) ------------------------------------------ */

#include "../link/chan.h"
#include "../mem.h"

/* This rank's end of one stage boundary, as the pair of channels the
 * threaded scheduler uses (`full` forward, `free` back):
 *   sender (the boundary's upstream rank): free->recv gives a buffer to fill,
 *     one whose previous send completed; full->send starts sending it
 *     (MPI_Isend) and returns at once;
 *   receiver (downstream): full->recv gives the next message, received into
 *     a pre-posted MPI_Irecv; free->send hands its buffer back, which posts
 *     the next MPI_Irecv into it.
 * Each side owns `depth` buffers of `bytes` (64-byte aligned; pinned by the
 * device space `pin` when not NULL: a device stage's link then stages
 * through them, link_stage.c), so up to 2 x depth messages are in flight. `n_msgs` messages pass in all. The tag
 * (micro-batch index) travels in a 64-byte header before the payload. */
pp_status pprt_mpi_chan_create(pprt_mpi *m, int peer, bool sender, size_t bytes, int depth,
                               int64_t n_msgs, const pprt_mem_ops *pin, pprt_chan **full, pprt_chan **free_,
                               pp_err *err);

/* ---- transports of boundaries between device stages (link/p2p.h) ------------ */

#include "../link/p2p.h"

/* The emulated NCCL of cuda-emu (p2p_emu.c): an id, and this rank's end of
 * the boundary with peer, both ends holding the id. */
pp_status pprt_p2p_emu_id(unsigned char id[PPRT_P2P_ID], pp_err *err);
pp_status pprt_p2p_emu_open(pprt_mpi *m, int peer, const unsigned char id[PPRT_P2P_ID], pprt_p2p **out, pp_err *err);
#ifdef PPRT_WITH_NCCL
/* NCCL (p2p_nccl.c, in the CUDA module; pprt reaches it through
 * nccl_module.c, which loads the module): ncclGetUniqueId; a two-rank
 * communicator on `device` (first: this rank sends), initialized within m's
 * timeout. */
pp_status pprt_nccl_id(unsigned char id[PPRT_P2P_ID], pp_err *err);
pp_status pprt_nccl_open(pprt_mpi *m, int peer, bool first, const unsigned char id[PPRT_P2P_ID], int device,
                         pprt_p2p **out, pp_err *err);
#endif

/* ---- this rank's boundaries and stage (links_mpi.c) ------------------------- */

#include "../backend.h"
#include "../link/link.h"

/* What carries a boundary: MPI between host stages; MPI with the device end
 * staged through pinned memory; NCCL; the emulated NCCL (cuda-emu). */
enum { PPRT_BK_HOST, PPRT_BK_STAGED, PPRT_BK_NCCL, PPRT_BK_NCCL_EMU };

typedef struct pprt_mpi_transports_t {
    const pprt_backend *be; /* this rank's stage's (not yet asked whether it runs here) */
    int in, out;            /* PPRT_BK_* of the boundary before and after it; -1: the pipeline's end */
} pprt_mpi_transports_t;

/* What carries boundary b (stage b -> b + 1) between two ranks: PPRT_BK_*
 * from the two stages' spaces and --transport (NCCL by default when every
 * stage is on a GPU). Training's boundaries (train_mpi.c) ask it too. */
pp_status pprt_mpi_boundary_kind(const pprt_mpi *m, const pprt_plan *p, const pprt_backend *override, int b, int *kind,
                                 pp_err *err);

/* Before the start-up messages: the backend and boundaries of this rank's
 * stage (from the plan and --backend, --transport), and m->id_out, the id of
 * an NCCL boundary after it (ncclGetUniqueId), which they carry on. */
pp_status pprt_mpi_transports(pprt_mpi *m, const pprt_plan *p, const pprt_backend *override, pprt_mpi_transports_t *t,
                              pp_err *err);

/* The replica's share at the pipeline's ends: inputs (stage 0), outputs
 * (last stage), its samples, the messages each boundary carries (its
 * micro-batches plus the --warmup copies), the times to fill (one per timed
 * micro-batch). */
typedef struct pprt_mpi_ends {
    const pprt_array *in;
    const pprt_array *out;
    int64_t n, n_msgs;
    double *t_start, *t_end;
} pprt_mpi_ends;

typedef struct pprt_mpi_stage {
    const pprt_backend *be;
    pprt_place at;
    pprt_exec *x;
    pprt_link *in, *out;
} pprt_mpi_stage;

/* After them (m->id_in set): the stage's place (its device: --devices,
 * else the local rank), its links (source or boundary before, sink or
 * boundary after), its backend asked whether it runs on this host, its
 * executor. A failure names the stage, its backend and its boundaries
 * (transport, peer, the NCCL id's fingerprint). */
pp_status pprt_mpi_stage_setup(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o,
                               const pprt_mpi_transports_t *t, const pprt_mpi_ends *ends, pprt_mpi_stage *out,
                               pp_err *err);

#endif
