/* plan_format.h: the fixed binary header of a plan file, shared by the
 * writer (plan/plan_write.c) and the loader (plan/plan_read.c).
 * docs/plan-format.md is the byte-by-byte specification; keep them in step.
 *
 *   0   8  magic "PPCCPLAN"
 *   8   4  format version (u32)            PP_PLAN_VERSION
 *  12   4  header size (u32)               PP_PLAN_HEADER_SIZE
 *  16   8  file size (u64)
 *  24   4  section count (u32)             PP_PLAN_NSECTIONS
 *  28   4  flags (u32): PP_PLAN_FLAG_REF_WEIGHTS or 0
 *  32  64  sections[2]: kind u32, reserved u32 (0), offset u64, size u64, xxh3 u64
 *  96   8  XXH3-64 of bytes [0, 96)
 * 104  24  reserved (0)
 * All integers little-endian. Section 0: metadata (plan.proto), starting at
 * byte 128. Section 1: weights, starting at a 64-byte aligned offset. */
#ifndef PP_PLAN_FORMAT_H
#define PP_PLAN_FORMAT_H

#include <stdint.h>
#include <stdlib.h>
#include <xxhash.h>

#define PP_PLAN_MAGIC "PPCCPLAN"
#define PP_PLAN_VERSION 2u     /* what ppcc writes: 2 adds Stage.backend/device, Node.chain */
#define PP_PLAN_VERSION_MIN 1u /* the oldest pprt reads (a version 1 plan has no placement and no
                                * chains: every stage pprt's choice, fusion as before) */
#define PP_PLAN_HEADER_SIZE 128u
#define PP_PLAN_NSECTIONS 2u
#define PP_PLAN_ALIGN 64u
#define PP_PLAN_HDRSUM_OFF 96u

enum { PP_SECTION_META = 1, PP_SECTION_WEIGHTS = 2 };

/* Header flag: some weights are EXTERNAL tensors, read from the files the
 * metadata's `sources` name (ppcc --ref-weights); a reader that does not know
 * the flag must refuse the plan rather than run it without them. */
#define PP_PLAN_FLAG_REF_WEIGHTS 1u

typedef struct pp_plan_section {
    uint32_t kind, reserved;
    uint64_t offset, size, xxh3;
} pp_plan_section;

static inline void pp_put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void pp_put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t pp_get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t pp_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A byte range [off, off + len) of a --ref-weights source. */
typedef struct pp_range {
    uint64_t off, len;
} pp_range;

static inline int pp_range_cmp(const void *a, const void *b) {
    const pp_range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : (x->len > y->len) - (x->len < y->len);
}

/* Source.used_xxh3: XXH3-64 (seed 0) of the bytes of base covered by the
 * union of r[0..n), in file order: the ranges are sorted and merged in
 * place, then hashed as one stream. Every range must lie inside base. */
static inline uint64_t pp_ranges_xxh3(const unsigned char *base, pp_range *r, size_t n) {
    if (n) qsort(r, n, sizeof *r, pp_range_cmp);
    XXH3_state_t *h = XXH3_createState();
    if (!h) return 0;
    XXH3_64bits_reset(h);
    uint64_t at = 0; /* bytes before this are hashed */
    for (size_t i = 0; i < n; i++) {
        uint64_t b = r[i].off > at ? r[i].off : at, e = r[i].off + r[i].len;
        if (e > b) XXH3_64bits_update(h, base + b, (size_t)(e - b));
        if (e > at) at = e;
    }
    uint64_t v = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return v;
}

#endif
