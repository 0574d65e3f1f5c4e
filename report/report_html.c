/* report_html.c: the split as one self-contained HTML page (ppcc
 * --report-html FILE), for people who would rather look than read.
 *
 * Everything is in the file: the style, a little plain JavaScript (search,
 * collapsing module groups, zoom) and the graph as inline SVG whose layout
 * was computed here (layout.c), so the page only draws. A
 * Content-Security-Policy forbids every load from outside. Sections:
 *   - the policy, the options, the imbalance and bubble figures;
 *   - per stage: ops, parameters, FLOPs, peak activations, memory, bytes
 *     sent and estimated time as bars (memory against the stage's cap when
 *     --max-memory gives one);
 *   - the policies compared (compare.c): what uniform, params, flops, memory
 *     and auto make of the same model and -pp;
 *   - the tensors crossing each cut, the recovered ops;
 *   - the graph top to bottom, nodes coloured by stage, cut edges red and
 *     labelled with the tensor's shape and bytes, recovered ops dashed,
 *     module scopes as boxes that collapse when their band of layers holds
 *     only their own ops.
 * Tables carry data-* attributes naming stages and tensors, which the test
 * (tests/report/run.py) reads in a browser. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "../ir/json.h"
#include "report_html_css.h"
#include "report_html_js.h"

#define NODE_W 150.0
#define NODE_H 34.0
#define LAYER_H 60.0
#define TOP 30.0
#define LEFT 30.0

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
}

static const char *human(double b, char *buf, size_t n) {
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, n, "%.1f kB", b / 1e3);
    else snprintf(buf, n, "%.0f B", b);
    return buf;
}

static size_t stage_cap(const pp_compile_opts *o, int s) {
    for (int k = 0; k < o->n_caps; k++)
        if (o->cap_stage[k] == s) return o->cap_bytes[k];
    return o->cap_all;
}

/* ---- module groups ------------------------------------------------------------------------------ */

typedef struct {
    const char *path;
    int parent, depth, n_nodes, below; /* below: levels of drawn groups inside it */
    int l0, l1;                        /* layers of its nodes */
    double x0, x1;
    bool drawn, collapsible;
    int first;                         /* its first node */
    int s0, s1;                        /* the stages of its nodes, lowest and highest */
} group;

typedef struct {
    group *g;
    int n, cap;
    int *node_groups; /* per node: its groups (innermost last), PP_MAX module depth; -1 ends */
    int per;
} groups;

static int find_group(groups *G, const char *path, int parent, int depth) {
    /* a module path is one group; the scope lists are short and sorted by depth,
     * so looking back among the recent groups finds it */
    for (int i = G->n - 1; i >= 0 && i >= G->n - 4096; i--)
        if (G->g[i].depth == depth && !strcmp(G->g[i].path, path)) return i;
    if (G->n == G->cap) {
        int nc = G->cap ? 2 * G->cap : 256;
        group *p = realloc(G->g, sizeof *p * (size_t)nc);
        if (!p) return -2;
        G->g = p, G->cap = nc;
    }
    G->g[G->n] = (group){.path = path, .parent = parent, .depth = depth, .l0 = 1 << 30, .l1 = -1,
                         .x0 = 1e300, .x1 = -1e300, .first = -1};
    return G->n++;
}

