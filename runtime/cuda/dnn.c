/* dnn.c: cuDNN operation graphs of convolution steps (dnn.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dnn.h"

#define DN(call, what)                                                                                          \
    do {                                                                                                        \
        cudnnStatus_t st_ = (call);                                                                             \
        if (st_ != CUDNN_STATUS_SUCCESS)                                                                        \
            return PP_FAIL(err, PP_EUNSUP, "cuDNN %s: %s: %s", what, #call, cudnnGetErrorString(st_));          \
    } while (0)

static pp_status make(pcu_dnn *g, cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *out, pp_err *err) {
    if (g->n == PCU_DNN_MAX_DESC) return PP_FAIL(err, PP_ERUNTIME, "cuDNN graph: too many descriptors");
    DN(cudnnBackendCreateDescriptor(t, out), "create");
    g->d[g->n++] = *out;
    return PP_OK;
}

/* A tensor of nd dims and element strides st: virtual (an intermediate, no memory) or real; by_value: a scalar
 * whose value the variant pack gives by host pointer (the attention's scale). */
static pp_status tensor_st(pcu_dnn *g, int64_t uid, int nd, const int64_t *dims, const int64_t *st, bool virt,
                           bool by_value, cudnnDataType_t dt, cudnnBackendDescriptor_t *out, const char *what,
                           pp_err *err) {
    int64_t align = 16;
    bool v = virt;
    PP_TRY(make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out, err));
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt), what);
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims), what);
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, st), what);
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), what);
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align), what);
    DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v), what);
    if (by_value) {
        bool bv = true;
        DN(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv), what);
    }
    DN(cudnnBackendFinalize(*out), what);
    return PP_OK;
}

/* A tensor of nd dims, packed NCHW or (nhwc) channels-last (pcu_layout_strides): a virtual one (a fused graph's
 * intermediate) float, a real one of the step's type (conv_type). */
static pp_status tensor(pcu_dnn *g, int64_t uid, int nd, const int64_t *dims, bool nhwc, bool virt,
                        cudnnDataType_t type, cudnnBackendDescriptor_t *out, const char *what, pp_err *err) {
    int64_t st[5];
    pcu_layout_strides(dims, nd, nhwc, st);
    return tensor_st(g, uid, nd, dims, st, virt, false, virt ? CUDNN_DATA_FLOAT : type, out, what, err);
}

/* A pointwise op y = mode(x [, b]) (b may be NULL; c: a conv step's Clip bounds, or NULL). */
static pp_status pointwise(pcu_dnn *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                           cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, const pcu_conv *c,
                           cudnnBackendDescriptor_t *op, pp_err *err) {
    cudnnBackendDescriptor_t pw;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    PP_TRY(make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw, err));
    DN(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode), "pointwise");
    DN(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec), "pointwise");
    if (mode == CUDNN_POINTWISE_RELU_FWD) {
        /* NaN through the ReLU, as the reference and onnxruntime give it (and as cudnn-frontend asks): without
         * it some fused engines turned a NaN before the ReLU into 0 on an H200 (docs/cuda.md; issue 54) */
        cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
        DN(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan),
           "pointwise NaN propagation");
    }
    if (mode == CUDNN_POINTWISE_RELU_FWD && c && c->act == 2) {
        double lo = c->lo, hi = c->hi;
        DN(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lo), "clip");
        if (isfinite(hi)) DN(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &hi), "clip");
    }
    DN(cudnnBackendFinalize(pw), "pointwise");
    PP_TRY(make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op, err));
    DN(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw),
       "pointwise op");
    DN(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x),
       "pointwise op");
    if (b)
        DN(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b),
           "pointwise op");
    DN(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y),
       "pointwise op");
    DN(cudnnBackendFinalize(*op), "pointwise op");
    return PP_OK;
}

/* g's operation graph of ops op[0..n) (for handle's device, or none), finalized, its engine count in g */
static pp_status graph_of(pcu_dnn *g, cudnnBackendDescriptor_t *op, int n, cudnnHandle_t handle, const char *what,
                          pp_err *err) {
    PP_TRY(make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph, err));
    DN(cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, op), what);
    if (handle)
        DN(cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle), what);
    DN(cudnnBackendFinalize(g->graph), what);
    int64_t cnt = 0, got = 0;
    DN(cudnnBackendGetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &got, &cnt),
       what);
    g->engines = cnt;
    return PP_OK;
}

