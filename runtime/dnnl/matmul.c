/* matmul.c: MatMul and Gemm on oneDNN's matmul (batched, batch dims
 * broadcast; Gemm's C as a binary-add post-op, alpha as output scale; the
 * nodes after it as post-ops, postops.c), or, with constant weights and few
 * rows, as a 1x1 convolution (matmul_rows). */
#include "../../ir/op_fns.h"
#include "../../ir/shape_nn.h"
#include "dnnl_exec.h"

/* dst = alpha * (A x B) [+ C]: the common part of MatMul and Gemm. A, B: the
 * descriptors to read the inputs through (B reordered once when constant);
 * cmd: C's descriptor (NULL: none) with its memory cm. */
static pp_status matmul_common(pprt_exec *x, int ai, const dnnl_memory_desc_t *am, int bi,
                               const dnnl_memory_desc_t *bm, int yi, const dnnl_memory_desc_t *ym, float alpha,
                               const dnnl_memory_desc_t *cmd, dnnl_memory_t cm, pp_err *err) {
    const bool wconst = is_weight(x, bi);
    /* bf16 (or a product of bf16 values, halfprod.c): A and B read as bf16
     * copies (B's made once when constant), the output and the post-ops stay f32 */
    const bool half = x->bf16 || x->bld.half;
    const dnnl_data_type_t cdt = half ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_c = *am, b_c = *bm, b_any;
    if (half) {
        DN(dnnl_memory_desc_init_by_strides(&a_c, am->ndims, am->dims, cdt, am->format_desc.blocking.strides),
           "memory descriptor");
        DN(dnnl_memory_desc_init_by_strides(&b_c, bm->ndims, bm->dims, cdt, bm->format_desc.blocking.strides),
           "memory descriptor");
    }
    b_any = b_c;
    if (wconst) {
        dnnl_dims_t d;
        for (int i = 0; i < bm->ndims; i++) d[i] = bm->dims[i];
        DN(dnnl_memory_desc_init_by_tag(&b_any, bm->ndims, d, cdt, dnnl_format_tag_any), "matmul weights");
        /* A single row makes this a matrix-vector product. With B stored
         * K x N (what oneDNN picks) its gemv splits K between threads and
         * sums the parts, so the output's last bits depend on the thread
         * count, and -pp 2 (one thread a stage) stops matching -pp 1 (two):
         * seen on AVX2. Stored N x K the gemv splits the outputs instead,
         * each dot product on one thread, as fast or faster. */
        if (bm->ndims == 2 && am->ndims == 2 && am->dims[0] == 1) {
            dnnl_dims_t st = {1, d[0]};
            DN(dnnl_memory_desc_init_by_strides(&b_any, 2, d, cdt, st), "matmul weights");
        }
    }
    dnnl_matmul_desc_t d;
    DN(dnnl_matmul_desc_init(&d, &a_c, &b_any, NULL, ym), "matmul");
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_status_t s = dnnl_success;
    dnnl_post_ops_t po = NULL;
    dnnl_exec_arg_t args[MAX_ARGS];
    int na = 0;
    pp_status r = PP_OK;
    if (alpha != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (s == dnnl_success && (cmd || x->bld.n_fused)) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success && cmd) {
            s = dnnl_post_ops_append_binary(po, dnnl_binary_add, cmd);
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, cm};
        }
        if (s == dnnl_success) r = dn_append_fused(x, po, cmd ? 1 : 0, ym, NULL, ym, args, &na, err);
    }
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_finish_pd(x, &d, attr, po, s, r, "matmul", &pd, err));
    if (dn_ref_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN has only its reference implementation for this product (or its post-ops)");
    }
    if (!dn_whole_operands_fit(x, pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "a binary post-op operand in another layout than the output");
    }
    dnnl_memory_t a, b, y;
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if ((r = dn_half_input(x, x->bld.node, 0, ai, am, &a_c, SLOT_SRC, &a, err)) != PP_OK ||
        (r = wconst ? dn_weight_mem(x, bi, bm, w_md, &b, err)
                    : dn_half_input(x, x->bld.node, 1, bi, bm, &b_c, SLOT_WEI, &b, err)) != PP_OK ||
        (r = dn_tensor_mem(x, yi, ym, &y, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, a};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, b};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, y};
    return dn_push_pd(x, pd, STEP_MAIN, args, na, err);
}

