/* early.h: a step's last run folding its gradients bucket by bucket (dopt.h
 * EARLY, WAIT, CANCEL), shared by the engine (exec_cuda.c) and the
 * emulator (emu.c).
 *
 * EARLY arms it with the chain's buckets: for each bucket the last step of
 * the stage's list with an operand in the outgoing message's bytes of one
 * of the bucket's gradients (any operand, read or written: a step that only
 * reads a gradient makes it no later than needed, never too early). The run
 * that takes the step's count of runs to zero issues each bucket's fold
 * right after that step and marks the bucket ready: the engine once its
 * fold is launched and an event recorded behind it, the emulator once the
 * fold is done. WAIT, from the chain's thread, blocks until the bucket is
 * ready or the run has ended without it (a failed run, CANCEL). */
#ifndef PPRT_CUDA_EARLY_H
#define PPRT_CUDA_EARLY_H

#include <pthread.h>
#include <stdbool.h>

#include "cuplan.h"

typedef struct pcu_early {
    int n, cap;            /* buckets armed (0: none); allocated */
    int done;              /* of them, folded before the last step (dopt.h EARLY's done) */
    int64_t *bound;        /* [n + 1] elements of the flat sums */
    int *after;            /* [n] the bucket's fold follows this step (-1: before the first) */
    unsigned char *ready;  /* [n] */
    int runs;              /* the step's runs not yet begun here */
    bool on;               /* the run under way is the step's last: it folds by bucket */
    int ended;             /* 0 while the last run may still come; 1 it ended, 2 it failed or never came */
    bool init;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pcu_early;

/* EARLY: the buckets of c checked against the weights' flat layout (off[np], T elements) and each one's step in
 * pl, where they differ from the last step's (*changed); c->done set. stage: for messages. */
pp_status pcu_early_arm(pcu_early *e, const pcu_plan *pl, const pprt_dopt_param *ps, const int64_t *off, int np,
                        int64_t T, pprt_dopt_call *c, int stage, bool *changed, pp_err *err);
/* A run begins: on set where it is the armed step's last. */
void pcu_early_begin(pcu_early *e);
void pcu_early_ready(pcu_early *e, int b);
/* The last run ended (ok) or failed, or CANCEL (ok false): waiters wake. */
void pcu_early_end(pcu_early *e, bool ok);
pp_status pcu_early_wait(pcu_early *e, int b, int stage, pp_err *err);
void pcu_early_free(pcu_early *e);

#endif
