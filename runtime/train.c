/* train.c: see train.h. */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../ir/json.h"
#include "ckpt.h"
#include "curves.h"
#include "io.h"
#include "keep.h"
#include "microbatch.h"
#include "nodes.h"
#include "optim_math.h"
#include "pool.h"
#include "run.h"
#include "train.h"

#define PI 3.14159265358979323846

#define GRAD_SUFFIX ".grad"
#define RUNNING_SUFFIX ".running"
#define LOSS_NAME "loss"

void pprt_train_opts_init(pprt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->accumulate = 1;
    pp_optim_init(&o->opt);
    o->shuffle = true;
}

/* Samples for each plan input. */
typedef struct dataset {
    pprt_npy *a; /* per plan input */
    int64_t n;   /* samples */
} dataset;

/* A weight that trains: one buffer every stage reading it points at. */
typedef struct param {
    const char *name;
    int out;              /* the plan output holding its gradient */
    int64_t numel;
    float *w, *g, *m, *v; /* weight, averaged gradient, optimizer state (momentum / Adam's moments) */
    bool has_m;
    /* a training-mode BatchNorm's running statistic (an output NAME.running,
     * no gradient): after each step the weight takes what PyTorch's module
     * would hold after the step's micro-batches, one after the other */
    bool running, is_var;
    double momentum;  /* ONNX's: the share of the old value kept */
    double count;     /* the elements per channel of a micro-batch (the variance's n) */
    double *r;        /* running: the statistic as the step's micro-batches fold in (update_running) */
} param;

typedef struct trainer {
    const pprt_plan *p;
    const pprt_train_opts *o;
    int threads; /* for the host's passes over the weights (par_params): --threads, else the cores */
    int n_params;
    param *ps;
    int loss_out;
    /* every weight tdesc the weights replaced, and what it held */
    int n_bound;
    pprt_tdesc **bound;
    const unsigned char **was;
    int fwd_out;     /* the output the loss reads (logits), -1: none */
    int labels_in;   /* the 'labels' input, -1: none */
    int seed_in;     /* the 'dropout_seed' input (training-mode Dropout), -1: none */
    /* the data, and the held-out data (--eval) */
    dataset train, eval;
    int64_t rows;    /* a micro-batch's samples (the plan inputs' dim 0) */
    /* what the last step's run measured: each stage's busy seconds; and over
     * the steps so far, the most micro-batches each device's stash held and
     * the bytes of one (pprt_stage_stats) */
    double *busy;
    int *stash_peak;
    size_t *stash_bytes;
    /* per device: the most micro-batches it held from F to its last backward
     * part (the gate's count), and in a zb-h1 plan what its B kept for its W
     * (the most at once, the bytes of one) */
    int *held_peak, *w_keep_peak;
    size_t *w_keep_bytes, *keep_bytes; /* keep_bytes: the entries the device's stash (and W's keep) allocated */
    /* --loss-scale: the loss gradient's seed (the plan's weight
     * PP_LOSS_SCALE_NAME, bound to this float; NULL: no scaling), the scale,
     * and for dynamic scaling the clean steps since it last changed and
     * whether the last step's gradients overflowed */
    float *seed;
    double scale;
    int64_t growth;
    bool overflow;
    /* the run's executors, made by its first step and kept (keep.h); a
     * fresh keeper under PPRT_TRAIN_FRESH=1 (each step makes its own) */
    pprt_keeper *keep;
    /* the device optimizer (dopt.h): why the host steps instead (NULL: none
     * yet), on (dev) once bound to the kept executors after the first step;
     * the owners (stages that output gradients), each stage's executor as
     * bound (none may be made again under it), each weight's sum of squares,
     * and the bytes it moved between host and device since the last step's
     * log line */
    char dev_why[640];
    bool dev, clip;
    float clip_c;
    int n_own;
    struct owner *own;
    pprt_exec **dev_x; /* [reps x stages], replica-major */
    /* replicas on threads (pprt --replicas, no MPI; else 1): each replica's executors keep their own copies of the
     * weights, owners replica-major (npr a replica), the sums chained between them (thr_chain) through dcopy */
    int reps, npr;
    pprt_dcopy dcopy;
    double *sq;
    double dev_bytes;
    /* the replicas' chain on the devices (dev_chain), over the steps: buckets through this rank's part of it, of
     * them before the rank's run returned, and folded by the last run before its last step (EARLY's done) */
    long chain_buckets, chain_early, chain_mid;
    bool early_fold; /* PPRT_EARLY_FOLD=1: on threads too (a test: dev_chain) */
    /* MPI ranks: the weights this rank steps (its device's: those whose
     * gradients or running statistics its device's chain carries), by param;
     * NULL on threads (every weight); each weight's device (param_device)
     * and the devices whose stages read it ([i * P + e]) */
    bool *mine;
    int *pdev;
    bool *reads;
    /* pprt --profile, --trace: the node times a micro-batch summed over prof_mbs micro-batches (the first
     * step's until a later one comes: prof_first), and the last step's timeline (pprt_train_stats.profile) */
    double *prof;
    int prof_n; /* its entries: the plan's nodes */
    int64_t prof_mbs;
    bool prof_first;
    pprt_stats last;
} trainer;

/* A stage whose executor keeps (dopt.h) the weights it outputs the gradients of. */
typedef struct owner {
    int stage, np;
    int replica, device;     /* replicas on threads: whose executor; its device and space (ADDR's) */
    const pprt_mem_ops *mem;
    const pprt_exec_ops *ops;
    pprt_exec *x;
    int *pidx;              /* [np] the trainer's params */
    pprt_dopt_param *dp;    /* [np] */
    double *sq;             /* [np] each one's sum of squares (PPRT_DOPT_NORM) */
    int *node;              /* [np] the stage's node that writes its gradient (the chain's order) */
    /* the replicas' chain on the devices (dev_chain): buckets of whole weights, their bounds in the flat sums,
     * the order the chain takes them in, the sums' device address and size (dopt.h EARLY) */
    int nb;
    int64_t *bound;         /* [nb + 1] */
    int *border;            /* [nb] */
    float *sums;
    size_t sums_bytes;
} owner;

static void *alloc64(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 64) ? NULL : p;
}

/* The BatchNormalization that reads q's weight as its input_mean or
 * input_var: its momentum and the elements per channel it averages. */
static pp_status running_of(const pprt_plan *p, param *q, pp_err *err) {
    for (int s = 0; s < p->n_stages; s++) {
        const pprt_stage *st = &p->stages[s];
        for (int i = 0; i < st->n_nodes; i++) {
            const pprt_node *n = &st->nodes[i];
            if (n->op != PP_OP_BATCHNORM || n->n_in < 5) continue;
            const bool mean = n->in[3] >= 0 && !strcmp(st->t[n->in[3]].name, q->name);
            const bool var = n->in[4] >= 0 && !strcmp(st->t[n->in[4]].name, q->name);
            if (!mean && !var) continue;
            float mom;
            PP_TRY(pp_attr_float((pp_attrs){n->attrs, n->n_attrs, p->opset}, "momentum", 0.9f, &mom, err));
            const pp_shape *xs = &st->t[n->in[0]].shape;
            double cnt = 1;
            for (int k = 0; k < xs->rank; k++)
                if (k != 1) cnt *= (double)xs->dim[k];
            q->is_var = var, q->momentum = mom, q->count = cnt;
            return PP_OK;
        }
    }
    return PP_FAIL(err, PP_EINVAL, "the plan's output %s%s belongs to no BatchNormalization", q->name, RUNNING_SUFFIX);
}

/* A running statistic after the step's M micro-batches, one after the other
 * as PyTorch's module takes them: each micro-batch's output is old x
 * momentum + its batch's statistic x (1 - momentum), the old being the
 * step's start; the variance PyTorch keeps is the unbiased one. */
static void fold_running(param *q, const float *o, int64_t j) {
    const double keep = q->momentum, unbias = q->is_var && q->count > 1 ? q->count / (q->count - 1) : 1;
    for (int64_t c = 0; c < q->numel; c++) {
        const double start = q->w[c], r = j ? q->r[c] : start;
        q->r[c] = r * keep + ((double)o[c] - start * keep) * unbias;
    }
}

static void update_running(param *q) {
    for (int64_t c = 0; c < q->numel; c++) q->w[c] = (float)q->r[c];
}

/* The weights: each gradient output names one ("W.grad" for W); every
 * stage's tensor of that name reads our buffer from now on. */
