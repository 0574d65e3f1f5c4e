/* sched.c: the threaded driver: one thread per stage (per stage of each
 * replica: --replicas R runs R pipelines of the plan's stages side by side,
 * replica k on the k-th contiguous share of the micro-batches, as the MPI
 * driver shares them), the stages joined by
 * in-process links (link.h: `depth` buffers circulate per boundary, which
 * bounds the micro-batches in flight; host queues between host stages,
 * device queues between stages on one device, copy links between places:
 * peer copies, pinned staging), a source link before stage 0 that cuts
 * micro-batches out of the input arrays (padding the last with zeros) and a
 * sink link after the last stage that copies results into the output
 * arrays, so output order is input order (both staged through pinned
 * memory when their stage is on a device). Each thread runs the stage loop
 * (stage_loop.c) with its stage's executor, made by the run's backend
 * (backend.h), and fills its stage's record (run.h), from which the
 * statistics come as under MPI (pprt_stats_of).
 *
 * Any error stops everything: the failing stage records it (with stage and
 * micro-batch), closes every link, and the blocked threads return. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ir/json.h"
#include "backend.h"
#include "keep.h"
#include "microbatch.h"
#include "nodes.h"
#include "pprt.h"
#include "run.h"
#include "stage_loop.h"

typedef struct sched sched;

typedef struct prog_ctx {
    sched *S;
    int replica;
} prog_ctx;

/* A barrier whose party can shrink (when a stage thread fails to start). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int need, have;
    unsigned gen;
} meeting;

static void meet_wait(meeting *m) {
    pthread_mutex_lock(&m->mu);
    unsigned gen = m->gen;
    if (++m->have >= m->need) {
        m->have = 0;
        m->gen++;
        pthread_cond_broadcast(&m->cv);
    } else {
        while (gen == m->gen) pthread_cond_wait(&m->cv, &m->mu);
    }
    pthread_mutex_unlock(&m->mu);
}

static void meet_shrink(meeting *m, int need) {
    pthread_mutex_lock(&m->mu);
    m->need = need;
    if (m->have > 0 && m->have >= need) {
        m->have = 0;
        m->gen++;
        pthread_cond_broadcast(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
}

typedef struct {
    sched *S;
    const pprt_backend *be; /* the stage's backend */
    pprt_place at;          /* where it runs: host, or a device of the backend's space */
    pprt_stage_run run;
    const int *cpu; /* the CPUs the stage is pinned to, `threads` of them; NULL: not pinned */
    int threads;    /* intra-op threads (pprt_exec_cfg) */
    pprt_stage_rec *rec; /* what it measures (run.h); NULL: a W stage's (busy time alone) */
    void *in_buf, *out_buf; /* a W stage's messages */
    bool started;           /* a W stage's thread runs (none where the stage has no node) */
} worker;

struct sched {
    const pprt_plan *p;
    const pprt_run_opts *o;
    int64_t n, m;      /* samples, micro-batches */
    int P, R, W;       /* stages, replicas, stage threads (R x P) */
    pprt_shares sh;    /* their shares of the micro-batches (microbatch.h) */
    worker *w;         /* W: replica k's stage i at k P + i */
    pprt_stage_rec *recs; /* W, as w */
    const pprt_backend **be; /* P: each stage's backend */
    pthread_t *th;     /* W */
    int started;       /* stage threads started */
    pprt_link **links; /* R x (P + 1): each replica's source, P - 1 boundaries, sink */
    pprt_stash **stash; /* a training plan: R x devices, each replica's device's stash (or NULL) */
    /* a zb-h1 plan (pprt_plan.n_wstages): R x NW W-stage threads (replica k's device d at k NW + d; no
     * thread where the W stage has no node), what each device's B keeps for its W */
    int NW, wstarted;
    worker *ww;
    pthread_t *wth;
    pprt_stash **wkeep;
    int64_t *done;     /* per replica: micro-batches its sink has (the progress bar) */
    prog_ctx *pcs;   /* per replica: its sink's progress context */
    pprt_array *ins, *outs; /* each replica's share of the inputs and outputs: views into the arrays */
    int *cpus;         /* the CPUs this process may use */
    int cores, threads; /* their count; intra-op threads per stage */
    size_t rss_loaded;
    pthread_mutex_t err_mu;
    meeting ready; /* the stage threads and the main thread */
    pp_err err;
    bool failed;
    pprt_dev_desc *dd; /* P: replica 0's stages' devices (name[0] == 0: on the host) */
    bool differ;
};

/* Record the first failure and close every link, which wakes every waiter. */
static void stop_all(sched *S, const pp_err *e) {
    pthread_mutex_lock(&S->err_mu);
    if (!S->failed) {
        S->failed = true;
        S->err = *e;
    }
    pthread_mutex_unlock(&S->err_mu);
    for (int b = 0; b < S->R * (S->p->n_stages + 1); b++)
        if (S->links[b]) S->links[b]->ops->close(S->links[b]);
    for (int k = 0; S->wkeep && k < S->R * S->NW; k++) pprt_stash_close(S->wkeep[k]);
    if (S->o->gate) S->o->gate->stop(S->o->gate->ctx); /* no stage waits in it for one that stopped */
}

