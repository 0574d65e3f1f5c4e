/* plan_cuda.c: the CUDA backend's planner: one stage of a plan -> a step list
 * (cuplan.h). Pure C, no CUDA: the engine (exec_cuda.c) issues the steps on
 * a GPU, the emulator (emu.c) runs them on the host.
 *
 * Per node, in node order:
 *   - Conv, pp.FusedConv (bias, residual, Relu/Clip), ConvTranspose: a cuDNN
 *     convolution graph (f32);
 *   - MatMul, Gemm, and Einsum where it is a matrix product: a cuBLASLt product (f32; broadcast batches through
 *     strides, a batch over a shared weight folded into the rows); a MatMul
 *     or Gemm followed, inside the stage, by an Add of a bias vector [N]
 *     (and a Relu) that reads only it takes them as the product's epilogue
 *     (ppcc never cuts such a chain, so the split never changes this);
 *   - elementwise (with Sin/Cos/Tan by kmath.h's own argument reduction,
 *     Sign, Shrink, IsNaN/IsInf, the bitwise ops and BitShift), Where, Cast, Clip, Softmax, reductions, ArgMax/ArgMin,
 *     global pools, MaxPool/AveragePool, Batch/Layer/Instance/Group
 *     normalization, Transpose, Slice, Concat, Split, Gather, Expand, Tile,
 *     Pad (every mode), ScatterND/ScatterElements, Trilu: an own kernel (kmath.h);
 *   - Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: nothing
 *     between two arena tensors (the stage's own arena gives the output its
 *     source's bytes: repack_arena), else a copy;
 *   - anything else, and any of the above with types or attributes the step
 *     does not cover: a HOST step (download, reference kernel, upload) that
 *     records why.
 * Tensors received and sent on unchanged get a copy from IN to OUT. Then the
 * arena is packed again from the steps (repack_arena). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/op_fns.h"
#include "../../ir/geom.h"
#include "../../ir/pack.h"
#include "../../ir/shape_attn.h"
#include "../../ir/shape_nn.h"
#include "../../ir/shape_rnn.h"
#include "cuplan.h"

_Static_assert((int)PCU_T_F32 == (int)PP_F32 && (int)PCU_T_U8 == (int)PP_U8 && (int)PCU_T_I8 == (int)PP_I8 && (int)PCU_T_U16 == (int)PP_U16 && (int)PCU_T_I16 == (int)PP_I16 && (int)PCU_T_I32 == (int)PP_I32 && (int)PCU_T_I64 == (int)PP_I64 && (int)PCU_T_BOOL == (int)PP_BOOL && (int)PCU_T_F16 == (int)PP_F16 && (int)PCU_T_F64 == (int)PP_F64 && (int)PCU_T_U32 == (int)PP_U32 && (int)PCU_T_U64 == (int)PP_U64 && (int)PCU_T_BF16 == (int)PP_BF16,
               "kmath.h's element types are ONNX's");
_Static_assert(PCU_MAXD == PP_MAX_DIMS, "kmath.h's dims are the plan's");

#define PCU_VIEW_MIN_ROWS 64 /* a fold may batch a product more than its copy would only over this many rows */

/* A tensor as strides over another's bytes (--cuda-stride-views): element
 * (i0, i1, ...) of it is element off + sum(i_d * st[d]) of tensor src. */
typedef struct sview {
    int32_t src, rank; /* src: -1 where the tensor is not a folded view */
    int64_t off, dim[PP_MAX_DIMS], st[PP_MAX_DIMS];
    /* a dim a Reshape merged from two that do not walk as one (torch's heads [S, B*H, D] over [S, B, 3E]):
     * in[d] > 0, index i at (i / in[d]) * st[d] + (i % in[d]) * ist[d]; 0: one stride */
    int64_t in[PP_MAX_DIMS], ist[PP_MAX_DIMS];
} sview;

static bool two_level(const sview *v) {
    for (int d = 0; d < v->rank; d++)
        if (v->in[d]) return true;
    return false;
}

typedef struct planner {
    pcu_plan *pl;
    const pprt_plan *p;
    const pprt_stage *st;
    int *uses;  /* tensor id -> readers in the stage (+1 when sent) */
    bool *done; /* node absorbed by an earlier step */
    int *alias; /* tensor id -> the arena tensor whose bytes it is (a view's output), or -1 */
    int *ln_of; /* with rows: tensor id -> the first LayerNorm or RMSNorm node reading it as X, or -1 */
    bool narrow; /* --cuda-wide-copies off: perm_widen leaves copies as given */
    bool rows;   /* --cuda-row-kernels on: Softmax and LayerNorm rows in one launch of a block per row */
    bool fattn;  /* --cuda-fused-attention on: ppcc's attention patterns as one kernel (plan_fattn) */
    bool wide_ew; /* --cuda-wide-elementwise on: f32 elementwise steps four elements a thread (ew_wide) */
    const unsigned char *host_node; /* per node: forced onto the host (NULL: none) */
    int *fa_head; /* node -> the first MatMul of the attention pattern it closes (plan_fattn), or -1; then
                   * n_nodes more: node -> that pattern's Mul or Div node, or -1; then n_nodes more: node -> the
                   * Mul or Div of its Q by a scalar (fattn_prescale), or -1; then n_nodes more: node -> its Add
                   * of a mask (fa_mask), or -1; then n_nodes more: node -> its Where (fa_where), or -1; then
                   * n_nodes more: node -> the first Reshape of its frame around a mask (fa_frame), or -1; then
                   * n_nodes more: node -> that frame's Add, or -1 */
    sview *view;  /* tensor id -> the view it is (--cuda-stride-views; src -1: its own bytes), or NULL */
    pprt_node *hnode; /* node -> the product as its half route reads it (half_route; op PP_OP_COUNT: none), or NULL */
    int32_t *hio;     /* hnode's tensor ids: PCU_HALF_IO a node, its inputs then its output */
    pprt_tdesc *xt;   /* the half route's tensors of its own (ids from st->n_tensors on): H copies in WORK */
    pcu_ref *xref;    /* their regions */
    int n_xt;
    struct hname *hn; /* the whole plan's tensors by name (half_names) */
    int n_hn;
    /* layouts (--cuda-layout nhwc, "Layouts" below; all NULL when off) */
    signed char *mode; /* node -> 1: runs channels-last */
    signed char *lay;  /* tensor -> 1: channels-last by the plan's rule (lay_rule) */
    int (*have)[2];    /* tensor -> the tensor (itself or a temp) that holds its value NCHW [0] / NHWC [1], or -1 */
    int *over;         /* tensor -> what the node being planned reads or writes for it (-1: itself) */
    pprt_tdesc *shadow; /* tensor -> its description with the dims permuted to N, H, W, C (a channels-last */
    bool *shadow_on;    /* elementwise node's operands while it is planned) */
    unsigned char *wkrsc; /* weight -> 1: only channels-last convolutions read it, as W: uploaded KRSC */
    bool cur_nhwc;        /* the node being planned runs channels-last */
    int temp_cap;
    pp_err *err;
} planner;

/* ---- steps and operands -------------------------------------------------------------------- */

pcu_ref pcu_tensor_ref(const pcu_plan *pl, int tid) {
    if (tid < 0) return (pcu_ref){-1, -1, 0, 0};
    if (tid >= pl->st->n_tensors) /* a temp of the layouts: its offsets from 0 until repack_arena */
        return (pcu_ref){PCU_SP_ARENA, tid, 0, pl->temp_bytes[tid - pl->st->n_tensors]};
    const pprt_tdesc *t = &pl->st->t[tid];
    switch (t->kind) {
    case PPRT_ACTIVATION: return (pcu_ref){PCU_SP_ARENA, tid, t->offset, t->nbytes};
    case PPRT_WEIGHT: return (pcu_ref){PCU_SP_WEIGHTS, tid, pl->woff[tid], t->nbytes};
    case PPRT_RECV: return (pcu_ref){PCU_SP_IN, tid, pl->st->in.off[t->offset], t->nbytes};
    default: return (pcu_ref){PCU_SP_OUT, tid, pl->st->out.off[t->offset], t->nbytes};
    }
}

static pcu_step *add_step(planner *P, int kind, int node, int n_ops) {
    pcu_plan *pl = P->pl;
    if (pl->n_steps == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 64;
        pcu_step *s = realloc(pl->steps, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        pl->steps = s;
        pl->cap = cap;
    }
    pcu_step *s = &pl->steps[pl->n_steps];
    memset(s, 0, sizeof *s);
    s->ops = calloc(pp_count(n_ops), sizeof *s->ops);
    if (!s->ops) return NULL;
    pl->n_steps++;
    s->kind = kind;
    s->node = node;
    s->n_ops = n_ops;
    for (int i = 0; i < n_ops; i++) s->ops[i] = (pcu_ref){-1, -1, 0, 0};
    return s;
}

#define NEW_STEP(var, P, kind, node, n_ops)                                           \
    pcu_step *var = add_step((P), (kind), (node), (n_ops));                           \
    if (!var) return PP_FAIL((P)->err, PP_ENOMEM, "out of memory")

/* A tensor of the stage, or of the planner's own: the half route's WORK copies (ids from st->n_tensors on; a
 * training plan's) or the layouts' temps (an inference plan's: never described here, only placed, pcu_tensor_ref);
 * a channels-last elementwise node's operands with their dims permuted ("Layouts") */
static const pprt_tdesc *T(const planner *P, int tid) {
    if (tid < 0) return NULL;
    if (tid >= P->st->n_tensors) return &P->xt[tid - P->st->n_tensors];
    return P->shadow_on && P->shadow_on[tid] ? &P->shadow[tid] : &P->st->t[tid];
}
/* Its region (the node's temp for it where it reads or writes one, "Layouts") */
static pcu_ref R(const planner *P, int tid) {
    if (tid >= P->st->n_tensors && P->xt) return P->xref[tid - P->st->n_tensors];
    return pcu_tensor_ref(P->pl, P->over && tid >= 0 && tid < P->st->n_tensors && P->over[tid] >= 0 ? P->over[tid] : tid);
}
/* The offset a tensor's regions count from before repack_arena (a temp's: 0) */
static uint64_t tbase(const planner *P, int tid) {
    return tid < P->st->n_tensors ? P->st->t[tid].offset : 0;
}
static void strides_of(const pp_shape *s, int64_t *st);
static bool lay_free(const pprt_tdesc *t);
/* A channels-last node's operands see the dims as N, H, W, C: position d holds NCHW axis nhwc_from[d] */
static const int nhwc_from[4] = {0, 2, 3, 1};
/* [N, C, H, W]'s element strides in channels-last memory */
static void nhwc_strides(const pp_shape *s, int64_t *st) {
    st[1] = 1, st[3] = s->dim[1], st[2] = s->dim[3] * s->dim[1], st[0] = s->dim[2] * st[2];
}

/* How tensor tid is read: a folded view's strides over its source, else its
 * own bytes packed. */
static sview view_of(const planner *P, int tid) {
    if (P->view && tid >= 0 && tid < P->st->n_tensors && P->view[tid].src >= 0) return P->view[tid];
    sview v = {.src = tid, .rank = tid >= 0 ? T(P, tid)->shape.rank : 0};
    if (tid < 0) return v;
    for (int d = 0; d < v.rank; d++) v.dim[d] = T(P, tid)->shape.dim[d];
    strides_of(&T(P, tid)->shape, v.st);
    return v;
}

/* The region a product reads for tensor tid: its own, or a folded view's
 * source's bytes from the view's first element on (the tensor named is the
 * source, so the stage's arena keeps the source alive up to the product). */
static pcu_ref view_ref(const planner *P, int tid) {
    const sview v = view_of(P, tid);
    pcu_ref r = R(P, v.src);
    const uint64_t skip = (uint64_t)v.off * pp_dtype_size(T(P, tid)->dtype);
    if (r.space >= 0) r.off += skip, r.bytes = r.bytes > skip ? r.bytes - skip : 0;
    return r;
}

/* The step of an own kernel over node ni's first input and first output (x
 * y) in `threads` threads, counted; the caller sets its parameter block.
 * NULL: out of memory. */
static pcu_step *xy_kernel(planner *P, int ni, int kernel, int64_t threads) {
    const pprt_node *n = &P->st->nodes[ni];
    pcu_step *s = add_step(P, PCU_S_KERNEL, ni, 2);
    if (!s) return NULL;
    s->kernel = kernel;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->out[0]);
    s->threads = threads;
    P->pl->counts.own++;
    return s;
}
#define XY_STEP(var, P, ni, kernel, threads)                                          \
    pcu_step *var = xy_kernel((P), (ni), (kernel), (threads));                        \
    if (!var) return PP_FAIL((P)->err, PP_ENOMEM, "out of memory")

static int64_t numel(const pp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static void strides_of(const pp_shape *s, int64_t *st) {
    int64_t a = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = a;
        a *= s->dim[i];
    }
}

/* A HOST step: the node on its reference kernel, between a download and an upload. */
static pp_status host_step(planner *P, int ni, const char *why) {
    const pprt_node *n = &P->st->nodes[ni];
    NEW_STEP(s, P, PCU_S_HOST, ni, n->n_in + n->n_out);
    for (int k = 0; k < n->n_in; k++) s->ops[k] = R(P, n->in[k]);
    for (int k = 0; k < n->n_out; k++) s->ops[n->n_in + k] = R(P, n->out[k]);
    snprintf(s->why, sizeof s->why, "%s", why);
    P->pl->counts.host++;
    return PP_OK;
}

static pp_status copy_step(planner *P, int ni, pcu_ref src, pcu_ref dst) {
    if (src.space == dst.space && src.off == dst.off) return PP_OK; /* the plan gave them the same bytes */
    NEW_STEP(s, P, PCU_S_COPY, ni, 2);
    s->ops[0] = src;
    s->ops[1] = dst;
    return PP_OK;
}

/* ---- elementwise --------------------------------------------------------------------------- */

int64_t pcu_ew_make(int op, int k, const pp_shape *const *xs, const pp_shape *ys, int tin, int tout, float p0,
                    float p1, int mode, pcu_ew *e) {
    const int r = ys->rank;
    int64_t dim[PP_MAX_DIMS];
    bool var[3][PP_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < r; i++) {
        const int64_t d = ys->dim[i];
        bool f[3];
        for (int q = 0; q < k; q++) {
            const int iq = i - (r - xs[q]->rank);
            f[q] = (iq >= 0 ? xs[q]->dim[iq] : 1) == d;
        }
        pp_bcast_merge(d, f, k, dim, var, &nd);
    }
    *e = (pcu_ew){.op = op, .nin = k, .rank = nd, .mode = mode, .tin = tin, .tout = tout, .n = numel(ys), .p0 = p0,
                  .p1 = p1};
    for (int i = 0; i < nd; i++) e->dim[i] = dim[i];
    for (int q = 0; q < k; q++) {
        int64_t acc = 1;
        for (int i = nd - 1; i >= 0; i--) {
            e->st[q][i] = var[q][i] ? acc : 0;
            if (var[q][i]) acc *= dim[i];
        }
    }
    return e->n;
}

/* The elements a thread of kind EWV takes for step s (kind EW), or 0 where
 * it may not run 16 bytes a thread (kmath.h, pcu_ewv_at): f32, f16 or bf16
 * in and out (4 or 8 elements), an op EWV computes, the merged innermost
 * dim a multiple of that width that every input walks with stride 1 or 0,
 * and every operand on 16 bytes of a space whose base is (an arena operand
 * also from its tensor's start, which repack_arena keeps; run_dev checks
 * the messages'). */
static int ew_wide(const planner *P, const pcu_step *s) {
    const pcu_ew *e = &s->u.ew;
    const bool typed = e->tin == e->tout && (e->tin == PCU_T_F32 || e->tin == PCU_T_F16 || e->tin == PCU_T_BF16);
    const int width = typed ? 16 / (int)pcu_tsize(e->tin) : 0;
    if (!P->wide_ew || !typed || !pcu_ewv_op(e->op, e->nin) || e->rank < 1 || e->dim[e->rank - 1] % width)
        return 0;
    for (int q = 0; q <= e->nin; q++) {
        const pcu_ref *o = &s->ops[q];
        if (q < e->nin && e->st[q][e->rank - 1] != 0 && e->st[q][e->rank - 1] != 1) return 0;
        if (o->space < 0 || o->space == PCU_SP_WORK || o->off % 16) return 0;
        if (o->space == PCU_SP_ARENA && (o->tensor < 0 || (o->off - tbase(P, o->tensor)) % 16)) return 0;
    }
    return width;
}

/* y (ref yr) = op of k inputs (refs xr[]), as pcu_ew_make. */
static pp_status ew_step(planner *P, int ni, int op, int k, const pp_shape *const *xs, const pcu_ref *xr,
                         const pp_shape *ys, pcu_ref yr, int tin, int tout, float p0, float p1, int mode) {
    pcu_ew e;
    if (pcu_ew_make(op, k, xs, ys, tin, tout, p0, p1, mode, &e) == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, k + 1);
    s->kernel = PCU_K_EW;
    s->u.ew = e;
    for (int q = 0; q < k; q++) s->ops[q] = xr[q];
    s->ops[k] = yr;
    s->threads = e.n;
    const int width = ew_wide(P, s);
    if (width) {
        s->kernel = PCU_K_EWV;
        s->u.ewv = e;
        s->threads = e.n / width;
    }
    P->pl->counts.own++;
    return PP_OK;
}

static bool ew_float(pp_dtype t) { return t == PP_F32 || t == PP_F16 || t == PP_BF16 || t == PP_F64; }
static bool ew_int(pp_dtype t) {
    return t == PP_I8 || t == PP_I16 || t == PP_I32 || t == PP_I64 || t == PP_U8 || t == PP_U16 || t == PP_U32 ||
           t == PP_U64;
}

/* The EW op of a unary/binary/comparison node, or -1. */
static int ew_op_of(pp_op op) {
    switch (op) {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) case PP_OP_##E: return PCU_EW_##E;
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F) case PP_OP_##E: return PCU_EW_##E;
#define PP_EW_FORMULA(E, F)
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
    case PP_OP_SILU: return PCU_EW_SILU;
    case PP_OP_SIGN: return PCU_EW_SIGN;
    case PP_OP_SHRINK: return PCU_EW_SHRINK;
    case PP_OP_ISNAN: return PCU_EW_ISNAN;
    case PP_OP_ISINF: return PCU_EW_ISINF;
    case PP_OP_BITWISENOT: return PCU_EW_BITNOT;
    case PP_OP_BITWISEAND: return PCU_EW_BITAND;
    case PP_OP_BITWISEOR: return PCU_EW_BITOR;
    case PP_OP_BITWISEXOR: return PCU_EW_BITXOR;
    case PP_OP_BITSHIFT: return PCU_EW_SHL; /* direction: plan_elementwise */
    case PP_OP_NEG: return PCU_EW_NEG;
    case PP_OP_ABS: return PCU_EW_ABS;
    case PP_OP_NOT: return PCU_EW_NOT;
    case PP_OP_ADD: case PP_OP_SUM: return PCU_EW_ADD;
    case PP_OP_SUB: return PCU_EW_SUB;
    case PP_OP_MUL: return PCU_EW_MUL;
    case PP_OP_DIV: return PCU_EW_DIV;
    case PP_OP_POW: return PCU_EW_POW;
    case PP_OP_MOD: return PCU_EW_MOD;
    case PP_OP_PRELU: return PCU_EW_PRELU;
    case PP_OP_MIN: return PCU_EW_MIN;
    case PP_OP_MAX: return PCU_EW_MAX;
    case PP_OP_MEAN: return PCU_EW_ADD;
    case PP_OP_EQUAL: return PCU_EW_EQUAL;
    case PP_OP_LESS: return PCU_EW_LESS;
    case PP_OP_GREATER: return PCU_EW_GREATER;
    case PP_OP_LESSOREQUAL: return PCU_EW_LE;
    case PP_OP_GREATEROREQUAL: return PCU_EW_GE;
    case PP_OP_AND: return PCU_EW_AND;
    case PP_OP_OR: return PCU_EW_OR;
    case PP_OP_XOR: return PCU_EW_XOR;
    default: return -1;
    }
}

/* Node n's inputs as shape inference reads them: the first without its
 * bytes, the others with their constant bytes, absent ones (and those past
 * n_in, up to cap) undefined. False when n has more than cap inputs or one
 * after the first is computed at run time (the planner leaves such a node to
 * the host). */
static bool const_inputs(const planner *P, const pprt_node *n, pp_tinfo *tin, int cap) {
    if (n->n_in > cap) return false;
    for (int i = 0; i < cap; i++) {
        const pprt_tdesc *t = i < n->n_in ? T(P, n->in[i]) : NULL;
        if (!t) {
            tin[i] = (pp_tinfo){PP_UNDEFINED, {0, {0}}, NULL};
            continue;
        }
        if (i > 0 && (t->kind != PPRT_WEIGHT || !t->data)) return false;
        if (i > 0 && t->varies) P->pl->folds_varying = true;
        tin[i] = (pp_tinfo){t->dtype, t->shape, i > 0 ? t->data : NULL};
    }
    return true;
}

/* Input k of node n as shape inference sees it without bytes (absent:
 * undefined). */
static pp_tinfo shape_info(const planner *P, const pprt_node *n, int k) {
    const pprt_tdesc *t = k < n->n_in ? T(P, n->in[k]) : NULL;
    return t ? (pp_tinfo){t->dtype, t->shape, NULL} : (pp_tinfo){PP_UNDEFINED, {0, {0}}, NULL};
}

static pp_attrs attrs_of(const planner *P, const pprt_node *n) {
    return (pp_attrs){n->attrs, n->n_attrs, P->p->opset};
}

static float attr_f(const planner *P, const pprt_node *n, const char *name, float def) {
    float v = def;
    (void)pp_attr_float(attrs_of(P, n), name, def, &v, NULL);
    return v;
}

static int64_t attr_i(const planner *P, const pprt_node *n, const char *name, int64_t def) {
    int64_t v = def;
    (void)pp_attr_int(attrs_of(P, n), name, def, &v, NULL);
    return v;
}

/* The float attributes of the ops of ir/ops_unary.def, as p0 and p1. */
typedef struct {
    const char *a0, *a1;
    float d0, d1;
} unary_attr;
static const unary_attr unary_attrs[PP_OP_COUNT] = {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F) [PP_OP_##E] = {A0, A1, D0, D1},
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#include "../../ir/ops_unary.def"
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
};

static pp_status plan_add_ln(planner *P, int ni, bool *ok);

/* Unary, binary, variadic, comparison and logic nodes. Returns false (and
 * plans nothing) for what it does not cover. */
static pp_status plan_elementwise(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const int op = ew_op_of(n->op);
    *ok = false;
    if (n->op == PP_OP_ADD && !P->cur_nhwc) { /* (a LayerNorm reads NCHW: no channels-last Add joins it) */
        PP_TRY(plan_add_ln(P, ni, ok));
        if (*ok) return PP_OK;
    }
    if (op < 0 || n->n_out != 1) return PP_OK;
    const pprt_tdesc *y = T(P, n->out[0]);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0) return PP_OK;
    const pprt_tdesc *x0 = T(P, n->in[0]);
    const pp_dtype t = x0->dtype;
    for (int k = 1; k < n->n_in; k++)
        if (T(P, n->in[k])->dtype != t) return PP_OK; /* Pow with another exponent type, ... */
    float p0 = 0, p1 = 0;
    int eop = op, mode = 0;
    if (op < PCU_EW_SCALE) { /* float math */
        if (!ew_float(t)) return PP_OK;
        if ((op == PCU_EW_SIN || op == PCU_EW_COS || op == PCU_EW_TAN) && t == PP_F64) return PP_OK;
        const unary_attr *ua = &unary_attrs[n->op];
        if (ua->a0) p0 = attr_f(P, n, ua->a0, ua->d0);
        if (ua->a1) p1 = attr_f(P, n, ua->a1, ua->d1);
        if (n->op == PP_OP_GELU) {
            const char *a = "none";
            (void)pp_attr_string(attrs_of(P, n), "approximate", "none", &a, NULL);
            if (!strcmp(a, "tanh")) eop = PCU_EW_GELU_TANH;
            else if (strcmp(a, "none")) return PP_OK;
        }
    } else if (op == PCU_EW_NEG) {
        if (!ew_float(t) && t != PP_I8 && t != PP_I16 && t != PP_I32 && t != PP_I64) return PP_OK;
    } else if (op == PCU_EW_ABS) {
        if (!ew_float(t) && !ew_int(t)) return PP_OK;
    } else if (op == PCU_EW_SIGN || op == PCU_EW_SHRINK) {
        if (!ew_float(t) && !ew_int(t)) return PP_OK;
        if (op == PCU_EW_SHRINK) {
            p0 = attr_f(P, n, "bias", 0.0f);
            p1 = attr_f(P, n, "lambd", 0.5f);
        }
    } else if (op == PCU_EW_ISNAN || op == PCU_EW_ISINF) {
        if (!ew_float(t) || y->dtype != PP_BOOL) return PP_OK;
        if (op == PCU_EW_ISINF)
            mode = (attr_i(P, n, "detect_negative", 1) != 0) | (attr_i(P, n, "detect_positive", 1) != 0) << 1;
    } else if (op == PCU_EW_BITNOT || (op >= PCU_EW_BITAND && op <= PCU_EW_BITXOR)) {
        if (!ew_int(t)) return PP_OK;
    } else if (op == PCU_EW_SHL) {
        if (t != PP_U8 && t != PP_U16 && t != PP_U32 && t != PP_U64) return PP_OK;
        const char *dir = "";
        (void)pp_attr_string(attrs_of(P, n), "direction", "", &dir, NULL);
        if (!strcmp(dir, "RIGHT")) eop = PCU_EW_SHR;
        else if (strcmp(dir, "LEFT")) return PP_OK;
    } else if (op == PCU_EW_NOT || op >= PCU_EW_AND) {
        if (t != PP_BOOL) return PP_OK;
    } else if (op >= PCU_EW_EQUAL) {
        if (!ew_float(t) && !ew_int(t) && !(t == PP_BOOL && op == PCU_EW_EQUAL)) return PP_OK;
    } else { /* binary arithmetic */
        if (!ew_float(t) && !ew_int(t)) return PP_OK;
        if ((n->op == PP_OP_SUM || n->op == PP_OP_MEAN) && !ew_float(t)) return PP_OK;
        if (op == PCU_EW_POW && !ew_float(t) && t != PP_I32 && t != PP_I64) return PP_OK;
        if (op == PCU_EW_PRELU && !ew_float(t) && !ew_int(t)) return PP_OK;
        if (op == PCU_EW_MOD) {
            const int64_t fm = attr_i(P, n, "fmod", 0);
            if (fm == 1) eop = PCU_EW_FMOD;
            else if (ew_float(t) || fm != 0) return PP_OK;
        }
    }
    const pp_dtype to = y->dtype;
    if (n->n_in == 1 && op >= PCU_EW_ADD && op <= PCU_EW_MAX) { /* variadic of one: a copy */
        *ok = true;
        return copy_step(P, ni, R(P, n->in[0]), R(P, n->out[0]));
    }
    const int first = n->n_in >= 2 ? 2 : 1;
    const pp_shape *xs[2] = {&x0->shape, first == 2 ? &T(P, n->in[1])->shape : NULL};
    pcu_ref xr[2] = {R(P, n->in[0]), first == 2 ? R(P, n->in[1]) : R(P, -1)};
    PP_TRY(ew_step(P, ni, eop, first, xs, xr, &y->shape, R(P, n->out[0]), t, to, p0, p1, mode));
    for (int k = 2; k < n->n_in; k++) { /* variadic: y = y op x_k */
        const pp_shape *cs[2] = {&y->shape, &T(P, n->in[k])->shape};
        pcu_ref cr[2] = {R(P, n->out[0]), R(P, n->in[k])};
        PP_TRY(ew_step(P, ni, eop, 2, cs, cr, &y->shape, R(P, n->out[0]), t, to, 0, 0, 0));
        P->pl->counts.own--; /* one node, several steps */
    }
    if (n->op == PP_OP_MEAN) {
        const pp_shape *cs[1] = {&y->shape};
        pcu_ref cr[1] = {R(P, n->out[0])};
        PP_TRY(ew_step(P, ni, PCU_EW_SCALE, 1, cs, cr, &y->shape, R(P, n->out[0]), t, to, (float)n->n_in, 0, 0));
        P->pl->counts.own--;
    }
    *ok = true;
    return PP_OK;
}

/* Where, Cast, CastLike, Clip. */
static pp_status plan_select_cast(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *y = T(P, n->out[0]);
    *ok = false;
    if (n->op == PP_OP_WHERE) {
        const pprt_tdesc *c = T(P, n->in[0]), *a = T(P, n->in[1]), *b = T(P, n->in[2]);
        if (c->dtype != PP_BOOL || a->dtype != b->dtype || !pcu_tsize(a->dtype)) return PP_OK;
        const pp_shape *xs[3] = {&c->shape, &a->shape, &b->shape};
        pcu_ref xr[3] = {R(P, n->in[0]), R(P, n->in[1]), R(P, n->in[2])};
        *ok = true;
        return ew_step(P, ni, PCU_EW_WHERE, 3, xs, xr, &y->shape, R(P, n->out[0]), a->dtype, y->dtype, 0, 0, 0);
    }
    const pprt_tdesc *x = T(P, n->in[0]);
    if (n->op == PP_OP_CAST || n->op == PP_OP_CASTLIKE) {
        const pp_dtype s = x->dtype, d = y->dtype;
        if (!pcu_tsize(s) || !pcu_tsize(d)) return PP_OK;
        /* 16-bit float targets from f32 or 16-bit floats only (one rounding) */
        if ((d == PP_F16 || d == PP_BF16) && s != PP_F32 && s != PP_F16 && s != PP_BF16) return PP_OK;
        const pp_shape *xs[1] = {&x->shape};
        pcu_ref xr[1] = {R(P, n->in[0])};
        *ok = true;
        /* a half plan's Cast (pp_finite): finite past the half type's range to its largest finite (mode 8) */
        const int fin = n->op == PP_OP_CAST && s == PP_F32 && (d == PP_F16 || d == PP_BF16) &&
                        attr_i(P, n, "pp_finite", 0) ? 8 : 0;
        return ew_step(P, ni, PCU_EW_CAST, 1, xs, xr, &y->shape, R(P, n->out[0]), s, d, 0, 0, fin);
    }
    /* Clip: bounds as scalar inputs (opset >= 11) or attributes */
    const pp_dtype t = x->dtype;
    if (!ew_float(t) && !ew_int(t)) return PP_OK;
    int mode = 0;
    float p0 = 0, p1 = 0;
    const pp_shape *xs[3] = {&x->shape, &x->shape, &x->shape};
    pcu_ref xr[3] = {R(P, n->in[0]), R(P, -1), R(P, -1)};
    if (P->p->opset < 11) {
        if (pp_attr_find(attrs_of(P, n), "min")) mode |= 1, p0 = attr_f(P, n, "min", 0);
        if (pp_attr_find(attrs_of(P, n), "max")) mode |= 2, p1 = attr_f(P, n, "max", 0);
        mode |= 4;
        if (!ew_float(t)) return PP_OK;
    } else {
        for (int k = 1; k < 3 && k < n->n_in; k++) {
            if (n->in[k] < 0) continue;
            const pprt_tdesc *b = T(P, n->in[k]);
            if (b->dtype != t || numel(&b->shape) != 1) return PP_OK;
            mode |= k;
            xs[k] = &b->shape;
            xr[k] = R(P, n->in[k]);
        }
    }
    /* absent bounds read nothing: any region stands in */
    for (int k = 1; k < 3; k++)
        if (xr[k].space < 0) xr[k] = xr[0], xs[k] = &x->shape;
    *ok = true;
    return ew_step(P, ni, PCU_EW_CLIP, 3, xs, xr, &y->shape, R(P, n->out[0]), t, y->dtype, p0, p1, mode);
}

/* ---- strided copies ----------------------------------------------------------------------- */

static pcu_step *perm_step(planner *P, int ni, int n_ops, const pprt_tdesc *y) {
    pcu_step *s = add_step(P, PCU_S_KERNEL, ni, n_ops);
    if (!s) return NULL;
    s->kernel = PCU_K_PERM;
    s->ptype = y->dtype;
    s->u.perm = (pcu_perm){.esize = (int32_t)pp_dtype_size(y->dtype), .gdim = -1};
    return s;
}

/* Fewer index steps per element, and wider elements: a thread of the copy
 * divides its index once per dim, so dims of one element go (but a
 * gathered dim) and each pair of neighbouring dims that both sides walk as
 * one (outer stride = inner stride x inner dim, on the source and the
 * destination; no Tile modulus, no gather) becomes one dim; then, when the
 * innermost dim is contiguous on both sides and every stride, offset and
 * operand falls on 16 bytes, the element becomes 16 bytes (a 128-bit load
 * and store on the GPU: a quarter of the threads for f32). The same bytes
 * move either way; Pad keeps its dims (its bounds are per dim).
 * --cuda-wide-copies off (narrow) leaves the copy as given. */
static void perm_widen(const planner *P, pcu_step *s) {
    pcu_perm *k = &s->u.perm;
    if (P->narrow || k->pad) return; /* (an empty copy, merged or not, is dropped by its caller) */
    int r = 0;
    for (int d = 0; d < k->rank; d++) {
        if (k->dim[d] == 1 && d != k->gdim) continue; /* index always 0 */
        const int p = r - 1;                         /* the kept dim just outside d */
        if (p >= 0 && p != k->gdim && d != k->gdim && !k->mod[p] && !k->mod[d] &&
            k->sst[p] == k->sst[d] * k->dim[d] && k->dst_st[p] == k->dst_st[d] * k->dim[d]) {
            k->dim[p] *= k->dim[d];
            k->sst[p] = k->sst[d];
            k->dst_st[p] = k->dst_st[d];
            continue;
        }
        if (d == k->gdim) k->gdim = r;
        k->dim[r] = k->dim[d], k->sst[r] = k->sst[d], k->dst_st[r] = k->dst_st[d], k->mod[r] = k->mod[d];
        k->lo[r] = k->lo[d], k->sdim[r] = k->sdim[d];
        r++;
    }
    for (int d = r; d < k->rank; d++) k->dim[d] = 1, k->sst[d] = k->dst_st[d] = k->mod[d] = k->lo[d] = k->sdim[d] = 0;
    k->rank = r;
    /* 16 bytes a thread */
    const int last = r - 1, x = 0, y = k->gdim >= 0 ? 2 : 1;
    if (last < 0 || last == k->gdim || k->mod[last] || k->esize <= 0 || k->esize >= 16 || k->sst[last] != 1 ||
        k->dst_st[last] != 1)
        return;
    const int64_t w = 16 / k->esize;
    bool ok = k->dim[last] % w == 0 && k->src_off % w == 0 && k->dst_off % w == 0 &&
              (k->gdim < 0 || k->gsrc_st % w == 0);
    for (int d = 0; d < last && ok; d++) ok = d == k->gdim ? true : k->sst[d] % w == 0 && k->dst_st[d] % w == 0;
    for (int q = 0; q < 2 && ok; q++) { /* operands on 16 bytes of a space whose base is (run_dev checks the messages') */
        const pcu_ref *o = &s->ops[q ? y : x];
        ok = o->space >= 0 && o->space != PCU_SP_WORK && o->off % 16 == 0;
    }
    if (k->gdim >= 0 && ok) ok = k->dst_st[k->gdim] % w == 0;
    if (!ok) return;
    k->dim[last] /= w;
    for (int d = 0; d < last; d++)
        if (d != k->gdim) k->sst[d] /= w, k->dst_st[d] /= w;
    if (k->gdim >= 0) k->gsrc_st /= w, k->dst_st[k->gdim] /= w;
    k->src_off /= w, k->dst_off /= w;
    k->esize = 16;
}

