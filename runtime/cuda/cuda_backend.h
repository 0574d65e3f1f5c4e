/* cuda_backend.h: what the rest of pprt sees of the CUDA backend: two
 * executors (runtime/exec.h), their options, and the library versions.
 *
 *   pprt_exec_cuda_emu  the step list run on the host (emu.c): built always,
 *                       it needs no CUDA;
 *   pprt_exec_cuda      the step list on a GPU (exec_cuda.c): only in the
 *                       CUDA module (pprt_cuda.so, built with CUDA, where
 *                       PPRT_WITH_CUDA is defined; pprt loads it, module.h).
 * The registry's rows (backend_cuda.c) name them and their memory spaces
 * (mem_cuda.c, mem_emu.c); the options below reach them through
 * pprt_cuda_config(). */
#ifndef PPRT_CUDA_BACKEND_H
#define PPRT_CUDA_BACKEND_H

#include "../../ir/args.h"
#include "../pprt.h"
#include "tactics.h"

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
    bool row_kernels;                    /* --cuda-row-kernels on: Softmax and LayerNorm rows in one launch of a
                                          * block per row (kmath.h); default off */
    bool fused_attention;                /* --cuda-fused-attention on: ppcc's attention patterns (MatMul,
                                          * [Mul|Div], Softmax, MatMul) as one kernel (kmath.h); default off */
    bool sdpa;                           /* --cuda-sdpa (default on): a half plan's fused attention step on
                                          * cuDNN's fused-attention engine where one takes it (exec_cuda.c) */
    bool stride_views;                   /* --cuda-stride-views on: Transpose/Slice/Split/Gather feeding only
                                          * products folded into their strides (plan_cuda.c); default off */
    bool wide_elementwise;               /* --cuda-wide-elementwise on: f32 elementwise steps four elements a
                                          * thread with 16-byte loads and stores where aligned; default off */
    bool half_products;                  /* --cuda-half-products (default on): a mixed-precision training
                                          * plan's products read and write the half tensors (plan_cuda.c) */
    bool overlap;                        /* --cuda-overlap on: the pipeline's ends staged through several
                                          * buffers on threads of their own (link_stage.c); default off */
    bool host_op[PP_OP_COUNT];           /* --cuda-host-ops: op types run on the host fallback (tests) */
    int layout;                          /* --cuda-layout: PCU_LAYOUT_AUTO, _NCHW, _NHWC (cuplan.h) */
    int tactics;                         /* --cuda-tactics: PPRT_TACTICS_AUTO (the built-in table of the GPU),
                                          * _OFF (heuristics only), _FILE (tactics_file, read at once) */
    const char *tactics_path;            /* the FILE, or "auto" / "off" */
    pcu_tactics tactics_file;
} pprt_cuda_cfg;
enum { PPRT_TACTICS_AUTO, PPRT_TACTICS_OFF, PPRT_TACTICS_FILE };

/* Per node of st: 1 where --cuda-host-ops puts it on the host fallback
 * (--cuda-host-only is the planner's own switch). NULL when out of memory;
 * free() it. */
unsigned char *pprt_cuda_host_nodes(const pprt_stage *st);

struct pcu_plan;
/* Stage st's step list into *pl under the options (--cuda-host-only,
 * --cuda-wide-copies) and `host_node` (pprt_cuda_host_nodes, plus the nodes
 * a library had no engine for), linted: what both CUDA executors plan. */
pp_status pprt_cuda_plan_stage(const pprt_plan *p, const pprt_stage *st, const unsigned char *host_node,
                               struct pcu_plan *pl, pp_err *err);

/* The options every CUDA executor reads at create (defaults: graphs on, conv fusion off). */
pprt_cuda_cfg *pprt_cuda_config(void);
/* --cuda-overlap: the spaces' overlap_ends (mem.h) for cuda and cuda-emu. */
bool pprt_cuda_overlap_ends(void);

/* pprt's command line: the CUDA backends' options (--devices LIST,
 * --cuda-graphs on|off, --cuda-sync, --cuda-host-only, --cuda-host-ops LIST,
 * --cuda-explain, --cuda-conv-fusion on|off, --cuda-wide-copies on|off,
 * --cuda-overlap on|off, --cuda-row-kernels on|off) as
 * rows of an option table (ir/args.h) over pprt_cuda_config(). */
extern const pp_opt_table pprt_cuda_opts;