static pp_status build_groups(const pp_graph *g, const pp_layout *L, groups *G, pp_err *err) {
    int per = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_scope + 1 > per) per = g->nodes[i].n_scope + 1;
    G->per = per;
    G->node_groups = malloc(sizeof(int) * (size_t)per * pp_count(g->n_nodes));
    if (!G->node_groups) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        int parent = -1;
        int *ng = &G->node_groups[(size_t)i * (size_t)per];
        for (int k = 0; k < n->n_scope; k++) {
            int id = find_group(G, n->scope[k], parent, k);
            if (id < 0) return PP_FAIL(err, PP_ENOMEM, "out of memory");
            group *gr = &G->g[id];
            gr->n_nodes++;
            if (gr->first < 0) gr->first = i, gr->s0 = n->stage;
            gr->s1 = n->stage; /* nodes come in stage order */
            const pp_layout_item *it = &L->items[i];
            if (it->layer < gr->l0) gr->l0 = it->layer;
            if (it->layer > gr->l1) gr->l1 = it->layer;
            if (it->x - it->w / 2 < gr->x0) gr->x0 = it->x - it->w / 2;
            if (it->x + it->w / 2 > gr->x1) gr->x1 = it->x + it->w / 2;
            ng[k] = id;
            parent = id;
        }
        ng[n->n_scope] = -1;
    }
    /* drawn: two ops or more; nesting depth below each, innermost first */
    for (int i = 0; i < G->n; i++) G->g[i].drawn = G->g[i].n_nodes >= 2;
    for (int d = per; d >= 0; d--)
        for (int i = 0; i < G->n; i++) {
            group *gr = &G->g[i];
            if (gr->depth != d || !gr->drawn || gr->parent < 0) continue;
            /* the nearest drawn ancestor holds this box */
            for (int p = gr->parent; p >= 0; p = G->g[p].parent)
                if (G->g[p].drawn) {
                    if (gr->below + 1 > G->g[p].below) G->g[p].below = gr->below + 1;
                    break;
                }
        }
    /* collapsible: nothing else lies in its band of layers */
    int *first = calloc((size_t)L->n_layers + 1, sizeof(int)), *items = malloc(sizeof(int) * pp_count(L->n_real));
    int *fill = calloc((size_t)L->n_layers + 1, sizeof(int));
    if (!first || !items || !fill) {
        free(first), free(items), free(fill);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < L->n_real; i++) first[L->items[i].layer + 1]++;
    for (int l = 0; l < L->n_layers; l++) first[l + 1] += first[l];
    for (int i = 0; i < L->n_real; i++) items[first[L->items[i].layer] + fill[L->items[i].layer]++] = i;
    for (int i = 0; i < G->n; i++) {
        group *gr = &G->g[i];
        if (!gr->drawn) continue;
        bool ok = true;
        for (int l = gr->l0; l <= gr->l1 && ok; l++)
            for (int k = first[l]; k < first[l + 1] && ok; k++) {
                int it = items[k];
                if (it >= g->n_nodes) {
                    ok = false;
                    break;
                }
                bool member = false;
                for (const int *ng = &G->node_groups[(size_t)it * (size_t)G->per]; *ng >= 0; ng++) member |= *ng == i;
                ok = member;
            }
        gr->collapsible = ok;
    }
    free(first), free(items), free(fill);
    return PP_OK;
}

/* ---- the graph ---------------------------------------------------------------------------------- */

static double item_top(const pp_layout_item *it) { return TOP + it->layer * LAYER_H; }

/* "layer1.0/conv1" from "/layer1/layer1.0/conv1/Conv": the last two path parts before the op */
static void short_name(const char *name, char *buf, size_t n) {
    const char *end = strrchr(name, '/');
    if (!end || end == name) {
        snprintf(buf, n, "%s", name[0] == '/' ? name + 1 : name);
    } else {
        const char *a = end, *start = name;
        int parts = 0;
        while (a > start && parts < 2) {
            a--;
            if (*a == '/') parts++;
        }
        if (*a == '/') a++;
        snprintf(buf, n, "%.*s", (int)(end - a), a);
    }
    size_t len = strlen(buf);
    if (len > 24) { /* keep the end, which tells the ops apart */
        memmove(buf + 3, buf + len - 21, 22);
        memcpy(buf, "...", 3);
    }
}

static int stage_of_item(const pp_graph *g, const pp_layout *L, int it) {
    const pp_layout_item *x = &L->items[it];
    if (x->kind == PP_LAYOUT_NODE) return g->nodes[x->ref].stage;
    if (x->kind == PP_LAYOUT_INPUT) return 0;
    return g->n_stages - 1;
}

/* an edge crosses a cut when its ends run in different stages (a model input
 * counts as stage 0's, a model output as the last stage's) */
static bool is_cut(const pp_graph *g, const pp_layout *L, const pp_layout_edge *E) {
    return stage_of_item(g, L, E->src) != stage_of_item(g, L, E->dst);
}

