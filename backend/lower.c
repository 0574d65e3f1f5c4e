/* lower.c: staged IR -> plan metadata (plan.proto) and the weights layout.
 *
 * Per stage: a tensor table (RECV slots first, in boundary order; then, in
 * node order, the weights and outputs each node touches), the nodes with
 * their attributes, and the send list. Every constant the graph uses gets one
 * 64-byte aligned place in the weights section, shared by all stages that use
 * it. The result is a deterministic function of the graph: no pointers, times
 * or paths go into it, except with ref_model (ppcc --ref-weights), where large
 * weights stay in the model's files and the plan names those files by path. */
#define _GNU_SOURCE /* realpath */
#include "backend.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../plan/plan.h"
#include "../plan/plan_format.h"
#include "plan.pb-c.h"

#define A(n) pp_arena_alloc(&l->arena, (n))

static char *dup(pp_lowered *l, const char *s) { return pp_arena_strdup(&l->arena, s ? s : ""); }

/* A training plan's optimizer, as plan.proto's Optimizer. */
static Ppplan__Optimizer *make_optimizer(pp_lowered *l, const pp_optim *o) {
    Ppplan__Optimizer *m = A(sizeof *m);
    if (!m) return NULL;
    ppplan__optimizer__init(m);
    m->kind = o->kind, m->lr = o->lr, m->momentum = o->momentum, m->nesterov = o->nesterov;
    m->weight_decay = o->weight_decay, m->beta1 = o->beta1, m->beta2 = o->beta2, m->eps = o->eps;
    m->clip_norm = o->clip_norm, m->lr_schedule = o->schedule, m->warmup_steps = o->warmup_steps;
    m->lr_min = o->lr_min, m->loss_scale = o->loss_scale, m->dynamic_scale = o->dynamic_scale;
    m->scale_growth = o->scale_growth, m->scale_backoff = o->scale_backoff, m->scale_interval = o->scale_interval;
    m->precision = o->precision;
    return m;
}

static int64_t *dims(pp_lowered *l, const pp_shape *s) {
    int64_t *d = A(sizeof(int64_t) * pp_count(s->rank));
    if (d) memcpy(d, s->dim, sizeof(int64_t) * (size_t)s->rank);
    return d;
}

static Ppplan__IO *make_io(pp_lowered *l, const pp_value *v) {
    Ppplan__IO *io = A(sizeof *io);
    if (!io) return NULL;
    ppplan__io__init(io);
    io->name = dup(l, v->name);
    io->dtype = (int32_t)v->dtype;
    io->n_shape = (size_t)v->shape.rank;
    io->shape = dims(l, &v->shape);
    return io;
}

static Ppplan__Attr *make_attr(pp_lowered *l, const pp_attr *a) {
    Ppplan__Attr *pa = A(sizeof *pa);
    if (!pa) return NULL;
    ppplan__attr__init(pa);
    pa->name = dup(l, a->name);
    pa->type = (int32_t)a->type;
    pa->i = a->i;
    pa->f = a->f;
    pa->s = dup(l, a->type == PP_ATTR_STRING ? a->s : "");
    if (a->type == PP_ATTR_INTS) {
        pa->n_ints = (size_t)a->n;
        pa->ints = A(sizeof(int64_t) * pp_count(a->n));
        if (!pa->ints) return NULL;
        if (a->n) memcpy(pa->ints, a->ints, sizeof(int64_t) * (size_t)a->n);
    } else if (a->type == PP_ATTR_TENSOR) {
        pa->t_dtype = (int32_t)a->t_dtype;
        pa->n_t_shape = (size_t)a->t_shape.rank;
        pa->t_shape = dims(l, &a->t_shape);
        pa->t_data.len = a->t_nbytes;
        pa->t_data.data = A(a->t_nbytes ? a->t_nbytes : 1);
        if (!pa->t_shape || !pa->t_data.data) return NULL;
        if (a->t_nbytes) memcpy(pa->t_data.data, a->t_data, a->t_nbytes);
    } else if (a->type == PP_ATTR_FLOATS) {
        pa->n_floats = (size_t)a->n;
        pa->floats = A(sizeof(float) * pp_count(a->n));
        if (!pa->floats) return NULL;
        if (a->n) memcpy(pa->floats, a->floats, sizeof(float) * (size_t)a->n);
    } else if (a->type == PP_ATTR_STRINGS) {
        pa->n_strs = (size_t)a->n;
        pa->strs = A(sizeof(char *) * pp_count(a->n));
        if (!pa->strs) return NULL;
        for (int k = 0; k < a->n; k++)
            if (!(pa->strs[k] = dup(l, a->strs[k]))) return NULL;
    }
    return pa;
}

