/* ref_tensor.c: reference kernels of the ops in ir/ops_tensor.def. */
#include "ref.h"
