/* ref_tensor.c: reference kernels of the ops in ir/ops_tensor.def (shape and
 * data movement: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Concat,
 * Split, Slice, Gather, GatherElements, ScatterND, Shape, Size,
 * ConstantOfShape, Expand, Tile, Pad, CenterCropPad (a Pad of zeros), Trilu,
 * Range, OneHot).
 *
 * They are generic over the element type: they move elements of 1, 2, 4, 8 or
 * 16 bytes and never look at the values, except Range (which computes them),
 * ScatterND's reductions (which combine them) and the index inputs
 * (int32/int64). Output shapes were validated by
 * pp_infer (ir/shape_tensor.c); the kernels take what they can from those
 * shapes (Split's sizes, Tile's and Expand's repeats) and re-read from the
 * input tensors what they cannot (Slice's starts and steps, Pad's pads, Trilu's
 * k, Range's start and delta), checking it against the shapes. Index values
 * are data: one out of range fails cleanly. */
#include "ref.h"
#include "../../ir/shape_nn.h"
#include "bf16.h"
#include "pad_src.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

typedef unsigned char byte;

static size_t esize(const pprt_tensor *t) { return pp_dtype_size(t->dtype); }

static bool has(const pprt_tensor *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

/* Output k has the input's element type, which has a fixed size. */
static pp_status same_type(const char *op, const pprt_tensor *x, const pprt_tensor *o,
                           pp_err *err) {
    if (o->dtype != x->dtype)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: output type %s differs from input type %s", op,
                       pp_dtype_name(o->dtype), pp_dtype_name(x->dtype));
    if (esize(x) == 0)
        return PP_FAIL(err, PP_EUNSUP, "%s kernel: element type %s has no fixed size", op,
                       pp_dtype_name(x->dtype));
    return PP_OK;
}

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i]; /* checked by pp_infer */
    return n;
}

/* Element i of an int32/int64 tensor. */
static int64_t int_at(const pprt_tensor *t, int64_t i) {
    if (t->dtype == PP_I64) return ((const int64_t *)t->data)[i];
    return ((const int32_t *)t->data)[i];
}

/* A 1-D int32/int64 input of at most max values into out. */
static pp_status read_ints(const pprt_tensor *t, const char *what, int64_t *out, int max, int *n,
                           pp_err *err) {
    if (t->dtype != PP_I64 && t->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "%s must be int64 or int32, got %s", what,
                       pp_dtype_name(t->dtype));
    int64_t cnt = numel(&t->shape);
    if (t->shape.rank != 1 || cnt > max)
        return PP_FAIL(err, PP_EINVAL, "%s must be 1-D with at most %d values", what, max);
    for (int64_t i = 0; i < cnt; i++) out[i] = int_at(t, i);
    *n = (int)cnt;
    return PP_OK;
}

static pp_status norm_axis(int64_t axis, int rank, const char *what, int *out, pp_err *err) {
    if (axis < -rank || axis >= rank)
        return PP_FAIL(err, PP_EINVAL, "%s=%lld is out of range [%d, %d)", what, (long long)axis,
                       -rank, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PP_OK;
}

static pp_status check_shape(const char *op, const pprt_tensor *o, const pp_shape *want,
                             pp_err *err) {
    char name[64];
    snprintf(name, sizeof name, "%s output", op);
    return pprt_need_shape(o, want, name, err);
}

/* Copy n elements of esz bytes from src (element stride `stride`, may be 0
 * or negative) to contiguous dst. The constant sizes let the compiler turn
 * each memcpy into one load and one store. */
static void copy_run(byte *dst, const byte *src, int64_t n, int64_t stride, size_t esz) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * esz);
        return;
    }
#define RUN(SZ)                                                                \
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * SZ, src + i * stride * SZ, SZ); \
    return;
    switch (esz) {
    case 1: RUN(1)
    case 2: RUN(2)
    case 4: RUN(4)
    case 8: RUN(8)
    case 16: RUN(16)
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + (size_t)i * esz, src + i * stride * (int64_t)esz, esz);
    }
#undef RUN
}

/* dst (row-major over odim, rank r) = src elements at base + sum idx[d]*stride[d]
 * (element strides, any sign). Serves Transpose, Slice and Expand. */
static void strided_copy(size_t esz, int r, const int64_t *odim, const int64_t *stride,
                         const byte *base, byte *dst) {
    int64_t total = 1;
    for (int d = 0; d < r; d++) total *= odim[d];
    if (total == 0) return;
    if (r == 0) {
        memcpy(dst, base, esz);
        return;
    }
    const int64_t inner = odim[r - 1];
    int64_t idx[PP_MAX_DIMS] = {0}, off = 0; /* off = sum over d < r-1 of idx[d]*stride[d] */
    for (int64_t row = 0; row < total / inner; row++) {
        copy_run(dst, base + off * (int64_t)esz, inner, stride[r - 1], esz);
        dst += (size_t)inner * esz;
        for (int d = r - 2; d >= 0; d--) { /* odometer over the outer dims */
            off += stride[d];
            if (++idx[d] < odim[d]) break;
            off -= idx[d] * stride[d];
            idx[d] = 0;
        }
    }
}

/* ---- ops that only relabel the shape --------------------------------------------- */

pp_status kern_FLATTEN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    return pprt_copy_bytes("Flatten", in, n_in, out, n_out, err);
}

pp_status kern_RESHAPE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch, (void)n_in;
    return pprt_copy_bytes("Reshape", in, 1, out, n_out, err);
}

pp_status kern_SQUEEZE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch, (void)n_in;
    return pprt_copy_bytes("Squeeze", in, 1, out, n_out, err);
}

pp_status kern_UNSQUEEZE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch, (void)n_in;
    return pprt_copy_bytes("Unsqueeze", in, 1, out, n_out, err);
}

/* ---- Transpose ------------------------------------------------------------------- */

