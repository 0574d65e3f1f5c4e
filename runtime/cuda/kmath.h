/* kmath.h: the CUDA backend's own kernels, as the work of one thread.
 *
 * Each own kernel is a parameter block (pcu_ew, pcu_perm, ...) and a function
 * that does the work of thread i of the launch (pcu_ew_at, pcu_perm_at, ...).
 * The same functions compile three ways:
 *   - under nvcc (__CUDACC__): __host__ __device__, called by the __global__
 *     wrappers of kernels.cu, one thread each;
 *   - as plain C11: static inline, called by the emulator (emu.c), which loops
 *     i over every thread of the launch, and by the unit tests, which compare
 *     them with the reference kernels (runtime/cpu).
 * So the emulator and the GPU run the same per-element and combine logic; what
 * differs is only the order in which threads run (they never share data: each
 * thread writes its own outputs) and the device's math library (expf, erff,
 * ... differ from glibc's in the last ulps).
 *
 * Rules that keep this header valid in both languages and free of local
 * memory on the GPU (ptxas -warn-lmem-usage is an error in this build): no
 * arrays in a thread's frame, loops over dims read the parameter block
 * (which lives in device global memory, uploaded once at create), no
 * recursion, no libc beyond <math.h>.
 *
 * Element types are ONNX's numbers (pp_dtype); plan_cuda.c checks that the
 * PCU_T_* values below equal them. */
#ifndef PPRT_CUDA_KMATH_H
#define PPRT_CUDA_KMATH_H

#include <math.h>
#include <stdint.h>

#include "../../ir/scalar.h"
#include "../optim_math.h"

#ifdef __CUDACC__
#define PCU_HD static __host__ __device__ __forceinline__
#else
#define PCU_HD static inline
#endif

/* a loop of constant trip count unrolled on the GPU, so the small arrays it
 * indexes stay in registers (ptxas refuses local memory here) */
#ifdef __CUDACC__
#define PCU_UNROLL _Pragma("unroll")
#else
#define PCU_UNROLL
#endif

#define PCU_MAXD 8 /* dims of a kernel's index space (PP_MAX_DIMS) */

enum {
    PCU_T_F32 = 1, PCU_T_U8 = 2, PCU_T_I8 = 3, PCU_T_U16 = 4, PCU_T_I16 = 5, PCU_T_I32 = 6,
    PCU_T_I64 = 7, PCU_T_BOOL = 9, PCU_T_F16 = 10, PCU_T_F64 = 11, PCU_T_U32 = 12, PCU_T_U64 = 13,
    PCU_T_BF16 = 16,
};

/* ---- element types ---------------------------------------------------------------------- */

typedef union { float f; uint32_t u; } pcu_fbits;

PCU_HD int pcu_tsize(int t) {
    switch (t) {
    case PCU_T_U8: case PCU_T_I8: case PCU_T_BOOL: return 1;
    case PCU_T_U16: case PCU_T_I16: case PCU_T_F16: case PCU_T_BF16: return 2;
    case PCU_T_F32: case PCU_T_I32: case PCU_T_U32: return 4;
    case PCU_T_I64: case PCU_T_U64: case PCU_T_F64: return 8;
    default: return 0;
    }
}
PCU_HD int pcu_is_float(int t) { return t == PCU_T_F32 || t == PCU_T_F16 || t == PCU_T_BF16 || t == PCU_T_F64; }
PCU_HD int pcu_is_signed(int t) { return t == PCU_T_I8 || t == PCU_T_I16 || t == PCU_T_I32 || t == PCU_T_I64; }

/* Index arithmetic on a non-negative a and a positive b: in 32 bits where
 * both fit (a GPU divides 64-bit integers in software, several times slower
 * than 32-bit ones; the odometers below divide once or twice per dim per
 * element). Exactly a / b and a % b either way. */
PCU_HD int64_t pcu_div(int64_t a, int64_t b) {
    return ((uint64_t)a | (uint64_t)b) <= 0xffffffffu ? (int64_t)((uint32_t)a / (uint32_t)b) : a / b;
}
PCU_HD int64_t pcu_mod(int64_t a, int64_t b) {
    return ((uint64_t)a | (uint64_t)b) <= 0xffffffffu ? (int64_t)((uint32_t)a % (uint32_t)b) : a % b;
}
/* c = *r % b, *r /= b (one division). */
PCU_HD int64_t pcu_divmod(int64_t *r, int64_t b) {
    const int64_t q = pcu_div(*r, b), c = *r - q * b;
    *r = q;
    return c;
}

/* float16 <-> float32, exact one way and round-to-nearest-even the other
 * (overflow to infinity, NaN kept NaN), as the reference's Cast does. */
PCU_HD float pcu_h2f(uint16_t h) {
    pcu_fbits b;
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return s ? -v : v;
    }
    b.u = e == 31 ? (s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0)) : (s | ((e + 112u) << 23) | (m << 13));
    return b.f;
}

PCU_HD uint16_t pcu_f2h(float f) {
    pcu_fbits b;
    b.f = f;
    const uint32_t s = (b.u >> 16) & 0x8000u, a = b.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);     /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                                    /* below 2^-14: subnormal or 0 */
        if (a < 0x33000000u) return (uint16_t)s;              /* below 2^-25: rounds to 0 */
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t sh = 126u - e;                         /* 14..24: value = m >> sh, in 2^-24 units */
        uint32_t q = m >> sh;
        const uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(s | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
    const uint32_t low = r & 0x1fffu;
    r >>= 13;
    if (low > 0x1000u || (low == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(s | r);
}

PCU_HD float pcu_bf2f(uint16_t h) {
    pcu_fbits b;
    b.u = (uint32_t)h << 16;
    return b.f;
}

PCU_HD uint16_t pcu_f2bf(float f) {
    pcu_fbits b;
    b.f = f;
    if ((b.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((b.u >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
}

/* Element i of p (type t) as float / double / int64 (unsigned types as their
 * bits: callers that care use pcu_ldu). */
PCU_HD float pcu_ldf(const void *p, int t, int64_t i) {
    switch (t) {
    case PCU_T_F32: return ((const float *)p)[i];
    case PCU_T_F16: return pcu_h2f(((const uint16_t *)p)[i]);
    case PCU_T_BF16: return pcu_bf2f(((const uint16_t *)p)[i]);
    case PCU_T_F64: return (float)((const double *)p)[i];
    default: return 0.0f;
    }
}

PCU_HD double pcu_ldd(const void *p, int t, int64_t i) {
    return t == PCU_T_F64 ? ((const double *)p)[i] : (double)pcu_ldf(p, t, i);
}

PCU_HD int64_t pcu_ldi(const void *p, int t, int64_t i) {
    switch (t) {
    case PCU_T_I8: return ((const int8_t *)p)[i];
    case PCU_T_I16: return ((const int16_t *)p)[i];
    case PCU_T_I32: return ((const int32_t *)p)[i];
    case PCU_T_I64: return ((const int64_t *)p)[i];
    case PCU_T_U8: case PCU_T_BOOL: return ((const uint8_t *)p)[i];
    case PCU_T_U16: return ((const uint16_t *)p)[i];
    case PCU_T_U32: return ((const uint32_t *)p)[i];
    case PCU_T_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
    }
}

PCU_HD void pcu_stf(void *p, int t, int64_t i, float v) {
    switch (t) {
    case PCU_T_F32: ((float *)p)[i] = v; break;
    case PCU_T_F16: ((uint16_t *)p)[i] = pcu_f2h(v); break;
    case PCU_T_BF16: ((uint16_t *)p)[i] = pcu_f2bf(v); break;
    case PCU_T_F64: ((double *)p)[i] = v; break;
    default: break;
    }
}

/* The float kernels' element type in a half plan (Softmax, LogSoftmax, the
 * norms, the pools, the fused attention, the convolution epilogue: their x, y,
 * scale and bias): f32, or a half plan's f16 / bf16 (ppcc --precision), read
 * as floats and computed as the f32 rows are, what they write rounded to
 * nearest even; t is PCU_T_F16 or PCU_T_BF16 for half, anything else f32
 * (a plan's f32 steps leave it 0). */
PCU_HD int pcu_rhalf(int t) { return t == PCU_T_F16 || t == PCU_T_BF16; }
PCU_HD int pcu_rsize(int t) { return pcu_rhalf(t) ? 2 : 4; }
PCU_HD float pcu_rld(const void *p, int t, int64_t j) {
    return pcu_rhalf(t) ? pcu_ldf(p, t, j) : ((const float *)p)[j];
}
PCU_HD void pcu_rst(void *p, int t, int64_t j, float v) {
    if (pcu_rhalf(t)) pcu_stf(p, t, j, v);
    else ((float *)p)[j] = v;
}
/* v as the type stores it (f32: v) */
PCU_HD float pcu_rround(int t, float v) {
    return t == PCU_T_F16 ? pcu_h2f(pcu_f2h(v)) : t == PCU_T_BF16 ? pcu_bf2f(pcu_f2bf(v)) : v;
}

/* Integer stores keep the low bits (wrapping, as the reference's unsigned
 * arithmetic does). */
PCU_HD void pcu_sti(void *p, int t, int64_t i, int64_t v) {
    switch (t) {
    case PCU_T_I8: case PCU_T_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case PCU_T_BOOL: ((uint8_t *)p)[i] = (uint8_t)(v != 0); break;
    case PCU_T_I16: case PCU_T_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case PCU_T_I32: case PCU_T_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case PCU_T_I64: case PCU_T_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: break;
    }
}

/* float -> integer as the reference's Cast: truncate toward zero, saturate,
 * NaN -> 0. */
PCU_HD int64_t pcu_f2s(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}
PCU_HD uint64_t pcu_f2u(double v, uint64_t hi) {
    if (v != v || v <= 0) return 0;
    if (v >= (double)hi) return hi;
    return (uint64_t)v;
}
PCU_HD int64_t pcu_f2int(double v, int t) {
    switch (t) {
    case PCU_T_I8: return pcu_f2s(v, INT8_MIN, INT8_MAX);
    case PCU_T_I16: return pcu_f2s(v, INT16_MIN, INT16_MAX);
    case PCU_T_I32: return pcu_f2s(v, INT32_MIN, INT32_MAX);
    case PCU_T_I64: return pcu_f2s(v, INT64_MIN, INT64_MAX);
    case PCU_T_U8: return (int64_t)pcu_f2u(v, UINT8_MAX);
    case PCU_T_U16: return (int64_t)pcu_f2u(v, UINT16_MAX);
    case PCU_T_U32: return (int64_t)pcu_f2u(v, UINT32_MAX);
    case PCU_T_U64: return (int64_t)pcu_f2u(v, UINT64_MAX);
    case PCU_T_BOOL: return v != 0;
    default: return 0;
    }
}

/* ---- elementwise with broadcasting ----------------------------------------------------- */

enum {
    /* unary float (class F: f32/f16/bf16 computed in float, f64 in double): the
     * rows of ir/ops_unary.def (p0, p1: their attributes), then pp.SiLU */
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) PCU_EW_##E,
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) PCU_EW_##E,
#define PP_EW_FORMULA(E, F) PCU_EW_##E,
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
    PCU_EW_SILU,
    PCU_EW_SCALE, /* v * p0 (Mean's division folded into a multiply is NOT used: p0 divides) */
    /* unary numeric */
    PCU_EW_NEG, PCU_EW_ABS, PCU_EW_NOT,
    PCU_EW_SIGN,   /* floats and integers */
    PCU_EW_SHRINK, /* p0: bias, p1: lambd; floats and integers */
    PCU_EW_ISNAN, PCU_EW_ISINF, /* floats -> bool; IsInf mode bit 1: detect -inf, bit 2: +inf */
    PCU_EW_BITNOT, /* integers */
    /* copy / convert: input type to output type (Cast, Identity); mode 8: f32 to f16 / bf16 with finite values
     * past its range to its largest finite (ppcc's pp_finite) */
    PCU_EW_CAST,
    /* binary numeric (output of the inputs' type) */
    PCU_EW_ADD, PCU_EW_SUB, PCU_EW_MUL, PCU_EW_DIV, PCU_EW_POW, PCU_EW_MOD, PCU_EW_FMOD,
    PCU_EW_PRELU, PCU_EW_MIN, PCU_EW_MAX,
    PCU_EW_BITAND, PCU_EW_BITOR, PCU_EW_BITXOR, /* integers */
    PCU_EW_SHL, PCU_EW_SHR,                     /* unsigned integers; by the width or more: 0 */
    /* comparisons and logic (bool output) */
    PCU_EW_EQUAL, PCU_EW_LESS, PCU_EW_GREATER, PCU_EW_LE, PCU_EW_GE, PCU_EW_AND, PCU_EW_OR,
    PCU_EW_XOR,
    /* three inputs */
    PCU_EW_WHERE, /* cond ? x1 : x2, any element size */
    PCU_EW_CLIP,  /* x0 clamped to [x1, x2]; mode bit 1: has lo, bit 2: has hi; bit 4: bounds in p0/p1 */
    PCU_EW_COUNT
};

/* y[i] = op(x0[.], x1[.], x2[.]) over the output's dims (merged where every
 * input behaves alike, at most PCU_MAXD), each input at its own element
 * strides (0 along broadcast dims). */
typedef struct pcu_ew {
    int32_t op, nin, rank, mode;
    int32_t tin, tout; /* element types of the inputs (x1/x2 of Where: tin) and output */
    int64_t n;         /* output elements */
    int64_t dim[PCU_MAXD];
    int64_t st[3][PCU_MAXD];
    float p0, p1;      /* attributes (alpha, beta, gamma, clip bounds, divisor) */
} pcu_ew;

/* Input q's element index for output element i. */
PCU_HD int64_t pcu_ew_src(const pcu_ew *k, int q, int64_t i) {
    int64_t off = 0;
    for (int d = k->rank - 1; d >= 0; d--) {
        const int64_t c = pcu_divmod(&i, k->dim[d]);
        off += c * k->st[q][d];
    }
    return off;
}

/* ---- Sin, Cos, Tan of a float, without local memory -------------------------------------

 * The device's sinf/cosf/tanf take local memory for their large-argument
 * reduction (an indexed array), which this build refuses; these reduce by
 * scalar code, evaluate in double and round once, so the result is the
 * correctly rounded value but for rare ties of double rounding (checked
 * against glibc's double sin/cos/tan over every exponent in test_kmath).
 *   |x| < 2^22: Cody-Waite, n = nearest integer to x * 2/pi, r = x - n*pi/2
 *     with pi/2 in three parts (24, 24 and 53 bits): n*P1 and n*P2 are
 *     exact in double (n < 2^22), so are the first two subtractions.
 *   |x| >= 2^22: Payne-Hanek. x = m * 2^e (m: 24 bits, e >= -1); of the bits
 *     of 2/pi, those of weight 2^-k for k < e-1 only add multiples of 4 to
 *     x * 2/pi (nothing to sin), so 96 bits from 2^-(e-1) on suffice: m times
 *     them is a 120-bit product S, and x * 2/pi = S * 2^-94 (mod 4): the
 *     quadrant and 64 bits of fraction, with an error under 2^-70.
 * Then sin and cos of r in [-pi/4, pi/4] by their Taylor series to r^17 and
 * r^18 (the next terms are under 1e-18). */

/* Word j (bits 32j-31 .. 32j of the fraction, most significant first) of
 * 2/pi, word 0 being zero: the table the reduction reads, as a switch so
 * that no array lives in a thread's frame. (Computed from pi by Machin's
 * formula in big integers; the first word is the well-known 0xa2f9836e.) */
PCU_HD uint32_t pcu_2opi_word(int j) {
    switch (j) {
    case 1: return 0xa2f9836eu;
    case 2: return 0x4e441529u;
    case 3: return 0xfc2757d1u;
    case 4: return 0xf534ddc0u;
    case 5: return 0xdb629599u;
    case 6: return 0x3c439041u;
    case 7: return 0xfe5163abu;
    case 8: return 0xdebbc561u;
    default: return 0;
    }
}

/* 32 bits of 2/pi from bit offset p of the table (word 0 included). */
PCU_HD uint32_t pcu_2opi_bits(int p) {
    const int w = p >> 5, sh = p & 31;
    const uint32_t a = pcu_2opi_word(w);
    return sh ? (a << sh) | (pcu_2opi_word(w + 1) >> (32 - sh)) : a;
}

/* |x| (finite) = n * pi/2 + r, r in about [-pi/4, pi/4]; returns r, sets *q = n mod 4. */
PCU_HD double pcu_trig_reduce(float ax, int *q) {
    if (ax < 4194304.0f) { /* 2^22 */
        const double x = ax, n = nearbyint(x * 0x1.45f306dc9c883p-1);
        const double P1 = 0x1.921fb4p0, P2 = 0x1.4442dp-24, P3 = 0x1.8469898cc517p-48; /* P1+P2+P3: pi/2 */
        *q = (int)((int64_t)n & 3);
        return ((x - n * P1) - n * P2) - n * P3;
    }
    pcu_fbits b;
    b.f = ax;
    const int e = (int)((b.u >> 23) & 255u) - 150; /* ax = m * 2^e, e >= -1 here */
    const uint64_t m = (b.u & 0x7fffffu) | 0x800000u;
    const int p = e + 30; /* the offset of bit 2^-(e-1) in the table with its zero word */
    const uint64_t c0 = pcu_2opi_bits(p), c1 = pcu_2opi_bits(p + 32), c2 = pcu_2opi_bits(p + 64);
    const uint64_t lo = m * c2, mid = m * c1, hi = m * c0;
    const uint64_t low = (mid << 32) + lo;
    const uint64_t high = hi + (mid >> 32) + (low < lo ? 1u : 0u);
    /* m * 2^e * C * 2^-(e-1+95) = S * 2^-94: the integer part is S >> 94 */
    const uint64_t f = (high << 34) | (low >> 30); /* the fraction, 64 bits */
    *q = (int)(((high >> 30) + (f >> 63)) & 3u); /* a fraction of a half or more: the next quadrant */
    return (double)(int64_t)f * 0x1p-64 * 0x1.921fb54442d18p0; /* f * 2^-64 * pi/2 */
}

PCU_HD double pcu_sin_poly(double r) {
    const double z = r * r;
    return r * (1.0 + z * (-1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880 + z * (-1.0 / 39916800 +
           z * (1.0 / 6227020800.0 + z * (-1.0 / 1307674368000.0 + z * (1.0 / 355687428096000.0)))))))));
}

PCU_HD double pcu_cos_poly(double r) {
    const double z = r * r;
    return 1.0 + z * (-1.0 / 2 + z * (1.0 / 24 + z * (-1.0 / 720 + z * (1.0 / 40320 + z * (-1.0 / 3628800 +
           z * (1.0 / 479001600 + z * (-1.0 / 87178291200.0 + z * (1.0 / 20922789888000.0 +
           z * (-1.0 / 6402373705728000.0)))))))));
}

/* Sin, Cos or Tan of x in double (the caller rounds to its type). */
PCU_HD double pcu_trig(int op, float x) {
    if (x != x || x - x != 0.0f) return (double)(x - x); /* NaN, or inf - inf: NaN */
    if (x == 0.0f) return op == PCU_EW_COS ? 1.0 : (double)x; /* keeps -0 */
    int q;
    const float ax = fabsf(x);
    const double r = pcu_trig_reduce(ax, &q), s = pcu_sin_poly(r), c = pcu_cos_poly(r);
    const double neg = x < 0 ? -1.0 : 1.0;
    if (op == PCU_EW_COS) return q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
    if (op == PCU_EW_SIN) return neg * (q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c);
    return neg * ((q & 1) ? -c / s : s / c);
}

/* The formulas of ir/ops_unary.def as cases of a switch, in float (F) or
 * double (D): P0, P1, K and EW as that file says. Sin, Cos and Tan of a float
 * by pcu_trig (the device's need local memory); of a double they never reach
 * a kernel (f64 Sin/Cos/Tan run on the host: plan_elementwise), so the D
 * cases return v as the default does. */
#define PCU_UNARY_CASE(E, F) \
    case PCU_EW_##E: return (F);
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) PCU_UNARY_CASE(E, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) PCU_UNARY_CASE(E, F)
#define PP_EW_FORMULA(E, F) PCU_UNARY_CASE(E, F)
#define P0 p0
#define P1 p1
#define pcu_f_expm1 expm1f
#define pcu_f_exp expf
#define pcu_f_log1p log1pf
#define pcu_f_log logf
#define pcu_f_tanh tanhf
#define pcu_f_erf erff
#define pcu_f_sqrt sqrtf
#define pcu_f_floor floorf
#define pcu_f_ceil ceilf
#define pcu_f_nearbyint nearbyintf
#define pcu_f_sin(x) ((float)pcu_trig(PCU_EW_SIN, x))
#define pcu_f_cos(x) ((float)pcu_trig(PCU_EW_COS, x))
#define pcu_f_tan(x) ((float)pcu_trig(PCU_EW_TAN, x))
#define pcu_f_asin asinf
#define pcu_f_acos acosf
#define pcu_f_atan atanf
#define pcu_f_sinh sinhf
#define pcu_f_cosh coshf
#define pcu_f_asinh asinhf
#define pcu_f_acosh acoshf
#define pcu_f_atanh atanhf
#define pcu_f_fabs fabsf
#define pcu_d_sin(x) (x)
#define pcu_d_cos(x) (x)
#define pcu_d_tan(x) (x)
#define pcu_d_expm1 expm1
#define pcu_d_exp exp
#define pcu_d_log1p log1p
#define pcu_d_log log
#define pcu_d_tanh tanh
#define pcu_d_erf erf
#define pcu_d_sqrt sqrt
#define pcu_d_floor floor
#define pcu_d_ceil ceil
#define pcu_d_nearbyint nearbyint
#define pcu_d_asin asin
#define pcu_d_acos acos
#define pcu_d_atan atan
#define pcu_d_sinh sinh
#define pcu_d_cosh cosh
#define pcu_d_asinh asinh
#define pcu_d_acosh acosh
#define pcu_d_atanh atanh
#define pcu_d_fabs fabs

PCU_HD float pcu_unary_f(int op, float v, float p0, float p1) {
#define K(x) ((float)(x))
#define EW(f) pcu_f_##f
    switch (op) {
#include "../../ir/ops_unary.def"
    case PCU_EW_SILU: return v * (1.0f / (1.0f + expf(-v)));
    case PCU_EW_SCALE: return v / p0;
    case PCU_EW_NEG: return -v;
    case PCU_EW_ABS: return fabsf(v);
    default: return v;
    }
#undef EW
#undef K
}

PCU_HD double pcu_unary_d(int op, double v, double p0, double p1) {
#define K(x) ((double)(x))
#define EW(f) pcu_d_##f
    switch (op) {
#include "../../ir/ops_unary.def"
    case PCU_EW_SILU: return v * (1.0 / (1.0 + exp(-v)));
    case PCU_EW_SCALE: return v / p0;
    case PCU_EW_NEG: return -v;
    case PCU_EW_ABS: return fabs(v);
    default: return v;
    }
#undef EW
#undef K
}

/* ---- pp.UnaryGrad: dX = dY f'(X, Y), one thread per element ----------------------------- */

/* The derivatives of ir/ops_unary.def (PP_UNARY_GRAD) in double, as the
 * reference kernel computes them; op is the forward's PCU_EW_ kind. Sin and
 * Cos never reach it (their double forms are not here: the planner leaves
 * their gradients to the host). */
