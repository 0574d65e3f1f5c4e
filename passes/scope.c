/* scope.c: the module tree from node names, and module lookup.
 *
 * PyTorch's exporter names nodes by module path: "/layer1/layer1.0/conv1/Conv".
 * The components before the last are the scopes; a component that does not
 * already start with its parent's path ("conv1" under "layer1.0") is
 * qualified with it, so every scope becomes a full dotted module path:
 * layer1, layer1.0, layer1.0.conv1. Ops written as functions in forward()
 * ("/Flatten", a root-level "/Add") have no scope: they are glue, and a
 * module-level split (ColossalAI's exec_seq) would lose them. Names not in
 * this form (other exporters) also give no scope: every op is its own unit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

pp_status pp_scopes(pp_graph *g, pp_err *err) {
    for (int i = 0; i < g->n_nodes; i++) PP_TRY(node_scopes(g, &g->nodes[i], err));
    return PP_OK;
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
