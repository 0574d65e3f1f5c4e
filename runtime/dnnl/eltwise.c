/* eltwise.c: unary ops on oneDNN's eltwise: Relu LeakyRelu Elu Sigmoid Tanh
 * Gelu pp.SiLU Log Sqrt Abs Neg Clip HardSwish Softplus, and Pow by a
 * constant 2 (square). Relu and Clip with
 * constant bounds are a NaN-keeping clamp of ours (oneDNN's give 0 or a
 * bound for NaN); SiLU runs on our kernel (runtime/dnnl/kernels/silu.c) where that
 * wins (f32 on AVX2 and AVX-512 CPUs; PPRT_DNNL_SILU=0: never). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../isa.h"
#include "dnnl_exec.h"
#include "kernels/silu.h"

/* Whether node n clamps (Relu, Clip with constant
 * bounds; ONNX's default bounds are the float range): then it runs as a
 * NaN-keeping clamp of ours to [lo, hi], as oneDNN's relu and clip give 0 or
 * a bound for NaN. */
static bool clamp_of(const pprt_exec *x, const pprt_node *n, float *lo, float *hi) {
    pp_attrs a = attrs_of(x, n);
    *lo = 0, *hi = INFINITY;
    if (n->op == PP_OP_RELU) return true;
    if (n->op != PP_OP_CLIP) return false;
    *lo = -FLT_MAX, *hi = FLT_MAX;
    if (a.opset < 11)
        return pp_attr_float(a, "min", -FLT_MAX, lo, NULL) == PP_OK &&
               pp_attr_float(a, "max", FLT_MAX, hi, NULL) == PP_OK && *lo <= *hi;
    for (int k = 1; k < 3; k++) {
        if (!has_in(n, k)) continue;
        const int b = n->in[k];
        if (!is_weight(x, b) || numel_of(&T(x, b)->shape) != 1 || !T(x, b)->data || T(x, b)->varies) return false;
        *(k == 1 ? lo : hi) = *(const float *)T(x, b)->data;
    }
    return *lo <= *hi; /* also not NaN */
}

/* Gelu's eltwise algorithm by its 'approximate' (attributes a: a Gelu's or its pp.UnaryGrad's) */
static pp_status gelu_alg(pp_attrs a, dnnl_alg_kind_t *alg, pp_err *err) {
    const char *ap;
    PP_TRY(pp_attr_string(a, "approximate", "none", &ap, err));
    if (!strcmp(ap, "none")) *alg = dnnl_eltwise_gelu_erf;
    else if (!strcmp(ap, "tanh")) *alg = dnnl_eltwise_gelu_tanh;
    else return unsup(err, "approximate");
    return PP_OK;
}

/* The eltwise algorithm of a unary op; PP_EUNSUP when oneDNN has none for it. */
pp_status dn_eltwise_of(const pprt_exec *x, const pprt_node *n, dnnl_alg_kind_t *alg, float *alpha,
                        float *beta, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    *alpha = *beta = 0;
    switch (n->op) {
    case PP_OP_RELU: *alg = dnnl_eltwise_relu; return PP_OK;
    case PP_OP_LEAKYRELU: /* alpha 0 is not Relu: 0 * -inf is NaN, which oneDNN's max(x, 0) does not give */
        *alg = dnnl_eltwise_relu;
        PP_TRY(pp_attr_float(a, "alpha", 0.01f, alpha, err));
        return *alpha == 0 ? unsup(err, "LeakyRelu with alpha 0") : PP_OK;
    case PP_OP_ELU: *alg = dnnl_eltwise_elu; return pp_attr_float(a, "alpha", 1.0f, alpha, err);
    case PP_OP_SIGMOID: *alg = dnnl_eltwise_logistic; return PP_OK;
    case PP_OP_TANH: *alg = dnnl_eltwise_tanh; return PP_OK;
    case PP_OP_SILU: *alg = dnnl_eltwise_swish, *alpha = 1.0f; return PP_OK;
    case PP_OP_LOG: *alg = dnnl_eltwise_log; return PP_OK;
    case PP_OP_SQRT: *alg = dnnl_eltwise_sqrt; return PP_OK;
    case PP_OP_ABS: *alg = dnnl_eltwise_abs; return PP_OK;
    /* -x as -1 * x + beta with beta -0, not 0: -(+0) is -0, and -0 + 0 would be +0 (then
     * 1 / -x gave +inf where -inf is right; found by the difftest, seed 909090) */
    case PP_OP_NEG: *alg = dnnl_eltwise_linear, *alpha = -1.0f, *beta = -0.0f; return PP_OK;
    case PP_OP_HARDSWISH: *alg = dnnl_eltwise_hardswish; return PP_OK;
    case PP_OP_SOFTPLUS: *alg = dnnl_eltwise_soft_relu; return PP_OK;
    case PP_OP_GELU: return gelu_alg(a, alg, err);
    case PP_OP_POW: { /* x^2 as oneDNN's square x * x: the bits of the reference's (float)pow(x, 2.0) */
        const pp_tinfo e = n->n_in == 2 && n->in[1] >= 0 ? dn_tinfo(x, n->in[1]) : (pp_tinfo){0};
        if (!e.data || e.dtype != PP_F32 || numel_of(&e.shape) != 1)
            return unsup(err, "exponent not a constant f32 scalar");
        if (*(const float *)e.data != 2.0f) return unsup(err, "exponent other than 2");
        if (!pp_shape_eq(&T(x, n->in[0])->shape, &T(x, n->out[0])->shape)) return unsup(err, "a broadcast base");
        *alg = dnnl_eltwise_square;
        return PP_OK;
    }
    /* oneDNN's clip gives a bound for NaN, its exp inf: ours or the reference kernels */
    case PP_OP_CLIP: return unsup(err, "NaN: oneDNN's clip gives a bound for it");
    case PP_OP_EXP: return unsup(err, "NaN: oneDNN's exp gives inf for it");
    default: return unsup(err, "op");
    }
}