pp_status kern_TRANSPOSE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Transpose", n_in, 1, 1, n_out, err));
    PP_TRY(same_type("Transpose", &in[0], &out[0], err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    int64_t perm[PP_MAX_DIMS], ist[PP_MAX_DIMS], st[PP_MAX_DIMS];
    PP_TRY(pp_transpose_perm(attrs, r, perm, err));
    pp_shape want = {.rank = r};
    pp_shape_strides(x, ist);
    for (int i = 0; i < r; i++) {
        want.dim[i] = x->dim[perm[i]];
        st[i] = ist[perm[i]];
    }
    PP_TRY(check_shape("Transpose", &out[0], &want, err));
    strided_copy(esize(&in[0]), r, want.dim, st, in[0].data, out[0].data);
    return PP_OK;
}

/* ---- DepthToSpace / SpaceToDepth: a six-dim strided copy (pp_space_depth) ------------- */

static pp_status space_depth(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                             int n_out, pp_err *err) {
    const char *name = pp_op_table[op].name;
    PP_TRY(pprt_need_counts(name, n_in, 1, 1, n_out, err));
    PP_TRY(same_type(name, &in[0], &out[0], err));
    int64_t d[6] = {0}, st[6] = {0};
    PP_TRY(pp_space_depth(op, attrs, &in[0].shape, d, st, err));
    pp_shape want = {.rank = 4, .dim = {d[0], 0, 0, 0}};
    if (op == PP_OP_DEPTHTOSPACE) want.dim[1] = d[1], want.dim[2] = d[2] * d[3], want.dim[3] = d[4] * d[5];
    else want.dim[1] = d[1] * d[2] * d[3], want.dim[2] = d[4], want.dim[3] = d[5];
    PP_TRY(check_shape(name, &out[0], &want, err));
    strided_copy(esize(&in[0]), 6, d, st, in[0].data, out[0].data);
    return PP_OK;
}

pp_status kern_DEPTHTOSPACE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                            pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    return space_depth(PP_OP_DEPTHTOSPACE, attrs, in, n_in, out, n_out, err);
}

pp_status kern_SPACETODEPTH(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                            pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    return space_depth(PP_OP_SPACETODEPTH, attrs, in, n_in, out, n_out, err);
}

/* ---- Concat / Split ----------------------------------------------------------------- */

pp_status kern_CONCAT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Concat", n_in, 1, PP_MAX_INPUTS, n_out, err));
    const pp_shape *o = &out[0].shape;
    int64_t axis64;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(norm_axis(axis64, o->rank, "Concat kernel: attribute 'axis'", &axis, err));
    int64_t sum = 0;
    for (int k = 0; k < n_in; k++) {
        PP_TRY(same_type("Concat", &in[k], &out[0], err));
        pp_shape want = *o;
        want.dim[axis] = in[k].shape.dim[axis];
        char name[64];
        snprintf(name, sizeof name, "Concat input %d", k);
        PP_TRY(pprt_need_shape(&in[k], &want, name, err));
        sum += in[k].shape.dim[axis];
    }
    if (sum != o->dim[axis])
        return PP_FAIL(err, PP_EINVAL, "Concat kernel: inputs give %lld along axis %d, output %lld",
                       (long long)sum, axis, (long long)o->dim[axis]);
    const size_t esz = esize(&out[0]);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= o->dim[d];
    for (int d = axis + 1; d < o->rank; d++) inner *= o->dim[d];
    byte *dst = out[0].data;
    for (int64_t i = 0; i < outer; i++)
        for (int k = 0; k < n_in; k++) {
            size_t nb = (size_t)(in[k].shape.dim[axis] * inner) * esz;
            if (nb) memcpy(dst, (const byte *)in[k].data + (size_t)i * nb, nb);
            dst += nb;
        }
    return PP_OK;
}

pp_status kern_SPLIT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    if (n_in < 1 || n_in > 2 || n_out < 1 || n_out > PP_MAX_OUTPUTS)
        return PP_FAIL(err, PP_EINVAL, "Split kernel: %d inputs, %d outputs", n_in, n_out);
    const pp_shape *x = &in[0].shape;
    int64_t axis64;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(norm_axis(axis64, x->rank, "Split kernel: attribute 'axis'", &axis, err));
    /* the sizes are the outputs' sizes along the axis, validated by pp_infer */
    int64_t sum = 0;
    for (int k = 0; k < n_out; k++) {
        PP_TRY(same_type("Split", &in[0], &out[k], err));
        pp_shape want = *x;
        want.dim[axis] = out[k].shape.dim[axis];
        PP_TRY(check_shape("Split", &out[k], &want, err));
        sum += out[k].shape.dim[axis];
    }
    if (sum != x->dim[axis])
        return PP_FAIL(err, PP_EINVAL, "Split kernel: outputs take %lld along axis %d of %lld",
                       (long long)sum, axis, (long long)x->dim[axis]);
    const size_t esz = esize(&in[0]);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->dim[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->dim[d];
    const byte *src = in[0].data;
    for (int64_t i = 0; i < outer; i++)
        for (int k = 0; k < n_out; k++) {
            size_t nb = (size_t)(out[k].shape.dim[axis] * inner) * esz;
            if (nb) memcpy((byte *)out[k].data + (size_t)i * nb, src, nb);
            src += nb;
        }
    return PP_OK;
}

/* ---- Slice ---------------------------------------------------------------------- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

pp_status kern_SLICE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Slice", n_in, 1, 5, n_out, err));
    PP_TRY(same_type("Slice", &in[0], &out[0], err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    pp_tinfo ti[5];
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_slice sl;
    PP_TRY(pp_slice_parse(attrs, ti, n_in, &sl, err));
    PP_TRY(check_shape("Slice", &out[0], &sl.out, err));
    int64_t ist[PP_MAX_DIMS], off = 0, stride[PP_MAX_DIMS];
    pp_shape_strides(x, ist);
    for (int d = 0; d < r; d++) {
        off += sl.first[d] * ist[d];
        stride[d] = sl.step[d] * ist[d];
    }
    const size_t esz = esize(&in[0]);
    if (numel(&sl.out) == 0) return PP_OK;
    strided_copy(esz, r, sl.out.dim, stride, (const byte *)in[0].data + off * (int64_t)esz,
                 out[0].data);
    return PP_OK;
}

/* ---- Gather / GatherElements ----------------------------------------------------------- */

