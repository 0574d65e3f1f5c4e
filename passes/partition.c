/* partition.c: assign every node to a stage.
 *
 * Stages are contiguous ranges of the topological node order, so every node
 * lands in exactly one stage, none is lost or duplicated, and data only flows
 * forward. The policies choose where to cut:
 *
 *   uniform  equal op counts
 *   params   equal parameter bytes, over top-level modules (what ColossalAI's
 *            "balanced" policy does with its layer list)
 *   flops    equal FLOPs
 *   memory   equal estimated memory (weights + activations + boundary buffers)
 *   auto     minimal bottleneck time: roofline compute plus sending the
 *            boundary, under the per-stage memory caps
 *   custom   cuts before named modules (--split-at, --exec-seq)
 *
 * All but custom are min-max problems over a sequence of units (ops, or
 * modules for params), solved exactly by dynamic programming in
 * O(stages x units^2) range evaluations; each range cost is O(1) from prefix
 * sums and a sparse table (docs/partitioning.md has the argument). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

const char *pp_policy_name(pp_policy p) {
    switch (p) {
    case PP_POLICY_AUTO: return "auto";
    case PP_POLICY_UNIFORM: return "uniform";
    case PP_POLICY_PARAMS: return "params";
    case PP_POLICY_FLOPS: return "flops";
    case PP_POLICY_MEMORY: return "memory";
    case PP_POLICY_CUSTOM: return "custom";
    }
    return "?";
}

bool pp_policy_parse(const char *s, pp_policy *out) {
    for (int p = PP_POLICY_AUTO; p <= PP_POLICY_CUSTOM; p++)
        if (strcmp(s, pp_policy_name((pp_policy)p)) == 0) {
            *out = (pp_policy)p;
            return true;
        }
    return false;
}

void pp_compile_opts_init(pp_compile_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_stages = 1;
    o->policy = PP_POLICY_AUTO;
    o->verify_each = true;
    o->depth = 2;
    o->micro_batches = 8;
    /* one core of a current server CPU running the reference kernels, and a
     * memcpy between threads; override with --gflops/--mem-gbps/--link-gbps */
    o->target = (pp_target){.gflops = 25.0, .mem_gbps = 10.0, .link_gbps = 10.0};
    o->place_all.device = -1;
    for (int k = 0; k <= PP_MAX_SPLITS; k++) o->place[k].device = -1;
}

pp_place pp_stage_place(const pp_compile_opts *o, int s) {
    if (s >= 0 && s <= PP_MAX_SPLITS && o->place[s].backend[0]) return o->place[s];
    return o->place_all;
}

pp_target pp_stage_target(const pp_compile_opts *o, int s) {
    pp_target t = o->target;
    const pp_place pl = pp_stage_place(o, s);
    if (!strncmp(pl.backend, "cuda", 4)) {
        /* one data-centre GPU in f32 without TF32, rough: calibrate with
         * pprt --profile on the device (docs/partitioning.md) */
        const pp_target gpu = {.gflops = 20000, .mem_gbps = 1500, .link_gbps = 20};
        if (!(o->target_set & 1)) t.gflops = gpu.gflops;
        if (!(o->target_set & 2)) t.mem_gbps = gpu.mem_gbps;
        if (!(o->target_set & 4)) t.link_gbps = gpu.link_gbps;
    }
    if (s >= 0 && s <= PP_MAX_SPLITS) {
        const pp_target *st = &o->stage_target[s];
        if (o->stage_set[s] & 1) t.gflops = st->gflops;
        if (o->stage_set[s] & 2) t.mem_gbps = st->mem_gbps;
        if (o->stage_set[s] & 4) t.link_gbps = st->link_gbps;
    }
    return t;
}

double pp_node_time(const pp_node *n, const pp_target *t) {
    if (n->prof_s >= 0) return n->prof_s; /* measured by pprt --profile */
    double c = n->cost.flops / (t->gflops * 1e9), m = n->cost.bytes / (t->mem_gbps * 1e9);
    return c > m ? c : m;
}

/* ---- exact min-max split ------------------------------------------------------------- */

