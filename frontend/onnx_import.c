/* onnx_import.c: build a pp_graph from an ONNX ModelProto.
 *
 * Is: parsing (protobuf-c), validation of everything the rest of the compiler
 * relies on (names, types, dims, tensor sizes, opset, domains), and mapping
 * nodes onto the op table. Constants point into the parsed message, which the
 * graph keeps alive. Is not: shape inference (ir/shape.c) or any rewriting. */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "onnx/onnx.pb-c.h"

#define MIN_OPSET 7
/* ops this compiler supports changed only in the types they accept between
 * opsets 21 and 27 (checked against onnx 1.22's schemas; docs/design-notes.md) */
#define MAX_OPSET 27

/* Large initializer bytes are not unpacked by protobuf-c (which copies every
 * bytes field): the model is first walked at the wire level, the raw_data of
 * each large initializer is cut out of a small copy of the message that
 * protobuf-c then unpacks, and the initializer's raw_data is pointed back at
 * the original bytes: in place in the mapped model file (pp_import_onnx),
 * or copied once into the graph (pp_import_onnx_mem). Anything the walk does
 * not expect (a malformed field, a repeated graph or raw_data) leaves the
 * message whole for protobuf-c to unpack, or reject, as it always did. */
#define STRIP_MIN 4096          /* raw_data from this size on is cut out */
#define ALIGN_COPY_MAX (64 << 10) /* misaligned in-place bytes up to this are copied */

typedef struct cut {
    size_t init;                /* initializer index in the graph */
    const uint8_t *p;           /* raw_data payload */
    size_t len;
    size_t fs, fe;              /* the whole field (key, length, payload) in buf */
    size_t ts, te;              /* its TensorProto's payload */
    size_t tks;                 /* the TensorProto field's key */
} cut;

typedef struct model_keep {
    Onnx__ModelProto *m;
    cut *cuts;                  /* raw_data that points outside protobuf-c's memory */
    size_t n_cuts;
    void *map;                  /* the mapped model file, when data points into it */
    size_t map_len;
} model_keep;

static void free_model(void *p) {
    model_keep *k = p;
    if (!k) return;
    if (k->m) {
        for (size_t i = 0; i < k->n_cuts; i++) { /* not protobuf-c's to free */
            Onnx__TensorProto *t = k->m->graph->initializer[k->cuts[i].init];
            t->has_raw_data = 0;
            t->raw_data.data = NULL;
            t->raw_data.len = 0;
        }
        onnx__model_proto__free_unpacked(k->m, NULL);
    }
    if (k->map) munmap(k->map, k->map_len);
    free(k->cuts);
    free(k);
}

