/* plan_verify.c: verify each stage of a plan and fill its pprt_stage: every
 * tensor's type, shape, size, kind and offset (inside the arena, the weights,
 * a --ref-weights source or the message), every node's op, ids, attributes
 * and shapes (re-inferred with the same shape functions as the compiler),
 * that every tensor is written once before it is read, that no two
 * activations whose lifetimes overlap share arena bytes; then that each
 * stage's incoming message matches the previous stage's outgoing one slot for
 * slot (docs/plan-format.md, "What the loader verifies", 3 to 6). Every
 * failure says what was expected and what was found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_read.h"

/* A stage's activation arena: 1 TiB, far above any machine pprt runs on,
 * far below what would overflow a size computation. */
#define MAX_ARENA ((size_t)1 << 40)

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

/* Stage si's table sizes, totals and placement, before its tensors. */
static pp_status stage_fields(const Ppplan__Stage *m, int si, const pprt_plan *p, pprt_stage *st, pp_err *err) {
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
    /* a training plan's stash: the tail of a forward stage's send list, of a
     * backward stage's recv list */
    const int P = p->train_devices;
    const size_t tail = si < P ? m->n_send : m->n_recv;
    if (m->n_stash < 0 || (!P && m->n_stash) || (size_t)m->n_stash > tail)
        return PP_FAIL(err, PP_EINVAL, "stage %d: stash of %d tensors: expected 0%s..%zu", si, (int)m->n_stash,
                       P ? "" : " (not a training plan)", P ? tail : (size_t)0);
    st->n_stash = (int)m->n_stash;
    const size_t chain = m->n_send - (si < P ? (size_t)m->n_stash : 0);
    if (m->n_local < 0 || (m->n_local && si < P) || (size_t)m->n_local > chain)
        return PP_FAIL(err, PP_EINVAL, "stage %d: %d device-local outputs: expected 0%s..%zu", si, (int)m->n_local,
                       si < P ? " (not a backward stage of a training plan)" : "", si < P ? (size_t)0 : chain);
    /* zb-h1: a backward stage's tail kept for its W stage; a W stage sends its gradients alone */
    const bool wst = si >= p->n_stages;
    if (m->n_wkeep < 0 || (m->n_wkeep && (!p->n_wstages || si < P || wst)) || (size_t)m->n_wkeep > chain - (size_t)m->n_local)
        return PP_FAIL(err, PP_EINVAL, "stage %d: %d tensors kept for a W stage: expected 0%s", si, (int)m->n_wkeep,
                       p->n_wstages && si >= P && !wst ? "..the send list less its device-local outputs" : "");
    if (wst && (m->n_stash || (size_t)m->n_local != m->n_send))
        return PP_FAIL(err, PP_EINVAL, "stage %d, a W stage: expected no stash and only device-local outputs, got %d "
                       "and %d of %zu", si, (int)m->n_stash, (int)m->n_local, m->n_send);
    st->n_local = (int)m->n_local;
    st->n_wkeep = (int)m->n_wkeep;
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
    /* zb-h1: device 0's B may have none (its input gradients go nowhere), a W none (a device without weights) */
    if (st->n_nodes == 0 && !(p->n_wstages && si >= P))
        return PP_FAIL(err, PP_EINVAL, "stage %d: expected at least one node, got 0", si);
    return PP_OK;
}

/* Where tensor t lies, by its kind: inside the arena, the weights section, a
 * --ref-weights source, or a message slot. */
static pp_status tensor_place(const Ppplan__Tensor *mt, int i, const pprt_plan *p, const pprt_stage *st,
                              pprt_tdesc *t, const char *w, pp_err *err) {
    const size_t weights_bytes = p->weights_bytes;
    pp_status s = PP_OK;
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
    return s;
}