pp_status kern_GATHER(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Gather", n_in, 2, 2, n_out, err));
    PP_TRY(same_type("Gather", &in[0], &out[0], err));
    const pprt_tensor *ix = &in[1];
    if (ix->dtype != PP_I64 && ix->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "Gather kernel: indices must be int64 or int32");
    const pp_shape *x = &in[0].shape;
    int64_t axis64;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(norm_axis(axis64, x->rank, "Gather kernel: attribute 'axis'", &axis, err));
    pp_shape want = {.rank = x->rank - 1 + ix->shape.rank};
    if (want.rank > PP_MAX_DIMS) return PP_FAIL(err, PP_EUNSUP, "Gather kernel: rank too large");
    int k = 0;
    for (int d = 0; d < axis; d++) want.dim[k++] = x->dim[d];
    for (int d = 0; d < ix->shape.rank; d++) want.dim[k++] = ix->shape.dim[d];
    for (int d = axis + 1; d < x->rank; d++) want.dim[k++] = x->dim[d];
    PP_TRY(check_shape("Gather", &out[0], &want, err));
    const size_t esz = esize(&in[0]);
    const int64_t n = x->dim[axis], ni = numel(&ix->shape);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->dim[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->dim[d];
    const size_t nb = (size_t)inner * esz;
    /* check every index once, before writing anything */
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = int_at(ix, j);
        if (v < -n || v >= n)
            return PP_FAIL(err, PP_EINVAL, "Gather: index %lld (at %lld) is out of range [%lld, %lld)",
                           (long long)v, (long long)j, (long long)-n, (long long)n);
    }
    const byte *src = in[0].data;
    byte *dst = out[0].data;
    for (int64_t i = 0; i < outer; i++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t v = int_at(ix, j);
            if (v < 0) v += n;
            if (nb) memcpy(dst, src + (size_t)((i * n + v) * inner) * esz, nb);
            dst += nb;
        }
    return PP_OK;
}

pp_status kern_GATHERELEMENTS(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                              int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("GatherElements", n_in, 2, 2, n_out, err));
    PP_TRY(same_type("GatherElements", &in[0], &out[0], err));
    const pprt_tensor *ix = &in[1];
    const pp_shape *x = &in[0].shape, *is = &ix->shape;
    if (ix->dtype != PP_I64 && ix->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "GatherElements kernel: indices must be int64 or int32");
    int64_t axis64;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(norm_axis(axis64, x->rank, "GatherElements kernel: attribute 'axis'", &axis, err));
    PP_TRY(check_shape("GatherElements", &out[0], is, err));
    if (is->rank != x->rank) return PP_FAIL(err, PP_EINVAL, "GatherElements kernel: ranks differ");
    for (int d = 0; d < x->rank; d++)
        if (d != axis && is->dim[d] > x->dim[d])
            return PP_FAIL(err, PP_EINVAL, "GatherElements kernel: indices larger than data");
    const int r = x->rank;
    const size_t esz = esize(&in[0]);
    const int64_t total = numel(is), n = x->dim[axis];
    int64_t xst[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0}, off = 0; /* off: data offset without the axis */
    pp_shape_strides(x, xst);
    const byte *src = in[0].data;
    byte *dst = out[0].data;
    for (int64_t j = 0; j < total; j++) {
        int64_t v = int_at(ix, j);
        if (v < -n || v >= n)
            return PP_FAIL(err, PP_EINVAL,
                           "GatherElements: index %lld (at %lld) is out of range [%lld, %lld)",
                           (long long)v, (long long)j, (long long)-n, (long long)n);
        if (v < 0) v += n;
        memcpy(dst + (size_t)j * esz, src + (size_t)(off + v * xst[axis]) * esz, esz);
        for (int d = r - 1; d >= 0; d--) {
            if (d != axis) off += xst[d];
            if (++idx[d] < is->dim[d]) break;
            if (d != axis) off -= idx[d] * xst[d];
            idx[d] = 0;
        }
    }
    return PP_OK;
}

/* ---- ScatterND -------------------------------------------------------------------------- */

/* Output = data, then for each index tuple (in order, so with repeated tuples
 * the last update wins, as onnx's reference) the slice it names is replaced
 * by, or combined with, its slice of updates. Negative index values count
 * from the end; out of range fails. Reductions: integers wrap (add, mul in
 * the unsigned type); max/min of floats propagate NaN (NumPy's
 * maximum/minimum, which the reference uses); float16/bfloat16 and bool take
 * reduction 'none' only. */
enum scatter_red { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

#define SCATTER_TYPES(X)                                                                 \
    X(PP_F32, float, float) X(PP_F64, double, double) X(PP_I8, int8_t, uint32_t)          \
    X(PP_I16, int16_t, uint32_t) X(PP_I32, int32_t, uint32_t) X(PP_I64, int64_t, uint64_t) \
    X(PP_U8, uint8_t, uint32_t) X(PP_U16, uint16_t, uint32_t) X(PP_U32, uint32_t, uint32_t) \
    X(PP_U64, uint64_t, uint64_t)
#define SCATTER_CASE(E, T, U)                                                            \
    case E: {                                                                            \
        T *d_ = (T *)dst;                                                                \
        const T *s_ = (const T *)src;                                                    \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T a = d_[i], b = s_[i];                                                \
            switch (red) {                                                               \
            case RED_ADD: d_[i] = (T)((U)a + (U)b); break;                               \
            case RED_MUL: d_[i] = (T)((U)a * (U)b); break;                               \
            case RED_MAX: d_[i] = a != a || a > b ? a : b; break;                         \
            case RED_MIN: d_[i] = a != a || a < b ? a : b; break;                         \
            case RED_NONE: d_[i] = b; break;                                             \
            }                                                                            \
        }                                                                                \
        return true;                                                                     \
    }

/* dst[0..n) = dst red src (type t); false when t has no reductions. */
static bool scatter_reduce(pp_dtype t, enum scatter_red red, byte *dst, const byte *src,
                           int64_t n) {
    switch (t) {
        SCATTER_TYPES(SCATTER_CASE)
    default: return false;
    }
}
#undef SCATTER_CASE