static bool wire_varint(const uint8_t *b, size_t end, size_t *pos, uint64_t *v) {
    uint64_t r = 0;
    for (int sh = 0; sh < 64 && *pos < end; sh += 7) {
        uint8_t c = b[(*pos)++];
        r |= (uint64_t)(c & 0x7f) << sh;
        if (c < 0x80) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* One field at *pos: its number, wire type and (wire type 2) payload. */
static bool wire_field(const uint8_t *b, size_t end, size_t *pos, uint32_t *num, int *wt,
                       size_t *ps, size_t *pe) {
    uint64_t key, v;
    if (!wire_varint(b, end, pos, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff) return false;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return wire_varint(b, end, pos, &v);
    case 1: if (end - *pos < 8) return false; *pos += 8; return true;
    case 5: if (end - *pos < 4) return false; *pos += 4; return true;
    case 2:
        if (!wire_varint(b, end, pos, &v) || v > end - *pos) return false;
        *ps = *pos;
        *pe = *pos + (size_t)v;
        *pos = *pe;
        return true;
    default: return false; /* groups: protobuf-c decides */
    }
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v) {
    while (v >= 0x80) *o++ = (uint8_t)(v | 0x80), v >>= 7;
    *o++ = (uint8_t)v;
    return o;
}

/* ---- nesting depth, before protobuf-c recurses ------------------------------------ */

/* protobuf-c unpacks (and frees) nested messages by recursion, one C stack
 * frame chain per level: a model nested thousands of levels deep (a TypeProto
 * of Sequences, If subgraphs inside If subgraphs) overflows the stack. The
 * wire format is walked first with a stack of our own, guided by protobuf-c's
 * descriptors (a field whose type is a message opens a level), and a model
 * deeper than this is refused. protobuf's C++ parser (onnx, onnxruntime)
 * stops at 100 levels by default too. */
#define MAX_NESTING 100

typedef struct {
    const ProtobufCMessageDescriptor *d;
    size_t end;
} nest_frame;

/* The deepest nesting of messages in b[0..len) read as message type d (the
 * message itself is level 1), and the type found deepest. A malformed field
 * ends the walk (protobuf-c then rejects the message). -1: out of memory. */
static int nesting_depth(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t len,
                         const char **deepest) {
    size_t cap = 64, top = 0, pos = 0, ps = 0, pe = 0;
    nest_frame *st = malloc(cap * sizeof *st);
    if (!st) return -1;
    st[0] = (nest_frame){d, len};
    int max = 1;
    *deepest = d->name;
    for (;;) {
        if (pos >= st[top].end) {
            if (top == 0) break;
            top--;
            continue;
        }
        uint32_t num;
        int wt;
        if (!wire_field(b, st[top].end, &pos, &num, &wt, &ps, &pe)) break;
        if (wt != 2) continue;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(st[top].d, num);
        if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (top + 1 == cap) {
            nest_frame *n = realloc(st, 2 * cap * sizeof *st);
            if (!n) {
                free(st);
                return -1;
            }
            st = n, cap *= 2;
        }
        st[++top] = (nest_frame){f->descriptor, pe};
        pos = ps; /* into the submessage */
        if ((int)top + 1 > max) {
            max = (int)top + 1;
            *deepest = ((const ProtobufCMessageDescriptor *)f->descriptor)->name;
        }
    }
    free(st);
    return max;
}

static pp_status check_nesting(const uint8_t *buf, size_t len, pp_err *err) {
    const char *deepest = "";
    int depth = nesting_depth(&onnx__model_proto__descriptor, buf, len, &deepest);
    if (depth < 0) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (depth > MAX_NESTING)
        return PP_FAIL(err, PP_EINVAL, "the model's messages are nested %d levels deep (its deepest: %s), more "
                       "than the %d levels ppcc accepts (protobuf's own default limit); refused before parsing",
                       depth, deepest, MAX_NESTING);
    return PP_OK;
}

/* Find the large raw_data fields of the initializers. False: leave the
 * message whole (nothing to cut, or a layout the walk does not expect). */
static bool find_cuts(const uint8_t *b, size_t len, size_t *gks, size_t *gs, size_t *ge,
                      cut **out, size_t *n_out) {
    size_t pos = 0, ps = 0, pe = 0;
    uint32_t num;
    int wt, graphs = 0;
    while (pos < len) {
        size_t k = pos;
        if (!wire_field(b, len, &pos, &num, &wt, &ps, &pe)) return false;
        if (num != 7) continue;
        if (wt != 2 || ++graphs > 1) return false;
        *gks = k, *gs = ps, *ge = pe;
    }
    if (!graphs) return false;
    cut *cuts = NULL;
    size_t n = 0, cap = 0, init = 0;
    for (pos = *gs; pos < *ge;) {
        size_t tk = pos, ts = 0, te = 0;
        if (!wire_field(b, *ge, &pos, &num, &wt, &ts, &te)) goto whole;
        if (num != 5) continue;
        if (wt != 2) goto whole;
        int raws = 0;
        cut c = {.init = init++};
        for (size_t q = ts; q < te;) {
            size_t f = q, rs = 0, re = 0;
            if (!wire_field(b, te, &q, &num, &wt, &rs, &re)) goto whole;
            if (num != 9) continue;
            if (wt != 2 || ++raws > 1) goto whole;
            c = (cut){c.init, b + rs, re - rs, f, q, ts, te, tk};
        }
        if (!raws || c.len < STRIP_MIN) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            cut *nc = realloc(cuts, cap * sizeof *nc);
            if (!nc) goto whole;
            cuts = nc;
        }
        cuts[n++] = c;
    }
    if (!n) goto whole;
    *out = cuts;
    *n_out = n;
    return true;
whole:
    free(cuts);
    return false;
}

/* The message with the cut fields left out (a malloc'd copy). */
static uint8_t *cut_message(const uint8_t *b, size_t len, size_t gks, size_t gs, size_t ge,
                            const cut *c, size_t n, size_t *out_len) {
    size_t glen = ge - gs;
    for (size_t i = 0; i < n; i++) {
        size_t old_t = c[i].te - c[i].ts, new_t = old_t - (c[i].fe - c[i].fs);
        glen = glen - (c[i].te - c[i].tks) + varint_len(5 << 3 | 2) + varint_len(new_t) + new_t;
    }
    size_t total = gks + varint_len(7 << 3 | 2) + varint_len(glen) + glen + (len - ge);
    uint8_t *o = malloc(total ? total : 1), *w = o;
    if (!o) return NULL;
    memcpy(w, b, gks), w += gks;
    w = put_varint(w, 7 << 3 | 2);
    w = put_varint(w, glen);
    size_t at = gs;
    for (size_t i = 0; i < n; i++) {
        memcpy(w, b + at, c[i].tks - at), w += c[i].tks - at;
        size_t new_t = (c[i].te - c[i].ts) - (c[i].fe - c[i].fs);
        w = put_varint(w, 5 << 3 | 2);
        w = put_varint(w, new_t);
        memcpy(w, b + c[i].ts, c[i].fs - c[i].ts), w += c[i].fs - c[i].ts;
        memcpy(w, b + c[i].fe, c[i].te - c[i].fe), w += c[i].te - c[i].fe;
        at = c[i].te;
    }
    memcpy(w, b + at, ge - at), w += ge - at;
    memcpy(w, b + ge, len - ge), w += len - ge;
    *out_len = (size_t)(w - o);
    return o;
}

/* protobuf-c's allocations, by malloc and free as its default allocator
 * makes them, remembering the size of one malloc refused: an unpack that
 * failed for want of memory is out of memory, not a corrupt model. */
static void *watched_alloc(void *failed, size_t n) {
    void *p = malloc(n);
    if (!p) *(size_t *)failed = n ? n : 1;
    return p;
}

static void watched_free(void *failed, void *p) {
    (void)failed;
    free(p);
}

/* The unpack failed for want of `failed` bytes: out of memory. */
static pp_status unpack_oom(size_t failed, size_t len, pp_err *err) {
    return PP_FAIL(err, PP_ENOMEM, "out of memory parsing the model (%zu bytes of protobuf): cannot allocate %zu "
                   "bytes", len, failed);
}

/* Unpack buf into k->m; cut raw_data points into buf (`in_place`) or is
 * copied into g's arena. NULL model: protobuf parsing failed. */
static pp_status unpack_model(pp_graph *g, const uint8_t *buf, size_t len, bool in_place,
                              model_keep *k, pp_err *err) {
    size_t gks = 0, gs = 0, ge = 0;
    cut *cuts = NULL;
    size_t n = 0;
    size_t failed = 0;
    ProtobufCAllocator al = {.alloc = watched_alloc, .free = watched_free, .allocator_data = &failed};
    PP_TRY(check_nesting(buf, len, err));
    if (!find_cuts(buf, len, &gks, &gs, &ge, &cuts, &n)) {
        k->m = onnx__model_proto__unpack(&al, len, buf);
        return !k->m && failed ? unpack_oom(failed, len, err) : PP_OK;
    }
    size_t slen;
    uint8_t *small = cut_message(buf, len, gks, gs, ge, cuts, n, &slen);
    if (!small) {
        free(cuts);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    k->m = onnx__model_proto__unpack(&al, slen, small);
    free(small);
    if (!k->m) {
        free(cuts);
        return failed ? unpack_oom(failed, slen, err) : PP_OK;
    }
    Onnx__GraphProto *gp = k->m->graph;
    for (size_t i = 0; i < n; i++)
        if (!gp || cuts[i].init >= gp->n_initializer) { /* cannot happen: the walk counted them */
            free(cuts);
            return PP_FAIL(err, PP_EINVAL, "not an ONNX model: inconsistent initializers");
        }
    k->cuts = cuts; /* k->n_cuts counts those set, which free_model resets */
    for (size_t i = 0; i < n; i++) {
        Onnx__TensorProto *t = gp->initializer[cuts[i].init];
        const uint8_t *p = cuts[i].p;
        if (!in_place) {
            uint8_t *copy = pp_arena_alloc(&g->arena, cuts[i].len);
            if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            memcpy(copy, p, cuts[i].len);
            p = copy;
        }
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)p;
        t->raw_data.len = cuts[i].len;
        k->n_cuts = i + 1;
    }
    return PP_OK;
}

/* ---- tensors -------------------------------------------------------------------- */

/* Every fixed-size type but complex: including the 8-bit floats and the
 * packed sub-byte types, which the ops other than Cast, CastLike and Identity
 * (and, for whole-byte types, the data movement ops) reject by type. */
static bool known_dtype(int32_t t) {
    return t >= 1 && t <= PP_I2 && pp_dtype_bits((pp_dtype)t) > 0 && t != PP_C64 && t != PP_C128;
}

/* Decode an ONNX TensorProto: type, shape and little-endian bytes (pointing
 * into the message for raw_data, converted into the graph arena for typed
 * fields). `what` and `name` describe it for messages. Also used by
 * onnx_data.c for the tensor files of --const. */
pp_status pp_onnx_decode_tensor(pp_graph *g, const Onnx__TensorProto *t, const char *name,
                                const char *what, pp_dtype *out_dt, pp_shape *out_sh,
                                const void **out_data, size_t *out_nbytes, pp_err *err) {
    if (!t->has_data_type || !known_dtype(t->data_type))
        return PP_FAIL(err, PP_EUNSUP, "%s '%s': element type %d is not supported", what, name,
                       t->has_data_type ? t->data_type : 0);
    if (t->n_dims > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "%s '%s': rank %zu exceeds %d", what, name, t->n_dims,
                       PP_MAX_DIMS);
    if (t->segment)
        return PP_FAIL(err, PP_EUNSUP, "%s '%s': segmented tensors are not supported", what, name);
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    pp_shape sh = {.rank = (int)t->n_dims};
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': dimension %zu is negative (%lld)", what, name,
                           i, (long long)t->dims[i]);
        sh.dim[i] = t->dims[i];
    }
    pp_dtype dt = (pp_dtype)t->data_type;
    size_t nbytes;
    pp_err e = {0};
    if (pp_shape_nbytes(&sh, dt, &nbytes, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': %s", what, name, e.msg);
    int64_t numel;
    PP_TRY(pp_shape_numel(&sh, &numel, err));
    const void *data = NULL;
    if (external) {
        size_t es = pp_dtype_size(dt);
        PP_TRY(pp_onnx_external_data(g, t, name, what, nbytes, es ? es : 1, &data, err));
    } else if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return PP_FAIL(err, PP_EINVAL,
                           "%s '%s': raw_data holds %zu bytes, expected %zu (dims x %u-bit %s)",
                           what, name, t->raw_data.len, nbytes, pp_dtype_bits(dt),
                           pp_dtype_name(dt));
        data = t->raw_data.data;
    } else {
        /* typed fields: count must match, values are converted. The packed
         * types keep their bytes in int32_data, one byte (2 or 4 elements) per
         * value; every other type one element per value. */
        const bool packed = pp_dtype_packed(dt);
        const size_t want = packed ? nbytes : (size_t)numel;
        size_t have = 0;
        const char *field = "?";
        switch (dt) {
        case PP_F32: have = t->n_float_data; field = "float_data"; break;
        case PP_F64: have = t->n_double_data; field = "double_data"; break;
        case PP_I64: have = t->n_int64_data; field = "int64_data"; break;
        case PP_U32: case PP_U64: have = t->n_uint64_data; field = "uint64_data"; break;
        default: have = t->n_int32_data; field = "int32_data"; break;
        }
        if (have != want)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': %s holds %zu values, expected %zu%s", what,
                           name, field, have, want, packed ? " (packed bytes)" : "");
        void *buf = pp_arena_alloc(&g->arena, nbytes);
        if (!buf) return PP_FAIL(err, PP_ENOMEM, "%s '%s': out of memory", what, name);
        for (size_t i = 0; i < want; i++) {
            switch (dt) {
            case PP_F32: ((float *)buf)[i] = t->float_data[i]; break;
            case PP_F64: ((double *)buf)[i] = t->double_data[i]; break;
            case PP_I64: ((int64_t *)buf)[i] = t->int64_data[i]; break;
            case PP_U64: ((uint64_t *)buf)[i] = t->uint64_data[i]; break;
            case PP_U32: ((uint32_t *)buf)[i] = (uint32_t)t->uint64_data[i]; break;
            case PP_I32: ((int32_t *)buf)[i] = t->int32_data[i]; break;
            case PP_I16: ((int16_t *)buf)[i] = (int16_t)t->int32_data[i]; break;
            case PP_U16: case PP_F16: case PP_BF16:
                ((uint16_t *)buf)[i] = (uint16_t)t->int32_data[i]; break;
            case PP_I8: ((int8_t *)buf)[i] = (int8_t)t->int32_data[i]; break;
            case PP_U8: ((uint8_t *)buf)[i] = (uint8_t)t->int32_data[i]; break;
            case PP_BOOL: ((uint8_t *)buf)[i] = t->int32_data[i] != 0; break;
            case PP_F8E4M3FN: case PP_F8E4M3FNUZ: case PP_F8E5M2: case PP_F8E5M2FNUZ:
            case PP_F8E8M0: case PP_U4: case PP_I4: case PP_F4E2M1: case PP_U2: case PP_I2:
                /* the bits of one element (8-bit types) or one packed byte */
                if (t->int32_data[i] < 0 || t->int32_data[i] > 255)
                    return PP_FAIL(err, PP_EINVAL, "%s '%s': int32_data[%zu] = %d is out of "
                                   "range 0..255 for %s", what, name, i, (int)t->int32_data[i],
                                   pp_dtype_name(dt));
                ((uint8_t *)buf)[i] = (uint8_t)t->int32_data[i];
                break;
            default: return PP_FAIL(err, PP_EUNSUP, "%s '%s': element type %s", what, name, pp_dtype_name(dt));
            }
        }
        data = buf;
    }
    *out_dt = dt;
    *out_sh = sh;
    *out_data = data;
    *out_nbytes = nbytes;
    return PP_OK;
}