static pp_status bind_params(trainer *t, pp_err *err) {
    const pprt_plan *p = t->p;
    t->loss_out = -1;
    t->fwd_out = -1;
    t->ps = calloc(pp_count(p->n_outputs), sizeof *t->ps);
    int cap = 0;
    for (int s = 0; s < p->n_stages + p->n_wstages; s++) cap += p->stages[s].n_tensors;
    t->bound = calloc(pp_count(cap), sizeof *t->bound);
    t->was = calloc(pp_count(cap), sizeof *t->was);
    if (!t->ps || !t->bound || !t->was) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_outputs; i++) {
        const char *on = p->outputs[i].name;
        const size_t ln = strlen(on), ls = strlen(GRAD_SUFFIX);
        if (!strcmp(on, LOSS_NAME)) {
            if (p->outputs[i].dtype != PP_F32 || p->outputs[i].shape.rank != 0)
                return PP_FAIL(err, PP_EINVAL, "the plan's 'loss' output is not an f32 scalar");
            t->loss_out = i;
            continue;
        }
        const size_t lr = strlen(RUNNING_SUFFIX);
        const bool running = ln > lr && !strcmp(on + ln - lr, RUNNING_SUFFIX);
        if (!running && (ln <= ls || strcmp(on + ln - ls, GRAD_SUFFIX))) { /* the output the loss reads */
            if (t->fwd_out >= 0)
                return PP_FAIL(err, PP_EINVAL, "outputs '%s' and '%s' are neither the loss nor a weight's gradient: not "
                               "a plan ppcc --train wrote", p->outputs[t->fwd_out].name, on);
            t->fwd_out = i;
            continue;
        }
        param *q = &t->ps[t->n_params];
        char *name = strndup(on, ln - (running ? lr : ls));
        q->running = running;
        if (!name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        q->name = name;
        q->out = i;
        t->n_params++;
        size_t nbytes = 0;
        const unsigned char *init = NULL;
        for (int s = 0; s < p->n_stages + p->n_wstages; s++) /* the W stages' too (zb-h1) */
            for (int k = 0; k < p->stages[s].n_tensors; k++) {
                pprt_tdesc *d = &p->stages[s].t[k];
                if (d->kind != PPRT_WEIGHT || strcmp(d->name, name)) continue;
                if (d->source >= 0)
                    return PP_FAIL(err, PP_EUNSUP, "weight '%s' is read from the model's file (a --ref-weights plan): "
                                   "training writes its weights, compile the plan without --ref-weights", name);
                if (d->dtype != PP_F32) return PP_FAIL(err, PP_EUNSUP, "weight '%s' is %s, training takes f32", name,
                                                       pp_dtype_name(d->dtype));
                if (init && (d->nbytes != nbytes || memcmp(init, p->weights + d->offset, nbytes)))
                    return PP_FAIL(err, PP_EINVAL, "weight '%s' differs between stages", name);
                nbytes = d->nbytes;
                init = p->weights + d->offset;
                t->bound[t->n_bound] = d;
                t->was[t->n_bound++] = d->data;
            }
        if (!init) return PP_FAIL(err, PP_EINVAL, "the plan has the gradient of '%s' but no weight of that name", name);
        if (p->outputs[i].sample_bytes != nbytes)
            return PP_FAIL(err, PP_EINVAL, "the gradient of '%s' holds %zu bytes, the weight %zu", name,
                           p->outputs[i].sample_bytes, nbytes);
        q->numel = (int64_t)(nbytes / 4);
        if (running) {
            PP_TRY(running_of(p, q, err));
            if (!(q->r = malloc((size_t)q->numel * sizeof *q->r))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        /* the optimizer's state: none for plain SGD, SGD's momentum, AdamW's two moments */
        const int nb = running ? 0 : pp_optim_buffers(&t->o->opt);
        q->w = alloc64(nbytes), q->g = alloc64(nbytes);
        q->m = nb >= 1 ? alloc64(nbytes) : NULL, q->v = nb >= 2 ? alloc64(nbytes) : NULL;
        if (!q->w || !q->g || (nb >= 1 && !q->m) || (nb >= 2 && !q->v))
            return PP_FAIL(err, PP_ENOMEM, "out of memory for weight '%s'", name);
        memcpy(q->w, init, nbytes);
        if (q->m) memset(q->m, 0, nbytes);
        if (q->v) memset(q->v, 0, nbytes);
        for (int b = 0; b < t->n_bound; b++)
            if (!strcmp(t->bound[b]->name, name)) t->bound[b]->data = (const unsigned char *)q->w;
    }
    if (t->loss_out < 0) return PP_FAIL(err, PP_EINVAL, "the plan has no 'loss' output: not a plan ppcc --train wrote");
    int trained = 0;
    for (int i = 0; i < t->n_params; i++) trained += !t->ps[i].running;
    if (!trained) return PP_FAIL(err, PP_EINVAL, "the plan has no weight's gradient among its outputs");
    return PP_OK;
}

static void trainer_free(trainer *t) {
    pprt_keeper_free(t->keep); /* the executors first: they may read the bound weights as they go */
    for (int b = 0; b < t->n_bound; b++)
        t->bound[b]->data = t->was[b], t->bound[b]->varies = false, t->bound[b]->resident = false;
    for (int i = 0; i < t->n_own; i++)
        free(t->own[i].pidx), free(t->own[i].dp), free(t->own[i].sq), free(t->own[i].node), free(t->own[i].bound),
            free(t->own[i].border);
    free(t->own), free(t->dev_x), free(t->sq), free(t->mine), free(t->pdev), free(t->reads);
    pprt_dcopy_free(&t->dcopy);
    for (int i = 0; i < t->n_params; i++) {
        free((char *)t->ps[i].name);
        free(t->ps[i].w), free(t->ps[i].g), free(t->ps[i].m), free(t->ps[i].v), free(t->ps[i].r);
    }
    free(t->ps);
    free(t->busy), free(t->stash_peak), free(t->stash_bytes), free(t->seed);
    free(t->held_peak), free(t->w_keep_peak), free(t->w_keep_bytes), free(t->keep_bytes);
    free(t->bound);
    free(t->was);
    free(t->prof);
    pprt_trace_free(t->last.trace);
    for (int k = 0; k < 2; k++) {
        dataset *d = k ? &t->eval : &t->train;
        if (d->a)
            for (int i = 0; i < t->p->n_inputs; i++) pprt_npy_free(&d->a[i]);
        free(d->a);
    }
}

/* Each plan input's samples: DIR/NAME.npy ([N, ...], the plan's shape after
 * dim 0; the labels from `labels` when given). */
static pp_status load_data(trainer *t, const char *dir, const char *labels, dataset *d, pp_err *err) {
    const pprt_plan *p = t->p;
    d->a = calloc(pp_count(p->n_inputs), sizeof *d->a);
    if (!d->a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    d->n = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        if (i == t->seed_in) continue; /* pprt feeds it (feed_dropout_seed) */
        const pprt_io *io = &p->inputs[i];
        char path[4400], safe[256];
        pprt_safe_name(io->name, safe, sizeof safe);
        if (i == t->labels_in && labels) snprintf(path, sizeof path, "%s", labels);
        else snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
        if (io->shape.rank < 1)
            return PP_FAIL(err, PP_EINVAL, "input '%s' has no rows to draw micro-batches from (a scalar)", io->name);
        PP_TRY(pprt_npy_read(path, &d->a[i], err));
        const pprt_npy *a = &d->a[i];
        bool fits = a->dtype == io->dtype && a->shape.rank == io->shape.rank;
        for (int k = 1; fits && k < io->shape.rank; k++) fits = a->shape.dim[k] == io->shape.dim[k];
        if (!fits) {
            char want[128], got[128];
            pp_shape sw = io->shape;
            sw.dim[0] = -1;
            pp_shape_str(&sw, want, sizeof want);
            pp_shape_str(&a->shape, got, sizeof got);
            return PP_FAIL(err, PP_EINVAL, "%s: %s%s, but input '%s' takes %s%s (N samples on dim 0)", path,
                           pp_dtype_name(a->dtype), got, io->name, pp_dtype_name(io->dtype), want);
        }
        if (d->n >= 0 && a->shape.dim[0] != d->n)
            return PP_FAIL(err, PP_EINVAL, "%s holds %lld samples, the first input's file %lld", path,
                           (long long)a->shape.dim[0], (long long)d->n);
        if (i == 0) t->rows = io->shape.dim[0];
        else if (io->shape.dim[0] != t->rows)
            return PP_FAIL(err, PP_EINVAL, "input '%s' takes %lld rows, the first input %lld", io->name,
                           (long long)io->shape.dim[0], (long long)t->rows);
        d->n = a->shape.dim[0];
        if (i == t->labels_in && t->fwd_out >= 0) {
            /* the classes lie on the logits' axis 1: a label indexes it */
            const int64_t C = p->outputs[t->fwd_out].shape.rank >= 2 ? p->outputs[t->fwd_out].shape.dim[1] : 0;
            for (int64_t k = 0; C > 0 && k < (int64_t)(a->nbytes / 8); k++) {
                const int64_t l = ((const int64_t *)a->data)[k];
                if (l < 0 || l >= C)
                    return PP_FAIL(err, PP_EINVAL, "%s: label %lld at %lld is outside the %lld classes of '%s'", path,
                                   (long long)l, (long long)k, (long long)C, p->outputs[t->fwd_out].name);
            }
        }
    }
    return PP_OK;
}

/* splitmix64: the sample order's generator (fixed, so that an order is the same everywhere) */
static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void order(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    uint64_t s = seed ^ (0x5851f42d4c957f2dull * (uint64_t)(epoch + 1));
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(mix(&s) % (uint64_t)(i + 1));
        const int64_t x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
}

static double lr_at(const pp_optim *o, int64_t step, int64_t total) {
    if (o->warmup_steps > 0 && step <= o->warmup_steps) return o->lr * (double)step / (double)o->warmup_steps;
    if (o->schedule == PP_LR_COSINE && total > o->warmup_steps) {
        const double x = (double)(step - o->warmup_steps) / (double)(total - o->warmup_steps);
        return o->lr_min + 0.5 * (o->lr - o->lr_min) * (1.0 + cos(PI * x));
    }
    return o->lr;
}

/* A step's coefficients (optim_math.h), each as PyTorch forms it: in
 * double, then rounded to float once. */
static pp_optstep optstep_of(const pp_optim *o, const param *q, double lr, int64_t step) {
    pp_optstep k = {.adamw = o->kind != PP_OPTIM_SGD, .nesterov = o->nesterov, .has_m = q->has_m, .n = q->numel,
                    .lr = (float)lr, .wd = (float)o->weight_decay, .mu = (float)o->momentum};
    if (!k.adamw) return k;
    const double bc1 = 1.0 - pow(o->beta1, (double)step), bc2 = 1.0 - pow(o->beta2, (double)step);
    k.decay = (float)(1.0 - lr * o->weight_decay);
    k.b1 = (float)o->beta1, k.c1 = (float)(1.0 - o->beta1);
    k.b2 = (float)o->beta2, k.c2 = (float)(1.0 - o->beta2);
    k.neg_step = (float)(-(lr / bc1)), k.bc2s = (float)sqrt(bc2), k.eps = (float)o->eps;
    return k;
}

/* PyTorch's arithmetic, in float (optim_math.h: the one the CUDA optimizer
 * kernel runs): SGD (weight decay added to the gradient, the momentum
 * buffer set to the first gradient, Nesterov), AdamW (decay first, then the
 * bias-corrected moments). */
/* fn(t, i, ctx) for each trained weight i (not the running statistics), the
 * weights split between up to PAR_THREADS threads (the caller one of them)
 * in runs of about equal elements, each weight whole on one thread: what fn
 * computes for a weight does not depend on the split. On one thread the
 * host's step over ViT-B/16's 86 M weights (SGD with momentum) took 0.19 s
 * of a 5.2 s step, 2 cores of an AMD EPYC Zen 4, the other core idle. */
#define PAR_THREADS 8
typedef void par_fn(trainer *t, int i, void *ctx);
typedef struct par_part {
    trainer *t;
    par_fn *fn;
    void *ctx;
    int lo, hi; /* weights [lo, hi) */
} par_part;

static void *par_run(void *arg) {
    const par_part *u = arg;
    for (int i = u->lo; i < u->hi; i++)
        if (!u->t->ps[i].running && (!u->t->mine || u->t->mine[i])) u->fn(u->t, i, u->ctx);
    return NULL;
}

static void par_params(trainer *t, int threads, par_fn *fn, void *ctx) {
    int64_t total = 0;
    for (int i = 0; i < t->n_params; i++) total += t->ps[i].running ? 0 : t->ps[i].numel;
    int n = threads < 1 ? 1 : threads > PAR_THREADS ? PAR_THREADS : threads;
    if (total < ((int64_t)1 << 20)) n = 1; /* a thread's start would cost more */
    par_part parts[PAR_THREADS];
    pthread_t th[PAR_THREADS];
    bool started[PAR_THREADS] = {false};
    int64_t seen = 0;
    for (int p = 0, i = 0; p < n; p++) { /* part p ends where the elements so far pass (p + 1) / n of them */
        parts[p] = (par_part){t, fn, ctx, i, i};
        while (i < t->n_params && (p == n - 1 || seen < total * (p + 1) / n))
            seen += t->ps[i].running ? 0 : t->ps[i].numel, i++;
        parts[p].hi = i;
    }
    for (int p = 1; p < n; p++) started[p] = pthread_create(&th[p], NULL, par_run, &parts[p]) == 0;
    par_run(&parts[0]);
    for (int p = 1; p < n; p++) {
        if (started[p]) pthread_join(th[p], NULL);
        else par_run(&parts[p]); /* no thread: here */
    }
}

typedef struct upd_ctx {
    double lr;
    int64_t step;
} upd_ctx;

static void upd_one(trainer *t, int i, void *ctx) {
    const upd_ctx *c = ctx;
    param *q = &t->ps[i];
    const pp_optstep k = optstep_of(&t->o->opt, q, c->lr, c->step);
    for (int64_t e = 0; e < q->numel; e++) pp_optstep_at(&k, q->w, q->g, q->m, q->v, e);
    q->has_m = true;
}

/* The training-mode Dropouts' input, {--seed, counter} per micro-batch: the
 * counter is micro-batch m of step `step` counted over the whole run
 * ((step - 1) M + m, the same in any split or replica count, a fresh mask
 * each micro-batch; m0: the first's place in the step, a replica's share
 * under MPI); step 0 (the held-out data): -1, dropout off. */
static void feed_dropout_seed(const trainer *t, pprt_array *ins, int64_t step, int m0, int M) {
    if (t->seed_in < 0) return;
    int64_t *v = ins[t->seed_in].data;
    for (int m = 0; m < M; m++) {
        v[2 * m] = (int64_t)t->o->seed;
        v[2 * m + 1] = step > 0 ? (step - 1) * t->o->accumulate + m0 + m : -1;
    }
    ins[t->seed_in].n = M;
}

/* The micro-batches of one step, as pprt_run's sets: rows perm[base ..]. */
static void fill_sets(const trainer *t, const dataset *d, const int64_t *perm, int64_t base, int M, pprt_array *ins) {
    const pprt_plan *p = t->p;
    for (int i = 0; i < p->n_inputs; i++) {
        if (i == t->seed_in) continue;
        const size_t whole = p->inputs[i].sample_bytes, row = whole / (size_t)t->rows;
        unsigned char *dst = ins[i].data;
        const unsigned char *src = d->a[i].data;
        for (int64_t r = 0; r < (int64_t)M * t->rows; r++)
            memcpy(dst + (size_t)r * row, src + (size_t)(perm ? perm[base + r] : base + r) * row, row);
        ins[i].n = M;
    }
}

static pp_status write_weights(const trainer *t, const char *dir, pp_err *err) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return PP_FAIL(err, PP_EIO, "cannot make %s: %s", dir, strerror(errno));
    for (int i = 0; i < t->n_params; i++) {
        const param *q = &t->ps[i];
        const pprt_io *go = &t->p->outputs[q->out];
        char safe[PP_FILE_NAME_MAX], path[4400];
        pprt_safe_name(q->name, safe, sizeof safe);
        snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
        PP_TRY(pprt_npy_write(path, PP_F32, &go->shape, q->w, err));
    }
    return PP_OK;
}

/* ---- a run's outputs as they come (pprt_run_opts.take_outputs) -------------------------------- */

/* Micro-batch j's outputs, folded into the step in micro-batch order: its
 * loss kept, its gradients summed into the weights' gradient buffers (the
 * first copied), its running statistics folded in (training); or its loss
 * summed and its rows' top-1 counted (--eval). The step keeps one set of
 * gradients, not one per micro-batch: a replica's micro-batch ahead of its
 * turn waits in a copy of its message until the ones before it came. A
 * backward stage's device-local gradients (pprt_stage.n_local) come from
 * that stage, each stage's micro-batches in their order: a taker of their
 * own each (sub), folding the outputs of that stage alone. */
typedef struct taker {
    trainer *t;
    bool eval;
    int stage;             /* whose outgoing message: the last stage's (the sink's), or a local one's */
    bool local;            /* the stage's device-local outputs, not the sink's */
    struct taker *sub;     /* training: one per stage with device-local outputs */
    int n_sub;
    const int64_t *labels; /* eval: the labels of the run's rows */
    pthread_mutex_t mu;
    int64_t next, M;
    void **wait;           /* [M]: messages ahead of their turn */
    float *loss;           /* [M] */
    int64_t good;          /* eval: rows whose top-1 is the label */
    bool hold;             /* MPI: every message waits (the sums before them come from another replica) */
} taker;

static const void *out_at(const trainer *t, const void *msg, int i) {
    const pprt_io *o = &t->p->outputs[i];
    return (const unsigned char *)msg + t->p->stages[o->stage].out.off[o->slot];
}

/* Output i is taker k's: a device-local one of its stage, or one at the sink. */
static bool is_mine(const taker *k, int i) {
    const pprt_io *o = &k->t->p->outputs[i];
    const pprt_stage *st = &k->t->p->stages[o->stage];
    const bool local = o->slot >= pprt_local_first(st);
    return k->local ? local && o->stage == k->stage : !local;
}

static void fold(taker *k, int64_t j, const void *msg) {
    trainer *t = k->t;
    if (!k->local) k->loss[j] = *(const float *)out_at(t, msg, t->loss_out);
    if (k->eval) {
        const pprt_io *lo = t->fwd_out >= 0 ? &t->p->outputs[t->fwd_out] : NULL;
        if (!lo || lo->shape.rank != 2 || !k->labels) return;
        const int64_t C = lo->shape.dim[1];
        const float *y = out_at(t, msg, t->fwd_out);
        for (int64_t r = 0; r < t->rows; r++) {
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (y[r * C + c] > y[r * C + best]) best = c;
            k->good += best == k->labels[j * t->rows + r];
        }
        return;
    }
    for (int i = 0; i < t->n_params; i++) {
        param *q = &t->ps[i];
        if (!is_mine(k, q->out)) continue;
        if (t->dev && !q->running) continue; /* folded on its device by the executor (dopt.h) */
        const float *g = out_at(t, msg, q->out);
        if (q->running) fold_running(q, g, j);
        else if (j == 0) memcpy(q->g, g, (size_t)q->numel * sizeof *g);
        else
            for (int64_t e = 0; e < q->numel; e++) q->g[e] += g[e];
    }
}

static pp_status take(void *ctx, int64_t mb, const void *msg, pp_err *err) {
    taker *k = ctx;
    const size_t bytes = k->t->p->stages[k->stage].out.bytes;
    pthread_mutex_lock(&k->mu);
    pp_status s = PP_OK;
    if (mb < k->next || mb >= k->M || k->wait[mb]) s = PP_FAIL(err, PP_ERUNTIME, "internal: micro-batch %lld "
                                                                "reached the end twice or out of range", (long long)mb);
    else if (mb != k->next || k->hold) { /* ahead of its turn (msg NULL: its bytes are not read, a mark will do) */
        if (!(k->wait[mb] = malloc(msg ? bytes : 1)))
            s = PP_FAIL(err, PP_ENOMEM, "out of memory holding a micro-batch's outputs");
        else if (msg) memcpy(k->wait[mb], msg, bytes);
    } else {
        fold(k, k->next++, msg);
        for (; k->next < k->M && k->wait[k->next]; k->next++) {
            fold(k, k->next, k->wait[k->next]);
            free(k->wait[k->next]), k->wait[k->next] = NULL;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return s;
}

/* A backward stage's device-local gradients (the stage's own thread): to its taker. */
static pp_status take_local(void *ctx, int stage, int64_t mb, const void *msg, pp_err *err) {
    taker *k = ctx;
    for (int i = 0; i < k->n_sub; i++)
        if (k->sub[i].stage == stage) return take(&k->sub[i], mb, msg, err);
    if (k->eval) return PP_OK; /* held-out data: the gradients are not wanted */
    return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d handed over device-local outputs it has none of", stage);
}

static pp_status taker_one(taker *k, trainer *t, int64_t M, bool eval, int stage, bool local, pp_err *err) {
    *k = (taker){.t = t, .eval = eval, .M = M, .stage = stage, .local = local};
    k->wait = calloc(pp_count(M), sizeof *k->wait);
    k->loss = calloc(pp_count(M), sizeof *k->loss);
    if (!k->wait || !k->loss) {
        free(k->wait), free(k->loss);
        k->wait = NULL, k->loss = NULL;
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&k->mu, NULL);
    return PP_OK;
}

static void taker_free(taker *k) {
    for (int i = 0; i < k->n_sub; i++) taker_free(&k->sub[i]);
    free(k->sub);
    for (int64_t j = 0; k->wait && j < k->M; j++) free(k->wait[j]);
    free(k->wait), free(k->loss);
    if (k->loss || k->wait) pthread_mutex_destroy(&k->mu);
}

static pp_status taker_init(taker *k, trainer *t, int64_t M, bool eval, pp_err *err) {
    const pprt_plan *p = t->p;
    PP_TRY(taker_one(k, t, M, eval, p->n_stages - 1, false, err));
    int n = 0;
    const int ns = p->n_stages + p->n_wstages;
    for (int s = 0; !eval && s < ns; s++) n += p->stages[s].n_local > 0;
    if (!n) return PP_OK;
    if (!(k->sub = calloc((size_t)n, sizeof *k->sub))) {
        taker_free(k);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int s = 0; s < ns; s++)
        if (p->stages[s].n_local) {
            pp_status st = taker_one(&k->sub[k->n_sub], t, M, eval, s, true, err);
            if (st != PP_OK) {
                taker_free(k);
                return st;
            }
            k->n_sub++;
        }
    return PP_OK;
}

/* ---- the device optimizer (dopt.h) ----------------------------------------------------------- */

/* A gradient's sum of squares as the device optimizer sums it (optim_math.h
 * PP_OPT_CHUNK, kmath.h OPTG): in double over chunks in order, then the
 * chunks' sums in order. */
static double sq_of(const float *g, int64_t n) {
    double s = 0;
    for (int64_t c = 0; c < n; c += PP_OPT_CHUNK) {
        double part = 0;
        for (int64_t e = c; e < n && e < c + PP_OPT_CHUNK; e++) part += (double)g[e] * g[e];
        s += part;
    }
    return s;
}

static pp_status dev_call(trainer *t, const owner *w, pprt_dopt_call *c, pp_err *err) {
    pp_err e = {0};
    const pp_status s = w->ops->dopt(w->x, c, &e);
    t->dev_bytes += (double)c->bytes;
    if (s != PP_OK) return PP_WRAP(err, &e, s, "stage %d's device optimizer: %s", w->stage, e.msg);
    return PP_OK;
}

/* Each owner's sums scaled, each weight's sum of squares into t->sq. */
static pp_status dev_norm(trainer *t, bool mean, float inv, bool unscale, float by, pp_err *err) {
    for (int i = 0; i < t->n_own; i++) {
        owner *w = &t->own[i];
        pprt_dopt_call c = {.kind = PPRT_DOPT_NORM, .mean = mean, .inv = inv, .unscale = unscale, .by = by, .sq = w->sq};
        PP_TRY(dev_call(t, w, &c, err));
        for (int j = 0; j < w->np && w->replica == 0; j++) t->sq[w->pidx[j]] = w->sq[j]; /* (the same sums each) */
    }
    return PP_OK;
}

/* The optimizer's step on the devices: the coefficients are every weight's (but n, the owner's). */
static pp_status dev_step(trainer *t, double lr, int64_t step, pp_err *err) {
    for (int i = 0; i < t->n_own; i++) {
        owner *w = &t->own[i];
        pprt_dopt_call c = {.kind = PPRT_DOPT_STEP, .clip = t->clip, .c = t->clip_c,
                            .k = optstep_of(&t->o->opt, &t->ps[w->pidx[0]], lr, step)};
        PP_TRY(dev_call(t, w, &c, err));
    }
    for (int i = 0; i < t->n_params; i++) t->ps[i].has_m = t->ps[i].has_m || !t->ps[i].running;
    return PP_OK;
}

/* A step begins: each owner's next run starts the sums; a later replica's on threads holds its runs' gradients
 * (thr_chain adds them onto the earlier replicas' sum). */
static pp_status dev_begin(trainer *t, pp_err *err) {
    for (int i = 0; t->dev && i < t->n_own; i++) {
        pprt_dopt_call c = {.kind = PPRT_DOPT_BEGIN};
        PP_TRY(dev_call(t, &t->own[i], &c, err));
        c.kind = PPRT_DOPT_HOLD;
        if (t->own[i].replica > 0) PP_TRY(dev_call(t, &t->own[i], &c, err));
    }
    return PP_OK;
}

/* The weights and their state down into the host's copies (checkpoints, the final weights). */
static pp_status dev_get(trainer *t, pp_err *err) {
    for (int i = 0; t->dev && i < t->npr; i++) { /* replica 0's (the others hold the same) */
        pprt_dopt_call c = {.kind = PPRT_DOPT_GET, .n_params = t->own[i].np, .params = t->own[i].dp};
        PP_TRY(dev_call(t, &t->own[i], &c, err));
    }
    return PP_OK;
}

/* No stage's executor was made again under the device optimizer (it would
 * read the host's stale copies). */
static pp_status dev_check(trainer *t, pp_err *err) {
    const int ns = t->p->n_stages + t->p->n_wstages;
    for (int k = 0; t->dev && k < t->reps * ns; k++) {
        const pprt_exec_ops *ops;
        if (t->dev_x[k] && pprt_keeper_peek(t->keep, k % ns, k / ns, &ops) != t->dev_x[k])
            return PP_FAIL(err, PP_ERUNTIME, "stage %d's executor%s was made again while the device optimizer kept "
                           "its weights (give --host-optimizer)", k % ns, t->reps > 1 ? " of a replica" : "");
    }
    return PP_OK;
}

/* Weight q's holders' device copies (replica r's executors) as dst of d; false (why said) where one cannot be one. */
static bool dev_holders(trainer *t, const param *q, int device, int r, pprt_dopt_param *d, pp_err *err,
                        pp_status *st) {
    const pprt_plan *p = t->p;
    const int ns = p->n_stages + p->n_wstages;
    for (int s = 0; s < ns; s++)
        for (int k = 0; k < p->stages[s].n_tensors; k++) {
            const pprt_tdesc *td = &p->stages[s].t[k];
            if (td->kind != PPRT_WEIGHT || strcmp(td->name, q->name) || !t->dev_x[r * ns + s]) continue;
            const pprt_exec_ops *ops;
            pprt_exec *x = pprt_keeper_peek(t->keep, s, r, &ops);
            pprt_dopt_call c = {.kind = PPRT_DOPT_ADDR, .tensor = k};
            pp_err e = {0};
            const pp_status r = ops->dopt(x, &c, &e);
            if (r != PP_OK && r != PP_EUNSUP) {
                *st = PP_WRAP(err, &e, r, "stage %d's device optimizer: %s", s, e.msg);
                return false;
            }
            if (r == PP_EUNSUP) snprintf(t->dev_why, sizeof t->dev_why, "%s", e.msg);
            else if (c.device != device)
                snprintf(t->dev_why, sizeof t->dev_why, "weight %.400s is read on device %d and %d", q->name, device, c.device);
            else if (d->n_dst == PPRT_DOPT_DST)
                snprintf(t->dev_why, sizeof t->dev_why, "weight %.400s is read by more than %d executors", q->name,
                         PPRT_DOPT_DST);
            else d->dst[d->n_dst++] = c.addr;
            if (t->dev_why[0]) return false;
        }
    return true;
}

/* Stage s's trained weights (those whose gradients it outputs) as an owner: replica r's executor's. */
static pp_status dev_owner(trainer *t, int s, int r, owner *w, pp_err *err) {
    const pprt_plan *p = t->p;
    *w = (owner){.stage = s, .replica = r};
    for (int i = 0; i < t->n_params; i++) w->np += !t->ps[i].running && p->outputs[t->ps[i].out].stage == s;
    if (!w->np) return PP_OK;
    w->pidx = calloc((size_t)w->np, sizeof *w->pidx), w->dp = calloc((size_t)w->np, sizeof *w->dp);
    w->sq = calloc((size_t)w->np, sizeof *w->sq), w->node = calloc((size_t)w->np, sizeof *w->node);
    if (!w->pidx || !w->dp || !w->sq || !w->node) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    w->x = pprt_keeper_peek(t->keep, s, r, &w->ops);
    pprt_dopt_call c = {.kind = PPRT_DOPT_ADDR, .tensor = -1};
    pp_err e = {0};
    const pp_status rc = w->ops->dopt(w->x, &c, &e);
    if (rc == PP_EUNSUP) snprintf(t->dev_why, sizeof t->dev_why, "%s", e.msg);
    if (rc != PP_OK) return rc == PP_EUNSUP ? PP_OK : PP_WRAP(err, &e, rc, "stage %d's device optimizer: %s", s, e.msg);
    w->device = c.device, w->mem = c.mem;
    for (int i = 0, j = 0; i < t->n_params; i++) {
        param *q = &t->ps[i];
        if (q->running || p->outputs[q->out].stage != s) continue;
        w->pidx[j] = i;
        pprt_dopt_param *d = &w->dp[j++];
        const pprt_stage *sg = &p->stages[s];
        const int tid = sg->send[p->outputs[q->out].slot];
        *d = (pprt_dopt_param){.off = sg->out.off[p->outputs[q->out].slot], .numel = q->numel, .w = q->w,
                               .m = q->m, .v = q->v};
        w->node[j - 1] = -1;
        for (int n = sg->n_nodes - 1; n >= 0 && w->node[j - 1] < 0; n--)
            for (int k = 0; k < sg->nodes[n].n_out; k++)
                if (sg->nodes[n].out[k] == tid) w->node[j - 1] = n;
        pp_status st = PP_OK;
        if (!dev_holders(t, q, c.device, r, d, err, &st)) return st;
    }
    return PP_OK;
}

static int param_device(const trainer *t, int i);
static bool device_reads(const trainer *t, int i, int e);

/* The device of a training plan's stage s: forward d, backward 2P-1-d, a zb-h1 plan's W stage 2P+d. */
static int stage_device(const pprt_plan *p, int s) {
    const int P = p->train_devices;
    return s < P ? s : s < 2 * P ? 2 * P - 1 - s : s - 2 * P;
}

/* Stage s runs in this process: every stage on threads, this rank's device's (two, three with a W stage) under
 * MPI. */
static bool rank_stage(const trainer *t, int s) {
    return !t->o->dist || stage_device(t->p, s) == t->o->dist->rank % t->p->train_devices;
}

/* MPI: a weight this rank's device optimizer would keep that another device reads (its rank takes the host's
 * copy after each step, dist_exchange, which the device optimizer no longer updates): the host steps. */
static void dist_tied(trainer *t) {
    if (!t->o->dist) return;
    const int P = t->p->train_devices, d = t->o->dist->rank % P;
    for (int i = 0; i < t->n_params && !t->dev_why[0]; i++)
        for (int e = 0; e < P && t->mine[i] && !t->ps[i].running; e++)
            if (e != d && device_reads(t, i, e)) {
                snprintf(t->dev_why, sizeof t->dev_why, "weight %.400s is read on device %d and %d", t->ps[i].name, d, e);
                break;
            }
}

/* The device optimizer (dopt.h) is bound after the first step where every stage's executor has one, unless the
 * run's settings rule it out from the start (said in t->dev_why); with replicas on threads, each replica's. */
static void dev_refuse(trainer *t, const pprt_run_opts *run, bool fresh) {
    const pprt_train_opts *o = t->o;
    t->reps = !o->dist && run->replicas > 1 ? run->replicas : 1;
    const char *no = o->host_optimizer ? "--host-optimizer"
                     : o->dist && o->dist->replicas > 1 && !o->dist->dev_chain
                         ? "MPI ranks with --replicas, the replicas' chain of sums on the host (it runs on the "
                           "devices over --transport nccl where a device's stages are on a GPU)"
                     : fresh ? "PPRT_TRAIN_FRESH (no executor is kept)" : NULL;
    if (no) snprintf(t->dev_why, sizeof t->dev_why, "%s", no);
}

/* After the first step (the host's): every stage's kept executor takes the
 * weights it outputs the gradients of, or the host keeps stepping them all
 * (t->dev_why says why). */
static pp_status dev_bind(trainer *t, pp_err *err) {
    const pprt_plan *p = t->p;
    const int ns = p->n_stages + p->n_wstages, R = t->reps;
    t->dev_x = calloc((size_t)(R * ns), sizeof *t->dev_x), t->own = calloc((size_t)(R * ns), sizeof *t->own);
    if (!t->dev_x || !t->own) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int k = 0; k < R * ns && !t->dev_why[0]; k++) {
        const pprt_exec_ops *ops = NULL;
        const int s = k % ns;
        if (!rank_stage(t, s)) continue;
        t->dev_x[k] = pprt_keeper_peek(t->keep, s, k / ns, &ops);
        if (!t->dev_x[k] && p->stages[s].n_nodes)
            snprintf(t->dev_why, sizeof t->dev_why, "stage %d has no kept executor", s);
        else if (t->dev_x[k] && !ops->dopt)
            snprintf(t->dev_why, sizeof t->dev_why, "stage %d runs on %.100s, which has no device optimizer", s, ops->name);
    }
    dist_tied(t);
    for (int k = 0; k < R * ns && !t->dev_why[0]; k++) { /* replica-major: replica r's owners r npr .. */
        if (!rank_stage(t, k % ns)) continue;
        const pp_status st = dev_owner(t, k % ns, k / ns, &t->own[t->n_own], err);
        if (t->own[t->n_own].np) t->n_own++; /* trainer_free frees it */
        PP_TRY(st);
    }
    if (t->n_own % R)
        return PP_FAIL(err, PP_ERUNTIME, "internal: %d owners of weights over %d replicas", t->n_own, R);
    t->npr = t->n_own / R; /* (the same stages own weights in every replica) */
    for (int i = 0; i < t->n_own && !t->dev_why[0]; i++) { /* the chain copies between owners of one space */
        const owner *w = &t->own[i], *w0 = &t->own[i % t->npr];
        if (R > 1 && (w->mem != w0->mem || !w->mem || !w->mem->copy))
            snprintf(t->dev_why, sizeof t->dev_why, "stage %d's replicas keep their sums in different spaces",
                     w->stage);
    }
    if (t->dev_why[0]) return PP_OK;
    t->dcopy.mem = t->n_own ? t->own[0].mem : NULL;
    for (int i = 0; i < t->n_own; i++) {
        pprt_dopt_call c = {.kind = PPRT_DOPT_BIND, .n_params = t->own[i].np, .params = t->own[i].dp,
                            .buffers = pp_optim_buffers(&t->o->opt)};
        PP_TRY(dev_call(t, &t->own[i], &c, err));
    }
    for (int b = 0; b < t->n_bound; b++) /* the trained weights' device copies are the owners' from now on */
        for (int i = 0; i < t->n_params; i++)
            if (!t->ps[i].running && !strcmp(t->bound[b]->name, t->ps[i].name)) t->bound[b]->resident = true;
    t->dev = true;
    return PP_OK;
}

typedef struct scale_ctx {
    int M;
    float inv;
    bool unscale;
    float by;
} scale_ctx;

/* Weight i's gradient sum made the step's (the mean, unscaled), its sum of squares into t->sq[i] */
static void scale_one(trainer *t, int i, void *ctx) {
    const scale_ctx *c = ctx;
    param *q = &t->ps[i];
    for (int64_t e = 0; e < q->numel; e++) {
        float a = c->M > 1 ? q->g[e] * c->inv : q->g[e];
        if (c->unscale) a = a * c->by;
        q->g[e] = a;
    }
    t->sq[i] = sq_of(q->g, q->numel);
}

/* The step's mean loss (lv: its micro-batches' losses), its gradients'
 * global norm from each weight's sum of squares (t->sq, summed in the
 * weights' order whatever the split), whether both are finite, and the
 * clipping factor (t->clip, t->clip_c); a loss or gradient that is not
 * finite named. */
static pp_status step_verdict(trainer *t, const float *lv, int64_t step, double *loss, double *norm, bool *finite,
                              pp_err *err) {
    const int M = t->o->accumulate;
    double sum = 0;
    *finite = true;
    for (int j = 0; j < M; j++) {
        if (!isfinite(lv[j])) {
            *finite = false;
            if (!t->o->skip_nonfinite)
                return PP_FAIL(err, PP_ERUNTIME, "step %lld, micro-batch %d: the loss is %g (give --skip-nonfinite to "
                               "skip such steps)", (long long)step, j, (double)lv[j]);
        }
        sum += lv[j];
    }
    *loss = sum / M;
    t->clip = false;
    double sq = 0;
    for (int i = 0; i < t->n_params; i++) sq += t->ps[i].running ? 0.0 : t->sq[i];
    *norm = sqrt(sq);
    t->overflow = !isfinite(*norm);
    if (!isfinite(*norm)) {
        *finite = false;
        if (!t->o->skip_nonfinite && !t->o->opt.dynamic_scale)
            return PP_FAIL(err, PP_ERUNTIME, "step %lld: a gradient is not finite (norm %g)", (long long)step, *norm);
    }
    if (t->o->opt.clip_norm > 0 && *norm > t->o->opt.clip_norm)
        t->clip = true, t->clip_c = (float)(t->o->opt.clip_norm / (*norm + 1e-6));
    return PP_OK;
}

/* The step's gradients averaged over its micro-batches (summed in their
 * order as they came, then scaled), their global norm, clipped; a loss or
 * gradient that is not finite named. */
static pp_status reduce_step(trainer *t, const taker *k, int64_t step, double *loss, double *norm,
                             bool *finite, pp_err *err) {
    const int M = t->o->accumulate;
    if (k->next != M) return PP_FAIL(err, PP_ERUNTIME, "internal: %lld of %d micro-batches reached the end",
                                     (long long)k->next, M);
    for (int i = 0; i < k->n_sub; i++)
        if (k->sub[i].next != M)
            return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d handed over %lld of %d micro-batches' gradients",
                           k->sub[i].stage, (long long)k->sub[i].next, M);
    /* unscaled (--loss-scale) as GradScaler does: by the scale's reciprocal
     * in float, exact for a power of two */
    const float inv = 1.0f / (float)M, unscale = t->seed ? (float)(1.0 / t->scale) : 1.0f;
    if (t->dev) PP_TRY(dev_norm(t, M > 1, inv, t->seed != NULL, unscale, err));
    scale_ctx sc = {M, inv, t->seed != NULL, unscale};
    if (!t->dev) par_params(t, t->threads, scale_one, &sc);
    PP_TRY(step_verdict(t, k->loss, step, loss, norm, finite, err));
    for (int i = 0; t->clip && !t->dev && i < t->n_params; i++)
        for (int64_t e = 0; e < t->ps[i].numel && !t->ps[i].running; e++) t->ps[i].g[e] *= t->clip_c;
    return PP_OK;
}

static bool is_root(const trainer *t) { return !t->o->dist || t->o->dist->rank == 0; }
static bool is_leader(const trainer *t) { return !t->o->dist || t->o->dist->rank % t->o->dist->devices == 0; }

/* The messages held back (taker.hold), folded in their order. */
static void taker_release(taker *k) {
    k->hold = false;
    for (; k->next < k->M && k->wait[k->next]; k->next++) {
        fold(k, k->next, k->wait[k->next]);
        free(k->wait[k->next]), k->wait[k->next] = NULL;
    }
}

/* Output i in device d's chain of sums (dist_run): device 0 carries the
 * sink's outputs (the losses, the running statistics), each device its
 * backward stage's device-local gradients. */
static bool of_device(const trainer *t, int i, int d) {
    const pprt_io *o = &t->p->outputs[i];
    const pprt_stage *st = &t->p->stages[o->stage];
    if (o->slot >= pprt_local_first(st)) return stage_device(t->p, o->stage) == d; /* B's, or W's (zb-h1) */
    return d == 0;
}

/* Device d's sums so far as one message: (device 0) the micro-batches'
 * losses, then each of its weights' gradient sum (f32) and running
 * statistic's fold (f64). */
static size_t sums_bytes(const trainer *t, int d) {
    size_t n = d == 0 ? (size_t)t->o->accumulate * sizeof(float) : 0;
    for (int i = 0; i < t->n_params; i++)
        if (of_device(t, t->ps[i].out, d) && (!t->dev || t->ps[i].running)) /* the devices chain their own */
            n += (size_t)t->ps[i].numel * (t->ps[i].running ? sizeof(double) : sizeof(float));
    return n;
}

static void sums_copy(const trainer *t, taker *k, int d, unsigned char *buf, bool pack) {
    size_t off = d == 0 ? (size_t)t->o->accumulate * sizeof(float) : 0;
    if (d == 0 && pack) memcpy(buf, k->loss, off);
    else if (d == 0) memcpy(k->loss, buf, off);
    for (int i = 0; i < t->n_params; i++) {
        const param *q = &t->ps[i];
        if (!of_device(t, q->out, d) || (t->dev && !q->running)) continue;
        void *a = q->running ? (void *)q->r : (void *)q->g;
        const size_t n = (size_t)q->numel * (q->running ? sizeof(double) : sizeof(float));
        if (pack) memcpy(buf + off, a, n);
        else memcpy(a, buf + off, n);
        off += n;
    }
}

/* The takers that fold device d's outputs: the sink's (device 0), its
 * backward stage's device-local one and, in a zb-h1 plan, its W stage's
 * (NULL where it has none). */
enum { DEV_TAKERS = 3 };
static void device_takers(taker *tk, int P, int d, taker *mine[DEV_TAKERS]) {
    mine[0] = d == 0 ? tk : NULL, mine[1] = mine[2] = NULL;
    for (int i = 0; i < tk->n_sub; i++) {
        if (tk->sub[i].stage == 2 * P - 1 - d) mine[1] = &tk->sub[i];
        if (tk->sub[i].stage == 2 * P + d) mine[2] = &tk->sub[i];
    }
}

/* A rank of an earlier replica after the step: its device d's whole sums
 * from the last replica's rank of that device, its takers complete. */
static pp_status dist_whole(trainer *t, taker *tk, int d, unsigned char *buf, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int M = t->o->accumulate;
    PP_TRY(D->recv(D->ctx, (D->replicas - 1) * D->devices + d, buf, sums_bytes(t, d), err));
    taker *mine[DEV_TAKERS];
    device_takers(tk, D->devices, d, mine);
    sums_copy(t, tk, d, buf, false);
    for (int w = 0; w < DEV_TAKERS; w++)
        if (mine[w]) mine[w]->next = M;
    return PP_OK;
}

/* The replicas' chain of each owner's gradient sums on the devices (dopt.h
 * HOLD, EARLY, WAIT, FOLD_HELD; pprt_train_dist.dsend, drecv: NCCL), in
 * buckets of whole weights of about CHAIN_BUCKET elements of the flat sums
 * (a larger weight a bucket of its own), on a thread of its own started
 * before the run: replica 0 sends each bucket on as soon as its last run has
 * folded it (the executor folds a bucket right after the last of its steps
 * that writes one of its gradients, while it goes on with the backward of
 * earlier layers); replica r receives each bucket of the sum of the
 * replicas before it, adds its own micro-batches' held gradients onto it in
 * their order once its last run has made the bucket's, and sends it on; the
 * last sends the whole sums back to every earlier replica. Each addition is
 * the one threads make (the sums of micro-batches 0, 1, ... in order), so
 * the bits are one replica's. Not a ring all-reduce: NCCL's would choose its
 * own order of additions. */
#define CHAIN_BUCKET ((int64_t)1 << 20)

/* CHAIN_BUCKET, or PPRT_CHAIN_BUCKET elements (the tests' small buckets). */
static int64_t chain_bucket(void) {
    const char *v = getenv("PPRT_CHAIN_BUCKET");
    const long long n = v ? atoll(v) : 0;
    return n > 0 ? (int64_t)n : CHAIN_BUCKET;
}

/* Owner w's buckets, once (the same every step), in the flat sums' order;
 * the chain takes them in the order of the last node that writes one of
 * their gradients (the backward makes the last layers' first), ties by
 * position: the plan's order, so every replica takes the same. */
static pp_status chain_buckets(owner *w, pp_err *err) {
    if (w->bound) return PP_OK;
    const int64_t bucket = chain_bucket();
    w->bound = calloc((size_t)w->np + 1, sizeof *w->bound), w->border = calloc((size_t)w->np, sizeof *w->border);
    int *key = calloc((size_t)w->np, sizeof *key);
    if (!w->bound || !w->border || !key) {
        free(key);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    int64_t lo = 0;
    int nb = 0;
    for (int j = 0; j < w->np; nb++) {
        int64_t hi = lo;
        key[nb] = -1;
        do {
            hi += (w->dp[j].numel + PP_OPT_CHUNK - 1) / PP_OPT_CHUNK * PP_OPT_CHUNK;
            key[nb] = w->node[j] > key[nb] ? w->node[j] : key[nb];
        } while (++j < w->np && hi - lo < bucket);
        w->bound[nb] = lo;
        lo = hi;
    }
    w->bound[nb] = lo, w->nb = nb;
    for (int b = 0; b < nb; b++) { /* insertion: stable, so ties keep their position */
        int k = b;
        for (; k > 0 && key[w->border[k - 1]] > key[b]; k--) w->border[k] = w->border[k - 1];
        w->border[k] = b;
    }
    free(key);
    return PP_OK;
}

/* Before the run: each owner's executor told the step's runs it makes and the buckets its last run folds one by
 * one (EARLY); the sums' address and the buckets folded before that run's last step counted. */
static pp_status chain_arm(trainer *t, int runs, pp_err *err) {
    const int M = t->o->accumulate, R = t->reps;
    for (int i = 0; i < t->n_own; i++) {
        owner *w = &t->own[i];
        PP_TRY(chain_buckets(w, err));
        const int r = w->replica; /* on threads, its replica's share of the step (microbatch.h pprt_share_lo) */
        pprt_dopt_call c = {.kind = PPRT_DOPT_EARLY, .runs = R > 1 ? M * (r + 1) / R - M * r / R : runs,
                            .n_buckets = w->nb, .bound = w->bound};
        PP_TRY(dev_call(t, w, &c, err));
        if ((size_t)w->bound[w->nb] * sizeof(float) != c.sums_bytes)
            return PP_FAIL(err, PP_ERUNTIME, "internal: stage %d's sums hold %zu bytes, its weights %lld", w->stage,
                           c.sums_bytes, (long long)w->bound[w->nb] * 4);
        w->sums = c.addr, w->sums_bytes = c.sums_bytes;
        t->chain_mid += c.done;
    }
    return PP_OK;
}

typedef struct chain_job {
    trainer *t;
    atomic_bool over;   /* the rank's run has returned */
    int buckets, early; /* buckets through this rank's part of the chain; of them, before the run returned */
    pp_status s;
    pp_err err;
} chain_job;

/* A device optimizer call from the chain's thread (dev_call's, but for the count of bytes: none cross). */
static pp_status chain_call(const owner *w, pprt_dopt_call *c, pp_err *err) {
    pp_err e = {0};
    const pp_status s = w->ops->dopt(w->x, c, &e);
    if (s != PP_OK) return PP_WRAP(err, &e, s, "stage %d's device optimizer: %s", w->stage, e.msg);
    return PP_OK;
}

/* The chain on threads (pprt --replicas R in one process): for each owner of replica 0 and each of its buckets
 * in the chain's order, replica by replica, the bucket of replica r - 1's sums copied into replica r's (device to
 * device: pprt_dcopy), r's last run's bucket waited for and its held gradients added on; the last replica's whole
 * sums then copied back to every earlier replica's owner, so every replica steps the same sums. The additions are
 * dev_chain's over NCCL, so the bits are one replica's. */
static pp_status thr_chain(chain_job *j, pp_err *err) {
    trainer *t = j->t;
    const int R = t->reps, npr = t->npr;
    for (int i = 0; i < npr; i++) {
        const owner *w0 = &t->own[i];
        for (int k = 0; k < w0->nb; k++) {
            const int b = w0->border[k];
            const int64_t lo = w0->bound[b];
            const size_t bytes = (size_t)(w0->bound[b + 1] - lo) * sizeof(float);
            for (int r = 0; r < R; r++) {
                const owner *w = &t->own[r * npr + i], *prev = r > 0 ? &t->own[(r - 1) * npr + i] : NULL;
                if (prev) PP_TRY(pprt_dcopy_run(&t->dcopy, w->sums + lo, w->device, prev->sums + lo, prev->device,
                                                bytes, err));
                pprt_dopt_call c = {.kind = PPRT_DOPT_WAIT, .bucket = b};
                PP_TRY(chain_call(w, &c, err));
                c.kind = PPRT_DOPT_FOLD_HELD;
                if (prev) PP_TRY(chain_call(w, &c, err));
            }
            j->buckets++;
            j->early += !atomic_load(&j->over);
        }
        const owner *last = &t->own[(R - 1) * npr + i];
        for (int r = 0; r < R - 1; r++) {
            const owner *w = &t->own[r * npr + i];
            PP_TRY(pprt_dcopy_run(&t->dcopy, w->sums, w->device, last->sums, last->device, w->sums_bytes, err));
        }
    }
    return PP_OK;
}

/* (On threads, PPRT_EARLY_FOLD=1 with one replica: the thread only waits for each bucket, a test of the
 * executors' bucket by bucket fold, whose bits must be the whole fold's; with replicas, thr_chain.) */
static pp_status dev_chain(chain_job *j, pp_err *err) {
    const trainer *t = j->t;
    if (!t->o->dist && t->reps > 1) return thr_chain(j, err);
    const pprt_train_dist *D = t->o->dist;
    const int R = D ? D->replicas : 1, r = D ? D->replica : 0, P = D ? D->devices : 1, d = D ? D->rank % P : 0;
    for (int i = 0; i < t->n_own; i++) {
        const owner *w = &t->own[i];
        for (int k = 0; k < w->nb; k++) {
            const int b = w->border[k];
            const int64_t lo = w->bound[b];
            const size_t bytes = (size_t)(w->bound[b + 1] - lo) * sizeof(float);
            if (r > 0) PP_TRY(D->drecv(D->ctx, (r - 1) * P + d, w->sums + lo, bytes, err));
            pprt_dopt_call c = {.kind = PPRT_DOPT_WAIT, .bucket = b};
            PP_TRY(chain_call(w, &c, err));
            c.kind = PPRT_DOPT_FOLD_HELD;
            if (r > 0) PP_TRY(chain_call(w, &c, err));
            if (r < R - 1) PP_TRY(D->dsend(D->ctx, (r + 1) * P + d, w->sums + lo, bytes, err));
            j->buckets++;
            j->early += !atomic_load(&j->over);
        }
        for (int e = 0; D && r == R - 1 && e < R - 1; e++)
            PP_TRY(D->dsend(D->ctx, e * P + d, w->sums, w->sums_bytes, err));
        if (r < R - 1) PP_TRY(D->drecv(D->ctx, (R - 1) * P + d, w->sums, w->sums_bytes, err));
    }
    return PP_OK;
}

static void *chain_main(void *arg) {
    chain_job *j = arg;
    j->s = dev_chain(j, &j->err);
    return NULL;
}

/* The chain's thread joined, after s (the run's and the host's chain): where s failed, first every WAIT woken
 * (CANCEL) and the chain's transfers stopped, so it ends. The first failure is the one said. */
static pp_status chain_join(trainer *t, pthread_t th, chain_job *j, pp_status s, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    if (s != PP_OK) {
        for (int i = 0; i < t->n_own; i++) {
            pprt_dopt_call c = {.kind = PPRT_DOPT_CANCEL};
            pp_err e = {0};
            t->own[i].ops->dopt(t->own[i].x, &c, &e);
        }
        if (D) D->dstop(D->ctx);
    }
    pthread_join(th, NULL);
    t->chain_buckets += j->buckets, t->chain_early += j->early;
    if (s == PP_OK && j->s != PP_OK) return PP_WRAP(err, &j->err, j->s, "%s", j->err.msg);
    return s;
}

/* After the run on a rank of replica r: the takers' sums (device 0's losses and sink outputs, the host-folded
 * gradients) from replica r-1's rank of device d, this replica's added, on to replica r+1's; the last
 * replica's, of the whole step, back to every earlier replica's rank of device d. */
static pp_status host_chain(trainer *t, taker *tk, taker *mine[DEV_TAKERS], int hi, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int R = D->replicas, r = D->replica, P = D->devices, d = D->rank % P;
    size_t most = 0;
    for (int e = 0; e < P; e++) most = sums_bytes(t, e) > most ? sums_bytes(t, e) : most;
    unsigned char *buf = malloc(most ? most : 1);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory for the step's sums");
    pp_status s = PP_OK;
    if (r > 0) {
        s = D->recv(D->ctx, (r - 1) * P + d, buf, sums_bytes(t, d), err);
        if (s == PP_OK) sums_copy(t, tk, d, buf, false);
        for (int w = 0; s == PP_OK && w < DEV_TAKERS; w++)
            if (mine[w]) taker_release(mine[w]);
    }
    for (int w = 0; s == PP_OK && w < DEV_TAKERS; w++)
        if (mine[w] && mine[w]->next != hi)
            s = PP_FAIL(err, PP_ERUNTIME, "internal: replica %d's micro-batches reached %lld on device %d, not %d", r,
                        (long long)mine[w]->next, d, hi);
    const bool last = r == R - 1;
    if (s == PP_OK) sums_copy(t, tk, d, buf, true);
    if (s == PP_OK && !last) s = D->send(D->ctx, (r + 1) * P + d, buf, sums_bytes(t, d), err);
    if (s == PP_OK && !last) s = dist_whole(t, tk, d, buf, err);
    for (int e = 0; s == PP_OK && last && e < R - 1; e++) s = D->send(D->ctx, e * P + d, buf, sums_bytes(t, d), err);
    free(buf);
    return s;
}

/* Before a run of `runs` micro-batches here: the owners armed and the chain's thread started (*on: joined by
 * chain_join after the run). */
static pp_status chain_start(trainer *t, int runs, pthread_t *th, chain_job *job, bool *on, pp_err *err) {
    *on = false;
    PP_TRY(chain_arm(t, runs, err));
    if (pthread_create(th, NULL, chain_main, job))
        return PP_FAIL(err, PP_ENOMEM, "cannot start the thread of the replicas' chain of sums");
    *on = true;
    return PP_OK;
}

/* One step on MPI ranks: replica r runs micro-batches [lo, hi) of it. Each
 * device's outputs reach its own rank (device 0's the losses and the sink's
 * outputs, every device its weights' gradients: pprt_stage.n_local); the
 * rank of device d in replica r folds its micro-batches, in their order,
 * onto the sum of [0, lo) from device d's rank in replica r-1 and passes
 * the sum of [0, hi) on; the last replica's, of the whole step, goes back
 * to every earlier replica's rank of device d. So the sums are added in
 * micro-batch order, as on threads: a chain per device in replica order,
 * not a reduction whose order MPI would choose, and the bits are one
 * replica's; every rank then holds its device's whole sums (dist_reduce).
 * The device optimizer's sums go the same way on the devices, on the
 * chain's thread, while the run goes on (dev_chain). */
static pp_status dist_run(trainer *t, const int64_t *perm, int64_t k, int64_t step, pprt_array *ins,
                          const pprt_run_opts *run, taker *tk, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int M = t->o->accumulate, R = D->replicas, r = D->replica, P = D->devices, d = D->rank % P;
    const int lo = M * r / R, hi = M * (r + 1) / R;
    if (is_leader(t)) {
        fill_sets(t, &t->train, perm, ((int64_t)k * M + lo) * t->rows, hi - lo, ins);
        feed_dropout_seed(t, ins, step, lo, hi - lo);
    }
    taker *mine[DEV_TAKERS];
    device_takers(tk, P, d, mine);
    for (int w = 0; w < DEV_TAKERS; w++)
        if (mine[w]) mine[w]->next = lo, mine[w]->hold = r > 0;
    const pprt_output_hook hook = {tk, take, take_local, &t->dev};
    pprt_run_opts ro = *run;
    ro.take_outputs = &hook;
    for (int i = 0; t->dev && r > 0 && i < t->n_own; i++) { /* its runs wait for the earlier replicas' sum */
        pprt_dopt_call c = {.kind = PPRT_DOPT_HOLD};
        PP_TRY(dev_call(t, &t->own[i], &c, err));
    }
    chain_job job = {.t = t};
    pthread_t th;
    bool chain = false;
    if (t->dev && R > 1) PP_TRY(chain_start(t, hi - lo, &th, &job, &chain, err));
    pp_status s = D->run(D->ctx, t->p, ins, hi - lo, lo, &ro, err);
    atomic_store(&job.over, true);
    if (s == PP_OK && R > 1) s = host_chain(t, tk, mine, hi, err); /* else each rank holds its device's sums */
    return chain ? chain_join(t, th, &job, s, err) : s;
}

/* Rank 0's weights and their optimizer state to every other rank, at the
 * start with head[] = the step and the updates a --resume starts from, and
 * the loss scale and its count of clean steps (each rank then steps its own
 * device's weights from them, and updates its scale by rank 0's verdicts:
 * dist_reduce). */
static pp_status sync_weights(trainer *t, int64_t head[2], pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    enum { HEAD = 2 * sizeof(int64_t) + sizeof(double) + sizeof(int64_t) };
    size_t n = HEAD;
    for (int i = 0; i < t->n_params; i++)
        n += (size_t)t->ps[i].numel * sizeof(float) * (1 + (t->ps[i].m != NULL) + (t->ps[i].v != NULL));
    unsigned char *buf = malloc(n);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory for the weights");
    pp_status s = PP_OK;
    if (D->rank != 0) s = D->recv(D->ctx, 0, buf, n, err);
    size_t off = HEAD;
    double scale = t->scale;
    int64_t growth = t->growth;
    if (D->rank == 0) {
        memcpy(buf, head, 2 * sizeof(int64_t));
        memcpy(buf + 2 * sizeof(int64_t), &scale, sizeof scale);
        memcpy(buf + 2 * sizeof(int64_t) + sizeof scale, &growth, sizeof growth);
    } else if (s == PP_OK) {
        memcpy(head, buf, 2 * sizeof(int64_t));
        memcpy(&scale, buf + 2 * sizeof(int64_t), sizeof scale);
        memcpy(&growth, buf + 2 * sizeof(int64_t) + sizeof scale, sizeof growth);
        t->scale = scale, t->growth = growth;
    }
    for (int i = 0; s == PP_OK && i < t->n_params; i++) {
        float *a[3] = {t->ps[i].w, t->ps[i].m, t->ps[i].v};
        const size_t b = (size_t)t->ps[i].numel * sizeof(float);
        for (int k = 0; k < 3; k++) {
            if (!a[k]) continue;
            if (D->rank == 0) memcpy(buf + off, a[k], b);
            else memcpy(a[k], buf + off, b);
            off += b;
        }
        t->ps[i].has_m = head[1] > 0;
    }
    for (int q = 1; s == PP_OK && D->rank == 0 && q < D->size; q++) s = D->send(D->ctx, q, buf, n, err);
    free(buf);
    return s;
}

/* ---- MPI ranks: each rank steps its own device's weights ------------------------------------- */

/* The device whose rank steps weight i: the one whose chain of sums carries its output (of_device). */
static int param_device(const trainer *t, int i) {
    if (t->pdev) return t->pdev[i];
    for (int d = 0; d < t->p->train_devices; d++)
        if (of_device(t, t->ps[i].out, d)) return d;
    return 0;
}

/* Device e's stages read weight i. */
static bool device_reads(const trainer *t, int i, int e) {
    if (t->reads) return t->reads[(size_t)i * (size_t)t->p->train_devices + (size_t)e];
    const int P = t->p->train_devices, st[3] = {e, 2 * P - 1 - e, 2 * P + e};
    for (int j = 0; j < (t->p->n_wstages ? 3 : 2); j++)
        for (int k = 0; k < t->p->stages[st[j]].n_tensors; k++) {
            const pprt_tdesc *d = &t->p->stages[st[j]].t[k];
            if (d->kind == PPRT_WEIGHT && !strcmp(d->name, t->ps[i].name)) return true;
        }
    return false;
}

/* The weights of device `from` that device `to` reads (to == from: all of from's, `state`: with their optimizer
 * state), packed into buf or unpacked from it; returns the bytes (buf NULL: only counts). */
static size_t pack_weights(trainer *t, int from, int to, bool state, unsigned char *buf, bool pack) {
    size_t off = 0;
    for (int i = 0; i < t->n_params; i++) {
        param *q = &t->ps[i];
        if (param_device(t, i) != from || (to != from && !device_reads(t, i, to))) continue;
        float *a[3] = {q->w, state ? q->m : NULL, state ? q->v : NULL};
        const size_t b = (size_t)q->numel * sizeof(float);
        for (int k = 0; k < 3; k++) {
            if (!a[k]) continue;
            if (buf && pack) memcpy(buf + off, a[k], b);
            else if (buf) memcpy(a[k], buf + off, b);
            off += b;
        }
    }
    return off;
}

/* After a step, within each replica: the weights a rank stepped that another device's stages read too (a
 * weight tied across devices, a running statistic at the sink), to that device's rank. Each pair of ranks
 * {a < b} in the order of the pairs, a sending first: no two ranks wait on each other. */
static pp_status dist_exchange(trainer *t, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int P = D->devices, d = D->rank % P, base = D->replica * P;
    for (int e = 0; e < P; e++) {
        if (e == d) continue;
        const size_t out = pack_weights(t, d, e, false, NULL, true), in = pack_weights(t, e, d, false, NULL, false);
        if (!out && !in) continue;
        unsigned char *buf = malloc((out > in ? out : in) + 1);
        if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory for the weights to exchange");
        pp_status s = PP_OK;
        for (int turn = 0; turn < 2 && s == PP_OK; turn++) {
            if ((turn == 0) == (d < e) && out) { /* the lower rank sends first */
                pack_weights(t, d, e, false, buf, true);
                s = D->send(D->ctx, base + e, buf, out, err);
            } else if ((turn == 0) != (d < e) && in) {
                s = D->recv(D->ctx, base + e, buf, in, err);
                if (s == PP_OK) pack_weights(t, e, d, false, buf, false);
            }
        }
        free(buf);
        PP_TRY(s);
    }
    return PP_OK;
}

/* Rank 0 gets every device's weights (with their optimizer state) from replica 0's ranks: for a checkpoint
 * and for --save-weights. */
static pp_status dist_gather(trainer *t, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int P = D->devices, d = D->rank % P;
    if (D->replica != 0 || P == 1) return PP_OK;
    size_t most = 0;
    for (int e = 0; e < P; e++) {
        const size_t n = pack_weights(t, e, e, true, NULL, true);
        most = n > most ? n : most;
    }
    unsigned char *buf = malloc(most + 1);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "out of memory for the weights");
    pp_status s = PP_OK;
    if (d > 0) {
        const size_t n = pack_weights(t, d, d, true, buf, true);
        if (n) s = D->send(D->ctx, 0, buf, n, err);
    }
    for (int e = 1; s == PP_OK && d == 0 && e < P; e++) {
        const size_t n = pack_weights(t, e, e, true, NULL, false);
        if (n) s = D->recv(D->ctx, e, buf, n, err);
        if (s == PP_OK && n) pack_weights(t, e, e, true, buf, false);
    }
    free(buf);
    return s;
}

/* This rank's weights (trainer.mine), each weight's device and its readers (looked up once, not each step). */
static pp_status dist_mine(trainer *t, pp_err *err) {
    const size_t P = pp_count(t->p->train_devices);
    int *pdev = calloc(pp_count(t->n_params), sizeof *pdev);
    bool *reads = calloc(pp_count(t->n_params) * P, sizeof *reads);
    t->mine = calloc(pp_count(t->n_params), sizeof *t->mine);
    if (!pdev || !reads || !t->mine) {
        free(pdev), free(reads);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_params; i++) {
        pdev[i] = param_device(t, i);
        for (size_t e = 0; e < P; e++) reads[(size_t)i * P + e] = device_reads(t, i, (int)e);
        t->mine[i] = pdev[i] == t->o->dist->rank % t->o->dist->devices;
    }
    t->pdev = pdev, t->reads = reads;
    return PP_OK;
}

/* The step's end on MPI ranks: every rank makes its own device's gradient
 * sums the step's (the mean, unscaled) and sums their squares; replica 0's
 * ranks send theirs to rank 0 (a double a weight), which adds the losses
 * and the squares up in the weights' order as reduce_step does
 * (step_verdict) and tells every rank the verdict: whether the step is
 * taken, the norm, the clipping factor. Each rank clips its own. */
enum { V_FINITE, V_NORM, V_CLIP, V_C, V_OVERFLOW, V_LOSS, V_N };

static pp_status dist_reduce(trainer *t, taker *k, int64_t step, double *loss, double *norm, bool *finite,
                             pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    const int M = t->o->accumulate, P = D->devices, d = D->rank % P;
    taker *mine[DEV_TAKERS];
    device_takers(k, P, d, mine);
    for (int w = 0; w < DEV_TAKERS; w++)
        if (mine[w] && mine[w]->next != M)
            return PP_FAIL(err, PP_ERUNTIME, "internal: %lld of %d micro-batches reached device %d's sums",
                           (long long)mine[w]->next, M, d);
    const float inv = 1.0f / (float)M, unscale = t->seed ? (float)(1.0 / t->scale) : 1.0f;
    scale_ctx sc = {M, inv, t->seed != NULL, unscale};
    if (t->dev) PP_TRY(dev_norm(t, M > 1, inv, t->seed != NULL, unscale, err)); /* this rank's owners */
    else par_params(t, t->threads, scale_one, &sc); /* this rank's weights (t->mine) */
    double *v = malloc(((size_t)t->n_params + V_N) * sizeof *v);
    if (!v) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status s = PP_OK;
    for (int e = 1; D->replica == 0 && s == PP_OK && e < P; e++) {
        if (D->rank != 0 && e != d) continue;
        int n = 0; /* device e's squares in the weights' order: sent by its rank, taken by rank 0 */
        for (int i = 0; i < t->n_params; i++)
            if (!t->ps[i].running && param_device(t, i) == e) v[n++] = t->sq[i];
        if (n && D->rank != 0) s = D->send(D->ctx, 0, v, (size_t)n * sizeof *v, err);
        if (n && D->rank == 0) s = D->recv(D->ctx, e, v, (size_t)n * sizeof *v, err);
        for (int i = 0, j = 0; n && D->rank == 0 && s == PP_OK && i < t->n_params; i++)
            if (!t->ps[i].running && param_device(t, i) == e) t->sq[i] = v[j++];
    }
    if (s == PP_OK && D->rank == 0) {
        s = step_verdict(t, k->loss, step, loss, norm, finite, err);
        v[V_FINITE] = *finite, v[V_NORM] = *norm, v[V_CLIP] = t->clip, v[V_C] = t->clip_c;
        v[V_OVERFLOW] = t->overflow, v[V_LOSS] = *loss;
        for (int q = 1; s == PP_OK && q < D->size; q++) s = D->send(D->ctx, q, v, V_N * sizeof *v, err);
    } else if (s == PP_OK) {
        s = D->recv(D->ctx, 0, v, V_N * sizeof *v, err);
        *finite = v[V_FINITE] != 0, *norm = v[V_NORM], t->clip = v[V_CLIP] != 0, t->clip_c = (float)v[V_C];
        t->overflow = v[V_OVERFLOW] != 0, *loss = v[V_LOSS];
    }
    free(v);
    for (int i = 0; s == PP_OK && t->clip && !t->dev && i < t->n_params; i++) /* the device clips in its step */
        for (int64_t e = 0; e < t->ps[i].numel && !t->ps[i].running && t->mine[i]; e++) t->ps[i].g[e] *= t->clip_c;
    return s;
}

/* MPI ranks, after the verdict: each rank's last run's executor seconds to
 * rank 0, which sums them per stage (t->busy: the log's stage_busy_s) and
 * takes the devices' idle share over the ranks' wall seconds of the run
 * (*bubble), as device_bubble does on threads. */
static pp_status dist_busy(trainer *t, double *bubble, pp_err *err) {
    const pprt_train_dist *D = t->o->dist;
    if (!D->busy) return PP_OK;
    const int P = D->devices;
    double v[PPRT_DIST_BUSY + 1]; /* and the most micro-batches the rank's device held (its gate's count) */
    D->busy(D->ctx, v);
    v[PPRT_DIST_BUSY] = t->held_peak[D->rank % P];
    if (D->rank != 0) return D->send(D->ctx, 0, v, sizeof v, err);
    for (int k = 0; k < t->p->n_stages + t->p->n_wstages; k++) t->busy[k] = 0;
    double busy = 0, wall = 0;
    for (int q = 0; q < D->size; q++) { /* rank q: replica q / P's device q % P */
        if (q) PP_TRY(D->recv(D->ctx, q, v, sizeof v, err));
        t->busy[q % P] += v[0], t->busy[2 * P - 1 - q % P] += v[1];
        busy += v[0] + v[1], wall += v[2];
        if (v[3] > t->stash_peak[q % P]) t->stash_peak[q % P] = (int)v[3]; /* the most over the replicas */
        if (v[4] > 0) t->stash_bytes[q % P] = (size_t)v[4];
        if (v[8] > (double)t->keep_bytes[q % P]) t->keep_bytes[q % P] = (size_t)v[8];
        if (v[PPRT_DIST_BUSY] > t->held_peak[q % P]) t->held_peak[q % P] = (int)v[PPRT_DIST_BUSY];
        if (!t->p->n_wstages) continue; /* zb-h1: the device's W stage 2P + d */
        t->busy[2 * P + q % P] += v[5], busy += v[5];
        if (v[6] > t->w_keep_peak[q % P]) t->w_keep_peak[q % P] = (int)v[6];
        if (v[7] > 0) t->w_keep_bytes[q % P] = (size_t)v[7];
    }
    *bubble = wall > 0 ? 1.0 - busy / wall : 0;
    return PP_OK;
}

/* ---- checkpoints (ckpt.h) ------------------------------------------------------------------------ */

/* The trainer's weights as ckpt.h sees them (*w: n_params entries, the caller frees). */
static pp_status ckpt_view(const trainer *t, pprt_ckpt *c, pprt_ckpt_weight **w, pp_err *err) {
    *w = calloc(pp_count(t->n_params), sizeof **w);
    if (!*w) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < t->n_params; i++) {
        const param *q = &t->ps[i];
        (*w)[i] = (pprt_ckpt_weight){.name = q->name, .shape = &t->p->outputs[q->out].shape, .numel = q->numel,
                                     .a = {q->w, q->m, q->v}};
    }
    *c = (pprt_ckpt){.n = t->n_params, .w = *w, .optimizer = t->o->opt.kind, .buffers = pp_optim_buffers(&t->o->opt),
                     .seed = t->o->seed, .scaled = t->seed, .scale = t->scale, .growth = t->growth};
    return PP_OK;
}

