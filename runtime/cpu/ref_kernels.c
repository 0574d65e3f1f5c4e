/* ref_kernels.c: the plain-C reference kernels of the core ops of ops.def
 * (Conv, BatchNormalization, MaxPool, GlobalAveragePool, Gemm), the shared
 * kernel helpers of ref.h (scratch, argument checks, pprt_sgemm) and the
 * kernel table; the op families' kernels live in ref_FAMILY.c.
 *
 * These are the oracle every other backend is compared against, so they aim
 * for "obviously correct" first and "fast enough to run ResNet-50 in tests"
 * second:
 *   - single-threaded, no global state;
 *   - deterministic: every output element is reduced in a fixed order that
 *     depends only on the shapes, never on pointer alignment, so two calls on
 *     the same inputs give bit-identical results;
 *   - Conv lowers to im2col (in column chunks, in scratch) + one cache-blocked
 *     float GEMM whose micro-kernel is plain C that gcc -O3 vectorizes;
 *   - only f32, except MaxPool (also f64, int8, uint8) and the byte copy
 *     pprt_copy_bytes that Identity and Flatten use.
 *
 * Shapes and attributes were validated by pp_infer before a kernel runs; the
 * kernels still re-check what is cheap (counts, dtypes, output shapes) and
 * fail with a pp_status instead of aborting. */
#include "chan_sums.h"
#include "ref.h"
#include "../../ir/geom.h"
#include "../../ir/op_fns.h"
#include "../pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scratch ------------------------------------------------------------------ */

void *pprt_scratch_get(pprt_scratch *s, size_t n) {
    if (!s) return NULL;
    if (n == 0) n = 1;
    if (s->p && n <= s->cap) return s->p;
    size_t cap;
    if (pp_add_ovf(n, 63, &cap)) return NULL;
    cap &= ~(size_t)63; /* aligned_alloc wants a multiple of the alignment */
    /* Grow-only; the old contents need not survive, so free first to keep
     * the peak low. */
    pprt_pool_free(s->p);
    s->p = NULL;
    s->cap = 0;
    void *p = pprt_pool_alloc(cap);
    if (!p) return NULL;
    s->p = p;
    s->cap = cap;
    return p;
}

void pprt_scratch_free(pprt_scratch *s) {
    if (!s) return;
    pprt_pool_free(s->p);
    s->p = NULL;
    s->cap = 0;
}

/* ---- small helpers -------------------------------------------------------------- */

pp_status pprt_need_f32(const pprt_tensor *t, const char *what, pp_err *err) {
    if (t->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "%s has element type %s; only f32 is supported", what,
                       pp_dtype_name(t->dtype));
    return PP_OK;
}

pp_status pprt_need_counts(const char *op, int n_in, int lo, int hi, int n_out, pp_err *err) {
    if (n_in < lo || n_in > hi)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: %d inputs, expected %d..%d", op, n_in, lo, hi);
    if (n_out != 1)
        return PP_FAIL(err, PP_EUNSUP, "%s kernel: %d outputs, expected 1", op, n_out);
    return PP_OK;
}

