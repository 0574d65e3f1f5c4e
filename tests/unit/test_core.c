/* test_core.c: unit tests of the core without ONNX files: size arithmetic,
 * .npy round trips, and whole small graphs built in C, split at every pipeline
 * depth, written as plans, reloaded, run, and compared with values computed
 * here by hand. Also: the loader rejects every truncation of a plan and every
 * flipped byte of its header and metadata, and the references of a
 * --ref-weights plan that do not hold. */
#define _GNU_SOURCE /* realpath */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../backend/backend.h"
#include "../../ir/json.h"
#include "../../passes/passes.h"
#include "../../report/report.h"
#include "../../runtime/io.h"
#include "../../runtime/pprt.h"
#include "../../runtime/run.h"
#include "plan.pb-c.h"
#include <xxhash.h>

#include "check.h"

static void test_sizes(void) {
    pp_err e = {0};
    pp_shape big = {.rank = 3, .dim = {1ll << 40, 1ll << 30, 4}};
    int64_t n;
    CHECK(pp_shape_numel(&big, &n, &e) == PP_EINVAL, "overflow not caught");
    pp_shape ok = {.rank = 2, .dim = {1ll << 30, 1ll << 30}};
    size_t b;
    e = (pp_err){0};
    CHECK(pp_shape_nbytes(&ok, PP_F64, &b, &e) == PP_OK && b == (1ull << 63), "2^60 doubles");
    pp_shape neg = {.rank = 1, .dim = {-1}};
    e = (pp_err){0};
    CHECK(pp_shape_numel(&neg, &n, &e) == PP_EINVAL, "negative dim accepted");
}

static void test_npy(void) {
    pp_err e = {0};
    float v[6] = {1, -2, 3.5f, 0, 1e-7f, 42};
    pp_shape sh = {.rank = 2, .dim = {2, 3}};
    CHECK(pprt_npy_write("t_core.npy", PP_F32, &sh, v, &e) == PP_OK, "%s", e.msg);
    pprt_npy a;
    CHECK(pprt_npy_read("t_core.npy", &a, &e) == PP_OK, "%s", e.msg);
    CHECK(a.dtype == PP_F32 && pp_shape_eq(&a.shape, &sh), "shape/type lost");
    CHECK(a.data && memcmp(a.data, v, sizeof v) == 0, "data lost");
    pprt_npy_free(&a);
    pp_shape s1 = {.rank = 1, .dim = {3}};
    int64_t iv[3] = {7, -1, 1ll << 40};
    CHECK(pprt_npy_write("t_core1.npy", PP_I64, &s1, iv, &e) == PP_OK, "%s", e.msg);
    CHECK(pprt_npy_read("t_core1.npy", &a, &e) == PP_OK && a.shape.rank == 1 && a.shape.dim[0] == 3 &&
              memcmp(a.data, iv, sizeof iv) == 0, "rank-1 round trip: %s", e.msg);
    pprt_npy_free(&a);
    /* truncated file is rejected */
    FILE *f = fopen("t_core.npy", "r+b");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fclose(f);
    CHECK(truncate("t_core.npy", len - 1) == 0, "truncate");
    e = (pp_err){0};
    CHECK(pprt_npy_read("t_core.npy", &a, &e) == PP_EINVAL, "truncated npy accepted");
    CHECK(strstr(e.msg, "t_core.npy") != NULL, "message does not name the file: %s", e.msg);
}

/* ---- graphs built by hand ------------------------------------------------------------ */

static int value(pp_graph *g, const char *name) {
    int v;
    pp_err e = {0};
    if (pp_graph_add_value(g, name, &v, &e) != PP_OK) {
        fprintf(stderr, "add_value: %s\n", e.msg);
        exit(1);
    }
    return v;
}

/* A graph of opset 13 at micro-batch `batch` whose one input is x, f32 [2, 4]: x's value. */
static int graph_x24(pp_graph *g, int64_t batch, pp_err *e) {
    pp_graph_init(g);
    g->batch = batch;
    g->opset = 13;
    int x = value(g, "x");
    g->values[x].dtype = PP_F32;
    g->values[x].shape = (pp_shape){2, {2, 4}};
    g->values[x].nbytes = 32;
    pp_graph_add_input(g, x, e);
    return x;
}

static int node(pp_graph *g, pp_op op, const char *name, int a, int b, int out) {
    int n;
    pp_err e = {0};
    int n_in = b >= 0 ? 2 : 1;
    if (pp_graph_add_node(g, op, name, n_in, 1, &n, &e) != PP_OK) exit(1);
    g->nodes[n].in[0] = a;
    if (b >= 0) g->nodes[n].in[1] = b;
    g->nodes[n].out[0] = out;
    return n;
}

/* A chain of `len` ops over x [B,4] with skip connections:
 *   h0 = x; h_{i+1} = Relu(h_i) for odd i, Add(h_i, h_{i-k}) for even i (k = 2 or 3)
 * Output: the last h, plus h1 as a second output (a graph output produced in
 * stage 0 that must travel through every cut). */
static void build_chain(pp_graph *g, int len, int64_t batch, const float *bias) {
    pp_graph_init(g);
    g->batch = batch;
    g->opset = 13;
    int x = value(g, "x");
    g->values[x].dtype = PP_F32;
    g->values[x].shape = (pp_shape){2, {batch, 4}};
    g->values[x].nbytes = (size_t)batch * 16;
    pp_err e = {0};
    pp_graph_add_input(g, x, &e);
    int c = value(g, "bias");
    g->values[c].dtype = PP_F32;
    g->values[c].shape = (pp_shape){1, {4}};
    g->values[c].is_const = true;
    g->values[c].data = bias;
    g->values[c].nbytes = 16;
    int h[64];
    h[0] = x;
    for (int i = 0; i < len; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "h%d", i + 1);
        h[i + 1] = value(g, nm);
        snprintf(nm, sizeof nm, "/n%d", i);
        if (i == 0) node(g, PP_OP_ADD, nm, h[i], c, h[i + 1]);
        else if (i % 2) node(g, PP_OP_RELU, nm, h[i], -1, h[i + 1]);
        else node(g, PP_OP_ADD, nm, h[i], h[i - (i % 3 ? 2 : 3)], h[i + 1]);
    }
    pp_graph_add_output(g, h[len], &e);
    pp_graph_add_output(g, h[1], &e);
}

/* The same computation, directly. */
static void chain_ref(int len, int64_t n, const float *x, const float *bias, float *out, float *out1) {
    float h[64][4];
    for (int64_t s = 0; s < n; s++) {
        memcpy(h[0], x + s * 4, sizeof h[0]);
        for (int i = 0; i < len; i++)
            for (int j = 0; j < 4; j++) {
                if (i == 0) h[i + 1][j] = h[i][j] + bias[j];
                else if (i % 2) h[i + 1][j] = h[i][j] > 0 ? h[i][j] : 0;
                else h[i + 1][j] = h[i][j] + h[i - (i % 3 ? 2 : 3)][j];
            }
        memcpy(out + s * 4, h[len], sizeof h[0]);
        memcpy(out1 + s * 4, h[1], sizeof h[0]);
    }
}

/* Boundary b must equal liveness computed the slow way. */
static void check_boundaries(const pp_graph *g) {
    for (int b = 0; b < g->n_stages - 1; b++)
        for (int v = 0; v < g->n_values; v++) {
            const pp_value *val = &g->values[v];
            if (val->is_const) continue;
            int def = val->producer < 0 ? -1 : g->nodes[val->producer].stage;
            bool later = false;
            for (int i = 0; i < g->n_nodes; i++)
                for (int k = 0; k < g->nodes[i].n_in; k++)
                    if (g->nodes[i].in[k] == v && g->nodes[i].stage > b) later = true;
            for (int k = 0; k < g->n_outputs; k++) later |= g->outputs[k] == v;
            bool want = def <= b && later, have = false;
            for (int k = 0; k < g->bounds[b].n; k++) have |= g->bounds[b].vals[k] == v;
            CHECK(want == have, "boundary %d, value %s: want %d have %d", b, val->name, want, have);
        }
}

static void test_chain_split(int len, int pp, int64_t batch, int64_t n_samples) {
    static const float bias[4] = {0.5f, -1.0f, 0.25f, -0.125f};
    pp_graph g;
    build_chain(&g, len, batch, bias);
    pp_err e = {0};
    pp_compile_opts co;
    pp_compile_opts_init(&co);
    co.n_stages = pp;
    co.policy = PP_POLICY_UNIFORM;
    pp_status s = pp_run_passes(&g, &co, &e);
    CHECK(s == PP_OK, "passes (len %d, pp %d): %s", len, pp, e.msg);
    if (s != PP_OK) return pp_graph_free(&g);
    for (int i = 0; i < g.n_nodes; i++)
        CHECK(g.nodes[i].stage >= 0 && g.nodes[i].stage < pp &&
                  (i == 0 || g.nodes[i].stage >= g.nodes[i - 1].stage),
              "node %d stage %d", i, g.nodes[i].stage);
    for (int st = 0; st < pp; st++) {
        int cnt = 0;
        for (int i = 0; i < g.n_nodes; i++) cnt += g.nodes[i].stage == st;
        CHECK(cnt >= len / pp && cnt <= len / pp + 1, "uniform: stage %d has %d ops", st, cnt);
    }
    check_boundaries(&g);
    pp_lowered low;
    CHECK(pp_lower(&g, "test", "test", NULL, &low, &e) == PP_OK, "lower: %s", e.msg);
    CHECK(pp_plan_write(&low, "t_chain.plan", &e) == PP_OK, "write: %s", e.msg);
    pp_lowered_free(&low);
    pp_graph_free(&g);

    pprt_plan *p = NULL;
    s = pprt_plan_load("t_chain.plan", NULL, &p, &e);
    CHECK(s == PP_OK, "load: %s", e.msg);
    if (s != PP_OK) return;
    float *x = malloc(sizeof(float) * 4 * (size_t)n_samples);
    float *want = malloc(sizeof(float) * 4 * (size_t)n_samples);
    float *want1 = malloc(sizeof(float) * 4 * (size_t)n_samples);
    for (int64_t i = 0; i < 4 * n_samples; i++) x[i] = (float)((i * 7919) % 23) / 5.0f - 2.0f;
    chain_ref(len, n_samples, x, bias, want, want1);
    pprt_array in = {x, n_samples}, out[2];
    pprt_stats st;
    pprt_run_opts ro = {.depth = 2, .pin = false};
    s = pprt_run(p, &in, n_samples, out, &ro, &st, &e);
    CHECK(s == PP_OK, "run: %s", e.msg);
    if (s == PP_OK) {
        CHECK(memcmp(out[0].data, want, sizeof(float) * 4 * (size_t)n_samples) == 0,
              "len %d pp %d batch %lld: output differs", len, pp, (long long)batch);
        CHECK(memcmp(out[1].data, want1, sizeof(float) * 4 * (size_t)n_samples) == 0,
              "len %d pp %d: early graph output differs", len, pp);
        CHECK(st.micro_batches == (n_samples + batch - 1) / batch, "micro-batch count");
        free(out[0].data);
        free(out[1].data);
        free(st.stages);
        free(st.node_ms);
        free(st.latency_ms);
    }
    free(x);
    free(want);
    free(want1);
    pprt_plan_free(p);
}