/* a conv step's tensors' type: a half plan's HALF or BFLOAT16 (the convolution computing in float), else FLOAT */
static cudnnDataType_t conv_type(const pcu_conv *c) {
    return c->dt == PCU_T_F16 ? CUDNN_DATA_HALF : c->dt == PCU_T_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

pp_status pcu_dnn_conv(const pcu_conv *c, bool fused, cudnnHandle_t handle, pcu_dnn *g, pp_err *err) {
    memset(g, 0, sizeof *g);
    const cudnnDataType_t type = conv_type(c);
    fused = fused && pcu_conv_graph_fuses(c);
    g->fused = fused;
    const int nd = 2 + c->nsp;
    cudnnBackendDescriptor_t x, w, y, conv, op[4];
    int nops = 0;
    /* forward: X -> Y; backward data: dy (the step's X) -> dx (its Y);
     * backward filter: X, dy (the step's operand 1: uid W) -> dw (its
     * operand 4: uid Y) */
    const bool cl = c->nhwc != 0; /* channels-last: x, y, the residual NHWC, w KRSC, the bias [1,K,1,1] alike */
    PP_TRY(tensor(g, PCU_UID_X, nd, c->x, cl, false, type, &x, "tensor X", err));
    PP_TRY(tensor(g, c->wgrad ? PCU_UID_Y : PCU_UID_W, nd, c->w, cl, false, type, &w, "tensor W", err));
    PP_TRY(tensor(g, c->wgrad ? PCU_UID_W : fused ? 10 : PCU_UID_Y, nd, c->y, cl, fused, type, &y, "tensor Y", err));
    int64_t nsp = c->nsp;
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    PP_TRY(make(g, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv, err));
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp), "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct), "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode),
       "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, c->pre), "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, c->post),
       "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, c->dil), "convolution");
    DN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, c->stride),
       "convolution");
    DN(cudnnBackendFinalize(conv), "convolution");
    float alpha = 1, beta = 0;
    PP_TRY(make(g, c->wgrad       ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
                   : c->transpose ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                  : CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                &op[0], err));
    /* the same six attributes under the two operations' names: source, filter, result, the
     * convolution, alpha, beta (backward data: dy, w, dx) */
    static const cudnnBackendAttributeName_t fwd[6] = {
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    static const cudnnBackendAttributeName_t bwd[6] = {
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    static const cudnnBackendAttributeName_t bwf[6] = {
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
    const cudnnBackendAttributeName_t *at = c->wgrad ? bwf : c->transpose ? bwd : fwd;
    const char *what = c->wgrad       ? "convolution backward filter"
                       : c->transpose ? "convolution backward data"
                                      : "convolution forward";
    /* backward filter: x, dy (the y tensor), dw (the w tensor) */
    cudnnBackendDescriptor_t ends[4] = {x, c->wgrad ? y : w, c->wgrad ? w : y, conv};
    for (int k = 0; k < 4; k++)
        DN(cudnnBackendSetAttribute(op[0], at[k], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ends[k]), what);
    DN(cudnnBackendSetAttribute(op[0], at[4], CUDNN_TYPE_FLOAT, 1, &alpha), what);
    DN(cudnnBackendSetAttribute(op[0], at[5], CUDNN_TYPE_FLOAT, 1, &beta), what);
    DN(cudnnBackendFinalize(op[0]), c->wgrad       ? "convolution backward filter (the dims do not fit)"
                                     : c->transpose ? "convolution backward data (the dims do not fit)"
                                                    : "convolution forward (the dims do not fit)");
    nops = 1;
    if (fused) {
        /* conv -> (+ bias) -> (+ residual) -> (activation) -> Y: each
         * intermediate virtual, the last the real Y */
        const int last = c->act ? 3 : c->has_res ? 2 : 1;
        cudnnBackendDescriptor_t cur = y;
        int64_t bd[5] = {1, c->y[1], 1, 1, 1};
        for (int stage = 1; stage <= 3; stage++) {
            const bool on = stage == 1 ? c->has_bias : stage == 2 ? c->has_res : c->act != 0;
            if (!on) continue;
            cudnnBackendDescriptor_t nxt, other = NULL;
            PP_TRY(tensor(g, stage == last ? PCU_UID_Y : 10 + stage, nd, c->y, cl, stage != last, type, &nxt, "tensor",
                          err));
            if (stage == 1) PP_TRY(tensor(g, PCU_UID_B, nd, bd, cl, false, type, &other, "tensor bias", err));
            if (stage == 2) PP_TRY(tensor(g, PCU_UID_R, nd, c->y, cl, false, type, &other, "tensor residual", err));
            PP_TRY(pointwise(g, stage == 3 ? CUDNN_POINTWISE_RELU_FWD : CUDNN_POINTWISE_ADD, cur, other, nxt, c,
                             &op[nops++], err));
            cur = nxt;
        }
    }
    return graph_of(g, op, nops, handle, "operation graph", err);
}

/* ---- scaled dot-product attention (a half plan's fused attention on cuDNN's fused-attention engines) ---- */

/* An operation of two or three descriptor attributes (a matmul's A, B, C and its descriptor; a reduction's X, Y
 * and descriptor) */
static pp_status op3(pcu_dnn *g, cudnnBackendDescriptorType_t t, const cudnnBackendAttributeName_t *at, int n,
                     const cudnnBackendDescriptor_t *v, cudnnBackendDescriptor_t *op, const char *what, pp_err *err) {
    PP_TRY(make(g, t, op, err));
    for (int k = 0; k < n; k++) DN(cudnnBackendSetAttribute(*op, at[k], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v[k]), what);
    DN(cudnnBackendFinalize(*op), what);
    return PP_OK;
}

static pp_status matmul_op(pcu_dnn *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                           cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t *op, pp_err *err) {
    cudnnBackendDescriptor_t md;
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    PP_TRY(make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &md, err));
    DN(cudnnBackendSetAttribute(md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct), "matmul");
    DN(cudnnBackendFinalize(md), "matmul");
    static const cudnnBackendAttributeName_t at[4] = {
        CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
        CUDNN_ATTR_OPERATION_MATMUL_DESC};
    const cudnnBackendDescriptor_t v[4] = {a, b, c, md};
    return op3(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, at, 4, v, op, "matmul op", err);
}

static pp_status reduce_op(pcu_dnn *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                           cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op, pp_err *err) {
    cudnnBackendDescriptor_t rd;
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    PP_TRY(make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &rd, err));
    DN(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how),
       "reduction");
    DN(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct), "reduction");
    DN(cudnnBackendFinalize(rd), "reduction");
    static const cudnnBackendAttributeName_t at[3] = {CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                                                      CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                                                      CUDNN_ATTR_OPERATION_REDUCTION_DESC};
    const cudnnBackendDescriptor_t v[3] = {x, y, rd};
    return op3(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, at, 3, v, op, "reduction op", err);
}

