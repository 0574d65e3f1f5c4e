/* scalar.h: scalar math that the reference kernels (runtime/cpu) and the
 * CUDA kernels (runtime/cuda/kmath.h, compiled by nvcc and as C for the
 * emulator) both evaluate, written once: plain C that nvcc also takes as
 * __host__ __device__. The float unary formulas live with their op rows in
 * ops_unary.def. */
#ifndef PP_SCALAR_H
#define PP_SCALAR_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PP_SCALAR static __host__ __device__ __forceinline__
#else
#define PP_SCALAR static inline
#endif

/* base^e wrapping modulo 2^64, e >= 0 (square and multiply): Pow of
 * integers with an integer exponent. */
PP_SCALAR uint64_t pp_ipow(uint64_t base, int64_t e) {
    uint64_t r = 1;
    for (; e > 0; e >>= 1) {
        if (e & 1) r *= base;
        base *= base;
    }
    return r;
}

/* x mirrored at the nearer bound until it lies in [lo, hi] (the ONNX
 * reference's and PyTorch's rule for GridSample's reflection padding); lo
 * where the range is empty. */
PP_SCALAR double pp_reflect(double x, double lo, double hi) {
    const double rng = hi - lo;
    if (!(rng > 0)) return lo;
    if (x < lo) {
        const double dx = lo - x, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        const double dx = x - hi, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? hi - r : lo + r;
    }
    return x;
}

#endif
