/* pack.c: the interval packer (pack.h). */
#include "pack.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

typedef pp_pack_item item;

static int by_size(const void *a, const void *b) {
    const item *x = *(item *const *)a, *y = *(item *const *)b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x > y) - (x < y);
}

static int by_start(const void *a, const void *b) {
    const item *x = *(item *const *)a, *y = *(item *const *)b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x > y) - (x < y);
}

static int by_off(const void *a, const void *b) {
    const item *x = *(item *const *)a, *y = *(item *const *)b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x > y) - (x < y);
}

/* Placed items by lifetime: a max-tree over the items in order of their
 * start, holding each placed item's end (INT_MIN: not placed yet). The
 * placed items whose lifetime meets [start, end] are those among the first
 * `upto` (start <= end) whose end is >= start: a descent that only enters
 * subtrees holding such an end. */
typedef struct {
    int size;
    int *tree;
} life_tree;

static void life_set(life_tree *t, int pos, int end) {
    int i = t->size + pos;
    t->tree[i] = end;
    for (i /= 2; i >= 1; i /= 2) t->tree[i] = t->tree[2 * i] > t->tree[2 * i + 1] ? t->tree[2 * i] : t->tree[2 * i + 1];
}

static void life_find(const life_tree *t, int node, int lo, int hi, int upto, int start, item **by_st, item **out,
                      int *n) {
    if (lo >= upto || t->tree[node] < start) return;
    if (hi - lo == 1) {
        out[(*n)++] = by_st[lo];
        return;
    }
    const int mid = (lo + hi) / 2;
    life_find(t, 2 * node, lo, mid, upto, start, by_st, out, n);
    life_find(t, 2 * node + 1, mid, hi, upto, start, by_st, out, n);
}

pp_status pp_pack(pp_pack_item *items, int n, size_t align, pp_pack_fit fit, size_t *total, pp_err *err) {
    *total = 0;
    if (n <= 0) return PP_OK;
    int size = 1;
    while (size < n) size *= 2;
    item **order = malloc(sizeof *order * (size_t)n), **by_st = malloc(sizeof *by_st * (size_t)n);
    item **live = malloc(sizeof *live * (size_t)n);
    int *pos = malloc(sizeof *pos * (size_t)n);
    life_tree lt = {size, malloc(sizeof(int) * 2 * (size_t)size)};
    pp_status st = PP_OK;
    if (!order || !by_st || !live || !pos || !lt.tree) {
        st = PP_FAIL(err, PP_ENOMEM, "out of memory packing %d buffers", n);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (items[i].end < items[i].start) {
            st = PP_FAIL(err, PP_EINVAL, "buffer %d lives from step %d to %d", i, items[i].start, items[i].end);
            goto out;
        }
        order[i] = by_st[i] = &items[i];
    }
    qsort(order, (size_t)n, sizeof *order, by_size);
    qsort(by_st, (size_t)n, sizeof *by_st, by_start);
    for (int j = 0; j < n; j++) pos[by_st[j] - items] = j;
    for (int i = 0; i < 2 * size; i++) lt.tree[i] = INT_MIN;
    size_t top = 0;
    for (int j = 0; j < n; j++) {
        item *g = order[j];
        int lo = 0, hi = n; /* upto: the items starting at or before its end */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (by_st[mid]->start <= g->end) lo = mid + 1;
            else hi = mid;
        }
        int nl = 0;
        life_find(&lt, 1, 0, size, lo, g->start, by_st, live, &nl);
        qsort(live, (size_t)nl, sizeof *live, by_off);
        /* cur: the lowest offset above the placed items looked at so far */
        size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (int k = 0; k < nl; k++) {
            const item *h = live[k];
            if (fit == PP_PACK_FIRST_FIT && h->off >= cur && h->off - cur >= g->size) break;
            if (fit == PP_PACK_BEST_FIT && h->off > cur && h->off - cur >= g->size && h->off - cur < best_gap)
                best = cur, best_gap = h->off - cur;
            size_t end;
            if (pp_add_ovf(h->off, h->size, &end) || pp_add_ovf(end, align - 1, &end)) goto overflow;
            end &= ~(align - 1);
            if (end > cur) cur = end;
        }
        g->off = best != SIZE_MAX ? best : cur;
        size_t e;
        if (pp_add_ovf(g->off, g->size, &e)) goto overflow;
        if (e > top) top = e;
        life_set(&lt, pos[g - items], g->end);
    }
    *total = top;
    goto out;
overflow:
    st = PP_FAIL(err, PP_EINVAL, "arena size overflows");
out:
    free(order);
    free(by_st);
    free(live);
    free(pos);
    free(lt.tree);
    return st;
}
