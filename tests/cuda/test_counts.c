/* test_counts.c: the CUDA step list's launches by kind, per plan and stage,
 * without a GPU and without running it (issue 54: "static launch and copy
 * counts per model are asserted").
 *   test_counts [OPTION...] PLAN...
 *     --fused-attention     plan as --cuda-fused-attention on
 *     --stride-views        plan as --cuda-stride-views on
 *     --row-kernels         plan as --cuda-row-kernels on
 *     --f32-products        plan as --cuda-half-products off (a mixed-precision
 *                           training plan's products in f32, their Casts run)
 *     --layers L            print launches per layer (the plan's total / L)
 *     --max-per-layer X     fail when a plan's launches / L pass X
 *     --no-copy-to-product  fail when a strided copy or a device copy writes
 *                           a tensor a product reads (directly or as a view)
 *     --min-folded N        fail when fewer than N nodes' outputs were folded
 *     --dump                every step of every stage (kind, node, operands,
 *                           a product's dims, transposes, leading dims and
 *                           batch strides): two plannings compared by diff
 * Each line ends with the megabytes the steps move (step_bytes: each operand
 * once a launch, a model of traffic, not of caches).
 * Every stage's step list passes the lint (emu.c's pcu_lint: each product's
 * matrices inside their operands, folded views included). One line per
 * stage, then one per plan (pcu_tally's fields). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuplan.h"

static double step_bytes(const pcu_step *s);

static void dump(const pcu_plan *pl, FILE *f) {
    for (int i = 0; i < pl->n_steps; i++) {
        const pcu_step *s = &pl->steps[i];
        fprintf(f, "stage %d step %d: %s node %s", pl->st->index, i, pcu_step_name(s),
                s->node >= 0 ? pl->st->nodes[s->node].name : "-");
        for (int k = 0; k < s->n_ops; k++)
            fprintf(f, " [%d %d %llu +%llu]", s->ops[k].space, s->ops[k].tensor, (unsigned long long)s->ops[k].off,
                    (unsigned long long)s->ops[k].bytes);
        if (s->kind == PCU_S_MATMUL) {
            const pcu_mm *m = &s->u.mm;
            fprintf(f, " mm %lld x %lld x %lld batch %lld trans %d %d ld %lld %lld %lld strides %lld %lld %lld "
                    "c %d bias %d relu %d views %d dt %d", (long long)m->m, (long long)m->n, (long long)m->k,
                    (long long)m->batch, m->transa, m->transb, (long long)m->lda, (long long)m->ldb,
                    (long long)m->ldc, (long long)m->sa, (long long)m->sb, (long long)m->sc, m->has_c, m->bias,
                    m->relu, m->views, m->dt);
        } else if (s->kind == PCU_S_KERNEL) {
            fprintf(f, " threads %lld params", (long long)s->threads);
            const unsigned char *b = (const unsigned char *)&s->u;
            unsigned long long h = 1469598103934665603ull; /* the parameter block's bytes, hashed */
            for (size_t j = 0; j < sizeof s->u; j++) h = (h ^ b[j]) * 1099511628211ull;
            fprintf(f, " %016llx", h);
        }
        fprintf(f, " moves %.0f\n", step_bytes(s));
    }
}

/* The elements of a column-major matrix of rows x cols read batch times, or
 * once where the batch stride is 0 (one matrix for every batch). */
static double mat_elems(int64_t rows, int64_t cols, int64_t batch, int64_t stride) {
    return (double)rows * (double)cols * (double)(stride ? batch : 1);
}

/* The bytes step s moves, each operand counted once per launch: a product's
 * matrices as cuBLASLt reads and writes them (A, B, C, D, the bias), an own
 * kernel's operands over the elements it reaches (its extent: the lint's,
 * from the operand's start to the furthest element its threads touch; a
 * strided copy reads what it writes), a convolution's operands, a device
 * copy's source and destination. Host steps move host bytes: none counted.
 * A model of traffic, not of caches: a row kernel in three launches reads its
 * rows three times, the fused attention its K and V once (a GPU rereads them
 * per block of queries), and an own kernel reading a folded view counts the
 * view's span over its source (the fused attention's Q, K and V over the QKV
 * product's output: that output three times where a third each is read). */
static double step_bytes(const pcu_step *s) {
    double b = 0;
    if (s->kind == PCU_S_MATMUL) {
        const pcu_mm *m = &s->u.mm;
        b = mat_elems(m->m, m->k, m->batch, m->sa) + mat_elems(m->k, m->n, m->batch, m->sb) +
            mat_elems(m->m, m->n, m->batch, 1) * (m->has_c ? 2 : 1) + (m->bias ? (double)m->m : 0);
        return (m->dt == PCU_T_F16 || m->dt == PCU_T_BF16 ? 2 : 4) * b; /* f32 operands, or a half plan's */
    }
    if (s->kind == PCU_S_KERNEL) {
        const unsigned w = pcu_kernel_writes(s->kernel, &s->u);
        double wrote = 0;
        for (int k = 0; k < s->n_ops; k++) {
            if (s->ops[k].space < 0) continue;
            const double e = (double)pcu_kernel_extent(s, k) * pcu_kernel_esize(s, k);
            if (w >> k & 1) wrote += e;
            else if (s->kernel != PCU_K_PERM) b += e;
        }
        return b + wrote * (s->kernel == PCU_K_PERM ? 2 : 1);
    }
    if (s->kind == PCU_S_CONV || s->kind == PCU_S_COPY)
        for (int k = 0; k < s->n_ops; k++) b += s->ops[k].space < 0 ? 0 : (double)s->ops[k].bytes;
    return b;
}

