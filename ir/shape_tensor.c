/* shape_tensor.c: shape inference and FLOPs of the ops in ops_tensor.def. */
#include "geom.h"
#include "op_fns.h"

pp_status shape_FLATTEN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                               pp_err *err) {
    (void)n_in, (void)n_out;
    int r = in[0].shape.rank;
    int64_t axis;
    PP_TRY(pp_attr_int(a, "axis", 1, &axis, err));
    if (axis < -r || axis > r)
        return PP_FAIL(err, PP_EINVAL, "attribute 'axis'=%lld out of range [%d, %d]", (long long)axis, -r, r);
    if (axis < 0) axis += r;
    int64_t d0 = 1, d1 = 1;
    for (int i = 0; i < r; i++) {
        int64_t *d = i < axis ? &d0 : &d1;
        if (__builtin_mul_overflow(*d, in[0].shape.dim[i], d))
            return PP_FAIL(err, PP_EINVAL, "element count overflows");
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = (pp_shape){.rank = 2, .dim = {d0, d1}};
    return PP_OK;
}

double flops_FLATTEN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)out, (void)n_out;
    return 0;
}