double pp_minmax_split(int n, int p, pp_range_cost cost, void *ctx, int *cuts) {
    if (p < 1 || n < p) return -1;
    double *best = malloc(sizeof(double) * (size_t)p * (size_t)n);
    int *arg = malloc(sizeof(int) * (size_t)p * (size_t)n);
    if (!best || !arg) {
        free(best);
        free(arg);
        return -1;
    }
#define BEST(k, j) best[(size_t)(k) * (size_t)n + (size_t)(j)]
#define ARG(k, j) arg[(size_t)(k) * (size_t)n + (size_t)(j)]
    for (int j = 0; j < n; j++) {
        BEST(0, j) = cost(ctx, 0, j, 0);
        ARG(0, j) = -1;
    }
    for (int k = 1; k < p; k++)
        for (int j = 0; j < n; j++) {
            BEST(k, j) = -1;
            ARG(k, j) = -1;
            if (j < k) continue; /* every stage needs a unit */
            for (int i = k - 1; i < j; i++) { /* stage k is units i+1..j */
                double prev = BEST(k - 1, i);
                if (prev < 0) continue;
                double c = cost(ctx, i + 1, j, k);
                if (c < 0) continue;
                double v = prev > c ? prev : c;
                if (BEST(k, j) < 0 || v < BEST(k, j)) {
                    BEST(k, j) = v;
                    ARG(k, j) = i;
                }
            }
        }
    double res = BEST(p - 1, n - 1);
    if (res >= 0 && cuts) {
        int j = n - 1;
        for (int k = p - 1; k > 0; k--) {
            int i = ARG(k, j);
            cuts[k - 1] = i + 1;
            j = i;
        }
    }
#undef BEST
#undef ARG
    free(best);
    free(arg);
    return res;
}

/* ---- units and their prefix sums --------------------------------------------------------- */

typedef struct {
    const pp_graph *g;
    const pp_compile_opts *o;
    pp_policy policy;
    int n;           /* units */
    int *first;      /* unit -> first node; first[n] = n_nodes */
    double *ops, *params, *flops; /* prefix sums over units, n+1 entries */
    int n_time;      /* stages priced (-pp) */
    double **time;   /* per stage: prefix sums of its estimated times (stages with the same
                      * figures share one array) */
    double *link;    /* per stage: its link's bytes per second */
    double *cut;     /* cut[j]: bytes crossing after unit j (j = n-1: graph outputs) */
    double in_bytes; /* graph inputs: what stage 0 receives */
    double *live;    /* per unit: peak live activation bytes (approximate arena) */
    double *sparse;  /* sparse table for range max of live[], log levels x n */
    int levels;
} units;

static double range_max(const units *u, int i, int j) {
    int len = j - i + 1, k = 0;
    while ((2 << k) <= len) k++;
    size_t w = (size_t)u->n + 1; /* row width of the sparse table */
    double a = u->sparse[(size_t)k * w + (size_t)i];
    double b = u->sparse[(size_t)k * w + (size_t)(j - (1 << k) + 1)];
    return a > b ? a : b;
}

static size_t stage_cap(const pp_compile_opts *o, int stage) {
    for (int k = 0; k < o->n_caps; k++)
        if (o->cap_stage[k] == stage) return o->cap_bytes[k];
    return o->cap_all;
}

/* Estimated memory of units i..j as one stage. */
static double range_memory(const units *u, int i, int j) {
    double recv = i == 0 ? u->in_bytes : u->cut[i - 1];
    return (u->params[j + 1] - u->params[i]) + range_max(u, i, j) +
           (double)u->o->depth * (recv + u->cut[j]);
}

/* For the diagnosis of caps that cannot be met: memory over cap. */
static double range_cap_ratio(void *ctx, int i, int j, int stage) {
    const units *u = ctx;
    size_t cap = stage_cap(u->o, stage);
    return cap ? range_memory(u, i, j) / (double)cap : 0;
}

static double range_cost(void *ctx, int i, int j, int stage) {
    const units *u = ctx;
    size_t cap = stage_cap(u->o, stage);
    if (cap && range_memory(u, i, j) > (double)cap) return -1;
    switch (u->policy) {
    case PP_POLICY_UNIFORM: return u->ops[j + 1] - u->ops[i];
    case PP_POLICY_PARAMS: return u->params[j + 1] - u->params[i];
    case PP_POLICY_FLOPS: return u->flops[j + 1] - u->flops[i];
    case PP_POLICY_MEMORY: return range_memory(u, i, j);
    default: /* auto */
        return (u->time[stage][j + 1] - u->time[stage][i]) + u->cut[j] / u->link[stage];
    }
}

