/* test_kernels.c: the reference kernels (runtime/cpu/ref_kernels.c) against
 * straightforward naive implementations written here, on inputs from a
 * fixed-seed PRNG.
 *
 * Each case infers the output shape with pp_infer (ir/shape.c), checks it
 * against a shape computed independently here, runs the kernel twice (fresh
 * output buffers filled with different garbage, different scratch) and
 * requires the two results to be bit-identical, then compares with the naive
 * result (computed in double) at rel 1e-4 / abs 1e-5.
 *
 * Conv and Gemm inputs are multiples of 1/64 in [-1, 1]: every partial sum is
 * then exactly representable in float, so any summation order gives the exact
 * answer and an indexing bug cannot hide inside the tolerance.
 *
 * Build: gcc -std=c11 -I. ir/base.c ir/shape.c ir/cost.c runtime/cpu/ref_kernels.c
 *        tests/unit/test_kernels.c -lm
 * Exit status 0 when everything passes, 1 otherwise (each failure is printed). */
#include "runtime/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char *shape_s(const pp_shape *s) {
    static char bufs[4][128];
    static int k;
    k = (k + 1) % 4;
    return pp_shape_str(s, bufs[k], sizeof bufs[k]);
}

/* ---- PRNG: splitmix64, fixed seed ----------------------------------------------- */

static uint64_t rng_state = 0x5eed1234abcdULL;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float rng_uniform(void) { return (float)((double)(rng_next() >> 40) / 8388608.0 - 1.0); }
/* multiples of 1/64 in [-1, 1] */
static float rng_grid(void) { return (float)((int)(rng_next() % 129) - 64) / 64.0f; }

/* ---- tensors --------------------------------------------------------------------- */

#define NARG(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SHAPE(...) ((pp_shape){.rank = NARG(__VA_ARGS__), .dim = {__VA_ARGS__}})

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static void *alloc_bytes(size_t n) {
    size_t cap = (n + 63) / 64 * 64;
    if (cap == 0) cap = 64;
    void *p = aligned_alloc(64, cap);
    if (!p) {
        printf("out of memory allocating %zu bytes\n", n);
        exit(1);
    }
    return p;
}

enum fill { FILL_UNIFORM, FILL_GRID, FILL_POSITIVE };

static pprt_tensor tensor_f32(pp_shape s, enum fill f) {
    pprt_tensor t = {PP_F32, s, NULL};
    int64_t n = numel(&s);
    float *p = alloc_bytes((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = f == FILL_GRID       ? rng_grid()
               : f == FILL_UNIFORM ? rng_uniform()
                                   : 0.1f + fabsf(rng_uniform());
    t.data = p;
    return t;
}

static const pprt_tensor absent = {PP_UNDEFINED, {0}, NULL};

/* ---- running a kernel ------------------------------------------------------------ */

static pprt_scratch shared_scratch;

/* Infer the output, check its shape against `want` (when given), run the
 * kernel twice and check determinism. On success *out holds the first result
 * (caller frees out->data); returns false (after reporting) on any failure. */
static bool run(pp_op op, pp_attrs at, const pprt_tensor *in, int n_in, const pp_shape *want,
                pprt_tensor *out) {
    pp_tinfo ti[8], to[1];
    for (int i = 0; i < n_in; i++) ti[i] = (pp_tinfo){in[i].dtype, in[i].shape, NULL};
    pp_err err = {0};
    pp_status st = pp_infer(op, at, ti, n_in, to, 1, &err);
    if (st != PP_OK) {
        CHECK_FAIL("pp_infer: %s: %s", pp_status_name(st), err.msg);
        return false;
    }
    if (want && !pp_shape_eq(want, &to[0].shape)) {
        CHECK_FAIL("pp_infer gives shape %s, expected %s", shape_s(&to[0].shape), shape_s(want));
        return false;
    }
    size_t nb = (size_t)numel(&to[0].shape) * pp_dtype_size(to[0].dtype);
    pprt_tensor o[2];
    for (int r = 0; r < 2; r++) {
        o[r] = (pprt_tensor){to[0].dtype, to[0].shape, alloc_bytes(nb)};
        memset(o[r].data, r ? 0xA5 : 0xFF, nb); /* garbage: NaNs, then junk */
        pprt_scratch fresh = {0};
        pp_err e = {0};
        st = pprt_ref_kernels[op](at, in, n_in, &o[r], 1, r ? &fresh : &shared_scratch, &e);
        pprt_scratch_free(&fresh);
        if (st != PP_OK) {
            CHECK_FAIL("kernel (run %d): %s: %s", r + 1, pp_status_name(st), e.msg);
            free(o[0].data);
            if (r) free(o[1].data);
            return false;
        }
    }
    CHECK(memcmp(o[0].data, o[1].data, nb) == 0, "two runs are not bit-identical");
    free(o[1].data);
    *out = o[0];
    return true;
}

static bool close_enough(float got, double want) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return (double)got == want;
    return fabs((double)got - want) <= 1e-5 + 1e-4 * fabs(want);
}

static void expect_close(const float *got, const double *want, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (close_enough(got[i], want[i])) continue;
        if (bad < 5)
            CHECK_FAIL("element %lld: got %.9g, expected %.9g (diff %.3g)", (long long)i, got[i],
                 want[i], fabs((double)got[i] - want[i]));
        bad++;
    }
    check_count++;
    if (bad > 5) CHECK_FAIL("... %lld of %lld elements differ", (long long)bad, (long long)n);
}

/* ---- attribute builder ------------------------------------------------------------ */

typedef struct attrb {
    pp_attr a[12];
    int64_t ints[12][16];
    int n;
} attrb;

