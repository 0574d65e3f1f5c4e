/* ref_math.c: reference kernels of the ops in ir/ops_math.def: unary math and
 * activations, broadcasting binary and variadic ops, comparisons and logic,
 * Where, Cast/CastLike, inference-mode Dropout (training mode only with
 * ratio 0), CumSum.
 *
 * How the pieces fit:
 *   - one broadcasting engine (ew_run) serves every elementwise op with 1 to 3
 *     inputs: it checks that each input broadcasts to the output shape, merges
 *     neighbouring output dims along which every input behaves the same (so
 *     [N,C,H,W] + [1,C,1,1] becomes [N, C, H*W]) and calls the op's inner loop
 *     once per innermost row, where each input either advances (inc 1) or
 *     repeats one element (inc 0);
 *   - inner loops are instantiated per element type with X-macro type lists;
 *     integer arithmetic wraps around (computed in unsigned types, as NumPy
 *     does), integer division truncates toward zero like C and NumPy's
 *     astype, with x/0 defined as 0 and MIN/-1 wrapping (Mod: x mod 0 = 0);
 *   - float16 and bfloat16 are computed in float32 (lift_half converts the
 *     inputs, runs the float32 kernel, rounds the outputs back to nearest-even);
 *   - Cast converts between every pair of numeric/bool types in software
 *     (float16/bfloat16 included); float -> integer saturates (NaN -> 0)
 *     instead of being undefined; the low-precision types (float8, float4,
 *     e8m0, 2- and 4-bit integers) go one element at a time through a scalar
 *     (see "low-precision types" below).
 * Plain C, single-threaded, deterministic; shapes and attributes were
 * validated by ir/shape_math.c, the kernels re-check what is cheap. */
#include "bf16.h"
#include "ref.h"
#include "../../ir/op_fns.h" /* pp_broadcast */
#include "../../ir/scalar.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h> /* exp(), tanh(), ... pick the float or double version by type */

/* ---- element type lists (X-macros) ------------------------------------------------ *
 * X(ENUM, C type, unsigned type for wrapping arithmetic, A, B): A and B are passed
 * through for the caller's use. The unsigned type is at least 32 bits wide so that
 * products of narrow types cannot overflow a promoted int. */
#define FLOATS(X, A, B) X(PP_F32, float, float, A, B) X(PP_F64, double, double, A, B)
#define SINTS(X, A, B)                                                                   \
    X(PP_I8, int8_t, uint32_t, A, B) X(PP_I16, int16_t, uint32_t, A, B)                  \
    X(PP_I32, int32_t, uint32_t, A, B) X(PP_I64, int64_t, uint64_t, A, B)
#define UINTS(X, A, B)                                                                   \
    X(PP_U8, uint8_t, uint32_t, A, B) X(PP_U16, uint16_t, uint32_t, A, B)                \
    X(PP_U32, uint32_t, uint32_t, A, B) X(PP_U64, uint64_t, uint64_t, A, B)
#define BOOLS(X, A, B) X(PP_BOOL, uint8_t, uint32_t, A, B)

#define KB(t) (1u << (unsigned)(t))
#define K_FLOAT (KB(PP_F32) | KB(PP_F64)) /* after lift_half */
#define K_SINT (KB(PP_I8) | KB(PP_I16) | KB(PP_I32) | KB(PP_I64))
#define K_UINT (KB(PP_U8) | KB(PP_U16) | KB(PP_U32) | KB(PP_U64))
#define K_NUM (K_FLOAT | K_SINT | K_UINT)
#define K_BOOL KB(PP_BOOL)

static pp_status need_k(const pprt_tensor *t, unsigned set, const char *op, const char *what,
                        pp_err *err) {
    if ((unsigned)t->dtype < 32 && (set & KB(t->dtype))) return PP_OK;
    return PP_FAIL(err, PP_EUNSUP, "%s kernel: %s has element type %s, which is not supported",
                   op, what, pp_dtype_name(t->dtype));
}

static pp_status need_dtype(const pprt_tensor *t, pp_dtype want, const char *op,
                            const char *what, pp_err *err) {
    if (t->dtype != want)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: %s has element type %s, expected %s", op, what,
                       pp_dtype_name(t->dtype), pp_dtype_name(want));
    return PP_OK;
}

/* ---- float16 / bfloat16 in software ------------------------------------------------- */



/* v (finite, >= 0) rounded to nearest-even with p significant bits, the
 * quantum never below 2^qmin (gradual underflow). */
static double round_bits(double v, int p, int qmin) {
    int e;
    (void)frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
    int q = e - p;
    if (q < qmin) q = qmin;
    return ldexp(nearbyint(ldexp(v, -q)), q);
}

/* A binary float with mb mantissa and eb exponent bits (float16: 10, 5;
 * bfloat16: 7, 8) nearest to v, ties to even, overflow to infinity. Rounds
 * from double directly, so a double source is rounded once. */
static uint16_t narrow_float(double v, int mb, int eb) {
    const int bias = (1 << (eb - 1)) - 1;
    const uint16_t sign = signbit(v) ? (uint16_t)(1u << (mb + eb)) : 0;
    const uint16_t inf = (uint16_t)(((1u << eb) - 1) << mb);
    if (isnan(v)) return sign | inf | (uint16_t)(1u << (mb - 1));
    double a = fabs(v);
    if (isinf(a)) return sign | inf;
    double r = round_bits(a, mb + 1, 1 - bias - mb);
    if (r >= ldexp(1.0, bias + 1)) return sign | inf;
    if (r < ldexp(1.0, 1 - bias)) return sign | (uint16_t)ldexp(r, bias - 1 + mb); /* subnormal */
    int e;
    double m = frexp(r, &e); /* r = (2m) * 2^(e-1), 2m in [1, 2) */
    return sign | (uint16_t)((e - 1 + bias) << mb) | (uint16_t)(ldexp(m, mb + 1) - ldexp(1.0, mb));
}

/* ---- Cast between element types ----------------------------------------------------- */

