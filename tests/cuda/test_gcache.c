/* test_gcache.c: the CUDA executor's graph cache (runtime/cuda/gcache.h) by
 * itself (labels fast, cuda; well under a second): a stage meeting its
 * incoming and outgoing buffers in rings of a and b captures exactly once
 * per pair of the cycle (lcm(a, b) pairs, up to a x b) and never again, for
 * rings whose pairs pass the 16 graphs a stage kept before issue 57 (5 x 8:
 * 40 pairs; that cache evicted each graph before its pair came back, so
 * every run captured); the least recently used graph goes only past
 * PCU_GRAPHS_MAX; every graph handed to destroy once. */
#include <stdint.h>
#include <stdio.h>

#include "../../runtime/cuda/gcache.h"

static int fails;
#define CHECK(c, ...)                                                                                           \
    do {                                                                                                        \
        if (!(c)) {                                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                               \
            fprintf(stderr, __VA_ARGS__);                                                                       \
            fputc('\n', stderr);                                                                                \
            fails++;                                                                                            \
        }                                                                                                       \
    } while (0)

static long destroyed;
static void destroy(void *g) {
    (void)g;
    destroyed++;
}

static long gcd(long a, long b) { return b ? gcd(b, a % b) : a; }

/* runs over rings of a incoming and b outgoing buffers, as the executor does
 * (the first run uncaptured, as the engine warms up); captures made */
static long cycle(pcu_gcache *c, int a, int b, long runs, char *ins, char *outs, long *fresh_graphs) {
    for (long k = 0; k < runs; k++) {
        const void *in = ins + k % a, *out = outs + k % b;
        if (k == 0) continue;
        if (!pcu_gcache_find(c, in, out)) {
            void *ev = NULL;
            CHECK(pcu_gcache_put(c, in, out, (void *)(intptr_t)(++*fresh_graphs), &ev) == 0, "out of memory");
            if (ev) destroy(ev);
        }
    }
    return c->captures;
}

int main(void) {
    static char ins[256], outs[256];
    const int sizes[][2] = {{1, 1}, {2, 2}, {8, 8}, {5, 8}, {8, 5}, {16, 17}, {9, 24}, {24, 24}};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        const int a = sizes[t][0], b = sizes[t][1];
        const long pairs = (long)a / gcd(a, b) * b, runs = 10 * pairs + 7;
        pcu_gcache c = {0};
        long g = 0;
        destroyed = 0;
        const long caps = cycle(&c, a, b, runs, ins, outs, &g);
        CHECK(caps == pairs, "rings %d x %d: %ld captures, expected one per pair of the cycle (%ld)", a, b, caps, pairs);
        CHECK(c.replays == runs - 1 - pairs, "rings %d x %d: %ld replays, expected %ld", a, b, c.replays,
              runs - 1 - pairs);
        CHECK(c.evictions == 0 && destroyed == 0, "rings %d x %d: %ld evictions", a, b, c.evictions);
        pcu_gcache_free(&c, destroy);
        CHECK(destroyed == pairs, "rings %d x %d: %ld graphs destroyed at the end, expected %ld", a, b, destroyed, pairs);
        printf("rings %2d x %2d: %3ld pairs, %3ld captures in %4ld runs, %ld evictions\n", a, b, pairs, caps, runs,
               c.evictions);
    }
    /* past PCU_GRAPHS_MAX: 70 x 71 buffers, 4970 pairs; the least recently used goes, every graph destroyed once */
    {
        pcu_gcache c = {0};
        long g = 0;
        destroyed = 0;
        const long runs = 2 * 70 * 71 + 1;
        cycle(&c, 70, 71, runs, ins, outs, &g);
        CHECK(c.n == PCU_GRAPHS_MAX, "70 x 71: %d graphs kept, expected %d", c.n, PCU_GRAPHS_MAX);
        CHECK(c.evictions == c.captures - PCU_GRAPHS_MAX && destroyed == c.evictions,
              "70 x 71: %ld captures, %ld evictions, %ld destroyed", c.captures, c.evictions, destroyed);
        pcu_gcache_free(&c, destroy);
        CHECK(destroyed == c.captures, "70 x 71: %ld of %ld graphs destroyed", destroyed, c.captures);
        printf("rings 70 x 71: %ld captures, %ld evictions (cache at %d)\n", c.captures, c.evictions, PCU_GRAPHS_MAX);
    }
    if (fails) return 1;
    printf("test_gcache: all passed\n");
    return 0;
}
