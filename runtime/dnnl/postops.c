/* postops.c: the nodes a primitive absorbs as post-ops (dnnl_exec.h).
 *
 * A convolution, MatMul or Gemm absorbs the eltwise and binary nodes right
 * after it that only refine its output (bias Add, Gelu, SiLU, a scale ...):
 * they become post-ops and are skipped when the stage runs
 * (PPRT_DNNL_FUSE=0: never). What it may absorb stays inside the chains of
 * passes/fuse.c's pp_fusion_chains, which ppcc never cuts, so the split
 * never changes a kernel. A binary operand of the output's shape (a
 * residual) is read in the layout the primitive writes its output in, or the
 * node absorbs nothing (dn_whole_operands_fit). Which layout that is must
 * not depend on the operand's own layout: a tensor received from another
 * stage is plain where, made in the same stage, it may be blocked, and a
 * primitive picked for a plain residual (oneDNN's gemm convolution) or one
 * refused for a blocked one computes other bits. So convolutions and
 * products pick their destination without the residuals (dn_append_fused's
 * probe) and read each residual reordered into it where it is stored
 * otherwise (efficientformer_l1: -pp 2 lost bit identity with -pp 1). */
#include <math.h>
#include <string.h>

#include "dnnl_exec.h"

/* Descriptor of tensor o as the second source of a binary post-op of a
 * primitive whose destination is `dst`, for an op whose output has shape ys
 * (o broadcasts to it: dims right-aligned, broadcast dims 1). When dst has
 * ys's dims: o's layout if it is stored in a oneDNN layout, else a plain
 * view. When the primitive sees the output reshaped (a matrix product's
 * folded rows), only a whole plain operand, a scalar or one along the last
 * dim can follow. */
pp_status dn_operand_md(const pprt_exec *x, int o, const pp_shape *ys, const dnnl_memory_desc_t *dst,
                        dnnl_memory_desc_t *md, pp_err *err) {
    const int r = ys->rank > 0 ? ys->rank : 1;
    int64_t d[PP_MAX_DIMS], yd[PP_MAX_DIMS];
    pp_shape os = T(x, o)->shape, y1 = *ys;
    if (y1.rank == 0) y1.rank = 1, y1.dim[0] = 1;
    dn_align_dims(&os, r, d);
    dn_align_dims(&y1, r, yd);
    bool same = dst->ndims == r, whole = true, last = true;
    for (int i = 0; i < r; i++) {
        same = same && dst->dims[i] == yd[i];
        whole = whole && d[i] == yd[i];
        last = last && (i == r - 1 ? d[i] == yd[i] : d[i] == 1);
    }
    if (same) {
        if (!x->tn.blocked[o]) return dn_plain_md(d, r, md, err);
        if (os.rank != r) return unsup(err, "blocked operand of another rank");
        *md = x->tn.lay[o];
        return PP_OK;
    }
    if (x->tn.blocked[o]) return unsup(err, "blocked operand of a reshaped output");
    const int nd = dst->ndims;
    int64_t v[DNNL_MAX_NDIMS];
    int64_t n_o = numel_of(&T(x, o)->shape);
    for (int i = 0; i < nd; i++) v[i] = whole ? dst->dims[i] : 1;
    if (!whole && n_o != 1) {
        if (!last || dst->dims[nd - 1] != yd[r - 1]) return unsup(err, "operand broadcast across folded rows");
        v[nd - 1] = yd[r - 1];
    }
    return dn_plain_md(v, nd, md, err);
}

/* Descriptor of tensor o as the second source of a binary post-op of a
 * matrix product run as a 1x1 convolution over NHWC [1, N, M, 1] (rows as
 * pixels, see matmul.c): o's plain bytes are read as NHWC too, so it must
 * be whole (its last dim N, M x N elements), a row of N, or a scalar. One
 * stored in a blocked layout is read from a plain copy (dn_append_fused):
 * refusing it would run the product on another kernel where the operand
 * comes from a node of the same stage than where it comes from another
 * stage (plain), and the bits would depend on the split. */
