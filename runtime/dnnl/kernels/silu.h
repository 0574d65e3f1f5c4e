/* silu.h: SiLU, y = x * sigmoid(x), over f32 arrays on AVX2 and FMA: the
 * oneDNN executor's own kernel for SiLU nodes (docs/design-notes.md, "Our
 * own SiLU"). */
#ifndef PPRT_SILU_H
#define PPRT_SILU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* bf16 arrays (--precision bf16; bf16 as the upper half of an f32), 16
 * lanes: sigmoid within 1.4e-4 of exact (no division), the product rounded
 * to bf16 to nearest even (so within 2^-8 + 1.4e-4 of exact, relative);
 * NaN and infinities as the reference kernel gives them (silu.c); the same
 * bits whatever n and the thread count. Only where pprt_silu_bf16_cpu()
 * (AVX-512 F and BW). */
bool pprt_silu_bf16_cpu(void);
void pprt_silu_bf16(const uint16_t *x, uint16_t *y, size_t n, int threads);
/* The same on the calling thread alone. */
void pprt_silu_bf16_serial(const uint16_t *x, uint16_t *y, size_t n);
/* Whether it converts to bf16 by AVX512_BF16's instruction (else by
 * integer steps that give the same bits); _how picks (tests). */
bool pprt_silu_bf16_native(void);
void pprt_silu_bf16_how(const uint16_t *x, uint16_t *y, size_t n, int threads, bool native);

#endif