/* float -> integer: truncate toward zero, saturate out of range, NaN -> 0. */
static int64_t f2s(double v, int64_t lo, int64_t hi) {
    if (isnan(v)) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

static uint64_t f2u(double v, uint64_t hi) {
    if (isnan(v) || v <= 0) return 0;
    if (v >= (double)hi) return hi;
    return (uint64_t)v;
}

/* Sources: X(ENUM, storage type, is floating, load expression of the stored v). */
#define CAST_SRC(X)                                                                     \
    X(PP_F32, float, 1, v) X(PP_F64, double, 1, v)                                      \
    X(PP_F16, uint16_t, 1, pprt_f16_float(v)) X(PP_BF16, uint16_t, 1, pprt_bf16_float(v))  \
    X(PP_I8, int8_t, 0, v) X(PP_I16, int16_t, 0, v) X(PP_I32, int32_t, 0, v)            \
    X(PP_I64, int64_t, 0, v) X(PP_U8, uint8_t, 0, v) X(PP_U16, uint16_t, 0, v)          \
    X(PP_U32, uint32_t, 0, v) X(PP_U64, uint64_t, 0, v) X(PP_BOOL, uint8_t, 0, (v != 0))
/* Destinations: X(ENUM, storage type, conversion kind, min, max, <source args>). */
#define CAST_DST(X, TS, ISF, LOAD)                                                      \
    X(PP_F32, float, FLT, 0, 0, TS, ISF, LOAD)                                          \
    X(PP_F64, double, FLT, 0, 0, TS, ISF, LOAD)                                         \
    X(PP_F16, uint16_t, F16, 0, 0, TS, ISF, LOAD)                                       \
    X(PP_BF16, uint16_t, BF16, 0, 0, TS, ISF, LOAD)                                     \
    X(PP_I8, int8_t, SI, INT8_MIN, INT8_MAX, TS, ISF, LOAD)                             \
    X(PP_I16, int16_t, SI, INT16_MIN, INT16_MAX, TS, ISF, LOAD)                         \
    X(PP_I32, int32_t, SI, INT32_MIN, INT32_MAX, TS, ISF, LOAD)                         \
    X(PP_I64, int64_t, SI, INT64_MIN, INT64_MAX, TS, ISF, LOAD)                         \
    X(PP_U8, uint8_t, UI, 0, UINT8_MAX, TS, ISF, LOAD)                                  \
    X(PP_U16, uint16_t, UI, 0, UINT16_MAX, TS, ISF, LOAD)                               \
    X(PP_U32, uint32_t, UI, 0, UINT32_MAX, TS, ISF, LOAD)                               \
    X(PP_U64, uint64_t, UI, 0, UINT64_MAX, TS, ISF, LOAD)                               \
    X(PP_BOOL, uint8_t, BOOL, 0, 0, TS, ISF, LOAD)
#define CONV_FLT(TD, LO, HI, ISF, L) ((TD)(L))
#define CONV_F16(TD, LO, HI, ISF, L) _Generic((L), float: pprt_f16_of_float((float)(L)), default: narrow_float((double)(L), 10, 5))
#define CONV_BF16(TD, LO, HI, ISF, L) _Generic((L), float: pprt_bf16_of_float((float)(L)), default: narrow_float((double)(L), 7, 8))
#define CONV_SI(TD, LO, HI, ISF, L) ((ISF) ? (TD)f2s((double)(L), LO, HI) : (TD)(L))
#define CONV_UI(TD, LO, HI, ISF, L) ((ISF) ? (TD)f2u((double)(L), HI) : (TD)(L))
#define CONV_BOOL(TD, LO, HI, ISF, L) ((uint8_t)((L) != 0))

#define CAST_DST_CASE(E, TD, KIND, LO, HI, TS, ISF, LOAD)                 \
    case E: {                                                             \
        TD *d_ = dst;                                                     \
        for (int64_t i = 0; i < n; i++) {                                 \
            TS v = s_[i];                                                 \
            d_[i] = CONV_##KIND(TD, LO, HI, ISF, LOAD);                   \
        }                                                                 \
        return true;                                                      \
    }
#define CAST_SRC_CASE(E, TS, ISF, LOAD)                                   \
    case E: {                                                             \
        const TS *s_ = src;                                               \
        switch (dt) {                                                     \
            CAST_DST(CAST_DST_CASE, TS, ISF, LOAD)                        \
        default: return false;                                            \
        }                                                                 \
    }

/* ---- low-precision types -------------------------------------------------------------- *
 * float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float4e2m1, float8e8m0 and the
 * packed integers (uint4, int4, uint2, int2). Conversions go one element at a
 * time through a scalar (a double, or a 64-bit integer for integer types), so
 * each is rounded once, from the exact source value. The semantics are those
 * of the ONNX Cast spec and onnx 1.22's reference implementation:
 *   - to float8: round to nearest even (subnormals included); with
 *     'saturate' (the default) out-of-range values and infinities become the
 *     largest finite value of their sign; without it they become infinity
 *     (e5m2) or NaN (the others). NaN stays NaN: e4m3fn and e5m2 keep its
 *     sign (S.1111.111, S.11111.10), the fnuz formats have one NaN (0x80) and
 *     no -0 (a negative value rounding to zero gives +0);
 *   - to float4e2m1 (no inf, no NaN): round to nearest even, saturating;
 *     NaN gives a zero of the opposite sign (+NaN -> 0x8, -NaN -> 0x0), as
 *     the reference (ml_dtypes) does: the spec leaves it open;
 *   - to float8e8m0 (2^(code-127), 0xff NaN): from the value rounded to
 *     float32, its exponent field, rounded by 'round_mode' from the mantissa
 *     field: 'up' (default) adds one when any mantissa bit is set, 'down'
 *     never, 'nearest' when the top mantissa bit is set and, for a
 *     subnormal, any other (ties up); 'saturate' keeps 0xfe from rounding to
 *     0xff. The sign is ignored; NaN and infinities give 0xff (the reference;
 *     the spec's table has E8M0_MAX for inf with saturate);
 *   - to the 2- and 4-bit integers: floats truncate toward zero, then every
 *     integer keeps its low bits (two's complement wrap: 9.0 -> int4 -7, as
 *     the reference); NaN and infinities give 0. */

typedef enum { ROUND_UP, ROUND_DOWN, ROUND_NEAREST } e8m0_round;
typedef struct cast_opts {
    bool saturate;      /* float8 targets */
    e8m0_round round;   /* float8e8m0 targets */
} cast_opts;
static const cast_opts cast_default = {true, ROUND_UP};

static bool is_lowp(pp_dtype t) { return t >= PP_F8E4M3FN && t <= PP_I2; }

/* v to the small float type t (pp_minifloat_of(t) != NULL). */
static unsigned to_minifloat(double v, pp_dtype t, bool saturate) {
    const pp_minifloat *f = pp_minifloat_of(t);
    const int nb = 1 + f->ebits + f->mbits;
    const unsigned sign_bit = 1u << (nb - 1), sign = signbit(v) ? sign_bit : 0;
    const unsigned emax = (1u << f->ebits) - 1, mmax = (1u << f->mbits) - 1;
    const unsigned inf_code = sign | (emax << f->mbits); /* PP_NAN_IEEE only */
    unsigned nan_code = 0;
    switch (f->nan) {
    case PP_NAN_IEEE: nan_code = inf_code | (1u << (f->mbits - 1)); break;
    case PP_NAN_ALL_ONES: nan_code = sign | (emax << f->mbits) | mmax; break;
    case PP_NAN_NEG_ZERO: nan_code = sign_bit; break;
    case PP_NAN_NONE: nan_code = sign ^ sign_bit; break; /* a zero: see above */
    }
    if (isnan(v)) return nan_code;
    const double a = fabs(v);
    /* nearest even with mbits+1 significant bits, no finer than the subnormals */
    const double r = isinf(a) ? a : round_bits(a, f->mbits + 1, 1 - f->bias - f->mbits);
    if (r > pp_minifloat_value(t, f->max_code)) {
        if (saturate || f->nan == PP_NAN_NONE) return sign | f->max_code;
        return f->nan == PP_NAN_IEEE ? inf_code : nan_code;
    }
    if (r == 0) return f->nan == PP_NAN_NEG_ZERO ? 0 : sign;
    if (r < ldexp(1.0, 1 - f->bias)) /* subnormal: a multiple of the smallest one */
        return sign | (unsigned)ldexp(r, f->bias - 1 + f->mbits);
    int e;
    const double m = frexp(r, &e); /* r = 2m * 2^(e-1), 2m in [1, 2) */
    return sign | ((unsigned)(e - 1 + f->bias) << f->mbits) |
           ((unsigned)ldexp(m, f->mbits + 1) & mmax);
}

/* float8e8m0 from the float32 x, by its bit fields. */
static unsigned to_e8m0(float x, const cast_opts *o) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    const unsigned e = (b >> 23) & 0xff;
    if (e == 0xff) return 0xff; /* NaN, infinity */
    bool up = false;
    switch (o->round) {
    case ROUND_UP: up = (b & 0x7fffff) != 0; break;
    case ROUND_DOWN: break;
    case ROUND_NEAREST:
        /* the top mantissa bit set (the value at least 1.5 * 2^e): up, ties
         * included; for exponent 0, only when more bits are set */
        up = (b & 0x400000) && ((b & 0x3fffff) || e > 0);
        break;
    }
    if (up && e == 0xfe && o->saturate) up = false;
    return e + up;
}

/* Low bits of an integer, for the 2- and 4-bit types. */
static unsigned wrap_bits(uint64_t v, unsigned bits) { return (unsigned)(v & ((1u << bits) - 1)); }

static unsigned float_to_bits_int(double v, unsigned bits) {
    if (!isfinite(v)) return 0;
    double t = trunc(v);
    /* |t| >= 2^63 is a multiple of 2^11: its low bits are 0 */
    if (fabs(t) >= 0x1p63) return 0;
    return wrap_bits((uint64_t)(int64_t)t, bits);
}

/* One element as a scalar: a double for float types, else an integer. */
typedef struct cval {
    enum { V_F, V_S, V_U } k;
    double f;
    int64_t s;
    uint64_t u;
} cval;

static double cval_f(const cval *v) {
    return v->k == V_F ? v->f : v->k == V_S ? (double)v->s : (double)v->u;
}

/* Element i of src (type t) into *v; false for unsupported types. */
static bool load_elem(const void *src, pp_dtype t, int64_t i, cval *v) {
    const unsigned bits = pp_dtype_bits(t);
    switch (t) {
    case PP_F32: *v = (cval){.k = V_F, .f = ((const float *)src)[i]}; return true;
    case PP_F64: *v = (cval){.k = V_F, .f = ((const double *)src)[i]}; return true;
    case PP_F16: *v = (cval){.k = V_F, .f = pprt_f16_float(((const uint16_t *)src)[i])}; return true;
    case PP_BF16: *v = (cval){.k = V_F, .f = pprt_bf16_float(((const uint16_t *)src)[i])}; return true;
    case PP_I8: *v = (cval){.k = V_S, .s = ((const int8_t *)src)[i]}; return true;
    case PP_I16: *v = (cval){.k = V_S, .s = ((const int16_t *)src)[i]}; return true;
    case PP_I32: *v = (cval){.k = V_S, .s = ((const int32_t *)src)[i]}; return true;
    case PP_I64: *v = (cval){.k = V_S, .s = ((const int64_t *)src)[i]}; return true;
    case PP_U8: *v = (cval){.k = V_U, .u = ((const uint8_t *)src)[i]}; return true;
    case PP_U16: *v = (cval){.k = V_U, .u = ((const uint16_t *)src)[i]}; return true;
    case PP_U32: *v = (cval){.k = V_U, .u = ((const uint32_t *)src)[i]}; return true;
    case PP_U64: *v = (cval){.k = V_U, .u = ((const uint64_t *)src)[i]}; return true;
    case PP_BOOL: *v = (cval){.k = V_U, .u = ((const uint8_t *)src)[i] != 0}; return true;
    case PP_F8E4M3FN: case PP_F8E4M3FNUZ: case PP_F8E5M2: case PP_F8E5M2FNUZ: case PP_F8E8M0:
        *v = (cval){.k = V_F, .f = pp_minifloat_value(t, ((const uint8_t *)src)[i])};
        return true;
    case PP_F4E2M1:
        *v = (cval){.k = V_F, .f = pp_minifloat_value(t, pp_packed_get(src, bits, i))};
        return true;
    case PP_U4: case PP_U2: *v = (cval){.k = V_U, .u = pp_packed_get(src, bits, i)}; return true;
    case PP_I4: case PP_I2: {
        const int half = 1 << (bits - 1); /* sign-extend */
        *v = (cval){.k = V_S, .s = ((int)pp_packed_get(src, bits, i) ^ half) - half};
        return true;
    }
    default: return false;
    }
}

/* Store v as element i of dst (type t), converted as the kernels above do
 * for the other types; false for unsupported types. */
#define ST_INT(TD, LO, HI, SIGNED)                                                       \
    ((TD *)dst)[i] = v->k == V_F ? (SIGNED ? (TD)f2s(v->f, LO, HI) : (TD)f2u(v->f, HI)) \
                     : v->k == V_S ? (TD)v->s                                           \
                                   : (TD)v->u