/* An initializer or Constant value becomes a constant value named `name`. */
static pp_status import_tensor(pp_graph *g, const Onnx__TensorProto *t, const char *name,
                               const char *what, int *out_idx, pp_err *err) {
    pp_dtype dt;
    pp_shape sh;
    const void *data;
    size_t nbytes;
    PP_TRY(pp_onnx_decode_tensor(g, t, name, what, &dt, &sh, &data, &nbytes, err));
    /* raw_data read in place from the model file may be misaligned for its
     * type: small tensors (what shape inference reads) are copied, large
     * ones stay in place, marked, until something reads them typed */
    size_t es = pp_dtype_size(dt);
    bool unaligned = es > 1 && (uintptr_t)data % es;
    if (unaligned && nbytes <= ALIGN_COPY_MAX) {
        void *copy = pp_arena_alloc(&g->arena, nbytes);
        if (!copy) return PP_FAIL(err, PP_ENOMEM, "%s '%s': out of memory", what, name);
        memcpy(copy, data, nbytes);
        data = copy;
        unaligned = false;
    }
    int v;
    PP_TRY(pp_graph_add_value(g, name, &v, err));
    pp_value *val = &g->values[v];
    val->dtype = dt;
    val->shape = sh;
    val->is_const = true;
    val->data = data;
    val->nbytes = nbytes;
    val->unaligned = unaligned;
    *out_idx = v;
    return PP_OK;
}

/* ---- graph inputs ------------------------------------------------------------------ */

/* A graph input's declared element type and shape. Symbolic dims take their
 * --dim value, dim 0 the batch. For an input bound by --const (`bound`), the
 * batch rules do not apply, unresolved symbolic dims stay -1 and a missing
 * shape gives rank -1: the file supplies them. */
static pp_status input_type(const Onnx__ValueInfoProto *vi, const pp_import_opts *o, bool bound,
                            pp_dtype *out_dt, pp_shape *out_sh, pp_err *err) {
    const char *name = vi->name ? vi->name : "";
    if (!*name) return PP_FAIL(err, PP_EINVAL, "a graph input has no name");
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return PP_FAIL(err, PP_EUNSUP, "graph input '%s' is not a tensor", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt->has_elem_type || !known_dtype(tt->elem_type))
        return PP_FAIL(err, PP_EUNSUP, "graph input '%s': element type %d is not supported", name,
                       tt->has_elem_type ? tt->elem_type : 0);
    *out_dt = (pp_dtype)tt->elem_type;
    if (!tt->shape && bound) {
        out_sh->rank = -1;
        return PP_OK;
    }
    if (!tt->shape)
        return PP_FAIL(err, PP_EINVAL, "graph input '%s' has no shape", name);
    if (tt->shape->n_dim > PP_MAX_DIMS)
        return PP_FAIL(err, PP_EUNSUP, "graph input '%s': rank %zu exceeds %d", name,
                       tt->shape->n_dim, PP_MAX_DIMS);
    bool batched = !o->no_batch && !bound;
    pp_shape sh = {.rank = (int)tt->shape->n_dim};
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return PP_FAIL(err, PP_EINVAL, "graph input '%s': dimension %zu is negative (%lld)",
                               name, i, (long long)d->dim_value);
            if (i == 0 && batched && o->batch > 0 && d->dim_value != o->batch)
                return PP_FAIL(err, PP_EINVAL,
                               "graph input '%s' has a fixed batch dimension %lld; -b %lld cannot "
                               "change it (export the model with a dynamic batch axis)",
                               name, (long long)d->dim_value, (long long)o->batch);
            sh.dim[i] = d->dim_value;
            continue;
        }
        const char *param = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                ? d->dim_param : "";
        int64_t val = -1;
        for (int k = 0; k < o->n_dims; k++)
            if (*param && strcmp(o->dim_name[k], param) == 0) val = o->dim_value[k];
        if (val < 0 && i == 0 && batched) val = o->batch > 0 ? o->batch : 1;
        if (val < 0 && !bound)
            return PP_FAIL(err, PP_EINVAL,
                           "graph input '%s': dimension %zu is symbolic ('%s'); give its value "
                           "with --dim %s=VALUE",
                           name, i, param, *param ? param : "NAME");
        sh.dim[i] = val;
    }
    *out_sh = sh;
    return PP_OK;
}

