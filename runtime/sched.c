/* sched.c: the micro-batch pipeline. One thread per stage; between stage s
 * and s+1 two channels: `full` carries filled boundary messages forward,
 * `free` carries emptied ones back. `depth` buffers circulate per boundary,
 * which bounds the micro-batches in flight. Stage 0 cuts its micro-batch out
 * of the input arrays (padding the last with zeros); the last stage copies its
 * results into the output arrays, so output order is input order.
 *
 * Any error stops everything: the failing stage records it (with stage and
 * micro-batch), closes every channel, and the blocked threads return. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/resource.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "comm/microbatch.h"
#include "exec.h"
#include "pprt.h"

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
    int s;
    pprt_exec *x;
    void *local_in, *local_out; /* stage 0's input buffer, last stage's output buffer */
    double busy;
    double *warm_s; /* node times after the warm-up, subtracted from the profile; NULL: none */
    double t_go;    /* when the timed run began on this thread */
    const int *cpu; /* the CPUs the stage is pinned to, `threads` of them; NULL: not pinned */
    int threads;    /* intra-op threads (pprt_exec_cfg) */
} worker;

struct sched {
    const pprt_plan *p;
    const pprt_exec_ops *ex;
    const pprt_run_opts *o;
    const pprt_array *inputs;
    pprt_array *outputs;
    int64_t n, m; /* samples, micro-batches */
    pprt_chan **full, **free_; /* per boundary */
    double *t_start, *t_end;   /* per micro-batch */
    pthread_mutex_t err_mu;
    meeting ready; /* the stage threads and the main thread */
    pp_err err;
    bool failed;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stop_all(sched *S, int stage, int64_t mb, const pp_err *e) {
    pthread_mutex_lock(&S->err_mu);
    if (!S->failed) {
        S->failed = true;
        if (mb >= 0)
            PP_FAIL(&S->err, e->code, "stage %d, micro-batch %lld: %s", stage, (long long)mb, e->msg);
        else
            PP_FAIL(&S->err, e->code, "stage %d: %s", stage, e->msg);
    }
    pthread_mutex_unlock(&S->err_mu);
    for (int b = 0; b < S->p->n_stages - 1; b++) {
        S->full[b]->ops->close(S->full[b]);
        S->free_[b]->ops->close(S->free_[b]);
    }
}

static bool is_failed(sched *S) {
    pthread_mutex_lock(&S->err_mu);
    bool f = S->failed;
    pthread_mutex_unlock(&S->err_mu);
    return f;
}

static void progress(sched *S, int64_t done) {
    if (!S->o->progress) return;
    int width = 40, fill = (int)(done * width / S->m);
    fprintf(stderr, "\r[%.*s%*s] %lld/%lld micro-batches", fill,
            "########################################", width - fill, "", (long long)done,
            (long long)S->m);
    if (done == S->m) fputc('\n', stderr);
}

/* Micro-batches k0 .. k1-1 of the stage's sequence. The first `warmup` of the
 * sequence all carry micro-batch 0 and their outputs are dropped. */
static void stage_loop(worker *w, int64_t k0, int64_t k1) {
    sched *S = w->S;
    const pprt_plan *p = S->p;
    int s = w->s, last = p->n_stages - 1, W = S->o->warmup;
    for (int64_t k = k0; k < k1; k++) {
        pp_err e = {0};
        void *in = w->local_in, *out = w->local_out;
        int64_t tag = k, mb = k < W ? 0 : k - W;
        if (s > 0 && S->full[s - 1]->ops->recv(S->full[s - 1], &in, &tag, &e) != PP_OK) break;
        if (tag != k) {
            PP_FAIL(&e, PP_ERUNTIME, "received micro-batch %lld out of order", (long long)tag);
            stop_all(S, s, mb, &e);
            break;
        }
        if (s < last && S->free_[s]->ops->recv(S->free_[s], &out, &tag, &e) != PP_OK) break;
        double t0 = now();
        if (s == 0) {
            if (k >= W) S->t_start[mb] = t0;
            pprt_mb_fill(p, S->inputs, S->n, mb, in);
        }
        pp_status rs = S->ex->run(w->x, in, out, &e);
        double t1 = now();
        if (k >= W) w->busy += t1 - t0;
        if (rs != PP_OK) {
            stop_all(S, s, mb, &e);
            break;
        }
        if (s > 0 && S->free_[s - 1]->ops->send(S->free_[s - 1], in, 0, &e) != PP_OK) break;
        if (s < last) {
            if (S->full[s]->ops->send(S->full[s], out, k, &e) != PP_OK) break;
        } else if (k >= W) {
            pprt_mb_drain(p, out, S->n, mb, S->outputs);
            S->t_end[mb] = now();
            progress(S, mb + 1);
        }
        if (is_failed(S)) break;
    }
}

void pprt_device_kind(const char *backend, pprt_precision precision, int threads, char *buf, size_t n) {
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t len = strcspn(c, "\n");
        snprintf(model, sizeof model, "%.*s", (int)(len < sizeof model ? len : sizeof model - 1), c);
        break;
    }
    if (f) fclose(f);
    snprintf(buf, n, "%s %s, %d thread%s per stage, %s", backend ? backend : "?",
             precision == PPRT_BF16 ? "bf16" : "f32", threads, threads == 1 ? "" : "s", model);
}

