/* partition_train.c: the split of a gradient graph (ppcc --train).
 *
 * A stage owns the forward and the backward of its ops. With -pp P the
 * forward graph is split as any graph is (the policies, caps and custom
 * splits of partition.c), each forward node priced with the backward nodes
 * its gradient rule emitted; then the graph becomes 2P consecutive stages:
 * stage s (< P) the forward ops of split s, stage 2P-1-s their backward.
 * One micro-batch flows 0, 1, .., P-1, then P-1's backward, .., 0's: a
 * pipeline like any other, in which stages s and 2P-1-s belong to the same
 * device (pprt puts them together). The order stays topological: a backward
 * node reads forward values of its own stage or earlier ones and gradients
 * of later ones, so sorting the nodes by their stage, stably, keeps every
 * producer before its readers (checked). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct named {
    const char *name;
    int idx;
} named;

static int cmp_named(const void *a, const void *b) {
    const named *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int find_named(const named *t, int n, const char *name) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2, c = strcmp(t[mid].name, name);
        if (!c) {
            while (mid > 0 && !strcmp(t[mid - 1].name, name)) return t[mid - 1].idx; /* the first of equals */
            return t[mid].idx;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The forward graph alone (a copy), each node's cost with its backward's
 * (and its own again under --recompute all: the backward stage runs it a
 * second time; a list of devices is known only after the split, which then
 * prices it without) and the update of the weights it reads first. */
static pp_status forward_copy(const pp_graph *g, const int *fwd_of, const pp_compile_opts *o, pp_graph *c,
                              pp_err *err) {
    const bool twice = o->train.recompute_all;
    PP_TRY(pp_graph_clone_borrowed(g, c, err));
    /* the weights' update priced on the first forward node that reads each (pp_train_update_s) */
    bool *seen = calloc(pp_count(g->n_values), sizeof *seen);
    if (!seen) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].backward && k < g->nodes[i].n_in; k++) {
            const int v = g->nodes[i].in[k];
            if (v < 0 || !g->values[v].is_param || seen[v]) continue;
            seen[v] = true;
            c->nodes[i].update_s += pp_train_update_s((double)g->values[v].nbytes, o->micro_batches, &o->train.optim, &o->target);
        }
    free(seen);
    for (int i = 0; i < g->n_nodes; i++) {
        const int f = fwd_of[i];
        if (!g->nodes[i].backward && twice) {
            c->nodes[i].cost.flops += g->nodes[i].cost.flops;
            c->nodes[i].cost.bytes += g->nodes[i].cost.bytes;
            if (g->nodes[i].prof_s > 0) c->nodes[i].prof_s += g->nodes[i].prof_s;
        }
        if (!g->nodes[i].backward) continue;
        c->nodes[i].dead = true;
        if (f >= 0) {
            c->nodes[f].cost.flops += g->nodes[i].cost.flops;
            c->nodes[f].cost.bytes += g->nodes[i].cost.bytes;
            if (g->nodes[i].prof_s > 0 && c->nodes[f].prof_s >= 0) c->nodes[f].prof_s += g->nodes[i].prof_s;
        }
    }
    /* its output: the loss (what the forward graph ends in) */
    int loss = pp_graph_find(c, PP_LOSS_NAME);
    if (loss < 0) return PP_FAIL(err, PP_EINVAL, "--train: the gradient graph has no loss value");
    c->outputs[0] = loss;
    c->n_outputs = 1;
    pp_graph_compact(c);
    return pp_graph_verify(c, err);
}

/* --recompute: device d's backward stage b = 2P-1-d computes again, from
 * what stage d received, every forward value of stage d it reads: each
 * forward node of d that such a value needs, transitively, is copied into b
 * (its outputs named NAME.recompute), first in b's order, and b's nodes read
 * the copies. What the device then keeps between its two stages (the stash,
 * passes/boundary.c) is what its copies and its backward read of stage d's
 * inputs: the received boundary, not every activation. A copy computes as
 * its original does, on the same inputs, so the gradients keep their bits. */