/* Tensor i of stage si: a known type, its shape, its byte size, its place. */
static pp_status read_tensor(const Ppplan__Tensor *mt, int si, int i, const pprt_plan *p, pprt_stage *st,
                             pp_err *err) {
    char w[96];
    pprt_tdesc *t = &st->t[i];
    label(w, "tensor", si, i);
    t->name = mt->name;
    t->dtype = (pp_dtype)mt->dtype;
    t->kind = (int)mt->kind;
    t->offset = mt->offset;
    t->nbytes = mt->nbytes;
    t->source = -1;
    if (pp_dtype_bits(t->dtype) == 0)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': expected a known element type, got %d", w, t->name, mt->dtype);
    PP_TRY(pprt_plan_read_shape(mt->shape, mt->n_shape, &t->shape, w, err));
    size_t nb;
    pp_err e = {0};
    if (pp_shape_nbytes(&t->shape, t->dtype, &nb, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': %s", w, t->name, e.msg);
    if (nb != mt->nbytes)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': expected %zu bytes for its shape, got %llu", w,
                       t->name, nb, (unsigned long long)mt->nbytes);
    return tensor_place(mt, i, p, st, t, w, err);
}

/* The arena is what its slots need (ppcc's memory plan: the end of the
 * highest slot, sizes rounded up to 64), and no more than MAX_ARENA. */
static pp_status check_arena(const pprt_stage *st, int si, pp_err *err) {
    size_t need = 0;
    for (int i = 0; i < st->n_tensors; i++)
        if (st->t[i].kind == PPRT_ACTIVATION) {
            size_t end = st->t[i].offset + pp_align_up(st->t[i].nbytes, PP_PLAN_ALIGN);
            if (end > need) need = end;
        }
    if (st->arena_bytes != need)
        return PP_FAIL(err, PP_EINVAL, "stage %d: arena of %zu bytes, expected %zu (the end of its highest "
                       "activation slot)", si, st->arena_bytes, need);
    if (need > MAX_ARENA)
        return PP_FAIL(err, PP_EINVAL, "stage %d: arena of %zu bytes, more than the %llu a stage may have",
                       si, st->arena_bytes, (unsigned long long)MAX_ARENA);
    return PP_OK;
}

/* The recv and send lists: slot i of recv is the RECV tensor of slot i; slot
 * i of send the SEND tensor of slot i or a received one passed through; a
 * forward stage's stash slots any SEND or RECV tensor (what the stage sends
 * on may be kept too). */
static pp_status check_slots(const pprt_stage *st, int si, bool forward, pp_err *err) {
    for (int i = 0; i < st->n_recv; i++)
        if (st->recv[i] < 0 || st->recv[i] >= st->n_tensors || st->t[st->recv[i]].kind != PPRT_RECV ||
            st->t[st->recv[i]].offset != (size_t)i)
            return PP_FAIL(err, PP_EINVAL, "stage %d: recv slot %d: expected a RECV tensor for slot %d", si, i, i);
    for (int i = 0; i < st->n_send; i++) {
        int id = st->send[i];
        const bool stash = (forward && i >= st->n_send - st->n_stash) || i >= st->n_send - st->n_wkeep;
        if (id < 0 || id >= st->n_tensors ||
            !(st->t[id].kind == PPRT_RECV ||
              (st->t[id].kind == PPRT_SEND && (stash || st->t[id].offset == (size_t)i))))
            return PP_FAIL(err, PP_EINVAL,
                           "stage %d: send slot %d: expected a SEND tensor for slot %d or a received one",
                           si, i, i);
    }
    return PP_OK;
}

/* One attribute of node w: its value in the field its type names; a tensor's
 * bytes match its type and shape. */
static pp_status read_attr(const Ppplan__Attr *ma, pp_attr *a, const char *w, pp_err *err) {
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
        PP_TRY(pprt_plan_read_shape(ma->t_shape, ma->n_t_shape, &a->t_shape, what, err));
        if (pp_dtype_bits(a->t_dtype) == 0 ||
            pp_shape_nbytes(&a->t_shape, a->t_dtype, &nb, &e2) != PP_OK || nb != ma->t_data.len)
            return PP_FAIL(err, PP_EINVAL, "%s: expected %zu bytes of a known type, got %zu bytes of type %d",
                           what, nb, ma->t_data.len, ma->t_dtype);
        a->t_data = ma->t_data.data;
        a->t_nbytes = nb;
    } else if (a->type < PP_ATTR_INT || a->type > PP_ATTR_FLOATS) {
        return PP_FAIL(err, PP_EINVAL, "%s attribute '%s': expected type 1..6 or 8, got %d", w, ma->name, ma->type);
    }
    return PP_OK;
}