pp_status pprt_check_outputs(pp_op o, pp_attrs attrs, const pprt_tensor *in, int n_in, const pprt_tensor *out,
                             int n_out, pp_err *err) {
    const char *op = pp_op_table[o].name;
    pp_tinfo ti[12], to[8]; /* pp.LSTMGrad: 10 inputs, 6 outputs */
    if (n_in > 12 || n_out > 8 || n_out < 1)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: %d inputs, %d outputs", op, n_in, n_out);
    for (int i = 0; i < n_in; i++) ti[i] = pprt_tinfo_of(&in[i]);
    pp_err e = {0};
    if (pp_infer(o, attrs, ti, n_in, to, n_out, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s kernel: %s", op, e.msg);
    for (int k = 0; k < n_out; k++) {
        if (out[k].dtype == PP_UNDEFINED) continue; /* an output nobody asked for */
        if (out[k].dtype != to[k].dtype)
            return PP_FAIL(err, PP_EINVAL, "%s kernel: output %d has type %s, expected %s", op, k,
                           pp_dtype_name(out[k].dtype), pp_dtype_name(to[k].dtype));
        PP_TRY(pprt_need_shape(&out[k], &to[k].shape, "output", err));
    }
    return PP_OK;
}

pp_status pprt_need_shape(const pprt_tensor *t, const pp_shape *want, const char *what,
                            pp_err *err) {
    if (!pp_shape_eq(&t->shape, want)) {
        char a[128], b[128];
        return PP_FAIL(err, PP_EINVAL, "%s has shape %s, expected %s", what,
                       pp_shape_str(&t->shape, a, sizeof a), pp_shape_str(want, b, sizeof b));
    }
    return PP_OK;
}

pp_status pprt_numel_of(const pprt_tensor *t, int64_t *n, pp_err *err) {
    return pp_shape_numel(&t->shape, n, err);
}

/* Bytes of the scratch request a + b*4, overflow-checked (counts in floats). */
static bool add_floats(size_t *total, int64_t nfloats) {
    size_t b;
    if (nfloats < 0 || pp_mul_ovf((size_t)nfloats, sizeof(float), &b)) return true;
    b = pp_align_up(b, 64);
    if (b == 0 && nfloats) return true; /* wrapped in align_up */
    return pp_add_ovf(*total, b, total);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- GEMM ------------------------------------------------------------------------ *
 * C[M,N] = A[M,K] * B[K,N] with arbitrary element strides for A and B (so the
 * same code serves transposed operands and im2col columns) and a row-major C
 * with leading dimension ldc. C is overwritten.
 *
 * Classic three-level blocking: B is packed KC x NC at a time into NR-wide
 * column panels, A MC x KC at a time into MR-tall row panels (edges padded
 * with zeros), and an MR x NR micro-kernel accumulates over KC in a local
 * tile (in vector registers where the target has enough of them).
 * Every C element is the sum over k in increasing order within each KC block,
 * the blocks added in increasing order: the order depends only on K, so the
 * result is deterministic. */

#ifndef PPRT_GEMM_MR
#define PPRT_GEMM_MR 6 /* <= 16, the unroll below */
#endif
#ifndef PPRT_GEMM_NR
#define PPRT_GEMM_NR 32
#endif
#ifndef PPRT_GEMM_KC
#define PPRT_GEMM_KC 256
#endif
#ifndef PPRT_GEMM_MC
#define PPRT_GEMM_MC 96 /* multiple of MR */
#endif
#ifndef PPRT_GEMM_NC
#define PPRT_GEMM_NC 2048 /* multiple of NR */
#endif
enum {
    MR = PPRT_GEMM_MR, NR = PPRT_GEMM_NR, KC = PPRT_GEMM_KC, MC = PPRT_GEMM_MC,
    NC = PPRT_GEMM_NC,
};
_Static_assert(MC % MR == 0 && NC % NR == 0, "gemm blocking out of step");

/* A strided matrix view: element (r, c) is p[r*rs + c*cs]. */
typedef struct mat {
    const float *p;
    int64_t rs, cs;
} mat;

/* Floats of scratch gemm() needs for packing. */
static int64_t gemm_scratch_floats(void) { return (int64_t)MC * KC + (int64_t)KC * NC; }

/* Pack rows [i0, i0+mc) x cols [k0, k0+kc) of A into MR-row panels:
 * dst[(panel*kc + k)*MR + r]. Rows beyond mc are zero. */
static void pack_a(mat A, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *restrict dst) {
    for (int64_t ip = 0; ip < mc; ip += MR) {
        int64_t mr = min64(MR, mc - ip);
        const float *src = A.p + (i0 + ip) * A.rs + k0 * A.cs;
        for (int64_t k = 0; k < kc; k++) {
            const float *s = src + k * A.cs;
            int64_t r = 0;
            for (; r < mr; r++) dst[r] = s[r * A.rs];
            for (; r < MR; r++) dst[r] = 0.0f;
            dst += MR;
        }
    }
}

/* Pack rows [k0, k0+kc) x cols [j0, j0+nc) of B into NR-column panels:
 * dst[(panel*kc + k)*NR + c]. Columns beyond nc are zero. */
static void pack_b(mat B, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *restrict dst) {
    for (int64_t jp = 0; jp < nc; jp += NR) {
        int64_t nr = min64(NR, nc - jp);
        const float *src = B.p + k0 * B.rs + (j0 + jp) * B.cs;
        for (int64_t k = 0; k < kc; k++) {
            const float *s = src + k * B.rs;
            if (nr == NR && B.cs == 1) {
                for (int c = 0; c < NR; c++) dst[c] = s[c];
            } else {
                int64_t c = 0;
                for (; c < nr; c++) dst[c] = s[c * B.cs];
                for (; c < NR; c++) dst[c] = 0.0f;
            }
            dst += NR;
        }
    }
}

/* The micro-kernel: acc[MR][NR] = sum_k a[k][:] (x) b[k][:], then C (=|+=) acc
 * for the valid mr x nr corner. The j loop is the one gcc vectorizes; the
 * fixed trip counts let it keep acc in vector registers. */
static void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int64_t ldc, int64_t mr, int64_t nr, bool add) {
    float acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = 0.0f;
    for (int64_t k = 0; k < kc; k++) {
        const float *restrict ak = a + k * MR;
        const float *restrict bk = b + k * NR;
        /* Unrolling r first leaves j as the loop to vectorize; without the
         * hint gcc may vectorize across r instead, which is 10x slower. */
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const float av = ak[r];
            for (int j = 0; j < NR; j++) acc[r][j] += av * bk[j];
        }
    }
    if (mr == MR && nr == NR) {
        if (add) {
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < NR; j++) c[r * ldc + j] += acc[r][j];
        } else {
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < NR; j++) c[r * ldc + j] = acc[r][j];
        }
        return;
    }
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < nr; j++) {
            if (add)
                c[r * ldc + j] += acc[r][j];
            else
                c[r * ldc + j] = acc[r][j];
        }
}