PCU_HD double pcu_unary_grad_d(int op, double v, double w, double p0, double p1) {
#define K(x) ((double)(x))
#define EW(f) pcu_d_##f
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D) \
    case PCU_EW_##E: return (D);
    (void)v, (void)w, (void)p0, (void)p1;
    switch (op) {
#include "../../ir/ops_unary.def"
    default: return 0.0;
    }
#undef PP_UNARY_GRAD
#undef EW
#undef K
}

typedef struct pcu_ugrad {
    int32_t op; /* the forward op's PCU_EW_ kind */
    int64_t n;
    float p0, p1;
} pcu_ugrad;

PCU_HD void pcu_ugrad_at(const pcu_ugrad *k, float *dx, const float *x, const float *y, const float *dy, int64_t i) {
    if (k->op == PCU_EW_RELU) { /* the reference's bits: dY times 1 or 0 */
        dx[i] = x[i] > 0 ? dy[i] : dy[i] * 0.0f;
        return;
    }
    dx[i] = (float)((double)dy[i] * pcu_unary_grad_d(k->op, x[i], y[i], k->p0, k->p1));
}
#undef P0
#undef P1
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
#undef PCU_UNARY_CASE

/* Binary arithmetic on floats (computed in double for f64, else float). */
#define PCU_BIN_FLOAT(T, FMOD, POW)                                                   \
    switch (op) {                                                                     \
    case PCU_EW_ADD: return a + b;                                                    \
    case PCU_EW_SUB: return a - b;                                                    \
    case PCU_EW_MUL: return a * b;                                                    \
    case PCU_EW_DIV: return a / b;                                                    \
    case PCU_EW_POW: return (T)pow((double)a, (double)b);                             \
    case PCU_EW_FMOD: return FMOD(a, b);                                              \
    case PCU_EW_PRELU: return a < 0 ? b * a : a;                                      \
    case PCU_EW_MIN: return (a != a) || a < b ? a : b;                                \
    case PCU_EW_MAX: return (a != a) || a > b ? a : b;                                \
    default: return a;                                                                \
    }
PCU_HD float pcu_binary_f(int op, float a, float b) { PCU_BIN_FLOAT(float, fmodf, pow) }
PCU_HD double pcu_binary_d(int op, double a, double b) { PCU_BIN_FLOAT(double, fmod, pow) }
#undef PCU_BIN_FLOAT

/* Binary arithmetic on signed integers (wrapping: computed on the bits). */
PCU_HD int64_t pcu_binary_i(int op, int64_t a, int64_t b) {
    const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case PCU_EW_ADD: return (int64_t)(ua + ub);
    case PCU_EW_SUB: return (int64_t)(ua - ub);
    case PCU_EW_MUL: return (int64_t)(ua * ub);
    case PCU_EW_DIV: return b == 0 ? 0 : b == -1 ? (int64_t)(0 - ua) : a / b;
    case PCU_EW_FMOD: return b == 0 || b == -1 ? 0 : a % b;
    case PCU_EW_MOD: {
        const int64_t r = b == 0 || b == -1 ? 0 : a % b;
        return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case PCU_EW_POW:
        return b >= 0 ? (int64_t)pp_ipow(ua, b) : a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    case PCU_EW_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
    case PCU_EW_MIN: return a < b ? a : b;
    case PCU_EW_MAX: return a > b ? a : b;
    case PCU_EW_BITAND: return (int64_t)(ua & ub);
    case PCU_EW_BITOR: return (int64_t)(ua | ub);
    case PCU_EW_BITXOR: return (int64_t)(ua ^ ub);
    default: return a;
    }
}

PCU_HD uint64_t pcu_binary_u(int op, uint64_t a, uint64_t b) {
    switch (op) {
    case PCU_EW_ADD: return a + b;
    case PCU_EW_SUB: return a - b;
    case PCU_EW_MUL: return a * b;
    case PCU_EW_DIV: return b == 0 ? 0 : a / b;
    case PCU_EW_MOD: case PCU_EW_FMOD: return b == 0 ? 0 : a % b;
    case PCU_EW_POW: return pp_ipow(a, (int64_t)b);
    case PCU_EW_MIN: return a < b ? a : b;
    case PCU_EW_MAX: return a > b ? a : b;
    case PCU_EW_BITAND: return a & b;
    case PCU_EW_BITOR: return a | b;
    case PCU_EW_BITXOR: return a ^ b;
    /* the store keeps the type's low bits: a shift by its width or more
     * (below 64) leaves none of a's */
    case PCU_EW_SHL: return b >= 64 ? 0 : a << b;
    case PCU_EW_SHR: return b >= 64 ? 0 : a >> b;
    default: return a;
    }
}

PCU_HD int pcu_compare(int op, double a, double b) {
    switch (op) {
    case PCU_EW_EQUAL: return a == b;
    case PCU_EW_LESS: return a < b;
    case PCU_EW_GREATER: return a > b;
    case PCU_EW_LE: return a <= b;
    case PCU_EW_GE: return a >= b;
    default: return 0;
    }
}

PCU_HD int pcu_compare_i(int op, int64_t a, int64_t b, int is_unsigned) {
    if (is_unsigned) {
        const uint64_t x = (uint64_t)a, y = (uint64_t)b;
        return op == PCU_EW_EQUAL ? x == y : op == PCU_EW_LESS ? x < y : op == PCU_EW_GREATER ? x > y
                                                                      : op == PCU_EW_LE ? x <= y : x >= y;
    }
    return op == PCU_EW_EQUAL ? a == b : op == PCU_EW_LESS ? a < b : op == PCU_EW_GREATER ? a > b
                                                              : op == PCU_EW_LE ? a <= b : a >= b;
}

/* Convert element s of x (type ts) into element i of y (type td), as the
 * reference's Cast between the whole-byte types: int -> f32 in one
 * rounding, float -> int truncating and saturating. float16/bfloat16
 * targets take f32 or 16-bit float sources only (plan_cuda.c). */
PCU_HD void pcu_cast_elem(void *y, int td, int64_t i, const void *x, int ts, int64_t s) {
    if (pcu_is_float(ts)) {
        if (pcu_is_float(td)) {
            if (td == PCU_T_F64) ((double *)y)[i] = pcu_ldd(x, ts, s);
            else pcu_stf(y, td, i, ts == PCU_T_F64 ? (float)((const double *)x)[s] : pcu_ldf(x, ts, s));
        } else {
            pcu_sti(y, td, i, pcu_f2int(pcu_ldd(x, ts, s), td));
        }
        return;
    }
    const int64_t v = pcu_ldi(x, ts, s);
    if (!pcu_is_float(td)) {
        pcu_sti(y, td, i, td == PCU_T_BOOL ? v != 0 : v);
        return;
    }
    const int uns = ts == PCU_T_U64;
    switch (td) {
    case PCU_T_F32: ((float *)y)[i] = uns ? (float)(uint64_t)v : (float)v; break;
    case PCU_T_F64: ((double *)y)[i] = uns ? (double)(uint64_t)v : (double)v; break;
    default: pcu_stf(y, td, i, uns ? (float)(uint64_t)v : (float)v); break;
    }
}

/* Clip of element i (its source a): bounds from the attributes (mode 4) or
 * the inputs x1, x2 (mode 1: a min, 2: a max). */
PCU_HD void pcu_clip_at(const pcu_ew *k, void *y, const void *x0, const void *x1, const void *x2, int64_t i,
                        int64_t a) {
    const int ti = k->tin, to = k->tout;
    const int has_lo = k->mode & 1, has_hi = k->mode & 2, attr = k->mode & 4;
    if (pcu_is_float(ti)) {
        double v = pcu_ldd(x0, ti, a);
        /* a missing bound is ONNX's default, the type's range, as the
         * reference (ref_math.c) takes it for f32 and f64: Clip(inf) with
         * no max is FLT_MAX */
        const double range = ti == PCU_T_F32 ? 3.4028234663852886e38 : ti == PCU_T_F64 ? 1.7976931348623157e308 : INFINITY;
        if (has_lo || range != INFINITY) {
            const double lo = !has_lo ? -range : attr ? (double)k->p0 : pcu_ldd(x1, ti, pcu_ew_src(k, 1, i));
            if (v < lo) v = lo;
        }
        if (has_hi || range != INFINITY) {
            const double hi = !has_hi ? range : attr ? (double)k->p1 : pcu_ldd(x2, ti, pcu_ew_src(k, 2, i));
            if (v > hi) v = hi;
        }
        if (to == PCU_T_F64) ((double *)y)[i] = v;
        else pcu_stf(y, to, i, (float)v);
    } else {
        const int uns = !pcu_is_signed(ti);
        int64_t v = pcu_ldi(x0, ti, a);
        if (has_lo) {
            const int64_t lo = attr ? pcu_f2int(k->p0, ti) : pcu_ldi(x1, ti, pcu_ew_src(k, 1, i));
            if (uns ? (uint64_t)v < (uint64_t)lo : v < lo) v = lo;
        }
        if (has_hi) {
            const int64_t hi = attr ? pcu_f2int(k->p1, ti) : pcu_ldi(x2, ti, pcu_ew_src(k, 2, i));
            if (uns ? (uint64_t)v > (uint64_t)hi : v > hi) v = hi;
        }
        pcu_sti(y, to, i, v);
    }
}

PCU_HD void pcu_ew_at(const pcu_ew *k, void *y, const void *x0, const void *x1, const void *x2, int64_t i) {
    const int op = k->op, ti = k->tin, to = k->tout;
    const int64_t a = pcu_ew_src(k, 0, i);
    if (op == PCU_EW_CAST) {
        pcu_cast_elem(y, to, i, x0, ti, a);
        if (k->mode & 8) { /* f32 to half, finite values past its range to its largest finite (pp_finite) */
            const float v = ((const float *)x0)[a];
            const uint16_t inf = to == PCU_T_F16 ? 0x7c00u : 0x7f80u, big = to == PCU_T_F16 ? 0x7bffu : 0x7f7fu;
            uint16_t *h = (uint16_t *)y;
            if ((h[i] & 0x7fffu) == inf && v == v && v != INFINITY && v != -INFINITY)
                h[i] = (uint16_t)((h[i] & 0x8000u) | big);
        }
        return;
    }
    if (op == PCU_EW_WHERE) {
        const int64_t b = pcu_ew_src(k, 1, i), c = pcu_ew_src(k, 2, i);
        const int on = ((const uint8_t *)x0)[a] != 0;
        const void *src = on ? x1 : x2;
        const int64_t at = on ? b : c;
        switch (pcu_tsize(to)) {
        case 1: ((uint8_t *)y)[i] = ((const uint8_t *)src)[at]; break;
        case 2: ((uint16_t *)y)[i] = ((const uint16_t *)src)[at]; break;
        case 4: ((uint32_t *)y)[i] = ((const uint32_t *)src)[at]; break;
        default: ((uint64_t *)y)[i] = ((const uint64_t *)src)[at]; break;
        }
        return;
    }
    if (op == PCU_EW_CLIP) {
        pcu_clip_at(k, y, x0, x1, x2, i, a);
        return;
    }
    if (op == PCU_EW_NOT) {
        ((uint8_t *)y)[i] = ((const uint8_t *)x0)[a] == 0;
        return;
    }
    if (op >= PCU_EW_AND) { /* And, Or, Xor on bools */
        const int p = ((const uint8_t *)x0)[a] != 0, q = ((const uint8_t *)x1)[pcu_ew_src(k, 1, i)] != 0;
        ((uint8_t *)y)[i] = (uint8_t)(op == PCU_EW_AND ? (p & q) : op == PCU_EW_OR ? (p | q) : (p ^ q));
        return;
    }
    if (op >= PCU_EW_EQUAL) { /* comparisons */
        const int64_t b = pcu_ew_src(k, 1, i);
        int r;
        if (pcu_is_float(ti)) r = pcu_compare(op, pcu_ldd(x0, ti, a), pcu_ldd(x1, ti, b));
        else if (ti == PCU_T_BOOL) r = pcu_compare_i(op, pcu_ldi(x0, ti, a) != 0, pcu_ldi(x1, ti, b) != 0, 0);
        else r = pcu_compare_i(op, pcu_ldi(x0, ti, a), pcu_ldi(x1, ti, b), !pcu_is_signed(ti));
        ((uint8_t *)y)[i] = (uint8_t)r;
        return;
    }
    if (op >= PCU_EW_ADD) { /* binary arithmetic */
        const int64_t b = pcu_ew_src(k, 1, i);
        if (ti == PCU_T_F64) ((double *)y)[i] = pcu_binary_d(op, pcu_ldd(x0, ti, a), pcu_ldd(x1, ti, b));
        else if (pcu_is_float(ti)) pcu_stf(y, to, i, pcu_binary_f(op, pcu_ldf(x0, ti, a), pcu_ldf(x1, ti, b)));
        else if (pcu_is_signed(ti)) pcu_sti(y, to, i, pcu_binary_i(op, pcu_ldi(x0, ti, a), pcu_ldi(x1, ti, b)));
        else pcu_sti(y, to, i, (int64_t)pcu_binary_u(op, (uint64_t)pcu_ldi(x0, ti, a), (uint64_t)pcu_ldi(x1, ti, b)));
        return;
    }
    /* unary */
    if (op == PCU_EW_ISNAN || op == PCU_EW_ISINF) {
        const double v = pcu_ldd(x0, ti, a);
        const int inf = v - v != 0.0 && v == v;
        ((uint8_t *)y)[i] = (uint8_t)(op == PCU_EW_ISNAN ? v != v : inf && (v < 0 ? (k->mode & 1) : (k->mode & 2)) != 0);
        return;
    }
    if (op == PCU_EW_SIGN || op == PCU_EW_SHRINK || op == PCU_EW_BITNOT) {
        if (pcu_is_float(ti)) { /* Sign: NaN stays NaN, -0 stays -0; Shrink in double, rounded once */
            const double v = pcu_ldd(x0, ti, a);
            double r;
            if (op == PCU_EW_SIGN) r = v > 0 ? 1.0 : v < 0 ? -1.0 : v;
            else if (ti == PCU_T_F64) r = v < -(double)k->p1 ? v + k->p0 : v > (double)k->p1 ? v - k->p0 : 0.0;
            else r = (float)v < -k->p1 ? (double)(float)((double)v + k->p0)
                     : (float)v > k->p1 ? (double)(float)((double)v - k->p0) : 0.0;
            if (to == PCU_T_F64) ((double *)y)[i] = r;
            else pcu_stf(y, to, i, (float)r);
            return;
        }
        const int sgn = pcu_is_signed(ti);
        const int64_t v = pcu_ldi(x0, ti, a);
        int64_t r;
        if (op == PCU_EW_BITNOT) {
            r = (int64_t)~(uint64_t)v;
        } else if (op == PCU_EW_SIGN) {
            r = sgn ? (v > 0) - (v < 0) : v != 0;
        } else { /* Shrink on integers, as the reference: compare as float, shift in double, saturate */
            const double dv = sgn ? (double)v : (double)(uint64_t)v;
            const float fv = sgn ? (float)v : (float)(uint64_t)v;
            if (fv < -k->p1) r = sgn ? pcu_f2s(dv + k->p0, INT64_MIN, INT64_MAX) : (int64_t)pcu_f2u(dv + k->p0, UINT64_MAX);
            else if (fv > k->p1) r = sgn ? pcu_f2s(dv - k->p0, INT64_MIN, INT64_MAX) : (int64_t)pcu_f2u(dv - k->p0, UINT64_MAX);
            else r = 0;
        }
        pcu_sti(y, to, i, r);
        return;
    }
    if (ti == PCU_T_F64) {
        ((double *)y)[i] = pcu_unary_d(op, pcu_ldd(x0, ti, a), k->p0, k->p1);
    } else if (pcu_is_float(ti)) {
        pcu_stf(y, to, i, pcu_unary_f(op, pcu_ldf(x0, ti, a), k->p0, k->p1));
    } else { /* Neg, Abs on integers */
        const int64_t v = pcu_ldi(x0, ti, a);
        const int64_t r = op == PCU_EW_NEG ? (int64_t)(0 - (uint64_t)v)
                          : (op == PCU_EW_ABS && pcu_is_signed(ti) && v < 0) ? (int64_t)(0 - (uint64_t)v) : v;
        pcu_sti(y, to, i, r);
    }
}

/* ---- elementwise, 16 bytes a thread: four f32 or eight f16/bf16 ------------------------- */

/* pcu_ew's float arithmetic 16 bytes of output at a time (kind EWV,
 * --cuda-wide-elementwise on): thread i writes elements 4i .. 4i+3 of f32,
 * or 8i .. 8i+7 of f16 or bf16 (a half plan's, ppcc --precision; each
 * lifted to f32, computed, rounded back, as pcu_ew_at does). The planner
 * (plan_cuda.c, ew_wide) takes it where input and output have the one type,
 * the op is one pcu_ewv_op takes, the merged innermost dim is a multiple of
 * the width and every input walks it with stride 1 or 0 (a broadcast one),
 * and every operand starts on 16 bytes: then the elements share their outer
 * coordinates (one odometer for all), an input's are one 16-byte load or one
 * value repeated, and the output's one 16-byte store. Each element is
 * pcu_unary_f or pcu_binary_f of the floats pcu_ew_at would read, rounded
 * as pcu_stf rounds: the same bits as kind EW. */
typedef pcu_ew pcu_ewv;

/* Whether EWV computes op over nin inputs: the unary float ops (ops_unary.def,
 * SiLU, the divisor, Neg, Abs) and the binary arithmetic but Mod. */
PCU_HD int pcu_ewv_op(int op, int nin) {
    if (nin == 1) return op >= 0 && op <= PCU_EW_ABS && op != PCU_EW_NOT;
    return nin == 2 && op >= PCU_EW_ADD && op <= PCU_EW_MAX && op != PCU_EW_MOD;
}

/* Four floats by name, not an array: an array indexed in a loop over a call
 * as large as pcu_unary_f went to local memory under ptxas. */
typedef struct pcu_f4 {
    float a, b, c, d;
} pcu_f4;

/* Four words by name, as pcu_f4. */
typedef struct pcu_u4 {
    uint32_t a, b, c, d;
} pcu_u4;

/* Four floats from x at element i: consecutive (unit stride) or one repeated (stride 0). */
PCU_HD pcu_f4 pcu_ld4(const float *x, int64_t i, int64_t stride) {
    pcu_f4 r;
    if (stride) {
#ifdef __CUDACC__
        const float4 q = *(const float4 *)(x + i);
        r.a = q.x, r.b = q.y, r.c = q.z, r.d = q.w;
#else
        r.a = x[i], r.b = x[i + 1], r.c = x[i + 2], r.d = x[i + 3];
#endif
    } else {
        r.a = r.b = r.c = r.d = x[i];
    }
    return r;
}

PCU_HD float pcu_ewv_one(const pcu_ewv *k, float a, float b) {
    return k->nin == 1 ? pcu_unary_f(k->op, a, k->p0, k->p1) : pcu_binary_f(k->op, a, b);
}

/* Eight half values (two to a word, the lower element in the low bits) from
 * x at element i: consecutive (unit stride) or one repeated (stride 0). */
PCU_HD pcu_u4 pcu_ld8h(const uint16_t *x, int64_t i, int64_t stride) {
    pcu_u4 r;
    if (stride) {
#ifdef __CUDACC__
        const uint4 q = *(const uint4 *)(x + i);
        r.a = q.x, r.b = q.y, r.c = q.z, r.d = q.w;
#else
        r.a = x[i] | (uint32_t)x[i + 1] << 16, r.b = x[i + 2] | (uint32_t)x[i + 3] << 16;
        r.c = x[i + 4] | (uint32_t)x[i + 5] << 16, r.d = x[i + 6] | (uint32_t)x[i + 7] << 16;
#endif
    } else {
        r.a = r.b = r.c = r.d = x[i] | (uint32_t)x[i] << 16;
    }
    return r;
}

PCU_HD float pcu_hlift(int t, uint32_t h) { return t == PCU_T_F16 ? pcu_h2f((uint16_t)h) : pcu_bf2f((uint16_t)h); }
PCU_HD uint32_t pcu_hround(int t, float f) { return t == PCU_T_F16 ? pcu_f2h(f) : pcu_f2bf(f); }

/* The two elements of words u (and v), each computed in f32 and rounded. */
PCU_HD uint32_t pcu_ewv_two(const pcu_ewv *k, uint32_t u, uint32_t v) {
    const int t = k->tout;
    const uint32_t lo = pcu_hround(t, pcu_ewv_one(k, pcu_hlift(t, u & 0xffffu), pcu_hlift(t, v & 0xffffu)));
    const uint32_t hi = pcu_hround(t, pcu_ewv_one(k, pcu_hlift(t, u >> 16), pcu_hlift(t, v >> 16)));
    return lo | hi << 16;
}

PCU_HD void pcu_ewv_half(const pcu_ewv *k, uint16_t *y, const uint16_t *x0, const uint16_t *x1, int64_t i) {
    const int64_t e0 = 8 * i;
    const int last = k->rank - 1;
    const pcu_u4 u = pcu_ld8h(x0, pcu_ew_src(k, 0, e0), k->st[0][last]);
    const pcu_u4 v = k->nin > 1 ? pcu_ld8h(x1, pcu_ew_src(k, 1, e0), k->st[1][last]) : u;
    const pcu_u4 r = {pcu_ewv_two(k, u.a, v.a), pcu_ewv_two(k, u.b, v.b), pcu_ewv_two(k, u.c, v.c),
                      pcu_ewv_two(k, u.d, v.d)};
#ifdef __CUDACC__
    *(uint4 *)(y + e0) = make_uint4(r.a, r.b, r.c, r.d);
#else
    const uint32_t w[4] = {r.a, r.b, r.c, r.d};
    for (int q = 0; q < 4; q++) y[e0 + 2 * q] = (uint16_t)(w[q] & 0xffffu), y[e0 + 2 * q + 1] = (uint16_t)(w[q] >> 16);
#endif
}

/* Thread i of kind EWV: four f32 elements, or eight f16/bf16 ones. */
PCU_HD void pcu_ewv_at(const pcu_ewv *k, void *yv, const void *x0v, const void *x1v, int64_t i) {
    if (k->tout != PCU_T_F32) {
        pcu_ewv_half(k, (uint16_t *)yv, (const uint16_t *)x0v, (const uint16_t *)x1v, i);
        return;
    }
    float *y = (float *)yv;
    const float *x0 = (const float *)x0v, *x1 = (const float *)x1v;
    const int64_t e0 = 4 * i;
    const int last = k->rank - 1;
    const pcu_f4 u = pcu_ld4(x0, pcu_ew_src(k, 0, e0), k->st[0][last]);
    const pcu_f4 v = k->nin > 1 ? pcu_ld4(x1, pcu_ew_src(k, 1, e0), k->st[1][last]) : u;
    const pcu_f4 r = {pcu_ewv_one(k, u.a, v.a), pcu_ewv_one(k, u.b, v.b), pcu_ewv_one(k, u.c, v.c),
                      pcu_ewv_one(k, u.d, v.d)};
#ifdef __CUDACC__
    *(float4 *)(y + e0) = make_float4(r.a, r.b, r.c, r.d);
#else
    y[e0] = r.a, y[e0 + 1] = r.b, y[e0 + 2] = r.c, y[e0 + 3] = r.d;
#endif
}

