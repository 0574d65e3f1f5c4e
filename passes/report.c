/* report.c: the human-readable account of a split: one row per stage with its
 * ops, parameters, work, memory and what it hands on. */
#include <stdio.h>
#include <string.h>

#include "passes.h"

void pp_report_print(FILE *f, const pp_graph *g) {
    fprintf(f, "%-5s %5s %10s %10s %10s %12s  %s\n", "stage", "ops", "params_MB", "GFLOPs",
            "arena_MB", "send_MB", "first node .. last node");
    for (int s = 0; s < g->n_stages; s++) {
        int ops = 0, first = -1, last = -1;
        double flops = 0;
        size_t params = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const pp_node *n = &g->nodes[i];
            if (n->stage != s) continue;
            ops++;
            if (first < 0) first = i;
            last = i;
            flops += n->cost.flops;
            params += pp_node_param_bytes(g, n);
        }
        size_t send = 0;
        if (s < g->n_stages - 1) send = g->bounds[s].bytes;
        else
            for (int k = 0; k < g->n_outputs; k++) send += g->values[g->outputs[k]].nbytes;
        fprintf(f, "%-5d %5d %10.3f %10.4f %10.3f %12.4f  %s .. %s\n", s, ops, params / 1e6,
                flops / 1e9, g->stage_arena[s] / 1e6, send / 1e6,
                first >= 0 ? g->nodes[first].name : "-", last >= 0 ? g->nodes[last].name : "-");
    }
    for (int b = 0; b < g->n_stages - 1; b++) {
        fprintf(f, "cut %d -> %d:", b, b + 1);
        for (int k = 0; k < g->bounds[b].n; k++) {
            char sh[96];
            const pp_value *v = &g->values[g->bounds[b].vals[k]];
            fprintf(f, " %s%s", v->name, pp_shape_str(&v->shape, sh, sizeof sh));
        }
        fputc('\n', f);
    }
}
