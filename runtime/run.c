/* run.c: what both drivers do alike around the stage loop (run.h): a
 * stage's threads and executor configuration, its record (busy time, loop
 * start and end, peak RSS, counts, node times, micro-batch times, timeline)
 * and that record as one flat message of doubles, and the statistics of a
 * run from its records. Neither threads nor MPI here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

int pprt_run_threads(const pprt_run_opts *o, int share) {
    return o->threads > 0 ? o->threads : share > 1 ? share : 1;
}

pprt_exec_cfg pprt_stage_cfg(const pprt_run_opts *o, int threads, const pprt_place *at) {
    return (pprt_exec_cfg){.threads = threads, .precision = o->precision,
                           .device = pprt_place_is_host(at) ? -1 : at->device, .quiet = o->quiet && !o->explain,
                           .node_times = o->node_times};
}

/* The message's head: doubles before the node times. */
enum { REC_BUSY, REC_RSS, REC_START, REC_END, REC_MBS, REC_COUNTS, REC_HEAD = REC_COUNTS + PPRT_EXEC_COUNTS };

pp_status pprt_rec_init(pprt_stage_rec *r, const pprt_plan *p, const pprt_shares *sh, int stage, int replica,
                        int rank, bool trace, bool trace_nodes, pp_err *err) {
    const int K = p->n_stages, nn = p->stages[stage].n_nodes;
    const int64_t mbs = pprt_share_mbs(sh, replica);
    *r = (pprt_stage_rec){.stage = stage, .replica = replica, .rank = rank, .mb0 = pprt_share_lo(sh, replica),
                          .mbs = mbs, .n_nodes = nn};
    r->tr = (pprt_trace_track){.stage = stage, .replica = replica, .rank = rank, .mb0 = r->mb0, .n = mbs,
                               .n_nodes = nn};
    if (trace && trace_nodes) r->tr.n_node_mb = pprt_trace_node_mbs(nn, mbs);
    const size_t times = (size_t)mbs * ((stage == 0) + (stage == K - 1));
    const size_t tl = trace ? (size_t)mbs * PPRT_TRACE_T + (size_t)r->tr.n_node_mb * (size_t)nn : 0;
    r->len = REC_HEAD + (size_t)nn + times + tl;
    r->msg = calloc(r->len + 1, sizeof *r->msg);
    if (trace_nodes && trace && !(r->prev_ns = calloc(pp_count(nn), sizeof *r->prev_ns)))
        return PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
    if (!r->msg) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    double *at = r->msg + REC_HEAD;
    r->node_s = at, at += nn;
    if (stage == 0) r->t_start = at, at += mbs;
    if (stage == K - 1) r->t_end = at, at += mbs;
    if (trace) {
        r->tr.t = at, at += (size_t)mbs * PPRT_TRACE_T;
        if (r->tr.n_node_mb) r->tr.node_s = at;
    }
    return PP_OK;
}

void pprt_rec_free(pprt_stage_rec *r) {
    free(r->msg);
    free(r->prev_ns);
    r->msg = r->prev_ns = NULL;
}

void pprt_rec_base(pprt_stage_rec *r, const pprt_exec_ops *ex, const pprt_exec *x) {
    pprt_rec_warm(r, ex, x);
    const double *ns = x && ex->node_seconds ? ex->node_seconds(x) : NULL;
    if (ns && r->prev_ns) memcpy(r->prev_ns, ns, (size_t)r->n_nodes * sizeof *ns);
    pprt_exec_counts c = {0};
    if (x && ex->counts) ex->counts(x, &c);
    r->captures0 = c.graph_captures, r->replays0 = c.graph_replays;
}

void pprt_rec_warm(pprt_stage_rec *r, const pprt_exec_ops *ex, const pprt_exec *x) {
    const double *ns = x && ex->node_seconds ? ex->node_seconds(x) : NULL;
    if (ns) memcpy(r->node_s, ns, (size_t)r->n_nodes * sizeof *ns);
}

void pprt_rec_done(pprt_stage_rec *r, const pprt_plan *p, const pprt_exec_ops *ex, const pprt_exec *x, double busy) {
    r->busy = busy;
    pprt_exec_counts_of(ex, x, &p->stages[r->stage], &r->counts);
    r->counts.graph_captures -= r->captures0, r->counts.graph_replays -= r->replays0;
    const double *ns = x && ex->node_seconds ? ex->node_seconds(x) : NULL;
    for (int i = 0; i < r->n_nodes; i++) r->node_s[i] = ns ? ns[i] - r->node_s[i] : 0;
}

void pprt_rec_shift(pprt_stage_rec *r, double off) {
    r->t_loop0 += off;
    r->t_loop1 += off;
    for (int64_t j = 0; r->t_start && j < r->mbs; j++) r->t_start[j] += off;
    for (int64_t j = 0; r->t_end && j < r->mbs; j++) r->t_end[j] += off;
    for (int64_t j = 0; r->tr.t && j < r->mbs * PPRT_TRACE_T; j++) r->tr.t[j] += off;
}

void pprt_rec_pack(pprt_stage_rec *r) {
    double *h = r->msg;
    const pprt_exec_counts *c = &r->counts;
    h[REC_BUSY] = r->busy, h[REC_RSS] = r->rss, h[REC_START] = r->t_loop0, h[REC_END] = r->t_loop1;
    h[REC_MBS] = (double)r->mbs;
    const double v[PPRT_EXEC_COUNTS] = {c->nodes,          c->library, c->own,      c->fused,
                                        c->views,          c->reference, c->layout_changes, c->copies,
                                        c->in_place,       c->own_layout, c->weight_bytes,
                                        (double)c->graph_captures, (double)c->graph_replays};
    memcpy(h + REC_COUNTS, v, sizeof v);
}