/* The chain of build_chain through the passes at pp stages under policy,
 * and lowered; false (and a failed CHECK) otherwise. */
static bool lower_chain(pp_graph *g, int len, int64_t batch, const float *bias, int pp, pp_policy policy,
                        pp_lowered *low) {
    build_chain(g, len, batch, bias);
    pp_err e = {0};
    pp_compile_opts co;
    pp_compile_opts_init(&co);
    co.n_stages = pp;
    co.policy = policy;
    if (pp_run_passes(g, &co, &e) != PP_OK || pp_lower(g, "t", "t", NULL, low, &e) != PP_OK) {
        CHECK(0, "building the plan: %s", e.msg);
        pp_graph_free(g);
        return false;
    }
    return true;
}

/* Every truncation and every flipped header/metadata byte must be rejected. */
static void test_corrupt_plan(void) {
    static const float bias[4] = {1, 2, 3, 4};
    pp_graph g;
    pp_err e = {0};
    pp_lowered low;
    if (!lower_chain(&g, 9, 2, bias, 3, PP_POLICY_AUTO, &low)) return;
    if (pp_plan_write(&low, "t_corrupt.plan", &e) != PP_OK) {
        CHECK(0, "writing the plan: %s", e.msg);
        pp_lowered_free(&low);
        pp_graph_free(&g);
        return;
    }
    pp_lowered_free(&low);
    pp_graph_free(&g);
    FILE *f = fopen("t_corrupt.plan", "rb");
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    unsigned char *buf = malloc(len);
    CHECK(fread(buf, 1, len, f) == len, "read");
    fclose(f);
    pprt_plan *p;
    e = (pp_err){0};
    CHECK(pprt_plan_load_mem(buf, len, &p, &e) == PP_OK, "intact plan rejected: %s", e.msg);
    pprt_plan_free(p);
    int accepted = 0;
    for (size_t cut = 0; cut < len; cut++) {
        e = (pp_err){0};
        if (pprt_plan_load_mem(buf, cut, &p, &e) == PP_OK) {
            accepted++;
            pprt_plan_free(p);
        }
    }
    CHECK(accepted == 0, "%d truncations accepted", accepted);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (unsigned char)(1u << bit);
            e = (pp_err){0};
            if (pprt_plan_load_mem(buf, len, &p, &e) == PP_OK) {
                accepted++;
                pprt_plan_free(p);
            }
            buf[i] ^= (unsigned char)(1u << bit);
        }
    }
    CHECK(accepted == 0, "%d flipped bytes accepted", accepted);
    e = (pp_err){0};
    buf[8] = 99;
    CHECK(pprt_plan_load_mem(buf, len, &p, &e) == PP_EINVAL && strstr(e.msg, "version 99"),
          "wrong version message: %s", e.msg);
    /* format versions (plan_format.h): 1 still loads, with every node chained
     * and no placement; 3 (a newer ppcc's) is refused; the header's checksum
     * made right each time, so only the version differs */
    for (unsigned v = 1; v <= 3; v += 2) {
        buf[8] = (unsigned char)v;
        const uint64_t h = XXH3_64bits(buf, 96);
        for (int k = 0; k < 8; k++) buf[96 + k] = (unsigned char)(h >> (8 * k));
        e = (pp_err){0};
        const pp_status st = pprt_plan_load_mem(buf, len, &p, &e);
        if (v == 1) {
            CHECK(st == PP_OK, "a version 1 plan is refused: %s", e.msg);
            bool chained = st == PP_OK;
            for (int i = 0; st == PP_OK && i < p->n_stages; i++)
                for (int j = 0; j < p->stages[i].n_nodes; j++)
                    chained = chained && p->stages[i].nodes[j].chain && !p->stages[i].backend[0] &&
                              p->stages[i].device == -1;
            CHECK(chained, "a version 1 plan reads as chained nodes without placement");
            if (st == PP_OK) pprt_plan_free(p);
        } else {
            CHECK(st == PP_EINVAL && strstr(e.msg, "reads versions 1 to 2"), "version 3: %s", e.msg);
        }
    }
    free(buf);
}

/* Write low's plan and load it: the status, the message in e. */
static pp_status load_lowered(const pp_lowered *low, const char *path, pprt_plan **p, pp_err *e) {
    *e = (pp_err){0};
    *p = NULL;
    pp_status s = pp_plan_write(low, path, e);
    return s != PP_OK ? s : pprt_plan_load(path, NULL, p, e);
}

/* A plan whose outputs, or inputs and frozen inputs, map to one data file
 * (made by hand: ppcc refuses such models) is refused at load, naming both;
 * a file for a frozen input is refused by pprt_data_load. */
static void test_file_names(void) {
    static const float bias[4] = {1, 2, 3, 4};
    pp_graph g;
    pp_lowered low;
    pp_err e;
    pprt_plan *p;
    if (!lower_chain(&g, 4, 2, bias, 1, PP_POLICY_AUTO, &low)) return;
    Ppplan__Plan *pl = low.plan;
    char *o0 = pl->outputs[0]->name, *o1 = pl->outputs[1]->name;
    static char y0[] = "y:0", y_0[] = "y_0", x0[] = "x:0", x_0[] = "x_0", w[] = "w";
    pl->outputs[0]->name = y0;
    pl->outputs[1]->name = y_0;
    CHECK(load_lowered(&low, "t_names.plan", &p, &e) == PP_EINVAL && strstr(e.msg, "'y:0' and 'y_0' would both be "
          "written to the file 'y_0.npy'"), "colliding outputs: %s", e.msg);
    pprt_plan_free(p);
    pl->outputs[0]->name = o0, pl->outputs[1]->name = o1;
    char *in0 = pl->inputs[0]->name, *frozen[1] = {x0};
    pl->inputs[0]->name = x_0;
    pl->frozen_inputs = frozen, pl->n_frozen_inputs = 1;
    CHECK(load_lowered(&low, "t_names.plan", &p, &e) == PP_EINVAL && strstr(e.msg, "'x_0' and 'x:0' would both be "
          "read from the file 'x_0.npy'"), "colliding input and frozen input: %s", e.msg);
    pprt_plan_free(p);
    pl->inputs[0]->name = in0;
    frozen[0] = w;
    CHECK(load_lowered(&low, "t_names.plan", &p, &e) == PP_OK, "a frozen input 'w': %s", e.msg);
    if (p) {
        float xs[3][4] = {{0}};
        pp_shape sh = {2, {3, 4}};
        CHECK(mkdir("t_names", 0755) == 0 || errno == EEXIST, "mkdir");
        pprt_npy_write("t_names/x.npy", PP_F32, &sh, xs, &e);
        pprt_npy_write("t_names/w.npy", PP_F32, &sh, xs, &e);
        pprt_npy npys[1];
        pprt_array arr[1];
        int64_t n;
        e = (pp_err){0};
        CHECK(pprt_data_load(p, "t_names", NULL, npys, arr, NULL, &n, &e) == PP_EINVAL &&
              strstr(e.msg, "t_names/w.npy holds data for 'w'"), "data for a frozen input: %s", e.msg);
        unlink("t_names/w.npy");
        e = (pp_err){0};
        CHECK(pprt_data_load(p, "t_names", NULL, npys, arr, NULL, &n, &e) == PP_OK && n == 3, "without it: %s", e.msg);
        pprt_npy_free(&npys[0]);
        unlink("t_names/x.npy");
        rmdir("t_names");
    }
    pprt_plan_free(p);
    pl->frozen_inputs = NULL, pl->n_frozen_inputs = 0;
    pp_lowered_free(&low);
    pp_graph_free(&g);
    unlink("t_names.plan");
}

/* ---- a --ref-weights plan, made by hand from a whole one ------------------------------ */

static void write_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "writing %s", path);
    if (f) fclose(f);
}

/* Write the lowered plan and load it: NULL when it loads, else the message. */
static const char *ref_load(const pp_lowered *low, const char *model, pprt_plan **out) {
    static pp_err e;
    e = (pp_err){0};
    *out = NULL;
    if (pp_plan_write(low, "t_ref.plan", &e) != PP_OK) return e.msg;
    return pprt_plan_load("t_ref.plan", model, out, &e) == PP_OK ? NULL : e.msg;
}

/* Output files: the temporary name is registered (for the signal handler)
 * exactly while it exists, and a failed write leaves nothing. */
static void test_outfile_registry(void) {
    pp_outfile o;
    pp_err e = {0};
    remove("t_reg.out");
    CHECK(pp_outfile_open(&o, "t_reg.out", &e) == PP_OK, "open: %s", e.msg);
    CHECK(pp_tmp_files_armed() == 1 && access(o.tmp, F_OK) == 0, "an open output: %d registered", pp_tmp_files_armed());
    fputs("x", o.f);
    CHECK(pp_outfile_commit(&o, true, &e) == PP_OK && access("t_reg.out", F_OK) == 0, "commit: %s", e.msg);
    CHECK(pp_tmp_files_armed() == 0, "after the rename: %d registered", pp_tmp_files_armed());
    CHECK(pp_outfile_open(&o, "t_reg2.out", &e) == PP_OK, "open: %s", e.msg);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    pp_outfile_commit(&o, false, NULL);
    CHECK(pp_tmp_files_armed() == 0 && access(tmp, F_OK) != 0 && access("t_reg2.out", F_OK) != 0,
          "a failed write left %s or a registration", tmp);
    remove("t_reg.out");
}

/* ---- JSON output (ir/json.c) ---- */

/* cJSON's allocations fail from the json_fail_at-th on (-1: never) */
static long json_allocs, json_fail_at = -1;
static void *json_malloc(size_t n) { return json_fail_at >= 0 && json_allocs++ >= json_fail_at ? NULL : malloc(n); }

static pp_status json_tree(const char *path, const char *name) {
    pp_json j;
    cJSON *root = pp_json_begin(&j);
    pp_json_add_string(&j, root, "format", "t");
    pp_json_add_round(&j, root, "x", 1.23456789, 3);
    pp_json_add_round(&j, root, "whole", 2.0000001, 6);
    pp_json_add_number(&j, root, "nan", NAN);
    cJSON *a = pp_json_add_array(&j, root, "names");
    for (int k = 0; k < 2; k++) pp_json_add_string(&j, a, NULL, name);
    pp_json_add_bool(&j, pp_json_add_object(&j, root, "o"), "ok", true);
    pp_err e = {0};
    return pp_json_write(&j, path, false, &e);
}

static pp_status json_stream(const char *path) {
    pp_json h;
    cJSON *root = pp_json_begin(&h);
    pp_json_add_number(&h, root, "h", 1);
    pp_json_add_array(&h, root, "ev");
    pp_json_stream s;
    pp_err e = {0};
    PP_TRY(pp_json_stream_open(&s, path, &h, &e));
    for (int i = 0; i < 2; i++) {
        pp_json ev;
        pp_json_add_number(&ev, pp_json_begin(&ev), "i", i);
        pp_json_stream_add(&s, &ev);
    }
    return pp_json_stream_close(&s, true, &e);
}

static bool file_is(const char *path, const char *want) {
    char buf[512] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    if (strcmp(buf, want)) fprintf(stderr, "%s holds: %.*s\n", path, (int)n, buf);
    return !strcmp(buf, want);
}

