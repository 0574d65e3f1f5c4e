/* cost.c: FLOPs and bytes touched per node, from inferred shapes. The
 * partitioner's time estimate is a roofline over these two figures; they are
 * estimates of work, not measurements. The FLOPs of the core ops of ops.def
 * (Conv, BatchNormalization, MaxPool, GlobalAveragePool, Gemm) are here; the
 * families' flops_ functions sit next to their shape functions in
 * shape_FAMILY.c. pp_node_cost dispatches over all of them. */
#include "geom.h"
#include "op_fns.h"


static double numel(const pp_tinfo *t) {
    double n = 1;
    for (int i = 0; i < t->shape.rank; i++) n *= (double)t->shape.dim[i];
    return n;
}

static double bytes(const pp_tinfo *t) { return numel(t) * (double)pp_dtype_size(t->dtype); }




double flops_CONV(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)n_in, (void)n_out;
    /* 2 * outputs * (input channels per group * kernel volume) */
    double kvol = 1;
    for (int i = 1; i < in[1].shape.rank; i++) kvol *= (double)in[1].shape.dim[i];
    return 2.0 * numel(&out[0]) * kvol;
}

double flops_BATCHNORM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 2.0 * numel(&out[0]);
}

double flops_MAXPOOL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)in, (void)n_in, (void)n_out;
    int64_t ks[PP_MAX_DIMS];
    int nk = 0;
    double kvol = 1;
    if (pp_attr_ints(a, "kernel_shape", ks, PP_MAX_DIMS, &nk, NULL) == PP_OK)
        for (int i = 0; i < nk; i++) kvol *= (double)ks[i];
    return numel(&out[0]) * kvol;
}

double flops_GLOBALAVGPOOL(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)out, (void)n_in, (void)n_out;
    return numel(&in[0]);
}

double flops_GEMM(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)n_out;
    int64_t ta = 0;
    pp_attr_int(a, "transA", 0, &ta, NULL);
    double k = (double)in[0].shape.dim[ta ? 0 : 1]; /* the inner dimension, from A */
    bool has_c = n_in > 2 && in[2].dtype != PP_UNDEFINED;
    return 2.0 * numel(&out[0]) * k + (has_c ? numel(&out[0]) : 0);
}

static pp_flops_fn *const flops_fns[PP_OP_COUNT] = {
#define PP_OP(e, name, mi, ma, no, tr) [PP_OP_##e] = flops_##e,
#include "ops.def"
#undef PP_OP
};
_Static_assert(sizeof flops_fns / sizeof flops_fns[0] == PP_OP_COUNT, "cost table out of step");

pp_cost pp_node_cost(pp_op op, pp_attrs attrs, const pp_tinfo *in, int n_in, const pp_tinfo *out,
                     int n_out) {
    pp_cost c = {0, 0};
    if ((int)op < 0 || op >= PP_OP_COUNT) return c;
    c.flops = flops_fns[op](attrs, in, n_in, out, n_out);
    for (int i = 0; i < n_in; i++)
        if (in[i].dtype != PP_UNDEFINED) c.bytes += bytes(&in[i]);
    for (int i = 0; i < n_out; i++) c.bytes += bytes(&out[i]);
    return c;
}
