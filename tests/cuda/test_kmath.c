/* test_kmath.c: the CUDA backend's own-kernel math (runtime/cuda/kmath.h,
 * the functions the GPU kernels and the emulator share) against the
 * reference kernels (runtime/cpu), which are the oracle:
 *   - float16 and bfloat16 conversions: every 16-bit code up, and a million
 *     random floats plus the edge cases (subnormals, ties, overflow, NaN)
 *     down, bit for bit against the reference Cast;
 *   - elementwise ops (unary, binary, comparisons, logic, Where, Clip, Cast)
 *     over random shapes with random broadcasting, every element type each
 *     op takes: the kernel's threads (pcu_ew_make's merged dims and
 *     strides, pcu_ew_at per element) against the reference kernel of the
 *     ONNX op; integers and bit moves exactly, floats within 2 ulp-ish
 *     (rtol 1e-6, the same libm on both sides here), with NaN, infinities
 *     and signed zeros among the float inputs;
 *   - Sin, Cos and Tan (kmath.h's own argument reduction) against glibc's
 *     double functions over a million floats of every exponent;
 *   - the kernels' 32-bit index arithmetic against 64-bit division over
 *     operands on both sides of 2^32;
 *   - the row kernels in lanes (Softmax, LogSoftmax, Layer/Group/RMS
 *     normalization with mean and inv_std_dev: three launches sharing a
 *     workspace of partials) against their one-thread-per-row form, which
 *     the node tests hold to the reference kernels: within 2 ulp, NaN where
 *     it is, over rows with NaN, infinities, huge and tiny values, lane
 *     threads run in reverse order;
 *   - the row kernels in one block (--cuda-row-kernels: Softmax, LogSoftmax,
 *     LayerNorm as a block per row, phases and barriers) through their
 *     kernels.def rows, lanes in reverse order and the shared memory
 *     poisoned, against the one-thread form: Softmax within 8 ulp (expf of
 *     x - max rounded to f32: 6 ulp worst over these rows, whose values lie
 *     within +-4; the error grows with a row's spread, about 2^-24 |x - max|
 *     relative), the others within 2, NaN where it is;
 *   - the fused attention kernel (--cuda-fused-attention: kmath.h's
 *     cooperative pcu_fattn_ph through its kernels.def row, phases with the
 *     GPU's barriers, shared memory poisoned) against attention in double
 *     (scores, softmax and product): within 2e-5 of the largest |V| plus
 *     1e-4 relative, over batches with a broadcast operand, Sq and T not
 *     multiples of the tiles, Sq = 1, T = 1, head dims 8..64, K as the
 *     MatMul's [D, T] and as [T, D], a Mul or a Div of the scores; NaN rows
 *     where the reference has them (a NaN score, a +inf score, a row of
 *     -inf scores) and a first key tile of -inf scores (a row that starts
 *     with nothing to weigh); the lanes in reverse order give the same bits;
 *   - the backward kernels of training plans: pp.MaxPoolGrad's gather form
 *     and pp.AvgPoolGrad's (a thread per input element) against the
 *     reference's scatter forms written out here, bit for bit, over 1-3-D
 *     windows with strides, dilations, pads and ceil-mode tails, values with
 *     ties and NaN, the average's divisor with and without the pads;
 *     BatchNormalization in training mode and pp.BatchNormGrad (a block
 *     per channel, lanes in reverse order, shared memory poisoned) within
 *     4 ulps of the reference kernels' functions (their sums meet in a
 *     tree), the same bits run twice;
 *   - the kernel table (runtime/cuda/kernels.def): the kinds keep the
 *     numbers the launcher's hand-numbered cases had, each parameter block
 *     the size the engine uploaded before the table, and every row has a
 *     name, a size and at least one operand it writes.
 * Runs in about a second; no GPU, no CUDA needed (label fast, cuda). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuplan.h"
#include "runtime/cpu/ref.h"
#include "runtime/kernels.h"

static int failures, checks;
static double fa_worst; /* fused attention: the largest error over the largest |V| */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static double unif(void) { return (double)(next() >> 11) / 9007199254740992.0; }

#define FAIL(...)                                   \
    do {                                            \
        if (failures++ < 20) fprintf(stderr, __VA_ARGS__); \
    } while (0)

/* ---- conversions ----------------------------------------------------------------------------- */

static void ref_cast(const void *x, pp_dtype xt, void *y, pp_dtype yt, int64_t n) {
    pprt_tensor in = {xt, {1, {n}}, (void *)x}, out = {yt, {1, {n}}, y};
    pp_attr to = {.name = "to", .type = PP_ATTR_INT, .i = yt};
    pp_err e = {0};
    if (pprt_ref_kernels[PP_OP_CAST]((pp_attrs){&to, 1, 21}, &in, 1, &out, 1, NULL, &e) != PP_OK) FAIL("cast: %s\n", e.msg);
}

static void test_conversions(void) {
    enum { N = 1 << 16 };
    static uint16_t codes[N];
    static float want[N];
    for (int i = 0; i < N; i++) codes[i] = (uint16_t)i;
    for (int t = 0; t < 2; t++) {
        const pp_dtype h = t ? PP_BF16 : PP_F16;
        ref_cast(codes, h, want, PP_F32, N);
        for (int i = 0; i < N; i++) {
            const float got = t ? pcu_bf2f(codes[i]) : pcu_h2f(codes[i]);
            checks++;
            if (memcmp(&got, &want[i], 4) && !(isnan(got) && isnan(want[i])))
                FAIL("%s code 0x%04x: got %a, want %a\n", t ? "bf16" : "f16", i, got, want[i]);
        }
    }
    enum { M = 1 << 20 };
    float *f = malloc(M * sizeof *f);
    uint16_t *w16 = malloc(M * sizeof *w16);
    for (int i = 0; i < M; i++) {
        uint32_t u = (uint32_t)next();
        if (i % 4 == 1) u = (u & 0x807fffffu) | (uint32_t)(102 + next() % 40) << 23; /* near half's range */
        if (i % 4 == 2) u &= 0x80001fffu | 0x38000000u;                            /* subnormal halves, ties */
        memcpy(&f[i], &u, 4);
    }
    const float edge[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98023224e-8f, 5.96046448e-8f,
                          INFINITY, -INFINITY, NAN, 3.3895314e38f, 1.0f + 1.0f / 256, 6.1035156e-5f};
    memcpy(f, edge, sizeof edge);
    for (int t = 0; t < 2; t++) {
        const pp_dtype h = t ? PP_BF16 : PP_F16;
        ref_cast(f, PP_F32, w16, h, M);
        for (int i = 0; i < M; i++) {
            const uint16_t got = t ? pcu_f2bf(f[i]) : pcu_f2h(f[i]);
            checks++;
            if (got != w16[i]) FAIL("f32 %a -> %s: got 0x%04x, want 0x%04x\n", f[i], t ? "bf16" : "f16", got, w16[i]);
        }
    }
    free(f);
    free(w16);
}

/* ---- elementwise ------------------------------------------------------------------------------- */

typedef struct ew_case {
    pp_op op;
    int ew, k; /* kmath op, inputs */
    unsigned types; /* bit per pp_dtype */
    const char *attr; float a0; /* one float attribute, or NULL */
    const char *attr1; float a1; /* a second one (kmath's p1), or NULL */
} ew_case;

#define B(t) (1u << (t))
#define FL (B(PP_F32) | B(PP_F64) | B(PP_F16) | B(PP_BF16))
#define IN (B(PP_I8) | B(PP_I16) | B(PP_I32) | B(PP_I64) | B(PP_U8) | B(PP_U16) | B(PP_U32) | B(PP_U64))
static const ew_case cases[] = {
    {PP_OP_RELU, PCU_EW_RELU, 1, FL, NULL, 0, NULL, 0}, {PP_OP_LEAKYRELU, PCU_EW_LEAKYRELU, 1, FL, "alpha", 0.3f, NULL, 0},
    {PP_OP_ELU, PCU_EW_ELU, 1, FL, "alpha", 0.7f, NULL, 0}, {PP_OP_SIGMOID, PCU_EW_SIGMOID, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_TANH, PCU_EW_TANH, 1, FL, NULL, 0, NULL, 0}, {PP_OP_SOFTPLUS, PCU_EW_SOFTPLUS, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_ERF, PCU_EW_ERF, 1, FL, NULL, 0, NULL, 0}, {PP_OP_GELU, PCU_EW_GELU, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_EXP, PCU_EW_EXP, 1, FL, NULL, 0, NULL, 0}, {PP_OP_HARDSWISH, PCU_EW_HARDSWISH, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_FLOOR, PCU_EW_FLOOR, 1, FL, NULL, 0, NULL, 0}, {PP_OP_RECIPROCAL, PCU_EW_RECIPROCAL, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_SILU, PCU_EW_SILU, 1, B(PP_F32), NULL, 0, NULL, 0},
    {PP_OP_ROUND, PCU_EW_ROUND, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_ASIN, PCU_EW_ASIN, 1, FL, NULL, 0, NULL, 0}, {PP_OP_ACOS, PCU_EW_ACOS, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_ATAN, PCU_EW_ATAN, 1, FL, NULL, 0, NULL, 0}, {PP_OP_SINH, PCU_EW_SINH, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_COSH, PCU_EW_COSH, 1, FL, NULL, 0, NULL, 0}, {PP_OP_ASINH, PCU_EW_ASINH, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_ACOSH, PCU_EW_ACOSH, 1, FL, NULL, 0, NULL, 0}, {PP_OP_ATANH, PCU_EW_ATANH, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_SOFTSIGN, PCU_EW_SOFTSIGN, 1, FL, NULL, 0, NULL, 0}, {PP_OP_MISH, PCU_EW_MISH, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_CELU, PCU_EW_CELU, 1, FL, "alpha", 0.6f, NULL, 0},
    {PP_OP_THRESHOLDEDRELU, PCU_EW_THRESHOLDEDRELU, 1, FL, "alpha", 0.4f, NULL, 0},
    {PP_OP_SWISH, PCU_EW_SWISH, 1, FL, "alpha", 1.7f, NULL, 0},
    {PP_OP_NEG, PCU_EW_NEG, 1, FL | B(PP_I8) | B(PP_I32) | B(PP_I64), NULL, 0, NULL, 0},
    {PP_OP_ABS, PCU_EW_ABS, 1, FL | IN, NULL, 0, NULL, 0}, {PP_OP_NOT, PCU_EW_NOT, 1, B(PP_BOOL), NULL, 0, NULL, 0},
    {PP_OP_ADD, PCU_EW_ADD, 2, FL | IN, NULL, 0, NULL, 0}, {PP_OP_SUB, PCU_EW_SUB, 2, FL | IN, NULL, 0, NULL, 0},
    {PP_OP_MUL, PCU_EW_MUL, 2, FL | IN, NULL, 0, NULL, 0}, {PP_OP_DIV, PCU_EW_DIV, 2, FL | IN, NULL, 0, NULL, 0},
    {PP_OP_POW, PCU_EW_POW, 2, FL | B(PP_I32) | B(PP_I64), NULL, 0, NULL, 0}, {PP_OP_MOD, PCU_EW_MOD, 2, IN, NULL, 0, NULL, 0},
    {PP_OP_PRELU, PCU_EW_PRELU, 2, FL, NULL, 0, NULL, 0}, {PP_OP_MIN, PCU_EW_MIN, 2, FL | IN, NULL, 0, NULL, 0},
    {PP_OP_MAX, PCU_EW_MAX, 2, FL | IN, NULL, 0, NULL, 0}, {PP_OP_EQUAL, PCU_EW_EQUAL, 2, FL | IN | B(PP_BOOL), NULL, 0, NULL, 0},
    {PP_OP_LESS, PCU_EW_LESS, 2, FL | IN, NULL, 0, NULL, 0}, {PP_OP_GREATEROREQUAL, PCU_EW_GE, 2, FL | IN, NULL, 0, NULL, 0},
    {PP_OP_AND, PCU_EW_AND, 2, B(PP_BOOL), NULL, 0, NULL, 0}, {PP_OP_XOR, PCU_EW_XOR, 2, B(PP_BOOL), NULL, 0, NULL, 0},
    {PP_OP_WHERE, PCU_EW_WHERE, 3, FL | IN | B(PP_BOOL), NULL, 0, NULL, 0},
    {PP_OP_CAST, PCU_EW_CAST, 1, B(PP_F32) | B(PP_F64) | IN | B(PP_BOOL), NULL, 0, NULL, 0},
    {PP_OP_SIN, PCU_EW_SIN, 1, B(PP_F32) | B(PP_F16) | B(PP_BF16), NULL, 0, NULL, 0},
    {PP_OP_COS, PCU_EW_COS, 1, B(PP_F32) | B(PP_F16) | B(PP_BF16), NULL, 0, NULL, 0},
    {PP_OP_TAN, PCU_EW_TAN, 1, B(PP_F32) | B(PP_F16) | B(PP_BF16), NULL, 0, NULL, 0},
    {PP_OP_SIGN, PCU_EW_SIGN, 1, FL | IN, NULL, 0, NULL, 0},
    {PP_OP_SHRINK, PCU_EW_SHRINK, 1, FL | IN, "bias", 1.5f, "lambd", 2.25f},
    {PP_OP_ISNAN, PCU_EW_ISNAN, 1, FL, NULL, 0, NULL, 0}, {PP_OP_ISINF, PCU_EW_ISINF, 1, FL, NULL, 0, NULL, 0},
    {PP_OP_BITWISENOT, PCU_EW_BITNOT, 1, IN, NULL, 0, NULL, 0}, {PP_OP_BITWISEAND, PCU_EW_BITAND, 2, IN, NULL, 0, NULL, 0},
    {PP_OP_BITWISEOR, PCU_EW_BITOR, 2, IN, NULL, 0, NULL, 0}, {PP_OP_BITWISEXOR, PCU_EW_BITXOR, 2, IN, NULL, 0, NULL, 0},
    {PP_OP_BITSHIFT, PCU_EW_SHL, 2, B(PP_U8) | B(PP_U16) | B(PP_U32) | B(PP_U64), NULL, 0, NULL, 0},
};

static void fill(void *p, pp_dtype t, int64_t n, bool small) {
    for (int64_t i = 0; i < n; i++) {
        const double v = small ? (double)(int)(unif() * 7) - 3 : (unif() - 0.5) * 8;
        switch (t) {
        case PP_F32: ((float *)p)[i] = (float)v; break;
        case PP_F64: ((double *)p)[i] = v; break;
        case PP_F16: ((uint16_t *)p)[i] = pcu_f2h((float)v); break;
        case PP_BF16: ((uint16_t *)p)[i] = pcu_f2bf((float)v); break;
        case PP_BOOL: ((uint8_t *)p)[i] = next() & 1; break;
        default: pcu_sti(p, t, i, (int64_t)(next() % 512) - 256); break;
        }
    }
}

static bool close_enough(const void *a, const void *b, pp_dtype t, int64_t i) {
    if (!pcu_is_float(t)) return !memcmp((const char *)a + i * pcu_tsize(t), (const char *)b + i * pcu_tsize(t), (size_t)pcu_tsize(t));
    const double x = pcu_ldd(a, t, i), y = pcu_ldd(b, t, i);
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
    const double tol = t == PP_F16 || t == PP_BF16 ? 1e-2 : 1e-6;
    return x == y || fabs(x - y) <= tol * fabs(y) + 1e-30;
}

static void random_shapes(int k, pp_shape *xs, pp_shape *ys) {
    pp_shape o = {.rank = 1 + (int)(next() % 5)};
    for (int d = 0; d < o.rank; d++) o.dim[d] = 1 + (int64_t)(next() % 5);
    for (int q = 0; q < k; q++) {
        xs[q].rank = q == 0 ? o.rank : o.rank - (int)(next() % (o.rank + 1));
        for (int d = 0; d < xs[q].rank; d++)
            xs[q].dim[d] = next() % 3 == 0 ? 1 : o.dim[d + o.rank - xs[q].rank];
    }
    /* the output: the broadcast of the inputs */
    *ys = o;
    for (int d = 0; d < o.rank; d++) {
        int64_t m = 1;
        for (int q = 0; q < k; q++) {
            const int j = d - (o.rank - xs[q].rank);
            if (j >= 0 && xs[q].dim[j] > m) m = xs[q].dim[j];
        }
        ys->dim[d] = m;
    }
}

static int64_t count(const pp_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->dim[d];
    return n;
}