/* scratch: at least gemm_scratch_floats() floats, 64-byte aligned. */
static void gemm(int64_t M, int64_t N, int64_t K, mat A, mat B, float *C, int64_t ldc,
                 float *scratch) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    float *pa = scratch, *pb = scratch + (int64_t)MC * KC;
    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = min64(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = min64(KC, K - pc);
            pack_b(B, pc, kc, jc, nc, pb);
            for (int64_t ic = 0; ic < M; ic += MC) {
                int64_t mc = min64(MC, M - ic);
                pack_a(A, ic, mc, pc, kc, pa);
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += MR)
                        micro_kernel(kc, pa + ir * kc, pb + jr * kc,
                                     C + (ic + ir) * ldc + jc + jr, ldc, min64(MR, mc - ir),
                                     min64(NR, nc - jr), pc > 0);
            }
        }
    }
}

void pprt_stride_range(int64_t n, int64_t limit, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t last = limit - 1 - off; /* need o*s <= last */
    int64_t b = last < 0 ? 0 : last / s + 1;
    if (a > n) a = n;
    if (b > n) b = n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* ---- Identity, Flatten: byte copies --------------------------------------------- */

pp_status pprt_copy_bytes(const char *op, const pprt_tensor *in, int n_in, pprt_tensor *out,
                            int n_out, pp_err *err) {
    PP_TRY(pprt_need_counts(op, n_in, 1, 1, n_out, err));
    if (in[0].dtype != out[0].dtype)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: output type %s differs from input type %s", op,
                       pp_dtype_name(out[0].dtype), pp_dtype_name(in[0].dtype));
    size_t nin, nout;
    PP_TRY(pp_shape_nbytes(&in[0].shape, in[0].dtype, &nin, err));
    PP_TRY(pp_shape_nbytes(&out[0].shape, out[0].dtype, &nout, err));
    if (nin != nout)
        return PP_FAIL(err, PP_EINVAL, "%s kernel: output holds %zu bytes, input %zu", op, nout,
                       nin);
    if (nin) memcpy(out[0].data, in[0].data, nin);
    return PP_OK;
}

/* ---- Conv ------------------------------------------------------------------------- */

/* im2col for output lines [line0, line0+nl) of one group; a line is one run of
 * the innermost output dim (out[2] positions), line index = o0*out[1] + o1.
 * col is [Cg*kvol rows] x [nl*out[2] cols], row-major; row index
 * ((c*k0 + a)*k1 + b)*k2 + e, matching the weight layout [Cout, Cg, k...]. */
