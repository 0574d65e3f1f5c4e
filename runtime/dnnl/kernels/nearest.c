/* nearest.c: Resize by nearest neighbour as a gather (nearest.h). */
#include "nearest.h"

void pprt_nearest_run(const pprt_nearest *p, const float *x, float *y, int threads) {
    const int r = p->rank, last = r - 1;
    int64_t rows = 1, istride[PPRT_NEAREST_RANK];
    for (int d = 0; d < last; d++) rows *= p->out[d];
    istride[last] = 1;
    for (int d = last - 1; d >= 0; d--) istride[d] = istride[d + 1] * p->in[d + 1];
    const int64_t ow = p->out[last];
    const int64_t *mw = p->map[last];
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && rows * ow > (1 << 14))
    for (int64_t row = 0; row < rows; row++) {
        /* the output row's index along each axis but the last, to its input row */
        int64_t rest = row, src = 0;
        for (int d = last - 1; d >= 0; d--) {
            const int64_t o = rest % p->out[d];
            rest /= p->out[d];
            src += p->map[d][o] * istride[d];
        }
        const float *xr = x + src;
        float *yr = y + row * ow;
        for (int64_t j = 0; j < ow; j++) yr[j] = xr[mw[j]];
    }
}
