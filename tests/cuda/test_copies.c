/* test_copies.c: the CUDA planner's widened strided copies (plan_cuda.c's
 * perm_widen: dims merged, 16 bytes a thread where aligned) against the
 * copies as given (--cuda-wide-copies off), without a GPU.
 *   test_copies [--min-wide N] [--stride-views] PLAN...
 * (--stride-views: both plannings with --cuda-stride-views on, so the copies
 * that read through a folded view are the ones compared)
 * For every stage of each plan, the step list is built twice, wide and
 * narrow; the two must have the same steps but for the strided copies'
 * parameters, both must pass the lint, and every strided copy is run both
 * ways (every thread, through the kernel function the GPU runs) on random
 * source bytes (gather indices in range, a few out of range) into
 * destinations filled alike: the destination bytes and the error word must
 * agree. Fails also when fewer than N copies were widened over all plans
 * (so a change that stops widening is seen). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuplan.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static int failures;

static void *alloc(uint64_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 16) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Runs copy step s over fresh operand buffers (source and indices from the
 * seed, destination filled with 0xa5); returns the destination and *err. */
static unsigned char *run(const pcu_step *s, uint64_t seed, int *err) {
    const pcu_perm *k = &s->u.perm;
    const int out = k->gdim >= 0 ? 2 : 1;
    void *op[PCU_KERNEL_OPS] = {NULL};
    rng = seed;
    for (int q = 0; q < s->n_ops; q++) {
        const uint64_t bytes = s->ops[q].bytes;
        unsigned char *b = alloc(bytes);
        op[q] = b;
        if (q == out) {
            memset(b, 0xa5, bytes);
        } else if (k->gdim >= 0 && q == 1) { /* indices: in range, negative from the end, 1 in 64 outside */
            const int es = pcu_tsize(k->gidx_t);
            for (uint64_t i = 0; i + (uint64_t)es <= bytes; i += (uint64_t)es) {
                const uint64_t r = next();
                int64_t v = (int64_t)(r % (uint64_t)(k->glen > 0 ? k->glen : 1));
                if ((r >> 32) % 3 == 0) v -= k->glen;
                if ((r >> 40) % 64 == 0) v = k->glen + 1;
                if (es == 8) memcpy(b + i, &v, 8);
                else {
                    const int32_t v32 = (int32_t)v;
                    memcpy(b + i, &v32, 4);
                }
            }
        } else {
            for (uint64_t i = 0; i < bytes; i++) b[i] = (unsigned char)(next() >> 56);
        }
    }
    *err = 0;
    for (int64_t i = 0; i < s->threads; i++) pcu_kernel_thread(s, op, err, i);
    for (int q = 0; q < s->n_ops; q++)
        if (q != out) free(op[q]);
    return op[out];
}

int main(int argc, char **argv) {
    int min_wide = 0, wide_total = 0;
    bool views = false;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--min-wide") && a + 1 < argc) {
            min_wide = atoi(argv[++a]);
            continue;
        }
        if (!strcmp(argv[a], "--stride-views")) {
            views = true;
            continue;
        }
        pprt_plan *p = NULL;
        pp_err e = {0};
        if (pprt_plan_load(argv[a], NULL, &p, &e) != PP_OK) {
            fprintf(stderr, "FAIL %s: %s\n", argv[a], e.msg);
            return 1;
        }
        int copies = 0, wide = 0, merged = 0;
        for (int si = 0; si < p->n_stages; si++) {
            if (pprt_stage_weights(p, si, &e) != PP_OK) {
                fprintf(stderr, "FAIL %s stage %d: %s\n", argv[a], si, e.msg);
                failures++;
                continue;
            }
            pcu_plan w, n;
            const pcu_plan_opts wo = {.stride_views = views}, no = {.narrow_copies = true, .stride_views = views};
            if (pcu_plan_build(p, &p->stages[si], &wo, &w, &e) != PP_OK || pcu_lint(&w, &e) != PP_OK) {
                fprintf(stderr, "FAIL %s stage %d (wide copies): %s\n", argv[a], si, e.msg);
                failures++;
                continue;
            }
            if (pcu_plan_build(p, &p->stages[si], &no, &n, &e) != PP_OK || pcu_lint(&n, &e) != PP_OK) {
                fprintf(stderr, "FAIL %s stage %d (narrow copies): %s\n", argv[a], si, e.msg);
                failures++;
                pcu_plan_free(&w);
                continue;
            }
            if (w.n_steps != n.n_steps) {
                fprintf(stderr, "FAIL %s stage %d: %d steps wide, %d narrow\n", argv[a], si, w.n_steps, n.n_steps);
                failures++;
            }
            for (int i = 0; i < w.n_steps && i < n.n_steps; i++) {
                const pcu_step *sw = &w.steps[i], *sn = &n.steps[i];
                if (sw->kind != sn->kind || sw->node != sn->node || sw->n_ops != sn->n_ops ||
                    (sw->kind == PCU_S_KERNEL && sw->kernel != sn->kernel)) {
                    fprintf(stderr, "FAIL %s stage %d step %d: not the same step wide and narrow\n", argv[a], si, i);
                    failures++;
                    break;
                }
                if (sw->kind != PCU_S_KERNEL || sw->kernel != PCU_K_PERM) continue;
                copies++;
                wide += sw->u.perm.esize == 16;
                merged += sw->u.perm.rank < sn->u.perm.rank;
                const uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
                int ew = 0, en = 0;
                unsigned char *yw = run(sw, seed, &ew), *yn = run(sn, seed, &en);
                const int out = sw->u.perm.gdim >= 0 ? 2 : 1;
                if (ew != en || memcmp(yw, yn, sw->ops[out].bytes)) {
                    const char *name = sw->node >= 0 ? p->stages[si].nodes[sw->node].name : "(pass-through)";
                    fprintf(stderr, "FAIL %s stage %d step %d (node '%s'): the widened copy (%d dims, %d-byte "
                            "elements) differs from the copy as given (%d dims, %d-byte elements)%s\n", argv[a], si, i,
                            name, sw->u.perm.rank, sw->u.perm.esize, sn->u.perm.rank, sn->u.perm.esize,
                            ew != en ? ": error word" : "");
                    failures++;
                }
                free(yw);
                free(yn);
            }
            pcu_plan_free(&w);
            pcu_plan_free(&n);
        }
        printf("test_copies: %s: %d strided copies, %d widened to 16 bytes a thread, %d with dims merged\n", argv[a],
               copies, wide, merged);
        wide_total += wide;
        pprt_plan_free(p);
    }
    if (wide_total < min_wide) {
        fprintf(stderr, "FAIL: %d copies widened over all plans, want at least %d\n", wide_total, min_wide);
        failures++;
    }
    printf("test_copies: %d failures\n", failures);
    return failures ? 1 : 0;
}