static void write_svg(FILE *f, const pp_graph *g, const pp_layout *L, const groups *G) {
    double W = L->width + 2 * LEFT + 260, H = TOP + L->n_layers * LAYER_H + 20;
    fprintf(f, "<svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" data-lh=\"%g\" data-top=\"%g\" data-nh=\"%g\">\n",
            W, H, W, H, LAYER_H, TOP, NODE_H);
    /* module groups, outermost first (drawn underneath) */
    fprintf(f, "<g id=\"groups\">\n");
    for (int d = 0; d <= G->per; d++)
        for (int i = 0; i < G->n; i++) {
            const group *gr = &G->g[i];
            if (gr->depth != d || !gr->drawn) continue;
            double pad = 4 + 12 * gr->below;
            double x0 = LEFT + gr->x0 - pad, x1 = LEFT + gr->x1 + pad;
            double y0 = TOP + gr->l0 * LAYER_H - pad - 9, y1 = TOP + gr->l1 * LAYER_H + NODE_H + pad;
            int parent = -1;
            for (int p = gr->parent; p >= 0; p = G->g[p].parent)
                if (G->g[p].drawn) {
                    parent = p;
                    break;
                }
            fprintf(f, "<g class=\"grp%s\" id=\"m%d\" data-p=\"%d\" data-l0=\"%d\" data-l1=\"%d\" data-st=\"s%d%s\">"
                       "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"6\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\">%s",
                    gr->collapsible ? " fold" : "", i, parent, gr->l0, gr->l1, gr->s0 % 12, gr->s0 != gr->s1 ? " cuts" : "",
                    x0, y0, x1 - x0, y1 - y0, x0 + 5, y0 + 10, gr->collapsible ? "\xe2\x96\xbe " : "");
            esc(f, gr->path);
            fprintf(f, " (%d)</text></g>\n", gr->n_nodes);
        }
    fprintf(f, "</g>\n<g id=\"edges\">\n");
    /* edges: polylines through their dummies; crossing a stage: red, labelled once per value */
    for (int e = 0; e < L->n_edges; e++) {
        const pp_layout_edge *E = &L->edges[e];
        bool cut = is_cut(g, L, E);
        fprintf(f, "<polyline class=\"e%s\" data-s=\"%d\" data-t=\"%d\" points=\"", cut ? " cut" : "", E->src, E->dst);
        for (int k = 0; k < E->n; k++) {
            const pp_layout_item *it = &L->items[L->path[E->first + k]];
            double y = item_top(it) + (k == 0 ? NODE_H : k == E->n - 1 ? 0 : NODE_H / 2);
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", LEFT + it->x, y);
        }
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "</g>\n<g id=\"cutlabels\">\n");
    bool *labelled = calloc(pp_count(g->n_values), sizeof(bool)); /* NULL: label every crossing edge */
    for (int e = 0; e < L->n_edges; e++) {
        const pp_layout_edge *E = &L->edges[e];
        if (!is_cut(g, L, E)) continue;
        if (labelled) { /* one label per value, at its first crossing edge */
            if (labelled[E->value]) continue;
            labelled[E->value] = true;
        }
        const pp_value *v = &g->values[E->value];
        const pp_layout_item *a = &L->items[L->path[E->first]], *b = &L->items[L->path[E->first + 1]];
        char sh[96], hb[32];
        fprintf(f, "<text class=\"cl\" data-s=\"%d\" data-l=\"%d\" x=\"%.1f\" y=\"%.1f\">", E->src, a->layer,
                LEFT + (a->x + b->x) / 2 + 6, item_top(a) + NODE_H + 14);
        esc(f, v->name);
        fprintf(f, " %s %s</text>\n", pp_shape_str(&v->shape, sh, sizeof sh), human((double)v->nbytes, hb, sizeof hb));
    }
    free(labelled);
    fprintf(f, "</g>\n<g id=\"nodes\">\n");
    for (int i = 0; i < L->n_real; i++) {
        const pp_layout_item *it = &L->items[i];
        double x = LEFT + it->x - it->w / 2, y = item_top(it);
        char sh[96], lab[64];
        if (it->kind != PP_LAYOUT_NODE) {
            const pp_value *v = &g->values[it->ref];
            fprintf(f, "<g class=\"io\" id=\"n%d\" data-l=\"%d\" data-m=\"\" transform=\"translate(%.1f,%.1f)\">"
                       "<rect width=\"%.0f\" height=\"%.0f\" rx=\"17\"/><text x=\"%.0f\" y=\"14\">%s</text>"
                       "<text class=\"sub\" x=\"%.0f\" y=\"27\">",
                    i, it->layer, x, y, it->w, NODE_H, it->w / 2, it->kind == PP_LAYOUT_INPUT ? "input" : "output",
                    it->w / 2);
            short_name(v->name, lab, sizeof lab);
            esc(f, lab);
            fprintf(f, "</text><title>");
            esc(f, v->name);
            fprintf(f, " %s %s</title></g>\n", pp_dtype_name(v->dtype), pp_shape_str(&v->shape, sh, sizeof sh));
            continue;
        }
        const pp_node *n = &g->nodes[it->ref];
        const char *op = pp_op_table[n->op].name;
        if (!strncmp(op, "pp.", 3)) op += 3;
        fprintf(f, "<g class=\"n s%d%s\" id=\"n%d\" data-l=\"%d\" data-m=\"", n->stage % 12,
                n->recovered ? " rec" : "", i, it->layer);
        for (const int *ng = &G->node_groups[(size_t)i * (size_t)G->per]; *ng >= 0; ng++)
            fprintf(f, "%s%d", ng == &G->node_groups[(size_t)i * (size_t)G->per] ? "" : " ", *ng);
        fprintf(f, "\" transform=\"translate(%.1f,%.1f)\"><rect width=\"%.0f\" height=\"%.0f\" rx=\"4\"/>"
                   "<text x=\"%.0f\" y=\"14\">%s%s</text><text class=\"sub\" x=\"%.0f\" y=\"27\">",
                x, y, it->w, NODE_H, it->w / 2, op, n->recovered ? " \xe2\x86\xba" : "", it->w / 2);
        short_name(n->name, lab, sizeof lab);
        esc(f, lab);
        fprintf(f, "</text><title>");
        esc(f, n->name);
        fprintf(f, "\n%s, stage %d%s\n", pp_op_table[n->op].name, n->stage,
                n->recovered ? ", recovered (outside every module the split names)" : "");
        for (int k = 0; k < n->n_out; k++) {
            const pp_value *v = &g->values[n->out[k]];
            fprintf(f, "-> ");
            esc(f, v->name);
            fprintf(f, " %s %s\n", pp_dtype_name(v->dtype), pp_shape_str(&v->shape, sh, sizeof sh));
        }
        char hb[32];
        fprintf(f, "%.4g GFLOP, %s of weights</title></g>\n", n->cost.flops / 1e9,
                human((double)pp_node_param_bytes(g, n), hb, sizeof hb));
    }
    fprintf(f, "</g>\n</svg>\n");
}

