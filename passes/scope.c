/* scope.c: the module tree from node names, and module lookup.
 *
 * PyTorch's exporter names nodes by module path: "/layer1/layer1.0/conv1/Conv".
 * The components before the last are the scopes, each joined to its parent's
 * path (join_scope) so that every scope becomes the module's full dotted
 * path as named_modules() gives it: layer1, layer1.0, layer1.0.conv1;
 * stages, stages.1, stages.1.blocks, stages.1.blocks.0. Ops written as functions in forward()
 * ("/Flatten", a root-level "/Add") have no scope: they are glue, and a
 * module-level split (ColossalAI's exec_seq) would lose them. Names not in
 * this form (other exporters) also give no scope: every op is its own unit.
 *
 * The modules the model names as imported are also kept (g->modules): the
 * passes later fuse or remove nodes, and a split may still name the module
 * such a node came from. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "passes.h"

/* The exporter's component for a module is the module's own attribute name
 * with the Sequential or ModuleList indices that follow it ("blocks.0" for
 * stages.1.blocks.0; "layer1.0" for layer1.0; "conv1"), and a Sequential's
 * child sits under the Sequential's own scope ("/stages/stages.1/blocks/
 * blocks.0/conv_dw/Conv"). So a component that starts with its parent's
 * component and a dot names a child of that container: it takes the parent's
 * path and adds what follows ("stages.1.blocks" + "blocks.0" ->
 * "stages.1.blocks.0"); a component that already starts with the parent's
 * whole path is whole; any other is an attribute of the parent
 * ("layer1.0" + "conv1"; a ModuleList, which is never called and so has no
 * scope of its own: "encoder" + "layer.2"). These are the names PyTorch's
 * named_modules() gives. Before this rule ppcc qualified every component but
 * the whole-path ones with the parent's path, which doubled the container's
 * name below the top level ("stages.1.blocks.blocks.0"): that old form of
 * each scope is written to *old (NULL where the two agree), for the alias. */
static int join_scope(char *buf, size_t len, const char *parent, const char *parent_comp, size_t pcl,
                      const char *comp, size_t cl) {
    size_t pl = strlen(parent);
    if (!*parent || (cl > pl && strncmp(comp, parent, pl) == 0 && comp[pl] == '.'))
        return snprintf(buf, len, "%.*s", (int)cl, comp);
    if (cl > pcl && strncmp(comp, parent_comp, pcl) == 0 && comp[pcl] == '.')
        return snprintf(buf, len, "%s%.*s", parent, (int)(cl - pcl), comp + pcl);
    return snprintf(buf, len, "%s.%.*s", parent, (int)cl, comp);
}

