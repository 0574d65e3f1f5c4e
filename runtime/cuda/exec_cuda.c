/* exec_cuda.c: the CUDA engine (pprt --backend cuda): issues a stage's step
 * list (plan_cuda.c) on one GPU, on one stream of its own.
 *
 * NOT YET RUN ON A GPU (docs/cuda.md): it compiles and links here, where
 * every device call fails with cudaErrorInsufficientDriver, and the
 * emulator (emu.c) runs the same step list; tests/cuda/run_on_gpu.sh is what
 * checks this file the first day a GPU is lent.
 *
 * At create (on the stage's thread): the device the driver placed the stage
 * on (pprt_exec_cfg.device: the cuda space's pick, mem_cuda.c), a stream, the
 * spaces of cuplan.h but the messages as cudaMallocs, the weights through a pinned buffer,
 * every own kernel's parameter block in one device block, a cuDNN execution
 * plan per convolution step (the fused graph, else the convolution alone plus
 * the own epilogue kernel, else the host fallback) and a cuBLASLt algorithm
 * per product (else the host fallback). Engines are chosen by heuristics only
 * (cuDNN's first engine of mode A's list, then of the fallback list, that
 * passes the precision filter, cuBLASLt's
 * top result), with a fixed workspace, never by timing, so a split never
 * changes a bit on the same GPU.
 * Per micro-batch: the messages are device buffers of the stage's device
 * (the links, link/link.h, put them there and copy them on); the steps run
 * on them (replayed as a CUDA graph after the first micro-batch unless the
 * stage has host steps, --cuda-graphs off or --cuda-sync; one graph per pair
 * of message buffers, the cache sized from the buffers seen, gcache.h, so
 * no micro-batch captures again once each pair has been met), then the
 * stream is synchronized: the outgoing message is complete and the Gather
 * error flag known when run() returns (the links' ordering contract).
 * Every CUDA, cuDNN and cuBLASLt status is checked; a message names the
 * stage, the node, the call and the library's status text. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "../exec.h"
#include "cuda_backend.h"
#include "cuplan.h"
#include "dnn.h"
#include "early.h"
#include "gcache.h"

/* kernels.cu: launch own kernel `kind` (its row of kernels.def) over n threads; op: PCU_KERNEL_OPS operands. */
int pcu_launch(int kind, const void *param, void *const *op, int *err, long long n, int ptype, void *stream);

typedef struct dstep {
    void *param;               /* KERNEL: its parameter block in device memory */
    cudnnBackendDescriptor_t plan, vpack_desc;
    pcu_dnn dnn;
    pcu_epi epi;               /* CONV without its fused ops: the epilogue kernel's parameters */
    void *epi_param;
    cublasLtMatmulDesc_t mm;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    float sdpa_scale;          /* KERNEL FATTN on cuDNN's attention engine (plan set): its scale, by value */
    bool shared;               /* plan is an earlier step's (the same attention step's parameters): not ours */
} dstep;


struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    pcu_plan pl;
    int device;
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasLtHandle_t lt;
    unsigned char *mem[PCU_SP_COUNT];
    unsigned char *params;           /* the parameter blocks */
    unsigned char *wpin;             /* a training plan's pinned copy of the weight space, kept for reload */
    int *pin_err;
    /* --profile: an event before the first step and after each (no graphs then), each node's seconds */
    bool prof;
    cudaEvent_t *ev;
    double *node_s;
    dstep *ds;
    void **hptr;                     /* tensor id -> pinned host bytes of HOST steps */
    unsigned char *hbuf;
    pprt_scratch scratch;
    pprt_tensor tin[PP_MAX_INPUTS], tout[PP_MAX_OUTPUTS];
    pprt_precision precision;
    bool graphs, sync_each, has_host;
    pcu_gcache gc;                    /* the captured graphs, per pair of message buffers */
    int runs;
    pcu_counts counts;
    size_t uploaded;                  /* weight bytes uploaded so far (pprt_exec_counts.weight_upload_bytes) */
    /* the device optimizer (dopt.h): the weights this stage outputs the gradients of, flat in one device block */
    struct cu_dopt {
        int np, buffers;
        pprt_dopt_param *ps;
        int64_t *off;                 /* [np] each weight's first element in the flat buffers */
        int64_t T;                    /* the flat buffers' elements (a whole number of PCU_OPTG_CHUNK) */
        unsigned char *mem;           /* device: w g [m] [v] part sq tab, then the kernels' parameter blocks */
        float *w, *g, *m, *v;
        double *part, *sq;
        int64_t *tab;                 /* OPTG's table (kmath.h) */
        unsigned char *blk;           /* device: DOPT_BLOCKS parameter blocks */
        unsigned char *hblk;          /* host: their bytes, uploaded in one copy */
        bool first;
        int64_t *ftab;                /* OPTG's table of one weight spanning the flat buffer (FOLD_HELD) */
        bool hold;                    /* HOLD: the runs' gradients into held[] (dopt.h) */
        int n_held, cap_held;
        float **held;                 /* [cap_held] device: flat buffers of T, the gaps +0 */
        float *into;                  /* the run's fold: into the sums or its held buffer */
        bool into_a;                  /* the fold copies (the step's first run, a held run) */
        /* EARLY (early.h): the step's last run folds by bucket; per bucket an event behind its fold and three
         * parameter blocks (its fold copying, adding; FOLD_HELD's), and the chain's stream for FOLD_HELD */
        pcu_early early;
        int cap_b;
        cudaEvent_t *bev;
        unsigned char *bblk, *hbblk;  /* device, host: 3 cap_b blocks */
        cudaStream_t cs;
    } dopt;
};

enum { DOPT_FOLD_COPY, DOPT_FOLD_ADD, DOPT_SCALE, DOPT_SQ, DOPT_SUM, DOPT_CLIP, DOPT_OPT, DOPT_BLOCKS };
#define DOPT_BLK 256

/* ---- errors ------------------------------------------------------------------------------------ */

static pp_status cu_fail(pp_err *err, const pprt_exec *x, int node, const char *call, cudaError_t e) {
    /* no driver, no device: bad input for this machine (exit 2), with the driver's own words */
    const pp_status code = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInvalidDevice
                               ? PP_EUNSUP
                               : PP_ERUNTIME;
    const char *nn = node >= 0 ? x->st->nodes[node].name : "";
    return PP_FAIL(err, code, "%s%s%s%s: %s (%s)", node >= 0 ? "node '" : "", nn, node >= 0 ? "': " : "", call,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CU(x_, node, call)                                                                    \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) return cu_fail(err, (x_), (node), #call, e_);                  \
    } while (0)
#define DNN(x_, node, call)                                                                   \
    do {                                                                                      \
        cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                       \
            return PP_FAIL(err, PP_ERUNTIME, "node '%s': %s: %s", (x_)->st->nodes[node].name, #call, \
                           cudnnGetErrorString(s_));                                          \
    } while (0)
#define LT(x_, node, call)                                                                    \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return PP_FAIL(err, PP_ERUNTIME, "node '%s': %s: %s", (x_)->st->nodes[node].name, #call, \
                           cublasLtGetStatusString(s_));                                      \
    } while (0)

static void *dptr(pprt_exec *x, const pcu_ref *r) { return r->space < 0 ? NULL : x->mem[r->space] + r->off; }

/* ---- cuDNN: heuristics, plan ------------------------------------------------------------------ */

/* Whether convolution c's engine must be strict f32 (no down-converting, no
 * tensor-core engine): f32 tensors at --precision f32; a half plan's
 * convolution takes tensor cores. */
static bool dnn_strict(const pprt_exec *x, const pcu_conv *c) {
    return x->precision == PPRT_F32 && c->dt != PCU_T_F16 && c->dt != PCU_T_BF16;
}

/* One heuristic mode's engine for step d (pcu_dnn_choose: the executors'
 * filter, for this executor's device), said with --cuda-explain. */
