/* test_gap.c: the GlobalAveragePool kernel (runtime/dnnl/kernels/gap.c), alone and
 * after a SiLU in the same pass, against means computed here in double.
 *
 * - N 2, C 21, 48 and 300 (channels last takes 256 channels a task: two
 *   groups), spatial 35 and 130 (one run of 64 pixels and three), f32
 *   values with a channel of large offset, one channel with a NaN and one
 *   with +inf: every finite mean within 1e-6 relative of the double mean of
 *   the channel's |values| (f32 sums of at most 130 values), the NaN and
 *   inf channels NaN and inf;
 * - the same values in every layout (plain, channels last, blocks of 8 and
 *   16), on 1, 2 and 3 threads: the same bits (the order of the sums is
 *   fixed by the shape alone, gap.h);
 * - with the SiLU: y the bits pprt_silu gives over the whole tensor (padding
 *   channels 0), and the means the bits of the kernel alone over that y;
 * - the means stored in bf16: pprt_bf16_round of the f32 means;
 * - bf16 tensors (AVX-512: the bf16 SiLU kernel): the same, against
 *   pprt_silu_bf16 and the means of its bf16 values.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/gap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layouts.h"
#include "runtime/cpu/bf16.h"
#include "runtime/dnnl/kernels/silu.h"

enum { N = 2 };

/* x (plain, N x C x S, as floats) into layout vec, bf16 or f32 */
static void *lay_out(const float *x, int64_t C, int64_t S, int vec, bool bf16) {
    const int64_t n_el = N * lay_padded(C, vec) * S;
    unsigned char *b = calloc((size_t)n_el, bf16 ? 2 : 4);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t at = lay_at(C, S, vec, n, c, s);
                if (bf16) ((uint16_t *)b)[at] = pprt_bf16_round(x[(n * C + c) * S + s]);
                else ((float *)b)[at] = x[(n * C + c) * S + s];
            }
    return b;
}

static float get(const void *b, int64_t i, bool bf16) {
    return bf16 ? pprt_bf16_float(((const uint16_t *)b)[i]) : ((const float *)b)[i];
}