static void ab_int(attrb *b, const char *name, int64_t v) {
    b->a[b->n++] = (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v};
}
static void ab_float(attrb *b, const char *name, float v) {
    b->a[b->n++] = (pp_attr){.name = name, .type = PP_ATTR_FLOAT, .f = v};
}
static void ab_str(attrb *b, const char *name, const char *v) {
    b->a[b->n++] = (pp_attr){.name = name, .type = PP_ATTR_STRING, .s = v};
}
static void ab_ints(attrb *b, const char *name, const int64_t *v, int n) {
    memcpy(b->ints[b->n], v, sizeof(int64_t) * (size_t)n);
    b->a[b->n] = (pp_attr){.name = name, .type = PP_ATTR_INTS, .ints = b->ints[b->n], .n = n};
    b->n++;
}
static pp_attrs ab_get(const attrb *b) { return (pp_attrs){b->a, b->n, 13}; }

/* ---- window geometry, computed independently of ir/shape.c ------------------------- */

typedef struct win {
    int nsp;
    int64_t in[3], k[3], s[3], d[3];
    int64_t pads[6];      /* explicit pads, ONNX layout: begins then ends */
    const char *auto_pad; /* NULL: attribute absent */
    bool ceil_mode;
    bool set_strides, set_dils, set_pads;
} win;

/* Per spatial dim: padding before and output size. */
static void window_out(const win *w, int i, int64_t *p0, int64_t *out) {
    int64_t in = w->in[i], k = w->k[i], s = w->s[i], d = w->d[i];
    int64_t ext = d * (k - 1) + 1;
    const char *ap = w->auto_pad ? w->auto_pad : "NOTSET";
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        int64_t o = (in + s - 1) / s;
        int64_t total = (o - 1) * s + ext - in;
        if (total < 0) total = 0;
        *p0 = !strcmp(ap, "SAME_UPPER") ? total / 2 : (total + 1) / 2;
        *out = o;
        return;
    }
    int64_t a = 0, b = 0;
    if (!strcmp(ap, "NOTSET")) a = w->pads[i], b = w->pads[w->nsp + i];
    int64_t span = in + a + b - ext;
    int64_t o = w->ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    /* ceil mode: a window may not start in the right padding */
    if (w->ceil_mode && (o - 1) * s >= in + a) o--;
    *p0 = a;
    *out = o;
}

static void add_window_attrs(attrb *b, const win *w) {
    if (w->set_strides) ab_ints(b, "strides", w->s, w->nsp);
    if (w->set_dils) ab_ints(b, "dilations", w->d, w->nsp);
    if (w->set_pads) ab_ints(b, "pads", w->pads, 2 * w->nsp);
    if (w->auto_pad) ab_str(b, "auto_pad", w->auto_pad);
    if (w->ceil_mode) ab_int(b, "ceil_mode", 1);
}

/* Lift to three spatial dims with leading unit dims (naive loops below). */
typedef struct lifted {
    int64_t in[3], k[3], s[3], d[3], p0[3], out[3];
} lifted;

static lifted lift(const win *w) {
    lifted L;
    int off = 3 - w->nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - off;
        if (j < 0) {
            L.in[i] = L.k[i] = L.s[i] = L.d[i] = L.out[i] = 1;
            L.p0[i] = 0;
            continue;
        }
        L.in[i] = w->in[j], L.k[i] = w->k[j], L.s[i] = w->s[j], L.d[i] = w->d[j];
        window_out(w, j, &L.p0[i], &L.out[i]);
    }
    return L;
}

/* ---- Conv ----------------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int64_t N, C, M, group;
    bool bias, set_kernel_shape;
    win w;
} conv_case;

static void naive_conv(const conv_case *cc, const lifted *L, const float *x, const float *wt,
                       const float *b, double *y) {
    int64_t Cg = cc->C / cc->group, Mg = cc->M / cc->group;
    int64_t Pin = L->in[0] * L->in[1] * L->in[2];
    int64_t kvol = L->k[0] * L->k[1] * L->k[2];
    for (int64_t n = 0; n < cc->N; n++)
        for (int64_t m = 0; m < cc->M; m++) {
            int64_t g = m / Mg;
            for (int64_t o0 = 0; o0 < L->out[0]; o0++)
                for (int64_t o1 = 0; o1 < L->out[1]; o1++)
                    for (int64_t o2 = 0; o2 < L->out[2]; o2++) {
                        double acc = b ? b[m] : 0.0;
                        for (int64_t c = 0; c < Cg; c++)
                            for (int64_t a0 = 0; a0 < L->k[0]; a0++)
                                for (int64_t a1 = 0; a1 < L->k[1]; a1++)
                                    for (int64_t a2 = 0; a2 < L->k[2]; a2++) {
                                        int64_t i0 = o0 * L->s[0] - L->p0[0] + a0 * L->d[0];
                                        int64_t i1 = o1 * L->s[1] - L->p0[1] + a1 * L->d[1];
                                        int64_t i2 = o2 * L->s[2] - L->p0[2] + a2 * L->d[2];
                                        if (i0 < 0 || i0 >= L->in[0] || i1 < 0 ||
                                            i1 >= L->in[1] || i2 < 0 || i2 >= L->in[2])
                                            continue;
                                        double xv = x[(n * cc->C + g * Cg + c) * Pin +
                                                      (i0 * L->in[1] + i1) * L->in[2] + i2];
                                        double wv = wt[(m * Cg + c) * kvol +
                                                       (a0 * L->k[1] + a1) * L->k[2] + a2];
                                        acc += xv * wv;
                                    }
                        *y++ = acc;
                    }
        }
}

static void test_conv(const conv_case *cc) {
    check_case = cc->name;
    const win *w = &cc->w;
    pp_shape xs = {.rank = 2 + w->nsp, .dim = {cc->N, cc->C}};
    pp_shape ws = {.rank = 2 + w->nsp, .dim = {cc->M, cc->C / cc->group}};
    for (int i = 0; i < w->nsp; i++) xs.dim[2 + i] = w->in[i], ws.dim[2 + i] = w->k[i];
    pprt_tensor in[3] = {tensor_f32(xs, FILL_GRID), tensor_f32(ws, FILL_GRID),
                         cc->bias ? tensor_f32(SHAPE(cc->M), FILL_GRID) : absent};
    attrb ab = {0};
    if (cc->group != 1) ab_int(&ab, "group", cc->group);
    if (cc->set_kernel_shape) ab_ints(&ab, "kernel_shape", w->k, w->nsp);
    add_window_attrs(&ab, w);

    lifted L = lift(w);
    pp_shape want = {.rank = xs.rank, .dim = {cc->N, cc->M}};
    for (int i = 0; i < w->nsp; i++) want.dim[2 + i] = L.out[3 - w->nsp + i];
    pprt_tensor out;
    /* exercise both "B absent" spellings: 2 inputs, and 3 with an absent third */
    int n_in = cc->bias || cc->C % 2 ? 3 : 2;
    if (run(PP_OP_CONV, ab_get(&ab), in, n_in, &want, &out)) {
        int64_t n = numel(&want);
        double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1));
        naive_conv(cc, &L, in[0].data, in[1].data, cc->bias ? in[2].data : NULL, ref);
        expect_close(out.data, ref, n);
        free(ref);
        free(out.data);
    }
    for (int i = 0; i < 3; i++) free(in[i].data);
}

