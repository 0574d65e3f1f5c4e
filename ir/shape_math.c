/* shape_math.c: shape inference and FLOPs of the ops in ops_math.def
 * (elementwise math and activations, broadcasting binary and variadic ops,
 * comparisons and logic, Where, Cast/CastLike, inference-mode Dropout,
 * CumSum, QuantizeLinear and DequantizeLinear).
 *
 * Element types: each op accepts the types its ONNX schema allows, except
 * string and complex (rejected with PP_EUNSUP); float16 and bfloat16 are
 * accepted wherever float32 is (the kernels compute them in float32). The
 * low-precision types (float8*, float4e2m1, int4/uint4/int2/uint2) are taken
 * by Cast, CastLike and Identity only: no arithmetic is done in them. The
 * accepted set is the union over opsets 7..21 (e.g. Add on int8, added at
 * opset 14, is accepted at any opset): a wider set never changes an answer. */
#include "op_fns.h"

#include <stdio.h>
#include <string.h>

/* ---- element type sets --------------------------------------------------------- */

#define TB(t) (1u << (unsigned)(t))
#define T_FLOAT (TB(PP_F32) | TB(PP_F64) | TB(PP_F16) | TB(PP_BF16))
#define T_SINT (TB(PP_I8) | TB(PP_I16) | TB(PP_I32) | TB(PP_I64))
#define T_UINT (TB(PP_U8) | TB(PP_U16) | TB(PP_U32) | TB(PP_U64))
#define T_NUM (T_FLOAT | T_SINT | T_UINT)
#define T_BOOL TB(PP_BOOL)
/* the low-precision types: only Cast, CastLike and Identity take them */
#define T_LOWP                                                                          \
    (TB(PP_F8E4M3FN) | TB(PP_F8E4M3FNUZ) | TB(PP_F8E5M2) | TB(PP_F8E5M2FNUZ) | TB(PP_U4) | \
     TB(PP_I4) | TB(PP_F4E2M1) | TB(PP_F8E8M0) | TB(PP_U2) | TB(PP_I2))

static bool in_set(pp_dtype t, unsigned set) { return (unsigned)t < 32 && (set & TB(t)); }

static pp_status need_type(const pp_tinfo *t, unsigned set, const char *what, pp_err *err) {
    if (in_set(t->dtype, set)) return PP_OK;
    char list[160] = "";
    size_t len = 0;
    for (unsigned d = 1; d < 32 && len < sizeof list - 8; d++)
        if (set & TB(d))
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    pp_dtype_name((pp_dtype)d));
    return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; supported: %s", what,
                   pp_dtype_name(t->dtype), list);
}

static pp_status need_same_type(const pp_tinfo *t, const pp_tinfo *ref, const char *what,
                                const char *ref_what, pp_err *err) {
    if (t->dtype != ref->dtype)
        return PP_FAIL(err, PP_EINVAL, "%s has element type %s, but %s has %s", what,
                       pp_dtype_name(t->dtype), ref_what, pp_dtype_name(ref->dtype));
    return PP_OK;
}

/* A tensor that must hold exactly one element: rank 0, or rank 1 of size 1. */
static pp_status need_scalar(const pp_tinfo *t, const char *what, pp_err *err) {
    if (t->shape.rank == 0 || (t->shape.rank == 1 && t->shape.dim[0] == 1)) return PP_OK;
    char s[96];
    return PP_FAIL(err, PP_EINVAL, "%s must be a scalar, got shape %s", what,
                   pp_shape_str(&t->shape, s, sizeof s));
}

static bool present(const pp_tinfo *in, int n_in, int i) {
    return i < n_in && in[i].dtype != PP_UNDEFINED;
}

/* out[0] = in[0]'s type and shape after checking the type is in `set`. */
static pp_status unary(const pp_tinfo *in, pp_tinfo *out, unsigned set, pp_err *err) {
    PP_TRY(need_type(&in[0], set, "input X", err));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return PP_OK;
}

/* Two inputs of one type in `set`, broadcast; out type `out_t` (or the inputs'
 * type when PP_UNDEFINED). */
