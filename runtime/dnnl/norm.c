/* norm.c: BatchNormalization, LayerNormalization, InstanceNormalization and
 * GroupNormalization on oneDNN's batch and layer normalization. */
#include <string.h>

#include "../../ir/op_fns.h"
#include "dnnl_exec.h"
#include "kernels/bnorm.h"
#include "kernels/gnorm.h"

/* ctx: the epsilon (a float) */
static pp_status bn_pd(pprt_exec *x, const dnnl_memory_desc_t *src, void *ctx, dnnl_primitive_desc_t *pd,
                       pp_err *err) {
    dnnl_batch_normalization_desc_t d;
    DN(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_inference, src, *(const float *)ctx,
                                                  dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift),
       "batch normalization");
    return dn_plain_pd(x, &d, "batch normalization", pd, err);
}

/* Whether pd is oneDNN's JIT batch normalization ("bnorm_jit:ISA"). */
static bool bn_jit(const_dnnl_primitive_desc_t pd) {
    const char *impl = "ref";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return strstr(impl, "jit") != NULL;
}

/* BatchNormalization: inference, global statistics. On our kernel
 * (bnorm.h), with a Relu of ppcc's chain after
 * it in the same pass (oneDNN's batch normalization takes no post-ops);
 * oneDNN's where ours cannot read the layout (bf16, other blockings). */
static void run_bnorm(void *ctx, void *const io[N_IO], int team) { pprt_bnorm_run(ctx, io[IO_SRC], io[IO_DST], team); }

static void drop_bnorm(void *ctx) { pprt_bnorm_free(ctx); }

static pp_status build_bn(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int xi = n->in[0], yi = final_out(x, n);
    const pp_shape *xs = &T(x, xi)->shape;
    if (xs->rank < 2 || xs->rank > 5) return unsup(err, "rank");
    if (pp_bn_training(a, n->n_out)) return unsup(err, "training mode (the statistics of its input)");
    for (int k = 1; k < 5; k++)
        if (T(x, n->in[k])->shape.rank != 1 || T(x, n->in[k])->shape.dim[0] != xs->dim[1])
            return unsup(err, "statistics shape");
    float eps;
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    /* our kernel reads the source in the layout it is stored in and writes
     * that layout: its bits do not depend on the layout (bnorm.h), so no
     * reorder is needed to keep them independent of the split */
    dnnl_memory_desc_t cur;
    pprt_layout bl;
    PP_TRY(dn_tensor_layout(x, xi, &cur, err));
    bool own = cur.data_type == dnnl_f32 && dn_own_layout(&cur, &bl);
    for (int k = 1; k < 5; k++) own = own && is_weight(x, n->in[k]) && x->ptr[n->in[k]];
    if (x->bld.n_fused && !(own && x->bld.n_fused == 1 && x->st->nodes[x->bld.fused[0]].op == PP_OP_RELU))
        return unsup(err, "post-ops other than one Relu after pprt's kernel");
    if (own) {
        pprt_bnorm *bn;
        PP_TRY(pprt_bnorm_create(&bl, x->ptr[n->in[1]], x->ptr[n->in[2]], x->ptr[n->in[3]], x->ptr[n->in[4]], eps,
                                 x->bld.n_fused == 1, &bn, err));
        bool taken = false;
        step st;
        pp_status r = dn_own_step(x, run_bnorm, bn, 0, drop_bnorm,
                                  pprt_bnorm_relu(bn) ? "pprt:bnorm_relu" : "pprt:bnorm", &st, err);
        if (r == PP_OK) r = dn_push_own_any(x, st, pprt_bnorm_bytes(bn), xi, &cur, yi, &cur, &taken, err);
        if (!taken) pprt_bnorm_free(bn);
        else dn_derived(x, "pprt's BatchNormalization kernel's folded scale", n->in[1], n->in[2], n->in[3], n->in[4]);
        return r;
    }
    dnnl_memory_desc_t src, cmd;
    PP_TRY(dn_tensor_plain(x, xi, &src, err));
    PP_TRY(dn_plain_md(&xs->dim[1], 1, &cmd, err));
    dnnl_primitive_desc_t pd;
    PP_TRY(bn_pd(x, &src, &eps, &pd, err));
    /* oneDNN's kernels for a plain layout (ncsp_bnorm), for blocked ones
     * (bnorm_jit) and for channels last (bnorm_tbb_jit) give other bits, and
     * which one a node gets must not depend on the split: a source stored
     * blocked or channels last in one stage is plain where it was received
     * from another (DenseNet-121 at -pp 4, after a Concat; tf_mixnet_s of the
     * timm sweep at -pp 4, channels last against blocks). So the layout is
     * chosen from the shape and the CPU alone: the one convolutions pick on
     * this CPU where a JIT kernel takes it, else the first other JIT one, else
     * plain; the source is reordered into it where stored otherwise. Not a
     * blocked layout that would pad the channels: its consumers' eltwise
     * kernels have only oneDNN's reference implementation for those (24
     * channels in blocks of 16, tests/dnnl's cnn model). */
    if (x->o.propagate) dn_fast_layout(x, &src, true, true, bn_pd, &eps, bn_jit, &pd);
    pp_status r;
    dnnl_memory_t sm, dm, m[4];
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    for (int k = 0; k < 4; k++)
        if ((r = dn_tensor_mem(x, n->in[1 + k], &cmd, &m[k], err)) != PP_OK) goto fail;
    if ((r = dn_bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (r = dn_bind_input(x, xi, src_md, SLOT_SRC, &sm, err)) != PP_OK)
        goto fail;
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, sm},       {DNNL_ARG_DST, dm},      {DNNL_ARG_SCALE, m[0]},
                               {DNNL_ARG_SHIFT, m[1]},   {DNNL_ARG_MEAN, m[2]},   {DNNL_ARG_VARIANCE, m[3]}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 6, err));
    return dn_push_post(x, &out, err);