/* The first GlobalAveragePool after node n in the stage that reads n's
 * output and is still to be built on oneDNN, else -1. */
static int pooled_after(const pprt_exec *x, const pprt_node *n) {
    const pprt_stage *st = x->st;
    for (int gi = (int)(n - st->nodes) + 1; gi < st->n_nodes; gi++) {
        const pprt_node *g = &st->nodes[gi];
        if (g->op == PP_OP_GLOBALAVGPOOL && g->n_in == 1 && g->in[0] == n->out[0] && x->nd.on_dnnl[gi] &&
            !x->nd.absorbed[gi] && x->nd.first[gi] < 0)
            return gi;
    }
    return -1;
}

/* SiLU over every value of a layout (ctx: their count) */
static void run_silu(void *ctx, void *const io[N_IO], int team) {
    pprt_silu(io[IO_SRC], io[IO_DST], *(const size_t *)ctx, team);
}

static void run_silu_bf16(void *ctx, void *const io[N_IO], int team) {
    pprt_silu_bf16(io[IO_SRC], io[IO_DST], *(const size_t *)ctx, team);
}

static pp_status build_eltwise(pprt_exec *x, const pprt_node *n, pp_err *err) {
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
    float alpha = 1, beta = 0, lo, hi;
    const bool own_clamp = clamp_of(x, n, &lo, &hi); /* then the primitive only lays out */
    if (own_clamp) alg = dnnl_eltwise_linear;
    else PP_TRY(dn_eltwise_of(x, n, &alg, &alpha, &beta, err));
    dnnl_memory_desc_t src;
    PP_TRY(dn_tensor_layout(x, n->in[0], &src, err));
    if (own_clamp && ((lo > 0 || hi < 0) && dnnl_memory_desc_get_size(&src) != T(x, n->in[0])->nbytes))
        return unsup(err, "a clamp that would change a blocked layout's padding");
    if (own_clamp && src.data_type != dnnl_f32 && src.data_type != dnnl_bf16)
        return unsup(err, "a clamp of other than f32 or bf16");
    dnnl_eltwise_desc_t d;
    DN(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, alg, &src, alpha, beta), "eltwise");
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_plain_pd(x, &d, "eltwise", &pd, err));
    pp_status r;
    dnnl_memory_t sm, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if ((r = dn_write_in_place(x, n, n->in[0], &src, n->out[0], dst_md, err)) != PP_OK ||
        (r = dn_bind_output(x, n->out[0], dst_md, &dm, &out, err)) != PP_OK ||
        (r = dn_bind_input(x, n->in[0], &src, SLOT_SRC, &sm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    if (own_clamp) {
        const pprt_nanfix f = dn_clamp_fix(&src, lo, hi);
        dnnl_primitive_desc_destroy(pd);
        PP_TRY(dn_push_fix(x, &f, sm, dm, err));
        return dn_push_post(x, &out, err);
    }
    const bool silu16 = src.data_type == dnnl_bf16; /* (own_silu: a CPU that runs the bf16 kernel) */
    if (n->op == PP_OP_SILU && x->own_silu && (src.data_type == dnnl_f32 || silu16) &&
        dnnl_memory_desc_equal(&src, dst_md)) {
        /* our kernel over every value of the layout (a blocked one's
         * padding included: silu(0) = 0 keeps it zero) */
        const size_t count = dnnl_memory_desc_get_size(&src) / (silu16 ? 2 : sizeof(float));
        dnnl_primitive_desc_destroy(pd);
        if (!count) return unsup(err, "empty");
        /* a GlobalAveragePool of the output later in the stage: in this pass (gap.h) */
        const int gi = pooled_after(x, n);
        if (gi >= 0) {
            bool done;
            PP_TRY(dn_push_gap(x, &x->st->nodes[gi], &src, n, sm, dm, &done, err));
            if (done) {
                x->tn.born[x->st->nodes[gi].out[0]] = (int)(n - x->st->nodes);
                PP_TRY(dn_push_post(x, &out, err));
                x->nd.absorbed[gi] = true; /* (the build loop clears it before each attempt) */
                return PP_OK;
            }
        }
        step st;
        PP_TRY(silu16 ? dn_own_step(x, run_silu_bf16, &count, sizeof count, NULL, "pprt:silu:avx512_bf16", &st, err)
                      : dn_own_step(x, run_silu, &count, sizeof count, NULL,
                                    pprt_cpu_isa() >= PPRT_ISA_AVX512 ? "pprt:silu:avx512" : "pprt:silu:avx2", &st,
                                    err));
        st.nargs = 2;
        st.args[0] = args[0], st.args[1] = args[1];
        PP_TRY(dn_push_own(x, st, err));
        return dn_push_post(x, &out, err);
    }
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 2, err));
    return dn_push_post(x, &out, err);
}

