/* ref_nn.c: reference kernels of the ops in ir/ops_nn.def. */
#include "ref.h"
