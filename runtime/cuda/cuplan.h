/* cuplan.h: the CUDA backend's step list, made by a pure-C planner
 * (plan_cuda.c) from one stage of a plan, and run two ways: on a GPU by the
 * engine (exec_cuda.c: own kernels, cuDNN graphs, cuBLASLt, copies, host
 * fallbacks) and on the host by the emulator (emu.c), which also lints every
 * step. Neither runs anything the step list does not say.
 *
 * Memory is a handful of spaces, each one device buffer per stage:
 *   ARENA    the stage's activations, packed again by the planner from the
 *            steps (plan_cuda.c, repack_arena): a tensor has bytes from the
 *            first step that touches it to the last (one compute stream runs
 *            the steps in order), a view's output has its source's bytes, and
 *            the output of a node absorbed into another's step has none, so a
 *            product may write its bias Add's output although the plan put
 *            that over the product's input;
 *   WEIGHTS  every weight of the stage, packed 256-aligned, uploaded once;
 *   IN, OUT  the boundary messages, laid out as pprt_stage.in/out;
 *   WORK     a fixed workspace: the error word of the gather kernels at 0,
 *            then the cuDNN/cuBLASLt workspace.
 * A step's operands are regions (space, offset, bytes). */
#ifndef PPRT_CUDA_CUPLAN_H
#define PPRT_CUDA_CUPLAN_H

#include <stdio.h>

#include "../dopt.h"
#include "../pprt.h"
#include "ktable.h"

enum { PCU_SP_ARENA, PCU_SP_WEIGHTS, PCU_SP_IN, PCU_SP_OUT, PCU_SP_WORK, PCU_SP_COUNT };

#define PCU_WORK_ERR 0          /* offset of the error word in WORK */
#define PCU_WORK_LIB 256        /* offset of the library workspace in WORK */
#define PCU_LIB_WORKSPACE (32u << 20) /* bytes: fixed, so engine choices never depend on memory */

typedef struct pcu_ref {
    int32_t space;  /* PCU_SP_* */
    int32_t tensor; /* the stage's tensor id, or -1 */
    uint64_t off, bytes;
} pcu_ref;

/* The message buffers a stage runs on must be 16-byte aligned: a widened
 * strided copy (plan_cuda.c's perm_widen) moves 16 aligned bytes a thread
 * (every allocator of the links gives 64 or 256). Both executors check. */
static inline pp_status pcu_check_msgs(int stage, const void *in, const void *out, pp_err *err) {
    if (((uintptr_t)in | (uintptr_t)out) % 16)
        return PP_FAIL(err, PP_ERUNTIME, "stage %d: message buffers %p, %p not 16-byte aligned (internal)", stage, in,
                       out);
    return PP_OK;
}

/* Whether two regions share bytes (an absent operand, space -1, meets none). */
static inline bool pcu_ref_meet(pcu_ref a, pcu_ref b) {
    return a.space == b.space && a.space >= 0 && a.off < b.off + b.bytes && b.off < a.off + a.bytes;
}

typedef enum pcu_step_kind {
    PCU_S_KERNEL, /* an own kernel (kmath.h) */
    PCU_S_CONV,   /* a cuDNN convolution graph (ConvTranspose, pp.ConvGradX: backward data; pp.ConvGradW:
                   * backward filter) */
    PCU_S_MATMUL, /* a cuBLASLt matrix product */
    PCU_S_COPY,   /* a device-to-device copy of bytes */
    PCU_S_HOST,   /* download the node's inputs, run its reference kernel, upload its outputs */
} pcu_step_kind;

/* A convolution as cuDNN's graph sees it: NCHW (or NCDHW) tensors, fully
 * packed, 2 or 3 spatial dims (1-D lifted to 2-D), then bias [1,K,1,1],
 * residual (Y's shape) and activation as pointwise ops of the same graph.
 * transpose: the convolution's backward data (ConvTranspose: X is dy, Y is
 * dx, W is the filter [X's C, Y's C / groups, k...]). */
