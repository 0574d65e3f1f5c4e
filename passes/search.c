/* search.c: the best plan for a device budget.
 *
 * `ppcc MODEL --devices N --search` tries every pipeline depth pp in 1..N
 * with dp = N / pp data-parallel replicas, at every micro-batch size b of a
 * list. For each it runs the split passes (the exact min-max partitioner of
 * the chosen policy, under the memory caps) and prices the result:
 *
 *   per stage   memory = weights + activation arena at b + depth x (the
 *               messages in and out), from the real memory plan; time per
 *               micro-batch t_s = its nodes' times (measured by pprt
 *               --profile, else the roofline) + sending its cut over the link
 *               its placement gives (pp_cut_link_gbps)
 *   run         S samples make M = ceil(S / b) micro-batches, the busiest
 *               replica gets m = ceil(M / dp); it takes
 *               T = sum_s t_s + (m - 1) x max_s t_s (the first micro-batch
 *               goes through every stage, then one leaves per bottleneck
 *               time: fill and drain, the bubble); throughput = S / T
 *
 * Shapes depend on the micro-batch, so the model is imported and the passes
 * before the split run once per micro-batch size (the caller's import
 * function; passes never read ONNX); the split passes then run once per
 * depth on that graph. `--max-batch` bisects the micro-batch at one depth
 * the same way. Nothing here is an estimate of its own: every figure is the
 * one `ppcc -pp P -b B` would report for that configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes.h"
#include "../ir/json.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int pp_search_batch_sizes(const pp_compile_opts *o, int64_t *b) {
    if (o->n_batch_sizes) {
        memcpy(b, o->batch_sizes, sizeof *b * (size_t)o->n_batch_sizes);
        return o->n_batch_sizes;
    }
    int n = 0;
    for (int64_t v = 1; v <= 64 && (v == 1 || v <= o->samples); v *= 2) b[n++] = v;
    return n;
}

static bool has_caps(const pp_compile_opts *o) { return o->cap_all || o->n_caps; }

/* The import and the passes before the split, at micro-batch b; times from
 * the nearest profile (*timed_at: its micro-batch, 0 for the roofline). */
static pp_status front(const pp_compile_opts *o, pp_import_fn imp, void *ctx, int64_t b, pp_graph *g,
                       int64_t *timed_at, char *device, size_t device_len, pp_err *err) {
    PP_TRY(imp(ctx, b, g, err));
    pp_compile_opts fo = *o;
    fo.n_profiles = 0; /* applied below, where the profile used is known */
    fo.dump_ir = NULL;
    fo.dump_dot = NULL;
    pp_status s = pp_run_front_passes(g, &fo, err);
    int matched;
    if (s == PP_OK) s = pp_apply_profiles(g, o, &matched, timed_at, device, device_len, err);
    if (s != PP_OK) pp_graph_free(g);
    return s;
}

/* c's stages priced from an inference plan's stages. */
static pp_status price_stages(const pp_graph *g, int pp, pp_candidate *c, double *sum, double *mx, pp_err *err) {
    c->stages = calloc((size_t)pp, sizeof *c->stages);
    if (!c->stages) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->n_stages = pp;
    for (int k = 0; k < pp; k++) {
        const pp_stage_info *si = &g->stage_info[k];
        c->stages[k] = (pp_cand_stage){si->memory, si->params, si->arena, si->memory - si->params - si->arena,
                                       si->est_ms};
        *sum += si->est_ms;
        if (si->est_ms > *mx) *mx = si->est_ms;
    }
    return PP_OK;
}

/* c's "stages" priced as a training plan's devices (train_memory.c), each
 * its two stages' memory under 1F1B (pprt's default schedule) and time; a
 * device over its cap makes the candidate one that does not fit. */