/* ---- strided copies: Transpose, Slice, Expand, Tile, Pad, Concat, Split, Gather --------- */

/* For each output element (odometer over dim[], row-major, the output at
 * dst_off + its index along dst strides), the source element at src_off + sum
 * of idx * src strides. Tile: a dim with mod[d] > 0 takes idx % mod[d]. Pad:
 * idx - lo[d] outside [0, src_dim[d]) writes the constant `value` (as f64
 * converted to the element type). Gather (axis): the output's dim `gdim`
 * indexes the indices tensor (element gidx_off + idx * gidx_st) whose value
 * (negative counts from the end, range checked against glen) is the
 * source's position along that dim (stride gsrc_st). */
typedef struct pcu_perm {
    int32_t rank, esize, pad, gdim; /* pad: 0 none, 1 constant, 2 reflect, 3 edge, 4 wrap; gdim < 0: no gather */
    int32_t gidx_t;                 /* the indices' element type */
    int64_t n;
    int64_t dim[PCU_MAXD], sst[PCU_MAXD], dst_st[PCU_MAXD], mod[PCU_MAXD], lo[PCU_MAXD],
        sdim[PCU_MAXD];
    int64_t src_off, dst_off; /* elements */
    int64_t gidx_st, glen, gsrc_st;
    double value;
} pcu_perm;

/* 16 bytes, the unit of a widened strided copy (plan_cuda.c's perm_widen):
 * one 128-bit load and store on the GPU (16-byte aligned there). */
#ifdef __CUDACC__
typedef uint4 pcu_u128;
#else
typedef struct { uint64_t lo, hi; } pcu_u128;
#endif

/* Copies one element of esize bytes (1, 2, 4, 8 or 16). */
PCU_HD void pcu_copy_elem(void *y, int64_t i, const void *x, int64_t s, int esize) {
    switch (esize) {
    case 1: ((uint8_t *)y)[i] = ((const uint8_t *)x)[s]; break;
    case 2: ((uint16_t *)y)[i] = ((const uint16_t *)x)[s]; break;
    case 4: ((uint32_t *)y)[i] = ((const uint32_t *)x)[s]; break;
    case 8: ((uint64_t *)y)[i] = ((const uint64_t *)x)[s]; break;
    default: ((pcu_u128 *)y)[i] = ((const pcu_u128 *)x)[s]; break;
    }
}

/* Thread i; err (may be NULL) is set to 1 when a gathered index is out of
 * range (the element is then written as zero). */
PCU_HD void pcu_perm_at(const pcu_perm *k, void *y, const void *x, const void *gidx, int *err, int64_t i,
                        int ptype) {
    int64_t s = k->src_off, o = k->dst_off, r = i;
    int outside = 0;
    for (int d = k->rank - 1; d >= 0; d--) {
        int64_t c = pcu_divmod(&r, k->dim[d]);
        o += c * k->dst_st[d];
        if (d == k->gdim) {
            int64_t g = pcu_ldi(gidx, k->gidx_t, c * k->gidx_st);
            if (g < 0) g += k->glen;
            if (g < 0 || g >= k->glen) {
                outside = 2;
                g = 0;
            }
            s += g * k->gsrc_st;
            continue;
        }
        if (k->mod[d] > 0) c %= k->mod[d];
        if (k->pad) { /* 1 constant, 2 reflect, 3 edge, 4 wrap (as the reference's pad_src) */
            c -= k->lo[d];
            const int64_t n = k->sdim[d];
            if (c < 0 || c >= n) {
                if (k->pad == 1) outside = outside ? outside : 1;
                else if (k->pad == 3) c = c < 0 ? 0 : n - 1;
                else if (k->pad == 4) c = ((c % n) + n) % n;
                else if (n == 1) c = 0;
                else {
                    const int64_t p = 2 * (n - 1), q = ((c % p) + p) % p;
                    c = q < n ? q : p - q;
                }
            }
        }
        s += c * k->sst[d];
    }
    if (outside == 2) { /* a bad gather index: the element (of any width) all zero bits, which is 0 in every type */
        if (err) *err = 1;
        switch (k->esize) {
        case 1: ((uint8_t *)y)[o] = 0; break;
        case 2: ((uint16_t *)y)[o] = 0; break;
        case 4: ((uint32_t *)y)[o] = 0; break;
        case 8: ((uint64_t *)y)[o] = 0; break;
        default: ((uint64_t *)y)[2 * o] = 0, ((uint64_t *)y)[2 * o + 1] = 0; break;
        }
        return;
    }
    if (outside) {
        /* Pad's constant (a widened copy has no pad) */
        const double v = k->value;
        switch (ptype) {
        case PCU_T_F32: case PCU_T_F16: case PCU_T_BF16: pcu_stf(y, ptype, o, (float)v); break;
        case PCU_T_F64: ((double *)y)[o] = v; break;
        default: pcu_sti(y, ptype, o, pcu_f2int(v, ptype)); break;
        }
        return;
    }
    pcu_copy_elem(y, o, x, s, k->esize);
}

/* ---- reductions, global pools, ArgMax/ArgMin ------------------------------------------- */

enum {
    PCU_RED_SUM, PCU_RED_MEAN, PCU_RED_MAX, PCU_RED_MIN, PCU_RED_PROD, PCU_RED_L1, PCU_RED_L2,
    PCU_RED_SUMSQ, PCU_RED_LOGSUM, PCU_RED_LOGSUMEXP, PCU_RED_ARGMAX, PCU_RED_ARGMIN,
};

/* Output element i (odometer over the kept dims kd[] with input strides ks[])
 * reduces the input over the reduced dims rd[] (strides rs[]) in row-major
 * order, accumulating in double; f32 input and output (ArgMax/ArgMin: int64
 * output, the first extreme, or the last with `last`). */
typedef struct pcu_red {
    int32_t op, nk, nr, last;
    int32_t t, pad_; /* x's and a float y's type (pcu_rhalf: a half plan's global pools and reductions) */
    int64_t n_out, n_red;
    int64_t kd[PCU_MAXD], ks[PCU_MAXD], rd[PCU_MAXD], rs[PCU_MAXD];
} pcu_red;

/* The input offset of reduced element j (row-major over rd[]) of the output at base. */
PCU_HD int64_t pcu_red_off(const pcu_red *k, int64_t base, int64_t j) {
    for (int d = k->nr - 1; d >= 0; d--) base += pcu_divmod(&j, k->rd[d]) * k->rs[d];
    return base;
}

PCU_HD void pcu_red_at(const pcu_red *k, void *y, const void *x, int64_t i) {
    int64_t base = 0, r = i;
    for (int d = k->nk - 1; d >= 0; d--) {
        base += pcu_divmod(&r, k->kd[d]) * k->ks[d];
    }
    const int op = k->op;
    double acc = op == PCU_RED_PROD ? 1.0 : op == PCU_RED_MAX ? -INFINITY : op == PCU_RED_MIN ? INFINITY : 0.0;
    double m = -INFINITY; /* LogSumExp's max */
    if (op == PCU_RED_LOGSUMEXP)
        for (int64_t j = 0; j < k->n_red; j++) {
            const double v = pcu_rld(x, k->t, pcu_red_off(k, base, j));
            if (v > m) m = v;
        }
    if (op == PCU_RED_LOGSUMEXP && (m == -INFINITY || m == INFINITY)) m = 0;
    int64_t best = 0;
    float bv = 0;
    for (int64_t j = 0; j < k->n_red; j++) {
        const float vf = pcu_rld(x, k->t, pcu_red_off(k, base, j));
        const double v = vf;
        switch (op) {
        case PCU_RED_SUM: case PCU_RED_MEAN: case PCU_RED_LOGSUM: acc += v; break;
        /* ReduceMax/Min and ArgMax/Min skip NaN, as the reference kernels do
         * (docs/design-notes.md): a number replaces a NaN, a NaN replaces
         * nothing but the first value; a row of only NaN gives NaN (index 0) */
        case PCU_RED_MAX: if (j == 0 || v > acc || (acc != acc && v == v)) acc = v; break;
        case PCU_RED_MIN: if (j == 0 || v < acc || (acc != acc && v == v)) acc = v; break;
        case PCU_RED_PROD: acc *= v; break;
        case PCU_RED_L1: acc += fabs(v); break;
        case PCU_RED_L2: case PCU_RED_SUMSQ: acc += v * v; break;
        case PCU_RED_LOGSUMEXP: acc += exp(v - m); break;
        case PCU_RED_ARGMAX: case PCU_RED_ARGMIN: {
            const int better = j == 0 || (bv != bv && vf == vf) ||
                               (op == PCU_RED_ARGMAX ? (vf > bv || (k->last && vf == bv))
                                                     : (vf < bv || (k->last && vf == bv)));
            if (better) {
                best = j;
                bv = vf;
            }
            break;
        }
        default: break;
        }
    }
    if (op == PCU_RED_ARGMAX || op == PCU_RED_ARGMIN) {
        ((int64_t *)y)[i] = best;
        return;
    }
    if (op == PCU_RED_MEAN) acc = k->n_red ? acc / (double)k->n_red : NAN;
    else if (op == PCU_RED_L2) acc = sqrt(acc);
    else if (op == PCU_RED_LOGSUM) acc = log(acc);
    else if (op == PCU_RED_LOGSUMEXP) acc = log(acc) + m;
    pcu_rst(y, k->t, i, (float)acc);
}

/* ---- Rows in lanes: softmax and normalizations ------------------------------------------ */

/* A row kernel either gives each row to one thread (lanes 0: rows that are
 * short, or strided so that neighbouring threads already read neighbouring
 * floats), or spreads each row over `lanes` threads in three launches
 * (phase 0, 1, 2) that share nothing but a double workspace of two halves,
 * part[rows * lanes] and part2[rows * lanes]: thread i is lane l = i % lanes
 * of row r = i / lanes and walks the row's elements l, l + lanes, ..., so a
 * warp's loads are consecutive floats (coalesced) and a row of 768 floats
 * keeps 32 threads busy instead of one. Each later phase combines its row's
 * partials in lane order, the same in every lane, so the result does not
 * depend on which thread ran first; sums are in double as in the one-thread
 * form, so only their order differs from the reference kernels'. */
PCU_HD double pcu_lane_sum(const double *part, int64_t r, int64_t lanes) {
    double s = 0;
    for (int64_t l = 0; l < lanes; l++) s += part[r * lanes + l];
    return s;
}

/* NaN-keeping max, as the reference's Softmax takes it. */
PCU_HD float pcu_nanmax(float m, float v) { return (v > m || v != v) ? (m != m ? m : v) : m; }

/* ---- Softmax, LogSoftmax ------------------------------------------------------------------ */

typedef struct pcu_softmax {
    int32_t log;
    int32_t lanes, phase;
    int32_t t; /* x's and y's type (pcu_rhalf) */ /* lanes 0: one thread per row (threads outer * inner); else inner is 1 and
                           * threads outer * lanes: phase 0 each lane's max into part, 1 the row's max
                           * and each lane's sum of exp into part2, 2 the outputs */
    int64_t outer, n, inner; /* rows: outer * inner, each n elements at stride inner */
} pcu_softmax;

PCU_HD void pcu_softmax_at(const pcu_softmax *k, void *y, const void *x, double *part, int64_t i) {
    const int t = k->t;
    if (k->lanes) {
        const int64_t L = k->lanes, n = k->n;
        int64_t r = i;
        const int64_t l = pcu_divmod(&r, L);
        const int64_t xp = r * n; /* the row's first element */
        double *part2 = part + k->outer * L;
        if (k->phase == 0) {
            float m = -INFINITY;
            for (int64_t j = l; j < n; j += L) m = pcu_nanmax(m, pcu_rld(x, t, xp + j));
            part[i] = m;
            return;
        }
        float m = -INFINITY;
        for (int64_t q = 0; q < L; q++) m = pcu_nanmax(m, (float)part[r * L + q]);
        if (k->phase == 1) {
            double s = 0;
            for (int64_t j = l; j < n; j += L) s += exp((double)pcu_rld(x, t, xp + j) - (double)m);
            part2[i] = s;
            return;
        }
        const double s = pcu_lane_sum(part2, r, L);
        if (k->log) {
            const double ls = log(s) + (double)m;
            for (int64_t j = l; j < n; j += L) pcu_rst(y, t, xp + j, (float)((double)pcu_rld(x, t, xp + j) - ls));
        } else {
            const double rs = 1.0 / s;
            for (int64_t j = l; j < n; j += L)
                pcu_rst(y, t, xp + j, (float)((double)(float)exp((double)pcu_rld(x, t, xp + j) - (double)m) * rs));
        }
        return;
    }
    const int64_t o = pcu_div(i, k->inner), in = i - o * k->inner, n = k->n, st = k->inner;
    const int64_t xp = o * n * st + in; /* the row's first element, the others st apart */
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = pcu_nanmax(m, pcu_rld(x, t, xp + j * st));
    double s = 0;
    const int half = pcu_rhalf(t);
    for (int64_t j = 0; j < n; j++) {
        const double e = exp((double)pcu_rld(x, t, xp + j * st) - (double)m);
        s += e;
        if (!k->log && !half) ((float *)y)[xp + j * st] = (float)e;
    }
    if (k->log) {
        const double ls = log(s) + (double)m;
        for (int64_t j = 0; j < n; j++) pcu_rst(y, t, xp + j * st, (float)((double)pcu_rld(x, t, xp + j * st) - ls));
    } else if (!half) {
        const double r = 1.0 / s;
        float *yf = (float *)y;
        for (int64_t j = 0; j < n; j++) yf[xp + j * st] = (float)(yf[xp + j * st] * r);
    } else { /* each exp again (a half y cannot hold it unrounded): the f32 row's values, rounded */
        const double r = 1.0 / s;
        for (int64_t j = 0; j < n; j++)
            pcu_rst(y, t, xp + j * st, (float)((double)(float)exp((double)pcu_rld(x, t, xp + j * st) - (double)m) * r));
    }
}

/* ---- Rows in one block: Softmax, LogSoftmax and LayerNorm in one launch -------------------- */

/* The single-launch form of the row kernels (--cuda-row-kernels on; not yet
 * run on a GPU): one block of PCU_ROW_LANES threads per row of n <=
 * PCU_ROW_MAX contiguous floats, in PCU_ROW_PHASES phases separated by a
 * barrier. Lane l of row r in phase ph is pcu_<stem>_ph(k, ph, ..., row,
 * part, r, l): `row` is the block's shared copy of the row (read from x
 * once, in phase 0), `part` 2 * PCU_ROW_LANES doubles of shared partials.
 * On the GPU the phases are a loop with __syncthreads() between them
 * (kernels.cu); the emulator runs every lane of a phase before the next
 * phase (emu.c), in any order: within a phase a lane writes only slots no
 * other lane reads in that phase. The reductions are a fixed binary tree
 * over the lanes' partials (phases 1..8 and 10..17: lane l < s combines
 * slots l and l + s, s = 128, 64, ..., 1), so the result does not depend on
 * scheduling. Softmax takes expf (f32) per element, its sums in double;
 * LayerNorm its sums and deviations in double as the reference kernel. */
#define PCU_ROW_LANES 256
#define PCU_ROW_MAX 4096  /* floats of a row in shared memory (16 KiB, + 4 KiB of partials) */
#define PCU_ROW_PHASES 19

/* Tree step t (1..8) of the lanes' partials p[0..PCU_ROW_LANES): lane l < s
 * takes slot l + s (max: NaN-keeping, else a sum). */
PCU_HD void pcu_row_tree(double *p, int t, int l, int max) {
    const int s = PCU_ROW_LANES >> t;
    if (l >= s) return;
    if (max) p[l] = (double)pcu_nanmax((float)p[l], (float)p[l + s]);
    else p[l] += p[l + s];
}

/* Lane l's sum of squared deviations from m over row[l], row[l + L], ...
 * (L = PCU_ROW_LANES lanes), in double: the second pass of the one-block
 * LayerNorm and of its gradient. */
PCU_HD double pcu_row_dev2(const float *row, int64_t n, int l, double m) {
    double v = 0;
    for (int64_t j = l; j < n; j += PCU_ROW_LANES) {
        const double d = row[j] - m;
        v += d * d;
    }
    return v;
}

typedef struct pcu_rowsm {
    int32_t log, t; /* t: x's and y's type (pcu_rhalf) */
    int64_t rows, n;
} pcu_rowsm;

/* phase 0: the row into shared memory, each lane's max; 1-8: the max's
 * tree; 9: each lane's sum of expf(x - max); 10-17: the sum's tree; 18: y */
PCU_HD void pcu_rowsm_ph(const pcu_rowsm *k, int ph, void *y, const void *x, float *row, double *part, int64_t r,
                         int l) {
    const int64_t n = k->n, L = PCU_ROW_LANES;
    if (ph == 0) {
        float m = -INFINITY;
        for (int64_t j = l; j < n; j += L) {
            const float v = pcu_rld(x, k->t, r * n + j);
            row[j] = v;
            m = pcu_nanmax(m, v);
        }
        part[l] = m;
    } else if (ph <= 8) {
        pcu_row_tree(part, ph, l, 1);
    } else if (ph == 9) {
        const float m = (float)part[0];
        double s = 0;
        for (int64_t j = l; j < n; j += L) s += (double)expf(row[j] - m);
        part[L + l] = s;
    } else if (ph <= 17) {
        pcu_row_tree(part + L, ph - 9, l, 0);
    } else {
        const float m = (float)part[0];
        const double s = part[L];
        if (k->log) {
            const double ls = log(s) + (double)m;
            for (int64_t j = l; j < n; j += L) pcu_rst(y, k->t, r * n + j, (float)((double)row[j] - ls));
        } else {
            const double rs = 1.0 / s;
            for (int64_t j = l; j < n; j += L) pcu_rst(y, k->t, r * n + j, (float)((double)expf(row[j] - m) * rs));
        }
    }
}

typedef struct pcu_rowln {
    int32_t has_bias, rms; /* rms: RMSNormalization (no mean, no bias; phases 9-17 idle) */
    int32_t t, pad_;       /* x's, scale's, bias's, y's, x2's and sum's type (pcu_rhalf; mean and inv_std_dev f32) */
    int64_t rows, n;
    double eps;
} pcu_rowln;

/* LayerNorm (RMSNormalization with k->rms: phase 0 sums squares, 18 writes
 * x * inv * scale) over the last n: phase 0 the row into shared memory and each
 * lane's sum; 1-8 its tree; 9 each lane's sum of squared deviations from
 * the mean; 10-17 its tree; 18 y = (x - mean) * inv * scale + bias, and
 * lane 0 the mean and inv_std_dev outputs where the node has them. With x2
 * (not NULL) the row is x + x2, the residual Add before the LayerNorm taken
 * into phase 0 (plan_cuda.c, plan_add_ln): each element the float sum the
 * Add's own kernel computes (pcu_binary_f), written to `sum` where the Add's
 * output has other readers. */
PCU_HD void pcu_rowln_ph(const pcu_rowln *k, int ph, void *y, const void *x, const void *scale, const void *bias,
                         float *mean_out, float *inv_out, const void *x2, void *sum, float *row, double *part,
                         int64_t r, int l) {
    const int64_t n = k->n, L = PCU_ROW_LANES;
    const int t = k->t;
    if (ph == 0) {
        double s = 0;
        for (int64_t j = l; j < n; j += L) {
            /* the Add's sum as its own kernel stores it (rounded to a half type) */
            const float v = x2 ? pcu_rround(t, pcu_binary_f(PCU_EW_ADD, pcu_rld(x, t, r * n + j), pcu_rld(x2, t, r * n + j)))
                               : pcu_rld(x, t, r * n + j);
            row[j] = v;
            if (sum) pcu_rst(sum, t, r * n + j, v);
            s += k->rms ? (double)v * v : (double)v;
        }
        part[l] = s;
    } else if (ph <= 8) {
        pcu_row_tree(part, ph, l, 0);
    } else if (k->rms && ph < 18) {
        /* RMSNormalization: no deviations to sum */
    } else if (k->rms) { /* as the reference kernel: x * inv * scale */
        const double inv = 1.0 / sqrt((n ? part[0] / (double)n : 0.0) + k->eps);
        for (int64_t j = l; j < n; j += L) pcu_rst(y, t, r * n + j, (float)(row[j] * inv * pcu_rld(scale, t, j)));
    } else if (ph == 9) {
        part[L + l] = pcu_row_dev2(row, n, l, n ? part[0] / (double)n : 0.0);
    } else if (ph <= 17) {
        pcu_row_tree(part + L, ph - 9, l, 0);
    } else {
        const double m = n ? part[0] / (double)n : 0.0, v = n ? part[L] / (double)n : 0.0;
        const double inv = 1.0 / sqrt(v + k->eps);
        for (int64_t j = l; j < n; j += L)
            pcu_rst(y, t, r * n + j, (float)((row[j] - m) * inv * pcu_rld(scale, t, j) +
                                             (k->has_bias ? (double)pcu_rld(bias, t, j) : 0.0)));
        if (l == 0 && mean_out) mean_out[r] = (float)m;
        if (l == 0 && inv_out) inv_out[r] = (float)inv;
    }
}

/* ---- Layer, Instance, Group and RMS normalization ----------------------------------------- */

/* Row r: n contiguous floats at x + r * n, mean and 1/sqrt(var + eps) in
 * double; y = (x - mean) * inv * scale + bias where scale and bias are
 * indexed by the element's position j in the row (cdiv == 0: LayerNorm,
 * scale[j]) or by its channel (InstanceNorm/GroupNorm: channel =
 * (r % groups) * cpg + j / cdiv). lanes 0: one thread per row; else the
 * rows in lanes: phase 0 each lane's sum (RMS: of squares) into part, 1 the
 * row's mean and each lane's sum of squared deviations into part2 (RMS: the
 * outputs), 2 the outputs. */
typedef struct pcu_norm {
    int32_t has_bias, groups, rms, lanes, phase; /* rms: RMSNormalization (no mean, no bias) */
    int32_t t; /* x's, scale's, bias's and y's type (pcu_rhalf; mean and inv_std_dev f32) */
    int64_t rows, n, cpg, cdiv;
    double eps;
} pcu_norm;

/* y over the elements j0, j0 + step, ... of row r, given its mean and inv. */
PCU_HD void pcu_norm_out(const pcu_norm *k, void *y, const void *x, const void *scale, const void *bias,
                         int64_t r, int64_t j0, int64_t step, double m, double inv) {
    const int64_t n = k->n, xp = r * n;
    const int t = k->t;
    if (k->rms) { /* as the reference kernel: x * inv * scale */
        for (int64_t j = j0; j < n; j += step)
            pcu_rst(y, t, xp + j, (float)(pcu_rld(x, t, xp + j) * inv * pcu_rld(scale, t, j)));
        return;
    }
    for (int64_t j = j0; j < n; j += step) {
        const int64_t c = k->cdiv ? pcu_mod(r, k->groups) * k->cpg + pcu_div(j, k->cdiv) : j;
        const double b = k->has_bias ? (double)pcu_rld(bias, t, c) : 0.0;
        const float xv = pcu_rld(x, t, xp + j), sc = pcu_rld(scale, t, c);
        pcu_rst(y, t, xp + j, k->cdiv ? (float)((xv - m) * (inv * sc) + b) : (float)((xv - m) * inv * sc + b));
    }
}

