/* emu.c: the CUDA backend's emulator (pprt --backend cuda-emu) and the lint
 * of a step list.
 *
 * The emulator runs the exact step list the GPU engine issues, on the host:
 * every space (arena, weights, messages, workspace) is its own host buffer at
 * the offsets the plan and the planner chose; an own kernel runs as a loop
 * over its threads calling the same per-thread functions as the CUDA kernels
 * (kmath.h); a cuDNN convolution and a cuBLASLt product run as host loops
 * written from their step's descriptor (dims, pads, strides, leading
 * dimensions, batch strides, epilogue), not by calling the reference
 * kernels; copies are memcpys between spaces; only HOST steps (the engine's
 * fallbacks too) call the reference kernel, after a "download" into host
 * buffers of their own and before an "upload" back. The lint (pcu_lint) runs
 * once at create over every step: a step the GPU would get wrong (an access
 * outside its region, a launch beyond the limits) fails the stage before it
 * runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../exec.h"
#include "cuda_backend.h"
#include "cuplan.h"
#include "early.h"
#include "gcache.h"
#include "mem_emu.h"

/* ---- own kernels: one thread ---------------------------------------------------------------- */

/* The row of kernels.def that the GPU's wrapper expands too (ktable.h). */
void pcu_kernel_thread(const pcu_step *s, void *const *op, int *err, int64_t i) {
    pcu_kernel_call(s->kernel, &s->u, op, err, i, s->ptype);
}

/* ---- cuDNN's convolution, as the descriptor says ---------------------------------------- */

/* Dims of a conv step lifted to 3 spatial dims (2-D: depth 1). */
typedef struct conv3 {
    int64_t N, C, K, G, in[3], k[3], out[3], pre[3], st[3], dil[3];
} conv3;

/* Whether step s runs a cooperative kernel (kernels.def PCU_COOP). */
static bool emu_coop(const pcu_step *s) {
    size_t shb, laneb;
    return s->kind == PCU_S_KERNEL && pcu_kernel_coop(s->kernel, &s->u, &shb, &laneb) > 0;
}

static conv3 conv3_of(const pcu_conv *c) {
    conv3 g = {.N = c->x[0], .G = c->groups};
    const int o = 3 - c->nsp; /* leading unit spatial dims */
    /* forward: X [N,C,in], W [K,C/G,k], Y [N,K,out]; backward data: X is dy
     * [N,K,out], W [K,C/G,k], Y is dx [N,C,in] */
    const int64_t *xin = c->transpose ? c->y : c->x, *xout = c->transpose ? c->x : c->y;
    g.C = xin[1];
    g.K = c->w[0];
    for (int d = 0; d < 3; d++) {
        const int j = d - o;
        g.in[d] = j >= 0 ? xin[2 + j] : 1;
        g.out[d] = j >= 0 ? xout[2 + j] : 1;
        g.k[d] = j >= 0 ? c->w[2 + j] : 1;
        g.pre[d] = j >= 0 ? c->pre[j] : 0;
        g.st[d] = j >= 0 ? c->stride[j] : 1;
        g.dil[d] = j >= 0 ? c->dil[j] : 1;
    }
    return g;
}

/* Bias, residual and activation over conv step c's output y: as a fused
 * graph's pointwise ops, or as the epilogue kernel after the convolution. */
static void emu_epilogue(const pcu_conv *c, void *y, const void *bias, const void *res) {
    const pcu_epi e = pcu_conv_epi(c);
    for (int64_t i = 0; i < e.n; i++) pcu_epi_at(&e, y, bias, res, i);
}

/* Backward filter: dw[k,c,t] = sum over images n and output positions o of
 * dy[n,k,o] x[n,c,o*s-p+t*d], the images in order, each image's positions
 * in order, summed in float as a GPU engine would. */
static void emu_conv_wgrad(const pcu_conv *c, const float *x, const float *dy, float *dw) {
    const conv3 g = conv3_of(c);
    const int64_t Cg = g.C / g.G, Kg = g.K / g.G;
    const int64_t IN = g.in[0] * g.in[1] * g.in[2], OUT = g.out[0] * g.out[1] * g.out[2];
    const int64_t KS = g.k[0] * g.k[1] * g.k[2];
    for (int64_t kk = 0; kk < g.K; kk++)
        for (int64_t cc = 0; cc < Cg; cc++) {
            const int64_t ch = kk / Kg * Cg + cc;
            for (int64_t t = 0; t < KS; t++) {
                const int64_t t0 = t / (g.k[1] * g.k[2]), t1 = t / g.k[2] % g.k[1], t2 = t % g.k[2];
                float acc = 0;
                for (int64_t n = 0; n < g.N; n++) {
                    const float *dyn = dy + (n * g.K + kk) * OUT, *xn = x + (n * g.C + ch) * IN;
                    for (int64_t o0 = 0; o0 < g.out[0]; o0++) {
                        const int64_t i0 = o0 * g.st[0] - g.pre[0] + t0 * g.dil[0];
                        if (i0 < 0 || i0 >= g.in[0]) continue;
                        for (int64_t o1 = 0; o1 < g.out[1]; o1++) {
                            const int64_t i1 = o1 * g.st[1] - g.pre[1] + t1 * g.dil[1];
                            if (i1 < 0 || i1 >= g.in[1]) continue;
                            for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                                const int64_t i2 = o2 * g.st[2] - g.pre[2] + t2 * g.dil[2];
                                if (i2 < 0 || i2 >= g.in[2]) continue;
                                acc += dyn[(o0 * g.out[1] + o1) * g.out[2] + o2] * xn[(i0 * g.in[1] + i1) * g.in[2] + i2];
                            }
                        }
                    }
                }
                dw[(kk * Cg + cc) * KS + t] = acc;
            }
        }
}

/* dims d (nd of them) from a tensor at strides st (src) into the same tensor
 * packed in their order (dst), or with gather false from packed to strided */
static void emu_restride(const int64_t *d, int nd, const int64_t *st, const float *src, float *dst, bool gather) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    for (int64_t j = 0; j < n; j++) {
        int64_t r = j, off = 0;
        for (int i = nd - 1; i >= 0; i--) off += (r % d[i]) * st[i], r /= d[i];
        if (gather) dst[j] = src[off];
        else dst[off] = src[j];
    }
}

/* A channels-last convolution (c->nhwc; forward or backward data): x, w and the residual read
 * through the strides cuDNN is given (pcu_conv_strides: NHWC, KRSC) into
 * packed NCHW copies, the convolution (and the graph's pointwise ops) as
 * there, y written back through its strides: NCHW's bits. */
