/* plan_read.c: map a plan file and verify all of it before anything runs.
 *
 * Checked: header fields and checksums, section bounds and alignment, the
 * metadata message, every tensor's type, shape, size, kind and offset (inside
 * the arena, the weights or the message), every node's op, ids, attributes and
 * shapes (re-inferred with the same shape functions as the compiler), that
 * every tensor is written once before it is read, that no two activations
 * whose lifetimes overlap share arena bytes, and that each stage's incoming
 * message matches the previous stage's outgoing one slot for slot. Every
 * failure says what was expected and what was found. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#include "plan_format.h"
#include "plan.pb-c.h"
#include "plan.h"

#define MAX_STAGES 4096
#define MAX_COUNT (1 << 24)
/* A stage's activation arena: 1 TiB, far above any machine pprt runs on,
 * far below what would overflow a size computation. */
#define MAX_ARENA ((size_t)1 << 40)

/* ---- the metadata's memory: one arena, freed at once ------------------------------------- */

/* protobuf-c allocates every message, string and array of the metadata on
 * its own (millions for a 1M-node plan, and as many frees); here they are
 * cut from large blocks instead, and the node attributes too. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

typedef struct {
    arena_block *head;
} meta_arena;

static void *arena_alloc(void *ctx, size_t n) {
    meta_arena *a = ctx;
    n = (n + 15) & ~(size_t)15;
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? 2 * b->cap : (size_t)1 << 20;
        if (cap > ((size_t)64 << 20)) cap = (size_t)64 << 20;
        if (cap < n) cap = n;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head, b->used = 0, b->cap = cap;
        a->head = b;
    }
    void *p = (unsigned char *)b->data + b->used;
    b->used += n;
    return p;
}

static void arena_keep(void *ctx, void *p) {
    (void)ctx, (void)p; /* freed with the arena */
}

static void arena_free_all(meta_arena *a) {
    if (!a) return;
    for (arena_block *b = a->head, *next; b; b = next) next = b->next, free(b);
    free(a);
}

static pp_status check_header(const unsigned char *b, size_t len, pp_plan_section sec[2],
                              uint32_t *flags, uint32_t *version, pp_err *err) {
    if (len < PP_PLAN_HEADER_SIZE)
        return PP_FAIL(err, PP_EINVAL, "not a plan: file is %zu bytes, expected at least %u (header)",
                       len, PP_PLAN_HEADER_SIZE);
    if (memcmp(b, PP_PLAN_MAGIC, 8) != 0)
        return PP_FAIL(err, PP_EINVAL, "not a plan: expected magic \"%s\" at offset 0, got \"%.8s\"",
                       PP_PLAN_MAGIC, (const char *)b);
    uint32_t ver = pp_get_u32(b + 8);
    if (ver < PP_PLAN_VERSION_MIN || ver > PP_PLAN_VERSION)
        return PP_FAIL(err, PP_EINVAL,
                       "plan format version %u, this pprt reads versions %u to %u: recompile the model "
                       "with the ppcc of this release",
                       ver, PP_PLAN_VERSION_MIN, PP_PLAN_VERSION);
    *version = ver;
    uint32_t hs = pp_get_u32(b + 12);
    if (hs != PP_PLAN_HEADER_SIZE)
        return PP_FAIL(err, PP_EINVAL, "header size at offset 12: expected %u, got %u",
                       PP_PLAN_HEADER_SIZE, hs);
    uint64_t fs = pp_get_u64(b + 16);
    if (fs != len)
        return PP_FAIL(err, PP_EINVAL,
                       "file size: header says %llu bytes, file has %zu (truncated or padded)",
                       (unsigned long long)fs, len);
    uint64_t hsum = pp_get_u64(b + PP_PLAN_HDRSUM_OFF);
    uint64_t want = XXH3_64bits(b, PP_PLAN_HDRSUM_OFF);
    if (hsum != want)
        return PP_FAIL(err, PP_EINVAL, "header checksum at offset 96: expected %016llx, got %016llx",
                       (unsigned long long)want, (unsigned long long)hsum);
    uint32_t ns = pp_get_u32(b + 24);
    if (ns != PP_PLAN_NSECTIONS)
        return PP_FAIL(err, PP_EINVAL, "section count at offset 24: expected %u, got %u",
                       PP_PLAN_NSECTIONS, ns);
    *flags = pp_get_u32(b + 28);
    if (*flags & ~PP_PLAN_FLAG_REF_WEIGHTS)
        return PP_FAIL(err, PP_EINVAL, "flags at offset 28: expected 0 or %u, got %u",
                       PP_PLAN_FLAG_REF_WEIGHTS, *flags);
    for (int i = 0; i < 2; i++) {
        const unsigned char *s = b + 32 + 32 * i;
        sec[i] = (pp_plan_section){pp_get_u32(s), pp_get_u32(s + 4), pp_get_u64(s + 8),
                                   pp_get_u64(s + 16), pp_get_u64(s + 24)};
        uint32_t want_kind = i == 0 ? PP_SECTION_META : PP_SECTION_WEIGHTS;
        if (sec[i].kind != want_kind || sec[i].reserved != 0)
            return PP_FAIL(err, PP_EINVAL, "section %d: expected kind %u, got %u", i, want_kind,
                           sec[i].kind);
        if (sec[i].offset > len || sec[i].size > len - sec[i].offset)
            return PP_FAIL(err, PP_EINVAL,
                           "section %d: [%llu, +%llu) lies outside the %zu-byte file", i,
                           (unsigned long long)sec[i].offset, (unsigned long long)sec[i].size, len);
    }
    if (sec[0].offset != PP_PLAN_HEADER_SIZE)
        return PP_FAIL(err, PP_EINVAL, "metadata offset: expected %u, got %llu", PP_PLAN_HEADER_SIZE,
                       (unsigned long long)sec[0].offset);
    if (sec[1].offset % PP_PLAN_ALIGN || sec[1].offset < sec[0].offset + sec[0].size ||
        sec[1].offset + sec[1].size != len)
        return PP_FAIL(err, PP_EINVAL,
                       "weights section at %llu (+%llu): expected a 64-aligned offset after the "
                       "metadata, ending at the end of the file (%zu)",
                       (unsigned long long)sec[1].offset, (unsigned long long)sec[1].size, len);
    for (size_t i = PP_PLAN_HDRSUM_OFF + 8; i < PP_PLAN_HEADER_SIZE; i++)
        if (b[i]) return PP_FAIL(err, PP_EINVAL, "reserved header byte %zu: expected 0, got %u", i, b[i]);
    for (uint64_t i = sec[0].offset + sec[0].size; i < sec[1].offset; i++)
        if (b[i])
            return PP_FAIL(err, PP_EINVAL, "padding byte %llu before the weights: expected 0, got %u",
                           (unsigned long long)i, b[i]);
    for (int i = 0; i < 2; i++) {
        uint64_t got = XXH3_64bits(b + sec[i].offset, sec[i].size);
        if (got != sec[i].xxh3)
            return PP_FAIL(err, PP_EINVAL,
                           "%s checksum: expected %016llx, got %016llx (the file is corrupt)",
                           i ? "weights" : "metadata", (unsigned long long)sec[i].xxh3,
                           (unsigned long long)got);
    }
    return PP_OK;
}

