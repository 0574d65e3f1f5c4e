/* convgrad.c: the convolution's gradients (ir/ops_grad.def) on oneDNN's
 * convolution backward primitives: pp.ConvGradX (dY, W) -> dX by backward
 * data, pp.ConvGradW (dY, X) -> dW by backward weights (1-3 spatial dims,
 * groups, strides, dilations, pads, as the forward Conv of conv.c).
 *
 * Every descriptor is oneDNN's choice ("any"), never the layout a tensor
 * happens to be stored in: the primitive, and so the order of its sums,
 * depends on the node's shapes and the threads it is created for alone,
 * whichever stage the node is in (the bit promise, docs/training.md); the
 * inputs are reordered into what it wants (exact copies). A node oneDNN
 * gives only its reference kernel runs on pprt's (runtime/cpu/ref_grad.c).
 *
 * The weight gradient is summed over the batch by oneDNN's kernel, across
 * its threads in an order fixed by the thread count: the same bits at the
 * same threads per stage, which is what the bit promise asks. */
#include <string.h>

#include "../../ir/geom.h"
#include "dnnl_exec.h"

/* A gradient node's tensors as oneDNN sees them: the image side (the
 * forward's source, N x C x spatial), the weights (grouped: [G, OC/G,
 * C/G, k...]) and the output side (the forward's destination). */
typedef struct cg_node {
    const pp_shape *xs, *ws, *ys; /* X's (or dX's), W's (or dW's) and dY's shapes */
    int64_t group;
    pp_geom g;
    dnnl_memory_desc_t x_any, w_any, w_plain, y_any;
    dnnl_memory_desc_t hx_any, hw_any; /* the forward hint's source and weights */
} cg_node;

static pp_status cg_read(pprt_exec *x, const pprt_node *n, const pp_shape *xs, const pp_shape *ws, cg_node *c,
                         pp_err *err) {
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    if (x->bf16) return unsup(err, "bf16 run"); /* (the gradients are f32 throughout) */
    /* the gradient of a convolution of bf16 values (halfprod.c): its two
     * operands read as bf16 copies, its output f32 */
    const dnnl_data_type_t rt = x->bld.half ? dnnl_bf16 : dnnl_f32;
    const bool data = n->op == PP_OP_CONVGRADX;
    const pp_attrs a = attrs_of(x, n);
    c->xs = xs, c->ws = ws, c->ys = &T(x, n->in[0])->shape;
    const int nd = xs->rank;
    if (nd < 3 || nd > 5 || ws->rank != nd || c->ys->rank != nd) return unsup(err, "rank");
    PP_TRY(pp_attr_int(a, "group", 1, &c->group, err));
    const int64_t group = c->group, C = xs->dim[1], OC = ws->dim[0];
    if (group < 1 || C % group || OC % group || ws->dim[1] * group != C) return unsup(err, "group");
    PP_TRY(pp_geom_make(a, xs, &ws->dim[2], false, &c->g, err));
    if (c->ys->dim[0] != xs->dim[0] || c->ys->dim[1] != OC) return unsup(err, "dY's shape");
    for (int i = 0; i < c->g.nsp; i++)
        if (c->g.out[i] != c->ys->dim[2 + i]) return unsup(err, "geometry");
    int64_t wd[6];
    int wn = 0;
    if (group > 1) wd[wn++] = group;
    wd[wn++] = OC / group;
    wd[wn++] = ws->dim[1];
    for (int i = 2; i < nd; i++) wd[wn++] = ws->dim[i];
    PP_TRY(dn_any_md(xs->dim, nd, data ? dnnl_f32 : rt, &c->x_any, err));
    PP_TRY(dn_any_md(c->ys->dim, nd, rt, &c->y_any, err));
    PP_TRY(dn_any_md(wd, wn, data ? rt : dnnl_f32, &c->w_any, err));
    /* the forward hint: its types (all bf16 for a product of bf16 values) */
    PP_TRY(dn_any_md(xs->dim, nd, rt, &c->hx_any, err));
    PP_TRY(dn_any_md(wd, wn, rt, &c->hw_any, err));
    PP_TRY(dn_plain_md(wd, wn, &c->w_plain, err));
    return PP_OK;
}

/* The forward convolution's primitive descriptor, which oneDNN takes as the
 * hint of a backward one; NULL on failure. */
static dnnl_primitive_desc_t cg_hint(pprt_exec *x, const cg_node *c) {
    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < c->g.nsp; i++) {
        strides[i] = c->g.stride[i];
        dil[i] = c->g.dil[i] - 1;
        pl[i] = c->g.pad0[i];
        pr[i] = c->g.pad1[i];
    }
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &c->hx_any,
                                                   &c->hw_any, NULL, &c->y_any, strides, dil, pl, pr) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, x->eng, NULL) != dnnl_success)
        return NULL;
    return pd;
}

/* The backward primitive's descriptor (data: backward data, else backward
 * weights), with a user scratchpad; PP_EUNSUP where oneDNN has no kernel
 * for it but its reference one. */
