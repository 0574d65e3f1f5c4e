/* gradref.c: pp.UnaryGrad, pp.MaxPoolGrad, pp.BatchNormGrad and pp.LayerNormGrad (ir/ops_grad.def),
 * a BatchNormalization oneDNN does not take (training mode: its running
 * statistics are outputs) and RMSNormalization (oneDNN 2.6 has none), under the oneDNN executor: the reference kernels
 * themselves (runtime/cpu/ref_grad.c, ref_kernels.c), run over parts of
 * the node on the stage's threads instead of whole on one. Each output element is computed by the
 * same code from the same inputs in the same order as the whole kernel
 * computes it, so the bits are the reference's whatever the threads and the
 * stage: pp.UnaryGrad in ranges of elements, pp.MaxPoolGrad in ranges of
 * its (image, channel) planes (a window never leaves its plane; the first
 * largest input, NaN first, takes the gradient as in the reference),
 * pp.BatchNormGrad and BatchNormalization in ranges of channels (the
 * reference's bodies compiled for the CPU's vectors, kernels/bnchan.h: each
 * channel's sums in double, in the reference's order).
 *
 * Why not oneDNN's backward primitives: its batch normalization backward
 * sums in float, over the batch statistics of its own forward (which the
 * plan does not run: the forward BatchNormalization of a training plan is
 * a reference node, its running statistics an output oneDNN does not
 * give); its max pooling backward needs the forward's workspace or routes
 * ties otherwise. Like the other reference nodes these read and write
 * plain tensors (no input of theirs is laid out for them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/op_fns.h"
#include "../cpu/ref.h"
#include "dnnl_exec.h"
#include "kernels/bnchan.h"
#include "kernels/cast.h"
#include "kernels/parts.h"
#include "kernels/rmsrow.h"

/* A Cast between f32 and bf16 or f16 (mixed precision's, around every
 * product) runs on pprt's vector kernel (kernels/cast.h, the reference's
 * bits), and from this many elements in ranges over the stage's threads:
 * one thread's loop was 10 % of a bf16 ResNet-18 step's samples (Zen 4,
 * 2026-12-05). Each element's conversion is the same whatever the range
 * and the vectors: the same bits. */
#define CAST_PARTS_MIN 32768

static bool half_f32(pp_dtype a, pp_dtype b) {
    return (a == PP_F32 && (b == PP_BF16 || b == PP_F16)) || (b == PP_F32 && (a == PP_BF16 || a == PP_F16));
}

bool dn_ref_by_parts(const pprt_exec *x, const pprt_node *n) {
    if (n->op == PP_OP_CAST)
        return n->n_in == 1 && n->n_out == 1 && n->in[0] >= 0 && n->out[0] >= 0 &&
               half_f32(T(x, n->in[0])->dtype, T(x, n->out[0])->dtype) &&
               pp_shape_eq(&T(x, n->in[0])->shape, &T(x, n->out[0])->shape) &&
               (x->o.casts || (x->stage_threads > 1 && numel_of(&T(x, n->out[0])->shape) >= CAST_PARTS_MIN));
    if (n->op != PP_OP_UNARYGRAD && n->op != PP_OP_MAXPOOLGRAD && n->op != PP_OP_BATCHNORMGRAD &&
        n->op != PP_OP_BATCHNORM && n->op != PP_OP_LAYERNORMGRAD && n->op != PP_OP_RMSNORM)
        return false;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0 || !f32(x, n->in[k])) return false;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && !f32(x, n->out[k])) return false;
    if (n->n_in < 1 || n->n_out < 1 || n->out[0] < 0) return false;
    const pp_shape *ys = &T(x, n->out[0])->shape;
    switch (n->op) {
    case PP_OP_UNARYGRAD: /* X, Y, dY and dX of one shape */
        if (n->n_in != 3) return false;
        for (int k = 0; k < 3; k++)
            if (!pp_shape_eq(&T(x, n->in[k])->shape, ys)) return false;
        return true;
    case PP_OP_RMSNORM: { /* X, scale of the normalized dims' count (not a broadcast one) -> Y */
        int axis;
        float eps;
        int64_t outer, inner;
        return n->n_in == 2 && n->n_out == 1 && pp_shape_eq(&T(x, n->in[0])->shape, ys) &&
               pp_norm_rows(attrs_of(x, n), ys, &axis, &eps, &outer, &inner, NULL) == PP_OK &&
               numel_of(&T(x, n->in[1])->shape) == inner;
    }
    case PP_OP_LAYERNORMGRAD: /* dY, X (its shape), scale -> dX, dscale, dB */
        return n->n_in == 3 && n->n_out == 3 && n->out[1] >= 0 && n->out[2] >= 0 &&
               pp_shape_eq(&T(x, n->in[0])->shape, ys) && pp_shape_eq(&T(x, n->in[1])->shape, ys);
    case PP_OP_MAXPOOLGRAD: /* dY, X: [N, C, spatial...] */
        return n->n_in == 2 && ys->rank >= 3 && T(x, n->in[0])->shape.rank == ys->rank &&
               pp_shape_eq(&T(x, n->in[1])->shape, ys);
    case PP_OP_BATCHNORM: /* X, scale, B, mean, var -> Y and 0-4 statistics, each of C, all present */
        if (n->n_in != 5 || n->n_out > 5 || ys->rank < 2 || !pp_shape_eq(&T(x, n->in[0])->shape, ys)) return false;
        for (int k = 1; k < 5; k++) {
            const pp_shape *ps = &T(x, n->in[k])->shape;
            if (ps->rank != 1 || ps->dim[0] != ys->dim[1]) return false;
        }
        for (int k = 1; k < n->n_out; k++) {
            if (n->out[k] < 0) return false;
            const pp_shape *ps = &T(x, n->out[k])->shape;
            if (ps->rank != 1 || ps->dim[0] != ys->dim[1]) return false;
        }
        return true;
    default: /* pp.BatchNormGrad: dY, X, scale, mean, var */
        return n->n_in == 5 && ys->rank >= 2 && pp_shape_eq(&T(x, n->in[1])->shape, ys) &&
               pp_shape_eq(&T(x, n->in[0])->shape, ys);
    }
}

