/* layout.c: a top-to-bottom drawing of the graph for the HTML report
 * (ppcc --report-html), computed here so that the page only draws it.
 *
 * A layered (Sugiyama-style) layout, kept simple and linear enough for
 * graphs of thousands of ops:
 *   1. layers: longest path from the inputs, then every node with slack
 *      moved down to just above its first consumer (so side computations sit
 *      next to their use); graph inputs above their first consumer, graph
 *      outputs below their producer;
 *   2. a value whose consumers lie more than one layer down gets one chain
 *      of dummy points, one per layer, shared by its edges (a skip
 *      connection is one line with branches);
 *   3. order within layers: barycenter sweeps down and up, keeping the
 *      order with the fewest crossings between adjacent layers;
 *   4. x: each item is pulled toward the mean x of its neighbours in the
 *      adjacent layer, with the least squared displacement that keeps the
 *      order and the spacing (isotonic regression, pool-adjacent-violators),
 *      alternating down and up.
 * Constants are not drawn. Deterministic: same graph, same picture. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

typedef struct {
    int *off, *to; /* CSR: neighbours of item i are to[off[i] .. off[i+1]) */
} adj;

static void adj_free(adj *a) {
    free(a->off);
    free(a->to);
}

/* CSR from n_e pairs (a[k] -> b[k]) over n items; dedupe not needed (callers give unique pairs) */
static bool adj_build(adj *r, int n, const int *a, const int *b, int n_e) {
    r->off = calloc((size_t)n + 1, sizeof(int));
    r->to = malloc(sizeof(int) * pp_count(n_e));
    int *fill = calloc(pp_count(n), sizeof(int));
    if (!r->off || !r->to || !fill) {
        free(fill);
        return false;
    }
    for (int k = 0; k < n_e; k++) r->off[a[k] + 1]++;
    for (int i = 0; i < n; i++) r->off[i + 1] += r->off[i];
    for (int k = 0; k < n_e; k++) r->to[r->off[a[k]] + fill[a[k]]++] = b[k];
    free(fill);
    return true;
}

typedef struct {
    pp_layout *L;
    int *layer_first, *layer_n; /* items of layer l: by_layer[layer_first[l] ..] */
    int *by_layer;
    adj up, down;
} ctx;

/* crossings between layer l and l+1 under the current orders */
static long crossings(const ctx *c, int l) {
    const pp_layout *L = c->L;
    long x = 0;
    int f = c->layer_first[l], n = c->layer_n[l];
    for (int i = 0; i < n; i++) {
        int a = c->by_layer[f + i];
        for (int j = i + 1; j < n; j++) {
            int b = c->by_layer[f + j]; /* order(a) < order(b) */
            for (int p = c->down.off[a]; p < c->down.off[a + 1]; p++)
                for (int q = c->down.off[b]; q < c->down.off[b + 1]; q++)
                    x += L->items[c->down.to[p]].order > L->items[c->down.to[q]].order;
        }
    }
    return x;
}

static long all_crossings(const ctx *c) {
    long x = 0;
    for (int l = 0; l + 1 < c->L->n_layers; l++) x += crossings(c, l);
    return x;
}

static const pp_layout *sort_L;
static const double *sort_key;
static int by_key(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    if (sort_key[a] != sort_key[b]) return sort_key[a] < sort_key[b] ? -1 : 1;
    return sort_L->items[a].order - sort_L->items[b].order; /* stable */
}

/* reorder layer l by the mean order of each item's neighbours in nb */
static void sweep_layer(ctx *c, int l, const adj *nb, double *key) {
    pp_layout *L = c->L;
    int f = c->layer_first[l], n = c->layer_n[l];
    for (int i = 0; i < n; i++) {
        int it = c->by_layer[f + i];
        int cnt = nb->off[it + 1] - nb->off[it];
        double s = 0;
        for (int p = nb->off[it]; p < nb->off[it + 1]; p++) s += L->items[nb->to[p]].order;
        key[it] = cnt ? s / cnt : L->items[it].order;
    }
    sort_L = L;
    sort_key = key;
    qsort(c->by_layer + f, (size_t)n, sizeof(int), by_key);
    for (int i = 0; i < n; i++) L->items[c->by_layer[f + i]].order = i;
}

