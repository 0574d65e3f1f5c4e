/* pipeline.c: the pass list, as straight-line calls, with the IR verifier
 * after every pass that changes the graph (it also refreshes producers and
 * use counts, which the next pass reads), and an IR dump after any pass on
 * request (--dump-ir=PASS, --dump-ir=all, --dump-ir for the last).
 *
 *   import    the frontend's graph, as read
 *   batch     no op may mix samples across the batch axis that pprt cuts
 *             into micro-batches (batch.c; it changes nothing)
 *   infer     shapes and costs, folding constants as it goes ("fold")
 *   autodiff  (--train) LayerNorm and GELU fused first (fuse.c's
 *             pp_fuse_train), rows in stored order (rows.c, below) on the
 *             forward graph, then the loss and the backward graph
 *   simplify  no-op removal, dead code, shared constants
 *   fuse      BN into Conv, Conv+Add+Relu, MatMul+Add, LayerNorm, GELU, SiLU;
 *             then (without --train: a training graph's ran before its
 *             gradient) rows in stored order through row-wise ops (rows.c:
 *             torch's batch-first attention Transposes), then
 *             (--precision bf16|fp16 without --train) half storage
 *             (precision.c's pp_infer_autocast)
 *   partition scopes, split, boundaries, memory plan, stage costs */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

const char *const pp_pass_names[] = {"import", "infer", "autodiff", "simplify", "fuse", "partition", NULL};

static bool disabled(const pp_compile_opts *o, const char *name) {
    for (int k = 0; k < o->n_disabled; k++)
        if (!strcmp(o->disabled[k], name)) return true;
    return false;
}

/* rows.c's pass, unless --disable-pass rows, with the verifier and the shapes after it where it changed the graph */
static pp_status row_order(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    if (disabled(o, "rows")) return PP_OK;
    bool changed;
    PP_TRY(pp_row_order(g, &changed, err));
    if (!changed) return PP_OK;
    PP_TRY(pp_graph_verify(g, err));
    PP_TRY(pp_graph_infer(g, err));
    return pp_graph_verify(g, err);
}

/* pprt cuts samples along dim 0: every output must carry the micro-batch
 * there too (inputs were checked at import). */
static pp_status check_batch(const pp_graph *g, pp_err *err) {
    if (g->batch == 0) return PP_OK;
    for (int i = 0; i < g->n_outputs; i++) {
        const pp_value *v = &g->values[g->outputs[i]];
        if (v->shape.rank < 1 || v->shape.dim[0] != g->batch)
            return PP_FAIL(err, PP_EINVAL,
                           "graph output '%s' does not carry the batch (%lld) on dim 0; compile "
                           "with -b 0 to run whole tensors without micro-batching",
                           v->name, (long long)g->batch);
    }
    return PP_OK;
}

static void dump(pp_graph *g, const pp_compile_opts *o, const char *pass) {
    if (!o->dump_ir) return;
    bool last = !strcmp(pass, "partition");
    if (!strcmp(o->dump_ir, "all") || !strcmp(o->dump_ir, pass) || (!*o->dump_ir && last))
        pp_dump_ir(o->dump_to ? o->dump_to : stdout, g, pass);
}

