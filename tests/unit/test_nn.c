/* test_nn.c: the nn family's shape functions (ir/shape_nn.c) and reference
 * kernels (runtime/cpu/ref_nn.c) against naive implementations written here,
 * on inputs from a fixed-seed PRNG.
 *
 * As in test_kernels.c, each case infers the outputs with pp_infer, checks the
 * shapes against ones computed independently here, runs the kernel twice
 * (fresh outputs filled with different garbage, different scratch) and
 * requires bit-identical results, then compares with the naive result
 * (computed in double) at rel 1e-4 / abs 1e-5. GEMM-based kernels get inputs
 * that are multiples of 1/64, so every partial sum is exact and an indexing
 * bug cannot hide inside the tolerance. The last part checks that bad
 * attributes and unsupported combinations fail with the right status and a
 * message naming the culprit.
 *
 * Exit status 0 when everything passes, 1 otherwise (each failure is printed). */
#include "runtime/kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bookkeeping --------------------------------------------------------------- */

#include "check.h"

static char *shape_s(const pp_shape *s) {
    static char bufs[4][128];
    static int k;
    k = (k + 1) % 4;
    return pp_shape_str(s, bufs[k], sizeof bufs[k]);
}

/* ---- PRNG: splitmix64, fixed seed ----------------------------------------------- */

static uint64_t rng_state = 0x0dd5eed5ULL;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float rng_uniform(void) { return (float)((double)(rng_next() >> 40) / 8388608.0 - 1.0); }
static float rng_grid(void) { return (float)((int)(rng_next() % 129) - 64) / 64.0f; }

/* ---- tensors --------------------------------------------------------------------- */

#define NARG(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SHAPE(...) ((pp_shape){.rank = NARG(__VA_ARGS__), .dim = {__VA_ARGS__}})
#define SCALAR ((pp_shape){.rank = 0})

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
    memset(p, 0, cap);
    return p;
}

enum fill { FILL_UNIFORM, FILL_GRID, FILL_SMALLINT };

static pprt_tensor tensor_f32(pp_shape s, enum fill f) {
    pprt_tensor t = {PP_F32, s, NULL};
    int64_t n = numel(&s);
    float *p = alloc_bytes((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = f == FILL_GRID      ? rng_grid()
               : f == FILL_UNIFORM ? rng_uniform()
                                   : (float)(rng_next() % 4); /* many ties */
    t.data = p;
    return t;
}

static pprt_tensor tensor_i64(pp_shape s, const int64_t *v) {
    pprt_tensor t = {PP_I64, s, alloc_bytes((size_t)numel(&s) * sizeof(int64_t))};
    memcpy(t.data, v, (size_t)numel(&s) * sizeof(int64_t));
    return t;
}

static pprt_tensor tensor_floats(pp_shape s, const float *v) {
    pprt_tensor t = {PP_F32, s, alloc_bytes((size_t)numel(&s) * sizeof(float))};
    memcpy(t.data, v, (size_t)numel(&s) * sizeof(float));
    return t;
}

static const pprt_tensor absent = {PP_UNDEFINED, {0}, NULL};

static void free_all(pprt_tensor *t, int n) {
    for (int i = 0; i < n; i++) free(t[i].data);
}

/* ---- attribute builder ------------------------------------------------------------ */

typedef struct attrb {
    pp_attr a[12];
    int64_t ints[12][16];
    int n, opset;
} attrb;

static attrb ab(int opset) { return (attrb){.n = 0, .opset = opset}; }
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
static pp_attrs ab_get(const attrb *b) { return (pp_attrs){b->a, b->n, b->opset}; }

/* ---- running a kernel ------------------------------------------------------------ */

static pprt_scratch shared_scratch;

/* Infer n_out outputs (constant inputs: those with const_mask bit set carry
 * their data into inference), check shapes against want[] (when given), run
 * the kernel twice and check determinism; out[] holds the first results
 * (caller frees). Returns false after reporting a failure. */
static bool run(pp_op op, pp_attrs at, const pprt_tensor *in, int n_in, unsigned const_mask,
                const pp_shape *want, int n_out, pprt_tensor *out) {
    pp_tinfo ti[8], to[3];
    for (int i = 0; i < n_in; i++)
        ti[i] = (pp_tinfo){in[i].dtype, in[i].shape, (const_mask >> i) & 1 ? in[i].data : NULL};
    pp_err err = {0};
    pp_status st = pp_infer(op, at, ti, n_in, to, n_out, &err);
    if (st != PP_OK) {
        CHECK_FAIL("pp_infer: %s: %s", pp_status_name(st), err.msg);
        return false;
    }
    for (int k = 0; want && k < n_out; k++)
        if (!pp_shape_eq(&want[k], &to[k].shape)) {
            CHECK_FAIL("pp_infer gives output %d shape %s, expected %s", k, shape_s(&to[k].shape),
                 shape_s(&want[k]));
            return false;
        }
    pprt_tensor o[2][3];
    size_t nb[3];
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < n_out; k++) {
            nb[k] = (size_t)numel(&to[k].shape) * pp_dtype_size(to[k].dtype);
            o[r][k] = (pprt_tensor){to[k].dtype, to[k].shape, alloc_bytes(nb[k])};
            memset(o[r][k].data, r ? 0xA5 : 0xFF, nb[k]);
        }
        pprt_scratch fresh = {0};
        pp_err e = {0};
        st = pprt_ref_kernels[op](at, in, n_in, o[r], n_out, r ? &fresh : &shared_scratch, &e);
        pprt_scratch_free(&fresh);
        if (st != PP_OK) {
            CHECK_FAIL("kernel (run %d): %s: %s", r + 1, pp_status_name(st), e.msg);
            for (int q = 0; q <= r; q++) free_all(o[q], n_out);
            return false;
        }
    }
    for (int k = 0; k < n_out; k++) {
        CHECK(memcmp(o[0][k].data, o[1][k].data, nb[k]) == 0,
              "output %d: two runs are not bit-identical", k);
        out[k] = o[0][k];
    }
    free_all(o[1], n_out);
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
            CHECK_FAIL("element %lld: got %.9g, expected %.9g", (long long)i, got[i], want[i]);
        bad++;
    }
    check_count++;
    if (bad > 5) CHECK_FAIL("... %lld of %lld elements differ", (long long)bad, (long long)n);
}