static void emu_conv_nhwc(const pcu_conv *c, const float *x, const float *w, const float *bias, const float *res,
                          float *y) {
    pcu_conv p = *c;
    p.nhwc = 0;
    const int nd = 2 + c->nsp;
    int64_t nx = 1, nw = 1, ny = 1, sx[5], sw[5], sy[5];
    for (int i = 0; i < nd; i++) nx *= c->x[i], nw *= c->w[i], ny *= c->y[i];
    pcu_conv_strides(c, 0, sx), pcu_conv_strides(c, 1, sw), pcu_conv_strides(c, 2, sy);
    float *px = malloc((size_t)(nx ? nx : 1) * sizeof *px), *pw = malloc((size_t)(nw ? nw : 1) * sizeof *pw);
    float *py = malloc((size_t)(ny ? ny : 1) * sizeof *py), *pr = res ? malloc((size_t)(ny ? ny : 1) * sizeof *pr) : NULL;
    if (px && pw && py && (!res || pr)) {
        emu_restride(c->x, nd, sx, x, px, true);
        emu_restride(c->w, nd, sw, w, pw, true);
        if (res) emu_restride(c->y, nd, sy, res, pr, true);
        pcu_emu_conv(&p, px, pw, bias, pr, py);
        emu_restride(c->y, nd, sy, py, y, false);
    } else {
        for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* out of host memory: a wrong answer the checks see */
    }
    free(px), free(pw), free(py), free(pr);
}

void pcu_emu_conv(const pcu_conv *c, const float *x, const float *w, const float *bias, const float *res,
                  float *y) {
    if (c->nhwc && !c->wgrad) {
        emu_conv_nhwc(c, x, w, bias, res, y);
        return;
    }
    if (c->wgrad) { /* operands: X, dY, -, -, dW */
        emu_conv_wgrad(c, x, w, y);
        return;
    }
    const conv3 g = conv3_of(c);
    const int64_t Cg = g.C / g.G, Kg = g.K / g.G;
    const int64_t IN = g.in[0] * g.in[1] * g.in[2], OUT = g.out[0] * g.out[1] * g.out[2];
    const int64_t KS = g.k[0] * g.k[1] * g.k[2];
    /* forward: y[n,k,o] = sum_{c,t} x[n,c,o*s-p+t*d] w[k,c,t]; backward data
     * (transpose): y = dx[n,c,i] = sum over (k,o,t) with o*s-p+t*d = i of
     * dy[n,k,o] w[k,c,t] (the scatter form of the same sums) */
    const int64_t ysize = c->transpose ? g.N * g.C * IN : g.N * g.K * OUT;
    float *acc = y;
    if (c->transpose) memset(acc, 0, (size_t)ysize * sizeof *acc);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t kk = 0; kk < g.K; kk++) {
            const int64_t grp = kk / Kg;
            const float *dy = c->transpose ? x + (n * g.K + kk) * OUT : NULL;
            float *yo = c->transpose ? NULL : y + (n * g.K + kk) * OUT;
            if (yo)
                for (int64_t o = 0; o < OUT; o++) yo[o] = 0;
            for (int64_t cc = 0; cc < Cg; cc++) {
                const int64_t ch = grp * Cg + cc;
                const float *wk = w + (kk * Cg + cc) * KS;
                const float *xi = c->transpose ? NULL : x + (n * g.C + ch) * IN;
                float *dx = c->transpose ? acc + (n * g.C + ch) * IN : NULL;
                for (int64_t t0 = 0; t0 < g.k[0]; t0++)
                    for (int64_t t1 = 0; t1 < g.k[1]; t1++)
                        for (int64_t t2 = 0; t2 < g.k[2]; t2++) {
                            const float wv = wk[(t0 * g.k[1] + t1) * g.k[2] + t2];
                            for (int64_t o0 = 0; o0 < g.out[0]; o0++) {
                                const int64_t i0 = o0 * g.st[0] - g.pre[0] + t0 * g.dil[0];
                                if (i0 < 0 || i0 >= g.in[0]) continue;
                                for (int64_t o1 = 0; o1 < g.out[1]; o1++) {
                                    const int64_t i1 = o1 * g.st[1] - g.pre[1] + t1 * g.dil[1];
                                    if (i1 < 0 || i1 >= g.in[1]) continue;
                                    const int64_t orow = (o0 * g.out[1] + o1) * g.out[2];
                                    const int64_t irow = (i0 * g.in[1] + i1) * g.in[2];
                                    /* o2 with 0 <= o2*s - p + t2*d < in */
                                    const int64_t off = t2 * g.dil[2] - g.pre[2];
                                    int64_t lo = off >= 0 ? 0 : (-off + g.st[2] - 1) / g.st[2];
                                    int64_t hi = g.in[2] - off <= 0 ? 0 : (g.in[2] - off + g.st[2] - 1) / g.st[2];
                                    if (hi > g.out[2]) hi = g.out[2];
                                    if (c->transpose) {
                                        for (int64_t o2 = lo; o2 < hi; o2++)
                                            dx[irow + o2 * g.st[2] + off] += dy[orow + o2] * wv;
                                    } else if (g.st[2] == 1) {
                                        const float *xr = xi + irow + off;
                                        float *yr = yo + orow;
                                        for (int64_t o2 = lo; o2 < hi; o2++) yr[o2] += xr[o2] * wv;
                                    } else {
                                        for (int64_t o2 = lo; o2 < hi; o2++)
                                            yo[orow + o2] += xi[irow + o2 * g.st[2] + off] * wv;
                                    }
                                }
                            }
                        }
            }
        }
    /* the graph's pointwise ops (+ bias[k], + residual, activation) where
     * the graph holds them; elsewhere the epilogue kernel follows (the
     * step loop below, as the engine does) */
    if (pcu_conv_graph_fuses(c)) emu_epilogue(c, y, bias, res);
}

/* A half plan's convolution step (c->dt F16 or BF16) as the executor runs
 * it: its operands lifted to f32, the f32 convolution, y rounded to nearest
 * even; with --cuda-conv-fusion on or s->conv_fuse (a fused graph) the bias, residual and
 * activation before that one rounding (the graph's float intermediates),
 * else (the default, and a ConvTranspose) the epilogue kernel after it on
 * the half y (a second rounding, as the GPU's convolution alone then
 * pcu_epi_at). */
static void emu_conv_half(const pcu_step *s, void *const *op) {
    const pcu_conv *c = &s->u.conv;
    const bool fused = (pprt_cuda_config()->conv_fusion || s->conv_fuse) && pcu_conv_graph_fuses(c);
    float *f[5] = {NULL};
    bool ok = true;
    for (int k = 0; k < 5; k++) {
        if (!op[k]) continue;
        const int64_t n = (int64_t)(s->ops[k].bytes / 2);
        f[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        ok = ok && f[k];
        for (int64_t i = 0; f[k] && k < 4 && i < n; i++) f[k][i] = pcu_ldf(op[k], c->dt, i);
    }
    if (ok) {
        pcu_conv cf = *c;
        cf.dt = PCU_T_F32;
        if (!fused) cf.has_bias = cf.has_res = cf.act = 0; /* the convolution alone */
        pcu_emu_conv(&cf, f[0], f[1], f[2], f[3], f[4]);
        const int64_t n = (int64_t)(s->ops[4].bytes / 2);
        for (int64_t i = 0; i < n; i++) pcu_stf(op[4], c->dt, i, f[4][i]);
        if (!fused && pcu_conv_epilogue(c, false)) emu_epilogue(c, op[4], op[2], op[3]); /* on the half y */
    }
    for (int k = 0; k < 5; k++) free(f[k]);
}

/* ---- cuBLASLt's product, as the descriptor says ------------------------------------------- */

/* The elements of a column-major matrix of rows x cols with leading dim ld,
 * batch matrices batch_stride apart (0: one), from its first element to
 * past its last: what the product reads of the operand. */
static int64_t lt_extent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t batch_stride) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
    return (batch - 1) * batch_stride + (cols - 1) * ld + rows;
}