static void perm_finish(const planner *P, pcu_step *s) {
    pcu_perm *k = &s->u.perm;
    perm_widen(P, s);
    k->n = 1;
    for (int d = 0; d < k->rank; d++) k->n *= k->dim[d];
    s->threads = k->n;
}

/* Transpose, Slice, Expand, Tile: one output element per thread. */
static pp_status plan_view_like(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    if (!pp_dtype_size(x->dtype) || pp_dtype_size(x->dtype) > 8 || x->dtype != y->dtype) return PP_OK;
    const int r = y->shape.rank;
    const sview xv = view_of(P, n->in[0]); /* (a folded view of another tensor: this copy reads that one) */
    int64_t yst[PP_MAX_DIMS];
    const int64_t *xst = xv.st;
    strides_of(&y->shape, yst);
    pcu_perm k = {.rank = r, .esize = (int32_t)pp_dtype_size(y->dtype), .gdim = -1, .src_off = xv.off};
    for (int d = 0; d < r; d++) k.dim[d] = y->shape.dim[d], k.dst_st[d] = yst[d];
    pp_attrs a = attrs_of(P, n);
    if (n->op == PP_OP_TRANSPOSE) {
        int64_t perm[PP_MAX_DIMS];
        if (pp_transpose_perm(a, x->shape.rank, perm, NULL) != PP_OK) return PP_OK;
        for (int d = 0; d < r; d++) k.sst[d] = xst[perm[d]];
        /* moving only dims of 1 (ViT's [S, 1, E] -> [1, S, E] at micro-batch 1) of packed bytes (its own, or a
         * folded Reshape's source's): the same bytes, as a Reshape */
        int64_t last = -1, xp[PP_MAX_DIMS];
        strides_of(&x->shape, xp);
        const pprt_tdesc *src = T(P, xv.src);
        bool keeps = xv.off == 0 && src->kind == PPRT_ACTIVATION && y->kind == PPRT_ACTIVATION &&
                     src->nbytes == y->nbytes && xv.rank == x->shape.rank;
        for (int d = 0; d < x->shape.rank && keeps; d++) keeps = x->shape.dim[d] == 1 || xst[d] == xp[d];
        for (int d = 0; d < r && keeps; d++)
            if (y->shape.dim[d] != 1) keeps = perm[d] > last, last = perm[d];
        if (keeps) {
            P->alias[n->out[0]] = R(P, xv.src).tensor;
            P->pl->counts.copies++;
            *ok = true;
            return PP_OK;
        }
    } else if (n->op == PP_OP_SLICE) {
        pp_tinfo tin[5];
        if (!const_inputs(P, n, tin, 5)) return PP_OK; /* runtime starts/ends */
        pp_slice sl;
        if (pp_slice_parse(a, tin, n->n_in, &sl, NULL) != PP_OK) return PP_OK;
        for (int d = 0; d < r; d++) {
            k.sst[d] = xst[d] * sl.step[d];
            k.src_off += sl.first[d] * xst[d];
        }
    } else if (n->op == PP_OP_EXPAND) {
        for (int d = 0; d < r; d++) {
            const int xd = d - (r - x->shape.rank);
            k.sst[d] = xd < 0 || x->shape.dim[xd] == 1 ? 0 : xst[xd];
        }
    } else if (n->op == PP_OP_DEPTHTOSPACE || n->op == PP_OP_SPACETODEPTH) {
        /* the output seen as six dims, each reading the input at its stride */
        int64_t d6[6] = {0}, s6[6] = {0};
        if (pp_space_depth(n->op, a, &x->shape, d6, s6, NULL) != PP_OK) return PP_OK;
        int64_t o6[6] = {[5] = 1};
        for (int d = 4; d >= 0; d--) o6[d] = o6[d + 1] * d6[d + 1];
        k.rank = 6;
        for (int d = 0; d < 6; d++) k.dim[d] = d6[d], k.dst_st[d] = o6[d], k.sst[d] = s6[d];
    } else { /* Tile */
        if (x->shape.rank != r) return PP_OK;
        for (int d = 0; d < r; d++) k.sst[d] = xst[d], k.mod[d] = x->shape.dim[d];
    }
    pcu_step *s = perm_step(P, ni, 2, y);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    s->u.perm = k;
    s->ops[0] = R(P, xv.src);
    s->ops[1] = R(P, n->out[0]);
    perm_finish(P, s);
    if (s->threads == 0) P->pl->n_steps--, free(s->ops);
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* Pad (constant mode, constant pads and value). */
static pp_status plan_pad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    const char *mode = "constant";
    (void)pp_attr_string(attrs_of(P, n), "mode", "constant", &mode, NULL);
    const int pmode = n->op == PP_OP_CENTERCROPPAD ? 1 /* zeros, whatever stray attribute it carries */
                      : !strcmp(mode, "constant") ? 1 : !strcmp(mode, "reflect") ? 2 : !strcmp(mode, "edge") ? 3
                      : !strcmp(mode, "wrap")     ? 4 : 0;
    if (!pmode || !pp_dtype_size(x->dtype) || pp_dtype_size(x->dtype) > 8) return PP_OK;
    const int r = x->shape.rank;
    int64_t pads[2 * PP_MAX_DIMS];
    double value = 0;
    if (n->op == PP_OP_CENTERCROPPAD) { /* a Pad of zeros, negative where it crops (ir's pp_centercrop_parse) */
        pp_tinfo tin[2];
        pp_pad cp;
        if (!const_inputs(P, n, tin, 2) || pp_centercrop_parse(attrs_of(P, n), tin, n->n_in, &cp, NULL) != PP_OK ||
            !pp_shape_eq(&cp.out, &y->shape))
            return PP_OK;
        for (int d = 0; d < r; d++) pads[d] = cp.begin[d]; /* (the ends: only other modes read them) */
    } else if (P->p->opset < 11) {
        int np = 0;
        if (pp_attr_ints(attrs_of(P, n), "pads", pads, 2 * PP_MAX_DIMS, &np, NULL) != PP_OK || np != 2 * r) return PP_OK;
        value = attr_f(P, n, "value", 0);
    } else {
        const pprt_tdesc *pt = T(P, n->in[1]), *at = n->n_in > 3 && n->in[3] >= 0 ? T(P, n->in[3]) : NULL;
        int na = r;
        int64_t axes[PP_MAX_DIMS];
        for (int d = 0; d < r; d++) axes[d] = d;
        if (at) { /* axes: constant, each once */
            if (at->kind != PPRT_WEIGHT || !at->data || (at->dtype != PP_I64 && at->dtype != PP_I32) ||
                numel(&at->shape) > r)
                return PP_OK;
            na = (int)numel(&at->shape);
            for (int i = 0; i < na; i++) {
                const int64_t a = pcu_ldi(at->data, at->dtype, i);
                if (a < -r || a >= r) return PP_OK;
                axes[i] = a < 0 ? a + r : a;
                for (int j = 0; j < i; j++)
                    if (axes[j] == axes[i]) return PP_OK;
            }
        }
        if (!pt || pt->kind != PPRT_WEIGHT || !pt->data || pt->dtype != PP_I64 || numel(&pt->shape) != 2 * na) return PP_OK;
        for (int d = 0; d < 2 * r; d++) pads[d] = 0;
        for (int i = 0; i < na; i++)
            pads[axes[i]] = pcu_ldi(pt->data, PP_I64, i), pads[r + axes[i]] = pcu_ldi(pt->data, PP_I64, na + i);
        if (n->n_in > 2 && n->in[2] >= 0) {
            const pprt_tdesc *vt = T(P, n->in[2]);
            if (vt->kind != PPRT_WEIGHT || !vt->data || vt->dtype != x->dtype) return PP_OK;
            value = pcu_is_float(x->dtype) ? pcu_ldd(vt->data, x->dtype, 0) : (double)pcu_ldi(vt->data, x->dtype, 0);
            if (vt->varies) P->pl->folds_varying = true;
        }
    }
    if (P->cur_nhwc) { /* channels-last (a Pad only): the shadows' dims are N, H, W, C, and so go the pads */
        if (n->op != PP_OP_PAD || r != 4) return PP_OK;
        int64_t q[8];
        for (int d = 0; d < 4; d++) q[d] = pads[nhwc_from[d]], q[4 + d] = pads[4 + nhwc_from[d]];
        memcpy(pads, q, sizeof q);
    }
    for (int d = 0; d < r && pmode != 1; d++) /* the reference refuses these; it says why */
        if (pads[d] < 0 || pads[r + d] < 0 || (x->shape.dim[d] == 0 && (pads[d] || pads[r + d]))) return PP_OK;
    int64_t xst[PP_MAX_DIMS], yst[PP_MAX_DIMS];
    strides_of(&x->shape, xst);
    strides_of(&y->shape, yst);
    pcu_step *s = perm_step(P, ni, 2, y);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    pcu_perm *k = &s->u.perm;
    k->rank = r;
    k->pad = pmode;
    k->value = value;
    for (int d = 0; d < r; d++) {
        k->dim[d] = y->shape.dim[d];
        k->dst_st[d] = yst[d];
        k->sst[d] = xst[d];
        k->lo[d] = pads[d];
        k->sdim[d] = x->shape.dim[d];
    }
    s->ops[0] = numel(&x->shape) ? R(P, n->in[0]) : (pcu_ref){-1, -1, 0, 0}; /* empty: only the constant */
    s->ops[1] = R(P, n->out[0]);
    perm_finish(P, s);
    if (s->threads == 0) free(s->ops), P->pl->n_steps--; /* an empty output (a crop to nothing) */
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* Concat (one step per input) and Split (one step per output): each a
 * strided copy into / out of a window along the axis. */
static pp_status plan_concat_split(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const bool cat = n->op == PP_OP_CONCAT;
    const pprt_tdesc *whole = cat ? T(P, n->out[0]) : T(P, n->in[0]);
    *ok = false;
    const size_t es = pp_dtype_size(whole->dtype);
    if (!es || es > 8) return PP_OK;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", 0), whole->shape.rank, "axis", &axis, NULL) != PP_OK) return PP_OK;
    if (P->cur_nhwc) axis = (const int[4]){0, 3, 1, 2}[axis]; /* channels-last: the dims as N, H, W, C */
    int64_t wst[PP_MAX_DIMS];
    strides_of(&whole->shape, wst);
    const sview xv = view_of(P, n->in[0]); /* Split: its input may be a folded view (Concat's never is) */
    if (P->cur_nhwc && !cat) { /* a view (--cuda-stride-views) reads NCHW strides: such a Split stays NCHW */
        if (xv.src != n->in[0]) return PP_OK;
        for (int q = 0; q < n->n_out && P->view; q++)
            if (n->out[q] >= 0 && P->view[n->out[q]].src >= 0) return PP_OK;
    }
    const int parts = cat ? n->n_in : n->n_out;
    int64_t at = 0;
    int made = 0;
    for (int q = 0; q < parts; q++) {
        const int tid = cat ? n->in[q] : n->out[q];
        if (tid < 0) continue;
        const pprt_tdesc *part = T(P, tid);
        int64_t pst[PP_MAX_DIMS];
        strides_of(&part->shape, pst);
        pcu_step *s = perm_step(P, ni, 2, part);
        if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
        pcu_perm *k = &s->u.perm;
        k->rank = part->shape.rank;
        for (int d = 0; d < k->rank; d++) {
            k->dim[d] = part->shape.dim[d];
            k->sst[d] = cat ? pst[d] : xv.st[d];
            k->dst_st[d] = cat ? wst[d] : pst[d];
        }
        if (cat) k->dst_off = at * wst[axis];
        else k->src_off = xv.off + at * xv.st[axis];
        at += part->shape.dim[axis];
        if (!cat && P->view && P->view[tid].src >= 0) { /* this output folded into its products */
            free(s->ops), P->pl->n_steps--;
            continue;
        }
        s->ops[0] = cat ? R(P, tid) : R(P, xv.src);
        s->ops[1] = cat ? R(P, n->out[0]) : R(P, tid);
        perm_finish(P, s);
        if (s->threads == 0) {
            free(s->ops);
            P->pl->n_steps--;
        } else {
            made++;
        }
    }
    P->pl->counts.own++;
    (void)made;
    *ok = true;
    return PP_OK;
}

/* Gather along an axis: the output [data dims before axis, indices..., data
 * dims after] seen as [before..., G, after...], G the indices' count. */
static pp_status plan_gather(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *ix = T(P, n->in[1]), *y = T(P, n->out[0]);
    *ok = false;
    if (!pp_dtype_size(x->dtype) || pp_dtype_size(x->dtype) > 8 || (ix->dtype != PP_I64 && ix->dtype != PP_I32))
        return PP_OK;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", 0), x->shape.rank, "axis", &axis, NULL) != PP_OK) return PP_OK;
    const sview xv = view_of(P, n->in[0]);
    const int64_t *xst = xv.st;
    pcu_step *s = perm_step(P, ni, 3, y);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    pcu_perm *k = &s->u.perm;
    const int r = x->shape.rank;
    k->src_off = xv.off;
    pp_shape v = {.rank = r};
    for (int d = 0; d < r; d++) v.dim[d] = d == axis ? numel(&ix->shape) : x->shape.dim[d];
    int64_t vst[PP_MAX_DIMS];
    strides_of(&v, vst);
    k->rank = r;
    k->gdim = axis;
    k->gidx_t = ix->dtype;
    k->gidx_st = 1;
    k->glen = x->shape.dim[axis];
    k->gsrc_st = xst[axis];
    for (int d = 0; d < r; d++) {
        k->dim[d] = v.dim[d];
        k->sst[d] = xst[d];
        k->dst_st[d] = vst[d];
    }
    s->ops[0] = R(P, xv.src);
    s->ops[1] = R(P, n->in[1]);
    s->ops[2] = R(P, n->out[0]);
    perm_finish(P, s);
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* pp.GatherGrad (dY, indices -> dX of f32, the node's "shape"): dX's
 * columns (pcu_gathergrad_at) */
static pp_status plan_gather_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in != 2 || n->n_out != 1) return PP_OK;
    const pprt_tdesc *dy = T(P, n->in[0]), *ix = T(P, n->in[1]), *dx = T(P, n->out[0]);
    if (dy->dtype != PP_F32 || dx->dtype != PP_F32 || (ix->dtype != PP_I64 && ix->dtype != PP_I32)) return PP_OK;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", 0), dx->shape.rank, "axis", &axis, NULL) != PP_OK) return PP_OK;
    pcu_gathergrad k = {.idx_t = ix->dtype, .outer = 1, .D = dx->shape.dim[axis], .J = numel(&ix->shape), .inner = 1};
    for (int d = 0; d < axis; d++) k.outer *= dx->shape.dim[d];
    for (int d = axis + 1; d < dx->shape.rank; d++) k.inner *= dx->shape.dim[d];
    if (numel(&dy->shape) != k.outer * k.J * k.inner || (k.D == 0 && k.J > 0))
        return PP_OK; /* the reference kernel says why */
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_GATHERGRAD;
    s->u.gg = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[1]);
    s->ops[2] = R(P, n->out[0]);
    s->threads = k.outer * k.inner;
    if (s->threads == 0 || k.D == 0) free(s->ops), P->pl->n_steps--; /* no element to write */
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* pp.SliceGrad (dY -> dX of f32, the node's "shape", "starts" and "steps"): a thread per element of
 * dX (pcu_slgrad_at) */
static bool all_f32(const planner *P, const pprt_node *n);
static int one_float_type(const planner *P, const pprt_node *n);
static pp_status plan_slice_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (!all_f32(P, n) || n->n_in != 1 || n->n_out != 1) return PP_OK;
    const pp_shape *ys = &T(P, n->in[0])->shape, *xs = &T(P, n->out[0])->shape;
    pcu_slgrad k = {.rank = xs->rank, .n = numel(xs), .ny = numel(ys)};
    int ns = 0, np = 0;
    if (xs->rank > PCU_MAXD || ys->rank != xs->rank ||
        pp_attr_ints(attrs_of(P, n), "starts", k.start, PCU_MAXD, &ns, NULL) != PP_OK ||
        pp_attr_ints(attrs_of(P, n), "steps", k.step, PCU_MAXD, &np, NULL) != PP_OK || ns != xs->rank ||
        np != xs->rank)
        return PP_OK; /* the reference kernel says why */
    for (int d = 0; d < xs->rank; d++) {
        k.xd[d] = xs->dim[d], k.yd[d] = ys->dim[d];
        if (!k.step[d] || (k.yd[d] && (k.start[d] < 0 || k.start[d] >= k.xd[d] ||
                                       k.start[d] + (k.yd[d] - 1) * k.step[d] < 0 ||
                                       k.start[d] + (k.yd[d] - 1) * k.step[d] >= k.xd[d])))
            return PP_OK;
    }
    *ok = true;
    if (k.n == 0) return PP_OK;
    XY_STEP(s, P, ni, PCU_K_SLGRAD, k.n);
    s->u.slg = k;
    return PP_OK;
}

/* pp.Dropout in training mode (X f32, [seed, counter] int64 -> Y, mask):
 * pcu_dropt_at, the reference's mask */
static pp_status plan_dropout_train(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in != 2 || n->n_out != 2 || n->in[1] < 0 || n->out[1] < 0) return PP_OK;
    const pprt_tdesc *x = T(P, n->in[0]), *sc = T(P, n->in[1]), *y = T(P, n->out[0]), *m = T(P, n->out[1]);
    if (x->dtype != PP_F32 || y->dtype != PP_F32 || m->dtype != PP_F32 || sc->dtype != PP_I64 ||
        numel(&sc->shape) != 2 || y->nbytes != x->nbytes || m->nbytes != x->nbytes)
        return PP_OK; /* the reference kernel says why */
    int64_t key = 0;
    if (pp_attr_int(attrs_of(P, n), "key", 0, &key, NULL) != PP_OK) return PP_OK;
    const float ratio = attr_f(P, n, "ratio", 0.5f);
    pcu_dropt k = {.ratio = ratio, .scale = ratio >= 1.0f ? 0.0f : (float)(1.0 / (1.0 - (double)ratio)), .key = key,
                   .n = (int64_t)(x->nbytes / 4)};
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 4);
    s->kernel = PCU_K_DROPT;
    s->u.dropt = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[1]);
    s->ops[2] = R(P, n->out[0]);
    s->ops[3] = R(P, n->out[1]);
    s->threads = k.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* ---- reductions, softmax, normalizations, pools -------------------------------------------- */

/* xst_in: x's element strides (a channels-last GlobalAveragePool's), NULL: packed */
static pp_status red_step(planner *P, int ni, int op, int last, const pprt_tdesc *x, const int64_t *xst_in,
                          const bool *mask, pcu_ref yr) {
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 2);
    s->kernel = PCU_K_RED;
    pcu_red *k = &s->u.red;
    *k = (pcu_red){.op = op, .last = last, .n_out = 1, .n_red = 1};
    if (x->dtype == PP_F16 || x->dtype == PP_BF16) k->t = x->dtype; /* a half plan's: read (and written) in half */
    int64_t xst[PP_MAX_DIMS];
    strides_of(&x->shape, xst);
    if (xst_in) memcpy(xst, xst_in, sizeof(int64_t) * (size_t)x->shape.rank);
    for (int d = 0; d < x->shape.rank; d++) {
        if (x->shape.dim[d] == 1) continue;
        if (mask[d]) {
            k->rd[k->nr] = x->shape.dim[d], k->rs[k->nr++] = xst[d];
            k->n_red *= x->shape.dim[d];
        } else {
            k->kd[k->nk] = x->shape.dim[d], k->ks[k->nk++] = xst[d];
            k->n_out *= x->shape.dim[d];
        }
    }
    s->ops[0] = R(P, (int)(x - P->st->t));
    s->ops[1] = yr;
    s->threads = k->n_out;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    return PP_OK;
}

static pp_status plan_reduce(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    /* an empty input (a reduction's identity) stays on the host fallback */
    const bool gpool = n->op == PP_OP_GLOBALAVGPOOL || n->op == PP_OP_GLOBALMAXPOOL;
    /* a half plan's (ppcc --precision: passes/precision.c's half_slots): the global pools, ReduceMean, ReduceMax,
     * ReduceMin, ReduceL2, ArgMax and ArgMin read half, the sums in double as in f32 */
    const bool half = (x->dtype == PP_F16 || x->dtype == PP_BF16) &&
                      (gpool || n->op == PP_OP_REDUCEMEAN || n->op == PP_OP_REDUCEMAX || n->op == PP_OP_REDUCEMIN ||
                       n->op == PP_OP_REDUCEL2 || n->op == PP_OP_ARGMAX || n->op == PP_OP_ARGMIN);
    if ((x->dtype != PP_F32 && !half) || n->n_out != 1 || numel(&x->shape) == 0) return PP_OK;
    bool mask[PP_MAX_DIMS] = {false};
    int op;
    if (gpool) {
        if (y->dtype != x->dtype) return PP_OK;
        for (int d = 2; d < x->shape.rank; d++) mask[d] = true;
        op = n->op == PP_OP_GLOBALAVGPOOL ? PCU_RED_MEAN : PCU_RED_MAX;
        *ok = true;
        /* channels-last x [N, C, H, W] as NHWC strides: the window in the same order, the output [N, C, 1, 1]
         * the same bytes in either layout */
        int64_t cl[PP_MAX_DIMS];
        if (P->cur_nhwc && x->shape.rank == 4)
            nhwc_strides(&x->shape, cl);
        return red_step(P, ni, op, 0, x, P->cur_nhwc && x->shape.rank == 4 ? cl : NULL, mask, R(P, n->out[0]));
    }
    if (n->op == PP_OP_ARGMAX || n->op == PP_OP_ARGMIN) {
        int axis;
        if (y->dtype != PP_I64 ||
            pp_norm_axis(attr_i(P, n, "axis", 0), x->shape.rank, "axis", &axis, NULL) != PP_OK)
            return PP_OK;
        mask[axis] = true;
        *ok = true;
        return red_step(P, ni, n->op == PP_OP_ARGMAX ? PCU_RED_ARGMAX : PCU_RED_ARGMIN,
                        attr_i(P, n, "select_last_index", 0) != 0, x, NULL, mask, R(P, n->out[0]));
    }
    if (y->dtype != x->dtype) return PP_OK;
    switch (n->op) {
    case PP_OP_REDUCEMEAN: op = PCU_RED_MEAN; break;
    case PP_OP_REDUCESUM: op = PCU_RED_SUM; break;
    case PP_OP_REDUCEMAX: op = PCU_RED_MAX; break;
    case PP_OP_REDUCEMIN: op = PCU_RED_MIN; break;
    case PP_OP_REDUCEPROD: op = PCU_RED_PROD; break;
    case PP_OP_REDUCEL1: op = PCU_RED_L1; break;
    case PP_OP_REDUCEL2: op = PCU_RED_L2; break;
    case PP_OP_REDUCESUMSQUARE: op = PCU_RED_SUMSQ; break;
    case PP_OP_REDUCELOGSUM: op = PCU_RED_LOGSUM; break;
    default: op = PCU_RED_LOGSUMEXP; break;
    }
    pp_tinfo tin[2];
    if (!const_inputs(P, n, tin, 2)) return PP_OK; /* computed axes */
    pp_reduce rd;
    if (pp_reduce_parse(n->op, attrs_of(P, n), &tin[0], &tin[1], &rd, NULL) != PP_OK) return PP_OK;
    bool any = false;
    for (int d = 0; d < x->shape.rank; d++) any = any || rd.mask[d];
    /* no axes reduced: ReduceSum and friends pass x through, except those
     * that change each element (ReduceL1 = |x|, ...): leave them to the host */
    if (!any && op != PCU_RED_SUM && op != PCU_RED_MEAN && op != PCU_RED_MAX && op != PCU_RED_MIN &&
        op != PCU_RED_PROD)
        return PP_OK;
    *ok = true;
    if (!any) return copy_step(P, ni, R(P, n->in[0]), R(P, n->out[0]));
    return red_step(P, ni, op, 0, x, NULL, rd.mask, R(P, n->out[0]));
}

/* The own kernels' scratch in WORK, after the library workspace: one region
 * that every step needing scratch reuses (one stream runs the steps in order). */
static pcu_ref work_scratch(planner *P, uint64_t bytes) {
    const uint64_t at = PCU_WORK_LIB + PCU_LIB_WORKSPACE;
    const pcu_ref r = {PCU_SP_WORK, -1, at, bytes ? bytes : 8};
    if (P->pl->bytes[PCU_SP_WORK] < at + r.bytes) P->pl->bytes[PCU_SP_WORK] = at + r.bytes;
    return r;
}

/* Lanes per row for a row kernel over rows of n contiguous floats (kmath.h,
 * "Rows in lanes"): 32 (a warp) where a row has at least two elements per
 * lane and the partials fit the 256 MiB the scratch may take; else 0, one
 * thread per row. */
static int32_t row_lanes(int64_t rows, int64_t n) {
    return n >= 64 && rows <= ((int64_t)256 << 20) / (32 * 2 * 8) ? 32 : 0;
}

/* The phases of row-kernel step *t (a template whose parameter block's
 * phase is set here) as consecutive steps of node ni: phases 0 .. count-1. */
static pp_status row_phases(planner *P, int ni, const pcu_step *t, int count) {
    for (int ph = 0; ph < count; ph++) {
        NEW_STEP(s, P, PCU_S_KERNEL, ni, t->n_ops);
        pcu_ref *ops = s->ops;
        *s = *t;
        s->ops = ops;
        memcpy(s->ops, t->ops, sizeof *ops * (size_t)t->n_ops);
        if (t->kernel == PCU_K_SOFTMAX) s->u.sm.phase = ph;
        else s->u.norm.phase = ph;
    }
    return PP_OK;
}

static pp_status plan_softmax(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]);
    *ok = false;
    int64_t outer, len, inner;
    const int ty = one_float_type(P, n);
    if (ty < 0 || pp_softmax_split(attrs_of(P, n), &x->shape, &outer, &len, &inner, NULL) != PP_OK)
        return PP_OK;
    *ok = true;
    if (outer * len * inner == 0) return PP_OK;
    if (P->rows && inner == 1 && len <= PCU_ROW_MAX && outer <= INT32_MAX) { /* one launch, a block per row */
        NEW_STEP(s, P, PCU_S_KERNEL, ni, 2);
        s->kernel = PCU_K_ROWSM;
        s->u.rsm = (pcu_rowsm){.log = n->op == PP_OP_LOGSOFTMAX, .t = ty, .rows = outer, .n = len};
        s->ops[0] = R(P, n->in[0]), s->ops[1] = R(P, n->out[0]);
        s->threads = outer * PCU_BLOCK;
        P->pl->counts.own++;
        return PP_OK;
    }
    const int32_t lanes = inner == 1 ? row_lanes(outer, len) : 0;
    pcu_ref ops[3] = {R(P, n->in[0]), R(P, n->out[0]), {-1, -1, 0, 0}};
    pcu_step t = {.kind = PCU_S_KERNEL, .kernel = PCU_K_SOFTMAX, .node = ni, .n_ops = 3, .ops = ops,
                  .threads = lanes ? outer * lanes : outer * inner};
    t.u.sm = (pcu_softmax){.log = n->op == PP_OP_LOGSOFTMAX, .lanes = lanes, .t = ty, .outer = outer, .n = len,
                           .inner = inner};
    if (lanes) ops[2] = work_scratch(P, (uint64_t)(outer * lanes) * 2 * sizeof(double));
    PP_TRY(row_phases(P, ni, &t, lanes ? 3 : 1));
    P->pl->counts.own++;
    return PP_OK;
}

/* The one element type of node n's tensors: f32, or a half plan's f16 or bf16 (ppcc --precision: the products, the
 * softmaxes and the norms read and write half, computing in f32); -1: mixed or another. */
static int one_float_type(const planner *P, const pprt_node *n) {
    const pp_dtype t = T(P, n->out[0])->dtype;
    if (t != PP_F32 && t != PP_F16 && t != PP_BF16) return -1;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && T(P, n->in[k])->dtype != t) return -1;
    for (int k = 0; k < n->n_out; k++)
        if (T(P, n->out[k])->dtype != t) return -1;
    return (int)t;
}

/* A LayerNorm's or RMSNorm's one type of x, scale, bias and y (as one_float_type), its statistics' outputs f32. */
static int ln_type(const planner *P, const pprt_node *n) {
    const pp_dtype t = T(P, n->in[0])->dtype;
    if (t != PP_F32 && t != PP_F16 && t != PP_BF16) return -1;
    for (int k = 1; k < n->n_in; k++)
        if (n->in[k] >= 0 && T(P, n->in[k])->dtype != t) return -1;
    if (T(P, n->out[0])->dtype != t) return -1;
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0 && T(P, n->out[k])->dtype != PP_F32) return -1;
    return (int)t;
}

static bool all_f32(const planner *P, const pprt_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && T(P, n->in[k])->dtype != PP_F32) return false;
    for (int k = 0; k < n->n_out; k++)
        if (T(P, n->out[k])->dtype != PP_F32) return false;
    return true;
}

/* N, C and the spatial size S of a BatchNormalization's X (or its gradient's),
 * and whether its n_par per-channel operands from `first` on are [C]. */
static bool bn_dims(planner *P, const pprt_node *n, int x, int first, int n_par, int64_t *N, int64_t *C, int64_t *S) {
    const pp_shape *xs = &T(P, n->in[x])->shape;
    if (xs->rank < 2) return false;
    *N = xs->dim[0], *C = xs->dim[1], *S = 1;
    for (int d = 2; d < xs->rank; d++) *S *= xs->dim[d];
    for (int k = first; k < first + n_par; k++)
        if (n->in[k] < 0 || numel(&T(P, n->in[k])->shape) != *C) return false;
    return true;
}

/* The step of a BatchNorm kernel of node ni over C > 0 channels (a block
 * each): its five inputs, then n_outs outputs (those the node lacks
 * absent); the caller sets the parameter block. NULL: out of memory. */
static pcu_step *bn_step(planner *P, int ni, int kernel, int n_outs, int64_t C) {
    const pprt_node *n = &P->st->nodes[ni];
    pcu_step *s = add_step(P, PCU_S_KERNEL, ni, 5 + n_outs);
    if (!s) return NULL;
    s->kernel = kernel;
    for (int j = 0; j < 5; j++) s->ops[j] = R(P, n->in[j]);
    for (int j = 0; j < n_outs; j++) s->ops[5 + j] = R(P, j < n->n_out ? n->out[j] : -1);
    s->threads = C * PCU_BLOCK;
    P->pl->counts.own++;
    return s;
}

/* BatchNormalization in training mode: the batch's statistics (pcu_bnt_ph, a block per channel) */
static pp_status plan_bn_train(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    pcu_bnt k = {.eps = attr_f(P, n, "epsilon", 1e-5f), .momentum = attr_f(P, n, "momentum", 0.9f)};
    *ok = false;
    if (n->n_in != 5 || n->n_out > 5 || !bn_dims(P, n, 0, 1, 4, &k.N, &k.C, &k.S) || k.N * k.S == 0 || k.C > INT32_MAX)
        return PP_OK; /* an empty batch's statistics: the reference kernel's */
    *ok = true;
    if (k.C == 0) return PP_OK; /* no channel: nothing to write */
    pcu_step *s = bn_step(P, ni, PCU_K_BNT, 5, k.C);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    s->u.bnt = k;
    *ok = true;
    return PP_OK;
}

/* pp.BatchNormGrad: dY X scale mean var -> dX [dscale, dB] (pcu_bng_ph, a block per channel) */
static pp_status plan_bn_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    int64_t training = 0;
    (void)pp_attr_int(attrs_of(P, n), "training_mode", 0, &training, NULL);
    pcu_bng k = {.eps = attr_f(P, n, "epsilon", 1e-5f), .training = training != 0};
    if (!all_f32(P, n) || n->n_in != 5 || n->n_out < 1 || n->n_out > 3 || !bn_dims(P, n, 1, 2, 3, &k.N, &k.C, &k.S) ||
        T(P, n->in[0])->nbytes != T(P, n->in[1])->nbytes || k.C > INT32_MAX)
        return PP_OK;
    *ok = true;
    if (k.C == 0) return PP_OK; /* no channel: nothing to write */
    pcu_step *s = bn_step(P, ni, PCU_K_BNG, 3, k.C);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    s->u.bng = k;
    *ok = true;
    return PP_OK;
}

/* Whether LayerNormalization or RMSNormalization n takes the one-block row
 * kernel (--cuda-row-kernels on): f32 or half (ln_type), scale (and bias)
 * the normalized length, rows of up to PCU_ROW_MAX elements; its parameter
 * block into *k. */
