#include "rnn_gemm.h"

#include <string.h>

#include "../../isa.h"
#include "../../cpu/ref.h"
#include "../../cpu/rnn_common.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "vact.h"
#define VACT 1

/* LSTM's gates with the default activations (sigmoid, tanh, tanh), no clip
 * and no coupled input and forget gates, 8 hidden values at a time on
 * vact.h's functions; the same sums and products in the same order as the
 * scalar loop (no fused multiply-adds), so only the activations differ
 * from it, by their error bounds. Returns how many values it did (a
 * multiple of 8); the caller does the rest. */
__attribute__((target("avx2,fma"))) static int64_t lstm_gates8(const float *xg, const float *hg, const float *p,
                                                                 float *h, float *c, int64_t H) {
    int64_t k = 0;
    for (; k + 8 <= H; k += 8) {
#define L(a) _mm256_loadu_ps(a)
        const __m256 cp = L(c + k);
        __m256 gi = _mm256_add_ps(L(xg + k), L(hg + k)), gf = _mm256_add_ps(L(xg + 2 * H + k), L(hg + 2 * H + k));
        __m256 go = _mm256_add_ps(L(xg + H + k), L(hg + H + k));
        const __m256 gc = _mm256_add_ps(L(xg + 3 * H + k), L(hg + 3 * H + k));
        if (p) {
            gi = _mm256_add_ps(gi, _mm256_mul_ps(L(p + k), cp));
            gf = _mm256_add_ps(gf, _mm256_mul_ps(L(p + 2 * H + k), cp));
        }
        const __m256 i = pprt_sigmoid8(gi), f = pprt_sigmoid8(gf), cc = pprt_tanh8(gc);
        const __m256 cn = _mm256_add_ps(_mm256_mul_ps(f, cp), _mm256_mul_ps(i, cc));
        if (p) go = _mm256_add_ps(go, _mm256_mul_ps(L(p + H + k), cn));
        _mm256_storeu_ps(c + k, cn);
        _mm256_storeu_ps(h + k, _mm256_mul_ps(pprt_sigmoid8(go), pprt_tanh8(cn)));
#undef L
    }
    return k;
}

/* GRU's z and r (default sigmoid, no clip): g[k] = sigmoid(xg[k] + g[k])
 * for k below n, 8 at a time; returns how many it did. */
__attribute__((target("avx2,fma"))) static int64_t sigmoid_sum8(const float *xg, float *g, int64_t n) {
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        _mm256_storeu_ps(g + k, pprt_sigmoid8(_mm256_add_ps(_mm256_loadu_ps(xg + k), _mm256_loadu_ps(g + k))));
    return k;
}

/* GRU's new state (default tanh, no clip), 8 values at a time, as the
 * scalar loop computes it; returns how many it did. */
__attribute__((target("avx2,fma"))) static int64_t gru_state8(const float *xg, const float *hg, const float *rbh,
                                                                float *h, int64_t H, bool lbr) {
    int64_t k = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; k + 8 <= H; k += 8) {
        const __m256 z = _mm256_loadu_ps(hg + k), rg = _mm256_loadu_ps(hg + H + k);
        __m256 hh = _mm256_loadu_ps(hg + 2 * H + k);
        if (rbh) hh = _mm256_add_ps(hh, _mm256_loadu_ps(rbh + k));
        else hh = _mm256_add_ps(hh, _mm256_setzero_ps()); /* the scalar loop's + 0.0f: -0 becomes +0 */
        const __m256 hn = pprt_tanh8(_mm256_add_ps(_mm256_loadu_ps(xg + 2 * H + k), lbr ? _mm256_mul_ps(rg, hh) : hh));
        _mm256_storeu_ps(h + k, _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(one, z), hn),
                                              _mm256_mul_ps(z, _mm256_loadu_ps(h + k))));
    }
    return k;
}
#endif

typedef struct rnn_gemm_run {
    pp_op op;
    const pp_rnn *r;
    pprt_rnn_io io;
    float *xw, *hr, *h, *c, *t; /* [S*N, GH], [N, GH], [N, H] x 3 */
    pprt_sgemm_fn gemm;
    int threads; /* OpenMP threads for the per-sample gate arithmetic */
    bool vector; /* LSTM's and GRU's default activations on vact.h (AVX2 and FMA) */
} rnn_gemm_run;

/* The step's gate arithmetic for sample b of direction d, its x products
 * at xg and h products at hg (GRU: z and r already activated in hg). */
