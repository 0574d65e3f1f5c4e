/* sched_mpi.c: the micro-batch pipeline with one stage per MPI rank (see
 * comm.h). The same stage loop as the threaded scheduler, over MPI channels
 * (chan_mpi.c) instead of in-process queues:
 *
 *   set-up   every rank sends rank 0 a hello (plan checksum, --depth,
 *            --replicas); rank 0 checks them and answers with the sample
 *            count. A rank on another host than the writer measures its
 *            clock offset to the writer's (ping-pong, least round trip), so
 *            latencies and the wall time are on one clock.
 *   shares   replica k takes micro-batches [M*k/R, M*(k+1)/R): rank 0 sends
 *            each replica's stage 0 its samples; the writer pre-posts the
 *            receives of every replica's outputs straight into place.
 *   links    each boundary on its transport (links_mpi.c: MPI, MPI staged
 *            through pinned memory for a device stage, NCCL), the source
 *            and the sink, then the executor.
 *   run      receive (stage > 0), take a free outgoing buffer (stage < K-1),
 *            fill (stage 0), run the stage's executor, hand the incoming
 *            buffer back, send (stage < K-1) or drain (stage K-1). With
 *            --warmup W each replica first runs W untimed copies of its first
 *            micro-batch (the sink drops their outputs); every rank then
 *            tells rank 0 and waits for its go-ahead, so the timed run starts
 *            once the warm-up has left the whole pipeline, as in the threaded
 *            driver.
 *   gather   every rank sends the writer its busy time, loop start and end,
 *            its executor's counts (pprt_exec_counts), per-node times and
 *            per-micro-batch start or end times; the
 *            writer computes the same statistics as pprt_run. With --trace
 *            each rank also sends its timeline (on the writer's clock), and
 *            the writer keeps one track per rank. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "../backend.h"
#include "../stage_loop.h"
#include "comm.h"
#include "engine.h"
#include "../microbatch.h"
#include "../run.h"

/* The plan file's identity: its header holds the checksums of all of it. */
static uint64_t plan_hash(const pprt_plan *p) {
    if (p->map && p->map_len >= 128) return XXH3_64bits(p->map, 128);
    char buf[1024];
    int len = snprintf(buf, sizeof buf, "%zu %s %s", p->file_bytes, p->model_hash ? p->model_hash : "",
                       p->options ? p->options : "");
    return XXH3_64bits(buf, (size_t)(len > 0 ? (len < (int)sizeof buf ? len : (int)sizeof buf - 1) : 0));
}

/* Length (doubles) of rank q's timeline message (--trace): PPRT_TRACE_T per
 * micro-batch, then its node times; *node_mbs: micro-batches with node times. */
static size_t trace_len(const pprt_plan *p, const pprt_shares *S, int q, bool nodes, int64_t *node_mbs) {
    int K = p->n_stages, nn = p->stages[q % K].n_nodes;
    int64_t mq = pprt_share_mbs(S, q / K);
    *node_mbs = nodes ? pprt_trace_node_mbs(nn, mq) : 0;
    return (size_t)mq * PPRT_TRACE_T + (size_t)*node_mbs * (size_t)nn;
}

/* Length (doubles) of rank q's statistics message. */
enum { ST_BUSY, ST_RSS, ST_START, ST_END, ST_MBS, ST_COUNTS, ST_HEAD = ST_COUNTS + PPRT_EXEC_COUNTS };
static size_t stats_len(const pprt_plan *p, const pprt_shares *S, int q) {
    int K = p->n_stages, s = q % K;
    size_t len = ST_HEAD + (size_t)p->stages[s].n_nodes;
    if (s == 0) len += (size_t)pprt_share_mbs(S, q / K);
    if (s == K - 1) len += (size_t)pprt_share_mbs(S, q / K);
    return len;
}

/* The first option whose value differs between rank 0's options text and
 * another rank's ("--name value" pairs, pprt_mpi_opts.agree), as an error. */
