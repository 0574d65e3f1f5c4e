/* pack.h: the interval packer. Buffers that live over ranges of steps get
 * offsets in one arena so that two buffers whose lifetimes meet never share
 * a byte. Used by ppcc's memory plan (passes/memplan.c, each stage's arena
 * in the plan) and by the oneDNN executor (runtime/dnnl/arena.c, its own
 * arena in its own layouts); in pp_base, which both link, so ppcc links
 * nothing of the runtime for it.
 *
 * The buffers are placed largest first (equal sizes: smaller `key` first),
 * each at an `align`-multiple offset beside the already placed buffers whose
 * lifetimes meet its own (found through a max-tree over the lifetimes, so
 * the cost follows the number found): in the smallest gap that holds it
 * (PP_PACK_BEST_FIT) or the lowest (PP_PACK_FIRST_FIT), else above them
 * all. A buffer of 0 bytes still gets an offset. */
#ifndef PP_PACK_H
#define PP_PACK_H

#include "base.h"

typedef enum { PP_PACK_BEST_FIT, PP_PACK_FIRST_FIT } pp_pack_fit;

typedef struct pp_pack_item {
    int start, end; /* the lifetime, inclusive (start <= end) */
    size_t size;    /* bytes */
    int64_t key;    /* order among equal sizes (smaller first); distinct keys make the result deterministic */
    size_t off;     /* set by pp_pack: a multiple of align */
} pp_pack_item;

/* Set items[i].off for n items and *total to the arena's size (the highest
 * off + size). align: a power of two. PP_EINVAL when the sizes overflow. */
pp_status pp_pack(pp_pack_item *items, int n, size_t align, pp_pack_fit fit, size_t *total, pp_err *err);

#endif