static void im2col(const float *x, const pp_geom3 *g, int64_t Cg, int64_t line0, int64_t nl,
                   float *restrict col) {
    const int64_t OW = g->out[2], IW = g->in[2], ncols = nl * OW;
    const int64_t in_plane = g->in[0] * g->in[1] * IW;
    float *dst = col;
    for (int64_t c = 0; c < Cg; c++) {
        const float *xc = x + c * in_plane;
        for (int64_t ka = 0; ka < g->k[0]; ka++)
            for (int64_t kb = 0; kb < g->k[1]; kb++)
                for (int64_t ke = 0; ke < g->k[2]; ke++, dst += ncols) {
                    const int64_t off = ke * g->d[2] - g->p[2];
                    int64_t lo, hi;
                    pprt_stride_range(OW, IW, g->s[2], off, &lo, &hi);
                    for (int64_t l = 0; l < nl; l++) {
                        float *restrict d = dst + l * OW;
                        int64_t L = line0 + l, o0 = L / g->out[1], o1 = L % g->out[1];
                        int64_t i0 = o0 * g->s[0] - g->p[0] + ka * g->d[0];
                        int64_t i1 = o1 * g->s[1] - g->p[1] + kb * g->d[1];
                        if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1] || lo == hi) {
                            memset(d, 0, (size_t)OW * sizeof(float));
                            continue;
                        }
                        const float *restrict src = xc + (i0 * g->in[1] + i1) * IW + off;
                        for (int64_t o = 0; o < lo; o++) d[o] = 0.0f;
                        if (g->s[2] == 1) {
                            memcpy(d + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
                        } else {
                            const int64_t s = g->s[2];
                            for (int64_t o = lo; o < hi; o++) d[o] = src[o * s];
                        }
                        for (int64_t o = hi; o < OW; o++) d[o] = 0.0f;
                    }
                }
    }
}

/* im2col chunks hold at most this many floats (unless one line needs more). */
#define COL_CHUNK_FLOATS ((int64_t)1 << 20)

pp_status kern_CONV(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                           int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_CONV);
    PP_TRY(pprt_need_counts("Conv", n_in, 2, 3, n_out, err));
    const pprt_tensor *x = &in[0], *w = &in[1];
    const pprt_tensor *bias = n_in > 2 && in[2].dtype != PP_UNDEFINED ? &in[2] : NULL;
    PP_TRY(pprt_need_f32(x, "Conv input X", err));
    PP_TRY(pprt_need_f32(w, "Conv weight W", err));
    PP_TRY(pprt_need_f32(&out[0], "Conv output", err));
    if (bias) PP_TRY(pprt_need_f32(bias, "Conv bias B", err));
    const int rank = x->shape.rank;
    if (rank < 3 || rank > 2 + PP_MAX_SPATIAL || w->shape.rank != rank)
        return PP_FAIL(err, PP_EINVAL, "Conv kernel: X rank %d, W rank %d", rank, w->shape.rank);
    int64_t group;
    PP_TRY(pp_attr_int(attrs, "group", 1, &group, err));
    const int64_t N = x->shape.dim[0], C = x->shape.dim[1], Cout = w->shape.dim[0];
    if (group < 1 || C % group || Cout % group || w->shape.dim[1] * group != C)
        return PP_FAIL(err, PP_EINVAL, "Conv kernel: group %lld does not fit X and W",
                       (long long)group);
    if (bias && (bias->shape.rank != 1 || bias->shape.dim[0] != Cout))
        return PP_FAIL(err, PP_EINVAL, "Conv kernel: bias must have shape [%lld]",
                       (long long)Cout);
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, &x->shape, &w->shape.dim[2], false, &pg, err));
    pp_shape want = {.rank = rank, .dim = {N, Cout}};
    for (int i = 0; i < pg.nsp; i++) want.dim[2 + i] = pg.out[i];
    PP_TRY(pprt_need_shape(&out[0], &want, "Conv output", err));

    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t Cg = C / group, Mg = Cout / group;
    const int64_t kvol = g.k[0] * g.k[1] * g.k[2], K = Cg * kvol;
    const int64_t P = g.out[0] * g.out[1] * g.out[2], Pin = g.in[0] * g.in[1] * g.in[2];
    int64_t total;
    PP_TRY(pprt_numel_of(&out[0], &total, err));
    if (total == 0) return PP_OK;

    const float *xd = x->data, *wd = w->data, *bd = bias ? bias->data : NULL;
    float *yd = out[0].data;

    /* A 1x1 stride-1 unpadded conv is a plain GEMM on the input. */
    bool direct = true;
    for (int i = 0; i < 3; i++)
        if (g.k[i] != 1 || g.s[i] != 1 || g.p[i] != 0 || g.out[i] != g.in[i]) direct = false;

    const int64_t lines = g.out[0] * g.out[1], OW = g.out[2];
    int64_t chunk_lines = 0;
    size_t need = 0;
    bool ovf = add_floats(&need, gemm_scratch_floats());
    if (!direct && K > 0) {
        int64_t per_line;
        if (__builtin_mul_overflow(K, OW, &per_line)) ovf = true;
        else {
            chunk_lines = per_line ? COL_CHUNK_FLOATS / per_line : lines;
            if (chunk_lines < 1) chunk_lines = 1;
            if (chunk_lines > lines) chunk_lines = lines;
            ovf = ovf || add_floats(&need, per_line * chunk_lines);
        }
    }
    if (ovf) return PP_FAIL(err, PP_ENOMEM, "Conv kernel: scratch size overflows");
    float *sc = pprt_scratch_get(scratch, need);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "Conv kernel: cannot get %zu bytes of scratch", need);
    float *packs = sc;
    float *col = sc + pp_align_up((size_t)gemm_scratch_floats(), 16);

    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            const float *xg = xd + (n * C + gi * Cg) * Pin;
            const float *wg = wd + gi * Mg * K;
            float *yg = yd + (n * Cout + gi * Mg) * P;
            mat A = {wg, K, 1};
            if (K == 0) {
                gemm(Mg, P, 0, A, A, yg, P, packs);
            } else if (direct) {
                gemm(Mg, P, K, A, (mat){xg, Pin, 1}, yg, P, packs);
            } else {
                for (int64_t l0 = 0; l0 < lines; l0 += chunk_lines) {
                    int64_t nl = min64(chunk_lines, lines - l0);
                    im2col(xg, &g, Cg, l0, nl, col);
                    gemm(Mg, nl * OW, K, A, (mat){col, nl * OW, 1}, yg + l0 * OW, P, packs);
                }
            }
            if (bd) pprt_add_bias(yg, bd + gi * Mg, Mg, P);
        }
    return PP_OK;
}