/* ---- tables ------------------------------------------------------------------------------------ */

/* a link to node i, shown by its innermost module's path (else its name),
 * the whole name as its title */
static void node_link(FILE *f, const pp_graph *g, int i) {
    if (i < 0 || i >= g->n_nodes) { /* a stage with no node */
        fprintf(f, "(no node)");
        return;
    }
    const pp_node *n = &g->nodes[i];
    const char *t = n->n_scope ? n->scope[n->n_scope - 1] : n->name[0] == '/' ? n->name + 1 : n->name;
    size_t len = strlen(t);
    char lab[64];
    if (len > 40) snprintf(lab, sizeof lab, "...%s", t + len - 37);
    else snprintf(lab, sizeof lab, "%s", t);
    fprintf(f, "<a href=\"#n%d\" class=\"goto\" title=\"", i);
    esc(f, g->nodes[i].name);
    fprintf(f, "\">");
    esc(f, lab);
    fprintf(f, "</a>");
}

static void bar(FILE *f, double v, double max, const char *text) {
    double pct = max > 0 ? 100 * v / max : 0;
    fprintf(f, "<td class=\"num\"><div class=\"bar%s\"><span style=\"width:%.1f%%\"></span></div>%s</td>",
            pct > 100.5 ? " over" : "", pct > 100 ? 100 : pct, text);
}