static bool is_failed(sched *S) {
    pthread_mutex_lock(&S->err_mu);
    bool f = S->failed;
    pthread_mutex_unlock(&S->err_mu);
    return f;
}

/* A sink's progress: a bar on stderr over every replica's. */

static void progress(void *ctx, int64_t count) {
    const prog_ctx *c = ctx;
    sched *S = c->S;
    pthread_mutex_lock(&S->err_mu);
    S->done[c->replica] = count;
    int64_t done = 0;
    for (int k = 0; k < S->R; k++) done += S->done[k];
    pthread_mutex_unlock(&S->err_mu);
    int width = 40, fill = (int)(done * width / S->m);
    fprintf(stderr, "\r[%.*s%*s] %lld/%lld micro-batches", fill,
            "########################################", width - fill, "", (long long)done,
            (long long)S->m);
    if (done == S->m) fputc('\n', stderr);
}

/* Replica k's links (its share S->sh): the source over its share of the
 * inputs (staged onto stage 0's device if it has one), the links between
 * stages' places, the sink into its share of the outputs (staged likewise);
 * in and out: its shares (n samples); the source and sink record each
 * micro-batch's times into its first and last stages' records. Staging is
 * overlapped where the device's space says so (mem.h overlap_ends:
 * --cuda-overlap), through max(2, --depth) buffers a direction. */
static bool overlapped(const pprt_place *at) { return at->mem->overlap_ends && at->mem->overlap_ends(); }

static pp_status make_links(sched *S, int k, const pprt_array *in, pprt_array *out, int64_t n, pp_err *err) {
    const pprt_plan *p = S->p;
    const pprt_run_opts *o = S->o;
    const int P = S->P;
    const worker *w = S->w + (size_t)k * (size_t)P;
    pprt_link **L = S->links + (size_t)k * (size_t)(P + 1);
    const pprt_place *first = &w[0].at, *last = &w[P - 1].at;
    pprt_link *src = NULL, *sink = NULL;
    char rep[32] = "";
    if (S->R > 1) snprintf(rep, sizeof rep, " (replica %d)", k);
    PP_TRY(pprt_link_source(p, in, n, o->warmup, w[0].rec->t_start, pprt_place_is_host(first) ? NULL : first->mem,
                            &src, err));
    const int nb = o->depth > 2 ? o->depth : 2;
    if (pprt_place_is_host(first)) L[0] = src;
    else if (overlapped(first))
        PP_TRY(pprt_link_staged_overlap(src, first, true, nb, o->warmup + w[0].rec->mbs, "the inputs -> stage 0", &L[0],
                                        err));
    else PP_TRY(pprt_link_staged(src, first, true, "the inputs -> stage 0", &L[0], err));
    for (int b = 0; b < P - 1; b++) {
        char name[96];
        snprintf(name, sizeof name, "stage %d -> stage %d%s", b, b + 1, rep);
        /* a training plan's stash makes a forward stage's outgoing message, or a
         * backward stage's incoming one, longer than the other end's */
        const size_t bytes = p->stages[b].out.bytes > p->stages[b + 1].in.bytes ? p->stages[b].out.bytes
                                                                                 : p->stages[b + 1].in.bytes;
        /* a training plan's backward stages pass each micro-batch's gradients on as they come
         * (each device's weight gradients leave at its own backward stage, pprt_stage.n_local):
         * two buffers are enough there, whatever the forward links hold in flight */
        const int depth = p->train_devices && b >= p->train_devices && o->depth > 2 ? 2 : o->depth;
        PP_TRY(pprt_link_between(&w[b].at, &w[b + 1].at, bytes, depth, name, &L[b + 1], err));
    }
    S->pcs[k] = (prog_ctx){S, k};
    PP_TRY(pprt_link_sink(p, out, n, o->warmup, w[P - 1].rec->t_end, o->progress ? progress : NULL, &S->pcs[k],
                          pprt_place_is_host(last) ? NULL : last->mem, &sink, err));
    if (o->take_outputs) pprt_link_sink_take(sink, o->take_outputs, pprt_share_first(&S->sh, k) / pprt_mb_size(p));
    if (pprt_place_is_host(last)) L[P] = sink;
    else {
        char name[64];
        snprintf(name, sizeof name, "stage %d -> the outputs", P - 1);
        if (overlapped(last)) PP_TRY(pprt_link_staged_overlap(sink, last, false, nb, 0, name, &L[P], err));
        else PP_TRY(pprt_link_staged(sink, last, false, name, &L[P], err));
    }
    return PP_OK;
}

/* Tags k0 .. k1-1 of the stage's sequence, then its outgoing link drained
 * where it drains (an overlapped sink: every output written); a failure
 * stops the pipeline (one that is only a link closed by that stop records
 * nothing new). */
static void stage_loop(worker *w, int64_t k0, int64_t k1) {
    pp_err e = {0};
    bool own = false;
    pp_status s = pprt_stage_loop(&w->run, k0, k1, &own, &e);
    if (s == PP_OK && w->run.out->ops->drain) s = w->run.out->ops->drain(w->run.out, &e);
    if (s != PP_OK && (own || !is_failed(w->S))) stop_all(w->S, &e);
}