static void test_elementwise(void) {
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const ew_case *ec = &cases[c];
        for (pp_dtype t = 1; t <= PP_BF16; t++) {
            if (!(ec->types & B(t))) continue;
            for (int trial = 0; trial < 12; trial++) {
                pp_shape xs[3], ys;
                random_shapes(ec->k, xs, &ys);
                pp_dtype xt[3] = {t, t, t}, yt = t;
                if ((ec->ew >= PCU_EW_EQUAL && ec->ew <= PCU_EW_XOR) || ec->ew == PCU_EW_ISNAN || ec->ew == PCU_EW_ISINF)
                    yt = PP_BOOL;
                if (ec->ew == PCU_EW_WHERE) xt[0] = PP_BOOL;
                pp_dtype cast_to = t;
                if (ec->ew == PCU_EW_CAST) {
                    static const pp_dtype to[] = {PP_F32, PP_F64, PP_I8, PP_I32, PP_I64, PP_U8, PP_U16, PP_BOOL, PP_F16, PP_BF16};
                    cast_to = to[next() % (t == PP_F32 ? 10 : 8)];
                    yt = cast_to;
                }
                void *x[3] = {NULL}, *want, *got;
                for (int q = 0; q < ec->k; q++) {
                    x[q] = calloc((size_t)count(&xs[q]) + 1, 8);
                    fill(x[q], xt[q], count(&xs[q]), ec->ew == PCU_EW_POW && q == 1);
                    if (ec->ew == PCU_EW_SHL) /* shift counts around the widths */
                        for (int64_t j = 0; j < count(&xs[q]); j++)
                            if (q == 1) pcu_sti(x[q], xt[q], j, (int64_t)(next() % 70));
                    if (pcu_is_float(xt[q])) /* NaN, infinities, signed zeros now and then */
                        for (int64_t j = 0; j < count(&xs[q]); j++)
                            if (next() % 8 == 0) {
                                static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e30, -3e7};
                                const double v = sp[next() % 7];
                                if (xt[q] == PP_F64) ((double *)x[q])[j] = v;
                                else pcu_stf(x[q], xt[q], j, (float)v);
                            }
                }
                int mode = 0, op = ec->ew;
                const int64_t n = count(&ys);
                want = calloc((size_t)n + 1, 8);
                got = calloc((size_t)n + 1, 8);
                pprt_tensor in[3], out = {yt, ys, want};
                for (int q = 0; q < ec->k; q++) in[q] = (pprt_tensor){xt[q], xs[q], x[q]};
                pp_attr at[4];
                int na = 0;
                if (ec->attr) at[na++] = (pp_attr){.name = ec->attr, .type = PP_ATTR_FLOAT, .f = ec->a0};
                if (ec->attr1) at[na++] = (pp_attr){.name = ec->attr1, .type = PP_ATTR_FLOAT, .f = ec->a1};
                if (ec->ew == PCU_EW_ISINF) {
                    mode = 1 + (int)(next() % 3); /* -inf, +inf or both */
                    at[na++] = (pp_attr){.name = "detect_negative", .type = PP_ATTR_INT, .i = mode & 1};
                    at[na++] = (pp_attr){.name = "detect_positive", .type = PP_ATTR_INT, .i = (mode & 2) != 0};
                }
                if (ec->ew == PCU_EW_SHL) {
                    const bool right = next() % 2;
                    at[na++] = (pp_attr){.name = "direction", .type = PP_ATTR_STRING, .s = right ? "RIGHT" : "LEFT"};
                    if (right) op = PCU_EW_SHR;
                }
                if (ec->ew == PCU_EW_CAST) at[na++] = (pp_attr){.name = "to", .type = PP_ATTR_INT, .i = cast_to};
                if (ec->ew == PCU_EW_MOD && next() % 2) at[na++] = (pp_attr){.name = "fmod", .type = PP_ATTR_INT, .i = 1};
                if (ec->ew == PCU_EW_CAST || ec->ew == PCU_EW_NOT || ec->k == 1) ys = xs[0], out.shape = xs[0];
                pp_err e = {0};
                pprt_scratch sc = {0};
                if (pprt_ref_kernels[ec->op]((pp_attrs){at, na, 21}, in, ec->k, &out, 1, &sc, &e) != PP_OK) {
                    FAIL("%s %s: reference: %s\n", pp_op_table[ec->op].name, pp_dtype_name(t), e.msg);
                } else {
                    pcu_ew k;
                    const pp_shape *sp[3] = {&xs[0], &xs[1], &xs[2]};
                    if (op == PCU_EW_MOD && na && at[na - 1].i == 1) op = PCU_EW_FMOD;
                    const int64_t m = pcu_ew_make(op, ec->k, sp, &out.shape, xt[ec->k == 3 ? 1 : 0], yt, ec->a0, ec->a1, mode, &k);
                    for (int64_t i = 0; i < m; i++) pcu_ew_at(&k, got, x[0], x[1], x[2], i);
                    for (int64_t i = 0; i < m; i++) {
                        checks++;
                        if (!close_enough(got, want, yt, i)) {
                            FAIL("%s %s -> %s element %lld of %lld: got %g, want %g\n", pp_op_table[ec->op].name,
                                 pp_dtype_name(t), pp_dtype_name(yt), (long long)i, (long long)m,
                                 pcu_is_float(yt) ? pcu_ldd(got, yt, i) : (double)pcu_ldi(got, yt, i),
                                 pcu_is_float(yt) ? pcu_ldd(want, yt, i) : (double)pcu_ldi(want, yt, i));
                            break;
                        }
                    }
                }
                pprt_scratch_free(&sc);
                for (int q = 0; q < 3; q++) free(x[q]);
                free(want);
                free(got);
            }
        }
    }
}

/* EWV (16 bytes a thread: four f32, eight f16 or bf16) against EW over the
 * same operands: every op pcu_ewv_op takes, shapes [A, B, W C] (W the
 * width) with each input whole, broadcast over its leading dims or a scalar
 * per row ([A, B, 1]: the planner's merge gives it stride 0 on the last
 * dim), NaN, infinities, signed zeros and (for the half types) values that
 * round to infinity or to subnormals among the values, the threads in
 * reverse order, and the first input as the output (in place) now and
 * then: the same bytes. */
static void test_elementwise_wide(void) {
    int cases = 0, halves = 0;
    static const int types[3] = {PCU_T_F32, PCU_T_F16, PCU_T_BF16};
    for (int op = 0; op < PCU_EW_COUNT; op++)
        for (int nin = 1; nin <= 2; nin++) {
            if (!pcu_ewv_op(op, nin)) continue;
            for (int trial = 0; trial < 9; trial++) {
                const int t = types[trial % 3], es = (int)pcu_tsize(t), W = 16 / es;
                const int64_t A = 1 + (int64_t)(next() % 3), B = 1 + (int64_t)(next() % 5), C = W * (1 + (int64_t)(next() % 9));
                const pp_shape ys = {3, {A, B, C}};
                pp_shape xs[2];
                for (int q = 0; q < nin; q++) {
                    const int form = (int)(next() % 3);
                    xs[q] = form == 0 ? ys : form == 1 ? (pp_shape){2, {B, C}} : (pp_shape){3, {A, B, 1}};
                }
                const float p0 = (float)(0.1 + 1.9 * unif()), p1 = (float)(0.1 + 1.9 * unif());
                pcu_ew k;
                const pp_shape *sp[2] = {&xs[0], &xs[1]};
                const int64_t n = pcu_ew_make(op, nin, sp, &ys, t, t, p0, p1, 0, &k);
                const int last = k.rank - 1;
                bool ok = last >= 0 && k.dim[last] % W == 0;
                for (int q = 0; q < nin && ok; q++) ok = k.st[q][last] == 0 || k.st[q][last] == 1;
                if (!ok) continue;
                unsigned char *x[2] = {NULL, NULL}, *want = calloc((size_t)n, (size_t)es), *got = calloc((size_t)n, (size_t)es);
                for (int q = 0; q < nin; q++) {
                    const int64_t m = count(&xs[q]);
                    x[q] = calloc((size_t)(q == 0 ? n : m), (size_t)es);
                    for (int64_t j = 0; j < m; j++) {
                        static const float sp4[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -3e7f, 7e4f, 3e-6f};
                        pcu_stf(x[q], t, j, next() % 8 == 0 ? sp4[next() % 9] : (float)(4 * unif() - 2));
                    }
                }
                for (int64_t i = 0; i < n; i++) pcu_ew_at(&k, want, x[0], x[1], NULL, i);
                const bool inplace = nin == 2 && xs[0].rank == 3 && xs[0].dim[2] == C && next() % 2;
                unsigned char *y = got;
                if (inplace) {
                    memcpy(got, x[0], (size_t)n * (size_t)es);
                    y = x[0];
                }
                for (int64_t i = n / W - 1; i >= 0; i--) pcu_kernel_call(PCU_K_EWV, &k, (void *[PCU_KERNEL_OPS]){x[0], nin > 1 ? (void *)x[1] : y, y}, NULL, i, 0);
                checks++, cases++, halves += t != PCU_T_F32;
                if (memcmp(y, want, (size_t)n * (size_t)es))
                    FAIL("FAIL wide elementwise: op %d, %d inputs, type %d, [%lld, %lld, %lld]%s: not EW's bytes\n", op,
                         nin, t, (long long)A, (long long)B, (long long)C, inplace ? ", in place" : "");
                free(x[0]), free(x[1]), free(want), free(got);
            }
        }
    printf("test_kmath: wide elementwise: %d cases against EW (%d of them f16 or bf16)\n", cases, halves);
}

/* The optimizer kernel's row (kernels.def OPT) over a flat buffer, threads
 * in reverse order, against PyTorch's update written out here in float for
 * plain SGD, SGD with momentum (first step and later, Nesterov or not, with
 * weight decay) and AdamW: the same bytes. The arithmetic itself is
 * checked against PyTorch by tests/train (the trained weights' trajectories). */
static void test_optimizer(void) {
    enum { N = 257 };
    int cases = 0;
    for (int c = 0; c < 6; c++) {
        float w[N], g[N], m[N], v[N], w2[N], m2[N], v2[N];
        for (int i = 0; i < N; i++)
            w[i] = (float)(unif() - 0.5), g[i] = (float)(unif() - 0.5) * 1e-2f, m[i] = (float)(unif() - 0.5) * 1e-2f,
            v[i] = (float)unif() * 1e-4f;
        memcpy(w2, w, sizeof w), memcpy(m2, m, sizeof m), memcpy(v2, v, sizeof v);
        pcu_opt k = {.adamw = c == 5, .nesterov = c == 4, .has_m = c >= 3, .n = N, .lr = 0.05f,
                     .wd = c == 1 || c >= 3 ? 1e-2f : 0.0f, .mu = c >= 2 ? 0.9f : 0.0f};
        if (k.adamw) {
            const double lr = 1e-3, b1 = 0.9, b2 = 0.999, step = 3;
            k.decay = (float)(1.0 - lr * 0.01), k.b1 = (float)b1, k.c1 = (float)(1.0 - b1), k.b2 = (float)b2,
            k.c2 = (float)(1.0 - b2), k.neg_step = (float)(-(lr / (1.0 - pow(b1, step)))),
            k.bc2s = (float)sqrt(1.0 - pow(b2, step)), k.eps = 1e-8f;
        }
        for (int64_t i = N - 1; i >= 0; i--)
            pcu_kernel_call(PCU_K_OPT, &k, (void *[PCU_KERNEL_OPS]){w, g, k.mu != 0 || k.adamw ? m : NULL, k.adamw ? v : NULL}, NULL, i, 0);
        for (int i = 0; i < N; i++) { /* PyTorch's, as torch.optim writes it, in float */
            if (!k.adamw) {
                float d = g[i] + k.wd * w2[i];
                if (k.mu != 0) {
                    m2[i] = k.has_m ? k.mu * m2[i] + d : d;
                    d = k.nesterov ? d + k.mu * m2[i] : m2[i];
                }
                w2[i] = w2[i] - k.lr * d;
            } else {
                w2[i] = w2[i] * k.decay;
                m2[i] = m2[i] * k.b1 + k.c1 * g[i];
                v2[i] = v2[i] * k.b2 + k.c2 * g[i] * g[i];
                w2[i] = w2[i] + k.neg_step * m2[i] / (sqrtf(v2[i]) / k.bc2s + k.eps);
            }
        }
        checks++, cases++;
        if (memcmp(w, w2, sizeof w) || ((k.mu != 0 || k.adamw) && memcmp(m, m2, sizeof m)) || (k.adamw && memcmp(v, v2, sizeof v)))
            FAIL("FAIL optimizer step, case %d (%s): not PyTorch's float arithmetic\n", c, k.adamw ? "AdamW" : "SGD");
    }
    printf("test_kmath: optimizer step: %d cases\n", cases);
}

/* The device optimizer's gradient passes (kernels.def OPTG) over two
 * weights' gradients in a flat buffer (the second from a chunk's start, +0
 * in the gaps), threads in reverse order, against the host trainer's loops
 * written out here (train.c: the fold's copy of the first micro-batch and
 * float additions of the next, from the gradients' places in a stage's
 * message; the mean and the unscale as float products; each weight's sum of
 * squares in double over chunks of PCU_OPTG_CHUNK in order, then the chunks'
 * sums in order): the same bits, Inf and NaN included, the gaps left +0. */
static void test_optimizer_passes(void) {
    enum { A = PCU_OPTG_CHUNK + 123, B = 2 * PCU_OPTG_CHUNK + 7, XA = 16, XB = A + 48, X = XB + B + 5 };
    const int64_t boff = 2 * PCU_OPTG_CHUNK, T = boff + 3 * PCU_OPTG_CHUNK, C = T / PCU_OPTG_CHUNK;
    float *g = calloc((size_t)T, 4), *h = calloc((size_t)T, 4), *x[2] = {calloc(X, 4), calloc(X, 4)};
    double *part = calloc((size_t)C, 8), sq[2], want[2];
    int64_t tab[8 + 5] = {0, XA, A, 2, boff, XB, B, 3, 0, 0, 1, 1, 1};
    int cases = 0;
    for (int c = 0; c < 3 && g && h && x[0] && x[1] && part; c++) {
        for (int i = 0; i < T; i++) g[i] = (float)(unif() - 0.5); /* the first fold overwrites all but the gaps */
        for (int q = 0; q < 2; q++)
            for (int i = 0; i < X; i++) x[q][i] = (float)(unif() - 0.5) * 3;
        if (c == 1) x[1][XA + 17] = INFINITY;
        if (c == 2) x[0][XB + 5] = NAN;
        for (int64_t i = 0; i < T; i++) h[i] = i < A ? x[0][XA + i] + x[1][XA + i]
                                         : i >= boff && i < boff + B ? x[0][XB + i - boff] + x[1][XB + i - boff] : g[i];
        for (int q = 0; q < 2; q++) {
            const pcu_optg k = {.mode = PCU_OPTG_FOLD, .has_a = q == 0, .n = T, .np = 2, .chunks = C};
            for (int64_t i = T - 1; i >= 0; i--)
                pcu_kernel_call(PCU_K_OPTG, &k, (void *[PCU_KERNEL_OPS]){g, x[q], NULL, tab}, NULL, i, 0);
        }
        for (int64_t i = 0; i < T; i++) /* the gaps: +0, as the device's buffers start */
            if ((i >= A && i < boff) || i >= boff + B) g[i] = h[i] = 0.0f;
        const float inv = 1.0f / 3, un = 1.0f / 1024;
        for (int64_t i = 0; i < T; i++) h[i] = (h[i] * inv) * un;
        pcu_optg k = {.mode = PCU_OPTG_SCALE, .has_a = 1, .has_b = 1, .a = inv, .b = un, .n = T};
        for (int64_t i = T - 1; i >= 0; i--) pcu_kernel_call(PCU_K_OPTG, &k, (void *[PCU_KERNEL_OPS]){g}, NULL, i, 0);
        k = (pcu_optg){.mode = PCU_OPTG_SQ, .n = C};
        for (int64_t i = C - 1; i >= 0; i--)
            pcu_kernel_call(PCU_K_OPTG, &k, (void *[PCU_KERNEL_OPS]){g, NULL, part}, NULL, i, 0);
        k = (pcu_optg){.mode = PCU_OPTG_SUM, .n = 2, .np = 2, .chunks = C};
        for (int64_t i = 1; i >= 0; i--)
            pcu_kernel_call(PCU_K_OPTG, &k, (void *[PCU_KERNEL_OPS]){g, NULL, part, tab, sq}, NULL, i, 0);
        for (int w = 0; w < 2; w++) { /* the host's order: chunks of the weight's own elements */
            const int64_t o = w ? boff : 0, n = w ? B : A;
            want[w] = 0;
            for (int64_t c0 = 0; c0 < n; c0 += PCU_OPTG_CHUNK) {
                double s = 0;
                for (int64_t e = c0; e < n && e < c0 + PCU_OPTG_CHUNK; e++) s += (double)h[o + e] * h[o + e];
                want[w] += s;
            }
        }
        checks++, cases++;
        if (memcmp(g, h, (size_t)T * 4) || memcmp(sq, want, sizeof sq))
            FAIL("FAIL optimizer passes, case %d: %.17g %.17g, want %.17g %.17g\n", c, sq[0], sq[1], want[0], want[1]);
    }
    free(g), free(h), free(x[0]), free(x[1]), free(part);
    printf("test_kmath: optimizer gradient passes: %d cases\n", cases);
}

/* Sin, Cos, Tan (pcu_trig: scalar argument reduction, double polynomials)
 * against glibc's double sin, cos and tan of the same float, over random
 * bit patterns of every exponent (most of them huge: the Payne-Hanek path)
 * and the floats nearest to multiples of pi/2, where cancellation is worst:
 * relative error under 1e-12 (the result is rounded to float after). */
static void test_trig(void) {
    enum { M = 1 << 20 };
    double worst = 0;
    for (int i = 0; i < M; i++) {
        pcu_fbits b;
        b.u = (uint32_t)next();
        if (i % 3 == 0) b.f = (float)((unif() - 0.5) * 100);
        if (i % 3 == 1) b.f = nextafterf((float)((double)(int64_t)(next() % 20000000) * 1.57079632679489661923),
                                         i & 4 ? INFINITY : -INFINITY) ;
        if (isnan(b.f) || isinf(b.f)) continue;
        for (int op = PCU_EW_SIN; op <= PCU_EW_TAN; op++) {
            const double got = pcu_trig(op, b.f), x = b.f;
            const double want = op == PCU_EW_SIN ? sin(x) : op == PCU_EW_COS ? cos(x) : tan(x);
            const double err = fabs(got - want) / (fabs(want) + 1e-300);
            if (err > worst) worst = err;
            checks++;
            if (!(err < 1e-12) && !(got == want))
                FAIL("%s(%a): got %.17g, want %.17g\n", op == PCU_EW_SIN ? "sin" : op == PCU_EW_COS ? "cos" : "tan",
                     b.f, got, want);
        }
    }
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 5; k++) {
        checks++;
        const double s0 = pcu_trig(PCU_EW_SIN, sp[k]), c0 = pcu_trig(PCU_EW_COS, sp[k]);
        if (k < 2 ? (s0 != 0 || !signbit(s0) != !signbit(sp[k]) || c0 != 1) : !(isnan(s0) && isnan(c0)))
            FAIL("sin/cos(%g): got %g, %g\n", sp[k], s0, c0);
    }
    printf("test_kmath: sin/cos/tan worst relative error against glibc (double): %.2e\n", worst);
}