bool pp_train_recomputes(const pp_train_opts *t, int d) {
    bool on = t->recompute_all;
    for (int k = 0; k < t->n_recompute; k++) on = on || t->recompute[k] == d;
    return on;
}

/* The nodes added from n0 on first in their stage, each stage's other nodes
 * after them, in order; `what` names the pass in the refusal (a bug in
 * ppcc) where the graph is then out of order. */
static pp_status added_first(pp_graph *g, int n0, int P, const char *what, pp_err *err) {
    const int n = g->n_nodes;
    if (n == n0) return PP_OK;
    pp_node *tmp = malloc(pp_count(n) * sizeof *tmp);
    if (!tmp) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    int k = 0;
    for (int st = 0; st < 2 * P; st++) {
        for (int i = n0; i < n; i++)
            if (g->nodes[i].stage == st) tmp[k++] = g->nodes[i];
        for (int i = 0; i < n0; i++)
            if (g->nodes[i].stage == st) tmp[k++] = g->nodes[i];
    }
    memcpy(g->nodes, tmp, (size_t)n * sizeof *tmp);
    free(tmp);
    pp_graph_drop_uses(g);
    pp_err e = {0};
    if (pp_graph_verify(g, &e) != PP_OK)
        return PP_WRAP(err, &e, PP_EINVAL, "%s are out of order (a bug in ppcc): %s", what, e.msg);
    return PP_OK;
}

static pp_status recompute(pp_graph *g, int P, const pp_train_opts *t, pp_err *err) {
    if (!t->recompute_all && !t->n_recompute) return PP_OK;
    for (int k = 0; k < t->n_recompute; k++)
        if (t->recompute[k] >= P)
            return PP_FAIL(err, PP_EINVAL, "--recompute %d: the plan has %d device%s (0..%d)", t->recompute[k], P,
                           P == 1 ? "" : "s", P - 1);
    const int n0 = g->n_nodes, nv0 = g->n_values;
    int *map = malloc(pp_count(nv0) * sizeof *map);
    bool *need = calloc(pp_count(n0), sizeof *need);
    pp_status s = PP_OK;
    if (!map || !need) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto out;
    }
    for (int v = 0; v < nv0; v++) map[v] = -1;
    for (int d = 0; d < P; d++) {
        if (!pp_train_recomputes(t, d)) continue;
        const int b = 2 * P - 1 - d;
        /* the forward nodes of d that b needs, transitively (the order is
         * topological: a reader comes after what it reads) */
        for (int i = n0 - 1; i >= 0; i--) {
            const pp_node *nd = &g->nodes[i];
            if (nd->stage != b && !(nd->stage == d && need[i])) continue;
            for (int k = 0; k < nd->n_in; k++) {
                const int x = nd->in[k], pr = x >= 0 ? g->values[x].producer : -1;
                if (pr >= 0 && g->nodes[pr].stage == d) need[pr] = true;
            }
        }
        for (int i = 0; i < n0; i++) {
            if (g->nodes[i].stage != d || !need[i]) continue;
            const pp_node src = g->nodes[i]; /* a copy: adding nodes moves the array */
            char name[512];
            snprintf(name, sizeof name, "%s.recompute", src.name);
            int ci;
            if ((s = pp_graph_add_node(g, src.op, name, src.n_in, src.n_out, &ci, err)) != PP_OK) goto out;
            pp_node *c = &g->nodes[ci];
            c->attrs = src.attrs, c->n_attrs = src.n_attrs, c->cost = src.cost;
            c->scope = src.scope, c->n_scope = src.n_scope, c->extra = src.extra, c->n_extra = src.n_extra;
            c->prof_s = src.prof_s, c->src = src.src, c->stage = b, c->backward = true, c->grad_of = src.name;
            c->fold_skipped = src.fold_skipped;
            for (int k = 0; k < src.n_in; k++) c->in[k] = src.in[k] >= 0 && map[src.in[k]] >= 0 ? map[src.in[k]] : src.in[k];
            for (int k = 0; k < src.n_out; k++) {
                const int v = src.out[k];
                if (v < 0) continue;
                int nv;
                snprintf(name, sizeof name, "%s.recompute", g->values[v].name);
                if ((s = pp_graph_add_value(g, name, &nv, err)) != PP_OK) goto out;
                pp_value *w = &g->values[nv];
                const pp_value *ov = &g->values[v];
                w->dtype = ov->dtype, w->shape = ov->shape, w->nbytes = ov->nbytes;
                g->nodes[ci].out[k] = nv;
                map[v] = nv;
            }
        }
        for (int i = 0; i < n0; i++) {
            pp_node *nd = &g->nodes[i];
            if (nd->stage != b) continue;
            for (int k = 0; k < nd->n_in; k++)
                if (nd->in[k] >= 0 && nd->in[k] < nv0 && map[nd->in[k]] >= 0) nd->in[k] = map[nd->in[k]];
        }
        memset(need, 0, pp_count(n0) * sizeof *need);
        for (int v = 0; v < nv0; v++) map[v] = -1; /* a later device's backward reads the originals */
    }
    if (s == PP_OK) s = added_first(g, n0, P, "--recompute: the copied forward's nodes", err);
