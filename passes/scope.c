/* scope.c: the module tree from node names, and module lookup.
 *
 * PyTorch's exporter names nodes by module path: "/layer1/layer1.0/conv1/Conv".
 * The components before the last are the scopes; a component that does not
 * already start with its parent's path ("conv1" under "layer1.0") is
 * qualified with it, so every scope becomes a full dotted module path:
 * layer1, layer1.0, layer1.0.conv1. Ops written as functions in forward()
 * ("/Flatten", a root-level "/Add") have no scope: they are glue, and a
 * module-level split (ColossalAI's exec_seq) would lose them. Names not in
 * this form (other exporters) also give no scope: every op is its own unit.
 *
 * The modules the model names as imported are also kept (g->modules): the
 * passes later fuse or remove nodes, and a split may still name the module
 * such a node came from. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "passes.h"

static pp_status node_scopes(pp_graph *g, pp_node *n, pp_err *err) {
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
    if (!sc) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const char *p = name + 1;
    char buf[1024];
    for (int k = 0; k < ns; k++) {
        const char *e = strchr(p, '/');
        size_t len = (size_t)(e - p);
        if (len == 0) return PP_OK; /* "//": not a module path, treat as glue */
        const char *parent = k ? sc[k - 1] : "";
        size_t pl = strlen(parent);
        int w;
        if (k == 0 || (len > pl && strncmp(p, parent, pl) == 0 && p[pl] == '.'))
            w = snprintf(buf, sizeof buf, "%.*s", (int)len, p);
        else
            w = snprintf(buf, sizeof buf, "%s.%.*s", parent, (int)len, p);
        if (w < 0 || (size_t)w >= sizeof buf) return PP_OK; /* absurdly long: glue */
        sc[k] = pp_arena_strdup(&g->arena, buf);
        if (!sc[k]) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        p = e + 1;
    }
    n->scope = sc;
    n->n_scope = ns;
    return PP_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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

pp_status pp_scopes(pp_graph *g, pp_err *err) {
    for (int i = 0; i < g->n_nodes; i++) PP_TRY(node_scopes(g, &g->nodes[i], err));
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
    g->modules = m;
    g->n_modules = (int)u;
    return PP_OK;
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

/* Levenshtein distance, capped inputs (module paths are short). */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 200 || lb > 200) return 1000;
    int prev[201], cur[201];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
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
            int d = edit_distance(path, s);
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
    snprintf(msg, len, "nothing shows that such a module existed: ppcc takes a missing name for a module that "
             "left no op only when the model names it, for a BatchNorm right after a Conv, or for a Dropout or "
             "Identity (docs/partitioning.md)");
    return false;
}