static pp_status ckpt_write(const trainer *t, const char *dir, int64_t step, int64_t updates, pp_err *err) {
    pprt_ckpt c;
    pprt_ckpt_weight *w;
    PP_TRY(ckpt_view(t, &c, &w, err));
    const pp_status s = pprt_ckpt_write(&c, dir, step, updates, err);
    free(w);
    return s;
}

/* Before the first step (rank 0 under MPI): --checkpoint's folder checked, --resume's checkpoint read (the weights,
 * the optimizer's buffers, the loss scale). */
static pp_status ckpt_begin(trainer *t, int64_t *step, int64_t *updates, pp_err *err) {
    const pprt_train_opts *o = t->o;
    const bool saves = o->checkpoint && o->save_every > 0;
    if (saves) PP_TRY(pprt_ckpt_dest_check(o->checkpoint, err));
    if (!o->resume && !saves) return PP_OK;
    pprt_ckpt c;
    pprt_ckpt_weight *w;
    PP_TRY(ckpt_view(t, &c, &w, err));
    pp_status s = pprt_ckpt_names_check(&c, err);
    if (s == PP_OK && o->resume) s = pprt_ckpt_read(&c, o->resume, step, updates, err);
    free(w);
    if (s != PP_OK || !o->resume) return s;
    t->scale = c.scale, t->growth = c.growth;
    for (int i = 0; i < t->n_params; i++) t->ps[i].has_m = *updates > 0;
    return PP_OK;
}

