/* train_mpi.c: training on MPI ranks (train.h's pprt_train_dist; the
 * trainer itself, the replicas' sums and the optimizer, is train.c's).
 *
 * Rank r runs device d = r % P of replica r / P: the device's forward stage
 * d and backward stage 2P-1-d, each on a thread of its own running the one
 * stage loop, the device's stash between them in this process (stash.h)
 * and the schedule's gate around them (pprt_run_opts.gate), as the threaded
 * driver runs them; in a zb-h1 plan also its W stage 2P+d (where it has
 * nodes) on a third thread, taking what B keeps for it, through the gate,
 * with no link. Its links:
 *
 *   forward in    d = 0: the source over the leader's micro-batches; else from rank r-1
 *   forward out   d = P-1: an in-process queue to its own backward stage; else to rank r+1
 *   backward in   d = P-1: that queue; else from rank r+1
 *   backward out  d = 0: the sink, which hands each micro-batch to take_outputs; else to rank r-1
 *
 * The two MPI boundaries between ranks r and r+1 go opposite ways, so the
 * one tag of boundary messages never mixes them (a receive names its
 * source). Each run (a step, a held-out pass) makes its links and
 * executors afresh (the executors from the trainer's keeper when it has
 * one, pprt_run_opts.keep: made by the first step, kept across steps), as
 * pprt_run does; the run's messages are exactly
 * n_msgs per boundary, so no receive is left posted for the next run.
 *
 * Device stages (cuda, cuda-emu) run as inference runs them on ranks: the
 * rank's device is the one its local rank picks (both of its stages there),
 * a boundary with another rank's device stage goes, by --transport, through
 * pinned host memory over MPI or over NCCL (the emulated NCCL on cuda-emu),
 * the pipeline's ends are staged through pinned memory, the last device's
 * turn is a queue of device buffers, and the backward stage's device-local
 * gradients reach the trainer through the stage loop's pinned copy. The
 * NCCL communicators (two a pair of neighbouring ranks, one a direction)
 * are opened once, before the first step, and lent to every run's links;
 * each opens in one order on both ends (the emulated NCCL's start-up
 * exchanges go both ways on one tag). With --replicas over NCCL a
 * communicator between this device's ranks in neighbouring replicas (and
 * the last replica's with each earlier one) carries the replicas' chain of
 * gradient sums, device to device (pprt_train_dist.dsend, drecv; train.c
 * dev_chain). A failure is this rank's: the caller ends the process (pprt_mpi_finish),
 * which tells every other rank; a rank that dies is found by the engine's
 * heartbeats. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../driver.h"
#include "../keep.h"
#include "../nodes.h"
#include "../run.h"
#include "../stage_loop.h"
#include "../stash.h"
#include "../train.h"
#include "comm.h"
#include "engine.h"

/* Boundary b's message (stage b -> b+1): a stash makes one end's longer. */
static size_t boundary_bytes(const pprt_plan *p, int b) {
    const size_t a = p->stages[b].out.bytes, c = p->stages[b + 1].in.bytes;
    return a > c ? a : c;
}

/* This rank's places and boundaries, kept across the runs (a step, a held-out
 * pass): where its two stages run (the host, or the device its local rank
 * picks), what carries the boundaries with the ranks beside it (PPRT_BK_*,
 * as inference decides them: links_mpi.c), and their NCCL communicators,
 * opened once at the start (pprt_train_mpi) and lent to each run's links. */
typedef struct tm_ctx {
    pprt_mpi *m;
    const pprt_backend *override;
    const pprt_plan *plan;
    pprt_place fat, bat; /* the forward and the backward stage's place */
    /* [0]: with rank r-1, [1]: with rank r+1; kind -1 where there is none */
    int fkind[2], bkind[2];
    pprt_p2p *fc[2], *bc[2]; /* the forward and the backward boundary's communicator (NULL: not NCCL) */
    /* the replicas' chain of sums on the devices (pprt_train_dist.dev_chain): a communicator with the rank of
     * this device in each replica it exchanges sums with (by world rank; NULL: none), a stream and an event on
     * the backward stage's device for the transfers */
    pprt_p2p **rc;
    pprt_stream *rs;
    pprt_event *rev;
    atomic_bool rstop; /* pprt_train_dist.dstop: the chain's transfers fail */
    /* the last run's: the two stages' executor seconds, its wall seconds, the stash's peak and entry bytes, the
     * W stage's seconds and what B kept for it, its peak and entry bytes (pprt_train_dist.busy) */
    double busy[PPRT_DIST_BUSY];
    /* pprt --profile and --trace: the last run's records of the two stages (run.h: node times, timeline; rec_on),
     * the last training step's kept for its timeline (pprt_train_dist.keep_trace; kept_on), the backend and
     * threads that measured them, and this rank's clock against rank 0's (pprt_mpi_agree) */
    pprt_stage_rec rec[2], kept[2];
    bool rec_on, kept_on;
    const char *rec_backend;
    int rec_threads;
    double clock_off;
} tm_ctx;

static tm_ctx the_ctx; /* one training per process; its communicators live until the process ends */