static void units_free(units *u) {
    free(u->first);
    free(u->ops);
    free(u->params);
    free(u->flops);
    for (int s = 0; u->time && s < u->n_time; s++) {
        bool shared = false;
        for (int r = 0; r < s; r++) shared = shared || u->time[r] == u->time[s];
        if (!shared) free(u->time[s]);
    }
    free(u->time);
    free(u->link);
    free(u->cut);
    free(u->live);
    free(u->sparse);
    memset(u, 0, sizeof *u); /* idempotent */
}

/* Units: one per node or fusion chain (glued, see pp_fusion_chains), except
 * for `params` on a scoped model, where consecutive nodes of the same
 * top-level module form one unit. */
/* Prefix sums of the units' estimated times on each of the p stages'
 * targets (one array per distinct target). */
static pp_status units_times(const pp_graph *g, const pp_compile_opts *o, int p, units *u, pp_err *err) {
    u->n_time = p;
    u->time = calloc((size_t)p, sizeof *u->time);
    u->link = calloc((size_t)p, sizeof *u->link);
    if (!u->time || !u->link) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int s = 0; s < p; s++) {
        const pp_target t = pp_stage_target(o, s);
        u->link[s] = t.link_gbps * 1e9;
        for (int r = 0; r < s && !u->time[s]; r++) {
            const pp_target q = pp_stage_target(o, r);
            if (q.gflops == t.gflops && q.mem_gbps == t.mem_gbps) u->time[s] = u->time[r];
        }
        if (u->time[s]) continue;
        double *pre = calloc((size_t)u->n + 1, sizeof *pre);
        if (!pre) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        u->time[s] = pre;
        for (int k = 0; k < u->n; k++) {
            double tk = 0;
            for (int i = u->first[k]; i < u->first[k + 1]; i++) tk += pp_node_time(&g->nodes[i], &t);
            pre[k + 1] = pre[k] + tk;
        }
    }
    return PP_OK;
}