static pp_status read_shape(const int64_t *d, size_t n, pp_shape *s, const char *what,
                            pp_err *err) {
    if (n > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EINVAL, "%s: rank %zu, expected at most %d", what, n, PP_MAX_DIMS);
    s->rank = (int)n;
    for (size_t i = 0; i < n; i++) {
        if (d[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "%s: dim %zu is %lld, expected >= 0", what, i,
                           (long long)d[i]);
        s->dim[i] = d[i];
    }
    return PP_OK;
}

static pp_status read_io(const Ppplan__IO *m, int64_t batch, pprt_io *io, const char *what,
                         pp_err *err) {
    io->name = m->name;
    io->dtype = (pp_dtype)m->dtype;
    PP_TRY(pp_data_name_check(m->name, what, err));
    if (pp_dtype_bits(io->dtype) == 0)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': unknown element type %d", what, m->name, m->dtype);
    PP_TRY(read_shape(m->shape, m->n_shape, &io->shape, what, err));
    if (batch > 0 && (io->shape.rank < 1 || io->shape.dim[0] != batch))
        return PP_FAIL(err, PP_EINVAL, "%s '%s': expected dim 0 = micro-batch %lld, got %s", what,
                       m->name, (long long)batch,
                       io->shape.rank ? "another size" : "a scalar");
    size_t nb;
    pp_err e = {0};
    if (pp_shape_nbytes(&io->shape, io->dtype, &nb, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': %s", what, m->name, e.msg);
    /* samples are sliced at byte boundaries: a packed type's sample must fill whole bytes */
    int64_t numel = 0;
    (void)pp_shape_numel(&io->shape, &numel, NULL); /* succeeded in pp_shape_nbytes */
    if (batch > 0 && pp_dtype_packed(io->dtype) &&
        (uint64_t)(numel / batch) * pp_dtype_bits(io->dtype) % 8 != 0)
        return PP_FAIL(err, PP_EUNSUP, "%s '%s': a sample of packed type %s does not fill whole bytes",
                       what, m->name, pp_dtype_name(io->dtype));
    io->sample_bytes = batch > 0 ? nb / (size_t)batch : nb; /* batch 0: one whole tensor */
    return PP_OK;
}

static bool tdesc_matches(const pprt_tdesc *t, pp_dtype dt, const pp_shape *s) {
    return t->dtype == dt && pp_shape_eq(&t->shape, s);
}

static pp_status make_layout(pprt_stage *st, const int32_t *ids, int n, pprt_msg_layout *lay,
                             pp_err *err) {
    lay->n = n;
    lay->t = calloc(pp_count(n), sizeof *lay->t);
    lay->off = calloc(pp_count(n), sizeof *lay->off);
    if (!lay->t || !lay->off) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        lay->t[i] = &st->t[ids[i]];
        off = pp_align_up(off, PP_PLAN_ALIGN);
        lay->off[i] = off;
        if (pp_add_ovf(off, st->t[ids[i]].nbytes, &off))
            return PP_FAIL(err, PP_EINVAL, "stage %d: message size overflows", st->index);
    }
    lay->bytes = pp_align_up(off, PP_PLAN_ALIGN);
    return PP_OK;
}

#define KIND_EXTERNAL 4 /* plan.proto Tensor.EXTERNAL: a PPRT_WEIGHT with a source */

/* The bytes shape functions may read while a stage is verified: a weight's,
 * where they are aligned for any element type (a misaligned EXTERNAL weight
 * is only copied at pprt_stage_weights; ppcc never references one small
 * enough for a shape function to read). */
static const void *check_data(const pprt_plan *p, const pprt_tdesc *t) {
    if (t->kind != PPRT_WEIGHT) return NULL;
    if (t->data) return t->data;
    const unsigned char *d = p->sources[t->source].map + t->offset;
    return (uintptr_t)d % 8 ? NULL : d;
}

/* ---- no two live activations share arena bytes, in O(n log n) ---------------------- */

typedef struct {
    int t;            /* tensor id */
    int start, end;   /* node indices, inclusive */
    size_t off, size; /* arena bytes [off, off + size) */
    int pos;          /* rank of off among the distinct offsets */
} live_slot;

static int by_start(const void *a, const void *b) {
    const live_slot *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}
static int by_off_then_id(const void *a, const void *b) {
    const live_slot *x = *(live_slot *const *)a, *y = *(live_slot *const *)b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : (x->t > y->t) - (x->t < y->t);
}
static int by_end(const void *a, const void *b) {
    const live_slot *x = *(live_slot *const *)a, *y = *(live_slot *const *)b;
    return (x->end > y->end) - (x->end < y->end);
}

/* Fenwick tree over offset ranks: how many live slots start at or below a rank. */
static void fw_add(int *fw, int n, int i, int d) {
    for (i++; i <= n; i += i & -i) fw[i] += d;
}
static int fw_prefix(const int *fw, int i) { /* ranks 0..i */
    int s = 0;
    for (i++; i > 0; i -= i & -i) s += fw[i];
    return s;
}
static int fw_kth(const int *fw, int n, int k) { /* the rank holding the k-th (1-based) live slot */
    int pos = 0, step = 1;
    while (step * 2 <= n) step *= 2;
    for (; step; step /= 2)
        if (pos + step <= n && fw[pos + step] < k) pos += step, k -= fw[pos];
    return pos; /* 0-based rank */
}

/* A sweep over node indices: slots enter in order of their writer and leave
 * after their last reader; the live ones never overlap (or the plan is
 * refused), so a new slot overlaps some live one exactly when it overlaps the
 * live slot starting at or below its offset or the next one above: two
 * queries on a Fenwick tree over the offsets. Equal to comparing every pair
 * of activations (which took 27 s at 100k nodes). */
int pprt_slots_overlap(int n, const int *start, const int *end, const size_t *off, const size_t *size, int *pa,
                       int *pb) {
    live_slot *sl = malloc(sizeof *sl * pp_count(n));
    live_slot **by_o = malloc(sizeof *by_o * pp_count(n)), **by_e = malloc(sizeof *by_e * pp_count(n));
    live_slot **at = malloc(sizeof *at * pp_count(n)); /* rank -> the live slot starting there */
    int *fw = calloc((size_t)n + 1, sizeof *fw);
    int found = -1;
    if (!sl || !by_o || !by_e || !at || !fw) goto out;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (size[i] > 0) sl[k++] = (live_slot){i, start[i], end[i] > start[i] ? end[i] : start[i], off[i], size[i], 0};
    n = k;
    qsort(sl, (size_t)n, sizeof *sl, by_start);
    for (int i = 0; i < n; i++) by_o[i] = by_e[i] = &sl[i];
    qsort(by_o, (size_t)n, sizeof *by_o, by_off_then_id);
    int ranks = 0;
    for (int i = 0; i < n; i++) {
        if (i && by_o[i]->off != by_o[i - 1]->off) ranks++;
        by_o[i]->pos = ranks;
    }
    ranks++;
    qsort(by_e, (size_t)n, sizeof *by_e, by_end);
    int gone = 0, live = 0;
    found = 0;
    for (int i = 0; i < n; i++) {
        live_slot *a = &sl[i];
        while (gone < n && by_e[gone]->end < a->start) { /* ended before a starts: entered already */
            fw_add(fw, ranks, by_e[gone]->pos, -1);
            at[by_e[gone]->pos] = NULL;
            gone++, live--;
        }
        int below = fw_prefix(fw, a->pos);
        const live_slot *b = NULL;
        if (below > 0) { /* the live slot starting at or below a's offset */
            const live_slot *c = at[fw_kth(fw, ranks, below)];
            if (c->off + c->size > a->off) b = c;
        }
        if (!b && below < live) { /* the next one above */
            const live_slot *c = at[fw_kth(fw, ranks, below + 1)];
            if (c->off < a->off + a->size) b = c;
        }
        if (b) {
            *pa = b->t < a->t ? b->t : a->t;
            *pb = b->t < a->t ? a->t : b->t;
            found = 1;
            break;
        }
        fw_add(fw, ranks, a->pos, 1);
        at[a->pos] = a;
        live++;
    }
out:
    free(sl), free(by_o), free(by_e), free(at), free(fw);
    return found;
}

static pp_status check_overlaps(const pprt_stage *st, int si, const int *writer, const int *last, pp_err *err) {
    int n = 0;
    for (int i = 0; i < st->n_tensors; i++) n += st->t[i].kind == PPRT_ACTIVATION && writer[i] >= 0;
    int *id = malloc(sizeof *id * pp_count(n)), *b = malloc(sizeof *b * pp_count(n)),
        *e = malloc(sizeof *e * pp_count(n));
    size_t *off = malloc(sizeof *off * pp_count(n)), *size = malloc(sizeof *size * pp_count(n));
    int found = -1, x = 0, y = 0;
    if (id && b && e && off && size) {
        int k = 0;
        for (int i = 0; i < st->n_tensors; i++)
            if (st->t[i].kind == PPRT_ACTIVATION && writer[i] >= 0)
                id[k] = i, b[k] = writer[i], e[k] = last[i], off[k] = st->t[i].offset, size[k++] = st->t[i].nbytes;
        found = pprt_slots_overlap(n, b, e, off, size, &x, &y);
    }
    pp_status s = found < 0   ? PP_FAIL(err, PP_ENOMEM, "out of memory")
                  : found > 0 ? PP_FAIL(err, PP_EINVAL, "stage %d: arena slots of '%s' and '%s' overlap while both "
                                        "are live", si, st->t[id[x]].name, st->t[id[y]].name)
                              : PP_OK;
    free(id), free(b), free(e), free(off), free(size);
    return s;
}

/* "stage SI KIND I" into w (96 bytes), for messages: made for every tensor
 * and node, so without printf (which cost a tenth of loading a 1M-node plan). */
static void label(char *w, const char *kind, int si, int i) {
    char *o = w;
    const char *parts[3] = {"stage ", kind, NULL};
    int nums[2] = {si, i};
    for (int k = 0; k < 2; k++) {
        for (const char *c = parts[k]; *c; c++) *o++ = *c;
        if (k) *o++ = ' ';
        char d[12];
        int n = 0;
        unsigned v = (unsigned)nums[k];
        do d[n++] = (char)('0' + v % 10), v /= 10;
        while (v);
        while (n) *o++ = d[--n];
        if (!k) *o++ = ' ';
    }
    *o = 0;
}

/* Verify one stage and fill st. */
static pp_status read_stage(const Ppplan__Stage *m, int si, const pprt_plan *p, pprt_stage *st,
                            pp_err *err) {
    const size_t weights_bytes = p->weights_bytes;
    const int opset = p->opset;
    char w[96];
    st->index = si;
    if (m->n_tensors > MAX_COUNT || m->n_nodes > MAX_COUNT || m->n_recv > MAX_COUNT ||
        m->n_send > MAX_COUNT)
        return PP_FAIL(err, PP_EINVAL, "stage %d: absurd table sizes", si);
    st->n_tensors = (int)m->n_tensors;
    st->n_nodes = (int)m->n_nodes;
    st->n_recv = (int)m->n_recv;
    st->n_send = (int)m->n_send;
    st->recv = m->recv;
    st->send = m->send;
    st->arena_bytes = m->arena_bytes;
    st->flops = m->flops;
    st->weight_bytes = m->weight_bytes;
    /* where it runs: a backend name of [a-z0-9_-] (checked when pprt looks it up) and a device */
    st->backend = p->version >= 2 ? m->backend : "";
    st->device = p->version >= 2 ? m->device : -1;
    if (strlen(st->backend) > 31 || st->device < -1)
        return PP_FAIL(err, PP_EINVAL, "stage %d: placement: expected a backend name of at most 31 characters and "
                       "a device >= -1, got %zu characters and device %d", si, strlen(st->backend), st->device);
    for (const char *c = st->backend; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return PP_FAIL(err, PP_EINVAL, "stage %d: placement: backend name has a character 0x%02x outside "
                           "[a-z0-9_-]", si, (unsigned char)*c);
    if (st->n_nodes == 0) return PP_FAIL(err, PP_EINVAL, "stage %d: expected at least one node, got 0", si);
    st->t = calloc(pp_count(st->n_tensors), sizeof *st->t);
    st->nodes = calloc((size_t)st->n_nodes, sizeof *st->nodes);
    int *writer = malloc(sizeof(int) * pp_count(st->n_tensors));
    int *last = malloc(sizeof(int) * pp_count(st->n_tensors));
    pp_status s = PP_OK;
    if (!st->t || !st->nodes || !writer || !last) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    /* tensors */
    for (int i = 0; i < st->n_tensors && s == PP_OK; i++) {
        const Ppplan__Tensor *mt = m->tensors[i];
        pprt_tdesc *t = &st->t[i];
        label(w, "tensor", si, i);
        t->name = mt->name;
        t->dtype = (pp_dtype)mt->dtype;
        t->kind = (int)mt->kind;
        t->offset = mt->offset;
        t->nbytes = mt->nbytes;
        t->source = -1;
        writer[i] = -1;
        last[i] = -1;
        if (pp_dtype_bits(t->dtype) == 0) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected a known element type, got %d", w, t->name, mt->dtype);
            break;
        }
        if ((s = read_shape(mt->shape, mt->n_shape, &t->shape, w, err)) != PP_OK) break;
        size_t nb;
        pp_err e = {0};
        if (pp_shape_nbytes(&t->shape, t->dtype, &nb, &e) != PP_OK) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': %s", w, t->name, e.msg);
            break;
        }
        if (nb != mt->nbytes) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected %zu bytes for its shape, got %llu", w,
                        t->name, nb, (unsigned long long)mt->nbytes);
            break;
        }
        switch (t->kind) {
        case PPRT_ACTIVATION:
            if (t->offset % PP_PLAN_ALIGN || t->offset > st->arena_bytes ||
                t->nbytes > st->arena_bytes - t->offset)
                s = PP_FAIL(err, PP_EINVAL,
                            "%s '%s': arena slot [%zu, +%zu) expected 64-aligned inside the "
                            "%zu-byte arena",
                            w, t->name, t->offset, t->nbytes, st->arena_bytes);
            break;
        case PPRT_WEIGHT:
            if (t->offset % PP_PLAN_ALIGN || t->offset > weights_bytes ||
                t->nbytes > weights_bytes - t->offset)
                s = PP_FAIL(err, PP_EINVAL,
                            "%s '%s': weights [%zu, +%zu) expected 64-aligned inside the "
                            "%zu-byte weights section",
                            w, t->name, t->offset, t->nbytes, weights_bytes);
            else
                t->data = p->weights + t->offset;
            break;
        case KIND_EXTERNAL: {
            if (mt->source < 0 || mt->source >= p->n_sources) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected a source below %d, got %d", w,
                            t->name, p->n_sources, mt->source);
                break;
            }
            const struct pprt_source *src = &p->sources[mt->source];
            if (t->offset > src->len || t->nbytes > src->len - t->offset) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': bytes [%zu, +%zu) lie outside '%s' (%zu bytes)",
                            w, t->name, t->offset, t->nbytes, src->path, src->len);
                break;
            }
            t->kind = PPRT_WEIGHT;
            t->source = mt->source;
            const unsigned char *d = src->map + t->offset;
            t->data = (uintptr_t)d % PP_PLAN_ALIGN ? NULL : d;
            break;
        }
        case PPRT_RECV:
            if (t->offset >= (size_t)st->n_recv || st->recv[t->offset] != i)
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected to be received in slot %zu, it is not",
                            w, t->name, t->offset);
            break;
        case PPRT_SEND:
            if (t->offset >= (size_t)st->n_send || st->send[t->offset] != i)
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected to be sent in slot %zu, it is not",
                            w, t->name, t->offset);
            break;
        default:
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': expected kind 0..%d, got %d", w, t->name,
                        p->n_sources ? KIND_EXTERNAL : 3, t->kind);
        }
        if (s == PP_OK && mt->source != 0 && t->source < 0)
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': a source (%d) on a tensor that is not EXTERNAL", w,
                        t->name, mt->source);
    }
    if (s != PP_OK) goto out;
    /* the arena is what its slots need (ppcc's memory plan: the end of the
     * highest slot, sizes rounded up to 64), and no more than MAX_ARENA */
    size_t need = 0;
    for (int i = 0; i < st->n_tensors; i++)
        if (st->t[i].kind == PPRT_ACTIVATION) {
            size_t end = st->t[i].offset + pp_align_up(st->t[i].nbytes, PP_PLAN_ALIGN);
            if (end > need) need = end;
        }
    if (st->arena_bytes != need || need > MAX_ARENA) {
        s = st->arena_bytes != need
                ? PP_FAIL(err, PP_EINVAL, "stage %d: arena of %zu bytes, expected %zu (the end of its highest "
                          "activation slot)", si, st->arena_bytes, need)
                : PP_FAIL(err, PP_EINVAL, "stage %d: arena of %zu bytes, more than the %llu a stage may have",
                          si, st->arena_bytes, (unsigned long long)MAX_ARENA);
        goto out;
    }
    for (int i = 0; i < st->n_recv && s == PP_OK; i++)
        if (st->recv[i] < 0 || st->recv[i] >= st->n_tensors || st->t[st->recv[i]].kind != PPRT_RECV ||
            st->t[st->recv[i]].offset != (size_t)i)
            s = PP_FAIL(err, PP_EINVAL, "stage %d: recv slot %d: expected a RECV tensor for slot %d", si, i, i);
    for (int i = 0; i < st->n_send && s == PP_OK; i++) {
        int id = st->send[i];
        if (id < 0 || id >= st->n_tensors ||
            !(st->t[id].kind == PPRT_RECV ||
              (st->t[id].kind == PPRT_SEND && st->t[id].offset == (size_t)i)))
            s = PP_FAIL(err, PP_EINVAL,
                        "stage %d: send slot %d: expected a SEND tensor for slot %d or a received one",
                        si, i, i);
    }
    if (s != PP_OK) goto out;
    /* nodes */
    for (int ni = 0; ni < st->n_nodes && s == PP_OK; ni++) {
        const Ppplan__Node *mn = m->nodes[ni];
        pprt_node *n = &st->nodes[ni];
        n->name = mn->name;
        n->flops = mn->flops;
        /* version 1 plans carry no chains: any node may be absorbed, as before */
        n->chain = p->version < 2 || mn->chain;
        if (mn->chain && ni == 0) {
            s = PP_FAIL(err, PP_EINVAL, "stage %d node 0 '%s': marked as chained to a node before it, but it is "
                        "the stage's first", si, mn->name);
            break;
        }
        label(w, "node", si, ni);
        if (!pp_op_lookup(mn->op, &n->op)) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': unknown op '%s'", w, mn->name, mn->op);
            break;
        }
        const pp_op_info *info = &pp_op_table[n->op];
        if (mn->n_inputs < (size_t)info->min_inputs || mn->n_inputs > (size_t)info->max_inputs ||
            mn->n_outputs < 1 || mn->n_outputs > (size_t)info->max_outputs) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s': %s expects %d..%d inputs and 1..%d outputs, got %zu and %zu",
                        w, mn->name, info->name, info->min_inputs, info->max_inputs,
                        info->max_outputs, mn->n_inputs, mn->n_outputs);
            break;
        }
        n->n_in = (int)mn->n_inputs;
        n->n_out = (int)mn->n_outputs;
        n->in = mn->inputs;
        n->out = mn->outputs;
        if (mn->n_attrs > 4096) {
            s = PP_FAIL(err, PP_EINVAL, "%s: absurd attribute count", w);
            break;
        }
        n->n_attrs = (int)mn->n_attrs;
        n->attrs = arena_alloc(p->meta_arena, sizeof *n->attrs * (mn->n_attrs ? mn->n_attrs : 1));
        if (n->attrs) memset(n->attrs, 0, sizeof *n->attrs * (mn->n_attrs ? mn->n_attrs : 1));
        if (!n->attrs) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < mn->n_attrs && s == PP_OK; k++) {
            const Ppplan__Attr *ma = mn->attrs[k];
            pp_attr *a = &n->attrs[k];
            a->name = ma->name;
            a->type = (pp_attr_type)ma->type;
            a->i = ma->i;
            a->f = ma->f;
            a->s = ma->s;
            if (a->type == PP_ATTR_INTS) {
                a->ints = ma->ints;
                a->n = (int)(ma->n_ints > MAX_COUNT ? MAX_COUNT : ma->n_ints);
            } else if (a->type == PP_ATTR_FLOATS) {
                a->floats = ma->floats;
                a->n = (int)(ma->n_floats > MAX_COUNT ? MAX_COUNT : ma->n_floats);
            } else if (a->type == PP_ATTR_STRINGS) {
                a->strs = (const char *const *)ma->strs;
                a->n = (int)(ma->n_strs > MAX_COUNT ? MAX_COUNT : ma->n_strs);
            } else if (a->type == PP_ATTR_TENSOR) {
                char what[160];
                snprintf(what, sizeof what, "%s attribute '%s'", w, ma->name);
                a->t_dtype = (pp_dtype)ma->t_dtype;
                size_t nb = 0;
                pp_err e2 = {0};
                if ((s = read_shape(ma->t_shape, ma->n_t_shape, &a->t_shape, what, err)) != PP_OK) break;
                if (pp_dtype_bits(a->t_dtype) == 0 ||
                    pp_shape_nbytes(&a->t_shape, a->t_dtype, &nb, &e2) != PP_OK || nb != ma->t_data.len) {
                    s = PP_FAIL(err, PP_EINVAL, "%s: expected %zu bytes of a known type, got %zu bytes of type %d",
                                what, nb, ma->t_data.len, ma->t_dtype);
                    break;
                }
                a->t_data = ma->t_data.data;
                a->t_nbytes = nb;
            } else if (a->type < PP_ATTR_INT || a->type > PP_ATTR_FLOATS) {
                s = PP_FAIL(err, PP_EINVAL, "%s attribute '%s': expected type 1..6 or 8, got %d", w, ma->name, ma->type);
            }
        }
        if (s != PP_OK) break;
        static _Thread_local pp_tinfo tin[PP_MAX_INPUTS], tout[PP_MAX_OUTPUTS];
        for (int k = 0; k < n->n_in && s == PP_OK; k++) {
            int id = n->in[k];
            if (id == -1) {
                tin[k] = (pp_tinfo){PP_UNDEFINED, {0, {0}}, NULL};
                continue;
            }
            if (id < 0 || id >= st->n_tensors) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': input %d: expected a tensor id below %d, got %d",
                            w, n->name, k, st->n_tensors, id);
                break;
            }
            const pprt_tdesc *t = &st->t[id];
            if ((t->kind == PPRT_ACTIVATION || t->kind == PPRT_SEND) && writer[id] < 0) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': input '%s' is read before any node writes it",
                            w, n->name, t->name);
                break;
            }
            last[id] = ni;
            tin[k] = (pp_tinfo){t->dtype, t->shape, check_data(p, t)};
        }
        for (int k = 0; k < n->n_out && s == PP_OK; k++) {
            int id = n->out[k];
            if (id < 0 || id >= st->n_tensors) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': output %d: expected a tensor id below %d, got %d",
                            w, n->name, k, st->n_tensors, id);
                break;
            }
            const pprt_tdesc *t = &st->t[id];
            if (t->kind != PPRT_ACTIVATION && t->kind != PPRT_SEND) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s' is a weight or received tensor",
                            w, n->name, t->name);
                break;
            }
            if (writer[id] >= 0) {
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s' is already written by node %d",
                            w, n->name, t->name, writer[id]);
                break;
            }
            writer[id] = ni;
        }
        if (s != PP_OK) break;
        pp_err e = {0};
        if (pp_infer(n->op, (pp_attrs){n->attrs, n->n_attrs, opset}, tin, n->n_in, tout, n->n_out, &e) != PP_OK) {
            s = PP_FAIL(err, PP_EINVAL, "%s '%s' (%s): %s", w, n->name, info->name, e.msg);
            break;
        }
        for (int k = 0; k < n->n_out; k++) {
            const pprt_tdesc *t = &st->t[n->out[k]];
            if (!tdesc_matches(t, tout[k].dtype, &tout[k].shape)) {
                char a[96], b[96];
                s = PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s': expected %s %s, got %s %s", w,
                            n->name, t->name, pp_dtype_name(tout[k].dtype),
                            pp_shape_str(&tout[k].shape, a, sizeof a), pp_dtype_name(t->dtype),
                            pp_shape_str(&t->shape, b, sizeof b));
                break;
            }
        }
    }
    if (s != PP_OK) goto out;
    for (int i = 0; i < st->n_tensors; i++)
        if (st->t[i].kind == PPRT_SEND && writer[i] < 0) {
            s = PP_FAIL(err, PP_EINVAL, "stage %d: sent tensor '%s' is written by no node", si, st->t[i].name);
            goto out;
        }
    if ((s = check_overlaps(st, si, writer, last, err)) != PP_OK) goto out;
    if ((s = make_layout(st, st->recv, st->n_recv, &st->in, err)) != PP_OK) goto out;
    s = make_layout(st, st->send, st->n_send, &st->out, err);