/* A stage thread: pins itself, creates its executor (so that the executor's
 * own threads, OpenMP's for oneDNN, belong to this thread and inherit its
 * cores), runs the warm-up micro-batches, then the timed ones. The main
 * thread meets the stage threads at `ready` twice: once every executor
 * exists, once the warm-up has drained out of the pipeline. A failed thread
 * still arrives at each meeting, so nobody waits forever. */
static void *stage_main(void *arg) {
    worker *w = arg;
    sched *S = w->S;
    if (w->cpu) {
        /* the executor's own threads (OpenMP) inherit this mask */
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int k = 0; k < w->threads; k++) CPU_SET(w->cpu[k], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    }
    pp_err e = {0};
    pprt_exec_cfg cfg = pprt_stage_cfg(S->o, w->threads, &w->at);
    const int s = w->run.stage;
    if (pprt_keeper_exec(S->o->keep, w->be->exec, S->p, s, w->run.replica, &cfg, &w->run.x, &e) != PP_OK) {
        pp_err f = {0};
        PP_WRAP(&f, &e, e.code, "stage %d: %s", s, e.msg);
        stop_all(S, &f);
    }
    pprt_rec_base(w->rec, w->be->exec, w->run.x); /* a kept executor's counters ran on over earlier runs */
    meet_wait(&S->ready);
    if (!is_failed(S)) stage_loop(w, 0, S->o->warmup);
    /* first runs pay page faults and cold caches: the profile leaves them out */
    if (S->o->warmup > 0) pprt_rec_warm(w->rec, w->be->exec, w->run.x);
    meet_wait(&S->ready);
    w->rec->t_loop0 = pprt_now_s();
    if (!is_failed(S)) stage_loop(w, S->o->warmup, S->o->warmup + w->rec->mbs);
    w->rec->t_loop1 = pprt_now_s();
    pprt_rec_done(w->rec, S->p, w->be->exec, w->run.x, w->run.busy);
    return NULL;
}

/* A zb-h1 plan's W stage (device d's weight gradients): takes what its B
 * kept for it, micro-batch by micro-batch in order, runs through the gate
 * (the schedule defers it), hands its gradients to the trainer. */
static bool w_stopped(void *ctx) { return is_failed(ctx); }

static void w_loop(worker *w, int64_t k0, int64_t k1) {
    sched *S = w->S;
    pp_err e = {0};
    if (pprt_w_stage_loop(&w->run, w->in_buf, w->out_buf, k0, k1, w_stopped, S, &e) != PP_OK && !is_failed(S))
        stop_all(S, &e); /* a stash closed by the stop is the stop's, not a failure of its own */
}

static void *w_main(void *arg) {
    worker *w = arg;
    sched *S = w->S;
    pp_err e = {0};
    pprt_exec_cfg cfg = pprt_stage_cfg(S->o, w->threads, &w->at);
    const pprt_stage *st = &S->p->stages[w->run.stage];
    if (pprt_w_bufs_new(&w->at, st, w->run.stage, &w->in_buf, &w->out_buf, &e) != PP_OK) { /* on its device */
        stop_all(S, &e);
    } else if (pprt_keeper_exec(S->o->keep, w->be->exec, S->p, w->run.stage, w->run.replica, &cfg, &w->run.x, &e) !=
               PP_OK) {
        pp_err f = {0};
        PP_WRAP(&f, &e, e.code, "stage %d: %s", w->run.stage, e.msg);
        stop_all(S, &f);
    }
    meet_wait(&S->ready);
    if (!is_failed(S)) w_loop(w, 0, S->o->warmup);
    meet_wait(&S->ready);
    if (!is_failed(S)) w_loop(w, S->o->warmup, S->o->warmup + pprt_share_mbs(&S->sh, w->run.replica));
    return NULL;
}

/* What is wrong with the arguments before anything is allocated; S->m and S->sh set. */
static pp_status check_args(sched *S, const pprt_array *inputs, pp_err *err) {
    const pprt_plan *p = S->p;
    const pprt_run_opts *o = S->o;
    const int64_t n = S->n;
    if (n < 1) return PP_FAIL(err, PP_EINVAL, "no samples to run");
    if (o->depth < 1) return PP_FAIL(err, PP_EINVAL, "--depth must be >= 1, got %d", o->depth);
    if (o->warmup < 0) return PP_FAIL(err, PP_EINVAL, "--warmup must be >= 0, got %d", o->warmup);
    for (int i = 0; i < p->n_inputs; i++)
        if (inputs[i].n != n)
            return PP_FAIL(err, PP_EINVAL, "input '%s' has %lld samples, expected %lld like the first",
                           p->inputs[i].name, (long long)inputs[i].n, (long long)n);
    /* a gradient plan's sets are a training step's micro-batches (runtime/train.c) */
    if (p->batch == 0 && n != 1 && !p->train_devices)
        return PP_FAIL(err, PP_EINVAL, "an unbatched plan (-b 0) runs exactly one set of inputs, got %lld",
                       (long long)n);
    S->m = pprt_mb_count(p, n);
    S->sh = (pprt_shares){pprt_mb_size(p), S->m, n, S->R};
    if (S->R > S->m)
        return PP_FAIL(err, PP_EINVAL, "--replicas %d: the run has only %lld micro-batches (%lld samples, %lld a "
                                       "micro-batch), so some replica would have none; at most %lld",
                       S->R, (long long)S->m, (long long)n, (long long)pprt_mb_size(p), (long long)S->m);
    return PP_OK;
}