static bool ln_row_block(const planner *P, const pprt_node *n, pcu_rowln *k) {
    const bool rms = n->op == PP_OP_RMSNORM;
    if (!P->rows || (n->op != PP_OP_LAYERNORM && !rms) || n->n_in < 2 || n->in[1] < 0 || ln_type(P, n) < 0 ||
        (rms && n->n_out > 1))
        return false;
    const pp_shape *xs = &T(P, n->in[0])->shape;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", -1), xs->rank, "axis", &axis, NULL) != PP_OK) return false;
    int64_t inner = 1;
    for (int d = axis; d < xs->rank; d++) inner *= xs->dim[d];
    const bool has_bias = !rms && n->n_in > 2 && n->in[2] >= 0;
    if (numel(&T(P, n->in[1])->shape) != inner || (has_bias && numel(&T(P, n->in[2])->shape) != inner)) return false;
    const int64_t rows = inner ? numel(xs) / inner : 0;
    if (rows == 0 || inner > PCU_ROW_MAX || rows > INT32_MAX) return false;
    *k = (pcu_rowln){.has_bias = has_bias, .rms = rms, .t = ln_type(P, n), .rows = rows, .n = inner,
                     .eps = attr_f(P, n, "epsilon", 1e-5f)};
    return true;
}

/* The residual Add before a LayerNorm (--cuda-row-kernels on): where the
 * output t of Add node ni (two f32 inputs of t's shape) is the X of a later
 * LayerNormalization that takes the one-block row kernel, its scale and
 * bias weights (so ready here), the LayerNorm's step is issued here with
 * the Add in its phase 0 (kmath.h pcu_rowln_ph): the row read from the
 * Add's two inputs, their float sums written to t only where something
 * else reads t (or the stage sends it). A pre-norm transformer layer's two
 * residual Adds each lose their launch and the LayerNorm's read of the row;
 * the bytes are the unfused steps' (the same float sums, the LayerNorm on
 * the same row). The step is named by the LayerNorm; the Add counts as
 * fused. */
static pp_status plan_add_ln(planner *P, int ni, bool *ok) {
    const pprt_stage *st = P->st;
    const pprt_node *n = &st->nodes[ni];
    *ok = false;
    const int ty = one_float_type(P, n);
    if (!P->rows || n->n_in != 2 || n->n_out != 1 || n->in[0] < 0 || n->in[1] < 0 || ty < 0) return PP_OK;
    const int t = n->out[0];
    const pp_shape *ys = &T(P, t)->shape;
    if (!pp_shape_eq(&T(P, n->in[0])->shape, ys) || !pp_shape_eq(&T(P, n->in[1])->shape, ys)) return PP_OK;
    const int ln = P->ln_of[t]; /* after ni: it reads ni's output */
    if (ln < 0 || P->done[ln] || (P->host_node && P->host_node[ln])) return PP_OK;
    const pprt_node *m = &st->nodes[ln];
    pcu_rowln k;
    if (!ln_row_block(P, m, &k) || k.t != ty || T(P, m->in[1])->kind != PPRT_WEIGHT ||
        (k.has_bias && T(P, m->in[2])->kind != PPRT_WEIGHT))
        return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ln, 8);
    s->kernel = PCU_K_ROWLN;
    s->u.rln = k;
    for (int q = 0; q < 8; q++) s->ops[q] = R(P, -1);
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, m->in[1]);
    if (k.has_bias) s->ops[2] = R(P, m->in[2]);
    for (int q = 0; q < m->n_out && q < 3; q++) s->ops[3 + q] = R(P, m->out[q]);
    s->ops[6] = R(P, n->in[1]);
    if (P->uses[t] > 1) s->ops[7] = R(P, t);
    s->threads = k.rows * PCU_BLOCK;
    P->done[ln] = true;
    P->pl->counts.own++;
    P->pl->counts.fused++;
    *ok = true;
    return PP_OK;
}

/* pp.LayerNormGrad and pp.InstanceNormGrad (dY X scale -> dX [dscale] [dB], f32): dX a block per
 * row (pcu_lng_ph), dscale and dB sums over the rows (pcu_lngp_at: LayerNorm's columns in two
 * launches, InstanceNorm's channels in one); the rows' statistics and the partials in WORK */
static pp_status plan_norm_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const bool in = n->op == PP_OP_INSTANCENORMGRAD;
    *ok = false;
    if (!all_f32(P, n) || n->n_in != 3 || n->n_out < 1 || n->n_out > 3 || n->in[0] < 0 || n->in[1] < 0 ||
        n->in[2] < 0)
        return PP_OK;
    const pprt_tdesc *x = T(P, n->in[1]);
    pcu_lng k = {.eps = attr_f(P, n, "epsilon", 1e-5f)};
    int64_t par; /* elements of scale, dscale and dB */
    if (in) {
        if (!bn_dims(P, n, 1, 2, 1, &k.rows, &k.C, &k.n)) return PP_OK;
        k.rows *= k.C, par = k.C;
    } else {
        int axis;
        float eps;
        if (pp_norm_rows(attrs_of(P, n), &x->shape, &axis, &eps, &k.rows, &k.n, NULL) != PP_OK) return PP_OK;
        par = k.n;
    }
    const int64_t chunks = in ? 0 : (k.rows + PCU_LNG_CHUNK - 1) / PCU_LNG_CHUNK;
    const uint64_t stb = (uint64_t)k.rows * 32, partb = (uint64_t)(chunks * k.n) * 16;
    if (T(P, n->in[0])->nbytes != x->nbytes || T(P, n->out[0])->nbytes != x->nbytes ||
        numel(&T(P, n->in[2])->shape) != par || k.rows > INT32_MAX || k.n == 0 || stb + partb > ((uint64_t)256 << 20))
        return PP_OK; /* an empty row, or partials past the scratch's 256 MiB: the reference kernel */
    for (int q = 1; q < n->n_out; q++)
        if (n->out[q] >= 0 && numel(&T(P, n->out[q])->shape) != par) return PP_OK;
    *ok = true;
    P->pl->counts.own++;
    const pcu_ref w = work_scratch(P, stb + partb);
    const pcu_ref st = {w.space, -1, w.off, stb ? stb : 8}, part = {w.space, -1, w.off + stb, partb ? partb : 8};
    if (k.rows) {
        NEW_STEP(s, P, PCU_S_KERNEL, ni, 5);
        s->kernel = PCU_K_LNG;
        s->u.lng = k;
        for (int q = 0; q < 3; q++) s->ops[q] = R(P, n->in[q]);
        s->ops[3] = R(P, n->out[0]);
        s->ops[4] = st;
        s->threads = k.rows * PCU_BLOCK;
    }
    const bool params = (n->n_out > 1 && n->out[1] >= 0) || (n->n_out > 2 && n->out[2] >= 0);
    for (int ph = in ? 1 : 0; params && ph < 2; ph++) {
        const int64_t threads = ph == 0 ? chunks * k.n : par;
        if (threads == 0) continue;
        NEW_STEP(s, P, PCU_S_KERNEL, ni, 6);
        s->kernel = PCU_K_LNGP;
        s->u.lngp = (pcu_lngp){.phase = ph, .rows = k.rows, .n = k.n, .C = k.C, .chunks = chunks};
        s->ops[0] = R(P, n->in[0]);
        s->ops[1] = R(P, n->in[1]);
        s->ops[2] = st;
        if (!in) s->ops[3] = part;
        for (int q = 1; q < n->n_out; q++) s->ops[3 + q] = R(P, n->out[q]);
        s->threads = threads;
    }
    return PP_OK;
}

/* A half plan's inference BatchNormalization (ppcc --precision: passes/precision.c's half_slots): X and Y of
 * one half type, scale, B and the statistics f32. */
static bool bn_half(const planner *P, const pprt_node *n) {
    const pp_dtype t = T(P, n->in[0])->dtype;
    if ((t != PP_F16 && t != PP_BF16) || n->n_in != 5 || n->n_out != 1 || T(P, n->out[0])->dtype != t) return false;
    for (int k = 1; k < 5; k++)
        if (n->in[k] < 0 || T(P, n->in[k])->dtype != PP_F32) return false;
    return true;
}

/* BatchNormalization (inference; f32, or bn_half's): a thread per element */
static pp_status plan_bn(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pp_shape *xs = &T(P, n->in[0])->shape;
    if (n->n_out != 1 || xs->rank < 2) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 6);
    s->kernel = PCU_K_BN;
    int64_t S = 1;
    for (int d = 2; d < xs->rank; d++) S *= xs->dim[d];
    if (P->cur_nhwc) S = 1; /* channels-last: the channel is the innermost index */
    s->u.bn = (pcu_bn){.n = numel(xs), .c = xs->dim[1], .s = S, .eps = attr_f(P, n, "epsilon", 1e-5f),
                       .t = T(P, n->in[0])->dtype};
    for (int k = 0; k < 5; k++) s->ops[k] = R(P, n->in[k]);
    s->ops[5] = R(P, n->out[0]);
    s->threads = s->u.bn.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

static pp_status plan_norm(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]);
    *ok = false;
    /* f32 or half (ln_type): the layer, RMS, group and instance norms; BatchNormalization f32 (or bn_half's) */
    const bool lnr = n->op == PP_OP_LAYERNORM || n->op == PP_OP_RMSNORM || n->op == PP_OP_GROUPNORM ||
                     n->op == PP_OP_FUSEDGN || n->op == PP_OP_INSTANCENORM;
    const pp_shape *xs = &x->shape;
    if (n->op == PP_OP_BATCHNORM && !pp_bn_training(attrs_of(P, n), n->n_out) && bn_half(P, n))
        return plan_bn(P, ni, ok);
    if (lnr ? ln_type(P, n) < 0 : !all_f32(P, n)) return PP_OK;
    if (n->op == PP_OP_BATCHNORM && pp_bn_training(attrs_of(P, n), n->n_out)) return plan_bn_train(P, ni, ok);
    if (n->op == PP_OP_BATCHNORM) return plan_bn(P, ni, ok);
    pcu_norm k = {.has_bias = n->n_in > 2 && n->in[2] >= 0, .t = lnr ? ln_type(P, n) : PP_F32,
                  .eps = attr_f(P, n, "epsilon", 1e-5f)};
    if (n->op == PP_OP_LAYERNORM || n->op == PP_OP_RMSNORM) {
        int axis;
        k.rms = n->op == PP_OP_RMSNORM;
        if (k.rms) k.has_bias = 0;
        if (pp_norm_axis(attr_i(P, n, "axis", -1), xs->rank, "axis", &axis, NULL) != PP_OK) return PP_OK;
        int64_t inner = 1;
        for (int d = axis; d < xs->rank; d++) inner *= xs->dim[d];
        if (numel(&T(P, n->in[1])->shape) != inner || (k.has_bias && numel(&T(P, n->in[2])->shape) != inner))
            return PP_OK; /* broadcast scale: the host */
        k.rows = inner ? numel(xs) / inner : 0;
        k.n = inner;
    } else { /* InstanceNormalization, GroupNormalization, pp.GroupNorm (per channel): [N, C, S] */
        if (xs->rank < 3 || n->n_out != 1) return PP_OK;
        const int64_t N = xs->dim[0], C = xs->dim[1];
        int64_t S = 1;
        for (int d = 2; d < xs->rank; d++) S *= xs->dim[d];
        const int64_t G = n->op == PP_OP_GROUPNORM || n->op == PP_OP_FUSEDGN ? attr_i(P, n, "num_groups", 1) : C;
        if (G < 1 || C % G) return PP_OK;
        const int64_t Cg = C / G;
        k.groups = (int32_t)G;
        k.rows = N * G;
        k.n = Cg * S;
        if (n->op == PP_OP_GROUPNORM && P->p->opset < 21) k.cpg = 1, k.cdiv = Cg * S; /* per group */
        else k.cpg = Cg, k.cdiv = S;                                                   /* per channel */
        k.has_bias = 1;
    }
    *ok = true;
    P->pl->counts.own++;
    if (k.rows == 0) return PP_OK;
    pcu_rowln rk;
    if (ln_row_block(P, n, &rk)) { /* a block per row */
        NEW_STEP(s, P, PCU_S_KERNEL, ni, 8);
        s->kernel = PCU_K_ROWLN;
        s->u.rln = rk;
        for (int q = 0; q < 8; q++) s->ops[q] = (pcu_ref){-1, -1, 0, 0};
        s->ops[0] = R(P, n->in[0]);
        s->ops[1] = R(P, n->in[1]);
        if (k.has_bias) s->ops[2] = R(P, n->in[2]);
        for (int q = 0; q < n->n_out && q < 3; q++) s->ops[3 + q] = R(P, n->out[q]);
        s->threads = k.rows * PCU_BLOCK;
        return PP_OK;
    }
    k.lanes = row_lanes(k.rows, k.n);
    pcu_ref ops[7];
    for (int q = 0; q < 7; q++) ops[q] = (pcu_ref){-1, -1, 0, 0};
    ops[0] = R(P, n->in[0]);
    ops[1] = R(P, n->in[1]);
    if (k.has_bias) ops[2] = R(P, n->in[2]);
    for (int q = 0; q < n->n_out && q < 3; q++) ops[3 + q] = R(P, n->out[q]);
    if (k.lanes) ops[6] = work_scratch(P, (uint64_t)(k.rows * k.lanes) * 2 * sizeof(double));
    pcu_step t = {.kind = PCU_S_KERNEL, .kernel = PCU_K_NORM, .node = ni, .n_ops = 7, .ops = ops,
                  .threads = k.lanes ? k.rows * k.lanes : k.rows};
    t.u.norm = k;
    return row_phases(P, ni, &t, !k.lanes ? 1 : k.rms ? 2 : 3);
}

static pp_status plan_pool(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    /* f32, or a half plan's MaxPool, AveragePool and LpPool (ppcc --precision) */
    const bool half = (n->op == PP_OP_MAXPOOL || n->op == PP_OP_AVGPOOL || n->op == PP_OP_LPPOOL) &&
                      (x->dtype == PP_F16 || x->dtype == PP_BF16);
    if (n->n_out != 1 || (x->dtype != PP_F32 && !half) || y->dtype != x->dtype) return PP_OK;
    pp_geom g;
    if (pp_geom_make(attrs_of(P, n), &x->shape, NULL, true, &g, NULL) != PP_OK) return PP_OK;
    const pp_geom3 g3 = pp_geom3_lift(&g);
    const int64_t lp = n->op == PP_OP_LPPOOL ? attr_i(P, n, "p", 2) : 0;
    if (n->op == PP_OP_LPPOOL && (lp < 1 || lp > INT32_MAX)) return PP_OK; /* the reference kernel says why */
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 2);
    s->kernel = PCU_K_POOL;
    pcu_pool *k = &s->u.pool;
    k->max = n->op == PP_OP_MAXPOOL;
    k->t = x->dtype;
    k->lp = (int32_t)lp;
    k->count_pad = n->op == PP_OP_AVGPOOL && attr_i(P, n, "count_include_pad", 0) != 0;
    k->nc = x->shape.dim[0] * x->shape.dim[1];
    for (int d = 0; d < 3; d++) {
        k->in[d] = g3.in[d], k->k[d] = g3.k[d], k->s[d] = g3.s[d], k->d[d] = g3.d[d];
        k->p[d] = g3.p[d], k->p1[d] = g3.p1[d], k->out[d] = g3.out[d];
    }
    k->n = k->nc * k->out[0] * k->out[1] * k->out[2];
    if (P->cur_nhwc) { /* channels-last: the same window a thread, the channel innermost (kmath.h pcu_poolh_at) */
        const pcu_pool pk = *k;
        s->kernel = PCU_K_POOLH;
        s->u.poolh = (pcu_poolh){.p = pk, .c = x->shape.dim[1]};
    }
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->out[0]);
    s->threads = P->cur_nhwc ? s->u.poolh.p.n : s->u.pool.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* pp.MaxPoolGrad (dY, X -> dX) and pp.AvgPoolGrad (dY -> dX, X's shape its
 * output's) of f32, 1-3 spatial dims (pcu_mpgrad_at, pcu_apgrad_at) */
static pp_status plan_pool_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const bool max = n->op == PP_OP_MAXPOOLGRAD;
    *ok = false;
    if (!all_f32(P, n) || n->n_in != (max ? 2 : 1) || n->n_out != 1) return PP_OK;
    const pprt_tdesc *dy = T(P, n->in[0]), *x = T(P, max ? n->in[1] : n->out[0]);
    pp_geom g;
    if (x->shape.rank < 3 || pp_geom_make(attrs_of(P, n), &x->shape, NULL, true, &g, NULL) != PP_OK || g.nsp < 1 ||
        g.nsp > 3)
        return PP_OK;
    const pp_geom3 g3 = pp_geom3_lift(&g);
    pcu_mpgrad k = {.max = max, .nc = x->shape.dim[0] * x->shape.dim[1],
                    .count_pad = max ? 0 : attr_i(P, n, "sum", 0) ? 2 : attr_i(P, n, "count_include_pad", 0) != 0};
    for (int d = 0; d < 3; d++) {
        k.in[d] = g3.in[d], k.k[d] = g3.k[d], k.s[d] = g3.s[d], k.d[d] = g3.d[d];
        k.p[d] = g3.p[d], k.p1[d] = g3.p1[d], k.out[d] = g3.out[d];
        if (k.s[d] < 1 || k.d[d] < 1) return PP_OK;
    }
    if (numel(&dy->shape) != k.nc * k.out[0] * k.out[1] * k.out[2]) return PP_OK; /* the reference says why */
    k.n = k.nc * k.in[0] * k.in[1] * k.in[2];
    NEW_STEP(s, P, PCU_S_KERNEL, ni, max ? 3 : 2);
    s->kernel = max ? PCU_K_MPGRAD : PCU_K_APGRAD;
    if (max) s->u.mpg = k;
    else s->u.apg = k;
    for (int j = 0; j < n->n_in; j++) s->ops[j] = R(P, n->in[j]);
    s->ops[n->n_in] = R(P, n->out[0]);
    s->threads = k.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* (cuplan.h) */
bool pcu_resize_block(pp_attrs a, const pp_tinfo *tin, int n_in, const pp_shape *xs, const pp_shape *ys,
                      pcu_resize *k) {
    pp_resize r;
    if (xs->rank > PCU_MAXD || ys->rank != xs->rank || pp_resize_parse(a, tin, n_in, &r, NULL) != PP_OK) return false;
    *k = (pcu_resize){.rank = xs->rank, .mode = r.mode == PP_RS_NEAREST ? 0 : r.mode == PP_RS_LINEAR ? 1 : 2,
                      .coord = (int32_t)r.coord, .nearest = (int32_t)r.nearest, .a = -1, .b = -1,
                      .exclude = r.exclude_outside, .antialias = r.antialias, .cubic_a = r.cubic_a,
                      .extrap = r.extrapolation, .n = numel(ys)};
    _Static_assert(PP_RC_TF_CROP_AND_RESIZE == 5 && PP_RS_CUBIC == 2, "pcu_resize's numbering");
    for (int d = 0; d < xs->rank; d++) {
        k->in[d] = xs->dim[d], k->out[d] = r.out[d], k->scale[d] = r.scale[d], k->roi0[d] = r.roi0[d],
        k->roi1[d] = r.roi1[d];
        if (r.out[d] != ys->dim[d]) return false;
        /* the axes the reference resizes (ref_nn.c's resize_identity) */
        if (r.out[d] == xs->dim[d] && (r.coord == PP_RC_TF_CROP_AND_RESIZE ? r.roi0[d] == 0.0 && r.roi1[d] == 1.0
                                                                           : fabs(r.scale[d] - 1.0) <= 1e-9))
            continue;
        int64_t start;
        double st;
        if (pcu_resize_ntaps(k, d, &start, &st) > 64) return false; /* a strong antialiased downscale */
        if (k->a < 0) k->a = d;
        else if (k->b < 0) k->b = d;
        else return false; /* three or more axes */
    }
    return true;
}

/* A channels-last Resize (its operands' shadows N, H, W, C): its roi, scales or sizes, given per NCHW axis, in
 * that order too, into buf (64 bytes each); false where it cannot be (an 'axes' attribute) */
static bool resize_nhwc_inputs(const planner *P, const pprt_node *n, pp_tinfo *tin, unsigned char (*buf)[64]) {
    if (pp_attr_find(attrs_of(P, n), "axes")) return false;
    for (int i = 1; i < n->n_in && i < 4; i++) {
        if (n->in[i] < 0) continue;
        const pprt_tdesc *t = &P->st->t[n->in[i]]; /* (not its shadow) */
        const int64_t m = numel(&t->shape);
        const size_t es = pp_dtype_size(t->dtype);
        tin[i] = (pp_tinfo){t->dtype, t->shape, t->data};
        if (m == 0) continue; /* an empty input: absent */
        if ((m != 4 && m != 8) || !es || es > 8 || !t->data) return false;
        const unsigned char *src = t->data;
        for (int64_t h = 0; h < m / 4; h++) /* roi: its starts, then its ends */
            for (int d = 0; d < 4; d++) memcpy(buf[i] + (size_t)(h * 4 + d) * es, src + (size_t)(h * 4 + nhwc_from[d]) * es, es);
        tin[i].data = buf[i];
    }
    return true;
}

/* Resize of f32 over at most two axes, every mode and coordinate transform
 * (pcu_resize_at); its scales or sizes must be constants, and an antialiased
 * downscale at most 64 taps per axis. The rest: the host. */
static pp_status plan_resize(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    pp_tinfo tin[4];
    unsigned char buf[4][64];
    pcu_resize k;
    /* f32, or a half plan's X and Y of one half type (ppcc --precision: passes/precision.c's half_slots) */
    if ((x->dtype != PP_F32 && x->dtype != PP_F16 && x->dtype != PP_BF16) || y->dtype != x->dtype ||
        !const_inputs(P, n, tin, 4) ||
        (P->cur_nhwc && !resize_nhwc_inputs(P, n, tin, buf)) ||
        !pcu_resize_block(attrs_of(P, n), tin, n->n_in, &x->shape, &y->shape, &k))
        return PP_OK; /* computed scales or sizes: the host */
    if (P->cur_nhwc && (k.a == 0 || k.a == 3 || k.b == 0 || k.b == 3))
        return PP_OK; /* the batch or the channels resized: NCHW (the passes' order would differ) */
    *ok = true;
    if (k.n == 0) return PP_OK;
    if (k.a < 0) { /* nothing resized: a copy */
        P->pl->counts.copies++;
        return copy_step(P, ni, R(P, n->in[0]), R(P, n->out[0]));
    }
    /* whether a pass sums its zero-weight taps too (the reference's, for its innermost resized axis): by the
     * NCHW dims, channels-last too, so both give the same bits */
    const pp_shape *xs = &P->st->t[n->in[0]].shape;
    const int ax = P->cur_nhwc ? nhwc_from[k.a] : k.a, bx = k.b < 0 ? -1 : P->cur_nhwc ? nhwc_from[k.b] : k.b;
    int64_t after_a = 1, after_b = 1;
    for (int d = ax + 1; d < xs->rank; d++) after_a *= xs->dim[d];
    for (int d = bx + 1; bx >= 0 && d < xs->rank; d++) after_b *= xs->dim[d];
    k.sum_a = after_a == 1, k.sum_b = after_b == 1;
    k.t = x->dtype;
    XY_STEP(s, P, ni, PCU_K_RESIZE, k.n);
    s->u.rs = k;
    return PP_OK;
}

/* pp.ResizeGrad (dY [roi] [scales] [sizes] -> dX of f32, the forward's attributes and its input's
 * "shape"): the forward's parameter block over dX's elements (pcu_rsgrad_at), as plan_resize takes
 * the forward (constant inputs, at most two resized axes). */
static pp_status plan_resize_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *dy = T(P, n->in[0]), *dx = T(P, n->out[0]);
    *ok = false;
    pp_tinfo tin[4];
    pcu_resize k;
    if (n->n_out != 1 || dy->dtype != PP_F32 || dx->dtype != PP_F32 || !const_inputs(P, n, tin, 4))
        return PP_OK;
    tin[0] = (pp_tinfo){PP_F32, dx->shape, NULL}; /* the forward's input */
    if (!pcu_resize_block(attrs_of(P, n), tin, n->n_in, &dx->shape, &dy->shape, &k)) return PP_OK;
    *ok = true;
    k.n = numel(&dx->shape);
    if (k.n == 0) return PP_OK;
    if (k.a < 0) { /* nothing resized: the gradient is dY */
        P->pl->counts.copies++;
        return copy_step(P, ni, R(P, n->in[0]), R(P, n->out[0]));
    }
    XY_STEP(s, P, ni, PCU_K_RSGRAD, k.n);
    s->u.rsg = k;
    return PP_OK;
}

/* CumSum and CumProd of f32, f64, i32 or i64 along a constant axis (pcu_cumsum_at). */
static pp_status plan_cumsum(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *ax = n->n_in > 1 ? T(P, n->in[1]) : NULL, *y = T(P, n->out[0]);
    *ok = false;
    const pp_dtype t = x->dtype;
    if ((t != PP_F32 && t != PP_F64 && t != PP_I32 && t != PP_I64) || y->dtype != t) return PP_OK;
    if (!ax || ax->kind != PPRT_WEIGHT || !ax->data || numel(&ax->shape) != 1 ||
        (ax->dtype != PP_I32 && ax->dtype != PP_I64))
        return PP_OK;
    const int r = x->shape.rank;
    int64_t axis = pcu_ldi(ax->data, ax->dtype, 0);
    if (axis < -r || axis >= r) return PP_OK; /* the reference kernel says why */
    if (axis < 0) axis += r;
    pcu_cumsum k = {.t = (int32_t)t, .exclusive = attr_i(P, n, "exclusive", 0) != 0,
                    .reverse = attr_i(P, n, "reverse", 0) != 0, .prod = n->op == PP_OP_CUMPROD,
                    .outer = 1, .len = x->shape.dim[axis], .inner = 1};
    for (int d = 0; d < axis; d++) k.outer *= x->shape.dim[d];
    for (int d = (int)axis + 1; d < r; d++) k.inner *= x->shape.dim[d];
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 2);
    s->kernel = PCU_K_CUMSUM;
    s->u.cs = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->out[0]);
    s->threads = k.outer * k.inner;
    if (s->threads == 0 || k.len == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* QuantizeLinear and DequantizeLinear as the reference parses them (ir/op_fns.h
 * pp_quant; pcu_quant_at): any scale and zero point, constant or computed. */
static pp_status plan_quant(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    pp_tinfo tin[3];
    for (int k = 0; k < 3; k++) tin[k] = shape_info(P, n, k);
    if (n->n_in > 2 && n->in[2] >= 0 && T(P, n->in[2])->kind == PPRT_WEIGHT) tin[2].data = T(P, n->in[2])->data;
    if (tin[2].data && T(P, n->in[2])->varies) P->pl->folds_varying = true;
    pp_quant q;
    if (pp_quant_parse(n->op, attrs_of(P, n), tin, n->n_in, &q, NULL) != PP_OK) return PP_OK;
    pcu_quant k = {.dequant = n->op == PP_OP_DEQUANTIZELINEAR, .qt = (int32_t)q.q, .has_zp = q.has_zp,
                   .per_tensor = q.per_tensor, .n = numel(&T(P, n->in[0])->shape), .inner = q.inner, .len = q.len,
                   .block = q.block, .lo = (int32_t)q.lo, .hi = (int32_t)q.hi};
    _Static_assert(PCU_T_I8 == (int)PP_I8 && PCU_T_U16 == (int)PP_U16 && PCU_T_I32 == (int)PP_I32,
                   "pcu types are ONNX's numbering");
    *ok = true;
    if (k.n == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 4);
    s->kernel = PCU_K_QUANT;
    s->u.q = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[1]);
    if (q.has_zp) s->ops[2] = R(P, n->in[2]);
    s->ops[3] = R(P, n->out[0]);
    s->threads = k.n;
    P->pl->counts.own++;
    return PP_OK;
}

/* GridSample of f32 over 1 to 3 spatial axes (pcu_gridsample_at); more: the host. */
static pp_status plan_gridsample(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    pp_tinfo tin[2] = {shape_info(P, n, 0), shape_info(P, n, 1)};
    pp_gridsample g;
    if (pp_gridsample_parse(attrs_of(P, n), tin, n->n_in, &g, NULL) != PP_OK || g.k > PCU_GS_MAXK) return PP_OK;
    const pp_shape *xs = &tin[0].shape, *ys = &T(P, n->out[0])->shape;
    pcu_gridsample k = {.mode = (int32_t)g.mode, .pad = (int32_t)g.pad, .align = g.align_corners, .k = g.k,
                        .C = xs->dim[1], .P = 1, .S = 1, .n = numel(ys), .in = {1, 1, 1}};
    _Static_assert(PP_GS_LINEAR == 0 && PP_GS_NEAREST == 1 && PP_GS_CUBIC == 2 && PP_GS_ZEROS == 0 &&
                   PP_GS_BORDER == 1 && PP_GS_REFLECTION == 2, "pcu_gridsample's numbering");
    for (int d = 0; d < g.k; d++) k.in[d] = xs->dim[2 + d], k.S *= xs->dim[2 + d], k.P *= ys->dim[2 + d];
    *ok = true;
    if (k.n == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_GRIDSAMPLE;
    s->u.gs = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[1]);
    s->ops[2] = R(P, n->out[0]);
    s->threads = k.n;
    P->pl->counts.own++;
    return PP_OK;
}

/* pp.GridSampleGrad of f32 over 1 to 3 spatial axes: two steps (pcu_gsgrad_at), dX's planes with their sums in
 * WORK, then dgrid's points; more axes: the host. */
static pp_status plan_gridsample_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    pp_tinfo tin[2] = {shape_info(P, n, 1), shape_info(P, n, 2)};
    pp_gridsample g;
    if (n->n_out < 2 || pp_gridsample_parse(attrs_of(P, n), tin, 2, &g, NULL) != PP_OK || g.k > PCU_GS_MAXK ||
        T(P, n->in[0])->dtype != PP_F32 || tin[0].dtype != PP_F32 || tin[1].dtype != PP_F32)
        return PP_OK;
    const pp_shape *xs = &tin[0].shape, *gs = &tin[1].shape;
    pcu_gsgrad k = {.g = {.mode = (int32_t)g.mode, .pad = (int32_t)g.pad, .align = g.align_corners, .k = g.k,
                          .C = xs->dim[1], .P = 1, .S = 1, .n = xs->dim[0], .in = {1, 1, 1}}};
    for (int d = 0; d < g.k; d++) k.g.in[d] = xs->dim[2 + d], k.g.S *= xs->dim[2 + d], k.g.P *= gs->dim[1 + d];
    *ok = true;
    const int64_t N = k.g.n;
    if (N * k.g.C * k.g.S == 0 && N * k.g.P == 0) return PP_OK;
    const pcu_ref acc = work_scratch(P, (uint64_t)(N * k.g.C * k.g.S) * sizeof(double));
    for (int ph = 0; ph < 2; ph++) {
        const int64_t threads = ph == 0 ? N * k.g.C : N * k.g.P;
        if (threads == 0) continue; /* (an empty dX or dgrid) */
        NEW_STEP(s, P, PCU_S_KERNEL, ni, 6);
        s->kernel = PCU_K_GSGRAD;
        k.phase = ph;
        s->u.gsg = k;
        for (int j = 0; j < 3; j++) s->ops[j] = R(P, n->in[j]);
        s->ops[3] = R(P, n->out[0]);
        s->ops[4] = R(P, n->out[1]);
        s->ops[5] = acc;
        s->threads = threads;
    }
    P->pl->counts.own++;
    return PP_OK;
}

/* Hardmax and LpNormalization of f32 or f64, a thread per line (pcu_line_at). */
static pp_status plan_line(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    if ((x->dtype != PP_F32 && x->dtype != PP_F64) || y->dtype != x->dtype) return PP_OK;
    pcu_line k = {.lpnorm = n->op == PP_OP_LPNORM, .f64 = x->dtype == PP_F64};
    if (k.lpnorm) {
        int axis, p;
        if (pp_lpnorm_parse(attrs_of(P, n), &x->shape, &axis, &p, NULL) != PP_OK) return PP_OK;
        k.p = p, k.lines = 1, k.n = x->shape.dim[axis], k.inner = 1;
        for (int d = 0; d < x->shape.rank; d++)
            if (d != axis) *(d < axis ? &k.lines : &k.inner) *= x->shape.dim[d];
        k.lines *= k.inner;
    } else {
        int64_t outer;
        if (pp_softmax_split(attrs_of(P, n), &x->shape, &outer, &k.n, &k.inner, NULL) != PP_OK) return PP_OK;
        k.lines = outer * k.inner;
    }
    *ok = true;
    if (k.lines == 0 || k.n == 0) return PP_OK;
    XY_STEP(s, P, ni, PCU_K_LINE, k.lines);
    s->u.line = k;
    return PP_OK;
}

/* OneHot: any index type the reference reads, values of up to 8 bytes; depth
 * and axis as the output's shape says (pcu_onehot_at). */
static pp_status plan_onehot(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in != 3 || n->in[0] < 0 || n->in[2] < 0) return PP_OK;
    const pprt_tdesc *ix = T(P, n->in[0]), *v = T(P, n->in[2]), *y = T(P, n->out[0]);
    const int r = ix->shape.rank, es = (int)pp_dtype_size(y->dtype), it = (int)ix->dtype;
    if (y->shape.rank != r + 1 || v->dtype != y->dtype || numel(&v->shape) != 2 || es < 1 || es > 8 ||
        !(it == PP_F32 || it == PP_F64 || (pcu_tsize(it) > 0 && !pcu_is_float(it) && it != PP_BOOL)))
        return PP_OK;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", -1), r + 1, "axis", &axis, NULL) != PP_OK) return PP_OK;
    pcu_onehot k = {.it = it, .esize = es, .n = numel(&y->shape), .depth = y->shape.dim[axis], .inner = 1};
    for (int d = axis + 1; d <= r; d++) k.inner *= y->shape.dim[d];
    *ok = true;
    if (k.n == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_ONEHOT;
    s->u.oh = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[2]);
    s->ops[2] = R(P, n->out[0]);
    s->threads = k.n;
    P->pl->counts.own++;
    return PP_OK;
}

/* AffineGrid of f32 or f64 theta [N, k, k + 1] into [N, spatial..., k], k 2
 * or 3 (pcu_affgrid_at); the constant size input only shaped the output. */
static pp_status plan_affinegrid(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *t = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    const pp_shape *ts = &t->shape, *ys = &y->shape;
    if ((t->dtype != PP_F32 && t->dtype != PP_F64) || y->dtype != t->dtype || ts->rank != 3) return PP_OK;
    const int k = (int)ts->dim[1];
    if ((k != 2 && k != 3) || ts->dim[2] != k + 1 || ys->rank != k + 2 || ys->dim[0] != ts->dim[0] ||
        ys->dim[k + 1] != k)
        return PP_OK;
    pcu_affgrid g = {.k = k, .align = attr_i(P, n, "align_corners", 0) != 0, .f64 = t->dtype == PP_F64,
                     .n = numel(ys), .P = 1};
    for (int d = 0; d < k; d++) g.out[d] = ys->dim[1 + d], g.P *= ys->dim[1 + d];
    *ok = true;
    if (g.n == 0) return PP_OK;
    XY_STEP(s, P, ni, PCU_K_AFFGRID, g.n);
    s->u.ag = g;
    return PP_OK;
}

