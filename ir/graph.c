/* graph.c: graph construction, name lookup, verification and inference.
 * Nothing here knows about ONNX or plans. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- arena -------------------------------------------------------------------------- */

struct pp_arena_chunk {
    pp_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

void *pp_arena_alloc(pp_arena *a, size_t n) {
    n = pp_align_up(n ? n : 1, 16);
    pp_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = calloc(1, sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

char *pp_arena_strdup(pp_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = pp_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

void pp_arena_free(pp_arena *a) {
    for (pp_arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ---- graph ------------------------------------------------------------------------- */

void pp_graph_init(pp_graph *g) {
    memset(g, 0, sizeof *g);
}

void pp_graph_free(pp_graph *g) {
    pp_graph_drop_uses(g);
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].in);
        free(g->nodes[i].out);
    }
    free(g->nodes);
    free(g->values);
    free(g->inputs);
    free(g->outputs);
    free(g->hash);
    if (g->bounds)
        for (int i = 0; i < g->n_stages - 1; i++) free(g->bounds[i].vals);
    free(g->bounds);
    for (int d = 0; g->stash && d < g->train_devices; d++) free(g->stash[d].vals);
    free(g->stash);
    for (int d = 0; g->local && d < g->train_devices; d++) free(g->local[d].vals);
    free(g->local);
    for (int d = 0; g->wkeep && d < g->train_devices; d++) free(g->wkeep[d].vals);
    free(g->wkeep);
    free(g->stage_arena);
    free(g->stage_info);
    if (g->keep_free) g->keep_free(g->keep);
    for (int i = 0; i < g->n_maps; i++)
        if (g->maps[i].addr) munmap(g->maps[i].addr, g->maps[i].len);
    free(g->maps);
    pp_arena_free(&g->arena);
    memset(g, 0, sizeof *g);
}

pp_status pp_graph_clone(const pp_graph *src, pp_graph *dst, pp_err *err) {
    pp_graph_init(dst);
    dst->values = malloc(pp_count(src->n_values) * sizeof *dst->values);
    dst->nodes = calloc(pp_count(src->n_nodes), sizeof *dst->nodes);
    dst->inputs = malloc(pp_count(src->n_inputs) * sizeof(int));
    dst->outputs = malloc(pp_count(src->n_outputs) * sizeof(int));
    dst->hash = malloc(pp_count(src->hash_cap) * sizeof(int));
    if (!dst->values || !dst->nodes || !dst->inputs || !dst->outputs || !dst->hash) {
        pp_graph_free(dst);
        return PP_FAIL(err, PP_ENOMEM, "out of memory copying the graph");
    }
    memcpy(dst->values, src->values, (size_t)src->n_values * sizeof *dst->values);
    dst->n_values = dst->cap_values = src->n_values;
    memcpy(dst->inputs, src->inputs, (size_t)src->n_inputs * sizeof(int));
    dst->n_inputs = dst->cap_inputs = src->n_inputs;
    memcpy(dst->outputs, src->outputs, (size_t)src->n_outputs * sizeof(int));
    dst->n_outputs = dst->cap_outputs = src->n_outputs;
    memcpy(dst->hash, src->hash, (size_t)src->hash_cap * sizeof(int));
    dst->hash_cap = src->hash_cap;
    dst->cap_nodes = src->n_nodes;
    for (int i = 0; i < src->n_nodes; i++) {
        const pp_node *s = &src->nodes[i];
        pp_node *d = &dst->nodes[i];
        *d = *s;
        d->in = malloc(pp_count(s->n_in) * sizeof(int));
        d->out = malloc(pp_count(s->n_out) * sizeof(int));
        dst->n_nodes = i + 1;
        if (!d->in || !d->out) {
            pp_graph_free(dst);
            return PP_FAIL(err, PP_ENOMEM, "out of memory copying the graph");
        }
        memcpy(d->in, s->in, (size_t)s->n_in * sizeof(int));
        memcpy(d->out, s->out, (size_t)s->n_out * sizeof(int));
    }
    dst->model_map = src->model_map;
    dst->model_map_len = src->model_map_len;
    dst->model_dir = src->model_dir;
    memcpy(dst->model_hash, src->model_hash, sizeof dst->model_hash);
    dst->batch = src->batch;
    dst->batch_fixed = src->batch_fixed;
    dst->opset = src->opset;
    return PP_OK;
}

pp_status pp_graph_clone_borrowed(const pp_graph *src, pp_graph *dst, pp_err *err) {
    PP_TRY(pp_graph_clone(src, dst, err));
    dst->modules = src->modules, dst->n_modules = src->n_modules;
    dst->aliases = src->aliases, dst->n_aliases = src->n_aliases;
    return PP_OK;
}

void pp_graph_free_borrowed(pp_graph *g) {
    g->modules = NULL, g->n_modules = 0;
    g->aliases = NULL, g->n_aliases = 0;
    pp_graph_free(g);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool hash_insert(int *tab, int cap, const pp_value *vals, int idx) {
    uint64_t h = hash_str(vals[idx].name);
    for (int probe = 0; probe < cap; probe++) {
        int slot = (int)((h + (uint64_t)probe) & (uint64_t)(cap - 1));
        if (tab[slot] < 0) {
            tab[slot] = idx;
            return true;
        }
    }
    return false;
}

int pp_graph_find(const pp_graph *g, const char *name) {
    if (!g->hash) return -1;
    uint64_t h = hash_str(name);
    for (int probe = 0; probe < g->hash_cap; probe++) {
        int slot = (int)((h + (uint64_t)probe) & (uint64_t)(g->hash_cap - 1));
        int v = g->hash[slot];
        if (v < 0) return -1;
        if (strcmp(g->values[v].name, name) == 0) return v;
    }
    return -1;
}

static pp_status grow(void **arr, int *cap, int need, size_t elem, pp_err *err) {
    if (need <= *cap) return PP_OK;
    int nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > (1 << 28)) return PP_FAIL(err, PP_ENOMEM, "graph too large");
        nc *= 2;
    }
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return PP_FAIL(err, PP_ENOMEM, "out of memory growing the graph");
    *arr = p;
    *cap = nc;
    return PP_OK;
}

pp_status pp_graph_add_value(pp_graph *g, const char *name, int *idx, pp_err *err) {
    if (pp_graph_find(g, name) >= 0)
        return PP_FAIL(err, PP_EINVAL, "value name '%s' is defined twice", name);
    PP_TRY(grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof *g->values, err));
    if ((g->n_values + 1) * 2 > g->hash_cap) {
        int cap = g->hash_cap ? g->hash_cap * 2 : 256;
        while ((g->n_values + 1) * 2 > cap) cap *= 2;
        int *tab = malloc((size_t)cap * sizeof *tab);
        if (!tab) return PP_FAIL(err, PP_ENOMEM, "out of memory growing the name table");
        memset(tab, 0xff, (size_t)cap * sizeof *tab);
        for (int i = 0; i < g->n_values; i++) hash_insert(tab, cap, g->values, i);
        free(g->hash);
        g->hash = tab;
        g->hash_cap = cap;
    }
    pp_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = pp_arena_strdup(&g->arena, name);
    if (!v->name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    v->producer = -1;
    v->arena_off = -1;
    hash_insert(g->hash, g->hash_cap, g->values, g->n_values);
    *idx = g->n_values++;
    return PP_OK;
}

pp_status pp_graph_add_node(pp_graph *g, pp_op op, const char *name, int n_in, int n_out,
                            int *idx, pp_err *err) {
    PP_TRY(grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes, err));
    pp_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->name = pp_arena_strdup(&g->arena, name);
    n->in = calloc(pp_count(n_in), sizeof(int));
    n->out = calloc(pp_count(n_out), sizeof(int));
    if (!n->name || !n->in || !n->out) {
        free(n->in);
        free(n->out);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n_in; i++) n->in[i] = -1;
    for (int i = 0; i < n_out; i++) n->out[i] = -1;
    n->n_in = n_in;
    n->n_out = n_out;
    n->stage = -1;
    n->prof_s = -1;
    n->src = -1;
    *idx = g->n_nodes++;
    return PP_OK;
}

pp_status pp_graph_insert_node(pp_graph *g, int at, pp_op op, const char *name, int n_in,
                               int n_out, int *idx, pp_err *err) {
    int last;
    PP_TRY(pp_graph_add_node(g, op, name, n_in, n_out, &last, err));
    if (at < last) {
        pp_node n = g->nodes[last];
        memmove(&g->nodes[at + 1], &g->nodes[at], (size_t)(last - at) * sizeof n);
        g->nodes[at] = n;
    }
    *idx = at < last ? at : last;
    return PP_OK;
}

bool pp_op_is_control(pp_op op) { return pp_op_has(op, PP_TR_CONTROL); }

pp_status pp_graph_add_input(pp_graph *g, int v, pp_err *err) {
    PP_TRY(grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(int), err));
    g->inputs[g->n_inputs++] = v;
    g->values[v].is_input = true;
    return PP_OK;
}

