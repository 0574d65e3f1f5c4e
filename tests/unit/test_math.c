/* test_math.c: the math family (ir/shape_math.c, runtime/cpu/ref_math.c)
 * against values and naive loops written here:
 *   - float16 / bfloat16 conversion through Cast: every bit pattern round
 *     trips, and hand-picked roundings (ties to even, overflow, subnormals);
 *   - the low-precision types through Cast, against tables computed here from
 *     the formats' bit fields: every code of each float8 / float4 format
 *     decodes exactly and round trips, every midpoint (and its neighbours)
 *     rounds to even, overflow with and without 'saturate', NaN encodings;
 *     float8e8m0 in each 'round_mode'; 2- and 4-bit integers (wrapping, the
 *     packed layout, padding); Identity/CastLike on them, other ops rejecting
 *     them; pprt_compare on them;
 *   - the broadcasting engine: Add, Sub (int8, wrapping) and Where over random
 *     shape pairs, against an index-by-index naive broadcast;
 *   - integer edge cases: division by zero and MIN / -1, float -> int Cast
 *     saturation, integer Pow;
 *   - Mod: the sign rules of fmod=0 (divisor's sign) and fmod=1 (dividend's)
 *     on every integer type and on floats, x mod 0 and MIN mod -1, broadcasting
 *     against a naive loop, fmod=0 refused on floats;
 *   - CumSum against a naive loop for every axis / exclusive / reverse;
 *   - errors: shape functions and kernels reject what they must, naming it.
 * Each kernel runs twice (different garbage in the output) and must give
 * bit-identical results.
 * Exit status 0 when everything passes, 1 otherwise (each failure is printed). */
#include "runtime/io.h" /* pprt_compare */
#include "runtime/kernels.h"

#include <float.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng_state = 0x6d617468ULL;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!p) {
        printf("out of memory\n");
        exit(1);
    }
    return p;
}

static pprt_tensor tensor(pp_dtype t, pp_shape s) {
    pprt_tensor x = {t, s, xalloc((size_t)numel(&s) * pp_dtype_size(t))};
    return x;
}

static pp_attr attr_int(const char *name, int64_t v) {
    return (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v};
}
static pp_attr attr_float(const char *name, float v) {
    return (pp_attr){.name = name, .type = PP_ATTR_FLOAT, .f = v};
}
static pp_attr attr_str(const char *name, const char *v) {
    return (pp_attr){.name = name, .type = PP_ATTR_STRING, .s = v};
}

static pprt_scratch scratch;

/* Infer (status returned in *st when not OK), run twice, compare the runs;
 * out->data is the first result (caller frees). */
static pp_status run(pp_op op, pp_attrs at, const pprt_tensor *in, int n_in, pprt_tensor *out,
                     pp_err *err) {
    pp_tinfo ti[4], to[1];
    for (int i = 0; i < n_in; i++) ti[i] = (pp_tinfo){in[i].dtype, in[i].shape, NULL};
    pp_status st = pp_infer(op, at, ti, n_in, to, 1, err);
    if (st != PP_OK) return st;
    size_t nb = 0;
    st = pp_shape_nbytes(&to[0].shape, to[0].dtype, &nb, err);
    if (st != PP_OK) return st;
    pprt_tensor o[2];
    for (int r = 0; r < 2; r++) {
        o[r] = (pprt_tensor){to[0].dtype, to[0].shape, xalloc(nb)};
        memset(o[r].data, r ? 0xA5 : 0xFF, nb);
        st = pprt_ref_kernels[op](at, in, n_in, &o[r], 1, &scratch, err);
        if (st != PP_OK) {
            free(o[0].data);
            if (r) free(o[1].data);
            return st;
        }
    }
    CHECK(nb == 0 || memcmp(o[0].data, o[1].data, nb) == 0, "two runs differ");
    free(o[1].data);
    *out = o[0];
    return PP_OK;
}

