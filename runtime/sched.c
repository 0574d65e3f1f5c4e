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
 * (backend.h).
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
#include "microbatch.h"
#include "nodes.h"
#include "pprt.h"
#include "run.h"
#include "stage_loop.h"

typedef struct sched sched;

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
    int replica;
    const pprt_backend *be; /* the stage's backend */
    pprt_place at;          /* where it runs: host, or a device of the backend's space */
    pprt_stage_run run;
    double *warm_s; /* node times after the warm-up, subtracted from the profile; NULL: none */
    double t_go;    /* when the timed run began on this thread */
    const int *cpu; /* the CPUs the stage is pinned to, `threads` of them; NULL: not pinned */
    int threads;    /* intra-op threads (pprt_exec_cfg) */
    pprt_trace_track tr; /* --trace: filled as it runs (arrays allocated before) */
} worker;

struct sched {
    const pprt_plan *p;
    const pprt_run_opts *o;
    int64_t n, m;      /* samples, micro-batches */
    int R;             /* replicas */
    pprt_shares sh;    /* their shares of the micro-batches (microbatch.h) */
    pprt_link **links; /* R x (P + 1): each replica's source, P - 1 boundaries, sink */
    double *t_start, *t_end; /* per micro-batch */
    int64_t *done;     /* per replica: micro-batches its sink has (the progress bar) */
    pthread_mutex_t err_mu;
    meeting ready; /* the stage threads and the main thread */
    pp_err err;
    bool failed;
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
}

static bool is_failed(sched *S) {
    pthread_mutex_lock(&S->err_mu);
    bool f = S->failed;
    pthread_mutex_unlock(&S->err_mu);
    return f;
}

/* A sink's progress: a bar on stderr over every replica's. */
typedef struct {
    sched *S;
    int replica;
} prog_ctx;

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

/* Replica k's links (its share S->sh): the source over its share of the inputs (staged onto
 * stage 0's device if it has one), the links between stages' places, the
 * sink into its share of the outputs (staged likewise); w: its P workers,
 * in and out: its shares (n samples), pc: its progress context. */
static pp_status make_links(sched *S, int k, const worker *w, const pprt_array *in, pprt_array *out, int64_t n,
                            prog_ctx *pc, pp_err *err) {
    const pprt_plan *p = S->p;
    const pprt_run_opts *o = S->o;
    const int P = p->n_stages;
    pprt_link **L = S->links + (size_t)k * (size_t)(P + 1);
    const int64_t mb0 = pprt_share_lo(&S->sh, k);
    const pprt_place *first = &w[0].at, *last = &w[P - 1].at;
    pprt_link *src = NULL, *sink = NULL;
    char rep[32] = "";
    if (S->R > 1) snprintf(rep, sizeof rep, " (replica %d)", k);
    PP_TRY(pprt_link_source(p, in, n, o->warmup, S->t_start + mb0, pprt_place_is_host(first) ? NULL : first->mem,
                            &src, err));
    if (pprt_place_is_host(first)) L[0] = src;
    else PP_TRY(pprt_link_staged(src, first, true, "the inputs -> stage 0", &L[0], err));
    for (int b = 0; b < P - 1; b++) {
        char name[96];
        snprintf(name, sizeof name, "stage %d -> stage %d%s", b, b + 1, rep);
        PP_TRY(pprt_link_between(&w[b].at, &w[b + 1].at, p->stages[b].out.bytes, o->depth, name, &L[b + 1], err));
    }
    PP_TRY(pprt_link_sink(p, out, n, o->warmup, S->t_end + mb0, o->progress ? progress : NULL, pc,
                          pprt_place_is_host(last) ? NULL : last->mem, &sink, err));
    if (pprt_place_is_host(last)) L[P] = sink;
    else {
        char name[64];
        snprintf(name, sizeof name, "stage %d -> the outputs", P - 1);
        PP_TRY(pprt_link_staged(sink, last, false, name, &L[P], err));
    }
    return PP_OK;
}

/* Tags k0 .. k1-1 of the stage's sequence; a failure stops the pipeline
 * (one that is only a link closed by that stop records nothing new). */
