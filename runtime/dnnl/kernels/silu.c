/* silu.c: SiLU on AVX2 and FMA (16 lanes on AVX-512), as the graph it comes
 * from computes it: y = x * sigmoid(x), sigmoid(x) = 1 / (1 + e^-x), e^-x by
 * vexp.h (truncation error 1.2e-7 relative; the argument clamped to
 * [-87.3, 87.3]); below -87.3 (where e^-x nearly overflows f32) sigmoid is 0, as in
 * the reference kernel once e^-x overflows, so -inf gives NaN, and a NaN
 * stays NaN.
 *
 * oneDNN's AVX2 swish (eltwise, or a convolution's post-op) costs 1.1 to 1.4
 * ns per element on the Zen 3 VM; this about 0.55 in cache (docs/design-
 * notes.md, "Our own SiLU"). Tails go through the same 8-lane code on a
 * padded copy, and threads take whole blocks, so every element is computed
 * the same way whatever the array's length or the thread count. */
#include "silu.h"

#include "../../isa.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define BLOCK 4096 /* elements per task: 16 KiB in, 16 KiB out */

#if defined(__x86_64__) || defined(__i386__)
#include "bf16x16.h"
#include "silu16.h"
#include "vexp.h"
#define AVX2 __attribute__((target("avx2,fma")))

/* e^-x by vexp.h (-x clamped as x would be: negation is exact) */
AVX2 static inline __m256 silu8(__m256 x) {
    const __m256 ex = pprt_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    __m256 sig = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(ex, _mm256_set1_ps(1.0f)));
    sig = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(PPRT_VEXP_LO), _CMP_LT_OQ), sig);
    return _mm256_mul_ps(x, sig);
}

AVX2 static void silu_block(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, silu8(_mm256_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

/* The same arithmetic on 16 lanes (AVX-512 F): every operation is the 8-lane
 * one's (IEEE fused multiply-adds, rounding to nearest, division), so the
 * bits are the same as silu8's, element by element. */
#define AVX512 __attribute__((target("avx512f")))

AVX512 static inline __m512 silu16(__m512 x) {
    const __m512 ex = pprt_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 sig = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(ex, _mm512_set1_ps(1.0f)));
    /* sigmoid 0 below -87.3 (a NaN x compares false and keeps its NaN) */
    const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_set1_ps(PPRT_VEXP_LO), _CMP_LT_OQ);
    return _mm512_mul_ps(x, _mm512_maskz_mov_ps((__mmask16)~below, sig));
}

