/* report.c: what the oneDNN executor made of its stage: the counts
 * (pprt --stats-json) and, with PPRT_DNNL_VERBOSE=1, one line per stage
 * (nodes on oneDNN, absorbed and on the reference kernels, the reorders and
 * copies per micro-batch, the memory taken); =2 adds each node's primitive
 * implementations. */
#include <stdio.h>
#include <string.h>

#include "dnnl_exec.h"

/* Node ni's kernel, in the words of pprt_exec_counts: its first main
 * step's (else its first step's), a oneDNN primitive or pprt's own. */
static bool on_library(const pprt_exec *x, int ni) {
    const step *s = &x->steps.a[x->nd.first[ni]];
    for (int k = 0; k < x->nd.nsteps[ni]; k++)
        if (x->steps.a[x->nd.first[ni] + k].kind == STEP_MAIN) {
            s = &x->steps.a[x->nd.first[ni] + k];
            break;
        }
    return s->prim != NULL;
}

void dn_counts(const pprt_exec *x, pprt_exec_counts *c) {
    const pprt_stage *st = x->st;
    *c = (pprt_exec_counts){.nodes = st->n_nodes, .weight_bytes = (double)x->bytes.weights};
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (x->nd.absorbed[ni]) c->fused++;
        else if (x->nd.first[ni] < 0) *(dn_rnn_by_gemm(x, &st->nodes[ni]) || dn_ref_by_parts(x, &st->nodes[ni]) ? &c->own : &c->reference) += 1;
        else if (x->nd.nsteps[ni] == 0) c->views++; /* its output takes over its input's bytes */
        else *(on_library(x, ni) ? &c->library : &c->own) += 1;
    }
    for (int i = 0; i < x->steps.n; i++) {
        c->layout_changes += x->steps.a[i].kind == STEP_REORDER;
        c->copies += x->steps.a[i].kind == STEP_COPY;
    }
    for (int i = 0; i < st->n_tensors; i++) {
        c->own_layout += x->tn.blocked[i];
        if (x->tn.alias[i] < 0) continue;
        const dn_family *f = dn_family_of(st->nodes[x->tn.writer[i]].op);
        c->in_place += !(f && f->view);
    }
}

void dn_report(const pprt_exec *x) {
    const pprt_stage *st = x->st;
    pprt_exec_counts c;
    dn_counts(x, &c);
    char refs[512] = "";
    size_t len = 0, shared = 0;
    for (int i = 0; i < N_SLOTS; i++) shared += x->slot.bytes[i];
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (x->nd.first[ni] >= 0 || x->nd.absorbed[ni] || dn_rnn_by_gemm(x, &st->nodes[ni]) ||
            dn_ref_by_parts(x, &st->nodes[ni]))
            continue;
        const char *name = pp_op_table[st->nodes[ni].op].name;
        if (len < sizeof refs - 1 && !strstr(refs, name)) {
            int w = snprintf(refs + len, sizeof refs - len, "%s%s", len ? " " : "", name);
            if (w > 0) len += (size_t)w;
        }
    }
    fprintf(
        stderr,
        "pprt dnnl: stage %d: %d of %d nodes on oneDNN (%d as post-ops)%s%s; %d reorders and %d residual copies "
        "per micro-batch (%d outputs in place of their input); %d tensors in oneDNN layouts, %d views of their input's "
        "bytes, %d weight transposes and %d operand transposes or copies read through by their products; %d products "
        "of bf16 values on bf16 kernels (%d Casts to f32 read through by them, %d weights' roundings reordered from the "
        "weight once a step); arena %.1f MB (the plan's %.1f MB); %.1f MB reordered weights (%.1f MB of them reordered by another "
        "executor of the stage), %.1f MB other buffers, %.1f MB shared\n",
        st->index, c.nodes - c.reference, st->n_nodes, c.fused, len ? ", reference: " : "", refs, c.layout_changes,
        c.copies, c.in_place, c.own_layout, c.views, x->weight_views, x->operand_views, x->half_products, x->half_views, x->half_weights, (double)x->bytes.arena / 1e6, (double)st->arena_bytes / 1e6, (double)x->bytes.weights / 1e6,
        (double)x->bytes.wshared / 1e6, (double)(x->bytes.owned - (x->bytes.weights - x->bytes.wshared)) / 1e6,
        (double)shared / 1e6);
    if (x->o.verbose < 2) return;
    for (int ni = 0; ni < st->n_nodes; ni++) {
        if (x->nd.absorbed[ni]) /* pre-op: a Mul the next node's pointwise kernel applies (dn_pre) */
            fprintf(stderr, "  %-24s %-14s %s\n", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name,
                    x->nd.first[ni] >= 0 ? "pre-op" : "post-op");
        if (x->nd.first[ni] < 0 && dn_rnn_by_gemm(x, &st->nodes[ni]))
            fprintf(stderr, "  %-24s %-14s pprt:rnn_gemm\n", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name);
        if (x->nd.first[ni] < 0 && dn_ref_by_parts(x, &st->nodes[ni]))
            fprintf(stderr, "  %-24s %-14s %s\n", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name,
                    st->nodes[ni].op == PP_OP_CAST ? "pprt:cast" : "pprt:ref_parts");
        if (x->nd.first[ni] < 0 || x->nd.absorbed[ni]) continue;
        fprintf(stderr, "  %-24s %-14s%s", st->nodes[ni].name, pp_op_table[st->nodes[ni].op].name,
                x->nd.first[ni] >= 0 && x->nd.nsteps[ni] == 0 && st->nodes[ni].n_out == 1 && dn_read_through(x, ni)
                    ? " nothing (its products read its input)"
                    : "");
        for (int k = 0; k < x->nd.nsteps[ni]; k++) {
            const step *s = &x->steps.a[x->nd.first[ni] + k];
            const_dnnl_primitive_desc_t pd;
            const char *impl = s->impl ? s->impl : "?";
            if (s->prim && dnnl_primitive_get_primitive_desc(s->prim, &pd) == dnnl_success)
                dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
            fprintf(stderr, " %s%s", s->kind == STEP_REORDER ? "reorder:" : s->kind == STEP_COPY ? "copy:" : "",
                    impl);
        }
        fputc('\n', stderr);
    }
}