/* LSTM, GRU and RNN of f32 (pcu_rnn_at): a launch for the initial state,
 * one per step (two for GRU), one for Y_h and Y_c; the state in the
 * workspace, h in two halves that swap between steps. */
static pp_status plan_rnn(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    pp_tinfo ti[8];
    const int nin = n->n_in < 8 ? n->n_in : 8;
    for (int k = 0; k < nin; k++) ti[k] = shape_info(P, n, k);
    pp_rnn r;
    if (pp_rnn_parse(n->op, attrs_of(P, n), ti, nin, &r, NULL) != PP_OK) return PP_OK;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && T(P, n->out[k])->dtype != PP_F32) return PP_OK;
    /* on the host: a state past the scratch's 256 MiB, and sequences of more than PCU_RNN_MAX_STEPS
     * launches (each step a record and a parameter block: a million steps would take a GB) */
    if (r.N > ((int64_t)1 << 31) || r.H > ((int64_t)1 << 31)) return PP_OK;
    const uint64_t dnh = (uint64_t)r.D * (uint64_t)r.N * (uint64_t)r.H;
    if (dnh * 6 * sizeof(float) > ((uint64_t)256 << 20)) return PP_OK;
    if ((uint64_t)r.S * (n->op == PP_OP_GRU ? 2 : 1) > PCU_RNN_MAX_STEPS) return PP_OK;
    pcu_rnn k = {.op = n->op == PP_OP_LSTM ? PCU_RNN_LSTM : n->op == PP_OP_GRU ? PCU_RNN_GRU : PCU_RNN_RNN,
                 .D = r.D, .G = r.G, .layout = r.layout, .reverse = r.reverse, .input_forget = r.input_forget,
                 .lbr = r.linear_before_reset, .clip = r.clip, .S = r.S, .N = r.N, .I = r.I, .H = r.H};
    _Static_assert(PP_RNN_SIGMOID == 0 && PP_RNN_TANH == 1 && PP_RNN_HARDSIGMOID == 3 && PP_RNN_SCALEDTANH == 7 &&
                   PP_RNN_SOFTPLUS == 10, "pcu_rnn_act's numbering");
    for (int d = 0; d < 2; d++)
        for (int j = 0; j < 3; j++)
            k.fn[d][j] = (int32_t)r.act[d][j].fn, k.alpha[d][j] = r.act[d][j].alpha, k.beta[d][j] = r.act[d][j].beta;
    *ok = true;
    if (dnh == 0) return PP_OK;
    pcu_ref ops[16];
    for (int q = 0; q < 16; q++) ops[q] = (pcu_ref){-1, -1, 0, 0};
    const bool has[8] = {true, true, true, r.has_b, r.has_lens, r.has_h0, r.has_c0, r.has_p};
    for (int q = 0; q < nin; q++) /* operands 0-7: the node's inputs in their order */
        if (has[q] && n->in[q] >= 0) ops[q] = R(P, n->in[q]);
    for (int q = 0; q < n->n_out && q < 3; q++)
        if (n->out[q] >= 0) ops[8 + q] = R(P, n->out[q]);
    /* the workspace: h (two halves), c, GRU's z and r, r (.) h */
    const pcu_ref w = work_scratch(P, dnh * 6 * sizeof(float));
    pcu_ref half[2];
    for (int q = 0; q < 2; q++) half[q] = (pcu_ref){w.space, -1, w.off + q * dnh * 4, dnh * 4};
    ops[13] = (pcu_ref){w.space, -1, w.off + 2 * dnh * 4, dnh * 4};
    if (k.op == PCU_RNN_GRU) ops[14] = (pcu_ref){w.space, -1, w.off + 3 * dnh * 4, 2 * dnh * 4};
    if (k.op == PCU_RNN_GRU && !k.lbr) ops[15] = (pcu_ref){w.space, -1, w.off + 5 * dnh * 4, dnh * 4};
    int cur = 0; /* the half that holds the state */
    for (int64_t s = -1; s <= r.S; s++) {
        const int phases = s < 0 || s == r.S || k.op != PCU_RNN_GRU ? 1 : 2;
        for (int ph = 0; ph < phases; ph++) {
            NEW_STEP(st, P, PCU_S_KERNEL, ni, 16);
            memcpy(st->ops, ops, sizeof ops);
            st->kernel = PCU_K_RNN;
            st->u.rnn = k;
            st->u.rnn.s = s < 0 ? 0 : s;
            st->u.rnn.phase = s < 0 ? PCU_RNN_INIT : s == r.S ? PCU_RNN_FINAL : phases == 2 && ph == 0 ? PCU_RNN_GATES
                                                                                                    : PCU_RNN_STEP;
            /* h_in: the state; h_out: the other half (the initial state: the current one) */
            st->ops[11] = s < 0 ? (pcu_ref){-1, -1, 0, 0} : half[cur];
            st->ops[12] = s < 0 ? half[cur] : s == r.S || st->u.rnn.phase == PCU_RNN_GATES ? (pcu_ref){-1, -1, 0, 0}
                                                                                             : half[1 - cur];
            st->threads = (int64_t)dnh;
        }
        if (s >= 0 && s < r.S) cur = 1 - cur;
    }
    P->pl->counts.own++;
    return PP_OK;
}

/* Col2Im of f32 or f64 over up to PCU_MAXD spatial axes (pcu_col2im_at). */
static pp_status plan_col2im(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    pp_tinfo tin[3];
    pp_col2im g;
    if ((x->dtype != PP_F32 && x->dtype != PP_F64) || y->dtype != x->dtype || !const_inputs(P, n, tin, 3) ||
        pp_col2im_parse(attrs_of(P, n), tin, &g, NULL) != PP_OK || g.k > PCU_MAXD)
        return PP_OK;
    pcu_col2im k = {.k = g.k, .f64 = x->dtype == PP_F64, .n = numel(&y->shape), .P = 1, .kvol = g.kvol, .L = g.L};
    for (int d = g.k - 1; d >= 0; d--) {
        k.img[d] = g.img[d], k.blk[d] = g.blk[d], k.dil[d] = g.dil[d], k.stride[d] = g.stride[d];
        k.pad0[d] = g.pad0[d], k.nb[d] = g.nb[d];
        k.imgst[d] = d == g.k - 1 ? 1 : k.imgst[d + 1] * g.img[d + 1];
        k.blkst[d] = d == g.k - 1 ? 1 : k.blkst[d + 1] * g.blk[d + 1];
        k.P *= g.img[d];
    }
    *ok = true;
    if (k.n == 0) return PP_OK;
    XY_STEP(s, P, ni, PCU_K_COL2IM, k.n);
    s->u.c2i = k;
    return PP_OK;
}

/* GatherElements of any element type up to 8 bytes, int32 or int64
 * indices (pcu_gather_el_at); an index out of range fails the stage. */
static pp_status plan_gather_elements(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *ix = T(P, n->in[1]), *y = T(P, n->out[0]);
    *ok = false;
    const int r = x->shape.rank;
    const int es = (int)pp_dtype_size(x->dtype);
    if (es < 1 || es > 8 || y->dtype != x->dtype || (ix->dtype != PP_I32 && ix->dtype != PP_I64) ||
        ix->shape.rank != r || r < 1 || r > PCU_MAXD)
        return PP_OK;
    int axis;
    if (pp_norm_axis(attr_i(P, n, "axis", 0), r, "axis", &axis, NULL) != PP_OK) return PP_OK;
    pcu_gather_el k = {.rank = r, .axis = axis, .esize = es, .idx_t = (int32_t)ix->dtype, .n = numel(&ix->shape),
                       .len = x->shape.dim[axis]};
    int64_t xst[PP_MAX_DIMS];
    strides_of(&x->shape, xst);
    for (int d = 0; d < r; d++) {
        if (d != axis && ix->shape.dim[d] > x->shape.dim[d]) return PP_OK; /* the reference kernel says why */
        k.dim[d] = ix->shape.dim[d], k.xst[d] = xst[d];
    }
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_GATHER_EL;
    s->u.ge = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->in[1]);
    s->ops[2] = R(P, n->out[0]);
    s->threads = k.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* Whether two regions share bytes without being the same. */
static bool partly_same(pcu_ref a, pcu_ref b) {
    return pcu_ref_meet(a, b) && !(a.off == b.off && a.bytes == b.bytes);
}

/* ScatterElements, Scatter and ScatterND (pcu_scatter_at): a copy of the data
 * into the output (none where the plan gave them the same bytes), then the
 * updates. Shapes the reference kernel refuses, reductions on types it does
 * not reduce, and an output over the indices or updates stay on the host. */
static pp_status plan_scatter(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in != 3 || n->n_out != 1 || n->in[0] < 0 || n->in[1] < 0 || n->in[2] < 0) return PP_OK;
    const pprt_tdesc *x = T(P, n->in[0]), *ix = T(P, n->in[1]), *u = T(P, n->in[2]), *y = T(P, n->out[0]);
    const pp_dtype t = x->dtype;
    const int es = (int)pp_dtype_size(t), r = x->shape.rank;
    if (es < 1 || es > 8 || y->dtype != t || u->dtype != t || (ix->dtype != PP_I32 && ix->dtype != PP_I64) || r < 1 ||
        r > PCU_MAXD || !pp_shape_eq(&y->shape, &x->shape))
        return PP_OK;
    const char *rs = "none";
    (void)pp_attr_string(attrs_of(P, n), "reduction", "none", &rs, NULL);
    static const char *const reds[] = {"none", "add", "mul", "max", "min"};
    int red = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(rs, reds[i])) red = i;
    if (red < 0 || (red != PCU_SC_NONE && (t == PP_F16 || t == PP_BF16 || t == PP_BOOL))) return PP_OK;
    const pcu_ref yr = R(P, n->out[0]), xr = R(P, n->in[0]);
    if (partly_same(yr, xr) || pcu_ref_meet(yr, R(P, n->in[1])) || pcu_ref_meet(yr, R(P, n->in[2])))
        return PP_OK;
    pcu_scatter k = {.rank = r, .t = (int32_t)t, .esize = es, .idx_t = (int32_t)ix->dtype, .red = red,
                     .yn = numel(&x->shape)};
    strides_of(&x->shape, k.yst);
    const pp_shape *is = &ix->shape, *us = &u->shape;
    if (n->op == PP_OP_SCATTERND) {
        const int q = is->rank;
        const int64_t kq = q >= 1 ? is->dim[q - 1] : -1;
        if (kq < 0 || kq > r || us->rank != q - 1 + r - (int)kq) return PP_OK;
        k.nd = 1, k.q = (int32_t)kq, k.run = 1, k.slice = 1;
        for (int d = 0; d < q - 1; d++) {
            if (us->dim[d] != is->dim[d]) return PP_OK;
            k.run *= is->dim[d];
        }
        for (int d = (int)kq; d < r; d++) {
            if (us->dim[q - 1 + d - (int)kq] != x->shape.dim[d]) return PP_OK;
            k.slice *= x->shape.dim[d];
        }
        for (int d = 0; d < (int)kq; d++) k.dim[d] = x->shape.dim[d];
        k.threads = k.run ? k.slice : 0;
    } else {
        if (!pp_shape_eq(us, is) || is->rank != r) return PP_OK;
        int axis;
        if (pp_norm_axis(attr_i(P, n, "axis", 0), r, "axis", &axis, NULL) != PP_OK) return PP_OK;
        k.axis = axis, k.run = is->dim[axis], k.slice = x->shape.dim[axis];
        strides_of(is, k.ust);
        k.threads = k.run ? numel(is) / k.run : 0;
        for (int d = 0; d < r; d++) {
            if (d != axis && is->dim[d] > x->shape.dim[d]) return PP_OK; /* the reference kernel says why */
            k.dim[d] = is->dim[d];
        }
    }
    *ok = true;
    PP_TRY(copy_step(P, ni, xr, yr));
    if (k.threads == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_SCATTER;
    s->u.sc = k;
    s->ops[0] = R(P, n->in[1]);
    s->ops[1] = R(P, n->in[2]);
    s->ops[2] = yr;
    s->threads = k.threads;
    P->pl->counts.own++;
    return PP_OK;
}

/* Trilu with a constant k (pcu_trilu_at); its output not over its input
 * unless on the same bytes (each thread reads its own element first). */
static pp_status plan_trilu(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    *ok = false;
    pp_tinfo tin[2];
    const int es = (int)pp_dtype_size(x->dtype), r = x->shape.rank;
    if (es < 1 || es > 8 || y->dtype != x->dtype || r < 2 || !const_inputs(P, n, tin, 2) ||
        partly_same(R(P, n->out[0]), R(P, n->in[0])))
        return PP_OK;
    int64_t kk = 0;
    if (tin[1].data) {
        if ((tin[1].dtype != PP_I64 && tin[1].dtype != PP_I32) || numel(&tin[1].shape) != 1) return PP_OK;
        kk = pcu_ldi(tin[1].data, tin[1].dtype, 0);
    }
    pcu_trilu k = {.upper = attr_i(P, n, "upper", 1) != 0, .esize = es, .rows = x->shape.dim[r - 2],
                   .cols = x->shape.dim[r - 1], .k = kk, .n = numel(&x->shape)};
    *ok = true;
    if (k.n == 0) return PP_OK;
    XY_STEP(s, P, ni, PCU_K_TRILU, k.n);
    s->u.tri = k;
    return PP_OK;
}

/* Whether output region o shares bytes with any input of node n, or with
 * another of its outputs. */
static bool meets_any(const planner *P, const pprt_node *n, pcu_ref o, int self) {
    for (int k = 0; k < n->n_in + n->n_out; k++) {
        const int tid = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
        if (tid >= 0 && k != self && pcu_ref_meet(R(P, tid), o)) return true;
    }
    return false;
}

/* RotaryEmbedding of f32 (pcu_rope_at); its output on bytes of its own. */
static pp_status plan_rope(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in < 3 || n->n_out != 1) return PP_OK;
    pp_tinfo tin[4];
    for (int k = 0; k < 4; k++) {
        tin[k] = shape_info(P, n, k);
        if (k < 3 && tin[k].dtype != PP_F32) return PP_OK;
    }
    pp_rope r;
    if (pp_rope_parse(attrs_of(P, n), tin, n->n_in, &r, NULL) != PP_OK || T(P, n->out[0])->dtype != PP_F32 ||
        (r.has_pos && tin[3].dtype != PP_I64) || meets_any(P, n, R(P, n->out[0]), n->n_in))
        return PP_OK;
    pcu_rope k = {.three_d = r.three_d, .interleaved = r.interleaved, .has_pos = r.has_pos, .B = r.B, .H = r.H,
                  .S = r.S, .D = r.D, .rot = r.rot, .max_pos = r.has_pos ? tin[1].shape.dim[0] : 0,
                  .n = numel(&T(P, n->in[0])->shape)};
    *ok = true;
    if (k.n == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 5);
    s->kernel = PCU_K_ROPE;
    s->u.rope = k;
    for (int q = 0; q < 4; q++) s->ops[q] = R(P, q < n->n_in ? n->in[q] : -1);
    s->ops[4] = R(P, n->out[0]);
    s->threads = k.n;
    P->pl->counts.own++;
    return PP_OK;
}

/* A strided copy of rows [B, H, len, dim] (source strides sst, element
 * offset soff) into dst at rows off .. off+len of [B, H, T, dim]. */
static pp_status rows_copy(planner *P, int ni, int src, int dst, int64_t B, int64_t H, int64_t len, int64_t dim,
                           const int64_t *sst, int64_t T_, int64_t off) {
    if (B * H * len * dim == 0) return PP_OK;
    pcu_step *s = perm_step(P, ni, 2, T(P, dst));
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    pcu_perm *k = &s->u.perm;
    k->rank = 4;
    const int64_t dim4[4] = {B, H, len, dim}, dst4[4] = {H * T_ * dim, T_ * dim, dim, 1};
    for (int d = 0; d < 4; d++) k->dim[d] = dim4[d], k->sst[d] = sst[d], k->dst_st[d] = dst4[d];
    k->dst_off = off * dim;
    s->ops[0] = R(P, src);
    s->ops[1] = R(P, dst);
    perm_finish(P, s);
    return PP_OK;
}

/* --cuda-fused-attention on: an Attention without past, padding lengths,
 * softcap or outputs beyond Y, its mask (if any) as long as the keys, head
 * dims up to PCU_FA_DMAX, runs as the fused kernel (kmath.h pcu_fattn_ph: a
 * float mask added, a bool one as -inf added where false, causality as -inf
 * added past the query's row, as the reference kernel computes them; the
 * others as pcu_attn_at). */
static bool attn_fusable(const pprt_node *n, const pp_attn *t) {
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0) return false;
    if (t->has_mask && (n->n_in < 4 || n->in[3] < 0 || t->mask.rank != 4 || t->mask.dim[3] != t->T)) return false;
    return !t->has_nonpad && t->P == 0 && !(t->softcap > 0) && t->T == t->Skv &&
           t->D >= 1 && t->D <= PCU_FA_DMAX && t->Dv >= 1 && t->Dv <= PCU_FA_DMAX && t->Hkv >= 1 &&
           t->Hq % t->Hkv == 0 && t->Sq >= 1 && t->T >= 1 && t->T <= INT32_MAX / 4 && n->out[0] >= 0;
}

static pp_status attn_fused(planner *P, int ni, const pp_attn *t) {
    const pprt_node *n = &P->st->nodes[ni];
    pcu_fattn k = {.scale_op = 1, .scale = t->scale, .nb = t->B * t->Hq, .nh = t->Hq, .grp = t->Hq / t->Hkv,
                   .Sq = t->Sq, .T = t->T, .D = t->D, .Dv = t->Dv};
    k.qtiles = pcu_fattn_qtiles(&k);
    k.qe = k.ke = k.ve = 1;
    if (t->three_d) { /* [B, S, heads * dim] */
        k.qb = t->Sq * t->Hq * t->D, k.qh = t->D, k.qi = t->Hq * t->D;
        k.kb = t->Skv * t->Hkv * t->D, k.kh = t->D, k.kj = t->Hkv * t->D;
        k.vb = t->Skv * t->Hkv * t->Dv, k.vh = t->Dv, k.vj = t->Hkv * t->Dv;
        k.yb = t->Sq * t->Hq * t->Dv, k.yh = t->Dv, k.yi = t->Hq * t->Dv;
    } else { /* [B, heads, S, dim] */
        k.qb = t->Hq * t->Sq * t->D, k.qh = t->Sq * t->D, k.qi = t->D;
        k.kb = t->Hkv * t->Skv * t->D, k.kh = t->Skv * t->D, k.kj = t->D;
        k.vb = t->Hkv * t->Skv * t->Dv, k.vh = t->Skv * t->Dv, k.vj = t->Dv;
        k.yb = t->Hq * t->Sq * t->Dv, k.yh = t->Sq * t->Dv, k.yi = t->Dv;
    }
    if (k.nb == 0) return PP_OK;
    k.causal = t->causal;
    if (t->has_mask) { /* [mB, mH, mS, T] packed, each of the first three the scores' or 1 */
        const int64_t *md = t->mask.dim, st[3] = {md[1] * md[2] * md[3], md[2] * md[3], md[3]};
        const int64_t mb = md[0] > 1 ? st[0] : 0, mh = md[1] > 1 ? st[1] : 0, mi = md[2] > 1 ? st[2] : 0;
        if (t->mask_bool) /* -inf added where false */
            k.where = 2, k.wthen = 1, k.wadd = 1, k.fill = -INFINITY, k.cb = mb, k.ch = mh, k.ci = mi, k.cj = 1;
        else
            k.mask = 1, k.mb = mb, k.mh = mh, k.mi = mi, k.mj = 1;
    }
    NEW_STEP(s, P, PCU_S_KERNEL, ni, t->has_mask ? (t->mask_bool ? 6 : 5) : 4);
    s->kernel = PCU_K_FATTN;
    s->u.fa = k;
    for (int q = 0; q < 3; q++) s->ops[q] = R(P, n->in[q]);
    s->ops[3] = R(P, n->out[0]);
    if (t->has_mask) s->ops[4] = t->mask_bool ? (pcu_ref){.space = -1, .tensor = -1} : R(P, n->in[3]);
    if (t->has_mask && t->mask_bool) s->ops[5] = R(P, n->in[3]);
    s->threads = k.nb * k.qtiles * PCU_BLOCK;
    P->pl->counts.own++;
    return PP_OK;
}

/* Attention of f32 (pcu_attn_at), with the present outputs as strided copies
 * and the softmax rows in WORK after the library workspace (at most
 * 256 MiB; longer rows stay on the host). Outputs on bytes of their own. */
static pp_status plan_attention(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (n->n_in < 3 || n->n_in > 7 || n->n_out < 1 || n->n_out > 4) return PP_OK;
    pp_tinfo tin[7];
    for (int k = 0; k < 7; k++) {
        tin[k] = shape_info(P, n, k);
        if (tin[k].dtype != PP_UNDEFINED && k != 3 && k != 6 && tin[k].dtype != PP_F32) return PP_OK;
    }
    pp_attn t;
    if (pp_attn_parse(attrs_of(P, n), tin, n->n_in, &t, NULL) != PP_OK || (t.has_mask && !t.mask_bool && tin[3].dtype != PP_F32))
        return PP_OK;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && (T(P, n->out[k])->dtype != PP_F32 || meets_any(P, n, R(P, n->out[k]), n->n_in + k)))
            return PP_OK;
    const int64_t rows = t.B * t.Hq * t.Sq, scratch = rows * t.T * 8;
    if (scratch > ((int64_t)256 << 20)) return PP_OK;
    pcu_attn k = {.three_d = t.three_d, .causal = t.causal, .has_mask = t.has_mask, .mask_bool = t.mask_bool,
                  .has_nonpad = t.has_nonpad, .qk_mode = t.qk_mode, .B = t.B, .Hq = t.Hq, .Hkv = t.Hkv, .Sq = t.Sq,
                  .Skv = t.Skv, .P = t.P, .T = t.T, .D = t.D, .Dv = t.Dv, .rows = rows, .scale = t.scale,
                  .softcap = t.softcap};
    for (int d = 0; d < 4; d++) k.mdim[d] = t.has_mask ? t.mask.dim[d] : 1;
    *ok = true;
    if (P->fattn && attn_fusable(n, &t)) return attn_fused(P, ni, &t);
    /* present_key / present_value: the past rows, then K / V's */
    for (int w = 0; w < 2; w++) {
        const int out = n->n_out > 1 + w ? n->out[1 + w] : -1;
        if (out < 0) continue;
        const int64_t dim = w ? t.Dv : t.D;
        const int64_t past[4] = {t.Hkv * t.P * dim, t.P * dim, dim, 1};
        const int64_t cur[4] = {t.three_d ? t.Skv * t.Hkv * dim : t.Hkv * t.Skv * dim, t.three_d ? dim : t.Skv * dim,
                                t.three_d ? t.Hkv * dim : dim, 1};
        if (t.P) PP_TRY(rows_copy(P, ni, n->in[4 + w], out, t.B, t.Hkv, t.P, dim, past, t.T, 0));
        PP_TRY(rows_copy(P, ni, n->in[1 + w], out, t.B, t.Hkv, t.Skv, dim, cur, t.T, t.P));
    }
    if (rows == 0 || n->out[0] < 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 10);
    s->kernel = PCU_K_ATTN;
    s->u.attn = k;
    for (int q = 0; q < 7; q++) s->ops[q] = R(P, q < n->n_in ? n->in[q] : -1);
    s->ops[7] = R(P, n->out[0]);
    s->ops[8] = R(P, n->n_out > 3 ? n->out[3] : -1);
    s->ops[9] = work_scratch(P, (uint64_t)scratch);
    s->threads = rows;
    P->pl->counts.own++;
    return PP_OK;
}

/* TopK of f32, f64, i32 or i64 with a constant K (pcu_topk_at). */
static pp_status plan_topk(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    const pprt_tdesc *x = T(P, n->in[0]);
    *ok = false;
    const pp_dtype t = x->dtype;
    pp_tinfo tin[2];
    if ((t != PP_F32 && t != PP_F64 && t != PP_I32 && t != PP_I64) || !const_inputs(P, n, tin, 2))
        return PP_OK; /* a computed K: the host */
    pp_topk tk;
    if (pp_topk_parse(attrs_of(P, n), tin, n->n_in, &tk, NULL) != PP_OK) return PP_OK;
    const pp_shape *xs = &x->shape;
    if (tk.k > xs->dim[tk.axis]) return PP_OK; /* the reference kernel says why */
    pcu_topk k = {.t = (int32_t)t, .largest = tk.largest, .outer = 1, .len = xs->dim[tk.axis], .inner = 1, .k = tk.k};
    for (int d = 0; d < tk.axis; d++) k.outer *= xs->dim[d];
    for (int d = tk.axis + 1; d < xs->rank; d++) k.inner *= xs->dim[d];
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 3);
    s->kernel = PCU_K_TOPK;
    s->u.tk = k;
    s->ops[0] = R(P, n->in[0]);
    s->ops[1] = R(P, n->out[0]);
    s->ops[2] = R(P, n->n_out > 1 ? n->out[1] : -1);
    s->threads = k.outer * k.inner;
    if (s->threads == 0 || k.k == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

bool pcu_conv_graph_fuses(const pcu_conv *c) { return !c->transpose && (c->has_bias || c->has_res || c->act); }

bool pcu_conv_epilogue(const pcu_conv *c, bool graph_fused) {
    return !graph_fused && (c->has_bias || c->has_res || c->act);
}

pcu_epi pcu_conv_epi(const pcu_conv *c) {
    pcu_epi e = {.act = c->act, .has_bias = c->has_bias, .has_res = c->has_res, .t = c->dt,
                 .n = c->y[0] * c->y[1] * c->y[2] * c->y[3] * (c->nsp == 3 ? c->y[4] : 1), .c = c->y[1],
                 .lo = c->lo, .hi = c->hi};
    e.s = c->y[0] * c->y[1] > 0 ? e.n / (c->y[0] * c->y[1]) : 1;
    if (c->nhwc) e.s = 1; /* channels-last: the channel is the innermost index */
    return e;
}

/* ---- pp.UnaryGrad (own kernel) -------------------------------------------------------------- */

/* The forward ops whose derivative kmath.h's pcu_unary_grad_d has (the
 * PP_UNARY_GRAD rows), but Sin and Cos (their double forms are not there). */
static const bool ugrad_rows[PP_OP_COUNT] = {
#define PP_UNARY(E, NAME, TR, FLOPS, A0, D0, A1, D1, F)
#define PP_UNARY_OWN(E, NAME, TR, FLOPS, F)
#define PP_EW_FORMULA(E, F)
#define PP_UNARY_GRAD(E, D) [PP_OP_##E] = true,
#include "../../ir/ops_unary.def"
#undef PP_UNARY_GRAD
#undef PP_UNARY
#undef PP_UNARY_OWN
#undef PP_EW_FORMULA
};

/* X, Y, dY -> dX of one shape, in f32; the forward op named by "op" with its
 * own float attributes (the reference kernel's reading of them). */
static pp_status plan_ugrad(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    if (!all_f32(P, n) || n->n_in != 3 || n->n_out != 1) return PP_OK;
    const char *name = NULL;
    pp_op fop;
    if (pp_attr_string(attrs_of(P, n), "op", NULL, &name, NULL) != PP_OK || !name || !pp_op_lookup(name, &fop) ||
        !ugrad_rows[fop] || fop == PP_OP_SIN || fop == PP_OP_COS)
        return PP_OK;
    const char *approx = "none";
    (void)pp_attr_string(attrs_of(P, n), "approximate", "none", &approx, NULL);
    if (strcmp(approx, "none")) return PP_OK; /* the reference kernel says what it does with it */
    const pprt_tdesc *y = T(P, n->out[0]);
    for (int k = 0; k < 3; k++)
        if (n->in[k] < 0 || T(P, n->in[k])->nbytes != y->nbytes) return PP_OK;
    pcu_ugrad k = {.op = ew_op_of(fop), .n = (int64_t)(y->nbytes / 4)};
    const unary_attr *ua = &unary_attrs[fop];
    if (ua->a0) k.p0 = attr_f(P, n, ua->a0, ua->d0);
    if (ua->a1) k.p1 = attr_f(P, n, ua->a1, ua->d1);
    NEW_STEP(s, P, PCU_S_KERNEL, ni, 4);
    s->kernel = PCU_K_UGRAD;
    s->u.ugrad = k;
    for (int j = 0; j < 3; j++) s->ops[j] = R(P, n->in[j]);
    s->ops[3] = R(P, n->out[0]);
    s->threads = k.n;
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    P->pl->counts.own++;
    *ok = true;
    return PP_OK;
}

/* ---- the half route of a mixed-precision training plan's products ---------------------------- */

/* ppcc --train --precision bf16|fp16 (passes/precision.c) rounds each
 * product's float operands to the half type H in the graph, a Cast to H and
 * a Cast back to f32, and its output the same way; the backward products
 * read their operands through such Casts too. A product (forward Conv,
 * MatMul, Gemm; pp.ConvGradX, pp.ConvGradW; the gradients' Gemms) whose
 * every input a Cast from H wrote, and whose f32 output one Cast to H alone
 * reads, takes the half route: an all-H step (cuBLASLt 16F/16BF matrices,
 * cuDNN HALF/BFLOAT16 tensors, f32 sums) that reads the H tensors in place
 * and writes its output Cast's H tensor, rounded once to nearest even as the
 * Cast rounds (float16 overflows to infinity, so a loss scale's check still
 * sees it). The output Cast has no step of its own, nor a Cast to f32 whose
 * every reader in the stage takes the half route. A Conv's bias is added in
 * the graph before the one rounding (pcu_step.conv_fuse), as the f32
 * route's epilogue adds it before the Cast. On cuda-emu the half step lifts
 * the H values to f32, sums as the f32 step does and rounds: the f32
 * route's bits.
 *
 * The route is decided over the whole plan by the tensors' names (a
 * received tensor has its producer's name), as runtime/dnnl/halfprod.c
 * decides, so a cut never changes it: where a cut falls between a Cast to
 * f32 and the product (the stage receives the f32 copy) an own-kernel Cast
 * writes the H values into WORK for it (exact: the copy holds H values),
 * and where it falls between the product and its output Cast (the stage
 * sends the f32 output) the product writes H into WORK and a Cast widens
 * it into the message (exact). */
#define PCU_HALF_IO 4 /* a product's inputs (at most 3) then its output */

static bool half_dt(pp_dtype t) { return t == PP_F16 || t == PP_BF16; }

/* Whether node n is a Cast of a `from` tensor into a `to` one */
static bool cast_of(const pprt_stage *q, const pprt_node *n, pp_dtype from, pp_dtype to) {
    return n && n->op == PP_OP_CAST && n->n_in >= 1 && n->n_out >= 1 && n->in[0] >= 0 && n->out[0] >= 0 &&
           q->t[n->in[0]].dtype == from && q->t[n->out[0]].dtype == to;
}

/* A tensor of the whole plan by name: the half type a Cast from it wrote it in (0: none), its readers (node
 * inputs in every stage), the half type its reader casts it to where that is a Cast from f32 (0: none), whether
 * it is a plan output */
typedef struct hname {
    const char *name;
    int from, readers, to;
    bool output;
} hname;

static int hname_cmp(const void *a, const void *b) { return strcmp(((const hname *)a)->name, ((const hname *)b)->name); }

static hname *hfind(const planner *P, const char *name) {
    const hname key = {.name = name};
    return bsearch(&key, P->hn, (size_t)P->n_hn, sizeof key, hname_cmp);
}

/* P->hn over every stage of the plan (W stages too). */
static pp_status half_names(planner *P) {
    const pprt_plan *p = P->p;
    const int ns = p->n_stages + p->n_wstages;
    int n = 0;
    for (int s = 0; s < ns; s++) n += p->stages[s].n_tensors;
    P->hn = malloc(pp_count(n) * sizeof *P->hn);
    if (!P->hn) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    n = 0;
    for (int s = 0; s < ns; s++)
        for (int t = 0; t < p->stages[s].n_tensors; t++) P->hn[n++] = (hname){.name = p->stages[s].t[t].name};
    qsort(P->hn, pp_count(n), sizeof *P->hn, hname_cmp);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (!u || strcmp(P->hn[u - 1].name, P->hn[i].name)) P->hn[u++] = P->hn[i];
    P->n_hn = u;
    for (int s = 0; s < ns; s++) {
        const pprt_stage *q = &p->stages[s];
        for (int ni = 0; ni < q->n_nodes; ni++) {
            const pprt_node *nd = &q->nodes[ni];
            for (int k = 0; k < nd->n_in; k++)
                if (nd->in[k] >= 0) hfind(P, q->t[nd->in[k]].name)->readers++;
            if (nd->op != PP_OP_CAST || nd->n_in < 1 || nd->in[0] < 0 || nd->n_out < 1 || nd->out[0] < 0) continue;
            const pp_dtype a = q->t[nd->in[0]].dtype, b = q->t[nd->out[0]].dtype;
            if (half_dt(a) && b == PP_F32) hfind(P, q->t[nd->out[0]].name)->from = (int)a;
            if (a == PP_F32 && half_dt(b)) hfind(P, q->t[nd->in[0]].name)->to = (int)b;
        }
    }
    for (int i = 0; i < p->n_outputs; i++) {
        hname *h = p->outputs[i].name ? hfind(P, p->outputs[i].name) : NULL;
        if (h) h->output = true;
    }
    return PP_OK;
}

/* Product ni's route by the graph: the half type H (PP_F16, PP_BF16) of the half route; else 0, *why the
 * PCU_HALF_* it stays f32 for, -1 when it is no candidate (not all f32, or no operand a Cast from a half type
 * wrote: an f32 plan's) */
static int half_match(const planner *P, int ni, bool f32_only, int *why) {
    const pprt_node *n = &P->st->nodes[ni];
    *why = -1;
    if (n->n_in > PCU_HALF_IO - 1 || n->n_out != 1 || !all_f32(P, n)) return 0;
    int h = 0, casts = 0;
    bool ok = true, view = false;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const hname *hx = hfind(P, T(P, n->in[k])->name);
        if (!hx) return 0; /* (a stage of no plan: tests) */
        const int from = hx->from;
        casts += from != 0;
        ok = ok && from && (!h || from == h);
        if (from) h = from;
        view = view || (P->view && P->view[n->in[k]].src >= 0 && P->view[n->in[k]].src != n->in[k]);
    }
    if (!casts) return 0; /* not a mixed-precision product */
    if (!ok) return (*why = PCU_HALF_OPERAND), 0;
    const hname *o = hfind(P, T(P, n->out[0])->name);
    if (!o || o->readers != 1 || o->to != h || o->output) return (*why = PCU_HALF_OUTPUT), 0;
    if (view || n->op == PP_OP_CONVTRANSPOSE || n->op == PP_OP_FUSEDCONV ||
        (P->fattn && (n->pattern == PP_PATTERN_ATTENTION || P->fa_head[ni] >= 0)))
        return (*why = PCU_HALF_OTHER), 0;
    if (f32_only) return (*why = PCU_HALF_OFF), 0;
    return h;
}

