/* pprt.c: the runtime's command line: load a plan, load data, run the
 * pipeline, write outputs and statistics, map the status to an exit code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/comm/comm.h"
#include "../runtime/io.h"
#include "../runtime/pprt.h"

#ifdef PPRT_WITH_DNNL
#define DEFAULT_BACKEND "dnnl"
#else
#define DEFAULT_BACKEND "ref (this build has no oneDNN)"
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: pprt PLAN DATA_DIR [-o OUT_DIR] [--labels FILE.npy] [--depth N]\n"
            "            [--check [--rtol R] [--atol A] [--expected DIR]]\n"
            "            [--stats-json FILE] [--profile FILE] [--no-pin] [-q]\n"
            "            [--backend dnnl|ref] [--threads N] [--warmup N] [--precision f32|bf16]\n"
            "       mpirun -np K*R pprt PLAN DATA_DIR [--replicas R] [--mpi-timeout SECONDS] [...]\n"
            "       pprt --info PLAN [--model FILE]\n"
            "  DATA_DIR          NAME.npy per plan input (N samples on dim 0), or ONNX test data:\n"
            "                    input_K.pb TensorProto files, matched by tensor name, else by K\n"
            "  -o OUT_DIR        where outputs go, one NAME.npy each (default out)\n"
            "  --labels FILE     int class indices: print top-1 accuracy of the first output\n"
            "  --check           compare each output with DATA_DIR/output_K.pb, else NAME.npy in\n"
            "                    DATA_DIR/../expected or DATA_DIR/expected; exit 1 on a mismatch\n"
            "  --rtol R, --atol A  tolerance |got-want| <= A + R*|want| (default 1e-3, 1e-5)\n"
            "  --expected DIR    take expected values from DIR/NAME.npy (or DIR/output_K.pb)\n"
            "  --depth N         micro-batches in flight per stage boundary (default 2)\n"
            "  --stats-json FILE write the run statistics as JSON\n"
            "  --profile FILE    write each node's mean time per micro-batch (the --warmup runs left\n"
            "                    out), for ppcc --profile\n"
            "  --no-pin          do not pin stage threads to cores\n"
            "  --model FILE      a ppcc --ref-weights plan: read its weights from FILE (and its\n"
            "                    external data beside it) instead of the path the plan recorded;\n"
            "                    the file must be the one compiled from (size and XXH3 checked)\n"
            "  --replicas R      under mpirun: R pipelines of the plan's K stages on K*R ranks,\n"
            "                    each a contiguous share of the micro-batches (default 1)\n"
            "  --mpi-timeout S   under mpirun: a rank silent for S seconds is presumed dead and\n"
            "                    every rank exits (default 60)\n"
            "  --backend B       kernels: dnnl (oneDNN) or ref (the reference kernels); default:\n"
            "                    " DEFAULT_BACKEND "\n"
            "  --threads N       intra-op threads per stage (oneDNN; default: cores / stages)\n"
            "  --precision P     f32 (default) or bf16: oneDNN convolutions and matrix products in\n"
            "                    bfloat16 (8-bit mantissa, f32 sums; fast on CPUs with AVX512_BF16\n"
            "                    or AMX; needs AVX-512, else it warns and runs f32); inputs, outputs\n"
            "                    and the plan stay f32\n"
            "  --warmup N        first run N untimed copies of the first micro-batch through the\n"
            "                    pipeline (outputs dropped; not under mpirun; default 0)\n"
            "  -q                print only errors\n");
}

static int bad_usage(const char *msg, const char *arg) {
    fprintf(stderr, "pprt: %s%s\n", msg, arg ? arg : "");
    usage(stderr);
    return 2;
}

static void print_info(const pprt_plan *p) {
    printf("plan: %zu bytes, %s, model %s, options: %s\n", p->file_bytes, p->producer,
           p->model_hash, p->options);
    printf("micro-batch %lld, %d stage%s, %.2f MB of weights\n", (long long)p->batch, p->n_stages,
           p->n_stages == 1 ? "" : "s", (double)p->weights_bytes / 1e6);
    for (int i = 0; i < p->n_sources; i++)
        printf("weights referenced in: %s (%zu bytes, size and XXH3 checked)\n", p->sources[i].path,
               p->sources[i].len);
    char sh[128];
    for (int i = 0; i < p->n_inputs; i++)
        printf("input  %d: %s %s %s\n", i, p->inputs[i].name, pp_dtype_name(p->inputs[i].dtype),
               pp_shape_str(&p->inputs[i].shape, sh, sizeof sh));
    for (int i = 0; i < p->n_outputs; i++)
        printf("output %d: %s %s %s\n", i, p->outputs[i].name, pp_dtype_name(p->outputs[i].dtype),
               pp_shape_str(&p->outputs[i].shape, sh, sizeof sh));
    for (int s = 0; s < p->n_stages; s++) {
        const pprt_stage *st = &p->stages[s];
        printf("stage %d: %d ops, %.4f GFLOP, weights %.3f MB, arena %.3f MB, in %.3f MB, out %.3f MB\n",
               s, st->n_nodes, st->flops / 1e9, (double)st->weight_bytes / 1e6,
               (double)st->arena_bytes / 1e6, (double)st->in.bytes / 1e6, (double)st->out.bytes / 1e6);
        for (int k = 0; k < st->n_nodes; k++)
            printf("  %-20s %s\n", pp_op_table[st->nodes[k].op].name, st->nodes[k].name);
        if (s < p->n_stages - 1) {
            printf("  sends:");
            for (int k = 0; k < st->out.n; k++)
                printf(" %s%s", st->out.t[k]->name, pp_shape_str(&st->out.t[k]->shape, sh, sizeof sh));
            printf("\n");
        }
    }
}

static pp_status write_stats_json(const char *path, const pprt_stats *st, pp_err *err) {
    pp_outfile out;
    PP_TRY(pp_outfile_open(&out, path, err));
    FILE *f = out.f;
    fprintf(f,
            "{\"samples\": %lld, \"micro_batches\": %lld, \"wall_s\": %.6f, \"samples_per_s\": %.3f, "
            "\"steady_samples_per_s\": %.3f, \"latency_ms\": {\"mean\": %.4f, \"p99\": %.4f}, \"stages\": [",
            (long long)st->samples, (long long)st->micro_batches, st->wall_s, st->samples_per_s,
            st->steady_samples_per_s, st->latency_mean_ms, st->latency_p99_ms);
    for (int i = 0; i < st->n_stages; i++) {
        const pprt_exec_counts *c = &st->stages[i].exec;
        fprintf(f,
                "%s{\"index\": %d, \"busy_s\": %.6f, \"utilization\": %.4f, \"nodes\": %d, \"own_kernels\": %d, "
                "\"post_ops\": %d, \"views\": %d, \"reference_kernels\": %d, \"reorders_per_micro_batch\": %d, "
                "\"copies_per_micro_batch\": %d, \"outputs_in_place\": %d, \"blocked_tensors\": %d, "
                "\"weights_reordered_bytes\": %.0f, \"cpus\": \"%s\"}",
                i ? ", " : "", i, st->stages[i].busy_s, st->stages[i].utilization, c->nodes, c->own, c->post_ops,
                c->views, c->reference, c->reorders, c->copies, c->in_place, c->blocked, c->weight_bytes,
                st->stages[i].cpus);
    }
    fprintf(f, "], \"backend\": \"%s\", \"bubble\": %.4f, \"peak_rss_bytes\": %zu, \"rss_loaded_bytes\": %zu}\n",
            st->backend ? st->backend : "", st->bubble, st->peak_rss, st->rss_loaded);
    return pp_outfile_commit(&out, true, err);
}

int main(int argc, char **argv) {
    const char *plan_path = NULL, *data = NULL, *out_dir = "out", *labels = NULL, *stats_json = NULL, *model = NULL;
    const char *profile = NULL;
    bool info = false, quiet = false;
    pprt_run_opts ro = {.depth = 2, .pin = true};
#ifdef PPRT_WITH_DNNL
    ro.executor = &pprt_exec_cpu_dnnl;
#else
    ro.executor = &pprt_exec_cpu_ref;
#endif
    pprt_check_opts co = {.rtol = 1e-3, .atol = 1e-5};
    bool check = false;
    int replicas = 1;
    double mpi_timeout = 60;
    const char *mpi_opt = NULL; /* an option that only applies under mpirun */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
