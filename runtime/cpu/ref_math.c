/* ref_math.c: reference kernels of the ops in ir/ops_math.def. */
#include "ref.h"

#include <math.h>
#include <string.h>

/* ---- Identity ---- */

pp_status kern_IDENTITY(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                               int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    if (n_in >= 1 && n_out >= 1) PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "Identity output", err));
    return pprt_copy_bytes("Identity", in, n_in, out, n_out, err);
}

/* ---- Relu --------------------------------------------------------------------------- */

pp_status kern_RELU(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                           int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Relu", n_in, 1, 1, n_out, err));
    PP_TRY(pprt_need_f32(&in[0], "Relu input", err));
    PP_TRY(pprt_need_f32(&out[0], "Relu output", err));
    PP_TRY(pprt_need_shape(&out[0], &in[0].shape, "Relu output", err));
    int64_t n;
    PP_TRY(pprt_numel_of(&in[0], &n, err));
    const float *restrict x = in[0].data;
    float *restrict y = out[0].data;
    /* x < 0 ? 0 : x keeps NaN as NaN (max(0, NaN) is NaN in ONNX's reference) */
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
    return PP_OK;
}

/* ---- Add (NumPy multidirectional broadcasting) -------------------------------------- */

pp_status kern_ADD(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                          int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    PP_TRY(pprt_need_counts("Add", n_in, 2, 2, n_out, err));
    PP_TRY(pprt_need_f32(&in[0], "Add input A", err));
    PP_TRY(pprt_need_f32(&in[1], "Add input B", err));
    PP_TRY(pprt_need_f32(&out[0], "Add output", err));
    const pp_shape *as = &in[0].shape, *bs = &in[1].shape, *os = &out[0].shape;
    const float *A = in[0].data, *B = in[1].data;
    float *Y = out[0].data;
    int64_t total;
    PP_TRY(pprt_numel_of(&out[0], &total, err));

    if (pp_shape_eq(as, bs) && pp_shape_eq(as, os)) { /* fast path */
        const float *restrict a = A, *restrict b = B;
        float *restrict y = Y;
        for (int64_t i = 0; i < total; i++) y[i] = a[i] + b[i];
        return PP_OK;
    }

    /* Check the broadcast and describe each output dim by whether A and B
     * vary along it; drop unit output dims and merge neighbours with the same
     * pattern, so e.g. [N,C,H,W] + [1,C,1,1] becomes [N, C, H*W]. */
    const int r = os->rank;
    if (as->rank > r || bs->rank > r)
        return PP_FAIL(err, PP_EINVAL, "Add kernel: output rank %d below input ranks", r);
    int64_t dim[PP_MAX_DIMS];
    bool va[PP_MAX_DIMS], vb[PP_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - as->rank), ib = i - (r - bs->rank);
        int64_t da = ia >= 0 ? as->dim[ia] : 1, db = ib >= 0 ? bs->dim[ib] : 1, d = os->dim[i];
        if ((da != d && da != 1) || (db != d && db != 1) || (d != 1 && da != d && db != d) ||
            (d == 1 && (da != 1 || db != 1)))
            return PP_FAIL(err, PP_EINVAL, "Add kernel: output dim %d (%lld) does not match "
                           "the broadcast of %lld and %lld", i, (long long)d, (long long)da,
                           (long long)db);
        if (d == 1) continue;
        bool fa = da == d, fb = db == d;
        if (nd > 0 && va[nd - 1] == fa && vb[nd - 1] == fb) {
            dim[nd - 1] *= d;
        } else {
            dim[nd] = d;
            va[nd] = fa;
            vb[nd] = fb;
            nd++;
        }
    }
    if (total == 0) return PP_OK;
    if (nd == 0) { /* everything is a single element */
        Y[0] = A[0] + B[0];
        return PP_OK;
    }
    /* Element strides of A and B per merged dim (0 where broadcast). */
    int64_t sa[PP_MAX_DIMS], sb[PP_MAX_DIMS], ka = 1, kb = 1;
    for (int i = nd - 1; i >= 0; i--) {
        sa[i] = va[i] ? ka : 0;
        sb[i] = vb[i] ? kb : 0;
        if (va[i]) ka *= dim[i];
        if (vb[i]) kb *= dim[i];
    }
    const int64_t inner = dim[nd - 1];
    const bool ia = va[nd - 1], ib = vb[nd - 1];
    int64_t idx[PP_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t done = 0; done < total; done += inner) {
        const float *restrict a = A + oa, *restrict b = B + ob;
        float *restrict y = Y + done;
        if (ia && ib)
            for (int64_t j = 0; j < inner; j++) y[j] = a[j] + b[j];
        else if (ia)
            for (int64_t j = 0; j < inner; j++) y[j] = a[j] + b[0];
        else
            for (int64_t j = 0; j < inner; j++) y[j] = a[0] + b[j];
        /* advance the odometer over the outer dims */
        for (int i = nd - 2; i >= 0; i--) {
            oa += sa[i];
            ob += sb[i];
            if (++idx[i] < dim[i]) break;
            oa -= sa[i] * dim[i];
            ob -= sb[i] * dim[i];
            idx[i] = 0;
        }
    }
    return PP_OK;
}

