/* mem_cuda.c: GPU memory as a space (mem.h): cudaMalloc on the stage's
 * device, cudaHostAlloc (portable) for pinned staging, copies with
 * cudaMemcpyAsync (cudaMemcpyPeerAsync between two devices) on non-blocking
 * streams, events without timing. A pprt_stream is a cudaStream_t and a
 * pprt_event a cudaEvent_t (the NCCL transport, comm/nccl.c, relies on it).
 *
 * NOT YET RUN ON A GPU (docs/cuda.md): the links run these calls only where
 * a device answers; without one every call fails with the driver's words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda_backend.h"
#include "../mem.h"

static pp_status cu_err(pp_err *err, const char *call, cudaError_t e) {
    const pp_status code = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInvalidDevice
                               ? PP_EUNSUP
                               : e == cudaErrorMemoryAllocation ? PP_ENOMEM : PP_ERUNTIME;
    return PP_FAIL(err, code, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CU(call)                                                   \
    do {                                                           \
        cudaError_t e_ = (call);                                   \
        if (e_ != cudaSuccess) return cu_err(err, #call, e_);      \
    } while (0)

/* PPRT_CUDA_ALIAS=N: N logical devices over the GPUs present (logical d on
 * GPU d % count), so two stages on logical devices 0 and 1 of a one-GPU
 * machine run the links between two devices (copy links, events, two
 * streams) on it: the one-GPU proof of the two-GPU paths (gpu_day.sh).
 * PPRT_CUDA_PEER=none: every pair of devices taken as without peer access
 * (the staged path). Both are for tests; unset, logical is physical. */
static int alias_n(void) {
    const char *v = getenv("PPRT_CUDA_ALIAS");
    return v ? atoi(v) : 0;
}

int pprt_cuda_phys(int dev) {
    static int count = -1;
    if (dev < 0 || alias_n() <= 0) return dev;
    if (count < 0 && cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        count = 0;
    }
    return count > 0 ? dev % count : dev;
}

static pp_status mc_device(const pprt_stage *st, int local_rank, int *dev, pp_err *err) {
    int count = 0;
    CU(cudaGetDeviceCount(&count));
    if (alias_n() > 0) count = alias_n();
    return pcu_pick_device(st, local_rank, count, dev, err);
}

static pp_status mc_alloc(int dev, size_t bytes, void **p, pp_err *err) {
    *p = NULL;
    CU(cudaSetDevice(pprt_cuda_phys(dev)));
    CU(cudaMalloc(p, bytes ? bytes : 256));
    return PP_OK;
}

static void mc_free(int dev, void *p) {
    if (!p) return;
    cudaSetDevice(pprt_cuda_phys(dev));
    cudaFree(p);
}

static pp_status mc_alloc_pinned(size_t bytes, void **p, pp_err *err) {
    *p = NULL;
    CU(cudaHostAlloc(p, bytes ? bytes : 64, cudaHostAllocPortable));
    return PP_OK;
}

static void mc_free_pinned(void *p) {
    if (p) cudaFreeHost(p);
}

static pp_status mc_stream_new(int dev, pprt_stream **s, pp_err *err) {
    cudaStream_t cs = NULL;
    *s = NULL;
    CU(cudaSetDevice(pprt_cuda_phys(dev)));
    CU(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    *s = (pprt_stream *)cs;
    return PP_OK;
}

static void mc_stream_free(pprt_stream *s) {
    if (!s) return;
    cudaStreamSynchronize((cudaStream_t)s);
    cudaStreamDestroy((cudaStream_t)s);
}

static pp_status mc_copy(pprt_stream *s, void *dst, int dst_dev, const void *src, int src_dev, size_t n, pp_err *err) {
    if (n == 0) return PP_OK;
    if (dst_dev >= 0 && src_dev >= 0 && pprt_cuda_phys(dst_dev) != pprt_cuda_phys(src_dev))
        CU(cudaMemcpyPeerAsync(dst, pprt_cuda_phys(dst_dev), src, pprt_cuda_phys(src_dev), n, (cudaStream_t)s));
    else
        CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)s));
    return PP_OK;
}