static void expect_i64(const int64_t *got, const int64_t *want, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 5)
            CHECK_FAIL("element %lld: got %lld, expected %lld", (long long)i, (long long)got[i],
                 (long long)want[i]);
    check_count++;
}

static double *dbuf(int64_t n) { return alloc_bytes((size_t)(n ? n : 1) * sizeof(double)); }

/* ---- ConvTranspose ------------------------------------------------------------------- */

typedef struct ct_case {
    int nsp;
    int64_t N, C, M, group, in[3], k[3], s[3], d[3], p0[3], p1[3], op[3];
    bool bias;
    int64_t out_shape[3]; /* 0: not given */
} ct_case;

static void test_convt_one(const ct_case *c) {
    int64_t out[3], pad0[3];
    for (int i = 0; i < c->nsp; i++) {
        int64_t full = c->s[i] * (c->in[i] - 1) + c->op[i] + c->d[i] * (c->k[i] - 1) + 1;
        if (c->out_shape[0]) {
            int64_t total = full - c->out_shape[i];
            out[i] = c->out_shape[i];
            pad0[i] = total < 0 ? 0 : total - total / 2; /* NOTSET: the extra at the start */
        } else {
            out[i] = full - c->p0[i] - c->p1[i];
            pad0[i] = c->p0[i];
        }
    }
    pp_shape xs = {.rank = 2 + c->nsp, .dim = {c->N, c->C}};
    pp_shape ws = {.rank = 2 + c->nsp, .dim = {c->C, c->M / c->group}};
    pp_shape ys = {.rank = 2 + c->nsp, .dim = {c->N, c->M}};
    for (int i = 0; i < c->nsp; i++) {
        xs.dim[2 + i] = c->in[i];
        ws.dim[2 + i] = c->k[i];
        ys.dim[2 + i] = out[i];
    }
    attrb b = ab(17);
    ab_int(&b, "group", c->group);
    ab_ints(&b, "strides", c->s, c->nsp);
    ab_ints(&b, "dilations", c->d, c->nsp);
    ab_ints(&b, "output_padding", c->op, c->nsp);
    if (c->out_shape[0]) {
        ab_ints(&b, "output_shape", c->out_shape, c->nsp);
    } else {
        int64_t pads[6];
        for (int i = 0; i < c->nsp; i++) pads[i] = c->p0[i], pads[c->nsp + i] = c->p1[i];
        ab_ints(&b, "pads", pads, 2 * c->nsp);
    }
    pprt_tensor in[3] = {tensor_f32(xs, FILL_GRID), tensor_f32(ws, FILL_GRID),
                         c->bias ? tensor_f32(SHAPE(c->M), FILL_GRID) : absent};
    pprt_tensor y;
    if (run(PP_OP_CONVTRANSPOSE, ab_get(&b), in, c->bias ? 3 : 2, 0, &ys, 1, &y)) {
        /* naive scatter over the lifted 3-D geometry */
        int off = 3 - c->nsp;
        int64_t I[3], K[3], S[3], D[3], P[3], O[3];
        for (int i = 0; i < 3; i++) {
            int j = i - off;
            I[i] = j >= 0 ? c->in[j] : 1, K[i] = j >= 0 ? c->k[j] : 1;
            S[i] = j >= 0 ? c->s[j] : 1, D[i] = j >= 0 ? c->d[j] : 1;
            P[i] = j >= 0 ? pad0[j] : 0, O[i] = j >= 0 ? out[j] : 1;
        }
        const int64_t Pin = I[0] * I[1] * I[2], Po = O[0] * O[1] * O[2], kv = K[0] * K[1] * K[2];
        const int64_t Cg = c->C / c->group, Mg = c->M / c->group;
        double *want = dbuf(c->N * c->M * Po);
        const float *x = in[0].data, *w = in[1].data, *bb = in[2].data;
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t m = 0; m < c->M; m++) {
                int64_t g = m / Mg, mm = m % Mg;
                double *yp = want + (n * c->M + m) * Po;
                for (int64_t p = 0; p < Po; p++) yp[p] = bb ? bb[m] : 0.0;
                for (int64_t cc = 0; cc < Cg; cc++) {
                    int64_t ch = g * Cg + cc;
                    for (int64_t i0 = 0; i0 < I[0]; i0++)
                        for (int64_t i1 = 0; i1 < I[1]; i1++)
                            for (int64_t i2 = 0; i2 < I[2]; i2++)
                                for (int64_t a = 0; a < K[0]; a++)
                                    for (int64_t e = 0; e < K[1]; e++)
                                        for (int64_t f = 0; f < K[2]; f++) {
                                            int64_t o0 = i0 * S[0] + a * D[0] - P[0];
                                            int64_t o1 = i1 * S[1] + e * D[1] - P[1];
                                            int64_t o2 = i2 * S[2] + f * D[2] - P[2];
                                            if (o0 < 0 || o0 >= O[0] || o1 < 0 || o1 >= O[1] ||
                                                o2 < 0 || o2 >= O[2])
                                                continue;
                                            double xv = x[(n * c->C + ch) * Pin +
                                                          (i0 * I[1] + i1) * I[2] + i2];
                                            double wv = w[(ch * Mg + mm) * kv +
                                                          (a * K[1] + e) * K[2] + f];
                                            yp[(o0 * O[1] + o1) * O[2] + o2] += xv * wv;
                                        }
                }
            }
        expect_close(y.data, want, c->N * c->M * Po);
        free(want);
        free(y.data);
    }
    free_all(in, 3);
}

