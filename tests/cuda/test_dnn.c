/* test_dnn.c: the cuDNN operation graphs of the CUDA backend's convolution
 * steps, validated without a GPU (cuDNN 9.19 finalizes tensor, convolution,
 * pointwise and operation descriptors and the operation graph without a
 * device or handle, checking that the dims, pads, strides, dilations and
 * groups fit together; engine heuristics finalize too but return no engine
 * without a device, so they are not tested here).
 *   test_dnn PLAN...  every convolution step of every stage of each plan:
 *                     the fused graph and the convolution alone finalize,
 *                     with engines (ENGINE_GLOBAL_COUNT > 0); and the same
 *                     step with an output one wider is refused;
 *   then a sweep: 1-3-D, groups, dilations, strides, asymmetric pads,
 *   transposed (backward data), backward filter, with and without bias,
 *   residual, Relu/Clip; each also with HALF and BFLOAT16 tensors (ppcc
 *   --precision's half plans; the backward ones a mixed-precision training
 *   plan's half route), and the 2-D forward ones channels-last (--cuda-layout
 *   nhwc: NHWC strides, f32 and half; backward data in f32, as the planner
 *   takes ConvTranspose). Given training plans, their pp.ConvGradX and
 *   pp.ConvGradW steps are checked as the forward convolutions are (a bf16
 *   training plan's: on HALF/BFLOAT16 tensors, pprt's default
 *   --cuda-half-products on).
 *   --devprop FILE (any number, before the plans): a GPU's description
 *                     captured on it (tests/cuda/devprop/, cuDNN 9.8+); every
 *                     graph above then also gets the executors' engine
 *                     (pcu_dnn_choose: deterministic, strict f32, the
 *                     workspace) as an execution plan finalized for that GPU
 *                     without it; the convolution alone must get one (the
 *                     fused graph may not: the executor then runs it alone).
 *                     A description from another cuDNN version than the one
 *                     loaded is skipped with a note.
 *                     With a description, the tactic table built in for the
 *                     same GPU and cuDNN (runtime/cuda/tactics/, the same
 *                     name), if any: each plan's convolution whose signature
 *                     it holds gets the tactic's engine as an execution plan
 *                     for that GPU without it, or fails.
 *   --capture DIR     (needs a GPU; the GPU day) the description of GPU 0
 *                     into DIR/<name>_cc<major><minor>_cudnn<version>.json,
 *                     whole or not at all, and nothing else.
 *   --tune FILE [--tune-fast] [--tune-secs S] PLAN...  (needs a GPU; the GPU
 *                     day) the tactic table of GPU 0 for the plans'
 *                     convolutions into FILE (tune_dnn.c), and nothing else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "runtime/cuda/dnn.h"
#include "conv_steps.h"
#include "tune_dnn.h"

static int failures, graphs, plans;
static cudnnBackendDescriptor_t devprops[8];
static const char *devprop_names[8];
static int n_devprops;
static pcu_tactics tactics[8]; /* the built-in table of each described GPU (empty: none) */
static int tactic_plans;

/* The executors' engine for graph g on each described GPU (mode A, then the fallback list). */
static void choose_deviceless(const pcu_dnn *g, bool fused, bool strict, const char *what) {
    for (int d = 0; d < n_devprops; d++) {
        pcu_dnn_pick k = {0};
        pp_err e = {0};
        const pp_status st = pcu_dnn_choose_any(g, NULL, devprops[d], strict, PCU_LIB_WORKSPACE, &k, &e);
        if (k.plan) {
            plans++;
            cudnnBackendDestroyDescriptor(k.plan);
        } else if (!fused || st != PP_OK) {
            if (failures++ < 20)
                fprintf(stderr, "FAIL %s (%s) on %s: no execution plan: %s%lld configs, refused %d non-deterministic, "
                        "%d reduced-precision, %d over the workspace, %d without a plan\n", what,
                        fused ? "fused" : "alone", devprop_names[d], st != PP_OK ? e.msg : "", (long long)k.configs,
                        k.refused[0], k.refused[1], k.refused[2], k.refused[3]);
        }
    }
}

