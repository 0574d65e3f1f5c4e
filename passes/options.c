/* options.c: the command-line options that steer the passes (pipeline depth,
 * policy, custom splits, memory caps, target figures) as one option table
 * (ir/args.h) that ppcc's main hands to the parser with its own: each row
 * says how its value is read, its --help line, and whether it is part of the
 * plan's recorded options. The recorded ones are written in this table's
 * order as their canonical text (no file paths: the same model and options
 * give the same plan wherever they are compiled), which ppcc reads back into
 * the same plan. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool parse_double(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* "512MiB", "10GiB", "1.5GB", "4096" (bytes) */
static bool parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return false;
    static const struct {
        const char *u;
        double m;
    } units[] = {{"", 1},     {"B", 1},       {"KB", 1e3},      {"MB", 1e6},
                 {"GB", 1e9}, {"TB", 1e12},   {"KiB", 1024.0},  {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},        {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].u) == 0) {
            double b = v * units[i].m;
            if (b > 1e18) return false;
            *out = (size_t)b;
            return *out > 0;
        }
    return false;
}

static pp_status parse_caps(const char *s, pp_compile_opts *o, pp_err *err) {
    if (!strchr(s, ':')) {
        if (!parse_size(s, &o->cap_all))
            return PP_FAIL(err, PP_EINVAL, "--max-memory: '%s' is not a size like 24GiB", s);
        return PP_OK;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        char *end;
        long st = colon ? strtol(tok, &end, 10) : -1;
        if (!colon || end != colon || st < 0 || st >= PP_MAX_SPLITS)
            return PP_FAIL(err, PP_EINVAL, "--max-memory: '%s' is not STAGE:SIZE", tok);
        if (o->n_caps == PP_MAX_SPLITS) return PP_FAIL(err, PP_EINVAL, "--max-memory: too many caps");
        size_t b;
        if (!parse_size(colon + 1, &b))
            return PP_FAIL(err, PP_EINVAL, "--max-memory: '%s' is not a size like 24GiB", colon + 1);
        o->cap_stage[o->n_caps] = (int)st;
        o->cap_bytes[o->n_caps++] = b;
    }
    return PP_OK;
}

/* "dnnl", "cuda:1": a backend name and an optional device index. */
static bool parse_place(const char *s, pp_place *pl) {
    const char *colon = strchr(s, ':');
    size_t len = colon ? (size_t)(colon - s) : strlen(s);
    if (len == 0 || len >= sizeof pl->backend) return false;
    for (size_t k = 0; k < len; k++)
        if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= '0' && s[k] <= '9') || s[k] == '-' || s[k] == '_'))
            return false;
    memcpy(pl->backend, s, len);
    pl->backend[len] = 0;
    pl->device = -1;
    if (!colon) return true;
    double d;
    if (!parse_double(colon + 1, 0, 1 << 20, &d) || d != (int)d) return false;
    pl->device = (int)d;
    return true;
}

static pp_status parse_placement(const char *v, pp_compile_opts *o, pp_err *err) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long st = strtol(tok, &end, 10);
        const bool numbered = end != tok && *end == ':';
        pp_place pl;
        if (!parse_place(numbered ? end + 1 : tok, &pl) || (numbered && (st < 0 || st > PP_MAX_SPLITS)))
            return PP_FAIL(err, PP_EINVAL, "--placement: '%s' is not BACKEND[:DEVICE] or STAGE:BACKEND[:DEVICE]", tok);
        if (strcmp(pl.backend, "cpu") && !pp_backend_kind_of(pl.backend)) {
            char names[128];
            pp_backend_kind_names(names, sizeof names);
            const char *like = pp_backend_suggest(pl.backend);
            return PP_FAIL(err, PP_EINVAL, "--placement: no backend is called '%s' (there are %s, and cpu: the best "
                           "CPU backend pprt has)%s%s%s", pl.backend, names, like ? "; did you mean '" : "",
                           like ? like : "", like ? "'?" : "");
        }
        if (numbered) o->place[st] = pl;
        else o->place_all = pl;
    }
    return PP_OK;
}

