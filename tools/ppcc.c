/* ppcc.c: the compiler's command line: parse options, run import -> passes
 * -> lower -> write, map the status to an exit code. Nothing else. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../ir/args.h"
#include "../frontend/frontend.h"
#include "../passes/passes.h"
#include "../runtime/pprt.h"
#include "measure.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ppcc MODEL.onnx [-pp N] [-o PLAN] [-b N] [--dim NAME=VALUE]... [--const NAME=FILE.pb]...\n"
            "            [--policy NAME] [--split-at P,..] [--exec-seq FILE]\n"
            "            [--max-memory CAPS] [--ref-weights] [--report] [--report-json FILE]\n"
            "            [--report-html FILE] [--export-stages DIR] [--measure] [-q]\n"
            "  -pp N, --pp N    pipeline stages (default 1)\n"
            "  -o PLAN, --output PLAN\n"
            "                   output plan file (default plan.bin)\n"
            "  -b N             micro-batch size: value of the inputs' symbolic first dim (default:\n"
            "                   the model's, else 1); -b 0: no batch axis, inputs are whole tensors\n"
            "  --dim NAME=VALUE value of another symbolic input dim\n"
            "  --const NAME=FILE.pb\n"
            "                   bind graph input NAME to the constant in an ONNX TensorProto file\n"
            "                   (type and fixed dims must match the declaration)\n"
            "  --ref-weights    leave weights of 64 KiB or more in the model's files: the plan\n"
            "                   names them (absolute path, size, XXH3) instead of holding a copy,\n"
            "                   and pprt reads them from there (or from pprt --model FILE)\n"
            "  --report         print the per-stage table, imbalance, bubble, recovered ops and\n"
            "                   the tensors crossing each cut\n"
            "  --report-json F  the same as JSON\n"
            "  --report-html F  the split as one self-contained HTML page: the graph by stage,\n"
            "                   the cuts, per-stage bars, the other policies compared\n"
            "  --export-stages DIR\n"
            "                   every stage as an ONNX model: DIR/stage_K.onnx (+ .onnx.data),\n"
            "                   and DIR/stages.json saying how they connect\n"
            "  --modules        list the model's module paths (as PyTorch's named_modules()\n"
            "                   names them), each with its op count and first op; no plan\n"
            "  --measure        split by measured op times: ppcc runs the model as one stage with\n"
            "                   pprt --profile on random inputs (at -b, with the threads a stage of\n"
            "                   the split gets: the cores this process may use / stages) and uses\n"
            "                   them as --profile would; pprt: $PPCC_PPRT, else the one beside ppcc,\n"
            "                   else PATH's; with --search, at every micro-batch size it tries\n"
            "                   (threads: the cores / --devices)\n"
            "  --measure-args A more pprt arguments for --measure, e.g. '--backend cuda' or\n"
            "                   '--precision bf16' (a --threads here replaces ppcc's)\n"
            "  --measure-runs N timed micro-batches for --measure (default 3; one untimed before)\n"
            "  --measure-procs N copies of pprt side by side, each on its own cores, their times\n"
            "                   averaged (default: as many as stages share the cores, so each is\n"
            "                   timed with the others busy; 1 on a GPU)\n"
            "  -q               print nothing on success\n"
            "  -v               errors also name the source line that raised them\n"
            "  -h, --help       print this help\n"
            "  --version        print ppcc's version\n"
            "Every --OPTION VALUE may also be written --OPTION=VALUE. With --search or --max-batch,\n"
            "a plan is written only when -o is given: the best configuration's, or the largest\n"
            "micro-batch's.\n"
            "splitting:\n%s", pp_compile_opts_usage());
}

/* The search imports the model once per micro-batch size it tries. */
typedef struct {
    const char *model;
    const pp_import_opts *io;
} import_ctx;

static pp_status import_at(void *ctx, int64_t batch, pp_graph *g, pp_err *err) {
    const import_ctx *c = ctx;
    pp_import_opts io = *c->io;
    io.batch = batch;
    io.no_batch = false;
    return pp_import_onnx(c->model, &io, g, err);
}

