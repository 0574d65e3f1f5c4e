/* ref_control.c: the kernels of ops_control.def, which only refuse: control
 * flow and sequences are unrolled by ppcc and never run (ir/shape_control.c
 * refuses them first when a plan names one). */
#include "ref.h"

#define CONTROL(E, NAME)                                                                      \
    pp_status kern_##E(pp_attrs attrs, const pprt_tensor *in, int n_in, pprt_tensor *out,     \
                       int n_out, pprt_scratch *scratch, pp_err *err) {                       \
        (void)attrs, (void)in, (void)n_in, (void)out, (void)n_out, (void)scratch;             \
        return PP_FAIL(err, PP_EUNSUP, NAME " cannot run as an op (ppcc unrolls it)");        \
    }
#define PP_OP(E, NAME, ...) CONTROL(E, NAME)
#include "../../ir/ops_control.def"
#undef PP_OP