/* Names come out escaped by cJSON, numbers rounded as asked (NaN as null),
 * the streamed file as its head, one element a line and the closing
 * brackets; and every failed allocation, at any point, gives PP_ENOMEM and
 * leaves no file (nor a temporary one) behind. */
static void test_json(void) {
    check_case = "json";
    remove("t_json.json");
    CHECK(json_tree("t_json.json", "a\"b\\c\x01") == PP_OK, "the tree");
    CHECK(file_is("t_json.json", "{\"format\":\"t\",\"x\":1.235,\"whole\":2,\"nan\":null,\"names\":[\"a\\\"b\\\\c\\u0001\","
                                 "\"a\\\"b\\\\c\\u0001\"],\"o\":{\"ok\":true}}\n"), "the tree's text");
    CHECK(json_stream("t_json.json") == PP_OK, "the stream");
    CHECK(file_is("t_json.json", "{\"h\":1,\"ev\":[\n{\"i\":0},\n{\"i\":1}\n]}\n"), "the stream's text");
    cJSON_Hooks hooks = {.malloc_fn = json_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    for (int stream = 0; stream < 2; stream++) {
        pp_status s = PP_ENOMEM;
        long k = 0;
        for (; s != PP_OK && k < 200; k++) {
            json_allocs = 0, json_fail_at = k;
            remove("t_json.json");
            s = stream ? json_stream("t_json.json") : json_tree("t_json.json", "n");
            CHECK(s == PP_OK || (s == PP_ENOMEM && access("t_json.json", F_OK) != 0 && pp_tmp_files_armed() == 0),
                  "%s, allocation %ld failing: %s, a file or temporary left", stream ? "stream" : "tree", k,
                  pp_status_name(s));
        }
        CHECK(s == PP_OK && k > 3, "%s: written once %ld allocations could succeed", stream ? "stream" : "tree", k);
    }
    json_fail_at = -1;
    cJSON_InitHooks(NULL);
    remove("t_json.json");
    check_case = "";
}

/* A case of a plan that must be refused, and the words the refusal must hold. */
typedef struct {
    const char *what, *want;
} refusal;

/* The plan low, written and loaded (with --model `model`), must be refused
 * with a message holding `want`; returns the seconds the load took. */
static double expect_refused(const pp_lowered *low, const char *model, const char *what, const char *want) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pprt_plan *p;
    const char *msg = ref_load(low, model, &p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(msg && strstr(msg, want), "%s: expected \"%s\", got %s", what, want, msg ? msg : "a loaded plan");
    pprt_plan_free(p);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* Forged metadata that the checksums let through (the writer computes them):
 * an arena other than what the slots need (2^63, one block too many), and a
 * plan input or output whose name cannot be a data file's. */
static void test_forged_plan(void) {
    static const float bias[4] = {1, 2, 3, 4};
    pp_graph g;
    pp_lowered low;
    if (!lower_chain(&g, 5, 2, bias, 1, PP_POLICY_UNIFORM, &low)) return;
    Ppplan__Stage *st = low.plan->stages[0];
    const uint64_t arena = st->arena_bytes;
    static char long_name[300];
    memset(long_name, 'y', sizeof long_name - 1);
    char *out_name = low.plan->outputs[0]->name, *in_name = low.plan->inputs[0]->name;
    static const refusal cases[] = {
        {"arena 2^63", "arena of 9223372036854775808 bytes, expected"},
        {"arena one block too large", "bytes, expected"},
        {"arena 2^41, slots there too", "more than the 1099511627776 a stage may have"},
        {"a 299-byte output name", "has a 299-byte name, too long for its data file"},
        {"a 299-byte input name", "has a 299-byte name, too long for its data file"},
    };
    Ppplan__Tensor *act = NULL;
    for (size_t k = 0; k < st->n_tensors; k++)
        if (st->tensors[k]->kind == PPPLAN__TENSOR__KIND__ACTIVATION) act = st->tensors[k];
    CHECK(act != NULL, "stage 0 has an activation");
    uint64_t act_off = act ? act->offset : 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && act; i++) {
        if (i == 0) st->arena_bytes = (uint64_t)1 << 63;
        if (i == 1) st->arena_bytes = arena + 64;
        if (i == 2) act->offset = (uint64_t)1 << 41, st->arena_bytes = act->offset + ((act->nbytes + 63) & ~63ull);
        if (i == 3) low.plan->outputs[0]->name = long_name;
        if (i == 4) low.plan->inputs[0]->name = long_name;
        expect_refused(&low, NULL, cases[i].what, cases[i].want);
        st->arena_bytes = arena, act->offset = act_off;
        low.plan->outputs[0]->name = out_name, low.plan->inputs[0]->name = in_name;
    }
    pprt_plan *p;
    const char *msg = ref_load(&low, NULL, &p);
    CHECK(!msg, "the plan, restored, is refused: %s", msg ? msg : "");
    pprt_plan_free(p);
    pp_lowered_free(&low);
    pp_graph_free(&g);
}

/* A plan that claims a huge weights file (64 GiB, sparse: `truncate -s`) is
 * refused at once, never after hashing 64 GiB (43 s): by the file's size when
 * the plan records another, by a tensor outside the recorded size, and by the
 * bytes the plan reads there (used_xxh3) when only those are read. */
static void ref_plan_huge(pp_lowered *low, Ppplan__Source *so, Ppplan__Tensor *bt, char *small_path,
                          const float *bias) {
    const uint64_t huge = (uint64_t)64 << 30;
    FILE *f = fopen("t_huge.bin", "wb");
    bool sparse = f && ftruncate(fileno(f), (off_t)huge) == 0;
    if (f) fclose(f);
    if (!sparse) {
        printf("test_core: no 64 GiB sparse file here (ftruncate failed): huge-source cases skipped\n");
        remove("t_huge.bin");
        return;
    }
    static char huge_path[4096];
    CHECK(realpath("t_huge.bin", huge_path) != NULL, "realpath");
    static const refusal cases[] = {
        {"the plan records 64 GiB, the file is small", "has 19 bytes, the plan was compiled from one of 68719476736"},
        {"the plan records the small size, the file is 64 GiB", "has 68719476736 bytes, the plan was compiled from one of 19"},
        {"a tensor past the recorded 64 GiB", "lie outside"},
        {"64 GiB recorded and there, other bytes where the plan reads", "the bytes this plan reads there"},
    };
    const uint64_t size0 = so->size;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        so->path = i == 0 ? small_path : huge_path;
        so->size = i == 1 ? size0 : huge;
        bt->offset = i == 2 ? huge - 8 : 3;
        double s = expect_refused(low, NULL, cases[i].what, cases[i].want);
        CHECK(s < 1.0, "%s: refused after %.2f s, expected at once", cases[i].what, s);
        printf("test_core: huge source, %s: refused in %.1f ms\n", cases[i].what, 1e3 * s);
    }
    (void)bias;
    so->path = small_path, so->size = size0, bt->offset = 3;
    remove("t_huge.bin");
}

/* The chain's bias becomes an EXTERNAL tensor read from a file where it lies
 * at offset 3 (misaligned, so pprt copies it): the plan runs and gives the
 * chain's outputs; a wrong source, offset, size or hash, a missing file, and
 * a source on another kind of tensor are refused; --model finds the file. */