/* ---- index arithmetic ------------------------------------------------------------------------ */

/* pcu_div/pcu_mod/pcu_divmod (32-bit where both fit) against C's 64-bit / and %. */
static void test_index_math(void) {
    for (int i = 0; i < 1 << 20; i++) {
        const int sh = (int)(next() % 4);
        const int64_t a = (int64_t)(next() >> (sh == 0 ? 1 : sh == 1 ? 24 : sh == 2 ? 32 : 40));
        int64_t b = (int64_t)(next() >> (i % 3 == 0 ? 30 : i % 3 == 1 ? 50 : 62));
        if (b == 0) b = 1;
        int64_t r = a;
        const int64_t c = pcu_divmod(&r, b);
        checks++;
        if (pcu_div(a, b) != a / b || pcu_mod(a, b) != a % b || c != a % b || r != a / b)
            FAIL("index math: %lld, %lld\n", (long long)a, (long long)b);
    }
}

/* ---- row kernels in lanes ------------------------------------------------------------------ */

static int64_t ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    if (a == b) return 0;
    pcu_fbits x = {.f = a}, y = {.f = b};
    const int64_t ia = x.u & 0x80000000u ? -(int64_t)(x.u & 0x7fffffffu) : (int64_t)x.u;
    const int64_t ib = y.u & 0x80000000u ? -(int64_t)(y.u & 0x7fffffffu) : (int64_t)y.u;
    return ia > ib ? ia - ib : ib - ia;
}

/* rows x n floats: normal values, and per row kind (r % 7): a NaN, +inf,
 * all -inf, values near FLT_MAX, tiny values, a constant row, plain. */
static void fill_rows(float *x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            float v = (float)((unif() - 0.5) * 8);
            switch (r % 7) {
            case 0: if (j == n / 3) v = NAN; break;
            case 1: if (j == n - 1) v = INFINITY; break;
            case 2: v = -INFINITY; break;
            case 3: v *= 3e37f; break;
            case 4: v *= 1e-30f; break;
            case 5: v = 1.5f; break;
            default: break;
            }
            x[r * n + j] = v;
        }
}

static void compare_rows(const char *what, const float *a, const float *b, int64_t count) {
    int64_t worst = 0;
    for (int64_t i = 0; i < count; i++) {
        const int64_t u = ulps(a[i], b[i]);
        checks++;
        if (u > worst) worst = u;
        if (u > 2) {
            FAIL("%s: element %lld: lanes %.9g, one thread %.9g\n", what, (long long)i, a[i], b[i]);
            return;
        }
    }
}

static void test_rows(void) {
    static const int64_t shapes[][2] = {{14, 64}, {7, 65}, {21, 197}, {7, 768}, {3, 1000}, {14, 4096}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const int64_t rows = shapes[c][0], n = shapes[c][1], L = 32;
        float *x = malloc(sizeof(float) * (size_t)(rows * n)), *y1 = malloc(sizeof(float) * (size_t)(rows * n)),
              *y2 = malloc(sizeof(float) * (size_t)(rows * n)), *sc = malloc(sizeof(float) * (size_t)n),
              *bi = malloc(sizeof(float) * (size_t)n), *m1 = malloc(sizeof(float) * (size_t)rows),
              *m2 = malloc(sizeof(float) * (size_t)rows), *v1 = malloc(sizeof(float) * (size_t)rows),
              *v2 = malloc(sizeof(float) * (size_t)rows);
        double *part = malloc(sizeof(double) * (size_t)(2 * rows * L));
        fill_rows(x, rows, n);
        for (int64_t j = 0; j < n; j++) sc[j] = (float)(unif() + 0.5), bi[j] = (float)(unif() - 0.5);
        for (int log = 0; log < 2; log++) {
            pcu_softmax k = {.log = log, .outer = rows, .n = n, .inner = 1};
            for (int64_t r = 0; r < rows; r++) pcu_softmax_at(&k, y1, x, NULL, r);
            k.lanes = (int32_t)L;
            for (k.phase = 0; k.phase < 3; k.phase++)
                for (int64_t i = rows * L - 1; i >= 0; i--) pcu_softmax_at(&k, y2, x, part, i);
            char what[64];
            snprintf(what, sizeof what, "%s %lldx%lld", log ? "LogSoftmax" : "Softmax", (long long)rows, (long long)n);
            compare_rows(what, y2, y1, rows * n);
        }
        /* LayerNorm (scale, bias), GroupNorm of 2 groups per 4 channels (cdiv), RMS */
        for (int kind = 0; kind < 3; kind++) {
            pcu_norm k = {.has_bias = kind != 2, .rms = kind == 2, .rows = rows, .n = n, .eps = 1e-5};
            if (kind == 1 && n % 2 == 0) k.groups = 2, k.cpg = 2, k.cdiv = n / 2;
            else if (kind == 1) continue;
            memset(m1, 0, sizeof(float) * (size_t)rows), memset(m2, 0, sizeof(float) * (size_t)rows);
            for (int64_t r = 0; r < rows; r++) pcu_norm_at(&k, y1, x, sc, bi, m1, v1, NULL, r);
            k.lanes = (int32_t)L;
            for (k.phase = 0; k.phase < (k.rms ? 2 : 3); k.phase++)
                for (int64_t i = rows * L - 1; i >= 0; i--) pcu_norm_at(&k, y2, x, sc, bi, m2, v2, part, i);
            char what[64];
            snprintf(what, sizeof what, "%s %lldx%lld", kind == 0 ? "LayerNorm" : kind == 1 ? "GroupNorm" : "RMSNorm",
                     (long long)rows, (long long)n);
            compare_rows(what, y2, y1, rows * n);
            if (!k.rms) {
                compare_rows("mean", m2, m1, rows);
                compare_rows("inv_std_dev", v2, v1, rows);
            }
        }
        free(x), free(y1), free(y2), free(sc), free(bi), free(m1), free(m2), free(v1), free(v2), free(part);
    }
}

/* ---- the row kernels on a half plan's types --------------------------------------------------- */

static void run_block_rows(const pcu_step *s, void *const *op);

/* n floats rounded to type t (f16 / bf16) into h, and back into f */
static void to_half(const float *x, int t, uint16_t *h, float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        h[i] = t == PCU_T_F16 ? pcu_f2h(x[i]) : pcu_f2bf(x[i]);
        f[i] = pcu_ldf(h, t, i);
    }
}

/* a kernel's half output against its f32 output over the same (half) values, rounded: bit for bit */
static void compare_half(const char *what, const uint16_t *got, const float *want, int t, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        checks++;
        const uint16_t w = t == PCU_T_F16 ? pcu_f2h(want[i]) : pcu_f2bf(want[i]);
        if (got[i] != w && !(isnan(want[i]) && isnan(pcu_ldf(got, t, i)))) {
            FAIL("%s: element %lld: 0x%04x, the f32 kernel's value rounded 0x%04x\n", what, (long long)i, got[i], w);
            return;
        }
    }
}

/* test_half_rows' inference ops of a half plan beyond the rows (passes/precision.c's half_slots, since
 * 2026-12-06): BatchNormalization over [1, rows, n] (a channel a row; scale, bias and the statistics f32),
 * InstanceNormalization over the same, ReduceMax, ReduceL2 and ArgMax of every row, and Resize of each row to twice its length (linear, cubic and nearest,
 * [1, rows, 1, n] -> [1, rows, 1, 2n], through pcu_resize_block as plan_resize makes it): the f32 kernels'
 * values over xf (x rounded to type t, xh its half bits) rounded, ArgMax's indices the f32 kernel's. */
static void half_more(int t, const char *tn, int64_t rows, int64_t n, const float *xf, const uint16_t *xh) {
    const int64_t rn = rows * n;
    float *yf = malloc(sizeof(float) * (size_t)(2 * rn)), *bnp = malloc(sizeof(float) * (size_t)(4 * rows));
    uint16_t *yh = malloc(2 * (size_t)(2 * rn));
    int64_t *af = malloc(sizeof(int64_t) * (size_t)rows), *ah = malloc(sizeof(int64_t) * (size_t)rows);
    char what[96];
    for (int64_t r = 0; r < rows; r++)
        bnp[r] = (float)(unif() + 0.5), bnp[rows + r] = (float)(unif() - 0.5), bnp[2 * rows + r] = (float)(unif() - 0.5),
        bnp[3 * rows + r] = (float)(unif() + 0.01);
    pcu_bn bk = {.n = rn, .c = rows, .s = n, .eps = 1e-5};
    for (int64_t i = 0; i < rn; i++) pcu_bn_at(&bk, yf, xf, bnp, bnp + rows, bnp + 2 * rows, bnp + 3 * rows, i);
    bk.t = t;
    for (int64_t i = rn - 1; i >= 0; i--) pcu_bn_at(&bk, yh, xh, bnp, bnp + rows, bnp + 2 * rows, bnp + 3 * rows, i);
    snprintf(what, sizeof what, "%s BatchNormalization %lldx%lld", tn, (long long)rows, (long long)n);
    compare_half(what, yh, yf, t, rn);
    /* InstanceNormalization (GroupNormalization's per-channel form) over the same [1, rows, n]: scale and bias
     * per channel, of type t (rounded), as ppcc --precision stores them */
    uint16_t *sbh = malloc(2 * (size_t)(2 * rows));
    float *sbf = malloc(sizeof(float) * (size_t)(2 * rows));
    to_half(bnp, t, sbh, sbf, 2 * rows);
    pcu_norm nk = {.has_bias = 1, .rows = rows, .n = n, .groups = (int32_t)rows, .cpg = 1, .cdiv = n, .eps = 1e-5};
    for (int64_t i = 0; i < rows; i++) pcu_norm_at(&nk, yf, xf, sbf, sbf + rows, NULL, NULL, NULL, i);
    nk.t = t;
    for (int64_t i = rows - 1; i >= 0; i--) pcu_norm_at(&nk, yh, xh, sbh, sbh + rows, NULL, NULL, NULL, i);
    snprintf(what, sizeof what, "%s InstanceNormalization %lldx%lld", tn, (long long)rows, (long long)n);
    compare_half(what, yh, yf, t, rn);
    free(sbh), free(sbf);
    static const struct { int op; const char *name; } reds[] = {{PCU_RED_MAX, "ReduceMax"}, {PCU_RED_L2, "ReduceL2"},
                                                               {PCU_RED_ARGMAX, "ArgMax"}};
    for (size_t q = 0; q < sizeof reds / sizeof *reds; q++) { /* each row reduced: f32 over xf, then type t */
        const bool arg = reds[q].op == PCU_RED_ARGMAX;
        pcu_red rk = {.op = reds[q].op, .nk = 1, .nr = 1, .n_out = rows, .n_red = n, .kd = {rows}, .ks = {n},
                      .rd = {n}, .rs = {1}};
        for (int64_t i = 0; i < rows; i++) pcu_red_at(&rk, arg ? (void *)af : yf, xf, i);
        rk.t = t;
        for (int64_t i = rows - 1; i >= 0; i--) pcu_red_at(&rk, arg ? (void *)ah : yh, xh, i);
        snprintf(what, sizeof what, "%s %s", tn, reds[q].name);
        checks += arg;
        if (!arg) compare_half(what, yh, yf, t, rows);
        else if (memcmp(af, ah, sizeof *af * (size_t)rows)) FAIL("%s: not the f32 kernel's indices\n", what);
    }
    static const char *const modes[] = {"linear", "cubic", "nearest"};
    for (int m = 0; m < 3; m++) {
        pp_attr at[2] = {{.name = "mode", .type = PP_ATTR_STRING, .s = modes[m]},
                         {.name = "coordinate_transformation_mode", .type = PP_ATTR_STRING, .s = "half_pixel"}};
        const pp_attrs a = {at, 2, 19};
        const pp_shape xs = {4, {1, rows, 1, n}}, ys = {4, {1, rows, 1, 2 * n}}, none = {1, {0}}, vec = {1, {4}};
        float sc[4] = {1, 1, 1, 2};
        pp_tinfo tin[4] = {{PP_F32, xs, NULL}, {PP_F32, none, NULL}, {PP_F32, vec, sc}, {PP_I64, none, NULL}};
        pcu_resize zk;
        checks++;
        if (!pcu_resize_block(a, tin, 3, &xs, &ys, &zk) || zk.a != 3) {
            FAIL("%s Resize %s: no parameter block\n", tn, modes[m]);
            continue;
        }
        zk.sum_a = 1;
        for (int64_t i = 0; i < 2 * rn; i++) pcu_resize_at(&zk, yf, xf, i);
        zk.t = t;
        for (int64_t i = 2 * rn - 1; i >= 0; i--) pcu_resize_at(&zk, yh, xh, i);
        snprintf(what, sizeof what, "%s Resize (%s) %lldx%lld", tn, modes[m], (long long)rows, (long long)n);
        compare_half(what, yh, yf, t, 2 * rn);
    }
    free(yf), free(bnp), free(yh), free(af), free(ah);
}

/* Softmax, LogSoftmax, LayerNorm and RMSNorm (one thread a row, lanes, one
 * block a row with the residual Add taken in), the convolution epilogue,
 * MaxPool, AveragePool and GlobalAveragePool's mean reading and writing float16 and bfloat16 (a half plan, ppcc --precision):
 * each the f32 kernel's values over the same half values, rounded to nearest
 * even, bit for bit (f32 inside; the statistics' outputs f32, the same bits). */