static pp_status alloc_run(sched *S, pp_err *err) {
    const int NI = S->p->n_inputs, NO = S->p->n_outputs;
    S->w = calloc((size_t)S->W, sizeof *S->w);
    S->recs = calloc((size_t)S->W, sizeof *S->recs);
    S->be = calloc((size_t)S->P, sizeof *S->be);
    S->th = calloc((size_t)S->W, sizeof *S->th);
    S->links = calloc((size_t)S->R * (size_t)(S->P + 1), sizeof *S->links);
    S->done = calloc((size_t)S->R, sizeof *S->done);
    S->pcs = calloc((size_t)S->R, sizeof *S->pcs);
    S->ins = calloc((size_t)S->R * (size_t)(NI > 0 ? NI : 1), sizeof *S->ins);
    S->outs = calloc((size_t)S->R * (size_t)(NO > 0 ? NO : 1), sizeof *S->outs);
    S->cpus = malloc(CPU_SETSIZE * sizeof *S->cpus);
    S->stash = calloc((size_t)S->R * (size_t)(S->p->train_devices > 0 ? S->p->train_devices : 1), sizeof *S->stash);
    if (!S->stash || !S->w || !S->recs || !S->be || !S->th || !S->links || !S->done || !S->pcs || !S->ins || !S->outs || !S->cpus)
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    S->NW = S->p->n_wstages;
    if (S->NW && (!(S->ww = calloc((size_t)(S->R * S->NW), sizeof *S->ww)) ||
                  !(S->wth = calloc((size_t)(S->R * S->NW), sizeof *S->wth)) ||
                  !(S->wkeep = calloc((size_t)(S->R * S->NW), sizeof *S->wkeep))))
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    return PP_OK;
}

/* Each stage's backend and place (every replica's stage i alike), and the
 * output arrays (64-byte aligned: the sink may lend places in them to the
 * last stage, link_data.c). */
static pp_status place_stages(sched *S, pprt_array *outputs, pp_err *err) {
    const pprt_plan *p = S->p;
    for (int i = 0; i < S->P; i++) PP_TRY(pprt_stage_backend(p, i, S->o->backend, &S->be[i], err));
    for (int wi = 0; wi < S->W; wi++) /* replica k's stages on the devices after replica k - 1's */
        PP_TRY(pprt_stage_place_replica(p, wi % S->P, S->be[wi % S->P], wi / S->P, &S->w[wi].at, err));
    for (int i = 0; i < p->n_outputs; i++) {
        outputs[i].n = S->n;
        if (S->o->take_outputs) { /* handed over as they come (pprt_run_opts.take_outputs) */
            outputs[i].data = NULL;
            continue;
        }
        if (posix_memalign(&outputs[i].data, 64, (size_t)S->n * p->outputs[i].sample_bytes + 1) != 0)
            outputs[i].data = NULL;
        if (!outputs[i].data)
            return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for output '%s'",
                           (size_t)S->n * p->outputs[i].sample_bytes + 1, p->outputs[i].name);
    }
    return PP_OK;
}

/* Every stage thread's worker: its stage's backend and place, its record,
 * its intra-op threads and cores (stage i of replica k gets the (k P + i)-th
 * `threads` of the cores this process may use, under taskset or a cpuset,
 * where every stage thread has its own; a backend whose kernels are
 * single-threaded takes one). */
static pp_status make_workers(sched *S, pp_err *err) {
    const pprt_run_opts *o = S->o;
    const int P = S->P;
    S->cores = pprt_cpus_allowed(S->cpus, CPU_SETSIZE); /* >= 1 */
    S->threads = pprt_run_threads(o, S->cores / S->W);
    for (int wi = 0; wi < S->W; wi++) {
        const int k = wi / P, i = wi % P;
        worker *x = &S->w[wi];
        const pprt_place at = x->at; /* place_stages's */
        *x = (worker){.S = S, .be = S->be[i], .at = at, .rec = &S->recs[wi]};
        x->threads = x->be->multithreaded || o->threads > 0 ? S->threads : 1;
        if (o->pin && (long)S->cores >= (long)S->W * S->threads) x->cpu = S->cpus + (size_t)wi * (size_t)S->threads;
        PP_TRY(pprt_rec_init(x->rec, S->p, &S->sh, i, k, -1, o->trace, o->trace_nodes && x->be->exec->node_seconds,
                             err));
        x->run = (pprt_stage_run){.stage = i, .ex = x->be->exec, .warmup = o->warmup,
                                  .mb_offset = pprt_share_lo(&S->sh, k), .trace = o->trace ? &x->rec->tr : NULL,
                                  .prev_ns = x->rec->prev_ns, .gate = o->gate, .replica = k};
    }
    for (int wi = 0; wi < S->R * S->NW; wi++) { /* zb-h1's W stages: the device's B's backend and threads */
        const int k = wi / S->NW, d = wi % S->NW, b = 2 * S->NW - 1 - d;
        worker *x = &S->ww[wi];
        const worker *bw = &S->w[k * P + b];
        *x = (worker){.S = S, .be = S->be[b], .at = bw->at, .threads = bw->threads};
        x->run = (pprt_stage_run){.stage = P + d, .ex = x->be->exec, .warmup = o->warmup,
                                  .mb_offset = pprt_share_lo(&S->sh, k), .gate = o->gate, .replica = k};
    }
    return PP_OK;
}