static bool scatter_reducible(pp_dtype t) {
#define SCATTER_IS(E, T, U) case E:
    switch (t) {
        SCATTER_TYPES(SCATTER_IS)
        return true;
    default: return false;
    }
#undef SCATTER_IS
}

/* The attribute 'reduction' as a scatter_red (its name in *rs). */
static pp_status scatter_red_attr(const char *op, pp_attrs attrs, const char **rs, int *red,
                                  pp_err *err) {
    PP_TRY(pp_attr_string(attrs, "reduction", "none", rs, err));
    static const char *const red_names[] = {"none", "add", "mul", "max", "min"};
    *red = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(*rs, red_names[i])) *red = i;
    if (*red < 0)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: attribute 'reduction'='%s'", op, *rs);
    return PP_OK;
}

pp_status kern_SCATTERND(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("ScatterND", n_in, 3, 3, n_out, err));
    PP_TRY(same_type("ScatterND", &in[0], &out[0], err));
    const pprt_tensor *ix = &in[1];
    const pp_shape *x = &in[0].shape, *is = &ix->shape, *us = &in[2].shape;
    PP_TRY(check_shape("ScatterND", &out[0], x, err));
    if (ix->dtype != PP_I64 && ix->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "ScatterND kernel: indices must be int64 or int32");
    if (in[2].dtype != in[0].dtype)
        return PP_FAIL(err, PP_EINVAL, "ScatterND kernel: updates type differs from data type");
    const char *rs;
    int red;
    PP_TRY(scatter_red_attr("ScatterND", attrs, &rs, &red, err));
    const int r = x->rank, q = is->rank;
    const int64_t k = q >= 1 ? is->dim[q - 1] : -1;
    if (r < 1 || k < 0 || k > r || us->rank != q - 1 + r - (int)k)
        return PP_FAIL(err, PP_EINVAL, "ScatterND kernel: input shapes do not fit");
    int64_t n_upd = 1, slice = 1; /* index tuples; elements per update slice */
    for (int d = 0; d < q - 1; d++) {
        if (us->dim[d] != is->dim[d])
            return PP_FAIL(err, PP_EINVAL, "ScatterND kernel: updates do not fit indices");
        n_upd *= is->dim[d];
    }
    for (int d = (int)k; d < r; d++) {
        if (us->dim[q - 1 + d - (int)k] != x->dim[d])
            return PP_FAIL(err, PP_EINVAL, "ScatterND kernel: updates do not fit data");
        slice *= x->dim[d];
    }
    const size_t esz = esize(&in[0]);
    if (red != RED_NONE && !scatter_reducible(in[0].dtype))
        return PP_FAIL(err, PP_EUNSUP, "ScatterND: reduction '%s' on element type %s is not "
                       "supported", rs, pp_dtype_name(in[0].dtype));
    if (out[0].data != in[0].data) memcpy(out[0].data, in[0].data, (size_t)numel(x) * esz);
    int64_t xst[PP_MAX_DIMS];
    pp_shape_strides(x, xst);
    byte *dst = out[0].data;
    const byte *src = in[2].data;
    for (int64_t u = 0; u < n_upd; u++) {
        int64_t off = 0;
        for (int j = 0; j < (int)k; j++) {
            int64_t v = int_at(ix, u * k + j);
            const int64_t n = x->dim[j];
            if (v < -n || v >= n)
                return PP_FAIL(err, PP_EINVAL,
                               "ScatterND: index %lld (tuple %lld, position %d) is out of range "
                               "[%lld, %lld)", (long long)v, (long long)u, j, (long long)-n,
                               (long long)n);
            off += (v < 0 ? v + n : v) * xst[j];
        }
        byte *d = dst + (size_t)off * esz;
        const byte *s = src + (size_t)(u * slice) * esz;
        if (red == RED_NONE) memcpy(d, s, (size_t)slice * esz);
        else scatter_reduce(in[0].dtype, (enum scatter_red)red, d, s, slice);
    }
    return PP_OK;
}

/* ScatterElements: output = data, then element j of updates (in order: with
 * repeated positions the last update wins, or they all reduce) goes to data's
 * position j with the axis coordinate replaced by indices[j]; negative
 * indices count from the end, out of range fails. Reductions as ScatterND. */
pp_status kern_SCATTERELEMENTS(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                               int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("ScatterElements", n_in, 3, 3, n_out, err));
    PP_TRY(same_type("ScatterElements", &in[0], &out[0], err));
    const pprt_tensor *ix = &in[1];
    const pp_shape *x = &in[0].shape, *is = &ix->shape;
    PP_TRY(check_shape("ScatterElements", &out[0], x, err));
    if (ix->dtype != PP_I64 && ix->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "ScatterElements kernel: indices must be int64 or int32");
    if (in[2].dtype != in[0].dtype || !pp_shape_eq(&in[2].shape, is) || is->rank != x->rank)
        return PP_FAIL(err, PP_EINVAL, "ScatterElements kernel: input shapes do not fit");
    const char *rs;
    int red;
    PP_TRY(scatter_red_attr("ScatterElements", attrs, &rs, &red, err));
    if (red != RED_NONE && !scatter_reducible(in[0].dtype))
        return PP_FAIL(err, PP_EUNSUP, "ScatterElements: reduction '%s' on element type %s is not "
                       "supported", rs, pp_dtype_name(in[0].dtype));
    int64_t axis64;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", 0, &axis64, err));
    PP_TRY(norm_axis(axis64, x->rank, "ScatterElements kernel: attribute 'axis'", &axis, err));
    for (int d = 0; d < x->rank; d++)
        if (d != axis && is->dim[d] > x->dim[d])
            return PP_FAIL(err, PP_EINVAL, "ScatterElements kernel: indices larger than data");
    const size_t esz = esize(&in[0]);
    if (out[0].data != in[0].data) memcpy(out[0].data, in[0].data, (size_t)numel(x) * esz);
    const int r = x->rank;
    const int64_t total = numel(is), n = x->dim[axis];
    int64_t xst[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0}, off = 0; /* off: data offset without the axis */
    pp_shape_strides(x, xst);
    byte *dst = out[0].data;
    const byte *src = in[2].data;
    for (int64_t j = 0; j < total; j++) {
        int64_t v = int_at(ix, j);
        if (v < -n || v >= n)
            return PP_FAIL(err, PP_EINVAL,
                           "ScatterElements: index %lld (at %lld) is out of range [%lld, %lld)",
                           (long long)v, (long long)j, (long long)-n, (long long)n);
        if (v < 0) v += n;
        byte *d = dst + (size_t)(off + v * xst[axis]) * esz;
        if (red == RED_NONE) memcpy(d, src + (size_t)j * esz, esz);
        else scatter_reduce(in[0].dtype, (enum scatter_red)red, d, src + (size_t)j * esz, 1);
        for (int dd = r - 1; dd >= 0; dd--) {
            if (dd != axis) off += xst[dd];
            if (++idx[dd] < is->dim[dd]) break;
            if (dd != axis) off -= idx[dd] * xst[dd];
            idx[dd] = 0;
        }
    }
    return PP_OK;
}