static int join_scope_old(char *buf, size_t len, const char *parent, const char *comp, size_t cl) {
    size_t pl = strlen(parent);
    if (!*parent || (cl > pl && strncmp(comp, parent, pl) == 0 && comp[pl] == '.'))
        return snprintf(buf, len, "%.*s", (int)cl, comp);
    return snprintf(buf, len, "%s.%.*s", parent, (int)cl, comp);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The length of `comp` less a suffix "_N" (N digits) that the exporter adds
 * when a module is called again ("relu", "relu_1", "relu_2" for a ReLU the
 * forward() calls three times), where the path without it is in `known`
 * (sorted; the first call's scopes and the parameters' modules); else len. */
static size_t repeat_base(const char *comp, size_t len, const char *parent, const char *pc, size_t pcl,
                          const char *const *known, size_t n_known) {
    if (!known) return len;
    size_t d = len;
    while (d > 0 && isdigit((unsigned char)comp[d - 1])) d--;
    if (d == len || d < 2 || comp[d - 1] != '_') return len;
    char cand[1024];
    int w = join_scope(cand, sizeof cand, parent, pc, pcl, comp, d - 1);
    if (w < 0 || (size_t)w >= sizeof cand) return len;
    const char *key = cand;
    return bsearch(&key, known, n_known, sizeof *known, cmp_str) ? d - 1 : len;
}

/* A node's scopes (n->scope), and in old_out each scope's old doubled form
 * or NULL. known (sorted; NULL in a first pass): the paths a first pass
 * found, against which a repeated call's "_N" is taken off. */
static pp_status node_scopes(pp_graph *g, pp_node *n, const char *const *known, size_t n_known,
                             const char ***old_out, pp_err *err) {
    n->scope = NULL;
    n->n_scope = 0;
    const char *name = n->name;
    if (name[0] != '/') return PP_OK;
    /* count components: "/a/b/Op" has 3, of which 2 are scopes */
    int comps = 0;
    for (const char *p = name; *p; p++) comps += *p == '/';
    int ns = comps - 1;
    if (ns <= 0) return PP_OK;
    const char **sc = pp_arena_alloc(&g->arena, sizeof *sc * (size_t)ns);
    const char **old = pp_arena_alloc(&g->arena, sizeof *old * (size_t)ns);
    if (!sc || !old) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const char *p = name + 1, *pc = "";
    size_t pcl = 0;
    char buf[1024], ob0[1024], ob1[1024];
    char *ocur = ob0, *oprev = ob1; /* this scope's old form, its parent's */
    ob1[0] = 0;
    for (int k = 0; k < ns; k++) {
        const char *e = strchr(p, '/');
        size_t len = (size_t)(e - p);
        if (len == 0) return PP_OK; /* "//": not a module path, treat as glue */
        const size_t full = len;
        len = repeat_base(p, len, k ? sc[k - 1] : "", pc, pcl, known, n_known);
        int w = join_scope(buf, sizeof buf, k ? sc[k - 1] : "", pc, pcl, p, len);
        int wo = join_scope_old(ocur, sizeof ob0, oprev, p, full);
        if (w < 0 || (size_t)w >= sizeof buf || wo < 0 || (size_t)wo >= sizeof ob0)
            return PP_OK; /* absurdly long: glue */
        sc[k] = pp_arena_strdup(&g->arena, buf);
        if (!sc[k]) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        old[k] = NULL;
        if (strcmp(buf, ocur) != 0 && !(old[k] = pp_arena_strdup(&g->arena, ocur)))
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        char *t = oprev;
        oprev = ocur, ocur = t;
        pc = p, pcl = len;
        p = e + 1;
    }
    n->scope = sc;
    n->n_scope = ns;
    *old_out = old;
    return PP_OK;
}

/* The module part of an initializer's name: "layer1.0.bn1.weight" ->
 * "layer1.0.bn1"; NULL for names that are not dotted parameter paths
 * ("onnx::Conv_497", "/conv1/Constant_output_0", "fc"). */
static const char *param_module(pp_graph *g, const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || name[0] == '/' || strstr(name, "::") || strchr(name, '/')) return NULL;
    char buf[1024];
    int w = snprintf(buf, sizeof buf, "%.*s", (int)(dot - name), name);
    if (w < 0 || (size_t)w >= sizeof buf) return NULL;
    return pp_arena_strdup(&g->arena, buf);
}

static int cmp_alias(const void *a, const void *b) {
    return strcmp(((const pp_module_alias *)a)->old, ((const pp_module_alias *)b)->old);
}

/* The sorted, distinct module paths of the nodes' scopes and of the
 * parameters' names, in *out (the graph's arena). */
static pp_status collect_modules(pp_graph *g, const char ***out, size_t *n_out, pp_err *err) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += (size_t)g->nodes[i].n_scope;
    for (int v = 0; v < g->n_values; v++) n += g->values[v].is_const;
    const char **m = pp_arena_alloc(&g->arena, sizeof *m * (n ? n : 1));
    if (!m) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    size_t k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_scope; j++) m[k++] = g->nodes[i].scope[j];
    for (int v = 0; v < g->n_values; v++) {
        if (!g->values[v].is_const) continue;
        const char *p = param_module(g, g->values[v].name);
        if (p) m[k++] = p;
    }
    qsort(m, k, sizeof *m, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || strcmp(m[u - 1], m[i]) != 0) m[u++] = m[i];
    *out = m, *n_out = u;
    return PP_OK;
}