/* ---- BatchNormalization (inference) ------------------------------------------------ */

pp_status kern_BATCHNORM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                                int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_BATCHNORM); /* a half plan's X and Y (ppcc --precision): in f32, Y rounded */
    PP_TRY(pprt_need_counts("BatchNormalization", n_in, 5, 5, 1, err));
    if (n_out < 1 || n_out > 5)
        return PP_FAIL(err, PP_EINVAL, "BatchNormalization kernel: %d outputs, expected 1..5", n_out);
    static const char *names[] = {"input X", "scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 5; i++) PP_TRY(pprt_need_f32(&in[i], names[i], err));
    PP_TRY(pprt_need_f32(&out[0], "BatchNormalization output", err));
    const pp_shape *xs = &in[0].shape;
    if (xs->rank < 2)
        return PP_FAIL(err, PP_EINVAL, "BatchNormalization kernel: X has rank %d", xs->rank);
    for (int i = 1; i < 5; i++)
        if (in[i].shape.rank != 1 || in[i].shape.dim[0] != xs->dim[1])
            return PP_FAIL(err, PP_EINVAL, "BatchNormalization kernel: %s must have shape [%lld]",
                           names[i], (long long)xs->dim[1]);
    PP_TRY(pprt_need_shape(&out[0], xs, "BatchNormalization output", err));
    const bool train = pp_bn_training(attrs, n_out);
    for (int k = 1; k < n_out; k++) {
        PP_TRY(pprt_need_f32(&out[k], "BatchNormalization statistics output", err));
        PP_TRY(pprt_need_shape(&out[k], &in[1].shape, "BatchNormalization statistics output", err));
    }
    float eps, momentum;
    PP_TRY(pp_attr_float(attrs, "epsilon", 1e-5f, &eps, err));
    PP_TRY(pp_attr_float(attrs, "momentum", 0.9f, &momentum, err));

    const int64_t N = xs->dim[0], C = xs->dim[1];
    int64_t inner = 1;
    for (int i = 2; i < xs->rank; i++) inner *= xs->dim[i]; /* numel checked by pp_infer */
    float *st[4] = {NULL, NULL, NULL, NULL};
    for (int k = 1; k < n_out && k <= 4; k++) st[k - 1] = out[k].data;
    pprt_bn_channels(in[0].data, in[1].data, in[2].data, in[3].data, in[4].data, out[0].data, st, N, C, inner, eps,
                     momentum, train, 0, C);
    return PP_OK;
}

/* (ref.h) */
void pprt_bn_channels(const float *x, const float *scale, const float *B, const float *mean, const float *var,
                      float *y, float *const st[4], int64_t N, int64_t C, int64_t inner, float eps, float momentum,
                      bool train, int64_t c0, int64_t c1) {
    pprt_bn_channels_body(x, scale, B, mean, var, y, st, N, C, inner, eps, momentum, train, c0, c1,
                          pprt_chan_sums); /* chan_sums.h */
}