out:
    free(writer);
    free(last);
    return s;
}

static pp_status check_link(const pprt_msg_layout *a, const pprt_msg_layout *b, const char *what,
                            pp_err *err) {
    if (a->n != b->n)
        return PP_FAIL(err, PP_EINVAL, "%s: expected %d tensors, got %d", what, a->n, b->n);
    for (int i = 0; i < a->n; i++)
        if (!tdesc_matches(a->t[i], b->t[i]->dtype, &b->t[i]->shape))
            return PP_FAIL(err, PP_EINVAL, "%s: slot %d ('%s') differs in type or shape", what, i,
                           a->t[i]->name);
    return PP_OK;
}

/* ---- weights files that change under a running plan -------------------------
 *
 * A --ref-weights plan maps files that pprt does not own. Another process may
 * cut one short while stages read it: a read past the new end raises SIGBUS
 * in whichever thread made it (a stage thread, an OpenMP thread of oneDNN's,
 * a copy at executor create). The handler below maps zeros over the rest of
 * that file's mapping, records where, and returns, so the read completes and
 * the run goes on; pprt_plan_sources_unchanged then refuses the run. Faults
 * elsewhere go to the handler that was there before (or kill as SIGBUS does).
 * A file overwritten in place is found by the same check (times and XXH3). */