pp_status pp_graph_add_output(pp_graph *g, int v, pp_err *err) {
    PP_TRY(grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(int), err));
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_output = true;
    return PP_OK;
}

void pp_node_tinfo(const pp_graph *g, const pp_node *n, pp_tinfo *in, pp_tinfo *out) {
    for (int i = 0; i < n->n_in; i++) {
        if (n->in[i] < 0) {
            in[i] = (pp_tinfo){PP_UNDEFINED, {0, {0}}, NULL};
            continue;
        }
        const pp_value *v = &g->values[n->in[i]];
        /* a constant always has a data pointer, even with no bytes */
        static const int64_t no_bytes = 0;
        in[i] = (pp_tinfo){v->dtype, v->shape, v->is_const ? (v->data ? v->data : &no_bytes) : NULL};
    }
    if (out)
        for (int i = 0; i < n->n_out; i++) {
            const pp_value *v = &g->values[n->out[i]];
            out[i] = (pp_tinfo){v->dtype, v->shape, NULL};
        }
}

const char *pp_node_desc(const pp_graph *g, int idx, char *buf, size_t n) {
    const pp_node *nd = &g->nodes[idx];
    snprintf(buf, n, "node '%s' (#%d, %s)", nd->name, idx, pp_op_table[nd->op].name);
    return buf;
}