/* ---- the schedule: which of a device's stages runs which micro-batch when ---------------- */

/* Device d of replica r owns stages d (forward, F) and 2P-1-d (backward,
 * B), and in a zb-h1 plan its W stage 2P+d (the weight gradients); one of
 * them runs at a time. A micro-batch is held on the device from its F until
 * its last backward part (W where the device has one, else B). 1F1B: F
 * waits until the device holds at most P-d-1 micro-batches (so it keeps the
 * activations of P-d of them, not M); GPipe: every B waits for the step's
 * last F on the device. Under both a W runs right after its B (F and B wait
 * while one is owed): the order of an unsplit backward. ZB-H1 (Qi et al.,
 * 2023): 1F1B's cap on F, but a W waits while the device has a B, or an F
 * the cap lets in, waiting to run: the Ws fill the idle time, most of it in
 * the cool-down, and the device holds no more micro-batches than 1F1B's. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int P, R, schedule;
    int64_t M;
    int64_t *f_in, *f_done, *b_done, *w_done; /* [R x P] */
    int *wait_f, *wait_b;                     /* [R x P]: F, B waiting in gate_enter */
    bool *busy, *has_w;                       /* [R x P], [P]: the device has a W stage with nodes */
    int *held_peak;                           /* [P]: the most micro-batches a device held (all steps; not owned) */
    bool stopped, ready;
} gate;

