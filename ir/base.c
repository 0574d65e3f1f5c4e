/* base.c: errors, dtypes, shapes, attribute getters and the op name table.
 * Pure functions over the types of base.h; no allocation. */
#include "base.h"

#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <threads.h>
#include <unistd.h>

/* A source path as the project names it (runtime/data.c): the build passes
 * -fmacro-prefix-map for the absolute path, but a compiler launcher that
 * rewrites paths relative to the build folder (ccache's CCACHE_BASEDIR)
 * hands the compiler ../runtime/data.c, which no prefix map matches. */
static const char *src_path(const char *file) {
    while (file) {
        if (strncmp(file, "./", 2) == 0) file += 2;
        else if (strncmp(file, "../", 3) == 0) file += 3;
        else break;
    }
    return file;
}

pp_status pp_fail_at(pp_err *err, const char *file, int line, pp_status code,
                     const char *fmt, ...) {
    if (!err || err->code != PP_OK) return code;
    err->code = code;
    err->file = src_path(file);
    err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* out of memory: how much was mapped then, and under what limit (once,
     * however often the message is wrapped) */
    size_t len = strlen(err->msg);
    if (code == PP_ENOMEM && !strstr(err->msg, " MiB mapped") && len + 8 < sizeof err->msg) {
        err->msg[len] = ' ';
        err->msg[len + 1] = '(';
        pp_memory_note(err->msg + len + 2, sizeof err->msg - len - 3);
        strcat(err->msg, ")");
    }
    return code;
}

pp_status pp_wrap_at(pp_err *err, const pp_err *inner, const char *file, int line, pp_status code, const char *fmt,
                     ...) {
    if (!err || err->code != PP_OK) return code;
    err->code = code;
    err->file = inner && inner->file ? inner->file : src_path(file);
    err->line = inner && inner->file ? inner->line : line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code; /* (an out-of-memory inner message carries its memory note already) */
}

void pp_memory_note(char *buf, size_t n) {
    /* no stdio: this runs when memory has run out */
    unsigned long pages = 0;
    char t[64];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, t, sizeof t - 1);
        close(fd);
        t[k > 0 ? k : 0] = 0;
        pages = strtoul(t, NULL, 10);
    }
    double mapped = (double)pages * (double)sysconf(_SC_PAGESIZE) / 1048576;
    struct rlimit as, data;
    bool has_as = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    bool has_data = getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY;
    if (has_as || has_data)
        snprintf(buf, n, "%.1f MiB mapped, under a %.1f MiB %s", mapped,
                 (double)(has_as ? as.rlim_cur : data.rlim_cur) / 1048576,
                 has_as ? "address-space limit (ulimit -v)" : "data limit (ulimit -d)");
    else
        snprintf(buf, n, "%.1f MiB mapped, no address-space limit", mapped);
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
    unsigned bits;
    const char *name, *npy;
} dtypes[] = {
    {PP_F32, 32, "f32", "<f4"},  {PP_U8, 8, "u8", "|u1"},    {PP_I8, 8, "i8", "|i1"},
    {PP_U16, 16, "u16", "<u2"},  {PP_I16, 16, "i16", "<i2"},  {PP_I32, 32, "i32", "<i4"},
    {PP_I64, 64, "i64", "<i8"},  {PP_STRING, 0, "string", NULL},
    {PP_BOOL, 8, "bool", "|b1"}, {PP_F16, 16, "f16", "<f2"}, {PP_F64, 64, "f64", "<f8"},
    {PP_U32, 32, "u32", "<u4"},  {PP_U64, 64, "u64", "<u8"},  {PP_C64, 64, "c64", "<c8"},
    {PP_C128, 128, "c128", "<c16"}, {PP_BF16, 16, "bf16", NULL},
    /* NumPy has none of these (ml_dtypes' arrays are not .npy types) */
    {PP_F8E4M3FN, 8, "f8e4m3fn", NULL}, {PP_F8E4M3FNUZ, 8, "f8e4m3fnuz", NULL},
    {PP_F8E5M2, 8, "f8e5m2", NULL},     {PP_F8E5M2FNUZ, 8, "f8e5m2fnuz", NULL},
    {PP_U4, 4, "u4", NULL},             {PP_I4, 4, "i4", NULL},
    {PP_F4E2M1, 4, "f4e2m1", NULL},     {PP_F8E8M0, 8, "f8e8m0", NULL},
    {PP_U2, 2, "u2", NULL},             {PP_I2, 2, "i2", NULL},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

unsigned pp_dtype_bits(pp_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t) return dtypes[i].bits;
    return 0;
}

