/* test_cscale.c: the per-channel scale kernel (runtime/dnnl/kernels/cscale.c, the
 * squeeze-and-excitation Mul) against the product computed here.
 *
 * - N 3, C 21 and 48 (not a multiple of 8 or 16, and one), spatial 5 x 7,
 *   with 0, -0, NaN, +inf, -inf and denormals among the inputs and the
 *   scales, a scale per sample (k_stride_n = C) and one for all (0): in f32
 *   every element is exactly x * k (one IEEE product), in every layout
 *   (plain, channels last, blocks of 8 and 16 with the padding channels 0),
 *   on 1, 2 and 3 threads, in place and not, with k in f32 and in bf16;
 * - bf16 tensors (where the CPU runs the kernel: AVX-512): every element the
 *   f32 product of the two bf16 values rounded as pprt_bf16_round rounds
 *   (to nearest even, denormals to zero, NaN quiet: vcvtneps2bf16), the same
 *   bits in every layout and thread count.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/cscale.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layouts.h"
#include "runtime/cpu/bf16.h"

enum { N = 3, S = 35 };

static uint32_t bits(float v) { return lay_bits(v); }

static void run_case(int C, bool bf16, bool k_bf16, bool per_sample) {
    uint64_t r = 0x9E3779B97F4A7C15ull ^ (uint64_t)C;
#define RND() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, (double)(r >> 11) / 9007199254740992.0)
    const int64_t nk = per_sample ? N * C : C;
    float *x = malloc(sizeof(float) * N * C * S), *k = malloc(sizeof(float) * (size_t)nk);
    for (int i = 0; i < N * C * S; i++) x[i] = (float)(RND() * 8 - 4);
    for (int64_t i = 0; i < nk; i++) k[i] = (float)(RND() * 2);
    const float edges[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-39f, -3e-40f};
    for (int i = 0; i < 7; i++) x[(i * 53) % (N * C * S)] = edges[i];
    k[1 % nk] = 0.0f, k[2 % nk] = INFINITY, k[3 % nk] = 1e-39f;
    /* the values as the kernel's element types hold them */
    if (bf16)
        for (int i = 0; i < N * C * S; i++) x[i] = pprt_bf16_float(pprt_bf16_round(x[i]));
    if (k_bf16)
        for (int64_t i = 0; i < nk; i++) k[i] = pprt_bf16_float(pprt_bf16_round(k[i]));
    uint16_t *k16 = malloc(sizeof(uint16_t) * (size_t)nk);
    for (int64_t i = 0; i < nk; i++) k16[i] = pprt_bf16_round(k[i]);
    const int vecs[] = {1, C, 8, 16};
    for (int v = 0; v < 4; v++) {
        const int vec = vecs[v];
        const int64_t n_el = N * lay_padded(C, vec) * S;
        const size_t esz = bf16 ? 2 : 4;
        unsigned char *in = calloc((size_t)n_el, esz), *out = calloc((size_t)n_el, esz);
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t s = 0; s < S; s++) {
                    const float val = x[(n * C + c) * S + s];
                    const int64_t at = lay_at(C, S, vec, n, c, s);
                    if (bf16) ((uint16_t *)in)[at] = pprt_bf16_round(val);
                    else ((float *)in)[at] = val;
                }
        const pprt_cscale cs = {.l = lay_layout(N, C, S, vec), .k_stride_n = per_sample ? C : 0, .bf16 = bf16,
                                .k_bf16 = k_bf16};
        for (int threads = 1; threads <= 3; threads++)
            for (int inplace = 0; inplace < 2; inplace++) {
                unsigned char *y = out;
                if (inplace) memcpy(y, in, (size_t)n_el * esz);
                else memset(y, 0x55, (size_t)n_el * esz); /* the padding must come out 0 */
                pprt_cscale_run(&cs, inplace ? y : in, y, k_bf16 ? (const void *)k16 : k, threads);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t s = 0; s < S; s++) {
                            const float p = x[(n * C + c) * S + s] * k[per_sample ? n * C + c : c];
                            const int64_t at = lay_at(C, S, vec, n, c, s);
                            const uint32_t want = bf16 ? (uint32_t)pprt_bf16_round(p) : bits(p);
                            const uint32_t got = bf16 ? ((uint16_t *)y)[at] : bits(((float *)y)[at]);
                            const bool nan = bf16 ? (want & 0x7f80u) == 0x7f80u && (want & 0x7fu)
                                                  : isnan(p);
                            const bool gotnan = bf16 ? (got & 0x7f80u) == 0x7f80u && (got & 0x7fu)
                                                     : isnan(((float *)y)[at]);
                            CHECK(got == want || (nan && gotnan),
                                  "C %d vec %d %s%s%s, %d threads%s, (%lld,%lld,%lld): bits %08x, want %08x", C, vec,
                                  bf16 ? "bf16" : "f32", k_bf16 ? " k bf16" : "", per_sample ? " per sample" : "",
                                  threads, inplace ? " in place" : "", (long long)n, (long long)c, (long long)s,
                                  (unsigned)got, (unsigned)want);
                        }
                if (vec == 8 || vec == 16)
                    for (int64_t i = 0; i < n_el; i++)
                        if ((i % vec) + (i / (S * vec)) % ((C + vec - 1) / vec) * vec >= C)
                            CHECK((bf16 ? ((uint16_t *)y)[i] : bits(((float *)y)[i])) == 0,
                                  "C %d vec %d: padding element %lld not 0", C, vec, (long long)i);
            }
        free(in);
        free(out);
    }
    free(x);
    free(k);
    free(k16);
}

int main(void) {
    const int Cs[] = {21, 48, 1};
    for (int ci = 0; ci < 3; ci++)
        for (int kb = 0; kb < 2; kb++)
            for (int ps = 0; ps < 2; ps++) {
                run_case(Cs[ci], false, kb, ps);
                if (pprt_cscale_bf16_cpu()) run_case(Cs[ci], true, kb, ps);
            }
    if (!pprt_cscale_bf16_cpu()) printf("cscale: bf16 tensors not checked (no AVX-512 on this CPU)\n");
    return check_summary("cscale");
}
