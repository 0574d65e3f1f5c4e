/* stash.c: see stash.h. */
#include <stdlib.h>
#include <string.h>

#include "stash.h"
#include "pool.h"

static size_t tail_off(const pprt_msg_layout *l, int n_stash) { return n_stash ? l->off[l->n - n_stash] : l->bytes; }

/* Spare entries of `bytes` each, of one stash or shared by two (refs) */
typedef struct pprt_stash_pool {
    pthread_mutex_t mu;
    size_t bytes;
    void **free_list;
    int n_free, free_cap, refs;
    int made; /* entries allocated (each of bytes): the memory the pool took */
} pprt_stash_pool;

static pprt_stash_pool *pool_new(size_t bytes) {
    pprt_stash_pool *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->bytes = bytes, q->refs = 1;
    return q;
}

/* Stage fi's last n_out out slots into stage bi's last n_in in slots. */
static pp_status stash_between(const pprt_plan *p, int d, int fi, int n_out, int bi, int n_in, pprt_stash **out,
                               pp_err *err) {
    *out = NULL;
    const pprt_stage *f = &p->stages[fi], *b = &p->stages[bi];
    if (!n_out) return PP_OK;
    const size_t fo = tail_off(&f->out, n_out), bo = tail_off(&b->in, n_in);
    if (f->out.bytes - fo != b->in.bytes - bo)
        return PP_FAIL(err, PP_EINVAL, "device %d's stash: %zu bytes after stage %d, %zu before stage %d", d,
                       f->out.bytes - fo, fi, b->in.bytes - bo, bi);
    pprt_stash *s = calloc(1, sizeof *s);
    if (!s || !(s->pool = pool_new(f->out.bytes - fo))) {
        free(s);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->bytes = f->out.bytes - fo, s->out_off = fo, s->in_off = bo, s->f = f, s->first = f->out.n - n_out;
    s->fdev = s->bdev = s->edev = PPRT_ON_HOST; /* until pprt_stash_on says a stage is on a device */
    s->aligned = fo == bo && n_out == n_in;
    for (int j = 0; s->aligned && j < n_out; j++)
        s->aligned = f->out.off[s->first + j] == b->in.off[b->in.n - n_in + j];
    *out = s;
    return PP_OK;
}

pp_status pprt_stash_new(const pprt_plan *p, int d, pprt_stash **out, pp_err *err) {
    const int P = p->train_devices;
    return stash_between(p, d, d, p->stages[d].n_stash, 2 * P - 1 - d, p->stages[2 * P - 1 - d].n_stash, out, err);
}

pp_status pprt_stash_new_w(const pprt_plan *p, int d, pprt_stash **out, pp_err *err) {
    *out = NULL;
    if (!p->n_wstages) return PP_OK;
    const int P = p->train_devices, b = 2 * P - 1 - d, w = p->n_stages + d;
    return stash_between(p, d, b, p->stages[b].n_wkeep, w, p->stages[w].in.n, out, err);
}

/* Through: each stash tensor into its tail slot of out_msg where it is not there already; one more counted. */
static void push_through(pprt_stash *s, const void *in_msg, void *out_msg) {
    const pprt_stage *f = s->f;
    for (int j = s->first; j < f->out.n; j++) {
        const pprt_tdesc *t = f->out.t[j];
        const char *src = t->kind == PPRT_RECV ? (const char *)in_msg + f->in.off[t->offset]
                                               : (const char *)out_msg + f->out.off[t->offset];
        char *dst = (char *)out_msg + f->out.off[j];
        if (src != dst) memcpy(dst, src, t->nbytes);
    }
    pthread_mutex_lock(&s->mu);
    if (++s->n > s->peak) s->peak = s->n;
    pthread_mutex_unlock(&s->mu);
}

void pprt_stash_on(pprt_stash *s, const pprt_place *f, const pprt_place *b) {
    if (!s) return;
    const bool fh = pprt_place_is_host(f), bh = pprt_place_is_host(b);
    s->fmem = fh ? NULL : f->mem, s->bmem = bh ? NULL : b->mem;
    s->fdev = fh ? PPRT_ON_HOST : f->device, s->bdev = bh ? PPRT_ON_HOST : b->device;
    s->edev = !fh && !bh && f->mem == b->mem && f->device == b->device ? f->device : PPRT_ON_HOST;
}

/* The space that allocates the entries (NULL: the host's pool). */
static const pprt_mem_ops *entry_mem(const pprt_stash *s) { return s->fmem ? s->fmem : s->bmem; }

/* n bytes from src (at src_dev) to dst (at dst_dev): memcpy between host memory, else a copy of `mem` on a
 * side's stream st (on device sdev; with its event ev, both made at the side's first copy), waited for when `last`. */
static pp_status stash_copy(const pprt_mem_ops *mem, int sdev, pprt_stream **st, pprt_event **ev, void *dst,
                            int dst_dev, const void *src, int src_dev, size_t n, bool last, pp_err *err) {
    if (dst_dev == PPRT_ON_HOST && src_dev == PPRT_ON_HOST) {
        memcpy(dst, src, n);
        return PP_OK;
    }
    if (!*st) PP_TRY(mem->stream_new(sdev, st, err));
    if (!*ev) PP_TRY(mem->event_new(sdev, ev, err));
    PP_TRY(mem->copy(*st, dst, dst_dev, src, src_dev, n, err));
    if (!last) return PP_OK;
    PP_TRY(mem->record(*ev, *st, err));
    return mem->wait(*ev, err);
}

/* A spare entry of the pool's, else a new one of its size */
static void *entry_alloc(pprt_stash *s) {
    pprt_stash_pool *q = s->pool;
    void *e = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->n_free) e = q->free_list[--q->n_free];
    pthread_mutex_unlock(&q->mu);
    if (e) return e;
    const pprt_mem_ops *m = entry_mem(s);
    pp_err err = {0};
    if (!m) e = pprt_pool_alloc(q->bytes);
    else if ((s->edev == PPRT_ON_HOST ? m->alloc_pinned(q->bytes, &e, &err) : m->alloc(s->edev, q->bytes, &e, &err)) != PP_OK)
        e = NULL;
    if (e) {
        pthread_mutex_lock(&q->mu);
        q->made++;
        pthread_mutex_unlock(&q->mu);
    }
    return e;
}