static pp_status import_input(pp_graph *g, const Onnx__ValueInfoProto *vi, const pp_import_opts *o,
                              pp_err *err) {
    pp_dtype dt;
    pp_shape sh;
    PP_TRY(input_type(vi, o, false, &dt, &sh, err));
    const Onnx__TensorShapeProto *ts = vi->type->tensor_type->shape;
    if (ts->n_dim > 0 && ts->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        g->batch_fixed = true; /* -b cannot change it (input_type checked) */
    const char *name = vi->name;
    int v;
    PP_TRY(pp_graph_add_value(g, name, &v, err));
    g->values[v].dtype = dt;
    g->values[v].shape = sh;
    size_t nb;
    pp_err e = {0};
    if (pp_shape_nbytes(&sh, dt, &nb, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "graph input '%s': %s", name, e.msg);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && psize > 0 && nb / (size_t)psize > (size_t)pages)
        return PP_FAIL(err, PP_EINVAL, "graph input '%s' would need %.1f GB, more than this "
                       "machine's memory", name, (double)nb / 1e9);
    g->values[v].nbytes = nb;
    return pp_graph_add_input(g, v, err);
}

/* Every --dim NAME names a symbolic dim of some graph input; else PP_EINVAL
 * naming the symbolic dims the inputs do have. */
static pp_status check_dim_names(const Onnx__GraphProto *gp, const pp_import_opts *o, pp_err *err) {
    for (int k = 0; k < o->n_dims; k++) {
        bool found = false;
        char have[256] = "";
        size_t n = 0;
        for (size_t i = 0; i < gp->n_input && !found; i++) {
            const Onnx__TypeProto *tp = gp->input[i]->type;
            const Onnx__TensorShapeProto *ts =
                tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape
                                                                                                : NULL;
            for (size_t d = 0; ts && d < ts->n_dim && !found; d++) {
                if (ts->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) continue;
                const char *p = ts->dim[d]->dim_param;
                if (!p || !*p) continue;
                found = !strcmp(p, o->dim_name[k]);
                char item[80];
                snprintf(item, sizeof item, "'%.64s'", p);
                if (!strstr(have, item) && n < sizeof have)
                    n += (size_t)snprintf(have + n, sizeof have - n, "%s%s", n ? ", " : "", item);
            }
        }
        if (!found)
            return PP_FAIL(err, PP_EINVAL, "--dim %s: no input of the model has a symbolic dim '%s' (%s%s)",
                           o->dim_name[k], o->dim_name[k], n ? "the symbolic dims it has: " : "its inputs have no symbolic dims",
                           have);
    }
    return PP_OK;
}

/* --const NAME=FILE: index of NAME's binding, or -1. */
static int const_binding(const pp_import_opts *o, const char *name) {
    for (int k = 0; k < o->n_consts; k++)
        if (!strcmp(o->const_name[k], name)) return k;
    return -1;
}

/* Graph input `vi`, bound by --const to the tensor in `path`, becomes a
 * constant: the file's type must be the declared one, and so must every dim
 * the model (or --dim) fixes; symbolic dims take the file's values. */
static pp_status import_const_input(pp_graph *g, const Onnx__ValueInfoProto *vi, const char *path,
                                    const pp_import_opts *o, pp_err *err) {
    const char *name = vi->name ? vi->name : "";
    pp_dtype want_dt;
    pp_shape want;
    pp_err e = {0};
    if (input_type(vi, o, true, &want_dt, &want, &e) != PP_OK)
        return PP_FAIL(err, e.code, "--const %s=%s: %s", name, path, e.msg);
    pp_tensor_data t;
    if (pp_onnx_read_tensor_file(g, path, &t, &e) != PP_OK)
        return PP_FAIL(err, e.code, "--const %s: %s", name, e.msg);
    bool ok = t.dtype == want_dt && (want.rank < 0 || want.rank == t.shape.rank);
    for (int i = 0; ok && i < want.rank; i++)
        ok = want.dim[i] < 0 || want.dim[i] == t.shape.dim[i];
    if (!ok) {
        char ws[128] = "[any shape]", ts[128];
        if (want.rank >= 0) pp_shape_str(&want, ws, sizeof ws);
        return PP_FAIL(err, PP_EINVAL, "--const %s=%s: graph input '%s' is declared %s %s, the file "
                       "holds %s %s", name, path, name, pp_dtype_name(want_dt), ws,
                       pp_dtype_name(t.dtype), pp_shape_str(&t.shape, ts, sizeof ts));
    }
    int v;
    PP_TRY(pp_graph_add_value(g, name, &v, err));
    pp_value *val = &g->values[v];
    val->dtype = t.dtype;
    val->shape = t.shape;
    val->is_const = true;
    val->data = t.data;
    val->nbytes = t.nbytes;
    return PP_OK;
}

/* Every --const must name a distinct graph input of the model. */
static pp_status check_const_names(const Onnx__GraphProto *gp, const pp_import_opts *o,
                                   pp_err *err) {
    for (int k = 0; k < o->n_consts; k++) {
        const char *want = o->const_name[k];
        if (const_binding(o, want) != k)
            return PP_FAIL(err, PP_EINVAL, "--const %s is given twice", want);
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++)
            found = gp->input[i]->name && !strcmp(gp->input[i]->name, want);
        if (found) continue;
        for (size_t i = 0; i < gp->n_initializer; i++)
            if (gp->initializer[i]->name && !strcmp(gp->initializer[i]->name, want))
                return PP_FAIL(err, PP_EINVAL, "--const %s: '%s' is an initializer of the model, "
                               "not a graph input", want, want);
        char list[256] = "";
        size_t n = 0;
        for (size_t i = 0; i < gp->n_input && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", i ? ", " : "",
                                  gp->input[i]->name ? gp->input[i]->name : "");
        if (n >= sizeof list) strcpy(list + sizeof list - 5, "...");
        return PP_FAIL(err, PP_EINVAL, "--const %s: the model has no graph input '%s' (its inputs: %s)",
                       want, want, gp->n_input ? list : "none");
    }
    return PP_OK;
}

/* ---- attributes --------------------------------------------------------------------- */

