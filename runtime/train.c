/* train.c: see train.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../ir/json.h"
#include "io.h"
#include "nodes.h"
#include "train.h"

#define PI 3.14159265358979323846

#define GRAD_SUFFIX ".grad"
#define LOSS_NAME "loss"

void pprt_train_opts_init(pprt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->accumulate = 1;
    o->optimizer = PPRT_OPT_SGD;
    o->lr = 0.01;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->shuffle = true;
}

/* A weight that trains: one buffer every stage reading it points at. */
typedef struct param {
    const char *name;
    int out;              /* the plan output holding its gradient */
    int64_t numel;
    float *w, *g, *m, *v; /* weight, averaged gradient, optimizer state (momentum / Adam's moments) */
    bool has_m;
} param;

typedef struct trainer {
    const pprt_plan *p;
    const pprt_train_opts *o;
    int n_params;
    param *ps;
    int loss_out;
    /* every weight tdesc the weights replaced, and what it held */
    int n_bound;
    pprt_tdesc **bound;
    const unsigned char **was;
    /* the data */
    pprt_npy *data;  /* per plan input */
    int64_t n;       /* samples */
    int64_t rows;    /* a micro-batch's samples (the plan inputs' dim 0) */
} trainer;

static void *alloc64(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 64) ? NULL : p;
}

/* The weights: each gradient output names one ("W.grad" for W); every
 * stage's tensor of that name reads our buffer from now on. */
static pp_status bind_params(trainer *t, pp_err *err) {
    const pprt_plan *p = t->p;
    t->loss_out = -1;
    t->ps = calloc(pp_count(p->n_outputs), sizeof *t->ps);
    int cap = 0;
    for (int s = 0; s < p->n_stages; s++) cap += p->stages[s].n_tensors;
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
        if (ln <= ls || strcmp(on + ln - ls, GRAD_SUFFIX))
            return PP_FAIL(err, PP_EINVAL, "output '%s' is neither the loss nor a weight's gradient: not a plan "
                           "ppcc --train wrote", on);
        param *q = &t->ps[t->n_params];
        char *name = strndup(on, ln - ls);
        if (!name) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        q->name = name;
        q->out = i;
        t->n_params++;
        size_t nbytes = 0;
        const unsigned char *init = NULL;
        for (int s = 0; s < p->n_stages; s++)
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
        q->w = alloc64(nbytes), q->g = alloc64(nbytes), q->m = alloc64(nbytes), q->v = alloc64(nbytes);
        if (!q->w || !q->g || !q->m || !q->v) return PP_FAIL(err, PP_ENOMEM, "out of memory for weight '%s'", name);
        memcpy(q->w, init, nbytes);
        memset(q->m, 0, nbytes);
        memset(q->v, 0, nbytes);
        for (int b = 0; b < t->n_bound; b++)
            if (!strcmp(t->bound[b]->name, name)) t->bound[b]->data = (const unsigned char *)q->w;
    }
    if (t->loss_out < 0) return PP_FAIL(err, PP_EINVAL, "the plan has no 'loss' output: not a plan ppcc --train wrote");
    if (!t->n_params) return PP_FAIL(err, PP_EINVAL, "the plan has no weight's gradient among its outputs");
    return PP_OK;
}

static void trainer_free(trainer *t) {
    for (int b = 0; b < t->n_bound; b++) t->bound[b]->data = t->was[b];
    for (int i = 0; i < t->n_params; i++) {
        free((char *)t->ps[i].name);
        free(t->ps[i].w), free(t->ps[i].g), free(t->ps[i].m), free(t->ps[i].v);
    }
    free(t->ps);
    free(t->bound);
    free(t->was);
    if (t->data)
        for (int i = 0; i < t->p->n_inputs; i++) pprt_npy_free(&t->data[i]);
    free(t->data);
}

/* Each plan input's samples: DIR/NAME.npy ([N, ...], the plan's shape after
 * dim 0; the labels from o->labels when given). */