static void test_ref_plan(void) {
    static const float bias[4] = {0.5f, -1.0f, 0.25f, -0.125f};
    pp_graph g;
    pp_err e = {0};
    pp_lowered low;
    if (!lower_chain(&g, 7, 3, bias, 2, PP_POLICY_UNIFORM, &low)) return;
    unsigned char src[3 + sizeof bias] = {7, 7, 7};
    memcpy(src + 3, bias, sizeof bias);
    write_file("t_src.bin", src, sizeof src);
    char abs[4096];
    CHECK(realpath("t_src.bin", abs) != NULL, "realpath");
    Ppplan__Source so = PPPLAN__SOURCE__INIT, *sl[1] = {&so};
    so.path = abs;
    static char empty[1], gone[] = "/nonexistent/t_src.bin";
    so.location = empty;
    so.size = sizeof src;
    so.xxh3 = XXH3_64bits(src, sizeof src);
    so.used_xxh3 = XXH3_64bits(bias, sizeof bias); /* the union of the bias's ranges: [3, 19) */
    low.plan->sources = sl;
    low.plan->n_sources = 1;
    Ppplan__Tensor *bt = NULL, *other = NULL;
    for (size_t i = 0; i < low.plan->n_stages; i++)
        for (size_t k = 0; k < low.plan->stages[i]->n_tensors; k++) {
            Ppplan__Tensor *t = low.plan->stages[i]->tensors[k];
            if (t->kind == PPPLAN__TENSOR__KIND__WEIGHT) {
                t->kind = PPPLAN__TENSOR__KIND__EXTERNAL;
                t->source = 0;
                t->offset = 3;
                bt = t;
            } else {
                other = t;
            }
        }
    CHECK(bt && other, "the chain has a weight and other tensors");
    for (int v = 0; v < g.n_values; v++) low.weight_off[v] = -1;
    low.weights_bytes = low.plan->weights_bytes = 0;

    pprt_plan *p;
    const char *msg = ref_load(&low, NULL, &p);
    CHECK(!msg, "the --ref-weights plan is refused: %s", msg ? msg : "");
    if (p) {
        enum { N = 5 };
        float x[4 * N], want[4 * N], want1[4 * N];
        for (int i = 0; i < 4 * N; i++) x[i] = (float)((i * 31) % 11) / 3.0f - 1.5f;
        chain_ref(7, N, x, bias, want, want1);
        pprt_array in = {x, N}, out[2];
        pprt_stats st;
        pprt_run_opts ro = {.depth = 2, .pin = false};
        pp_status s = pprt_run(p, &in, N, out, &ro, &st, &e);
        CHECK(s == PP_OK, "run: %s", e.msg);
        if (s == PP_OK) {
            CHECK(memcmp(out[0].data, want, sizeof want) == 0, "--ref-weights plan: output differs");
            free(out[0].data);
            free(out[1].data);
            free(st.stages);
            free(st.node_ms);
            free(st.latency_ms);
        }
        pprt_plan_free(p);
    }
    static const refusal bad[] = {
        {"source 1", "expected a source below 1"},
        {"offset 4", "lie outside"},
        {"hash", "the file changed"},
        {"size", "the plan was compiled from one of 20"},
        {"source on a non-external tensor", "on a tensor that is not EXTERNAL"},
        {"used hash", "the bytes this plan reads there (1 tensor) have XXH3"},
        {"path", "cannot open the model file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (i == 0) bt->source = 1;
        if (i == 1) bt->offset = 4;
        if (i == 2) so.xxh3 ^= 1;
        if (i == 3) so.size++;
        if (i == 4) other->source = 1;
        if (i == 5) so.used_xxh3 ^= 1;
        if (i == 6) so.path = gone;
        expect_refused(&low, NULL, bad[i].what, bad[i].want);
        bt->source = 0, bt->offset = 3, so.xxh3 = XXH3_64bits(src, sizeof src), so.size = sizeof src;
        so.used_xxh3 = XXH3_64bits(bias, sizeof bias);
        other->source = 0;
        /* the missing path stays for the --model case below */
    }
    /* the recorded path is gone; --model names the file */
    msg = ref_load(&low, "t_src.bin", &p);
    CHECK(!msg, "--model t_src.bin: %s", msg ? msg : "");
    pprt_plan_free(p);
    ref_plan_huge(&low, &so, bt, abs, bias);
    low.plan->sources = NULL;
    low.plan->n_sources = 0;
    pp_lowered_free(&low);
    pp_graph_free(&g);
}

/* The loader's sweep over arena slots against every pair, on random slots
 * (few offsets and sizes, so that overlaps, touching ends, equal offsets and
 * empty slots all occur). */
static uint32_t rnd(void);
static void test_slots_vs_pairs(void) {
    int found = 0;
    for (int trial = 0; trial < 20000; trial++) {
        enum { N = 24 };
        int n = 1 + (int)(rnd() % N), st[N], en[N], a = -1, b = -1;
        size_t off[N], sz[N];
        for (int i = 0; i < n; i++) {
            st[i] = (int)(rnd() % 20);
            en[i] = st[i] + (int)(rnd() % 6) - 1; /* sometimes before start: means start */
            off[i] = 64 * (rnd() % (trial % 2 ? 40u : 8u));
            sz[i] = rnd() % 5 ? 64 * (1 + rnd() % 3) : 0;
        }
        bool want = false;
        for (int i = 0; i < n && !want; i++)
            for (int j = i + 1; j < n && !want; j++) {
                int ei = en[i] > st[i] ? en[i] : st[i], ej = en[j] > st[j] ? en[j] : st[j];
                want = sz[i] && sz[j] && st[i] <= ej && st[j] <= ei && off[i] < off[j] + sz[j] && off[j] < off[i] + sz[i];
            }
        int got = pprt_slots_overlap(n, st, en, off, sz, &a, &b);
        CHECK(got == (int)want, "trial %d: the sweep says %d, the pairs %d", trial, got, (int)want);
        if (got == 1) { /* the pair it names does overlap */
            int ea = en[a] > st[a] ? en[a] : st[a], eb = en[b] > st[b] ? en[b] : st[b];
            CHECK(a < b && sz[a] && sz[b] && st[a] <= eb && st[b] <= ea && off[a] < off[b] + sz[b] &&
                  off[b] < off[a] + sz[a], "trial %d: named %d and %d, which do not overlap", trial, a, b);
        }
        found += got == 1;
    }
    CHECK(found > 1000 && found < 19000, "coverage: %d of 20000 random sets overlap", found);
}

/* ---- partitioning: exact min-max against brute force ------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

typedef struct {
    int n;
    double w[16], cut[16], cap[8];
} toy;

/* cost of units i..j as stage s: sum of weights plus the bytes it sends;
 * infeasible (-1) above the stage's cap */
static double toy_cost(void *ctx, int i, int j, int s) {
    const toy *t = ctx;
    double c = t->cut[j];
    for (int k = i; k <= j; k++) c += t->w[k];
    return c > t->cap[s] ? -1 : c;
}

/* prefix sums and a per-end transfer term, as the auto policy's cost */
static double seq_cost(void *ctx, int i, int j, int s) {
    (void)s;
    double *const *q = ctx;
    return (q[0][j + 1] - q[0][i]) + q[1][j] / 3.0;
}

/* all ways to place p-1 cuts among n-1 gaps */
static double brute(const toy *t, int p, int start, int stage, double acc) {
    if (stage == p - 1) {
        double c = toy_cost((void *)t, start, t->n - 1, stage);
        if (c < 0) return -1;
        return c > acc ? c : acc;
    }
    double best = -1;
    for (int end = start; end <= t->n - (p - stage); end++) {
        double c = toy_cost((void *)t, start, end, stage);
        if (c < 0) continue;
        double r = brute(t, p, end + 1, stage + 1, c > acc ? c : acc);
        if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    return best;
}

static void test_minmax_vs_brute(void) {
    int checked = 0, infeasible = 0;
    for (int trial = 0; trial < 3000; trial++) {
        toy t;
        t.n = 1 + (int)(rnd() % 12);
        int p = 1 + (int)(rnd() % 5);
        for (int k = 0; k < t.n; k++) {
            t.w[k] = (double)(rnd() % 100);
            t.cut[k] = (double)(rnd() % 30);
        }
        for (int s = 0; s < 8; s++) t.cap[s] = trial % 3 ? 1e30 : (double)(50 + rnd() % 300);
        int cuts[8];
        double got = pp_minmax_split(t.n, p, toy_cost, &t, cuts);
        double want = p <= t.n ? brute(&t, p, 0, 0, 0) : -1;
        CHECK((got < 0 && want < 0) || got == want, "n %d p %d: dp %g, brute force %g", t.n, p, got, want);
        if (got >= 0) { /* the returned cuts realize the value */
            double worst = 0;
            for (int s = 0; s < p; s++) {
                int i = s ? cuts[s - 1] : 0, j = s < p - 1 ? cuts[s] - 1 : t.n - 1;
                CHECK(i <= j, "empty stage %d", s);
                double c = toy_cost(&t, i, j, s);
                CHECK(c >= 0, "cuts violate a cap");
                if (c > worst) worst = c;
            }
            CHECK(worst == got, "cuts give %g, dp says %g", worst, got);
        }
        if (trial % 3) { /* no caps: the near-linear split gives the same value and cuts */
            int mc[8];
            double mono = pp_minmax_split_mono(t.n, p, toy_cost, &t, mc);
            CHECK(mono == got, "n %d p %d: mono %g, dp %g", t.n, p, mono, got);
            for (int k = 0; got >= 0 && k < p - 1; k++) CHECK(mc[k] == cuts[k], "n %d p %d: cut %d differs", t.n, p, k);
        }
        infeasible += want < 0;
        checked++;
    }
    CHECK(checked == 3000 && infeasible > 0, "coverage: %d infeasible cases", infeasible);
    /* longer sequences, many ties (weights 0..3, cut costs 0..2, in floating
     * point), every stage count: the near-linear split against the DP */
    enum { L = 300 };
    static double w[L + 1], cut[L];
    struct {
        double *pre, *cut;
    } seq = {w, cut};
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(rnd() % L), p = 1 + (int)(rnd() % 9);
        if (p > n) p = n;
        w[0] = 0;
        for (int k = 0; k < n; k++) {
            w[k + 1] = w[k] + (double)(rnd() % 4) * (trial % 2 ? 0.1 : 1.0);
            cut[k] = (double)(rnd() % 3) * 0.7;
        }
        int c1[16], c2[16];
        double a = pp_minmax_split(n, p, seq_cost, &seq, c1), b = pp_minmax_split_mono(n, p, seq_cost, &seq, c2);
        CHECK(a == b, "n %d p %d: mono %g, dp %g", n, p, b, a);
        for (int k = 0; k < p - 1; k++) CHECK(c1[k] == c2[k], "n %d p %d: cut %d is %d, the dp's %d", n, p, k, c2[k], c1[k]);
    }
}

/* Random DAGs of Relu/Add over [B,4] with random fan-in: every policy at every
 * depth keeps every node in exactly one stage, boundaries equal liveness, and
 * outputs bit-identical to one stage. */
static void build_dag(pp_graph *g, int n, int64_t batch, uint32_t seed) {
    pp_graph_init(g);
    g->batch = batch;
    g->opset = 13;
    rng = 0x1234567ull + seed;
    pp_err e = {0};
    int x = value(g, "x");
    g->values[x].dtype = PP_F32;
    g->values[x].shape = (pp_shape){2, {batch, 4}};
    g->values[x].nbytes = (size_t)batch * 16;
    pp_graph_add_input(g, x, &e);
    int vals[64];
    vals[0] = x;
    for (int i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "/m%d/v%d", (int)(rnd() % 3), i);
        int out = value(g, nm + 4);
        int a = vals[rnd() % (unsigned)(i + 1)], b = vals[rnd() % (unsigned)(i + 1)];
        if (rnd() % 3 == 0) node(g, PP_OP_RELU, nm, a, -1, out);
        else node(g, PP_OP_ADD, nm, a, b, out);
        vals[i + 1] = out;
    }
    pp_graph_add_output(g, vals[n], &e);
    int early = vals[1 + rnd() % (unsigned)(n - 1)]; /* an early output too, distinct */
    pp_graph_add_output(g, early, &e);
}

/* A random DAG (build_dag) and options splitting it into p stages under
 * policy, simplify off (dead nodes kept: these tests are about the split). */
static void dag_opts(pp_graph *g, int n, uint32_t seed, int p, pp_policy policy, pp_compile_opts *co) {
    build_dag(g, n, 2, seed);
    pp_compile_opts_init(co);
    co->n_stages = p;
    co->policy = policy;
    co->n_disabled = 1;
    co->disabled[0] = "simplify";
}

/* Under memory caps and with the memory policy, the O(p n log n) probes and
 * the quadratic DP find the same bottleneck on random DAGs (and refuse the
 * same caps). */
static void test_capped_split(void) {
    const pp_policy pols[] = {PP_POLICY_MEMORY, PP_POLICY_AUTO, PP_POLICY_UNIFORM, PP_POLICY_FLOPS};
    int compared = 0, refused = 0;
    for (uint32_t seed = 0; seed < 40; seed++)
        for (int pi = 0; pi < 4; pi++) {
            int n = 8 + (int)(seed * 13 % 50), p = 2 + (int)(seed % 3);
            double got[2];
            pp_status st[2];
            size_t cap = 0;
            for (int way = 0; way < 2; way++) {
                pp_graph g;
                pp_compile_opts co;
                dag_opts(&g, n, seed, p, pols[pi], &co);
                co.dp_max_units = way ? 0 : 1 << 30;
                if (seed % 4 == 3) { /* per-stage caps on some stages */
                    co.n_caps = 1;
                    co.cap_stage[0] = 1;
                    co.cap_bytes[0] = 300 + 400 * (seed % 7);
                } else if (seed % 4) {
                    co.cap_all = 300 + 400 * (seed % 5);
                }
                cap = co.cap_all;
                pp_err e = {0};
                st[way] = pp_run_passes(&g, &co, &e);
                /* refused by the split's estimate, or after it by the real figures (of cuts
                 * that may differ between equally good splits) */
                CHECK(st[way] == PP_OK || (st[way] == PP_EINVAL && (strstr(e.msg, "no split into") ||
                                                                     strstr(e.msg, "against its cap"))),
                      "seed %u policy %s: %s", seed, pp_policy_name(pols[pi]), e.msg);
                got[way] = g.split_cost; /* -1: no split fits */
                pp_graph_free(&g);
            }
            (void)cap;
            CHECK(got[0] == got[1], "seed %u policy %s p %d n %d: the DP gives %g (%d), the probes %g (%d)",
                  seed, pp_policy_name(pols[pi]), p, n, got[0], (int)st[0], got[1], (int)st[1]);
            compared += got[0] >= 0;
            refused += got[0] < 0;
        }
    CHECK(compared > 40 && refused > 3, "coverage: %d splits compared, %d refused", compared, refused);
}

