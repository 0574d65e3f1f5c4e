/* conv.c: Conv and pp.FusedConv on oneDNN's convolution (1-3 spatial dims,
 * groups, dilations): bias; the residual Z by a sum post-op (or a binary
 * add, PPRT_DNNL_RESIDUAL=binary); relu / clip; the nodes after it as
 * post-ops (postops.c).
 *
 * Winograd. An f32 2-D 3x3 stride-1 convolution without groups or dilation
 * uses oneDNN's Winograd kernel where it has one (F(2x2,3x3) or F(4x4,3x3),
 * AVX-512; in a channel-blocked layout, so with a reorder in and out): on
 * ResNet-50's shapes 1.2-1.8x faster than the direct kernel, within the same
 * tolerances (PPRT_DNNL_WINO=0: direct only). Where oneDNN has none (AVX2)
 * and the node absorbs nothing, our own kernel runs it (wino.h: nChw8c in
 * and out, F(4x4,3x3) or F(2x2,3x3) per node; PPRT_DNNL_WINO_TILE=2 or 4
 * forces one), 2-3x faster than oneDNN's direct AVX2 kernel. The choice
 * depends on the node alone, so outputs stay bit-identical whatever the
 * split and thread count. Not in a training plan (conv_own). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/geom.h"
#include "../isa.h"
#include "dnnl_exec.h"
#include "kernels/wino.h"
#include "kernels/gconv.h"
#include "kernels/pwconv.h"

/* A convolution primitive descriptor: algorithm alg reading src, over the
 * weights, bias (NULL: none) and destination descriptors and g's geometry. */
static dnnl_status_t conv_pd(dnnl_primitive_desc_t *pd, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *src,
                             const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *dst,
                             const pp_geom *g, const_dnnl_primitive_attr_t attr, dnnl_engine_t eng) {
    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < g->nsp; i++) {
        strides[i] = g->stride[i];
        dil[i] = g->dil[i] - 1;
        pl[i] = g->pad0[i];
        pr[i] = g->pad1[i];
    }
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, src, w, b, dst,
                                                                 strides, dil, pl, pr);
    *pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &cd, attr, eng, NULL);
    if (s != dnnl_success) *pd = NULL;
    return s;
}

/* nChw8c (oneDNN's aBcd8b) over 4-D dims: what oneDNN's AVX2 kernels keep
 * between nodes, and what our Winograd kernel reads and writes. */
static pp_status blk8_md(const int64_t *dims, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    DN(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_aBcd8b), "memory descriptor");
    return PP_OK;
}

/* Node n (a 3x3 stride-1 2-D convolution, f32, no groups or dilation, with
 * constant weights and bias, absorbing no other node) as a step of our own
 * Winograd kernel (wino.h) over nChw8c source and destination, for a CPU
 * where oneDNN has no Winograd kernel. Z (or -1) is the residual, read as it
 * is when stored as nChw8c, else reordered into a shared buffer first (as
 * the source is); the output never takes over Z's bytes. */
/* A Winograd step: the kernel and the clamp after bias and residual. */
typedef struct wino_step {
    pprt_wino *wn;
    float lo, hi;
} wino_step;

static void run_wino(void *ctx, void *const io[N_IO], int team) {
    const wino_step *w = ctx;
    pprt_wino_run(w->wn, io[IO_SRC], io[IO_DST], io[IO_OTHER], w->lo, w->hi, io[IO_SCRATCH], team);
}

static void drop_wino(void *ctx) { pprt_wino_free(((wino_step *)ctx)->wn); }

static pp_status build_wino(pprt_exec *x, const pprt_wino_shape *sh, int xi, int wi, int bi, int zi, int yi,
                            float lo, float hi, pp_err *err) {
    dnnl_memory_desc_t xmd, ymd, scmd;
    PP_TRY(blk8_md(T(x, xi)->shape.dim, &xmd, err));
    PP_TRY(blk8_md(T(x, yi)->shape.dim, &ymd, err));
    pprt_wino *wn;
    PP_TRY(pprt_wino_create(sh, x->ptr[wi], bi >= 0 ? x->ptr[bi] : NULL, x->stage_threads, &wn, err));
    const dnnl_dims_t scb = {(dnnl_dim_t)pprt_wino_scratch_bytes(wn)};
    dnnl_memory_t sm, dm, scm, zm = NULL;
    post out;
    pp_status r;
    dnnl_status_t ds = dnnl_memory_desc_init_by_tag(&scmd, 1, scb, dnnl_u8, dnnl_a);
    if (ds != dnnl_success) r = dn_fail(err, "memory descriptor", ds);
    else if ((r = dn_bind_input(x, xi, &xmd, SLOT_SRC, &sm, err)) == PP_OK &&
             (r = dn_bind_output(x, yi, &ymd, &dm, &out, err)) == PP_OK &&
             (r = dn_slot_mem(x, &scmd, SLOT_SCRATCH, &scm, err)) == PP_OK && zi >= 0)
        r = dn_bind_input(x, zi, &ymd, SLOT_WEI, &zm, err); /* SLOT_WEI: the weights here are constant */
    step s;
    const wino_step ws = {wn, lo, hi};
    if (r == PP_OK &&
        (r = dn_own_step(x, run_wino, &ws, sizeof ws, drop_wino,
                         pprt_wino_tile(wn) == 2 ? "pprt:wino_2x3:avx2" : "pprt:wino_4x3:avx2", &s, err)) == PP_OK) {
        s.nargs = 3;
        s.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
        s.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
        s.args[2] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scm};
        if (zm) s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, zm};
        r = dn_push_own(x, s, err);
    }
    if (r != PP_OK) {
        pprt_wino_free(wn);
        return r;
    }
    x->bytes.weights += pprt_wino_weight_bytes(wn);
    x->bytes.owned += pprt_wino_weight_bytes(wn);
    dn_derived(x, "pprt's Winograd kernel's transformed weights", wi, bi, -1, -1);
    return dn_push_post(x, &out, err);
}

/* A 4-D descriptor of type dt over dims: channels last where vec is the
 * channel count, else blocked on vec (8 or 16) channels. */
static pp_status own_md(const int64_t *dims, int64_t vec, dnnl_data_type_t dt, dnnl_memory_desc_t *md, pp_err *err) {
    const dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    const dnnl_format_tag_t tag = vec == dims[1] ? dnnl_acdb : vec == 16 ? dnnl_aBcd16b : dnnl_aBcd8b;
    DN(dnnl_memory_desc_init_by_tag(md, 4, d, dt, tag), "memory descriptor");
    return PP_OK;
}

