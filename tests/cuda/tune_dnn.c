/* tune_dnn.c: test_dnn --tune (on a GPU, the GPU day's part 1): the
 * convolution tactic cache's table (runtime/cuda/tactics.h) for GPU 0.
 *
 * For each distinct convolution signature of the given plans' steps (as
 * the CUDA planner makes them; strict f32, and with --tune-fast also the
 * signature that --precision tf32|bf16|fp16 gives; a half plan's, which is
 * never strict, always), every engine config
 * cuDNN's heuristics offer (mode A, then the fallback list) that is
 * deterministic, in strict f32 neither tensor-core nor down-converting, and
 * within 256 MiB of workspace is made into a plan and timed on GPU 0 over
 * arbitrary operands (a warm-up, then enough repetitions for a millisecond,
 * the better of two rounds). The table gets the fastest config within the
 * executors' fixed workspace (PCU_LIB_WORKSPACE); stdout gets, per
 * signature, the heuristics' pick (what pprt takes without the table) and
 * its time, the tuned time, and the fastest with the larger workspace, so
 * the lease says what a larger fixed workspace would buy. The table is
 * written whole or not at all, with the GPU, cuDNN and date in comments.
 * Signatures are tuned in plan order until --tune-secs (default 240) pass;
 * the rest are left to the heuristics (said). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "runtime/cuda/dnn.h"
#include "tune_dnn.h"

#define TUNE_WS ((size_t)256 << 20)

static int64_t numel(const int64_t *d, int nd) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

typedef struct bufs {
    void *x, *w, *y, *b, *r, *ws;
} bufs;

/* The operands of c's graph g (as exec_cuda.c's dnn_exec binds them), filled with a small constant */
static bool bufs_make(const pcu_conv *c, bufs *b) {
    const int nd = 2 + c->nsp;
    const size_t sx = (size_t)numel(c->x, nd) * 4, sw = (size_t)numel(c->wgrad ? c->y : c->w, nd) * 4,
                 sy = (size_t)numel(c->wgrad ? c->w : c->y, nd) * 4, sr = (size_t)numel(c->y, nd) * 4;
    memset(b, 0, sizeof *b);
    if (cudaMalloc(&b->x, sx) != cudaSuccess || cudaMalloc(&b->w, sw) != cudaSuccess ||
        cudaMalloc(&b->y, sy) != cudaSuccess || cudaMalloc(&b->b, (size_t)c->y[1] * 4 + 4) != cudaSuccess ||
        cudaMalloc(&b->r, sr) != cudaSuccess || cudaMalloc(&b->ws, TUNE_WS) != cudaSuccess)
        return false;
    /* 0x3c3c3c3c is about 0.0115: finite, not zero, the same everywhere */
    return cudaMemset(b->x, 0x3c, sx) == cudaSuccess && cudaMemset(b->w, 0x3c, sw) == cudaSuccess &&
           cudaMemset(b->b, 0x3c, (size_t)c->y[1] * 4 + 4) == cudaSuccess && cudaMemset(b->r, 0x3c, sr) == cudaSuccess;
}

static void bufs_free(bufs *b) {
    cudaFree(b->x), cudaFree(b->w), cudaFree(b->y), cudaFree(b->b), cudaFree(b->r), cudaFree(b->ws);
}

static cudnnBackendDescriptor_t variant_pack(const pcu_conv *c, const pcu_dnn *g, const bufs *b) {
    void *ptr[5] = {b->x, b->w, b->y};
    int64_t uid[5] = {PCU_UID_X, PCU_UID_W, PCU_UID_Y};
    int n = 3;
    if (g->fused && c->has_bias) ptr[n] = b->b, uid[n++] = PCU_UID_B;
    if (g->fused && c->has_res) ptr[n] = b->r, uid[n++] = PCU_UID_R;
    cudnnBackendDescriptor_t vp;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp) != CUDNN_STATUS_SUCCESS) return NULL;
    if (cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptr) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uid) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &b->ws) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(vp) != CUDNN_STATUS_SUCCESS) {
        cudnnBackendDestroyDescriptor(vp);
        return NULL;
    }
    return vp;
}

/* Microseconds a run of plan takes (the better of two rounds), or -1 when it fails */
static double time_plan(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp) {
    cudaEvent_t a, z;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&z) != cudaSuccess) return -1;
    double best = -1;
    int reps = 1;
    if (cudnnBackendExecute(h, plan, vp) != CUDNN_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) goto out;
    for (int round = 0; round < 3; round++) {
        float ms = 0;
        cudaEventRecord(a, 0);
        for (int i = 0; i < reps; i++)
            if (cudnnBackendExecute(h, plan, vp) != CUDNN_STATUS_SUCCESS) goto out;
        cudaEventRecord(z, 0);
        if (cudaEventSynchronize(z) != cudaSuccess || cudaEventElapsedTime(&ms, a, z) != cudaSuccess) goto out;
        const double us = 1000.0 * ms / reps;
        if (round == 0) { /* the first round sizes the others: about a millisecond each */
            reps = us > 0 ? (int)(1000.0 / us) + 1 : 50;
            if (reps > 50) reps = 50;
            continue;
        }
        if (best < 0 || us < best) best = us;
    }
out:
    cudaEventDestroy(a), cudaEventDestroy(z);
    return best;
}

/* The heuristics' pick within the fixed workspace (what the executor takes without a table) */
static void heuristic_pick(const pcu_dnn *g, cudnnHandle_t h, bool strict, pcu_dnn_pick *k) {
    pp_err e = {0};
    (void)pcu_dnn_choose_any(g, h, NULL, strict, PCU_LIB_WORKSPACE, k, &e);
    if (k->plan) cudnnBackendDestroyDescriptor(k->plan), k->plan = NULL;
}