static void test_half_rows(void) {
    static const int64_t shapes[][2] = {{7, 65}, {14, 197}, {3, 768}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
        for (int t = PCU_T_F16; t != 0; t = t == PCU_T_F16 ? PCU_T_BF16 : 0) {
            const int64_t rows = shapes[c][0], n = shapes[c][1], rn = rows * n, L = 32;
            float *x = malloc(sizeof(float) * (size_t)rn), *xf = malloc(sizeof(float) * (size_t)rn),
                  *x2f = malloc(sizeof(float) * (size_t)rn), *yf = malloc(sizeof(float) * (size_t)rn),
                  *scf = malloc(sizeof(float) * (size_t)n), *bif = malloc(sizeof(float) * (size_t)n),
                  *m1 = malloc(sizeof(float) * (size_t)rows), *v1 = malloc(sizeof(float) * (size_t)rows),
                  *m2 = malloc(sizeof(float) * (size_t)rows), *v2 = malloc(sizeof(float) * (size_t)rows);
            uint16_t *xh = malloc(2 * (size_t)rn), *x2h = malloc(2 * (size_t)rn), *yh = malloc(2 * (size_t)rn),
                     *sch = malloc(2 * (size_t)n), *bih = malloc(2 * (size_t)n), *sumh = malloc(2 * (size_t)rn);
            double *part = malloc(sizeof(double) * (size_t)(2 * rows * L));
            fill_rows(x, rows, n);
            to_half(x, t, xh, xf, rn);
            for (int64_t j = 0; j < n; j++) x[j] = (float)(unif() + 0.5), x[n + j] = (float)(unif() - 0.5);
            to_half(x, t, sch, scf, n), to_half(x + n, t, bih, bif, n);
            for (int64_t i = 0; i < rn; i++) x[i] = (float)(unif() - 0.5);
            to_half(x, t, x2h, x2f, rn);
            char what[96];
            const char *tn = t == PCU_T_F16 ? "f16" : "bf16";
            for (int form = 0; form < 4; form++) { /* Softmax, LogSoftmax: one thread a row, lanes */
                pcu_softmax k = {.log = form & 1, .outer = rows, .n = n, .inner = 1};
                for (int64_t r = 0; r < rows; r++) pcu_softmax_at(&k, yf, xf, NULL, r);
                k.t = t;
                if (form < 2) {
                    for (int64_t r = 0; r < rows; r++) pcu_softmax_at(&k, yh, xh, NULL, r);
                } else {
                    k.lanes = (int32_t)L;
                    for (k.phase = 0; k.phase < 3; k.phase++)
                        for (int64_t i = rows * L - 1; i >= 0; i--) pcu_softmax_at(&k, yh, xh, part, i);
                    /* the lanes' f32 form is the reference for the lanes' half form */
                    pcu_softmax kf = k;
                    kf.t = 0;
                    for (kf.phase = 0; kf.phase < 3; kf.phase++)
                        for (int64_t i = rows * L - 1; i >= 0; i--) pcu_softmax_at(&kf, yf, xf, part, i);
                }
                snprintf(what, sizeof what, "%s %s %s %lldx%lld", tn, form & 1 ? "LogSoftmax" : "Softmax",
                         form < 2 ? "a thread a row" : "in lanes", (long long)rows, (long long)n);
                compare_half(what, yh, yf, t, rn);
            }
            for (int form = 0; form < 4; form++) { /* LayerNorm, RMSNorm: one thread a row, lanes */
                pcu_norm k = {.has_bias = !(form & 1), .rms = form & 1, .rows = rows, .n = n, .eps = 1e-5};
                if (form >= 2) k.lanes = (int32_t)L;
                for (k.phase = 0; k.phase < (k.lanes ? (k.rms ? 2 : 3) : 1); k.phase++)
                    for (int64_t i = rows * (k.lanes ? L : 1) - 1; i >= 0; i--)
                        pcu_norm_at(&k, yf, xf, scf, bif, m1, v1, part, i);
                k.t = t;
                for (k.phase = 0; k.phase < (k.lanes ? (k.rms ? 2 : 3) : 1); k.phase++)
                    for (int64_t i = rows * (k.lanes ? L : 1) - 1; i >= 0; i--)
                        pcu_norm_at(&k, yh, xh, sch, bih, m2, v2, part, i);
                snprintf(what, sizeof what, "%s %s %s %lldx%lld", tn, form & 1 ? "RMSNorm" : "LayerNorm",
                         form < 2 ? "a thread a row" : "in lanes", (long long)rows, (long long)n);
                compare_half(what, yh, yf, t, rn);
                if (!k.rms) compare_rows("its mean (f32)", m2, m1, rows), compare_rows("its inv_std_dev (f32)", v2, v1, rows);
            }
            /* one block a row: Softmax; LayerNorm with the residual Add taken in (the Add's sum rounded as its own
             * kernel stores it), the sum written */
            pcu_step s;
            memset(&s, 0, sizeof s);
            s.kind = PCU_S_KERNEL, s.kernel = PCU_K_ROWSM, s.threads = rows * PCU_BLOCK;
            s.u.rsm = (pcu_rowsm){.rows = rows, .n = n};
            void *opf[PCU_KERNEL_OPS] = {xf, yf};
            run_block_rows(&s, opf);
            s.u.rsm.t = t;
            void *oph[PCU_KERNEL_OPS] = {xh, yh};
            run_block_rows(&s, oph);
            snprintf(what, sizeof what, "%s Softmax in one block %lldx%lld", tn, (long long)rows, (long long)n);
            compare_half(what, yh, yf, t, rn);
            float *sumf = malloc(sizeof(float) * (size_t)rn);
            for (int64_t i = 0; i < rn; i++) sumf[i] = pcu_binary_f(PCU_EW_ADD, xf[i], x2f[i]);
            to_half(sumf, t, sumh, sumf, rn); /* the half Add's output, as its own kernel stores it */
            memset(&s, 0, sizeof s);
            s.kind = PCU_S_KERNEL, s.kernel = PCU_K_ROWLN, s.threads = rows * PCU_BLOCK;
            s.u.rln = (pcu_rowln){.has_bias = 1, .rows = rows, .n = n, .eps = 1e-5};
            void *opl[PCU_KERNEL_OPS] = {sumf, scf, bif, yf, m1, v1};
            run_block_rows(&s, opl);
            s.u.rln.t = t;
            void *oplh[PCU_KERNEL_OPS] = {xh, sch, bih, yh, m2, v2, x2h, sumh};
            run_block_rows(&s, oplh);
            snprintf(what, sizeof what, "%s Add and LayerNorm in one block %lldx%lld", tn, (long long)rows, (long long)n);
            compare_half(what, yh, yf, t, rn);
            compare_half("its sum", sumh, sumf, t, rn);
            compare_rows("its mean (f32)", m2, m1, rows);
            /* the convolution epilogue: y (the convolution's half output) + bias[c] + residual, Relu */
            pcu_epi e = {.act = 1, .has_bias = 1, .has_res = 1, .n = rn, .c = n, .s = 1};
            for (int64_t i = 0; i < rn; i++) yf[i] = xf[i];
            memcpy(yh, xh, 2 * (size_t)rn);
            for (int64_t i = 0; i < rn; i++) pcu_epi_at(&e, yf, bif, x2f, i);
            e.t = t;
            for (int64_t i = 0; i < rn; i++) pcu_epi_at(&e, yh, bih, x2h, i);
            snprintf(what, sizeof what, "%s convolution epilogue", tn);
            compare_half(what, yh, yf, t, rn);
            /* MaxPool 3x3 stride 2 pad 1 over rows x n as [1, rows, 1, n] (1-D windows along n), and the
             * mean of every row (GlobalAveragePool's reduction) */
            pcu_pool pk = {.max = 1, .nc = rows, .in = {1, 1, n}, .k = {1, 1, 3}, .s = {1, 1, 2}, .d = {1, 1, 1},
                           .p = {0, 0, 1}, .p1 = {0, 0, 1}, .out = {1, 1, (n + 2 - 3) / 2 + 1}};
            pk.n = rows * pk.out[2];
            for (int64_t i = 0; i < pk.n; i++) pcu_pool_at(&pk, yf, xf, i);
            pk.t = t;
            for (int64_t i = 0; i < pk.n; i++) pcu_pool_at(&pk, yh, xh, i);
            snprintf(what, sizeof what, "%s MaxPool", tn);
            compare_half(what, yh, yf, t, pk.n);
            pk.max = 0, pk.t = 0; /* AveragePool, the pads not counted */
            for (int64_t i = 0; i < pk.n; i++) pcu_pool_at(&pk, yf, xf, i);
            pk.t = t;
            for (int64_t i = 0; i < pk.n; i++) pcu_pool_at(&pk, yh, xh, i);
            snprintf(what, sizeof what, "%s AveragePool", tn);
            compare_half(what, yh, yf, t, pk.n);
            pcu_red rk = {.op = PCU_RED_MEAN, .nk = 1, .nr = 1, .n_out = rows, .n_red = n, .kd = {rows}, .ks = {n},
                          .rd = {n}, .rs = {1}};
            for (int64_t i = 0; i < rows; i++) pcu_red_at(&rk, yf, xf, i);
            rk.t = t;
            for (int64_t i = 0; i < rows; i++) pcu_red_at(&rk, yh, xh, i);
            snprintf(what, sizeof what, "%s GlobalAveragePool's mean", tn);
            compare_half(what, yh, yf, t, rows);
            half_more(t, tn, rows, n, xf, xh);
            free(x), free(xf), free(x2f), free(yf), free(scf), free(bif), free(m1), free(v1), free(m2), free(v2);
            free(xh), free(x2h), free(yh), free(sch), free(bih), free(sumh), free(part), free(sumf);
        }
}

/* ---- rows in one block ---------------------------------------------------------------------- */

/* Block-per-row step s (kernels.def PCU_ROWS) as the emulator runs it, but
 * the lanes of each phase in reverse order, the shared memory poisoned
 * first (a lane that reads a slot no earlier phase wrote, or another lane's
 * slot of the same phase, gives other bits or NaN). */
static void run_block_rows(const pcu_step *s, void *const *op) {
    static float row[PCU_ROW_MAX];
    static double part[2 * PCU_ROW_LANES];
    for (int64_t r = 0; r < s->threads / PCU_BLOCK; r++) {
        for (int q = 0; q < PCU_ROW_MAX; q++) row[q] = NAN;
        for (int q = 0; q < 2 * PCU_ROW_LANES; q++) part[q] = NAN;
        for (int ph = 0; ph < pcu_kernel_phases(s->kernel); ph++)
            for (int l = PCU_ROW_LANES - 1; l >= 0; l--) pcu_kernel_phase_call(s->kernel, &s->u, op, ph, r, l, row, part);
    }
}

static int64_t block_worst[2]; /* the largest ulps seen: Softmax, the others */

static void compare_block(const char *what, const float *a, const float *b, int64_t count, int64_t tol) {
    for (int64_t i = 0; i < count; i++) {
        checks++;
        const int64_t u = ulps(a[i], b[i]);
        if (u > block_worst[tol > 2] && u != INT64_MAX) block_worst[tol > 2] = u;
        if (u > tol) {
            FAIL("%s: element %lld: one block %.9g, one thread %.9g\n", what, (long long)i, a[i], b[i]);
            return;
        }
    }
}

/* The single-launch row kernels (--cuda-row-kernels on) through their
 * kernels.def rows against the one-thread-per-row form (double exp, sums in
 * row order), which the node tests hold to the reference kernels: Softmax
 * within 8 ulp (expf of x - max rounded to f32), LogSoftmax, LayerNorm, its
 * mean and inv_std_dev within 2 ulp, NaN where the reference has it; rows of 1 to PCU_ROW_MAX
 * floats (fewer than the lanes, not a multiple of them, exactly the most). */
static void test_block_rows(void) {
    static const int64_t shapes[][2] = {{7, 1}, {14, 64}, {7, 197}, {21, 255}, {7, 768}, {3, 1000}, {7, PCU_ROW_MAX}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const int64_t rows = shapes[c][0], n = shapes[c][1], rn = rows * n;
        float *x = malloc(sizeof(float) * (size_t)rn), *y1 = malloc(sizeof(float) * (size_t)rn),
              *y2 = malloc(sizeof(float) * (size_t)rn), *sc = malloc(sizeof(float) * (size_t)n),
              *bi = malloc(sizeof(float) * (size_t)n), *m1 = malloc(sizeof(float) * (size_t)rows),
              *m2 = malloc(sizeof(float) * (size_t)rows), *v1 = malloc(sizeof(float) * (size_t)rows),
              *v2 = malloc(sizeof(float) * (size_t)rows);
        fill_rows(x, rows, n);
        for (int64_t j = 0; j < n; j++) sc[j] = (float)(unif() + 0.5), bi[j] = (float)(unif() - 0.5);
        pcu_step s;
        for (int log = 0; log < 2; log++) {
            pcu_softmax k1 = {.log = log, .outer = rows, .n = n, .inner = 1};
            for (int64_t r = 0; r < rows; r++) pcu_softmax_at(&k1, y1, x, NULL, r);
            memset(&s, 0, sizeof s);
            s.kind = PCU_S_KERNEL, s.kernel = PCU_K_ROWSM, s.threads = rows * PCU_BLOCK;
            s.u.rsm = (pcu_rowsm){.log = log, .rows = rows, .n = n};
            void *op[PCU_KERNEL_OPS] = {x, y2};
            for (int64_t i = 0; i < rn; i++) y2[i] = 12345.0f;
            run_block_rows(&s, op);
            char what[64];
            snprintf(what, sizeof what, "%s in one block %lldx%lld", log ? "LogSoftmax" : "Softmax", (long long)rows,
                     (long long)n);
            compare_block(what, y2, y1, rn, log ? 2 : 8);
        }
        for (int bias = 0; bias < 2; bias++) {
            pcu_norm k1 = {.has_bias = bias, .rows = rows, .n = n, .eps = 1e-5};
            for (int64_t r = 0; r < rows; r++) pcu_norm_at(&k1, y1, x, sc, bi, m1, v1, NULL, r);
            memset(&s, 0, sizeof s);
            s.kind = PCU_S_KERNEL, s.kernel = PCU_K_ROWLN, s.threads = rows * PCU_BLOCK;
            s.u.rln = (pcu_rowln){.has_bias = bias, .rows = rows, .n = n, .eps = 1e-5};
            void *op[PCU_KERNEL_OPS] = {x, sc, bias ? bi : NULL, y2, m2, v2};
            for (int64_t i = 0; i < rn; i++) y2[i] = 12345.0f;
            run_block_rows(&s, op);
            char what[64];
            snprintf(what, sizeof what, "LayerNorm%s in one block %lldx%lld", bias ? "" : " (no bias)", (long long)rows,
                     (long long)n);
            compare_block(what, y2, y1, rn, 2);
            compare_block("its mean", m2, m1, rows, 2);
            compare_block("its inv_std_dev", v2, v1, rows, 2);
            /* the residual Add taken in (plan_add_ln): x as a + b, the same bytes as the Add's
             * kernel then the LayerNorm alone, and the sum written where asked */
            float *a = malloc(sizeof(float) * (size_t)rn), *b = malloc(sizeof(float) * (size_t)rn),
                  *ab = malloc(sizeof(float) * (size_t)rn), *sum = malloc(sizeof(float) * (size_t)rn),
                  *y3 = malloc(sizeof(float) * (size_t)rn), *m3 = malloc(sizeof(float) * (size_t)rows),
                  *v3 = malloc(sizeof(float) * (size_t)rows);
            for (int64_t i = 0; i < rn; i++) a[i] = x[i], b[i] = (float)(unif() - 0.5);
            pcu_ew add;
            const pp_shape flat = {1, {rn}}, *fs[2] = {&flat, &flat};
            pcu_ew_make(PCU_EW_ADD, 2, fs, &flat, PCU_T_F32, PCU_T_F32, 0, 0, 0, &add);
            for (int64_t i = 0; i < rn; i++) pcu_ew_at(&add, ab, a, b, NULL, i);
            void *op1[PCU_KERNEL_OPS] = {ab, sc, bias ? bi : NULL, y2, m2, v2};
            run_block_rows(&s, op1);
            for (int with_sum = 0; with_sum < 2; with_sum++) {
                for (int64_t i = 0; i < rn; i++) y3[i] = sum[i] = 12345.0f;
                void *op2[PCU_KERNEL_OPS] = {a, sc, bias ? bi : NULL, y3, m3, v3, b, with_sum ? sum : NULL};
                run_block_rows(&s, op2);
                checks++;
                if (memcmp(y3, y2, sizeof(float) * (size_t)rn) || memcmp(m3, m2, sizeof(float) * (size_t)rows) ||
                    memcmp(v3, v2, sizeof(float) * (size_t)rows) ||
                    (with_sum && memcmp(sum, ab, sizeof(float) * (size_t)rn)) || (!with_sum && sum[0] != 12345.0f))
                    FAIL("FAIL LayerNorm%s with the residual Add in one block %lldx%lld%s: not the unfused bytes\n",
                         bias ? "" : " (no bias)", (long long)rows, (long long)n, with_sum ? ", sum written" : "");
            }
            free(a), free(b), free(ab), free(sum), free(y3), free(m3), free(v3);
        }
        /* RMSNormalization in one block against the one-thread form */
        {
            pcu_norm k1 = {.rms = 1, .rows = rows, .n = n, .eps = 1e-6};
            for (int64_t r = 0; r < rows; r++) pcu_norm_at(&k1, y1, x, sc, NULL, NULL, NULL, NULL, r);
            memset(&s, 0, sizeof s);
            s.kind = PCU_S_KERNEL, s.kernel = PCU_K_ROWLN, s.threads = rows * PCU_BLOCK;
            s.u.rln = (pcu_rowln){.rms = 1, .rows = rows, .n = n, .eps = 1e-6};
            void *op[PCU_KERNEL_OPS] = {x, sc, NULL, y2};
            for (int64_t i = 0; i < rn; i++) y2[i] = 12345.0f;
            run_block_rows(&s, op);
            char what[64];
            snprintf(what, sizeof what, "RMSNorm in one block %lldx%lld", (long long)rows, (long long)n);
            compare_block(what, y2, y1, rn, 2);
        }
        /* the lint's bound: a row longer than the shared memory has no extent */
        s.u.rln.n = PCU_ROW_MAX + 1;
        checks++;
        if (pcu_kernel_extent_of(PCU_K_ROWLN, &s.u, 0) != -1) FAIL("a row of PCU_ROW_MAX + 1 floats has an extent\n");
        free(x), free(y1), free(y2), free(sc), free(bi), free(m1), free(m2), free(v1), free(v2);
    }
}

/* ---- fused attention (kmath.h pcu_fattn_ph) ---------------------------------------------------- */

/* The kernel's blocks through ktable.h's cooperative call (as emu.c), every
 * lane of a phase before the next, lanes forward or in reverse. */
static void run_coop(const pcu_step *s, void *const *op, int reverse) {
    size_t shb, laneb;
    const int phases = pcu_kernel_coop(s->kernel, &s->u, &shb, &laneb);
    unsigned char *sh = malloc(shb), *lanes = malloc(laneb * PCU_BLOCK);
    memset(sh, 0xff, shb); /* NaN everywhere the kernel reads before it writes */
    memset(lanes, 0xff, laneb * PCU_BLOCK);
    for (int64_t r = 0; r < s->threads / PCU_BLOCK; r++)
        for (int ph = 0; ph < phases; ph++)
            for (int l0 = 0; l0 < PCU_BLOCK; l0++)
                pcu_kernel_coop_call(s->kernel, &s->u, op, ph, r, reverse ? PCU_BLOCK - 1 - l0 : l0, sh, lanes);
    free(sh);
    free(lanes);
}

typedef struct fa_case {
    int64_t nb, Sq, T, D, Dv;
    int scale_op, k_rows, q_bcast; /* k_rows: K stored [T, D] (else [D, T]); q_bcast: one Q for every batch */
    int special;                   /* 1: NaN, +inf and -inf rows, a -inf first tile */
    int gqa;                       /* > 0: that many query heads over half as many K/V heads, 3-D layouts */
    int qscale_op;                 /* Q's scale before the first product: 1 q * 0.35355339, 2 q / 6.3245554 */
    int mask;                      /* an Add of a mask after the scale: 1 [batch, Sq, T] (0 or -1e9), 2 a key
                                    * padding [batch, 1, T], 3 causal [Sq, T] at float's lowest with row 1 masked
                                    * whole (a uniform softmax), each broadcast over the heads */
    int where;                     /* a Where on the scores, 1 before the scale, 2 after: the scores where a bool
                                    * [batch, Sq, T] condition is (wthen) true, odd cases false, else -1e9; 3:
                                    * ONNX Attention's bool mask, -inf added after the scale where false */
    int causal;                    /* ONNX Attention's causality: -inf added to keys past the query's row */
    int win;                       /* > 0: Swin's shifted windows: 2 heads, nb / 2 batches in frames of `win`
                                    * windows, a windowed mask F [win, Sq, T] (0 or -100) added after the scale
                                    * and after M; mask 4 then a per-head bias M [2, Sq, T] */
} fa_case;

/* Q's element as the kernel takes it: scaled as the Mul or Div node before the pattern computes it (in float) */
static float fa_q(const pcu_fattn *k, float q) {
    return k->qscale_op == 1 ? q * k->qscale : k->qscale_op == 2 ? q / k->qscale : q;
}

/* Attention in double: y[b, i, :] = softmax(scale(q_i . k_j)) v (NaN as the
 * reference softmax gives it: a row whose max is NaN, +inf or -inf). */
static void fa_ref(const pcu_fattn *k, const float *q, const float *kk, const float *v, const float *m,
                   const unsigned char *cond, const float *fm, const float *hs, double *y) {
    double *s = malloc(sizeof *s * (size_t)k->T);
    for (int64_t b = 0; b < k->nb; b++)
        for (int64_t i = 0; i < k->Sq; i++) {
            double mx = -INFINITY;
            int nan = 0;
            const int64_t qo = b / k->nh * k->qb + b % k->nh * k->qh, ko = b / k->nh * k->kb + b % k->nh / k->grp * k->kh,
                          vo = b / k->nh * k->vb + b % k->nh / k->grp * k->vh, yo = b / k->nh * k->yb + b % k->nh * k->yh;
            for (int64_t j = 0; j < k->T; j++) {
                double d = 0;
                for (int64_t e = 0; e < k->D; e++)
                    d += (double)fa_q(k, q[qo + i * k->qi + e * k->qe]) * kk[ko + j * k->kj + e * k->ke];
                const int64_t co = b / k->nh * k->cb + b % k->nh * k->ch + i * k->ci + j * k->cj;
                if (k->where == 1 && (cond[co] != 0) != k->wthen) d = k->fill;
                if (k->scale_op == 1) d *= k->scale;
                else if (k->scale_op == 2) d /= k->scale;
                else if (k->scale_op == 3) d *= hs[b % k->nh];
                if (k->where == 2 && (cond[co] != 0) != k->wthen) d = k->wadd ? d + k->fill : k->fill;
                if (k->mask) d += m[b / k->nh * k->mb + b % k->nh * k->mh + i * k->mi + j * k->mj];
                if (k->fmask)
                    d += fm[b / k->nh / k->fwn * k->fb + b / k->nh % k->fwn * k->fw + b % k->nh * k->fh + i * k->fi +
                            j * k->fj];
                if (k->causal && j > i) d += -INFINITY;
                s[j] = d;
                nan = nan || d != d;
                if (d > mx) mx = d;
            }
            double sum = 0;
            for (int64_t j = 0; j < k->T; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < k->Dv; e++) {
                double a = 0;
                for (int64_t j = 0; j < k->T; j++) a += s[j] / sum * v[vo + j * k->vj + e * k->ve];
                y[yo + i * k->yi + e] = nan || mx == INFINITY || mx == -INFINITY ? NAN : a;
            }
        }
    free(s);
}

static void test_fattn_case(const fa_case *c) {
    pcu_fattn k = {.scale_op = c->scale_op, .scale = c->scale_op == 2 ? 8.0f : 0.125f, .nb = c->nb, .nh = 1,
                   .grp = 1, .Sq = c->Sq, .T = c->T, .D = c->D, .Dv = c->Dv};
    k.qtiles = pcu_fattn_qtiles(&k);
    k.qscale_op = c->qscale_op, k.qscale = c->qscale_op == 1 ? 0.35355339f : 6.3245554f;
    k.qb = c->q_bcast ? 0 : k.Sq * k.D, k.qi = k.D, k.qe = 1;
    k.kb = k.T * k.D, k.kj = c->k_rows ? k.D : 1, k.ke = c->k_rows ? 1 : k.T;
    k.vb = k.T * k.Dv, k.vj = k.Dv, k.ve = 1;
    k.yb = k.Sq * k.Dv, k.yi = k.Dv;
    int64_t nkv = k.nb;
    if (c->gqa) { /* 3-D Attention's layouts: [B, S, heads * dim], 2 query heads per K/V head */
        k.nh = c->gqa, k.grp = 2, nkv = k.nb / 2;
        const int64_t hk = k.nh / 2;
        k.qb = k.Sq * k.nh * k.D, k.qh = k.D, k.qi = k.nh * k.D, k.qe = 1;
        k.kb = k.T * hk * k.D, k.kh = k.D, k.kj = hk * k.D, k.ke = 1;
        k.vb = k.T * hk * k.Dv, k.vh = k.Dv, k.vj = hk * k.Dv, k.ve = 1;
        k.yb = k.Sq * k.nh * k.Dv, k.yh = k.Dv, k.yi = k.nh * k.Dv;
    }
    if (c->win) { /* [nb, S, dim] packed as nb / 2 batches of 2 heads */
        k.nh = 2;
        k.qb = 2 * k.Sq * k.D, k.qh = k.Sq * k.D, k.kb = 2 * k.T * k.D, k.kh = k.T * k.D;
        k.vb = 2 * k.T * k.Dv, k.vh = k.T * k.Dv, k.yb = 2 * k.Sq * k.Dv, k.yh = k.Sq * k.Dv;
        k.fmask = 1, k.fwn = c->win, k.fb = 0, k.fw = k.Sq * k.T, k.fh = 0, k.fi = k.T, k.fj = 1;
    }
    const int64_t nq = (c->q_bcast ? 1 : k.nb) * k.Sq * k.D, nk = nkv * k.T * k.D, nv = nkv * k.T * k.Dv,
                  ny = k.nb * k.Sq * k.Dv, B = k.nb / k.nh;
    int64_t nm = 1;
    if (c->mask) { /* broadcast over the heads (mh 0) */
        k.mask = 1, k.mh = 0, k.mj = 1;
        if (c->mask == 1) k.mb = k.Sq * k.T, k.mi = k.T, nm = B * k.Sq * k.T;
        else if (c->mask == 2) k.mb = k.T, k.mi = 0, nm = B * k.T;
        else if (c->mask == 4) k.mb = 0, k.mh = k.Sq * k.T, k.mi = k.T, nm = k.nh * k.Sq * k.T; /* a bias per head */
        else k.mb = 0, k.mi = k.T, nm = k.Sq * k.T;
    }
    float hs[2] = {0.25f, 0.0625f}; /* scale_op 3: a scale per head, as SwinV2's logit scale (2 heads: win cases) */
    if (c->scale_op == 3) k.scale = 0;
    const int64_t nf = c->win ? c->win * k.Sq * k.T : 1;
    float *fm = malloc(sizeof *fm * (size_t)nf);
    for (int64_t i = 0; i < nf; i++) fm[i] = c->win && unif() < 0.4 ? -100.0f : 0.0f;
    unsigned char *cond = malloc((size_t)(B * k.Sq * k.T));
    k.causal = c->causal;
    if (c->where) { /* a [batch, Sq, T] condition, heads broadcast */
        k.where = c->where == 3 ? 2 : c->where, k.wthen = c->where == 3 || (c->nb & 1) == 0;
        k.wadd = c->where == 3, k.fill = c->where == 3 ? -INFINITY : -1e9f;
        k.cb = k.Sq * k.T, k.ch = 0, k.ci = k.T, k.cj = 1;
    }
    for (int64_t i = 0; i < B * k.Sq * k.T; i++) cond[i] = (unif() < 0.7) == (k.wthen != 0);
    float *m = malloc(sizeof *m * (size_t)nm);
    for (int64_t i = 0; i < nm; i++) {
        const int64_t r = i / k.T % k.Sq, j = i % k.T;
        m[i] = c->mask == 3 ? (j > r || r == 1 ? -FLT_MAX : 0.0f) : c->mask == 4 ? (float)(unif() * 4 - 2)
               : unif() < 0.3 ? -1e9f : 0.0f;
    }
    float *q = malloc(sizeof *q * (size_t)nq), *kk = malloc(sizeof *kk * (size_t)nk), *v = malloc(sizeof *v * (size_t)nv);
    float *y1 = malloc(sizeof *y1 * (size_t)ny), *y2 = malloc(sizeof *y2 * (size_t)ny);
    double *yr = malloc(sizeof *yr * (size_t)ny);
    for (int64_t i = 0; i < nq; i++) q[i] = (float)(unif() * 4 - 2);
    for (int64_t i = 0; i < nk; i++) kk[i] = (float)(unif() * 4 - 2);
    for (int64_t i = 0; i < nv; i++) v[i] = (float)(unif() * 6 - 3);
    if (c->special && k.Sq >= 4 && k.T > PCU_FA_BK && k.D >= 4) { /* batch 0's rows 0-2 NaN in the reference */
        q[0 * k.qi + 1] = NAN;      /* row 0: every score NaN */
        q[1 * k.qi + 0] = INFINITY; /* row 1: +inf and -inf scores (K's column 0 has both signs) */
        q[2 * k.qi + 3] = -INFINITY; /* row 2: every score -inf (K's column 3 > 0) */
        for (int64_t j = 0; j < k.T; j++) kk[j * k.kj + 3 * k.ke] = fabsf(kk[j * k.kj + 3 * k.ke]) + 0.5f;
        /* every row: the first key tile -inf (K's column 2 -inf there, q's 0.5), the rest finite */
        for (int64_t j = 0; j < PCU_FA_BK; j++) kk[j * k.kj + 2 * k.ke] = -INFINITY;
        for (int64_t i = 0; i < k.Sq; i++) q[i * k.qi + 2] = 0.5f;
    }
    pcu_step s;
    memset(&s, 0, sizeof s);
    s.kind = PCU_S_KERNEL, s.kernel = PCU_K_FATTN, s.threads = k.nb * k.qtiles * PCU_BLOCK, s.u.fa = k;
    void *op[PCU_KERNEL_OPS] = {q, kk, v, y1, m, cond, fm, hs};
    for (int64_t i = 0; i < ny; i++) y1[i] = y2[i] = 12345.0f;
    run_coop(&s, op, 0);
    op[3] = y2;
    run_coop(&s, op, 1);
    fa_ref(&k, q, kk, v, m, cond, fm, hs, yr);
    double vmax = 0;
    for (int64_t i = 0; i < nv; i++) vmax = fabs(v[i]) > vmax ? fabs(v[i]) : vmax;
    int64_t bad = 0, nans = 0;
    double worst = 0;
    for (int64_t i = 0; i < ny; i++) {
        const double r = yr[i], g = y1[i];
        nans += r != r;
        const double err = fabs(g - r), tol = 2e-5 * vmax + 1e-4 * fabs(r);
        if ((r != r) != (g != g) || (r == r && err > tol)) {
            if (bad++ < 3)
                FAIL("FAIL fused attention nb %lld Sq %lld T %lld D %lld Dv %lld: y[%lld] = %.9g, reference %.9g\n",
                     (long long)k.nb, (long long)k.Sq, (long long)k.T, (long long)k.D, (long long)k.Dv, (long long)i,
                     g, r);
        }
        if (r == r && err > worst) worst = err;
    }
    checks += 2;
    if (memcmp(y1, y2, sizeof *y1 * (size_t)ny))
        FAIL("FAIL fused attention nb %lld Sq %lld T %lld D %lld: lanes in reverse order give other bits\n",
             (long long)k.nb, (long long)k.Sq, (long long)k.T, (long long)k.D);
    if (c->special && k.Sq >= 4 && k.T > PCU_FA_BK && k.D >= 4 && nans != 3 * k.Dv)
        FAIL("FAIL fused attention: the reference has %lld NaN outputs, want %lld (three rows)\n", (long long)nans,
             (long long)(3 * k.Dv));
    if (worst / (vmax > 0 ? vmax : 1) > fa_worst) fa_worst = worst / (vmax > 0 ? vmax : 1);
    /* a half plan's pattern: Q, K, V and Y in f16 / bf16, the f32 kernel's values over the same half values,
     * rounded, bit for bit (Q's scale: the f32 kernel given Q scaled and rounded as the half plan's Mul or Div
     * node writes it) */
    float *qs = malloc(sizeof *qs * (size_t)nq);
    for (int t = PCU_T_F16; t != 0; t = t == PCU_T_F16 ? PCU_T_BF16 : 0) {
        uint16_t *qh = malloc(2 * (size_t)nq), *kh = malloc(2 * (size_t)nk), *vh = malloc(2 * (size_t)nv),
                 *yh = malloc(2 * (size_t)ny), *qsh = malloc(2 * (size_t)nq), *mh = malloc(2 * (size_t)nm),
                 *fh = malloc(2 * (size_t)nf), hsh[2];
        to_half(q, t, qh, q, nq), to_half(kk, t, kh, kk, nk), to_half(v, t, vh, v, nv), to_half(m, t, mh, m, nm);
        to_half(fm, t, fh, fm, nf);
        float hsr[2]; /* the heads' scales as the half plan holds them */
        to_half(hs, t, hsh, hsr, 2);
        for (int64_t i = 0; i < nq; i++) qs[i] = fa_q(&k, q[i]);
        to_half(qs, t, qsh, qs, nq);
        free(qsh);
        s.u.fa.t = 0, s.u.fa.qscale_op = 0;
        void *opf[PCU_KERNEL_OPS] = {qs, kk, v, y1, m, cond, fm, hsr};
        run_coop(&s, opf, 0);
        s.u.fa.t = t, s.u.fa.qscale_op = k.qscale_op;
        const float fill = k.fill;
        s.u.fa.fill = pcu_ldf((uint16_t[]){t == PCU_T_F16 ? pcu_f2h(fill) : pcu_f2bf(fill)}, t, 0);
        void *oph[PCU_KERNEL_OPS] = {qh, kh, vh, yh, mh, cond, fh, hsh};
        run_coop(&s, oph, 1);
        char what[96];
        snprintf(what, sizeof what, "%s fused attention nb %lld Sq %lld T %lld D %lld", t == PCU_T_F16 ? "f16" : "bf16",
                 (long long)k.nb, (long long)k.Sq, (long long)k.T, (long long)k.D);
        if (!k.mask && !k.where && !k.fmask) {
            compare_half(what, yh, y1, t, ny);
        } else { /* the masked score rounded to t as the Add stores it, which the f32 kernel does not: against
                  * the reference in double over the same half values, within the half type's reach */
            fa_ref(&s.u.fa, q, kk, v, m, cond, fm, hsr, yr);
            const double tol = (t == PCU_T_F16 ? 1e-2 : 8e-2) * vmax;
            for (int64_t i = 0; i < ny; i++) {
                const double g = pcu_ldf(yh, t, i), r = yr[i];
                checks++;
                if ((g != g) != (r != r) || (r == r && fabs(g - r) > tol)) {
                    FAIL("FAIL %s (masked): y[%lld] = %.6g, the reference over the half values %.6g\n", what,
                         (long long)i, g, r);
                    break;
                }
            }
        }
        free(qh), free(kh), free(vh), free(yh), free(mh), free(fh);
    }
    free(qs), free(q), free(kk), free(v), free(y1), free(y2), free(yr), free(m), free(cond), free(fm);
}

/* ONNX Attention's bool mask adds -inf where false (the reference kernel's arithmetic), a Where puts its fill: a
 * +inf score at a masked key makes the row NaN in the first (inf + -inf) and is dropped by the second. */
static void test_fattn_masked_inf(void) {
    for (int wadd = 0; wadd <= 1; wadd++) {
        pcu_fattn k = {.scale_op = 0, .nb = 1, .nh = 1, .grp = 1, .Sq = 2, .T = 3, .D = 1, .Dv = 1, .qtiles = 1,
                       .qb = 2, .qi = 1, .qe = 1, .kb = 3, .kj = 1, .ke = 1, .vb = 3, .vj = 1, .ve = 1, .yb = 2, .yi = 1,
                       .where = 2, .wthen = 1, .wadd = wadd, .fill = -INFINITY, .cb = 6, .ci = 3, .cj = 1};
        float q[2] = {1, 1}, kk[3] = {INFINITY, 1, 2}, v[3] = {5, 1, 2}, y[2] = {0, 0};
        unsigned char cond[6] = {0, 1, 1, 1, 1, 1}; /* row 0: the +inf key masked */
        pcu_step s;
        memset(&s, 0, sizeof s);
        s.kind = PCU_S_KERNEL, s.kernel = PCU_K_FATTN, s.threads = PCU_BLOCK, s.u.fa = k;
        void *op[PCU_KERNEL_OPS] = {q, kk, v, y, NULL, cond};
        run_coop(&s, op, 0);
        const double want0 = (exp(1.0 - 2.0) * 1 + 1.0 * 2) / (exp(1.0 - 2.0) + 1.0); /* the Where's row 0 */
        checks += 2;
        if (wadd ? !isnan(y[0]) : !(fabs(y[0] - want0) < 1e-6))
            FAIL("FAIL fused attention, a +inf score at a masked key (%s): row 0 %.9g, want %s\n",
                 wadd ? "-inf added" : "the fill put", y[0], wadd ? "NaN" : "the unmasked keys' average");
        if (!isnan(y[1])) FAIL("FAIL fused attention, a +inf score unmasked: row 1 %.9g, want NaN\n", y[1]);
    }
}

static void test_fattn(void) {
    static const fa_case cases[] = {
        {2, 197, 197, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 70, 33, 8, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 1, 50, 32, 32, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 5, 100, 40, 24, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {4, 64, 1, 16, 8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, {2, 65, 64, 64, 64, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 130, 97, 64, 40, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, 40, 40, 8, 64, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 7, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {8, 70, 45, 16, 24, 1, 1, 0, 0, 4, 0, 0, 0, 0, 0},
        {6, 1, 9, 64, 64, 2, 1, 0, 0, 6, 0, 0, 0, 0, 0},
        /* Q scaled before the first product (torch's q / sqrt(d)), by a Div and by a Mul */
        {2, 197, 197, 64, 64, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}, {3, 70, 33, 8, 16, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0},
        {8, 70, 45, 16, 24, 2, 0, 0, 0, 4, 2, 0, 0, 0, 0},
        /* a mask added after the scale: per batch whole, a key padding, causal at float's lowest */
        {3, 70, 45, 16, 24, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {2, 197, 197, 64, 64, 2, 1, 0, 1, 0, 2, 2, 0, 0, 0},
        {8, 40, 40, 16, 16, 1, 0, 0, 0, 4, 0, 3, 0, 0, 0}, {2, 130, 97, 64, 40, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0},
        {6, 1, 9, 64, 64, 2, 1, 0, 0, 6, 0, 2, 0, 0, 0},
        /* a Where on the scores (masked_fill): before the scale, after it, with a mask added after */
        {3, 70, 45, 16, 24, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0}, {2, 130, 97, 64, 40, 1, 0, 0, 0, 0, 2, 0, 2, 0, 0},
        {8, 40, 40, 16, 16, 1, 0, 0, 0, 4, 0, 2, 1, 0, 0}, {2, 65, 64, 64, 64, 0, 1, 0, 0, 0, 0, 3, 2, 0, 0},
        /* ONNX Attention's bool mask (-inf added where false; NaN, +inf and -inf rows) and its causality */
        {2, 70, 45, 16, 24, 1, 0, 0, 1, 0, 0, 0, 3, 0, 0}, {8, 40, 40, 16, 16, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0},
        {3, 33, 70, 32, 32, 2, 1, 0, 0, 0, 0, 1, 3, 1, 0},
        /* heads over 64 wide (the wide geometry: 32 query rows of 8 lanes, 16 keys a tile): Llama's 128, a
         * head of 128 onto values of 64 and the reverse, odd widths, the special rows, masks, Wheres, GQA */
        {2, 70, 45, 128, 128, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 33, 40, 128, 128, 1, 1, 0, 1, 0, 2, 0, 0, 0, 0},
        {3, 17, 50, 128, 64, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, {2, 40, 17, 64, 128, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0},
        {1, 35, 33, 97, 65, 1, 0, 0, 0, 0, 1, 2, 0, 0, 0}, {8, 40, 40, 128, 128, 1, 0, 0, 0, 4, 0, 3, 0, 0, 0},
        {2, 65, 64, 128, 128, 2, 0, 0, 0, 0, 0, 0, 2, 0, 0}, {8, 40, 40, 128, 96, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0},
        {3, 33, 70, 128, 128, 2, 1, 0, 0, 0, 0, 1, 3, 1, 0}, {2, 1, 300, 128, 128, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0},
        /* Swin's shifted windows: a windowed mask after a per-head bias (and alone), 2 or 4 windows a frame,
         * Q scaled before the product, a wide head */
        {8, 49, 49, 32, 32, 0, 1, 0, 0, 0, 1, 4, 0, 0, 4}, {12, 40, 40, 16, 16, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2},
        {8, 70, 70, 96, 96, 1, 1, 0, 0, 0, 2, 4, 0, 0, 2},
        /* SwinV2's logit scale, a scale per head, with the bias and the windowed mask, and alone */
        {8, 49, 49, 32, 32, 3, 1, 0, 0, 0, 0, 4, 0, 0, 4}, {4, 40, 33, 16, 16, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) test_fattn_case(&cases[c]);
    test_fattn_masked_inf();
    /* the lint's bound: the extents of a [D, T] K and of Y */
    pcu_fattn k = {.nb = 2, .nh = 1, .grp = 1, .Sq = 3, .T = 5, .D = 4, .Dv = 6, .qtiles = 1, .qb = 12, .qi = 4,
                   .qe = 1, .kb = 20, .kj = 1, .ke = 5, .vb = 30, .vj = 6, .ve = 1, .yb = 18, .yi = 6};
    checks += 2;
    if (pcu_kernel_extent_of(PCU_K_FATTN, &k, 4) != -1) FAIL("FAIL fused attention: a mask's extent without one\n");
    k.mask = 1, k.mb = 5, k.mi = 0, k.mj = 1; /* a [2, 1, 5] key padding: 10 elements */
    if (pcu_kernel_extent_of(PCU_K_FATTN, &k, 4) != 10)
        FAIL("FAIL fused attention: the mask's extent %lld, want 10\n", (long long)pcu_kernel_extent_of(PCU_K_FATTN, &k, 4));
    if (pcu_kernel_extent_of(PCU_K_FATTN, &k, 1) != 40 || pcu_kernel_extent_of(PCU_K_FATTN, &k, 3) != 36 ||
        pcu_kernel_extent_of(PCU_K_FATTN, &k, 0) != 24 || pcu_kernel_extent_of(PCU_K_FATTN, &k, 2) != 60)
        FAIL("FAIL fused attention: extents %lld %lld %lld %lld\n", (long long)pcu_kernel_extent_of(PCU_K_FATTN, &k, 0),
             (long long)pcu_kernel_extent_of(PCU_K_FATTN, &k, 1), (long long)pcu_kernel_extent_of(PCU_K_FATTN, &k, 2),
             (long long)pcu_kernel_extent_of(PCU_K_FATTN, &k, 3));
}

/* The kernel table against what it replaced: the launcher's numbered cases
 * (kernels.cu: case 17 launched the grid sample kernel, ...), the engine's
 * sizeof switch (exec_cuda.c's param_size), pcu_step_name's names. */
_Static_assert(PCU_K_EW == 0 && PCU_K_PERM == 1 && PCU_K_RED == 2 && PCU_K_SOFTMAX == 3 && PCU_K_NORM == 4 &&
                   PCU_K_BN == 5 && PCU_K_POOL == 6 && PCU_K_EPI == 7 && PCU_K_RESIZE == 8 && PCU_K_CUMSUM == 9 &&
                   PCU_K_GATHER_EL == 10 && PCU_K_TOPK == 11 && PCU_K_SCATTER == 12 && PCU_K_TRILU == 13 &&
                   PCU_K_ROPE == 14 && PCU_K_ATTN == 15 && PCU_K_QUANT == 16 && PCU_K_GRIDSAMPLE == 17 &&
                   PCU_K_LINE == 18 && PCU_K_ONEHOT == 19 && PCU_K_AFFGRID == 20 && PCU_K_RNN == 21 &&
                   PCU_K_COL2IM == 22 && PCU_K_ROWSM == 23 && PCU_K_ROWLN == 24 && PCU_K_FATTN == 25 &&
                   PCU_K_UGRAD == 26 && PCU_K_BNT == 27 && PCU_K_BNG == 28 && PCU_K_MPGRAD == 29 &&
                   PCU_K_GATHERGRAD == 30 &&
                   PCU_K_APGRAD == 31 && PCU_K_DROPT == 32 && PCU_K_LNG == 33 && PCU_K_LNGP == 34 &&
                   PCU_K_SLGRAD == 35 && PCU_K_RSGRAD == 36 && PCU_K_EWV == 37 && PCU_K_OPT == 38 &&
                   PCU_K_OPTG == 39 && PCU_K_POOLH == 40 && PCU_K_GSGRAD == 41 && PCU_K_COUNT == 42,
               "the kinds' numbers of the launcher before kernels.def");

static void test_kernel_table(void) {
    static const struct {
        int kind;
        size_t bytes;
        const char *name;
    } was[] = {
        {PCU_K_EW, sizeof(pcu_ew), "elementwise"}, {PCU_K_PERM, sizeof(pcu_perm), "strided copy"},
        {PCU_K_RED, sizeof(pcu_red), "reduction"}, {PCU_K_SOFTMAX, sizeof(pcu_softmax), "softmax"},
        {PCU_K_NORM, sizeof(pcu_norm), "normalization"}, {PCU_K_BN, sizeof(pcu_bn), "batch normalization"},
        {PCU_K_POOL, sizeof(pcu_pool), "pool"}, {PCU_K_EPI, sizeof(pcu_epi), "convolution epilogue"},
        {PCU_K_RESIZE, sizeof(pcu_resize), "resize"}, {PCU_K_CUMSUM, sizeof(pcu_cumsum), "cumsum"},
        {PCU_K_GATHER_EL, sizeof(pcu_gather_el), "gather elements"}, {PCU_K_TOPK, sizeof(pcu_topk), "topk"},
        {PCU_K_SCATTER, sizeof(pcu_scatter), "scatter"}, {PCU_K_TRILU, sizeof(pcu_trilu), "trilu"},
        {PCU_K_ROPE, sizeof(pcu_rope), "rotary embedding"}, {PCU_K_ATTN, sizeof(pcu_attn), "attention"},
        {PCU_K_QUANT, sizeof(pcu_quant), "quantize"}, {PCU_K_GRIDSAMPLE, sizeof(pcu_gridsample), "grid sample"},
        {PCU_K_LINE, sizeof(pcu_line), "line"}, {PCU_K_ONEHOT, sizeof(pcu_onehot), "one-hot"},
        {PCU_K_AFFGRID, sizeof(pcu_affgrid), "affine grid"}, {PCU_K_RNN, sizeof(pcu_rnn), "recurrence"},
        {PCU_K_COL2IM, sizeof(pcu_col2im), "col2im"}, {PCU_K_ROWSM, sizeof(pcu_rowsm), "softmax in one block"},
        {PCU_K_ROWLN, sizeof(pcu_rowln), "layer normalization in one block"},
        {PCU_K_FATTN, sizeof(pcu_fattn), "fused attention"},
        {PCU_K_UGRAD, sizeof(pcu_ugrad), "activation gradient"},
        {PCU_K_BNT, sizeof(pcu_bnt), "batch normalization (training)"},
        {PCU_K_BNG, sizeof(pcu_bng), "batch normalization gradient"},
        {PCU_K_MPGRAD, sizeof(pcu_mpgrad), "max pool gradient"},
        {PCU_K_GATHERGRAD, sizeof(pcu_gathergrad), "gather gradient"},
        {PCU_K_APGRAD, sizeof(pcu_apgrad), "average pool gradient"},
        {PCU_K_DROPT, sizeof(pcu_dropt), "dropout (training)"},
        {PCU_K_LNG, sizeof(pcu_lng), "normalization gradient"},
        {PCU_K_LNGP, sizeof(pcu_lngp), "normalization parameter gradient"},
        {PCU_K_SLGRAD, sizeof(pcu_slgrad), "slice gradient"},
        {PCU_K_RSGRAD, sizeof(pcu_rsgrad), "resize gradient"},
        {PCU_K_EWV, sizeof(pcu_ewv), "elementwise, 16 bytes a thread"},
        {PCU_K_OPT, sizeof(pcu_opt), "optimizer step"},
        {PCU_K_OPTG, sizeof(pcu_optg), "optimizer gradient pass"},
        {PCU_K_POOLH, sizeof(pcu_poolh), "pool, channels-last"},
        {PCU_K_GSGRAD, sizeof(pcu_gsgrad), "grid sample gradient"},
    };
    _Static_assert(sizeof was / sizeof was[0] == PCU_K_COUNT, "a row of the old tables per kind");
    pcu_step s;
    for (int k = 0; k < PCU_K_COUNT; k++) {
        memset(&s, 0, sizeof s);
        s.kind = PCU_S_KERNEL, s.kernel = k;
        checks++;
        if (was[k].kind != k || pcu_kernel_param_bytes(k) != was[k].bytes || strcmp(pcu_step_name(&s), was[k].name) ||
            !pcu_kernel_writes(k, &s.u) || pcu_kernel_writes(k, &s.u) >> PCU_KERNEL_OPS) {
            failures++;
            printf("FAIL kernel table: kind %d (%s): %zu bytes (was %zu), writes 0x%x\n", k, pcu_step_name(&s),
                   pcu_kernel_param_bytes(k), was[k].bytes, pcu_kernel_writes(k, &s.u));
        }
    }
    checks++;
    if (pcu_kernel_param_bytes(PCU_K_COUNT) || pcu_kernel_writes(PCU_K_COUNT, &s.u) ||
        pcu_kernel_extent_of(PCU_K_COUNT, &s.u, 0) != -1 || strcmp(pcu_kernel_name(PCU_K_COUNT), "kernel")) {
        failures++;
        printf("FAIL kernel table: an unknown kind has a row\n");
    }
}

/* ---- the backward kernels of training plans ---- */

/* MaxPoolGrad as the reference computes it: each output's window maximum
 * takes its dY, outputs in order. */
static void mpgrad_scatter(const pcu_mpgrad *k, const float *x, const float *dy, float *dx) {
    const int64_t Pin = k->in[0] * k->in[1] * k->in[2], P = k->out[0] * k->out[1] * k->out[2];
    memset(dx, 0, sizeof *dx * (size_t)(k->nc * Pin));
    for (int64_t pl = 0; pl < k->nc; pl++)
        for (int64_t o0 = 0, oi = 0; o0 < k->out[0]; o0++)
            for (int64_t o1 = 0; o1 < k->out[1]; o1++)
                for (int64_t o2 = 0; o2 < k->out[2]; o2++, oi++) {
                    const int64_t b = pcu_mpgrad_best(k, x + pl * Pin, o0, o1, o2);
                    if (b >= 0) dx[pl * Pin + b] += dy[pl * P + oi];
                }
}

/* ---- channels-last (--cuda-layout nhwc) ------------------------------------------------------- */

/* x [N, C, H, W] (NCHW) -> xt in NHWC, esize bytes an element */
static void to_nhwc(const void *x, void *xt, int64_t N, int64_t C, int64_t HW, size_t esize) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < HW; s++)
                memcpy((char *)xt + (size_t)((n * HW + s) * C + c) * esize, (const char *)x + (size_t)((n * C + c) * HW + s) * esize,
                       esize);
}

/* MaxPool and AveragePool (pads counted or not, strides, dilations), the
 * convolution epilogue with the channel innermost (pcu_epi s = 1) and
 * GlobalAveragePool's mean through NHWC strides, over f32, float16 and
 * bfloat16 with NaN and inf among the values: the NHWC kernels' outputs,
 * transposed, are the NCHW kernels' bits (the same taps in the same order). */
static void test_nhwc(void) {
    srand(11);
    int cases = 0;
    for (int c = 0; c < 240; c++) {
        const int t = c % 3 == 0 ? PCU_T_F32 : c % 3 == 1 ? PCU_T_F16 : PCU_T_BF16;
        const size_t es = t == PCU_T_F32 ? 4 : 2;
        const int64_t N = 1 + rand() % 2, C = 1 + rand() % 9, H = 1 + rand() % 8, W = 1 + rand() % 8;
        pcu_poolh kh = {.c = C};
        pcu_pool *k = &kh.p;
        *k = (pcu_pool){.max = rand() % 2, .t = t, .nc = N * C, .in = {1, H, W}};
        k->count_pad = !k->max && rand() % 2;
        k->k[0] = k->s[0] = k->d[0] = 1, k->out[0] = 1;
        bool ok = true;
        for (int d = 1; d < 3; d++) {
            k->k[d] = 1 + rand() % 3, k->s[d] = 1 + rand() % 2, k->d[d] = 1 + rand() % 2;
            k->p[d] = rand() % 2, k->p1[d] = rand() % 2;
            const int64_t span = (k->k[d] - 1) * k->d[d] + 1, room = k->in[d] + k->p[d] + k->p1[d] - span;
            if (room < 0) ok = false;
            else k->out[d] = room / k->s[d] + 1;
        }
        if (!ok) continue;
        cases++;
        k->n = N * C * k->out[1] * k->out[2];
        const int64_t nx = N * C * H * W, ny = k->n;
        unsigned char *x = malloc((size_t)nx * es), *xt = malloc((size_t)nx * es);
        unsigned char *y = malloc((size_t)(ny > nx ? ny : nx) * es), *yh = malloc((size_t)(ny > nx ? ny : nx) * es);
        unsigned char *yt = malloc((size_t)(ny > nx ? ny : nx) * es);
        for (int64_t i = 0; i < nx; i++) {
            const int r = rand() % 40;
            const float v = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : (float)(4 * unif() - 2);
            pcu_stf(x, t, i, v);
        }
        to_nhwc(x, xt, N, C, H * W, es);
        for (int64_t i = 0; i < ny; i++) pcu_pool_at(k, y, x, i);
        for (int64_t i = 0; i < ny; i++) pcu_poolh_at(&kh, yh, xt, i);
        to_nhwc(y, yt, N, C, k->out[1] * k->out[2], es);
        checks++;
        if (memcmp(yt, yh, (size_t)ny * es))
            FAIL("FAIL NHWC %s (type %d, %lldx%lldx%lldx%lld, k %lldx%lld s %lld,%lld d %lld,%lld): not the NCHW bits\n",
                 k->max ? "MaxPool" : "AveragePool", t, (long long)N, (long long)C, (long long)H, (long long)W,
                 (long long)k->k[1], (long long)k->k[2], (long long)k->s[1], (long long)k->s[2], (long long)k->d[1],
                 (long long)k->d[2]);
        /* the epilogue: y = Relu(y + bias[c] + res), NCHW (s = H*W) and NHWC (s = 1) */
        unsigned char *bias = malloc((size_t)C * es), *res = malloc((size_t)nx * es), *rest = malloc((size_t)nx * es);
        for (int64_t i = 0; i < C; i++) pcu_stf(bias, t, i, (float)(unif() - 0.5));
        for (int64_t i = 0; i < nx; i++) pcu_stf(res, t, i, (float)(unif() - 0.5));
        to_nhwc(res, rest, N, C, H * W, es);
        memcpy(y, x, (size_t)nx * es), memcpy(yh, xt, (size_t)nx * es);
        pcu_epi e = {.act = 1, .has_bias = 1, .has_res = 1, .t = t, .n = nx, .c = C, .s = H * W};
        for (int64_t i = 0; i < nx; i++) pcu_epi_at(&e, y, bias, res, i);
        e.s = 1;
        for (int64_t i = 0; i < nx; i++) pcu_epi_at(&e, yh, bias, rest, i);
        to_nhwc(y, yt, N, C, H * W, es);
        checks++;
        if (memcmp(yt, yh, (size_t)nx * es)) FAIL("FAIL NHWC convolution epilogue (type %d, C %lld): not the NCHW bits\n", t, (long long)C);
        /* GlobalAveragePool's mean: NCHW strides and NHWC strides, the same [N, C] out */
        pcu_red r = {.op = PCU_RED_MEAN, .t = t, .nk = 2, .nr = 2, .n_out = N * C, .n_red = H * W, .kd = {N, C},
                     .ks = {C * H * W, H * W}, .rd = {H, W}, .rs = {W, 1}};
        for (int64_t i = 0; i < N * C; i++) pcu_red_at(&r, y, x, i);
        r.ks[1] = 1, r.rs[0] = W * C, r.rs[1] = C;
        for (int64_t i = 0; i < N * C; i++) pcu_red_at(&r, yh, xt, i);
        checks++;
        if (memcmp(y, yh, (size_t)(N * C) * es)) FAIL("FAIL NHWC GlobalAveragePool (type %d): not the NCHW bits\n", t);
        free(x), free(xt), free(y), free(yh), free(yt), free(bias), free(res), free(rest);
    }
    checks++;
    if (cases < 100) FAIL("FAIL NHWC: only %d pool cases\n", cases);
    printf("test_kmath: channels-last: %d cases (pools, the epilogue, GlobalAveragePool's mean)\n", cases);
}

static void test_maxpool_grad(void) {
    srand(7);
    int cases = 0;
    for (int c = 0; c < 300; c++) {
        pcu_mpgrad k = {.max = 1, .nc = 1 + rand() % 3};
        const int nsp = 1 + rand() % 3;
        for (int d = 0; d < 3; d++) {
            const bool on = d >= 3 - nsp;
            k.in[d] = on ? 1 + rand() % 9 : 1;
            k.k[d] = on ? 1 + rand() % 3 : 1;
            k.s[d] = on ? 1 + rand() % 3 : 1;
            k.d[d] = on ? 1 + rand() % 2 : 1;
            k.p[d] = on && k.k[d] > 1 ? rand() % k.k[d] : 0;
            k.p1[d] = on && k.k[d] > 1 ? rand() % k.k[d] : 0;
            const int64_t span = k.in[d] + k.p[d] + k.p1[d] - k.d[d] * (k.k[d] - 1) - 1;
            /* floor or ceil mode: the last window may start past the padded end's fit */
            k.out[d] = span < 0 ? 0 : span / k.s[d] + 1 + (rand() % 2 && span % k.s[d] ? 1 : 0);
        }
        const int64_t Pin = k.in[0] * k.in[1] * k.in[2], P = k.out[0] * k.out[1] * k.out[2];
        if (P == 0) continue;
        k.n = k.nc * Pin;
        float *x = malloc(sizeof *x * (size_t)k.n), *dy = malloc(sizeof *dy * (size_t)(k.nc * P));
        float *want = malloc(sizeof *want * (size_t)k.n), *got = malloc(sizeof *got * (size_t)k.n);
        for (int64_t i = 0; i < k.n; i++) x[i] = rand() % 17 == 0 ? NAN : (float)(rand() % 3); /* ties */
        for (int64_t i = 0; i < k.nc * P; i++) dy[i] = (float)rand() / RAND_MAX - 0.5f;
        mpgrad_scatter(&k, x, dy, want);
        for (int64_t i = k.n - 1; i >= 0; i--) pcu_mpgrad_at(&k, got, dy, x, i);
        checks++, cases++;
        for (int cp = 0; cp <= 2; cp++) { /* the average's (2: the window sums', LpPool's): the scatter, written out */
            pcu_apgrad a = k;
            a.max = 0, a.count_pad = cp;
            double *acc = calloc((size_t)k.n, sizeof *acc);
            float *aw = malloc(sizeof *aw * (size_t)k.n), *ag = malloc(sizeof *ag * (size_t)k.n);
            for (int64_t pl = 0; pl < k.nc; pl++)
                for (int64_t o0 = 0, oi = 0; o0 < k.out[0]; o0++)
                    for (int64_t o1 = 0; o1 < k.out[1]; o1++)
                        for (int64_t o2 = 0; o2 < k.out[2]; o2++, oi++) {
                            const int64_t div = pcu_apgrad_div(&a, o0, o1, o2);
                            if (!div) continue;
                            const double v = (double)dy[pl * P + oi] / (double)div;
                            for (int64_t t = 0; t < k.k[0] * k.k[1] * k.k[2]; t++) {
                                const int64_t q0 = o0 * k.s[0] - k.p[0] + t / (k.k[1] * k.k[2]) * k.d[0];
                                const int64_t q1 = o1 * k.s[1] - k.p[1] + t / k.k[2] % k.k[1] * k.d[1];
                                const int64_t q2 = o2 * k.s[2] - k.p[2] + t % k.k[2] * k.d[2];
                                if (q0 < 0 || q0 >= k.in[0] || q1 < 0 || q1 >= k.in[1] || q2 < 0 || q2 >= k.in[2]) continue;
                                acc[pl * Pin + (q0 * k.in[1] + q1) * k.in[2] + q2] += v;
                            }
                        }
            for (int64_t i = 0; i < k.n; i++) aw[i] = (float)acc[i];
            for (int64_t i = k.n - 1; i >= 0; i--) pcu_apgrad_at(&a, ag, dy, i);
            checks++;
            if (memcmp(aw, ag, sizeof *ag * (size_t)k.n))
                FAIL("FAIL average pool gradient (count_pad %d): in %lldx%lldx%lld k %lldx%lldx%lld: not the scatter "
                     "form's bits\n", cp, (long long)k.in[0], (long long)k.in[1], (long long)k.in[2],
                     (long long)k.k[0], (long long)k.k[1], (long long)k.k[2]);
            free(acc), free(aw), free(ag);
        }
        if (memcmp(want, got, sizeof *got * (size_t)k.n))
            FAIL("FAIL max pool gradient: in %lldx%lldx%lld k %lldx%lldx%lld s %lld,%lld,%lld d %lld,%lld,%lld: "
                 "not the scatter form's bits\n",
                 (long long)k.in[0], (long long)k.in[1], (long long)k.in[2], (long long)k.k[0], (long long)k.k[1],
                 (long long)k.k[2], (long long)k.s[0], (long long)k.s[1], (long long)k.s[2], (long long)k.d[0],
                 (long long)k.d[1], (long long)k.d[2]);
        free(x), free(dy), free(want), free(got);
    }
    printf("test_kmath: max and average pool gradients: %d geometries\n", cases);
}

/* Relative difference of a and b in ulps of float near |b| (0 when equal, NaN on both sides included). */
static double rel_ulps(float a, float b) {
    if (a == b || (a != a && b != b)) return 0;
    const double scale = fabs((double)b) > 1e-30 ? fabs((double)b) : 1e-30;
    return fabs((double)a - (double)b) / (scale * 0x1p-23);
}

/* The BatchNorm kernels (a block per channel, run through their kernels.def rows with the lanes in
 * reverse order and the shared memory poisoned) against the reference kernels' functions: their sums
 * meet in a tree, not in the reference's order, so within a few ulps (4; y's and dx's relative to the
 * largest |y| and |dx|: a value near 0 is the difference of two larger ones); run twice, the same bits. */
static void test_bn_grads(void) {
    srand(11);
    double worst = 0;
    for (int c = 0; c < 40; c++) {
        const int64_t N = 1 + rand() % 4, C = 1 + rand() % 5, S = 1 + rand() % (c < 30 ? 30 : 700), n = N * C * S;
        float *x = malloc(sizeof *x * (size_t)n), *dy = malloc(sizeof *dy * (size_t)n);
        float *y1 = malloc(sizeof *y1 * (size_t)n), *y2 = malloc(sizeof *y2 * (size_t)n), *y3 = malloc(sizeof *y3 * (size_t)n);
        float par[4][8], st1[4][8], st2[4][8], g1[2][8], g2[2][8];
        for (int64_t i = 0; i < n; i++) x[i] = 3.0f * rand() / RAND_MAX - 1.0f, dy[i] = (float)rand() / RAND_MAX - 0.5f;
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 8; i++) par[j][i] = j == 3 ? 0.5f + (float)rand() / RAND_MAX : (float)rand() / RAND_MAX;
        float *st[4] = {st1[0], st1[1], st1[2], st1[3]};
        pprt_bn_channels(x, par[0], par[1], par[2], par[3], y1, st, N, C, S, 1e-5f, 0.9f, true, 0, C);
        pcu_step sp;
        memset(&sp, 0, sizeof sp);
        sp.kind = PCU_S_KERNEL, sp.kernel = PCU_K_BNT, sp.threads = C * PCU_BLOCK;
        sp.u.bnt = (pcu_bnt){.N = N, .C = C, .S = S, .eps = 1e-5f, .momentum = 0.9f};
        void *opt[PCU_KERNEL_OPS] = {x, par[0], par[1], par[2], par[3], y2, st2[0], st2[1], st2[2], st2[3]};
        run_block_rows(&sp, opt);
        double d = 0, ymax = 0;
        for (int64_t i = 0; i < n; i++) ymax = fmax(ymax, fabs(y1[i]));
        for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)y2[i] - y1[i]) / (ymax * 0x1p-23));
        for (int j = 0; j < 4; j++)
            for (int64_t ch = 0; ch < C; ch++) d = fmax(d, rel_ulps(st2[j][ch], st1[j][ch]));
        worst = fmax(worst, d);
        checks++;
        if (d > 4)
            FAIL("FAIL batch normalization (training) N %lld C %lld S %lld: %.1f ulps from the reference\n",
                 (long long)N, (long long)C, (long long)S, d);
        for (int training = 0; training <= 1; training++) {
            pprt_bn_grad_channels(dy, x, par[0], par[2], par[3], y1, g1[0], g1[1], N, C, S, 1e-5f, training, 0, C);
            memset(&sp, 0, sizeof sp);
            sp.kind = PCU_S_KERNEL, sp.kernel = PCU_K_BNG, sp.threads = C * PCU_BLOCK;
            sp.u.bng = (pcu_bng){.N = N, .C = C, .S = S, .eps = 1e-5f, .training = training};
            void *opg[PCU_KERNEL_OPS] = {dy, x, par[0], par[2], par[3], y2, g2[0], g2[1]};
            run_block_rows(&sp, opg);
            opg[5] = y3;
            run_block_rows(&sp, opg);
            d = 0, ymax = 0;
            for (int64_t i = 0; i < n; i++) ymax = fmax(ymax, fabs(y1[i]));
            for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)y2[i] - y1[i]) / (ymax * 0x1p-23));
            double gmax[2] = {0, 0};
            for (int j = 0; j < 2; j++)
                for (int64_t ch = 0; ch < C; ch++) gmax[j] = fmax(gmax[j], fabs(g1[j][ch]));
            for (int j = 0; j < 2; j++)
                for (int64_t ch = 0; ch < C; ch++) d = fmax(d, fabs((double)g2[j][ch] - g1[j][ch]) / (gmax[j] * 0x1p-23));
            worst = fmax(worst, d);
            checks += 2;
            if (d > 4)
                FAIL("FAIL batch normalization gradient (training %d) N %lld C %lld S %lld: %.1f ulps from the "
                     "reference\n", training, (long long)N, (long long)C, (long long)S, d);
            if (memcmp(y2, y3, sizeof *y2 * (size_t)n))
                FAIL("FAIL batch normalization gradient: two runs give other bits\n");
        }
        free(x), free(dy), free(y1), free(y2), free(y3);
    }
    printf("test_kmath: batch normalization (training) and its gradient, a block per channel: worst %.2f ulps "
           "from the reference\n", worst);
}