float pcu_lt_round(float v, int inputs) {
    switch (inputs) {
    case PCU_LT_F16: return pcu_h2f(pcu_f2h(v));
    case PCU_LT_BF16: return pcu_bf2f(pcu_f2bf(v));
    case PCU_LT_TF32: {
        pcu_fbits b;
        b.f = v;
        if ((b.u & 0x7fffffffu) >= 0x7f800000u) return v; /* inf, NaN */
        b.u = (b.u + 0xfffu + ((b.u >> 13) & 1u)) & ~0x1fffu;
        return b.f;
    }
    default: return v;
    }
}

static bool mm_half(const pcu_mm *m) { return m->dt == PCU_T_F16 || m->dt == PCU_T_BF16; }

/* n elements of a half matrix operand as f32 (NULL on no memory; p NULL: NULL) */
static float *half_lift(const void *p, int t, int64_t n) {
    if (!p) return NULL;
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    for (int64_t i = 0; f && i < n; i++) f[i] = pcu_ldf(p, t, i);
    return f;
}

/* A half product: its operands lifted to f32, the f32 product, D's matrix elements rounded back (the elements
 * between them, under ldc > m or a batch stride, untouched). */
static void emu_matmul_half(const pcu_mm *m, const void *a, const void *b, const void *c, void *d, const void *bias) {
    const int64_t na = lt_extent(m->transa ? m->k : m->m, m->transa ? m->m : m->k, m->lda, m->batch, m->sa);
    const int64_t nb = lt_extent(m->transb ? m->n : m->k, m->transb ? m->k : m->n, m->ldb, m->batch, m->sb);
    const int64_t nd = lt_extent(m->m, m->n, m->ldc, m->batch, m->sc);
    float *fa = half_lift(a, m->dt, na), *fb = half_lift(b, m->dt, nb), *fc = half_lift(c, m->dt, nd);
    float *fbias = half_lift(bias, m->dt, m->m), *fd = malloc((size_t)(nd > 0 ? nd : 1) * sizeof *fd);
    pcu_mm f = *m;
    f.dt = PCU_T_F32;
    if (fa && fb && fd && (fc || !c) && (fbias || !bias)) {
        pcu_emu_matmul(&f, PCU_LT_F32, fa, fb, fc, fd, fbias);
        for (int64_t bt = 0; bt < m->batch; bt++)
            for (int64_t j = 0; j < m->n; j++)
                for (int64_t r = 0; r < m->m; r++) {
                    const int64_t at = bt * m->sc + j * m->ldc + r;
                    pcu_stf(d, m->dt, at, fd[at]);
                }
    }
    free(fa), free(fb), free(fc), free(fbias), free(fd);
}

void pcu_emu_matmul(const pcu_mm *m, int inputs, const void *av, const void *bv, const void *cv, void *dv,
                    const void *biasv) {
    if (mm_half(m)) {
        emu_matmul_half(m, av, bv, cv, dv, biasv);
        return;
    }
    const float *a = av, *b = bv, *c = cv, *bias = biasv;
    float *d = dv;
    if (inputs != PCU_LT_F32) { /* each element of A and B as the reduced-precision compute reads it */
        const float *ra = a, *rb = b;
        float *ca = NULL, *cb = NULL;
        const int64_t na = lt_extent(m->transa ? m->k : m->m, m->transa ? m->m : m->k, m->lda, m->batch, m->sa);
        const int64_t nb = lt_extent(m->transb ? m->n : m->k, m->transb ? m->k : m->n, m->ldb, m->batch, m->sb);
        ca = malloc((size_t)(na > 0 ? na : 1) * sizeof *ca);
        cb = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *cb);
        if (ca && cb) {
            for (int64_t i = 0; i < na; i++) ca[i] = pcu_lt_round(ra[i], inputs);
            for (int64_t i = 0; i < nb; i++) cb[i] = pcu_lt_round(rb[i], inputs);
            pcu_emu_matmul(m, PCU_LT_F32, ca, cb, c, d, bias);
        }
        free(ca);
        free(cb);
        return;
    }
    float *col = malloc((size_t)(m->m > 0 ? m->m : 1) * sizeof *col);
    if (!col) return; /* the caller checked the sizes; a failed malloc leaves D as it was */
    for (int64_t bt = 0; bt < m->batch; bt++) {
        const float *A = a + bt * m->sa, *B = b + bt * m->sb;
        const float *C = c ? c + bt * m->sc : NULL;
        float *D = d + bt * m->sc;
        for (int64_t j = 0; j < m->n; j++) {
            for (int64_t r = 0; r < m->m; r++) col[r] = 0;
            for (int64_t q = 0; q < m->k; q++) {
                const float bv = m->transb ? B[j + q * m->ldb] : B[q + j * m->ldb];
                if (!m->transa) {
                    const float *Ac = A + q * m->lda;
                    for (int64_t r = 0; r < m->m; r++) col[r] += Ac[r] * bv;
                } else {
                    for (int64_t r = 0; r < m->m; r++) col[r] += A[q + r * m->lda] * bv;
                }
            }
            for (int64_t r = 0; r < m->m; r++) {
                float v = m->alpha * col[r];
                if (C) v += m->beta * C[r + j * m->ldc];
                if (m->bias) v += bias[r];
                if (m->relu && v < 0) v = 0;
                D[r + j * m->ldc] = v;
            }
        }
    }
    free(col);
}

/* ---- lint ------------------------------------------------------------------------------------ */

int pcu_kernel_esize(const pcu_step *s, int k) { return pcu_kernel_esize_of(s->kernel, &s->u, k); }

int64_t pcu_kernel_extent(const pcu_step *s, int k) { return pcu_kernel_extent_of(s->kernel, &s->u, k); }

/* The step's output operands (a bit per operand). */
static unsigned outputs_of(const pcu_step *s) {
    switch (s->kind) {
    case PCU_S_KERNEL: return pcu_kernel_writes(s->kernel, &s->u); /* kernels.def */
    case PCU_S_CONV: return 1u << 4;
    case PCU_S_MATMUL: return 1u << 3;
    case PCU_S_COPY: return 2u;
    default: return 0; /* HOST: n_in .. */
    }
}

/* No two arena tensors (a view one with its source) share bytes over a step
 * where both are live: each tensor's bytes are the span of its operands'
 * regions, its lifetime the steps from the first that touches it to the last. */
