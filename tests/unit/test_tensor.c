/* test_tensor.c: the tensor family (ir/shape_tensor.c shape functions and
 * runtime/cpu/ref_tensor.c kernels) on the cases the ONNX node tests do not
 * reach: clamping at INT64_MIN/MAX, negative steps, periodic reflect and wrap
 * padding, uneven splits, huge Trilu k, Range at the int64 extremes, ScatterND
 * (negative and repeated index tuples, whole-row slices, wrapping and NaN
 * reductions, rejected types and shapes), element
 * types of every size (16-byte elements included), an index out of range at
 * run time, and the messages of rejected attributes.
 *
 * Every expected value is written out by hand here (or follows from a
 * one-line formula), never computed by the code under test.
 * Exit status 0 when everything passes, 1 otherwise (each failure is printed). */
#include "ir/op_fns.h"
#include "runtime/kernels.h"

#include <math.h> /* NAN */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NARG(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SHAPE(...) ((pp_shape){.rank = NARG(__VA_ARGS__), .dim = {__VA_ARGS__}})
#define SCALAR ((pp_shape){.rank = 0})

/* ---- attributes ----------------------------------------------------------------- */

static pp_attr A_INT(const char *name, int64_t v) {
    return (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v};
}
static pp_attr A_STR(const char *name, const char *s) {
    return (pp_attr){.name = name, .type = PP_ATTR_STRING, .s = s};
}
static pp_attr A_INTS(const char *name, const int64_t *v, int n) {
    return (pp_attr){.name = name, .type = PP_ATTR_INTS, .ints = v, .n = n};
}

/* ---- tensors: every input carries its bytes (constants at compile time) ------------ */

typedef struct {
    pp_dtype t;
    pp_shape s;
    const void *data;
} tin;

#define T_I64(shape, ...) ((tin){PP_I64, shape, (const int64_t[]){__VA_ARGS__}})
#define T_F32(shape, ...) ((tin){PP_F32, shape, (const float[]){__VA_ARGS__}})

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

enum { MAX_OUT = 4 };
static pprt_tensor outs[MAX_OUT];
static int n_outs;
static pprt_scratch scratch;

static void free_outs(void) {
    for (int i = 0; i < n_outs; i++) free(outs[i].data);
    n_outs = 0;
}

/* Infer and run op; fills outs[0..n_out). Returns the first failing status
 * (shape function or kernel) and its message in *err. */
/* false: the shape function sees no input's bytes (as for values computed at run time) */
static bool shape_sees_data = true;

static pp_status run(pp_op op, int opset, const pp_attr *at, int n_at, const tin *in, int n_in,
                     int n_out, pp_err *err) {
    free_outs();
    pp_attrs as = {at, n_at, opset};
    pp_tinfo ti[8], to[MAX_OUT];
    pprt_tensor tk[8];
    for (int i = 0; i < n_in; i++) {
        ti[i] = (pp_tinfo){in[i].t, in[i].s, shape_sees_data ? in[i].data : NULL};
        tk[i] = (pprt_tensor){in[i].t, in[i].s, (void *)in[i].data};
    }
    memset(err, 0, sizeof *err);
    PP_TRY(pp_infer(op, as, ti, n_in, to, n_out, err));
    for (int k = 0; k < n_out; k++) {
        size_t nb = (size_t)numel(&to[k].shape) * pp_dtype_size(to[k].dtype);
        outs[k] = (pprt_tensor){to[k].dtype, to[k].shape, malloc(nb ? nb : 1)};
        memset(outs[k].data, 0xA5, nb); /* garbage the kernel must overwrite */
        n_outs++;
    }
    return pprt_ref_kernels[op](as, tk, n_in, outs, n_out, &scratch, err);
}

static void expect_ok(pp_status s, const pp_err *e) {
    CHECK(s == PP_OK, "unexpected failure: %s: %s", pp_status_name(s), e->msg);
}

static void expect_shape(int k, pp_shape want) {
    char a[128], b[128];
    CHECK(k < n_outs && pp_shape_eq(&outs[k].shape, &want), "output %d has shape %s, expected %s",
          k, k < n_outs ? pp_shape_str(&outs[k].shape, a, sizeof a) : "-",
          pp_shape_str(&want, b, sizeof b));
}