static pp_status dnn_plan_mode(pprt_exec *x, int node, dstep *d, cudnnBackendHeurMode_t mode, pp_err *err) {
    pcu_dnn_pick k;
    pp_err e = {0};
    const bool strict = dnn_strict(x, &x->pl.steps[d - x->ds].u.conv);
    if (pcu_dnn_choose(&d->dnn, x->dnn, NULL, strict, mode, (int64_t)PCU_LIB_WORKSPACE, &k, &e) != PP_OK)
        return PP_WRAP(err, &e, e.code, "node '%s': %s", x->st->nodes[node].name, e.msg);
    d->plan = k.plan;
    if (pprt_cuda_config()->explain)
        fprintf(stderr, "pprt: cuda: stage %d node '%s': cuDNN %s graph%s, heuristics %s: %lld configs; %s engine %lld "
                "(config %lld, workspace %lld bytes); refused %d non-deterministic, %d reduced-precision, %d over the "
                "workspace, %d without a plan\n", x->st->index, x->st->nodes[node].name,
                d->dnn.fused ? "fused" : "convolution-alone", x->pl.steps[d - x->ds].u.conv.nhwc ? " (NHWC)" : "",
                mode == CUDNN_HEUR_MODE_A ? "A" : "fallback",
                (long long)k.configs, d->plan ? "took" : "no", (long long)k.gidx, (long long)k.took,
                (long long)k.workspace, k.refused[0], k.refused[1], k.refused[2], k.refused[3]);
    return PP_OK;
}

/* The tactic table of GPU `phys` (tactics.h): --cuda-tactics FILE's, else
 * (auto) the built-in table named by the GPU's name, compute capability and
 * cuDNN version, else NULL (off, or none for this GPU). *name says which. */
static const pcu_tactics *tactics_for(int phys, const char **name) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    enum { N = 64 };
    static struct {
        bool done;
        pcu_tactics t;
        char name[PCU_TACTIC_SIG];
    } dev[N];
    const pprt_cuda_cfg *cfg = pprt_cuda_config();
    *name = cfg->tactics_path;
    if (cfg->tactics == PPRT_TACTICS_OFF) return NULL;
    if (cfg->tactics == PPRT_TACTICS_FILE) return &cfg->tactics_file;
    if (phys < 0 || phys >= N) return NULL;
    pthread_mutex_lock(&mu);
    if (!dev[phys].done) {
        size_t len = 0;
        const char *text =
            pcu_dnn_gpu_stem(phys, dev[phys].name, sizeof dev[phys].name) ? pcu_tactics_builtin(dev[phys].name, &len)
                                                                           : NULL;
        pp_err e = {0};
        if (text && pcu_tactics_parse(text, len, dev[phys].name, &dev[phys].t, &e) != PP_OK)
            fprintf(stderr, "pprt: warning: the built-in %s\n", e.msg); /* test_tactics parses each in CI */
        dev[phys].done = true;
    }
    pthread_mutex_unlock(&mu);
    *name = dev[phys].name;
    return dev[phys].t.n ? &dev[phys].t : NULL;
}

/* Step c's engine from the tactic cache, said with --cuda-explain; d->plan
 * stays NULL where the table has no usable tactic for its signature. */
static pp_status dnn_plan_tactic(pprt_exec *x, int node, const pcu_conv *c, dstep *d, pp_err *err) {
    const char *name = "";
    const pcu_tactics *tab = tactics_for(pprt_cuda_phys(x->device), &name);
    const bool strict = dnn_strict(x, c);
    char sig[PCU_TACTIC_SIG];
    const pcu_tactic *t = tab && pcu_conv_signature(c, d->dnn.fused, strict, sig, sizeof sig)
                              ? pcu_tactics_find(tab, sig) : NULL;
    pcu_dnn_pick k = {0};
    pp_err e = {0};
    if (t && pcu_dnn_tactic(&d->dnn, x->dnn, NULL, strict, t, (int64_t)PCU_LIB_WORKSPACE, &k, &e) != PP_OK)
        return PP_WRAP(err, &e, e.code, "node '%s': %s", x->st->nodes[node].name, e.msg);
    d->plan = k.plan;
    if (pprt_cuda_config()->explain && tab)
        fprintf(stderr, "pprt: cuda: stage %d node '%s': tactic cache %s: %s engine %lld (%.1f us when tuned)%s\n",
                x->st->index, x->st->nodes[node].name, name, !t ? "no tactic for this signature, heuristics take it;"
                : d->plan ? "took" : "refused (heuristics take it):", t ? (long long)t->gidx : -1LL, t ? t->us : 0.0,
                t && !d->plan ? (k.refused[3] ? ", no plan" : ", not deterministic, strict or within the workspace")
                              : "");
    return PP_OK;
}

/* The tactic cache's engine, else mode A's list, then the fallback list (engines mode A may leave out). */
static pp_status dnn_plan(pprt_exec *x, int node, const pcu_conv *c, dstep *d, pp_err *err) {
    PP_TRY(dnn_plan_tactic(x, node, c, d, err));
    if (d->plan) return PP_OK;
    PP_TRY(dnn_plan_mode(x, node, d, CUDNN_HEUR_MODE_A, err));
    if (!d->plan) PP_TRY(dnn_plan_mode(x, node, d, CUDNN_HEUR_MODE_FALLBACK, err));
    if (!d->plan) return PP_FAIL(err, PP_EUNSUP, "no deterministic cuDNN engine for this graph at this precision");
    return PP_OK;
}

/* Execution plan `plan` of node `node` on this executor's stream over the n device pointers ptr[] of tensors
 * uid[] (a by-value scalar's: a host pointer), the library workspace; what: said after the call on failure */
static pp_status dnn_run(pprt_exec *x, int node, cudnnBackendDescriptor_t plan, int n, void **ptr, const int64_t *uid,
                         const char *what, pp_err *err) {
    cudnnBackendDescriptor_t vp;
    void *ws = x->mem[PCU_SP_WORK] + PCU_WORK_LIB;
    DNN(x, node, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    cudnnStatus_t st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptr);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uid);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(x->dnn, plan, vp);
    cudnnBackendDestroyDescriptor(vp);
    if (st != CUDNN_STATUS_SUCCESS)
        return PP_FAIL(err, PP_ERUNTIME, "node '%s': cudnnBackendExecute%s: %s", x->st->nodes[node].name, what,
                       cudnnGetErrorString(st));
    return PP_OK;
}

static pp_status dnn_exec(pprt_exec *x, const pcu_step *s, dstep *d, pp_err *err) {
    void *ptr[5];
    int64_t uid[5];
    int n = 0;
    const pcu_conv *c = &s->u.conv;
    ptr[n] = dptr(x, &s->ops[0]), uid[n++] = PCU_UID_X;
    ptr[n] = dptr(x, &s->ops[1]), uid[n++] = PCU_UID_W;
    ptr[n] = dptr(x, &s->ops[4]), uid[n++] = PCU_UID_Y;
    if (d->dnn.fused && c->has_bias) ptr[n] = dptr(x, &s->ops[2]), uid[n++] = PCU_UID_B;
    if (d->dnn.fused && c->has_res) ptr[n] = dptr(x, &s->ops[3]), uid[n++] = PCU_UID_R;
    PP_TRY(dnn_run(x, s->node, d->plan, n, ptr, uid, "", err));
    /* the epilogue wherever the graph does not hold it: the convolution alone
     * after a fused graph found no engine, and every ConvTranspose (backward
     * data graphs are never fused; on an H200 a ConvTranspose's bias was lost
     * while this tested the mode instead) */
    if (pcu_conv_epilogue(c, d->dnn.fused)) {
        void *op[PCU_KERNEL_OPS] = {dptr(x, &s->ops[4]), dptr(x, &s->ops[2]), dptr(x, &s->ops[3])};
        CU(x, s->node, (cudaError_t)pcu_launch(PCU_K_EPI, d->epi_param, op, NULL, d->epi.n, PP_F32, x->stream));
    }
    return PP_OK;
}

/* ---- cuDNN's fused attention (--cuda-sdpa) ---------------------------------------------------------- */

