/* shape_tensor.c: shape inference and FLOPs of the ops in ops_tensor.def:
 * the shape and data movement ops (Flatten, Reshape, Transpose, Squeeze,
 * Unsqueeze, Concat, Split, Slice, Gather, GatherElements, ScatterND,
 * ScatterElements (and its old name Scatter), Shape, Size, ConstantOfShape,
 * EyeLike, Expand, Tile, Pad, CenterCropPad, Trilu, Range, OneHot).
 *
 * These ops move bytes, so they accept every fixed-size element type. Inputs
 * that decide an output's SHAPE (Reshape's shape, Slice's starts/ends/axes/
 * steps, Pad's pads and axes, ...) must be constants known at compile time;
 * runtime/cpu/ref_tensor.c re-reads them from the tensors when it runs, and
 * derives the rest from the output shapes validated here. All of them do no
 * arithmetic worth counting: their FLOPs are 0 (the Scatter reductions: one
 * per updated element). */
#include "op_fns.h"
#include "shape_nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

static bool present(const pp_tinfo *in, int n_in, int k) {
    return k < n_in && in[k].dtype != PP_UNDEFINED;
}

static pp_status need_sized(const pp_tinfo *t, const char *what, pp_err *err) {
    if (pp_dtype_size(t->dtype) == 0)
        return PP_FAIL(err, PP_EUNSUP,
                       "%s has element type %s; only fixed-size element types are supported",
                       what, pp_dtype_name(t->dtype));
    return PP_OK;
}

static pp_status need_index(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->dtype != PP_I64 && t->dtype != PP_I32)
        return PP_FAIL(err, PP_EINVAL, "%s must be int64 or int32, got %s", what,
                       pp_dtype_name(t->dtype));
    return PP_OK;
}

static pp_status need_1d(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->shape.rank != 1)
        return PP_FAIL(err, PP_EINVAL, "%s must be 1-D, has rank %d", what, t->shape.rank);
    return PP_OK;
}

/* A constant 1-D integer input, read into out[max]. An empty list is known
 * whether or not its (absent) bytes came along. */
static pp_status const_list(const pp_tinfo *t, const char *what, int64_t *out, int max, int *n,
                            pp_err *err) {
    PP_TRY(need_1d(t, what, err));
    if (t->shape.dim[0] == 0) {
        PP_TRY(need_index(t, what, err));
        *n = 0;
        return PP_OK;
    }
    return pp_const_ints(t, what, out, max, n, err);
}

/* Normalize n axes against rank into out[], rejecting duplicates; `what`
 * names the list in messages. */
static pp_status norm_axes(const int64_t *axes, int n, int rank, const char *what, int *out,
                           pp_err *err) {
    for (int i = 0; i < n; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s[%d]", what, i);
        PP_TRY(pp_norm_axis(axes[i], rank, name, &out[i], err));
        for (int j = 0; j < i; j++)
            if (out[j] == out[i])
                return PP_FAIL(err, PP_EINVAL, "%s names axis %d twice", what, out[i]);
    }
    return PP_OK;
}

static pp_status mul_dim(int64_t a, int64_t b, int64_t *r, pp_err *err) {
    if (__builtin_mul_overflow(a, b, r))
        return PP_FAIL(err, PP_EINVAL, "element count overflows");
    return PP_OK;
}

/* A tensor attribute or input given for the wrong opset (the ONNX spec moved
 * several attributes to inputs). */
static pp_status attr_moved(pp_attrs a, const char *name, int since, pp_err *err) {
    if (a.opset >= since && pp_attr_find(a, name))
        return PP_FAIL(err, PP_EINVAL,
                       "attribute '%s' is not valid at opset %d (it is an input from opset %d)",
                       name, a.opset, since);
    return PP_OK;
}

static pp_status input_too_new(const pp_tinfo *in, int n_in, int k, const char *name, pp_attrs a,
                               int since, pp_err *err) {
    if (a.opset < since && present(in, n_in, k))
        return PP_FAIL(err, PP_EINVAL,
                       "input '%s' is not valid at opset %d (it is an attribute before opset %d)",
                       name, a.opset, since);
    return PP_OK;
}

#define ZERO_FLOPS(E)                                                                        \
    double flops_##E(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,         \
                     int n_out) {                                                            \
        (void)a, (void)in, (void)n_in, (void)out, (void)n_out;                               \
        return 0;                                                                            \
    }

/* ---- Flatten ---------------------------------------------------------------------- */

pp_status shape_FLATTEN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    int r = in[0].shape.rank;
    int64_t axis;
    PP_TRY(pp_attr_int(a, "axis", 1, &axis, err));
    if (axis < -r || axis > r)
        return PP_FAIL(err, PP_EINVAL, "attribute 'axis'=%lld is out of range [%d, %d]",
                       (long long)axis, -r, r);
    if (axis < 0) axis += r;
    int64_t d0 = 1, d1 = 1;
    for (int i = 0; i < r; i++) {
        int64_t *d = i < axis ? &d0 : &d1;
        PP_TRY(mul_dim(*d, in[0].shape.dim[i], d, err));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = (pp_shape){.rank = 2, .dim = {d0, d1}};
    return PP_OK;
}
ZERO_FLOPS(FLATTEN)

/* ---- Reshape -------------------------------------------------------------------- */

pp_status shape_RESHAPE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    const pp_shape *x = &in[0].shape;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    int64_t s[PP_MAX_DIMS];
    int n;
    PP_TRY(const_list(&in[1], "input 'shape'", s, PP_MAX_DIMS, &n, err));
    int64_t allowzero;
    PP_TRY(pp_attr_int(a, "allowzero", 0, &allowzero, err));
    if (allowzero != 0 && allowzero != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'allowzero'=%lld must be 0 or 1",
                       (long long)allowzero);
    int64_t total;
    PP_TRY(pp_shape_numel(x, &total, err));
    pp_shape o = {.rank = n};
    int infer = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        int64_t v = s[i];
        if (v == -1) {
            if (infer >= 0)
                return PP_FAIL(err, PP_EINVAL, "input 'shape' holds -1 more than once");
            infer = i;
            o.dim[i] = 1;
            continue;
        }
        if (v < -1)
            return PP_FAIL(err, PP_EINVAL, "input 'shape'[%d]=%lld is negative", i, (long long)v);
        if (v == 0 && !allowzero) {
            if (i >= x->rank)
                return PP_FAIL(err, PP_EINVAL,
                               "input 'shape'[%d]=0 copies dimension %d, but the input has rank %d",
                               i, i, x->rank);
            v = x->dim[i];
        } else if (v == 0) {
            has_zero = true;
        }
        o.dim[i] = v;
        PP_TRY(mul_dim(known, v, &known, err));
    }
    char sx[128], so[128];
    if (infer >= 0) {
        if (has_zero)
            return PP_FAIL(err, PP_EINVAL,
                           "input 'shape' holds both 0 and -1 with attribute 'allowzero'=1");
        if (known == 0)
            return PP_FAIL(err, PP_EINVAL,
                           "input 'shape': the -1 dimension is ambiguous when the other "
                           "dimensions hold 0 elements");
        if (total % known)
            return PP_FAIL(err, PP_EINVAL, "cannot reshape %s (%lld elements) into %s",
                           pp_shape_str(x, sx, sizeof sx), (long long)total,
                           pp_shape_str(&o, so, sizeof so));
        o.dim[infer] = total / known;
    } else if (known != total) {
        return PP_FAIL(err, PP_EINVAL, "cannot reshape %s (%lld elements) into %s (%lld elements)",
                       pp_shape_str(x, sx, sizeof sx), (long long)total,
                       pp_shape_str(&o, so, sizeof so), (long long)known);
    }
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    return PP_OK;
}
ZERO_FLOPS(RESHAPE)