/* ---- MaxPool ------------------------------------------------------------------------- *
 * One loop per element type (f32, f64, i8, u8). Each output takes the first
 * maximum in window order; NaN is skipped, and a window of only NaN gives
 * its first (docs/design-notes.md, "NaN and infinities"). Padding is
 * never selected: a window entirely in the padding (only possible with
 * pads >= window) gives the type's lowest value and index -1. The optional
 * Indices output holds flat indices into X: row-major, or with
 * storage_order=1 the spatial part column-major (first spatial dim fastest). */

#define MAXPOOL_LOOP(T, LOWEST)                                                               \
    static void maxpool_##T(const pp_geom3 *g, int64_t planes, const T *xd, T *yd,              \
                            int64_t *id) {                                                    \
        const int64_t Pin = g->in[0] * g->in[1] * g->in[2];                                   \
        const int64_t P = g->out[0] * g->out[1] * g->out[2];                                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                             \
            const T *x = xd + pl * Pin;                                                       \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                        \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++)                                    \
                    for (int64_t o2 = 0; o2 < g->out[2]; o2++) {                              \
                        T m = LOWEST;                                                         \
                        int64_t bi0 = -1, bi1 = 0, bi2 = 0;                                   \
                        bool isnan_m = false; /* m is a NaN: the window has no number yet */  \
                        for (int64_t a = 0; a < g->k[0]; a++) {                               \
                            int64_t i0 = o0 * g->s[0] - g->p[0] + a * g->d[0];                \
                            if (i0 < 0 || i0 >= g->in[0]) continue;                           \
                            for (int64_t b = 0; b < g->k[1]; b++) {                           \
                                int64_t i1 = o1 * g->s[1] - g->p[1] + b * g->d[1];            \
                                if (i1 < 0 || i1 >= g->in[1]) continue;                       \
                                const T *row = x + (i0 * g->in[1] + i1) * g->in[2];           \
                                for (int64_t e = 0; e < g->k[2]; e++) {                       \
                                    int64_t i2 = o2 * g->s[2] - g->p[2] + e * g->d[2];        \
                                    if (i2 < 0 || i2 >= g->in[2]) continue;                   \
                                    const T v = row[i2];                                      \
                                    if (v != v) { /* NaN: only while there is no number */    \
                                        if (bi0 < 0) m = v, bi0 = i0, bi1 = i1, bi2 = i2, isnan_m = true; \
                                        continue;                                             \
                                    }                                                         \
                                    if (v > m || bi0 < 0 || isnan_m)                          \
                                        m = v, bi0 = i0, bi1 = i1, bi2 = i2, isnan_m = false; \
                                }                                                             \
                            }                                                                 \
                        }                                                                     \
                        const int64_t o = pl * P + (o0 * g->out[1] + o1) * g->out[2] + o2;   \
                        yd[o] = m;                                                            \
                        if (id)                                                               \
                            id[o] = bi0 < 0 ? -1                                              \
                                            : pl * Pin + (bi0 * g->in[1] + bi1) * g->in[2] + bi2; \
                    }                                                                         \
        }                                                                                     \
    }
MAXPOOL_LOOP(float, -INFINITY)
MAXPOOL_LOOP(double, -INFINITY)
MAXPOOL_LOOP(int8_t, INT8_MIN)
MAXPOOL_LOOP(uint8_t, 0)

