/* pprt_main.c: the runtime's command line: parse the options into a pprt_cli,
 * choose the driver (threads, or MPI ranks under mpirun) once, and through
 * it load a plan, load data, run the pipeline, write outputs and statistics,
 * map the status to an exit code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ir/args.h"
#include "../ir/json.h"
#include "../ir/optim.h"
#include "../runtime/backend.h"
#include "../runtime/comm/comm.h"
#include "../runtime/isa.h"
#include "../runtime/driver.h"
#include "../runtime/io.h"
#include "../runtime/pprt.h"
#include "../runtime/train.h"

/* Everything pprt's command line says. */
typedef struct pprt_cli {
    const char *plan, *data, *out_dir, *labels, *stats_json, *profile, *trace, *model, *backend;
    bool info, quiet, verbose, check, list_backends, version, ops, help, no_pin;
    pprt_run_opts run;
    pprt_check_opts check_opts;
    pprt_mpi_cfg mpi;
    const char *mpi_opt; /* an option that only applies under mpirun */
    pprt_data_opts data_opts; /* --input, --ignore-extra */
    bool train;               /* --epochs or --steps: train a ppcc --train plan */
    pprt_train_opts train_opts;
    pp_optim optim;           /* the optimizer's options given here (they override the plan's) */
} pprt_cli;

_Static_assert(sizeof(pprt_precision) == sizeof(int), "--precision's row stores an int");

static pp_status set_input(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pprt_data_opts *d = &((pprt_cli *)base)->data_opts;
    if (d->n_bind == PPRT_MAX_BINDS) return PP_FAIL(err, PP_EINVAL, "too many --input options");
    const char *eq = strchr(v, '=');
    char *n = strndup(v, (size_t)(eq - v));
    if (!n) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    d->bind_name[d->n_bind] = n;
    d->bind_path[d->n_bind++] = eq + 1;
    return PP_OK;
}

/* --rtol, --atol, --expected: compare with expected outputs */
static pp_status set_check(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pprt_cli *)base)->check = true;
    return PP_OK;
}

static pp_status set_backend(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)err;
    ((pprt_cli *)base)->list_backends = !strcmp(v, "list");
    return PP_OK;
}

static pp_status set_no_pin(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pprt_cli *)base)->run.pin = false;
    return PP_OK;
}

static pp_status set_replicas(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    pprt_cli *c = base;
    c->run.replicas = c->mpi.replicas;
    return PP_OK;
}

static pp_status set_mpi_timeout(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pprt_cli *)base)->mpi_opt = "--mpi-timeout";
    return PP_OK;
}

static pp_status set_transport(void *base, const char *name, const char *v, pp_err *err) {
    pprt_cli *c = base;
    if (strcmp(v, "nccl") && strcmp(v, "mpi")) return PP_FAIL(err, PP_EINVAL, "%s needs nccl or mpi, got '%s'", name, v);
    c->mpi.transport = !strcmp(v, "nccl") ? PPRT_TRANSPORT_NCCL : PPRT_TRANSPORT_MPI;
    c->mpi_opt = "--transport";
    return PP_OK;
}

static pp_status set_train(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pprt_cli *)base)->train = true;
    return PP_OK;
}

static pp_status set_no_shuffle(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pprt_cli *)base)->train_opts.shuffle = false;
    return PP_OK;
}

/* what the ranks compare where the kind's text does not say it */
static void text_backend(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pprt_cli *c = base;
    pp_opt_add(t, " --backend %s", c->backend ? c->backend : "(placement)");
}

static void text_threads(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pprt_cli *c = base;
    if (c->run.threads > 0) pp_opt_add(t, " --threads %d", c->run.threads);
    else pp_opt_add(t, " --threads default");
}

static void text_transport(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    static const char *const tps[] = {"(default)", "mpi", "nccl"};
    pp_opt_add(t, " --transport %s", tps[((const pprt_cli *)base)->mpi.transport]);
}

#define F(field) offsetof(pprt_cli, field)
#define NF PP_OPT_NOFIELD
/* pprt's own options. PP_OPT_AGREE: what changes the results or the verdict
 * must be the same on every rank under mpirun (paths may differ between
 * machines: only whether one is given); the ranks compare these rows' text,
 * the first that differs named. */
/* columns (pp_opt, ir/args.h): names, kind, value in --help, field, lo, hi, words, what a value must
 * be, default, help, PP_OPT_* flags, main order, --help section, setter, text */