/* Rows below which a product A (M x K) * B (K x N) with constant B runs as a
 * 1x1 convolution over NHWC [1, K, M, 1] (the rows as pixels: A's and the
 * output's plain bytes as they are) instead of a matmul. On AVX2, oneDNN
 * 2.6's gemm-based matmul is uneven at few rows (ViT-B/16 at micro-batch 1,
 * 197 rows, two threads: 177 GFLOP/s for N = 2304 but 91 for N = 3072, and 46
 * on one thread), where its 1x1 convolution kernel holds 180-195 (90-95 on
 * one thread) for every shape; at 1576 rows (micro-batch 8) single products
 * are level, and the whole ViT-B/16 runs 5-10% faster with the convolution.
 * Larger row counts are not measured, so they keep the matmul.
 * On AVX-512 it is the other way round: oneDNN's brgemm matmul runs ViT-B/16's
 * products at 330-340 GFLOP/s on two cores of an Intel Xeon with AMX, and
 * the 1x1 convolution kernel (jit_1x1:avx512_core) the MLP's second product
 * (197 x 3072 x 768) at 230; the whole model ran 1.14-1.23x as fast with
 * the route off (alternating runs, -b 1 and -b 8, 2026-11-28). So on
 * AVX-512 CPUs the route is off unless PPRT_DNNL_ROWS_MAX is set (options.c).
 * PPRT_DNNL_ROWS_MAX sets the row count (default 4096 below AVX-512; 0:
 * never). */

/* y (M x N, plain) = A (tensor ai, plain M x K) * B (constant tensor bi seen
 * through bm, K x N with any strides) + the bias ci (-1: none; a row of N,
 * or whole M x N), then the absorbed nodes, as a 1x1 convolution (see
 * the comment above). f32 only. PP_EUNSUP where it does not apply (the
 * caller rolls back and builds a matmul). */
static pp_status matmul_rows(pprt_exec *x, int ai, int bi, const dnnl_memory_desc_t *bm, int ci, int yi, int64_t M,
                             int64_t K, int64_t N, pp_err *err) {
    if (x->bf16 || x->bld.half || !is_weight(x, bi) || M >= x->o.rows_max || x->tn.blocked[ai])
        return unsup(err, "not rows");
    int64_t n_c = 0;
    if (ci >= 0) {
        const pp_shape *cs = &T(x, ci)->shape;
        n_c = numel_of(cs);
        if (x->tn.blocked[ci] || (cs->rank && cs->dim[cs->rank - 1] != N) || (n_c != N && n_c != M * N))
            return unsup(err, "bias shape");
    }
    const dnnl_dims_t sd = {1, K, M, 1}, wd = {N, K, 1, 1}, dd = {1, N, M, 1}, bd = {N};
    const dnnl_dims_t wst = {bm->format_desc.blocking.strides[1], bm->format_desc.blocking.strides[0], 1, 1};
    const dnnl_dims_t one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t s4, w4, wfrom, d4, b1;
    DN(dnnl_memory_desc_init_by_tag(&s4, 4, sd, dnnl_f32, dnnl_nhwc), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&d4, 4, dd, dnnl_f32, dnnl_nhwc), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&w4, 4, wd, dnnl_f32, dnnl_format_tag_any), "memory descriptor");
    DN(dnnl_memory_desc_init_by_strides(&wfrom, 4, wd, dnnl_f32, wst), "memory descriptor");
    DN(dnnl_memory_desc_init_by_tag(&b1, 1, bd, dnnl_f32, dnnl_a), "memory descriptor");
    const bool bias = ci >= 0 && n_c == N; /* a whole M x N C is a binary post-op instead */
    dnnl_convolution_desc_t cd;
    DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s4, &w4,
                                                  bias ? &b1 : NULL, &d4, one, zero, zero, zero),
       "convolution");
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_post_ops_t po = NULL;
    dnnl_exec_arg_t args[MAX_ARGS];
    int na = 0, idx = 0;
    pp_status r = PP_OK;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && ci >= 0 && !bias) {
        dnnl_memory_desc_t cmd;
        dnnl_memory_t cm;
        s = dnnl_memory_desc_init_by_tag(&cmd, 4, dd, dnnl_f32, dnnl_nhwc);
        if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &cmd), idx++;
        if (s == dnnl_success && (r = dn_tensor_mem(x, ci, &cmd, &cm, err)) == PP_OK)
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, cm};
    }
    const int64_t rows[2] = {M, N};
    if (s == dnnl_success && r == PP_OK) r = dn_append_fused(x, po, idx, NULL, rows, NULL, args, &na, err);
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_finish_pd(x, &cd, attr, po, s, r, "convolution", &pd, err));
    if (!dn_jit_impl(pd)) { /* only a JIT kernel beats the matmul */
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "no JIT 1x1 convolution");
    }
    dnnl_memory_t a, b, y, bm_ = NULL;
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if ((r = dn_plain_view(x, ai, &s4, &a, err)) != PP_OK ||
        (r = dn_weight_mem(x, bi, &wfrom, w_md, &b, err)) != PP_OK ||
        (r = dn_tensor_mem(x, yi, &d4, &y, err)) != PP_OK ||
        (bias && (r = dn_plain_view(x, ci, &b1, &bm_, err)) != PP_OK)) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, a};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, b};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, y};
    if (bias) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm_};
    return dn_push_pd(x, pd, STEP_MAIN, args, na, err);
}

