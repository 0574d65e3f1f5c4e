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
/* Whether it beats oneDNN's swish here: measured so on AVX2 (Zen 3) and on
 * AVX-512 (Zen 5; docs/design-notes.md, "Our own SiLU"). */
bool pprt_silu_wins(void);
/* y[i] = x[i] * sigmoid(x[i]) for i < n (y may be x), on `threads` OpenMP
 * threads, 16 lanes where the ISA (isa.h) has AVX-512, else 8; every element
 * gets the same arithmetic whatever n, the thread count and the lanes
 * (tests/unit/test_silu.c bounds its error and compares the two). Only where
 * pprt_silu_cpu(). */
void pprt_silu(const float *x, float *y, size_t n, int threads);
/* The same on the calling thread alone (inside another kernel's threads). */
void pprt_silu_serial(const float *x, float *y, size_t n);
/* The same on 8 or 16 lanes as asked (16: only where pprt_cpu_isa() has
 * AVX-512; for tests). */
void pprt_silu_lanes(const float *x, float *y, size_t n, int threads, int lanes);

#endif