pp_status kern_MAXPOOL(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                              int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_MAXPOOL);
    (void)scratch;
    if (n_in != 1 || n_out < 1 || n_out > 2)
        return PP_FAIL(err, PP_EINVAL, "MaxPool kernel: %d inputs and %d outputs, expected 1 "
                       "and 1..2", n_in, n_out);
    const pp_dtype t = in[0].dtype;
    if (t != PP_F32 && t != PP_F64 && t != PP_I8 && t != PP_U8)
        return PP_FAIL(err, PP_EUNSUP, "MaxPool kernel: element type %s is not supported",
                       pp_dtype_name(t));
    if (out[0].dtype != t)
        return PP_FAIL(err, PP_EINVAL, "MaxPool kernel: output type %s differs from input type %s",
                       pp_dtype_name(out[0].dtype), pp_dtype_name(t));
    const pp_shape *xs = &in[0].shape;
    pp_geom pg;
    PP_TRY(pp_geom_make(attrs, xs, NULL, true, &pg, err));
    pp_shape want = *xs;
    for (int i = 0; i < pg.nsp; i++) want.dim[2 + i] = pg.out[i];
    PP_TRY(pprt_need_shape(&out[0], &want, "MaxPool output", err));
    int64_t *ind = NULL;
    if (n_out > 1) {
        if (out[1].dtype != PP_I64)
            return PP_FAIL(err, PP_EINVAL, "MaxPool kernel: Indices must be int64");
        PP_TRY(pprt_need_shape(&out[1], &want, "MaxPool Indices", err));
        ind = out[1].data;
    }
    int64_t so;
    PP_TRY(pp_attr_int(attrs, "storage_order", 0, &so, err));
    int64_t total;
    PP_TRY(pprt_numel_of(&out[0], &total, err));
    if (total == 0) return PP_OK;

    const pp_geom3 g = pp_geom3_lift(&pg);
    const int64_t planes = xs->dim[0] * xs->dim[1];
    switch (t) {
    case PP_F32: maxpool_float(&g, planes, in[0].data, out[0].data, ind); break;
    case PP_F64: maxpool_double(&g, planes, in[0].data, out[0].data, ind); break;
    case PP_I8: maxpool_int8_t(&g, planes, in[0].data, out[0].data, ind); break;
    default: maxpool_uint8_t(&g, planes, in[0].data, out[0].data, ind); break;
    }
    if (ind && so == 1 && pg.nsp > 1) {
        /* convert each row-major flat index to the column-major one */
        const int64_t Pin = g.in[0] * g.in[1] * g.in[2];
        int64_t sp[PP_MAX_SPATIAL];
        for (int i = 0; i < pg.nsp; i++) sp[i] = pg.in[i];
        for (int64_t o = 0; o < total; o++) {
            if (ind[o] < 0) continue;
            int64_t pl = ind[o] / Pin, r = ind[o] % Pin, c[PP_MAX_SPATIAL];
            for (int i = pg.nsp - 1; i >= 0; i--) c[i] = r % sp[i], r /= sp[i];
            int64_t li = 0;
            for (int i = pg.nsp - 1; i >= 0; i--) li = li * sp[i] + c[i];
            ind[o] = pl * Pin + li;
        }
    }
    return PP_OK;
}

/* ---- GlobalAveragePool ------------------------------------------------------------------ */

pp_status kern_GLOBALAVGPOOL(pp_attrs attrs, const pprt_tensor *in, int n_in,
                                    pprt_tensor *out, int n_out, pprt_scratch *scratch,
                                    pp_err *err) {
    PPRT_LIFT(kern_GLOBALAVGPOOL);
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("GlobalAveragePool", n_in, 1, 1, n_out, err));
    PP_TRY(pprt_need_f32(&in[0], "GlobalAveragePool input", err));
    PP_TRY(pprt_need_f32(&out[0], "GlobalAveragePool output", err));
    const pp_shape *xs = &in[0].shape;
    if (xs->rank < 3)
        return PP_FAIL(err, PP_EINVAL, "GlobalAveragePool kernel: X has rank %d", xs->rank);
    pp_shape want = *xs;
    int64_t S = 1;
    for (int i = 2; i < xs->rank; i++) {
        S *= xs->dim[i];
        want.dim[i] = 1;
    }
    PP_TRY(pprt_need_shape(&out[0], &want, "GlobalAveragePool output", err));
    const int64_t planes = xs->dim[0] * xs->dim[1];
    const float *x = in[0].data;
    float *y = out[0].data;
    for (int64_t p = 0; p < planes; p++) {
        /* double accumulation: accurate and order-fixed; mean of nothing is NaN */
        double s = 0;
        const float *xp = x + p * S;
        for (int64_t i = 0; i < S; i++) s += xp[i];
        y[p] = (float)(S ? s / (double)S : NAN);
    }
    return PP_OK;
}

/* ---- Gemm ---------------------------------------------------------------------------------- */