static pp_status price_devices(const pp_graph *g, const pp_compile_opts *o, pp_candidate *c, double *sum,
                               double *mx, pp_err *err) {
    const int P = g->train_devices;
    c->stages = calloc((size_t)P, sizeof *c->stages);
    if (!c->stages) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    c->n_stages = P;
    double worst = 0;
    for (int d = 0; d < P; d++) {
        pp_train_mem m;
        pp_train_memory(g, o, d, &m);
        const double w = m.state;
        c->stages[d] = (pp_cand_stage){(size_t)m.total_1f1b, (size_t)w, (size_t)m.arenas,
                                       (size_t)(m.total_1f1b - w - m.arenas), m.est_ms};
        *sum += m.est_ms;
        if (m.est_ms > *mx) *mx = m.est_ms;
        const size_t cap = pp_stage_cap(o, d);
        if (cap && m.total_1f1b > (double)cap && m.total_1f1b - (double)cap > worst) {
            worst = m.total_1f1b - (double)cap;
            c->over_stage = d, c->over_need = m.total_1f1b, c->over_cap = (double)cap;
        }
    }
    if (c->over_stage >= 0) {
        c->fits = false;
        snprintf(c->why, sizeof c->why, "training device %d needs %.1f MB under 1F1B against its cap of %.1f MB",
                 c->over_stage, c->over_need / 1e6, c->over_cap / 1e6);
    }
    return PP_OK;
}

/* Split g into pp stages (a training plan: pp devices) for dp replicas and
 * price it into c. A split that the caps (or the graph's size) rule out is
 * a candidate that does not fit, with the reason; other failures are
 * errors. A training split changes the graph beyond what pp_unsplit undoes
 * (its nodes sorted by stage, recomputed forwards added), so it splits a
 * copy. */
static pp_status evaluate(pp_graph *g0, const pp_compile_opts *base, int pp, int dp, int64_t timed_at,
                          int64_t batch, pp_candidate *c, pp_err *err) {
    memset(c, 0, sizeof *c);
    c->pp = pp;
    c->dp = dp;
    c->batch = batch; /* the import's (a training graph's own batch is 0: it runs on whole tensors) */
    c->timed_at = timed_at;
    c->over_stage = -1;
    int64_t b = batch > 0 ? batch : 1, S = base->samples > 0 ? base->samples : 1;
    int64_t M = (S + b - 1) / b;
    c->micro_batches = (M + dp - 1) / dp;
    pp_compile_opts o = *base;
    o.n_stages = pp;
    o.replicas = dp;
    o.dump_ir = NULL;
    o.dump_dot = NULL;
    pp_graph work = {0}, *g = g0;
    if (base->train_on) {
        PP_TRY(pp_graph_clone_borrowed(g0, &work, err));
        g = &work;
    }
    pp_err e = {0};
    double sum = 0, mx = 0;
    pp_status s = pp_run_split_passes(g, &o, &e);
    if (s == PP_EINVAL) {
        c->fits = false;
        c->over_stage = g->over_stage;
        c->over_need = g->over_need;
        c->over_cap = g->over_cap;
        snprintf(c->why, sizeof c->why, "%s", e.msg);
        s = PP_OK;
        goto done;
    }
    if (s != PP_OK) {
        *err = e;
        goto done;
    }
    c->fits = true;
    s = g->train_devices ? price_devices(g, &o, c, &sum, &mx, err) : price_stages(g, pp, c, &sum, &mx, err);
    if (s != PP_OK) goto done;
    double m = (double)c->micro_batches;
    c->run_ms = sum + (m - 1) * mx;
    c->samples_per_s = c->run_ms > 0 ? (double)S / (c->run_ms * 1e-3) : 0;
    c->bubble = c->run_ms > 0 ? 1 - m * sum / ((double)pp * c->run_ms) : 0;
    c->imbalance = sum > 0 ? mx / (sum / pp) : 1;
done:
    if (g == &work) pp_graph_free_borrowed(&work);
    else pp_unsplit(g);
    return s;
}