static void stage_loop(worker *w, int64_t k0, int64_t k1) {
    pp_err e = {0};
    bool own;
    if (pprt_stage_loop(&w->run, k0, k1, &own, &e) != PP_OK && (own || !is_failed(w->S))) stop_all(w->S, &e);
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
    pprt_exec_cfg cfg = {.threads = w->threads, .precision = S->o->precision,
                         .device = pprt_place_is_host(&w->at) ? -1 : w->at.device, .quiet = S->o->quiet,
                         .node_times = S->o->node_times};
    const int s = w->run.stage;
    if (w->be->exec->create(S->p, &S->p->stages[s], &cfg, &w->run.x, &e) != PP_OK) {
        pp_err f = {0};
        PP_WRAP(&f, &e, e.code, "stage %d: %s", s, e.msg);
        stop_all(S, &f);
    }
    meet_wait(&S->ready);
    if (!is_failed(S)) stage_loop(w, 0, S->o->warmup);
    /* first runs pay page faults and cold caches: the profile leaves them out */
    const double *ns = w->run.x && w->be->exec->node_seconds ? w->be->exec->node_seconds(w->run.x) : NULL;
    int nn = S->p->stages[s].n_nodes;
    if (ns && S->o->warmup > 0 && (w->warm_s = malloc(pp_count(nn) * sizeof *w->warm_s)))
        memcpy(w->warm_s, ns, (size_t)nn * sizeof *ns);
    meet_wait(&S->ready);
    w->t_go = pprt_now_s();
    if (!is_failed(S)) stage_loop(w, S->o->warmup, S->o->warmup + pprt_share_mbs(&S->sh, w->replica));
    return NULL;
}

