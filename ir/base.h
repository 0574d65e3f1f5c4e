/* base.h: the small vocabulary shared by the compiler and the runtime:
 * status codes and error records, element types, shapes, attributes, the op
 * enum, and overflow-checked size arithmetic.
 *
 * It is NOT the IR (see ir.h) and holds nothing that allocates. Everything that
 * can fail in the library returns a pp_status and fills a pp_err; only the
 * command-line mains in tools/ turn a status into an exit code. */
#ifndef PP_BASE_H
#define PP_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- status and errors ------------------------------------------------- */

typedef enum pp_status {
    PP_OK = 0,
    PP_EINVAL,     /* malformed input: model, plan, data file, option value */
    PP_EUNSUP,     /* well-formed but not supported (op, attribute, dtype) */
    PP_EIO,        /* file missing, unreadable, unwritable */
    PP_ENOMEM,     /* allocation failed or a size budget was exceeded */
    PP_ERUNTIME,   /* failure while running (stage error, thread error) */
    PP_EMISMATCH,  /* --check found outputs outside tolerance */
} pp_status;

typedef struct pp_err {
    pp_status code;
    char msg[512];
    const char *file; /* source location that raised it (debugging aid) */
    int line;
} pp_err;

/* Record an error and return its code: `return PP_FAIL(err, PP_EINVAL, "...", ...)`.
 * err may be NULL. The first error recorded wins: later calls on an err that
 * already holds a failure leave its message alone (the root cause is kept). */