static pp_status import_attr(pp_graph *g, const Onnx__AttributeProto *ap, pp_attr *a,
                             const char *node_desc, pp_err *err) {
    const char *an = ap->name ? ap->name : "";
    a->name = pp_arena_strdup(&g->arena, an);
    if (!a->name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    int type = ap->has_type ? (int)ap->type : 0;
    if (!type) { /* very old exporters leave the type out */
        if (ap->has_i) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        else if (ap->has_f) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        else if (ap->has_s) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        else if (ap->n_ints) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        else if (ap->n_floats) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        else if (ap->n_strings) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        else if (ap->g) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        else if (ap->t) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    }
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->type = PP_ATTR_INT;
        a->i = ap->i;
        return PP_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->type = PP_ATTR_FLOAT;
        a->f = ap->f;
        return PP_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        a->type = PP_ATTR_STRING;
        char *s = pp_arena_alloc(&g->arena, ap->s.len + 1);
        if (!s) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (ap->s.len) memcpy(s, ap->s.data, ap->s.len);
        if (strlen(s) != ap->s.len)
            return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' holds a string with a NUL byte",
                           node_desc, an);
        a->s = s;
        return PP_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (ap->n_ints > (1u << 20))
            return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' is absurdly long", node_desc, an);
        a->type = PP_ATTR_INTS;
        a->ints = ap->ints;
        a->n = (int)ap->n_ints;
        return PP_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (ap->n_floats > (1u << 20))
            return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' is absurdly long", node_desc, an);
        a->type = PP_ATTR_FLOATS;
        a->floats = ap->floats;
        a->n = (int)ap->n_floats;
        return PP_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        if (ap->n_strings > (1u << 16))
            return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' is absurdly long", node_desc, an);
        char **strs = pp_arena_alloc(&g->arena, sizeof(char *) * (ap->n_strings ? ap->n_strings : 1));
        if (!strs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (size_t k = 0; k < ap->n_strings; k++) {
            const ProtobufCBinaryData *b = &ap->strings[k];
            strs[k] = pp_arena_alloc(&g->arena, b->len + 1);
            if (!strs[k]) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            if (b->len) memcpy(strs[k], b->data, b->len);
            strs[k][b->len] = '\0';
            if (strlen(strs[k]) != b->len)
                return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' holds a string with a NUL byte "
                               "(string %zu)", node_desc, an, k);
        }
        a->type = PP_ATTR_STRINGS;
        a->strs = (const char *const *)strs;
        a->n = (int)ap->n_strings;
        return PP_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t)
            return PP_FAIL(err, PP_EINVAL, "%s: tensor attribute '%s' holds no tensor", node_desc, an);
        char what[448];
        snprintf(what, sizeof what, "%s: attribute", node_desc);
        a->type = PP_ATTR_TENSOR;
        return pp_onnx_decode_tensor(g, ap->t, an, what, &a->t_dtype, &a->t_shape,
                                     &a->t_data, &a->t_nbytes, err);
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return PP_FAIL(err, PP_EUNSUP,
                       "%s: attribute '%s' holds a subgraph; control flow is not supported",
                       node_desc, an);
    default:
        return PP_FAIL(err, PP_EUNSUP, "%s: attribute '%s' has unsupported type %d", node_desc,
                       an, type);
    }
}

/* Constant node: its value attribute becomes a constant value, named by its
 * output, or (`sub`: inside a subgraph, whose names may repeat a scope's)
 * named after it but made unique, marked from_node (never a weight that
 * trains). *v: its index. */
static pp_status import_constant_value(pp_graph *g, const Onnx__NodeProto *np, const char *desc,
                                       bool sub, int *v, pp_err *err);

static pp_status import_constant(pp_graph *g, const Onnx__NodeProto *np, const char *desc,
                                 bool sub, int *v, pp_err *err) {
    PP_TRY(import_constant_value(g, np, desc, sub, v, err));
    g->values[*v].from_node = true;
    return PP_OK;
}

static pp_status import_constant_value(pp_graph *g, const Onnx__NodeProto *np, const char *desc,
                                       bool sub, int *v, pp_err *err) {
    if (np->n_output != 1 || !np->output[0] || !*np->output[0])
        return PP_FAIL(err, PP_EINVAL, "%s: a Constant must have exactly one output", desc);
    if (np->n_attribute != 1)
        return PP_FAIL(err, PP_EINVAL, "%s: a Constant must have exactly one attribute", desc);
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = ap->name ? ap->name : "";
    const char *out = np->output[0];
    if (!strcmp(an, "value") && ap->t && !sub) return import_tensor(g, ap->t, out, "Constant", v, err);
    pp_dtype dt;
    pp_shape sh;
    const void *src;
    size_t nb;
    float fscalar;
    int64_t iscalar;
    if (!strcmp(an, "value") && ap->t) {
        PP_TRY(pp_onnx_decode_tensor(g, ap->t, out, "Constant", &dt, &sh, &src, &nb, err));
    } else { /* scalar and list forms */
        size_t count;
        bool scalar = false;
        if (!strcmp(an, "value_float")) dt = PP_F32, count = 1, fscalar = ap->f, src = &fscalar, scalar = true;
        else if (!strcmp(an, "value_int")) dt = PP_I64, count = 1, iscalar = ap->i, src = &iscalar, scalar = true;
        else if (!strcmp(an, "value_floats")) dt = PP_F32, count = ap->n_floats, src = ap->floats;
        else if (!strcmp(an, "value_ints")) dt = PP_I64, count = ap->n_ints, src = ap->ints;
        else
            return PP_FAIL(err, PP_EUNSUP, "%s: Constant attribute '%s' is not supported", desc, an);
        nb = count * pp_dtype_size(dt);
        sh = scalar ? (pp_shape){0, {0}} : (pp_shape){1, {(int64_t)count}};
    }
    if (sub) return pp_graph_add_const(g, out, dt, &sh, src, v, err);
    void *buf = pp_arena_alloc(&g->arena, nb);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (nb) memcpy(buf, src, nb);
    PP_TRY(pp_graph_add_value(g, out, v, err));
    pp_value *val = &g->values[*v];
    val->dtype = dt;
    val->shape = sh;
    val->is_const = true;
    val->data = buf;
    val->nbytes = nb;
    return PP_OK;
}

/* ---- subgraphs ------------------------------------------------------------------------ *
 * The body of a Loop and the branches of an If are read into pp_subgraph
 * templates (ir.h) that the infer pass instantiates (passes/unroll.c). Their
 * constants become constants of the graph; every name a subgraph reads that
 * it does not define is a free variable, which its node takes as an extra
 * input (resolved in the enclosing scope, where the node is). */

/* A growable list of names (free variables). */
typedef struct name_list {
    const char **v;
    int n, cap;
} name_list;

static int name_add(name_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], name)) return i;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        const char **nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n] = name;
    return l->n++;
}

/* What a subgraph being read knows: its locals, its constants (name ->
 * value), and the free variables it has met. */
typedef struct sub_scope {
    pp_subgraph *sg;
    int cap_locals;
    name_list const_names;
    int *const_vals;
    name_list *free;     /* the owning node's, shared by all its subgraphs */
} sub_scope;

static pp_status sub_resolve(pp_graph *g, sub_scope *sc, const char *name, pp_subref *r,
                             pp_err *err) {
    if (!name || !*name) {
        *r = (pp_subref){PP_SUB_NONE, -1};
        return PP_OK;
    }
    for (int i = sc->sg->n_locals - 1; i >= 0; i--)
        if (!strcmp(sc->sg->local_names[i], name)) {
            *r = (pp_subref){PP_SUB_LOCAL, i};
            return PP_OK;
        }
    for (int i = 0; i < sc->const_names.n; i++)
        if (!strcmp(sc->const_names.v[i], name)) {
            *r = (pp_subref){PP_SUB_CONST, sc->const_vals[i]};
            return PP_OK;
        }
    const char *kept = pp_arena_strdup(&g->arena, name);
    int k = kept ? name_add(sc->free, kept) : -1;
    if (k < 0) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *r = (pp_subref){PP_SUB_FREE, k};
    return PP_OK;
}

static pp_status sub_local(pp_graph *g, sub_scope *sc, const char *name, int *slot, pp_err *err) {
    pp_subgraph *sg = sc->sg;
    if (sg->n_locals == sc->cap_locals) return PP_FAIL(err, PP_EINVAL, "subgraph '%s': too many values", sg->name);
    const char *kept = pp_arena_strdup(&g->arena, name);
    if (!kept) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    sg->local_names[sg->n_locals] = kept;
    *slot = sg->n_locals++;
    return PP_OK;
}