pp_status pp_scopes(pp_graph *g, pp_err *err) {
    /* first pass: every scope as named; second: a repeated call's "_N" taken
     * off where the first call's path exists */
    const char **known = NULL, **old = NULL;
    size_t n_known = 0;
    for (int i = 0; i < g->n_nodes; i++) PP_TRY(node_scopes(g, &g->nodes[i], NULL, 0, &old, err));
    PP_TRY(collect_modules(g, &known, &n_known, err));
    size_t na = 0, cap = 0;
    pp_module_alias *al = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        pp_status s = node_scopes(g, &g->nodes[i], known, n_known, &old, err);
        for (int k = 0; s == PP_OK && k < g->nodes[i].n_scope; k++) {
            if (!old[k]) continue;
            if (na == cap) {
                cap = cap ? 2 * cap : 64;
                pp_module_alias *t = realloc(al, sizeof *t * cap);
                if (!t) {
                    s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                    break;
                }
                al = t;
            }
            al[na++] = (pp_module_alias){old[k], g->nodes[i].scope[k]};
        }
        if (s != PP_OK) {
            free(al);
            return s;
        }
    }
    g->aliases = NULL, g->n_aliases = 0;
    if (na) {
        qsort(al, na, sizeof *al, cmp_alias);
        size_t u = 0;
        for (size_t i = 0; i < na; i++)
            if (u == 0 || strcmp(al[u - 1].old, al[i].old) != 0) al[u++] = al[i];
        g->aliases = pp_arena_alloc(&g->arena, sizeof *al * u);
        if (!g->aliases) {
            free(al);
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        memcpy(g->aliases, al, sizeof *al * u);
        g->n_aliases = (int)u;
    }
    free(al);
    const char **m;
    size_t u;
    PP_TRY(collect_modules(g, &m, &u, err));
    g->modules = m;
    g->n_modules = (int)u;
    return PP_OK;
}

const char *pp_module_alias_of(const pp_graph *g, const char *path) {
    if (!g->aliases) return NULL;
    pp_module_alias key = {path, NULL};
    const pp_module_alias *a = bsearch(&key, g->aliases, (size_t)g->n_aliases, sizeof key, cmp_alias);
    return a ? a->name : NULL;
}

typedef struct {
    int first;
    size_t len;
    int m;
} mod_order;

static int cmp_order(const void *a, const void *b) {
    const mod_order *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->m - y->m;
}

void pp_modules_print(FILE *f, const pp_graph *g) {
    const int n = g->n_modules;
    int *ops = calloc((size_t)(n ? n : 1), sizeof *ops), *first = malloc(sizeof *first * (size_t)(n ? n : 1));
    mod_order *o = malloc(sizeof *o * (size_t)(n ? n : 1));
    if (!ops || !first || !o) {
        free(ops), free(first), free(o);
        return;
    }
    for (int m = 0; m < n; m++) first[m] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_scope; k++) {
            const char *key = g->nodes[i].scope[k];
            const char **at = bsearch(&key, g->modules, (size_t)n, sizeof *g->modules, cmp_str);
            if (!at) continue;
            int m = (int)(at - g->modules);
            if (first[m] < 0) first[m] = i;
            ops[m]++;
        }
    /* graph order of the first op, a parent before its first child (the
     * same first op, a shorter path); then the modules without ops */
    for (int m = 0; m < n; m++)
        o[m] = (mod_order){first[m] < 0 ? INT_MAX : first[m], strlen(g->modules[m]), m};
    qsort(o, (size_t)n, sizeof *o, cmp_order);
    for (int j = 0; j < n; j++) {
        const int m = o[j].m;
        fprintf(f, "%s\t%d\t%s\n", g->modules[m], ops[m], first[m] >= 0 ? g->nodes[first[m]].name : "-");
    }
    free(ops), free(first), free(o);
}

bool pp_model_names_module(const pp_graph *g, const char *path) {
    return g->modules && bsearch(&path, g->modules, (size_t)g->n_modules, sizeof *g->modules, cmp_str);
}

int pp_module_last_node(const pp_graph *g, const char *path) {
    for (int i = g->n_nodes - 1; i >= 0; i--)
        if (pp_node_in_module(&g->nodes[i], path)) return i;
    return -1;
}

bool pp_node_in_module(const pp_node *n, const char *path) {
    for (int k = 0; k < n->n_scope; k++)
        if (strcmp(n->scope[k], path) == 0) return true;
    for (int k = 0; k < n->n_extra; k++)
        if (strcmp(n->extra[k], path) == 0) return true;
    return false;
}