static pp_status compare_options(const char *who, const char *mine, const char *theirs, pp_err *err) {
    if (!strcmp(mine, theirs)) return PP_OK;
    char a[sizeof((pprt_ctrl *)0)->text], b[sizeof a];
    snprintf(a, sizeof a, "%.*s", (int)sizeof a - 1, mine);
    snprintf(b, sizeof b, "%.*s", (int)sizeof b - 1, theirs);
    char *sa, *sb;
    char *na = strtok_r(a, " ", &sa), *nb = strtok_r(b, " ", &sb);
    while (na && nb) {
        char *va = strtok_r(NULL, " ", &sa), *vb = strtok_r(NULL, " ", &sb);
        if (strcmp(na, nb) || !va || !vb || strcmp(va, vb))
            return PP_FAIL(err, PP_EINVAL, "%s runs with %s %s, rank 0 with %s %s: every rank must get the "
                           "same options", who, nb, vb ? vb : "", na, va ? va : "");
        na = strtok_r(NULL, " ", &sa), nb = strtok_r(NULL, " ", &sb);
    }
    return PP_FAIL(err, PP_EINVAL, "%s runs with the options '%s', rank 0 with '%s': every rank must get the "
                   "same options", who, theirs, mine);
}

static pp_status handshake(pprt_mpi *m, const pprt_plan *p, const pprt_array *inputs, int64_t *n,
                           int depth, bool *same_host, pp_err *err) {
    uint64_t hash = plan_hash(p);
    char who[64];
    if (m->rank != 0) {
        pprt_ctrl c = {0};
        c.a[0] = (int64_t)hash;
        c.a[1] = depth;
        c.a[2] = m->replicas;
        snprintf(c.text, PPRT_HOST_LEN, "%s", m->host);
        snprintf(c.text + PPRT_HOST_LEN, sizeof c.text - PPRT_HOST_LEN, "%s", m->agree);
        memcpy(c.id, m->id_out, sizeof c.id); /* an NCCL boundary's id, for the next rank */
        PP_TRY(pprt_mpi_send_ctrl(m, 0, PPRT_CTRL_HELLO, &c, err));
        pprt_mpi_describe(m, 0, who, sizeof who);
        char what[128];
        snprintf(what, sizeof what, "waiting for the go-ahead from %s", who);
        PP_TRY(pprt_mpi_wait_ctrl(m, PPRT_CTRL_GO, 0, &c, what, err));
        *n = c.a[0];
        *same_host = c.a[1] != 0;
        memcpy(m->id_in, c.id, sizeof c.id);
        return PP_OK;
    }
    /* rank 0: the data, then every rank's hello */
    if (*n < 1) return PP_FAIL(err, PP_EINVAL, "no samples to run");
    for (int i = 0; i < p->n_inputs; i++)
        if (inputs[i].n != *n)
            return PP_FAIL(err, PP_EINVAL, "input '%s' has %lld samples, expected %lld like the first",
                           p->inputs[i].name, (long long)inputs[i].n, (long long)*n);
    if (p->batch == 0 && *n != 1)
        return PP_FAIL(err, PP_EINVAL, "an unbatched plan (-b 0) runs exactly one set of inputs, got %lld",
                       (long long)*n);
    char(*hosts)[64] = calloc((size_t)m->size, sizeof *hosts);
    unsigned char(*ids)[PPRT_P2P_ID] = calloc((size_t)m->size, sizeof *ids); /* each rank's id_out */
    if (!hosts || !ids) {
        free(hosts), free(ids);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    memcpy(ids[0], m->id_out, sizeof ids[0]);
    snprintf(hosts[0], sizeof hosts[0], "%s", m->host);
    pp_status s = PP_OK;
    for (int q = 1; q < m->size && s == PP_OK; q++) {
        pprt_ctrl c;
        char what[128];
        pprt_mpi_describe(m, q, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the hello of %s", who);
        s = pprt_mpi_wait_ctrl(m, PPRT_CTRL_HELLO, q, &c, what, err);
        if (s != PP_OK) break;
        c.text[sizeof c.text - 1] = 0;
        snprintf(hosts[q], sizeof hosts[q], "%.63s", c.text);
        memcpy(ids[q], c.id, sizeof ids[q]);
        if ((uint64_t)c.a[0] != hash)
            s = PP_FAIL(err, PP_EINVAL, "%s (host %s) loaded a different plan file than rank 0 (host %s): "
                        "every rank must run the same plan", who, hosts[q], m->host);
        else if (c.a[1] != depth || c.a[2] != m->replicas)
            s = PP_FAIL(err, PP_EINVAL, "%s runs with --depth %lld --replicas %lld, rank 0 with --depth %d "
                        "--replicas %d: every rank must get the same options", who, (long long)c.a[1],
                        (long long)c.a[2], depth, m->replicas);
        else
            s = compare_options(who, m->agree, c.text + PPRT_HOST_LEN, err);
    }
    for (int q = 1; q < m->size && s == PP_OK; q++) {
        pprt_ctrl c = {0};
        c.a[0] = *n;
        c.a[1] = strcmp(hosts[q], hosts[m->writer]) == 0;
        if (q % m->stages) memcpy(c.id, ids[q - 1], sizeof c.id); /* the boundary before q's stage */
        s = pprt_mpi_send_ctrl(m, q, PPRT_CTRL_GO, &c, err);
    }
    *same_host = strcmp(hosts[0], hosts[m->writer]) == 0;
    free(hosts);
    free(ids);
    return s;
}

/* Writer's clock minus this rank's: 0 on the writer's host (CLOCK_MONOTONIC is
 * the host's), else from the ping-pong with the least round trip. */
static pp_status clock_offset(pprt_mpi *m, bool same_host, double *off, pp_err *err) {
    *off = 0;
    if (m->rank == m->writer || same_host) return PP_OK;
    char who[64], what[128];
    pprt_mpi_describe(m, m->writer, who, sizeof who);
    snprintf(what, sizeof what, "measuring the clock offset to %s", who);
    double best = INFINITY;
    for (int round = 0; round < 8; round++) {
        pprt_ctrl c = {0};
        double t0 = pprt_mpi_now();
        c.t[0] = t0;
        PP_TRY(pprt_mpi_send_ctrl(m, m->writer, PPRT_CTRL_PING, &c, err));
        PP_TRY(pprt_mpi_wait_ctrl(m, PPRT_CTRL_PONG, m->writer, &c, what, err));
        double t1 = pprt_mpi_now();
        if (c.t[0] == t0 && t1 - t0 < best) {
            best = t1 - t0;
            *off = c.t[1] - 0.5 * (t0 + t1);
        }
    }
    return PP_OK;
}

typedef struct {
    const pprt_backend *be;
    pprt_exec *x;
    pprt_link *in, *out;          /* the links before and after this rank's stage */
    pprt_array *in_arr, *out_arr; /* this replica's share of the inputs / outputs */
    void **owned;                 /* share buffers this rank allocated */
    int n_owned;
    pprt_mpi_req **reqs;          /* bulk transfers to complete before the end */
    int n_reqs;
    double *stats;                /* this rank's statistics message */
    double **peer_stats;          /* writer: every rank's */
    bool trace, trace_nodes;      /* --trace, and with node times */
    double *tr;                   /* this rank's timeline message (trace_len) */
    double *prev_ns;              /* the executor's node counters after the last run */
    double **peer_tr;             /* writer: every rank's */
    int threads;                  /* intra-op threads of this rank's executor */
    pprt_precision precision;
} rankrun;

static pp_status add_req(rankrun *rr, pprt_mpi_req *r) {
    rr->reqs[rr->n_reqs++] = r;
    return PP_OK;
}

static void *alloc64(size_t bytes) {
    void *b = NULL;
    return posix_memalign(&b, 64, bytes ? bytes : 64) == 0 ? b : NULL;
}

/* --warmup: every rank's warm-up micro-batches are through (rank 0 hears
 * from every rank, then lets them all go). */
static pp_status warm_barrier(pprt_mpi *m, pp_err *err) {
    char who[64], what[128];
    pprt_ctrl c = {0};
    if (m->rank != 0) {
        PP_TRY(pprt_mpi_send_ctrl(m, 0, PPRT_CTRL_WARM, &c, err));
        pprt_mpi_describe(m, 0, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the end of the warm-up from %s", who);
        return pprt_mpi_wait_ctrl(m, PPRT_CTRL_WARM, 0, &c, what, err);
    }
    for (int q = 1; q < m->size; q++) {
        pprt_mpi_describe(m, q, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the warm-up of %s", who);
        PP_TRY(pprt_mpi_wait_ctrl(m, PPRT_CTRL_WARM, q, &c, what, err));
    }
    for (int q = 1; q < m->size; q++) PP_TRY(pprt_mpi_send_ctrl(m, q, PPRT_CTRL_WARM, &c, err));
    return PP_OK;
}

/* The stage's micro-batches: `warmup` untimed copies, then (the timed run,
 * from *t_go on) its share; the statistics message filled, the node times
 * without the warm-up's. */
static pp_status run_loop(pprt_mpi *m, const pprt_plan *p, const pprt_shares *S, int warmup, rankrun *rr,
                          double *t_go, pp_err *err) {
    int s = m->stage, k = m->replica;
    int64_t mk = pprt_share_mbs(S, k);
    double *st = rr->stats;
    pprt_trace_track tr = {0};
    if (rr->tr) { /* a view of the timeline message: times, then node times */
        int64_t node_mbs;
        trace_len(p, S, m->rank, rr->trace_nodes, &node_mbs);
        tr = (pprt_trace_track){.n = mk, .t = rr->tr, .n_nodes = p->stages[s].n_nodes, .n_node_mb = node_mbs,
                                .node_s = rr->tr + (size_t)mk * PPRT_TRACE_T};
    }
    pprt_stage_run run = {.stage = s, .ex = rr->be->exec, .x = rr->x, .in = rr->in, .out = rr->out,
                          .warmup = warmup, .mb_offset = pprt_share_lo(S, k), .trace = rr->tr ? &tr : NULL,
                          .prev_ns = rr->prev_ns};
    bool own;
    const int nn = p->stages[s].n_nodes;
    double *warm = NULL; /* node times after the warm-up */
    if (warmup > 0) {
        PP_TRY(pprt_stage_loop(&run, 0, warmup, &own, err));
        const double *ns = rr->be->exec->node_seconds ? rr->be->exec->node_seconds(rr->x) : NULL;
        if (ns && !(warm = malloc(pp_count(nn) * sizeof *warm))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (ns) memcpy(warm, ns, (size_t)nn * sizeof *ns);
        pp_status b = warm_barrier(m, err);
        if (b != PP_OK) {
            free(warm);
            return b;
        }
    }
    *t_go = pprt_mpi_now();
    pp_status ls = pprt_stage_loop(&run, warmup, warmup + mk, &own, err);
    if (ls != PP_OK) {
        free(warm);
        return ls;
    }
    /* every send completed: all buffers back */
    if (rr->out->ops->drain && (ls = rr->out->ops->drain(rr->out, err)) != PP_OK) {
        free(warm);
        return ls;
    }
    st[ST_BUSY] = run.busy;
    st[ST_MBS] = (double)mk;
    pprt_exec_counts c;
    pprt_exec_counts_of(rr->be->exec, rr->x, &p->stages[s], &c);
    pprt_exec_counts_pack(&c, st + ST_COUNTS);
    const double *ns = rr->be->exec->node_seconds ? rr->be->exec->node_seconds(rr->x) : NULL;
    for (int i = 0; i < nn; i++) st[ST_HEAD + i] = ns ? ns[i] - (warm ? warm[i] : 0) : 0;
    free(warm);
    return PP_OK;
}

/* Writer: every rank's statistics into *stats. */
static pp_status gather_stats(pprt_mpi *m, const pprt_plan *p, const pprt_shares *S, rankrun *rr,
                              pprt_stats *stats, pp_err *err) {
    int K = p->n_stages, total_nodes = 0;
    int *base = calloc((size_t)K, sizeof *base);
    double *busy = calloc((size_t)K, sizeof *busy);
    size_t nm = S->M > 0 ? (size_t)S->M : 1;
    double *t0 = calloc(nm, sizeof *t0), *t1 = calloc(nm, sizeof *t1);
    pp_status s = PP_OK;
    if (!base || !busy || !t0 || !t1) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < K && s == PP_OK; i++) {
        base[i] = total_nodes;
        total_nodes += p->stages[i].n_nodes;
    }
    double *node_s = s == PP_OK ? calloc(pp_count(total_nodes), sizeof *node_s) : NULL;
    if (s == PP_OK && !node_s) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    double start = INFINITY, end = -INFINITY, rss = 0;
    for (int q = 0; q < m->size && s == PP_OK; q++) {
        const double *st = q == m->rank ? rr->stats : rr->peer_stats[q];
        int sq = q % K, kq = q / K;
        int64_t mq = pprt_share_mbs(S, kq), lo = pprt_share_lo(S, kq);
        if (st[ST_MBS] != (double)mq) {
            s = PP_FAIL(err, PP_ERUNTIME, "rank %d ran %.0f micro-batches, expected %lld", q, st[ST_MBS],
                        (long long)mq);
            break;
        }
        busy[sq] += st[ST_BUSY];
        rss = fmax(rss, st[ST_RSS]);
        start = fmin(start, st[ST_START]);
        end = fmax(end, st[ST_END]);
        for (int i = 0; i < p->stages[sq].n_nodes; i++) node_s[base[sq] + i] += st[ST_HEAD + i];
        const double *t = st + ST_HEAD + p->stages[sq].n_nodes;
        if (sq == 0) {
            memcpy(t0 + lo, t, (size_t)mq * sizeof *t);
            t += mq;
        }
        if (sq == K - 1) memcpy(t1 + lo, t, (size_t)mq * sizeof *t);
    }
    if (s == PP_OK) {
        s = pprt_stats_fill(stats, S->n, S->M, p->batch, end - start, K, S->R, busy, t0, t1, err);
    }
    /* the counts of each stage's first replica (the others run the same executor on the same stage) */
    for (int q = 0; q < K && q < m->size && s == PP_OK; q++)
        pprt_exec_counts_unpack((q == m->rank ? rr->stats : rr->peer_stats[q]) + ST_COUNTS, &stats->stages[q].exec);
    if (s == PP_OK) {
        stats->backend = rr->be->exec->name;
        stats->threads = rr->threads;
        stats->precision = rr->precision;
        stats->peak_rss = (size_t)rss;
        stats->node_ms = node_s;
        node_s = NULL;
        for (int i = 0; i < total_nodes; i++) stats->node_ms[i] = 1e3 * stats->node_ms[i] / (double)S->M;
    }
    free(node_s);
    free(base);
    free(busy);
    free(t0);
    free(t1);
    return s;
}

/* Writer: every rank's timeline into stats->trace, one track per rank. */
static pp_status gather_trace(pprt_mpi *m, const pprt_plan *p, const pprt_shares *S, rankrun *rr, pprt_stats *stats,
                              pp_err *err) {
    int K = p->n_stages;
    pprt_trace *t = calloc(1, sizeof *t);
    if (t) t->tracks = calloc((size_t)m->size, sizeof *t->tracks);
    if (!t || !t->tracks) {
        free(t);
        return PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
    }
    stats->trace = t;
    t->n_tracks = m->size;
    t->replicas = S->R;
    t->wall_s = stats->wall_s;
    t->bubble = stats->bubble;
    t->latency_ms = stats->latency_ms;
    t->n_latency = S->M;
    t->t0 = INFINITY;
    for (int q = 0; q < m->size; q++) {
        const double *st = q == m->rank ? rr->stats : rr->peer_stats[q];
        t->t0 = fmin(t->t0, st[ST_START]);
        const double *src = q == m->rank ? rr->tr : rr->peer_tr[q];
        int64_t node_mbs;
        size_t len = trace_len(p, S, q, rr->trace_nodes, &node_mbs);
        pprt_trace_track *k = &t->tracks[q];
        *k = (pprt_trace_track){.stage = q % K, .replica = q / K, .rank = q, .mb0 = pprt_share_lo(S, q / K),
                                .n = pprt_share_mbs(S, q / K), .n_nodes = p->stages[q % K].n_nodes,
                                .n_node_mb = node_mbs};
        k->t = malloc(sizeof(double) * (size_t)k->n * PPRT_TRACE_T + 1);
        k->node_s = malloc(sizeof(double) * (size_t)node_mbs * (size_t)k->n_nodes + 1);
        if (!k->t || !k->node_s) return PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
        memcpy(k->t, src, sizeof(double) * (size_t)k->n * PPRT_TRACE_T);
        memcpy(k->node_s, src + (size_t)k->n * PPRT_TRACE_T, sizeof(double) * (len - (size_t)k->n * PPRT_TRACE_T));
    }
    return PP_OK;
}

pp_status pprt_run_mpi(pprt_mpi *m, const pprt_plan *p, const pprt_array *inputs, int64_t *n_io,
                       pprt_array *outputs, const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < p->n_outputs; i++) outputs[i] = (pprt_array){NULL, 0};
    if (m->stages != p->n_stages) return PP_FAIL(err, PP_ERUNTIME, "internal: pprt_mpi_bind was not called");
    if (o->depth < 1) return PP_FAIL(err, PP_EINVAL, "--depth must be >= 1, got %d", o->depth);
    if (o->warmup < 0) return PP_FAIL(err, PP_EINVAL, "--warmup must be >= 0, got %d", o->warmup);
    int K = p->n_stages, R = m->replicas, me = m->rank, s = m->stage, k = m->replica, last = K - 1;
    bool writer = me == m->writer;
    int64_t n = *n_io;
    bool same_host = true;
    double off = 0;
    pprt_mpi_transports_t tp; /* what carries this rank's boundaries (links_mpi.c) */
    PP_TRY(pprt_mpi_transports(m, p, o->backend, &tp, err));
    PP_TRY(handshake(m, p, inputs, &n, o->depth, &same_host, err));
    *n_io = n;
    PP_TRY(clock_offset(m, same_host, &off, err));
    pprt_shares S = {pprt_mb_size(p), pprt_mb_count(p, n), n, R};
    int64_t mk = pprt_share_mbs(&S, k), nk = pprt_share_samples(&S, k);

    rankrun rr = {.be = tp.be};
    int max_reqs = 2 + (R + 1) * (p->n_inputs + p->n_outputs) + 2 * m->size + 1;
    rr.reqs = calloc((size_t)max_reqs, sizeof *rr.reqs);
    rr.owned = calloc((size_t)(p->n_inputs + p->n_outputs + 2), sizeof *rr.owned);
    rr.in_arr = calloc(pp_count(p->n_inputs), sizeof *rr.in_arr);
    rr.out_arr = calloc(pp_count(p->n_outputs), sizeof *rr.out_arr);
    rr.stats = calloc(stats_len(p, &S, me), sizeof *rr.stats);
    rr.peer_stats = writer ? calloc((size_t)m->size, sizeof *rr.peer_stats) : NULL;
    rr.trace = o->trace;
    rr.trace_nodes = o->trace && o->trace_nodes && rr.be->exec->node_seconds;
    int64_t node_mbs;
    if (rr.trace) {
        rr.tr = calloc(trace_len(p, &S, me, rr.trace_nodes, &node_mbs) + 1, sizeof(double));
        rr.prev_ns = rr.trace_nodes ? calloc(pp_count(p->stages[s].n_nodes), sizeof(double)) : NULL;
        rr.peer_tr = writer ? calloc((size_t)m->size, sizeof *rr.peer_tr) : NULL;
    }
    pp_status st = PP_OK;
    if (!rr.reqs || !rr.owned || !rr.in_arr || !rr.out_arr || !rr.stats || (writer && !rr.peer_stats) ||
        (rr.trace && (!rr.tr || (rr.trace_nodes && !rr.prev_ns) || (writer && !rr.peer_tr))))
        st = PP_FAIL(err, PP_ENOMEM, "out of memory");
    char who[64];

    /* stage 0: this replica's inputs; rank 0 sends the other replicas theirs */
    for (int i = 0; i < p->n_inputs && s == 0 && st == PP_OK; i++) {
        size_t sb = p->inputs[i].sample_bytes;
        if (k == 0) {
            rr.in_arr[i] = (pprt_array){inputs[i].data, nk};
            continue;
        }
        void *buf = alloc64((size_t)nk * sb);
        if (!buf) {
            st = PP_FAIL(err, PP_ENOMEM, "cannot allocate %lld samples of input '%s'", (long long)nk,
                         p->inputs[i].name);
            break;
        }
        rr.owned[rr.n_owned++] = buf;
        rr.in_arr[i] = (pprt_array){buf, nk};
        pprt_mpi_req *r;
        pprt_mpi_describe(m, 0, who, sizeof who);
        if (nk > 0 && (st = pprt_mpi_irecv(m, buf, (size_t)nk * sb, 0, PPRT_TAG_IN, &r, err,
                                           "receiving replica %d's share of input '%s' from %s", k,
                                           p->inputs[i].name, who)) == PP_OK)
            add_req(&rr, r);
    }
    for (int q = 1; me == 0 && q < R && st == PP_OK; q++)
        for (int i = 0; i < p->n_inputs && st == PP_OK && pprt_share_samples(&S, q) > 0; i++) {
            size_t sb = p->inputs[i].sample_bytes;
            pprt_mpi_req *r;
            pprt_mpi_describe(m, q * K, who, sizeof who);
            st = pprt_mpi_isend(m, (const unsigned char *)inputs[i].data + (size_t)pprt_share_first(&S, q) * sb,
                                (size_t)pprt_share_samples(&S, q) * sb, q * K, PPRT_TAG_IN, &r, err,
                                "sending replica %d's share of input '%s' to %s", q, p->inputs[i].name, who);
            if (st == PP_OK) add_req(&rr, r);
        }
    /* last stage: where the outputs go; the writer receives the other replicas' */
    for (int i = 0; i < p->n_outputs && s == last && st == PP_OK; i++) {
        size_t sb = p->outputs[i].sample_bytes;
        void *buf = alloc64((writer ? (size_t)n : (size_t)nk) * sb + 1);
        if (!buf) {
            st = PP_FAIL(err, PP_ENOMEM, "cannot allocate output '%s'", p->outputs[i].name);
            break;
        }
        if (writer) outputs[i] = (pprt_array){buf, n};
        else rr.owned[rr.n_owned++] = buf;
        rr.out_arr[i] = (pprt_array){buf, nk};
    }
    for (int q = 1; writer && q < R && st == PP_OK; q++)
        for (int i = 0; i < p->n_outputs && st == PP_OK && pprt_share_samples(&S, q) > 0; i++) {
            size_t sb = p->outputs[i].sample_bytes;
            pprt_mpi_req *r;
            int src = q * K + last;
            pprt_mpi_describe(m, src, who, sizeof who);
            st = pprt_mpi_irecv(m, (unsigned char *)outputs[i].data + (size_t)pprt_share_first(&S, q) * sb,
                                (size_t)pprt_share_samples(&S, q) * sb, src, PPRT_TAG_OUT, &r, err,
                                "receiving replica %d's share of output '%s' from %s", q,
                                p->outputs[i].name, who);
            if (st == PP_OK) add_req(&rr, r);
        }
    /* writer: everybody's statistics */
    for (int q = 0; writer && q < m->size && st == PP_OK; q++) {
        if (q == me) continue;
        size_t len = stats_len(p, &S, q);
        rr.peer_stats[q] = calloc(len, sizeof(double));
        if (!rr.peer_stats[q]) {
            st = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        pprt_mpi_req *r;
        pprt_mpi_describe(m, q, who, sizeof who);
        st = pprt_mpi_irecv(m, rr.peer_stats[q], len * sizeof(double), q, PPRT_TAG_STATS, &r, err,
                            "receiving the statistics of %s", who);
        if (st == PP_OK) add_req(&rr, r);
        if (st != PP_OK || !rr.trace) continue;
        len = trace_len(p, &S, q, rr.trace_nodes, &node_mbs);
        if (!(rr.peer_tr[q] = calloc(len + 1, sizeof(double)))) {
            st = PP_FAIL(err, PP_ENOMEM, "out of memory");
            break;
        }
        st = pprt_mpi_irecv(m, rr.peer_tr[q], len * sizeof(double), q, PPRT_TAG_TRACE, &r, err,
                            "receiving the timeline of %s", who);
        if (st == PP_OK) add_req(&rr, r);
    }
    /* the stage: its links (this replica's share of the data at the
     * pipeline's ends, the boundaries with the ranks beside it, each on its
     * transport) and its executor (links_mpi.c) */
    /* intra-op threads: --threads, else this rank's cores (pprt_rank_cores), as links_mpi.c gives them */
    rr.threads = o->threads > 0 ? o->threads : pprt_rank_cores(pprt_mpi_env_local_size());
    rr.precision = o->precision;
    double *t_start = rr.stats ? rr.stats + ST_HEAD + p->stages[s].n_nodes : NULL;
    double *t_end = t_start ? t_start + (s == 0 ? mk : 0) : NULL;
    if (st == PP_OK) {
        pprt_mpi_ends ends = {rr.in_arr, rr.out_arr, nk, mk + o->warmup, t_start, t_end};
        pprt_mpi_stage ms;
        st = pprt_mpi_stage_setup(m, p, o, &tp, &ends, &ms, err);
        if (ms.be) rr.be = ms.be;
        rr.x = ms.x, rr.in = ms.in, rr.out = ms.out;
    }
    /* stage 0 of a replica but the first: wait for its share */
    for (int i = 0; st == PP_OK && k > 0 && s == 0 && i < rr.n_reqs; i++) {
        st = pprt_mpi_wait(m, rr.reqs[i], err);
        rr.reqs[i] = NULL;
    }

    double t_loop0 = pprt_mpi_now();
    if (st == PP_OK) st = run_loop(m, p, &S, o->warmup, &rr, &t_loop0, err);
    double t_loop1 = pprt_mpi_now();
    /* every rank: its --ref-weights files unchanged, before the writer may
     * write (it waits for every rank's statistics, sent after this) */
    if (st == PP_OK) st = pprt_plan_sources_unchanged(p, err);

    if (st == PP_OK) {
        rr.stats[ST_RSS] = (double)pprt_peak_rss();
        rr.stats[ST_START] = t_loop0 + off;
        rr.stats[ST_END] = t_loop1 + off;
        double *t = rr.stats + ST_HEAD + p->stages[s].n_nodes;
        for (int64_t j = 0; j < (s == 0 ? mk : 0) + (s == last ? mk : 0); j++) t[j] += off;
        for (int64_t j = 0; rr.tr && j < mk * PPRT_TRACE_T; j++) rr.tr[j] += off;
    }
    /* outputs and statistics to the writer */
    for (int i = 0; st == PP_OK && !writer && s == last && nk > 0 && i < p->n_outputs; i++) {
        pprt_mpi_req *r;
        pprt_mpi_describe(m, m->writer, who, sizeof who);
        st = pprt_mpi_isend(m, rr.out_arr[i].data, (size_t)nk * p->outputs[i].sample_bytes, m->writer,
                            PPRT_TAG_OUT, &r, err, "sending replica %d's share of output '%s' to %s", k,
                            p->outputs[i].name, who);
        if (st == PP_OK) add_req(&rr, r);
    }
    if (st == PP_OK && !writer) {
        pprt_mpi_req *r;
        pprt_mpi_describe(m, m->writer, who, sizeof who);
        st = pprt_mpi_isend(m, rr.stats, stats_len(p, &S, me) * sizeof(double), m->writer, PPRT_TAG_STATS,
                            &r, err, "sending the statistics to %s", who);
        if (st == PP_OK) add_req(&rr, r);
        if (st == PP_OK && rr.trace) {
            st = pprt_mpi_isend(m, rr.tr, trace_len(p, &S, me, rr.trace_nodes, &node_mbs) * sizeof(double),
                                m->writer, PPRT_TAG_TRACE, &r, err, "sending the timeline to %s", who);
            if (st == PP_OK) add_req(&rr, r);
        }
    }
    for (int i = 0; st == PP_OK && i < rr.n_reqs; i++)
        if (rr.reqs[i]) {
            st = pprt_mpi_wait(m, rr.reqs[i], err);
            rr.reqs[i] = NULL;
        }
    if (st == PP_OK && writer) {
        st = gather_stats(m, p, &S, &rr, stats, err);
        if (st == PP_OK && rr.trace) st = gather_trace(m, p, &S, &rr, stats, err);
        if (st == PP_OK) m->run_complete = true;
    }

    /* On a failure the caller ends the process (pprt_mpi_finish): requests
     * still posted keep their buffers, so only a clean run frees them. */
    if (st == PP_OK) {
        if (rr.x) rr.be->exec->destroy(rr.x);
        if (rr.in) rr.in->ops->destroy(rr.in);
        if (rr.out) rr.out->ops->destroy(rr.out);
        for (int i = 0; i < rr.n_owned; i++) free(rr.owned[i]);
        for (int q = 0; rr.peer_stats && q < m->size; q++) free(rr.peer_stats[q]);
        free(rr.peer_stats);
        for (int q = 0; rr.peer_tr && q < m->size; q++) free(rr.peer_tr[q]);
        free(rr.peer_tr);
        free(rr.tr);
        free(rr.prev_ns);
        free(rr.reqs);
        free(rr.owned);
        free(rr.in_arr);
        free(rr.out_arr);
        free(rr.stats);
    } else if (writer) {
        for (int i = 0; i < p->n_outputs; i++) outputs[i].data = NULL; /* may still be written */
    }
    return st;
}
