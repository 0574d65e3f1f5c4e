/* exec.h: the stage executor interface. An executor owns what one stage needs
 * to run a micro-batch (arena, scratch, bound tensor pointers) and runs the
 * stage's kernels from an incoming message into an outgoing one.
 *
 * Each backend (backend.h, backends.def) has one: runtime/cpu/exec_ref.c (the
 * reference kernels), runtime/dnnl/exec.c (oneDNN and pprt's own CPU
 * kernels), runtime/cuda/exec_cuda.c (a GPU) and runtime/cuda/emu.c
 * (cuda-emu: the CUDA step list on the host). Drivers see only this table,
 * through the registry. */
#ifndef PPRT_EXEC_H
#define PPRT_EXEC_H

#include "dopt.h"
#include "kernels.h"
#include "pprt.h"

typedef struct pprt_exec pprt_exec;

typedef struct pprt_exec_ops {
    const char *name;
    /* Called on the thread that will run the stage (the OpenMP threads oneDNN
     * starts belong to it and inherit its cores). */
    pp_status (*create)(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                        pp_err *err);
    /* in_msg holds st->in, out_msg receives st->out (layouts in pprt_stage). */
    pp_status (*run)(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err);
    void (*destroy)(pprt_exec *x);
    /* Seconds spent in each node over all runs so far (st->n_nodes entries),
     * or NULL when the executor does not measure them. */
    const double *(*node_seconds)(const pprt_exec *x);
    /* What it made of the stage (every field), or NULL: every node on the
     * reference kernels (pprt_exec_counts_of fills that in). */
    void (*counts)(const pprt_exec *x, pprt_exec_counts *c);
    /* The host bytes of the stage's weights that vary (pprt_tdesc.varies:
     * the trainer binds their data to its own buffers and updates them
     * between runs) changed: prepare again from them exactly what create
     * prepared (reorders, packs, uploads), nothing else; on the stage's
     * thread, between runs. version: the weights' version (increasing):
     * executors that share what they prepared (oneDNN's reordered weights
     * across replicas, wshare.c) redo a shared one once per version.
     * PP_EUNSUP: x derived something from their values that it cannot redo
     * in place (the caller makes a fresh executor; keep.h). NULL: it reads
     * them in place, nothing to do (the reference executor). */
    pp_status (*reload)(pprt_exec *x, unsigned long version, pp_err *err);
    /* The device optimizer (dopt.h), between runs; NULL: the executor has
     * none (the host's update). PP_EUNSUP: not for this executor (its plan
     * folds a trained weight's value, its messages are in host memory). */
    pp_status (*dopt)(pprt_exec *x, pprt_dopt_call *c, pp_err *err);
} pprt_exec_ops;

/* ops->counts of x, or the all-reference counts of stage st without it. */
void pprt_exec_counts_of(const pprt_exec_ops *ops, const pprt_exec *x, const pprt_stage *st,
                         pprt_exec_counts *c);

/* Shared by the CPU executors (runtime/cpu/exec_ref.c). pprt_ref_node runs
 * node n of stage st on its reference kernel, each tensor at ptr[tensor id];
 * tin and tout have room for PP_MAX_INPUTS and PP_MAX_OUTPUTS tensors.
 * pprt_pass_through copies the received tensors that st sends on unchanged. */
pp_status pprt_ref_node(const pprt_plan *p, const pprt_stage *st, const pprt_node *n, void *const *ptr,
                        pprt_tensor *tin, pprt_tensor *tout, pprt_scratch *scratch, pp_err *err);
void pprt_pass_through(const pprt_stage *st, const void *in_msg, void *out_msg);

#endif
