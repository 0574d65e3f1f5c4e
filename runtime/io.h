/* io.h: sample data in and out of pprt: NumPy .npy files, ONNX TensorProto
 * files (the ONNX test-data layout), and checking outputs against expected
 * values. */
#ifndef PPRT_IO_H
#define PPRT_IO_H

#include <stdio.h>

#include "pprt.h"

typedef struct pprt_npy {
    pp_dtype dtype;
    pp_shape shape;
    void *data; /* 64-byte aligned, owned */
    size_t nbytes;
} pprt_npy;

/* Read a whole .npy file; errors name the file and what is wrong with it. */
pp_status pprt_npy_read(const char *path, pprt_npy *out, pp_err *err);
void pprt_npy_free(pprt_npy *a);
/* The same from memory: buf[0..len) holds a whole .npy file (a member of an
 * .npz); errors name `what`. */
pp_status pprt_npy_parse(const unsigned char *buf, size_t len, const char *what, pprt_npy *out, pp_err *err);

/* NumPy .npz archives (io_npz.c): a zip of NAME.npy members, stored
 * (np.savez) or deflated (np.savez_compressed), zip64 records included.
 * Open reads the central directory and checks every entry; keys are the
 * member names without ".npy". Errors name the file and the member. */
typedef struct pprt_npz {
    char *path;
    int n;
    struct pprt_npz_member {
        char *key;
        uint64_t offset, csize, usize; /* local header's offset, compressed and data sizes */
        int method;                    /* 0 stored, 8 deflate */
    } *m;
} pprt_npz;
pp_status pprt_npz_open(const char *path, pprt_npz *z, pp_err *err);
/* Member `key` as an array; PP_EIO when the archive has no such key. */
pp_status pprt_npz_read(const pprt_npz *z, const char *key, pprt_npy *out, pp_err *err);
void pprt_npz_close(pprt_npz *z);
/* Write atomically (temporary name, then rename). */
pp_status pprt_npy_write(const char *path, pp_dtype dt, const pp_shape *sh, const void *data,
                         pp_err *err);

/* Read a serialized ONNX TensorProto (io_pb.c): values from raw_data or the
 * typed field ONNX assigns to the type, every fixed-size element type
 * (string and the sub-byte and 8-bit float types are refused); sizes are
 * checked against the dims. *name (when name is not NULL) receives a malloc'ed
 * copy of the tensor's name, "" when it has none. Errors name the file. */
pp_status pprt_pb_read(const char *path, pprt_npy *out, char **name, pp_err *err);
/* Write a TensorProto (raw_data) atomically (temporary name, then rename). */
pp_status pprt_pb_write(const char *path, const char *name, pp_dtype dt, const pp_shape *sh,
                        const void *data, pp_err *err);

/* What feeds the plan's inputs besides the data directory (pprt's options). */
#define PPRT_MAX_BINDS 64
typedef struct pprt_data_opts {
    int n_bind; /* --input NAME=PATH: PATH a .npy, an ONNX TensorProto .pb, or FILE.npz:KEY */
    const char *bind_name[PPRT_MAX_BINDS], *bind_path[PPRT_MAX_BINDS];
    bool ignore_extra; /* data files that feed no input are left alone instead of refused */
    const char *skip;  /* a file that is not input data wherever it lies (--labels'), or NULL */
} pprt_data_opts;
/* Where one input's data came from, for the mapping pprt prints and records:
 * a path, "FILE.npz:KEY", or a folder of per-sample files. */
typedef struct pprt_data_src {
    char from[4400];
} pprt_data_src;