/* Convolutions of up to this many channels a group run on our kernel
 * (measured at 2, 4 and 8 a group: design-notes.md, "Convolutions of few
 * channels a group"). */
#define GCONV_MAX_PER_GROUP 4

/* Node n (2-D, f32, few channels a group: gs; constant weights and bias,
 * no residual, absorbing nothing) as a step of our kernel (gconv.h). It
 * reads the source in the layout it is stored in where the kernel takes
 * that (channels last or blocked on a multiple of its lanes; its bits are
 * the same in every layout and width), else channels last (blocked on 8
 * where 8 do not divide the channels), and writes the same kind of layout,
 * f32. A bf16 source (--precision bf16) is read as it is. */
static void run_gconv(void *ctx, void *const io[N_IO], int team) {
    pprt_gconv_run(ctx, io[IO_SRC], io[IO_DST], team);
}

static void drop_gconv(void *ctx) { pprt_gconv_free(ctx); }

static pp_status build_gconv(pprt_exec *x, const pprt_gconv_shape *gs, int xi, int wi, int bi, int yi, float lo,
                             float hi, pp_err *err) {
    /* 8 lanes where 16 do not divide the channels: channels last then, as
     * the next node most likely wants (a padded blocked layout left an
     * eltwise after it on oneDNN's reference kernel); the same bits */
    const int lanes = gs->C % pprt_gconv_lanes() ? 8 : pprt_gconv_lanes();
    dnnl_memory_desc_t src, dst;
    pprt_layout li, lo_;
    PP_TRY(dn_tensor_layout(x, xi, &src, err));
    const dnnl_data_type_t dt = src.data_type;
    if (dt != dnnl_f32 && dt != dnnl_bf16) return unsup(err, "source type");
    int64_t vec;
    if (dn_own_layout(&src, &li) && pprt_gconv_layout_ok(&li, lanes)) vec = li.vec;
    else {
        vec = gs->C % lanes == 0 ? gs->C : lanes;
        PP_TRY(own_md(T(x, xi)->shape.dim, vec, dt, &src, err));
        if (!dn_own_layout(&src, &li)) return unsup(err, "layout");
    }
    PP_TRY(own_md(T(x, yi)->shape.dim, vec, dnnl_f32, &dst, err));
    if (!dn_own_layout(&dst, &lo_)) return unsup(err, "layout");
    pprt_gconv *gc;
    PP_TRY(pprt_gconv_create(gs, &li, &lo_, x->ptr[wi], bi >= 0 ? x->ptr[bi] : NULL, lo, hi, dt == dnnl_bf16, lanes,
                             &gc, err));
    bool taken = false;
    step st;
    const int w = pprt_gconv_width(gc);
    pp_status r = dn_own_step(x, run_gconv, gc, 0, drop_gconv,
                              w == 16 ? "pprt:gconv:avx512" : w == 8 ? "pprt:gconv:avx2" : "pprt:gconv", &st, err);
    if (r == PP_OK) r = dn_push_own_any(x, st, pprt_gconv_bytes(gc), xi, &src, yi, &dst, &taken, err);
    if (!taken) pprt_gconv_free(gc);
    else x->bytes.weights += pprt_gconv_bytes(gc), dn_derived(x, "pprt's grouped convolution's packed weights", wi, bi,
                                                               -1, -1);
    return r;
}

/* Whether node n (bf16 run) is a 1x1 convolution pwconv.h takes: one
 * group, stride and dilation 1, no padding, constant weights and bias,
 * channel counts it fits, and no activation of its own; and one it does
 * more for than oneDNN: a residual it adds, a SiLU or Sigmoid right after
 * it that it absorbs (postops.c), or a Mul right before it whose scaling it
 * may take over (dn_pw_pre_scale); a bare 1x1 convolution, or one with a
 * Relu after it, stays on oneDNN. Depends on the plan's graph around the
 * node alone, so the same nodes take it whatever the split. */
bool dn_pw_takes(const pprt_exec *x, const pprt_node *n) {
    if (!x->bf16 || (n->op != PP_OP_CONV && n->op != PP_OP_FUSEDCONV) || !pprt_pw_cpu()) return false;
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || !is_weight(x, n->in[1]) ||
        (has_in(n, 2) && !is_weight(x, n->in[2])))
        return false;
    const pp_attrs a = attrs_of(x, n);
    const pp_shape *xs = &T(x, n->in[0])->shape, *ws = &T(x, n->in[1])->shape, *ys = &T(x, n->out[0])->shape;
    if (xs->rank != 4 || ws->rank != 4 || ys->rank != 4 || ws->dim[2] != 1 || ws->dim[3] != 1) return false;
    int64_t group = 1;
    const char *act = "";
    if (pp_attr_int(a, "group", 1, &group, NULL) != PP_OK || group != 1) return false;
    if (n->op == PP_OP_FUSEDCONV && (pp_attr_string(a, "activation", "", &act, NULL) != PP_OK || strcmp(act, "")))
        return false;
    pp_geom g;
    if (pp_geom_make(a, xs, &ws->dim[2], false, &g, NULL) != PP_OK) return false;
    for (int i = 0; i < 2; i++)
        if (g.stride[i] != 1 || g.dil[i] != 1 || g.pad0[i] || g.pad1[i] || g.out[i] != xs->dim[2 + i]) return false;
    const pprt_pw_shape sh = {.rows = xs->dim[0] * xs->dim[2] * xs->dim[3], .K = xs->dim[1], .N = ws->dim[0]};
    const pp_shape want = {4, {xs->dim[0], ws->dim[0], xs->dim[2], xs->dim[3]}};
    if (ws->dim[1] != xs->dim[1] || !pp_shape_eq(ys, &want) || !pprt_pw_fits(&sh)) return false;
    const int ni = (int)(n - x->st->nodes);
    const pprt_node *next = ni + 1 < x->st->n_nodes ? &x->st->nodes[ni + 1] : NULL;
    const pprt_node *prev = ni > 0 ? &x->st->nodes[ni - 1] : NULL;
    return has_in(n, 3) || /* the rest are fusions, which PPRT_DNNL_FUSE=0 turns off */
           (x->o.fuse && next && next->chain && (next->op == PP_OP_SILU || next->op == PP_OP_SIGMOID) &&
            next->in[0] == n->out[0]) ||
           (x->o.fuse && prev && prev->op == PP_OP_MUL && prev->n_out == 1 && prev->out[0] == n->in[0]);
}