/* A kept communicator lent to one run's link: the link's destroy frees the
 * loan alone (its close still aborts the communicator: a failure ends the
 * process anyway). */
typedef struct loan {
    pprt_p2p base;
    pprt_p2p *c;
} loan;

static pp_status l_send(pprt_p2p *c, const void *buf, size_t n, pprt_stream *s, pp_err *err) {
    pprt_p2p *k = ((loan *)c)->c;
    return k->ops->send(k, buf, n, s, err);
}
static pp_status l_recv(pprt_p2p *c, void *buf, size_t n, pprt_stream *s, pp_err *err) {
    pprt_p2p *k = ((loan *)c)->c;
    return k->ops->recv(k, buf, n, s, err);
}
static pp_status l_check(pprt_p2p *c, pp_err *err) {
    pprt_p2p *k = ((loan *)c)->c;
    return k->ops->check(k, err);
}
static void l_abort(pprt_p2p *c) {
    pprt_p2p *k = ((loan *)c)->c;
    k->ops->abort(k);
}
static void l_destroy(pprt_p2p *c) { free(c); }

static const pprt_p2p_ops loan_ops = {"NCCL (kept across runs)", l_send, l_recv, l_check, l_abort, l_destroy};

static const char *const kind_names[] = {"MPI", "MPI, staged through pinned host memory", "NCCL", "emulated NCCL"};

/* One end of a boundary with rank `peer`, on its transport: MPI (staged
 * through pinned memory where the stage is on a device) or the kept NCCL
 * communicator c. */
static pp_status rank_link(pprt_mpi *m, int peer, bool sender, int kind, pprt_p2p *c, const pprt_place *at,
                           size_t bytes, int depth, int64_t n, pprt_link **out, pp_err *err) {
    char who[64], name[160];
    pprt_mpi_describe(m, peer, who, sizeof who);
    snprintf(name, sizeof name, "the training boundary over %s %s %s", kind_names[kind], sender ? "to" : "from", who);
    if (c) {
        loan *l = malloc(sizeof *l);
        if (!l) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        *l = (loan){{&loan_ops}, c};
        return pprt_link_p2p(&l->base, at, sender, bytes, depth, n, name, out, err);
    }
    const bool staged = !pprt_place_is_host(at);
    pprt_chan *full, *free_;
    pprt_link *host;
    PP_TRY(pprt_mpi_chan_create(m, peer, sender, bytes, depth, n, staged ? at->mem : NULL, &full, &free_, err));
    PP_TRY(pprt_link_chans(full, free_, NULL, 0, NULL, bytes, depth, sender, &host, err));
    if (!staged) {
        *out = host;
        return PP_OK;
    }
    return pprt_link_staged(host, at, !sender, name, out, err);
}

typedef struct side {
    pprt_stage_run run;
    pprt_stage_rec *rec; /* --profile, --trace: its record (tm_ctx.rec), else NULL */
    const pprt_backend *be;
    struct dev_sides *dev;
    int64_t M;
    int threads; /* its executor's intra-op threads */
    void *in_buf, *out_buf; /* a W stage's messages (it has no links) */
    pp_status s;
    bool own;
    pp_err e;
} side;

/* The device's stages on this rank: forward, backward and, in a zb-h1 plan,
 * the W stage (NULL where the plan has none), with what B keeps for W; stop
 * is set by the first side to fail (close_all). */
typedef struct dev_sides {
    side *s[3];
    pprt_stash *wk;
    atomic_bool stop;
} dev_sides;

/* A backward stage's device-local gradients (pprt_stage.n_local) to the
 * run's taker, numbered in the step (this replica's first is mb0). */
typedef struct local_to {
    const pprt_output_hook *h;
    int64_t mb0;
} local_to;

static pp_status take_local(void *ctx, int stage, int64_t mb, const void *msg, pp_err *err) {
    const local_to *l = ctx;
    return l->h->take_local(l->h->ctx, stage, l->mb0 + mb, msg, err);
}

static void close_all(side *w) {
    dev_sides *v = w->dev;
    atomic_store(&v->stop, true);
    for (int i = 0; i < 3; i++) {
        if (!v->s[i]) continue;
        if (v->s[i]->run.in) v->s[i]->run.in->ops->close(v->s[i]->run.in);
        if (v->s[i]->run.out) v->s[i]->run.out->ops->close(v->s[i]->run.out);
    }
    if (v->wk) pprt_stash_close(v->wk); /* wakes the W stage */
    if (w->run.gate) w->run.gate->stop(w->run.gate->ctx);
}

static void *side_main(void *arg) {
    side *w = arg;
    if (w->rec) w->rec->t_loop0 = pprt_now_s();
    w->s = pprt_stage_loop(&w->run, 0, w->M, &w->own, &w->e);
    if (w->s == PP_OK && w->run.out->ops->drain) w->s = w->run.out->ops->drain(w->run.out, &w->e);
    if (w->rec) w->rec->t_loop1 = pprt_now_s();
    if (w->s != PP_OK) close_all(w);
    return NULL;
}

static bool dev_stopped(void *ctx) { return atomic_load(&((dev_sides *)ctx)->stop); }

