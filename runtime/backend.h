/* backend.h: the backend registry. A backend is a table: its name, whether
 * it is built and usable on this machine, which nodes its own kernels run,
 * the executor that runs a stage on it (exec.h), where that executor wants
 * its boundary messages (a memory space, mem.h), and, for a backend that runs single nodes for the
 * others (the reference kernels), that entry point. Drivers and pprt's
 * command line ask the registry; nothing else names a backend.
 *
 * The built-in backends are the rows of backends.def, each defined in its
 * own folder; a program (a test) adds its own with pprt_backend_register.
 * A backend built as a shared module (module.h: cuda) has a stand-in row
 * whose load() opens the module on first use; the registry then hands out
 * the module's own table in its place.
 * docs/architecture.md describes the contracts. */
#ifndef PPRT_BACKEND_H
#define PPRT_BACKEND_H

#include <stdio.h>

#include "exec.h"
#include "mem.h"

/* What a backend that runs single nodes for others lends them: the
 * reference kernels' scratch and tensor views (one per executor). */
typedef struct pprt_node_ctx {
    pprt_scratch scratch;
    pprt_tensor tin[PP_MAX_INPUTS], tout[PP_MAX_OUTPUTS];
} pprt_node_ctx;

typedef struct pprt_backend {
    const char *name; /* as pprt --backend takes it: "ref", "dnnl" */
    const char *what; /* one line for pprt --backend list */
    /* NULL when usable on this machine; else why not (static text) */
    const char *(*unavailable)(void);
    /* Whether node n of stage st may run on the backend's own kernels (its
     * op, element types and attributes; an executor may still decline it at
     * create and run it on the fallback). NULL: every node. */
    bool (*supports)(const pprt_plan *p, const pprt_stage *st, const pprt_node *n);
    /* How it runs nodes of op, in a few words for pprt --ops ("oneDNN conv",
     * "cuDNN", "own kernel"); NULL from it: the reference kernels (the
     * fallback). A NULL function: every op on its own kernels. */
    const char *(*route)(pp_op op);
    const pprt_exec_ops *exec;
    pprt_mem mem;       /* where its executor reads and writes messages */
    const pprt_mem_ops *space; /* for PPRT_MEM_DEVICE: that memory space (mem.h); NULL: host */
    bool multithreaded; /* its kernels use the stage's intra-op threads (else one core per stage) */
    /* Whether it takes --precision pr at all (NULL: f32 only), and in *here
     * whether this machine computes it (else the executor computes f32 and
     * pprt warns). */
    bool (*precision)(pprt_precision pr, bool *here);
    /* Extra lines for pprt --version (bf16, ISA ...), or NULL. */
    void (*describe)(FILE *f);
    /* Its own command-line options: rows of an option table (ir/args.h)
     * that pprt's parser, --help and "did you mean" read after pprt's own
     * (backends sharing one table point to it: it is read once). NULL:
     * none. */
    const struct pp_opt_table *opts;
    /* A host backend that runs single nodes for others (the fallback):
     * node n of stage st over the tensors at ptr[tensor id]; NULL otherwise. */
    pp_status (*run_node)(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void *const *ptr,
                          pprt_node_ctx *ctx, pp_err *err);
    /* A backend built as a shared module (module.h): this row is a stand-in
     * (name, what, unavailable, route, mem, opts only:
     * unavailable() answers without loading, NULL or why the module cannot
     * be found or failed to load) and load() opens the module once
     * and returns its table, or NULL with err naming the module's path and
     * the loader's words. NULL for a backend linked into pprt. */
    const struct pprt_backend *(*load)(pp_err *err);
} pprt_backend;

/* The registered backends, built-in ones first in backends.def's order. */
int pprt_backend_count(void);
const pprt_backend *pprt_backend_at(int i);
/* By name, or NULL. A module backend's module is loaded here (the name
 * was asked for: --backend, a stage's placement); when it cannot be, its
 * stand-in is returned, whose unavailable() says why. */
const pprt_backend *pprt_backend_find(const char *name);
/* The first available backend in backends.def's order (the default). */
const pprt_backend *pprt_backend_default(void);
/* The backend whose run_node others fall back to (the reference kernels). */
const pprt_backend *pprt_backend_fallback(void);
/* Add a backend (its table must outlive the program's use of it); a name
 * already taken is refused. Not thread-safe: call before running. */
pp_status pprt_backend_register(const pprt_backend *b, pp_err *err);
/* "ref, dnnl" (registered, available or not), into buf. */
void pprt_backend_names(char *buf, size_t n);

/* The backend that runs stage s of plan p: `override` (pprt --backend) if
 * not NULL, else the one ppcc --placement named for it ("cpu": the default
 * backend, when that runs on the host), else the default. A name this build
 * lacks, or a backend this machine cannot run, is an error naming the stage. */
pp_status pprt_stage_backend(const pprt_plan *p, int s, const pprt_backend *override, const pprt_backend **out,
                             pp_err *err);
/* The same without asking whether this machine can run it (under MPI a
 * rank asks only for its own stage, on its own host); a module backend's
 * module is loaded (a module that cannot be is an error naming it). */
pp_status pprt_stage_backend_resolve(const pprt_plan *p, int s, const pprt_backend *override, const pprt_backend **out,
                                     pp_err *err);

/* Where stage s runs on backend b: host memory, or its space and the
 * device the space picks (mem.h: the placement, --devices, the stage index
 * or, under MPI, the local rank local_rank; -1: one process). A training
 * plan's stages go by their device's index instead of their own: a
 * device's forward, backward and W stages share its GPU. */
pp_status pprt_stage_place(const pprt_plan *p, int s, const pprt_backend *b, int local_rank, pprt_place *out,
                           pp_err *err);
/* The same in one process for replica r of the threaded runtime (--replicas): its stages take the devices after
 * replica r - 1's (r x the plan's devices + stage s's index; replica 0's are pprt_stage_place's with -1). */
pp_status pprt_stage_place_replica(const pprt_plan *p, int s, const pprt_backend *b, int r, pprt_place *out,
                                   pp_err *err);
/* The space of backend b (host for a host backend). */
const pprt_mem_ops *pprt_backend_space(const pprt_backend *b);

void pprt_node_ctx_free(pprt_node_ctx *c);

#endif
