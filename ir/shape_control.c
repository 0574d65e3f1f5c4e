/* shape_control.c: the shape functions of ops_control.def. Control flow and
 * sequence ops never reach shape inference in a working compile (the infer
 * pass unrolls them first, passes/unroll.c), nor a plan: these only refuse,
 * saying why, e.g. when a plan names one or the fold pass was disabled. */
#include "op_fns.h"

#define CONTROL(E, NAME)                                                                      \
    pp_status shape_##E(pp_attrs a, const pp_tinfo *in, int n_in, pp_tinfo *out, int n_out,   \
                        pp_err *err) {                                                        \
        (void)a, (void)in, (void)n_in, (void)out, (void)n_out;                                \
        return PP_FAIL(err, PP_EUNSUP,                                                        \
                       NAME " is unrolled at compile time, while constants are folded (it "   \
                       "cannot run as an op: do not disable the fold pass)");                 \
    }                                                                                         \
    double flops_##E(pp_attrs a, const pp_tinfo *in, int n_in, const pp_tinfo *out,          \
                     int n_out) {                                                             \
        (void)a, (void)in, (void)n_in, (void)out, (void)n_out;                                \
        return 0;                                                                             \
    }
#define PP_OP(E, NAME, ...) CONTROL(E, NAME)
#include "ops_control.def"
#undef PP_OP
