/* test_pad.c: our Pad (runtime/dnnl/kernels/pad.c) against the definition,
 * out[o] = in[o - begin] where that index is inside the input, else the
 * value (constant mode), the nearest edge (edge), the index reflected at
 * the ends without repeating them, again and again (reflect, as NumPy's),
 * the index modulo the axis (wrap), element by element here.
 *
 * - 500 random cases: rank 1 to 5, dims 0 to 6 (an empty input axis
 *   padded included), each axis padded or cut at either end by -2 to 3 (as
 *   far as the output stays non-empty), values 0, -0 and 1.5, on 1, 2 and 3
 *   threads (the threads share units only past 64 KiB, so these run on
 *   one);
 * - large ones that the threads share: CoaT's one-token pad of
 *   [8, 8, 3136, 8] on axis 2, an image's [4, 16, 56, 56] padded by 1 on H
 *   and W and cut by 1 at the end of C;
 * - 300 random cases in each of the other modes: pads 0 to 5 (past the
 *   axis' length included), dims 1 to 6;
 * - the plan refuses an empty output, and a negative pad outside constant
 *   mode.
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/dnnl/kernels/pad.h"

#include <math.h>
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

/* the source index of output index o along an axis, or -1 for the value */
static int64_t source(int mode, int64_t o, int64_t b, int64_t n) {
    int64_t i = o - b;
    if (i >= 0 && i < n) return i;
    if (mode == PPRT_PAD_CONSTANT) return -1;
    if (mode == PPRT_PAD_EDGE) return i < 0 ? 0 : n - 1;
    if (mode == PPRT_PAD_WRAP) {
        while (i < 0) i += n;
        return i % n;
    }
    if (n == 1) return 0;
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
}

static void one(const int64_t *dims, const int64_t *begin, const int64_t *end, int rank, int mode, float value,
                const char *what) {
    int64_t od[8], total_in = 1, total = 1;
    for (int i = 0; i < rank; i++) od[i] = dims[i] + begin[i] + end[i], total_in *= dims[i], total *= od[i];
    float *in = malloc((size_t)(total_in ? total_in : 1) * sizeof(float)), *want = malloc((size_t)total * sizeof(float)),
          *got = malloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < total_in; i++) in[i] = (float)(rnd() % 1000) - 500.0f;
    for (int64_t o = 0; o < total; o++) { /* the definition */
        int64_t q = o, j = 0, st = 1;
        bool inside = true;
        for (int k = rank - 1; k >= 0; k--) {
            const int64_t ik = source(mode, q % od[k], begin[k], dims[k]);
            q /= od[k];
            inside &= ik >= 0;
            j += ik * st;
            st *= dims[k];
        }
        want[o] = inside ? in[j] : value;
    }
    pprt_pad p;
    check_case = what;
    CHECK(pprt_pad_plan(dims, od, begin, rank, mode, value, &p), "the plan refused a non-empty output");
    for (int t = 1; t <= 3; t++) {
        memset(got, 0x7f, (size_t)total * sizeof(float));
        pprt_pad_run(&p, in, got, t);
        CHECK(memcmp(got, want, (size_t)total * sizeof(float)) == 0, "%d threads: other bytes", t);
    }
    free(in), free(want), free(got);
}

int main(void) {
    char what[160];
    const float values[3] = {0.0f, -0.0f, 1.5f};
    for (int c = 0; c < 500; c++) {
        const int rank = 1 + (int)(rnd() % 5);
        int64_t dims[8], begin[8], end[8];
        for (int i = 0; i < rank; i++) {
            dims[i] = (int64_t)(rnd() % 7);
            do {
                begin[i] = rnd() % 3 ? (int64_t)(rnd() % 6) - 2 : 0;
                end[i] = rnd() % 3 ? (int64_t)(rnd() % 6) - 2 : 0;
            } while (dims[i] + begin[i] + end[i] <= 0 || (dims[i] == 0 && (begin[i] < 0 || end[i] < 0)));
        }
        int n = snprintf(what, sizeof what, "case %d: dims", c);
        for (int i = 0; i < rank; i++) n += snprintf(what + n, sizeof what - (size_t)n, " %lld(%+lld,%+lld)",
                                                     (long long)dims[i], (long long)begin[i], (long long)end[i]);
        one(dims, begin, end, rank, PPRT_PAD_CONSTANT, values[c % 3], what);
    }
    static const char *modes[] = {"constant", "reflect", "edge", "wrap"};
    for (int mode = PPRT_PAD_REFLECT; mode <= PPRT_PAD_WRAP; mode++)
        for (int c = 0; c < 300; c++) {
            const int rank = 1 + (int)(rnd() % 4);
            int64_t dims[8], begin[8], end[8];
            for (int i = 0; i < rank; i++) {
                dims[i] = 1 + (int64_t)(rnd() % 6);
                begin[i] = rnd() % 2 ? (int64_t)(rnd() % 6) : 0;
                end[i] = rnd() % 2 ? (int64_t)(rnd() % 6) : 0;
            }
            int n = snprintf(what, sizeof what, "%s %d: dims", modes[mode], c);
            for (int i = 0; i < rank; i++) n += snprintf(what + n, sizeof what - (size_t)n, " %lld(+%lld,+%lld)",
                                                         (long long)dims[i], (long long)begin[i], (long long)end[i]);
            one(dims, begin, end, rank, mode, 0.0f, what);
        }
    one((int64_t[]){8, 8, 3136, 8}, (int64_t[]){0, 0, 1, 0}, (int64_t[]){0, 0, 0, 0}, 4, PPRT_PAD_CONSTANT, 0.0f,
        "CoaT [8, 8, 3136, 8]");
    one((int64_t[]){4, 16, 56, 56}, (int64_t[]){0, 0, 1, 1}, (int64_t[]){0, -1, 1, 1}, 4, PPRT_PAD_CONSTANT, -1.0f,
        "[4, 16, 56, 56]");
    one((int64_t[]){8, 64, 56, 56}, (int64_t[]){0, 0, 1, 1}, (int64_t[]){0, 0, 1, 1}, 4, PPRT_PAD_REFLECT, 0.0f,
        "a blur pool's reflect pad of [8, 64, 56, 56]");
    pprt_pad p;
    check_case = "empty output";
    CHECK(!pprt_pad_plan((int64_t[]){2, 3}, (int64_t[]){2, 0}, (int64_t[]){0, -3}, 2, PPRT_PAD_CONSTANT, 0.0f, &p),
          "planned an empty output");
    check_case = "reflect with a negative pad";
    CHECK(!pprt_pad_plan((int64_t[]){2, 3}, (int64_t[]){2, 2}, (int64_t[]){0, -1}, 2, PPRT_PAD_REFLECT, 0.0f, &p),
          "planned a cut in reflect mode");
    return check_summary("test_pad");
}
