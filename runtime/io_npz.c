/* io_npz.c: NumPy .npz archives, read-only: a zip file whose members are
 * NAME.npy arrays, stored (np.savez) or deflated (np.savez_compressed).
 *
 * Open finds the end-of-central-directory record (zip64's when the archive
 * says so), reads every central entry and checks it: name, method, sizes and
 * the local header's offset within the file. Read seeks to a member's local
 * header, checks its signature and name, and inflates or copies exactly the
 * member's bytes into memory, then parses them as a .npy (io_npy.c). Nothing
 * here trusts a size before checking it against the file's; encrypted,
 * multi-disk and other compression methods are refused with the member named.
 * Not a general zip library: no writing, no data descriptors needed (the
 * central directory has the sizes). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "io.h"

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* n bytes at `off` of fp into buf; false on a short read. */
static bool read_at(FILE *fp, uint64_t off, void *buf, size_t n) {
    return fseeko(fp, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, n, fp) == n;
}

void pprt_npz_close(pprt_npz *z) {
    for (int i = 0; i < z->n; i++) free(z->m[i].key);
    free(z->m);
    free(z->path);
    memset(z, 0, sizeof *z);
}

/* The zip64 extra field's values for those of (usize, csize, offset) that
 * the central entry set to all ones, in that order. */
static bool zip64_extra(const unsigned char *x, size_t n, uint64_t *usize, uint64_t *csize, uint64_t *offset) {
    while (n >= 4) {
        uint16_t tag = le16(x), len = le16(x + 2);
        if ((size_t)len + 4 > n) return false;
        if (tag == 1) {
            const unsigned char *v = x + 4;
            size_t left = len;
            uint64_t *f[3] = {usize, csize, offset};
            for (int k = 0; k < 3; k++) {
                if (*f[k] != 0xFFFFFFFFu) continue;
                if (left < 8) return false;
                *f[k] = le64(v);
                v += 8, left -= 8;
            }
            return true;
        }
        x += 4 + len, n -= 4 + len;
    }
    return *usize != 0xFFFFFFFFu && *csize != 0xFFFFFFFFu && *offset != 0xFFFFFFFFu;
}

/* The central directory of the archive fp (`size` bytes): its entries,
 * size and offset, from the end record (zip64's when the archive says so),
 * checked to lie within the file. */