static bool store_elem(void *dst, pp_dtype t, int64_t i, const cval *v, const cast_opts *o) {
    const unsigned bits = pp_dtype_bits(t);
    switch (t) {
    case PP_F32:
        ((float *)dst)[i] = v->k == V_F ? (float)v->f : v->k == V_S ? (float)v->s : (float)v->u;
        return true;
    case PP_F64: ((double *)dst)[i] = cval_f(v); return true;
    case PP_F16: ((uint16_t *)dst)[i] = narrow_float(cval_f(v), 10, 5); return true;
    case PP_BF16: ((uint16_t *)dst)[i] = narrow_float(cval_f(v), 7, 8); return true;
    case PP_I8: ST_INT(int8_t, INT8_MIN, INT8_MAX, 1); return true;
    case PP_I16: ST_INT(int16_t, INT16_MIN, INT16_MAX, 1); return true;
    case PP_I32: ST_INT(int32_t, INT32_MIN, INT32_MAX, 1); return true;
    case PP_I64: ST_INT(int64_t, INT64_MIN, INT64_MAX, 1); return true;
    case PP_U8: ST_INT(uint8_t, 0, UINT8_MAX, 0); return true;
    case PP_U16: ST_INT(uint16_t, 0, UINT16_MAX, 0); return true;
    case PP_U32: ST_INT(uint32_t, 0, UINT32_MAX, 0); return true;
    case PP_U64: ST_INT(uint64_t, 0, UINT64_MAX, 0); return true;
    case PP_BOOL:
        ((uint8_t *)dst)[i] = v->k == V_F ? v->f != 0 : v->k == V_S ? v->s != 0 : v->u != 0;
        return true;
    case PP_F8E4M3FN: case PP_F8E4M3FNUZ: case PP_F8E5M2: case PP_F8E5M2FNUZ:
        ((uint8_t *)dst)[i] = (uint8_t)to_minifloat(cval_f(v), t, o->saturate);
        return true;
    case PP_F4E2M1:
        pp_packed_put(dst, bits, i, to_minifloat(cval_f(v), t, true));
        return true;
    case PP_F8E8M0: {
        const float x = v->k == V_F ? (float)v->f : v->k == V_S ? (float)v->s : (float)v->u;
        ((uint8_t *)dst)[i] = (uint8_t)to_e8m0(x, o);
        return true;
    }
    case PP_U4: case PP_I4: case PP_U2: case PP_I2:
        pp_packed_put(dst, bits, i,
                      v->k == V_F ? float_to_bits_int(v->f, bits)
                                  : wrap_bits(v->k == V_S ? (uint64_t)v->s : v->u, bits));
        return true;
    default: return false;
    }
}
#undef ST_INT

/* Storage bytes of n elements of t (0 for types without a fixed size). */
static size_t elems_bytes(pp_dtype t, int64_t n) {
    const uint64_t bits = (uint64_t)n * pp_dtype_bits(t);
    return (size_t)(bits / 8 + (bits % 8 != 0));
}

/* dst[0..n) = src[0..n) converted from type st to dt with options o; false
 * when either type is not supported. Packed outputs get zero padding bits. */
static bool cast_elems_opt(const void *src, pp_dtype st, void *dst, pp_dtype dt, int64_t n,
                           const cast_opts *o) {
    if (pp_dtype_bits(st) == 0 || pp_dtype_bits(dt) == 0) return false;
    if (n <= 0) return true;
    if (st == dt) {
        const size_t nb = elems_bytes(st, n);
        memcpy(dst, src, nb);
        const unsigned used = (unsigned)(((uint64_t)n * pp_dtype_bits(st)) % 8);
        if (used) ((uint8_t *)dst)[nb - 1] &= (uint8_t)((1u << used) - 1);
        return true;
    }
    /* --train --precision's Casts, every product's inputs and outputs: loops of their own */
    if (st == PP_F32 && (dt == PP_BF16 || dt == PP_F16)) {
        const float *x = src;
        uint16_t *y = dst;
        if (dt == PP_BF16)
            for (int64_t i = 0; i < n; i++) y[i] = pprt_bf16_of_float(x[i]);
        else
            for (int64_t i = 0; i < n; i++) y[i] = pprt_f16_of_float(x[i]);
        return true;
    }
    if ((st == PP_BF16 || st == PP_F16) && dt == PP_F32) {
        const uint16_t *x = src;
        float *y = dst;
        if (st == PP_BF16)
            for (int64_t i = 0; i < n; i++) y[i] = pprt_bf16_float(x[i]);
        else
            for (int64_t i = 0; i < n; i++) y[i] = pprt_f16_float(x[i]);
        return true;
    }
    if (is_lowp(st) || is_lowp(dt)) {
        if (pp_dtype_packed(dt)) memset(dst, 0, elems_bytes(dt, n));
        cval v;
        for (int64_t i = 0; i < n; i++)
            if (!load_elem(src, st, i, &v) || !store_elem(dst, dt, i, &v, o)) return false;
        return true;
    }
    switch (st) {
        CAST_SRC(CAST_SRC_CASE)
    default: return false;
    }
}

/* dst[0..n) = src[0..n) converted from type st to dt (default options). */
static bool cast_elems(const void *src, pp_dtype st, void *dst, pp_dtype dt, int64_t n) {
    return cast_elems_opt(src, st, dst, dt, n, &cast_default);
}

/* ---- float16 / bfloat16 lifting ------------------------------------------------------ */

static bool is_half(pp_dtype t) { return t == PP_F16 || t == PP_BF16; }

bool pprt_any_half(const pprt_tensor *in, int n_in, const pprt_tensor *out, int n_out) {
    for (int i = 0; i < n_in; i++)
        if (is_half(in[i].dtype)) return true;
    for (int i = 0; i < n_out; i++)
        if (is_half(out[i].dtype)) return true;
    return false;
}

/* Run `kern` with every float16/bfloat16 input converted to a float32 copy and
 * every float16/bfloat16 output computed in a float32 buffer, then rounded. */
pp_status pprt_lift_half(pprt_kernel *kern, pp_attrs attrs, const pprt_tensor *in, int n_in,
                           pprt_tensor *out, int n_out, pprt_scratch *scratch, pp_err *err) {
    int nt = n_in + n_out;
    pprt_tensor *t = calloc(pp_count(nt), sizeof *t);
    if (!t) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status st = PP_OK;
    for (int i = 0; i < nt; i++) {
        const pprt_tensor *src = i < n_in ? &in[i] : &out[i - n_in];
        t[i] = *src;
        if (!is_half(src->dtype)) continue;
        t[i].data = NULL; /* freed below only when allocated here */
        int64_t n;
        size_t nb;
        if ((st = pp_shape_numel(&src->shape, &n, err)) != PP_OK) break;
        if (pp_mul_ovf((size_t)n, sizeof(float), &nb)) {
            st = PP_FAIL(err, PP_ENOMEM, "tensor too large");
            break;
        }
        t[i].dtype = PP_F32;
        t[i].data = malloc(nb ? nb : 1);
        if (!t[i].data) {
            st = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        if (i < n_in) cast_elems(src->data, src->dtype, t[i].data, PP_F32, n);
    }
    if (st == PP_OK) st = kern(attrs, t, n_in, t + n_in, n_out, scratch, err);
    for (int i = 0; i < nt; i++) {
        const pprt_tensor *src = i < n_in ? &in[i] : &out[i - n_in];
        if (!is_half(src->dtype) || !t[i].data) continue;
        if (st == PP_OK && i >= n_in) {
            int64_t n = 0;
            (void)pp_shape_numel(&src->shape, &n, NULL);
            cast_elems(t[i].data, PP_F32, out[i - n_in].data, src->dtype, n);
        }
        free(t[i].data);
    }
    free(t);
    return st;
}

#define LIFT PPRT_LIFT

/* ---- the broadcasting engine ----------------------------------------------------------- */

#define EW_MAX 3

typedef struct ew_ctx {
    pp_dtype t;    /* element type the inner loop switches on (input 0's, usually) */
    double p[2];   /* op parameters (alpha, beta, ...) */
    int mode;      /* op variant (Pow's integer exponent, Mod's fmod, ...) */
    size_t size;   /* element size in bytes (Where) */
} ew_ctx;

/* Inner loop: y[0..n), input i read at x[i][j * inc[i]] (inc is 0 or 1; all
 * may be 0 when the output is larger than the broadcast of the inputs, which
 * the variadic ops' first step uses). */
#define EW_ARGS const ew_ctx *c, void *y, const void *const *x, const int64_t *inc, int64_t n
typedef void ew_fn(EW_ARGS);

/* Every input broadcasts to out (out may be larger than their broadcast: the
 * callers that need an exact output shape check it with need_bcast_shape). */
static pp_status ew_run(const char *op, const pprt_tensor *const *xs, int k, pprt_tensor *out,
                        ew_fn *fn, const ew_ctx *c, pp_err *err) {
    const pp_shape *os = &out->shape;
    const int r = os->rank;
    size_t ysz = pp_dtype_size(out->dtype), xsz[EW_MAX];
    if (k < 1 || k > EW_MAX || ysz == 0)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: bad arguments", op);
    for (int q = 0; q < k; q++) {
        xsz[q] = pp_dtype_size(xs[q]->dtype);
        if (xsz[q] == 0 || xs[q]->shape.rank > r)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: input %d (%s, rank %d) does not fit the "
                           "output (rank %d)", op, q, pp_dtype_name(xs[q]->dtype),
                           xs[q]->shape.rank, r);
    }
    int64_t total;
    PP_TRY(pp_shape_numel(os, &total, err));

    /* merged dims and, per input, whether it varies along each */
    int64_t dim[PP_MAX_DIMS];
    bool var[EW_MAX][PP_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < r; i++) {
        const int64_t d = os->dim[i];
        bool f[EW_MAX];
        for (int q = 0; q < k; q++) {
            int iq = i - (r - xs[q]->shape.rank);
            int64_t dq = iq >= 0 ? xs[q]->shape.dim[iq] : 1;
            if (dq != d && dq != 1) {
                char a[96], b[96];
                return PP_FAIL(err, PP_EINVAL, "%s kernel: input %d %s does not broadcast to "
                               "the output %s", op, q, pp_shape_str(&xs[q]->shape, a, sizeof a),
                               pp_shape_str(os, b, sizeof b));
            }
            f[q] = dq == d;
        }
        pp_bcast_merge(d, f, k, dim, var, &nd);
    }
    if (total == 0) return PP_OK;
    const void *ptr[EW_MAX];
    int64_t inc[EW_MAX];
    for (int q = 0; q < k; q++) ptr[q] = xs[q]->data;
    if (nd == 0) { /* a single element */
        for (int q = 0; q < k; q++) inc[q] = 0;
        fn(c, out->data, ptr, inc, 1);
        return PP_OK;
    }
    /* element strides per merged dim (0 where broadcast) */
    int64_t st[EW_MAX][PP_MAX_DIMS];
    for (int q = 0; q < k; q++) {
        int64_t acc = 1;
        for (int i = nd - 1; i >= 0; i--) {
            st[q][i] = var[q][i] ? acc : 0;
            if (var[q][i]) acc *= dim[i];
        }
        inc[q] = var[q][nd - 1];
    }
    const int64_t inner = dim[nd - 1];
    int64_t idx[PP_MAX_DIMS] = {0}, off[EW_MAX] = {0};
    char *y = out->data;
    for (int64_t done = 0; done < total; done += inner) {
        for (int q = 0; q < k; q++) ptr[q] = (const char *)xs[q]->data + off[q] * (int64_t)xsz[q];
        fn(c, y + done * (int64_t)ysz, ptr, inc, inner);
        /* advance the odometer over the outer dims */
        for (int i = nd - 2; i >= 0; i--) {
            for (int q = 0; q < k; q++) off[q] += st[q][i];
            if (++idx[i] < dim[i]) break;
            for (int q = 0; q < k; q++) off[q] -= st[q][i] * dim[i];
            idx[i] = 0;
        }
    }
    return PP_OK;
}

