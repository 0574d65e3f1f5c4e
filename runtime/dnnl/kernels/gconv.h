/* gconv.h: grouped 2-D convolution with few channels per group (2, 4 or 8
 * in and out), f32, over channels-last or channel-blocked tensors: the
 * oneDNN executor's own kernel for the ResNeXt-style convolutions that
 * oneDNN 2.6 runs as an im2col gemm (2 channels a group: dla46x_c's 3x3
 * convolutions, 11.8 ms a micro-batch of 8 where onnxruntime takes 2.1;
 * docs/design-notes.md, "Convolutions of small groups").
 *
 * The channels of a group sit side by side in a pixel's channel vector, so
 * a vector of L output channels (L = 16 on AVX-512, 8 on AVX2) needs its
 * input vector only shuffled within each group: output channel c reads
 * input channel c ^ m for m = 0 .. cpg-1 (the group's channels in the order
 * c's own first). Each output element is
 *     y = bias[c];  for kh, for kw (taps inside the input), for m:
 *         y = fma(w[c][(c % cpg) ^ m][kh][kw], x[(c - c % cpg) + ((c % cpg) ^ m)], y)
 * then clamped to [lo, hi] keeping NaN (x < lo ? lo : x > hi ? hi : x): one
 * fused multiply-add per term in this order, whatever the layout, the
 * vector width and the thread count, so a node's bits never depend on how
 * a cut leaves its input. No term multiplies a channel of another group,
 * so an infinity or NaN stays in its group, as in the reference kernel. */
#ifndef PPRT_GCONV_H
#define PPRT_GCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../ir/base.h"
#include "layout.h"

/* N samples of C channels (input and output alike) in groups of cpg, H x W
 * to OH x OW by a KH x KW kernel with strides, dilations and the padding at
 * the start of each axis (the end's follows from OH and OW). */
typedef struct pprt_gconv_shape {
    int64_t N, C, cpg, H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
} pprt_gconv_shape;

typedef struct pprt_gconv pprt_gconv;

/* Whether this CPU runs the vector kernel (AVX2 and FMA; isa.h). */
bool pprt_gconv_cpu(void);
/* Its lanes: 16 where isa.h has AVX-512, else 8. */
int pprt_gconv_lanes(void);
/* Whether s is one the kernel takes: cpg 2, 4 or 8, C a multiple of it,
 * positive sizes, strides and dilations, the output inside the padded
 * input. */
bool pprt_gconv_fits(const pprt_gconv_shape *s);
/* Whether the vector kernel on `lanes` lanes reads or writes layout l
 * (layout.h): channels last with C a multiple of the lanes, or blocked on
 * a multiple of them. */
bool pprt_gconv_layout_ok(const pprt_layout *l, int lanes);

/* The kernel for s from layout in to layout out (the same N and C; their
 * S = H * W and OH * OW), weights w [C][cpg][KH][KW], bias (C, or NULL),
 * clamp [lo, hi] (-inf, inf: none); bf16: the source holds bfloat16 values
 * (--precision bf16), read as the floats they are (so the bits of a
 * conversion to f32 first), the output f32; lanes 0: this CPU's, 8 or 16 (16 only
 * on AVX-512), or 1: the portable loop (any layout, any CPU; for tests and
 * CPUs without AVX2), each giving the same bits. */
pp_status pprt_gconv_create(const pprt_gconv_shape *s, const pprt_layout *in, const pprt_layout *out,
                            const float *w, const float *bias, float lo, float hi, bool bf16, int lanes,
                            pprt_gconv **g, pp_err *err);
/* y must not overlap x; on `threads` OpenMP threads. Padding channels of a
 * blocked output are written 0. */
void pprt_gconv_run(const pprt_gconv *g, const void *x, float *y, int threads);
/* Its lanes: 16, 8, or 1 (the portable loop). */
int pprt_gconv_width(const pprt_gconv *g);
size_t pprt_gconv_bytes(const pprt_gconv *g);
void pprt_gconv_free(pprt_gconv *g);

#endif
