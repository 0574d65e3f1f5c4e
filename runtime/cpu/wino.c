/* wino.c: F(4x4, 3x3) Winograd convolution on AVX2 + FMA (see wino.h for the
 * contract). It is what the oneDNN executor runs for 3x3 stride-1
 * convolutions on CPUs where oneDNN 2.6 has no Winograd kernel: there its
 * direct AVX2 kernels reach 45-65 GFLOP/s on ResNet-50's shapes, while
 * F(4x4, 3x3) does 36 multiplications for 16 outputs per channel pair
 * instead of 144.
 *
 * How a run goes. The output is cut into 4x4 tiles (6x6 input windows);
 * tiles are taken in blocks of `tb` (a multiple of 6, sized so a block's
 * transformed input stays in L2). Per block, and per chunk of `kc` output
 * channels (one chunk unless there are too few blocks to keep every thread
 * busy):
 *   1. input transform  V = B^T d B of each tile and 8-channel group, packed
 *                       as [36][tb/6][C][6] (rows of 6 tiles per channel);
 *   2. 36 matrix products M[xi] = V[xi] (tb x C) * U[xi] (C x kc), on a
 *                       6x16 register-blocked kernel; U, the transformed
 *                       weights G g G^T, is packed once at create time as
 *                       [36][K/16][C][16];
 *   3. output transform Y = A^T M A, plus bias, plus the residual, clamped,
 *                       stored into the 4x4 tile (its in-range part).
 * Tasks (block x chunk) are spread over OpenMP threads in fixed order, and
 * every output element is computed by the same arithmetic whatever the
 * thread count, so results do not depend on it.
 *
 * The kernels carry a target("avx2,fma") attribute, so the file builds
 * with the project's flags everywhere; callers check pprt_wino_cpu() first.
 * The transform constants are those of Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks" (2015), for F(4x4, 3x3) with interpolation
 * points 0, +-1, +-2. */
#include "wino.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define WINO_X86 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma")))
#endif

struct pprt_wino {
    pprt_wino_shape s;
    int64_t tw, tiles_img, tiles; /* tiles per output row, per image, in all */
    int64_t tb, nblk;             /* tiles per block (multiple of 6), blocks */
    int64_t kc, nkc;              /* output channels per chunk (multiple of 16), chunks */
    int threads;
    float *u;                     /* [36][K/16][C][16] */
    float *bias;                  /* [K], zeros when the node has none */
    size_t ws_thread;             /* workspace bytes per thread */
};

#define A6 36 /* 6 x 6 transformed tile */

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

bool pprt_wino_cpu(void) {
#ifdef WINO_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool pprt_wino_fits(const pprt_wino_shape *s) {
    if (s->n < 1 || s->c < 8 || s->k < 16 || s->c % 8 || s->k % 16) return false;
    if (s->h < 1 || s->w < 1 || s->oh < 1 || s->ow < 1) return false;
    if (s->pt < 0 || s->pl < 0 || s->pt > 2 || s->pl > 2) return false;
    /* bottom and right padding (oh = h + pt + pb - 2) within 0..2 as well */
    const int64_t pb = s->oh + 2 - s->h - s->pt, pr = s->ow + 2 - s->w - s->pl;
    return pb >= 0 && pb <= 2 && pr >= 0 && pr <= 2;
}

/* G g G^T of one 3x3 filter, in double (exact enough that the weights'
 * rounding is the only one), as 36 floats xi = 6 * row + column. */