/* A zb-h1 plan's W stage: what B kept, through the gate, its gradients to the trainer (stage_loop.h) */
static void *w_side_main(void *arg) {
    side *w = arg;
    w->s = pprt_w_stage_loop(&w->run, w->in_buf, w->out_buf, 0, w->M, dev_stopped, w->dev, &w->e);
    if (w->s != PP_OK) {
        w->own = !atomic_load(&w->dev->stop); /* else its stash was closed by the stop */
        close_all(w);
    }
    return NULL;
}

/* The device's two stages' links (above), each end at its stage's place. */
static pp_status make_links(tm_ctx *c, const pprt_plan *p, const pprt_array *ins, int64_t M, int64_t mb0,
                            const pprt_run_opts *o, side *f, side *b, pp_err *err) {
    pprt_mpi *m = c->m;
    const int P = p->train_devices, d = m->stage, bs = 2 * P - 1 - d;
    const pprt_mem_ops *fpin = pprt_place_is_host(&c->fat) ? NULL : c->fat.mem;
    const pprt_mem_ops *bpin = pprt_place_is_host(&c->bat) ? NULL : c->bat.mem;
    if (d == 0) {
        PP_TRY(pprt_link_source(p, ins, M, 0, NULL, fpin, &f->run.in, err));
        if (fpin) PP_TRY(pprt_link_staged(f->run.in, &c->fat, true, "the inputs -> stage 0", &f->run.in, err));
    } else {
        PP_TRY(rank_link(m, m->rank - 1, false, c->fkind[0], c->fc[0], &c->fat, boundary_bytes(p, d - 1), o->depth, M,
                         &f->run.in, err));
    }
    if (d == P - 1) { /* the device's own turn: a queue (on its device), or a copy between the stages' places */
        char name[64];
        snprintf(name, sizeof name, "stage %d -> stage %d", d, d + 1);
        PP_TRY(pprt_link_between(&c->fat, &c->bat, boundary_bytes(p, d), o->depth, name, &f->run.out, err));
        b->run.in = f->run.out;
    } else {
        PP_TRY(rank_link(m, m->rank + 1, true, c->fkind[1], c->fc[1], &c->fat, boundary_bytes(p, d), o->depth, M,
                         &f->run.out, err));
        /* the backward links pass each micro-batch's gradients on as they come: two buffers do */
        PP_TRY(rank_link(m, m->rank + 1, false, c->bkind[1], c->bc[1], &c->bat, boundary_bytes(p, bs - 1), 2, M,
                         &b->run.in, err));
    }
    if (d == 0) {
        pprt_link *sink;
        PP_TRY(pprt_link_sink(p, NULL, M, 0, NULL, NULL, NULL, bpin, &sink, err));
        if (o->take_outputs) pprt_link_sink_take(sink, o->take_outputs, mb0);
        b->run.out = sink;
        if (bpin) PP_TRY(pprt_link_staged(sink, &c->bat, false, "the last stage -> the outputs", &b->run.out, err));
    } else {
        PP_TRY(rank_link(m, m->rank - 1, true, c->bkind[0], c->bc[0], &c->bat, boundary_bytes(p, bs), 2, M,
                         &b->run.out, err));
    }
    return PP_OK;
}

/* Stage s's executor on this host at its place: --threads, else the rank's cores (its two stages take turns
 * under 1F1B and GPipe). */
static pp_status make_exec(const pprt_plan *p, int s, const pprt_place *at, const pprt_run_opts *o, side *w,
                           pp_err *err) {
    PP_TRY(pprt_stage_backend(p, s, o->backend, &w->be, err));
    const pprt_exec_cfg cfg = pprt_stage_cfg(o, pprt_run_threads(o, pprt_rank_cores(pprt_mpi_env_local_size())), at);
    w->run.ex = w->be->exec;
    w->threads = cfg.threads;
    return pprt_keeper_exec(o->keep, w->be->exec, p, s, 0, &cfg, &w->run.x, err); /* a rank holds one replica's */
}

static pp_status send_bytes(void *ctx, int rank, const void *buf, size_t bytes, pp_err *err);
static pp_status recv_bytes(void *ctx, int rank, void *buf, size_t bytes, pp_err *err);

/* A run's shares as a record sees them: one replica of M micro-batches (this rank's replica's run) */
static pprt_shares run_shares(const pprt_plan *p, int64_t M) {
    return (pprt_shares){.b = pprt_mb_size(p), .M = M, .n = M * pprt_mb_size(p), .R = 1};
}

/* pprt --profile, --trace: the two stages' records for a run of M micro-batches (k: 0 forward, 1 backward),
 * their executors' counters taken before it (pprt_rec_base) */
static pp_status recs_begin(tm_ctx *c, const pprt_plan *p, int64_t M, const pprt_run_opts *o, side *w[2],
                            pp_err *err) {
    const pprt_shares sh = run_shares(p, M);
    for (int k = 0; k < 2; k++) {
        pprt_rec_free(&c->rec[k]);
        const bool nodes = o->trace && o->trace_nodes && w[k]->run.ex->node_seconds;
        PP_TRY(pprt_rec_init(&c->rec[k], p, &sh, w[k]->run.stage, 0, c->m->rank, o->trace, nodes, err));
        pprt_rec_base(&c->rec[k], w[k]->run.ex, w[k]->run.x);
        w[k]->rec = &c->rec[k];
        w[k]->run.trace = c->rec[k].tr.t ? &c->rec[k].tr : NULL;
        w[k]->run.prev_ns = c->rec[k].prev_ns;
    }
    c->rec_on = true;
    c->rec_backend = w[0]->run.ex->name, c->rec_threads = w[0]->threads;
    return PP_OK;
}