static bool gate_may(const gate *g, int kind, int d, int i, int64_t share) {
    const int64_t owed = g->has_w[d] ? g->b_done[i] - g->w_done[i] : 0;
    const int64_t held = g->f_in[i] - (g->has_w[d] ? g->w_done[i] : g->b_done[i]);
    const bool f_cap = held < g->P - d, zb = g->schedule == PPRT_SCHED_ZBH1;
    if (g->busy[i]) return false;
    if (kind == 2) return !zb || (!g->wait_b[i] && !(g->wait_f[i] && f_cap));
    if (!zb && owed > 0) return false;
    if (kind == 0) return g->schedule == PPRT_SCHED_GPIPE || f_cap;
    return g->schedule != PPRT_SCHED_GPIPE || g->f_done[i] == share;
}

static void gate_enter(void *ctx, int r, int stage, int64_t mb) {
    (void)mb;
    gate *g = ctx;
    const int kind = stage < g->P ? 0 : stage < 2 * g->P ? 1 : 2; /* F, B, W */
    const int d = kind == 0 ? stage : kind == 1 ? 2 * g->P - 1 - stage : stage - 2 * g->P, i = r * g->P + d;
    const int64_t share = g->M * (r + 1) / g->R - g->M * r / g->R;
    pthread_mutex_lock(&g->mu);
    if (kind < 2) (kind ? g->wait_b : g->wait_f)[i]++;
    while (!g->stopped && !gate_may(g, kind, d, i, share)) pthread_cond_wait(&g->cv, &g->mu);
    if (kind < 2) (kind ? g->wait_b : g->wait_f)[i]--;
    g->busy[i] = true;
    if (kind == 0) {
        g->f_in[i]++;
        const int64_t held = g->f_in[i] - (g->has_w[d] ? g->w_done[i] : g->b_done[i]);
        if (held > g->held_peak[d]) g->held_peak[d] = (int)held;
    }
    pthread_cond_broadcast(&g->cv); /* a W may wait on what is waiting */
    pthread_mutex_unlock(&g->mu);
}