const char *pcu_sdpa_unfit(const pcu_fattn *k) {
    if (k->t != PCU_T_F16 && k->t != PCU_T_BF16) return "f32 (cuDNN's fused attention is half only)";
    if (k->qe != 1 || k->ke != 1 || k->ve != 1) return "a head dimension that is not contiguous";
    if (k->D % 8 || k->Dv % 8 || k->D > 128 || k->Dv > 128) return "a head dimension not a multiple of 8 up to 128";
    if (k->nb % k->nh || k->nh % k->grp) return "heads that do not divide the batches";
    if (k->where) return "a Where on the scores (GPT-2's masked_fill; cuDNN's graph has none)";
    if (k->causal) return "a causal Attention (the graph has no causal mask)";
    if (k->fmask) return "a second, windowed mask (Swin's shifted windows; the graph takes one bias)";
    if (k->scale_op == 3) return "a scale per head (SwinV2's logit scale; the graph takes one scalar)";
    if (k->mask && k->mj != 1) return "a mask whose keys are not contiguous";
    /* cuDNN adds the mask in float: a row masked whole at fp16's -65504 would weigh its scores, where the graph's
     * fp16 Add (and pprt's kernel) round them all to -65504, a uniform row (bf16's -3.39e38 absorbs them in float) */
    if (k->mask && k->t == PCU_T_F16) return "an fp16 mask (cuDNN would add it without the fp16 rounding)";
    const int64_t st[] = {k->qb, k->qh, k->qi, k->kb, k->kh, k->kj, k->vb, k->vh, k->vj, k->yb, k->yh, k->yi,
                          k->mask ? k->mb : 0, k->mask ? k->mh : 0, k->mask ? k->mi : 0};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        if (st[i] % 8) return "a stride not a multiple of 8 elements (16 bytes)";
    return NULL;
}