size_t pprt_rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    bool ok = f && fscanf(f, "%llu %llu", &size, &res) == 2;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (size_t)res * (size_t)page : 0;
}

int pprt_cpus_allowed(int *ids, int max) {
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) {
                if (n < max) ids[n] = c;
                n++;
            }
    if (n == 0) {
        long k = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (k > 0 ? k : 1) && c < CPU_SETSIZE; c++, n++)
            if (n < max) ids[n] = (int)c;
    }
    return n;
}

int pprt_rank_cores(int local_ranks) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    long share = online / (local_ranks > 1 ? local_ranks : 1);
    int mine = pprt_cpus_allowed(NULL, 0);
    if (share > mine) share = mine;
    return share > 1 ? (int)share : 1;
}

/* "0-3,8": the n CPUs of ids (increasing) as ranges, into buf; ending in
 * ",..." where the rest does not fit. */
static void cpu_list(const int *ids, int n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ids[j + 1] == ids[j] + 1) j++;
        char item[32];
        int k = j > i ? snprintf(item, sizeof item, "%s%d-%d", i ? "," : "", ids[i], ids[j])
                      : snprintf(item, sizeof item, "%s%d", i ? "," : "", ids[i]);
        if (k < 0 || len + (size_t)k + 4 >= cap) {
            if (len + 4 < cap) memcpy(buf + len, ",...", 5);
            return;
        }
        memcpy(buf + len, item, (size_t)k + 1);
        len += (size_t)k;
        i = j + 1;
    }
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
    pprt_exec_cfg cfg = {.threads = w->threads, .precision = S->o->precision};
    if (S->ex->create(S->p, &S->p->stages[w->s], &cfg, &w->x, &e) != PP_OK) stop_all(S, w->s, -1, &e);
    meet_wait(&S->ready);
    if (!is_failed(S)) stage_loop(w, 0, S->o->warmup);
    /* first runs pay page faults and cold caches: the profile leaves them out */
    const double *ns = w->x && S->ex->node_seconds ? S->ex->node_seconds(w->x) : NULL;
    int nn = S->p->stages[w->s].n_nodes;
    if (ns && S->o->warmup > 0 && (w->warm_s = malloc(pp_count(nn) * sizeof *w->warm_s)))
        memcpy(w->warm_s, ns, (size_t)nn * sizeof *ns);
    meet_wait(&S->ready);
    w->t_go = now();
    if (!is_failed(S)) stage_loop(w, S->o->warmup, S->o->warmup + S->m);
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
    int P = p->n_stages;
    sched S = {.p = p, .ex = o->executor ? o->executor : &pprt_exec_cpu_ref, .o = o, .inputs = inputs,
               .outputs = outputs, .n = n};
    if (p->batch == 0 && n != 1)
        return PP_FAIL(err, PP_EINVAL, "an unbatched plan (-b 0) runs exactly one set of inputs, got %lld",
                       (long long)n);
    S.m = pprt_mb_count(p, n);
    pthread_mutex_init(&S.err_mu, NULL);
    worker *w = calloc((size_t)P, sizeof *w);
    pthread_t *th = calloc((size_t)P, sizeof *th);
    S.full = calloc((size_t)P, sizeof *S.full);
    S.free_ = calloc((size_t)P, sizeof *S.free_);
    S.t_start = calloc((size_t)S.m, sizeof(double));
    S.t_end = calloc((size_t)S.m, sizeof(double));
    void **bufs = calloc((size_t)(P * o->depth + 2), sizeof *bufs);
    int n_bufs = 0;
    int *cpus = NULL;
    pp_status s = PP_OK;
    if (!w || !th || !S.full || !S.free_ || !S.t_start || !S.t_end || !bufs) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < p->n_outputs && s == PP_OK; i++) {
        outputs[i].n = n;
        outputs[i].data = malloc((size_t)n * p->outputs[i].sample_bytes + 1);
        if (!outputs[i].data) s = PP_FAIL(err, PP_ENOMEM, "cannot allocate output '%s'", p->outputs[i].name);
    }
    /* channels and the buffers that circulate on them */
    for (int b = 0; b < P - 1 && s == PP_OK; b++) {
        s = pprt_queue_create(o->depth, &S.full[b], err);
        if (s == PP_OK) s = pprt_queue_create(o->depth, &S.free_[b], err);
        for (int k = 0; k < o->depth && s == PP_OK; k++) {
            void *buf = NULL;
            size_t bytes = p->stages[b].out.bytes;
            if (posix_memalign(&buf, 64, bytes ? bytes : 64) != 0) {
                s = PP_FAIL(err, PP_ENOMEM, "cannot allocate boundary %d buffers", b);
                break;
            }
            bufs[n_bufs++] = buf;
            s = S.free_[b]->ops->send(S.free_[b], buf, 0, err);
        }
    }
    if (s == PP_OK) {
        void *a = NULL, *b = NULL;
        if (posix_memalign(&a, 64, p->stages[0].in.bytes ? p->stages[0].in.bytes : 64) != 0 ||
            posix_memalign(&b, 64, p->stages[P - 1].out.bytes ? p->stages[P - 1].out.bytes : 64) != 0) {
            free(a);
            s = PP_FAIL(err, PP_ENOMEM, "cannot allocate input/output buffers");
        } else {
            bufs[n_bufs++] = a;
            bufs[n_bufs++] = b;
            w[0].local_in = a;
            w[P - 1].local_out = b;
        }
    }
    /* the cores this process may use (under taskset or a cpuset, not the
     * machine's): stage i gets the i-th `threads` of them */
    cpus = malloc(CPU_SETSIZE * sizeof *cpus);
    if (!cpus) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    int cores = pprt_cpus_allowed(cpus, CPU_SETSIZE); /* >= 1 */
    /* the reference kernels are single-threaded: one core per stage, as before */
    int threads = o->threads > 0 ? o->threads
                  : S.ex == &pprt_exec_cpu_ref ? 1
                  : (cores / P > 1 ? cores / P : 1);
    for (int i = 0; i < P && s == PP_OK; i++) {
        w[i].S = &S;
        w[i].s = i;
        w[i].threads = threads;
        w[i].cpu = (o->pin && (long)cores >= (long)P * threads) ? cpus + (size_t)i * (size_t)threads : NULL;
    }
    if (s != PP_OK) goto done;
    pthread_mutex_init(&S.ready.mu, NULL);
    pthread_cond_init(&S.ready.cv, NULL);
    S.ready.need = P + 1;
    int started = 0;
    for (; started < P; started++)
        if (pthread_create(&th[started], NULL, stage_main, &w[started]) != 0) break;
    if (started < P) {
        pp_err e = {0};
        PP_FAIL(&e, PP_ERUNTIME, "cannot start its thread");
        stop_all(&S, started, -1, &e);
        meet_shrink(&S.ready, started + 1);
    }
    meet_wait(&S.ready); /* every executor created (or failed) */
    size_t rss_loaded = pprt_rss_now();
    meet_wait(&S.ready); /* the warm-up is through */
    double t0 = now();
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    /* from the first stage thread let go (this thread may wake later) */
    for (int i = 0; i < started; i++)
        if (w[i].t_go > 0 && w[i].t_go < t0) t0 = w[i].t_go;
    double wall = now() - t0;
    pthread_cond_destroy(&S.ready.cv);
    pthread_mutex_destroy(&S.ready.mu);
    if (S.failed) {
        s = PP_FAIL(err, S.err.code, "%s", S.err.msg);
        goto done;
    }
    /* statistics */
    double *busy = calloc((size_t)P, sizeof *busy);
    if (!busy) {
        s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < P; i++) busy[i] = w[i].busy;
    s = pprt_stats_fill(stats, n, S.m, p->batch, wall, P, 1, busy, S.t_start, S.t_end, err);
    free(busy);
    if (s != PP_OK) goto done;
    stats->backend = S.ex->name;
    stats->threads = threads;
    stats->precision = o->precision;
    for (int i = 0; i < P; i++) {
        pprt_exec_counts_of(S.ex, w[i].x, &p->stages[i], &stats->stages[i].exec);
        if (w[i].cpu) cpu_list(w[i].cpu, w[i].threads, stats->stages[i].cpus, sizeof stats->stages[i].cpus);
    }
    int total_nodes = 0;
    for (int i = 0; i < P; i++) total_nodes += p->stages[i].n_nodes;
    stats->node_ms = calloc(pp_count(total_nodes), sizeof(double));
    if (stats->node_ms && S.ex->node_seconds) {
        int k = 0;
        for (int i = 0; i < P; i++) {
            const double *ns = S.ex->node_seconds(w[i].x);
            const double *ws = w[i].warm_s;
            for (int j = 0; j < p->stages[i].n_nodes; j++, k++)
                stats->node_ms[k] = !ns ? 0
                                    : ws ? 1e3 * (ns[j] - ws[j]) / (double)S.m
                                         : 1e3 * ns[j] / (double)(S.m + o->warmup);
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) stats->peak_rss = (size_t)ru.ru_maxrss * 1024; /* KiB */
    stats->rss_loaded = rss_loaded;
done:
    if (w)
        for (int i = 0; i < P; i++) {
            if (w[i].x) S.ex->destroy(w[i].x);
            free(w[i].warm_s);
        }
    if (S.full)
        for (int b = 0; b < P - 1; b++) {
            if (S.full[b]) S.full[b]->ops->destroy(S.full[b]);
            if (S.free_[b]) S.free_[b]->ops->destroy(S.free_[b]);
        }
    for (int i = 0; bufs && i < n_bufs; i++) free(bufs[i]);
    if (s != PP_OK)
        for (int i = 0; i < p->n_outputs; i++) {
            free(outputs[i].data);
            outputs[i].data = NULL;
        }
    free(bufs);
    free(w);
    free(th);
    free(cpus);
    free(S.full);
    free(S.free_);
    free(S.t_start);
    free(S.t_end);
    pthread_mutex_destroy(&S.err_mu);
    return s;
}


pp_status pprt_profile_write(const char *path, const pprt_plan *p, const pprt_stats *stats,
                             pp_err *err) {
    if (!stats->node_ms) return PP_FAIL(err, PP_EINVAL, "no per-node times were measured");
    pp_outfile out;
    PP_TRY(pp_outfile_open(&out, path, err));
    FILE *f = out.f;
    char kind[256];
    pprt_device_kind(stats->backend, stats->precision, stats->threads, kind, sizeof kind);
    fprintf(f, "{\"micro_batch\": %lld, \"device\": ", (long long)p->batch);
    pp_json_str(f, kind);
    fprintf(f, ", \"nodes\": {\n");
    int k = 0;
    for (int i = 0; i < p->n_stages; i++)
        for (int j = 0; j < p->stages[i].n_nodes; j++, k++) {
            fprintf(f, "%s  ", k ? ",\n" : "");
            pp_json_str(f, p->stages[i].nodes[j].name);
            fprintf(f, ": %.6f", stats->node_ms[k]);
        }
    fprintf(f, "\n}}\n");
    return pp_outfile_commit(&out, true, err);
}