/* an arena tensor's name for messages (a layout temp: its tensor's) */
static const char *lint_name(const pcu_plan *pl, int t) {
    return t < pl->st->n_tensors ? pl->st->t[t].name : pl->st->t[pl->temp_of[t - pl->st->n_tensors]].name;
}

static pp_status lint_arena(const pcu_plan *pl, pp_err *err) {
    const int nt = pl->n_tensors > pl->st->n_tensors ? pl->n_tensors : pl->st->n_tensors;
    int *b = malloc(pp_count(nt) * sizeof *b), *e = malloc(pp_count(nt) * sizeof *e);
    int *id = malloc(pp_count(nt) * sizeof *id);
    size_t *off = malloc(pp_count(nt) * sizeof *off), *end = malloc(pp_count(nt) * sizeof *end);
    pp_status s = PP_OK;
    if (!b || !e || !id || !off || !end) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int t = 0; s == PP_OK && t < nt; t++) b[t] = -1, e[t] = -1, off[t] = SIZE_MAX, end[t] = 0;
    for (int i = 0; s == PP_OK && i < pl->n_steps; i++)
        for (int k = 0; k < pl->steps[i].n_ops; k++) {
            const pcu_ref *r = &pl->steps[i].ops[k];
            if (r->space != PCU_SP_ARENA || r->tensor < 0 || r->tensor >= nt) continue;
            const int t = pl->root ? pl->root[r->tensor] : r->tensor;
            if (b[t] < 0) b[t] = i;
            e[t] = i;
            if (r->off < off[t]) off[t] = r->off;
            if (r->off + r->bytes > end[t]) end[t] = r->off + r->bytes;
        }
    int n = 0, x = 0, y = 0;
    for (int t = 0; s == PP_OK && t < nt; t++)
        if (b[t] >= 0) id[n] = t, b[n] = b[t], e[n] = e[t], off[n] = off[t], end[n] = end[t] - off[t], n++;
    const int found = s == PP_OK ? pprt_slots_overlap(n, b, e, off, end, &x, &y) : 0; /* end: now sizes */
    if (found < 0) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (found > 0)
        s = PP_FAIL(err, PP_ERUNTIME, "cuda lint: stage %d: arena tensors '%s' and '%s' share bytes while both are "
                    "live", pl->st->index, lint_name(pl, id[x]), lint_name(pl, id[y]));
    free(b), free(e), free(id), free(off), free(end);
    return s;
}

pp_status pcu_lint(const pcu_plan *pl, pp_err *err) {
    static const char *const space[PCU_SP_COUNT] = {"arena", "weights", "input message", "output message",
                                                    "workspace"};
    for (int i = 0; i < pl->n_steps; i++) {
        const pcu_step *s = &pl->steps[i];
        const char *node = s->node >= 0 ? pl->st->nodes[s->node].name : "(pass-through)";
        for (int k = 0; k < s->n_ops; k++) {
            const pcu_ref *r = &s->ops[k];
            if (r->space < 0) continue;
            if (r->space >= PCU_SP_COUNT || r->off > pl->bytes[r->space] || r->bytes > pl->bytes[r->space] - r->off) {
                char m[160];
                snprintf(m, sizeof m, "operand %d [%llu, +%llu) lies outside the %s (%llu bytes)", k,
                         (unsigned long long)r->off, (unsigned long long)r->bytes,
                         r->space < PCU_SP_COUNT ? space[r->space] : "?",
                         r->space < PCU_SP_COUNT ? (unsigned long long)pl->bytes[r->space] : 0ull);
                return PP_FAIL(err, PP_ERUNTIME, "cuda lint: stage %d step %d (%s, node '%s'): %s", pl->st->index, i,
                               pcu_step_name(s), node, m);
            }
        }
        char m[200] = "";
        if (s->kind == PCU_S_KERNEL) {
            /* launch limits: blocks of PCU_BLOCK threads on grid x (2^31 - 1) */
            const int64_t blocks = (s->threads + PCU_BLOCK - 1) / PCU_BLOCK;
            if (s->threads < 1 || blocks > 2147483647LL)
                snprintf(m, sizeof m, "%lld threads: outside 1 .. (2^31-1)*%d", (long long)s->threads, PCU_BLOCK);
            else if ((pcu_kernel_phases(s->kernel) > 0 || emu_coop(s)) && s->threads % PCU_BLOCK)
                snprintf(m, sizeof m, "%lld threads: a block-per-row kernel runs whole blocks of %d",
                         (long long)s->threads, PCU_BLOCK);
            for (int k = 0; k < s->n_ops && !m[0]; k++) {
                const pcu_ref *r = &s->ops[k];
                if (r->space < 0) continue;
                const int64_t ext = pcu_kernel_extent(s, k);
                const int es = pcu_kernel_esize(s, k);
                if (ext < 0 || es <= 0 || (uint64_t)ext * (uint64_t)es > r->bytes || r->off % (uint64_t)es)
                    snprintf(m, sizeof m, "operand %d: accesses %lld elements of %d bytes, the region holds %llu bytes "
                             "at offset %llu", k, (long long)ext, es, (unsigned long long)r->bytes,
                             (unsigned long long)r->off);
            }
        }
        if (s->kind == PCU_S_MATMUL) { /* each matrix as cuBLASLt reads it, in its operand */
            const pcu_mm *mm = &s->u.mm;
            const int64_t rows[3] = {mm->transa ? mm->k : mm->m, mm->transb ? mm->n : mm->k, mm->m},
                          cols[3] = {mm->transa ? mm->m : mm->k, mm->transb ? mm->k : mm->n, mm->n},
                          ld[3] = {mm->lda, mm->ldb, mm->ldc}, bst[3] = {mm->sa, mm->sb, mm->sc};
            static const int opnd[3] = {0, 1, 3};
            for (int q = 0; q < 3 && !m[0]; q++) {
                const int64_t ext = (mm->batch - 1) * bst[q] + (cols[q] - 1) * ld[q] + rows[q];
                if (mm->batch < 1 || rows[q] < 1 || cols[q] < 1 || ld[q] < rows[q] || bst[q] < 0 ||
                    (uint64_t)ext * (mm_half(mm) ? 2u : 4u) > s->ops[opnd[q]].bytes)
                    snprintf(m, sizeof m, "matrix %c: %lld x %lld, ld %lld, %lld batches %lld apart: outside its %llu "
                             "bytes", "ABD"[q], (long long)rows[q], (long long)cols[q], (long long)ld[q],
                             (long long)mm->batch, (long long)bst[q], (unsigned long long)s->ops[opnd[q]].bytes);
            }
        }
        /* outputs overlapping inputs: only a kernel that kernels.def marks
         * inplace (elementwise, the epilogue, Trilu), over the same bytes
         * (each thread reads its element before writing it) */
        const unsigned outs = s->kind == PCU_S_HOST ? 0 : outputs_of(s);
        for (int a = 0; a < s->n_ops && !m[0]; a++) {
            if (!(outs & (1u << a))) continue;
            for (int b = 0; b < s->n_ops && !m[0]; b++) {
                if (a == b || !pcu_ref_meet(s->ops[a], s->ops[b])) continue;
                const bool ew_same = s->kind == PCU_S_KERNEL && pcu_kernel_inplace(s->kernel) &&
                                     s->ops[a].off == s->ops[b].off && s->ops[a].bytes == s->ops[b].bytes;
                if (!ew_same) snprintf(m, sizeof m, "output operand %d overlaps operand %d", a, b);
            }
        }
        for (int k = 0; k < s->n_ops && !m[0]; k++)
            if ((s->kind == PCU_S_HOST ? k >= (s->node >= 0 ? pl->st->nodes[s->node].n_in : 0) : (outs >> k) & 1u) &&
                (s->ops[k].space == PCU_SP_IN || s->ops[k].space == PCU_SP_WEIGHTS))
                snprintf(m, sizeof m, "operand %d writes the %s", k, space[s->ops[k].space]);
        if (s->kind == PCU_S_COPY && s->ops[0].bytes != s->ops[1].bytes)
            snprintf(m, sizeof m, "copies %llu bytes into %llu", (unsigned long long)s->ops[0].bytes,
                     (unsigned long long)s->ops[1].bytes);
        if (m[0])
            return PP_FAIL(err, PP_ERUNTIME, "cuda lint: stage %d step %d (%s, node '%s'): %s", pl->st->index, i,
                           pcu_step_name(s), node, m);
    }
    return lint_arena(pl, err);
}

