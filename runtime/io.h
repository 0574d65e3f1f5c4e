/* io.h: sample data in and out of pprt: NumPy .npy files. */
#ifndef PPRT_IO_H
#define PPRT_IO_H

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
/* Write atomically (temporary name, then rename). */
pp_status pprt_npy_write(const char *path, pp_dtype dt, const pp_shape *sh, const void *data,
                         pp_err *err);

/* The plan's inputs from a data directory: for each input, NAME.npy (the
 * input's name with characters other than [A-Za-z0-9._-] replaced by '_'),
 * else, when the directory holds exactly as many .npy files as the plan has
 * inputs, those files in name order. Each holds N samples stacked on dim 0:
 * type and the other dims must match the plan. arrays[i] points into npys[i]. */
pp_status pprt_data_load(const pprt_plan *p, const char *dir, pprt_npy *npys, pprt_array *arrays,
                         int64_t *n, pp_err *err);
/* Write each output as DIR/NAME.npy (DIR created if needed). */
pp_status pprt_data_write(const pprt_plan *p, const char *dir, const pprt_array *outputs,
                          pp_err *err);
/* Top-1 accuracy of output 0 ([N, classes] floats) against labels.npy (int
 * class indices, N of them). */
pp_status pprt_top1(const pprt_plan *p, const pprt_array *out0, const char *labels_path,
                    int64_t *correct, pp_err *err);
/* File-name-safe version of a tensor name. */
void pprt_safe_name(const char *name, char *buf, size_t n);

#endif
