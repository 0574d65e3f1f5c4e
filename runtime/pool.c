/* pool.c: see pool.h. The live large blocks are kept in a hash table by
 * address (their sizes, for the free), the waiting ones in a list; one lock
 * for both (allocations are per executor, link and stash entry: thousands a
 * step at most, against milliseconds of work each). */
#include "pool.h"

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

void pprt_pool_keep(bool on) {
    pthread_mutex_lock(&mu);
    keep = on && !POOL_OFF;
    pthread_mutex_unlock(&mu);
    if (!on) release(LONG_MAX);
}

void pprt_pool_trim(void) {
    pthread_mutex_lock(&mu);
    const long g = gen++;
    pthread_mutex_unlock(&mu);
    release(g);
}

void pprt_pool_counts(long *n_reused, size_t *n_waiting) {
    pthread_mutex_lock(&mu);
    *n_reused = reused;
    *n_waiting = waiting_bytes;
    pthread_mutex_unlock(&mu);
}

bool pprt_pool_enabled(void) { return !POOL_OFF; }