static pp_status load_data(trainer *t, const char *dir, pp_err *err) {
    const pprt_plan *p = t->p;
    t->data = calloc(pp_count(p->n_inputs), sizeof *t->data);
    if (!t->data) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    t->n = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        const pprt_io *io = &p->inputs[i];
        char path[4400], safe[256];
        pprt_safe_name(io->name, safe, sizeof safe);
        if (!strcmp(io->name, "labels") && t->o->labels) snprintf(path, sizeof path, "%s", t->o->labels);
        else snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
        if (io->shape.rank < 1)
            return PP_FAIL(err, PP_EINVAL, "input '%s' has no rows to draw micro-batches from (a scalar)", io->name);
        PP_TRY(pprt_npy_read(path, &t->data[i], err));
        const pprt_npy *a = &t->data[i];
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
        if (t->n >= 0 && a->shape.dim[0] != t->n)
            return PP_FAIL(err, PP_EINVAL, "%s holds %lld samples, the first input's file %lld", path,
                           (long long)a->shape.dim[0], (long long)t->n);
        if (i == 0) t->rows = io->shape.dim[0];
        else if (io->shape.dim[0] != t->rows)
            return PP_FAIL(err, PP_EINVAL, "input '%s' takes %lld rows, the first input %lld", io->name,
                           (long long)io->shape.dim[0], (long long)t->rows);
        t->n = a->shape.dim[0];
        if (!strcmp(io->name, "labels")) {
            /* the class axis is the logits' 1: labels index it; a label out of range is the data's fault */
            for (int64_t k = 0; k < (int64_t)(a->nbytes / 8); k++) {
                const int64_t l = ((const int64_t *)a->data)[k];
                if (l < 0) return PP_FAIL(err, PP_EINVAL, "%s: label %lld at %lld is negative", path, (long long)l, (long long)k);
            }
        }
    }
    if (t->n < t->rows * t->o->accumulate)
        return PP_FAIL(err, PP_EINVAL, "the data has %lld samples; one step takes %d micro-batch%s of %lld", (long long)t->n,
                       t->o->accumulate, t->o->accumulate == 1 ? "" : "es", (long long)t->rows);
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

static double lr_at(const pprt_train_opts *o, int64_t step, int64_t total) {
    if (o->warmup_steps > 0 && step <= o->warmup_steps) return o->lr * (double)step / (double)o->warmup_steps;
    if (o->schedule == PPRT_LR_COSINE && total > o->warmup_steps) {
        const double x = (double)(step - o->warmup_steps) / (double)(total - o->warmup_steps);
        return o->lr_min + 0.5 * (o->lr - o->lr_min) * (1.0 + cos(PI * x));
    }
    return o->lr;
}

/* PyTorch's arithmetic, in float: SGD (weight decay added to the gradient,
 * the momentum buffer set to the first gradient, Nesterov), AdamW (decay
 * first, then the bias-corrected moments). */
static void update(const pprt_train_opts *o, param *q, double lr, int64_t step) {
    const float flr = (float)lr, wd = (float)o->weight_decay;
    float *w = q->w, *g = q->g, *m = q->m, *v = q->v;
    if (o->optimizer == PPRT_OPT_SGD) {
        const float mu = (float)o->momentum;
        for (int64_t i = 0; i < q->numel; i++) {
            float d = g[i];
            if (wd != 0) d = d + wd * w[i];
            if (mu != 0) {
                m[i] = q->has_m ? mu * m[i] + d : d;
                d = o->nesterov ? d + mu * m[i] : m[i];
            }
            w[i] = w[i] - flr * d;
        }
        q->has_m = true;
        return;
    }
    /* each coefficient as PyTorch forms it: in double, then rounded to float once */
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float c1 = (float)(1.0 - o->beta1), c2 = (float)(1.0 - o->beta2), decay = (float)(1.0 - lr * o->weight_decay);
    const double bc1 = 1.0 - pow(o->beta1, (double)step), bc2 = 1.0 - pow(o->beta2, (double)step);
    const float neg_step = (float)(-(lr / bc1)), bc2s = (float)sqrt(bc2);
    for (int64_t i = 0; i < q->numel; i++) {
        w[i] = w[i] * decay;
        m[i] = m[i] * b1 + c1 * g[i];
        v[i] = v[i] * b2 + c2 * g[i] * g[i];
        const float denom = sqrtf(v[i]) / bc2s + eps;
        w[i] = w[i] + neg_step * m[i] / denom;
    }
}

