/* binary.c: Add Sub Mul Div Sum (two inputs) on oneDNN's binary, the second
 * operand broadcast (the first too where the op commutes). Not Max and Min:
 * oneDNN's give the other operand for a NaN in the first. */
#include "dnnl_exec.h"
#include "kernels/cscale.h"

/* Shape s right-aligned to rank r (leading 1s). */
void dn_align_dims(const pp_shape *s, int r, int64_t *d) {
    for (int i = 0; i < r; i++) {
        int k = i - (r - s->rank);
        d[i] = k >= 0 ? s->dim[k] : 1;
    }
}

/* The format tag of a plain, channels-last or channel-blocked descriptor; undef for others. */
static dnnl_format_tag_t tag_of(const dnnl_memory_desc_t *md) {
    static const dnnl_format_tag_t t3[] = {dnnl_acb, dnnl_aBc16b, dnnl_aBc8b, dnnl_aBc4b, dnnl_abc},
                                   t4[] = {dnnl_acdb, dnnl_aBcd16b, dnnl_aBcd8b, dnnl_aBcd4b, dnnl_abcd},
                                   t5[] = {dnnl_acdeb, dnnl_aBcde16b, dnnl_aBcde8b, dnnl_aBcde4b, dnnl_abcde};
    const dnnl_format_tag_t *c = md->ndims == 3 ? t3 : md->ndims == 4 ? t4 : md->ndims == 5 ? t5 : NULL;
    for (int i = 0; c && i < 5; i++) {
        dnnl_memory_desc_t t;
        if (dnnl_memory_desc_init_by_tag(&t, md->ndims, md->dims, md->data_type, c[i]) == dnnl_success &&
            dnnl_memory_desc_equal(&t, md))
            return c[i];
    }
    return dnnl_format_tag_undef;
}

bool dn_binary_alg(pp_op op, dnnl_alg_kind_t *alg, bool *commutes) {
    *commutes = true;
    switch (op) {
    case PP_OP_ADD: case PP_OP_SUM: *alg = dnnl_binary_add; return true;
    case PP_OP_MUL: *alg = dnnl_binary_mul; return true;
    /* not Max and Min: oneDNN's give the other operand for a NaN in the first */
    case PP_OP_SUB: *alg = dnnl_binary_sub, *commutes = false; return true;
    case PP_OP_DIV: *alg = dnnl_binary_div, *commutes = false; return true;
    default: return false;
    }
}

static bool full_operand(const pprt_exec *x, const pprt_node *n, int k) {
    return pp_shape_eq(&T(x, n->in[k])->shape, &T(x, n->out[0])->shape);
}

static void run_cscale(void *ctx, void *const io[N_IO], int team) {
    pprt_cscale_run(ctx, io[IO_SRC], io[IO_DST], io[IO_OTHER], team);
}

/* A Mul of x (stored as m0) by s of dims ds (those of the output dy, right
 * aligned; rank r >= 3) that is 1 but for the channel and perhaps the sample:
 * squeeze-and-excitation's end, on pprt's kernel (cscale.h) in x's layout
 * (in place where x dies here and the step runs on one thread). *done
 * false: not that case, or not a layout the kernel reads (the caller goes
 * on to oneDNN's binary). */
static pp_status try_cscale(pprt_exec *x, const pprt_node *n, int xi, int si, const dnnl_memory_desc_t *m0,
                            const int64_t *ds, const int64_t *dy, int r, bool *done, pp_err *err) {
    *done = false;
    if (n->op != PP_OP_MUL || r < 3 || ds[1] != dy[1] || (ds[0] != 1 && ds[0] != dy[0])) return PP_OK;
    for (int i = 2; i < r; i++)
        if (ds[i] != 1) return PP_OK;
    pprt_cscale c = {.bf16 = m0->data_type == dnnl_bf16};
    pprt_layout kl;
    dnnl_memory_desc_t sm;
    if (!dn_own_layout(m0, &c.l) || (c.bf16 && !pprt_cscale_bf16_cpu())) return PP_OK;
    /* s as stored: channel c of sample n at n * stride + c (one pixel, so
     * plain, channels last and blocked all store it so) */
    if (x->tn.blocked[si]) {
        if (T(x, si)->shape.rank != r) return PP_OK;
        sm = x->tn.lay[si];
    } else {
        PP_TRY(dn_plain_md(ds, r, &sm, err));
    }
    if (!dn_own_layout(&sm, &kl) || kl.S != 1 || (kl.vec == 1 && kl.C > 1 && kl.stride_c != 1)) return PP_OK;
    c.k_bf16 = sm.data_type == dnnl_bf16, c.k_stride_n = ds[0] == 1 ? 0 : kl.stride_n;
    /* channels contiguous: the pointwise convolution after it may scale as it reads */
    if ((kl.vec == 1 ? kl.stride_c == 1 || kl.C == 1 : kl.vec >= kl.C || kl.stride_c == kl.vec) && c.bf16 &&
        dn_pw_pre_scale(x, n, xi, si, m0, &sm, c.k_stride_n)) {
        *done = true;
        return PP_OK;
    }
    const int yi = n->out[0];
    dnnl_memory_t a0, a1, dm;
    post out;
    /* in place only on one thread: on two cores of the Intel Xeon of
     * bench/RESULTS.md an in-place pass over a tensor that another node
     * (the pool of the squeeze) has just read on one core ran at 0.3-0.45 ns
     * an element, one into a buffer of its own at 0.1; on one thread in
     * place is the faster (0.08 against 0.24) */
    if (x->bld.threads == 1) PP_TRY(dn_write_in_place(x, n, xi, m0, yi, m0, err));
    PP_TRY(dn_bind_output(x, yi, m0, &dm, &out, err));
    PP_TRY(dn_tensor_mem(x, xi, m0, &a0, err));
    PP_TRY(is_weight(x, si) ? dn_weight_mem(x, si, &sm, &sm, &a1, err)
                            : dn_bind_view(x, si, &sm, &sm, SLOT_SRC, &a1, err));
    step st;
    PP_TRY(dn_own_step(x, run_cscale, &c, sizeof c, NULL, c.bf16 ? "pprt:cscale:bf16" : "pprt:cscale", &st, err));
    st.nargs = 3;
    st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, a0};
    st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    st.args[2] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, a1};
    PP_TRY(dn_push_own(x, st, err));
    *done = true;
    return dn_push_post(x, &out, err);
}

