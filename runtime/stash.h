/* stash.h: what a device keeps between its forward and its backward stage
 * (a training plan's stash, pprt_stage.n_stash): after the forward stage
 * runs micro-batch m, the tail of its outgoing message that is the stash
 * goes into the device's FIFO; before the backward stage runs m, it comes
 * out into the tail of the incoming message. Both stages take micro-batches
 * in order, and the backward's input comes after the forward ran (it went
 * on through the later stages), so an entry is always there to take. */
#ifndef PPRT_STASH_H
#define PPRT_STASH_H

#include <pthread.h>

#include "mem.h"
#include "pprt.h"

typedef struct pprt_stash {
    pthread_mutex_t mu;
    size_t bytes;      /* of one entry */
    pthread_cond_t cv;   /* pprt_stash_pop_wait's */
    bool closed;
    const pprt_stage *f; /* the forward stage: its stash slots say where each tensor lies */
    int first;           /* the first of them in f's out layout */
    size_t out_off;    /* where the stash starts in the forward stage's outgoing message */
    size_t in_off;     /* and in the backward stage's incoming one */
    void **q;          /* FIFO of entries, ring of cap */
    int cap, head, n;
    struct pprt_stash_pool *pool; /* spare entries: its own, or one shared with another stash (pprt_stash_share) */
    int peak;          /* most entries held at once */
    /* the tail lies at the same offsets in both messages (set at creation),
     * and `through` (set by the scheduler where the backward stage is the
     * next one, on a link that hands it the forward's own buffer: the last
     * device, both stages on the host): the stash rides in the message
     * itself, push copies into its tail only what is not there already,
     * pop copies nothing; entries are only counted (peak as before) */
    bool aligned, through;
    /* a stash with a stage on a device (pprt_stash_on): the forward's and
     * the backward's space (NULL: the host) and device, and the entries'
     * device (both stages on one device: there; else PPRT_ON_HOST, pinned
     * memory of a device stage's space); each side's copies on a stream of
     * its own (the forward stage's thread pushes, the backward's pops), each
     * waited for; both on the host (fmem and bmem NULL): memcpy */
    const pprt_mem_ops *fmem, *bmem;
    int fdev, bdev, edev;
    pprt_stream *push_s, *pop_s;
    pprt_event *push_e, *pop_e;
} pprt_stash;

/* The stash of device d of p (d < p->train_devices), or NULL in *out when
 * the device keeps none. */
pp_status pprt_stash_new(const pprt_plan *p, int d, pprt_stash **out, pp_err *err);
/* A zb-h1 plan (pprt_plan.n_wstages): what device d's backward stage keeps
 * for its W stage (pprt_stage.n_wkeep), the W stage's whole incoming
 * message; NULL when there is no W stage or it reads nothing. */
pp_status pprt_stash_new_w(const pprt_plan *p, int d, pprt_stash **out, pp_err *err);
/* The device's forward stage runs at f, its backward at b: where a stage
 * is on a device (a GPU's memory, which the host cannot read) the stash
 * copies with that space's copies, its entries in the device's memory when
 * both stages are on it, else in pinned host memory; both on the host:
 * nothing changes. Before the first push. */
void pprt_stash_on(pprt_stash *s, const pprt_place *f, const pprt_place *b);
/* A zb-h1 plan's device d: its stash a (forward to B) and what B keeps for
 * W, b, take their entries from one pool of entries the larger of the two
 * sizes, where both keep their entries in the same memory (after
 * pprt_stash_on) and before either pushed. A schedule that caps the
 * micro-batches a device holds from its F until its W ran at k (1F1B,
 * ZB-H1: P - d) then allocates at most k entries for both (ppcc's memory
 * model counts k x the larger), where apart the two could hold k each. Not
 * under GPipe: a step's M stash entries would each take the larger size.
 * Either NULL, or a stash that rides in its message: nothing. */
void pprt_stash_share(pprt_stash *a, pprt_stash *b);
/* The bytes of the entries a and b allocated so far (a pool they share
 * once; either may be NULL): the run's log's keep_bytes */
size_t pprt_stash_entry_bytes(const pprt_stash *a, const pprt_stash *b);
/* pprt_stash_pop, waiting for an entry; PP_ERUNTIME once closed. */
pp_status pprt_stash_pop_wait(pprt_stash *s, void *in_msg, pp_err *err);
/* Wakes every pprt_stash_pop_wait for good (the run stopped). */
void pprt_stash_close(pprt_stash *s);
/* Each stash tensor from where the forward stage has it: its own slot of
 * out_msg, the slot of out_msg where it also goes on, or in_msg. */
pp_status pprt_stash_push(pprt_stash *s, const void *in_msg, void *out_msg, pp_err *err);
pp_status pprt_stash_pop(pprt_stash *s, void *in_msg, pp_err *err);
void pprt_stash_free(pprt_stash *s);

#endif