/* A training plan's device-local outputs (pprt_stage.n_local) when nobody
 * takes them (pprt_run_opts.take_outputs): into the output arrays, as the
 * sink writes the others. */
static pp_status local_into_arrays(void *ctx, int stage, int64_t mb, const void *msg, pp_err *err) {
    (void)err;
    const prog_ctx *c = ctx;
    const sched *S = c->S;
    const int k = c->replica;
    pprt_mb_drain_stage(S->p, stage, true, msg, pprt_share_samples(&S->sh, k), mb - pprt_share_lo(&S->sh, k),
                        S->outs + (size_t)k * (size_t)S->p->n_outputs);
    return PP_OK;
}

/* A stage on a device hands its device-local outputs over from a copy in host memory (stage_loop.h). */
static void local_place(pprt_stage_run *r, const pprt_place *at, size_t bytes) {
    if (pprt_place_is_host(at)) return;
    r->local_mem = at->mem, r->local_dev = at->device, r->local_bytes = bytes;
}

/* The links of each replica: source, boundaries (each with its buffers,
 * where its stages want them), sink; over its share of the arrays. */
static pp_status link_replicas(sched *S, const pprt_array *inputs, pprt_array *outputs, pp_err *err) {
    const pprt_plan *p = S->p;
    const int NI = p->n_inputs, NO = p->n_outputs, P = S->P;
    for (int k = 0; k < S->R; k++) {
        const int64_t first = pprt_share_first(&S->sh, k), nk = pprt_share_samples(&S->sh, k);
        pprt_array *in = S->ins + (size_t)k * (size_t)NI, *out = S->outs + (size_t)k * (size_t)NO;
        for (int i = 0; i < NI; i++)
            in[i] = (pprt_array){(char *)inputs[i].data + (size_t)first * p->inputs[i].sample_bytes, nk};
        for (int i = 0; i < NO; i++)
            out[i] = (pprt_array){outputs[i].data ? (char *)outputs[i].data + (size_t)first * p->outputs[i].sample_bytes
                                                  : NULL, nk};
        PP_TRY(make_links(S, k, in, out, nk, err));
        pprt_link **L = S->links + (size_t)k * (size_t)(P + 1);
        for (int i = 0; i < P; i++) {
            pprt_stage_run *r = &S->w[k * P + i].run;
            r->in = L[i], r->out = L[i + 1];
            if (!p->stages[i].n_local) continue;
            const pprt_output_hook *h = S->o->take_outputs;
            r->local = h ? h->take_local : local_into_arrays;
            r->local_ctx = h ? h->ctx : &S->pcs[k];
            r->local_unread = h ? h->local_unread : NULL;
            if (!r->local) return PP_FAIL(err, PP_EINVAL, "stage %d has device-local outputs, and the run's taker "
                                          "takes none", i);
            local_place(r, &S->w[k * P + i].at, p->stages[i].out.bytes);
        }
        const int D = p->train_devices;
        for (int d = 0; d < D; d++) {
            pprt_stash **st = &S->stash[k * D + d];
            PP_TRY(pprt_stash_new(p, d, st, err));
            pprt_stash_on(*st, &S->w[k * P + d].at, &S->w[k * P + 2 * D - 1 - d].at); /* a GPU's memory: its copies */
            /* the last device's backward stage is its forward's next, on a host queue that hands it the
             * forward's own buffer: the stash rides in the message (stash.h; a GB copied out and in again
             * per micro-batch of ResNet-50 at batch 8 otherwise) */
            if (*st && d == D - 1 && (*st)->aligned && pprt_place_is_host(&S->w[k * P + d].at) &&
                pprt_place_is_host(&S->w[k * P + d + 1].at) && !getenv("PPRT_STASH_COPY"))
                (*st)->through = true;
            S->w[k * P + d].run.stash_out = *st;
            S->w[k * P + 2 * D - 1 - d].run.stash_in = *st;
            if (!S->NW) continue;
            pprt_stash **wk = &S->wkeep[k * D + d]; /* zb-h1: what B keeps for its W */
            PP_TRY(pprt_stash_new_w(p, d, wk, err));
            S->w[k * P + 2 * D - 1 - d].run.stash_out = *wk;
            pprt_stash_on(*wk, &S->w[k * P + 2 * D - 1 - d].at, &S->ww[k * D + d].at); /* one device: its memory */
            if (S->o->share_keep) pprt_stash_share(*st, *wk);
            pprt_stage_run *r = &S->ww[k * D + d].run;
            r->stash_in = *wk;
            const pprt_output_hook *h = S->o->take_outputs;
            r->local = !p->stages[P + d].n_local ? NULL : h ? h->take_local : local_into_arrays;
            r->local_ctx = h ? h->ctx : &S->pcs[k];
            r->local_unread = h ? h->local_unread : NULL;
            local_place(r, &S->ww[k * D + d].at, p->stages[P + d].out.bytes);
            if (p->stages[P + d].n_local && !r->local)
                return PP_FAIL(err, PP_EINVAL, "stage %d has device-local outputs, and the run's taker takes none",
                               P + d);
        }
    }
    return PP_OK;
}