static char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*len + 1)) && fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    return buf;
}

/* --devprop FILE: loaded when FILE's name carries this cuDNN's version ("_cudnn<version>."), else skipped. */
static int load_devprop(const char *path) {
    char tag[32];
    snprintf(tag, sizeof tag, "_cudnn%zu.", cudnnGetVersion());
    if (!strstr(path, tag)) {
        printf("test_dnn: %s: not this cuDNN's (%zu) description: skipped\n", path, cudnnGetVersion());
        return 0;
    }
    long len = 0;
    char *json = slurp(path, &len);
    pp_err e = {0};
    if (!json || n_devprops == 8 || pcu_devprop_load(json, len, &devprops[n_devprops], &e) != PP_OK) {
        fprintf(stderr, "FAIL --devprop %s: %s\n", path, json ? e.msg : "cannot read it");
        free(json);
        return 1;
    }
    free(json);
    /* its tactic table: the file's stem */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char stem[256];
    snprintf(stem, sizeof stem, "%s", base);
    if (strrchr(stem, '.')) *strrchr(stem, '.') = 0;
    size_t tl = 0;
    const char *text = pcu_tactics_builtin(stem, &tl);
    if (text && pcu_tactics_parse(text, tl, stem, &tactics[n_devprops], &e) != PP_OK) {
        fprintf(stderr, "FAIL the built-in tactic table %s: %s\n", stem, e.msg);
        return 1;
    }
    if (text) printf("test_dnn: %s: %d tactics built in\n", stem, tactics[n_devprops].n);
    devprop_names[n_devprops++] = path;
    return 0;
}

/* --capture DIR: GPU 0's description, as DIR/<its name>_cc<major><minor>_cudnn<version>.json (written
 * whole or not at all: pp_outfile). */
static int capture(const char *dir) {
    cudnnHandle_t h = NULL;
    char *json = NULL, path[4096], name[256];
    int64_t len = 0;
    pp_err e = {0};
    cudnnStatus_t st = cudaSetDevice(0) == cudaSuccess && pcu_dnn_gpu_stem(0, name, sizeof name)
                           ? cudnnCreate(&h)
                           : CUDNN_STATUS_NOT_INITIALIZED;
    if (st != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "test_dnn --capture: no cuDNN handle on GPU 0: %s\n", cudnnGetErrorString(st));
        return 2;
    }
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    pp_outfile out;
    pp_status s = pcu_devprop_capture(h, &json, &len, &e);
    cudnnDestroy(h);
    if (s == PP_OK) s = pp_outfile_open(&out, path, &e);
    if (s == PP_OK) s = pp_outfile_commit(&out, fwrite(json, 1, (size_t)len, out.f) == (size_t)len, &e);
    free(json);
    if (s != PP_OK) {
        fprintf(stderr, "test_dnn --capture %s: %s\n", path, e.msg);
        return 2;
    }
    printf("test_dnn: GPU 0's description (%lld bytes, cuDNN %zu) in %s\n", (long long)len, cudnnGetVersion(), path);
    return 0;
}

/* Convolution c's tactic (the convolution alone; strict f32 or not, as the executor) on each described GPU
 * whose table holds it */