float pcu_sdpa_scale(const pcu_fattn *k) {
    double s = k->scale_op == 1 ? k->scale : k->scale_op == 2 ? 1.0 / k->scale : 1.0;
    if (k->qscale_op == 1) s *= k->qscale;
    if (k->qscale_op == 2) s /= k->qscale;
    return (float)s;
}

/* A head count of 1 may come with a head stride of 0: give cuDNN the packed one */
static int64_t hstride(int64_t nh, int64_t st, int64_t rows, int64_t cols) { return nh > 1 ? st : rows * cols; }

pp_status pcu_dnn_sdpa(const pcu_fattn *k, cudnnHandle_t handle, pcu_dnn *g, pp_err *err) {
    memset(g, 0, sizeof *g);
    const char *why = pcu_sdpa_unfit(k);
    if (why) return PP_FAIL(err, PP_EUNSUP, "cuDNN attention: %s", why);
    const cudnnDataType_t T = k->t == PCU_T_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16, F = CUDNN_DATA_FLOAT;
    const int64_t b = k->nb / k->nh, h = k->nh, hk = k->nh / k->grp, sq = k->Sq, skv = k->T, d = k->D, dv = k->Dv;
    const int64_t qd[4] = {b, h, sq, d}, qs[4] = {k->qb, hstride(h, k->qh, sq, d), k->qi, 1};
    const int64_t kd[4] = {b, hk, d, skv}, ks[4] = {k->kb, hstride(hk, k->kh, skv, d), 1, k->kj}; /* K^T: a view */
    const int64_t vd[4] = {b, hk, skv, dv}, vs[4] = {k->vb, hstride(hk, k->vh, skv, dv), k->vj, 1};
    const int64_t od[4] = {b, h, sq, dv}, os[4] = {k->yb, hstride(h, k->yh, sq, dv), k->yi, 1};
    const int64_t sd[4] = {b, h, sq, skv}, ss[4] = {h * sq * skv, sq * skv, skv, 1};
    const int64_t rd[4] = {b, h, sq, 1}, rs[4] = {h * sq, sq, 1, 1}, one[4] = {1, 1, 1, 1};
    /* the mask (an Add after the scale): a bias tensor, each dim the scores' or 1 where it is broadcast */
    const int64_t bd[4] = {k->mb ? b : 1, k->mh ? h : 1, k->mi ? sq : 1, skv};
    const int64_t bs[4] = {k->mb ? k->mb : bd[1] * bd[2] * skv, k->mh ? k->mh : bd[2] * skv, k->mi ? k->mi : skv, 1};
    cudnnBackendDescriptor_t q, kt, v, o, s, sc, s2, m, s3, e, z, lz, stt, p, bias, s2b, op[12];
    PP_TRY(tensor_st(g, PCU_UID_Q, 4, qd, qs, false, false, T, &q, "tensor Q", err));
    PP_TRY(tensor_st(g, PCU_UID_K, 4, kd, ks, false, false, T, &kt, "tensor K", err));
    PP_TRY(tensor_st(g, PCU_UID_V, 4, vd, vs, false, false, T, &v, "tensor V", err));
    PP_TRY(tensor_st(g, PCU_UID_O, 4, od, os, false, false, T, &o, "tensor O", err));
    PP_TRY(tensor_st(g, PCU_UID_SCALE, 4, one, one, false, true, F, &sc, "tensor scale", err));
    PP_TRY(tensor_st(g, 40, 4, sd, ss, true, false, F, &s, "tensor S", err));
    PP_TRY(tensor_st(g, 41, 4, sd, ss, true, false, F, &s2, "tensor S scaled", err));
    PP_TRY(tensor_st(g, 42, 4, rd, rs, true, false, F, &m, "tensor row max", err));
    PP_TRY(tensor_st(g, 43, 4, sd, ss, true, false, F, &s3, "tensor S - max", err));
    PP_TRY(tensor_st(g, 44, 4, sd, ss, true, false, F, &e, "tensor exp", err));
    PP_TRY(tensor_st(g, 45, 4, rd, rs, true, false, F, &z, "tensor row sum", err));
    PP_TRY(tensor_st(g, 46, 4, rd, rs, true, false, F, &lz, "tensor log sum", err));
    PP_TRY(tensor_st(g, 47, 4, rd, rs, true, false, F, &stt, "tensor stats", err));
    PP_TRY(tensor_st(g, 48, 4, sd, ss, true, false, T, &p, "tensor P", err));
    if (k->mask) {
        PP_TRY(tensor_st(g, PCU_UID_BIAS, 4, bd, bs, false, false, T, &bias, "tensor mask", err));
        PP_TRY(tensor_st(g, 49, 4, sd, ss, true, false, F, &s2b, "tensor S masked", err));
    }
    /* S = Q K^T; S2 = S * scale; the softmax as cuDNN's fused-attention engines know it (max, subtract, exp, sum,
     * the statistics max + log(sum), divide), P in the io type; O = P V */
    int n = 0;
    PP_TRY(matmul_op(g, q, kt, s, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_MUL, s, sc, s2, NULL, &op[n++], err));
    if (k->mask) {
        PP_TRY(pointwise(g, CUDNN_POINTWISE_ADD, s2, bias, s2b, NULL, &op[n++], err));
        s2 = s2b;
    }
    PP_TRY(reduce_op(g, CUDNN_REDUCE_TENSOR_MAX, s2, m, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_SUB, s2, m, s3, NULL, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_EXP, s3, NULL, e, NULL, &op[n++], err));
    PP_TRY(reduce_op(g, CUDNN_REDUCE_TENSOR_ADD, e, z, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_LOG, z, NULL, lz, NULL, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_ADD, m, lz, stt, NULL, &op[n++], err));
    PP_TRY(pointwise(g, CUDNN_POINTWISE_DIV, e, z, p, NULL, &op[n++], err));
    PP_TRY(matmul_op(g, p, v, o, &op[n++], err));
    g->fused = true;
    return graph_of(g, op, n, handle, "attention graph", err);
}