/* ---- Transpose ------------------------------------------------------------------- */

pp_status pp_transpose_perm(pp_attrs a, int rank, int64_t *perm, pp_err *err) {
    int n;
    PP_TRY(pp_attr_ints(a, "perm", perm, PP_MAX_DIMS, &n, err));
    if (n == 0) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return PP_OK;
    }
    if (n != rank)
        return PP_FAIL(err, PP_EINVAL, "attribute 'perm' has %d values, expected %d (the rank)", n,
                       rank);
    bool seen[PP_MAX_DIMS] = {false};
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
            return PP_FAIL(err, PP_EINVAL,
                           "attribute 'perm' is not a permutation of 0..%d (value %lld at %d)",
                           rank - 1, (long long)perm[i], i);
        seen[perm[i]] = true;
    }
    return PP_OK;
}

pp_status shape_TRANSPOSE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    int r = in[0].shape.rank;
    int64_t perm[PP_MAX_DIMS];
    PP_TRY(pp_transpose_perm(a, r, perm, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = r;
    for (int i = 0; i < r; i++) out[0].shape.dim[i] = in[0].shape.dim[perm[i]];
    return PP_OK;
}
ZERO_FLOPS(TRANSPOSE)

/* ---- DepthToSpace / SpaceToDepth --------------------------------------------------- */

pp_status pp_space_depth(pp_op op, pp_attrs a, const pp_shape *x, int64_t *dim, int64_t *sst, pp_err *err) {
    const char *name = pp_op_table[op].name;
    if (x->rank != 4)
        return PP_FAIL(err, PP_EUNSUP, "input 'input' has rank %d; %s takes [N, C, H, W]", x->rank, name);
    int64_t b;
    PP_TRY(pp_attr_int(a, "blocksize", 0, &b, err));
    if (b < 1) return PP_FAIL(err, PP_EINVAL, "attribute 'blocksize'=%lld must be at least 1", (long long)b);
    const int64_t N = x->dim[0], C = x->dim[1], H = x->dim[2], W = x->dim[3];
    const int64_t sN = C * H * W, sC = H * W, sH = W; /* the input's strides */
    if (op == PP_OP_DEPTHTOSPACE) {
        const char *mode;
        PP_TRY(pp_attr_string(a, "mode", "DCR", &mode, err));
        const bool crd = !strcmp(mode, "CRD");
        if (!crd && strcmp(mode, "DCR"))
            return PP_FAIL(err, PP_EINVAL, "attribute 'mode'='%s' is neither DCR nor CRD", mode);
        if (C % (b * b))
            return PP_FAIL(err, PP_EINVAL, "input 'input' has %lld channels, not a multiple of blocksize^2 = %lld",
                           (long long)C, (long long)(b * b));
        const int64_t c = C / (b * b);
        const int64_t d[6] = {N, c, H, b, W, b};
        /* output (n, k, h, i, w, j) reads channel i*b*c + j*c + k (DCR) or k*b*b + i*b + j (CRD) */
        const int64_t st[6] = {sN, crd ? b * b * sC : sC, sH, crd ? b * sC : b * c * sC, 1, crd ? sC : c * sC};
        memcpy(dim, d, sizeof d);
        memcpy(sst, st, sizeof st);
        return PP_OK;
    }
    if (H % b || W % b)
        return PP_FAIL(err, PP_EINVAL, "input 'input' is %lld x %lld, not a multiple of blocksize %lld",
                       (long long)H, (long long)W, (long long)b);
    /* output (n, i, j, k, h, w): channel (i*b + j)*C + k reads input (n, k, h*b + i, w*b + j) */
    const int64_t d[6] = {N, b, b, C, H / b, W / b};
    const int64_t st[6] = {sN, sH, 1, sC, b * sH, b};
    memcpy(dim, d, sizeof d);
    memcpy(sst, st, sizeof st);
    return PP_OK;
}

static pp_status shape_space_depth(pp_op op, pp_attrs a, const pp_tinfo *in, pp_tinfo *out, pp_err *err) {
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    int64_t d[6] = {0}, st[6] = {0};
    PP_TRY(pp_space_depth(op, a, &in[0].shape, d, st, err));
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = 4;
    out[0].shape.dim[0] = d[0];
    if (op == PP_OP_DEPTHTOSPACE) {
        out[0].shape.dim[1] = d[1];
        out[0].shape.dim[2] = d[2] * d[3];
        out[0].shape.dim[3] = d[4] * d[5];
    } else {
        out[0].shape.dim[1] = d[1] * d[2] * d[3];
        out[0].shape.dim[2] = d[4];
        out[0].shape.dim[3] = d[5];
    }
    return PP_OK;
}

pp_status shape_DEPTHTOSPACE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    return shape_space_depth(PP_OP_DEPTHTOSPACE, a, in, out, err);
}
ZERO_FLOPS(DEPTHTOSPACE)

pp_status shape_SPACETODEPTH(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    return shape_space_depth(PP_OP_SPACETODEPTH, a, in, out, err);
}
ZERO_FLOPS(SPACETODEPTH)

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------- */

/* axes: attribute before opset 13, optional input 1 from 13; *n = 0 when absent. */
static pp_status squeeze_axes(pp_attrs a, const pp_tinfo *in, int n_in, int64_t *axes, int *n,
                              pp_err *err) {
    PP_TRY(attr_moved(a, "axes", 13, err));
    PP_TRY(input_too_new(in, n_in, 1, "axes", a, 13, err));
    *n = 0;
    if (a.opset < 13) return pp_attr_ints(a, "axes", axes, PP_MAX_DIMS, n, err);
    if (present(in, n_in, 1)) return const_list(&in[1], "input 'axes'", axes, PP_MAX_DIMS, n, err);
    return PP_OK;
}