#ifdef PPRT_WITH_DNNL
            printf("pprt %s (oneDNN backend; bf16 kernels on this CPU: %s)\n", PPRT_VERSION,
                   pprt_dnnl_has_bf16() ? "yes" : "no, --precision bf16 runs in f32");
#else
            printf("pprt %s (reference kernels only)\n", PPRT_VERSION);
#endif
            return 0;
        } else if (!strcmp(a, "--info")) {
            info = true;
        } else if (!strcmp(a, "-o")) {
            if (!v) return bad_usage("-o needs a directory", NULL);
            out_dir = v, i++;
        } else if (!strcmp(a, "--labels")) {
            if (!v) return bad_usage("--labels needs a .npy file", NULL);
            labels = v, i++;
        } else if (!strcmp(a, "--profile")) {
            if (!v) return bad_usage("--profile needs a file name", NULL);
            profile = v, i++;
        } else if (!strcmp(a, "--stats-json")) {
            if (!v) return bad_usage("--stats-json needs a file name", NULL);
            stats_json = v, i++;
        } else if (!strcmp(a, "--depth")) {
            char *end;
            long d = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || d < 1 || d > 1024) return bad_usage("--depth needs 1..1024, got ", v ? v : "");
            ro.depth = (int)d, i++;
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else if (!strcmp(a, "--rtol") || !strcmp(a, "--atol")) {
            char *end;
            double t = v ? strtod(v, &end) : -1;
            if (!v || end == v || *end || !(t >= 0 && t < 1e300))
                return bad_usage(a[2] == 'r' ? "--rtol needs a tolerance >= 0, got "
                                             : "--atol needs a tolerance >= 0, got ", v ? v : "");
            *(a[2] == 'r' ? &co.rtol : &co.atol) = t;
            check = true, i++;
        } else if (!strcmp(a, "--expected")) {
            if (!v) return bad_usage("--expected needs a directory", NULL);
            co.expected_dir = v, check = true, i++;
        } else if (!strcmp(a, "--backend")) {
            if (!v) return bad_usage("--backend needs dnnl or ref", NULL);
            if (!strcmp(v, "ref")) {
                ro.executor = &pprt_exec_cpu_ref;
            } else if (!strcmp(v, "dnnl")) {
#ifdef PPRT_WITH_DNNL
                ro.executor = &pprt_exec_cpu_dnnl;
#else
                return bad_usage("--backend dnnl: this pprt was built without oneDNN (libdnnl-dev)", NULL);
#endif
            } else {
                return bad_usage("--backend needs dnnl or ref, got ", v);
            }
            i++;
        } else if (!strcmp(a, "--threads")) {
            char *end;
            long t = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || t < 1 || t > 1024) return bad_usage("--threads needs 1..1024, got ", v ? v : "");
            ro.threads = (int)t, i++;
        } else if (!strcmp(a, "--precision")) {
            if (!v || (strcmp(v, "f32") && strcmp(v, "bf16")))
                return bad_usage("--precision needs f32 or bf16, got ", v ? v : "");
            ro.precision = strcmp(v, "bf16") ? PPRT_F32 : PPRT_BF16, i++;
        } else if (!strcmp(a, "--warmup")) {
            char *end;
            long t = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || t < 0 || t > 1000000) return bad_usage("--warmup needs 0..1000000, got ", v ? v : "");
            ro.warmup = (int)t, i++;
        } else if (!strcmp(a, "--replicas")) {
            char *end;
            long r = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || r < 1 || r > 4096) return bad_usage("--replicas needs 1..4096, got ", v ? v : "");
            replicas = (int)r, mpi_opt = a, i++;
        } else if (!strcmp(a, "--mpi-timeout")) {
            char *end;
            double t = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || !(t >= 0.1 && t <= 1e6))
                return bad_usage("--mpi-timeout needs seconds in 0.1..1e6, got ", v ? v : "");
            mpi_timeout = t, mpi_opt = a, i++;
        } else if (!strcmp(a, "--model")) {
            if (!v) return bad_usage("--model needs the model file a --ref-weights plan was compiled from", NULL);
            model = v, i++;
        } else if (!strcmp(a, "--no-pin")) {
            ro.pin = false;
        } else if (!strcmp(a, "-q")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return bad_usage("unknown option ", a);
        } else if (!plan_path) {
            plan_path = a;
        } else if (!data) {
            data = a;
        } else {
            return bad_usage("unexpected argument ", a);
        }
    }
    if (!plan_path) return bad_usage("no plan given", NULL);
    if (ro.precision == PPRT_BF16 && ro.executor == &pprt_exec_cpu_ref)
        return bad_usage("--precision bf16 needs the oneDNN backend (--backend dnnl); the reference kernels "
                         "compute in f32 only", NULL);
    if (!info && !data) return bad_usage("no data directory given", NULL);
