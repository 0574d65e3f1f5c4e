/* ref_math.c: reference kernels of the ops in ir/ops_math.def. */
#include "ref.h"