static void expect_i64(int k, const int64_t *want, int n) {
    if (k >= n_outs || outs[k].dtype != PP_I64 || numel(&outs[k].shape) != n) {
        CHECK_FAIL("output %d: not %d int64 values", k, n);
        return;
    }
    const int64_t *g = outs[k].data;
    for (int i = 0; i < n; i++)
        CHECK(g[i] == want[i], "output %d[%d] = %lld, expected %lld", k, i, (long long)g[i],
              (long long)want[i]);
}

static void expect_f32(int k, const float *want, int n) {
    if (k >= n_outs || outs[k].dtype != PP_F32 || numel(&outs[k].shape) != n) {
        CHECK_FAIL("output %d: not %d f32 values", k, n);
        return;
    }
    const float *g = outs[k].data;
    for (int i = 0; i < n; i++)
        CHECK(g[i] == want[i], "output %d[%d] = %g, expected %g", k, i, g[i], want[i]);
}

/* The run fails with `code` and a message containing `frag`. */
static void expect_fail(pp_status s, const pp_err *e, pp_status code, const char *frag) {
    CHECK(s == code, "status %s, expected %s (%s)", pp_status_name(s), pp_status_name(code), e->msg);
    CHECK(strstr(e->msg, frag) != NULL, "message '%s' lacks '%s'", e->msg, frag);
}

#define I64S(...) (const int64_t[]){__VA_ARGS__}, NARG(__VA_ARGS__)
#define F32S(...) (const float[]){__VA_ARGS__}, (int)(sizeof((float[]){__VA_ARGS__}) / sizeof(float))

/* ---- cases ------------------------------------------------------------------------- */

static void test_slice(void) {
    pp_err e;
    pp_status s;
    const tin x = T_I64(SHAPE(5), 0, 1, 2, 3, 4);
    check_case = "Slice backwards from the end to INT64_MIN, step -2";
    s = run(PP_OP_SLICE, 13, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1), -1), T_I64(SHAPE(1), INT64_MIN), T_I64(SHAPE(1), 0),
                    T_I64(SHAPE(1), -2)}, 5, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(4, 2, 0));
    check_case = "Slice start past the end with a negative step is clamped to the last element";
    s = run(PP_OP_SLICE, 13, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1), 100), T_I64(SHAPE(1), 1), T_I64(SHAPE(1), 0),
                    T_I64(SHAPE(1), -3)}, 5, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(4));
    check_case = "Slice with steps INT64_MAX and INT64_MIN takes one element";
    s = run(PP_OP_SLICE, 13, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1), 1), T_I64(SHAPE(1), INT64_MAX), T_I64(SHAPE(1), -1),
                    T_I64(SHAPE(1), INT64_MAX)}, 5, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(1));
    s = run(PP_OP_SLICE, 13, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1), 3), T_I64(SHAPE(1), INT64_MIN), T_I64(SHAPE(1), 0),
                    T_I64(SHAPE(1), INT64_MIN)}, 5, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(3));
    check_case = "Slice opset 9: attributes, 2-D";
    const tin m = T_I64(SHAPE(3, 4), 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23);
    pp_attr at[] = {A_INTS("starts", I64S(1, -1)), A_INTS("ends", I64S(1000, 0)),
                    A_INTS("axes", I64S(0, 1))};
    s = run(PP_OP_SLICE, 9, at, 2, &m, 1, 1, &e); /* no axes: 0, 1 */
    expect_ok(s, &e);
    expect_shape(0, SHAPE(2, 0));
    check_case = "Slice opset 13: step 0 is rejected";
    s = run(PP_OP_SLICE, 13, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1), 0), T_I64(SHAPE(1), 5), T_I64(SHAPE(1), 0),
                    T_I64(SHAPE(1), 0)}, 5, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "'steps'[0] is 0");
    check_case = "Slice opset 13: the starts must be constant";
    tin var = {PP_I64, SHAPE(1), NULL};
    s = run(PP_OP_SLICE, 13, NULL, 0, (tin[]){x, var, T_I64(SHAPE(1), 5)}, 3, 1, &e);
    expect_fail(s, &e, PP_EUNSUP, "constant known at compile time");
}

