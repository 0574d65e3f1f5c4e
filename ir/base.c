/* base.c: errors, dtypes, shapes, attribute getters and the op name table.
 * Pure functions over the types of base.h; no allocation. */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

pp_status pp_fail_at(pp_err *err, const char *file, int line, pp_status code,
                     const char *fmt, ...) {
    if (!err || err->code != PP_OK) return code;
    err->code = code;
    err->file = file;
    err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *pp_status_name(pp_status s) {
    switch (s) {
    case PP_OK: return "ok";
    case PP_EINVAL: return "invalid input";
    case PP_EUNSUP: return "unsupported";
    case PP_EIO: return "i/o error";
    case PP_ENOMEM: return "out of memory";
    case PP_ERUNTIME: return "runtime error";
    case PP_EMISMATCH: return "mismatch";
    }
    return "?";
}

int pp_exit_code(pp_status s) {
    switch (s) {
    case PP_OK: return 0;
    case PP_EINVAL: case PP_EUNSUP: case PP_EIO: return 2;
    default: return 1;
    }
}

/* ---- dtypes ---------------------------------------------------------------- */

static const struct {
    pp_dtype t;
    size_t size;
    const char *name, *npy;
} dtypes[] = {
    {PP_F32, 4, "f32", "<f4"},  {PP_U8, 1, "u8", "|u1"},    {PP_I8, 1, "i8", "|i1"},
    {PP_U16, 2, "u16", "<u2"},  {PP_I16, 2, "i16", "<i2"},  {PP_I32, 4, "i32", "<i4"},
    {PP_I64, 8, "i64", "<i8"},  {PP_STRING, 0, "string", NULL},
    {PP_BOOL, 1, "bool", "|b1"}, {PP_F16, 2, "f16", "<f2"}, {PP_F64, 8, "f64", "<f8"},
    {PP_U32, 4, "u32", "<u4"},  {PP_U64, 8, "u64", "<u8"},  {PP_C64, 8, "c64", "<c8"},
    {PP_C128, 16, "c128", "<c16"}, {PP_BF16, 2, "bf16", NULL},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

size_t pp_dtype_size(pp_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t) return dtypes[i].size;
    return 0;
}

const char *pp_dtype_name(pp_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t) return dtypes[i].name;
    return "?";
}

const char *pp_dtype_npy(pp_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t) return dtypes[i].npy;
    return NULL;
}

pp_dtype pp_dtype_from_npy(const char *descr) {
    if (!descr) return PP_UNDEFINED;
    for (size_t i = 0; i < N_DTYPES; i++) {
        const char *d = dtypes[i].npy;
        if (!d) continue;
        /* NumPy writes '|' for one-byte types, and may write '=' for native
         * order; accept '<', '|' and '=' interchangeably (this is a
         * little-endian-only project: docs/plan-format.md). */
        if (strcmp(d + 1, descr + 1) == 0 &&
            (descr[0] == '<' || descr[0] == '|' || descr[0] == '='))
            return dtypes[i].t;
    }
    return PP_UNDEFINED;
}

/* ---- shapes ----------------------------------------------------------------- */

bool pp_shape_eq(const pp_shape *a, const pp_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

pp_status pp_shape_numel(const pp_shape *s, int64_t *out, pp_err *err) {
    if (s->rank < 0 || s->rank > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EINVAL, "rank %d out of range 0..%d", s->rank, PP_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "dimension %d is unknown or negative (%lld)", i,
                           (long long)s->dim[i]);
        if (__builtin_mul_overflow(n, s->dim[i], &n))
            return PP_FAIL(err, PP_EINVAL, "element count overflows 64 bits");
    }
    *out = n;
    return PP_OK;
}

pp_status pp_shape_nbytes(const pp_shape *s, pp_dtype t, size_t *out, pp_err *err) {
    int64_t n;
    PP_TRY(pp_shape_numel(s, &n, err));
    size_t es = pp_dtype_size(t);
    if (es == 0) return PP_FAIL(err, PP_EUNSUP, "element type %s has no fixed size", pp_dtype_name(t));
    if ((uint64_t)n > SIZE_MAX || pp_mul_ovf((size_t)n, es, out))
        return PP_FAIL(err, PP_EINVAL, "byte size overflows 64 bits");
    return PP_OK;
}

char *pp_shape_str(const pp_shape *s, char *buf, size_t n) {
    size_t k = 0;
    if (n == 0) return buf;
    buf[0] = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < s->rank && k < n; i++) {
        if (s->dim[i] < 0)
            k += (size_t)snprintf(buf + k, n - k, "%s?", i ? "," : "");
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)s->dim[i]);
    }
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---- attributes ------------------------------------------------------------- */

const pp_attr *pp_attr_find(pp_attrs as, const char *name) {
    for (int i = 0; i < as.n; i++)
        if (strcmp(as.a[i].name, name) == 0) return &as.a[i];
    return NULL;
}

static pp_status wrong_type(pp_err *err, const char *name, const char *want) {
    return PP_FAIL(err, PP_EINVAL, "attribute '%s': expected %s", name, want);
}

pp_status pp_attr_int(pp_attrs as, const char *name, int64_t def, int64_t *out, pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    if (!a) { *out = def; return PP_OK; }
    if (a->type != PP_ATTR_INT) return wrong_type(err, name, "an int");
    *out = a->i;
    return PP_OK;
}

pp_status pp_attr_float(pp_attrs as, const char *name, float def, float *out, pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    if (!a) { *out = def; return PP_OK; }
    if (a->type != PP_ATTR_FLOAT) return wrong_type(err, name, "a float");
    *out = a->f;
    return PP_OK;
}

pp_status pp_attr_string(pp_attrs as, const char *name, const char *def, const char **out,
                         pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    if (!a) { *out = def; return PP_OK; }
    if (a->type != PP_ATTR_STRING) return wrong_type(err, name, "a string");
    *out = a->s;
    return PP_OK;
}

pp_status pp_attr_tensor(pp_attrs as, const char *name, const pp_attr **out, pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    *out = NULL;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_TENSOR) return wrong_type(err, name, "a tensor");
    *out = a;
    return PP_OK;
}

pp_status pp_attr_ints(pp_attrs as, const char *name, int64_t *out, int max, int *n, pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    *n = 0;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_INTS) return wrong_type(err, name, "a list of ints");
    if (a->n > max)
        return PP_FAIL(err, PP_EINVAL, "attribute '%s': %d values, at most %d supported", name,
                       a->n, max);
    for (int i = 0; i < a->n; i++) out[i] = a->ints[i];
    *n = a->n;
    return PP_OK;
}

/* ---- op table ---------------------------------------------------------------- */

const pp_op_info pp_op_table[PP_OP_COUNT] = {
#define PP_OP(e, name, mi, ma, no) [PP_OP_##e] = {name, mi, ma, no},
#include "ops.def"
#undef PP_OP
};

bool pp_op_lookup(const char *name, pp_op *out) {
    for (int i = 0; i < PP_OP_COUNT; i++)
        if (strcmp(pp_op_table[i].name, name) == 0) {
            *out = (pp_op)i;
            return true;
        }
    return false;
}