static void test_random_dags(void) {
    const pp_policy pols[] = {PP_POLICY_UNIFORM, PP_POLICY_FLOPS, PP_POLICY_MEMORY, PP_POLICY_AUTO};
    int runs = 0;
    for (uint32_t seed = 0; seed < 12; seed++) {
        int n = 3 + (int)(seed * 7 % 20);
        float *ref[2] = {NULL, NULL};
        int64_t ns = 9;
        float x[9 * 4];
        for (int i = 0; i < 36; i++) x[i] = (float)((i * 37) % 11) - 5.0f;
        for (int pi = 0; pi < 4; pi++)
            for (int p = 1; p <= 4 && p <= n; p++) {
                pp_graph g;
                pp_compile_opts co;
                dag_opts(&g, n, seed, p, pols[pi], &co);
                pp_err e = {0};
                pp_status s = pp_run_passes(&g, &co, &e);
                CHECK(s == PP_OK, "seed %u policy %s p %d: %s", seed, pp_policy_name(pols[pi]), p, e.msg);
                if (s != PP_OK) {
                    pp_graph_free(&g);
                    continue;
                }
                int per[8] = {0};
                for (int i = 0; i < g.n_nodes; i++) {
                    CHECK(g.nodes[i].stage >= 0 && g.nodes[i].stage < p &&
                              (i == 0 || g.nodes[i].stage >= g.nodes[i - 1].stage),
                          "node %d in stage %d", i, g.nodes[i].stage);
                    per[g.nodes[i].stage]++;
                }
                for (int st = 0; st < p; st++) CHECK(per[st] > 0, "stage %d is empty", st);
                check_boundaries(&g);
                pp_lowered low;
                CHECK(pp_lower(&g, "t", "t", NULL, &low, &e) == PP_OK && pp_plan_write(&low, "t_dag.plan", &e) == PP_OK,
                      "lower/write: %s", e.msg);
                pp_lowered_free(&low);
                pp_graph_free(&g);
                pprt_plan *pl = NULL;
                if (pprt_plan_load("t_dag.plan", NULL, &pl, &e) != PP_OK) {
                    CHECK(0, "load: %s", e.msg);
                    continue;
                }
                pprt_array in = {x, ns}, out[2];
                pprt_stats st;
                pprt_run_opts ro = {.depth = 1 + (int)(seed % 3), .pin = false};
                s = pprt_run(pl, &in, ns, out, &ro, &st, &e);
                CHECK(s == PP_OK, "run: %s", e.msg);
                if (s == PP_OK) {
                    for (int k = 0; k < 2; k++) {
                        if (!ref[k]) ref[k] = out[k].data;
                        else {
                            CHECK(memcmp(ref[k], out[k].data, sizeof(float) * 4 * (size_t)ns) == 0,
                                  "seed %u policy %s p %d: output %d differs from the first split", seed,
                                  pp_policy_name(pols[pi]), p, k);
                            free(out[k].data);
                        }
                    }
                    free(st.stages);
                    free(st.node_ms);
                    free(st.latency_ms);
                    runs++;
                }
                pprt_plan_free(pl);
            }
        free(ref[0]);
        free(ref[1]);
    }
    CHECK(runs > 100, "only %d random-DAG runs", runs);
}

/* A constant [r, c] f32 value (zeros). */
static int const_mat(pp_graph *g, const char *name, int64_t r, int64_t c) {
    static float zeros[64];
    int v = value(g, name);
    g->values[v].dtype = PP_F32;
    g->values[v].shape = c ? (pp_shape){2, {r, c}} : (pp_shape){1, {r}};
    g->values[v].is_const = true;
    g->values[v].data = zeros;
    g->values[v].nbytes = (size_t)(r * (c ? c : 1)) * 4;
    return v;
}

/* pp_fusion_chains and the partitioner: x [2,4] ->
 *   /a/MatMul -> /a/Add (bias) -> /b/Relu -> /b/Add (+ x)     one chain (head + 3)
 *   -> /c/MatMul -> /c/Add (bias, its output also read by /d/Add) -> /d/Sigmoid -> /d/Add (+ /c/Add)
 *   -> /e/Gemm -> /e/Relu -> /e/Abs -> /e/Neg -> /e/Exp -> /e/Sqrt   (head + 4, then a new node)
 * glued by hand: 1 2 3 | 5 (/c/Add's output is read twice, so /d/Sigmoid is
 * not glued) | 9 10 11 12 (the fifth link, /e/Sqrt, is not). Every split at
 * every depth and policy cuts only before unglued nodes, and --split-at b,
 * e would cut inside chains: they move past them. --split-at b,c cannot move
 * b's cut past its chain without emptying a stage: the chain is broken at
 * /b/Relu instead (stages /a | /b | /c.., /b/Relu no longer chained). */
static void test_fusion_chains(void) {
    const pp_op ops[] = {PP_OP_MATMUL, PP_OP_ADD, PP_OP_RELU, PP_OP_ADD, PP_OP_MATMUL, PP_OP_ADD, PP_OP_SIGMOID,
                         PP_OP_ADD, PP_OP_GEMM, PP_OP_RELU, PP_OP_ABS, PP_OP_NEG, PP_OP_EXP, PP_OP_SQRT};
    const char *names[] = {"/a/MatMul", "/a/Add", "/b/Relu", "/b/Add", "/c/MatMul", "/c/Add", "/d/Sigmoid",
                           "/d/Add", "/e/Gemm", "/e/Relu", "/e/Abs", "/e/Neg", "/e/Exp", "/e/Sqrt"};
    const bool want[] = {0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1, 0};
    enum { N = 14 };
    const pp_policy pols[] = {PP_POLICY_UNIFORM, PP_POLICY_FLOPS, PP_POLICY_MEMORY, PP_POLICY_AUTO, PP_POLICY_CUSTOM,
                              PP_POLICY_CUSTOM};
    for (int pi = 0; pi < 6; pi++)
        for (int p = 1; p <= (pi >= 4 ? 1 : 6); p++) {
            pp_graph g;
            pp_err e = {0};
            int x = graph_x24(&g, 2, &e);
            int w = const_mat(&g, "w", 4, 4), b = const_mat(&g, "b", 4, 0);
            int cur = x, c_add = -1;
            for (int i = 0; i < N; i++) {
                char nm[16];
                snprintf(nm, sizeof nm, "v%d", i);
                int out = value(&g, nm);
                int other = ops[i] == PP_OP_MATMUL || ops[i] == PP_OP_GEMM ? w
                            : i == 1 || i == 5                            ? b
                            : i == 3                                      ? x
                            : i == 7                                      ? c_add
                                                                          : -1;
                node(&g, ops[i], names[i], cur, other, out);
                if (i == 5) c_add = out;
                cur = out;
            }
            pp_graph_add_output(&g, cur, &e);
            pp_compile_opts co;
            pp_compile_opts_init(&co);
            co.n_stages = p;
            co.policy = pols[pi];
            co.n_disabled = 2; /* the graph as built: no MatMul+Add into Gemm */
            co.disabled[0] = "fuse";
            co.disabled[1] = "simplify";
            if (pi == 4) {
                co.n_stages = 0;
                co.n_split_at = 2;
                co.split_at[0] = "b"; /* /b/Relu is glued to /a/MatMul: the cut moves to /c/MatMul */
                co.split_at[1] = "e";
            }
            if (pi == 5) {
                co.n_stages = 0;
                co.n_split_at = 2;
                co.split_at[0] = "b";
                co.split_at[1] = "c";
                co.quiet = true;
            }
            pp_status s = pp_run_passes(&g, &co, &e);
            CHECK(s == PP_OK, "policy %s p %d: %s", pp_policy_name(pols[pi]), p, e.msg);
            if (s != PP_OK) {
                pp_graph_free(&g);
                continue;
            }
            bool glued[N];
            CHECK(g.n_nodes == N && pp_fusion_chains(&g, glued, &e) == PP_OK, "%d nodes", g.n_nodes);
            for (int i = 0; i < N && g.n_nodes == N; i++) {
                CHECK(glued[i] == want[i], "node %s: glued %d, want %d", g.nodes[i].name, glued[i], want[i]);
                if (i && want[i] && !(pi == 5 && i == 2))
                    CHECK(g.nodes[i].stage == g.nodes[i - 1].stage, "policy %s p %d: a cut before %s",
                          pp_policy_name(pols[pi]), p, g.nodes[i].name);
            }
            if (pi == 4 && g.n_nodes == N)
                CHECK(g.n_stages == 3 && g.nodes[4].stage == 1 && g.nodes[3].stage == 0 && g.nodes[8].stage == 2 &&
                          g.nodes[7].stage == 1,
                      "--split-at b,e: stages %d, /c/MatMul in %d, /e/Gemm in %d", g.n_stages, g.nodes[4].stage,
                      g.nodes[8].stage);
            if (pi == 5 && g.n_nodes == N)
                CHECK(g.n_stages == 3 && g.nodes[1].stage == 0 && g.nodes[2].stage == 1 && !g.nodes[2].chain &&
                          g.nodes[3].chain && g.nodes[3].stage == 1 && g.nodes[4].stage == 2,
                      "--split-at b,c: stages %d, /b/Relu in %d (chained %d), /c/MatMul in %d", g.n_stages,
                      g.nodes[2].stage, g.nodes[2].chain, g.nodes[4].stage);
            pp_graph_free(&g);
        }
}

/* pp_attention_chains and the partitioner: x [2,4] -> /q/Div (by a scalar: Q's scale) ->
 *   /a/MatMul (q, w) [2,4] -> /a/Mul (by a scalar) -> /a/Softmax -> /b/MatMul (the probabilities, v)
 * with v = /v/Transpose(/v/Relu(x)) [4,2] computed between the Mul and the Softmax in the node order,
 * then /c/Relu (a post-op of /b/MatMul), /c/MatMul + /d/Relu, /d/MatMul, /e/Softmax, /e/MatMul +
 * /f/Sigmoid: 5 units. At every -pp 1..5 and policy: no cut before nodes 1..6 (Q's scale's MatMul and
 * the pattern's, with v's between), node 1 marks the pattern, /a/Mul keeps its chain mark (a MatMul's
 * post-op) and the pattern's other nodes none; --split-at v (inside the pattern) moves past it and
 * /b/MatMul's chain to /c/MatMul. /d/MatMul, /e/Softmax, /e/MatMul is no pattern: the probabilities are a
 * graph output. */