pp_status shape_SQUEEZE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    const pp_shape *x = &in[0].shape;
    int64_t axes[PP_MAX_DIMS];
    int n, ax[PP_MAX_DIMS];
    PP_TRY(squeeze_axes(a, in, n_in, axes, &n, err));
    PP_TRY(norm_axes(axes, n, x->rank, "axes", ax, err));
    bool drop[PP_MAX_DIMS] = {false};
    if (n == 0) {
        for (int i = 0; i < x->rank; i++) drop[i] = x->dim[i] == 1;
    } else {
        for (int i = 0; i < n; i++) {
            if (x->dim[ax[i]] != 1)
                return PP_FAIL(err, PP_EINVAL, "cannot squeeze axis %d: its size is %lld, not 1",
                               ax[i], (long long)x->dim[ax[i]]);
            drop[ax[i]] = true;
        }
    }
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) out[0].shape.dim[out[0].shape.rank++] = x->dim[i];
    return PP_OK;
}
ZERO_FLOPS(SQUEEZE)

pp_status shape_UNSQUEEZE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    const pp_shape *x = &in[0].shape;
    int64_t axes[PP_MAX_DIMS];
    int n, ax[PP_MAX_DIMS];
    PP_TRY(squeeze_axes(a, in, n_in, axes, &n, err));
    if (n == 0)
        return PP_FAIL(err, PP_EINVAL, "%s 'axes' is required",
                       a.opset < 13 ? "attribute" : "input");
    int r = x->rank + n;
    if (r > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "output rank %d exceeds %d", r, PP_MAX_DIMS);
    PP_TRY(norm_axes(axes, n, r, "axes", ax, err));
    bool ins[PP_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) ins[ax[i]] = true;
    out[0].dtype = in[0].dtype;
    out[0].shape.rank = r;
    for (int i = 0, k = 0; i < r; i++) out[0].shape.dim[i] = ins[i] ? 1 : x->dim[k++];
    return PP_OK;
}
ZERO_FLOPS(UNSQUEEZE)

/* ---- Concat ---------------------------------------------------------------------- */

pp_status shape_CONCAT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_out;
    if (!pp_attr_find(a, "axis")) return PP_FAIL(err, PP_EINVAL, "attribute 'axis' is required");
    int64_t axis64;
    PP_TRY(pp_attr_int(a, "axis", 0, &axis64, err));
    const pp_shape *x = &in[0].shape;
    PP_TRY(need_sized(&in[0], "input 0", err));
    if (x->rank < 1) return PP_FAIL(err, PP_EINVAL, "input 0 is a scalar; Concat needs rank >= 1");
    int axis;
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", &axis, err));
    pp_shape o = *x;
    for (int k = 1; k < n_in; k++) {
        const pp_shape *s = &in[k].shape;
        if (in[k].dtype == PP_UNDEFINED)
            return PP_FAIL(err, PP_EINVAL, "input %d is missing", k);
        if (in[k].dtype != in[0].dtype)
            return PP_FAIL(err, PP_EINVAL, "input %d has element type %s, input 0 has %s", k,
                           pp_dtype_name(in[k].dtype), pp_dtype_name(in[0].dtype));
        bool ok = s->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++) ok = d == axis || s->dim[d] == x->dim[d];
        if (!ok) {
            char sa[128], sb[128];
            return PP_FAIL(err, PP_EINVAL,
                           "input %d has shape %s, which differs from input 0's %s outside axis %d",
                           k, pp_shape_str(s, sa, sizeof sa), pp_shape_str(x, sb, sizeof sb), axis);
        }
        if (__builtin_add_overflow(o.dim[axis], s->dim[axis], &o.dim[axis]))
            return PP_FAIL(err, PP_EINVAL, "element count overflows");
    }
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    return PP_OK;
}
ZERO_FLOPS(CONCAT)

/* ---- Split ------------------------------------------------------------------------ */