static void test_convts(void) {
    check_case = "ConvTranspose 1-D";
    test_convt_one(&(ct_case){1, 2, 3, 4, 1, {7}, {3}, {2}, {1}, {1}, {0}, {1}, true, {0}});
    check_case = "ConvTranspose 2-D groups, dilations, pads, output_padding";
    test_convt_one(&(ct_case){2, 2, 4, 6, 2, {5, 4}, {3, 2}, {2, 3}, {2, 1}, {1, 0}, {2, 1},
                              {1, 2}, true, {0}});
    check_case = "ConvTranspose 3-D";
    test_convt_one(&(ct_case){3, 1, 2, 3, 1, {3, 4, 2}, {2, 3, 2}, {1, 2, 2}, {1, 1, 2},
                              {0, 1, 0}, {1, 0, 0}, {0, 1, 0}, false, {0}});
    check_case = "ConvTranspose output_shape";
    test_convt_one(&(ct_case){2, 1, 2, 2, 1, {3, 3}, {3, 3}, {3, 2}, {1, 1}, {0}, {0}, {0, 0},
                              false, {10, 6}});
    /* less than a stride past the full output (7): zeros at the end, as output_padding would
     * give; a stride or more past is refused (tests/bad/bad_inputs.py) */
    check_case = "ConvTranspose output_shape larger than the full output";
    test_convt_one(&(ct_case){2, 1, 1, 2, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, {0, 0},
                              true, {8, 8}});
    check_case = "ConvTranspose depthwise 1x1 many channels";
    test_convt_one(&(ct_case){2, 2, 16, 16, 16, {6, 5}, {1, 1}, {1, 1}, {1, 1}, {0}, {0}, {0},
                              true, {0}});
}

/* ---- MatMul and Einsum -------------------------------------------------------------------- */

/* naive numpy matmul on f32 into double */
static void test_matmul_one(pp_shape as, pp_shape bs, pp_shape ys) {
    pprt_tensor in[2] = {tensor_f32(as, FILL_GRID), tensor_f32(bs, FILL_GRID)};
    pprt_tensor y;
    if (run(PP_OP_MATMUL, (pp_attrs){0}, in, 2, 0, &ys, 1, &y)) {
        /* promote to >= 2-D and broadcast the batch */
        pp_shape a = as, b = bs;
        if (a.rank == 1) a = (pp_shape){.rank = 2, .dim = {1, as.dim[0]}};
        if (b.rank == 1) b = (pp_shape){.rank = 2, .dim = {bs.dim[0], 1}};
        int64_t M = a.dim[a.rank - 2], K = a.dim[a.rank - 1], N = b.dim[b.rank - 1];
        int nb = (a.rank > b.rank ? a.rank : b.rank) - 2;
        int64_t bd[PP_MAX_DIMS], batches = 1;
        for (int i = 0; i < nb; i++) {
            int ia = i - (nb - (a.rank - 2)), ib = i - (nb - (b.rank - 2));
            int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
            bd[i] = da > db ? da : db;
            batches *= bd[i];
        }
        double *want = dbuf(batches * M * N);
        const float *A = in[0].data, *B = in[1].data;
        for (int64_t t = 0; t < batches; t++) {
            int64_t oa = 0, ob = 0, rem = t, ka = 1, kb = 1;
            for (int i = nb - 1; i >= 0; i--) {
                int64_t idx = rem % bd[i];
                rem /= bd[i];
                int ia = i - (nb - (a.rank - 2)), ib = i - (nb - (b.rank - 2));
                int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
                oa += (da == 1 ? 0 : idx) * ka;
                ob += (db == 1 ? 0 : idx) * kb;
                ka *= da;
                kb *= db;
            }
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += (double)A[oa * M * K + i * K + k] * B[ob * K * N + k * N + j];
                    want[(t * M + i) * N + j] = s;
                }
        }
        expect_close(y.data, want, numel(&ys));
        free(want);
        free(y.data);
    }
    free_all(in, 2);
}

static void test_matmuls(void) {
    check_case = "MatMul 2-D";
    test_matmul_one(SHAPE(37, 70), SHAPE(70, 45), SHAPE(37, 45));
    check_case = "MatMul batch x matrix (folded)";
    test_matmul_one(SHAPE(2, 3, 9, 33), SHAPE(33, 7), SHAPE(2, 3, 9, 7));
    check_case = "MatMul broadcast batch";
    test_matmul_one(SHAPE(2, 1, 4, 5), SHAPE(3, 5, 6), SHAPE(2, 3, 4, 6));
    check_case = "MatMul 1-D x 1-D";
    test_matmul_one(SHAPE(9), SHAPE(9), SCALAR);
    check_case = "MatMul 1-D x 3-D";
    test_matmul_one(SHAPE(4), SHAPE(2, 4, 3), SHAPE(2, 3));
    check_case = "MatMul 3-D x 1-D";
    test_matmul_one(SHAPE(2, 3, 4), SHAPE(4), SHAPE(2, 3));
    check_case = "MatMul K = 0";
    test_matmul_one(SHAPE(3, 0), SHAPE(0, 2), SHAPE(3, 2));
}

