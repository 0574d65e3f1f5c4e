/* grad_tensor.c: gradient rules of the data-movement ops (ir/ops_tensor.def;
 * autodiff.h). */
#include "autodiff.h"

/* Reshape, Flatten: the gradient takes the input's shape back */
pp_status pp_grad_reshape(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const int x = g->nodes[node].in[0];
    const pp_shape xs = g->values[x].shape;
    int r;
    PP_TRY(pp_ad_reshape(ad, pp_ad_gy(ad, node, 0), &xs, &r, err));
    return pp_ad_give(ad, x, r, err);
}

/* Transpose: the gradient goes back through the inverse permutation */
pp_status pp_grad_transpose(pp_ad *ad, int node, pp_err *err) {
    pp_graph *g = pp_ad_graph(ad);
    const pp_node *n = &g->nodes[node];
    const int x = n->in[0], r = g->values[x].shape.rank;
    int64_t perm[PP_MAX_DIMS], inv[PP_MAX_DIMS];
    int np = 0;
    if (pp_attr_find(pp_node_attrs(g, n), "perm")) PP_TRY(pp_attr_ints(pp_node_attrs(g, n), "perm", perm, PP_MAX_DIMS, &np, err));
    if (!np)
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    else if (np != r)
        return pp_ad_fail(ad, node, err, "perm has %d entries for rank %d", np, r);
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r) return pp_ad_fail(ad, node, err, "perm is not a permutation");
        inv[perm[i]] = i;
    }
    int t;
    PP_TRY(pp_ad_transpose(ad, pp_ad_gy(ad, node, 0), inv, r, &t, err));
    return pp_ad_give(ad, x, t, err);
}
