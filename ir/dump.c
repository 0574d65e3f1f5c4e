/* dump.c: the IR as text, one line per op, stable and diffable (the same
 * graph always prints the same text; no pointers, no times). The format is
 * documented in docs/ir.md; golden tests compare it byte for byte. */
#include <stdio.h>
#include <string.h>

#include "ir.h"

static void dump_value(FILE *f, const pp_graph *g, int v) {
    char sh[128];
    const pp_value *val = &g->values[v];
    fprintf(f, "%s:%s%s", val->name, pp_dtype_name(val->dtype), pp_shape_str(&val->shape, sh, sizeof sh));
}

static void dump_attr(FILE *f, const pp_attr *a) {
    fprintf(f, " %s=", a->name);
    switch (a->type) {
    case PP_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case PP_ATTR_FLOAT: fprintf(f, "%g", (double)a->f); break;
    case PP_ATTR_STRING: fprintf(f, "\"%s\"", a->s); break;
    case PP_ATTR_INTS:
        fputc('[', f);
        for (int k = 0; k < a->n; k++) fprintf(f, "%s%lld", k ? "," : "", (long long)a->ints[k]);
        fputc(']', f);
        break;
    case PP_ATTR_FLOATS:
        fputc('[', f);
        for (int k = 0; k < a->n; k++) fprintf(f, "%s%g", k ? "," : "", (double)a->floats[k]);
        fputc(']', f);
        break;
    case PP_ATTR_STRINGS:
        fputc('[', f);
        for (int k = 0; k < a->n; k++) fprintf(f, "%s\"%s\"", k ? "," : "", a->strs[k]);
        fputc(']', f);
        break;
    case PP_ATTR_TENSOR: {
        char sh[128];
        fprintf(f, "<%s%s>", pp_dtype_name(a->t_dtype), pp_shape_str(&a->t_shape, sh, sizeof sh));
        break;
    }
    case PP_ATTR_GRAPH: {
        const pp_subgraph *sg = a->graph;
        fprintf(f, "<graph: %d ops, %d inputs, %d outputs>", sg->n_nodes, sg->n_in, sg->n_out);
        break;
    }
    }
}

void pp_dump_ir(FILE *f, const pp_graph *g, const char *title) {
    size_t cbytes = 0;
    int nconst = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_const && g->values[v].n_uses > 0) cbytes += g->values[v].nbytes, nconst++;
    fprintf(f, "# ir %s: %d ops, %d stage%s, %d constants (%zu bytes), opset %d, batch %lld%s%s\n",
            title ? title : "", g->n_nodes, g->n_stages ? g->n_stages : 1,
            g->n_stages > 1 ? "s" : "", nconst, cbytes, g->opset, (long long)g->batch,
            g->precision ? ", precision " : "", g->precision == 1 ? "bf16" : g->precision == 2 ? "fp16" : "");
    for (int k = 0; k < g->n_inputs; k++) {
        fprintf(f, "input ");
        dump_value(f, g, g->inputs[k]);
        fputc('\n', f);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        /* sNW: a node of stage N's W part (ppcc --train --schedule zb-h1) */
        fprintf(f, "%%%d s%d%s %s ", i, n->stage < 0 ? 0 : n->stage, n->wpass ? "W" : "", pp_op_table[n->op].name);
        for (int k = 0; k < n->n_out; k++) {
            if (k) fputs(", ", f);
            dump_value(f, g, n->out[k]);
        }
        fputs(" <- ", f);
        for (int k = 0; k < n->n_in; k++) {
            if (k) fputs(", ", f);
            if (n->in[k] < 0) fputs("_", f);
            else if (g->values[n->in[k]].is_const) fprintf(f, "$%s", g->values[n->in[k]].name);
            else fputs(g->values[n->in[k]].name, f);
        }
        fputs(" |", f);
        for (int k = 0; k < n->n_attrs; k++) dump_attr(f, &n->attrs[k]);
        fprintf(f, " | scope=%s params=%zu flops=%.0f name=%s",
                n->n_scope ? n->scope[n->n_scope - 1] : "-", pp_node_param_bytes(g, n), n->cost.flops,
                n->name);
        if (n->fold_skipped > 0) fprintf(f, " unfolded=%.3g-ops-over-budget", n->fold_skipped);
        fputc('\n', f);
    }
    for (int k = 0; k < g->n_outputs; k++) {
        fprintf(f, "output ");
        dump_value(f, g, g->outputs[k]);
        fputc('\n', f);
    }
}