enum { GUARDS = 4096 };
static struct {
    _Atomic uintptr_t lo, hi; /* a source's mapping, whole pages; hi 0: a free slot */
    size_t *_Atomic cut;      /* its pprt_source.cut */
} guards[GUARDS];
static pthread_mutex_t guards_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_prev;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static long guard_page;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARDS; i++) {
        uintptr_t lo = atomic_load(&guards[i].lo), hi = atomic_load(&guards[i].hi);
        size_t *cut = atomic_load(&guards[i].cut);
        if (a < lo || a >= hi || !cut) continue;
        uintptr_t page = a & ~(uintptr_t)(guard_page - 1);
        /* the raw system call: async-signal-safe, and no interposer */
        if (syscall(SYS_mmap, page, hi - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            (long)MAP_FAILED)
            break;
        size_t off = page - lo, old = __atomic_load_n(cut, __ATOMIC_RELAXED);
        while (off < old && !__atomic_compare_exchange_n(cut, &old, off, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        errno = saved;
        return;
    }
    errno = saved;
    if (guard_prev.sa_flags & SA_SIGINFO) {
        guard_prev.sa_sigaction(sig, si, ctx);
    } else if (guard_prev.sa_handler != SIG_DFL && guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
    } else { /* the default action: the faulting access repeats, and kills */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGBUS, &dfl, NULL);
    }
}

static void guard_install(void) {
    guard_page = sysconf(_SC_PAGESIZE);
    if (guard_page <= 0) guard_page = 4096;
    struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &guard_prev);
}

