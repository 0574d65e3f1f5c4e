/* reduce.c: ReduceSum, ReduceMean, ReduceL1, ReduceL2, ReduceSumSquare,
 * ReduceMax and ReduceMin of float tensors on pprt's own kernel
 * (runtime/dnnl/kernels/reduce.h), where the reduced axes are one run of neighbours
 * and the axes are constants; the others (ReduceProd, the logarithmic ones,
 * other element types) stay on the reference kernels. A reduction over the
 * spatial axes reads its input channels last or blocked on channels as it is
 * stored, f32 or --precision bf16's bfloat16 (ConvNeXt-V2's GRN: the
 * ReduceL2 after a convolution had turned its output plain, and the Muls
 * after it, and the next convolution reordered it back: 5 ms a block at
 * 56 x 56); any other reads a plain f32 copy. */
#include "../../ir/shape_nn.h"
#include "dnnl_exec.h"
#include "kernels/reduce.h"

static int kind_of(pp_op op) {
    switch (op) {
    case PP_OP_REDUCESUM: return PPRT_RED_SUM;
    case PP_OP_REDUCEMEAN: return PPRT_RED_MEAN;
    case PP_OP_REDUCEL1: return PPRT_RED_L1;
    case PP_OP_REDUCEL2: return PPRT_RED_L2;
    case PP_OP_REDUCESUMSQUARE: return PPRT_RED_SUMSQUARE;
    case PP_OP_REDUCEMAX: return PPRT_RED_MAX;
    case PP_OP_REDUCEMIN: return PPRT_RED_MIN;
    default: return PPRT_RED_NONE;
    }
}

static void run_reduce(void *ctx, void *const io[N_IO], int team) {
    pprt_reduce_run(ctx, io[IO_SRC], io[IO_DST], team);
}

static pp_status build_reduce(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0], out = n->out[0];
    if (T(x, in)->dtype != PP_F32 || T(x, out)->dtype != PP_F32) return unsup(err, "not float32");
    const pp_tinfo xt = {T(x, in)->dtype, T(x, in)->shape, NULL};
    const int ax = n->n_in > 1 ? n->in[1] : -1;
    if (ax >= 0 && !is_weight(x, ax)) return unsup(err, "computed axes");
    const pp_tinfo at = dn_tinfo(x, ax);
    pp_reduce r;
    if (pp_reduce_parse(n->op, attrs_of(x, n), &xt, n->n_in > 1 ? &at : NULL, &r, err) != PP_OK)
        return unsup(err, "not constant axes");
    const pp_shape *s = &T(x, in)->shape;
    pprt_reduce k;
    if (!pprt_reduce_plan(s->dim, s->rank, r.mask, kind_of(n->op), &k))
        return unsup(err, "the reduced axes are not neighbours, or it is empty");
    if (k.outer * k.inner != numel_of(&T(x, out)->shape)) return unsup(err, "the output's size");
    /* the input as stored where its channels are vectors (whole ones) the spatial axes run inside
     * and the reduction is over those axes (the same bits as from its plain copy), else plain */
    dnnl_memory_desc_t src, dst;
    PP_TRY(dn_tensor_plain(x, in, &src, err));
    PP_TRY(dn_tensor_plain(x, out, &dst, err));
    pprt_layout l;
    if (x->tn.blocked[in] && dn_own_layout(&x->tn.lay[in], &l) && l.vec > 1 && l.stride_n == l.C * l.S &&
        (l.vec == l.C || l.stride_c == l.S * l.vec) &&
        pprt_reduce_channels(&k, l.N, l.C, l.vec, x->tn.lay[in].data_type == dnnl_bf16))
        src = x->tn.lay[in];
    step st;
    PP_TRY(dn_own_step(x, run_reduce, &k, sizeof k, NULL, "pprt:reduce", &st, err));
    bool taken;
    return dn_push_own_any(x, st, 0, in, &src, out, &dst, &taken, err);
}

const dn_family dn_reduce = {.build = build_reduce, .any_in = 1u << 0};