/* ---- the emulator executor ----------------------------------------------------------------- */

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    pcu_plan pl;
    unsigned char *mem[PCU_SP_COUNT]; /* the "device" buffers; IN and OUT are bound per run */
    void **ptr;                       /* tensor id -> host staging bytes of HOST steps */
    unsigned char *stage_buf;         /* host staging of HOST steps */
    pprt_scratch scratch;
    pprt_tensor tin[PP_MAX_INPUTS], tout[PP_MAX_OUTPUTS];
    double *node_s;
    int device; /* its messages are in this emulated device's memory (mem_emu.c); -1: host memory */
    int lt_inputs; /* pcu_lt_inputs of --precision: how the products read A and B (cuBLASLt's compute type) */
    /* the engine's graph cache, kept with markers for graphs: the captures a GPU would make, counted */
    bool graphs;
    pcu_gcache gc;
    long runs;
    size_t uploaded; /* weight bytes uploaded so far (pprt_exec_counts.weight_upload_bytes) */
    /* the device optimizer (dopt.h): the weights this stage outputs the gradients of, flat */
    struct emu_dopt {
        int np, buffers;
        pprt_dopt_param *ps;
        int64_t *off, *tab;  /* [np] each weight's first element in the flat buffers; OPTG's table (kmath.h) */
        int64_t T;           /* the flat buffers' elements (a whole number of PCU_OPTG_CHUNK) */
        float *w, *g, *m, *v;
        double *part, *sq;
        bool first;          /* the next run's gradients are the step's first */
        bool hold;           /* HOLD: the runs' gradients into held[] (dopt.h) */
        int n_held, cap_held;
        float **held;        /* [cap_held] flat buffers of T, the gaps +0 */
        pcu_early early;     /* EARLY: the step's last run folds by bucket (early.h) */
        float *into;         /* that run's: the sums or its held buffer */
        bool into_a;         /* that run's fold copies (the step's first, a held run) */
    } dopt;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *at(pprt_exec *x, const pcu_ref *r) {
    return r->space < 0 ? NULL : x->mem[r->space] + r->off;
}

static void emu_destroy(pprt_exec *x) {
    if (!x) return;
    for (int i = 0; i < PCU_SP_COUNT; i++)
        if (i != PCU_SP_IN && i != PCU_SP_OUT) free(x->mem[i]);
    pcu_plan_free(&x->pl);
    pcu_gcache_free(&x->gc, NULL);
    pprt_scratch_free(&x->scratch);
    free(x->ptr);
    free(x->stage_buf);
    free(x->node_s);
    struct emu_dopt *d = &x->dopt;
    free(d->ps), free(d->off), free(d->tab), free(d->w), free(d->m), free(d->v), free(d->part), free(d->sq);
    if (d->g) pprt_mem_cuda_emu.free(x->device, d->g);
    for (int i = 0; i < d->cap_held; i++) free(d->held[i]);
    free(d->held);
    pcu_early_free(&d->early);
    free(x);
}

/* The weight space from the weights' host bytes; a reload (again) only
 * those that vary and no device optimizer keeps (pprt_tdesc.resident).
 * Returns the bytes uploaded. */
static size_t upload_weights(pprt_exec *x, bool again) {
    const pprt_stage *st = x->st;
    size_t n = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        const pprt_tdesc *t = &st->t[i];
        if (t->kind != PPRT_WEIGHT || (again && (!t->varies || t->resident))) continue;
        pcu_weight_put(&x->pl, i, x->mem[PCU_SP_WEIGHTS] + x->pl.woff[i], t->data);
        n += t->nbytes;
    }
    return n;
}