static pp_status import_subgraph(pp_graph *g, const Onnx__GraphProto *gp, const char *desc,
                                 const char *attr, name_list *fvars, pp_subgraph **out,
                                 pp_err *err);

/* The op of a node, checked against the op table and its domain; its
 * attributes, subgraphs read into pp_subgraph (their free variables gathered
 * in *free). *n_out: its outputs less the trailing omitted ones. */
static pp_status node_head(pp_graph *g, const Onnx__NodeProto *np, const char *desc, pp_op *op,
                           size_t *n_out, pp_attr **attrs, name_list *fvars, pp_err *err) {
    const char *op_type = np->op_type ? np->op_type : "";
    const char *domain = np->domain ? np->domain : "";
    if (*domain && strcmp(domain, "ai.onnx") != 0)
        return PP_FAIL(err, PP_EUNSUP, "%s: domain '%s' is not supported (only ai.onnx)", desc,
                       domain);
    /* "pp." ops exist only inside ppcc (the fusion pass makes them) */
    if (!strncmp(op_type, "pp.", 3) || !pp_op_lookup(op_type, op)) {
        if (!strcmp(op_type, "Scan"))
            return PP_FAIL(err, PP_EUNSUP, "%s: control flow (%s) is not supported", desc, op_type);
        return PP_FAIL(err, PP_EUNSUP, "%s: op '%s' is not supported", desc, op_type);
    }
    /* trailing empty outputs are omitted optional outputs */
    size_t no = np->n_output;
    while (no > 0 && (!np->output[no - 1] || !*np->output[no - 1])) no--;
    const pp_op_info *info = &pp_op_table[*op];
    if (np->n_input > (size_t)info->max_inputs || np->n_input < (size_t)info->min_inputs)
        return PP_FAIL(err, PP_EINVAL, "%s: %zu inputs, expected %d to %d", desc, np->n_input,
                       info->min_inputs, info->max_inputs);
    if (no < 1 || no > (size_t)info->max_outputs)
        return PP_FAIL(err, no < 1 ? PP_EINVAL : PP_EUNSUP, "%s: %zu outputs, %d supported",
                       desc, no, info->max_outputs);
    *n_out = no;
    *attrs = NULL;
    if (np->n_attribute > 4096)
        return PP_FAIL(err, PP_EINVAL, "%s: absurd attribute count %zu", desc, np->n_attribute);
    if (!np->n_attribute) return PP_OK;
    pp_attr *as = pp_arena_alloc(&g->arena, np->n_attribute * sizeof *as);
    if (!as) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_subgraph *subs[8];
    int n_subs = 0;
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *ap = np->attribute[k];
        const bool is_graph = ap->has_type ? ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH
                                           : ap->g != NULL;
        if (is_graph && ap->g && pp_op_is_control(*op)) {
            if (n_subs == 8) return PP_FAIL(err, PP_EINVAL, "%s: too many subgraphs", desc);
            as[k].name = pp_arena_strdup(&g->arena, ap->name ? ap->name : "");
            if (!as[k].name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            as[k].type = PP_ATTR_GRAPH;
            PP_TRY(import_subgraph(g, ap->g, desc, as[k].name, fvars, &subs[n_subs], err));
            as[k].graph = subs[n_subs++];
        } else {
            PP_TRY(import_attr(g, ap, &as[k], desc, err));
        }
        for (size_t j = 0; j < k; j++)
            if (!strcmp(as[j].name, as[k].name))
                return PP_FAIL(err, PP_EINVAL, "%s: attribute '%s' appears twice", desc,
                               as[k].name);
    }
    /* every subgraph of the node sees the node's whole list of free variables */
    const char **fv = pp_arena_alloc(&g->arena, pp_count(fvars->n) * sizeof *fv);
    if (!fv) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < fvars->n; i++) fv[i] = fvars->v[i];
    for (int i = 0; i < n_subs; i++) subs[i]->n_free = fvars->n, subs[i]->free_names = fv;
    *attrs = as;
    return PP_OK;
}

/* A name for an omitted optional output that precedes a used one. */
static const char *unused_output(pp_graph *g, const char *node, size_t k, char *buf, size_t n) {
    snprintf(buf, n, "%s/unused_output_%zu", node, k);
    for (int j = 1; pp_graph_find(g, buf) >= 0; j++)
        snprintf(buf, n, "%s/unused_output_%zu__%d", node, k, j);
    return buf;
}

/* A node's name, or "OPTYPE_INDEX" (into gen) for one without. */
static const char *node_name(const Onnx__NodeProto *np, long long index, char *gen, size_t gen_len) {
    if (np->name && *np->name) return np->name;
    snprintf(gen, gen_len, "%s_%lld", np->op_type && *np->op_type ? np->op_type : "node", index);
    return gen;
}

static pp_status import_subgraph(pp_graph *g, const Onnx__GraphProto *gp, const char *desc,
                                 const char *attr, name_list *fvars, pp_subgraph **out,
                                 pp_err *err) {
    char sdesc[512];
    snprintf(sdesc, sizeof sdesc, "%s, subgraph '%s'", desc, attr);
    if (gp->n_sparse_initializer)
        return PP_FAIL(err, PP_EUNSUP, "%s: sparse initializers are not supported", sdesc);
    pp_subgraph *sg = pp_arena_alloc(&g->arena, sizeof *sg);
    if (!sg) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    sg->name = pp_arena_strdup(&g->arena, attr);
    size_t cap = gp->n_input;
    for (size_t i = 0; i < gp->n_node; i++) cap += gp->node[i]->n_output;
    if (cap > (1u << 24)) return PP_FAIL(err, PP_EINVAL, "%s: absurdly large", sdesc);
    sub_scope sc = {.sg = sg, .cap_locals = (int)cap, .free = fvars};
    sg->local_names = pp_arena_alloc(&g->arena, pp_count((int)cap) * sizeof *sg->local_names);
    sg->nodes = pp_arena_alloc(&g->arena, pp_count((int)gp->n_node) * sizeof *sg->nodes);
    sg->out = pp_arena_alloc(&g->arena, pp_count((int)gp->n_output) * sizeof *sg->out);
    size_t n_consts = gp->n_initializer + gp->n_node;
    sc.const_vals = malloc(pp_count((int)n_consts) * sizeof *sc.const_vals);
    pp_status s = PP_OK;
    if (!sg->name || !sg->local_names || !sg->nodes || !sg->out || !sc.const_vals) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < gp->n_input && s == PP_OK; i++) {
        int slot;
        s = sub_local(g, &sc, gp->input[i]->name ? gp->input[i]->name : "", &slot, err);
    }
    sg->n_in = (int)gp->n_input;
    for (size_t i = 0; i < gp->n_initializer && s == PP_OK; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *name = t->name ? t->name : "";
        pp_dtype dt;
        pp_shape sh;
        const void *data;
        size_t nb;
        int v;
        if ((s = pp_onnx_decode_tensor(g, t, name, "initializer", &dt, &sh, &data, &nb, err)) ||
            (s = pp_graph_add_const(g, name, dt, &sh, data, &v, err)))
            break;
        sc.const_vals[sc.const_names.n] = v;
        if (name_add(&sc.const_names, name) < 0) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < gp->n_node && s == PP_OK; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        char gen[64], nd[768];
        const char *op_type = np->op_type ? np->op_type : "";
        const char *name = node_name(np, (long long)i, gen, sizeof gen);
        snprintf(nd, sizeof nd, "node '%s' (#%zu of %s, %s)", name, i, sdesc, op_type);
        if (!strcmp(op_type, "Constant") && !(np->domain && *np->domain)) {
            int v;
            if ((s = import_constant(g, np, nd, true, &v, err))) break;
            sc.const_vals[sc.const_names.n] = v;
            if (name_add(&sc.const_names, np->output[0]) < 0)
                s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            continue;
        }
        pp_subnode *sn = &sg->nodes[sg->n_nodes];
        size_t n_out;
        name_list inner = {0};
        if ((s = node_head(g, np, nd, &sn->op, &n_out, &sn->attrs, &inner, err)) != PP_OK) {
            free(inner.v);
            break;
        }
        sn->n_attrs = (int)np->n_attribute;
        sn->name = pp_arena_strdup(&g->arena, name);
        sn->n_in = (int)np->n_input + inner.n;
        sn->n_out = (int)n_out;
        sn->in = pp_arena_alloc(&g->arena, pp_count(sn->n_in) * sizeof *sn->in);
        sn->out = pp_arena_alloc(&g->arena, pp_count(sn->n_out) * sizeof *sn->out);
        if (s == PP_OK && (!sn->name || !sn->in || !sn->out)) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (size_t k = 0; k < np->n_input && s == PP_OK; k++)
            s = sub_resolve(g, &sc, np->input[k], &sn->in[k], err);
        /* a nested subgraph's free variables: read from this scope */
        for (int k = 0; k < inner.n && s == PP_OK; k++)
            s = sub_resolve(g, &sc, inner.v[k], &sn->in[np->n_input + (size_t)k], err);
        free(inner.v);
        for (size_t k = 0; k < n_out && s == PP_OK; k++) {
            char buf[512];
            const char *o = np->output[k] && *np->output[k] ? np->output[k]
                                                            : unused_output(g, name, k, buf, sizeof buf);
            s = sub_local(g, &sc, o, &sn->out[k], err);
        }
        if (s == PP_OK) sg->n_nodes++;
    }
    for (size_t i = 0; i < gp->n_output && s == PP_OK; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        if (!*name) s = PP_FAIL(err, PP_EINVAL, "%s: output %zu has no name", sdesc, i);
        else s = sub_resolve(g, &sc, name, &sg->out[i], err);
    }
    sg->n_out = (int)gp->n_output;
