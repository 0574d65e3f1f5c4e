/* softmax.h: Softmax and LogSoftmax over an axis before the last of a plain
 * float tensor, viewed [outer, n, inner] with inner > 1: the oneDNN
 * executor's own kernel for them (runtime/dnnl/softmax.c). oneDNN has only
 * its reference implementation for such an axis, and pprt's reference
 * kernel walks each column alone on one thread, in double (CoaT's factorized
 * attention, a softmax over the tokens of [B, heads, N, C]: 38 of
 * coat_lite_tiny's 264 ms per micro-batch of 8; a segmentation head's
 * softmax over the classes of [N, C, H, W]). */
#ifndef PPRT_SOFTMAX_H
#define PPRT_SOFTMAX_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pprt_softmax {
    int64_t outer, n, inner; /* n > 0 marks a step of this kernel */
    bool log;                /* LogSoftmax */
} pprt_softmax;

/* Whether this CPU runs the kernel (AVX2 and FMA; isa.h). */
bool pprt_softmax_cpu(void);
/* y = softmax (or log-softmax) of x over the middle axis (y may not be x),
 * the lanes along inner, 16 where the ISA has AVX-512, else 8; each column
 * is computed by one thread in the same order whatever the thread count
 * and the lanes, so the bits depend on neither. A column with a NaN or a
 * +inf, or all -inf, is all NaN, as in the reference kernel; a -inf gives
 * 0 (Softmax) or -inf (LogSoftmax). Sums in float; e^x by vexp.h (error
 * bounded in tests/unit/test_softmax.c). Only where pprt_softmax_cpu(). */
void pprt_softmax_run(const pprt_softmax *s, const float *x, float *y, int threads);
/* The same on 8 or 16 lanes as asked (16: only on AVX-512; for tests). */
void pprt_softmax_lanes(const pprt_softmax *s, const float *x, float *y, int threads, int lanes);

#endif