static pp_status units_build(const pp_graph *g, const pp_compile_opts *o, pp_policy policy, const bool *glued,
                             int p, units *u, pp_err *err) {
    memset(u, 0, sizeof *u);
    u->g = g;
    u->o = o;
    u->policy = policy;
    size_t nn = pp_count(g->n_nodes) + 1;
    u->first = malloc(sizeof(int) * nn);
    if (!u->first) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *a = &g->nodes[i], *b = i ? &g->nodes[i - 1] : NULL;
        bool same = glued[i] || (policy == PP_POLICY_PARAMS && b && a->n_scope > 0 && b->n_scope > 0 &&
                                 strcmp(a->scope[0], b->scope[0]) == 0);
        if (!same) u->first[u->n++] = i;
    }
    u->first[u->n] = g->n_nodes;
    size_t n1 = (size_t)u->n + 1;
    u->ops = calloc(n1, sizeof(double));
    u->params = calloc(n1, sizeof(double));
    u->flops = calloc(n1, sizeof(double));
    u->cut = calloc(n1, sizeof(double));
    u->live = calloc(n1, sizeof(double));
    int levels = 1;
    while ((1 << levels) <= u->n) levels++;
    u->levels = levels;
    u->sparse = malloc(sizeof(double) * (size_t)levels * n1);
    int *unit_of = malloc(sizeof(int) * nn);
    double *cutn = calloc(n1 + 1, sizeof(double)); /* difference array over cuts -1 .. n-1 */
    double *liven = calloc(nn + 1, sizeof(double));
    int *lastuse = malloc(sizeof(int) * pp_count(g->n_values));
    if (!u->ops || !u->params || !u->flops || !u->cut || !u->live || !u->sparse ||
        !unit_of || !cutn || !liven || !lastuse) {
        free(unit_of), free(cutn), free(liven), free(lastuse);
        units_free(u);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int k = 0; k < u->n; k++)
        for (int i = u->first[k]; i < u->first[k + 1]; i++) unit_of[i] = k;
    for (int k = 0; k < u->n; k++) {
        double ops = 0, par = 0, fl = 0;
        for (int i = u->first[k]; i < u->first[k + 1]; i++) {
            const pp_node *nd = &g->nodes[i];
            ops += 1;
            par += (double)pp_node_param_bytes(g, nd);
            fl += nd->cost.flops;
        }
        u->ops[k + 1] = u->ops[k] + ops;
        u->params[k + 1] = u->params[k] + par;
        u->flops[k + 1] = u->flops[k] + fl;
    }
    /* liveness: a value is alive from its producer (-1: graph input) to its
     * last consumer (n_nodes: graph output) */
    for (int v = 0; v < g->n_values; v++) lastuse[v] = -2;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) lastuse[g->nodes[i].in[k]] = i;
    for (int k = 0; k < g->n_outputs; k++) lastuse[g->outputs[k]] = g->n_nodes;
    for (int k = 0; k < g->n_inputs; k++) u->in_bytes += (double)g->values[g->inputs[k]].nbytes;
    for (int v = 0; v < g->n_values; v++) {
        const pp_value *val = &g->values[v];
        if (val->is_const || lastuse[v] == -2) continue;
        int d = val->producer; /* -1 for graph inputs */
        int e = lastuse[v];
        /* crossing the cut after unit j: produced in a unit <= j, used in a unit > j */
        int du = d < 0 ? -1 : unit_of[d];
        int eu = e >= g->n_nodes ? u->n : unit_of[e];
        if (eu > du) { /* crosses the cuts after units du .. eu-1 (du = -1: before unit 0) */
            cutn[du + 1] += (double)val->nbytes;
            cutn[eu + 1] -= (double)val->nbytes;
        }
        if (d >= 0) { /* activations only: inputs live in messages */
            int end = e >= g->n_nodes ? g->n_nodes - 1 : e;
            liven[d] += (double)val->nbytes;
            liven[end + 1] -= (double)val->nbytes;
        }
    }
    double run = cutn[0];
    for (int j = 0; j < u->n; j++) {
        run += cutn[j + 1];
        u->cut[j] = run;
    }
    run = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        run += liven[i];
        int k = unit_of[i];
        if (run > u->live[k]) u->live[k] = run;
    }
    for (int k = 0; k < u->n; k++) u->sparse[k] = u->live[k];
    for (int l = 1; l < levels; l++)
        for (int k = 0; k + (1 << l) <= u->n; k++) {
            double a = u->sparse[(size_t)(l - 1) * n1 + (size_t)k];
            double b = u->sparse[(size_t)(l - 1) * n1 + (size_t)(k + (1 << (l - 1)))];
            u->sparse[(size_t)l * n1 + (size_t)k] = a > b ? a : b;
        }
    free(unit_of), free(cutn), free(liven), free(lastuse);
    return units_times(g, o, p, u, err);
}

/* ---- custom splits ------------------------------------------------------------------------ */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Cut positions (node indices) for --split-at. */
static pp_status cuts_split_at(pp_graph *g, const pp_compile_opts *o, int *cuts, int *n_cuts,
                               pp_err *err) {
    char hint[512];
    for (int k = 0; k < o->n_split_at; k++) {
        int first = pp_module_first_node(g, o->split_at[k], hint, sizeof hint);
        if (first < 0)
            return PP_FAIL(err, PP_EINVAL, "--split-at: no module '%s' in the model; closest: %s",
                           o->split_at[k], hint);
        if (first == 0)
            return PP_FAIL(err, PP_EINVAL,
                           "--split-at %s: the module starts at the first op, so the stage "
                           "before it would be empty", o->split_at[k]);
        cuts[k] = first;
    }
    *n_cuts = o->n_split_at;
    qsort(cuts, (size_t)*n_cuts, sizeof *cuts, cmp_int);
    for (int k = 1; k < *n_cuts; k++)
        if (cuts[k] == cuts[k - 1])
            return PP_FAIL(err, PP_EINVAL, "--split-at: two split points cut at node '%s': a "
                           "stage would be empty", g->nodes[cuts[k]].name);
    return PP_OK;
}

/* One entry of an exec_seq file: a module name, SPLIT_NODE, or nothing
 * (blank, comment, bracket, a lambda, which ppcc does not need: it recovers
 * functional ops itself). Accepts plain lines or a pasted Python list. */