#ifdef PPRT_WITH_DNNL
    if (ro.precision == PPRT_BF16 && !info && !pprt_dnnl_has_bf16()) {
        fprintf(stderr, "pprt: warning: oneDNN has no bf16 kernels on this CPU (they need AVX-512; fast with "
                        "AVX512_BF16 or AMX): --precision bf16 runs in f32\n");
        ro.precision = PPRT_F32;
    }
#endif

    /* under mpirun: one stage per rank (runtime/comm/comm.h) */
    const char *launcher = pprt_mpi_launcher_env();
#ifndef PPRT_HAVE_MPI
    (void)replicas, (void)mpi_timeout;
    if (launcher || mpi_opt) {
        const char *how = "rebuild it with MPI (apt-get install libopenmpi-dev openmpi-bin, then cmake "
                          "-DPP_WITH_MPI=ON)";
        if (launcher)
            fprintf(stderr, "pprt: error: this pprt was built without MPI, so it cannot run under mpirun "
                    "(the environment has %s); %s\n", launcher, how);
        else
            fprintf(stderr, "pprt: error: this pprt was built without MPI, so it cannot take %s; %s\n",
                    mpi_opt, how);
        return 2;
    }
#else
    if (!launcher && mpi_opt) return bad_usage(mpi_opt, " applies only under mpirun (mpirun -np K pprt ...)");
    if (launcher && ro.warmup > 0) return bad_usage("--warmup is not supported under mpirun", NULL);
    pprt_mpi *mpi = NULL;
    if (launcher && !info) {
        pp_err e = {0};
        pprt_mpi_opts mo = {.replicas = replicas, .timeout_s = mpi_timeout};
        if (pprt_mpi_start(&argc, &argv, &mo, &mpi, &e) != PP_OK) {
            fprintf(stderr, "pprt: error: %s\n", e.msg);
            return 1;
        }
    }
