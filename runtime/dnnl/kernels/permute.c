#include "permute.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

bool pprt_permute_plan(const int64_t *dims, int rank, const int64_t *perm, size_t elem, pprt_permute *p) {
    memset(p, 0, sizeof *p);
    if (rank < 1 || rank > PPRT_PERMUTE_MAX || perm[rank - 1] != rank - 1) return false;
    int64_t ist[PPRT_PERMUTE_MAX], od[PPRT_PERMUTE_MAX], os[PPRT_PERMUTE_MAX];
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (dims[i] <= 0) return false;
        ist[i] = s;
        s *= dims[i];
    }
    /* the output's axes longer than 1, with their strides in the input */
    int n = 0;
    for (int i = 0; i < rank; i++)
        if (dims[perm[i]] > 1) od[n] = dims[perm[i]], os[n] = ist[perm[i]], n++;
    /* the row: trailing axes contiguous in the input */
    int64_t row = 1;
    while (n > 0 && os[n - 1] == row) row *= od[--n];
    /* neighbours that are contiguous in the input merge */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && p->stride[m - 1] == os[i] * od[i]) {
            p->dim[m - 1] *= od[i];
            p->stride[m - 1] = os[i];
        } else {
            p->dim[m] = od[i], p->stride[m] = os[i], m++;
        }
    }
    p->n = m;
    p->rows = 1;
    for (int i = 0; i < m; i++) p->rows *= (size_t)p->dim[i];
    p->elem = elem;
    p->row_bytes = (size_t)row * elem;
    return true;
}

static inline void copy_row(unsigned char *restrict d, const unsigned char *restrict s, size_t bytes) {
    switch (bytes) { /* short rows (an image's 2x2 patches) as single moves */
    case 4: memcpy(d, s, 4); return;
    case 8: memcpy(d, s, 8); return;
    case 16: memcpy(d, s, 16); return;
    default: memcpy(d, s, bytes);
    }
}

/* rows [r0, r1): the input offset of r0 from its digits, then an odometer */
static void run_rows(const pprt_permute *p, const unsigned char *src, unsigned char *dst, size_t r0, size_t r1) {
    int64_t idx[PPRT_PERMUTE_MAX] = {0};
    int64_t off = 0;
    size_t q = r0;
    for (int i = p->n - 1; i >= 0; i--) {
        idx[i] = (int64_t)(q % (size_t)p->dim[i]);
        q /= (size_t)p->dim[i];
        off += idx[i] * p->stride[i];
    }
    const size_t rb = p->row_bytes, el = p->elem;
    for (size_t r = r0; r < r1; r++) {
        copy_row(dst + r * rb, src + (size_t)off * el, rb);
        for (int i = p->n - 1; i >= 0; i--) {
            off += p->stride[i];
            if (++idx[i] < p->dim[i]) break;
            off -= p->stride[i] * p->dim[i];
            idx[i] = 0;
        }
    }
}

void pprt_permute_run(const pprt_permute *p, const void *src, void *dst, int threads) {
    const size_t rows = p->rows, bytes = rows * p->row_bytes;
    /* a thread per 64 KiB at least: below that the team costs more than it saves */
    int t = threads > 1 ? threads : 1;
    if ((size_t)t > bytes / 65536) t = bytes / 65536 > 1 ? (int)(bytes / 65536) : 1;
    if ((size_t)t > rows) t = (int)rows;
    (void)t;
#pragma omp parallel num_threads(t) if (t > 1)
    {
        int k = 0, nt = 1;
#ifdef _OPENMP
        k = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        const size_t r0 = rows * (size_t)k / (size_t)nt, r1 = rows * (size_t)(k + 1) / (size_t)nt;
        run_rows(p, src, dst, r0, r1);
    }
}