/* Per-stage working state. */
typedef struct {
    pp_lowered *l;
    const pp_graph *g;
    Ppplan__Stage *st;
    int *tid;       /* value -> tensor id in this stage, -1 */
    int *send_slot; /* value -> slot in the outgoing message, -1 */
    int cap;
    int *ext_src;   /* value -> index in the plan's sources, -1: in the weights section */
    uint64_t *ext_off; /* value -> byte offset in that source */
    int part;       /* --schedule zb-h1: 1 a backward stage's B nodes, 2 its W nodes; 0 every node */
} stage_ctx;

static pp_status add_tensor(stage_ctx *c, int v, Ppplan__Tensor__Kind kind, uint64_t off, pp_err *err) {
    const pp_value *val = &c->g->values[v];
    Ppplan__Tensor *t = pp_arena_alloc(&c->l->arena, sizeof *t);
    if (!t) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
    ppplan__tensor__init(t);
    t->name = dup(c->l, val->name);
    t->dtype = (int32_t)val->dtype;
    t->n_shape = (size_t)val->shape.rank;
    t->shape = dims(c->l, &val->shape);
    t->kind = kind;
    t->offset = off;
    t->nbytes = val->nbytes;
    c->st->tensors[c->st->n_tensors] = t;
    c->tid[v] = (int)c->st->n_tensors++;
    return PP_OK;
}

static bool is_local(const pp_graph *g, int v) {
    for (int d = 0; g->local && d < g->train_devices; d++)
        for (int i = 0; i < g->local[d].n; i++)
            if (g->local[d].vals[i] == v) return true;
    return false;
}

/* A training plan: a backward stage's send list ends in its device's own
 * gradients (g->local, passes/boundary.c: they leave the pipeline there);
 * the last stage sends the outputs that are no device's own first, in the
 * plan's output order, then device 0's. Under --schedule zb-h1 (part 1, 2)
 * B sends the gradients its nodes make, then what its W reads (g->wkeep,
 * Stage.n_wkeep); W sends the gradients its nodes make. */
static pp_status local_tail(pp_lowered *l, const pp_graph *g, int s, int part, const int **send, int *n_send,
                            Ppplan__Stage *st, pp_err *err) {
    const int P = g->train_devices, p = g->n_stages;
    if (!P || !g->local || s < P) return PP_OK;
    const pp_boundary *own = &g->local[2 * P - 1 - s], *keep = &g->wkeep[2 * P - 1 - s];
    int *all = A(sizeof(int) * (size_t)(*n_send + own->n + keep->n + 1));
    if (!all) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
    int n = 0;
    for (int i = 0; i < *n_send; i++)
        if (s < p - 1 || !is_local(g, (*send)[i])) all[n++] = (*send)[i];
    for (int i = 0; i < own->n; i++) {
        const int pr = g->values[own->vals[i]].producer;
        if (!part || g->nodes[pr].wpass == (part == 2)) all[n++] = own->vals[i], st->n_local++;
    }
    for (int i = 0; part == 1 && i < keep->n; i++) all[n++] = keep->vals[i], st->n_wkeep++;
    *send = all, *n_send = n;
    return PP_OK;
}

static bool in_part(const stage_ctx *c, const pp_node *n, int s) {
    return n->stage == s && (!c->part || n->wpass == (c->part == 2));
}