pp_status kern_SCATTER(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    return kern_SCATTERELEMENTS(attrs, in, n_in, out, n_out, scratch, err);
}

/* ---- Shape / Size ----------------------------------------------------------------------- */

pp_status kern_SHAPE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Shape", n_in, 1, 1, n_out, err));
    const int r = in[0].shape.rank;
    int64_t start, end;
    PP_TRY(pp_attr_int(attrs, "start", 0, &start, err));
    PP_TRY(pp_attr_int(attrs, "end", r, &end, err));
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = clamp64(start, 0, r);
    end = clamp64(end, 0, r);
    pp_shape want = {.rank = 1, .dim = {end > start ? end - start : 0}};
    if (out[0].dtype != PP_I64) return PP_FAIL(err, PP_EINVAL, "Shape kernel: output must be int64");
    PP_TRY(check_shape("Shape", &out[0], &want, err));
    int64_t *o = out[0].data;
    for (int64_t d = start; d < end; d++) o[d - start] = in[0].shape.dim[d];
    return PP_OK;
}

pp_status kern_SIZE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Size", n_in, 1, 1, n_out, err));
    if (out[0].dtype != PP_I64 || out[0].shape.rank != 0)
        return PP_FAIL(err, PP_EINVAL, "Size kernel: output must be an int64 scalar");
    *(int64_t *)out[0].data = numel(&in[0].shape);
    return PP_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------- */

/* Fill n elements of dst with the esz bytes at val. */
static void fill(byte *dst, int64_t n, const byte *val, size_t esz) {
    if (n == 0) return; /* dst may be NULL */
    bool zero = true;
    for (size_t i = 0; i < esz; i++) zero = zero && val[i] == 0;
    if (zero) {
        memset(dst, 0, (size_t)n * esz);
        return;
    }
    copy_run(dst, val, n, 0, esz);
}

pp_status kern_CONSTANTOFSHAPE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                               int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("ConstantOfShape", n_in, 1, 1, n_out, err));
    int64_t dims[PP_MAX_DIMS];
    int n;
    PP_TRY(read_ints(&in[0], "ConstantOfShape input", dims, PP_MAX_DIMS, &n, err));
    pp_shape want = {.rank = n};
    for (int i = 0; i < n; i++) want.dim[i] = dims[i];
    PP_TRY(check_shape("ConstantOfShape", &out[0], &want, err));
    const pp_attr *v;
    PP_TRY(pp_attr_tensor(attrs, "value", &v, err));
    byte zero[16] = {0};
    const byte *val = zero;
    pp_dtype dt = PP_F32;
    if (v) {
        dt = v->t_dtype;
        val = v->t_data;
        if (v->t_nbytes != pp_dtype_size(dt) || v->t_nbytes == 0)
            return PP_FAIL(err, PP_EINVAL, "ConstantOfShape kernel: bad attribute 'value'");
    }
    if (out[0].dtype != dt)
        return PP_FAIL(err, PP_EINVAL, "ConstantOfShape kernel: output type %s, value type %s",
                       pp_dtype_name(out[0].dtype), pp_dtype_name(dt));
    fill(out[0].data, numel(&want), val, pp_dtype_size(dt));
    return PP_OK;
}

/* EyeLike: zeros, and one (in the output's type) on the k-th diagonal. */
pp_status kern_EYELIKE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("EyeLike", n_in, 1, 1, n_out, err));
    PP_TRY(check_shape("EyeLike", &out[0], &in[0].shape, err));
    int64_t k;
    PP_TRY(pp_attr_int(attrs, "k", 0, &k, err));
    const size_t esz = esize(&out[0]);
    union { float f; double d; uint16_t h; int64_t i; byte b[8]; } one = {0};
    switch (out[0].dtype) {
    case PP_F32: one.f = 1.0f; break;
    case PP_F64: one.d = 1.0; break;
    case PP_F16: one.h = 0x3c00; break;
    case PP_BF16: one.h = 0x3f80; break;
    default:
        if (esz == 0 || esz > 8 || !pp_dtype_size(out[0].dtype))
            return PP_FAIL(err, PP_EUNSUP, "EyeLike kernel: element type %s",
                           pp_dtype_name(out[0].dtype));
        one.b[0] = 1; /* integers and bool, little-endian */
    }
    if (out[0].shape.rank != 2) return PP_FAIL(err, PP_EINVAL, "EyeLike kernel: rank is not 2");
    const int64_t rows = out[0].shape.dim[0], cols = out[0].shape.dim[1];
    byte *o = out[0].data;
    memset(o, 0, (size_t)(rows * cols) * esz);
    for (int64_t i = 0; i < rows; i++) {
        const int64_t j = i + k;
        if (j >= 0 && j < cols) memcpy(o + (size_t)(i * cols + j) * esz, one.b, esz);
    }
    return PP_OK;
}

/* ---- Expand / Tile ---------------------------------------------------------------------- */