static void gate_leave(void *ctx, int r, int stage, int64_t mb) {
    (void)mb;
    gate *g = ctx;
    const int kind = stage < g->P ? 0 : stage < 2 * g->P ? 1 : 2;
    const int d = kind == 0 ? stage : kind == 1 ? 2 * g->P - 1 - stage : stage - 2 * g->P, i = r * g->P + d;
    pthread_mutex_lock(&g->mu);
    g->busy[i] = false;
    (kind == 0 ? g->f_done : kind == 1 ? g->b_done : g->w_done)[i]++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_stop(void *ctx) {
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->stopped = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* --schedule zb-h1 needs a plan with W stages (ppcc --train --schedule zb-h1); the other schedules run
 * such a plan too, each W right after its B. */
static pp_status check_schedule(const pprt_plan *p, const pprt_train_opts *o, pp_err *err) {
    if (o->schedule_kind == PPRT_SCHED_ZBH1 && !p->n_wstages)
        return PP_FAIL(err, PP_EINVAL, "--schedule zb-h1: the plan has no weight-gradient (W) stages to defer: compile "
                       "it with ppcc --train --schedule zb-h1");
    return PP_OK;
}

static pp_status gate_init(gate *g, const pprt_plan *p, int R, int schedule, int64_t M, int *held_peak, pp_err *err) {
    const int P = p->train_devices;
    *g = (gate){.P = P, .R = R, .schedule = schedule, .M = M};
    const size_t n = (size_t)P * (size_t)R;
    g->f_in = calloc(n, sizeof *g->f_in), g->f_done = calloc(n, sizeof *g->f_done);
    g->b_done = calloc(n, sizeof *g->b_done), g->w_done = calloc(n, sizeof *g->w_done);
    g->wait_f = calloc(n, sizeof *g->wait_f), g->wait_b = calloc(n, sizeof *g->wait_b);
    g->busy = calloc(n, sizeof *g->busy), g->has_w = calloc((size_t)P, sizeof *g->has_w);
    g->held_peak = held_peak; /* the trainer's */
    if (!g->f_in || !g->f_done || !g->b_done || !g->w_done || !g->wait_f || !g->wait_b || !g->busy || !g->has_w ||
        !g->held_peak)
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int d = 0; d < p->n_wstages; d++) g->has_w[d] = p->stages[p->n_stages + d].n_nodes > 0;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->ready = true;
    return PP_OK;
}

/* Before each run: its M micro-batches over R replicas (R at most gate_init's). */
static void gate_reset(gate *g, int64_t M, int R) {
    g->M = M, g->R = R;
    const size_t n = (size_t)g->P * (size_t)g->R;
    memset(g->f_in, 0, n * sizeof *g->f_in), memset(g->f_done, 0, n * sizeof *g->f_done);
    memset(g->b_done, 0, n * sizeof *g->b_done), memset(g->w_done, 0, n * sizeof *g->w_done);
    memset(g->wait_f, 0, n * sizeof *g->wait_f), memset(g->wait_b, 0, n * sizeof *g->wait_b);
    memset(g->busy, 0, n * sizeof *g->busy);
    g->stopped = false;
}

static void gate_free(gate *g) {
    if (g->ready) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
    }
    free(g->f_in), free(g->f_done), free(g->b_done), free(g->w_done), free(g->wait_f), free(g->wait_b);
    free(g->busy), free(g->has_w);
}

/* The run's bubble over the devices: 1 - their busy time (W stages' too) over P x R x wall. */
static double device_bubble(const pprt_stats *rs, int R) {
    double busy = 0;
    for (int v = 0; v < rs->n_stages; v++) busy += rs->stages[v].busy_s + rs->stages[v].w_busy_s;
    const int P = rs->n_stages / 2;
    return rs->wall_s > 0 ? 1.0 - busy / ((double)P * R * rs->wall_s) : 0;
}

/* ---- the loss scale (--loss-scale) ------------------------------------------------------------ */

/* The loss gradient's seed, a weight of every stage that reads it, points at
 * t->seed from now on (a plan from before the seed was a weight of its own
 * has none: refused when a scale is asked for). */