static bool is_product(pp_op op) {
    return op == PP_OP_CONV || op == PP_OP_CONVTRANSPOSE || op == PP_OP_FUSEDCONV || op == PP_OP_MATMUL ||
           op == PP_OP_GEMM || op == PP_OP_CONVGRADX || op == PP_OP_CONVGRADW;
}

/* A tensor of the planner's own for tensor t as half type h, its bytes in WORK at *at (a cut's conversion) */
static int half_scratch(planner *P, int t, int h, uint64_t *at) {
    const int id = P->st->n_tensors + P->n_xt;
    pprt_tdesc *x = &P->xt[P->n_xt];
    *x = *T(P, t);
    x->dtype = (pp_dtype)h, x->kind = PPRT_ACTIVATION, x->nbytes = x->nbytes / 2;
    P->xref[P->n_xt++] = (pcu_ref){PCU_SP_WORK, -1, *at, x->nbytes ? x->nbytes : 8};
    *at = pp_align_up(*at + x->nbytes, 256);
    return id;
}

/* Product ni on the half route h: P->hnode[ni] reading the H tensors (in place, or WORK copies across a cut) */
static void half_node(planner *P, int ni, int h, int *reads) {
    const pprt_stage *st = P->st;
    const pprt_node *n = &st->nodes[ni];
    int32_t *io = &P->hio[ni * PCU_HALF_IO];
    uint64_t at = PCU_WORK_LIB + PCU_LIB_WORKSPACE;
    for (int k = 0; k < n->n_in; k++) {
        io[k] = -1;
        if (n->in[k] < 0) continue;
        int w = -1;
        for (int j = 0; j < ni && w < 0; j++)
            if (st->nodes[j].n_out > 0 && st->nodes[j].out[0] == n->in[k]) w = j;
        if (w >= 0 && cast_of(st, &st->nodes[w], (pp_dtype)h, PP_F32)) {
            io[k] = st->nodes[w].in[0];
            reads[n->in[k]]++;
        } else {
            io[k] = half_scratch(P, n->in[k], h, &at), P->pl->counts.half_cut++;
        }
    }
    int r = -1;
    for (int j = ni + 1; j < st->n_nodes && r < 0 && P->uses[n->out[0]] == 1; j++)
        for (int k = 0; k < st->nodes[j].n_in; k++)
            if (st->nodes[j].in[k] == n->out[0]) r = j;
    if (r >= 0 && cast_of(st, &st->nodes[r], PP_F32, (pp_dtype)h) && !(P->host_node && P->host_node[r])) {
        io[PCU_HALF_IO - 1] = st->nodes[r].out[0];
        P->done[r] = true;
        P->pl->counts.fused++, P->pl->counts.casts_skipped++;
    } else { /* the stage sends it: the Cast is the next stage's */
        io[PCU_HALF_IO - 1] = half_scratch(P, n->out[0], h, &at), P->pl->counts.half_cut++;
    }
    if (P->pl->bytes[PCU_SP_WORK] < at) P->pl->bytes[PCU_SP_WORK] = at;
    pprt_node *hn = &P->hnode[ni];
    *hn = *n;
    hn->in = io, hn->out = &io[PCU_HALF_IO - 1];
}

static pp_status plan_try(planner *P, int ni, bool *ok);

/* Whether product ni has a step on the half route h (a trial, undone), so that a product its planning function
 * declines keeps its Casts and goes to the host fallback in f32 as before */
static pp_status half_fits(planner *P, int ni, int h, bool *ok) {
    const pcu_counts c = P->pl->counts;
    const int n_steps = P->pl->n_steps, n_xt = P->n_xt;
    const uint64_t work = P->pl->bytes[PCU_SP_WORK];
    const bool varying = P->pl->folds_varying;
    bool *done = malloc(pp_count(P->st->n_nodes) * sizeof *done);
    int *reads = calloc(pp_count(P->st->n_tensors), sizeof *reads);
    if (!done || !reads) {
        free(done), free(reads);
        return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    }
    memcpy(done, P->done, pp_count(P->st->n_nodes) * sizeof *done);
    half_node(P, ni, h, reads);
    pp_status s = plan_try(P, ni, ok);
    /* a product its function hands to the host (a MatMul over K = 0) would read the f32 node's inputs, whose
     * Casts the route skips, and leave its output Cast's H tensor unwritten: not on the route */
    for (int i = n_steps; i < P->pl->n_steps; i++) *ok = *ok && P->pl->steps[i].kind != PCU_S_HOST;
    for (int i = n_steps; i < P->pl->n_steps; i++) free(P->pl->steps[i].ops);
    P->pl->n_steps = n_steps, P->pl->counts = c, P->n_xt = n_xt, P->pl->bytes[PCU_SP_WORK] = work;
    P->pl->folds_varying = varying;
    memcpy(P->done, done, pp_count(P->st->n_nodes) * sizeof *done);
    P->hnode[ni].op = PP_OP_COUNT;
    free(done), free(reads);
    return s;
}

/* Every product's route (the header above), before any step: the products on it read through P->hnode; their
 * output Casts, and the Casts to f32 that only they read, are absorbed (P->done). */
static pp_status half_route(planner *P, bool f32_only) {
    const pprt_stage *st = P->st;
    pcu_counts *cn = &P->pl->counts;
    P->hnode = calloc(pp_count(st->n_nodes), sizeof *P->hnode);
    P->hio = malloc(pp_count(st->n_nodes) * PCU_HALF_IO * sizeof *P->hio);
    P->xt = malloc(pp_count(st->n_nodes) * PCU_HALF_IO * sizeof *P->xt);
    P->xref = malloc(pp_count(st->n_nodes) * PCU_HALF_IO * sizeof *P->xref);
    int *reads = calloc(pp_count(st->n_tensors), sizeof *reads); /* f32 copy -> half-route products reading it */
    if (!P->hnode || !P->hio || !P->xt || !P->xref || !reads) {
        free(reads);
        return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    }
    pp_status s = half_names(P);
    for (int ni = 0; ni < st->n_nodes; ni++) {
        P->hnode[ni].op = PP_OP_COUNT;
        const pprt_node *n = &st->nodes[ni];
        int why;
        if (s != PP_OK || P->done[ni] || !is_product(n->op) || (P->host_node && P->host_node[ni])) continue;
        int h = half_match(P, ni, f32_only, &why);
        if (!h && why < 0) continue;
        bool fits = true;
        if (h && (s = half_fits(P, ni, h, &fits)) != PP_OK) break;
        if (h && !fits) h = 0, why = PCU_HALF_OTHER;
        cn->half_cand++;
        if (!h) {
            cn->half_why[why]++;
            continue;
        }
        cn->half++;
        half_node(P, ni, h, reads);
    }
    for (int ni = 0; ni < st->n_nodes && s == PP_OK; ni++) { /* Casts to f32 that only half-route products read */
        const pprt_node *n = &st->nodes[ni];
        if (P->done[ni] || n->op != PP_OP_CAST || n->n_out < 1 || n->out[0] < 0 || !reads[n->out[0]]) continue;
        if (reads[n->out[0]] == P->uses[n->out[0]] && T(P, n->out[0])->kind == PPRT_ACTIVATION &&
            !(P->host_node && P->host_node[ni])) {
            P->done[ni] = true;
            cn->fused++, cn->casts_skipped++;
        }
    }
    free(reads);
    return s;
}

/* Node ni as its step reads it: the half route's (half_route), else the plan's. */
static const pprt_node *node_of(const planner *P, int ni) {
    return P->hnode && P->hnode[ni].op != PP_OP_COUNT ? &P->hnode[ni] : &P->st->nodes[ni];
}

/* Half-route product ni's conversions across a cut (half_node): before its step (pre) the received f32 copies
 * into their H tensors in WORK, after it the H output into the f32 tensor sent. Not counted as nodes' steps. */
static pp_status half_moves(planner *P, int ni, bool pre) {
    const pprt_node *n = &P->st->nodes[ni], *h = node_of(P, ni);
    const int own = P->pl->counts.own;
    for (int k = pre ? 0 : PCU_HALF_IO - 1; h != n && k < (pre ? n->n_in : PCU_HALF_IO); k++) {
        const int real = k < PCU_HALF_IO - 1 ? n->in[k] : n->out[0], half = P->hio[ni * PCU_HALF_IO + k];
        if (real < 0 || half < P->st->n_tensors) continue;
        const pp_shape *xs[1] = {&T(P, real)->shape};
        const pcu_ref xr[1] = {R(P, pre ? real : half)};
        PP_TRY(ew_step(P, ni, PCU_EW_CAST, 1, xs, xr, xs[0], R(P, pre ? half : real), pre ? PP_F32 : T(P, half)->dtype,
                       pre ? T(P, half)->dtype : PP_F32, 0, 0, 0));
    }
    P->pl->counts.own = own;
    return PP_OK;
}

/* ---- convolutions (cuDNN) ------------------------------------------------------------------- */

/* c's dims and geometry from the tensors' shapes xs, ws, ys and the forward
 * geometry g ([N, C, (D,) H, W]; 1-D lifted with H = 1). */
static void conv_fill(pcu_conv *c, const pp_geom *g, const pp_shape *xs, const pp_shape *ws, const pp_shape *ys) {
    c->nsp = g->nsp == 3 ? 3 : 2;
    const int lift = g->nsp == 1;
    const int nd = 2 + c->nsp;
    for (int i = 0, j = 0; i < nd; i++) {
        if (lift && i == 2) {
            c->x[i] = c->w[i] = c->y[i] = 1;
            continue;
        }
        c->x[i] = xs->dim[j], c->w[i] = ws->dim[j], c->y[i] = ys->dim[j];
        j++;
    }
    for (int d = 0, j = 0; d < c->nsp; d++) {
        if (lift && d == 0) {
            c->pre[d] = c->post[d] = 0, c->stride[d] = c->dil[d] = 1;
            continue;
        }
        c->pre[d] = g->pad0[j], c->post[d] = g->pad1[j], c->stride[d] = g->stride[j], c->dil[d] = g->dil[j];
        j++;
    }
}

static pp_status conv_step(planner *P, int ni, const pcu_conv *c, int x, int w, int b, int r, int y) {
    NEW_STEP(s, P, PCU_S_CONV, ni, 5);
    s->u.conv = *c;
    s->ops[0] = R(P, x);
    s->ops[1] = R(P, w);
    if (b >= 0) s->ops[2] = R(P, b);
    if (r >= 0) s->ops[3] = R(P, r);
    s->ops[4] = R(P, y);
    P->pl->counts.cudnn++;
    return PP_OK;
}

/* pp.ConvGradX (dY, W -> dX): cuDNN's backward data of the forward
 * convolution whose input has dX's shape; pp.ConvGradW (dY, X -> dW): its
 * backward filter. The node's attributes are the forward Conv's. */
static pp_status plan_conv_grad(planner *P, int ni, bool *ok) {
    const pprt_node *n = node_of(P, ni);
    *ok = false;
    const int ty = one_float_type(P, n); /* f32, or the half route's H (half_route) */
    if (ty < 0) return PP_OK;
    const bool wg = n->op == PP_OP_CONVGRADW;
    const pprt_tdesc *dy = T(P, n->in[0]), *o = T(P, n->out[0]);
    const pp_shape *xs = wg ? &T(P, n->in[1])->shape : &o->shape, *ws = wg ? &o->shape : &T(P, n->in[1])->shape;
    if (xs->rank < 3 || xs->rank > 5 || ws->rank != xs->rank || dy->shape.rank != xs->rank) return PP_OK;
    pp_geom g;
    if (pp_geom_make(attrs_of(P, n), xs, &ws->dim[2], false, &g, NULL) != PP_OK) return PP_OK;
    for (int d = 0; d < g.nsp; d++)
        if (g.out[d] != dy->shape.dim[2 + d]) return PP_OK; /* the reference kernel says why */
    pcu_conv c = {.transpose = !wg, .wgrad = wg, .groups = (int32_t)attr_i(P, n, "group", 1), .dt = ty};
    if (c.groups < 1 || xs->dim[1] % c.groups || ws->dim[0] % c.groups || ws->dim[1] * c.groups != xs->dim[1])
        return PP_OK;
    /* backward data: x is dY, y is dX; backward filter: x is X, w is dW, y is dY */
    conv_fill(&c, &g, wg ? xs : &dy->shape, ws, wg ? &dy->shape : xs);
    PP_TRY(wg ? conv_step(P, ni, &c, n->in[1], n->in[0], -1, -1, n->out[0])
              : conv_step(P, ni, &c, n->in[0], n->in[1], -1, -1, n->out[0]));
    *ok = true;
    return PP_OK;
}

static pp_status plan_conv(planner *P, int ni, bool *ok) {
    const pprt_node *n = node_of(P, ni);
    const pprt_tdesc *x = T(P, n->in[0]), *w = T(P, n->in[1]), *y = T(P, n->out[0]);
    *ok = false;
    const int ty = one_float_type(P, n); /* f32, or a half plan's Conv, pp.FusedConv and ConvTranspose */
    const bool tr = n->op == PP_OP_CONVTRANSPOSE;
    if (ty < 0 || x->shape.rank < 3 || x->shape.rank > 5) return PP_OK;
    pp_attrs a = attrs_of(P, n);
    pp_geom g;
    int64_t groups = 1;
    if (tr) {
        if (pp_convt_geom(a, &x->shape, &w->shape, &g, &groups, NULL) != PP_OK) return PP_OK;
        for (int d = 0; d < g.nsp; d++)
            if (g.pad0[d] < 0 || g.pad1[d] < 0) return PP_OK; /* output_shape beyond the full output */
    } else {
        groups = attr_i(P, n, "group", 1);
        if (pp_geom_make(a, &x->shape, &w->shape.dim[2], false, &g, NULL) != PP_OK) return PP_OK;
    }
    pcu_conv c = {.transpose = tr, .groups = (int32_t)groups, .dt = ty, .nhwc = P->cur_nhwc && x->shape.rank == 4};
    if (n->op == PP_OP_FUSEDCONV) {
        const char *act = "";
        (void)pp_attr_string(a, "activation", "", &act, NULL);
        if (!strcmp(act, "Relu")) c.act = 1;
        else if (!strcmp(act, "Clip")) c.act = 2, c.lo = attr_f(P, n, "clip_min", -INFINITY), c.hi = attr_f(P, n, "clip_max", INFINITY);
        else if (act[0]) return PP_OK;
        c.has_res = n->n_in > 3 && n->in[3] >= 0;
    }
    c.has_bias = n->n_in > 2 && n->in[2] >= 0;
    conv_fill(&c, &g, &x->shape, &w->shape, &y->shape);
    PP_TRY(conv_step(P, ni, &c, n->in[0], n->in[1], c.has_bias ? n->in[2] : -1, c.has_res ? n->in[3] : -1,
                     n->out[0]));
    /* the half route: the bias before the one rounding, as the f32 route's epilogue adds it before the Cast */
    P->pl->steps[P->pl->n_steps - 1].conv_fuse = n != &P->st->nodes[ni];
    *ok = true;
    return PP_OK;
}

/* ---- matrix products (cuBLASLt) ------------------------------------------------------------- */

/* The node after ni reads only ni's single output, which nothing else reads
 * and the stage does not send: it may join ni's step. */
static bool next_reads_only(const planner *P, int ni, int *next) {
    const pprt_stage *st = P->st;
    if (ni + 1 >= st->n_nodes || P->done[ni + 1]) return false;
    const pprt_node *n = &st->nodes[ni], *m = &st->nodes[ni + 1];
    const int t = n->out[0];
    if (n->n_out != 1 || m->n_out != 1 || P->uses[t] != 1 || st->t[t].kind != PPRT_ACTIVATION) return false;
    bool reads = false;
    for (int k = 0; k < m->n_in; k++) reads = reads || m->in[k] == t;
    *next = ni + 1;
    return reads && pp_shape_eq(&st->t[m->out[0]].shape, &st->t[t].shape);
}

/* A bias vector for the product's epilogue: a weight of N floats, every dim
 * but the last 1, added to the product's output. */
static int bias_of(const planner *P, int mi, int64_t N) {
    const pprt_node *m = &P->st->nodes[mi];
    if (m->op != PP_OP_ADD || m->n_in != 2) return -1;
    const int prod = P->st->nodes[mi - 1].out[0];
    const int b = m->in[0] == prod ? m->in[1] : m->in[0];
    const pprt_tdesc *t = T(P, b);
    if (!t || t->kind != PPRT_WEIGHT || t->dtype != T(P, m->out[0])->dtype || t->shape.rank < 1 ||
        t->shape.dim[t->shape.rank - 1] != N || numel(&t->shape) != N)
        return -1;
    return b;
}


static pp_status plan_fattn(planner *P, int ni, bool *ok);
static bool lt_operand(int64_t s_rows, int64_t s_cols, int64_t rows, int64_t cols, int32_t *trans, int64_t *ld);

/* The stride of an operand's batch dims (the first nb of its rank, right-
 * aligned with the output's ob batch dims ys) as one stride: every dim the
 * output's or 1; those over 1 walked as one (outer = inner x extent). *full:
 * some dim over 1. false: not one stride. */
static bool batch_stride(const sview *v, int nb, const pp_shape *ys, int ob, bool *full, bool *one, int64_t *st) {
    int last = -1;
    *full = true, *one = true, *st = 0;
    for (int d = 0; d < ob; d++) {
        const int xd = d - (ob - nb);
        const int64_t e = xd >= 0 ? v->dim[xd] : 1;
        *full = *full && e == ys->dim[d], *one = *one && e == 1;
        if (e == 1) continue;
        if (v->in[xd]) return false; /* two strides (they never walk as one) */
        if (last >= 0 && v->st[last] != v->st[xd] * e) return false;
        last = xd;
    }
    if (last >= 0) *st = v->st[last];
    return *full || *one;
}

/* A MatMul Y = A B over operands read as views va, vb (packed tensors, or
 * --cuda-stride-views' folded views) as cuBLASLt's column-major product
 * Y^T = B^T A^T: dims, transposes, leading dims, batch strides (a batch over
 * one B folded into A's rows where A's rows walk on through the batch).
 * Packed operands give what the planner always gave (trans 0, lda = N,
 * ldb = K). false: not one (strided-batched) product. */
static bool matmul_layout(const sview *va, const sview *vb, const pp_shape *ys, pcu_mm *mm) {
    if (va->rank < 1 || vb->rank < 1) return false;
    for (int d = va->rank > 2 ? va->rank - 2 : 0; d < va->rank; d++)
        if (va->in[d]) return false; /* a matrix dim at two strides */
    for (int d = vb->rank > 2 ? vb->rank - 2 : 0; d < vb->rank; d++)
        if (vb->in[d]) return false;
    const int ra = va->rank, rb = vb->rank;
    int64_t M = ra >= 2 ? va->dim[ra - 2] : 1, K = va->dim[ra - 1], N = rb >= 2 ? vb->dim[rb - 1] : 1;
    /* each matrix dim's stride; -1 where its extent is 1 (any stride serves) */
    int64_t sm = ra >= 2 && M > 1 ? va->st[ra - 2] : -1, sk = K > 1 ? va->st[ra - 1] : -1;
    const int64_t skb = K > 1 ? vb->st[rb >= 2 ? rb - 2 : 0] : -1, sn = rb >= 2 && N > 1 ? vb->st[rb - 1] : -1;
    const int ob = ys->rank - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
    const int ab = ra - 2 > 0 ? ra - 2 : 0, bb = rb - 2 > 0 ? rb - 2 : 0;
    if (ob < 0 || ob > ys->rank) return false;
    int64_t batch = 1, sa, sb;
    for (int d = 0; d < ob; d++) batch *= ys->dim[d];
    bool a_full, a_one, b_full, b_one;
    if (!batch_stride(va, ab, ys, ob, &a_full, &a_one, &sa) || !batch_stride(vb, bb, ys, ob, &b_full, &b_one, &sb))
        return false;
    if (a_one) sa = 0;
    else if (sa == 0) sa = M * K; /* every batch dim 1: one matrix (a packed tensor's stride) */
    if (b_one) sb = 0;
    else if (sb == 0) sb = K * N;
    if (sb == 0 && sa != 0 && (batch == 1 || M == 1 || sa == M * sm)) { /* one B for every batch: A's rows */
        if (M == 1 && batch > 1) sm = sa;
        M *= batch;
        batch = 1;
        sa = 0;
        if (M == 1) sm = -1;
    }
    *mm = (pcu_mm){.alpha = 1, .m = N, .n = M, .k = K, .ldc = N, .batch = batch, .sa = sb, .sb = sa,
                   .sc = batch > 1 ? M * N : 0};
    /* cuBLASLt's A: B^T, N x K; its B: A^T, K x M */
    return lt_operand(sn, skb, N, K, &mm->transa, &mm->lda) && lt_operand(sk, sm, K, M, &mm->transb, &mm->ldb);
}

static int sole_reader(const planner *P, int ni, int t);

/* Gemm's A (M x K, or K x M under transA) and B (K x N, or N x K) read
 * through views va, vb (rank 2): cuBLASLt's transposes and leading dims
 * from their strides (only where one is a folded view: packed operands keep
 * the planner's own). */
static bool gemm_views(const sview *va, const sview *vb, bool ta, bool tb, pcu_mm *mm) {
    if (va->rank != 2 || vb->rank != 2 || two_level(va) || two_level(vb)) return false;
    const int64_t M = va->dim[ta ? 1 : 0], K = va->dim[ta ? 0 : 1], N = vb->dim[tb ? 0 : 1];
    const int64_t sm = M > 1 ? va->st[ta ? 1 : 0] : -1, sk = K > 1 ? va->st[ta ? 0 : 1] : -1,
                  skb = K > 1 ? vb->st[tb ? 1 : 0] : -1, sn = N > 1 ? vb->st[tb ? 0 : 1] : -1;
    return lt_operand(sn, skb, N, K, &mm->transa, &mm->lda) && lt_operand(sk, sm, K, M, &mm->transb, &mm->ldb);
}

static bool reshape_like(pp_op op);
static bool reshape_view(const sview *in, const pp_shape *ys, sview *out);

/* --cuda-stride-views on: a Transpose that alone reads product ni's output
 * t (which the stage does not send), or alone reads a Reshape that alone
 * reads t (ppcc's row-order pass leaves [B*H, S, D] -> [B, H, S, D] ->
 * [B, S, H, D] after an attention), folded into the product: the product
 * writes the Transpose's output z, its output seen as strides over z's
 * bytes (*y: t's dims; through the Reshape it may be two-level). Returns
 * the Transpose's node, or -1; *rs: the Reshape's node, or -1. */
static int out_transpose(const planner *P, int ni, int t, sview *y, int *rs) {
    int j = P->view ? sole_reader(P, ni, t) : -1, u = t;
    *rs = -1;
    for (int k = ni + 1; P->view && j < 0 && P->uses[t] == 1 && k < P->st->n_nodes; k++) /* (a Reshape folded as a view) */
        if (P->st->nodes[k].n_in >= 1 && P->st->nodes[k].in[0] == t && P->st->nodes[k].n_out == 1 &&
            reshape_like(P->st->nodes[k].op) && P->view[P->st->nodes[k].out[0]].src == t)
            j = k;
    if (j >= 0 && reshape_like(P->st->nodes[j].op) && P->st->nodes[j].n_out == 1 && P->st->nodes[j].in[0] == t) {
        u = P->st->nodes[j].out[0];
        const int r = j;
        j = sole_reader(P, r, u);
        if (j < 0 || P->st->nodes[j].op != PP_OP_TRANSPOSE) return -1;
        *rs = r;
    }
    if (j < 0 || P->st->nodes[j].op != PP_OP_TRANSPOSE || P->st->nodes[j].n_out != 1) return *rs = -1, -1;
    const int z = P->st->nodes[j].out[0];
    const pprt_tdesc *tz = T(P, z), *tu = T(P, u), *tt = T(P, t);
    int64_t perm[PP_MAX_DIMS], zst[PP_MAX_DIMS];
    if (!tz || (tz->kind != PPRT_ACTIVATION && tz->kind != PPRT_SEND) || tz->dtype != tt->dtype || tu->dtype != tt->dtype ||
        tz->shape.rank != tu->shape.rank || pp_transpose_perm(attrs_of(P, &P->st->nodes[j]), tu->shape.rank, perm, NULL) != PP_OK)
        return *rs = -1, -1;
    strides_of(&tz->shape, zst);
    sview yu = {.src = z, .rank = tu->shape.rank};
    for (int d = 0; d < yu.rank; d++) yu.dim[d] = tu->shape.dim[d], yu.st[perm[d]] = zst[d];
    if (*rs < 0) return *y = yu, j;
    if (tu->nbytes != tt->nbytes || !reshape_view(&yu, &tt->shape, y)) return *rs = -1, -1;
    return j;
}

/* out_transpose's Transpose tr (and its Reshape trs, or -1) written by the product: no step of their own. */
static void out_transpose_taken(planner *P, int tr, int trs) {
    P->done[tr] = true;
    if (trs >= 0) P->done[trs] = true;
    P->pl->counts.views++;
}

/* The product's D (column-major N x M', M' = mm->n: M, or M times the batch
 * where the planner folded the batch into the rows) written through view y
 * (ys's dims): ldc and sc; false: not one strided-batched matrix with unit
 * row stride. */
static bool mm_out_view(const sview *y, pcu_mm *mm) {
    const int r = y->rank;
    if (r < 1 || two_level(y)) return false;
    const int64_t N = y->dim[r - 1];
    if (N != mm->m || (N > 1 && y->st[r - 1] != 1)) return false;
    const int ob = r >= 2 ? r - 2 : 0, nc = r >= 2 ? r - 1 : 0; /* dims [0, nc): the batch dims, then M */
    int64_t bt = 1, ldc = -1, sc = -1;
    for (int d = 0; d < ob; d++) bt *= y->dim[d];
    const bool rows = mm->batch == 1 && bt > 1; /* the planner folded the batch into the columns */
    for (int d = 0, pd = -1; d < nc; d++) {
        if (y->dim[d] == 1) continue;
        const bool group = pd >= 0 && (rows || (pd < ob) == (d < ob)); /* walked as one with the dim before */
        if (group && y->st[pd] != y->st[d] * y->dim[d]) return false;
        pd = d;
        if (d < ob && !rows) sc = y->st[d];
        else ldc = y->st[d];
    }
    if (ldc < 0) ldc = N; /* one column */
    if (ldc < N || (mm->batch > 1 && sc < 1)) return false;
    mm->ldc = ldc, mm->sc = mm->batch > 1 ? sc : 0;
    return true;
}

static pp_status plan_matmul(planner *P, int ni, bool *ok) {
    const pprt_node *n = node_of(P, ni);
    *ok = false;
    if (n->op == PP_OP_MATMUL && P->fattn && (n->pattern == PP_PATTERN_ATTENTION || P->fa_head[ni] >= 0)) {
        PP_TRY(plan_fattn(P, ni, ok));
        if (*ok) return PP_OK;
    }
    const int dt = one_float_type(P, n);
    if (dt < 0) return PP_OK;
    const pprt_tdesc *a = T(P, n->in[0]), *b = T(P, n->in[1]), *y = T(P, n->out[0]);
    pcu_mm mm = {.alpha = 1, .batch = 1};
    int64_t M, N, K, sa = 0, sb = 0, batch = 1;
    int cin = -1;
    if (n->op == PP_OP_GEMM) {
        const bool ta = attr_i(P, n, "transA", 0) != 0, tb = attr_i(P, n, "transB", 0) != 0;
        if (a->shape.rank != 2 || b->shape.rank != 2) return PP_OK;
        M = ta ? a->shape.dim[1] : a->shape.dim[0];
        K = ta ? a->shape.dim[0] : a->shape.dim[1];
        N = tb ? b->shape.dim[0] : b->shape.dim[1];
        mm.alpha = attr_f(P, n, "alpha", 1.0f);
        const float beta = attr_f(P, n, "beta", 1.0f);
        /* column-major: D^T = op(B)^T op(A)^T */
        mm.transa = tb, mm.lda = tb ? K : N;
        mm.transb = ta, mm.ldb = ta ? M : K;
        const sview va = view_of(P, n->in[0]), vb = view_of(P, n->in[1]);
        mm.views = (vb.src != n->in[1]) | (va.src != n->in[0]) << 1;
        if (mm.views && !gemm_views(&va, &vb, ta, tb, &mm)) return PP_OK;
        if (n->n_in > 2 && n->in[2] >= 0 && beta != 0) {
            const pprt_tdesc *c = T(P, n->in[2]);
            /* a bias vector: a weight, or an arena or received tensor (a training plan's Cast of the bias, in this
             * stage or an earlier one: a split must not change the route) */
            if (numel(&c->shape) == N && c->shape.dim[c->shape.rank - 1] == N && beta == 1 &&
                (c->kind == PPRT_WEIGHT || c->kind == PPRT_ACTIVATION || c->kind == PPRT_RECV)) {
                mm.bias = 1;
                cin = n->in[2];
            } else if (c->shape.rank == 2 && c->shape.dim[0] == M && c->shape.dim[1] == N) {
                mm.has_c = 1, mm.beta = beta;
                cin = n->in[2];
            } else {
                return PP_OK;
            }
        }
    } else {
        const sview va = view_of(P, n->in[0]), vb = view_of(P, n->in[1]);
        if (!matmul_layout(&va, &vb, &y->shape, &mm)) return PP_OK;
        mm.views = (vb.src != n->in[1]) | (va.src != n->in[0]) << 1;
        M = mm.n, N = mm.m, K = mm.k;
    }
    if (n->op == PP_OP_GEMM) {
        mm.m = N, mm.n = M, mm.k = K, mm.ldc = N, mm.batch = batch;
        mm.sa = sb, mm.sb = sa, mm.sc = batch > 1 ? M * N : 0;
    }
    int out = n->out[0], nx;
    /* a bias Add (and a Relu) that only this product feeds: the product writes the last one's
     * output (which the plan may have put over the product's inputs, dead after it: the stage's
     * own arena, repack_arena, gives every tensor bytes from its first step) */
    if (!mm.bias && !mm.has_c && next_reads_only(P, ni, &nx) && bias_of(P, nx, N) >= 0) {
        cin = bias_of(P, nx, N);
        mm.bias = 1;
        P->done[nx] = true;
        P->pl->counts.fused++;
        out = P->st->nodes[nx].out[0];
        int nr;
        if (next_reads_only(P, nx, &nr) && P->st->nodes[nr].op == PP_OP_RELU) {
            mm.relu = 1;
            P->done[nr] = true;
            P->pl->counts.fused++;
            out = P->st->nodes[nr].out[0];
        }
    }
    sview yv;
    int tr = -1, trs;
    if (n->op == PP_OP_MATMUL && !mm.bias && !mm.has_c && M * N > 0 && K > 0 &&
        (tr = out_transpose(P, ni, out, &yv, &trs)) >= 0) {
        pcu_mm w = mm;
        if (mm_out_view(&yv, &w)) { /* the product writes the Transpose's output: no copy */
            mm = w, mm.views |= 4, out = yv.src;
            out_transpose_taken(P, tr, trs);
        }
    }
    *ok = true;
    if (M * N == 0) return PP_OK;
    if (K == 0) return host_step(P, ni, "a product over K = 0");
    NEW_STEP(s, P, PCU_S_MATMUL, ni, 5);
    mm.dt = dt;
    s->u.mm = mm;
    s->ops[0] = view_ref(P, n->in[1]); /* cuBLASLt's A: the row-major right operand (a folded view: its source) */
    s->ops[1] = view_ref(P, n->in[0]);
    if (mm.has_c) s->ops[2] = R(P, cin);
    s->ops[3] = R(P, out);
    if (mm.bias) s->ops[4] = R(P, cin);
    P->pl->counts.cublas++;
    return PP_OK;
}

/* ---- fused attention (--cuda-fused-attention on) ---------------------------------------------- */

/* The one reader in the stage, after node ni, of tensor t: an activation
 * that only it reads and the stage does not send (else -1). */
static int sole_reader(const planner *P, int ni, int t) {
    const pprt_stage *st = P->st;
    if (t < 0 || t >= st->n_tensors || P->uses[t] != 1 || st->t[t].kind != PPRT_ACTIVATION) return -1;
    for (int j = ni + 1; j < st->n_nodes; j++)
        for (int k = 0; k < st->nodes[j].n_in; k++)
            if (st->nodes[j].in[k] == t) return P->done[j] || (P->host_node && P->host_node[j]) ? -1 : j;
    return -1;
}

/* Operand v of the fused attention (a matrix per batch) against the
 * output's batch dims (ys: batch..., Sq, Dv), the last of them the kernel's
 * heads: its stride per head (*h) and per the rest of the batch dims walked
 * as one (*b); a dim of 1 against the output's: stride 0. false: not two
 * strides. Packed operands give b * qb + h * qh = their matrix's start. */
