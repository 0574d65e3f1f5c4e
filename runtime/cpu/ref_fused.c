/* ref_fused.c: reference kernels of the fused ops (ir/ops_fused.def). The
 * fused conv runs the Conv kernel, then adds the residual and applies the
 * activation in one pass over the output: the reference for what faster
 * backends do inside their convolution. */
#include <math.h>
#include <string.h>

#include "ref.h"

pp_status kern_FUSEDCONV(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                         int n_out, pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_FUSEDCONV);
    PP_TRY(kern_CONV(attrs, in, n_in < 3 ? n_in : 3, out, n_out, scratch, err));
    int64_t n;
    PP_TRY(pprt_numel_of(&out[0], &n, err));
    float *restrict y = out[0].data;
    if (n_in > 3 && in[3].dtype != PP_UNDEFINED) {
        const float *restrict z = in[3].data;
        for (int64_t i = 0; i < n; i++) y[i] += z[i];
    }
    const char *act;
    PP_TRY(pp_attr_string(attrs, "activation", "", &act, err));
    if (!strcmp(act, "Relu")) {
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
    } else if (!strcmp(act, "Clip")) {
        float lo, hi;
        PP_TRY(pp_attr_float(attrs, "clip_min", -INFINITY, &lo, err));
        PP_TRY(pp_attr_float(attrs, "clip_max", INFINITY, &hi, err));
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < lo ? lo : y[i] > hi ? hi : y[i];
    }
    return PP_OK;
}

pp_status kern_SILU(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                    pprt_scratch *scratch, pp_err *err) {
    PP_TRY(pprt_need_counts("pp.SiLU", n_in, 1, 1, n_out, err));
    PPRT_LIFT(kern_SILU); /* f16/bf16 (ppcc --precision): in f32, the output rounded */
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_f32(&in[0], "pp.SiLU input", err));
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    const float *restrict x = in[0].data;
    float *restrict y = out[0].data;
    /* the same arithmetic as Sigmoid then Mul: x * (1 / (1 + exp(-x))) */
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * (1.0f / (1.0f + expf(-x[i])));
    return PP_OK;
}

/* Bit for bit what the reference kernels of Reshape, InstanceNormalization
 * (scale 1, bias 0), Reshape, Mul and Add give: the group's moments in the
 * order InstanceNormalization sums them, the normalized value rounded to
 * float, then the product and the sum in float. */
pp_status kern_FUSEDGN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out, int n_out,
                       pprt_scratch *scratch, pp_err *err) {
    PPRT_LIFT(kern_FUSEDGN); /* a half plan's: in f32, Y rounded */
    return pprt_groupnorm_kernel(PP_OP_FUSEDGN, PPRT_GN_AFTER, attrs, in, n_in, out, n_out, err);
}