static void test_attention_chains(void) {
    const pp_policy pols[] = {PP_POLICY_UNIFORM, PP_POLICY_FLOPS, PP_POLICY_MEMORY, PP_POLICY_AUTO, PP_POLICY_CUSTOM};
    for (int pi = 0; pi < 5; pi++)
        for (int p = 1; p <= (pi == 4 ? 1 : 5); p++) {
            pp_graph g;
            pp_err e = {0};
            int x = graph_x24(&g, 0, &e);
            const int w = const_mat(&g, "w", 4, 4), c = const_mat(&g, "c", 1, 0), w2 = const_mat(&g, "w2", 2, 4);
            int v[16];
            for (int i = 0; i < 16; i++) {
                char nm[8];
                snprintf(nm, sizeof nm, "v%d", i);
                v[i] = value(&g, nm);
            }
            node(&g, PP_OP_DIV, "/q/Div", x, c, v[13]);
            node(&g, PP_OP_MATMUL, "/a/MatMul", v[13], w, v[0]);
            node(&g, PP_OP_MUL, "/a/Mul", v[0], c, v[1]);
            node(&g, PP_OP_RELU, "/v/Relu", x, -1, v[2]);
            node(&g, PP_OP_TRANSPOSE, "/v/Transpose", v[2], -1, v[3]);
            node(&g, PP_OP_SOFTMAX, "/a/Softmax", v[1], -1, v[4]);
            node(&g, PP_OP_MATMUL, "/b/MatMul", v[4], v[3], v[5]); /* [2,2] */
            node(&g, PP_OP_RELU, "/c/Relu", v[5], -1, v[6]);
            node(&g, PP_OP_MATMUL, "/c/MatMul", v[6], w2, v[7]); /* [2,4] */
            node(&g, PP_OP_RELU, "/d/Relu", v[7], -1, v[8]);
            node(&g, PP_OP_MATMUL, "/d/MatMul", v[8], w, v[9]);
            node(&g, PP_OP_SOFTMAX, "/e/Softmax", v[9], -1, v[10]);
            node(&g, PP_OP_MATMUL, "/e/MatMul", v[10], v[3], v[11]); /* [2,2]: the scores also an output */
            node(&g, PP_OP_SIGMOID, "/f/Sigmoid", v[11], -1, v[12]);
            pp_graph_add_output(&g, v[12], &e);
            pp_graph_add_output(&g, v[10], &e);
            pp_compile_opts co;
            pp_compile_opts_init(&co);
            co.n_stages = p;
            co.policy = pols[pi];
            co.n_disabled = 3;
            co.disabled[0] = "fuse";
            co.disabled[1] = "simplify";
            co.disabled[2] = "fold";
            if (pi == 4) {
                co.n_stages = 0;
                co.n_split_at = 1;
                co.split_at[0] = "v"; /* before /v/Relu, inside /a's pattern: moves to /c/MatMul */
            }
            pp_status s = pp_run_passes(&g, &co, &e);
            CHECK(s == PP_OK, "policy %s p %d: %s", pp_policy_name(pols[pi]), p, e.msg);
            if (s != PP_OK || g.n_nodes != 14) {
                CHECK(s != PP_OK, "%d nodes, want 14", g.n_nodes);
                pp_graph_free(&g);
                continue;
            }
            for (int i = 1; i <= 6; i++)
                CHECK(g.nodes[i].stage == g.nodes[0].stage, "policy %s p %d: a cut before %s", pp_policy_name(pols[pi]),
                      p, g.nodes[i].name);
            CHECK(g.nodes[1].pattern == PP_PATTERN_ATTENTION && g.nodes[2].chain && !g.nodes[4].chain &&
                      !g.nodes[5].chain && !g.nodes[6].chain,
                  "policy %s p %d: pattern %d, chain marks %d %d %d %d", pp_policy_name(pols[pi]), p,
                  g.nodes[1].pattern, g.nodes[2].chain, g.nodes[4].chain, g.nodes[5].chain, g.nodes[6].chain);
            for (int i = 0; i < 14; i++)
                CHECK(i == 1 || g.nodes[i].pattern == PP_PATTERN_NONE, "policy %s p %d: %s marked",
                      pp_policy_name(pols[pi]), p, g.nodes[i].name);
            if (pi == 4)
                CHECK(g.n_stages == 2 && g.nodes[7].stage == 0 && g.nodes[8].stage == 1,
                      "--split-at v: stages %d, /c/Relu in %d, /c/MatMul in %d", g.n_stages, g.nodes[7].stage,
                      g.nodes[8].stage);
            pp_graph_free(&g);
        }
}

/* pp_attention_chains with an Add of a mask (pp_attn_mask): x [2,4] -> /a/MatMul (x, w [4,4]) -> /a/Div (by a
 * scalar) -> [the Add] -> /a/Softmax -> /b/MatMul (the probabilities, w): the pattern ends at /b/MatMul where the
 * Add adds a mask after the scale (either operand order; the mask [1,4] broadcast over the rows, [2,4] whole, a
 * [4] vector), and is none where the Add comes before the scale, adds the scores to themselves, or its mask
 * [1,2,4] has more dims than the scores (the Add's output is not the scores' shape). */
/* values v0..v<n-1> of g into v[] */
static void values_v(pp_graph *g, int *v, int n) {
    for (int i = 0; i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "v%d", i);
        v[i] = value(g, nm);
    }
}

static void test_attention_masks(void) {
    enum { AFTER, AFTER_SWAPPED, WHOLE, VECTOR, BEFORE, SELF, WIDER, N_CASES };
    static const char *const what[] = {"after the scale", "after, mask first", "a whole [2,4] mask", "a [4] mask",
                                       "before the scale", "the scores twice", "a [1,2,4] mask"};
    for (int c = 0; c < N_CASES; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), w = const_mat(&g, "w", 4, 4), sc = const_mat(&g, "c", 1, 0);
        const int m = c == WHOLE || c == WIDER ? const_mat(&g, "m", 2, 4)
                      : c == VECTOR            ? const_mat(&g, "m", 4, 0)
                                               : const_mat(&g, "m", 1, 4);
        if (c == WIDER) g.values[m].shape = (pp_shape){3, {1, 2, 4}};
        int v[6];
        values_v(&g, v, 6);
        node(&g, PP_OP_MATMUL, "/a/MatMul", x, w, v[0]);
        if (c == BEFORE) {
            node(&g, PP_OP_ADD, "/a/Add", v[0], m, v[1]);
            node(&g, PP_OP_DIV, "/a/Div", v[1], sc, v[2]);
        } else {
            node(&g, PP_OP_DIV, "/a/Div", v[0], sc, v[1]);
            node(&g, PP_OP_ADD, "/a/Add", c == AFTER_SWAPPED ? m : v[1], c == AFTER_SWAPPED ? v[1] : c == SELF ? v[1] : m,
                 v[2]);
        }
        node(&g, PP_OP_SOFTMAX, "/a/Softmax", v[2], -1, v[3]);
        node(&g, PP_OP_MATMUL, "/b/MatMul", v[3], w, v[4]);
        pp_graph_add_output(&g, v[4], &e);
        bool keep[5];
        int tail[5];
        pp_status s = pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_attention_chains(&g, keep, tail, &e);
        const bool want = c <= VECTOR;
        CHECK(s == PP_OK && g.n_nodes == 5 && (tail[0] == 4) == want && (want || tail[0] == -1),
              "attention with a mask, %s: %s, tail %d (want %s)", what[c], s == PP_OK ? "ok" : e.msg,
              s == PP_OK ? tail[0] : -9, want ? "the last MatMul" : "none");
        if (s == PP_OK && want)
            for (int i = 1; i <= 4; i++) CHECK(keep[i], "attention with a mask, %s: a cut allowed before node %d", what[c], i);
        pp_graph_free(&g);
    }
}

/* pp_attention_chains with a Where (pp_attn_where): x [2,4] -> /a/MatMul -> [/a/Where before] -> /a/Mul (by a
 * scalar) -> [/a/Where after] -> /a/Softmax -> /b/MatMul: a pattern with the scores in either branch, before or
 * after the scale, its condition bool [1,4]; none with two Wheres, or where the other branch is no constant
 * scalar (x itself). */
static void test_attention_wheres(void) {
    enum { BEFORE, AFTER, ELSE_BRANCH, TWO, NOT_CONST, N_CASES };
    static const char *const what[] = {"before the scale", "after it", "the scores in the else branch",
                                       "two Wheres", "a branch of x"};
    for (int c = 0; c < N_CASES; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), w = const_mat(&g, "w", 4, 4), sc = const_mat(&g, "c", 1, 0);
        const int fill = const_mat(&g, "f", 1, 0), cond = const_mat(&g, "m", 1, 4);
        g.values[cond].dtype = PP_BOOL, g.values[cond].nbytes = 4;
        int v[7];
        values_v(&g, v, 7);
        int n = 0, cur = v[0];
        node(&g, PP_OP_MATMUL, "/a/MatMul", x, w, v[0]);
        for (int pos = 0; pos < 3; pos++) { /* 0: a Where before the scale, 1: the scale, 2: a Where after */
            if (pos == 1) {
                node(&g, PP_OP_MUL, "/a/Mul", cur, sc, v[++n]);
                cur = v[n];
                continue;
            }
            if (!(pos == 0 ? c == BEFORE || c == TWO : c != BEFORE)) continue;
            const int other = c == NOT_CONST ? x : fill;
            int id;
            if (pp_graph_add_node(&g, PP_OP_WHERE, pos ? "/a/Where_1" : "/a/Where", 3, 1, &id, &e) != PP_OK) exit(1);
            const int in[3] = {cond, c == ELSE_BRANCH ? other : cur, c == ELSE_BRANCH ? cur : other};
            for (int k = 0; k < 3; k++) g.nodes[id].in[k] = in[k];
            g.nodes[id].out[0] = v[++n];
            cur = v[n];
        }
        node(&g, PP_OP_SOFTMAX, "/a/Softmax", cur, -1, v[++n]);
        node(&g, PP_OP_MATMUL, "/b/MatMul", v[n], w, v[n + 1]);
        pp_graph_add_output(&g, v[n + 1], &e);
        bool keep[8];
        int tail[8];
        pp_status s = pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_attention_chains(&g, keep, tail, &e);
        const bool want = c <= ELSE_BRANCH;
        CHECK(s == PP_OK && (tail[0] == g.n_nodes - 1) == want && (want || tail[0] == -1),
              "attention with a Where, %s: %s, tail %d of %d nodes (want %s)", what[c], s == PP_OK ? "ok" : e.msg,
              s == PP_OK ? tail[0] : -9, g.n_nodes, want ? "the last MatMul" : "none");
        pp_graph_free(&g);
    }
}

/* pp_attention_chains with BART's frame around the mask (attn_frame): x [4,3,8] (N = 4 = B 2 x H 2) -> /a/MatMul
 * (x, k [8,3]) -> /a/Reshape (to [2,2,3,3]) -> /a/Add (a mask [2,1,1,3]) -> /a/Reshape_1 (back to [4,3,3]) ->
 * /a/Softmax -> /b/MatMul (v [3,8]): the pattern ends at /b/MatMul, every node from the first Reshape kept with it;
 * none where the Reshape back gives another shape ([2,6,3]), where the frame does not split N ([4,3,3,1], a mask
 * [1,1,1,1]), where
 * no mask is added between the Reshapes, or where the mask has more dims than the frame ([1,2,1,1,3]). */
static int const_shape(pp_graph *g, const char *name, const int64_t *d, int n) {
    static int64_t store[4][8];
    static int used;
    int64_t *data = store[used++ % 4];
    memcpy(data, d, sizeof *d * (size_t)n);
    const int v = value(g, name);
    g->values[v].dtype = PP_I64;
    g->values[v].shape = (pp_shape){1, {n}};
    g->values[v].is_const = true;
    g->values[v].data = data;
    g->values[v].nbytes = (size_t)n * 8;
    return v;
}