#endif

    pp_err err = {0};
    pprt_plan *p = NULL;
    pp_status s = pprt_plan_load(plan_path, model, &p, &err);
    if (s == PP_OK && info) {
        if (!launcher || pprt_mpi_env_rank() <= 0) print_info(p); /* once under mpirun */
        pprt_plan_free(p);
        return 0;
    }
#ifdef PPRT_HAVE_MPI
    if (mpi && s == PP_OK) s = pprt_mpi_bind(mpi, p, &err);
    if (mpi && s != PP_OK) return pprt_mpi_finish(mpi, s, &err); /* ends every rank */
#endif
    pprt_npy *npys = NULL;
    pprt_array *ins = NULL, *outs = NULL;
    pprt_stats st = {0};
    int64_t n = 0;
    if (s == PP_OK) {
        npys = calloc(pp_count(p->n_inputs), sizeof *npys);
        ins = calloc(pp_count(p->n_inputs), sizeof *ins);
        outs = calloc((size_t)p->n_outputs, sizeof *outs);
        if (!npys || !ins || !outs) s = PP_FAIL(&err, PP_ENOMEM, "out of memory");
    }
    if (s == PP_OK && ro.threads > 0) {
        /* more threads than cores only slows every stage down: a stage gets
         * its share of the cores this process may use (taskset, a cpuset);
         * under mpirun a rank gets at most its share of the machine's, which
         * its ranks share (pprt_rank_cores) */
        long cores = launcher ? pprt_rank_cores(pprt_mpi_env_local_size()) : pprt_cpus_allowed(NULL, 0);
        long sharers = launcher ? 1 : p->n_stages;
        if ((long)ro.threads * sharers > cores && ro.threads > 1) {
            int t = cores / sharers > 1 ? (int)(cores / sharers) : 1;
            fprintf(stderr, "pprt: warning: %ld %s x %d threads exceed the %ld cores %s; using %d thread%s per %s\n",
                    sharers, launcher ? "rank" : sharers == 1 ? "stage" : "stages", ro.threads, cores,
                    launcher ? "this rank may use" : "this process may use", t, t == 1 ? "" : "s",
                    launcher ? "rank" : "stage");
            ro.threads = t;
        }
    }