static bool run_ok(pp_op op, pp_attrs at, const pprt_tensor *in, int n_in, pprt_tensor *out) {
    pp_err err = {0};
    pp_status st = run(op, at, in, n_in, out, &err);
    if (st != PP_OK) CHECK_FAIL("%s: %s", pp_status_name(st), err.msg);
    return st == PP_OK;
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------ */

/* Cast n elements (1-D) with optional extra attributes (saturate, round_mode). */
static bool cast_with(pp_dtype from, pp_dtype to, const void *src, void *dst, int64_t n,
                      const pp_attr *extra, int n_extra) {
    pp_attr a[4] = {attr_int("to", to)};
    for (int i = 0; i < n_extra && i < 3; i++) a[1 + i] = extra[i];
    pp_attrs at = {a, 1 + n_extra, 25};
    pprt_tensor x = {from, {1, {n}}, (void *)src}, y;
    if (!run_ok(PP_OP_CAST, at, &x, 1, &y)) return false;
    size_t nb = 0;
    pp_shape_nbytes(&y.shape, to, &nb, NULL);
    memcpy(dst, y.data, nb);
    free(y.data);
    return true;
}

static bool cast(pp_dtype from, pp_dtype to, const void *src, void *dst, int64_t n) {
    return cast_with(from, to, src, dst, n, NULL, 0);
}

static void test_half(void) {
    static uint16_t h[65536], h2[65536];
    static float f[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int k = 0; k < 2; k++) {
        pp_dtype t = k ? PP_BF16 : PP_F16;
        check_case = k ? "bf16 round trip" : "f16 round trip";
        if (!cast(t, PP_F32, h, f, 65536) || !cast(PP_F32, t, f, h2, 65536)) continue;
        int bad = 0;
        for (int i = 0; i < 65536; i++) {
            bool nan = isnan(f[i]);
            bool want_nan = k ? ((i & 0x7f80) == 0x7f80 && (i & 0x7f)) : ((i & 0x7c00) == 0x7c00 && (i & 0x3ff));
            const unsigned em = k ? 0x7f80 : 0x7c00, mm = k ? 0x7f : 0x3ff;
            if (nan != want_nan || (!nan && h2[i] != h[i])) bad++;
            if (nan && ((h2[i] & em) != em || !(h2[i] & mm))) bad++; /* NaN stays NaN */
        }
        CHECK(bad == 0, "%d bit patterns do not round trip", bad);
        if (k == 0)
            CHECK(f[0x3c00] == 1.0f && f[0x0001] == ldexpf(1, -24) && f[0x7bff] == 65504.0f &&
                      f[0xc000] == -2.0f && isinf(f[0x7c00]),
                  "f16 -> f32 known values wrong");
        else
            CHECK(f[0x3f80] == 1.0f && f[0xc040] == -3.0f && f[0x0001] == ldexpf(1, -133) &&
                      isinf(f[0xff80]),
                  "bf16 -> f32 known values wrong");
    }
    /* f32 -> f16 rounding */
    const float in[] = {1.0f + ldexpf(1, -11),     /* tie -> even (1.0) */
                        1.0f + 3 * ldexpf(1, -11), /* tie -> even (up) */
                        65519.0f, 65520.0f,        /* below / at overflow tie */
                        ldexpf(1, -25),            /* tie between 0 and min subnormal -> 0 */
                        ldexpf(1.5f, -25),         /* above the tie -> min subnormal */
                        ldexpf(1, -14) - ldexpf(1, -26), /* rounds up to min normal */
                        -0.0f, 1e9f};
    const uint16_t want[] = {0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x0001, 0x0400, 0x8000, 0x7c00};
    uint16_t got[9];
    if (cast(PP_F32, PP_F16, in, got, 9))
        for (int i = 0; i < 9; i++)
            CHECK(got[i] == want[i], "f32 %g -> f16 0x%04x, expected 0x%04x", (double)in[i], got[i],
                  want[i]);
    /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is above the tie (via f32 it would be a tie) */
    check_case = "f64 -> f16 single rounding";
    double d = 1.0 + ldexp(1, -11) + ldexp(1, -40);
    uint16_t g1;
    if (cast(PP_F64, PP_F16, &d, &g1, 1)) CHECK(g1 == 0x3c01, "got 0x%04x, expected 0x3c01", g1);
    check_case = "f32 -> bf16 rounding";
    const float bin[] = {1.0f + ldexpf(1, -8), 1.0f + 3 * ldexpf(1, -8), 3.0e38f, 1.0f};
    const uint16_t bwant[] = {0x3f80, 0x3f82, 0x7f62, 0x3f80};
    uint16_t bgot[4];
    if (cast(PP_F32, PP_BF16, bin, bgot, 4))
        for (int i = 0; i < 4; i++)
            CHECK(bgot[i] == bwant[i], "f32 %g -> bf16 0x%04x, expected 0x%04x", (double)bin[i],
                  bgot[i], bwant[i]);
    check_case = "f16 Add computes in f32 and rounds";
    uint16_t a[2] = {0x3c00, 0x3c00}, b[2] = {0x1000, 0x3c00}; /* 1 + 2^-11 -> 1 (tie, even), 1 + 1 = 2 */
    pprt_tensor ab[2] = {{PP_F16, {1, {2}}, a}, {PP_F16, {1, {2}}, b}}, y;
    if (run_ok(PP_OP_ADD, (pp_attrs){0}, ab, 2, &y)) {
        const uint16_t *p = y.data;
        CHECK(p[0] == 0x3c00 && p[1] == 0x4000, "got 0x%04x 0x%04x", p[0], p[1]);
        free(y.data);
    }
}

/* ---- low-precision types ------------------------------------------------------------------ *
 * The expected values here come from the formats' definitions, written
 * independently of ir/base.c and ref_math.c: each code decoded from its bit
 * fields, and rounding by brute force (the nearest of all finite values, ties
 * to the even code, overflow judged against the next value the format would
 * have above its largest). */

static void expect(pp_status want, pp_op op, pp_attrs at, const pprt_tensor *in, int n_in,
                   const char *needle); /* in "errors" below */

typedef enum { K_FN, K_FNUZ, K_IEEE, K_NONE } lp_kind;
typedef struct lp_fmt {
    const char *name;
    pp_dtype t;
    int e, m, bias;
    lp_kind kind;
    double max, min_sub; /* published constants, to check the table against */
} lp_fmt;

static const lp_fmt lp_fmts[] = {
    {"f8e4m3fn", PP_F8E4M3FN, 4, 3, 7, K_FN, 448, 0x1p-9},
    {"f8e4m3fnuz", PP_F8E4M3FNUZ, 4, 3, 8, K_FNUZ, 240, 0x1p-10},
    {"f8e5m2", PP_F8E5M2, 5, 2, 15, K_IEEE, 57344, 0x1p-16},
    {"f8e5m2fnuz", PP_F8E5M2FNUZ, 5, 2, 16, K_FNUZ, 57344, 0x1p-17},
    {"f4e2m1", PP_F4E2M1, 2, 1, 1, K_NONE, 6, 0.5},
};

static int lp_nbits(const lp_fmt *f) { return 1 + f->e + f->m; }

/* The value of code c, from its fields: sign, exponent, mantissa. */
static double lp_decode(const lp_fmt *f, unsigned c) {
    const int nb = lp_nbits(f);
    const unsigned sign = (c >> (nb - 1)) & 1, ex = (c >> f->m) & ((1u << f->e) - 1),
                   man = c & ((1u << f->m) - 1), all_e = (1u << f->e) - 1,
                   all_m = (1u << f->m) - 1;
    if (f->kind == K_FNUZ && sign && ex == 0 && man == 0) return NAN;
    if (f->kind == K_FN && ex == all_e && man == all_m) return sign ? -NAN : NAN;
    if (f->kind == K_IEEE && ex == all_e) return man ? (sign ? -NAN : NAN) : sign ? -INFINITY : INFINITY;
    double frac = man / pow(2, f->m);
    double v = ex ? (1 + frac) * pow(2, (int)ex - f->bias) : frac * pow(2, 1 - f->bias);
    return sign ? -v : v;
}

/* The code a Cast of x must give (brute force over all codes). */
static unsigned lp_expect(const lp_fmt *f, double x, bool sat) {
    const int nb = lp_nbits(f);
    const unsigned sb = 1u << (nb - 1), sign = signbit(x) ? sb : 0, all_e = (1u << f->e) - 1;
    if (isnan(x)) {
        switch (f->kind) {
        case K_FN: return sign | (sb - 1);
        case K_FNUZ: return sb;
        case K_IEEE: return sign | (all_e << f->m) | (1u << (f->m - 1));
        case K_NONE: return sign ^ sb; /* onnx 1.22's reference: a zero of the other sign */
        }
    }
    /* largest finite positive value and the one below it */
    unsigned maxc = 0;
    double maxv = 0, prev = 0;
    for (unsigned c = 0; c < sb; c++) {
        double v = lp_decode(f, c);
        if (isfinite(v) && v > maxv) prev = maxv, maxv = v, maxc = c;
    }
    const double next = maxv + (maxv - prev), mid = (maxv + next) / 2, a = fabs(x);
    if (a > mid || (a == mid && (maxc & 1))) {
        if (sat || f->kind == K_NONE) return sign | maxc;
        switch (f->kind) {
        case K_IEEE: return sign | (all_e << f->m);
        case K_FN: return sign | (sb - 1);
        default: return sb;
        }
    }
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned c = 0; c < sb; c++) {
        double v = lp_decode(f, c);
        if (!isfinite(v)) continue;
        double d = fabs(a - v);
        if (d < bd || (d == bd && !(c & 1))) bd = d, best = c;
    }
    if (best == 0) return f->kind == K_FNUZ ? 0 : sign;
    return sign | best;
}

/* Element i of a Cast output of type t (packed or bytes). */
static unsigned lp_code_at(pp_dtype t, const void *p, int64_t i) {
    unsigned bits = pp_dtype_bits(t);
    if (bits == 8) return ((const uint8_t *)p)[i];
    return (((const uint8_t *)p)[i * bits / 8] >> (i * bits % 8)) & ((1u << bits) - 1);
}

