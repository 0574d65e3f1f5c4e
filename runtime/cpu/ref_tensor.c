/* ref_tensor.c: reference kernels of the ops in ir/ops_tensor.def. */
#include "ref.h"

#include <string.h>

/* ---- Flatten ---- */

pp_status kern_FLATTEN(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,
                              int n_out, pprt_scratch *scratch, pp_err *err) {
    (void)attrs, (void)scratch;
    return pprt_copy_bytes("Flatten", in, n_in, out, n_out, err);
}