static bool fa_strides(const sview *v, const pp_shape *ys, int64_t nh, int64_t *b, int64_t *h) {
    const int ob = ys->rank - 2, xb = v->rank - 2;
    *b = 0, *h = 0;
    if (xb < 0 || xb > ob || v->in[v->rank - 1] || v->in[v->rank - 2]) return false;
    int64_t prev = 0, ext[PP_MAX_DIMS], st[PP_MAX_DIMS]; /* the batch level: dims over 1, outermost first */
    int n = 0;
    for (int d = 0; d < ob; d++) {
        const int xd = d - (ob - xb);
        const int64_t e = xd >= 0 ? v->dim[xd] : 1;
        if (e != ys->dim[d] && e != 1) return false;
        if (d < ob - 1) {
            if (e > 1 && v->in[xd]) return false;
            if (ys->dim[d] > 1) ext[n] = ys->dim[d], st[n++] = e == 1 ? 0 : v->st[xd];
            continue;
        }
        /* the heads' dim: nh heads inside it (two strides: its inner count must be nh) */
        const int64_t outer = ys->dim[d] / nh;
        if (e == 1) {
            *h = 0;
            if (outer > 1) ext[n] = outer, st[n++] = 0;
        } else if (v->in[xd]) {
            if (v->in[xd] != nh) return false;
            *h = v->ist[xd];
            if (outer > 1) ext[n] = outer, st[n++] = v->st[xd];
        } else {
            *h = v->st[xd];
            if (outer > 1) ext[n] = outer, st[n++] = v->st[xd] * nh;
        }
    }
    for (int k = 0; k + 1 < n; k++)
        if (st[k] != st[k + 1] * ext[k + 1]) return false; /* the batch level walks as one */
    if (n) prev = st[n - 1];
    *b = prev;
    return true;
}

/* The heads the fused kernel takes apart from the rest of the batch: the
 * inner count of a two-level heads dim among Q, K, V (all alike), else the
 * output's last batch dim whole. -1: they differ. */
static int64_t fa_heads(const sview *const *v, int nv, const pp_shape *ys) {
    const int ob = ys->rank - 2;
    int64_t nh = ob > 0 ? ys->dim[ob - 1] : 1, two = 0;
    for (int q = 0; q < nv && ob > 0; q++) {
        const int xd = v[q]->rank - 3;
        if (xd < 0 || !v[q]->in[xd]) continue;
        if (two && two != v[q]->in[xd]) return -1;
        two = v[q]->in[xd];
    }
    return two ? (nh % two ? -1 : two) : nh;
}

/* The scalar weight w of a Mul or Div node s of type ty that reads x (x * w,
 * w * x or x / w), or -1. */
static int fa_scalar(const planner *P, const pprt_node *s, int x, int ty) {
    if ((s->op != PP_OP_MUL && s->op != PP_OP_DIV) || s->n_in != 2 || s->n_out != 1) return -1;
    const int w = s->in[0] == x ? s->in[1] : s->op == PP_OP_MUL && s->in[1] == x ? s->in[0] : -1;
    const pprt_tdesc *wt = T(P, w);
    if (!wt || wt->kind != PPRT_WEIGHT || !wt->data || (int)wt->dtype != ty || numel(&wt->shape) != 1 ||
        (int)T(P, s->out[0])->dtype != ty)
        return -1;
    return w;
}

/* The weight w of a Mul node s of type ty that scales the scores `x` [..., H, S, T] per head (SwinV2's logit
 * scale [H, 1, 1]: each dim, right-aligned, 1 but the heads' -3rd, which is nh, so head h's scale is element h),
 * or -1. */
static int fa_headw(const planner *P, const pprt_node *s, int x, int ty, int64_t nh) {
    if (s->op != PP_OP_MUL || s->n_in != 2 || s->n_out != 1 || (s->in[0] != x && s->in[1] != x)) return -1;
    const int w = s->in[0] == x ? s->in[1] : s->in[0];
    const pprt_tdesc *wt = T(P, w);
    const pp_shape *xs = &T(P, x)->shape;
    if (!wt || wt->kind != PPRT_WEIGHT || !wt->data || (int)wt->dtype != ty || xs->rank < 3 ||
        xs->dim[xs->rank - 3] != nh || !pp_attn_head_shape(&wt->shape, xs) || !pp_shape_eq(&T(P, s->out[0])->shape, xs))
        return -1;
    return w;
}

/* The operand x that Mul or Div node s of type ty scales by a scalar weight (fa_scalar), or -1 */
static int fa_data(const planner *P, const pprt_node *s, int ty) {
    for (int k = 0; k < 2 && k < s->n_in; k++)
        if (s->in[k] >= 0 && fa_scalar(P, s, s->in[k], ty) >= 0) return s->in[k];
    return -1;
}

/* A mask-like operand t of an attention pattern (an added mask, a Where's condition) read against the scores
 * (shape ss [..., Sq, T]): broadcast along any axis (each of its last two dims the scores' or 1), its batch and
 * head levels within fa_strides' two (nh heads, ys the output's shape): its element strides per batch, head,
 * query row and key into st[] (0 along a broadcast axis); false where it is not. */
static bool fa_bcast(const planner *P, int t, const pp_shape *ss, int64_t nh, const pp_shape *ys, int64_t st[4]) {
    const sview v = view_of(P, t);
    if (v.rank < 2 || v.rank > ss->rank || v.in[v.rank - 1] || v.in[v.rank - 2]) return false;
    const int64_t r = v.dim[v.rank - 2], c = v.dim[v.rank - 1];
    if ((r != ss->dim[ss->rank - 2] && r != 1) || (c != ss->dim[ss->rank - 1] && c != 1) ||
        !fa_strides(&v, ys, nh, &st[0], &st[1]))
        return false;
    st[2] = r == 1 ? 0 : v.st[v.rank - 2], st[3] = c == 1 ? 0 : v.st[v.rank - 1];
    return true;
}

/* The mask of an attention pattern's Add node ad (ppcc's pp_attn_mask): its input other than the scores (the
 * pattern's value it adds to), of type ty, broadcast to the scores (fa_bcast): the mask's tensor, its strides
 * into k (k->mask set); -1: not such an Add. */
static int fa_mask(const planner *P, int ad, int scores, int ty, int64_t nh, const pp_shape *ys, pcu_fattn *k) {
    const pprt_node *n = &P->st->nodes[ad];
    if (n->op != PP_OP_ADD || n->n_in != 2 || n->n_out != 1 || n->in[0] == n->in[1] ||
        (n->in[0] != scores && n->in[1] != scores))
        return -1;
    const int m = n->in[0] == scores ? n->in[1] : n->in[0];
    const pprt_tdesc *mt = T(P, m), *xt = T(P, scores), *ot = T(P, n->out[0]);
    int64_t st[4];
    if (!mt || !xt || !ot || (int)mt->dtype != ty || (int)ot->dtype != ty || !pp_shape_eq(&xt->shape, &ot->shape) ||
        !fa_bcast(P, m, &xt->shape, nh, ys, st))
        return -1;
    k->mask = 1, k->mb = st[0], k->mh = st[1], k->mi = st[2], k->mj = st[3];
    return m;
}

static bool fa_reads(const pprt_node *n, int t) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == t) return true;
    return false;
}

/* The condition of an attention pattern's Where node wh (ppcc's pp_attn_where): the scores (the pattern's value
 * it reads) in one branch, a scalar weight of type ty in the other, a bool condition broadcast to the scores
 * (fa_bcast): the condition's tensor, k->wthen, k->fill and its strides into k (k->where is the caller's: before
 * or after the scale); -1: not such a Where. */
static int fa_where(const planner *P, int wh, int scores, int ty, int64_t nh, const pp_shape *ys, pcu_fattn *k) {
    const pprt_node *n = &P->st->nodes[wh];
    if (n->op != PP_OP_WHERE || n->n_in != 3 || n->n_out != 1 || n->in[0] < 0 || n->in[1] == n->in[2] ||
        (n->in[1] != scores && n->in[2] != scores))
        return -1;
    const int c = n->in[0], f = n->in[1] == scores ? n->in[2] : n->in[1];
    const pprt_tdesc *ct = T(P, c), *ft = T(P, f), *xt = T(P, scores), *ot = T(P, n->out[0]);
    int64_t st[4];
    if (!ct || !ft || !xt || !ot || ct->dtype != PP_BOOL || ft->kind != PPRT_WEIGHT || !ft->data ||
        (int)ft->dtype != ty || numel(&ft->shape) != 1 || (int)ot->dtype != ty ||
        !pp_shape_eq(&xt->shape, &ot->shape) || !fa_bcast(P, c, &xt->shape, nh, ys, st))
        return -1;
    k->wthen = n->in[1] == scores, k->fill = pcu_rld(ft->data, ty, 0);
    k->cb = st[0], k->ch = st[1], k->ci = st[2], k->cj = st[3];
    return c; /* (a trained fill cannot vary: training plans carry no pattern) */
}

/* The Mul or Div of Q by a scalar before the pattern's first MatMul ni
 * (torch's q / sqrt(d)) that the kernel applies as it reads Q: the node in
 * the stage that makes ni's left operand from one of the shape, read by ni
 * alone; -1: none. */
static int fattn_prescale(const planner *P, int ni, int ty) {
    const pprt_stage *st = P->st;
    const int q = st->nodes[ni].in[0];
    for (int j = ni - 1; j >= 0; j--) {
        const pprt_node *s = &st->nodes[j];
        if (s->n_out < 1 || s->out[0] != q) continue;
        if ((P->host_node && P->host_node[j]) || sole_reader(P, j, q) != ni) return -1;
        const int x = fa_data(P, s, ty);
        return x >= 0 && T(P, x)->kind != PPRT_WEIGHT && pp_shape_eq(&T(P, x)->shape, &T(P, q)->shape) ? j : -1;
    }
    return -1;
}

/* Q's tensor as the fused kernel reads it: the prescale's input, or the
 * first MatMul's own. */
static int fa_q(const planner *P, int ni, int pq) {
    if (pq < 0) return P->st->nodes[ni].in[0];
    const pprt_node *s = &P->st->nodes[pq];
    return fa_data(P, s, (int)T(P, s->out[0])->dtype);
}

/* The links of an attention pattern that fattn_match found (-1: none): the Mul or Div of the scores, the
 * Softmax, the Mul or Div of Q before the first MatMul (fattn_prescale), the Add of a mask (fa_mask), the Where
 * (fa_where), the first Reshape of a frame around a mask (fa_frame) and the frame's Add; where none is found,
 * why */
typedef struct fa_links {
    int sc, sm, pq, ad, wh, fr, fad; /* fad: the frame's Add */
    char why[96];
} fa_links;

/* fattn_match's refusal: why, into o */
#define FA_NO(o, ...) (snprintf((o)->why, sizeof (o)->why, __VA_ARGS__), -1)

/* A frame around a mask (ppcc's attn_frame): Reshape node r of the scores `scores` [N, ..., S, T] into
 * [F0, F1, ..., S, T] (F0 * F1 = N, the other dims kept), the Add of a mask there, a Reshape back, each read by the
 * next alone. BART's: scores [B * H, S, T], frame [B, H, S, T] (F1: the kernel's heads); Swin's shifted windows:
 * scores [B * W, H, S, T], frame [B, W, H, S, T] (F1: the windows). The frame's Add (*ad), the Reshape back (*r2)
 * and F1; -1: not such a frame. */
static int64_t fa_frame(const planner *P, int r, int scores, int *ad, int *r2) {
    const pprt_node *n = &P->st->nodes[r];
    if (n->op != PP_OP_RESHAPE || n->n_out != 1 || n->n_in < 1 || n->in[0] != scores) return -1;
    const pp_shape *xs = &T(P, scores)->shape, *fs = &T(P, n->out[0])->shape;
    if (!pp_attn_frame_shape(xs, fs)) return -1;
    *ad = sole_reader(P, r, n->out[0]);
    if (*ad < 0 || P->st->nodes[*ad].op != PP_OP_ADD || P->st->nodes[*ad].n_out != 1) return -1;
    *r2 = sole_reader(P, *ad, P->st->nodes[*ad].out[0]);
    const pprt_node *b = *r2 >= 0 ? &P->st->nodes[*r2] : NULL;
    if (!b || b->op != PP_OP_RESHAPE || b->n_out != 1 || b->in[0] != P->st->nodes[*ad].out[0] ||
        !pp_shape_eq(&T(P, b->out[0])->shape, xs) || T(P, b->out[0])->dtype != T(P, scores)->dtype)
        return -1;
    return fs->dim[1];
}

/* The mask of a frame's Add node ad (fa_frame) over the frame's output fo [F0, F1, (H,) S, T]: its input other
 * than fo, of type ty, each dim (right-aligned) the frame's or 1, read plainly: the mask's tensor and its
 * strides per F0, F1, head, query row and key into st[5] (0 along a broadcast axis, and the head's 0 where the
 * frame has none); -1: not such a mask. */
static int fa_fmask(const planner *P, int ad, int fo, int ty, int64_t st[5]) {
    const pprt_node *n = &P->st->nodes[ad];
    if (n->n_in != 2 || n->in[0] == n->in[1] || (n->in[0] != fo && n->in[1] != fo)) return -1;
    const int m = n->in[0] == fo ? n->in[1] : n->in[0];
    const pprt_tdesc *mt = T(P, m), *ot = T(P, n->out[0]);
    const pp_shape *fs = &T(P, fo)->shape;
    if (!mt || !ot || (int)mt->dtype != ty || (int)ot->dtype != ty || !pp_shape_eq(&ot->shape, fs)) return -1;
    const sview v = view_of(P, m);
    if (v.rank < 1 || v.rank > fs->rank) return -1;
    int64_t sd[PP_MAX_DIMS] = {0}; /* per frame dim */
    for (int d = 0; d < fs->rank; d++) {
        const int xd = d - (fs->rank - v.rank);
        const int64_t e = xd >= 0 ? v.dim[xd] : 1;
        if (e != fs->dim[d] && e != 1) return -1;
        if (e > 1 && v.in[xd]) return -1; /* (a two-level view: not one stride) */
        sd[d] = e > 1 ? v.st[xd] : 0;
    }
    const int r = fs->rank;
    st[0] = sd[0], st[1] = sd[1], st[2] = r == 5 ? sd[2] : 0, st[3] = sd[r - 2], st[4] = sd[r - 1];
    return m;
}

/* plan_fattn's test at the pattern's first MatMul ni, without side effects
 * (fold_views asks it too): the pattern's last MatMul, or -1; its other
 * links into *o (fa_links). Q, K and V are read as their views (folded or
 * packed), each within the kernel's two batch strides. */
static int fattn_match(const planner *P, int ni, fa_links *o) {
    const pprt_stage *st = P->st;
    *o = (fa_links){-1, -1, -1, -1, -1, -1, -1, ""};
    const pprt_node *m1 = &st->nodes[ni];
    const int ty = one_float_type(P, m1); /* f32, or a half plan's type throughout */
    if (ty < 0 || m1->n_in != 2 || m1->n_out != 1) return FA_NO(o, "its operands are not of one float type");
    if (P->host_node && P->host_node[ni]) return FA_NO(o, "on the host fallback");
    const int pq = fattn_prescale(P, ni, ty), qt = fa_q(P, ni, pq);
    const pp_shape *qs = &T(P, qt)->shape, *ks = &T(P, m1->in[1])->shape;
    if (qs->rank < 2 || ks->rank < 2 || qs->dim[qs->rank - 1] < 1) return FA_NO(o, "Q or K not a matrix per batch");
    if (qs->dim[qs->rank - 1] > PCU_FA_DMAX)
        return FA_NO(o, "heads of %lld, over the kernel's %d", (long long)qs->dim[qs->rank - 1], PCU_FA_DMAX);
    /* the scores' modifiers in ppcc's order (pp_attention_chains): [Where] [scale] [Where] [Add of a mask];
     * cur: the scores as the next link reads them; the Where and the mask checked by fa_where and fa_mask */
    int b = sole_reader(P, ni, m1->out[0]), sc = -1, wh = -1, cur = m1->out[0], wcur = -1;
    if (b >= 0 && st->nodes[b].op == PP_OP_WHERE && st->nodes[b].n_out == 1)
        wh = b, wcur = cur, cur = st->nodes[b].out[0], b = sole_reader(P, wh, cur);
    int hsc = 0, scx = -1; /* the scale a weight per head (checked once the heads are known), the scores it reads */
    if (b >= 0 && (st->nodes[b].op == PP_OP_MUL || st->nodes[b].op == PP_OP_DIV)) {
        hsc = fa_scalar(P, &st->nodes[b], cur, ty) < 0;
        if (hsc && st->nodes[b].op != PP_OP_MUL) return FA_NO(o, "the scores' scale is not a scalar weight");
        sc = b, scx = cur, cur = st->nodes[b].out[0];
        b = sole_reader(P, b, cur);
    }
    if (wh < 0 && b >= 0 && st->nodes[b].op == PP_OP_WHERE && st->nodes[b].n_out == 1)
        wh = b, wcur = cur, cur = st->nodes[b].out[0], b = sole_reader(P, wh, cur);
    const int ad = b >= 0 && st->nodes[b].op == PP_OP_ADD ? b : -1, acur = cur; /* an additive mask */
    if (ad >= 0) {
        cur = st->nodes[ad].n_out == 1 ? st->nodes[ad].out[0] : -1;
        b = cur >= 0 ? sole_reader(P, ad, cur) : -1;
    }
    int fr = -1, fad = -1, r2 = -1; /* a frame around a mask (BART's; Swin's shifted windows) after it */
    int64_t f1 = -1;
    if (b >= 0 && st->nodes[b].op == PP_OP_RESHAPE && (f1 = fa_frame(P, b, cur, &fad, &r2)) > 0)
        fr = b, b = sole_reader(P, r2, st->nodes[r2].out[0]);
    if (b < 0 || st->nodes[b].op != PP_OP_SOFTMAX || st->nodes[b].n_out != 1)
        return FA_NO(o, "the scores reach the Softmax through a link the kernel does not take, or are read twice");
    const pprt_node *sm = &st->nodes[b];
    int64_t outer, len, inner;
    if ((int)T(P, sm->out[0])->dtype != ty ||
        pp_softmax_split(attrs_of(P, sm), &T(P, sm->in[0])->shape, &outer, &len, &inner, NULL) != PP_OK || inner != 1)
        return FA_NO(o, "the Softmax is not over the keys' axis in the pattern's type");
    const int m2 = sole_reader(P, b, sm->out[0]);
    if (m2 < 0 || st->nodes[m2].op != PP_OP_MATMUL || st->nodes[m2].in[0] != sm->out[0] ||
        one_float_type(P, &st->nodes[m2]) != ty)
        return FA_NO(o, "the probabilities are not the last MatMul's left operand alone");
    const pprt_node *n2 = &st->nodes[m2];
    const pp_shape *vs = &T(P, n2->in[1])->shape, *ys = &T(P, n2->out[0])->shape;
    const sview vq = view_of(P, qt), vk = view_of(P, m1->in[1]), vv = view_of(P, n2->in[1]);
    int64_t sb, sh;
    const sview *qkv[3] = {&vq, &vk, &vv};
    const int fr3 = fr >= 0 && T(P, st->nodes[fr].out[0])->shape.rank == 4; /* BART's: F1 the heads */
    const int64_t nh = fr3 ? f1 : ys->rank >= 2 ? fa_heads(qkv, 3, ys) : -1;
    if (fr >= 0 && !fr3 && nh != T(P, m1->out[0])->shape.dim[1])
        return FA_NO(o, "the windowed mask's heads are not the kernel's");
    if (hsc && fa_headw(P, &st->nodes[sc], scx, ty, nh) < 0)
        return FA_NO(o, "the scores' scale is neither a scalar weight nor a weight per head");
    if (vs->rank >= 2 && vs->dim[vs->rank - 1] > PCU_FA_DMAX)
        return FA_NO(o, "values of %lld, over the kernel's %d", (long long)vs->dim[vs->rank - 1], PCU_FA_DMAX);
    if (vs->rank < 2 || ys->rank < 2 || vs->dim[vs->rank - 1] < 1 || nh < 1 || !fa_strides(&vq, ys, nh, &sb, &sh) ||
        !fa_strides(&vk, ys, nh, &sb, &sh) || !fa_strides(&vv, ys, nh, &sb, &sh))
        return FA_NO(o, "Q, K or V not within the kernel's two batch strides (batch and head)");
    if (qs->dim[qs->rank - 2] < 1 || ks->dim[ks->rank - 1] < 1 || numel(ys) < 1 || numel(ys) > INT32_MAX ||
        ks->dim[ks->rank - 1] > INT32_MAX / 4)
        return FA_NO(o, "empty, or over the kernel's int32 sizes");
    pcu_fattn mk = {0};
    int64_t fst[5];
    if ((ad >= 0 && fa_mask(P, ad, acur, ty, nh, ys, &mk) < 0) || (wh >= 0 && fa_where(P, wh, wcur, ty, nh, ys, &mk) < 0) ||
        (fr >= 0 && fa_fmask(P, fad, st->nodes[fr].out[0], ty, fst) < 0))
        return FA_NO(o, "its mask or Where condition is not of the pattern's type or not broadcast to the scores");
    *o = (fa_links){.sc = sc, .sm = b, .pq = pq, .ad = ad, .wh = wh, .fr = fr, .fad = fad, .why = ""};
    return m2;
}

/* Before the nodes are planned (the Mul or Div of Q comes before the
 * pattern's first MatMul): each pattern's prescale that the kernel will
 * apply is done, remembered at its first MatMul. */
static void fattn_prescales(planner *P) {
    const int nn = P->st->n_nodes;
    for (int ni = 0; P->fattn && ni < nn; ni++) {
        fa_links f;
        const pprt_node *n = &P->st->nodes[ni];
        if (n->op != PP_OP_MATMUL || n->pattern != PP_PATTERN_ATTENTION || P->done[ni] || fattn_match(P, ni, &f) < 0 ||
            f.pq < 0)
            continue;
        P->done[f.pq] = true;
        P->fa_head[2 * nn + ni] = f.pq;
    }
}

/* The masks of the pattern whose last MatMul is ni into k (the kernel's heads set): the Where's condition (*ct)
 * before or after the scale (it reads the scale's output), the Add's mask (*mt) after both, and a frame's mask
 * (*ft): BART's, with no Add before it, as the Add's (its F0 the batch, F1 the heads); else the windowed mask F
 * (its F1 the windows: Swin's shifted ones). -1: none. */
static pp_status fattn_masks(planner *P, int ni, pcu_fattn *k, int *mt, int *ct, int *ft) {
    const pprt_stage *st = P->st;
    const int nn = st->n_nodes, h = P->fa_head[ni], sc = P->fa_head[nn + ni], ad = P->fa_head[3 * nn + ni],
              wh = P->fa_head[4 * nn + ni], fr = P->fa_head[5 * nn + ni], fad = P->fa_head[6 * nn + ni];
    const pp_shape *ys = &T(P, st->nodes[ni].out[0])->shape;
    const int s1 = st->nodes[h].out[0], so = sc >= 0 ? st->nodes[sc].out[0] : -1;
    const int wafter = wh >= 0 && so >= 0 && fa_reads(&st->nodes[wh], so);
    const int wcur = wafter ? so : s1, acur = wh >= 0 && (wafter || sc < 0) ? st->nodes[wh].out[0] : so >= 0 ? so : s1;
    int64_t f[5];
    *mt = ad >= 0 ? fa_mask(P, ad, acur, k->t, k->nh, ys, k) : -1;
    *ct = wh >= 0 ? fa_where(P, wh, wcur, k->t, k->nh, ys, k) : -1;
    const int fm = fr >= 0 ? fa_fmask(P, fad, st->nodes[fr].out[0], k->t, f) : -1;
    *ft = -1;
    if ((ad >= 0 && *mt < 0) || (wh >= 0 && *ct < 0) || (fr >= 0 && fm < 0))
        return PP_FAIL(P->err, PP_ERUNTIME, "cuda planner: node '%s': the fused attention's mask no longer fits "
                       "(internal)", st->nodes[ad >= 0 ? ad : wh >= 0 ? wh : fad].name);
    if (wh >= 0) k->where = wafter ? 2 : 1;
    if (fm < 0) return PP_OK;
    const pp_shape *fs = &T(P, st->nodes[fr].out[0])->shape;
    if (fs->rank == 4 && ad < 0) { /* BART's: b / nh its F0, b % nh its F1 */
        k->mask = 1, k->mb = f[0], k->mh = f[1], k->mi = f[3], k->mj = f[4], *mt = fm;
        return PP_OK;
    }
    k->fmask = 1, k->fwn = fs->rank == 4 ? 1 : fs->dim[1], k->fi = f[3], k->fj = f[4], *ft = fm;
    if (fs->rank == 4) k->fb = f[0], k->fw = 0, k->fh = f[1];
    else k->fb = f[0], k->fw = f[1], k->fh = f[2];
    return PP_OK;
}

/* The pattern ppcc marked on MatMul ni (plan Node.pattern): MatMul, [Mul or
 * Div by a weight scalar], Softmax over the last axis, MatMul, found again
 * in the stage, every link read by the next alone. The kernel takes head
 * dims up to PCU_FA_DMAX. Found at the first MatMul: the links become done
 * and the last MatMul remembers the first (fa_head); at the last MatMul
 * (where V is ready): one cooperative step. Not found: *ok false, the nodes
 * as usual. */
static pp_status plan_fattn(planner *P, int ni, bool *ok) {
    const pprt_stage *st = P->st;
    *ok = false;
    if (P->fa_head[ni] >= 0) { /* the pattern's last MatMul */
        const int h = P->fa_head[ni], pq = P->fa_head[2 * st->n_nodes + ni], qt = fa_q(P, h, pq);
        const pprt_node *m1 = &st->nodes[h], *m2 = &st->nodes[ni];
        const pp_shape *qs = &T(P, qt)->shape, *ks = &T(P, m1->in[1])->shape, *vs = &T(P, m2->in[1])->shape,
                       *ys = &T(P, m2->out[0])->shape;
        const int sc = P->fa_head[st->n_nodes + ni];
        const sview vq = view_of(P, qt), vk = view_of(P, m1->in[1]), vv = view_of(P, m2->in[1]);
        const sview *qkv[3] = {&vq, &vk, &vv};
        const int fr = P->fa_head[5 * st->n_nodes + ni]; /* BART's frame: its F1 is the kernel's heads */
        const pp_shape *fs = fr >= 0 ? &T(P, st->nodes[fr].out[0])->shape : NULL;
        pcu_fattn k = {.nb = numel(ys) / (ys->dim[ys->rank - 2] * ys->dim[ys->rank - 1]),
                       .nh = fs && fs->rank == 4 ? fs->dim[1] : fa_heads(qkv, 3, ys), .grp = 1,
                       .Sq = qs->dim[qs->rank - 2],
                       .D = qs->dim[qs->rank - 1], .T = ks->dim[ks->rank - 1], .Dv = vs->dim[vs->rank - 1],
                       .t = one_float_type(P, m2)};
        k.qtiles = pcu_fattn_qtiles(&k);
        /* Q [.., Sq, D], K [.., D, T], V [.., T, Dv]: each its strides (a folded view's over its source; the
         * heads nh apart from the rest of the batch) */
        (void)fa_strides(&vq, ys, k.nh, &k.qb, &k.qh), (void)fa_strides(&vk, ys, k.nh, &k.kb, &k.kh);
        (void)fa_strides(&vv, ys, k.nh, &k.vb, &k.vh); /* (checked at the first MatMul) */
        k.qi = vq.st[vq.rank - 2], k.qe = vq.st[vq.rank - 1];
        k.kj = vk.st[vk.rank - 1], k.ke = vk.st[vk.rank - 2];
        k.vj = vv.st[vv.rank - 2], k.ve = vv.st[vv.rank - 1];
        k.yi = k.Dv, k.yh = k.Sq * k.Dv, k.yb = k.nh * k.yh;
        int yout = m2->out[0];
        sview yv;
        int trs;
        const int tr = out_transpose(P, ni, yout, &yv, &trs);
        int64_t yb, yh;
        if (tr >= 0 && yv.st[yv.rank - 1] == 1 && fa_strides(&yv, ys, k.nh, &yb, &yh)) { /* Y into the Transpose's output */
            k.yb = yb, k.yh = yh, k.yi = yv.st[yv.rank - 2], yout = yv.src;
            out_transpose_taken(P, tr, trs);
        }
        int hw = -1; /* the heads' scales (scale_op 3) */
        if (sc >= 0) {
            const pprt_node *s = &st->nodes[sc];
            const int x = fa_data(P, s, k.t), w = x >= 0 ? fa_scalar(P, s, x, k.t) : -1; /* (checked by fattn_match) */
            if (w >= 0) {
                k.scale = pcu_rld(T(P, w)->data, k.t, 0); /* (a half plan's scale: its half value) */
                if (T(P, w)->varies) P->pl->folds_varying = true;
                k.scale_op = s->op == PP_OP_MUL ? 1 : 2;
            } else {
                const int xs = T(P, s->in[0])->kind == PPRT_WEIGHT ? s->in[1] : s->in[0];
                hw = fa_headw(P, s, xs, k.t, k.nh);
                if (hw < 0)
                    return PP_FAIL(P->err, PP_ERUNTIME, "cuda planner: node '%s': the fused attention's scale no "
                                   "longer fits (internal)", s->name);
                k.scale_op = 3;
            }
        }
        if (pq >= 0) { /* Q's scalar, applied as the kernel reads Q */
            const pprt_node *s = &st->nodes[pq];
            const int w = fa_scalar(P, s, qt, k.t);
            k.qscale = pcu_rld(T(P, w)->data, k.t, 0);
            if (T(P, w)->varies) P->pl->folds_varying = true;
            k.qscale_op = s->op == PP_OP_MUL ? 1 : 2;
        }
        int mt, ct, ft;
        PP_TRY(fattn_masks(P, ni, &k, &mt, &ct, &ft));
        NEW_STEP(s, P, PCU_S_KERNEL, h, hw >= 0 ? 8 : ft >= 0 ? 7 : ct >= 0 ? 6 : mt >= 0 ? 5 : 4);
        s->kernel = PCU_K_FATTN;
        s->u.fa = k;
        s->ops[0] = view_ref(P, qt), s->ops[1] = view_ref(P, m1->in[1]), s->ops[2] = view_ref(P, m2->in[1]);
        s->ops[3] = R(P, yout);
        const pcu_ref none = {.space = -1, .tensor = -1};
        if (s->n_ops > 4) s->ops[4] = mt >= 0 ? view_ref(P, mt) : none;
        if (s->n_ops > 5) s->ops[5] = ct >= 0 ? view_ref(P, ct) : none;
        if (s->n_ops > 6) s->ops[6] = ft >= 0 ? view_ref(P, ft) : none;
        if (s->n_ops > 7) s->ops[7] = view_ref(P, hw);
        s->threads = k.nb * k.qtiles * PCU_BLOCK;
        P->pl->counts.own++;
        P->pl->counts.fused++; /* the last MatMul */
        *ok = true;
        return PP_OK;
    }
    fa_links f;
    const int m2 = fattn_match(P, ni, &f);
    if (m2 < 0 && st->nodes[ni].pattern == PP_PATTERN_ATTENTION) { /* ppcc's pattern, not the kernel's: say why */
        if (!P->pl->fa_unfused++)
            snprintf(P->pl->fa_why, sizeof P->pl->fa_why, "'%s': %s", st->nodes[ni].name, f.why);
        return PP_OK;
    }
    if (m2 < 0 || f.pq != P->fa_head[2 * st->n_nodes + ni]) return PP_OK; /* (fattn_prescales took its prescale) */
    const int r2 = f.fr >= 0 ? sole_reader(P, f.fad, st->nodes[f.fad].out[0]) : -1; /* (before the Add is done) */
    const int links[] = {f.sc, f.ad, f.wh, f.sm, f.fr, f.fad, r2};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++)
        if (links[i] >= 0) P->done[links[i]] = true;
    P->fa_head[m2] = ni;
    P->fa_head[st->n_nodes + m2] = f.sc;
    P->fa_head[2 * st->n_nodes + m2] = f.pq;
    P->fa_head[3 * st->n_nodes + m2] = f.ad;
    P->fa_head[4 * st->n_nodes + m2] = f.wh;
    P->fa_head[5 * st->n_nodes + m2] = f.fr;
    P->fa_head[6 * st->n_nodes + m2] = f.fad;
    /* the scales, the Where, the masks' Adds (and a frame's Reshapes) and the softmax; the first MatMul names
     * the step */
    P->pl->counts.fused += 1 + (f.sc >= 0) + (f.pq >= 0) + (f.ad >= 0) + (f.wh >= 0) + 3 * (f.fr >= 0);
    *ok = true;
    return PP_OK;
}

/* An operand of a product as cuBLASLt takes it: op(X) is rows x cols with
 * element (r, c) at r * s_rows + c * s_cols (a stride < 0: the dim is 1 and
 * its stride free). Stored column-major as is (trans 0, ld = s_cols) or
 * transposed (trans 1, ld = s_rows); false when neither stride is 1. */
static bool lt_operand(int64_t s_rows, int64_t s_cols, int64_t rows, int64_t cols, int32_t *trans, int64_t *ld) {
    if (s_rows == 1 || s_rows < 0) {
        *trans = 0, *ld = s_cols < 0 ? rows : s_cols;
        return *ld >= rows;
    }
    if (s_cols == 1 || s_cols < 0) {
        *trans = 1, *ld = s_rows;
        return *ld >= cols;
    }
    return false;
}

/* Labels of one role (batch, M, N or K), in a given order, as one dim of an
 * operand: its extent and the stride of the last (innermost) label, each
 * label's stride being the next one's times its extent; -1 for no label. */
static bool merge_labels(const int *lab, int n, const int64_t *size, const int64_t *st, int64_t *ext, int64_t *stride) {
    *ext = 1, *stride = -1;
    for (int i = 0; i < n; i++) {
        if (i + 1 < n && st[lab[i]] != st[lab[i + 1]] * size[lab[i + 1]]) return false;
        *ext *= size[lab[i]];
    }
    if (n) *stride = st[lab[n - 1]];
    return true;
}

/* Einsum of two f32 operands that is a matrix product (batched): every label
 * of extent > 1 is in both operands and the output (batch), one operand and
 * the output (M for the first, N for the second), or both operands and not
 * the output (K); each role's labels merge into one dim of every tensor that
 * has them, and each operand and the output has a unit stride in one of its
 * two matrix dims. Diagonals, sums over one operand's label and other
 * layouts stay on the host. */