static const char *seq_token(char *line, bool *is_lambda) {
    *is_lambda = strstr(line, "lambda") != NULL;
    if (*is_lambda) return NULL;
    char *h = strchr(line, '#');
    if (h) *h = 0;
    char *q = strpbrk(line, "\"'");
    char *s;
    if (q) {
        char *e = strchr(q + 1, *q);
        if (!e) return NULL;
        *e = 0;
        s = q + 1;
    } else {
        s = line;
        while (*s && (isspace((unsigned char)*s) || *s == '[' || *s == ',')) s++;
        char *e = s + strlen(s);
        while (e > s && (isspace((unsigned char)e[-1]) || e[-1] == ',' || e[-1] == ']')) *--e = 0;
        if (strchr(s, '=') || strchr(s, '(')) return NULL; /* "exec_seq = [" and the like */
    }
    return *s ? s : NULL;
}

static pp_status cuts_exec_seq(pp_graph *g, const char *path, int *cuts, int *n_cuts, pp_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) return PP_FAIL(err, PP_EIO, "--exec-seq: cannot open '%s': %s", path, strerror(errno));
    char line[1024], hint[512];
    int lineno = 0, listed = 0, prev_first = -1;
    bool pending_split = false;
    pp_status s = PP_OK;
    *n_cuts = 0;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].recovered = true;
    while (s == PP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        bool lambda;
        const char *tok = seq_token(line, &lambda);
        if (!tok) continue;
        if (!strcmp(tok, "SPLIT_NODE")) {
            pending_split = true;
            continue;
        }
        int first = pp_module_first_node(g, tok, hint, sizeof hint);
        if (first < 0) {
            s = PP_FAIL(err, PP_EINVAL, "%s:%d: no module '%s' in the model; closest: %s", path,
                        lineno, tok, hint);
            break;
        }
        for (int i = 0; i < g->n_nodes; i++)
            if (pp_node_in_module(&g->nodes[i], tok)) g->nodes[i].recovered = false;
        if (pending_split && listed > 0) {
            if (*n_cuts == PP_MAX_SPLITS) {
                s = PP_FAIL(err, PP_EUNSUP, "%s: more than %d SPLIT_NODE entries", path, PP_MAX_SPLITS);
                break;
            }
            if (first <= (*n_cuts ? cuts[*n_cuts - 1] : 0) || first <= prev_first) {
                s = PP_FAIL(err, PP_EINVAL,
                            "%s:%d: SPLIT_NODE before '%s' does not cut forward: that module "
                            "runs before what the list puts ahead of it (the graph's order "
                            "decides, see ppcc --report)", path, lineno, tok);
                break;
            }
            cuts[(*n_cuts)++] = first;
        }
        pending_split = false;
        prev_first = first;
        listed++;
    }
    fclose(f);
    if (s == PP_OK && listed == 0)
        s = PP_FAIL(err, PP_EINVAL, "%s: lists no module", path);
    return s;
}

/* ---- entry point -------------------------------------------------------------------------- */

static bool has_scopes(const pp_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_scope) return true;
    return false;
}

/* A custom cut before a glued node moves on to the end of its chain (the
 * chain's nodes stay with its head), so that a split never cuts a chain. */
static pp_status snap_cuts(const pp_graph *g, const bool *glued, int *cuts, int n_cuts, pp_err *err) {
    for (int k = 0; k < n_cuts; k++) {
        while (cuts[k] < g->n_nodes && glued[cuts[k]]) cuts[k]++;
        if (cuts[k] >= g->n_nodes || (k && cuts[k] <= cuts[k - 1]))
            return PP_FAIL(err, PP_EINVAL,
                           "split point %d falls inside a chain of ops that run as one kernel (from '%s'), and "
                           "moving it past the chain leaves a stage empty",
                           k + 1, g->nodes[cuts[k] < g->n_nodes ? cuts[k] - 1 : g->n_nodes - 1].name);
    }
    return PP_OK;
}

static pp_status partition_glued(pp_graph *g, const pp_compile_opts *o, const bool *glued, pp_err *err);

pp_status pp_partition(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    bool *glued = malloc(pp_count(g->n_nodes) * sizeof *glued);
    if (!glued) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = pp_fusion_chains(g, glued, err);
    if (s == PP_OK) s = partition_glued(g, o, glued, err);
    free(glued);
    return s;
}

