/* pool.c: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on oneDNN's
 * pooling. A source in a layout without a JIT kernel (plain, or another
 * ISA's blocks) is reordered into one with; max pooling gets a NaN pass of
 * ours after it (nanfix.h). */
#include <string.h>

#include "../../ir/geom.h"
#include "dnnl_exec.h"
#include "kernels/gap.h"

/* md as nanfix.h's layout: plain, or blocked on channels (dim 1) only. */
static bool fix_layout(const dnnl_memory_desc_t *md, pprt_nanfix_layout *l) {
    if (md->format_kind != dnnl_blocked || md->offset0 != 0 || md->ndims > 5) return false;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks > 1 || (b->inner_nblks == 1 && b->inner_idxs[0] != 1)) return false;
    l->cblock = b->inner_nblks ? b->inner_blks[0] : 1;
    for (int d = 0; d < md->ndims; d++) l->stride[d] = b->strides[d];
    return true;
}

/* A pooling's parameters but its source (pool_pd's ctx). */
typedef struct pool_args {
    dnnl_alg_kind_t alg;
    const dnnl_memory_desc_t *dst;
    const dnnl_dim_t *strides, *kernel, *dil, *pl, *pr;
} pool_args;

static pp_status pool_pd(pprt_exec *x, const dnnl_memory_desc_t *src, void *ctx, dnnl_primitive_desc_t *pd,
                         pp_err *err) {
    const pool_args *p = ctx;
    dnnl_pooling_v2_desc_t d;
    DN(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, p->alg, src, p->dst, p->strides, p->kernel,
                                         p->dil, p->pl, p->pr),
       "pooling");
    return dn_plain_pd(x, &d, "pooling", pd, err);
}

/* the means (IO_DST), or after a SiLU its output (IO_DST) and the means (IO_OTHER) */
static void run_gap(void *ctx, void *const io[N_IO], int team) {
    const pprt_gap *g = ctx;
    pprt_gap_run(g, io[IO_SRC], io[IO_DST], g->silu ? io[IO_OTHER] : io[IO_DST], io[IO_SCRATCH], team);
}

/* (dnnl_exec.h) */
pp_status dn_push_gap(pprt_exec *x, const pprt_node *g, const dnnl_memory_desc_t *src, const pprt_node *silu,
                      dnnl_memory_t silu_src, dnnl_memory_t silu_dst, bool *done, pp_err *err) {
    *done = false;
    const int xi = g->in[0], yi = g->out[0];
    const pp_shape *ys = &T(x, yi)->shape;
    pprt_gap k = {.bf16 = src->data_type == dnnl_bf16, .silu = silu != NULL};
    if (g->op != PP_OP_GLOBALAVGPOOL || g->n_in != 1 || ys->rank < 3 || ys->rank > 5 ||
        !dn_own_layout(src, &k.l) || !f32(x, yi))
        return PP_OK;
    k.out_bf16 = k.bf16; /* the means in the element type oneDNN's pooling would give */
    /* the means as N x C, channels contiguous: plain */
    static const dnnl_format_tag_t plain[] = {dnnl_abc, dnnl_abcd, dnnl_abcde};
    dnnl_memory_desc_t om, scm;
    dnnl_dims_t od;
    for (int i = 0; i < ys->rank; i++) od[i] = ys->dim[i];
    DN(dnnl_memory_desc_init_by_tag(&om, ys->rank, od, k.out_bf16 ? dnnl_bf16 : dnnl_f32, plain[ys->rank - 3]),
       "memory descriptor");
    const int64_t floats = (int64_t)(pprt_gap_scratch(&k) / sizeof(float));
    PP_TRY(dn_plain_md(&floats, 1, &scm, err));
    void *buf = dn_own_alloc(x, pprt_gap_scratch(&k));
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    dnnl_memory_t mm, sm, scr;
    post out;
    PP_TRY(dn_new_mem(x, &scm, buf, &scr, err));
    PP_TRY(dn_bind_output(x, yi, &om, &mm, &out, err));
    step st;
    PP_TRY(dn_own_step(x, run_gap, &k, sizeof k, NULL, k.silu ? "pprt:silu_gap" : "pprt:gap", &st, err));
    if (silu) {
        st.nargs = 4;
        st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, silu_src};
        st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, silu_dst};
        st.args[2] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scr};
        st.args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST_1, mm};
    } else {
        PP_TRY(dn_bind_input(x, xi, src, SLOT_SRC, &sm, err));
        st.nargs = 3;
        st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
        st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, mm};
        st.args[2] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scr};
    }
    PP_TRY(dn_push_own(x, st, err));
    *done = true;
    return dn_push_post(x, &out, err);
}