/* out's shape must be the broadcast of the inputs' shapes. */
static pp_status need_bcast_shape(const char *op, const pprt_tensor *in, int n_in,
                                  const pprt_tensor *out, pp_err *err) {
    pp_shape s = in[0].shape;
    for (int i = 1; i < n_in; i++) {
        pp_shape o;
        if (pp_broadcast(&s, &in[i].shape, &o, err) != PP_OK)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: inputs do not broadcast", op);
        s = o;
    }
    if (!pp_shape_eq(&s, &out->shape)) {
        char a[96], b[96];
        return PP_FAIL(err, PP_EINVAL, "%s kernel: output has shape %s, expected %s", op,
                       pp_shape_str(&out->shape, a, sizeof a), pp_shape_str(&s, b, sizeof b));
    }
    return PP_OK;
}

/* ---- inner loops ------------------------------------------------------------------------ */

/* Unary: y[j] = EXPR of v = x[0][j] (T, U: the element type and its unsigned). */
#define UN_CASE(E, T_, UT_, TY, EXPR)                                           \
    case E: {                                                                   \
        typedef T_ T;                                                           \
        typedef UT_ U __attribute__((unused));                                  \
        const T *px_ = x[0];                                                    \
        TY *py_ = y;                                                            \
        if (inc[0])                                                             \
            for (int64_t j = 0; j < n; j++) {                                   \
                T v = px_[j];                                                   \
                py_[j] = (EXPR);                                                \
            }                                                                   \
        else                                                                    \
            for (int64_t j = 0; j < n; j++) {                                   \
                T v = px_[0];                                                   \
                py_[j] = (EXPR);                                                \
            }                                                                   \
    } break;

/* Binary: y[j] = EXPR of a = x[0][j*inc0] and b = x[1][j*inc1], four loops so
 * that the common cases vectorize. */
#define BIN_CASE(E, T_, UT_, TY, EXPR)                                          \
    case E: {                                                                   \
        typedef T_ T;                                                           \
        typedef UT_ U __attribute__((unused));                                  \
        const T *pa_ = x[0], *pb_ = x[1];                                       \
        TY *py_ = y;                                                            \
        if (inc[0] && inc[1]) {                                                 \
            for (int64_t j = 0; j < n; j++) {                                   \
                T a = pa_[j], b = pb_[j];                                       \
                py_[j] = (EXPR);                                                \
            }                                                                   \
        } else if (inc[0]) {                                                    \
            const T b = pb_[0];                                                 \
            for (int64_t j = 0; j < n; j++) {                                   \
                T a = pa_[j];                                                   \
                py_[j] = (EXPR);                                                \
            }                                                                   \
        } else if (inc[1]) {                                                    \
            const T a = pa_[0];                                                 \
            for (int64_t j = 0; j < n; j++) {                                   \
                T b = pb_[j];                                                   \
                py_[j] = (EXPR);                                                \
            }                                                                   \
        } else {                                                                \
            const T a = pa_[0], b = pb_[0];                                     \
            for (int64_t j = 0; j < n; j++) py_[j] = (EXPR);                    \
        }                                                                       \
    } break;

/* Float unary ops; c->p[] are the attributes. */
#define FLOAT_UNARY_FN(NAME, EXPR)                                              \
    static void NAME(EW_ARGS) {                                                 \
        switch (c->t) {                                                         \
            FLOATS(UN_CASE, T, EXPR)                                            \
        default: break;                                                         \
        }                                                                       \
    }
#define P0 ((T)c->p[0])
#define P1 ((T)c->p[1])
#define K(x) ((T)(x))
#define EW(f) f /* tgmath: the float version for float, the double one for double */
/* the formulas of ir/ops_unary.def: f_RELU, ..., f_GELU_TANH */
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) FLOAT_UNARY_FN(f_##E, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) FLOAT_UNARY_FN(f_##E, F)
#define PP_EW_FORMULA(E, F) FLOAT_UNARY_FN(f_##E, F)
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#undef EW
#undef K
FLOAT_UNARY_FN(f_divide_by, v / P0)
#undef P0
#undef P1

static void f_neg(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, T, -v)
        SINTS(UN_CASE, T, (T)(0 - (U)v))
    default: break;
    }
}

static void f_abs(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, T, fabs(v))
        SINTS(UN_CASE, T, v < 0 ? (T)(0 - (U)v) : v)
        UINTS(UN_CASE, T, v)
    default: break;
    }
}

/* Sign: -1, 0 or 1 (NaN stays NaN, -0 stays -0: v itself where v == 0). */
static void f_sign(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, T, v > 0 ? (T)1 : v < 0 ? (T)-1 : v)
        SINTS(UN_CASE, T, (T)(v > 0 ? 1 : v < 0 ? -1 : 0))
        UINTS(UN_CASE, T, (T)(v > 0))
    default: break;
    }
}

/* Shrink: c->p = bias, lambd; integers compute in double and convert back
 * (truncating, saturating: x - bias or x + bias in x's type, as onnx's
 * reference casts it) */
#define SHRINK_EXPR(CONV) \
    (v < -c->p[1] ? (T)CONV((double)v + c->p[0]) : v > c->p[1] ? (T)CONV((double)v - c->p[0]) : (T)0)
#define AS_IS(x) (x)
#define TO_S64(x) f2s((x), INT64_MIN, INT64_MAX)
#define TO_U64(x) f2u((x), UINT64_MAX)
static void f_shrink(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, T, SHRINK_EXPR(AS_IS))
        SINTS(UN_CASE, T, SHRINK_EXPR(TO_S64))
        UINTS(UN_CASE, T, SHRINK_EXPR(TO_U64))
    default: break;
    }
}
#undef SHRINK_EXPR
#undef AS_IS
#undef TO_S64
#undef TO_U64

/* IsNaN / IsInf: a bool per element; c->mode bit 0: detect -inf, bit 1: +inf. */
static void f_isnan(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, uint8_t, (uint8_t)(isnan(v) != 0))
    default: break;
    }
}

static void f_isinf(EW_ARGS) {
    switch (c->t) {
        FLOATS(UN_CASE, uint8_t, (uint8_t)(isinf(v) && ((c->mode & 1) && v < 0 ? 1 : (c->mode & 2) && v > 0)))
    default: break;
    }
}

/* Bitwise ops on the integer types; shifts by the width or more give 0. */
static void f_bitwise_not(EW_ARGS) {
    switch (c->t) {
        SINTS(UN_CASE, T, (T)~(U)v)
        UINTS(UN_CASE, T, (T)~(U)v)
    default: break;
    }
}

#define BITWISE_FN(NAME, OP)                                                    \
    static void NAME(EW_ARGS) {                                                 \
        switch (c->t) {                                                         \
            SINTS(BIN_CASE, T, WRAP(OP))                                        \
            UINTS(BIN_CASE, T, WRAP(OP))                                        \
        default: break;                                                         \
        }                                                                       \
    }

static void f_not(EW_ARGS) {
    switch (c->t) {
        BOOLS(UN_CASE, uint8_t, (uint8_t)(v == 0))
    default: break;
    }
}

/* wrapping integer arithmetic in the unsigned type U */
#define WRAP(OP) (T)((U)a OP (U)b)

static void f_add(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, a + b)
        SINTS(BIN_CASE, T, WRAP(+))
        UINTS(BIN_CASE, T, WRAP(+))
    default: break;
    }
}

static void f_sub(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, a - b)
        SINTS(BIN_CASE, T, WRAP(-))
        UINTS(BIN_CASE, T, WRAP(-))
    default: break;
    }
}

static void f_mul(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, a * b)
        SINTS(BIN_CASE, T, WRAP(*))
        UINTS(BIN_CASE, T, WRAP(*))
    default: break;
    }
}

BITWISE_FN(f_bitwise_and, &)
BITWISE_FN(f_bitwise_or, |)
BITWISE_FN(f_bitwise_xor, ^)
#undef BITWISE_FN

/* c->mode 0: left, 1: right; b >= the type's width gives 0 */
static void f_bitshift(EW_ARGS) {
#define SHIFT_EXPR (b >= sizeof(T) * 8 ? (T)0 : c->mode ? (T)(a >> b) : (T)((U)a << b))
    switch (c->t) {
        UINTS(BIN_CASE, T, SHIFT_EXPR)
    default: break;
    }
#undef SHIFT_EXPR
}

