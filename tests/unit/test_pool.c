/* test_pool.c: the pool of large host buffers (runtime/pool.c) that
 * training's steps reuse.
 *
 * - kept: a freed block of 1 MiB or more comes back to the next allocation
 *   of exactly its size (the same address, counted as reused), never to one
 *   of another size; blocks under 1 MiB are never kept;
 * - trimmed: a block freed and not taken again stays through one trim
 *   (the step that freed it) and goes at the second;
 * - not kept: freed at once, and turning the pool off frees what waits;
 * - a link's host buffers (pprt_link_queue) go back to the pool when the
 *   link is destroyed, and the next link of the same size takes them (they
 *   were freed with free(), so every training step faulted a GB of
 *   messages in again on ResNet-50);
 * - four threads allocating, writing, checking and freeing blocks of three
 *   sizes at once: every block's bytes are its own (none handed to two
 *   threads at a time) and nothing waits once the pool is off.
 * Under AddressSanitizer the pool keeps nothing (pprt_pool_enabled false):
 * the same calls, and the checks that nothing is kept.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/pool.h"
#include "runtime/link/link.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define MIB ((size_t)1 << 20)

static long reused_now(void) {
    long r;
    size_t w;
    pprt_pool_counts(&r, &w);
    return r;
}

static size_t waiting_now(void) {
    long r;
    size_t w;
    pprt_pool_counts(&r, &w);
    return w;
}

static void *worker(void *arg) {
    const uintptr_t id = (uintptr_t)arg;
    for (int i = 0; i < 300; i++) {
        const size_t bytes = (1 + (size_t)(i + id) % 3) * MIB;
        unsigned char *p = pprt_pool_alloc(bytes);
        if (!p) {
            CHECK_FAIL("thread %lu: no block of %zu bytes", (unsigned long)id, bytes);
            return NULL;
        }
        const unsigned char tag = (unsigned char)(id * 64 + (unsigned)i % 64);
        memset(p, tag, bytes);
        for (size_t k = 0; k < bytes; k += 4093)
            if (p[k] != tag) {
                CHECK_FAIL("thread %lu: a block's byte %zu changed under it", (unsigned long)id, k);
                break;
            }
        pprt_pool_free(p);
    }
    return NULL;
}

int main(void) {
    const bool on = pprt_pool_enabled();
    pprt_pool_free(NULL);
    pprt_pool_keep(true);

    check_case = "kept";
    const long r0 = reused_now();
    void *a = pprt_pool_alloc(2 * MIB);
    CHECK(a && (uintptr_t)a % 64 == 0, "a 2 MiB block at %p", a);
    memset(a, 1, 2 * MIB);
    pprt_pool_free(a);
    CHECK(waiting_now() == (on ? 2 * MIB : 0), "%zu bytes waiting", waiting_now());
    void *other = pprt_pool_alloc(2 * MIB + 64);
    CHECK(reused_now() == r0, "a block of another size was reused");
    void *b = pprt_pool_alloc(2 * MIB);
    CHECK(on ? b == a && reused_now() == r0 + 1 : reused_now() == r0, "kept %d: %p then %p, %ld reused", on, a, b,
          reused_now() - r0);
    CHECK(waiting_now() == 0, "%zu bytes waiting after the reuse", waiting_now());
    pprt_pool_free(b);
    pprt_pool_free(other);
    void *small = pprt_pool_alloc(MIB - 64);
    CHECK(small != NULL, "a block under 1 MiB");
    const size_t before = waiting_now();
    pprt_pool_free(small);
    CHECK(waiting_now() == before, "a block under 1 MiB was kept");

    check_case = "trimmed";
    pprt_pool_trim(); /* a and other were freed before it: they stay through this one */
    CHECK(waiting_now() == (on ? 4 * MIB + 64 : 0), "%zu bytes waiting after one trim", waiting_now());
    pprt_pool_trim();
    CHECK(waiting_now() == 0, "%zu bytes waiting after two trims", waiting_now());

    check_case = "not kept";
    void *c = pprt_pool_alloc(3 * MIB);
    pprt_pool_free(c);
    CHECK(waiting_now() == (on ? 3 * MIB : 0), "%zu bytes waiting", waiting_now());
    pprt_pool_keep(false);
    CHECK(waiting_now() == 0, "turning the pool off left %zu bytes waiting", waiting_now());
    void *d = pprt_pool_alloc(3 * MIB);
    pprt_pool_free(d);
    CHECK(waiting_now() == 0, "the pool off kept a freed block");

    check_case = "links";
    pprt_pool_keep(true);
    pprt_link *l = NULL;
    pp_err e = {0};
    CHECK(pprt_link_queue(2 * MIB, 2, &l, &e) == PP_OK && l, "a link of two 2 MiB buffers: %s", e.msg);
    if (l) l->ops->destroy(l);
    CHECK(waiting_now() == (on ? 4 * MIB : 0), "%zu bytes waiting after the link, expected %zu", waiting_now(),
          on ? 4 * MIB : 0);
    const long r1 = reused_now();
    l = NULL;
    CHECK(pprt_link_queue(2 * MIB, 2, &l, &e) == PP_OK && l, "a second link: %s", e.msg);
    CHECK(reused_now() == r1 + (on ? 2 : 0), "the second link reused %ld of the first's 2 buffers", reused_now() - r1);
    if (l) l->ops->destroy(l);
    pprt_pool_keep(false);
    CHECK(waiting_now() == 0, "%zu bytes waiting after the links, the pool off", waiting_now());

    check_case = "threads";
    pprt_pool_keep(true);
    pthread_t th[4];
    for (uintptr_t t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    CHECK(on ? reused_now() > r0 + 1 : reused_now() == r0, "%ld blocks reused by four threads", reused_now() - r0);
    pprt_pool_keep(false);
    CHECK(waiting_now() == 0, "%zu bytes waiting after the threads, the pool off", waiting_now());
    return check_summary("pool");
}
