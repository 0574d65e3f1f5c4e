/* bnorm.h: BatchNormalization in inference, optionally followed by a ReLU,
 * over f32 tensors in oneDNN's plain, channels-last and channel-blocked
 * layouts: the oneDNN executor's own kernel for it (docs/dnnl.md). Every
 * element gets y = (x - mean[c]) * k[c] + bias[c], k = scale / sqrt(var +
 * eps) rounded once to float, whatever the layout, the thread count and the
 * vector width, so a node's bits never depend on the layout a cut leaves its
 * input in; the ReLU (y < 0 ? 0 : y, which keeps NaN) changes no other bit,
 * so BatchNormalization and Relu give the same bits as one step or two. */
#ifndef PPRT_BNORM_H
#define PPRT_BNORM_H

#include <stdbool.h>
#include <stdint.h>

#include "../../../ir/base.h"
#include "layout.h"

typedef struct pprt_bnorm pprt_bnorm;

/* The kernel for layout l with the node's scale, bias, mean and var (C
 * each) and epsilon; relu: a ReLU after it. */
pp_status pprt_bnorm_create(const pprt_layout *l, const float *scale, const float *bias, const float *mean,
                            const float *var, float eps, bool relu, pprt_bnorm **out, pp_err *err);
/* y may be x; on `threads` OpenMP threads. */
void pprt_bnorm_run(const pprt_bnorm *b, const float *x, float *y, int threads);
bool pprt_bnorm_relu(const pprt_bnorm *b);
size_t pprt_bnorm_bytes(const pprt_bnorm *b);
void pprt_bnorm_free(pprt_bnorm *b);

#endif