#define W1(i0, k0, s0, d0, pa, pb) \
    {.nsp = 1, .in = {i0}, .k = {k0}, .s = {s0}, .d = {d0}, .pads = {pa, pb}}
#define W2(i0, i1, k0, k1, s0, s1, d0, d1, pa, pb, pc, pd)                                 \
    {.nsp = 2, .in = {i0, i1}, .k = {k0, k1}, .s = {s0, s1}, .d = {d0, d1}, \
     .pads = {pa, pb, pc, pd}}
#define W3(i0, i1, i2, k0, k1, k2, s0, s1, s2, d0, d1, d2, pa, pb, pc, pd, pe, pf)              \
    {.nsp = 3, .in = {i0, i1, i2}, .k = {k0, k1, k2}, .s = {s0, s1, s2}, .d = {d0, d1, d2}, \
     .pads = {pa, pb, pc, pd, pe, pf}}

static win with(win w, const char *auto_pad, bool strides, bool dils, bool pads, bool ceil) {
    w.auto_pad = auto_pad;
    w.set_strides = strides;
    w.set_dils = dils;
    w.set_pads = pads;
    w.ceil_mode = ceil;
    return w;
}

static void test_convs(void) {
    const conv_case cases[] = {
        {"conv 2d 3x3 pad 1 bias", 2, 4, 6, 1, true, false,
         with((win)W2(9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false, false, true, false)},
        {"conv 2d stride 2 asymmetric pads", 1, 3, 5, 1, true, true,
         with((win)W2(10, 9, 3, 3, 2, 2, 1, 1, 1, 0, 2, 1), NULL, true, false, true, false)},
        {"conv 2d dilation, stride (1,2), group 2, 3x2 kernel", 2, 4, 6, 2, false, false,
         with((win)W2(11, 8, 3, 2, 1, 2, 2, 3, 2, 1, 0, 3), NULL, true, true, true, false)},
        {"conv 2d SAME_UPPER stride 2 even kernel", 1, 3, 4, 1, true, false,
         with((win)W2(10, 7, 4, 3, 2, 2, 1, 1, 0, 0, 0, 0), "SAME_UPPER", true, false, false,
              false)},
        {"conv 2d SAME_LOWER stride 3 dilated", 1, 2, 3, 1, true, false,
         with((win)W2(8, 9, 2, 5, 3, 3, 1, 2, 0, 0, 0, 0), "SAME_LOWER", true, true, false,
              false)},
        {"conv 2d SAME_LOWER stride 1 even kernel", 1, 3, 2, 1, false, false,
         with((win)W2(6, 7, 4, 2, 1, 1, 1, 1, 0, 0, 0, 0), "SAME_LOWER", false, false, false,
              false)},
        {"conv 2d VALID stride 2", 1, 3, 4, 1, true, false,
         with((win)W2(9, 10, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0), "VALID", true, false, false, false)},
        {"conv 2d auto_pad NOTSET spelled out", 1, 2, 2, 1, true, false,
         with((win)W2(7, 7, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0), "NOTSET", false, false, true, false)},
        {"conv 2d depthwise", 2, 8, 8, 8, true, false,
         with((win)W2(7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false, false, true, false)},
        {"conv 2d depthwise multiplier 2 stride 2", 1, 4, 8, 4, false, false,
         with((win)W2(9, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1), NULL, true, false, true, false)},
        {"conv 2d group 4, 5x5 stride 2 pad 2", 1, 8, 8, 4, true, false,
         with((win)W2(11, 10, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2), NULL, true, false, true, false)},
        {"conv 1x1 direct", 2, 16, 24, 1, true, false,
         with((win)W2(7, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0), NULL, false, false, false, false)},
        {"conv 1x1 direct group 2 explicit unit attrs", 1, 6, 4, 2, false, true,
         with((win)W2(5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0), "NOTSET", true, true, true, false)},
        {"conv 1x1 stride 2", 1, 8, 4, 1, true, false,
         with((win)W2(9, 9, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0), NULL, true, false, false, false)},
        {"conv 1x1 padded", 1, 3, 5, 1, true, false,
         with((win)W2(4, 5, 1, 1, 1, 1, 1, 1, 1, 0, 2, 1), NULL, false, false, true, false)},
        {"conv windows entirely in padding", 1, 2, 3, 1, true, false,
         with((win)W2(2, 3, 2, 2, 1, 2, 1, 1, 3, 1, 3, 4), NULL, true, false, true, false)},
        {"conv 7x7 stride 2 pad 3 (resnet stem)", 1, 3, 8, 1, false, false,
         with((win)W2(32, 32, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3), NULL, true, false, true, false)},
        {"conv 1d stride 2 dilation 2", 2, 3, 5, 1, true, false,
         with((win)W1(17, 4, 2, 2, 3, 1), NULL, true, true, true, false)},
        {"conv 1d SAME_LOWER", 1, 4, 2, 2, false, true,
         with((win)W1(9, 4, 1, 1, 0, 0), "SAME_LOWER", false, false, false, false)},
        {"conv 1d SAME_UPPER stride 3", 1, 2, 3, 1, true, false,
         with((win)W1(10, 3, 3, 1, 0, 0), "SAME_UPPER", true, false, false, false)},
        {"conv 3d strided dilated padded", 1, 4, 3, 1, true, false,
         with((win)W3(5, 6, 7, 3, 2, 3, 2, 1, 2, 1, 2, 1, 1, 0, 1, 0, 1, 2), NULL, true, true,
              true, false)},
        {"conv 3d group 2 SAME_UPPER", 2, 4, 2, 2, true, false,
         with((win)W3(4, 5, 6, 2, 3, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0), "SAME_UPPER", true,
              false, false, false)},
        {"conv 3d 1x1x1 direct", 1, 5, 3, 1, true, false,
         with((win)W3(3, 4, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0), NULL, false, false,
              false, false)},
        {"conv M > MC", 1, 4, 100, 1, true, false,
         with((win)W2(6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false, false, true, false)},
        /* K = 288 > KC, 4096 columns > NC, and im2col in two chunks */
        {"conv 2d big: K > KC, N > NC, chunked im2col", 1, 32, 8, 1, true, false,
         with((win)W2(64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false, false, true, false)},
        /* K = 216, 320 output lines: the chunk boundary falls mid-plane */
        {"conv 3d chunked im2col", 1, 8, 4, 1, false, false,
         with((win)W3(20, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false,
              false, true, false)},
        {"conv 1x1 direct N > NC", 1, 3, 5, 1, true, false,
         with((win)W2(48, 48, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0), NULL, false, false, false, false)},
        {"conv empty batch", 0, 3, 4, 1, true, false,
         with((win)W2(5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), NULL, false, false, true, false)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_conv(&cases[i]);
}

/* ---- MaxPool --------------------------------------------------------------------------- */

static void naive_maxpool(int64_t planes, const lifted *L, const float *x, double *y) {
    int64_t Pin = L->in[0] * L->in[1] * L->in[2];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o0 = 0; o0 < L->out[0]; o0++)
            for (int64_t o1 = 0; o1 < L->out[1]; o1++)
                for (int64_t o2 = 0; o2 < L->out[2]; o2++) {
                    double m = -INFINITY;
                    for (int64_t a0 = 0; a0 < L->k[0]; a0++)
                        for (int64_t a1 = 0; a1 < L->k[1]; a1++)
                            for (int64_t a2 = 0; a2 < L->k[2]; a2++) {
                                int64_t i0 = o0 * L->s[0] - L->p0[0] + a0 * L->d[0];
                                int64_t i1 = o1 * L->s[1] - L->p0[1] + a1 * L->d[1];
                                int64_t i2 = o2 * L->s[2] - L->p0[2] + a2 * L->d[2];
                                if (i0 < 0 || i0 >= L->in[0] || i1 < 0 || i1 >= L->in[1] ||
                                    i2 < 0 || i2 >= L->in[2])
                                    continue;
                                double v = x[p * Pin + (i0 * L->in[1] + i1) * L->in[2] + i2];
                                if (v > m) m = v;
                            }
                    *y++ = m;
                }
}

typedef struct pool_case {
    const char *name;
    int64_t N, C;
    win w;
} pool_case;

static void test_maxpool(const pool_case *pc) {
    check_case = pc->name;
    const win *w = &pc->w;
    pp_shape xs = {.rank = 2 + w->nsp, .dim = {pc->N, pc->C}};
    for (int i = 0; i < w->nsp; i++) xs.dim[2 + i] = w->in[i];
    pprt_tensor x = tensor_f32(xs, FILL_UNIFORM);
    attrb ab = {0};
    ab_ints(&ab, "kernel_shape", w->k, w->nsp);
    add_window_attrs(&ab, w);
    lifted L = lift(w);
    pp_shape want = {.rank = xs.rank, .dim = {pc->N, pc->C}};
    for (int i = 0; i < w->nsp; i++) want.dim[2 + i] = L.out[3 - w->nsp + i];
    pprt_tensor out;
    if (run(PP_OP_MAXPOOL, ab_get(&ab), &x, 1, &want, &out)) {
        int64_t n = numel(&want);
        double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1));
        naive_maxpool(pc->N * pc->C, &L, x.data, ref);
        expect_close(out.data, ref, n);
        free(ref);
        free(out.data);
    }
    free(x.data);
}

static void test_maxpools(void) {
    const pool_case cases[] = {
        {"maxpool 3x3 stride 2 pad 1 (resnet)", 2, 3,
         with((win)W2(12, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1), NULL, true, false, true, false)},
        {"maxpool 2x2 stride 2 ceil_mode", 1, 2,
         with((win)W2(7, 7, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0), NULL, true, false, false, true)},
        {"maxpool ceil_mode drops a window starting in the right padding", 1, 2,
         with((win)W2(4, 6, 2, 2, 3, 2, 1, 1, 1, 1, 1, 1), NULL, true, false, true, true)},
        {"maxpool ceil_mode asymmetric pads", 1, 3,
         with((win)W2(9, 8, 3, 2, 2, 3, 1, 1, 0, 1, 1, 0), NULL, true, false, true, true)},
        {"maxpool dilation 2 pads 2", 1, 2,
         with((win)W2(8, 9, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2), NULL, true, true, true, false)},
        {"maxpool dilation ceil_mode", 1, 2,
         with((win)W2(10, 9, 2, 3, 3, 2, 2, 2, 1, 0, 0, 1), NULL, true, true, true, true)},
        {"maxpool SAME_UPPER stride 2", 1, 2,
         with((win)W2(8, 7, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0), "SAME_UPPER", true, false, false,
              false)},
        {"maxpool SAME_LOWER even kernel", 2, 1,
         with((win)W2(5, 6, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0), "SAME_LOWER", false, false, false,
              false)},
        {"maxpool VALID", 1, 2,
         with((win)W2(9, 9, 3, 2, 2, 2, 1, 1, 0, 0, 0, 0), "VALID", true, false, false, false)},
        {"maxpool 1d ceil_mode pad", 2, 3,
         with((win)W1(10, 3, 2, 1, 1, 0), NULL, true, false, true, true)},
        {"maxpool 1d dilated", 1, 2, with((win)W1(13, 3, 1, 3, 0, 2), NULL, false, true, true, false)},
        {"maxpool 3d", 1, 2,
         with((win)W3(5, 6, 7, 2, 3, 2, 2, 1, 2, 1, 1, 1, 0, 1, 1, 1, 0, 0), NULL, true, false,
              true, false)},
        {"maxpool 3d ceil_mode dilated", 1, 2,
         with((win)W3(6, 5, 7, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 0, 0, 0, 1, 1), NULL, true, true,
              true, true)},
        {"maxpool windows entirely in padding (-inf)", 1, 1,
         with((win)W2(3, 3, 2, 2, 1, 1, 1, 1, 2, 2, 0, 0), NULL, false, false, true, false)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_maxpool(&cases[i]);

    /* NaN is skipped, before or after a number; a window of only NaN gives
     * NaN, one of only -inf gives -inf (docs/design-notes.md, "NaN and
     * infinities") */
    check_case = "maxpool NaN";
    float xv[8] = {1, NAN, 2, 3, -1, NAN, NAN, -INFINITY};
    pprt_tensor x = {PP_F32, SHAPE(1, 1, 8), xv};
    attrb ab = {0};
    ab_ints(&ab, "kernel_shape", (int64_t[]){2}, 1);
    pprt_tensor out;
    if (run(PP_OP_MAXPOOL, ab_get(&ab), &x, 1, &SHAPE(1, 1, 7), &out)) {
        expect_close(out.data, (double[]){1, 2, 3, 3, -1, NAN, -INFINITY}, 7);
        free(out.data);
    }
}

/* ---- Gemm ------------------------------------------------------------------------------- */

static void test_gemm_one(int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha,
                          float beta, int cmode) {
    /* cmode: 0 none, 1 [M,N], 2 [N], 3 [1,N], 4 [M,1], 5 [1,1], 6 scalar [], 7 absent input */
    static const char *cnames[] = {"none", "[M,N]", "[N]", "[1,N]", "[M,1]", "[1,1]", "[]",
                                   "absent"};
    char name[160];
    snprintf(name, sizeof name, "gemm M=%lld N=%lld K=%lld tA=%d tB=%d alpha=%g beta=%g C=%s",
             (long long)M, (long long)N, (long long)K, ta, tb, alpha, beta, cnames[cmode]);
    check_case = name;
    pp_shape cs[] = {{0}, SHAPE(M, N), SHAPE(N), SHAPE(1, N), SHAPE(M, 1), SHAPE(1, 1), {0}};
    pprt_tensor in[3] = {tensor_f32(ta ? SHAPE(K, M) : SHAPE(M, K), FILL_GRID),
                         tensor_f32(tb ? SHAPE(N, K) : SHAPE(K, N), FILL_GRID), absent};
    int n_in = 2;
    if (cmode >= 1 && cmode <= 6) in[2] = tensor_f32(cs[cmode], FILL_GRID), n_in = 3;
    if (cmode == 7) n_in = 3;
    attrb ab = {0};
    if (ta) ab_int(&ab, "transA", 1);
    if (tb) ab_int(&ab, "transB", 1);
    if (alpha != 1.0f) ab_float(&ab, "alpha", alpha);
    if (beta != 1.0f) ab_float(&ab, "beta", beta);
    pprt_tensor out;
    if (run(PP_OP_GEMM, ab_get(&ab), in, n_in, &SHAPE(M, N), &out)) {
        const float *A = in[0].data, *B = in[1].data, *C = in[2].data;
        double *ref = malloc(sizeof(double) * (size_t)(M * N > 0 ? M * N : 1));
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)(ta ? A[k * M + i] : A[i * K + k]) *
                         (double)(tb ? B[j * K + k] : B[k * N + j]);
                double c = 0;
                switch (cmode) {
                case 1: c = C[i * N + j]; break;
                case 2: case 3: c = C[j]; break;
                case 4: c = C[i]; break;
                case 5: case 6: c = C[0]; break;
                default: break;
                }
                ref[i * N + j] = alpha * s + (beta != 0.0f ? beta * c : 0.0);
            }
        expect_close(out.data, ref, M * N);
        free(ref);
        free(out.data);
    }
    for (int i = 0; i < 3; i++) free(in[i].data);
}

static void test_gemms(void) {
    static const float alphas[] = {1.0f, 0.5f}, betas[] = {1.0f, -2.0f, 0.0f};
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 8; c++) test_gemm_one(5, 7, 3, t & 1, t >> 1, alphas[a], betas[b], c);
    for (int t = 0; t < 4; t++) {
        test_gemm_one(130, 70, 300, t & 1, t >> 1, 0.5f, -2.0f, 1); /* M > MC, K > KC */
        test_gemm_one(3, 2100, 20, t & 1, t >> 1, 1.0f, 1.0f, 2);   /* N > NC */
        test_gemm_one(1, 1, 1, t & 1, t >> 1, 2.0f, 0.25f, 6);
        test_gemm_one(1, 40, 64, t & 1, t >> 1, 1.0f, 1.0f, 3);     /* the FC-layer shape */
    }
    test_gemm_one(4, 3, 0, 0, 0, 1.0f, 1.0f, 1); /* K = 0: just beta*C */
    test_gemm_one(0, 3, 5, 0, 1, 1.0f, 1.0f, 2); /* empty output */
}

/* ---- Add ------------------------------------------------------------------------------------ */

static void test_add_one(pp_shape as, pp_shape bs) {
    char name[300];
    snprintf(name, sizeof name, "add %s + %s", shape_s(&as), shape_s(&bs));
    check_case = name;
    /* broadcast shape, computed here */
    int r = as.rank > bs.rank ? as.rank : bs.rank;
    pp_shape os = {.rank = r};
    for (int i = 0; i < r; i++) {
        int ia = i - (r - as.rank), ib = i - (r - bs.rank);
        int64_t da = ia >= 0 ? as.dim[ia] : 1, db = ib >= 0 ? bs.dim[ib] : 1;
        os.dim[i] = da == 1 ? db : da;
    }
    pprt_tensor in[2] = {tensor_f32(as, FILL_UNIFORM), tensor_f32(bs, FILL_UNIFORM)};
    pprt_tensor out;
    if (run(PP_OP_ADD, (pp_attrs){0}, in, 2, &os, &out)) {
        int64_t n = numel(&os);
        double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1));
        const float *A = in[0].data, *B = in[1].data;
        for (int64_t e = 0; e < n; e++) {
            /* unravel e over os, re-ravel into A and B with broadcasting */
            int64_t rem = e, ia = 0, ib = 0, sa = 1, sb = 1;
            for (int i = r - 1; i >= 0; i--) {
                int64_t idx = rem % os.dim[i];
                rem /= os.dim[i];
                int ja = i - (r - as.rank), jb = i - (r - bs.rank);
                if (ja >= 0) {
                    if (as.dim[ja] != 1) ia += idx * sa;
                    sa *= as.dim[ja];
                }
                if (jb >= 0) {
                    if (bs.dim[jb] != 1) ib += idx * sb;
                    sb *= bs.dim[jb];
                }
            }
            ref[e] = (double)A[ia] + (double)B[ib];
        }
        expect_close(out.data, ref, n);
        free(ref);
        free(out.data);
    }
    free(in[0].data);
    free(in[1].data);
}

static void test_adds(void) {
    test_add_one(SHAPE(2, 3, 4, 5), SHAPE(2, 3, 4, 5));
    test_add_one(SHAPE(2, 3, 4, 5), SHAPE(5));
    test_add_one(SHAPE(5), SHAPE(2, 3, 4, 5));
    test_add_one(SHAPE(2, 3, 4, 5), SHAPE(1, 3, 1, 1));
    test_add_one(SHAPE(2, 3, 4, 5), SHAPE(3, 1, 1));
    test_add_one(SHAPE(3, 1, 5), SHAPE(1, 4, 1));
    test_add_one(SHAPE(4, 1), SHAPE(3));
    test_add_one(SHAPE(2, 1, 3, 1, 2), SHAPE(4, 1, 2, 1));
    test_add_one(SHAPE(2, 3), (pp_shape){0});
    test_add_one((pp_shape){0}, SHAPE(2, 3));
    test_add_one((pp_shape){0}, (pp_shape){0});
    test_add_one(SHAPE(1), SHAPE(1, 1));
    test_add_one(SHAPE(1, 1, 7), SHAPE(7));
    test_add_one(SHAPE(0, 3), SHAPE(1, 3));
    test_add_one(SHAPE(2, 1, 2, 1, 2, 1, 2, 1), SHAPE(1, 2, 1, 2, 1, 2, 1, 3));
    test_add_one(SHAPE(2, 3, 2, 3, 1, 1, 2, 2), SHAPE(3, 1, 3, 2, 2, 1, 1));
    test_add_one(SHAPE(8, 64, 7, 7), SHAPE(8, 64, 7, 7));
}

/* ---- BatchNormalization, Relu, GlobalAveragePool, Identity, Flatten ---------------------------- */

static void test_batchnorm_one(pp_shape xs, bool set_eps, float eps) {
    char name[200];
    snprintf(name, sizeof name, "batchnorm %s eps=%s", shape_s(&xs), set_eps ? "set" : "default");
    check_case = name;
    int64_t C = xs.dim[1];
    pprt_tensor in[5] = {tensor_f32(xs, FILL_UNIFORM), tensor_f32(SHAPE(C), FILL_UNIFORM),
                         tensor_f32(SHAPE(C), FILL_UNIFORM), tensor_f32(SHAPE(C), FILL_UNIFORM),
                         tensor_f32(SHAPE(C), FILL_POSITIVE)};
    attrb ab = {0};
    if (set_eps) ab_float(&ab, "epsilon", eps);
    double e = set_eps ? eps : 1e-5;
    pprt_tensor out;
    if (run(PP_OP_BATCHNORM, ab_get(&ab), in, 5, &xs, &out)) {
        int64_t n = numel(&xs), inner = n / (xs.dim[0] * C);
        double *ref = malloc(sizeof(double) * (size_t)n);
        const float *x = in[0].data, *sc = in[1].data, *B = in[2].data, *mu = in[3].data,
                    *var = in[4].data;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = i / inner % C;
            ref[i] = sc[c] * ((double)x[i] - mu[c]) / sqrt((double)var[c] + e) + B[c];
        }
        expect_close(out.data, ref, n);
        free(ref);
        free(out.data);
    }
    for (int i = 0; i < 5; i++) free(in[i].data);
}

