/* softmax.c: Softmax and LogSoftmax over plain [outer, n, inner] views: on
 * oneDNN's softmax (accurate / log) with a NaN pass of ours after it where
 * the axis is the last (inner 1), on our own kernel (runtime/dnnl/kernels/softmax.h)
 * where it is not. */
#include "../../ir/shape_nn.h"
#include "dnnl_exec.h"
#include "kernels/softmax.h"

static void run_cols(void *ctx, void *const io[N_IO], int team) {
    pprt_softmax_run(ctx, io[IO_SRC], io[IO_DST], team);
}

/* over a middle axis: our kernel, which keeps NaN as the reference does */
static pp_status build_cols(pprt_exec *x, const pprt_node *n, const dnnl_memory_desc_t *md, const int64_t *dims,
                            pp_err *err) {
    const pprt_softmax k = {.outer = dims[0], .n = dims[1], .inner = dims[2], .log = n->op == PP_OP_LOGSOFTMAX};
    dnnl_memory_t sm, dm;
    PP_TRY(dn_plain_view(x, n->in[0], md, &sm, err));
    PP_TRY(dn_tensor_mem(x, n->out[0], md, &dm, err));
    step st;
    PP_TRY(dn_own_step(x, run_cols, &k, sizeof k, NULL, "pprt:softmax_cols", &st, err));
    st.nargs = 2;
    st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    return dn_push_own(x, st, err);
}

static pp_status build_softmax(pprt_exec *x, const pprt_node *n, pp_err *err) {
    pp_attrs a = attrs_of(x, n);
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    int64_t dims[3];
    PP_TRY(pp_softmax_split(a, &T(x, n->in[0])->shape, &dims[0], &dims[1], &dims[2], err));
    dnnl_memory_desc_t md;
    PP_TRY(dn_plain_md(dims, 3, &md, err));
    if (dims[2] > 1 && pprt_softmax_cpu()) return build_cols(x, n, &md, dims, err);
    dnnl_softmax_v2_desc_t d;
    DN(dnnl_softmax_v2_forward_desc_init(&d, dnnl_forward_inference,
                                         n->op == PP_OP_LOGSOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate, &md,
                                         &md, 1),
       "softmax");
    dnnl_primitive_desc_t pd;
    PP_TRY(dn_plain_pd(x, &d, "softmax", &pd, err));
    if (dn_ref_impl(pd)) { /* an axis other than the last (inner > 1) */
        dnnl_primitive_desc_destroy(pd);
        return unsup(err, "oneDNN has only its reference implementation for this axis");
    }
    pp_status r;
    dnnl_memory_t sm, dm;
    if ((r = dn_plain_view(x, n->in[0], &md, &sm, err)) != PP_OK ||
        (r = dn_tensor_mem(x, n->out[0], &md, &dm, err)) != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, 2, err));
    /* a row with a NaN or +inf is all NaN, as in the reference kernel (oneDNN
     * gives NaN only where the row had one; nanfix.h) */
    const pprt_nanfix f = {.kind = PPRT_NANFIX_ROWS, .outer = dims[0], .len = dims[1], .inner = dims[2]};
    return dn_push_fix(x, &f, dm, dm, err);
}

const dn_family dn_softmax = {.build = build_softmax};