size_t pp_dtype_size(pp_dtype t) {
    unsigned b = pp_dtype_bits(t);
    return b % 8 == 0 ? b / 8 : 0;
}

bool pp_dtype_packed(pp_dtype t) {
    unsigned b = pp_dtype_bits(t);
    return b > 0 && b < 8;
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

/* ---- small float formats ----------------------------------------------------- */

static const struct {
    pp_dtype t;
    pp_minifloat f;
} minifloats[] = {
    /* e4m3fn: 448 = 1.110b * 2^8 (S.1111.111 is NaN) */
    {PP_F8E4M3FN, {4, 3, 7, PP_NAN_ALL_ONES, 0x7e}},
    /* e4m3fnuz: 240 = 1.111b * 2^7 */
    {PP_F8E4M3FNUZ, {4, 3, 8, PP_NAN_NEG_ZERO, 0x7f}},
    /* e5m2: 57344 = 1.11b * 2^15 (S.11111.00 is inf) */
    {PP_F8E5M2, {5, 2, 15, PP_NAN_IEEE, 0x7b}},
    /* e5m2fnuz: 57344 = 1.11b * 2^15 */
    {PP_F8E5M2FNUZ, {5, 2, 16, PP_NAN_NEG_ZERO, 0x7f}},
    /* e2m1: 6 = 1.1b * 2^2 */
    {PP_F4E2M1, {2, 1, 1, PP_NAN_NONE, 0x7}},
};

const pp_minifloat *pp_minifloat_of(pp_dtype t) {
    for (size_t i = 0; i < sizeof minifloats / sizeof minifloats[0]; i++)
        if (minifloats[i].t == t) return &minifloats[i].f;
    return NULL;
}

double pp_minifloat_value(pp_dtype t, unsigned code) {
    if (t == PP_F8E8M0) return (code & 0xff) == 0xff ? NAN : ldexp(1.0, (int)(code & 0xff) - 127);
    const pp_minifloat *f = pp_minifloat_of(t);
    if (!f) return NAN;
    const unsigned nb = (unsigned)(1 + f->ebits + f->mbits);
    const unsigned sign = 1u << (nb - 1), emax = (1u << f->ebits) - 1;
    code &= (1u << nb) - 1;
    const unsigned e = (code >> f->mbits) & emax, m = code & ((1u << f->mbits) - 1);
    const bool neg = code & sign;
    switch (f->nan) {
    case PP_NAN_IEEE:
        if (e == emax) return m ? (neg ? -NAN : NAN) : (neg ? -INFINITY : INFINITY);
        break;
    case PP_NAN_ALL_ONES:
        if (e == emax && m == (1u << f->mbits) - 1) return neg ? -NAN : NAN;
        break;
    case PP_NAN_NEG_ZERO:
        if (code == sign) return NAN;
        break;
    case PP_NAN_NONE: break;
    }
    /* exponent 0: m * 2^(1-bias-mbits); else (2^mbits + m) * 2^(e-bias-mbits) */
    double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
    return neg ? -v : v;
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

void pp_shape_strides(const pp_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= s->dim[i];
    }
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
    unsigned bits = pp_dtype_bits(t);
    if (bits == 0) return PP_FAIL(err, PP_EUNSUP, "element type %s has no fixed size", pp_dtype_name(t));
    if ((uint64_t)n > SIZE_MAX) return PP_FAIL(err, PP_EINVAL, "byte size overflows 64 bits");
    if (bits % 8 == 0) {
        if (pp_mul_ovf((size_t)n, bits / 8, out))
            return PP_FAIL(err, PP_EINVAL, "byte size overflows 64 bits");
        return PP_OK;
    }
    /* packed: ceil(n * bits / 8), the last byte possibly partly used */
    size_t total;
    if (pp_mul_ovf((size_t)n, bits, &total))
        return PP_FAIL(err, PP_EINVAL, "byte size overflows 64 bits");
    *out = total / 8 + (total % 8 != 0);
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

pp_status pp_attr_floats(pp_attrs as, const char *name, const float **out, int *n, pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    *out = NULL, *n = 0;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_FLOATS) return wrong_type(err, name, "a list of floats");
    *out = a->floats, *n = a->n;
    return PP_OK;
}

pp_status pp_attr_strings(pp_attrs as, const char *name, const char *const **out, int *n,
                          pp_err *err) {
    const pp_attr *a = pp_attr_find(as, name);
    *out = NULL, *n = 0;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_STRINGS) return wrong_type(err, name, "a list of strings");
    *out = a->strs, *n = a->n;
    return PP_OK;
}