pp_status shape_SPLIT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    const pp_shape *x = &in[0].shape;
    if (x->rank < 1) return PP_FAIL(err, PP_EINVAL, "input 'input' is a scalar; Split needs rank >= 1");
    int64_t axis64;
    int axis;
    PP_TRY(pp_attr_int(a, "axis", 0, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", &axis, err));
    PP_TRY(attr_moved(a, "split", 13, err));
    PP_TRY(input_too_new(in, n_in, 1, "split", a, 13, err));
    int64_t split[PP_MAX_OUTPUTS];
    int ns = 0;
    bool have = false;
    if (a.opset < 13) {
        PP_TRY(pp_attr_ints(a, "split", split, PP_MAX_OUTPUTS, &ns, err));
        have = ns > 0;
    } else if (present(in, n_in, 1)) {
        PP_TRY(const_list(&in[1], "input 'split'", split, PP_MAX_OUTPUTS, &ns, err));
        have = true;
    }
    const pp_attr *num = pp_attr_find(a, "num_outputs");
    if (num && a.opset < 18)
        return PP_FAIL(err, PP_EINVAL, "attribute 'num_outputs' is not valid before opset 18");
    if (num && have)
        return PP_FAIL(err, PP_EINVAL, "input 'split' and attribute 'num_outputs' are both given");
    const int64_t dim = x->dim[axis];
    if (have) {
        if (ns != n_out)
            return PP_FAIL(err, PP_EINVAL, "'split' has %d values for %d outputs", ns, n_out);
        int64_t sum = 0;
        for (int k = 0; k < ns; k++) {
            if (split[k] < 0)
                return PP_FAIL(err, PP_EINVAL, "'split'[%d]=%lld is negative", k,
                               (long long)split[k]);
            if (__builtin_add_overflow(sum, split[k], &sum))
                return PP_FAIL(err, PP_EINVAL, "'split' overflows");
        }
        if (sum != dim)
            return PP_FAIL(err, PP_EINVAL, "'split' sums to %lld, but axis %d has size %lld",
                           (long long)sum, axis, (long long)dim);
    } else {
        int64_t parts = n_out;
        if (num) {
            int64_t v;
            PP_TRY(pp_attr_int(a, "num_outputs", 0, &v, err));
            if (v != n_out)
                return PP_FAIL(err, PP_EINVAL, "attribute 'num_outputs'=%lld, but the node has %d outputs",
                               (long long)v, n_out);
        }
        if (dim % parts == 0) {
            for (int k = 0; k < n_out; k++) split[k] = dim / parts;
        } else if (a.opset < 18) {
            return PP_FAIL(err, PP_EINVAL,
                           "axis %d (size %lld) cannot be split into %d equal parts (uneven "
                           "splits need opset 18)", axis, (long long)dim, n_out);
        } else {
            /* opset 18: chunks of ceil(dim / n), the last one smaller */
            int64_t chunk = dim / parts + 1, last = dim - chunk * (parts - 1);
            if (last < 0)
                return PP_FAIL(err, PP_EINVAL,
                               "axis %d (size %lld) cannot be split into %d chunks of %lld",
                               axis, (long long)dim, n_out, (long long)chunk);
            for (int k = 0; k < n_out; k++) split[k] = k == n_out - 1 ? last : chunk;
        }
    }
    for (int k = 0; k < n_out; k++) {
        out[k] = (pp_tinfo){in[0].dtype, *x, NULL};
        out[k].shape.dim[axis] = split[k];
    }
    return PP_OK;
}
ZERO_FLOPS(SPLIT)

/* ---- Slice ----------------------------------------------------------------------- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

pp_status pp_slice_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_slice *sl, pp_err *err) {
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    if (r < 1) return PP_FAIL(err, PP_EINVAL, "input 'data' is a scalar; Slice needs rank >= 1");
    int64_t st[PP_MAX_DIMS], en[PP_MAX_DIMS], axes[PP_MAX_DIMS], steps[PP_MAX_DIMS];
    int ns, ne, na = -1, nst = -1; /* -1: absent, use the defaults */
    if (a.opset < 10) {
        if (n_in > 1)
            return PP_FAIL(err, PP_EINVAL,
                           "Slice takes 1 input before opset 10 (starts/ends/axes are attributes)");
        if (!pp_attr_find(a, "starts") || !pp_attr_find(a, "ends"))
            return PP_FAIL(err, PP_EINVAL, "attributes 'starts' and 'ends' are required");
        PP_TRY(pp_attr_ints(a, "starts", st, PP_MAX_DIMS, &ns, err));
        PP_TRY(pp_attr_ints(a, "ends", en, PP_MAX_DIMS, &ne, err));
        int n;
        PP_TRY(pp_attr_ints(a, "axes", axes, PP_MAX_DIMS, &n, err));
        if (n > 0) na = n;
    } else {
        if (pp_attr_find(a, "starts") || pp_attr_find(a, "ends") || pp_attr_find(a, "axes"))
            return PP_FAIL(err, PP_EINVAL,
                           "attributes 'starts'/'ends'/'axes' are not valid from opset 10 (they "
                           "are inputs)");
        if (n_in < 3 || !present(in, n_in, 1) || !present(in, n_in, 2))
            return PP_FAIL(err, PP_EINVAL, "inputs 'starts' and 'ends' are required");
        PP_TRY(const_list(&in[1], "input 'starts'", st, PP_MAX_DIMS, &ns, err));
        PP_TRY(const_list(&in[2], "input 'ends'", en, PP_MAX_DIMS, &ne, err));
        if (present(in, n_in, 3))
            PP_TRY(const_list(&in[3], "input 'axes'", axes, PP_MAX_DIMS, &na, err));
        if (present(in, n_in, 4))
            PP_TRY(const_list(&in[4], "input 'steps'", steps, PP_MAX_DIMS, &nst, err));
    }
    if (ne != ns) return PP_FAIL(err, PP_EINVAL, "'starts' has %d values, 'ends' %d", ns, ne);
    if (ns > r)
        return PP_FAIL(err, PP_EINVAL, "'starts' has %d values, more than the rank %d", ns, r);
    if (na < 0) {
        for (int i = 0; i < ns; i++) axes[i] = i;
        na = ns;
    }
    if (na != ns) return PP_FAIL(err, PP_EINVAL, "'axes' has %d values, 'starts' %d", na, ns);
    if (nst < 0) {
        for (int i = 0; i < ns; i++) steps[i] = 1;
        nst = ns;
    }
    if (nst != ns) return PP_FAIL(err, PP_EINVAL, "'steps' has %d values, 'starts' %d", nst, ns);
    int ax[PP_MAX_DIMS];
    PP_TRY(norm_axes(axes, na, r, "axes", ax, err));
    sl->out = *x;
    for (int d = 0; d < r; d++) sl->first[d] = 0, sl->step[d] = 1;
    for (int i = 0; i < ns; i++) {
        const int64_t dim = x->dim[ax[i]], step = steps[i];
        int64_t s = st[i], e = en[i];
        if (step == 0) return PP_FAIL(err, PP_EINVAL, "'steps'[%d] is 0", i);
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        int64_t len;
        if (dim == 0) {
            s = 0, len = 0;
        } else if (step > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            len = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            uint64_t ustep = (uint64_t)0 - (uint64_t)step;
            len = s > e ? (int64_t)((uint64_t)(s - e - 1) / ustep + 1) : 0;
        }
        sl->first[ax[i]] = len ? s : 0;
        sl->step[ax[i]] = len > 1 ? step : 1; /* a lone element needs no step (and step may be huge) */
        sl->out.dim[ax[i]] = len;
    }
    return PP_OK;
}

pp_status shape_SLICE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)n_out;
    pp_slice sl;
    PP_TRY(pp_slice_parse(a, in, n_in, &sl, err));
    out[0] = (pp_tinfo){in[0].dtype, sl.out, NULL};
    return PP_OK;
}
ZERO_FLOPS(SLICE)

/* ---- Gather / GatherElements ----------------------------------------------------------- */

/* Constant indices (data known) must lie in [-size, size): refused when the
 * plan is compiled or loaded, not on every run. */
static pp_status check_const_indices(const pp_tinfo *ix, int64_t size, int axis, pp_err *err) {
    int64_t cnt;
    if (!ix->data || pp_shape_numel(&ix->shape, &cnt, NULL) != PP_OK) return PP_OK;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v;
        if (ix->dtype == PP_I64) {
            memcpy(&v, (const char *)ix->data + 8 * i, 8); /* may be unaligned (pp_value) */
        } else {
            int32_t w;
            memcpy(&w, (const char *)ix->data + 4 * i, 4);
            v = w;
        }
        if (v < -size || v >= size)
            return PP_FAIL(err, PP_EINVAL, "constant input 'indices' holds %lld (element %lld), out of range for "
                           "axis %d of size %lld (expected %lld..%lld)", (long long)v, (long long)i, axis,
                           (long long)size, (long long)-size, (long long)size - 1);
    }
    return PP_OK;
}