void pcu_dnn_free(pcu_dnn *g) {
    for (int i = g->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->d[i]);
    memset(g, 0, sizeof *g);
}

/* ---- engines: the executors' choice, for a device or for its description ------------------ */

/* The engine config i of cfgs[] as the filter takes it: deterministic, in
 * strict f32 no down-converting or tensor-core engine, a workspace within
 * max_ws; its engine's global index into *gidx. Returns the refusal's slot
 * (0..2) or -1 when it passes. */
static int refusal(cudnnBackendDescriptor_t cfg, bool strict, int64_t max_ws, int64_t *ws, int64_t *gidx) {
    cudnnBackendDescriptor_t eng;
    int64_t got = 0, notes[32], nn = 0;
    *gidx = -1, *ws = 0;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return 0;
    int r = -1;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &eng) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 32, &nn, notes) !=
            CUDNN_STATUS_SUCCESS)
        r = 0;
    for (int64_t k = 0; k < nn && r < 0; k++) {
        const int64_t note = ((cudnnBackendNumericalNote_t *)notes)[k];
        if (note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) r = 0;
        else if (strict && (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE))
            r = 1;
    }
    if (r < 0 && (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, ws) !=
                      CUDNN_STATUS_SUCCESS ||
                  *ws > max_ws))
        r = 2;
    if (r < 0 && cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, gidx) !=
                     CUDNN_STATUS_SUCCESS)
        *gidx = -1;
    cudnnBackendDestroyDescriptor(eng);
    return r;
}