/* pp.LayerNormGrad and pp.InstanceNormGrad: the dX kernel (a block per row) through its kernels.def
 * row, lanes in reverse order, shared memory poisoned, then the dscale/dB kernel's threads in reverse
 * order, against the reference kernels (pprt_ref_kernels): within 4 ulps (dX relative to its largest
 * |dX| per row group, dscale and dB to their largest: a value near 0 is the difference of larger ones);
 * rows of 1 to PCU_ROW_MAX floats (cached in shared memory up to PCU_ROW_MAX / 2), one and several
 * chunks of PCU_LNG_CHUNK rows, a constant row, a row with a NaN (NaN exactly where the reference has
 * it); the same bits run twice. */
static double ng_worst;

static void norm_grad_case(bool inst, int64_t N, int64_t C, int64_t S, int64_t rows, int64_t n) {
    const int64_t ne = inst ? N * C * S : rows * n, np = inst ? C : n;
    if (inst) rows = N * C, n = S;
    float *x = malloc(sizeof *x * (size_t)ne), *dy = malloc(sizeof *dy * (size_t)ne),
          *sc = malloc(sizeof *sc * (size_t)np), *want[3], *got[3], *again = malloc(sizeof *again * (size_t)ne);
    for (int q = 0; q < 3; q++) {
        want[q] = malloc(sizeof(float) * (size_t)(q ? np : ne));
        got[q] = malloc(sizeof(float) * (size_t)(q ? np : ne));
        for (int64_t i = 0; i < (q ? np : ne); i++) got[q][i] = NAN;
    }
    const double shift = 3.0 * unif() - 1.0;
    for (int64_t i = 0; i < ne; i++) {
        x[i] = (float)(shift + 2.0 * unif() - 1.0), dy[i] = (float)(unif() - 0.5);
        if (i / n == 1 && rows > 2) x[i] = 0.75f; /* a constant row: var 0, inv 1/sqrt(eps) */
    }
    const bool nan_row = rows > 4 && rows % 2 == 0; /* a NaN in row 3: its dX and (LayerNorm) every dscale NaN */
    if (nan_row) x[3 * n + n / 2] = NAN;
    for (int64_t i = 0; i < np; i++) sc[i] = (float)(unif() + 0.5);
    /* the reference kernel */
    pprt_tensor tin[3] = {{PP_F32, {2, {rows, n}}, dy}, {PP_F32, {2, {rows, n}}, x}, {PP_F32, {1, {np}}, sc}};
    pprt_tensor tout[3] = {{PP_F32, {2, {rows, n}}, want[0]}, {PP_F32, {1, {np}}, want[1]}, {PP_F32, {1, {np}}, want[2]}};
    if (inst) {
        const pp_shape xs = {3, {N, C, S}};
        tin[0].shape = tin[1].shape = tout[0].shape = xs;
    }
    pp_attr at[2] = {{.name = "epsilon", .type = PP_ATTR_FLOAT, .f = 1e-5f}, {.name = "axis", .type = PP_ATTR_INT, .i = 1}};
    pp_err e = {0};
    pprt_scratch scr = {0};
    if (pprt_ref_kernels[inst ? PP_OP_INSTANCENORMGRAD : PP_OP_LAYERNORMGRAD]((pp_attrs){at, inst ? 1 : 2, 21}, tin, 3,
                                                                               tout, 3, &scr, &e) != PP_OK) {
        FAIL("FAIL normalization gradient: reference: %s\n", e.msg);
        return;
    }
    pprt_scratch_free(&scr);
    /* the kernels, as the planner makes their steps */
    const int64_t chunks = inst ? 0 : (rows + PCU_LNG_CHUNK - 1) / PCU_LNG_CHUNK;
    double *st = malloc(sizeof(double) * (size_t)(4 * rows)), *part = malloc(sizeof(double) * (size_t)(2 * chunks * n + 1));
    for (int64_t i = 0; i < 4 * rows; i++) st[i] = NAN;
    for (int64_t i = 0; i < 2 * chunks * n; i++) part[i] = NAN;
    for (int run = 0; run < 2; run++) {
        pcu_step s;
        memset(&s, 0, sizeof s);
        s.kind = PCU_S_KERNEL, s.kernel = PCU_K_LNG, s.threads = rows * PCU_BLOCK;
        s.u.lng = (pcu_lng){.rows = rows, .n = n, .C = inst ? C : 0, .eps = 1e-5f};
        void *op[PCU_KERNEL_OPS] = {dy, x, sc, run ? again : got[0], st};
        run_block_rows(&s, op);
        for (int ph = inst ? 1 : 0; ph < 2 && !run; ph++) {
            pcu_lngp k = {.phase = ph, .rows = rows, .n = n, .C = inst ? C : 0, .chunks = chunks};
            void *op2[PCU_KERNEL_OPS] = {dy, x, st, part, got[1], got[2]};
            for (int64_t i = (ph ? np : chunks * n) - 1; i >= 0; i--) pcu_kernel_call(PCU_K_LNGP, &k, op2, NULL, i, 0);
        }
    }
    double d = 0;
    int64_t nan_off = 0; /* elements NaN on one side only */
    for (int q = 0; q < 3; q++)
        for (int64_t i = 0; i < (q ? np : ne); i++) nan_off += isnan(got[q][i]) != isnan(want[q][i]);
    for (int64_t g = 0; g < rows; g++) { /* dX relative to its row's largest (NaN apart) */
        double m = 0;
        for (int64_t j = 0; j < n; j++) m = isnan(want[0][g * n + j]) ? m : fmax(m, fabs(want[0][g * n + j]));
        for (int64_t j = 0; j < n; j++)
            if (!isnan(want[0][g * n + j]))
                d = fmax(d, m > 0 ? fabs((double)got[0][g * n + j] - want[0][g * n + j]) / (m * 0x1p-23) : fabs(got[0][g * n + j]));
    }
    for (int q = 1; q < 3; q++) {
        double m = 0;
        for (int64_t i = 0; i < np; i++) m = isnan(want[q][i]) ? m : fmax(m, fabs(want[q][i]));
        for (int64_t i = 0; i < np; i++)
            if (!isnan(want[q][i])) d = fmax(d, fabs((double)got[q][i] - want[q][i]) / (m * 0x1p-23));
    }
    checks++;
    if (nan_off || (nan_row && !isnan(want[0][3 * n])))
        FAIL("FAIL %s gradient %lld rows of %lld: %lld elements NaN on one side only\n", inst ? "instance norm" : "layer norm",
             (long long)rows, (long long)n, (long long)nan_off);
    ng_worst = fmax(ng_worst, d);
    checks += 2;
    if (!(d <= 4))
        FAIL("FAIL %s gradient %lld rows of %lld: %.1f ulps from the reference\n", inst ? "instance norm" : "layer norm",
             (long long)rows, (long long)n, d);
    if (memcmp(got[0], again, sizeof *again * (size_t)ne)) FAIL("FAIL normalization gradient: two runs give other bits\n");
    free(x), free(dy), free(sc), free(again), free(st), free(part);
    for (int q = 0; q < 3; q++) free(want[q]), free(got[q]);
}