fail:
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* oneDNN's layer normalization of x's bytes viewed plain as [rows, len]
 * into y's, with scale si and shift bi over the len elements of a row (-1:
 * none). */
static pp_status push_lnorm(pprt_exec *x, int xi, int yi, int64_t rows, int64_t len, float eps, int si, int bi,
                            pp_err *err) {
    const int64_t dims[2] = {rows, len};
    dnnl_memory_desc_t data, stat, vec;
    PP_TRY(dn_plain_md(dims, 2, &data, err));
    PP_TRY(dn_plain_md(dims, 1, &stat, err));
    PP_TRY(dn_plain_md(&dims[1], 1, &vec, err));
    dnnl_layer_normalization_desc_t d;
    DN(dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_inference, &data, &stat, eps,
                                                  (si >= 0 ? dnnl_use_scale : 0) | (bi >= 0 ? dnnl_use_shift : 0)),
       "layer normalization");
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_plain_pd(x, &d, "layer normalization", &pd, err));
    pp_status r = PP_OK;
    dnnl_exec_arg_t args[6];
    int na = 0;
    dnnl_memory_t m;
    if ((r = dn_plain_view(x, xi, &data, &m, err)) != PP_OK) goto fail;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m};
    if ((r = dn_tensor_mem(x, yi, &data, &m, err)) != PP_OK) goto fail;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m};
    if (si >= 0) {
        if ((r = dn_tensor_mem(x, si, &vec, &m, err)) != PP_OK) goto fail;
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE, m};
    }
    if (bi >= 0) {
        if ((r = dn_tensor_mem(x, bi, &vec, &m, err)) != PP_OK) goto fail;
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SHIFT, m};
    }
    /* statistics the primitive computes on the side, when it asks for memory for them */
    static const int stat_args[2] = {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    for (int k = 0; k < 2; k++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, stat_args[k]);
        if (!md || md->ndims == 0) continue;
        void *buf = dn_own_alloc(x, dnnl_memory_desc_get_size(md));
        if (!buf) {
            r = PP_FAIL(err, PP_ENOMEM, "out of memory");
            goto fail;
        }
        if ((r = dn_new_mem(x, md, buf, &m, err)) != PP_OK) goto fail;
        args[na++] = (dnnl_exec_arg_t){stat_args[k], m};
    }
    return dn_push_pd(x, pd, STEP_MAIN, args, na, err);
