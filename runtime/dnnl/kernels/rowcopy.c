/* rowcopy.c: strided row copies (rowcopy.h). */
#include "rowcopy.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void pprt_rowcopy_run(const pprt_rowcopy *c, const void *src, void *dst, int threads) {
    const unsigned char *s = (const unsigned char *)src + c->src_off;
    unsigned char *d = (unsigned char *)dst + c->dst_off;
    if (threads < 1 || c->rows * c->row_bytes < (64u << 10)) threads = 1;
    /* pieces per row: 1, or enough for every thread twice where rows are few */
    size_t per = 1;
    if (threads > 1 && c->rows < 2 * (size_t)threads) per = (2 * (size_t)threads + c->rows - 1) / c->rows;
    size_t piece = (c->row_bytes + per - 1) / per;
    piece = (piece + 63) / 64 * 64;
    const long tasks = (long)(c->rows * per);
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long t = 0; t < tasks; t++) {
        const size_t r = (size_t)t / per, lo = (size_t)t % per * piece;
        if (lo >= c->row_bytes) continue;
        const size_t n = c->row_bytes - lo < piece ? c->row_bytes - lo : piece;
        memcpy(d + r * c->dst_stride + lo, s + r * c->src_stride + lo, n);
    }
}
