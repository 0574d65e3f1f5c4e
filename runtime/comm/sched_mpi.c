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
 *   gather   every rank sends the writer its record (run.h: busy time,
 *            loop start and end, peak RSS, its executor's counts, per-node
 *            times, per-micro-batch start or end times and, with --trace,
 *            its timeline), on the writer's clock, as one message; the
 *            writer computes the statistics from every rank's record with
 *            the function pprt_run uses (pprt_stats_of), one track per rank. */
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
    for (int i = 0; inputs && i < p->n_inputs; i++)
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

static pp_status clock_offset(pprt_mpi *m, bool same_host, double *off, pp_err *err);

/* Training (train_mpi.c): the same plan and the agreed options on every
 * rank, checked by rank 0 as for a run (no data yet: no inputs to check),
 * and this rank's clock against the writer's (clock_offset; for the
 * timelines of --trace). */
pp_status pprt_mpi_agree(pprt_mpi *m, const pprt_plan *p, int depth, double *clock_off, pp_err *err) {
    int64_t n = 1;
    bool same_host;
    PP_TRY(handshake(m, p, NULL, &n, depth, &same_host, err));
    return clock_offset(m, same_host, clock_off, err);
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
    pprt_stage_rec *recs;         /* the writer: every rank's record (run.h); else this rank's alone */
    pprt_stage_rec *rec;          /* this rank's */
    int n_recs;
    bool trace_nodes;             /* --trace with node times (this rank's executor measures them) */
    int threads;                  /* intra-op threads of this rank's executor */
    pprt_place at;                /* where its stage runs */
    pprt_dev_desc *devs;          /* the writer: every rank's device (name[0] == 0: on the host) */
    bool differ;                  /* the writer: device stages on devices that differ */
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

/* The stage's micro-batches: `warmup` untimed copies, then (the timed run)
 * its share; its record filled, the node times without the warm-up's. */
static pp_status run_loop(pprt_mpi *m, const pprt_plan *p, const pprt_shares *S, int warmup, rankrun *rr,
                          pp_err *err) {
    pprt_stage_rec *rec = rr->rec;
    pprt_stage_run run = {.stage = m->stage, .ex = rr->be->exec, .x = rr->x, .in = rr->in, .out = rr->out,
                          .warmup = warmup, .mb_offset = pprt_share_lo(S, m->replica),
                          .trace = rec->tr.t ? &rec->tr : NULL, .prev_ns = rec->prev_ns};
    bool own;
    if (warmup > 0) {
        PP_TRY(pprt_stage_loop(&run, 0, warmup, &own, err));
        pprt_rec_warm(rec, rr->be->exec, rr->x);
        PP_TRY(warm_barrier(m, err));
    }
    rec->t_loop0 = pprt_mpi_now();
    PP_TRY(pprt_stage_loop(&run, warmup, warmup + rec->mbs, &own, err));
    /* every send completed: all buffers back */
    if (rr->out->ops->drain) PP_TRY(rr->out->ops->drain(rr->out, err));
    rec->t_loop1 = pprt_mpi_now();
    pprt_rec_done(rec, p, rr->be->exec, rr->x, run.busy);
    return PP_OK;
}

/* This rank's record, and on the writer every other rank's, set up as
 * each rank sets up its own (its stage, replica and share). */
static pp_status alloc_rank(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o, const pprt_shares *S,
                            rankrun *rr, pp_err *err) {
    const bool writer = m->rank == m->writer;
    const int K = p->n_stages;
    int max_reqs = 2 + (S->R + 1) * (p->n_inputs + p->n_outputs) + 2 * m->size + 1;
    rr->reqs = calloc((size_t)max_reqs, sizeof *rr->reqs);
    rr->owned = calloc((size_t)(p->n_inputs + p->n_outputs + 2), sizeof *rr->owned);
    rr->in_arr = calloc(pp_count(p->n_inputs), sizeof *rr->in_arr);
    rr->out_arr = calloc(pp_count(p->n_outputs), sizeof *rr->out_arr);
    rr->n_recs = writer ? m->size : 1;
    rr->recs = calloc((size_t)rr->n_recs, sizeof *rr->recs);
    if (!rr->reqs || !rr->owned || !rr->in_arr || !rr->out_arr || !rr->recs)
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    rr->rec = &rr->recs[writer ? m->rank : 0];
    rr->trace_nodes = o->trace && o->trace_nodes && rr->be->exec->node_seconds;
    for (int q = 0; q < m->size; q++)
        if (writer || q == m->rank)
            PP_TRY(pprt_rec_init(&rr->recs[writer ? q : 0], p, S, q % K, q / K, q, o->trace, rr->trace_nodes, err));
    return PP_OK;
}

/* Stage 0: this replica's inputs; rank 0 sends the other replicas theirs. */
static pp_status share_inputs(pprt_mpi *m, const pprt_plan *p, const pprt_array *inputs, const pprt_shares *S,
                              rankrun *rr, pp_err *err) {
    const int K = p->n_stages, k = m->replica;
    const int64_t nk = pprt_share_samples(S, k);
    char who[64];
    for (int i = 0; i < p->n_inputs && m->stage == 0; i++) {
        size_t sb = p->inputs[i].sample_bytes;
        if (k == 0) {
            rr->in_arr[i] = (pprt_array){inputs[i].data, nk};
            continue;
        }
        void *buf = alloc64((size_t)nk * sb);
        if (!buf)
            return PP_FAIL(err, PP_ENOMEM, "cannot allocate %lld samples of input '%s'", (long long)nk,
                           p->inputs[i].name);
        rr->owned[rr->n_owned++] = buf;
        rr->in_arr[i] = (pprt_array){buf, nk};
        pprt_mpi_req *r;
        pprt_mpi_describe(m, 0, who, sizeof who);
        if (nk > 0) {
            PP_TRY(pprt_mpi_irecv(m, buf, (size_t)nk * sb, 0, PPRT_TAG_IN, &r, err,
                                  "receiving replica %d's share of input '%s' from %s", k, p->inputs[i].name, who));
            add_req(rr, r);
        }
    }
    for (int q = 1; m->rank == 0 && q < S->R; q++)
        for (int i = 0; i < p->n_inputs && pprt_share_samples(S, q) > 0; i++) {
            size_t sb = p->inputs[i].sample_bytes;
            pprt_mpi_req *r;
            pprt_mpi_describe(m, q * K, who, sizeof who);
            PP_TRY(pprt_mpi_isend(m, (const unsigned char *)inputs[i].data + (size_t)pprt_share_first(S, q) * sb,
                                  (size_t)pprt_share_samples(S, q) * sb, q * K, PPRT_TAG_IN, &r, err,
                                  "sending replica %d's share of input '%s' to %s", q, p->inputs[i].name, who));
            add_req(rr, r);
        }
    return PP_OK;
}

/* Last stage: where the outputs go; the writer receives the other replicas'. */
static pp_status place_outputs(pprt_mpi *m, const pprt_plan *p, pprt_array *outputs, const pprt_shares *S,
                               rankrun *rr, pp_err *err) {
    const int K = p->n_stages, last = K - 1;
    const bool writer = m->rank == m->writer;
    const int64_t n = S->n, nk = pprt_share_samples(S, m->replica);
    for (int i = 0; i < p->n_outputs && m->stage == last; i++) {
        size_t sb = p->outputs[i].sample_bytes;
        void *buf = alloc64((writer ? (size_t)n : (size_t)nk) * sb + 1);
        if (!buf) return PP_FAIL(err, PP_ENOMEM, "cannot allocate output '%s'", p->outputs[i].name);
        if (writer) outputs[i] = (pprt_array){buf, n};
        else rr->owned[rr->n_owned++] = buf;
        rr->out_arr[i] = (pprt_array){buf, nk};
    }
    for (int q = 1; writer && q < S->R; q++)
        for (int i = 0; i < p->n_outputs && pprt_share_samples(S, q) > 0; i++) {
            size_t sb = p->outputs[i].sample_bytes;
            pprt_mpi_req *r;
            int src = q * K + last;
            char who[64];
            pprt_mpi_describe(m, src, who, sizeof who);
            PP_TRY(pprt_mpi_irecv(m, (unsigned char *)outputs[i].data + (size_t)pprt_share_first(S, q) * sb,
                                  (size_t)pprt_share_samples(S, q) * sb, src, PPRT_TAG_OUT, &r, err,
                                  "receiving replica %d's share of output '%s' from %s", q, p->outputs[i].name,
                                  who));
            add_req(rr, r);
        }
    return PP_OK;
}

/* Writer: everybody's record (its statistics and timeline), one message each. */
static pp_status post_gather(pprt_mpi *m, rankrun *rr, pp_err *err) {
    for (int q = 0; m->rank == m->writer && q < m->size; q++) {
        if (q == m->rank) continue;
        pprt_mpi_req *r;
        char who[64];
        pprt_mpi_describe(m, q, who, sizeof who);
        PP_TRY(pprt_mpi_irecv(m, rr->recs[q].msg, rr->recs[q].len * sizeof(double), q, PPRT_TAG_STATS, &r, err,
                              "receiving the statistics of %s", who));
        add_req(rr, r);
    }
    return PP_OK;
}

/* The stage: its links (this replica's share of the data at the
 * pipeline's ends, the boundaries with the ranks beside it, each on its
 * transport) and its executor (links_mpi.c); stage 0 of a replica but the
 * first then waits for its share. */
static pp_status setup_stage(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o,
                             const pprt_mpi_transports_t *tp, const pprt_shares *S, rankrun *rr, pp_err *err) {
    const int64_t mk = pprt_share_mbs(S, m->replica), nk = pprt_share_samples(S, m->replica);
    pprt_mpi_ends ends = {rr->in_arr, rr->out_arr, nk, mk + o->warmup, rr->rec->t_start, rr->rec->t_end};
    pprt_mpi_stage ms;
    pp_status st = pprt_mpi_stage_setup(m, p, o, tp, &ends, &ms, err);
    if (ms.be) rr->be = ms.be;
    rr->x = ms.x, rr->in = ms.in, rr->out = ms.out, rr->at = ms.at;
    for (int i = 0; st == PP_OK && m->replica > 0 && m->stage == 0 && i < rr->n_reqs; i++) {
        st = pprt_mpi_wait(m, rr->reqs[i], err);
        rr->reqs[i] = NULL;
    }
    return st;
}

/* Every rank's device to the writer, which warns (once) where device
 * stages run on devices that differ (bits may differ across the split) and
 * records them (--stats-json). After set-up: no rank's set-up waits on the
 * writer's run. */
static bool same_dev(const pprt_dev_desc *a, const pprt_dev_desc *b) {
    return !strcmp(a->name, b->name) && a->cc_major == b->cc_major && a->cc_minor == b->cc_minor &&
           a->sms == b->sms && !strcmp(a->libs, b->libs);
}

static pp_status exchange_devices(pprt_mpi *m, rankrun *rr, pp_err *err) {
    pprt_dev_desc d = {0};
    if (!pprt_place_is_host(&rr->at) && rr->at.mem && rr->at.mem->describe) rr->at.mem->describe(rr->at.device, &d);
    if (m->rank != m->writer) {
        pprt_ctrl c = {0};
        c.a[0] = d.name[0] != 0, c.a[1] = d.cc_major, c.a[2] = d.cc_minor, c.a[3] = d.sms;
        snprintf(c.text, 128, "%s", d.name);
        snprintf(c.text + 128, sizeof c.text - 128, "%s", d.libs);
        return pprt_mpi_send_ctrl(m, m->writer, PPRT_CTRL_DEV, &c, err);
    }
    rr->devs = calloc((size_t)m->size, sizeof *rr->devs);
    if (!rr->devs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    rr->devs[m->rank] = d;
    for (int q = 0; q < m->size; q++) {
        if (q == m->rank) continue;
        pprt_ctrl c;
        char who[64], what[128];
        pprt_mpi_describe(m, q, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the device of %s", who);
        PP_TRY(pprt_mpi_wait_ctrl(m, PPRT_CTRL_DEV, q, &c, what, err));
        if (!c.a[0]) continue;
        pprt_dev_desc *e = &rr->devs[q];
        *e = (pprt_dev_desc){.cc_major = (int)c.a[1], .cc_minor = (int)c.a[2], .sms = (int)c.a[3]};
        snprintf(e->name, sizeof e->name, "%.95s", c.text);
        snprintf(e->libs, sizeof e->libs, "%.127s", c.text + 128);
    }
    int first = -1;
    for (int q = 0; q < m->size && !rr->differ; q++) {
        if (!rr->devs[q].name[0]) continue;
        if (first < 0) first = q;
        else if (!same_dev(&rr->devs[first], &rr->devs[q])) {
            rr->differ = true;
            const pprt_dev_desc *a = &rr->devs[first], *b = &rr->devs[q];
            char wa[64], wb[64];
            pprt_mpi_describe(m, first, wa, sizeof wa);
            pprt_mpi_describe(m, q, wb, sizeof wb);
            fprintf(stderr, "pprt: warning: %s's device (%s, compute capability %d.%d, %d SMs; %s) differs from %s's "
                    "(%s, %d.%d, %d SMs; %s): results may not be bit-identical to the same plan on one kind of "
                    "device (kernel and library choices depend on the device)\n", wb, b->name, b->cc_major,
                    b->cc_minor, b->sms, b->libs, wa, a->name, a->cc_major, a->cc_minor, a->sms, a->libs);
        }
    }
    return PP_OK;
}

/* The outputs of a last stage but the writer's, and this rank's record on
 * the writer's clock (`off`), to the writer; then every transfer completed. */
static pp_status send_results(pprt_mpi *m, const pprt_plan *p, const pprt_shares *S, double off, rankrun *rr,
                              pp_err *err) {
    const bool writer = m->rank == m->writer;
    const int64_t nk = pprt_share_samples(S, m->replica);
    char who[64];
    pprt_mpi_describe(m, m->writer, who, sizeof who);
    rr->rec->rss = (double)pprt_peak_rss();
    pprt_rec_shift(rr->rec, off);
    pprt_rec_pack(rr->rec);
    for (int i = 0; !writer && m->stage == p->n_stages - 1 && nk > 0 && i < p->n_outputs; i++) {
        pprt_mpi_req *r;
        PP_TRY(pprt_mpi_isend(m, rr->out_arr[i].data, (size_t)nk * p->outputs[i].sample_bytes, m->writer,
                              PPRT_TAG_OUT, &r, err, "sending replica %d's share of output '%s' to %s", m->replica,
                              p->outputs[i].name, who));
        add_req(rr, r);
    }
    if (!writer) {
        pprt_mpi_req *r;
        PP_TRY(pprt_mpi_isend(m, rr->rec->msg, rr->rec->len * sizeof(double), m->writer, PPRT_TAG_STATS, &r, err,
                              "sending the statistics to %s", who));
        add_req(rr, r);
    }
    for (int i = 0; i < rr->n_reqs; i++)
        if (rr->reqs[i]) {
            PP_TRY(pprt_mpi_wait(m, rr->reqs[i], err));
            rr->reqs[i] = NULL;
        }
    return PP_OK;
}

/* Writer: every rank's record into *stats (run.c). */
static pp_status gather_stats(pprt_mpi *m, const pprt_plan *p, const pprt_run_opts *o, const pprt_shares *S,
                              rankrun *rr, pprt_stats *stats, pp_err *err) {
    for (int q = 0; q < m->size; q++)
        if (q != m->rank) PP_TRY(pprt_rec_unpack(&rr->recs[q], err));
    const pprt_stats_ctx c = {.threads = rr->threads, .precision = o->precision, .backend = rr->be->exec->name,
                              .trace = o->trace};
    PP_TRY(pprt_stats_of(p, S, rr->recs, m->size, &c, stats, err));
    stats->devices_differ = rr->differ;
    for (int i = 0; rr->devs && i < p->n_stages && i < stats->n_stages && i < m->size; i++) {
        const pprt_dev_desc *d = &rr->devs[i]; /* replica 0's stage i runs on rank i */
        if (!d->name[0]) continue;
        pprt_stage_stats *t = &stats->stages[i];
        snprintf(t->device.place, sizeof t->device.place, "rank %d", i);
        snprintf(t->device.name, sizeof t->device.name, "%s", d->name);
        snprintf(t->device.libs, sizeof t->device.libs, "%s", d->libs);
        t->device.cc_major = d->cc_major, t->device.cc_minor = d->cc_minor, t->device.sms = d->sms;
    }
    return PP_OK;
}

/* On a failure the caller ends the process (pprt_mpi_finish): requests
 * still posted keep their buffers, so only a clean run frees them. */
static void free_rank(rankrun *rr) {
    if (rr->x) rr->be->exec->destroy(rr->x);
    if (rr->in) rr->in->ops->destroy(rr->in);
    if (rr->out) rr->out->ops->destroy(rr->out);
    for (int i = 0; i < rr->n_owned; i++) free(rr->owned[i]);
    for (int q = 0; rr->recs && q < rr->n_recs; q++) pprt_rec_free(&rr->recs[q]);
    free(rr->recs);
    free(rr->reqs);
    free(rr->owned);
    free(rr->in_arr);
    free(rr->out_arr);
    free(rr->devs);
}

pp_status pprt_run_mpi(pprt_mpi *m, const pprt_plan *p, const pprt_array *inputs, int64_t *n_io,
                       pprt_array *outputs, const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < p->n_outputs; i++) outputs[i] = (pprt_array){NULL, 0};
    if (m->stages != p->n_stages) return PP_FAIL(err, PP_ERUNTIME, "internal: pprt_mpi_bind was not called");
    if (o->depth < 1) return PP_FAIL(err, PP_EINVAL, "--depth must be >= 1, got %d", o->depth);
    if (o->warmup < 0) return PP_FAIL(err, PP_EINVAL, "--warmup must be >= 0, got %d", o->warmup);
    for (int d = 0; d < p->train_devices; d++)
        if (p->stages[d].n_stash || p->stages[2 * p->train_devices - 1 - d].n_local)
            return PP_FAIL(err, PP_EUNSUP, "a training plan (ppcc --train) runs on threads for now: under mpirun a "
                           "device's forward and backward stage would be two ranks, and neither its stash nor its "
                           "device-local gradients can cross");
    const bool writer = m->rank == m->writer;
    bool same_host = true;
    double off = 0;
    pprt_mpi_transports_t tp; /* what carries this rank's boundaries (links_mpi.c) */
    PP_TRY(pprt_mpi_transports(m, p, o->backend, &tp, err));
    PP_TRY(handshake(m, p, inputs, n_io, o->depth, &same_host, err));
    PP_TRY(clock_offset(m, same_host, &off, err));
    const pprt_shares S = {pprt_mb_size(p), pprt_mb_count(p, *n_io), *n_io, m->replicas};

    /* intra-op threads: --threads, else this rank's cores (pprt_rank_cores), as links_mpi.c gives them */
    rankrun rr = {.be = tp.be, .threads = pprt_run_threads(o, pprt_rank_cores(pprt_mpi_env_local_size()))};
    pp_status st = alloc_rank(m, p, o, &S, &rr, err);
    if (st == PP_OK) st = share_inputs(m, p, inputs, &S, &rr, err);
    if (st == PP_OK) st = place_outputs(m, p, outputs, &S, &rr, err);
    if (st == PP_OK) st = post_gather(m, &rr, err);
    if (st == PP_OK) st = setup_stage(m, p, o, &tp, &S, &rr, err);
    if (st == PP_OK) st = exchange_devices(m, &rr, err);
    if (st == PP_OK) st = run_loop(m, p, &S, o->warmup, &rr, err);
    /* every rank: its --ref-weights files unchanged, before the writer may
     * write (it waits for every rank's statistics, sent after this) */
    if (st == PP_OK) st = pprt_plan_sources_unchanged(p, err);
    if (st == PP_OK) st = send_results(m, p, &S, off, &rr, err);
    if (st == PP_OK && writer) st = gather_stats(m, p, o, &S, &rr, stats, err);
    if (st == PP_OK && writer) m->run_complete = true;
    if (st == PP_OK) free_rank(&rr);
    else if (writer)
        for (int i = 0; i < p->n_outputs; i++) outputs[i].data = NULL; /* may still be written */
    return st;
}