done:
    free(sc.const_vals);
    free(sc.const_names.v);
    *out = sg;
    return s;
}

/* ---- nodes --------------------------------------------------------------------------- */

static pp_status import_node(pp_graph *g, const Onnx__NodeProto *np, int index, pp_err *err) {
    char gen[64], desc[384];
    const char *op_type = np->op_type ? np->op_type : "";
    const char *name = node_name(np, index, gen, sizeof gen);
    snprintf(desc, sizeof desc, "node '%s' (#%d, %s)", name, index, op_type);
    const char *domain = np->domain ? np->domain : "";
    if (!strcmp(op_type, "Constant") && !*domain) {
        int v;
        return import_constant(g, np, desc, false, &v, err);
    }
    pp_op op;
    size_t n_out;
    pp_attr *attrs;
    name_list free_vars = {0};
    pp_status s = node_head(g, np, desc, &op, &n_out, &attrs, &free_vars, err);
    int ni = -1;
    if (s == PP_OK)
        s = pp_graph_add_node(g, op, name, (int)np->n_input + free_vars.n, (int)n_out, &ni, err);
    if (s == PP_OK) g->nodes[ni].src = index;
    for (size_t k = 0; k < np->n_input + (size_t)free_vars.n && s == PP_OK; k++) {
        const bool fv = k >= np->n_input;
        const char *in = fv ? free_vars.v[k - np->n_input] : np->input[k] ? np->input[k] : "";
        if (!*in) continue; /* absent optional input */
        int v = pp_graph_find(g, in);
        if (v < 0 && fv)
            s = PP_FAIL(err, PP_EINVAL, "%s: a subgraph reads '%s', which neither it nor an "
                        "enclosing graph defines", desc, in);
        else if (v < 0)
            s = PP_FAIL(err, PP_EINVAL,
                        "%s: input '%s' is not a graph input, an initializer or the output of "
                        "an earlier node (dangling input, cycle, or nodes out of order)",
                        desc, in);
        else
            g->nodes[ni].in[k] = v;
    }
    free(free_vars.v);
    PP_TRY(s);
    for (size_t k = 0; k < n_out; k++) {
        char unnamed[512];
        const char *out = np->output[k] && *np->output[k]
                              ? np->output[k] : unused_output(g, name, k, unnamed, sizeof unnamed);
        int v;
        pp_err e = {0};
        if (pp_graph_add_value(g, out, &v, &e) != PP_OK)
            return PP_FAIL(err, e.code, "%s: %s", desc, e.msg);
        g->nodes[ni].out[k] = v;
        g->values[v].producer = ni;
    }
    g->nodes[ni].attrs = attrs;
    g->nodes[ni].n_attrs = attrs ? (int)np->n_attribute : 0;
    return PP_OK;
}

/* A graph output that is a constant (an initializer, a Constant node) is
 * computed by the plan like any other: its bytes move to a new constant and
 * an Identity node produces the output, which keeps its name. */
static pp_status output_from_constant(pp_graph *g, int v, pp_err *err) {
    const pp_op id = PP_OP_IDENTITY;
    char name[512];
    snprintf(name, sizeof name, "%s/const", g->values[v].name);
    pp_value keep = g->values[v];
    int c, n;
    PP_TRY(pp_graph_add_const(g, name, keep.dtype, &keep.shape, keep.data ? keep.data : "", &c, err));
    pp_value *out = &g->values[v];
    out->is_const = false;
    out->data = NULL;
    PP_TRY(pp_graph_add_node(g, id, name, 1, 1, &n, err));
    g->nodes[n].in[0] = c;
    g->nodes[n].out[0] = v;
    return PP_OK;
}

/* ---- model ----------------------------------------------------------------------------- */

/* pprt reads input NAME from NAME.npy and writes output NAME to NAME.npy,
 * with the bytes of NAME outside [A-Za-z0-9._-] as '_' (pp_file_name): two
 * inputs (frozen ones included: pprt refuses their files) or two outputs
 * whose names map to the same file are refused here, naming both. */
static pp_status check_file_names(const pp_graph *g, pp_err *err) {
    int n = g->n_inputs + g->n_frozen > g->n_outputs ? g->n_inputs + g->n_frozen : g->n_outputs;
    const char **names = malloc(sizeof *names * pp_count(n));
    if (!names) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_inputs; i++) names[i] = g->values[g->inputs[i]].name;
    for (int i = 0; i < g->n_frozen; i++) names[g->n_inputs + i] = g->frozen[i];
    pp_status s = pp_file_names_check(names, g->n_inputs + g->n_frozen, "graph inputs", "read from", err);
    for (int i = 0; i < g->n_outputs; i++) names[i] = g->values[g->outputs[i]].name;
    if (s == PP_OK) s = pp_file_names_check(names, g->n_outputs, "graph outputs", "written to", err);
    free(names);
    return s;
}

