/* cuda_backend.h: what the rest of pprt sees of the CUDA backend: two
 * executors (runtime/exec.h), their options, and the library versions.
 *
 *   pprt_exec_cuda_emu  the step list run on the host (emu.c): built always,
 *                       it needs no CUDA;
 *   pprt_exec_cuda      the step list on a GPU (exec_cuda.c): only in builds
 *                       with CUDA (PPRT_WITH_CUDA defined).
 * The registry's rows (backend_cuda.c) name them and their memory spaces
 * (mem_cuda.c, mem_emu.c); the options below reach them through
 * pprt_cuda_config(). */
#ifndef PPRT_CUDA_BACKEND_H
#define PPRT_CUDA_BACKEND_H

#include "../pprt.h"

struct pprt_exec_ops;
struct pprt_exec;
extern const struct pprt_exec_ops pprt_exec_cuda_emu;
#ifdef PPRT_WITH_CUDA
extern const struct pprt_exec_ops pprt_exec_cuda;
#endif

#define PPRT_CUDA_MAX_DEVICES 64

typedef struct pprt_cuda_cfg {
    int n_devices;                       /* 0: stage i on device i % (devices visible) */
    int devices[PPRT_CUDA_MAX_DEVICES];  /* stage i on devices[i % n_devices] */
    bool graphs;                         /* capture each stage's steps as a CUDA graph after warm-up */
    bool sync_each;                      /* synchronize after every step (pins an asynchronous fault) */
    bool host_only;                      /* every node on the host fallback (tests) */
    bool explain;                        /* --cuda-explain: each library step's engine or algorithm on stderr */
    bool conv_fusion;                    /* --cuda-conv-fusion on: a convolution's bias, residual and ReLU in
                                          * its cuDNN graph; off (default): the convolution alone, then the
                                          * epilogue kernel (fused engines dropped NaN on an H200) */
    bool wide_copies;                    /* --cuda-wide-copies (default on): strided copies with their dims
                                          * merged, 16 bytes a thread where aligned (plan_cuda.c) */
    bool host_op[PP_OP_COUNT];           /* --cuda-host-ops: op types run on the host fallback (tests) */
} pprt_cuda_cfg;

/* Per node of st: 1 where --cuda-host-ops puts it on the host fallback
 * (--cuda-host-only is the planner's own switch). NULL when out of memory;
 * free() it. */
unsigned char *pprt_cuda_host_nodes(const pprt_stage *st);

/* The options every CUDA executor reads at create (defaults: graphs on, conv fusion off). */
pprt_cuda_cfg *pprt_cuda_config(void);

/* pprt's command line: takes argv[*i] (and its value) when it is a CUDA
 * option (--devices LIST, --cuda-graphs on|off, --cuda-sync, --cuda-host-only, --cuda-host-ops LIST, --cuda-explain,
 * --cuda-conv-fusion on|off, --cuda-wide-copies on|off),
 * advancing *i; returns 1 when taken, 0 when not a CUDA option, -1 on a bad
 * value (msg filled). */
int pprt_cuda_option(int argc, char **argv, int *i, char *msg, size_t cap);
/* The usage lines of those options. */
extern const char pprt_cuda_usage[];

/* The device stage st runs on, among `count`: --devices LIST[i % n] (i: the
 * local rank under mpirun, else the stage index), else the plan's
 * placement, else i % count; a device past count is an error. */
pp_status pcu_pick_device(const pprt_stage *st, int local_rank, int count, int *dev, pp_err *err);

/* "CUDA runtime 13.0, cuDNN 9.19.0, cuBLASLt 13.1.0, NCCL 2.28.3; driver: ..."
 * (builds without CUDA: a line saying so). */
void pprt_cuda_versions(char *buf, size_t cap);

/* Queue stage x's steps on messages that are device buffers of its device,
 * without waiting for them (the executors' run() does this, then waits);
 * the emulator's "device" memory is host memory (mem_emu.c), run at once. */
pp_status pprt_cuda_emu_run_dev(struct pprt_exec *x, void *dev_in, void *dev_out, pp_err *err);
#ifdef PPRT_WITH_CUDA
extern const struct pprt_mem_ops pprt_mem_cuda;
pp_status pprt_cuda_run_dev(struct pprt_exec *x, const void *dev_in, void *dev_out, pp_err *err);
#endif

#endif