static void stage_table(FILE *f, const pp_graph *g, const pp_compile_opts *o) {
    double mx[7] = {0};
    bool caps = false;
    for (int s = 0; s < g->n_stages; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        double v[7] = {si->ops, (double)si->params, si->flops, (double)si->arena, (double)si->memory,
                       (double)si->send, si->est_ms};
        for (int k = 0; k < 7; k++) mx[k] = fmax(mx[k], v[k]);
        caps |= stage_cap(o, s) > 0;
    }
    fprintf(f, "<table id=\"stage-table\"><thead><tr><th>stage</th><th>ops</th><th>params</th><th>GFLOPs</th>"
               "<th>peak activations</th><th>memory%s</th><th>sends</th><th>est. time</th><th>first .. last node</th>"
               "</tr></thead><tbody>\n",
            caps ? " (bar: of its cap)" : "");
    for (int s = 0; s < g->n_stages; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        char t[96], hb[32];
        fprintf(f, "<tr data-stage=\"%d\" data-ops=\"%d\"><td><span class=\"sw s%d\"></span>%d</td>", s, si->ops,
                s % 12, s);
        snprintf(t, sizeof t, "%d", si->ops);
        bar(f, si->ops, mx[0], t);
        bar(f, (double)si->params, mx[1], human((double)si->params, hb, sizeof hb));
        snprintf(t, sizeof t, "%.3f", si->flops / 1e9);
        bar(f, si->flops, mx[2], t);
        bar(f, (double)si->arena, mx[3], human((double)si->arena, hb, sizeof hb));
        size_t cap = stage_cap(o, s);
        char hc[32];
        if (cap) snprintf(t, sizeof t, "%s of %s", human((double)si->memory, hb, sizeof hb), human((double)cap, hc, sizeof hc));
        else snprintf(t, sizeof t, "%s", human((double)si->memory, hb, sizeof hb));
        bar(f, (double)si->memory, caps ? (cap ? (double)cap : mx[4]) : mx[4], t);
        bar(f, (double)si->send, mx[5], human((double)si->send, hb, sizeof hb));
        snprintf(t, sizeof t, "%.3f ms", si->est_ms);
        bar(f, si->est_ms, mx[6], t);
        fprintf(f, "<td class=\"names\">");
        node_link(f, g, si->first);
        fprintf(f, " .. ");
        node_link(f, g, si->last);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</tbody></table>\n<p class=\"note\">Bars: each column against its largest stage%s. Memory: weights + "
               "activation arena + %d in-flight boundary messages each way. Time: the roofline estimate%s plus "
               "sending the boundary.</p>\n",
            caps ? ", memory against the stage's --max-memory cap" : " (no --max-memory cap given)", o->depth,
            o->n_profiles ? " from the measured profile" : "");
}

static void policy_table(FILE *f, const pp_graph *g, const pp_compile_opts *o, const pp_policy_row *rows,
                         int n_rows) {
    double tmax = 0;
    for (int r = 0; r < n_rows; r++)
        for (int s = 0; rows[r].ok && s < rows[r].n_stages; s++) tmax = fmax(tmax, rows[r].est_ms[s]);
    for (int s = 0; s < g->n_stages; s++) tmax = fmax(tmax, g->stage_info[s].est_ms);
    fprintf(f, "<table id=\"policy-table\"><thead><tr><th>policy</th><th>bottleneck</th><th>imbalance time</th>"
               "<th>FLOPs</th><th>memory</th><th>largest stage memory</th><th>crossing the cuts</th>"
               "<th>stage times</th></tr></thead><tbody>\n");
    for (int r = 0; r < n_rows + (o->policy == PP_POLICY_CUSTOM); r++) {
        pp_policy_row cur;
        const pp_policy_row *R = &rows[r < n_rows ? r : 0];
        if (r == n_rows) { /* a custom split: its own row */
            memset(&cur, 0, sizeof cur);
            cur.policy = PP_POLICY_CUSTOM, cur.ok = true, cur.n_stages = g->n_stages;
            cur.imb_time = pp_imbalance(g, 0), cur.imb_flops = pp_imbalance(g, 1), cur.imb_memory = pp_imbalance(g, 2);
            for (int s = 0; s < g->n_stages && s <= PP_MAX_SPLITS; s++) {
                const pp_stage_info *si = &g->stage_info[s];
                cur.first[s] = si->first, cur.est_ms[s] = si->est_ms, cur.memory[s] = si->memory;
                cur.bottleneck_ms = fmax(cur.bottleneck_ms, si->est_ms);
                if (si->memory > cur.max_memory) cur.max_memory = si->memory;
                if (s < g->n_stages - 1) cur.cut_bytes += g->bounds[s].bytes;
            }
            R = &cur;
        }
        bool mine = R->policy == o->policy;
        fprintf(f, "<tr data-policy=\"%s\"%s><td>%s%s</td>", pp_policy_name(R->policy), mine ? " class=\"mine\"" : "",
                pp_policy_name(R->policy), mine ? " (this split)" : "");
        if (!R->ok) {
            fprintf(f, "<td colspan=\"7\" class=\"why\">");
            esc(f, R->why);
            fprintf(f, "</td></tr>\n");
            continue;
        }
        char hb[32], hc[32];
        fprintf(f, "<td class=\"num\">%.3f ms</td><td class=\"num\">%.3f</td><td class=\"num\">%.3f</td>"
                   "<td class=\"num\">%.3f</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td><div class=\"mini\">",
                R->bottleneck_ms, R->imb_time, R->imb_flops, R->imb_memory, human((double)R->max_memory, hb, sizeof hb),
                human((double)R->cut_bytes, hc, sizeof hc));
        for (int s = 0; s < R->n_stages && s <= PP_MAX_SPLITS; s++)
            fprintf(f, "<span class=\"s%d\" style=\"height:%.0f%%\" title=\"stage %d: %.3f ms\"></span>", s % 12,
                    tmax > 0 ? 100 * R->est_ms[s] / tmax : 0, s, R->est_ms[s]);
        fprintf(f, "</div></td></tr>\n<tr class=\"cutrow%s\"><td colspan=\"8\" class=\"names\">cuts before ",
                mine ? " mine" : "");
        for (int s = 1; s < R->n_stages && s <= PP_MAX_SPLITS; s++) {
            fprintf(f, "%s", s > 1 ? ", " : "");
            node_link(f, g, R->first[s]);
        }
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</tbody></table>\n<p class=\"note\">Each policy split the same graph into %d stages under the same "
               "caps and target figures; the bottleneck is the slowest stage's estimated time, which bounds the "
               "pipeline's rate. <code>params</code> splits top-level modules, as ColossalAI's balanced policy "
               "does.</p>\n", g->n_stages);
}

