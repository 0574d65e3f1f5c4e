/* test_devlinks.c: cuda-emu's messages in its emulated device space, on the
 * threaded driver (labels fast, cuda; tests/cuda/devlinks.sh runs it over
 * digits at -pp 1, 2, 3 and heterogeneous placements, about 5 s in all).
 *
 * usage: test_devlinks PLAN INPUT.npy [--all]
 *   --all: every stage on cuda-emu (else the plan's placement: ppcc
 *   --placement 0:ref,1:cuda-emu,2:dnnl and the like)
 *
 * For the plan as placed it checks that
 *   - it runs, with each cuda-emu stage's messages in the emulated device
 *     memory of its device (the executor refuses anything else, checked
 *     against the space's registry on every micro-batch);
 *   - the links copied exactly where the places differ: per micro-batch one
 *     host -> device copy into each device stage whose producer (or the
 *     inputs) is on the host, one device -> host copy out of each device
 *     stage whose consumer (or the outputs) is on the host, one peer copy
 *     between two stages on different devices, none between two stages on
 *     one device (counted by the space);
 *   - its outputs are bit-identical to the same plan with cuda-emu's
 *     executor on host messages (a backend registered here with the same
 *     executor and host memory: what cuda-emu was before device links), to
 *     the same plan with every stage on device 0 (--devices 0: device
 *     queues, no peer copies), and to the same plan with the pipeline's
 *     ends overlapped (--cuda-overlap on, at --depth 2 and at --depth 3
 *     with 2 warm-up micro-batches: the same copies, warm-up ones included);
 *   - and within rtol 1e-3, atol 1e-4 of the reference backend (--backend ref). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/backend.h"
#include "../../runtime/cuda/cuda_backend.h"
#include "../../runtime/cuda/mem_emu.h"
#include "../../runtime/io.h"
#include "../../runtime/microbatch.h"
#include "../unit/check.h"

static const pprt_backend emu_host = {
    .name = "cuda-emu-host",
    .what = "cuda-emu's executor on host messages (test_devlinks)",
    .exec = &pprt_exec_cuda_emu,
    .mem = PPRT_MEM_HOST,
};

/* The plan's outputs (caller frees with free_outs). */
static pprt_array *run_with(const pprt_plan *p, const pprt_array *in, const pprt_backend *override, pprt_emu_counts *d,
                            int depth, int warmup) {
    pp_err e = {0};
    pprt_run_opts o = {.depth = depth, .warmup = warmup, .backend = override};
    pprt_array *out = calloc((size_t)p->n_outputs, sizeof *out);
    pprt_stats st = {0};
    pprt_emu_counts a, b;
    pprt_emu_counts_get(&a);
    CHECK(pprt_run(p, in, in->n, out, &o, &st, &e) == PP_OK, "run: %s", e.msg);
    pprt_emu_counts_get(&b);
    if (d) *d = (pprt_emu_counts){b.h2d - a.h2d, b.d2h - a.d2h, b.d2d - a.d2d, b.peer - a.peer, b.bytes - a.bytes};
    free(st.stages);
    free(st.node_ms);
    free(st.latency_ms);
    pprt_trace_free(st.trace);
    return out;
}

static pprt_array *run(const pprt_plan *p, const pprt_array *in, const pprt_backend *override, pprt_emu_counts *d) {
    return run_with(p, in, override, d, 2, 0);
}

static void free_outs(const pprt_plan *p, pprt_array *o) {
    for (int i = 0; i < p->n_outputs; i++) free(o[i].data);
    free(o);
}

/* Whether every output of a and b has the same bits. */
static bool same(const pprt_plan *p, const pprt_array *a, const pprt_array *b, int64_t n) {
    for (int i = 0; i < p->n_outputs; i++)
        if (!a[i].data || !b[i].data || memcmp(a[i].data, b[i].data, (size_t)n * p->outputs[i].sample_bytes)) return false;
    return true;
}