/* transpose: backward data (ConvTranspose, pp.ConvGradX): x is dY [N,K,out],
 * y is dX [N,C,in]; wgrad: backward filter (pp.ConvGradW): x is X, w is dW
 * (the step's output, operand 4), y is dY (operand 1). pre, post, stride
 * and dil are always the forward convolution's. */
typedef struct pcu_conv {
    int32_t transpose, nsp, groups, act, has_bias, has_res, wgrad;
    int32_t dt; /* x's, w's, bias's, residual's and y's type: PCU_T_F16 / PCU_T_BF16 in a half plan (cuDNN's HALF /
                 * BFLOAT16 tensors, float compute and pointwise math), else f32 */
    int64_t x[5], w[5], y[5];
    int64_t pre[3], post[3], stride[3], dil[3];
    float lo, hi; /* Clip bounds (act 2) */
    /* channels-last (--cuda-layout, plan_cuda.c "Layouts"): x, y and the residual NHWC ([N, H, W, C] in memory,
     * the dims above still NCHW's), w KRSC (reordered once at upload: pcu_plan.wperm; ConvTranspose's [C, K/g, R,
     * S] as [C, R, S, K/g]); a 2-D forward or backward-data convolution. 0: every tensor packed NCHW / KCRS */
    int32_t nhwc;
} pcu_conv;

/* The element strides of a conv step's x (which 0), w (1) and y (2, and the
 * residual) as cuDNN's tensors say them: packed in the dims' order, or with
 * nhwc the channel dim (dim 1) innermost and the spatial dims outside it
 * (NHWC, KRSC). dnn.c gives these to cuDNN; the emulator reads the
 * operands through them. */
static inline void pcu_layout_strides(const int64_t *d, int nd, bool nhwc, int64_t *st) {
    int64_t a = 1;
    if (!nhwc) {
        for (int i = nd - 1; i >= 0; i--) st[i] = a, a *= d[i];
        return;
    }
    st[1] = 1, a = d[1];
    for (int i = nd - 1; i >= 2; i--) st[i] = a, a *= d[i];
    st[0] = a;
}
static inline void pcu_conv_strides(const pcu_conv *c, int which, int64_t *st) {
    pcu_layout_strides(which == 0 ? c->x : which == 1 ? c->w : c->y, 2 + c->nsp, c->nhwc != 0, st);
}

/* A cuBLASLt product, column-major as cuBLASLt sees it:
 * D[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] (+ bias[row]) (Relu),
 * op(A) m x k, op(B) k x n, D m x n with leading dims lda, ldb, ldc (C and D
 * share ldc) and batch strides sa, sb, sc in elements (0: the same matrix in
 * every batch). A row-major Y = X W is planned as Y^T = W^T X^T. */
typedef struct pcu_mm {
    int32_t transa, transb, has_c, bias, relu;
    int32_t views; /* bit 0: A, bit 1: B is a folded view (--cuda-stride-views: a Transpose, Slice, Split or
                    * Gather of one index that became this operand's leading dim, offset, transpose and batch
                    * stride over its source's bytes; its region starts at the view's first element) */
    int64_t m, n, k, batch, lda, ldb, ldc, sa, sb, sc;
    float alpha, beta;
    /* the element type of A, B, C, D and the bias: PCU_T_F32, or PCU_T_F16 / PCU_T_BF16 in a half plan (ppcc
     * --precision bf16|fp16): cuBLASLt's 16F / 16BF matrices, compute 32F (f32 sums, D rounded to nearest even) */
    int32_t dt;
} pcu_mm;