static void test_pad(void) {
    pp_err e;
    pp_status s;
    const tin x = T_F32(SHAPE(3), 1, 2, 3);
    check_case = "Pad reflect beyond the input's length (periodic, as NumPy)";
    pp_attr refl = A_STR("mode", "reflect");
    s = run(PP_OP_PAD, 13, &refl, 1, (tin[]){x, T_I64(SHAPE(2), 5, 5)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2));
    check_case = "Pad wrap beyond the input's length";
    pp_attr wrap = A_STR("mode", "wrap");
    s = run(PP_OP_PAD, 19, &wrap, 1, (tin[]){x, T_I64(SHAPE(2), 4, 2)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(3, 1, 2, 3, 1, 2, 3, 1, 2));
    check_case = "Pad edge";
    pp_attr edge = A_STR("mode", "edge");
    s = run(PP_OP_PAD, 13, &edge, 1, (tin[]){x, T_I64(SHAPE(2), 2, 1)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(1, 1, 1, 2, 3, 3));
    check_case = "Pad constant with negative pads crops";
    s = run(PP_OP_PAD, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(2), -1, 2), T_F32(SCALAR, 7)}, 3, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(2, 3, 7, 7));
    check_case = "Pad opset 18 axes: only the last axis of a [2,2]";
    s = run(PP_OP_PAD, 18, NULL, 0,
            (tin[]){T_F32(SHAPE(2, 2), 1, 2, 3, 4), T_I64(SHAPE(2), 1, 0),
                    (tin){PP_UNDEFINED, {0}, NULL}, T_I64(SHAPE(1), -1)}, 4, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(0, 1, 2, 0, 3, 4));
    check_case = "Pad opset 2: attribute pads and value";
    pp_attr old[] = {A_INTS("pads", I64S(1, 0)), {.name = "value", .type = PP_ATTR_FLOAT, .f = 9}};
    s = run(PP_OP_PAD, 9, old, 2, &x, 1, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(9, 1, 2, 3));
    check_case = "Pad reflect with negative pads is rejected";
    s = run(PP_OP_PAD, 13, &refl, 1, (tin[]){x, T_I64(SHAPE(2), -1, 1)}, 2, 1, &e);
    expect_fail(s, &e, PP_EUNSUP, "negative 'pads' with mode 'reflect'");
    check_case = "Pad with an unknown mode is rejected";
    pp_attr bad = A_STR("mode", "mirror");
    s = run(PP_OP_PAD, 13, &bad, 1, (tin[]){x, T_I64(SHAPE(2), 1, 1)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "attribute 'mode'='mirror'");
}

static void test_split(void) {
    pp_err e;
    pp_status s;
    const tin x = T_I64(SHAPE(7), 0, 1, 2, 3, 4, 5, 6);
    check_case = "Split opset 18 num_outputs=3 of 7: 3, 3, 1";
    pp_attr num = A_INT("num_outputs", 3);
    s = run(PP_OP_SPLIT, 18, &num, 1, &x, 1, 3, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 1, 2));
    expect_i64(1, I64S(3, 4, 5));
    expect_i64(2, I64S(6));
    check_case = "Split opset 13 of 7 into 2 equal parts is rejected";
    s = run(PP_OP_SPLIT, 13, NULL, 0, &x, 1, 2, &e);
    expect_fail(s, &e, PP_EINVAL, "cannot be split into 2 equal parts");
    check_case = "Split opset 11: attribute split, axis -1, 2-D";
    pp_attr at[] = {A_INT("axis", -1), A_INTS("split", I64S(1, 0, 2))};
    s = run(PP_OP_SPLIT, 11, at, 2, (tin[]){T_I64(SHAPE(2, 3), 0, 1, 2, 10, 11, 12)}, 1, 3, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 10));
    expect_shape(1, SHAPE(2, 0));
    expect_i64(2, I64S(1, 2, 11, 12));
    check_case = "Split opset 13: split input summing to the wrong size";
    s = run(PP_OP_SPLIT, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(2), 3, 3)}, 2, 2, &e);
    expect_fail(s, &e, PP_EINVAL, "'split' sums to 6");
}