pp_status shape_GATHER(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    PP_TRY(need_index(&in[1], "input 'indices'", err));
    const pp_shape *x = &in[0].shape, *ix = &in[1].shape;
    if (x->rank < 1) return PP_FAIL(err, PP_EINVAL, "input 'data' is a scalar; Gather needs rank >= 1");
    int64_t axis64;
    int axis;
    PP_TRY(pp_attr_int(a, "axis", 0, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", &axis, err));
    int r = x->rank - 1 + ix->rank;
    if (r > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "output rank %d exceeds %d", r, PP_MAX_DIMS);
    PP_TRY(check_const_indices(&in[1], x->dim[axis], axis, err));
    pp_shape o = {.rank = r};
    int k = 0;
    for (int d = 0; d < axis; d++) o.dim[k++] = x->dim[d];
    for (int d = 0; d < ix->rank; d++) o.dim[k++] = ix->dim[d];
    for (int d = axis + 1; d < x->rank; d++) o.dim[k++] = x->dim[d];
    out[0] = (pp_tinfo){in[0].dtype, o, NULL};
    return PP_OK;
}
ZERO_FLOPS(GATHER)

/* GatherElements and ScatterElements: indices of the data's rank, no dimension but the
 * axis's larger than the data's; the normalized axis into *axis. */
static pp_status elements_axis(pp_attrs a, const pp_shape *x, const pp_shape *ix, int *axis,
                               pp_err *err) {
    if (ix->rank != x->rank)
        return PP_FAIL(err, PP_EINVAL, "input 'indices' has rank %d, expected %d (same as 'data')",
                       ix->rank, x->rank);
    int64_t axis64;
    PP_TRY(pp_attr_int(a, "axis", 0, &axis64, err));
    PP_TRY(pp_norm_axis(axis64, x->rank, "attribute 'axis'", axis, err));
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && ix->dim[d] > x->dim[d])
            return PP_FAIL(err, PP_EINVAL,
                           "input 'indices' dim %d is %lld, larger than the data's %lld", d,
                           (long long)ix->dim[d], (long long)x->dim[d]);
    return PP_OK;
}

pp_status shape_GATHERELEMENTS(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                               int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    PP_TRY(need_index(&in[1], "input 'indices'", err));
    const pp_shape *x = &in[0].shape, *ix = &in[1].shape;
    if (x->rank < 1)
        return PP_FAIL(err, PP_EINVAL, "input 'data' is a scalar; GatherElements needs rank >= 1");
    int axis;
    PP_TRY(elements_axis(a, x, ix, &axis, err));
    PP_TRY(check_const_indices(&in[1], x->dim[axis], axis, err));
    out[0] = (pp_tinfo){in[0].dtype, *ix, NULL};
    return PP_OK;
}
ZERO_FLOPS(GATHERELEMENTS)

/* ---- ScatterND --------------------------------------------------------------------------- */

/* 'reduction' of ScatterND and ScatterElements: none, add, mul, max, min. */
/* What ScatterND and ScatterElements check alike: attribute 'reduction' one
 * of none, add, mul, max, min; data of a known element size; indices int32
 * or int64; updates of data's element type. */
static pp_status scatter_inputs(pp_attrs a, const pp_tinfo *in, pp_err *err) {
    const char *red;
    PP_TRY(pp_attr_string(a, "reduction", "none", &red, err));
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") &&
        strcmp(red, "min"))
        return PP_FAIL(err, PP_EINVAL,
                       "attribute 'reduction'='%s' is not one of none, add, mul, max, min", red);
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    PP_TRY(need_index(&in[1], "input 'indices'", err));
    if (in[2].dtype != in[0].dtype)
        return PP_FAIL(err, PP_EINVAL, "input 'updates' has element type %s, but 'data' has %s",
                       pp_dtype_name(in[2].dtype), pp_dtype_name(in[0].dtype));
    return PP_OK;
}

/* ScatterND(data, indices, updates), attribute 'reduction' (opset 16: none,
 * add, mul; 18: max, min; accepted at any opset). indices (rank q >= 1) holds
 * index tuples of length k = its last dim (k <= rank r of data); updates has
 * shape indices.shape[:-1] + data.shape[k:]. The output is data's. The
 * reductions compute, so they need a numeric type (see kern_SCATTERND). */
pp_status shape_SCATTERND(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(scatter_inputs(a, in, err));
    const pp_shape *x = &in[0].shape, *ix = &in[1].shape, *u = &in[2].shape;
    if (x->rank < 1) return PP_FAIL(err, PP_EINVAL, "input 'data' is a scalar; ScatterND needs rank >= 1");
    if (ix->rank < 1) return PP_FAIL(err, PP_EINVAL, "input 'indices' is a scalar; ScatterND needs rank >= 1");
    const int q = ix->rank;
    const int64_t k = ix->dim[q - 1];
    if (k > x->rank)
        return PP_FAIL(err, PP_EINVAL,
                       "input 'indices' has index tuples of length %lld, more than the data's "
                       "rank %d", (long long)k, x->rank);
    pp_shape want = {.rank = q - 1 + x->rank - (int)k};
    if (want.rank > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "input 'updates' would need rank %d (at most %d)",
                       want.rank, PP_MAX_DIMS);
    int n = 0;
    for (int d = 0; d < q - 1; d++) want.dim[n++] = ix->dim[d];
    for (int d = (int)k; d < x->rank; d++) want.dim[n++] = x->dim[d];
    if (!pp_shape_eq(u, &want)) {
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL,
                       "input 'updates' has shape %s, expected %s (indices.shape[:-1] + "
                       "data.shape[%lld:])", pp_shape_str(u, s1, sizeof s1),
                       pp_shape_str(&want, s2, sizeof s2), (long long)k);
    }
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    return PP_OK;
}

double flops_SCATTERND(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                       int n_out) {
    (void)n_in, (void)out, (void)n_out;
    const char *red = "none";
    (void)pp_attr_string(a, "reduction", "none", &red, NULL);
    return strcmp(red, "none") ? pp_numel_d(&in[2]) : 0;
}

/* ---- ScatterElements ---------------------------------------------------------------------- */

/* ScatterElements(data, indices, updates; axis, reduction): indices and
 * updates of one shape and data's rank, no larger than data off the axis;
 * element j of updates goes to data's position j with the axis coordinate
 * replaced by indices[j]. The output is data's. */
pp_status shape_SCATTERELEMENTS(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                                int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(scatter_inputs(a, in, err));
    const pp_shape *x = &in[0].shape, *ix = &in[1].shape;
    if (x->rank < 1)
        return PP_FAIL(err, PP_EINVAL, "input 'data' is a scalar; ScatterElements needs rank >= 1");
    if (!pp_shape_eq(ix, &in[2].shape)) {
        char s1[96], s2[96];
        return PP_FAIL(err, PP_EINVAL, "input 'updates' has shape %s, but 'indices' has %s",
                       pp_shape_str(&in[2].shape, s1, sizeof s1), pp_shape_str(ix, s2, sizeof s2));
    }
    int axis;
    PP_TRY(elements_axis(a, x, ix, &axis, err));
    (void)axis;
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    return PP_OK;
}

