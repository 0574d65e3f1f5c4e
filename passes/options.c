/* options.c: the command-line options that steer the passes (pipeline depth,
 * policy, custom splits, memory caps, target figures), parsed here so that
 * tools/ppcc.c stays a thin main, plus their canonical text for the plan's
 * provenance (no file paths: the same model and options give the same plan
 * wherever they are compiled). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

const char *pp_compile_opts_usage(void) {
    return "  --policy NAME       auto (default: least bottleneck time under the memory caps),\n"
           "                      uniform, params, flops, memory, custom\n"
           "  --split-at P[,P..]  cut before each named module (e.g. layer3 or layer1.2)\n"
           "  --exec-seq FILE     ColossalAI-style list: module names, SPLIT_NODE lines as cuts\n"
           "  --max-memory CAPS   SIZE for every stage, or STAGE:SIZE,... (e.g. 0:10GiB,1:24GiB)\n"
           "  --reserve SIZE      memory each device holds besides the plan (runtime, data):\n"
           "                      the plan gets each cap less this (default 0)\n"
           "  --placement P       where stages run: BACKEND[:DEVICE] for all, or STAGE:BACKEND[:DEVICE],...\n"
           "                      (e.g. 0:dnnl,1:cuda:0); pprt --backend overrides it\n"
           "  --gflops X          target compute, GFLOP/s per stage (default 100; a GPU's 20000),\n"
           "                      or STAGE:X,... per stage (also for the next two)\n"
           "  --mem-gbps X        target memory bandwidth, GB/s (default 10; a GPU's 1500)\n"
           "  --link-gbps X       stage-to-stage bandwidth within a host, GB/s (default 10; from a GPU 20)\n"
           "  --net-gbps X        stage-to-stage bandwidth between hosts, GB/s (default 1.25)\n"
           "  --devices-per-host K  devices on each host (default: all on one); cuts between\n"
           "                      hosts cost --net-gbps\n"
           "  --replicas R        data-parallel copies the plan will run as (pprt --replicas),\n"
           "                      for the placement of the cuts (default 1)\n"
           "  --profile FILE      measured op times from pprt --profile instead of the roofline;\n"
           "                      repeat it with profiles of other micro-batch sizes (one device\n"
           "                      kind): the nearest one is used\n"
           "  --depth N           micro-batches in flight per boundary, for memory (default 2)\n"
           "  --micro-batches M   micro-batches per run, for the bubble estimate (default 8)\n"
           "  --allow-batch-mixing\n"
           "                      compile even where the model mixes samples across the batch\n"
           "                      axis (a Softmax or a reduction over it, ...): the plan is then\n"
           "                      right only when run on exactly -b samples at once\n"
           "device budget:\n"
           "  --devices N         devices for --search: pp stages x N/pp replicas\n"
           "  --search            try every pipeline depth 1..N (replicas N/pp) and micro-batch\n"
           "                      size: table of estimated throughput and memory, best plan to -o\n"
           "  --batch-sizes B,..  micro-batch sizes to try (default 1,2,4,..,64)\n"
           "  --samples S         samples per run: micro-batch count and bubble (default 256)\n"
           "  --max-batch         the largest micro-batch that fits -pp N under --max-memory\n"
           "debugging:\n"
           "  --dump-ir[=PASS]    print the IR after the last pass, after PASS (import, infer,\n"
           "                      simplify, fuse, partition) or after each (all); see docs/ir.md\n"
           "  --dump-dot FILE     Graphviz DOT: stages as clusters, boundary tensors marked\n"
           "  --disable-pass P    skip fold, simplify or fuse\n";
}

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

const char *const *pp_compile_opts_names(void) {
    static const char *const names[] = {
        "-pp", "--pp", "--policy", "--split-at", "--exec-seq", "--profile", "--search", "--max-batch", "--devices",
        "--devices-per-host", "--replicas", "--samples", "--batch-sizes", "--reserve", "--max-memory", "--gflops",
        "--mem-gbps", "--link-gbps", "--net-gbps", "--placement", "--depth", "--micro-batches",
        "--allow-batch-mixing", "--dump-ir", "--dump-dot", "--disable-pass", NULL};
    return names;
}

int pp_compile_opts_arg(int argc, char **argv, int *i, pp_compile_opts *o, pp_err *err) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    if (!strcmp(a, "-pp") || !strcmp(a, "--pp")) {
        if (!parse_double(v, 1, PP_MAX_SPLITS + 1, &d) || d != (int)d) {
            PP_FAIL(err, PP_EINVAL, "%s needs a stage count 1..%d, got '%s'", a, PP_MAX_SPLITS + 1, v ? v : "");
            return -1;
        }
        o->n_stages = (int)d;
    } else if (!strcmp(a, "--policy")) {
        if (!v || !pp_policy_parse(v, &o->policy)) {
            PP_FAIL(err, PP_EINVAL, "--policy: unknown policy '%s' (auto, uniform, params, flops, "
                    "memory, custom)", v ? v : "");
            return -1;
        }
    } else if (!strcmp(a, "--split-at")) {
        if (!v || !*v) {
            PP_FAIL(err, PP_EINVAL, "--split-at needs module paths");
            return -1;
        }
        for (const char *p = v; *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len && o->n_split_at < PP_MAX_SPLITS) o->split_at[o->n_split_at++] = strndup(p, len);
            p += len + (e ? 1 : 0);
        }
        o->policy = PP_POLICY_CUSTOM;
    } else if (!strcmp(a, "--exec-seq")) {
        if (!v) {
            PP_FAIL(err, PP_EINVAL, "--exec-seq needs a file");
            return -1;
        }
        o->exec_seq = v;
        o->policy = PP_POLICY_CUSTOM;
    } else if (!strcmp(a, "--profile")) {
        if (!v) {
            PP_FAIL(err, PP_EINVAL, "--profile needs a file from pprt --profile");
            return -1;
        }
        if (o->n_profiles == PP_MAX_PROFILES) {
            PP_FAIL(err, PP_EINVAL, "at most %d --profile files", PP_MAX_PROFILES);
            return -1;
        }
        o->profiles[o->n_profiles++] = v;
    } else if (!strcmp(a, "--search") || !strcmp(a, "--max-batch")) {
        if (a[2] == 's') o->search = true;
        else o->max_batch = true;
        return 1; /* no value */
    } else if (!strcmp(a, "--devices") || !strcmp(a, "--devices-per-host") || !strcmp(a, "--replicas")) {
        if (!parse_double(v, 1, 4096, &d) || d != (int)d) {
            PP_FAIL(err, PP_EINVAL, "%s needs a count 1..4096, got '%s'", a, v ? v : "");
            return -1;
        }
        if (!strcmp(a, "--devices")) o->devices = (int)d;
        else if (a[2] == 'd') o->target.devices_per_host = (int)d;
        else o->replicas = (int)d;
    } else if (!strcmp(a, "--samples")) {
        if (!parse_double(v, 1, 1e12, &d) || d != (double)(int64_t)d) {
            PP_FAIL(err, PP_EINVAL, "--samples needs a count >= 1, got '%s'", v ? v : "");
            return -1;
        }
        o->samples = (int64_t)d;
    } else if (!strcmp(a, "--batch-sizes")) {
        o->n_batch_sizes = 0;
        for (const char *p = v ? v : ""; *p;) {
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
        if (o->n_batch_sizes == 0) {
            PP_FAIL(err, PP_EINVAL, "--batch-sizes needs up to %d sizes 1..2^20 like 1,2,4,8, got '%s'",
                    PP_MAX_BATCH_SIZES, v ? v : "");
            return -1;
        }
    } else if (!strcmp(a, "--reserve")) {
        if (!v || !parse_size(v, &o->reserve)) {
            PP_FAIL(err, PP_EINVAL, "--reserve: '%s' is not a size like 512MiB", v ? v : "");
            return -1;
        }
    } else if (!strcmp(a, "--max-memory")) {
        if (!v) {
            PP_FAIL(err, PP_EINVAL, "--max-memory needs SIZE or STAGE:SIZE,...");
            return -1;
        }
        if (parse_caps(v, o, err) != PP_OK) return -1;
    } else if (!strcmp(a, "--gflops") || !strcmp(a, "--mem-gbps") || !strcmp(a, "--link-gbps")) {
        if (parse_figure(a, v, o, err) != PP_OK) return -1;
    } else if (!strcmp(a, "--net-gbps")) {
        if (!parse_double(v, 1e-6, 1e9, &d)) {
            PP_FAIL(err, PP_EINVAL, "%s needs a positive number, got '%s'", a, v ? v : "");
            return -1;
        }
        o->target.net_gbps = d;
    } else if (!strcmp(a, "--placement")) {
        if (!v || parse_placement(v, o, err) != PP_OK) {
            if (!v) PP_FAIL(err, PP_EINVAL, "--placement needs BACKEND[:DEVICE] or STAGE:BACKEND[:DEVICE],...");
            return -1;
        }
    } else if (!strcmp(a, "--depth") || !strcmp(a, "--micro-batches")) {
        if (!parse_double(v, 1, 1 << 20, &d) || d != (int)d) {
            PP_FAIL(err, PP_EINVAL, "%s needs a count >= 1, got '%s'", a, v ? v : "");
            return -1;
        }
        if (a[2] == 'd') o->depth = (int)d;
        else o->micro_batches = (int)d;
    } else if (!strcmp(a, "--allow-batch-mixing")) {
        o->allow_batch_mixing = true;
        return 1; /* no value */
    } else if (!strcmp(a, "--dump-ir") || !strncmp(a, "--dump-ir=", 10)) {
        o->dump_ir = a[9] == '=' ? a + 10 : "";
        return 1; /* no separate value */
    } else if (!strcmp(a, "--dump-dot")) {
        if (!v) {
            PP_FAIL(err, PP_EINVAL, "--dump-dot needs a file name");
            return -1;
        }
        o->dump_dot = v;
    } else if (!strcmp(a, "--disable-pass")) {
        if (!v || o->n_disabled == 16) {
            PP_FAIL(err, PP_EINVAL, "--disable-pass needs a pass name (fold, simplify, fuse)");
            return -1;
        }
        o->disabled[o->n_disabled++] = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

void pp_compile_opts_free(pp_compile_opts *o) {
    for (int k = 0; k < o->n_split_at; k++) free((char *)o->split_at[k]);
    o->n_split_at = 0;
}

/* x as the shortest text that reads back as x (15 digits, else 17). */
static const char *num(double x, char *buf, size_t n) {
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
    return buf;
}

void pp_compile_opts_text(const pp_compile_opts *o, char *buf, size_t n) {
    size_t k = 0;
    char t[40];
#define ADD(...) \
    if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__)
    ADD("-pp %d --policy %s", o->n_stages, pp_policy_name(o->policy));
    for (int s = 0; s < o->n_split_at; s++) ADD("%s%s", s ? "," : " --split-at ", o->split_at[s]);
    if (o->exec_seq) ADD(" --exec-seq (file)");
    for (int f = 0; f < o->n_profiles; f++) ADD(" --profile (file)");
    if (o->cap_all) ADD(" --max-memory %zu", o->cap_all);
    for (int c = 0; c < o->n_caps; c++) ADD("%s%d:%zu", c ? "," : " --max-memory ", o->cap_stage[c], o->cap_bytes[c]);
    if (o->reserve) ADD(" --reserve %zu", o->reserve);
    /* only the figures given: a default left out stays the default of each
     * stage's kind of device when the text is compiled again */
    static const char *const fig[3] = {"--gflops", "--mem-gbps", "--link-gbps"};
    for (int f = 0; f < 3; f++) {
        const double all[3] = {o->target.gflops, o->target.mem_gbps, o->target.link_gbps};
        if (o->target_set & (1u << f)) ADD(" %s %s", fig[f], num(all[f], t, sizeof t));
        for (int s = 0, first = 1; s <= PP_MAX_SPLITS; s++)
            if (o->stage_set[s] & (1u << f)) {
                const pp_target *st = &o->stage_target[s];
                const double v[3] = {st->gflops, st->mem_gbps, st->link_gbps};
                if (first) {
                    ADD(" %s ", fig[f]);
                } else {
                    ADD(",");
                }
                ADD("%d:%s", s, num(v[f], t, sizeof t));
                first = 0;
            }
    }
    ADD(" --depth %d", o->depth);
    if (o->place_all.backend[0]) {
        ADD(" --placement %s", o->place_all.backend);
        if (o->place_all.device >= 0) ADD(":%d", o->place_all.device);
    }
    for (int s = 0, first = 1; s <= PP_MAX_SPLITS; s++)
        if (o->place[s].backend[0]) {
            ADD("%s%d:%s", first ? " --placement " : ",", s, o->place[s].backend);
            if (o->place[s].device >= 0) ADD(":%d", o->place[s].device);
            first = 0;
        }
    /* the replicas matter to the split only through the placement */
    if (o->target.devices_per_host) {
        ADD(" --devices-per-host %d --net-gbps %s --replicas %d", o->target.devices_per_host,
            num(o->target.net_gbps, t, sizeof t), o->replicas);
    }
    for (int d = 0; d < o->n_disabled; d++) ADD(" --disable-pass %s", o->disabled[d]);
    if (o->allow_batch_mixing) ADD(" --allow-batch-mixing");
#undef ADD
    if (k >= n && n) buf[n - 1] = 0;
}