static void gates(const rnn_gemm_run *u, int d, int64_t b, const float *xg, const float *hg) {
    const pp_rnn *r = u->r;
    const int64_t H = r->H;
    const pp_rnn_act *f = r->act[d];
    const float cl = r->clip;
    float *h = u->h + b * H, *c = u->c + b * H;
    if (u->op == PP_OP_LSTM) {
        const float *p = u->io.P ? u->io.P + d * 3 * H : NULL;
        int64_t k0 = 0;
#ifdef VACT
        if (u->vector && f[0].fn == PP_RNN_SIGMOID && f[1].fn == PP_RNN_TANH && f[2].fn == PP_RNN_TANH &&
            isinf(cl) && !r->input_forget)
            k0 = lstm_gates8(xg, hg, p, h, c, H);
#endif
        for (int64_t k = k0; k < H; k++) {
            const float cp = c[k];
            const float pi = p ? p[k] * cp : 0.0f, pf = p ? p[2 * H + k] * cp : 0.0f;
            const float i = act(&f[0], clipf(xg[k] + hg[k] + pi, cl));
            const float fg = r->input_forget ? 1.0f - i : act(&f[0], clipf(xg[2 * H + k] + hg[2 * H + k] + pf, cl));
            const float cc = act(&f[1], clipf(xg[3 * H + k] + hg[3 * H + k], cl));
            const float cn = fg * cp + i * cc;
            const float o = act(&f[0], clipf(xg[H + k] + hg[H + k] + (p ? p[H + k] * cn : 0.0f), cl));
            c[k] = cn;
            h[k] = o * act(&f[2], cn);
        }
    } else if (u->op == PP_OP_GRU) {
        const float *rbh = u->io.B ? u->io.B + d * 2 * r->G * H + r->G * H + 2 * H : NULL;
        int64_t k0 = 0;
#ifdef VACT
        if (u->vector && f[1].fn == PP_RNN_TANH && isinf(cl)) k0 = gru_state8(xg, hg, rbh, h, H, r->linear_before_reset);
#endif
        for (int64_t k = k0; k < H; k++) {
            const float z = hg[k], rg = hg[H + k], hh = hg[2 * H + k] + (rbh ? rbh[k] : 0.0f);
            const float hn = act(&f[1], clipf(xg[2 * H + k] + (r->linear_before_reset ? rg * hh : hh), cl));
            h[k] = (1.0f - z) * hn + z * h[k];
        }
    } else {
        for (int64_t k = 0; k < H; k++) h[k] = act(&f[0], clipf(xg[k] + hg[k], cl));
    }
}