static void guard_add(struct pprt_source *src) {
    pthread_once(&guard_once, guard_install);
    src->cut = SIZE_MAX;
    uintptr_t lo = (uintptr_t)src->map, hi = lo + ((src->len + (size_t)guard_page - 1) & ~((size_t)guard_page - 1));
    pthread_mutex_lock(&guards_mu);
    for (int i = 0; i < GUARDS; i++)
        if (!atomic_load(&guards[i].hi)) {
            atomic_store(&guards[i].cut, &src->cut);
            atomic_store(&guards[i].lo, lo);
            atomic_store(&guards[i].hi, hi);
            break;
        }
    pthread_mutex_unlock(&guards_mu);
}

static void guard_remove(const struct pprt_source *src) {
    pthread_mutex_lock(&guards_mu);
    for (int i = 0; i < GUARDS; i++)
        if (atomic_load(&guards[i].cut) == &src->cut) {
            atomic_store(&guards[i].hi, 0);
            atomic_store(&guards[i].lo, 0);
            atomic_store(&guards[i].cut, NULL);
        }
    pthread_mutex_unlock(&guards_mu);
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

pp_status pprt_plan_sources_unchanged(const pprt_plan *p, pp_err *err) {
    for (int i = 0; i < p->n_sources; i++) {
        const struct pprt_source *src = &p->sources[i];
        size_t cut = __atomic_load_n(&src->cut, __ATOMIC_RELAXED);
        if (cut != SIZE_MAX)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' was cut short while pprt read it (a read at byte %zu of its "
                           "%zu failed): the run used weights that are not the plan's, so no outputs are "
                           "written", src->path, cut, src->len);
        struct stat sb;
        if (fstat(src->fd, &sb) != 0 || (uint64_t)sb.st_size != src->size || (uint64_t)sb.st_ino != src->ino ||
            (uint64_t)sb.st_dev != src->dev || ns_of(sb.st_mtim) != src->mtime_ns || ns_of(sb.st_ctim) != src->ctime_ns)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' changed while pprt ran (now %lld bytes, modification time %+.3f s "
                           "from the one at load): the run may have read weights that are not the plan's, so no "
                           "outputs are written", src->path, (long long)sb.st_size,
                           (double)(ns_of(sb.st_mtim) - src->mtime_ns) / 1e9);
        uint64_t h = XXH3_64bits(src->map, src->len);
        if (h != src->xxh3)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' changed while pprt ran (XXH3 %016llx, %016llx at load): the run "
                           "read weights that are not the plan's, so no outputs are written", src->path,
                           (unsigned long long)h, (unsigned long long)src->xxh3);
    }
    return PP_OK;
}