static void check_tactic(const pcu_conv *c, const pcu_dnn *g, bool strict, const char *what) {
    char sig[PCU_TACTIC_SIG];
    if (!pcu_conv_signature(c, false, strict, sig, sizeof sig)) return;
    for (int d = 0; d < n_devprops; d++) {
        const pcu_tactic *t = pcu_tactics_find(&tactics[d], sig);
        if (!t) continue;
        pcu_dnn_pick k;
        pp_err e = {0};
        if (pcu_dnn_tactic(g, NULL, devprops[d], strict, t, PCU_LIB_WORKSPACE, &k, &e) == PP_OK && k.plan) {
            tactic_plans++;
            cudnnBackendDestroyDescriptor(k.plan);
        } else if (failures++ < 20) {
            fprintf(stderr, "FAIL %s on %s: its tactic (engine %lld) gives no execution plan: %s%s\n", what,
                    devprop_names[d], (long long)t->gidx, e.msg, k.refused[3] ? "cuDNN refused it" : "the filter refused it");
        }
    }
}

static void check(const pcu_conv *c, const char *what);

/* check() for each convolution step of a plan (pcu_each_conv) */
typedef struct check_ctx {
    const char *plan;
    int convs;
} check_ctx;

static void check_step(const pcu_conv *c, const char *node, void *ctx) {
    check_ctx *cc = ctx;
    char what[160];
    snprintf(what, sizeof what, "%s node '%s'", cc->plan, node);
    check(c, what);
    cc->convs++;
}

static void check(const pcu_conv *c, const char *what) {
    for (int fused = 1; fused >= 0; fused--) {
        pcu_dnn g;
        pp_err e = {0};
        if (pcu_dnn_conv(c, fused, NULL, &g, &e) != PP_OK || g.engines < 1) {
            if (failures++ < 20) fprintf(stderr, "FAIL %s (%s): %s, %lld engines\n", what, fused ? "fused" : "alone", e.msg, (long long)g.engines);
        } else {
            /* (a half plan's convolution takes tensor cores: not strict f32, as the executor chooses) */
            const bool strict = c->dt != PCU_T_F16 && c->dt != PCU_T_BF16;
            choose_deviceless(&g, fused && g.fused, strict, what);
            if (!fused) check_tactic(c, &g, strict, what);
        }
        graphs++;
        pcu_dnn_free(&g);
    }
    pcu_conv bad = *c;
    /* one output column too many (backward data: one dy column, since
     * several dx widths can give the same dy at a stride > 1; backward
     * filter: one dy column, its y) */
    if (c->transpose) bad.x[2 + bad.nsp - 1] += 1;
    else bad.y[2 + bad.nsp - 1] += 1;
    pcu_dnn g;
    pp_err e = {0};
    if (pcu_dnn_conv(&bad, false, NULL, &g, &e) == PP_OK) {
        if (failures++ < 20) fprintf(stderr, "FAIL %s: a wrong output width was accepted\n", what);
    }
    pcu_dnn_free(&g);
}

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
    return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