/* matmul_rows where it applies, else nothing built (*done false). */
static pp_status try_rows(pprt_exec *x, int ai, int bi, const dnnl_memory_desc_t *bm, int ci, int yi, int64_t M,
                          int64_t K, int64_t N, bool *done, pp_err *err) {
    mark m = dn_mark_now(x);
    pp_err e = {0};
    pp_status r = matmul_rows(x, ai, bi, bm, ci, yi, M, K, N, &e);
    *done = r == PP_OK;
    if (r == PP_OK || r == PP_EUNSUP) {
        if (!*done) dn_rollback(x, m);
        return PP_OK;
    }
    *err = e;
    return r;
}

/* The weight that B is a 2-D Transpose of, or -1. A training plan reads
 * each trained weight W of a Linear both ways: X Transpose(W) in the
 * forward (torch's Linear over 3-D inputs) and dY W in the backward (or the
 * reverse, by how the model stores W). Read through the Transpose's copy, B
 * is a plain matrix made again each run (a reorder of the whole weight per
 * micro-batch) and the product runs unpacked; read from W with the strides
 * swapped, it is packed once per load and reload like any constant B
 * (ViT-B/16's training step: three of a layer's products and three
 * transposes of its weights). dn_through_views then drops the copy where
 * nothing else reads it. */
static int dn_weight_through(const pprt_exec *x, int bi) {
    if (!x->o.weight_t || bi < 0 || is_weight(x, bi) || x->tn.kind[bi] != PPRT_ACTIVATION || T(x, bi)->kind != PPRT_ACTIVATION)
        return -1;
    const int wi = x->tn.writer[bi];
    if (wi < 0) return -1;
    const pprt_node *t = &x->st->nodes[wi];
    if (t->op != PP_OP_TRANSPOSE || t->n_in < 1 || t->in[0] < 0 || !is_weight(x, t->in[0]) || !f32(x, t->in[0]) ||
        !f32(x, bi) || T(x, t->in[0])->shape.rank != 2 || T(x, bi)->shape.rank != 2)
        return -1;
    int64_t perm[PP_MAX_DIMS];
    pp_err e = {0};
    if (pp_transpose_perm(attrs_of(x, t), 2, perm, &e) != PP_OK || perm[0] != 1 || perm[1] != 0) return -1;
    return t->in[0];
}