/* Start the stage threads, meet them twice (executors made; warm-up
 * through), join them. A thread that cannot start stops the run. */
static void run_threads(sched *S) {
    pthread_mutex_init(&S->ready.mu, NULL);
    pthread_cond_init(&S->ready.cv, NULL);
    int nwt = 0; /* the W stages' threads */
    for (int i = 0; i < S->R * S->NW; i++) nwt += S->p->stages[S->ww[i].run.stage].n_nodes > 0;
    S->ready.need = S->W + nwt + 1;
    int rc = 0;
    for (; S->started < S->W; S->started++)
        if ((rc = pthread_create(&S->th[S->started], NULL, stage_main, &S->w[S->started])) != 0) break;
    for (int i = 0; S->started == S->W && i < S->R * S->NW && rc == 0; i++) {
        worker *x = &S->ww[i];
        if (!S->p->stages[x->run.stage].n_nodes) continue;
        if ((rc = pthread_create(&S->wth[i], NULL, w_main, x)) == 0) x->started = true, S->wstarted++;
    }
    if (S->started < S->W || S->wstarted < nwt) {
        pp_err e = {0};
        size_t stack = 0;
        pthread_attr_t a;
        if (pthread_attr_init(&a) == 0) {
            pthread_attr_getstacksize(&a, &stack);
            pthread_attr_destroy(&a);
        }
        PP_FAIL(&e, rc == EAGAIN || rc == ENOMEM ? PP_ENOMEM : PP_ERUNTIME,
                "stage %d%s: cannot start its thread (its stack takes %.1f MiB): %s", S->started % S->P,
                S->R > 1 ? " of a replica" : "", (double)stack / 1048576, strerror(rc));
        stop_all(S, &e);
        meet_shrink(&S->ready, S->started + S->wstarted + 1);
    }
    meet_wait(&S->ready); /* every executor created (or failed) */
    S->rss_loaded = pprt_rss_now();
    meet_wait(&S->ready); /* the warm-up is through */
    for (int i = 0; i < S->started; i++) pthread_join(S->th[i], NULL);
    for (int i = 0; i < S->R * S->NW; i++)
        if (S->ww[i].started) pthread_join(S->wth[i], NULL);
    pthread_cond_destroy(&S->ready.cv);
    pthread_mutex_destroy(&S->ready.mu);
}

/* The run's outcome: a --ref-weights plan's files changed under the run
 * (that explains a stage's failure too, and makes a success worthless), a
 * stage's failure, or the statistics of the records (run.c). */
static pp_status finish_run(sched *S, pprt_stats *stats, pp_err *err) {
    if (S->started > 0) PP_TRY(pprt_plan_sources_unchanged(S->p, err));
    if (S->failed) return PP_WRAP(err, &S->err, S->err.code, "%s", S->err.msg);
    const double rss = (double)pprt_peak_rss();
    for (int wi = 0; wi < S->W; wi++) S->recs[wi].rss = rss;
    const pprt_stats_ctx c = {.threads = S->threads, .precision = S->o->precision, .be = S->be,
                              .trace = S->o->trace};
    PP_TRY(pprt_stats_of(S->p, &S->sh, S->recs, S->W, &c, stats, err));
    for (int i = 0; i < S->P; i++)
        if (S->w[i].cpu)
            pprt_cpu_list(S->w[i].cpu, S->w[i].threads, stats->stages[i].cpus, sizeof stats->stages[i].cpus);
    stats->rss_loaded = S->rss_loaded;
    stats->devices_differ = S->differ;
    for (int i = 0; i < S->P; i++) {
        pprt_stage_stats *t = &stats->stages[i];
        if (S->dd && S->dd[i].name[0]) {
            pprt_place_name(&S->w[i].at, t->device.place, sizeof t->device.place);
            snprintf(t->device.name, sizeof t->device.name, "%s", S->dd[i].name);
            snprintf(t->device.libs, sizeof t->device.libs, "%s", S->dd[i].libs);
            t->device.cc_major = S->dd[i].cc_major, t->device.cc_minor = S->dd[i].cc_minor;
            t->device.sms = S->dd[i].sms;
        }
        const pprt_link *l = i + 1 < S->P ? S->links[i + 1] : NULL;
        if (l && l->path) snprintf(t->path_out, sizeof t->path_out, "%s", l->path);
    }
    const int D = S->p->train_devices;
    for (int k = 0; S->stash && k < S->R * D; k++) {
        const pprt_stash *st = S->stash[k];
        pprt_stage_stats *ss = &stats->stages[k % D];
        if (st && st->peak > ss->stash_peak) ss->stash_peak = st->peak;
        if (st) ss->stash_bytes = st->bytes;
        const size_t kb = pprt_stash_entry_bytes(st, S->NW ? S->wkeep[k] : NULL);
        if (kb > ss->keep_bytes) ss->keep_bytes = kb;
        if (!S->NW) continue;
        const pprt_stash *wk = S->wkeep[k]; /* zb-h1: device k % D's W, on its forward stage's record */
        if (wk && wk->peak > ss->w_keep_peak) ss->w_keep_peak = wk->peak;
        if (wk) ss->w_keep_bytes = wk->bytes;
        ss->w_busy_s += S->ww[k].run.busy;
    }
    return PP_OK;
}