static bool same_double(double a, double b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_minifloats(void) {
    char name[96];
    for (size_t k = 0; k < sizeof lp_fmts / sizeof lp_fmts[0]; k++) {
        const lp_fmt *f = &lp_fmts[k];
        const int nb = lp_nbits(f);
        const unsigned ncodes = 1u << nb;
        /* the table against the formats' published constants */
        snprintf(name, sizeof name, "%s table", f->name);
        check_case = name;
        double maxv = 0, minsub = INFINITY;
        int nans = 0;
        for (unsigned c = 0; c < ncodes; c++) {
            double v = lp_decode(f, c);
            if (isnan(v)) nans++;
            else if (isfinite(v) && v > maxv) maxv = v;
            if (v > 0 && v < minsub) minsub = v;
        }
        CHECK(maxv == f->max && minsub == f->min_sub, "max %g, min subnormal %g", maxv, minsub);
        const int want_nans = f->kind == K_FN ? 2 : f->kind == K_FNUZ ? 1 : f->kind == K_IEEE ? 6 : 0;
        CHECK(nans == want_nans, "%d NaN codes, expected %d", nans, want_nans);

        /* every code -> f32 (exact) and -> f64 */
        snprintf(name, sizeof name, "%s -> f32, every code", f->name);
        check_case = name;
        uint8_t codes[256];
        for (unsigned c = 0; c < ncodes; c++)
            if (nb == 8) codes[c] = (uint8_t)c;
            else if (c % 2 == 0) codes[c / 2] = (uint8_t)c; /* packed 4-bit: c, c+1 */
            else codes[c / 2] |= (uint8_t)(c << 4);
        static float fv[256];
        static double dv[256];
        if (cast(f->t, PP_F32, codes, fv, ncodes) && cast(f->t, PP_F64, codes, dv, ncodes)) {
            int bad = 0;
            for (unsigned c = 0; c < ncodes; c++) {
                double want = lp_decode(f, c);
                if (!same_double(fv[c], want) || !same_double(dv[c], want)) {
                    if (bad++ < 4) CHECK_FAIL("code 0x%02x -> %g / %g, expected %g", c, (double)fv[c], dv[c], want);
                }
            }
            CHECK(bad == 0, "%d codes decoded wrong", bad);
        }

        /* inputs: every value, every midpoint and its f32 neighbours, both
         * signs, out-of-range values, infinities, NaNs, random floats */
        static float in[8192];
        int n = 0;
        double pos[256];
        int np = 0;
        for (unsigned c = 0; c < ncodes / 2; c++) {
            double v = lp_decode(f, c);
            if (isfinite(v)) pos[np++] = v;
        }
        for (int i = 0; i < np; i++) { /* sort ascending */
            for (int j = i + 1; j < np; j++)
                if (pos[j] < pos[i]) { double t = pos[i]; pos[i] = pos[j]; pos[j] = t; }
        }
        const double next = pos[np - 1] + (pos[np - 1] - pos[np - 2]);
        for (int i = 0; i < np; i++) {
            double hi = i + 1 < np ? pos[i + 1] : next;
            float mid = (float)((pos[i] + hi) / 2);
            float vals[5] = {(float)pos[i], mid, nextafterf(mid, 0), nextafterf(mid, INFINITY),
                             (float)hi};
            for (int j = 0; j < 5; j++) in[n++] = vals[j], in[n++] = -vals[j];
        }
        const float special[] = {1e30f, -1e30f, (float)next * 2, INFINITY, -INFINITY, NAN, -NAN,
                                 0x1p-140f, -0x1p-140f, 0.0f, -0.0f, FLT_MAX, -FLT_MAX};
        for (size_t j = 0; j < sizeof special / sizeof special[0]; j++) in[n++] = special[j];
        const int emin = 1 - f->bias - f->m - 3, emax = (int)log2(f->max) + 3;
        while (n < 4096) {
            uint64_t r = rng_next();
            float m = 1.0f + (float)(r & 0xffffff) / 16777216.0f;
            int e = emin + (int)((r >> 24) % (uint64_t)(emax - emin + 1));
            in[n++] = (r >> 40 & 1) ? -ldexpf(m, e) : ldexpf(m, e);
        }
        static uint8_t got[8192];
        for (int sat = 0; sat < 2; sat++) {
            snprintf(name, sizeof name, "f32 -> %s, saturate=%d", f->name, sat);
            check_case = name;
            pp_attr sa = attr_int("saturate", sat);
            if (!cast_with(PP_F32, f->t, in, got, n, &sa, 1)) continue;
            int bad = 0;
            for (int i = 0; i < n; i++) {
                unsigned g = lp_code_at(f->t, got, i), w = lp_expect(f, in[i], sat);
                if (g != w && bad++ < 4)
                    CHECK_FAIL("%a -> 0x%02x, expected 0x%02x", (double)in[i], g, w);
            }
            CHECK(bad == 0, "%d of %d values rounded wrong", bad, n);
            if (nb == 4) { /* packing: n is even here; the bytes are exactly n/2 */
                CHECK(lp_code_at(f->t, got, 1) == (unsigned)(got[0] >> 4), "high nibble");
            }
        }
        /* every code round trips through f32 */
        snprintf(name, sizeof name, "%s -> f32 -> %s", f->name, f->name);
        check_case = name;
        static uint8_t back[256];
        if (cast(PP_F32, f->t, fv, back, ncodes)) {
            int bad = 0;
            for (unsigned c = 0; c < ncodes; c++) {
                unsigned g = lp_code_at(f->t, back, c);
                /* NaN: the canonical NaN; infinity (e5m2): saturates to the largest */
                unsigned w = isfinite(fv[c]) ? c : lp_expect(f, fv[c], true);
                if (f->kind == K_FNUZ && c == 0) w = 0;
                if (g != w && bad++ < 4) CHECK_FAIL("code 0x%02x came back as 0x%02x, expected 0x%02x", c, g, w);
            }
            CHECK(bad == 0, "%d codes do not round trip", bad);
        }
    }

    /* f64 and f16 sources round once, from the exact value */
    check_case = "f64 -> f8e4m3fn single rounding";
    double d[2] = {1.0 + 0x1p-4, 1.0 + 0x1p-4 + 0x1p-40}; /* a tie (even: 1.0), above it (1.125) */
    uint8_t g8[2];
    if (cast(PP_F64, PP_F8E4M3FN, d, g8, 2))
        CHECK(g8[0] == 0x38 && g8[1] == 0x39, "got 0x%02x 0x%02x, expected 0x38 0x39", g8[0], g8[1]);
    check_case = "f16 -> f8e5m2";
    uint16_t h[4] = {0x3c00, 0x3c80 /* 1.125: a tie -> 1.0 */, 0x3c81 /* above: 1.25 */, 0x7c00};
    uint8_t g4[4];
    if (cast(PP_F16, PP_F8E5M2, h, g4, 4))
        CHECK(g4[0] == 0x3c && g4[1] == 0x3c && g4[2] == 0x3d && g4[3] == 0x7b,
              "got %02x %02x %02x %02x", g4[0], g4[1], g4[2], g4[3]);
    check_case = "int32 -> f8e4m3fn";
    int32_t iv[4] = {17, -300, 1000, 0};
    if (cast(PP_I32, PP_F8E4M3FN, iv, g4, 4)) /* 17 -> 16 (tie, even), -300 -> -288, 1000 -> 448 */
        CHECK(g4[0] == 0x58 && g4[1] == 0xf9 && g4[2] == 0x7e && g4[3] == 0x00,
              "got %02x %02x %02x %02x", g4[0], g4[1], g4[2], g4[3]);
    check_case = "f8e4m3fn -> f8e5m2 (through the exact value)";
    uint8_t c8[3] = {0x7e /* 448 */, 0x01 /* 2^-9 */, 0xff /* -NaN */}, c5[3];
    if (cast(PP_F8E4M3FN, PP_F8E5M2, c8, c5, 3)) /* 448 -> 448 (1.11 * 2^8); 2^-9 exact */
        CHECK(c5[0] == 0x5f && c5[1] == 0x18 && c5[2] == 0xfe, "got %02x %02x %02x", c5[0], c5[1], c5[2]);
    check_case = "f8e4m3fn -> int8 saturates like float -> int";
    uint8_t c3[3] = {0x7e, 0xfe, 0x7f};
    int8_t i3[3];
    if (cast(PP_F8E4M3FN, PP_I8, c3, i3, 3))
        CHECK(i3[0] == 127 && i3[1] == -128 && i3[2] == 0, "got %d %d %d", i3[0], i3[1], i3[2]);
}

/* float8e8m0: 2^(code-127), 0xff NaN. Encoding from f32, described by value:
 * 'up' the power of two at or above |x|, 'down' at or below, 'nearest' the
 * nearer (1.5 * 2^e ties up); f32 subnormals (the exponent field 0) count as
 * 2^-127 plus a fraction of 2^-126: 'up' gives 2^-126 for any of them,
 * 'nearest' only above 0.5 * 2^-126; NaN and infinities give 0xff. */
static unsigned e8m0_expect(float x, int mode, bool sat) {
    if (isnan(x) || isinf(x)) return 0xff;
    double a = fabs((double)x);
    if (a == 0) return 0;
    int code;
    if (a < 0x1p-126) {
        double fr = a / 0x1p-126; /* in (0, 1) */
        code = mode == 0 ? 1 : mode == 1 ? 0 : fr > 0.5;
    } else {
        int e;
        double m = frexp(a, &e) * 2; /* a = m * 2^(e-1), m in [1, 2) */
        code = e - 1 + 127;
        if ((mode == 0 && m > 1) || (mode == 2 && m >= 1.5)) code++;
    }
    if (code == 0xff && sat) code = 0xfe;
    return (unsigned)code;
}

static void test_e8m0(void) {
    check_case = "f8e8m0 -> f32 / f16, every code";
    uint8_t codes[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    float fv[256];
    uint16_t hv[256];
    if (cast(PP_F8E8M0, PP_F32, codes, fv, 256) && cast(PP_F8E8M0, PP_F16, codes, hv, 256)) {
        int bad = 0;
        for (int c = 0; c < 256; c++) {
            double want = c == 255 ? NAN : pow(2, c - 127);
            if (!same_double(fv[c], want)) bad++;
            /* f16: 2^-24 .. 2^15, 2^-25 and below to 0 (2^-25 is a tie: even, 0), above to inf */
            uint16_t hw = c == 255 ? 0x7e00 : c - 127 > 15 ? 0x7c00 : c - 127 < -24 ? 0 :
                          c - 127 >= -14 ? (uint16_t)((c - 127 + 15) << 10) : (uint16_t)(1 << (c - 127 + 24));
            if (c == 255 ? !((hv[c] & 0x7c00) == 0x7c00 && (hv[c] & 0x3ff)) : hv[c] != hw) bad++;
        }
        CHECK(bad == 0, "%d codes decoded wrong", bad);
    }
    static float in[4096];
    int n = 0;
    for (int e = -149; e <= 127; e++) {
        float p = ldexpf(1, e);
        const float v[] = {p, p * 1.25f, p * 1.5f, nextafterf(p * 1.5f, 0), nextafterf(p * 1.5f, INFINITY),
                           nextafterf(p, INFINITY), -p * 1.75f};
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            if (isfinite(v[j])) in[n++] = v[j];
    }
    const float special[] = {0.0f, -0.0f, FLT_MAX, INFINITY, -INFINITY, NAN, 0x1p-127f, 0x1.8p-127f,
                             0x1.000002p-127f, 0x1p-128f};
    for (size_t j = 0; j < sizeof special / sizeof special[0]; j++) in[n++] = special[j];
    static const char *const modes[] = {"up", "down", "nearest"};
    static uint8_t got[4096];
    char name[64];
    for (int mode = 0; mode < 3; mode++)
        for (int sat = 0; sat < 2; sat++) {
            snprintf(name, sizeof name, "f32 -> f8e8m0 round_mode=%s saturate=%d", modes[mode], sat);
            check_case = name;
            pp_attr ex[2] = {attr_str("round_mode", modes[mode]), attr_int("saturate", sat)};
            if (!cast_with(PP_F32, PP_F8E8M0, in, got, n, ex, 2)) continue;
            int bad = 0;
            for (int i = 0; i < n; i++) {
                unsigned w = e8m0_expect(in[i], mode, sat);
                if (got[i] != w && bad++ < 4) CHECK_FAIL("%a -> 0x%02x, expected 0x%02x", (double)in[i], got[i], w);
            }
            CHECK(bad == 0, "%d of %d values wrong", bad, n);
        }
    check_case = "f16 -> f8e8m0 (default: up, saturate)";
    uint16_t h[3] = {0x3c00, 0x3c01, 0x7bff};
    uint8_t g[3];
    if (cast(PP_F16, PP_F8E8M0, h, g, 3))
        CHECK(g[0] == 127 && g[1] == 128 && g[2] == 143, "got %d %d %d", g[0], g[1], g[2]);
}

/* uint4, int4, uint2, int2: values, wrapping, the packed layout. */
static void test_small_ints(void) {
    static const pp_dtype ts[] = {PP_U4, PP_I4, PP_U2, PP_I2};
    char name[64];
    for (int k = 0; k < 4; k++) {
        const pp_dtype t = ts[k];
        const unsigned bits = pp_dtype_bits(t);
        const bool sgn = t == PP_I4 || t == PP_I2;
        const int64_t lo = sgn ? -(1 << (bits - 1)) : 0, span = 1 << bits;
        snprintf(name, sizeof name, "%s: every code -> i32 / f32", pp_dtype_name(t));
        check_case = name;
        /* 7 elements: the last byte is partly used */
        const int n = (int)span + 3;
        uint8_t packed[16] = {0};
        for (int i = 0; i < n; i++) packed[i * bits / 8] |= (uint8_t)((i % span) << (i * bits % 8));
        int32_t iv[32];
        float fv[32];
        if (cast(t, PP_I32, packed, iv, n) && cast(t, PP_F32, packed, fv, n))
            for (int i = 0; i < n; i++) {
                int64_t c = i % span, want = sgn && c >= span / 2 ? c - span : c;
                CHECK(iv[i] == want && fv[i] == (float)want, "code %lld -> %d / %g, expected %lld",
                      (long long)c, iv[i], (double)fv[i], (long long)want);
            }
        snprintf(name, sizeof name, "f32 / i32 -> %s (truncate, wrap)", pp_dtype_name(t));
        check_case = name;
        float fin[] = {-9.0f, -8.5f, -2.7f, -0.5f, -0.0f, 0.7f, 1.5f, 2.5f, 3.99f, 7.9f, 9.0f,
                       15.0f, 17.25f, 100.0f, -100.7f, 1e10f, NAN, INFINITY, -INFINITY};
        const int nf = (int)(sizeof fin / sizeof fin[0]);
        uint8_t got[16];
        if (cast_with(PP_F32, t, fin, got, nf, NULL, 0)) {
            for (int i = 0; i < nf; i++) {
                int64_t tr = isfinite(fin[i]) ? (int64_t)truncf(fin[i]) : 0;
                unsigned want = (unsigned)(((tr % span) + span) % span);
                CHECK(lp_code_at(t, got, i) == want, "%g -> %u, expected %u", (double)fin[i],
                      lp_code_at(t, got, i), want);
            }
            /* padding bits of the last byte are zero */
            const unsigned used = (unsigned)(nf * bits % 8);
            CHECK(!used || !(got[nf * bits / 8] >> used), "padding bits set: 0x%02x", got[nf * bits / 8]);
        }
        int32_t iin[] = {-9, -8, -3, -1, 0, 1, 2, 3, 7, 8, 15, 16, 17, INT32_MIN, INT32_MAX};
        const int ni = (int)(sizeof iin / sizeof iin[0]);
        if (cast(PP_I32, t, iin, got, ni))
            for (int i = 0; i < ni; i++) {
                unsigned want = (unsigned)iin[i] & (unsigned)(span - 1);
                CHECK(lp_code_at(t, got, i) == want, "%d -> %u, expected %u", iin[i],
                      lp_code_at(t, got, i), want);
            }
        (void)lo;
    }
    check_case = "int4 layout: low nibble first, [5] in 3 bytes";
    int8_t v5[5] = {1, -2, 3, -4, 5};
    uint8_t b5[3];
    if (cast(PP_I8, PP_I4, v5, b5, 5))
        CHECK(b5[0] == 0xe1 && b5[1] == 0xc3 && b5[2] == 0x05, "got %02x %02x %02x", b5[0], b5[1], b5[2]);
    check_case = "uint2 layout: [7] in 2 bytes";
    uint8_t v7[7] = {0, 1, 2, 3, 3, 2, 1}, b7[2];
    if (cast(PP_U8, PP_U2, v7, b7, 7))
        CHECK(b7[0] == 0xe4 && b7[1] == 0x1b, "got %02x %02x", b7[0], b7[1]);
    check_case = "f4e2m1 -> f4e2m1 (same type copies; padding cleared)";
    uint8_t f4[2] = {0x21, 0xf3}, f4o[2];
    if (cast(PP_F4E2M1, PP_F4E2M1, f4, f4o, 3))
        CHECK(f4o[0] == 0x21 && f4o[1] == 0x03, "got %02x %02x", f4o[0], f4o[1]);
    check_case = "sizes of packed tensors";
    size_t nb = 0;
    pp_shape s5 = {2, {5, 1}}, s0 = {1, {0}}, big = {2, {(int64_t)1 << 62, 8}};
    CHECK(pp_shape_nbytes(&s5, PP_I4, &nb, NULL) == PP_OK && nb == 3, "[5,1] int4: %zu bytes", nb);
    CHECK(pp_shape_nbytes(&s5, PP_U2, &nb, NULL) == PP_OK && nb == 2, "[5,1] uint2: %zu bytes", nb);
    CHECK(pp_shape_nbytes(&s5, PP_F8E5M2, &nb, NULL) == PP_OK && nb == 5, "[5,1] f8: %zu bytes", nb);
    CHECK(pp_shape_nbytes(&s0, PP_F4E2M1, &nb, NULL) == PP_OK && nb == 0, "[0] f4: %zu bytes", nb);
    CHECK(pp_shape_nbytes(&big, PP_I2, &nb, NULL) == PP_EINVAL, "2^65 int2 must overflow");
    CHECK(pp_dtype_size(PP_I4) == 0 && pp_dtype_size(PP_F4E2M1) == 0 && pp_dtype_size(PP_F8E4M3FN) == 1 &&
              pp_dtype_bits(PP_U2) == 2 && pp_dtype_bits(PP_F8E8M0) == 8,
          "element sizes");
}

/* Identity and CastLike take the low-precision types; the arithmetic ops
 * reject them by type. */
static void test_lowp_ops(void) {
    uint8_t b[6] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc};
    pprt_tensor x8 = {PP_F8E4M3FN, {2, {2, 3}}, b}, x4 = {PP_I4, {2, {3, 3}}, b},
                x2 = {PP_U2, {1, {6}}, b}, e8 = {PP_F8E8M0, {1, {6}}, b};
    pprt_tensor y;
    check_case = "Identity on int4 [3,3]";
    if (run_ok(PP_OP_IDENTITY, (pp_attrs){0}, &x4, 1, &y)) {
        CHECK(memcmp(y.data, b, 5) == 0, "bytes differ");
        free(y.data);
    }
    check_case = "Identity on f8e4m3fn";
    if (run_ok(PP_OP_IDENTITY, (pp_attrs){0}, &x8, 1, &y)) {
        CHECK(memcmp(y.data, b, 6) == 0, "bytes differ");
        free(y.data);
    }
    check_case = "CastLike f32 -> f8e4m3fn, saturate=0";
    float f[3] = {500.0f, -1.0f, 0.3f};
    pprt_tensor cl[2] = {{PP_F32, {1, {3}}, f}, {PP_F8E4M3FN, {1, {0}}, b}};
    pp_attr sa = attr_int("saturate", 0);
    if (run_ok(PP_OP_CASTLIKE, (pp_attrs){&sa, 1, 19}, cl, 2, &y)) {
        const uint8_t *p = y.data; /* 500 -> NaN; -1 -> 0xb8; 0.3 -> 0.3125 (0x2a) */
        CHECK(p[0] == 0x7f && p[1] == 0xb8 && p[2] == 0x2a, "got %02x %02x %02x", p[0], p[1], p[2]);
        free(y.data);
    }
    check_case = "CastLike f32 -> f8e8m0, round_mode=down";
    pp_attr rm = attr_str("round_mode", "down");
    cl[1] = (pprt_tensor){PP_F8E8M0, {1, {0}}, b};
    if (run_ok(PP_OP_CASTLIKE, (pp_attrs){&rm, 1, 25}, cl, 2, &y)) {
        const uint8_t *p = y.data; /* 500 -> 256, 1 -> 1, 0.3 -> 0.25 */
        CHECK(p[0] == 135 && p[1] == 127 && p[2] == 125, "got %d %d %d", p[0], p[1], p[2]);
        free(y.data);
    }
    check_case = "Add on f8e4m3fn";
    pprt_tensor two[2] = {x8, x8};
    expect(PP_EUNSUP, PP_OP_ADD, (pp_attrs){0}, two, 2, "f8e4m3fn");
    check_case = "Relu on f8e5m2";
    pprt_tensor r5 = {PP_F8E5M2, {1, {6}}, b};
    expect(PP_EUNSUP, PP_OP_RELU, (pp_attrs){0}, &r5, 1, "f8e5m2");
    check_case = "Neg on int4";
    expect(PP_EUNSUP, PP_OP_NEG, (pp_attrs){0}, &x4, 1, "i4");
    check_case = "Abs on uint2";
    expect(PP_EUNSUP, PP_OP_ABS, (pp_attrs){0}, &x2, 1, "u2");
    check_case = "Sum on f8e8m0";
    expect(PP_EUNSUP, PP_OP_SUM, (pp_attrs){0}, &e8, 1, "f8e8m0");
    check_case = "Where on f8e4m3fn";
    uint8_t cond[6] = {1, 0, 1, 0, 1, 0};
    pprt_tensor wh[3] = {{PP_BOOL, {2, {2, 3}}, cond}, x8, x8};
    expect(PP_EUNSUP, PP_OP_WHERE, (pp_attrs){0}, wh, 3, "f8e4m3fn");
    check_case = "Equal on int4";
    pprt_tensor eq[2] = {x4, x4};
    expect(PP_EUNSUP, PP_OP_EQUAL, (pp_attrs){0}, eq, 2, "i4");
    check_case = "Cast with saturate=2";
    pp_attr bad[2] = {attr_int("to", PP_F8E4M3FN), attr_int("saturate", 2)};
    float f6[6] = {0};
    pprt_tensor xf = {PP_F32, {1, {6}}, f6};
    expect(PP_EINVAL, PP_OP_CAST, (pp_attrs){bad, 2, 19}, &xf, 1, "saturate");
    check_case = "Cast with round_mode=zero";
    bad[1] = attr_str("round_mode", "zero");
    expect(PP_EINVAL, PP_OP_CAST, (pp_attrs){bad, 2, 25}, &xf, 1, "round_mode");
}

/* pprt --check on the low-precision types: small floats by code, packed
 * integers by value, padding bits ignored. */
static void test_lowp_compare(void) {
    pprt_diff d;
    check_case = "compare f8e4m3fn";
    uint8_t a[4] = {0x38, 0x7f, 0x00, 0x40}, b[4] = {0x38, 0x7f, 0x80, 0x40};
    pprt_compare(PP_F8E4M3FN, a, a, 4, 1e-3, 1e-5, &d);
    CHECK(d.bad == 0, "equal codes: %lld bad", (long long)d.bad);
    pprt_compare(PP_F8E4M3FN, a, b, 4, 1, 1, &d); /* +0 vs -0 differ: compared by code */
    CHECK(d.bad == 1 && d.first_bad == 2, "+0 vs -0: %lld bad at %lld", (long long)d.bad,
          (long long)d.first_bad);
    uint8_t c[4] = {0x38, 0xff, 0x00, 0x40}; /* NaN vs -NaN */
    pprt_compare(PP_F8E4M3FN, a, c, 4, 1, 1, &d);
    CHECK(d.bad == 1 && d.first_bad == 1 && isinf(d.max_abs), "NaN vs -NaN: %lld bad", (long long)d.bad);
    uint8_t e[4] = {0x38, 0x7f, 0x00, 0x41};
    pprt_compare(PP_F8E4M3FN, a, e, 4, 1e-3, 1e-5, &d);
    CHECK(d.bad == 1 && d.first_bad == 3 && d.max_abs == 0.25, "2 vs 2.25: %lld bad, max abs %g",
          (long long)d.bad, d.max_abs);
    check_case = "compare int4 (padding ignored)";
    uint8_t p[2] = {0xf1, 0x07}, q[2] = {0xf1, 0xa7};
    pprt_compare(PP_I4, p, q, 3, 0, 0, &d);
    CHECK(d.bad == 0, "%lld bad", (long long)d.bad);
    q[1] = 0x06;
    pprt_compare(PP_I4, p, q, 3, 0, 0, &d);
    CHECK(d.bad == 1 && d.first_bad == 2 && d.got == 7 && d.want == 6, "%lld bad", (long long)d.bad);
    pprt_compare(PP_I4, p, p, 2, 0, 0, &d);
    CHECK(d.bad == 0 && d.n == 2, "n %lld", (long long)d.n);
    uint8_t r[1] = {0xe1};
    pprt_compare(PP_I4, p, r, 2, 0, 0, &d); /* -1 vs -2 */
    CHECK(d.bad == 1 && d.got == -1 && d.want == -2, "got %g want %g", d.got, d.want);
}

/* ---- broadcasting ------------------------------------------------------------------------- */

/* element offset in x (shape xs, right-aligned against os) of output index `lin` */
static int64_t bc_offset(const pp_shape *xs, const pp_shape *os, int64_t lin) {
    int64_t off = 0, stride = 1;
    for (int i = os->rank - 1; i >= 0; i--) {
        int64_t idx = lin % os->dim[i];
        lin /= os->dim[i];
        int ix = i - (os->rank - xs->rank);
        if (ix < 0) continue;
        if (xs->dim[ix] != 1) off += idx * stride;
        stride *= xs->dim[ix];
    }
    return off;
}

static pp_shape random_shape(const pp_shape *full) {
    pp_shape s = {.rank = (int)(rng_next() % (unsigned)(full->rank + 1))};
    for (int i = 0; i < s.rank; i++) {
        int64_t d = full->dim[full->rank - s.rank + i];
        s.dim[i] = (rng_next() % 3 == 0) ? 1 : d;
    }
    return s;
}

static void test_broadcast(void) {
    char name[128];
    for (int iter = 0; iter < 200; iter++) {
        pp_shape full = {.rank = 1 + (int)(rng_next() % 5)};
        for (int i = 0; i < full.rank; i++) full.dim[i] = 1 + (int64_t)(rng_next() % 4);
        pp_shape sa = random_shape(&full), sb = random_shape(&full), sc = random_shape(&full);
        char s1[64], s2[64], s3[64];
        snprintf(name, sizeof name, "broadcast %s %s %s", pp_shape_str(&sa, s1, 64),
                 pp_shape_str(&sb, s2, 64), pp_shape_str(&sc, s3, 64));
        check_case = name;
        /* Add f32 */
        pprt_tensor x[3] = {tensor(PP_F32, sa), tensor(PP_F32, sb), tensor(PP_BOOL, sc)}, y;
        for (int64_t i = 0; i < numel(&sa); i++) ((float *)x[0].data)[i] = (float)(rng_next() % 1000);
        for (int64_t i = 0; i < numel(&sb); i++) ((float *)x[1].data)[i] = (float)(rng_next() % 1000);
        for (int64_t i = 0; i < numel(&sc); i++) ((uint8_t *)x[2].data)[i] = rng_next() & 1;
        if (run_ok(PP_OP_ADD, (pp_attrs){0}, x, 2, &y)) {
            int bad = 0;
            for (int64_t i = 0; i < numel(&y.shape); i++) {
                float want = ((float *)x[0].data)[bc_offset(&sa, &y.shape, i)] +
                             ((float *)x[1].data)[bc_offset(&sb, &y.shape, i)];
                bad += ((float *)y.data)[i] != want;
            }
            CHECK(bad == 0, "Add: %d wrong elements", bad);
            free(y.data);
        }
        /* Where(c, a, b) */
        pprt_tensor w[3] = {x[2], x[0], x[1]};
        if (run_ok(PP_OP_WHERE, (pp_attrs){0}, w, 3, &y)) {
            int bad = 0;
            for (int64_t i = 0; i < numel(&y.shape); i++) {
                bool c = ((uint8_t *)x[2].data)[bc_offset(&sc, &y.shape, i)];
                float want = c ? ((float *)x[0].data)[bc_offset(&sa, &y.shape, i)]
                               : ((float *)x[1].data)[bc_offset(&sb, &y.shape, i)];
                bad += ((float *)y.data)[i] != want;
            }
            CHECK(bad == 0, "Where: %d wrong elements", bad);
            free(y.data);
        }
        for (int i = 0; i < 3; i++) free(x[i].data);
        /* Sub int8 wraps */
        pprt_tensor xi[2] = {tensor(PP_I8, sa), tensor(PP_I8, sb)};
        for (int64_t i = 0; i < numel(&sa); i++) ((int8_t *)xi[0].data)[i] = (int8_t)rng_next();
        for (int64_t i = 0; i < numel(&sb); i++) ((int8_t *)xi[1].data)[i] = (int8_t)rng_next();
        if (run_ok(PP_OP_SUB, (pp_attrs){0}, xi, 2, &y)) {
            int bad = 0;
            for (int64_t i = 0; i < numel(&y.shape); i++) {
                int d = ((int8_t *)xi[0].data)[bc_offset(&sa, &y.shape, i)] -
                        ((int8_t *)xi[1].data)[bc_offset(&sb, &y.shape, i)];
                bad += ((int8_t *)y.data)[i] != (int8_t)(uint8_t)(d & 0xff);
            }
            CHECK(bad == 0, "Sub int8: %d wrong elements", bad);
            free(y.data);
        }
        free(xi[0].data), free(xi[1].data);
    }
}

/* ---- integer edge cases ------------------------------------------------------------------ */

static void test_integers(void) {
    check_case = "int32 Div edge cases";
    int32_t a[] = {INT32_MIN, 7, -7, 7, -7, 5}, b[] = {-1, 2, 2, -2, -2, 0};
    const int32_t want[] = {INT32_MIN, 3, -3, -3, 3, 0};
    pprt_tensor x[2] = {{PP_I32, {1, {6}}, a}, {PP_I32, {1, {6}}, b}}, y;
    if (run_ok(PP_OP_DIV, (pp_attrs){0}, x, 2, &y)) {
        for (int i = 0; i < 6; i++)
            CHECK(((int32_t *)y.data)[i] == want[i], "%d / %d = %d, expected %d", a[i], b[i],
                  ((int32_t *)y.data)[i], want[i]);
        free(y.data);
    }
    check_case = "int64 Mul wraps";
    int64_t m[] = {INT64_MAX, 3}, m2[] = {2, -5};
    pprt_tensor xm[2] = {{PP_I64, {1, {2}}, m}, {PP_I64, {1, {2}}, m2}};
    if (run_ok(PP_OP_MUL, (pp_attrs){0}, xm, 2, &y)) {
        CHECK(((int64_t *)y.data)[0] == -2 && ((int64_t *)y.data)[1] == -15, "got %lld %lld",
              (long long)((int64_t *)y.data)[0], (long long)((int64_t *)y.data)[1]);
        free(y.data);
    }
    check_case = "float -> int Cast saturates";
    float f[] = {1e10f, -1e10f, NAN, -2.7f, 2.7f, 127.9f, -128.9f};
    int8_t i8[7];
    const int8_t w8[] = {127, -128, 0, -2, 2, 127, -128};
    if (cast(PP_F32, PP_I8, f, i8, 7))
        for (int i = 0; i < 7; i++) CHECK(i8[i] == w8[i], "%g -> %d, expected %d", (double)f[i], i8[i], w8[i]);
    uint32_t u32[7];
    const uint32_t wu[] = {UINT32_MAX, 0, 0, 0, 2, 127, 0};
    if (cast(PP_F32, PP_U32, f, u32, 7))
        for (int i = 0; i < 7; i++) CHECK(u32[i] == wu[i], "%g -> %u, expected %u", (double)f[i], u32[i], wu[i]);
    check_case = "int Pow";
    int64_t base[] = {3, -2, 2, 1, -1, 5, 0}, ex[] = {4, 3, 62, -3, -3, -1, 0};
    const int64_t wp[] = {81, -8, (int64_t)1 << 62, 1, -1, 0, 1};
    pprt_tensor xp[2] = {{PP_I64, {1, {7}}, base}, {PP_I64, {1, {7}}, ex}};
    if (run_ok(PP_OP_POW, (pp_attrs){0}, xp, 2, &y)) {
        for (int i = 0; i < 7; i++)
            CHECK(((int64_t *)y.data)[i] == wp[i], "%lld ^ %lld = %lld, expected %lld",
                  (long long)base[i], (long long)ex[i], (long long)((int64_t *)y.data)[i],
                  (long long)wp[i]);
        free(y.data);
    }
}

/* ---- Mod ------------------------------------------------------------------------------------ */

static pp_attrs mod_attrs(pp_attr *a, int64_t fmod) {
    *a = attr_int("fmod", fmod);
    return (pp_attrs){a, 1, 13};
}

/* Mod of a[i], b[i] (n int64 values) in type t with the given fmod; the
 * values fit t. want[] as int64. */
static void mod_case(pp_dtype t, int64_t fmod, const int64_t *a, const int64_t *b,
                     const int64_t *want, int n) {
    char av[8 * 16], bv[8 * 16];
    if (!cast(PP_I64, t, a, av, n) || !cast(PP_I64, t, b, bv, n)) return;
    pp_attr at;
    pprt_tensor x[2] = {{t, {1, {n}}, av}, {t, {1, {n}}, bv}}, y;
    if (!run_ok(PP_OP_MOD, mod_attrs(&at, fmod), x, 2, &y)) return;
    int64_t got[16];
    if (cast(t, PP_I64, y.data, got, n))
        for (int i = 0; i < n; i++)
            CHECK(got[i] == want[i], "%s: %lld mod %lld = %lld, expected %lld (fmod=%lld)",
                  pp_dtype_name(t), (long long)a[i], (long long)b[i], (long long)got[i],
                  (long long)want[i], (long long)fmod);
    free(y.data);
}

static void test_mod(void) {
    /* signs: fmod=0 follows the divisor (Python), fmod=1 the dividend (C);
     * x mod 0 = 0 in both */
    static const int64_t a[] = {7, -7, 7, -7, 6, -6, 0, 5, -5, 3};
    static const int64_t b[] = {2, 2, -2, -2, 3, -3, 4, 0, 0, 5};
    static const int64_t w0[] = {1, 1, -1, -1, 0, 0, 0, 0, 0, 3};
    static const int64_t w1[] = {1, -1, 1, -1, 0, 0, 0, 0, 0, 3};
    static const pp_dtype sints[] = {PP_I8, PP_I16, PP_I32, PP_I64};
    char name[64];
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "Mod sign rules %s", pp_dtype_name(sints[k]));
        check_case = name;
        mod_case(sints[k], 0, a, b, w0, 10);
        mod_case(sints[k], 1, a, b, w1, 10);
    }
    /* MIN mod -1 (C's % traps), MIN mod MAX, MAX mod MIN */
    check_case = "Mod int64 extremes";
    {
        const int64_t ea[] = {INT64_MIN, INT64_MIN, INT64_MAX, INT64_MIN, 5};
        const int64_t eb[] = {-1, INT64_MAX, INT64_MIN, 1, -1};
        const int64_t e0[] = {0, INT64_MAX - 1, -1, 0, 0};
        const int64_t e1[] = {0, -1, INT64_MAX, 0, 0};
        mod_case(PP_I64, 0, ea, eb, e0, 5);
        mod_case(PP_I64, 1, ea, eb, e1, 5);
    }
    check_case = "Mod int8 extremes";
    {
        const int64_t ea[] = {-128, -128, 127, -128};
        const int64_t eb[] = {-1, 127, -128, 3};
        const int64_t e0[] = {0, 126, -1, 1};
        const int64_t e1[] = {0, -1, 127, -2};
        mod_case(PP_I8, 0, ea, eb, e0, 4);
        mod_case(PP_I8, 1, ea, eb, e1, 4);
    }
    /* unsigned: both modes are the plain remainder; the top values stay unsigned */
    static const pp_dtype uints[] = {PP_U8, PP_U16, PP_U32, PP_U64};
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "Mod %s", pp_dtype_name(uints[k]));
        check_case = name;
        const uint64_t top = uints[k] == PP_U8 ? UINT8_MAX : uints[k] == PP_U16 ? UINT16_MAX
                             : uints[k] == PP_U32 ? UINT32_MAX : UINT64_MAX;
        int64_t ua[] = {7, 0, 9, 5, 6}, ub[] = {3, 5, 0, (int64_t)top, 4};
        int64_t uw[] = {1, 0, 0, 5, 2};
        if (uints[k] != PP_U64) { /* top - 1 mod top = top - 1 (int64 holds it) */
            ua[4] = (int64_t)top - 1, ub[4] = (int64_t)top, uw[4] = (int64_t)top - 1;
        }
        mod_case(uints[k], 0, ua, ub, uw, 5);
        mod_case(uints[k], 1, ua, ub, uw, 5);
    }
    check_case = "Mod uint64 top values";
    {
        uint64_t ua[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX}, ub[] = {UINT64_MAX, UINT64_MAX, 2};
        const uint64_t uw[] = {0, UINT64_MAX - 1, 1};
        pp_attr at;
        pprt_tensor x[2] = {{PP_U64, {1, {3}}, ua}, {PP_U64, {1, {3}}, ub}}, y;
        if (run_ok(PP_OP_MOD, mod_attrs(&at, 0), x, 2, &y)) {
            for (int i = 0; i < 3; i++)
                CHECK(((uint64_t *)y.data)[i] == uw[i], "element %d: %llu", i,
                      (unsigned long long)((uint64_t *)y.data)[i]);
            free(y.data);
        }
    }
    /* floats, fmod=1: C's fmod, the dividend's sign; x fmod 0 is NaN */
    check_case = "Mod float fmod=1";
    {
        float fa[] = {5.5f, -5.5f, 5.5f, -5.5f, 3.0f, 1.0f, -0.0f, INFINITY};
        float fb[] = {2.0f, 2.0f, -2.0f, -2.0f, 0.0f, INFINITY, 1.0f, 2.0f};
        pp_attr at;
        pprt_tensor x[2] = {{PP_F32, {1, {8}}, fa}, {PP_F32, {1, {8}}, fb}}, y;
        if (run_ok(PP_OP_MOD, mod_attrs(&at, 1), x, 2, &y)) {
            const float *p = y.data;
            CHECK(p[0] == 1.5f && p[1] == -1.5f && p[2] == 1.5f && p[3] == -1.5f,
                  "signs: %g %g %g %g", (double)p[0], (double)p[1], (double)p[2], (double)p[3]);
            CHECK(isnan(p[4]) && p[5] == 1.0f && p[6] == 0 && signbit(p[6]) && isnan(p[7]),
                  "specials: %g %g %g %g", (double)p[4], (double)p[5], (double)p[6],
                  (double)p[7]);
            free(y.data);
        }
        double da[] = {-4.3, 1e300, 7.0}, db[] = {2.1, 3.0, -0.5};
        pprt_tensor xd[2] = {{PP_F64, {1, {3}}, da}, {PP_F64, {1, {3}}, db}};
        if (run_ok(PP_OP_MOD, mod_attrs(&at, 1), xd, 2, &y)) {
            for (int i = 0; i < 3; i++)
                CHECK(((double *)y.data)[i] == fmod(da[i], db[i]), "f64 element %d: %g", i,
                      ((double *)y.data)[i]);
            free(y.data);
        }
        /* float16: -5.5 fmod 2 = -1.5 (0xbe00), 7 fmod -4 = 3 (0x4200) */
        uint16_t ha[] = {0xc580, 0x4700}, hb[] = {0x4000, 0xc400};
        pprt_tensor xh[2] = {{PP_F16, {1, {2}}, ha}, {PP_F16, {1, {2}}, hb}};
        if (run_ok(PP_OP_MOD, mod_attrs(&at, 1), xh, 2, &y)) {
            const uint16_t *p = y.data;
            CHECK(p[0] == 0xbe00 && p[1] == 0x4200, "f16: 0x%04x 0x%04x", p[0], p[1]);
            free(y.data);
        }
    }
    /* broadcasting, both modes, against a naive loop; divisors include 0 */
    for (int iter = 0; iter < 100; iter++) {
        pp_shape full = {.rank = 1 + (int)(rng_next() % 4)};
        for (int i = 0; i < full.rank; i++) full.dim[i] = 1 + (int64_t)(rng_next() % 4);
        pp_shape sa = random_shape(&full), sb = random_shape(&full);
        char s1[64], s2[64];
        snprintf(name, sizeof name, "Mod broadcast %s %s", pp_shape_str(&sa, s1, 64),
                 pp_shape_str(&sb, s2, 64));
        check_case = name;
        pprt_tensor x[2] = {tensor(PP_I32, sa), tensor(PP_I32, sb)}, y;
        int32_t *pa = x[0].data, *pb = x[1].data;
        for (int64_t i = 0; i < numel(&sa); i++) pa[i] = (int32_t)(rng_next() % 201) - 100;
        for (int64_t i = 0; i < numel(&sb); i++) pb[i] = (int32_t)(rng_next() % 21) - 10;
        for (int fm = 0; fm < 2; fm++) {
            pp_attr at;
            if (!run_ok(PP_OP_MOD, mod_attrs(&at, fm), x, 2, &y)) continue;
            int bad = 0;
            for (int64_t i = 0; i < numel(&y.shape); i++) {
                const int32_t va = pa[bc_offset(&sa, &y.shape, i)];
                const int32_t vb = pb[bc_offset(&sb, &y.shape, i)];
                /* a - b * q with q rounded down (fmod=0) or toward zero (fmod=1) */
                int32_t want = 0;
                if (vb != 0) {
                    double q = (double)va / vb;
                    want = va - vb * (int32_t)(fm ? trunc(q) : floor(q));
                }
                bad += ((int32_t *)y.data)[i] != want;
            }
            CHECK(bad == 0, "fmod=%d: %d wrong elements", fm, bad);
            free(y.data);
        }
        free(x[0].data), free(x[1].data);
    }
    /* errors: fmod=0 on floats (shape function and kernel), fmod=2, mixed types */
    float f[4] = {1, 2, 3, 4};
    int32_t iv[4] = {1, 2, 3, 4};
    pprt_tensor ff[2] = {{PP_F32, {1, {4}}, f}, {PP_F32, {1, {4}}, f}};
    pp_attr at;
    check_case = "Mod fmod=0 on float32";
    expect(PP_EINVAL, PP_OP_MOD, mod_attrs(&at, 0), ff, 2, "'fmod'=0");
    check_case = "Mod without fmod on float32";
    expect(PP_EINVAL, PP_OP_MOD, (pp_attrs){NULL, 0, 13}, ff, 2, "'fmod'");
    check_case = "Mod fmod=0 on float16";
    uint16_t h[4] = {0};
    pprt_tensor hh[2] = {{PP_F16, {1, {4}}, h}, {PP_F16, {1, {4}}, h}};
    expect(PP_EINVAL, PP_OP_MOD, mod_attrs(&at, 0), hh, 2, "type f16");
    check_case = "Mod kernel fmod=0 on float64";
    {
        double d[4] = {0}, o[4];
        pprt_tensor dd[2] = {{PP_F64, {1, {4}}, d}, {PP_F64, {1, {4}}, d}};
        pprt_tensor y = {PP_F64, {1, {4}}, o};
        pp_err err = {0};
        pp_status st = pprt_ref_kernels[PP_OP_MOD](mod_attrs(&at, 0), dd, 2, &y, 1, &scratch, &err);
        CHECK(st == PP_EINVAL && strstr(err.msg, "'fmod'=0"), "got %s (%s)", pp_status_name(st),
              err.msg);
    }
    check_case = "Mod fmod=2";
    pprt_tensor ii[2] = {{PP_I32, {1, {4}}, iv}, {PP_I32, {1, {4}}, iv}};
    expect(PP_EINVAL, PP_OP_MOD, mod_attrs(&at, 2), ii, 2, "'fmod'=2");
    check_case = "Mod int32 mod float32";
    pprt_tensor mix[2] = {ii[0], ff[0]};
    expect(PP_EINVAL, PP_OP_MOD, mod_attrs(&at, 1), mix, 2, "input B");
    check_case = "Mod on bool";
    uint8_t bv[4] = {1, 1, 1, 1};
    pprt_tensor bb[2] = {{PP_BOOL, {1, {4}}, bv}, {PP_BOOL, {1, {4}}, bv}};
    expect(PP_EUNSUP, PP_OP_MOD, mod_attrs(&at, 0), bb, 2, "bool");
}

