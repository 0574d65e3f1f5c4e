/* halfprod.c: which products compute on oneDNN's bf16 kernels in an f32 run
 * (PPRT_DNNL_HALF_PRODUCTS; docs/dnnl.md).
 *
 * A training plan at --precision bf16 (passes/precision.c) rounds each
 * product's operands to bf16 in the graph, as Casts to bf16 and back to
 * f32, and the product then reads f32 tensors that hold bf16 values. Such a
 * product loses nothing when oneDNN computes it from bf16 copies of its
 * operands with f32 sums (the copies are exact; each product of two bf16
 * values is exact in f32): the same arithmetic as the f32 kernels on the
 * rounded values up to the order of the sums (which oneDNN's f32 kernels
 * choose too) and subnormals (the bf16 dot-product instructions flush
 * them). On a CPU with bf16 kernels (AVX512_BF16, AMX) those run the
 * products at up to twice the f32 rate.
 *
 * A tensor holds bf16 values when a Cast from bf16 to f32 wrote it, or an
 * op that only moves or selects values (a view, Transpose, Slice, Gather,
 * Concat, Relu, MaxPool) wrote it from such tensors, followed over the
 * whole plan's stages by the tensors' names (a tensor a stage receives
 * holds what its producer's does); weights do not. The choice depends on
 * the graph alone, the same in any split: the bits stay the same across
 * splits (a choice per stage changed them: ResNet-18's convolutions after a
 * cut read the received f32 copy and ran in f32). */
#include <stdlib.h>
#include <string.h>

#include "dnnl_exec.h"

static bool moves_values(pp_op op) {
    switch (op) {
    case PP_OP_IDENTITY: case PP_OP_RESHAPE: case PP_OP_FLATTEN: case PP_OP_SQUEEZE: case PP_OP_UNSQUEEZE:
    case PP_OP_TRANSPOSE: case PP_OP_SLICE: case PP_OP_GATHER: case PP_OP_CONCAT: case PP_OP_RELU:
    case PP_OP_MAXPOOL:
        return true;
    default:
        return false;
    }
}

/* The inputs (a bit each) that must hold bf16 values for product op to run in bf16; 0: not a product */
static unsigned half_operands(pp_op op) {
    switch (op) {
    case PP_OP_MATMUL: case PP_OP_GEMM: case PP_OP_CONV: case PP_OP_FUSEDCONV: case PP_OP_CONVGRADX:
    case PP_OP_CONVGRADW:
        return 3u; /* A and B; X and W; dY and W; dY and X (bias, C and residuals are added in f32) */
    default:
        return 0;
    }
}

/* Whether node n of stage q is a Cast that widens bf16 to f32 */
static bool widens(const pprt_plan *p, const pprt_stage *q, const pprt_node *n) {
    int64_t to = 0;
    return n->op == PP_OP_CAST && n->n_in >= 1 && n->in[0] >= 0 && q->t[n->in[0]].dtype == PP_BF16 &&
           n->n_out >= 1 && n->out[0] >= 0 && q->t[n->out[0]].dtype == PP_F32 &&
           pp_attr_int((pp_attrs){n->attrs, n->n_attrs, p->opset}, "to", 0, &to, NULL) == PP_OK && to == PP_F32;
}

bool dn_widens_bf16(const pprt_exec *x, const pprt_node *n) { return widens(x->p, x->st, n); }

/* The plan's tensors by name (a tensor a stage receives has its producer's name), whether each holds bf16 values */
typedef struct hname {
    const char *name;
    bool holds;
} hname;

static int hname_cmp(const void *a, const void *b) { return strcmp(((const hname *)a)->name, ((const hname *)b)->name); }

static hname *find(hname *h, int n, const char *name) {
    const hname key = {name, false};
    return bsearch(&key, h, (size_t)n, sizeof *h, hname_cmp);
}

/* One pass of stage q's nodes in order over the holds of the tensors they read and write (true: one changed) */
static bool holds_pass(const pprt_plan *p, const pprt_stage *q, hname *h, int nh) {
    bool changed = false;
    for (int ni = 0; ni < q->n_nodes; ni++) {
        const pprt_node *n = &q->nodes[ni];
        if (n->n_out < 1 || n->out[0] < 0 || q->t[n->out[0]].dtype != PP_F32) continue;
        bool v = false;
        if (n->op == PP_OP_CAST) {
            v = widens(p, q, n);
        } else if (moves_values(n->op) && n->n_in > 0 && n->in[0] >= 0 && q->t[n->in[0]].dtype == PP_F32) {
            /* Gather and Slice: the data input alone; the others: every f32 input */
            v = true;
            for (int k = 0; k < n->n_in && v; k++)
                if (n->in[k] >= 0 && (k == 0 || (n->op != PP_OP_GATHER && n->op != PP_OP_SLICE)) &&
                    q->t[n->in[k]].dtype == PP_F32)
                    v = find(h, nh, q->t[n->in[k]].name)->holds;
        } else {
            continue;
        }
        hname *o = find(h, nh, q->t[n->out[0]].name);
        if (v && !o->holds) o->holds = changed = true;
    }
    return changed;
}