out:
    free(map);
    free(need);
    return s;
}

/* Whether node i is a forward Cast between f32 and a half type: an f32 copy
 * of a half value (to 1), which its readers share, or a value's rounding (to
 * 0; passes/precision.c). */
static bool half_cast(const pp_graph *g, int i, bool to) {
    const pp_node *c = &g->nodes[i];
    if (c->op != PP_OP_CAST || c->backward || c->n_in != 1 || c->in[0] < 0 || c->out[0] < 0) return false;
    const pp_dtype a = g->values[c->in[0]].dtype, b = g->values[c->out[0]].dtype;
    const pp_dtype h = to ? a : b, f = to ? b : a;
    return (h == PP_BF16 || h == PP_F16) && f == PP_F32;
}

/* A stage that reads an f32 copy of a half value made on an earlier device
 * makes its own copy from the half value, first in the stage: the half value
 * crosses the cut instead of the copy (or alone, where that device's
 * backward reads it anyway: ResNet-18 cut inside a block sent a ReLU's bf16
 * value and its f32 copy). So does a stage that reads a value's rounding to
 * the half type and the value itself (a residual block's input, rounded for
 * its first convolution and read whole by its Add): the value crosses alone.
 * The same Cast of the same value, so the same bits: the split still changes
 * none. The forward and the backward stage of a device each make their own
 * (the stash then keeps what the cut sent). */