static pp_status partition_glued(pp_graph *g, const pp_compile_opts *o, const bool *glued, pp_err *err) {
    int p = o->n_stages;
    int cuts[PP_MAX_SPLITS];
    int n_cuts = 0;
    bool scoped = has_scopes(g);
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].recovered = scoped && g->nodes[i].n_scope == 0;
    if (o->policy == PP_POLICY_CUSTOM) {
        if (o->exec_seq && o->n_split_at)
            return PP_FAIL(err, PP_EINVAL, "give --split-at or --exec-seq, not both");
        if (o->exec_seq) PP_TRY(cuts_exec_seq(g, o->exec_seq, cuts, &n_cuts, err));
        else if (o->n_split_at) PP_TRY(cuts_split_at(g, o, cuts, &n_cuts, err));
        else return PP_FAIL(err, PP_EINVAL, "--policy custom needs --split-at or --exec-seq");
        PP_TRY(snap_cuts(g, glued, cuts, n_cuts, err));
        if (p > 1 && p != n_cuts + 1)
            return PP_FAIL(err, PP_EINVAL, "-pp %d disagrees with the custom split, which makes %d stages",
                           p, n_cuts + 1);
        p = n_cuts + 1;
    } else {
        if (p < 1) return PP_FAIL(err, PP_EINVAL, "-pp must be at least 1, got %d", p);
        if (p > g->n_nodes)
            return PP_FAIL(err, PP_EINVAL,
                           "-pp %d asks for more stages than the graph has ops (%d): a stage would "
                           "be empty", p, g->n_nodes);
        units u;
        pp_status us = units_build(g, o, o->policy, glued, p, &u, err);
        if (us != PP_OK) {
            units_free(&u);
            return us;
        }
        if (p > u.n) {
            units_free(&u);
            if (o->policy == PP_POLICY_PARAMS)
                return PP_FAIL(err, PP_EINVAL,
                               "-pp %d asks for more stages than the params policy has units (%d top-level "
                               "modules and glue ops); use another policy or fewer stages", p, u.n);
            return PP_FAIL(err, PP_EINVAL,
                           "-pp %d asks for more stages than the graph can be cut into (%d units: its %d ops, "
                           "each chain of ops that run as one kernel counted once): a stage would be empty",
                           p, u.n, g->n_nodes);
        }
        int ucuts[PP_MAX_SPLITS];
        if (p - 1 > PP_MAX_SPLITS) {
            units_free(&u);
            return PP_FAIL(err, PP_EUNSUP, "at most %d stages", PP_MAX_SPLITS + 1);
        }
        double best = pp_minmax_split(u.n, p, range_cost, &u, ucuts);
        if (best < 0) {
            /* nothing fits: name the stage that overflows most in the split
             * that comes closest (smallest largest memory-to-cap ratio) */
            pp_minmax_split(u.n, p, range_cap_ratio, &u, ucuts);
            int worst = 0;
            double worst_r = -1, worst_mem = 0;
            for (int s = 0; s < p; s++) {
                int i = s ? ucuts[s - 1] : 0, j = s < p - 1 ? ucuts[s] - 1 : u.n - 1;
                double r = range_cap_ratio(&u, i, j, s);
                if (r > worst_r) worst_r = r, worst = s, worst_mem = range_memory(&u, i, j);
            }
            double cap = (double)stage_cap(o, worst);
            pp_status s = PP_FAIL(err, PP_EINVAL,
                                  "no split into %d stages fits the memory caps: even the closest "
                                  "split gives stage %d an estimated %.1f MB against its cap of "
                                  "%.1f MB (over by %.1f MB)",
                                  p, worst, worst_mem / 1e6, cap / 1e6, (worst_mem - cap) / 1e6);
            units_free(&u);
            return s;
        }
        for (int k = 0; k < p - 1; k++) cuts[k] = u.first[ucuts[k]];
        n_cuts = p - 1;
        units_free(&u);
    }
    for (int s = p; s <= PP_MAX_SPLITS; s++)
        if (o->place[s].backend[0] || o->stage_set[s])
            return PP_FAIL(err, PP_EINVAL, "%s names stage %d, but the split has %d stage%s (0..%d)",
                           o->place[s].backend[0] ? "--placement" : "a per-stage --gflops/--mem-gbps/--link-gbps", s,
                           p, p == 1 ? "" : "s", p - 1);
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        while (k < n_cuts && i >= cuts[k]) k++;
        g->nodes[i].stage = k;
        g->nodes[i].chain = glued[i];
    }
    g->n_stages = p;
    return PP_OK;
}
