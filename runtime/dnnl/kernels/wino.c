/* wino.c: F(4x4, 3x3) and F(2x2, 3x3) Winograd convolution on AVX2 + FMA
 * (see wino.h for the contract). It is what the oneDNN executor runs for 3x3
 * stride-1 convolutions on CPUs where oneDNN 2.6 has no Winograd kernel:
 * there its direct AVX2 kernels reach 45-65 GFLOP/s on ResNet-50's shapes,
 * while F(4x4, 3x3) does 36 multiplications for 16 outputs per channel pair
 * instead of 144 (F(2x2, 3x3): 16 for 4, instead of 36).
 *
 * How a run goes (F(4x4, 3x3); F(2x2, 3x3) is the same with 2x2 tiles, 4x4
 * windows and 16 products). The output is cut into 4x4 tiles (6x6 input windows);
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

#include "../../isa.h"

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
    int m, a, na;                 /* output tile m x m (4 or 2), input window a x a (m + 2), na = a * a */
    int64_t tw, tiles_img, tiles; /* tiles per output row, per image, in all */
    int64_t tb, nblk;             /* tiles per block (multiple of 6), blocks */
    int64_t kc, nkc;              /* output channels per chunk (multiple of 16), chunks */
    int threads;
    float *u;                     /* [na][K/16][C][16] */
    float *bias;                  /* [K], zeros when the node has none */
    size_t ws_thread;             /* workspace bytes per thread */
};

#define NA_MAX 36 /* the 6 x 6 transformed tile of F(4x4, 3x3) */

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

bool pprt_wino_cpu(void) {
#ifdef WINO_X86
    return pprt_cpu_isa() >= PPRT_ISA_AVX2;
#else
    return false;
#endif
}

bool pprt_wino_fits(const pprt_wino_shape *s) {
    if (s->n < 1 || s->c < 8 || s->k < 16 || s->c % 8 || s->k % 16) return false;
    if (s->h < 1 || s->w < 1 || s->oh < 1 || s->ow < 1) return false;
    if (s->pt < 0 || s->pl < 0 || s->pt > 2 || s->pl > 2) return false;
    if (s->tile != 0 && s->tile != 2 && s->tile != 4) return false;
    /* bottom and right padding (oh = h + pt + pb - 2) within 0..2 as well */
    const int64_t pb = s->oh + 2 - s->h - s->pt, pr = s->ow + 2 - s->w - s->pl;
    return pb >= 0 && pb <= 2 && pr >= 0 && pr <= 2;
}

/* G g G^T of one 3x3 filter for windows of a = 6 (F(4x4, 3x3)) or 4
 * (F(2x2, 3x3)), in double (exact enough that the weights' rounding is the
 * only one), as a * a floats xi = a * row + column. */
