/* test_wino.c: the F(4x4, 3x3) Winograd kernel (runtime/dnnl/kernels/wino.c) against a
 * direct 3x3 convolution computed here in double, on fixed-seed random
 * inputs in [-1, 1] and weights scaled by 1/sqrt(9 C) (outputs of order 1).
 *
 * Cases cover: symmetric, asymmetric and no padding; outputs that are not a
 * multiple of the 4x4 tile (partial tiles at the bottom and right); several
 * images; blocks of tiles past the last one; bias or none; a residual, also
 * summed in place (z == dst); Relu and Clip bounds; 1 and 2 threads, and
 * bit-identical results between them; both tile sizes (F(4x4, 3x3) and
 * F(2x2, 3x3)), and the automatic choice between them (small images at
 * batch 1 with many channels: 2x2; large images: 4x4); channel counts from
 * 8/16 up to 512.
 * Tolerance: |got - want| <= 3e-5 * (1 + |want|) (the transforms' rounding,
 * measured 3e-8 to 1.5e-5, growing with C; an indexing bug gives errors of order 1). Then the shapes it must refuse.
 *
 * Exit 0 when all pass, 1 otherwise; 77 (skipped) on a CPU without AVX2+FMA. */
#include "runtime/dnnl/kernels/wino.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* plain NCHW index <-> nChw8c index */
static int64_t blk(int64_t C, int64_t H, int64_t W, int64_t n, int64_t c, int64_t y, int64_t x) {
    return (((n * (C / 8) + c / 8) * H + y) * W + x) * 8 + c % 8;
}

typedef struct wcase {
    const char *name;
    pprt_wino_shape s;
    bool bias, resid, in_place;
    float lo, hi;
} wcase;

static void run_case(const wcase *tc) {
    const pprt_wino_shape *s = &tc->s;
    const int64_t N = s->n, C = s->c, K = s->k, H = s->h, W = s->w, OH = s->oh, OW = s->ow;
    const size_t nx = (size_t)(N * C * H * W), ny = (size_t)(N * K * OH * OW), nw = (size_t)(K * C * 9);
    float *x = malloc(nx * 4), *xb = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)K * 4);
    float *z = malloc(ny * 4), *zb = malloc(ny * 4), *y1 = malloc(ny * 4), *y2 = malloc(ny * 4);
    double *want = malloc(ny * sizeof(double));
    const float ws = 1.0f / sqrtf(9.0f * (float)C);
    for (size_t i = 0; i < nx; i++) x[i] = frand();
    for (size_t i = 0; i < nw; i++) w[i] = frand() * ws;
    for (int64_t i = 0; i < K; i++) b[i] = frand();
    for (size_t i = 0; i < ny; i++) z[i] = frand();
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H; i++)
                for (int64_t j = 0; j < W; j++) xb[blk(C, H, W, n, c, i, j)] = x[((n * C + c) * H + i) * W + j];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double acc = tc->bias ? b[k] : 0.0;
                    for (int64_t c = 0; c < C; c++)
                        for (int p = 0; p < 3; p++)
                            for (int q = 0; q < 3; q++) {
                                const int64_t yy = i + p - s->pt, xx = j + q - s->pl;
                                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                                acc += (double)w[((k * C + c) * 3 + p) * 3 + q] * x[((n * C + c) * H + yy) * W + xx];
                            }
                    const size_t o = (size_t)(((n * K + k) * OH + i) * OW + j);
                    if (tc->resid) acc += z[o];
                    if (acc < tc->lo) acc = tc->lo;
                    if (acc > tc->hi) acc = tc->hi;
                    want[o] = acc;
                    zb[blk(K, OH, OW, n, k, i, j)] = z[o];
                }
    for (int run = 0; run < 4; run++) {
        /* tile 4 then 2, each on 1 and 2 threads */
        const int threads = 1 + run % 2;
        pprt_wino_shape sh = *s;
        sh.tile = run < 2 ? 4 : 2;
        pprt_wino *wn;
        pp_err err = {0};
        pp_status st = pprt_wino_create(&sh, w, tc->bias ? b : NULL, threads, &wn, &err);
        CHECK(st == PP_OK, "%s: create failed: %s", tc->name, err.msg);
        if (st != PP_OK) break;
        void *scratch = aligned_alloc(64, (pprt_wino_scratch_bytes(wn) + 63) / 64 * 64);
        float *y = threads == 1 ? y1 : y2;
        for (size_t i = 0; i < ny; i++) y[i] = tc->in_place ? zb[i] : NAN; /* garbage outside the residual */
        const float *zz = !tc->resid ? NULL : tc->in_place ? y : zb;
        pprt_wino_run(wn, xb, y, zz, tc->lo, tc->hi, scratch, threads);
        double worst = 0;
        int64_t bad = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++)
                for (int64_t i = 0; i < OH; i++)
                    for (int64_t j = 0; j < OW; j++) {
                        const double wv = want[((n * K + k) * OH + i) * OW + j];
                        const double gv = y[blk(K, OH, OW, n, k, i, j)];
                        const double e = fabs(gv - wv) / (1.0 + fabs(wv));
                        if (!(e <= 3e-5)) bad++;
                        if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e;
                    }
        CHECK(bad == 0, "%s, F(%dx%d), %d thread(s): %lld of %zu outputs off, worst relative error %.3g", tc->name,
              sh.tile, sh.tile, threads, (long long)bad, ny, worst);
        CHECK(pprt_wino_tile(wn) == sh.tile, "%s: asked for tile %d, got %d", tc->name, sh.tile, pprt_wino_tile(wn));
        printf("%-34s F(%dx%d,3x3) %d thread(s): worst error %.2e (x (1 + |want|))\n", tc->name, sh.tile, sh.tile,
               threads, worst);
        free(scratch);
        pprt_wino_free(wn);
        if (threads == 2)
            CHECK(!memcmp(y1, y2, ny * 4), "%s, F(%dx%d): 1 and 2 threads differ", tc->name, sh.tile, sh.tile);
    }
    free(x), free(xb), free(w), free(b), free(z), free(zb), free(y1), free(y2), free(want);
}