/* Stage s's recv and send lists (for c->part's nodes). */
static pp_status stage_lists(stage_ctx *c, int s, const int **recv_out, int *n_recv_out, const int **send_out,
                             int *n_send_out, pp_err *err) {
    const pp_graph *g = c->g;
    pp_lowered *l = c->l;
    Ppplan__Stage *st = c->st;
    int p = g->n_stages;
    const int *recv = s == 0 ? g->inputs : g->bounds[s - 1].vals;
    int n_recv = s == 0 ? g->n_inputs : g->bounds[s - 1].n;
    const int *send = s == p - 1 ? g->outputs : g->bounds[s].vals;
    int n_send = s == p - 1 ? g->n_outputs : g->bounds[s].n;
    /* a training plan: device d's stash after stage d's send list and after
     * stage 2P-1-d's recv list (passes/boundary.c) */
    const int P = g->train_devices, d = s < P ? s : 2 * P - 1 - s;
    if (c->part == 2) /* W: what B kept for it in, its gradients out */
        recv = g->wkeep[d].vals, n_recv = g->wkeep[d].n, send = NULL, n_send = 0;
    const pp_boundary *stash = P && g->stash && c->part != 2 ? &g->stash[d] : NULL;
    if (stash && stash->n) {
        int *both = A(sizeof(int) * (size_t)((s < P ? n_send : n_recv) + stash->n));
        if (!both) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        const int *base = s < P ? send : recv;
        const int nb = s < P ? n_send : n_recv;
        memcpy(both, base, sizeof(int) * (size_t)nb);
        memcpy(both + nb, stash->vals, sizeof(int) * (size_t)stash->n);
        if (s < P) send = both, n_send = nb + stash->n;
        else recv = both, n_recv = nb + stash->n;
        st->n_stash = stash->n;
    }
    PP_TRY(local_tail(l, g, s, c->part, &send, &n_send, st, err));
    *recv_out = recv, *n_recv_out = n_recv, *send_out = send, *n_send_out = n_send;
    return PP_OK;
}

static pp_status lower_stage(stage_ctx *c, int s, pp_err *err) {
    const pp_graph *g = c->g;
    pp_lowered *l = c->l;
    Ppplan__Stage *st = c->st;
    const int *recv = NULL, *send = NULL;
    int n_recv = 0, n_send = 0;
    PP_TRY(stage_lists(c, s, &recv, &n_recv, &send, &n_send, err));
    for (int v = 0; v < g->n_values; v++) c->tid[v] = c->send_slot[v] = -1;
    /* a value sent on and kept in the stash too is written to its first slot */
    for (int i = 0; i < n_send; i++)
        if (c->send_slot[send[i]] < 0) c->send_slot[send[i]] = i;

    /* upper bound on tensors: recv + every input and output of the stage's nodes */
    size_t cap = (size_t)n_recv;
    int n_nodes = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (in_part(c, &g->nodes[i], s)) {
            cap += (size_t)(g->nodes[i].n_in + g->nodes[i].n_out);
            n_nodes++;
        }
    st->tensors = A(sizeof *st->tensors * (cap ? cap : 1));
    st->nodes = A(sizeof *st->nodes * pp_count(n_nodes));
    st->recv = A(sizeof(int32_t) * pp_count(n_recv));
    st->send = A(sizeof(int32_t) * pp_count(n_send));
    if (!st->tensors || !st->nodes || !st->recv || !st->send)
        return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");

    for (int i = 0; i < n_recv; i++) {
        PP_TRY(add_tensor(c, recv[i], PPPLAN__TENSOR__KIND__RECV, (uint64_t)i, err));
        st->recv[st->n_recv++] = c->tid[recv[i]];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (!in_part(c, n, s)) continue;
        Ppplan__Node *pn = A(sizeof *pn);
        if (!pn) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        ppplan__node__init(pn);
        pn->name = dup(l, n->name);
        pn->op = dup(l, pp_op_table[n->op].name);
        pn->flops = n->cost.flops;
        pn->chain = n->chain && n->stage == s && i > 0 && g->nodes[i - 1].stage == s && st->n_nodes > 0;
        pn->pattern = n->pattern;
        pn->inputs = A(sizeof(int32_t) * pp_count(n->n_in));
        pn->outputs = A(sizeof(int32_t) * (size_t)n->n_out);
        pn->attrs = A(sizeof *pn->attrs * pp_count(n->n_attrs));
        if (!pn->inputs || !pn->outputs || !pn->attrs)
            return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v >= 0 && c->tid[v] < 0) {
                if (!g->values[v].is_const)
                    return PP_FAIL(err, PP_EINVAL,
                                   "internal: value '%s' used in stage %d is neither received nor "
                                   "produced there",
                                   g->values[v].name, s);
                if (c->ext_src && c->ext_src[v] >= 0) {
                    PP_TRY(add_tensor(c, v, PPPLAN__TENSOR__KIND__EXTERNAL, c->ext_off[v], err));
                    st->tensors[c->tid[v]]->source = c->ext_src[v];
                } else {
                    PP_TRY(add_tensor(c, v, PPPLAN__TENSOR__KIND__WEIGHT, (uint64_t)l->weight_off[v], err));
                }
                st->weight_bytes += g->values[v].nbytes;
            }
            pn->inputs[pn->n_inputs++] = v >= 0 ? c->tid[v] : -1;
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (c->send_slot[v] >= 0)
                PP_TRY(add_tensor(c, v, PPPLAN__TENSOR__KIND__SEND, (uint64_t)c->send_slot[v], err));
            else
                PP_TRY(add_tensor(c, v, PPPLAN__TENSOR__KIND__ACTIVATION,
                                  (uint64_t)g->values[v].arena_off, err));
            pn->outputs[pn->n_outputs++] = c->tid[v];
        }
        for (int k = 0; k < n->n_attrs; k++) {
            Ppplan__Attr *pa = make_attr(l, &n->attrs[k]);
            if (!pa) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            pn->attrs[pn->n_attrs++] = pa;
        }
        st->flops += n->cost.flops;
        st->nodes[st->n_nodes++] = pn;
    }
    for (int i = 0; i < n_send; i++) {
        if (c->tid[send[i]] < 0)
            return PP_FAIL(err, PP_EINVAL, "internal: stage %d sends '%s' which it never has", s,
                           g->values[send[i]].name);
        st->send[st->n_send++] = c->tid[send[i]];
    }
    st->arena_bytes = g->stage_arena[s];
    if (c->part) { /* B and W: each the end of its own highest activation */
        st->arena_bytes = 0;
        for (size_t i = 0; i < st->n_tensors; i++) {
            const Ppplan__Tensor *t = st->tensors[i];
            const uint64_t end = t->offset + pp_align_up(t->nbytes, PP_PLAN_ALIGN);
            if (t->kind == PPPLAN__TENSOR__KIND__ACTIVATION && end > st->arena_bytes) st->arena_bytes = end;
        }
    }
    st->device = -1;
    if (g->stage_info) {
        st->backend = dup(l, g->stage_info[s].place.backend);
        st->device = g->stage_info[s].place.device;
        if (!st->backend) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
    }
    return PP_OK;
}

