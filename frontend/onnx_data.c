/* onnx_data.c: ONNX TensorProto files, as the ONNX backend test data keeps
 * them (test_data_set_N/input_K.pb), read for ppcc --const.
 *
 * The message is unpacked with an allocator that draws from the graph's
 * arena, so the tensor's name and raw bytes (which the decoded constant points
 * into) live exactly as long as the graph, with no copy and no keep-list. The
 * decoding itself is the frontend's one TensorProto decoder
 * (pp_onnx_decode_tensor in onnx_import.c).
 *
 * Also the external data of large models: files mapped, never copied. */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
    int fd;
    struct stat sb;
    PP_TRY(pp_open_read(path, NULL, 0, &fd, &sb, err));
    size_t len = (size_t)sb.st_size;
    if (len == 0) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL, "%s: not an ONNX TensorProto: the file is empty", path);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return PP_FAIL(err, errno == ENOMEM ? PP_ENOMEM : PP_EIO, "cannot map '%s' (%zu bytes): %s", path, len,
                       strerror(errno));
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

/* ---- external data ---------------------------------------------------------------------- */

/* Strict non-negative decimal, as the onnx helpers write offset and length. */
static bool parse_size(const char *s, size_t *out) {
    if (!s || !*s) return false;
    size_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (pp_mul_ovf(v, 10, &v) || pp_add_ovf(v, (size_t)(*s - '0'), &v)) return false;
    }
    *out = v;
    return true;
}

/* The location must be relative and stay below the model's directory; every
 * component that exists on the way must be a real directory or, last, a
 * regular file with a single link, never a symbolic link. Returns the open fd. */
static pp_status open_location(const pp_graph *g, const char *loc, const char *what,
                               const char *name, int *fd_out, size_t *size, pp_err *err) {
    if (!*loc) return PP_FAIL(err, PP_EINVAL, "%s '%s': external data has an empty location", what, name);
    if (loc[0] == '/' || strchr(loc, '\\') || strchr(loc, ':'))
        return PP_FAIL(err, PP_EINVAL,
                       "%s '%s': external data location '%s' must be a relative path inside the "
                       "model's directory", what, name, loc);
    char path[4096];
    int n = snprintf(path, sizeof path, "%s", g->model_dir);
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if ((len == 2 && p[0] == '.' && p[1] == '.'))
            return PP_FAIL(err, PP_EINVAL, "%s '%s': external data location '%s' escapes the "
                           "model's directory ('..')", what, name, loc);
        if (len && !(len == 1 && p[0] == '.')) {
            n += snprintf(path + n, n < (int)sizeof path ? sizeof path - (size_t)n : 0, "/%.*s", (int)len, p);
            if (n >= (int)sizeof path)
                return PP_FAIL(err, PP_EINVAL, "%s '%s': external data location too long", what, name);
            struct stat sb;
            if (lstat(path, &sb) != 0)
                return PP_FAIL(err, PP_EIO, "%s '%s': external data file '%s': %s", what, name, path,
                               strerror(errno));
            if (S_ISLNK(sb.st_mode))
                return PP_FAIL(err, PP_EINVAL, "%s '%s': external data location '%s' goes through "
                               "a symbolic link ('%s'); refused", what, name, loc, path);
            if (e && !S_ISDIR(sb.st_mode))
                return PP_FAIL(err, PP_EINVAL, "%s '%s': '%s' is not a directory", what, name, path);
        }
        p += len + (e ? 1 : 0);
    }
    int fd;
    struct stat sb;
    pp_err e = {0};
    if (pp_open_read(path, "external data", O_NOFOLLOW, &fd, &sb, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s '%s': %s", what, name, e.msg);
    if (sb.st_nlink != 1) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL, "%s '%s': external data '%s' has %lu hard links; refused "
                       "(a link could point outside the model's directory)", what, name, path,
                       (unsigned long)sb.st_nlink);
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return PP_OK;
}

pp_status pp_onnx_external_data(pp_graph *g, const Onnx__TensorProto *t, const char *name,
                                const char *what, size_t nbytes, size_t align, const void **data,
                                pp_err *err) {
    if (!g->model_dir)
        return PP_FAIL(err, PP_EUNSUP, "%s '%s': external data needs the model's directory (load "
                       "the model from a file)", what, name);
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = t->external_data[i];
        const char *k = kv->key ? kv->key : "", *v = kv->value ? kv->value : "";
        if (!strcmp(k, "location")) loc = v;
        else if (!strcmp(k, "offset")) off_s = v;
        else if (!strcmp(k, "length")) len_s = v;
    }
    if (!loc) return PP_FAIL(err, PP_EINVAL, "%s '%s': external data without a location", what, name);
    size_t off = 0, len = nbytes;
    if (off_s && !parse_size(off_s, &off))
        return PP_FAIL(err, PP_EINVAL, "%s '%s': external data offset '%s' is not a non-negative "
                       "integer", what, name, off_s);
    if (len_s && !parse_size(len_s, &len))
        return PP_FAIL(err, PP_EINVAL, "%s '%s': external data length '%s' is not a non-negative "
                       "integer", what, name, len_s);
    if (len != nbytes)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': external data length %zu, expected %zu (dims x "
                       "element size)", what, name, len, nbytes);
    /* one mapping per file */
    struct pp_map *m = NULL;
    for (int i = 0; i < g->n_maps; i++)
        if (!strcmp(g->maps[i].location, loc)) m = &g->maps[i];
    if (!m) {
        int fd;
        size_t size;
        PP_TRY(open_location(g, loc, what, name, &fd, &size, err));
        struct pp_map *maps = realloc(g->maps, sizeof *maps * (size_t)(g->n_maps + 1));
        if (!maps) {
            close(fd);
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        g->maps = maps;
        m = &g->maps[g->n_maps];
        m->location = pp_arena_strdup(&g->arena, loc);
        m->len = size;
        m->addr = NULL;
        if (size) {
            m->addr = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m->addr == MAP_FAILED) {
                int e = errno;
                close(fd);
                return PP_FAIL(err, e == ENOMEM ? PP_ENOMEM : PP_EIO, "%s '%s': cannot map external data '%s' "
                               "(%zu bytes): %s", what, name, loc, size, strerror(e));
            }
        }
        close(fd);
        if (!m->location) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        g->n_maps++;
    }
    if (off > m->len || nbytes > m->len - off)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': external data [%zu, +%zu) lies outside '%s' (%zu "
                       "bytes)", what, name, off, nbytes, loc, m->len);
    const unsigned char *p = (const unsigned char *)m->addr + off;
    if (nbytes == 0) p = (const unsigned char *)"";
    if ((uintptr_t)p % align) { /* misaligned for its type: the only copy */
        void *copy = pp_arena_alloc(&g->arena, nbytes);
        if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        memcpy(copy, p, nbytes);
        p = copy;
    }
    *data = p;
    return PP_OK;
}
