/* pad_src.h: Pad's modes and the mapping of an output index to the input
 * index it reads: the reference kernel's (ref_tensor.c), which the oneDNN
 * executor's own Pad kernel (runtime/dnnl/kernels/pad.h) shares. */
#ifndef PPRT_PAD_SRC_H
#define PPRT_PAD_SRC_H

#include <stdint.h>

typedef enum { PPRT_PAD_CONSTANT, PPRT_PAD_REFLECT, PPRT_PAD_EDGE, PPRT_PAD_WRAP } pprt_pad_mode;

/* The source index along one axis of output index o (b padded before it,
 * the input n long), or -1 for the constant. */
static inline int64_t pprt_pad_src(int mode, int64_t o, int64_t b, int64_t n) {
    const int64_t i = o - b;
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case PPRT_PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PPRT_PAD_WRAP: return ((i % n) + n) % n;
    case PPRT_PAD_REFLECT: {
        if (n == 1) return 0;
        const int64_t p = 2 * (n - 1), k = ((i % p) + p) % p;
        return k < n ? k : p - k;
    }
    default: return -1;
    }
}

#endif