static int64_t numel_from(const pp_shape *s, int d) {
    int64_t v = 1;
    for (int i = d; i < s->rank; i++) v *= s->dim[i];
    return v;
}

/* A tensor over tid's bytes from element `first`, shaped s. */
static pprt_tensor part(const pprt_exec *x, int tid, pp_shape s, int64_t first) {
    return (pprt_tensor){PP_F32, s, (float *)x->ptr[tid] + first};
}

/* Units [a, b) of node n: elements, planes or channels. */
static pp_status run_part(const pprt_exec *x, const pprt_node *n, int64_t a, int64_t b, pp_err *err) {
    const pp_attrs at = attrs_of(x, n);
    if (n->op == PP_OP_BATCHNORMGRAD) {
        float eps;
        int64_t training;
        PP_TRY(pp_attr_float(at, "epsilon", 1e-5f, &eps, err));
        PP_TRY(pp_attr_int(at, "training_mode", 0, &training, err));
        const pp_shape *xs = &T(x, n->in[1])->shape;
        float *dsc = n->n_out > 1 && n->out[1] >= 0 ? x->ptr[n->out[1]] : NULL;
        float *db = n->n_out > 2 && n->out[2] >= 0 ? x->ptr[n->out[2]] : NULL;
        pprt_bnchan_grad(x->ptr[n->in[0]], x->ptr[n->in[1]], x->ptr[n->in[2]], x->ptr[n->in[3]],
                              x->ptr[n->in[4]], x->ptr[n->out[0]], dsc, db, xs->dim[0], xs->dim[1], numel_from(xs, 2),
                              eps, training != 0, a, b);
        return PP_OK;
    }
    if (n->op == PP_OP_BATCHNORM) {
        float eps, momentum;
        PP_TRY(pp_attr_float(at, "epsilon", 1e-5f, &eps, err));
        PP_TRY(pp_attr_float(at, "momentum", 0.9f, &momentum, err));
        const pp_shape *xs = &T(x, n->in[0])->shape;
        float *st[4] = {NULL, NULL, NULL, NULL};
        for (int k = 1; k < n->n_out && k <= 4; k++) st[k - 1] = x->ptr[n->out[k]];
        pprt_bnchan_fwd(x->ptr[n->in[0]], x->ptr[n->in[1]], x->ptr[n->in[2]], x->ptr[n->in[3]], x->ptr[n->in[4]],
                         x->ptr[n->out[0]], st, xs->dim[0], xs->dim[1], numel_from(xs, 2), eps, momentum,
                         pp_bn_training(at, n->n_out), a, b);
        return PP_OK;
    }
    pprt_tensor in[3], out[1];
    pprt_scratch sc = {0};
    pp_status s;
    if (n->op == PP_OP_CAST) { /* elements [a, b) */
        const pp_dtype ti = T(x, n->in[0])->dtype, to = T(x, n->out[0])->dtype;
        const pprt_cast_kind k = to == PP_BF16   ? PPRT_CAST_F32_BF16
                                 : to == PP_F16  ? PPRT_CAST_F32_F16
                                 : ti == PP_BF16 ? PPRT_CAST_BF16_F32
                                                 : PPRT_CAST_F16_F32;
        const void *src = (const char *)x->ptr[n->in[0]] + a * (int64_t)(pp_dtype_bits(ti) / 8);
        void *dst = (char *)x->ptr[n->out[0]] + a * (int64_t)(pp_dtype_bits(to) / 8);
        if (x->o.casts) {
            pprt_cast(pprt_cpu_isa(), k, src, dst, (size_t)(b - a));
            int64_t finite = 0;
            (void)pp_attr_int(at, "pp_finite", 0, &finite, NULL);
            if (finite && ti == PP_F32) pprt_half_finite((const float *)x->ptr[n->in[0]], x->ptr[n->out[0]], to, a, b);
            return PP_OK;
        }
        const pp_shape s1 = {1, {b - a}};
        in[0] = (pprt_tensor){ti, s1, (void *)src}, out[0] = (pprt_tensor){to, s1, dst};
        return kern_CAST(at, in, 1, out, 1, &sc, err);
    }
    if (n->op == PP_OP_UNARYGRAD) {
        const pp_shape s1 = {1, {b - a}};
        for (int k = 0; k < 3; k++) in[k] = part(x, n->in[k], s1, a);
        out[0] = part(x, n->out[0], s1, a);
        s = kern_UNARYGRAD(at, in, 3, out, 1, &sc, err);
    } else { /* planes [a, b) as b - a images of one channel */
        pp_shape xs = T(x, n->in[1])->shape, ds = T(x, n->in[0])->shape;
        const int64_t pin = numel_from(&xs, 2), pout = numel_from(&ds, 2);
        xs.dim[0] = ds.dim[0] = b - a;
        xs.dim[1] = ds.dim[1] = 1;
        in[0] = part(x, n->in[0], ds, a * pout);
        in[1] = part(x, n->in[1], xs, a * pin);
        out[0] = part(x, n->out[0], xs, a * pin);
        s = kern_MAXPOOLGRAD(at, in, 2, out, 1, &sc, err);
    }
    pprt_scratch_free(&sc);
    return s;
}

