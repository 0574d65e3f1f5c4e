/* plan_write.c: write a plan file: header, metadata, weights, with
 * XXH3-64 checksums, written to a temporary file and renamed into place.
 *
 * One pass over the weights: each piece is hashed and copied into a 4 MiB
 * block-aligned staging buffer that is written in whole blocks; the header,
 * which carries the weights' checksum, is patched into the first block and
 * written last. A large plan is written with O_DIRECT: the file is synced
 * anyway (pp_outfile_commit), and going through the page cache first doubled
 * the cost of a 1.2 GB plan (docs/design-notes.md, "ppcc compile time"). */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "plan.h"
#include "plan.pb-c.h"
#include "plan_format.h"

static const unsigned char zeros[PP_PLAN_ALIGN];

#define BLOCK 4096u                 /* O_DIRECT granularity (any device's logical block) */
#define STAGE_BYTES (4u << 20)      /* staging buffer */
#define HASH_PIECE (256u << 10)     /* hash then copy in cache-sized pieces */
#define DIRECT_MIN (16ull << 20)    /* plans from this size on bypass the page cache */

typedef struct sink {
    int fd;
    bool direct;
    unsigned char *buf; /* STAGE_BYTES, BLOCK-aligned */
    size_t fill;
    uint64_t off;       /* file offset of buf[0] */
    unsigned char *head; /* the file's first block, written last (BLOCK-aligned) */
    bool have_head;
    XXH3_state_t *h;    /* hashes what goes in while set */
} sink;

static bool write_all(sink *s, const unsigned char *p, size_t n, uint64_t at) {
    while (n) {
        ssize_t w = pwrite(s->fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && s->direct) {
            /* the file system took the flag but not the write: go buffered */
            int fl = fcntl(s->fd, F_GETFL);
            if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_DIRECT) != 0) return false;
            s->direct = false;
            continue;
        }
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return false;
        }
        p += w, n -= (size_t)w, at += (uint64_t)w;
    }
    return true;
}

/* Write the staged bytes, zero-padded to whole blocks (the file is truncated
 * to its size at the end). The file's first block is kept back. */
static bool flush(sink *s) {
    size_t n = pp_align_up(s->fill, BLOCK);
    memset(s->buf + s->fill, 0, n - s->fill);
    size_t skip = 0;
    if (s->off == 0 && n) {
        memcpy(s->head, s->buf, BLOCK);
        s->have_head = true;
        skip = BLOCK;
    }
    if (n > skip && !write_all(s, s->buf + skip, n - skip, s->off + skip)) return false;
    s->off += s->fill;
    s->fill = 0;
    return true;
}

static bool put(sink *s, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n) {
        size_t k = STAGE_BYTES - s->fill;
        if (k > n) k = n;
        if (k > HASH_PIECE) k = HASH_PIECE;
        if (s->h) XXH3_64bits_update(s->h, p, k);
        memcpy(s->buf + s->fill, p, k);
        s->fill += k, p += k, n -= k;
        if (s->fill == STAGE_BYTES && !flush(s)) return false;
    }
    return true;
}

static bool put_zeros(sink *s, size_t n) {
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (!put(s, zeros, k)) return false;
        n -= k;
    }
    return true;
}

/* The weights section: each constant at its offset, zero padding between. */
static bool emit_weights(const pp_plan_weight *w, size_t n, sink *s) {
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t off = (size_t)w[i].offset;
        if (off > pos && !put_zeros(s, off - pos)) return false;
        if (off > pos) pos = off;
        if (w[i].nbytes && !put(s, w[i].data, w[i].nbytes)) return false;
        pos += w[i].nbytes;
    }
    return true;
}