/* An execution plan of cfg for handle's device, or (handle NULL) devprop's. */
static cudnnBackendDescriptor_t plan_of(cudnnBackendDescriptor_t cfg, cudnnHandle_t handle,
                                        cudnnBackendDescriptor_t devprop) {
    cudnnBackendDescriptor_t plan = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
        return NULL;
    const cudnnStatus_t st =
        handle ? cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
               : cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                          &devprop);
    if (st == CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &cfg) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS)
        return plan;
    cudnnBackendDestroyDescriptor(plan);
    return NULL;
}

/* Heuristic mode `mode`'s engine configs for graph g (up to
 * PCU_DNN_MAX_CFGS): *cfgs (n of them) malloc'd with *made descriptors, all
 * to be destroyed (heur_free). */
static pp_status heur_configs(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop,
                              cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t **cfgs, int64_t *made,
                              int64_t *n, pp_err *err) {
    cudnnBackendDescriptor_t heur;
    *cfgs = NULL, *made = *n = 0;
    DN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), "engine heuristics");
    int64_t avail = 0;
    if (cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &g->graph) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) !=
            CUDNN_STATUS_SUCCESS ||
        (!handle && devprop &&
         cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &devprop) !=
             CUDNN_STATUS_SUCCESS) ||
        cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &avail,
                                 NULL) != CUDNN_STATUS_SUCCESS)
        avail = 0;
    if (avail > PCU_DNN_MAX_CFGS) avail = PCU_DNN_MAX_CFGS;
    if (avail > 0 && !(*cfgs = calloc((size_t)avail, sizeof **cfgs))) {
        cudnnBackendDestroyDescriptor(heur);
        return PP_FAIL(err, PP_ENOMEM, "out of memory for %lld cuDNN engine configs", (long long)avail);
    }
    while (*made < avail &&
           cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &(*cfgs)[*made]) == CUDNN_STATUS_SUCCESS)
        ++*made;
    if (*made == 0 || cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                               *made, n, *cfgs) != CUDNN_STATUS_SUCCESS)
        *n = 0;
    if (*n > *made) *n = *made;
    cudnnBackendDestroyDescriptor(heur);
    return PP_OK;
}

static void heur_free(cudnnBackendDescriptor_t *cfgs, int64_t made) {
    for (int64_t i = 0; i < made; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
    free(cfgs);
}

pp_status pcu_dnn_choose(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                         cudnnBackendHeurMode_t mode, int64_t max_ws, pcu_dnn_pick *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    out->took = out->gidx = -1;
    cudnnBackendDescriptor_t *cfgs;
    int64_t made, n;
    PP_TRY(heur_configs(g, handle, devprop, mode, &cfgs, &made, &n, err));
    out->configs = n;
    for (int64_t i = 0; i < n && !out->plan; i++) {
        int64_t ws, gidx;
        const int r = refusal(cfgs[i], strict, max_ws, &ws, &gidx);
        if (r >= 0) {
            out->refused[r]++;
            continue;
        }
        if (!(out->plan = plan_of(cfgs[i], handle, devprop))) {
            out->refused[3]++;
            continue;
        }
        out->took = i, out->gidx = gidx, out->workspace = ws;
    }
    heur_free(cfgs, made);
    return PP_OK;
}

pp_status pcu_dnn_choose_any(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                             int64_t max_ws, pcu_dnn_pick *out, pp_err *err) {
    PP_TRY(pcu_dnn_choose(g, handle, devprop, strict, CUDNN_HEUR_MODE_A, max_ws, out, err));
    if (!out->plan) PP_TRY(pcu_dnn_choose(g, handle, devprop, strict, CUDNN_HEUR_MODE_FALLBACK, max_ws, out, err));
    return PP_OK;
}

/* ---- the tactic cache (tactics.h): a tactic as an execution plan, the candidates of a tuning ---- */

/* Engine config cfg's knob choices into t (at most PCU_TACTIC_KNOBS) */
static bool knobs_of(cudnnBackendDescriptor_t cfg, pcu_tactic *t) {
    cudnnBackendDescriptor_t kc[PCU_TACTIC_KNOBS];
    int64_t made = 0, n = 0;
    while (made < PCU_TACTIC_KNOBS &&
           cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &kc[made]) == CUDNN_STATUS_SUCCESS)
        made++;
    bool ok = made == PCU_TACTIC_KNOBS &&
              cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &n,
                                       kc) == CUDNN_STATUS_SUCCESS &&
              n <= made;
    t->n_knobs = 0;
    for (int64_t k = 0; ok && k < n; k++) {
        cudnnBackendKnobType_t type;
        int64_t got, v;
        ok = cudnnBackendGetAttribute(kc[k], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type) ==
                 CUDNN_STATUS_SUCCESS &&
             cudnnBackendGetAttribute(kc[k], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got, &v) ==
                 CUDNN_STATUS_SUCCESS;
        t->knob_type[k] = (int64_t)type, t->knob_value[k] = v;
        t->n_knobs = (int)k + 1;
    }
    for (int64_t k = 0; k < made; k++) cudnnBackendDestroyDescriptor(kc[k]);
    return ok;
}