fail:
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* LayerNormalization: scale over the whole normalized extent. */
static pp_status build_ln(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int xi = n->in[0], si = n->in[1], bi = has_in(n, 2) ? n->in[2] : -1, yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape;
    int64_t stash, rows, len;
    int axis;
    float eps;
    PP_TRY(pp_norm_rows(a, xs, &axis, &eps, &rows, &len, err));
    PP_TRY(pp_attr_int(a, "stash_type", 1, &stash, err));
    if (stash != 1) return unsup(err, "stash_type");
    /* scale and bias must cover the normalized extent (no broadcasting) */
    if (numel_of(&T(x, si)->shape) != len || (bi >= 0 && numel_of(&T(x, bi)->shape) != len))
        return unsup(err, "broadcast scale or bias");
    return push_lnorm(x, xi, yi, rows, len, eps, si, bi, err);
}

/* Whether tid is a constant whose every element is v (a weight that
 * varies, training's, never is: the choice must not rest on its values). */
static bool all_equal(const pprt_exec *x, int tid, float v) {
    if (!is_weight(x, tid) || !f32(x, tid) || T(x, tid)->varies) return false;
    const float *p = x->ptr[tid];
    for (int64_t i = 0, n = numel_of(&T(x, tid)->shape); i < n; i++)
        if (p[i] != v) return false;
    return true;
}

/* InstanceNormalization, and GroupNormalization of num_groups G: each
 * sample's channel (group of C/G channels) normalized on oneDNN's layer
 * normalization over [N*C, S] ([N*G, C/G*S]) without scale or shift, then,
 * unless the scale is all ones and the bias all zeros (torch's GroupNorm
 * exports an InstanceNormalization so), y = y * scale + bias in place by one
 * binary primitive over [N, P, Q] with the P scales and biases broadcast
 * (P: C; GroupNormalization before opset 21: G), the bias a post-op. The
 * reference kernel normalizes in double; oneDNN in float (docs/dnnl.md). */
static pp_status build_gn(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (x->bld.n_fused) return unsup(err, "post-ops (pprt's kernel only)");
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int xi = n->in[0], si = n->in[1], bi = n->in[2], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape;
    if (xs->rank < 3) return unsup(err, "rank");
    float eps;
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    const int64_t N = xs->dim[0], C = xs->dim[1], total = numel_of(xs);
    int64_t G = C;
    if (n->op == PP_OP_GROUPNORM || n->op == PP_OP_FUSEDGN) {
        int64_t stash;
        PP_TRY(pp_attr_int(a, "num_groups", 1, &G, err));
        PP_TRY(pp_attr_int(a, "stash_type", 1, &stash, err));
        if (stash != 1) return unsup(err, "stash_type");
        if (G < 1 || C % G) return unsup(err, "num_groups");
    }
    const int64_t P = n->op == PP_OP_GROUPNORM && a.opset < 21 ? G : C;
    if (numel_of(&T(x, si)->shape) != P || numel_of(&T(x, bi)->shape) != P) return unsup(err, "scale or bias size");
    PP_TRY(push_lnorm(x, xi, yi, N * G, total / (N * G), eps, -1, -1, err));
    if (all_equal(x, si, 1.0f) && all_equal(x, bi, 0.0f)) return PP_OK;
    const int64_t dy[3] = {N, P, total / (N * P)}, dv[3] = {1, P, 1};
    dnnl_memory_desc_t ymd, vmd;
    PP_TRY(dn_plain_md(dy, 3, &ymd, err));
    PP_TRY(dn_plain_md(dv, 3, &vmd, err));
    dnnl_binary_desc_t d;
    DN(dnnl_binary_desc_init(&d, dnnl_binary_mul, &ymd, &vmd, &ymd), "binary");
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &vmd);
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_finish_pd(x, &d, attr, po, s, PP_OK, "normalization scale and bias", &pd, err));
    dnnl_memory_t ym, sm, bm;
    pp_status r;
    if ((r = dn_tensor_mem(x, yi, &ymd, &ym, err)) != PP_OK || (r = dn_tensor_mem(x, si, &vmd, &sm, err)) != PP_OK ||
        (r = dn_tensor_mem(x, bi, &vmd, &bm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC_0, ym}, {DNNL_ARG_SRC_1, sm}, {DNNL_ARG_DST, ym},
                               {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, bm}};
    return dn_push_pd(x, pd, STEP_MAIN, args, 4, err);
}

/* pp.GroupNorm on pprt's kernel (gnorm.h) in the layout its input is stored
 * in (plain where our kernel cannot read that one): its bits do not depend
 * on the layout, so none is forced on the convolutions around it. A Relu
 * or SiLU of ppcc's chain after it runs in its last pass, on the output
 * while it is in the cache (the bits of its own step). */