pp_status pp_plan_file_write(const Ppplan__Plan *plan, const pp_plan_weight *w, size_t n, size_t weights_bytes,
                             const char *path, pp_err *err) {
    size_t meta_len = ppplan__plan__get_packed_size(plan);
    unsigned char *meta = malloc(meta_len ? meta_len : 1);
    if (!meta) return PP_FAIL(err, PP_ENOMEM, "out of memory packing the plan");
    ppplan__plan__pack(plan, meta);

    uint64_t meta_off = PP_PLAN_HEADER_SIZE;
    uint64_t w_off = pp_align_up(meta_off + meta_len, PP_PLAN_ALIGN);
    uint64_t file_size = w_off + weights_bytes;

    sink s = {.fd = -1};
    s.buf = aligned_alloc(BLOCK, STAGE_BYTES);
    s.head = aligned_alloc(BLOCK, BLOCK);
    s.h = XXH3_createState();
    if (!s.buf || !s.head || !s.h) {
        free(meta), free(s.buf), free(s.head), XXH3_freeState(s.h);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }

    unsigned char hdr[PP_PLAN_HEADER_SIZE] = {0};
    memcpy(hdr, PP_PLAN_MAGIC, 8);
    pp_put_u32(hdr + 8, PP_PLAN_VERSION);
    pp_put_u32(hdr + 12, PP_PLAN_HEADER_SIZE);
    pp_put_u64(hdr + 16, file_size);
    pp_put_u32(hdr + 24, PP_PLAN_NSECTIONS);
    pp_put_u32(hdr + 28, plan->n_sources ? PP_PLAN_FLAG_REF_WEIGHTS : 0);
    unsigned char *sec = hdr + 32;
    pp_put_u32(sec + 0, PP_SECTION_META);
    pp_put_u64(sec + 8, meta_off);
    pp_put_u64(sec + 16, meta_len);
    pp_put_u64(sec + 24, XXH3_64bits(meta, meta_len));
    sec += 32;
    pp_put_u32(sec + 0, PP_SECTION_WEIGHTS);
    pp_put_u64(sec + 8, w_off);
    pp_put_u64(sec + 16, weights_bytes);

    pp_outfile out;
    pp_status st = pp_outfile_open(&out, path, err);
    if (st != PP_OK) {
        free(meta), free(s.buf), free(s.head), XXH3_freeState(s.h);
        return st;
    }
    if (out.fifo) { /* a reader may be there, but pwrite needs a seekable file */
        pp_outfile_commit(&out, false, NULL);
        free(meta), free(s.buf), free(s.head), XXH3_freeState(s.h);
        return pp_outfile_check(path, false, err);
    }
    s.fd = fileno(out.f); /* written with pwrite; the FILE only closes it */
    if (file_size >= DIRECT_MIN && !out.special) {
        int fl = fcntl(s.fd, F_GETFL);
        s.direct = fl >= 0 && fcntl(s.fd, F_SETFL, fl | O_DIRECT) == 0;
    }
    XXH3_state_t *h = s.h;
    s.h = NULL;
    bool ok = put(&s, hdr, sizeof hdr) && put(&s, meta, meta_len) &&
              put_zeros(&s, (size_t)(w_off - meta_off - meta_len));
    XXH3_64bits_reset(h);
    s.h = h;
    ok = ok && emit_weights(w, n, &s);
    s.h = NULL;
    if (ok) {
        /* the header, now complete, goes into the first block */
        pp_put_u64(sec + 24, XXH3_64bits_digest(h)); /* the weights' checksum */
        pp_put_u64(hdr + PP_PLAN_HDRSUM_OFF, XXH3_64bits(hdr, PP_PLAN_HDRSUM_OFF));
        if (s.off == 0) memcpy(s.buf, hdr, sizeof hdr);
        else memcpy(s.head, hdr, sizeof hdr);
        ok = flush(&s) && (!s.have_head || write_all(&s, s.head, BLOCK, 0));
        ok = ok && (out.special || ftruncate(s.fd, (off_t)file_size) == 0);
    }
    st = pp_outfile_commit(&out, ok, err);
    free(meta), free(s.buf), free(s.head), XXH3_freeState(h);
    return st;
}
