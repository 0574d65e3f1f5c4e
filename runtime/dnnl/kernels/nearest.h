/* nearest.h: Resize by nearest neighbour as a gather of the input: each
 * output element a copy of the input element its index maps give, axis by
 * axis (the maps from the reference kernel's own coordinate code, so the
 * same elements: ref.h, pprt_resize_nearest_map). The oneDNN executor's own
 * kernel for Resize in nearest mode (runtime/dnnl/resample.c); the
 * reference kernel ran it on one thread through its general tap tables
 * (hrnet_w18_small's upsamplings: 20 ms a micro-batch of 8). */
#ifndef PPRT_NEAREST_H
#define PPRT_NEAREST_H

#include <stdbool.h>
#include <stdint.h>


#define PPRT_NEAREST_RANK 5

typedef struct pprt_nearest {
    int rank;                              /* > 0 marks a plan: 1 to PPRT_NEAREST_RANK */
    int64_t in[PPRT_NEAREST_RANK], out[PPRT_NEAREST_RANK];
    const int64_t *map[PPRT_NEAREST_RANK]; /* map[d][o]: the input index of output index o along axis d */
} pprt_nearest;

/* y (plain, dims out) from x (plain, dims in) on `threads` OpenMP threads:
 * the rows of the last axis shared out. Float elements. */
void pprt_nearest_run(const pprt_nearest *p, const float *x, float *y, int threads);

#endif