static void cut_table(FILE *f, const pp_graph *g) {
    fprintf(f, "<table id=\"cut-table\"><thead><tr><th>cut</th><th>tensor</th><th>type</th><th>shape</th>"
               "<th>bytes</th><th>made in</th></tr></thead><tbody>\n");
    for (int b = 0; b < g->n_stages - 1; b++)
        for (int k = 0; k < g->bounds[b].n; k++) {
            const pp_value *v = &g->values[g->bounds[b].vals[k]];
            char sh[96], hb[32];
            fprintf(f, "<tr data-cut=\"%d\" data-tensor=\"", b);
            esc(f, v->name);
            fprintf(f, "\"><td>%d &rarr; %d</td><td class=\"names\">", b, b + 1);
            if (v->producer >= 0) fprintf(f, "<a href=\"#n%d\" class=\"goto\">", v->producer);
            esc(f, v->name);
            fprintf(f, "%s</td><td>%s</td><td>%s</td><td class=\"num\">%s</td><td>%s", v->producer >= 0 ? "</a>" : "",
                    pp_dtype_name(v->dtype), pp_shape_str(&v->shape, sh, sizeof sh),
                    human((double)v->nbytes, hb, sizeof hb), v->producer >= 0 ? "stage " : "model input");
            if (v->producer >= 0) fprintf(f, "%d", g->nodes[v->producer].stage);
            fprintf(f, "</td></tr>\n");
        }
    fprintf(f, "</tbody></table>\n");
}

/* The module paths as a JSON array inside a <script> block: printed by cJSON, with '<', '>' and '&'
 * (which JSON text holds only inside its strings) as \u escapes, so no name can end the block. */
static pp_status modules_json(FILE *f, const groups *G, pp_err *err) {
    pp_json j;
    cJSON *paths = pp_json_begin_array(&j);
    for (int i = 0; i < G->n; i++) pp_json_add_string(&j, paths, NULL, G->g[i].path);
    char *text = pp_json_print(&j, false, "the HTML report's module list", err);
    if (!text) return PP_ENOMEM;
    for (const char *c = text; *c; c++)
        if (*c == '<' || *c == '>' || *c == '&') fprintf(f, "\\u%04x", (unsigned)*c);
        else fputc(*c, f);
    cJSON_free(text);
    return PP_OK;
}

/* ---- the page ---------------------------------------------------------------------------------- */