static pp_status direction(const rnn_gemm_run *u, int d, const char *name, pp_err *err) {
    const pp_rnn *r = u->r;
    const pprt_rnn_io *io = &u->io;
    const int64_t S = r->S, N = r->N, H = r->H, I = r->I, GH = r->G * H;
    const bool rev = r->reverse || d == 1, gru = u->op == PP_OP_GRU;
    const float *W = io->W + d * GH * I, *R = io->R + d * GH * H;
    const float *wb = io->B ? io->B + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
    const pp_rnn_act *f = r->act[d];
    const size_t hb = (size_t)H * sizeof(float);
    /* x W^T for every row of X (layout 0: t * N + b, layout 1: b * S + t), with the biases */
    if (I > 0 && S * N > 0 && GH > 0) {
        if (u->gemm('N', 'T', S * N, GH, I, 1.0f, io->X, I, W, I, 0.0f, u->xw, GH))
            return PP_FAIL(err, PP_ERUNTIME, "%s kernel: the product x W^T failed", name);
    } else {
        memset(u->xw, 0, (size_t)(S * N * GH) * sizeof(float));
    }
    if (wb)
        for (int64_t row = 0; row < S * N; row++) {
            float *g = u->xw + row * GH;
            for (int64_t j = 0; j < GH; j++) g[j] += gru && j >= 2 * H ? wb[j] : wb[j] + rb[j];
        }
    for (int64_t b = 0; b < N; b++) {
        const int64_t L = rnn_len(r, io, b), st = rnn_state_at(r, d, b);
        if (io->h0 && L > 0) memcpy(u->h + b * H, io->h0 + st, hb);
        else memset(u->h + b * H, 0, hb);
        if (io->c0 && L > 0) memcpy(u->c + b * H, io->c0 + st, hb);
        else memset(u->c + b * H, 0, hb);
    }
    /* the columns of h R^T taken as they are (GRU without linear_before_reset: z and r only) */
    const int64_t cols = gru && !r->linear_before_reset ? 2 * H : GH;
    for (int64_t s = 0; s < S; s++) {
        if (H > 0 && N > 0 && u->gemm('N', 'T', N, cols, H, 1.0f, u->h, H, R, H, 0.0f, u->hr, GH))
            return PP_FAIL(err, PP_ERUNTIME, "%s kernel: the product h R^T failed", name);
        if (gru) { /* z and r through f; r (.) h for the h gate's product */
            for (int64_t b = 0; b < N; b++) {
                const int64_t L = rnn_len(r, io, b);
                float *hg = u->hr + b * GH, *t = u->t + b * H;
                if (s >= L) {
                    memset(t, 0, hb);
                    continue;
                }
                const float *xg = u->xw + rnn_x_row(r, rnn_time(s, L, rev), b) * GH;
                int64_t k0 = 0;
#ifdef VACT
                if (u->vector && f[0].fn == PP_RNN_SIGMOID && isinf(r->clip)) k0 = sigmoid_sum8(xg, hg, 2 * H);
#endif
                for (int64_t k = k0; k < 2 * H; k++) hg[k] = act(&f[0], clipf(xg[k] + hg[k], r->clip));
                for (int64_t k = 0; k < H; k++) t[k] = hg[H + k] * u->h[b * H + k];
            }
            if (!r->linear_before_reset && H > 0 && N > 0 &&
                u->gemm('N', 'T', N, H, H, 1.0f, u->t, H, R + 2 * H * H, H, 0.0f, u->hr + 2 * H, GH))
                return PP_FAIL(err, PP_ERUNTIME, "%s kernel: the product (r h) R_h^T failed", name);
        }
        /* the samples' gates by themselves: shared by the threads where there is enough of them */
        const int nt = N * GH >= 8192 ? u->threads : 1;
        (void)nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (int64_t b = 0; b < N; b++) {
            const int64_t L = rnn_len(r, io, b), t = rnn_time(s, L, rev);
            float *y = io->Y ? io->Y + rnn_y_at(r, t, d, b) : NULL;
            if (s >= L) {
                if (y) memset(y, 0, hb);
                continue;
            }
            gates(u, d, b, u->xw + rnn_x_row(r, t, b) * GH, u->hr + b * GH);
            if (y) memcpy(y, u->h + b * H, hb);
        }
    }
    for (int64_t b = 0; b < N; b++) {
        const int64_t st = rnn_state_at(r, d, b);
        if (io->Yh) memcpy(io->Yh + st, u->h + b * H, hb);
        if (io->Yc) memcpy(io->Yc + st, u->c + b * H, hb);
    }
    return PP_OK;
}

pp_status pprt_rnn_gemm(pp_op op, pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                        pprt_scratch *scratch, pprt_sgemm_fn gemm, int threads, pp_err *err) {
    const char *name = pp_op_table[op].name;
    pp_rnn r;
    pprt_rnn_io io;
    PP_TRY(pprt_rnn_read(op, attrs, in, n_in, out, n_out, &r, &io, err));
    const int64_t GH = r.G * r.H;
    size_t a, b, n;
    if (pp_mul_ovf((size_t)(r.S * r.N), (size_t)GH, &a) || pp_mul_ovf((size_t)r.N, (size_t)GH, &b) ||
        pp_mul_ovf((size_t)r.N, 3 * (size_t)r.H, &n) || a > SIZE_MAX / 8 - b - n)
        return PP_FAIL(err, PP_ENOMEM, "%s kernel: scratch size overflows", name);
    float *xw = pprt_scratch_get(scratch, (a + b + n) * sizeof(float) + 64);
    if (!xw) return PP_FAIL(err, PP_ENOMEM, "%s kernel: out of memory", name);
    const rnn_gemm_run u = {
        .op = op, .r = &r, .io = io, .xw = xw, .hr = xw + a, .h = xw + a + b, .c = xw + a + b + (size_t)(r.N * r.H),
        .t = xw + a + b + 2 * (size_t)(r.N * r.H), .gemm = gemm, .threads = threads > 1 ? threads : 1,
        .vector = pprt_cpu_isa() >= PPRT_ISA_AVX2,
    };
    for (int d = 0; d < r.D; d++) PP_TRY(direction(&u, d, name, err));
    return PP_OK;
}