/* x of layer l: least squares to desired[] keeping order and spacing (PAVA) */
static void place_layer(ctx *c, int l, const double *desired, double *blk_w, double *blk_v, int *blk_n) {
    pp_layout *L = c->L;
    int f = c->layer_first[l], n = c->layer_n[l], nb = 0;
    double cum = 0;
    for (int i = 0; i < n; i++) {
        const pp_layout_item *it = &L->items[c->by_layer[f + i]];
        if (i) {
            const pp_layout_item *pv = &L->items[c->by_layer[f + i - 1]];
            cum += (pv->w + it->w) / 2 + ((pv->kind == PP_LAYOUT_DUMMY || it->kind == PP_LAYOUT_DUMMY) ? 10 : 24);
        }
        double w = it->kind == PP_LAYOUT_DUMMY ? 0.5 : 1.0;
        double t = desired[c->by_layer[f + i]] - cum;
        blk_w[nb] = w, blk_v[nb] = t, blk_n[nb] = 1, nb++;
        while (nb > 1 && blk_v[nb - 2] > blk_v[nb - 1]) { /* pool */
            double w2 = blk_w[nb - 2] + blk_w[nb - 1];
            blk_v[nb - 2] = (blk_v[nb - 2] * blk_w[nb - 2] + blk_v[nb - 1] * blk_w[nb - 1]) / w2;
            blk_w[nb - 2] = w2;
            blk_n[nb - 2] += blk_n[nb - 1];
            nb--;
        }
    }
    cum = 0;
    for (int b = 0, i = 0; b < nb; b++)
        for (int k = 0; k < blk_n[b]; k++, i++) {
            pp_layout_item *it = &L->items[c->by_layer[f + i]];
            if (i) {
                const pp_layout_item *pv = &L->items[c->by_layer[f + i - 1]];
                cum += (pv->w + it->w) / 2 + ((pv->kind == PP_LAYOUT_DUMMY || it->kind == PP_LAYOUT_DUMMY) ? 10 : 24);
            }
            it->x = blk_v[b] + cum;
        }
}

static void desired_x(const ctx *c, int it, int dir, double *out) {
    const pp_layout *L = c->L;
    double s = 0;
    int cnt = 0;
    for (int d = 0; d < 2; d++) {
        if ((dir == 0 && d == 1) || (dir == 1 && d == 0)) continue; /* dir 2: both */
        const adj *nb = d == 0 ? &c->up : &c->down;
        for (int p = nb->off[it]; p < nb->off[it + 1]; p++, cnt++) s += L->items[nb->to[p]].x;
    }
    *out = cnt ? s / cnt : L->items[it].x;
}

void pp_layout_free(pp_layout *L) {
    free(L->items);
    free(L->edges);
    free(L->path);
    memset(L, 0, sizeof *L);
}