/* Tune one signature: its line into *best (false: no candidate ran) */
static bool tune_one(cudnnHandle_t h, const pcu_conv *c, bool strict, const char *sig, pcu_tactic *best) {
    pcu_dnn g;
    pp_err e = {0};
    bufs b;
    bool ok = false;
    if (pcu_dnn_conv(c, false, h, &g, &e) != PP_OK) {
        printf("tune: %s: no graph: %s\n", sig, e.msg);
        pcu_dnn_free(&g);
        return false;
    }
    pcu_dnn_cand *cand = NULL;
    int n = 0;
    if (!bufs_make(c, &b) || pcu_dnn_candidates(&g, h, strict, (int64_t)TUNE_WS, &cand, &n, &e) != PP_OK) {
        printf("tune: %s: no operands or candidates: %s\n", sig, e.msg[0] ? e.msg : "cudaMalloc failed");
        bufs_free(&b);
        pcu_dnn_free(&g);
        return false;
    }
    cudnnBackendDescriptor_t vp = variant_pack(c, &g, &b);
    pcu_dnn_pick hk;
    heuristic_pick(&g, h, strict, &hk);
    double heur_us = -1, any_us = -1, any_ws = 0;
    int timed = 0;
    for (int i = 0; vp && i < n; i++) {
        const double us = time_plan(h, cand[i].plan, vp);
        if (us < 0) continue;
        timed++;
        cand[i].t.us = us;
        if (hk.gidx == cand[i].t.gidx && heur_us < 0) heur_us = us; /* the heuristics' engine (its knobs too, mostly) */
        if (any_us < 0 || us < any_us) any_us = us, any_ws = (double)cand[i].t.workspace;
        if (cand[i].t.workspace <= (int64_t)PCU_LIB_WORKSPACE && (!ok || us < best->us)) {
            *best = cand[i].t;
            ok = true;
        }
    }
    if (ok) snprintf(best->sig, sizeof best->sig, "%s", sig);
    printf("tune: %s: %d configs, %d ran; heuristics engine %lld %.1f us; tuned engine %lld %.1f us (%.2fx); "
           "fastest with 256 MiB %.1f us (workspace %.0f MiB)\n",
           sig, n, timed, (long long)hk.gidx, heur_us, ok ? (long long)best->gidx : -1LL, ok ? best->us : -1.0,
           ok && heur_us > 0 ? heur_us / best->us : 0.0, any_us, any_ws / (1 << 20));
    if (vp) cudnnBackendDestroyDescriptor(vp);
    pcu_dnn_cands_free(cand, n);
    bufs_free(&b);
    pcu_dnn_free(&g);
    return ok;
}

int tune_main(const char *out_path, const pcu_conv *convs, int n_convs, bool fast, double secs) {
    cudnnHandle_t h = NULL;
    struct cudaDeviceProp prop;
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "test_dnn --tune: no cuDNN handle on GPU 0\n");
        return 2;
    }
    pcu_tactic *lines = calloc((size_t)(2 * n_convs + 1), sizeof *lines);
    int n_lines = 0, skipped = 0;
    const time_t t0 = time(NULL);
    for (int i = 0; lines && i < n_convs; i++)
        for (int strict = 1; strict >= (fast ? 0 : 1); strict--) {
            /* a half plan's convolution is never strict (the executor lets it take tensor cores) */
            const bool half = convs[i].dt == PCU_T_F16 || convs[i].dt == PCU_T_BF16;
            if (half && strict && fast) continue;
            if (half) strict = 0;
            char sig[PCU_TACTIC_SIG];
            if (!pcu_conv_signature(&convs[i], false, strict, sig, sizeof sig)) continue;
            bool seen = false;
            for (int k = 0; k < n_lines && !seen; k++) seen = !strcmp(lines[k].sig, sig);
            if (seen) continue;
            if (difftime(time(NULL), t0) > secs) {
                skipped++;
                continue;
            }
            if (tune_one(h, &convs[i], strict, sig, &lines[n_lines])) n_lines++;
        }
    cudnnDestroy(h);
    char name[PCU_TACTIC_SIG], line[1024];
    if (!pcu_dnn_gpu_stem(0, name, sizeof name)) snprintf(name, sizeof name, "?");
    pp_outfile out;
    pp_err e = {0};
    pp_status s = lines ? pp_outfile_open(&out, out_path, &e) : PP_FAIL(&e, PP_ENOMEM, "out of memory");
    if (s == PP_OK) {
        bool ok = fprintf(out.f, "# convolution tactics for %s (%s), tuned by test_dnn --tune on %s", prop.name, name,
                          ctime(&t0)) > 0;
        ok = ok && fprintf(out.f, "# signature\tengine\tknobs\tworkspace\tmicroseconds\n") > 0;
        for (int k = 0; ok && k < n_lines; k++)
            ok = pcu_tactic_line(&lines[k], line, sizeof line) && fputs(line, out.f) >= 0;
        s = pp_outfile_commit(&out, ok, &e);
    }
    free(lines);
    if (s != PP_OK) {
        fprintf(stderr, "test_dnn --tune %s: %s\n", out_path, e.msg);
        return 2;
    }
    printf("tune: %d tactics into %s (%s); %d signatures left to the heuristics (--tune-secs)\n", n_lines, out_path,
           name, skipped);
    return 0;
}