static void test_elementwise(void) {
    test_batchnorm_one(SHAPE(2, 5), false, 0);
    test_batchnorm_one(SHAPE(2, 3, 7), true, 1e-3f);
    test_batchnorm_one(SHAPE(2, 4, 5, 6), false, 0);
    test_batchnorm_one(SHAPE(1, 3, 2, 3, 4), true, 0.5f);

    check_case = "relu";
    pprt_tensor x = tensor_f32(SHAPE(3, 4, 5, 7), FILL_UNIFORM), out;
    ((float *)x.data)[3] = -0.0f;
    ((float *)x.data)[4] = NAN;
    ((float *)x.data)[5] = -INFINITY;
    ((float *)x.data)[6] = INFINITY;
    if (run(PP_OP_RELU, (pp_attrs){0}, &x, 1, &x.shape, &out)) {
        int64_t n = numel(&x.shape);
        double *ref = malloc(sizeof(double) * (size_t)n);
        const float *xv = x.data;
        for (int64_t i = 0; i < n; i++) ref[i] = isnan(xv[i]) ? NAN : xv[i] > 0 ? xv[i] : 0.0;
        expect_close(out.data, ref, n);
        free(ref);
        free(out.data);
    }
    free(x.data);

    const pp_shape gaps[] = {SHAPE(2, 3, 10), SHAPE(2, 5, 7, 7), SHAPE(1, 2, 3, 4, 5),
                             SHAPE(3, 4, 1, 1)};
    for (size_t t = 0; t < sizeof gaps / sizeof gaps[0]; t++) {
        char name[100];
        snprintf(name, sizeof name, "globalaveragepool %s", shape_s(&gaps[t]));
        check_case = name;
        x = tensor_f32(gaps[t], FILL_UNIFORM);
        pp_shape want = gaps[t];
        int64_t S = 1;
        for (int i = 2; i < want.rank; i++) S *= want.dim[i], want.dim[i] = 1;
        if (run(PP_OP_GLOBALAVGPOOL, (pp_attrs){0}, &x, 1, &want, &out)) {
            int64_t planes = gaps[t].dim[0] * gaps[t].dim[1];
            double *ref = malloc(sizeof(double) * (size_t)planes);
            const float *xv = x.data;
            for (int64_t p = 0; p < planes; p++) {
                double s = 0;
                for (int64_t i = 0; i < S; i++) s += xv[p * S + i];
                ref[p] = s / (double)S;
            }
            expect_close(out.data, ref, planes);
            free(ref);
            free(out.data);
        }
        free(x.data);
    }

    /* Identity and Flatten copy bytes of any dtype */
    check_case = "identity i64";
    int64_t iv[6] = {1, -2, 3, INT64_MAX, INT64_MIN, 0};
    pprt_tensor xi = {PP_I64, SHAPE(2, 3), iv};
    if (run(PP_OP_IDENTITY, (pp_attrs){0}, &xi, 1, &xi.shape, &out)) {
        CHECK(out.dtype == PP_I64 && memcmp(out.data, iv, sizeof iv) == 0, "bytes differ");
        free(out.data);
    }
    check_case = "identity f32";
    x = tensor_f32(SHAPE(4, 5, 6), FILL_UNIFORM);
    if (run(PP_OP_IDENTITY, (pp_attrs){0}, &x, 1, &x.shape, &out)) {
        CHECK(memcmp(out.data, x.data, 4 * 5 * 6 * sizeof(float)) == 0, "bytes differ");
        free(out.data);
    }
    free(x.data);
    x = tensor_f32(SHAPE(2, 3, 4, 5), FILL_UNIFORM);
    const struct { int64_t axis; pp_shape want; } fl[] = {
        {1, SHAPE(2, 60)}, {0, SHAPE(1, 120)}, {4, SHAPE(120, 1)}, {-1, SHAPE(24, 5)},
        {2, SHAPE(6, 20)}, {-4, SHAPE(1, 120)},
    };
    for (size_t t = 0; t < sizeof fl / sizeof fl[0]; t++) {
        char name[64];
        snprintf(name, sizeof name, "flatten axis %lld", (long long)fl[t].axis);
        check_case = name;
        attrb ab = {0};
        if (fl[t].axis != 1) ab_int(&ab, "axis", fl[t].axis);
        if (run(PP_OP_FLATTEN, ab_get(&ab), &x, 1, &fl[t].want, &out)) {
            CHECK(memcmp(out.data, x.data, 120 * sizeof(float)) == 0, "bytes differ");
            free(out.data);
        }
    }
    free(x.data);
    check_case = "flatten u8";
    uint8_t bv[12] = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};
    pprt_tensor xb = {PP_U8, SHAPE(2, 2, 3), bv};
    if (run(PP_OP_FLATTEN, (pp_attrs){0}, &xb, 1, &SHAPE(2, 6), &out)) {
        CHECK(out.dtype == PP_U8 && memcmp(out.data, bv, sizeof bv) == 0, "bytes differ");
        free(out.data);
    }
}