pp_status kern_EXPAND(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Expand", n_in, 2, 2, n_out, err));
    PP_TRY(same_type("Expand", &in[0], &out[0], err));
    const pp_shape *x = &in[0].shape, *o = &out[0].shape;
    /* the input, right-aligned to the output's rank; broadcast dims read with stride 0 */
    if (x->rank > o->rank) return PP_FAIL(err, PP_EINVAL, "Expand kernel: output rank too small");
    int64_t ist[PP_MAX_DIMS], stride[PP_MAX_DIMS];
    pp_shape_strides(x, ist);
    const int lead = o->rank - x->rank;
    for (int d = 0; d < o->rank; d++) {
        int64_t xd = d < lead ? 1 : x->dim[d - lead];
        if (xd != o->dim[d] && xd != 1)
            return PP_FAIL(err, PP_EINVAL, "Expand kernel: input does not broadcast to the output");
        stride[d] = xd == 1 ? 0 : ist[d - lead];
    }
    strided_copy(esize(&in[0]), o->rank, o->dim, stride, in[0].data, out[0].data);
    return PP_OK;
}

pp_status kern_TILE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Tile", n_in, 2, 2, n_out, err));
    PP_TRY(same_type("Tile", &in[0], &out[0], err));
    const pp_shape *x = &in[0].shape, *o = &out[0].shape;
    const int r = x->rank;
    if (o->rank != r) return PP_FAIL(err, PP_EINVAL, "Tile kernel: output rank differs");
    for (int d = 0; d < r; d++)
        if (x->dim[d] ? o->dim[d] % x->dim[d] : o->dim[d])
            return PP_FAIL(err, PP_EINVAL, "Tile kernel: output dim %d is not a multiple of the input's", d);
    const size_t esz = esize(&in[0]);
    const int64_t total = numel(o);
    if (total == 0) return PP_OK;
    if (r == 0) {
        memcpy(out[0].data, in[0].data, esz);
        return PP_OK;
    }
    /* each output row (all dims but the last) repeats one input row */
    int64_t ist[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0};
    pp_shape_strides(x, ist);
    const int64_t in_row = x->dim[r - 1], reps = o->dim[r - 1] / in_row;
    const size_t row_bytes = (size_t)in_row * esz;
    const byte *src = in[0].data;
    byte *dst = out[0].data;
    for (int64_t row = 0; row < total / o->dim[r - 1]; row++) {
        int64_t off = 0;
        for (int d = 0; d < r - 1; d++) off += (idx[d] % x->dim[d]) * ist[d];
        for (int64_t k = 0; k < reps; k++) {
            memcpy(dst, src + (size_t)off * esz, row_bytes);
            dst += row_bytes;
        }
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < o->dim[d]) break;
            idx[d] = 0;
        }
    }
    return PP_OK;
}

/* ---- Pad ---------------------------------------------------------------------------- */

/* IEEE half from float, rounding to nearest even. */
static uint16_t float_to_half(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t au = u & 0x7fffffff;
    if (au >= 0x7f800000) return sign | (au > 0x7f800000 ? 0x7e00 : 0x7c00); /* nan / inf */
    if (au >= 0x477ff000) return sign | 0x7c00;                                /* overflow */
    if (au < 0x38800000) { /* subnormal half (or zero) */
        float a;
        memcpy(&a, &au, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f); /* a / 2^-24, round to nearest even */
    }
    uint32_t m = au + 0xc8000fff + ((au >> 13) & 1); /* rebias exponent (-112 << 23) and round */
    return sign | (uint16_t)(m >> 13);
}

static uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* Store v as one element of type t at dst (saturation is not needed: the
 * callers' values fit). Returns false for types without a numeric value. */
static bool store_number(pp_dtype t, double v, byte *dst) {
    switch (t) {
    case PP_F32: { float x = (float)v; memcpy(dst, &x, 4); return true; }
    case PP_F64: memcpy(dst, &v, 8); return true;
    case PP_F16: { uint16_t x = float_to_half((float)v); memcpy(dst, &x, 2); return true; }
    case PP_BF16: { uint16_t x = float_to_bf16((float)v); memcpy(dst, &x, 2); return true; }
    case PP_BOOL: dst[0] = v != 0; return true;
    case PP_I8: { int8_t x = (int8_t)v; memcpy(dst, &x, 1); return true; }
    case PP_U8: { uint8_t x = (uint8_t)v; memcpy(dst, &x, 1); return true; }
    case PP_I16: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); return true; }
    case PP_U16: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); return true; }
    case PP_I32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); return true; }
    case PP_U32: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); return true; }
    case PP_I64: { int64_t x = (int64_t)v; memcpy(dst, &x, 8); return true; }
    case PP_U64: { uint64_t x = (uint64_t)v; memcpy(dst, &x, 8); return true; }
    default: return false;
    }
}

/* out = x padded by begin[d] elements before axis d (negative: cut off) in
 * pad_src.h's mode, the constant `value` (esize bytes) where no input element
 * falls; out's shape is the padded one. One output row at a time, each
 * element's source from a per-axis map (scratch). */
static pp_status pad_rows(const char *op, const pprt_tensor *x, pprt_tensor *out, const int64_t *begin, int mode,
                          const byte *value, pprt_scratch *scratch, pp_err *err) {
    const pp_shape *want = &out->shape;
    const int r = x->shape.rank;
    const size_t esz = esize(x);
    const int64_t total = numel(want);
    if (total == 0) return PP_OK;
    if (r == 0) {
        memcpy(out->data, x->data, esz);
        return PP_OK;
    }
    /* map[d][o]: source index along dim d for output index o, -1 = constant */
    size_t nmap = 0;
    for (int d = 0; d < r; d++) nmap += (size_t)want->dim[d];
    int64_t *map = pprt_scratch_get(scratch, nmap * sizeof(int64_t));
    if (!map) return PP_FAIL(err, PP_ENOMEM, "%s kernel: out of scratch memory", op);
    int64_t *mp[PP_MAX_DIMS], ist[PP_MAX_DIMS], idx[PP_MAX_DIMS] = {0};
    size_t at = 0;
    for (int d = 0; d < r; d++) {
        mp[d] = map + at;
        for (int64_t o = 0; o < want->dim[d]; o++) mp[d][o] = pprt_pad_src(mode, o, begin[d], x->shape.dim[d]);
        at += (size_t)want->dim[d];
    }
    pp_shape_strides(&x->shape, ist);
    const int64_t inner = want->dim[r - 1];
    const byte *src = x->data;
    byte *dst = out->data;
    for (int64_t row = 0; row < total / inner; row++) {
        int64_t off = 0;
        bool pad_row = false;
        for (int d = 0; d < r - 1; d++) {
            if (mp[d][idx[d]] < 0) pad_row = true;
            else off += mp[d][idx[d]] * ist[d];
        }
        for (int64_t o = 0; o < inner; o++) {
            int64_t s = pad_row ? -1 : mp[r - 1][o];
            memcpy(dst + (size_t)o * esz, s < 0 ? value : src + (size_t)(off + s) * esz, esz);
        }
        dst += (size_t)inner * esz;
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < want->dim[d]) break;
            idx[d] = 0;
        }
    }
    return PP_OK;
}