int pp_module_first_node(const pp_graph *g, const char *path, char *hint, size_t hint_len) {
    for (int i = 0; i < g->n_nodes; i++)
        if (pp_node_in_module(&g->nodes[i], path)) return i;
    if (!hint || !hint_len) return -1;
    /* the three closest distinct module paths */
    const char *best[3] = {0};
    int bd[3] = {1 << 30, 1 << 30, 1 << 30};
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_scope; k++) {
            const char *s = g->nodes[i].scope[k];
            bool seen = false;
            for (int b = 0; b < 3; b++) seen |= best[b] && strcmp(best[b], s) == 0;
            if (seen) continue;
            int d = pp_edit_distance(path, strlen(path), s);
            for (int b = 0; b < 3; b++)
                if (d < bd[b]) {
                    for (int c = 2; c > b; c--) best[c] = best[c - 1], bd[c] = bd[c - 1];
                    best[b] = s, bd[b] = d;
                    break;
                }
        }
    hint[0] = 0;
    size_t k = 0;
    for (int b = 0; b < 3 && best[b] && k < hint_len; b++)
        k += (size_t)snprintf(hint + k, hint_len - k, "%s%s", b ? ", " : "", best[b]);
    if (!best[0]) snprintf(hint, hint_len, "(the model's node names carry no module scopes)");
    return -1;
}

/* ---- modules that left no op ------------------------------------------------------------- */

static bool contains_ci(const char *s, const char *w) {
    size_t n = strlen(w);
    for (; *s; s++)
        if (strncasecmp(s, w, n) == 0) return true;
    return false;
}

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

bool pp_module_left_no_op(const pp_graph *g, const char *const *names, const int *first, const int *last, int n,
                          int k, char *msg, size_t len) {
    const char *name = names[k];
    const char *dot = strrchr(name, '.');
    const char *leaf = dot ? dot + 1 : name;
    if (dot) {
        char parent[1024];
        snprintf(parent, sizeof parent, "%.*s", (int)(dot - name), name);
        if (pp_module_first_node(g, parent, NULL, 0) < 0 && !pp_model_names_module(g, parent)) {
            snprintf(msg, len, "its parent module '%s' is not in the model either", parent);
            return false;
        }
    }
    /* the listed modules with ops on either side of it in the list */
    int prev = -1, next = -1;
    for (int j = k - 1; j >= 0 && prev < 0; j--)
        if (first[j] >= 0) prev = j;
    for (int j = k + 1; j < n && next < 0; j++)
        if (first[j] >= 0) next = j;
    int lo = prev >= 0 ? last[prev] + 1 : 0, hi = next >= 0 ? first[next] - 1 : g->n_nodes - 1;
    for (int i = lo; i <= hi; i++)
        if (g->nodes[i].n_scope > 0) {
            snprintf(msg, len, "the graph has op '%s' between %s%s%s and %s%s%s, in a module the list does not "
                     "name: '%s' cannot be a module that left no op there", g->nodes[i].name,
                     prev >= 0 ? "'" : "", prev >= 0 ? names[prev] : "the start", prev >= 0 ? "'" : "",
                     next >= 0 ? "'" : "", next >= 0 ? names[next] : "the end", next >= 0 ? "'" : "", name);
            return false;
        }
    if (pp_model_names_module(g, name)) {
        snprintf(msg, len, "the model names it (a node or a parameter of it), but ppcc's passes fused or removed "
                 "its ops");
        return true;
    }
    if (contains_ci(leaf, "drop") || contains_ci(leaf, "identity")) {
        snprintf(msg, len, "a Dropout or Identity exports to nothing in inference mode");
        return true;
    }
    bool norm_like = contains_ci(leaf, "bn") || contains_ci(leaf, "norm") || all_digits(leaf);
    if (norm_like && k > 0 && first[k - 1] >= 0) {
        pp_op op = g->nodes[last[k - 1]].op;
        if (op == PP_OP_CONV || op == PP_OP_FUSEDCONV || op == PP_OP_CONVTRANSPOSE) {
            snprintf(msg, len, "the exporter folded it into the Conv of '%s' before it (an inference-mode "
                     "export folds a BatchNorm into the Conv it follows)", names[k - 1]);
            return true;
        }
    }
    if (contains_ci(leaf, "norm")) {
        snprintf(msg, len, "a normalization that exports to nothing, with no op between the modules around it, is "
                 "an nn.Identity in its place (timm's norm_pre, norm or fc_norm where the model's configuration "
                 "does not use it)");
        return true;
    }
    snprintf(msg, len, "nothing shows that such a module existed: ppcc takes a missing name for a module that "
             "left no op only when the model names it, for a BatchNorm right after a Conv, for a normalization "
             "placeholder (a name with 'norm'), or for a Dropout or Identity (docs/partitioning.md)");
    return false;
}