static void test_gather(void) {
    pp_err e;
    pp_status s;
    const tin x = T_I64(SHAPE(2, 3), 0, 1, 2, 10, 11, 12);
    check_case = "Gather axis 1 with negative and int32 indices";
    pp_attr ax = A_INT("axis", 1);
    s = run(PP_OP_GATHER, 13, &ax, 1, (tin[]){x, {PP_I32, SHAPE(2), (const int32_t[]){-1, 0}}}, 2,
            1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(2, 0, 12, 10));
    check_case = "Gather: a constant index out of range fails shape inference";
    s = run(PP_OP_GATHER, 13, &ax, 1, (tin[]){x, T_I64(SHAPE(1), 3)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "constant input 'indices' holds 3 (element 0), out of range for axis 1 of size 3");
    check_case = "Gather: an index out of range fails at run time";
    shape_sees_data = false; /* indices computed at run time */
    s = run(PP_OP_GATHER, 13, &ax, 1, (tin[]){x, T_I64(SHAPE(1), 3)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "index 3 (at 0) is out of range [-3, 3)");
    shape_sees_data = true;
    check_case = "GatherElements: a constant index out of range fails shape inference";
    s = run(PP_OP_GATHERELEMENTS, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(1, 2), 0, -3)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "constant input 'indices' holds -3 (element 1), out of range for axis 0 of size 2");
    check_case = "GatherElements: an index out of range fails at run time";
    shape_sees_data = false;
    s = run(PP_OP_GATHERELEMENTS, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(1, 2), 0, -3)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "index -3 (at 1) is out of range [-2, 2)");
    shape_sees_data = true;
    check_case = "GatherElements axis 0";
    s = run(PP_OP_GATHERELEMENTS, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(2, 2), 1, 0, -1, 1)}, 2, 1,
            &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(10, 1, 10, 11));
    check_case = "Gather: float indices are rejected";
    s = run(PP_OP_GATHER, 13, NULL, 0, (tin[]){x, T_F32(SHAPE(1), 0)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "input 'indices' must be int64 or int32");
}

