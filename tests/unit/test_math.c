/* test_math.c: the math family (ir/shape_math.c, runtime/cpu/ref_math.c)
 * against values and naive loops written here:
 *   - float16 / bfloat16 conversion through Cast: every bit pattern round
 *     trips, and hand-picked roundings (ties to even, overflow, subnormals);
 *   - the broadcasting engine: Add, Sub (int8, wrapping) and Where over random
 *     shape pairs, against an index-by-index naive broadcast;
 *   - integer edge cases: division by zero and MIN / -1, float -> int Cast
 *     saturation, integer Pow;
 *   - CumSum against a naive loop for every axis / exclusive / reverse;
 *   - errors: shape functions and kernels reject what they must, naming it.
 * Each kernel runs twice (different garbage in the output) and must give
 * bit-identical results.
 * Exit status 0 when everything passes, 1 otherwise (each failure is printed). */
#include "runtime/kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_checks, n_failures;
static const char *cur_case = "";

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    n_failures++;
    printf("FAIL [%s]: ", cur_case);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

#define CHECK(cond, ...)                \
    do {                                \
        n_checks++;                     \
        if (!(cond)) fail(__VA_ARGS__); \
    } while (0)

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
    size_t nb = (size_t)numel(&to[0].shape) * pp_dtype_size(to[0].dtype);
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
    if (st != PP_OK) fail("%s: %s", pp_status_name(st), err.msg);
    return st == PP_OK;
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------ */

static bool cast(pp_dtype from, pp_dtype to, const void *src, void *dst, int64_t n) {
    pp_attr a = attr_int("to", to);
    pp_attrs at = {&a, 1, 13};
    pprt_tensor x = {from, {1, {n}}, (void *)src}, y;
    if (!run_ok(PP_OP_CAST, at, &x, 1, &y)) return false;
    memcpy(dst, y.data, (size_t)n * pp_dtype_size(to));
    free(y.data);
    return true;
}

