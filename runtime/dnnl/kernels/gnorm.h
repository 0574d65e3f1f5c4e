/* gnorm.h: pp.GroupNorm (GroupNormalization with a scale and bias per
 * channel after it, as the fusion pass makes it of torch's export) over f32
 * tensors in the layouts of layout.h (plain, channels last, blocked on
 * channels): the oneDNN executor's own kernel for it (runtime/dnnl/norm.c).
 *
 * The group's mean and variance are summed in double in one fixed order,
 * the same in every layout, for every thread count and vector width: each
 * channel's pixels of a part of P pixels (P from S alone) one after
 * another; a channel's parts in order; the group's channels in order.
 * Layouts that hold a pixel's channels side by side (channels last,
 * blocked: what convolutions write) sum a vector of channels per pixel;
 * plain sums eight channels side by side, one pixel at a time.
 * Then, per element, as the reference kernel: t = (x - mean) / sqrt(var +
 * eps) rounded to float, y = t * scale[c] + bias[c] in float. So a node's
 * bits never depend on the layout a cut leaves its input in. They are not
 * the reference kernel's bits, which sum each group from its first element
 * to its last in one double; the two differ by double rounding in the
 * moments (about 1e-16 relative), and so by at most an ulp or so in y. */
#ifndef PPRT_GNORM_H
#define PPRT_GNORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../ir/base.h"
#include "layout.h"

typedef struct pprt_gnorm pprt_gnorm;

/* What the kernel applies to its output: nothing, a Relu (y < 0 ? 0 : y,
 * which keeps NaN and -0), or SiLU on silu.h's kernel (only where
 * pprt_silu_cpu()). Either gives the bits it gives as a step of its own. */
typedef enum { PPRT_GN_ACT_NONE, PPRT_GN_ACT_RELU, PPRT_GN_ACT_SILU } pprt_gn_act;

/* The kernel for layout l (pprt_layout: its geometry) in `groups`
 * groups (dividing l->C), epsilon eps, scale and bias (C each), then act;
 * bf16: the source holds bfloat16 values (--precision bf16), read as the
 * floats they are (so the bits of a conversion to f32 first). */
pp_status pprt_gnorm_create(const pprt_layout *l, int64_t groups, float eps, const float *scale,
                            const float *bias, pprt_gn_act act, bool bf16, pprt_gnorm **out, pp_err *err);
pprt_gn_act pprt_gnorm_act(const pprt_gnorm *g);
/* y (f32, in x's layout) may be x when x is f32; on `threads` OpenMP
 * threads. Padding channels of a blocked layout are written 0. */
void pprt_gnorm_run(pprt_gnorm *g, const void *x, float *y, int threads);
/* The part size in pixels for S pixels (a multiple of 8, at least 64, at
 * most 32 parts): part of the order of the sums above. */
int64_t pprt_gnorm_part(int64_t S);
/* For tests: channel c's mean and 1 / sqrt(var + eps) in sample i of the
 * last run's last round (a round holds min(N, about 4 MiB / sample)
 * samples). */
void pprt_gnorm_stats(const pprt_gnorm *g, int64_t i, int64_t c, double *mean, double *inv);
size_t pprt_gnorm_bytes(const pprt_gnorm *g);
void pprt_gnorm_free(pprt_gnorm *g);

#endif
