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

/* The geometry lifted to exactly three spatial dims (leading unit dims:
 * kernel 1, stride 1, no padding), so 1-D, 2-D and 3-D problems share one
 * code path (the reference kernels, the CUDA planner's pools). s: stride,
 * d: dilation, p: padding before, p1: after. */
typedef struct pp_geom3 {
    int64_t in[3], k[3], s[3], d[3], p[3], p1[3], out[3];
} pp_geom3;

static inline pp_geom3 pp_geom3_lift(const pp_geom *g) {
    pp_geom3 r;
    const int off = 3 - g->nsp;
    for (int i = 0; i < 3; i++) {
        const int j = i - off;
        r.in[i] = j >= 0 ? g->in[j] : 1;
        r.k[i] = j >= 0 ? g->k[j] : 1;
        r.s[i] = j >= 0 ? g->stride[j] : 1;
        r.d[i] = j >= 0 ? g->dil[j] : 1;
        r.p[i] = j >= 0 ? g->pad0[j] : 0;
        r.p1[i] = j >= 0 ? g->pad1[j] : 0;
        r.out[i] = j >= 0 ? g->out[j] : 1;
    }
    return r;
}

#endif