/* The plan's inputs, each from exactly one file, matched by name, never by
 * position between several inputs (docs: README "Your own model").
 *
 * ONNX test data (the directory holds input_0.pb, input_1.pb, ...): each file
 * is a TensorProto; one whose name is a plan input's name feeds that input,
 * one without a name feeds the plan input at its position K (input_K.pb),
 * and one naming no plan input is skipped (an input bound to a constant at
 * compile time, ppcc --const, keeps its file in the data set).
 *
 * NumPy (otherwise), in this order: o's --input bindings; in `dir` (a folder;
 * or itself one .npz, or a one-input plan's .npy; NULL: bindings only)
 * NAME.npy for each input (its name, or the name with characters other than
 * [A-Za-z0-9._-] replaced by '_'), and every array of every .npz there whose
 * key names an input. Two sources for one input are refused. Then, for a
 * one-input plan only, the folder's one remaining .npy file, or several
 * (a batched plan): one sample each, stacked in natural order of the names
 * (img2 before img10). An input left without data is refused naming the file
 * expected and what the folder holds; .npy and .npz files (and .npz arrays)
 * that feed no input are refused naming them, unless o->ignore_extra. Data
 * for an input ppcc froze to its initializer is refused.
 *
 * Each holds N samples stacked on dim 0 (for an unbatched plan, the whole
 * tensor): type and the other dims must match the plan. arrays[i] points into
 * npys[i]; src[i] (NULL: not wanted) says where input i's data came from. */
pp_status pprt_data_load(const pprt_plan *p, const char *dir, const pprt_data_opts *o, pprt_npy *npys,
                         pprt_array *arrays, pprt_data_src *src, int64_t *n, pp_err *err);
/* Write each output as DIR/NAME.npy (DIR created if needed); a type NumPy
 * lacks (bf16) as DIR/NAME.pb, an ONNX TensorProto. */
pp_status pprt_data_write(const pprt_plan *p, const char *dir, const pprt_array *outputs,
                          pp_err *err);
/* Before the run: PP_EIO when DIR exists and is not a directory, when it does
 * not and cannot be made (its parent folder is missing), or when an
 * output's file name there holds what pprt_data_write would refuse (a
 * directory, a block device, a socket; pp_outfile_check). */
pp_status pprt_data_write_check(const pprt_plan *p, const char *dir, pp_err *err);
/* Read --labels for a run of n samples: n int64 or int32 class indices,
 * each in [0, classes) of output 0, which must be f32 [N, classes]; a label
 * out of range is refused (PP_EINVAL, naming its position and value). */
pp_status pprt_labels_read(const pprt_plan *p, const char *path, int64_t n, pprt_npy *lab, pp_err *err);
/* How many of output 0's samples have their largest logit at the class
 * pprt_labels_read gave them (top-1 hits). */
int64_t pprt_top1(const pprt_plan *p, const pprt_array *out0, const pprt_npy *lab);
/* File-name-safe version of a tensor name. */
void pprt_safe_name(const char *name, char *buf, size_t n);

/* ---- checking outputs against expected values (check.c) ---------------------------- */

/* Element-wise comparison of n values of type dt. Floats (f16, bf16, f32, f64;
 * complex as their parts) agree when |got - want| <= atol + rtol * |want|, NaN
 * agrees with NaN and an infinity only with the same infinity; integers and
 * bools must be equal. */
typedef struct pprt_diff {
    int64_t n, bad;           /* values compared, values outside tolerance */
    double max_abs, max_rel;  /* over all values (rel: where want != 0); inf for a NaN/inf mismatch */
    int64_t first_bad;        /* index of the first bad value, -1 when none */
    double got, want;         /* the values there */
} pprt_diff;
void pprt_compare(pp_dtype dt, const void *got, const void *want, int64_t n, double rtol,
                  double atol, pprt_diff *d);

typedef struct pprt_check_opts {
    double rtol, atol;
    const char *expected_dir; /* NULL: the default places, see pprt_check */
} pprt_check_opts;

/* Compare every plan output with its expected value and print one line per
 * output to `report`: max abs and max rel error, OK or MISMATCH. The expected
 * value of output K (name NAME) comes from, in order:
 *   with expected_dir: DIR/NAME.npy, else DIR/output_K.pb;
 *   without: DATA_DIR/output_K.pb, else DATA_DIR/../expected/NAME.npy, else
 *   DATA_DIR/expected/NAME.npy.
 * Type and shape must match exactly. Returns PP_EMISMATCH naming the output
 * when any differs, PP_EIO when an expected file is missing, PP_EINVAL when
 * one is malformed or an output_K.pb names another output. */
pp_status pprt_check(const pprt_plan *p, const pprt_array *outputs, const char *data_dir,
                     const pprt_check_opts *o, FILE *report, pp_err *err);

#endif