/* Peer access lets cudaMemcpyPeerAsync go over NVLink or PCIe directly
 * instead of through the host. It is enabled both ways where the hardware
 * allows (cudaDeviceEnablePeerAccess on device x maps y's memory into x),
 * and the answer says which side may issue a direct copy from a to b: a
 * stream of a where a maps b, else of b where b maps a, else neither (the
 * link stages through pinned memory: without a mapping the driver would
 * stage it anyway, unseen). Failures to enable are a path lost, not an
 * error (cudaGetLastError clears them). */
static bool maps(int x, int y) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, x, y) != cudaSuccess || !can) {
        cudaGetLastError();
        return false;
    }
    int cur = 0;
    cudaGetDevice(&cur);
    bool ok = false;
    if (cudaSetDevice(x) == cudaSuccess) {
        cudaError_t e = cudaDeviceEnablePeerAccess(y, 0);
        ok = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    }
    cudaGetLastError();
    cudaSetDevice(cur);
    return ok;
}

static int mc_peer(int a, int b) {
    const char *none = getenv("PPRT_CUDA_PEER");
    if (none && !strcmp(none, "none") && a != b) return PPRT_PEER_STAGED;
    a = pprt_cuda_phys(a), b = pprt_cuda_phys(b);
    if (a == b) return PPRT_PEER_SRC; /* logical devices on one GPU */
    const bool ab = maps(a, b), ba = maps(b, a);
    return ab ? PPRT_PEER_SRC : ba ? PPRT_PEER_DST : PPRT_PEER_STAGED;
}

static pp_status mc_stream_wait(pprt_stream *s, pprt_event *e, pp_err *err) {
    CU(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
    return PP_OK;
}

static void mc_describe(int dev, pprt_dev_desc *d) {
    *d = (pprt_dev_desc){0};
    dev = pprt_cuda_phys(dev);
    struct cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, dev) == cudaSuccess) {
        snprintf(d->name, sizeof d->name, "%.95s", pr.name);
        d->cc_major = pr.major, d->cc_minor = pr.minor, d->sms = pr.multiProcessorCount;
    } else {
        cudaGetLastError();
        snprintf(d->name, sizeof d->name, "cuda device %d (no properties)", dev);
    }
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    const size_t dnn = cudnnGetVersion(), lt = cublasLtGetVersion();
    snprintf(d->libs, sizeof d->libs, "CUDA runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLASLt %zu.%zu.%zu", rt / 1000,
             rt % 1000 / 10, dnn / 10000, dnn % 10000 / 100, dnn % 100, lt / 10000, lt % 10000 / 100, lt % 100);
}

static pp_status mc_event_new(int dev, pprt_event **e, pp_err *err) {
    cudaEvent_t ce = NULL;
    *e = NULL;
    CU(cudaSetDevice(pprt_cuda_phys(dev)));
    CU(cudaEventCreateWithFlags(&ce, cudaEventDisableTiming));
    *e = (pprt_event *)ce;
    return PP_OK;
}

static void mc_event_free(pprt_event *e) {
    if (e) cudaEventDestroy((cudaEvent_t)e);
}

static pp_status mc_record(pprt_event *e, pprt_stream *s, pp_err *err) {
    CU(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
    return PP_OK;
}

static pp_status mc_query(pprt_event *e, bool *done, pp_err *err) {
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    *done = r == cudaSuccess;
    if (r == cudaSuccess || r == cudaErrorNotReady) return PP_OK;
    return cu_err(err, "cudaEventQuery", r);
}

static pp_status mc_wait(pprt_event *e, pp_err *err) {
    CU(cudaEventSynchronize((cudaEvent_t)e));
    return PP_OK;
}

const pprt_mem_ops pprt_mem_cuda = {
    .name = "cuda",
    .kind = PPRT_MEM_DEVICE,
    .nccl = true,
    .device = mc_device,
    .alloc = mc_alloc,
    .free = mc_free,
    .alloc_pinned = mc_alloc_pinned,
    .free_pinned = mc_free_pinned,
    .stream_new = mc_stream_new,
    .stream_free = mc_stream_free,
    .copy = mc_copy,
    .peer = mc_peer,
    .stream_wait = mc_stream_wait,
    .describe = mc_describe,
    .event_new = mc_event_new,
    .event_free = mc_event_free,
    .record = mc_record,
    .query = mc_query,
    .wait = mc_wait,
    .overlap_ends = pprt_cuda_overlap_ends,
};