int main(void) {
    if (!pprt_wino_cpu()) {
        printf("SKIP: this CPU has no AVX2+FMA\n");
        return 77;
    }
    const float inf = INFINITY;
    const wcase cases[] = {
        {"pad 1, 9x9, bias, relu", {2, 16, 32, 9, 9, 9, 9, 1, 1, 0}, true, false, false, 0, inf},
        {"pad 0, 7x5 (5x3 out), clip", {1, 8, 16, 7, 5, 5, 3, 0, 0, 0}, false, false, false, -0.25f, 0.25f},
        {"asymmetric pad 1/2, 1/0", {1, 24, 16, 6, 10, 7, 9, 1, 1, 0}, true, true, false, -inf, inf},
        {"residual in place, relu", {3, 32, 48, 8, 8, 8, 8, 1, 1, 0}, true, true, true, 0, inf},
        {"pad 2 (larger output)", {1, 8, 16, 5, 5, 7, 7, 2, 2, 0}, true, false, false, -inf, inf},
        {"1x1 input", {2, 8, 32, 1, 1, 1, 1, 1, 1, 0}, true, true, false, 0, inf},
        {"ResNet layer3-like 14x14x256", {1, 256, 256, 14, 14, 14, 14, 1, 1, 0}, true, false, false, 0, inf},
        {"ResNet layer4-like 7x7x128, 2 img", {2, 128, 160, 7, 7, 7, 7, 1, 1, 0}, true, true, true, 0, inf},
        {"ResNet layer4 7x7x512", {1, 512, 512, 7, 7, 7, 7, 1, 1, 0}, true, false, false, 0, inf},
        {"56x56x64 (many blocks)", {1, 64, 64, 56, 56, 56, 56, 1, 1, 0}, true, false, false, 0, inf},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);

    /* the automatic choice: few tiles sharing many weights -> 2x2 */
    const pprt_wino_shape l4 = {1, 512, 512, 7, 7, 7, 7, 1, 1, 0}, l1 = {1, 64, 64, 56, 56, 56, 56, 1, 1, 0};
    pprt_wino *wa, *wb;
    pp_err err = {0};
    static float wbig[512 * 512 * 9];
    for (int threads = 1; threads <= 4; threads++) /* the choice must not depend on the threads */
        if (pprt_wino_create(&l4, wbig, NULL, threads, &wa, &err) == PP_OK) {
            CHECK(pprt_wino_tile(wa) == 2, "7x7x512 at batch 1 on %d thread(s) should take 2x2 tiles, took %d",
                  threads, pprt_wino_tile(wa));
            pprt_wino_free(wa);
        }
    if (pprt_wino_create(&l1, wbig, NULL, 2, &wb, &err) == PP_OK) {
        CHECK(pprt_wino_tile(wb) == 4, "56x56x64 should take 4x4 tiles, took %d", pprt_wino_tile(wb));
        pprt_wino_free(wb);
    }

    /* shapes it must refuse, and a clean failure for them */
    const pprt_wino_shape no[] = {
        {1, 12, 16, 8, 8, 8, 8, 1, 1, 0}, /* C not a multiple of 8 */
        {1, 16, 24, 8, 8, 8, 8, 1, 1, 0}, /* K not a multiple of 16 */
        {1, 16, 16, 8, 8, 8, 8, 3, 1, 0}, /* padding 3 */
        {1, 16, 16, 8, 8, 12, 8, 1, 1, 0}, /* output larger than the padding allows */
        {0, 16, 16, 8, 8, 8, 8, 1, 1, 0}, /* no images */
        {1, 16, 16, 8, 8, 8, 8, 1, 1, 3}, /* tile 3 */
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        CHECK(!pprt_wino_fits(&no[i]), "refused shape %zu was taken", i);
        pprt_wino *wn = (pprt_wino *)1;
        pp_err err = {0};
        float wt[16 * 16 * 9] = {0};
        CHECK(pprt_wino_create(&no[i], wt, NULL, 1, &wn, &err) == PP_EUNSUP && wn == NULL && err.msg[0],
              "refused shape %zu: create should fail with PP_EUNSUP and a message", i);
    }
    return check_summary("test_wino");
}