static void run_gnorm(void *ctx, void *const io[N_IO], int team) { pprt_gnorm_run(ctx, io[IO_SRC], io[IO_DST], team); }

static void drop_gnorm(void *ctx) { pprt_gnorm_free(ctx); }

static pp_status build_fgn(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int xi = n->in[0], si = n->in[1], bi = n->in[2], yi = final_out(x, n);
    const pp_shape *xs = &T(x, xi)->shape;
    if (xs->rank < 2 || xs->rank > 5) return unsup(err, "rank");
    int64_t G;
    float eps;
    PP_TRY(pp_attr_int(a, "num_groups", 1, &G, err));
    PP_TRY(pp_attr_float(a, "epsilon", 1e-5f, &eps, err));
    if (G < 1 || xs->dim[1] % G) return unsup(err, "num_groups");
    if (!is_weight(x, si) || !is_weight(x, bi) || !x->ptr[si] || !x->ptr[bi] ||
        numel_of(&T(x, si)->shape) != xs->dim[1] || numel_of(&T(x, bi)->shape) != xs->dim[1])
        return unsup(err, "scale or bias not a constant per channel");
    /* a bf16 source (--precision bf16) is read as it is, the output f32 in its layout */
    dnnl_memory_desc_t src, dst;
    pprt_layout l;
    PP_TRY(dn_tensor_layout(x, xi, &src, err));
    if (!dn_own_layout(&src, &l)) { /* another layout or type: plain f32 */
        PP_TRY(dn_tensor_plain(x, xi, &src, err));
        if (!dn_own_layout(&src, &l)) return unsup(err, "layout");
    }
    dst = src;
    dst.data_type = dnnl_f32;
    pprt_gnorm *gn;
    pprt_gn_act act = PPRT_GN_ACT_NONE;
    if (x->bld.n_fused == 1 && x->st->nodes[x->bld.fused[0]].op == PP_OP_RELU) act = PPRT_GN_ACT_RELU;
    else if (x->bld.n_fused == 1 && x->st->nodes[x->bld.fused[0]].op == PP_OP_SILU && x->own_silu)
        act = PPRT_GN_ACT_SILU;
    else if (x->bld.n_fused) return unsup(err, "post-ops other than one Relu or SiLU after pprt's kernel");
    PP_TRY(pprt_gnorm_create(&l, G, eps, x->ptr[si], x->ptr[bi], act, src.data_type == dnnl_bf16, &gn, err));
    bool taken = false;
    step st;
    pp_status r = dn_own_step(x, run_gnorm, gn, 0, drop_gnorm,
                              pprt_gnorm_act(gn) == PPRT_GN_ACT_RELU   ? "pprt:gnorm_relu"
                              : pprt_gnorm_act(gn) == PPRT_GN_ACT_SILU ? "pprt:gnorm_silu"
                                                        : "pprt:gnorm",
                              &st, err);
    if (r == PP_OK) r = dn_push_own_any(x, st, pprt_gnorm_bytes(gn), xi, &src, yi, &dst, &taken, err);
    if (!taken) pprt_gnorm_free(gn);
    else dn_derived(x, "pprt's GroupNormalization kernel's scale and bias", si, bi, -1, -1);
    return r;
}

/* Whether build_bn may take node n as far as its outputs go: none but Y
 * read (a training-mode one whose running statistics are read runs on the
 * reference kernel). Its input is laid out for it only then, so declining
 * it does not start the build over: ResNet-18's training plan, 20 such
 * nodes, rebuilt its forward stage 20 times, re-reordering every weight
 * up to the declined node each time (8 of the step's 13 CPU-seconds in
 * oneDNN's Winograd weight reorders, AMD Zen 4). */
static bool bn_any(const pprt_exec *x, const pprt_node *n) {
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0 && !unused(x, n->out[k])) return false;
    return true;
}

/* BatchNormalization and pp.GroupNorm read their input 0 in any layout; LayerNormalization plain */
const dn_family dn_batchnorm = {.build = build_bn, .any_in = 1u << 0, .any_if = bn_any};
const dn_family dn_layernorm = {.build = build_ln};
const dn_family dn_groupnorm = {.build = build_gn};
const dn_family dn_fusedgn = {.build = build_fgn, .any_in = 1u << 0};
