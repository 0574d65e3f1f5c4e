/* fuzz_data.c: libFuzzer target for pprt's data files: every input is read
 * as a NumPy .npy file, as an ONNX TensorProto (.pb) and as an .npz archive
 * (each of its arrays read), as pprt reads
 * DATA_DIR, --labels and --check's expected values. Each must be accepted
 * (and its values then compared with themselves, as --check does) or
 * refused with an error: no crash, leak, hang or undefined behaviour. The
 * bytes go through a memfd, so the readers see a regular file, as on disk. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../runtime/io.h"

static void read_as(int fd, bool pb) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    pprt_npy a = {0};
    char *name = NULL;
    pp_err err = {0};
    pp_status s = pb ? pprt_pb_read(path, &a, &name, &err) : pprt_npy_read(path, &a, &err);
    if (s == PP_OK) {
        int64_t n = 0;
        pprt_diff d;
        if (pp_shape_numel(&a.shape, &n, NULL) == PP_OK && n > 0 && !pp_dtype_packed(a.dtype))
            pprt_compare(a.dtype, a.data, a.data, n, 1e-3, 1e-5, &d);
    }
    pprt_npy_free(&a);
    free(name);
}

static void read_npz(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    pprt_npz z;
    pp_err err = {0};
    if (pprt_npz_open(path, &z, &err) != PP_OK) return;
    for (int i = 0; i < z.n; i++) {
        pprt_npy a = {0};
        if (pprt_npz_read(&z, z.m[i].key, &a, &err) == PP_OK) pprt_npy_free(&a);
    }
    pprt_npz_close(&z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_data", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (size == 0 || write(fd, data, size) == (ssize_t)size) {
        read_as(fd, false);
        read_as(fd, true);
        read_npz(fd);
    }
    close(fd);
    return 0;
}