static void sweep(void) {
    int n = 0;
    for (int nsp = 1; nsp <= 3; nsp++)
        for (int groups = 1; groups <= 4; groups *= 2)
            for (int dil = 1; dil <= 2; dil++)
                for (int stride = 1; stride <= 2; stride++)
                    for (int tr = 0; tr <= 2; tr++) /* forward, backward data, backward filter */
                        for (int extra = 0; extra < 3; extra++) {
                            pcu_conv c = {.transpose = tr == 1, .wgrad = tr == 2, .nsp = nsp == 3 ? 3 : 2,
                                          .groups = groups};
                            const int64_t C = 4 * groups, K = 2 * groups, k = 3, in = 9;
                            const int64_t p0 = 1, p1 = extra == 1 ? 2 : 1; /* asymmetric pads */
                            const int lift = nsp == 1, nd = 2 + c.nsp;
                            int64_t sp[3];
                            for (int d = 0; d < c.nsp; d++) {
                                const bool unit = lift && d == 0;
                                c.pre[d] = unit ? 0 : p0;
                                c.post[d] = unit ? 0 : p1;
                                c.stride[d] = unit ? 1 : stride;
                                c.dil[d] = unit ? 1 : dil;
                                sp[d] = unit ? 1 : in;
                            }
                            /* forward dims: X [N, C, in], W [K, C/g, k], Y [N, K, out] */
                            int64_t x[5] = {2, C}, w[5] = {K, C / groups}, y[5] = {2, K};
                            for (int d = 0; d < c.nsp; d++) {
                                const bool unit = lift && d == 0;
                                x[2 + d] = sp[d];
                                w[2 + d] = unit ? 1 : k;
                                y[2 + d] = unit ? 1 : out_dim(sp[d], k, c.stride[d], c.dil[d], c.pre[d], c.post[d]);
                            }
                            /* backward data (ConvTranspose, pp.ConvGradX): the step's X is dy [N, K, out], its
                             * Y dx [N, C, in]; backward filter (pp.ConvGradW): X, W is dw, Y is dy */
                            memcpy(c.x, tr == 1 ? y : x, sizeof c.x);
                            memcpy(c.w, w, sizeof c.w);
                            memcpy(c.y, tr == 1 ? x : y, sizeof c.y);
                            (void)nd;
                            c.has_bias = extra >= 1 && tr != 2;
                            c.has_res = extra == 2 && !tr;
                            c.act = tr == 2 ? 0 : extra == 2 ? 2 : extra;
                            c.lo = 0, c.hi = 6;
                            char what[96];
                            snprintf(what, sizeof what, "sweep %d-D groups %d dil %d stride %d%s extra %d", nsp, groups,
                                     dil, stride, tr == 1 ? " backward data" : tr == 2 ? " backward filter" : "", extra);
                            check(&c, what);
                            n++;
                            /* channels-last (--cuda-layout nhwc, a 2-D forward convolution): x, y and the
                             * residual NHWC, w KRSC, the bias alike; f32, HALF and BFLOAT16 (backward data,
                             * ConvTranspose: f32, as the planner takes it) */
                            for (int t = PCU_T_F32; tr <= 1 && c.nsp == 2 && t;
                                 t = t == PCU_T_F32 && !tr ? PCU_T_F16 : t == PCU_T_F16 ? PCU_T_BF16 : 0) {
                                pcu_conv h = c;
                                h.dt = t == PCU_T_F32 ? 0 : t, h.nhwc = 1;
                                snprintf(what, sizeof what, "sweep %d-D groups %d dil %d stride %d%s extra %d NHWC %s", nsp,
                                         groups, dil, stride, tr ? " backward data" : "", extra,
                                         t == PCU_T_F16 ? "f16" : t == PCU_T_BF16 ? "bf16" : "f32");
                                check(&h, what);
                                n++;
                            }
                            /* a half plan's convolution (ppcc --precision): HALF and BFLOAT16 tensors; backward
                             * data and filter too (a training plan's half route, plan_cuda.c half_route) */
                            for (int t = PCU_T_F16; t; t = t == PCU_T_F16 ? PCU_T_BF16 : 0) {
                                pcu_conv h = c;
                                h.dt = t;
                                snprintf(what, sizeof what, "sweep %d-D groups %d dil %d stride %d%s extra %d %s", nsp,
                                         groups, dil, stride, tr == 1 ? " backward data" : tr == 2 ? " backward filter" : "",
                                         extra, t == PCU_T_F16 ? "f16" : "bf16");
                                check(&h, what);
                                n++;
                            }
                        }
    printf("test_dnn: sweep of %d convolutions\n", n);
}

/* Attention (pcu_dnn_sdpa, --cuda-sdpa): the graph of each shape a half plan's fused attention takes
 * finalizes with engines (and, per described GPU, an execution plan is sought and counted: whether cuDNN's
 * fused-attention engines take this graph is the GPU day's to see); the shapes it must not take are refused
 * by name before cuDNN sees them. */
