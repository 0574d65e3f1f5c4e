/* nccl_probe.c: NCCL's behaviour that pprt's NCCL link (comm/p2p_nccl.c)
 * relies on, checked on one GPU without MPI (tests/cuda/gpu_day.sh, step 6;
 * built where CUDA and NCCL are, carried by build_carry.sh). Without a GPU
 * it says so and exits 77.
 *
 *   self     a one-rank communicator (non-blocking, as pprt makes them):
 *            the grouped warm-up pattern, ncclSend and ncclRecv of the same
 *            rank in one group, then 1 MiB each way; the bytes checked
 *   nojoin   a two-rank communicator whose peer never joins: the
 *            non-blocking init polled for SECS seconds (pprt's
 *            --mpi-timeout) must still be in progress, never an error nor a
 *            hang, then ncclCommAbort must return (its time printed)
 *
 * usage: nccl_probe self|nojoin [SECS]   exit 0 pass, 1 fail, 77 no GPU */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Poll a non-blocking call until through or the deadline; its last state. */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, double deadline) {
    while (r == ncclInProgress && now() < deadline) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclInternalError;
    }
    return r;
}

static int self_test(void) {
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) r = settle(comm, ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), now() + 30);
    if (r != ncclSuccess) {
        printf("FAIL: self: ncclCommInitRankConfig (1 rank): %s\n", ncclGetErrorString(r));
        return 1;
    }
    enum { N = 1 << 20 };
    unsigned char *d = NULL, *h = malloc(2 * N);
    cudaStream_t st;
    if (!h || cudaMalloc((void **)&d, 2 * N) != cudaSuccess || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) {
        printf("FAIL: self: device memory or stream\n");
        return 1;
    }
    for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 7 + 3), h[N + i] = 0;
    cudaMemcpy(d, h, 2 * N, cudaMemcpyHostToDevice);
    const size_t sizes[2] = {1, N}; /* the warm-up's one byte, then a message */
    int bad = 0;
    for (int k = 0; k < 2 && !bad; k++) {
        const double t0 = now();
        r = ncclGroupStart();
        if (r == ncclSuccess) r = ncclSend(d, sizes[k], ncclUint8, 0, comm, st);
        if (r == ncclSuccess || r == ncclInProgress) r = ncclRecv(d + N, sizes[k], ncclUint8, 0, comm, st);
        ncclResult_t g = ncclGroupEnd();
        if (r == ncclSuccess || r == ncclInProgress) r = g;
        r = settle(comm, r, now() + 30);
        cudaError_t e = r == ncclSuccess ? cudaStreamSynchronize(st) : cudaSuccess;
        if (r != ncclSuccess || e != cudaSuccess) {
            printf("FAIL: self: grouped send/receive of %zu bytes: %s / %s\n", sizes[k], ncclGetErrorString(r),
                   cudaGetErrorString(e));
            bad = 1;
            break;
        }
        cudaMemcpy(h + N, d + N, sizes[k], cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < sizes[k] && !bad; i++) bad = h[N + i] != h[i];
        printf("%s: self: grouped ncclSend + ncclRecv of %zu bytes on one rank in %.3f s%s\n", bad ? "FAIL" : "ok",
               sizes[k], now() - t0, bad ? ": other bytes" : "");
    }
    ncclCommFinalize(comm);
    settle(comm, ncclInProgress, now() + 10);
    ncclCommDestroy(comm);
    cudaFree(d);
    free(h);
    return bad;
}

static int nojoin_test(double secs) {
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclGetUniqueId(&id);
    const double t0 = now();
    if (r == ncclSuccess) r = ncclCommInitRankConfig(&comm, 2, id, 0, &cfg);
    if (comm) r = settle(comm, r, t0 + secs);
    const double waited = now() - t0;
    if (r != ncclInProgress) {
        printf("FAIL: nojoin: the init with a peer that never joins ended after %.1f s with %s (expected still in "
               "progress at the deadline)\n", waited, ncclGetErrorString(r));
        if (comm) ncclCommAbort(comm);
        return 1;
    }
    const double t1 = now();
    r = ncclCommAbort(comm);
    printf("%s: nojoin: the init still in progress after %.1f s (the deadline); ncclCommAbort returned %s in %.2f s\n",
           r == ncclSuccess ? "ok" : "FAIL", waited, ncclGetErrorString(r), now() - t1);
    return r != ncclSuccess;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "self") && strcmp(argv[1], "nojoin"))) {
        fprintf(stderr, "usage: nccl_probe self|nojoin [SECS]\n");
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("skip: no GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
        return 77;
    }
    cudaSetDevice(0);
    int v = 0;
    ncclGetVersion(&v);
    printf("NCCL %d.%d.%d, %d GPU(s)\n", v / 10000, v % 10000 / 100, v % 100, n);
    fflush(stdout);
    return !strcmp(argv[1], "self") ? self_test() : nojoin_test(argc > 2 ? atof(argv[2]) : 5.0);
}
