/* test_vact.c: vact.h's 8-lane sigmoid and tanh against double.
 * Over 2^20 points spread log-uniformly in magnitude from 1e-30 to 100,
 * both signs, plus 0, -0, +-inf, NaN, the tanh switch at 1/4 and its
 * neighbours, and the clamp at 87.3:
 * - sigmoid within 4e-7 relative of 1 / (1 + exp(-x)) in double (or
 *   1e-37 absolute where that is below 1e-30: vexp.h's clamp);
 * - tanh within 6e-7 relative of tanh in double, the sign kept (-0 stays
 *   -0), +-1 at +-inf;
 * - NaN in, NaN out, for both.
 * Exit 0 when all pass, 1 otherwise; 77 (skipped) on a CPU without AVX2. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "runtime/isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "runtime/dnnl/kernels/vact.h"

__attribute__((target("avx2,fma"))) static void apply(const float *x, float *s, float *t) {
    const __m256 v = _mm256_loadu_ps(x);
    _mm256_storeu_ps(s, pprt_sigmoid8(v));
    _mm256_storeu_ps(t, pprt_tanh8(v));
}

static int bad_s, bad_t;

static void check8(const float *x) {
    float s[8], t[8];
    apply(x, s, t);
    for (int i = 0; i < 8; i++) {
        const double v = x[i];
        if (isnan(v)) {
            CHECK(isnan(s[i]) && isnan(t[i]), "NaN in: sigmoid %g, tanh %g", s[i], t[i]);
            continue;
        }
        const double ws = 1.0 / (1.0 + exp(-v)), wt = tanh(v);
        const bool ok_s = ws < 1e-30 ? fabs(s[i] - ws) <= 1e-37 : fabs(s[i] - ws) <= 4e-7 * ws;
        const bool ok_t = fabs(t[i] - wt) <= 6e-7 * fabs(wt) && !signbit(t[i]) == !signbit(wt);
        if (!ok_s && bad_s++ < 5) CHECK_FAIL("sigmoid(%.9g) = %.9g, double %.9g", v, s[i], ws);
        if (!ok_t && bad_t++ < 5) CHECK_FAIL("tanh(%.9g) = %.9g, double %.9g", v, t[i], wt);
    }
}

int main(void) {
    if (pprt_cpu_isa() < PPRT_ISA_AVX2) {
        printf("test_vact: no AVX2 and FMA on this CPU (or capped): skipped\n");
        return 77;
    }
    float x[8];
    uint64_t rs = 0x9E3779B97F4A7C15ull;
    for (int n = 0; n < (1 << 17); n++) {
        for (int i = 0; i < 8; i++) {
            rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
            const double u = (double)(rs >> 11) / 9007199254740992.0; /* [0, 1) */
            const double mag = pow(10.0, -30.0 + 32.0 * u);
            x[i] = (float)((rs & 1) ? -mag : mag);
        }
        check8(x);
    }
    const float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.25f, -0.25f, nextafterf(0.25f, 0.0f),
                           -nextafterf(0.25f, 0.0f), 87.3f, -87.3f, 88.0f, -88.0f, -100.0f, 1e-38f, -1e-45f};
    check8(edges);
    check8(edges + 8);
    float s[8], t[8];
    apply(edges, s, t);
    CHECK(t[2] == 1.0f && t[3] == -1.0f, "tanh(+-inf) = %g, %g", t[2], t[3]);
    CHECK(signbit(t[1]) && t[1] == 0.0f, "tanh(-0) = %g", t[1]);
    CHECK(s[2] == 1.0f && s[3] >= 0.0f && s[3] < 1e-37f, "sigmoid(+-inf) = %g, %g", s[2], s[3]);
    CHECK(bad_s == 0, "%d sigmoids off", bad_s);
    CHECK(bad_t == 0, "%d tanhs off", bad_t);
    return check_summary("test_vact");
}
#else
int main(void) {
    printf("test_vact: not an x86 build: skipped\n");
    return 77;
}
#endif
