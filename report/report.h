/* report.h: what ppcc shows of a split (report/): the text table and its
 * JSON (report.c), the HTML page (report_html.c, its script and style
 * embedded at build time) with its graph drawing (layout.c) and the other
 * policies' splits of the same graph (compare.c). Not passes: they read a
 * staged graph and change nothing in it (compare.c splits again and
 * restores it). */
#ifndef PP_REPORT_H
#define PP_REPORT_H

#include "../passes/passes.h"

/* The per-stage table, imbalance, bubble estimate, recovered ops and the
 * tensors crossing each cut (pp_report_print), and the same as JSON
 * ("format": "ppcc-report", PP_REPORT_JSON_VERSION). */
void pp_report_print(FILE *f, const pp_graph *g, const pp_compile_opts *o);
/* The micro-batch the report names: g->batch, or a training graph's rows. */
int64_t pp_report_batch(const pp_graph *g);
pp_status pp_report_json(const char *path, const pp_graph *g, const pp_compile_opts *o,
                         pp_err *err);

/* ---- the HTML report (report_html.c, layout.c, compare.c) ---------------------------------- */

/* max/mean over the stages of their estimated time (what 0), FLOPs (1) or
 * memory (2); 1.0 for one stage or all zeros. */
double pp_imbalance(const pp_graph *g, int what);

/* One policy's split of the same graph and -pp (pp_compare_policies). */
typedef struct pp_policy_row {
    pp_policy policy;
    bool ok;
    char why[512];             /* !ok: the error that policy gave */
    int n_stages;
    double bottleneck_ms;      /* the slowest stage's estimated time */
    double imb_time, imb_flops, imb_memory;
    size_t max_memory;         /* the largest stage's memory */
    size_t cut_bytes;          /* all boundaries' bytes per micro-batch */
    int first[PP_MAX_SPLITS + 1];        /* first node of each stage */
    double est_ms[PP_MAX_SPLITS + 1];
    size_t memory[PP_MAX_SPLITS + 1];
} pp_policy_row;
#define PP_N_COMPARED 5 /* auto, uniform, params, flops, memory */
/* Split g under each of the PP_N_COMPARED policies with o's stage count,
 * caps and target, keep the figures in rows[], then split it again under o
 * itself, which gives back the same staged graph. */
pp_status pp_compare_policies(pp_graph *g, const pp_compile_opts *o, pp_policy_row *rows, int *n_rows,
                              pp_err *err);

/* A layered top-to-bottom drawing of the staged graph (layout.c). */
enum { PP_LAYOUT_NODE, PP_LAYOUT_INPUT, PP_LAYOUT_OUTPUT, PP_LAYOUT_DUMMY };
typedef struct pp_layout_item {
    int kind;   /* PP_LAYOUT_* */
    int ref;    /* node index (NODE), else value index */
    int layer;  /* 0 at the top */
    int order;  /* position within its layer, left to right */
    double x;   /* centre, >= w/2 */
    double w;   /* width (0 for a dummy: a bend of an edge) */
} pp_layout_item;
typedef struct pp_layout_edge {
    int value;     /* the value it carries */
    int src, dst;  /* items: its producer (node or input), its consumer (node or output) */
    int first, n;  /* its points: items path[first .. first+n), src first, dst last */
} pp_layout_edge;
typedef struct pp_layout {
    int n_items, n_real; /* items: nodes, graph inputs, graph outputs (n_real), then dummies */
    pp_layout_item *items;
    int n_edges;
    pp_layout_edge *edges;
    int *path;
    int n_layers;
    double width;
    long crossings;      /* edge crossings left between adjacent layers */
} pp_layout;
pp_status pp_layout_graph(const pp_graph *g, double node_w, pp_layout *L, pp_err *err);
void pp_layout_free(pp_layout *L);

/* The HTML report: one self-contained page (no network, inline SVG and a
 * little JavaScript): the laid-out graph coloured by stage with the cuts,
 * recovered ops and module scopes; per-stage bars; the policies compared.
 * model and options are shown as given. */
pp_status pp_report_html(const char *path, const pp_graph *g, const pp_compile_opts *o, const char *model,
                         const char *options, const pp_policy_row *rows, int n_rows, pp_err *err);

#endif
