/* frontend.h: ONNX ModelProto -> IR graph. The only part of the compiler that
 * knows ONNX's wire format (through protobuf-c code generated at build time
 * from Debian's onnx.proto). */
#ifndef PP_FRONTEND_H
#define PP_FRONTEND_H

#include "../ir/ir.h"

#define PP_MAX_DIM_OVERRIDES 16

typedef struct pp_import_opts {
    int64_t batch; /* value for a symbolic first dim of the inputs; 0 = default (1) */
    bool no_batch; /* inputs are whole tensors: no batch axis (ppcc -b 0) */
    int n_dims;    /* --dim NAME=VALUE for other symbolic dims */
    const char *dim_name[PP_MAX_DIM_OVERRIDES];
    int64_t dim_value[PP_MAX_DIM_OVERRIDES];
} pp_import_opts;

/* Read and import `path`. On failure g is left empty (freed) and err names the
 * culprit: the file, the node (name and index), the tensor or the attribute. */
pp_status pp_import_onnx(const char *path, const pp_import_opts *o, pp_graph *g, pp_err *err);

/* Same from bytes in memory (the fuzz target's entry point). The bytes must
 * outlive nothing: what the graph needs is copied by the protobuf parser. */
pp_status pp_import_onnx_mem(const void *buf, size_t len, const pp_import_opts *o, pp_graph *g,
                             pp_err *err);

#endif
