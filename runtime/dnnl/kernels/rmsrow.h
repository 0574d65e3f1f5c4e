/* rmsrow.h: RMSNormalization over a range of rows of a plain [outer,
 * inner] f32 tensor for the oneDNN executor (runtime/dnnl/gradref.c runs
 * ranges of rows on the stage's threads; oneDNN 2.6 has no RMS norm): the
 * reference kernel's arithmetic (runtime/cpu/ref.h pprt_rms_rows: a row's
 * squares into eight double partials, element i into partial i mod 8,
 * folded in chan_sums.h's tree; y = (float)(x * inv * scale) in double)
 * in AVX-512 or AVX2 vectors, picked by pprt_cpu_isa() (so
 * ONEDNN_MAX_CPU_ISA caps it), the reference itself otherwise. Every copy
 * gives the reference's bits. */
#ifndef PPRT_RMSROW_H
#define PPRT_RMSROW_H

#include <stdint.h>

/* As pprt_rms_rows (runtime/cpu/ref.h). */
void pprt_rmsrow(const float *x, const float *sc, float *y, int64_t inner, float eps, int64_t o0, int64_t o1);
/* The copy it runs: "avx512", "avx2" or "base" (for tests). */
const char *pprt_rmsrow_isa(void);

#endif