/* --search / --max-batch: print (and write as JSON) what they found, and set
 * co and io to the configuration to compile. *compile: whether to go on and
 * write that plan (-o given). */
static pp_status budget(const char *model, pp_import_opts *io, pp_compile_opts *co, bool quiet,
                        const char *report_json, bool out_given, bool *compile, pp_err *err) {
    import_ctx ctx = {model, io};
    *compile = false;
    if (co->search) {
        pp_search_result r;
        PP_TRY(pp_search(co, import_at, &ctx, &r, err));
        if (!quiet) pp_search_print(stdout, &r, co);
        pp_status s = report_json ? pp_search_json(report_json, &r, co, err) : PP_OK;
        if (s == PP_OK && r.n_fit == 0)
            s = PP_FAIL(err, PP_EINVAL, "no configuration of %d device%s fits: %s", co->devices,
                        co->devices == 1 ? "" : "s", r.n ? r.c[0].why : "no candidates");
        if (s == PP_OK && out_given) {
            co->n_stages = r.c[0].pp;
            co->replicas = r.c[0].dp;
            io->batch = r.c[0].batch;
            *compile = true;
        }
        pp_search_free(&r);
        return s;
    }
    pp_max_batch_result r;
    PP_TRY(pp_max_batch(co, import_at, &ctx, &r, err));
    if (!quiet) pp_max_batch_print(stdout, &r, co);
    pp_status s = report_json ? pp_max_batch_json(report_json, &r, co, err) : PP_OK;
    if (s == PP_OK && r.batch == 0)
        s = PP_FAIL(err, PP_EINVAL, "-pp %d: not even micro-batch 1 fits: %s", r.pp, r.limit_why);
    if (s == PP_OK && out_given) {
        io->batch = r.batch;
        *compile = true;
    }
    pp_max_batch_free(&r);
    return s;
}

/* Bad usage: one error line and where the help is, exit code 2. */
static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "ppcc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\ntry 'ppcc --help'\n");
    return 2;
}

/* ppcc's own options (pp_compile_opts_names() has the splitting ones). */
static const char *const own_names[] = {"-h", "--help", "--version", "--modules", "-b", "--dim", "--const", "-o",
                                        "--output", "--report-json", "--report-html", "--export-stages",
                                        "--measure", "--measure-args", "--measure-procs", "--measure-runs",
                                        "--report", "--ref-weights", "-q", "-v"};

/* An unknown option: bad usage, with the nearest known name if one is near. */
static int unknown_option(const char *a) {
    const char *names[128];
    int n = 0;
    for (size_t k = 0; k < sizeof own_names / sizeof *own_names; k++) names[n++] = own_names[k];
    for (const char *const *c = pp_compile_opts_names(); *c && n < 128; c++) names[n++] = *c;
    const char *near = pp_argv_suggest(a, names, n);
    char msg[512];
    snprintf(msg, sizeof msg, "unknown option '%.*s'%s%s%s", (int)strcspn(a, "="), a,
             near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    return bad_usage("%s", msg);
}

static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Whether paths a and b name one file: the same path, or the same device
 * and inode. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return !strcmp(a, b) || (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

/* What main allocated, freed before it returns. */
static void ppcc_cleanup(ppcc_measured *searched, pp_import_opts *io, pp_compile_opts *co) {
    ppcc_measured_free(searched, co);
    for (int k = 0; k < io->n_dims; k++) free((char *)io->dim_name[k]);
    for (int k = 0; k < io->n_consts; k++) free((char *)io->const_name[k]);
    io->n_dims = io->n_consts = 0;
    pp_compile_opts_free(co);
}

/* Nodes whose constant inputs were not folded: the fold's work estimate was
 * over the budget (passes/fold.c), so they run at run time. */
static void note_unfolded(const pp_graph *g) {
    int n = 0, first = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].fold_skipped > 0 && n++ == 0) first = i;
    if (n)
        fprintf(stderr, "ppcc: note: %d node%s with only constant inputs left to run time, folding %s over the "
                "compile-time budget: '%s' (%s), an estimated %.3g operations%s\n", n, n == 1 ? "" : "s",
                n == 1 ? "it is" : "them is", g->nodes[first].name, pp_op_table[g->nodes[first].op].name,
                g->nodes[first].fold_skipped, n > 1 ? ", and others (--dump-ir marks them 'unfolded')" : "");
}