pp_status pp_report_html(const char *path, const pp_graph *g, const pp_compile_opts *o, const char *model,
                         const char *options, const pp_policy_row *rows, int n_rows, pp_err *err) {
    pp_layout L;
    PP_TRY(pp_layout_graph(g, NODE_W, &L, err));
    groups G = {0};
    pp_status s = build_groups(g, &L, &G, err);
    pp_outfile out;
    if (s == PP_OK) s = pp_outfile_open(&out, path, err);
    if (s != PP_OK) {
        free(G.g), free(G.node_groups);
        pp_layout_free(&L);
        return s;
    }
    FILE *f = out.f;
    /* the model's file with its directory ("resnet50/model.onnx"): exporters name every file model.onnx */
    const char *base = model;
    for (const char *c = model, *prev = NULL; *c; c++)
        if (*c == '/' && c[1]) {
            if (prev) base = prev + 1;
            prev = c;
        }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
               "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n<title>ppcc: ");
    esc(f, base);
    fprintf(f, " in %d stage%s</title>\n<style>\n%s</style></head>\n<body>\n<div id=\"side\">\n<h1>", g->n_stages,
            g->n_stages == 1 ? "" : "s", pp_report_css);
    esc(f, base);
    fprintf(f, " <span>in <b id=\"n-stages\">%d</b> stage%s</span></h1>\n<p class=\"meta\">", g->n_stages,
            g->n_stages == 1 ? "" : "s");
    esc(f, model);
    fprintf(f, "<br>policy <b id=\"policy\">%s</b>, micro-batch %lld, %d ops after the passes, opset %d; target "
               "%g GFLOP/s, %g GB/s memory, %g GB/s link<br>options: <code>",
            pp_policy_name(o->policy), (long long)pp_report_batch(g), g->n_nodes, g->opset, o->target.gflops, o->target.mem_gbps,
            o->target.link_gbps);
    esc(f, options);
    size_t arena = 0;
    for (int st = 0; st < g->n_stages; st++) arena += g->stage_arena[st];
    int n_rec = 0;
    for (int i = 0; i < g->n_nodes; i++) n_rec += g->nodes[i].recovered;
    double p = g->n_stages, m = o->micro_batches;
    fprintf(f, "</code></p>\n<p class=\"figures\">imbalance (max/mean): time <b>%.3f</b>, FLOPs <b>%.3f</b>, memory "
               "<b>%.3f</b> &middot; bubble %.1f%% (estimated for %d micro-batches) &middot; activation arenas %.1f%% "
               "of all activations &middot; %d recovered op%s</p>\n",
            pp_imbalance(g, 0), pp_imbalance(g, 1), pp_imbalance(g, 2), 100 * (p - 1) / (m + p - 1), o->micro_batches,
            g->act_total ? 100.0 * (double)arena / (double)g->act_total : 0, n_rec, n_rec == 1 ? "" : "s");
    fprintf(f, "<h2>Stages</h2>\n");
    stage_table(f, g, o);
    fprintf(f, "<h2>The policies compared</h2>\n");
    policy_table(f, g, o, rows, n_rows);
    fprintf(f, "<h2>Cuts</h2>\n");
    cut_table(f, g);
    fprintf(f, "<h2>Recovered ops</h2>\n<p class=\"note\">Ops outside every module the split names (written as "
               "functions in <code>forward()</code>), which a module-level split loses; here each runs in the "
               "stage the data flow gives it.</p>\n<ul id=\"recovered\">");
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].recovered) {
            fprintf(f, "<li><a href=\"#n%d\" class=\"goto\">", i);
            esc(f, g->nodes[i].name);
            fprintf(f, "</a> %s &rarr; stage %d</li>\n", pp_op_table[g->nodes[i].op].name, g->nodes[i].stage);
        }
    fprintf(f, "</ul>\n</div>\n<div id=\"main\">\n<div class=\"toolbar\"><input id=\"search\" type=\"search\" "
               "placeholder=\"find a node or module\" autocomplete=\"off\"> <span id=\"hits\"></span> "
               "<button id=\"fold-all\">collapse</button><button id=\"unfold-all\">expand</button> "
               "<button id=\"zoom-out\">&minus;</button><button id=\"zoom-in\">+</button><span class=\"legend\">");
    for (int st = 0; st < g->n_stages && st < 48; st++) fprintf(f, "<span class=\"sw s%d\"></span>%d ", st % 12, st);
    fprintf(f, "<span class=\"cutkey\"></span>cut <span class=\"reckey\"></span>recovered</span></div>\n"
               "<div id=\"view\">\n");
    write_svg(f, g, &L, &G);
    fprintf(f, "</div></div>\n<script id=\"modules\" type=\"application/json\">");
    s = modules_json(f, &G, err);
    fprintf(f, "</script>\n<script>\n%s</script>\n</body></html>\n", pp_report_js);
    free(G.g), free(G.node_groups);
    pp_layout_free(&L);
    pp_status c = pp_outfile_commit(&out, s == PP_OK && !ferror(f), err);
    return s != PP_OK ? s : c;
}