static void test_half(void) {
    static uint16_t h[65536], h2[65536];
    static float f[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int k = 0; k < 2; k++) {
        pp_dtype t = k ? PP_BF16 : PP_F16;
        cur_case = k ? "bf16 round trip" : "f16 round trip";
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
    cur_case = "f64 -> f16 single rounding";
    double d = 1.0 + ldexp(1, -11) + ldexp(1, -40);
    uint16_t g1;
    if (cast(PP_F64, PP_F16, &d, &g1, 1)) CHECK(g1 == 0x3c01, "got 0x%04x, expected 0x3c01", g1);
    cur_case = "f32 -> bf16 rounding";
    const float bin[] = {1.0f + ldexpf(1, -8), 1.0f + 3 * ldexpf(1, -8), 3.0e38f, 1.0f};
    const uint16_t bwant[] = {0x3f80, 0x3f82, 0x7f62, 0x3f80};
    uint16_t bgot[4];
    if (cast(PP_F32, PP_BF16, bin, bgot, 4))
        for (int i = 0; i < 4; i++)
            CHECK(bgot[i] == bwant[i], "f32 %g -> bf16 0x%04x, expected 0x%04x", (double)bin[i],
                  bgot[i], bwant[i]);
    cur_case = "f16 Add computes in f32 and rounds";
    uint16_t a[2] = {0x3c00, 0x3c00}, b[2] = {0x1000, 0x3c00}; /* 1 + 2^-11 -> 1 (tie, even), 1 + 1 = 2 */
    pprt_tensor ab[2] = {{PP_F16, {1, {2}}, a}, {PP_F16, {1, {2}}, b}}, y;
    if (run_ok(PP_OP_ADD, (pp_attrs){0}, ab, 2, &y)) {
        const uint16_t *p = y.data;
        CHECK(p[0] == 0x3c00 && p[1] == 0x4000, "got 0x%04x 0x%04x", p[0], p[1]);
        free(y.data);
    }
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
        cur_case = name;
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
    cur_case = "int32 Div edge cases";
    int32_t a[] = {INT32_MIN, 7, -7, 7, -7, 5}, b[] = {-1, 2, 2, -2, -2, 0};
    const int32_t want[] = {INT32_MIN, 3, -3, -3, 3, 0};
    pprt_tensor x[2] = {{PP_I32, {1, {6}}, a}, {PP_I32, {1, {6}}, b}}, y;
    if (run_ok(PP_OP_DIV, (pp_attrs){0}, x, 2, &y)) {
        for (int i = 0; i < 6; i++)
            CHECK(((int32_t *)y.data)[i] == want[i], "%d / %d = %d, expected %d", a[i], b[i],
                  ((int32_t *)y.data)[i], want[i]);
        free(y.data);
    }
    cur_case = "int64 Mul wraps";
    int64_t m[] = {INT64_MAX, 3}, m2[] = {2, -5};
    pprt_tensor xm[2] = {{PP_I64, {1, {2}}, m}, {PP_I64, {1, {2}}, m2}};
    if (run_ok(PP_OP_MUL, (pp_attrs){0}, xm, 2, &y)) {
        CHECK(((int64_t *)y.data)[0] == -2 && ((int64_t *)y.data)[1] == -15, "got %lld %lld",
              (long long)((int64_t *)y.data)[0], (long long)((int64_t *)y.data)[1]);
        free(y.data);
    }
    cur_case = "float -> int Cast saturates";
    float f[] = {1e10f, -1e10f, NAN, -2.7f, 2.7f, 127.9f, -128.9f};
    int8_t i8[7];
    const int8_t w8[] = {127, -128, 0, -2, 2, 127, -128};
    if (cast(PP_F32, PP_I8, f, i8, 7))
        for (int i = 0; i < 7; i++) CHECK(i8[i] == w8[i], "%g -> %d, expected %d", (double)f[i], i8[i], w8[i]);
    uint32_t u32[7];
    const uint32_t wu[] = {UINT32_MAX, 0, 0, 0, 2, 127, 0};
    if (cast(PP_F32, PP_U32, f, u32, 7))
        for (int i = 0; i < 7; i++) CHECK(u32[i] == wu[i], "%g -> %u, expected %u", (double)f[i], u32[i], wu[i]);
    cur_case = "int Pow";
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
                cur_case = name;
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
    cur_case = "Relu on int32";
    expect(PP_EUNSUP, PP_OP_RELU, (pp_attrs){0}, &xi, 1, "i32");
    cur_case = "Add f32 + i32";
    pprt_tensor mix[2] = {xf, xi};
    expect(PP_EINVAL, PP_OP_ADD, (pp_attrs){0}, mix, 2, "input B");
    cur_case = "Add [2,3] + [2]";
    pprt_tensor nb[2] = {xf, x2};
    expect(PP_EINVAL, PP_OP_ADD, (pp_attrs){0}, nb, 2, "broadcast");
    cur_case = "PRelu slope wider than X";
    pprt_tensor pr[2] = {x3, xf};
    expect(PP_EINVAL, PP_OP_PRELU, (pp_attrs){0}, pr, 2, "slope");
    cur_case = "Where with a float condition";
    pprt_tensor wh[3] = {xf, xf, xf};
    expect(PP_EUNSUP, PP_OP_WHERE, (pp_attrs){0}, wh, 3, "condition");
    cur_case = "And on float";
    pprt_tensor an[2] = {xf, xf};
    expect(PP_EUNSUP, PP_OP_AND, (pp_attrs){0}, an, 2, "input A");
    cur_case = "Not on bool works";
    expect(PP_OK, PP_OP_NOT, (pp_attrs){0}, &xb, 1, NULL);
    cur_case = "Cast to string";
    pp_attr to = attr_int("to", PP_STRING);
    expect(PP_EUNSUP, PP_OP_CAST, (pp_attrs){&to, 1, 13}, &xf, 1, "string");
    cur_case = "Cast to float8";
    to = attr_int("to", 17);
    expect(PP_EUNSUP, PP_OP_CAST, (pp_attrs){&to, 1, 19}, &xf, 1, "17");
    cur_case = "Cast without 'to'";
    expect(PP_EINVAL, PP_OP_CAST, (pp_attrs){0}, &xf, 1, "'to'");
    cur_case = "Gelu approximate=fast";
    pp_attr ap = attr_str("approximate", "fast");
    expect(PP_EINVAL, PP_OP_GELU, (pp_attrs){&ap, 1, 20}, &xf, 1, "approximate");
    cur_case = "Clip 'min' attribute at opset 13";
    pp_attr mn = attr_float("min", 0);
    expect(PP_EINVAL, PP_OP_CLIP, (pp_attrs){&mn, 1, 13}, &xf, 1, "min");
    cur_case = "Clip with a vector bound";
    pprt_tensor cl[2] = {xf, x3};
    expect(PP_EINVAL, PP_OP_CLIP, (pp_attrs){NULL, 0, 13}, cl, 2, "input min");
    cur_case = "Clip bounds at opset 7";
    mn = attr_float("min", 0.5f);
    pprt_tensor y;
    f[0] = -1, f[1] = 2;
    if (run_ok(PP_OP_CLIP, (pp_attrs){&mn, 1, 7}, &xf, 1, &y)) {
        CHECK(((float *)y.data)[0] == 0.5f && ((float *)y.data)[1] == 2.0f, "got %g %g",
              (double)((float *)y.data)[0], (double)((float *)y.data)[1]);
        free(y.data);
    }
    cur_case = "CumSum constant axis out of range";
    int64_t ax = 2;
    pp_tinfo ti[2] = {{PP_F32, xf.shape, NULL}, {PP_I64, {0, {0}}, &ax}}, to1[1];
    pp_err err = {0};
    pp_status st = pp_infer(PP_OP_CUMSUM, (pp_attrs){NULL, 0, 14}, ti, 2, to1, 1, &err);
    CHECK(st == PP_EINVAL && strstr(err.msg, "axis"), "got %s (%s)", pp_status_name(st), err.msg);
    cur_case = "CumSum axis out of range at run time";
    pprt_tensor cs[2] = {xf, {PP_I64, {0, {0}}, &ax}};
    expect(PP_EINVAL, PP_OP_CUMSUM, (pp_attrs){NULL, 0, 14}, cs, 2, "axis");
    cur_case = "Dropout training_mode with ratio 0.5";
    uint8_t tr = 1;
    float ratio = 0.5f;
    pprt_tensor dr[3] = {xf, {PP_F32, {0, {0}}, &ratio}, {PP_BOOL, {0, {0}}, &tr}};
    expect(PP_EUNSUP, PP_OP_DROPOUT, (pp_attrs){NULL, 0, 13}, dr, 3, "training");
    cur_case = "Dropout training_mode with ratio 0";
    ratio = 0;
    expect(PP_OK, PP_OP_DROPOUT, (pp_attrs){NULL, 0, 13}, dr, 3, NULL);
    cur_case = "Sum of one input";
    expect(PP_OK, PP_OP_SUM, (pp_attrs){0}, &xf, 1, NULL);
    cur_case = "Sum over int32";
    expect(PP_EUNSUP, PP_OP_SUM, (pp_attrs){0}, &xi, 1, "i32");
}

int main(void) {
    test_half();
    test_broadcast();
    test_integers();
    test_cumsum();
    test_errors();
    pprt_scratch_free(&scratch);
    printf("%d checks, %d failures\n", n_checks, n_failures);
    return n_failures ? 1 : 0;
}
