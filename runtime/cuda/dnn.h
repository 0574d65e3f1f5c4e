/* dnn.h: cuDNN graphs (the backend API, no legacy calls) for the CUDA
 * backend's convolution steps (dnn.c). Building and finalizing the tensor,
 * convolution, pointwise and operation descriptors and the operation graph
 * needs no GPU and no cuDNN handle (cuDNN 9.19): tests/cuda/test_dnn.c does it
 * for every convolution of the zoo models and a sweep of shapes. Engine
 * heuristics and execution plans need a device, or a description of one
 * captured on it (pcu_devprop_*); execution needs the device (exec_cuda.c). */
#ifndef PPRT_CUDA_DNN_H
#define PPRT_CUDA_DNN_H

#include <cudnn.h>

#include "cuplan.h"
#include "tactics.h"

/* Tensor uids of a convolution graph's variant pack. */
enum { PCU_UID_X = 1, PCU_UID_W = 2, PCU_UID_B = 3, PCU_UID_R = 4, PCU_UID_Y = 5 };
/* ... and of an attention graph's (pcu_dnn_sdpa): Q, K, V, O, the scale (by value, a host float), the mask */
enum { PCU_UID_Q = 21, PCU_UID_K = 22, PCU_UID_V = 23, PCU_UID_O = 24, PCU_UID_SCALE = 25, PCU_UID_BIAS = 26 };

#define PCU_DNN_MAX_DESC 48

typedef struct pcu_dnn {
    cudnnBackendDescriptor_t d[PCU_DNN_MAX_DESC]; /* every descriptor made, freed together */
    int n;
    cudnnBackendDescriptor_t graph;               /* the finalized operation graph */
    bool fused;                                   /* bias, residual and activation inside the graph */
    int64_t engines;                              /* CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT */
} pcu_dnn;

/* The operation graph of conv step c: the convolution (forward, backward
 * data for ConvTranspose and pp.ConvGradX, or backward filter for
 * pp.ConvGradW, whose dy is uid W and dw uid Y) and, with fused (forward only), bias, residual and
 * activation as pointwise ops. tf32: let the convolution's math be TF32
 * (only where the caller asked for --precision tf32; the engine filter in
 * exec_cuda.c enforces strict f32 otherwise). handle: the cuDNN handle of the
 * device that will run the graph, or NULL (tests without a GPU). A graph
 * made without one finalizes, and heuristics give it engines, but on an
 * H200 (cuDNN 9.x from the nvidia-cudnn-cu13 wheel) executing such an
 * engine failed with CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH: the handle
 * tells cuDNN which GPU the engines are for. On failure the message names
 * the descriptor and the cuDNN status. */
pp_status pcu_dnn_conv(const pcu_conv *c, bool fused, cudnnHandle_t handle, pcu_dnn *g, pp_err *err);
void pcu_dnn_free(pcu_dnn *g);

/* The operation graph of fused attention step k (a half plan's MatMul, [Mul|Div], [Add], Softmax, MatMul, or ONNX
 * Attention without a mask; kmath.h pcu_fattn) as cuDNN's fused-attention (SDPA) engines take it: O = P V with
 * P = softmax(scale * Q K^T [+ M]), the pattern's mask M a bias tensor broadcast over the batch, the heads or
 * the query rows, S and the softmax in float, P in the io type, the row statistics virtual
 * (--cuda-sdpa, exec_cuda.c). The scale is pcu_sdpa_scale(k): the node's and Q's prescale folded into one
 * float multiplier (the kernel rounds the prescaled Q to the io type; cuDNN does not). pcu_sdpa_unfit says why
 * a step cannot be one (f32, a head dimension not contiguous, over 128 or not a multiple of 8, a stride not
 * 16 bytes, a mask whose keys are not contiguous), or NULL. */
const char *pcu_sdpa_unfit(const pcu_fattn *k);
float pcu_sdpa_scale(const pcu_fattn *k);
pp_status pcu_dnn_sdpa(const pcu_fattn *k, cudnnHandle_t handle, pcu_dnn *g, pp_err *err);

