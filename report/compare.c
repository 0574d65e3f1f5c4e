/* compare.c: what the other policies would make of the same graph and -pp,
 * for the HTML report (ppcc --report-html): each of uniform, params, flops,
 * memory and auto is run through the same partition, boundary, memory-plan
 * and stage-cost passes as the real split, its figures kept (bottleneck
 * time, imbalances, largest stage memory, bytes crossing the cuts, where it
 * cut), and the graph is then split again under the options given, which
 * gives back exactly the staged graph it had (every pass involved is a
 * deterministic function of the graph and the options). */
#include <stdlib.h>
#include <string.h>

#include "report.h"

static void drop_split(pp_graph *g) {
    if (g->bounds)
        for (int b = 0; b < g->n_stages - 1; b++) free(g->bounds[b].vals);
    free(g->bounds);
    g->bounds = NULL;
}

static pp_status split(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    drop_split(g);
    PP_TRY(pp_partition(g, o, err));
    PP_TRY(pp_boundaries(g, err));
    PP_TRY(pp_memplan(g, err));
    return pp_stage_costs(g, o, err);
}

double pp_imbalance(const pp_graph *g, int what) {
    double mx = 0, sum = 0;
    for (int s = 0; s < g->n_stages; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        double v = what == 0 ? si->est_ms : what == 1 ? si->flops : (double)si->memory;
        sum += v;
        if (v > mx) mx = v;
    }
    return sum > 0 ? mx / (sum / g->n_stages) : 1.0;
}

static void keep(const pp_graph *g, pp_policy_row *r) {
    r->ok = true;
    r->n_stages = g->n_stages;
    r->imb_time = pp_imbalance(g, 0);
    r->imb_flops = pp_imbalance(g, 1);
    r->imb_memory = pp_imbalance(g, 2);
    for (int s = 0; s < g->n_stages && s < PP_MAX_SPLITS + 1; s++) {
        const pp_stage_info *si = &g->stage_info[s];
        r->first[s] = si->first;
        r->est_ms[s] = si->est_ms;
        r->memory[s] = si->memory;
        if (si->est_ms > r->bottleneck_ms) r->bottleneck_ms = si->est_ms;
        if (si->memory > r->max_memory) r->max_memory = si->memory;
        if (s < g->n_stages - 1) r->cut_bytes += g->bounds[s].bytes;
    }
}

pp_status pp_compare_policies(pp_graph *g, const pp_compile_opts *o, pp_policy_row *rows, int *n_rows,
                              pp_err *err) {
    static const pp_policy order[] = {PP_POLICY_AUTO, PP_POLICY_UNIFORM, PP_POLICY_PARAMS, PP_POLICY_FLOPS,
                                      PP_POLICY_MEMORY};
    int p = g->n_stages;
    *n_rows = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        pp_policy_row *r = &rows[(*n_rows)++];
        memset(r, 0, sizeof *r);
        r->policy = order[k];
        pp_compile_opts c = *o;
        c.policy = order[k];
        c.n_stages = p;
        c.n_split_at = 0;
        c.exec_seq = NULL;
        c.dump_ir = NULL;
        c.dump_dot = NULL;
        pp_err e = {0};
        pp_status s = split(g, &c, &e);
        if (s == PP_ENOMEM) return PP_FAIL(err, s, "%s", e.msg);
        if (s != PP_OK) {
            /* the graph is split again below; keep the reason */
            snprintf(r->why, sizeof r->why, "%s", e.msg);
            g->n_stages = p;
            continue;
        }
        keep(g, r);
    }
    /* back to the split the options asked for */
    pp_status s = split(g, o, err);
    if (s != PP_OK) return s;
    if (g->n_stages != p) return PP_FAIL(err, PP_ERUNTIME, "internal: the split changed from %d to %d stages", p,
                                         g->n_stages);
    return pp_graph_verify(g, err);
}
