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
 * modules for params), solved exactly: by the DP's recurrence evaluated in
 * O(stages x units x log units) where a range's cost only shrinks with it (no
 * caps: pp_minmax_split_mono), else, past dp_max_units units, by probes of
 * "can every stage cost at most B?" in O(stages x units x log units) each,
 * bisected to the exact optimum (minmax_capped); small ones by the plain DP
 * in O(stages x units^2). Each range cost is O(1) from prefix sums and a
 * sparse table (docs/partitioning.md has the argument). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
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
    o->dp_max_units = 2048;
    o->replicas = 1;
    o->samples = 256;
    pp_optim_init(&o->train.optim);
    /* one core of a current server CPU on oneDNN (100 GFLOP/s against 10
     * GB/s: the pair that split the CI zoo's models best by their measured
     * op times on an Intel Xeon and an AMD EPYC, docs/partitioning.md), a
     * memcpy between threads, and 10 Gbit/s Ethernet between hosts;
     * override with --gflops/--mem-gbps/--link-gbps/--net-gbps */
    o->target = (pp_target){.gflops = 100.0, .mem_gbps = 10.0, .link_gbps = 10.0, .net_gbps = 1.25};
    o->place_all.device = -1;
    for (int k = 0; k <= PP_MAX_SPLITS; k++) o->place[k].device = -1;
}

pp_place pp_stage_place(const pp_compile_opts *o, int s) {
    if (s >= 0 && s <= PP_MAX_SPLITS && o->place[s].backend[0]) return o->place[s];
    return o->place_all;
}

int pp_stage_other_backend(const pp_compile_opts *o, int n) {
    const char *b0 = pp_stage_place(o, 0).backend;
    for (int s = 1; s < n && s <= PP_MAX_SPLITS; s++)
        if (strcmp(pp_stage_place(o, s).backend, b0) != 0) return s;
    return 0;
}

pp_target pp_stage_target(const pp_compile_opts *o, int s) {
    pp_target t = o->target;
    const pp_place pl = pp_stage_place(o, s);
    const pp_backend_kind *kind = pp_backend_kind_of(pl.backend);
    if (kind && kind->device) { /* the device's roofline (ir/base.c), where the command line gave none */
        if (!(o->target_set & 1)) t.gflops = kind->gflops;
        if (!(o->target_set & 2)) t.mem_gbps = kind->mem_gbps;
        if (!(o->target_set & 4)) t.link_gbps = kind->link_gbps;
    }
    if (s >= 0 && s <= PP_MAX_SPLITS) {
        const pp_target *st = &o->stage_target[s];
        if (o->stage_set[s] & 1) t.gflops = st->gflops;
        if (o->stage_set[s] & 2) t.mem_gbps = st->mem_gbps;
        if (o->stage_set[s] & 4) t.link_gbps = st->link_gbps;
    }
    return t;
}

/* The bandwidth of the cut after stage `cut`: the network's where it
 * crosses hosts (--devices-per-host, in any replica), else the sending
 * stage's link (its target's, which its placement may set). */
double pp_cut_link_gbps(const pp_compile_opts *o, int stages, int cut) {
    int k = o->target.devices_per_host, reps = o->replicas > 0 ? o->replicas : 1;
    if (k > 0 && cut >= 0 && cut < stages - 1)
        for (int r = 0; r < reps; r++) {
            long d = (long)r * stages + cut; /* the sending stage's device; the receiver is d + 1 */
            if (d / k != (d + 1) / k) return o->target.net_gbps;
        }
    return pp_stage_target(o, cut).link_gbps;
}

double pp_node_time(const pp_node *n, const pp_target *t) {
    if (n->prof_s >= 0) return n->prof_s + n->update_s; /* measured by pprt --profile */
    double c = n->cost.flops / (t->gflops * 1e9), m = n->cost.bytes / (t->mem_gbps * 1e9);
    return (c > m ? c : m) + n->update_s;
}

/* ---- exact min-max split ------------------------------------------------------------- */

/* The cuts of an optimal split from the DP's back-pointers: arg[k n + j] is
 * the last unit of stage k-1 when stage k ends at unit j. */
static void cuts_from_args(const int *arg, int n, int p, int *cuts) {
    int j = n - 1;
    for (int k = p - 1; k > 0; k--) {
        int i = arg[(size_t)k * (size_t)n + (size_t)j];
        cuts[k - 1] = i + 1;
        j = i;
    }
}

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
    if (res >= 0 && cuts) cuts_from_args(arg, n, p, cuts);
#undef BEST
#undef ARG
    free(best);
    free(arg);
    return res;
}

/* ---- the same, near-linear, for costs that shrink with the range -------------------------- */

/* Index of the first b[i] <= v with i >= from in the min-tree t over b
 * (leaves at [size, 2 size)), or -1. */
static int first_at_most(const double *t, int size, int node, int lo, int hi, int from, double v) {
    if (hi <= from || t[node] > v) return -1;
    if (hi - lo == 1) return lo;
    int mid = (lo + hi) / 2;
    int r = first_at_most(t, size, 2 * node, lo, mid, from, v);
    return r >= 0 ? r : first_at_most(t, size, 2 * node + 1, mid, hi, from, v);
}