static void test_einsum_attention(void) {
    /* 'bhqd,bhkd->bhqk' (GEMM path) against a loop */
    check_case = "Einsum bhqd,bhkd->bhqk";
    const int64_t B = 2, H = 3, Q = 5, Kk = 4, D = 8;
    pprt_tensor in[2] = {tensor_f32(SHAPE(B, H, Q, D), FILL_GRID),
                         tensor_f32(SHAPE(B, H, Kk, D), FILL_GRID)};
    attrb b = ab(12);
    ab_str(&b, "equation", "bhqd, bhkd -> bhqk");
    pprt_tensor y;
    pp_shape ys = SHAPE(B, H, Q, Kk);
    if (run(PP_OP_EINSUM, ab_get(&b), in, 2, 0, &ys, 1, &y)) {
        double *want = dbuf(numel(&ys));
        const float *q = in[0].data, *k = in[1].data;
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t i = 0; i < Q; i++)
                for (int64_t j = 0; j < Kk; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)q[(bh * Q + i) * D + d] * k[(bh * Kk + j) * D + d];
                    want[(bh * Q + i) * Kk + j] = s;
                }
        expect_close(y.data, want, numel(&ys));
        free(want);
        free(y.data);
    }
    /* 'bhqd,bhkd->bqkh': the same products, a permuted output */
    check_case = "Einsum bhqd,bhkd->bqkh";
    attrb b2 = ab(12);
    ab_str(&b2, "equation", "bhqd,bhkd->bqkh");
    pprt_tensor y2;
    pp_shape ys2 = SHAPE(B, Q, Kk, H);
    if (run(PP_OP_EINSUM, ab_get(&b2), in, 2, 0, &ys2, 1, &y2)) {
        pprt_tensor y1;
        if (run(PP_OP_EINSUM, ab_get(&b), in, 2, 0, &ys, 1, &y1)) {
            const float *p1 = y1.data, *p2 = y2.data;
            int64_t bad = 0;
            for (int64_t bb = 0; bb < B; bb++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < Q; i++)
                        for (int64_t j = 0; j < Kk; j++)
                            bad += p1[((bb * H + h) * Q + i) * Kk + j] !=
                                   p2[((bb * Q + i) * Kk + j) * H + h];
            CHECK(bad == 0, "%lld elements differ from the bhqk result", (long long)bad);
            free(y1.data);
        }
        free(y2.data);
    }
    free_all(in, 2);

    /* one-operand forms through the generic loop: transpose, diagonal, sum */
    check_case = "Einsum ...ii->...i, ij->ji, ij->";
    pprt_tensor x = tensor_f32(SHAPE(2, 4, 4), FILL_UNIFORM);
    attrb b3 = ab(12);
    ab_str(&b3, "equation", "...ii->...i");
    pp_shape ds = SHAPE(2, 4);
    if (run(PP_OP_EINSUM, ab_get(&b3), &x, 1, 0, &ds, 1, &y)) {
        double want[8];
        const float *xp = x.data;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = xp[i * 16 + j * 4 + j];
        expect_close(y.data, want, 8);
        free(y.data);
    }
    pprt_tensor m = tensor_f32(SHAPE(3, 5), FILL_UNIFORM);
    attrb b4 = ab(12);
    ab_str(&b4, "equation", "ij->ji");
    pp_shape ts = SHAPE(5, 3);
    if (run(PP_OP_EINSUM, ab_get(&b4), &m, 1, 0, &ts, 1, &y)) {
        double want[15];
        const float *mp = m.data;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) want[j * 3 + i] = mp[i * 5 + j];
        expect_close(y.data, want, 15);
        free(y.data);
    }
    attrb b5 = ab(12);
    ab_str(&b5, "equation", "ij->");
    pp_shape ss = SCALAR;
    if (run(PP_OP_EINSUM, ab_get(&b5), &m, 1, 0, &ss, 1, &y)) {
        double want = 0;
        for (int i = 0; i < 15; i++) want += ((const float *)m.data)[i];
        expect_close(y.data, &want, 1);
        free(y.data);
    }
    free(x.data), free(m.data);
}

/* ---- Softmax, reductions, ordering ----------------------------------------------------------- */

static void test_softmax_one(pp_op op, int opset, int64_t axis, pp_shape xs, int64_t outer,
                             int64_t n, int64_t inner) {
    pprt_tensor x = tensor_f32(xs, FILL_UNIFORM);
    for (int64_t i = 0; i < numel(&xs); i++) ((float *)x.data)[i] *= 30.0f; /* large values */
    attrb b = ab(opset);
    ab_int(&b, "axis", axis);
    pprt_tensor y;
    if (run(op, ab_get(&b), &x, 1, 0, &xs, 1, &y)) {
        double *want = dbuf(numel(&xs));
        const float *xp = x.data;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double m = -INFINITY, s = 0;
                for (int64_t j = 0; j < n; j++) m = fmax(m, xp[(o * n + j) * inner + i]);
                for (int64_t j = 0; j < n; j++) s += exp(xp[(o * n + j) * inner + i] - m);
                for (int64_t j = 0; j < n; j++) {
                    double v = xp[(o * n + j) * inner + i] - m;
                    want[(o * n + j) * inner + i] = op == PP_OP_SOFTMAX ? exp(v) / s : v - log(s);
                }
            }
        expect_close(y.data, want, numel(&xs));
        free(want);
        free(y.data);
    }
    free(x.data);
}

static void test_softmaxes(void) {
    check_case = "Softmax opset 13 axis 1";
    test_softmax_one(PP_OP_SOFTMAX, 13, 1, SHAPE(2, 5, 3), 2, 5, 3);
    check_case = "Softmax opset 11 axis 1 (coerced to 2-D)";
    test_softmax_one(PP_OP_SOFTMAX, 11, 1, SHAPE(2, 5, 3), 2, 15, 1);
    check_case = "LogSoftmax opset 13 last axis";
    test_softmax_one(PP_OP_LOGSOFTMAX, 13, -1, SHAPE(4, 33), 4, 33, 1);
    check_case = "LogSoftmax opset 12 axis 0";
    test_softmax_one(PP_OP_LOGSOFTMAX, 12, 0, SHAPE(3, 4), 1, 12, 1);
}