bool dn_pw_pre_scale(pprt_exec *x, const pprt_node *n, int xi, int si, const dnnl_memory_desc_t *xmd,
                     const dnnl_memory_desc_t *k_md, int64_t k_stride) {
    const int ni = (int)(n - x->st->nodes), yi = n->out[0];
    if (!x->o.fuse || ni + 1 >= x->st->n_nodes) return false; /* a fusion: PPRT_DNNL_FUSE=0 leaves it */
    const pprt_node *c = &x->st->nodes[ni + 1];
    dnnl_memory_desc_t cl;
    /* the convolution right after it in the stage, its only reader (the plan's kind: a sent tensor must
     * be written), reading it as source only; the bits are those of the Mul's output either way */
    if (!x->nd.on_dnnl[ni + 1] || !dn_pw_takes(x, c) || c->in[0] != yi || c->in[1] == yi ||
        (has_in(c, 2) && c->in[2] == yi) || (has_in(c, 3) && c->in[3] == yi) || T(x, yi)->kind != PPRT_ACTIVATION ||
        x->tn.cons[yi] != 1)
        return false;
    const pp_shape *ys = &T(x, yi)->shape;
    if (own_md(ys->dim, ys->dim[1], dnnl_bf16, &cl, NULL) != PP_OK || !dnnl_memory_desc_equal(xmd, &cl) ||
        (k_md->data_type != dnnl_bf16 && k_md->data_type != dnnl_f32))
        return false;
    x->nd.pre[ni + 1] = (dn_pre){xi, si, *k_md, k_md->data_type == dnnl_bf16, k_stride};
    x->tn.ghost[yi] = true;
    x->nd.absorbed[ni] = true;
    /* x and k live until the convolution reads them */
    if (x->tn.kind[xi] == PPRT_ACTIVATION && x->tn.last[xi] < ni + 1) x->tn.last[xi] = ni + 1;
    if (x->tn.kind[si] == PPRT_ACTIVATION && x->tn.last[si] < ni + 1) x->tn.last[si] = ni + 1;
    return true;
}

/* Node n (dn_pw_takes) as a step of pwconv.h's kernel, channels-last bf16
 * source, destination and residual (zi, or -1; the output takes over its
 * bytes where it dies here), the SiLU or Sigmoid it absorbed, if any, and
 * the Mul before it whose scaling it took over (x->nd.pre), if any. */
static void run_pw(void *ctx, void *const io[N_IO], int team) {
    pprt_pw_run(ctx, io[IO_SRC], io[IO_DST], io[IO_SRC_2], io[IO_OTHER], team);
}

static void drop_pw(void *ctx) { pprt_pw_free(ctx); }

static pp_status build_pw(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const dn_pre *pre = &x->nd.pre[n - x->st->nodes];
    const int xi = pre->xi >= 0 ? pre->xi : n->in[0], wi = n->in[1], yi = final_out(x, n);
    const int bi = has_in(n, 2) ? n->in[2] : -1, zi = has_in(n, 3) ? n->in[3] : -1;
    const pp_op after = x->bld.n_fused ? x->st->nodes[x->bld.fused[0]].op : PP_OP_CONV;
    if (x->bld.n_fused > 1 || (x->bld.n_fused == 1 && after != PP_OP_SILU && after != PP_OP_SIGMOID))
        return unsup(err, "pprt's pointwise kernel absorbs one SiLU or Sigmoid only");
    if (x->bld.n_fused && zi >= 0)
        return unsup(err, "pprt's pointwise kernel takes an activation or a residual, not both");
    const pp_shape *xs = &T(x, xi)->shape, *ys = &T(x, yi)->shape;
    if (zi >= 0 && !pp_shape_eq(&T(x, zi)->shape, ys)) return unsup(err, "residual shape");
    const pprt_pw_shape sh = {.rows = xs->dim[0] * xs->dim[2] * xs->dim[3],
                              .K = xs->dim[1],
                              .N = ys->dim[1],
                              .act = !x->bld.n_fused          ? PPRT_PW_NONE
                                     : after == PP_OP_SILU ? PPRT_PW_SILU
                                                           : PPRT_PW_SIGMOID,
                              .scale = pre->xi >= 0,
                              .k_bf16 = pre->k_bf16,
                              .rows_per_sample = xs->dim[2] * xs->dim[3],
                              .k_stride = pre->k_stride};
    dnnl_memory_desc_t xmd, ymd;
    PP_TRY(own_md(xs->dim, xs->dim[1], dnnl_bf16, &xmd, err));
    PP_TRY(own_md(ys->dim, ys->dim[1], dnnl_bf16, &ymd, err));
    pprt_pw *pw;
    PP_TRY(pprt_pw_create(&sh, x->ptr[wi], bi >= 0 ? x->ptr[bi] : NULL, x->stage_threads, &pw, err));
    dnnl_memory_t sm, dm, zm = NULL, km = NULL;
    post out;
    pp_status r = PP_OK;
    if (pre->xi >= 0) {
        dnnl_memory_desc_t kmd = pre->k_md;
        r = is_weight(x, pre->si) ? dn_weight_mem(x, pre->si, &kmd, &kmd, &km, err)
                                  : dn_bind_view(x, pre->si, &kmd, &kmd, SLOT_OP0, &km, err);
    }
    if (r == PP_OK && zi >= 0 && zi != xi) {
        dnnl_memory_desc_t zl;
        if ((r = dn_tensor_layout(x, zi, &zl, err)) == PP_OK) r = dn_write_in_place(x, n, zi, &zl, yi, &ymd, err);
    }
    if (r == PP_OK && (r = dn_bind_input(x, xi, &xmd, SLOT_SRC, &sm, err)) == PP_OK &&
        (r = dn_bind_output(x, yi, &ymd, &dm, &out, err)) == PP_OK && zi >= 0)
        r = dn_bind_input(x, zi, &ymd, SLOT_WEI, &zm, err); /* SLOT_WEI: the weights are the kernel's own */
    step s;
    const pprt_pw_act act = pprt_pw_act_of(pw);
    if (r == PP_OK && (r = dn_own_step(x, run_pw, pw, 0, drop_pw,
                                       act == PPRT_PW_SILU      ? "pprt:pw_silu:amx"
                                       : act == PPRT_PW_SIGMOID ? "pprt:pw_sigmoid:amx"
                                                                : "pprt:pw:amx",
                                       &s, err)) == PP_OK) {
        s.nargs = 2;
        s.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
        s.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
        if (zm) s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, zm};
        if (km) s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_2, km};
        r = dn_push_own(x, s, err);
    }
    if (r != PP_OK) {
        pprt_pw_free(pw);
        return r;
    }
    x->bytes.weights += pprt_pw_bytes(pw);
    x->bytes.owned += pprt_pw_bytes(pw);
    dn_derived(x, "pprt's pointwise convolution's packed weights", wi, bi, -1, -1);
    return dn_push_post(x, &out, err);
}