static pp_status check_opts(const pp_compile_opts *o, pp_err *err) {
    for (int k = 0; k < o->n_disabled; k++) {
        const char *d = o->disabled[k];
        if (strcmp(d, "fold") && strcmp(d, "simplify") && strcmp(d, "fuse") && strcmp(d, "rows") &&
            strcmp(d, "remake"))
            return PP_FAIL(err, PP_EINVAL, "--disable-pass %s: only fold, simplify, fuse, rows and remake (--train) "
                           "can be disabled", d);
    }
    if (o->dump_ir && *o->dump_ir && strcmp(o->dump_ir, "all")) {
        bool known = false;
        for (int k = 0; pp_pass_names[k]; k++) known |= !strcmp(pp_pass_names[k], o->dump_ir);
        if (!known)
            return PP_FAIL(err, PP_EINVAL, "--dump-ir=%s: no such pass (import, infer, autodiff, "
                           "simplify, fuse, partition, all)", o->dump_ir);
    }
    if (o->train_on && !o->train.loss)
        return PP_FAIL(err, PP_EINVAL, "--train needs --loss (cross-entropy:OUTPUT, mse:OUTPUT, or a scalar OUTPUT)");
    const bool recompute = o->train.recompute_all || o->train.n_recompute;
    if (o->train_on && o->train.optim.precision == PP_PREC_FP16 && !(o->train.optim.loss_scale > 0))
        return PP_FAIL(err, PP_EINVAL, "--precision fp16 needs --loss-scale (dynamic: PyTorch GradScaler's rule; or a "
                       "static S): fp16's range ends at 65504 and its smallest step is 6e-8, and unscaled gradients "
                       "fall below it to 0 (bf16 has f32's range and needs none)");
    if (!o->train_on && (o->train.loss || o->train.n_freeze || recompute || o->train.schedule))
        return PP_FAIL(err, PP_EINVAL, "--%s is an option of --train",
                       o->train.loss ? "loss" : o->train.n_freeze ? "freeze" : recompute ? "recompute" : "schedule");
    return PP_OK;
}

/* pprt keeps each input and output in a file named after it: names that
 * cannot be file names are refused now, not after a run */
static pp_status check_io_names(const pp_graph *g, pp_err *err) {
    for (int i = 0; i < g->n_inputs; i++) PP_TRY(pp_data_name_check(g->values[g->inputs[i]].name, "graph input", err));
    for (int i = 0; i < g->n_outputs; i++)
        PP_TRY(pp_data_name_check(g->values[g->outputs[i]].name, "graph output", err));
    return PP_OK;
}

pp_status pp_run_front_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    PP_TRY(check_opts(o, err));
    PP_TRY(pp_graph_verify(g, err));
    PP_TRY(check_io_names(g, err));
    PP_TRY(pp_scopes(g, err));
    dump(g, o, "import");

    /* the gradient graph runs on whole tensors: -b is the rows of one run */
    if (o->train_on) {
        PP_TRY(pp_train_params(g, &o->train, err));
        PP_TRY(pp_train_dropout(g, err));
        g->batch = 0;
    }

    /* on a copy of the graph at micro-batch 2 or more (batch.c) */
    PP_TRY(pp_batch_check(g, o->allow_batch_mixing, err));
    PP_TRY(pp_graph_verify(g, err));

    PP_TRY(disabled(o, "fold") ? pp_graph_infer(g, err) : pp_fold(g, err));
    PP_TRY(pp_graph_verify(g, err));
    PP_TRY(check_batch(g, err));
    dump(g, o, "infer");

    if (o->train_on) {
        /* LayerNorm and GELU whole before the gradient (fuse.c, pp_fuse_train):
         * their rules read X, where the decomposed ops' read every intermediate */
        if (!disabled(o, "fuse")) {
            PP_TRY(pp_fuse_train(g, err));
            PP_TRY(pp_graph_verify(g, err));
        }
        /* on the forward graph, whose gradient then has the same Transposes fewer (the weights are
         * variables here: rows.c takes them as it takes constants) */
        PP_TRY(row_order(g, o, err));
        PP_TRY(pp_train_autocast(g, &o->train, err));
        PP_TRY(pp_autodiff(g, &o->train, err));
        PP_TRY(pp_graph_verify(g, err));
        PP_TRY(pp_train_autocast_stash(g, &o->train, err));
        PP_TRY(pp_graph_verify(g, err));
        /* the backward graph's constants fold; the weights, variables, do not */
        PP_TRY(disabled(o, "fold") ? pp_graph_infer(g, err) : pp_fold(g, err));
        PP_TRY(pp_graph_verify(g, err));
        dump(g, o, "autodiff");
    }

    if (!disabled(o, "simplify")) {
        PP_TRY(pp_simplify(g, err));
        PP_TRY(pp_graph_verify(g, err));
    }
    dump(g, o, "simplify");

    if (!disabled(o, "fuse")) {
        PP_TRY(pp_fuse(g, err));
        PP_TRY(pp_graph_verify(g, err));
    }
    /* rows in the order they are stored through row-wise ops (rows.c): before half storage, which
     * casts what the products read, and before the split */
    if (!o->train_on) PP_TRY(row_order(g, o, err));
    if (!o->train_on && o->train.optim.precision != PP_PREC_F32) {
        /* half storage for inference: after the fusions (which match f32 patterns), before the split */
        PP_TRY(pp_infer_autocast(g, o->train.optim.precision, err));
        PP_TRY(pp_graph_verify(g, err));
    }
    dump(g, o, "fuse");
    if (o->train_on) pp_train_params_fix(g); /* the stages' weights from here on */

    if (o->n_profiles) {
        int matched;
        int64_t used;
        PP_TRY(pp_apply_profiles(g, o, &matched, &used, NULL, 0, err));
        if (matched < g->n_nodes && !o->quiet)
            fprintf(stderr, "ppcc: warning: the profile times %d of %d ops; the others use the "
                    "roofline estimate\n", matched, g->n_nodes);
        /* a node's measured time is used in whichever stage it lands */
        const int stages = o->n_split_at > 0 ? o->n_split_at + 1 : o->exec_seq ? PP_MAX_SPLITS + 1 : o->n_stages;
        const int s = pp_stage_other_backend(o, stages);
        if (s && !o->quiet) {
            const char *b0 = pp_stage_place(o, 0).backend, *bs = pp_stage_place(o, s).backend;
            fprintf(stderr, "ppcc: warning: --placement puts stage 0 on %s and stage %d on %s, and the profile "
                    "times one kind of device: every node is priced at its profiled time on either\n",
                    b0[0] ? b0 : "pprt's default", s, bs[0] ? bs : "pprt's default");
        }
    }
    return PP_OK;
}