static void test_reduce_one(pp_op op, pp_shape xs, const int64_t *axes, int na, bool keep,
                            pp_shape ys) {
    pprt_tensor in[2] = {tensor_f32(xs, FILL_UNIFORM),
                         na ? tensor_i64(SHAPE(na), axes) : absent};
    attrb b = ab(18);
    ab_int(&b, "keepdims", keep);
    pprt_tensor y;
    if (run(op, ab_get(&b), in, na ? 2 : 1, 2u, &ys, 1, &y)) {
        bool red[PP_MAX_DIMS] = {false};
        for (int i = 0; i < na; i++) red[axes[i] < 0 ? axes[i] + xs.rank : axes[i]] = true;
        if (!na)
            for (int i = 0; i < xs.rank; i++) red[i] = true;
        int64_t no = numel(&ys), nx = numel(&xs), cnt = nx / (no ? no : 1);
        double *acc = dbuf(no);
        for (int64_t o = 0; o < no; o++)
            acc[o] = op == PP_OP_REDUCEMAX ? -INFINITY : 0.0;
        for (int64_t i = 0; i < nx; i++) {
            /* output index: the kept coordinates in order */
            int64_t rem = i, o = 0, k = 1, coord[PP_MAX_DIMS];
            for (int d = xs.rank - 1; d >= 0; d--) coord[d] = rem % xs.dim[d], rem /= xs.dim[d];
            for (int d = xs.rank - 1; d >= 0; d--)
                if (!red[d]) o += coord[d] * k, k *= xs.dim[d];
            double v = ((const float *)in[0].data)[i];
            if (op == PP_OP_REDUCEMAX) acc[o] = fmax(acc[o], v);
            else if (op == PP_OP_REDUCEL2) acc[o] += v * v;
            else acc[o] += v;
        }
        for (int64_t o = 0; o < no; o++) {
            if (op == PP_OP_REDUCEMEAN) acc[o] /= (double)cnt;
            if (op == PP_OP_REDUCEL2) acc[o] = sqrt(acc[o]);
        }
        expect_close(y.data, acc, no);
        free(acc);
        free(y.data);
    }
    free_all(in, 2);
}

static void test_reductions(void) {
    check_case = "ReduceSum axes [0, 2] keepdims";
    test_reduce_one(PP_OP_REDUCESUM, SHAPE(3, 4, 5), (int64_t[]){0, 2}, 2, true, SHAPE(1, 4, 1));
    check_case = "ReduceMean axis -1";
    test_reduce_one(PP_OP_REDUCEMEAN, SHAPE(3, 4, 50), (int64_t[]){-1}, 1, false, SHAPE(3, 4));
    check_case = "ReduceMax axes [1, 3]";
    test_reduce_one(PP_OP_REDUCEMAX, SHAPE(2, 3, 4, 5), (int64_t[]){1, 3}, 2, false, SHAPE(2, 4));
    check_case = "ReduceL2 all axes";
    test_reduce_one(PP_OP_REDUCEL2, SHAPE(2, 3, 4), NULL, 0, true, SHAPE(1, 1, 1));
    check_case = "ReduceSum over an empty axis";
    test_reduce_one(PP_OP_REDUCESUM, SHAPE(2, 0, 3), (int64_t[]){1}, 1, true, SHAPE(2, 1, 3));
}

static void test_topk_argmax(void) {
    check_case = "TopK ties keep the lower index first";
    const float xv[2 * 6] = {1, 3, 3, 2, 3, 0, /**/ 5, 5, 5, 5, 5, 5};
    pprt_tensor in[2] = {tensor_floats(SHAPE(2, 6), xv), tensor_i64(SHAPE(1), (int64_t[]){3})};
    pprt_tensor y[2];
    pp_shape ys[2] = {SHAPE(2, 3), SHAPE(2, 3)};
    attrb b = ab(11);
    if (run(PP_OP_TOPK, ab_get(&b), in, 2, 2u, ys, 2, y)) {
        double wv[6] = {3, 3, 3, 5, 5, 5};
        int64_t wi[6] = {1, 2, 4, 0, 1, 2};
        expect_close(y[0].data, wv, 6);
        expect_i64(y[1].data, wi, 6);
        free_all(y, 2);
    }
    check_case = "TopK smallest along axis 0";
    attrb b2 = ab(11);
    ab_int(&b2, "largest", 0);
    ab_int(&b2, "axis", 0);
    pprt_tensor in2[2] = {tensor_floats(SHAPE(6, 2), xv), tensor_i64(SHAPE(1), (int64_t[]){2})};
    pp_shape ys2[2] = {SHAPE(2, 2), SHAPE(2, 2)};
    if (run(PP_OP_TOPK, ab_get(&b2), in2, 2, 2u, ys2, 2, y)) {
        /* columns: [1,3,3,5,5,5] and [3,2,0,5,5,5] */
        double wv[4] = {1, 0, 3, 2};
        int64_t wi[4] = {0, 2, 1, 1};
        expect_close(y[0].data, wv, 4);
        expect_i64(y[1].data, wi, 4);
        free_all(y, 2);
    }
    /* NaN is the largest key (onnxruntime's and PyTorch's TopK), NaNs tie by index */
    check_case = "TopK largest takes NaN first";
    const float nv[2 * 5] = {1, NAN, 3, NAN, 2, /**/ -INFINITY, NAN, INFINITY, -0.0f, 0};
    pprt_tensor in3[2] = {tensor_floats(SHAPE(2, 5), nv), tensor_i64(SHAPE(1), (int64_t[]){3})};
    pp_shape ys3[2] = {SHAPE(2, 3), SHAPE(2, 3)};
    if (run(PP_OP_TOPK, ab_get(&b), in3, 2, 2u, ys3, 2, y)) {
        double wv[6] = {NAN, NAN, 3, NAN, INFINITY, 0};
        int64_t wi[6] = {1, 3, 2, 1, 2, 3};
        expect_close(y[0].data, wv, 6);
        expect_i64(y[1].data, wi, 6);
        free_all(y, 2);
    }
    check_case = "TopK smallest takes NaN last";
    attrb b5 = ab(11);
    ab_int(&b5, "largest", 0);
    free(in3[1].data);
    in3[1] = tensor_i64(SHAPE(1), (int64_t[]){5});
    pp_shape ys5[2] = {SHAPE(2, 5), SHAPE(2, 5)};
    if (run(PP_OP_TOPK, ab_get(&b5), in3, 2, 2u, ys5, 2, y)) {
        double wv[10] = {1, 2, 3, NAN, NAN, -INFINITY, 0, 0, INFINITY, NAN};
        int64_t wi[10] = {0, 4, 2, 1, 3, 0, 3, 4, 2, 1};
        expect_close(y[0].data, wv, 10);
        expect_i64(y[1].data, wi, 10);
        free_all(y, 2);
    }
    check_case = "ArgMax select_last_index";
    attrb b3 = ab(13);
    ab_int(&b3, "axis", 1);
    ab_int(&b3, "select_last_index", 1);
    ab_int(&b3, "keepdims", 0);
    pp_shape as = SHAPE(2);
    if (run(PP_OP_ARGMAX, ab_get(&b3), in, 1, 0, &as, 1, y)) {
        int64_t wi[2] = {4, 5};
        expect_i64(y[0].data, wi, 2);
        free(y[0].data);
    }
    check_case = "ArgMin first index";
    attrb b4 = ab(13);
    ab_int(&b4, "axis", -1);
    pp_shape as2 = SHAPE(2, 1);
    if (run(PP_OP_ARGMIN, ab_get(&b4), in, 1, 0, &as2, 1, y)) {
        int64_t wi[2] = {5, 0};
        expect_i64(y[0].data, wi, 2);
        free(y[0].data);
    }
    free_all(in, 2);
    free_all(in2, 2);
    free_all(in3, 2);
}