static pp_status binary(const pp_tinfo *in, pp_tinfo *out, unsigned set, pp_dtype out_t,
                        pp_err *err) {
    PP_TRY(need_type(&in[0], set, "input A", err));
    PP_TRY(need_same_type(&in[1], &in[0], "input B", "input A", err));
    out[0].dtype = out_t == PP_UNDEFINED ? in[0].dtype : out_t;
    return pp_broadcast(&in[0].shape, &in[1].shape, &out[0].shape, err);
}

/* Variadic (Min, Max, Sum, Mean): all inputs of one type, broadcast together. */
static pp_status variadic(const pp_tinfo *in, int n_in, pp_tinfo *out, unsigned set,
                          pp_err *err) {
    PP_TRY(need_type(&in[0], set, "input 0", err));
    pp_shape s = in[0].shape;
    for (int i = 1; i < n_in; i++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", i);
        if (in[i].dtype == PP_UNDEFINED)
            return PP_FAIL(err, PP_EINVAL, "%s is missing (variadic inputs cannot be omitted)",
                           what);
        PP_TRY(need_same_type(&in[i], &in[0], what, "input 0", err));
        pp_shape o;
        PP_TRY(pp_broadcast(&s, &in[i].shape, &o, err));
        s = o;
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = s;
    return PP_OK;
}

/* Read float attributes only to check their type (a string 'alpha' fails). */
static pp_status float_attrs(pp_attrs a, const char *n1, const char *n2, pp_err *err) {
    float v;
    if (n1) PP_TRY(pp_attr_float(a, n1, 0.0f, &v, err));
    if (n2) PP_TRY(pp_attr_float(a, n2, 0.0f, &v, err));
    return PP_OK;
}

/* ---- unary ------------------------------------------------------------------------ */

pp_status shape_IDENTITY(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                         pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    if (pp_dtype_bits(in[0].dtype) == 0) /* packed types too: Identity copies bytes */
        return PP_FAIL(err, PP_EUNSUP, "input has element type %s, which is not supported",
                       pp_dtype_name(in[0].dtype));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return PP_OK;
}

#define FLOAT_UNARY(E, A1, A2)                                                            \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, \
                        pp_err *err) {                                                    \
        (void)n_in, (void)n_out;                                                          \
        PP_TRY(float_attrs(a, A1, A2, err));                                              \
        return unary(in, out, T_FLOAT, err);                                              \
    }
/* every PP_UNARY row of ir/ops_unary.def (Gelu's is below) */
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) FLOAT_UNARY(E, A0, A1)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#include "ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#undef FLOAT_UNARY

/* IsNaN, IsInf: a float tensor in, a bool tensor of its shape out. */
pp_status shape_ISNAN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(unary(in, out, T_FLOAT, err));
    out[0].dtype = PP_BOOL;
    return PP_OK;
}

pp_status shape_ISINF(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    static const char *flags[] = {"detect_negative", "detect_positive"};
    for (int i = 0; i < 2; i++) {
        int64_t v;
        PP_TRY(pp_attr_int(a, flags[i], 1, &v, err));
        if (v != 0 && v != 1)
            return PP_FAIL(err, PP_EINVAL, "attribute '%s'=%lld must be 0 or 1", flags[i],
                           (long long)v);
    }
    return shape_ISNAN(a, in, n_in, out, n_out, err);
}

pp_status shape_GELU(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)n_in, (void)n_out;
    const char *approx;
    PP_TRY(pp_attr_string(a, "approximate", "none", &approx, err));
    if (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0)
        return PP_FAIL(err, PP_EINVAL,
                       "attribute 'approximate'='%s' is not one of 'none', 'tanh'", approx);
    return unary(in, out, T_FLOAT, err);
}

pp_status shape_NEG(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return unary(in, out, T_FLOAT | T_SINT, err);
}

pp_status shape_ABS(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return unary(in, out, T_NUM, err);
}

pp_status shape_SIGN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return unary(in, out, T_NUM, err);
}

/* Shrink(x; bias, lambd): x + bias below -lambd, x - bias above lambd, else 0. */
pp_status shape_SHRINK(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(float_attrs(a, "bias", "lambd", err));
    return unary(in, out, T_NUM, err);
}

