/* conv_steps.h: each convolution step of a plan as the CUDA planner makes it
 * with the executors' default options (test_dnn's checks and --tune,
 * test_tactics --sigs). */
#ifndef PP_CONV_STEPS_H
#define PP_CONV_STEPS_H

#include <stdio.h>

#include "runtime/cuda/cuplan.h"

/* fn(its convolution, its node's name, ctx) for every convolution step of
 * every stage of plan `path`, in order. Returns -1 when the plan does not
 * load, else the stages that did not plan (each named on stderr after
 * `who`; the others' steps still visited). */
static inline int pcu_each_conv(const char *path, const char *who,
                                void (*fn)(const pcu_conv *c, const char *node, void *ctx), void *ctx) {
    pprt_plan *p = NULL;
    pp_err e = {0};
    if (pprt_plan_load(path, NULL, &p, &e) != PP_OK) {
        fprintf(stderr, "%s %s: %s\n", who, path, e.msg);
        return -1;
    }
    int bad = 0;
    for (int s = 0; s < p->n_stages; s++) {
        pcu_plan pl;
        /* the layout the executors take by default (--cuda-layout auto: a half plan's convolutions NHWC) */
        const pcu_plan_opts o = {.nhwc = pcu_layout_nhwc(p, PCU_LAYOUT_AUTO)};
        if (pcu_plan_build(p, &p->stages[s], &o, &pl, &e) != PP_OK) {
            fprintf(stderr, "%s %s stage %d: %s\n", who, path, s, e.msg);
            e = (pp_err){0};
            bad++;
            continue;
        }
        for (int i = 0; i < pl.n_steps; i++)
            if (pl.steps[i].kind == PCU_S_CONV) fn(&pl.steps[i].u.conv, p->stages[s].nodes[pl.steps[i].node].name, ctx);
        pcu_plan_free(&pl);
    }
    pprt_plan_free(p);
    return bad;
}

#endif