/* ---- CumSum ------------------------------------------------------------------------------ */

static void test_cumsum(void) {
    pp_shape s = {3, {3, 4, 5}};
    pprt_tensor x = tensor(PP_F32, s);
    float *px = x.data;
    for (int64_t i = 0; i < numel(&s); i++) px[i] = (float)(rng_next() % 17);
    char name[96];
    for (int axis = -3; axis < 3; axis++)
        for (int ex = 0; ex < 2; ex++)
            for (int rev = 0; rev < 2; rev++) {
                snprintf(name, sizeof name, "CumSum axis %d exclusive %d reverse %d", axis, ex, rev);
                check_case = name;
                int64_t ax = axis;
                pprt_tensor in[2] = {x, {PP_I64, {0, {0}}, &ax}}, y;
                pp_attr at[2] = {attr_int("exclusive", ex), attr_int("reverse", rev)};
                if (!run_ok(PP_OP_CUMSUM, (pp_attrs){at, 2, 14}, in, 2, &y)) continue;
                int a = axis < 0 ? axis + 3 : axis, bad = 0;
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++)
                        for (int k = 0; k < 5; k++) {
                            int idx[3] = {i, j, k}, len = (int)s.dim[a];
                            float sum = 0;
                            for (int t = 0; t < len; t++) {
                                bool take = rev ? (ex ? t > idx[a] : t >= idx[a])
                                                : (ex ? t < idx[a] : t <= idx[a]);
                                int id[3] = {i, j, k};
                                id[a] = t;
                                if (take) sum += px[(id[0] * 4 + id[1]) * 5 + id[2]];
                            }
                            bad += ((float *)y.data)[(i * 4 + j) * 5 + k] != sum;
                        }
                CHECK(bad == 0, "%d wrong elements", bad);
                free(y.data);
            }
    free(x.data);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect(pp_status want, pp_op op, pp_attrs at, const pprt_tensor *in, int n_in,
                   const char *needle) {
    pp_err err = {0};
    pprt_tensor y = {0};
    pp_status st = run(op, at, in, n_in, &y, &err);
    if (st == PP_OK) free(y.data);
    CHECK(st == want && (!needle || strstr(err.msg, needle)), "got %s (%s), expected %s naming '%s'",
          pp_status_name(st), err.msg, pp_status_name(want), needle ? needle : "");
}