/* Row k of the DP from row k-1 (b), for j = k..n-1:
 *   B[k][j] = min over i in [k-1, j-1] of max(b[i], c(i+1, j, k)).
 * With c nonincreasing in i, an i is never better than a later i' with
 * b[i'] <= b[i]: the candidates left form a stack along which b rises and c
 * falls, so max(b, c) falls then rises and one binary search finds its
 * minimum v. The DP takes the first i reaching v: the first i with
 * c(i+1, j, k) <= v (a binary search, c being monotone) and, from there, the
 * first with b[i] <= v (a descent in a min-tree over b). Both use the very
 * floating-point values the DP compares, so the results are identical. */
double pp_minmax_split_mono(int n, int p, pp_range_cost cost, void *ctx, int *cuts) {
    if (p < 1 || n < p) return -1;
    int size = 1;
    while (size < n) size *= 2;
    double *best = malloc(sizeof(double) * (size_t)p * (size_t)n);
    int *arg = malloc(sizeof(int) * (size_t)p * (size_t)n);
    int *stk = malloc(sizeof(int) * (size_t)n);
    double *tree = malloc(sizeof(double) * 2 * (size_t)size);
    double res = -1;
    if (!best || !arg || !stk || !tree) goto out;
#define BEST(k, j) best[(size_t)(k) * (size_t)n + (size_t)(j)]
#define ARG(k, j) arg[(size_t)(k) * (size_t)n + (size_t)(j)]
    for (int j = 0; j < n; j++) {
        BEST(0, j) = cost(ctx, 0, j, 0);
        ARG(0, j) = -1;
    }
    for (int k = 1; k < p; k++) {
        const double *b = &BEST(k - 1, 0);
        for (int i = 0; i < size; i++) tree[size + i] = i >= k - 1 && i < n ? b[i] : INFINITY;
        for (int i = size - 1; i >= 1; i--) tree[i] = fmin(tree[2 * i], tree[2 * i + 1]);
        for (int j = 0; j < k; j++) BEST(k, j) = -1, ARG(k, j) = -1;
        int top = 0;
        for (int j = k; j < n; j++) {
            int i = j - 1; /* a new candidate: stage k is unit j alone */
            while (top > 0 && b[stk[top - 1]] >= b[i]) top--;
            stk[top++] = i;
            int lo = 0, hi = top; /* first stack entry where b >= c */
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (b[stk[mid]] >= cost(ctx, stk[mid] + 1, j, k)) hi = mid;
                else lo = mid + 1;
            }
            double v = lo < top ? b[stk[lo]] : INFINITY;
            if (lo > 0) {
                double c = cost(ctx, stk[lo - 1] + 1, j, k);
                if (c < v) v = c;
            }
            int a = k - 1, z = j - 1; /* first i with c(i+1, j, k) <= v */
            while (a < z) {
                int mid = (a + z) / 2;
                if (cost(ctx, mid + 1, j, k) <= v) z = mid;
                else a = mid + 1;
            }
            BEST(k, j) = v;
            ARG(k, j) = first_at_most(tree, size, 1, 0, size, a, v);
        }
    }
    res = BEST(p - 1, n - 1);
    if (res >= 0 && cuts) cuts_from_args(arg, n, p, cuts);
#undef BEST
#undef ARG
out:
    free(best);
    free(arg);
    free(stk);
    free(tree);
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

size_t pp_stage_cap(const pp_compile_opts *o, int stage) {
    size_t cap = o->cap_all;
    for (int k = 0; k < o->n_caps; k++)
        if (o->cap_stage[k] == stage) cap = o->cap_bytes[k];
    if (!cap) return 0;
    return cap > o->reserve ? cap - o->reserve : 1;
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
    size_t cap = pp_stage_cap(u->o, stage);
    return cap ? range_memory(u, i, j) / (double)cap : 0;
}

/* The policy's cost of units i..j, caps aside. */
static double range_obj(const units *u, int i, int j, int stage) {
    switch (u->policy) {
    case PP_POLICY_UNIFORM: return u->ops[j + 1] - u->ops[i];
    case PP_POLICY_PARAMS: return u->params[j + 1] - u->params[i];
    case PP_POLICY_FLOPS: return u->flops[j + 1] - u->flops[i];
    case PP_POLICY_MEMORY: return range_memory(u, i, j);
    default: /* auto */
        return (u->time[stage][j + 1] - u->time[stage][i]) + u->cut[j] / u->link[stage];
    }
}

static double range_cost(void *ctx, int i, int j, int stage) {
    const units *u = ctx;
    size_t cap = pp_stage_cap(u->o, stage);
    if (cap && range_memory(u, i, j) > (double)cap) return -1;
    return range_obj(u, i, j, stage);
}

