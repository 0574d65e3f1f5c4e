/* plan_write.c: serialize a lowered plan: header, metadata, weights, with
 * XXH3-64 checksums, written to a temporary file and renamed into place. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "backend.h"
#include "plan.pb-c.h"
#include "plan_format.h"

static const unsigned char zeros[PP_PLAN_ALIGN];

/* Stream the weights section: each used constant at its offset, zero padding
 * between. When f is NULL, only hash. */
static int emit_weights(const pp_lowered *l, FILE *f, XXH3_state_t *h) {
    const pp_graph *g = l->g;
    size_t pos = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (l->weight_off[v] < 0) continue;
        size_t off = (size_t)l->weight_off[v];
        while (pos < off) {
            size_t n = off - pos < sizeof zeros ? off - pos : sizeof zeros;
            if (h) XXH3_64bits_update(h, zeros, n);
            if (f && fwrite(zeros, 1, n, f) != n) return -1;
            pos += n;
        }
        const pp_value *val = &g->values[v];
        if (val->nbytes) {
            if (h) XXH3_64bits_update(h, val->data, val->nbytes);
            if (f && fwrite(val->data, 1, val->nbytes, f) != val->nbytes) return -1;
        }
        pos += val->nbytes;
    }
    return 0;
}

pp_status pp_plan_write(const pp_lowered *l, const char *path, pp_err *err) {
    size_t meta_len = ppplan__plan__get_packed_size(l->plan);
    unsigned char *meta = malloc(meta_len ? meta_len : 1);
    if (!meta) return PP_FAIL(err, PP_ENOMEM, "out of memory packing the plan");
    ppplan__plan__pack(l->plan, meta);

    uint64_t meta_off = PP_PLAN_HEADER_SIZE;
    uint64_t w_off = pp_align_up(meta_off + meta_len, PP_PLAN_ALIGN);
    uint64_t file_size = w_off + l->weights_bytes;

    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        free(meta);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    XXH3_64bits_reset(h);
    emit_weights(l, NULL, h);
    uint64_t w_sum = XXH3_64bits_digest(h);
    XXH3_freeState(h);

    unsigned char hdr[PP_PLAN_HEADER_SIZE] = {0};
    memcpy(hdr, PP_PLAN_MAGIC, 8);
    pp_put_u32(hdr + 8, PP_PLAN_VERSION);
    pp_put_u32(hdr + 12, PP_PLAN_HEADER_SIZE);
    pp_put_u64(hdr + 16, file_size);
    pp_put_u32(hdr + 24, PP_PLAN_NSECTIONS);
    pp_put_u32(hdr + 28, 0);
    unsigned char *sec = hdr + 32;
    pp_put_u32(sec + 0, PP_SECTION_META);
    pp_put_u64(sec + 8, meta_off);
    pp_put_u64(sec + 16, meta_len);
    pp_put_u64(sec + 24, XXH3_64bits(meta, meta_len));
    sec += 32;
    pp_put_u32(sec + 0, PP_SECTION_WEIGHTS);
    pp_put_u64(sec + 8, w_off);
    pp_put_u64(sec + 16, l->weights_bytes);
    pp_put_u64(sec + 24, w_sum);
    pp_put_u64(hdr + PP_PLAN_HDRSUM_OFF, XXH3_64bits(hdr, PP_PLAN_HDRSUM_OFF));

    pp_outfile out;
    pp_status s = pp_outfile_open(&out, path, err);
    if (s != PP_OK) {
        free(meta);
        return s;
    }
    FILE *f = out.f;
    bool ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr;
    if (ok) ok = fwrite(meta, 1, meta_len, f) == meta_len;
    if (ok) {
        size_t pad = (size_t)(w_off - meta_off - meta_len);
        ok = fwrite(zeros, 1, pad, f) == pad;
    }
    if (ok) ok = emit_weights(l, f, NULL) == 0;
    s = pp_outfile_commit(&out, ok, err);
    free(meta);
    return s;
}