double flops_SCATTERELEMENTS(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                             int n_out) {
    return flops_SCATTERND(a, in, n_in, out, n_out);
}

/* Scatter (opsets 9-10): ScatterElements without 'reduction'. */
pp_status shape_SCATTER(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    if (pp_attr_find(a, "reduction"))
        return PP_FAIL(err, PP_EINVAL, "Scatter has no attribute 'reduction' (ScatterElements has)");
    return shape_SCATTERELEMENTS(a, in, n_in, out, n_out, err);
}
ZERO_FLOPS(SCATTER)

/* ---- Shape / Size ---------------------------------------------------------------------- */

pp_status shape_SHAPE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)n_in, (void)n_out;
    const int r = in[0].shape.rank;
    int64_t start, end;
    PP_TRY(pp_attr_int(a, "start", 0, &start, err));
    PP_TRY(pp_attr_int(a, "end", r, &end, err));
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = clamp64(start, 0, r);
    end = clamp64(end, 0, r);
    out[0].dtype = PP_I64;
    out[0].shape = (pp_shape){.rank = 1, .dim = {end > start ? end - start : 0}};
    return PP_OK;
}
ZERO_FLOPS(SHAPE)

pp_status shape_SIZE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)a, (void)in, (void)n_in, (void)n_out, (void)err;
    out[0].dtype = PP_I64;
    out[0].shape.rank = 0;
    return PP_OK;
}
ZERO_FLOPS(SIZE)

/* ---- ConstantOfShape -------------------------------------------------------------------- */

pp_status shape_CONSTANTOFSHAPE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out,
                                int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    int64_t s[PP_MAX_DIMS];
    int n;
    PP_TRY(const_list(&in[0], "input 'input'", s, PP_MAX_DIMS, &n, err));
    const pp_attr *v;
    PP_TRY(pp_attr_tensor(a, "value", &v, err));
    pp_dtype dt = PP_F32;
    if (v) {
        int64_t cnt;
        PP_TRY(pp_shape_numel(&v->t_shape, &cnt, err));
        if (cnt != 1 || v->t_shape.rank > 1)
            return PP_FAIL(err, PP_EINVAL, "attribute 'value' must hold exactly one value (1-D), has %lld",
                           (long long)cnt);
        dt = v->t_dtype;
        if (pp_dtype_size(dt) == 0 || v->t_nbytes != pp_dtype_size(dt))
            return PP_FAIL(err, PP_EUNSUP, "attribute 'value' has unsupported element type %s",
                           pp_dtype_name(dt));
    }
    out[0].dtype = dt;
    out[0].shape.rank = n;
    for (int i = 0; i < n; i++) {
        if (s[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "input 'input'[%d]=%lld is negative", i, (long long)s[i]);
        out[0].shape.dim[i] = s[i];
    }
    return PP_OK;
}
ZERO_FLOPS(CONSTANTOFSHAPE)

/* EyeLike(input; dtype, k): a 2-D tensor of input's shape, ones on the k-th
 * diagonal, zeros elsewhere; of type 'dtype' (default input's). */
static bool eye_type(pp_dtype t) {
    switch (t) {
    case PP_F32: case PP_F64: case PP_F16: case PP_BF16: case PP_I8: case PP_I16: case PP_I32:
    case PP_I64: case PP_U8: case PP_U16: case PP_U32: case PP_U64: case PP_BOOL: return true;
    default: return false;
    }
}

pp_status shape_EYELIKE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    (void)n_in, (void)n_out;
    if (in[0].shape.rank != 2)
        return PP_FAIL(err, PP_EINVAL, "input has rank %d; EyeLike takes a 2-D tensor",
                       in[0].shape.rank);
    int64_t dt, k;
    PP_TRY(pp_attr_int(a, "dtype", in[0].dtype, &dt, err));
    PP_TRY(pp_attr_int(a, "k", 0, &k, err));
    if (!eye_type(in[0].dtype))
        return PP_FAIL(err, PP_EUNSUP, "input has element type %s, which EyeLike does not take",
                       pp_dtype_name(in[0].dtype));
    if (dt < 0 || dt > 31 || !eye_type((pp_dtype)dt))
        return PP_FAIL(err, PP_EUNSUP, "attribute 'dtype'=%lld is not a type EyeLike makes",
                       (long long)dt);
    out[0] = (pp_tinfo){(pp_dtype)dt, in[0].shape, NULL};
    return PP_OK;
}
ZERO_FLOPS(EYELIKE)

/* ---- Expand / Tile -------------------------------------------------------------------- */

pp_status shape_EXPAND(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    pp_shape s;
    PP_TRY(const_list(&in[1], "input 'shape'", s.dim, PP_MAX_DIMS, &s.rank, err));
    for (int i = 0; i < s.rank; i++)
        if (s.dim[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "input 'shape'[%d]=%lld is negative", i,
                           (long long)s.dim[i]);
    out[0].dtype = in[0].dtype;
    return pp_broadcast(&in[0].shape, &s, &out[0].shape, err);
}
ZERO_FLOPS(EXPAND)

pp_status shape_TILE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    const pp_shape *x = &in[0].shape;
    int64_t rep[PP_MAX_DIMS];
    int n;
    PP_TRY(const_list(&in[1], "input 'repeats'", rep, PP_MAX_DIMS, &n, err));
    if (n != x->rank)
        return PP_FAIL(err, PP_EINVAL, "input 'repeats' has %d values, expected %d (the rank)", n,
                       x->rank);
    out[0] = (pp_tinfo){in[0].dtype, *x, NULL};
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "input 'repeats'[%d]=%lld is negative", i,
                           (long long)rep[i]);
        PP_TRY(mul_dim(x->dim[i], rep[i], &out[0].shape.dim[i], err));
    }
    return PP_OK;
}
ZERO_FLOPS(TILE)

/* ---- Pad ---------------------------------------------------------------------------- */