pp_status kern_GEMM(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                           int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_GEMM);
    PP_TRY(pprt_need_counts("Gemm", n_in, 2, 3, n_out, err));
    const pprt_tensor *Ct = n_in > 2 && in[2].dtype != PP_UNDEFINED ? &in[2] : NULL;
    PP_TRY(pprt_need_f32(&in[0], "Gemm input A", err));
    PP_TRY(pprt_need_f32(&in[1], "Gemm input B", err));
    PP_TRY(pprt_need_f32(&out[0], "Gemm output", err));
    if (Ct) PP_TRY(pprt_need_f32(Ct, "Gemm input C", err));
    if (in[0].shape.rank != 2 || in[1].shape.rank != 2)
        return PP_FAIL(err, PP_EINVAL, "Gemm kernel: A and B must be matrices");
    pp_gemm g;
    PP_TRY(pp_gemm_attrs(attrs, &g, err));
    const int64_t ta = g.ta, tb = g.tb;
    const float alpha = g.alpha, beta = g.beta;
    const int64_t *ad = in[0].shape.dim, *bd = in[1].shape.dim;
    const int64_t M = ta ? ad[1] : ad[0], K = ta ? ad[0] : ad[1];
    const int64_t N = tb ? bd[0] : bd[1], Kb = tb ? bd[1] : bd[0];
    if (K != Kb)
        return PP_FAIL(err, PP_EINVAL, "Gemm kernel: inner dimensions %lld and %lld differ",
                       (long long)K, (long long)Kb);
    pp_shape want = {.rank = 2, .dim = {M, N}};
    PP_TRY(pprt_need_shape(&out[0], &want, "Gemm output", err));

    /* C broadcasts unidirectionally to [M, N]: strides 0 along unit dims. */
    int64_t cs_m = 0, cs_n = 0;
    if (Ct) {
        const pp_shape *cs = &Ct->shape;
        int64_t cm = cs->rank >= 2 ? cs->dim[cs->rank - 2] : 1;
        int64_t cn = cs->rank >= 1 ? cs->dim[cs->rank - 1] : 1;
        if (cs->rank > 2 || (cm != M && cm != 1) || (cn != N && cn != 1))
            return PP_FAIL(err, PP_EINVAL, "Gemm kernel: C does not broadcast to [%lld,%lld]",
                           (long long)M, (long long)N);
        cs_n = cn == N && N != 1 ? 1 : 0;
        cs_m = cm == M && M != 1 ? cn : 0;
    }
    if (M == 0 || N == 0) return PP_OK;

    size_t need = 0;
    if (add_floats(&need, gemm_scratch_floats()))
        return PP_FAIL(err, PP_ENOMEM, "Gemm kernel: scratch size overflows");
    float *sc = pprt_scratch_get(scratch, need);
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "Gemm kernel: cannot get %zu bytes of scratch", need);

    /* A(i,k): [M,K] row-major, or [K,M] when transposed; likewise B(k,j). */
    mat A = ta ? (mat){in[0].data, 1, M} : (mat){in[0].data, K, 1};
    mat B = tb ? (mat){in[1].data, 1, K} : (mat){in[1].data, N, 1};
    float *Y = out[0].data;
    gemm(M, N, K, A, B, Y, N, sc);

    /* Y = alpha*AB + beta*C. As in BLAS and onnxruntime, beta == 0 ignores C. */
    const float *Cd = Ct && beta != 0.0f ? Ct->data : NULL;
    if (alpha == 1.0f && !Cd) return PP_OK;
    for (int64_t i = 0; i < M; i++) {
        float *restrict y = Y + i * N;
        if (!Cd) {
            for (int64_t j = 0; j < N; j++) y[j] = alpha * y[j];
        } else {
            const float *restrict c = Cd + i * cs_m;
            if (cs_n)
                for (int64_t j = 0; j < N; j++) y[j] = alpha * y[j] + beta * c[j];
            else
                for (int64_t j = 0; j < N; j++) y[j] = alpha * y[j] + beta * c[0];
        }
    }
    return PP_OK;
}

/* ---- the table ---------------------------------------------------------------------------- */

void pprt_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t a_rs, int64_t a_cs,
                const float *B, int64_t b_rs, int64_t b_cs, float *C, int64_t ldc, float *scratch) {
    gemm(M, N, K, (mat){A, a_rs, a_cs}, (mat){B, b_rs, b_cs}, C, ldc, scratch);
}

size_t pprt_sgemm_scratch_bytes(void) { return (size_t)gemm_scratch_floats() * sizeof(float); }

const pprt_kernel_fn pprt_ref_kernels[PP_OP_COUNT] = {
#define PP_OP(e, name, mi, ma, no, tr) [PP_OP_##e] = kern_##e,
#include "../../ir/ops.def"
#undef PP_OP
};
_Static_assert(sizeof pprt_ref_kernels / sizeof pprt_ref_kernels[0] == PP_OP_COUNT,
               "reference kernel table out of step with ops.def");