/* What a convolution adds after its sum of products: the residual Z
 * (zi >= 0; by a sum post-op, else a binary add reading z_md), NaN-keeping
 * relu post-ops, then the absorbed nodes (postops.c). */
typedef struct conv_ops {
    bool zsum;
    int zi;
    const dnnl_memory_desc_t *z_md;
    bool relu;
    const dnnl_memory_desc_t *dst_any;
    bool fast_clamp; /* oneDNN's relu (lo 0, hi inf) or clip post-op to [lo, hi]: a guard's fast primitive */
    float lo, hi;
} conv_ops;

/* The primitives a convolution may take: Winograd where the shape allows,
 * else direct. */
typedef struct conv_cands {
    bool wino_shape;
    int xi;
    const dnnl_memory_desc_t *src, *w, *bias, *dst;
    const pp_geom *g;
} conv_cands;

/* The attributes of ops: their post-ops, the memories of their operands to
 * args (args NULL: the probe of dn_append_fused, no memories). */
static pp_status conv_attr(pprt_exec *x, const conv_ops *c, const dnnl_memory_desc_t *whole_as,
                           dnnl_exec_arg_t *args, int *na, dnnl_primitive_attr_t *out, pp_err *err) {
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_post_ops_t po = NULL;
    int idx = 0;
    dnnl_memory_t zm;
    pp_status r = PP_OK;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && c->zsum) s = dnnl_post_ops_append_sum(po, 1.0f), idx++;
    if (s == dnnl_success && c->zi >= 0 && !c->zsum) {
        s = dnnl_post_ops_append_binary(po, dnnl_binary_add, c->z_md), idx++;
        if (s == dnnl_success && args && (r = dn_tensor_mem(x, c->zi, c->z_md, &zm, err)) == PP_OK)
            args[(*na)++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, zm};
    }
    if (s == dnnl_success && r == PP_OK && c->relu) s = dn_append_relu(po, &idx);
    if (s == dnnl_success && r == PP_OK && c->fast_clamp)
        s = c->lo == 0 && isinf(c->hi) ? dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0)
                                       : dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, c->lo, c->hi);
    if (s == dnnl_success && r == PP_OK) r = dn_append_fused(x, po, idx, c->dst_any, NULL, whole_as, args, na, err);
    if (s == dnnl_success && r == PP_OK) s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (po) dnnl_post_ops_destroy(po);
    if (r == PP_OK && s != dnnl_success) r = dn_fail(err, "post-ops", s);
    if (r != PP_OK) {
        dnnl_primitive_attr_destroy(attr);
        return r;
    }
    *out = attr;
    return PP_OK;
}

/* Whether pd runs oneDNN's gemm (im2col) or reference convolution. */
static bool slow_kernel(const_dnnl_primitive_desc_t pd) {
    const char *impl = "ref";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success) return true;
    return !strncmp(impl, "ref", 3) || !strncmp(impl, "gemm", 4) || strstr(impl, ":gemm") != NULL;
}

/* The convolution's primitive descriptor with ops' attributes (conv_attr's
 * arguments). */
static pp_status conv_choose(pprt_exec *x, const conv_cands *k, const conv_ops *ops,
                             const dnnl_memory_desc_t *whole_as, dnnl_exec_arg_t *args, int *na,
                             dnnl_primitive_desc_t *out, pp_err *err) {
    dnnl_primitive_attr_t attr;
    PP_TRY(conv_attr(x, ops, whole_as, args, na, &attr, err));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_success;
    if (k->wino_shape) /* none where oneDNN has no such kernel: direct below */
        conv_pd(&pd, dnnl_convolution_winograd, k->src, k->w, k->bias, k->dst, k->g, attr, x->eng);
    if (!pd) s = conv_pd(&pd, dnnl_convolution_direct, k->src, k->w, k->bias, k->dst, k->g, attr, x->eng);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "convolution");
    *out = pd;
    return PP_OK;
}

/* The fast primitive of a guarded Relu or Clip (dnnl_exec.h, GUARD_*): the
 * convolution of exact (its primitive without the clamp) with oneDNN's relu
 * or clip post-op instead, or NULL where it is not to be used: the guard off,
 * another kernel or other layouts than exact's (the two share their
 * memories), or a reference or gemm kernel (their post-ops are C code whose
 * comparisons need not raise the invalid flag; the JIT ones compute max
 * with vmaxps, which does). With a residual the exact path cannot follow
 * the fast one (a sum would add it twice): GUARD_FAST_RUN, the micro-batch
 * runs again instead. */
static dnnl_primitive_desc_t guard_fast(pprt_exec *x, const conv_cands *k, const conv_ops *ops,
                                        const_dnnl_primitive_desc_t exact, float lo, float hi) {
    if (!pprt_fpguard_built() || ops->relu || x->bld.n_fused) return NULL;
    conv_ops fo = *ops;
    fo.fast_clamp = true, fo.lo = lo, fo.hi = hi;
    pp_err e = {0};
    int na = 0;
    dnnl_primitive_desc_t pd = NULL;
    if (conv_choose(x, k, &fo, NULL, NULL, &na, &pd, &e) != PP_OK) return NULL;
    const char *a = "", *b = "";
    bool same = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &a) == dnnl_success &&
                dnnl_primitive_desc_query(exact, dnnl_query_impl_info_str, 0, &b) == dnnl_success &&
                !strcmp(a, b) && !slow_kernel(pd);
    static const dnnl_query_t q[] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    for (int i = 0; same && i < 3; i++)
        same = dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, q[i], 0),
                                      dnnl_primitive_desc_query_md(exact, q[i], 0));
    if (!same) {
        dnnl_primitive_desc_destroy(pd);
        return NULL;
    }
    return pd;
}

/* The convolution's primitive descriptor alone, absorbing none of the nodes
 * after it (NULL where oneDNN has none). */
