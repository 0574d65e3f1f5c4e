/* layout.h: the geometry of a tensor in the layouts oneDNN writes, as pprt's
 * own kernels that read any layout see it (bnorm.c, gnorm.c, gconv.c,
 * cscale.c, gap.c; the oneDNN executor's dn_own_layout makes one from a
 * memory descriptor). */
#ifndef PPRT_LAYOUT_H
#define PPRT_LAYOUT_H

#include <stdint.h>

/* N samples, C channels, S spatial elements; a channel vector of `vec`
 * channels stored contiguously (1: plain, the S elements of one channel
 * contiguous; C: channels last; another: blocked (oneDNN: 4, 8, 16),
 * channels padded to a multiple of it), the stride of a sample and of a
 * channel block (blocked; plain: of a channel), in elements. */
typedef struct pprt_layout {
    int64_t N, C, S, vec, stride_n, stride_c;
} pprt_layout;

#endif