static pp_status plan_einsum(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = false;
    const int ty = one_float_type(P, n); /* f32, or a half plan's f16 / bf16 (cuBLASLt 16F / 16BF, 32F sums) */
    if (n->n_in != 2 || n->n_out != 1 || n->in[0] < 0 || n->in[1] < 0 || ty < 0) return PP_OK;
    const pprt_tdesc *x[2] = {T(P, n->in[0]), T(P, n->in[1])}, *y = T(P, n->out[0]);
    pp_tinfo tin[2] = {{PP_F32, x[0]->shape, NULL}, {PP_F32, x[1]->shape, NULL}};
    pp_einsum e;
    if (pp_einsum_parse(attrs_of(P, n), tin, 2, &e, NULL) != PP_OK || e.out_rank != y->shape.rank) return PP_OK;
    enum { L = PP_EINSUM_LABELS };
    int64_t st[3][L], size[L];
    bool in[3][L];
    memset(in, 0, sizeof in);
    for (int l = 0; l < L; l++) size[l] = 1;
    for (int q = 0; q < 3; q++) { /* a, b, y: each label's stride where its extent is > 1 */
        const pp_shape *sh = q < 2 ? &x[q]->shape : &y->shape;
        const int8_t *lab = q < 2 ? e.lab[q] : e.out_lab;
        int64_t acc = 1;
        for (int d = sh->rank - 1; d >= 0; d--) {
            const int l = lab[d];
            if (sh->dim[d] == 0) return PP_OK;
            if (sh->dim[d] > 1) {
                if (in[q][l] || (size[l] > 1 && size[l] != sh->dim[d])) return PP_OK; /* a diagonal */
                in[q][l] = true, st[q][l] = acc, size[l] = sh->dim[d];
            }
            acc *= sh->dim[d];
        }
    }
    int role[4][PP_MAX_DIMS * 2], nr[4] = {0}; /* batch, M, N, K */
    for (int q = 0; q < 3; q++) { /* batch, M, N in the output's order; K in the first operand's */
        const int8_t *lab = q < 2 ? e.lab[q] : e.out_lab;
        const int rank = q < 2 ? x[q]->shape.rank : y->shape.rank;
        for (int d = 0; d < rank; d++) {
            const int l = lab[d];
            if (!in[q][l]) continue;
            const int r = in[0][l] && in[1][l] ? (in[2][l] ? 0 : 3) : in[0][l] && in[2][l] ? 1 : in[1][l] && in[2][l] ? 2 : -1;
            if (r < 0) return PP_OK; /* summed over one operand only */
            if ((q == 2 && r != 3) || (q == 0 && r == 3)) role[r][nr[r]++] = l;
        }
    }
    int64_t B, M, N, K, sab, sbb, syb, sam, sym, sbn, syn, sak, sbk;
    if (!merge_labels(role[0], nr[0], size, st[0], &B, &sab) || !merge_labels(role[0], nr[0], size, st[1], &B, &sbb) ||
        !merge_labels(role[0], nr[0], size, st[2], &B, &syb) || !merge_labels(role[1], nr[1], size, st[0], &M, &sam) ||
        !merge_labels(role[1], nr[1], size, st[2], &M, &sym) || !merge_labels(role[2], nr[2], size, st[1], &N, &sbn) ||
        !merge_labels(role[2], nr[2], size, st[2], &N, &syn) || !merge_labels(role[3], nr[3], size, st[0], &K, &sak) ||
        !merge_labels(role[3], nr[3], size, st[1], &K, &sbk))
        return PP_OK;
    pcu_mm mm = {.alpha = 1, .batch = B, .k = K, .dt = ty};
    int first; /* the node's input cuBLASLt takes as its A */
    int32_t tc;
    if (lt_operand(syn, sym, N, M, &tc, &mm.ldc) && !tc && lt_operand(sbn, sbk, N, K, &mm.transa, &mm.lda) &&
        lt_operand(sak, sam, K, M, &mm.transb, &mm.ldb)) {
        first = 1, mm.m = N, mm.n = M; /* D = Y^T, column-major N x M: B^T A^T */
    } else if (lt_operand(sym, syn, M, N, &tc, &mm.ldc) && !tc && lt_operand(sam, sak, M, K, &mm.transa, &mm.lda) &&
               lt_operand(sbk, sbn, K, N, &mm.transb, &mm.ldb)) {
        first = 0, mm.m = M, mm.n = N; /* D = Y, column-major M x N: A B */
    } else {
        return PP_OK;
    }
    if (B > 1) {
        mm.sa = first ? sbb : sab, mm.sb = first ? sab : sbb, mm.sc = syb;
    }
    *ok = true;
    if (M * N == 0) return PP_OK;
    NEW_STEP(s, P, PCU_S_MATMUL, ni, 5);
    s->u.mm = mm;
    s->ops[0] = R(P, n->in[first]);
    s->ops[1] = R(P, n->in[1 - first]);
    s->ops[3] = R(P, n->out[0]);
    P->pl->counts.cublas++;
    return PP_OK;
}

/* ---- strided views (--cuda-stride-views on) ------------------------------------------------- */

static bool reshape_like(pp_op op) {
    return op == PP_OP_RESHAPE || op == PP_OP_FLATTEN || op == PP_OP_SQUEEZE || op == PP_OP_UNSQUEEZE ||
           op == PP_OP_IDENTITY;
}

/* A view `in` seen as shape ys without moving an element (out: its strides),
 * as NumPy reshapes without a copy: each group of dims that the reshape
 * merges or splits must walk as one (outer stride = inner stride x inner
 * extent). Dims of one element are free (stride 0). */
static bool reshape_view(const sview *in, const pp_shape *ys, sview *out) {
    enum { N = 2 * PP_MAX_DIMS };
    int64_t oe[N], os[N]; /* the input's dims as runs of one stride, innermost first (two-level dims: two) */
    int no = 0;
    for (int d = in->rank - 1; d >= 0; d--) {
        const int64_t inner = in->in[d] ? in->in[d] : in->dim[d], outer = in->in[d] ? in->dim[d] / in->in[d] : 1;
        if (inner > 1) oe[no] = inner, os[no++] = in->in[d] ? in->ist[d] : in->st[d];
        if (outer > 1) oe[no] = outer, os[no++] = in->st[d];
    }
    *out = (sview){.src = in->src, .rank = ys->rank, .off = in->off};
    int i = 0;
    int64_t re = no ? oe[0] : 1, rs = no ? os[0] : 0; /* what is left of run i */
    for (int d = ys->rank - 1; d >= 0; d--) { /* each output dim from the runs (split where a dim ends inside one) */
        out->dim[d] = ys->dim[d];
        int64_t need = ys->dim[d], pe[N], ps[N];
        int np = 0;
        while (need > 1) {
            if (i >= no) return false;
            if (need % re == 0) { /* the whole run */
                pe[np] = re, ps[np++] = rs, need /= re;
                if (++i < no) re = oe[i], rs = os[i];
            } else if (re % need == 0) { /* its inner part */
                pe[np] = need, ps[np++] = rs, re /= need, rs *= need, need = 1;
            } else {
                return false;
            }
        }
        int brk = -1; /* where the parts stop walking as one (innermost first) */
        for (int k = 0; k + 1 < np; k++)
            if (ps[k + 1] != ps[k] * pe[k]) {
                if (brk >= 0) return false; /* more than two strides */
                brk = k;
            }
        if (np == 0) continue; /* one element: stride 0 */
        if (brk < 0) {
            out->st[d] = ps[0];
        } else {
            out->in[d] = 1;
            for (int k = 0; k <= brk; k++) out->in[d] *= pe[k];
            out->ist[d] = ps[0], out->st[d] = ps[brk + 1];
        }
    }
    return i == no || (i == no - 1 && re == 1);
}

/* Output q of node ni as strides over what its input is read as (`in`): a
 * Transpose, a Slice with constant starts, ends, axes and steps >= 1, a
 * Gather of one constant index in range, a Split. false: none of these. */
static bool node_view(const planner *P, int ni, int q, const sview *in, sview *out) {
    const pprt_node *n = &P->st->nodes[ni];
    if (n->n_in < 1 || n->in[0] < 0 || q >= n->n_out || n->out[q] < 0) return false;
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[q]);
    const int r = y->shape.rank, rx = x->shape.rank;
    if (!pp_dtype_size(x->dtype) || pp_dtype_size(x->dtype) > 8 || x->dtype != y->dtype || in->rank != rx)
        return false;
    *out = (sview){.src = in->src, .rank = r, .off = in->off};
    for (int d = 0; d < r; d++) out->dim[d] = y->shape.dim[d];
    const pp_attrs a = attrs_of(P, n);
    int axis;
    if (n->op == PP_OP_TRANSPOSE) {
        int64_t perm[PP_MAX_DIMS];
        if (r != rx || pp_transpose_perm(a, rx, perm, NULL) != PP_OK) return false;
        for (int d = 0; d < r; d++) out->st[d] = in->st[perm[d]], out->in[d] = in->in[perm[d]], out->ist[d] = in->ist[perm[d]];
        return true;
    }
    if (n->op == PP_OP_SLICE) {
        pp_tinfo tin[5];
        pp_slice sl;
        if (r != rx || !const_inputs(P, n, tin, 5) || pp_slice_parse(a, tin, n->n_in, &sl, NULL) != PP_OK) return false;
        for (int d = 0; d < r; d++) {
            if (sl.step[d] < 1 || (in->in[d] && (sl.first[d] || sl.step[d] != 1 || out->dim[d] != in->dim[d])))
                return false; /* (a two-level dim only whole) */
            out->in[d] = in->in[d], out->ist[d] = in->ist[d];
            out->st[d] = in->st[d] * sl.step[d];
            out->off += sl.first[d] * in->st[d];
        }
        return true;
    }
    if (n->op == PP_OP_GATHER) {
        const pprt_tdesc *ix = n->n_in > 1 ? T(P, n->in[1]) : NULL;
        if (!ix || ix->kind != PPRT_WEIGHT || !ix->data || (ix->dtype != PP_I64 && ix->dtype != PP_I32) ||
            numel(&ix->shape) != 1 || pp_norm_axis(attr_i(P, n, "axis", 0), rx, "axis", &axis, NULL) != PP_OK ||
            r != rx - 1 + ix->shape.rank)
            return false;
        int64_t i = pcu_ldi(ix->data, ix->dtype, 0);
        if (i < 0) i += x->shape.dim[axis];
        if (i < 0 || i >= x->shape.dim[axis]) return false; /* (the copy reports it) */
        out->off += in->in[axis] ? i / in->in[axis] * in->st[axis] + i % in->in[axis] * in->ist[axis] : i * in->st[axis];
        for (int d = 0; d < r; d++) {
            const int xd = d < axis ? d : d < axis + ix->shape.rank ? -1 : d - ix->shape.rank + 1;
            out->st[d] = xd < 0 ? 0 : in->st[xd], out->in[d] = xd < 0 ? 0 : in->in[xd], out->ist[d] = xd < 0 ? 0 : in->ist[xd];
        }
        return true;
    }
    if (reshape_like(n->op))
        return q == 0 && x->nbytes == y->nbytes && reshape_view(in, &y->shape, out);
    if (n->op == PP_OP_SPLIT) {
        if (r != rx || pp_norm_axis(attr_i(P, n, "axis", 0), rx, "axis", &axis, NULL) != PP_OK) return false;
        int64_t at = 0;
        for (int j = 0; j < q; j++)
            if (n->out[j] >= 0) at += T(P, n->out[j])->shape.dim[axis];
        if (in->in[axis]) return false;
        for (int d = 0; d < r; d++) out->st[d] = in->st[d], out->in[d] = in->in[d], out->ist[d] = in->ist[d];
        out->off += at * in->st[axis];
        return true;
    }
    return false;
}

/* Whether node j may read tensor t as the folded view P->view[t]: another
 * candidate (folded itself, or a strided copy that reads t's source through
 * the view), or a MatMul whose operands cuBLASLt takes with these strides
 * (plan_fattn takes any strides its two batch levels express, else the
 * pattern runs unfused on cuBLASLt). */

static bool view_reader_ok(const planner *P, const bool *cand, const bool *fold, int j, int t) {
    const pprt_node *n = &P->st->nodes[j];
    if (P->host_node && P->host_node[j]) return false;
    if (cand[j]) { /* an unfolded Reshape reads bytes; a strided copy reads through a view of one stride a dim */
        if (n->in[0] != t) return false; /* (only the data input is read through the view) */
        bool all = true;
        for (int q = 0; q < n->n_out; q++) all = all && fold[n->out[q]];
        return all || (!reshape_like(n->op) && !two_level(&P->view[n->in[0]]));
    }
    if (n->op == PP_OP_GEMM && n->n_out == 1 && n->n_in >= 2 && one_float_type(P, n) >= 0) { /* (t is not C: no view) */
        const sview va = view_of(P, n->in[0]), vb = view_of(P, n->in[1]);
        pcu_mm mm;
        return (n->n_in < 3 || n->in[2] < 0 || P->view[n->in[2]].src < 0) &&
               gemm_views(&va, &vb, attr_i(P, n, "transA", 0) != 0, attr_i(P, n, "transB", 0) != 0, &mm);
    }
    fa_links f;
    if (P->fattn && (n->op == PP_OP_MUL || n->op == PP_OP_DIV)) { /* the Mul or Div of a pattern's Q, in its kernel */
        const int m = n->n_out == 1 ? sole_reader(P, j, n->out[0]) : -1;
        return m >= 0 && P->st->nodes[m].pattern == PP_PATTERN_ATTENTION && P->st->nodes[m].op == PP_OP_MATMUL &&
               fattn_match(P, m, &f) >= 0 && f.pq == j && fa_q(P, m, f.pq) == t;
    }
    if (n->op != PP_OP_MATMUL || n->n_in != 2 || n->n_out != 1 || one_float_type(P, n) < 0) return false;
    if (P->fattn) { /* a pattern the fused kernel will take: its Q, K (first MatMul) and V (last) fit it */
        if (n->pattern == PP_PATTERN_ATTENTION && fattn_match(P, j, &f) >= 0) return true;
        for (int i = 0; i < j; i++)
            if (P->st->nodes[i].pattern == PP_PATTERN_ATTENTION && P->st->nodes[i].op == PP_OP_MATMUL &&
                fattn_match(P, i, &f) == j)
                return true;
    }
    const sview va = view_of(P, n->in[0]), vb = view_of(P, n->in[1]);
    sview pa = va, pb = vb; /* the operands packed, as a copy would leave them */
    if (va.src != n->in[0]) P->view[n->in[0]].src = -1, pa = view_of(P, n->in[0]), P->view[n->in[0]] = va;
    if (vb.src != n->in[1]) P->view[n->in[1]].src = -1, pb = view_of(P, n->in[1]), P->view[n->in[1]] = vb;
    pcu_mm mm, packed;
    /* not where the views would split the product into more batches of fewer than 64 rows than the copy
     * (a transposed batch and rows, e.g. ViT's [S, B, E] at B = 8: 197 products of 8 rows instead of
     * one of 1576) */
    return matmul_layout(&va, &vb, &T(P, n->out[0])->shape, &mm) &&
           matmul_layout(&pa, &pb, &T(P, n->out[0])->shape, &packed) &&
           (mm.batch <= packed.batch || mm.n >= PCU_VIEW_MIN_ROWS);
}

/* fold_views' fixed point from the folds given: in node order each view
 * from its input's, in reverse order an output unfolded when a reader cannot
 * take it; until nothing changes (only ever fewer folds). */
static void settle_views(planner *P, const bool *cand, bool *fold) {
    const pprt_stage *st = P->st;
    const int nn = st->n_nodes;
    for (bool changed = true; changed;) {
        changed = false;
        for (int ni = 0; ni < nn; ni++) /* the views, from their inputs' */
            for (int q = 0; cand[ni] && q < st->nodes[ni].n_out; q++) {
                const int t = st->nodes[ni].out[q];
                P->view[t].src = -1;
                const sview in = view_of(P, st->nodes[ni].in[0]);
                if (fold[t] && !node_view(P, ni, q, &in, &P->view[t])) fold[t] = false, changed = true;
                if (!fold[t]) P->view[t].src = -1;
            }
        for (int ni = nn - 1; ni >= 0; ni--) /* their readers */
            for (int q = 0; cand[ni] && q < st->nodes[ni].n_out; q++) {
                const int t = st->nodes[ni].out[q];
                for (int j = 0; fold[t] && j < nn; j++)
                    for (int k = 0; fold[t] && k < st->nodes[j].n_in; k++)
                        if (st->nodes[j].in[k] == t && !view_reader_ok(P, cand, fold, j, t))
                            fold[t] = false, P->view[t].src = -1, changed = true;
            }
    }
}

/* --cuda-stride-views on: the candidates (node_view's ops) whose every
 * output is an arena tensor the stage does not send, that only products and
 * other candidates read, become views: P->view of each output, the node
 * done (no step; a Split's folded outputs only). Decided to a fixed point:
 * start from every candidate folded; in node order compute each view from
 * its input's, then in reverse order unfold an output that a reader cannot
 * take; repeat until nothing changes (only ever fewer folds). */
static pp_status fold_views(planner *P) {
    const pprt_stage *st = P->st;
    const int nt = st->n_tensors, nn = st->n_nodes;
    P->view = malloc(pp_count(nt) * sizeof *P->view);
    bool *cand = calloc(pp_count(nn), sizeof *cand), *fold = calloc(pp_count(nt), sizeof *fold),
         *sent = calloc(pp_count(nt), sizeof *sent), *saved = calloc(pp_count(nt), sizeof *saved),
         *from_cand = calloc(pp_count(nt), sizeof *from_cand);
    if (!P->view || !cand || !fold || !sent || !saved || !from_cand) {
        free(cand), free(fold), free(sent), free(saved), free(from_cand);
        return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    }
    for (int t = 0; t < nt; t++) P->view[t].src = -1;
    for (int i = 0; i < st->out.n; i++) sent[st->send[i]] = true;
    for (int ni = 0; ni < nn; ni++) {
        const pprt_node *n = &st->nodes[ni];
        bool ok = !P->done[ni] && !(P->host_node && P->host_node[ni]) && n->n_out >= 1;
        for (int q = 0; q < n->n_out && ok; q++) {
            const int t = n->out[q];
            sview v, in = view_of(P, n->in[0]);
            ok = t >= 0 && st->t[t].kind == PPRT_ACTIVATION && !sent[t] && numel(&st->t[t].shape) > 0 &&
                 node_view(P, ni, q, &in, &v);
            /* (a channels-last input is read through a transpose: no view of its bytes) */
            ok = ok && !(P->lay && n->in[0] >= 0 && P->lay[n->in[0]] && !lay_free(&st->t[n->in[0]]));
        }
        cand[ni] = ok;
        for (int q = 0; q < n->n_out && ok; q++) fold[n->out[q]] = from_cand[n->out[q]] = true;
    }
    settle_views(P, cand, fold);
    /* a candidate unfolded while its input was a view may fold now that the input is a copy (ViT's K: the
     * heads Reshape over a Slice at B > 1 is no view cuBLASLt takes, the Transpose after it over the Slice's
     * copy is): each tried once, alone, kept where no fold is lost */
    for (int ni = 0; ni < nn; ni++) {
        const int x = st->nodes[ni].in[0];
        if (!cand[ni] || x < 0 || !from_cand[x] || fold[st->nodes[ni].out[0]]) continue;
        int before = 0, after = 0;
        for (int t = 0; t < nt; t++) before += fold[t], saved[t] = fold[t];
        for (int q = 0; q < st->nodes[ni].n_out; q++) fold[st->nodes[ni].out[q]] = true;
        settle_views(P, cand, fold);
        bool lost = false;
        for (int t = 0; t < nt; t++) after += fold[t], lost = lost || (saved[t] && !fold[t]);
        if (lost || after <= before) {
            memcpy(fold, saved, pp_count(nt) * sizeof *fold);
            settle_views(P, cand, fold); /* (a fixed point already: the views computed again) */
        }
    }
    for (int ni = 0; ni < nn; ni++) {
        bool all = cand[ni];
        for (int q = 0; cand[ni] && q < st->nodes[ni].n_out; q++) {
            all = all && fold[st->nodes[ni].out[q]];
            /* (a Reshape between arena tensors was no step before either) */
            P->pl->counts.views += fold[st->nodes[ni].out[q]] && !reshape_like(st->nodes[ni].op);
        }
        if (all) P->done[ni] = true;
    }
    free(cand), free(fold), free(sent), free(saved), free(from_cand);
    return PP_OK;
}

/* ---- the planner ---------------------------------------------------------------------------- */

/* Reshape and the other views: no step between two arena tensors (one
 * tensor in the own arena), else a device copy; Dropout in inference (no training_mode input, or a
 * constant false one) or with a constant ratio 0, whose mask output nothing
 * reads. */
static pp_status plan_copy(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    *ok = true;
    if (n->op == PP_OP_DROPOUT) {
        /* the mask output only where nothing reads or receives it; training_mode absent or a
         * constant false (as PyTorch exports F.dropout in eval) */
        const pprt_tdesc *tm = n->n_in > 2 && n->in[2] >= 0 ? T(P, n->in[2]) : NULL;
        const pprt_tdesc *ra = n->n_in > 1 && n->in[1] >= 0 ? T(P, n->in[1]) : NULL;
        const bool eval = !tm || (tm->kind == PPRT_WEIGHT && tm->data && tm->dtype == PP_BOOL &&
                                  numel(&tm->shape) == 1 && !tm->data[0]);
        /* training with a constant ratio 0 keeps every element, unscaled (torchvision's Swin exports that) */
        const bool keep_all = ra && ra->kind == PPRT_WEIGHT && ra->data && pcu_is_float(ra->dtype) &&
                              numel(&ra->shape) == 1 && pcu_ldd(ra->data, ra->dtype, 0) == 0.0;
        *ok = (n->n_out == 1 || n->out[1] < 0 || P->uses[n->out[1]] == 0) && (eval || keep_all);
    }
    if (!*ok) return PP_OK;
    P->pl->counts.copies++;
    /* an arena tensor viewed as another arena tensor of the same bytes: the same bytes in the
     * stage's own arena (repack_arena), no step */
    const pprt_tdesc *x = T(P, n->in[0]), *y = T(P, n->out[0]);
    if (x->kind == PPRT_ACTIVATION && y->kind == PPRT_ACTIVATION && x->nbytes == y->nbytes) {
        const int src = R(P, n->in[0]).tensor; /* (an NCHW temp of a channels-last input: its bytes) */
        P->alias[n->out[0]] = src;
        return PP_OK;
    }
    return copy_step(P, ni, R(P, n->in[0]), R(P, n->out[0]));
}

/* The op table of the planner: each op's planning function and the route
 * pprt --ops (and the README's op table) shows for it. An op without a row
 * goes to plan_elementwise: an own kernel where the elementwise kernel has
 * it (ew_op_of), else the host fallback. A function that declines a node
 * (its types or attributes) leaves it to the host fallback too. */
typedef pp_status plan_fn(planner *P, int ni, bool *ok);
static const struct {
    plan_fn *fn;
    const char *route;
} plan_table[PP_OP_COUNT] = {
#define ROW(op, f, r) [PP_OP_##op] = {f, r},
    ROW(RESHAPE, plan_copy, "copy") ROW(FLATTEN, plan_copy, "copy") ROW(SQUEEZE, plan_copy, "copy")
    ROW(UNSQUEEZE, plan_copy, "copy") ROW(IDENTITY, plan_copy, "copy") ROW(DROPOUT, plan_copy, "copy")
    ROW(CONV, plan_conv, "cuDNN") ROW(FUSEDCONV, plan_conv, "cuDNN") ROW(CONVTRANSPOSE, plan_conv, "cuDNN")
    ROW(UNARYGRAD, plan_ugrad, "own kernel") ROW(MAXPOOLGRAD, plan_pool_grad, "own kernel")
    ROW(AVGPOOLGRAD, plan_pool_grad, "own kernel") ROW(DROPOUTTRAIN, plan_dropout_train, "own kernel")
    ROW(GATHERGRAD, plan_gather_grad, "own kernel") ROW(SLICEGRAD, plan_slice_grad, "own kernel")
    ROW(RESIZEGRAD, plan_resize_grad, "own kernel") ROW(BATCHNORMGRAD, plan_bn_grad, "own kernel (a block per channel)")
    ROW(LAYERNORMGRAD, plan_norm_grad, "own kernel (a block per row)")
    ROW(INSTANCENORMGRAD, plan_norm_grad, "own kernel (a block per row)") ROW(CONVGRADX, plan_conv_grad, "cuDNN (backward data)") ROW(CONVGRADW, plan_conv_grad, "cuDNN (backward filter)")
    ROW(MATMUL, plan_matmul, "cuBLASLt") ROW(GEMM, plan_matmul, "cuBLASLt")
    ROW(EINSUM, plan_einsum, "cuBLASLt (matrix products)")
    ROW(WHERE, plan_select_cast, "own kernel") ROW(CAST, plan_select_cast, "own kernel")
    ROW(CASTLIKE, plan_select_cast, "own kernel") ROW(CLIP, plan_select_cast, "own kernel")
    ROW(TRANSPOSE, plan_view_like, "own kernel") ROW(SLICE, plan_view_like, "own kernel")
    ROW(EXPAND, plan_view_like, "own kernel") ROW(TILE, plan_view_like, "own kernel")
    ROW(DEPTHTOSPACE, plan_view_like, "own kernel") ROW(SPACETODEPTH, plan_view_like, "own kernel")
    ROW(PAD, plan_pad, "own kernel") ROW(CENTERCROPPAD, plan_pad, "own kernel") ROW(CONCAT, plan_concat_split, "own kernel")
    ROW(SPLIT, plan_concat_split, "own kernel") ROW(GATHER, plan_gather, "own kernel")
    ROW(SOFTMAX, plan_softmax, "own kernel") ROW(LOGSOFTMAX, plan_softmax, "own kernel")
    ROW(BATCHNORM, plan_norm, "own kernel") ROW(LAYERNORM, plan_norm, "own kernel")
    ROW(INSTANCENORM, plan_norm, "own kernel") ROW(GROUPNORM, plan_norm, "own kernel")
    ROW(FUSEDGN, plan_norm, "own kernel")
    ROW(RMSNORM, plan_norm, "own kernel") ROW(RESIZE, plan_resize, "own kernel")
    ROW(CUMSUM, plan_cumsum, "own kernel") ROW(CUMPROD, plan_cumsum, "own kernel")
    ROW(GATHERELEMENTS, plan_gather_elements, "own kernel")
    ROW(QUANTIZELINEAR, plan_quant, "own kernel") ROW(DEQUANTIZELINEAR, plan_quant, "own kernel")
    ROW(GRIDSAMPLE, plan_gridsample, "own kernel (1-3 spatial axes)")
    ROW(GRIDSAMPLEGRAD, plan_gridsample_grad, "own kernel (1-3 spatial axes, two launches)")
    ROW(TOPK, plan_topk, "own kernel") ROW(SCATTERND, plan_scatter, "own kernel")
    ROW(SCATTERELEMENTS, plan_scatter, "own kernel") ROW(SCATTER, plan_scatter, "own kernel")
    ROW(TRILU, plan_trilu, "own kernel") ROW(ROTARYEMBEDDING, plan_rope, "own kernel")
    ROW(ATTENTION, plan_attention, "own kernel")
    ROW(MAXPOOL, plan_pool, "own kernel") ROW(AVGPOOL, plan_pool, "own kernel") ROW(LPPOOL, plan_pool, "own kernel")
    ROW(HARDMAX, plan_line, "own kernel") ROW(LPNORM, plan_line, "own kernel")
    ROW(ONEHOT, plan_onehot, "own kernel") ROW(LSTM, plan_rnn, "own kernel (a launch per step)")
    ROW(GRU, plan_rnn, "own kernel (two launches per step)") ROW(RNN, plan_rnn, "own kernel (a launch per step)")
    ROW(COL2IM, plan_col2im, "own kernel") ROW(AFFINEGRID, plan_affinegrid, "own kernel")
    ROW(GLOBALAVGPOOL, plan_reduce, "own kernel") ROW(GLOBALMAXPOOL, plan_reduce, "own kernel")
    ROW(ARGMAX, plan_reduce, "own kernel") ROW(ARGMIN, plan_reduce, "own kernel")
    ROW(REDUCEMEAN, plan_reduce, "own kernel") ROW(REDUCESUM, plan_reduce, "own kernel")
    ROW(REDUCEMAX, plan_reduce, "own kernel") ROW(REDUCEMIN, plan_reduce, "own kernel")
    ROW(REDUCEPROD, plan_reduce, "own kernel") ROW(REDUCEL1, plan_reduce, "own kernel")
    ROW(REDUCEL2, plan_reduce, "own kernel") ROW(REDUCESUMSQUARE, plan_reduce, "own kernel")
    ROW(REDUCELOGSUM, plan_reduce, "own kernel") ROW(REDUCELOGSUMEXP, plan_reduce, "own kernel")
#undef ROW
};

const char *pcu_op_route(pp_op op) {
    if ((unsigned)op >= PP_OP_COUNT) return NULL;
    if (plan_table[op].fn) return plan_table[op].route;
    return ew_op_of(op) >= 0 ? "own kernel" : "host fallback";
}

/* Node ni's planning function alone (half_fits' trial) */
static pp_status plan_try(planner *P, int ni, bool *ok) {
    plan_fn *fn = plan_table[P->st->nodes[ni].op].fn ? plan_table[P->st->nodes[ni].op].fn : plan_elementwise;
    *ok = false;
    return fn(P, ni, ok);
}

static pp_status plan_node(planner *P, int ni) {
    const pprt_node *n = &P->st->nodes[ni];
    bool ok = false;
    plan_fn *fn = plan_table[n->op].fn ? plan_table[n->op].fn : plan_elementwise;
    PP_TRY(half_moves(P, ni, true));
    PP_TRY(fn(P, ni, &ok));
    if (ok) return half_moves(P, ni, false);
    if (node_of(P, ni) != n) /* its Casts are gone: the half route must have a step */
        return PP_FAIL(P->err, PP_ERUNTIME, "stage %d node '%s' (%s): no CUDA step on the half route (internal; "
                       "pprt --cuda-half-products off runs it in f32)", P->st->index, n->name, pp_op_table[n->op].name);
    char why[96];
    snprintf(why, sizeof why, "%s: no CUDA step for %s", pp_op_table[n->op].name,
             !strcmp(pcu_op_route(n->op), "host fallback") ? "this op" : "these types or attributes");
    return host_step(P, ni, why);
}

/* ---- layouts (--cuda-layout nhwc) ------------------------------------------------------------ *
 * A channels-last plan runs its 2-D convolutions NHWC (cuDNN's tensor-core engines for half want it) and keeps
 * the tensors between them NHWC, so no transpose stands between two convolutions. Which node runs
 * channels-last is a function of the plan alone (lay_rule), never of where a cut falls: the rule walks the
 * whole plan's nodes in order, stage after stage, and a stage's received tensor takes the layout the stage
 * that made it gave it. Every node thus runs in the same layout at -pp 1 and -pp 2; a cut only adds
 * transposes, which move bytes and change none, so the promise that a split changes no bit holds.
 *
 * The rule: a Conv, pp.FusedConv or ConvTranspose of 4-D float tensors runs NHWC; an elementwise node (4-D output, inputs of
 * rank <= 4, broadcast allowed), a Concat, Split, Pad or Resize of 4-D tensors, MaxPool, AveragePool, GlobalAveragePool,
 * GlobalMaxPool or an f32 inference BatchNormalization runs NHWC when one of its activations is NHWC by the rule; a
 * Transpose [0, 2, 3, 1] of an NHWC tensor is its bytes (its output NCHW, no step), and a Transpose [0, 3, 1, 2]
 * always makes an NHWC output out of its input's bytes (the model's own change of layout: ConvNeXt, Swin) (and is not "free": a tensor with one channel or 1x1 spatial
 * dims, or not 4-D, has the same bytes in both layouts); everything else runs NCHW. A node's non-free
 * outputs have its layout.
 *
 * The planner then keeps, per tensor, which tensor holds its value in each layout (P->have): a reader that
 * wants the other layout gets a temp of the planner's own (pcu_plan.n_temps) written by one strided copy
 * (lay_transpose, counted in pcu_counts.transposes); a channels-last output that the stage sends is written
 * into a temp and copied to NCHW into the message at once, so messages and outputs keep the plan's NCHW
 * layout. A weight that only channels-last convolutions read, as W, is uploaded KRSC (pcu_weight_put); any
 * other is transposed like an activation. A channels-last elementwise node sees its operands with the dims
 * permuted to N, H, W, C (T's shadows): the same kernel, broadcasts included, over NHWC bytes (a Concat: its axis
 * permuted too). A node whose
 * channels-last route declines (or that is on the host fallback) runs NCHW with transposes around it. */

enum { LC_NONE, LC_CONV, LC_EW, LC_POOL, LC_GPOOL, LC_BN, LC_TO_NHWC, LC_FROM_NHWC };

/* A tensor whose NCHW and NHWC bytes are the same: not 4-D, one channel, or 1x1 */
static bool lay_free(const pprt_tdesc *t) {
    const pp_shape *s = &t->shape;
    return s->rank != 4 || s->dim[1] == 1 || (s->dim[2] == 1 && s->dim[3] == 1);
}

static bool lay_float(pp_dtype t) { return t == PP_F32 || t == PP_F16 || t == PP_BF16; }

