/* stash.c: see stash.h. */
#include <stdlib.h>
#include <string.h>

#include "stash.h"
#include "pool.h"

static size_t tail_off(const pprt_msg_layout *l, int n_stash) { return n_stash ? l->off[l->n - n_stash] : l->bytes; }

pp_status pprt_stash_new(const pprt_plan *p, int d, pprt_stash **out, pp_err *err) {
    *out = NULL;
    const int P = p->train_devices;
    const pprt_stage *f = &p->stages[d], *b = &p->stages[2 * P - 1 - d];
    if (!f->n_stash) return PP_OK;
    const size_t fo = tail_off(&f->out, f->n_stash), bo = tail_off(&b->in, b->n_stash);
    if (f->out.bytes - fo != b->in.bytes - bo)
        return PP_FAIL(err, PP_EINVAL, "device %d's stash: %zu bytes after stage %d, %zu before stage %d", d,
                       f->out.bytes - fo, d, b->in.bytes - bo, 2 * P - 1 - d);
    pprt_stash *s = calloc(1, sizeof *s);
    if (!s) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->bytes = f->out.bytes - fo, s->out_off = fo, s->in_off = bo, s->f = f;
    *out = s;
    return PP_OK;
}

pp_status pprt_stash_push(pprt_stash *s, const void *in_msg, const void *out_msg, pp_err *err) {
    void *e = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_free) e = s->free_list[--s->n_free];
    pthread_mutex_unlock(&s->mu);
    if (!e) e = pprt_pool_alloc(s->bytes);
    if (!e) return PP_FAIL(err, PP_ENOMEM, "out of memory for a stash of %zu bytes", s->bytes);
    const pprt_stage *f = s->f;
    for (int j = f->out.n - f->n_stash; j < f->out.n; j++) {
        const pprt_tdesc *t = f->out.t[j];
        const char *src = t->kind == PPRT_RECV ? (const char *)in_msg + f->in.off[t->offset]
                                               : (const char *)out_msg + f->out.off[t->offset];
        memcpy((char *)e + (f->out.off[j] - s->out_off), src, t->nbytes);
    }
    pthread_mutex_lock(&s->mu);
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 4;
        void **q = malloc(sizeof *q * (size_t)cap);
        if (!q) {
            pthread_mutex_unlock(&s->mu);
            pprt_pool_free(e);
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        for (int i = 0; i < s->n; i++) q[i] = s->q[(s->head + i) % s->cap];
        free(s->q);
        s->q = q, s->cap = cap, s->head = 0;
    }
    s->q[(s->head + s->n++) % s->cap] = e;
    if (s->n > s->peak) s->peak = s->n;
    pthread_mutex_unlock(&s->mu);
    return PP_OK;
}

pp_status pprt_stash_pop(pprt_stash *s, void *in_msg, pp_err *err) {
    pthread_mutex_lock(&s->mu);
    void *e = s->n ? s->q[s->head] : NULL;
    if (e) s->head = (s->head + 1) % s->cap, s->n--;
    pthread_mutex_unlock(&s->mu);
    if (!e) return PP_FAIL(err, PP_ERUNTIME, "a backward stage found its device's stash empty");
    memcpy((char *)in_msg + s->in_off, e, s->bytes);
    pthread_mutex_lock(&s->mu);
    if (s->n_free == s->free_cap) {
        const int cap = s->free_cap ? 2 * s->free_cap : 4;
        void **fl = realloc(s->free_list, sizeof *fl * (size_t)cap);
        if (fl) s->free_list = fl, s->free_cap = cap;
    }
    if (s->n_free < s->free_cap) s->free_list[s->n_free++] = e, e = NULL;
    pthread_mutex_unlock(&s->mu);
    pprt_pool_free(e);
    return PP_OK;
}

void pprt_stash_free(pprt_stash *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) pprt_pool_free(s->q[(s->head + i) % s->cap]);
    for (int i = 0; i < s->n_free; i++) pprt_pool_free(s->free_list[i]);
    free(s->q);
    free(s->free_list);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