/* Operands by kind (inputs first; an own kernel's row in kernels.def says
 * which of them its thread function gets, and which it writes):
 *   KERNEL EW      x0 [x1 [x2]] y
 *          PERM    x [indices] y
 *          RED, SOFTMAX, POOL, RESIZE, CUMSUM      x y
 *          GATHER_EL       x indices y
 *          TOPK    x values [indices]
 *          SCATTER indices updates y (y holds the data: read and written)
 *          TRILU   x y
 *          ROPE    x cos sin [position_ids] y
 *          ATTN    Q K V [mask] [past_key] [past_value] [nonpad] Y [qk] scratch (WORK)
 *          QUANT   x scale [zero_point] y
 *          GRIDSAMPLE      x grid y
 *          LINE, AFFGRID, COL2IM   x y
 *          ONEHOT  indices values y
 *          RNN     X W R [B] [lens] [h0] [c0] [P] [Y] [Y_h] [Y_c] [h_in] [h_out] c [zr] [t]
 *          NORM    x scale [bias] y [mean] [inv_std_dev] (absent: space -1)
 *          BN      x scale bias mean var y
 *          EPI     y [bias] [res] (y read and written)
 *   CONV   x w [bias] [res] y
 *   MATMUL a b [c] d [bias]
 *   COPY   src dst
 *   HOST   the node's inputs then outputs (absent inputs: space -1) */
typedef struct pcu_step {
    int32_t kind, kernel; /* pcu_step_kind, pcu_kernel_kind (kernels.def) */
    int32_t node;         /* the stage's node, -1 for a pass-through copy */
    int32_t n_ops;
    pcu_ref *ops;
    int64_t threads;      /* KERNEL: threads launched (PCU_BLOCK per block) */
    int32_t ptype;        /* KERNEL PERM: element type (Pad's constant) */
    int32_t conv_fuse;    /* CONV: its bias, residual and activation in the graph even at --cuda-conv-fusion off
                           * (a training plan's half route, whose f32 route rounds the biased sum once:
                           * plan_cuda.c, half_route) */
    union {
#define PCU_KERNEL(NAME, stem, u, desc, writes, inplace, esize, extent, call) pcu_##stem u;
#include "kernels.def"
#undef PCU_KERNEL
        pcu_conv conv;
        pcu_mm mm;
    } u;
    char why[96]; /* HOST: why the node falls back; a transpose between the layouts: which way, of what */
} pcu_step;

typedef struct pcu_counts {
    int nodes, own, cudnn, cublas, copies, host, fused; /* fused: nodes absorbed into another's step */
    int views; /* nodes folded into their readers (--cuda-stride-views): no step of their own */
    /* a mixed-precision training plan's products (ppcc --train --precision; plan_cuda.c, half_route): those whose
     * float operands are Casts from a half type H (half_cand), those of them that read the H tensors in place
     * and write their output Cast's H tensor (half: cuBLASLt 16F/16BF, cuDNN HALF/BFLOAT16), the others by why
     * (PCU_HALF_*), and the Casts skipped (casts_skipped, among fused) */
    int half, half_cand, half_why[4], casts_skipped;
    int half_cut; /* operands and outputs of half-route products converted in WORK where a cut falls in their Casts */
    int transposes; /* NCHW <-> NHWC strided copies the layout inserted (--cuda-layout nhwc; per micro-batch) */
    int nhwc;       /* nodes run channels-last */
} pcu_counts;
/* why a product of a mixed-precision training plan stays on f32 (pcu_counts.half_why) */
enum { PCU_HALF_OFF, PCU_HALF_OPERAND, PCU_HALF_OUTPUT, PCU_HALF_OTHER };

/* A stage's steps by what a GPU runs for them (pcu_plan_tally): launches of
 * own kernels (strided copies apart), strided copies (the PERM kernel:
 * Transpose, Slice, Gather, Split, Concat, ...), cuBLASLt products, cuDNN
 * convolutions, the epilogue kernels that follow a convolution alone (the
 * default, --cuda-conv-fusion off), device copies, host fallbacks; and how
 * many strided copies and device copies write a tensor that a product
 * (cuBLASLt, or the fused attention kernel) reads, directly or through a
 * view, and how many nodes were folded into a product's operand. launches:
 * everything but the host steps. */
typedef struct pcu_tally {
    int steps, launches, own, perm, cublas, cudnn, epilogues, copies, host;
    int perm_to_product, copy_to_product, folded;
} pcu_tally;