static void entry_free(pprt_stash *s, void *e) {
    const pprt_mem_ops *m = entry_mem(s);
    if (!e) return;
    if (!m) pprt_pool_free(e);
    else if (s->edev == PPRT_ON_HOST) m->free_pinned(e);
    else m->free(s->edev, e);
}

/* e back among the pool's spares (freed where the list cannot grow) */
static void entry_give(pprt_stash *s, void *e) {
    pprt_stash_pool *q = s->pool;
    pthread_mutex_lock(&q->mu);
    if (q->n_free == q->free_cap) {
        const int cap = q->free_cap ? 2 * q->free_cap : 4;
        void **fl = realloc(q->free_list, sizeof *fl * (size_t)cap);
        if (fl) q->free_list = fl, q->free_cap = cap;
    }
    if (q->n_free < q->free_cap) q->free_list[q->n_free++] = e, e = NULL;
    pthread_mutex_unlock(&q->mu);
    entry_free(s, e);
}

/* s lets go of its pool: the last holder frees the spares (both holders' entries are of one memory) */
static void pool_release(pprt_stash *s) {
    pprt_stash_pool *q = s->pool;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    const bool last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    s->pool = NULL;
    if (!last) return;
    for (int i = 0; i < q->n_free; i++) entry_free(s, q->free_list[i]);
    free(q->free_list);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

size_t pprt_stash_entry_bytes(const pprt_stash *a, const pprt_stash *b) {
    size_t n = 0;
    if (a && !a->through) n += (size_t)a->pool->made * a->pool->bytes;
    if (b && !b->through && (!a || b->pool != a->pool)) n += (size_t)b->pool->made * b->pool->bytes;
    return n;
}

void pprt_stash_share(pprt_stash *a, pprt_stash *b) {
    if (!a || !b || a->through || b->through || entry_mem(a) != entry_mem(b) || a->edev != b->edev ||
        a->pool->n_free || b->pool->n_free || a->pool->refs != 1 || b->pool->refs != 1)
        return;
    pprt_stash_pool *q = pool_new(a->bytes > b->bytes ? a->bytes : b->bytes);
    if (!q) return; /* apart, as before */
    pool_release(a), pool_release(b);
    q->refs = 2;
    a->pool = b->pool = q;
}

pp_status pprt_stash_push(pprt_stash *s, const void *in_msg, void *out_msg, pp_err *err) {
    if (s->through) {
        push_through(s, in_msg, out_msg);
        return PP_OK;
    }
    void *e = entry_alloc(s);
    if (!e) return PP_FAIL(err, PP_ENOMEM, "out of %s memory for a stash of %zu bytes",
                           s->edev == PPRT_ON_HOST ? "host" : "device", s->pool->bytes);
    const pprt_stage *f = s->f;
    for (int j = s->first; j < f->out.n; j++) {
        const pprt_tdesc *t = f->out.t[j];
        const char *src = t->kind == PPRT_RECV ? (const char *)in_msg + f->in.off[t->offset]
                                               : (const char *)out_msg + f->out.off[t->offset];
        const pp_status st = stash_copy(s->fmem, s->fdev, &s->push_s, &s->push_e, (char *)e + (f->out.off[j] -
                                        s->out_off), s->edev, src, s->fdev, t->nbytes, j == f->out.n - 1, err);
        if (st != PP_OK) {
            entry_give(s, e);
            return st;
        }
    }
    pthread_mutex_lock(&s->mu);
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 4;
        void **q = malloc(sizeof *q * (size_t)cap);
        if (!q) {
            pthread_mutex_unlock(&s->mu);
            entry_give(s, e);
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        for (int i = 0; i < s->n; i++) q[i] = s->q[(s->head + i) % s->cap];
        free(s->q);
        s->q = q, s->cap = cap, s->head = 0;
    }
    s->q[(s->head + s->n++) % s->cap] = e;
    if (s->n > s->peak) s->peak = s->n;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return PP_OK;
}

pp_status pprt_stash_pop(pprt_stash *s, void *in_msg, pp_err *err) {
    if (s->through) { /* the tail came with the message */
        pthread_mutex_lock(&s->mu);
        const bool had = s->n > 0;
        if (had) s->n--;
        pthread_mutex_unlock(&s->mu);
        return had ? PP_OK : PP_FAIL(err, PP_ERUNTIME, "a backward stage found its device's stash empty");
    }
    pthread_mutex_lock(&s->mu);
    void *e = s->n ? s->q[s->head] : NULL;
    if (e) s->head = (s->head + 1) % s->cap, s->n--;
    pthread_mutex_unlock(&s->mu);
    if (!e) return PP_FAIL(err, PP_ERUNTIME, "a backward stage found its device's stash empty");
    const pp_status st = stash_copy(s->bmem, s->bdev, &s->pop_s, &s->pop_e, (char *)in_msg + s->in_off, s->bdev, e,
                                    s->edev, s->bytes, true, err);
    entry_give(s, e);
    return st;
}

pp_status pprt_stash_pop_wait(pprt_stash *s, void *in_msg, pp_err *err) {
    pthread_mutex_lock(&s->mu);
    while (!s->n && !s->closed) pthread_cond_wait(&s->cv, &s->mu);
    const bool closed = !s->n;
    pthread_mutex_unlock(&s->mu);
    if (closed) return PP_FAIL(err, PP_ERUNTIME, "the run stopped");
    return pprt_stash_pop(s, in_msg, err);
}

void pprt_stash_close(pprt_stash *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void pprt_stash_free(pprt_stash *s) {
    if (!s) return;
    if (s->push_s) s->fmem->stream_free(s->push_s); /* their copies were waited for */
    if (s->pop_s) s->bmem->stream_free(s->pop_s);
    if (s->push_e) s->fmem->event_free(s->push_e);
    if (s->pop_e) s->bmem->event_free(s->pop_e);
    for (int i = 0; !s->through && i < s->n; i++) entry_free(s, s->q[(s->head + i) % s->cap]);
    pool_release(s);
    free(s->q);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
