/* rowcopy.h: rows of bytes copied from one strided place to another,
 * shared by the threads: the oneDNN executor's own kernel for Split (each
 * output one step: its window of every outer index of the input;
 * runtime/dnnl/views.c). The reference kernel copied element by element on
 * one thread (ViTs' qkv Split, CSP networks' halves: 9-18 ms a micro-batch
 * of 8 in the zoo's sweep). */
#ifndef PPRT_ROWCOPY_H
#define PPRT_ROWCOPY_H

#include <stddef.h>

/* dst[dst_off + r * dst_stride, + row_bytes) = src[src_off + r * src_stride,
 * + row_bytes) for r < rows (bytes; rows > 0 marks a step of this kernel). */
typedef struct pprt_rowcopy {
    size_t rows, row_bytes, src_stride, dst_stride, src_off, dst_off;
} pprt_rowcopy;

/* Run it (src and dst distinct) on `threads` OpenMP threads: the rows shared
 * past 64 KiB in all, a row cut into pieces where there are fewer rows than
 * threads. */
void pprt_rowcopy_run(const pprt_rowcopy *c, const void *src, void *dst, int threads);

#endif