static void test_scatternd(void) {
    pp_err e;
    pp_status s;
    const tin x = T_I64(SHAPE(2, 3), 0, 1, 2, 10, 11, 12);
    check_case = "ScatterND: element updates, negative index, repeated tuple (the last wins)";
    s = run(PP_OP_SCATTERND, 16, NULL, 0,
            (tin[]){x, T_I64(SHAPE(3, 2), 0, -1, 1, 0, 0, 2), T_I64(SHAPE(3), 7, 8, 9)}, 3, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 1, 9, 8, 11, 12));
    check_case = "ScatterND: row updates (k < rank) with int32 indices";
    s = run(PP_OP_SCATTERND, 13, NULL, 0,
            (tin[]){x, {PP_I32, SHAPE(1, 1), (const int32_t[]){-1}}, T_I64(SHAPE(1, 3), 5, 6, 7)},
            3, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 1, 2, 5, 6, 7));
    check_case = "ScatterND add on int8 wraps, repeated tuples accumulate";
    pp_attr add = A_STR("reduction", "add");
    s = run(PP_OP_SCATTERND, 16, &add, 1,
            (tin[]){{PP_I8, SHAPE(2), (const int8_t[]){120, -5}}, T_I64(SHAPE(3, 1), 0, 0, 1),
                    {PP_I8, SHAPE(3), (const int8_t[]){5, 10, 3}}}, 3, 1, &e);
    expect_ok(s, &e);
    if (n_outs == 1 && outs[0].dtype == PP_I8) {
        const int8_t *g = outs[0].data;
        CHECK(g[0] == -121 && g[1] == -2, "got %d %d, expected -121 -2", g[0], g[1]);
    }
    check_case = "ScatterND max keeps a NaN in data and takes one from updates";
    pp_attr mx = A_STR("reduction", "max");
    s = run(PP_OP_SCATTERND, 18, &mx, 1,
            (tin[]){T_F32(SHAPE(3), 1, NAN, 5), T_I64(SHAPE(3, 1), 0, 1, 2), T_F32(SHAPE(3), 4, 9, NAN)},
            3, 1, &e);
    expect_ok(s, &e);
    if (n_outs == 1) {
        const float *g = outs[0].data;
        CHECK(g[0] == 4 && g[1] != g[1] && g[2] != g[2], "got %g %g %g", g[0], g[1], g[2]);
    }
    check_case = "ScatterND mul and min";
    pp_attr mu = A_STR("reduction", "mul"), mn = A_STR("reduction", "min");
    s = run(PP_OP_SCATTERND, 16, &mu, 1, (tin[]){x, T_I64(SHAPE(1, 1), 1), T_I64(SHAPE(1, 3), 2, -1, 0)},
            3, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 1, 2, 20, -11, 0));
    s = run(PP_OP_SCATTERND, 18, &mn, 1, (tin[]){x, T_I64(SHAPE(2, 2), 0, 0, 1, 2), T_I64(SHAPE(2), -4, 30)},
            3, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(-4, 1, 2, 10, 11, 12));
    check_case = "ScatterND: an index out of range fails at run time";
    s = run(PP_OP_SCATTERND, 16, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1, 2), 1, 3), T_I64(SHAPE(1), 0)}, 3, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "index 3 (tuple 0, position 1) is out of range [-3, 3)");
    check_case = "ScatterND: updates of the wrong shape";
    s = run(PP_OP_SCATTERND, 16, NULL, 0,
            (tin[]){x, T_I64(SHAPE(2, 1), 0, 1), T_I64(SHAPE(2, 2), 0, 0, 0, 0)}, 3, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "has shape [2,2], expected [2,3]");
    check_case = "ScatterND: index tuples longer than the data's rank";
    s = run(PP_OP_SCATTERND, 16, NULL, 0,
            (tin[]){x, T_I64(SHAPE(1, 3), 0, 0, 0), T_I64(SHAPE(1), 0)}, 3, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "more than the data's rank 2");
    check_case = "ScatterND: unknown reduction, reduction on float16";
    pp_attr bad = A_STR("reduction", "avg");
    s = run(PP_OP_SCATTERND, 18, &bad, 1, (tin[]){x, T_I64(SHAPE(1, 2), 0, 0), T_I64(SHAPE(1), 0)},
            3, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "'reduction'='avg'");
    s = run(PP_OP_SCATTERND, 16, &add, 1,
            (tin[]){{PP_F16, SHAPE(2), (const uint16_t[]){0x3c00, 0x3c00}}, T_I64(SHAPE(1, 1), 0),
                    {PP_F16, SHAPE(1), (const uint16_t[]){0x3c00}}}, 3, 1, &e);
    expect_fail(s, &e, PP_EUNSUP, "reduction 'add' on element type f16");
    check_case = "ScatterND: reduction none on float16 moves bytes";
    s = run(PP_OP_SCATTERND, 16, NULL, 0,
            (tin[]){{PP_F16, SHAPE(2), (const uint16_t[]){0x3c00, 0x3c00}}, T_I64(SHAPE(1, 1), 1),
                    {PP_F16, SHAPE(1), (const uint16_t[]){0xc000}}}, 3, 1, &e);
    expect_ok(s, &e);
    if (n_outs == 1) {
        const uint16_t *g = outs[0].data;
        CHECK(g[0] == 0x3c00 && g[1] == 0xc000, "got 0x%04x 0x%04x", g[0], g[1]);
    }
}