pp_status pp_pad_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_pad *pd, pp_err *err) {
    PP_TRY(need_sized(&in[0], "input 'data'", err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    const char *mode;
    PP_TRY(pp_attr_string(a, "mode", "constant", &mode, err));
    bool constant = !strcmp(mode, "constant");
    if (!constant && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
        return PP_FAIL(err, PP_EINVAL,
                       "attribute 'mode'='%s' is not one of constant, reflect, edge, wrap", mode);
    memset(pd, 0, sizeof *pd);
    pd->mode = constant ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 : 3;
    int64_t pads[2 * PP_MAX_DIMS], axes[PP_MAX_DIMS];
    int np, na = -1;
    PP_TRY(attr_moved(a, "pads", 11, err));
    PP_TRY(attr_moved(a, "value", 11, err));
    if (a.opset < 11) {
        if (n_in > 1)
            return PP_FAIL(err, PP_EINVAL, "Pad takes 1 input before opset 11 (pads is an attribute)");
        if (!pp_attr_find(a, "pads")) return PP_FAIL(err, PP_EINVAL, "attribute 'pads' is required");
        PP_TRY(pp_attr_ints(a, "pads", pads, 2 * PP_MAX_DIMS, &np, err));
        float value;
        PP_TRY(pp_attr_float(a, "value", 0.0f, &value, err));
        pd->value = value, pd->value_known = true;
    } else {
        if (!present(in, n_in, 1)) return PP_FAIL(err, PP_EINVAL, "input 'pads' is required");
        PP_TRY(input_too_new(in, n_in, 3, "axes", a, 18, err));
        PP_TRY(const_list(&in[1], "input 'pads'", pads, 2 * PP_MAX_DIMS, &np, err));
        pd->value_known = true; /* 0 unless given */
        if (present(in, n_in, 2)) {
            int64_t cnt;
            PP_TRY(pp_shape_numel(&in[2].shape, &cnt, err));
            if (in[2].dtype != in[0].dtype)
                return PP_FAIL(err, PP_EINVAL,
                               "input 'constant_value' has element type %s, the data %s",
                               pp_dtype_name(in[2].dtype), pp_dtype_name(in[0].dtype));
            if (cnt != 1 || in[2].shape.rank > 1)
                return PP_FAIL(err, PP_EINVAL, "input 'constant_value' must be a scalar");
            pd->value_known = in[2].data && in[2].dtype == PP_F32;
            if (pd->value_known) memcpy(&pd->value, in[2].data, sizeof(float));
        }
        if (present(in, n_in, 3))
            PP_TRY(const_list(&in[3], "input 'axes'", axes, PP_MAX_DIMS, &na, err));
    }
    int ax[PP_MAX_DIMS];
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    } else {
        PP_TRY(norm_axes(axes, na, r, "input 'axes'", ax, err));
    }
    if (np != 2 * na)
        return PP_FAIL(err, PP_EINVAL, "'pads' has %d values, expected %d (2 per axis)", np,
                       2 * na);
    pp_shape o = *x;
    for (int i = 0; i < na; i++) {
        const int64_t b = pads[i], e = pads[na + i], dim = x->dim[ax[i]];
        if (!constant && (b < 0 || e < 0))
            return PP_FAIL(err, PP_EUNSUP, "negative 'pads' with mode '%s' are not supported",
                           mode);
        if (!constant && dim == 0 && (b || e))
            return PP_FAIL(err, PP_EINVAL, "mode '%s' cannot pad axis %d, which is empty", mode,
                           ax[i]);
        int64_t v;
        if (__builtin_add_overflow(dim, b, &v) || __builtin_add_overflow(v, e, &v))
            return PP_FAIL(err, PP_EINVAL, "'pads' overflow");
        if (v < 0)
            return PP_FAIL(err, PP_EINVAL, "'pads' (%lld, %lld) remove more than axis %d's %lld elements",
                           (long long)b, (long long)e, ax[i], (long long)dim);
        o.dim[ax[i]] = v;
        pd->begin[ax[i]] = b;
    }
    pd->out = o;
    return PP_OK;
}

pp_status shape_PAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)n_out;
    pp_pad pd;
    PP_TRY(pp_pad_parse(a, in, n_in, &pd, err));
    out[0] = (pp_tinfo){in[0].dtype, pd.out, NULL};
    return PP_OK;
}

ZERO_FLOPS(PAD)

/* ---- CenterCropPad ---------------------------------------------------------------------- */

/* CenterCropPad(input_data, shape), attribute axes (default: every axis, in
 * order; negative ones counted from the end): each axis named cut or padded
 * with zeros to its value in the constant shape, centred. Where the
 * difference is odd the extra element goes at the end, as in the ONNX
 * reference: the crop starts at floor((dim - size) / 2), the input starts
 * floor((size - dim) / 2) into the padded output. Seen as a Pad of zeros:
 * begin = that start, negative when cropping. */
pp_status pp_centercrop_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_pad *pd, pp_err *err) {
    (void)n_in;
    PP_TRY(need_sized(&in[0], "input 'input_data'", err));
    PP_TRY(need_index(&in[1], "input 'shape'", err));
    const pp_shape *x = &in[0].shape;
    const int r = x->rank;
    int64_t size[PP_MAX_DIMS], axes[PP_MAX_DIMS];
    int ns, na;
    PP_TRY(const_list(&in[1], "input 'shape'", size, PP_MAX_DIMS, &ns, err));
    PP_TRY(pp_attr_ints(a, "axes", axes, PP_MAX_DIMS, &na, err));
    int ax[PP_MAX_DIMS];
    if (!pp_attr_find(a, "axes")) {
        na = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    } else {
        PP_TRY(norm_axes(axes, na, r, "attribute 'axes'", ax, err));
    }
    if (ns != na)
        return PP_FAIL(err, PP_EINVAL, "input 'shape' has %d values for %d axes (%s)", ns, na,
                       pp_attr_find(a, "axes") ? "attribute 'axes'" : "the input's rank");
    memset(pd, 0, sizeof *pd);
    pd->value_known = true; /* zeros */
    pd->out = *x;
    for (int i = 0; i < na; i++) {
        const int64_t dim = x->dim[ax[i]], want = size[i];
        if (want < 0)
            return PP_FAIL(err, PP_EINVAL, "input 'shape' asks for %lld elements along axis %d",
                           (long long)want, ax[i]);
        pd->out.dim[ax[i]] = want;
        pd->begin[ax[i]] = want >= dim ? (want - dim) / 2 : -((dim - want) / 2);
    }
    return PP_OK;
}

pp_status shape_CENTERCROPPAD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                              pp_err *err) {
    (void)n_out;
    pp_pad pd;
    PP_TRY(pp_centercrop_parse(a, in, n_in, &pd, err));
    out[0] = (pp_tinfo){in[0].dtype, pd.out, NULL};
    return PP_OK;
}

ZERO_FLOPS(CENTERCROPPAD)

/* ---- Trilu ---------------------------------------------------------------------------- */

pp_status shape_TRILU(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)n_out;
    PP_TRY(need_sized(&in[0], "input 'input'", err));
    PP_TRY(pp_need_rank(&in[0], 2, PP_MAX_DIMS, "input 'input'", err));
    int64_t upper;
    PP_TRY(pp_attr_int(a, "upper", 1, &upper, err));
    if (upper != 0 && upper != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'upper'=%lld must be 0 or 1", (long long)upper);
    if (present(in, n_in, 1)) {
        PP_TRY(need_index(&in[1], "input 'k'", err));
        int64_t cnt;
        PP_TRY(pp_shape_numel(&in[1].shape, &cnt, err));
        if (cnt != 1 || in[1].shape.rank > 1)
            return PP_FAIL(err, PP_EINVAL, "input 'k' must be a scalar");
    }
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}
ZERO_FLOPS(TRILU)