static const pp_opt own_rows[] = {
    {"-o|--output", PP_OPT_STR, "OUT_DIR", F(out_dir), 0, 0, NULL, "a directory", "out",
     "where outputs go, one NAME.npy each", 0, 1, NULL, NULL, NULL},
    {"--input", PP_OPT_PAIR, "NAME=PATH", NF, 0, 0, NULL, "NAME=PATH (a .npy, a .pb or FILE.npz:KEY)", NULL,
     "data for input NAME from PATH (a .npy, a .pb, or FILE.npz:KEY); repeatable; with an --input for every input, "
     "DATA_DIR may be left out", 0, 0, NULL, set_input, NULL},
    {"--ignore-extra", PP_OPT_FLAG, NULL, F(data_opts.ignore_extra), 0, 0, NULL, NULL, NULL,
     "leave data files that feed no input alone instead of refusing them", 0, 0, NULL, NULL, NULL},
    {"--labels", PP_OPT_STR, "FILE", F(labels), 0, 0, NULL, "a .npy file", NULL,
     "int class indices: print top-1 accuracy of the first output", PP_OPT_AGREE | PP_OPT_PATH, 0, NULL, NULL, NULL},
    {"--rtol", PP_OPT_NUM, "R", F(check_opts.rtol), 0, 1e300, NULL, "a tolerance >= 0", "1e-3",
     "tolerance |got-want| <= A + R*|want| for --check (implies it)", PP_OPT_AGREE, 0, NULL, set_check, NULL},
    {"--atol", PP_OPT_NUM, "A", F(check_opts.atol), 0, 1e300, NULL, "a tolerance >= 0", "1e-5",
     "the A in --rtol's tolerance (implies --check)", PP_OPT_AGREE, 0, NULL, set_check, NULL},
    {"--expected", PP_OPT_STR, "DIR", F(check_opts.expected_dir), 0, 0, NULL, "a directory", NULL,
     "take expected values from DIR/NAME.npy (or DIR/output_K.pb) (implies --check)", PP_OPT_AGREE | PP_OPT_PATH, 0,
     NULL, set_check, NULL},
    {"--check", PP_OPT_FLAG, NULL, F(check), 0, 0, NULL, NULL, NULL,
     "compare each output with DATA_DIR/output_K.pb, else NAME.npy in DATA_DIR/../expected or DATA_DIR/expected; "
     "exit 1 on a mismatch", PP_OPT_AGREE, 0, NULL, NULL, NULL},
    {"--depth", PP_OPT_INT, "N", F(run.depth), 1, 1024, NULL, NULL, "2",
     "micro-batches in flight per stage boundary", PP_OPT_AGREE, 0, NULL, NULL, NULL},
    {"--stats-json", PP_OPT_STR, "FILE", F(stats_json), 0, 0, NULL, "a file name", NULL,
     "write the run statistics as JSON", 0, 0, NULL, NULL, NULL},
    {"--profile", PP_OPT_STR, "FILE", F(profile), 0, 0, NULL, "a file name", NULL,
     "write each node's mean time per micro-batch in ms (the --warmup runs left out; training: the steps after the "
     "first), for ppcc --profile; print each stage's 5 slowest nodes", 0, 0, NULL, NULL, NULL},
    {"--trace", PP_OPT_STR, "FILE", F(trace), 0, 0, NULL, "a file name", NULL,
     "the run's timeline (training: the last step's) as Chrome trace event JSON (Perfetto, chrome://tracing): a "
     "track per stage (per rank under mpirun), a span per micro-batch, nested spans per node with --profile, the "
     "messages between stages as flow arrows", 0, 0, NULL, NULL, NULL},
    {"--no-pin", PP_OPT_FLAG, NULL, F(no_pin), 0, 0, NULL, NULL, NULL, "do not pin stage threads to cores", 0, 0,
     NULL, set_no_pin, NULL},
    {"--model", PP_OPT_STR, "FILE", F(model), 0, 0, NULL, "the model file a --ref-weights plan was compiled from",
     NULL, "a ppcc --ref-weights plan: read its weights from FILE (and its external data beside it) instead of the "
     "path the plan recorded; the file must be the one compiled from (size and XXH3 checked)", 0, 0, NULL, NULL,
     NULL},
    {"--replicas", PP_OPT_INT, "R", F(mpi.replicas), 1, 4096, NULL, NULL, "1",
     "R pipelines of the plan's K stages side by side, each a contiguous share of the micro-batches: K*R stage "
     "threads (each with cores / (K*R) intra-op threads unless --threads), every replica's executors their own "
     "(weights prepared R times; on GPUs replica r's stages on the devices after replica r-1's); under mpirun K*R "
     "ranks", PP_OPT_AGREE, 0, NULL, set_replicas, NULL},
    {"--backend", PP_OPT_STR, "B", F(backend), 0, 0, NULL,
     "a backend's name (pprt --backend list shows them)", "the first available of dnnl (oneDNN) and ref (the "
     "reference kernels)", "the backend that runs the stages (pprt --backend list shows those of this build and "
     "whether this machine has what they need)", PP_OPT_AGREE, 0, NULL, set_backend, text_backend},
    {"--threads", PP_OPT_INT, "N", F(run.threads), 1, 1024, NULL, NULL, "cores / stages",
     "intra-op threads per stage (oneDNN)", PP_OPT_AGREE, 0, NULL, NULL, text_threads},
    {"--precision", PP_OPT_WORD, "P", F(run.precision), 0, 0, "f32|bf16|tf32|fp16", NULL, "f32",
     "bf16: oneDNN convolutions and matrix products in bfloat16 (8-bit mantissa, f32 sums; fast on CPUs with "
     "AVX512_BF16 or AMX; needs AVX-512, else it warns and runs f32); inputs, outputs and the plan stay f32; with "
     "--backend cuda also tf32 and fp16 (the compute types of cuBLASLt's products and cuDNN's convolutions, every "
     "tensor still f32; f32 is strict there: no TF32; cuda-emu rounds its products' inputs as cuBLASLt's compute type "
     "allows)",
     PP_OPT_AGREE, 0, NULL, NULL, NULL},
    {"--warmup", PP_OPT_INT, "N", F(run.warmup), 0, 1000000, NULL, NULL, "1",
     "first run N untimed copies of the first micro-batch through the pipeline (each replica its own; outputs "
     "dropped): the one-time costs stay out of the times (0 times the first run too)", PP_OPT_AGREE, 0, NULL, NULL,
     NULL},
    {"-q", PP_OPT_FLAG, NULL, F(quiet), 0, 0, NULL, NULL, NULL, "print only errors", 0, 0, NULL, NULL, NULL},
    {"-v", PP_OPT_FLAG, NULL, F(verbose), 0, 0, NULL, NULL, NULL, "errors also name the source line that raised them",
     0, 0, NULL, NULL, NULL},
    {"-h|--help", PP_OPT_FLAG, NULL, F(help), 0, 0, NULL, NULL, NULL, "print this help", 0, 0, NULL, NULL, NULL},
    {"--version", PP_OPT_FLAG, NULL, F(version), 0, 0, NULL, NULL, NULL,
     "print pprt's version, its vector ISA and its backends", 0, 0, NULL, NULL, NULL},
    {"--info", PP_OPT_FLAG, NULL, F(info), 0, 0, NULL, NULL, NULL,
     "print what PLAN holds (its \"options:\" recompile it with ppcc)", 0, 0, NULL, NULL, NULL},
    {"--ops", PP_OPT_FLAG, NULL, F(ops), 0, 0, NULL, NULL, NULL,
     "how each op runs on each backend of this build (Markdown)", 0, 0, NULL, NULL, NULL},
};

/* The options of the MPI driver (they apply only under mpirun). */
static const pp_opt mpi_rows[] = {
    {"--mpi-timeout", PP_OPT_NUM, "S", F(mpi.timeout_s), 0.1, 1e6, NULL, "seconds in 0.1..1e6", "60",
     "a rank silent for S seconds is presumed dead and every rank exits", PP_OPT_AGREE, 0, "under mpirun", set_mpi_timeout,
     NULL},
    {"--transport", PP_OPT_CUSTOM, "T", NF, 0, 0, NULL, "nccl or mpi", "nccl where every stage is on a GPU",
     "between two device stages: nccl (GPU to GPU) or mpi (through pinned host memory: any MPI, any ranks per GPU); "
     "host stages always use MPI", PP_OPT_AGREE, 0, NULL, set_transport, text_transport},
};
/* Training with a ppcc --train plan (runtime/train.h, docs/training.md). */
static const pp_opt train_rows[] = {
    {"--epochs", PP_OPT_I64, "N", F(train_opts.epochs), 1, 1000000000, NULL, "a count 1..1e9", "1",
     "train a ppcc --train plan for N passes over DATA_DIR (the labels from --labels or DATA_DIR/labels.npy)", 0, 0,
     "training (a ppcc --train plan)", set_train, NULL},
    {"--steps", PP_OPT_I64, "N", F(train_opts.steps), 1, 1000000000, NULL, "a count 1..1e9", "the epochs'",
     "train for N optimizer steps instead", 0, 0, NULL, set_train, NULL},
    {"--accumulate", PP_OPT_INT, "M", F(train_opts.accumulate), 1, 1 << 20, NULL, "a count 1..2^20", "1",
     "micro-batches (of the plan's rows each) per step, in flight together; their gradients averaged", 0, 0, NULL,
     NULL, NULL},
    {"--schedule", PP_OPT_WORD, "S", F(train_opts.schedule_kind), 0, 0, "1f1b|gpipe|flow|zb-h1", NULL, "1f1b",
     "how a device orders its forward and backward stage: 1f1b (a device keeps the activations of at most as many "
     "micro-batches as devices from it to the last), gpipe (all forwards of a step, then all backwards), flow (both "
     "stages of a device at once, as the data comes)", 0, 0, NULL, NULL, NULL},
    {"--seed", PP_OPT_I64, "N", F(train_opts.seed), 0, 9007199254740992.0, NULL, "a number 0..2^53", "0",
     "the seed of each epoch's sample order", 0, 0, NULL, NULL, NULL},
    {"--no-shuffle", PP_OPT_FLAG, NULL, NF, 0, 0, NULL, NULL, NULL, "every epoch in the data's own order", 0, 0,
     NULL, set_no_shuffle, NULL},
    {"--skip-nonfinite", PP_OPT_FLAG, NULL, F(train_opts.skip_nonfinite), 0, 0, NULL, NULL, NULL,
     "skip a step whose loss or gradients are not finite instead of stopping", 0, 0, NULL, NULL, NULL},
    {"--host-optimizer", PP_OPT_FLAG, NULL, F(train_opts.host_optimizer), 0, 0, NULL, NULL, NULL,
     "step the optimizer on the host even where the stages run on cuda or cuda-emu (the device optimizer's A/B: "
     "the same bits)", 0, 0, NULL, NULL, NULL},
    {"--log-json", PP_OPT_STR, "FILE", F(train_opts.log_json), 0, 0, NULL, "a file name", NULL,
     "a record per step (loss, learning rate, gradient norm, samples/s, each stage's busy seconds) and per "
     "epoch (held-out loss and accuracy); what each device's stash held at most", 0, 0, NULL, NULL, NULL},
    {"--curves", PP_OPT_STR, "FILE", F(train_opts.curves), 0, 0, NULL, "a file name", NULL,
     "the run's loss, accuracy, learning rate, rate and idle share drawn as one self-contained HTML page", 0, 0,
     NULL, NULL, NULL},
    {"--save-weights", PP_OPT_STR, "DIR", F(train_opts.save_dir), 0, 0, NULL, "a directory", NULL,
     "write the trained weights there, NAME.npy each", 0, 0, NULL, NULL, NULL},
    {"--eval", PP_OPT_STR, "DIR", F(train_opts.eval_dir), 0, 0, NULL, "a directory", NULL,
     "held-out data (as DATA_DIR, with its labels.npy): its loss and top-1 accuracy after each epoch", 0, 0, NULL,
     NULL, NULL},
    {"--checkpoint", PP_OPT_STR, "DIR", F(train_opts.checkpoint), 0, 0, NULL, "a directory", NULL,
     "where --save-every writes the weights and the optimizer's state (whole or not at all)", 0, 0, NULL, NULL, NULL},
    {"--save-every", PP_OPT_I64, "N", F(train_opts.save_every), 1, 1000000000, NULL, "a count 1..1e9", NULL,
     "a checkpoint every N steps and at the end (needs --checkpoint)", 0, 0, NULL, NULL, NULL},
    {"--resume", PP_OPT_STR, "DIR", F(train_opts.resume), 0, 0, NULL, "a checkpoint directory", NULL,
     "go on from a checkpoint: the same options then give the weights a run never stopped gives, bit for bit", 0, 0,
     NULL, NULL, NULL},
};
#undef F
#undef NF