static void test_norm_grads(void) {
    static const int64_t ln[][2] = {{1, 1}, {3, 5}, {7, 64}, {70, 33}, {130, 768}, {5, 2049}, {3, PCU_ROW_MAX}, {200, 3}};
    for (size_t c = 0; c < sizeof ln / sizeof *ln; c++) norm_grad_case(false, 0, 0, 0, ln[c][0], ln[c][1]);
    srand(13);
    for (int c = 0; c < 20; c++) norm_grad_case(true, 1 + rand() % 3, 1 + rand() % 5, 1 + rand() % (c < 10 ? 40 : 700), 0, 0);
    printf("test_kmath: layer and instance normalization gradients, a block per row: worst %.2f ulps from the "
           "reference\n", ng_worst);
}

/* pp.SliceGrad's gather (a thread per dX element, in reverse order) against the reference kernel's
 * scatter, bit for bit: ranks 1-4, steps of -3..3 (not 0), dY with NaN and -0. */
static void test_slice_grad(void) {
    int cases = 0;
    for (int c = 0; c < 300; c++) {
        pcu_slgrad k = {.rank = 1 + (int)(next() % 4)};
        pp_shape xs = {k.rank, {0}}, ys = {k.rank, {0}};
        for (int d = 0; d < k.rank; d++) {
            const int64_t X = 1 + (int64_t)(next() % 7);
            int64_t step = 1 + (int64_t)(next() % 3);
            if (next() % 2) step = -step;
            const int64_t start = (int64_t)(next() % (uint64_t)X);
            const int64_t room = step > 0 ? (X - 1 - start) / step + 1 : start / -step + 1;
            xs.dim[d] = k.xd[d] = X, k.start[d] = start, k.step[d] = step;
            ys.dim[d] = k.yd[d] = c % 50 == 7 && d == 0 ? 0 : 1 + (int64_t)(next() % (uint64_t)room);
        }
        k.n = count(&xs), k.ny = count(&ys);
        float *dy = malloc(sizeof(float) * (size_t)(k.ny + 1)), *want = malloc(sizeof(float) * (size_t)k.n),
              *got = malloc(sizeof(float) * (size_t)k.n);
        for (int64_t i = 0; i < k.ny; i++) dy[i] = i % 11 == 3 ? NAN : i % 13 == 5 ? -0.0f : (float)(unif() - 0.5);
        pprt_tensor in = {PP_F32, ys, dy}, out = {PP_F32, xs, want};
        pp_attr at[3] = {{.name = "shape", .type = PP_ATTR_INTS, .ints = xs.dim, .n = k.rank},
                         {.name = "starts", .type = PP_ATTR_INTS, .ints = k.start, .n = k.rank},
                         {.name = "steps", .type = PP_ATTR_INTS, .ints = k.step, .n = k.rank}};
        pp_err e = {0};
        if (pprt_ref_kernels[PP_OP_SLICEGRAD]((pp_attrs){at, 3, 21}, &in, 1, &out, 1, NULL, &e) != PP_OK) {
            FAIL("FAIL slice gradient: reference: %s\n", e.msg);
        } else {
            for (int64_t i = k.n - 1; i >= 0; i--) pcu_slgrad_at(&k, got, dy, i);
            checks++, cases++;
            if (memcmp(want, got, sizeof *got * (size_t)k.n)) FAIL("FAIL slice gradient: case %d: not the reference's bits\n", c);
        }
        free(dy), free(want), free(got);
    }
    printf("test_kmath: slice gradient: %d cases\n", cases);
}