static void filter_transform(const float *g, float *out) {
    static const double G[6][3] = {{1.0 / 4, 0, 0},
                                   {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                   {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                   {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                   {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                   {0, 0, 1}};
    double t[6][3];
    for (int a = 0; a < 6; a++)
        for (int q = 0; q < 3; q++) t[a][q] = G[a][0] * g[0 * 3 + q] + G[a][1] * g[1 * 3 + q] + G[a][2] * g[2 * 3 + q];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) out[a * 6 + b] = (float)(t[a][0] * G[b][0] + t[a][1] * G[b][1] + t[a][2] * G[b][2]);
}

pp_status pprt_wino_create(const pprt_wino_shape *s, const float *w, const float *bias, int threads,
                           pprt_wino **out, pp_err *err) {
    *out = NULL;
    if (!pprt_wino_fits(s)) return PP_FAIL(err, PP_EUNSUP, "Winograd: shape not taken");
    pprt_wino *wn = calloc(1, sizeof *wn);
    if (!wn) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    wn->s = *s;
    wn->threads = threads < 1 ? 1 : threads;
    const int64_t th = (s->oh + 3) / 4, C = s->c, K = s->k;
    wn->tw = (s->ow + 3) / 4;
    wn->tiles_img = th * wn->tw;
    wn->tiles = s->n * wn->tiles_img;
    /* a block's V (36 x tb x C floats) within about 192 KiB, 6..60 tiles,
     * and no larger than the tiles there are */
    int64_t tb = (192 * 1024 / (A6 * 4 * C)) / 6 * 6;
    if (tb < 6) tb = 6;
    if (tb > 60) tb = 60;
    const int64_t all6 = (wn->tiles + 5) / 6 * 6;
    if (tb > all6) tb = all6;
    wn->tb = tb;
    wn->nblk = (wn->tiles + tb - 1) / tb;
    /* too few blocks to balance the threads: split the output channels
     * among them instead (each chunk redoes the cheap input transform) */
    wn->kc = K;
    if (wn->threads > 1 && wn->nblk < 4 * wn->threads) {
        int64_t kc = (K + wn->threads - 1) / wn->threads;
        wn->kc = (kc + 15) / 16 * 16;
    }
    wn->nkc = (K + wn->kc - 1) / wn->kc;
    wn->ws_thread = round64((size_t)A6 * (size_t)tb * (size_t)C * 4) + round64((size_t)A6 * (size_t)tb * (size_t)wn->kc * 4);

    size_t ub = (size_t)A6 * (size_t)K * (size_t)C * 4;
    if (posix_memalign((void **)&wn->u, 64, ub) || posix_memalign((void **)&wn->bias, 64, round64((size_t)K * 4))) {
        pprt_wino_free(wn);
        return PP_FAIL(err, PP_ENOMEM, "Winograd: cannot allocate %zu bytes of transformed weights", ub);
    }
    for (int64_t k = 0; k < K; k++) wn->bias[k] = bias ? bias[k] : 0.0f;
    float t[A6];
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            filter_transform(w + (k * C + c) * 9, t);
            for (int xi = 0; xi < A6; xi++) wn->u[((xi * (K / 16) + k / 16) * C + c) * 16 + k % 16] = t[xi];
        }
    *out = wn;
    return PP_OK;
}

void pprt_wino_free(pprt_wino *wn) {
    if (!wn) return;
    free(wn->u);
    free(wn->bias);
    free(wn);
}

size_t pprt_wino_scratch_bytes(const pprt_wino *wn) { return wn->ws_thread * (size_t)wn->threads; }

size_t pprt_wino_weight_bytes(const pprt_wino *wn) { return (size_t)A6 * (size_t)wn->s.k * (size_t)wn->s.c * 4; }

#ifdef WINO_X86

/* ---- transforms (8 channels per vector) ---------------------------------------------------- */

/* B^T applied to the 6 values d[0], d[st], ..., d[5 st] (in place order: r[k] = row k) */
static AVX2 inline void bt6(const __m256 *d, int st, __m256 *r, int rs) {
    const __m256 d0 = d[0], d1 = d[st], d2 = d[2 * st], d3 = d[3 * st], d4 = d[4 * st], d5 = d[5 * st];
    const __m256 c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(5.0f), c2 = _mm256_set1_ps(2.0f);
    const __m256 t1 = _mm256_fnmadd_ps(c4, d2, d4); /* d4 - 4 d2 */
    const __m256 t2 = _mm256_fnmadd_ps(c4, d1, d3); /* d3 - 4 d1 */
    const __m256 t3 = _mm256_sub_ps(d4, d2);        /* d4 - d2 */
    const __m256 t4 = _mm256_mul_ps(c2, _mm256_sub_ps(d3, d1)); /* 2 (d3 - d1) */
    r[0] = _mm256_fmadd_ps(c4, d0, _mm256_fnmadd_ps(c5, d2, d4));
    r[rs] = _mm256_add_ps(t1, t2);
    r[2 * rs] = _mm256_sub_ps(t1, t2);
    r[3 * rs] = _mm256_add_ps(t3, t4);
    r[4 * rs] = _mm256_sub_ps(t3, t4);
    r[5 * rs] = _mm256_fmadd_ps(c4, d1, _mm256_fnmadd_ps(c5, d3, d5));
}

/* A^T applied to m[0], m[st], ..., m[5 st]: 4 values r[0], r[rs], ... */
static AVX2 inline void at6(const __m256 *m, int st, __m256 *r, int rs) {
    const __m256 m0 = m[0], m1 = m[st], m2 = m[2 * st], m3 = m[3 * st], m4 = m[4 * st], m5 = m[5 * st];
    const __m256 c2 = _mm256_set1_ps(2.0f), c4 = _mm256_set1_ps(4.0f), c8 = _mm256_set1_ps(8.0f);
    const __m256 s12 = _mm256_add_ps(m1, m2), d12 = _mm256_sub_ps(m1, m2);
    const __m256 s34 = _mm256_add_ps(m3, m4), d34 = _mm256_sub_ps(m3, m4);
    r[0] = _mm256_add_ps(_mm256_add_ps(m0, s12), s34);
    r[rs] = _mm256_fmadd_ps(c2, d34, d12);
    r[2 * rs] = _mm256_fmadd_ps(c4, s34, s12);
    r[3 * rs] = _mm256_add_ps(_mm256_fmadd_ps(c8, d34, d12), m5);
}

/* Input transform of tiles t0 .. t0 + tb - 1 (those past the last: zeros)
 * into v, packed [36][tb/6][C][6]. */
static AVX2 void input_block(const pprt_wino *wn, const float *src, int64_t t0, float *v) {
    const pprt_wino_shape *s = &wn->s;
    const int64_t C = s->c, CB = C / 8, tb = wn->tb, H = s->h, W = s->w;
    const int64_t xs = tb * C; /* floats per xi */
    for (int64_t tt = 0; tt < tb; tt++) {
        const int64_t t = t0 + tt;
        float *vt = v + (tt / 6) * C * 6 + tt % 6;
        if (t >= wn->tiles) {
            for (int xi = 0; xi < A6; xi++)
                for (int64_t c = 0; c < C; c++) vt[xi * xs + c * 6] = 0.0f;
            continue;
        }
        const int64_t n = t / wn->tiles_img, r = t % wn->tiles_img;
        const int64_t iy0 = (r / wn->tw) * 4 - s->pt, ix0 = (r % wn->tw) * 4 - s->pl;
        const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + 6 <= H && ix0 + 6 <= W;
        for (int64_t cb = 0; cb < CB; cb++) {
            const float *base = src + ((n * CB + cb) * H) * W * 8;
            __m256 d[A6], tmp[A6], out[A6];
            for (int a = 0; a < 6; a++)
                for (int b = 0; b < 6; b++) {
                    const int64_t iy = iy0 + a, ix = ix0 + b;
                    d[a * 6 + b] = inside || (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                       ? _mm256_loadu_ps(base + (iy * W + ix) * 8)
                                       : _mm256_setzero_ps();
                }
            for (int b = 0; b < 6; b++) bt6(d + b, 6, tmp + b, 6);     /* columns */
            for (int a = 0; a < 6; a++) bt6(tmp + a * 6, 1, out + a * 6, 1); /* rows */
            float lane[8] __attribute__((aligned(32)));
            for (int xi = 0; xi < A6; xi++) {
                _mm256_store_ps(lane, out[xi]);
                float *p = vt + xi * xs + cb * 8 * 6;
                for (int l = 0; l < 8; l++) p[l * 6] = lane[l];
            }
        }
    }
}

/* c (6 rows, ldc apart) = a ([C][6]) * b ([C][16]) */
static AVX2 void gemm6x16(const float *a, const float *b, float *c, int64_t C, int64_t ldc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < C; k++, a += 6, b += 16) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 x = _mm256_broadcast_ss(a);
        c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01), c += ldc;
    _mm256_storeu_ps(c, c10), _mm256_storeu_ps(c + 8, c11), c += ldc;
    _mm256_storeu_ps(c, c20), _mm256_storeu_ps(c + 8, c21), c += ldc;
    _mm256_storeu_ps(c, c30), _mm256_storeu_ps(c + 8, c31), c += ldc;
    _mm256_storeu_ps(c, c40), _mm256_storeu_ps(c + 8, c41), c += ldc;
    _mm256_storeu_ps(c, c50), _mm256_storeu_ps(c + 8, c51);
}

/* m[xi] (tb x kn, row-major, ldc kc) = v[xi] * U[xi][:, k0 .. k0 + kn) */
static AVX2 void multiply_block(const pprt_wino *wn, const float *v, int64_t k0, int64_t kn, float *m) {
    const int64_t C = wn->s.c, K = wn->s.k, tb = wn->tb, kc = wn->kc;
    for (int xi = 0; xi < A6; xi++) {
        const float *vx = v + (int64_t)xi * tb * C;
        const float *ux = wn->u + (int64_t)xi * K * C;
        float *mx = m + (int64_t)xi * tb * kc;
        for (int64_t p = 0; p < kn / 16; p++) {
            const float *panel = ux + ((k0 / 16) + p) * C * 16;
            for (int64_t r = 0; r < tb / 6; r++) gemm6x16(vx + r * C * 6, panel, mx + r * 6 * kc + p * 16, C, kc);
        }
    }
}

/* Output transform of the block's tiles for channels k0 .. k0 + kn, with
 * bias, residual and clamp, into dst. */
static AVX2 void output_block(const pprt_wino *wn, const float *m, int64_t t0, int64_t k0, int64_t kn, float *dst,
                              const float *z, float lo, float hi) {
    const pprt_wino_shape *s = &wn->s;
    const int64_t KB = s->k / 8, OH = s->oh, OW = s->ow, tb = wn->tb, kc = wn->kc;
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int64_t tt = 0; tt < tb && t0 + tt < wn->tiles; tt++) {
        const int64_t t = t0 + tt, n = t / wn->tiles_img, r = t % wn->tiles_img;
        const int64_t oy0 = (r / wn->tw) * 4, ox0 = (r % wn->tw) * 4;
        const int ny = OH - oy0 < 4 ? (int)(OH - oy0) : 4, nx = OW - ox0 < 4 ? (int)(OW - ox0) : 4;
        for (int64_t kb = 0; kb < kn / 8; kb++) {
            __m256 mm[A6], tmp[24], y[16];
            const float *mp = m + tt * kc + kb * 8;
            for (int xi = 0; xi < A6; xi++) mm[xi] = _mm256_loadu_ps(mp + (int64_t)xi * tb * kc);
            for (int b = 0; b < 6; b++) at6(mm + b, 6, tmp + b, 6);   /* columns: tmp[4][6] */
            for (int a = 0; a < 4; a++) at6(tmp + a * 6, 1, y + a * 4, 1); /* rows: y[4][4] */
            const int64_t kk = k0 + kb * 8;
            const __m256 bias = _mm256_loadu_ps(wn->bias + kk);
            const int64_t plane = ((n * KB + kk / 8) * OH) * OW * 8;
            for (int a = 0; a < ny; a++)
                for (int b = 0; b < nx; b++) {
                    const int64_t off = plane + ((oy0 + a) * OW + ox0 + b) * 8;
                    __m256 o = _mm256_add_ps(y[a * 4 + b], bias);
                    if (z) o = _mm256_add_ps(o, _mm256_loadu_ps(z + off));
                    /* max/min with the bound first: a NaN stays NaN, as in the reference */
                    o = _mm256_min_ps(vhi, _mm256_max_ps(vlo, o));
                    _mm256_storeu_ps(dst + off, o);
                }
        }
    }
}

