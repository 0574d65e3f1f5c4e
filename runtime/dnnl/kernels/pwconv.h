/* pwconv.h: a pointwise (1x1, stride 1, one group) convolution over bf16
 * tensors stored channels last, on AMX (Intel Xeon 4th generation on): the
 * oneDNN executor's own kernel under --precision bf16 where it takes in one
 * pass what oneDNN needs two or three steps for (docs/design-notes.md,
 * "One pass for EfficientNet's pointwise convolutions"):
 *   - the SiLU after an expansion convolution, in its epilogue (oneDNN's
 *     swish post-op divides; pprt's SiLU was a pass of its own);
 *   - the squeeze-and-excitation Mul before a projection, as the source
 *     rows are staged for the tiles (cscale.h was a pass of its own);
 *   - the residual added after it (as oneDNN's sum post-op).
 *
 * A channels-last tensor is a matrix of rows (pixels) by channels, so the
 * convolution is Y[rows, N] = X[rows, K] W^T. Per block of 32 rows, X's
 * rows are copied (each element times its sample's scale k[c] when there
 * is one, the product rounded to bf16 to nearest even exactly as cscale.h
 * rounds it) into a zero-padded staging area; the tiles sum products of
 * 32 channels at a time into f32 (AMX's dot products of bf16 pairs); the
 * epilogue adds the bias, then the SiLU (silu16.h) or the residual (a bf16
 * tensor of Y's shape, exact in f32), and rounds to bf16 to nearest even.
 *
 * Results differ from oneDNN's by the order of the sums (both in f32) and
 * by one rounding fewer (the convolution's output is not rounded to bf16
 * before the SiLU); tests/unit/test_pwconv.c checks them against sums in
 * double over the same bf16 operands. Rows are shared among threads in
 * whole blocks, and every element's arithmetic is fixed by its row and
 * column alone, so the bits do not depend on the thread count. */
#ifndef PPRT_PWCONV_H
#define PPRT_PWCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../ir/base.h"

typedef enum { PPRT_PW_NONE, PPRT_PW_SILU, PPRT_PW_SIGMOID } pprt_pw_act;

typedef struct pprt_pw pprt_pw;

/* Whether this CPU runs the kernel: AMX-TILE and AMX-BF16 with AVX-512 BW,
 * VL and BF16, the kernel's tile state granted by Linux, and no cap of
 * ONEDNN_MAX_CPU_ISA below AMX (isa.h). */
bool pprt_pw_cpu(void);
/* What a kernel computes: rows (pixels of all samples) of K channels to N;
 * act after the bias; scale: each source element first times k[c] of its
 * sample (the Mul before it; rows_per_sample rows a sample, sample s's K
 * values at k + s * k_stride, f32 or, where k_bf16, bf16). */
typedef struct pprt_pw_shape {
    int64_t rows, K, N;
    pprt_pw_act act;
    bool scale, k_bf16;
    int64_t rows_per_sample, k_stride;
} pprt_pw_shape;

/* Whether s fits: positive rows, K and N even and at most 4096. */
bool pprt_pw_fits(const pprt_pw_shape *s);

/* The kernel for s with weights w [N][K] (f32, rounded to bf16 to nearest
 * even as oneDNN's reorder rounds them) and bias [N] (f32, or NULL), for up
 * to max_threads threads (each with its own staging area). PP_ENOMEM, or
 * PP_EUNSUP where !pprt_pw_fits. */
pp_status pprt_pw_create(const pprt_pw_shape *s, const float *w, const float *bias, int max_threads, pprt_pw **out,
                         pp_err *err);
void pprt_pw_free(pprt_pw *p);
/* Bytes it holds (packed weights, bias, staging areas). */
size_t pprt_pw_bytes(const pprt_pw *p);
pprt_pw_act pprt_pw_act_of(const pprt_pw *p);

/* Rows of x (K bf16 each) to rows of y (N bf16 each), k the scale (where
 * the shape has one), z the residual (rows of N bf16, added after the
 * bias; NULL: none; it may be y), on `threads` OpenMP threads (at most the
 * max_threads it was made for). */
void pprt_pw_run(const pprt_pw *p, const uint16_t *x, uint16_t *y, const void *k, const uint16_t *z, int threads);

#endif