/* What node n of stage st can do channels-last, from its op and its tensors' ranks and types */
static int lay_class(const pprt_plan *p, const pprt_stage *st, const pprt_node *n) {
    if ((n->n_out != 1 && n->op != PP_OP_SPLIT) || n->n_out < 1 || n->out[0] < 0 || n->n_in < 1 || n->in[0] < 0)
        return LC_NONE;
    const pprt_tdesc *x = &st->t[n->in[0]], *y = &st->t[n->out[0]];
    const bool fx = x->shape.rank == 4 && lay_float(x->dtype) && y->dtype == x->dtype;
    switch (n->op) {
    case PP_OP_CONV: case PP_OP_FUSEDCONV: case PP_OP_CONVTRANSPOSE:
        return fx && n->n_in >= 2 && n->in[1] >= 0 && st->t[n->in[1]].shape.rank == 4 &&
                       st->t[n->in[1]].dtype == x->dtype
                   ? LC_CONV
                   : LC_NONE;
    case PP_OP_MAXPOOL: case PP_OP_AVGPOOL: return fx ? LC_POOL : LC_NONE;
    case PP_OP_GLOBALAVGPOOL: case PP_OP_GLOBALMAXPOOL: return fx ? LC_GPOOL : LC_NONE;
    case PP_OP_BATCHNORM: /* inference (one output): its channel the innermost index */
        return fx && !pp_bn_training((pp_attrs){n->attrs, n->n_attrs, p->opset}, n->n_out) ? LC_BN : LC_NONE;
    case PP_OP_TRANSPOSE: { /* the model's own change of layout (ConvNeXt, Swin): [0, 2, 3, 1], [0, 3, 1, 2] */
        int64_t pm[PP_MAX_DIMS];
        if (x->shape.rank != 4 || y->dtype != x->dtype ||
            pp_transpose_perm((pp_attrs){n->attrs, n->n_attrs, p->opset}, 4, pm, NULL) != PP_OK)
            return LC_NONE;
        return pm[0] == 0 && pm[1] == 2 && pm[2] == 3 && pm[3] == 1   ? LC_FROM_NHWC
               : pm[0] == 0 && pm[1] == 3 && pm[2] == 1 && pm[3] == 2 ? LC_TO_NHWC
                                                                      : LC_NONE;
    }
    case PP_OP_WHERE: case PP_OP_CAST: case PP_OP_CASTLIKE: case PP_OP_CLIP: case PP_OP_CONCAT: break;
    case PP_OP_SPLIT: /* every part 4-D (its axis permuted: plan_concat_split) */
        for (int q = 0; q < n->n_out; q++)
            if (n->out[q] < 0 || st->t[n->out[q]].shape.rank != 4 || st->t[n->out[q]].dtype != x->dtype) return LC_NONE;
        if (x->shape.rank != 4) return LC_NONE;
        break;
    case PP_OP_RESIZE: /* (its roi, scales and sizes permuted with the dims: plan_resize) */
    case PP_OP_PAD: /* (its pads permuted with the dims: plan_pad) */
        if (x->shape.rank != 4 || y->dtype != x->dtype) return LC_NONE;
        break;
    default:
        if (plan_table[n->op].fn || ew_op_of(n->op) < 0) return LC_NONE;
    }
    if (y->shape.rank != 4) return LC_NONE;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const pp_shape *s = &st->t[n->in[k]].shape;
        if (s->rank > 4) return LC_NONE;
        /* an operand of fewer dims broadcasts from the right: [H, W] and [W] are one channel, the same bytes
         * channels-last; [C, H, W] with several channels and pixels is not (lay_input transposes 4-D ones only) */
        if (s->rank == 3 && s->dim[0] > 1 && s->dim[1] * s->dim[2] > 1) return LC_NONE;
    }
    return LC_EW;
}

/* The rule over stage st's nodes in order: mode[ni], and lay[t] for the tensors they make (the received ones'
 * given) */
static void lay_stage(const pprt_plan *p, const pprt_stage *st, signed char *lay, signed char *mode) {
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        const int c = lay_class(p, st, n);
        bool m = c == LC_CONV || c == LC_TO_NHWC;
        for (int k = 0; k < n->n_in && c != LC_NONE && c != LC_TO_NHWC && !m; k++) {
            const int t = n->in[k];
            m = t >= 0 && st->t[t].kind != PPRT_WEIGHT && lay[t] == 1 && !lay_free(&st->t[t]);
        }
        mode[ni] = m;
        for (int q = 0; q < n->n_out; q++) /* (a Transpose out of NHWC: an NCHW output) */
            if (n->out[q] >= 0) lay[n->out[q]] = m && c != LC_FROM_NHWC && !lay_free(&st->t[n->out[q]]);
    }
}

/* P->lay and P->mode of this stage by the rule run over the plan's stages up to it */
static pp_status lay_rule(planner *P) {
    const pprt_plan *p = P->p;
    const ptrdiff_t k = P->st - p->stages;
    if (k < 0 || k >= p->n_stages) { /* a stage of no plan (tests): its own nodes alone */
        lay_stage(p, P->st, P->lay, P->mode);
        return PP_OK;
    }
    signed char **L = calloc((size_t)k + 1, sizeof *L);
    signed char *scratch = NULL;
    pp_status s = PP_OK;
    for (ptrdiff_t j = 0; L && j <= k && s == PP_OK; j++) {
        const pprt_stage *sj = &p->stages[j];
        L[j] = j == k ? P->lay : calloc(pp_count(sj->n_tensors) + 1, 1);
        free(scratch);
        scratch = j == k ? NULL : calloc(pp_count(sj->n_nodes) + 1, 1);
        if (!L[j] || (j < k && !scratch)) {
            s = PP_FAIL(P->err, PP_ENOMEM, "out of memory");
            break;
        }
        for (int t = 0; t < sj->n_tensors; t++) { /* a received tensor: its maker's layout, by name */
            if (sj->t[t].kind != PPRT_RECV) continue;
            bool found = false;
            for (ptrdiff_t i = j - 1; i >= 0 && !found; i--)
                for (int u = 0; u < p->stages[i].n_tensors && !found; u++) {
                    const pprt_tdesc *d = &p->stages[i].t[u];
                    if ((d->kind == PPRT_ACTIVATION || d->kind == PPRT_SEND) && !strcmp(d->name, sj->t[t].name))
                        L[j][t] = L[i][u], found = true;
                }
        }
        lay_stage(p, sj, L[j], j == k ? P->mode : scratch);
    }
    if (!L) s = PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    for (ptrdiff_t j = 0; L && j < k; j++) free(L[j]);
    free(L);
    free(scratch);
    return s;
}

static bool lay_host(const planner *P, int ni, const pcu_plan_opts *o) {
    return (o && o->host_only) || (P->host_node && P->host_node[ni]);
}

/* The layout state of a stage whose plan runs channels-last (o->nhwc): the rule, what each tensor starts as,
 * and the weights uploaded KRSC */
static pp_status lay_setup(planner *P, const pcu_plan_opts *o) {
    const pprt_stage *st = P->st;
    const int nt = st->n_tensors, nn = st->n_nodes;
    P->mode = calloc(pp_count(nn) + 1, 1);
    P->lay = calloc(pp_count(nt) + 1, 1);
    P->have = malloc((pp_count(nt) + 1) * sizeof *P->have);
    P->over = malloc((pp_count(nt) + 1) * sizeof *P->over);
    P->shadow = malloc((pp_count(nt) + 1) * sizeof *P->shadow);
    P->shadow_on = calloc(pp_count(nt) + 1, sizeof *P->shadow_on);
    P->wkrsc = calloc(pp_count(nt) + 1, 1);
    if (!P->mode || !P->lay || !P->have || !P->over || !P->shadow || !P->shadow_on || !P->wkrsc)
        return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    PP_TRY(lay_rule(P));
    for (int t = 0; t < nt; t++) {
        const bool given = st->t[t].kind == PPRT_RECV || st->t[t].kind == PPRT_WEIGHT;
        P->have[t][0] = given ? t : -1;
        P->have[t][1] = given && lay_free(&st->t[t]) ? t : -1;
        P->over[t] = -1;
        P->wkrsc[t] = st->t[t].kind == PPRT_WEIGHT && !lay_free(&st->t[t]);
    }
    for (int ni = 0; ni < nn; ni++) { /* a weight read by anything but a channels-last convolution's W stays KCRS */
        const pprt_node *n = &st->nodes[ni];
        const bool conv = P->mode[ni] && lay_class(P->p, st, n) == LC_CONV && !lay_host(P, ni, o);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !(conv && k == 1)) P->wkrsc[n->in[k]] = 0;
    }
    for (int t = 0; t < nt; t++) {
        if (!P->wkrsc[t]) continue;
        if (!P->pl->wperm && !(P->pl->wperm = calloc(pp_count(nt) + 1, 1)))
            return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
        P->pl->wperm[t] = 1;
        P->have[t][0] = -1, P->have[t][1] = t;
    }
    return PP_OK;
}

/* A temp of the planner's for stage tensor t's bytes in the other layout: its tensor id, -1 out of memory */
static int lay_temp(planner *P, int t) {
    pcu_plan *pl = P->pl;
    if (pl->n_temps == P->temp_cap) {
        const int cap = P->temp_cap ? 2 * P->temp_cap : 16;
        uint64_t *b = realloc(pl->temp_bytes, (size_t)cap * sizeof *b);
        if (b) pl->temp_bytes = b;
        int *of = b ? realloc(pl->temp_of, (size_t)cap * sizeof *of) : NULL;
        if (!of) return -1;
        pl->temp_of = of;
        P->temp_cap = cap;
    }
    pl->temp_bytes[pl->n_temps] = P->st->t[t].nbytes;
    pl->temp_of[pl->n_temps] = t;
    return P->st->n_tensors + pl->n_temps++;
}

/* Stage tensor t's value from tensor src into tensor dst, NCHW -> NHWC (to_nhwc) or back: one strided copy
 * (the PERM kernel, its dims merged and widened by perm_finish) */
static pp_status lay_transpose(planner *P, int ni, int t, int src, int dst, bool to_nhwc) {
    const pprt_tdesc *d = &P->st->t[t];
    const int64_t N = d->shape.dim[0], C = d->shape.dim[1], H = d->shape.dim[2], W = d->shape.dim[3];
    pcu_step *s = perm_step(P, ni, 2, d);
    if (!s) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    pcu_perm *k = &s->u.perm;
    k->rank = 4;
    const int64_t nhwc_dim[4] = {N, H, W, C}, nhwc_dst[4] = {H * W * C, W * C, C, 1}, nchw_src[4] = {C * H * W, W, 1, H * W};
    const int64_t nchw_dim[4] = {N, C, H, W}, nchw_dst[4] = {C * H * W, H * W, W, 1}, nhwc_src[4] = {H * W * C, 1, W * C, C};
    for (int i = 0; i < 4; i++) {
        k->dim[i] = to_nhwc ? nhwc_dim[i] : nchw_dim[i];
        k->dst_st[i] = to_nhwc ? nhwc_dst[i] : nchw_dst[i];
        k->sst[i] = to_nhwc ? nchw_src[i] : nhwc_src[i];
    }
    s->ops[0] = pcu_tensor_ref(P->pl, src);
    s->ops[1] = pcu_tensor_ref(P->pl, dst);
    snprintf(s->why, sizeof s->why, "%s of '%.60s'", to_nhwc ? "NCHW -> NHWC" : "NHWC -> NCHW", d->name);
    perm_finish(P, s);
    if (s->threads == 0) free(s->ops), P->pl->n_steps--;
    else P->pl->counts.transposes++;
    return PP_OK;
}

/* t's description with the dims N, C, H, W (rank < 4 padded with leading 1s) as N, H, W, C */
static void lay_shadow(planner *P, int t) {
    pprt_tdesc d = P->st->t[t];
    int64_t v[4] = {1, 1, 1, 1};
    for (int i = 0; i < d.shape.rank; i++) v[4 - d.shape.rank + i] = d.shape.dim[i];
    d.shape.rank = 4;
    d.shape.dim[0] = v[0], d.shape.dim[1] = v[2], d.shape.dim[2] = v[3], d.shape.dim[3] = v[1];
    P->shadow[t] = d;
    P->shadow_on[t] = true;
}

/* Node ni's operands in layout m (1: NHWC): each input read from the tensor that holds it so (a transpose into
 * a temp where none does yet), a channels-last output the stage sends written into a temp; ew: the operands'
 * dims permuted (lay_shadow) */
/* Input t of node ni read in layout m: from the tensor that holds it so (a transpose into a temp where none does
 * yet), P->over[t] naming it where that is not t */
static pp_status lay_input(planner *P, int ni, int t, int m) {
    const pprt_stage *st = P->st;
    if (lay_free(&st->t[t]) || P->over[t] >= 0) return PP_OK;
    int id = P->have[t][m];
    if (id < 0) {
        const int src = P->have[t][!m];
        if (src < 0)
            return PP_FAIL(P->err, PP_ERUNTIME, "cuda planner: stage %d node '%s' reads tensor '%s' before a step "
                           "wrote it (internal)", st->index, st->nodes[ni].name, st->t[t].name);
        if ((id = lay_temp(P, t)) < 0) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
        PP_TRY(lay_transpose(P, ni, t, src, id, m == 1));
        P->have[t][m] = id;
    }
    if (id != t) P->over[t] = id;
    return PP_OK;
}

static pp_status lay_operands(planner *P, int ni, int m, bool ew) {
    const pprt_stage *st = P->st;
    const pprt_node *n = &st->nodes[ni];
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        if (ew && m) lay_shadow(P, n->in[k]);
        PP_TRY(lay_input(P, ni, n->in[k], m));
    }
    for (int q = 0; q < n->n_out; q++) {
        const int t = n->out[q];
        if (t < 0) continue;
        if (ew && m) lay_shadow(P, t);
        if (m && !lay_free(&st->t[t]) && st->t[t].kind != PPRT_ACTIVATION && (P->over[t] = lay_temp(P, t)) < 0)
            return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    }
    return PP_OK;
}

/* After node ni ran in layout m: where its outputs are (a sent channels-last one copied to NCHW into the
 * message) */
static pp_status lay_done(planner *P, int ni, int m) {
    const pprt_stage *st = P->st;
    const pprt_node *n = &st->nodes[ni];
    for (int q = 0; q < n->n_out; q++) {
        const int t = n->out[q];
        if (t < 0) continue;
        if (lay_free(&st->t[t])) {
            P->have[t][0] = P->have[t][1] = t;
        } else if (!m || st->t[t].kind == PPRT_ACTIVATION) {
            P->have[t][m] = t, P->have[t][!m] = -1;
        } else {
            P->have[t][1] = P->over[t];
            PP_TRY(lay_transpose(P, ni, t, P->over[t], t, false));
            P->have[t][0] = t;
        }
    }
    return PP_OK;
}

static void lay_clear(planner *P, int ni) {
    const pprt_node *n = &P->st->nodes[ni];
    for (int k = 0; k < n->n_in + n->n_out; k++) {
        const int t = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
        if (t >= 0) P->over[t] = -1, P->shadow_on[t] = false;
    }
}

/* Node ni in a channels-last plan: in its rule's layout; where that is NHWC and its route declines, undone and
 * run NCHW (or on the host) with transposes around it. ok: planned NHWC. */
static pp_status plan_nhwc_try(planner *P, int ni, bool *ok) {
    const pprt_node *n = &P->st->nodes[ni];
    pcu_plan *pl = P->pl;
    const int steps = pl->n_steps, temps = pl->n_temps;
    const pcu_counts counts = pl->counts;
    int (*saved)[2] = malloc((pp_count(n->n_in) + 1) * sizeof *saved); /* the inputs' holders, for an undo */
    if (!saved) return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    for (int k = 0; k < n->n_in; k++)
        saved[k][0] = n->in[k] >= 0 ? P->have[n->in[k]][0] : -1, saved[k][1] = n->in[k] >= 0 ? P->have[n->in[k]][1] : -1;
    *ok = false;
    P->cur_nhwc = true;
    pp_status s = lay_operands(P, ni, 1, lay_class(P->p, P->st, n) == LC_EW);
    if (s == PP_OK) s = (plan_table[n->op].fn ? plan_table[n->op].fn : plan_elementwise)(P, ni, ok);
    if (s == PP_OK && *ok) s = lay_done(P, ni, 1), pl->counts.nhwc++;
    lay_clear(P, ni);
    P->cur_nhwc = false;
    if (s == PP_OK && !*ok) {
        while (pl->n_steps > steps) free(pl->steps[--pl->n_steps].ops);
        pl->n_temps = temps, pl->counts = counts;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) P->have[n->in[k]][0] = saved[k][0], P->have[n->in[k]][1] = saved[k][1];
    }
    free(saved);
    return s;
}

/* A Transpose between the layouts (LC_FROM_NHWC, LC_TO_NHWC) where its tensors are channels-last: [0, 2, 3, 1] of
 * an NHWC tensor is that tensor's bytes; [0, 3, 1, 2] makes a tensor whose NHWC bytes are its input's. The output
 * an alias of the bytes (two arena tensors: no step, as a Reshape), else a copy; a sent output of the second kind a
 * transpose into the message (NCHW there) */
static pp_status plan_transpose_laid(planner *P, int ni, bool from) {
    const pprt_node *n = &P->st->nodes[ni];
    const int x = n->in[0], y = n->out[0];
    const pprt_tdesc *yd = &P->st->t[y];
    pp_status s = lay_input(P, ni, x, from);
    const pcu_ref src = R(P, x);
    lay_clear(P, ni);
    PP_TRY(s);
    P->pl->counts.nhwc++, P->pl->counts.copies++;
    const bool alias = src.space == PCU_SP_ARENA && yd->kind == PPRT_ACTIVATION && src.bytes == yd->nbytes;
    if (from || lay_free(yd)) { /* NCHW out */
        if (alias) P->alias[y] = src.tensor;
        else PP_TRY(copy_step(P, ni, src, R(P, y)));
        return lay_done(P, ni, 0);
    }
    if (yd->kind == PPRT_ACTIVATION) {
        if (alias) P->alias[y] = src.tensor;
        else PP_TRY(copy_step(P, ni, src, R(P, y)));
        P->have[y][1] = y, P->have[y][0] = -1;
    } else {
        PP_TRY(lay_transpose(P, ni, y, src.tensor, y, false));
        P->have[y][0] = y, P->have[y][1] = src.tensor;
    }
    return PP_OK;
}

static pp_status plan_laid(planner *P, int ni, const pcu_plan_opts *o) {
    if (P->done[ni]) return lay_done(P, ni, 0); /* absorbed into an NCHW step before it */
    const bool host = lay_host(P, ni, o);
    const int c = lay_class(P->p, P->st, &P->st->nodes[ni]);
    if (P->mode[ni] && !host && (c == LC_TO_NHWC || c == LC_FROM_NHWC))
        return plan_transpose_laid(P, ni, c == LC_FROM_NHWC);
    if (P->mode[ni] && !host) {
        bool ok;
        PP_TRY(plan_nhwc_try(P, ni, &ok));
        if (ok) return PP_OK;
    }
    pp_status s = lay_operands(P, ni, 0, false);
    if (s == PP_OK)
        s = !host                 ? plan_node(P, ni)
            : o && o->host_only ? host_step(P, ni, "every node on the host (a test of the fallback)")
                                : host_step(P, ni, "no cuDNN or cuBLASLt engine (or --cuda-host-ops)");
    if (s == PP_OK) s = lay_done(P, ni, 0);
    lay_clear(P, ni);
    return s;
}

static void lay_free_all(planner *P) {
    free(P->mode), free(P->lay), free(P->have), free(P->over), free(P->shadow), free(P->shadow_on), free(P->wkrsc);
}

void pcu_weight_put(const pcu_plan *pl, int tid, void *dst, const void *src) {
    const pprt_tdesc *t = &pl->st->t[tid];
    if (!pl->wperm || !pl->wperm[tid] || t->shape.rank != 4) {
        memcpy(dst, src, t->nbytes);
        return;
    }
    const size_t es = pp_dtype_size(t->dtype);
    const int64_t K = t->shape.dim[0], C = t->shape.dim[1], RS = t->shape.dim[2] * t->shape.dim[3];
    for (int64_t k = 0; k < K; k++) /* KCRS -> KRSC */
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = 0; r < RS; r++)
                memcpy((char *)dst + (size_t)((k * RS + r) * C + c) * es, (const char *)src + (size_t)((k * C + c) * RS + r) * es, es);
}

/* The tensor whose bytes t's are (views followed to their source). */
static int alias_root(const planner *P, int t) {
    for (int hops = 0; t < P->st->n_tensors && P->alias[t] >= 0 && hops < P->st->n_tensors; hops++) t = P->alias[t];
    return t;
}

/* The stage's own arena (cuplan.h): every arena tensor that a step touches
 * gets bytes for the steps from its first to its last (a view's output and
 * its source are one tensor; a node absorbed into another's step leaves
 * its output untouched, so that output gets none), packed by ir/pack.h as
 * ppcc packs the plan's; every arena operand moves with its tensor. */
static pp_status repack_arena(planner *P) {
    pcu_plan *pl = P->pl;
    const int nt = P->st->n_tensors + pl->n_temps;
    pl->root = malloc(pp_count(nt) * sizeof *pl->root);
    pp_pack_item *it = malloc(pp_count(nt) * sizeof *it);
    if (!it || !pl->root) {
        free(it);
        return PP_FAIL(P->err, PP_ENOMEM, "out of memory");
    }
    for (int t = 0; t < nt; t++) {
        it[t] = (pp_pack_item){.start = -1, .end = -1, .key = t};
        pl->root[t] = alias_root(P, t);
    }
    for (int i = 0; i < pl->n_steps; i++)
        for (int k = 0; k < pl->steps[i].n_ops; k++) {
            const pcu_ref *r = &pl->steps[i].ops[k];
            if (r->space != PCU_SP_ARENA) continue;
            if (r->tensor < 0 || r->tensor >= nt ||
                (r->tensor < P->st->n_tensors && P->st->t[r->tensor].kind != PPRT_ACTIVATION)) {
                free(it);
                return PP_FAIL(P->err, PP_ERUNTIME, "cuda planner: step %d operand %d lies in the arena but names no "
                               "activation (internal)", i, k);
            }
            pp_pack_item *g = &it[pl->root[r->tensor]];
            if (g->start < 0) g->start = i;
            g->end = i;
            const size_t need = (size_t)(r->off - tbase(P, r->tensor) + r->bytes);
            if (need > g->size) g->size = need;
        }
    int m = 0;
    for (int t = 0; t < nt; t++)
        if (it[t].start >= 0) it[m++] = it[t];
    size_t total = 0, total2 = 0;
    pp_status s = pp_pack(it, m, 256, PP_PACK_BEST_FIT, &total, P->err);
    /* again with equal sizes placed latest end first, kept where tighter: the half route's backward stages
     * (half_route; ResNet-50's bf16 one at batch 32: 385 MB by tensor order, 334 so, its live peak) */
    pp_pack_item *it2 = s == PP_OK ? malloc(pp_count(m) * sizeof *it2) : NULL;
    for (int j = 0; it2 && j < m; j++) it2[j] = it[j], it2[j].key = -(int64_t)it[j].end * (nt + 1) + it[j].key;
    if (it2 && pp_pack(it2, m, 256, PP_PACK_BEST_FIT, &total2, P->err) == PP_OK && total2 < total) {
        for (int j = 0; j < m; j++) it2[j].key += (int64_t)it2[j].end * (nt + 1); /* the tensor id again */
        memcpy(it, it2, pp_count(m) * sizeof *it), total = total2;
    }
    free(it2);
    if (s == PP_OK) {
        uint64_t *base = malloc(pp_count(nt) * sizeof *base);
        if (!base) s = PP_FAIL(P->err, PP_ENOMEM, "out of memory");
        for (int j = 0; base && j < m; j++) base[it[j].key] = it[j].off;
        for (int i = 0; base && i < pl->n_steps; i++)
            for (int k = 0; k < pl->steps[i].n_ops; k++) {
                pcu_ref *r = &pl->steps[i].ops[k];
                if (r->space == PCU_SP_ARENA)
                    r->off = base[pl->root[r->tensor]] + (r->off - tbase(P, r->tensor));
            }
        free(base);
        pl->bytes[PCU_SP_ARENA] = total ? total : 256;
    }
    free(it);
    return s;
}

pp_status pcu_plan_build(const pprt_plan *p, const pprt_stage *st, const pcu_plan_opts *o, pcu_plan *pl,
                         pp_err *err) {
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->st = st;
    pl->woff = malloc(pp_count(st->n_tensors) * sizeof *pl->woff);
    planner P = {.pl = pl, .p = p, .st = st, .narrow = o && o->narrow_copies, .rows = o && o->row_blocks,
                 .fattn = o && o->fused_attention && !o->host_only, .wide_ew = o && o->wide_elementwise, .host_node = o ? o->host_node : NULL, .err = err};
    P.uses = calloc(pp_count(st->n_tensors), sizeof *P.uses);
    P.done = calloc(pp_count(st->n_nodes), sizeof *P.done);
    P.alias = malloc(pp_count(st->n_tensors) * sizeof *P.alias);
    P.fa_head = malloc(7 * pp_count(st->n_nodes) * sizeof *P.fa_head);
    if (P.rows) P.ln_of = malloc(pp_count(st->n_tensors) * sizeof *P.ln_of);
    pp_status s = PP_OK;
    if (!pl->woff || !P.uses || !P.done || !P.alias || !P.fa_head || (P.rows && !P.ln_of)) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    /* the weights block: every weight 256-aligned, in tensor order */
    uint64_t w = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        pl->woff[i] = UINT64_MAX;
        if (st->t[i].kind != PPRT_WEIGHT) continue;
        pl->woff[i] = w;
        w = pp_align_up(w + st->t[i].nbytes, 256);
    }
    pl->bytes[PCU_SP_ARENA] = st->arena_bytes;
    pl->bytes[PCU_SP_WEIGHTS] = w;
    pl->bytes[PCU_SP_IN] = st->in.bytes;
    pl->bytes[PCU_SP_OUT] = st->out.bytes;
    pl->bytes[PCU_SP_WORK] = PCU_WORK_LIB + PCU_LIB_WORKSPACE;
    for (int i = 0; i < st->n_tensors; i++) P.alias[i] = -1;
    for (int i = 0; P.ln_of && i < st->n_tensors; i++) P.ln_of[i] = -1;
    for (int ni = 0; P.ln_of && ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if ((n->op == PP_OP_LAYERNORM || n->op == PP_OP_RMSNORM) && n->n_in > 0 && n->in[0] >= 0 &&
            P.ln_of[n->in[0]] < 0)
            P.ln_of[n->in[0]] = ni;
    }
    for (int i = 0; i < 7 * st->n_nodes; i++) P.fa_head[i] = -1;
    for (int ni = 0; ni < st->n_nodes; ni++)
        for (int k = 0; k < st->nodes[ni].n_in; k++)
            if (st->nodes[ni].in[k] >= 0) P.uses[st->nodes[ni].in[k]]++;
    for (int i = 0; i < st->out.n; i++) P.uses[st->send[i]]++;
    pl->counts.nodes = st->n_nodes;
    if (o && o->nhwc && !o->host_only) s = lay_setup(&P, o);
    if (o && o->stride_views && !o->host_only && s == PP_OK) s = fold_views(&P);
    /* the half route's own tensors and the layouts' temps share the ids past the stage's: one or the other (the
     * layouts are an inference plan's, the half route a mixed-precision training plan's) */
    if (s == PP_OK && !(o && (o->host_only || o->nhwc))) s = half_route(&P, o && o->f32_products);
    if (s == PP_OK && !(o && o->host_only)) fattn_prescales(&P);
    for (int ni = 0; ni < st->n_nodes && s == PP_OK; ni++) {
        if (P.have) {
            s = plan_laid(&P, ni, o);
            continue;
        }
        if (P.done[ni]) continue;
        s = o && o->host_only ? host_step(&P, ni, "every node on the host (a test of the fallback)")
            : o && o->host_node && o->host_node[ni] ? host_step(&P, ni, "no cuDNN or cuBLASLt engine (or --cuda-host-ops)")
                                                     : plan_node(&P, ni);
    }
    /* received tensors sent on unchanged */
    for (int i = 0; i < st->out.n && s == PP_OK; i++) {
        const pprt_tdesc *t = st->out.t[i];
        if (t->kind == PPRT_RECV)
            s = copy_step(&P, -1, (pcu_ref){PCU_SP_IN, st->recv[t->offset], st->in.off[t->offset], t->nbytes},
                          (pcu_ref){PCU_SP_OUT, st->send[i], st->out.off[i], t->nbytes});
    }
    if (s == PP_OK) s = repack_arena(&P);
    pl->n_tensors = st->n_tensors + pl->n_temps;
out:
    lay_free_all(&P);
    free(P.uses);
    free(P.done);
    free(P.alias);
    free(P.ln_of);
    free(P.fa_head);
    free(P.view);
    free(P.hnode);
    free(P.hio);
    free(P.xt);
    free(P.xref);
    free(P.hn);
    if (s != PP_OK) pcu_plan_free(pl);
    return s;
}

void pcu_plan_free(pcu_plan *pl) {
    for (int i = 0; i < pl->n_steps; i++) free(pl->steps[i].ops);
    free(pl->steps);
    free(pl->woff);
    free(pl->root);
    free(pl->temp_bytes);
    free(pl->temp_of);
    free(pl->wperm);
    memset(pl, 0, sizeof *pl);
}

void pcu_plan_explain(const pcu_plan *pl, const char *backend, FILE *f) {
    if (!pl->counts.host) return;
    /* the line made whole, then written at once: the stages' threads create their executors together */
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof line, "pprt: stage %d (%s): %d node%s on the host fallback:",
                                pl->st->index, backend, pl->counts.host, pl->counts.host == 1 ? "" : "s");
    int shown = 0;
    for (int i = 0; i < pl->n_steps && n < sizeof line; i++) {
        const pcu_step *s = &pl->steps[i];
        if (s->kind != PCU_S_HOST || s->node < 0) continue;
        if (shown++ == 4) break;
        n += (size_t)snprintf(line + n, sizeof line - n, "%s '%s' (%s)", shown > 1 ? "," : "",
                              pl->st->nodes[s->node].name, s->why);
    }
    if (pl->counts.host > 4 && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " and %d more", pl->counts.host - 4);
    fprintf(f, "%s\n", line);
}

void pcu_plan_tally(const pcu_plan *pl, pcu_tally *t) {
    memset(t, 0, sizeof *t);
    const int nt = pl->n_tensors ? pl->n_tensors : pl->st->n_tensors;
    unsigned char *prod = calloc(pp_count(nt) + 1, 1); /* root tensor -> a product reads it */
    for (int i = 0; prod && i < pl->n_steps; i++) {
        const pcu_step *s = &pl->steps[i];
        const int n_in = s->kind == PCU_S_MATMUL ? 3 : s->kind == PCU_S_KERNEL && s->kernel == PCU_K_FATTN ? 3 : 0;
        for (int k = 0; k < n_in; k++) {
            const int tid = s->ops[k].tensor;
            if (s->ops[k].space >= 0 && tid >= 0 && tid < nt) prod[pl->root ? pl->root[tid] : tid] = 1;
        }
    }
    for (int i = 0; i < pl->n_steps; i++) {
        const pcu_step *s = &pl->steps[i];
        t->steps++;
        const pcu_ref *w = NULL; /* what a copy writes */
        switch (s->kind) {
        case PCU_S_KERNEL:
            if (s->kernel == PCU_K_PERM) t->perm++, w = &s->ops[s->u.perm.gdim >= 0 ? 2 : 1];
            else t->own++;
            break;
        case PCU_S_CONV:
            t->cudnn++;
            t->epilogues += pcu_conv_epilogue(&s->u.conv, s->conv_fuse && pcu_conv_graph_fuses(&s->u.conv));
            break;
        case PCU_S_MATMUL: t->cublas++; break;
        case PCU_S_COPY: t->copies++, w = &s->ops[1]; break;
        default: t->host++; break;
        }
        if (prod && w && w->tensor >= 0 && w->tensor < nt && prod[pl->root ? pl->root[w->tensor] : w->tensor]) {
            if (s->kind == PCU_S_COPY) t->copy_to_product++;
            else t->perm_to_product++;
        }
    }
    t->launches = t->own + t->perm + t->cublas + t->cudnn + t->epilogues + t->copies;
    t->folded = pl->counts.views;
    free(prod);
}

void pcu_plan_explain_kernels(const pcu_plan *pl, const char *backend, FILE *f) {
    for (int i = 0; i < pl->n_steps; i++) {
        const pcu_step *s = &pl->steps[i];
        if (s->kind == PCU_S_KERNEL && s->node >= 0)
            fprintf(f, "pprt: %s: stage %d node '%s': %s%s%s%s\n", backend, pl->st->index, pl->st->nodes[s->node].name,
                    pcu_step_name(s), s->why[0] ? " (" : "", s->why, s->why[0] ? ")" : "");
    }
    if (pl->counts.nhwc || pl->counts.transposes)
        fprintf(f, "pprt: %s: stage %d: %d nodes channels-last, %d transposes between the layouts a micro-batch "
                "(--cuda-layout)\n", backend, pl->st->index, pl->counts.nhwc, pl->counts.transposes);
    if (pl->fa_unfused) /* ppcc's attention patterns that the fused kernel does not take (--cuda-fused-attention) */
        fprintf(f, "pprt: %s: stage %d: %d attention pattern%s not fused (the first, %s)\n", backend, pl->st->index,
                pl->fa_unfused, pl->fa_unfused == 1 ? "" : "s", pl->fa_why);
    pcu_tally t;
    pcu_plan_tally(pl, &t);
    fprintf(f, "pprt: %s: stage %d: %d steps a micro-batch: %d own-kernel launches, %d library calls, %d copies, "
            "%d on the host\n", backend, pl->st->index, t.steps, t.own + t.perm, t.cublas + t.cudnn, t.copies, t.host);
    fprintf(f, "pprt: %s: stage %d: %d launches: %d own kernels, %d strided copies (%d feeding a product), %d cuBLASLt, "
            "%d cuDNN, %d convolution epilogues, %d device copies (%d feeding a product); %d host steps; %d views "
            "folded into products\n", backend, pl->st->index, t.launches, t.own, t.perm, t.perm_to_product, t.cublas,
            t.cudnn, t.epilogues, t.copies, t.copy_to_product, t.host, t.folded);
    const pcu_counts *c = &pl->counts;
    if (c->half_cand) /* a mixed-precision training plan's products (half_route) */
        fprintf(f, "pprt: %s: stage %d: half products: %d of %d on the half tensors (%d Casts skipped, %d tensors "
                "converted across a cut); in f32: %d (--cuda-half-products off), %d with an operand no Cast from the "
                "half type wrote, %d whose output more than one Cast to it reads, %d other (ConvTranspose, a fused "
                "node, attention, no step); arena %.2f MB\n", backend, pl->st->index, c->half, c->half_cand,
                c->casts_skipped, c->half_cut, c->half_why[PCU_HALF_OFF], c->half_why[PCU_HALF_OPERAND],
                c->half_why[PCU_HALF_OUTPUT], c->half_why[PCU_HALF_OTHER], (double)pl->bytes[PCU_SP_ARENA] / 1e6);
}

const char *pcu_step_name(const pcu_step *s) {
    switch (s->kind) {
    case PCU_S_KERNEL: return pcu_kernel_name(s->kernel); /* kernels.def */
    case PCU_S_CONV:
        return s->u.conv.wgrad       ? "cuDNN convolution backward filter"
               : s->u.conv.transpose ? "cuDNN convolution backward data"
                                     : "cuDNN convolution";
    case PCU_S_MATMUL: return "cuBLASLt matmul";
    case PCU_S_COPY: return "copy";
    default: return "host fallback";
    }
}
