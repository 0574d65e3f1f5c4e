/* dopt.h: the device optimizer (issue 56): a stage executor on a device
 * (cuda, cuda-emu) keeps the trained weights whose gradients its stage
 * outputs, their optimizer state and their gradient sums in flat buffers in
 * its device's memory, folds each run's gradients into the sums itself, and
 * at the step's end scales them, sums their squares (the global norm's
 * parts), clips and steps them (kernels.def OPTG and OPT), then copies each
 * stepped weight into the weight spaces of every executor that reads it.
 * Only scalars (each weight's sum of squares) come back to the host; the
 * weights and state come down only for checkpoints and the final weights.
 * With replicas (on MPI ranks, or on threads in one process) the sums chain between the replicas' devices
 * (HOLD, EARLY, WAIT, FOLD_HELD, CANCEL: a later replica holds its runs'
 * gradients until the earlier replicas' sum has arrived, then adds them in
 * order, so every addition is the one threads make; the step's last run
 * folds its gradients bucket by bucket as its steps write them, so the
 * chain's thread sends a bucket while the backward of earlier layers still
 * runs).
 *
 * The trainer (train.c) drives it through pprt_exec_ops.dopt, between runs,
 * on its own thread; every call is synchronous (its device work done when
 * it returns). WAIT, FOLD_HELD and CANCEL alone may come from another
 * thread (the chain's) while a run is under way, after EARLY. The
 * arithmetic is the host trainer's, so the two paths give the same bits (on cuda-emu exactly; ctest `cuda_dopt`). Weights a device
 * optimizer keeps are marked pprt_tdesc.resident: an executor's reload
 * leaves their device copies alone. */
#ifndef PPRT_DOPT_H
#define PPRT_DOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "optim_math.h"

#define PPRT_DOPT_DST 4 /* executors reading one weight at most (a device's F, B and W stages) */

typedef enum pprt_dopt_kind {
    PPRT_DOPT_ADDR,  /* addr: weight tensor `tensor`'s bytes in x's weight space; device, mem: x's device and its
                      * space (the replicas' chain on threads copies between executors' sums through it) */
    PPRT_DOPT_BIND,  /* keep params[] (x's stage outputs their gradients): w, m, v uploaded; later runs fold */
    PPRT_DOPT_BEGIN, /* a step begins: its first run's gradients are copied into the sums, the later ones added */
    PPRT_DOPT_NORM,  /* the sums scaled (mean, unscale as asked), each weight's sum of squares into sq[] */
    PPRT_DOPT_STEP,  /* the gradients clipped (clip: times c), the step k, each weight copied to its dst[] */
    PPRT_DOPT_GET,   /* the weights and their state downloaded into params[].w, m, v (the host's copies) */
    /* the replicas' chain of sums on the devices (MPI ranks, train.c dev_chain): */
    PPRT_DOPT_HOLD,  /* after BEGIN: this step's runs keep their gradients, each in a flat buffer of its own (the
                      * sums' layout, the gaps +0), in order, instead of folding them */
    PPRT_DOPT_FOLD_HELD, /* the held runs' gradients added in their order onto bucket `bucket` of the sums (EARLY's;
                          * after its WAIT), on a stream of the chain's own */
    PPRT_DOPT_EARLY, /* after BEGIN (and HOLD): this step has `runs` runs here; the last of them folds its gradients
                      * bucket by bucket, bucket b elements [bound[b], bound[b + 1]) of the sums (whole weights,
                      * bound[0] 0, bound[n_buckets] the sums' size), each right after the last of its steps that
                      * writes a gradient of the bucket. Out: addr, the flat sums in device memory (`device`'s),
                      * sums_bytes their size; done, the buckets whose fold comes before the run's last step */
    PPRT_DOPT_WAIT,  /* until the last run's fold of bucket `bucket` is complete on the device (fails where the run
                      * failed or CANCEL came first) */
    PPRT_DOPT_CANCEL, /* the step's runs ended without the last one (a failure elsewhere): every WAIT fails */
} pprt_dopt_kind;

typedef struct pprt_dopt_param {
    size_t off;       /* its gradient's byte offset in the stage's outgoing message */
    int64_t numel;
    float *w, *m, *v; /* host copies (BIND reads, GET writes; m, v NULL where the optimizer keeps none) */
    int n_dst;
    void *dst[PPRT_DOPT_DST]; /* the weight's bytes in the weight spaces of the executors that read it (ADDR's) */
} pprt_dopt_param;

typedef struct pprt_dopt_call {
    pprt_dopt_kind kind;
    int tensor;                /* ADDR */
    void *addr;
    int device;
    const struct pprt_mem_ops *mem; /* ADDR: out */
    int n_params;              /* BIND (x copies them), GET (the same list, the same order) */
    pprt_dopt_param *params;
    int buffers;               /* BIND: pp_optim_buffers: 0 (plain SGD), 1 (momentum), 2 (AdamW) */
    bool mean, unscale;        /* NORM: times inv (a mean over micro-batches), then times by */
    float inv, by;
    double *sq;                /* NORM: [n_params] out */
    bool clip;                 /* STEP */
    float c;
    pp_optstep k;              /* STEP: n is the executor's (its flat buffer's) */
    size_t bytes;              /* out: bytes that crossed between host and device (BIND, GET) */
    size_t sums_bytes;         /* EARLY: out */
    int runs;                  /* EARLY */
    int n_buckets;             /* EARLY */
    const int64_t *bound;      /* EARLY: [n_buckets + 1] elements of the flat sums, each a weight's first */
    int bucket;                /* WAIT, FOLD_HELD */
    int done;                  /* EARLY: out */
} pprt_dopt_call;

#endif