/* Clip: before opset 11 the bounds are float attributes 'min'/'max' (float
 * types only); from 11 they are optional scalar inputs of X's type. */
pp_status shape_CLIP(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)n_out;
    bool has_attr = pp_attr_find(a, "min") || pp_attr_find(a, "max");
    if (a.opset < 11) {
        if (n_in > 1)
            return PP_FAIL(err, PP_EINVAL,
                           "Clip takes its bounds as attributes before opset 11, got %d inputs",
                           n_in);
        PP_TRY(float_attrs(a, "min", "max", err));
        return unary(in, out, T_FLOAT, err);
    }
    if (has_attr)
        return PP_FAIL(err, PP_EINVAL,
                       "attributes 'min'/'max' were replaced by inputs at opset 11 (model opset "
                       "%d)", a.opset);
    PP_TRY(unary(in, out, T_NUM, err));
    static const char *names[] = {"", "input min", "input max"};
    for (int i = 1; i < 3; i++) {
        if (!present(in, n_in, i)) continue;
        PP_TRY(need_same_type(&in[i], &in[0], names[i], "input X", err));
        PP_TRY(need_scalar(&in[i], names[i], err));
    }
    return PP_OK;
}

/* ---- binary ---------------------------------------------------------------------- */

#define ARITH(E)                                                                         \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, \
                        pp_err *err) {                                                   \
        (void)a, (void)n_in, (void)n_out;                                                \
        return binary(in, out, T_NUM, PP_UNDEFINED, err);                                \
    }
ARITH(ADD)
ARITH(SUB)
ARITH(MUL)
ARITH(DIV)
#undef ARITH

/* Pow: the result has the base's type; the exponent may be any numeric type. */
pp_status shape_POW(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_type(&in[0], T_FLOAT | TB(PP_I32) | TB(PP_I64), "input X (base)", err));
    PP_TRY(need_type(&in[1], T_NUM, "input Y (exponent)", err));
    out[0].dtype = in[0].dtype;
    return pp_broadcast(&in[0].shape, &in[1].shape, &out[0].shape, err);
}

/* Mod(A, B) with attribute 'fmod' (0 or 1, default 0): fmod=0 is the integer
 * remainder with the divisor's sign (Python's %), fmod=1 the remainder with
 * the dividend's sign (C's fmod and %). The ONNX spec requires fmod=1 for
 * floating-point inputs, so fmod=0 on a float type is an error here. */
pp_status shape_MOD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)n_in, (void)n_out;
    int64_t fmod;
    PP_TRY(pp_attr_int(a, "fmod", 0, &fmod, err));
    if (fmod != 0 && fmod != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'fmod'=%lld must be 0 or 1", (long long)fmod);
    PP_TRY(binary(in, out, T_NUM, PP_UNDEFINED, err));
    if (fmod == 0 && in_set(in[0].dtype, T_FLOAT))
        return PP_FAIL(err, PP_EINVAL,
                       "attribute 'fmod'=0 (integer remainder) is not allowed for element type "
                       "%s: Mod on floating-point inputs needs fmod=1",
                       pp_dtype_name(in[0].dtype));
    return PP_OK;
}

/* PRelu: slope broadcasts to X (unidirectionally); the output has X's shape. */
pp_status shape_PRELU(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    unsigned set = T_FLOAT | TB(PP_I32) | TB(PP_I64) | TB(PP_U32) | TB(PP_U64);
    PP_TRY(need_type(&in[0], set, "input X", err));
    PP_TRY(need_same_type(&in[1], &in[0], "input slope", "input X", err));
    pp_shape o;
    PP_TRY(pp_broadcast(&in[0].shape, &in[1].shape, &o, err));
    if (!pp_shape_eq(&o, &in[0].shape)) {
        char sx[96], ss[96];
        return PP_FAIL(err, PP_EINVAL, "input slope %s does not broadcast to X's shape %s",
                       pp_shape_str(&in[1].shape, ss, sizeof ss),
                       pp_shape_str(&in[0].shape, sx, sizeof sx));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return PP_OK;
}

/* ---- variadic --------------------------------------------------------------------- */

pp_status shape_MIN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_out;
    return variadic(in, n_in, out, T_NUM, err);
}