/* pprt's tables, then each backend's own (a table two backends share, once):
 * at most PPRT_TABLES. */
#define PPRT_TABLES 16
static int tables(pprt_cli *c, pp_opt_table t[PPRT_TABLES]) {
    t[0] = (pp_opt_table){own_rows, (int)(sizeof own_rows / sizeof *own_rows), c};
    t[1] = (pp_opt_table){mpi_rows, (int)(sizeof mpi_rows / sizeof *mpi_rows), c};
    t[2] = (pp_opt_table){train_rows, (int)(sizeof train_rows / sizeof *train_rows), c};
    t[3] = (pp_opt_table){.base = &c->optim};
    t[3].rows = pp_optim_table(&t[3].n);
    int n = 4;
    for (int b = 0; b < pprt_backend_count() && n < PPRT_TABLES; b++) {
        const pp_opt_table *o = pprt_backend_at(b)->opts;
        bool seen = !o;
        for (int j = 0; j < b && !seen; j++) seen = pprt_backend_at(j)->opts == o;
        if (!seen) t[n++] = *o;
    }
    return n;
}

static void usage(FILE *f, pprt_cli *c) {
    fprintf(f,
            "usage: pprt PLAN DATA_DIR [-o OUT_DIR] [--labels FILE.npy] [--depth N]\n"
            "            [--check [--rtol R] [--atol A] [--expected DIR]]\n"
            "            [--stats-json FILE] [--profile FILE] [--trace FILE] [--no-pin] [-q]\n"
            "            [--backend NAME|list] [--threads N] [--warmup N] [--precision f32|bf16|tf32|fp16]\n"
            "       pprt PLAN DATA_DIR --replicas R [...]\n"
            "       mpirun -np K*R pprt PLAN DATA_DIR [--replicas R] [--mpi-timeout SECONDS]\n"
            "            [--transport nccl|mpi] [...]\n"
            "       pprt --info PLAN [--model FILE]\n"
            "       pprt --ops        how each op runs on each backend of this build (Markdown)\n"
            "  DATA_DIR          NAME.npy per plan input (N samples on dim 0) and/or .npz files whose\n"
            "                    keys are input names (DATA_DIR may itself be one .npz); a one-input\n"
            "                    plan also takes the folder's one .npy, or one .npy per sample in\n"
            "                    natural order (img2 before img10); or ONNX test data: input_K.pb\n"
            "                    TensorProto files, matched by tensor name, else by K. Files that\n"
            "                    feed no input are refused; pprt prints which file feeds each input\n");
    pp_opt_table t[PPRT_TABLES];
    pp_opts_usage(f, t, tables(c, t));
    fprintf(f, "Every --OPTION VALUE may also be written --OPTION=VALUE.\n");
}

/* Bad usage: one error line and where the help is, exit code 2. */
static int bad_usage(const char *msg, const char *arg) {
    fprintf(stderr, "pprt: error: %s%s\ntry 'pprt --help'\n", msg, arg ? arg : "");
    return 2;
}

/* An unknown option: bad usage, with the nearest known name if one is near. */
static int unknown_option(pprt_cli *c, const char *a) {
    const char *names[256];
    pp_opt_table t[PPRT_TABLES];
    const int n = pp_opts_names(t, tables(c, t), names, 256);
    const char *near = pp_argv_suggest(a, names, n);
    char msg[512];
    snprintf(msg, sizeof msg, "unknown option '%.*s'%s%s%s", (int)strcspn(a, "="), a,
             near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    return bad_usage(msg, NULL);
}

/* A plan that mixes samples gives the model's answer only when all the
 * samples make one micro-batch, unpadded. */
static void warn_mixing(const pprt_plan *p, int64_t n) {
    if (!p->batch_mixing || p->batch == 0 || n == p->batch) return;
    fprintf(stderr, "pprt: warning: this plan mixes samples across the batch axis (%s); %lld samples "
            "run as %lld micro-batch%s of %lld%s, each computed on its own, so the outputs are not "
            "the whole batch's (compile with -b %lld for that)\n", p->batch_mixing, (long long)n,
            (long long)((n + p->batch - 1) / p->batch), n > p->batch ? "es" : "", (long long)p->batch,
            n % p->batch ? ", the last padded" : "", (long long)n);
}

/* Which file feeds each input, as read (unless -q). */
static void print_mapping(const pprt_plan *p, const pprt_npy *npys, const pprt_data_src *src) {
    char sh[128];
    for (int i = 0; i < p->n_inputs; i++)
        printf("input '%s' <- %s (%s %s)\n", p->inputs[i].name, src[i].from, pp_dtype_name(npys[i].dtype),
               pp_shape_str(&npys[i].shape, sh, sizeof sh));
}

/* NaNs and infinities among n values of a float type (others: none). */
static void count_nonfinite(pp_dtype dt, const void *data, size_t n, size_t *nan, size_t *inf) {
    *nan = *inf = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t bits, exp_all, man;
        if (dt == PP_F32) {
            uint32_t b;
            memcpy(&b, (const char *)data + 4 * k, 4);
            bits = b, exp_all = 0x7f800000u, man = 0x007fffffu;
        } else if (dt == PP_F64) {
            memcpy(&bits, (const char *)data + 8 * k, 8);
            exp_all = 0x7ff0000000000000ull, man = 0x000fffffffffffffull;
        } else if (dt == PP_F16 || dt == PP_BF16) {
            uint16_t b;
            memcpy(&b, (const char *)data + 2 * k, 2);
            bits = b, exp_all = dt == PP_F16 ? 0x7c00u : 0x7f80u, man = dt == PP_F16 ? 0x03ffu : 0x007fu;
        } else {
            return;
        }
        if ((bits & exp_all) == exp_all) *((bits & man) ? nan : inf) += 1;
    }
}

