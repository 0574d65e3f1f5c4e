/* concat.c: Concat on oneDNN's concat, its inputs read in the layouts they
 * are stored in and its output in the layout oneDNN picks for them. On the
 * reference kernel a Concat is plain: in DenseNet-121, whose every layer
 * concatenates its convolution's output to the block's features, that put
 * each BatchNormalization on oneDNN's plain-layout kernel and cost two
 * reorders per layer (182 a micro-batch); blocked, the features stay in the
 * convolutions' layout from end to end. Inputs in mixed layouts (a plain
 * tensor received at a cut beside a blocked one) are fine: oneDNN's concat,
 * named ref:any, reorders each input into its window of the output with its
 * JIT reorders, so unlike the other families it is not refused for that
 * name (steps.c, dn_ref_impl). */
#include "dnnl_exec.h"

static pp_status build_concat(pprt_exec *x, const pprt_node *n, pp_err *err) {
    PP_TRY(dn_need_f32_nonempty(x, n, err));
    const pp_shape *ys = &T(x, n->out[0])->shape;
    if (ys->rank < 1 || ys->rank > DNNL_MAX_NDIMS) return unsup(err, "rank");
    if (n->n_in < 2 || n->n_in > MAX_ARGS - 1) return unsup(err, "input count");
    int64_t axis;
    PP_TRY(pp_attr_int(attrs_of(x, n), "axis", 0, &axis, err));
    if (axis < 0) axis += ys->rank;
    if (axis < 0 || axis >= ys->rank) return unsup(err, "axis");
    dnnl_memory_desc_t src[MAX_ARGS], dst_any;
    for (int k = 0; k < n->n_in; k++) PP_TRY(dn_tensor_layout(x, n->in[k], &src[k], err));
    PP_TRY(dn_any_md(ys->dim, ys->rank, dnnl_f32, &dst_any, err));
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_concat_primitive_desc_create(&pd, &dst_any, n->n_in, (int)axis, src, attr, x->eng);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "concat");
    dnnl_exec_arg_t args[MAX_ARGS];
    dnnl_memory_t dm;
    post out;
    pp_status r = dn_bind_output(x, n->out[0], dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &dm, &out,
                                 err);
    for (int k = 0; r == PP_OK && k < n->n_in; k++) {
        args[k].arg = DNNL_ARG_MULTIPLE_SRC + k;
        r = dn_tensor_mem(x, n->in[k], &src[k], &args[k].memory, err);
    }
    if (r != PP_OK) {
        dnnl_primitive_desc_destroy(pd);
        return r;
    }
    args[n->n_in] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    PP_TRY(dn_push_pd(x, pd, STEP_MAIN, args, n->n_in + 1, err));
    return dn_push_post(x, &out, err);
}

/* every input in any layout */
const dn_family dn_concat = {.build = build_concat, .any_in = ~0u};
