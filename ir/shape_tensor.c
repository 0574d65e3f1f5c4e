/* shape_tensor.c: shape inference and FLOPs of the ops in ops_tensor.def. */
#include "geom.h"
#include "op_fns.h"