/* A half plan's fused attention step s on cuDNN's fused-attention engine (dnn.h pcu_dnn_sdpa) where its shape
 * fits, its operands start 16 bytes apart and an engine (deterministic, within the workspace) takes the graph:
 * d->plan set; else d->plan NULL and the step launches pprt's kernel. Said with --cuda-explain. */
static void sdpa_plan(pprt_exec *x, const pcu_step *s, dstep *d) {
    const pcu_fattn *k = &s->u.fa;
    pp_err e = {0};
    pcu_dnn_pick pk = {0};
    const char *why = pcu_sdpa_unfit(k);
    for (int q = 0; q < 4 + k->mask && !why; q++)
        if (s->ops[q].off % 16) why = "an operand not at a 16-byte offset";
    d->sdpa_scale = pcu_sdpa_scale(k);
    /* an earlier step of the same parameters (ViT's 12 layers) lends its plan: one graph, one engine choice
     * and, where cuDNN compiles the engine at run time, one compilation; the operands differ in address only */
    for (const pcu_step *o = x->pl.steps; o < s && !why; o++)
        if (o->kind == PCU_S_KERNEL && o->kernel == PCU_K_FATTN && x->ds[o - x->pl.steps].plan &&
            !memcmp(&o->u.fa, k, sizeof *k)) {
            d->plan = x->ds[o - x->pl.steps].plan, d->shared = true;
            if (pprt_cuda_config()->explain)
                fprintf(stderr, "pprt: cuda: stage %d node '%s': attention on cuDNN's fused-attention engine (node "
                        "'%s''s plan)\n", x->st->index, x->st->nodes[s->node].name, x->st->nodes[o->node].name);
            return;
        }
    if (!why && pcu_dnn_sdpa(k, x->dnn, &d->dnn, &e) != PP_OK) why = e.msg;
    if (!why && pcu_dnn_choose_any(&d->dnn, x->dnn, NULL, false, (int64_t)PCU_LIB_WORKSPACE, &pk, &e) != PP_OK)
        why = e.msg;
    if (!why && !pk.plan) why = "no engine took the graph";
    d->plan = why ? NULL : pk.plan;
    if (why) pcu_dnn_free(&d->dnn);
    if (pprt_cuda_config()->explain)
        fprintf(stderr, "pprt: cuda: stage %d node '%s': attention on %s%s (%lld configs; engine %lld, workspace %lld "
                "bytes; refused %d non-deterministic, %d over the workspace, %d without a plan)\n", x->st->index,
                x->st->nodes[s->node].name, why ? "pprt's kernel: cuDNN's " : "cuDNN's fused-attention engine",
                why ? why : "", (long long)pk.configs, (long long)pk.gidx, (long long)pk.workspace, pk.refused[0],
                pk.refused[2], pk.refused[3]);
}

static pp_status sdpa_exec(pprt_exec *x, const pcu_step *s, dstep *d, pp_err *err) {
    void *ptr[6] = {dptr(x, &s->ops[0]), dptr(x, &s->ops[1]), dptr(x, &s->ops[2]), dptr(x, &s->ops[3]),
                    &d->sdpa_scale, s->u.fa.mask ? dptr(x, &s->ops[4]) : NULL};
    int64_t uid[6] = {PCU_UID_Q, PCU_UID_K, PCU_UID_V, PCU_UID_O, PCU_UID_SCALE, PCU_UID_BIAS};
    return dnn_run(x, s->node, d->plan, 5 + s->u.fa.mask, ptr, uid, " (fused attention)", err);
}

/* ---- cuBLASLt -------------------------------------------------------------------------------------- */

