/* plan_read.c: map a plan file and verify all of it before anything runs:
 * here the file (header fields and checksums, section bounds and alignment),
 * the metadata message and the plan's inputs and outputs; each stage and the
 * chain of messages between them in plan_verify.c; a --ref-weights plan's
 * source files in plan_sources.c. Every failure says what was expected and
 * what was found. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "plan_read.h"

#define MAX_STAGES 4096

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
    size_t failed; /* the size of a block malloc refused (0: none): an unpack that fails after it ran out of memory */
} meta_arena;

void *pprt_plan_meta_alloc(void *ctx, size_t n) {
    meta_arena *a = ctx;
    n = (n + 15) & ~(size_t)15;
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? 2 * b->cap : (size_t)1 << 20;
        if (cap > ((size_t)64 << 20)) cap = (size_t)64 << 20;
        if (cap < n) cap = n;
        b = malloc(sizeof *b + cap);
        if (!b) {
            a->failed = sizeof *b + cap;
            return NULL;
        }
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

/* The header's fixed fields: size, magic, version, header size, file size,
 * checksum, section count, flags. */
static pp_status check_header(const unsigned char *b, size_t len, uint32_t *flags, uint32_t *version,
                              pp_err *err) {
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
    return PP_OK;
}

/* The section table (kinds, bounds, placement), the reserved header bytes,
 * the padding before the weights, and the sections' checksums. */
static pp_status check_sections(const unsigned char *b, size_t len, pp_plan_section sec[2], pp_err *err) {
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

pp_status pprt_plan_read_shape(const int64_t *d, size_t n, pp_shape *s, const char *what,
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
    PP_TRY(pprt_plan_read_shape(m->shape, m->n_shape, &io->shape, what, err));
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

/* The metadata message, unpacked into the plan's arena, and the plan-wide
 * fields: provenance, micro-batch, opset, the weights section. */
static pp_status read_meta(unsigned char *b, size_t len, const pp_plan_section sec[2], pprt_plan *p,
                           Ppplan__Plan **out, pp_err *err) {
    meta_arena *ma = calloc(1, sizeof *ma);
    if (!ma) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    p->meta_arena = ma;
    ProtobufCAllocator al = {.alloc = pprt_plan_meta_alloc, .free = arena_keep, .allocator_data = ma};
    Ppplan__Plan *m = ppplan__plan__unpack(&al, sec[0].size, b + sec[0].offset);
    if (!m && ma->failed)
        return PP_FAIL(err, PP_ENOMEM, "out of memory unpacking the plan's metadata (%llu bytes): cannot allocate "
                       "%zu bytes", (unsigned long long)sec[0].size, ma->failed);
    if (!m) return PP_FAIL(err, PP_EINVAL, "metadata at offset %llu: not a valid plan message",
                           (unsigned long long)sec[0].offset);
    *out = m;
    p->meta = m;
    p->producer = m->producer;
    p->model_hash = m->model_hash;
    p->options = m->options;
    p->batch_mixing = m->batch_mixing && *m->batch_mixing ? m->batch_mixing : NULL;
    p->train_devices = m->train_devices;
    if (m->optimizer && !m->train_devices)
        return PP_FAIL(err, PP_EINVAL, "optimizer: expected none in a plan that does not train, got one");
    pp_optim_init(&p->optim);
    p->has_optim = m->optimizer != NULL;
    if (m->optimizer) {
        const Ppplan__Optimizer *o = m->optimizer;
        p->optim = (pp_optim){.kind = o->kind, .lr = o->lr, .momentum = o->momentum, .nesterov = o->nesterov,
                              .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                              .clip_norm = o->clip_norm, .schedule = o->lr_schedule, .warmup_steps = o->warmup_steps,
                              .lr_min = o->lr_min, .loss_scale = o->loss_scale, .dynamic_scale = o->dynamic_scale,
                              .scale_growth = o->scale_growth ? o->scale_growth : PP_LOSS_SCALE_GROWTH,
                              .scale_backoff = o->scale_backoff ? o->scale_backoff : PP_LOSS_SCALE_BACKOFF,
                              .scale_interval = o->scale_interval ? o->scale_interval : PP_LOSS_SCALE_GROWTH_STEPS,
                              .precision = o->precision};
        PP_TRY(pp_optim_check(&p->optim, "the plan's optimizer", err));
    }
    p->batch = m->batch;
    p->opset = m->opset;
    if (m->precision < 0 || m->precision > 2 || (m->precision && m->train_devices))
        return PP_FAIL(err, PP_EINVAL, "precision: expected 0 (f32), 1 (bf16) or 2 (fp16) in an inference plan, got %d",
                       (int)m->precision);
    p->precision = m->precision;
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
    return PP_OK;
}

/* The tables' sizes, and the plan's inputs, outputs and frozen inputs. */
static pp_status read_ios(const Ppplan__Plan *m, pprt_plan *p, pp_err *err) {
    if (m->n_stages < 1 || m->n_stages > MAX_STAGES)
        return PP_FAIL(err, PP_EINVAL, "stage count: expected 1..%d, got %zu", MAX_STAGES, m->n_stages);
    /* no inputs only for an unbatched plan (one evaluation) */
    size_t min_in = m->batch == 0 ? 0 : 1;
    if (m->n_inputs < min_in || m->n_outputs < 1 || m->n_inputs > 1024 || m->n_outputs > 1024)
        return PP_FAIL(err, PP_EINVAL, "expected %zu..1024 inputs and 1..1024 outputs, got %zu and %zu",
                       min_in, m->n_inputs, m->n_outputs);
    p->n_inputs = (int)m->n_inputs;
    p->n_outputs = (int)m->n_outputs;
    p->n_wstages = m->train_split_w ? m->train_devices : 0;
    p->n_stages = (int)m->n_stages - p->n_wstages;
    if (m->train_devices < 0 || (m->train_devices > 0 && (size_t)m->train_devices * (m->train_split_w ? 3 : 2) !=
                                                              m->n_stages) || (m->train_split_w && m->train_devices < 1))
        return PP_FAIL(err, PP_EINVAL, "training devices: expected 0 or %s the %zu stages, got %d",
                       m->train_split_w ? "a third of (--schedule zb-h1)" : "half", m->n_stages, (int)m->train_devices);
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
    return check_file_names(p, err);
}

static pp_status load(unsigned char *b, size_t len, const char *model, pprt_plan *p, pp_err *err) {
    pp_plan_section sec[2];
    uint32_t flags = 0, version = 0;
    PP_TRY(check_header(b, len, &flags, &version, err));
    PP_TRY(check_sections(b, len, sec, err));
    p->version = version;
    Ppplan__Plan *m = NULL;
    PP_TRY(read_meta(b, len, sec, p, &m, err));
    bool ref = flags & PP_PLAN_FLAG_REF_WEIGHTS;
    if (ref ? m->n_sources < 1 || m->n_sources > 1024 : m->n_sources != 0)
        return PP_FAIL(err, PP_EINVAL, "weights sources: expected %s with header flags %u, got %zu",
                       ref ? "1..1024" : "none", flags, m->n_sources);
    PP_TRY(pprt_plan_open_sources(p, m, model, err));
    PP_TRY(read_ios(m, p, err));
    for (int i = 0; i < p->n_stages + p->n_wstages; i++)
        PP_TRY(pprt_plan_read_stage(m->stages[i], i, p, &p->stages[i], err));
    PP_TRY(pprt_plan_check_chain(p, err));
    return pprt_plan_verify_sources(p, m, err);
}

void pprt_plan_free(pprt_plan *p) {
    if (!p) return;
    if (p->stages)
        for (int i = 0; i < p->n_stages + p->n_wstages; i++) {
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
    pprt_plan_sources_close(p); /* and p->sources */
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