/* The device stage st runs on, among `count`: --devices LIST[i % n] (i: the
 * local rank under mpirun, else the stage index), else the plan's
 * placement, else i % count; a device past count is an error. */
pp_status pcu_pick_device(const pprt_stage *st, int local_rank, int count, int *dev, pp_err *err);


/* The device optimizer's flat layout (emu.c; both engines bind with it):
 * weight p from off[p] (out, [np]) on, each from a multiple of
 * PCU_OPTG_CHUNK, in *T elements (out) with the gaps; returns the OPTG
 * table (kmath.h pcu_optg_at) that the engine uploads: malloc'd, NULL when
 * out of memory. */
struct pprt_dopt_param;
int64_t *pprt_cuda_optg_layout(const struct pprt_dopt_param *ps, int np, int64_t *off, int64_t *T);
/* Queue stage x's steps on messages that are device buffers of its device,
 * without waiting for them (the executors' run() does this, then waits);
 * the emulator's "device" memory is host memory (mem_emu.c), run at once. */
pp_status pprt_cuda_emu_run_dev(struct pprt_exec *x, void *dev_in, void *dev_out, pp_err *err);
#ifdef PPRT_WITH_CUDA
extern const struct pprt_mem_ops pprt_mem_cuda;
pp_status pprt_cuda_run_dev(struct pprt_exec *x, const void *dev_in, void *dev_out, pp_err *err);
/* The GPU a device number is on (mem_cuda.c: PPRT_CUDA_ALIAS maps logical
 * devices onto the GPUs present; unset, itself). */
int pprt_cuda_phys(int dev);
#endif

/* ---- the CUDA module (module.h) ------------------------------------------------
 * pprt_cuda.so holds the GPU engine (exec_cuda.c, dnn.c, mem_cuda.c,
 * kernels.cu, comm/p2p_nccl.c, module_cuda.c) and links cudart, cuBLASLt,
 * cuDNN and NCCL; pprt links none of them. Its one exported symbol,
 * pprt_cuda_module_entry, returns this table; the registry's "cuda" row
 * (backend_cuda.c, in builds with PPRT_HAVE_CUDA_MODULE) stands in for the
 * module's until a stage or --backend asks for it. */
#define PPRT_CUDA_MODULE_FILE "pprt_cuda.so"
#define PPRT_CUDA_MODULE_ENV "PPRT_CUDA_MODULE"
#define PPRT_CUDA_MODULE_ENTRY "pprt_cuda_module_entry"

struct pprt_backend;
struct pprt_mpi;
struct pprt_p2p;
/* The sizes of what pprt and the module share, and the op count: a module
 * of another build (PPRT_CUDA_MODULE naming a stale one) is refused rather
 * than called with tables of another shape (needs backend.h). */
#define PPRT_CUDA_MODULE_LAYOUT                                                                                        \
    {(unsigned)sizeof(struct pprt_backend), (unsigned)sizeof(struct pprt_exec_ops),                                   \
     (unsigned)sizeof(struct pprt_mem_ops), (unsigned)sizeof(pprt_cuda_cfg), (unsigned)sizeof(pprt_stage),             \
     (unsigned)PP_OP_COUNT}
typedef struct pprt_cuda_module {
    int abi;                           /* PPRT_MODULE_ABI (module.h) it was built with */
    const char *version;               /* PPRT_VERSION it was built with */
    unsigned layout[6];                /* PPRT_CUDA_MODULE_LAYOUT it was built with */
    const struct pprt_backend *backend; /* the "cuda" row */
    /* "CUDA runtime 13.0, cuDNN 9.19.0, cuBLASLt 13.1.0, NCCL 2.28.3; driver ..." */
    void (*versions)(char *buf, size_t cap);
    /* NCCL between GPU stages on ranks (comm/p2p_nccl.c, engine.h's
     * pprt_nccl_id and pprt_nccl_open); NULL in a module built without MPI */
    pp_status (*nccl_id)(unsigned char *id, pp_err *err);
    pp_status (*nccl_open)(struct pprt_mpi *m, int peer, bool first, const unsigned char *id, int device,
                           struct pprt_p2p **out, pp_err *err);
} pprt_cuda_module;

/* In the module: its table. */
const pprt_cuda_module *pprt_cuda_module_entry(void);
/* In pprt: the module, loaded on the first call (thread-safe); NULL with
 * err naming the module's path and why when it cannot be loaded (the same
 * error on every later call). */
const pprt_cuda_module *pprt_cuda_module_get(pp_err *err);

#endif