/* The micro-batches of one step, as pprt_run's sets: rows perm[base ..]. */
static void fill_sets(const trainer *t, const int64_t *perm, int64_t base, pprt_array *ins) {
    const pprt_plan *p = t->p;
    const int M = t->o->accumulate;
    for (int i = 0; i < p->n_inputs; i++) {
        const size_t whole = p->inputs[i].sample_bytes, row = whole / (size_t)t->rows;
        unsigned char *dst = ins[i].data;
        const unsigned char *src = t->data[i].data;
        for (int64_t r = 0; r < (int64_t)M * t->rows; r++) memcpy(dst + (size_t)r * row, src + (size_t)perm[base + r] * row, row);
        ins[i].n = M;
    }
}

static pp_status write_weights(const trainer *t, const char *dir, pp_err *err) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return PP_FAIL(err, PP_EIO, "cannot make %s: %s", dir, strerror(errno));
    for (int i = 0; i < t->n_params; i++) {
        const param *q = &t->ps[i];
        const pprt_io *go = &t->p->outputs[q->out];
        char safe[256], path[4400];
        pprt_safe_name(q->name, safe, sizeof safe);
        snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
        PP_TRY(pprt_npy_write(path, PP_F32, &go->shape, q->w, err));
    }
    return PP_OK;
}

/* The step's gradients averaged over its micro-batches (in their order),
 * their global norm, clipped; a loss or gradient that is not finite named. */
static pp_status reduce_step(const trainer *t, const pprt_array *outs, int64_t step, double *loss, double *norm,
                             bool *finite, pp_err *err) {
    const int M = t->o->accumulate;
    const float *lv = outs[t->loss_out].data;
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
    double sq = 0;
    const float inv = 1.0f / (float)M;
    for (int i = 0; i < t->n_params; i++) {
        const param *q = &t->ps[i];
        const float *g = outs[q->out].data;
        for (int64_t k = 0; k < q->numel; k++) {
            float a = g[k];
            for (int j = 1; j < M; j++) a += g[(size_t)j * (size_t)q->numel + (size_t)k];
            a = M > 1 ? a * inv : a;
            q->g[k] = a;
            sq += (double)a * a;
        }
    }
    *norm = sqrt(sq);
    if (!isfinite(*norm)) {
        *finite = false;
        if (!t->o->skip_nonfinite)
            return PP_FAIL(err, PP_ERUNTIME, "step %lld: a gradient is not finite (norm %g)", (long long)step, *norm);
    }
    if (t->o->clip_norm > 0 && *norm > t->o->clip_norm) {
        const float c = (float)(t->o->clip_norm / (*norm + 1e-6));
        for (int i = 0; i < t->n_params; i++)
            for (int64_t k = 0; k < t->ps[i].numel; k++) t->ps[i].g[k] *= c;
    }
    return PP_OK;
}