/* ---- normalizations and pooling -------------------------------------------------------------- */

/* y = (x - mean) / sqrt(var + eps) over groups of n consecutive elements */
static void naive_norm(const float *x, int64_t groups, int64_t n, double eps, double *y,
                       double *mean, double *inv) {
    for (int64_t g = 0; g < groups; g++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < n; i++) m += x[g * n + i];
        m /= (double)n;
        for (int64_t i = 0; i < n; i++) v += (x[g * n + i] - m) * (x[g * n + i] - m);
        v /= (double)n;
        double r = 1.0 / sqrt(v + eps);
        for (int64_t i = 0; i < n; i++) y[g * n + i] = (x[g * n + i] - m) * r;
        if (mean) mean[g] = m;
        if (inv) inv[g] = r;
    }
}

static void test_norms(void) {
    check_case = "LayerNormalization axis 1, all outputs";
    pp_shape xs = SHAPE(3, 4, 5);
    pprt_tensor in[3] = {tensor_f32(xs, FILL_UNIFORM), tensor_f32(SHAPE(4, 5), FILL_UNIFORM),
                         tensor_f32(SHAPE(5), FILL_UNIFORM)};
    attrb b = ab(17);
    ab_int(&b, "axis", 1);
    ab_float(&b, "epsilon", 1e-3f);
    pp_shape ys[3] = {xs, SHAPE(3, 1, 1), SHAPE(3, 1, 1)};
    pprt_tensor y[3];
    if (run(PP_OP_LAYERNORM, ab_get(&b), in, 3, 0, ys, 3, y)) {
        double want[60], mean[3], inv[3];
        naive_norm(in[0].data, 3, 20, 1e-3f, want, mean, inv);
        const float *s = in[1].data, *bb = in[2].data;
        for (int i = 0; i < 60; i++) want[i] = want[i] * s[i % 20] + bb[i % 5];
        expect_close(y[0].data, want, 60);
        expect_close(y[1].data, mean, 3);
        expect_close(y[2].data, inv, 3);
        free_all(y, 3);
    }
    free_all(in, 3);

    for (int opset = 18; opset <= 21; opset += 3) {
        check_case = opset == 18 ? "GroupNormalization opset 18 (per-group scale)"
                               : "GroupNormalization opset 21 (per-channel scale)";
        const int64_t N = 2, C = 6, G = 3, S = 4, ns = opset == 18 ? G : C;
        pp_shape gs = SHAPE(N, C, 2, 2);
        pprt_tensor gin[3] = {tensor_f32(gs, FILL_UNIFORM), tensor_f32(SHAPE(ns), FILL_UNIFORM),
                              tensor_f32(SHAPE(ns), FILL_UNIFORM)};
        attrb gb = ab(opset);
        ab_int(&gb, "num_groups", G);
        pprt_tensor gy;
        if (run(PP_OP_GROUPNORM, ab_get(&gb), gin, 3, 0, &gs, 1, &gy)) {
            double want[48];
            naive_norm(gin[0].data, N * G, C / G * S, 1e-5f, want, NULL, NULL);
            const float *s = gin[1].data, *bb = gin[2].data;
            for (int64_t i = 0; i < 48; i++) {
                int64_t c = (i / S) % C, k = opset == 18 ? c / (C / G) : c;
                want[i] = want[i] * s[k] + bb[k];
            }
            expect_close(gy.data, want, 48);
            free(gy.data);
        }
        free_all(gin, 3);
    }

    check_case = "InstanceNormalization";
    pp_shape is = SHAPE(2, 3, 7);
    pprt_tensor iin[3] = {tensor_f32(is, FILL_UNIFORM), tensor_f32(SHAPE(3), FILL_UNIFORM),
                          tensor_f32(SHAPE(3), FILL_UNIFORM)};
    attrb ib = ab(12);
    pprt_tensor iy;
    if (run(PP_OP_INSTANCENORM, ab_get(&ib), iin, 3, 0, &is, 1, &iy)) {
        double want[42];
        naive_norm(iin[0].data, 6, 7, 1e-5f, want, NULL, NULL);
        const float *s = iin[1].data, *bb = iin[2].data;
        for (int i = 0; i < 42; i++) want[i] = want[i] * s[(i / 7) % 3] + bb[(i / 7) % 3];
        expect_close(iy.data, want, 42);
        free(iy.data);
    }
    free_all(iin, 3);
}