static pp_status rows_operand_md(const pprt_exec *x, int o, int64_t M, int64_t N, dnnl_memory_desc_t *md,
                                 pp_err *err) {
    const pp_shape *os = &T(x, o)->shape;
    const int64_t n_o = numel_of(os), last = os->rank ? os->dim[os->rank - 1] : 1;
    dnnl_dims_t d = {1, 1, 1, 1};
    if (n_o == M * N && last == N) d[1] = N, d[2] = M;
    else if (n_o == N && last == N) d[1] = N;
    else if (n_o != 1) return unsup(err, "operand broadcast across rows");
    DN(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_nhwc), "memory descriptor");
    return PP_OK;
}

/* Append the absorbed nodes' post-ops to po (whose first one is post-op
 * number `idx`) for a primitive with destination `dst`, or, where rows is
 * not NULL, for a matrix product of rows[0] x rows[1] run as a 1x1
 * convolution (rows_operand_md); the memories of binary operands go to args.
 * A whole operand (the destination's dims, a residual) is read through
 * whole_as where that is not NULL (reordered into shared buffer
 * SLOT_OP0 + k every run when stored otherwise), else in its own layout.
 * args NULL is the probe: whole operands are left out (and counted in
 * x->bld.n_whole), and no memory is made, so that the primitive created with po
 * shows the destination layout it picks for itself. */
pp_status dn_append_fused(pprt_exec *x, dnnl_post_ops_t po, int idx, const dnnl_memory_desc_t *dst,
                          const int64_t *rows, const dnnl_memory_desc_t *whole_as, dnnl_exec_arg_t *args,
                          int *nargs, pp_err *err) {
    x->bld.n_whole = 0;
    for (int f = 0; f < x->bld.n_fused; f++, idx++) {
        const pprt_node *b = &x->st->nodes[x->bld.fused[f]];
        dnnl_alg_kind_t alg;
        float alpha, beta;
        bool commutes;
        if (dn_binary_alg(b->op, &alg, &commutes)) {
            const int o = x->bld.fused_other[f];
            dnnl_memory_desc_t md;
            dnnl_memory_t m;
            if (rows) PP_TRY(rows_operand_md(x, o, rows[0], rows[1], &md, err));
            else PP_TRY(dn_operand_md(x, o, &T(x, b->out[0])->shape, dst, &md, err));
            const bool whole = !rows && dst && md.ndims == dst->ndims &&
                               !memcmp(md.dims, dst->dims, sizeof(md.dims[0]) * (size_t)md.ndims);
            if (whole && !args) {
                x->bld.n_whole++;
                idx--; /* left out: the loop counts one */
                continue;
            }
            if (whole && whole_as) {
                const dnnl_data_type_t t = md.data_type;
                md = *whole_as;
                md.data_type = t;
            }
            if (whole) x->bld.whole[x->bld.n_whole++] = md;
            DN(dnnl_post_ops_append_binary(po, alg, &md), "binary post-op");
            if (!args) continue;
            if (whole && whole_as) { /* its layout, or its plain bytes seen with the output's dims */
                dnnl_memory_desc_t cur;
                if (x->tn.blocked[o]) cur = x->tn.lay[o];
                else PP_TRY(dn_plain_md(md.dims, md.ndims, &cur, err));
                PP_TRY(dn_bind_view(x, o, &cur, &md, SLOT_OP0 + f, &m, err));
            } else if (rows && x->tn.blocked[o]) { /* a plain copy, seen as md */
                dnnl_memory_desc_t plain;
                dnnl_memory_t copy;
                PP_TRY(dn_tensor_plain(x, o, &plain, err));
                PP_TRY(dn_bind_input(x, o, &plain, SLOT_OP0 + f, &copy, err));
                PP_TRY(dn_slot_mem(x, &md, SLOT_OP0 + f, &m, err));
            } else {
                PP_TRY(dn_tensor_mem(x, o, &md, &m, err));
            }
            args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, m};
        } else {
            PP_TRY(dn_eltwise_of(x, b, &alg, &alpha, &beta, err));
            if (alg == dnnl_eltwise_relu && alpha == 0) {
                idx--; /* the loop counts one */
                DN(dn_append_relu(po, &idx), "eltwise post-op");
            } else {
                DN(dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta), "eltwise post-op");
            }
        }
    }
    return PP_OK;
}