static void filter_transform(const float *g, int a, float *out) {
    static const double G6[6][3] = {{1.0 / 4, 0, 0},
                                    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                    {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                    {0, 0, 1}};
    static const double G4[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const double(*G)[3] = a == 6 ? G6 : G4;
    double t[6][3];
    for (int i = 0; i < a; i++)
        for (int q = 0; q < 3; q++) t[i][q] = G[i][0] * g[0 * 3 + q] + G[i][1] * g[1 * 3 + q] + G[i][2] * g[2 * 3 + q];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) out[i * a + j] = (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
}

/* Estimated seconds of one run with tiles of m x m on one thread (never the
 * actual thread count: the tile changes the arithmetic, and a node must give
 * the same bits whatever its stage's threads): the multiplications at
 * about 70 GFLOP/s, or reading the transformed weights at about
 * 12 GB/s (what a Zen 3 core streams from memory once they outgrow the
 * caches), whichever is longer. F(2x2, 3x3) does 16 / 4 = 4 multiplications
 * per output and channel pair against F(4x4, 3x3)'s 36 / 16 = 2.25, but
 * holds 16 instead of 36 transformed values per filter: it wins where few
 * tiles share the weights (small images at small batches). */
static double estimate(const pprt_wino_shape *s, int m) {
    const int64_t tiles = s->n * ((s->oh + m - 1) / m) * ((s->ow + m - 1) / m);
    const double na = (double)(m + 2) * (m + 2), ck = (double)s->c * (double)s->k;
    const double mult = na * (double)((tiles + 5) / 6 * 6) * ck * 2 / 70e9;
    const double read = na * ck * 4 / 12e9;
    return mult > read ? mult : read;
}

pp_status pprt_wino_create(const pprt_wino_shape *s, const float *w, const float *bias, int threads,
                           pprt_wino **out, pp_err *err) {
    *out = NULL;
    if (!pprt_wino_fits(s)) return PP_FAIL(err, PP_EUNSUP, "Winograd: shape not taken");
    pprt_wino *wn = calloc(1, sizeof *wn);
    if (!wn) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    wn->s = *s;
    wn->threads = threads < 1 ? 1 : threads;
    wn->m = s->tile ? s->tile : estimate(s, 2) < estimate(s, 4) ? 2 : 4;
    wn->a = wn->m + 2;
    wn->na = wn->a * wn->a;
    const int64_t m = wn->m, na = wn->na, th = (s->oh + m - 1) / m, C = s->c, K = s->k;
    wn->tw = (s->ow + m - 1) / m;
    wn->tiles_img = th * wn->tw;
    wn->tiles = s->n * wn->tiles_img;
    /* Blocks of tiles. A block's transformed input (na x tb x C floats)
     * within about 192 KiB, so it stays in L2 while its products run; 6..60
     * tiles. Every block reads all of U: while U is small the caches serve
     * the repeated reads (measured: 256 channels in and out, 9.4 MiB, are
     * faster in small blocks), but once it outgrows them (over 12 MiB: 512
     * channels) blocks grow to what one product's input allows (64 KiB).
     * With fewer than four blocks per thread the threads split the output
     * channels instead (each redoes the cheap input transform), and a large
     * U then gets one block of all the tiles (up to 60), so it is read once. */
    const int64_t threads_n = wn->threads, all6 = (wn->tiles + 5) / 6 * 6;
    const bool big_u = (double)na * (double)C * (double)K * 4 > 12.0 * 1024 * 1024;
    int64_t tb = (192 * 1024 / (na * 4 * C)) / 6 * 6;
    if (big_u && tb < (64 * 1024 / (4 * C)) / 6 * 6) tb = (64 * 1024 / (4 * C)) / 6 * 6;
    if (tb < 6) tb = 6;
    if (tb > 60) tb = 60;
    if (tb > all6) tb = all6;
    wn->kc = K;
    if (threads_n > 1 && (wn->tiles + tb - 1) / tb < 4 * threads_n) {
        if (big_u && all6 <= 60) tb = all6;
        const int64_t kc = (K + threads_n - 1) / threads_n;
        wn->kc = (kc + 15) / 16 * 16;
    }
    wn->tb = tb;
    wn->nblk = (wn->tiles + tb - 1) / tb;
    wn->nkc = (K + wn->kc - 1) / wn->kc;
    wn->ws_thread =
        round64((size_t)na * (size_t)tb * (size_t)C * 4) + round64((size_t)na * (size_t)tb * (size_t)wn->kc * 4);

    const size_t ub = pprt_wino_weight_bytes(wn);
    if (posix_memalign((void **)&wn->u, 64, ub) || posix_memalign((void **)&wn->bias, 64, round64((size_t)K * 4))) {
        pprt_wino_free(wn);
        return PP_FAIL(err, PP_ENOMEM, "Winograd: cannot allocate %zu bytes of transformed weights", ub);
    }
    for (int64_t k = 0; k < K; k++) wn->bias[k] = bias ? bias[k] : 0.0f;
    float t[NA_MAX];
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            filter_transform(w + (k * C + c) * 9, wn->a, t);
            for (int xi = 0; xi < na; xi++) wn->u[((xi * (K / 16) + k / 16) * C + c) * 16 + k % 16] = t[xi];
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

size_t pprt_wino_weight_bytes(const pprt_wino *wn) { return (size_t)wn->na * (size_t)wn->s.k * (size_t)wn->s.c * 4; }

int pprt_wino_tile(const pprt_wino *wn) { return wn->m; }

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

/* F(2x2, 3x3): B^T of d[0], d[st], d[2 st], d[3 st], and A^T (2 values) */
static AVX2 inline void bt4(const __m256 *d, int st, __m256 *r, int rs) {
    const __m256 d0 = d[0], d1 = d[st], d2 = d[2 * st], d3 = d[3 * st];
    r[0] = _mm256_sub_ps(d0, d2);
    r[rs] = _mm256_add_ps(d1, d2);
    r[2 * rs] = _mm256_sub_ps(d2, d1);
    r[3 * rs] = _mm256_sub_ps(d1, d3);
}

static AVX2 inline void at4(const __m256 *m, int st, __m256 *r, int rs) {
    const __m256 m0 = m[0], m1 = m[st], m2 = m[2 * st], m3 = m[3 * st];
    r[0] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    r[rs] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
}

/* Input transform of tiles t0 .. t0 + tb - 1 (those past the last: zeros)
 * into v, packed [na][tb/6][C][6]. */
static AVX2 void input_block(const pprt_wino *wn, const float *src, int64_t t0, float *v) {
    const pprt_wino_shape *s = &wn->s;
    const int64_t C = s->c, CB = C / 8, tb = wn->tb, H = s->h, W = s->w;
    const int64_t xs = tb * C; /* floats per xi */
    const int m = wn->m, a = wn->a, na = wn->na;
    for (int64_t tt = 0; tt < tb; tt++) {
        const int64_t t = t0 + tt;
        float *vt = v + (tt / 6) * C * 6 + tt % 6;
        if (t >= wn->tiles) {
            for (int xi = 0; xi < na; xi++)
                for (int64_t c = 0; c < C; c++) vt[xi * xs + c * 6] = 0.0f;
            continue;
        }
        const int64_t n = t / wn->tiles_img, r = t % wn->tiles_img;
        const int64_t iy0 = (r / wn->tw) * m - s->pt, ix0 = (r % wn->tw) * m - s->pl;
        const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + a <= H && ix0 + a <= W;
        for (int64_t cb = 0; cb < CB; cb++) {
            const float *base = src + ((n * CB + cb) * H) * W * 8;
            __m256 d[NA_MAX], tmp[NA_MAX], out[NA_MAX];
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {
                    const int64_t iy = iy0 + i, ix = ix0 + j;
                    d[i * a + j] = inside || (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                       ? _mm256_loadu_ps(base + (iy * W + ix) * 8)
                                       : _mm256_setzero_ps();
                }
            if (a == 6) {
                for (int j = 0; j < 6; j++) bt6(d + j, 6, tmp + j, 6);         /* columns */
                for (int i = 0; i < 6; i++) bt6(tmp + i * 6, 1, out + i * 6, 1); /* rows */
            } else {
                for (int j = 0; j < 4; j++) bt4(d + j, 4, tmp + j, 4);
                for (int i = 0; i < 4; i++) bt4(tmp + i * 4, 1, out + i * 4, 1);
            }
            float lane[8] __attribute__((aligned(32)));
            for (int xi = 0; xi < na; xi++) {
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
    for (int xi = 0; xi < wn->na; xi++) {
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
    const int tm = wn->m, na = wn->na;
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int64_t tt = 0; tt < tb && t0 + tt < wn->tiles; tt++) {
        const int64_t t = t0 + tt, n = t / wn->tiles_img, r = t % wn->tiles_img;
        const int64_t oy0 = (r / wn->tw) * tm, ox0 = (r % wn->tw) * tm;
        const int ny = OH - oy0 < tm ? (int)(OH - oy0) : tm, nx = OW - ox0 < tm ? (int)(OW - ox0) : tm;
        for (int64_t kb = 0; kb < kn / 8; kb++) {
            __m256 mm[NA_MAX], tmp[24], y[16];
            const float *mp = m + tt * kc + kb * 8;
            for (int xi = 0; xi < na; xi++) mm[xi] = _mm256_loadu_ps(mp + (int64_t)xi * tb * kc);
            if (tm == 4) {
                for (int j = 0; j < 6; j++) at6(mm + j, 6, tmp + j, 6);         /* columns: tmp[4][6] */
                for (int i = 0; i < 4; i++) at6(tmp + i * 6, 1, y + i * 4, 1); /* rows: y[4][4] */
            } else {
                for (int j = 0; j < 4; j++) at4(mm + j, 4, tmp + j, 4);         /* tmp[2][4] */
                for (int i = 0; i < 2; i++) at4(tmp + i * 4, 1, y + i * 2, 1); /* y[2][2] */
            }
            const int64_t kk = k0 + kb * 8;
            const __m256 bias = _mm256_loadu_ps(wn->bias + kk);
            const int64_t plane = ((n * KB + kk / 8) * OH) * OW * 8;
            for (int i = 0; i < ny; i++)
                for (int j = 0; j < nx; j++) {
                    const int64_t off = plane + ((oy0 + i) * OW + ox0 + j) * 8;
                    __m256 o = _mm256_add_ps(y[i * tm + j], bias);
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
    float *m = (float *)(ws + round64((size_t)wn->na * (size_t)wn->tb * (size_t)wn->s.c * 4));
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
