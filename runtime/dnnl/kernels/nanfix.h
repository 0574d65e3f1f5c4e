/* nanfix.h: passes of pprt's own in the oneDNN executor that give NaN and
 * infinities the results the reference kernels give (docs/design-notes.md,
 * "NaN and infinities"), where oneDNN's primitives differ:
 *   CLAMP    y = x < lo ? lo : x > hi ? hi : x (a NaN stays NaN; oneDNN's
 *            relu and clip give 0 or a bound), every float of a buffer;
 *   ROWS     a softmax row holding a NaN becomes all NaN (oneDNN's softmax
 *            keeps the other entries of a row with a NaN or +inf finite);
 *   MAXPOOL  max pooling windows that oneDNN answered with -FLT_MAX (its
 *            start value: a window of only NaN or -inf) recomputed: NaN is
 *            skipped, a window of only NaN gives NaN. */
#ifndef PPRT_NANFIX_H
#define PPRT_NANFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../ir/base.h"

enum { PPRT_NANFIX_NONE, PPRT_NANFIX_CLAMP, PPRT_NANFIX_ROWS, PPRT_NANFIX_MAXPOOL };

/* Where element (n, c, spatial...) of a 3-5-d tensor lies: the sum of
 * (index / block) * stride over the dims, plus the channel index modulo its
 * block (oneDNN's plain and channel-blocked layouts: nchw, nhwc, nChw16c). */
typedef struct pprt_nanfix_layout {
    int64_t stride[5];
    int64_t cblock; /* 1: none */
} pprt_nanfix_layout;

typedef struct pprt_nanfix {
    int kind;
    size_t n;                  /* CLAMP: elements */
    float lo, hi;              /* CLAMP */
    bool bf16;                 /* CLAMP, MAXPOOL: the elements are bfloat16 */
    int64_t outer, len, inner; /* ROWS: the rows are [outer][len][inner], along len */
    /* MAXPOOL: N, C, spatial sizes in and out, window, stride, dilation,
     * padding before; the layouts of source and destination */
    int nsp;
    int64_t N, C, in[3], out[3], k[3], stride[3], dil[3], pad[3];
    pprt_nanfix_layout src, dst;
    size_t dst_n; /* elements in the destination buffer (padding included) */
} pprt_nanfix;

/* Run f on oneDNN's output dst (CLAMP: from src into dst, which may be the
 * same buffer), on `threads` OpenMP threads for CLAMP and for MAXPOOL's scan. */
void pprt_nanfix_run(const pprt_nanfix *f, const float *src, float *dst, int threads);

/* The guard of a fast Relu or Clip (docs/design-notes.md, "NaN and
 * infinities"): oneDNN's relu and clip post-ops compute max(x, lo), which
 * gives lo for NaN, and x86's max raises the invalid-operation flag
 * (MXCSR.IE) for a NaN operand, as does every operation that makes a NaN.
 * clear: the flag cleared in each of `threads` OpenMP threads of the calling
 * thread's team (the threads oneDNN's primitives run on, the same libgomp
 * pool); raised: whether any of them has it set. Only where pprt is built
 * with OpenMP on x86-64 (pprt_fpguard_built); elsewhere raised() is always
 * true, so a guarded step always takes its exact path. Whether the flags do
 * reach here is checked at run time by the executor (exec.c). */
bool pprt_fpguard_built(void);
void pprt_fpguard_clear(int threads);
bool pprt_fpguard_raised(int threads);

#endif