/* The file candidate c holds: 0 the model file, 1 + i the external data file g->maps[i]. */
static const unsigned char *cand_addr(const pp_graph *g, int c, size_t *len) {
    *len = c == 0 ? g->model_map_len : g->maps[c - 1].len;
    return c == 0 ? g->model_map : g->maps[c - 1].addr;
}

/* The candidate files by address (mappings never overlap), for find_cand. */
typedef struct {
    uintptr_t base;
    size_t len;
    int c;
} cand_at;

static int by_base(const void *a, const void *b) {
    const cand_at *x = a, *y = b;
    return (x->base > y->base) - (x->base < y->base);
}

/* The candidate file val's bytes lie in, with their offset there; -1: none
 * (or too small to be worth a reference). by[0..n) sorted by base. */
static int find_cand(const cand_at *by, int n, const pp_value *val, uint64_t *off) {
    if (!val->data || val->nbytes < PP_REF_MIN || n == 0) return -1;
    uintptr_t d = (uintptr_t)val->data;
    int lo = 0, hi = n; /* the last base <= d: the only mapping that can hold d */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (by[mid].base <= d) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    const cand_at *a = &by[lo - 1];
    if (d - a->base > a->len || val->nbytes > a->len - (d - a->base)) return -1;
    *off = d - a->base;
    return a->c;
}

/* The plan's sources: the candidate files some weight points into, in
 * candidate order; ext_src[v] becomes an index into pl->sources. */