/* integer division truncates; x/0 = 0; MIN/-1 wraps to MIN */
static void f_div(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, a / b)
        SINTS(BIN_CASE, T, b == 0 ? (T)0 : b == -1 ? (T)(0 - (U)a) : (T)(a / b))
        UINTS(BIN_CASE, T, b == 0 ? (T)0 : (T)(a / b))
    default: break;
    }
}

/* Mod. Integers: c->mode 0 (fmod=0) takes the divisor's sign (Python's %:
 * -7 mod 2 = 1, 7 mod -2 = -1), c->mode 1 (fmod=1) the dividend's (C's %:
 * -7 fmod 2 = -1). x mod 0 is defined as 0 in both modes, as for Div and as
 * onnx's reference (NumPy's mod/fmod) gives; MIN mod -1 is 0 (C's % would
 * trap). Floats: only fmod=1 (C's fmod; x fmod 0 is NaN); the kernel refuses
 * fmod=0, so mode 0 computes nothing for them. */
static int64_t rem_trunc(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
static int64_t rem_floor(int64_t a, int64_t b) {
    const int64_t r = rem_trunc(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r; /* |r| < |b|: no overflow */
}

static void f_mod(EW_ARGS) {
    if (c->mode) {
        switch (c->t) {
            FLOATS(BIN_CASE, T, fmod(a, b))
            SINTS(BIN_CASE, T, (T)rem_trunc(a, b))
            UINTS(BIN_CASE, T, b == 0 ? (T)0 : (T)(a % b))
        default: break;
        }
    } else {
        switch (c->t) {
            SINTS(BIN_CASE, T, (T)rem_floor(a, b))
            UINTS(BIN_CASE, T, b == 0 ? (T)0 : (T)(a % b))
        default: break;
        }
    }
}

/* PRelu: y = x < 0 ? slope * x : x */
static void f_prelu(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, a < 0 ? b * a : a)
        SINTS(BIN_CASE, T, a < 0 ? WRAP(*) : a)
        UINTS(BIN_CASE, T, ((void)b, a))
    default: break;
    }
}

/* Min/Max propagate NaN (like NumPy's minimum/maximum). */
static void f_min(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, isnan(a) || a < b ? a : b)
        SINTS(BIN_CASE, T, a < b ? a : b)
        UINTS(BIN_CASE, T, a < b ? a : b)
    default: break;
    }
}

static void f_max(EW_ARGS) {
    switch (c->t) {
        FLOATS(BIN_CASE, T, isnan(a) || a > b ? a : b)
        SINTS(BIN_CASE, T, a > b ? a : b)
        UINTS(BIN_CASE, T, a > b ? a : b)
    default: break;
    }
}

#define COMPARE_FN(NAME, OP)                                                    \
    static void NAME(EW_ARGS) {                                                 \
        switch (c->t) {                                                         \
            FLOATS(BIN_CASE, uint8_t, (uint8_t)(a OP b))                        \
            SINTS(BIN_CASE, uint8_t, (uint8_t)(a OP b))                         \
            UINTS(BIN_CASE, uint8_t, (uint8_t)(a OP b))                         \
            BOOLS(BIN_CASE, uint8_t, (uint8_t)((a != 0) OP (b != 0)))           \
        default: break;                                                         \
        }                                                                       \
    }
COMPARE_FN(f_equal, ==)
COMPARE_FN(f_less, <)
COMPARE_FN(f_greater, >)
COMPARE_FN(f_less_equal, <=)
COMPARE_FN(f_greater_equal, >=)

static void f_and(EW_ARGS) {
    switch (c->t) {
        BOOLS(BIN_CASE, uint8_t, (uint8_t)((a != 0) & (b != 0)))
    default: break;
    }
}

static void f_or(EW_ARGS) {
    switch (c->t) {
        BOOLS(BIN_CASE, uint8_t, (uint8_t)((a != 0) | (b != 0)))
    default: break;
    }
}

static void f_xor(EW_ARGS) {
    switch (c->t) {
        BOOLS(BIN_CASE, uint8_t, (uint8_t)((a != 0) ^ (b != 0)))
    default: break;
    }
}

/* Pow: float bases compute in double, b is the exponent converted to double;
 * integer bases: with a double exponent the result truncates (saturating),
 * with an int64 exponent it is an exact wrapping integer power (pp_ipow). */
#define POW_INT(T, LO, HI)                                                                \
    static void pow_##T(EW_ARGS, bool int_exp) {                                          \
        (void)c;                                                                          \
        const T *pa = x[0];                                                               \
        T *py = y;                                                                        \
        for (int64_t j = 0; j < n; j++) {                                                 \
            T a = pa[j * inc[0]];                                                         \
            if (!int_exp) {                                                               \
                double b = ((const double *)x[1])[j * inc[1]];                            \
                py[j] = (T)f2s(pow((double)a, b), LO, HI);                                \
                continue;                                                                 \
            }                                                                             \
            int64_t b = ((const int64_t *)x[1])[j * inc[1]];                              \
            if (b >= 0) py[j] = (T)pp_ipow((uint64_t)(int64_t)a, b);                      \
            else if (a == 1) py[j] = 1;                                                   \
            else if (a == -1) py[j] = (b & 1) ? -1 : 1;                                   \
            else py[j] = 0; /* |1/a^-b| < 1 truncates to 0 (a = 0: defined as 0) */       \
        }                                                                                 \
    }
POW_INT(int32_t, INT32_MIN, INT32_MAX)
POW_INT(int64_t, INT64_MIN, INT64_MAX)

static void f_pow(EW_ARGS) {
    switch (c->t) {
    case PP_F32: {
        const float *pa = x[0];
        const double *pb = x[1];
        float *py = y;
        /* one exponent of 2 or 3 (Llama's RMSNorm, GPT-J's GELU): the
         * product in double, the same float as pow's (exact for 2; for 3,
         * checked on every 7th of the 2^32 floats), a tenth of the time */
        if (inc[1] == 0 && (pb[0] == 2.0 || pb[0] == 3.0)) {
            if (pb[0] == 2.0)
                for (int64_t j = 0; j < n; j++) { double a = pa[j * inc[0]]; py[j] = (float)(a * a); }
            else
                for (int64_t j = 0; j < n; j++) { double a = pa[j * inc[0]]; py[j] = (float)(a * a * a); }
            break;
        }
        for (int64_t j = 0; j < n; j++) py[j] = (float)pow((double)pa[j * inc[0]], pb[j * inc[1]]);
    } break;
    case PP_F64: {
        const double *pa = x[0], *pb = x[1];
        double *py = y;
        for (int64_t j = 0; j < n; j++) py[j] = pow(pa[j * inc[0]], pb[j * inc[1]]);
    } break;
    case PP_I32: pow_int32_t(c, y, x, inc, n, c->mode); break;
    case PP_I64: pow_int64_t(c, y, x, inc, n, c->mode); break;
    default: break;
    }
}

/* Where: select element bytes; c->size is the element size. */
#define WHERE_LOOP(T)                                                            \
    do {                                                                         \
        const uint8_t *pc = x[0];                                                \
        const T *px = x[1], *pz = x[2];                                          \
        T *py = y;                                                               \
        for (int64_t j = 0; j < n; j++)                                          \
            py[j] = pc[j * inc[0]] ? px[j * inc[1]] : pz[j * inc[2]];            \
    } while (0)

static void f_where(EW_ARGS) {
    switch (c->size) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    case 8: WHERE_LOOP(uint64_t); break;
    default: {
        const uint8_t *pc = x[0];
        const char *px = x[1], *pz = x[2];
        char *py = y;
        for (int64_t j = 0; j < n; j++)
            memcpy(py + j * (int64_t)c->size,
                   pc[j * inc[0]] ? px + j * inc[1] * (int64_t)c->size
                                  : pz + j * inc[2] * (int64_t)c->size,
                   c->size);
    }
    }
}

/* ---- kernel helpers ------------------------------------------------------------------------ */

/* One input, output of the same type and shape. */
static pp_status run_unary(const char *op, unsigned set, ew_fn *fn, const ew_ctx *base,
                           const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                           pp_err *err) {
    PP_TRY(pprt_need_counts(op, n_in, 1, 1, n_out, err));
    PP_TRY(need_k(&in[0], set, op, "input", err));
    PP_TRY(need_dtype(&out[0], in[0].dtype, op, "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "output", err));
    ew_ctx c = *base;
    c.t = in[0].dtype;
    const pprt_tensor *xs[1] = {&in[0]};
    return ew_run(op, xs, 1, &out[0], fn, &c, err);
}

/* Two inputs of one type in `set`, broadcast; output of type out_t
 * (PP_UNDEFINED: the inputs' type); `mode` reaches the inner loop as c->mode
 * (an attribute-selected variant of the op, 0 for most). */
static pp_status run_binary(const char *op, unsigned set, pp_dtype out_t, ew_fn *fn, int mode,
                            const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                            pp_err *err) {
    PP_TRY(pprt_need_counts(op, n_in, 2, 2, n_out, err));
    PP_TRY(need_k(&in[0], set, op, "input A", err));
    PP_TRY(need_dtype(&in[1], in[0].dtype, op, "input B", err));
    PP_TRY(need_dtype(&out[0], out_t == PP_UNDEFINED ? in[0].dtype : out_t, op, "output", err));
    PP_TRY(need_bcast_shape(op, in, 2, &out[0], err));
    ew_ctx c = {.t = in[0].dtype, .mode = mode};
    const pprt_tensor *xs[2] = {&in[0], &in[1]};
    return ew_run(op, xs, 2, &out[0], fn, &c, err);
}

static pp_status attr_f(pp_attrs a, const char *name, float def, double *out, pp_err *err) {
    float v;
    PP_TRY(pp_attr_float(a, name, def, &v, err));
    *out = v;
    return PP_OK;
}

/* ---- Identity ------------------------------------------------------------------------------ */

pp_status kern_IDENTITY(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                        int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    if (n_in >= 1 && n_out >= 1) {
        PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "Identity output", err));
        PP_TRY(need_dtype(&out[0], in[0].dtype, "Identity", "output", err));
    }
    return pprt_copy_bytes("Identity", in, n_in, out, n_out, err);
}