static pp_status remake_copies(pp_graph *g, int P, pp_err *err) {
    const int n0 = g->n_nodes, nv0 = g->n_values;
    int *map = malloc(pp_count(nv0) * sizeof *map);
    if (!map) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = PP_OK;
    for (int dev = 1; dev < P && s == PP_OK; dev++) { /* its forward stage dev, its backward 2P-1-dev */
#define ON_DEV(i) (g->nodes[i].stage == dev || g->nodes[i].stage == 2 * P - 1 - dev)
        for (int v = 0; v < nv0; v++) map[v] = -1;
        for (int i = 0; i < n0; i++) /* the values the device reads: -2 */
            for (int k = 0; ON_DEV(i) && k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] >= 0) map[g->nodes[i].in[k]] = -2;
        for (int i = 0; i < n0 && s == PP_OK; i++) { /* (the forward stage's nodes first) */
            if (!ON_DEV(i)) continue;
            const int st = g->nodes[i].stage;
            for (int k = 0; k < g->nodes[i].n_in && s == PP_OK; k++) {
                const int x = g->nodes[i].in[k], pr = x >= 0 && x < nv0 ? g->values[x].producer : -1;
                if (pr < 0 || g->nodes[pr].stage >= dev) continue;
                const int src_v = g->nodes[pr].in[0];
                if (!half_cast(g, pr, true) && !(half_cast(g, pr, false) && map[src_v] == -2)) continue;
                if (map[x] < 0) {
                    const pp_node src = g->nodes[pr]; /* a copy: adding nodes moves the array */
                    char name[512];
                    snprintf(name, sizeof name, "%s.s%d", src.name, st);
                    int ci, nv;
                    if ((s = pp_graph_add_node(g, src.op, name, 1, 1, &ci, err)) != PP_OK) break;
                    snprintf(name, sizeof name, "%s.s%d", g->values[x].name, st);
                    if ((s = pp_graph_add_value(g, name, &nv, err)) != PP_OK) break;
                    pp_node *c = &g->nodes[ci];
                    c->attrs = src.attrs, c->n_attrs = src.n_attrs, c->cost = src.cost, c->src = src.src;
                    c->scope = src.scope, c->n_scope = src.n_scope, c->prof_s = src.prof_s;
                    c->stage = st, c->backward = st >= P, c->grad_of = st >= P ? src.name : NULL;
                    c->in[0] = src.in[0], c->out[0] = nv;
                    pp_value *w = &g->values[nv];
                    const pp_value *ov = &g->values[x];
                    w->dtype = ov->dtype, w->shape = ov->shape, w->nbytes = ov->nbytes;
                    map[x] = nv;
                }
                g->nodes[i].in[k] = map[x];
            }
        }
#undef ON_DEV
    }
    free(map);
    return s == PP_OK ? added_first(g, n0, P, "--train: a stage's own f32 copies", err) : s;
}

/* --schedule zb-h1: each backward stage's nodes that no input gradient needs
 * become its device's W part (pp_node.wpass). Backwards over the nodes: a
 * backward node is B when one of its outputs is read by a later stage, by a
 * B node, or is a plan output other than a weight's gradient; the rest (the
 * weight gradients' ConvGradW, MatMul, sums) only make gradients that leave
 * at the device (g->local). A node of B never reads one of W, so B runs
 * without W, and W after it on what B kept for it. */
static pp_status mark_w(pp_graph *g, int P, pp_err *err) {
    bool *need = calloc(pp_count(g->n_values), sizeof *need);
    if (!need) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            const int v = g->nodes[i].in[k], pr = v >= 0 ? g->values[v].producer : -1;
            if (pr >= 0 && g->nodes[pr].stage < g->nodes[i].stage) need[v] = true;
        }
    const size_t ls = strlen(PP_GRAD_SUFFIX);
    for (int k = 0; k < g->n_outputs; k++) {
        const char *nm = g->values[g->outputs[k]].name;
        const size_t ln = strlen(nm);
        if (ln <= ls || strcmp(nm + ln - ls, PP_GRAD_SUFFIX)) need[g->outputs[k]] = true;
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        pp_node *nd = &g->nodes[i];
        if (nd->stage < P) continue;
        bool b = false;
        for (int k = 0; k < nd->n_out; k++) b = b || (nd->out[k] >= 0 && need[nd->out[k]]);
        nd->wpass = !b;
        for (int k = 0; b && k < nd->n_in; k++)
            if (nd->in[k] >= 0) need[nd->in[k]] = true;
    }
    free(need);
    g->train_split_w = true;
    return PP_OK;
}

