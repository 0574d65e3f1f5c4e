/* ppcc_main.c: the compiler's command line: parse options, run import -> passes
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
#include "../report/report.h"
#include "../runtime/pprt.h"
#include "measure.h"

/* Everything ppcc's command line says: its own options' fields and the
 * splitting options' (passes/options.c). */
typedef struct ppcc_cli {
    const char *model, *out, *report_json, *report_html, *export_dir;
    bool report, quiet, ref_weights, verbose, out_given, measure, modules, help, version;
    const char *save_onnx, *weights; /* --save-onnx FILE --weights DIR: the model with trained weights */
    bool eval_mode;                  /* --eval-mode: and as an inference model */
    pp_import_opts io;
    ppcc_measure_opts mo;
    pp_compile_opts co;
} ppcc_cli;

static pp_status set_out(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((ppcc_cli *)base)->out_given = true;
    return PP_OK;
}

static pp_status set_batch(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    pp_import_opts *io = &((ppcc_cli *)base)->io;
    io->no_batch = io->batch == 0;
    return PP_OK;
}

/* --dim NAME=VALUE and --const NAME=FILE.pb: the name copied (freed by
 * cli_free), the value or path kept. */
static pp_status set_dim(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_import_opts *io = &((ppcc_cli *)base)->io;
    const char *eq = strchr(v, '=');
    char *end;
    errno = 0;
    const long long x = strtoll(eq + 1, &end, 10);
    if (errno || *end || x < 1 || x > (1ll << 40))
        return PP_FAIL(err, PP_EINVAL, "--dim needs NAME=VALUE with a VALUE of 1..2^40, got '%s'", v);
    if (io->n_dims == PP_MAX_DIM_OVERRIDES) return PP_FAIL(err, PP_EINVAL, "too many --dim options");
    char *n = strndup(v, (size_t)(eq - v));
    if (!n) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    io->dim_name[io->n_dims] = n;
    io->dim_value[io->n_dims++] = x;
    return PP_OK;
}

static pp_status set_const(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_import_opts *io = &((ppcc_cli *)base)->io;
    const char *eq = strchr(v, '=');
    if (io->n_consts == PP_MAX_CONST_INPUTS) return PP_FAIL(err, PP_EINVAL, "too many --const options");
    char *n = strndup(v, (size_t)(eq - v));
    if (!n) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    io->const_name[io->n_consts] = n;
    io->const_path[io->n_consts++] = eq + 1;
    return PP_OK;
}

/* -b only where given (or chosen by --search, --max-batch) */
static void text_batch(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_import_opts *io = &((const ppcc_cli *)base)->io;
    if (io->no_batch || io->batch > 0) pp_opt_add(t, " -b %lld", (long long)io->batch);
}

static void text_dim(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_import_opts *io = &((const ppcc_cli *)base)->io;
    for (int k = 0; k < io->n_dims; k++) pp_opt_add(t, " --dim %s=%lld", io->dim_name[k], (long long)io->dim_value[k]);
}

/* the name, not the path: a plan holds no paths (docs/plan-format.md) */
static void text_const(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_import_opts *io = &((const ppcc_cli *)base)->io;
    for (int k = 0; k < io->n_consts; k++) pp_opt_add(t, " --const %s=(file)", io->const_name[k]);
}

#define F(field) offsetof(ppcc_cli, field)
#define NF PP_OPT_NOFIELD
/* ppcc's own options; the recorded ones (-b, --dim, --const, --ref-weights,
 * --measure) follow the splitting options' in the plan's options line. */
/* columns (pp_opt, ir/args.h): names, kind, value in --help, field, lo, hi, words, what a value must
 * be, default, help, PP_OPT_* flags, main order, --help section, setter, text */