/* Every device stage's device described (name, compute capability, SMs,
 * the libraries' versions) and each boundary's path, as notes; stages on
 * devices that differ get a warning (the kernels' and libraries' choices,
 * and with them the bits, may differ across the split). Replica 0's. */
static bool same_dev(const pprt_dev_desc *a, const pprt_dev_desc *b) {
    return !strcmp(a->name, b->name) && a->cc_major == b->cc_major && a->cc_minor == b->cc_minor &&
           a->sms == b->sms && !strcmp(a->libs, b->libs);
}

/* Replicas on fewer devices than their stages: the first device two replicas share, said once (each keeps its
 * own weights and activations there: R times one replica's memory on it). */
static void shared_devices(const sched *S) {
    if (S->R < 2 || (S->o->quiet && !S->o->explain)) return;
    for (int a = S->P; a < S->W; a++)
        for (int b = 0; b < (a / S->P) * S->P; b++) {
            const pprt_place *x = &S->w[a].at, *y = &S->w[b].at;
            if (pprt_place_is_host(x) || x->mem != y->mem || x->device != y->device) continue;
            char pl[48];
            pprt_place_name(x, pl, sizeof pl);
            fprintf(stderr, "pprt: note: replica %d's stage %d shares %s with replica %d's stage %d: each replica "
                    "keeps its own weights and messages there\n", a / S->P, a % S->P, pl, b / S->P, b % S->P);
            return;
        }
}

static void describe_devices(sched *S) {
    S->dd = calloc((size_t)S->W, sizeof *S->dd); /* every replica's: a training step sums theirs */
    if (!S->dd) return;
    int first = -1;
    for (int wi = 0; wi < S->W; wi++) {
        const pprt_place *at = &S->w[wi].at;
        if (pprt_place_is_host(at) || !at->mem->describe) continue;
        at->mem->describe(at->device, &S->dd[wi]);
        const pprt_dev_desc *d = &S->dd[wi];
        char pl[48], who[48];
        pprt_place_name(at, pl, sizeof pl);
        if (S->R > 1) snprintf(who, sizeof who, "stage %d of replica %d", wi % S->P, wi / S->P);
        else snprintf(who, sizeof who, "stage %d", wi);
        if (!S->o->quiet || S->o->explain)
            fprintf(stderr, "pprt: %s on %s: %s, compute capability %d.%d, %d SMs; %s\n", who, pl, d->name,
                    d->cc_major, d->cc_minor, d->sms, d->libs);
        if (first < 0) first = wi;
        else if (!same_dev(&S->dd[first], d) && !S->differ) {
            S->differ = true;
            const pprt_dev_desc *f = &S->dd[first];
            fprintf(stderr, "pprt: warning: %s's device (%s, compute capability %d.%d, %d SMs; %s) differs "
                    "from stage %d's (%s, %d.%d, %d SMs; %s): results may not be bit-identical to the same plan on "
                    "one kind of device (kernel and library choices depend on the device)\n", who, d->name,
                    d->cc_major, d->cc_minor, d->sms, d->libs, first % S->P, f->name, f->cc_major, f->cc_minor,
                    f->sms, f->libs);
        }
    }
    shared_devices(S);
    for (int wi = 0; wi < S->R * S->NW && first >= 0 && (!S->o->quiet || S->o->explain); wi++) { /* zb-h1 */
        char pl[48], rep[32] = "";
        pprt_place_name(&S->ww[wi].at, pl, sizeof pl);
        if (S->R > 1) snprintf(rep, sizeof rep, " of replica %d", wi / S->NW);
        if (S->p->stages[S->ww[wi].run.stage].n_nodes) /* on B's device */
            fprintf(stderr, "pprt: stage %d (a W stage)%s on %s, beside its backward stage %d\n", S->ww[wi].run.stage,
                    rep, pl, 2 * S->NW - 1 - wi % S->NW);
    }
    for (int k = 0; k < S->R && first >= 0 && (!S->o->quiet || S->o->explain); k++)
        for (int b = 0; b + 1 < S->P; b++) {
            const pprt_link *l = S->links[(size_t)k * (size_t)(S->P + 1) + (size_t)b + 1];
            char rep[32] = "";
            if (S->R > 1) snprintf(rep, sizeof rep, " of replica %d", k);
            if (l && l->path) fprintf(stderr, "pprt: boundary stage %d -> stage %d%s: %s\n", b, b + 1, rep, l->path);
        }
}

