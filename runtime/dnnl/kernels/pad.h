/* pad.h: Pad over a plain tensor as whole rows copied and filled, shared by
 * the threads: the oneDNN executor's own kernel for Pad (runtime/dnnl/
 * views.c). The reference kernel maps every element on one thread (CoaT's
 * one-token pad of [8, 8, 3136, 8] before an Add: 5.9 ms a micro-batch
 * against onnxruntime's 0.2; TResNet's and the blur pools' reflect pads:
 * 20-39 ms). The mapping of an output index to its source is the
 * reference kernel's (runtime/cpu/pad_src.h). */
#ifndef PPRT_PAD_H
#define PPRT_PAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../cpu/pad_src.h"

#define PPRT_PAD_MAX 8

/* The pad, its axes merged: the output is units of the first n axes
 * (out[k] long each), each a segment along axis n of span elements per
 * index: before indices padded, the input's segment of len indices from
 * its index skip on, the rest padded. In constant mode padded indices are
 * filled, and an outer index that falls outside the input along its axis
 * makes its whole unit filled; in the other modes every index reads the
 * input's index that pprt_pad_src gives (pads are not negative there). */
typedef struct pprt_pad {
    int n, mode;                                                /* outer axes; pprt_pad_mode */
    int64_t out[PPRT_PAD_MAX], in[PPRT_PAD_MAX], begin[PPRT_PAD_MAX], stride[PPRT_PAD_MAX]; /* stride: input elements */
    int64_t seg_out, seg_in, before, skip, len, span, n_in, b_in; /* along axis n (n_in long, b_in padded before) */
    size_t units;
    float value;
} pprt_pad;

/* Plan a Pad in `mode` of a float tensor of dims[rank] by begin[k] elements
 * before axis k (negative: cut off, constant mode only) into out_dims;
 * false where the output is empty, rank is out of range, or a mode other
 * than constant meets a negative pad or an empty axis. */
bool pprt_pad_plan(const int64_t *dims, const int64_t *out_dims, const int64_t *begin, int rank, int mode, float value,
                   pprt_pad *p);
/* Run it from src to dst (distinct buffers) on `threads` OpenMP threads. */
void pprt_pad_run(const pprt_pad *p, const float *src, float *dst, int threads);

#endif