static bool on_emu(const pprt_plan *p, int s) {
    const pprt_backend *b = NULL;
    pp_err e = {0};
    return pprt_stage_backend(p, s, NULL, &b, &e) == PP_OK && b == pprt_backend_find("cuda-emu");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_devlinks PLAN INPUT.npy [--all]\n");
        return 2;
    }
    pp_err e = {0};
    pprt_plan *p = NULL;
    pprt_npy x = {0};
    if (pprt_plan_load(argv[1], NULL, &p, &e) != PP_OK || pprt_npy_read(argv[2], &x, &e) != PP_OK) {
        fprintf(stderr, "test_devlinks: %s\n", e.msg);
        return 1;
    }
    CHECK(pprt_backend_register(&emu_host, &e) == PP_OK, "%s", e.msg);
    const int P = p->n_stages;
    if (P > 64) {
        fprintf(stderr, "test_devlinks: at most 64 stages, the plan has %d\n", P);
        return 2;
    }
    if (argc > 3 && !strcmp(argv[3], "--all"))
        for (int s = 0; s < P; s++) p->stages[s].backend = "cuda-emu";
    pprt_array in = {x.data, x.shape.dim[0]};
    const int64_t M = pprt_mb_count(p, in.n);

    /* as placed: each stage on emulated device (placement, else) its index % devices */
    pprt_emu_counts c;
    pprt_array *a = run(p, &in, NULL, &c);
    int dev[64] = {0};
    bool emu[64] = {0};
    long h2d = 0, d2h = 0, peer = 0;
    for (int s = 0; s < P; s++) {
        emu[s] = on_emu(p, s);
        dev[s] = p->stages[s].device >= 0 ? p->stages[s].device : s % PPRT_EMU_DEVICES;
    }
    for (int s = 0; s <= P; s++) { /* boundary s: into stage s (s = P: the outputs) */
        const bool from = s > 0 && emu[s - 1], to = s < P && emu[s];
        if (to && !from) h2d += M;
        if (from && !to) d2h += M;
        if (from && to && dev[s - 1] != dev[s]) peer += M;
    }
    CHECK(c.h2d == h2d && c.d2h == d2h && c.peer == peer && c.d2d == 0,
          "copies: %ld host->device, %ld device->host, %ld peer, %ld on one device; expected %ld, %ld, %ld, 0", c.h2d,
          c.d2h, c.peer, c.d2d, h2d, d2h, peer);

    /* every cuda-emu stage on host messages */
    const char *saved[64] = {0};
    for (int s = 0; s < P; s++) {
        saved[s] = p->stages[s].backend;
        if (emu[s]) p->stages[s].backend = "cuda-emu-host";
    }
    pprt_emu_counts c_host;
    pprt_array *b = run(p, &in, NULL, &c_host);
    CHECK(c_host.h2d + c_host.d2h + c_host.peer + c_host.d2d == 0, "host messages, yet the emulated space copied");
    CHECK(same(p, a, b, in.n), "device messages give other bits than host messages");
    for (int s = 0; s < P; s++) p->stages[s].backend = saved[s];

    /* every device stage on device 0: queues of device buffers, no peer copies */
    pprt_cuda_config()->n_devices = 1;
    pprt_cuda_config()->devices[0] = 0;
    pprt_emu_counts c0;
    pprt_array *d = run(p, &in, NULL, &c0);
    pprt_cuda_config()->n_devices = 0;
    CHECK(c0.peer == 0 && c0.h2d == h2d && c0.d2h == d2h, "--devices 0: %ld peer copies, %ld h2d, %ld d2h", c0.peer,
          c0.h2d, c0.d2h);
    CHECK(same(p, a, d, in.n), "--devices 0 gives other bits");

    /* the pipeline's ends overlapped (link_stage.c's pump threads): the same copies and bits */
    pprt_cuda_config()->overlap = true;
    for (int v = 0; v < 2; v++) {
        const int depth = v ? 3 : 2, warm = v ? 2 : 0;
        pprt_emu_counts co;
        pprt_array *o = run_with(p, &in, NULL, &co, depth, warm);
        const long wh = h2d / M * (M + warm), wd = d2h / M * (M + warm), wp = peer / M * (M + warm);
        CHECK(co.h2d == wh && co.d2h == wd && co.peer == wp && co.d2d == 0, "--cuda-overlap on, --depth %d, --warmup "
              "%d: %ld h2d, %ld d2h, %ld peer, %ld d2d copies; expected %ld, %ld, %ld, 0", depth, warm, co.h2d, co.d2h,
              co.peer, co.d2d, wh, wd, wp);
        CHECK(same(p, a, o, in.n), "--cuda-overlap on (--depth %d, --warmup %d) gives other bits", depth, warm);
        free_outs(p, o);
    }
    pprt_cuda_config()->overlap = false;

    /* the reference backend */
    pprt_array *r = run(p, &in, pprt_backend_find("ref"), NULL);
    double worst = 0;
    for (int k = 0; k < p->n_outputs; k++) {
        if (p->outputs[k].dtype != PP_F32) continue;
        const float *got = a[k].data, *want = r[k].data;
        size_t bad = 0, n = (size_t)in.n * p->outputs[k].sample_bytes / sizeof(float);
        for (size_t i = 0; got && want && i < n; i++) {
            const double diff = fabs((double)got[i] - want[i]);
            if (diff > 1e-4 + 1e-3 * fabs((double)want[i]) || isnan(got[i])) bad++;
            if (diff > worst) worst = diff;
        }
        CHECK(got && want && bad == 0, "output '%s': %zu of %zu values beyond rtol 1e-3, atol 1e-4 of ref (largest "
              "error %g)", p->outputs[k].name, bad, n, worst);
    }
    printf("test_devlinks: %s: %d stages, %lld micro-batches: %ld h2d, %ld d2h, %ld peer copies; largest error "
           "against ref %.3g\n", argv[1], P, (long long)M, c.h2d, c.d2h, c.peer, worst);
    free_outs(p, a), free_outs(p, b), free_outs(p, d), free_outs(p, r);
    pprt_npy_free(&x);
    pprt_plan_free(p);
    return check_summary("test_devlinks");
}