/* --gflops and its kin: X for every stage, or STAGE:X,... */
static pp_status parse_figure(const char *a, const char *v, pp_compile_opts *o, pp_err *err) {
    const int which = a[2] == 'g' ? 0 : a[2] == 'm' ? 1 : 2;
    double d;
    if (v && !strchr(v, ':')) {
        if (!parse_double(v, 1e-6, 1e9, &d))
            return PP_FAIL(err, PP_EINVAL, "%s needs a positive number, got '%s'", a, v);
        double *f[3] = {&o->target.gflops, &o->target.mem_gbps, &o->target.link_gbps};
        *f[which] = d;
        o->target_set |= 1u << which;
        return PP_OK;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    if (!v || !*v) return PP_FAIL(err, PP_EINVAL, "%s needs a positive number or STAGE:X,...", a);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long st = strtol(tok, &end, 10);
        if (end == tok || *end != ':' || st < 0 || st > PP_MAX_SPLITS || !parse_double(end + 1, 1e-6, 1e9, &d))
            return PP_FAIL(err, PP_EINVAL, "%s: '%s' is not STAGE:X with X > 0", a, tok);
        double *f[3] = {&o->stage_target[st].gflops, &o->stage_target[st].mem_gbps, &o->stage_target[st].link_gbps};
        *f[which] = d;
        o->stage_set[st] |= (unsigned char)(1u << which);
    }
    return PP_OK;
}

void pp_compile_opts_free(pp_compile_opts *o) {
    for (int k = 0; k < o->n_split_at; k++) free((char *)o->split_at[k]);
    o->n_split_at = 0;
    for (int k = 0; k < o->train.n_freeze; k++) free((char *)o->train.freeze[k]);
    o->train.n_freeze = 0;
}


/* ---- setters: what a row does beyond storing its value ------------------------------ */

static pp_status set_policy(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_compile_opts *o = base;
    if (!pp_policy_parse(v, &o->policy))
        return PP_FAIL(err, PP_EINVAL, "--policy: unknown policy '%s' (auto, uniform, params, flops, memory, custom)", v);
    return PP_OK;
}

static pp_status set_split_at(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_compile_opts *o = base;
    const int had = o->n_split_at;
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && o->n_split_at == PP_MAX_SPLITS) /* (the points past the last were dropped without a word) */
            return PP_FAIL(err, PP_EINVAL, "--split-at: more than %d split points", PP_MAX_SPLITS);
        if (len && !(o->split_at[o->n_split_at++] = strndup(p, len))) {
            o->n_split_at--;
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        p += len + (e ? 1 : 0);
    }
    if (o->n_split_at == had) /* "," or ",,": every item empty */
        return PP_FAIL(err, PP_EINVAL, "--split-at '%s' names no module (give module paths: layer3,layer4.1)", v);
    o->policy = PP_POLICY_CUSTOM;
    return PP_OK;
}

static pp_status set_custom(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)v, (void)err;
    ((pp_compile_opts *)base)->policy = PP_POLICY_CUSTOM;
    return PP_OK;
}

static pp_status set_profile(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_compile_opts *o = base;
    if (o->n_profiles == PP_MAX_PROFILES) return PP_FAIL(err, PP_EINVAL, "at most %d --profile files", PP_MAX_PROFILES);
    o->profiles[o->n_profiles++] = v;
    return PP_OK;
}

static pp_status set_caps(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    return parse_caps(v, base, err);
}

static pp_status set_reserve(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    if (!parse_size(v, &((pp_compile_opts *)base)->reserve))
        return PP_FAIL(err, PP_EINVAL, "--reserve: '%s' is not a size like 512MiB", v);
    ((pp_compile_opts *)base)->reserve_set = true;
    return PP_OK;
}

static pp_status set_figure(void *base, const char *name, const char *v, pp_err *err) {
    return parse_figure(name, v, base, err);
}