/* ---- op table ---------------------------------------------------------------- */

const pp_op_info pp_op_table[PP_OP_COUNT] = {
#define PP_OP(e, name, mi, ma, no, tr) [PP_OP_##e] = {name, mi, ma, no, tr},
#include "ops.def"
#undef PP_OP
};

/* Every row, checked when this file compiles: input counts in order, an
 * output, traits that agree (a post-op is elementwise and never a view or
 * control op; a view is unary-shaped, not elementwise math; a head is no
 * post-op). A row that breaks one fails the build, naming the op. */
#define PP_OP(e, name, mi, ma, no, tr)                                                                          \
    _Static_assert((mi) >= 0 && (mi) <= (ma) && (ma) <= PP_MAX_INPUTS && (no) >= 1 && (no) <= PP_MAX_OUTPUTS,   \
                   #e ": input or output counts out of order");                                                 \
    _Static_assert(!((tr) & PP_TR_POSTOP) || ((tr) & (PP_TR_UNARY | PP_TR_BINARY)),                           \
                   #e ": a post-op must be elementwise");                                                       \
    _Static_assert(!((tr) & PP_TR_VIEW) || !((tr) & (PP_TR_UNARY | PP_TR_BINARY | PP_TR_POSTOP | PP_TR_AXES)), \
                   #e ": a view computes nothing");                                                             \
    _Static_assert(!((tr) & PP_TR_HEAD) || !((tr) & PP_TR_POSTOP), #e ": a chain's head is not a post-op");      \
    _Static_assert(!((tr) & PP_TR_CONTROL) || (tr) == PP_TR_CONTROL, #e ": a control op has no other trait");
#include "ops.def"
#undef PP_OP

/* The ops by name, for a binary search (a plan loader looks up every node's
 * op: a linear scan of the table was 5% of loading a 1M-node plan). */
static pp_op ops_by_name[PP_OP_COUNT];
static once_flag ops_sorted = ONCE_FLAG_INIT;

static int by_op_name(const void *a, const void *b) {
    return strcmp(pp_op_table[*(const pp_op *)a].name, pp_op_table[*(const pp_op *)b].name);
}

static void sort_ops(void) {
    for (int i = 0; i < PP_OP_COUNT; i++) ops_by_name[i] = (pp_op)i;
    qsort(ops_by_name, PP_OP_COUNT, sizeof *ops_by_name, by_op_name);
}

bool pp_op_lookup(const char *name, pp_op *out) {
    call_once(&ops_sorted, sort_ops);
    int lo = 0, hi = PP_OP_COUNT;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = strcmp(pp_op_table[ops_by_name[mid]].name, name);
        if (c == 0) {
            *out = ops_by_name[mid];
            return true;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

void pp_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* ---- tensor names as file names ------------------------------------------- */

void pp_file_name(const char *name, char *buf, size_t n) {
    if (n == 0) return;
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char c = name[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
        buf[k] = ok ? c : '_';
    }
    if (k == 0 && n > 1) buf[k++] = '_';
    if (k > 0 && buf[0] == '.') buf[0] = '_';
    buf[k] = 0;
}

typedef struct {
    char file[PP_FILE_NAME_MAX];
    int i;
} file_name_entry;

static int cmp_file_name(const void *a, const void *b) {
    const file_name_entry *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

pp_status pp_file_names_check(const char *const *names, int n, const char *what, const char *verb,
                              pp_err *err) {
    if (n < 2) return PP_OK;
    file_name_entry *e = malloc(sizeof *e * (size_t)n);
    if (!e) return PP_FAIL(err, PP_ENOMEM, "out of memory checking %d file names", n);
    for (int i = 0; i < n; i++) {
        pp_file_name(names[i], e[i].file, sizeof e[i].file);
        e[i].i = i;
    }
    qsort(e, (size_t)n, sizeof *e, cmp_file_name);
    pp_status s = PP_OK;
    for (int k = 1; k < n && s == PP_OK; k++)
        if (!strcmp(e[k - 1].file, e[k].file))
            s = PP_FAIL(err, PP_EINVAL,
                        "%s '%s' and '%s' would both be %s the file '%s.npy' (pprt's data files name a "
                        "tensor with '_' for every character outside [A-Za-z0-9._-]): rename one of them in "
                        "the model",
                        what, names[e[k - 1].i], names[e[k].i], verb, e[k].file);
    free(e);
    return s;
}

int pp_edit_distance(const char *a, size_t la, const char *b) {
    const size_t lb = strlen(b);
    if (la > 200 || lb > 200) return 1000;
    int row[201];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0]; /* row i-1's value at j-1 */
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            const int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* One data-centre GPU in f32 without TF32, rough: calibrate with pprt
 * --profile on the device (docs/partitioning.md). cuda-emu plans and runs
 * cuda's step list, so ppcc prices it as cuda. */
static const pp_backend_kind backend_kinds[] = {
    {"ref", false, 0, 0, 0},
    {"dnnl", false, 0, 0, 0},
    {"cuda", true, 20000, 1500, 20},
    {"cuda-emu", true, 20000, 1500, 20},
};

#define N_BACKEND_KINDS (sizeof backend_kinds / sizeof *backend_kinds)

const pp_backend_kind *pp_backend_kind_of(const char *name) {
    const size_t len = strcspn(name, ":");
    for (size_t k = 0; k < N_BACKEND_KINDS; k++)
        if (strlen(backend_kinds[k].name) == len && !strncmp(backend_kinds[k].name, name, len))
            return &backend_kinds[k];
    return NULL;
}

const char *pp_backend_suggest(const char *name) {
    static const char *const former[][2] = {{"cpu-ref", "ref"}, {"cpu-dnnl", "dnnl"}};
    const size_t len = strcspn(name, ":");
    for (size_t k = 0; k < sizeof former / sizeof *former; k++)
        if (strlen(former[k][0]) == len && !strncmp(former[k][0], name, len)) return former[k][1];
    const char *best = NULL;
    int bd = 3; /* at most two edits away, and closer than any other */
    for (size_t k = 0; k < N_BACKEND_KINDS; k++) {
        const int d = pp_edit_distance(name, len, backend_kinds[k].name);
        if (d < bd) best = backend_kinds[k].name, bd = d;
        else if (d == bd) best = NULL;
    }
    return best;
}

void pp_backend_kind_names(char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (size_t k = 0; k < N_BACKEND_KINDS && len < n; k++) {
        const int w = snprintf(buf + len, n - len, "%s%s", k ? ", " : "", backend_kinds[k].name);
        if (w < 0) break;
        len += (size_t)w;
    }
}
