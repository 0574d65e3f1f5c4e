/* gap.h: GlobalAveragePool over f32 or bf16 tensors in the layouts of
 * layout.h, alone or after a SiLU in the same pass (y = silu(x) written, the
 * means taken of y as written): the oneDNN executor's own kernel for it
 * (docs/dnnl.md). EfficientNet's squeeze-and-excitation blocks pool the
 * output of a SiLU; one pass saves reading that tensor again (0.2-0.3 ms of
 * EfficientNet-B0's 3.2-5.5 per image on the Intel Xeon of bench/RESULTS.md).
 *
 * The sum of each channel is fixed by its shape alone: pixels in runs of
 * PPRT_GAP_RUN; in a run, pixel p added to partial sum p % 4 (in order of
 * p; f32), the run's sum (s0 + s1) + (s2 + s3); then the runs' sums in
 * order, over S, the mean rounded once more to bf16 where it is stored so
 * (to nearest even, as vcvtneps2bf16). So the means have the same bits in
 * every layout, on any thread count and vector width, fused or not (a cut
 * between the SiLU and the pool changes no bit). */
#ifndef PPRT_GAP_H
#define PPRT_GAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

enum { PPRT_GAP_RUN = 64 };

typedef struct pprt_gap {
    pprt_layout l; /* x's (and y's) */
    bool bf16;           /* x (and y) bf16, else f32 */
    bool out_bf16;       /* the means bf16, else f32; N x C, channels contiguous */
    bool silu;           /* y = silu(x) first (silu.h: f32 where pprt_silu_cpu, bf16 where pprt_silu_bf16_cpu) */
} pprt_gap;

/* Bytes of scratch a run needs (the runs' sums). */
size_t pprt_gap_scratch(const pprt_gap *g);
/* The means of x (g->silu: y = silu(x), y may be x, and the means of y)
 * into mean, on `threads` OpenMP threads. */
void pprt_gap_run(const pprt_gap *g, const void *x, void *y, void *mean, void *scratch, int threads);

#endif
