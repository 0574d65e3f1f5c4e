/* optim.h: a training plan's optimizer and its hyper-parameters (issue 55):
 * ppcc --train records them in the plan (plan.proto's Optimizer), pprt
 * trains with them, and an option given to pprt overrides the plan's. One
 * option table (pp_optim_table) serves both tools' command lines, so a row
 * is written once; the plan loader checks a plan's values against the
 * same rows' ranges. docs/training.md tells the whole. */
#ifndef PP_OPTIM_H
#define PP_OPTIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"

typedef enum { PP_OPTIM_SGD = 0, PP_OPTIM_ADAMW = 1 } pp_optim_kind;
typedef enum { PP_LR_CONSTANT = 0, PP_LR_COSINE = 1 } pp_lr_schedule;
/* ppcc --train --precision: the products' and their gradients' storage type
 * (passes/precision.c); the plan records it with the optimizer */
typedef enum { PP_PREC_F32 = 0, PP_PREC_BF16 = 1, PP_PREC_FP16 = 2 } pp_train_precision;

#define PP_LOSS_SCALE_DYNAMIC_INIT 65536.0 /* PyTorch GradScaler's defaults */
#define PP_LOSS_SCALE_GROWTH_STEPS 2000
#define PP_LOSS_SCALE_GROWTH 2.0
#define PP_LOSS_SCALE_BACKOFF 0.5
/* the loss gradient's seed in a training plan: a weight, f32 1 (ppcc --train), that pprt binds to the scale */
#define PP_LOSS_SCALE_NAME "/loss/scale"

typedef struct pp_optim {
    int kind;              /* pp_optim_kind */
    double lr, momentum;   /* momentum: SGD's */
    bool nesterov;
    double weight_decay;   /* SGD: L2 added to the gradient; AdamW: decoupled */
    double beta1, beta2, eps;
    double clip_norm;      /* > 0: the gradients scaled to this global L2 norm when over it */
    int schedule;          /* pp_lr_schedule: cosine from lr down to lr_min after the warm-up */
    int64_t warmup_steps;  /* linear from lr / warmup_steps to lr over the first steps */
    double lr_min;
    /* the loss gradient's seed: 0 none (1); > 0 a static scale S; with
     * dynamic_scale the initial scale (halved on an overflow, the step
     * skipped; doubled after PP_LOSS_SCALE_GROWTH_STEPS clean steps) */
    double loss_scale;
    bool dynamic_scale;
    /* dynamic scaling's rule, GradScaler's growth_factor, backoff_factor and
     * growth_interval (2, 0.5, 2000 by default) */
    double scale_growth, scale_backoff;
    int64_t scale_interval;
    /* pp_train_precision: ppcc --train --precision, recorded in the plan; no
     * row of the option table (pprt cannot change it: the plan's graph has it) */
    int precision;
    uint32_t given;        /* bit k: row k of pp_optim_table was given on the command line */
} pp_optim;

/* The defaults: sgd, lr 0.01, AdamW's betas 0.9, 0.999, eps 1e-8, no loss
 * scale (dynamic's rule GradScaler's: x2 after 2000 clean steps, x0.5), f32. */
void pp_optim_init(pp_optim *o);
/* The option rows, over a pp_optim. */
const pp_opt *pp_optim_table(int *n);
/* Every field inside its row's range (a plan's values: `what` names whose),
 * PP_EINVAL naming the first that is not: "WHAT: lr: expected 0..1e6, got -1". */
pp_status pp_optim_check(const pp_optim *o, const char *what, pp_err *err);
/* The optimizer's state buffers per weight: 0 (SGD without momentum), 1 (SGD
 * with momentum), 2 (AdamW's two moments). */
int pp_optim_buffers(const pp_optim *o);
/* "f32", "bf16", "fp16" (precision out of range: "?"). */
const char *pp_precision_name(int precision);
/* One line for the report and pprt --info: "adamw, lr 0.004, betas 0.9 0.999, ..." */
void pp_optim_describe(const pp_optim *o, char *buf, size_t cap);
/* pprt: *o = the plan's values, but for every row the command line gave
 * (cli->given), whose value wins; with note not NULL, one line there per
 * such row whose value differs from the plan's. */
void pp_optim_merge(pp_optim *o, const pp_optim *plan, const pp_optim *cli, FILE *note);

#endif