static AVX2 void run_task(const pprt_wino *wn, int64_t task, const float *src, float *dst, const float *z, float lo,
                          float hi, unsigned char *ws) {
    const int64_t blk = task % wn->nblk, chunk = task / wn->nblk;
    const int64_t t0 = blk * wn->tb, k0 = chunk * wn->kc;
    const int64_t kn = wn->s.k - k0 < wn->kc ? wn->s.k - k0 : wn->kc;
    float *v = (float *)ws;
    float *m = (float *)(ws + round64((size_t)A6 * (size_t)wn->tb * (size_t)wn->s.c * 4));
    input_block(wn, src, t0, v);
    multiply_block(wn, v, k0, kn, m);
    output_block(wn, m, t0, k0, kn, dst, z, lo, hi);
}

void pprt_wino_run(const pprt_wino *wn, const float *src, float *dst, const float *z, float lo, float hi,
                   void *scratch, int threads) {
    const int64_t tasks = wn->nblk * wn->nkc;
    unsigned char *ws = scratch;
    if (threads > wn->threads) threads = wn->threads;
#ifdef _OPENMP
    if (threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < tasks; i++)
            run_task(wn, i, src, dst, z, lo, hi, ws + (size_t)omp_get_thread_num() * wn->ws_thread);
        return;
    }
#endif
    for (int64_t i = 0; i < tasks; i++) run_task(wn, i, src, dst, z, lo, hi, ws);
}

#else /* not x86: pprt_wino_cpu() is false and nothing calls this */

void pprt_wino_run(const pprt_wino *wn, const float *src, float *dst, const float *z, float lo, float hi,
                   void *scratch, int threads) {
    (void)wn, (void)src, (void)dst, (void)z, (void)lo, (void)hi, (void)scratch, (void)threads;
}

#endif