static int attn_plans;
static pcu_fattn attn_case(int t, int64_t b, int64_t h, int64_t grp, int64_t sq, int64_t skv, int64_t d, bool qkv) {
    pcu_fattn k = {.scale_op = 2, .scale = 8.0f, .t = t, .nb = b * h, .nh = h, .grp = grp, .Sq = sq, .T = skv,
                   .D = d, .Dv = d, .qe = 1, .ke = 1, .ve = 1};
    k.qtiles = pcu_fattn_qtiles(&k);
    const int64_t hk = h / grp;
    if (qkv) { /* Q, K, V columns of one packed [b, s, 3 * h * d] product (sq == skv), Y [b, s, h * d] */
        const int64_t row = 3 * h * d;
        k.qb = k.kb = k.vb = sq * row, k.qh = k.kh = k.vh = d, k.qi = k.kj = k.vj = row;
        k.yb = sq * h * d, k.yh = d, k.yi = h * d;
    } else { /* each [b, heads, s, d] packed */
        k.qb = h * sq * d, k.qh = sq * d, k.qi = d;
        k.kb = hk * skv * d, k.kh = skv * d, k.kj = d;
        k.vb = hk * skv * d, k.vh = skv * d, k.vj = d;
        k.yb = h * sq * d, k.yh = sq * d, k.yi = d;
    }
    return k;
}

/* Each fused attention step of a plan (--cuda-fused-attention and --cuda-stride-views on, as the GPU day runs
 * ViT): a half one's graph finalizes, or the step says why it stays on pprt's kernel */
typedef struct attn_ctx {
    const char *plan;
    int steps, graphs, unfit;
} attn_ctx;

static void attn_step(const pcu_step *s, const char *node, void *ctx) {
    attn_ctx *a = ctx;
    const pcu_fattn *k = &s->u.fa;
    a->steps++;
    if (k->t != PCU_T_F16 && k->t != PCU_T_BF16) return;
    const char *why = pcu_sdpa_unfit(k);
    for (int q = 0; q < 4 && !why; q++)
        if (s->ops[q].off % 16) why = "an operand not at a 16-byte offset";
    if (why) {
        if (a->unfit++ < 3) printf("test_dnn: %s node '%s': pprt's attention kernel: %s\n", a->plan, node, why);
        return;
    }
    pcu_dnn g;
    pp_err e = {0};
    if (pcu_dnn_sdpa(k, NULL, &g, &e) != PP_OK || g.engines < 1) {
        if (failures++ < 20) fprintf(stderr, "FAIL %s node '%s' attention: %s\n", a->plan, node, e.msg);
    } else {
        a->graphs++, graphs++;
        for (int d = 0; d < n_devprops; d++) {
            pcu_dnn_pick pk = {0};
            pp_err e2 = {0};
            pcu_dnn_choose_any(&g, NULL, devprops[d], false, PCU_LIB_WORKSPACE, &pk, &e2);
            if (pk.plan) attn_plans++, cudnnBackendDestroyDescriptor(pk.plan);
        }
    }
    pcu_dnn_free(&g);
}

static int attn_steps(const char *plan) {
    attn_ctx a = {plan, 0, 0, 0};
    const pcu_plan_opts o = {.fused_attention = true, .stride_views = true};
    const int bad = pcu_each_step(plan, "FAIL", o, PCU_S_KERNEL, PCU_K_FATTN, attn_step, &a);
    if (a.steps) printf("test_dnn: %s: %d fused attention steps, %d as cuDNN graphs, %d on pprt's kernel\n", plan,
                        a.steps, a.graphs, a.unfit);
    return bad;
}

/* k with a mask added after the scale: per batch (mb), per query row (mi), each key (mj 1), heads broadcast */
static pcu_fattn with_mask(pcu_fattn k, bool per_batch, bool per_row) {
    k.mask = 1, k.mh = 0, k.mj = 1, k.mi = per_row ? k.T : 0;
    k.mb = per_batch ? (per_row ? k.Sq : 1) * k.T : 0;
    return k;
}