PCU_HD void pcu_norm_at(const pcu_norm *k, void *y, const void *x, const void *scale, const void *bias,
                        float *mean_out, float *inv_out, double *part, int64_t i) {
    const int64_t n = k->n, L = k->lanes ? k->lanes : 1;
    const int t = k->t;
    int64_t r = i;
    const int64_t l = pcu_divmod(&r, L);
    const int64_t xp = r * n; /* the row's first element */
    const double dn = (double)(n ? n : 1);
    double m = 0, inv;
    if (k->lanes && k->phase == 0) {
        double s = 0;
        for (int64_t j = l; j < n; j += L) {
            const float v = pcu_rld(x, t, xp + j);
            s += k->rms ? (double)v * v : (double)v;
        }
        part[i] = s;
        return;
    }
    if (k->rms) {
        double q = 0;
        if (k->lanes) q = pcu_lane_sum(part, r, L);
        else
            for (int64_t j = 0; j < n; j++) {
                const float v = pcu_rld(x, t, xp + j);
                q += (double)v * v;
            }
        inv = 1.0 / sqrt(q / dn + k->eps);
        pcu_norm_out(k, y, x, scale, bias, r, l, L, 0, inv);
        return;
    }
    double *part2 = k->lanes ? part + k->rows * L : NULL; /* no arithmetic on the one-thread form's NULL */
    if (k->lanes) m = n ? pcu_lane_sum(part, r, L) / (double)n : 0.0;
    else {
        double s = 0;
        for (int64_t j = 0; j < n; j++) s += pcu_rld(x, t, xp + j);
        m = n ? s / (double)n : 0.0;
    }
    double v = 0;
    if (k->lanes && k->phase == 1) {
        for (int64_t j = l; j < n; j += L) {
            const double d = pcu_rld(x, t, xp + j) - m;
            v += d * d;
        }
        part2[i] = v;
        return;
    }
    if (k->lanes) v = pcu_lane_sum(part2, r, L);
    else
        for (int64_t j = 0; j < n; j++) {
            const double d = pcu_rld(x, t, xp + j) - m;
            v += d * d;
        }
    v = n ? v / (double)n : 0.0;
    inv = 1.0 / sqrt(v + k->eps);
    pcu_norm_out(k, y, x, scale, bias, r, l, L, m, inv);
    if (l == 0 && mean_out) mean_out[r] = (float)m;
    if (l == 0 && inv_out) inv_out[r] = (float)inv;
}

/* BatchNormalization (inference): element i of x [N, C, S], channel
 * (i / S) % C; x and y of type t (pcu_rld: f32, or a half plan's f16 / bf16
 * computed as f32 and rounded), scale, bias and the statistics f32. */
typedef struct pcu_bn {
    int64_t n, c, s;
    double eps;
    int32_t t, pad_;
} pcu_bn;

PCU_HD void pcu_bn_at(const pcu_bn *k, void *y, const void *x, const float *scale, const float *bias,
                      const float *mean, const float *var, int64_t i) {
    const int64_t c = pcu_mod(pcu_div(i, k->s), k->c);
    const float s = (float)((double)scale[c] / sqrt((double)var[c] + k->eps));
    pcu_rst(y, k->t, i, (pcu_rld(x, k->t, i) - mean[c]) * s + bias[c]);
}

/* ---- pp.Dropout in training mode: one thread per element ----------------------------------- *
 * The reference kernel's mask (runtime/cpu/ref_grad.c): element i kept when
 * the top 53 bits of mix(base ^ i), as a double in [0, 1), are >= ratio,
 * base = mix(mix(mix(seed) ^ key) ^ counter) from the micro-batch's [seed,
 * counter] (sc); a negative counter or a ratio <= 0 keeps every element.
 * Integer arithmetic: the same mask, bit for bit, on every device. */
PCU_HD uint64_t pcu_drop_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct pcu_dropt {
    float ratio, scale; /* scale: 1 / (1 - ratio), 0 at ratio 1 */
    int64_t key, n;
} pcu_dropt;

PCU_HD void pcu_dropt_at(const pcu_dropt *k, float *y, float *m, const float *x, const int64_t *sc, int64_t i) {
    float keep = 1.0f;
    if (sc[1] >= 0 && k->ratio > 0.0f) {
        const uint64_t base =
            pcu_drop_mix(pcu_drop_mix(pcu_drop_mix((uint64_t)sc[0]) ^ (uint64_t)k->key) ^ (uint64_t)sc[1]);
        const double u = (double)(pcu_drop_mix(base ^ (uint64_t)i) >> 11) * 0x1p-53;
        keep = u >= (double)k->ratio ? k->scale : 0.0f;
    }
    m[i] = keep;
    y[i] = x[i] * keep;
}

/* ---- BatchNormalization in training mode, pp.BatchNormGrad: a block per channel ---------- *
 * Block-per-row kernels (kernels.def PCU_ROWS, "Rows in one block" above):
 * block r is channel r, lane l walks the channel's elements i = l, l + 256,
 * ... of each image row in image order, its sums in double; the lanes'
 * partials meet in the fixed tree of pcu_row_tree, so the bits do not
 * depend on scheduling. Not the reference's summation order (its sums run
 * along each image row): within a few double roundings of it. The shared
 * row memory is unused but for two doubles the gradient keeps between
 * phases (pcu_put_d). */

/* Double v into (or out of) two floats of shared memory, bit for bit. */
PCU_HD void pcu_put_d(float *f, double v) {
    union {
        double d;
        float f[2];
    } u;
    u.d = v;
    f[0] = u.f[0], f[1] = u.f[1];
}
PCU_HD double pcu_get_d(const float *f) {
    union {
        double d;
        float f[2];
    } u;
    u.f[0] = f[0], u.f[1] = f[1];
    return u.d;
}

/* Lane l's sum over channel c of x (shift = 0, sq = 0) or of (x - shift)^2. */
PCU_HD double pcu_bn_lane_sum(const float *x, int64_t N, int64_t C, int64_t S, int64_t c, int l, double shift, int sq) {
    double a = 0;
    for (int64_t n = 0; n < N; n++) {
        const float *p = x + (n * C + c) * S;
        for (int64_t i = l; i < S; i += PCU_ROW_LANES) {
            const double d = p[i] - shift;
            a += sq ? d * d : d;
        }
    }
    return a;
}

/* Tree step t (1..8) of two sets of partials, p[0..256) and p[256..512). */
PCU_HD void pcu_bn_tree2(double *p, int t, int l) {
    const int s = PCU_ROW_LANES >> t;
    if (l >= s) return;
    p[l] += p[l + s];
    p[PCU_ROW_LANES + l] += p[PCU_ROW_LANES + l + s];
}

typedef struct pcu_bnt {
    int64_t N, C, S;
    float eps, momentum;
} pcu_bnt;

/* phase 0: lane sums of x; 1-8: their tree; 9: lane sums of squared
 * deviations from the mean; 10-17: their tree; 18: Y, and by lane 0 the
 * running mean and variance, the saved mean and inverse std (each where
 * given). */
PCU_HD void pcu_bnt_ph(const pcu_bnt *k, int ph, float *y, float *rmean, float *rvar, float *smean, float *sinv,
                       const float *x, const float *scale, const float *B, const float *mean, const float *var,
                       float *row, double *part, int64_t c, int l) {
    const int L = PCU_ROW_LANES;
    const double cnt = (double)(k->N * k->S);
    (void)row;
    if (ph == 0) {
        part[l] = pcu_bn_lane_sum(x, k->N, k->C, k->S, c, l, 0.0, 0);
    } else if (ph <= 8) {
        const int s = L >> ph;
        if (l < s) part[l] += part[l + s];
    } else if (ph == 9) {
        part[L + l] = pcu_bn_lane_sum(x, k->N, k->C, k->S, c, l, part[0] / cnt, 1);
    } else if (ph <= 17) {
        const int s = L >> (ph - 9);
        if (l < s) part[L + l] += part[L + l + s];
    } else {
        const double mu = part[0] / cnt, v = part[L] / cnt;
        if (l == 0) {
            const double keep = k->momentum, take = 1.0 - (double)k->momentum;
            if (rmean) rmean[c] = (float)(mean[c] * keep + mu * take);
            if (rvar) rvar[c] = (float)(var[c] * keep + v * take);
            if (smean) smean[c] = (float)mu;
            if (sinv) sinv[c] = (float)(1.0 / sqrt(v + (double)k->eps));
        }
        const float sc = (float)((double)scale[c] / sqrt(v + (double)k->eps)), m = (float)mu, b = B[c];
        for (int64_t n = 0; n < k->N; n++) {
            const int64_t o = (n * k->C + c) * k->S;
            for (int64_t i = l; i < k->S; i += L) y[o + i] = (x[o + i] - m) * sc + b;
        }
    }
}

typedef struct pcu_bng {
    int64_t N, C, S;
    float eps;
    int32_t training; /* the statistics are the batch's own (else mean_in and var_in) */
} pcu_bng;

/* phases 0-17: as pcu_bnt_ph's, the batch's mean and variance (training
 * only); 18: lane 0 keeps the mean and 1/sqrt(var + eps) in the shared row;
 * 19: lane sums of dY and of dY x^; 20-27: both trees; 28: dX, and by lane
 * 0 dscale and dB (where given). */
#define PCU_BNG_PHASES 29
PCU_HD void pcu_bng_ph(const pcu_bng *k, int ph, float *dx, float *dsc, float *db, const float *dy, const float *x,
                       const float *sc, const float *mean_in, const float *var_in, float *row, double *part, int64_t c,
                       int l) {
    const int L = PCU_ROW_LANES;
    const double m = (double)k->N * (double)k->S;
    if (ph <= 17) {
        if (!k->training || m == 0) return;
        if (ph == 0) part[l] = pcu_bn_lane_sum(x, k->N, k->C, k->S, c, l, 0.0, 0);
        else if (ph <= 8) {
            const int s = L >> ph;
            if (l < s) part[l] += part[l + s];
        } else if (ph == 9) part[L + l] = pcu_bn_lane_sum(x, k->N, k->C, k->S, c, l, part[0] / m, 1);
        else {
            const int s = L >> (ph - 9);
            if (l < s) part[L + l] += part[L + l + s];
        }
    } else if (ph == 18) {
        if (l != 0) return;
        const bool own = k->training && m > 0;
        const double mean = own ? part[0] / m : k->training ? 0 : mean_in[c];
        const double var = own ? part[L] / m : k->training ? 0 : var_in[c];
        pcu_put_d(row, mean);
        pcu_put_d(row + 2, 1.0 / sqrt(var + (double)k->eps));
    } else if (ph == 19) {
        const double mean = pcu_get_d(row), inv = pcu_get_d(row + 2);
        double a = 0, b = 0;
        for (int64_t n = 0; n < k->N; n++) {
            const int64_t o = (n * k->C + c) * k->S;
            for (int64_t i = l; i < k->S; i += L) {
                a += dy[o + i];
                b += dy[o + i] * (x[o + i] - mean) * inv;
            }
        }
        part[l] = a, part[L + l] = b;
    } else if (ph <= 27) {
        pcu_bn_tree2(part, ph - 19, l);
    } else {
        const double mean = pcu_get_d(row), inv = pcu_get_d(row + 2), sdy = part[0], sdyx = part[L];
        if (l == 0) {
            if (dsc) dsc[c] = (float)sdyx;
            if (db) db[c] = (float)sdy;
        }
        const double g = sc[c] * inv;
        const bool own = k->training && m > 0;
        for (int64_t n = 0; n < k->N; n++) {
            const int64_t o = (n * k->C + c) * k->S;
            for (int64_t i = l; i < k->S; i += L)
                dx[o + i] = (float)(own ? g * (dy[o + i] - sdy / m - (x[o + i] - mean) * inv * sdyx / m) : g * dy[o + i]);
        }
    }
}

/* ---- pp.LayerNormGrad, pp.InstanceNormGrad: a block per row, then the parameters' sums --------- *
 * dX (pcu_lng_ph, kernels.def PCU_ROWS): block r is row r of n contiguous
 * floats (LayerNorm: X's dims from axis on; InstanceNorm: image n, channel
 * c = r % C, its S elements); lane l walks the row's elements l, l + 256,
 * ...; the row's mean, 1/sqrt(var + eps) and the sums of g = dY scale and
 * g x^ in double with the reference kernel's formulas (runtime/cpu/
 * ref_grad.c pprt_ln_grad_rows and norm_group_grad), the lanes' partials meeting in the fixed
 * tree of pcu_row_tree, so the bits do not depend on scheduling: within a
 * few double roundings of the reference's row order. A row of up to
 * PCU_ROW_MAX / 2 floats keeps X and dY in the shared row after phase 0
 * (each lane rereads only the elements it wrote). Lane 0 keeps four doubles
 * a row in the workspace `st`: the mean, inv and (InstanceNorm) the row's
 * sums of dY x^ and of dY.
 * dscale and dB (pcu_lngp_at, no atomics): LayerNorm's are columns over
 * the rows, dY x^ and dY summed in double in row order by a thread per
 * column of each chunk of PCU_LNG_CHUNK rows (phase 0), then the chunks'
 * partials in chunk order by a thread per column (phase 1): with one chunk
 * (rows <= PCU_LNG_CHUNK) the reference's order exactly; InstanceNorm's a
 * thread per channel adding its rows' sums in image order (phase 1). */
#define PCU_LNG_CHUNK 64
#define PCU_LNG_PHASES 39

typedef struct pcu_lng {
    int64_t rows, n, C; /* C: InstanceNorm's channels (scale[r % C]), 0: LayerNorm (scale[j]) */
    double eps;
} pcu_lng;

/* phase 0: X (and dY) into the shared row, each lane's sum of X; 1-8 its
 * tree; 9: each lane's sum of squared deviations from the mean; 10-17 its
 * tree; 18: lane 0 the mean and inv into st; 19: each lane's sums of g and
 * g x^; 20-27 their trees; 28: dX; InstanceNorm only: 29 each lane's sums
 * of dY x^ and dY, 30-37 their trees, 38 lane 0 them into st. */
PCU_HD void pcu_lng_ph(const pcu_lng *k, int ph, float *dx, double *st, const float *dy, const float *x,
                       const float *scale, float *row, double *part, int64_t r, int l) {
    const int64_t n = k->n, L = PCU_ROW_LANES;
    const int cache = 2 * n <= PCU_ROW_MAX;
    const float *xr = cache ? row : x + r * n, *gr = cache ? row + n : dy + r * n;
    const float *sc = k->C ? scale + pcu_mod(r, k->C) : scale;
    const int64_t sj = k->C ? 0 : 1; /* scale's stride along the row */
    double *s4 = st + 4 * r;
    if (ph == 0) {
        const float *xp = x + r * n, *gp = dy + r * n;
        double a = 0;
        for (int64_t j = l; j < n; j += L) {
            const float v = xp[j];
            if (cache) row[j] = v, row[n + j] = gp[j];
            a += v;
        }
        part[l] = a;
    } else if (ph <= 8) {
        pcu_row_tree(part, ph, l, 0);
    } else if (ph == 9) {
        part[L + l] = pcu_row_dev2(xr, n, l, part[0] / (double)n);
    } else if (ph <= 17) {
        pcu_row_tree(part + L, ph - 9, l, 0);
    } else if (ph == 18) {
        if (l == 0) s4[0] = part[0] / (double)n, s4[1] = 1.0 / sqrt(part[L] / (double)n + k->eps);
    } else if (ph == 19 || (ph == 29 && k->C)) {
        const double m = s4[0], inv = s4[1];
        double a = 0, b = 0;
        for (int64_t j = l; j < n; j += L) {
            const double xh = (xr[j] - m) * inv;
            if (ph == 29) {
                a += (double)gr[j] * xh, b += gr[j];
                continue;
            }
            const double g = (double)gr[j] * sc[j * sj];
            a += g, b += g * xh;
        }
        part[l] = a, part[L + l] = b;
    } else if (ph <= 27 || (ph >= 30 && ph <= 37 && k->C)) {
        pcu_bn_tree2(part, ph <= 27 ? ph - 19 : ph - 29, l);
    } else if (ph == 28) {
        const double m = s4[0], inv = s4[1], mg = part[0] / (double)n, mgx = part[L] / (double)n;
        float *dp = dx + r * n;
        for (int64_t j = l; j < n; j += L) {
            const double xh = (xr[j] - m) * inv;
            dp[j] = (float)(inv * ((double)gr[j] * sc[j * sj] - mg - xh * mgx));
        }
    } else if (ph == 38 && k->C && l == 0) {
        s4[2] = part[0], s4[3] = part[L];
    }
}

typedef struct pcu_lngp {
    int32_t phase, pad_;
    int64_t rows, n, C, chunks; /* C and n as pcu_lng's; chunks: of PCU_LNG_CHUNK rows (LayerNorm) */
} pcu_lngp;

/* LayerNorm: phase 0 thread i = chunk c * n + column p, its partial sums of
 * dY x^ and dY into part[i] and part[chunks * n + i]; phase 1 thread p the
 * chunks' partials into dscale[p] and dB[p]. InstanceNorm: phase 1 thread
 * c, channel c's rows' sums. Absent outputs NULL. */
PCU_HD void pcu_lngp_at(const pcu_lngp *k, float *dsc, float *db, double *part, const float *dy, const float *x,
                        const double *st, int64_t i) {
    const int64_t n = k->n;
    double a = 0, b = 0;
    if (k->C) {
        for (int64_t r = i; r < k->rows; r += k->C) a += st[4 * r + 2], b += st[4 * r + 3];
    } else if (k->phase == 0) {
        int64_t c = i;
        const int64_t p = pcu_divmod(&c, n);
        const int64_t r1 = (c + 1) * PCU_LNG_CHUNK < k->rows ? (c + 1) * PCU_LNG_CHUNK : k->rows;
        for (int64_t r = c * PCU_LNG_CHUNK; r < r1; r++) {
            const int64_t e = r * n + p;
            const double xh = (x[e] - st[4 * r]) * st[4 * r + 1];
            a += (double)dy[e] * xh, b += dy[e];
        }
        part[i] = a, part[k->chunks * n + i] = b;
        return;
    } else {
        for (int64_t c = 0; c < k->chunks; c++) a += part[c * n + i], b += part[(k->chunks + c) * n + i];
    }
    if (dsc) dsc[i] = (float)a;
    if (db) db[i] = (float)b;
}

/* ---- pp.SliceGrad: one thread per element of dX ------------------------------------------- *
 * dX is zero but where the slice read: element a (per axis) holds dY's
 * element q with a = start + q * step, 0 <= q < dY's dim (steps nonzero,
 * negative ones too). A gather: each dX element written once, by its own
 * thread, the reference's bits (dY's, or +0). */
typedef struct pcu_slgrad {
    int32_t rank, pad_;
    int64_t n, ny; /* elements of dX and dY */
    int64_t xd[PCU_MAXD], yd[PCU_MAXD], start[PCU_MAXD], step[PCU_MAXD];
} pcu_slgrad;

PCU_HD void pcu_slgrad_at(const pcu_slgrad *k, float *dx, const float *dy, int64_t i) {
    int64_t rem = i, yo = 0, ys = 1;
    int inside = 1;
    for (int d = k->rank - 1; d >= 0 && inside; d--) {
        const int64_t t = pcu_divmod(&rem, k->xd[d]) - k->start[d], q = t / k->step[d];
        inside = q * k->step[d] == t && q >= 0 && q < k->yd[d];
        yo += q * ys, ys *= k->yd[d];
    }
    dx[i] = inside ? dy[yo] : 0.0f;
}

/* ---- MaxPool, AveragePool, LpPool (1-3-D lifted to 3-D): one thread per output element ----------- */

typedef struct pcu_pool {
    int32_t max, count_pad, lp; /* lp: LpPool's p (>= 1), 0 for the others */
    int32_t t;                  /* x's and y's type (pcu_rhalf: a half plan's MaxPool) */
    int64_t n, nc; /* output elements, N * C */
    int64_t in[3], k[3], s[3], d[3], p[3], p1[3], out[3];
} pcu_pool;

/* y[i] = the window of output position (od, oh, ow) over one channel of x:
 * the channel's first element at xp, its spatial elements cs apart (1 for
 * NCHW, C for NHWC). The taps in one order whatever the layout, so NHWC
 * gives NCHW's bits. */
PCU_HD void pcu_pool_win(const pcu_pool *k, void *y, const void *x, int64_t i, int64_t xp, int64_t cs, int64_t od,
                         int64_t oh, int64_t ow) {
    double acc = k->max ? -INFINITY : 0.0;
    int64_t cnt = 0;
    int nan = 0, num = 0;
    for (int64_t a = 0; a < k->k[0]; a++) {
        const int64_t z = od * k->s[0] - k->p[0] + a * k->d[0];
        if (z < -k->p[0] || z >= k->in[0] + k->p1[0]) continue;
        for (int64_t b = 0; b < k->k[1]; b++) {
            const int64_t h = oh * k->s[1] - k->p[1] + b * k->d[1];
            if (h < -k->p[1] || h >= k->in[1] + k->p1[1]) continue;
            for (int64_t c = 0; c < k->k[2]; c++) {
                const int64_t w = ow * k->s[2] - k->p[2] + c * k->d[2];
                if (w < -k->p[2] || w >= k->in[2] + k->p1[2]) continue;
                const int inside = z >= 0 && z < k->in[0] && h >= 0 && h < k->in[1] && w >= 0 && w < k->in[2];
                if (k->count_pad || inside) cnt++;
                if (!inside) continue;
                const float v = pcu_rld(x, k->t, xp + ((z * k->in[1] + h) * k->in[2] + w) * cs);
                if (k->lp) {
                    acc += pow(fabs((double)v), (double)k->lp);
                } else if (k->max) { /* NaN skipped, as the reference: a window of only NaN is NaN */
                    if (v != v) nan = 1;
                    else if (v > acc || !num) acc = v, num = 1;
                } else {
                    acc += v;
                }
            }
        }
    }
    if (k->lp) pcu_rst(y, k->t, i, (float)pow(acc, 1.0 / (double)k->lp)); /* (sum of |x|^p)^(1/p); pads add nothing */
    else pcu_rst(y, k->t, i, k->max ? (num || !nan ? (float)acc : NAN) : (float)(cnt ? acc / (double)cnt : NAN));
}

PCU_HD void pcu_pool_at(const pcu_pool *k, void *y, const void *x, int64_t i) {
    const int64_t ow = i % k->out[2], oh = (i / k->out[2]) % k->out[1], od = (i / (k->out[2] * k->out[1])) % k->out[0];
    const int64_t nc = i / (k->out[2] * k->out[1] * k->out[0]);
    pcu_pool_win(k, y, x, i, nc * k->in[0] * k->in[1] * k->in[2], 1, od, oh, ow);
}

/* The same pools channels-last (--cuda-layout nhwc): x [N, (D,) H, W, C] in
 * memory, output i = (((n * OD + od) * OH + oh) * OW + ow) * C + c, one
 * thread each, the window's taps in pcu_pool_at's order. */
typedef struct pcu_poolh {
    pcu_pool p;
    int64_t c; /* channels */
} pcu_poolh;

