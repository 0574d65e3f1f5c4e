/* conv_steps.h: each convolution step of a plan as the CUDA planner makes it
 * with the executors' default options (test_dnn's checks and --tune,
 * test_tactics --sigs), or any kind of step under given options (test_dnn's
 * fused attention steps). */
#ifndef PP_CONV_STEPS_H
#define PP_CONV_STEPS_H

#include <stdio.h>

#include "runtime/cuda/cuplan.h"

/* fn(step, its node's name, ctx) for every step of kind `kind` (PCU_S_*; with kernel >= 0 only that own
 * kernel) of every stage of plan `path`, in order, planned with options o. Returns -1 when the plan does not
 * load, else the stages that did not plan (each named on stderr after `who`; the others' steps still
 * visited). */
static inline int pcu_each_step(const char *path, const char *who, pcu_plan_opts o, int kind, int kernel,
                                void (*fn)(const pcu_step *s, const char *node, void *ctx), void *ctx) {
    pprt_plan *p = NULL;
    pp_err e = {0};
    if (pprt_plan_load(path, NULL, &p, &e) != PP_OK) {
        fprintf(stderr, "%s %s: %s\n", who, path, e.msg);
        return -1;
    }
    int bad = 0;
    /* the layout the executors take by default (--cuda-layout auto: a half plan's convolutions NHWC) */
    o.nhwc = pcu_layout_nhwc(p, PCU_LAYOUT_AUTO);
    for (int s = 0; s < p->n_stages; s++) {
        pcu_plan pl;
        if (pcu_plan_build(p, &p->stages[s], &o, &pl, &e) != PP_OK) {
            fprintf(stderr, "%s %s stage %d: %s\n", who, path, s, e.msg);
            e = (pp_err){0};
            bad++;
            continue;
        }
        for (int i = 0; i < pl.n_steps; i++)
            if (pl.steps[i].kind == kind && (kernel < 0 || pl.steps[i].kernel == kernel))
                fn(&pl.steps[i], p->stages[s].nodes[pl.steps[i].node].name, ctx);
        pcu_plan_free(&pl);
    }
    pprt_plan_free(p);
    return bad;
}

/* fn(its convolution, its node's name, ctx) for every convolution step of every stage of plan `path` with the
 * executors' default options (pcu_each_step) */
typedef struct pcu_conv_visit {
    void (*fn)(const pcu_conv *c, const char *node, void *ctx);
    void *ctx;
} pcu_conv_visit;
static inline void pcu_conv_visit_step(const pcu_step *s, const char *node, void *ctx) {
    const pcu_conv_visit *v = ctx;
    v->fn(&s->u.conv, node, v->ctx);
}
static inline int pcu_each_conv(const char *path, const char *who,
                                void (*fn)(const pcu_conv *c, const char *node, void *ctx), void *ctx) {
    pcu_conv_visit v = {fn, ctx};
    return pcu_each_step(path, who, (pcu_plan_opts){0}, PCU_S_CONV, -1, pcu_conv_visit_step, &v);
}

#endif
