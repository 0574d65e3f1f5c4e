/* parts.h: fn(ctx, t) for t in [0, parts) over the calling thread's
 * OpenMP team (parts threads at most), each call on one thread; in order on
 * the caller without OpenMP or with one part. For work split into
 * independent parts whose results do not depend on the split
 * (runtime/dnnl/gradref.c). */
#ifndef PPRT_DNNL_PARTS_H
#define PPRT_DNNL_PARTS_H

#include <stdint.h>

void pprt_parts_run(int64_t parts, void (*fn)(void *ctx, int64_t t), void *ctx);

#endif