PCU_HD void pcu_poolh_at(const pcu_poolh *k, void *y, const void *x, int64_t i) {
    const pcu_pool *p = &k->p;
    const int64_t c = i % k->c, r = i / k->c;
    const int64_t ow = r % p->out[2], oh = (r / p->out[2]) % p->out[1], od = (r / (p->out[2] * p->out[1])) % p->out[0];
    const int64_t n = r / (p->out[2] * p->out[1] * p->out[0]);
    pcu_pool_win(p, y, x, i, n * p->in[0] * p->in[1] * p->in[2] * k->c + c, k->c, od, oh, ow);
}

/* ---- pp.MaxPoolGrad: one thread per input element, no atomics ------------------------------ *
 * dX[i] sums dY over the windows whose maximum i is (the first largest tap
 * in window order inside the input, a window's first NaN its maximum: the
 * forward's and the reference kernel's choice), those windows in output
 * order: the additions the reference makes into dX[i], in its order, so the
 * bits are its. The parameter block is the pool's (n: input elements). */
typedef pcu_pool pcu_mpgrad;

/* The input position (in its plane) that output (o0, o1, o2)'s window takes. */
PCU_HD int64_t pcu_mpgrad_best(const pcu_mpgrad *k, const float *xp, int64_t o0, int64_t o1, int64_t o2) {
    int64_t best = -1;
    float bv = 0;
    bool nan_seen = false;
    for (int64_t a = 0; a < k->k[0]; a++) {
        const int64_t i0 = o0 * k->s[0] - k->p[0] + a * k->d[0];
        if (i0 < 0 || i0 >= k->in[0]) continue;
        for (int64_t b = 0; b < k->k[1]; b++) {
            const int64_t i1 = o1 * k->s[1] - k->p[1] + b * k->d[1];
            if (i1 < 0 || i1 >= k->in[1]) continue;
            for (int64_t e = 0; e < k->k[2]; e++) {
                const int64_t i2 = o2 * k->s[2] - k->p[2] + e * k->d[2];
                if (i2 < 0 || i2 >= k->in[2]) continue;
                const int64_t xi = (i0 * k->in[1] + i1) * k->in[2] + i2;
                const float v = xp[xi];
                if (!nan_seen && (best < 0 || v > bv || v != v)) best = xi, bv = v, nan_seen = v != v;
            }
        }
    }
    return best;
}

/* The first and last output index along axis d whose window has a tap at
 * input position i (lo > hi: none). */
PCU_HD void pcu_mpgrad_range(const pcu_mpgrad *k, int d, int64_t i, int64_t *lo, int64_t *hi) {
    const int64_t top = i + k->p[d], span = (k->k[d] - 1) * k->d[d];
    *lo = top - span <= 0 ? 0 : (top - span + k->s[d] - 1) / k->s[d];
    *hi = top < 0 ? -1 : top / k->s[d];
    if (*hi > k->out[d] - 1) *hi = k->out[d] - 1;
}

/* The windows of a pool's planes that have a tap at input element i, in
 * output order: BODY runs for each with (o0, o1, o2) its position, oi its
 * index in the plane, pl i's plane and xi i's position in it in scope. */