/* Whether every whole binary post-op operand of the node being built (see
 * dn_append_fused) lies in the layout of the destination that primitive pd
 * writes (element types aside). oneDNN 2.6 takes an operand in another
 * layout without complaint, and some kernels then read it as if it had the
 * destination's: a gemm convolution on an AVX-512 CPU in bf16, adding a
 * residual stored channel-blocked, gave errors of 0.8 of the output's
 * largest magnitude. Such a node absorbs nothing instead (the binary op
 * runs on its own primitive, which reads each operand in its layout). */
bool dn_whole_operands_fit(const pprt_exec *x, const_dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    for (int k = 0; k < x->bld.n_whole; k++) {
        dnnl_memory_desc_t md = x->bld.whole[k];
        md.data_type = dst->data_type;
        if (!dnnl_memory_desc_equal(&md, dst)) return false;
    }
    return true;
}

/* Relu as oneDNN post-ops that keep NaN: its relu (and clip) computes
 * max(x, 0), which gives 0 for NaN; elu with alpha 0 is x > 0 ? x :
 * 0 * (exp(x) - 1), NaN for NaN and -0 for the rest, and the linear 1x + 0
 * makes those +0 (docs/design-notes.md, "NaN and infinities"). */
dnnl_status_t dn_append_relu(dnnl_post_ops_t po, int *idx) {
    dnnl_status_t s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_elu, 0, 0);
    if (s == dnnl_success) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f, 0);
    *idx += 2;
    return s;
}

/* The nodes right after node ni that its primitive can absorb as post-ops:
 * each an eltwise op on the running result, or a binary op of it (whole)
 * and a tensor that exists before node ni runs; the running result read by
 * that node only and never sent. Only the very next nodes, so that nothing
 * runs in between (the last output is written when node ni runs: the
 * arena plan knows, see dn_plan_arena). Only nodes the plan marks as chained
 * to the one before (ppcc's pp_fusion_chains, which no cut splits; every
 * node of a version 1 plan). */
/* oneDNN 2.6's JIT kernels (brgemm matmul, convolutions; AVX2 and AVX-512)
 * run every eltwise post-op of one algorithm with the alpha and beta of the
 * first of that algorithm in the chain: MatMul, Relu (elu 0 and linear 1),
 * Neg (linear -1) gave Relu's output; Elu(0.5), Neg, Elu(2) and two
 * LeakyRelus likewise (found by the difftest, seed 909090). So a chain takes
 * an eltwise node only when its algorithms are new to it or come with the
 * same parameters; else the node runs on its own primitive. */
typedef struct elt_seen {
    int n;
    dnnl_alg_kind_t alg[12];
    float alpha[12], beta[12];
} elt_seen;

/* Whether (alg, alpha, beta) may join the chain seen so far; adds it when so. */
static bool elt_fits(elt_seen *s, dnnl_alg_kind_t alg, float alpha, float beta) {
    for (int i = 0; i < s->n; i++)
        if (s->alg[i] == alg) return s->alpha[i] == alpha && s->beta[i] == beta && signbit(s->beta[i]) == signbit(beta);
    if (s->n == 12) return false;
    s->alg[s->n] = alg, s->alpha[s->n] = alpha, s->beta[s->n] = beta;
    s->n++;
    return true;
}

/* The post-ops Relu appends (dn_append_relu). */
static bool relu_fits(elt_seen *s) {
    elt_seen t = *s;
    if (!elt_fits(&t, dnnl_eltwise_elu, 0, 0) || !elt_fits(&t, dnnl_eltwise_linear, 1.0f, 0)) return false;
    *s = t;
    return true;
}