void pp_unsplit(pp_graph *g) {
    if (g->bounds)
        for (int i = 0; i < g->n_stages - 1; i++) free(g->bounds[i].vals);
    free(g->bounds);
    for (int d = 0; g->stash && d < g->train_devices; d++) free(g->stash[d].vals);
    free(g->stash);
    g->stash = NULL;
    for (int d = 0; g->local && d < g->train_devices; d++) free(g->local[d].vals);
    free(g->local);
    g->local = NULL;
    for (int d = 0; g->wkeep && d < g->train_devices; d++) free(g->wkeep[d].vals);
    free(g->wkeep);
    g->wkeep = NULL;
    free(g->stage_arena);
    free(g->stage_info);
    g->bounds = NULL;
    g->stage_arena = NULL;
    g->stage_info = NULL;
    g->n_stages = 0;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].stage = -1;
}

pp_status pp_run_split_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    if (g->n_stages) pp_unsplit(g);
    g->over_stage = -1;
    pp_compile_opts mo; /* a training split by the devices' memory: its cut first */
    if (o->train_on && o->policy == PP_POLICY_MEMORY && o->n_stages == 2 && o->train_cut <= 0) {
        mo = *o;
        PP_TRY(pp_train_memory_cut(g, o, &mo.train_cut, err));
        o = &mo;
    }
    PP_TRY(o->train_on ? pp_partition_train(g, o, err) : pp_partition(g, o, err));
    PP_TRY(pp_boundaries(g, err));
    PP_TRY(pp_memplan(g, err));
    PP_TRY(pp_stage_costs(g, o, err));
    PP_TRY(pp_graph_verify(g, err));
    dump(g, o, "partition");
    if (o->dump_dot) PP_TRY(pp_dump_dot(o->dump_dot, g, err));
    return PP_OK;
}

pp_status pp_run_passes(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    PP_TRY(pp_run_front_passes(g, o, err));
    return pp_run_split_passes(g, o, err);
}