static dnnl_primitive_desc_t bare_pd(pprt_exec *x, const conv_cands *k, const conv_ops *ops) {
    const int n_fused = x->bld.n_fused, n_whole = x->bld.n_whole;
    conv_ops o = *ops;
    o.relu = false; /* (relu is a post-op only beside absorbed nodes) */
    x->bld.n_fused = 0;
    pp_err e = {0};
    int na = 0;
    dnnl_primitive_desc_t pd = NULL;
    if (conv_choose(x, k, &o, NULL, NULL, &na, &pd, &e) != PP_OK) pd = NULL;
    x->bld.n_fused = n_fused, x->bld.n_whole = n_whole;
    return pd;
}

/* Whether the convolution alone gets a gemm or reference kernel too. Some
 * post-ops take the JIT kernels out of the running: PiT's patch embedding
 * (16x16, stride 8, 3 to 64 channels) with its position embedding [1, 64,
 * 27, 27] added as a binary post-op ran as a gemm convolution over plain
 * tensors, 13-40 ms a micro-batch of 8, against 2.7 ms for the brgemm
 * convolution and 0.1 ms for the Add apart (AMD Zen 4). Then the node
 * absorbs nothing (build_all builds it again). */
static bool bare_is_slow(pprt_exec *x, const conv_cands *k, const conv_ops *ops) {
    dnnl_primitive_desc_t pd = bare_pd(x, k, ops);
    const bool slow = !pd || slow_kernel(pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return slow;
}

/* ---- which convolutions may sit in channel blocks (PPRT_DNNL_CONV_BLOCKED) -------------------- */

/* The channels of a block of the layout oneDNN's kernels keep on this CPU
 * (nChw16c on AVX-512, nChw8c below). */
static int64_t conv_block(void) { return pprt_cpu_isa() >= PPRT_ISA_AVX512 ? 16 : 8; }

/* Ops that run in whatever layout their input is stored in (or absorb into
 * a convolution): their tensors may stay in channel blocks. */
static bool any_layout_op(const pprt_plan *p, const pprt_node *n) {
    if (n->op == PP_OP_CONCAT) { /* along the channels of 4-D tensors: oneDNN's concat, inputs as stored */
        int64_t axis = 0;
        return pp_attr_int((pp_attrs){n->attrs, n->n_attrs, p->opset}, "axis", 0, &axis, NULL) == PP_OK &&
               (axis == 1 || axis == -3);
    }
    switch (n->op) {
    case PP_OP_CONV: case PP_OP_FUSEDCONV: case PP_OP_RELU: case PP_OP_LEAKYRELU: case PP_OP_CLIP:
    case PP_OP_SIGMOID: case PP_OP_TANH: case PP_OP_SILU: case PP_OP_HARDSWISH: case PP_OP_HARDSIGMOID:
    case PP_OP_ELU: case PP_OP_ADD: case PP_OP_MUL: case PP_OP_SUB: case PP_OP_DIV: case PP_OP_BATCHNORM:
    case PP_OP_MAXPOOL: case PP_OP_AVGPOOL: case PP_OP_GLOBALAVGPOOL: case PP_OP_GLOBALMAXPOOL:
    case PP_OP_FUSEDGN: case PP_OP_IDENTITY:
        return true;
    default: return false;
    }
}

typedef struct blk_ref {
    const char *name;
    int gid;
} blk_ref;

static int blk_ref_cmp(const void *a, const void *b) {
    const blk_ref *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->gid > y->gid) - (x->gid < y->gid);
}

static int uf_find(int *par, int i) {
    while (par[i] != i) i = par[i] = par[par[i]];
    return i;
}

/* Over the whole plan (every stage, a zb-h1 plan's W stages too: a tensor
 * crossing a cut is one name in both), the nodes joined by the activation tensors between them; a group
 * that any other op touches (a Transpose to channels-last, a MatMul, a
 * LayerNormalization, a Reshape...) keeps oneDNN's own choices. A global
 * pool's output does not join its group (a [N, C, 1, 1] tensor's layout
 * costs nothing to convert). */