pp_status pp_fail_at(pp_err *err, const char *file, int line, pp_status code,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define PP_FAIL(err, code, ...) pp_fail_at((err), __FILE__, __LINE__, (code), __VA_ARGS__)
/* The same, for an error that wraps an inner one (`inner`, its message
 * usually quoted): the source location stays the inner error's, where the
 * failure began (pprt -v and ppcc -v print it). */
pp_status pp_wrap_at(pp_err *err, const pp_err *inner, const char *file, int line, pp_status code, const char *fmt,
                     ...) __attribute__((format(printf, 6, 7)));
#define PP_WRAP(err, inner, code, ...) pp_wrap_at((err), (inner), __FILE__, __LINE__, (code), __VA_ARGS__)
/* The process's memory for an out-of-memory message: "N MiB mapped, under a
 * M MiB address-space limit (ulimit -v)" (or the data limit, or "no
 * address-space limit"). pp_fail_at appends it to every PP_ENOMEM message. */
void pp_memory_note(char *buf, size_t n);

/* Propagate: evaluate a pp_status expression and return it when not PP_OK. */
#define PP_TRY(expr)                              \
    do {                                          \
        pp_status pp_try_s_ = (expr);             \
        if (pp_try_s_ != PP_OK) return pp_try_s_; \
    } while (0)

const char *pp_status_name(pp_status s);
/* Exit code policy for the command-line tools: 0 ok, 2 bad usage or bad input
 * (EINVAL, EUNSUP, EIO), 1 anything that failed while running. */
int pp_exit_code(pp_status s);

/* ---- element types: numbered as ONNX TensorProto.DataType --------------- */

typedef enum pp_dtype {
    PP_UNDEFINED = 0,
    PP_F32 = 1, PP_U8 = 2, PP_I8 = 3, PP_U16 = 4, PP_I16 = 5, PP_I32 = 6,
    PP_I64 = 7, PP_STRING = 8, PP_BOOL = 9, PP_F16 = 10, PP_F64 = 11,
    PP_U32 = 12, PP_U64 = 13, PP_C64 = 14, PP_C128 = 15, PP_BF16 = 16,
    /* low-precision types (onnx 1.22): 8-bit floats, and the packed sub-byte
     * types, 2 or 4 elements per byte, the first in the low bits */
    PP_F8E4M3FN = 17, PP_F8E4M3FNUZ = 18, PP_F8E5M2 = 19, PP_F8E5M2FNUZ = 20,
    PP_U4 = 21, PP_I4 = 22, PP_F4E2M1 = 23, PP_F8E8M0 = 24, PP_U2 = 25, PP_I2 = 26,
} pp_dtype;

/* Bits per element; 0 for types without a fixed size (string, undefined).
 * The only source of truth for storage sizes: see pp_shape_nbytes. */
unsigned pp_dtype_bits(pp_dtype t);
/* Bytes per element for types whose elements are whole bytes; 0 for types
 * without a fixed size AND for the packed sub-byte types (uint4, int4,
 * float4e2m1, uint2, int2), so that code indexing elements by byte offset
 * rejects them. Storage sizes come from pp_shape_nbytes. */
size_t pp_dtype_size(pp_dtype t);
/* Packed sub-byte type (bits < 8): element i lives in byte i*bits/8 at bit
 * (i*bits)%8; a tensor of n elements takes ceil(n*bits/8) bytes, the unused
 * high bits of the last byte zero when written. */
bool pp_dtype_packed(pp_dtype t);
const char *pp_dtype_name(pp_dtype t); /* "f32", ... or "?" */
/* The small float formats: float8e4m3fn, float8e4m3fnuz, float8e5m2,
 * float8e5m2fnuz, float4e2m1 (sign, ebits exponent bits with `bias`, mbits
 * mantissa bits; exponent 0 is subnormal). float8e8m0 (an unsigned power of
 * two, 2^(code-127), 0xff NaN) has its own functions. */
typedef enum pp_nan_kind {
    PP_NAN_IEEE,     /* all-ones exponent: infinity (mantissa 0) or NaN (e5m2) */
    PP_NAN_ALL_ONES, /* only all-ones exponent and mantissa, either sign; no inf (e4m3fn) */
    PP_NAN_NEG_ZERO, /* only the code of -0 (sign bit alone); no -0, no inf (fnuz) */
    PP_NAN_NONE,     /* no NaN, no inf (float4e2m1) */
} pp_nan_kind;

typedef struct pp_minifloat {
    int ebits, mbits, bias;
    pp_nan_kind nan;
    unsigned max_code; /* code of the largest finite value (positive) */
} pp_minifloat;

/* The format of a small float type, or NULL for other types. */
const pp_minifloat *pp_minifloat_of(pp_dtype t);
/* Exact value of a small float code (t: pp_minifloat_of(t) != NULL, or
 * PP_F8E8M0); NaN codes give NaN (negative for a negative NaN). */
double pp_minifloat_value(pp_dtype t, unsigned code);

/* Element i of packed data (bits 2 or 4): its bits, 0 .. 2^bits-1. */
static inline unsigned pp_packed_get(const void *data, unsigned bits, int64_t i) {
    const uint64_t bit = (uint64_t)i * bits;
    return (((const uint8_t *)data)[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
}
/* Set element i of packed data to v (only its low `bits` bits are used). */
static inline void pp_packed_put(void *data, unsigned bits, int64_t i, unsigned v) {
    const uint64_t bit = (uint64_t)i * bits;
    const unsigned mask = ((1u << bits) - 1) << (bit % 8);
    uint8_t *p = (uint8_t *)data + bit / 8;
    *p = (uint8_t)((*p & ~mask) | ((v << (bit % 8)) & mask));
}

/* NumPy descr ("<f4", "|b1", ...) or NULL when NumPy has no equivalent. */
const char *pp_dtype_npy(pp_dtype t);
pp_dtype pp_dtype_from_npy(const char *descr);

/* ---- shapes -------------------------------------------------------------- */

#define PP_MAX_DIMS 8
#define PP_MAX_INPUTS 1024 /* per node (variadic ops: Concat, Sum, ...) */
#define PP_MAX_OUTPUTS 64  /* per node (Split) */

typedef struct pp_shape {
    int rank;
    int64_t dim[PP_MAX_DIMS]; /* < 0 only while a dim is still symbolic */
} pp_shape;

bool pp_shape_eq(const pp_shape *a, const pp_shape *b);
/* Element count with overflow check; fails on negative (unknown) dims. */
pp_status pp_shape_numel(const pp_shape *s, int64_t *out, pp_err *err);
/* Storage bytes: ceil(numel * bits / 8) (numel * size for whole-byte types),
 * with overflow check; fails (PP_EUNSUP) for types without a fixed size. */
pp_status pp_shape_nbytes(const pp_shape *s, pp_dtype t, size_t *out, pp_err *err);
/* Row-major element strides of s into st[s->rank] (the last axis 1). */
void pp_shape_strides(const pp_shape *s, int64_t *st);
/* "[1,3,224,224]" into buf; returns buf. */
char *pp_shape_str(const pp_shape *s, char *buf, size_t n);

/* Overflow-checked arithmetic: true on overflow. */
static inline bool pp_mul_ovf(size_t a, size_t b, size_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline bool pp_add_ovf(size_t a, size_t b, size_t *r) { return __builtin_add_overflow(a, b, r); }
/* Element count for an allocation: n when positive, else 1 (never 0 or negative). */
static inline size_t pp_count(int n) { return n > 0 ? (size_t)n : 1; }
static inline size_t pp_align_up(size_t x, size_t a) { return (x + (a - 1)) & ~(a - 1); }

/* ---- opening files (ir/files.c) ----------------------------------------------- */

#include <stdio.h>
#include <sys/stat.h>

/* Open `path` for reading such that nothing can wait forever: with
 * O_NONBLOCK, O_NOCTTY and O_CLOEXEC (plus `oflags`, e.g. O_NOFOLLOW), then
 * fstat; anything but a regular file (a FIFO, a device, a socket, a
 * directory) is refused with PP_EIO, naming the file and what it is; then
 * O_NONBLOCK is cleared. `what` ("plan", "--labels file") prefixes the file
 * in messages, NULL for none. *st (may be NULL) receives the fstat. Every
 * file either tool reads is opened through this (or pp_fopen_read). */
pp_status pp_open_read(const char *path, const char *what, int oflags, int *fd, struct stat *st, pp_err *err);
/* The same as a stdio stream. */
pp_status pp_fopen_read(const char *path, const char *what, FILE **f, pp_err *err);
/* "a FIFO", "a directory", ... for an st_mode. */
const char *pp_file_kind(unsigned mode);

/* ---- files written whole or not at all ------------------------------------------ */

/* An output file written under a temporary name beside `path` and renamed
 * into place by pp_outfile_commit, so readers see the old file or the whole
 * new one, never a part. Any failure removes the temporary file, and so does
 * a SIGINT, SIGTERM or SIGHUP once pp_signals_install ran (the temporary
 * names are registered while they exist). Where path exists and is a
 * character device (/dev/null, a terminal) or a FIFO it is written in place
 * (a rename would replace the node): a FIFO only when a process already
 * reads it, else the open fails at once instead of waiting for a reader.
 * Other special files (block devices, sockets) are refused. */
typedef struct pp_outfile {
    FILE *f;
    char *tmp;        /* NULL: writing path itself (special) */
    const char *path;
    bool special;     /* path is not a regular file: no sync, no truncate, no rename */
    bool fifo;        /* special, and a FIFO (not seekable) */
    int slot;         /* the temporary name's registry slot, -1 none */
} pp_outfile;

pp_status pp_outfile_open(pp_outfile *o, const char *path, pp_err *err);
/* Flush, sync, close, rename; `ok` false (an earlier write failed) aborts. */
pp_status pp_outfile_commit(pp_outfile *o, bool ok, pp_err *err);
/* Before any work: PP_EIO when pp_outfile_open(path) would refuse what is
 * there now (a directory, a block device, a socket; a FIFO unless
 * `stream_ok`), or could not create it (pp_outpath_folder_check). Opens
 * nothing (opening a FIFO would be seen by its reader). */
pp_status pp_outfile_check(const char *path, bool stream_ok, pp_err *err);
/* PP_EIO naming `path` unless the folder it would be created in (its
 * parent; "." for a bare name) exists, is a folder and takes new files;
 * pp_outfile_check asks it where the file would be created or replaced. */
pp_status pp_outpath_folder_check(const char *path, pp_err *err);
/* For the tools' mains only: on SIGINT, SIGTERM and SIGHUP (those not
 * ignored at start, as under nohup), unlink every registered temporary file
 * and _exit(128 + signal). Async-signal-safe. */
void pp_signals_install(void);
/* Temporary files registered now (tests). */
int pp_tmp_files_armed(void);

/* The longest graph input or output name a plan may have: pprt reads and
 * writes NAME.npy, and NAME.npy.tmp.XXXXXX while writing (the name mapped
 * byte for byte, see pprt's data files), which must fit the file system's
 * NAME_MAX of 255 bytes: 255 - 4 - 11. */
#define PP_DATA_NAME_MAX 240
/* PP_EINVAL when `name` is longer than PP_DATA_NAME_MAX, naming `what`
 * ("graph output") and both lengths. */
pp_status pp_data_name_check(const char *name, const char *what, pp_err *err);
/* ---- tensor names as file names (pprt's NAME.npy) ------------------------ */

/* The bytes of a mapped name: longer names are cut (and may then collide). */
#define PP_FILE_NAME_MAX 512
/* The file-name-safe form of a tensor name, as pprt reads and writes its
 * data files: every byte other than [A-Za-z0-9._-] becomes '_', so does a
 * leading '.' (no hidden files, no ".."), "" becomes "_", and the result is
 * cut to n - 1 bytes. Not injective ('y:0' and 'y_0' both give 'y_0'):
 * pp_file_names_check refuses such pairs. */
void pp_file_name(const char *name, char *buf, size_t n);
/* PP_EINVAL when two of names[0..n) map to the same file name
 * (pp_file_name with PP_FILE_NAME_MAX), naming both; `what` says whose names
 * they are and what is done with the file ("graph inputs", "read from"). */
pp_status pp_file_names_check(const char *const *names, int n, const char *what, const char *verb,
                              pp_err *err);

/* A JSON string literal of s (quotes, escapes for '"', '\\' and control bytes). */
void pp_json_str(FILE *f, const char *s);
/* Levenshtein distance between a[0..la) and the string b, for "did you mean"
 * and "closest" hints; 1000 when either is over 200 characters. */
int pp_edit_distance(const char *a, size_t la, const char *b);

/* ---- attributes (ONNX AttributeProto, minus tensors and graphs) ---------- */

typedef enum pp_attr_type {
    PP_ATTR_INT = 1, PP_ATTR_FLOAT, PP_ATTR_STRING, PP_ATTR_INTS, PP_ATTR_FLOATS, PP_ATTR_TENSOR,
    /* a subgraph (Loop's body, If's branches): only inside ppcc, between the
     * frontend and the unrolling in the infer pass; never in a plan */
    PP_ATTR_GRAPH,
    PP_ATTR_STRINGS = 8, /* a list of strings (LSTM's activations) */
} pp_attr_type;

typedef struct pp_attr {
    const char *name;
    pp_attr_type type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    const float *floats;
    const char *const *strs; /* PP_ATTR_STRINGS: n NUL-terminated strings */
    int n; /* length of ints/floats/strs */
    /* PP_ATTR_TENSOR (e.g. ConstantOfShape's value): type, shape, bytes */
    pp_dtype t_dtype;
    pp_shape t_shape;
    const void *t_data;
    size_t t_nbytes;
    /* PP_ATTR_GRAPH: a pp_subgraph (ir/ir.h) */
    const void *graph;
} pp_attr;

/* A node's attributes, and the ai.onnx opset the model was exported with
 * (some ops changed meaning across opsets, e.g. Softmax's axis at 13). */
typedef struct pp_attrs {
    const pp_attr *a;
    int n;
    int opset;
} pp_attrs;

const pp_attr *pp_attr_find(pp_attrs as, const char *name);
/* Tensor attribute, or NULL when absent; a present attribute of another type fails. */
pp_status pp_attr_tensor(pp_attrs as, const char *name, const pp_attr **out, pp_err *err);
/* Typed getters with a default; a present attribute of the wrong type fails. */
pp_status pp_attr_int(pp_attrs as, const char *name, int64_t def, int64_t *out, pp_err *err);
pp_status pp_attr_float(pp_attrs as, const char *name, float def, float *out, pp_err *err);
pp_status pp_attr_string(pp_attrs as, const char *name, const char *def, const char **out, pp_err *err);
/* INTS into out[max]; *n = count (0 when absent). Fails if more than max. */
pp_status pp_attr_ints(pp_attrs as, const char *name, int64_t *out, int max, int *n, pp_err *err);
/* FLOATS / STRINGS: *out points at the attribute's n values (NULL, 0 when absent). */
pp_status pp_attr_floats(pp_attrs as, const char *name, const float **out, int *n, pp_err *err);
pp_status pp_attr_strings(pp_attrs as, const char *name, const char *const **out, int *n, pp_err *err);

/* ---- the op enum, from ops.def ------------------------------------------ */

typedef enum pp_op {
#define PP_OP(e, name, mi, ma, no, tr) PP_OP_##e,
#include "ops.def"
#undef PP_OP
    PP_OP_COUNT
} pp_op;

/* What passes and backends may assume of an op (ops.def's last column). */
enum {
    PP_TR_UNARY = 1u << 0,   /* elementwise over one tensor: output[i] = f(input[i]), same shape */
    PP_TR_BINARY = 1u << 1,  /* elementwise over NumPy-broadcast inputs (Where's three included) */
    PP_TR_VIEW = 1u << 2,    /* the output is the input's bytes under another shape */
    PP_TR_HEAD = 1u << 3,    /* a kernel that can absorb the elementwise nodes after it (a fusion chain's head) */
    PP_TR_POSTOP = 1u << 4,  /* may be absorbed so (an activation or arithmetic on floats) */
    PP_TR_AXES = 1u << 5,    /* combines or moves values along axes its attributes or inputs name: along
                              * the batch axis it would mix samples */
    PP_TR_CONTROL = 1u << 6, /* Loop, If, the sequence ops: unrolled by the infer pass, never in a plan */
};

typedef struct pp_op_info {
    const char *name;
    int min_inputs, max_inputs, max_outputs;
    unsigned traits; /* PP_TR_* */
} pp_op_info;

/* Whether op has every trait in `tr`. */
#define pp_op_has(op, tr) ((pp_op_table[(op)].traits & (tr)) == (unsigned)(tr))

extern const pp_op_info pp_op_table[PP_OP_COUNT];
/* Op by ONNX name; returns false when unknown. */
bool pp_op_lookup(const char *name, pp_op *out);

/* What ppcc knows of a backend by its name without linking it (ppcc links
 * no backend): whether its stages run on a device with its own memory (a
 * GPU) and, for a device, a rough f32 roofline of one (GFLOP/s, memory and
 * stage-to-stage GB/s) that the cost model takes where the command line gives
 * none. pprt's registry must agree: test unit_backend checks that every
 * backend it registers has a row whose `device` matches its memory space. */
typedef struct pp_backend_kind {
    const char *name;
    bool device;
    double gflops, mem_gbps, link_gbps; /* device: its roofline; else 0 (the host's figures) */
} pp_backend_kind;
/* The row of backend `name` ("cuda"; a ":DEVICE" suffix is ignored), or NULL
 * for a name no backend has. */
const pp_backend_kind *pp_backend_kind_of(const char *name);
/* For a name no backend has: the backend it most likely means (a former
 * name, "cpu-ref" for ref and "cpu-dnnl" for dnnl, or one a typo away), or
 * NULL; for "did you mean". */
const char *pp_backend_suggest(const char *name);
/* The backends' names, "ref, dnnl, cuda, cuda-emu", into buf. */
void pp_backend_kind_names(char *buf, size_t n);

/* A tensor as shape functions and kernels see it: type, shape and, for
 * constants known at compile time, the bytes (else NULL). */
typedef struct pp_tinfo {
    pp_dtype dtype;
    pp_shape shape;
    const void *data;
} pp_tinfo;

/* Shape and type inference for one node (ir/shape.c). in[i].dtype ==
 * PP_UNDEFINED marks an absent optional input. Fills out[0..n_out). The same
 * function runs in ppcc (to infer) and in pprt's loader (to verify a plan). */
pp_status pp_infer(pp_op op, pp_attrs attrs, const pp_tinfo *in, int n_in,
                   pp_tinfo *out, int n_out, pp_err *err);

/* Cost of one node (ir/cost.c): FLOPs and bytes touched, from inferred shapes. */
typedef struct pp_cost {
    double flops;
    double bytes;
} pp_cost;
pp_cost pp_node_cost(pp_op op, pp_attrs attrs, const pp_tinfo *in, int n_in,
                     const pp_tinfo *out, int n_out);

/* Patterns that ppcc keeps whole in one stage and marks on their first node
 * (pp_node.pattern, plan Node.pattern), for a backend that runs them as one
 * kernel (the CUDA backends' --cuda-fused-attention); the CPU backends
 * ignore the mark. */
enum {
    PP_PATTERN_NONE = 0,
    PP_PATTERN_ATTENTION = 1, /* MatMul, [Where], [Mul or Div by a constant scalar, or Mul by a constant per
                               * head], [Where], [Add of a mask],
                               * [Reshape, Add of a mask, Reshape: BART's, Swin's frames], Softmax (last axis),
                               * MatMul: the node is the first MatMul (passes/fuse.c
                               * pp_attention_chains) */
};

#endif
