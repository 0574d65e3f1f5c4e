/* test_pack.c: the interval packer (ir/pack.h) against a direct
 * implementation of its rule, written here the way the oneDNN executor's and
 * ppcc's planners placed buffers before they shared pp_pack (every placed
 * buffer compared, no tree): random lifetimes and sizes, both fits, aligned
 * and unaligned sizes; plus what must hold whatever the rule (no two buffers
 * alive at once share a byte, offsets aligned, the total the highest end)
 * and the refusals. About 0.1 s. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/pack.h"
#include "check.h"

typedef struct {
    int start, end;
    size_t size, off;
    int64_t key;
    int idx;
} ref_item;

static int ref_by_size(const void *a, const void *b) {
    const ref_item *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx - y->idx;
}

static int ref_by_off(const void *a, const void *b) {
    const ref_item *x = *(ref_item *const *)a, *y = *(ref_item *const *)b;
    return (x->off > y->off) - (x->off < y->off);
}

/* The rule of pack.h, placed buffer by placed buffer: offsets into off[] by
 * item index; the total returned. */
static size_t ref_pack(const pp_pack_item *in, int n, size_t align, pp_pack_fit fit, size_t *off) {
    ref_item *r = calloc((size_t)n + 1, sizeof *r);
    ref_item **live = calloc((size_t)n + 1, sizeof *live);
    for (int i = 0; i < n; i++)
        r[i] = (ref_item){in[i].start, in[i].end, in[i].size, 0, in[i].key, i};
    qsort(r, (size_t)n, sizeof *r, ref_by_size);
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        ref_item *g = &r[k];
        int nl = 0;
        for (int j = 0; j < k; j++)
            if (r[j].start <= g->end && g->start <= r[j].end) live[nl++] = &r[j];
        qsort(live, (size_t)nl, sizeof *live, ref_by_off);
        size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (int j = 0; j < nl; j++) {
            const ref_item *h = live[j];
            if (fit == PP_PACK_FIRST_FIT && cur + g->size <= h->off) break;
            if (fit == PP_PACK_BEST_FIT && h->off > cur && h->off - cur >= g->size && h->off - cur < best_gap)
                best = cur, best_gap = h->off - cur;
            const size_t e = (h->off + h->size + align - 1) & ~(align - 1);
            if (e > cur) cur = e;
        }
        g->off = best != SIZE_MAX ? best : cur;
        if (g->off + g->size > total) total = g->off + g->size;
        off[g->idx] = g->off;
    }
    free(r);
    free(live);
    return total;
}

static unsigned long long rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void one_case(int c, int n, size_t align, pp_pack_fit fit, bool aligned_sizes) {
    pp_pack_item it[80];
    size_t want[80];
    const int steps = 1 + (int)rnd(40);
    for (int i = 0; i < n; i++) {
        const int s = (int)rnd((unsigned)steps);
        size_t sz = rnd(4) == 0 ? 64 * (1 + rnd(4)) : 1 + rnd(5000); /* repeated sizes: the tie-break */
        if (rnd(20) == 0) sz = 0;
        if (aligned_sizes) sz = (sz + align - 1) & ~(align - 1);
        it[i] = (pp_pack_item){.start = s, .end = s + (int)rnd((unsigned)(steps - s)), .size = sz,
                               .key = rnd(3) == 0 ? (int64_t)rnd(4) : i};
    }
    const size_t want_total = ref_pack(it, n, align, fit, want);
    size_t total = 0;
    pp_err err = {0};
    const pp_status s = pp_pack(it, n, align, fit, &total, &err);
    CHECK(s == PP_OK, "case %d: %s", c, err.msg);
    CHECK(total == want_total, "case %d (%s fit, %d buffers): total %zu, the rule gives %zu", c,
          fit == PP_PACK_BEST_FIT ? "best" : "first", n, total, want_total);
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        CHECK(it[i].off == want[i], "case %d buffer %d: offset %zu, the rule gives %zu", c, i, it[i].off, want[i]);
        CHECK(it[i].off % align == 0, "case %d buffer %d: offset %zu not %zu-aligned", c, i, it[i].off, align);
        if (it[i].off + it[i].size > top) top = it[i].off + it[i].size;
        for (int j = 0; j < i; j++) {
            const bool alive = it[i].start <= it[j].end && it[j].start <= it[i].end;
            const bool share = it[i].off < it[j].off + it[j].size && it[j].off < it[i].off + it[i].size;
            CHECK(!(alive && share), "case %d: buffers %d and %d live at once and share bytes", c, i, j);
        }
    }
    CHECK(total == top, "case %d: total %zu, the highest end %zu", c, total, top);
}

int main(void) {
    int c = 0;
    for (int round = 0; round < 250; round++)
        for (int fit = 0; fit < 2; fit++)
            for (int al = 0; al < 2; al++)
                one_case(c++, round % 5 == 0 ? 1 + (int)rnd(4) : 1 + (int)rnd(80), al ? 64 : 16, (pp_pack_fit)fit,
                         al == 1);

    /* nothing to pack */
    size_t total = 7;
    pp_err err = {0};
    CHECK(pp_pack(NULL, 0, 64, PP_PACK_BEST_FIT, &total, &err) == PP_OK && total == 0, "empty: total %zu", total);
    /* a lifetime that ends before it starts */
    pp_pack_item bad[2] = {{.start = 0, .end = 1, .size = 8}, {.start = 3, .end = 2, .size = 8}};
    CHECK(pp_pack(bad, 2, 64, PP_PACK_FIRST_FIT, &total, &err) == PP_EINVAL && strstr(err.msg, "buffer 1"),
          "a backwards lifetime: %s", err.msg);
    /* sizes whose sum overflows */
    pp_pack_item big[2] = {{.start = 0, .end = 0, .size = SIZE_MAX / 2 + 64},
                           {.start = 0, .end = 0, .size = SIZE_MAX / 2}};
    err = (pp_err){0};
    CHECK(pp_pack(big, 2, 64, PP_PACK_BEST_FIT, &total, &err) == PP_EINVAL && strstr(err.msg, "overflow"),
          "an overflowing arena: %s", err.msg);
    /* two buffers alive at once never share; apart in time they do */
    pp_pack_item two[3] = {{.start = 0, .end = 1, .size = 100}, {.start = 1, .end = 2, .size = 100},
                           {.start = 2, .end = 3, .size = 100}};
    CHECK(pp_pack(two, 3, 64, PP_PACK_FIRST_FIT, &total, &err) == PP_OK && two[0].off == 0 && two[1].off == 128 &&
              two[2].off == 0 && total == 228,
          "three in a row: %zu %zu %zu, total %zu", two[0].off, two[1].off, two[2].off, total);
    return check_summary("test_pack");
}