/* Outputs holding NaN or infinity where no input held any: a warning (some
 * models mean it: a mask of -inf), never an error. */
static void warn_nonfinite(const pprt_plan *p, const pprt_npy *npys, const pprt_array *outs, int64_t n) {
    size_t nan, inf;
    for (int i = 0; i < p->n_inputs; i++) {
        size_t el = pp_dtype_size(npys[i].dtype) ? npys[i].nbytes / pp_dtype_size(npys[i].dtype) : 0;
        count_nonfinite(npys[i].dtype, npys[i].data, el, &nan, &inf);
        if (nan || inf) return;
    }
    for (int i = 0; i < p->n_outputs; i++) {
        const pprt_io *o = &p->outputs[i];
        size_t el = 1;
        for (int d = 0; d < o->shape.rank; d++) el *= (size_t)(d == 0 && p->batch > 0 ? n : o->shape.dim[d]);
        count_nonfinite(o->dtype, outs[i].data, el, &nan, &inf);
        if (nan || inf)
            fprintf(stderr, "pprt: warning: output '%s' holds %zu NaN and %zu infinite value%s of %zu, and no input "
                    "held any (a model may mean it; --check compares with expected outputs)\n", o->name, nan, inf,
                    inf == 1 ? "" : "s", el);
    }
}