/* input 0 in any layout; may be absorbed as a post-op */
const dn_family dn_eltwise = {.build = build_eltwise, .any_in = 1u << 0, .postop = true};

/* pp.UnaryGrad of Gelu (ViT's, BERT's and GPT's MLP): dX = dY gelu'(X) on
 * oneDNN's eltwise backward in f32, the derivative of the same gelu_erf or
 * gelu_tanh its forward runs (the reference kernel computes it in double
 * through libm's erf and exp, 4 % of ViT-B/16's training step on two cores
 * of an AMD EPYC Zen 4). Other ops' gradients decline: the reference kernel
 * in ranges of elements (gradref.c). */
static pp_status build_unarygrad(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const char *name;
    pp_op op;
    PP_TRY(pp_attr_string(attrs_of(x, n), "op", "", &name, err));
    if (!x->o.gelu_grad) return unsup(err, "PPRT_DNNL_GELU_GRAD=0");
    if (!pp_op_lookup(name, &op) || op != PP_OP_GELU) return unsup(err, "a derivative oneDNN does not have");
    const int xi = n->in[0], gi = n->n_in > 2 ? n->in[2] : -1, yi = n->out[0];
    if (xi < 0 || gi < 0 || !f32(x, xi) || !f32(x, gi) || !f32(x, yi)) return unsup(err, "not f32");
    if (!pp_shape_eq(&T(x, xi)->shape, &T(x, yi)->shape) || !pp_shape_eq(&T(x, gi)->shape, &T(x, yi)->shape))
        return unsup(err, "shapes differ");
    if (numel_of(&T(x, yi)->shape) == 0) return unsup(err, "empty");
    dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
    const float alpha = 0, beta = 0;
    PP_TRY(gelu_alg(attrs_of(x, n), &alg, err));
    dnnl_memory_desc_t md;
    PP_TRY(dn_tensor_plain(x, yi, &md, err));
    dnnl_eltwise_desc_t fd, bd;
    DN(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &md, alpha, beta), "eltwise");
    DN(dnnl_eltwise_backward_desc_init(&bd, alg, &md, &md, alpha, beta), "eltwise backward");
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_status_t s = dnnl_primitive_desc_create(&hint, &fd, attr, x->eng, NULL);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd, attr, x->eng, hint);
    dnnl_primitive_attr_destroy(attr);
    if (hint) dnnl_primitive_desc_destroy(hint);
    if (s != dnnl_success) return unsup(err, "oneDNN has no eltwise backward for it");
    if (!dn_jit_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN has no JIT kernel for it");
    }
    pp_status r;
    dnnl_memory_t xm, gm, dm;
    post out;
    if ((r = dn_plain_view(x, xi, &md, &xm, err)) != PP_OK || (r = dn_plain_view(x, gi, &md, &gm, err)) != PP_OK ||
        (r = dn_bind_output(x, yi, &md, &dm, &out, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, gm}, {DNNL_ARG_DIFF_SRC, dm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 3, err));
    return dn_push_post(x, &out, err);
}

const dn_family dn_unarygrad = {.build = build_unarygrad};
