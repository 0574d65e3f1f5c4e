/* permute.h: a Transpose that keeps the last axis in place, as row copies
 * shared by the threads: the oneDNN executor's own kernel for it
 * (runtime/dnnl/views.c). oneDNN's reorder takes such a strided view at
 * 0.3-0.5x the speed of copying whole rows, and the reference kernel copies
 * the rows on one thread (mobilevit_xxs at -b 8: 29 of its 113 ms). */
#ifndef PPRT_PERMUTE_H
#define PPRT_PERMUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPRT_PERMUTE_MAX 8

/* The copy, its axes merged: out[i0, ..., i(n-1), :] = the row of row_bytes
 * bytes at element offset sum(ik * stride[k]) of the input, with the
 * output's rows in order. n = 0: one row (the whole tensor). */
typedef struct pprt_permute {
    int n;
    int64_t dim[PPRT_PERMUTE_MAX], stride[PPRT_PERMUTE_MAX]; /* output axes; input strides in elements */
    size_t rows, row_bytes, elem;                          /* elem: bytes per element */
} pprt_permute;

/* Plan the copy of Transpose `perm` over a plain tensor of dims[rank] of
 * `elem`-byte elements; false where the last axis moves (not this kernel's)
 * or the tensor is empty. */
bool pprt_permute_plan(const int64_t *dims, int rank, const int64_t *perm, size_t elem, pprt_permute *p);
/* Run it from src to dst (distinct buffers) on `threads` OpenMP threads;
 * the bytes do not depend on the thread count. */
void pprt_permute_run(const pprt_permute *p, const void *src, void *dst, int threads);

#endif