pp_status shape_MAX(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_out;
    return variadic(in, n_in, out, T_NUM, err);
}

pp_status shape_SUM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_out;
    return variadic(in, n_in, out, T_FLOAT, err);
}

pp_status shape_MEAN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)a, (void)n_out;
    return variadic(in, n_in, out, T_FLOAT, err);
}

/* ---- comparison and logic ------------------------------------------------------------ */

pp_status shape_EQUAL(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return binary(in, out, T_NUM | T_BOOL, PP_BOOL, err);
}

#define COMPARE(E)                                                                       \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, \
                        pp_err *err) {                                                   \
        (void)a, (void)n_in, (void)n_out;                                                \
        return binary(in, out, T_NUM, PP_BOOL, err);                                     \
    }
COMPARE(LESS)
COMPARE(GREATER)
COMPARE(LESSOREQUAL)
COMPARE(GREATEROREQUAL)
#undef COMPARE

pp_status shape_NOT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                    pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return unary(in, out, T_BOOL, err);
}

#define LOGIC(E)                                                                         \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, \
                        pp_err *err) {                                                   \
        (void)a, (void)n_in, (void)n_out;                                                \
        return binary(in, out, T_BOOL, PP_BOOL, err);                                    \
    }
LOGIC(AND)
LOGIC(OR)
LOGIC(XOR)
#undef LOGIC

#define T_INT (T_SINT | T_UINT)
pp_status shape_BITWISENOT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                           pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    return unary(in, out, T_INT, err);
}

#define BITWISE(E)                                                                       \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, \
                        pp_err *err) {                                                   \
        (void)a, (void)n_in, (void)n_out;                                                \
        return binary(in, out, T_INT, PP_UNDEFINED, err);                                \
    }
BITWISE(BITWISEAND)
BITWISE(BITWISEOR)
BITWISE(BITWISEXOR)
#undef BITWISE

/* BitShift(X, Y; direction): unsigned integer types only (the ONNX schema). */
pp_status shape_BITSHIFT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                         pp_err *err) {
    (void)n_in, (void)n_out;
    const char *dir;
    PP_TRY(pp_attr_string(a, "direction", "", &dir, err));
    if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
        return PP_FAIL(err, PP_EINVAL, "attribute 'direction'='%s' must be 'LEFT' or 'RIGHT'", dir);
    return binary(in, out, T_UINT, PP_UNDEFINED, err);
}

/* Where(condition, X, Y): three-way broadcast; X and Y of any one type. */
pp_status shape_WHERE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                      pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(need_type(&in[0], T_BOOL, "input condition", err));
    PP_TRY(need_type(&in[1], T_NUM | T_BOOL, "input X", err));
    PP_TRY(need_same_type(&in[2], &in[1], "input Y", "input X", err));
    pp_shape s;
    PP_TRY(pp_broadcast(&in[0].shape, &in[1].shape, &s, err));
    PP_TRY(pp_broadcast(&s, &in[2].shape, &out[0].shape, err));
    out[0].dtype = in[1].dtype;
    return PP_OK;
}

/* ---- Cast, CastLike, Dropout, CumSum ----------------------------------------------- */

/* Cast and CastLike convert between every pair of numeric, bool and
 * low-precision types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, float4e2m1,
 * int4/uint4/int2/uint2). 'saturate' (opset 19, 0 or 1) decides how float8
 * targets treat values out of range; 'round_mode' (opset 24: up, down,
 * nearest) how float8e8m0 targets round. Both are accepted at any opset and
 * ignored for other targets. */