static void free_run(sched *S, pprt_array *outputs, pp_status s) {
    /* the links first: destroying one joins its threads (--cuda-overlap's pumps), which after a failed stage
     * may still be writing an output's time into the sink's record (an ASan use-after-free, 2026-12-06) */
    for (int k = 0; S->links && k < S->R * (S->P + 1); k++)
        if (S->links[k]) S->links[k]->ops->destroy(S->links[k]);
    for (int i = 0; S->w && i < S->W; i++)
        if (S->w[i].run.x)
            pprt_keeper_done(S->o->keep, S->w[i].be->exec, S->w[i].run.stage, S->w[i].run.replica, S->w[i].run.x);
    for (int i = 0; S->recs && i < S->W; i++) pprt_rec_free(&S->recs[i]);
    for (int k = 0; S->stash && k < S->R * S->p->train_devices; k++) pprt_stash_free(S->stash[k]);
    free(S->stash);
    for (int k = 0; S->ww && k < S->R * S->NW; k++) {
        if (S->ww[k].run.x)
            pprt_keeper_done(S->o->keep, S->ww[k].be->exec, S->ww[k].run.stage, S->ww[k].run.replica, S->ww[k].run.x);
        pprt_w_bufs_free(&S->ww[k].at, S->ww[k].in_buf, S->ww[k].out_buf);
        if (S->wkeep) pprt_stash_free(S->wkeep[k]);
    }
    free(S->ww), free(S->wth), free(S->wkeep);
    if (s != PP_OK)
        for (int i = 0; i < S->p->n_outputs; i++) {
            free(outputs[i].data);
            outputs[i].data = NULL;
        }
    free(S->w), free(S->recs), free(S->be), free(S->th), free(S->links), free(S->done), free(S->pcs);
    free(S->ins), free(S->outs), free(S->cpus), free(S->dd);
    pthread_mutex_destroy(&S->err_mu);
}

pp_status pprt_run(const pprt_plan *p, const pprt_array *inputs, int64_t n, pprt_array *outputs,
                   const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < p->n_outputs; i++) outputs[i].data = NULL;
    const int R = o->replicas > 1 ? o->replicas : 1;
    sched S = {.p = p, .o = o, .n = n, .P = p->n_stages, .R = R, .W = R * p->n_stages};
    PP_TRY(check_args(&S, inputs, err));
    pthread_mutex_init(&S.err_mu, NULL);
    pp_status s = alloc_run(&S, err);
    if (s == PP_OK) s = place_stages(&S, outputs, err);
    if (s == PP_OK) s = make_workers(&S, err);
    if (s == PP_OK) s = link_replicas(&S, inputs, outputs, err);
    if (s == PP_OK) describe_devices(&S);
    if (s == PP_OK) {
        run_threads(&S);
        s = finish_run(&S, stats, err);
    }
    free_run(&S, outputs, s);
    return s;
}

pp_status pprt_profile_write(const char *path, const pprt_plan *p, const pprt_stats *stats,
                             pp_err *err) {
    if (!stats->node_ms) return PP_FAIL(err, PP_EINVAL, "no per-node times were measured");
    char kind[256];
    pprt_device_kind(stats->backend, stats->precision, stats->threads, kind, sizeof kind);
    pp_json js;
    cJSON *nodes = pp_json_profile_begin(&js, p->batch, kind);
    int k = 0;
    for (int i = 0; i < p->n_stages; i++)
        for (int j = 0; j < p->stages[i].n_nodes; j++, k++)
            pp_json_add_round(&js, nodes, p->stages[i].nodes[j].name, stats->node_ms[k], 6);
    return pp_json_write(&js, path, false, err);
}

void pprt_profile_summary(FILE *f, const pprt_plan *p, const pprt_stats *stats, int top) {
    if (!stats->node_ms || top < 1) return;
    fprintf(f, "profile: mean ms per micro-batch of each stage's nodes, its %d slowest\n", top);
    int k0 = 0;
    for (int i = 0; i < p->n_stages; k0 += p->stages[i].n_nodes, i++) {
        const pprt_stage *st = &p->stages[i];
        const double *ms = stats->node_ms + k0;
        double sum = 0;
        for (int j = 0; j < st->n_nodes; j++) sum += ms[j];
        fprintf(f, "stage %d: %.3f ms in %d node%s\n", i, sum, st->n_nodes, st->n_nodes == 1 ? "" : "s");
        if (!(sum > 0)) continue;
        /* selection of the top: `top` passes over the nodes, each taking the slowest not yet taken */
        int taken[16], n_taken = 0;
        while (n_taken < top && n_taken < 16) {
            int best = -1;
            for (int j = 0; j < st->n_nodes; j++) {
                bool used = false;
                for (int q = 0; q < n_taken; q++) used = used || taken[q] == j;
                if (!used && ms[j] > 0 && (best < 0 || ms[j] > ms[best])) best = j;
            }
            if (best < 0) break;
            taken[n_taken++] = best;
            fprintf(f, "  %9.3f ms %5.1f%%  %-18s %s\n", ms[best], 100 * ms[best] / sum, pp_op_table[st->nodes[best].op].name,
                    st->nodes[best].name);
        }
    }
}
