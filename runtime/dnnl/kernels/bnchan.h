/* bnchan.h: BatchNormalization in training mode and pp.BatchNormGrad over
 * a range of channels of a plain [N, C, S] f32 tensor, for the oneDNN
 * executor (runtime/dnnl/gradref.c runs ranges of channels on the stage's
 * threads): the reference kernels' own bodies (runtime/cpu/chan_sums.h)
 * compiled for AVX-512 and for AVX2, one picked by pprt_cpu_isa() (so
 * ONEDNN_MAX_CPU_ISA caps it), the plain build otherwise. Every copy gives
 * the reference kernels' bits (chan_sums.h says why), so the oneDNN and the
 * reference backends agree bit for bit whatever the ISA. */
#ifndef PPRT_BNCHAN_H
#define PPRT_BNCHAN_H

#include <stdbool.h>
#include <stdint.h>

/* As pprt_bn_channels (runtime/cpu/ref.h). */
void pprt_bnchan_fwd(const float *x, const float *scale, const float *B, const float *mean, const float *var, float *y,
                     float *const st[4], int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool train,
                     int64_t c0, int64_t c1);
/* As pprt_bn_grad_channels (runtime/cpu/ref.h). */
void pprt_bnchan_grad(const float *dy, const float *x, const float *sc, const float *mean_in, const float *var_in,
                      float *dx, float *dsc, float *db, int64_t N, int64_t C, int64_t S, float eps, bool training,
                      int64_t c0, int64_t c1);
/* The copy these run: "avx512", "avx2" or "base" (for tests and reports). */
const char *pprt_bnchan_isa(void);

#endif