pp_status pp_partition_train(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    const int n = g->n_nodes;
    /* forward nodes first (they never read a backward value), order kept */
    {
        pp_node *tmp = malloc(pp_count(n) * sizeof *tmp);
        if (!tmp) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        int k = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < n; i++)
                if (g->nodes[i].backward == (pass == 1)) tmp[k++] = g->nodes[i];
        memcpy(g->nodes, tmp, (size_t)n * sizeof *tmp);
        free(tmp);
        pp_graph_drop_uses(g);
        PP_TRY(pp_graph_verify(g, err));
    }
    int nf = 0;
    while (nf < n && !g->nodes[nf].backward) nf++;
    named *tab = malloc(pp_count(nf) * sizeof *tab);
    int *fwd_of = malloc(pp_count(n) * sizeof *fwd_of), *virt = malloc(pp_count(n) * sizeof *virt);
    pp_graph c = {0};
    pp_status s = PP_OK;
    if (!tab || !fwd_of || !virt) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nf; i++) tab[i] = (named){g->nodes[i].name, i};
    qsort(tab, (size_t)nf, sizeof *tab, cmp_named);
    for (int i = 0; i < n; i++)
        fwd_of[i] = g->nodes[i].backward && g->nodes[i].grad_of ? find_named(tab, nf, g->nodes[i].grad_of) : -1;
    if ((s = forward_copy(g, fwd_of, o, &c, err)) != PP_OK) goto done;
    if ((s = pp_partition(&c, o, err)) != PP_OK) goto done;
    const int P = c.n_stages;
    if (2 * P - 1 > PP_MAX_SPLITS) {
        s = PP_FAIL(err, PP_EUNSUP, "--train -pp %d: a training plan has two stages per device, at most %d in all",
                    P, PP_MAX_SPLITS + 1);
        goto done;
    }
    /* the forward copy kept the forward nodes in order: node i is c's node i */
    for (int i = 0; i < nf; i++) virt[i] = c.nodes[i].stage, g->nodes[i].recovered = c.nodes[i].recovered;
    for (int i = nf; i < n; i++) {
        /* by the node whose rule made it, else at P; then never before a backward value it reads. A gradient's
         * sum is made by the rule of one reader of the value and reads the other readers' parts: where that
         * reader sits on a later device than another (dpn48b: a cut between two 1x1 convolutions of one value),
         * the other's part is made in an earlier device's backward, and the sum goes there too. */
        int v = fwd_of[i] >= 0 ? 2 * P - 1 - virt[fwd_of[i]] : P;
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            const int x = g->nodes[i].in[k], p = x >= 0 ? g->values[x].producer : -1;
            if (p >= nf && virt[p] > v) v = virt[p];
        }
        virt[i] = v;
    }
    /* stably by stage; then every node must come after its producers */
    {
        pp_node *tmp = malloc(pp_count(n) * sizeof *tmp);
        if (!tmp) {
            s = PP_FAIL(err, PP_ENOMEM, "out of memory");
            goto done;
        }
        int k = 0;
        for (int st = 0; st < 2 * P; st++)
            for (int i = 0; i < n; i++)
                if (virt[i] == st) {
                    tmp[k] = g->nodes[i];
                    tmp[k++].stage = st;
                }
        memcpy(g->nodes, tmp, (size_t)n * sizeof *tmp);
        free(tmp);
    }
    pp_err ve = {0};
    if (pp_graph_verify(g, &ve) != PP_OK) {
        s = PP_WRAP(err, &ve, PP_EINVAL, "--train: the stages of the gradient graph are out of order (a bug in ppcc): "
                    "%s", ve.msg);
        goto done;
    }
    bool remake = true; /* --disable-pass remake: the cuts send them (the CUDA half route's conversions, tested) */
    for (int k = 0; k < o->n_disabled; k++) remake = remake && strcmp(o->disabled[k], "remake") != 0;
    if (remake && (s = remake_copies(g, P, err)) != PP_OK) goto done;
    if ((s = recompute(g, P, &o->train, err)) != PP_OK) goto done;
    if (o->train.schedule == PP_TRAIN_SCHED_ZBH1 && (s = mark_w(g, P, err)) != PP_OK) goto done;
    bool *glued = malloc(pp_count(g->n_nodes) * sizeof *glued);
    if (!glued) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    if ((s = pp_fusion_chains(g, glued, err)) == PP_OK)
        for (int i = 0; i < g->n_nodes; i++)
            g->nodes[i].chain = glued[i] && i > 0 && g->nodes[i - 1].stage == g->nodes[i].stage &&
                                g->nodes[i - 1].wpass == g->nodes[i].wpass;
    free(glued);
    g->n_stages = 2 * P;
    g->train_devices = P;
    g->split_cost = c.split_cost;
