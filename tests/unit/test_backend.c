/* test_backend.c: a backend added by a program, not by pprt: "count" runs
 * every node on the reference kernels through the registry's fallback and
 * counts them. Registered here, driven through the registry by pprt_run
 * like the built-in ones, it must give the reference backend's bits and
 * have run every node of every stage once per micro-batch. This file and a
 * line in tests/CMakeLists.txt are all it took: no other file knows it.
 * Usage: test_backend PLAN INPUT.npy (a one-input plan; ctest passes the
 * digits sample compiled at -pp 2). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/backend.h"
#include "../../runtime/io.h"
#include "check.h"

struct pprt_exec {
    const pprt_plan *p;
    const pprt_stage *st;
    unsigned char *arena;
    void **ptr;
    pprt_node_ctx ctx;
};

static long nodes_run; /* over all stages (their threads take turns under the lock) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static pp_status count_create(const pprt_plan *p, const pprt_stage *st, const pprt_exec_cfg *cfg, pprt_exec **out,
                              pp_err *err) {
    (void)cfg;
    PP_TRY(pprt_stage_weights(p, st->index, err));
    pprt_exec *x = calloc(1, sizeof *x);
    if (!x) return PP_FAIL(err, PP_ENOMEM, "out of memory");
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
    pprt_node_ctx_free(&x->ctx);
    free(x->arena);
    free(x->ptr);
    free(x);
}

static const pprt_exec_ops count_exec = {"count", count_create, count_run, count_destroy, NULL, NULL, NULL};
static const pprt_backend count_backend = {.name = "count", .what = "counts nodes", .exec = &count_exec};

static void run_on(const char *name, const pprt_plan *p, pprt_array *in, pprt_array *out, pprt_stats *st) {
    pp_err e = {0};
    pprt_run_opts o = {.depth = 2, .backend = pprt_backend_find(name)};
    CHECK(o.backend != NULL, "backend %s is not in the registry", name);
    CHECK(pprt_run(p, in, in->n, out, &o, st, &e) == PP_OK, "%s: %s", name, e.msg);
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
    pprt_npy_free(&x);
    pprt_plan_free(p);
    return check_summary("test_backend");
}