static pp_status make_sources(pp_lowered *l, const char *ref_model, Ppplan__Plan *pl, int *ext_src,
                              const uint64_t *ext_off, pp_err *err) {
    const pp_graph *g = l->g;
    int nc = g->n_maps + 1;
    int *idx = malloc(sizeof(int) * (size_t)nc);
    if (!idx) return PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
    for (int c = 0; c < nc; c++) idx[c] = -1;
    for (int v = 0; v < g->n_values; v++)
        if (ext_src[v] >= 0) idx[ext_src[v]] = 0;
    int n = 0;
    for (int c = 0; c < nc; c++)
        if (idx[c] == 0) idx[c] = n++;
    pl->sources = A(sizeof *pl->sources * pp_count(n));
    /* each candidate's weights' ranges, together: start[c] .. start[c + 1] */
    pp_range *rs = malloc(sizeof *rs * pp_count(g->n_values));
    int *start = calloc((size_t)nc + 1, sizeof *start);
    pp_status s = pl->sources && rs && start ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
    for (int v = 0; v < g->n_values && s == PP_OK; v++)
        if (ext_src[v] >= 0) start[ext_src[v] + 1]++;
    for (int c = 0; c < nc && s == PP_OK; c++) start[c + 1] += start[c];
    for (int v = 0, *fill = start; v < g->n_values && s == PP_OK; v++)
        if (ext_src[v] >= 0) rs[fill[ext_src[v]]++] = (pp_range){ext_off[v], g->values[v].nbytes};
    for (int c = nc; c > 0 && s == PP_OK; c--) start[c] = start[c - 1]; /* the fill moved each start to the next */
    if (s == PP_OK) start[0] = 0;
    for (int c = 0; c < nc && s == PP_OK; c++) {
        if (idx[c] < 0) continue;
        Ppplan__Source *src = A(sizeof *src);
        if (!src) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            break;
        }
        ppplan__source__init(src);
        char want[PATH_MAX + 1], real[PATH_MAX];
        size_t len;
        const unsigned char *a = cand_addr(g, c, &len);
        if (c == 0) {
            snprintf(want, sizeof want, "%s", ref_model);
            src->location = dup(l, "");
            src->xxh3 = strtoull(g->model_hash, NULL, 16); /* of the same bytes: the whole file */
        } else {
            snprintf(want, sizeof want, "%s/%s", g->model_dir ? g->model_dir : ".", g->maps[c - 1].location);
            src->location = dup(l, g->maps[c - 1].location);
            src->xxh3 = XXH3_64bits(a, len);
        }
        if (!realpath(want, real)) {
            s = PP_FAIL(err, PP_EIO, "--ref-weights: cannot resolve the path of '%s': %s", want,
                        strerror(errno));
            break;
        }
        src->path = dup(l, real);
        src->size = len;
        /* what the plan reads there: checked first at load (pp_ranges_xxh3) */
        src->used_xxh3 = pp_ranges_xxh3(a, rs + start[c], (size_t)(start[c + 1] - start[c]));
        pl->sources[pl->n_sources++] = src;
    }
    free(rs);
    free(start);
    for (int v = 0; v < g->n_values && s == PP_OK; v++)
        if (ext_src[v] >= 0) ext_src[v] = idx[ext_src[v]];
    free(idx);
    return s;
}