typedef struct pcu_plan {
    const pprt_plan *p;
    const pprt_stage *st;
    int n_steps, cap;
    pcu_step *steps;
    uint64_t bytes[PCU_SP_COUNT];
    uint64_t *woff;      /* tensor id -> offset in WEIGHTS (UINT64_MAX: not a weight) */
    int *root;           /* tensor id -> the arena tensor whose bytes it has (itself, or a view's source) */
    pcu_counts counts;
    int fa_unfused;   /* ppcc's attention patterns the fused kernel does not take (--cuda-fused-attention on) */
    char fa_why[160]; /* the first's node and why */
    /* the planner's own arena tensors (NHWC or NCHW copies, plan_cuda.c "Layouts"): tensor ids st->n_tensors
     * .. n_tensors - 1, temp_bytes[id - st->n_tensors] bytes each, a copy of stage tensor temp_of[...] */
    int n_tensors, n_temps;
    uint64_t *temp_bytes;
    int *temp_of;
    /* tensor id -> 1: a weight a channels-last convolution reads as W, uploaded KRSC (pcu_weight_put); NULL:
     * none */
    unsigned char *wperm;
    /* a step's parameters took a value from a weight that varies
     * (pprt_tdesc.varies, training's): re-uploading the weights (the
     * executors' reload) cannot redo that, a fresh plan must */
    bool folds_varying;
} pcu_plan;

typedef struct pcu_plan_opts {
    bool host_only; /* every node a HOST step (a test of the fallback path) */
    const unsigned char *host_node; /* per node (NULL: none): 1 makes it a HOST step; the executor sets it
                                     * for a node whose library step found no engine, and replans */
    bool narrow_copies;             /* --cuda-wide-copies off: strided copies an element a thread, as given */
    bool row_blocks;                /* --cuda-row-kernels on: Softmax and LayerNorm over the last axis, rows of
                                     * up to PCU_ROW_MAX, as one launch of a block per row (kmath.h) */
    bool fused_attention;           /* --cuda-fused-attention on: each attention pattern ppcc marked (plan
                                     * Node.pattern) whose shapes the kernel takes as one cooperative kernel */
    bool stride_views;              /* --cuda-stride-views on: a Transpose, Slice, Split or Gather of one
                                     * constant index whose output only products (or other such views) read
                                     * becomes the products' strides over its source: no copy step */
    bool wide_elementwise;          /* --cuda-wide-elementwise on: f32 elementwise steps whose operands allow it
                                     * four elements a thread, 16-byte loads and stores (kmath.h pcu_ewv_at) */
    bool f32_products;              /* --cuda-half-products off: a mixed-precision training plan's products on
                                     * the f32 copies of their half operands, as the graph says */
    bool nhwc;                      /* --cuda-layout: the plan's 2-D convolutions channels-last, the tensors
                                     * between them too (plan_cuda.c "Layouts"); an inference plan only */
} pcu_plan_opts;

/* Whether --cuda-layout LAYOUT (PCU_LAYOUT_*) puts plan p's convolutions
 * channels-last: nhwc for any inference plan, auto for a half one (ppcc
 * --precision fp16|bf16: every GPU CUDA 13 runs, compute capability 7.5 and
 * up, has tensor cores, whose half engines want NHWC), nchw never; a
 * training plan stays NCHW. */
enum { PCU_LAYOUT_AUTO, PCU_LAYOUT_NCHW, PCU_LAYOUT_NHWC };
static inline bool pcu_layout_nhwc(const pprt_plan *p, int layout) {
    if (p->train_devices > 0 || layout == PCU_LAYOUT_NCHW) return false;
    return layout == PCU_LAYOUT_NHWC || p->precision != 0;
}

/* Weight tensor tid's bytes as the weight space holds them, from its plan
 * bytes src into dst: a copy, or KCRS -> KRSC where pl->wperm says. */
void pcu_weight_put(const pcu_plan *pl, int tid, void *dst, const void *src);

/* The parameter block of a Resize (or of its gradient, pp.ResizeGrad) from
 * xs to ys, a its attributes, tin its n_in inputs (the first of shape xs,
 * the others constants), over at most two resized axes of at most 64 taps
 * each (an antialiased downscale may need more), into *k (n: the elements
 * of ys). False: not an own kernel's (the host fallback). */