static void cand_free(pp_candidate *c) {
    free(c->stages);
    c->stages = NULL;
    c->n_stages = 0;
}

/* Fitting first, fastest first (ties: fewer stages, then the smaller
 * micro-batch); then the rest by micro-batch and depth. */
static int by_rank(const void *a, const void *b) {
    const pp_candidate *x = a, *y = b;
    if (x->fits != y->fits) return x->fits ? -1 : 1;
    if (x->fits && x->samples_per_s != y->samples_per_s) return x->samples_per_s > y->samples_per_s ? -1 : 1;
    if (!x->fits && x->batch != y->batch) return x->batch < y->batch ? -1 : 1;
    if (x->pp != y->pp) return x->pp < y->pp ? -1 : 1;
    return (x->batch > y->batch) - (x->batch < y->batch);
}

pp_status pp_search(const pp_compile_opts *o, pp_import_fn imp, void *ctx, pp_search_result *r,
                    pp_err *err) {
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    if (o->devices < 1) return PP_FAIL(err, PP_EINVAL, "--search needs --devices N");
    if (o->policy == PP_POLICY_CUSTOM)
        return PP_FAIL(err, PP_EINVAL, "--search chooses the cuts itself: leave out --split-at, "
                       "--exec-seq and --policy custom");
    int64_t bs[PP_MAX_BATCH_SIZES + 8];
    int nb = pp_search_batch_sizes(o, bs);
    r->c = calloc((size_t)nb * (size_t)o->devices, sizeof *r->c);
    if (!r->c) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < nb; i++) {
        pp_graph g;
        int64_t timed_at = 0;
        char device[256];
        pp_status s = front(o, imp, ctx, bs[i], &g, &timed_at, device, sizeof device, err);
        if (s != PP_OK) {
            pp_search_free(r);
            return s;
        }
        if (i == 0) snprintf(r->device, sizeof r->device, "%s", device);
        r->imports++;
        for (int pp = 1; pp <= o->devices && s == PP_OK; pp++) {
            s = evaluate(&g, o, pp, o->devices / pp, timed_at, bs[i], &r->c[r->n], err);
            if (s == PP_OK) r->n++;
        }
        pp_graph_free(&g);
        if (s != PP_OK) {
            pp_search_free(r);
            return s;
        }
    }
    qsort(r->c, (size_t)r->n, sizeof *r->c, by_rank);
    for (int k = 0; k < r->n; k++) r->n_fit += r->c[k].fits;
    r->seconds = now_s() - t0;
    return PP_OK;
}

void pp_search_free(pp_search_result *r) {
    for (int k = 0; k < r->n; k++) cand_free(&r->c[k]);
    free(r->c);
    memset(r, 0, sizeof *r);
}

static size_t max_memory(const pp_candidate *c, int *stage) {
    size_t m = 0;
    *stage = 0;
    for (int k = 0; k < c->n_stages; k++)
        if (c->stages[k].memory > m) m = c->stages[k].memory, *stage = k;
    return m;
}

static void print_caps(FILE *f, const pp_compile_opts *o) {
    if (!has_caps(o)) {
        fprintf(f, "no memory caps");
        return;
    }
    if (o->cap_all) fprintf(f, "%.1f MB per device", (double)o->cap_all / 1e6);
    for (int k = 0; k < o->n_caps; k++)
        fprintf(f, "%sstage %d: %.1f MB", k || o->cap_all ? ", " : "", o->cap_stage[k], (double)o->cap_bytes[k] / 1e6);
    if (o->reserve) fprintf(f, " less %.1f MB reserved", (double)o->reserve / 1e6);
}

