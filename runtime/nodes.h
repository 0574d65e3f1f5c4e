/* nodes.h: what the host executors share per node, so that none keeps its
 * own copy: the clock; running a stage's nodes in order, each one timed
 * (exec.h's node_seconds, pprt --profile), with the nodes the executor does
 * not run itself handed to the fallback backend (backend.h: the reference
 * kernels); and the residency of the weights a --ref-weights plan reads from
 * the model file, node by node. */
#ifndef PPRT_NODES_H
#define PPRT_NODES_H

#include "backend.h"

/* Seconds on the monotonic clock. */
double pprt_now_s(void);

/* Runs node ni itself and sets *ran, or leaves *ran false for the fallback. */
typedef pp_status pprt_own_node_fn(void *ctx, int ni, bool *ran, pp_err *err);

typedef struct pprt_node_runner {
    const pprt_plan *p;
    const pprt_stage *st;
    void *const *ptr;             /* tensor id -> bytes, as the executor binds them */
    const bool *skip;             /* per node: runs inside another node's kernel (NULL: none do) */
    pprt_own_node_fn *own;        /* NULL: every node on the fallback */
    void *ctx;                    /* own's */
    const pprt_backend *fallback; /* pprt_backend_fallback() */
    pprt_node_ctx fb;             /* the fallback's scratch for this stage */
    double *node_s;               /* per node: seconds summed over the runs */
} pprt_node_runner;

/* A runner over stage st of plan p with the tensors at ptr (own, ctx and
 * skip for the caller to set); pprt_node_runner_free frees what it holds. */
pp_status pprt_node_runner_init(pprt_node_runner *r, const pprt_plan *p, const pprt_stage *st, void *const *ptr,
                                pp_err *err);
void pprt_node_runner_free(pprt_node_runner *r);
/* Run every node of the stage once, in order. */
pp_status pprt_run_nodes(pprt_node_runner *r, pp_err *err);

/* Node n's weights addressable (pprt_stage_weight: an EXTERNAL one lying
 * misaligned in its file is copied) and ptr[] pointing at them; a weight
 * ptr[] already points at is left as it is. */
pp_status pprt_node_weights(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void **ptr, pp_err *err);
/* Free the copies of node n's weights that no other node reads (cons[tid]
 * readers in the stage) and that read(ctx, bytes, nbytes) says the executor
 * no longer reads (it made its own copy, as a oneDNN reorder does); ptr[] of
 * each back to NULL. So a stage holds one copy of its weights, never two. */
void pprt_node_weights_release(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void **ptr,
                               const int *cons, bool (*read)(void *ctx, const void *bytes, size_t nbytes), void *ctx);

#endif
