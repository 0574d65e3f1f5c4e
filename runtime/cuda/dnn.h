/* dnn.h: cuDNN graphs (the backend API, no legacy calls) for the CUDA
 * backend's convolution steps (dnn.c). Building and finalizing the tensor,
 * convolution, pointwise and operation descriptors and the operation graph
 * needs no GPU and no cuDNN handle (cuDNN 9.19): tests/cuda/test_dnn.c does it
 * for every convolution of the zoo models and a sweep of shapes. Engine
 * heuristics, execution plans and execution need a device (exec_cuda.c). */
#ifndef PPRT_CUDA_DNN_H
#define PPRT_CUDA_DNN_H

#include <cudnn.h>

#include "cuplan.h"

/* Tensor uids of a convolution graph's variant pack. */
enum { PCU_UID_X = 1, PCU_UID_W = 2, PCU_UID_B = 3, PCU_UID_R = 4, PCU_UID_Y = 5 };

#define PCU_DNN_MAX_DESC 24

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

#endif