static void test_errors(void) {
    float f[6] = {0};
    int32_t i[6] = {0};
    uint8_t b[6] = {0};
    pprt_tensor xf = {PP_F32, {2, {2, 3}}, f}, xi = {PP_I32, {2, {2, 3}}, i},
                xb = {PP_BOOL, {2, {2, 3}}, b}, x3 = {PP_F32, {1, {3}}, f},
                x2 = {PP_F32, {1, {2}}, f};
    check_case = "Relu on int32";
    expect(PP_EUNSUP, PP_OP_RELU, (pp_attrs){0}, &xi, 1, "i32");
    check_case = "Add f32 + i32";
    pprt_tensor mix[2] = {xf, xi};
    expect(PP_EINVAL, PP_OP_ADD, (pp_attrs){0}, mix, 2, "input B");
    check_case = "Add [2,3] + [2]";
    pprt_tensor nb[2] = {xf, x2};
    expect(PP_EINVAL, PP_OP_ADD, (pp_attrs){0}, nb, 2, "broadcast");
    check_case = "PRelu slope wider than X";
    pprt_tensor pr[2] = {x3, xf};
    expect(PP_EINVAL, PP_OP_PRELU, (pp_attrs){0}, pr, 2, "slope");
    check_case = "Where with a float condition";
    pprt_tensor wh[3] = {xf, xf, xf};
    expect(PP_EUNSUP, PP_OP_WHERE, (pp_attrs){0}, wh, 3, "condition");
    check_case = "And on float";
    pprt_tensor an[2] = {xf, xf};
    expect(PP_EUNSUP, PP_OP_AND, (pp_attrs){0}, an, 2, "input A");
    check_case = "Not on bool works";
    expect(PP_OK, PP_OP_NOT, (pp_attrs){0}, &xb, 1, NULL);
    check_case = "Cast to string";
    pp_attr to = attr_int("to", PP_STRING);
    expect(PP_EUNSUP, PP_OP_CAST, (pp_attrs){&to, 1, 13}, &xf, 1, "string");
    check_case = "Cast to complex64";
    to = attr_int("to", PP_C64);
    expect(PP_EUNSUP, PP_OP_CAST, (pp_attrs){&to, 1, 19}, &xf, 1, "complex64");
    check_case = "Cast without 'to'";
    expect(PP_EINVAL, PP_OP_CAST, (pp_attrs){0}, &xf, 1, "'to'");
    check_case = "Gelu approximate=fast";
    pp_attr ap = attr_str("approximate", "fast");
    expect(PP_EINVAL, PP_OP_GELU, (pp_attrs){&ap, 1, 20}, &xf, 1, "approximate");
    check_case = "Clip 'min' attribute at opset 13";
    pp_attr mn = attr_float("min", 0);
    expect(PP_EINVAL, PP_OP_CLIP, (pp_attrs){&mn, 1, 13}, &xf, 1, "min");
    check_case = "Clip with a vector bound";
    pprt_tensor cl[2] = {xf, x3};
    expect(PP_EINVAL, PP_OP_CLIP, (pp_attrs){NULL, 0, 13}, cl, 2, "input min");
    check_case = "Clip bounds at opset 7";
    mn = attr_float("min", 0.5f);
    pprt_tensor y;
    f[0] = -1, f[1] = 2;
    if (run_ok(PP_OP_CLIP, (pp_attrs){&mn, 1, 7}, &xf, 1, &y)) {
        CHECK(((float *)y.data)[0] == 0.5f && ((float *)y.data)[1] == 2.0f, "got %g %g",
              (double)((float *)y.data)[0], (double)((float *)y.data)[1]);
        free(y.data);
    }
    check_case = "CumSum constant axis out of range";
    int64_t ax = 2;
    pp_tinfo ti[2] = {{PP_F32, xf.shape, NULL}, {PP_I64, {0, {0}}, &ax}}, to1[1];
    pp_err err = {0};
    pp_status st = pp_infer(PP_OP_CUMSUM, (pp_attrs){NULL, 0, 14}, ti, 2, to1, 1, &err);
    CHECK(st == PP_EINVAL && strstr(err.msg, "axis"), "got %s (%s)", pp_status_name(st), err.msg);
    check_case = "CumSum axis out of range at run time";
    pprt_tensor cs[2] = {xf, {PP_I64, {0, {0}}, &ax}};
    expect(PP_EINVAL, PP_OP_CUMSUM, (pp_attrs){NULL, 0, 14}, cs, 2, "axis");
    check_case = "Dropout training_mode with ratio 0.5";
    uint8_t tr = 1;
    float ratio = 0.5f;
    pprt_tensor dr[3] = {xf, {PP_F32, {0, {0}}, &ratio}, {PP_BOOL, {0, {0}}, &tr}};
    expect(PP_EUNSUP, PP_OP_DROPOUT, (pp_attrs){NULL, 0, 13}, dr, 3, "training");
    check_case = "Dropout training_mode with ratio 0";
    ratio = 0;
    expect(PP_OK, PP_OP_DROPOUT, (pp_attrs){NULL, 0, 13}, dr, 3, NULL);
    check_case = "Sum of one input";
    expect(PP_OK, PP_OP_SUM, (pp_attrs){0}, &xf, 1, NULL);
    check_case = "Sum over int32";
    expect(PP_EUNSUP, PP_OP_SUM, (pp_attrs){0}, &xi, 1, "i32");
}

int main(void) {
    test_half();
    test_minifloats();
    test_e8m0();
    test_small_ints();
    test_lowp_ops();
    test_lowp_compare();
    test_broadcast();
    test_integers();
    test_mod();
    test_cumsum();
    test_errors();
    pprt_scratch_free(&scratch);
    return check_summary("test_math");
}