pp_status pp_layout_graph(const pp_graph *g, double node_w, pp_layout *L, pp_err *err) {
    memset(L, 0, sizeof *L);
    int N = g->n_nodes, I = g->n_inputs, O = g->n_outputs, V = g->n_values;
    int n_real = N + I + O;
    int *src = malloc(sizeof(int) * pp_count(V));      /* value -> item producing it, -1 none */
    int *lastl = malloc(sizeof(int) * pp_count(V));    /* value -> deepest consumer layer */
    int *dfirst = malloc(sizeof(int) * pp_count(V));   /* value -> its first dummy item, -1 none */
    int *layer = malloc(sizeof(int) * pp_count(n_real));
    ctx c = {.L = L};
    pp_status st = PP_OK;
    int *ea = NULL, *eb = NULL;
    double *key = NULL, *bw = NULL, *bv = NULL;
    int *bn = NULL;
    if (!src || !lastl || !dfirst || !layer) goto oom;
    for (int v = 0; v < V; v++) src[v] = -1, lastl[v] = -1, dfirst[v] = -1;
    for (int k = 0; k < I; k++) src[g->inputs[k]] = N + k;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++) src[g->nodes[i].out[k]] = i;
    /* 1. layers: longest path down, then slack taken up toward the consumers */
    for (int k = 0; k < I; k++) layer[N + k] = 0;
    for (int i = 0; i < N; i++) {
        int l = 0;
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && src[v] >= 0 && layer[src[v]] + 1 > l) l = layer[src[v]] + 1;
        }
        layer[i] = l;
    }
    {
        /* reverse order: every consumer of node i is final when i is reached */
        for (int v = 0; v < V; v++) lastl[v] = 1 << 30; /* here: the shallowest consumer layer */
        bool *is_out = calloc(pp_count(V), sizeof(bool));
        if (!is_out) goto oom;
        for (int k = 0; k < O; k++) is_out[g->outputs[k]] = true;
        for (int i = N - 1; i >= 0; i--) {
            const pp_node *nd = &g->nodes[i];
            int minc = 1 << 30;
            bool out = false;
            for (int k = 0; k < nd->n_out; k++) {
                if (lastl[nd->out[k]] < minc) minc = lastl[nd->out[k]];
                out |= is_out[nd->out[k]];
            }
            if (!out && minc < (1 << 30) && minc - 1 > layer[i]) layer[i] = minc - 1;
            for (int k = 0; k < nd->n_in; k++)
                if (nd->in[k] >= 0 && layer[i] < lastl[nd->in[k]]) lastl[nd->in[k]] = layer[i];
        }
        for (int k = 0; k < I; k++) {
            int m = lastl[g->inputs[k]];
            layer[N + k] = m < (1 << 30) && m > 0 ? m - 1 : 0;
        }
        free(is_out);
        for (int v = 0; v < V; v++) lastl[v] = -1;
    }
    for (int k = 0; k < O; k++) layer[N + I + k] = src[g->outputs[k]] >= 0 ? layer[src[g->outputs[k]]] + 1 : 1;
    int n_layers = 0;
    for (int i = 0; i < n_real; i++)
        if (layer[i] + 1 > n_layers) n_layers = layer[i] + 1;
    /* 2. dummies: one chain per value down to its deepest consumer */
    for (int i = 0; i < N; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && src[v] >= 0 && layer[i] > lastl[v]) lastl[v] = layer[i];
        }
    for (int k = 0; k < O; k++) {
        int v = g->outputs[k];
        if (src[v] >= 0 && layer[N + I + k] > lastl[v]) lastl[v] = layer[N + I + k];
    }
    size_t n_dummy = 0;
    for (int v = 0; v < V; v++)
        if (src[v] >= 0 && lastl[v] > layer[src[v]] + 1) n_dummy += (size_t)(lastl[v] - layer[src[v]] - 1);
    if (n_dummy > (1u << 22)) {
        st = PP_FAIL(err, PP_EUNSUP, "the graph is too tangled to draw: %zu bends", n_dummy);
        goto done;
    }
    int n_items = n_real + (int)n_dummy;
    L->items = calloc(pp_count(n_items), sizeof *L->items);
    if (!L->items) goto oom;
    L->n_items = n_items;
    L->n_real = n_real;
    L->n_layers = n_layers;
    for (int i = 0; i < n_real; i++) {
        pp_layout_item *it = &L->items[i];
        it->kind = i < N ? PP_LAYOUT_NODE : i < N + I ? PP_LAYOUT_INPUT : PP_LAYOUT_OUTPUT;
        it->ref = i < N ? i : i < N + I ? g->inputs[i - N] : g->outputs[i - N - I];
        it->layer = layer[i];
        it->w = i < N ? node_w : node_w * 0.8;
    }
    int d = n_real;
    for (int v = 0; v < V; v++) {
        if (src[v] < 0 || lastl[v] <= layer[src[v]] + 1) continue;
        dfirst[v] = d;
        for (int l = layer[src[v]] + 1; l < lastl[v]; l++, d++)
            L->items[d] = (pp_layout_item){.kind = PP_LAYOUT_DUMMY, .ref = v, .layer = l, .w = 0};
    }
    /* edges (one per value and consumer) and their paths through the dummies */
    int n_edges = 0;
    size_t n_path = 0;
    for (int pass = 0; pass < 2; pass++) {
        n_edges = 0;
        n_path = 0;
        for (int t = 0; t < N + O; t++) {
            int ti = t < N ? t : N + I + (t - N);
            int nin = t < N ? g->nodes[t].n_in : 1;
            for (int k = 0; k < nin; k++) {
                int v = t < N ? g->nodes[t].in[k] : g->outputs[t - N];
                if (v < 0 || src[v] < 0) continue;
                bool dup = false; /* a node reading a value twice: one edge */
                for (int j = 0; j < k && t < N; j++) dup |= g->nodes[t].in[j] == v;
                if (dup) continue;
                int len = layer[ti] - layer[src[v]] + 1;
                if (pass) {
                    pp_layout_edge *e = &L->edges[n_edges];
                    e->value = v, e->src = src[v], e->dst = ti, e->first = (int)n_path, e->n = len;
                    L->path[n_path] = src[v];
                    for (int s = 1; s < len - 1; s++) L->path[n_path + (size_t)s] = dfirst[v] + s - 1;
                    L->path[n_path + (size_t)len - 1] = ti;
                }
                n_edges++;
                n_path += (size_t)len;
            }
        }
        if (!pass) {
            L->edges = calloc(pp_count(n_edges), sizeof *L->edges);
            L->path = malloc(sizeof(int) * (n_path ? n_path : 1));
            if (!L->edges || !L->path) goto oom;
        }
    }
    L->n_edges = n_edges;
    /* neighbour lists between adjacent layers, each segment once: a value's
     * chain of dummies (from its producer), then each edge's last step */
    {
        size_t n_seg = 0;
        ea = malloc(sizeof(int) * (n_path ? n_path : 1));
        eb = malloc(sizeof(int) * (n_path ? n_path : 1));
        if (!ea || !eb) goto oom;
        for (int v = 0; v < V; v++) {
            if (dfirst[v] < 0) continue;
            int n = lastl[v] - layer[src[v]] - 1;
            ea[n_seg] = src[v], eb[n_seg] = dfirst[v], n_seg++;
            for (int k = 0; k + 1 < n; k++) ea[n_seg] = dfirst[v] + k, eb[n_seg] = dfirst[v] + k + 1, n_seg++;
        }
        for (int e = 0; e < n_edges; e++) {
            const pp_layout_edge *E = &L->edges[e];
            ea[n_seg] = L->path[E->first + E->n - 2], eb[n_seg] = E->dst, n_seg++;
        }
        if (!adj_build(&c.down, n_items, ea, eb, (int)n_seg) || !adj_build(&c.up, n_items, eb, ea, (int)n_seg))
            goto oom;
    }
    /* 3. orders */
    c.layer_first = calloc((size_t)n_layers + 1, sizeof(int));
    c.layer_n = calloc((size_t)n_layers + 1, sizeof(int));
    c.by_layer = malloc(sizeof(int) * pp_count(n_items));
    key = malloc(sizeof(double) * pp_count(n_items));
    int *best = malloc(sizeof(int) * pp_count(n_items));
    if (!c.layer_first || !c.layer_n || !c.by_layer || !key || !best) {
        free(best);
        goto oom;
    }
    for (int i = 0; i < n_items; i++) c.layer_n[L->items[i].layer]++;
    for (int l = 0; l < n_layers; l++) c.layer_first[l + 1] = c.layer_first[l] + c.layer_n[l];
    {
        int *fill = calloc((size_t)n_layers, sizeof(int));
        if (!fill) {
            free(best);
            goto oom;
        }
        for (int i = 0; i < n_items; i++) { /* item order: the graph's order, dummies by their value's producer */
            int l = L->items[i].layer;
            c.by_layer[c.layer_first[l] + fill[l]++] = i;
        }
        free(fill);
        for (int i = 0; i < n_items; i++)
            key[i] = i < n_real ? (L->items[i].kind == PP_LAYOUT_INPUT ? -1 : i)
                                : src[L->items[i].ref] + 0.5;
        sort_L = L;
        sort_key = key;
        for (int l = 0; l < n_layers; l++) {
            for (int i = 0; i < c.layer_n[l]; i++) L->items[c.by_layer[c.layer_first[l] + i]].order = i;
            qsort(c.by_layer + c.layer_first[l], (size_t)c.layer_n[l], sizeof(int), by_key);
            for (int i = 0; i < c.layer_n[l]; i++) L->items[c.by_layer[c.layer_first[l] + i]].order = i;
        }
    }
    long best_x = all_crossings(&c);
    for (int i = 0; i < n_items; i++) best[i] = L->items[i].order;
    for (int round = 0; round < 6 && best_x > 0; round++) {
        for (int l = 1; l < n_layers; l++) sweep_layer(&c, l, &c.up, key);
        for (int l = n_layers - 2; l >= 0; l--) sweep_layer(&c, l, &c.down, key);
        long x = all_crossings(&c);
        if (x < best_x) {
            best_x = x;
            for (int i = 0; i < n_items; i++) best[i] = L->items[i].order;
        }
    }
    for (int i = 0; i < n_items; i++) L->items[i].order = best[i];
    for (int i = 0; i < n_items; i++) c.by_layer[c.layer_first[L->items[i].layer] + L->items[i].order] = i;
    free(best);
    L->crossings = best_x;
    /* 4. x */
    bw = malloc(sizeof(double) * pp_count(n_items));
    bv = malloc(sizeof(double) * pp_count(n_items));
    bn = malloc(sizeof(int) * pp_count(n_items));
    if (!bw || !bv || !bn) goto oom;
    for (int l = 0; l < n_layers; l++) {
        for (int i = 0; i < c.layer_n[l]; i++) key[c.by_layer[c.layer_first[l] + i]] = 0;
        place_layer(&c, l, key, bw, bv, bn);
    }
    for (int round = 0; round < 8; round++) {
        int dir = round == 7 ? 2 : round % 2;
        for (int k = 0; k < n_layers; k++) {
            int l = dir == 1 ? n_layers - 1 - k : k;
            for (int i = 0; i < c.layer_n[l]; i++) {
                int it = c.by_layer[c.layer_first[l] + i];
                desired_x(&c, it, L->items[it].kind == PP_LAYOUT_DUMMY ? 2 : dir, &key[it]);
            }
            place_layer(&c, l, key, bw, bv, bn);
        }
    }
    double lo = 1e300, hi = -1e300;
    for (int i = 0; i < n_items; i++) {
        if (L->items[i].x - L->items[i].w / 2 < lo) lo = L->items[i].x - L->items[i].w / 2;
        if (L->items[i].x + L->items[i].w / 2 > hi) hi = L->items[i].x + L->items[i].w / 2;
    }
    for (int i = 0; i < n_items; i++) L->items[i].x -= lo;
    L->width = n_items ? hi - lo : 0;
    goto done;
oom:
    st = PP_FAIL(err, PP_ENOMEM, "out of memory");
done:
    if (st != PP_OK) pp_layout_free(L);
    adj_free(&c.up);
    adj_free(&c.down);
    free(c.layer_first);
    free(c.layer_n);
    free(c.by_layer);
    free(key);
    free(bw), free(bv), free(bn);
    free(ea), free(eb);
    free(src), free(lastl), free(dfirst), free(layer);
    return st;
}