pp_status pprt_train(const pprt_plan *p, const char *dir, const pprt_train_opts *o, const pprt_run_opts *run,
                     pprt_train_stats *st, pp_err *err) {
    memset(st, 0, sizeof *st);
    if (!p->train_devices) return PP_FAIL(err, PP_EINVAL, "the plan is not a training plan: compile it with ppcc --train");
    if (o->accumulate < 1) return PP_FAIL(err, PP_EINVAL, "--accumulate must be >= 1");
    trainer t = {.p = p, .o = o};
    pp_status s = bind_params(&t, err);
    if (s == PP_OK) s = load_data(&t, dir, err);
    int64_t *perm = NULL;
    pprt_array *ins = calloc(pp_count(p->n_inputs), sizeof *ins), *outs = calloc(pp_count(p->n_outputs), sizeof *outs);
    pp_json js = {0};
    cJSON *steps_js = NULL;
    if (s == PP_OK && (!ins || !outs)) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (s == PP_OK) {
        perm = malloc(pp_count(t.n) * sizeof *perm);
        for (int i = 0; i < p->n_inputs && perm; i++) {
            ins[i].data = alloc64(p->inputs[i].sample_bytes * (size_t)o->accumulate);
            if (!ins[i].data) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        if (!perm) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    if (s == PP_OK && o->log_json) {
        cJSON *root = pp_json_begin_format(&js, "pprt-train-log", 1);
        pp_json_add_number(&js, root, "rows", (double)t.rows);
        pp_json_add_number(&js, root, "accumulate", o->accumulate);
        pp_json_add_number(&js, root, "devices", p->train_devices);
        steps_js = pp_json_add_array(&js, root, "steps");
    }
    const int64_t per_epoch = s == PP_OK ? t.n / (t.rows * o->accumulate) : 0;
    const int64_t total = o->steps > 0 ? o->steps : o->epochs * per_epoch;
    const double t0 = pprt_now_s();
    for (int64_t step = 1; s == PP_OK && step <= total; step++) {
        const int64_t epoch = (step - 1) / per_epoch, k = (step - 1) % per_epoch;
        if (k == 0) order(perm, t.n, o->seed, epoch, o->shuffle);
        fill_sets(&t, perm, k * o->accumulate * t.rows, ins);
        pprt_stats rs = {0};
        pprt_run_opts ro = *run;
        ro.quiet = true;
        ro.progress = false;
        ro.warmup = 0;
        const double ts = pprt_now_s();
        s = pprt_run(p, ins, o->accumulate, outs, &ro, &rs, err);
        free(rs.stages), free(rs.node_ms), free(rs.latency_ms);
        double loss = 0, norm = 0;
        bool finite = true;
        if (s == PP_OK) s = reduce_step(&t, outs, step, &loss, &norm, &finite, err);
        const double lr = lr_at(o, step, total);
        if (s == PP_OK && finite)
            for (int i = 0; i < t.n_params; i++) update(o, &t.ps[i], lr, step - st->skipped);
        if (!finite) st->skipped++;
        for (int i = 0; i < p->n_outputs; i++) free(outs[i].data), outs[i].data = NULL;
        if (s != PP_OK) break;
        const double now = pprt_now_s(), sps = (double)(o->accumulate * t.rows) / (now - ts);
        if (step == 1) st->first_loss = loss;
        st->last_loss = loss;
        st->steps = step;
        st->samples += o->accumulate * t.rows;
        if (steps_js) {
            cJSON *r = pp_json_add_object(&js, steps_js, NULL);
            pp_json_add_number(&js, r, "step", (double)step);
            pp_json_add_number(&js, r, "epoch", (double)epoch);
            pp_json_add_number(&js, r, "loss", loss);
            pp_json_add_number(&js, r, "lr", lr);
            pp_json_add_number(&js, r, "grad_norm", norm);
            pp_json_add_number(&js, r, "samples_per_s", sps);
            pp_json_add_bool(&js, r, "skipped", !finite);
        }
        if (o->progress && !o->quiet) {
            const double el = now - t0, eta = el / (double)step * (double)(total - step);
            fprintf(stderr, "step %lld/%lld (epoch %lld): loss %.6f, lr %.3g, grad norm %.4g, %.1f samples/s, ETA %.0f s\n",
                    (long long)step, (long long)total, (long long)epoch + 1, loss, lr, norm, sps, eta);
        }
    }
    st->wall_s = pprt_now_s() - t0;
    if (s == PP_OK && o->save_dir) s = write_weights(&t, o->save_dir, err);
    if (s == PP_OK && o->log_json) s = pp_json_write(&js, o->log_json, true, err);
    else pp_json_free(&js);
    for (int i = 0; ins && i < p->n_inputs; i++) free(ins[i].data);
    free(ins);
    free(outs);
    free(perm);
    trainer_free(&t);
    return s;
}
