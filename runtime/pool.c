/* pool.c: see pool.h. The live large blocks are kept in a hash table by
 * address (their sizes, for the free), the waiting ones in a list; one lock
 * for both (allocations are per executor, link and stash entry: thousands a
 * step at most, against milliseconds of work each). */
#include "pool.h"
#include "mem.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_OFF 1
#endif
#endif
#ifndef POOL_OFF
#define POOL_OFF 0
#endif

enum { MIN_BYTES = 1 << 20, BUCKETS = 4096 };

typedef struct block {
    void *p;
    size_t bytes;
    long gen;           /* the trim count when it began to wait */
    struct block *next; /* in its bucket (live) or in the waiting list */
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *live[BUCKETS];
static block *waiting;
static bool keep;
static long gen, reused;
static size_t waiting_bytes;

static block **bucket(const void *p) { return &live[((uintptr_t)p >> 6) % BUCKETS]; }

/* Device blocks waiting (pprt_pool_dev_alloc), oldest first. */
typedef struct dev_block {
    const pprt_mem_ops *mem;
    int dev;
    void *p;
    size_t bytes;
    long gen;
    struct dev_block *next;
} dev_block;

static dev_block *dev_waiting, **dev_tail = &dev_waiting;
/* Live device blocks the pool handed out, with their sizes (for the free). */
static dev_block *dev_live;

static void *raw(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

void *pprt_pool_alloc(size_t bytes) {
    if (POOL_OFF || bytes < MIN_BYTES) return raw(bytes);
    pthread_mutex_lock(&mu);
    block *b = NULL;
    for (block **w = &waiting; *w; w = &(*w)->next)
        if ((*w)->bytes == bytes) {
            b = *w;
            *w = b->next;
            waiting_bytes -= bytes;
            reused++;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (!b) {
        b = malloc(sizeof *b);
        void *p = b ? raw(bytes) : NULL;
        if (!p) {
            free(b);
            return NULL;
        }
        *b = (block){.p = p, .bytes = bytes};
    }
    pthread_mutex_lock(&mu);
    b->next = *bucket(b->p);
    *bucket(b->p) = b;
    pthread_mutex_unlock(&mu);
    return b->p;
}

void pprt_pool_free(void *p) {
    if (!p) return;
    if (POOL_OFF) {
        free(p);
        return;
    }
    pthread_mutex_lock(&mu);
    block *b = NULL;
    for (block **l = bucket(p); *l; l = &(*l)->next)
        if ((*l)->p == p) {
            b = *l;
            *l = b->next;
            break;
        }
    if (b && keep) {
        b->gen = gen;
        b->next = waiting;
        waiting = b;
        waiting_bytes += b->bytes;
        b = NULL, p = NULL;
    }
    pthread_mutex_unlock(&mu);
    free(p); /* a small block (never in the table), or a large one while the pool is not kept */
    free(b);
}

static void release(long before) { /* the waiting blocks that began to wait before trim `before` */
    pthread_mutex_lock(&mu);
    block *keep_list = NULL, *drop = NULL;
    while (waiting) {
        block *b = waiting;
        waiting = b->next;
        if (b->gen < before) {
            b->next = drop, drop = b;
            waiting_bytes -= b->bytes;
        } else {
            b->next = keep_list, keep_list = b;
        }
    }
    waiting = keep_list;
    pthread_mutex_unlock(&mu);
    while (drop) {
        block *b = drop;
        drop = b->next;
        free(b->p);
        free(b);
    }
}

pp_status pprt_pool_dev_alloc(const pprt_mem_ops *mem, int dev, size_t bytes, void **p, pp_err *err) {
    *p = NULL;
    pthread_mutex_lock(&mu);
    dev_block *b = NULL;
    for (dev_block **w = &dev_waiting; *w; w = &(*w)->next)
        if ((*w)->mem == mem && (*w)->dev == dev && (*w)->bytes == bytes) {
            b = *w;
            *w = b->next;
            if (dev_tail == &b->next) dev_tail = w;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (!b) {
        if (!(b = malloc(sizeof *b))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        pp_status s = mem->alloc(dev, bytes, p, err);
        if (s != PP_OK) {
            free(b);
            return s;
        }
        *b = (dev_block){.mem = mem, .dev = dev, .p = *p, .bytes = bytes};
    }
    pthread_mutex_lock(&mu);
    b->next = dev_live, dev_live = b;
    pthread_mutex_unlock(&mu);
    *p = b->p;
    return PP_OK;
}

void pprt_pool_dev_free(const pprt_mem_ops *mem, int dev, void *p) {
    if (!p) return;
    pthread_mutex_lock(&mu);
    dev_block *b = NULL;
    for (dev_block **l = &dev_live; *l; l = &(*l)->next)
        if ((*l)->p == p && (*l)->mem == mem) {
            b = *l;
            *l = b->next;
            break;
        }
    if (b && keep) { /* to the tail: the longest-waiting is taken first */
        b->gen = gen, b->next = NULL;
        *dev_tail = b, dev_tail = &b->next;
        b = NULL, p = NULL;
    }
    pthread_mutex_unlock(&mu);
    if (p) mem->free(dev, p);
    free(b);
}

static void dev_release(long before) { /* as release(), the device blocks */
    pthread_mutex_lock(&mu);
    dev_block *drop = NULL, **w = &dev_waiting;
    while (*w) {
        dev_block *b = *w;
        if (b->gen < before) {
            *w = b->next;
            b->next = drop, drop = b;
        } else {
            w = &b->next;
        }
    }
    dev_tail = w;
    pthread_mutex_unlock(&mu);
    while (drop) {
        dev_block *b = drop;
        drop = b->next;
        b->mem->free(b->dev, b->p);
        free(b);
    }
}

void pprt_pool_keep(bool on) {
    pthread_mutex_lock(&mu);
    keep = on && !POOL_OFF;
    pthread_mutex_unlock(&mu);
    if (!on) release(LONG_MAX), dev_release(LONG_MAX);
}

void pprt_pool_trim(void) {
    pthread_mutex_lock(&mu);
    const long g = gen++;
    pthread_mutex_unlock(&mu);
    release(g);
    dev_release(g);
}

void pprt_pool_counts(long *n_reused, size_t *n_waiting) {
    pthread_mutex_lock(&mu);
    *n_reused = reused;
    *n_waiting = waiting_bytes;
    pthread_mutex_unlock(&mu);
}

bool pprt_pool_enabled(void) { return !POOL_OFF; }
