/* io_npy.c: NumPy .npy files (format versions 1, 2 and 3), little-endian,
 * C order. Reading validates the header strictly and the data size exactly;
 * writing goes to a temporary name and is renamed into place. */
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Find `'key':` in the header dict; returns the text after the colon. */
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static pp_status parse_header(const char *h, const char *path, pp_dtype *dt, pp_shape *sh,
                              pp_err *err) {
    const char *d = dict_value(h, "descr");
    if (!d || *d != '\'') return PP_FAIL(err, PP_EINVAL, "%s: .npy header has no 'descr'", path);
    char descr[16] = {0};
    const char *e = strchr(d + 1, '\'');
    if (!e || e - d - 1 >= (long)sizeof descr)
        return PP_FAIL(err, PP_EINVAL, "%s: .npy header 'descr' is malformed", path);
    memcpy(descr, d + 1, (size_t)(e - d - 1));
    if (descr[0] == '>')
        return PP_FAIL(err, PP_EUNSUP, "%s: big-endian data ('%s') is not supported", path, descr);
    *dt = pp_dtype_from_npy(descr);
    if (*dt == PP_UNDEFINED)
        return PP_FAIL(err, PP_EUNSUP, "%s: element type '%s' is not supported", path, descr);
    const char *f = dict_value(h, "fortran_order");
    if (!f) return PP_FAIL(err, PP_EINVAL, "%s: .npy header has no 'fortran_order'", path);
    bool fortran = strncmp(f, "True", 4) == 0;
    if (!fortran && strncmp(f, "False", 5) != 0)
        return PP_FAIL(err, PP_EINVAL, "%s: .npy header 'fortran_order' is malformed", path);
    const char *s = dict_value(h, "shape");
    if (!s || *s != '(') return PP_FAIL(err, PP_EINVAL, "%s: .npy header has no 'shape'", path);
    s++;
    sh->rank = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        if (*s < '0' || *s > '9')
            return PP_FAIL(err, PP_EINVAL, "%s: .npy header 'shape' is malformed", path);
        if (sh->rank == PP_MAX_DIMS)
            return PP_FAIL(err, PP_EUNSUP, "%s: rank above %d is not supported", path, PP_MAX_DIMS);
        int64_t v = 0;
        while (*s >= '0' && *s <= '9') {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v))
                return PP_FAIL(err, PP_EINVAL, "%s: .npy shape overflows", path);
            s++;
        }
        if (*s == 'L') s++; /* files written by Python 2 */
        sh->dim[sh->rank++] = v;
    }
    int nontrivial = 0;
    for (int i = 0; i < sh->rank; i++) nontrivial += sh->dim[i] > 1;
    if (fortran && nontrivial > 1)
        return PP_FAIL(err, PP_EUNSUP, "%s: Fortran-ordered arrays are not supported; save with "
                                       "np.ascontiguousarray", path);
    return PP_OK;
}

pp_status pprt_npy_read(const char *path, pprt_npy *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    FILE *fp;
    PP_TRY(pp_fopen_read(path, NULL, &fp, err));
    unsigned char pre[12];
    pp_status s = PP_OK;
    char *hdr = NULL;
    size_t got = fread(pre, 1, 10, fp);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        s = PP_FAIL(err, PP_EINVAL, "%s: not a .npy file (bad magic)", path);
        goto out;
    }
    int major = pre[6];
    size_t hlen, pre_len;
    if (major == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        pre_len = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, fp) != 2) {
            s = PP_FAIL(err, PP_EINVAL, "%s: truncated .npy header", path);
            goto out;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    } else {
        s = PP_FAIL(err, PP_EUNSUP, "%s: .npy format version %d is not supported", path, major);
        goto out;
    }
    if (hlen > (1u << 20)) {
        s = PP_FAIL(err, PP_EINVAL, "%s: .npy header length %zu is absurd", path, hlen);
        goto out;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    if (fread(hdr, 1, hlen, fp) != hlen) {
        s = PP_FAIL(err, PP_EINVAL, "%s: truncated .npy header", path);
        goto out;
    }
    hdr[hlen] = 0;
    if ((s = parse_header(hdr, path, &out->dtype, &out->shape, err)) != PP_OK) goto out;
    pp_err e = {0};
    if (pp_shape_nbytes(&out->shape, out->dtype, &out->nbytes, &e) != PP_OK) {
        s = PP_FAIL(err, PP_EINVAL, "%s: %s", path, e.msg);
        goto out;
    }
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || (uint64_t)sb.st_size != pre_len + hlen + out->nbytes) {
        s = PP_FAIL(err, PP_EINVAL, "%s: expected %zu data bytes for shape and type, file holds %lld",
                    path, out->nbytes, (long long)sb.st_size - (long long)(pre_len + hlen));
        goto out;
    }
    if (posix_memalign(&out->data, 64, out->nbytes ? out->nbytes : 64) != 0) {
        out->data = NULL;
        s = PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %zu bytes", path, out->nbytes);
        goto out;
    }
    if (fread(out->data, 1, out->nbytes, fp) != out->nbytes)
        s = PP_FAIL(err, PP_EIO, "%s: short read", path);