static void test_pools(void) {
    /* 1-D, kernel 3, stride 2, pads 1/2, ceil_mode: windows clipped by input and pads */
    for (int cip = 0; cip <= 1; cip++) {
        check_case = cip ? "AveragePool count_include_pad=1" : "AveragePool count_include_pad=0";
        const float xv[6] = {1, 2, 3, 4, 5, 6};
        pprt_tensor x = tensor_floats(SHAPE(1, 1, 6), xv);
        attrb b = ab(19);
        ab_ints(&b, "kernel_shape", (int64_t[]){3}, 1);
        ab_ints(&b, "strides", (int64_t[]){2}, 1);
        ab_ints(&b, "pads", (int64_t[]){1, 2}, 2);
        ab_int(&b, "ceil_mode", 1);
        ab_int(&b, "count_include_pad", cip);
        /* (6 + 3 - 3) / 2 + 1 = 4 windows starting at -1, 1, 3, 5 */
        pp_shape ys = SHAPE(1, 1, 4);
        pprt_tensor y;
        if (run(PP_OP_AVGPOOL, ab_get(&b), &x, 1, 0, &ys, 1, &y)) {
            double w0[4] = {1.5, 3, 5, 6}, w1[4] = {1, 3, 5, 6.0 / 3.0};
            expect_close(y.data, cip ? w1 : w0, 4);
            free(y.data);
        }
        free(x.data);
    }
    check_case = "MaxPool Indices, row- and column-major";
    const float xv[12] = {0, 9, 2, 3, /**/ 4, 5, 11, 7, /**/ 8, 1, 10, 6};
    pprt_tensor x = tensor_floats(SHAPE(1, 1, 3, 4), xv);
    for (int so = 0; so <= 1; so++) {
        attrb b = ab(12);
        ab_ints(&b, "kernel_shape", (int64_t[]){2, 2}, 2);
        ab_int(&b, "storage_order", so);
        pp_shape ys[2] = {SHAPE(1, 1, 2, 3), SHAPE(1, 1, 2, 3)};
        pprt_tensor y[2];
        if (run(PP_OP_MAXPOOL, ab_get(&b), &x, 1, 0, ys, 2, y)) {
            double wv[6] = {9, 11, 11, 8, 11, 11};
            /* (h, w) of each max: (0,1) (1,2) (1,2) (2,0) (1,2) (1,2) */
            int64_t rm[6] = {1, 6, 6, 8, 6, 6}, cm[6] = {3, 7, 7, 2, 7, 7};
            expect_close(y[0].data, wv, 6);
            expect_i64(y[1].data, so ? cm : rm, 6);
            free_all(y, 2);
        }
    }
    free(x.data);
}

/* ---- Resize ----------------------------------------------------------------------------------- */

static void test_resizes(void) {
    const float xv[6] = {1, 2, 4, /**/ 8, 16, 32};
    pprt_tensor in[4] = {tensor_floats(SHAPE(1, 1, 2, 3), xv), absent,
                         tensor_floats(SHAPE(4), (float[]){1, 1, 2, 2}), absent};
    pprt_tensor y;
    check_case = "Resize nearest asymmetric floor x2";
    attrb b = ab(13);
    ab_str(&b, "mode", "nearest");
    ab_str(&b, "coordinate_transformation_mode", "asymmetric");
    ab_str(&b, "nearest_mode", "floor");
    pp_shape ys = SHAPE(1, 1, 4, 6);
    if (run(PP_OP_RESIZE, ab_get(&b), in, 3, 4u, &ys, 1, &y)) {
        double want[24];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) want[i * 6 + j] = xv[(i / 2) * 3 + j / 2];
        expect_close(y.data, want, 24);
        free(y.data);
    }
    check_case = "Resize linear align_corners to sizes [1,1,3,5]";
    free(in[2].data);
    in[2] = absent;
    in[3] = tensor_i64(SHAPE(4), (int64_t[]){1, 1, 3, 5});
    attrb b2 = ab(13);
    ab_str(&b2, "mode", "linear");
    ab_str(&b2, "coordinate_transformation_mode", "align_corners");
    pp_shape ys2 = SHAPE(1, 1, 3, 5);
    if (run(PP_OP_RESIZE, ab_get(&b2), in, 4, 8u, &ys2, 1, &y)) {
        double want[15];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                double r = i * 1.0 / 2.0, c = j * 2.0 / 4.0; /* source coordinates */
                int r0 = (int)floor(r), c0 = (int)floor(c);
                int r1 = r0 + 1 < 2 ? r0 + 1 : 1, c1 = c0 + 1 < 3 ? c0 + 1 : 2;
                double fr = r - r0, fc = c - c0;
                double top = xv[r0 * 3 + c0] * (1 - fc) + xv[r0 * 3 + c1] * fc;
                double bot = xv[r1 * 3 + c0] * (1 - fc) + xv[r1 * 3 + c1] * fc;
                want[i * 5 + j] = top * (1 - fr) + bot * fr;
            }
        expect_close(y.data, want, 15);
        free(y.data);
    }
    free(in[0].data), free(in[3].data);
}

/* ---- errors ------------------------------------------------------------------------------------ */

/* pp_infer must fail with `code` and a message containing `needle`. */
static void expect_reject(const char *what, pp_op op, pp_attrs at, const pp_tinfo *in, int n_in,
                          int n_out, pp_status code, const char *needle) {
    check_case = what;
    pp_tinfo out[3];
    pp_err err = {0};
    pp_status st = pp_infer(op, at, in, n_in, out, n_out, &err);
    CHECK(st == code && strstr(err.msg, needle),
          "expected %s mentioning '%s', got %s: %s", pp_status_name(code), needle,
          pp_status_name(st), err.msg);
}