static pp_status emu_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                            pp_err *err) {
    PP_TRY(pprt_stage_weights(p, st->index, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *x = (pprt_exec){.p = p, .st = st, .device = cfg->device, .lt_inputs = pcu_lt_inputs_of(pcu_products_precision(p, cfg->precision))};
    /* as the engine decides (exec_cuda.c): graphs unless --cuda-graphs off, --cuda-sync or --profile */
    x->graphs = pprt_cuda_config()->graphs && !pprt_cuda_config()->sync_each && !cfg->node_times;
    unsigned char *hn = pprt_cuda_host_nodes(st);
    pp_status s = hn ? pprt_cuda_plan_stage(p, st, hn, &x->pl, err) : PP_FAIL(err, PP_ENOMEM, "out of memory");
    free(hn);
    if (s == PP_OK && !cfg->quiet && !pprt_cuda_config()->host_only) pcu_plan_explain(&x->pl, "cuda-emu", stderr);
    if (s == PP_OK && pprt_cuda_config()->explain) pcu_plan_explain_kernels(&x->pl, "cuda-emu", stderr);
    if (s != PP_OK) {
        free(x);
        return s;
    }
    /* the workspace: off the GPU its error word and the own kernels' scratch
     * after the library workspace, which stays untouched (never paged in) */
    const uint64_t want[PCU_SP_COUNT] = {x->pl.bytes[PCU_SP_ARENA], x->pl.bytes[PCU_SP_WEIGHTS], 0, 0,
                                         x->pl.bytes[PCU_SP_WORK]};
    const uint64_t lib_end = PCU_WORK_LIB + PCU_LIB_WORKSPACE;
    size_t host_bytes = 0;
    for (int i = 0; i < st->n_tensors; i++) host_bytes += pp_align_up(st->t[i].nbytes, 64);
    x->ptr = calloc(pp_count(st->n_tensors), sizeof *x->ptr);
    x->node_s = calloc(pp_count(st->n_nodes), sizeof *x->node_s);
    bool ok = x->ptr && x->node_s;
    for (int i = 0; i < PCU_SP_COUNT && ok; i++) {
        if (i == PCU_SP_IN || i == PCU_SP_OUT) continue;
        void *m = NULL;
        ok = posix_memalign(&m, 256, want[i] ? want[i] : 256) == 0;
        x->mem[i] = m;
        /* fresh device memory holds anything: never zeros the plan relies on */
        if (ok && i != PCU_SP_WORK) memset(m, 0xA5, want[i] ? want[i] : 256);
        if (ok && i == PCU_SP_WORK) {
            memset(m, 0xA5, PCU_WORK_LIB);
            if (want[i] > lib_end) memset((unsigned char *)m + lib_end, 0xA5, want[i] - lib_end);
        }
    }
    void *hb = NULL;
    ok = ok && posix_memalign(&hb, 64, host_bytes ? host_bytes : 64) == 0;
    x->stage_buf = hb;
    if (!ok) {
        emu_destroy(x);
        return PP_FAIL(err, PP_ENOMEM, "stage %d: cannot allocate its emulated device memory", st->index);
    }
    for (int i = 0, o = 0; i < st->n_tensors; i++) {
        x->ptr[i] = x->stage_buf + o;
        o += (int)pp_align_up(st->t[i].nbytes, 64);
    }
    x->uploaded = upload_weights(x, false); /* the engine goes through a pinned buffer */
    *out = x;
    return PP_OK;
}

/* exec.h's reload, as the engine's (exec_cuda.c): the weight space again, the plan and graphs kept. */
static pp_status emu_reload(pprt_exec *x, unsigned long version, pp_err *err) {
    (void)version;
    if (x->pl.folds_varying)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: a step's parameters hold a trained weight's value", x->st->index);
    x->uploaded += upload_weights(x, true);
    return PP_OK;
}

/* ---- the device optimizer (dopt.h), as the engine's (exec_cuda.c) ------------------------------ */

int64_t *pprt_cuda_optg_layout(const pprt_dopt_param *ps, int np, int64_t *off, int64_t *T) {
    int64_t t = 0;
    for (int p = 0; p < np; p++) {
        off[p] = t;
        t += (ps[p].numel + PCU_OPTG_CHUNK - 1) / PCU_OPTG_CHUNK * PCU_OPTG_CHUNK;
    }
    *T = t;
    int64_t *tab = calloc(pp_count(4 * (size_t)np + (size_t)(t / PCU_OPTG_CHUNK)), sizeof *tab);
    for (int p = 0; tab && p < np; p++) {
        const int64_t chunks = (ps[p].numel + PCU_OPTG_CHUNK - 1) / PCU_OPTG_CHUNK;
        tab[4 * p] = off[p], tab[4 * p + 1] = (int64_t)(ps[p].off / sizeof(float)), tab[4 * p + 2] = ps[p].numel;
        tab[4 * p + 3] = chunks;
        for (int64_t c = 0; c < chunks; c++) tab[4 * np + off[p] / PCU_OPTG_CHUNK + c] = p;
    }
    return tab;
}

/* Where a run's gradients go: the sums (the step's first copied, the later ones added) or, under HOLD, a held
 * buffer of their own (copied). Before the run's folds: a held buffer is counted before any bucket is ready. */
static pp_status emu_fold_target(pprt_exec *x, pp_err *err) {
    struct emu_dopt *d = &x->dopt;
    d->into = d->g, d->into_a = d->first || d->hold;
    if (d->hold) {
        if (d->n_held == d->cap_held) {
            float **h = realloc(d->held, (size_t)(d->cap_held + 1) * sizeof *h);
            if (!h) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            d->held = h;
            if (!(h[d->cap_held] = calloc(pp_count(d->T), sizeof(float)))) /* the gaps +0, as cudaMemset */
                return PP_FAIL(err, PP_ENOMEM, "stage %d: out of emulated device memory for a held run's gradients",
                               x->st->index);
            d->cap_held++;
        }
        d->into = d->held[d->n_held++];
    }
    if (!d->hold) d->first = false;
    return PP_OK;
}

/* OPTG FOLD of the run's gradients in message out, elements [lo, hi) of the flat buffers, into the target. */
static void emu_fold_range(struct emu_dopt *d, const unsigned char *out, int64_t lo, int64_t hi) {
    const pcu_optg k = {.mode = PCU_OPTG_FOLD, .has_a = d->into_a, .n = hi - lo, .np = d->np,
                        .chunks = d->T / PCU_OPTG_CHUNK, .lo = lo};
    void *op[PCU_KERNEL_OPS] = {d->into, (void *)out, NULL, d->tab};
    for (int64_t i = 0; i < k.n; i++) pcu_kernel_call(PCU_K_OPTG, &k, op, NULL, i, 0);
}

/* The step's last run under EARLY: the folds of the buckets whose last step is i (-1: before the first), each
 * ready once done (the engine's event, as a flag). */
static void emu_early_after(pprt_exec *x, int i) {
    struct emu_dopt *d = &x->dopt;
    for (int b = 0; b < d->early.n; b++)
        if (d->early.after[b] == i) {
            emu_fold_range(d, x->mem[PCU_SP_OUT], d->early.bound[b], d->early.bound[b + 1]);
            pcu_early_ready(&d->early, b);
        }
}

/* FOLD_HELD: each held run's bucket added onto the sums' in order, as OPTG FOLD adds (one weight spanning it). */
static pp_status emu_fold_held(struct emu_dopt *d, const pprt_dopt_call *c, pp_err *err) {
    if (c->bucket < 0 || c->bucket >= d->early.n)
        return PP_FAIL(err, PP_ERUNTIME, "internal: FOLD_HELD of bucket %d of %d", c->bucket, d->early.n);
    const int64_t lo = d->early.bound[c->bucket], n = d->early.bound[c->bucket + 1] - lo;
    const int64_t C = (n + PCU_OPTG_CHUNK - 1) / PCU_OPTG_CHUNK;
    int64_t *tab = calloc(pp_count(4 + (size_t)C), sizeof *tab);
    if (!tab) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    tab[2] = n, tab[3] = C;
    const pcu_optg k = {.mode = PCU_OPTG_FOLD, .n = n, .np = 1, .chunks = C};
    for (int j = 0; j < d->n_held; j++) {
        void *op[PCU_KERNEL_OPS] = {d->g + lo, d->held[j] + lo, NULL, tab};
        for (int64_t i = 0; i < n; i++) pcu_kernel_call(PCU_K_OPTG, &k, op, NULL, i, 0);
    }
    free(tab);
    return PP_OK;
}

static void emu_optg(struct emu_dopt *d, const pcu_optg *k) {
    void *op[PCU_KERNEL_OPS] = {d->g, NULL, d->part, d->tab, d->sq};
    for (int64_t i = 0; i < k->n; i++) pcu_kernel_call(PCU_K_OPTG, k, op, NULL, i, 0);
}

static pp_status emu_dopt_bind(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct emu_dopt *d = &x->dopt;
    if (d->np) return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d's device optimizer bound twice", x->st->index);
    d->ps = calloc(pp_count(c->n_params), sizeof *d->ps);
    d->off = calloc(pp_count(c->n_params), sizeof *d->off);
    if (!d->ps || !d->off) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(d->ps, c->params, (size_t)c->n_params * sizeof *d->ps);
    int64_t T;
    if (!(d->tab = pprt_cuda_optg_layout(c->params, c->n_params, d->off, &T)))
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    d->T = T, d->buffers = c->buffers;
    const size_t b = pp_count(T) * sizeof(float);
    /* the sums in emulated device memory (others copy into and out of them: the replicas' chain), the gaps +0, as
     * the GPU's cudaMemset */
    PP_TRY(pprt_mem_cuda_emu.alloc(x->device, b, (void **)&d->g, err));
    memset(d->g, 0, b);
    d->w = calloc(1, b);
    d->m = c->buffers >= 1 ? calloc(1, b) : NULL, d->v = c->buffers >= 2 ? calloc(1, b) : NULL;
    d->part = calloc(pp_count(T / PCU_OPTG_CHUNK), sizeof *d->part), d->sq = calloc(pp_count(c->n_params), sizeof *d->sq);
    if (!d->w || (c->buffers >= 1 && !d->m) || (c->buffers >= 2 && !d->v) || !d->part || !d->sq)
        return PP_FAIL(err, PP_ENOMEM, "stage %d: out of emulated device memory for the device optimizer", x->st->index);
    for (int p = 0; p < c->n_params; p++) {
        const size_t n = (size_t)c->params[p].numel * sizeof(float);
        memcpy(d->w + d->off[p], c->params[p].w, n);
        if (d->m) memcpy(d->m + d->off[p], c->params[p].m, n);
        if (d->v) memcpy(d->v + d->off[p], c->params[p].v, n);
        c->bytes += n * (size_t)(1 + c->buffers);
        for (int t = 0; t < c->params[p].n_dst; t++) memcpy(c->params[p].dst[t], d->w + d->off[p], n);
    }
    d->np = c->n_params;
    d->first = true;
    return PP_OK;
}

static pp_status emu_dopt(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct emu_dopt *d = &x->dopt;
    if (x->pl.folds_varying || x->device < 0)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: %s", x->st->index, x->device < 0 ? "its messages are in host memory"
                       : "a step's parameters hold a trained weight's value");
    switch (c->kind) {
    case PPRT_DOPT_ADDR:
        c->mem = &pprt_mem_cuda_emu;
        return pcu_dopt_addr(x->st, &x->pl, x->mem[PCU_SP_WEIGHTS], x->device, c, err);
    case PPRT_DOPT_BIND: return emu_dopt_bind(x, c, err);
    case PPRT_DOPT_BEGIN: d->first = true, d->hold = false, d->n_held = 0; return PP_OK;
    case PPRT_DOPT_HOLD: d->hold = true; return PP_OK;
    case PPRT_DOPT_EARLY: {
        bool changed;
        c->addr = d->g, c->device = x->device, c->sums_bytes = (size_t)d->T * sizeof(float);
        return pcu_early_arm(&d->early, &x->pl, d->ps, d->off, d->np, d->T, c, x->st->index, &changed, err);
    }
    case PPRT_DOPT_WAIT: return pcu_early_wait(&d->early, c->bucket, x->st->index, err);
    case PPRT_DOPT_CANCEL: pcu_early_end(&d->early, false); return PP_OK;
    case PPRT_DOPT_FOLD_HELD: return emu_fold_held(d, c, err);
    case PPRT_DOPT_NORM: {
        if (c->mean || c->unscale)
            emu_optg(d, &(pcu_optg){.mode = PCU_OPTG_SCALE, .has_a = c->mean, .has_b = c->unscale, .a = c->inv,
                                    .b = c->by, .n = d->T});
        emu_optg(d, &(pcu_optg){.mode = PCU_OPTG_SQ, .n = d->T / PCU_OPTG_CHUNK});
        emu_optg(d, &(pcu_optg){.mode = PCU_OPTG_SUM, .n = d->np, .np = d->np, .chunks = d->T / PCU_OPTG_CHUNK});
        memcpy(c->sq, d->sq, (size_t)d->np * sizeof *d->sq);
        return PP_OK;
    }
    case PPRT_DOPT_STEP: {
        if (c->clip) emu_optg(d, &(pcu_optg){.mode = PCU_OPTG_SCALE, .has_a = 1, .a = c->c, .n = d->T});
        pcu_opt k = c->k;
        k.n = d->T;
        void *op[PCU_KERNEL_OPS] = {d->w, d->g, d->m, d->v};
        for (int64_t i = 0; i < k.n; i++) pcu_kernel_call(PCU_K_OPT, &k, op, NULL, i, 0);
        for (int p = 0; p < d->np; p++)
            for (int t = 0; t < d->ps[p].n_dst; t++)
                memcpy(d->ps[p].dst[t], d->w + d->off[p], (size_t)d->ps[p].numel * sizeof(float));
        return PP_OK;
    }
    case PPRT_DOPT_GET:
        for (int p = 0; p < d->np && p < c->n_params; p++) {
            const size_t n = (size_t)d->ps[p].numel * sizeof(float);
            memcpy(c->params[p].w, d->w + d->off[p], n);
            if (d->m && c->params[p].m) memcpy(c->params[p].m, d->m + d->off[p], n);
            if (d->v && c->params[p].v) memcpy(c->params[p].v, d->v + d->off[p], n);
            c->bytes += n * (size_t)(1 + d->buffers);
        }
        return PP_OK;
    }
    return PP_FAIL(err, PP_ERUNTIME, "internal: device optimizer call %d", (int)c->kind);
}

/* A HOST step: download its inputs, the reference kernel, upload its outputs. */
static pp_status emu_host(pprt_exec *x, const pcu_step *s, pp_err *err) {
    const pprt_node *n = &x->st->nodes[s->node];
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0) memcpy(x->ptr[n->in[k]], at(x, &s->ops[k]), s->ops[k].bytes);
    PP_TRY(pprt_ref_node(x->p, x->st, n, x->ptr, x->tin, x->tout, &x->scratch, err));
    for (int k = 0; k < n->n_out; k++)
        memcpy(at(x, &s->ops[n->n_in + k]), x->ptr[n->out[k]], s->ops[n->n_in + k].bytes);
    return PP_OK;
}

