/* mem.h: memory spaces: where a backend's executor reads and writes its
 * boundary messages, and how bytes move between spaces.
 *
 * A space is a table of operations (pprt_mem_ops) and a place is a space
 * plus a device number in it. Host memory (pprt_mem_host) is the space of
 * the CPU backends; a device backend names its space in its registry row
 * (backend.h): cuda (runtime/cuda/mem_cuda.c: cudaMalloc, cudaHostAlloc,
 * cudaMemcpyAsync and cudaMemcpyPeerAsync on streams, events) and the
 * emulated device space of cuda-emu (runtime/cuda/mem_emu.c: host memory
 * tagged with its device, copies on stream threads, events as counters), so
 * every copy path of the links runs without a GPU.
 *
 * Links (link/link.h) own their buffers in the space the executor at each
 * end wants and use these operations to copy between them; an executor and
 * a driver never copy a message themselves.
 *
 * Copies are asynchronous on a stream; an event recorded on the stream
 * after them completes when they have. Host memory a device copies to or
 * from asynchronously is pinned (alloc_pinned): the staging buffers of the
 * links between a host and a device end. */
#ifndef PPRT_MEM_H
#define PPRT_MEM_H

#include <stdatomic.h>

#include "pprt.h"

/* Where a backend's messages and arenas live. */
typedef enum { PPRT_MEM_HOST = 0, PPRT_MEM_DEVICE = 1 } pprt_mem;

typedef struct pprt_stream pprt_stream; /* a device's copy (or communication) stream */
typedef struct pprt_event pprt_event;   /* a point on a stream */

#define PPRT_ON_HOST (-1) /* the device number of a copy's host end (pinned memory) */

/* The path of a copy between two devices of one space (pprt_mem_ops.peer). */
enum { PPRT_PEER_SRC, PPRT_PEER_DST, PPRT_PEER_STAGED };

/* What a stage's device is: results are bit-identical across a split only
 * between devices that agree on all of it. */
typedef struct pprt_dev_desc {
    char name[96];  /* "NVIDIA H200", "cuda-emu device 1" */
    int cc_major, cc_minor;
    int sms;
    char libs[128]; /* "CUDA runtime 13.0, cuDNN 9.19.0, cuBLASLt 13.1.0" */
} pprt_dev_desc;

typedef struct pprt_mem_ops {
    const char *name; /* "host", "cuda", "cuda-emu" */
    pprt_mem kind;
    /* NCCL moves this space's buffers between ranks (cuda); an emulation
     * (cuda-emu) reads its device memory from the host instead */
    bool nccl, host_addressable;
    /* The device stage st runs on: its plan placement, a --devices list
     * (indexed by the stage under threads, by the local rank under MPI),
     * else stage index or local rank modulo the devices present.
     * local_rank < 0: one process (the threaded driver). */
    pp_status (*device)(const pprt_stage *st, int local_rank, int *dev, pp_err *err);
    /* Memory of device dev (the space's own; host: 64-byte aligned). */
    pp_status (*alloc)(int dev, size_t bytes, void **p, pp_err *err);
    void (*free)(int dev, void *p);
    /* Host memory the space copies to and from asynchronously (pinned). */
    pp_status (*alloc_pinned)(size_t bytes, void **p, pp_err *err);
    void (*free_pinned)(void *p);
    /* The rest: device spaces only (NULL for host). */
    pp_status (*stream_new)(int dev, pprt_stream **s, pp_err *err);
    void (*stream_free)(pprt_stream *s); /* after what it holds completed */
    /* Queue a copy of n bytes on s: each end a device number of this space
     * or PPRT_ON_HOST (pinned memory); two devices: a peer copy. */
    pp_status (*copy)(pprt_stream *s, void *dst, int dst_dev, const void *src, int src_dev, size_t n, pp_err *err);
    /* Peer access between devices a (the producer's) and b (the consumer's),
     * enabled both ways where the hardware allows; which path a copy from
     * a to b takes (PPRT_PEER_*): issued on a stream of a (a maps b's
     * memory), of b (b maps a's), or staged through pinned host memory
     * (neither). */
    int (*peer)(int a, int b);
    /* Queue on s a wait for e (as recorded; another device's event may be). */
    pp_status (*stream_wait)(pprt_stream *s, pprt_event *e, pp_err *err);
    /* Describe device dev: its name, compute capability, SM count, the
     * libraries' versions (pprt_dev_desc); the host space has none. */
    void (*describe)(int dev, struct pprt_dev_desc *d);
    pp_status (*event_new)(int dev, pprt_event **e, pp_err *err);
    void (*event_free)(pprt_event *e);
    /* e completes when everything queued on s so far has; an event never
     * recorded is complete. */
    pp_status (*record)(pprt_event *e, pprt_stream *s, pp_err *err);
    /* *done: whether e completed; an error is a fault of the device. */
    pp_status (*query)(pprt_event *e, bool *done, pp_err *err);
    pp_status (*wait)(pprt_event *e, pp_err *err); /* block until e completed */
    /* Whether the pipeline's source and sink, at a stage in this space, are
     * staged overlapped (link.h pprt_link_staged_overlap: buffers copied on
     * a thread of their own while the stage computes) rather than through
     * one buffer on the stage's thread; NULL: never. The threaded driver
     * asks (cuda, cuda-emu: --cuda-overlap). */
    bool (*overlap_ends)(void);
} pprt_mem_ops;

