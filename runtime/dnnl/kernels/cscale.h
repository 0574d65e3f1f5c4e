/* cscale.h: a tensor scaled per sample and channel, y[n, c, s] = x[n, c, s]
 * * k[n, c]: the squeeze-and-excitation Mul (x [N, C, spatial...] times k
 * [N or 1, C, 1...]) over f32 or bf16 tensors in the layouts of layout.h,
 * the oneDNN executor's own kernel for it (docs/dnnl.md). oneDNN's binary
 * with that broadcast took 0.3-0.4 ns an element in f32 on two cores of the
 * Intel Xeon of bench/RESULTS.md, twice what pprt's SiLU takes.
 *
 * Each element is the product in f32 rounded once: f32 as it is, bf16 to
 * nearest even as vcvtneps2bf16 rounds (bf16x16.h), so the same bits in
 * every layout, on any thread count and in place or not; padding channels
 * of a blocked layout are written 0. */
#ifndef PPRT_CSCALE_H
#define PPRT_CSCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

typedef struct pprt_cscale {
    pprt_layout l; /* x's and y's layout */
    int64_t k_stride_n;  /* elements from one sample's k to the next's (0: one k for all); channel c at + c */
    bool bf16;           /* x and y bf16 (else f32) */
    bool k_bf16;         /* k bf16 (else f32) */
} pprt_cscale;

/* Whether this CPU runs the kernel for bf16 tensors (AVX-512 F, BW, VL);
 * f32 runs everywhere (16 lanes on AVX-512, else plain C). */
bool pprt_cscale_bf16_cpu(void);
/* y may be x; on `threads` OpenMP threads. */
void pprt_cscale_run(const pprt_cscale *c, const void *x, void *y, const void *k, int threads);

#endif
