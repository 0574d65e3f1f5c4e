/* pad.h: Pad in constant mode over a plain tensor as whole rows copied and
 * filled, shared by the threads: the oneDNN executor's own kernel for Pad
 * (runtime/dnnl/views.c). The reference kernel maps every element on one
 * thread (CoaT's one-token pad of [8, 8, 3136, 8] before an Add: 5.9 ms a
 * micro-batch against onnxruntime's 0.2). */
#ifndef PPRT_PAD_H
#define PPRT_PAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPRT_PAD_MAX 8

/* The pad, its axes merged: the output is units of the first n axes
 * (out[k] long each), each a segment along axis n of span elements per
 * index: before * span filled, the input's segment of len * span elements
 * from its index skip on, the rest filled. An outer index of the output
 * that falls outside the input along its axis (at - begin[k] outside
 * [0, in[k])) makes its whole unit filled. */
typedef struct pprt_pad {
    int n;                                                      /* outer axes */
    int64_t out[PPRT_PAD_MAX], in[PPRT_PAD_MAX], begin[PPRT_PAD_MAX], stride[PPRT_PAD_MAX]; /* stride: input elements */
    int64_t seg_out, seg_in, before, skip, len, span;             /* along axis n */
    size_t units;
    float value;
} pprt_pad;

/* Plan a constant-mode Pad of a float tensor of dims[rank] by begin[k]
 * elements before axis k (negative: cut off) into out_dims; false where
 * the output is empty or rank is out of range. */
bool pprt_pad_plan(const int64_t *dims, const int64_t *out_dims, const int64_t *begin, int rank, float value,
                   pprt_pad *p);
/* Run it from src to dst (distinct buffers) on `threads` OpenMP threads. */
void pprt_pad_run(const pprt_pad *p, const float *src, float *dst, int threads);

#endif