/* A zb-h1 plan's W stage 2P+d on this rank (pprt_plan.n_wstages), where it has nodes: on the backward stage's
 * place (its backend and device, as on threads), taking what B keeps for it (dv->wk). */
static pp_status make_w_side(tm_ctx *c, const pprt_plan *p, const pprt_run_opts *o, side *b, side *w,
                             dev_sides *dv, pp_err *err) {
    const int d = c->m->stage, ws = p->n_stages + d;
    PP_TRY(pprt_stash_new_w(p, d, &dv->wk, err));
    b->run.stash_out = dv->wk;
    if (!p->stages[ws].n_nodes) return PP_OK; /* nothing of the backward is deferred: no thread (as on threads) */
    PP_TRY(make_exec(p, ws, &c->bat, o, w, err));
    pprt_stash_on(dv->wk, &c->bat, &c->bat); /* B and W on one device: the entries in its memory */
    PP_TRY(pprt_w_bufs_new(&c->bat, &p->stages[ws], ws, &w->in_buf, &w->out_buf, err));
    w->run.stage = ws, w->run.stash_in = dv->wk;
    w->run.gate = o->gate, w->run.replica = c->m->replica;
    dv->s[2] = w;
    return PP_OK;
}

/* The first failure of the device's stages: a stage's own (its executor, a message out of order) before a
 * link or stash closed by it; NULL: none failed. */
static const side *first_failure(const dev_sides *v) {
    for (int i = 0; i < 3; i++)
        if (v->s[i] && v->s[i]->s != PP_OK && v->s[i]->own) return v->s[i];
    const int order[3] = {1, 0, 2};
    for (int i = 0; i < 3; i++)
        if (v->s[order[i]] && v->s[order[i]]->s != PP_OK) return v->s[order[i]];
    return NULL;
}

static pp_status run_device(void *ctx, const pprt_plan *p, const pprt_array *ins, int64_t M, int64_t mb0,
                            const pprt_run_opts *o, pp_err *err) {
    tm_ctx *c = ctx;
    pprt_mpi *m = c->m;
    const int P = p->train_devices, d = m->stage;
    dev_sides dv = {.s = {NULL, NULL, NULL}};
    side f = {.M = M, .dev = &dv}, b = {.M = M, .dev = &dv}, w = {.M = M, .dev = &dv};
    dv.s[0] = &f, dv.s[1] = &b;
    atomic_init(&dv.stop, false);
    pprt_stash *stash = NULL;
    pp_status s = pprt_stash_new(p, d, &stash, err);
    pprt_stash_on(stash, &c->fat, &c->bat); /* a GPU's memory: its copies */
    if (s == PP_OK) s = make_links(c, p, ins, M, mb0, o, &f, &b, err);
    if (s == PP_OK) s = make_exec(p, d, &c->fat, o, &f, err);
    if (s == PP_OK) s = make_exec(p, 2 * P - 1 - d, &c->bat, o, &b, err);
    f.run.stage = d, b.run.stage = 2 * P - 1 - d;
    side *both[2] = {&f, &b};
    c->rec_on = false;
    if (s == PP_OK && (o->node_times || o->trace)) s = recs_begin(c, p, M, o, both, err);
    f.run.stash_out = stash, b.run.stash_in = stash;
    if (s == PP_OK && p->n_wstages) s = make_w_side(c, p, o, &b, &w, &dv, err);
    if (s == PP_OK && o->share_keep) pprt_stash_share(stash, dv.wk);
    if (s != PP_OK) return s; /* the process ends (pprt_mpi_finish): what was made stays */
    f.run.gate = b.run.gate = o->gate;
    f.run.replica = b.run.replica = m->replica;
    local_to lt = {o->take_outputs, mb0};
    for (int i = 1; i < 3; i++) { /* B's device-local gradients, and W's */
        side *x = dv.s[i];
        if (!x || !p->stages[x->run.stage].n_local) continue;
        if (!o->take_outputs || !o->take_outputs->take_local)
            return PP_FAIL(err, PP_EINVAL, "stage %d has device-local outputs, and the run's taker takes none",
                           x->run.stage);
        x->run.local = take_local, x->run.local_ctx = &lt;
        x->run.local_unread = o->take_outputs->local_unread;
        if (!pprt_place_is_host(&c->bat)) /* the stage loop copies them down from the device (stage_loop.h) */
            x->run.local_mem = c->bat.mem, x->run.local_dev = c->bat.device,
            x->run.local_bytes = p->stages[x->run.stage].out.bytes;
    }
    pthread_t th, wth;
    const double t0 = pprt_now_s();
    if (pthread_create(&th, NULL, side_main, &f) != 0)
        return PP_FAIL(err, PP_ERUNTIME, "cannot start the thread of stage %d", d);
    if (dv.s[2] && pthread_create(&wth, NULL, w_side_main, &w) != 0) {
        close_all(&f);
        pthread_join(th, NULL);
        return PP_FAIL(err, PP_ERUNTIME, "cannot start the thread of stage %d", w.run.stage);
    }
    side_main(&b);
    pthread_join(th, NULL);
    if (dv.s[2]) pthread_join(wth, NULL);
    c->busy[0] = f.run.busy, c->busy[1] = b.run.busy, c->busy[2] = pprt_now_s() - t0;
    c->busy[3] = stash ? stash->peak : 0, c->busy[4] = stash ? (double)stash->bytes : 0;
    c->busy[5] = w.run.busy, c->busy[6] = dv.wk ? dv.wk->peak : 0, c->busy[7] = dv.wk ? (double)dv.wk->bytes : 0;
    c->busy[8] = (double)pprt_stash_entry_bytes(stash, dv.wk);
    const side *bad = first_failure(&dv);
    if (bad) {
        *err = bad->e;
        return bad->s;
    }
    for (int k = 0; c->rec_on && k < 2; k++) pprt_rec_done(&c->rec[k], p, both[k]->run.ex, both[k]->run.x, both[k]->run.busy);
    pprt_keeper_done(o->keep, f.be->exec, d, 0, f.run.x);
    pprt_keeper_done(o->keep, b.be->exec, 2 * P - 1 - d, 0, b.run.x);
    if (dv.s[2]) pprt_keeper_done(o->keep, w.be->exec, w.run.stage, 0, w.run.x);
    f.run.in->ops->destroy(f.run.in), b.run.out->ops->destroy(b.run.out);
    f.run.out->ops->destroy(f.run.out);
    if (b.run.in != f.run.out) b.run.in->ops->destroy(b.run.in);
    pprt_stash_free(stash);
    pprt_stash_free(dv.wk);
    pprt_w_bufs_free(&c->bat, w.in_buf, w.out_buf);
    return PP_OK;
}