static void test_attention_frame(void) {
    enum { FRAME, OTHER_BACK, NO_SPLIT, NO_MASK, WIDER, N_CASES };
    static const char *const what[] = {"BART's frame", "back to [2,6,3]", "a frame [4,3,3,1]", "no mask",
                                       "a [1,2,1,1,3] mask"};
    for (int c = 0; c < N_CASES; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), k = const_mat(&g, "k", 8, 3), v = const_mat(&g, "w", 3, 8);
        g.values[x].shape = (pp_shape){3, {4, 3, 8}}, g.values[x].nbytes = 4 * 3 * 8 * 4;
        const int m = const_mat(&g, "m", 2, 3);
        g.values[m].shape = c == WIDER ? (pp_shape){5, {1, 2, 1, 1, 3}} : (pp_shape){4, {2, 1, 1, 3}};
        if (c == NO_SPLIT) g.values[m].shape = (pp_shape){4, {1, 1, 1, 1}}, g.values[m].nbytes = 4;
        const int64_t f4[4] = {2, 2, 3, 3}, f4b[4] = {4, 3, 3, 1}, back[3] = {4, 3, 3}, other[3] = {2, 6, 3};
        const int to4 = const_shape(&g, "to4", c == NO_SPLIT ? f4b : f4, 4);
        const int to3 = const_shape(&g, "to3", c == OTHER_BACK ? other : back, 3);
        int vv[6];
        values_v(&g, vv, 6);
        node(&g, PP_OP_MATMUL, "/a/MatMul", x, k, vv[0]);
        node(&g, PP_OP_RESHAPE, "/a/Reshape", vv[0], to4, vv[1]);
        if (c == NO_MASK) node(&g, PP_OP_RELU, "/a/Relu", vv[1], -1, vv[2]);
        else node(&g, PP_OP_ADD, "/a/Add", vv[1], m, vv[2]);
        node(&g, PP_OP_RESHAPE, "/a/Reshape_1", vv[2], to3, vv[3]);
        node(&g, PP_OP_SOFTMAX, "/a/Softmax", vv[3], -1, vv[4]);
        node(&g, PP_OP_MATMUL, "/b/MatMul", vv[4], v, vv[5]);
        pp_graph_add_output(&g, vv[5], &e);
        bool keep[6];
        int tail[6];
        pp_status s = pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_attention_chains(&g, keep, tail, &e);
        const bool want = c == FRAME;
        CHECK(s == PP_OK && g.n_nodes == 6 && (tail[0] == 5) == want && (want || tail[0] == -1),
              "attention in a frame, %s: %s, tail %d (want %s)", what[c], s == PP_OK ? "ok" : e.msg,
              s == PP_OK ? tail[0] : -9, want ? "the last MatMul" : "none");
        if (s == PP_OK && want)
            for (int i = 1; i <= 5; i++) CHECK(keep[i], "attention in a frame: a cut allowed before node %d", i);
        pp_graph_free(&g);
    }
}

/* pp_attention_chains with Swin's shifted windows: x [4,2,3,8] (4 = 2 batches x 2 windows, 2 heads) -> /a/MatMul
 * (x, k [8,3]) -> /a/Add (a bias [2,3,3]) -> /a/Reshape (to [2,2,2,3,3]) -> /a/Add_1 (a mask [2,1,3,3]) ->
 * /a/Reshape_1 (back to [4,2,3,3]) -> /a/Softmax -> /b/MatMul (v [3,8]): a pattern to /b/MatMul; none where
 * the frame splits the heads' dim instead of the first ([4,2,3,3,1]: another op than a split of N). */
static void test_attention_windows(void) {
    for (int c = 0; c < 2; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), k = const_mat(&g, "k", 8, 3), v = const_mat(&g, "w", 3, 8);
        g.values[x].shape = (pp_shape){4, {4, 2, 3, 8}}, g.values[x].nbytes = 4 * 2 * 3 * 8 * 4;
        const int bias = const_mat(&g, "bias", 2, 9), m = const_mat(&g, "m", 2, 9);
        g.values[bias].shape = (pp_shape){3, {2, 3, 3}};
        g.values[m].shape = c ? (pp_shape){5, {1, 1, 1, 3, 1}} : (pp_shape){4, {2, 1, 3, 3}};
        if (c) g.values[m].nbytes = 12;
        const int64_t f5[5] = {2, 2, 2, 3, 3}, f5b[5] = {4, 2, 3, 3, 1}, back[4] = {4, 2, 3, 3};
        const int to5 = const_shape(&g, "to5", c ? f5b : f5, 5), to4 = const_shape(&g, "to4", back, 4);
        int vv[8];
        values_v(&g, vv, 8);
        node(&g, PP_OP_MATMUL, "/a/MatMul", x, k, vv[0]);
        node(&g, PP_OP_ADD, "/a/Add", vv[0], bias, vv[1]);
        node(&g, PP_OP_RESHAPE, "/a/Reshape", vv[1], to5, vv[2]);
        node(&g, PP_OP_ADD, "/a/Add_1", vv[2], m, vv[3]);
        node(&g, PP_OP_RESHAPE, "/a/Reshape_1", vv[3], to4, vv[4]);
        node(&g, PP_OP_SOFTMAX, "/a/Softmax", vv[4], -1, vv[5]);
        node(&g, PP_OP_MATMUL, "/b/MatMul", vv[5], v, vv[6]);
        pp_graph_add_output(&g, vv[6], &e);
        bool keep[7];
        int tail[7];
        pp_status s = pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_attention_chains(&g, keep, tail, &e);
        const bool want = c == 0;
        CHECK(s == PP_OK && g.n_nodes == 7 && (tail[0] == 6) == want && (want || tail[0] == -1),
              "attention in windows, %s: %s, tail %d (want %s)", c ? "a frame that splits no batch" : "Swin's",
              s == PP_OK ? "ok" : e.msg, s == PP_OK ? tail[0] : -9, want ? "the last MatMul" : "none");
        pp_graph_free(&g);
    }
}

/* pp_attention_chains with SwinV2's scale per head: x [4,2,3,8] -> /a/MatMul (x, k [8,3]) -> /a/Mul (a constant
 * [2,1,1]) -> /a/Add (a bias [2,3,3]) -> /a/Softmax -> /b/MatMul (v [3,8]): a pattern; none where the constant
 * scales rows ([1,3,1]) or heads and rows ([2,3,1]). */
static void test_attention_head_scale(void) {
    static const pp_shape scales[3] = {{3, {2, 1, 1}}, {3, {1, 3, 1}}, {3, {2, 3, 1}}};
    for (int c = 0; c < 3; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), k = const_mat(&g, "k", 8, 3), v = const_mat(&g, "w", 3, 8);
        g.values[x].shape = (pp_shape){4, {4, 2, 3, 8}}, g.values[x].nbytes = 4 * 2 * 3 * 8 * 4;
        const int bias = const_mat(&g, "bias", 2, 9), ls = const_mat(&g, "ls", 6, 0);
        g.values[bias].shape = (pp_shape){3, {2, 3, 3}};
        g.values[ls].shape = scales[c], g.values[ls].nbytes = (size_t)(scales[c].dim[0] * scales[c].dim[1] * scales[c].dim[2]) * 4;
        int vv[6];
        values_v(&g, vv, 6);
        node(&g, PP_OP_MATMUL, "/a/MatMul", x, k, vv[0]);
        node(&g, PP_OP_MUL, "/a/Mul", vv[0], ls, vv[1]);
        node(&g, PP_OP_ADD, "/a/Add", vv[1], bias, vv[2]);
        node(&g, PP_OP_SOFTMAX, "/a/Softmax", vv[2], -1, vv[3]);
        node(&g, PP_OP_MATMUL, "/b/MatMul", vv[3], v, vv[4]);
        pp_graph_add_output(&g, vv[4], &e);
        bool keep[5];
        int tail[5];
        pp_status s = pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_attention_chains(&g, keep, tail, &e);
        const bool want = c == 0;
        CHECK(s == PP_OK && g.n_nodes == 5 && (tail[0] == 4) == want && (want || tail[0] == -1),
              "attention scaled per head, a [%lld,%lld,%lld] scale: %s, tail %d (want %s)", (long long)scales[c].dim[0],
              (long long)scales[c].dim[1], (long long)scales[c].dim[2], s == PP_OK ? "ok" : e.msg,
              s == PP_OK ? tail[0] : -9, want ? "the last MatMul" : "none");
        pp_graph_free(&g);
    }
}

/* pp_simplify's Dropout: x [2,4] -> /d/Dropout (x, ratio, training_mode) -> /r/Relu -> y. Removed (y reads x
 * through the Relu) in inference (no training_mode, or a constant false) and in training mode with a constant
 * ratio of 0 (f32 0, f16 -0: every element kept, scaled by 1); kept with a ratio of 0.5, with its mask read (a
 * graph output), or with a ratio that is not a constant (an input). */
static void test_dropout_noop(void) {
    enum { INFER, FALSE_MODE, RATIO0, RATIO_NEG0_F16, RATIO_HALF, MASK_READ, RATIO_INPUT, N_CASES };
    static const char *const what[] = {"inference", "training_mode false", "ratio 0 in training",
                                       "an f16 ratio of -0", "ratio 0.5", "its mask an output", "a ratio input"};
    static const float zero = 0.0f, half = 0.5f;
    static const uint16_t neg0_f16 = 0x8000;
    static const uint8_t yes = 1, no = 0;
    for (int c = 0; c < N_CASES; c++) {
        pp_graph g;
        pp_err e = {0};
        const int x = graph_x24(&g, 0, &e), r = value(&g, "ratio"), t = value(&g, "training_mode");
        g.values[r].dtype = c == RATIO_NEG0_F16 ? PP_F16 : PP_F32, g.values[r].shape = (pp_shape){0, {0}};
        g.values[r].nbytes = c == RATIO_NEG0_F16 ? 2 : 4;
        g.values[r].data = c == RATIO_NEG0_F16 ? (const void *)&neg0_f16 : c == RATIO_HALF ? (const void *)&half
                                                                                             : (const void *)&zero;
        if (c == RATIO_INPUT) g.values[r].data = NULL, pp_graph_add_input(&g, r, &e);
        else g.values[r].is_const = true;
        g.values[t].dtype = PP_BOOL, g.values[t].shape = (pp_shape){0, {0}}, g.values[t].nbytes = 1;
        g.values[t].is_const = true, g.values[t].data = c == FALSE_MODE ? &no : &yes;
        int v[3];
        values_v(&g, v, 3);
        int id;
        if (pp_graph_add_node(&g, PP_OP_DROPOUT, "/d/Dropout", c == INFER ? 1 : 3, 2, &id, &e) != PP_OK) exit(1);
        g.nodes[id].in[0] = x;
        if (c != INFER) g.nodes[id].in[1] = r, g.nodes[id].in[2] = t;
        g.nodes[id].out[0] = v[0], g.nodes[id].out[1] = v[1];
        node(&g, PP_OP_RELU, "/r/Relu", v[0], -1, v[2]);
        pp_graph_add_output(&g, v[2], &e);
        if (c == MASK_READ) pp_graph_add_output(&g, v[1], &e);
        /* (inference refuses a training-mode Dropout with a nonzero ratio: simplify sees it uninferred) */
        pp_status s = c == RATIO_HALF ? PP_OK : pp_graph_infer(&g, &e);
        if (s == PP_OK) s = pp_simplify(&g, &e);
        int dropouts = 0;
        for (int i = 0; i < g.n_nodes; i++) dropouts += !g.nodes[i].dead && g.nodes[i].op == PP_OP_DROPOUT;
        const bool want_gone = c <= RATIO_NEG0_F16;
        CHECK(s == PP_OK && dropouts == (want_gone ? 0 : 1), "Dropout, %s: %s, %d left (want %d)", what[c],
              s == PP_OK ? "ok" : e.msg, dropouts, want_gone ? 0 : 1);
        pp_graph_free(&g);
    }
}