/* The same without the caps (a lower bound on the capped optimum). */
static double range_cost_free(void *ctx, int i, int j, int stage) {
    return range_obj(ctx, i, j, stage);
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
        u->link[s] = pp_cut_link_gbps(o, p, s) * 1e9;
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

/* ---- min-max under memory caps (and the memory policy) in O(p n log n) per probe ---------- */

/* With caps, or with the memory policy, a range's cost includes what it
 * receives (the bytes crossing the cut before it), so a shorter range can
 * cost more and pp_minmax_split_mono does not apply. Instead: is there a
 * split whose every stage costs at most B and fits its cap? For stage k
 * ending at unit e, the starts s that qualify are those with
 *     obj(s, e) <= B                     (s >= lo: obj shrinks with the range,
 *                                          except for the memory policy)
 *     F(s) + max(live[s..e]) <= G(e)     (the memory estimate within X)
 * where F(s) = depth * recv(s) - params[s] and G(e) = X - params[e+1] -
 * depth * cut[e], X the cap (or floor(B) for the memory policy): every term
 * is a whole number of bytes, so this rearrangement of range_memory is exact.
 * A sweep over e keeps F(s) + max(live[s..e]) for every start s whose
 * previous stage can end at s - 1 in a segment tree (range add, range min):
 * the running maxima form a stack of blocks, and each block that a new
 * unit's live bytes overtake is raised by a range add. The smallest B that
 * passes is found by bisection: over whole bytes for the memory policy, over
 * the ordered bit patterns of doubles for the others (at most 64 probes, each
 * exact), starting from the uncapped optimum, often already feasible. */
typedef struct {
    int size;
    double *min, *add;
    int *arg;
} seg_tree;

static void seg_pull(seg_tree *t, int x) {
    int l = 2 * x, r = 2 * x + 1;
    bool left = t->min[l] <= t->min[r];
    t->min[x] = (left ? t->min[l] : t->min[r]) + t->add[x];
    t->arg[x] = left ? t->arg[l] : t->arg[r];
}

static void seg_range_add(seg_tree *t, int x, int lo, int hi, int a, int b, double v) {
    if (b <= lo || hi <= a) return;
    if (a <= lo && hi <= b) {
        t->min[x] += v, t->add[x] += v;
        return;
    }
    int mid = (lo + hi) / 2;
    seg_range_add(t, 2 * x, lo, mid, a, b, v);
    seg_range_add(t, 2 * x + 1, mid, hi, a, b, v);
    seg_pull(t, x);
}

/* Leaf i becomes v (the pending adds above it are taken off first). */
static void seg_set(seg_tree *t, int i, double v) {
    int x = t->size + i;
    double above = 0;
    for (int y = x / 2; y >= 1; y /= 2) above += t->add[y];
    t->min[x] = v - above;
    for (x /= 2; x >= 1; x /= 2) seg_pull(t, x);
}

static void seg_min(const seg_tree *t, int x, int lo, int hi, int a, int b, double acc, double *best, int *arg) {
    if (b <= lo || hi <= a || t->min[x] + acc >= *best) return;
    if (a <= lo && hi <= b) {
        *best = t->min[x] + acc, *arg = t->arg[x];
        return;
    }
    int mid = (lo + hi) / 2;
    acc += t->add[x];
    seg_min(t, 2 * x, lo, mid, a, b, acc, best, arg);
    seg_min(t, 2 * x + 1, mid, hi, a, b, acc, best, arg);
}

typedef struct {
    const units *u;
    int p;
    bool ratio;     /* the diagnosis: X = ratio * cap, no objective */
    seg_tree t;
    double *F;      /* per start */
    unsigned char *reach; /* p x n: stages 0..k can end at e */
    int *arg;       /* p x n: the start of stage k ending at e */
    int *stk_at;    /* the running-maximum blocks: first start, value */
    double *stk_v;
} probe_ctx;

/* Can units 0..n-1 be split with every stage's cost <= b (and within its cap)? */
static bool probe(probe_ctx *c, double b) {
    const units *u = c->u;
    const int n = u->n, p = c->p;
    const bool mem_obj = u->policy == PP_POLICY_MEMORY && !c->ratio;
    for (int e = 0; e < n; e++) {
        double v = c->ratio ? 0 : range_cost((void *)u, 0, e, 0);
        size_t cap = pp_stage_cap(u->o, 0);
        bool ok = c->ratio ? !cap || range_memory(u, 0, e) <= floor(b * (double)cap) : v >= 0 && v <= b;
        c->reach[e] = ok;
        c->arg[e] = 0;
    }
    for (int k = 1; k < p; k++) {
        const unsigned char *prev = c->reach + (size_t)(k - 1) * (size_t)n;
        unsigned char *cur = c->reach + (size_t)k * (size_t)n;
        int *arg = c->arg + (size_t)k * (size_t)n;
        size_t cap = pp_stage_cap(u->o, k);
        double x = c->ratio ? (cap ? floor(b * (double)cap) : INFINITY)
                            : mem_obj ? fmin(floor(b), cap ? (double)cap : INFINITY) : cap ? (double)cap : INFINITY;
        for (int i = 0; i < 2 * c->t.size; i++) c->t.min[i] = INFINITY, c->t.add[i] = 0;
        for (int i = 0; i < c->t.size; i++) c->t.arg[c->t.size + i] = i;
        int top = 0;
        for (int e = 0; e < n; e++) {
            cur[e] = 0;
            /* max(live[s..e]) for every earlier s: raise the blocks live[e] overtakes */
            int from = e;
            while (top > 0 && c->stk_v[top - 1] <= u->live[e]) {
                top--;
                if (c->stk_v[top] < u->live[e])
                    seg_range_add(&c->t, 1, 0, c->t.size, c->stk_at[top], from, u->live[e] - c->stk_v[top]);
                from = c->stk_at[top];
            }
            c->stk_at[top] = from, c->stk_v[top++] = u->live[e];
            if (e >= k && prev[e - 1]) seg_set(&c->t, e, c->F[e] + u->live[e]);
            if (e < k) continue;
            int lo = k;
            if (!mem_obj && !c->ratio) { /* the objective shrinks as s grows: the first s within b */
                if (range_obj(u, e, e, k) > b) continue;
                int z = e;
                while (lo < z) {
                    int mid = (lo + z) / 2;
                    if (range_obj(u, mid, e, k) <= b) z = mid;
                    else lo = mid + 1;
                }
            }
            double best = INFINITY;
            int at = -1;
            seg_min(&c->t, 1, 0, c->t.size, lo, e + 1, 0, &best, &at);
            double g = x - u->params[e + 1] - (double)u->o->depth * u->cut[e];
            if (best < INFINITY && best <= g) cur[e] = 1, arg[e] = at;
        }
    }
    return c->reach[(size_t)(p - 1) * (size_t)n + (size_t)(n - 1)];
}

/* The split the last passing probe found: its bottleneck (range_cost of the
 * worst stage, or range_cap_ratio for the diagnosis), and its cuts. */
static double probed_split(const probe_ctx *c, int *cuts) {
    const int n = c->u->n;
    double worst = 0;
    for (int k = c->p - 1, e = n - 1; k >= 0; k--) {
        int s = k ? c->arg[(size_t)k * (size_t)n + (size_t)e] : 0;
        double v = c->ratio ? range_cap_ratio((void *)c->u, s, e, k) : range_cost((void *)c->u, s, e, k);
        worst = fmax(worst, v);
        if (k && cuts) cuts[k - 1] = s;
        e = s - 1;
    }
    return worst;
}

static uint64_t dbits(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}
static double bitsd(uint64_t b) {
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* The exact min-max split of units u into p stages under the caps (ratio:
 * the split with the smallest largest memory/cap ratio, for the diagnosis,
 * within whole bytes). Returns the bottleneck (range_cost of the worst
 * stage; for ratio, its range_cap_ratio), -1 when nothing fits, -2 out of
 * memory; cuts as pp_minmax_split. */
static double minmax_capped(const units *u, int p, bool ratio, int *cuts) {
    const int n = u->n;
    probe_ctx c = {.u = u, .p = p, .ratio = ratio};
    c.t.size = 1;
    while (c.t.size < n) c.t.size *= 2;
    c.t.min = malloc(sizeof(double) * 2 * (size_t)c.t.size);
    c.t.add = malloc(sizeof(double) * 2 * (size_t)c.t.size);
    c.t.arg = malloc(sizeof(int) * 2 * (size_t)c.t.size);
    c.F = malloc(sizeof(double) * (size_t)n);
    c.reach = malloc((size_t)p * (size_t)n);
    c.arg = malloc(sizeof(int) * (size_t)p * (size_t)n);
    c.stk_at = malloc(sizeof(int) * (size_t)n);
    c.stk_v = malloc(sizeof(double) * (size_t)n);
    double res = -2;
    if (!c.t.min || !c.t.add || !c.t.arg || !c.F || !c.reach || !c.arg || !c.stk_at || !c.stk_v) goto out;
    for (int s = 0; s < n; s++)
        c.F[s] = (double)u->o->depth * (s == 0 ? u->in_bytes : u->cut[s - 1]) - u->params[s];
    res = -1;
    double lo, hi;
    if (ratio) {
        lo = 0, hi = 1;
        while (!probe(&c, hi)) { /* the diagnosis always finds one: ratios grow without bound */
            lo = hi, hi *= 2;
            if (hi > 1e30) goto out;
        }
        for (int it = 0; it < 64 && hi - lo > 1e-9 * hi; it++) {
            double mid = (lo + hi) / 2;
            *(probe(&c, mid) ? &hi : &lo) = mid;
        }
    } else {
        if (!probe(&c, INFINITY)) goto out; /* no split fits the caps */
        /* each passing probe's split bounds the optimum from above at its
         * own bottleneck, often well below the probe */
        hi = probed_split(&c, NULL);
        lo = -1; /* infeasible */
        bool done = false;
        if (u->policy != PP_POLICY_MEMORY) { /* the uncapped optimum: a lower bound, often the answer */
            double free_opt = pp_minmax_split_mono(n, p, range_cost_free, (void *)u, NULL);
            if (free_opt >= 0 && free_opt <= hi && probe(&c, free_opt)) hi = free_opt, done = true;
            else if (free_opt >= 0) lo = free_opt;
        }
        if (done) {
        } else if (u->policy == PP_POLICY_MEMORY || u->policy == PP_POLICY_UNIFORM || u->policy == PP_POLICY_PARAMS) {
            while (hi - lo > 1) { /* whole bytes, whole ops */
                double mid = floor((lo + hi) / 2);
                if (probe(&c, mid)) hi = probed_split(&c, NULL);
                else lo = mid;
            }
        } else { /* the bit patterns of the doubles in (lo, hi]: ordered as their values */
            uint64_t a = lo >= 0 ? dbits(lo) + 1 : 0, z = dbits(hi);
            while (a < z) {
                uint64_t mid = a + (z - a) / 2;
                if (probe(&c, bitsd(mid))) z = dbits(probed_split(&c, NULL));
                else a = mid + 1;
            }
            hi = bitsd(z);
        }
    }
    probe(&c, hi);
    res = probed_split(&c, cuts);
out:
    free(c.t.min), free(c.t.add), free(c.t.arg), free(c.F), free(c.reach), free(c.arg), free(c.stk_at), free(c.stk_v);
    return res;
}

/* ---- custom splits ------------------------------------------------------------------------ */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Cut positions (node indices) for --split-at. */
static pp_status cuts_split_at(pp_graph *g, const pp_compile_opts *o, int *cuts, int *n_cuts,
                               pp_err *err) {
    char hint[512];
    for (int k = 0; k < o->n_split_at; k++) {
        int first = pp_module_first_node(g, o->split_at[k], hint, sizeof hint);
        const char *now = first < 0 ? pp_module_alias_of(g, o->split_at[k]) : NULL;
        if (now) {
            if (!o->quiet)
                fprintf(stderr, "ppcc: warning: --split-at %s: the name earlier ppcc versions gave module '%s', as "
                        "PyTorch's named_modules() names it: use that; the old form will go\n", o->split_at[k], now);
            first = pp_module_first_node(g, now, hint, sizeof hint);
        }
        if (first < 0 && pp_model_names_module(g, now ? now : o->split_at[k]))
            return PP_FAIL(err, PP_EINVAL, "--split-at %s: the module left no op to cut before: ppcc's passes "
                           "folded its ops into constants or fused them into others' (ppcc --modules lists the "
                           "modules as imported); cut at the module after it", o->split_at[k]);
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

/* The entries of one line of an exec_seq file, in order (at most `max`, pointers into `line`, which is cut with
 * NULs): quoted names and bare ones (a plain list, a name a line; SPLIT_NODE unquoted), skipping a comment, an
 * assignment's target ("exec_seq = ["), brackets and commas, and a parenthesised entry (ColossalAI's
 * `(lambda x: torch.flatten(x, 1), "behind")` for a functional op, which ppcc recovers itself). A line may hold
 * the whole list (a formatter such as black joins a short list onto one line): every entry counts, where only
 * the first did before. An unterminated quote ends the line. */
static int seq_tokens(char *line, char **tok, int max) {
    int n = 0;
    for (char *c = line; *c && *c != '#';) {
        if (*c == '"' || *c == '\'') {
            char *e = strchr(c + 1, *c);
            if (!e) break;
            *e = 0;
            if (c[1] && n < max) tok[n++] = c + 1;
            c = e + 1;
        } else if (*c == '(') { /* a tuple entry: to its closing parenthesis, quotes inside skipped whole */
            int depth = 0;
            for (; *c; c++) {
                if (*c == '"' || *c == '\'') {
                    char *e = strchr(c + 1, *c);
                    if (!e) break;
                    c = e;
                } else if (*c == '(') depth++;
                else if (*c == ')' && --depth == 0) break;
            }
            if (*c) c++;
        } else if (isspace((unsigned char)*c) || strchr("[],=)", *c)) {
            c++;
        } else { /* a bare name: up to a separator; one followed by '=' is an assignment's target */
            char *b = c;
            while (*c && !isspace((unsigned char)*c) && !strchr("[],=()#\"'", *c)) c++;
            char *after = c;
            while (isspace((unsigned char)*after)) after++;
            if (*after == '=') { /* "exec_seq = [": not an entry */
                c = after + 1;
                continue;
            }
            const char sep = *c;
            if (sep) *c++ = 0; /* the separator: whitespace or punctuation, or a comment, which ends the line */
            if (n < max) tok[n++] = b;
            if (sep == '#') break;
        }
    }
    return n;
}

/* The entries of an exec_seq file: module names, each with its line and
 * whether a SPLIT_NODE came before it. */
typedef struct {
    char **name;
    int *line, *first, *last;
    bool *split;
    int n, cap;
} seq_list;

static void seq_free(seq_list *q) {
    for (int k = 0; k < q->n; k++) free(q->name[k]);
    free(q->name), free(q->line), free(q->first), free(q->last), free(q->split);
}

static pp_status seq_read(const char *path, seq_list *q, pp_err *err) {
    FILE *f;
    pp_err e = {0};
    if (pp_fopen_read(path, NULL, &f, &e) != PP_OK) return PP_FAIL(err, e.code, "--exec-seq: %s", e.msg);
    char *line = NULL, **toks = NULL;
    size_t cap_line = 0, cap_toks = 0;
    int lineno = 0, nt = 0, at = 0;
    bool pending = false;
    pp_status s = PP_OK;
    while (s == PP_OK) {
        if (at == nt) { /* the next line's entries (a line of any length) */
            const ssize_t len = getline(&line, &cap_line, f);
            if (len < 0) break;
            lineno++;
            const size_t most = (size_t)len / 2 + 1; /* an entry and its separator take two bytes at least */
            if (most > cap_toks) {
                char **t = realloc(toks, most * sizeof *t);
                if (!t) {
                    s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                    break;
                }
                toks = t, cap_toks = most;
            }
            nt = seq_tokens(line, toks, (int)(most < INT_MAX ? most : INT_MAX)), at = 0;
            continue;
        }
        const char *tok = toks[at++];
        if (!strcmp(tok, "SPLIT_NODE")) {
            pending = true;
            continue;
        }
        if (q->n == q->cap) {
            int cap = q->cap ? 2 * q->cap : 64;
            char **nm = realloc(q->name, sizeof *nm * (size_t)cap);
            if (nm) q->name = nm;
            int *ln = realloc(q->line, sizeof *ln * (size_t)cap);
            if (ln) q->line = ln;
            bool *sp = realloc(q->split, sizeof *sp * (size_t)cap);
            if (sp) q->split = sp;
            if (!nm || !ln || !sp) {
                s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                break;
            }
            q->cap = cap;
        }
        q->name[q->n] = strdup(tok);
        if (!q->name[q->n]) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        q->line[q->n] = lineno;
        q->split[q->n++] = pending;
        pending = false;
    }
    free(line);
    free(toks);
    fclose(f);
    if (s == PP_OK) {
        q->first = malloc(sizeof *q->first * (size_t)(q->n ? q->n : 1));
        q->last = malloc(sizeof *q->last * (size_t)(q->n ? q->n : 1));
        if (!q->first || !q->last) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    return s;
}

/* Cuts from an exec_seq. A name that matches no module is an error, unless
 * it is a module that left no op in the graph (pp_module_left_no_op: a
 * BatchNorm the exporter folded into its Conv, a Dropout): then a warning,
 * and a SPLIT_NODE before it cuts before the next listed module with ops. */
static pp_status cuts_exec_seq(pp_graph *g, const pp_compile_opts *o, int *cuts, int *n_cuts, pp_err *err) {
    const char *path = o->exec_seq;
    seq_list q = {0};
    pp_status s = seq_read(path, &q, err);
    char hint[512], why[768];
    *n_cuts = 0;
    for (int k = 0; s == PP_OK && k < q.n; k++) {
        const char *now = pp_module_first_node(g, q.name[k], NULL, 0) < 0 ? pp_module_alias_of(g, q.name[k]) : NULL;
        if (now) {
            if (!o->quiet)
                fprintf(stderr, "ppcc: warning: %s:%d: '%s' is the name earlier ppcc versions gave module '%s', as "
                        "PyTorch's named_modules() names it: use that; the old form will go\n", path, q.line[k], q.name[k], now);
            char *c = strdup(now);
            if (!c) {
                s = PP_FAIL(err, PP_ENOMEM, "out of memory");
                break;
            }
            free(q.name[k]);
            q.name[k] = c;
        }
        q.first[k] = pp_module_first_node(g, q.name[k], hint, sizeof hint);
        q.last[k] = q.first[k] >= 0 ? pp_module_last_node(g, q.name[k]) : -1;
    }
    for (int k = 0; s == PP_OK && k < q.n; k++) {
        if (q.first[k] >= 0) continue;
        pp_module_first_node(g, q.name[k], hint, sizeof hint);
        if (pp_module_left_no_op(g, (const char *const *)q.name, q.first, q.last, q.n, k, why, sizeof why)) {
            if (!o->quiet)
                fprintf(stderr, "ppcc: warning: %s:%d: module '%s' left no op in the graph: %s; the split goes on "
                        "without it\n", path, q.line[k], q.name[k], why);
        } else {
            s = PP_FAIL(err, PP_EINVAL, "%s:%d: no module '%s' in the model; closest: %s. Not a module that left no op: %s",
                        path, q.line[k],
                        q.name[k], hint, why);
        }
    }
    int listed = 0, prev_first = -1;
    bool pending_split = false;
    if (s == PP_OK)
        for (int i = 0; i < g->n_nodes; i++) g->nodes[i].recovered = true;
    for (int k = 0; s == PP_OK && k < q.n; k++) {
        pending_split |= q.split[k];
        int first = q.first[k];
        if (first < 0) continue; /* left no op: a SPLIT_NODE before it applies to the next */
        for (int i = first; i <= q.last[k]; i++)
            if (pp_node_in_module(&g->nodes[i], q.name[k])) g->nodes[i].recovered = false;
        if (pending_split && listed > 0) {
            if (*n_cuts == PP_MAX_SPLITS) {
                s = PP_FAIL(err, PP_EUNSUP, "%s: more than %d SPLIT_NODE entries", path, PP_MAX_SPLITS);
                break;
            }
            if (first <= (*n_cuts ? cuts[*n_cuts - 1] : 0) || first <= prev_first) {
                s = PP_FAIL(err, PP_EINVAL,
                            "%s:%d: SPLIT_NODE before '%s' does not cut forward: that module "
                            "runs before what the list puts ahead of it (the graph's order "
                            "decides, see ppcc --report)", path, q.line[k], q.name[k]);
                break;
            }
            cuts[(*n_cuts)++] = first;
        }
        pending_split = false;
        prev_first = first;
        listed++;
    }
    if (s == PP_OK && listed == 0) s = PP_FAIL(err, PP_EINVAL, "%s: lists no module", path);
    seq_free(&q);
    return s;
}

/* ---- entry point -------------------------------------------------------------------------- */

static bool has_scopes(const pp_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_scope) return true;
    return false;
}

/* A custom cut before a glued node moves on to the end of its chain (the
 * chain's nodes stay with its head, so the backend can still run them as
 * one kernel). Where that would leave a stage empty (the next cut, or the
 * graph's end, lies inside the same chain), the cut stays where the user put
 * it and the chain is broken there instead: the split asked for wins over a
 * fusion the backend may or may not have done (the node after the cut runs
 * as its own kernel). */
static pp_status snap_cuts(const pp_graph *g, const pp_compile_opts *o, bool *glued, int *cuts, int n_cuts,
                           pp_err *err) {
    for (int k = 0; k < n_cuts; k++) {
        int c = cuts[k];
        while (c < g->n_nodes && glued[c]) c++;
        const int next = k + 1 < n_cuts ? cuts[k + 1] : g->n_nodes;
        if (c < next) {
            cuts[k] = c;
            continue;
        }
        if (cuts[k] <= 0 || cuts[k] >= g->n_nodes || (k && cuts[k] <= cuts[k - 1]))
            return PP_FAIL(err, PP_EINVAL, "split point %d (before node %d of %d) leaves a stage empty", k + 1,
                           cuts[k], g->n_nodes);
        glued[cuts[k]] = false;
        if (!o->quiet)
            fprintf(stderr, "ppcc: warning: split point %d falls inside a chain of ops that could run as one "
                    "kernel ('%s' then '%s'), and moving it past the chain would leave a stage empty: the chain "
                    "is cut there and '%s' runs as its own kernel\n", k + 1, g->nodes[cuts[k] - 1].name,
                    g->nodes[cuts[k]].name, g->nodes[cuts[k]].name);
    }
    return PP_OK;
}

static pp_status partition_glued(pp_graph *g, const pp_compile_opts *o, bool *glued, pp_err *err);

static bool half_type(pp_dtype t) { return t == PP_BF16 || t == PP_F16; }

/* --train --precision's Casts (passes/precision.c) keep a cut where it sends
 * the half value: no cut between a value and its rounding to the half type
 * made right after it, nor between an f32 copy of a half value and the node
 * after it (its reader); a cut before the copy sends the half value. A
 * weight's rounding is made where it is read: no cut between it and its f32
 * copy either (the cut before the rounding sends nothing for the weight,
 * the one after it the weight's half copy, and its gradient back). */
static bool half_glued(const pp_graph *g, int i) {
    if (i < 1) return false;
    const pp_node *a = &g->nodes[i - 1], *b = &g->nodes[i];
    if (b->op == PP_OP_CAST && b->in[0] >= 0 && half_type(g->values[b->out[0]].dtype) &&
        g->values[b->in[0]].dtype == PP_F32 && g->values[b->in[0]].producer == i - 1)
        return true;
    if (b->op == PP_OP_CAST && !b->backward && b->in[0] >= 0 && g->values[b->in[0]].producer == i - 1 &&
        a->op == PP_OP_CAST && a->in[0] >= 0 && half_type(g->values[a->out[0]].dtype) &&
        (g->values[a->in[0]].is_param || g->values[a->in[0]].is_const))
        return true;
    return a->op == PP_OP_CAST && !a->backward && a->in[0] >= 0 && half_type(g->values[a->in[0]].dtype) &&
           g->values[a->out[0]].dtype == PP_F32;
}

/* The fusion chains and the attention patterns (passes.h) uncut: the cuts
 * fall only before nodes neither glues; a node's chain mark stays the fusion
 * chains' (what the oneDNN backend absorbs), and a pattern is marked on its
 * first node where its last landed in the same stage (a custom cut may break
 * it, with snap_cuts' warning). */
pp_status pp_partition(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    const size_t n = pp_count(g->n_nodes);
    bool *glued = malloc(2 * n * sizeof *glued);
    int *tail = malloc(n * sizeof *tail);
    if (!glued || !tail) {
        free(glued);
        free(tail);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    bool *uncut = glued + n;
    pp_status s = pp_fusion_chains(g, glued, err);
    if (s == PP_OK) s = pp_attention_chains(g, uncut, tail, err);
    for (int i = 0; s == PP_OK && i < g->n_nodes; i++) uncut[i] = uncut[i] || glued[i] || half_glued(g, i);
    if (s == PP_OK) s = partition_glued(g, o, uncut, err);
    for (int i = 0; s == PP_OK && i < g->n_nodes; i++) {
        g->nodes[i].chain = glued[i] && uncut[i]; /* (snap_cuts unglues a node where it breaks a chain) */
        g->nodes[i].pattern = tail[i] >= 0 && g->nodes[tail[i]].stage == g->nodes[i].stage ? PP_PATTERN_ATTENTION
                                                                                             : PP_PATTERN_NONE;
    }
    free(glued);
    free(tail);
    return s;
}

static pp_status partition_glued(pp_graph *g, const pp_compile_opts *o, bool *glued, pp_err *err) {
    int p = o->n_stages;
    int cuts[PP_MAX_SPLITS];
    int n_cuts = 0;
    bool scoped = has_scopes(g);
    g->split_cost = -1;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].recovered = scoped && g->nodes[i].n_scope == 0;
    const bool forced = o->train_cut > 0 && p == 2; /* pp_train_memory_cut's */
    if (forced) {
        cuts[0] = o->train_cut < g->n_nodes ? o->train_cut : g->n_nodes - 1;
        n_cuts = 1;
        PP_TRY(snap_cuts(g, o, glued, cuts, n_cuts, err));
    } else if (o->policy == PP_POLICY_CUSTOM) {
        if (o->exec_seq && o->n_split_at)
            return PP_FAIL(err, PP_EINVAL, "give --split-at or --exec-seq, not both");
        if (o->exec_seq) PP_TRY(cuts_exec_seq(g, o, cuts, &n_cuts, err));
        else if (o->n_split_at) PP_TRY(cuts_split_at(g, o, cuts, &n_cuts, err));
        else return PP_FAIL(err, PP_EINVAL, "--policy custom needs --split-at or --exec-seq");
        PP_TRY(snap_cuts(g, o, glued, cuts, n_cuts, err));
        if (p > 1 && p != n_cuts + 1)
            return PP_FAIL(err, PP_EINVAL, "-pp %d disagrees with the custom split, which makes %d stages",
                           p, n_cuts + 1);
        p = n_cuts + 1;
    }
    for (int k = 0; k < o->n_caps; k++)
        if (o->cap_stage[k] >= p)
            return PP_FAIL(err, PP_EINVAL, "--max-memory %d:...: there is no stage %d, the split has %d stage%s "
                           "(0..%d)", o->cap_stage[k], o->cap_stage[k], p, p == 1 ? "" : "s", p - 1);
    if (!forced && o->policy != PP_POLICY_CUSTOM) {
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
            const int nu = u.n; /* units_free clears it */
            units_free(&u);
            if (o->policy == PP_POLICY_PARAMS)
                return PP_FAIL(err, PP_EINVAL,
                               "-pp %d asks for more stages than the params policy has units (%d top-level "
                               "modules and glue ops); use another policy or fewer stages", p, nu);
            return PP_FAIL(err, PP_EINVAL,
                           "-pp %d asks for more stages than the graph can be cut into (%d units: its %d ops, "
                           "each chain of ops that run as one kernel counted once): a stage would be empty",
                           p, nu, g->n_nodes);
        }
        int ucuts[PP_MAX_SPLITS];
        if (p - 1 > PP_MAX_SPLITS) {
            units_free(&u);
            return PP_FAIL(err, PP_EUNSUP, "at most %d stages", PP_MAX_SPLITS + 1);
        }
        /* near-linear where the cost only shrinks with the range: no caps (a
         * range's memory includes what it receives, which a shorter range
         * may receive more of) and not the memory policy (the same) */
        bool mono = o->n_caps == 0 && o->cap_all == 0 && o->policy != PP_POLICY_MEMORY;
        bool dp = !mono && u.n <= o->dp_max_units; /* small: the quadratic DP, as ever */
        double best = mono ? pp_minmax_split_mono(u.n, p, range_cost, &u, ucuts)
                      : dp ? pp_minmax_split(u.n, p, range_cost, &u, ucuts)
                           : minmax_capped(&u, p, false, ucuts);
        if (best < -1.5) {
            units_free(&u);
            return PP_FAIL(err, PP_ENOMEM, "out of memory splitting %d units", u.n);
        }
        if (best < 0) {
            /* nothing fits: name the stage that overflows most in the split
             * that comes closest (smallest largest memory-to-cap ratio) */
            if (dp) pp_minmax_split(u.n, p, range_cap_ratio, &u, ucuts);
            else if (minmax_capped(&u, p, true, ucuts) < -1.5) {
                units_free(&u);
                return PP_FAIL(err, PP_ENOMEM, "out of memory splitting %d units", u.n);
            }
            int worst = 0;
            double worst_r = -1, worst_mem = 0;
            for (int s = 0; s < p; s++) {
                int i = s ? ucuts[s - 1] : 0, j = s < p - 1 ? ucuts[s] - 1 : u.n - 1;
                double r = range_cap_ratio(&u, i, j, s);
                if (r > worst_r) worst_r = r, worst = s, worst_mem = range_memory(&u, i, j);
            }
            double cap = (double)pp_stage_cap(o, worst);
            g->over_stage = worst;
            g->over_need = worst_mem;
            g->over_cap = cap;
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
        g->split_cost = best;
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