static void print_timing(FILE *f, const char *device, const pp_compile_opts *o) {
    if (o->n_profiles == 0) {
        fprintf(f, "timing: the roofline (%.0f GFLOP/s, %.0f GB/s memory); links %.2f GB/s within a host",
                o->target.gflops, o->target.mem_gbps, o->target.link_gbps);
    } else {
        fprintf(f, "timing: %d pprt profile%s of \"%s\" (the one nearest each micro-batch, scaled linearly); "
                   "links %.2f GB/s within a host", o->n_profiles, o->n_profiles == 1 ? "" : "s",
                device[0] ? device : "an unnamed device", o->target.link_gbps);
    }
    if (o->target.devices_per_host)
        fprintf(f, ", %.2f GB/s between hosts of %d devices", o->target.net_gbps, o->target.devices_per_host);
    fputc('\n', f);
}

void pp_search_print(FILE *f, const pp_search_result *r, const pp_compile_opts *o) {
    fprintf(f, "search: %d device%s, pp x dp with dp = %d / pp; %lld samples per run; depth %d; ", o->devices,
            o->devices == 1 ? "" : "s", o->devices, (long long)o->samples, o->depth);
    print_caps(f, o);
    fputc('\n', f);
    print_timing(f, r->device, o);
    if (o->train_on) {
        char what[512];
        pp_train_memory_describe(o, what, sizeof what);
        fprintf(f, "training: pp devices of two stages each; a device's memory is its 1F1B total as ppcc --report "
                   "gives it (%s), its time its forward and backward stages' per micro-batch\n", what);
    }
    fprintf(f, "%4s %3s %3s %11s %7s %13s %11s %7s %9s %16s %8s\n", "rank", "pp", "dp", "micro_batch", "count",
            "est_samples/s", "est_run_ms", "bubble", "imbalance", "max_memory_MB", "timed_at");
    for (int k = 0; k < r->n; k++) {
        const pp_candidate *c = &r->c[k];
        if (!c->fits) continue;
        int st;
        size_t mem = max_memory(c, &st);
        char timed[32];
        if (c->timed_at) snprintf(timed, sizeof timed, "b=%lld", (long long)c->timed_at);
        else snprintf(timed, sizeof timed, "roofline");
        fprintf(f, "%4d %3d %3d %11lld %7lld %13.2f %11.1f %6.1f%% %9.3f %9.1f (s%d) %8s\n", k + 1, c->pp, c->dp,
                (long long)c->batch, (long long)c->micro_batches, c->samples_per_s, c->run_ms, 100 * c->bubble,
                c->imbalance, (double)mem / 1e6, st, timed);
    }
    if (r->n_fit < r->n) {
        fprintf(f, "does not fit:\n");
        for (int k = 0; k < r->n; k++) {
            const pp_candidate *c = &r->c[k];
            if (c->fits) continue;
            fprintf(f, "   - %3d %3d %11lld  ", c->pp, c->dp, (long long)c->batch);
            if (c->over_stage >= 0)
                fprintf(f, "%s %d needs %.1f MB against its cap of %.1f MB (over by %.1f MB)\n",
                        o->train_on ? "training device" : "stage", c->over_stage,
                        c->over_need / 1e6, c->over_cap / 1e6, (c->over_need - c->over_cap) / 1e6);
            else
                fprintf(f, "%s\n", c->why);
        }
    }
    if (r->n_fit) {
        const pp_candidate *c = &r->c[0];
        fprintf(f, "best: -pp %d -b %lld", c->pp, (long long)c->batch);
        if (c->dp > 1)
            fprintf(f, " as %d replicas: pprt PLAN DATA --replicas %d (on ranks: mpirun -np %d pprt PLAN DATA "
                       "--replicas %d)", c->dp, c->dp, c->pp * c->dp, c->dp);
        fputc('\n', f);
    } else {
        fprintf(f, "best: nothing fits\n");
    }
    fprintf(f, "search: %d candidates, %d fit; %d micro-batch size%s imported; %.2f s\n", r->n, r->n_fit, r->imports,
            r->imports == 1 ? "" : "s", r->seconds);
}