pp_status kern_PAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_need_counts("Pad", n_in, 1, 4, n_out, err));
    PP_TRY(same_type("Pad", &in[0], &out[0], err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    const size_t esz = esize(&in[0]);
    const char *ms;
    PP_TRY(pp_attr_string(attrs, "mode", "constant", &ms, err));
    const int mode = !strcmp(ms, "reflect") ? PPRT_PAD_REFLECT
                     : !strcmp(ms, "edge")  ? PPRT_PAD_EDGE
                     : !strcmp(ms, "wrap")  ? PPRT_PAD_WRAP
                                            : PPRT_PAD_CONSTANT;
    int64_t pads[2 * PP_MAX_DIMS], axes[PP_MAX_DIMS];
    int np, na = -1;
    byte value[16] = {0};
    if (attrs.opset < 11) {
        PP_TRY(pp_attr_ints(attrs, "pads", pads, 2 * PP_MAX_DIMS, &np, err));
        float v;
        PP_TRY(pp_attr_float(attrs, "value", 0.0f, &v, err));
        if (!store_number(in[0].dtype, v, value))
            return PP_FAIL(err, PP_EUNSUP, "Pad kernel: attribute 'value' for element type %s",
                           pp_dtype_name(in[0].dtype));
    } else {
        if (!has(in, n_in, 1)) return PP_FAIL(err, PP_EINVAL, "Pad kernel: input 'pads' is required");
        PP_TRY(read_ints(&in[1], "Pad input 'pads'", pads, 2 * PP_MAX_DIMS, &np, err));
        if (has(in, n_in, 2)) {
            if (in[2].dtype != in[0].dtype || numel(&in[2].shape) != 1)
                return PP_FAIL(err, PP_EINVAL, "Pad kernel: bad input 'constant_value'");
            memcpy(value, in[2].data, esz);
        }
        if (has(in, n_in, 3)) PP_TRY(read_ints(&in[3], "Pad input 'axes'", axes, PP_MAX_DIMS, &na, err));
    }
    int64_t begin[PP_MAX_DIMS] = {0};
    pp_shape want = *x;
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na) return PP_FAIL(err, PP_EINVAL, "Pad kernel: %d pads for %d axes", np, na);
    for (int i = 0; i < na; i++) {
        int a = 0;
        PP_TRY(norm_axis(axes[i], r, "Pad kernel: axes", &a, err));
        begin[a] = pads[i];
        want.dim[a] = x->dim[a] + pads[i] + pads[na + i];
        if (mode != PPRT_PAD_CONSTANT && (pads[i] < 0 || pads[na + i] < 0 ||
                                     (x->dim[a] == 0 && (pads[i] || pads[na + i]))))
            return PP_FAIL(err, PP_EUNSUP, "Pad kernel: mode '%s' with these pads", ms);
    }
    PP_TRY(check_shape("Pad", &out[0], &want, err));
    return pad_rows("Pad", &in[0], &out[0], begin, mode, value, scratch, err);
}

/* ---- CenterCropPad ---------------------------------------------------------------------- */

/* A Pad of zeros whose pads, negative where it crops, pp_centercrop_parse
 * works out from the constant shape and the axes, as shape inference did. */
pp_status kern_CENTERCROPPAD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                             pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_need_counts("CenterCropPad", n_in, 2, 2, n_out, err));
    PP_TRY(same_type("CenterCropPad", &in[0], &out[0], err));
    const pp_tinfo ti[2] = {pprt_tinfo_of(&in[0]), pprt_tinfo_of(&in[1])};
    pp_pad pd;
    PP_TRY(pp_centercrop_parse(attrs, ti, n_in, &pd, err));
    PP_TRY(check_shape("CenterCropPad", &out[0], &pd.out, err));
    static const byte zero[16];
    return pad_rows("CenterCropPad", &in[0], &out[0], pd.begin, PPRT_PAD_CONSTANT, zero, scratch, err);
}

/* ---- Trilu ---------------------------------------------------------------------------- */

pp_status kern_TRILU(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Trilu", n_in, 1, 2, n_out, err));
    PP_TRY(same_type("Trilu", &in[0], &out[0], err));
    PP_TRY(check_shape("Trilu", &out[0], &in[0].shape, err));
    const pp_shape *x = &in[0].shape;
    if (x->rank < 2) return PP_FAIL(err, PP_EINVAL, "Trilu kernel: rank %d < 2", x->rank);
    int64_t upper, k = 0;
    PP_TRY(pp_attr_int(attrs, "upper", 1, &upper, err));
    if (has(in, n_in, 1)) {
        if ((in[1].dtype != PP_I64 && in[1].dtype != PP_I32) || numel(&in[1].shape) != 1)
            return PP_FAIL(err, PP_EINVAL, "Trilu kernel: input 'k' must be an integer scalar");
        k = int_at(&in[1], 0);
    }
    const int64_t N = x->dim[x->rank - 2], M = x->dim[x->rank - 1];
    if (N == 0 || M == 0) return PP_OK;
    const int64_t mats = numel(x) / (N * M);
    k = clamp64(k, -N - 1, M + 1); /* beyond this range k changes nothing */
    const size_t esz = esize(&in[0]);
    const byte *src = in[0].data;
    byte *dst = out[0].data;
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < N; i++) {
            /* upper keeps j >= i + k; lower keeps j <= i + k */
            int64_t lo = upper ? clamp64(i + k, 0, M) : 0;
            int64_t hi = upper ? M : clamp64(i + k + 1, 0, M);
            const size_t row = (size_t)((m * N + i) * M) * esz;
            memset(dst + row, 0, (size_t)M * esz);
            if (hi > lo)
                memcpy(dst + row + (size_t)lo * esz, src + row + (size_t)lo * esz,
                       (size_t)(hi - lo) * esz);
        }
    return PP_OK;
}