static void test_trilu_range(void) {
    pp_err e;
    pp_status s;
    const tin x = T_I64(SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
    check_case = "Trilu upper with k = INT64_MAX zeroes everything";
    s = run(PP_OP_TRILU, 14, NULL, 0, (tin[]){x, T_I64(SCALAR, INT64_MAX)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(0, 0, 0, 0, 0, 0));
    check_case = "Trilu upper with k = INT64_MIN keeps everything";
    s = run(PP_OP_TRILU, 14, NULL, 0, (tin[]){x, T_I64(SCALAR, INT64_MIN)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(1, 2, 3, 4, 5, 6));
    check_case = "Trilu lower with k = 1";
    pp_attr lo = A_INT("upper", 0);
    s = run(PP_OP_TRILU, 14, &lo, 1, (tin[]){x, T_I64(SCALAR, 1)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(1, 2, 0, 4, 5, 6));
    check_case = "Range at the int64 extremes";
    const int64_t q = (int64_t)1 << 62;
    s = run(PP_OP_RANGE, 11, NULL, 0,
            (tin[]){T_I64(SCALAR, INT64_MIN), T_I64(SCALAR, INT64_MAX), T_I64(SCALAR, q)}, 3, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(INT64_MIN, -q, 0, q));
    check_case = "Range float, fractional delta";
    s = run(PP_OP_RANGE, 11, NULL, 0,
            (tin[]){T_F32(SCALAR, 1), T_F32(SCALAR, 2), T_F32(SCALAR, 0.25f)}, 3, 1, &e);
    expect_ok(s, &e);
    expect_f32(0, F32S(1, 1.25f, 1.5f, 1.75f));
    check_case = "Range: delta 0 is rejected";
    s = run(PP_OP_RANGE, 11, NULL, 0,
            (tin[]){T_I64(SCALAR, 0), T_I64(SCALAR, 3), T_I64(SCALAR, 0)}, 3, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "input 'delta' is 0");
}

/* Element types of 1, 2, 8 and 16 bytes through the byte-generic kernels. */
static void test_dtypes(void) {
    pp_err e;
    pp_status s;
    check_case = "Transpose of 16-byte elements";
    uint64_t c[12];
    for (int i = 0; i < 12; i++) c[i] = 0x1111111111111111ULL * (uint64_t)(i / 2) + (uint64_t)(i % 2);
    pp_attr perm = A_INTS("perm", I64S(1, 0));
    s = run(PP_OP_TRANSPOSE, 13, &perm, 1, (tin[]){{PP_C128, SHAPE(2, 3), c}}, 1, 1, &e);
    expect_ok(s, &e);
    const uint64_t *o = n_outs ? outs[0].data : NULL;
    static const int order[6] = {0, 3, 1, 4, 2, 5}; /* element (j, i) of the [2,3] input */
    for (int i = 0; o && i < 6; i++)
        CHECK(!memcmp(o + 2 * i, c + 2 * order[i], 16), "element %d moved wrong", i);
    check_case = "Tile of bool";
    s = run(PP_OP_TILE, 13, NULL, 0,
            (tin[]){{PP_BOOL, SHAPE(2), (const uint8_t[]){1, 0}}, T_I64(SHAPE(1), 3)}, 2, 1, &e);
    expect_ok(s, &e);
    CHECK(n_outs && !memcmp(outs[0].data, (const uint8_t[]){1, 0, 1, 0, 1, 0}, 6), "wrong tiles");
    check_case = "Expand of f16 from [3,1] to [2,3,2]";
    const uint16_t h[3] = {0x3c00, 0x4000, 0x4200}; /* 1, 2, 3 */
    s = run(PP_OP_EXPAND, 13, NULL, 0, (tin[]){{PP_F16, SHAPE(3, 1), h}, T_I64(SHAPE(3), 2, 1, 2)},
            2, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(2, 3, 2));
    const uint16_t *ho = n_outs ? outs[0].data : NULL;
    for (int i = 0; ho && i < 12; i++) CHECK(ho[i] == h[(i / 2) % 3], "element %d", i);
    check_case = "Concat of int8 along axis 0 with an empty input";
    s = run(PP_OP_CONCAT, 13, (pp_attr[]){A_INT("axis", 0)}, 1,
            (tin[]){{PP_I8, SHAPE(2), (const int8_t[]){-1, 2}}, {PP_I8, SHAPE(0), ""},
                    {PP_I8, SHAPE(1), (const int8_t[]){-3}}}, 3, 1, &e);
    expect_ok(s, &e);
    CHECK(n_outs && !memcmp(outs[0].data, (const int8_t[]){-1, 2, -3}, 3), "wrong concat");
    check_case = "ConstantOfShape with an f16 value";
    pp_attr val = {.name = "value", .type = PP_ATTR_TENSOR, .t_dtype = PP_F16,
                   .t_shape = SHAPE(1), .t_data = &h[2], .t_nbytes = 2};
    s = run(PP_OP_CONSTANTOFSHAPE, 20, &val, 1, (tin[]){T_I64(SHAPE(2), 1, 2)}, 1, 1, &e);
    expect_ok(s, &e);
    CHECK(n_outs && outs[0].dtype == PP_F16 && ((uint16_t *)outs[0].data)[1] == 0x4200,
          "wrong fill");
}

static void test_shapes(void) {
    pp_err e;
    pp_status s;
    const tin x = T_F32(SHAPE(2, 1, 3), 0, 1, 2, 3, 4, 5);
    check_case = "Reshape with 0 and -1";
    s = run(PP_OP_RESHAPE, 14, NULL, 0, (tin[]){x, T_I64(SHAPE(2), 0, -1)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(2, 3));
    check_case = "Reshape with two -1";
    s = run(PP_OP_RESHAPE, 14, NULL, 0, (tin[]){x, T_I64(SHAPE(2), -1, -1)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "-1 more than once");
    check_case = "Reshape allowzero with 0 and -1";
    pp_attr az = A_INT("allowzero", 1);
    s = run(PP_OP_RESHAPE, 14, &az, 1, (tin[]){x, T_I64(SHAPE(2), 0, -1)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "both 0 and -1");
    check_case = "Transpose with a bad perm";
    pp_attr perm = A_INTS("perm", I64S(0, 0, 1));
    s = run(PP_OP_TRANSPOSE, 13, &perm, 1, &x, 1, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "attribute 'perm' is not a permutation");
    check_case = "Concat axis out of range";
    pp_attr ax = A_INT("axis", 3);
    s = run(PP_OP_CONCAT, 13, &ax, 1, (tin[]){x, x}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "attribute 'axis'=3 is out of range [-3, 3)");
    check_case = "Squeeze opset 11 (attribute) and 13 (input), all ones by default";
    pp_attr sq = A_INTS("axes", I64S(-2));
    s = run(PP_OP_SQUEEZE, 11, &sq, 1, &x, 1, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(2, 3));
    s = run(PP_OP_SQUEEZE, 13, NULL, 0, &x, 1, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(2, 3));
    s = run(PP_OP_SQUEEZE, 13, &sq, 1, &x, 1, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "attribute 'axes' is not valid at opset 13");
    check_case = "Unsqueeze with unsorted and negative axes";
    s = run(PP_OP_UNSQUEEZE, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(2), -1, 0)}, 2, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(1, 2, 1, 3, 1));
    s = run(PP_OP_UNSQUEEZE, 13, NULL, 0, (tin[]){x, T_I64(SHAPE(2), 1, -4)}, 2, 1, &e);
    expect_fail(s, &e, PP_EINVAL, "names axis 1 twice");
    check_case = "Shape with start and end, Size";
    pp_attr se[] = {A_INT("start", -2), A_INT("end", 100)};
    s = run(PP_OP_SHAPE, 15, se, 2, &x, 1, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(1, 3));
    s = run(PP_OP_SIZE, 13, NULL, 0, &x, 1, 1, &e);
    expect_ok(s, &e);
    expect_i64(0, I64S(6));
    expect_shape(0, SCALAR);
    check_case = "Flatten of bool at axis 0";
    pp_attr f0 = A_INT("axis", 0);
    s = run(PP_OP_FLATTEN, 13, &f0, 1, (tin[]){{PP_BOOL, SHAPE(2, 2), (const uint8_t[]){1, 0, 0, 1}}},
            1, 1, &e);
    expect_ok(s, &e);
    expect_shape(0, SHAPE(1, 4));
}

int main(void) {
    test_slice();
    test_pad();
    test_split();
    test_gather();
    test_scatternd();
    test_trilu_range();
    test_dtypes();
    test_shapes();
    free_outs();
    pprt_scratch_free(&scratch);
    return check_summary("test_tensor");
}