static void json_caps(pp_json *j, cJSON *obj, const pp_compile_opts *o) {
    if (o->train_on) { /* what a training device's memory counts (passes/train_memory.c) */
        pp_json_add_string(j, obj, "memory_model", o->train.memory_model == PP_TRAIN_MEM_CUDA ? "cuda" : "host");
        pp_json_add_string(j, obj, "precision", pp_precision_name(o->train.optim.precision));
        pp_json_add_number(j, obj, "zero", o->train.zero);
    }
    pp_json_add_number(j, obj, "cap_bytes", (double)o->cap_all);
    pp_json_add_number(j, obj, "reserve_bytes", (double)o->reserve);
    cJSON *caps = pp_json_add_array(j, obj, "stage_caps");
    for (int k = 0; k < o->n_caps; k++) {
        cJSON *c = pp_json_add_object(j, caps, NULL);
        pp_json_add_number(j, c, "stage", o->cap_stage[k]);
        pp_json_add_number(j, c, "bytes", (double)o->cap_bytes[k]);
    }
}

/* the candidate as an object under `key` of obj (NULL: appended to the array obj) */
static void json_candidate(pp_json *j, cJSON *obj, const char *key, const pp_candidate *c) {
    cJSON *x = pp_json_add_object(j, obj, key);
    pp_json_add_number(j, x, "pp", c->pp);
    pp_json_add_number(j, x, "dp", c->dp);
    pp_json_add_number(j, x, "micro_batch", (double)c->batch);
    pp_json_add_number(j, x, "micro_batches", (double)c->micro_batches);
    pp_json_add_bool(j, x, "fits", c->fits);
    pp_json_add_string(j, x, "why", c->why);
    pp_json_add_round(j, x, "est_samples_per_s", c->samples_per_s, 6);
    pp_json_add_round(j, x, "est_run_ms", c->run_ms, 6);
    pp_json_add_round(j, x, "bubble", c->bubble, 6);
    pp_json_add_round(j, x, "imbalance", c->imbalance, 6);
    pp_json_add_number(j, x, "timed_at_micro_batch", (double)c->timed_at);
    pp_json_add_number(j, x, "over_stage", c->over_stage);
    pp_json_add_round(j, x, "over_bytes", c->over_need, 0);
    pp_json_add_round(j, x, "over_cap_bytes", c->over_cap, 0);
    cJSON *stages = pp_json_add_array(j, x, "stages");
    for (int s = 0; s < c->n_stages; s++) {
        const pp_cand_stage *st = &c->stages[s];
        cJSON *y = pp_json_add_object(j, stages, NULL);
        pp_json_add_number(j, y, "index", s);
        pp_json_add_number(j, y, "memory_bytes", (double)st->memory);
        pp_json_add_number(j, y, "params_bytes", (double)st->params);
        pp_json_add_number(j, y, "peak_activation_bytes", (double)st->arena);
        pp_json_add_number(j, y, "buffer_bytes", (double)st->buffers);
        pp_json_add_round(j, y, "est_time_ms", st->est_ms, 6);
    }
}

pp_status pp_search_json(const char *path, const pp_search_result *r, const pp_compile_opts *o,
                         pp_err *err) {
    pp_json j;
    cJSON *root = pp_json_begin_format(&j, "ppcc-search", PP_REPORT_JSON_VERSION);
    cJSON *x = pp_json_add_object(&j, root, "search");
    pp_json_add_number(&j, x, "devices", o->devices);
    pp_json_add_number(&j, x, "samples", (double)o->samples);
    pp_json_add_number(&j, x, "depth", o->depth);
    pp_json_add_string(&j, x, "device", o->n_profiles ? r->device : "roofline");
    pp_json_add_bool(&j, x, "training", o->train_on); /* stages are devices, memory their 1F1B totals */
    json_caps(&j, x, o);
    pp_json_add_number(&j, x, "imports", r->imports);
    pp_json_add_round(&j, x, "seconds", r->seconds, 6);
    pp_json_add_number(&j, x, "best", r->n_fit ? 0 : -1);
    cJSON *cands = pp_json_add_array(&j, x, "candidates");
    for (int k = 0; k < r->n; k++) json_candidate(&j, cands, NULL, &r->c[k]);
    return pp_json_write(&j, path, true, err);
}