static void run_busy(void *ctx, double out[PPRT_DIST_BUSY]) {
    memcpy(out, ((const tm_ctx *)ctx)->busy, PPRT_DIST_BUSY * sizeof *out);
}

static bool run_node_ms(void *ctx, double *out, const char **backend, int *threads) {
    const tm_ctx *c = ctx;
    const pprt_plan *p = c->plan;
    if (!c->rec_on || !c->rec[0].node_s) return false;
    for (int k = 0; k < 2; k++) {
        const pprt_stage_rec *r = &c->rec[k];
        int k0 = 0;
        for (int i = 0; i < r->stage; i++) k0 += p->stages[i].n_nodes;
        for (int j = 0; j < r->n_nodes; j++) out[k0 + j] = r->mbs ? r->node_s[j] * 1e3 / (double)r->mbs : 0;
    }
    *backend = c->rec_backend, *threads = c->rec_threads;
    return true;
}

/* The last run's records kept as the last training step's (its timeline for --trace) */
static void run_keep_trace(void *ctx) {
    tm_ctx *c = ctx;
    if (!c->rec_on) return;
    for (int k = 0; k < 2; k++) {
        pprt_rec_free(&c->kept[k]);
        c->kept[k] = c->rec[k];
        c->rec[k] = (pprt_stage_rec){0};
    }
    c->kept_on = true, c->rec_on = false;
}

/* pprt --trace at the end: replica 0's ranks send rank 0 their kept records on its clock; rank 0 makes the
 * timeline of the plan's stages from them (run.c pprt_stats_of, as a threaded run makes its own) */
