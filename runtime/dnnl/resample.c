/* resample.c: Resize on oneDNN's resampling, for what oneDNN computes as
 * ONNX defines it: linear interpolation over 1 to 3 spatial axes with the
 * half_pixel coordinate transform (pytorch_half_pixel where every resized
 * axis has more than one output), no antialiasing, each axis's scale equal
 * to its output over its input extent (oneDNN maps coordinates with that
 * ratio), N and C kept. Nearest, every coordinate transform and rounding:
 * pprt's gather (runtime/dnnl/kernels/nearest.h) with the reference kernel's index
 * maps, so its elements. Source and destination are plain whatever the
 * neighbours' layouts, so the kernel, and so the bits, do not depend on
 * where a cut falls. Everything else runs on the reference kernel. */
#include <math.h>

#include "../../ir/shape_nn.h"
#include "../cpu/ref.h" /* pprt_resize_nearest_map */
#include "dnnl_exec.h"
#include "kernels/nearest.h"

static void run_nearest(void *ctx, void *const io[N_IO], int team) {
    pprt_nearest_run(ctx, io[IO_SRC], io[IO_DST], team);
}

/* Nearest: each axis's index map (the reference kernel's), then a gather */
static pp_status build_nearest(pprt_exec *x, const pprt_node *n, const pp_resize *r, pp_err *err) {
    const int xi = n->in[0], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape, *ys = &T(x, yi)->shape;
    if (xs->rank < 1 || xs->rank > PPRT_NEAREST_RANK || numel_of(xs) == 0) return unsup(err, "rank, or empty");
    pprt_nearest k = {.rank = xs->rank};
    for (int d = 0; d < xs->rank; d++) {
        if (r->out[d] != ys->dim[d]) return unsup(err, "output shape");
        int64_t *map = dn_own_alloc(x, (size_t)r->out[d] * sizeof *map);
        if (!map) return PP_FAIL(err, PP_ENOMEM, "out of memory for a Resize's index map");
        if (!pprt_resize_nearest_map(r, d, xs->dim[d], map)) return unsup(err, "a position outside the input");
        k.in[d] = xs->dim[d], k.out[d] = ys->dim[d], k.map[d] = map;
    }
    step st;
    PP_TRY(dn_own_step(x, run_nearest, &k, sizeof k, NULL, "pprt:nearest", &st, err));
    return dn_push_own_io(x, st, xi, yi, err);
}

static pp_status build_resample(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int xi = n->in[0], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape, *ys = &T(x, yi)->shape;
    if (!f32(x, xi) || !f32(x, yi) || numel_of(ys) == 0) return unsup(err, "not a non-empty f32 tensor");
    pp_tinfo ti[4];
    if (n->n_in > 4) return unsup(err, "more than 4 inputs");
    for (int k = 0; k < n->n_in; k++) {
        if (k > 0 && n->in[k] >= 0 && !is_weight(x, n->in[k])) return unsup(err, "computed roi, scales or sizes");
        ti[k] = dn_tinfo(x, n->in[k]);
    }
    pp_resize r;
    if (pp_resize_parse(attrs_of(x, n), ti, n->n_in, &r, err) != PP_OK) return unsup(err, "its attributes");
    if (r.mode == PP_RS_NEAREST) return build_nearest(x, n, &r, err);
    if (xs->rank < 3 || xs->rank > 5) return unsup(err, "rank");
    if (r.mode != PP_RS_LINEAR) return unsup(err, "a mode other than linear or nearest");
    if (r.antialias) return unsup(err, "antialias");
    if (r.coord != PP_RC_HALF_PIXEL && r.coord != PP_RC_PYTORCH_HALF_PIXEL)
        return unsup(err, "a coordinate transform other than half_pixel");
    for (int d = 0; d < xs->rank; d++) {
        if (r.out[d] != ys->dim[d]) return unsup(err, "output shape");
        const bool kept = r.out[d] == xs->dim[d] && fabs(r.scale[d] - 1.0) <= 1e-9;
        if (d < 2 && !kept) return unsup(err, "N or C resized");
        if (d >= 2 && !kept) {
            /* oneDNN maps with out / in; pytorch_half_pixel differs from half_pixel for one output */
            if (fabs(r.scale[d] * (double)xs->dim[d] - (double)r.out[d]) > 1e-9 * (double)r.out[d])
                return unsup(err, "a scale other than output / input extent");
            if (r.out[d] == 1) return unsup(err, "an axis resized to one element");
        }
    }
    dnnl_memory_desc_t src, dst;
    PP_TRY(dn_plain_md(xs->dim, xs->rank, &src, err));
    PP_TRY(dn_plain_md(ys->dim, ys->rank, &dst, err));
    dnnl_resampling_desc_t d;
    DN(dnnl_resampling_forward_desc_init(&d, dnnl_forward_inference, dnnl_resampling_linear, NULL, &src, &dst),
       "resampling");
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_plain_pd(x, &d, "resampling", &pd, err));
    if (dn_ref_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN has only its reference implementation for this resampling");
    }
    dnnl_memory_t sm, dm;
    pp_status rs;
    if ((rs = dn_plain_view(x, xi, &src, &sm, err)) != PP_OK || (rs = dn_tensor_mem(x, yi, &dst, &dm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return rs;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    return dn_push_pd(x, pd, STEP_MAIN, args, 2, err);
}

const dn_family dn_resample = {.build = build_resample};
