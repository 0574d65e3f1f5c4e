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
 * Concat, Relu, MaxPool) wrote it from such tensors; received tensors and
 * weights are not looked into. The choice depends on the graph alone, the
 * same in any split: the bits stay the same across splits. */
#include <stdlib.h>

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

static bool f32_tensor(const pprt_exec *x, int t) { return t >= 0 && x->st->t[t].dtype == PP_F32; }

/* Whether Cast node n widens bf16 to f32 */
static bool widens_bf16(const pprt_exec *x, const pprt_node *n) {
    int64_t to = 0;
    return n->n_in >= 1 && n->in[0] >= 0 && x->st->t[n->in[0]].dtype == PP_BF16 && n->n_out >= 1 &&
           f32_tensor(x, n->out[0]) && pp_attr_int(attrs_of(x, n), "to", 0, &to, NULL) == PP_OK && to == PP_F32;
}

int dn_half_products(pprt_exec *x, bool *half) {
    const pprt_stage *st = x->st;
    bool *holds = calloc(pp_count(st->n_tensors), sizeof *holds); /* per tensor: f32 holding bf16 values */
    int n_half = 0;
    for (int ni = 0; ni < st->n_nodes; ni++) half[ni] = false;
    if (!holds) return 0; /* (then every product in f32: the same results) */
    for (int ni = 0; ni < st->n_nodes; ni++) {
        const pprt_node *n = &st->nodes[ni];
        if (n->op == PP_OP_CAST) {
            if (widens_bf16(x, n)) holds[n->out[0]] = true;
            continue;
        }
        if (moves_values(n->op) && n->n_out >= 1 && f32_tensor(x, n->out[0])) {
            /* Gather and Slice: the data input alone; the others: every f32 input */
            bool all = true;
            for (int k = 0; k < n->n_in && all; k++)
                if (n->in[k] >= 0 && (k == 0 || (n->op != PP_OP_GATHER && n->op != PP_OP_SLICE)) &&
                    f32_tensor(x, n->in[k]))
                    all = holds[n->in[k]];
            holds[n->out[0]] = all && n->n_in > 0 && n->in[0] >= 0 && f32_tensor(x, n->in[0]);
            continue;
        }
        const unsigned need = half_operands(n->op);
        if (!need) continue;
        bool ok = true;
        for (int k = 0; k < n->n_in && k < 8 && ok; k++)
            if ((need >> k) & 1u) ok = f32_tensor(x, n->in[k]) && holds[n->in[k]];
        half[ni] = ok;
        n_half += ok;
    }
    free(holds);
    return n_half;
}