pp_status pp_graph_verify(pp_graph *g, pp_err *err) {
    char d[320];
    for (int v = 0; v < g->n_values; v++) {
        g->values[v].producer = -1;
        g->values[v].n_uses = 0;
    }
    /* defined[v]: set once v is available in the walk */
    unsigned char *defined = calloc(g->n_values > 0 ? (size_t)g->n_values : 1, 1);
    if (!defined) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = PP_OK;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_input || g->values[v].is_const || g->values[v].is_param) defined[v] = 1;
    for (int i = 0; i < g->n_nodes && s == PP_OK; i++) {
        pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in && s == PP_OK; k++) {
            int v = n->in[k];
            if (v < -1 || v >= g->n_values)
                s = PP_FAIL(err, PP_EINVAL, "%s: input %d refers to no value",
                            pp_node_desc(g, i, d, sizeof d), k);
            else if (v >= 0 && !defined[v])
                s = PP_FAIL(err, PP_EINVAL,
                            "%s: input '%s' is not produced by any earlier node (dangling input, "
                            "or the graph is not in topological order / has a cycle)",
                            pp_node_desc(g, i, d, sizeof d), g->values[v].name);
            else if (v >= 0)
                g->values[v].n_uses++;
        }
        for (int k = 0; k < n->n_out && s == PP_OK; k++) {
            int v = n->out[k];
            if (v < 0 || v >= g->n_values)
                s = PP_FAIL(err, PP_EINVAL, "%s: output %d refers to no value",
                            pp_node_desc(g, i, d, sizeof d), k);
            else if (defined[v])
                s = PP_FAIL(err, PP_EINVAL, "%s: output '%s' is already defined elsewhere",
                            pp_node_desc(g, i, d, sizeof d), g->values[v].name);
            else {
                defined[v] = 1;
                g->values[v].producer = i;
            }
        }
    }
    for (int k = 0; k < g->n_outputs && s == PP_OK; k++) {
        int v = g->outputs[k];
        if (!defined[v])
            s = PP_FAIL(err, PP_EINVAL, "graph output '%s' is produced by no node",
                        g->values[v].name);
        else if (g->values[v].is_const)
            s = PP_FAIL(err, PP_EUNSUP, "graph output '%s' is a constant; not supported",
                        g->values[v].name);
    }
    free(defined);
    return s;
}

/* Bytes of memory this machine has (a budget for any one tensor). */
static size_t machine_bytes(void) {
    static _Thread_local size_t known; /* asked once: sysconf reads /proc (a sysinfo call) each time */
    if (!known) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
        known = pages > 0 && size > 0 ? (size_t)pages * (size_t)size : SIZE_MAX;
    }
    return known;
}