static pp_status cast_common(pp_attrs a, const pp_tinfo *x, int64_t to, pp_tinfo *out,
                             pp_err *err) {
    int64_t sat;
    PP_TRY(pp_attr_int(a, "saturate", 1, &sat, err));
    if (sat != 0 && sat != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'saturate'=%lld must be 0 or 1", (long long)sat);
    int64_t fin; /* ppcc's own (a half plan's Casts, passes/precision.c): finite past f16/bf16's range -> its max */
    PP_TRY(pp_attr_int(a, "pp_finite", 0, &fin, err));
    if (fin != 0 && fin != 1)
        return PP_FAIL(err, PP_EINVAL, "attribute 'pp_finite'=%lld must be 0 or 1", (long long)fin);
    const char *rm;
    PP_TRY(pp_attr_string(a, "round_mode", "up", &rm, err));
    if (strcmp(rm, "up") != 0 && strcmp(rm, "down") != 0 && strcmp(rm, "nearest") != 0)
        return PP_FAIL(err, PP_EINVAL,
                       "attribute 'round_mode'='%s' is not one of 'up', 'down', 'nearest'", rm);
    PP_TRY(need_type(x, T_NUM | T_BOOL | T_LOWP, "input", err));
    if (to < 1 || to >= 32 || !in_set((pp_dtype)to, T_NUM | T_BOOL | T_LOWP)) {
        /* ONNX TensorProto.DataType names of the types pp_dtype lacks */
        static const char *const onnx_names[] = {
            [PP_STRING] = "string", [PP_C64] = "complex64", [PP_C128] = "complex128"};
        const int nn = (int)(sizeof onnx_names / sizeof onnx_names[0]);
        const char *n = to >= 0 && to < nn && onnx_names[to] ? onnx_names[to] : "unknown";
        return PP_FAIL(err, PP_EUNSUP, "cast to element type %lld (%s) is not supported", (long long)to,
                       n);
    }
    out[0].dtype = (pp_dtype)to;
    out[0].shape = x->shape;
    return PP_OK;
}

pp_status shape_CAST(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)n_in, (void)n_out;
    if (!pp_attr_find(a, "to")) return PP_FAIL(err, PP_EINVAL, "attribute 'to' is missing");
    int64_t to;
    PP_TRY(pp_attr_int(a, "to", 0, &to, err));
    return cast_common(a, &in[0], to, out, err);
}

pp_status shape_CASTLIKE(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                         pp_err *err) {
    (void)n_in, (void)n_out;
    return cast_common(a, &in[0], in[1].dtype, out, err);
}

static bool is_half_bits(pp_dtype t) { return t == PP_F16 || t == PP_BF16; }

/* Dropout in inference: output = data; the optional mask is all true (bool;
 * before opset 10 of data's type, all ones). Training mode is supported only
 * with ratio 0 (which keeps everything, as inference does): a constant
 * training_mode=true with another ratio fails here, a computed one in the
 * kernel. */