static void print_info(const pprt_plan *p) {
    printf("plan: %zu bytes, %s, model %s, options: %s\n", p->file_bytes, p->producer,
           p->model_hash, p->options);
    printf("micro-batch %lld, %d stage%s, %.2f MB of weights\n", (long long)p->batch, p->n_stages,
           p->n_stages == 1 ? "" : "s", (double)p->weights_bytes / 1e6);
    if (p->train_devices)
        printf("a gradient plan (ppcc --train) for %d device%s: stages s and %d-s are the forward and the "
               "backward of one device's ops\n", p->train_devices, p->train_devices == 1 ? "" : "s",
               2 * p->train_devices - 1);
    if (p->n_wstages)
        printf("split for --schedule zb-h1: stage %d+d is device d's weight gradients (W), off the chain of stages, on "
               "what its backward stage keeps for it\n", p->n_stages);
    if (p->precision)
        printf("precision %s: products and the values between them stored in %s (ppcc --precision), inputs and "
               "outputs f32\n", pp_precision_name(p->precision), p->precision == 1 ? "bf16" : "fp16");
    if (p->train_devices) {
        char d[512];
        pp_optim_describe(&p->optim, d, sizeof d);
        printf("optimizer: %s%s\n", p->has_optim ? "" : "(none recorded: pprt's defaults) ", d);
    }
    if (p->batch_mixing)
        printf("mixes samples across the batch axis (compiled with --allow-batch-mixing): %s\n",
               p->batch_mixing);
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
    for (int s = 0; s < p->n_stages + p->n_wstages; s++) {
        const pprt_stage *st = &p->stages[s];
        if (s >= p->n_stages) printf("W of device %d: ", s - p->n_stages);
        printf("stage %d: %d ops, %.4f GFLOP, weights %.3f MB, arena %.3f MB, in %.3f MB, out %.3f MB", s,
               st->n_nodes, st->flops / 1e9, (double)st->weight_bytes / 1e6, (double)st->arena_bytes / 1e6,
               (double)st->in.bytes / 1e6, (double)st->out.bytes / 1e6);
        if (st->backend[0]) printf(", placed on %s", st->backend);
        if (st->backend[0] && st->device >= 0) printf(" device %d", st->device);
        printf("\n");
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

/* --stats-json's format version: 2 named the counts in every backend's
 * words (pprt_exec_counts: library, own, fused, view and reference nodes;
 * layout changes), where 1, which had no "format", spoke oneDNN's. */
#define PPRT_STATS_JSON_VERSION 2

/* --stats-json: the run's statistics; `warmup`: the untimed micro-batches
 * each replica ran first (in no figure here); src (NULL where this process
 * read no data) where each input's data came from. */
static pp_status write_stats_json(const char *path, const pprt_stats *st, int warmup, const pprt_plan *p,
                                  const pprt_npy *npys, const pprt_data_src *src, pp_err *err) {
    pp_json j;
    cJSON *root = pp_json_begin_format(&j, "pprt-stats", PPRT_STATS_JSON_VERSION);
    /* the inputs' files (where this process read them: under MPI, the first stage's rank) */
    cJSON *ins = pp_json_add_array(&j, root, "inputs");
    for (int i = 0; src && i < p->n_inputs; i++) {
        char sh[128];
        cJSON *in = pp_json_add_object(&j, ins, NULL);
        pp_json_add_string(&j, in, "name", p->inputs[i].name);
        pp_json_add_string(&j, in, "from", src[i].from);
        pp_json_add_string(&j, in, "dtype", pp_dtype_name(npys[i].dtype));
        pp_json_add_string(&j, in, "shape", pp_shape_str(&npys[i].shape, sh, sizeof sh));
    }
    pp_json_add_number(&j, root, "samples", (double)st->samples);
    pp_json_add_number(&j, root, "micro_batches", (double)st->micro_batches);
    pp_json_add_number(&j, root, "replicas", st->replicas);
    pp_json_add_round(&j, root, "wall_s", st->wall_s, 6);
    pp_json_add_round(&j, root, "samples_per_s", st->samples_per_s, 3);
    pp_json_add_round(&j, root, "steady_samples_per_s", st->steady_samples_per_s, 3);
    pp_json_add_number(&j, root, "warmup_micro_batches", warmup);
    cJSON *lat = pp_json_add_object(&j, root, "latency_ms");
    pp_json_add_round(&j, lat, "mean", st->latency_mean_ms, 4);
    pp_json_add_round(&j, lat, "median", st->latency_median_ms, 4);
    pp_json_add_round(&j, lat, "p90", st->latency_p90_ms, 4);
    pp_json_add_round(&j, lat, "p95", st->latency_p95_ms, 4);
    pp_json_add_round(&j, lat, "p99", st->latency_p99_ms, 4);
    pp_json_add_string(&j, lat, "percentiles", "nearest-rank");
    cJSON *stages = pp_json_add_array(&j, root, "stages");
    for (int i = 0; i < st->n_stages; i++) {
        const pprt_exec_counts *c = &st->stages[i].exec;
        cJSON *x = pp_json_add_object(&j, stages, NULL);
        pp_json_add_number(&j, x, "index", i);
        pp_json_add_round(&j, x, "busy_s", st->stages[i].busy_s, 6);
        pp_json_add_round(&j, x, "utilization", st->stages[i].utilization, 4);
        pp_json_add_number(&j, x, "nodes", c->nodes);
        pp_json_add_number(&j, x, "library_nodes", c->library);
        pp_json_add_number(&j, x, "own_nodes", c->own);
        pp_json_add_number(&j, x, "fused_nodes", c->fused);
        pp_json_add_number(&j, x, "view_nodes", c->views);
        pp_json_add_number(&j, x, "reference_nodes", c->reference);
        pp_json_add_number(&j, x, "layout_changes_per_micro_batch", c->layout_changes);
        pp_json_add_number(&j, x, "copies_per_micro_batch", c->copies);
        pp_json_add_number(&j, x, "outputs_in_place", c->in_place);
        pp_json_add_number(&j, x, "own_layout_tensors", c->own_layout);
        pp_json_add_round(&j, x, "weights_prepared_bytes", c->weight_bytes, 0);
        pp_json_add_number(&j, x, "cuda_graph_captures", (double)c->graph_captures);
        pp_json_add_number(&j, x, "cuda_graph_replays", (double)c->graph_replays);
        pp_json_add_string(&j, x, "cpus", st->stages[i].cpus);
        pp_json_add_string(&j, x, "backend", st->stages[i].backend);
        const pprt_stage_stats *ss = &st->stages[i];
        if (ss->device.place[0]) {
            cJSON *d = pp_json_add_object(&j, x, "device");
            pp_json_add_string(&j, d, "place", ss->device.place);
            pp_json_add_string(&j, d, "name", ss->device.name);
            char cc[24];
            snprintf(cc, sizeof cc, "%d.%d", ss->device.cc_major, ss->device.cc_minor);
            pp_json_add_string(&j, d, "compute_capability", cc);
            pp_json_add_number(&j, d, "sms", ss->device.sms);
            pp_json_add_string(&j, d, "libraries", ss->device.libs);
        }
        if (ss->path_out[0]) pp_json_add_string(&j, x, "path_to_next", ss->path_out);
    }
    pp_json_add_bool(&j, root, "devices_differ", st->devices_differ);
    pp_json_add_string(&j, root, "backend", st->backend);
    pp_json_add_round(&j, root, "bubble", st->bubble, 4);
    pp_json_add_number(&j, root, "peak_rss_bytes", (double)st->peak_rss);
    pp_json_add_number(&j, root, "rss_loaded_bytes", (double)st->rss_loaded);
    return pp_json_write(&j, path, true, err);
}

/* What sits where the outputs will go is refused before the run, not after it. */
static pp_status check_outputs(const pprt_plan *p, const char *out_dir, const char *stats_json,
                               const char *profile, const char *trace, pp_err *err) {
    PP_TRY(pprt_data_write_check(p, out_dir, err));
    if (stats_json) PP_TRY(pp_outfile_check(stats_json, true, err));
    if (profile) PP_TRY(pp_outfile_check(profile, true, err));
    if (trace) PP_TRY(pp_outfile_check(trace, true, err));
    return PP_OK;
}


static void print_version(void) {
    printf("pprt %s (vector ISA: %s%s)\n", PPRT_VERSION, pprt_isa_name(pprt_cpu_isa()),
           pprt_isa_capped() ? ", capped by ONEDNN_MAX_CPU_ISA" : "");
    for (int i = 0; i < pprt_backend_count(); i++) {
        const pprt_backend *b = pprt_backend_at(i);
        const char *why = b->unavailable ? b->unavailable() : NULL;
        printf("backend %s: %s%s%s%s\n", b->name, why ? "unavailable here: " : "", why ? why : "",
               why ? "; " : "", b->what);
        if (b->describe && !why) b->describe(stdout);
    }
}

/* The op table: a row per op a plan can hold (ppcc unrolls the control
 * ops), a column per backend's route (backend.h); backends that share a
 * route (cuda, cuda-emu) share a column. */
static void print_ops(void) {
    const pprt_backend *col[16];
    int n = 0;
    printf("| op |");
    for (int i = 0; i < pprt_backend_count() && n < 16; i++) {
        const pprt_backend *b = pprt_backend_at(i);
        bool seen = false;
        for (int k = 0; k < n; k++) seen |= b->route && col[k]->route == b->route;
        if (seen) continue;
        col[n++] = b;
        printf(" %s", b->name);
        for (int j = i + 1; j < pprt_backend_count(); j++)
            if (b->route && pprt_backend_at(j)->route == b->route) printf(", %s", pprt_backend_at(j)->name);
        printf(" |");
    }
    printf("\n|---|");
    for (int k = 0; k < n; k++) printf("---|");
    printf("\n");
    for (int op = 0; op < PP_OP_COUNT; op++) {
        if (pp_op_has((pp_op)op, PP_TR_CONTROL)) continue;
        printf("| %s |", pp_op_table[op].name);
        for (int k = 0; k < n; k++) {
            const char *r = col[k]->route ? col[k]->route((pp_op)op) : "reference";
            printf(" %s |", r ? r : "reference");
        }
        printf("\n");
    }
}

/* --backend NAME that this build has not: the message (with the backend
 * NAME likely means, a former name or a typo), and exit code 2. */
static int no_such_backend(const char *name) {
    char names[256];
    pprt_backend_names(names, sizeof names);
    const char *like = pp_backend_suggest(name);
    if (like && !pprt_backend_find(like)) like = NULL;
    fprintf(stderr, "pprt: error: --backend %s: no such backend in this build (it has: %s)%s%s%s\ntry 'pprt --help'\n",
            name, names, like ? "; did you mean '" : "", like ? like : "", like ? "'?" : "");
    return 2;
}

/* What the options ask for besides a run: -1 to go on, else the exit code
 * (--ops, --version, a plan or data missing). */
static int parsed(pprt_cli *c) {
    if (c->ops) {
        print_ops();
        return 0;
    }
    if (c->version) { /* with --backend B: whether this build has B */
        if (c->backend && !c->list_backends && !pprt_backend_find(c->backend)) return no_such_backend(c->backend);
        print_version();
        return 0;
    }
    if (c->list_backends) return -1;
    if (!c->plan) return bad_usage("no plan given", NULL);
    if (c->train && !c->data) return bad_usage("training needs DATA_DIR (NAME.npy for each input, [N, ...])", NULL);
    if (c->train && c->data_opts.n_bind) return bad_usage("training reads DATA_DIR; --input does not apply", NULL);
    if (!c->train_opts.save_every != !c->train_opts.checkpoint)
        return bad_usage("--save-every and --checkpoint go together", NULL);
    if (!c->info && !c->data && !c->data_opts.n_bind)
        return bad_usage("no data given (a folder of NAME.npy files, an .npz, or --input NAME=PATH)", NULL);
    c->data_opts.skip = c->labels;
    c->run.trace = c->trace != NULL;
    c->run.trace_nodes = c->trace && c->profile;
    c->run.node_times = c->profile != NULL;
    return -1;
}

/* Parse argv into *c (pprt's tables and the backends'): -1 to go
 * on, else the exit code (help, version, bad usage). */
static int parse_args(int argc, char **argv, pprt_cli *c) {
    *c = (pprt_cli){.out_dir = "out", .run = {.depth = 2, .pin = true, .warmup = 1}, .check_opts = {.rtol = 1e-3, .atol = 1e-5},
                    .mpi = {.replicas = 1, .timeout_s = 60}};
    pprt_train_opts_init(&c->train_opts);
    pp_optim_init(&c->optim);
    /* static: the split-off names stay reachable on an early return */
    static pp_argv args;
    if (!pp_argv_init(&args, argc, argv)) {
        fprintf(stderr, "pprt: error: out of memory\n");
        return 1;
    }
    pp_opt_table t[PPRT_TABLES];
    const int nt = tables(c, t);
    for (int i = 1; i < args.argc; i++) {
        if (!pp_opts_split(&args, i, t, nt)) {
            fprintf(stderr, "pprt: error: %s takes no value\ntry 'pprt --help'\n", args.argv[i - 1]);
            return 2;
        }
        const char *a = args.argv[i];
        pp_err err = {0};
        int took = a[0] == '-' && a[1] ? pp_opts_take(&args, &i, t, nt, &err) : 0;
        if (took < 0 && err.code == PP_ENOMEM) {
            fprintf(stderr, "pprt: error: %s\n", err.msg);
            return 1;
        }
        if (took < 0) return bad_usage(err.msg, NULL);
        if (c->help) {
            usage(stdout, c);
            return 0;
        }
        if (took) continue;
        if (a[0] == '-' && a[1]) {
            return unknown_option(c, a);
        } else if (!c->plan) {
            c->plan = a;
        } else if (!c->data) {
            c->data = a;
        } else {
            return bad_usage("unexpected argument ", a);
        }
    }
    return parsed(c);
}

/* The backend --backend names, if any (it then runs every stage): -1 to
 * go on, else the exit code. Under mpirun each rank asks whether its own
 * stage's backend runs on its host when it sets the stage up. */
static int choose_backend(pprt_cli *c, bool ranks) {
    if (!c->backend) return -1;
    const pprt_backend *b = pprt_backend_find(c->backend);
    if (!b) return no_such_backend(c->backend);
    const char *why = b->unavailable && !ranks ? b->unavailable() : NULL;
    if (why) {
        fprintf(stderr, "pprt: error: --backend %s: not available here: %s\n", b->name, why);
        return 2;
    }
    c->run.backend = b;
    return -1;
}

/* A half plan's (ppcc --precision) first product that stores half: its stage and node, or false. */
static bool half_product(const pprt_plan *p, int *stage, const pprt_node **node) {
    for (int s = 0; s < p->n_stages; s++)
        for (int i = 0; i < p->stages[s].n_nodes; i++) {
            const pprt_node *n = &p->stages[s].nodes[i];
            const pp_dtype t = n->n_out > 0 && n->out[0] >= 0 ? p->stages[s].t[n->out[0]].dtype : PP_UNDEFINED;
            if ((t == PP_F16 || t == PP_BF16) && (n->op == PP_OP_MATMUL || n->op == PP_OP_GEMM ||
                                                  n->op == PP_OP_CONV || n->op == PP_OP_FUSEDCONV)) {
                *stage = s, *node = n;
                return true;
            }
        }
    return false;
}

/* Every stage's backend exists here and takes the precision asked for
 * (where one cannot compute it on this machine, pprt warns and it runs f32). */
static pp_status check_backends(pprt_cli *c, const pprt_plan *p, bool ranks, pp_err *err) {
    bool warned = false, half_warned = false;
    static const char *const names[] = {"f32", "bf16", "tf32", "fp16"};
    int hs;
    const pprt_node *hn;
    /* a half plan's products compute in f32 over its half values: pprt's compute types are for f32 plans */
    if (p->precision && c->run.precision != PPRT_F32 && half_product(p, &hs, &hn))
        return PP_FAIL(err, PP_EINVAL, "--precision %s: this plan stores its products in %s already (ppcc --precision "
                       "%s: stage %d node '%s', a %s %s, computes in f32 over the half values); pprt's --precision "
                       "sets the compute type of f32 plans: leave it out", names[c->run.precision],
                       pp_precision_name(p->precision), pp_precision_name(p->precision), hs, hn->name,
                       pp_dtype_name(p->stages[hs].t[hn->out[0]].dtype), pp_op_table[hn->op].name);
    if (p->train_devices && c->run.precision != PPRT_F32) /* the backends' --precision would change nothing there */
        return PP_FAIL(err, PP_EINVAL, "--precision %s: a training plan's precision is compiled in (ppcc --train "
                       "--precision; this plan's: %s), pprt's --precision is for inference plans",
                       names[c->run.precision], pp_precision_name(p->optim.precision));
    for (int s = 0; s < p->n_stages; s++) {
        const pprt_backend *b;
        PP_TRY(ranks ? pprt_stage_backend_resolve(p, s, c->run.backend, &b, err)
                     : pprt_stage_backend(p, s, c->run.backend, &b, err));
        const char *pr = names[c->run.precision];
        bool here = c->run.precision == PPRT_F32;
        if (c->run.precision != PPRT_F32 && (!b->precision || !b->precision(c->run.precision, &here)))
            return PP_FAIL(err, PP_EINVAL, "--precision %s needs a backend that computes it (%s); stage %d's, '%s', "
                           "computes in f32 only", pr, c->run.precision == PPRT_BF16 ? "dnnl, cuda" : "cuda", s,
                           b->name);
        if (!here && !warned) {
            fprintf(stderr, "pprt: warning: backend '%s' has no %s kernels %s: --precision %s runs in f32\n", b->name, pr,
                    b->multithreaded ? "on this CPU (oneDNN's need AVX-512; fast with AVX512_BF16 or AMX)" : "here", pr);
            warned = true;
        }
        if (p->precision && !p->train_devices && b->mem == PPRT_MEM_HOST && !c->quiet && !half_warned &&
            half_product(p, &hs, &hn)) {
            /* measured on a 2-core Xeon with AMX (2026-12-05): ResNet-50, 0.9 samples/s against the f32 plan's 22,
             * 50-98 with pprt --precision bf16 (docs/usage.md, "Half precision for inference") */
            fprintf(stderr, "pprt: warning: this plan stores its values in %s (ppcc --precision %s), and stage %d runs "
                    "on '%s', a CPU backend, whose half nodes run on the reference kernels, each lifting the half "
                    "values to f32: many times slower than an f32 plan. For CPUs compile without --precision and run "
                    "pprt --precision bf16 (oneDNN's bf16 kernels on AVX512_BF16 or AMX); half plans are for GPUs\n",
                    pp_precision_name(p->precision), pp_precision_name(p->precision), s, b->name);
            half_warned = true;
        }
    }
    if (warned) c->run.precision = PPRT_F32;
    return PP_OK;
}

static void list_backends(void) {
    for (int i = 0; i < pprt_backend_count(); i++) {
        const pprt_backend *b = pprt_backend_at(i);
        const char *why = b->unavailable ? b->unavailable() : NULL;
        printf("%-10s %s%s%s%s\n", b->name, why ? "[unavailable: " : "", why ? why : "", why ? "] " : "", b->what);
    }
}

static void print_report(const pprt_cli *c, const pprt_driver *d, const pprt_plan *p, int64_t n,
                         const pprt_stats *st) {
    if (p->batch > 0)
        printf("pprt: %lld samples, %lld micro-batches of %lld, %d stage%s, depth %d\n", (long long)n,
               (long long)st->micro_batches, (long long)p->batch, p->n_stages, p->n_stages == 1 ? "" : "s",
               c->run.depth);
    else /* ppcc -b 0: the model's inputs as they are, one run */
        printf("pprt: the inputs as they are (a plan without a batch dim), %d stage%s\n", p->n_stages,
               p->n_stages == 1 ? "" : "s");
    printf("throughput: %.1f samples/s (steady state %.1f)  wall %.3f s", st->samples_per_s,
           st->steady_samples_per_s, st->wall_s);
    if (c->run.warmup > 0)
        printf(" (after %d warm-up micro-batch%s%s)", c->run.warmup, c->run.warmup == 1 ? "" : "es",
               st->replicas > 1 ? " per replica" : "");
    printf("\nlatency per micro-batch: mean %.3f ms, median %.3f ms, p90 %.3f ms, p95 %.3f ms, p99 %.3f ms\n",
           st->latency_mean_ms, st->latency_median_ms, st->latency_p90_ms, st->latency_p95_ms, st->latency_p99_ms);
    for (int i = 0; i < st->n_stages; i++) {
        const pprt_exec_counts *e = &st->stages[i].exec;
        printf("stage %d: busy %.3f s (%.1f%%), %d ops, %.4f GFLOP per micro-batch", i, st->stages[i].busy_s,
               100 * st->stages[i].utilization, p->stages[i].n_nodes, p->stages[i].flops / 1e9);
        if (e->reference < e->nodes)
            printf("; %s: %d on library kernels, %d on its own, %d fused, %d view%s, %d on reference ones; %d "
                   "layout change%s and %d cop%s per micro-batch",
                   st->stages[i].backend ? st->stages[i].backend : st->backend, e->library, e->own, e->fused,
                   e->views, e->views == 1 ? "" : "s", e->reference, e->layout_changes,
                   e->layout_changes == 1 ? "" : "s", e->copies, e->copies == 1 ? "y" : "ies");
        if (st->stages[i].cpus[0]) printf("; pinned to CPU %s", st->stages[i].cpus);
        printf("\n");
    }
    printf("bubble: %.1f%%  peak RSS: %.1f MB\n", 100 * st->bubble, (double)st->peak_rss / 1e6);
    /* a split ppcc balanced on its roofline (the auto policy: the others do
     * not balance time, and --measure would not move them) and that ran unbalanced: say so,
     * and what balances it (enough micro-batches that busy time is the
     * stages' own, not the pipeline's fill and drain) */
    if (st->n_stages > 1 && st->micro_batches >= 4 * (int64_t)st->n_stages && p->options &&
        strstr(p->options, "--policy auto") && !strstr(p->options, "--profile") && !strstr(p->options, "--measure") &&
        !strstr(p->options, "--split-at") && !strstr(p->options, "--exec-seq")) {
        double sum = 0, mx = 0;
        int at = 0;
        for (int i = 0; i < st->n_stages; i++) {
            sum += st->stages[i].busy_s;
            if (st->stages[i].busy_s > mx) mx = st->stages[i].busy_s, at = i;
        }
        if (sum > 0 && mx / (sum / st->n_stages) > 1.10)
            printf("imbalance: stage %d was busy %.2fx the stages' mean; ppcc split by estimated op times (the "
                   "roofline): ppcc --measure splits by times measured here\n", at, mx / (sum / st->n_stages));
    }
    if (d->ops->describe) d->ops->describe(d, p, stdout);
}

/* Lower --threads to the cores the stages of this process may share. */
static void fit_threads(pprt_cli *c, const pprt_driver *d, const pprt_plan *p, bool ranks) {
    if (c->run.threads <= 1) return;
    long cores, sharers;
    d->ops->cores(d, p, &cores, &sharers);
    const bool reps = !ranks && c->run.replicas > 1; /* --replicas: each replica's stages share them too */
    if (reps) sharers *= c->run.replicas;
    /* training under 1F1B or GPipe: a device's forward and backward stage take turns (runtime/train.c's
     * gate), so the cores are shared by the devices, not the stages */
    if (!ranks && c->train && p->train_devices && c->train_opts.schedule_kind != PPRT_SCHED_FLOW)
        sharers = sharers / 2 > 1 ? sharers / 2 : 1; /* two stages per device */
    if ((long)c->run.threads * sharers <= cores) return;
    int t = cores / sharers > 1 ? (int)(cores / sharers) : 1;
    fprintf(stderr, "pprt: warning: %ld %s x %d threads exceed the %ld cores %s; using %d thread%s per %s\n",
            sharers, ranks ? "rank" : reps ? "stage threads of the replicas" : sharers == 1 ? "stage" : "stages",
            c->run.threads, cores, ranks ? "this rank may use" : "this process may use", t, t == 1 ? "" : "s",
            ranks ? "rank" : "stage");
    c->run.threads = t;
}

/* The driver ends the run (printing a failure); -v adds where it began. */
/* --epochs / --steps: train the plan (runtime/train.c) on threads, or under mpirun on the ranks
 * (comm/train_mpi.c). */
static pp_status train(pprt_cli *c, pprt_driver *d, const pprt_plan *p, bool ranks, pp_err *err) {
    if (!p->train_devices)
        return PP_FAIL(err, PP_EINVAL, "%s is not a training plan (--epochs and --steps train a plan compiled with "
                       "ppcc --train)", c->plan);
    c->train_opts.labels = c->labels;
    c->train_opts.quiet = c->quiet || (ranks && !d->ops->writes_outputs(d)); /* under mpirun rank 0 reports */
    c->train_opts.progress = !c->train_opts.quiet;
    /* the plan's optimizer, what the command line gave over it (said once, unless -q; rank 0 under mpirun; before
     * the ranks compare their options) */
    pp_optim_merge(&c->train_opts.opt, &p->optim, &c->optim, p->has_optim && !c->train_opts.quiet ? stderr : NULL);
    /* the options a training run refuses and its output files, before any rank sets up */
    if (c->stats_json)
        return PP_FAIL(err, PP_EINVAL, "--stats-json describes an inference run; a training run's statistics go to "
                       "--log-json FILE");
    if (c->profile) PP_TRY(pp_outfile_check(c->profile, true, err));
    if (c->trace) PP_TRY(pp_outfile_check(c->trace, true, err));
    static pprt_train_dist dist;
    if (ranks && d->ops->train) {
        PP_TRY(d->ops->train(d, p, &c->train_opts, &c->run, &dist, err));
        c->train_opts.dist = &dist;
    }
    c->run.quiet = true;
    pprt_train_stats ts;
    PP_TRY(pprt_train(p, c->data, &c->train_opts, &c->run, &ts, err));
    pp_status s = PP_OK;
    const bool writer = !ranks || d->ops->writes_outputs(d); /* under mpirun rank 0, which gathered the profile */
    if (c->profile && writer) /* the node times a micro-batch over the steps after the first, for ppcc --train --profile */
        s = ts.profile.node_ms ? pprt_profile_write(c->profile, p, &ts.profile, err)
                               : PP_FAIL(err, PP_ERUNTIME, "--profile: no node times were measured");
    if (s == PP_OK && c->profile && writer && !c->train_opts.quiet) pprt_profile_summary(stdout, p, &ts.profile, 5);
    if (s == PP_OK && c->trace && writer) /* the last step's (under mpirun gathered to rank 0) */
        s = ts.profile.trace ? pprt_trace_write(c->trace, p, ts.profile.trace, err)
                             : PP_FAIL(err, PP_ERUNTIME, "--trace: no timeline was recorded");
    free(ts.profile.node_ms);
    pprt_trace_free(ts.profile.trace);
    PP_TRY(s);
    if (!c->train_opts.quiet) {
        printf("trained %lld step%s (%lld samples) in %.2f s: loss %.6f at the first step, %.6f at the last",
               (long long)ts.steps, ts.steps == 1 ? "" : "s", (long long)ts.samples, ts.wall_s, ts.first_loss,
               ts.last_loss);
        if (ts.skipped) printf(", %lld skipped (not finite)", (long long)ts.skipped);
        printf("\n");
        if (c->train_opts.eval_dir)
            printf("held-out: loss %.6f, accuracy %.4f\n", ts.eval_loss, ts.eval_accuracy);
        printf("bubble: %.1f%% of the devices' time idle (the schedule's formula %s: %.1f%%)\n", 100 * ts.bubble,
                   c->train_opts.schedule_kind == PPRT_SCHED_ZBH1 ? "(P-1)/(3M+P-1), F = B = W" : "(P-1)/(M+P-1)",
                   100 * ts.bubble_formula);
        if (c->train_opts.save_dir) printf("weights: %s/\n", c->train_opts.save_dir);
    }
    return PP_OK;
}

/* DATA_DIR for a run (not training); where a training plan's data does not fit, the message says that --steps or
 * --epochs train it and what running it once does. */
static pp_status load_data(pprt_cli *c, const pprt_plan *p, pprt_npy *npys, pprt_array *ins, pprt_data_src *src,
                           int64_t *n, pp_err *err) {
    pp_err e = {0};
    const pp_status s = pprt_data_load(p, c->data, &c->data_opts, npys, ins, src, n, &e);
    if (s == PP_EINVAL && p->train_devices)
        return PP_WRAP(err, &e, s, "%s (%s is a training plan: --steps N or --epochs N with --labels train it; without "
                       "them pprt runs its graph once, its data one micro-batch, the gradients among its outputs)", e.msg,
                       c->plan);
    return s == PP_OK ? PP_OK : PP_WRAP(err, &e, s, "%s", e.msg);
}

static int finish(const pprt_cli *c, pprt_driver *d, pp_status s, const pp_err *err) {
    const int rc = d->ops->finish(d, s, err);
    if (s != PP_OK && c->verbose && err->file) fprintf(stderr, "pprt: (raised at %s:%d)\n", err->file, err->line);
    return rc;
}

int main(int argc, char **argv) {
    /* first: an interrupted run leaves no temporary output, and a signal that
     * comes while the options are read and backends chosen exits 128 + signal */
    pp_signals_install();
    /* static: the strdup'ed --input names stay reachable when a usage error
     * returns early (no leak report under ASan) */
    static pprt_cli c;
    int rc = parse_args(argc, argv, &c);
    if (rc >= 0) return rc;
    if (c.list_backends) {
        list_backends();
        return 0;
    }
    /* the driver: MPI ranks when a launcher started this process */
    const char *launcher = pprt_mpi_launcher_env();
    if ((rc = choose_backend(&c, launcher != NULL)) >= 0) return rc;
    if (!launcher && c.mpi_opt) {
#ifdef PPRT_HAVE_MPI
        return bad_usage(c.mpi_opt, " applies only under mpirun (mpirun -np K pprt ...)");
#else
        fprintf(stderr, "pprt: error: this pprt was built without MPI, so it cannot take %s; rebuild it with MPI "
                        "(apt-get install libopenmpi-dev openmpi-bin, then cmake -DPP_WITH_MPI=ON)\n", c.mpi_opt);
        return 2;
#endif
    }
    pp_err err = {0};
    pprt_driver *d = pprt_driver_threads();
    if (launcher && !c.info) {
        /* what changes the results or the verdict must be the same on
         * every rank: the rows marked so */
        static char agree[400];
        pp_opt_table t[PPRT_TABLES];
        pp_opts_text(t, tables(&c, t), PP_OPT_AGREE, agree, sizeof agree);
        c.mpi.agree = agree;
        if (pprt_driver_mpi(&argc, &argv, &c.mpi, &d, &err) != PP_OK) {
            fprintf(stderr, "pprt: error: %s\n", err.msg);
            return pp_exit_code(err.code);
        }
        pp_signals_install(); /* again: ours, whatever MPI_Init set */
    }
    pprt_plan *p = NULL;
    pp_status s = pprt_plan_load(c.plan, c.model, &p, &err);
    if (s == PP_OK && c.info) {
        if (!launcher || pprt_mpi_env_rank() <= 0) print_info(p); /* once under mpirun */
        pprt_plan_free(p);
        return 0;
    }
    if (s == PP_OK && d->ops->bind) s = d->ops->bind(d, p, &err);
    if (s == PP_OK) s = check_backends(&c, p, launcher != NULL, &err);
    pprt_npy *npys = NULL, lab = {0};
    pprt_data_src *src = NULL;
    pprt_array *ins = NULL, *outs = NULL;
    pprt_stats st = {0};
    int64_t n = 0;
    if (s == PP_OK) {
        npys = calloc(pp_count(p->n_inputs), sizeof *npys);
        src = calloc(pp_count(p->n_inputs), sizeof *src);
        ins = calloc(pp_count(p->n_inputs), sizeof *ins);
        outs = calloc(pp_count(p->n_outputs), sizeof *outs);
        if (!npys || !ins || !outs || !src) s = PP_FAIL(&err, PP_ENOMEM, "out of memory");
    }
    if (s == PP_OK) fit_threads(&c, d, p, launcher != NULL);
    if (s == PP_OK && c.train) {
        s = train(&c, d, p, launcher != NULL, &err);
        free(npys), free(src), free(ins), free(outs);
        pprt_plan_free(p);
        return finish(&c, d, s, &err);
    }
    if (s == PP_OK && d->ops->writes_outputs(d)) s = check_outputs(p, c.out_dir, c.stats_json, c.profile, c.trace, &err);
    if (s == PP_OK && d->ops->reads_data(d)) s = load_data(&c, p, npys, ins, src, &n, &err);
    if (s == PP_OK && d->ops->reads_data(d) && !c.quiet) print_mapping(p, npys, src);
    if (s == PP_OK && d->ops->reads_data(d)) warn_mixing(p, n);
    /* --labels refused before the run where the data is (under MPI the writer
     * learns the sample count only from the run) */
    if (s == PP_OK && c.labels && d->ops->reads_data(d) && d->ops->writes_outputs(d))
        s = pprt_labels_read(p, c.labels, n, &lab, &err);
    if (s == PP_OK) {
        c.run.progress = !c.quiet && isatty(2) && !launcher;
        c.run.quiet = c.quiet;
        s = d->ops->run(d, p, ins, &n, outs, &c.run, &st, &err);
    }
    const bool report = s == PP_OK && d->ops->writes_outputs(d);
    if (report && c.labels && !lab.data) s = pprt_labels_read(p, c.labels, n, &lab, &err);
    if (report && s == PP_OK) s = pprt_data_write(p, c.out_dir, outs, &err);
    if (report && s == PP_OK && !c.quiet) print_report(&c, d, p, n, &st);
    if (report && s == PP_OK && !c.quiet && d->ops->reads_data(d)) warn_nonfinite(p, npys, outs, n);
    if (report && s == PP_OK && c.labels) {
        const int64_t good = pprt_top1(p, &outs[0], &lab);
        printf("accuracy: %.6f (%lld/%lld, top-1 of '%s')\n", (double)good / (double)n, (long long)good,
               (long long)n, p->outputs[0].name);
    }
    if (report && s == PP_OK && c.stats_json)
        s = write_stats_json(c.stats_json, &st, c.run.warmup, p, npys, d->ops->reads_data(d) ? src : NULL, &err);
    if (report && s == PP_OK && c.profile) s = pprt_profile_write(c.profile, p, &st, &err);
    if (report && s == PP_OK && c.profile && !c.quiet) pprt_profile_summary(stdout, p, &st, 5);
    if (report && s == PP_OK && c.trace)
        s = st.trace ? pprt_trace_write(c.trace, p, st.trace, &err)
                     : PP_FAIL(&err, PP_ERUNTIME, "no timeline was recorded");
    if (report && s == PP_OK && !c.quiet) printf("outputs: %s/\n", c.out_dir);
    if (report && s == PP_OK && c.check) s = pprt_check(p, outs, c.data, &c.check_opts, stdout, &err);
    /* under MPI a failed run's buffers may still be written: the process ends as it is */
    if (s != PP_OK && launcher) return finish(&c, d, s, &err);
    if (p) {
        for (int i = 0; npys && i < p->n_inputs; i++) pprt_npy_free(&npys[i]);
        for (int i = 0; outs && i < p->n_outputs; i++) free(outs[i].data);
    }
    pprt_npy_free(&lab);
    free(npys);
    free(src);
    for (int k = 0; k < c.data_opts.n_bind; k++) free((char *)c.data_opts.bind_name[k]);
    free(ins);
    free(outs);
    free(st.stages);
    free(st.node_ms);
    free(st.latency_ms);
    pprt_trace_free(st.trace);
    pprt_plan_free(p);
    return finish(&c, d, s, &err);
}