pp_status pp_node_infer(pp_graph *g, int i, pp_err *err) {
    static _Thread_local pp_tinfo in[PP_MAX_INPUTS], out[PP_MAX_OUTPUTS];
    char d[320];
    pp_node *n = &g->nodes[i];
    if (n->n_in > PP_MAX_INPUTS || n->n_out > PP_MAX_OUTPUTS)
        return PP_FAIL(err, PP_EUNSUP, "%s: too many inputs or outputs", pp_node_desc(g, i, d, sizeof d));
    pp_node_tinfo(g, n, in, NULL);
    pp_err e = {0};
    pp_status s = pp_infer(n->op, pp_node_attrs(g, n), in, n->n_in, out, n->n_out, &e);
    if (s != PP_OK) return PP_FAIL(err, s, "%s: %s", pp_node_desc(g, i, d, sizeof d), e.msg);
    for (int k = 0; k < n->n_out; k++) {
        pp_value *v = &g->values[n->out[k]];
        v->dtype = out[k].dtype;
        v->shape = out[k].shape;
        pp_err e2 = {0};
        if (pp_shape_nbytes(&v->shape, v->dtype, &v->nbytes, &e2) != PP_OK)
            return PP_FAIL(err, e2.code, "%s: output '%s': %s", pp_node_desc(g, i, d, sizeof d),
                           v->name, e2.msg);
        if (v->nbytes > machine_bytes())
            return PP_FAIL(err, PP_EINVAL, "%s: output '%s' would need %.1f GB, more than this "
                           "machine's memory", pp_node_desc(g, i, d, sizeof d), v->name,
                           (double)v->nbytes / 1e9);
    }
    n->cost = pp_node_cost(n->op, pp_node_attrs(g, n), in, n->n_in, out, n->n_out);
    return PP_OK;
}

pp_status pp_graph_infer(pp_graph *g, pp_err *err) {
    for (int i = 0; i < g->n_nodes; i++) PP_TRY(pp_node_infer(g, i, err));
    return PP_OK;
}

size_t pp_node_param_bytes(const pp_graph *g, const pp_node *n) {
    size_t b = 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && g->values[n->in[k]].is_const) b += g->values[n->in[k]].nbytes;
    return b;
}

/* ---- rewriting --------------------------------------------------------------------- */

pp_status pp_graph_add_const(pp_graph *g, const char *hint, pp_dtype dt, const pp_shape *sh,
                             const void *data, int *idx, pp_err *err) {
    size_t nb;
    PP_TRY(pp_shape_nbytes(sh, dt, &nb, err));
    void *copy = pp_arena_alloc(&g->arena, nb ? nb : 1);
    if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory for constant '%s'", hint);
    if (nb) memcpy(copy, data, nb);
    char name[512];
    snprintf(name, sizeof name, "%s", hint);
    for (int k = 1; pp_graph_find(g, name) >= 0; k++) snprintf(name, sizeof name, "%s__%d", hint, k);
    PP_TRY(pp_graph_add_value(g, name, idx, err));
    pp_value *v = &g->values[*idx];
    v->dtype = dt;
    v->shape = *sh;
    v->is_const = true;
    v->data = copy;
    v->nbytes = nb;
    return PP_OK;
}

pp_status pp_graph_add_ints(pp_graph *g, const char *hint, const int64_t *v, int n, int *idx, pp_err *err) {
    const pp_shape sh = {.rank = 1, .dim = {n}};
    return pp_graph_add_const(g, hint, PP_I64, &sh, v, idx, err);
}

pp_status pp_value_align(pp_graph *g, int v, pp_err *err) {
    pp_value *val = &g->values[v];
    if (!val->unaligned) return PP_OK;
    size_t es = pp_dtype_size(val->dtype);
    if (es > 1 && (uintptr_t)val->data % es) {
        void *copy = pp_arena_alloc(&g->arena, val->nbytes ? val->nbytes : 1);
        if (!copy) return PP_FAIL(err, PP_ENOMEM, "out of memory for constant '%s'", val->name);
        if (val->nbytes) memcpy(copy, val->data, val->nbytes);
        val->data = copy;
    }
    val->unaligned = false;
    return PP_OK;
}

bool pp_graph_is_output(const pp_graph *g, int v) { return v >= 0 && g->values[v].is_output; }

int pp_graph_count_uses(const pp_graph *g, int v) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++) n += g->nodes[i].in[k] == v;
    }
    return n;
}

/* ---- the use index ------------------------------------------------------------------ */

struct pp_uses {
    int *head, n_head;   /* value -> its last entry, -1 */
    int *next, *node;    /* entry -> the value's previous entry; the node */
    int n, cap;
};

void pp_graph_drop_uses(pp_graph *g) {
    if (!g->uses) return;
    free(g->uses->head), free(g->uses->next), free(g->uses->node), free(g->uses);
    g->uses = NULL;
}

