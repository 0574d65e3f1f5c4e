/* tune_dnn.h: test_dnn --tune (tune_dnn.c). */
#ifndef PP_TUNE_DNN_H
#define PP_TUNE_DNN_H

#include <stdbool.h>

#include "runtime/cuda/cuplan.h"

/* Tune the distinct signatures of convs[] on GPU 0 (strict f32; fast: also
 * the reduced-precision signatures) for about secs seconds, and write the
 * table to out_path. Returns the exit status. */
int tune_main(const char *out_path, const pcu_conv *convs, int n_convs, bool fast, double secs);

#endif
