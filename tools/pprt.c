/* pprt.c: the runtime's command line: load a plan, load data, run the
 * pipeline, write outputs and statistics, map the status to an exit code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/io.h"
#include "../runtime/pprt.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: pprt PLAN DATA_DIR [-o OUT_DIR] [--labels FILE.npy] [--depth N]\n"
            "            [--check [--rtol R] [--atol A] [--expected DIR]]\n"
            "            [--stats-json FILE] [--profile FILE] [--no-pin] [-q]\n"
            "       pprt --info PLAN\n"
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
            "  --profile FILE    write each node's mean time per micro-batch, for ppcc --profile\n"
            "  --no-pin          do not pin stage threads to cores\n"
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
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(tmp);
        return PP_FAIL(err, PP_EIO, "cannot write '%s': %s", path, strerror(errno));
    }
    fprintf(f,
            "{\"samples\": %lld, \"micro_batches\": %lld, \"wall_s\": %.6f, \"samples_per_s\": %.3f, "
            "\"latency_ms\": {\"mean\": %.4f, \"p99\": %.4f}, \"stages\": [",
            (long long)st->samples, (long long)st->micro_batches, st->wall_s, st->samples_per_s,
            st->latency_mean_ms, st->latency_p99_ms);
    for (int i = 0; i < st->n_stages; i++)
        fprintf(f, "%s{\"index\": %d, \"busy_s\": %.6f, \"utilization\": %.4f}", i ? ", " : "", i,
                st->stages[i].busy_s, st->stages[i].utilization);
    fprintf(f, "], \"bubble\": %.4f, \"peak_rss_bytes\": %zu}\n", st->bubble, st->peak_rss);
    bool ok = fclose(f) == 0;
    pp_status s = PP_OK;
    if (!ok || rename(tmp, path) != 0) {
        s = PP_FAIL(err, PP_EIO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return s;
}

int main(int argc, char **argv) {
    const char *plan_path = NULL, *data = NULL, *out_dir = "out", *labels = NULL, *stats_json = NULL;
    const char *profile = NULL;
    bool info = false, quiet = false;
    pprt_run_opts ro = {.depth = 2, .pin = true};
    pprt_check_opts co = {.rtol = 1e-3, .atol = 1e-5};
    bool check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("pprt %s\n", PPRT_VERSION);
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
    if (!info && !data) return bad_usage("no data directory given", NULL);

    pp_err err = {0};
    pprt_plan *p = NULL;
    pp_status s = pprt_plan_load(plan_path, &p, &err);
    if (s == PP_OK && info) {
        print_info(p);
        pprt_plan_free(p);
        return 0;
    }
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
    if (s == PP_OK) s = pprt_data_load(p, data, npys, ins, &n, &err);
    if (s == PP_OK) {
        ro.progress = !quiet && isatty(2);
        s = pprt_run(p, ins, n, outs, &ro, &st, &err);
    }
    if (s == PP_OK) s = pprt_data_write(p, out_dir, outs, &err);
    if (s == PP_OK && !quiet) {
        printf("pprt: %lld samples, %lld micro-batches of %lld, %d stage%s, depth %d\n",
               (long long)n, (long long)st.micro_batches, (long long)p->batch, p->n_stages,
               p->n_stages == 1 ? "" : "s", ro.depth);
        printf("throughput: %.1f samples/s  wall %.3f s  latency per micro-batch: mean %.3f ms, p99 %.3f ms\n",
               st.samples_per_s, st.wall_s, st.latency_mean_ms, st.latency_p99_ms);
        for (int i = 0; i < st.n_stages; i++)
            printf("stage %d: busy %.3f s (%.1f%%), %d ops, %.4f GFLOP per micro-batch\n", i,
                   st.stages[i].busy_s, 100 * st.stages[i].utilization, p->stages[i].n_nodes,
                   p->stages[i].flops / 1e9);
        printf("bubble: %.1f%%  peak RSS: %.1f MB\n", 100 * st.bubble, (double)st.peak_rss / 1e6);
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
    if (s != PP_OK) {
        fprintf(stderr, "pprt: error: %s\n", err.msg);
        return pp_exit_code(s);
    }
    return 0;
}