done:
    pp_graph_free_borrowed(&c);
    free(tab);
    free(fwd_of);
    free(virt);
    return s;
}

/* ---- --policy memory: the cut by the devices' totals --------------------------------------- */

/* The two devices' 1F1B totals of g split before forward node k, and the
 * cut made (*at: k moved past a chain of ops it fell in); *empty: a stage
 * of the split holds no node (a plan pprt refuses: such a cut is never
 * taken, as when device 0's forward is the input's Cast alone and its
 * backward nothing). */
static pp_status cut_totals(const pp_graph *g, const pp_compile_opts *o, int k, double *t, int *at, bool *empty,
                            pp_err *err) {
    pp_compile_opts to = *o;
    to.train_cut = k;
    to.cap_all = 0, to.n_caps = 0; /* the totals, fitting or not */
    to.dump_ir = NULL, to.dump_dot = NULL, to.quiet = true;
    pp_graph w = {0};
    PP_TRY(pp_graph_clone_borrowed(g, &w, err));
    pp_status s = pp_run_split_passes(&w, &to, err);
    for (int d = 0; s == PP_OK && d < 2; d++) {
        pp_train_mem m;
        pp_train_memory(&w, &to, d, &m);
        t[d] = m.total_1f1b;
    }
    *at = 0;
    int per[4] = {0};
    for (int i = 0; s == PP_OK && i < w.n_nodes; i++) {
        *at += w.nodes[i].stage == 0;
        if (w.nodes[i].stage >= 0 && w.nodes[i].stage < 4) per[w.nodes[i].stage]++;
    }
    *empty = !per[0] || !per[1] || !per[2] || !per[3];
    pp_graph_free_borrowed(&w);
    return s;
}

/* The best of the distinct cuts within `steps` of from (its own totals t),
 * walking down (dir -1) or up (+1) the forward nodes. */
static pp_status cut_walk(const pp_graph *g, const pp_compile_opts *o, int from, int dir, int steps, int nf,
                          double *best, int *cut, pp_err *err) {
    double u[2];
    int last = from, at;
    bool empty;
    for (int k = from + dir; k >= 1 && k <= nf - 1 && steps > 0; k += dir) {
        PP_TRY(cut_totals(g, o, k, u, &at, &empty, err));
        if (at == last || (dir < 0 && at >= from)) continue; /* inside a chain: the same cut */
        last = at, steps--;
        if (dir > 0 && at > k) k = at; /* past the chain */
        if (!empty && fmax(u[0], u[1]) < *best) *best = fmax(u[0], u[1]), *cut = at;
    }
    return PP_OK;
}

pp_status pp_train_memory_cut(const pp_graph *g, const pp_compile_opts *o, int *cut, pp_err *err) {
    int nf = 0;
    for (int i = 0; i < g->n_nodes; i++) nf += !g->nodes[i].backward;
    if (nf < 2) return PP_FAIL(err, PP_EINVAL, "-pp 2 asks for more stages than the forward graph has ops (%d)", nf);
    double t[2], u[2];
    int lo = 1, hi = nf - 1, at, at_hi;
    bool empty, e;
    PP_TRY(cut_totals(g, o, hi, t, &at_hi, &empty, err));
    if (t[0] >= t[1])
        while (lo < hi) { /* the first cut where device 0 holds at least what device 1 does */
            const int mid = lo + (hi - lo) / 2;
            PP_TRY(cut_totals(g, o, mid, u, &at, &e, err));
            if (u[0] >= u[1]) hi = mid, at_hi = at, t[0] = u[0], t[1] = u[1], empty = e;
            else lo = mid + 1;
        }
    /* the totals are not quite monotone in the cut (the messages at it, the
     * arenas, a half value and its f32 copy): the cuts around it too */
    double best = empty ? INFINITY : fmax(t[0], t[1]);
    *cut = at_hi;
    PP_TRY(cut_walk(g, o, at_hi, -1, 4, nf, &best, cut, err));
    return cut_walk(g, o, at_hi, +1, 2, nf, &best, cut, err);
}
