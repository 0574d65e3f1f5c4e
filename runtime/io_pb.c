/* io_pb.c: ONNX TensorProto files, the layout of the ONNX backend test data
 * (test_data_set_N/input_K.pb, output_K.pb), through the protobuf-c code
 * generated from onnx.proto (linked through pp_proto).
 *
 * Reading accepts values in raw_data (little-endian) or in the typed field
 * that ONNX assigns to the element type, for every fixed-size type; sizes
 * are checked against the dims exactly, narrow integers against their range.
 * The packed sub-byte types (uint4, int4, float4e2m1: 2 elements per byte;
 * uint2, int2: 4) take ceil(numel * bits / 8) bytes in raw_data, or that many
 * int32_data values of one byte each; the 8-bit floats one int32_data value
 * (0..255, the bits) per element.
 * Writing always uses raw_data and goes to a temporary name, renamed into
 * place. */
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx.pb-c.h"

static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
    "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2",
};

static const char *onnx_type_name(int32_t t) {
    int n = (int)(sizeof onnx_type_names / sizeof onnx_type_names[0]);
    return t >= 0 && t < n ? onnx_type_names[t] : "unknown";
}

/* The typed field ONNX keeps values of type dt in, and how many of it make
 * one element (complex numbers take two). */
typedef enum { F_FLOAT, F_DOUBLE, F_INT32, F_INT64, F_UINT64 } field;
static const char *const field_names[] = {"float_data", "double_data", "int32_data", "int64_data",
                                          "uint64_data"};

static field field_of(pp_dtype dt, int *per_elem) {
    *per_elem = dt == PP_C64 || dt == PP_C128 ? 2 : 1;
    switch (dt) {
    case PP_F32: case PP_C64: return F_FLOAT;
    case PP_F64: case PP_C128: return F_DOUBLE;
    case PP_I64: return F_INT64;
    case PP_U32: case PP_U64: return F_UINT64;
    default: return F_INT32; /* i32, i16, i8, u16, u8, bool; f16, bf16, 8-bit float bits; packed bytes */
    }
}

static size_t field_count(const Onnx__TensorProto *t, field f) {
    switch (f) {
    case F_FLOAT: return t->n_float_data;
    case F_DOUBLE: return t->n_double_data;
    case F_INT32: return t->n_int32_data;
    case F_INT64: return t->n_int64_data;
    case F_UINT64: return t->n_uint64_data;
    }
    return 0;
}

/* Range of an int32_data value for the narrow types (8-bit floats: the bits
 * of one element; packed types: one byte of 2 or 4 elements). */
static bool int32_in_range(pp_dtype dt, int32_t v) {
    switch (dt) {
    case PP_I8: return v >= -128 && v <= 127;
    case PP_U8: case PP_F8E4M3FN: case PP_F8E4M3FNUZ: case PP_F8E5M2: case PP_F8E5M2FNUZ:
    case PP_F8E8M0: case PP_U4: case PP_I4: case PP_F4E2M1: case PP_U2: case PP_I2:
        return v >= 0 && v <= 255;
    case PP_I16: return v >= -32768 && v <= 32767;
    case PP_U16: case PP_F16: case PP_BF16: return v >= 0 && v <= 65535;
    case PP_BOOL: return v == 0 || v == 1;
    default: return true;
    }
}

/* Typed values -> little-endian bytes in buf (count values of the typed
 * field: elements, complex parts, or the bytes of a packed type). */
static pp_status convert_typed(const Onnx__TensorProto *t, pp_dtype dt, int64_t nvals, void *buf,
                               const char *path, pp_err *err) {
    int per;
    field f = field_of(dt, &per);
    for (int64_t i = 0; i < nvals; i++) {
        switch (dt) {
        case PP_F32: case PP_C64: ((float *)buf)[i] = t->float_data[i]; break;
        case PP_F64: case PP_C128: ((double *)buf)[i] = t->double_data[i]; break;
        case PP_I64: ((int64_t *)buf)[i] = t->int64_data[i]; break;
        case PP_U64: ((uint64_t *)buf)[i] = t->uint64_data[i]; break;
        case PP_U32:
            if (t->uint64_data[i] > UINT32_MAX)
                return PP_FAIL(err, PP_EINVAL, "%s: uint64_data[%lld] = %llu is out of range for %s",
                               path, (long long)i, (unsigned long long)t->uint64_data[i],
                               pp_dtype_name(dt));
            ((uint32_t *)buf)[i] = (uint32_t)t->uint64_data[i];
            break;
        default: {
            int32_t v = t->int32_data[i];
            if (!int32_in_range(dt, v))
                return PP_FAIL(err, PP_EINVAL, "%s: %s[%lld] = %d is out of range for %s", path,
                               field_names[f], (long long)i, (int)v, pp_dtype_name(dt));
            switch (pp_dtype_bits(dt)) {
            case 2: case 4: case 8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
            case 16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
            default: ((int32_t *)buf)[i] = v; break;
            }
        }
        }
    }
    return PP_OK;
}

