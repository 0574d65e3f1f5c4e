/* pwconv.c: see pwconv.h. */
#define _GNU_SOURCE
#include "pwconv.h"

#include <stdlib.h>
#include <string.h>

#include "../../cpu/bf16.h"
#include "../../isa.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    ROWS = 32,      /* rows of a block: two tiles of 16 */
    KC = 32,        /* channels a tile's dot products take (32 bf16: 64 bytes a row) */
    NC = 16,        /* output channels of a tile (16 f32) */
    PAGE = 4096,
    MAX_CH = 4096,
};

struct pprt_pw {
    pprt_pw_shape s;
    int64_t Kp, NT;        /* Kp: K padded to KC; NT: tiles of NC over N */
    uint16_t *b;           /* packed weights: per (K chunk c, N tile j) 16 rows of 16 column pairs */
    float *bias;           /* NT * NC, zero-padded */
    unsigned char *stage;  /* per thread: ROWS x Kp bf16, then ROWS x 2 NC f32; a page apart */
    size_t stage_stride;
    int max_threads;
};

bool pprt_pw_fits(const pprt_pw_shape *s) {
    return s->rows > 0 && s->K > 0 && s->N > 0 && s->K % 2 == 0 && s->N % 2 == 0 && s->K <= MAX_CH &&
           s->N <= MAX_CH && (!s->scale || (s->rows_per_sample > 0 && s->k_stride >= 0));
}

pprt_pw_act pprt_pw_act_of(const pprt_pw *p) { return p->s.act; }

/* one run's operands */
typedef struct run_args {
    const uint16_t *x;
    uint16_t *y;
    const void *k;
    const uint16_t *z;
} run_args;

size_t pprt_pw_bytes(const pprt_pw *p) {
    return p ? (size_t)(p->Kp * p->NT * NC) * 2 + (size_t)(p->NT * NC) * 4 + p->stage_stride * (size_t)p->max_threads
             : 0;
}

void pprt_pw_free(pprt_pw *p) {
    if (!p) return;
    free(p->b);
    free(p->bias);
    free(p->stage);
    free(p);
}

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <pthread.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bf16x16.h"
#include "silu16.h"

#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

/* AMX's tile data is granted per process by Linux (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; oneDNN asks the same). */
static bool amx_granted(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return false; /* AMX-BF16, AMX-TILE */
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
}

static bool pw_ok;

static void pw_check(void) {
    pw_ok = pprt_cpu_isa() >= PPRT_ISA_AVX512 && pprt_isa_amx_allowed() && pprt_cpu_avx512bf16() && amx_granted();
}

/* Once a process: the grant is the process's, and stages build their
 * executors on their own threads at once (ThreadSanitizer saw them race
 * on a cached flag here) */
bool pprt_pw_cpu(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pw_check);
    return pw_ok;
}

/* palette 1; tiles 0-3 the sums (16 x 16 f32), 4-5 the source rows (16 x
 * 32 bf16), 6-7 the weights (16 pairs of rows x 16 columns) */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

AMX static void load_cfg(void) {
    tile_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
}

/* Rows r0 .. r0+mr of the source into the staging area (Kp a row), scaled
 * where a.k is set, the channels past K and the rows past mr (up to `to`)
 * zero. */
AMX static void stage_rows(const pprt_pw *p, const run_args *a, int64_t r0, int mr, int to, uint16_t *st) {
    const int64_t K = p->s.K, Kp = p->Kp;
    for (int r = 0; r < mr; r++) {
        const int64_t row = r0 + r;
        const uint16_t *src = a->x + row * K;
        uint16_t *dst = st + r * Kp;
        if (!a->k) memcpy(dst, src, (size_t)K * 2);
        else {
            const int64_t s = row / p->s.rows_per_sample;
            for (int64_t c = 0; c < K; c += 16) {
                const __mmask16 m = pprt_tail16(K - c);
                const __m512 xv = pprt_f32x16_load(src, c, m, true);
                const __m512 kv = pprt_f32x16_load(a->k, s * p->s.k_stride + c, m, p->s.k_bf16);
                _mm256_mask_storeu_epi16(dst + c, m, pprt_bf16x16_native(_mm512_mul_ps(xv, kv)));
            }
        }
        memset(dst + K, 0, (size_t)(Kp - K) * 2);
    }
    for (int r = mr; r < to; r++) memset(st + r * Kp, 0, (size_t)Kp * 2);
}

/* Rows r0 .. r0+mr, columns n0 .. n0+nc of the sums in cb (2 NC floats a
 * row) to y: bias, SiLU or residual, bf16. */
AMX static void epilogue(const pprt_pw *p, const run_args *a, const float *cb, int64_t r0, int mr, int64_t n0,
                         int64_t nc) {
    const int64_t N = p->s.N;
    for (int r = 0; r < mr; r++) {
        const int64_t row = r0 + r;
        for (int64_t cc = 0; cc < nc; cc += 16) {
            const int64_t n = n0 + cc;
            const __mmask16 m = pprt_tail16(N - n);
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(cb + r * 2 * NC + cc), _mm512_loadu_ps(p->bias + n));
            if (p->s.act == PPRT_PW_SILU) v = pprt_silu16_for_bf16(v);
            else if (p->s.act == PPRT_PW_SIGMOID) v = pprt_sigmoid16_nan_for_bf16(v);
            if (a->z) v = _mm512_add_ps(v, pprt_f32x16_load(a->z, row * N + n, m, true));
            _mm256_mask_storeu_epi16(a->y + row * N + n, m, pprt_bf16x16_native(v));
        }
    }
}