/* Node w's attributes, in the metadata's arena (freed with it). */
static pp_status read_attrs(const Ppplan__Node *mn, pprt_node *n, const pprt_plan *p, const char *w, pp_err *err) {
    if (mn->n_attrs > 4096) return PP_FAIL(err, PP_EINVAL, "%s: absurd attribute count", w);
    n->n_attrs = (int)mn->n_attrs;
    n->attrs = pprt_plan_meta_alloc(p->meta_arena, sizeof *n->attrs * (mn->n_attrs ? mn->n_attrs : 1));
    if (n->attrs) memset(n->attrs, 0, sizeof *n->attrs * (mn->n_attrs ? mn->n_attrs : 1));
    if (!n->attrs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (size_t k = 0; k < mn->n_attrs; k++) PP_TRY(read_attr(mn->attrs[k], &n->attrs[k], w, err));
    return PP_OK;
}

/* What the shape functions see of a node's inputs and infer of its outputs. */
static _Thread_local pp_tinfo node_in[PP_MAX_INPUTS], node_out[PP_MAX_OUTPUTS];

/* Node ni's inputs: ids in range, each written before it is read (a weight
 * or a received tensor is); their types, shapes and weights' bytes into
 * node_in; last[id]: the last node that reads it. */
static pp_status node_inputs(const pprt_node *n, int ni, const pprt_plan *p, const pprt_stage *st,
                             const int *writer, int *last, const char *w, pp_err *err) {
    for (int k = 0; k < n->n_in; k++) {
        int id = n->in[k];
        if (id == -1) {
            node_in[k] = (pp_tinfo){PP_UNDEFINED, {0, {0}}, NULL};
            continue;
        }
        if (id < 0 || id >= st->n_tensors)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': input %d: expected a tensor id below %d, got %d",
                           w, n->name, k, st->n_tensors, id);
        const pprt_tdesc *t = &st->t[id];
        if ((t->kind == PPRT_ACTIVATION || t->kind == PPRT_SEND) && writer[id] < 0)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': input '%s' is read before any node writes it",
                           w, n->name, t->name);
        last[id] = ni;
        node_in[k] = (pp_tinfo){t->dtype, t->shape, check_data(p, t)};
    }
    return PP_OK;
}

/* Node ni's outputs: ids in range, activations or sent tensors, each written
 * by this node only (writer[id] = ni). */
static pp_status node_outputs(const pprt_node *n, int ni, const pprt_stage *st, int *writer, const char *w,
                              pp_err *err) {
    for (int k = 0; k < n->n_out; k++) {
        int id = n->out[k];
        if (id < 0 || id >= st->n_tensors)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': output %d: expected a tensor id below %d, got %d",
                           w, n->name, k, st->n_tensors, id);
        const pprt_tdesc *t = &st->t[id];
        if (t->kind != PPRT_ACTIVATION && t->kind != PPRT_SEND)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s' is a weight or received tensor",
                           w, n->name, t->name);
        if (writer[id] >= 0)
            return PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s' is already written by node %d",
                           w, n->name, t->name, writer[id]);
        writer[id] = ni;
    }
    return PP_OK;
}

/* The output types and shapes the compiler's shape functions infer from
 * node_in are the plan's. */
static pp_status node_shapes(const pprt_node *n, const pp_op_info *info, int opset, const pprt_stage *st,
                             const char *w, pp_err *err) {
    pp_err e = {0};
    if (pp_infer(n->op, (pp_attrs){n->attrs, n->n_attrs, opset}, node_in, n->n_in, node_out, n->n_out, &e) != PP_OK)
        return PP_FAIL(err, PP_EINVAL, "%s '%s' (%s): %s", w, n->name, info->name, e.msg);
    for (int k = 0; k < n->n_out; k++) {
        const pprt_tdesc *t = &st->t[n->out[k]];
        if (!tdesc_matches(t, node_out[k].dtype, &node_out[k].shape)) {
            char a[96], b[96];
            return PP_FAIL(err, PP_EINVAL, "%s '%s': output '%s': expected %s %s, got %s %s", w,
                           n->name, t->name, pp_dtype_name(node_out[k].dtype),
                           pp_shape_str(&node_out[k].shape, a, sizeof a), pp_dtype_name(t->dtype),
                           pp_shape_str(&t->shape, b, sizeof b));
        }
    }
    return PP_OK;
}

/* Node ni of stage si: its chain mark, a known op with counts the op table
 * allows, its attributes, its inputs and outputs, its shapes. */
