/* report.c: the account of a split, for people (--report) and for machines
 * (--report-json): one row per stage with its ops, parameters, work, memory,
 * what it hands on and its estimated time; the imbalance ratios; the
 * estimated pipeline bubble; the recovered ops; the tensors crossing each cut. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "../ir/json.h"

typedef struct {
    double time, flops, memory;
} imbalance;

static imbalance imbalances(const pp_graph *g) {
    return (imbalance){pp_imbalance(g, 0), pp_imbalance(g, 1), pp_imbalance(g, 2)};
}

/* GPipe-style fill and drain: (p-1)/(m+p-1) of the time is idle. */
static double bubble(int p, int m) { return m > 0 ? (double)(p - 1) / (double)(m + p - 1) : 0; }

static size_t arena_sum(const pp_graph *g) {
    size_t a = 0;
    for (int s = 0; s < g->n_stages; s++) a += g->stage_arena[s];
    return a;
}

/* Nodes whose time the cost model took from a profile (--profile, --measure). */
static int measured_ops(const pp_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].prof_s >= 0;
    return n;
}

/* The micro-batch: a training graph runs on whole tensors (its own batch
 * is 0), whose rows are the first input's first dimension (-b). */
int64_t pp_report_batch(const pp_graph *g) {
    if (g->batch > 0 || !g->train_devices || g->n_inputs < 1) return g->batch;
    const pp_shape *s = &g->values[g->inputs[0]].shape;
    return s->rank > 0 ? s->dim[0] : g->batch;
}

/* A training plan's devices: each one's memory (passes/train_memory.c says
 * what is counted) under 1F1B and GPipe. */
static void report_devices(FILE *f, const pp_graph *g, const pp_compile_opts *o) {
    const int P = g->train_devices, M = o->micro_batches;
    char od[512];
    pp_optim_describe(&g->optim, od, sizeof od);
    fprintf(f, "optimizer: %s\n", od);
    char what[512];
    pp_train_memory_describe(o, what, sizeof what);
    fprintf(f, "training: %d device%s; per device (MB): weights (the plan's), their state, arenas, stash per "
               "micro-batch and the micro-batches 1F1B keeps, messages and totals under 1F1B / GPipe (%d "
               "micro-batches); totals count %s\n", P, P == 1 ? "" : "s", M, what);
    fprintf(f, "%-6s %7s %10s %9s %9s %11s %12s %12s %10s %10s %10s\n", "device", "stages", "weights", "arenas",
            "stash", "1F1B_keeps", "1F1B_total", "GPipe_total", "msgs_1F1B", "msgs_GPipe", "state");
    for (int d = 0; d < P; d++) {
        pp_train_mem m;
        pp_train_memory(g, o, d, &m);
        const bool rc = pp_train_recomputes(&o->train, d);
        fprintf(f, "%-6d %3d+%-3d %10.3f %9.3f %9.3f %11d %12.3f %12.3f %10.3f %10.3f %10.3f%s\n", d, d,
                2 * P - 1 - d, m.weights / 1e6, m.arenas / 1e6, m.stash / 1e6, m.keep_1f1b, m.total_1f1b / 1e6,
                m.total_gpipe / 1e6, m.msgs_1f1b / 1e6, m.msgs_gpipe / 1e6, m.state / 1e6, rc ? "  (recomputes its forward: the stash is what it received)" : "");
    }
}

/* --schedule zb-h1: each backward stage's B (input gradients, on the chain) and W (weight gradients, a
 * stage of its own that pprt defers), and what B keeps for W per micro-batch until W ran. */
static void report_w(FILE *f, const pp_graph *g) {
    const int P = g->train_devices;
    fprintf(f, "zb-h1: per device, its backward split into B (input gradients, on the chain) and W (weight "
               "gradients, stage %d+d, off it); kept for W: MB a micro-batch from B until W ran\n", 2 * P);
    fprintf(f, "%-6s %7s %7s %9s %7s %9s %12s\n", "device", "stages", "B_ops", "B_GFLOPs", "W_ops", "W_GFLOPs",
            "kept_for_W");
    for (int d = 0; d < P; d++) {
        int nb = 0, nw = 0;
        double fb = 0, fw = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const pp_node *n = &g->nodes[i];
            if (n->stage != 2 * P - 1 - d) continue;
            if (n->wpass) nw++, fw += n->cost.flops;
            else nb++, fb += n->cost.flops;
        }
        char st[32];
        snprintf(st, sizeof st, "%d+%d", 2 * P - 1 - d, 2 * P + d);
        fprintf(f, "%-6d %7s %7d %9.4f %7d %9.4f %12.3f\n", d, st, nb, fb / 1e9, nw, fw / 1e9,
                g->wkeep ? (double)g->wkeep[d].bytes / 1e6 : 0);
    }
}