pp_status pp_graph_note_use(pp_graph *g, int v, int node, pp_err *err) {
    struct pp_uses *u = g->uses;
    if (!u || v < 0) return PP_OK;
    if (v >= u->n_head) { /* a value added since the index was built */
        int nh = u->n_head * 2 > g->n_values ? u->n_head * 2 : g->n_values;
        int *h = realloc(u->head, sizeof(int) * pp_count(nh));
        if (!h) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        for (int i = u->n_head; i < nh; i++) h[i] = -1;
        u->head = h, u->n_head = nh;
    }
    if (u->n == u->cap) {
        int nc = u->cap ? 2 * u->cap : 1024;
        int *nx = realloc(u->next, sizeof(int) * (size_t)nc);
        if (nx) u->next = nx;
        int *nd = nx ? realloc(u->node, sizeof(int) * (size_t)nc) : NULL;
        if (!nd) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        u->node = nd, u->cap = nc;
    }
    u->node[u->n] = node;
    u->next[u->n] = u->head[v];
    u->head[v] = u->n++;
    return PP_OK;
}

pp_status pp_graph_index_uses(pp_graph *g, pp_err *err) {
    pp_graph_drop_uses(g);
    struct pp_uses *u = calloc(1, sizeof *u);
    if (!u) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    g->uses = u;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            pp_status s = pp_graph_note_use(g, g->nodes[i].in[k], i, err);
            if (s != PP_OK) {
                pp_graph_drop_uses(g);
                return s;
            }
        }
    return PP_OK;
}

static bool reads(const pp_node *n, int v) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == v) return true;
    return false;
}

int pp_graph_consumers(const pp_graph *g, int v, int *out, int max) {
    int n = 0, seen[16];
    const int cap = max + 1 < 16 ? max + 1 : 16; /* distinct ones kept, to count each once */
    const struct pp_uses *u = g->uses;
    if (!u) {
        for (int i = 0; i < g->n_nodes && n <= max; i++)
            if (!g->nodes[i].dead && reads(&g->nodes[i], v)) {
                if (n < max) out[n] = i;
                n++;
            }
        return n;
    }
    for (int e = v < u->n_head ? u->head[v] : -1; e >= 0 && n <= max; e = u->next[e]) {
        int i = u->node[e];
        if (g->nodes[i].dead || !reads(&g->nodes[i], v)) continue;
        bool dup = false;
        for (int k = 0; k < n && k < cap; k++) dup |= seen[k] == i;
        if (dup) continue;
        if (n < cap) seen[n] = i;
        if (n < max) out[n] = i;
        n++;
    }
    return n;
}

/* Swap two values' entries in the name table (their names were swapped). */
static void hash_swap(pp_graph *g, int a, int b) {
    int sa = -1, sb = -1;
    for (int which = 0; which < 2; which++) {
        int v = which ? b : a; /* v now holds the other's old name: find the slot naming v's new name */
        uint64_t h = hash_str(g->values[v].name);
        for (int probe = 0; probe < g->hash_cap; probe++) {
            int slot = (int)((h + (uint64_t)probe) & (uint64_t)(g->hash_cap - 1));
            if (g->hash[slot] < 0) break;
            if (g->hash[slot] == (which ? a : b)) {
                *(which ? &sb : &sa) = slot;
                break;
            }
        }
    }
    if (sa >= 0) g->hash[sa] = a;
    if (sb >= 0) g->hash[sb] = b;
}

void pp_graph_replace_uses(pp_graph *g, int from, int to) {
    if (from == to) return;
    struct pp_uses *u = g->uses;
    if (u) { /* only the nodes listed as reading `from` */
        for (int e = from < u->n_head ? u->head[from] : -1; e >= 0; e = u->next[e]) {
            pp_node *n = &g->nodes[u->node[e]];
            bool hit = false;
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] == from) n->in[k] = to, hit = true;
            if (hit && pp_graph_note_use(g, to, u->node[e], NULL) != PP_OK) { /* no memory: forget the index */
                pp_graph_drop_uses(g);
                pp_graph_replace_uses(g, from, to);
                return;
            }
            u = g->uses;
        }
        if (from < u->n_head) u->head[from] = -1;
    } else {
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] == from) g->nodes[i].in[k] = to;
    }
    if (!g->values[from].is_output) return;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] == from) g->outputs[k] = to;
    g->values[from].is_output = false;
    g->values[to].is_output = true;
    const char *t = g->values[from].name;
    g->values[from].name = g->values[to].name;
    g->values[to].name = t;
    hash_swap(g, from, to);
}

void pp_graph_compact(pp_graph *g) {
    pp_graph_drop_uses(g);
    int w = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) {
            free(g->nodes[i].in);
            free(g->nodes[i].out);
            continue;
        }
        g->nodes[w++] = g->nodes[i];
    }
    g->n_nodes = w;
}