static pp_status decode(const Onnx__TensorProto *t, const char *path, pprt_npy *out, pp_err *err) {
    if (!t->has_data_type || t->data_type == 0)
        return PP_FAIL(err, PP_EINVAL, "%s: the tensor has no element type (not a TensorProto?)", path);
    int32_t ty = t->data_type;
    if (ty < 0 || ty > PP_I2 || ty == PP_STRING || pp_dtype_bits((pp_dtype)ty) == 0)
        return PP_FAIL(err, PP_EUNSUP, "%s: element type %d (%s) is not supported", path, (int)ty,
                       onnx_type_name(ty));
    pp_dtype dt = (pp_dtype)ty;
    if (t->segment) return PP_FAIL(err, PP_EUNSUP, "%s: segmented tensors are not supported", path);
    if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        t->n_external_data)
        return PP_FAIL(err, PP_EUNSUP, "%s: external data is not supported", path);
    if (t->n_dims > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "%s: rank %zu exceeds %d", path, t->n_dims, PP_MAX_DIMS);
    out->dtype = dt;
    out->shape.rank = (int)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "%s: dimension %zu is negative (%lld)", path, i,
                           (long long)t->dims[i]);
        out->shape.dim[i] = t->dims[i];
    }
    pp_err e = {0};
    if (pp_shape_nbytes(&out->shape, dt, &out->nbytes, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s: %s", path, e.msg);
    int64_t count;
    PP_TRY(pp_shape_numel(&out->shape, &count, err));
    int per;
    field f = field_of(dt, &per);
    /* values the typed field holds: elements (complex: 2 parts each), or for
     * the packed types their bytes, 2 or 4 elements to a value */
    const bool packed = pp_dtype_packed(dt);
    const int64_t nvals = packed ? (int64_t)out->nbytes : count * per;
    /* values anywhere but where this type keeps them are a malformed file */
    for (int k = F_FLOAT; k <= F_UINT64; k++) {
        size_t have = field_count(t, (field)k);
        if (have && (k != (int)f || t->has_raw_data))
            return PP_FAIL(err, PP_EINVAL, "%s: type %s, but the tensor holds %zu values in %s%s",
                           path, pp_dtype_name(dt), have, field_names[k],
                           t->has_raw_data ? " besides raw_data" : "");
    }
    if (t->n_string_data)
        return PP_FAIL(err, PP_EINVAL, "%s: type %s, but the tensor holds strings", path,
                       pp_dtype_name(dt));
    if (t->has_raw_data && t->raw_data.len != out->nbytes)
        return PP_FAIL(err, PP_EINVAL,
                       "%s: raw_data holds %zu bytes, expected %zu (dims x %u-bit %s%s)", path,
                       t->raw_data.len, out->nbytes, pp_dtype_bits(dt), pp_dtype_name(dt),
                       packed ? ", packed" : "");
    if (!t->has_raw_data && field_count(t, f) != (size_t)nvals)
        return PP_FAIL(err, PP_EINVAL, "%s: %s holds %zu values, expected %lld (dims%s)", path,
                       field_names[f], field_count(t, f), (long long)nvals,
                       per == 2   ? " x 2 for complex"
                       : packed ? (pp_dtype_bits(dt) == 4 ? ", 2 elements per packed byte"
                                                          : ", 4 elements per packed byte")
                                : "");
    if (posix_memalign(&out->data, 64, out->nbytes ? out->nbytes : 64) != 0) {
        out->data = NULL;
        return PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %zu bytes", path, out->nbytes);
    }
    if (t->has_raw_data) {
        if (out->nbytes) memcpy(out->data, t->raw_data.data, out->nbytes);
        return PP_OK;
    }
    return convert_typed(t, dt, nvals, out->data, path, err);
}

pp_status pprt_pb_read(const char *path, pprt_npy *out, char **name, pp_err *err) {
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    int fd;
    struct stat sb;
    PP_TRY(pp_open_read(path, NULL, 0, &fd, &sb, err));
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return PP_FAIL(err, PP_EIO, "cannot read '%s': %s", path, strerror(errno));
    }
    size_t len = (size_t)sb.st_size;
    if (len == 0) {
        fclose(fp);
        return PP_FAIL(err, PP_EINVAL, "%s: not an ONNX TensorProto: the file is empty", path);
    }
    unsigned char *buf = malloc(len);
    if (!buf) {
        fclose(fp);
        return PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %zu bytes", path, len);
    }
    bool whole = fread(buf, 1, len, fp) == len;
    fclose(fp);
    if (!whole) {
        free(buf);
        return PP_FAIL(err, PP_EIO, "%s: short read", path);
    }
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!t)
        return PP_FAIL(err, PP_EINVAL,
                       "%s: not an ONNX TensorProto: protobuf parsing failed (truncated or "
                       "corrupt file)", path);
    pp_status s = decode(t, path, out, err);
    if (s == PP_OK && name && !(*name = strdup(t->name ? t->name : "")))
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    onnx__tensor_proto__free_unpacked(t, NULL);
    if (s != PP_OK) pprt_npy_free(out);
    return s;
}

pp_status pprt_pb_write(const char *path, const char *name, pp_dtype dt, const pp_shape *sh,
                        const void *data, pp_err *err) {
    size_t nbytes;
    PP_TRY(pp_shape_nbytes(sh, dt, &nbytes, err));
    int64_t dims[PP_MAX_DIMS];
    for (int i = 0; i < sh->rank; i++) dims[i] = sh->dim[i];
    Onnx__TensorProto t;
    onnx__tensor_proto__init(&t);
    t.n_dims = (size_t)sh->rank;
    t.dims = dims;
    t.has_data_type = true;
    t.data_type = (int32_t)dt;
    t.name = (char *)name;
    t.has_raw_data = true;
    t.raw_data.len = nbytes;
    t.raw_data.data = (uint8_t *)data;
    size_t len = onnx__tensor_proto__get_packed_size(&t);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %zu bytes", path, len);
    onnx__tensor_proto__pack(&t, buf);
    pp_outfile out;
    pp_status s = pp_outfile_open(&out, path, err);
    if (s == PP_OK) s = pp_outfile_commit(&out, fwrite(buf, 1, len, out.f) == len, err);
    free(buf);
    return s;
}
