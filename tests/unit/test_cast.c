/* test_cast.c: the vector Casts between f32 and bf16 / f16
 * (runtime/dnnl/kernels/cast.c) against the reference kernel's Cast
 * (kern_CAST, runtime/cpu/ref_math.c), bit for bit, on every vector ISA
 * this CPU has (plain C, AVX2 with F16C, AVX-512):
 *   - widening: every one of the 65536 bf16 and f16 bit patterns (NaNs,
 *     infinities, subnormals, -0 included);
 *   - narrowing: for each of the 256 float exponents and both signs, the
 *     mantissas at and around every rounding boundary of bf16 and f16
 *     (halfway cases both ways, the largest, 0, 1) and 64 random ones, and
 *     NaNs of several payloads: 286,720 floats, of them the f16 overflow
 *     boundary (65504, 65519.99, 65520) and its subnormal range;
 *   - every length from 0 to 40 (the tails: AVX2's plain C loop, AVX-512's
 *     mask) at offsets 0 to 3, nothing written past the end;
 *   - with the MXCSR's flush-to-zero and denormals-are-zero set (a thread
 *     of a library may leave them so): the same bits.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/cpu/ref.h"
#include "runtime/dnnl/kernels/cast.h"
#include "runtime/isa.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "check.h"

static const char *const kind_name[] = {"f32 -> bf16", "bf16 -> f32", "f32 -> f16", "f16 -> f32"};

/* the reference kernel's Cast of n elements */
static void ref_cast(pprt_cast_kind k, const void *x, void *y, int64_t n) {
    const pp_dtype from = k == PPRT_CAST_BF16_F32 ? PP_BF16 : k == PPRT_CAST_F16_F32 ? PP_F16 : PP_F32;
    const pp_dtype to = k == PPRT_CAST_F32_BF16 ? PP_BF16 : k == PPRT_CAST_F32_F16 ? PP_F16 : PP_F32;
    pp_attr a = {.name = "to", .type = PP_ATTR_INT, .i = (int64_t)to};
    pprt_tensor in = {from, {1, {n}}, (void *)x}, out = {to, {1, {n}}, y};
    pprt_scratch sc = {0};
    pp_err e = {0};
    if (kern_CAST((pp_attrs){&a, 1, 17}, &in, 1, &out, 1, &sc, &e) != PP_OK) {
        fprintf(stderr, "kern_CAST: %s\n", e.msg);
        exit(1);
    }
    pprt_scratch_free(&sc);
}

/* the narrowing inputs: each exponent and sign, mantissas at the boundaries, random ones, NaNs */
static float *narrow_inputs(size_t *n) {
    static const uint32_t mant[] = {0,        1,        2,        0x7fff,   0x8000,   0x8001,   0x17fff,  0x18000,
                                    0x18001,  0xfff,    0x1000,   0x1001,   0x2fff,   0x3000,   0x3001,   0x7fffff,
                                    0x7ffffe, 0x400000, 0x7f8000, 0x7fc000, 0x7fe000, 0x7ff000, 0x7ff800, 0x7fffc0};
    const size_t nm = sizeof mant / sizeof *mant, per = nm + 64;
    float *x = malloc(sizeof *x * 2 * 256 * per);
    uint64_t s = 0x9e3779b97f4a7c15u;
    size_t k = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 256; e++)
            for (size_t m = 0; m < per; m++) {
                s = s * 6364136223846793005u + 1442695040888963407u;
                const uint32_t mb = m < nm ? mant[m] : (uint32_t)(s >> 41) & 0x7fffffu;
                const uint32_t u = sign << 31 | e << 23 | mb;
                memcpy(&x[k++], &u, 4);
            }
    *n = k;
    return x;
}

static void check_all(pprt_isa isa, const char *mode) {
    /* widening: every pattern */
    uint16_t *h = malloc(2 * 65536);
    float *a = malloc(4 * 65536), *b = malloc(4 * 65536);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int k = PPRT_CAST_BF16_F32; k <= PPRT_CAST_F16_F32; k += 2) {
        ref_cast((pprt_cast_kind)k, h, a, 65536);
        pprt_cast(isa, (pprt_cast_kind)k, h, b, 65536);
        int bad = 0;
        for (uint32_t i = 0; i < 65536 && bad < 3; i++)
            if (memcmp(&a[i], &b[i], 4)) {
                uint32_t ua, ub;
                memcpy(&ua, &a[i], 4), memcpy(&ub, &b[i], 4);
                CHECK_FAIL("%s %s (%s): 0x%04x -> 0x%08x, the reference 0x%08x", kind_name[k], pprt_isa_name(isa), mode,
                     i, ub, ua);
                bad++;
            }
        check_count++;
    }
    free(h), free(a), free(b);
    /* narrowing */
    size_t n;
    float *x = narrow_inputs(&n);
    uint16_t *r = malloc(2 * n), *g = malloc(2 * n);
    for (int k = PPRT_CAST_F32_BF16; k <= PPRT_CAST_F32_F16; k += 2) {
        ref_cast((pprt_cast_kind)k, x, r, (int64_t)n);
        pprt_cast(isa, (pprt_cast_kind)k, x, g, n);
        int bad = 0;
        for (size_t i = 0; i < n && bad < 3; i++)
            if (r[i] != g[i]) {
                uint32_t u;
                memcpy(&u, &x[i], 4);
                CHECK_FAIL("%s %s (%s): 0x%08x -> 0x%04x, the reference 0x%04x", kind_name[k], pprt_isa_name(isa), mode,
                     u, g[i], r[i]);
                bad++;
            }
        check_count++;
    }
    /* lengths 0..40 at offsets 0..3: the tails, nothing past the end */
    for (int k = 0; k < 4; k++) {
        const bool narrows = k == PPRT_CAST_F32_BF16 || k == PPRT_CAST_F32_F16;
        const size_t xs = narrows ? 4 : 2, ys = 6 - xs;
        unsigned char src[4 * 48], want[4 * 48], got[4 * 48];
        for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 37 + 11);
        for (size_t off = 0; off < 4; off++)
            for (size_t len = 0; len <= 40; len++) {
                memset(want, 0xa5, sizeof want), memset(got, 0xa5, sizeof got);
                ref_cast((pprt_cast_kind)k, src + off * xs, want + off * ys, (int64_t)len);
                pprt_cast(isa, (pprt_cast_kind)k, src + off * xs, got + off * ys, len);
                check_count++;
                if (memcmp(want, got, sizeof want))
                    CHECK_FAIL("%s %s (%s): length %zu at offset %zu: other bytes than the reference's", kind_name[k],
                         pprt_isa_name(isa), mode, len, off);
            }
    }
    free(x), free(r), free(g);
}

int main(void) {
    const pprt_isa top = pprt_cpu_isa();
    for (int isa = PPRT_ISA_BASE; isa <= (int)top; isa++) {
        check_all((pprt_isa)isa, "default MXCSR");
#if defined(__x86_64__)
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8040u); /* FTZ and DAZ */
        check_all((pprt_isa)isa, "FTZ and DAZ");
        _mm_setcsr(csr);
#endif
        printf("test_cast: %s: the reference's bits\n", pprt_isa_name((pprt_isa)isa));
    }
    return check_summary("test_cast");
}