static pp_status cg_pd(pprt_exec *x, const cg_node *c, bool data, dnnl_primitive_desc_t *out, pp_err *err) {
    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < c->g.nsp; i++) {
        strides[i] = c->g.stride[i];
        dil[i] = c->g.dil[i] - 1;
        pl[i] = c->g.pad0[i];
        pr[i] = c->g.pad1[i];
    }
    dnnl_convolution_desc_t cd;
    const dnnl_status_t s =
        data ? dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &c->x_any, &c->w_any,
                                                                &c->y_any, strides, dil, pl, pr)
             : dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &c->x_any,
                                                                   &c->w_any, NULL, &c->y_any, strides, dil, pl, pr);
    if (s != dnnl_success) return unsup(err, "oneDNN takes no such convolution");
    dnnl_primitive_desc_t hint = cg_hint(x, c);
    if (!hint) return unsup(err, "oneDNN has no forward convolution of this shape");
    dnnl_primitive_attr_t attr;
    pp_status r = dn_new_attr(&attr, err);
    dnnl_primitive_desc_t pd = NULL;
    if (r == PP_OK) {
        const dnnl_status_t ps = dnnl_primitive_desc_create(&pd, &cd, attr, x->eng, hint);
        dnnl_primitive_attr_destroy(attr);
        if (ps != dnnl_success) {
            pd = NULL;
            r = unsup(err, "oneDNN has no backward convolution of this shape");
        }
    }
    dnnl_primitive_desc_destroy(hint);
    if (r != PP_OK) return r;
    if (dn_ref_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN's reference convolution (pprt's runs it)");
    }
    /* the weight gradient of bf16 values: only on a brgemm or an AMX kernel.
     * oneDNN 2.6's other bf16 one (jit_bf16) took 5.5x the f32 kernel's time
     * on a Zen 4 (AVX512_BF16), ResNet-18 at 112x112, 8 images (2026-12-05):
     * declined, the node then runs in f32 (halfprod.c). On AMX oneDNN offers
     * jit:avx512_core_amx_bf16 (no "brg" in its name; it was declined too
     * until 2026-12-05): 1.5x the f32 kernel's speed there (bench/RESULTS.md) */
    const char *impl = "";
    if (x->bld.half && !data && (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
                                 (!strstr(impl, "brg") && !strstr(impl, "amx")))) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "no brgemm kernel for the bf16 weight gradient");
    }
    *out = pd;
    return PP_OK;
}

/* The weights-shaped output dW (plain, [OC, C/G, k...], the bytes of the
 * grouped plain [G, OC/G, C/G, k...]) written by a primitive in layout
 * have: directly where that is plain, else through shared buffer SLOT_DST
 * and a reorder (*po) after it. */
static pp_status cg_bind_dw(pprt_exec *x, int yi, const cg_node *c, const dnnl_memory_desc_t *have,
                            dnnl_memory_t *out, post *po, pp_err *err) {
    po->src = NULL;
    if (x->tn.blocked[yi]) return PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, yi)->name);
    if (dnnl_memory_desc_equal(have, &c->w_plain)) return dn_tensor_mem(x, yi, &c->w_plain, out, err);
    PP_TRY(dn_slot_mem(x, have, SLOT_DST, out, err));
    po->src = *out;
    return dn_tensor_mem(x, yi, &c->w_plain, &po->dst, err);
}

/* pp.ConvGradX: (dY, W) -> dX */
static pp_status build_convgradx(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return unsup(err, "inputs");
    const int dyi = n->in[0], wi = n->in[1], dxi = n->out[0];
    cg_node c;
    PP_TRY(cg_read(x, n, &T(x, dxi)->shape, &T(x, wi)->shape, &c, err));
    dnnl_primitive_desc_t pd;
    PP_TRY(cg_pd(x, &c, true, &pd, err));
    const dnnl_memory_desc_t *dx_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dy_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    dnnl_memory_t wm, dym, dxm;
    post out;
    pp_status r;
    /* a constant W is reordered once; a computed one every run */
    if (is_weight(x, wi)) r = dn_weight_mem(x, wi, &c.w_plain, w_md, &wm, err);
    else if (x->tn.blocked[wi]) r = PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, wi)->name);
    else r = dn_half_input(x, (int)(n - x->st->nodes), 1, wi, &c.w_plain, w_md, SLOT_WEI, &wm, err);
    if (r == PP_OK) r = dn_half_input(x, (int)(n - x->st->nodes), 0, dyi, NULL, dy_md, SLOT_SRC, &dym, err);
    if (r == PP_OK) r = dn_bind_output(x, dxi, dx_md, &dxm, &out, err);
    if (r != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    const dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dxm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 3, err));
    return dn_push_post(x, &out, err);
}

/* pp.ConvGradW: (dY, X) -> dW */
static pp_status build_convgradw(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return unsup(err, "inputs");
    const int dyi = n->in[0], xi = n->in[1], dwi = n->out[0];
    cg_node c;
    PP_TRY(cg_read(x, n, &T(x, xi)->shape, &T(x, dwi)->shape, &c, err));
    dnnl_primitive_desc_t pd;
    PP_TRY(cg_pd(x, &c, false, &pd, err));
    const dnnl_memory_desc_t *x_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dw_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
    const dnnl_memory_desc_t *dy_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    dnnl_memory_t xm, dym, dwm;
    post out;
    pp_status r = dn_half_input(x, (int)(n - x->st->nodes), 0, dyi, NULL, dy_md, SLOT_SRC, &dym, err);
    /* SLOT_WEI: no weight is read here */
    if (r == PP_OK) r = dn_half_input(x, (int)(n - x->st->nodes), 1, xi, NULL, x_md, SLOT_WEI, &xm, err);
    if (r == PP_OK) r = cg_bind_dw(x, dwi, &c, dw_md, &dwm, &out, err);
    if (r != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_WEIGHTS, dwm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 3, err));
    return dn_push_post(x, &out, err);
}

/* dY in any layout (and X for the weight gradient): reordered into the
 * primitive's choice */
const dn_family dn_convgradx = {.build = build_convgradx, .any_in = 1u << 0};
const dn_family dn_convgradw = {.build = build_convgradw, .any_in = 1u << 0 | 1u << 1};