void dn_find_fusable(pprt_exec *x, int ni) {
    x->bld.n_fused = 0;
    const pprt_stage *st = x->st;
    const pp_op op = st->nodes[ni].op;
    if (!x->o.fuse || !pp_op_has(op, PP_TR_HEAD)) return; /* Conv, pp.FusedConv, MatMul, Gemm, BatchNormalization,
                                                            * pp.GroupNorm */
    int cur = st->nodes[ni].out[0];
    elt_seen seen = {0};
    if (op == PP_OP_FUSEDCONV) { /* its own activation comes first (conv.c); Clip runs as a pass of ours */
        const char *act = "";
        (void)pp_attr_string(attrs_of(x, &st->nodes[ni]), "activation", "", &act, NULL);
        if (!strcmp(act, "Relu")) (void)relu_fits(&seen);
    }
    for (int bi = ni + 1; bi < st->n_nodes && x->bld.n_fused < 4; bi++) {
        const pprt_node *b = &st->nodes[bi];
        /* only within one of ppcc's chains; (the plan's kind: a sent tensor
         * must be written even when kept) */
        if (!b->chain || !x->nd.on_dnnl[bi] || T(x, cur)->kind != PPRT_ACTIVATION || x->tn.cons[cur] != 1 ||
            b->n_out != 1 || !f32(x, b->out[0]) || !pp_shape_eq(&T(x, b->out[0])->shape, &T(x, cur)->shape))
            break;
        if (dn_pw_takes(x, &st->nodes[ni])) { /* pwconv.h applies one SiLU or sigmoid in its epilogue */
            if ((b->op == PP_OP_SILU || b->op == PP_OP_SIGMOID) && b->in[0] == cur)
                x->bld.fused_other[x->bld.n_fused] = -1, x->bld.fused[x->bld.n_fused++] = bi;
            break;
        }
        if (op == PP_OP_FUSEDGN) { /* pprt's kernel applies one Relu or SiLU in its last pass (norm.c) */
            if ((b->op == PP_OP_RELU || (b->op == PP_OP_SILU && x->own_silu)) && b->in[0] == cur)
                x->bld.fused_other[x->bld.n_fused] = -1, x->bld.fused[x->bld.n_fused++] = bi;
            break;
        }
        dnnl_alg_kind_t alg;
        float al, be;
        bool comm;
        int other = -1;
        if (dn_binary_alg(b->op, &alg, &comm)) {
            if (b->n_in != 2) break;
            if (b->in[0] == cur) other = b->in[1];
            else if (b->in[1] == cur && comm) other = b->in[0];
            else break;
            if (other < 0 || other == cur || !f32(x, other) || x->tn.born[other] >= ni) break;
        } else {
            pp_err e = {0};
            const dn_family *fam = dn_family_of(b->op);
            if (!fam || !fam->postop || b->in[0] != cur || !f32(x, cur) ||
                dn_eltwise_of(x, b, &alg, &al, &be, &e) != PP_OK || (b->op == PP_OP_SILU && x->own_silu))
                break;
            if (alg == dnnl_eltwise_relu && al == 0 ? !relu_fits(&seen) : !elt_fits(&seen, alg, al, be)) break;
        }
        x->bld.fused_other[x->bld.n_fused] = other;
        x->bld.fused[x->bld.n_fused++] = bi;
        cur = b->out[0];
    }
    /* the intermediates are never written; the last output is, from node ni on */
    for (int f = 0; f < x->bld.n_fused; f++) {
        const int o = st->nodes[x->bld.fused[f]].out[0];
        if (f < x->bld.n_fused - 1) x->tn.ghost[o] = true;
        else x->tn.born[o] = ni;
    }
    if (x->bld.n_fused) x->tn.ghost[st->nodes[ni].out[0]] = true;
}