/* pp.ResizeGrad's gather (a thread per dX element, in reverse order) against the reference kernel's
 * transposed passes, bit for bit: 1-D and 2-D resizes of [N, C, L] and [N, C, H, W], up and down,
 * nearest (each rounding), linear and cubic, every coordinate transform (tf_crop_and_resize with its
 * roi forwards and backwards), exclude_outside, antialias, scales and sizes, dY with NaN and -0; the
 * parameter block as the planner makes it (pcu_resize_block), cases it leaves to the host skipped. */
static void test_resize_grad(void) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"};
    static const char *const nmodes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const float scales_of[] = {0.5f, 0.6f, 0.75f, 1.5f, 2.0f, 2.5f, 3.0f, 1.3f};
    int cases = 0, two = 0;
    for (int c = 0; c < 600; c++) {
        const int mode = (int)(next() % 3), coord = (int)(next() % 7), rank = next() % 3 ? 4 : 3;
        const bool sizes = coord == 5 || next() % 2;
        pp_shape xs = {rank, {1 + (int64_t)(next() % 2), 1 + (int64_t)(next() % 2)}};
        for (int d = 2; d < rank; d++) xs.dim[d] = 1 + (int64_t)(next() % 9);
        float sc[4], roi[8];
        int64_t sz[4];
        for (int d = 0; d < rank; d++) {
            const bool rs = d >= 2 && (next() % 4 != 0);
            sc[d] = rs ? scales_of[next() % 8] : 1.0f;
            sz[d] = rs ? 1 + (int64_t)(next() % 12) : xs.dim[d];
            roi[d] = rs && coord == 5 ? (float)unif() : 0.0f, roi[rank + d] = rs && coord == 5 ? (float)unif() : 1.0f;
        }
        pp_attr at[8];
        int na = 0;
        at[na++] = (pp_attr){.name = "mode", .type = PP_ATTR_STRING, .s = modes[mode]};
        at[na++] = (pp_attr){.name = "coordinate_transformation_mode", .type = PP_ATTR_STRING, .s = coords[coord]};
        at[na++] = (pp_attr){.name = "nearest_mode", .type = PP_ATTR_STRING, .s = nmodes[next() % 4]};
        at[na++] = (pp_attr){.name = "exclude_outside", .type = PP_ATTR_INT, .i = (int64_t)(next() % 2)};
        at[na++] = (pp_attr){.name = "antialias", .type = PP_ATTR_INT, .i = (int64_t)(next() % 2)};
        at[na++] = (pp_attr){.name = "extrapolation_value", .type = PP_ATTR_FLOAT, .f = 0.25f};
        at[na++] = (pp_attr){.name = "shape", .type = PP_ATTR_INTS, .ints = xs.dim, .n = rank};
        const pp_attrs a = {at, na, coord == 6 ? 12 : 19};
        const pp_shape none = {1, {0}}, vec = {1, {rank}}, rois = {1, {coord == 5 ? 2 * rank : 0}};
        pp_tinfo tin[4] = {{PP_F32, xs, NULL}, {PP_F32, rois, roi}, {PP_F32, sizes ? none : vec, sc},
                           {PP_I64, sizes ? vec : none, sz}};
        pp_resize r;
        if (pp_resize_parse(a, tin, 4, &r, NULL) != PP_OK) continue;
        pp_shape ys = {rank, {0}};
        for (int d = 0; d < rank; d++) ys.dim[d] = r.out[d];
        pcu_rsgrad k;
        if (count(&ys) == 0 || !pcu_resize_block(a, tin, 4, &xs, &ys, &k) || k.a < 0) continue;
        k.n = count(&xs);
        float *dy = malloc(sizeof(float) * (size_t)count(&ys)), *want = malloc(sizeof(float) * (size_t)k.n),
              *got = malloc(sizeof(float) * (size_t)k.n);
        for (int64_t i = 0; i < count(&ys); i++)
            dy[i] = c % 9 == 4 && i % 17 == 3 ? NAN : i % 13 == 5 ? -0.0f : (float)(unif() - 0.5);
        pprt_tensor in[4] = {{PP_F32, ys, dy}, {PP_F32, rois, roi}, {PP_F32, sizes ? none : vec, sc},
                             {PP_I64, sizes ? vec : none, sz}};
        pprt_tensor out = {PP_F32, xs, want};
        pp_err e = {0};
        pprt_scratch scr = {0};
        if (pprt_ref_kernels[PP_OP_RESIZEGRAD](a, in, 4, &out, 1, &scr, &e) != PP_OK) {
            FAIL("FAIL resize gradient: reference: %s\n", e.msg);
        } else {
            for (int64_t i = k.n - 1; i >= 0; i--) pcu_rsgrad_at(&k, got, dy, i);
            checks++, cases++, two += k.b >= 0;
            if (memcmp(want, got, sizeof *got * (size_t)k.n))
                FAIL("FAIL resize gradient: case %d (%s, %s, axes %d %d): not the reference's bits\n", c, modes[mode],
                     coords[coord], k.a, k.b);
        }
        pprt_scratch_free(&scr);
        free(dy), free(want), free(got);
    }
    printf("test_kmath: resize gradient: %d cases (%d over two axes)\n", cases, two);
}

