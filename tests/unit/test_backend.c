/* test_backend.c: a backend added by a program, not by pprt: "count" runs
 * every node on the reference kernels through the registry's fallback and
 * counts them. Registered here, driven through the registry by pprt_run
 * like the built-in ones, it must give the reference backend's bits and
 * have run every node of every stage once per micro-batch. This file and a
 * line in tests/CMakeLists.txt are all it took: no other file knows it.
 * Through it, the executor keeper of a training run (runtime/keep.h): one
 * executor a stage made over several runs, reloaded once per change of the
 * weights, made again where its reload refuses or the settings differ,
 * destroyed after each run by a fresh keeper, all destroyed at the end.
 * Usage: test_backend PLAN INPUT.npy (a one-input plan; ctest passes the
 * digits sample compiled at -pp 2). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/backend.h"
#include "../../runtime/io.h"
#include "../../runtime/keep.h"
#include "check.h"

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    unsigned char *arena;
    void **ptr;
    pprt_node_ctx ctx;
};

static long nodes_run; /* over all stages (their threads take turns under the lock) */
static long created, destroyed, reloaded; /* executors, under the lock */
static bool refuse;                        /* reload says PP_EUNSUP */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static pp_status count_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                              pp_err *err) {
    (void)cfg;
    PP_TRY(pprt_stage_weights(p, st->index, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pthread_mutex_lock(&mu);
    created++;
    pthread_mutex_unlock(&mu);
    x->p = p, x->st = st;
    x->ptr = calloc(pp_count(st->n_tensors), sizeof *x->ptr);
    x->arena = malloc(st->arena_bytes + 64);
    for (int i = 0; x->ptr && i < st->n_tensors; i++)
        x->ptr[i] = st->t[i].kind == PPRT_WEIGHT ? (void *)st->t[i].data
                    : st->t[i].kind == PPRT_ACTIVATION ? x->arena + st->t[i].offset : NULL;
    *out = x;
    return x->ptr && x->arena ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
}

static pp_status count_run(pprt_exec *x, const void *in, void *out, pp_err *err) {
    const pprt_stage *st = x->st;
    for (int i = 0; i < st->in.n; i++) x->ptr[st->recv[i]] = (unsigned char *)in + st->in.off[i];
    for (int i = 0; i < st->out.n; i++)
        if (st->out.t[i]->kind == PPRT_SEND) x->ptr[st->send[i]] = (unsigned char *)out + st->out.off[i];
    for (int ni = 0; ni < st->n_nodes; ni++) {
        PP_TRY(pprt_backend_fallback()->run_node(x->p, st, &st->nodes[ni], x->ptr, &x->ctx, err));
        pthread_mutex_lock(&mu);
        nodes_run++;
        pthread_mutex_unlock(&mu);
    }
    pprt_pass_through(st, in, out);
    return PP_OK;
}

static void count_destroy(pprt_exec *x) {
    if (!x) return;
    pthread_mutex_lock(&mu);
    destroyed++;
    pthread_mutex_unlock(&mu);
    pprt_node_ctx_free(&x->ctx);
    free(x->arena);
    free(x->ptr);
    free(x);
}

static pp_status count_reload(pprt_exec *x, unsigned long version, pp_err *err) {
    (void)x, (void)version;
    pthread_mutex_lock(&mu);
    reloaded++;
    pthread_mutex_unlock(&mu);
    return refuse ? PP_FAIL(err, PP_EUNSUP, "refused") : PP_OK;
}

static const pprt_exec_ops count_exec = {"count", count_create, count_run, count_destroy, NULL, NULL, count_reload, NULL};
static const pprt_backend count_backend = {.name = "count", .what = "counts nodes", .exec = &count_exec};

static pprt_keeper *run_on_keeper; /* NULL: each run makes its executors */
static int run_on_threads;

static void run_on(const char *name, const pprt_plan *p, pprt_array *in, pprt_array *out, pprt_stats *st) {
    pp_err e = {0};
    pprt_run_opts o = {.depth = 2, .backend = pprt_backend_find(name)};
    o.keep = run_on_keeper, o.threads = run_on_threads;
    CHECK(o.backend != NULL, "backend %s is not in the registry", name);
    CHECK(pprt_run(p, in, in->n, out, &o, st, &e) == PP_OK, "%s: %s", name, e.msg);
}

/* One run on "count" through the keeper; its outputs the reference's (want). */
static void kept_run(const pprt_plan *p, pprt_array *in, const void *want, const char *what) {
    pprt_array got = {0};
    pprt_stats s;
    run_on("count", p, in, &got, &s);
    CHECK(got.data && !memcmp(got.data, want, (size_t)in->n * p->outputs[0].sample_bytes), "%s: outputs differ", what);
    free(got.data), free(s.stages), free(s.node_ms), free(s.latency_ms);
}

static void keeper_runs(const pprt_plan *p, pprt_array *in, int total, int64_t mbs) {
    pp_err e = {0};
    pprt_array want = {0};
    pprt_stats s;
    run_on("ref", p, in, &want, &s);
    free(s.stages), free(s.node_ms), free(s.latency_ms);
    const long S = p->n_stages;
    for (int fresh = 0; fresh < 2; fresh++) {
        created = destroyed = reloaded = nodes_run = 0, refuse = false, run_on_threads = 0;
        CHECK(pprt_keeper_new(p, 1, fresh, &run_on_keeper, &e) == PP_OK, "keeper: %s", e.msg);
        kept_run(p, in, want.data, "first run");
        kept_run(p, in, want.data, "second run, the weights unchanged");
        pprt_keeper_changed(run_on_keeper);
        kept_run(p, in, want.data, "third run, after a change");
        kept_run(p, in, want.data, "fourth run");
        if (!fresh) {
            CHECK(created == S && destroyed == 0 && reloaded == S, "kept over 4 runs, a change after the second: %ld "
                  "made, %ld destroyed, %ld reloaded, want %ld, 0, %ld", created, destroyed, reloaded, S, S);
            refuse = true;
            pprt_keeper_changed(run_on_keeper);
            kept_run(p, in, want.data, "a run whose reloads refuse");
            CHECK(created == 2 * S && destroyed == S && reloaded == 2 * S, "reloads refused: %ld made, %ld destroyed, "
                  "%ld reloaded, want %ld, %ld, %ld", created, destroyed, reloaded, 2 * S, S, 2 * S);
            run_on_threads = 3;
            kept_run(p, in, want.data, "a run with other threads a stage");
            CHECK(created == 3 * S && destroyed == 2 * S, "another --threads: %ld made, %ld destroyed, want %ld, %ld",
                  created, destroyed, 3 * S, 2 * S);
        } else {
            CHECK(created == 4 * S && destroyed == 4 * S && reloaded == 0, "a fresh keeper over 4 runs: %ld made, %ld "
                  "destroyed, %ld reloaded, want %ld, %ld, 0", created, destroyed, reloaded, 4 * S, 4 * S);
        }
        pprt_keep_counts c;
        pprt_keeper_counts(run_on_keeper, &c);
        CHECK(c.created == created, "the keeper counted %ld executors made, %ld were", c.created, created);
        pprt_keeper_free(run_on_keeper);
        run_on_keeper = NULL;
        CHECK(destroyed == created, "after the keeper: %ld of %ld executors destroyed", destroyed, created);
        CHECK(nodes_run == (long)total * mbs * (fresh ? 4 : 6), "%ld nodes run through the keeper", nodes_run);
    }
    free(want.data);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_backend PLAN INPUT.npy\n");
        return 2;
    }
    pp_err e = {0};
    CHECK(pprt_backend_register(&count_backend, &e) == PP_OK, "register: %s", e.msg);
    CHECK(pprt_backend_register(&count_backend, &e) != PP_OK && strstr(e.msg, "already"), "registered twice");
    /* ppcc prices a stage by ir/base.h's row for its backend: every backend
     * this build registers (but this test's own) has one, and it says
     * "device" exactly where the backend's messages live in a device's memory */
    for (int i = 0; i < pprt_backend_count(); i++) {
        const pprt_backend *b = pprt_backend_at(i);
        if (b == &count_backend) continue;
        const pp_backend_kind *k = pp_backend_kind_of(b->name);
        CHECK(k != NULL, "backend '%s' has no row in ir/base.c's backend_kinds", b->name);
        CHECK(!k || k->device == (b->mem == PPRT_MEM_DEVICE), "backend '%s': ppcc's row says %s, its memory is %s",
              b->name, k && k->device ? "device" : "host", b->mem == PPRT_MEM_DEVICE ? "a device's" : "the host's");
    }
    pprt_plan *p = NULL;
    pprt_npy x = {0};
    if (pprt_plan_load(argv[1], NULL, &p, &e) != PP_OK || pprt_npy_read(argv[2], &x, &e) != PP_OK) {
        fprintf(stderr, "test_backend: %s\n", e.msg);
        return 1;
    }
    pprt_array in = {x.data, x.shape.dim[0]}, got = {0}, want = {0};
    pprt_stats s1, s2;
    run_on("count", p, &in, &got, &s1);
    run_on("ref", p, &in, &want, &s2);
    int total = 0;
    for (int i = 0; i < p->n_stages; i++) total += p->stages[i].n_nodes;
    CHECK(nodes_run == (long)total * s1.micro_batches, "%ld nodes run, expected %d nodes x %lld micro-batches",
          nodes_run, total, (long long)s1.micro_batches);
    CHECK(s1.backend && !strcmp(s1.backend, "count"), "stats name the backend '%s'", s1.backend);
    CHECK(got.data && want.data && !memcmp(got.data, want.data, (size_t)in.n * p->outputs[0].sample_bytes),
          "outputs differ from the reference backend's");
    free(got.data), free(want.data), free(s1.stages), free(s2.stages), free(s1.node_ms), free(s2.node_ms);
    free(s1.latency_ms), free(s2.latency_ms);
    keeper_runs(p, &in, total, s1.micro_batches);
    pprt_npy_free(&x);
    pprt_plan_free(p);
    return check_summary("test_backend");
}
