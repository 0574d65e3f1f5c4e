/* test_rowcopy.c: our strided row copies (runtime/dnnl/kernels/rowcopy.c) against a
 * byte loop here: dst[dst_off + r * dst_stride + i] = src[src_off + r *
 * src_stride + i] for r < rows, i < row_bytes, and nothing else of dst
 * written.
 *
 * - 300 random cases: 1 to 40 rows of 1 to 300 bytes, strides at least the
 *   row, offsets 0 to 63, on 1, 2 and 3 threads;
 * - large ones the threads share: a qkv Split's windows ([8 * 197] rows of
 *   384 floats out of 1152), CSP's halves ([8] rows of 64 * 56 * 56 floats
 *   out of twice that), one row of 4 MB (cut into pieces), 3 rows of 1 MB
 *   on 2 threads.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/rowcopy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void one(pprt_rowcopy c, const char *what) {
    const size_t sbytes = c.src_off + (c.rows - 1) * c.src_stride + c.row_bytes;
    const size_t dbytes = c.dst_off + (c.rows - 1) * c.dst_stride + c.row_bytes + 64;
    unsigned char *src = malloc(sbytes), *want = malloc(dbytes), *got = malloc(dbytes);
    for (size_t i = 0; i < sbytes; i++) src[i] = (unsigned char)rnd();
    memset(want, 0xa5, dbytes);
    for (size_t r = 0; r < c.rows; r++)
        for (size_t i = 0; i < c.row_bytes; i++) want[c.dst_off + r * c.dst_stride + i] = src[c.src_off + r * c.src_stride + i];
    check_case = what;
    for (int t = 1; t <= 3; t++) {
        memset(got, 0xa5, dbytes);
        pprt_rowcopy_run(&c, src, got, t);
        CHECK(memcmp(got, want, dbytes) == 0, "%d threads: other bytes", t);
    }
    free(src), free(want), free(got);
}

int main(void) {
    char what[128];
    for (int k = 0; k < 300; k++) {
        pprt_rowcopy c = {.rows = 1 + rnd() % 40, .row_bytes = 1 + rnd() % 300};
        c.src_stride = c.row_bytes + rnd() % 100, c.dst_stride = c.row_bytes + (rnd() % 2 ? 0 : rnd() % 100);
        c.src_off = rnd() % 64, c.dst_off = rnd() % 64;
        snprintf(what, sizeof what, "case %d: %zu rows of %zu bytes", k, c.rows, c.row_bytes);
        one(c, what);
    }
    one((pprt_rowcopy){.rows = 8 * 197, .row_bytes = 384 * 4, .src_stride = 1152 * 4, .dst_stride = 384 * 4,
                       .src_off = 768 * 4},
        "qkv window");
    one((pprt_rowcopy){.rows = 8, .row_bytes = 64 * 56 * 56 * 4, .src_stride = 128 * 56 * 56 * 4,
                       .dst_stride = 64 * 56 * 56 * 4, .src_off = 64 * 56 * 56 * 4},
        "CSP half");
    one((pprt_rowcopy){.rows = 1, .row_bytes = 4u << 20, .src_stride = 4u << 20, .dst_stride = 4u << 20, .src_off = 4},
        "one row of 4 MB");
    one((pprt_rowcopy){.rows = 3, .row_bytes = (1u << 20) + 3, .src_stride = 2u << 20, .dst_stride = (1u << 20) + 3},
        "3 rows of 1 MB");
    return check_summary("test_rowcopy");
}