/* Tactic t's engine config for graph g: the engine by its global index (for
 * devprop's GPU when there is no handle), its knob choices; NULL when cuDNN
 * refuses any of them. */
static cudnnBackendDescriptor_t tactic_cfg(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop,
                                           const pcu_tactic *t) {
    cudnnBackendDescriptor_t eng = NULL, cfg = NULL, kc[PCU_TACTIC_KNOBS];
    int nk = 0;
    bool ok = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &g->graph) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &t->gidx) ==
                  CUDNN_STATUS_SUCCESS &&
              (handle || !devprop ||
               cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                        &devprop) == CUDNN_STATUS_SUCCESS) &&
              cudnnBackendFinalize(eng) == CUDNN_STATUS_SUCCESS;
    for (; ok && nk < t->n_knobs; nk++) {
        const cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)t->knob_type[nk];
        ok = cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &kc[nk]) == CUDNN_STATUS_SUCCESS;
        if (!ok) break;
        ok = cudnnBackendSetAttribute(kc[nk], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type) ==
                 CUDNN_STATUS_SUCCESS &&
             cudnnBackendSetAttribute(kc[nk], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                      &t->knob_value[nk]) == CUDNN_STATUS_SUCCESS &&
             cudnnBackendFinalize(kc[nk]) == CUDNN_STATUS_SUCCESS;
    }
    ok = ok && cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg) == CUDNN_STATUS_SUCCESS;
    ok = ok &&
         cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng) ==
             CUDNN_STATUS_SUCCESS &&
         (!nk || cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, nk,
                                          kc) == CUDNN_STATUS_SUCCESS) &&
         cudnnBackendFinalize(cfg) == CUDNN_STATUS_SUCCESS;
    for (int k = 0; k < nk; k++) cudnnBackendDestroyDescriptor(kc[k]);
    if (eng) cudnnBackendDestroyDescriptor(eng);
    if (!ok && cfg) cudnnBackendDestroyDescriptor(cfg);
    return ok ? cfg : NULL;
}

pp_status pcu_dnn_tactic(const pcu_dnn *g, cudnnHandle_t handle, cudnnBackendDescriptor_t devprop, bool strict,
                         const pcu_tactic *t, int64_t max_ws, pcu_dnn_pick *out, pp_err *err) {
    (void)err;
    memset(out, 0, sizeof *out);
    out->took = out->gidx = -1;
    cudnnBackendDescriptor_t cfg = tactic_cfg(g, handle, devprop, t);
    out->configs = cfg != NULL;
    if (!cfg) {
        out->refused[3]++;
        return PP_OK;
    }
    int64_t ws, gidx;
    const int r = refusal(cfg, strict, max_ws, &ws, &gidx);
    if (r >= 0) out->refused[r]++;
    else if (!(out->plan = plan_of(cfg, handle, devprop))) out->refused[3]++;
    else out->took = 0, out->gidx = gidx, out->workspace = ws;
    cudnnBackendDestroyDescriptor(cfg);
    return PP_OK;
}

