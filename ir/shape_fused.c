/* shape_fused.c: shape inference and FLOPs of the fused ops (ops_fused.def). */
#include <string.h>

#include "op_fns.h"

pp_status shape_FUSEDCONV(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                          pp_err *err) {
    PP_TRY(shape_CONV(a, in, n_in < 3 ? n_in : 3, out, n_out, err));
    if (n_in > 3 && in[3].dtype != PP_UNDEFINED) {
        char s1[96], s2[96];
        if (in[3].dtype != out[0].dtype || !pp_shape_eq(&in[3].shape, &out[0].shape))
            return PP_FAIL(err, PP_EINVAL, "residual Z is %s %s, expected %s %s (the conv output)",
                           pp_dtype_name(in[3].dtype), pp_shape_str(&in[3].shape, s1, sizeof s1),
                           pp_dtype_name(out[0].dtype), pp_shape_str(&out[0].shape, s2, sizeof s2));
    }
    const char *act;
    PP_TRY(pp_attr_string(a, "activation", "", &act, err));
    if (*act && strcmp(act, "Relu") != 0 && strcmp(act, "Clip") != 0)
        return PP_FAIL(err, PP_EINVAL, "attribute 'activation'='%s': expected Relu or Clip", act);
    return PP_OK;
}

double flops_FUSEDCONV(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    double f = flops_CONV(a, in, n_in < 3 ? n_in : 3, out, n_out);
    return f + (n_in > 3 ? pp_numel_d(&out[0]) : 0) + pp_numel_d(&out[0]);
}

pp_status shape_SILU(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,
                     pp_err *err) {
    (void)a, (void)n_in, (void)n_out;
    PP_TRY(pp_need_float_half(&in[0], "input X", err)); /* half: as Sigmoid and Mul are (ppcc --precision) */
    out[0] = (pp_tinfo){in[0].dtype, in[0].shape, NULL};
    return PP_OK;
}

double flops_SILU(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    (void)a, (void)in, (void)n_in, (void)n_out;
    return 4 * pp_numel_d(&out[0]);
}

/* GroupNormalization's checks with one scale and bias per channel (its form
 * from opset 21) */
pp_status shape_FUSEDGN(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out, pp_err *err) {
    pp_attrs per_channel = a;
    per_channel.opset = 21;
    return shape_GROUPNORM(per_channel, in, n_in, out, n_out, err);
}

double flops_FUSEDGN(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out, int n_out) {
    return flops_GROUPNORM(a, in, n_in, out, n_out) + 2 * pp_numel_d(&out[0]);
}