static const pp_opt own_rows[] = {
    {"-o|--output", PP_OPT_STR, "PLAN", F(out), 0, 0, NULL, "a file name", "plan.bin", "output plan file", 0, 2,
     NULL, set_out, NULL},
    {"-b", PP_OPT_I64, "N", F(io.batch), 0, 1 << 20, NULL, "a batch size 0..2^20", "the model's, else 1",
     "micro-batch size: value of the inputs' symbolic first dim; -b 0: no batch axis, inputs are whole tensors",
     PP_OPT_RECORD, 3, NULL, set_batch, text_batch},
    {"--dim", PP_OPT_PAIR, "NAME=VALUE", NF, 0, 0, NULL, "NAME=VALUE with a VALUE of 1..2^40", NULL,
     "value of another symbolic input dim; repeatable", PP_OPT_RECORD, 0, NULL, set_dim, text_dim},
    {"--const", PP_OPT_PAIR, "NAME=FILE.pb", NF, 0, 0, NULL, "NAME=FILE.pb", NULL,
     "bind graph input NAME to the constant in an ONNX TensorProto file (type and fixed dims must match the "
     "declaration); repeatable. The plan records NAME=(file), no path: put the file back in to compile it again",
     PP_OPT_RECORD, 0, NULL, set_const, text_const},
    {"--ref-weights", PP_OPT_FLAG, NULL, F(ref_weights), 0, 0, NULL, NULL, NULL,
     "leave weights of 64 KiB or more in the model's files: the plan names them (absolute path, size, XXH3) "
     "instead of holding a copy, and pprt reads them from there (or from pprt --model FILE)", PP_OPT_RECORD, 0, NULL,
     NULL, NULL},
    {"--measure", PP_OPT_FLAG, NULL, F(measure), 0, 0, NULL, NULL, NULL,
     "split by measured op times: ppcc runs the model as one stage with pprt --profile on random inputs (at -b, "
     "with the threads a stage of the split gets: the cores this process may use / stages) and uses them as "
     "--profile would; pprt: $PPCC_PPRT, else the one beside ppcc, else PATH's; with --search, at every "
     "micro-batch size it tries (threads: the cores / --devices)", PP_OPT_RECORD, 0, NULL, NULL, NULL},
    {"--measure-args", PP_OPT_STR, "A", F(mo.args), 0, 0, NULL,
     "pprt's arguments in one word, e.g. '--backend cuda'", NULL,
     "more pprt arguments for --measure, e.g. '--backend cuda' or '--precision bf16' (a --threads here replaces "
     "ppcc's)", 0, 0, NULL, NULL, NULL},
    {"--measure-runs", PP_OPT_INT, "N", F(mo.runs), 1, 1000, NULL, "a count 1..1000", "3",
     "timed micro-batches for --measure (one untimed before)", 0, 0, NULL, NULL, NULL},
    {"--measure-procs", PP_OPT_INT, "N", F(mo.procs), 1, 64, NULL, "a count 1..64",
     "as many as stages share the cores, so each is timed with the others busy; 1 on a GPU",
     "copies of pprt side by side, each on its own cores, their times averaged", 0, 0, NULL, NULL, NULL},
    {"--report", PP_OPT_FLAG, NULL, F(report), 0, 0, NULL, NULL, NULL,
     "print the per-stage table, imbalance, bubble, recovered ops and the tensors crossing each cut", 0, 0, NULL,
     NULL, NULL},
    {"--report-json", PP_OPT_STR, "F", F(report_json), 0, 0, NULL, "a file name", NULL, "the same as JSON", 0, 0,
     NULL, NULL, NULL},
    {"--report-html", PP_OPT_STR, "F", F(report_html), 0, 0, NULL, "a file name", NULL,
     "the split as one self-contained HTML page: the graph by stage, the cuts, per-stage bars, the other policies "
     "compared", 0, 0, NULL, NULL, NULL},
    {"--export-stages", PP_OPT_STR, "DIR", F(export_dir), 0, 0, NULL, "a directory", NULL,
     "every stage as an ONNX model: DIR/stage_K.onnx (+ .onnx.data), and DIR/stages.json saying how they connect",
     0, 0, NULL, NULL, NULL},
    {"--modules", PP_OPT_FLAG, NULL, F(modules), 0, 0, NULL, NULL, NULL,
     "list the model's module paths (as PyTorch's named_modules() names them), each with its op count and first "
     "op; no plan", 0, 0, NULL, NULL, NULL},
    {"--save-onnx", PP_OPT_STR, "FILE", F(save_onnx), 0, 0, NULL, "a file name", NULL,
     "write the model with the weights --weights DIR holds (pprt --save-weights after training) to FILE; no plan",
     0, 0, "training", NULL, NULL},
    {"--weights", PP_OPT_STR, "DIR", F(weights), 0, 0, NULL, "a directory", NULL,
     "the weights --save-onnx puts in, NAME.npy each (every file must name an initializer of the model's type and "
     "shape)", 0, 0, NULL, NULL, NULL},
    {"--eval-mode", PP_OPT_FLAG, NULL, F(eval_mode), 0, 0, NULL, NULL, NULL,
     "with --save-onnx: write a training export as an inference model (BatchNormalization on its running "
     "statistics, which pprt's training updates; Dropout off)", 0, 0, NULL, NULL, NULL},
    {"-q", PP_OPT_FLAG, NULL, F(quiet), 0, 0, NULL, NULL, NULL, "print nothing on success", 0, 0, NULL, NULL, NULL},
    {"-v", PP_OPT_FLAG, NULL, F(verbose), 0, 0, NULL, NULL, NULL, "errors also name the source line that raised them",
     0, 0, NULL, NULL, NULL},
    {"-h|--help", PP_OPT_FLAG, NULL, F(help), 0, 0, NULL, NULL, NULL, "print this help", 0, 0, NULL, NULL, NULL},
    {"--version", PP_OPT_FLAG, NULL, F(version), 0, 0, NULL, NULL, NULL, "print ppcc's version", 0, 0, NULL, NULL,
     NULL},
};
#undef F
#undef NF