AVX512 static void silu_block16(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        float buf[16] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm512_storeu_ps(buf, silu16(_mm512_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

/* bf16 (--precision bf16): 16 lanes, arithmetic sized to the bf16 result
 * rather than to f32 (silu16.h), rounded to bf16 to nearest even (a NaN
 * stays a quiet NaN). */
#define AVX512BW PPRT_AVX512BW

/* silu of 16 bf16 values, in f32 */
AVX512BW static inline __m512 silu16_of_bf16(__m256i h) { return pprt_silu16_for_bf16(pprt_f32x16_of_bf16(h)); }

#define SILU_BF16_BLOCK(name, attr, store)                                                                  \
    attr static void name(const uint16_t *x, uint16_t *y, size_t n) {                                    \
        size_t i = 0;                                                                                     \
        for (; i + 16 <= n; i += 16)                                                                      \
            _mm256_storeu_si256((__m256i *)(y + i),                                                       \
                                store(silu16_of_bf16(_mm256_loadu_si256((const __m256i *)(x + i)))));     \
        if (i < n) {                                                                                      \
            uint16_t buf[16] = {0};                                                                       \
            memcpy(buf, x + i, (n - i) * sizeof *buf);                                                    \
            _mm256_storeu_si256((__m256i *)buf, store(silu16_of_bf16(_mm256_loadu_si256((__m256i *)buf)))); \
            memcpy(y + i, buf, (n - i) * sizeof *buf);                                                    \
        }                                                                                                 \
    }

#define AVX512BF16 PPRT_AVX512BF16
SILU_BF16_BLOCK(silu_block_bf16, AVX512BW, pprt_bf16x16_of)
SILU_BF16_BLOCK(silu_block_bf16_native, AVX512BF16, pprt_bf16x16_native)

/* the AVX512_BF16 conversion where the CPU has it: one instruction for
 * pprt_bf16x16_of's ten, the pass 25% faster in cache (Intel Xeon with AMX,
 * 0.29 -> 0.21 ns per element on one core), the same bits */
static bool native_bf16(void) { return pprt_cpu_avx512bf16(); }

bool pprt_silu_bf16_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX512; }
bool pprt_silu_bf16_native(void) { return pprt_silu_bf16_cpu() && native_bf16(); }

void pprt_silu_bf16(const uint16_t *x, uint16_t *y, size_t n, int threads) {
    pprt_silu_bf16_how(x, y, n, threads, native_bf16());
}

/* The kernels by the blocks threads take (BLOCK floats, or as many bytes of
 * bf16 values), whole blocks a thread. */
enum { F32_8, F32_16, BF16_INT, BF16_NATIVE };

static void by_blocks(const void *x, void *y, size_t n, int threads, int kind) {
    const bool bf16 = kind == BF16_INT || kind == BF16_NATIVE;
    const size_t blk = bf16 ? 2 * BLOCK : BLOCK;
    const long nb = (long)((n + blk - 1) / blk);
    if (threads < 1 || nb < 2) threads = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long b = 0; b < nb; b++) {
        const size_t lo = (size_t)b * blk, len = n - lo < blk ? n - lo : blk;
        switch (kind) {
        case F32_8: silu_block((const float *)x + lo, (float *)y + lo, len); break;
        case F32_16: silu_block16((const float *)x + lo, (float *)y + lo, len); break;
        case BF16_INT: silu_block_bf16((const uint16_t *)x + lo, (uint16_t *)y + lo, len); break;
        default: silu_block_bf16_native((const uint16_t *)x + lo, (uint16_t *)y + lo, len); break;
        }
    }
}

void pprt_silu_bf16_how(const uint16_t *x, uint16_t *y, size_t n, int threads, bool native) {
    by_blocks(x, y, n, threads, native ? BF16_NATIVE : BF16_INT);
}

bool pprt_silu_cpu(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }
/* AVX2: 0.55-0.68 ns per element against oneDNN's 1.1-1.4 (Zen 3); AVX-512:
 * EfficientNet-B0 f32 on Zen 5 (docs/design-notes.md, "Our own SiLU") */
bool pprt_silu_wins(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX2; }

void pprt_silu_lanes(const float *x, float *y, size_t n, int threads, int lanes) {
    by_blocks(x, y, n, threads, lanes == 16 ? F32_16 : F32_8);
}

void pprt_silu(const float *x, float *y, size_t n, int threads) {
    pprt_silu_lanes(x, y, n, threads, pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : 8);
}

void pprt_silu_bf16_serial(const uint16_t *x, uint16_t *y, size_t n) {
    if (native_bf16()) silu_block_bf16_native(x, y, n);
    else silu_block_bf16(x, y, n);
}

void pprt_silu_serial(const float *x, float *y, size_t n) {
    const bool wide = pprt_cpu_isa() >= PPRT_ISA_AVX512;
    for (size_t lo = 0; lo < n; lo += BLOCK) {
        const size_t len = n - lo < BLOCK ? n - lo : BLOCK;
        if (wide) silu_block16(x + lo, y + lo, len);
        else silu_block(x + lo, y + lo, len);
    }
}

#else
bool pprt_silu_bf16_cpu(void) { return false; }
void pprt_silu_bf16(const uint16_t *x, uint16_t *y, size_t n, int threads) {
    (void)x, (void)y, (void)n, (void)threads;
}
void pprt_silu_bf16_how(const uint16_t *x, uint16_t *y, size_t n, int threads, bool native) {
    (void)x, (void)y, (void)n, (void)threads, (void)native;
}
bool pprt_silu_bf16_native(void) { return false; }
bool pprt_silu_cpu(void) { return false; }
bool pprt_silu_wins(void) { return false; }
void pprt_silu(const float *x, float *y, size_t n, int threads) { (void)x, (void)y, (void)n, (void)threads; }
void pprt_silu_serial(const float *x, float *y, size_t n) { (void)x, (void)y, (void)n; }
void pprt_silu_bf16_serial(const uint16_t *x, uint16_t *y, size_t n) { (void)x, (void)y, (void)n; }
void pprt_silu_lanes(const float *x, float *y, size_t n, int threads, int lanes) {
    (void)x, (void)y, (void)n, (void)threads, (void)lanes;
}
#endif