pp_status shape_DROPOUT(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                        pp_err *err) {
    PP_TRY(need_type(&in[0], T_FLOAT, "input data", err));
    if (a.opset < 12) {
        if (n_in > 1)
            return PP_FAIL(err, PP_EINVAL, "Dropout takes 1 input before opset 12, got %d",
                           n_in);
        float ratio;
        PP_TRY(pp_attr_float(a, "ratio", 0.5f, &ratio, err));
        int64_t is_test;
        PP_TRY(pp_attr_int(a, "is_test", 1, &is_test, err));
        if (!is_test)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'is_test'=0 (training) is not supported");
    } else {
        int64_t seed;
        PP_TRY(pp_attr_int(a, "seed", 0, &seed, err));
        if (present(in, n_in, 1)) {
            PP_TRY(need_type(&in[1], T_FLOAT, "input ratio", err));
            PP_TRY(need_scalar(&in[1], "input ratio", err));
        }
        if (present(in, n_in, 2)) {
            PP_TRY(need_type(&in[2], T_BOOL, "input training_mode", err));
            PP_TRY(need_scalar(&in[2], "input training_mode", err));
            /* training with ratio 0 keeps every element: the same as inference */
            bool ratio_zero = present(in, n_in, 1) && in[1].data &&
                              ((in[1].dtype == PP_F32 && *(const float *)in[1].data == 0.0f) ||
                               (in[1].dtype == PP_F64 && *(const double *)in[1].data == 0.0) ||
                               (is_half_bits(in[1].dtype) && !(*(const uint16_t *)in[1].data & 0x7fff)));
            bool ratio_unknown = present(in, n_in, 1) && !in[1].data;
            if (in[2].data && *(const uint8_t *)in[2].data && !ratio_zero && !ratio_unknown)
                return PP_FAIL(err, PP_EUNSUP,
                               "input training_mode is true with a nonzero ratio: "
                               "training-mode Dropout is not supported");
        }
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    if (n_out > 1) {
        out[1].dtype = a.opset < 10 ? in[0].dtype : PP_BOOL;
        out[1].shape = in[0].shape;
    }
    return PP_OK;
}

/* CumSum(x, axis): axis is a scalar int tensor, read by the kernel at run time
 * (checked here when constant). */
pp_status shape_CUMSUM(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                       pp_err *err) {
    (void)n_in, (void)n_out;
    PP_TRY(unary(in, out, T_NUM, err));
    if (in[0].shape.rank < 1) return PP_FAIL(err, PP_EINVAL, "input x must have rank >= 1");
    PP_TRY(need_type(&in[1], TB(PP_I32) | TB(PP_I64), "input axis", err));
    PP_TRY(need_scalar(&in[1], "input axis", err));
    static const char *flags[] = {"exclusive", "reverse"};
    for (int i = 0; i < 2; i++) {
        int64_t v;
        PP_TRY(pp_attr_int(a, flags[i], 0, &v, err));
        if (v != 0 && v != 1)
            return PP_FAIL(err, PP_EINVAL, "attribute '%s'=%lld must be 0 or 1", flags[i],
                           (long long)v);
    }
    if (in[1].data) {
        int64_t ax;
        int n, norm;
        PP_TRY(pp_const_ints(&in[1], "input axis", &ax, 1, &n, err));
        PP_TRY(pp_norm_axis(ax, in[0].shape.rank, "input axis", &norm, err));
    }
    return PP_OK;
}

/* CumProd (opset 26): CumSum's inputs and attributes, products for sums. */
pp_status shape_CUMPROD(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    return shape_CUMSUM(a, in, n_in, out, n_out, err);
}

/* ---- QuantizeLinear, DequantizeLinear ------------------------------------------------ */

#define T_QUANT (TB(PP_I8) | TB(PP_U8) | TB(PP_I16) | TB(PP_U16))

pp_status pp_quant_parse(pp_op op, pp_attrs a, const pp_tinfo *in, int n_in, pp_quant *q, pp_err *err) {
    const bool quant = op == PP_OP_QUANTIZELINEAR;
    const pp_tinfo *x = &in[0], *sc = &in[1], *zp = present(in, n_in, 2) ? &in[2] : NULL;
    *q = (pp_quant){.has_zp = zp != NULL, .len = 1, .inner = 1};
    PP_TRY(need_type(sc, TB(PP_F32), quant ? "input y_scale" : "input x_scale", err));
    int64_t odt, block, axis;
    PP_TRY(pp_attr_int(a, "output_dtype", 0, &odt, err));
    PP_TRY(pp_attr_int(a, "block_size", 0, &block, err));
    PP_TRY(pp_attr_int(a, "axis", 1, &axis, err));
    if (quant) {
        int64_t sat, prec;
        PP_TRY(pp_attr_int(a, "saturate", 1, &sat, err));
        PP_TRY(pp_attr_int(a, "precision", 0, &prec, err));
        if (sat != 0 && sat != 1)
            return PP_FAIL(err, PP_EINVAL, "attribute 'saturate'=%lld must be 0 or 1", (long long)sat);
        if (prec != 0 && prec != PP_F32)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'precision'=%lld: only float32 (1) arithmetic is supported",
                           (long long)prec);
        PP_TRY(need_type(x, TB(PP_F32), "input x", err));
        q->q = zp ? zp->dtype : odt ? (pp_dtype)odt : PP_U8;
        if (zp && odt && odt != zp->dtype)
            return PP_FAIL(err, PP_EINVAL, "attribute 'output_dtype'=%lld is not the type of y_zero_point (%s)",
                           (long long)odt, pp_dtype_name(zp->dtype));
        if (odt < 0 || odt >= 32 || !in_set(q->q, T_QUANT))
            return PP_FAIL(err, PP_EUNSUP, "quantized type %s (%lld) is not supported; supported: int8, uint8, "
                           "int16, uint16", (odt < 0 || odt >= 32) ? "unknown" : pp_dtype_name(q->q), (long long)q->q);
    } else {
        PP_TRY(need_type(x, T_QUANT | TB(PP_I32), "input x", err));
        if (zp) PP_TRY(need_same_type(zp, x, "input x_zero_point", "input x", err));
        if (odt != 0 && odt != PP_F32)
            return PP_FAIL(err, PP_EUNSUP, "attribute 'output_dtype'=%lld: only float32 (1) is supported",
                           (long long)odt);
        q->q = x->dtype;
    }
    switch (q->q) {
    case PP_I8: q->lo = INT8_MIN, q->hi = INT8_MAX; break;
    case PP_U8: q->lo = 0, q->hi = UINT8_MAX; break;
    case PP_I16: q->lo = INT16_MIN, q->hi = INT16_MAX; break;
    case PP_U16: q->lo = 0, q->hi = UINT16_MAX; break;
    default: q->lo = INT32_MIN, q->hi = INT32_MAX; break; /* Dequantize's int32 */
    }
    if (zp) {
        PP_TRY(need_type(zp, T_QUANT | (quant ? 0u : TB(PP_I32)), quant ? "input y_zero_point" : "input x_zero_point",
                         err));
        if (!pp_shape_eq(&zp->shape, &sc->shape)) {
            char s1[96], s2[96];
            return PP_FAIL(err, PP_EINVAL, "the zero point has shape %s, the scale %s: they must be the same",
                           pp_shape_str(&zp->shape, s1, sizeof s1), pp_shape_str(&sc->shape, s2, sizeof s2));
        }
    }
    const pp_shape *xs = &x->shape, *ss = &sc->shape;
    char s1[96], s2[96];
    if (block < 0) return PP_FAIL(err, PP_EINVAL, "attribute 'block_size'=%lld is negative", (long long)block);
    if (block == 0 && (ss->rank == 0 || (ss->rank == 1 && ss->dim[0] == 1))) {
        q->per_tensor = true;
        return PP_OK;
    }
    int ax;
    if (xs->rank == 0)
        return PP_FAIL(err, PP_EINVAL, "the scale has shape %s but x is a scalar", pp_shape_str(ss, s1, sizeof s1));
    PP_TRY(pp_norm_axis(axis, xs->rank, "attribute 'axis'", &ax, err));
    q->axis = ax;
    q->len = xs->dim[ax];
    for (int d = ax + 1; d < xs->rank; d++) q->inner *= xs->dim[d];
    if (block == 0) {
        if (ss->rank != 1 || ss->dim[0] != xs->dim[ax])
            return PP_FAIL(err, PP_EINVAL, "the scale has shape %s; per axis %d of x %s it must be [%lld]",
                           pp_shape_str(ss, s1, sizeof s1), ax, pp_shape_str(xs, s2, sizeof s2),
                           (long long)xs->dim[ax]);
        return PP_OK;
    }
    bool ok = ss->rank == xs->rank;
    for (int d = 0; ok && d < xs->rank; d++)
        ok = ss->dim[d] == (d == ax ? (xs->dim[d] + block - 1) / block : xs->dim[d]);
    if (!ok)
        return PP_FAIL(err, PP_EINVAL, "the scale has shape %s; in blocks of %lld along axis %d of x %s it must be "
                       "x's shape with ceil(%lld / %lld) on that axis", pp_shape_str(ss, s1, sizeof s1),
                       (long long)block, ax, pp_shape_str(xs, s2, sizeof s2), (long long)xs->dim[ax],
                       (long long)block);
    q->block = block;
    return PP_OK;
}