typedef struct grad_job {
    const pprt_exec *x;
    const pprt_node *n;
    int64_t units, parts;
    pp_status *st; /* per part */
    pp_err *err;   /* per part */
} grad_job;

static void grad_part(void *ctx, int64_t t) {
    const grad_job *j = ctx;
    j->st[t] = run_part(j->x, j->n, j->units * t / j->parts, j->units * (t + 1) / j->parts, &j->err[t]);
}

/* pp.LayerNormGrad in the reference kernel's two passes (ref.h
 * pprt_ln_grad_rows and _cols, its very bits) over the stage's threads:
 * ranges of rows, then ranges of columns. On one thread it was 1 % of
 * ViT-B/16's training step, the other core idle. */
typedef struct ln_job {
    const float *dy, *x, *scale;
    float *dx, *ds, *db;
    double *mu, *inv, eps;
    int64_t outer, inner, parts;
} ln_job;

static void ln_rows(void *ctx, int64_t t) {
    const ln_job *j = ctx;
    pprt_ln_grad_rows(j->x, j->dy, j->scale, j->dx, j->mu, j->inv, j->inner, j->eps, j->outer * t / j->parts,
                      j->outer * (t + 1) / j->parts);
}

static void ln_cols(void *ctx, int64_t t) {
    const ln_job *j = ctx;
    pprt_ln_grad_cols(j->x, j->dy, j->mu, j->inv, j->ds, j->db, j->outer, j->inner, j->inner * t / j->parts,
                      j->inner * (t + 1) / j->parts);
}