int main(int argc, char **argv) {
    /* first: an interrupted ppcc leaves no temporary plan, and a signal that
     * comes during parsing exits 128 + signal like any other */
    pp_signals_install();
    const char *model = NULL, *out = "plan.bin";
    /* static: the strdup'ed --dim/--const names stay reachable when a usage
     * error returns early (no leak report under ASan) */
    static pp_import_opts io;
    static pp_compile_opts co;
    pp_compile_opts_init(&co);
    bool report = false, quiet = false, ref_weights = false, verbose = false, out_given = false, measure = false;
    bool modules = false;
    ppcc_measure_opts mo = {.runs = 3};
    const char *report_json = NULL, *report_html = NULL, *export_dir = NULL;
    /* static like io: the split-off names stay reachable on an early return */
    static pp_argv args;
    if (!pp_argv_init(&args, argc, argv)) {
        fprintf(stderr, "ppcc: error: out of memory\n");
        return 1;
    }
    static const char *const optional_value[] = {"--dump-ir", NULL};
    for (int i = 1; i < args.argc; i++) {
        argc = args.argc;
        argv = args.argv;
        if (!pp_argv_at(&args, i, optional_value))
            return bad_usage("%s takes no value", argv[i - 1]);
        argc = args.argc;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        pp_err oe = {0};
        int took = pp_compile_opts_arg(argc, argv, &i, &co, &oe);
        if (took < 0) return bad_usage("%s", oe.msg);
        if (took > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("ppcc %s\n", PPRT_VERSION);
            return 0;
        } else if (!strcmp(a, "--modules")) {
            modules = true;
        } else if (!strcmp(a, "-b")) {
            if (!parse_int(v, 0, 1 << 20, &x)) return bad_usage("-b needs a batch size 0..2^20, got '%s'", v ? v : "");
            io.batch = x;
            io.no_batch = x == 0;
            i++;
        } else if (!strcmp(a, "--dim")) {
            const char *eq = v ? strchr(v, '=') : NULL;
            if (!eq || eq == v || !parse_int(eq + 1, 1, (int64_t)1 << 40, &x))
                return bad_usage("--dim needs NAME=VALUE with a VALUE of 1..2^40, got '%s'", v ? v : "");
            if (io.n_dims == PP_MAX_DIM_OVERRIDES) return bad_usage("too many --dim options%s", "");
            char *name = strndup(v, (size_t)(eq - v));
            if (!name) return 1;
            io.dim_name[io.n_dims] = name;
            io.dim_value[io.n_dims++] = x;
            i++;
        } else if (!strcmp(a, "--const")) {
            const char *eq = v ? strchr(v, '=') : NULL;
            if (!eq || eq == v || !eq[1]) return bad_usage("--const needs NAME=FILE.pb, got '%s'", v ? v : "");
            if (io.n_consts == PP_MAX_CONST_INPUTS) return bad_usage("too many --const options%s", "");
            char *name = strndup(v, (size_t)(eq - v));
            if (!name) return 1;
            io.const_name[io.n_consts] = name;
            io.const_path[io.n_consts++] = eq + 1;
            i++;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!v) return bad_usage("%s needs a file name", a);
            out = v;
            out_given = true;
            i++;
        } else if (!strcmp(a, "--report-json")) {
            if (!v) return bad_usage("--report-json needs a file name%s", "");
            report_json = v;
            i++;
        } else if (!strcmp(a, "--report-html")) {
            if (!v) return bad_usage("--report-html needs a file name%s", "");
            report_html = v;
            i++;
        } else if (!strcmp(a, "--export-stages")) {
            if (!v) return bad_usage("--export-stages needs a directory%s", "");
            export_dir = v;
            i++;
        } else if (!strcmp(a, "--measure")) {
            measure = true;
        } else if (!strcmp(a, "--measure-args")) {
            if (!v) return bad_usage("--measure-args needs pprt's arguments in one word, e.g. '--backend cuda'%s", "");
            mo.args = v;
            i++;
        } else if (!strcmp(a, "--measure-procs")) {
            if (!parse_int(v, 1, 64, &x)) return bad_usage("--measure-procs needs a count 1..64, got '%s'", v ? v : "");
            mo.procs = (int)x;
            i++;
        } else if (!strcmp(a, "--measure-runs")) {
            if (!parse_int(v, 1, 1000, &x)) return bad_usage("--measure-runs needs a count 1..1000, got '%s'", v ? v : "");
            mo.runs = (int)x;
            i++;
        } else if (!strcmp(a, "--report")) {
            report = true;
        } else if (!strcmp(a, "--ref-weights")) {
            ref_weights = true;
        } else if (!strcmp(a, "-q")) {
            quiet = true;
        } else if (!strcmp(a, "-v")) {
            verbose = true;
        } else if (a[0] == '-' && a[1]) {
            return unknown_option(a);
        } else if (!model) {
            model = a;
        } else {
            return bad_usage("unexpected argument '%s'", a);
        }
    }
    if (!model) return bad_usage("no model given%s", "");
    if (modules) { /* the module paths as imported, for --split-at and --exec-seq; nothing compiled */
        pp_graph g;
        pp_err err = {0};
        pp_status s = pp_import_onnx(model, &io, &g, &err);
        if (s == PP_OK) {
            s = pp_scopes(&g, &err);
            if (s == PP_OK) pp_modules_print(stdout, &g);
            pp_graph_free(&g);
        }
        for (int k = 0; k < io.n_dims; k++) free((char *)io.dim_name[k]);
        for (int k = 0; k < io.n_consts; k++) free((char *)io.const_name[k]);
        pp_compile_opts_free(&co);
        if (s != PP_OK) fprintf(stderr, "ppcc: error: %s\n", err.msg);
        return pp_exit_code(s);
    }
    if (co.search && co.max_batch) return bad_usage("give --search or --max-batch, not both%s", "");
    if ((co.search || co.max_batch) && io.no_batch)
        return bad_usage("-b 0 has no micro-batch for --search or --max-batch to choose%s", "");
    if (co.max_batch && io.batch > 0) return bad_usage("--max-batch chooses the micro-batch: leave out -b%s", "");
    if (co.search && io.batch > 0) {
        if (co.n_batch_sizes) return bad_usage("give -b or --batch-sizes, not both%s", "");
        co.batch_sizes[co.n_batch_sizes++] = io.batch;
    }
    if (co.devices && !co.search) return bad_usage("--devices is for --search%s", "");
    if (measure && co.max_batch)
        return bad_usage("--max-batch sizes by memory alone: --measure has nothing to time there%s", "");
    if (measure && co.n_profiles) return bad_usage("give --profile or --measure, not both%s", "");
    if ((mo.args || mo.runs != 3 || mo.procs) && !measure)
        return bad_usage("--measure-args, --measure-runs and --measure-procs are for --measure%s", "");

    pp_err err = {0};
    /* --search --measure: a profile per micro-batch size, for the search and
     * then the plan it picks; removed at the end */
    static ppcc_measured searched;
    /* every output path is checked before any work: what sits there, the
     * folder it goes in, and that none is the model itself */
    {
        const bool plan = out_given || !(co.search || co.max_batch);
        const char *const files[] = {plan ? out : NULL, report_json, report_html, co.dump_dot};
        const char *const names[] = {"-o", "--report-json", "--report-html", "--dump-dot"};
        pp_status cs = PP_OK;
        for (int k = 0; k < 4 && cs == PP_OK; k++) {
            if (!files[k]) continue;
            if (same_file(files[k], model)) {
                ppcc_cleanup(&searched, &io, &co);
                fprintf(stderr, "ppcc: error: %s %s is the model file; name another file\n", names[k], files[k]);
                return 2;
            }
            cs = pp_outfile_check(files[k], k > 0, &err);
        }
        if (cs == PP_OK && export_dir) cs = pp_export_stages_check(export_dir, &err);
        if (cs != PP_OK) {
            ppcc_cleanup(&searched, &io, &co);
            fprintf(stderr, "ppcc: error: %s\n", err.msg);
            return pp_exit_code(cs);
        }
    }
    if (co.search || co.max_batch) {
        bool compile = false;
        pp_status bs = PP_OK;
        if (measure) {
            import_ctx ictx = {model, &io};
            mo.model = model;
            mo.options = "(ppcc --search --measure)";
            mo.quiet = quiet;
            bs = ppcc_measure_search(&co, import_at, &ictx, &mo, &searched, &err);
        }
        if (bs == PP_OK) bs = budget(model, &io, &co, quiet, report_json, out_given, &compile, &err);
        if (bs == PP_OK && searched.n) bs = ppcc_measured_check(&err);
        if (bs != PP_OK || !compile) {
            ppcc_measured_free(&searched, &co);
            for (int k = 0; k < io.n_dims; k++) free((char *)io.dim_name[k]);
            for (int k = 0; k < io.n_consts; k++) free((char *)io.const_name[k]);
            pp_compile_opts_free(&co);
            if (bs != PP_OK) fprintf(stderr, "ppcc: error: %s\n", err.msg);
            return bs == PP_OK ? 0 : pp_exit_code(bs);
        }
        report_json = NULL; /* it holds the table */
    }

    pp_status s = PP_OK;
    pp_graph g;
    pp_lowered low = {0};
    char options[4096];
    {
        const int np = co.n_profiles; /* --search --measure's profiles are --measure's */
        if (searched.n) co.n_profiles = 0;
        pp_compile_opts_text(&co, options, sizeof options);
        co.n_profiles = np;
    }
    if (io.no_batch || io.batch > 0) { /* -b only where given (or chosen by --search, --max-batch) */
        size_t n = strlen(options);
        snprintf(options + n, sizeof options - n, " -b %lld", (long long)io.batch);
    }
    for (int k = 0; k < io.n_dims; k++) {
        size_t n = strlen(options);
        snprintf(options + n, sizeof options - n, " --dim %s=%lld", io.dim_name[k],
                 (long long)io.dim_value[k]);
    }
    for (int k = 0; k < io.n_consts; k++) {
        size_t n = strlen(options);
        /* the name, not the path: a plan holds no paths (docs/plan-format.md) */
        snprintf(options + n, sizeof options - n, " --const %s=(file)", io.const_name[k]);
    }
    if (ref_weights) {
        size_t n = strlen(options);
        snprintf(options + n, sizeof options - n, " --ref-weights");
    }
    char one[sizeof options + 64];
    if (measure) { /* what the one-stage plan records, then what this plan does */
        snprintf(one, sizeof one, "%s (ppcc --measure's one stage)", options);
        mo.model = model;
        mo.quiet = quiet;
        mo.options = one;
        size_t n = strlen(options);
        snprintf(options + n, sizeof options - n, " --measure");
        if (searched.n) measure = false; /* measured for the search */
    }
    if (s == PP_OK) s = pp_import_onnx(model, &io, &g, &err);
    if (s == PP_OK && g.frozen_default && !quiet) {
        fprintf(stderr, "ppcc: warning: graph input%s", g.n_frozen == 1 ? "" : "s");
        for (int i = 0; i < g.n_frozen && i < 8; i++) fprintf(stderr, "%s '%s'", i ? "," : "", g.frozen[i]);
        fprintf(stderr, "%s also %s an initializer, a default that ONNX lets data replace: frozen to %s (pprt "
                "refuses data for %s; ppcc --const NAME=FILE.pb compiles in another value)\n",
                g.n_frozen > 8 ? ", ..." : "", g.n_frozen == 1 ? "has" : "have", g.n_frozen == 1 ? "it" : "them",
                g.n_frozen == 1 ? "it" : "them");
    }
    if (s == PP_OK) {
        if (measure) {
            s = pp_run_front_passes(&g, &co, &err);
            if (s == PP_OK) s = ppcc_measure(&g, &co, &mo, &err);
            if (s == PP_OK) s = pp_run_split_passes(&g, &co, &err);
        } else {
            s = pp_run_passes(&g, &co, &err);
        }
        if (s == PP_OK && !quiet) note_unfolded(&g);
        if (s == PP_OK) s = pp_lower(&g, options, "ppcc " PPRT_VERSION, ref_weights ? model : NULL, &low, &err);
        /* the reports first and the plan last: a plan on disk says all went
         * well. The stage export first of them, as it refuses most (what is at
         * its path); a JSON or HTML report written before a later failure is
         * removed (the stage folder is left) */
        bool json_written = false, html_written = false;
        if (s == PP_OK && report) pp_report_print(stdout, &g, &co);
        if (s == PP_OK && export_dir) s = pp_export_stages(&g, export_dir, "ppcc " PPRT_VERSION, &err);
        if (s == PP_OK && report_json) json_written = (s = pp_report_json(report_json, &g, &co, &err)) == PP_OK;
        if (s == PP_OK && report_html) {
            /* the other policies' splits of the same graph, then this one again */
            pp_policy_row *rows = calloc(PP_N_COMPARED, sizeof *rows);
            int n_rows = 0;
            s = rows ? pp_compare_policies(&g, &co, rows, &n_rows, &err) : PP_FAIL(&err, PP_ENOMEM, "out of memory");
            if (s == PP_OK) html_written = (s = pp_report_html(report_html, &g, &co, model, options, rows, n_rows, &err)) == PP_OK;
            free(rows);
        }
        if (s == PP_OK) s = pp_plan_write(&low, out, &err);
        if (s != PP_OK) {
            struct stat st;
            if (json_written && stat(report_json, &st) == 0 && S_ISREG(st.st_mode)) unlink(report_json);
            if (html_written && stat(report_html, &st) == 0 && S_ISREG(st.st_mode)) unlink(report_html);
        }
        if (s == PP_OK && !quiet && g.batch_mixing)
            fprintf(stderr, "ppcc: warning: %s (allowed by --allow-batch-mixing): the plan gives the "
                    "whole batch's answer only when run on exactly %lld samples at once\n",
                    g.batch_mixing, (long long)g.batch);
        if (s == PP_OK && !quiet) {
            size_t w = low.weights_bytes;
            printf("ppcc: %s -> %s: %d ops in %d stage%s, micro-batch %lld, %.2f MB of weights",
                   model, out, g.n_nodes, g.n_stages, g.n_stages == 1 ? "" : "s",
                   (long long)g.batch, (double)w / 1e6);
            if (ref_weights)
                printf(" in the plan, %.2f MB referenced in the model's files", (double)low.ref_bytes / 1e6);
            printf("\n");
        }
        pp_lowered_free(&low);
        pp_graph_free(&g);
    }
    ppcc_measured_free(&searched, &co);
    for (int k = 0; k < io.n_dims; k++) free((char *)io.dim_name[k]);
    for (int k = 0; k < io.n_consts; k++) free((char *)io.const_name[k]);
    pp_compile_opts_free(&co);
    if (s != PP_OK) {
        fprintf(stderr, "ppcc: error: %s\n", err.msg);
        if (verbose && err.file) fprintf(stderr, "ppcc: (raised at %s:%d)\n", err.file, err.line);
        return pp_exit_code(s);
    }
    return 0;
}