pp_status shape_QUANTIZELINEAR(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_quant q;
    PP_TRY(pp_quant_parse(PP_OP_QUANTIZELINEAR, a, in, n_in, &q, err));
    out[0] = (pp_tinfo){.dtype = q.q, .shape = in[0].shape};
    return PP_OK;
}

pp_status shape_DEQUANTIZELINEAR(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    (void)n_out;
    pp_quant q;
    PP_TRY(pp_quant_parse(PP_OP_DEQUANTIZELINEAR, a, in, n_in, &q, err));
    if (q.q == PP_I32 && q.has_zp && in[2].data) {
        /* int32 input: a zero point, where given, must be 0 (checked where constant) */
        const int64_t n = (int64_t)pp_numel_d(&in[2]);
        for (int64_t i = 0; i < n; i++)
            if (((const int32_t *)in[2].data)[i] != 0)
                return PP_FAIL(err, PP_EINVAL, "input x_zero_point of an int32 x must be 0");
    }
    out[0] = (pp_tinfo){.dtype = PP_F32, .shape = in[0].shape};
    return PP_OK;
}

/* ---- FLOPs --------------------------------------------------------------------------- */

/* Per output element: 1 for simple arithmetic, more for transcendental math. */
#define FLOPS_PER_ELEM(E, K)                                                               \
    double flops_##E(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,        \
                     int n_out) {                                                          \
        (void)a, (void)in, (void)n_in, (void)n_out;                                        \
        return (K) * pp_numel_d(&out[0]);                                                  \
    }