static pp_status ln_grad_run(pprt_exec *x, const pprt_node *n, int64_t parts, pp_err *err) {
    int axis;
    float eps;
    ln_job j = {0};
    PP_TRY(pp_norm_rows(attrs_of(x, n), &T(x, n->in[1])->shape, &axis, &eps, &j.outer, &j.inner, err));
    if (T(x, n->in[2])->shape.rank < 1 || numel_of(&T(x, n->in[2])->shape) != j.inner)
        return PP_FAIL(err, PP_EINVAL, "node '%s' (pp.LayerNormGrad): the scale holds %lld values, the rows %lld",
                       n->name, (long long)numel_of(&T(x, n->in[2])->shape), (long long)j.inner);
    j.dy = x->ptr[n->in[0]], j.x = x->ptr[n->in[1]], j.scale = x->ptr[n->in[2]];
    j.dx = x->ptr[n->out[0]], j.ds = x->ptr[n->out[1]], j.db = x->ptr[n->out[2]];
    j.eps = eps;
    j.mu = malloc(pp_count(j.outer) * 2 * sizeof *j.mu);
    if (!j.mu) return PP_FAIL(err, PP_ENOMEM, "node '%s': out of memory", n->name);
    j.inv = j.mu + j.outer;
    j.parts = parts < j.outer ? parts : j.outer > 0 ? j.outer : 1;
    pprt_parts_run(j.parts, ln_rows, &j);
    j.parts = parts < j.inner ? parts : j.inner > 0 ? j.inner : 1;
    pprt_parts_run(j.parts, ln_cols, &j);
    free(j.mu);
    return PP_OK;
}

/* RMSNormalization in ranges of rows (kernels/rmsrow.h: the reference's bits in vectors): the reference kernel
 * on one thread ran a Llama-style block 12 % slower than its seven oneDNN ops had on two (2026-12-06) */
typedef struct rms_job {
    const float *x, *sc;
    float *y, eps;
    int64_t outer, inner, parts;
} rms_job;

static void rms_rows(void *ctx, int64_t t) {
    const rms_job *j = ctx;
    pprt_rmsrow(j->x, j->sc, j->y, j->inner, j->eps, j->outer * t / j->parts, j->outer * (t + 1) / j->parts);
}

static pp_status rms_run(pprt_exec *x, const pprt_node *n, int64_t parts, pp_err *err) {
    int axis;
    rms_job j = {.x = x->ptr[n->in[0]], .sc = x->ptr[n->in[1]], .y = x->ptr[n->out[0]]};
    PP_TRY(pp_norm_rows(attrs_of(x, n), &T(x, n->in[0])->shape, &axis, &j.eps, &j.outer, &j.inner, err));
    j.parts = parts < j.outer ? parts : j.outer > 0 ? j.outer : 1;
    pprt_parts_run(j.parts, rms_rows, &j);
    return PP_OK;
}

pp_status dn_ref_parts_run(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int64_t threads = x->stage_threads > 1 ? (x->stage_threads < 64 ? x->stage_threads : 64) : 1;
    if (n->op == PP_OP_LAYERNORMGRAD) return ln_grad_run(x, n, threads, err);
    if (n->op == PP_OP_RMSNORM) return rms_run(x, n, threads, err);
    const pp_shape *ys = &T(x, n->out[0])->shape;
    const int64_t units = n->op == PP_OP_UNARYGRAD || n->op == PP_OP_CAST ? numel_of(ys)
                          : n->op == PP_OP_MAXPOOLGRAD ? ys->dim[0] * ys->dim[1]
                                                       : ys->dim[1]; /* the normalizations: channels */
    int64_t parts = x->stage_threads > 0 ? x->stage_threads : 1;
    if (n->op == PP_OP_CAST && units < CAST_PARTS_MIN) parts = 1;
    if (parts > units) parts = units;
    if (parts < 1) parts = 1;
    pp_status st[64];
    pp_err errs[64];
    if (parts > 64) parts = 64;
    grad_job j = {x, n, units, parts, st, errs};
    for (int64_t t = 0; t < parts; t++) st[t] = PP_OK, errs[t] = (pp_err){0};
    pprt_parts_run(parts, grad_part, &j);
    for (int64_t t = 0; t < parts; t++)
        if (st[t] != PP_OK)
            return PP_WRAP(err, &errs[t], st[t], "node '%s' (%s): %s", n->name, pp_op_table[n->op].name, errs[t].msg);
    return PP_OK;
}