void pp_report_print(FILE *f, const pp_graph *g, const pp_compile_opts *o) {
    fprintf(f, "policy %s, %d stage%s, micro-batch %lld; target %.0f GFLOP/s, %.0f GB/s memory, "
               "%.0f GB/s link\n",
            pp_policy_name(o->policy), g->n_stages, g->n_stages == 1 ? "" : "s",
            (long long)pp_report_batch(g), o->target.gflops, o->target.mem_gbps, o->target.link_gbps);
    if (g->precision && !g->train_devices)
        fprintf(f, "precision %s: the products and the values between them stored in %s (inputs and outputs f32; "
                "the sizes below count it)\n", pp_precision_name(g->precision), pp_precision_name(g->precision));
    const int measured = measured_ops(g);
    if (measured)
        fprintf(f, "op times: %d of %d ops measured (--profile or --measure), the rest estimated at the target's "
                "rates\n", measured, g->n_nodes);
    fprintf(f, "%-5s %5s %10s %9s %12s %10s %9s %8s  %s\n", "stage", "ops", "params_MB", "GFLOPs",
            "peak_act_MB", "memory_MB", "send_MB", "est_ms", "first node .. last node");
    for (int s = 0; s < g->n_stages; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        fprintf(f, "%-5d %5d %10.3f %9.4f %12.3f %10.3f %9.4f %8.3f  %s .. %s\n", s, si->ops,
                si->params / 1e6, si->flops / 1e9, si->arena / 1e6, si->memory / 1e6,
                si->send / 1e6, si->est_ms, si->first < 0 ? "(no node)" : g->nodes[si->first].name,
                si->last < 0 ? "(no node)" : g->nodes[si->last].name);
    }
    imbalance im = imbalances(g);
    fprintf(f, "imbalance (max/mean): time %.3f, FLOPs %.3f, memory %.3f\n", im.time, im.flops,
            im.memory);
    fprintf(f, "bubble (estimated for %d micro-batches): %.1f%%\n", o->micro_batches,
            100 * bubble(g->n_stages, o->micro_batches));
    size_t arena = arena_sum(g);
    fprintf(f, "activation arenas: %.3f MB for %.3f MB of activations (%.0f%%)\n", arena / 1e6,
            g->act_total / 1e6, g->act_total ? 100.0 * (double)arena / (double)g->act_total : 0);
    if (g->train_devices) report_devices(f, g, o);
    if (g->train_split_w) report_w(f, g);
    int n_rec = 0;
    for (int i = 0; i < g->n_nodes; i++) n_rec += g->nodes[i].recovered;
    fprintf(f, "recovered ops (outside every module named by the split): %d\n", n_rec);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].recovered)
            fprintf(f, "  %-40s %-18s -> stage %d\n", g->nodes[i].name, pp_op_table[g->nodes[i].op].name,
                    g->nodes[i].stage);
    for (int b = 0; b < g->n_stages - 1; b++) {
        fprintf(f, "cut %d -> %d (%.4f MB):", b, b + 1, g->bounds[b].bytes / 1e6);
        for (int k = 0; k < g->bounds[b].n; k++) {
            char sh[96];
            const pp_value *v = &g->values[g->bounds[b].vals[k]];
            fprintf(f, " %s%s", v->name, pp_shape_str(&v->shape, sh, sizeof sh));
        }
        fputc('\n', f);
    }
}