pp_status dn_conv_blocked_nodes(const pprt_plan *p, const pprt_stage *st, bool *out, pp_err *err) {
    int total = 0, refs = 0, base = 0;
    for (int s = 0; s < p->n_stages + p->n_wstages; s++) {
        if (p->stages[s].index == st->index) base = total;
        total += p->stages[s].n_nodes;
        for (int i = 0; i < p->stages[s].n_nodes; i++) refs += p->stages[s].nodes[i].n_in + p->stages[s].nodes[i].n_out;
    }
    const int64_t blk = conv_block();
    int *par = malloc(pp_count(total) * sizeof *par);
    bool *bad = calloc(pp_count(total), sizeof *bad), *neutral = calloc(pp_count(total), sizeof *neutral);
    blk_ref *r = malloc(pp_count(refs) * sizeof *r);
    if (!par || !bad || !neutral || !r) {
        free(par), free(bad), free(neutral), free(r);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    int nr = 0, g = 0;
    for (int s = 0; s < p->n_stages + p->n_wstages; s++) {
        const pprt_stage *q = &p->stages[s];
        for (int i = 0; i < q->n_nodes; i++, g++) {
            const pprt_node *n = &q->nodes[i];
            par[g] = g;
            bad[g] = !any_layout_op(p, n);
            if ((n->op == PP_OP_CONV || n->op == PP_OP_FUSEDCONV) && n->n_in > 1 && n->in[0] >= 0 && n->in[1] >= 0) {
                /* a convolution that cannot take whole channel blocks (other ranks, channels that do not
                 * fill blocks) keeps its group on oneDNN's choices, unless it runs over a 1x1 image (a
                 * squeeze-excite's, whose tensors cost nothing to reorder): that one keeps its own */
                const pp_shape *xs = &q->t[n->in[0]].shape, *ws = &q->t[n->in[1]].shape;
                const bool one = xs->rank == 4 && xs->dim[2] == 1 && xs->dim[3] == 1;
                const int64_t C = xs->rank > 1 ? xs->dim[1] : 0, OC = ws->rank > 0 ? ws->dim[0] : 0;
                const bool unfit = xs->rank != 4 || OC % blk != 0 || (C >= blk && C % blk != 0);
                bad[g] = unfit && !one;
                neutral[g] = unfit && one;
            }
            for (int k = 0; k < n->n_in + n->n_out; k++) {
                const int t = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
                if (t < 0 || q->t[t].kind == PPRT_WEIGHT) continue;
                if (k >= n->n_in && (n->op == PP_OP_GLOBALAVGPOOL || n->op == PP_OP_GLOBALMAXPOOL)) continue;
                r[nr++] = (blk_ref){q->t[t].name, g};
            }
        }
    }
    qsort(r, pp_count(nr), sizeof *r, blk_ref_cmp);
    for (int i = 0; i < nr;) {
        int j = i + 1;
        while (j < nr && !strcmp(r[j].name, r[i].name)) j++;
        for (int k = i + 1; k < j; k++) {
            const int a = uf_find(par, r[i].gid), b = uf_find(par, r[k].gid);
            if (a != b) par[b] = a, bad[a] = bad[a] || bad[b];
        }
        i = j;
    }
    for (int i = 0; i < st->n_nodes; i++) {
        const pprt_node *n = &st->nodes[i];
        out[i] = (n->op == PP_OP_CONV || n->op == PP_OP_FUSEDCONV) && !neutral[base + i] &&
                 !bad[uf_find(par, base + i)];
    }
    free(par), free(bad), free(neutral), free(r);
    return PP_OK;
}

static bool is_wino(const_dnnl_primitive_desc_t pd) {
    const char *impl = "";
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && strstr(impl, "wino");
}

/* Whether the convolution alone, absorbing none of the nodes after it, gets
 * oneDNN's Winograd kernel, which post-ops such as a residual binary or a
 * leaky relu take away: CSPDarkNet-53's 3x3 convolutions with their
 * LeakyRelu and residual Add ran 2.5x slower as a direct kernel with the
 * post-ops than by Winograd with the two nodes apart (AMD Zen 4). */
static bool bare_is_wino(pprt_exec *x, const conv_cands *k, const conv_ops *ops) {
    dnnl_primitive_desc_t pd = bare_pd(x, k, ops);
    const bool wino = pd && is_wino(pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return wino;
}

/* A convolution node as build_conv reads it, and the descriptors of its
 * tensors (whose layouts the primitive picks, or plain ones). */
typedef struct conv_node {
    int xi, wi, bi, zi, yi, nd;
    const pp_shape *xs, *ws, *ys;
    int64_t group, C, OC;
    pp_geom g;
    bool zsum;            /* the residual by a sum post-op (else by a binary add post-op reading z_md) */
    dnnl_data_type_t cdt; /* of the source and weights: bf16 (--precision bf16) or f32 */
    const char *act;      /* pp.FusedConv's activation: "", "Relu" or "Clip" */
    float lo, hi;         /* its bounds */
    bool wino_shape;      /* 3x3, stride 1, f32: a Winograd kernel's shape */
    dnnl_memory_desc_t src_any, w_any, w_plain, b_md, dst_any, z_md;
} conv_node;

/* Node n's tensors, group and geometry (c), or why oneDNN does not take it
 * (PP_EUNSUP). */
static pp_status conv_read(pprt_exec *x, const pprt_node *n, conv_node *c, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    c->xi = n->in[0], c->wi = n->in[1], c->yi = final_out(x, n);
    c->bi = has_in(n, 2) ? n->in[2] : -1, c->zi = has_in(n, 3) ? n->in[3] : -1;
    c->xs = &T(x, c->xi)->shape, c->ws = &T(x, c->wi)->shape, c->ys = &T(x, c->yi)->shape;
    const int nd = c->nd = c->xs->rank;
    if (nd < 3 || nd > 5 || c->ws->rank != nd) return unsup(err, "rank");
    /* the residual: added by a binary post-op reading Z, or copied into the
     * destination for a sum post-op */
    c->zsum = c->zi >= 0 && x->o.residual_sum;
    /* bf16: sources and weights in bf16; the output too where it stays
     * between oneDNN nodes (else f32, as the reference kernels read it); a
     * convolution of bf16 values in an f32 run (halfprod.c): its output f32 */
    c->cdt = x->bf16 || x->bld.half ? dnnl_bf16 : dnnl_f32;
    PP_TRY(dn_any_md(c->ys->dim, nd, x->bf16 && x->tn.flex[c->yi] ? c->cdt : dnnl_f32, &c->dst_any, err));

    if (c->zi >= 0 && !c->zsum) PP_TRY(dn_operand_md(x, c->zi, c->ys, &c->dst_any, &c->z_md, err));
    PP_TRY(pp_attr_int(a, "group", 1, &c->group, err));
    const int64_t group = c->group, C = c->C = c->xs->dim[1], OC = c->OC = c->ws->dim[0];
    if (group < 1 || C % group || OC % group || c->ws->dim[1] * group != C) return unsup(err, "group");
    PP_TRY(pp_geom_make(a, c->xs, &c->ws->dim[2], false, &c->g, err));
    for (int i = 0; i < c->g.nsp; i++)
        if (c->g.out[i] != c->ys->dim[2 + i]) return unsup(err, "geometry");
    if (c->zi >= 0 && !pp_shape_eq(&T(x, c->zi)->shape, c->ys)) return unsup(err, "residual shape");
    return PP_OK;
}

/* pp.FusedConv's activation and its bounds (none for a Conv). */
static pp_status conv_act(pprt_exec *x, const pprt_node *n, conv_node *c, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    c->act = "";
    c->lo = -INFINITY, c->hi = INFINITY;
    if (n->op == PP_OP_FUSEDCONV) {
        PP_TRY(pp_attr_string(a, "activation", "", &c->act, err));
        PP_TRY(pp_attr_float(a, "clip_min", -INFINITY, &c->lo, err));
        PP_TRY(pp_attr_float(a, "clip_max", INFINITY, &c->hi, err));
        if (strcmp(c->act, "") && strcmp(c->act, "Relu") && strcmp(c->act, "Clip")) return unsup(err, "activation");
        if (!strcmp(c->act, "Clip") && !(c->lo <= c->hi)) return unsup(err, "clip bounds");
    }
    return PP_OK;
}

/* The descriptors of the source, weights (grouped: [G, OC/G, C/G, ...]),
 * bias and destination; channel blocks where PPRT_DNNL_CONV_BLOCKED chose
 * them. */
static pp_status conv_descs(pprt_exec *x, const pprt_node *n, conv_node *c, pp_err *err) {
    const int nd = c->nd;
    const pp_shape *xs = c->xs, *ws = c->ws, *ys = c->ys;
    int64_t wd[6];
    int wn = 0;
    if (c->group > 1) wd[wn++] = c->group;
    wd[wn++] = c->OC / c->group;
    wd[wn++] = ws->dim[1];
    for (int i = 2; i < nd; i++) wd[wn++] = ws->dim[i];
    PP_TRY(dn_any_md(xs->dim, nd, c->cdt, &c->src_any, err));
    PP_TRY(dn_any_md(wd, wn, c->cdt, &c->w_any, err));
    PP_TRY(dn_plain_md(wd, wn, &c->w_plain, err));
    PP_TRY(dn_plain_md(&c->OC, 1, &c->b_md, err));
    if (x->o.conv_blocked && x->nd.conv_blk[n - x->st->nodes] && c->cdt == dnnl_f32 && !x->bf16) {
        /* in channel blocks where oneDNN has a JIT kernel for that: a 2-D convolution whose
         * channels fill the blocks (padded blocks send oneDNN's eltwise primitives to their
         * reference kernels), as dn_conv_blocked_nodes chose it over the whole plan's graph, the
         * same whatever the split; the source left to oneDNN where it has fewer channels than a
         * block, as a network's first convolution */
        const int64_t blk = conv_block();
        const dnnl_format_tag_t tag = blk == 16 ? dnnl_aBcd16b : dnnl_aBcd8b;
        dnnl_memory_desc_t sb = c->src_any, db;
        dnnl_dims_t sd = {xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3]}, dd = {ys->dim[0], ys->dim[1], ys->dim[2],
                                                                                 ys->dim[3]};
        dnnl_primitive_desc_t probe = NULL;
        if ((c->C < blk || dnnl_memory_desc_init_by_tag(&sb, 4, sd, dnnl_f32, tag) == dnnl_success) &&
            dnnl_memory_desc_init_by_tag(&db, 4, dd, dnnl_f32, tag) == dnnl_success &&
            conv_pd(&probe, dnnl_convolution_direct, &sb, &c->w_any, NULL, &db, &c->g, NULL, x->eng) ==
                dnnl_success &&
            !slow_kernel(probe))
            c->src_any = sb, c->dst_any = db;
        if (probe) dnnl_primitive_desc_destroy(probe);
    }
    return PP_OK;
}

/* The node on one of pprt's convolution kernels where it takes them: *done
 * then, and the build's status returned. */
static pp_status conv_own(pprt_exec *x, conv_node *c, bool *done, pp_err *err) {
    const pp_shape *xs = c->xs, *ws = c->ws, *ys = c->ys;
    const pp_geom *g = &c->g;
    const int64_t C = c->C, group = c->group;
    const int xi = c->xi, wi = c->wi, bi = c->bi, yi = c->yi;
    const float lo = !strcmp(c->act, "Relu") ? 0.0f : c->lo;
    *done = false;
    /* not in a training plan: its weights change every step, and their
     * Winograd transform, redone with them, cost more than the kernel saves
     * (ResNet-18's training step, 112x112 images, 4 a micro-batch, AMD Zen
     * 4: oneDNN's transform of a 512x512x3x3 weight took 127 ms, the
     * convolution 3 ms) */
    c->wino_shape = x->o.wino && !x->bf16 && x->p->train_devices == 0 && c->nd == 4 && group == 1 && ws->dim[2] == 3 && ws->dim[3] == 3 &&
                    g->stride[0] == 1 && g->stride[1] == 1 && g->dil[0] == 1 && g->dil[1] == 1;
    /* our own Winograd kernel where oneDNN has none (below AVX-512), for a
     * node absorbing nothing, with constant weights and bias. The choice
     * depends on the node alone (never on its neighbours' layouts), so
     * outputs do not depend on where the stages are cut. */
    const pprt_wino_shape wsh = {xs->dim[0], C, c->OC, xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3],
                                 g->pad0[0], g->pad0[1], x->o.wino_tile};
    if (c->wino_shape && x->bld.n_fused == 0 && is_weight(x, wi) && (bi < 0 || is_weight(x, bi)) && pprt_wino_cpu() &&
        pprt_wino_fits(&wsh)) {
        dnnl_primitive_desc_t theirs = NULL;
        conv_pd(&theirs, dnnl_convolution_winograd, &c->src_any, &c->w_any, bi >= 0 ? &c->b_md : NULL, &c->dst_any,
                g, NULL, x->eng);
        if (theirs) dnnl_primitive_desc_destroy(theirs);
        else {
            *done = true;
            return build_wino(x, &wsh, xi, wi, bi, c->zi, yi, lo, c->hi, err);
        }
    }
    /* few channels a group (2 a group: oneDNN's im2col gemm, 5x slower; 4:
     * its gemm on AVX2, a slower JIT kernel on AVX-512; 8: its JIT kernel
     * is the faster, design-notes.md): our kernel, which takes no post-ops
     * (the node is built again without them); the choice depends on the
     * node alone */
    if (c->nd == 4 && group > 1 && c->OC == C && C / group <= GCONV_MAX_PER_GROUP && c->zi < 0 &&
        is_weight(x, wi) && (bi < 0 || is_weight(x, bi)) && pprt_gconv_cpu()) {
        const pprt_gconv_shape gs = {xs->dim[0], C,          C / group,   xs->dim[2],  xs->dim[3],
                                     ys->dim[2], ys->dim[3], ws->dim[2],  ws->dim[3],  g->stride[0],
                                     g->stride[1], g->dil[0], g->dil[1],  g->pad0[0],  g->pad0[1]};
        if (pprt_gconv_fits(&gs)) {
            *done = true;
            if (x->bld.n_fused) return unsup(err, "pprt's grouped convolution kernel absorbs no nodes after it");
            return build_gconv(x, &gs, xi, wi, bi, yi, lo, c->hi, err);
        }
    }
    return PP_OK;
}

