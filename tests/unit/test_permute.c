/* test_permute.c: our row-copy Transpose (runtime/dnnl/kernels/permute.c) against
 * the definition, out[i] = in[j] with j the input index whose axis perm[k]
 * is the output's axis k, computed here element by element.
 *
 * - 400 random cases: rank 1 to 6, dims 1 to 5 (1-long axes included, which
 *   the plan drops), every permutation that keeps the last axis drawn at
 *   random, elements of 4, 2 and 1 bytes, on 1, 2 and 3 threads (the
 *   threads share the rows only past 64 KiB, so these run on one);
 * - large tensors, so that 2 and 3 threads share the rows: [8, 64, 32, 16]
 *   floats by (0, 2, 1, 3), MobileViT's patch unfolding [8, 4, 8, 2, 8, 2]
 *   by (0, 3, 5, 2, 4, 1)-like moves with rows of 2 floats, and a tensor
 *   whose rows are single floats (the last axis 1 long);
 * - the plan refuses a permutation that moves the last axis and an empty
 *   tensor.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/permute.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* out by the definition, element by element */
static void reference(const unsigned char *in, unsigned char *out, const int64_t *dims, int rank, const int64_t *perm,
                      size_t elem) {
    int64_t ist[8], od[8], total = 1;
    for (int i = rank - 1; i >= 0; i--) ist[i] = total, total *= dims[i];
    for (int i = 0; i < rank; i++) od[i] = dims[perm[i]];
    for (int64_t o = 0; o < total; o++) {
        int64_t q = o, j = 0;
        for (int k = rank - 1; k >= 0; k--) {
            j += (q % od[k]) * ist[perm[k]];
            q /= od[k];
        }
        memcpy(out + (size_t)o * elem, in + (size_t)j * elem, elem);
    }
}

static void one(const int64_t *dims, int rank, const int64_t *perm, size_t elem, const char *what) {
    int64_t total = 1;
    for (int i = 0; i < rank; i++) total *= dims[i];
    const size_t bytes = (size_t)total * elem;
    unsigned char *in = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    if (!in || !want || !got) {
        CHECK_FAIL("out of memory");
        free(in), free(want), free(got);
        return;
    }
    for (size_t i = 0; i < bytes; i++) in[i] = (unsigned char)rnd();
    reference(in, want, dims, rank, perm, elem);
    pprt_permute p;
    check_case = what;
    CHECK(pprt_permute_plan(dims, rank, perm, elem, &p), "the plan refused a row copy");
    for (int t = 1; t <= 3; t++) {
        memset(got, 0xa5, bytes);
        pprt_permute_run(&p, in, got, t);
        size_t bad = 0;
        for (size_t i = 0; i < bytes; i++) bad += got[i] != want[i];
        CHECK(bad == 0, "%zu of %zu bytes differ on %d threads (rank %d, elem %zu, rows %zu of %zu bytes)", bad, bytes,
              t, rank, elem, p.rows, p.row_bytes);
    }
    free(in), free(want), free(got);
}

int main(void) {
    char what[128];
    for (int c = 0; c < 400; c++) {
        const int rank = 1 + (int)(rnd() % 6);
        int64_t dims[8], perm[8];
        for (int i = 0; i < rank; i++) dims[i] = 1 + rnd() % 5, perm[i] = i;
        for (int i = rank - 2; i > 0; i--) { /* shuffle all but the last axis */
            const int j = (int)(rnd() % (unsigned)(i + 1));
            const int64_t t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        const size_t elem = (size_t[]){4, 2, 1}[c % 3];
        snprintf(what, sizeof what, "random case %d", c);
        one(dims, rank, perm, elem, what);
    }
    one((int64_t[]){8, 64, 32, 16}, 4, (int64_t[]){0, 2, 1, 3}, 4, "[8, 64, 32, 16] by (0, 2, 1, 3)");
    one((int64_t[]){8, 4, 8, 2, 8, 2}, 6, (int64_t[]){0, 3, 1, 4, 2, 5}, 4, "patches of 2 floats");
    one((int64_t[]){8, 4, 8, 2, 8, 2}, 6, (int64_t[]){4, 2, 0, 3, 1, 5}, 4, "patches, another order");
    one((int64_t[]){64, 96, 40, 1}, 4, (int64_t[]){2, 0, 1, 3}, 4, "rows of one float");
    one((int64_t[]){3, 70000}, 2, (int64_t[]){0, 1}, 4, "the identity: one row");
    pprt_permute p;
    check_case = "refusals";
    CHECK(!pprt_permute_plan((int64_t[]){2, 3, 4}, 3, (int64_t[]){0, 2, 1}, 4, &p), "the last axis moves");
    CHECK(!pprt_permute_plan((int64_t[]){2, 0, 4}, 3, (int64_t[]){1, 0, 2}, 4, &p), "an empty tensor");
    return check_summary("test_permute");
}