/* ---- the largest micro-batch ------------------------------------------------------------- */

/* Whether micro-batch b fits o->n_stages stages (o->replicas replicas) under
 * the caps: c gets the candidate. */
static pp_status probe(const pp_compile_opts *o, pp_import_fn imp, void *ctx, int64_t b, pp_candidate *c,
                       pp_err *err) {
    pp_graph g;
    int64_t timed_at = 0;
    memset(c, 0, sizeof *c);
    pp_status s = front(o, imp, ctx, b, &g, &timed_at, NULL, 0, err);
    if (s == PP_OK) {
        s = evaluate(&g, o, o->n_stages, o->replicas > 0 ? o->replicas : 1, timed_at, b, c, err);
        pp_graph_free(&g);
    }
    /* micro-batch 1 compiled, so a larger one that does not is too large for
     * ppcc itself (a tensor beyond this machine's memory or a size's range,
     * an allocation that failed): it does not fit, it stops nothing */
    if (b > 1 && (s == PP_EINVAL || s == PP_ENOMEM)) {
        cand_free(c);
        memset(c, 0, sizeof *c);
        c->pp = o->n_stages, c->batch = b, c->over_stage = -1;
        snprintf(c->why, sizeof c->why, "ppcc cannot compile it: %.400s", err->msg);
        return PP_OK;
    }
    return s;
}

#define MAX_BATCH_LIMIT ((int64_t)1 << 20) /* -b's own limit */

pp_status pp_max_batch(const pp_compile_opts *o, pp_import_fn imp, void *ctx, pp_max_batch_result *r,
                       pp_err *err) {
    memset(r, 0, sizeof *r);
    r->limit_stage = -1;
    double t0 = now_s();
    if (!has_caps(o)) return PP_FAIL(err, PP_EINVAL, "--max-batch needs the caps: --max-memory SIZE");
    if (o->policy == PP_POLICY_CUSTOM)
        return PP_FAIL(err, PP_EINVAL, "--max-batch splits with the auto policy: leave out --split-at, "
                       "--exec-seq and --policy custom");
    r->pp = o->n_stages;
    pp_candidate fit = {0}, over = {0};
    pp_status s = probe(o, imp, ctx, 1, &over, err);
    r->probes++;
    int64_t lo = 0, hi = 1;
    if (s == PP_OK && over.fits) {
        fit = over;
        memset(&over, 0, sizeof over);
        lo = 1;
        /* doubling until a size does not fit, then bisection between */
        for (hi = 2; s == PP_OK && hi <= MAX_BATCH_LIMIT; hi *= 2) {
            pp_candidate c;
            s = probe(o, imp, ctx, hi, &c, err);
            r->probes++;
            if (s != PP_OK) break;
            if (!c.fits) {
                over = c;
                break;
            }
            cand_free(&fit);
            fit = c;
            lo = hi;
        }
        while (s == PP_OK && hi <= MAX_BATCH_LIMIT && hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            pp_candidate c;
            s = probe(o, imp, ctx, mid, &c, err);
            r->probes++;
            if (s != PP_OK) break;
            if (c.fits) {
                cand_free(&fit);
                fit = c, lo = mid;
            } else {
                cand_free(&over);
                over = c, hi = mid;
            }
        }
    }
    if (s != PP_OK) {
        cand_free(&fit);
        cand_free(&over);
        return s;
    }
    r->batch = lo;
    r->at = fit;
    r->over_batch = lo + 1;
    if (hi <= MAX_BATCH_LIMIT) {
        r->limit_stage = over.over_stage;
        r->limit_need = over.over_need;
        r->limit_cap = over.over_cap;
        snprintf(r->limit_why, sizeof r->limit_why, "%s", over.why);
    } else {
        snprintf(r->limit_why, sizeof r->limit_why, "every micro-batch up to %lld fits (-b's limit)",
                 (long long)MAX_BATCH_LIMIT);
    }
    cand_free(&over);
    r->seconds = now_s() - t0;
    return PP_OK;
}

