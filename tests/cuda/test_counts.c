/* test_counts.c: the CUDA step list's launches by kind, per plan and stage,
 * without a GPU and without running it (issue 54: "static launch and copy
 * counts per model are asserted").
 *   test_counts [OPTION...] PLAN...
 *     --fused-attention     plan as --cuda-fused-attention on
 *     --stride-views        plan as --cuda-stride-views on
 *     --row-kernels         plan as --cuda-row-kernels on
 *     --layers L            print launches per layer (the plan's total / L)
 *     --max-per-layer X     fail when a plan's launches / L pass X
 *     --no-copy-to-product  fail when a strided copy or a device copy writes
 *                           a tensor a product reads (directly or as a view)
 *     --min-folded N        fail when fewer than N nodes' outputs were folded
 *     --dump                every step of every stage (kind, node, operands,
 *                           a product's dims, transposes, leading dims and
 *                           batch strides): two plannings compared by diff
 * Every stage's step list passes the lint (emu.c's pcu_lint: each product's
 * matrices inside their operands, folded views included). One line per
 * stage, then one per plan (pcu_tally's fields). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuplan.h"

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
                    "c %d bias %d relu %d views %d", (long long)m->m, (long long)m->n, (long long)m->k,
                    (long long)m->batch, m->transa, m->transb, (long long)m->lda, (long long)m->ldb,
                    (long long)m->ldc, (long long)m->sa, (long long)m->sb, (long long)m->sc, m->has_c, m->bias,
                    m->relu, m->views);
        } else if (s->kind == PCU_S_KERNEL) {
            fprintf(f, " threads %lld params", (long long)s->threads);
            const unsigned char *b = (const unsigned char *)&s->u;
            unsigned long long h = 1469598103934665603ull; /* the parameter block's bytes, hashed */
            for (size_t j = 0; j < sizeof s->u; j++) h = (h ^ b[j]) * 1099511628211ull;
            fprintf(f, " %016llx", h);
        }
        fprintf(f, "\n");
    }
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
                if (dumping) dump(&pl, stdout);
                printf("%s stage %d: %d launches: %d own kernels, %d strided copies (%d feeding a product), "
                       "%d cuBLASLt, %d cuDNN, %d epilogues, %d device copies (%d feeding a product), %d host; "
                       "%d folded\n", s, si, t.launches, t.own, t.perm, t.perm_to_product, t.cublas, t.cudnn,
                       t.epilogues, t.copies, t.copy_to_product, t.host, t.folded);
                int *a_ = &all.steps, *t_ = &t.steps; /* pcu_tally is ints only */
                for (size_t j = 0; j < sizeof t / sizeof(int); j++) a_[j] += t_[j];
                pcu_plan_free(&pl);
            }
            printf("%s: %d launches: %d own kernels, %d strided copies (%d feeding a product), %d cuBLASLt, %d cuDNN, "
                   "%d epilogues, %d device copies (%d feeding a product), %d host; %d folded", s, all.launches,
                   all.own, all.perm, all.perm_to_product, all.cublas, all.cudnn, all.epilogues, all.copies,
                   all.copy_to_product, all.host, all.folded);
            if (layers > 0) printf("; %.2f launches per layer (%d layers)", (double)all.launches / layers, layers);
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