pp_status pp_lower(const pp_graph *g, const char *options, const char *producer, const char *ref_model,
                   pp_lowered *l, pp_err *err) {
    memset(l, 0, sizeof *l);
    l->g = g;
    /* a stage with no node is a plan pprt refuses to load: a bug in the split, said here rather than written */
    for (int s = 0; s < g->n_stages; s++) {
        bool any = false;
        for (int i = 0; i < g->n_nodes && !any; i++) any = g->nodes[i].stage == s;
        if (!any)
            return PP_FAIL(err, PP_EINVAL, "stage %d of %d holds no node (a bug in ppcc's split: try another -pp or "
                           "--policy)", s, g->n_stages);
    }
    Ppplan__Plan *pl = A(sizeof *pl);
    l->weight_off = malloc(sizeof(int64_t) * pp_count(g->n_values));
    stage_ctx c = {.l = l, .g = g};
    c.tid = malloc(sizeof(int) * pp_count(g->n_values));
    c.send_slot = malloc(sizeof(int) * pp_count(g->n_values));
    if (ref_model) {
        c.ext_src = malloc(sizeof(int) * pp_count(g->n_values));
        c.ext_off = malloc(sizeof(uint64_t) * pp_count(g->n_values));
    }
    pp_status s = PP_OK;
    cand_at *by = NULL; /* the model's files by address (ref_model) */
    int n_by = 0;
    if (!pl || !l->weight_off || !c.tid || !c.send_slot || (ref_model && (!c.ext_src || !c.ext_off))) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        goto done;
    }
    ppplan__plan__init(pl);
    /* weights layout: used constants in value order, 64-aligned; with
     * ref_model, the large ones read in place from the model's files are
     * referenced there instead */
    size_t off = 0;
    if (ref_model) {
        by = malloc(sizeof *by * ((size_t)g->n_maps + 1));
        if (!by) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            goto done;
        }
        for (int k = 0; k <= g->n_maps; k++) {
            size_t len;
            const unsigned char *a = cand_addr(g, k, &len);
            if (a) by[n_by++] = (cand_at){(uintptr_t)a, len, k};
        }
        qsort(by, (size_t)n_by, sizeof *by, by_base);
    }
    for (int v = 0; v < g->n_values; v++) {
        l->weight_off[v] = -1;
        if (c.ext_src) c.ext_src[v] = -1;
        const pp_value *val = &g->values[v];
        if (!val->is_const || val->n_uses == 0) continue;
        if (c.ext_src && (c.ext_src[v] = find_cand(by, n_by, val, &c.ext_off[v])) >= 0) {
            l->ref_bytes += val->nbytes;
            continue;
        }
        off = pp_align_up(off, 64);
        l->weight_off[v] = (int64_t)off;
        if (pp_add_ovf(off, val->nbytes, &off)) {
            s = PP_FAIL(err, PP_EINVAL, "weights size overflows");
            goto done;
        }
    }
    l->weights_bytes = off;
    if (c.ext_src && (s = make_sources(l, ref_model, pl, c.ext_src, c.ext_off, err)) != PP_OK) goto done;
    pl->producer = dup(l, producer);
    pl->model_hash = dup(l, g->model_hash);
    pl->options = dup(l, options);
    pl->batch_mixing = dup(l, g->batch_mixing ? g->batch_mixing : "");
    pl->train_devices = g->train_devices;
    pl->precision = g->precision;
    if (g->train_devices && !(pl->optimizer = make_optimizer(l, &g->optim))) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        goto done;
    }
    pl->batch = g->batch;
    pl->opset = g->opset;
    pl->weights_bytes = l->weights_bytes;
    pl->inputs = A(sizeof *pl->inputs * (size_t)g->n_inputs);
    pl->outputs = A(sizeof *pl->outputs * (size_t)g->n_outputs);
    const int n_w = g->train_split_w ? g->train_devices : 0; /* zb-h1: the W stages after the chain */
    pl->stages = A(sizeof *pl->stages * (size_t)(g->n_stages + n_w));
    if (!pl->inputs || !pl->outputs || !pl->stages) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        goto done;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!(pl->inputs[pl->n_inputs++] = make_io(l, &g->values[g->inputs[i]]))) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            goto done;
        }
    for (int i = 0; i < g->n_outputs; i++)
        if (!(pl->outputs[pl->n_outputs++] = make_io(l, &g->values[g->outputs[i]]))) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            goto done;
        }
    if (g->n_frozen && !(pl->frozen_inputs = A(sizeof *pl->frozen_inputs * (size_t)g->n_frozen))) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
        goto done;
    }
    for (int i = 0; i < g->n_frozen; i++)
        if (!(pl->frozen_inputs[pl->n_frozen_inputs++] = dup(l, g->frozen[i]))) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            goto done;
        }
    pl->train_split_w = n_w > 0;
    for (int i = 0; i < g->n_stages + n_w && s == PP_OK; i++) {
        Ppplan__Stage *st = A(sizeof *st);
        if (!st) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory lowering");
            break;
        }
        ppplan__stage__init(st);
        pl->stages[pl->n_stages++] = st;
        c.st = st;
        /* zb-h1: stage i of the chain, B alone where it is a backward stage; then device d's W at 2P + d */
        c.part = !n_w ? 0 : i >= g->n_stages ? 2 : i >= n_w ? 1 : 0;
        s = lower_stage(&c, i < g->n_stages ? i : 2 * n_w - 1 - (i - g->n_stages), err);
    }
    l->plan = pl;
done:
    free(c.tid);
    free(c.send_slot);
    free(c.ext_src);
    free(c.ext_off);
    free(by);
    if (s != PP_OK) pp_lowered_free(l);
    return s;
}

void pp_lowered_free(pp_lowered *l) {
    free(l->weight_off);
    pp_arena_free(&l->arena);
    memset(l, 0, sizeof *l);
}

/* The used constants in value order (their offsets increase so), handed with
 * the metadata to the plan library's writer. */
pp_status pp_plan_write(const pp_lowered *l, const char *path, pp_err *err) {
    const pp_graph *g = l->g;
    pp_plan_weight *w = malloc(sizeof *w * pp_count(g->n_values));
    if (!w) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    size_t n = 0;
    for (int v = 0; v < g->n_values; v++)
        if (l->weight_off[v] >= 0)
            w[n++] = (pp_plan_weight){(uint64_t)l->weight_off[v], g->values[v].data, g->values[v].nbytes};
    pp_status s = pp_plan_file_write(l->plan, w, n, l->weights_bytes, path, err);
    free(w);
    return s;
}