static pp_status import_model(Onnx__ModelProto *m, const pp_import_opts *o, pp_graph *g,
                              pp_err *err) {
    if (!m->has_ir_version || m->ir_version < 3)
        return PP_FAIL(err, PP_EINVAL, "not an ONNX model: ir_version is %s (expected >= 3)",
                       m->has_ir_version ? "too old" : "missing");
    int64_t opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
        if (!*d || !strcmp(d, "ai.onnx")) opset = m->opset_import[i]->version;
    }
    if (opset < 0) return PP_FAIL(err, PP_EINVAL, "the model imports no ai.onnx opset");
    if (opset < MIN_OPSET || opset > MAX_OPSET)
        return PP_FAIL(err, PP_EUNSUP, "ai.onnx opset %lld is not supported (supported: %d to %d)",
                       (long long)opset, MIN_OPSET, MAX_OPSET);
    g->opset = (int)opset;
    g->ir_version = m->ir_version;
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return PP_FAIL(err, PP_EINVAL, "the model has no graph");
    if (gp->n_node == 0) return PP_FAIL(err, PP_EINVAL, "the graph has no nodes");
    if (gp->n_output == 0) return PP_FAIL(err, PP_EINVAL, "the graph has no outputs");
    if (gp->n_sparse_initializer)
        return PP_FAIL(err, PP_EUNSUP, "sparse initializers are not supported");
    PP_TRY(check_const_names(gp, o, err));
    PP_TRY(check_dim_names(gp, o, err));
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t->name || !*t->name) return PP_FAIL(err, PP_EINVAL, "initializer #%zu has no name", i);
        if (const_binding(o, t->name) >= 0) continue; /* a default value that --const replaces */
        int v;
        PP_TRY(import_tensor(g, t, t->name, "initializer", &v, err));
        g->values[v].is_initializer = true;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name ? gp->input[i]->name : "";
        int k = const_binding(o, name);
        if (k >= 0) {
            PP_TRY(import_const_input(g, gp->input[i], o->const_path[k], o, err));
            continue;
        }
        if (pp_graph_find(g, name) >= 0 && g->values[pp_graph_find(g, name)].is_const) {
            /* an initializer listed as an input too: up to IR version 3 every
             * initializer had to be, from 4 on it is a default that data may
             * replace (onnxruntime does). ppcc freezes it (so it folds, fuses
             * and is reordered once like any weight) and the plan names it, so
             * pprt refuses data for it; ppcc --const NAME=FILE.pb compiles in
             * another value. */
            if (!g->frozen &&
                !(g->frozen = pp_arena_alloc(&g->arena, sizeof *g->frozen * gp->n_input)))
                return PP_FAIL(err, PP_ENOMEM, "out of memory");
            g->frozen[g->n_frozen++] = g->values[pp_graph_find(g, name)].name;
            g->frozen_default = m->ir_version >= 4;
            continue;
        }
        PP_TRY(import_input(g, gp->input[i], o, err));
    }
    /* a graph without runtime inputs (all constants, or all bound with
     * --const) can only run as one whole, unbatched evaluation */
    if (g->n_inputs == 0 && !o->no_batch)
        return PP_FAIL(err, PP_EINVAL, "the graph has no input fed at run time%s; compile it with "
                       "-b 0 to evaluate it once", o->n_consts ? " (all bound by --const)" : "");
    for (size_t i = 0; i < gp->n_node; i++) PP_TRY(import_node(g, gp->node[i], (int)i, err));
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        int v = pp_graph_find(g, name);
        if (v < 0) return PP_FAIL(err, PP_EINVAL, "graph output '%s' is produced by no node", name);
        for (int k = 0; k < g->n_outputs; k++)
            if (g->outputs[k] == v)
                return PP_FAIL(err, PP_EINVAL, "graph output '%s' is listed twice", name);
        if (g->values[v].is_const) PP_TRY(output_from_constant(g, v, err));
        PP_TRY(pp_graph_add_output(g, v, err));
    }
    return check_file_names(g, err);
}

/* The micro-batch: -b, else the first input's first dim. Every input must
 * carry it on dim 0 (outputs are checked after shape inference). */
static pp_status choose_batch(pp_graph *g, const pp_import_opts *o, pp_err *err) {
    if (o->no_batch) {
        g->batch = 0;
        return PP_OK;
    }
    if (g->n_inputs == 0) return PP_FAIL(err, PP_EINVAL, "the graph has no input fed at run time");
    const pp_value *first = &g->values[g->inputs[0]];
    int64_t b = o->batch > 0 ? o->batch : first->shape.rank > 0 ? first->shape.dim[0] : 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        if (v->shape.rank < 1 || v->shape.dim[0] != b || b < 1)
            return PP_FAIL(err, PP_EINVAL,
                           "graph input '%s' has no batch dimension %lld on dim 0; compile with "
                           "-b 0 to run whole tensors without micro-batching",
                           v->name, (long long)b);
    }
    g->batch = b;
    return PP_OK;
}

/* `map` (len bytes, or NULL): buf is this mapping of the model file, which
 * the graph then keeps and data points into; else buf's bytes are copied. */
static pp_status import_buf(const void *buf, size_t len, void *map, const pp_import_opts *o,
                            pp_graph *g, pp_err *err) {
    static const pp_import_opts defaults = {0};
    if (!o) o = &defaults;
    pp_graph_init(g);
    snprintf(g->model_hash, sizeof g->model_hash, "%016llx",
             (unsigned long long)XXH3_64bits(buf, len));
    if (len == 0) {
        if (map) munmap(map, len);
        return PP_FAIL(err, PP_EINVAL, "not an ONNX model: the file is empty");
    }
    model_keep *k = calloc(1, sizeof *k);
    if (!k) {
        if (map) munmap(map, len);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    k->map = map;
    k->map_len = len;
    g->keep = k;
    g->keep_free = free_model;
    pp_status us = unpack_model(g, buf, len, map != NULL, k, err);
    if (us != PP_OK || !k->m) {
        pp_graph_free(g);
        if (us != PP_OK) return us;
        return PP_FAIL(err, PP_EINVAL,
                       "not an ONNX model: protobuf parsing failed (truncated or corrupt file, "
                       "or not a ModelProto)");
    }
    if (!k->n_cuts && k->map) { /* nothing points into the file */
        munmap(k->map, k->map_len);
        k->map = NULL;
    }
    g->model_map = k->map;
    g->model_map_len = k->map ? k->map_len : 0;
    Onnx__ModelProto *m = k->m;
    g->model_dir = o->model_dir ? pp_arena_strdup(&g->arena, o->model_dir) : NULL;
    pp_status s = import_model(m, o, g, err);
    if (s == PP_OK) s = choose_batch(g, o, err);
    if (s != PP_OK) pp_graph_free(g);
    return s;
}

pp_status pp_import_onnx_mem(const void *buf, size_t len, const pp_import_opts *o, pp_graph *g,
                             pp_err *err) {
    return import_buf(buf, len, NULL, o, g, err);
}

pp_status pp_import_onnx(const char *path, const pp_import_opts *o, pp_graph *g, pp_err *err) {
    pp_graph_init(g);
    int fd;
    struct stat sb;
    PP_TRY(pp_open_read(path, NULL, 0, &fd, &sb, err));
    size_t len = (size_t)sb.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return PP_FAIL(err, e == ENOMEM ? PP_ENOMEM : PP_EIO, "cannot map '%s' (%zu bytes): %s", path, len,
                           strerror(e));
        }
    }
    close(fd);
    pp_err e = {0};
    /* external data is found relative to the model's directory */
    static const pp_import_opts defaults = {0};
    pp_import_opts with_dir = o ? *o : defaults;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    with_dir.model_dir = dir;
    /* the graph keeps the mapping: large initializers are read in place */
    pp_status s = import_buf(map ? map : "", len, map, &with_dir, g, &e);
    if (s != PP_OK) return PP_FAIL(err, s, "%s: %s", path, e.msg);
    return PP_OK;
}
