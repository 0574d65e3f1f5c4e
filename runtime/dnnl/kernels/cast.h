/* cast.h: the conversions between f32 and bf16 or f16 of mixed precision's
 * Casts (ppcc --precision: every product's operands rounded, each rounding
 * widened again for the nodes that read f32), on vectors, with the
 * reference kernel's bits (runtime/cpu/ref_math.c):
 *   f32 -> bf16  to nearest even on the bits (a subnormal rounds as the
 *                others: not flushed, unlike vcvtneps2bf16), overflow to
 *                infinity, a NaN the quiet NaN of its sign (0x7fc0);
 *   bf16 -> f32  the upper half of the float's bits (a NaN kept as it is);
 *   f32 -> f16   to nearest even (vcvtps2ph's rounding: subnormals kept,
 *                65520 and up to infinity), a NaN 0x7e00 with its sign;
 *   f16 -> f32   exact, a NaN the quiet NaN of its sign (0x7fc00000).
 * As plain C loops, AVX2 (with F16C) and AVX-512; each element's result
 * depends on that element alone, so every ISA, length and split over
 * threads gives the same bits (tests/unit/test_cast.c checks them against
 * the reference kernel). Under the oneDNN executor the Casts of a training
 * plan at --precision bf16 took 42 % of a ResNet-18 micro-batch's node time
 * on the reference kernel's scalar loops (docs/design-notes.md, "Casts on
 * vectors"). */
#ifndef PPRT_CAST_H
#define PPRT_CAST_H

#include <stddef.h>
#include <stdint.h>

#include "../../isa.h"

typedef enum { PPRT_CAST_F32_BF16, PPRT_CAST_BF16_F32, PPRT_CAST_F32_F16, PPRT_CAST_F16_F32 } pprt_cast_kind;

/* y[0..n) = x[0..n) converted as `kind` says, on the vectors of `isa` (at
 * most what pprt_cpu_isa() gives; PPRT_ISA_BASE: plain C). */
void pprt_cast(pprt_isa isa, pprt_cast_kind kind, const void *x, void *y, size_t n);

#endif