void pp_max_batch_free(pp_max_batch_result *r) { cand_free(&r->at); }

void pp_max_batch_print(FILE *f, const pp_max_batch_result *r, const pp_compile_opts *o) {
    fprintf(f, "max-batch: -pp %d, depth %d, ", r->pp, o->depth);
    print_caps(f, o);
    fputc('\n', f);
    if (r->batch == 0) {
        fprintf(f, "max-batch: not even micro-batch 1 fits: %s\n", r->limit_why);
    } else {
        fprintf(f, "largest micro-batch: %lld\n", (long long)r->batch);
        if (o->train_on) {
            char what[512];
            pp_train_memory_describe(o, what, sizeof what);
            fprintf(f, "training devices under 1F1B: %s\n", what);
        }
        fprintf(f, "%-6s %12s %12s %15s %12s %12s\n", o->train_on ? "device" : "stage", "memory_MB", "weights_MB",
                o->train_on ? "arenas_MB" : "activations_MB", o->train_on ? "stash+msgs_MB" : "buffers_MB",
                o->reserve ? "cap-res_MB" : "cap_MB");
        for (int s = 0; s < r->at.n_stages; s++) {
            const pp_cand_stage *st = &r->at.stages[s];
            fprintf(f, "%-6d %12.1f %12.1f %15.1f %12.1f %12.1f\n", s, st->memory / 1e6, st->params / 1e6,
                    st->arena / 1e6, st->buffers / 1e6, (double)pp_stage_cap(o, s) / 1e6);
        }
        if (r->limit_stage >= 0)
            fprintf(f, "limited by %s %d: at micro-batch %lld it needs %.1f MB against its cap of %.1f MB (over "
                       "by %.1f MB)\n",
                    o->train_on ? "device" : "stage", r->limit_stage, (long long)r->over_batch, r->limit_need / 1e6, r->limit_cap / 1e6,
                    (r->limit_need - r->limit_cap) / 1e6);
        else
            fprintf(f, "at micro-batch %lld: %s\n", (long long)r->over_batch, r->limit_why);
    }
    fprintf(f, "max-batch: %d probes, %.2f s\n", r->probes, r->seconds);
}

pp_status pp_max_batch_json(const char *path, const pp_max_batch_result *r, const pp_compile_opts *o,
                            pp_err *err) {
    pp_json j;
    cJSON *root = pp_json_begin_format(&j, "ppcc-max-batch", PP_REPORT_JSON_VERSION);
    cJSON *x = pp_json_add_object(&j, root, "max_batch");
    pp_json_add_number(&j, x, "pp", r->pp);
    pp_json_add_bool(&j, x, "training", o->train_on);
    pp_json_add_number(&j, x, "depth", o->depth);
    json_caps(&j, x, o);
    pp_json_add_number(&j, x, "micro_batch", (double)r->batch);
    pp_json_add_number(&j, x, "probes", r->probes);
    pp_json_add_round(&j, x, "seconds", r->seconds, 6);
    json_candidate(&j, x, "at", &r->at);
    cJSON *lim = pp_json_add_object(&j, x, "limit");
    pp_json_add_number(&j, lim, "micro_batch", (double)r->over_batch);
    pp_json_add_number(&j, lim, "stage", r->limit_stage);
    pp_json_add_round(&j, lim, "need_bytes", r->limit_need, 0);
    pp_json_add_round(&j, lim, "cap_bytes", r->limit_cap, 0);
    pp_json_add_string(&j, lim, "why", r->limit_why);
    return pp_json_write(&j, path, true, err);
}