static void test_errors(void) {
    const int64_t k2[1] = {2};
    pp_tinfo x = {PP_F32, SHAPE(2, 3, 4, 4), NULL};
    pp_tinfo kin_var = {PP_I64, SHAPE(1), NULL}, kin = {PP_I64, SHAPE(1), k2};
    attrb b = ab(11);
    expect_reject("TopK with a K computed at run time", PP_OP_TOPK, ab_get(&b),
                  (pp_tinfo[]){x, kin_var}, 2, 2, PP_EUNSUP, "constant");
    b = ab(11);
    ab_int(&b, "axis", 4);
    expect_reject("TopK axis out of range", PP_OP_TOPK, ab_get(&b), (pp_tinfo[]){x, kin}, 2, 2,
                  PP_EINVAL, "'axis'=4");
    b = ab(13);
    ab_int(&b, "axis", -5);
    expect_reject("Softmax axis out of range", PP_OP_SOFTMAX, ab_get(&b), &x, 1, 1, PP_EINVAL,
                  "'axis'=-5");
    b = ab(12);
    ab_str(&b, "equation", "ij,jk->ik");
    expect_reject("Einsum extents disagree", PP_OP_EINSUM, ab_get(&b),
                  (pp_tinfo[]){{PP_F32, SHAPE(2, 3), NULL}, {PP_F32, SHAPE(4, 5), NULL}}, 2, 1,
                  PP_EINVAL, "label 'j'");
    b = ab(12);
    ab_str(&b, "equation", "ij->k");
    expect_reject("Einsum output label in no input", PP_OP_EINSUM, ab_get(&b),
                  (pp_tinfo[]){{PP_F32, SHAPE(2, 3), NULL}}, 1, 1, PP_EINVAL, "'k'");
    b = ab(17);
    ab_int(&b, "stash_type", 11);
    expect_reject("LayerNormalization stash_type double", PP_OP_LAYERNORM, ab_get(&b),
                  (pp_tinfo[]){x, {PP_F32, SHAPE(4), NULL}}, 2, 1, PP_EUNSUP, "stash_type");
    b = ab(15);
    ab_int(&b, "training_mode", 2);
    pp_tinfo v3 = {PP_F32, SHAPE(3), NULL};
    expect_reject("BatchNormalization training_mode 2", PP_OP_BATCHNORM, ab_get(&b),
                  (pp_tinfo[]){x, v3, v3, v3, v3}, 5, 1, PP_EINVAL, "must be 0 or 1");
    b = ab(15);
    expect_reject("BatchNormalization running statistics in inference", PP_OP_BATCHNORM, ab_get(&b),
                  (pp_tinfo[]){x, v3, v3, v3, v3}, 5, 3, PP_EINVAL, "exist only in training");
    b = ab(7);
    ab_int(&b, "spatial", 0);
    expect_reject("BatchNormalization spatial 0", PP_OP_BATCHNORM, ab_get(&b),
                  (pp_tinfo[]){x, v3, v3, v3, v3}, 5, 1, PP_EUNSUP, "'spatial'=0");
    b = ab(17);
    ab_int(&b, "group", 2);
    expect_reject("ConvTranspose group not dividing", PP_OP_CONVTRANSPOSE, ab_get(&b),
                  (pp_tinfo[]){{PP_F32, SHAPE(1, 3, 4, 4), NULL}, {PP_F32, SHAPE(3, 1, 2, 2), NULL}},
                  2, 1, PP_EINVAL, "'group'=2");
    b = ab(13);
    const float sc[4] = {1, 1, 2, 2};
    const int64_t sz[4] = {2, 3, 8, 8};
    expect_reject("Resize with scales and sizes", PP_OP_RESIZE, ab_get(&b),
                  (pp_tinfo[]){x, {PP_UNDEFINED, {0}, NULL}, {PP_F32, SHAPE(4), sc},
                               {PP_I64, SHAPE(4), sz}},
                  4, 1, PP_EINVAL, "not both");
    b = ab(13);
    ab_str(&b, "mode", "bicubic");
    expect_reject("Resize unknown mode", PP_OP_RESIZE, ab_get(&b),
                  (pp_tinfo[]){x, {PP_UNDEFINED, {0}, NULL}, {PP_F32, SHAPE(4), sc}}, 3, 1,
                  PP_EINVAL, "'mode'");
    b = ab(18);
    expect_reject("ReduceMean axes at run time", PP_OP_REDUCEMEAN, ab_get(&b),
                  (pp_tinfo[]){x, {PP_I64, SHAPE(1), NULL}}, 2, 1, PP_EUNSUP, "constant");
    b = ab(13);
    ab_ints(&b, "axes", (int64_t[]){1, 1}, 2);
    expect_reject("ReduceMax repeated axis", PP_OP_REDUCEMAX, ab_get(&b), &x, 1, 1, PP_EINVAL,
                  "repeats");
    b = ab(13);
    expect_reject("MatMul inner dims", PP_OP_MATMUL, ab_get(&b),
                  (pp_tinfo[]){{PP_F32, SHAPE(2, 3), NULL}, {PP_F32, SHAPE(4, 2), NULL}}, 2, 1,
                  PP_EINVAL, "inner");
    b = ab(13);
    /* a half MatMul (ppcc --precision fp16|bf16 stores products in half) is taken; the operands' types must agree
     * and an unsigned 8-bit one is still refused */
    expect_reject("MatMul float16 by float32", PP_OP_MATMUL, ab_get(&b),
                  (pp_tinfo[]){{PP_F16, SHAPE(2, 3), NULL}, {PP_F32, SHAPE(3, 2), NULL}}, 2, 1,
                  PP_EINVAL, "f16");
    expect_reject("MatMul uint8", PP_OP_MATMUL, ab_get(&b),
                  (pp_tinfo[]){{PP_U8, SHAPE(2, 3), NULL}, {PP_U8, SHAPE(3, 2), NULL}}, 2, 1,
                  PP_EUNSUP, "u8");
}

int main(void) {
    test_convts();
    test_matmuls();
    test_einsum_attention();
    test_softmaxes();
    test_reductions();
    test_topk_argmax();
    test_norms();
    test_pools();
    test_resizes();
    test_errors();
    pprt_scratch_free(&shared_scratch);
    return check_summary("test_nn");
}
