/* shape_nn.c: shape inference and FLOPs of the ops in ops_nn.def. */
#include "geom.h"
#include "op_fns.h"