bool pcu_resize_block(pp_attrs a, const pp_tinfo *tin, int n_in, const pp_shape *xs, const pp_shape *ys,
                      pcu_resize *k);

/* The step list of stage st. Fails only on what the plan loader cannot have
 * let through, or out of memory; anything the planner does not cover becomes
 * a HOST step that says why. */
pp_status pcu_plan_build(const pprt_plan *p, const pprt_stage *st, const pcu_plan_opts *o, pcu_plan *out,
                         pp_err *err);
void pcu_plan_free(pcu_plan *pl);
/* The stage's steps counted by kind (pcu_tally). */
void pcu_plan_tally(const pcu_plan *pl, pcu_tally *t);
/* The region of tensor tid of the stage. */
pcu_ref pcu_tensor_ref(const pcu_plan *pl, int tid);
/* How op's nodes run on the GPU: "cuDNN", "cuBLASLt", "own kernel", "copy"
 * or "host fallback" (a node whose types or attributes its route does not
 * take runs on the host fallback as well); NULL for an op out of range. */
const char *pcu_op_route(pp_op op);
/* One line on f naming the stage's nodes on the host fallback and why (at
 * most four, then how many more); nothing when there are none. */
void pcu_plan_explain(const pcu_plan *pl, const char *backend, FILE *f);
/* --cuda-explain: one line per own-kernel step, its node and kernel
 * ("stage 0 node '/attn/Softmax': softmax in one block"). */
void pcu_plan_explain_kernels(const pcu_plan *pl, const char *backend, FILE *f);
/* "Conv", "cuDNN conv", ... for messages. */
const char *pcu_step_name(const pcu_step *s);

/* Lint of every step (emu.c): each operand inside its space, each access of
 * an own kernel inside its operand (computed from the parameter block), no
 * output overlapping an input unless the kernel is elementwise on the same
 * bytes, launch limits, and no two arena tensors (views one with their
 * source) sharing bytes over a step where both are live. Returns the first
 * violation. */
pp_status pcu_lint(const pcu_plan *pl, pp_err *err);
/* The largest element offset + 1 that kernel step s reads or writes in
 * operand k, in elements of the operand's type (-1: not known). */
int64_t pcu_kernel_extent(const pcu_step *s, int k);
/* Bytes per element of operand k of kernel step s. */
int pcu_kernel_esize(const pcu_step *s, int k);

/* Whether the cuDNN graph of conv step c holds its bias, residual and
 * activation: a forward convolution that has any (backward data, i.e.
 * ConvTranspose, is never fused). dnn.c builds its fused graph by this. */
bool pcu_conv_graph_fuses(const pcu_conv *c);
/* Whether the epilogue kernel must follow the convolution: c has bias,
 * residual or activation and the graph that ran (graph_fused) lacks them.
 * The engine (a fused graph, or the convolution alone when the fused one
 * found no engine) and the emulator both ask this, so the emulator runs
 * the epilogue exactly where the GPU does. */
bool pcu_conv_epilogue(const pcu_conv *c, bool graph_fused);
/* The epilogue kernel's parameters for conv step c. */
pcu_epi pcu_conv_epi(const pcu_conv *c);

/* The emulator's host versions of the library steps (emu.c), over host
 * pointers: what cuDNN and cuBLASLt are asked to compute (a convolution's
 * graph: with its bias, residual and activation where it fuses them). */
void pcu_emu_conv(const pcu_conv *c, const float *x, const float *w, const float *bias, const float *res,
                  float *y);
/* How cuBLASLt reads a product's f32 A and B under pprt --precision (the
 * engine's compute type, exec_cuda.c): as they are (f32: CUBLAS_COMPUTE_32F),
 * or each element rounded to TF32, bfloat16 or float16 first
 * (32F_FAST_TF32, _FAST_16BF, _FAST_16F: tensor cores on the rounded
 * values, the sums in f32). The emulator rounds to nearest even
 * (pcu_lt_round; float16 overflows to infinity): the size of the GPU's error,
 * not its bits (cuBLASLt sums in another order, and may round TF32 ties
 * otherwise). C, the bias and D stay f32. */