pp_status pp_report_json(const char *path, const pp_graph *g, const pp_compile_opts *o,
                         pp_err *err) {
    pp_json j;
    cJSON *root = pp_json_begin_format(&j, "ppcc-report", PP_REPORT_JSON_VERSION);
    pp_json_add_string(&j, root, "policy", pp_policy_name(o->policy));
    pp_json_add_number(&j, root, "micro_batch", (double)pp_report_batch(g));
    pp_json_add_number(&j, root, "measured_ops", measured_ops(g));
    if (g->precision && !g->train_devices) /* a half plan's (ppcc --precision without --train) */
        pp_json_add_string(&j, root, "precision", pp_precision_name(g->precision));
    cJSON *stages = pp_json_add_array(&j, root, "stages");
    for (int s = 0; s < g->n_stages; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        cJSON *st = pp_json_add_object(&j, stages, NULL);
        pp_json_add_number(&j, st, "index", s);
        pp_json_add_number(&j, st, "ops", si->ops);
        pp_json_add_number(&j, st, "params_bytes", (double)si->params);
        pp_json_add_round(&j, st, "flops", si->flops, 0);
        pp_json_add_number(&j, st, "peak_activation_bytes", (double)si->arena);
        pp_json_add_number(&j, st, "memory_bytes", (double)si->memory);
        pp_json_add_number(&j, st, "boundary_out_bytes", s < g->n_stages - 1 ? (double)g->bounds[s].bytes : 0);
        pp_json_add_round(&j, st, "est_time_ms", si->est_ms, 6);
        /* a stage may hold no node (--train --policy memory: device 0's backward, where its forward needs none) */
        pp_json_add_string(&j, st, "first_node", si->first < 0 ? "" : g->nodes[si->first].name);
        pp_json_add_string(&j, st, "last_node", si->last < 0 ? "" : g->nodes[si->last].name);
    }
    imbalance im = imbalances(g);
    cJSON *imb = pp_json_add_object(&j, root, "imbalance");
    pp_json_add_round(&j, imb, "time", im.time, 6);
    pp_json_add_round(&j, imb, "flops", im.flops, 6);
    pp_json_add_round(&j, imb, "memory", im.memory, 6);
    cJSON *bub = pp_json_add_object(&j, root, "bubble");
    pp_json_add_number(&j, bub, "micro_batches", o->micro_batches);
    pp_json_add_round(&j, bub, "estimated", bubble(g->n_stages, o->micro_batches), 6);
    cJSON *act = pp_json_add_object(&j, root, "activation_bytes");
    pp_json_add_number(&j, act, "arenas", (double)arena_sum(g));
    pp_json_add_number(&j, act, "total", (double)g->act_total);
    cJSON *rec = pp_json_add_array(&j, root, "recovered_ops");
    for (int i = 0; i < g->n_nodes; i++) {
        if (!g->nodes[i].recovered) continue;
        cJSON *r = pp_json_add_object(&j, rec, NULL);
        pp_json_add_string(&j, r, "name", g->nodes[i].name);
        pp_json_add_string(&j, r, "op", pp_op_table[g->nodes[i].op].name);
        pp_json_add_number(&j, r, "stage", g->nodes[i].stage);
    }
    cJSON *cuts = pp_json_add_array(&j, root, "cuts");
    for (int b = 0; b < g->n_stages - 1; b++) {
        cJSON *c = pp_json_add_object(&j, cuts, NULL);
        pp_json_add_number(&j, c, "from", b);
        pp_json_add_number(&j, c, "to", b + 1);
        pp_json_add_number(&j, c, "bytes", (double)g->bounds[b].bytes);
        cJSON *ts = pp_json_add_array(&j, c, "tensors");
        for (int t = 0; t < g->bounds[b].n; t++) {
            const pp_value *v = &g->values[g->bounds[b].vals[t]];
            pp_json_add_tensor(&j, ts, v->name, v->dtype, &v->shape, v->nbytes);
        }
    }
    return pp_json_write(&j, path, true, err);
}

/* ---- Graphviz ----------------------------------------------------------------------------- */


pp_status pp_dump_dot(const char *path, const pp_graph *g, pp_err *err) {
    pp_outfile out;
    PP_TRY(pp_outfile_open(&out, path, err));
    FILE *f = out.f;
    fprintf(f, "digraph ppcc {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n");
    for (int s = 0; s < g->n_stages; s++) {
        fprintf(f, "  subgraph cluster_%d {\n    label=\"stage %d\";\n", s, s);
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].stage == s) {
                fprintf(f, "    n%d [label=", i);
                char lab[768];
                snprintf(lab, sizeof lab, "%s\\n%s", pp_op_table[g->nodes[i].op].name, g->nodes[i].name);
                fputc('"', f);
                for (const char *c = lab; *c; c++) {
                    if (*c == '"') fputc('\\', f);
                    fputc(*c, f);
                }
                fprintf(f, "\"%s];\n", g->nodes[i].recovered ? ", style=dashed" : "");
            }
        fprintf(f, "  }\n");
    }
    for (int k = 0; k < g->n_inputs; k++) {
        fprintf(f, "  ");
        pp_json_str(f, g->values[g->inputs[k]].name);
        fprintf(f, " [shape=ellipse];\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k];
            if (v < 0 || g->values[v].is_const) continue;
            int p = g->values[v].producer;
            bool crossing = p < 0 ? nd->stage > 0 : g->nodes[p].stage != nd->stage;
            char sh[96];
            fprintf(f, "  ");
            if (p < 0) pp_json_str(f, g->values[v].name);
            else fprintf(f, "n%d", p);
            fprintf(f, " -> n%d [label=\"%s\"%s];\n", i, pp_shape_str(&g->values[v].shape, sh, sizeof sh),
                    crossing ? ", color=red, penwidth=2" : "");
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k], p = g->values[v].producer;
        fprintf(f, "  ");
        pp_json_str(f, g->values[v].name);
        fprintf(f, " [shape=ellipse];\n  ");
        if (p < 0) pp_json_str(f, g->values[v].name);
        else fprintf(f, "n%d", p);
        fprintf(f, " -> ");
        pp_json_str(f, g->values[v].name);
        fprintf(f, ";\n");
    }
    fprintf(f, "}\n");
    return pp_outfile_commit(&out, true, err);
}
