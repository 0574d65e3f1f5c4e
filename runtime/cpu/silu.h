/* silu.h: SiLU, y = x * sigmoid(x), over f32 arrays on AVX2 and FMA: the
 * oneDNN executor's own kernel for SiLU nodes (docs/design-notes.md, "Our
 * own SiLU"). */
#ifndef PPRT_SILU_H
#define PPRT_SILU_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this CPU runs the kernel (AVX2 and FMA; isa.h, so not under
 * ONEDNN_MAX_CPU_ISA=SSE41). */
bool pprt_silu_cpu(void);
/* Whether it beats oneDNN's swish here: measured so on AVX2 without AVX-512
 * only (docs/design-notes.md, "Our own SiLU"); on an AVX-512 CPU with
 * ONEDNN_MAX_CPU_ISA=AVX2 too, where oneDNN runs its AVX2 swish. */
bool pprt_silu_wins(void);
/* y[i] = x[i] * sigmoid(x[i]) for i < n (y may be x), on `threads` OpenMP
 * threads; every element gets the same arithmetic whatever n and the thread
 * count (tests/unit/test_silu.c bounds its error). Only where pprt_silu_cpu(). */
void pprt_silu(const float *x, float *y, size_t n, int threads);

#endif