/* pp.GridSampleGrad's two phases (a thread per dX plane, in reverse order, its sums in a buffer of its own;
 * a thread per dgrid point) against the reference kernel, bit for bit: 1 to 3 spatial axes, linear, nearest
 * and cubic, zeros, border and reflection padding, both corner alignments, points inside and outside, far
 * outside, NaN and infinite coordinates; dY with NaN and -0. The parameter block as plan_gridsample_grad makes
 * it. */
static void test_gridsample_grad(void) {
    static const char *const modes[] = {"linear", "nearest", "cubic"}, *const pads[] = {"zeros", "border", "reflection"};
    int cases = 0;
    for (int c = 0; c < 240; c++) {
        const int kk = 1 + c % 3, mode = (c / 3) % 3, pad = (c / 9) % 3, align = (c / 27) % 2;
        pcu_gsgrad k = {.g = {.mode = mode, .pad = pad, .align = align, .k = kk, .C = 1 + (int64_t)(next() % 3),
                              .P = 1, .S = 1, .n = 1 + (int64_t)(next() % 2), .in = {1, 1, 1}}};
        pp_shape xs = {2 + kk, {k.g.n, k.g.C}}, ys = {2 + kk, {k.g.n, k.g.C}}, gs = {2 + kk, {k.g.n}};
        for (int d = 0; d < kk; d++) {
            xs.dim[2 + d] = k.g.in[d] = 1 + (int64_t)(next() % 5);
            ys.dim[2 + d] = gs.dim[1 + d] = 1 + (int64_t)(next() % 4);
            k.g.S *= xs.dim[2 + d], k.g.P *= ys.dim[2 + d];
        }
        gs.dim[1 + kk] = kk;
        const int64_t nx = count(&xs), ny = count(&ys), ng = count(&gs);
        float *x = malloc(sizeof(float) * (size_t)nx), *dy = malloc(sizeof(float) * (size_t)ny),
              *grid = malloc(sizeof(float) * (size_t)ng), *want = malloc(sizeof(float) * (size_t)(nx + ng)),
              *got = malloc(sizeof(float) * (size_t)(nx + ng));
        double *acc = malloc(sizeof(double) * (size_t)nx);
        for (int64_t i = 0; i < nx; i++) x[i] = (float)(unif() * 4 - 2);
        for (int64_t i = 0; i < ny; i++) dy[i] = i % 17 == 9 ? NAN : i % 13 == 5 ? -0.0f : (float)(unif() - 0.5);
        for (int64_t i = 0; i < ng; i++) {
            const uint64_t r = next() % 40;
            grid[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -30.5f : r == 3 ? 1e7f : (float)(unif() * 2.8 - 1.4);
        }
        pprt_tensor in[3] = {{PP_F32, ys, dy}, {PP_F32, xs, x}, {PP_F32, gs, grid}};
        pprt_tensor out[2] = {{PP_F32, xs, want}, {PP_F32, gs, want + nx}};
        pp_attr at[3] = {{.name = "mode", .type = PP_ATTR_STRING, .s = modes[mode]},
                         {.name = "padding_mode", .type = PP_ATTR_STRING, .s = pads[pad]},
                         {.name = "align_corners", .type = PP_ATTR_INT, .i = align}};
        pp_err e = {0};
        pprt_scratch sc = {0};
        if (pprt_ref_kernels[PP_OP_GRIDSAMPLEGRAD]((pp_attrs){at, 3, 22}, in, 3, out, 2, &sc, &e) != PP_OK) {
            FAIL("FAIL grid sample gradient: reference: %s\n", e.msg);
        } else {
            memset(got, 0x7f, sizeof(float) * (size_t)(nx + ng));
            k.phase = 0;
            for (int64_t i = k.g.n * k.g.C - 1; i >= 0; i--) pcu_gsgrad_at(&k, got, got + nx, acc, dy, x, grid, i);
            k.phase = 1;
            for (int64_t i = k.g.n * k.g.P - 1; i >= 0; i--) pcu_gsgrad_at(&k, got, got + nx, acc, dy, x, grid, i);
            checks++, cases++;
            if (memcmp(want, got, sizeof(float) * (size_t)(nx + ng)))
                FAIL("FAIL grid sample gradient: case %d (%d axes, %s, %s, align %d): not the reference's bits\n", c,
                     kk, modes[mode], pads[pad], align);
        }
        pprt_scratch_free(&sc);
        free(x), free(dy), free(grid), free(want), free(got), free(acc);
    }
    printf("test_kmath: grid sample gradient: %d cases\n", cases);
}

/* A half plan's saturating Cast (ppcc's pp_finite; kind EW, CAST with mode 8) against the reference Cast with
 * the attribute: the same bits, and f32's largest and the values past fp16's range at the type's largest
 * finite, infinities and NaN kept. */
static void test_half_finite(void) {
    static const float v[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e5f, 3.3895313e38f,
                              3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY, NAN, 1e-8f, -3.0e38f};
    enum { N = sizeof v / sizeof v[0] };
    for (int t = PCU_T_F16; t != 0; t = t == PCU_T_F16 ? PCU_T_BF16 : 0) {
        const pp_shape sh = {1, {N}};
        const pp_shape *sp[1] = {&sh};
        pcu_ew k;
        pcu_ew_make(PCU_EW_CAST, 1, sp, &sh, PCU_T_F32, t, 0, 0, 8, &k);
        uint16_t got[N], want[N];
        for (int64_t i = N - 1; i >= 0; i--) pcu_ew_at(&k, got, v, NULL, NULL, i);
        pp_attr at[2] = {{.name = "to", .type = PP_ATTR_INT, .i = t},
                         {.name = "pp_finite", .type = PP_ATTR_INT, .i = 1}};
        pprt_tensor in = {PP_F32, sh, (void *)v}, out = {(pp_dtype)t, sh, want};
        pp_err e = {0};
        pprt_scratch scr = {0};
        checks++;
        if (pprt_ref_kernels[PP_OP_CAST]((pp_attrs){at, 2, 21}, &in, 1, &out, 1, &scr, &e) != PP_OK) {
            FAIL("FAIL pp_finite Cast: reference: %s\n", e.msg);
            continue;
        }
        pprt_scratch_free(&scr);
        const uint16_t big = t == PCU_T_F16 ? 0x7bffu : 0x7f7fu, inf = t == PCU_T_F16 ? 0x7c00u : 0x7f80u;
        for (int i = 0; i < N; i++) {
            checks += 2;
            if (got[i] != want[i])
                FAIL("FAIL pp_finite Cast to %d: %g: 0x%04x, the reference 0x%04x\n", t, v[i], got[i], want[i]);
            const bool past = isfinite(v[i]) && fabsf(v[i]) >= (t == PCU_T_F16 ? 65520.0f : 3.3961e38f);
            if (past && (got[i] & 0x7fffu) != big) FAIL("FAIL pp_finite Cast to %d: %g not saturated\n", t, v[i]);
            if (isinf(v[i]) && (got[i] & 0x7fffu) != inf) FAIL("FAIL pp_finite Cast to %d: %g not kept\n", t, v[i]);
        }
    }
}

int main(void) {
    test_kernel_table();
    test_half_finite();
    test_conversions();
    test_trig();
    test_elementwise();
    test_elementwise_wide();
    test_optimizer();
    test_optimizer_passes();
    test_rows();
    test_block_rows();
    test_half_rows();
    printf("test_kmath: rows in one block: worst %lld ulp (Softmax), %lld (LogSoftmax, LayerNorm)\n", (long long)block_worst[1], (long long)block_worst[0]);
    test_index_math();
    test_maxpool_grad();
    test_nhwc();
    test_bn_grads();
    test_fattn();
    printf("test_kmath: fused attention: worst error %.2g of the largest |V|\n", fa_worst);
    test_norm_grads();
    test_slice_grad();
    test_resize_grad();
    test_gridsample_grad();
    printf("test_kmath: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