static pp_status build_pool(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const int xi = n->in[0], yi = n->out[0];
    const pp_shape *xs = &T(x, xi)->shape, *ys = &T(x, yi)->shape;
    const int nd = xs->rank;
    if (nd < 3 || nd > 5) return unsup(err, "rank");
    dnnl_alg_kind_t alg = dnnl_pooling_max;
    dnnl_dims_t strides, kernel, dil, pl, pr;
    const int nsp = nd - 2;
    if (n->op == PP_OP_GLOBALAVGPOOL || n->op == PP_OP_GLOBALMAXPOOL) {
        alg = n->op == PP_OP_GLOBALAVGPOOL ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max;
        for (int i = 0; i < nsp; i++) {
            strides[i] = 1;
            kernel[i] = xs->dim[2 + i];
            dil[i] = pl[i] = pr[i] = 0;
        }
    } else {
        pp_geom g;
        PP_TRY(pp_geom_make(a, xs, NULL, true, &g, err));
        int64_t cip = 0;
        if (n->op == PP_OP_AVGPOOL) {
            PP_TRY(pp_attr_int(a, "count_include_pad", 0, &cip, err));
            alg = cip ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
        }
        for (int i = 0; i < nsp; i++) {
            const int64_t ext = g.dil[i] * (g.k[i] - 1) + 1;
            if (g.out[i] != ys->dim[2 + i]) return unsup(err, "geometry");
            strides[i] = g.stride[i];
            kernel[i] = g.k[i];
            dil[i] = g.dil[i] - 1;
            pl[i] = g.pad0[i];
            /* right padding that gives out[i] windows (more than pad1 under ceil_mode) */
            int64_t r = g.pad1[i];
            if ((g.in[i] + g.pad0[i] + r - ext) / g.stride[i] + 1 != g.out[i])
                r = (g.out[i] - 1) * g.stride[i] + ext - g.in[i] - g.pad0[i];
            pr[i] = r;
            /* windows entirely in the padding, and padding counted beyond the
             * explicit pads, differ from the ONNX definition */
            if (pl[i] >= ext || pr[i] >= ext || pr[i] < 0) return unsup(err, "padding as large as the window");
            if (cip && pr[i] > g.pad1[i]) return unsup(err, "count_include_pad with ceil_mode padding");
        }
    }
    dnnl_memory_desc_t src, dst_any;
    PP_TRY(dn_tensor_layout(x, xi, &src, err));
    bool done;
    PP_TRY(dn_push_gap(x, n, &src, NULL, NULL, NULL, &done, err));
    if (done) return PP_OK;
    PP_TRY(dn_any_md(ys->dim, nd, src.data_type, &dst_any, err));
    dnnl_primitive_desc_t pd;
    pool_args pa = {alg, &dst_any, strides, kernel, dil, pl, pr};
    PP_TRY(pool_pd(x, &src, &pa, &pd, err));
    /* a source in a layout no JIT kernel takes gets oneDNN's simple_nchw or
     * ref kernel, 14x slower than its JIT ones on digits' first pool after a
     * cut: a plain one (a received tensor, a plan input), or one blocked by a
     * producer whose kernel is for another ISA (AVX2's 8 channels on an
     * AVX-512 CPU). Read it reordered into the first layout a JIT kernel
     * takes. */
    if (x->o.propagate && !dn_jit_impl(pd)) dn_fast_layout(x, &src, false, false, pool_pd, &pa, dn_jit_impl, &pd);
    pp_status r;
    dnnl_memory_t sm, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* max pooling: oneDNN answers a window of only NaN or -inf with -FLT_MAX,
     * which a pass of ours after it corrects (nanfix.h) */
    pprt_nanfix fix = {0};
    if (alg == dnnl_pooling_max) {
        const bool bf16 = src.data_type == dnnl_bf16;
        fix = (pprt_nanfix){.kind = PPRT_NANFIX_MAXPOOL, .nsp = nsp, .N = xs->dim[0], .C = xs->dim[1], .bf16 = bf16,
                            .dst_n = dnnl_memory_desc_get_size(dst_md) / (bf16 ? 2 : sizeof(float))};
        for (int i = 0; i < nsp; i++) {
            fix.in[i] = xs->dim[2 + i], fix.out[i] = ys->dim[2 + i], fix.k[i] = kernel[i];
            fix.stride[i] = strides[i], fix.dil[i] = dil[i] + 1, fix.pad[i] = pl[i];
        }
        if ((src.data_type != dnnl_f32 && !bf16) || dst_md->data_type != src.data_type || !fix_layout(&src, &fix.src) ||
            !fix_layout(dst_md, &fix.dst)) {
            dnnl_primitive_desc_destroy(pd);
            return unsup(err, "a layout that the max pooling NaN pass cannot read");
        }
    }
    if ((r = dn_bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (r = dn_bind_input(x, xi, &src, SLOT_SRC, &sm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 2, err));
    if (fix.kind) PP_TRY(dn_push_fix(x, &fix, sm, dm, err));
    return dn_push_post(x, &out, err);
}

/* input 0 in any layout */
const dn_family dn_pool = {.build = build_pool, .any_in = 1u << 0};