/* The report's layout (passes/layout.c) on random DAGs: edges run down
 * through one bend per layer, items of a layer keep their order and spacing,
 * every use of a value is an edge; and comparing the policies
 * (passes/compare.c) gives the staged graph back unchanged. */
static void test_layout_and_compare(void) {
    for (uint32_t seed = 0; seed < 16; seed++) {
        pp_graph g;
        int n = 4 + (int)(seed * 5 % 40);
        build_dag(&g, n, 2, seed);
        pp_compile_opts co;
        pp_compile_opts_init(&co);
        co.n_stages = 1 + (int)(seed % 3);
        co.policy = seed % 2 ? PP_POLICY_UNIFORM : PP_POLICY_AUTO;
        pp_err e = {0};
        if (pp_run_passes(&g, &co, &e) != PP_OK) {
            CHECK(0, "seed %u: %s", seed, e.msg);
            pp_graph_free(&g);
            continue;
        }
        pp_layout L;
        if (pp_layout_graph(&g, 150, &L, &e) != PP_OK) {
            CHECK(0, "layout: %s", e.msg);
            pp_graph_free(&g);
            continue;
        }
        int uses = 0;
        for (int i = 0; i < g.n_nodes; i++)
            for (int k = 0; k < g.nodes[i].n_in; k++) {
                bool dup = false;
                for (int j = 0; j < k; j++) dup |= g.nodes[i].in[j] == g.nodes[i].in[k];
                uses += !dup && g.nodes[i].in[k] >= 0 && !g.values[g.nodes[i].in[k]].is_const;
            }
        CHECK(L.n_edges == uses + g.n_outputs, "seed %u: %d edges for %d uses and %d outputs", seed, L.n_edges, uses,
              g.n_outputs);
        for (int k = 0; k < L.n_edges; k++) {
            const pp_layout_edge *E = &L.edges[k];
            int l0 = L.items[E->src].layer, l1 = L.items[E->dst].layer;
            CHECK(l1 > l0 && E->n == l1 - l0 + 1, "seed %u: edge %d from layer %d to %d has %d points", seed, k, l0,
                  l1, E->n);
            for (int q = 1; q < E->n; q++)
                CHECK(L.items[L.path[E->first + q]].layer == l0 + q, "seed %u: edge %d skips a layer", seed, k);
        }
        for (int a = 0; a < L.n_items; a++)
            for (int b = 0; b < L.n_items; b++) {
                const pp_layout_item *A = &L.items[a], *B = &L.items[b];
                if (A->layer != B->layer || A->order + 1 != B->order) continue;
                CHECK(B->x - A->x >= (A->w + B->w) / 2 + 10 - 1e-6, "seed %u: items %d and %d overlap (x %g, %g)",
                      seed, a, b, A->x, B->x);
            }
        pp_layout_free(&L);
        /* the policies compared, then the same split again */
        int *stage = malloc(sizeof(int) * (size_t)g.n_nodes);
        pp_stage_info *info = malloc(sizeof *info * (size_t)g.n_stages);
        for (int i = 0; i < g.n_nodes; i++) stage[i] = g.nodes[i].stage;
        memcpy(info, g.stage_info, sizeof *info * (size_t)g.n_stages);
        pp_policy_row rows[PP_N_COMPARED];
        int n_rows = 0;
        CHECK(pp_compare_policies(&g, &co, rows, &n_rows, &e) == PP_OK && n_rows == PP_N_COMPARED, "compare: %s",
              e.msg);
        for (int i = 0; i < g.n_nodes; i++) CHECK(g.nodes[i].stage == stage[i], "seed %u: node %d moved", seed, i);
        CHECK(memcmp(info, g.stage_info, sizeof *info * (size_t)g.n_stages) == 0, "seed %u: stage figures changed",
              seed);
        for (int r = 0; r < n_rows; r++) {
            if (rows[r].policy != co.policy) continue;
            double mx = 0;
            for (int st = 0; st < g.n_stages; st++) mx = fmax(mx, info[st].est_ms);
            CHECK(rows[r].ok && rows[r].bottleneck_ms == mx && rows[r].n_stages == g.n_stages,
                  "seed %u: the %s row says %g ms, the split %g", seed, pp_policy_name(co.policy), rows[r].bottleneck_ms,
                  mx);
        }
        check_boundaries(&g);
        free(stage);
        free(info);
        pp_graph_free(&g);
    }
}

/* The drivers' per-stage record (runtime/run.c): a record sent as its flat
 * message reads back the same on the writer, a wrong micro-batch count is
 * refused naming the rank, and pprt_stats_of sums and spans the records as
 * both drivers rely on. */
static void test_stage_records(void) {
    pprt_stage stages[2] = {{.index = 0, .n_nodes = 2}, {.index = 1, .n_nodes = 3}};
    pprt_plan p = {.n_stages = 2, .stages = stages, .batch = 4};
    const int K = 2, R = 2;
    const pprt_shares sh = {4, 5, 18, R}; /* 5 micro-batches of 4 (18 samples): replica 0 takes 2, replica 1 takes 3 */
    pprt_stage_rec sent[4], got[4];
    pp_err err = {0};
    for (int q = 0; q < K * R; q++) {
        CHECK(pprt_rec_init(&sent[q], &p, &sh, q % K, q / K, q, true, true, &err) == PP_OK, "%s", err.msg);
        CHECK(pprt_rec_init(&got[q], &p, &sh, q % K, q / K, q, true, true, &err) == PP_OK, "%s", err.msg);
        pprt_stage_rec *r = &sent[q];
        CHECK(r->mbs == (q / K ? 3 : 2) && r->mb0 == (q / K ? 2 : 0), "rank %d's share", q);
        CHECK((r->t_start != NULL) == (q % K == 0) && (r->t_end != NULL) == (q % K == 1), "rank %d's ends", q);
        r->busy = 0.5 + q, r->t_loop0 = 10 + q, r->t_loop1 = 20 + q, r->rss = 1000.0 * (q + 1);
        r->counts = (pprt_exec_counts){.nodes = r->n_nodes, .library = q + 1, .own = q,      .fused = 2,
                                       .views = 3,          .reference = 4,    .layout_changes = 7,
                                       .copies = 5,         .in_place = 6,     .own_layout = 8,
                                       .weight_bytes = 123456789.0};
        for (int i = 0; i < r->n_nodes; i++) r->node_s[i] = 0.001 * (q + 1) * (i + 1);
        for (int64_t j = 0; j < r->mbs; j++) {
            if (r->t_start) r->t_start[j] = 11 + q + 0.1 * (double)j;
            if (r->t_end) r->t_end[j] = 12 + q + 0.1 * (double)j;
        }
        for (int64_t j = 0; j < r->mbs * PPRT_TRACE_T; j++) r->tr.t[j] = 13 + (double)j;
        for (int64_t j = 0; j < r->tr.n_node_mb * r->n_nodes; j++) r->tr.node_s[j] = 0.25 * (double)j;
        pprt_rec_shift(r, 0.5);
        pprt_rec_pack(r);
        CHECK(got[q].len == r->len, "rank %d: %zu doubles sent, %zu expected", q, r->len, got[q].len);
        memcpy(got[q].msg, r->msg, r->len * sizeof *r->msg);
        CHECK(pprt_rec_unpack(&got[q], &err) == PP_OK, "%s", err.msg);
        CHECK(got[q].busy == r->busy && got[q].t_loop0 == 10.5 + q && got[q].t_loop1 == 20.5 + q && got[q].rss == r->rss,
              "rank %d's head", q);
        CHECK(!memcmp(&got[q].counts, &r->counts, sizeof r->counts), "rank %d's counts", q);
        CHECK(got[q].tr.t[0] == 13.5 && (!got[q].t_start || got[q].t_start[0] == 11.5 + q), "rank %d's times", q);
    }
    got[3].msg[4] = 2; /* REC_MBS: rank 3 says it ran 2 */
    CHECK(pprt_rec_unpack(&got[3], &err) != PP_OK && strstr(err.msg, "rank 3 ran 2 micro-batches, expected 3"),
          "a wrong count: %s", err.msg);
    got[3].msg[4] = 3;
    pprt_stats st = {0};
    const pprt_stats_ctx c = {.threads = 2, .backend = "ref", .trace = true};
    CHECK(pprt_stats_of(&p, &sh, got, K * R, &c, &st, &err) == PP_OK, "%s", err.msg);
    CHECK(st.n_stages == 2 && st.stages[0].busy_s == 0.5 + 2.5 && st.stages[1].busy_s == 1.5 + 3.5, "busy summed");
    CHECK(st.wall_s == 23.5 - 10.5 && st.peak_rss == 4000 && st.threads == 2 && !strcmp(st.backend, "ref") &&
              !st.stages[0].backend, "wall %g, rss %zu", st.wall_s, st.peak_rss);
    CHECK(st.stages[1].exec.own == 1 && st.stages[1].exec.weight_bytes == 123456789.0, "replica 0's counts");
    /* node 1 of stage 1: 0.004 s (rank 1) + 0.008 s (rank 3), as mean ms per micro-batch of 5 */
    CHECK(fabs(st.node_ms[2 + 1] - 1e3 * (0.004 + 0.008) / 5) < 1e-12, "node ms %g", st.node_ms[3]);
    /* micro-batch 2 is replica 1's first: in at 11.5 + 2, out at 12.5 + 3 */
    CHECK(fabs(st.latency_ms[2] - 2000) < 1e-9 && st.micro_batches == 5, "latency %g", st.latency_ms[2]);
    CHECK(st.trace && st.trace->n_tracks == 4 && st.trace->t0 == 10.5 && st.trace->tracks[3].rank == 3 &&
              st.trace->tracks[3].mb0 == 2 && st.trace->tracks[3].t[1] == 14.5, "the trace");
    pprt_trace_free(st.trace);
    free(st.stages), free(st.latency_ms), free(st.node_ms);
    for (int q = 0; q < K * R; q++) pprt_rec_free(&sent[q]), pprt_rec_free(&got[q]);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void) {
    /* every file this test writes (plans, npy files, a source) goes to a private
     * directory, so running it from the source tree leaves nothing behind */
    char dir[] = "/tmp/test_core.XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) {
        perror("test_core: a private directory under /tmp");
        return 1;
    }
    test_sizes();
    test_npy();
    for (int len = 2; len <= 12; len += 5)
        for (int pp = 1; pp <= len && pp <= 5; pp++) test_chain_split(len, pp, 3, 10);
    test_chain_split(12, 4, 1, 7);
    test_chain_split(12, 2, 8, 3); /* fewer samples than one micro-batch */
    test_corrupt_plan();
    test_file_names();
    test_ref_plan();
    test_forged_plan();
    test_slots_vs_pairs();
    test_outfile_registry();
    test_json();
    test_minmax_vs_brute();
    test_random_dags();
    test_fusion_chains();
    test_attention_chains();
    test_attention_masks();
    test_attention_wheres();
    test_attention_frame();
    test_attention_windows();
    test_attention_head_scale();
    test_dropout_noop();
    test_layout_and_compare();
    test_capped_split();
    test_stage_records();
    int rc = check_summary("test_core");
    if (chdir("/") != 0 || nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) perror("test_core: removing its directory");
    return rc;
}