/* Map source i of a --ref-weights plan: a regular file of the recorded size.
 * Its hashes are checked by verify_sources, once the whole plan has been
 * verified (every EXTERNAL tensor inside the recorded size): a plan that
 * claims a huge file is refused by what is cheap before anything is read. */
static pp_status open_source(const Ppplan__Source *ms, int i, const char *model, struct pprt_source *src,
                             pp_err *err) {
    char path[4096];
    const char *loc = ms->location ? ms->location : "";
    int n;
    if (!model) {
        n = snprintf(path, sizeof path, "%s", ms->path ? ms->path : "");
    } else if (!*loc) {
        n = snprintf(path, sizeof path, "%s", model);
    } else {
        const char *slash = strrchr(model, '/');
        n = slash ? snprintf(path, sizeof path, "%.*s/%s", (int)(slash - model), model, loc)
                  : snprintf(path, sizeof path, "%s", loc);
    }
    if (n < 0 || (size_t)n >= sizeof path || !path[0])
        return PP_FAIL(err, PP_EINVAL, "weights source %d: expected a path of 1..%zu bytes", i, sizeof path - 1);
    src->path = strdup(path);
    if (!src->path) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const char *what = *loc ? "external data file" : "model file";
    int fd;
    struct stat sb;
    pp_err e = {0};
    if (pp_open_read(path, *loc ? "the external data file" : "the model file", 0, &fd, &sb, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s: this --ref-weights plan reads its weights from it (pprt --model FILE "
                       "names where the model is now)", e.msg);
    if ((uint64_t)sb.st_size != ms->size || ms->size == 0) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL,
                       "the %s '%s' has %lld bytes, the plan was compiled from one of %llu: not the "
                       "same file (recompile the plan, or pass pprt --model the original)",
                       what, path, (long long)sb.st_size, (unsigned long long)ms->size);
    }
    void *map = mmap(NULL, (size_t)ms->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        close(fd);
        return PP_FAIL(err, e == ENOMEM ? PP_ENOMEM : PP_EIO, "cannot map the %s '%s' (%llu bytes): %s", what, path,
                       (unsigned long long)ms->size, strerror(e));
    }
    src->map = map;
    src->len = (size_t)ms->size;
    /* kept open: pprt_plan_sources_unchanged compares the file with this */
    src->fd = fd;
    src->dev = (uint64_t)sb.st_dev, src->ino = (uint64_t)sb.st_ino, src->size = (uint64_t)sb.st_size;
    src->mtime_ns = ns_of(sb.st_mtim), src->ctime_ns = ns_of(sb.st_ctim);
    src->xxh3 = ms->xxh3;
    guard_add(src); /* before the first read: the file may be cut short already */
    return PP_OK;
}