typedef enum { PCU_LT_F32 = 0, PCU_LT_TF32, PCU_LT_BF16, PCU_LT_F16 } pcu_lt_inputs;
static inline int pcu_lt_inputs_of(pprt_precision pr) {
    return pr == PPRT_TF32 ? PCU_LT_TF32 : pr == PPRT_BF16 ? PCU_LT_BF16 : pr == PPRT_FP16 ? PCU_LT_F16 : PCU_LT_F32;
}
float pcu_lt_round(float v, int inputs);
/* The precision a stage's f32 products run at (cuBLASLt's compute type,
 * cuDNN strict or not): pprt --precision where given; by default TF32 in a
 * half plan (ppcc --precision bf16|fp16, for inference or --train), whose
 * autocast policy rounds what products read to the half type, values TF32
 * holds exactly, so tensor cores read the very inputs of strict f32. These
 * are the products that stay f32 in a half plan: a training plan's whose
 * f32 output feeds a sum before its Cast (ResNet's downsampling data
 * gradients: 8 of ResNet-50's 161), ConvTranspose; strict f32 ran them on
 * the CUDA cores, at about an eighth of the tensor cores' TF32 rate on an
 * H100. cuda-emu rounds as the GPU reads (pcu_lt_round), which changes no
 * half-rounded input. */
static inline pprt_precision pcu_products_precision(const pprt_plan *p, pprt_precision asked) {
    const bool half = p->train_devices > 0 ? p->optim.precision != 0 : p->precision != 0;
    return asked == PPRT_F32 && half ? PPRT_TF32 : asked;
}
/* A product as cuBLASLt computes it (column-major, the step's pcu_mm). A half
 * product (m->dt F16 or BF16: A, B, C, D and the bias in that type) sums in
 * f32 over the half values (inputs unread: the compute type is 32F) and
 * rounds D to nearest even, writing only D's matrix elements. */
void pcu_emu_matmul(const pcu_mm *m, int inputs, const void *a, const void *b, const void *c, void *d,
                    const void *bias);
/* Thread `i` of own-kernel step s over operand pointers op[] (PCU_KERNEL_OPS
 * of them, one per operand, NULL where absent): the row's call of
 * kernels.def, as the GPU's thread i runs it; err: the gather kernels' error
 * word. */
void pcu_kernel_thread(const pcu_step *s, void *const *op, int *err, int64_t i);

/* The parameters of an elementwise kernel: y (shape ys) = op of k inputs of
 * shapes xs[] broadcast to ys, the output's dims merged where every input
 * behaves alike. Returns the output's element count. */
int64_t pcu_ew_make(int op, int k, const pp_shape *const *xs, const pp_shape *ys, int tin, int tout, float p0,
                    float p1, int mode, pcu_ew *e);

/* A plan's counts as pprt_exec_counts (own: every node not on the host,
 * post_ops: nodes absorbed into another's step, views: copies). */
void pprt_cuda_counts_of(const pcu_counts *c, pprt_exec_counts *out);

/* The device optimizer's address query (dopt.h, PPRT_DOPT_ADDR), the same
 * on cuda and cuda-emu: tensor -1 asks for the device alone, else weight
 * tensor c->tensor's bytes in the weight space `weights` of plan pl. */
static inline pp_status pcu_dopt_addr(const pprt_stage *st, const pcu_plan *pl, unsigned char *weights, int device,
                                      pprt_dopt_call *c, pp_err *err) {
    c->addr = NULL, c->device = device;
    if (c->tensor < 0) return PP_OK;
    if (c->tensor >= st->n_tensors || st->t[c->tensor].kind != PPRT_WEIGHT)
        return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d's tensor %d is no weight", st->index, c->tensor);
    c->addr = weights + pl->woff[c->tensor];
    return PP_OK;
}

#endif