pp_status pcu_dnn_candidates(const pcu_dnn *g, cudnnHandle_t handle, bool strict, int64_t max_ws,
                             pcu_dnn_cand **out, int *n_out, pp_err *err) {
    *out = NULL, *n_out = 0;
    int cap = 0;
    for (int m = 0; m < 2; m++) {
        cudnnBackendDescriptor_t *cfgs;
        int64_t made, n;
        PP_TRY(heur_configs(g, handle, NULL, m == 0 ? CUDNN_HEUR_MODE_A : CUDNN_HEUR_MODE_FALLBACK, &cfgs, &made, &n,
                            err));
        for (int64_t i = 0; i < n; i++) {
            pcu_dnn_cand c = {.mode = m, .index = i};
            if (refusal(cfgs[i], strict, max_ws, &c.t.workspace, &c.t.gidx) >= 0 || !knobs_of(cfgs[i], &c.t)) continue;
            bool seen = false; /* the fallback list repeats some of mode A's */
            for (int k = 0; k < *n_out && !seen; k++) {
                const pcu_tactic *o = &(*out)[k].t;
                seen = o->gidx == c.t.gidx && o->n_knobs == c.t.n_knobs &&
                       !memcmp(o->knob_type, c.t.knob_type, sizeof o->knob_type[0] * (size_t)o->n_knobs) &&
                       !memcmp(o->knob_value, c.t.knob_value, sizeof o->knob_value[0] * (size_t)o->n_knobs);
            }
            if (seen || !(c.plan = plan_of(cfgs[i], handle, NULL))) continue;
            if (*n_out == cap) {
                pcu_dnn_cand *q = realloc(*out, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *q);
                if (!q) {
                    cudnnBackendDestroyDescriptor(c.plan);
                    heur_free(cfgs, made);
                    pcu_dnn_cands_free(*out, *n_out);
                    *out = NULL, *n_out = 0;
                    return PP_FAIL(err, PP_ENOMEM, "out of memory");
                }
                *out = q;
            }
            (*out)[(*n_out)++] = c;
        }
        heur_free(cfgs, made);
    }
    return PP_OK;
}

void pcu_dnn_cands_free(pcu_dnn_cand *c, int n) {
    for (int i = 0; i < n; i++) cudnnBackendDestroyDescriptor(c[i].plan);
    free(c);
}

/* ---- device descriptions (cuDNN 9.8+: execution plans made without the device) -------------- */

bool pcu_dnn_gpu_stem(int device, char *buf, size_t n) {
    struct cudaDeviceProp prop;
    char name[128];
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return false;
    pp_file_name(prop.name, name, sizeof name);
    const int k = snprintf(buf, n, "%s_cc%d%d_cudnn%zu", name, prop.major, prop.minor, cudnnGetVersion());
    return k > 0 && (size_t)k < n;
}

pp_status pcu_devprop_capture(cudnnHandle_t handle, char **json, int64_t *len, pp_err *err) {
    cudnnBackendDescriptor_t d;
    *json = NULL, *len = 0;
    DN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &d), "device properties");
    int64_t n = 0;
    cudnnStatus_t st = cudnnBackendSetAttribute(d, CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(d);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, NULL);
    char *buf = st == CUDNN_STATUS_SUCCESS && n > 0 ? malloc((size_t)n + 1) : NULL;
    if (buf) st = cudnnBackendGetAttribute(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n, buf);
    cudnnBackendDestroyDescriptor(d);
    if (st != CUDNN_STATUS_SUCCESS || !buf) {
        free(buf);
        return PP_FAIL(err, PP_ERUNTIME, "cuDNN device properties of this GPU: %s",
                       st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st) : "an empty description");
    }
    buf[n] = 0;
    *json = buf, *len = n;
    return PP_OK;
}

pp_status pcu_devprop_load(const char *json, int64_t len, cudnnBackendDescriptor_t *out, pp_err *err) {
    *out = NULL;
    DN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, out), "device properties");
    cudnnStatus_t st = cudnnBackendSetAttribute(*out, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, len,
                                                json);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(*out);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnnBackendDestroyDescriptor(*out);
        *out = NULL;
        return PP_FAIL(err, PP_EINVAL, "cuDNN refused the device description (%lld bytes): %s", (long long)len,
                       cudnnGetErrorString(st));
    }
    return PP_OK;
}
