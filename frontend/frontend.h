/* frontend.h: ONNX ModelProto -> IR graph. The only part of the compiler that
 * knows ONNX's wire format (through protobuf-c code generated at build time
 * from Debian's onnx.proto). */
#ifndef PP_FRONTEND_H
#define PP_FRONTEND_H

#include "../ir/ir.h"

#define PP_MAX_DIM_OVERRIDES 16
#define PP_MAX_CONST_INPUTS 64

typedef struct pp_import_opts {
    int64_t batch; /* value for a symbolic first dim of the inputs; 0 = default (1) */
    bool no_batch; /* inputs are whole tensors: no batch axis (ppcc -b 0) */
    /* directory that external data locations are relative to; NULL refuses
     * external data (set by pp_import_onnx from the model's path) */
    const char *model_dir;
    int n_dims;    /* --dim NAME=VALUE for other symbolic dims */
    const char *dim_name[PP_MAX_DIM_OVERRIDES];
    int64_t dim_value[PP_MAX_DIM_OVERRIDES];
    /* --const NAME=FILE.pb: graph input NAME becomes a constant read from an
     * ONNX TensorProto file. Its type must be the declared one, and so must
     * its fixed dims (symbolic dims take the file's values). An initializer
     * that the model also lists as an input (a default value) is replaced. */
    int n_consts;
    const char *const_name[PP_MAX_CONST_INPUTS];
    const char *const_path[PP_MAX_CONST_INPUTS];
} pp_import_opts;

/* Read and import `path`. On failure g is left empty (freed) and err names the
 * culprit: the file, the node (name and index), the tensor or the attribute. */
pp_status pp_import_onnx(const char *path, const pp_import_opts *o, pp_graph *g, pp_err *err);

/* Same from bytes in memory (the fuzz target's entry point). The bytes must
 * outlive nothing: what the graph needs is copied (pp_import_onnx instead
 * keeps the file mapped and reads large initializers in place). */
pp_status pp_import_onnx_mem(const void *buf, size_t len, const pp_import_opts *o, pp_graph *g,
                             pp_err *err);

/* ---- ONNX TensorProto files (onnx_data.c) ---------------------------------------- */

/* A decoded tensor: type, shape, little-endian bytes. */
typedef struct pp_tensor_data {
    const char *name; /* the TensorProto's name ("" when it has none) */
    pp_dtype dtype;
    pp_shape shape;
    const void *data;
    size_t nbytes;
} pp_tensor_data;

/* Read one serialized TensorProto (the ONNX test-data layout's input_N.pb)
 * into g: the message is unpacked into g's arena, so name and bytes live as
 * long as the graph. Errors (PP_EIO for a missing or unreadable file,
 * PP_EINVAL / PP_EUNSUP for a malformed or unsupported tensor) name the file. */
pp_status pp_onnx_read_tensor_file(pp_graph *g, const char *path, pp_tensor_data *out,
                                   pp_err *err);

/* Decode a TensorProto (onnx_import.c; the struct is protobuf-c's, from the
 * generated onnx/onnx.pb-c.h): raw_data is used in place, typed fields are
 * converted into g's arena. `what` and `name` describe it in messages. */
struct Onnx__TensorProto;
pp_status pp_onnx_decode_tensor(pp_graph *g, const struct Onnx__TensorProto *t, const char *name,
                                const char *what, pp_dtype *out_dt, pp_shape *out_sh,
                                const void **out_data, size_t *out_nbytes, pp_err *err);

/* The bytes of a tensor stored outside the model (data_location = EXTERNAL):
 * its file is mapped read-only (once per file) and the data points into the
 * map; nothing is copied. Checks, as the onnx checker does: the location is
 * relative, stays inside the model's directory (no "..", no symbolic links on
 * the way, no file with several hard links), offset and length are in range,
 * and the length is the tensor's byte size (onnx_data.c). */
pp_status pp_onnx_external_data(pp_graph *g, const struct Onnx__TensorProto *t, const char *name,
                                const char *what, size_t nbytes, size_t align, const void **data,
                                pp_err *err);

/* ppcc --save-onnx: the model at `model` written to `out` (whole or not at
 * all) with each initializer that DIR/NAME.npy names (the file names pprt
 * --save-weights writes) holding that file's values, inline; a file naming
 * no initializer, or one of another type or shape, is refused (PP_EINVAL).
 * *replaced: how many were replaced. eval_mode: also make a training export
 * an inference model (BatchNormalization on its running statistics, Dropout
 * without its training inputs). */
pp_status pp_onnx_save_weights(const char *model, const char *dir, const char *out, bool eval_mode, int *replaced,
                               pp_err *err);

#endif