static pp_status set_placement(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    return parse_placement(v, base, err);
}

static pp_status set_disabled(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_compile_opts *o = base;
    if (o->n_disabled == 16) return PP_FAIL(err, PP_EINVAL, "at most 16 --disable-pass options");
    o->disabled[o->n_disabled++] = v;
    return PP_OK;
}

static pp_status set_loss(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    return pp_loss_parse(v, &((pp_compile_opts *)base)->train, err);
}

static pp_status set_freeze(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_train_opts *t = &((pp_compile_opts *)base)->train;
    for (const char *p = v; *p;) {
        const char *c = strchr(p, ',');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (t->n_freeze == PP_MAX_FREEZE) return PP_FAIL(err, PP_EINVAL, "at most %d --freeze patterns", PP_MAX_FREEZE);
        if (!n) return PP_FAIL(err, PP_EINVAL, "--freeze %s: an empty pattern", v);
        char *s = strndup(p, n);
        if (!s) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        t->freeze[t->n_freeze++] = s;
        p += n + (c != NULL);
    }
    return PP_OK;
}

static pp_status set_recompute(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_train_opts *t = &((pp_compile_opts *)base)->train;
    t->recompute_all = false, t->n_recompute = 0;
    if (!strcmp(v, "all")) {
        t->recompute_all = true;
        return PP_OK;
    }
    for (const char *p = v; *p;) {
        char *end;
        errno = 0;
        const long d = strtol(p, &end, 10);
        if (errno || end == p || d < 0 || d >= PP_MAX_RECOMPUTE || (*end && *end != ','))
            return PP_FAIL(err, PP_EINVAL, "--recompute %s: expected 'all' or device numbers 0..%d, comma-separated",
                           v, PP_MAX_RECOMPUTE - 1);
        bool seen = false;
        for (int k = 0; k < t->n_recompute; k++) seen = seen || t->recompute[k] == (int)d;
        if (seen) return PP_FAIL(err, PP_EINVAL, "--recompute %s: device %ld named twice", v, d);
        t->recompute[t->n_recompute++] = (int)d;
        p = *end ? end + 1 : end;
        if (*end && !*p) return PP_FAIL(err, PP_EINVAL, "--recompute %s: a trailing comma", v);
    }
    return PP_OK;
}

static void text_recompute(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_train_opts *r = &((const pp_compile_opts *)base)->train;
    if (r->recompute_all) pp_opt_add(t, " --recompute all");
    for (int k = 0; k < r->n_recompute; k++) pp_opt_add(t, "%s%d", k ? "," : " --recompute ", r->recompute[k]);
}

static void text_loss(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    static const char *const kind[] = {"", "", "cross-entropy:", "mse:"};
    if (o->train.loss) pp_opt_add(t, " --loss %s%s", kind[o->train.loss], o->train.loss_output);
}

static void text_freeze(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    for (int k = 0; k < o->train.n_freeze; k++) pp_opt_add(t, "%s%s", k ? "," : " --freeze ", o->train.freeze[k]);
}

static pp_status set_batch_sizes(void *base, const char *name, const char *v, pp_err *err) {
    (void)name;
    pp_compile_opts *o = base;
    o->n_batch_sizes = 0;
    for (const char *p = v; *p;) {
        char *end;
        errno = 0;
        long long b = strtoll(p, &end, 10);
        if (errno || end == p || b < 1 || b > (1 << 20) || (*end && *end != ',') ||
            o->n_batch_sizes == PP_MAX_BATCH_SIZES) {
            o->n_batch_sizes = 0;
            break;
        }
        o->batch_sizes[o->n_batch_sizes++] = b;
        p = *end ? end + 1 : end;
    }
    if (o->n_batch_sizes == 0)
        return PP_FAIL(err, PP_EINVAL, "--batch-sizes needs up to %d sizes 1..2^20 like 1,2,4,8, got '%s'",
                       PP_MAX_BATCH_SIZES, v);
    return PP_OK;
}