/* ---- Range ---------------------------------------------------------------------------- */

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* A scalar constant of a numeric type as double, or as int64 (*is_int). */
static pp_status range_scalar(const pp_tinfo *t, const char *what, double *d, int64_t *i,
                              pp_err *err) {
    int64_t cnt;
    PP_TRY(pp_shape_numel(&t->shape, &cnt, err));
    if (cnt != 1 || t->shape.rank > 1)
        return PP_FAIL(err, PP_EINVAL, "%s must be a scalar", what);
    if (!t->data)
        return PP_FAIL(err, PP_EUNSUP,
                       "%s must be a constant known at compile time (a data-dependent shape is "
                       "not supported)", what);
    const void *p = t->data;
    uint16_t h;
    *i = 0;
    switch (t->dtype) {
    case PP_F32: { float v; memcpy(&v, p, 4); *d = v; return PP_OK; }
    case PP_F64: memcpy(d, p, 8); return PP_OK;
    case PP_F16: memcpy(&h, p, 2); *d = half_to_double(h); return PP_OK;
    case PP_BF16: {
        memcpy(&h, p, 2);
        uint32_t u = (uint32_t)h << 16;
        float v;
        memcpy(&v, &u, 4);
        *d = v;
        return PP_OK;
    }
    case PP_I8: { int8_t v; memcpy(&v, p, 1); *i = v; break; }
    case PP_U8: { uint8_t v; memcpy(&v, p, 1); *i = v; break; }
    case PP_I16: { int16_t v; memcpy(&v, p, 2); *i = v; break; }
    case PP_U16: { uint16_t v; memcpy(&v, p, 2); *i = v; break; }
    case PP_I32: { int32_t v; memcpy(&v, p, 4); *i = v; break; }
    case PP_U32: { uint32_t v; memcpy(&v, p, 4); *i = v; break; }
    case PP_I64: memcpy(i, p, 8); break;
    default:
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; a numeric type is needed", what,
                       pp_dtype_name(t->dtype));
    }
    *d = (double)*i;
    return PP_OK;
}

static bool range_is_float(pp_dtype t) {
    return t == PP_F32 || t == PP_F64 || t == PP_F16 || t == PP_BF16;
}

pp_status shape_RANGE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    static const char *names[3] = {"input 'start'", "input 'limit'", "input 'delta'"};
    double d[3];
    int64_t iv[3];
    for (int k = 0; k < 3; k++) {
        if (in[k].dtype != in[0].dtype)
            return PP_FAIL(err, PP_EINVAL, "%s has element type %s, input 'start' %s", names[k],
                           pp_dtype_name(in[k].dtype), pp_dtype_name(in[0].dtype));
        PP_TRY(range_scalar(&in[k], names[k], &d[k], &iv[k], err));
    }
    int64_t n;
    if (range_is_float(in[0].dtype)) {
        if (d[2] == 0) return PP_FAIL(err, PP_EINVAL, "input 'delta' is 0");
        double c = ceil((d[1] - d[0]) / d[2]);
        if (c != c) return PP_FAIL(err, PP_EINVAL, "Range: the element count is not a number");
        if (c > (double)((int64_t)1 << 40))
            return PP_FAIL(err, PP_EINVAL, "Range: %g elements is too many", c);
        n = c > 0 ? (int64_t)c : 0;
    } else {
        const int64_t s = iv[0], l = iv[1], dl = iv[2];
        if (dl == 0) return PP_FAIL(err, PP_EINVAL, "input 'delta' is 0");
        if ((dl > 0 && l <= s) || (dl < 0 && l >= s)) {
            n = 0;
        } else { /* |l - s| and |dl| fit in uint64 */
            uint64_t span = dl > 0 ? (uint64_t)l - (uint64_t)s : (uint64_t)s - (uint64_t)l;
            uint64_t step = dl > 0 ? (uint64_t)dl : (uint64_t)0 - (uint64_t)dl;
            uint64_t c = (span - 1) / step + 1;
            if (c > ((uint64_t)1 << 40))
                return PP_FAIL(err, PP_EINVAL, "Range: %llu elements is too many",
                               (unsigned long long)c);
            n = (int64_t)c;
        }
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = (pp_shape){.rank = 1, .dim = {n}};
    return PP_OK;
}
ZERO_FLOPS(RANGE)

/* ---- OneHot ---------------------------------------------------------------------------------- */

/* OneHot(indices, depth, values): indices of an integer or float type (floats
 * cut toward zero), depth a constant scalar > 0 (it decides the shape),
 * values [off, on] of any fixed-size type; the new axis of depth at
 * 'axis' of the output. */
pp_status shape_ONEHOT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_in, (void)n_out;
    const pp_dtype it = in[0].dtype;
    const bool int_t = it == PP_I8 || it == PP_U8 || it == PP_I16 || it == PP_U16 || it == PP_I32 || it == PP_U32 ||
                       it == PP_I64 || it == PP_U64;
    if (!(int_t || it == PP_F32 || it == PP_F64))
        return PP_FAIL(err, PP_EUNSUP, "input indices has element type %s; integer, float32 or float64 are supported",
                       pp_dtype_name(it));
    double d;
    int64_t di;
    PP_TRY(range_scalar(&in[1], "input depth", &d, &di, err));
    if (!(d >= 1) || d > 9.0e15)
        return PP_FAIL(err, PP_EINVAL, "input depth is %g; it must be a positive number of classes", d);
    PP_TRY(need_sized(&in[2], "input values", err));
    if (in[2].shape.rank != 1 || in[2].shape.dim[0] != 2) {
        char s1[96];
        return PP_FAIL(err, PP_EINVAL, "input values has shape %s; it must be [2] (off, on)",
                       pp_shape_str(&in[2].shape, s1, sizeof s1));
    }
    const int r = in[0].shape.rank;
    if (r + 1 > PP_MAX_DIMS) return PP_FAIL(err, PP_EUNSUP, "indices of rank %d: the output's rank exceeds %d", r,
                                            PP_MAX_DIMS);
    int64_t ax;
    int axis;
    PP_TRY(pp_attr_int(a, "axis", -1, &ax, err));
    PP_TRY(pp_norm_axis(ax, r + 1, "attribute 'axis'", &axis, err));
    out[0].dtype = in[2].dtype;
    out[0].shape.rank = r + 1;
    for (int i = 0, j = 0; i <= r; i++) out[0].shape.dim[i] = i == axis ? (int64_t)d : in[0].shape.dim[j++];
    return PP_OK;
}
ZERO_FLOPS(ONEHOT)