static void run_case(int64_t C, int64_t S, bool bf16) {
    uint64_t r = 0x9E3779B97F4A7C15ull ^ (uint64_t)(C * 1000 + S);
#define RND() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, (double)(r >> 11) / 9007199254740992.0)
    const int64_t total = N * C * S;
    float *x = malloc(sizeof(float) * (size_t)total);
    for (int64_t i = 0; i < total; i++) x[i] = (float)(RND() * 8 - 4) + (i / S % C == 3 ? 500.0f : 0.0f);
    x[(0 * C + 1) * S + S / 2] = NAN;       /* sample 0, channel 1 */
    x[(1 * C + 2 % C) * S + 1] = INFINITY;  /* sample 1, channel 2 (the silu keeps it) */
    if (bf16)
        for (int64_t i = 0; i < total; i++) x[i] = pprt_bf16_float(pprt_bf16_round(x[i]));
    /* the SiLU's output, plain, as the SiLU kernel alone gives it */
    void *xs = lay_out(x, C, S, 1, bf16);
    void *ys = calloc((size_t)total, bf16 ? 2 : 4);
    if (bf16) pprt_silu_bf16(xs, ys, (size_t)total, 1);
    else pprt_silu(xs, ys, (size_t)total, 1);
    float *yv = malloc(sizeof(float) * (size_t)total);
    for (int64_t i = 0; i < total; i++) yv[i] = get(ys, i, bf16);
    float *first[2] = {NULL, NULL}; /* [silu]: the means of the first layout and thread count */
    const int vecs[] = {1, (int)C, 8, 16};
    for (int silu = 0; silu < 2; silu++) {
        const float *v = silu ? yv : x; /* what is pooled */
        for (int vi = 0; vi < 4; vi++) {
            const int vec = vecs[vi];
            const int64_t n_el = N * lay_padded(C, vec) * S;
            for (int threads = 1; threads <= 3; threads++)
                for (int ob = 0; ob < 2; ob++) {
                    check_case = bf16 ? "bf16" : "f32";
                    pprt_gap g = {.l = lay_layout(N, C, S, vec), .bf16 = bf16, .out_bf16 = ob, .silu = silu};
                    void *in = lay_out(x, C, S, vec, bf16), *y = calloc((size_t)n_el, bf16 ? 2 : 4);
                    void *scratch = malloc(pprt_gap_scratch(&g)), *mean = malloc(sizeof(float) * (size_t)(N * C));
                    pprt_gap_run(&g, in, y, mean, scratch, threads);
                    if (silu) /* y: the SiLU kernel's bits, padding 0 */
                        for (int64_t n = 0; n < N; n++)
                            for (int64_t c = 0; c < lay_padded(C, vec); c++)
                                for (int64_t s = 0; s < S; s++) {
                                    const int64_t at = lay_at(C, S, vec, n, c, s);
                                    const float got = get(y, at, bf16);
                                    const float want = c < C ? yv[(n * C + c) * S + s] : 0.0f;
                                    if (!(lay_bits(got) == lay_bits(want) || (isnan(got) && isnan(want)))) {
                                        CHECK_FAIL("C %lld S %lld vec %d, %d threads: y (%lld,%lld,%lld) = %g, the "
                                                   "SiLU kernel gives %g",
                                                   (long long)C, (long long)S, vec, threads, (long long)n,
                                                   (long long)c, (long long)s, got, want);
                                        goto next;
                                    }
                                }
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t c = 0; c < C; c++) {
                            const int64_t i = n * C + c;
                            if (ob) {
                                const uint16_t got = ((uint16_t *)mean)[i];
                                if (!first[silu]) continue; /* f32 runs first (ob 0) */
                                CHECK(got == pprt_bf16_round(first[silu][i]) ||
                                          (isnan(first[silu][i]) && (got & 0x7f80u) == 0x7f80u && (got & 0x7fu)),
                                      "C %lld S %lld vec %d: bf16 mean %04x of %g", (long long)C, (long long)S, vec,
                                      got, first[silu][i]);
                                continue;
                            }
                            const float got = ((float *)mean)[i];
                            if (!first[silu]) { /* against double */
                                double sum = 0, abs = 0;
                                for (int64_t s = 0; s < S; s++)
                                    sum += v[i * S + s], abs += fabs((double)v[i * S + s]);
                                const double want = sum / (double)S;
                                if (isnan(want)) CHECK(isnan(got), "(%lld,%lld): %g, want NaN", (long long)n, (long long)c, got);
                                else if (isinf(want)) CHECK(got == want, "(%lld,%lld): %g, want %g", (long long)n, (long long)c, got, want);
                                else CHECK(fabs(got - want) <= 1e-6 * abs / (double)S + 1e-30,
                                           "C %lld S %lld silu %d (%lld,%lld): %.9g, want %.9g", (long long)C,
                                           (long long)S, silu, (long long)n, (long long)c, got, want);
                            } else {
                                CHECK(lay_bits(got) == lay_bits(first[silu][i]) || (isnan(got) && isnan(first[silu][i])),
                                      "C %lld S %lld silu %d vec %d, %d threads (%lld,%lld): %.9g, the first layout %.9g",
                                      (long long)C, (long long)S, silu, vec, threads, (long long)n, (long long)c, got,
                                      first[silu][i]);
                            }
                        }
                    if (!ob && !first[silu]) {
                        first[silu] = mean;
                        mean = NULL;
                    }
                next:
                    free(in);
                    free(y);
                    free(scratch);
                    free(mean);
                }
        }
    }
    /* the fused means are the means of the kernel alone over the SiLU's output */
    {
        pprt_gap g = {.l = lay_layout(N, C, S, 1), .bf16 = bf16};
        void *scratch = malloc(pprt_gap_scratch(&g));
        float *mean = malloc(sizeof(float) * (size_t)(N * C));
        pprt_gap_run(&g, ys, NULL, mean, scratch, 2);
        for (int64_t i = 0; first[1] && i < N * C; i++)
            CHECK(lay_bits(mean[i]) == lay_bits(first[1][i]) || (isnan(mean[i]) && isnan(first[1][i])),
                  "C %lld S %lld: fused mean %lld is %.9g, alone over the SiLU's output %.9g", (long long)C,
                  (long long)S, (long long)i, first[1][i], mean[i]);
        free(scratch);
        free(mean);
    }
    free(first[0]);
    free(first[1]);
    free(x);
    free(xs);
    free(ys);
    free(yv);
}

int main(void) {
    if (!pprt_silu_cpu()) {
        printf("gap: SKIP (the SiLU kernel needs AVX2 and FMA)\n");
        return 77;
    }
    const int64_t Cs[] = {21, 48, 300}, Ss[] = {35, 130};
    for (int ci = 0; ci < 3; ci++)
        for (int si = 0; si < 2; si++) {
            run_case(Cs[ci], Ss[si], false);
            if (pprt_silu_bf16_cpu()) run_case(Cs[ci], Ss[si], true);
        }
    if (!pprt_silu_bf16_cpu()) printf("gap: bf16 tensors not checked (no AVX-512 on this CPU)\n");
    return check_summary("gap");
}