static pp_status run_gather_trace(void *ctx, pprt_precision precision, pprt_trace **out, pp_err *err) {
    tm_ctx *c = ctx;
    const pprt_plan *p = c->plan;
    pprt_mpi *m = c->m;
    const int P = p->train_devices;
    *out = NULL;
    if (m->replica != 0) return PP_OK;
    if (!c->kept_on) return PP_FAIL(err, PP_ERUNTIME, "--trace: rank %d recorded no training step", m->rank);
    if (m->rank != 0) {
        for (int k = 0; k < 2; k++) {
            pprt_rec_shift(&c->kept[k], c->clock_off);
            pprt_rec_pack(&c->kept[k]);
            PP_TRY(send_bytes(c, 0, c->kept[k].msg, c->kept[k].len * sizeof(double), err));
        }
        return PP_OK;
    }
    const pprt_shares sh = run_shares(p, c->kept[0].mbs);
    pprt_stage_rec *recs = calloc(pp_count(2 * P), sizeof *recs);
    if (!recs) return PP_FAIL(err, PP_ENOMEM, "out of memory for the timeline");
    pp_status s = PP_OK;
    for (int k = 0; k < 2; k++) { /* rank 0's own: stages 0 and 2P-1 */
        pprt_rec_pack(&c->kept[k]);
        recs[c->kept[k].stage] = c->kept[k], c->kept[k] = (pprt_stage_rec){0};
    }
    c->kept_on = false;
    for (int r = 1; r < P && s == PP_OK; r++) /* rank r: device r's stages r and 2P-1-r, as it set them up */
        for (int k = 0; k < 2 && s == PP_OK; k++) {
            const int stage = k ? 2 * P - 1 - r : r;
            const bool nodes = recs[0].tr.node_s != NULL; /* (every rank's backend measures node times, or none) */
            s = pprt_rec_init(&recs[stage], p, &sh, stage, 0, r, recs[0].tr.t != NULL, nodes, err);
            if (s == PP_OK) s = recv_bytes(c, r, recs[stage].msg, recs[stage].len * sizeof(double), err);
            if (s == PP_OK) s = pprt_rec_unpack(&recs[stage], err);
        }
    pprt_stats st = {0};
    const pprt_stats_ctx sc = {.threads = c->rec_threads, .precision = precision, .backend = c->rec_backend,
                               .trace = true};
    if (s == PP_OK) s = pprt_stats_of(p, &sh, recs, 2 * P, &sc, &st, err);
    if (s == PP_OK) {
        *out = st.trace, st.trace = NULL;
        (*out)->latency_ms = NULL, (*out)->n_latency = 0; /* (st's, freed with it) */
    }
    free(st.stages), free(st.node_ms), free(st.latency_ms);
    pprt_trace_free(st.trace);
    for (int i = 0; i < 2 * P; i++) pprt_rec_free(&recs[i]);
    free(recs);
    return s;
}

static pp_status send_bytes(void *ctx, int rank, const void *buf, size_t bytes, pp_err *err) {
    pprt_mpi *m = ((tm_ctx *)ctx)->m;
    pprt_mpi_req *r;
    char who[64];
    pprt_mpi_describe(m, rank, who, sizeof who);
    PP_TRY(pprt_mpi_isend(m, buf, bytes, rank, PPRT_TAG_TRAIN, &r, err, "sending training's sums or weights to %s", who));
    return pprt_mpi_wait(m, r, err);
}

static pp_status recv_bytes(void *ctx, int rank, void *buf, size_t bytes, pp_err *err) {
    pprt_mpi *m = ((tm_ctx *)ctx)->m;
    pprt_mpi_req *r;
    char who[64];
    pprt_mpi_describe(m, rank, who, sizeof who);
    PP_TRY(pprt_mpi_irecv(m, buf, bytes, rank, PPRT_TAG_TRAIN, &r, err, "receiving training's sums or weights from %s",
                          who));
    return pprt_mpi_wait(m, r, err);
}

/* The training options that decide which micro-batches a rank runs when
 * (every rank must have them; the rest, such as --lr, only rank 0 reads). */
static void train_agreed(const pprt_train_opts *o, int64_t a[6]) {
    a[0] = o->steps, a[1] = o->epochs, a[2] = o->accumulate, a[3] = o->schedule_kind, a[4] = (int64_t)o->seed;
    a[5] = (int64_t)o->shuffle | (int64_t)(o->eval_dir != NULL) << 1 | (int64_t)(o->resume != NULL) << 2 |
           (int64_t)(o->checkpoint != NULL) << 3 | (int64_t)(o->save_dir != NULL) << 4;
}