#define PCU_POOL_WINDOWS_OF(k, i, BODY)                                                                 \
    do {                                                                                                \
        const int64_t Pin_ = (k)->in[0] * (k)->in[1] * (k)->in[2];                                      \
        const int64_t pl = (i) / Pin_, xi = (i) % Pin_;                                                  \
        const int64_t i2_ = xi % (k)->in[2], i1_ = xi / (k)->in[2] % (k)->in[1];                        \
        const int64_t i0_ = xi / ((k)->in[2] * (k)->in[1]);                                             \
        int64_t lo0_, hi0_, lo1_, hi1_, lo2_, hi2_;                                                     \
        pcu_mpgrad_range(k, 0, i0_, &lo0_, &hi0_);                                                      \
        pcu_mpgrad_range(k, 1, i1_, &lo1_, &hi1_);                                                      \
        pcu_mpgrad_range(k, 2, i2_, &lo2_, &hi2_);                                                      \
        (void)pl;                                                                                       \
        for (int64_t o0 = lo0_; o0 <= hi0_; o0++) {                                                     \
            if ((i0_ + (k)->p[0] - o0 * (k)->s[0]) % (k)->d[0]) continue; /* a dilation's gap */         \
            for (int64_t o1 = lo1_; o1 <= hi1_; o1++) {                                                 \
                if ((i1_ + (k)->p[1] - o1 * (k)->s[1]) % (k)->d[1]) continue;                            \
                for (int64_t o2 = lo2_; o2 <= hi2_; o2++) {                                             \
                    if ((i2_ + (k)->p[2] - o2 * (k)->s[2]) % (k)->d[2]) continue;                        \
                    const int64_t oi = (o0 * (k)->out[1] + o1) * (k)->out[2] + o2;                       \
                    BODY;                                                                               \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
    } while (0)

PCU_HD void pcu_mpgrad_at(const pcu_mpgrad *k, float *dx, const float *dy, const float *x, int64_t i) {
    const int64_t Pin = k->in[0] * k->in[1] * k->in[2], P = k->out[0] * k->out[1] * k->out[2];
    float acc = 0.0f;
    PCU_POOL_WINDOWS_OF(k, i, if (pcu_mpgrad_best(k, x + pl * Pin, o0, o1, o2) == xi) acc += dy[pl * P + oi]);
    dx[i] = acc;
}

/* ---- pp.AvgPoolGrad: one thread per input element, no atomics ------------------------------ *
 * dX[i] sums, in double, dY[o] / div(o) over the windows o with a tap at i,
 * in output order: the reference's additions into its double accumulator,
 * so the bits are its. div(o): the window's taps inside the input, or
 * inside the input and its pads (count_pad 1), as the forward's; 1 for
 * the window sums' adjoint (count_pad 2: LpPool's gradient, the attribute
 * sum). The parameter block is the pool's (n: input elements). */
typedef pcu_pool pcu_apgrad;

PCU_HD int64_t pcu_apgrad_div(const pcu_apgrad *k, int64_t o0, int64_t o1, int64_t o2) {
    int64_t padded = 1, inside = 1;
    for (int d = 0; d < 3; d++) {
        const int64_t o = d == 0 ? o0 : d == 1 ? o1 : o2;
        int64_t cp = 0, ci = 0;
        for (int64_t j = 0; j < k->k[d]; j++) {
            const int64_t t = o * k->s[d] - k->p[d] + j * k->d[d];
            cp += t >= -k->p[d] && t < k->in[d] + k->p1[d];
            ci += t >= 0 && t < k->in[d];
        }
        padded *= cp, inside *= ci;
    }
    return k->count_pad == 2 ? (inside > 0) : k->count_pad ? padded : inside;
}

PCU_HD void pcu_apgrad_at(const pcu_apgrad *k, float *dx, const float *dy, int64_t i) {
    const int64_t P = k->out[0] * k->out[1] * k->out[2];
    double acc = 0;
    PCU_POOL_WINDOWS_OF(k, i, const int64_t div = pcu_apgrad_div(k, o0, o1, o2);
                        if (div) acc += (double)dy[pl * P + oi] / (double)div);
    dx[i] = (float)acc;
}

/* ---- Resize: one thread per output element, at most two resized axes ------------------------ */

/* As the reference (ref_nn.c): the resized axes a < b in passes, a first
 * (each pass's value rounded to float, as its intermediate buffer), every
 * pass a sum over taps j of weight(j) * x[index(j)] in double; nearest takes
 * one tap. Linear and cubic taps j = start .. -start+1 around the source
 * coordinate, weight K((j - ratio) * s) with s = scale when antialiasing a
 * downscale (else 1), taps outside the input clamped (exclude_outside: weight
 * 0), the weights divided by their sum with antialias or exclude_outside;
 * tf_crop_and_resize positions outside the input take `extrap`. A pass over
 * an innermost axis (sum_*) adds every tap, the others skip zero weights. */
typedef struct pcu_resize {
    int32_t rank, mode, coord, nearest, a, b; /* mode: 0 nearest, 1 linear, 2 cubic */
    int32_t sum_a, sum_b, exclude, antialias;
    float cubic_a, extrap;
    int32_t t, pad_; /* x's and y's type (pcu_rld: f32, or a half plan's f16 / bf16, the passes in f32) */
    int64_t n; /* output elements */
    int64_t in[PCU_MAXD], out[PCU_MAXD];
    double scale[PCU_MAXD], roi0[PCU_MAXD], roi1[PCU_MAXD];
} pcu_resize;

PCU_HD double pcu_resize_coord(const pcu_resize *k, int d, int64_t o) {
    const double s = k->scale[d], in = (double)k->in[d], ow = s * in, on = (double)k->out[d], x = (double)o;
    switch (k->coord) {
    case 0: return (x + 0.5) / s - 0.5; /* half_pixel */
    case 1: return in / 2.0 * (1 - on / ow) + (x + 0.5) / s - 0.5; /* half_pixel_symmetric */
    case 2: return k->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0.0; /* pytorch_half_pixel */
    case 3: return ow == 1 ? 0.0 : x * (in - 1) / (ow - 1); /* align_corners */
    case 4: return x / s; /* asymmetric */
    case 5: { /* tf_crop_and_resize */
        const double r0 = k->roi0[d], r1 = k->roi1[d];
        return k->out[d] > 1 ? r0 * (in - 1) + x * (r1 - r0) * (in - 1) / (on - 1) : 0.5 * (r0 + r1) * (in - 1);
    }
    default: return (x + 0.5) / s; /* tf_half_pixel_for_nn */
    }
}

/* The taps of axis d: their count, the first one's offset *start and the
 * kernel's stretch *s. */
PCU_HD int64_t pcu_resize_ntaps(const pcu_resize *k, int d, int64_t *start, double *s) {
    if (k->mode == 0) {
        *start = 0, *s = 1.0;
        return 1;
    }
    const double support = k->mode == 1 ? 1.0 : 2.0;
    *s = k->antialias && k->scale[d] < 1.0 ? k->scale[d] : 1.0;
    *start = (int64_t)floor(-support / *s) + 1;
    return 2 - 2 * *start;
}

PCU_HD double pcu_cubic_w(double x, double A) {
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* Output position o's first tap on axis d before the clamp (nearest: its
 * only tap), and *ratio, where its source coordinate lies past the floor
 * (linear and cubic). Nondecreasing in o (every coordinate transform grows
 * with o, rounding included) but for a tf_crop_and_resize whose roi runs
 * backwards. */
PCU_HD int64_t pcu_resize_pos(const pcu_resize *k, int d, int64_t o, double *ratio) {
    const double x = pcu_resize_coord(k, d, o), fl = floor(x);
    const int integral = x == fl;
    *ratio = integral ? 1.0 : x - fl;
    if (k->mode == 0) {
        const double frac = x - fl;
        return (int64_t)fl +
               (integral ? 0 : k->nearest == 0 ? frac > 0.5 : k->nearest == 1 ? frac >= 0.5 : k->nearest == 2 ? 0 : 1);
    }
    int64_t start;
    double s;
    (void)pcu_resize_ntaps(k, d, &start, &s);
    return (integral ? (int64_t)x - 1 : (int64_t)fl) + start;
}

/* Tap j of output position o on axis d: its input index, and its weight
 * before the division by the sum (nearest: weight 1). */
PCU_HD double pcu_resize_tap(const pcu_resize *k, int d, int64_t o, int64_t j, int64_t *idx) {
    double ratio;
    const int64_t in = k->in[d];
    int64_t i = pcu_resize_pos(k, d, o, &ratio);
    double w = 1.0;
    if (k->mode != 0) {
        int64_t start;
        double s;
        (void)pcu_resize_ntaps(k, d, &start, &s);
        i += j;
        const double arg = ((double)(start + j) - ratio) * s;
        w = k->mode == 1 ? (fabs(arg) < 1 ? 1 - fabs(arg) : 0) : pcu_cubic_w(arg, k->cubic_a);
        if (k->exclude && (i < 0 || i >= in)) w = 0;
    }
    *idx = i < 0 ? 0 : i >= in ? in - 1 : i;
    return w;
}

/* What the weights of output position o on axis d are divided by. */
PCU_HD double pcu_resize_norm(const pcu_resize *k, int d, int64_t o) {
    if (k->mode == 0 || !(k->antialias || k->exclude)) return 1.0;
    int64_t start, idx;
    double s, sum = 0;
    const int64_t n = pcu_resize_ntaps(k, d, &start, &s);
    for (int64_t j = 0; j < n; j++) sum += pcu_resize_tap(k, d, o, j, &idx);
    return sum != 0 ? sum : 1.0;
}

/* Whether output position o on axis d lies outside a tf_crop_and_resize input. */
PCU_HD int pcu_resize_ext(const pcu_resize *k, int d, int64_t o) {
    if (k->coord != 5) return 0;
    const double x = pcu_resize_coord(k, d, o);
    return x < 0 || x > (double)(k->in[d] - 1);
}

/* The pass over axis a at output position oa, from element p0 of x (stride st), as a float. */
PCU_HD float pcu_resize_pass(const pcu_resize *k, int d, int sum, const void *x, int64_t p0, int64_t o, int64_t st) {
    if (pcu_resize_ext(k, d, o)) return k->extrap;
    int64_t start, idx;
    double s, acc = 0.0;
    const int64_t n = pcu_resize_ntaps(k, d, &start, &s);
    const double norm = pcu_resize_norm(k, d, o);
    if (n == 1) {
        (void)pcu_resize_tap(k, d, o, 0, &idx);
        return pcu_rld(x, k->t, p0 + idx * st);
    }
    for (int64_t j = 0; j < n; j++) {
        double w = pcu_resize_tap(k, d, o, j, &idx);
        w = norm != 1.0 ? w / norm : w;
        if (sum || w != 0) acc += w * pcu_rld(x, k->t, p0 + idx * st);
    }
    return (float)acc;
}

/* Element i of a grid of dims `walk` (row-major): its coordinates on the
 * resized axes a and b (*ca, *cb), and in a tensor of dims `other` the
 * offset of its other coordinates (returned) and the strides of axes a and
 * b (*sa, *sb). The forward walks the output over the input; the gradient
 * dX over dY. */
PCU_HD int64_t pcu_resize_split(const pcu_resize *k, int64_t i, const int64_t *walk, const int64_t *other, int64_t *ca,
                                int64_t *cb, int64_t *sa, int64_t *sb) {
    int64_t rem = i, base = 0, st = 1;
    *ca = *cb = *sa = *sb = 0;
    for (int d = k->rank - 1; d >= 0; d--) {
        const int64_t c = pcu_divmod(&rem, walk[d]);
        if (d == k->a) *ca = c, *sa = st;
        else if (d == k->b) *cb = c, *sb = st;
        else base += c * st;
        st *= other[d];
    }
    return base;
}

PCU_HD void pcu_resize_at(const pcu_resize *k, void *y, const void *x, int64_t i) {
    /* the output coordinates on a and b, and the input offset of the other axes */
    int64_t oa, ob, sa, sb;
    const int64_t base = pcu_resize_split(k, i, k->out, k->in, &oa, &ob, &sa, &sb);
    if (k->b < 0) {
        pcu_rst(y, k->t, i, pcu_resize_pass(k, k->a, k->sum_a, x, base, oa, sa));
        return;
    }
    /* the pass over b, each of its taps the pass over a at that position */
    if (pcu_resize_ext(k, k->b, ob)) {
        pcu_rst(y, k->t, i, k->extrap);
        return;
    }
    int64_t start, idx;
    double s, acc = 0.0;
    const int64_t n = pcu_resize_ntaps(k, k->b, &start, &s);
    if (n == 1) {
        (void)pcu_resize_tap(k, k->b, ob, 0, &idx);
        pcu_rst(y, k->t, i, pcu_resize_pass(k, k->a, k->sum_a, x, base + idx * sb, oa, sa));
        return;
    }
    const double norm = pcu_resize_norm(k, k->b, ob);
    for (int64_t j = 0; j < n; j++) {
        double w = pcu_resize_tap(k, k->b, ob, j, &idx);
        w = norm != 1.0 ? w / norm : w;
        if (k->sum_b || w != 0) acc += w * (double)pcu_resize_pass(k, k->a, k->sum_a, x, base + idx * sb, oa, sa);
    }
    pcu_rst(y, k->t, i, (float)acc);
}

/* ---- pp.ResizeGrad: one thread per input element, no atomics -------------------------------- *
 * The reference (runtime/cpu/ref_nn.c kern_RESIZEGRAD) transposes the
 * forward's passes, the last resized axis first: each output's gradient
 * added, with its taps' weights, to the input positions they read, in
 * double, outputs and taps in order, the intermediate kept in double. Here
 * thread i is dX's element i and gathers the same terms in the same order:
 * over axis b (the later one) the outputs ob whose taps read its position,
 * then over axis a each output oa's such sum: the reference's additions in
 * its order, so its bits. Which outputs read position i: those whose first
 * tap before the clamp (pcu_resize_pos, nondecreasing in o) lies within n -
 * 1 below i (below nothing at the last position, the clamp's) and not above
 * i (above anything at position 0), found by bisection, every output for a
 * backwards tf_crop_and_resize roi. The parameter block is the forward's
 * (n: elements of dX, the threads). */
typedef pcu_resize pcu_rsgrad;

/* dY's elements: the product of the output dims */
PCU_HD int64_t pcu_rsgrad_ny(const pcu_rsgrad *k) {
    int64_t n = 1;
    for (int d = 0; d < k->rank; d++) n *= k->out[d];
    return n;
}

/* The outputs [*lo, *hi] of axis d whose taps may read input position i. */
PCU_HD void pcu_rsgrad_range(const pcu_resize *k, int d, int64_t i, int64_t *lo, int64_t *hi) {
    int64_t start;
    double s, ratio;
    const int64_t n = pcu_resize_ntaps(k, d, &start, &s), od = k->out[d];
    *lo = 0, *hi = od - 1;
    if (k->coord == 5 && k->roi1[d] < k->roi0[d]) return; /* decreasing in o: every output */
    for (int side = 0; side < 2; side++) {
        if (side == 0 ? i == 0 : i == k->in[d] - 1) continue; /* the clamp's end: no bound */
        int64_t a = 0, b = od; /* the first o past the bound's side */
        while (a < b) {
            const int64_t m = a + (b - a) / 2, p = pcu_resize_pos(k, d, m, &ratio);
            if (side == 0 ? p + n - 1 >= i : p > i) b = m;
            else a = m + 1;
        }
        if (side == 0) *lo = a;
        else *hi = a - 1;
    }
}

/* Output o's weight on input position i of axis d (0 where no tap of o reads it), summed over
 * its taps j in order as separate terms: acc += w * v for each. */
PCU_HD double pcu_rsgrad_acc(const pcu_resize *k, int d, int64_t o, int64_t i, int64_t n, double v, double acc) {
    const double norm = pcu_resize_norm(k, d, o);
    for (int64_t j = 0; j < n; j++) {
        int64_t idx;
        double w = pcu_resize_tap(k, d, o, j, &idx);
        w = norm != 1.0 ? w / norm : w;
        if (idx == i && w != 0) acc += w * v;
    }
    return acc;
}

/* Axis d's pass transposed at input position i: dY's values p[o * st] of the outputs that read it. */
PCU_HD double pcu_rsgrad_pass(const pcu_resize *k, int d, int64_t i, const float *p, int64_t st) {
    int64_t lo, hi, start;
    double s, acc = 0.0;
    const int64_t n = pcu_resize_ntaps(k, d, &start, &s);
    pcu_rsgrad_range(k, d, i, &lo, &hi);
    for (int64_t o = lo; o <= hi; o++)
        if (!pcu_resize_ext(k, d, o)) acc = pcu_rsgrad_acc(k, d, o, i, n, (double)p[o * st], acc);
    return acc;
}

PCU_HD void pcu_rsgrad_at(const pcu_rsgrad *k, float *dx, const float *dy, int64_t i) {
    /* dX's coordinates on a and b, dY's offset of the other axes and its strides on a and b */
    int64_t ia, ib, sa, sb;
    const int64_t base = pcu_resize_split(k, i, k->in, k->out, &ia, &ib, &sa, &sb);
    if (k->b < 0) {
        dx[i] = (float)pcu_rsgrad_pass(k, k->a, ia, dy + base, sa);
        return;
    }
    int64_t lo, hi, start;
    double s, acc = 0.0;
    const int64_t n = pcu_resize_ntaps(k, k->a, &start, &s);
    pcu_rsgrad_range(k, k->a, ia, &lo, &hi);
    for (int64_t o = lo; o <= hi; o++)
        if (!pcu_resize_ext(k, k->a, o))
            acc = pcu_rsgrad_acc(k, k->a, o, ia, n, pcu_rsgrad_pass(k, k->b, ib, dy + base + o * sa, sb), acc);
    dx[i] = (float)acc;
}

/* ---- CumSum: one thread per line along the axis ------------------------------------------ */

/* As the reference kernel: floats summed in their own type (f32 in float,
 * f64 in double), integers in 64-bit unsigned arithmetic (wrapping), in
 * order along the axis (reversed with reverse), each output before its own
 * element with exclusive. t: the element type (f32, f64, i32, i64). */
typedef struct pcu_cumsum {
    int32_t t, exclusive, reverse, prod; /* prod: CumProd */
    int64_t outer, len, inner;
} pcu_cumsum;

PCU_HD void pcu_cumsum_at(const pcu_cumsum *k, void *y, const void *x, int64_t line) {
    const int64_t o = line / k->inner, in = line % k->inner;
    float af = k->prod ? 1.0f : 0.0f;
    double ad = k->prod ? 1.0 : 0.0;
    uint64_t ai = k->prod ? 1u : 0u;
    for (int64_t s = 0; s < k->len; s++) {
        const int64_t at = (o * k->len + (k->reverse ? k->len - 1 - s : s)) * k->inner + in;
        if (k->t == PCU_T_F32) {
            const float v = ((const float *)x)[at];
            if (k->exclusive) ((float *)y)[at] = af;
            af = k->prod ? af * v : af + v;
            if (!k->exclusive) ((float *)y)[at] = af;
        } else if (k->t == PCU_T_F64) {
            const double v = ((const double *)x)[at];
            if (k->exclusive) ((double *)y)[at] = ad;
            ad = k->prod ? ad * v : ad + v;
            if (!k->exclusive) ((double *)y)[at] = ad;
        } else {
            const uint64_t v = (uint64_t)pcu_ldi(x, k->t, at);
            if (k->exclusive) pcu_sti(y, k->t, at, (int64_t)ai);
            ai = k->prod ? ai * v : ai + v;
            if (!k->exclusive) pcu_sti(y, k->t, at, (int64_t)ai);
        }
    }
}

/* ---- GatherElements: one thread per output element ----------------------------------------- */

/* y[i] = x at i's coordinates with the axis coordinate replaced by
 * indices[i] (negative from the end); out of range sets *err (the stage
 * fails, as the reference kernel does). dim: the output's (the indices')
 * dims; xst: x's strides in elements. */
typedef struct pcu_gather_el {
    int32_t rank, axis, esize, idx_t;
    int64_t n, len; /* output elements; x's length along the axis */
    int64_t dim[PCU_MAXD], xst[PCU_MAXD];
} pcu_gather_el;

PCU_HD void pcu_gather_el_at(const pcu_gather_el *k, void *y, const void *x, const void *idx, int *err, int64_t i) {
    int64_t rem = i, off = 0;
    for (int d = k->rank - 1; d >= 0; d--) {
        const int64_t c = pcu_divmod(&rem, k->dim[d]);
        if (d != k->axis) off += c * k->xst[d];
    }
    int64_t v = pcu_ldi(idx, k->idx_t, i);
    if (v < -k->len || v >= k->len) {
        if (err) *err = 1;
        return;
    }
    if (v < 0) v += k->len;
    pcu_copy_elem(y, i, x, off + v * k->xst[k->axis], k->esize);
}

/* ---- pp.GatherGrad: one thread per (outer, inner) column, no atomics ---------------------- *
 * dX [outer, D, inner] = 0, then dY [outer, J, inner]'s row j added into row
 * indices[j] (negative from the end), j in order: a thread owns a column of
 * dX (one outer, one inner position), so its additions are the reference's
 * in its order. An index out of range sets *err (the stage fails, as the
 * reference kernel does). */
typedef struct pcu_gathergrad {
    int32_t idx_t;
    int64_t outer, D, J, inner;
} pcu_gathergrad;

PCU_HD void pcu_gathergrad_at(const pcu_gathergrad *k, float *dx, const float *dy, const void *idx, int *err, int64_t i) {
    const int64_t o = i / k->inner, e = i % k->inner;
    float *col = dx + o * k->D * k->inner + e;
    for (int64_t r = 0; r < k->D; r++) col[r * k->inner] = 0.0f;
    const float *src = dy + o * k->J * k->inner + e;
    for (int64_t j = 0; j < k->J; j++) {
        int64_t v = pcu_ldi(idx, k->idx_t, j);
        if (v < -k->D || v >= k->D) {
            if (err) *err = 1;
            continue;
        }
        if (v < 0) v += k->D;
        col[v * k->inner] += src[j * k->inner];
    }
}

/* ---- TopK: one thread per line, k selections ----------------------------------------------- */

/* The order of the reference kernel's stable sort (onnxruntime's): by value
 * (descending when largest), NaN above every number, all NaNs equal, -0 ==
 * +0, equal values by index; the j-th output is the first element after the
 * (j-1)-th in that order (k scans of the line, no local memory). t: f32, f64,
 * i32 or i64. yi: NULL when the indices are not wanted. */
typedef struct pcu_topk {
    int32_t t, largest, pad_[2];
    int64_t outer, len, inner, k;
} pcu_topk;

/* x[a] > x[b] as the reference's topk_gt: NaN beats every number, nothing
 * beats NaN. */
PCU_HD int pcu_topk_gt(const pcu_topk *k, const void *x, int64_t a, int64_t b) {
    if (k->t == PCU_T_F32 || k->t == PCU_T_F64) {
        const double va = pcu_ldd(x, k->t, a), vb = pcu_ldd(x, k->t, b);
        return (va != va && vb == vb) || va > vb;
    }
    return pcu_ldi(x, k->t, a) > pcu_ldi(x, k->t, b);
}

/* Element ea of the line before element eb. */
PCU_HD int pcu_topk_before(const pcu_topk *k, const void *x, int64_t base, int64_t ea, int64_t eb) {
    const int64_t pa = base + ea * k->inner, pb = base + eb * k->inner;
    const int64_t hi = k->largest ? pa : pb, lo = k->largest ? pb : pa;
    if (pcu_topk_gt(k, x, hi, lo)) return 1;
    if (pcu_topk_gt(k, x, lo, hi)) return 0;
    return ea < eb;
}

PCU_HD void pcu_topk_at(const pcu_topk *k, void *yv, int64_t *yi, const void *x, int64_t line) {
    const int64_t o = line / k->inner, in = line % k->inner;
    const int64_t base = o * k->len * k->inner + in, obase = o * k->k * k->inner + in;
    const int es = pcu_tsize(k->t);
    int64_t prev = -1;
    for (int64_t j = 0; j < k->k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < k->len; e++) {
            if (prev >= 0 && !pcu_topk_before(k, x, base, prev, e)) continue;
            if (best < 0 || pcu_topk_before(k, x, base, e, best)) best = e;
        }
        if (best < 0) return; /* k > len: the planner never asks */
        pcu_copy_elem(yv, obase + j * k->inner, x, base + best * k->inner, es);
        if (yi) yi[obase + j * k->inner] = best;
        prev = best;
    }
}

/* ---- the epilogue of a convolution run without its fused ops ----------------------------- */

/* y[i] = act(y[i] + bias[c] + res[i]), c = (i / s) % c: what a cuDNN graph of
 * convolution, bias, residual and activation computes after the convolution,
 * for engines that run the convolution alone. act: 0 none, 1 Relu, 2 Clip. */
typedef struct pcu_epi {
    int32_t act, has_bias, has_res;
    int32_t t; /* y's, bias's and res's type (pcu_rhalf: a half plan's convolution) */
    int64_t n, c, s;
    float lo, hi;
} pcu_epi;

PCU_HD float pcu_act(int act, float v, float lo, float hi) {
    if (act == 1) return v < 0 ? 0.0f : v;
    if (act == 2) return v < lo ? lo : v > hi ? hi : v;
    return v;
}

PCU_HD void pcu_epi_at(const pcu_epi *k, void *y, const void *bias, const void *res, int64_t i) {
    float v = pcu_rld(y, k->t, i);
    if (k->has_bias) v += pcu_rld(bias, k->t, pcu_mod(pcu_div(i, k->s), k->c));
    if (k->has_res) v += pcu_rld(res, k->t, i);
    pcu_rst(y, k->t, i, pcu_act(k->act, v, k->lo, k->hi));
}

/* ---- ScatterElements and ScatterND: one thread per run of updates that may meet --------- */

/* y holds the data already (a copy step before); each thread applies, in
 * the reference kernel's order, the updates that can land on the same
 * elements, so repeated positions end as the reference leaves them (the
 * last wins, or they reduce in order) and threads never share an element.
 *   ScatterElements (nd 0): thread = a line of updates along the axis (its
 *     other coordinates), run = the updates' extent along the axis; the
 *     update at flat index u goes to y at its coordinates with the axis one
 *     replaced by indices[u].
 *   ScatterND (nd 1): thread j = the j-th element of every slice, run = the
 *     index tuples (q numbers each, into y's first q dims); tuple t's slice
 *     starts at sum of indices * yst. Out of range sets *err (the stage
 *     fails, as the reference does). red: PCU_SC_*; not NONE only for f32,
 *     f64 and integers (integers wrap; max/min of floats keep a NaN of y). */
enum { PCU_SC_NONE, PCU_SC_ADD, PCU_SC_MUL, PCU_SC_MAX, PCU_SC_MIN };
typedef struct pcu_scatter {
    int32_t nd, rank, axis, t, esize, idx_t, red, q;
    int64_t threads, run, slice, yn; /* yn: y's elements */
    int64_t dim[PCU_MAXD];           /* nd 0: the updates' dims; nd 1: y's first q dims */
    int64_t ust[PCU_MAXD];           /* nd 0: the updates' strides */
    int64_t yst[PCU_MAXD];           /* y's strides */
} pcu_scatter;

PCU_HD void pcu_scatter_put(const pcu_scatter *k, void *y, int64_t o, const void *u, int64_t s) {
    if (k->red == PCU_SC_NONE) {
        pcu_copy_elem(y, o, u, s, k->esize);
        return;
    }
    /* the elementwise kernel's arithmetic: floats in their type, integers wrapping */
    const int op = k->red == PCU_SC_ADD ? PCU_EW_ADD : k->red == PCU_SC_MUL ? PCU_EW_MUL
                   : k->red == PCU_SC_MAX ? PCU_EW_MAX : PCU_EW_MIN;
    if (k->t == PCU_T_F32) ((float *)y)[o] = pcu_binary_f(op, ((const float *)y)[o], ((const float *)u)[s]);
    else if (k->t == PCU_T_F64) ((double *)y)[o] = pcu_binary_d(op, ((const double *)y)[o], ((const double *)u)[s]);
    else if (pcu_is_signed(k->t)) pcu_sti(y, k->t, o, pcu_binary_i(op, pcu_ldi(y, k->t, o), pcu_ldi(u, k->t, s)));
    else pcu_sti(y, k->t, o, (int64_t)pcu_binary_u(op, (uint64_t)pcu_ldi(y, k->t, o), (uint64_t)pcu_ldi(u, k->t, s)));
}

PCU_HD void pcu_scatter_at(const pcu_scatter *k, void *y, const void *idx, const void *upd, int *err, int64_t i) {
    if (k->nd) {
        for (int64_t t = 0; t < k->run; t++) {
            int64_t off = 0;
            for (int c = 0; c < k->q; c++) {
                int64_t v = pcu_ldi(idx, k->idx_t, t * k->q + c);
                if (v < -k->dim[c] || v >= k->dim[c]) {
                    if (err) *err = 1;
                    return;
                }
                off += (v < 0 ? v + k->dim[c] : v) * k->yst[c];
            }
            pcu_scatter_put(k, y, off + i, upd, t * k->slice + i);
        }
        return;
    }
    int64_t rem = i, u0 = 0, base = 0;
    for (int d = k->rank - 1; d >= 0; d--) {
        if (d == k->axis) continue;
        const int64_t c = pcu_divmod(&rem, k->dim[d]);
        u0 += c * k->ust[d], base += c * k->yst[d];
    }
    const int64_t len = k->slice; /* nd 0: y's extent along the axis */
    for (int64_t j = 0; j < k->run; j++) {
        const int64_t u = u0 + j * k->ust[k->axis];
        int64_t v = pcu_ldi(idx, k->idx_t, u);
        if (v < -len || v >= len) {
            if (err) *err = 1;
            return;
        }
        pcu_scatter_put(k, y, base + (v < 0 ? v + len : v) * k->yst[k->axis], upd, u);
    }
}

/* ---- Trilu: one thread per element --------------------------------------------------------- */

/* y = x where column - row >= k (upper) or <= k (lower) in each rows x cols
 * matrix of the last two dims, zero bytes elsewhere (as the reference). */
typedef struct pcu_trilu {
    int32_t upper, esize;
    int64_t rows, cols, k, n;
} pcu_trilu;

PCU_HD void pcu_trilu_at(const pcu_trilu *k, void *y, const void *x, int64_t i) {
    int64_t q = i;
    const int64_t c = pcu_divmod(&q, k->cols), r = pcu_mod(q, k->rows);
    const int keep = k->upper ? c - r >= k->k : c - r <= k->k;
    if (keep) {
        pcu_copy_elem(y, i, x, i, k->esize);
        return;
    }
    switch (k->esize) {
    case 1: ((uint8_t *)y)[i] = 0; break;
    case 2: ((uint16_t *)y)[i] = 0; break;
    case 4: ((uint32_t *)y)[i] = 0; break;
    default: ((uint64_t *)y)[i] = 0; break;
    }
}

/* ---- RotaryEmbedding: one thread per output element -------------------------------------- */

/* As the reference (ref_attn.c): x [B, H, S, D] or [B, S, H*D] (three_d);
 * the pair (i1, i2) of rotated element e (interleaved: 2i, 2i+1; else i,
 * i + rot/2) turned by the cache's cos and sin at row b*S + s, or at
 * position_ids[b, s] (out of [0, max_pos): *err); elements past rot copied.
 * y must not share bytes with x (a thread reads its pair partner). */
typedef struct pcu_rope {
    int32_t three_d, interleaved, has_pos, pad_;
    int64_t B, H, S, D, rot, max_pos, n;
} pcu_rope;

PCU_HD void pcu_rope_at(const pcu_rope *k, float *y, const float *x, const float *cc, const float *sc,
                        const int64_t *pos, int *err, int64_t i) {
    const int64_t e = i % k->D;
    int64_t r = i / k->D, b, s;
    if (k->three_d) {
        r /= k->H; /* [B, S, H, D] */
        s = r % k->S, b = r / k->S;
    } else {
        s = r % k->S; /* [B, H, S, D] */
        b = r / k->S / k->H;
    }
    if (e >= k->rot) {
        y[i] = x[i];
        return;
    }
    int64_t row = b * k->S + s;
    if (k->has_pos) {
        row = pos[b * k->S + s];
        if (row < 0 || row >= k->max_pos) {
            if (err) *err = 1;
            return;
        }
    }
    const int64_t half = k->rot / 2, base = i - e;
    const int64_t pi = k->interleaved ? e / 2 : e < half ? e : e - half;
    const int first = k->interleaved ? (e & 1) == 0 : e < half;
    const int64_t i1 = k->interleaved ? 2 * pi : pi, i2 = k->interleaved ? 2 * pi + 1 : pi + half;
    const float x1 = x[base + i1], x2 = x[base + i2], c = cc[row * half + pi], sn = sc[row * half + pi];
    y[i] = first ? c * x1 - sn * x2 : sn * x1 + c * x2;
}

/* ---- Attention: one thread per query row ---------------------------------------------------- */

/* As the reference (ref_attn.c), step for step and in its order: scores
 * s_j = float(q . k_j in double * scale), softcap, + mask (bool false,
 * positions past the mask's last dim, the causal triangle and keys past
 * nonpad_kv_seqlen: -inf), softmax in double (the row's T values in the
 * scratch operand), y_e = sum_j p_j v_j[e] in double. Key/value row j of
 * head g: past_key/past_value for j < P, then K/V. The present outputs
 * are strided copies the planner adds before. qk: the optional
 * scores/probabilities output (qk_mode 0..3 as the reference). */
typedef struct pcu_attn {
    int32_t three_d, causal, has_mask, mask_bool, has_nonpad, qk_mode;
    int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv, rows;
    int64_t mdim[4];
    float scale, softcap;
} pcu_attn;

PCU_HD const float *pcu_attn_kv(const pcu_attn *t, const float *X, const float *PX, int64_t dim, int64_t b, int64_t g,
                                int64_t j) {
    if (j < t->P) return PX + ((b * t->Hkv + g) * t->P + j) * dim;
    return t->three_d ? X + (b * t->Skv + j - t->P) * t->Hkv * dim + g * dim : X + ((b * t->Hkv + g) * t->Skv + j - t->P) * dim;
}

PCU_HD float pcu_attn_mask(const pcu_attn *t, const void *m, int64_t b, int64_t h, int64_t i, int64_t j) {
    const int64_t *s = t->mdim;
    if (j >= s[3]) return -INFINITY;
    const int64_t off = (((s[0] == 1 ? 0 : b) * s[1] + (s[1] == 1 ? 0 : h)) * s[2] + (s[2] == 1 ? 0 : i)) * s[3] + j;
    if (t->mask_bool) return ((const uint8_t *)m)[off] ? 0.0f : -INFINITY;
    return ((const float *)m)[off];
}

PCU_HD void pcu_attn_at(const pcu_attn *t, float *Y, float *qk_out, double *scratch, const float *Q, const float *K,
                        const float *V, const void *mask, const float *PK, const float *PV, const int64_t *nonpad,
                        int64_t r) {
    const int64_t i = r % t->Sq, h = (r / t->Sq) % t->Hq, b = r / t->Sq / t->Hq, g = h / (t->Hq / t->Hkv);
    const float *q = t->three_d ? Q + (b * t->Sq + i) * t->Hq * t->D + h * t->D : Q + ((b * t->Hq + h) * t->Sq + i) * t->D;
    float *qk = qk_out ? qk_out + ((b * t->Hq + h) * t->Sq + i) * t->T : 0;
    double *sc = scratch + r * t->T, mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < t->T; j++) {
        const float *kr = pcu_attn_kv(t, K, PK, t->D, b, g, j);
        double d = 0;
        for (int64_t e = 0; e < t->D; e++) d += (double)q[e] * kr[e];
        float s = (float)(d * t->scale);
        if (t->softcap > 0) s = t->softcap * tanhf(s / t->softcap);
        if (qk && t->qk_mode <= 1) qk[j] = s;
        float bias = t->has_mask ? pcu_attn_mask(t, mask, b, h, i, j) : 0.0f;
        if (t->causal && j >= t->P && j - t->P > i) bias += -INFINITY;
        if (t->has_nonpad && j >= nonpad[b]) bias += -INFINITY;
        s += bias;
        if (qk && t->qk_mode == 2) qk[j] = s;
        sc[j] = s;
        if (s > mx) mx = s;
    }
    for (int64_t j = 0; j < t->T; j++) sum += sc[j] = exp(sc[j] - mx);
    for (int64_t j = 0; j < t->T; j++) {
        sc[j] /= sum;
        if (qk && t->qk_mode == 3) qk[j] = (float)sc[j];
    }
    float *y = t->three_d ? Y + (b * t->Sq + i) * t->Hq * t->Dv + h * t->Dv : Y + ((b * t->Hq + h) * t->Sq + i) * t->Dv;
    for (int64_t e = 0; e < t->Dv; e++) {
        double a = 0;
        for (int64_t j = 0; j < t->T; j++) a += sc[j] * pcu_attn_kv(t, V, PV, t->Dv, b, g, j)[e];
        y[e] = (float)a;
    }
}

/* ---- Fused attention: MatMul, [Mul|Div by a scalar], Softmax, MatMul in one launch --------- */

/* The FlashAttention-2 form in f32 (--cuda-fused-attention on; not yet run
 * on a GPU): Y = softmax(scale(qscale(Q) K)) V over nb = B * nh batches (batch b,
 * head h) of Q [Sq, D] (ppcc's MatMul's left operand, or ONNX Attention's
 * Q), K [D, T] (the MatMul's right operand, or Attention's K: element (e, j)
 * at j * kj + e * ke), V [T, Dv] and Y [Sq, Dv] (and the scores' masks, M and
 * a windowed F, each with strides of its own), each operand's batch at b
 * * Xb + h * Xh (K and V: head h / grp, grouped-query attention), D and Dv
 * <= PCU_FA_DMAX. A cooperative kernel (kernels.def PCU_COOP): a block of
 * PCU_BLOCK lanes per (batch, tile of bq query rows), tpr lanes per query
 * row, in one of two geometries (pcu_fa_geo): heads up to 64 wide in tiles
 * of 64 query rows, 4 lanes each, and 32 keys; wider heads (Llama's 128) in
 * tiles of 32 rows, 8 lanes each, and 16 keys, so that the tiles still fit
 * the 48 KiB of static shared memory; the keys in tiles through shared
 * memory (pcu_fattn_sh), the softmax online: a running max (NaN-keeping), a running
 * sum and an accumulator rescaled by exp(old max - new max) per tile, kept
 * per lane across phases (pcu_fattn_lane: registers on the GPU, an array on
 * the emulator). Phase 0 reads the query tile; then per key tile four phases
 * with a barrier after each: A the K and V tiles into shared memory, B the
 * lane's scores (its keys t, t + tpr, ...) and their max, C the tile's max
 * (the row's tpr partials in lane order), the new running max and the
 * lane's exp(s - max), D the row's sum (every key of the tile in order) and
 * the lane's output columns (t, t + tpr, ...; a fused multiply-add per key in
 * order); the last D writes Y = acc / sum. Every sum has a fixed order, so
 * the result does not depend on scheduling, and the emulator runs the same
 * expressions lane by lane. Scores past T are -inf (probability 0); a row
 * whose scores are all -inf gives 0 / 0 = NaN, as the reference's softmax;
 * a NaN or +inf score makes its row NaN, as there. */
#define PCU_FA_BQ 64     /* query rows of a block (narrow heads; wide: PCU_FA_BQ / 2) */
#define PCU_FA_TPR 4     /* lanes per query row (wide: 2 * PCU_FA_TPR): bq * tpr == PCU_BLOCK */
#define PCU_FA_LANES (PCU_FA_BQ * PCU_FA_TPR) /* a block's lanes, either geometry */
#define PCU_FA_BK 32     /* keys of a tile (wide: PCU_FA_BK / 2) */
#define PCU_FA_DNARROW 64 /* the largest D and Dv of the narrow geometry */
#define PCU_FA_DMAX 128  /* largest D and Dv */
#define PCU_FA_DL 16     /* output columns of a lane: 64 / 4 or 128 / 8 */
#define PCU_FA_KLMAX 8   /* keys of a lane in a tile: 32 / 4 (wide: 16 / 8 = 2) */
/* floats of a block's shared memory: the narrow geometry's at D = Dv = 64 (the wide one's at 128 is 9,040) */
#define PCU_FA_SH (PCU_FA_BQ * 65 + PCU_FA_BK * 65 + PCU_FA_BK * 64 + PCU_FA_BQ * (PCU_FA_BK + 1) + PCU_FA_BQ * PCU_FA_TPR)

typedef struct pcu_fattn {
    int32_t scale_op; /* 0 none, 1 s * scale, 2 s / scale (the node between MatMul and Softmax), 3 s times the
                       * head's scale, element b % nh of operand 7 (type t: SwinV2's logit scale [H, 1, 1]) */
    int32_t t;        /* Q's, K's, V's and Y's type (pcu_rhalf: a half plan's pattern; f32 inside either way) */
    float scale, qscale;
    int32_t qscale_op;       /* 0 none, 1 q * qscale, 2 q / qscale: the Mul or Div of Q by a scalar before the first
                              * MatMul (torch's q / sqrt(d)), as that node computes it, rounded to t as it stores it */
    int32_t mask;            /* 1: an Add of a mask M (operand 4, type t) after the scale: s = scale(q k) + M */
    int32_t where;           /* a Where on the scores: 1 before the scale, 2 after it (0: none): the score where
                              * the bool condition C (operand 5) is wthen, else fill */
    int32_t wthen;           /* 1: the scores are the Where's second input (kept where C), 0: its third */
    float fill;              /* the Where's constant, as its type holds it */
    int32_t wadd;            /* 1: the fill is added where C is not wthen, not put (ONNX Attention's bool mask:
                              * s + -inf, so a NaN or +inf score stays NaN as the reference gives it) */
    int32_t causal;          /* 1: -inf added to the scores of keys after the query's row (ONNX Attention's
                              * is_causal without a past) */
    int32_t pad_;
    int64_t nb, nh, grp, Sq, T, D, Dv, qtiles; /* nb: batches (B * nh); qtiles: ceil(Sq / PCU_FA_BQ) */
    /* element strides: batch, head, row (key), column; the mask's and the condition's per batch, head, query
     * row and key (0 where it is broadcast) */
    int64_t qb, qh, qi, qe, kb, kh, kj, ke, vb, vh, vj, ve, yb, yh, yi, mb, mh, mi, mj, cb, ch, ci, cj;
    /* fmask 1: a second mask F (operand 6, type t) added after M, read in a frame of windows (Swin's shifted
     * windows: the scores [B * fwn, nh, S, T] viewed as [B, fwn, nh, S, T]): batch bh's window (bh / nh) % fwn,
     * its batch bh / nh / fwn; F's strides per batch, window, head, query row and key */
    int32_t fmask, pad2_;
    int64_t fwn, fb, fw, fh, fi, fj;
} pcu_fattn;

/* Where batch bh's matrix of Q (w 0), K (1), V (2) or Y (3) starts. */
PCU_HD int64_t pcu_fattn_base(const pcu_fattn *k, int w, int64_t bh) {
    const int64_t b = bh / k->nh, h = bh % k->nh;
    switch (w) {
    case 0: return b * k->qb + h * k->qh;
    case 1: return b * k->kb + h / k->grp * k->kh;
    case 2: return b * k->vb + h / k->grp * k->vh;
    default: return b * k->yb + h * k->yh;
    }
}

/* a block's shared memory (41.6 KiB of the 48 a block may have statically),
 * laid out by the geometry (pcu_fa_geo): the query tile [bq][qs], the key
 * and value tiles [bk][qs] and [bk][Dv] (Q's and K's rows an odd number of
 * floats apart against bank conflicts: a warp reads 8 query rows and 4 key
 * rows at once, or 4 and 8), the scores / probabilities [bq][bk + 1] and the
 * rows' max partials [bq][tpr] */
typedef struct pcu_fattn_sh {
    float f[PCU_FA_SH];
} pcu_fattn_sh;

/* a lane's state between phases */
typedef struct pcu_fattn_lane {
    float acc[PCU_FA_DL];
    float m, l, alpha;
} pcu_fattn_lane;

/* The kernel's geometry for k's head dims: query rows of a block, lanes per row, keys of a tile and of a lane;
 * the query and key rows' stride in shared memory and where K, V, the scores and the max partials start */
typedef struct pcu_fa_geo {
    int bq, tpr, bk, kl, qs, ko, vo, po, pmo;
} pcu_fa_geo;

PCU_HD pcu_fa_geo pcu_fa_geo_of(const pcu_fattn *k) {
    const int wide = k->D > PCU_FA_DNARROW || k->Dv > PCU_FA_DNARROW;
    pcu_fa_geo g;
    g.bq = wide ? PCU_FA_BQ / 2 : PCU_FA_BQ, g.tpr = wide ? 2 * PCU_FA_TPR : PCU_FA_TPR;
    g.bk = wide ? PCU_FA_BK / 2 : PCU_FA_BK, g.kl = g.bk / g.tpr, g.qs = (int)k->D | 1;
    g.ko = g.bq * g.qs, g.vo = g.ko + g.bk * g.qs, g.po = g.vo + g.bk * (int)k->Dv, g.pmo = g.po + g.bq * (g.bk + 1);
    return g;
}

/* blocks per batch: tiles of query rows */
PCU_HD int64_t pcu_fattn_qtiles(const pcu_fattn *k) {
    const int64_t bq = pcu_fa_geo_of(k).bq;
    return (k->Sq + bq - 1) / bq;
}

PCU_HD int pcu_fattn_phases(const pcu_fattn *k) {
    const int64_t bk = pcu_fa_geo_of(k).bk;
    return 1 + 4 * (int)((k->T + bk - 1) / bk);
}

/* phase 0: the query tile, the lane's state */
PCU_HD void pcu_fattn_init(const pcu_fattn *k, const pcu_fa_geo *g, const void *q, pcu_fattn_sh *sh,
                           pcu_fattn_lane *st, int64_t b, int64_t i0, int l) {
    for (int idx = l; idx < g->bq * (int)k->D; idx += PCU_FA_LANES) {
        const int row = idx / (int)k->D, e = idx % (int)k->D;
        float x = i0 + row < k->Sq ? pcu_rld(q, k->t, pcu_fattn_base(k, 0, b) + (i0 + row) * k->qi + e * k->qe) : 0.0f;
        if (k->qscale_op) x = pcu_rround(k->t, k->qscale_op == 1 ? x * k->qscale : x / k->qscale);
        sh->f[row * g->qs + e] = x;
    }
    PCU_UNROLL
    for (int c = 0; c < PCU_FA_DL; c++) st->acc[c] = 0.0f;
    st->m = -INFINITY, st->l = 0.0f, st->alpha = 1.0f;
}

/* phase A: key tile j0's K and V (zeros past T) */
PCU_HD void pcu_fattn_load(const pcu_fattn *k, const pcu_fa_geo *g, const void *kk, const void *v,
                           pcu_fattn_sh *sh, int64_t b, int64_t j0, int l) {
    const int D = (int)k->D, Dv = (int)k->Dv, bk = g->bk;
    for (int idx = l; idx < bk * D; idx += PCU_FA_LANES) { /* consecutive lanes along K's contiguous axis */
        const int jj = k->kj == 1 ? idx % bk : idx / D, e = k->kj == 1 ? idx / bk : idx % D;
        sh->f[g->ko + jj * g->qs + e] =
            j0 + jj < k->T ? pcu_rld(kk, k->t, pcu_fattn_base(k, 1, b) + (j0 + jj) * k->kj + e * k->ke) : 0.0f;
    }
    for (int idx = l; idx < bk * Dv; idx += PCU_FA_LANES) {
        const int jj = idx / Dv, e = idx % Dv;
        sh->f[g->vo + idx] = j0 + jj < k->T ? pcu_rld(v, k->t, pcu_fattn_base(k, 2, b) + (j0 + jj) * k->vj + e * k->ve)
                                            : 0.0f;
    }
}

/* The element of a mask-like operand (strides sb, sh per batch and head, si, sj per query row and key) that
 * score (batch b, query row i, key j) reads */
PCU_HD int64_t pcu_fattn_moff(const pcu_fattn *k, int64_t sb, int64_t sh, int64_t si, int64_t sj, int64_t b,
                              int64_t i, int64_t j) {
    return b / k->nh * sb + b % k->nh * sh + i * si + j * sj;
}

/* The element of the windowed mask F (fmask) that score (batch b, query row i, key j) reads */
PCU_HD int64_t pcu_fattn_foff(const pcu_fattn *k, int64_t b, int64_t i, int64_t j) {
    const int64_t bw = b / k->nh;
    return bw / k->fwn * k->fb + bw % k->fwn * k->fw + b % k->nh * k->fh + i * k->fi + j * k->fj;
}

/* The Where's choice for score v of batch b, query row i, key j: v where the condition is wthen, else the fill
 * put (or, wadd, added) */
PCU_HD float pcu_fattn_where(const pcu_fattn *k, const void *cond, int64_t b, int64_t i, int64_t j, float v) {
    const int c = ((const unsigned char *)cond)[pcu_fattn_moff(k, k->cb, k->ch, k->ci, k->cj, b, i, j)] != 0;
    return c == k->wthen ? v : k->wadd ? v + k->fill : k->fill;
}

/* phase B: the lane's scores of tile j0 and their max (each score's products
 * summed in e's order; q[e] read once for the lane's kl keys); the
 * Where's choice before or after the scale; the mask's element added after
 * them and the sum rounded to t, as the graph's Add computes and stores it
 * (so an fp16 plan's row masked whole at -65504 stays uniform, as the
 * graph's), then the windowed mask's the same way; causality's -inf added
 * last (rows past Sq read none of them) */
PCU_HD void pcu_fattn_scores(const pcu_fattn *k, const pcu_fa_geo *g, const void *mask, const void *cond,
                             const void *fm, const void *hs, pcu_fattn_sh *sh, int64_t b, int64_t i, int64_t j0,
                             int row, int t) {
    float s[PCU_FA_KLMAX];
    const float *qr = sh->f + row * g->qs, *kt = sh->f + g->ko + t * g->qs;
    const int ks = g->tpr * g->qs; /* the lane's next key */
    PCU_UNROLL
    for (int c = 0; c < PCU_FA_KLMAX; c++) s[c] = 0.0f;
    for (int e = 0; e < (int)k->D; e++) {
        const float qe = qr[e];
        PCU_UNROLL
        for (int c = 0; c < PCU_FA_KLMAX; c++)
            if (c < g->kl) s[c] = fmaf(qe, kt[c * ks + e], s[c]);
    }
    float mx = -INFINITY;
    PCU_UNROLL
    for (int c = 0; c < PCU_FA_KLMAX; c++) {
        if (c >= g->kl) break;
        const int jj = t + g->tpr * c;
        float v = s[c];
        const int in = i < k->Sq && j0 + jj < k->T;
        if (k->where == 1 && in) v = pcu_fattn_where(k, cond, b, i, j0 + jj, v);
        if (k->scale_op == 1) v = v * k->scale;
        else if (k->scale_op == 2) v = v / k->scale;
        else if (k->scale_op == 3) v = v * pcu_rld(hs, k->t, b % k->nh);
        if (k->where == 2 && in) v = pcu_fattn_where(k, cond, b, i, j0 + jj, v);
        if (k->mask && in)
            v = pcu_rround(k->t, v + pcu_rld(mask, k->t, pcu_fattn_moff(k, k->mb, k->mh, k->mi, k->mj, b, i, j0 + jj)));
        if (k->fmask && in) v = pcu_rround(k->t, v + pcu_rld(fm, k->t, pcu_fattn_foff(k, b, i, j0 + jj)));
        if (k->causal && in && j0 + jj > i) v = v + -INFINITY;
        if (j0 + jj >= k->T) v = -INFINITY; /* past the keys: probability 0 */
        sh->f[g->po + row * (g->bk + 1) + jj] = v;
        mx = pcu_nanmax(mx, v);
    }
    sh->f[g->pmo + row * g->tpr + t] = mx;
}

/* phase C: the new running max, the lane's probabilities */
PCU_HD void pcu_fattn_exp(const pcu_fa_geo *g, pcu_fattn_sh *sh, pcu_fattn_lane *st, int row, int t) {
    const float *pm = sh->f + g->pmo + row * g->tpr;
    float *p = sh->f + g->po + row * (g->bk + 1);
    float mt = pm[0];
    for (int u = 1; u < g->tpr; u++) mt = pcu_nanmax(mt, pm[u]);
    const float m = pcu_nanmax(st->m, mt);
    const int none = m == -INFINITY; /* every score so far -inf: nothing to weigh yet */
    st->alpha = none ? 1.0f : expf(st->m - m);
    st->m = m;
    for (int c = 0; c < g->kl; c++) {
        const int jj = t + g->tpr * c;
        p[jj] = none ? 0.0f : expf(p[jj] - m);
    }
}

/* phase D: the row's running sum, the lane's columns; the last tile writes y */
PCU_HD void pcu_fattn_acc(const pcu_fattn *k, const pcu_fa_geo *g, void *y, pcu_fattn_sh *sh, pcu_fattn_lane *st,
                          int64_t b, int64_t i, int row, int t, int last) {
    const float *pr = sh->f + g->po + row * (g->bk + 1), *vt = sh->f + g->vo + t;
    const int Dv = (int)k->Dv;
    float ps = 0.0f;
    for (int jj = 0; jj < g->bk; jj++) ps += pr[jj];
    st->l = st->l * st->alpha + ps;
    PCU_UNROLL
    for (int c = 0; c < PCU_FA_DL; c++) st->acc[c] *= st->alpha;
    for (int jj = 0; jj < g->bk; jj++) {
        const float p = pr[jj];
        PCU_UNROLL
        for (int c = 0; c < PCU_FA_DL; c++)
            if (t + g->tpr * c < Dv) st->acc[c] = fmaf(p, vt[jj * Dv + g->tpr * c], st->acc[c]);
    }
    if (!last || i >= k->Sq) return;
    const int64_t yr = pcu_fattn_base(k, 3, b) + i * k->yi;
    PCU_UNROLL
    for (int c = 0; c < PCU_FA_DL; c++)
        if (t + g->tpr * c < Dv) pcu_rst(y, k->t, yr + t + g->tpr * c, st->acc[c] / st->l);
}

/* Lane l of block r in phase ph (kernels.def PCU_COOP). */
PCU_HD void pcu_fattn_ph(const pcu_fattn *k, int ph, void *y, const void *q, const void *kk, const void *v,
                         const void *mask, const void *cond, const void *fm, const void *hs, pcu_fattn_sh *sh,
                         pcu_fattn_lane *st, int64_t r, int l) {
    const pcu_fa_geo g = pcu_fa_geo_of(k);
    const int64_t b = r / k->qtiles, i0 = r % k->qtiles * g.bq;
    const int row = l / g.tpr, t = l % g.tpr;
    if (ph == 0) {
        pcu_fattn_init(k, &g, q, sh, st, b, i0, l);
        return;
    }
    const int64_t tile = (ph - 1) / 4, j0 = tile * g.bk;
    switch ((ph - 1) % 4) {
    case 0: pcu_fattn_load(k, &g, kk, v, sh, b, j0, l); break;
    case 1: pcu_fattn_scores(k, &g, mask, cond, fm, hs, sh, b, i0 + row, j0, row, t); break;
    case 2: pcu_fattn_exp(&g, sh, st, row, t); break;
    default: pcu_fattn_acc(k, &g, y, sh, st, b, i0 + row, row, t, j0 + g.bk >= k->T); break;
    }
}

/* ---- QuantizeLinear, DequantizeLinear: one thread per element ------------------------------ */

/* The scale (and zero point) of element i: per tensor, per axis (len
 * entries along it, inner elements apart), or in blocks of `block` along
 * it (ir/op_fns.h pp_quant; the reference kernel's quant_index). */
typedef struct pcu_quant {
    int32_t dequant, qt, has_zp, per_tensor; /* qt: the quantized type (PCU_T_*) */
    int64_t n, inner, len, block;
    int32_t lo, hi; /* Quantize: the type's range */
} pcu_quant;

PCU_HD int64_t pcu_quant_index(const pcu_quant *q, int64_t i) {
    if (q->per_tensor) return 0;
    const int64_t a = i / q->inner % q->len;
    if (!q->block) return a;
    const int64_t nb = (q->len + q->block - 1) / q->block, o = i / (q->inner * q->len);
    return (o * nb + a / q->block) * q->inner + i % q->inner;
}

/* Quantize: y = clamp(rint(x / scale) + zero_point) (the division in float, a
 * NaN to the zero point); Dequantize: y = (x - zero_point) * scale. */
PCU_HD void pcu_quant_at(const pcu_quant *q, void *y, const void *x, const float *scale, const void *zp, int64_t i) {
    const int64_t j = pcu_quant_index(q, i);
    const int64_t z = q->has_zp ? pcu_ldi(zp, q->qt, j) : 0;
    if (q->dequant) {
        ((float *)y)[i] = (float)(pcu_ldi(x, q->qt, i) - z) * scale[j];
        return;
    }
    const float r = rintf(((const float *)x)[i] / scale[j]);
    const double v = r != r ? (double)z : fmin(fmax((double)r + (double)z, (double)q->lo), (double)q->hi);
    pcu_sti(y, q->qt, i, (int64_t)v);
}

/* ---- GridSample: one thread per output element ----------------------------------------------- */

/* X [N, C, in...] sampled at grid [N, P points, k] (k <= 3 spatial axes,
 * each point's coordinates the last axis's first) into Y [N, C, P]. mode:
 * 0 linear, 1 nearest, 2 cubic; pad: 0 zeros, 1 border, 2 reflection (ir's
 * pp_gs_mode and pp_gs_pad). The reference kernel's taps and order
 * (runtime/cpu/ref_nn.c kern_GRIDSAMPLE), so the emulator gives its bits. */
#define PCU_GS_MAXK 3
typedef struct pcu_gridsample {
    int32_t mode, pad, align, k;
    int64_t C, P, S, n;        /* channels, output points a sample, input points a channel, outputs */
    int64_t in[PCU_GS_MAXK];   /* input spatial dims (1 past k) */
} pcu_gridsample;

/* a * b rounded once: no fused multiply-add on the GPU, so the coordinate is
 * the float the CPU computes (a point halfway between pixels rounds alike) */
#ifdef __CUDA_ARCH__
#define PCU_FMUL(a, b) __fmul_rn((a), (b))
#else
#define PCU_FMUL(a, b) ((a) * (b))
#endif
/* the same in double (a product added to a sum: without it the GPU fuses
 * the two, rounding once where the reference rounds twice) */
#ifdef __CUDA_ARCH__
#define PCU_DMUL(a, b) __dmul_rn((a), (b))
#else
#define PCU_DMUL(a, b) ((a) * (b))
#endif

PCU_HD int64_t pcu_gs_pixel(int pad, int64_t i, int64_t len, double lo, double hi) {
    if (pad == 0) return i < 0 || i >= len ? -1 : i;
    if (pad == 1) return i < 0 ? 0 : i >= len ? len - 1 : i;
    const int64_t r = (int64_t)pp_reflect((double)i, lo, hi);
    return r < 0 ? 0 : r >= len ? len - 1 : r;
}

/* The taps of one axis of len for normalized coordinate v: their count (0:
 * a NaN coordinate), input indices (-1: a zero) and weights; where dw is
 * not NULL (the gradient's), also each weight's derivative by v: the
 * unnormalizing scale times the weight's slope, 0 where the coordinate is
 * clamped or the mode nearest (runtime/cpu/ref_nn.c gs_axis). */
PCU_HD int pcu_gs_axis(const pcu_gridsample *g, float v, int64_t len, int64_t *idx, double *w, double *dw) {
    const float Lf = (float)len;
    const float xf = g->align ? PCU_FMUL((v + 1.0f) / 2.0f, Lf - 1.0f) : (PCU_FMUL(v + 1.0f, Lf) - 1.0f) / 2.0f;
    const double L = (double)len, lo = g->align ? 0.0 : -0.5, hi = g->align ? L - 1 : L - 0.5;
    double x = g->mode == 1 ? rint((double)xf) : (double)xf;
    double dxdv = g->mode == 1 ? 0.0 : g->align ? (L - 1) / 2 : L / 2;
    if (dw)
        PCU_UNROLL
        for (int j = 0; j < 4; j++) dw[j] = 0;
    if (x != x) return 0;
    if (x < -8 || x > L + 7) {
        if (g->pad == 0) {
            idx[0] = -1, w[0] = 1;
            return 1;
        }
        if (g->pad == 1) x = x < 0 ? -8 : L + 7, dxdv = 0;
        else x = lo + fmod(fmod(x - lo, 2 * (hi - lo)) + 2 * (hi - lo), 2 * (hi - lo));
        if (x != x) return 0;
    }
    const double x0 = floor(x), f = x - x0;
    const int64_t i0 = (int64_t)x0;
    if (g->mode == 1) {
        idx[0] = pcu_gs_pixel(g->pad, i0, len, lo, hi), w[0] = 1;
        return 1;
    }
    if (g->mode == 0) {
        idx[0] = pcu_gs_pixel(g->pad, i0, len, lo, hi), w[0] = 1 - f;
        idx[1] = pcu_gs_pixel(g->pad, i0 + 1, len, lo, hi), w[1] = f;
        if (dw) dw[0] = -dxdv, dw[1] = dxdv;
        return 2;
    }
    const double a = -0.75, x1 = f + 1, x2 = 1 - f, x3 = 2 - f;
    w[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
    w[1] = ((a + 2) * f - (a + 3)) * f * f + 1;
    w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
    w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
    PCU_UNROLL
    for (int j = 0; j < 4; j++) idx[j] = pcu_gs_pixel(g->pad, i0 - 1 + j, len, lo, hi);
    if (dw) { /* the weights' derivatives by f (x1 and f grow with it, x2 and x3 shrink), times dx/dv */
        dw[0] = ((3 * a * x1 - 10 * a) * x1 + 8 * a) * dxdv;
        dw[1] = ((3 * (a + 2) * f - 2 * (a + 3)) * f) * dxdv;
        dw[2] = (-(3 * (a + 2) * x2 - 2 * (a + 3)) * x2) * dxdv;
        dw[3] = (-((3 * a * x3 - 10 * a) * x3 + 8 * a)) * dxdv;
    }
    return 4;
}

/* body for each combination (c0, c1, c2) of a point's taps idx (nt of each axis) that reads the input (no zero
 * tap), the last axis fastest (the reference kernel's order), with o its offset into a channel; unrolled, so the
 * taps stay in registers */
#define PCU_GS_COMBOS(g, idx, nt, o, ...)                                                                        \
    PCU_UNROLL                                                                                                  \
    for (int c0 = 0; c0 < 4; c0++)                                                                              \
        PCU_UNROLL                                                                                              \
        for (int c1 = 0; c1 < 4; c1++)                                                                          \
            PCU_UNROLL                                                                                          \
            for (int c2 = 0; c2 < 4; c2++)                                                                      \
                if (c0 < (nt)[0] && c1 < (nt)[1] && c2 < (nt)[2] && (idx)[0][c0] >= 0 && (idx)[1][c1] >= 0 &&   \
                    (idx)[2][c2] >= 0) {                                                                        \
                    const int64_t o = ((idx)[0][c0] * (g)->in[1] + (idx)[1][c1]) * (g)->in[2] + (idx)[2][c2]; \
                    __VA_ARGS__                                                                                 \
                }

/* the taps of point p of sample n along every axis (an axis past k: one tap at 0 of weight 1), with their
 * derivatives where dw is not NULL (the gradient's); false: a NaN coordinate */
PCU_HD int pcu_gs_taps(const pcu_gridsample *g, const float *grid, int64_t n, int64_t p, int64_t idx[][4],
                       double w[][4], double dw[][4], int *nt) {
    const float *pt = grid + (n * g->P + p) * g->k;
    PCU_UNROLL
    for (int d = 0; d < PCU_GS_MAXK; d++) {
        nt[d] = 1, idx[d][0] = 0, w[d][0] = 1;
        if (dw) dw[d][0] = 0;
        if (d < g->k && !(nt[d] = pcu_gs_axis(g, pt[g->k - 1 - d], g->in[d], idx[d], w[d], dw ? dw[d] : NULL)))
            return 0;
    }
    return 1;
}

PCU_HD void pcu_gridsample_at(const pcu_gridsample *g, float *y, const float *x, const float *grid, int64_t i) {
    const int64_t p = i % g->P, nc = i / g->P, n = nc / g->C;
    int64_t idx[PCU_GS_MAXK][4];
    double w[PCU_GS_MAXK][4];
    int nt[PCU_GS_MAXK];
    if (!pcu_gs_taps(g, grid, n, p, idx, w, NULL, nt)) {
        y[i] = NAN;
        return;
    }
    const float *xc = x + nc * g->S;
    double acc = 0;
    PCU_GS_COMBOS(g, idx, nt, at, { acc += PCU_DMUL(PCU_DMUL(PCU_DMUL(w[0][c0], w[1][c1]), w[2][c2]), (double)xc[at]); })
    y[i] = (float)acc;
}

/* ---- pp.GridSampleGrad: dY X grid -> dX dgrid, in two phases ----------------------------------- */

/* Phase 0, a thread per (sample, channel) plane of dX: the points in order,
 * each tap combination's weight times dY added into the plane's sums in
 * double (acc, WORK: the plane's S doubles), then rounded into dX; phase 1,
 * a thread per (sample, point) of dgrid: over the combinations, then the
 * channels, dY X times the combination's weight with one axis's weight
 * replaced by its derivative, summed in double per axis. The reference
 * kernel's sums in its order (kern_GRIDSAMPLEGRAD): the emulator gives its
 * bits, and no atomics anywhere. A NaN coordinate: dgrid NaN, nothing into
 * dX. */
typedef struct pcu_gsgrad {
    pcu_gridsample g; /* g.n: the samples, N */
    int32_t phase;
} pcu_gsgrad;

/* the derivative of a tap combination's weight (wsel, one weight an axis) by axis d's coordinate: that axis's
 * derivative (dsel) times the other axes' weights, in axis order (the reference's product, which stops at a 0) */
PCU_HD double pcu_gsg_dprod(const double *wsel, const double *dsel, int k, int d) {
    double wd = dsel[d];
    PCU_UNROLL
    for (int e = 0; e < PCU_GS_MAXK; e++)
        if (e < k && e != d && wd != 0) wd = PCU_DMUL(wd, wsel[e]);
    return wd;
}

PCU_HD void pcu_gsg_dx(const pcu_gridsample *g, float *dx, double *acc, const float *dy, const float *grid,
                       int64_t i) {
    const int64_t n = i / g->C;
    double *a = acc + i * g->S;
    for (int64_t o = 0; o < g->S; o++) a[o] = 0;
    for (int64_t p = 0; p < g->P; p++) {
        int64_t idx[PCU_GS_MAXK][4];
        double w[PCU_GS_MAXK][4], dw[PCU_GS_MAXK][4];
        int nt[PCU_GS_MAXK];
        if (!pcu_gs_taps(g, grid, n, p, idx, w, dw, nt)) continue;
        const double gyv = (double)dy[i * g->P + p];
        PCU_GS_COMBOS(g, idx, nt, o, { a[o] += PCU_DMUL(PCU_DMUL(PCU_DMUL(w[0][c0], w[1][c1]), w[2][c2]), gyv); })
    }
    for (int64_t o = 0; o < g->S; o++) dx[i * g->S + o] = (float)a[o];
}

PCU_HD void pcu_gsg_dgrid(const pcu_gridsample *g, float *dg, const float *dy, const float *x, const float *grid,
                          int64_t i) {
    const int64_t n = i / g->P, p = i % g->P;
    float *gp = dg + i * g->k;
    int64_t idx[PCU_GS_MAXK][4];
    double w[PCU_GS_MAXK][4], dw[PCU_GS_MAXK][4];
    int nt[PCU_GS_MAXK];
    if (!pcu_gs_taps(g, grid, n, p, idx, w, dw, nt)) {
        for (int d = 0; d < g->k; d++) gp[d] = NAN;
        return;
    }
    double dsum[PCU_GS_MAXK] = {0, 0, 0};
    PCU_GS_COMBOS(g, idx, nt, o, {
        const double ws[PCU_GS_MAXK] = {w[0][c0], w[1][c1], w[2][c2]};
        const double ds[PCU_GS_MAXK] = {dw[0][c0], dw[1][c1], dw[2][c2]};
        double wd[PCU_GS_MAXK];
        PCU_UNROLL
        for (int d = 0; d < PCU_GS_MAXK; d++) wd[d] = pcu_gsg_dprod(ws, ds, g->k, d);
        for (int64_t c = 0; c < g->C; c++) {
            const double xv = PCU_DMUL((double)x[(n * g->C + c) * g->S + o], (double)dy[(n * g->C + c) * g->P + p]);
            PCU_UNROLL
            for (int d = 0; d < PCU_GS_MAXK; d++)
                if (d < g->k) dsum[d] += PCU_DMUL(wd[d], xv);
        }
    })
    PCU_UNROLL
    for (int d = 0; d < PCU_GS_MAXK; d++)
        if (d < g->k) gp[g->k - 1 - d] = (float)dsum[d];
}

PCU_HD void pcu_gsgrad_at(const pcu_gsgrad *k, float *dx, float *dg, double *acc, const float *dy, const float *x,
                          const float *grid, int64_t i) {
    if (k->phase == 0) pcu_gsg_dx(&k->g, dx, acc, dy, grid, i);
    else pcu_gsg_dgrid(&k->g, dg, dy, x, grid, i);
}

/* ---- Hardmax, LpNormalization: one thread per line ---------------------------------------- */

/* A line of n elements `inner` apart (the reference's each_line): line i
 * starts at (i / inner) * n * inner + i % inner. f32 or f64, read as double. */
typedef struct pcu_line {
    int32_t lpnorm, p, f64; /* lpnorm 0: Hardmax; p: LpNormalization's 1 or 2 */
    int64_t lines, n, inner;
} pcu_line;

PCU_HD double pcu_line_ld(const pcu_line *k, const void *x, int64_t i) {
    return k->f64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

PCU_HD void pcu_line_st(const pcu_line *k, void *y, int64_t i, double v) {
    if (k->f64) ((double *)y)[i] = v;
    else ((float *)y)[i] = (float)v;
}

/* Hardmax: 1 at the first largest element, 0 elsewhere, a line holding NaN
 * NaN throughout; LpNormalization: x / ||x||_p, the norm summed in double in
 * order, a line of zeros zeros. As runtime/cpu/ref_nn.c, so the same bits. */
PCU_HD void pcu_line_at(const pcu_line *k, void *y, const void *x, int64_t i) {
    const int64_t at = pcu_div(i, k->inner) * k->n * k->inner + pcu_mod(i, k->inner);
    if (!k->lpnorm) {
        int64_t best = 0;
        int nan = 0;
        for (int64_t j = 0; j < k->n; j++) {
            const double v = pcu_line_ld(k, x, at + j * k->inner);
            if (v != v) nan = 1;
            else if (v > pcu_line_ld(k, x, at + best * k->inner)) best = j;
        }
        for (int64_t j = 0; j < k->n; j++) pcu_line_st(k, y, at + j * k->inner, nan ? NAN : (double)(j == best));
        return;
    }
    double s = 0;
    for (int64_t j = 0; j < k->n; j++) {
        const double v = pcu_line_ld(k, x, at + j * k->inner);
        s += k->p == 1 ? fabs(v) : PCU_DMUL(v, v);
    }
    const double norm = k->p == 1 ? s : sqrt(s);
    for (int64_t j = 0; j < k->n; j++)
        pcu_line_st(k, y, at + j * k->inner, norm == 0 ? 0 : pcu_line_ld(k, x, at + j * k->inner) / norm);
}

/* ---- OneHot: one thread per output element --------------------------------------------------- */

/* y [outer, depth, inner] = values[1] where index (outer, inner), plus depth
 * if negative, is the class, else values[0]; values of esize bytes. */
typedef struct pcu_onehot {
    int32_t it, esize; /* the indices' type (PCU_T_*) */
    int64_t n, depth, inner;
} pcu_onehot;

/* An index as int64: floats cut toward zero, NaN and floats out of range
 * no class (INT64_MIN), as the reference kernel's onehot_index. */
PCU_HD int64_t pcu_onehot_index(int t, const void *x, int64_t i) {
    if (t == PCU_T_F32 || t == PCU_T_F64) {
        const double v = t == PCU_T_F64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
        return v > -9.0e18 && v < 9.0e18 ? (int64_t)v : INT64_MIN;
    }
    if (t == PCU_T_U64) {
        const uint64_t u = ((const uint64_t *)x)[i];
        return u > (uint64_t)INT64_MAX ? INT64_MIN : (int64_t)u;
    }
    return pcu_ldi(x, t, i);
}

PCU_HD void pcu_onehot_at(const pcu_onehot *k, void *y, const void *idx, const void *values, int64_t i) {
    const int64_t b = pcu_mod(i, k->inner), c = pcu_mod(pcu_div(i, k->inner), k->depth);
    const int64_t a = pcu_div(i, k->inner * k->depth);
    int64_t v = pcu_onehot_index(k->it, idx, a * k->inner + b);
    if (v < 0 && v >= -k->depth) v += k->depth;
    const unsigned char *src = (const unsigned char *)values + (v == c ? k->esize : 0);
    unsigned char *dst = (unsigned char *)y + i * k->esize;
    for (int e = 0; e < k->esize; e++) dst[e] = src[e];
}

/* ---- AffineGrid: one thread per output element ----------------------------------------------- */

/* grid [N, points, k] (k = 2 or 3) from theta [N, k, k + 1]: element r of a
 * point is theta[n, r, :] . (x, y[, z], 1), x the last axis's position; the
 * sum in double in the reference kernel's order. */
typedef struct pcu_affgrid {
    int32_t k, align, f64;
    int64_t n, P; /* outputs, points a sample */
    int64_t out[3]; /* the spatial extents, k of them */
} pcu_affgrid;

/* position i of an axis of len in [-1, 1] (the reference's affine_base) */
PCU_HD double pcu_affine_base(int align, int64_t i, int64_t len) {
    if (align) return len > 1 ? -1.0 + 2.0 * (double)i / (double)(len - 1) : 0.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

PCU_HD void pcu_affgrid_at(const pcu_affgrid *g, void *y, const void *theta, int64_t i) {
    const int k = g->k;
    const int64_t r = i % k, p = (i / k) % g->P, n = i / (k * g->P);
    /* x, y[, z]: the last spatial axis's position first (scalars: an index
     * computed at run time would put an array in local memory) */
    const int64_t last = p % g->out[k - 1], mid = (p / g->out[k - 1]) % g->out[k - 2];
    const double bx = pcu_affine_base(g->align, last, g->out[k - 1]);
    const double by = pcu_affine_base(g->align, mid, g->out[k - 2]);
    const double bz = k == 3 ? pcu_affine_base(g->align, p / (g->out[2] * g->out[1]), g->out[0]) : 1.0;
    const int64_t row = (n * k + r) * (k + 1);
    double acc = 0;
    for (int c = 0; c <= k; c++) {
        const double t = g->f64 ? ((const double *)theta)[row + c] : (double)((const float *)theta)[row + c];
        acc += PCU_DMUL(t, c == 0 ? bx : c == 1 ? by : c == 2 ? bz : 1.0);
    }
    if (g->f64) ((double *)y)[i] = acc;
    else ((float *)y)[i] = (float)acc;
}

/* ---- LSTM, GRU, RNN: one thread per (direction, sample, hidden unit), a launch per phase ---- */

/* The reference kernel's recurrence (runtime/cpu/ref_rnn.c) spread over the
 * hidden units: every step a launch, each thread computing its unit's gates
 * from the input row and the whole previous state, in the reference's order
 * of sums (four double lanes per product, exact products), so the emulator
 * gives its bits. The state lives in scratch operands laid out [D, N, H]:
 * h_in (read) and h_out (written) swap between steps, c is each thread's
 * own; GRU computes z and r (and r (.) h) in a launch of their own first, as
 * its h gate reads r of every unit. Phases: 0 the initial state into h_out
 * and c, 1 step s (GRU: its h gate and the new state), 2 GRU's z and r of
 * step s, 3 Y_h and Y_c from h_in and c. Operands (cuplan.h): X W R B lens
 * h0 c0 P Y Y_h Y_c h_in h_out c zr t, absent ones NULL. */
enum { PCU_RNN_LSTM, PCU_RNN_GRU, PCU_RNN_RNN };
#define PCU_RNN_MAX_STEPS 16384 /* launches of one node at most; longer sequences run on the host */
enum { PCU_RNN_INIT, PCU_RNN_STEP, PCU_RNN_GATES, PCU_RNN_FINAL };
typedef struct pcu_rnn {
    int32_t op, phase, D, G, layout, reverse, input_forget, lbr; /* lbr: GRU's linear_before_reset */
    float clip;                                                  /* INFINITY: none */
    int32_t fn[2][3];                                            /* ir's pp_rnn_fn per direction */
    float alpha[2][3], beta[2][3];
    int64_t S, N, I, H, s; /* s: the step of phases 1 and 2 */
} pcu_rnn;


/* sum of a[i] * b[i] in double, four lanes (the reference's dot; each
 * product is exact, so a fused multiply-add gives the same sum) */
PCU_HD double pcu_rnn_dot(const float *a, const float *b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* activation j of direction d (runtime/cpu/rnn_common.h's act) */
PCU_HD float pcu_rnn_act(const pcu_rnn *k, int d, int j, float x) {
    const float a = k->alpha[d][j], b = k->beta[d][j];
    switch (k->fn[d][j]) {
    case 0: return 1.0f / (1.0f + expf(-x));
    case 1: return tanhf(x);
    case 2: return x > 0.0f ? x : 0.0f;
    case 3: {
        const float y = PCU_FMUL(a, x) + b;
        return y > 1.0f ? 1.0f : y > 0.0f ? y : 0.0f;
    }
    case 4: return PCU_FMUL(a, x) + b;
    case 5: return x >= 0.0f ? x : a * x;
    case 6: return x > a ? x : 0.0f;
    case 7: return a * tanhf(b * x);
    case 8: return x >= 0.0f ? x : a * expm1f(x);
    case 9: return x / (1.0f + fabsf(x));
    case 10: return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    default: return x;
    }
}

PCU_HD float pcu_rnn_clip(float x, float c) { return x > c ? c : x < -c ? -c : x; }

/* gate row j of direction d: x W[j]^T + h R[j]^T + the two biases */
PCU_HD double pcu_rnn_gate(const pcu_rnn *k, const float *W, const float *R, const float *B, const float *x,
                           const float *h, int d, int64_t j) {
    const int64_t GH = k->G * k->H;
    const double s = pcu_rnn_dot(W + (d * GH + j) * k->I, x, k->I) + pcu_rnn_dot(R + (d * GH + j) * k->H, h, k->H);
    return s + (B ? (double)B[d * 2 * GH + j] + B[d * 2 * GH + GH + j] : 0.0);
}

PCU_HD void pcu_rnn_at(const pcu_rnn *k, const float *X, const float *W, const float *R, const float *B,
                       const int32_t *lens, const float *h0, const float *c0, const float *P, float *Y, float *Yh,
                       float *Yc, const float *hin, float *hout, float *c, float *zr, float *t, int *err, int64_t i) {
    const int64_t H = k->H, N = k->N, u = pcu_mod(i, H), b = pcu_mod(pcu_div(i, H), N);
    const int d = (int)pcu_div(i, H * N);
    const int64_t st = (d * N + b) * H, io = (k->layout ? b * k->D + d : d * N + b) * H; /* scratch, I/O state */
    const int64_t L = lens ? lens[b] : k->S;
    if (L < 0 || L > k->S) {
        if (err) *err = 1;
        return;
    }
    if (k->phase == PCU_RNN_INIT) {
        hout[st + u] = h0 && L > 0 ? h0[io + u] : 0.0f;
        c[st + u] = c0 && L > 0 ? c0[io + u] : 0.0f;
        return;
    }
    if (k->phase == PCU_RNN_FINAL) {
        if (Yh) Yh[io + u] = hin[st + u];
        if (Yc) Yc[io + u] = c[st + u];
        return;
    }
    const int64_t s = k->s;
    const int rev = k->reverse || d == 1;
    if (s >= L) { /* past the sample's end: Y 0, the state kept */
        if (k->phase == PCU_RNN_GATES) return;
        if (Y) Y[(k->layout ? (b * k->S + s) * k->D + d : (s * k->D + d) * N + b) * H + u] = 0.0f;
        hout[st + u] = hin[st + u];
        return;
    }
    const int64_t tm = rev ? L - 1 - s : s;
    const float *x = X + (k->layout ? b * k->S + tm : tm * N + b) * k->I;
    const float *h = hin + st;
    const float cl = k->clip;
    float hn;
    if (k->op == PCU_RNN_GRU && k->phase == PCU_RNN_GATES) {
        const float z = pcu_rnn_act(k, d, 0, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, u), cl));
        const float r = pcu_rnn_act(k, d, 0, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, H + u), cl));
        zr[2 * st + u] = z, zr[2 * st + H + u] = r;
        if (!k->lbr) t[st + u] = r * h[u];
        return;
    }
    if (k->op == PCU_RNN_LSTM) {
        const float *p = P ? P + d * 3 * H : NULL;
        const float cp = c[st + u];
        const float pi = p ? PCU_FMUL(p[u], cp) : 0.0f, pf = p ? PCU_FMUL(p[2 * H + u], cp) : 0.0f;
        const float ig = pcu_rnn_act(k, d, 0, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, u) + pi, cl));
        const float fg = k->input_forget ? 1.0f - ig
                                         : pcu_rnn_act(k, d, 0,
                                                       pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, 2 * H + u) + pf,
                                                                    cl));
        const float cc = pcu_rnn_act(k, d, 1, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, 3 * H + u), cl));
        const float cn = PCU_FMUL(fg, cp) + PCU_FMUL(ig, cc);
        const float po = p ? PCU_FMUL(p[H + u], cn) : 0.0f;
        const float o = pcu_rnn_act(k, d, 0, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, H + u) + po, cl));
        c[st + u] = cn;
        hn = o * pcu_rnn_act(k, d, 2, cn);
    } else if (k->op == PCU_RNN_GRU) {
        const int64_t GH = 3 * H, j = 2 * H + u;
        const double xw = pcu_rnn_dot(W + (d * GH + j) * k->I, x, k->I) + (B ? B[d * 2 * GH + j] : 0.0f);
        const double rb = B ? B[d * 2 * GH + GH + j] : 0.0f;
        const double hr = k->lbr ? PCU_DMUL((double)zr[2 * st + H + u], pcu_rnn_dot(R + (d * GH + j) * H, h, H) + rb)
                                 : pcu_rnn_dot(R + (d * GH + j) * H, t + st, H) + rb;
        const float hg = pcu_rnn_act(k, d, 1, pcu_rnn_clip((float)(xw + hr), cl));
        const float z = zr[2 * st + u];
        hn = PCU_FMUL(1.0f - z, hg) + PCU_FMUL(z, h[u]);
    } else {
        hn = pcu_rnn_act(k, d, 0, pcu_rnn_clip((float)pcu_rnn_gate(k, W, R, B, x, h, d, u), cl));
    }
    hout[st + u] = hn;
    if (Y) Y[(k->layout ? (b * k->S + tm) * k->D + d : (tm * k->D + d) * N + b) * H + u] = hn;
}

