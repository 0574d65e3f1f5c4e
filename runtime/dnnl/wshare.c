/* wshare.c: reordered weights shared by the executors of one stage in one
 * process. `--replicas R` runs R pipelines side by side, each stage's
 * replicas on executors of their own; each used to reorder every weight
 * into oneDNN's layout for itself, so R copies of the same bytes (ResNet-50:
 * 102 MB each in f32). Now the first executor to need a (tensor, layout)
 * reorders it and the others take the same buffer, which lives until the
 * last of them lets go. Weights are read-only once reordered, and the
 * bytes depend only on the plan's tensor and the layout, so sharing changes
 * no bit. Keyed by the stage (its pprt_stage in the loaded plan), the
 * tensor and oneDNN's memory descriptor, in a hash table by stage and
 * tensor (a model of thousands of weights looks each up among a few); one
 * lock for all, held while a weight is reordered, so two replicas never
 * reorder the same one. */
#include "dnnl_exec.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

struct dn_wshared {
    const pprt_stage *st;
    int tid;
    dnnl_memory_desc_t md;
    void *buf;
    size_t bytes;
    int refs;
    dn_wshared *next;
};

enum { BUCKETS = 1024 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dn_wshared *table[BUCKETS]; /* every shared weight some executor holds, by stage and tensor */

static dn_wshared **bucket(const pprt_stage *st, int tid) {
    return &table[((uintptr_t)st / 64 * 31 + (unsigned)tid) % BUCKETS];
}

void *dn_wshare_get(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                    pp_err *err) {
    if (!GROW(x->wrefs, x->cap_wrefs, x->n_wrefs + 1)) {
        PP_FAIL(err, PP_ENOMEM, "out of memory");
        return NULL;
    }
    const size_t bytes = dnnl_memory_desc_get_size(want);
    pthread_mutex_lock(&lock);
    dn_wshared **head = bucket(x->st, tid), *e = *head;
    while (e && !(e->st == x->st && e->tid == tid && dnnl_memory_desc_equal(&e->md, want))) e = e->next;
    if (e) {
        e->refs++;
        x->wshared_bytes += bytes;
    } else {
        e = calloc(1, sizeof *e);
        void *buf = NULL;
        dnnl_memory_t m;
        if (!e || posix_memalign(&buf, 64, bytes ? bytes : 64) != 0) {
            free(e);
            pthread_mutex_unlock(&lock);
            PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for a reordered weight", bytes);
            return NULL;
        }
        if (dn_reorder_weight(x, tid, from, want, buf, &m, err) != PP_OK) {
            free(buf);
            free(e);
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        *e = (dn_wshared){.st = x->st, .tid = tid, .md = *want, .buf = buf, .bytes = bytes, .refs = 1, .next = *head};
        *head = e;
        x->owned_bytes += bytes;
    }
    pthread_mutex_unlock(&lock);
    x->wrefs[x->n_wrefs++] = e;
    return e->buf;
}

void dn_wshare_release(pprt_exec *x, int n) {
    if (n >= x->n_wrefs) return;
    pthread_mutex_lock(&lock);
    for (int i = n; i < x->n_wrefs; i++) {
        dn_wshared *e = x->wrefs[i];
        if (--e->refs > 0) continue;
        dn_wshared **at = bucket(e->st, e->tid);
        while (*at != e) at = &(*at)->next;
        *at = e->next;
        free(e->buf);
        free(e);
    }
    pthread_mutex_unlock(&lock);
    x->n_wrefs = n;
}