/* ---- the recorded text of the rows whose value is more than a number ---------------- */

static void text_policy(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    pp_opt_add(t, " --policy %s", pp_policy_name(((const pp_compile_opts *)base)->policy));
}

static void text_split_at(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    for (int s = 0; s < o->n_split_at; s++) pp_opt_add(t, "%s%s", s ? "," : " --split-at ", o->split_at[s]);
}

static void text_profile(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    for (int f = 0; f < ((const pp_compile_opts *)base)->n_profiles; f++) pp_opt_add(t, " --profile (file)");
}

static void text_caps(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    if (o->cap_all) pp_opt_add(t, " --max-memory %zu", o->cap_all);
    for (int c = 0; c < o->n_caps; c++)
        pp_opt_add(t, "%s%d:%zu", c ? "," : " --max-memory ", o->cap_stage[c], o->cap_bytes[c]);
}

static void text_reserve(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    if (o->reserve) pp_opt_add(t, " --reserve %zu", o->reserve);
}

/* Only the figures given: a default left out stays the default of each
 * stage's kind of device when the text is compiled again. */
static void text_figure(const pp_compile_opts *o, int f, pp_opt_out *t) {
    static const char *const fig[3] = {"--gflops", "--mem-gbps", "--link-gbps"};
    const double all[3] = {o->target.gflops, o->target.mem_gbps, o->target.link_gbps};
    char n[40];
    if (o->target_set & (1u << f)) pp_opt_add(t, " %s %s", fig[f], pp_opt_num(all[f], n, sizeof n));
    for (int s = 0, first = 1; s <= PP_MAX_SPLITS; s++)
        if (o->stage_set[s] & (1u << f)) {
            const pp_target *st = &o->stage_target[s];
            const double v[3] = {st->gflops, st->mem_gbps, st->link_gbps};
            pp_opt_add(t, "%s%d:%s", first ? (f == 0 ? " --gflops " : f == 1 ? " --mem-gbps " : " --link-gbps ") : ",",
                       s, pp_opt_num(v[f], n, sizeof n));
            first = 0;
        }
}
static void text_gflops(const void *base, bool agree, pp_opt_out *t) { (void)agree, text_figure(base, 0, t); }
static void text_mem_gbps(const void *base, bool agree, pp_opt_out *t) { (void)agree, text_figure(base, 1, t); }
static void text_link_gbps(const void *base, bool agree, pp_opt_out *t) { (void)agree, text_figure(base, 2, t); }

static void text_placement(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    if (o->place_all.backend[0]) {
        pp_opt_add(t, " --placement %s", o->place_all.backend);
        if (o->place_all.device >= 0) pp_opt_add(t, ":%d", o->place_all.device);
    }
    for (int s = 0, first = 1; s <= PP_MAX_SPLITS; s++)
        if (o->place[s].backend[0]) {
            pp_opt_add(t, "%s%d:%s", first ? " --placement " : ",", s, o->place[s].backend);
            if (o->place[s].device >= 0) pp_opt_add(t, ":%d", o->place[s].device);
            first = 0;
        }
}

/* The hosts: --net-gbps and --replicas matter to the split only through
 * them (the replicas through the placement of the cuts). */
static void text_hosts(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    char n[40];
    if (o->target.devices_per_host)
        pp_opt_add(t, " --devices-per-host %d --net-gbps %s --replicas %d", o->target.devices_per_host,
                   pp_opt_num(o->target.net_gbps, n, sizeof n), o->replicas);
}

static void text_disabled(const void *base, bool agree, pp_opt_out *t) {
    (void)agree;
    const pp_compile_opts *o = base;
    for (int d = 0; d < o->n_disabled; d++) pp_opt_add(t, " --disable-pass %s", o->disabled[d]);
}

/* ---- the table ---------------------------------------------------------------------- */

#define F(field) offsetof(pp_compile_opts, field)
#define NF PP_OPT_NOFIELD
_Static_assert(PP_MAX_SPLITS + 1 == 257, "-pp's range in its row");
/* The recorded rows (PP_OPT_RECORD) come first, in the order the plan's
 * options line has always had them. */