/* ---- Col2Im: one thread per image point ------------------------------------------------------ */

/* y[n, c, p] = the sum in double of x[n, c * kvol + t, b] over the block
 * offsets t in order (row-major over blk) whose block b covers p, rounded
 * once: the reference kernel's gather (runtime/cpu/ref_nn.c kern_COL2IM).
 * The odometers as divisions by the per-axis strides (no arrays in a
 * thread's frame). */
typedef struct pcu_col2im {
    int32_t k, f64;
    int64_t n, P, kvol, L; /* outputs, image points, block offsets, blocks */
    int64_t img[PCU_MAXD], blk[PCU_MAXD], dil[PCU_MAXD], stride[PCU_MAXD], pad0[PCU_MAXD], nb[PCU_MAXD];
    int64_t imgst[PCU_MAXD], blkst[PCU_MAXD]; /* row-major strides of img and blk */
} pcu_col2im;

PCU_HD void pcu_col2im_at(const pcu_col2im *g, void *y, const void *x, int64_t i) {
    const int64_t pl = pcu_div(i, g->P), p = pcu_mod(i, g->P), base = pl * g->kvol * g->L;
    double acc = 0;
    for (int64_t tt = 0; tt < g->kvol; tt++) {
        int64_t b = 0;
        int hit = 1;
        for (int d = 0; d < g->k && hit; d++) {
            const int64_t o = pcu_mod(pcu_div(p, g->imgst[d]), g->img[d]), t = pcu_mod(pcu_div(tt, g->blkst[d]), g->blk[d]);
            const int64_t q = o + g->pad0[d] - t * g->dil[d];
            hit = q >= 0 && q % g->stride[d] == 0 && q / g->stride[d] < g->nb[d];
            b = b * g->nb[d] + q / g->stride[d];
        }
        if (hit) acc += g->f64 ? ((const double *)x)[base + tt * g->L + b] : (double)((const float *)x)[base + tt * g->L + b];
    }
    if (g->f64) ((double *)y)[i] = acc;
    else ((float *)y)[i] = (float)acc;
}