FLOPS_PER_ELEM(IDENTITY, 0)
FLOPS_PER_ELEM(QUANTIZELINEAR, 3)
FLOPS_PER_ELEM(DEQUANTIZELINEAR, 2)
/* the rows of ir/ops_unary.def */
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) FLOPS_PER_ELEM(E, FLOPS)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) FLOPS_PER_ELEM(E, FLOPS)
#define PP_EW_FORMULA(E, F)
#include "ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
FLOPS_PER_ELEM(ISNAN, 1)
FLOPS_PER_ELEM(ISINF, 1)
FLOPS_PER_ELEM(SIGN, 1)
FLOPS_PER_ELEM(SHRINK, 2)
FLOPS_PER_ELEM(BITWISENOT, 1)
FLOPS_PER_ELEM(BITWISEAND, 1)
FLOPS_PER_ELEM(BITWISEOR, 1)
FLOPS_PER_ELEM(BITWISEXOR, 1)
FLOPS_PER_ELEM(BITSHIFT, 1)
FLOPS_PER_ELEM(NEG, 1)
FLOPS_PER_ELEM(ABS, 1)
FLOPS_PER_ELEM(CLIP, 2)
FLOPS_PER_ELEM(ADD, 1)
FLOPS_PER_ELEM(SUB, 1)
FLOPS_PER_ELEM(MUL, 1)
FLOPS_PER_ELEM(DIV, 1)
FLOPS_PER_ELEM(POW, 10)
FLOPS_PER_ELEM(MOD, 2)
FLOPS_PER_ELEM(PRELU, 2)
FLOPS_PER_ELEM(EQUAL, 1)
FLOPS_PER_ELEM(LESS, 1)
FLOPS_PER_ELEM(GREATER, 1)
FLOPS_PER_ELEM(LESSOREQUAL, 1)
FLOPS_PER_ELEM(GREATEROREQUAL, 1)
FLOPS_PER_ELEM(NOT, 1)
FLOPS_PER_ELEM(AND, 1)
FLOPS_PER_ELEM(OR, 1)
FLOPS_PER_ELEM(XOR, 1)
FLOPS_PER_ELEM(WHERE, 1)
FLOPS_PER_ELEM(CAST, 1)
FLOPS_PER_ELEM(CASTLIKE, 1)
FLOPS_PER_ELEM(DROPOUT, 0)
FLOPS_PER_ELEM(CUMSUM, 1)
FLOPS_PER_ELEM(CUMPROD, 1)
#undef FLOPS_PER_ELEM

/* Variadic: one operation per extra input per output element (Mean: +1 divide). */
double flops_MIN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_out;
    return (n_in > 1 ? n_in - 1 : 0) * pp_numel_d(&out[0]);
}

double flops_MAX(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_MIN(a, in, n_in, out, n_out);
}

double flops_SUM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_MIN(a, in, n_in, out, n_out);
}

double flops_MEAN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_out;
    return n_in * pp_numel_d(&out[0]);
}