/* Each source is the file the plan was compiled from: first the bytes the
 * plan reads there (used_xxh3: their cost is that of the weights, which are
 * read anyway), so that another file of the same size is refused without
 * reading the rest of it; then the whole file (xxh3), so a model changed
 * elsewhere (a small weight the plan copied, the graph) is refused too. */
static pp_status verify_sources(const pprt_plan *p, const Ppplan__Plan *m, pp_err *err) {
    size_t cap = 0;
    for (int s = 0; s < p->n_stages; s++) cap += (size_t)p->stages[s].n_tensors;
    pp_range *rs = malloc(sizeof *rs * (cap ? cap : 1));
    if (!rs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status st = PP_OK;
    for (int i = 0; i < p->n_sources && st == PP_OK; i++) {
        const struct pprt_source *src = &p->sources[i];
        const char *what = m->sources[i]->location && *m->sources[i]->location ? "external data file" : "model file";
        size_t n = 0;
        for (int s = 0; s < p->n_stages; s++)
            for (int k = 0; k < p->stages[s].n_tensors; k++) {
                const pprt_tdesc *t = &p->stages[s].t[k];
                if (t->source == i) rs[n++] = (pp_range){t->offset, t->nbytes};
            }
        uint64_t want = m->sources[i]->used_xxh3, h;
        if (want && (h = pp_ranges_xxh3(src->map, rs, n)) != want)
            st = PP_FAIL(err, PP_EINVAL,
                         "the %s '%s': the bytes this plan reads there (%zu tensor%s) have XXH3 %016llx, the plan "
                         "was compiled from ones with %016llx: the file changed, or is another one (recompile the "
                         "plan, or pass pprt --model the original)",
                         what, src->path, n, n == 1 ? "" : "s", (unsigned long long)h, (unsigned long long)want);
        else if ((h = XXH3_64bits(src->map, src->len)), __atomic_load_n(&src->cut, __ATOMIC_RELAXED) != SIZE_MAX)
            st = PP_FAIL(err, PP_EINVAL, "the %s '%s' was cut short while pprt read it: the file changed "
                         "(recompile the plan, or pass pprt --model the original)", what, src->path);
        else if (h != m->sources[i]->xxh3)
            st = PP_FAIL(err, PP_EINVAL,
                         "the %s '%s' has XXH3 %016llx, the plan was compiled from one with %016llx: "
                         "the file changed (recompile the plan, or pass pprt --model the original)",
                         what, src->path, (unsigned long long)h, (unsigned long long)m->sources[i]->xxh3);
    }
    free(rs);
    return st;
}

/* Inputs (and frozen inputs) and outputs whose names map to one data file
 * (pp_file_name) are refused, as ppcc refuses them. */
static pp_status check_file_names(const pprt_plan *p, pp_err *err) {
    const size_t cap = (size_t)p->n_inputs + (size_t)p->n_frozen + (size_t)p->n_outputs + 1;
    const char **names = malloc(cap * sizeof *names);
    if (!names) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_inputs; i++) names[i] = p->inputs[i].name;
    for (int i = 0; i < p->n_frozen; i++) names[p->n_inputs + i] = p->frozen[i];
    pp_status s = pp_file_names_check(names, p->n_inputs + p->n_frozen, "inputs", "read from", err);
    for (int i = 0; i < p->n_outputs; i++) names[i] = p->outputs[i].name;
    if (s == PP_OK) s = pp_file_names_check(names, p->n_outputs, "outputs", "written to", err);
    free(names);
    return s;
}

static pp_status load(unsigned char *b, size_t len, const char *model, pprt_plan *p, pp_err *err) {
    pp_plan_section sec[2];
    uint32_t flags = 0, version = 0;
    PP_TRY(check_header(b, len, sec, &flags, &version, err));
    p->version = version;
    meta_arena *ma = calloc(1, sizeof *ma);
    if (!ma) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    p->meta_arena = ma;
    ProtobufCAllocator al = {.alloc = arena_alloc, .free = arena_keep, .allocator_data = ma};
    Ppplan__Plan *m = ppplan__plan__unpack(&al, sec[0].size, b + sec[0].offset);
    if (!m) return PP_FAIL(err, PP_EINVAL, "metadata at offset %llu: not a valid plan message",
                           (unsigned long long)sec[0].offset);
    p->meta = m;
    p->producer = m->producer;
    p->model_hash = m->model_hash;
    p->options = m->options;
    p->batch_mixing = m->batch_mixing && *m->batch_mixing ? m->batch_mixing : NULL;
    p->batch = m->batch;
    p->opset = m->opset;
    p->weights = b + sec[1].offset;
    p->weights_bytes = sec[1].size;
    p->file_bytes = len;
    if (m->weights_bytes != sec[1].size)
        return PP_FAIL(err, PP_EINVAL, "weights size: metadata says %llu, section has %llu",
                       (unsigned long long)m->weights_bytes, (unsigned long long)sec[1].size);
    if (m->opset < 1 || m->opset > 1000)
        return PP_FAIL(err, PP_EINVAL, "opset: expected 1..1000, got %d", m->opset);
    if (m->batch < 0 || m->batch > (1 << 24))
        return PP_FAIL(err, PP_EINVAL, "micro-batch: expected 0..2^24, got %lld", (long long)m->batch);
    bool ref = flags & PP_PLAN_FLAG_REF_WEIGHTS;
    if (ref ? m->n_sources < 1 || m->n_sources > 1024 : m->n_sources != 0)
        return PP_FAIL(err, PP_EINVAL, "weights sources: expected %s with header flags %u, got %zu",
                       ref ? "1..1024" : "none", flags, m->n_sources);
    if (m->n_sources) {
        p->sources = calloc(m->n_sources, sizeof *p->sources);
        if (!p->sources) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (size_t i = 0; i < m->n_sources; i++) p->sources[i].fd = -1;
        for (size_t i = 0; i < m->n_sources; i++) {
            p->n_sources = (int)i + 1; /* freed with the plan from here on */
            PP_TRY(open_source(m->sources[i], (int)i, model, &p->sources[i], err));
        }
    }
    if (m->n_stages < 1 || m->n_stages > MAX_STAGES)
        return PP_FAIL(err, PP_EINVAL, "stage count: expected 1..%d, got %zu", MAX_STAGES, m->n_stages);
    /* no inputs only for an unbatched plan (one evaluation) */
    size_t min_in = m->batch == 0 ? 0 : 1;
    if (m->n_inputs < min_in || m->n_outputs < 1 || m->n_inputs > 1024 || m->n_outputs > 1024)
        return PP_FAIL(err, PP_EINVAL, "expected %zu..1024 inputs and 1..1024 outputs, got %zu and %zu",
                       min_in, m->n_inputs, m->n_outputs);
    p->n_inputs = (int)m->n_inputs;
    p->n_outputs = (int)m->n_outputs;
    p->n_stages = (int)m->n_stages;
    p->inputs = calloc(m->n_inputs ? m->n_inputs : 1, sizeof *p->inputs);
    p->outputs = calloc(m->n_outputs, sizeof *p->outputs);
    p->stages = calloc(m->n_stages, sizeof *p->stages);
    if (!p->inputs || !p->outputs || !p->stages) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_inputs; i++) PP_TRY(read_io(m->inputs[i], p->batch, &p->inputs[i], "input", err));
    for (int i = 0; i < p->n_outputs; i++) PP_TRY(read_io(m->outputs[i], p->batch, &p->outputs[i], "output", err));
    if (m->n_frozen_inputs > 1024)
        return PP_FAIL(err, PP_EINVAL, "expected at most 1024 frozen inputs, got %zu", m->n_frozen_inputs);
    p->n_frozen = (int)m->n_frozen_inputs;
    p->frozen = m->frozen_inputs;
    PP_TRY(check_file_names(p, err));
    for (int i = 0; i < p->n_stages; i++)
        PP_TRY(read_stage(m->stages[i], i, p, &p->stages[i], err));
    /* links: plan inputs -> stage 0 -> ... -> last stage -> plan outputs */
    pprt_stage *first = &p->stages[0], *lastst = &p->stages[p->n_stages - 1];
    if (first->n_recv != p->n_inputs)
        return PP_FAIL(err, PP_EINVAL, "stage 0 receives %d tensors, expected the %d plan inputs",
                       first->n_recv, p->n_inputs);
    for (int i = 0; i < p->n_inputs; i++)
        if (!tdesc_matches(first->in.t[i], p->inputs[i].dtype, &p->inputs[i].shape))
            return PP_FAIL(err, PP_EINVAL, "stage 0 slot %d: differs from plan input '%s'", i, p->inputs[i].name);
    if (lastst->n_send != p->n_outputs)
        return PP_FAIL(err, PP_EINVAL, "last stage sends %d tensors, expected the %d plan outputs",
                       lastst->n_send, p->n_outputs);
    for (int i = 0; i < p->n_outputs; i++)
        if (!tdesc_matches(lastst->out.t[i], p->outputs[i].dtype, &p->outputs[i].shape))
            return PP_FAIL(err, PP_EINVAL, "last stage slot %d: differs from plan output '%s'", i, p->outputs[i].name);
    for (int i = 1; i < p->n_stages; i++) {
        char what[64];
        snprintf(what, sizeof what, "boundary %d -> %d", i - 1, i);
        PP_TRY(check_link(&p->stages[i - 1].out, &p->stages[i].in, what, err));
    }
    return verify_sources(p, m, err);
}