/* ---- unary float ops ------------------------------------------------------------------------ */

/* A float op of ir/ops_unary.def: its up to two float attributes (A0, A1:
 * NULL for none) as c->p[0] and c->p[1], then its formula f_E. */
#define UNARY_KERNEL(E, NAME, A0, D0, A1, D1)                                                  \
    pp_status kern_##E(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,      \
                       int n_out, pprt_scratch *scratch, pp_err *err) {                        \
        LIFT(kern_##E);                                                                        \
        ew_ctx c = {0};                                                                        \
        const char *a0 = A0, *a1 = A1;                                                         \
        if (a0) PP_TRY(attr_f(attrs, a0, D0, &c.p[0], err));                                   \
        if (a1) PP_TRY(attr_f(attrs, a1, D1, &c.p[1], err));                                   \
        return run_unary(NAME, K_FLOAT, f_##E, &c, in, n_in, out, n_out, err);                 \
    }
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) UNARY_KERNEL(E, NAME, A0, D0, A1, D1)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#undef UNARY_KERNEL

pp_status kern_SIGN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                    pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_SIGN);
    ew_ctx c = {0};
    return run_unary("Sign", K_NUM, f_sign, &c, in, n_in, out, n_out, err);
}

pp_status kern_SHRINK(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                      int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_SHRINK);
    ew_ctx c = {0};
    PP_TRY(attr_f(attrs, "bias", 0.0f, &c.p[0], err));
    PP_TRY(attr_f(attrs, "lambd", 0.5f, &c.p[1], err));
    return run_unary("Shrink", K_NUM, f_shrink, &c, in, n_in, out, n_out, err);
}

pp_status kern_BITWISENOT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                          int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    ew_ctx c = {0};
    return run_unary("BitwiseNot", K_SINT | K_UINT, f_bitwise_not, &c, in, n_in, out, n_out, err);
}

/* A float tensor in, bools out (IsNaN, IsInf). */
static pp_status run_test(const char *op, ew_fn *fn, int mode, const pprt_tensor *in, int n_in,
                          pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(pprt_need_counts(op, n_in, 1, 1, n_out, err));
    PP_TRY(need_k(&in[0], K_FLOAT, op, "input", err));
    PP_TRY(need_dtype(&out[0], PP_BOOL, op, "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "output", err));
    ew_ctx c = {.t = in[0].dtype, .mode = mode};
    const pprt_tensor *xs[1] = {&in[0]};
    return ew_run(op, xs, 1, &out[0], fn, &c, err);
}

pp_status kern_ISNAN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_ISNAN);
    return run_test("IsNaN", f_isnan, 0, in, n_in, out, n_out, err);
}

pp_status kern_ISINF(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_ISINF);
    int64_t neg, pos;
    PP_TRY(pp_attr_int(attrs, "detect_negative", 1, &neg, err));
    PP_TRY(pp_attr_int(attrs, "detect_positive", 1, &pos, err));
    return run_test("IsInf", f_isinf, (neg != 0) | (pos != 0) << 1, in, n_in, out, n_out, err);
}

pp_status kern_GELU(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_GELU);
    const char *approx;
    PP_TRY(pp_attr_string(attrs, "approximate", "none", &approx, err));
    bool tanh_form = strcmp(approx, "tanh") == 0;
    if (!tanh_form && strcmp(approx, "none") != 0)
        return PP_FAIL(err, PP_EINVAL, "Gelu kernel: attribute 'approximate'='%s' is unknown",
                       approx);
    ew_ctx c = {0};
    return run_unary("Gelu", K_FLOAT, tanh_form ? f_GELU_TANH : f_GELU, &c, in, n_in, out,
                     n_out, err);
}

pp_status kern_NEG(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_NEG);
    ew_ctx c = {0};
    return run_unary("Neg", K_FLOAT | K_SINT, f_neg, &c, in, n_in, out, n_out, err);
}

pp_status kern_ABS(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_ABS);
    ew_ctx c = {0};
    return run_unary("Abs", K_NUM, f_abs, &c, in, n_in, out, n_out, err);
}

pp_status kern_NOT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    ew_ctx c = {0};
    return run_unary("Not", K_BOOL, f_not, &c, in, n_in, out, n_out, err);
}

/* ---- Clip ------------------------------------------------------------------------------------ */

#define CLIP_CASE(E, T, UT, A, B)                                                  \
    case E: {                                                                      \
        const T *px = in[0].data;                                                  \
        T *py = out[0].data;                                                       \
        const T lo = has_lo ? *(const T *)lo_p : (T)0;                             \
        const T hi = has_hi ? *(const T *)hi_p : (T)0;                             \
        for (int64_t i = 0; i < n; i++) {                                          \
            T v = px[i];                                                           \
            if (has_lo && v < lo) v = lo;                                          \
            if (has_hi && v > hi) v = hi; /* min > max: everything becomes max */  \
            py[i] = v;                                                             \
        }                                                                          \
    } break;

pp_status kern_CLIP(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_CLIP);
    PP_TRY(pprt_need_counts("Clip", n_in, 1, 3, n_out, err));
    PP_TRY(need_k(&in[0], K_NUM, "Clip", "input", err));
    PP_TRY(need_dtype(&out[0], in[0].dtype, "Clip", "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "Clip output", err));
    const pp_dtype t = in[0].dtype;
    /* bounds as values of type t */
    union { double d; int64_t i; uint64_t u; float f; } lo_v, hi_v;
    const void *lo_p = &lo_v, *hi_p = &hi_v;
    bool has_lo = false, has_hi = false;
    if (attrs.opset < 11) {
        const pp_attr *amin = pp_attr_find(attrs, "min"), *amax = pp_attr_find(attrs, "max");
        double d;
        if (amin) {
            PP_TRY(attr_f(attrs, "min", 0, &d, err));
            cast_elems(&d, PP_F64, &lo_v, t, 1);
            has_lo = true;
        }
        if (amax) {
            PP_TRY(attr_f(attrs, "max", 0, &d, err));
            cast_elems(&d, PP_F64, &hi_v, t, 1);
            has_hi = true;
        }
    } else {
        for (int i = 1; i < n_in && i < 3; i++) {
            if (in[i].dtype == PP_UNDEFINED) continue;
            int64_t cnt;
            PP_TRY(pprt_numel_of(&in[i], &cnt, err));
            PP_TRY(need_dtype(&in[i], t, "Clip", i == 1 ? "input min" : "input max", err));
            if (cnt != 1)
                return PP_FAIL(err, PP_EINVAL, "Clip kernel: input %s has %lld elements, "
                               "expected 1", i == 1 ? "min" : "max", (long long)cnt);
            if (i == 1) lo_p = in[i].data, has_lo = true;
            else hi_p = in[i].data, has_hi = true;
        }
    }
    (void)scratch;
    /* a bound not given is the type's range (ONNX: numeric_limits lowest and
     * max), so an infinity becomes the largest finite value */
    if (t == PP_F32 && !has_lo) lo_v.f = -FLT_MAX, lo_p = &lo_v, has_lo = true;
    if (t == PP_F32 && !has_hi) hi_v.f = FLT_MAX, hi_p = &hi_v, has_hi = true;
    if (t == PP_F64 && !has_lo) lo_v.d = -DBL_MAX, lo_p = &lo_v, has_lo = true;
    if (t == PP_F64 && !has_hi) hi_v.d = DBL_MAX, hi_p = &hi_v, has_hi = true;
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    switch (t) {
        FLOATS(CLIP_CASE, 0, 0)
        SINTS(CLIP_CASE, 0, 0)
        UINTS(CLIP_CASE, 0, 0)
    default: return PP_FAIL(err, PP_EUNSUP, "Clip kernel: element type %s", pp_dtype_name(t));
    }
    return PP_OK;
}

/* ---- binary ops ---------------------------------------------------------------------------- */

#define BINARY_KERNEL(E, NAME, SET, OUT_T, FN)                                                 \
    pp_status kern_##E(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,      \
                       int n_out, pprt_scratch *scratch, pp_err *err) {                        \
        LIFT(kern_##E);                                                                        \
        return run_binary(NAME, SET, OUT_T, FN, 0, in, n_in, out, n_out, err);                 \
    }
BINARY_KERNEL(ADD, "Add", K_NUM, PP_UNDEFINED, f_add)
BINARY_KERNEL(SUB, "Sub", K_NUM, PP_UNDEFINED, f_sub)
BINARY_KERNEL(MUL, "Mul", K_NUM, PP_UNDEFINED, f_mul)
BINARY_KERNEL(DIV, "Div", K_NUM, PP_UNDEFINED, f_div)
BINARY_KERNEL(PRELU, "PRelu", K_FLOAT | K_SINT | K_UINT, PP_UNDEFINED, f_prelu)
BINARY_KERNEL(EQUAL, "Equal", K_NUM | K_BOOL, PP_BOOL, f_equal)
BINARY_KERNEL(LESS, "Less", K_NUM, PP_BOOL, f_less)
BINARY_KERNEL(GREATER, "Greater", K_NUM, PP_BOOL, f_greater)
BINARY_KERNEL(LESSOREQUAL, "LessOrEqual", K_NUM, PP_BOOL, f_less_equal)
BINARY_KERNEL(GREATEROREQUAL, "GreaterOrEqual", K_NUM, PP_BOOL, f_greater_equal)
BINARY_KERNEL(AND, "And", K_BOOL, PP_BOOL, f_and)
BINARY_KERNEL(OR, "Or", K_BOOL, PP_BOOL, f_or)
BINARY_KERNEL(XOR, "Xor", K_BOOL, PP_BOOL, f_xor)
BINARY_KERNEL(BITWISEAND, "BitwiseAnd", K_SINT | K_UINT, PP_UNDEFINED, f_bitwise_and)
BINARY_KERNEL(BITWISEOR, "BitwiseOr", K_SINT | K_UINT, PP_UNDEFINED, f_bitwise_or)
BINARY_KERNEL(BITWISEXOR, "BitwiseXor", K_SINT | K_UINT, PP_UNDEFINED, f_bitwise_xor)
#undef BINARY_KERNEL

pp_status kern_BITSHIFT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                        int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    const char *dir;
    PP_TRY(pp_attr_string(attrs, "direction", "", &dir, err));
    bool right = strcmp(dir, "RIGHT") == 0;
    if (!right && strcmp(dir, "LEFT") != 0)
        return PP_FAIL(err, PP_EINVAL, "BitShift kernel: attribute 'direction'='%s' is unknown", dir);
    return run_binary("BitShift", K_UINT, PP_UNDEFINED, f_bitshift, right, in, n_in, out, n_out, err);
}