/* The convolution's primitive descriptor with its post-ops (their operands'
 * memories to args), or why not: where its post-ops cost it oneDNN's JIT or
 * Winograd kernel, the node absorbs nothing (build_all builds it again). */
static pp_status conv_pick(pprt_exec *x, const conv_cands *cands, const conv_ops *ops, dnnl_exec_arg_t *args,
                           int *na, dnnl_primitive_desc_t *out, pp_err *err) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t dst_own;
    const dnnl_memory_desc_t *whole_as = NULL;
    *na = 0;
    if (x->bld.n_fused) {
        /* the probe: the destination it picks without the residuals among
         * the absorbed nodes' operands (postops.c) */
        PP_TRY(conv_choose(x, cands, ops, NULL, NULL, na, &pd, err));
        dst_own = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        if (x->bld.n_whole) whole_as = &dst_own;
        *na = 0;
    }
    PP_TRY(conv_choose(x, cands, ops, whole_as, args, na, &pd, err));
    const char *why = NULL;
    if (!dn_whole_operands_fit(x, pd)) why = "a binary post-op operand in another layout than the output";
    else if (x->bld.n_fused && slow_kernel(pd) && !bare_is_slow(x, cands, ops))
        why = "its post-ops leave oneDNN only a gemm or reference kernel, which it has not without them";
    else if (x->bld.n_fused && cands->wino_shape && !is_wino(pd) && bare_is_wino(x, cands, ops))
        why = "its post-ops take oneDNN's Winograd kernel away";
    if (why) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, why);
    }
    *out = pd;
    return PP_OK;
}

