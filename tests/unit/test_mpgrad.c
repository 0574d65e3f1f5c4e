/* test_mpgrad.c: pp.MaxPoolGrad's reference kernel (runtime/cpu/ref_grad.c,
 * which the oneDNN executor runs too, over ranges of planes) against the
 * rule written out here one output at a time: each output's window, taps in
 * row-major order, gives its dY to the first largest input inside the
 * input, a NaN first (the window's first NaN), none when no tap lies
 * inside; the outputs add into dX in their order, in float.
 *
 * - 400 random geometries of 1, 2 and 3 spatial dims: inputs 1 to 9 wide
 *   and some 70 to 200 wide along the last (runs of more than the kernel's
 *   64 outputs), windows 1 to 3, strides 1 to 3, dilations 1 and 2, begin
 *   and end pads 0 to window - 1, 1 to 3 planes; inputs of 0, 1 and 2 with
 *   one in 17 a NaN (ties and NaN everywhere);
 * - ResNet's pool (3x3, stride 2, pads 1) on 2 x 3 x 112 x 112;
 * - dX must have exactly the rule's bits (the same float sums in the same
 *   order).
 * Exit 0 when all pass, 1 otherwise. */
#include "runtime/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 33) % n;
}

typedef struct {
    int nsp;
    int64_t planes, in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
} geo;

/* The rule, one output at a time, dims padded to 3 at the front. */
static void rule(const geo *g, const float *x, const float *dy, float *dx) {
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0}, out[3] = {1, 1, 1};
    for (int i = 0; i < g->nsp; i++) {
        const int j = 3 - g->nsp + i;
        in[j] = g->in[i], k[j] = g->k[i], s[j] = g->s[i], d[j] = g->d[i], p[j] = g->pb[i], out[j] = g->out[i];
    }
    const int64_t Pin = in[0] * in[1] * in[2], P = out[0] * out[1] * out[2];
    memset(dx, 0, sizeof(float) * (size_t)(g->planes * Pin));
    for (int64_t pl = 0; pl < g->planes; pl++)
        for (int64_t o = 0; o < P; o++) {
            const int64_t oc[3] = {o / (out[1] * out[2]), o / out[2] % out[1], o % out[2]};
            int64_t best = -1;
            for (int64_t t = 0; t < k[0] * k[1] * k[2]; t++) {
                const int64_t tc[3] = {t / (k[1] * k[2]), t / k[2] % k[1], t % k[2]};
                int64_t at = 0;
                bool inside = true;
                for (int a = 0; a < 3; a++) {
                    const int64_t i = oc[a] * s[a] - p[a] + tc[a] * d[a];
                    inside = inside && i >= 0 && i < in[a];
                    at = at * in[a] + i;
                }
                if (!inside) continue;
                const float v = x[pl * Pin + at];
                if (best >= 0 && isnan(x[pl * Pin + best])) break; /* a NaN is taken for good */
                if (best < 0 || isnan(v) || v > x[pl * Pin + best]) best = at;
            }
            if (best >= 0) dx[pl * Pin + best] += dy[pl * P + o];
        }
}

static void run_case(const geo *g, const char *name) {
    check_case = name;
    int64_t Pin = 1, P = 1;
    pp_shape xs = {.rank = 2 + g->nsp, .dim = {1, g->planes}}, ys = xs;
    for (int i = 0; i < g->nsp; i++) Pin *= g->in[i], P *= g->out[i], xs.dim[2 + i] = g->in[i], ys.dim[2 + i] = g->out[i];
    float *x = malloc(sizeof(float) * (size_t)(g->planes * Pin)), *dy = malloc(sizeof(float) * (size_t)(g->planes * P));
    float *want = malloc(sizeof(float) * (size_t)(g->planes * Pin)), *got = malloc(sizeof(float) * (size_t)(g->planes * Pin));
    for (int64_t i = 0; i < g->planes * Pin; i++) x[i] = rnd(17) == 0 ? NAN : (float)rnd(3);
    for (int64_t i = 0; i < g->planes * P; i++) dy[i] = (float)rnd(1000) / 997.0f - 0.5f;
    rule(g, x, dy, want);
    int64_t pads[6], dil[3];
    for (int i = 0; i < g->nsp; i++) pads[i] = g->pb[i], pads[g->nsp + i] = g->pe[i], dil[i] = g->d[i];
    pp_attr a[4] = {{.name = "kernel_shape", .type = PP_ATTR_INTS, .ints = g->k, .n = g->nsp},
                    {.name = "strides", .type = PP_ATTR_INTS, .ints = g->s, .n = g->nsp},
                    {.name = "pads", .type = PP_ATTR_INTS, .ints = pads, .n = 2 * g->nsp},
                    {.name = "dilations", .type = PP_ATTR_INTS, .ints = dil, .n = g->nsp}};
    const pprt_tensor in[2] = {{PP_F32, ys, dy}, {PP_F32, xs, x}};
    pprt_tensor out = {PP_F32, xs, got};
    pprt_scratch sc = {0};
    pp_err err = {0};
    const pp_status st = pprt_ref_kernels[PP_OP_MAXPOOLGRAD]((pp_attrs){a, 4, 13}, in, 2, &out, 1, &sc, &err);
    pprt_scratch_free(&sc);
    CHECK(st == PP_OK, "the kernel failed: %s", err.msg);
    if (st == PP_OK) {
        int64_t bad = -1;
        for (int64_t i = 0; i < g->planes * Pin && bad < 0; i++)
            if (memcmp(&got[i], &want[i], sizeof(float))) bad = i;
        CHECK(bad < 0, "dX element %lld: %.9g, the rule gives %.9g", (long long)bad, bad < 0 ? 0.0 : got[bad],
              bad < 0 ? 0.0 : want[bad]);
    }
    free(x), free(dy), free(want), free(got);
}

int main(void) {
    char name[160];
    int cases = 0;
    for (int c = 0; c < 400; c++) {
        geo g = {.nsp = 1 + (int)rnd(3), .planes = 1 + rnd(3)};
        bool empty = false;
        for (int i = 0; i < g.nsp; i++) {
            g.in[i] = i == g.nsp - 1 && rnd(4) == 0 ? 70 + rnd(131) : 1 + rnd(9);
            g.k[i] = 1 + rnd(3), g.s[i] = 1 + rnd(3), g.d[i] = 1 + rnd(2);
            g.pb[i] = rnd((uint32_t)g.k[i]), g.pe[i] = rnd((uint32_t)g.k[i]);
            const int64_t span = g.in[i] + g.pb[i] + g.pe[i] - g.d[i] * (g.k[i] - 1) - 1;
            g.out[i] = span < 0 ? 0 : span / g.s[i] + 1;
            empty = empty || g.out[i] == 0;
        }
        if (empty) continue;
        snprintf(name, sizeof name, "case %d: %d dims, last: in %lld k %lld s %lld d %lld pads %lld,%lld", c, g.nsp,
                 (long long)g.in[g.nsp - 1], (long long)g.k[g.nsp - 1], (long long)g.s[g.nsp - 1],
                 (long long)g.d[g.nsp - 1], (long long)g.pb[g.nsp - 1], (long long)g.pe[g.nsp - 1]);
        run_case(&g, name);
        cases++;
    }
    const geo resnet = {2, 6, {112, 112}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {56, 56}};
    run_case(&resnet, "ResNet's 3x3 stride-2 pool");
    check_case = "";
    printf("test_mpgrad: %d random geometries and ResNet's\n", cases);
    return check_summary("test_mpgrad");
}