/* Mod: the attribute 'fmod' selects the inner loop's variant (see f_mod);
 * fmod=0 on floats was refused by shape_MOD, and is again here. */
pp_status kern_MOD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                   int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_MOD);
    int64_t fmod;
    PP_TRY(pp_attr_int(attrs, "fmod", 0, &fmod, err));
    if (fmod != 0 && fmod != 1)
        return PP_FAIL(err, PP_EINVAL, "Mod kernel: attribute 'fmod'=%lld must be 0 or 1",
                       (long long)fmod);
    if (fmod == 0 && n_in >= 1 && (K_FLOAT & KB(in[0].dtype)))
        return PP_FAIL(err, PP_EINVAL, "Mod kernel: attribute 'fmod'=0 is not allowed for "
                       "element type %s (floats need fmod=1)", pp_dtype_name(in[0].dtype));
    return run_binary("Mod", K_NUM, PP_UNDEFINED, f_mod, (int)fmod, in, n_in, out, n_out, err);
}

/* Pow: the exponent is converted (in scratch) to double, or to int64 when
 * both operands are integers, then broadcast against the base. */
pp_status kern_POW(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                   int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_POW);
    PP_TRY(pprt_need_counts("Pow", n_in, 2, 2, n_out, err));
    PP_TRY(need_k(&in[0], K_FLOAT | KB(PP_I32) | KB(PP_I64), "Pow", "base", err));
    PP_TRY(need_k(&in[1], K_NUM, "Pow", "exponent", err));
    PP_TRY(need_dtype(&out[0], in[0].dtype, "Pow", "output", err));
    PP_TRY(need_bcast_shape("Pow", in, 2, &out[0], err));
    bool int_exp = !(K_FLOAT & KB(in[0].dtype)) && !(K_FLOAT & KB(in[1].dtype));
    pprt_tensor e = in[1];
    e.dtype = int_exp ? PP_I64 : PP_F64;
    int64_t n;
    size_t nb;
    PP_TRY(pprt_numel_of(&in[1], &n, err));
    if (pp_mul_ovf((size_t)n, 8, &nb)) return PP_FAIL(err, PP_ENOMEM, "Pow: exponent too large");
    e.data = pprt_scratch_get(scratch, nb);
    if (!e.data) return PP_FAIL(err, PP_ENOMEM, "Pow: out of scratch memory");
    cast_elems(in[1].data, in[1].dtype, e.data, e.dtype, n);
    ew_ctx c = {.t = in[0].dtype, .mode = int_exp};
    const pprt_tensor *xs[2] = {&in[0], &e};
    return ew_run("Pow", xs, 2, &out[0], f_pow, &c, err);
}

/* ---- variadic: Min, Max, Sum, Mean ------------------------------------------------------------ */

/* out = x0 op x1 op x2 ...: the first step broadcasts x0 and x1 into out, each
 * later one combines out (as input A, same element positions) with x_i. */
static pp_status run_variadic(const char *op, unsigned set, ew_fn *fn, const pprt_tensor *in,
                              int n_in, pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(pprt_need_counts(op, n_in, 1, PP_MAX_INPUTS, n_out, err));
    PP_TRY(need_k(&in[0], set, op, "input 0", err));
    for (int i = 1; i < n_in; i++) PP_TRY(need_dtype(&in[i], in[0].dtype, op, "an input", err));
    PP_TRY(need_dtype(&out[0], in[0].dtype, op, "output", err));
    PP_TRY(need_bcast_shape(op, in, n_in, &out[0], err));
    if (n_in == 1) {
        PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "output", err));
        return pprt_copy_bytes(op, in, 1, out, 1, err);
    }
    ew_ctx c = {.t = in[0].dtype};
    const pprt_tensor *xs[2] = {&in[0], &in[1]};
    PP_TRY(ew_run(op, xs, 2, &out[0], fn, &c, err));
    for (int i = 2; i < n_in; i++) {
        xs[0] = &out[0];
        xs[1] = &in[i];
        PP_TRY(ew_run(op, xs, 2, &out[0], fn, &c, err));
    }
    return PP_OK;
}

pp_status kern_MIN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_MIN);
    return run_variadic("Min", K_NUM, f_min, in, n_in, out, n_out, err);
}

pp_status kern_MAX(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_MAX);
    return run_variadic("Max", K_NUM, f_max, in, n_in, out, n_out, err);
}

pp_status kern_SUM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                   pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_SUM);
    return run_variadic("Sum", K_FLOAT, f_add, in, n_in, out, n_out, err);
}

pp_status kern_MEAN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_MEAN);
    PP_TRY(run_variadic("Mean", K_FLOAT, f_add, in, n_in, out, n_out, err));
    ew_ctx c = {.t = out[0].dtype, .p = {(double)n_in}};
    const pprt_tensor *xs[1] = {&out[0]};
    return ew_run("Mean", xs, 1, &out[0], f_divide_by, &c, err);
}

/* ---- Where ------------------------------------------------------------------------------------- */

pp_status kern_WHERE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Where", n_in, 3, 3, n_out, err));
    PP_TRY(need_dtype(&in[0], PP_BOOL, "Where", "condition", err));
    PP_TRY(need_dtype(&in[2], in[1].dtype, "Where", "input Y", err));
    PP_TRY(need_dtype(&out[0], in[1].dtype, "Where", "output", err));
    PP_TRY(need_bcast_shape("Where", in, 3, &out[0], err));
    ew_ctx c = {.t = in[1].dtype, .size = pp_dtype_size(in[1].dtype)};
    if (c.size == 0)
        return PP_FAIL(err, PP_EUNSUP, "Where kernel: element type %s is not supported",
                       pp_dtype_name(in[1].dtype));
    const pprt_tensor *xs[3] = {&in[0], &in[1], &in[2]};
    return ew_run("Where", xs, 3, &out[0], f_where, &c, err);
}

/* ---- Cast, CastLike ------------------------------------------------------------------------------ */

static pp_status run_cast(const char *op, pp_attrs attrs, const pprt_tensor *x, pprt_tensor *y,
                          pp_err *err) {
    PP_TRY(pprt_need_shape(y, &x->shape, "output", err));
    int64_t sat;
    const char *rm;
    PP_TRY(pp_attr_int(attrs, "saturate", 1, &sat, err));
    PP_TRY(pp_attr_string(attrs, "round_mode", "up", &rm, err));
    cast_opts o = {sat != 0, ROUND_UP};
    if (!strcmp(rm, "down")) o.round = ROUND_DOWN;
    else if (!strcmp(rm, "nearest")) o.round = ROUND_NEAREST;
    else if (strcmp(rm, "up") != 0)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: attribute 'round_mode'='%s'", op, rm);
    int64_t n;
    PP_TRY(pprt_numel_of(x, &n, err));
    if (!cast_elems_opt(x->data, x->dtype, y->data, y->dtype, n, &o))
        return PP_FAIL(err, PP_EUNSUP, "%s kernel: cast from %s to %s is not supported", op,
                       pp_dtype_name(x->dtype), pp_dtype_name(y->dtype));
    int64_t finite;
    PP_TRY(pp_attr_int(attrs, "pp_finite", 0, &finite, err));
    if (finite && x->dtype == PP_F32) pprt_half_finite(x->data, y->data, y->dtype, 0, n);
    return PP_OK;
}

/* (runtime/kernels.h) */
void pprt_half_finite(const float *x, void *y, pp_dtype t, int64_t a, int64_t b) {
    if (t != PP_F16 && t != PP_BF16) return;
    const uint16_t inf = t == PP_F16 ? 0x7c00u : 0x7f80u, big = t == PP_F16 ? 0x7bffu : 0x7f7fu;
    uint16_t *h = y;
    for (int64_t i = a; i < b; i++)
        if ((h[i] & 0x7fffu) == inf && isfinite(x[i])) h[i] = (uint16_t)((h[i] & 0x8000u) | big);
}

pp_status kern_CAST(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                    int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("Cast", n_in, 1, 1, n_out, err));
    int64_t to;
    PP_TRY(pp_attr_int(attrs, "to", 0, &to, err));
    if (to != (int64_t)out[0].dtype)
        return PP_FAIL(err, PP_EINVAL, "Cast kernel: attribute 'to'=%lld but the output is %s",
                       (long long)to, pp_dtype_name(out[0].dtype));
    return run_cast("Cast", attrs, &in[0], &out[0], err);
}

pp_status kern_CASTLIKE(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                        int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("CastLike", n_in, 2, 2, n_out, err));
    PP_TRY(need_dtype(&out[0], in[1].dtype, "CastLike", "output", err));
    return run_cast("CastLike", attrs, &in[0], &out[0], err);
}

/* ---- Dropout (inference) --------------------------------------------------------------------------- */