/* The steps of convolution c on primitive pd (its post-ops' operands in
 * args[0, na)): the residual copied into the destination where it is summed
 * and not in place, the guard's fast primitive (fast, or NULL), the
 * primitive, the NaN-keeping clamp pass (clamp: to [lo, hi]) and the
 * output's reorder. pd and fast are taken either way. */
static pp_status conv_push(pprt_exec *x, const pprt_node *n, const conv_node *c, dnnl_primitive_desc_t pd,
                           dnnl_primitive_desc_t fast, bool clamp, float lo, float hi, dnnl_exec_arg_t *args, int na,
                           pp_err *err) {
    const int xi = c->xi, wi = c->wi, bi = c->bi, zi = c->zi, yi = c->yi;
    pp_status r = PP_OK;
    dnnl_memory_t zm, sm, wm, bm = NULL, dm;
    post out;
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* the sum in place: when this node is Z's last reader and Z is stored as
     * the primitive writes its output (an arena activation both), the output
     * takes over Z's bytes and Z is not copied */
    bool in_place = false;
    if (c->zsum && zi != xi && zi != wi && zi != bi) {
        dnnl_memory_desc_t zl;
        if ((r = dn_tensor_layout(x, zi, &zl, err)) != PP_OK ||
            (r = dn_write_in_place(x, n, zi, &zl, yi, dst_md, err)) != PP_OK)
            goto fail;
        in_place = x->tn.alias[yi] == zi;
    }
    /* a constant W is reordered once; a computed one every run */
    if (is_weight(x, wi)) r = dn_weight_mem(x, wi, &c->w_plain, w_md, &wm, err);
    else if (x->tn.blocked[wi]) r = PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, wi)->name);
    else r = dn_half_input(x, (int)(n - x->st->nodes), 1, wi, &c->w_plain, w_md, SLOT_WEI, &wm, err);
    if (r != PP_OK) goto fail;
    if (bi >= 0 && (r = dn_plain_view(x, bi, &c->b_md, &bm, err)) != PP_OK) goto fail;
    if ((r = dn_bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK) goto fail;
    if ((r = dn_half_input(x, (int)(n - x->st->nodes), 0, xi, NULL, src_md, SLOT_SRC, &sm, err)) != PP_OK) goto fail;
    if (c->zsum && !in_place) {
        /* the sum post-op accumulates into the destination: copy Z there first */
        dnnl_memory_desc_t zl;
        if ((r = dn_tensor_layout(x, zi, &zl, err)) != PP_OK || (r = dn_tensor_mem(x, zi, &zl, &zm, err)) != PP_OK ||
            (r = dn_push_reorder(x, zm, dm, STEP_COPY, err)) != PP_OK)
            goto fail;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wm};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    if (bi >= 0) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
    const pprt_nanfix f = clamp ? dn_clamp_fix(dst_md, lo, hi) : (pprt_nanfix){0}; /* dst_md dies with pd */
    /* a residual: the whole micro-batch again where the fast path met a NaN */
    const int guard = !fast ? GUARD_NONE : zi >= 0 ? GUARD_EXACT_RUN : GUARD_EXACT;
    if (fast) { /* the same memories: guard_fast checked that it reads and writes the same layouts */
        r = dn_push_pd(x, fast, STEP_MAIN, args, na, err);
        fast = NULL;
        if (r != PP_OK) goto fail;
        x->steps.a[x->steps.n - 1].guard = zi >= 0 ? GUARD_FAST_RUN : GUARD_FAST;
    }
    if ((r = dn_push_pd(x, pd, STEP_MAIN, args, na, err)) != PP_OK) return r;
    x->steps.a[x->steps.n - 1].guard = guard;
    if (clamp) {
        PP_TRY(dn_push_fix(x, &f, dm, dm, err));
        x->steps.a[x->steps.n - 1].guard = guard;
    }
    return dn_push_post(x, &out, err);
fail:
    if (fast) dnnl_primitive_desc_destroy(fast);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

static pp_status build_conv(pprt_exec *x, const pprt_node *n, pp_err *err) {
    conv_node c;
    PP_TRY(conv_read(x, n, &c, err));
    if (dn_pw_takes(x, n)) return build_pw(x, n, err);
    PP_TRY(conv_act(x, n, &c, err));
    PP_TRY(conv_descs(x, n, &c, err));
    bool done;
    const pp_status own = conv_own(x, &c, &done, err);
    if (done) return own;
    /* Relu: oneDNN's relu gives 0 for NaN, so a pass of ours clamps after
     * the primitive (nanfix.h); only when nodes after it are absorbed too,
     * the NaN-keeping post-ops of dn_append_relu (slower: an exp per element,
     * which its Winograd kernels do not take). Clip: oneDNN's gives a bound
     * for NaN, so always such a pass, and nothing absorbed after it. */
    float lo = c.lo, hi = c.hi;
    const bool relu = !strcmp(c.act, "Relu"), relu_pass = relu && !x->bld.n_fused;
    const bool clamp = !strcmp(c.act, "Clip") || relu_pass;
    if (relu_pass) lo = 0, hi = INFINITY;
    if (clamp && (x->bld.n_fused || lo > 0 || hi < 0)) return unsup(err, "Clip with post-ops or a bound beyond 0");
    const conv_ops ops = {c.zsum, c.zi, &c.z_md, relu && !relu_pass, &c.dst_any, false, 0, 0};
    const conv_cands cands = {c.wino_shape, c.xi, &c.src_any, &c.w_any, c.bi >= 0 ? &c.b_md : NULL, &c.dst_any, &c.g};
    dnnl_exec_arg_t args[MAX_ARGS];
    int na;
    dnnl_primitive_desc_t pd = NULL;
    PP_TRY(conv_pick(x, &cands, &ops, args, &na, &pd, err));
    dnnl_primitive_desc_t fast = clamp ? guard_fast(x, &cands, &ops, pd, lo, hi) : NULL;
    return conv_push(x, n, &c, pd, fast, clamp, lo, hi, args, na, err);
}

/* input 0 (the source) and 3 (the residual) in any layout */
const dn_family dn_conv = {.build = build_conv, .any_in = 1u << 0 | 1u << 3};