/* ---- Range ---------------------------------------------------------------------------- */

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* A numeric scalar as double, and as int64 for integer types. */
static pp_status scalar_of(const pprt_tensor *t, double *d, int64_t *i, pp_err *err) {
    const void *p = t->data;
    uint16_t h;
    *i = 0;
    if (numel(&t->shape) != 1) return PP_FAIL(err, PP_EINVAL, "Range kernel: inputs must be scalars");
    switch (t->dtype) {
    case PP_F32: { float v; memcpy(&v, p, 4); *d = v; return PP_OK; }
    case PP_F64: memcpy(d, p, 8); return PP_OK;
    case PP_F16: memcpy(&h, p, 2); *d = half_to_double(h); return PP_OK;
    case PP_BF16: memcpy(&h, p, 2); *d = pprt_bf16_float(h); return PP_OK;
    case PP_I8: { int8_t v; memcpy(&v, p, 1); *i = v; break; }
    case PP_U8: { uint8_t v; memcpy(&v, p, 1); *i = v; break; }
    case PP_I16: { int16_t v; memcpy(&v, p, 2); *i = v; break; }
    case PP_U16: { uint16_t v; memcpy(&v, p, 2); *i = v; break; }
    case PP_I32: { int32_t v; memcpy(&v, p, 4); *i = v; break; }
    case PP_U32: { uint32_t v; memcpy(&v, p, 4); *i = v; break; }
    case PP_I64: memcpy(i, p, 8); break;
    default:
        return PP_FAIL(err, PP_EUNSUP, "Range kernel: element type %s", pp_dtype_name(t->dtype));
    }
    *d = (double)*i;
    return PP_OK;
}

pp_status kern_RANGE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Range", n_in, 3, 3, n_out, err));
    const pp_dtype t = out[0].dtype;
    if (in[0].dtype != t || in[2].dtype != t || out[0].shape.rank != 1)
        return PP_FAIL(err, PP_EINVAL, "Range kernel: types or output rank do not match");
    double start, delta;
    int64_t istart, idelta;
    PP_TRY(scalar_of(&in[0], &start, &istart, err));
    PP_TRY(scalar_of(&in[2], &delta, &idelta, err));
    const bool is_float = t == PP_F32 || t == PP_F64 || t == PP_F16 || t == PP_BF16;
    const int64_t n = out[0].shape.dim[0];
    const size_t esz = pp_dtype_size(t);
    byte *dst = out[0].data;
    for (int64_t i = 0; i < n; i++) {
        byte *e = dst + (size_t)i * esz;
        if (is_float) {
            store_number(t, start + (double)i * delta, e);
        } else { /* exact: the values lie between start and limit */
            int64_t v = (int64_t)((uint64_t)istart + (uint64_t)i * (uint64_t)idelta);
            switch (esz) {
            case 1: { int8_t x = (int8_t)v; memcpy(e, &x, 1); break; }
            case 2: { int16_t x = (int16_t)v; memcpy(e, &x, 2); break; }
            case 4: { int32_t x = (int32_t)v; memcpy(e, &x, 4); break; }
            default: memcpy(e, &v, 8); break;
            }
        }
    }
    return PP_OK;
}

/* ---- OneHot ---------------------------------------------------------------------------------- */

/* Index k of t as int64: floats cut toward zero, NaN and out-of-range
 * floats as -huge (no class). */
static int64_t onehot_index(const pprt_tensor *t, int64_t k) {
    double v;
    switch (t->dtype) {
    case PP_F32: v = ((const float *)t->data)[k]; break;
    case PP_F64: v = ((const double *)t->data)[k]; break;
    case PP_I8: return ((const int8_t *)t->data)[k];
    case PP_U8: return ((const uint8_t *)t->data)[k];
    case PP_I16: return ((const int16_t *)t->data)[k];
    case PP_U16: return ((const uint16_t *)t->data)[k];
    case PP_I32: return ((const int32_t *)t->data)[k];
    case PP_U32: return ((const uint32_t *)t->data)[k];
    case PP_U64: { const uint64_t u = ((const uint64_t *)t->data)[k]; return u > INT64_MAX ? INT64_MIN : (int64_t)u; }
    default: return ((const int64_t *)t->data)[k];
    }
    return v > -9.0e18 && v < 9.0e18 ? (int64_t)v : INT64_MIN;
}

/* values[1] where the index (plus depth, if negative) names the class, else
 * values[0]; depth and axis as the output's shape says. */
pp_status kern_ONEHOT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                      pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("OneHot", n_in, 3, 3, n_out, err));
    const int r = in[0].shape.rank;
    if (out[0].shape.rank != r + 1 || out[0].dtype != in[2].dtype || numel(&in[2].shape) != 2)
        return PP_FAIL(err, PP_EINVAL, "OneHot kernel: output of rank %d for indices of rank %d", out[0].shape.rank, r);
    int64_t ax;
    int axis = 0;
    PP_TRY(pp_attr_int(attrs, "axis", -1, &ax, err));
    PP_TRY(norm_axis(ax, r + 1, "attribute 'axis'", &axis, err));
    const int64_t depth = out[0].shape.dim[axis];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= out[0].shape.dim[i];
    for (int i = axis + 1; i <= r; i++) inner *= out[0].shape.dim[i];
    const size_t esz = esize(&out[0]);
    const byte *off = in[2].data, *on = (const byte *)in[2].data + esz;
    byte *o = out[0].data;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t c = 0; c < depth; c++)
            for (int64_t b = 0; b < inner; b++) {
                int64_t k = onehot_index(&in[0], a * inner + b);
                if (k < 0 && k >= -depth) k += depth;
                memcpy(o + (size_t)((a * depth + c) * inner + b) * esz, k == c ? on : off, esz);
            }
    return PP_OK;
}
