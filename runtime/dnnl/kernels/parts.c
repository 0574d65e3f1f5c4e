/* parts.c: (parts.h) */
#include "parts.h"

void pprt_parts_run(int64_t parts, void (*fn)(void *ctx, int64_t t), void *ctx) {
#pragma omp parallel for num_threads((int)parts) schedule(static) if (parts > 1)
    for (int64_t t = 0; t < parts; t++) fn(ctx, t);
}