#ifdef PPRT_HAVE_MPI
    if (mpi) { /* rank 0 reads the data, the writer (last rank of replica 0) reports */
        if (s == PP_OK && pprt_mpi_reads_data(mpi)) s = pprt_data_load(p, data, npys, ins, &n, &err);
        if (s == PP_OK) s = pprt_run_mpi(mpi, p, ins, &n, outs, &ro, &st, &err);
        if (s != PP_OK) return pprt_mpi_finish(mpi, s, &err); /* ends every rank */
        if (!pprt_mpi_writes_outputs(mpi)) goto cleanup;
        goto ran;
    }
#endif
    if (s == PP_OK) s = pprt_data_load(p, data, npys, ins, &n, &err);
    if (s == PP_OK) {
        ro.progress = !quiet && isatty(2);
        s = pprt_run(p, ins, n, outs, &ro, &st, &err);
    }
#ifdef PPRT_HAVE_MPI
ran:
#endif
    if (s == PP_OK) s = pprt_data_write(p, out_dir, outs, &err);
    if (s == PP_OK && !quiet) {
        printf("pprt: %lld samples, %lld micro-batches of %lld, %d stage%s, depth %d\n",
               (long long)n, (long long)st.micro_batches, (long long)p->batch, p->n_stages,
               p->n_stages == 1 ? "" : "s", ro.depth);
        printf("throughput: %.1f samples/s (steady state %.1f)  wall %.3f s  latency per micro-batch: mean %.3f ms, "
               "p99 %.3f ms\n",
               st.samples_per_s, st.steady_samples_per_s, st.wall_s, st.latency_mean_ms, st.latency_p99_ms);
        for (int i = 0; i < st.n_stages; i++) {
            const pprt_exec_counts *c = &st.stages[i].exec;
            printf("stage %d: busy %.3f s (%.1f%%), %d ops, %.4f GFLOP per micro-batch", i,
                   st.stages[i].busy_s, 100 * st.stages[i].utilization, p->stages[i].n_nodes,
                   p->stages[i].flops / 1e9);
            if (c->own > 0)
                printf("; %s: %d on its kernels (%d fused as post-ops, %d view%s), %d on reference ones, %d "
                       "reorder%s and %d cop%s per micro-batch", st.backend, c->own, c->post_ops, c->views,
                       c->views == 1 ? "" : "s", c->reference, c->reorders, c->reorders == 1 ? "" : "s", c->copies,
                       c->copies == 1 ? "y" : "ies");
            if (st.stages[i].cpus[0]) printf("; pinned to CPU %s", st.stages[i].cpus);
            printf("\n");
        }
        printf("bubble: %.1f%%  peak RSS: %.1f MB\n", 100 * st.bubble, (double)st.peak_rss / 1e6);
#ifdef PPRT_HAVE_MPI
        if (mpi)
            printf("mpi: %d ranks, %d replica%s of %d stage%s (busy summed over replicas, utilization and "
                   "bubble over stages x replicas)\n", pprt_mpi_size(mpi), replicas,
                   replicas == 1 ? "" : "s", p->n_stages, p->n_stages == 1 ? "" : "s");
#endif
    }
    if (s == PP_OK && labels) {
        int64_t good = 0;
        s = pprt_top1(p, &outs[0], labels, &good, &err);
        if (s == PP_OK)
            printf("accuracy: %.6f (%lld/%lld, top-1 of '%s')\n", (double)good / (double)n,
                   (long long)good, (long long)n, p->outputs[0].name);
    }
    if (s == PP_OK && stats_json) s = write_stats_json(stats_json, &st, &err);
    if (s == PP_OK && profile) s = pprt_profile_write(profile, p, &st, &err);
    if (s == PP_OK && !quiet) printf("outputs: %s/\n", out_dir);
    if (s == PP_OK && check) s = pprt_check(p, outs, data, &co, stdout, &err);
#ifdef PPRT_HAVE_MPI
cleanup:
#endif
    if (p) {
        for (int i = 0; npys && i < p->n_inputs; i++) pprt_npy_free(&npys[i]);
        for (int i = 0; outs && i < p->n_outputs; i++) free(outs[i].data);
    }
    free(npys);
    free(ins);
    free(outs);
    free(st.stages);
    free(st.node_ms);
    pprt_plan_free(p);
#ifdef PPRT_HAVE_MPI
    if (mpi) {
        fflush(stdout);
        return pprt_mpi_finish(mpi, s, &err); /* prints an error itself */
    }
#endif
    if (s != PP_OK) {
        fprintf(stderr, "pprt: error: %s\n", err.msg);
        return pp_exit_code(s);
    }
    return 0;
}