/* The tables, in the order the plan's options line has them: the
 * splitting options, then ppcc's own. */
static int tables(ppcc_cli *c, pp_opt_table t[3]) {
    t[0] = (pp_opt_table){.base = &c->co};
    t[0].rows = pp_compile_opts_table(&t[0].n);
    t[1] = (pp_opt_table){own_rows, (int)(sizeof own_rows / sizeof *own_rows), c};
    t[2] = (pp_opt_table){.base = &c->co.train.optim}; /* --train's optimizer, recorded in the plan */
    t[2].rows = pp_optim_table(&t[2].n);
    return 3;
}

static void usage(FILE *f, ppcc_cli *c) {
    pp_opt_table t[3], own_first[3];
    tables(c, t);
    own_first[0] = t[1], own_first[1] = t[0], own_first[2] = t[2];
    fprintf(f, "usage: ppcc MODEL.onnx [-pp N] [-o PLAN] [-b N] [--dim NAME=VALUE]... [--const NAME=FILE.pb]...\n"
               "            [--policy NAME] [--split-at P,..] [--exec-seq FILE]\n"
               "            [--max-memory CAPS] [--ref-weights] [--report] [--report-json FILE]\n"
               "            [--report-html FILE] [--export-stages DIR] [--measure] [-q]\n");
    pp_opts_usage(f, own_first, 3);
    fprintf(f, "Every --OPTION VALUE may also be written --OPTION=VALUE. With --search or --max-batch,\n"
               "a plan is written only when -o is given: the best configuration's, or the largest\n"
               "micro-batch's. pprt --info PLAN prints the options a plan was compiled with; given to\n"
               "ppcc again (with --const and --exec-seq's files, recorded as '(file)'), they compile the\n"
               "same plan byte for byte.\n");
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

/* An unknown option: bad usage, with the nearest known name if one is near. */
static int unknown_option(ppcc_cli *c, const char *a) {
    pp_opt_table t[3];
    const char *names[128];
    const int n = pp_opts_names(t, tables(c, t), names, 128);
    const char *near = pp_argv_suggest(a, names, n);
    char msg[512];
    snprintf(msg, sizeof msg, "unknown option '%.*s'%s%s%s", (int)strcspn(a, "="), a,
             near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    return bad_usage("%s", msg);
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

/* Parse argv into *c: -1 to go on, else the exit code (help, version, bad
 * usage). */
static int parse_args(int argc, char **argv, ppcc_cli *c) {
    /* static: the split-off names stay reachable on an early return */
    static pp_argv args;
    if (!pp_argv_init(&args, argc, argv)) {
        fprintf(stderr, "ppcc: error: out of memory\n");
        return 1;
    }
    pp_opt_table t[3];
    const int nt = tables(c, t);
    for (int i = 1; i < args.argc; i++) {
        if (!pp_opts_split(&args, i, t, nt)) return bad_usage("%s takes no value", args.argv[i - 1]);
        const char *a = args.argv[i];
        pp_err err = {0};
        const int took = a[0] == '-' && a[1] ? pp_opts_take(&args, &i, t, nt, &err) : 0;
        if (took < 0 && err.code == PP_ENOMEM) {
            fprintf(stderr, "ppcc: error: %s\n", err.msg);
            return 1;
        }
        if (took < 0) return bad_usage("%s", err.msg);
        if (c->help) {
            usage(stdout, c);
            return 0;
        }
        if (c->version) {
            printf("ppcc %s\n", PPRT_VERSION);
            return 0;
        }
        if (took) continue;
        if (a[0] == '-' && a[1]) return unknown_option(c, a);
        if (c->model) return bad_usage("unexpected argument '%s'", a);
        c->model = a;
    }
    if (!c->model) return bad_usage("no model given%s", "");
    return -1;
}

/* Options that contradict each other: -1 when none do, else 2. */
static int check_args(ppcc_cli *c) {
    pp_compile_opts *co = &c->co;
    const pp_import_opts *io = &c->io;
    if (co->search && co->max_batch) return bad_usage("give --search or --max-batch, not both%s", "");
    if ((co->search || co->max_batch) && io->no_batch)
        return bad_usage("-b 0 has no micro-batch for --search or --max-batch to choose%s", "");
    if (co->max_batch && io->batch > 0) return bad_usage("--max-batch chooses the micro-batch: leave out -b%s", "");
    if (co->search && io->batch > 0) {
        if (co->n_batch_sizes) return bad_usage("give -b or --batch-sizes, not both%s", "");
        co->batch_sizes[co->n_batch_sizes++] = io->batch;
    }
    if (co->devices && !co->search) return bad_usage("--devices is for --search%s", "");
    if (c->measure && co->max_batch)
        return bad_usage("--max-batch sizes by memory alone: --measure has nothing to time there%s", "");
    if (c->measure && co->n_profiles) return bad_usage("give --profile or --measure, not both%s", "");
    if (co->train.optim.given && !co->train_on)
        return bad_usage("the optimizer's options (--optimizer, --lr, ...) are for --train: the plan records them%s", "");
    if ((c->mo.args || c->mo.runs != 3 || c->mo.procs) && !c->measure)
        return bad_usage("--measure-args, --measure-runs and --measure-procs are for --measure%s", "");
    pp_err err = {0};
    if (pp_train_memory_opts(co, &err) != PP_OK) return bad_usage("%s", err.msg);
    return -1;
}

/* Every output path is checked before any work: what sits there, the folder
 * it goes in, and that none is the model itself. PP_OK or the error (a
 * usage error where an output is the model). */
static pp_status check_paths(const ppcc_cli *c, pp_err *err) {
    const pp_compile_opts *co = &c->co;
    const bool plan = c->out_given || !(co->search || co->max_batch);
    const char *const files[] = {plan ? c->out : NULL, c->report_json, c->report_html, co->dump_dot};
    const char *const names[] = {"-o", "--report-json", "--report-html", "--dump-dot"};
    for (int k = 0; k < 4; k++) {
        if (!files[k]) continue;
        if (same_file(files[k], c->model))
            return PP_FAIL(err, PP_EINVAL, "%s %s is the model file; name another file", names[k], files[k]);
        PP_TRY(pp_outfile_check(files[k], k > 0, err));
    }
    if (c->export_dir) PP_TRY(pp_export_stages_check(c->export_dir, err));
    return PP_OK;
}

/* --save-onnx FILE --weights DIR: the model with new weights; nothing compiled. */
static pp_status save_onnx(const ppcc_cli *c, pp_err *err) {
    if (!c->weights) return PP_FAIL(err, PP_EINVAL, "--save-onnx needs --weights DIR (the weights to put in)");
    struct stat a, b;
    if (stat(c->save_onnx, &a) == 0 && stat(c->model, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return PP_FAIL(err, PP_EINVAL, "--save-onnx %s is the model itself: write the trained model elsewhere",
                       c->save_onnx);
    PP_TRY(pp_outfile_check(c->save_onnx, true, err));
    int n;
    PP_TRY(pp_onnx_save_weights(c->model, c->weights, c->save_onnx, c->eval_mode, &n, err));
    if (!c->quiet) printf("ppcc: %s with %d weight%s from %s -> %s\n", c->model, n, n == 1 ? "" : "s", c->weights,
                          c->save_onnx);
    return PP_OK;
}

/* --modules: the module paths as imported, for --split-at and --exec-seq;
 * nothing compiled. */
static pp_status list_modules(ppcc_cli *c, pp_err *err) {
    pp_graph g;
    PP_TRY(pp_import_onnx(c->model, &c->io, &g, err));
    pp_status s = pp_scopes(&g, err);
    if (s == PP_OK) pp_modules_print(stdout, &g);
    pp_graph_free(&g);
    return s;
}

/* --search / --max-batch (with --measure: profiles at each size into
 * *searched): the table; *compile when a plan is to be written as well. */
static pp_status run_budget(ppcc_cli *c, ppcc_measured *searched, bool *compile, pp_err *err) {
    *compile = false;
    if (c->measure) {
        import_ctx ictx = {c->model, &c->io};
        c->mo.model = c->model;
        c->mo.options = "(ppcc --search --measure)";
        c->mo.quiet = c->quiet;
        PP_TRY(ppcc_measure_search(&c->co, import_at, &ictx, &c->mo, searched, err));
    }
    PP_TRY(budget(c->model, &c->io, &c->co, c->quiet, c->report_json, c->out_given, compile, err));
    if (searched->n) PP_TRY(ppcc_measured_check(err));
    c->report_json = NULL; /* it holds the table */
    return PP_OK;
}

/* The plan's options line: the rows marked recorded, splitting options then
 * ppcc's own. With --measure, `one` gets what its one-stage plan records.
 * --search --measure's profiles are --measure's, not --profile's. */
static void record_options(ppcc_cli *c, const ppcc_measured *searched, char *options, size_t cap, char *one,
                           size_t one_cap) {
    pp_opt_table t[3];
    const int nt = tables(c, t);
    const int np = c->co.n_profiles;
    const bool measure = c->measure;
    if (searched->n) c->co.n_profiles = 0;
    if (measure) {
        c->measure = false;
        pp_opts_text(t, nt, PP_OPT_RECORD, options, cap);
        snprintf(one, one_cap, "%s (ppcc --measure's one stage)", options);
        c->measure = true;
    }
    pp_opts_text(t, nt, PP_OPT_RECORD, options, cap);
    c->co.n_profiles = np;
}

/* After a failed write: a JSON or HTML report written before it is removed. */
static void remove_reports(const ppcc_cli *c, bool json_written, bool html_written) {
    struct stat st;
    if (json_written && stat(c->report_json, &st) == 0 && S_ISREG(st.st_mode)) unlink(c->report_json);
    if (html_written && stat(c->report_html, &st) == 0 && S_ISREG(st.st_mode)) unlink(c->report_html);
}

/* Passes, lowering, the reports and the plan, for a graph imported. The
 * reports first and the plan last: a plan on disk says all went well. The
 * stage export first of them, as it refuses most (what is at its path); a
 * JSON or HTML report written before a later failure is removed (the stage
 * folder is left). */
static pp_status compile_graph(ppcc_cli *c, pp_graph *g, const char *options, bool measure, pp_err *err) {
    pp_compile_opts *co = &c->co;
    pp_status s;
    if (measure) {
        s = pp_run_front_passes(g, co, err);
        if (s == PP_OK) s = ppcc_measure(g, co, &c->mo, err);
        if (s == PP_OK) s = pp_run_split_passes(g, co, err);
    } else {
        s = pp_run_passes(g, co, err);
    }
    if (s == PP_OK && !c->quiet) note_unfolded(g);
    pp_lowered low = {0};
    if (s == PP_OK) s = pp_lower(g, options, "ppcc " PPRT_VERSION, c->ref_weights ? c->model : NULL, &low, err);
    bool json_written = false, html_written = false;
    if (s == PP_OK && c->report) pp_report_print(stdout, g, co);
    if (s == PP_OK && c->export_dir) s = pp_export_stages(g, c->export_dir, "ppcc " PPRT_VERSION, err);
    if (s == PP_OK && c->report_json) json_written = (s = pp_report_json(c->report_json, g, co, err)) == PP_OK;
    if (s == PP_OK && c->report_html) {
        /* the other policies' splits of the same graph, then this one again */
        pp_policy_row *rows = calloc(PP_N_COMPARED, sizeof *rows);
        int n_rows = 0;
        s = rows ? pp_compare_policies(g, co, rows, &n_rows, err) : PP_FAIL(err, PP_ENOMEM, "out of memory");
        if (s == PP_OK)
            html_written = (s = pp_report_html(c->report_html, g, co, c->model, options, rows, n_rows, err)) == PP_OK;
        free(rows);
    }
    if (s == PP_OK) s = pp_plan_write(&low, c->out, err);
    if (s != PP_OK) remove_reports(c, json_written, html_written);
    if (s == PP_OK && !c->quiet && g->batch_mixing)
        fprintf(stderr, "ppcc: warning: %s (allowed by --allow-batch-mixing): the plan gives the "
                "whole batch's answer only when run on exactly %lld samples at once\n",
                g->batch_mixing, (long long)g->batch);
    if (s == PP_OK && !c->quiet) {
        printf("ppcc: %s -> %s: %d ops in %d stage%s, micro-batch %lld, %.2f MB of weights", c->model, c->out,
               g->n_nodes, g->n_stages, g->n_stages == 1 ? "" : "s", (long long)g->batch,
               (double)low.weights_bytes / 1e6);
        if (g->train_devices)
            printf(" (training: %d device%s, each a forward and a backward stage)", g->train_devices,
                   g->train_devices == 1 ? "" : "s");
        if (c->ref_weights) printf(" in the plan, %.2f MB referenced in the model's files", (double)low.ref_bytes / 1e6);
        printf("\n");
    }
    pp_lowered_free(&low);
    return s;
}

/* Import the model (warning about inputs frozen to their defaults) and
 * compile it, recording the options. */
static pp_status compile(ppcc_cli *c, const ppcc_measured *searched, pp_err *err) {
    static char options[4096], one[sizeof options + 64];
    record_options(c, searched, options, sizeof options, one, sizeof one);
    if (c->measure) { /* what the one-stage plan records, then what this plan does */
        c->mo.model = c->model;
        c->mo.quiet = c->quiet;
        c->mo.options = one;
    }
    pp_graph g;
    PP_TRY(pp_import_onnx(c->model, &c->io, &g, err));
    if (g.frozen_default && !c->quiet) {
        fprintf(stderr, "ppcc: warning: graph input%s", g.n_frozen == 1 ? "" : "s");
        for (int i = 0; i < g.n_frozen && i < 8; i++) fprintf(stderr, "%s '%s'", i ? "," : "", g.frozen[i]);
        fprintf(stderr, "%s also %s an initializer, a default that ONNX lets data replace: frozen to %s (pprt "
                "refuses data for %s; ppcc --const NAME=FILE.pb compiles in another value)\n",
                g.n_frozen > 8 ? ", ..." : "", g.n_frozen == 1 ? "has" : "have", g.n_frozen == 1 ? "it" : "them",
                g.n_frozen == 1 ? "it" : "them");
    }
    /* measured for the search already: its profiles are in co */
    const pp_status s = compile_graph(c, &g, options, c->measure && !searched->n, err);
    pp_graph_free(&g);
    return s;
}

int main(int argc, char **argv) {
    /* first: an interrupted ppcc leaves no temporary plan, and a signal that
     * comes during parsing exits 128 + signal like any other */
    pp_signals_install();
    /* static: the strdup'ed --dim/--const names stay reachable when a usage
     * error returns early (no leak report under ASan) */
    static ppcc_cli c = {.out = "plan.bin", .mo = {.runs = 3}};
    pp_compile_opts_init(&c.co);
    int rc = parse_args(argc, argv, &c);
    if (rc < 0 && !c.modules && !c.save_onnx) rc = check_args(&c);
    if (rc >= 0) return rc;
    pp_err err = {0};
    /* --search --measure: a profile per micro-batch size, for the search and
     * then the plan it picks; removed at the end */
    static ppcc_measured searched;
    pp_status s = PP_OK;
    if (c.modules) {
        s = list_modules(&c, &err);
    } else if (c.save_onnx) {
        s = save_onnx(&c, &err);
    } else if ((s = check_paths(&c, &err)) == PP_OK) {
        bool go = !(c.co.search || c.co.max_batch);
        if (!go) s = run_budget(&c, &searched, &go, &err);
        if (s == PP_OK && go) s = compile(&c, &searched, &err);
    }
    ppcc_cleanup(&searched, &c.io, &c.co);
    if (s != PP_OK) {
        fprintf(stderr, "ppcc: error: %s\n", err.msg);
        if (c.verbose && err.file) fprintf(stderr, "ppcc: (raised at %s:%d)\n", err.file, err.line);
        return pp_exit_code(s);
    }
    return 0;
}