pp_status pprt_run(const pprt_plan *p, const pprt_array *inputs, int64_t n, pprt_array *outputs,
                   const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < p->n_outputs; i++) outputs[i].data = NULL;
    if (n < 1) return PP_FAIL(err, PP_EINVAL, "no samples to run");
    if (o->depth < 1) return PP_FAIL(err, PP_EINVAL, "--depth must be >= 1, got %d", o->depth);
    if (o->warmup < 0) return PP_FAIL(err, PP_EINVAL, "--warmup must be >= 0, got %d", o->warmup);
    for (int i = 0; i < p->n_inputs; i++)
        if (inputs[i].n != n)
            return PP_FAIL(err, PP_EINVAL, "input '%s' has %lld samples, expected %lld like the first",
                           p->inputs[i].name, (long long)inputs[i].n, (long long)n);
    const int P = p->n_stages, R = o->replicas > 1 ? o->replicas : 1, W = R * P;
    sched S = {.p = p, .o = o, .n = n, .R = R};
    if (p->batch == 0 && n != 1)
        return PP_FAIL(err, PP_EINVAL, "an unbatched plan (-b 0) runs exactly one set of inputs, got %lld",
                       (long long)n);
    S.m = pprt_mb_count(p, n);
    S.sh = (pprt_shares){pprt_mb_size(p), S.m, n, R};
    if (R > S.m)
        return PP_FAIL(err, PP_EINVAL, "--replicas %d: the run has only %lld micro-batches (%lld samples, %lld a "
                                       "micro-batch), so some replica would have none; at most %lld",
                       R, (long long)S.m, (long long)n, (long long)pprt_mb_size(p), (long long)S.m);
    pthread_mutex_init(&S.err_mu, NULL);
    worker *w = calloc((size_t)W, sizeof *w);
    pthread_t *th = calloc((size_t)W, sizeof *th);
    S.links = calloc((size_t)R * (size_t)(P + 1), sizeof *S.links);
    S.t_start = calloc((size_t)S.m, sizeof(double));
    S.t_end = calloc((size_t)S.m, sizeof(double));
    S.done = calloc((size_t)R, sizeof *S.done);
    prog_ctx *pcs = calloc((size_t)R, sizeof *pcs);
    /* each replica's share of the inputs and outputs: views into the arrays */
    const int NI = p->n_inputs, NO = p->n_outputs;
    pprt_array *ins = calloc((size_t)R * (size_t)(NI > 0 ? NI : 1), sizeof *ins);
    pprt_array *outs = calloc((size_t)R * (size_t)(NO > 0 ? NO : 1), sizeof *outs);
    int *cpus = NULL;
    pp_status s = PP_OK;
    if (!w || !th || !S.links || !S.t_start || !S.t_end || !S.done || !pcs || !ins || !outs) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < P && s == PP_OK; i++) {
        s = pprt_stage_backend(p, i, o->backend, &w[i].be, err);
        if (s == PP_OK) s = pprt_stage_place(p, i, w[i].be, -1, &w[i].at, err);
        if (s == PP_OK && R > 1 && !pprt_place_is_host(&w[i].at))
            s = PP_FAIL(err, PP_EUNSUP, "--replicas %d: stage %d runs on %s, a device backend; the threaded runtime "
                                        "runs replicas of host stages only (under mpirun, each replica's stages "
                                        "take their own devices)", R, i, w[i].be->name);
    }
    for (int i = 0; i < p->n_outputs && s == PP_OK; i++) {
        outputs[i].n = n;
        /* 64-byte aligned: the sink may lend places in it to the last stage (link_data.c) */
        if (posix_memalign(&outputs[i].data, 64, (size_t)n * p->outputs[i].sample_bytes + 1) != 0)
            outputs[i].data = NULL;
        if (!outputs[i].data)
            s = PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for output '%s'",
                        (size_t)n * p->outputs[i].sample_bytes + 1, p->outputs[i].name);
    }
    if (s != PP_OK) goto done;
    for (int k = 0; k < R; k++)
        for (int i = 0; i < P; i++) {
            worker *x = &w[k * P + i];
            x->be = w[i].be, x->at = w[i].at, x->replica = k;
        }
    /* the links of each replica: source, boundaries (each with its buffers,
     * where its stages want them), sink */
    for (int k = 0; k < R && s == PP_OK; k++) {
        const int64_t first = pprt_share_first(&S.sh, k), nk = pprt_share_samples(&S.sh, k);
        pprt_array *in = ins + (size_t)k * (size_t)NI, *out = outs + (size_t)k * (size_t)NO;
        for (int i = 0; i < NI; i++)
            in[i] = (pprt_array){(char *)inputs[i].data + (size_t)first * p->inputs[i].sample_bytes, nk};
        for (int i = 0; i < NO; i++)
            out[i] = (pprt_array){(char *)outputs[i].data + (size_t)first * p->outputs[i].sample_bytes, nk};
        pcs[k] = (prog_ctx){&S, k};
        s = make_links(&S, k, w + (size_t)k * (size_t)P, in, out, nk, &pcs[k], err);
    }
    if (s != PP_OK) goto done;
    /* the cores this process may use (under taskset or a cpuset, not the
     * machine's): stage i of replica k gets the (k P + i)-th `threads` of them */
    cpus = malloc(CPU_SETSIZE * sizeof *cpus);
    if (!cpus) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    int cores = pprt_cpus_allowed(cpus, CPU_SETSIZE); /* >= 1 */
    /* a backend whose kernels are single-threaded takes one core per stage */
    int threads = o->threads > 0 ? o->threads : cores / W > 1 ? cores / W : 1;
    for (int k = 0; k < R; k++)
        for (int i = 0; i < P; i++) {
            worker *x = &w[k * P + i];
            x->S = &S;
            pprt_link **L = S.links + (size_t)k * (size_t)(P + 1);
            x->run = (pprt_stage_run){.stage = i, .ex = x->be->exec, .in = L[i], .out = L[i + 1], .warmup = o->warmup,
                                      .mb_offset = pprt_share_lo(&S.sh, k)};
            x->threads = x->be->multithreaded || o->threads > 0 ? threads : 1;
            /* pinned to its own `threads` cores where every stage thread has its own */
            x->cpu = (o->pin && (long)cores >= (long)W * threads) ? cpus + (size_t)(k * P + i) * (size_t)threads
                                                                   : NULL;
        }
    for (int wi = 0; wi < W && s == PP_OK && o->trace; wi++) {
        const int k = wi / P, i = wi % P;
        pprt_trace_track *t = &w[wi].tr;
        *t = (pprt_trace_track){.stage = i, .replica = k, .rank = -1, .mb0 = pprt_share_lo(&S.sh, k),
                                .n = pprt_share_mbs(&S.sh, k), .n_nodes = p->stages[i].n_nodes};
        t->t = calloc((size_t)t->n * PPRT_TRACE_T, sizeof(double));
        if (o->trace_nodes && w[wi].be->exec->node_seconds) {
            t->n_node_mb = pprt_trace_node_mbs(t->n_nodes, t->n);
            t->node_s = calloc(pp_count((int)(t->n_node_mb * t->n_nodes)), sizeof(double));
            w[wi].run.prev_ns = calloc(pp_count(t->n_nodes), sizeof(double));
            if (!t->node_s || !w[wi].run.prev_ns) s = PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
        }
        if (!t->t) s = PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
        w[wi].run.trace = t;
    }
    if (s != PP_OK) goto done;
    pthread_mutex_init(&S.ready.mu, NULL);
    pthread_cond_init(&S.ready.cv, NULL);
    S.ready.need = W + 1;
    int started = 0, rc = 0;
    for (; started < W; started++)
        if ((rc = pthread_create(&th[started], NULL, stage_main, &w[started])) != 0) break;
    if (started < W) {
        pp_err e = {0};
        size_t stack = 0;
        pthread_attr_t a;
        if (pthread_attr_init(&a) == 0) {
            pthread_attr_getstacksize(&a, &stack);
            pthread_attr_destroy(&a);
        }
        PP_FAIL(&e, rc == EAGAIN || rc == ENOMEM ? PP_ENOMEM : PP_ERUNTIME,
                "stage %d%s: cannot start its thread (its stack takes %.1f MiB): %s", started % P,
                R > 1 ? " of a replica" : "", (double)stack / 1048576, strerror(rc));
        stop_all(&S, &e);
        meet_shrink(&S.ready, started + 1);
    }
    meet_wait(&S.ready); /* every executor created (or failed) */
    size_t rss_loaded = pprt_rss_now();
    meet_wait(&S.ready); /* the warm-up is through */
    double t0 = pprt_now_s();
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    /* from the first stage thread let go (this thread may wake later) */
    for (int i = 0; i < started; i++)
        if (w[i].t_go > 0 && w[i].t_go < t0) t0 = w[i].t_go;
    double wall = pprt_now_s() - t0;
    pthread_cond_destroy(&S.ready.cv);
    pthread_mutex_destroy(&S.ready.mu);
    /* a --ref-weights plan's files changed under the run: that explains a
     * stage's failure too, and makes a success worthless */
    if (started > 0 && (s = pprt_plan_sources_unchanged(p, err)) != PP_OK) goto done;
    if (S.failed) {
        s = PP_WRAP(err, &S.err, S.err.code, "%s", S.err.msg);
        goto done;
    }
    /* statistics: busy time per stage summed over the replicas */
    double *busy = calloc((size_t)P, sizeof *busy);
    if (!busy) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int wi = 0; wi < W; wi++) busy[wi % P] += w[wi].run.busy;
    s = pprt_stats_fill(stats, n, S.m, p->batch, wall, P, R, busy, S.t_start, S.t_end, err);
    free(busy);
    if (s != PP_OK) goto done;
    stats->backend = w[0].be->exec->name;
    stats->threads = threads;
    stats->precision = o->precision;
    for (int i = 0; i < P; i++) {
        if (w[i].be != w[0].be) stats->backend = "mixed";
        stats->stages[i].backend = w[i].be->exec->name;
        pprt_exec_counts_of(w[i].be->exec, w[i].run.x, &p->stages[i], &stats->stages[i].exec);
        if (w[i].cpu) pprt_cpu_list(w[i].cpu, w[i].threads, stats->stages[i].cpus, sizeof stats->stages[i].cpus);
    }
    int total_nodes = 0;
    for (int i = 0; i < P; i++) total_nodes += p->stages[i].n_nodes;
    stats->node_ms = calloc(pp_count(total_nodes), sizeof(double));
    if (stats->node_ms) {
        /* each node's time over every replica's micro-batches */
        int k0 = 0;
        for (int i = 0; i < P; i++) {
            for (int r = 0; r < R; r++) {
                const worker *x = &w[r * P + i];
                const double *ns = x->be->exec->node_seconds ? x->be->exec->node_seconds(x->run.x) : NULL;
                const double *ws = x->warm_s;
                for (int j = 0; j < p->stages[i].n_nodes; j++)
                    stats->node_ms[k0 + j] += !ns ? 0
                                              : ws ? 1e3 * (ns[j] - ws[j]) / (double)S.m
                                                   : 1e3 * ns[j] / (double)(S.m + (int64_t)R * o->warmup);
            }
            k0 += p->stages[i].n_nodes;
        }
    }
    stats->peak_rss = pprt_peak_rss();
    if (o->trace) { /* the tracks move into the statistics */
        pprt_trace *tr = calloc(1, sizeof *tr);
        pprt_trace_track *tracks = calloc((size_t)W, sizeof *tracks);
        if (!tr || !tracks) {
            free(tr), free(tracks);
            s = PP_FAIL(err, PP_ENOMEM, "out of memory for the trace");
            goto done;
        }
        *tr = (pprt_trace){.n_tracks = W, .tracks = tracks, .t0 = t0, .wall_s = wall, .bubble = stats->bubble,
                           .replicas = R, .latency_ms = stats->latency_ms, .n_latency = S.m};
        stats->trace = tr;
        for (int i = 0; i < W; i++) {
            tracks[i] = w[i].tr;
            w[i].tr.t = w[i].tr.node_s = NULL;
        }
    }
    stats->rss_loaded = rss_loaded;
done:
    if (w)
        for (int i = 0; i < W; i++) {
            if (w[i].run.x) w[i].be->exec->destroy(w[i].run.x);
            free(w[i].warm_s);
            free(w[i].tr.t);
            free(w[i].tr.node_s);
            free(w[i].run.prev_ns);
        }
    if (S.links)
        for (int k = 0; k < R * (P + 1); k++)
            if (S.links[k]) S.links[k]->ops->destroy(S.links[k]);
    if (s != PP_OK)
        for (int i = 0; i < p->n_outputs; i++) {
            free(outputs[i].data);
            outputs[i].data = NULL;
        }
    free(w);
    free(th);
    free(cpus);
    free(S.links);
    free(S.t_start);
    free(S.t_end);
    free(S.done);
    free(pcs);
    free(ins);
    free(outs);
    pthread_mutex_destroy(&S.err_mu);
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