/* ---- the optimizer step over a flat parameter buffer (issue 56) -------------------------------- */

/* Thread i steps element i of w with g, m and v (optim_math.h: the host
 * trainer's own arithmetic, so a device step gives its bits): a kernel over
 * the flat buffer of the weights a stage outputs the gradients of (the
 * device optimizer, runtime/dopt.h; train.c's host update the other path). */
typedef pp_optstep pcu_opt;

PCU_HD void pcu_opt_at(const pcu_opt *k, float *w, const float *g, float *m, float *v, int64_t i) {
    pp_optstep_at(k, w, g, m, v, i);
}

/* The device optimizer's passes over a stage's flat gradient buffer g
 * (each weight's gradient from a multiple of PCU_OPTG_CHUNK elements on, +0
 * in the gaps), each the host trainer's arithmetic (train.c), so either side
 * gives the other's bits. tab: per weight p four entries, its first element
 * in g (tab[4p]), its gradient's first float in the stage's outgoing
 * message x (tab[4p + 1]), its elements (tab[4p + 2]) and chunks
 * (tab[4p + 3]); then per chunk of g its weight (tab[4 np + c]).
 *   FOLD   thread i over g from element lo on (a bucket of the replicas'
 *          chain; 0: all of g): where lo + i is an element of weight p (not
 *          a gap), g[lo + i] = x[...] (has_a: the step's first micro-batch)
 *          or g[lo + i] + x[...] (the host fold's float addition, in
 *          micro-batch order);
 *   SCALE  thread i: g[i] x a (has_a) then x b (has_b), float products: the
 *          mean over micro-batches and the loss scale's reciprocal, or the
 *          clipping factor;
 *   SQ     thread c: part[c] = the squares of chunk c's elements summed in
 *          double in order (a float's square is exact in double, so a fused
 *          multiply-add gives the same sum);
 *   SUM    thread p: sq[p] = part[] over weight p's chunks summed in order.
 * The global norm is the weights' sq[] summed in the weights' order, on the
 * host (train.c), whatever the split. */
enum { PCU_OPTG_FOLD, PCU_OPTG_SCALE, PCU_OPTG_SQ, PCU_OPTG_SUM };
#define PCU_OPTG_CHUNK PP_OPT_CHUNK

typedef struct pcu_optg {
    int32_t mode, has_a, has_b, pad_;
    float a, b;
    int64_t n;      /* threads: elements of g (FOLD, SCALE), chunks (SQ), weights (SUM) */
    int64_t np;     /* FOLD, SUM: the weights (tab's) */
    int64_t chunks; /* FOLD, SUM: the chunks of g (part's entries) */
    int64_t lo;     /* FOLD: thread i's element of g is lo + i */
} pcu_optg;

PCU_HD void pcu_optg_at(const pcu_optg *k, float *g, const float *x, double *part, const int64_t *tab, double *sq,
                        int64_t i) {
    if (k->mode == PCU_OPTG_FOLD) {
        i += k->lo;
        const int64_t p = tab[4 * k->np + i / PCU_OPTG_CHUNK], e = i - tab[4 * p];
        if (e >= tab[4 * p + 2]) return; /* a gap */
        const float v = x[tab[4 * p + 1] + e];
        g[i] = k->has_a ? v : g[i] + v;
    } else if (k->mode == PCU_OPTG_SCALE) {
        float a = g[i];
        if (k->has_a) a = PP_OPT_MUL(a, k->a);
        if (k->has_b) a = PP_OPT_MUL(a, k->b);
        g[i] = a;
    } else if (k->mode == PCU_OPTG_SQ) {
        const float *c = g + i * PCU_OPTG_CHUNK;
        double s = 0;
        for (int e = 0; e < PCU_OPTG_CHUNK; e++) s += (double)c[e] * (double)c[e];
        part[i] = s;
    } else {
        const int64_t c0 = tab[4 * i] / PCU_OPTG_CHUNK;
        double s = 0;
        for (int64_t c = c0; c < c0 + tab[4 * i + 3]; c++) s += part[c];
        sq[i] = s;
    }
}

#endif
