/* shape_math.c: shape inference and FLOPs of the ops in ops_math.def. */
#include "geom.h"
#include "op_fns.h"