static pp_status scale_bind(trainer *t, pp_err *err) {
    const pp_optim *o = &t->o->opt;
    if (o->loss_scale <= 0) return PP_OK;
    if (!(t->seed = alloc64(64))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    t->scale = o->loss_scale;
    int found = 0;
    for (int s = 0; s < t->p->n_stages; s++)
        for (int k = 0; k < t->p->stages[s].n_tensors; k++) {
            pprt_tdesc *d = &t->p->stages[s].t[k];
            if (d->kind != PPRT_WEIGHT || strcmp(d->name, PP_LOSS_SCALE_NAME) || d->dtype != PP_F32 || d->nbytes != 4)
                continue;
            t->bound[t->n_bound] = d;
            t->was[t->n_bound++] = d->data;
            d->data = (const unsigned char *)t->seed;
            found++;
        }
    if (!found) return PP_FAIL(err, PP_EINVAL, "--loss-scale: the plan has no loss-gradient seed '%s' (a plan ppcc "
                               "--train wrote before 2026-12-04): compile it again", PP_LOSS_SCALE_NAME);
    return PP_OK;
}

/* Dynamic scaling after a step, PyTorch GradScaler's rule (_amp_update_scale_):
 * an overflow (the step skipped) multiplies the scale by the backoff (0.5)
 * and restarts the count; scale_interval (2000) clean steps in a row multiply
 * it by the growth (2) where the product is a finite float. The scale is a
 * float as GradScaler's tensor is: each product rounded to one. */
static void scale_update(trainer *t) {
    const pp_optim *o = &t->o->opt;
    if (!t->seed || !o->dynamic_scale) return;
    if (t->overflow) {
        t->scale = (float)(t->scale * o->scale_backoff), t->growth = 0;
        return;
    }
    if (++t->growth < o->scale_interval) return;
    const float grown = (float)(t->scale * o->scale_growth);
    if (isfinite(grown)) t->scale = grown;
    t->growth = 0;
}

/* ---- the loop --------------------------------------------------------------------------- */

/* The held-out data's mean loss and top-1 accuracy (NaN: no logits to
 * judge), over its whole micro-batches. */
static pp_status eval_pass(trainer *t, pprt_array *ins, pprt_array *outs, const pprt_run_opts *run, double *loss,
                           double *acc, pp_err *err) {
    const pprt_plan *p = t->p;
    const pprt_train_dist *D = t->o->dist;
    const int64_t mbs = t->eval.n / t->rows;
    int64_t good = 0;
    *loss = *acc = NAN;
    if (D && D->replica != 0) return PP_OK; /* MPI: replica 0's ranks judge, rank 0 writes */
    double sum = 0;
    /* MPI: replica 0 alone, a replica's share of a step at a time (the links hold no more under GPipe) */
    const int R = D ? D->replicas : 1, chunk = (t->o->accumulate + R - 1) / R;
    for (int64_t k = 0; k < mbs; k += chunk) {
        const int M = (int)(mbs - k < chunk ? mbs - k : chunk);
        fill_sets(t, &t->eval, NULL, k * t->rows, M, ins);
        feed_dropout_seed(t, ins, 0, 0, M);
        taker tk;
        PP_TRY(taker_init(&tk, t, M, true, err));
        tk.labels = t->labels_in >= 0 ? ins[t->labels_in].data : NULL;
        static const bool unread = true; /* held-out data: no gradient is wanted */
        const pprt_output_hook hook = {&tk, take, take_local, &unread};
        pprt_stats rs = {0};
        pprt_run_opts ro = *run;
        ro.replicas = ro.replicas > M ? M : ro.replicas;
        ro.take_outputs = &hook;
        /* the gate counts this run's micro-batches (GPipe's backward waits for all M of them), not a step's */
        if (ro.gate) gate_reset(ro.gate->ctx, M, D || ro.replicas < 1 ? 1 : ro.replicas);
        pp_status s = D ? D->run(D->ctx, p, ins, M, 0, &ro, err) : pprt_run(p, ins, M, outs, &ro, &rs, err);
        free(rs.stages), free(rs.node_ms), free(rs.latency_ms);
        pprt_trace_free(rs.trace);
        if (s == PP_OK && is_leader(t) && tk.next != M) s = PP_FAIL(err, PP_ERUNTIME, "internal: %lld of %d held-out micro-batches "
                                                     "reached the end", (long long)tk.next, M);
        if (s == PP_OK) {
            for (int j = 0; j < M; j++) sum += tk.loss[j];
            good += tk.good;
        }
        taker_free(&tk);
        for (int i = 0; i < p->n_outputs; i++) free(outs[i].data), outs[i].data = NULL;
        if (s != PP_OK) return s;
    }
    *loss = mbs ? sum / (double)mbs : NAN;
    *acc = t->fwd_out >= 0 && t->labels_in >= 0 && p->outputs[t->fwd_out].shape.rank == 2 && mbs
               ? (double)good / (double)(mbs * t->rows) : NAN;
    return PP_OK;
}

/* pprt --profile and --trace on threads: a step's node times added to the
 * sums (those of the first step, taken only where no later step comes:
 * it makes the executors and pays the page faults), and its timeline kept
 * in place of the last step's (rs->trace taken). */
static pp_status prof_alloc(trainer *t, pp_err *err) {
    if (t->prof) return PP_OK;
    t->prof_n = 0;
    for (int i = 0; i < t->p->n_stages; i++) t->prof_n += t->p->stages[i].n_nodes;
    if (!(t->prof = calloc(pp_count(t->prof_n), sizeof *t->prof)))
        return PP_FAIL(err, PP_ENOMEM, "out of memory for the profile");
    return PP_OK;
}

/* A step's node times (ms a micro-batch, the plan's nodes) added to the profile's sums */
static pp_status add_profile(trainer *t, const double *node_ms, pp_err *err) {
    PP_TRY(prof_alloc(t, err));
    if (t->prof_first) { /* a later step: the first's times go */
        memset(t->prof, 0, (size_t)t->prof_n * sizeof *t->prof);
        t->prof_mbs = 0, t->prof_first = false;
    } else if (t->prof_mbs == 0) {
        t->prof_first = true;
    }
    const int64_t M = t->o->accumulate;
    for (int k = 0; k < t->prof_n; k++) t->prof[k] += node_ms[k] * (double)M;
    t->prof_mbs += M;
    return PP_OK;
}

static pp_status step_profile(trainer *t, pprt_stats *rs, pp_err *err) {
    if (rs->trace) {
        pprt_trace_free(t->last.trace);
        t->last.trace = rs->trace, rs->trace = NULL;
        t->last.trace->latency_ms = NULL, t->last.trace->n_latency = 0; /* (rs's, freed with it) */
    }
    if (!rs->node_ms) return PP_OK;
    PP_TRY(add_profile(t, rs->node_ms, err));
    t->last.backend = rs->backend, t->last.precision = rs->precision, t->last.threads = rs->threads;
    return PP_OK;
}

/* pprt --profile under mpirun: this rank's two stages' node times of the
 * step (the other stages' entries 0 here; rank 0 gathers them at the end:
 * gather_profile) */
static pp_status dist_step_profile(trainer *t, const pprt_run_opts *run, pp_err *err) {
    const pprt_train_dist *d = t->o->dist;
    if (!d->node_ms) return PP_OK;
    PP_TRY(prof_alloc(t, err));
    double *ms = calloc(pp_count(t->prof_n), sizeof *ms);
    if (!ms) return PP_FAIL(err, PP_ENOMEM, "out of memory for the profile");
    const char *be = NULL;
    int threads = 0;
    pp_status s = PP_OK;
    if (d->node_ms(d->ctx, ms, &be, &threads)) {
        s = add_profile(t, ms, err);
        t->last.backend = be, t->last.precision = run->precision, t->last.threads = threads;
    }
    free(ms);
    return s;
}

/* The end of a run under mpirun with pprt --profile: replica 0's ranks send
 * rank 0 their means (their two stages' nodes), which it puts in their
 * places; every rank of replica 0 sends, with zeros where it measured none,
 * so none waits for a message that does not come. */
static pp_status gather_profile(trainer *t, pp_err *err) {
    const pprt_train_dist *d = t->o->dist;
    const pprt_plan *p = t->p;
    const int P = p->train_devices;
    PP_TRY(prof_alloc(t, err));
    for (int k = 0; t->prof_mbs && k < t->prof_n; k++) t->prof[k] /= (double)t->prof_mbs;
    t->prof_mbs = t->prof_mbs ? 1 : 0;
    if (d->replica != 0 || P < 2) return PP_OK;
    const size_t bytes = (size_t)t->prof_n * sizeof *t->prof;
    if (d->rank != 0) return d->send(d->ctx, 0, t->prof, bytes, err);
    double *got = malloc(bytes ? bytes : 1);
    if (!got) return PP_FAIL(err, PP_ENOMEM, "out of memory for the profile");
    pp_status s = PP_OK;
    for (int r = 1; r < P && s == PP_OK; r++) { /* rank r: device r, stages r and 2P-1-r */
        if ((s = d->recv(d->ctx, r, got, bytes, err)) != PP_OK) break;
        for (int i = 0, k0 = 0; i < p->n_stages; k0 += p->stages[i].n_nodes, i++)
            if (i == r || i == 2 * P - 1 - r) memcpy(t->prof + k0, got + k0, (size_t)p->stages[i].n_nodes * sizeof *got);
    }
    free(got);
    if (s == PP_OK && !t->prof_mbs) t->prof_mbs = 1; /* (rank 0 measured none itself: the others' times) */
    if (!t->last.backend) t->last.backend = "mixed";
    return s;
}

/* Under mpirun, the end of a run with --profile or --trace: the node times and the last step's timeline
 * gathered to rank 0 (every rank of replica 0 takes part) */
static pp_status dist_gather_profile(trainer *t, const pprt_run_opts *run, pp_err *err) {
    const pprt_train_dist *d = t->o->dist;
    if (run->node_times) PP_TRY(gather_profile(t, err));
    if (!run->trace || !d->gather_trace) return PP_OK;
    pprt_trace_free(t->last.trace);
    t->last.trace = NULL;
    return d->gather_trace(d->ctx, run->precision, &t->last.trace, err);
}

/* The node times' means and the last timeline, to the caller (pprt_train_stats.profile). */
static void hand_profile(trainer *t, pprt_train_stats *st) {
    if (t->prof && t->prof_mbs) {
        for (int k = 0; k < t->prof_n; k++) t->prof[k] /= (double)t->prof_mbs;
        st->profile.node_ms = t->prof, t->prof = NULL;
        st->profile.backend = t->last.backend, st->profile.precision = t->last.precision;
        st->profile.threads = t->last.threads;
    }
    st->profile.trace = t->last.trace, t->last.trace = NULL;
}

/* One step: its micro-batches through the pipeline, the gradients reduced,
 * the weights updated. */
static pp_status one_step(trainer *t, const int64_t *perm, int64_t k, int64_t step, int64_t total, pprt_array *ins,
                          pprt_array *outs, const pprt_run_opts *run, double *loss, double *norm, double *lr,
                          bool *finite, int64_t *updates, double *bubble, pp_err *err) {
    const pprt_train_opts *o = t->o;
    if (!o->dist) {
        fill_sets(t, &t->train, perm, k * o->accumulate * t->rows, o->accumulate, ins);
        feed_dropout_seed(t, ins, step, 0, o->accumulate);
    }
    if (t->seed && *t->seed != (float)t->scale) { /* a weight of the stages that read it */
        *t->seed = (float)t->scale;
        pprt_keeper_changed(t->keep);
    }
    pprt_stats rs = {0};
    if (run->gate) gate_reset(run->gate->ctx, o->accumulate, run->replicas > 1 ? run->replicas : 1);
    PP_TRY(dev_begin(t, err));
    taker tk;
    PP_TRY(taker_init(&tk, t, o->accumulate, false, err));
    const pprt_output_hook hook = {&tk, take, take_local, &t->dev}; /* the device optimizer reads none (dopt.h) */
    pprt_run_opts ro = *run;
    ro.take_outputs = &hook;
    chain_job job = {.t = t};
    pthread_t th;
    bool early = false; /* PPRT_EARLY_FOLD=1 on threads: the last run folds by bucket, a thread waits (dev_chain) */
    pp_status s = PP_OK;
    if (!o->dist && t->dev && (t->early_fold || t->reps > 1)) s = chain_start(t, o->accumulate, &th, &job, &early, err);
    if (s == PP_OK)
        s = o->dist ? dist_run(t, perm, k, step, ins, run, &tk, err)
                    : pprt_run(t->p, ins, o->accumulate, outs, &ro, &rs, err);
    if (early) {
        atomic_store(&job.over, true);
        s = chain_join(t, th, &job, s, err);
    }
    if (s == PP_OK && !o->dist) {
        *bubble = device_bubble(&rs, run->replicas > 1 ? run->replicas : 1);
        for (int v = 0; v < rs.n_stages && v < t->p->n_stages; v++) {
            t->busy[v] = rs.stages[v].busy_s;
            if (v < t->p->train_devices && rs.stages[v].stash_peak > t->stash_peak[v]) t->stash_peak[v] = rs.stages[v].stash_peak;
            if (v < t->p->train_devices && rs.stages[v].stash_bytes) t->stash_bytes[v] = rs.stages[v].stash_bytes;
            if (v < t->p->train_devices && rs.stages[v].keep_bytes > t->keep_bytes[v]) t->keep_bytes[v] = rs.stages[v].keep_bytes;
            if (v >= t->p->n_wstages) continue; /* zb-h1: device v's W stage */
            t->busy[t->p->n_stages + v] = rs.stages[v].w_busy_s;
            if (rs.stages[v].w_keep_peak > t->w_keep_peak[v]) t->w_keep_peak[v] = rs.stages[v].w_keep_peak;
            t->w_keep_bytes[v] = rs.stages[v].w_keep_bytes;
        }
    }
    if (s == PP_OK && !o->dist) s = step_profile(t, &rs, err);
    if (s == PP_OK && o->dist && run->node_times) s = dist_step_profile(t, run, err);
    if (s == PP_OK && o->dist && run->trace && o->dist->keep_trace) o->dist->keep_trace(o->dist->ctx);
    free(rs.stages), free(rs.node_ms), free(rs.latency_ms);
    pprt_trace_free(rs.trace);
    /* the step's links and stash are gone (each step starts its pipeline afresh, with the kept executors):
     * their large buffers wait in the pool for the next step's, those no step took go back (pool.h); the heap's
     * smaller free space goes back too, or it adds 30-50 MB to the peak by the third step of ResNet-18 */
    pprt_pool_trim();
    malloc_trim(0);
    if (s == PP_OK) s = dev_check(t, err);
    /* MPI: each rank steps its own device's weights, rank 0 judging the step (dist_reduce) */
    if (s == PP_OK) s = o->dist ? dist_reduce(t, &tk, step, loss, norm, finite, err)
                                : reduce_step(t, &tk, step, loss, norm, finite, err);
    if (s == PP_OK && o->dist) s = dist_busy(t, bubble, err);
    taker_free(&tk);
    if (s == PP_OK) scale_update(t);
    *lr = lr_at(&o->opt, step, total);
    bool running = false;
    if (s == PP_OK && *finite) {
        ++*updates;
        for (int i = 0; i < t->n_params; i++) {
            running = running || t->ps[i].running;
            if (t->ps[i].running && (!t->mine || t->mine[i])) update_running(&t->ps[i]);
        }
        upd_ctx uc = {*lr, *updates};
        if (!t->dev) par_params(t, t->threads, upd_one, &uc);
        if (t->dev) s = dev_step(t, *lr, *updates, err); /* on the devices, into the executors' copies (dopt.h) */
    }
    if (s == PP_OK && o->dist) s = dist_exchange(t, err);
    /* the kept executors re-read the weights before the next run (keep.h): under the device optimizer only
     * those it does not keep (the running statistics), which a step changes only when it is taken */
    if (!t->dev || running) pprt_keeper_changed(t->keep);
    if (s == PP_OK && !t->dev && !t->dev_why[0] && t->keep) s = dev_bind(t, err);
    for (int i = 0; i < t->p->n_outputs; i++) free(outs[i].data), outs[i].data = NULL;
    return s;
}

static pp_status setup(trainer *t, const char *dir, pprt_array **ins, pprt_array **outs, int64_t **perm, pp_err *err) {
    const pprt_plan *p = t->p;
    const pprt_train_opts *o = t->o;
    t->labels_in = t->seed_in = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        if (!strcmp(p->inputs[i].name, "labels")) t->labels_in = i;
        if (!strcmp(p->inputs[i].name, "dropout_seed") && p->inputs[i].dtype == PP_I64) t->seed_in = i;
    }
    PP_TRY(bind_params(t, err));
    PP_TRY(scale_bind(t, err));
    for (int b = 0; b < t->n_bound; b++) t->bound[b]->varies = true; /* the executors re-read them (keep.h) */

    PP_TRY(load_data(t, dir, o->labels, &t->train, err));
    if (t->train.n < t->rows * o->accumulate)
        return PP_FAIL(err, PP_EINVAL, "the data has %lld samples; one step takes %d micro-batch%s of %lld",
                       (long long)t->train.n, o->accumulate, o->accumulate == 1 ? "" : "es", (long long)t->rows);
    if (o->eval_dir) {
        pp_err e = {0};
        const pp_status s = load_data(t, o->eval_dir, NULL, &t->eval, &e);
        if (s != PP_OK) return PP_WRAP(err, &e, s, "--eval %s: %s", o->eval_dir, e.msg);
    }
    if (o->eval_dir && t->eval.n < t->rows)
        return PP_FAIL(err, PP_EINVAL, "--eval %s has %lld samples, fewer than one micro-batch of %lld", o->eval_dir,
                       (long long)t->eval.n, (long long)t->rows);
    const size_t D = pp_count(p->train_devices);
    t->busy = calloc(pp_count(p->n_stages + p->n_wstages), sizeof *t->busy);
    t->stash_peak = calloc(D, sizeof *t->stash_peak), t->stash_bytes = calloc(D, sizeof *t->stash_bytes);
    t->held_peak = calloc(D, sizeof *t->held_peak), t->w_keep_peak = calloc(D, sizeof *t->w_keep_peak);
    t->w_keep_bytes = calloc(D, sizeof *t->w_keep_bytes), t->keep_bytes = calloc(D, sizeof *t->keep_bytes);
    if (!t->busy || !t->stash_peak || !t->stash_bytes || !t->held_peak || !t->w_keep_peak || !t->w_keep_bytes ||
        !t->keep_bytes)
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    *ins = calloc(pp_count(p->n_inputs), sizeof **ins);
    *outs = calloc(pp_count(p->n_outputs), sizeof **outs);
    *perm = malloc(pp_count(t->train.n) * sizeof **perm);
    if (!*ins || !*outs || !*perm) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_inputs; i++)
        if (!((*ins)[i].data = alloc64(p->inputs[i].sample_bytes * (size_t)o->accumulate)))
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
    return PP_OK;
}