pp_status pprt_rec_unpack(pprt_stage_rec *r, pp_err *err) {
    const double *h = r->msg, *d = h + REC_COUNTS;
    if (h[REC_MBS] != (double)r->mbs)
        return PP_FAIL(err, PP_ERUNTIME, "rank %d ran %.0f micro-batches, expected %lld", r->rank, h[REC_MBS],
                       (long long)r->mbs);
    r->busy = h[REC_BUSY], r->rss = h[REC_RSS], r->t_loop0 = h[REC_START], r->t_loop1 = h[REC_END];
    r->counts = (pprt_exec_counts){.nodes = (int)d[0],      .library = (int)d[1],        .own = (int)d[2],
                                   .fused = (int)d[3],      .views = (int)d[4],          .reference = (int)d[5],
                                   .layout_changes = (int)d[6], .copies = (int)d[7],     .in_place = (int)d[8],
                                   .own_layout = (int)d[9], .weight_bytes = d[10],
                                   .graph_captures = (long)d[11], .graph_replays = (long)d[12]};
    return PP_OK;
}

/* stats->trace: each record's timeline, copied out (the records keep theirs). */
static pp_status trace_of(const pprt_shares *sh, const pprt_stage_rec *recs, int n, double t0, pprt_stats *stats,
                          pp_err *err) {
    pprt_trace *t = calloc(1, sizeof *t);
    if (t) t->tracks = calloc((size_t)n, sizeof *t->tracks);
    if (!t || !t->tracks) {
        free(t);
        return PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
    }
    *t = (pprt_trace){.n_tracks = n, .tracks = t->tracks, .t0 = t0, .wall_s = stats->wall_s, .bubble = stats->bubble,
                      .replicas = sh->R, .latency_ms = stats->latency_ms, .n_latency = sh->M};
    stats->trace = t;
    for (int q = 0; q < n; q++) {
        pprt_trace_track *k = &t->tracks[q];
        *k = recs[q].tr;
        const size_t nt = (size_t)k->n * PPRT_TRACE_T, nn = (size_t)k->n_node_mb * (size_t)k->n_nodes;
        k->t = malloc(sizeof(double) * nt + 1);
        k->node_s = malloc(sizeof(double) * nn + 1);
        if (!k->t || !k->node_s) return PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
        if (recs[q].tr.t) memcpy(k->t, recs[q].tr.t, sizeof(double) * nt);
        if (nn) memcpy(k->node_s, recs[q].tr.node_s, sizeof(double) * nn);
    }
    return PP_OK;
}

/* The executors' names: every stage's where known ("mixed" for the run when
 * they differ), else the one the context names. */
static void backends_of(const pprt_plan *p, const pprt_stats_ctx *c, pprt_stats *stats) {
    stats->backend = c->be ? c->be[0]->exec->name : c->backend;
    for (int i = 0; c->be && i < p->n_stages; i++) {
        if (c->be[i] != c->be[0]) stats->backend = "mixed";
        stats->stages[i].backend = c->be[i]->exec->name;
    }
}

pp_status pprt_stats_of(const pprt_plan *p, const pprt_shares *sh, const pprt_stage_rec *recs, int n,
                        const pprt_stats_ctx *c, pprt_stats *stats, pp_err *err) {
    const int K = p->n_stages;
    int total = 0;
    for (int i = 0; i < K; i++) total += p->stages[i].n_nodes;
    const size_t nm = sh->M > 0 ? (size_t)sh->M : 1;
    double *busy = calloc((size_t)K, sizeof *busy), *t0 = calloc(nm, sizeof *t0), *t1 = calloc(nm, sizeof *t1);
    double *node_s = calloc(pp_count(total), sizeof *node_s);
    pp_status s = PP_OK;
    if (!busy || !t0 || !t1 || !node_s) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    double start = INFINITY, end = -INFINITY, rss = 0;
    for (int q = 0; q < n && s == PP_OK; q++) {
        const pprt_stage_rec *r = &recs[q];
        int base = 0;
        for (int i = 0; i < r->stage; i++) base += p->stages[i].n_nodes;
        busy[r->stage] += r->busy;
        rss = fmax(rss, r->rss);
        start = fmin(start, r->t_loop0);
        end = fmax(end, r->t_loop1);
        for (int i = 0; i < r->n_nodes; i++) node_s[base + i] += r->node_s[i];
        if (r->t_start) memcpy(t0 + r->mb0, r->t_start, (size_t)r->mbs * sizeof *t0);
        if (r->t_end) memcpy(t1 + r->mb0, r->t_end, (size_t)r->mbs * sizeof *t1);
    }
    if (s == PP_OK) s = pprt_stats_fill(stats, sh->n, sh->M, p->batch, end - start, K, sh->R, busy, t0, t1, err);
    if (s == PP_OK) {
        /* the counts of each stage's first replica (the others run the same executor on the same stage) */
        for (int i = 0; i < K && i < n; i++) stats->stages[i].exec = recs[i].counts;
        backends_of(p, c, stats);
        stats->threads = c->threads;
        stats->precision = c->precision;
        stats->peak_rss = (size_t)rss;
        for (int i = 0; i < total; i++) node_s[i] = 1e3 * node_s[i] / (double)sh->M;
        stats->node_ms = node_s;
        node_s = NULL;
        if (c->trace) s = trace_of(sh, recs, n, start, stats, err);
    }
    free(node_s);
    free(busy);
    free(t0);
    free(t1);
    return s;
}