static pp_status read_node(const Ppplan__Node *mn, int si, int ni, const pprt_plan *p, pprt_stage *st,
                           int *writer, int *last, pp_err *err) {
    char w[96];
    pprt_node *n = &st->nodes[ni];
    n->name = mn->name;
    n->flops = mn->flops;
    /* version 1 plans carry no chains: any node may be absorbed, as before */
    n->chain = p->version < 2 || mn->chain;
    if (mn->chain && ni == 0)
        return PP_FAIL(err, PP_EINVAL, "stage %d node 0 '%s': marked as chained to a node before it, but it is "
                       "the stage's first", si, mn->name);
    label(w, "node", si, ni);
    /* a hint: a pattern this pprt does not know runs node by node */
    n->pattern = mn->pattern == PP_PATTERN_ATTENTION ? PP_PATTERN_ATTENTION : PP_PATTERN_NONE;
    if (!pp_op_lookup(mn->op, &n->op)) return PP_FAIL(err, PP_EINVAL, "%s '%s': unknown op '%s'", w, mn->name, mn->op);
    const pp_op_info *info = &pp_op_table[n->op];
    if (mn->n_inputs < (size_t)info->min_inputs || mn->n_inputs > (size_t)info->max_inputs ||
        mn->n_outputs < 1 || mn->n_outputs > (size_t)info->max_outputs)
        return PP_FAIL(err, PP_EINVAL, "%s '%s': %s expects %d..%d inputs and 1..%d outputs, got %zu and %zu",
                       w, mn->name, info->name, info->min_inputs, info->max_inputs,
                       info->max_outputs, mn->n_inputs, mn->n_outputs);
    n->n_in = (int)mn->n_inputs;
    n->n_out = (int)mn->n_outputs;
    n->in = mn->inputs;
    n->out = mn->outputs;
    PP_TRY(read_attrs(mn, n, p, w, err));
    PP_TRY(node_inputs(n, ni, p, st, writer, last, w, err));
    PP_TRY(node_outputs(n, ni, st, writer, w, err));
    return node_shapes(n, info, p->opset, st, w, err);
}

/* Every sent tensor is written by some node of the stage. */
static pp_status check_sent(const pprt_stage *st, int si, const int *writer, pp_err *err) {
    for (int i = 0; i < st->n_tensors; i++)
        if (st->t[i].kind == PPRT_SEND && writer[i] < 0)
            return PP_FAIL(err, PP_EINVAL, "stage %d: sent tensor '%s' is written by no node", si, st->t[i].name);
    return PP_OK;
}

pp_status pprt_plan_read_stage(const Ppplan__Stage *m, int si, const pprt_plan *p, pprt_stage *st, pp_err *err) {
    PP_TRY(stage_fields(m, si, p, st, err));
    st->t = calloc(pp_count(st->n_tensors), sizeof *st->t);
    st->nodes = calloc(pp_count(st->n_nodes), sizeof *st->nodes);
    int *writer = malloc(sizeof(int) * pp_count(st->n_tensors)); /* tensor -> the node writing it, or -1 */
    int *last = malloc(sizeof(int) * pp_count(st->n_tensors));   /* tensor -> the last node reading it, or -1 */
    pp_status s = PP_OK;
    if (!st->t || !st->nodes || !writer || !last) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < st->n_tensors && s == PP_OK; i++) {
        writer[i] = last[i] = -1;
        s = read_tensor(m->tensors[i], si, i, p, st, err);
    }
    if (s == PP_OK) s = check_arena(st, si, err);
    if (s == PP_OK) s = check_slots(st, si, si < p->train_devices, err);
    for (int ni = 0; ni < st->n_nodes && s == PP_OK; ni++) s = read_node(m->nodes[ni], si, ni, p, st, writer, last, err);
    if (s == PP_OK) s = check_sent(st, si, writer, err);
    if (s == PP_OK) s = check_overlaps(st, si, writer, last, err);
    if (s == PP_OK) s = make_layout(st, st->recv, st->n_recv, &st->in, err);
    if (s == PP_OK) s = make_layout(st, st->send, st->n_send, &st->out, err);
    free(writer);
    free(last);
    return s;
}

/* Slots a0.. of layout a against b0.. of b, n of them (n_a and n_b in all). */
static pp_status check_slots_match(const pprt_msg_layout *a, int a0, int n_a, const pprt_msg_layout *b, int b0, int n_b,
                                   const char *what, pp_err *err) {
    if (n_a != n_b) return PP_FAIL(err, PP_EINVAL, "%s: expected %d tensors, got %d", what, n_a, n_b);
    for (int i = 0; i < n_a; i++)
        if (!tdesc_matches(a->t[a0 + i], b->t[b0 + i]->dtype, &b->t[b0 + i]->shape) ||
            strcmp(a->t[a0 + i]->name, b->t[b0 + i]->name))
            return PP_FAIL(err, PP_EINVAL, "%s: slot %d ('%s') differs in name, type or shape", what, i,
                           a->t[a0 + i]->name);
    return PP_OK;
}

/* Stage i-1's outgoing message against stage i's incoming one, each less
 * its device's stash; in a training plan, each device's stash on both of
 * its stages. */