/* The engine the executors take for graph g: heuristic mode `mode`'s engine
 * configs in order (up to PCU_DNN_MAX_CFGS), the first that is
 * deterministic, in strict f32 (strict) neither down-converts its inputs
 * nor uses tensor cores, needs at most max_ws bytes of workspace, and
 * finalizes into an execution plan for handle's device, or with handle
 * NULL for the device devprop describes (pcu_devprop_load: no GPU needed,
 * cuDNN 9.8+). The whole list is read, not a fixed first few: on an H100
 * the first 16 configs mode A gives a 3x3 f32 convolution are all
 * tensor-core engines, which strict f32 refuses (2026-11-26, docs/cuda.md).
 * out->plan NULL: none; the caller owns a plan. */
#define PCU_DNN_MAX_CFGS 256
typedef struct pcu_dnn_pick {
    cudnnBackendDescriptor_t plan; /* the finalized execution plan, or NULL */
    int64_t configs;               /* engine configs the heuristics gave */
    int64_t took, gidx, workspace; /* the config taken (-1: none), its engine's global index, its workspace */
    int refused[4];                /* non-deterministic, reduced precision, over the workspace, no plan */
} pcu_dnn_pick;
pp_status pcu_dnn_choose(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                         cudnnBackendHeurMode_t mode, int64_t max_ws, pcu_dnn_pick *out, pp_err *err);
/* The executors' order (exec_cuda.c dnn_plan, which says each with --cuda-explain): mode A's list, then the
 * fallback list where it gave no plan */
pp_status pcu_dnn_choose_any(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                             int64_t max_ws, pcu_dnn_pick *out, pp_err *err);

/* The tactic cache (tactics.h). pcu_dnn_tactic: tactic t as an execution
 * plan for graph g (handle's device, or devprop's without one), out->plan
 * NULL when cuDNN refuses it or the filter does (as pcu_dnn_choose's).
 * pcu_dnn_candidates (test_dnn --tune, on a GPU): every engine config
 * heuristic mode A and then the fallback list give g that passes the filter
 * with max_ws bytes of workspace and makes a plan for handle's device, each
 * with its tactic (engine, knobs, workspace) and where it stood in the
 * lists; free them with pcu_dnn_cands_free. */
typedef struct pcu_dnn_cand {
    pcu_tactic t;
    cudnnBackendDescriptor_t plan;
    int mode;      /* 0: heuristic mode A, 1: the fallback list */
    int64_t index; /* its place in that list */
} pcu_dnn_cand;
pp_status pcu_dnn_tactic(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                         const pcu_tactic *t, int64_t max_ws, pcu_dnn_pick *out, pp_err *err);
pp_status pcu_dnn_candidates(const pcu_dnn *g, cudnnHandle_t handle, bool strict, int64_t max_ws,
                             pcu_dnn_cand **out, int *n, pp_err *err);
void pcu_dnn_cands_free(pcu_dnn_cand *c, int n);

/* A GPU's description for deviceless execution plans: captured from the
 * device of `handle` as cuDNN's JSON (*json malloc'd, NUL-terminated, *len
 * bytes without the NUL; needs the GPU), and loaded back from that JSON into
 * a finalized device-property descriptor (no GPU; destroy it with
 * cudnnBackendDestroyDescriptor). tests/cuda/test_dnn.c captures (--capture,
 * on a GPU day) and finalizes every convolution's execution plan with the
 * committed descriptions (tests/cuda/devprop/). */
/* GPU `device`'s stem, the name of its description and of its tactic table:
 * <its name through pp_file_name>_cc<major><minor>_cudnn<the loaded cuDNN's
 * version>; false when the device cannot be asked or buf is too short. */
bool pcu_dnn_gpu_stem(int device, char *buf, size_t n);
pp_status pcu_devprop_capture(cudnnHandle_t handle, char **json, int64_t *len, pp_err *err);
pp_status pcu_devprop_load(const char *json, int64_t len, cudnnBackendDescriptor_t *out, pp_err *err);

#endif
