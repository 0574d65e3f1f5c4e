/* wshare.c: reordered weights shared by the executors of one stage in one
 * process. `--replicas R` runs R pipelines side by side, each stage's
 * replicas on executors of their own; each used to reorder every weight
 * into oneDNN's layout for itself, so R copies of the same bytes (ResNet-50:
 * 102 MB each in f32). Now the first executor to need a (tensor, layout)
 * reorders it and the others take the same buffer, which lives until the
 * last of them lets go. Weights are read-only once reordered, and the
 * bytes depend only on the plan's tensor, the view it is read through (a
 * Transpose folded into a matrix product reads it transposed; a training
 * plan reads a weight both ways, forward and backward) and the layout, so
 * sharing changes no bit. Keyed by the stage (its pprt_stage in the loaded
 * plan), the tensor and oneDNN's memory descriptors of the view and the
 * layout, in a hash table by stage and
 * tensor (a model of thousands of weights looks each up among a few); one
 * lock for all, held while a weight is reordered, so two replicas never
 * reorder the same one. A training run's weights change between steps
 * (pprt_tdesc.varies): the executors' reload (dn_wshare_reload) reorders a
 * shared one again once per version of the weights, the first of its
 * holders to reload doing it. */
#include "dnnl_exec.h"
#include "../pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

struct dn_wshared {
    const pprt_stage *st;
    int tid;
    dnnl_memory_desc_t from, md; /* the view of the tensor reordered, the layout */
    void *buf;
    int refs;
    unsigned long version; /* the weights' version its bytes are of (reload) */
    dn_wshared *next;
};

enum { BUCKETS = 1024 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dn_wshared *table[BUCKETS]; /* every shared weight some executor holds, by stage and tensor */

static dn_wshared **bucket(const pprt_stage *st, int tid) {
    return &table[((uintptr_t)st / 64 * 31 + (unsigned)tid) % BUCKETS];
}

pp_status dn_wshare_get(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                        dnnl_memory_t *out, pp_err *err) {
    if (!ROOM(x->wrefs)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const size_t bytes = dnnl_memory_desc_get_size(want);
    pp_status s = PP_OK;
    pthread_mutex_lock(&lock);
    dn_wshared **head = bucket(x->st, tid), *e = *head;
    while (e && !(e->st == x->st && e->tid == tid && dnnl_memory_desc_equal(&e->from, from) &&
                 dnnl_memory_desc_equal(&e->md, want))) e = e->next;
    if (e) {
        /* a weight that varies may be behind here (its holders reload when they next run, and an executor
         * made again now comes first): made current, unless it is already of this executor's version (its
         * holders reloaded it, and may be reading it now: rewriting the same bytes under them was a data race) */
        if (x->st->t[tid].varies && (!x->wversion || e->version != x->wversion)) {
            s = dn_reorder_into(x, from, x->st->t[tid].data, want, e->buf, err);
            if (s == PP_OK) e->version = x->wversion;
        }
        if (s == PP_OK && (s = dn_new_mem(x, want, e->buf, out, err)) == PP_OK) e->refs++, x->bytes.wshared += bytes;
    } else {
        void *buf = NULL;
        if (!(e = calloc(1, sizeof *e)) || !(buf = pprt_pool_alloc(bytes)))
            s = PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for a reordered weight", bytes);
        else s = dn_reorder_weight(x, tid, from, want, buf, out, err);
        if (s == PP_OK) {
            *e = (dn_wshared){.st = x->st, .tid = tid, .from = *from, .md = *want, .buf = buf, .refs = 1,
                              .version = x->wversion, .next = *head};
            *head = e;
            x->bytes.owned += bytes;
        } else {
            pprt_pool_free(buf);
            free(e);
        }
    }
    pthread_mutex_unlock(&lock);
    if (s == PP_OK) x->wrefs.a[x->wrefs.n++] = e;
    return s;
}

pp_status dn_wshare_reload(pprt_exec *x, unsigned long version, pp_err *err) {
    pp_status s = PP_OK;
    for (int i = 0; i < x->wrefs.n && s == PP_OK; i++) {
        dn_wshared *e = x->wrefs.a[i];
        const pprt_tdesc *t = &e->st->t[e->tid];
        if (!t->varies) continue;
        pthread_mutex_lock(&lock); /* a weight at a time, as dn_wshare_get: the stages reload side by side */
        if (e->version != version) s = dn_reorder_into(x, &e->from, t->data, &e->md, e->buf, err); /* else done */
        if (s == PP_OK) e->version = version;
        pthread_mutex_unlock(&lock);
    }
    return s;
}

void dn_wshare_release(pprt_exec *x, int n) {
    if (n >= x->wrefs.n) return;
    pthread_mutex_lock(&lock);
    for (int i = n; i < x->wrefs.n; i++) {
        dn_wshared *e = x->wrefs.a[i];
        if (--e->refs > 0) continue;
        dn_wshared **at = bucket(e->st, e->tid);
        while (*at != e) at = &(*at)->next;
        *at = e->next;
        pprt_pool_free(e->buf);
        free(e);
    }
    pthread_mutex_unlock(&lock);
    x->wrefs.n = n;
}
