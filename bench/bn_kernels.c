/* bn_kernels.c: the BatchNorm kernels of a training step, timed on one
 * thread over ResNet-50's shapes at batch 8 (bench/bn_kernels.py runs it
 * beside PyTorch's own kernels): the training-mode forward and
 * pp.BatchNormGrad, as the oneDNN executor runs them (the vector copies,
 * runtime/dnnl/kernels/bnchan.h) and as the reference backend runs them
 * (runtime/cpu/ref.h). Prints one line a shape: N C S and the best of 7
 * runs' nanoseconds an element for the four. Not a test. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/cpu/ref.h"
#include "runtime/dnnl/kernels/bnchan.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const int64_t N = argc > 1 ? atoll(argv[1]) : 8;
    const int64_t shapes[][2] = {{64, 12544}, {64, 3136}, {256, 3136}, {128, 3136}, {128, 784}, {512, 784},
                                 {256, 784}, {256, 196}, {1024, 196}, {512, 196}, {512, 49}, {2048, 49}};
    printf("# isa %s\n", pprt_bnchan_isa());
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t C = shapes[k][0], S = shapes[k][1], n = N * C * S;
        float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
        float *y = malloc(sizeof(float) * (size_t)n), *p = malloc(sizeof(float) * (size_t)C * 9);
        if (!x || !dy || !y || !p) return 1;
        for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 97) / 50.0f, dy[i] = (float)(i % 89) / 40.0f - 1.1f, y[i] = 0;
        for (int64_t i = 0; i < C * 9; i++) p[i] = 1.0f;
        float *const st[4] = {p + 5 * C, p + 6 * C, p + 7 * C, p + 8 * C};
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < 7; r++) {
            double t[5];
            t[0] = now();
            pprt_bnchan_fwd(x, p, p + C, p + 2 * C, p + 3 * C, y, st, N, C, S, 1e-5f, 0.9f, true, 0, C);
            t[1] = now();
            pprt_bnchan_grad(dy, x, p, p + 2 * C, p + 3 * C, y, p + 4 * C, p + 1 * C, N, C, S, 1e-5f, true, 0, C);
            t[2] = now();
            pprt_bn_channels(x, p, p + C, p + 2 * C, p + 3 * C, y, st, N, C, S, 1e-5f, 0.9f, true, 0, C);
            t[3] = now();
            pprt_bn_grad_channels(dy, x, p, p + 2 * C, p + 3 * C, y, p + 4 * C, p + 1 * C, N, C, S, 1e-5f, true, 0, C);
            t[4] = now();
            for (int j = 0; j < 4; j++)
                if (t[j + 1] - t[j] < best[j]) best[j] = t[j + 1] - t[j];
        }
        printf("%lld %lld %lld %.4f %.4f %.4f %.4f\n", (long long)N, (long long)C, (long long)S, 1e9 * best[0] / (double)n,
               1e9 * best[1] / (double)n, 1e9 * best[2] / (double)n, 1e9 * best[3] / (double)n);
        free(x), free(dy), free(y), free(p);
    }
    return 0;
}