/* Where the replicas' gradient sums met in a step whose optimizer was the devices' (dev) or the host's. */
static const char *chain_path(const trainer *t, bool dev) {
    const pprt_train_dist *D = t->o->dist;
    if (!D && dev && t->reps > 1)
        return "devices (in process: copies between the replicas' devices in replica order, in buckets)";
    if (!D) return "threads (in process, micro-batch order)";
    if (D->replicas < 2) return "none (one replica: each rank holds its device's sums)";
    return dev ? "devices (NCCL send/recv between the replicas' ranks in replica order, in buckets)"
               : "host (MPI between the replicas' ranks in replica order)";
}

/* The log's end: what each device kept between its stages (the most
 * micro-batches at once, and their bytes), the peak resident set, the run's
 * time and idle share. */
static void log_end(pp_json *js, const trainer *t, const pprt_train_stats *st) {
    cJSON *mem = pp_json_add_array(js, js->root, "stash");
    for (int d = 0; d < t->p->train_devices; d++) {
        cJSON *r = pp_json_add_object(js, mem, NULL);
        pp_json_add_number(js, r, "device", d);
        pp_json_add_number(js, r, "stash_peak", t->stash_peak[d]);
        pp_json_add_number(js, r, "stash_bytes", (double)t->stash_bytes[d]);
        pp_json_add_number(js, r, "stash_peak_bytes", (double)t->stash_bytes[d] * t->stash_peak[d]);
        pp_json_add_number(js, r, "held_peak", t->held_peak[d]);
        pp_json_add_number(js, r, "keep_bytes", (double)t->keep_bytes[d]);
        if (!t->p->n_wstages) continue;
        pp_json_add_number(js, r, "w_keep_peak", t->w_keep_peak[d]);
        pp_json_add_number(js, r, "w_keep_bytes", (double)t->w_keep_bytes[d]);
    }
    pp_json_add_number(js, js->root, "peak_rss", (double)pprt_peak_rss());
    pp_json_add_string(js, js->root, "optimizer", t->dev ? "device" : "host");
    pp_json_add_string(js, js->root, "optimizer_steps", t->o->dist ? "each rank its own device's weights" : "every weight");
    pp_json_add_string(js, js->root, "gradient_chain", chain_path(t, t->dev));
    if (t->chain_buckets) { /* this rank's (rank 0's: device 0's) part of the chain on the devices, over the steps */
        pp_json_add_number(js, js->root, "chain_buckets", (double)t->chain_buckets);
        pp_json_add_number(js, js->root, "chain_buckets_before_run_end", (double)t->chain_early);
        pp_json_add_number(js, js->root, "chain_buckets_folded_mid_run", (double)t->chain_mid);
    }
    if (!t->dev) pp_json_add_string(js, js->root, "optimizer_why", t->dev_why[0] ? t->dev_why : "no stage ran yet");
    pp_json_add_number(js, js->root, "skipped_steps", (double)st->skipped);
    if (t->seed) pp_json_add_number(js, js->root, "loss_scale", t->scale);
    pp_json_add_number(js, js->root, "wall_s", st->wall_s);
    pp_json_add_number(js, js->root, "bubble", st->bubble);
    pp_json_add_number(js, js->root, "bubble_formula", st->bubble_formula);
}

/* One step's line of the log: what it learnt, how fast, what its stages
 * and executors did (made, reloaded: keep.h). step_s: step, epoch, loss, lr. */
static void log_step(pp_json *js, cJSON *steps_js, trainer *t, const double step_s[4], double norm, double sps,
                     double cpu_s, double bubble, bool finite, double scale, bool dev) {
    const pprt_plan *p = t->p;
    cJSON *r = pp_json_add_object(js, steps_js, NULL);
    pp_json_add_number(js, r, "step", step_s[0]);
    pp_json_add_number(js, r, "epoch", step_s[1]);
    pp_json_add_number(js, r, "loss", step_s[2]);
    pp_json_add_number(js, r, "lr", step_s[3]);
    pp_json_add_number(js, r, "grad_norm", norm);
    pp_json_add_number(js, r, "samples_per_s", sps);
    pp_json_add_round(js, r, "cpu_s", cpu_s, 4);
    pp_json_add_number(js, r, "bubble", bubble);
    pp_json_add_bool(js, r, "skipped", !finite);
    if (t->seed) pp_json_add_number(js, r, "loss_scale", scale);
    pprt_keep_counts kc;
    pprt_keeper_counts(t->keep, &kc); /* this step's runs' (and those of a held-out pass before it) */
    pp_json_add_number(js, r, "executors_created", (double)kc.created);
    pp_json_add_number(js, r, "executors_reloaded", (double)kc.reloaded);
    pp_json_add_number(js, r, "executors_refused_reload", (double)kc.refused);
    pp_json_add_round(js, r, "reload_s", kc.reload_s, 6);
    pp_json_add_round(js, r, "create_s", kc.create_s, 6);
    pp_json_add_number(js, r, "graph_captures", (double)kc.captures);
    pp_json_add_number(js, r, "weight_upload_bytes", kc.uploads); /* host -> device weight copies of the executors */
    pp_json_add_number(js, r, "optimizer_bytes", t->dev_bytes);   /* the device optimizer's, host <-> device */
    pp_json_add_string(js, r, "optimizer", dev ? "device" : "host");
    pp_json_add_string(js, r, "gradient_chain", chain_path(t, dev));
    t->dev_bytes = 0;
    cJSON *b = pp_json_add_array(js, r, "stage_busy_s");
    for (int v = 0; v < p->n_stages + p->n_wstages; v++) pp_json_add_round(js, b, NULL, t->busy[v], 6);
}

/* The pipeline runs' options of a training run: quiet (the trainer reports),
 * the first step's executors saying what they made of their stages
 * (pprt_run_opts.explain, on rank 0 unless pprt -q), and the links holding
 * what the schedule keeps in flight (GPipe a step's micro-batches per
 * replica, 1F1B as many as devices). */
static pprt_run_opts step_opts(const pprt_plan *p, const pprt_train_opts *o, const pprt_run_opts *run, bool root) {
    pprt_run_opts ro = *run;
    ro.quiet = true, ro.progress = false, ro.warmup = 0, ro.explain = !o->quiet && root;
    /* the schedules that cap what a device holds from F until W (the gate's): its stash and W's keep share entries */
    ro.share_keep = o->schedule_kind == PPRT_SCHED_1F1B || o->schedule_kind == PPRT_SCHED_ZBH1;
    const int R = run->replicas > 1 ? run->replicas : 1;
    const int64_t per_rep = (o->accumulate + R - 1) / R;
    const int64_t need = o->schedule_kind == PPRT_SCHED_GPIPE ? per_rep + 1 : p->train_devices + 1;
    if (ro.depth < need) ro.depth = (int)need;
    return ro;
}

pp_status pprt_train(const pprt_plan *p, const char *dir, const pprt_train_opts *o, const pprt_run_opts *run,
                     pprt_train_stats *st, pp_err *err) {
    memset(st, 0, sizeof *st);
    if (!p->train_devices) return PP_FAIL(err, PP_EINVAL, "the plan is not a training plan: compile it with ppcc --train");
    if (o->accumulate < 1) return PP_FAIL(err, PP_EINVAL, "--accumulate must be >= 1");
    if (run->replicas > o->accumulate)
        return PP_FAIL(err, PP_EINVAL, "--replicas %d: each replica takes whole micro-batches of a step, and a step "
                       "has %d (--accumulate): give --accumulate %d or more", run->replicas, o->accumulate, run->replicas);
    trainer t = {.p = p, .o = o, .threads = run->threads > 0 ? run->threads : (int)sysconf(_SC_NPROCESSORS_ONLN)};
    pprt_array *ins = NULL, *outs = NULL;
    int64_t *perm = NULL, done = 0, updates = 0;
    pp_status s = setup(&t, dir, &ins, &outs, &perm, err);
    const char *fresh = getenv("PPRT_TRAIN_FRESH"); /* each step makes its executors: the old way, for A/B runs */
    const char *early = getenv("PPRT_EARLY_FOLD");
    t.early_fold = early && *early && strcmp(early, "0");
    if (s == PP_OK)
        s = pprt_keeper_new(p, o->dist ? 1 : run->replicas, fresh && *fresh && strcmp(fresh, "0"), &t.keep, err);
    const bool root = is_root(&t); /* MPI: rank 0 reads and writes the files */
    dev_refuse(&t, run, fresh && *fresh && strcmp(fresh, "0"));
    if (s == PP_OK && !(t.sq = calloc(pp_count(t.n_params), sizeof *t.sq))) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK && o->dist) s = dist_mine(&t, err);
    if (s == PP_OK && root) s = ckpt_begin(&t, &done, &updates, err);
    int64_t head[2] = {done, updates};
    if (s == PP_OK && o->dist && o->resume) s = sync_weights(&t, head, err);
    pprt_keeper_changed(t.keep); /* a checkpoint's weights (no executor exists yet: for the rule's sake) */
    done = head[0], updates = head[1];
    pp_json js = {0};
    cJSON *steps_js = NULL, *epochs_js = NULL;
    if (s == PP_OK && root && (o->log_json || o->curves)) {
        cJSON *root = pp_json_begin_format(&js, "pprt-train-log", 1);
        pp_json_add_number(&js, root, "rows", (double)t.rows);
        pp_json_add_number(&js, root, "accumulate", o->accumulate);
        pp_json_add_number(&js, root, "devices", p->train_devices);
        steps_js = pp_json_add_array(&js, root, "steps");
        epochs_js = pp_json_add_array(&js, root, "epochs");
    }
    pprt_run_opts ro = step_opts(p, o, run, root);
    ro.keep = t.keep;
    const int R = run->replicas > 1 ? run->replicas : 1;
    const int64_t per_rep = (o->accumulate + R - 1) / R;
    if (s == PP_OK) s = check_schedule(p, o, err);
    gate gt = {0};
    pprt_gate hook = {.ctx = &gt, .enter = gate_enter, .leave = gate_leave, .stop = gate_stop};
    if (s == PP_OK && o->schedule_kind != PPRT_SCHED_FLOW) {
        s = gate_init(&gt, p, R, o->schedule_kind, o->accumulate, t.held_peak, err);
        ro.gate = &hook;
    }
    double bubble_sum = 0;
    const int64_t per_epoch = s == PP_OK ? t.train.n / (t.rows * o->accumulate) : 1;
    const int64_t total = o->steps > 0 ? o->steps : o->epochs * per_epoch;
    if (s == PP_OK && done > total)
        s = PP_FAIL(err, PP_EINVAL, "--resume %s: the checkpoint is at step %lld, past the run's %lld", o->resume,
                    (long long)done, (long long)total);
    const double t0 = pprt_now_s();
    double shown = 0; /* when progress was last printed: at most a line a second, and the last step */
    pprt_pool_keep(true); /* each step's large buffers are the last step's again (pool.h) */
    for (int64_t step = done + 1; s == PP_OK && step <= total; step++) {
        const int64_t epoch = (step - 1) / per_epoch, k = (step - 1) % per_epoch;
        if (k == 0 || step == done + 1) order(perm, t.train.n, o->seed, epoch, o->shuffle);
        double loss = 0, norm = 0, lr = 0, bubble = 0;
        bool finite = true;
        const double ts = pprt_now_s(), scale = t.scale, cpu0 = pprt_cpu_s();
        const bool dev = t.dev; /* this step's optimizer (the first is the host's; dev_bind after it) */
        s = one_step(&t, perm, k, step, total, ins, outs, &ro, &loss, &norm, &lr, &finite, &updates, &bubble, err);
        ro.explain = false; /* the first step's executors alone say what they made */
        if (s != PP_OK) break;
        bubble_sum += bubble;
        if (!finite) st->skipped++;
        const double now = pprt_now_s(), sps = (double)(o->accumulate * t.rows) / (now - ts);
        if (step == done + 1) st->first_loss = loss;
        st->last_loss = loss;
        st->steps++;
        st->samples += o->accumulate * t.rows;
        if (steps_js) {
            const double step_s[4] = {(double)step, (double)epoch, loss, lr};
            log_step(&js, steps_js, &t, step_s, norm, sps, pprt_cpu_s() - cpu0, bubble, finite, scale, dev);
        }
        if (root && o->progress && !o->quiet && (step == total || step == done + 1 || now - shown >= 1.0)) {
            shown = now;
            const double el = now - t0, eta = el / (double)(step - done) * (double)(total - step);
            fprintf(stderr, "step %lld/%lld (epoch %lld): loss %.6f, lr %.3g, grad norm %.4g, %.1f samples/s, ETA %.0f s\n",
                    (long long)step, (long long)total, (long long)epoch + 1, loss, lr, norm, sps, eta);
        }
        if (o->eval_dir && (k == per_epoch - 1 || step == total)) {
            double el, acc;
            s = eval_pass(&t, ins, outs, &ro, &el, &acc, err);
            if (s != PP_OK) break;
            st->eval_loss = el, st->eval_accuracy = acc;
            cJSON *r = pp_json_add_object(&js, epochs_js, NULL);
            pp_json_add_number(&js, r, "epoch", (double)epoch);
            pp_json_add_number(&js, r, "step", (double)step);
            pp_json_add_number(&js, r, "eval_loss", el);
            pp_json_add_number(&js, r, "eval_accuracy", acc);
            if (root && !o->quiet) fprintf(stderr, "epoch %lld: held-out loss %.6f, accuracy %.4f\n", (long long)epoch + 1, el, acc);
        }
        if (o->checkpoint && o->save_every > 0 && (step % o->save_every == 0 || step == total)) {
            s = dev_get(&t, err); /* the device optimizer's weights and state down */
            if (s == PP_OK && o->dist) s = dist_gather(&t, err); /* MPI: every device's to rank 0 */
            if (s == PP_OK && root) s = ckpt_write(&t, o->checkpoint, step, updates, err);
        }
    }
    pprt_pool_keep(false);
    st->wall_s = pprt_now_s() - t0;
    st->bubble = st->steps ? bubble_sum / (double)st->steps : 0;
    st->bubble_formula = (double)(p->train_devices - 1) /
                         ((o->schedule_kind == PPRT_SCHED_ZBH1 ? 3.0 : 1.0) * (double)per_rep + p->train_devices - 1);
    gate_free(&gt);
    if (s == PP_OK) s = dev_get(&t, err);
    if (s == PP_OK && o->dist && o->save_dir) s = dist_gather(&t, err);
    if (s == PP_OK && root && o->save_dir) s = write_weights(&t, o->save_dir, err);
    if (s == PP_OK && js.root) log_end(&js, &t, st);
    if (s == PP_OK && o->dist) s = dist_gather_profile(&t, run, err);
    if (s == PP_OK) hand_profile(&t, st);
    if (s == PP_OK && root && o->curves) s = pprt_curves_write(o->curves, js.root, err);
    if (s == PP_OK && root && o->log_json) s = pp_json_write(&js, o->log_json, true, err);
    else pp_json_free(&js);
    for (int i = 0; ins && i < p->n_inputs; i++) free(ins[i].data);
    free(ins), free(outs), free(perm);
    trainer_free(&t);
    return s;
}