extern const pprt_mem_ops pprt_mem_host;

/* A place: a space and a device in it (host: device PPRT_ON_HOST). */
typedef struct pprt_place {
    const pprt_mem_ops *mem;
    int device;
} pprt_place;

static inline pprt_place pprt_place_host(void) { return (pprt_place){&pprt_mem_host, PPRT_ON_HOST}; }
static inline bool pprt_place_is_host(const pprt_place *p) { return !p->mem || p->mem->kind == PPRT_MEM_HOST; }
/* "host", "cuda device 1", "cuda-emu device 0" */
void pprt_place_name(const pprt_place *p, char *buf, size_t n);

/* Block until e completed, polling: *stop (if not NULL) set by another
 * thread, or poll(ctx, err) failing (a communicator's error), ends the wait
 * with an error. Sleeps from 10 us doubling to 1 ms between looks. */
pp_status pprt_event_poll(const pprt_mem_ops *mem, pprt_event *e, const atomic_bool *stop,
                          pp_status (*poll)(void *ctx, pp_err *err), void *ctx, pp_err *err);

/* Device to device copies, each complete when pprt_dcopy_run returns (the
 * replicas' chain of gradient sums on threads, train.c): n bytes from src
 * on device sdev to dst on device ddev of space mem, queued on a stream of
 * the side that maps the other (one device: its own), else down into
 * pinned host memory and up again (the pinned buffer kept for the next
 * copy, grown as needed). Each device's stream and event are made at its
 * first copy and kept until pprt_dcopy_free (a step copies every bucket of
 * every replica: a stream made and destroyed per copy cost a driver call
 * pair each); past PPRT_DCOPY_QUEUES devices, per copy. One thread uses a
 * pprt_dcopy at a time. */
#define PPRT_DCOPY_QUEUES 16
typedef struct pprt_dcopy_q {
    int dev;
    pprt_stream *s;
    pprt_event *e;
} pprt_dcopy_q;
typedef struct pprt_dcopy {
    const pprt_mem_ops *mem;
    void *pin;
    size_t cap;
    int n_q;
    pprt_dcopy_q q[PPRT_DCOPY_QUEUES];
} pprt_dcopy;
pp_status pprt_dcopy_run(pprt_dcopy *c, void *dst, int ddev, const void *src, int sdev, size_t n, pp_err *err);
void pprt_dcopy_free(pprt_dcopy *c);

#endif