static pp_status build_binary(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (n->n_in != 2) return unsup(err, "not two inputs");
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    dnnl_alg_kind_t alg;
    bool commutes;
    if (!dn_binary_alg(n->op, &alg, &commutes)) return unsup(err, "op");
    int i0 = n->in[0], i1 = n->in[1];
    const int yi = n->out[0];
    const pp_shape *ys = &T(x, yi)->shape;
    /* oneDNN broadcasts the second source only */
    if (!full_operand(x, n, 0)) {
        if (!commutes || !full_operand(x, n, 1)) return unsup(err, "first operand broadcast");
        int t = i0;
        i0 = i1, i1 = t;
    }
    const int r = ys->rank > 0 ? ys->rank : 1;
    int64_t d1[PP_MAX_DIMS], dy[PP_MAX_DIMS];
    pp_shape ys1 = *ys;
    if (ys1.rank == 0) ys1.rank = 1, ys1.dim[0] = 1;
    dn_align_dims(&ys1, r, dy);
    pp_shape s1 = T(x, i1)->shape;
    dn_align_dims(&s1, r, d1);
    for (int i = 0; i < r; i++)
        if (d1[i] != dy[i] && d1[i] != 1) return unsup(err, "broadcast");
    /* m0: the full operand as stored; c1: the other as stored (dims aligned
     * to the output's rank); m1: the other as the primitive reads it: in m0's
     * format where either is blocked (oneDNN's fast binary kernels want one
     * format; mixed, as where a plain tensor received at a cut meets a
     * blocked one, it runs ref:any, hundreds of times slower), else as stored */
    dnnl_memory_desc_t m0, c1, m1, dst;
    PP_TRY(dn_tensor_layout(x, i0, &m0, err));
    bool done;
    PP_TRY(try_cscale(x, n, i0, i1, &m0, d1, dy, r, &done, err));
    if (done) return PP_OK;
    if (x->tn.blocked[i1]) {
        if (T(x, i1)->shape.rank != r) return unsup(err, "blocked operand of another rank");
        c1 = x->tn.lay[i1];
    } else {
        PP_TRY(dn_plain_md(d1, r, &c1, err));
    }
    m1 = c1;
    if (pp_shape_eq(&T(x, i1)->shape, ys) && (x->tn.blocked[i0] || x->tn.blocked[i1])) {
        m1 = m0;
    } else if (x->tn.blocked[i0] || x->tn.blocked[i1]) {
        dnnl_format_tag_t tag = tag_of(&m0);
        dnnl_dims_t dd;
        for (int i = 0; i < r; i++) dd[i] = d1[i];
        if (tag == dnnl_format_tag_undef) return unsup(err, "layout of the full operand");
        DN(dnnl_memory_desc_init_by_tag(&m1, r, dd, c1.data_type, tag), "memory descriptor");
    }
    dst = m0; /* the output takes the first source's layout */
    if (ys->rank == 0) { /* scalars: one-element vectors */
        PP_TRY(dn_plain_md(dy, 1, &m0, err));
        c1 = m1 = dst = m0;
    }
    dnnl_binary_desc_t d;
    DN(dnnl_binary_desc_init(&d, alg, &m0, &m1, &dst), "binary");
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_plain_pd(x, &d, "binary", &pd, err));
    if (dn_ref_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN has only its reference implementation for this broadcast");
    }
    pp_status rs;
    dnnl_memory_t a0, a1, dm;
    post out;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* oneDNN 2.6.3's binary, in place over a blocked layout with padded
     * channels (C not a multiple of the block) and a broadcast second
     * source, leaves the destination as it was (found by tests/difftest):
     * such a node writes a buffer of its own */
    bool padded = false;
    for (int i = 0; i < m0.ndims; i++) padded |= m0.padded_dims[i] != m0.dims[i];
    const bool bcast = !pp_shape_eq(&T(x, i1)->shape, ys);
    rs = i0 == i1 || ys->rank == 0 || (padded && bcast) ? PP_OK : dn_write_in_place(x, n, i0, &m0, yi, dst_md, err);
    if (rs != PP_OK || (rs = dn_bind_output(x, yi, dst_md, &dm, &out, err)) != PP_OK ||
        (rs = dn_tensor_mem(x, i0, &m0, &a0, err)) != PP_OK ||
        (rs = is_weight(x, i1) ? dn_weight_mem(x, i1, &c1, &m1, &a1, err)
                               : dn_bind_view(x, i1, &c1, &m1, SLOT_SRC, &a1, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return rs;
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC_0, a0}, {DNNL_ARG_SRC_1, a1}, {DNNL_ARG_DST, dm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 3, err));
    return dn_push_post(x, &out, err);
}

/* both inputs in any layout, when there are two */
const dn_family dn_binary = {.build = build_binary, .any_in = 1u << 0 | 1u << 1, .n_in = 2};