pp_status kern_DROPOUT(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                       int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    if (n_in < 1 || n_in > 3 || n_out < 1 || n_out > 2)
        return PP_FAIL(err, PP_EINVAL, "Dropout kernel: %d inputs, %d outputs", n_in, n_out);
    if (n_in > 2 && in[2].dtype != PP_UNDEFINED) {
        PP_TRY(need_dtype(&in[2], PP_BOOL, "Dropout", "training_mode", err));
        int64_t cnt;
        PP_TRY(pprt_numel_of(&in[2], &cnt, err));
        if (cnt != 1)
            return PP_FAIL(err, PP_EINVAL, "Dropout kernel: training_mode has %lld elements",
                           (long long)cnt);
        /* training with ratio 0 keeps every element: the same as inference */
        double ratio = 0.5;
        if (n_in > 1 && in[1].dtype != PP_UNDEFINED) {
            PP_TRY(pprt_numel_of(&in[1], &cnt, err));
            if (cnt != 1 || !cast_elems(in[1].data, in[1].dtype, &ratio, PP_F64, 1))
                return PP_FAIL(err, PP_EINVAL, "Dropout kernel: ratio must be one float");
        }
        if (*(const uint8_t *)in[2].data && ratio != 0)
            return PP_FAIL(err, PP_EUNSUP,
                           "Dropout: training_mode is true with ratio %g; training-mode "
                           "Dropout is not supported (only ratio 0)", ratio);
    }
    PP_TRY(need_dtype(&out[0], in[0].dtype, "Dropout", "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "Dropout output", err));
    PP_TRY(pprt_copy_bytes("Dropout", in, 1, out, 1, err));
    if (n_out < 2) return PP_OK;
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    PP_TRY(pprt_need_shape(&out[1], &in[0].shape, "Dropout mask", err));
    if (out[1].dtype == PP_BOOL) {
        if (n > 0) memset(out[1].data, 1, (size_t)n);
        return PP_OK;
    }
    /* before opset 10 the mask has data's type: all ones */
    PP_TRY(need_dtype(&out[1], in[0].dtype, "Dropout", "mask", err));
    const double one = 1.0;
    size_t sz = pp_dtype_size(out[1].dtype);
    if (!cast_elems(&one, PP_F64, out[1].data, out[1].dtype, n > 0 ? 1 : 0))
        return PP_FAIL(err, PP_EUNSUP, "Dropout kernel: mask of type %s",
                       pp_dtype_name(out[1].dtype));
    for (int64_t i = 1; i < n; i++) memcpy((char *)out[1].data + i * (int64_t)sz, out[1].data, sz);
    (void)attrs;
    return PP_OK;
}

/* ---- CumSum ------------------------------------------------------------------------------------------ */

/* Running sums (products: PROD) along one axis; integers wrap (accumulated in U). */
#define CUMSUM_CASE(E, T_, UT_, A, ACC)                                               \
    case E: {                                                                         \
        typedef T_ T;                                                                 \
        typedef UT_ U __attribute__((unused));                                        \
        const T *px = in[0].data;                                                     \
        T *py = out[0].data;                                                          \
        for (int64_t o = 0; o < outer; o++)                                           \
            for (int64_t i = 0; i < inner; i++) {                                     \
                ACC acc = prod ? (ACC)1 : (ACC)0;                                     \
                for (int64_t s = 0; s < len; s++) {                                   \
                    int64_t k = reverse ? len - 1 - s : s;                            \
                    int64_t at = (o * len + k) * inner + i;                           \
                    if (exclusive) py[at] = (T)acc;                                   \
                    if (prod) acc *= (ACC)px[at];                                     \
                    else acc += (ACC)px[at];                                          \
                    if (!exclusive) py[at] = (T)acc;                                  \
                }                                                                     \
            }                                                                         \
    } break;

static pp_status cumulate(const char *name, bool prod, pp_attrs attrs, const pprt_tensor *in, int n_in,
                         pprt_tensor *out, int n_out, pp_err *err) {
    PP_TRY(pprt_need_counts(name, n_in, 2, 2, n_out, err));
    PP_TRY(need_k(&in[0], K_NUM, name, "input x", err));
    PP_TRY(need_dtype(&out[0], in[0].dtype, name, "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "output", err));
    PP_TRY(need_k(&in[1], KB(PP_I32) | KB(PP_I64), name, "input axis", err));
    int64_t cnt;
    PP_TRY(pprt_numel_of(&in[1], &cnt, err));
    if (cnt != 1)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: input axis has %lld elements, expected 1", name,
                       (long long)cnt);
    int64_t axis = in[1].dtype == PP_I64 ? *(const int64_t *)in[1].data
                                         : *(const int32_t *)in[1].data;
    const int r = in[0].shape.rank;
    if (axis < -r || axis >= r)
        return PP_FAIL(err, PP_EINVAL, "%s: input axis=%lld is out of range [%d, %d)", name,
                       (long long)axis, -r, r);
    if (axis < 0) axis += r;
    int64_t exclusive, reverse;
    PP_TRY(pp_attr_int(attrs, "exclusive", 0, &exclusive, err));
    PP_TRY(pp_attr_int(attrs, "reverse", 0, &reverse, err));
    int64_t outer = 1, inner = 1, len = in[0].shape.dim[axis];
    for (int i = 0; i < axis; i++) outer *= in[0].shape.dim[i];
    for (int i = (int)axis + 1; i < r; i++) inner *= in[0].shape.dim[i];
    switch (in[0].dtype) {
        FLOATS(CUMSUM_CASE, 0, T)
        SINTS(CUMSUM_CASE, 0, U)
        UINTS(CUMSUM_CASE, 0, U)
    default: return PP_FAIL(err, PP_EUNSUP, "%s kernel: element type %s", name,
                            pp_dtype_name(in[0].dtype));
    }
    return PP_OK;
}

pp_status kern_CUMSUM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                      pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_CUMSUM);
    return cumulate("CumSum", false, attrs, in, n_in, out, n_out, err);
}

pp_status kern_CUMPROD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                       pprt_scratch *scratch, pp_err *err) {
    LIFT(kern_CUMPROD);
    return cumulate("CumProd", true, attrs, in, n_in, out, n_out, err);
}

/* ---- QuantizeLinear, DequantizeLinear ------------------------------------------------------------------- */

/* Index into the scale (and zero point) of x's element i. */
static int64_t quant_index(const pp_quant *q, int64_t i) {
    if (q->per_tensor) return 0;
    const int64_t a = i / q->inner % q->len;
    if (!q->block) return a;
    const int64_t nb = (q->len + q->block - 1) / q->block, o = i / (q->inner * q->len);
    return (o * nb + a / q->block) * q->inner + i % q->inner;
}

static int64_t quant_zp(const pprt_tensor *zp, int64_t j) {
    if (!zp) return 0;
    switch (zp->dtype) {
    case PP_I8: return ((const int8_t *)zp->data)[j];
    case PP_U8: return ((const uint8_t *)zp->data)[j];
    case PP_I16: return ((const int16_t *)zp->data)[j];
    case PP_U16: return ((const uint16_t *)zp->data)[j];
    case PP_I32: return ((const int32_t *)zp->data)[j];
    default: return 0;
    }
}

/* y = saturate(round_half_even(x / scale) + zero_point), the division in
 * float as onnxruntime and the ONNX reference do it. A NaN quantizes to the
 * zero point (integers have no NaN; onnxruntime's cast of NaN is undefined). */
pp_status kern_QUANTIZELINEAR(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                              pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("QuantizeLinear", n_in, 2, 3, n_out, err));
    pp_tinfo ti[3];
    for (int k = 0; k < n_in; k++) ti[k] = pprt_tinfo_of(&in[k]);
    pp_quant q;
    PP_TRY(pp_quant_parse(PP_OP_QUANTIZELINEAR, attrs, ti, n_in, &q, err));
    PP_TRY(need_dtype(&out[0], q.q, "QuantizeLinear", "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "QuantizeLinear output", err));
    const pprt_tensor *zp = q.has_zp ? &in[2] : NULL;
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    const float *x = in[0].data, *sc = in[1].data;
    for (int64_t i = 0; i < n; i++) {
        const int64_t j = quant_index(&q, i);
        const float r = nearbyint(x[i] / sc[j]);
        const int64_t z = quant_zp(zp, j);
        /* clamped in double first: no cast of an out-of-range value */
        const double v = isnan(r) ? (double)z : fmin(fmax((double)r + (double)z, (double)q.lo), (double)q.hi);
        const int64_t y = (int64_t)v;
        switch (q.q) {
        case PP_I8: ((int8_t *)out[0].data)[i] = (int8_t)y; break;
        case PP_U8: ((uint8_t *)out[0].data)[i] = (uint8_t)y; break;
        case PP_I16: ((int16_t *)out[0].data)[i] = (int16_t)y; break;
        default: ((uint16_t *)out[0].data)[i] = (uint16_t)y; break;
        }
    }
    return PP_OK;
}

/* y = (x - zero_point) * scale in float. */
pp_status kern_DEQUANTIZELINEAR(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                                pprt_scratch *scratch, pp_err *err) {
    (void)scratch;
    PP_TRY(pprt_need_counts("DequantizeLinear", n_in, 2, 3, n_out, err));
    pp_tinfo ti[3];
    for (int k = 0; k < n_in; k++) ti[k] = pprt_tinfo_of(&in[k]);
    pp_quant q;
    PP_TRY(pp_quant_parse(PP_OP_DEQUANTIZELINEAR, attrs, ti, n_in, &q, err));
    PP_TRY(need_dtype(&out[0], PP_F32, "DequantizeLinear", "output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "DequantizeLinear output", err));
    const pprt_tensor *zp = q.has_zp ? &in[2] : NULL;
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    const float *sc = in[1].data;
    float *y = out[0].data;
    for (int64_t i = 0; i < n; i++) {
        const int64_t j = quant_index(&q, i);
        const int64_t v = quant_zp(&in[0], i) - quant_zp(zp, j);
        y[i] = (float)v * sc[j];
    }
    return PP_OK;
}