/* ---- errors, scratch, the table --------------------------------------------------------------- */

static void test_errors(void) {
    check_case = "kernel table";
    for (int i = 0; i < PP_OP_COUNT; i++)
        CHECK(pprt_ref_kernels[i] != NULL, "no kernel for op %d (%s)", i, pp_op_table[i].name);

    check_case = "scratch";
    pprt_scratch s = {0};
    void *p = pprt_scratch_get(&s, 100);
    CHECK(p && ((uintptr_t)p % 64) == 0 && s.cap >= 100, "first get: %p cap %zu", p, s.cap);
    CHECK(pprt_scratch_get(&s, 50) == p, "a smaller request must not reallocate");
    if (p) memset(p, 1, 100);
    void *q = pprt_scratch_get(&s, 100000);
    CHECK(q && ((uintptr_t)q % 64) == 0 && s.cap >= 100000, "growing: %p cap %zu", q, s.cap);
    if (q) memset(q, 2, 100000);
    CHECK(pprt_scratch_get(&s, SIZE_MAX) == NULL, "an impossible request must give NULL");
    CHECK(pprt_scratch_get(&s, 10) != NULL, "usable again after a failed request");
    pprt_scratch_free(&s);
    CHECK(s.p == NULL && s.cap == 0, "free resets");
    pprt_scratch_free(&s); /* twice is harmless */

    pp_err err = {0};
    pprt_tensor x = tensor_f32(SHAPE(1, 2, 4, 4), FILL_UNIFORM);
    pprt_tensor w = tensor_f32(SHAPE(3, 2, 3, 3), FILL_UNIFORM);
    pprt_tensor o = tensor_f32(SHAPE(1, 3, 3, 3), FILL_UNIFORM); /* should be [1,3,2,2] */
    pprt_tensor in[2] = {x, w};

    check_case = "conv with a wrong output shape";
    pp_status st = pprt_ref_kernels[PP_OP_CONV]((pp_attrs){0}, in, 2, &o, 1, &shared_scratch, &err);
    CHECK(st == PP_EINVAL && err.code == PP_EINVAL && err.msg[0], "got %s (%s)",
          pp_status_name(st), err.msg);

    check_case = "relu on i32";
    err = (pp_err){0};
    int32_t iv[4] = {1, 2, 3, 4}, ov[4];
    pprt_tensor xi = {PP_I32, SHAPE(4), iv}, oi = {PP_I32, SHAPE(4), ov};
    st = pprt_ref_kernels[PP_OP_RELU]((pp_attrs){0}, &xi, 1, &oi, 1, &shared_scratch, &err);
    CHECK(st == PP_EUNSUP && err.code == PP_EUNSUP, "got %s (%s)", pp_status_name(st), err.msg);

    check_case = "add with a non-broadcast output shape";
    err = (pp_err){0};
    pprt_tensor a2[2] = {tensor_f32(SHAPE(2, 3), FILL_UNIFORM), tensor_f32(SHAPE(3), FILL_UNIFORM)};
    pprt_tensor o2 = tensor_f32(SHAPE(2, 4), FILL_UNIFORM);
    st = pprt_ref_kernels[PP_OP_ADD]((pp_attrs){0}, a2, 2, &o2, 1, &shared_scratch, &err);
    CHECK(st == PP_EINVAL, "got %s (%s)", pp_status_name(st), err.msg);

    check_case = "gemm with two outputs";
    err = (pp_err){0};
    pprt_tensor o3[2] = {tensor_f32(SHAPE(2, 3), FILL_UNIFORM), tensor_f32(SHAPE(2, 3), FILL_UNIFORM)};
    pprt_tensor g2[2] = {tensor_f32(SHAPE(2, 3), FILL_UNIFORM), tensor_f32(SHAPE(3, 3), FILL_UNIFORM)};
    st = pprt_ref_kernels[PP_OP_GEMM]((pp_attrs){0}, g2, 2, o3, 2, &shared_scratch, &err);
    CHECK(st != PP_OK && err.code != PP_OK, "got %s", pp_status_name(st));

    check_case = "maxpool without kernel_shape";
    err = (pp_err){0};
    st = pprt_ref_kernels[PP_OP_MAXPOOL]((pp_attrs){0}, &x, 1, &o, 1, &shared_scratch, &err);
    CHECK(st == PP_EINVAL, "got %s (%s)", pp_status_name(st), err.msg);

    free(x.data), free(w.data), free(o.data), free(a2[0].data), free(a2[1].data);
    free(o2.data), free(o3[0].data), free(o3[1].data), free(g2[0].data), free(g2[1].data);
}

int main(void) {
    test_errors();
    test_convs();
    test_maxpools();
    test_gemms();
    test_adds();
    test_elementwise();
    pprt_scratch_free(&shared_scratch);
    return check_summary("test_kernels");
}