int dn_half_products(pprt_exec *x, bool *half) {
    const pprt_plan *p = x->p;
    const pprt_stage *st = x->st;
    const int ns = p->n_stages + p->n_wstages;
    int nh = 0, n_half = 0;
    for (int s = 0; s < ns; s++) nh += p->stages[s].n_tensors;
    hname *h = malloc(pp_count(nh) * sizeof *h);
    for (int ni = 0; ni < st->n_nodes; ni++) half[ni] = false;
    if (!h) return 0; /* (then every product in f32: the same results) */
    nh = 0;
    for (int s = 0; s < ns; s++)
        for (int t = 0; t < p->stages[s].n_tensors; t++) h[nh++] = (hname){p->stages[s].t[t].name, false};
    qsort(h, pp_count(nh), sizeof *h, hname_cmp);
    int u = 0; /* one entry a name */
    for (int i = 0; i < nh; i++)
        if (!u || strcmp(h[u - 1].name, h[i].name)) h[u++] = h[i];
    nh = u;
    /* stages in order, again until nothing changes (a tensor's producer is in an earlier stage, or this one) */
    for (int round = 0; round < 8; round++) {
        bool changed = false;
        for (int s = 0; s < ns; s++) changed = holds_pass(p, &p->stages[s], h, nh) || changed;
        if (!changed) break;
    }
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        const unsigned need = half_operands(n->op);
        bool ok = need != 0;
        for (int k = 0; k < n->n_in && k < 8 && ok; k++)
            if ((need >> k) & 1u)
                ok = n->in[k] >= 0 && st->t[n->in[k]].dtype == PP_F32 && find(h, nh, st->t[n->in[k]].name)->holds;
        half[ni] = ok;
        n_half += ok;
    }
    free(h);
    return n_half;
}

/* The bf16 tensor that input k (tensor tid) of product ni, built on bf16
 * kernels, may read in place of tid: the input of the Cast that widened it
 * into tid, as dn_writer_input finds it. Else -1. */
static int half_source(const pprt_exec *x, int ni, int k, int tid) {
    if (!x->bld.half || k > 7 || x->st->nodes[ni].n_in <= k || x->st->nodes[ni].in[k] != tid) return -1;
    int w;
    const int src = dn_writer_input(x, tid, ni, &w);
    return src >= 0 && dn_widens_bf16(x, &x->st->nodes[w]) ? src : -1;
}

/* The f32 weight whose Cast to bf16 wrote tensor src in this stage, or -1. */
static int rounded_weight(const pprt_exec *x, int src) {
    const int w = x->tn.writer[src];
    if (w < 0) return -1;
    const pprt_node *n = &x->st->nodes[w];
    if (n->op != PP_OP_CAST || n->n_in < 1 || n->in[0] < 0 || n->out[0] != src) return -1;
    const int wt = n->in[0];
    return is_weight(x, wt) && T(x, wt)->dtype == PP_F32 && T(x, src)->dtype == PP_BF16 ? wt : -1;
}

/* A product's bf16 operand as its kernel wants it. Where the bf16 tensor is a
 * weight's rounding (the plan's Cast of the weight, remade every
 * micro-batch), the weight itself is reordered to bf16 in the kernel's
 * layout once per version of the weights (dn_weight_mem: at creation and at
 * each reload), as an f32 weight is, instead of the rounding being reordered
 * every micro-batch: oneDNN's conversion rounds to nearest even as the Cast
 * does, and where it flushes a subnormal the bf16 kernels would have flushed
 * it anyway (their dot products take subnormal inputs as 0), so the product
 * reads the same values (ResNet-18's weights, the same bits). */
pp_status dn_half_input(pprt_exec *x, int ni, int k, int tid, const dnnl_memory_desc_t *cur,
                        const dnnl_memory_desc_t *want, int slot, dnnl_memory_t *out, pp_err *err) {
    const int src = half_source(x, ni, k, tid);
    if (src < 0) return cur ? dn_cast_view(x, tid, cur, want, slot, out, err) : dn_bind_input(x, tid, want, slot, out, err);
    dnnl_memory_desc_t plain, b;
    if (!cur) PP_TRY(dn_tensor_plain(x, tid, &plain, err));
    const dnnl_memory_desc_t *c = cur ? cur : &plain;
    const int wt = x->o.half_weights ? rounded_weight(x, src) : -1;
    DN(dnnl_memory_desc_init_by_strides(&b, c->ndims, c->dims, wt >= 0 ? dnnl_f32 : dnnl_bf16,
                                        c->format_desc.blocking.strides),
       "memory descriptor");
    if (wt >= 0) { /* read through the widening Cast, and the rounding not at all (dn_through_views) */
        x->half_weights++;
        x->tn.wreads[src]++;
        x->nd.through[ni] |= (unsigned char)(1u << k);
        return dn_weight_mem(x, wt, &b, want, out, err);
    }
    PP_TRY(dn_bind_view(x, src, &b, want, slot, out, err));
    dn_read_src(x, ni, k, src);
    return PP_OK;
}