static pp_status find_directory(FILE *fp, const char *path, uint64_t size, uint64_t *entries, uint64_t *cd_size,
                                uint64_t *cd_off, pp_err *err) {
    /* the end record: 22 bytes and a comment of at most 65535 */
    size_t tail = size < 22 + 65535 ? (size_t)size : 22 + 65535;
    unsigned char *t = malloc(tail);
    if (!t || !read_at(fp, size - tail, t, tail)) {
        free(t);
        return t ? PP_FAIL(err, PP_EIO, "%s: short read", path) : PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    long e = -1;
    for (long k = (long)tail - 22; k >= 0 && e < 0; k--)
        if (le32(t + k) == 0x06054b50u && (size_t)k + 22 + le16(t + k + 20) == tail) e = k;
    if (e < 0) {
        free(t);
        return PP_FAIL(err, PP_EINVAL, "%s: not an .npz file (no zip end record)", path);
    }
    *entries = le16(t + e + 10), *cd_size = le32(t + e + 12), *cd_off = le32(t + e + 16);
    const bool multi = le16(t + e + 4) != 0 || le16(t + e + 6) != 0;
    const uint64_t end_at = size - tail + (uint64_t)e;
    free(t);
    if (multi) return PP_FAIL(err, PP_EUNSUP, "%s: a multi-part zip archive is not supported", path);
    if (*entries == 0xFFFF || *cd_size == 0xFFFFFFFFu || *cd_off == 0xFFFFFFFFu) { /* zip64 */
        unsigned char loc[20], rec[56];
        if (end_at < 20 || !read_at(fp, end_at - 20, loc, 20) || le32(loc) != 0x07064b50u ||
            le64(loc + 8) > size - 56 || !read_at(fp, le64(loc + 8), rec, 56) || le32(rec) != 0x06064b50u)
            return PP_FAIL(err, PP_EINVAL, "%s: the zip64 end record is missing or damaged", path);
        *entries = le64(rec + 32), *cd_size = le64(rec + 40), *cd_off = le64(rec + 48);
    }
    if (*cd_off > size || *cd_size > size - *cd_off || *entries > *cd_size / 46 || *entries > 100000)
        return PP_FAIL(err, PP_EINVAL, "%s: the zip central directory (%llu entries, %llu bytes at %llu) lies "
                       "outside the file's %llu bytes", path, (unsigned long long)*entries,
                       (unsigned long long)*cd_size, (unsigned long long)*cd_off, (unsigned long long)size);
    return PP_OK;
}

/* Central entry i, at *at of the directory cd (cd_size bytes), of an
 * archive of `size` bytes: checked, and added to z as a member unless it is
 * a directory; *at moves past it. */
static pp_status read_entry(pprt_npz *z, const char *path, uint64_t size, const unsigned char *cd, uint64_t cd_size,
                            size_t *at, uint64_t i, pp_err *err) {
    if (cd_size - *at < 46 || le32(cd + *at) != 0x02014b50u)
        return PP_FAIL(err, PP_EINVAL, "%s: zip central entry %llu is damaged", path, (unsigned long long)i);
    const unsigned char *h = cd + *at;
    size_t nl = le16(h + 28), xl = le16(h + 30), cl = le16(h + 32);
    if (cd_size - *at - 46 < nl + xl + cl)
        return PP_FAIL(err, PP_EINVAL, "%s: zip central entry %llu runs past the directory", path,
                       (unsigned long long)i);
    char name[1024];
    snprintf(name, sizeof name, "%.*s", (int)nl, (const char *)h + 46);
    uint64_t usize = le32(h + 24), csize = le32(h + 20), off = le32(h + 42);
    const int method = le16(h + 10), flags = le16(h + 8);
    if (!zip64_extra(h + 46 + nl, xl, &usize, &csize, &off))
        return PP_FAIL(err, PP_EINVAL, "%s: member '%s': the zip64 sizes are missing or damaged", path, name);
    *at += 46 + nl + xl + cl;
    if (nl == 0 || name[nl - 1] == '/') return PP_OK; /* a directory entry */
    if (flags & 1) return PP_FAIL(err, PP_EUNSUP, "%s: member '%s' is encrypted", path, name);
    if (method != 0 && method != 8)
        return PP_FAIL(err, PP_EUNSUP, "%s: member '%s' uses zip compression method %d; pprt reads stored "
                       "(np.savez) and deflated (np.savez_compressed) members", path, name, method);
    /* deflate expands at most 1032 times (a run of one byte): a larger
     * size claimed is a damaged entry, never a reason to allocate it */
    if (method == 8 && usize > csize * 1032 + 64)
        return PP_FAIL(err, PP_EINVAL, "%s: member '%s' claims %llu bytes from %llu deflated, more than deflate can "
                       "expand to", path, name, (unsigned long long)usize, (unsigned long long)csize);
    if (off > size || csize > size - off || (method == 0 && csize != usize))
        return PP_FAIL(err, PP_EINVAL, "%s: member '%s' (%llu bytes at %llu) lies outside the file's %llu bytes",
                       path, name, (unsigned long long)csize, (unsigned long long)off, (unsigned long long)size);
    size_t kl = strlen(name);
    if (kl > 4 && !strcmp(name + kl - 4, ".npy")) name[kl - 4] = 0;
    for (int j = 0; j < z->n; j++)
        if (!strcmp(z->m[j].key, name)) return PP_FAIL(err, PP_EINVAL, "%s: two members are named '%s'", path, name);
    struct pprt_npz_member *m = &z->m[z->n];
    if (!(m->key = strdup(name))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    m->offset = off, m->csize = csize, m->usize = usize, m->method = method;
    z->n++;
    return PP_OK;
}

pp_status pprt_npz_open(const char *path, pprt_npz *z, pp_err *err) {
    memset(z, 0, sizeof *z);
    FILE *fp;
    PP_TRY(pp_fopen_read(path, NULL, &fp, err));
    pp_status s = PP_OK;
    unsigned char *cd = NULL;
    struct stat sb;
    uint64_t entries = 0, cd_size = 0, cd_off = 0;
    if (fstat(fileno(fp), &sb) != 0 || sb.st_size < 22) {
        s = PP_FAIL(err, PP_EINVAL, "%s: not an .npz file (too short for a zip archive)", path);
        goto out;
    }
    const uint64_t size = (uint64_t)sb.st_size;
    if ((s = find_directory(fp, path, size, &entries, &cd_size, &cd_off, err)) != PP_OK) goto out;
    cd = malloc(cd_size ? (size_t)cd_size : 1);
    z->m = calloc(entries ? (size_t)entries : 1, sizeof *z->m);
    z->path = strdup(path);
    if (!cd || !z->m || !z->path) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    if (!read_at(fp, cd_off, cd, (size_t)cd_size)) {
        s = PP_FAIL(err, PP_EIO, "%s: short read of the zip central directory", path);
        goto out;
    }
    size_t at = 0;
    for (uint64_t i = 0; i < entries && s == PP_OK; i++) s = read_entry(z, path, size, cd, cd_size, &at, i, err);
out:
    free(cd);
    fclose(fp);
    if (s != PP_OK) pprt_npz_close(z);
    return s;
}

pp_status pprt_npz_read(const pprt_npz *z, const char *key, pprt_npy *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    const struct pprt_npz_member *m = NULL;
    for (int i = 0; i < z->n && !m; i++)
        if (!strcmp(z->m[i].key, key)) m = &z->m[i];
    if (!m) return PP_FAIL(err, PP_EIO, "%s: no array '%s' in the archive", z->path, key);
    char what[1200];
    snprintf(what, sizeof what, "%s:%s", z->path, key);
    if (m->usize > (uint64_t)1 << 40) return PP_FAIL(err, PP_EINVAL, "%s: %llu bytes is absurd", what,
                                                     (unsigned long long)m->usize);
    FILE *fp;
    PP_TRY(pp_fopen_read(z->path, NULL, &fp, err));
    pp_status s = PP_OK;
    unsigned char lh[30], *c = NULL, *u = NULL;
    if (!read_at(fp, m->offset, lh, 30) || le32(lh) != 0x04034b50u) {
        s = PP_FAIL(err, PP_EINVAL, "%s: the member's local zip header is missing or damaged", what);
        goto out;
    }
    const uint64_t data_at = m->offset + 30 + le16(lh + 26) + le16(lh + 28);
    c = malloc(m->csize ? (size_t)m->csize : 1);
    if (!c) {
        s = PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %llu bytes", what, (unsigned long long)m->csize);
        goto out;
    }
    if (!read_at(fp, data_at, c, (size_t)m->csize)) {
        s = PP_FAIL(err, PP_EINVAL, "%s: the member's data runs past the end of the file", what);
        goto out;
    }
    if (m->method == 0) {
        s = pprt_npy_parse(c, (size_t)m->csize, what, out, err);
        goto out;
    }
    u = malloc(m->usize ? (size_t)m->usize : 1);
    if (!u) {
        s = PP_FAIL(err, PP_ENOMEM, "%s: cannot allocate %llu bytes", what, (unsigned long long)m->usize);
        goto out;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        s = PP_FAIL(err, PP_ENOMEM, "%s: zlib cannot start", what);
        goto out;
    }
    /* in chunks: zlib's counts are 32-bit */
    uint64_t in_left = m->csize, out_left = m->usize;
    unsigned char *ip = c, *op = u;
    int zr = Z_OK;
    while (zr == Z_OK) {
        uInt ic = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
        uInt oc = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
        zs.next_in = ip, zs.avail_in = ic, zs.next_out = op, zs.avail_out = oc;
        zr = inflate(&zs, Z_NO_FLUSH);
        ip += ic - zs.avail_in, in_left -= ic - zs.avail_in;
        op += oc - zs.avail_out, out_left -= oc - zs.avail_out;
        if (zr == Z_OK && ic == zs.avail_in && oc == zs.avail_out) zr = Z_BUF_ERROR; /* no progress */
    }
    inflateEnd(&zs);
    if (zr != Z_STREAM_END || out_left != 0) {
        s = PP_FAIL(err, PP_EINVAL, "%s: the deflated data is damaged (%s; %llu of %llu bytes inflated)", what,
                    zr == Z_STREAM_END ? "too short" : zs.msg ? zs.msg : "zlib error",
                    (unsigned long long)(m->usize - out_left), (unsigned long long)m->usize);
        goto out;
    }
    s = pprt_npy_parse(u, (size_t)m->usize, what, out, err);
out:
    free(c);
    free(u);
    fclose(fp);
    return s;
}
