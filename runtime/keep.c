/* keep.c: see keep.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keep.h"

typedef struct slot {
    const pprt_exec_ops *ops;
    pprt_exec *x;
    pprt_exec_cfg cfg;     /* what x was made with */
    unsigned long version; /* the weights' version x has read */
    long cap0;             /* x's graph captures when it was lent */
    pprt_keep_counts c;
} slot;

struct pprt_keeper {
    int stages, replicas;
    bool fresh;
    unsigned long version; /* bumped by pprt_keeper_changed */
    slot *s;
};

pp_status pprt_keeper_new(const pprt_plan *p, int replicas, bool fresh, pprt_keeper **out, pp_err *err) {
    *out = NULL;
    pprt_keeper *k = calloc(1, sizeof *k);
    const int stages = p->n_stages + p->n_wstages, R = replicas > 1 ? replicas : 1;
    if (k) k->s = calloc((size_t)stages * (size_t)R, sizeof *k->s);
    if (!k || !k->s) {
        free(k);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    k->stages = stages, k->replicas = R, k->fresh = fresh, k->version = 1;
    *out = k;
    return PP_OK;
}

void pprt_keeper_free(pprt_keeper *k) {
    if (!k) return;
    for (int i = 0; i < k->stages * k->replicas; i++)
        if (k->s[i].x) k->s[i].ops->destroy(k->s[i].x);
    free(k->s);
    free(k);
}

void pprt_keeper_changed(pprt_keeper *k) {
    if (k) k->version++;
}

void pprt_keeper_counts(pprt_keeper *k, pprt_keep_counts *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; k && i < k->stages * k->replicas; i++) {
        slot *s = &k->s[i];
        c->created += s->c.created, c->reloaded += s->c.reloaded, c->refused += s->c.refused;
        c->reload_s += s->c.reload_s, c->create_s += s->c.create_s, c->captures += s->c.captures;
        c->uploads += s->c.uploads;
        memset(&s->c, 0, sizeof s->c);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool same_cfg(const pprt_exec_cfg *a, const pprt_exec_cfg *b) {
    return a->threads == b->threads && a->precision == b->precision && a->device == b->device &&
           a->node_times == b->node_times;
}

static long captures_of(const pprt_exec_ops *ops, const pprt_exec *x) {
    if (!ops->counts || !x) return 0;
    pprt_exec_counts c = {0};
    ops->counts(x, &c);
    return c.graph_captures;
}

static double uploads_of(const pprt_exec_ops *ops, const pprt_exec *x) {
    if (!ops->counts || !x) return 0;
    pprt_exec_counts c = {0};
    ops->counts(x, &c);
    return c.weight_upload_bytes;
}

static slot *slot_of(pprt_keeper *k, int stage, int replica) {
    if (!k || stage < 0 || stage >= k->stages || replica < 0 || replica >= k->replicas) return NULL;
    return &k->s[(size_t)replica * (size_t)k->stages + (size_t)stage];
}

pp_status pprt_keeper_exec(pprt_keeper *k, const pprt_exec_ops *ops, const pprt_plan *p, int stage, int replica,
                           const pprt_exec_cfg *cfg, pprt_exec **x, pp_err *err) {
    *x = NULL;
    if (!k) return ops->create(p, &p->stages[stage], cfg, x, err);
    slot *s = slot_of(k, stage, replica);
    if (!s)
        return PP_FAIL(err, PP_ERUNTIME, "internal: no kept executor for stage %d of replica %d (%d stages, %d "
                       "replicas)", stage, replica, k->stages, k->replicas);
    if (s->x && (s->ops != ops || !same_cfg(&s->cfg, cfg))) { /* made for another run: made again */
        s->ops->destroy(s->x);
        s->x = NULL;
    }
    if (s->x && s->version != k->version) {
        pp_status r = PP_OK;
        const double up0 = uploads_of(s->ops, s->x);
        if (ops->reload) {
            pp_err e = {0};
            const double t0 = now_s();
            r = ops->reload(s->x, k->version, &e);
            s->c.reload_s += now_s() - t0;
            if (r != PP_OK && r != PP_EUNSUP) return PP_WRAP(err, &e, r, "reloading its weights: %s", e.msg);
        }
        if (r == PP_OK) s->c.reloaded++, s->version = k->version, s->c.uploads += uploads_of(ops, s->x) - up0;
        else { /* it cannot re-read them in place: a fresh one */
            s->c.refused++;
            ops->destroy(s->x);
            s->x = NULL;
        }
    }
    if (!s->x) {
        const double t0 = now_s();
        pprt_exec_cfg at = *cfg;
        at.weights_version = k->version; /* (same_cfg leaves it out: a reload moves it on) */
        const pp_status r = ops->create(p, &p->stages[stage], &at, &s->x, err);
        s->c.create_s += now_s() - t0;
        PP_TRY(r);
        s->ops = ops, s->cfg = *cfg, s->version = k->version;
        s->c.created++;
        s->c.uploads += uploads_of(ops, s->x);
    }
    s->cap0 = captures_of(ops, s->x);
    *x = s->x;
    return PP_OK;
}

pprt_exec *pprt_keeper_peek(pprt_keeper *k, int stage, int replica, const pprt_exec_ops **ops) {
    slot *s = slot_of(k, stage, replica);
    if (!s || !s->x || (k && k->fresh)) return NULL;
    *ops = s->ops;
    return s->x;
}

void pprt_keeper_done(pprt_keeper *k, const pprt_exec_ops *ops, int stage, int replica, pprt_exec *x) {
    if (!x) return;
    slot *s = slot_of(k, stage, replica);
    if (!s || s->x != x) { /* not the keeper's */
        ops->destroy(x);
        return;
    }
    s->c.captures += captures_of(ops, x) - s->cap0;
    if (!k->fresh) return;
    ops->destroy(x);
    s->x = NULL;
}