out:
    free(hdr);
    fclose(fp);
    if (s != PP_OK) pprt_npy_free(out);
    return s;
}

pp_status pprt_npy_parse(const unsigned char *buf, size_t len, const char *what, pprt_npy *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return PP_FAIL(err, PP_EINVAL, "%s: not a .npy array (bad magic)", what);
    int major = buf[6];
    size_t hlen, pre_len;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre_len = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return PP_FAIL(err, PP_EINVAL, "%s: truncated .npy header", what);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        pre_len = 12;
    } else {
        return PP_FAIL(err, PP_EUNSUP, "%s: .npy format version %d is not supported", what, major);
    }
    if (hlen > (1u << 20)) return PP_FAIL(err, PP_EINVAL, "%s: .npy header length %zu is absurd", what, hlen);
    if (len - pre_len < hlen) return PP_FAIL(err, PP_EINVAL, "%s: truncated .npy header", what);
    char *hdr = malloc(hlen + 1);
    if (!hdr) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(hdr, buf + pre_len, hlen);
    hdr[hlen] = 0;
    pp_status s = parse_header(hdr, what, &out->dtype, &out->shape, err);
    free(hdr);
    PP_TRY(s);
    pp_err e = {0};
    if (pp_shape_nbytes(&out->shape, out->dtype, &out->nbytes, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s: %s", what, e.msg);
    if (len - pre_len - hlen != out->nbytes)
        return PP_FAIL(err, PP_EINVAL, "%s: expected %zu data bytes for shape and type, the array holds %zu", what,
                       out->nbytes, len - pre_len - hlen);
    if (posix_memalign(&out->data, 64, out->nbytes ? out->nbytes : 64) != 0) {
        out->data = NULL;
        return PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %zu bytes", what, out->nbytes);
    }
    memcpy(out->data, buf + pre_len + hlen, out->nbytes);
    return PP_OK;
}

void pprt_npy_free(pprt_npy *a) {
    free(a->data);
    a->data = NULL;
}

pp_status pprt_npy_write(const char *path, pp_dtype dt, const pp_shape *sh, const void *data,
                         pp_err *err) {
    const char *descr = pp_dtype_npy(dt);
    if (!descr) return PP_FAIL(err, PP_EUNSUP, "%s: type %s has no .npy equivalent", path, pp_dtype_name(dt));
    size_t nbytes;
    PP_TRY(pp_shape_nbytes(sh, dt, &nbytes, err));
    char dict[512], dims[256] = "";
    size_t k = 0;
    for (int i = 0; i < sh->rank && k < sizeof dims; i++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? ", " : "",
                              (long long)sh->dim[i]);
    if (sh->rank == 1) snprintf(dims + k, sizeof dims - k, ","); /* "(5,)" is a tuple */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, dims);
    /* pad so that the data starts 64-byte aligned; header ends with '\n' */
    size_t total = pp_align_up(10 + (size_t)n + 1, 64);
    size_t hlen = total - 10;
    unsigned char *hdr = malloc(total);
    if (!hdr) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (unsigned char)(hlen & 0xff);
    hdr[9] = (unsigned char)(hlen >> 8);
    memcpy(hdr + 10, dict, (size_t)n);
    memset(hdr + 10 + n, ' ', hlen - (size_t)n - 1);
    hdr[total - 1] = '\n';
    pp_outfile out;
    pp_status s = pp_outfile_open(&out, path, err);
    if (s == PP_OK) {
        bool ok = fwrite(hdr, 1, total, out.f) == total &&
                  (nbytes == 0 || fwrite(data, 1, nbytes, out.f) == nbytes);
        s = pp_outfile_commit(&out, ok, err);
    }
    free(hdr);
    return s;
}