int main(int argc, char **argv) {
    pcu_plan_opts o = {0};
    int layers = 0, min_folded = -1, failures = 0;
    double max_per_layer = -1;
    bool no_copy = false, dumping = false;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        if (!strcmp(s, "--fused-attention")) o.fused_attention = true;
        else if (!strcmp(s, "--stride-views")) o.stride_views = true;
        else if (!strcmp(s, "--row-kernels")) o.row_blocks = true;
        else if (!strcmp(s, "--f32-products")) o.f32_products = true;
        else if (!strcmp(s, "--no-copy-to-product")) no_copy = true;
        else if (!strcmp(s, "--dump")) dumping = true;
        else if (!strcmp(s, "--layers") && a + 1 < argc) layers = atoi(argv[++a]);
        else if (!strcmp(s, "--max-per-layer") && a + 1 < argc) max_per_layer = atof(argv[++a]);
        else if (!strcmp(s, "--min-folded") && a + 1 < argc) min_folded = atoi(argv[++a]);
        else if (s[0] == '-') {
            fprintf(stderr, "test_counts: unknown option %s\n", s);
            return 2;
        } else {
            pprt_plan *p = NULL;
            pp_err e = {0};
            if (pprt_plan_load(s, NULL, &p, &e) != PP_OK) {
                fprintf(stderr, "FAIL %s: %s\n", s, e.msg);
                return 1;
            }
            pcu_tally all = {0};
            int half = 0, half_cand = 0; /* a mixed-precision training plan's products (pcu_counts) */
            double arena_mb = 0;         /* the stages' own arenas (repack_arena) */
            double all_mb = 0, kind_mb[4] = {0}; /* products, strided copies, other own kernels, the rest */
            for (int si = 0; si < p->n_stages; si++) {
                pcu_plan pl;
                if (pprt_stage_weights(p, si, &e) != PP_OK || pcu_plan_build(p, &p->stages[si], &o, &pl, &e) != PP_OK) {
                    fprintf(stderr, "FAIL %s stage %d: %s\n", s, si, e.msg);
                    failures++;
                    continue;
                }
                if (pcu_lint(&pl, &e) != PP_OK) {
                    fprintf(stderr, "FAIL %s stage %d: %s\n", s, si, e.msg);
                    failures++;
                }
                pcu_tally t;
                pcu_plan_tally(&pl, &t);
                double mb = 0;
                for (int i = 0; i < pl.n_steps; i++) {
                    const pcu_step *st = &pl.steps[i];
                    const double sb = step_bytes(st) / 1e6;
                    mb += sb;
                    kind_mb[st->kind == PCU_S_MATMUL ? 0 : st->kind == PCU_S_KERNEL && st->kernel == PCU_K_PERM ? 1
                            : st->kind == PCU_S_KERNEL ? 2 : 3] += sb;
                }
                all_mb += mb;
                if (dumping) dump(&pl, stdout);
                printf("%s stage %d: %d launches: %d own kernels, %d strided copies (%d feeding a product), "
                       "%d cuBLASLt, %d cuDNN, %d epilogues, %d device copies (%d feeding a product), %d host; "
                       "%d folded; %.1f MB moved\n", s, si, t.launches, t.own, t.perm, t.perm_to_product, t.cublas,
                       t.cudnn, t.epilogues, t.copies, t.copy_to_product, t.host, t.folded, mb);
                int *a_ = &all.steps, *t_ = &t.steps; /* pcu_tally is ints only */
                for (size_t j = 0; j < sizeof t / sizeof(int); j++) a_[j] += t_[j];
                half += pl.counts.half, half_cand += pl.counts.half_cand;
                arena_mb += (double)pl.bytes[PCU_SP_ARENA] / 1e6;
                pcu_plan_free(&pl);
            }
            printf("%s: %d launches: %d own kernels, %d strided copies (%d feeding a product), %d cuBLASLt, %d cuDNN, "
                   "%d epilogues, %d device copies (%d feeding a product), %d host; %d folded", s, all.launches,
                   all.own, all.perm, all.perm_to_product, all.cublas, all.cudnn, all.epilogues, all.copies,
                   all.copy_to_product, all.host, all.folded);
            printf("; %.1f MB moved (products %.1f, strided copies %.1f, other own kernels %.1f, the rest %.1f)",
                   all_mb, kind_mb[0], kind_mb[1], kind_mb[2], kind_mb[3]);
            if (layers > 0)
                printf("; %.2f launches and %.2f MB moved per layer (%d layers)", (double)all.launches / layers,
                       all_mb / layers, layers);
            if (half_cand) printf("; %d of %d products on the half route, arenas %.1f MB", half, half_cand, arena_mb);
            printf("\n");
            if (layers > 0 && max_per_layer >= 0 && (double)all.launches / layers > max_per_layer) {
                fprintf(stderr, "FAIL %s: %.2f launches per layer, want at most %.2f\n", s,
                        (double)all.launches / layers, max_per_layer);
                failures++;
            }
            if (no_copy && all.perm_to_product + all.copy_to_product) {
                fprintf(stderr, "FAIL %s: %d strided copies and %d device copies feed a product, want none\n", s,
                        all.perm_to_product, all.copy_to_product);
                failures++;
            }
            if (min_folded >= 0 && all.folded < min_folded) {
                fprintf(stderr, "FAIL %s: %d outputs folded into products, want at least %d\n", s, all.folded,
                        min_folded);
                failures++;
            }
            pprt_plan_free(p);
        }
    }
    return failures ? 1 : 0;
}