static void attn_sweep(void) {
    const struct {
        const char *what;
        pcu_fattn k;
        bool ok;
    } c[] = {
        {"BERT's key padding [b, 1, 1, T] bf16", with_mask(attn_case(PCU_T_BF16, 2, 12, 1, 128, 128, 64, true), 1, 0), 1},
        {"Llama's causal + padding [b, 1, S, T] bf16",
         with_mask(attn_case(PCU_T_BF16, 2, 8, 4, 128, 128, 64, false), 1, 1), 1},
        {"a constant causal [S, T] bf16", with_mask(attn_case(PCU_T_BF16, 2, 4, 1, 64, 64, 64, false), 0, 1), 1},
        {"an fp16 mask", with_mask(attn_case(PCU_T_F16, 2, 4, 1, 64, 64, 64, false), 0, 1), 0},
        {"a Where on the scores", (pcu_fattn){.t = PCU_T_BF16, .where = 2, .nb = 1, .nh = 1, .grp = 1, .D = 64,
                                              .Dv = 64, .Sq = 8, .T = 8, .qe = 1, .ke = 1, .ve = 1}, 0},
        {"ViT-B/16 (12 heads of 64, 197 tokens from one QKV product) f16", attn_case(PCU_T_F16, 2, 12, 1, 197, 197, 64, true), 1},
        {"ViT-B/16 bf16", attn_case(PCU_T_BF16, 2, 12, 1, 197, 197, 64, true), 1},
        {"grouped-query (8 heads, 2 of K and V, 128 of 128) bf16", attn_case(PCU_T_BF16, 2, 8, 4, 128, 128, 128, false), 1},
        {"one query of 77 keys, 32 wide, f16", attn_case(PCU_T_F16, 3, 4, 1, 1, 77, 32, false), 1},
        {"one head, 64 of 64", attn_case(PCU_T_F16, 1, 1, 1, 64, 64, 64, false), 1},
        {"f32", attn_case(PCU_T_F32, 2, 12, 1, 197, 197, 64, true), 0},
        {"a head of 60", attn_case(PCU_T_F16, 2, 4, 1, 16, 16, 60, false), 0},
        {"a head of 256", attn_case(PCU_T_F16, 1, 2, 1, 16, 16, 256, false), 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pcu_dnn g;
        pp_err e = {0};
        const pp_status st = pcu_dnn_sdpa(&c[i].k, NULL, &g, &e);
        if (c[i].ok && (st != PP_OK || g.engines < 1)) {
            if (failures++ < 20) fprintf(stderr, "FAIL attention %s: %s, %lld engines\n", c[i].what, e.msg, (long long)g.engines);
        } else if (!c[i].ok && (st != PP_EUNSUP || !strstr(e.msg, "cuDNN attention: "))) {
            if (failures++ < 20) fprintf(stderr, "FAIL attention %s: not refused by name (%s)\n", c[i].what, e.msg);
        } else if (c[i].ok) {
            graphs++;
            for (int d = 0; d < n_devprops; d++) {
                pcu_dnn_pick k = {0};
                pp_err e2 = {0};
                pcu_dnn_choose_any(&g, NULL, devprops[d], false, PCU_LIB_WORKSPACE, &k, &e2);
                printf("test_dnn: attention %s on %s: %s (%lld configs)\n", c[i].what, devprop_names[d],
                       k.plan ? "an execution plan" : "no execution plan", (long long)k.configs);
                if (k.plan) attn_plans++, cudnnBackendDestroyDescriptor(k.plan);
            }
        }
        pcu_dnn_free(&g);
    }
    /* a stride the engines cannot take (not 16 bytes) */
    pcu_fattn k = attn_case(PCU_T_F16, 1, 2, 1, 16, 16, 64, false);
    k.qi = 68;
    if (!pcu_sdpa_unfit(&k) && failures++ < 20) fprintf(stderr, "FAIL attention: a row stride of 68 taken\n");
    k = attn_case(PCU_T_F16, 1, 2, 1, 16, 16, 64, false);
    k.ke = 16, k.kj = 1; /* K with its keys contiguous (an unfolded transpose) */
    if (!pcu_sdpa_unfit(&k) && failures++ < 20) fprintf(stderr, "FAIL attention: K of contiguous keys taken\n");
    k = with_mask(attn_case(PCU_T_F16, 1, 2, 1, 16, 16, 64, false), 1, 1);
    k.mj = 0; /* a mask broadcast over the keys */
    if (!pcu_sdpa_unfit(&k) && failures++ < 20) fprintf(stderr, "FAIL attention: a mask of one key taken\n");
    k = attn_case(PCU_T_BF16, 2, 2, 1, 16, 16, 64, false);
    k.fmask = 1, k.fwn = 2, k.fw = 256, k.fi = 16, k.fj = 1; /* Swin's windowed mask: a second one */
    if (!pcu_sdpa_unfit(&k) && failures++ < 20) fprintf(stderr, "FAIL attention: a windowed mask taken\n");
    printf("test_dnn: attention graphs: %d execution plans on %d described GPUs\n", attn_plans, n_devprops);
}

/* The convolution steps of every stage of plan `path` appended to *cv */
typedef struct conv_list {
    pcu_conv *cv;
    int n, cap;
    bool oom;
} conv_list;

static void add_conv(const pcu_conv *c, const char *node, void *ctx) {
    conv_list *l = ctx;
    (void)node;
    if (l->n == l->cap) {
        pcu_conv *q = realloc(l->cv, (size_t)(l->cap ? 2 * l->cap : 64) * sizeof *q);
        if (!q) {
            l->oom = true;
            return;
        }
        l->cv = q, l->cap = l->cap ? 2 * l->cap : 64;
    }
    l->cv[l->n++] = *c;
}

static int tune(int argc, char **argv) {
    const char *out = argv[2];
    bool fast = false;
    double secs = 240;
    int a = 3, rc = 0;
    for (; a < argc && !strncmp(argv[a], "--tune-", 7); a++) {
        if (!strcmp(argv[a], "--tune-fast")) fast = true;
        else if (!strcmp(argv[a], "--tune-secs") && a + 1 < argc) secs = atof(argv[++a]);
        else {
            fprintf(stderr, "test_dnn --tune: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    conv_list l = {0};
    for (; a < argc && !rc; a++) rc = pcu_each_conv(argv[a], "test_dnn --tune", add_conv, &l) || l.oom ? 2 : 0;
    if (!rc) rc = tune_main(out, l.cv, l.n, fast, secs);
    free(l.cv);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--capture")) return capture(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "--tune")) return tune(argc, argv);
    int a = 1;
    for (; a + 1 < argc && !strcmp(argv[a], "--devprop"); a += 2)
        if (load_devprop(argv[a + 1])) return 1;
    if (!n_devprops) printf("test_dnn: no GPU description for this cuDNN: operation graphs only, no execution plans\n");
    for (; a < argc; a++) {
        check_ctx cc = {argv[a], 0};
        const int bad = pcu_each_conv(argv[a], "FAIL", check_step, &cc);
        if (bad < 0) return 1;
        failures += bad;
        printf("test_dnn: %s: %d convolution steps\n", argv[a], cc.convs);
        const int abad = attn_steps(argv[a]);
        if (abad < 0) return 1;
        failures += abad;
    }
    sweep();
    attn_sweep();
    printf("test_dnn: %d graphs finalized, %d execution plans on %d described GPUs, %d of them from the tactic "
           "tables, %d failures\n", graphs, plans, n_devprops, tactic_plans, failures);
    for (int d = 0; d < n_devprops; d++) cudnnBackendDestroyDescriptor(devprops[d]), pcu_tactics_free(&tactics[d]);
    return failures ? 1 : 0;
}
