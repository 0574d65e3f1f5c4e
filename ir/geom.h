/* geom.h: window geometry of convolution and pooling (ONNX semantics:
 * kernel_shape, strides, dilations, pads, auto_pad, ceil_mode), computed once
 * and shared by shape inference and the kernels so they can never disagree. */
#ifndef PP_GEOM_H
#define PP_GEOM_H

#include "base.h"

#define PP_MAX_SPATIAL 3

typedef struct pp_geom {
    int nsp;                           /* spatial rank: 1..3 */
    int64_t in[PP_MAX_SPATIAL];        /* input spatial dims */
    int64_t k[PP_MAX_SPATIAL];         /* kernel dims */
    int64_t stride[PP_MAX_SPATIAL];
    int64_t dil[PP_MAX_SPATIAL];
    int64_t pad0[PP_MAX_SPATIAL];      /* padding before */
    int64_t pad1[PP_MAX_SPATIAL];      /* padding after */
    int64_t out[PP_MAX_SPATIAL];       /* output spatial dims */
} pp_geom;

/* x: the input shape [N, C, spatial...]. kernel: spatial kernel dims (from the
 * weight for Conv, from kernel_shape for pools; NULL = read kernel_shape).
 * allow_ceil: accept ceil_mode (pools). Validates every attribute against the
 * spatial rank; errors name the attribute. */
pp_status pp_geom_make(pp_attrs attrs, const pp_shape *x, const int64_t *kernel,
                       bool allow_ceil, pp_geom *g, pp_err *err);

#endif