void pprt_plan_free(pprt_plan *p) {
    if (!p) return;
    if (p->stages)
        for (int i = 0; i < p->n_stages; i++) {
            pprt_stage *st = &p->stages[i];
            free(st->nodes); /* their attributes live in the metadata's arena */
            for (int k = 0; st->t && k < st->n_tensors; k++)
                pprt_stage_weight_release(p, i, k);
            free(st->t);
            free(st->in.t);
            free(st->in.off);
            free(st->out.t);
            free(st->out.off);
        }
    free(p->stages);
    for (int i = 0; i < p->n_sources; i++) {
        if (p->sources[i].map) {
            guard_remove(&p->sources[i]);
            munmap((void *)p->sources[i].map, p->sources[i].len);
        }
        if (p->sources[i].fd >= 0) close(p->sources[i].fd);
        free((char *)p->sources[i].path);
    }
    free(p->sources);
    free(p->inputs);
    free(p->outputs);
    arena_free_all(p->meta_arena); /* the metadata, all of it */
    if (p->map) munmap(p->map, p->map_len);
    free(p->alloc);
    free(p);
}

pp_status pprt_plan_load_mem(const void *buf, size_t len, pprt_plan **out, pp_err *err) {
    *out = NULL;
    pprt_plan *p = calloc(1, sizeof *p);
    /* copy into 64-aligned memory, as the mmapped file would be */
    void *copy = NULL;
    if (!p || posix_memalign(&copy, PP_PLAN_ALIGN, len ? len : 1) != 0) {
        free(p);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    if (len) memcpy(copy, buf, len);
    p->alloc = copy;
    pp_status s = load(copy, len, NULL, p, err);
    if (s != PP_OK) {
        pprt_plan_free(p);
        return s;
    }
    *out = p;
    return PP_OK;
}

pp_status pprt_plan_load(const char *path, const char *model, pprt_plan **out, pp_err *err) {
    *out = NULL;
    int fd;
    struct stat sb;
    PP_TRY(pp_open_read(path, "plan", 0, &fd, &sb, err));
    size_t len = (size_t)sb.st_size;
    if (len < PP_PLAN_HEADER_SIZE) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL, "%s: not a plan: file is %zu bytes, expected at least %u",
                       path, len, PP_PLAN_HEADER_SIZE);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) /* out of address space (ulimit -v) is a runtime failure, not bad input */
        return PP_FAIL(err, errno == ENOMEM ? PP_ENOMEM : PP_EIO, "cannot map plan '%s' (%zu bytes): %s", path, len,
                       strerror(errno));
    pprt_plan *p = calloc(1, sizeof *p);
    if (!p) {
        munmap(map, len);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    p->map = map;
    p->map_len = len;
    pp_err e = {0};
    pp_status s = load(map, len, model, p, &e);
    if (s != PP_OK) {
        pprt_plan_free(p);
        return PP_FAIL(err, s, "%s: %s", path, e.msg);
    }
    *out = p;
    return PP_OK;
}

pp_status pprt_stage_weight(const pprt_plan *p, int stage, int tid, pp_err *err) {
    pprt_tdesc *t = &p->stages[stage].t[tid]; /* the plan is const to its users; this fills a cache */
    if (t->kind != PPRT_WEIGHT || t->data) return PP_OK;
    /* mapped, not malloc'ed: freed copies go back to the system at once
     * (malloc would keep many of them in its heap) */
    void *d = mmap(NULL, t->nbytes ? t->nbytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
        return PP_FAIL(err, PP_ENOMEM, "stage %d: cannot allocate %zu bytes for weight '%s'", stage,
                       t->nbytes, t->name);
    memcpy(d, p->sources[t->source].map + t->offset, t->nbytes);
    t->data = d;
    t->copy = true;
    return PP_OK;
}

pp_status pprt_stage_weights(const pprt_plan *p, int stage, pp_err *err) {
    for (int i = 0; i < p->stages[stage].n_tensors; i++) PP_TRY(pprt_stage_weight(p, stage, i, err));
    return PP_OK;
}

void pprt_stage_weight_release(const pprt_plan *p, int stage, int tid) {
    pprt_tdesc *t = &p->stages[stage].t[tid];
    if (!t->copy) return;
    munmap((void *)t->data, t->nbytes ? t->nbytes : 1);
    t->data = NULL;
    t->copy = false;
}
