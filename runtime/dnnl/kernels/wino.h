/* wino.h: 3x3 stride-1 convolution by Winograd's minimal filtering,
 * F(4x4, 3x3) or F(2x2, 3x3), on AVX2 + FMA, for the oneDNN executor on CPUs where oneDNN
 * has no Winograd kernel of its own (below AVX-512).
 *
 * It is not a general convolution: 2-D, f32, no groups or dilation, C a
 * multiple of 8 and K of 16; tensors in the channel-blocked layout nChw8c
 * (oneDNN's aBcd8b: [N][C/8][H][W][8]), which is what oneDNN's own AVX2
 * kernels keep between nodes, so no reorder is needed around it. The
 * epilogue does what pp.FusedConv does after the convolution: bias, then the
 * residual Z (same shape and layout as the output; it may be the output
 * itself, summed in place), then a clamp to [lo, hi] (Relu: [0, inf]).
 *
 * Which tile: F(4x4, 3x3) does fewer multiplications (36 per 16 outputs and
 * channel pair, against 16 per 4), F(2x2, 3x3) holds fewer transformed
 * weights (16 per filter, against 36; a direct kernel's 9): with few tiles
 * to share them (small images at small batches) reading them dominates.
 *
 * Arithmetic: the transforms are exact in f32 up to rounding, but
 * F(4x4, 3x3) multiplies rounding errors by its transform constants (up to
 * 8 in A, 5 in B): against a direct convolution the difference is 1e-6 to
 * 1e-5 of the output's magnitude for ResNet-size channel counts (F(2x2, 3x3)
 * less), well inside the executor's rtol 1e-3 / atol 1e-4.
 * The result depends only on the node (not on threads or the split). */
#ifndef PPRT_WINO_H
#define PPRT_WINO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../ir/base.h"

typedef struct pprt_wino pprt_wino;

typedef struct pprt_wino_shape {
    int64_t n, c, k;    /* batch, input channels, output channels */
    int64_t h, w;       /* input spatial size */
    int64_t oh, ow;     /* output spatial size (h + pads - 2, w + pads - 2) */
    int64_t pt, pl;     /* top and left padding (bottom and right follow from oh, ow) */
    int tile;           /* output tile: 4 (F(4x4, 3x3)), 2 (F(2x2, 3x3)), 0: chosen by
                         * pprt_wino_create from the shape and thread count */
} pprt_wino_shape;

/* Whether this CPU runs the kernels (AVX2 and FMA). */
bool pprt_wino_cpu(void);

/* Whether a convolution of this shape is one the kernels take (C % 8, K % 16,
 * sizes positive, padding below 3, output no larger than a 3x3 window allows,
 * tile 0, 2 or 4). */
bool pprt_wino_fits(const pprt_wino_shape *s);

/* Transform the weights (K x C x 3 x 3, plain f32) and copy the bias (K, or
 * NULL) for runs with up to `threads` threads. Fails cleanly (PP_ENOMEM,
 * PP_EUNSUP for a shape pprt_wino_fits refuses). */
pp_status pprt_wino_create(const pprt_wino_shape *s, const float *w, const float *bias, int threads,
                           pprt_wino **out, pp_err *err);
void pprt_wino_free(pprt_wino *wn);

/* Bytes of the workspace pprt_wino_run needs (64-byte aligned), and of the
 * transformed weights it holds. */
size_t pprt_wino_scratch_bytes(const pprt_wino *wn);
size_t pprt_wino_weight_bytes(const pprt_wino *wn);
/* The output tile in use (2 or 4). */
int pprt_wino_tile(const pprt_wino *wn);

/* dst = clamp(conv(src) + bias + z, lo, hi), all nChw8c; z NULL: none, and
 * z == dst is allowed. Runs on `threads` OpenMP threads (at most the
 * create-time count; 1 where the build has no OpenMP). */
void pprt_wino_run(const pprt_wino *wn, const float *src, float *dst, const float *z, float lo, float hi,
                   void *scratch, int threads);

#endif