/* Blocks b0 .. b1 of ROWS rows on this thread. */
AMX static void run_blocks(const pprt_pw *p, const run_args *a, int64_t b0, int64_t b1, int tid) {
    uint16_t *st = (uint16_t *)(p->stage + (size_t)tid * p->stage_stride);
    float *cb = (float *)(p->stage + (size_t)tid * p->stage_stride + (size_t)(ROWS * p->Kp) * 2);
    const int64_t Kp = p->Kp, NT = p->NT, nk = Kp / KC;
    const size_t lda = (size_t)Kp * 2;
    load_cfg();
    for (int64_t blk = b0; blk < b1; blk++) {
        const int64_t r0 = blk * ROWS;
        const int mr = (int)(p->s.rows - r0 < ROWS ? p->s.rows - r0 : ROWS);
        const bool two = mr > 16; /* the second tile of rows */
        stage_rows(p, a, r0, mr, two ? ROWS : 16, st);
        for (int64_t j = 0; j < NT; j += 2) {
            const bool pair = j + 1 < NT;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t c = 0; c < nk; c++) {
                const uint16_t *b = p->b + (c * NT + j) * (KC * NC);
                _tile_loadd(4, st + c * KC, lda);
                _tile_loadd(6, b, 64);
                _tile_dpbf16ps(0, 4, 6);
                if (pair) {
                    _tile_loadd(7, b + KC * NC, 64);
                    _tile_dpbf16ps(1, 4, 7);
                }
                if (two) {
                    _tile_loadd(5, st + 16 * Kp + c * KC, lda);
                    _tile_dpbf16ps(2, 5, 6);
                    if (pair) _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, cb, 2 * NC * 4);
            if (pair) _tile_stored(1, cb + NC, 2 * NC * 4);
            if (two) {
                _tile_stored(2, cb + 16 * 2 * NC, 2 * NC * 4);
                if (pair) _tile_stored(3, cb + 16 * 2 * NC + NC, 2 * NC * 4);
            }
            const int64_t n0 = j * NC, nc = (p->s.N - n0 < 2 * NC ? p->s.N - n0 : 2 * NC);
            epilogue(p, a, cb, r0, mr, n0, nc);
        }
    }
    _tile_release();
}

void pprt_pw_run(const pprt_pw *p, const uint16_t *x, uint16_t *y, const void *k, const uint16_t *z, int threads) {
    const run_args args = {x, y, p->s.scale ? k : NULL, z}, *a = &args;
    const int64_t nb = (p->s.rows + ROWS - 1) / ROWS;
    if (threads > p->max_threads) threads = p->max_threads;
    if (threads > nb) threads = (int)nb;
    if (threads < 1) threads = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        /* contiguous shares: a thread's rows stay its own from step to step */
        const int64_t b0 = nb * t / nt, b1 = nb * (t + 1) / nt;
        run_blocks(p, a, b0, b1, t);
    }
}

#else
bool pprt_pw_cpu(void) { return false; }
void pprt_pw_run(const pprt_pw *p, const uint16_t *x, uint16_t *y, const void *k, const uint16_t *z, int threads) {
    (void)p, (void)x, (void)y, (void)k, (void)z, (void)threads;
}
#endif

pp_status pprt_pw_create(const pprt_pw_shape *s, const float *w, const float *bias, int max_threads, pprt_pw **out,
                         pp_err *err) {
    *out = NULL;
    const int64_t K = s->K, N = s->N;
    if (!pprt_pw_fits(s))
        return PP_FAIL(err, PP_EUNSUP, "pointwise convolution of %lld to %lld channels (needs even counts up to %d)",
                       (long long)K, (long long)N, MAX_CH);
    if (max_threads < 1) max_threads = 1;
    pprt_pw *p = calloc(1, sizeof *p);
    if (!p) return PP_FAIL(err, PP_ENOMEM, "pointwise convolution kernel");
    p->s = *s;
    p->max_threads = max_threads;
    p->Kp = (K + KC - 1) / KC * KC;
    p->NT = (N + NC - 1) / NC;
    const size_t stage = (size_t)(ROWS * p->Kp) * 2 + (size_t)(ROWS * 2 * NC) * 4;
    /* a page between threads' areas: a core's prefetcher otherwise takes
     * the lines at the start of the next thread's (docs/design-notes.md) */
    p->stage_stride = (stage + PAGE - 1) / PAGE * PAGE + PAGE;
    p->b = calloc((size_t)(p->Kp * p->NT * NC), 2);
    p->bias = calloc((size_t)(p->NT * NC), sizeof(float));
    p->stage = aligned_alloc(PAGE, p->stage_stride * (size_t)max_threads);
    if (!p->b || !p->bias || !p->stage) {
        pprt_pw_free(p);
        return PP_FAIL(err, PP_ENOMEM, "pointwise convolution kernel (%lld x %lld)", (long long)N, (long long)K);
    }
    for (int64_t n = 0; n < N; n++) {
        if (bias) p->bias[n] = bias[n];
        const int64_t j = n / NC, col = n % NC;
        for (int64_t k = 0; k < K; k++) {
            const int64_t c = k / KC, r = (k % KC) / 2, e = k % 2;
            p->b[((c * p->NT + j) * (KC / 2) + r) * (2 * NC) + col * 2 + e] = pprt_bf16_round(w[n * K + k]);
        }
    }
    *out = p;
    return PP_OK;
}