/* A block-per-row kernel (kernels.def PCU_ROWS): each block's phases in
 * order, every lane of a phase before the next (the GPU's barrier), the
 * block's shared memory a buffer of this frame. */
static void emu_rows(const pcu_step *s, void *const *op) {
    float row[PCU_ROW_MAX];
    double part[2 * PCU_ROW_LANES];
    const int phases = pcu_kernel_phases(s->kernel);
    for (int64_t r = 0; r < s->threads / PCU_BLOCK; r++)
        for (int ph = 0; ph < phases; ph++)
            for (int l = 0; l < PCU_ROW_LANES; l++) pcu_kernel_phase_call(s->kernel, &s->u, op, ph, r, l, row, part);
}

/* A cooperative kernel (kernels.def PCU_COOP): each block's phases in
 * order, every lane of a phase before the next (the GPU's barrier), the
 * block's shared memory and its lanes' state buffers of their own. */
static pp_status emu_coop_run(const pcu_step *s, void *const *op, pp_err *err) {
    size_t shb, laneb;
    const int phases = pcu_kernel_coop(s->kernel, &s->u, &shb, &laneb);
    void *sh = malloc(shb), *lanes = malloc(laneb * PCU_BLOCK);
    if (!sh || !lanes) {
        free(sh);
        free(lanes);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int64_t r = 0; r < s->threads / PCU_BLOCK; r++)
        for (int ph = 0; ph < phases; ph++)
            for (int l = 0; l < PCU_BLOCK; l++) pcu_kernel_coop_call(s->kernel, &s->u, op, ph, r, l, sh, lanes);
    free(sh);
    free(lanes);
    return PP_OK;
}

