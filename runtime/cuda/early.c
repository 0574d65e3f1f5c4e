/* early.c: the step's last run folding by bucket (early.h). */
#include "early.h"

#include <stdlib.h>
#include <string.h>

/* The last step with an operand in the outgoing message's bytes [off, off + bytes), or -1. */
static int last_touch(const pcu_plan *pl, uint64_t off, uint64_t bytes) {
    const pcu_ref r = {PCU_SP_OUT, -1, off, bytes};
    for (int i = pl->n_steps - 1; i >= 0; i--)
        for (int k = 0; k < pl->steps[i].n_ops; k++)
            if (pcu_ref_meet(pl->steps[i].ops[k], r)) return i;
    return -1;
}

/* The buckets of c and each one's last step in pl (under e->mu); e->n 0 where they are refused. */
static pp_status find_steps(pcu_early *e, const pcu_plan *pl, const pprt_dopt_param *ps, const int64_t *off, int np,
                            const pprt_dopt_call *c, int stage, pp_err *err) {
    const int n = c->n_buckets;
    e->n = 0;
    if (n > e->cap) {
        int64_t *b = realloc(e->bound, (size_t)(n + 1) * sizeof *b);
        if (b) e->bound = b;
        int *a = realloc(e->after, (size_t)n * sizeof *a);
        if (a) e->after = a;
        unsigned char *r = realloc(e->ready, (size_t)n);
        if (r) e->ready = r;
        if (!b || !a || !r) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        e->cap = n;
    }
    memcpy(e->bound, c->bound, (size_t)(n + 1) * sizeof *e->bound);
    int p = 0;
    for (int b = 0; b < n; b++) {
        e->after[b] = -1;
        if (p >= np || off[p] != e->bound[b] || e->bound[b + 1] <= e->bound[b]) /* a bucket starts at a weight */
            return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d: bucket %d starts at element %lld, not a weight's",
                           stage, b, (long long)e->bound[b]);
        for (; p < np && off[p] < e->bound[b + 1]; p++) {
            const int s = last_touch(pl, ps[p].off, (uint64_t)ps[p].numel * sizeof(float));
            if (s > e->after[b]) e->after[b] = s;
        }
    }
    e->done = 0;
    for (int b = 0; b < n; b++) e->done += e->after[b] < pl->n_steps - 1;
    e->n = n;
    return PP_OK;
}

pp_status pcu_early_arm(pcu_early *e, const pcu_plan *pl, const pprt_dopt_param *ps, const int64_t *off, int np,
                        int64_t T, pprt_dopt_call *c, int stage, bool *changed, pp_err *err) {
    const int n = c->n_buckets;
    if (n < 1 || !c->bound || c->bound[0] != 0 || c->bound[n] != T || c->runs < 1)
        return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d: %d buckets of %lld elements over %d runs", stage, n,
                       (long long)T, c->runs);
    if (!e->init) {
        pthread_mutex_init(&e->mu, NULL), pthread_cond_init(&e->cv, NULL);
        e->init = true;
    }
    pthread_mutex_lock(&e->mu);
    /* the trainer's buckets are the same every step: their steps are found once */
    *changed = e->n != n || memcmp(e->bound, c->bound, (size_t)(n + 1) * sizeof *e->bound);
    const pp_status s = *changed ? find_steps(e, pl, ps, off, np, c, stage, err) : PP_OK;
    if (e->cap) memset(e->ready, 0, (size_t)e->cap);
    c->done = e->done;
    e->runs = c->runs, e->on = false, e->ended = 0;
    pthread_mutex_unlock(&e->mu);
    return s;
}

void pcu_early_begin(pcu_early *e) {
    if (!e->init) return;
    pthread_mutex_lock(&e->mu);
    e->on = e->n > 0 && e->runs > 0 && --e->runs == 0;
    pthread_mutex_unlock(&e->mu);
}

void pcu_early_ready(pcu_early *e, int b) {
    pthread_mutex_lock(&e->mu);
    e->ready[b] = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void pcu_early_end(pcu_early *e, bool ok) {
    if (!e->init) return;
    pthread_mutex_lock(&e->mu);
    if (!e->ended) e->ended = ok ? 1 : 2;
    e->on = false;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

pp_status pcu_early_wait(pcu_early *e, int b, int stage, pp_err *err) {
    if (!e->init || b < 0 || b >= e->n)
        return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d: WAIT for bucket %d of %d", stage, b, e->init ? e->n : 0);
    pthread_mutex_lock(&e->mu);
    while (!e->ready[b] && !e->ended) pthread_cond_wait(&e->cv, &e->mu);
    const bool ok = e->ready[b];
    pthread_mutex_unlock(&e->mu);
    if (!ok) return PP_FAIL(err, PP_ERUNTIME, "stage %d's last run of the step ended without its bucket %d", stage, b);
    return PP_OK;
}

void pcu_early_free(pcu_early *e) {
    if (e->init) pthread_mutex_destroy(&e->mu), pthread_cond_destroy(&e->cv);
    free(e->bound), free(e->after), free(e->ready);
    memset(e, 0, sizeof *e);
}