/* a product's matrices' type: f32, or a half plan's 16F / 16BF (ppcc --precision) */
static cudaDataType_t lt_type(const pcu_mm *m) {
    return m->dt == PCU_T_F16 ? CUDA_R_16F : m->dt == PCU_T_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static pp_status lt_layout(pprt_exec *x, int node, cublasLtMatrixLayout_t *l, cudaDataType_t type, int64_t rows,
                           int64_t cols, int64_t ld, int64_t batch, int64_t stride, pp_err *err) {
    LT(x, node, cublasLtMatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, ld));
    int32_t b = (int32_t)batch;
    LT(x, node, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    LT(x, node, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return PP_OK;
}

static pp_status lt_plan(pprt_exec *x, const pcu_step *s, dstep *d, pp_err *err) {
    const pcu_mm *m = &s->u.mm;
    const int node = s->node;
    const cudaDataType_t type = lt_type(m);
    /* half matrices (a half plan): compute 32F, tensor cores on the half values, f32 sums; f32 ones: pprt
     * --precision's compute type */
    const cublasComputeType_t ct = type != CUDA_R_32F ? CUBLAS_COMPUTE_32F
                                   : x->precision == PPRT_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                   : x->precision == PPRT_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                   : x->precision == PPRT_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                               : CUBLAS_COMPUTE_32F;
    LT(x, node, cublasLtMatmulDescCreate(&d->mm, ct, CUDA_R_32F));
    cublasOperation_t ta = m->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = m->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(x, node, cublasLtMatmulDescSetAttribute(d->mm, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(x, node, cublasLtMatmulDescSetAttribute(d->mm, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (m->bias || m->relu) {
        cublasLtEpilogue_t ep = m->bias && m->relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                : m->bias          ? CUBLASLT_EPILOGUE_BIAS
                                                   : CUBLASLT_EPILOGUE_RELU;
        LT(x, node, cublasLtMatmulDescSetAttribute(d->mm, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        if (m->bias) {
            const void *bias = dptr(x, &s->ops[4]);
            LT(x, node, cublasLtMatmulDescSetAttribute(d->mm, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        }
    }
    /* (a bias epilogue's vector is of D's type by default: the half plan's bias is half) */
    PP_TRY(lt_layout(x, node, &d->la, type, m->transa ? m->k : m->m, m->transa ? m->m : m->k, m->lda, m->batch, m->sa,
                     err));
    PP_TRY(lt_layout(x, node, &d->lb, type, m->transb ? m->n : m->k, m->transb ? m->k : m->n, m->ldb, m->batch, m->sb,
                     err));
    PP_TRY(lt_layout(x, node, &d->lc, type, m->m, m->n, m->ldc, m->batch, m->sc, err));
    cublasLtMatmulPreference_t pref;
    LT(x, node, cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = PCU_LIB_WORKSPACE;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int q = 0; q < 2 && st == CUBLAS_STATUS_SUCCESS; q++) {
        /* a folded view starts inside its source: tell the heuristics how its pointer is aligned (the
         * default assumes 256 bytes); the messages' bases are 16-byte aligned (pcu_check_msgs) */
        if (!(m->views >> q & 1)) continue;
        const pcu_ref *r = &s->ops[q];
        uint32_t al = r->space == PCU_SP_IN || r->space == PCU_SP_OUT ? 16 : 256;
        while (al > 4 && r->off % al) al /= 2;
        st = cublasLtMatmulPreferenceSetAttribute(pref, q ? CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES
                                                          : CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(x->lt, d->mm, d->la, d->lb, d->lc, d->lc, pref, 1, &res, &got);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || got < 1)
        return PP_FAIL(err, PP_EUNSUP, "node '%s': cublasLtMatmulAlgoGetHeuristic: %s", x->st->nodes[node].name,
                       got < 1 && st == CUBLAS_STATUS_SUCCESS ? "no algorithm" : cublasLtGetStatusString(st));
    d->algo = res.algo;
    if (pprt_cuda_config()->explain) {
        uint32_t id = 0, tile = 0;
        size_t w = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
        fprintf(stderr, "pprt: cuda: stage %d node '%s': cuBLASLt %lld x %lld x %lld (batch %lld), compute %s, "
                "%s, epilogue %s%s%s: algorithm %u, tile %u, workspace %zu bytes, waves %.2f\n", x->st->index,
                x->st->nodes[node].name, (long long)m->m, (long long)m->n, (long long)m->k, (long long)m->batch,
                ct == CUBLAS_COMPUTE_32F_FAST_TF32 ? "32F_FAST_TF32" : ct == CUBLAS_COMPUTE_32F_FAST_16BF ? "32F_FAST_16BF"
                : ct == CUBLAS_COMPUTE_32F_FAST_16F ? "32F_FAST_16F" : "32F",
                type == CUDA_R_16F ? "16F matrices" : type == CUDA_R_16BF ? "16BF matrices" : "32F matrices", m->bias ? "bias" : "none", m->relu ? "+relu" : "",
                m->views == 3 ? ", A and B folded views" : m->views ? (m->views == 1 ? ", A a folded view" : ", B a folded view") : "",
                id, tile, res.workspaceSize, (double)res.wavesCount);
    }
    return PP_OK;
}

static pp_status lt_exec(pprt_exec *x, const pcu_step *s, dstep *d, pp_err *err) {
    const pcu_mm *m = &s->u.mm;
    const float beta = m->has_c ? m->beta : 0.0f;
    void *D = dptr(x, &s->ops[3]);
    const void *C = m->has_c ? dptr(x, &s->ops[2]) : D;
    LT(x, s->node, cublasLtMatmul(x->lt, d->mm, &m->alpha, dptr(x, &s->ops[0]), d->la, dptr(x, &s->ops[1]), d->lb, &beta,
                                  C, d->lc, D, d->lc, &d->algo, x->mem[PCU_SP_WORK] + PCU_WORK_LIB, PCU_LIB_WORKSPACE,
                                  x->stream));
    return PP_OK;
}

/* ---- host fallback ------------------------------------------------------------------------------------ */

static pp_status host_exec(pprt_exec *x, const pcu_step *s, pp_err *err) {
    const pprt_node *n = &x->st->nodes[s->node];
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0)
            CU(x, s->node, cudaMemcpyAsync(x->hptr[n->in[k]], dptr(x, &s->ops[k]), s->ops[k].bytes,
                                           cudaMemcpyDeviceToHost, x->stream));
    CU(x, s->node, cudaStreamSynchronize(x->stream));
    PP_TRY(pprt_ref_node(x->p, x->st, n, x->hptr, x->tin, x->tout, &x->scratch, err));
    for (int k = 0; k < n->n_out; k++)
        CU(x, s->node, cudaMemcpyAsync(dptr(x, &s->ops[n->n_in + k]), x->hptr[n->out[k]], s->ops[n->n_in + k].bytes,
                                       cudaMemcpyHostToDevice, x->stream));
    return PP_OK;
}

/* ---- create ----------------------------------------------------------------------------------------------- */

/* What create_steps() made: the step list and everything sized by it. */
static void release_steps(pprt_exec *x) {
    for (int i = 0; x->ds && i < x->pl.n_steps; i++) {
        dstep *d = &x->ds[i];
        if (d->plan && !d->shared) cudnnBackendDestroyDescriptor(d->plan);
        pcu_dnn_free(&d->dnn);
        if (d->mm) cublasLtMatmulDescDestroy(d->mm);
        if (d->la) cublasLtMatrixLayoutDestroy(d->la);
        if (d->lb) cublasLtMatrixLayoutDestroy(d->lb);
        if (d->lc) cublasLtMatrixLayoutDestroy(d->lc);
    }
    for (int i = 0; i < PCU_SP_COUNT; i++) {
        if (i != PCU_SP_IN && i != PCU_SP_OUT) cudaFree(x->mem[i]); /* the messages are the links' */
        x->mem[i] = NULL;
    }
    cudaFree(x->params);
    cudaFreeHost(x->pin_err);
    cudaFreeHost(x->hbuf);
    cudaFreeHost(x->wpin);
    x->wpin = NULL;
    pcu_plan_free(&x->pl);
    free(x->ds);
    free(x->hptr);
    x->params = NULL, x->pin_err = NULL, x->hbuf = NULL, x->ds = NULL, x->hptr = NULL;
    x->has_host = false;
}

static void graph_destroy(void *g) { cudaGraphExecDestroy((cudaGraphExec_t)g); }

static void cuda_destroy(pprt_exec *x) {
    if (!x) return;
    if (x->stream) cudaStreamSynchronize(x->stream);
    pcu_gcache_free(&x->gc, graph_destroy);
    for (int i = 0; x->ev && i <= x->pl.n_steps; i++)
        if (x->ev[i]) cudaEventDestroy(x->ev[i]);
    free(x->ev);
    free(x->node_s);
    release_steps(x);
    if (x->lt) cublasLtDestroy(x->lt);
    if (x->dnn) cudnnDestroy(x->dnn);
    if (x->stream) cudaStreamDestroy(x->stream);
    pprt_scratch_free(&x->scratch);
    cudaFree(x->dopt.mem);
    for (int i = 0; i < x->dopt.cap_held; i++) cudaFree(x->dopt.held[i]);
    free(x->dopt.ps), free(x->dopt.off), free(x->dopt.hblk), free(x->dopt.held);
    for (int b = 0; b < x->dopt.cap_b; b++) cudaEventDestroy(x->dopt.bev[b]);
    if (x->dopt.cs) cudaStreamDestroy(x->dopt.cs);
    cudaFree(x->dopt.bblk);
    free(x->dopt.bev), free(x->dopt.hbblk);
    pcu_early_free(&x->dopt.early);
    free(x);
}

static pp_status create_steps(pprt_exec *x, unsigned char *hn, int *failed, pp_err *err);

static pp_status create_in(pprt_exec *x, pp_err *err) {
    const pprt_stage *st = x->st;
    CU(x, -1, cudaSetDevice(pprt_cuda_phys(x->device)));
    CU(x, -1, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    cudnnStatus_t ds = cudnnCreate(&x->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) return PP_FAIL(err, PP_ERUNTIME, "cudnnCreate: %s", cudnnGetErrorString(ds));
    if ((ds = cudnnSetStream(x->dnn, x->stream)) != CUDNN_STATUS_SUCCESS)
        return PP_FAIL(err, PP_ERUNTIME, "cudnnSetStream: %s", cudnnGetErrorString(ds));
    cublasStatus_t ls = cublasLtCreate(&x->lt);
    if (ls != CUBLAS_STATUS_SUCCESS) return PP_FAIL(err, PP_ERUNTIME, "cublasLtCreate: %s", cublasLtGetStatusString(ls));
    /* A convolution or product for which cuDNN or cuBLASLt has no engine goes
     * to the host: its node becomes a HOST step and the stage is planned
     * again (a HOST step's operands are its node's tensors, which a library
     * step's fixed operand slots are not; a product that had absorbed a bias
     * Add hands it back to its own kernel). A second round has nothing new to
     * fail: the steps it keeps are the ones that found engines. */
    unsigned char *hn = pprt_cuda_host_nodes(st);
    if (!hn) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = PP_OK;
    for (int round = 0; s == PP_OK; round++) {
        int failed = 0;
        s = create_steps(x, hn, &failed, err);
        if (s != PP_OK || !failed) break;
        release_steps(x);
        if (round == 1)
            s = PP_FAIL(err, PP_ERUNTIME, "stage %d: %d steps found no library engine after a replanning "
                        "(internal)", st->index, failed);
    }
    free(hn);
    return s;
}

/* The weight space from the weights' host bytes, through one pinned buffer
 * (at create, and again at reload). A training plan's executor keeps the
 * buffer for its reloads (each step's: pinning 100 MB anew costs
 * milliseconds); an inference plan's uploads once and frees it. */
static pp_status upload_weights(pprt_exec *x, bool again, pp_err *err) {
    const pprt_stage *st = x->st;
    if (!x->pl.bytes[PCU_SP_WEIGHTS]) return PP_OK;
    unsigned char *pin = x->wpin;
    if (!pin) CU(x, -1, cudaMallocHost((void **)&pin, x->pl.bytes[PCU_SP_WEIGHTS]));
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < st->n_tensors; i++) {
        const pprt_tdesc *t = &st->t[i];
        if (t->kind != PPRT_WEIGHT) continue;
        pcu_weight_put(&x->pl, i, pin + x->pl.woff[i], t->data);
        /* a reload: only the weights that vary and no device optimizer keeps (dopt.h), each its own copy */
        if (!again || !t->varies || t->resident || e != cudaSuccess) continue;
        e = cudaMemcpyAsync(x->mem[PCU_SP_WEIGHTS] + x->pl.woff[i], pin + x->pl.woff[i], t->nbytes,
                            cudaMemcpyHostToDevice, x->stream);
        x->uploaded += t->nbytes;
    }
    if (!again && e == cudaSuccess) {
        e = cudaMemcpyAsync(x->mem[PCU_SP_WEIGHTS], pin, x->pl.bytes[PCU_SP_WEIGHTS], cudaMemcpyHostToDevice, x->stream);
        x->uploaded += x->pl.bytes[PCU_SP_WEIGHTS];
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(x->stream);
    if (x->p->train_devices > 0) x->wpin = pin;
    else cudaFreeHost(pin);
    if (e != cudaSuccess) return cu_fail(err, x, -1, "uploading the weights", e);
    return PP_OK;
}

/* exec.h's reload: the weight space uploaded again; the plans, the device
 * spaces and the captured graphs kept (they read device addresses that do
 * not move). A plan that folded a varying weight's value into a step's
 * parameters refuses: a fresh executor plans again. */
static pp_status cuda_reload(pprt_exec *x, unsigned long version, pp_err *err) {
    (void)version;
    if (x->pl.folds_varying)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: a step's parameters hold a trained weight's value", x->st->index);
    CU(x, -1, cudaSetDevice(pprt_cuda_phys(x->device)));
    return upload_weights(x, true, err);
}

static pp_status create_steps(pprt_exec *x, unsigned char *hn, int *failed, pp_err *err) {
    const pprt_stage *st = x->st;
    PP_TRY(pprt_cuda_plan_stage(x->p, st, hn, &x->pl, err));
    x->counts = x->pl.counts;
    /* the spaces but the messages (bound per run to the links' buffers) */
    for (int i = 0; i < PCU_SP_COUNT; i++)
        if (i != PCU_SP_IN && i != PCU_SP_OUT)
            CU(x, -1, cudaMalloc((void **)&x->mem[i], x->pl.bytes[i] ? x->pl.bytes[i] : 256));
    CU(x, -1, cudaMallocHost((void **)&x->pin_err, sizeof(int)));
    PP_TRY(upload_weights(x, false, err)); /* the weights, through one pinned buffer */
    /* parameter blocks, one device block */
    x->ds = calloc(pp_count(x->pl.n_steps), sizeof *x->ds);
    if (!x->ds) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    size_t pbytes = 0;
    for (int i = 0; i < x->pl.n_steps; i++)
        pbytes += x->pl.steps[i].kind == PCU_S_KERNEL || x->pl.steps[i].kind == PCU_S_CONV ? 256 + sizeof x->pl.steps[i].u : 0;
    unsigned char *hp = calloc(1, pbytes + 256);
    if (!hp) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    cudaError_t e = cudaMalloc((void **)&x->params, pbytes + 256);
    size_t at = 0;
    for (int i = 0; i < x->pl.n_steps && e == cudaSuccess; i++) {
        pcu_step *s = &x->pl.steps[i];
        dstep *d = &x->ds[i];
        pp_err e2 = {0};
        bool no_engine = false; /* a library step without an engine: its node goes to the host */
        if (s->kind == PCU_S_KERNEL) {
            memcpy(hp + at, &s->u, pcu_kernel_param_bytes(s->kernel));
            d->param = x->params + at;
            at += pp_align_up(pcu_kernel_param_bytes(s->kernel), 256);
            if (s->kernel == PCU_K_FATTN && pprt_cuda_config()->sdpa &&
                (s->u.fa.t == PCU_T_F16 || s->u.fa.t == PCU_T_BF16))
                sdpa_plan(x, s, d);
        } else if (s->kind == PCU_S_CONV) {
            /* the fused graph, else the convolution alone and the epilogue kernel, else the host */
            const pcu_conv *c = &s->u.conv;
            d->epi = pcu_conv_epi(c);
            memcpy(hp + at, &d->epi, sizeof d->epi);
            d->epi_param = x->params + at;
            at += pp_align_up(sizeof d->epi, 256);
            const bool fuse = pprt_cuda_config()->conv_fusion || s->conv_fuse; /* conv_fuse: a half route's bias */
            if (!fuse || pcu_dnn_conv(c, true, x->dnn, &d->dnn, &e2) != PP_OK ||
                dnn_plan(x, s->node, c, d, &e2) != PP_OK) {
                pcu_dnn_free(&d->dnn);
                if (pcu_dnn_conv(c, false, x->dnn, &d->dnn, &e2) != PP_OK || dnn_plan(x, s->node, c, d, &e2) != PP_OK) {
                    pcu_dnn_free(&d->dnn);
                    no_engine = true;
                }
            }
        } else if (s->kind == PCU_S_MATMUL) {
            no_engine = lt_plan(x, s, d, &e2) != PP_OK;
        }
        if (no_engine) { /* create_in() plans again with this node on the host */
            fprintf(stderr, "pprt: warning: stage %d node '%s': %s; it runs on the host\n", st->index,
                    st->nodes[s->node].name, e2.msg);
            hn[s->node] = 1;
            ++*failed;
        }
        x->has_host = x->has_host || s->kind == PCU_S_HOST;
    }
    if (e == cudaSuccess) e = cudaMemcpy(x->params, hp, at ? at : 1, cudaMemcpyHostToDevice);
    free(hp);
    if (e != cudaSuccess) return cu_fail(err, x, -1, "uploading the kernel parameters", e);
    /* pinned host copies of every tensor a host step touches */
    size_t hb = 0;
    for (int i = 0; i < st->n_tensors; i++) hb += pp_align_up(st->t[i].nbytes, 64);
    x->hptr = calloc(pp_count(st->n_tensors), sizeof *x->hptr);
    if (!x->hptr) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (x->has_host) {
        CU(x, -1, cudaMallocHost((void **)&x->hbuf, hb ? hb : 64));
        for (int i = 0, o = 0; i < st->n_tensors; i++) {
            x->hptr[i] = x->hbuf + o;
            o += (int)pp_align_up(st->t[i].nbytes, 64);
        }
    }
    return PP_OK;
}

static pp_status cuda_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *ecfg, pprt_exec **out,
                             pp_err *err) {
    PP_TRY(pprt_stage_weights(p, st->index, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *x = (pprt_exec){.p = p, .st = st, .precision = pcu_products_precision(p, ecfg->precision), .device = ecfg->device};
    if (x->device < 0) {
        free(x);
        return PP_FAIL(err, PP_ERUNTIME, "stage %d: the cuda executor runs on device messages, and the driver gave it "
                       "host ones (internal: the backend's memory space was not used)", st->index);
    }
    x->graphs = pprt_cuda_config()->graphs;
    x->sync_each = pprt_cuda_config()->sync_each;
    pp_status s = create_in(x, err);
    if (s != PP_OK) {
        cuda_destroy(x);
        return s;
    }
    if (!ecfg->quiet && !pprt_cuda_config()->host_only) pcu_plan_explain(&x->pl, "cuda", stderr);
    if (pprt_cuda_config()->explain) pcu_plan_explain_kernels(&x->pl, "cuda", stderr);
    if (ecfg->node_times) { /* the events every run records (pprt --profile) */
        x->prof = true;
        x->ev = calloc(pp_count(x->pl.n_steps + 1), sizeof *x->ev);
        x->node_s = calloc(pp_count(st->n_nodes), sizeof *x->node_s);
        cudaError_t e = x->ev && x->node_s ? cudaSuccess : cudaErrorMemoryAllocation;
        for (int i = 0; e == cudaSuccess && i <= x->pl.n_steps; i++) e = cudaEventCreate(&x->ev[i]);
        if (e != cudaSuccess) {
            s = cu_fail(err, x, -1, "cudaEventCreate (--profile)", e);
            cuda_destroy(x);
            return s;
        }
    }
    *out = x;
    return PP_OK;
}

/* ---- run ---------------------------------------------------------------------------------------------------- */

static pp_status early_after(pprt_exec *x, int i, pp_err *err);

static pp_status issue(pprt_exec *x, pp_err *err) {
    int *ew = (int *)(x->mem[PCU_SP_WORK] + PCU_WORK_ERR);
    const bool early = x->dopt.early.on; /* never under capture (pprt_cuda_run_dev) */
    CU(x, -1, cudaMemsetAsync(ew, 0, sizeof(int), x->stream));
    if (x->prof) CU(x, -1, cudaEventRecord(x->ev[0], x->stream));
    if (early) PP_TRY(early_after(x, -1, err));
    for (int i = 0; i < x->pl.n_steps; i++) {
        const pcu_step *s = &x->pl.steps[i];
        dstep *d = &x->ds[i];
        if (x->prof && i) CU(x, s->node, cudaEventRecord(x->ev[i], x->stream));
        if (s->kind == PCU_S_HOST) {
            PP_TRY(host_exec(x, s, err));
        } else if (s->kind == PCU_S_KERNEL && d->plan) { /* fused attention on cuDNN's engine */
            PP_TRY(sdpa_exec(x, s, d, err));
        } else if (s->kind == PCU_S_KERNEL) {
            void *op[PCU_KERNEL_OPS] = {NULL};
            for (int k = 0; k < s->n_ops && k < PCU_KERNEL_OPS; k++) op[k] = dptr(x, &s->ops[k]);
            CU(x, s->node, (cudaError_t)pcu_launch(s->kernel, d->param, op, ew, s->threads, s->ptype, x->stream));
        } else if (s->kind == PCU_S_CONV) {
            PP_TRY(dnn_exec(x, s, d, err));
        } else if (s->kind == PCU_S_MATMUL) {
            PP_TRY(lt_exec(x, s, d, err));
        } else {
            CU(x, s->node, cudaMemcpyAsync(dptr(x, &s->ops[1]), dptr(x, &s->ops[0]), s->ops[0].bytes,
                                           cudaMemcpyDeviceToDevice, x->stream));
        }
        if (x->sync_each) CU(x, s->node, cudaStreamSynchronize(x->stream));
        if (early) PP_TRY(early_after(x, i, err));
    }
    if (x->prof) CU(x, -1, cudaEventRecord(x->ev[x->pl.n_steps], x->stream));
    CU(x, -1, cudaMemcpyAsync(x->pin_err, ew, sizeof(int), cudaMemcpyDeviceToHost, x->stream));
    return PP_OK;
}

pp_status pprt_cuda_run_dev(pprt_exec *x, const void *dev_in, void *dev_out, pp_err *err) {
    CU(x, -1, cudaSetDevice(pprt_cuda_phys(x->device)));
    PP_TRY(pcu_check_msgs(x->st->index, dev_in, dev_out, err));
    x->mem[PCU_SP_IN] = (unsigned char *)dev_in; /* the links' buffers */
    x->mem[PCU_SP_OUT] = dev_out;
    /* the step's last run under EARLY launches its steps with the buckets' folds and events between them */
    const bool graph = x->graphs && !x->has_host && !x->sync_each && !x->prof && x->runs > 0 && !x->dopt.early.on;
    cudaGraphExec_t ge = graph ? (cudaGraphExec_t)pcu_gcache_find(&x->gc, dev_in, dev_out) : NULL;
    cudaGraphExec_t drop = NULL;
    if (graph && !ge) {
        /* a new pair of buffers: capture it (gcache.h sizes the cache from the buffers seen) */
        cudaGraph_t g;
        CU(x, -1, cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
        pp_status s = issue(x, err);
        cudaError_t e = cudaStreamEndCapture(x->stream, &g);
        if (s != PP_OK) return s;
        if (e != cudaSuccess) return cu_fail(err, x, -1, "cudaStreamEndCapture", e);
        e = cudaGraphInstantiate(&ge, g, 0);
        cudaGraphDestroy(g);
        if (e != cudaSuccess) return cu_fail(err, x, -1, "cudaGraphInstantiate", e);
        void *out = NULL;
        pcu_gcache_put(&x->gc, dev_in, dev_out, ge, &out);
        drop = (cudaGraphExec_t)out; /* the least recently used (or this one, not kept) */
        if (drop && drop != ge) {
            cudaGraphExecDestroy(drop); /* not running: every run synchronizes before the next */
            drop = NULL;
        }
    }
    if (ge) CU(x, -1, cudaGraphLaunch(ge, x->stream));
    else PP_TRY(issue(x, err));
    if (drop) { /* a graph the cache could not keep: after its launch completes */
        CU(x, -1, cudaStreamSynchronize(x->stream));
        cudaGraphExecDestroy(drop);
    }
    x->runs++;
    return PP_OK;
}

/* ---- the device optimizer (dopt.h) -------------------------------------------------------------------------- */

/* OPTG of parameter block blk over n threads, into g (the sums, a held buffer) from msg, by table tab. */
static pp_status dopt_optg_at(pprt_exec *x, int blk, int64_t n, float *g, const void *msg, const int64_t *tab,
                              pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    void *op[PCU_KERNEL_OPS] = {g, (void *)msg, d->part, (void *)tab, d->sq};
    CU(x, -1, (cudaError_t)pcu_launch(PCU_K_OPTG, d->blk + (size_t)blk * DOPT_BLK, op, NULL, n, 0, x->stream));
    return PP_OK;
}

static pp_status dopt_optg(pprt_exec *x, int blk, int64_t n, const void *msg, pp_err *err) {
    return dopt_optg_at(x, blk, n, x->dopt.g, msg, x->dopt.tab, err);
}

/* Where a run's gradients go (before its steps): the sums, the step's first copied, the later ones added; under
 * HOLD a held buffer of their own, copied (counted before any bucket is ready: early.h). */
static pp_status dopt_target(pprt_exec *x, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    d->into = d->g, d->into_a = d->first || d->hold;
    if (d->hold) {
        if (d->n_held == d->cap_held) {
            float **h = realloc(d->held, (size_t)(d->cap_held + 1) * sizeof *h);
            if (!h) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            d->held = h, h[d->cap_held] = NULL;
            CU(x, -1, cudaMalloc((void **)&h[d->cap_held], (size_t)d->T * sizeof(float)));
            d->cap_held++;
            CU(x, -1, cudaMemsetAsync(h[d->cap_held - 1], 0, (size_t)d->T * sizeof(float), x->stream));
        }
        d->into = d->held[d->n_held++];
    }
    if (!d->hold) d->first = false;
    return PP_OK;
}

/* The buckets whose last step is i (-1: before the first) folded on the stream behind it (OPTG FOLD over the
 * bucket's elements), an event recorded behind each, each then ready (early.h). */
static pp_status early_after(pprt_exec *x, int i, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    for (int b = 0; b < d->early.n; b++) {
        if (d->early.after[b] != i) continue;
        void *op[PCU_KERNEL_OPS] = {d->into, x->mem[PCU_SP_OUT], d->part, d->tab, d->sq};
        const unsigned char *blk = d->bblk + (size_t)(3 * b + (d->into_a ? 0 : 1)) * DOPT_BLK;
        CU(x, -1, (cudaError_t)pcu_launch(PCU_K_OPTG, blk, op, NULL, d->early.bound[b + 1] - d->early.bound[b], 0,
                                          x->stream));
        CU(x, -1, cudaEventRecord(d->bev[b], x->stream));
        pcu_early_ready(&d->early, b);
    }
    return PP_OK;
}

/* EARLY: the buckets armed (early.h); where they changed (the first step), their events and parameter blocks
 * made where there are more than before and the blocks uploaded (the stream is idle between runs); the chain's
 * stream made once. */
static pp_status dopt_early(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    bool changed;
    c->addr = d->g, c->device = x->device, c->sums_bytes = (size_t)d->T * sizeof(float);
    PP_TRY(pcu_early_arm(&d->early, &x->pl, d->ps, d->off, d->np, d->T, c, x->st->index, &changed, err));
    const int n = d->early.n;
    if (!d->cs) CU(x, -1, cudaStreamCreateWithFlags(&d->cs, cudaStreamNonBlocking));
    if (!changed) return PP_OK;
    if (n > d->cap_b) {
        cudaEvent_t *ev = realloc(d->bev, (size_t)n * sizeof *ev);
        if (!ev) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        d->bev = ev;
        for (; d->cap_b < n; d->cap_b++) CU(x, -1, cudaEventCreateWithFlags(&ev[d->cap_b], cudaEventDisableTiming));
        free(d->hbblk);
        cudaFree(d->bblk);
        d->bblk = NULL;
        if (!(d->hbblk = calloc((size_t)3 * n, DOPT_BLK))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        CU(x, -1, cudaMalloc((void **)&d->bblk, (size_t)3 * n * DOPT_BLK));
    }
    for (int b = 0; b < n; b++) {
        const int64_t lo = d->early.bound[b], m = d->early.bound[b + 1] - lo;
        const pcu_optg k[3] = {
            {.mode = PCU_OPTG_FOLD, .has_a = 1, .n = m, .np = d->np, .chunks = d->T / PCU_OPTG_CHUNK, .lo = lo},
            {.mode = PCU_OPTG_FOLD, .has_a = 0, .n = m, .np = d->np, .chunks = d->T / PCU_OPTG_CHUNK, .lo = lo},
            {.mode = PCU_OPTG_FOLD, .n = m, .np = 1, .chunks = (m + PCU_OPTG_CHUNK - 1) / PCU_OPTG_CHUNK}};
        memcpy(d->hbblk + (size_t)3 * b * DOPT_BLK, &k[0], sizeof k[0]);
        memcpy(d->hbblk + (size_t)(3 * b + 1) * DOPT_BLK, &k[1], sizeof k[1]);
        memcpy(d->hbblk + (size_t)(3 * b + 2) * DOPT_BLK, &k[2], sizeof k[2]);
    }
    CU(x, -1, cudaMemcpyAsync(d->bblk, d->hbblk, (size_t)3 * n * DOPT_BLK, cudaMemcpyHostToDevice, x->stream));
    CU(x, -1, cudaStreamSynchronize(x->stream));
    return PP_OK;
}

/* WAIT: the bucket's fold launched (early.h), then its event. */
static pp_status dopt_wait(pprt_exec *x, const pprt_dopt_call *c, pp_err *err) {
    PP_TRY(pcu_early_wait(&x->dopt.early, c->bucket, x->st->index, err));
    CU(x, -1, cudaEventSynchronize(x->dopt.bev[c->bucket]));
    return PP_OK;
}

/* The flat buffers: each weight from a multiple of PCU_OPTG_CHUNK on, the gaps zeroed; its weight and state
 * uploaded; the FOLD blocks uploaded. */
static pp_status dopt_bind(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    if (d->np) return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d's device optimizer bound twice", x->st->index);
    const int np = c->n_params;
    d->ps = calloc(pp_count(np), sizeof *d->ps), d->off = calloc(pp_count(np), sizeof *d->off);
    d->hblk = calloc(DOPT_BLOCKS, DOPT_BLK);
    if (!d->ps || !d->off || !d->hblk) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(d->ps, c->params, (size_t)np * sizeof *d->ps);
    int64_t T;
    int64_t *tab = pprt_cuda_optg_layout(c->params, np, d->off, &T);
    if (!tab) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const size_t fb = pp_align_up((size_t)T * sizeof(float), 256), C = (size_t)T / PCU_OPTG_CHUNK;
    for (int f = 0; f < 2; f++) {
        const pcu_optg k = {.mode = PCU_OPTG_FOLD, .has_a = f == 0, .n = T, .np = np, .chunks = (int64_t)C};
        memcpy(d->hblk + (size_t)(DOPT_FOLD_COPY + f) * DOPT_BLK, &k, sizeof k);
    }
    d->T = T, d->buffers = c->buffers;
    const size_t pb = pp_align_up(C * sizeof(double), 256), sb = pp_align_up((size_t)np * sizeof(double), 256);
    const size_t tn = 4 * (size_t)np + C, tb = pp_align_up(tn * sizeof(int64_t), 256);
    const size_t fn = 4 + C, ftb = pp_align_up(fn * sizeof(int64_t), 256);
    const size_t all = fb * (size_t)(2 + c->buffers) + pb + sb + tb + ftb + (size_t)DOPT_BLOCKS * DOPT_BLK;
    cudaError_t e = cudaMalloc((void **)&d->mem, all);
    if (e != cudaSuccess) {
        free(tab);
        return cu_fail(err, x, -1, "cudaMalloc (the device optimizer's buffers)", e);
    }
    unsigned char *at = d->mem;
    d->w = (float *)at, at += fb;
    d->g = (float *)at, at += fb;
    if (c->buffers >= 1) d->m = (float *)at, at += fb;
    if (c->buffers >= 2) d->v = (float *)at, at += fb;
    d->part = (double *)at, at += pb;
    d->sq = (double *)at, at += sb;
    d->tab = (int64_t *)at, at += tb;
    d->ftab = (int64_t *)at, at += ftb;
    d->blk = at;
    e = cudaMemsetAsync(d->mem, 0, all, x->stream);
    for (int p = 0; p < np && e == cudaSuccess; p++) {
        const size_t n = (size_t)c->params[p].numel * sizeof(float);
        float *dst[3] = {d->w, d->m, d->v};
        const float *src[3] = {c->params[p].w, c->params[p].m, c->params[p].v};
        for (int b = 0; b <= c->buffers && e == cudaSuccess; b++)
            e = cudaMemcpyAsync(dst[b] + d->off[p], src[b], n, cudaMemcpyHostToDevice, x->stream);
        c->bytes += n * (size_t)(1 + c->buffers);
        for (int t = 0; t < c->params[p].n_dst && e == cudaSuccess; t++) /* the executors' copies: the host's */
            e = cudaMemcpyAsync(c->params[p].dst[t], d->w + d->off[p], n, cudaMemcpyDeviceToDevice, x->stream);
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(d->tab, tab, tn * sizeof *tab, cudaMemcpyHostToDevice, x->stream);
    const int64_t flat[4] = {0, 0, T, (int64_t)C}; /* one weight over all of it: its chunks' map is zeros (memset) */
    if (e == cudaSuccess) e = cudaMemcpyAsync(d->ftab, flat, sizeof flat, cudaMemcpyHostToDevice, x->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(d->blk, d->hblk, (size_t)DOPT_BLOCKS * DOPT_BLK, cudaMemcpyHostToDevice,
                                              x->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(x->stream);
    free(tab);
    if (e != cudaSuccess) return cu_fail(err, x, -1, "uploading the device optimizer's buffers", e);
    d->np = np;
    d->first = true;
    return PP_OK;
}

/* A step's parameter blocks, uploaded with the others in one copy (the stream's earlier kernels have read them). */
static pp_status dopt_blocks(pprt_exec *x, const pcu_optg *g, int first, int count, const pcu_opt *k, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    for (int i = 0; i < count; i++) memcpy(d->hblk + (size_t)(first + i) * DOPT_BLK, &g[i], sizeof g[i]);
    if (k) memcpy(d->hblk + (size_t)DOPT_OPT * DOPT_BLK, k, sizeof *k);
    CU(x, -1, cudaMemcpyAsync(d->blk, d->hblk, (size_t)DOPT_BLOCKS * DOPT_BLK, cudaMemcpyHostToDevice, x->stream));
    return PP_OK;
}

static pp_status dopt_norm(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    const int64_t C = d->T / PCU_OPTG_CHUNK;
    const pcu_optg g[3] = {{.mode = PCU_OPTG_SCALE, .has_a = c->mean, .has_b = c->unscale, .a = c->inv, .b = c->by,
                            .n = d->T},
                           {.mode = PCU_OPTG_SQ, .n = C},
                           {.mode = PCU_OPTG_SUM, .n = d->np, .np = d->np, .chunks = C}};
    PP_TRY(dopt_blocks(x, g, DOPT_SCALE, 3, NULL, err));
    if (c->mean || c->unscale) PP_TRY(dopt_optg(x, DOPT_SCALE, d->T, NULL, err));
    PP_TRY(dopt_optg(x, DOPT_SQ, C, NULL, err));
    PP_TRY(dopt_optg(x, DOPT_SUM, d->np, NULL, err));
    CU(x, -1, cudaMemcpyAsync(c->sq, d->sq, (size_t)d->np * sizeof *c->sq, cudaMemcpyDeviceToHost, x->stream));
    CU(x, -1, cudaStreamSynchronize(x->stream));
    return PP_OK;
}

static pp_status dopt_step(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    const pcu_optg clip = {.mode = PCU_OPTG_SCALE, .has_a = 1, .a = c->c, .n = d->T};
    pcu_opt k = c->k;
    k.n = d->T;
    PP_TRY(dopt_blocks(x, &clip, DOPT_CLIP, 1, &k, err));
    if (c->clip) PP_TRY(dopt_optg(x, DOPT_CLIP, d->T, NULL, err));
    void *op[PCU_KERNEL_OPS] = {d->w, d->g, d->m, d->v};
    CU(x, -1, (cudaError_t)pcu_launch(PCU_K_OPT, d->blk + (size_t)DOPT_OPT * DOPT_BLK, op, NULL, d->T, 0, x->stream));
    for (int p = 0; p < d->np; p++) /* into the weight spaces of the executors that read it (on this device) */
        for (int t = 0; t < d->ps[p].n_dst; t++)
            CU(x, -1, cudaMemcpyAsync(d->ps[p].dst[t], d->w + d->off[p], (size_t)d->ps[p].numel * sizeof(float),
                                      cudaMemcpyDeviceToDevice, x->stream));
    CU(x, -1, cudaStreamSynchronize(x->stream));
    return PP_OK;
}

static pp_status dopt_get(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    for (int p = 0; p < d->np && p < c->n_params; p++) {
        const size_t n = (size_t)d->ps[p].numel * sizeof(float);
        const float *src[3] = {d->w, d->m, d->v};
        float *dst[3] = {c->params[p].w, c->params[p].m, c->params[p].v};
        for (int b = 0; b <= d->buffers; b++)
            if (dst[b]) CU(x, -1, cudaMemcpyAsync(dst[b], src[b] + d->off[p], n, cudaMemcpyDeviceToHost, x->stream));
        c->bytes += n * (size_t)(1 + d->buffers);
    }
    CU(x, -1, cudaStreamSynchronize(x->stream));
    return PP_OK;
}

/* FOLD_HELD: each held run's bucket added onto the sums' in its order (OPTG FOLD by the flat table), on the
 * chain's stream: the executor's may still run the last run's steps. */
static pp_status dopt_fold_held(pprt_exec *x, const pprt_dopt_call *c, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    if (c->bucket < 0 || c->bucket >= d->early.n)
        return PP_FAIL(err, PP_ERUNTIME, "internal: FOLD_HELD of bucket %d of %d", c->bucket, d->early.n);
    const int64_t lo = d->early.bound[c->bucket], n = d->early.bound[c->bucket + 1] - lo;
    const unsigned char *blk = d->bblk + (size_t)(3 * c->bucket + 2) * DOPT_BLK;
    for (int j = 0; j < d->n_held; j++) {
        void *op[PCU_KERNEL_OPS] = {d->g + lo, d->held[j] + lo, d->part, d->ftab, d->sq};
        CU(x, -1, (cudaError_t)pcu_launch(PCU_K_OPTG, blk, op, NULL, n, 0, d->cs));
    }
    CU(x, -1, cudaStreamSynchronize(d->cs));
    return PP_OK;
}

static pp_status cuda_dopt(pprt_exec *x, pprt_dopt_call *c, pp_err *err) {
    if (x->pl.folds_varying)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: a step's parameters hold a trained weight's value", x->st->index);
    CU(x, -1, cudaSetDevice(pprt_cuda_phys(x->device)));
    switch (c->kind) {
    case PPRT_DOPT_ADDR:
        c->mem = &pprt_mem_cuda;
        return pcu_dopt_addr(x->st, &x->pl, x->mem[PCU_SP_WEIGHTS], x->device, c, err);
    case PPRT_DOPT_BIND: return dopt_bind(x, c, err);
    case PPRT_DOPT_BEGIN: x->dopt.first = true, x->dopt.hold = false, x->dopt.n_held = 0; return PP_OK;
    case PPRT_DOPT_HOLD: x->dopt.hold = true; return PP_OK;
    case PPRT_DOPT_EARLY: return dopt_early(x, c, err);
    case PPRT_DOPT_WAIT: return dopt_wait(x, c, err);
    case PPRT_DOPT_CANCEL: pcu_early_end(&x->dopt.early, false); return PP_OK;
    case PPRT_DOPT_FOLD_HELD: return dopt_fold_held(x, c, err);
    case PPRT_DOPT_NORM: return dopt_norm(x, c, err);
    case PPRT_DOPT_STEP: return dopt_step(x, c, err);
    case PPRT_DOPT_GET: return dopt_get(x, c, err);
    }
    return PP_FAIL(err, PP_ERUNTIME, "internal: device optimizer call %d", (int)c->kind);
}

/* Device messages in, device messages out: the steps, then the stream
 * synchronized (the outgoing message complete, the error flag known). */
static pp_status cuda_run(pprt_exec *x, const void *in_msg, void *out_msg, pp_err *err) {
    struct cu_dopt *d = &x->dopt;
    if (d->np) {
        pcu_early_begin(&d->early);
        pp_status s = dopt_target(x, err);
        if (s == PP_OK) s = pprt_cuda_run_dev(x, in_msg, out_msg, err);
        if (s == PP_OK && !d->early.on) /* the whole run's gradients in one fold, outside its graph */
            s = dopt_optg_at(x, d->into_a ? DOPT_FOLD_COPY : DOPT_FOLD_ADD, d->T, d->into, out_msg, d->tab, err);
        if (d->early.on) pcu_early_end(&d->early, s == PP_OK);
        PP_TRY(s);
    } else {
        PP_TRY(pprt_cuda_run_dev(x, in_msg, out_msg, err));
    }
    CU(x, -1, cudaStreamSynchronize(x->stream));
    for (int i = 0; x->prof && i < x->pl.n_steps; i++) { /* step i lies between events i and i + 1 */
        float ms = 0;
        CU(x, x->pl.steps[i].node, cudaEventElapsedTime(&ms, x->ev[i], x->ev[i + 1]));
        if (x->pl.steps[i].node >= 0) x->node_s[x->pl.steps[i].node] += ms / 1e3;
    }
    if (*x->pin_err)
        return PP_FAIL(err, PP_EINVAL, "stage %d: an index is out of range (of a Gather, GatherElements, Scatter or "
                       "RotaryEmbedding, or an LSTM's, GRU's or RNN's sequence_lens)", x->st->index);
    return PP_OK;
}

static void cuda_counts(const pprt_exec *x, pprt_exec_counts *c) {
    pprt_cuda_counts_of(&x->counts, c);
    c->graph_captures = x->gc.captures;
    c->graph_replays = x->gc.replays;
    c->weight_upload_bytes = (double)x->uploaded;
}

/* Measured only under --profile (events between steps, no graphs): else none. */
static const double *cuda_node_seconds(const pprt_exec *x) { return x->prof ? x->node_s : NULL; }

const pprt_exec_ops pprt_exec_cuda = {"cuda", cuda_create, cuda_run, cuda_destroy, cuda_node_seconds, cuda_counts,
                                      cuda_reload, cuda_dopt};
