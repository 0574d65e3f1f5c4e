/* reduce.h: ReduceSum, ReduceMean, ReduceL1, ReduceL2, ReduceSumSquare,
 * ReduceMax and ReduceMin of a plain float tensor over one run of
 * neighbouring axes, viewed [outer, n, inner]: the oneDNN executor's own
 * kernel for them (runtime/dnnl/reduce.c). The reference kernel walks each
 * output's elements by an odometer on one thread (caformer_s18's channel
 * means: 114 ms a micro-batch of 8; convnextv2's ReduceL2: 18 ms).
 *
 * Sums are kept in double, as in the reference kernel. Over an axis before
 * the last (inner > 1) each column is summed in the reference kernel's
 * order, so the bits are its bits; over the last axes (inner 1) in 16
 * interleaved partial sums added up in a fixed order at the end, within
 * double rounding of its order, not the same bits. Max and Min skip NaN
 * (only NaN gives NaN), as the reference does, and are exact. The bits
 * depend neither on the thread count nor on the vector ISA. */
#ifndef PPRT_REDUCE_H
#define PPRT_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    PPRT_RED_NONE, /* 0: not a step of this kernel */
    PPRT_RED_SUM,
    PPRT_RED_MEAN,
    PPRT_RED_L1,
    PPRT_RED_L2,
    PPRT_RED_SUMSQUARE,
    PPRT_RED_MAX,
    PPRT_RED_MIN,
} pprt_red_kind;

typedef struct pprt_reduce {
    int kind; /* pprt_red_kind */
    int64_t outer, n, inner;
    /* inner > 1 only: sum each column in 16 interleaved partials (term j in
     * partial j % 16), the order of an inner-1 row, so that a tensor stored
     * channels last or channels-blocked gives the bits its plain copy gives
     * (pprt_reduce_channels) */
    bool lanes;
    bool bf16; /* lanes only: x holds bfloat16 (--precision bf16 activations), summed as their floats */
} pprt_reduce;

/* Plan reduction `kind` of a float tensor of dims[rank] over the axes where
 * mask is set (none: each element by itself, as noop_with_empty_axes
 * asks); false where the reduced axes (1-long ones aside) are not one run of
 * neighbours, or the tensor or the reduction is empty. */
bool pprt_reduce_plan(const int64_t *dims, int rank, const bool *mask, int kind, pprt_reduce *p);
/* The plain plan p of a reduction over every spatial axis (inner 1, outer
 * N x C: the spatial axes of more than one element all reduced, N and C
 * not) rewritten for the same tensor stored with its channels in vectors of
 * vec (C: channels last; else blocked on channels, C a multiple of vec), the
 * spatial axes packed inside them: [N, C / vec, S, vec] with the columns
 * summed in p's row order. The output is the plain [N, C] (float); bf16: the
 * input holds bfloat16, summed as the floats they are (the bits of a float
 * copy). False where p is not such a plan or C is not a multiple of vec. */
bool pprt_reduce_channels(pprt_reduce *p, int64_t N, int64_t C, int64_t vec, bool bf16);
/* y[outer * inner] (float) from x (float, or bfloat16 where p->bf16) on
 * `threads` OpenMP threads. */
void pprt_reduce_run(const pprt_reduce *p, const void *x, float *y, int threads);

#endif
