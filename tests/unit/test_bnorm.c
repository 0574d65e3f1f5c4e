/* test_bnorm.c: our BatchNormalization kernel (runtime/dnnl/kernels/bnorm.c) against
 * (x - mean) * scale / sqrt(var + eps) + bias computed here in double.
 *
 * - N 3, C 21 (not a multiple of 8 or 16), spatial 5 x 7, with 0, -0, NaN,
 *   +inf and -inf among the inputs and a mean far from zero in some
 *   channels: every finite result within 2e-6 of the double value relative
 *   to the channel's |bias| + |x - mean| * |k| (one float rounding of k,
 *   then a subtraction, a product and a sum), non-finite ones as in double;
 * - the same values laid out plain (NCHW), channels last (NHWC), and in
 *   blocks of 8 and of 16 channels (the padding channels zero in and out):
 *   the same bits for every element in every layout, on 1, 2 and 3 threads,
 *   in place and not;
 * - with the ReLU: exactly the normalization's bits with y < 0 made +0
 *   (NaN and -0 kept, as the executor's NaN-keeping clamp keeps them), in
 *   every layout.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/bnorm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layouts.h"

enum { N = 3, C = 21, H = 5, W = 7, S = H * W };

int main(void) {
    float scale[C], bias[C], mean[C], var[C], x[N * C * S];
    const float eps = 1e-5f;
    uint64_t r = 0x9E3779B97F4A7C15ull;
#define RND() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, (double)(r >> 11) / 9007199254740992.0)
    for (int c = 0; c < C; c++) {
        scale[c] = (float)(RND() * 4 - 2), bias[c] = (float)(RND() * 2 - 1);
        mean[c] = (float)(c % 5 == 0 ? 1000 + RND() : RND() - 0.5), var[c] = (float)(RND() * 3);
    }
    for (int i = 0; i < N * C * S; i++) x[i] = (float)(RND() * 6 - 3) + (i % C % 5 == 0 ? 1000.0f : 0.0f);
    const float edges[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 5; i++) x[(i * 37) % (N * C * S)] = edges[i];
    float *want32 = malloc(sizeof(float) * N * C * S), *plain = malloc(sizeof(float) * N * C * S), *first = NULL;
    /* relu 0 first: its results (plain index n, c, s) are what the ReLU runs must give, clamped */
    for (int relu = 0; relu < 2; relu++) {
        first = NULL;
        const int vecs[] = {1, C, 8, 16};
        for (int v = 0; v < 4; v++) {
            const int vec = vecs[v];
            pprt_layout l = lay_layout(N, C, S, vec);
            pprt_bnorm *bn;
            pp_err e = {0};
            if (pprt_bnorm_create(&l, scale, bias, mean, var, eps, relu, &bn, &e) != PP_OK) {
                CHECK_FAIL("create (vec %d): %s", vec, e.msg);
                continue;
            }
            const int64_t n_el = N * lay_padded(C, vec) * S;
            float *in = calloc((size_t)n_el, sizeof(float)), *out = calloc((size_t)n_el, sizeof(float));
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t s = 0; s < S; s++) in[lay_at(C, S, vec, n, c, s)] = x[(n * C + c) * S + s];
            for (int threads = 1; threads <= 3; threads++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    float *y = inplace ? malloc(sizeof(float) * (size_t)n_el) : out;
                    if (inplace) memcpy(y, in, sizeof(float) * (size_t)n_el);
                    pprt_bnorm_run(bn, inplace ? y : in, y, threads);
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t c = 0; c < C; c++)
                            for (int64_t s = 0; s < S; s++) {
                                const int64_t p = (n * C + c) * S + s;
                                const float got = y[lay_at(C, S, vec, n, c, s)];
                                if (!first) { /* the first layout's: against double */
                                    const double k = (double)scale[c] / sqrt((double)var[c] + eps);
                                    double w = ((double)x[p] - mean[c]) * k + bias[c];
                                    if (relu && w < 0) w = 0;
                                    const double tol = 2e-6 * (fabs(bias[c]) + fabs(((double)x[p] - mean[c]) * k)) + 1e-30;
                                    if (isnan(w)) CHECK(isnan(got), "(%lld,%lld,%lld): %g, want NaN", (long long)n,
                                                        (long long)c, (long long)s, got);
                                    else if (isinf(w)) CHECK(got == w, "(%lld,%lld,%lld): %g, want %g", (long long)n,
                                                             (long long)c, (long long)s, got, w);
                                    else CHECK(fabs(got - w) <= tol, "(%lld,%lld,%lld): %.9g, want %.9g", (long long)n,
                                               (long long)c, (long long)s, got, w);
                                    want32[p] = got;
                                } else {
                                    CHECK(lay_bits(got) == lay_bits(want32[p]) || (isnan(got) && isnan(want32[p])),
                                          "vec %d, %d threads%s, (%lld,%lld,%lld): %.9g, the first layout %.9g", vec,
                                          threads, inplace ? ", in place" : "", (long long)n, (long long)c,
                                          (long long)s, got, want32[p]);
                                }
                                if (!relu && !first) plain[p] = got;
                                if (relu) {
                                    const float clamped = plain[p] < 0 ? 0.0f : plain[p]; /* NaN and -0 kept */
                                    CHECK(lay_bits(got) == lay_bits(clamped) || (isnan(got) && isnan(clamped)),
                                          "relu gave %g where the normalization gave %g", got, plain[p]);
                                }
                            }
                    if (!first) first = want32; /* later runs compare with it */
                    /* the padding channels of a blocked layout stay zero */
                    if (vec == 8 || vec == 16)
                        for (int64_t i = 0; i < n_el; i++)
                            if ((i % vec) + (i / (S * vec)) % ((C + vec - 1) / vec) * vec >= C)
                                CHECK(y[i] == 0, "padding element %lld is %g", (long long)i, y[i]);
                    if (inplace) free(y);
                }
            free(in);
            free(out);
            pprt_bnorm_free(bn);
        }
    }
    free(want32);
    free(plain);
    return check_summary("bnorm");
}
