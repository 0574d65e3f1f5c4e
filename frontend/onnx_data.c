/* onnx_data.c: ONNX TensorProto files, as the ONNX backend test data keeps
 * them (test_data_set_N/input_K.pb), read for ppcc --const.
 *
 * The message is unpacked with an allocator that draws from the graph's
 * arena, so the tensor's name and raw bytes (which the decoded constant points
 * into) live exactly as long as the graph, with no copy and no keep-list. The
 * decoding itself is the frontend's one TensorProto decoder
 * (pp_onnx_decode_tensor in onnx_import.c). */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx.pb-c.h"

static void *arena_alloc(void *arena, size_t n) {
    return pp_arena_alloc(arena, n);
}

static void arena_keep(void *arena, void *p) {
    (void)arena, (void)p; /* freed with the graph */
}

pp_status pp_onnx_read_tensor_file(pp_graph *g, const char *path, pp_tensor_data *out,
                                   pp_err *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return PP_FAIL(err, PP_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return PP_FAIL(err, PP_EIO, "cannot read '%s': not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len == 0) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL, "%s: not an ONNX TensorProto: the file is empty", path);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return PP_FAIL(err, PP_EIO, "cannot map '%s': %s", path, strerror(errno));
    ProtobufCAllocator al = {.alloc = arena_alloc, .free = arena_keep, .allocator_data = &g->arena};
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&al, len, map);
    munmap(map, len);
    if (!t)
        return PP_FAIL(err, PP_EINVAL,
                       "%s: not an ONNX TensorProto: protobuf parsing failed (truncated or "
                       "corrupt file)", path);
    const char *name = t->name ? t->name : "";
    pp_err e = {0};
    if (pp_onnx_decode_tensor(g, t, name, "tensor", &out->dtype, &out->shape, &out->data,
                              &out->nbytes, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s: %s", path, e.msg);
    out->name = name;
    return PP_OK;
}