pp_status pprt_cuda_emu_run_dev(pprt_exec *x, void *dev_in, void *dev_out, pp_err *err) {
    PP_TRY(pcu_check_msgs(x->st->index, dev_in, dev_out, err));
    x->mem[PCU_SP_IN] = dev_in;
    x->mem[PCU_SP_OUT] = dev_out;
    /* the engine's graph (gcache.h): the same lookups, a capture where it would capture */
    bool has_host = false;
    for (int i = 0; i < x->pl.n_steps; i++) has_host = has_host || x->pl.steps[i].kind == PCU_S_HOST;
    /* the step's last run under EARLY: no graph (its folds and events go between the steps) */
    if (x->graphs && !has_host && x->runs > 0 && !x->dopt.early.on && !pcu_gcache_find(&x->gc, dev_in, dev_out)) {
        void *out = NULL;
        pcu_gcache_put(&x->gc, dev_in, dev_out, (void *)&x->gc, &out);
    }
    x->runs++;
    int *ew = (int *)(x->mem[PCU_SP_WORK] + PCU_WORK_ERR);
    *ew = 0;
    const bool early = x->dopt.early.on;
    if (early) emu_early_after(x, -1);
    for (int i = 0; i < x->pl.n_steps; i++) {
        const pcu_step *s = &x->pl.steps[i];
        const double t0 = now_s();
        void *op[PCU_KERNEL_OPS] = {NULL};
        for (int k = 0; k < s->n_ops && k < PCU_KERNEL_OPS; k++) op[k] = at(x, &s->ops[k]);
        pp_status st = PP_OK;
        switch (s->kind) {
        case PCU_S_KERNEL:
            if (pcu_kernel_phases(s->kernel) > 0) emu_rows(s, op);
            else if (emu_coop(s)) st = emu_coop_run(s, op, err);
            else
                for (int64_t t = 0; t < s->threads; t++) pcu_kernel_thread(s, op, ew, t);
            break;
        case PCU_S_CONV: {
            const pcu_conv *c = &s->u.conv;
            if (c->dt == PCU_T_F16 || c->dt == PCU_T_BF16) {
                emu_conv_half(s, op);
                break;
            }
            pcu_emu_conv(c, op[0], op[1], op[2], op[3], op[4]);
            if (pcu_conv_epilogue(c, pcu_conv_graph_fuses(c))) emu_epilogue(c, op[4], op[2], op[3]);
            break;
        }
        case PCU_S_MATMUL: pcu_emu_matmul(&s->u.mm, x->lt_inputs, op[0], op[1], op[2], op[3], op[4]); break;
        case PCU_S_COPY: memmove(op[1], op[0], s->ops[0].bytes); break;
        default: st = emu_host(x, s, err); break;
        }
        if (s->node >= 0) x->node_s[s->node] += now_s() - t0;
        if (st != PP_OK) return st;
        if (*ew) {
            const pprt_node *n = &x->st->nodes[s->node];
            if (s->kind == PCU_S_KERNEL && s->kernel == PCU_K_RNN)
                return PP_FAIL(err, PP_EINVAL, "node '%s' (%s): a sequence_lens value is outside [0, %lld] (the "
                               "sequence length)", n->name, pp_op_table[n->op].name, (long long)s->u.rnn.S);
            return PP_FAIL(err, PP_EINVAL, "node '%s' (%s): an index is out of range", n->name,
                           pp_op_table[n->op].name);
        }
        if (early) emu_early_after(x, i);
    }
    return PP_OK;
}

/* The messages are in the emulated device's memory, as the engine's are in
 * its GPU's: the links put them there (checked against the space's
 * registry, so a driver that handed the stage host memory fails here). */
static pp_status emu_run(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    if (x->device >= 0) {
        char what[64];
        snprintf(what, sizeof what, "stage %d's incoming message", x->st->index);
        if (x->st->in.bytes) PP_TRY(pprt_emu_check(in_msg, x->st->in.bytes, x->device, what, err));
        snprintf(what, sizeof what, "stage %d's outgoing message", x->st->index);
        if (x->st->out.bytes) PP_TRY(pprt_emu_check(out_msg, x->st->out.bytes, x->device, what, err));
    }
    struct emu_dopt *d = &x->dopt;
    if (!d->np) return pprt_cuda_emu_run_dev(x, (void *)in_msg, out_msg, err);
    pcu_early_begin(&d->early);
    pp_status s = emu_fold_target(x, err);
    if (s == PP_OK) s = pprt_cuda_emu_run_dev(x, (void *)in_msg, out_msg, err);
    if (s == PP_OK && !d->early.on) emu_fold_range(d, out_msg, 0, d->T); /* the whole run's in one */
    if (d->early.on) pcu_early_end(&d->early, s == PP_OK);
    return s;
}

static const double *emu_node_seconds(const pprt_exec *x) { return x->node_s; }

void pprt_cuda_counts_of(const pcu_counts *c, pprt_exec_counts *out) {
    memset(out, 0, sizeof *out);
    out->nodes = c->nodes;
    out->library = c->cudnn + c->cublas;
    out->own = c->own;
    out->fused = c->fused;
    out->views = c->copies;
    out->reference = c->host;
    out->layout_changes = c->transposes; /* --cuda-layout nhwc: the NCHW <-> NHWC copies */
    out->own_layout = c->nhwc;           /* and the nodes run channels-last */
}

static void emu_counts(const pprt_exec *x, pprt_exec_counts *c) {
    pprt_cuda_counts_of(&x->pl.counts, c);
    c->graph_captures = x->gc.captures;
    c->graph_replays = x->gc.replays;
    c->weight_upload_bytes = (double)x->uploaded;
}

const pprt_exec_ops pprt_exec_cuda_emu = {"cuda-emu", emu_create, emu_run, emu_destroy, emu_node_seconds, emu_counts,
                                          emu_reload, emu_dopt};