int dn_writer_input(const pprt_exec *x, int tid, int ni, int *w) {
    if (tid < 0 || x->tn.kind[tid] != PPRT_ACTIVATION || T(x, tid)->kind != PPRT_ACTIVATION) return -1;
    *w = x->tn.writer[tid];
    if (*w < 0 || x->st->nodes[*w].n_in < 1) return -1;
    const int src = x->st->nodes[*w].in[0];
    if (src < 0 || is_weight(x, src) || x->tn.blocked[src]) return -1;
    if (!(x->tn.last[src] == *w || x->tn.last[src] >= ni)) return -1;
    return src;
}

/* dn_writer_input for PPRT_DNNL_OPERAND_T's copies: tid and its writer's input f32 */
static int through_source(const pprt_exec *x, int tid, int ni, int *w) {
    if (!x->o.operand_t) return -1;
    const int src = dn_writer_input(x, tid, ni, w);
    return src >= 0 && f32(x, src) && f32(x, tid) ? src : -1;
}

void dn_read_src(pprt_exec *x, int ni, int k, int src) {
    x->nd.through[ni] |= (unsigned char)(1u << k);
    if (x->tn.last[src] < ni) x->tn.last[src] = ni;
}

/* The activation that operand tid of a batched product (rank r, the
 * operand's dims aligned to it in d) reads through strides md, tid being a
 * Transpose of its last two axes: else -1. Torch's attention writes K^T and
 * the backward's transposed scores and values that way, each a copy of
 * [N, heads, S, S or D] per micro-batch. The activation must be plain f32,
 * in this stage, and read last by that Transpose (then nothing written in
 * place over it before the product) or by the product or later. */
static int operand_through(const pprt_exec *x, int tid, int ni, int r, const int64_t *d, dnnl_memory_desc_t *md) {
    int t;
    const int src = through_source(x, tid, ni, &t);
    if (src < 0 || x->st->nodes[t].op != PP_OP_TRANSPOSE) return -1;
    const pp_shape *s = &T(x, src)->shape;
    const int q = s->rank;
    if (q < 3 || q > r) return -1;
    int64_t perm[PP_MAX_DIMS];
    pp_err e = {0};
    if (pp_transpose_perm(attrs_of(x, &x->st->nodes[t]), q, perm, &e) != PP_OK) return -1;
    for (int i = 0; i < q - 2; i++)
        if (perm[i] != i) return -1;
    if (perm[q - 2] != q - 1 || perm[q - 1] != q - 2) return -1;
    int64_t ss[PP_MAX_DIMS], st[DNNL_MAX_NDIMS];
    ss[q - 1] = 1;
    for (int i = q - 2; i >= 0; i--) ss[i] = ss[i + 1] * s->dim[i + 1];
    for (int i = 0; i < r; i++) {
        const int k = i - (r - q); /* the operand's axis k is src's perm[k] */
        st[i] = k >= 0 ? ss[perm[k]] : ss[0] * s->dim[0];
    }
    dnnl_dims_t dd;
    for (int i = 0; i < r; i++) dd[i] = d[i];
    if (dnnl_memory_desc_init_by_strides(md, r, dd, dnnl_f32, st) != dnnl_success) return -1;
    return src;
}

static bool is_view_op(pp_op op) {
    return op == PP_OP_RESHAPE || op == PP_OP_FLATTEN || op == PP_OP_SQUEEZE || op == PP_OP_UNSQUEEZE;
}

/* The tensor that operand tid of a product (ni) is a byte-for-byte copy of,
 * by a Reshape, Flatten, Squeeze or Unsqueeze that could not alias it (views.c:
 * a received tensor, or one read again later), or -1: the product reads
 * those bytes in place through its own descriptor. A gradient graph has
 * these before each weight's gradient (a Linear's input and output
 * gradient as rows, [N, T, K] -> [N T, K]). */