static pp_status check_link(const pprt_plan *p, int i, pp_err *err) {
    const pprt_stage *a = &p->stages[i - 1], *b = &p->stages[i];
    const int P = p->train_devices;
    const int na = i - 1 < P ? a->out.n - a->n_stash : pprt_local_first(a), nb = b->in.n - (i >= P ? b->n_stash : 0);
    char what[96];
    snprintf(what, sizeof what, "boundary %d -> %d", i - 1, i);
    PP_TRY(check_slots_match(&a->out, 0, na, &b->in, 0, nb, what, err));
    if (i > P || i < P) return PP_OK;
    for (int d = 0; d < P; d++) {
        const pprt_stage *f = &p->stages[d], *bk = &p->stages[2 * P - 1 - d];
        snprintf(what, sizeof what, "device %d's stash (stages %d and %d)", d, d, 2 * P - 1 - d);
        PP_TRY(check_slots_match(&f->out, f->out.n - f->n_stash, f->n_stash, &bk->in, bk->in.n - bk->n_stash,
                                 bk->n_stash, what, err));
        if (!p->n_wstages) continue;
        const pprt_stage *w = &p->stages[p->n_stages + d];
        snprintf(what, sizeof what, "what stage %d keeps for device %d's W stage %d", 2 * P - 1 - d, d, p->n_stages + d);
        PP_TRY(check_slots_match(&bk->out, bk->out.n - bk->n_wkeep, bk->n_wkeep, &w->in, 0, w->in.n, what, err));
    }
    return PP_OK;
}

/* Where each output leaves: the last stage's send list less its device-local
 * tail is the plan's outputs that are no device's own, in their order; each
 * backward stage's local tail (pprt_stage.n_local) holds others, by name;
 * every output once. */
static pp_status check_outputs(const pprt_plan *p, pp_err *err) {
    const pprt_stage *lastst = &p->stages[p->n_stages - 1];
    const int ns = p->n_stages + p->n_wstages, chain = pprt_local_first(lastst);
    int n_local = 0;
    for (int s = 0; s < ns; s++) n_local += p->stages[s].n_local;
    if (chain + n_local != p->n_outputs)
        return PP_FAIL(err, PP_EINVAL, "the stages send %d outputs (the last stage %d, device-local %d), expected the "
                       "%d plan outputs", chain + n_local, chain, n_local, p->n_outputs);
    for (int i = 0; i < p->n_outputs; i++) p->outputs[i].stage = -1;
    for (int i = 0, j = 0; i < p->n_outputs; i++) {
        bool local = false;
        for (int s = 0; s < ns && !local; s++)
            for (int k = pprt_local_first(&p->stages[s]); k < pprt_local_first(&p->stages[s]) + p->stages[s].n_local && !local; k++)
                if (!strcmp(p->stages[s].out.t[k]->name, p->outputs[i].name)) {
                    local = true;
                    p->outputs[i].stage = s, p->outputs[i].slot = k;
                }
        if (!local && j < chain) p->outputs[i].stage = p->n_stages - 1, p->outputs[i].slot = j++;
    }
    for (int i = 0; i < p->n_outputs; i++) {
        const pprt_io *o = &p->outputs[i];
        if (o->stage < 0) /* the names matched some slot twice, or none */
            return PP_FAIL(err, PP_EINVAL, "plan output '%s': no stage sends it", o->name);
        const pprt_stage *st = &p->stages[o->stage];
        if (!tdesc_matches(st->out.t[o->slot], o->dtype, &o->shape) || strcmp(st->out.t[o->slot]->name, o->name))
            return PP_FAIL(err, PP_EINVAL, "stage %d slot %d: differs from plan output '%s'", o->stage, o->slot,
                           o->name);
        for (int k = 0; k < i; k++)
            if (p->outputs[k].stage == o->stage && p->outputs[k].slot == o->slot)
                return PP_FAIL(err, PP_EINVAL, "plan outputs '%s' and '%s' both leave from stage %d slot %d",
                               p->outputs[k].name, o->name, o->stage, o->slot);
    }
    return PP_OK;
}

pp_status pprt_plan_check_chain(const pprt_plan *p, pp_err *err) {
    /* links: plan inputs -> stage 0 -> ... -> last stage -> plan outputs */
    pprt_stage *first = &p->stages[0];
    if (first->n_recv != p->n_inputs)
        return PP_FAIL(err, PP_EINVAL, "stage 0 receives %d tensors, expected the %d plan inputs",
                       first->n_recv, p->n_inputs);
    for (int i = 0; i < p->n_inputs; i++)
        if (!tdesc_matches(first->in.t[i], p->inputs[i].dtype, &p->inputs[i].shape))
            return PP_FAIL(err, PP_EINVAL, "stage 0 slot %d: differs from plan input '%s'", i, p->inputs[i].name);
    PP_TRY(check_outputs(p, err));
    for (int i = 1; i < p->n_stages; i++) PP_TRY(check_link(p, i, err));
    return PP_OK;
}