/* columns (pp_opt, ir/args.h): names, kind, value in --help, field, lo, hi, words, what a value must
 * be, default, help, PP_OPT_* flags, main order, --help section, setter, text */
static const pp_opt rows[] = {
    {"-pp|--pp", PP_OPT_INT, "N", F(n_stages), 1, PP_MAX_SPLITS + 1, NULL, "a stage count 1..257", "1",
     "pipeline stages", PP_OPT_RECORD | PP_OPT_ALWAYS, 1, NULL, NULL, NULL},
    {"--policy", PP_OPT_CUSTOM, "NAME", NF, 0, 0, NULL, "a policy", "auto", "auto (least bottleneck time under "
     "the memory caps), uniform, params, flops, memory, custom", PP_OPT_RECORD, 0, "splitting", set_policy,
     text_policy},
    {"--split-at", PP_OPT_CUSTOM, "P[,P..]", NF, 0, 0, NULL, "module paths", NULL,
     "cut before each named module (e.g. layer3 or layer1.2)", PP_OPT_RECORD, 0, NULL, set_split_at, text_split_at},
    {"--exec-seq", PP_OPT_STR, "FILE", F(exec_seq), 0, 0, NULL, "a file", NULL,
     "ColossalAI-style list: module names, SPLIT_NODE lines as cuts (recorded as '(file)')",
     PP_OPT_RECORD | PP_OPT_PATH, 0, NULL, set_custom, NULL},
    {"--profile", PP_OPT_CUSTOM, "FILE", NF, 0, 0, NULL, "a file from pprt --profile", NULL,
     "measured op times from pprt --profile instead of the roofline; repeat it with profiles of other micro-batch "
     "sizes (one device kind): the nearest one is used (recorded as '(file)')", PP_OPT_RECORD, 0, NULL, set_profile,
     text_profile},
    {"--max-memory", PP_OPT_CUSTOM, "CAPS", NF, 0, 0, NULL, "SIZE or STAGE:SIZE,...", NULL,
     "SIZE for every stage, or STAGE:SIZE,... (e.g. 0:10GiB,1:24GiB)", PP_OPT_RECORD, 0, NULL, set_caps, text_caps},
    {"--reserve", PP_OPT_CUSTOM, "SIZE", NF, 0, 0, NULL, "a size like 512MiB", "0",
     "memory each device holds besides the plan (runtime, data): the plan gets each cap less this", PP_OPT_RECORD, 0,
     NULL, set_reserve, text_reserve},
    {"--gflops", PP_OPT_CUSTOM, "X", NF, 0, 0, NULL, "a positive number or STAGE:X,...", "100; a GPU's 20000",
     "target compute, GFLOP/s per stage, or STAGE:X,... per stage (also for the next two)", PP_OPT_RECORD, 0, NULL,
     set_figure, text_gflops},
    {"--mem-gbps", PP_OPT_CUSTOM, "X", NF, 0, 0, NULL, "a positive number or STAGE:X,...", "10; a GPU's 1500",
     "target memory bandwidth, GB/s", PP_OPT_RECORD, 0, NULL, set_figure, text_mem_gbps},
    {"--link-gbps", PP_OPT_CUSTOM, "X", NF, 0, 0, NULL, "a positive number or STAGE:X,...", "10; from a GPU 20",
     "stage-to-stage bandwidth within a host, GB/s", PP_OPT_RECORD, 0, NULL, set_figure, text_link_gbps},
    {"--depth", PP_OPT_INT, "N", F(depth), 1, 1 << 20, NULL, "a count 1..2^20", "2",
     "micro-batches in flight per boundary, for memory", PP_OPT_RECORD | PP_OPT_ALWAYS, 0, NULL, NULL, NULL},
    {"--placement", PP_OPT_CUSTOM, "P", NF, 0, 0, NULL, "BACKEND[:DEVICE] or STAGE:BACKEND[:DEVICE],...", NULL,
     "where stages run: BACKEND[:DEVICE] for all, or STAGE:BACKEND[:DEVICE],... (e.g. 0:dnnl,1:cuda:0); pprt "
     "--backend overrides it", PP_OPT_RECORD, 0, NULL, set_placement, text_placement},
    {"--devices-per-host", PP_OPT_INT, "K", F(target.devices_per_host), 1, 4096, NULL, "a count 1..4096",
     "all on one", "devices on each host; cuts between hosts cost --net-gbps", PP_OPT_RECORD, 0, NULL, NULL,
     text_hosts},
    {"--net-gbps", PP_OPT_NUM, "X", F(target.net_gbps), 1e-6, 1e9, NULL, "a positive number", "1.25",
     "stage-to-stage bandwidth between hosts, GB/s (recorded with --devices-per-host)", 0, 0, NULL, NULL, NULL},
    {"--replicas", PP_OPT_INT, "R", F(replicas), 1, 4096, NULL, "a count 1..4096", "1",
     "data-parallel copies the plan will run as (pprt --replicas), for the placement of the cuts (recorded with "
     "--devices-per-host)", 0, 0, NULL, NULL, NULL},
    {"--disable-pass", PP_OPT_CUSTOM, "P", NF, 0, 0, NULL, "a pass name (fold, simplify, fuse, remake)", NULL,
     "skip fold, simplify or fuse; remake: --train --precision's devices do not make their own copies and "
     "roundings of half values from an earlier device (the cuts send them)", PP_OPT_RECORD, 0, NULL, set_disabled,
     text_disabled},
    {"--allow-batch-mixing", PP_OPT_FLAG, NULL, F(allow_batch_mixing), 0, 0, NULL, NULL, NULL,
     "compile even where the model mixes samples across the batch axis (a Softmax or a reduction over it, ...): "
     "the plan is then right only when run on exactly -b samples at once", PP_OPT_RECORD, 0, NULL, NULL, NULL},
    {"--train", PP_OPT_FLAG, NULL, F(train_on), 0, 0, NULL, NULL, NULL,
     "compile the gradient of --loss: a plan whose outputs are the loss and each weight's gradient "
     "(docs/training.md)", PP_OPT_RECORD, 0, "training", NULL, NULL},
    {"--loss", PP_OPT_CUSTOM, "SPEC", NF, 0, 0, NULL, "cross-entropy:OUTPUT, mse:OUTPUT or OUTPUT", NULL,
     "the loss --train differentiates: cross-entropy over OUTPUT's logits and int64 'labels', mean squared "
     "error against a 'target', or OUTPUT itself when it is a scalar", PP_OPT_RECORD, 0, NULL, set_loss, text_loss},
    {"--freeze", PP_OPT_CUSTOM, "P[,P..]", NF, 0, 0, NULL, "module paths, weight names or patterns", NULL,
     "weights --train keeps fixed: under a module path (as --split-at takes it), by name, or matching a "
     "pattern like 'layer1.*'", PP_OPT_RECORD, 0, NULL, set_freeze, text_freeze},
    {"--recompute", PP_OPT_CUSTOM, "all|D[,D..]", NF, 0, 0, NULL, "'all' or device numbers", NULL,
     "with --train: these devices' backward stages compute their forward again from what the device received, "
     "keeping that instead of every activation (less memory per micro-batch in flight, a second forward)",
     PP_OPT_RECORD, 0, NULL, set_recompute, text_recompute},
    {"--schedule", PP_OPT_WORD, "S", F(train.schedule), 0, 0, "1f1b|gpipe|zb-h1", NULL, "1f1b",
     "with --train: the schedule the plan is for; zb-h1 splits each device's backward into the input gradients "
     "(on the chain of stages) and the weight gradients (a stage of their own, which pprt --schedule zb-h1 defers "
     "into the pipeline's idle time); 1f1b and gpipe compile the same plan", PP_OPT_RECORD, 0, NULL, NULL, NULL},
    {"--precision", PP_OPT_WORD, "P", F(train.optim.precision), 0, 0, "f32|bf16|fp16", NULL, "f32",
     "with --train: mixed precision, autocast's policy decided in the graph (docs/training.md): convolutions and "
     "products and their gradients in bf16 or fp16 (computed in f32, rounded to nearest even), f32 master weights, "
     "norms, softmax and the loss in f32; fp16 needs --loss-scale (dynamic, as PyTorch's GradScaler). Without "
     "--train: half storage for inference (docs/usage.md, \"Half precision for inference\"): Conv, MatMul and Gemm "
     "with their weights converted at compile time, and the values between them where their readers have half "
     "kernels (elementwise, views, Softmax, the norms, the pools: f32 inside), stored in bf16 or fp16; the model's "
     "inputs and outputs stay f32", PP_OPT_RECORD,
     0, NULL, NULL, NULL},
    {"--memory-model", PP_OPT_WORD, "M", F(train.memory_model), 0, 0, "host|cuda", NULL, "host",
     "with --train: what --report, --max-batch and --search count for a device: pprt's process (host) or a GPU's "
     "memory at --precision (cuda; --reserve defaults to 1.5GiB for the CUDA context and the framework)", 0, 0, NULL,
     NULL, NULL},
    {"--zero", PP_OPT_WORD, "Z", F(train.zero), 0, 0, "0|1", NULL, "0",
     "with --memory-model cuda: 1 divides the optimizer state (and half precision's f32 master weights) over the "
     "data-parallel replicas (ZeRO-1), in --search's dp rows and at --replicas", 0, 0, NULL, NULL, NULL},
    {"--micro-batches", PP_OPT_INT, "M", F(micro_batches), 1, 1 << 20, NULL, "a count 1..2^20", "8",
     "micro-batches per run, for the bubble estimate", 0, 0, NULL, NULL, NULL},
    {"--devices", PP_OPT_INT, "N", F(devices), 1, 4096, NULL, "a count 1..4096", NULL,
     "devices for --search: pp stages x N/pp replicas", 0, 0, "device budget", NULL, NULL},
    {"--search", PP_OPT_FLAG, NULL, F(search), 0, 0, NULL, NULL, NULL,
     "try every pipeline depth 1..N (replicas N/pp) and micro-batch size: table of estimated throughput and memory, "
     "best plan to -o", 0, 0, NULL, NULL, NULL},
    {"--batch-sizes", PP_OPT_CUSTOM, "B,..", NF, 0, 0, NULL, "sizes like 1,2,4,8", "1,2,4,..,64",
     "micro-batch sizes to try", 0, 0, NULL, set_batch_sizes, NULL},
    {"--samples", PP_OPT_I64, "S", F(samples), 1, 1e12, NULL, "a count 1..1e12", "256",
     "samples per run: micro-batch count and bubble", 0, 0, NULL, NULL, NULL},
    {"--max-batch", PP_OPT_FLAG, NULL, F(max_batch), 0, 0, NULL, NULL, NULL,
     "the largest micro-batch that fits -pp N under --max-memory", 0, 0, NULL, NULL, NULL},
    {"--dump-ir", PP_OPT_STR, "PASS", F(dump_ir), 0, 0, NULL, NULL, NULL,
     "print the IR after the last pass, after PASS (import, infer, autodiff with --train, simplify, fuse, partition) or "
     "after each (all); "
     "see docs/ir.md", PP_OPT_OPTVAL, 0, "debugging", NULL, NULL},
    {"--dump-dot", PP_OPT_STR, "FILE", F(dump_dot), 0, 0, NULL, "a file name", NULL,
     "Graphviz DOT: stages as clusters, boundary tensors marked", 0, 0, NULL, NULL, NULL},
};
#undef F
#undef NF

const pp_opt *pp_compile_opts_table(int *n) {
    *n = (int)(sizeof rows / sizeof rows[0]);
    return rows;
}
