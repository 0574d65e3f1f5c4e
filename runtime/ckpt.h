/* ckpt.h: training checkpoints (pprt --checkpoint DIR --save-every N, --resume DIR): DIR/state.json (the step, the
 * optimizer updates, the optimizer's kind and buffers, the loss scale, the seed, the weights' names in order) and
 * NAME.npy, NAME.m.npy, NAME.v.npy per weight (its value and the optimizer's buffers that it keeps). A checkpoint
 * names weights, not stages, so one resumes on another split of the same model. Written whole or not at all
 * (DIR.tmp, then renamed over DIR, the previous one moved to DIR.old and removed); only folders that pprt wrote are
 * ever removed. docs/training.md tells the whole. */
#ifndef PPRT_CKPT_H
#define PPRT_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/base.h"

/* One trained weight as the trainer holds it: a[0] the value, a[1] and a[2] the optimizer's buffers (momentum, or
 * AdamW's two moments; NULL where the optimizer keeps none), numel floats each, of the shape `shape`. */
typedef struct pprt_ckpt_weight {
    const char *name;
    const pp_shape *shape;
    int64_t numel;
    float *a[3];
} pprt_ckpt_weight;

/* The trainer's state as a checkpoint sees it: pprt_ckpt_write reads it, pprt_ckpt_read fills the arrays, and the
 * loss scale and its clean-step count where the plan scales its loss (`scaled`). */
typedef struct pprt_ckpt {
    int n;
    const pprt_ckpt_weight *w;
    int optimizer, buffers; /* pp_optim_kind, pp_optim_buffers */
    uint64_t seed;          /* the run's --seed: a resume with another is warned about */
    bool scaled;
    double scale;
    int64_t growth;
} pprt_ckpt;

/* Before the first step: DIR is new, empty or a checkpoint's folder, and DIR.tmp and DIR.old (an interrupted save's)
 * hold what a save may remove; anything else refused with PP_EINVAL naming it, untouched. */
pp_status pprt_ckpt_dest_check(const char *dir, pp_err *err);
/* No two of the arrays a checkpoint holds (NAME, NAME.m, NAME.v) map to one file name (pp_file_name): weights 'x'
 * and 'x.m' under SGD with momentum would; PP_EINVAL naming both. */
pp_status pprt_ckpt_names_check(const pprt_ckpt *c, pp_err *err);
/* A checkpoint at `step` after `updates` optimizer updates, into DIR whole or not at all. */
pp_status pprt_ckpt_write(const pprt_ckpt *c, const char *dir, int64_t step, int64_t updates, pp_err *err);
/* A checkpoint read into c's arrays (and its loss scale): every field of state.json checked against c (counts, the
 * optimizer, its buffers, the weights' names in order) and every array's dtype and shape; PP_EINVAL naming the
 * culprit. *step and *updates receive the checkpoint's. */
pp_status pprt_ckpt_read(pprt_ckpt *c, const char *dir, int64_t *step, int64_t *updates, pp_err *err);

#endif