static int copy_through(const pprt_exec *x, int tid, int ni) {
    int w;
    const int src = through_source(x, tid, ni, &w);
    if (src < 0 || !is_view_op(x->st->nodes[w].op) || x->nd.first[w] < 0 || x->nd.nsteps[w] == 0 ||
        T(x, src)->nbytes != T(x, tid)->nbytes)
        return -1;
    return src;
}

/* The operands of product ni read through their copies (copy_through): *a
 * and *b become the copied tensors, their through bits set, their lives
 * made to reach the product. */
static void copies_through(pprt_exec *x, int ni, int *a, int *b) {
    const int fa = copy_through(x, *a, ni), fb = copy_through(x, *b, ni);
    if (fa >= 0) *a = fa, dn_read_src(x, ni, 0, fa);
    if (fb >= 0) *b = fb, dn_read_src(x, ni, 1, fb);
}

bool dn_read_through(const pprt_exec *x, int ni) {
    const pprt_stage *st = x->st;
    const int out = st->nodes[ni].out[0];
    for (int c = ni + 1; c < st->n_nodes; c++)
        for (int k = 0; k < st->nodes[c].n_in; k++)
            if (st->nodes[c].in[k] == out && (k >= 8 || !((x->nd.through[c] >> k) & 1))) return false;
    return x->tn.cons[out] > 0;
}

/* After a build: a Transpose or a copying view every reader of which reads
 * through it (the nodes' through bits) runs as nothing. */
void dn_through_views(pprt_exec *x) {
    const pprt_stage *st = x->st;
    x->weight_views = x->operand_views = x->half_views = 0;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        const bool cast = n->op == PP_OP_CAST && dn_widens_bf16(x, n); /* its products read the bf16 (halfprod.c) */
        if ((n->op != PP_OP_TRANSPOSE && !is_view_op(n->op) && !cast) || n->n_out != 1 || n->out[0] < 0 ||
            x->nd.absorbed[ni])
            continue;
        const int out = n->out[0];
        if (x->tn.kind[out] != PPRT_ACTIVATION || st->t[out].kind != PPRT_ACTIVATION || !dn_read_through(x, ni))
            continue;
        if (x->nd.first[ni] < 0) x->nd.first[ni] = 0;
        x->nd.nsteps[ni] = 0;
        if (cast) x->half_views++;
        else if (n->in[0] >= 0 && is_weight(x, n->in[0])) x->weight_views++;
        else x->operand_views++;
    }
    /* a weight's rounding to bf16 whose every reader is a widening Cast run as nothing, each read by products
     * that read the weight in its place (halfprod.c: reordered once a step), runs as nothing too */
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if (n->op != PP_OP_CAST || n->n_in < 1 || n->in[0] < 0 || !is_weight(x, n->in[0]) || n->n_out != 1 ||
            n->out[0] < 0 || st->t[n->out[0]].dtype != PP_BF16 || x->nd.absorbed[ni] || !x->tn.wreads[n->out[0]])
            continue;
        const int out = n->out[0];
        bool idle = x->tn.kind[out] == PPRT_ACTIVATION && st->t[out].kind == PPRT_ACTIVATION && x->tn.cons[out] > 0;
        int reads = 0; /* of the widening Casts' outputs */
        for (int c = ni + 1; c < st->n_nodes && idle; c++)
            for (int k = 0; k < st->nodes[c].n_in && idle; k++) {
                if (st->nodes[c].in[k] != out) continue;
                idle = dn_widens_bf16(x, &st->nodes[c]) && x->nd.nsteps[c] == 0 && st->nodes[c].out[0] >= 0 &&
                       x->tn.kind[st->nodes[c].out[0]] == PPRT_ACTIVATION;
                reads += idle ? x->tn.cons[st->nodes[c].out[0]] : 0;
            }
        if (!idle || reads != x->tn.wreads[out]) continue;
        x->nd.nsteps[ni] = 0;
        x->half_views++;
    }
}

/* A batched product reading its transposed operands through strides
 * (operand_through), where oneDNN takes them (a JIT kernel): *done. */