static pp_status agree_train(pprt_mpi *m, const pprt_train_opts *o, pp_err *err) {
    static const char *const names[6] = {"--steps", "--epochs", "--accumulate", "--schedule", "--seed",
                                         "--no-shuffle, --eval, --resume, --checkpoint or --save-weights"};
    pprt_ctrl c = {0};
    char who[64], what[128];
    train_agreed(o, c.a);
    c.t[0] = o->opt.loss_scale;
    c.t[1] = (double)o->save_every; /* replica 0's ranks send rank 0 their weights for each checkpoint */
    /* a dynamic scale's rule: every rank halves and grows its own by rank 0's verdicts */
    snprintf(c.text, sizeof c.text, "%s, growth %.17g, backoff %.17g, interval %lld",
             o->opt.dynamic_scale ? "dynamic" : "static", o->opt.scale_growth, o->opt.scale_backoff,
             (long long)o->opt.scale_interval);
    if (m->rank != 0) {
        PP_TRY(pprt_mpi_send_ctrl(m, 0, PPRT_CTRL_TRAIN, &c, err));
        pprt_mpi_describe(m, 0, who, sizeof who);
        snprintf(what, sizeof what, "waiting for %s to compare the training options", who);
        return pprt_mpi_wait_ctrl(m, PPRT_CTRL_TRAIN, 0, &c, what, err);
    }
    for (int q = 1; q < m->size; q++) {
        pprt_ctrl t;
        pprt_mpi_describe(m, q, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the training options of %s", who);
        PP_TRY(pprt_mpi_wait_ctrl(m, PPRT_CTRL_TRAIN, q, &t, what, err));
        for (int i = 0; i < 6; i++)
            if (t.a[i] != c.a[i])
                return PP_FAIL(err, PP_EINVAL, "%s trains with another %s than rank 0 (%lld, rank 0 %lld): every "
                               "rank must get the same options", who, names[i], (long long)t.a[i], (long long)c.a[i]);
        if (t.t[0] != c.t[0]) /* every rank seeds its loss gradient with it and unscales its own device's sums */
            return PP_FAIL(err, PP_EINVAL, "%s trains with another --loss-scale than rank 0 (%g, rank 0 %g): every "
                           "rank must get the same options", who, t.t[0], c.t[0]);
        if (t.t[1] != c.t[1])
            return PP_FAIL(err, PP_EINVAL, "%s trains with another --save-every than rank 0 (%g, rank 0 %g): every "
                           "rank must get the same options", who, t.t[1], c.t[1]);
        if (strncmp(t.text, c.text, sizeof c.text) != 0)
            return PP_FAIL(err, PP_EINVAL, "%s trains with another loss scale rule than rank 0 (%.120s; rank 0: "
                           "%.120s; --loss-scale, --loss-scale-growth, --loss-scale-backoff, --loss-scale-interval): "
                           "every rank must get the same options", who, t.text, c.text);
    }
    for (int q = 1; q < m->size; q++) PP_TRY(pprt_mpi_send_ctrl(m, q, PPRT_CTRL_TRAIN, &c, err));
    return PP_OK;
}

/* One communicator of a boundary with rank `peer` (sender: this rank sends
 * on it): the sender makes its id and sends it over, then both open it (the
 * emulated one, or NCCL on the stage's device) within --mpi-timeout. */
static pp_status open_comm(pprt_mpi *m, int peer, bool sender, int kind, const pprt_place *at, pprt_p2p **out,
                           pp_err *err) {
    *out = NULL;
    if (kind != PPRT_BK_NCCL && kind != PPRT_BK_NCCL_EMU) return PP_OK;
    unsigned char id[PPRT_P2P_ID] = {0};
    pp_status s = PP_OK;
#ifdef PPRT_WITH_NCCL
    if (sender && kind == PPRT_BK_NCCL) s = pprt_nccl_id(id, err);
#endif
    if (sender && kind == PPRT_BK_NCCL_EMU) s = pprt_p2p_emu_id(id, err);
    PP_TRY(s);
    tm_ctx c = {.m = m};
    PP_TRY(sender ? send_bytes(&c, peer, id, sizeof id, err) : recv_bytes(&c, peer, id, sizeof id, err));
#ifdef PPRT_WITH_NCCL
    if (kind == PPRT_BK_NCCL) return pprt_nccl_open(m, peer, sender, id, at->device, out, err);
#else
    (void)at;
    if (kind == PPRT_BK_NCCL)
        return PP_FAIL(err, PP_EUNSUP, "the boundary with rank %d would go over NCCL, which this build lacks", peer);
#endif
    return pprt_p2p_emu_open(m, peer, id, out, err);
}

/* The replicas' chain of sums on the devices: this rank's device in replica k exchanges sums with replicas k-1,
 * k+1 and the last (which sends the whole sums back to every earlier one); a communicator a pair, opened in the
 * order of the pairs (after every boundary's), on --transport nccl with the backward stage on a device. */
static pp_status chain_comms(tm_ctx *c, const pprt_plan *p, pp_err *err) {
    pprt_mpi *m = c->m;
    const int P = p->train_devices, R = m->replicas, k = m->replica, d = m->stage;
    if (R < 2 || pprt_place_is_host(&c->bat) || m->transport == PPRT_TRANSPORT_MPI) return PP_OK;
    const pprt_mem_ops *mem = c->bat.mem;
    if (m->transport == PPRT_TRANSPORT_AUTO && !mem->nccl) return PP_OK; /* AUTO: NCCL on GPUs, as the boundaries */
    const int kind = mem->nccl ? PPRT_BK_NCCL : mem->host_addressable ? PPRT_BK_NCCL_EMU : -1;
    if (kind < 0) return PP_OK;
    if (!(c->rc = calloc((size_t)m->size, sizeof *c->rc))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int j = 0; j < R; j++) {
        const bool pair = j != k && (j == k - 1 || j == k + 1 || j == R - 1 || k == R - 1);
        if (!pair) continue;
        const int peer = j * P + d;
        pp_err e = {0};
        if (open_comm(m, peer, k < j, kind, &c->bat, &c->rc[peer], &e) != PP_OK)
            return PP_FAIL(err, e.code, "the replicas' chain of sums on device %d, with replica %d: %s", d, j, e.msg);
    }
    PP_TRY(mem->stream_new(c->bat.device, &c->rs, err));
    return mem->event_new(c->bat.device, &c->rev, err);
}

static pp_status chain_check(void *ctx, pp_err *err) {
    pprt_p2p *k = ctx;
    return k->ops->check(k, err);
}

/* A transfer of the chain (pprt_train_dist.dsend, drecv), waited for: its communicator's faults end the wait. */
static pp_status chain_xfer(void *ctx, int rank, void *buf, size_t bytes, bool send, pp_err *err) {
    tm_ctx *c = ctx;
    pprt_p2p *k = c->rc && rank >= 0 && rank < c->m->size ? c->rc[rank] : NULL;
    char who[64];
    pprt_mpi_describe(c->m, rank, who, sizeof who);
    if (!k) return PP_FAIL(err, PP_ERUNTIME, "internal: no communicator of the replicas' chain with %s", who);
    const pprt_mem_ops *mem = c->bat.mem;
    pp_err e = {0};
    pp_status s = send ? k->ops->send(k, buf, bytes, c->rs, &e) : k->ops->recv(k, buf, bytes, c->rs, &e);
    if (s == PP_OK) s = mem->record(c->rev, c->rs, &e);
    if (s == PP_OK) s = pprt_event_poll(mem, c->rev, &c->rstop, chain_check, k, &e);
    if (s != PP_OK) {
        k->ops->abort(k);
        return PP_FAIL(err, s, "the replicas' chain of sums %s %s (%s, %zu bytes): %s", send ? "to" : "from", who,
                       k->ops->name, bytes, e.msg);
    }
    return PP_OK;
}

static void chain_stop(void *ctx) {
    tm_ctx *c = ctx;
    atomic_store(&c->rstop, true);
}

static pp_status chain_send(void *ctx, int rank, const void *buf, size_t bytes, pp_err *err) {
    return chain_xfer(ctx, rank, (void *)buf, bytes, true, err);
}

static pp_status chain_recv(void *ctx, int rank, void *buf, size_t bytes, pp_err *err) {
    return chain_xfer(ctx, rank, buf, bytes, false, err);
}

/* The ctx of this rank (tm_ctx): its stages' places, its boundaries' transports, and their NCCL communicators
 * opened in one order on every rank (the pair with rank r-1, then with r+1; in each the forward boundary first),
 * so that each open meets its peer's. */
static pp_status transports(tm_ctx *c, pprt_mpi *m, const pprt_plan *p, const pprt_backend *override, pp_err *err) {
    const int P = p->train_devices, d = m->stage, bs = 2 * P - 1 - d;
    *c = (tm_ctx){.m = m, .override = override, .fkind = {-1, -1}, .bkind = {-1, -1}};
    const pprt_backend *fb, *bb;
    PP_TRY(pprt_stage_backend_resolve(p, d, override, &fb, err));
    PP_TRY(pprt_stage_backend_resolve(p, bs, override, &bb, err));
    PP_TRY(pprt_stage_place(p, d, fb, pprt_mpi_env_local_rank(), &c->fat, err));
    PP_TRY(pprt_stage_place(p, bs, bb, pprt_mpi_env_local_rank(), &c->bat, err));
    if (d > 0) { /* forward: stage d-1 -> d; backward: stage bs -> bs+1 */
        PP_TRY(pprt_mpi_boundary_kind(m, p, override, d - 1, &c->fkind[0], err));
        PP_TRY(pprt_mpi_boundary_kind(m, p, override, bs, &c->bkind[0], err));
        PP_TRY(open_comm(m, m->rank - 1, false, c->fkind[0], &c->fat, &c->fc[0], err));
        PP_TRY(open_comm(m, m->rank - 1, true, c->bkind[0], &c->bat, &c->bc[0], err));
    }
    if (d < P - 1) { /* forward: stage d -> d+1; backward: stage bs-1 -> bs */
        PP_TRY(pprt_mpi_boundary_kind(m, p, override, d, &c->fkind[1], err));
        PP_TRY(pprt_mpi_boundary_kind(m, p, override, bs - 1, &c->bkind[1], err));
        PP_TRY(open_comm(m, m->rank + 1, true, c->fkind[1], &c->fat, &c->fc[1], err));
        PP_TRY(open_comm(m, m->rank + 1, false, c->bkind[1], &c->bat, &c->bc[1], err));
    }
    return chain_comms(c, p, err);
}

pp_status pprt_train_mpi(pprt_mpi *m, const pprt_plan *p, const pprt_train_opts *o, const pprt_run_opts *ro,
                         pprt_train_dist *out, pp_err *err) {
    if (m->stages != p->train_devices) return PP_FAIL(err, PP_ERUNTIME, "internal: pprt_mpi_bind was not called");
    if (p->n_stages != 2 * p->train_devices)
        return PP_FAIL(err, PP_EUNSUP, "training under mpirun runs plans of a forward and a backward stage per device; "
                       "this one has %d stages for %d devices: train it on threads (pprt without mpirun)", p->n_stages,
                       p->train_devices);
    PP_TRY(pprt_mpi_agree(m, p, ro->depth, &the_ctx.clock_off, err));
    PP_TRY(agree_train(m, o, err));
    const double off = the_ctx.clock_off;
    PP_TRY(transports(&the_ctx, m, p, ro->backend, err));
    the_ctx.plan = p, the_ctx.clock_off = off;
    *out = (pprt_train_dist){.ctx = &the_ctx, .rank = m->rank, .size = m->size, .devices = p->train_devices,
                             .replica = m->replica, .replicas = m->replicas, .run = run_device, .send = send_bytes,
                             .recv = recv_bytes, .dev_chain = the_ctx.rc != NULL, .dsend = chain_send,
                             .drecv = chain_recv, .dstop = chain_stop, .busy = run_busy, .node_ms = run_node_ms,
                             .keep_trace = run_keep_trace, .gather_trace = run_gather_trace};
    return PP_OK;
}