static pp_status batched_through(pprt_exec *x, const pprt_node *n, const dnnl_memory_desc_t *am,
                                 const dnnl_memory_desc_t *bm, const dnnl_memory_desc_t *ym, bool *done,
                                 pp_err *err) {
    const int ni = (int)(n - x->st->nodes), ai = n->in[0], bi = n->in[1], yi = final_out(x, n), r = am->ndims;
    dnnl_memory_desc_t am2, bm2;
    const int fa = operand_through(x, ai, ni, r, am->dims, &am2), fb = operand_through(x, bi, ni, r, bm->dims, &bm2);
    *done = false;
    if (fa < 0 && fb < 0) return PP_OK;
    mark m = dn_mark_now(x);
    pp_err e = {0};
    pp_status s = matmul_common(x, fa >= 0 ? fa : ai, fa >= 0 ? &am2 : am, fb >= 0 ? fb : bi, fb >= 0 ? &bm2 : bm,
                                yi, ym, 1.0f, NULL, NULL, &e);
    if (s == PP_EUNSUP) {
        dn_rollback(x, m);
        return PP_OK;
    }
    if (s != PP_OK) {
        *err = e;
        return s;
    }
    *done = true;
    if (fa >= 0) dn_read_src(x, ni, 0, fa);
    if (fb >= 0) dn_read_src(x, ni, 1, fb);
    return PP_OK;
}

static pp_status build_matmul(pprt_exec *x, const pprt_node *n, pp_err *err) {
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int ai = n->in[0], yi = final_out(x, n);
    int bi = n->in[1];
    pp_shape as = T(x, ai)->shape, bs = T(x, bi)->shape;
    if (as.rank < 1 || bs.rank < 1) return unsup(err, "rank");
    if (as.rank == 1) as = (pp_shape){2, {1, as.dim[0]}};
    if (bs.rank == 1) bs = (pp_shape){2, {bs.dim[0], 1}};
    const int64_t M = as.dim[as.rank - 2], K = as.dim[as.rank - 1], N = bs.dim[bs.rank - 1];
    if (bs.dim[bs.rank - 2] != K) return unsup(err, "inner dims");
    dnnl_memory_desc_t am, bm, ym;
    if (bs.rank == 2) {
        /* one right-hand matrix: A's batch dims fold into its rows */
        int64_t ad[2] = {numel_of(&as) / K, K}, yd[2] = {ad[0], N};
        PP_TRY(dn_plain_md(ad, 2, &am, err));
        PP_TRY(dn_plain_md(bs.dim, 2, &bm, err));
        const int wi = dn_weight_through(x, bi);
        if (wi >= 0) { /* B[k][n] = W[n][k] */
            PP_TRY(pprt_node_weights(x->p, x->st, &x->st->nodes[x->tn.writer[bi]], x->ptr, err));
            const dnnl_dims_t bd = {K, N}, st = {1, K};
            DN(dnnl_memory_desc_init_by_strides(&bm, 2, bd, dnnl_f32, st), "matmul weights");
            bi = wi;
            x->nd.through[n - x->st->nodes] |= 2u; /* (cleared with the node on a decline) */
        }
        PP_TRY(dn_plain_md(yd, 2, &ym, err));
        bool done;
        PP_TRY(try_rows(x, ai, bi, &bm, -1, yi, ad[0], K, N, &done, err));
        if (done) return PP_OK;
    } else {
        const int r = as.rank > bs.rank ? as.rank : bs.rank;
        if (r > DNNL_MAX_NDIMS) return unsup(err, "rank");
        int64_t ad[PP_MAX_DIMS], bd[PP_MAX_DIMS], yd[PP_MAX_DIMS];
        dn_align_dims(&as, r, ad);
        dn_align_dims(&bs, r, bd);
        for (int i = 0; i < r - 2; i++) {
            if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1) return unsup(err, "batch broadcast");
            yd[i] = ad[i] > bd[i] ? ad[i] : bd[i];
        }
        yd[r - 2] = M, yd[r - 1] = N;
        PP_TRY(dn_plain_md(ad, r, &am, err));
        PP_TRY(dn_plain_md(bd, r, &bm, err));
        PP_TRY(dn_plain_md(yd, r, &ym, err));
        bool done;
        PP_TRY(batched_through(x, n, &am, &bm, &ym, &done, err));
        if (done) return PP_OK;
    }
    return matmul_common(x, ai, &am, bi, &bm, yi, &ym, 1.0f, NULL, NULL, err);
}

static pp_status build_gemm(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs at = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int ci = has_in(n, 2) ? n->in[2] : -1, yi = final_out(x, n);
    int ai = n->in[0], bi = n->in[1];
    const pp_shape *as = &T(x, ai)->shape, *bs = &T(x, bi)->shape;
    if (as->rank != 2 || bs->rank != 2) return unsup(err, "rank");
    copies_through(x, (int)(n - x->st->nodes), &ai, &bi); /* their descriptors: the same dims over the same bytes */
    pp_gemm g;
    PP_TRY(pp_gemm_attrs(at, &g, err));
    const int64_t ta = g.ta, tb = g.tb;
    const float alpha = g.alpha, beta = g.beta;
    const int64_t M = ta ? as->dim[1] : as->dim[0], K = ta ? as->dim[0] : as->dim[1];
    const int64_t N = tb ? bs->dim[0] : bs->dim[1];
    if ((tb ? bs->dim[1] : bs->dim[0]) != K) return unsup(err, "inner dims");
    dnnl_memory_desc_t am, bm, ym, cmd;
    dnnl_dims_t ad = {M, K}, as_ = {ta ? 1 : K, ta ? M : 1}, bd = {K, N}, bs_ = {tb ? 1 : N, tb ? K : 1};
    DN(dnnl_memory_desc_init_by_strides(&am, 2, ad, dnnl_f32, as_), "memory descriptor");
    DN(dnnl_memory_desc_init_by_strides(&bm, 2, bd, dnnl_f32, bs_), "memory descriptor");
    int64_t yd[2] = {M, N};
    PP_TRY(dn_plain_md(yd, 2, &ym, err));
    if (!ta && alpha == 1.0f && (ci < 0 || beta == 0.0f || beta == 1.0f)) {
        bool done;
        PP_TRY(try_rows(x, ai, bi, &bm, beta != 0.0f ? ci : -1, yi, M, K, N, &done, err));
        if (done) return PP_OK;
    }
    dnnl_memory_t cm = NULL;
    if (ci >= 0 && beta != 0.0f) {
        /* C broadcasts to [M, N] (BLAS and onnxruntime ignore it when beta is 0) */
        const pp_shape *cs = &T(x, ci)->shape;
        if (cs->rank > 2) return unsup(err, "C rank");
        int64_t cd[2] = {cs->rank >= 2 ? cs->dim[0] : 1, cs->rank >= 1 ? cs->dim[cs->rank - 1] : 1};
        if ((cd[0] != M && cd[0] != 1) || (cd[1] != N && cd[1] != 1)) return unsup(err, "C shape");
        PP_TRY(dn_plain_md(cd, 2, &cmd, err));
        if (beta == 1.0f) {
            PP_TRY(dn_plain_view(x, ci, &cmd, &cm, err));
        } else {
            if (!is_weight(x, ci)) return unsup(err, "beta with a computed C");
            dn_derived(x, "a Gemm's C times beta", ci, -1, -1, -1);
            const int64_t cn = cd[0] * cd[1];
            float *c = dn_own_alloc(x, (size_t)cn * sizeof(float));
            if (!c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            const float *src = (const float *)T(x, ci)->data;
            for (int64_t i = 0; i < cn; i++) c[i] = beta * src[i];
            PP_TRY(dn_new_mem(x, &cmd, c, &cm, err));
        }
    }
    return matmul_common(x, ai, &am, bi, &bm, yi, &ym, alpha, cm ? &cmd : NULL, cm, err);
}

const dn_family dn_matmul = {.build = build_matmul};
const dn_family dn_gemm = {.build = build_gemm};
