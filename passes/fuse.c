/* fuse.c: pattern fusions that matter for speed and for cost estimates.
 *
 *  - a Pad by zero before a Conv or AveragePool becomes their padding, and
 *    ReduceMean over every spatial axis GlobalAveragePool;
 *  - BatchNormalization after a Conv with constant weights is folded into the
 *    Conv's weights and bias, and so is a Mul by a constant per output
 *    channel (a layer scale: ConvNeXt's and EfficientFormer's gamma), which
 *    leaves the residual Add after it to the next fusion;
 *  - Conv [+ Add of a same-shaped residual] [+ Relu or Clip] becomes one
 *    pp.FusedConv;
 *  - 2-D MatMul + Add of a constant bias becomes Gemm;
 *  - the decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
 *    Div, Mul, Add) becomes LayerNormalization;
 *  - the Erf GELU (Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5) becomes Gelu;
 *  - InstanceNormalization between two Reshapes that group the channels
 *    (torch's GroupNorm), with the Mul and Add of a per-channel scale and
 *    bias after it, becomes pp.GroupNorm;
 *  - x * Sigmoid(x) becomes pp.SiLU, and x * HardSigmoid(x) with alpha 1/6
 *    and beta 0.5 HardSwish.
 *
 * A fused node takes the place of the LAST node of its pattern (so every
 * value it reads is already defined there) and the name of the FIRST (the
 * op that carries the module scope: "/layer1/layer1.0/conv1/Conv"). The
 * absorbed nodes' scopes are kept too, so a split can still name them
 * (--exec-seq "bn1"). Patterns only match when the intermediate values have
 * no other use and are not graph outputs. Ops are matched by their enum
 * (a misspelt one does not compile), and chains by the op table's traits.
 *
 * A training graph (ppcc --train) has the LayerNorm, GELU and SiLU fusions
 * run before the gradient is built as well (pp_fuse_train): they are the
 * ops' own semantics, and their gradient rules (pp.LayerNormGrad, Gelu's
 * and SiLU's derivatives) read X alone where the nine, five and two ops'
 * rules read their intermediates, which each micro-batch in flight would
 * keep. The folds that
 * bake weights (BN or a layer scale into a Conv) wait for after it. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/geom.h"
#include "../ir/op_fns.h"
#include "../ir/shape_nn.h"
#include "passes.h"

static bool is(const pp_graph *g, int node, pp_op op) { return node >= 0 && !g->nodes[node].dead && g->nodes[node].op == op; }

/* The only consumer of value v, or -1 (several, none, or a graph output). */
static int sole_user(const pp_graph *g, int v) {
    if (v < 0 || pp_graph_is_output(g, v)) return -1;
    int user;
    return pp_graph_consumers(g, v, &user, 1) == 1 ? user : -1;
}

static int producer(const pp_graph *g, int v) {
    if (v < 0) return -1;
    int p = g->values[v].producer;
    return p >= 0 && !g->nodes[p].dead ? p : -1;
}

/* A constant float scalar (any shape with one element) in *out. */
static bool const_scalar(const pp_graph *g, int v, double *out) {
    if (v < 0 || !g->values[v].is_const) return false;
    const pp_value *val = &g->values[v];
    if (val->dtype == PP_F32 && val->nbytes == 4) *out = *(const float *)val->data;
    else if (val->dtype == PP_F64 && val->nbytes == 8) *out = *(const double *)val->data;
    else return false;
    return true;
}

/* const_scalar, or a half one (a half plan's attention scale, converted by ppcc --precision) */
static bool const_scalar_half(const pp_graph *g, int v, double *out) {
    if (const_scalar(g, v, out)) return true;
    if (v < 0 || !g->values[v].is_const || g->values[v].nbytes != 2) return false;
    uint16_t h;
    memcpy(&h, g->values[v].data, 2);
    if (g->values[v].dtype == PP_BF16) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        *out = f;
    } else if (g->values[v].dtype == PP_F16) {
        const int e = h >> 10 & 31, m = h & 1023;
        const double a = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        *out = h & 0x8000 ? -a : a;
    } else {
        return false;
    }
    return true;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-4 * fabs(b); }

/* Whether v is a constant f32 with one element per channel of a value of
 * rank r with C channels on axis 1: shape [C, 1, ...] (rank r - 1) or [1,
 * C, 1, ...] (rank r). */
static bool per_channel(const pp_graph *g, int v, int64_t C, int r) {
    if (v < 0 || !g->values[v].is_const || g->values[v].dtype != PP_F32) return false;
    const pp_shape *s = &g->values[v].shape;
    const int lead = r - s->rank;
    if (lead != 0 && lead != 1) return false;
    for (int d = 0; d < s->rank; d++)
        if (s->dim[d] != (d + lead == 1 ? C : 1)) return false;
    return true;
}

/* Node surgery ---------------------------------------------------------------------------- */

/* Node `node` now reads in[0..cnt) (the use index learns it). */
static pp_status set_inputs(pp_graph *g, int node, const int *in, int cnt, pp_err *err) {
    pp_node *n = &g->nodes[node];
    int *p = realloc(n->in, sizeof(int) * pp_count(cnt));
    if (!p) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (cnt) memcpy(p, in, sizeof(int) * (size_t)cnt);
    n->in = p;
    n->n_in = cnt;
    for (int k = 0; k < cnt; k++) PP_TRY(pp_graph_note_use(g, in[k], node, err));
    return PP_OK;
}

/* Scopes of `from` not already on `to` are appended to `to`'s extra list. */
static pp_status absorb_scopes(pp_graph *g, pp_node *to, const pp_node *from, pp_err *err) {
    int add = 0;
    for (int k = 0; k < from->n_scope + from->n_extra; k++) {
        const char *s = k < from->n_scope ? from->scope[k] : from->extra[k - from->n_scope];
        if (!pp_node_in_module(to, s)) add++;
    }
    if (!add) return PP_OK;
    const char **e = pp_arena_alloc(&g->arena, sizeof *e * (size_t)(to->n_extra + add));
    if (!e) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (to->n_extra) memcpy(e, to->extra, sizeof *e * (size_t)to->n_extra);
    int n = to->n_extra;
    for (int k = 0; k < from->n_scope + from->n_extra; k++) {
        const char *s = k < from->n_scope ? from->scope[k] : from->extra[k - from->n_scope];
        if (!pp_node_in_module(to, s)) {
            bool dup = false;
            for (int j = to->n_extra; j < n; j++) dup |= strcmp(e[j], s) == 0;
            if (!dup) e[n++] = s;
        }
    }
    to->extra = e;
    to->n_extra = n;
    return PP_OK;
}

/* Turn node `last` into `op` named and scoped like `first`; the other nodes
 * of the pattern (listed in dead[]) die, their scopes kept. */
static pp_status become(pp_graph *g, int last, int first, pp_op op, const int *dead, int n_dead,
                        pp_err *err) {
    pp_node *L = &g->nodes[last];
    const pp_node *F = &g->nodes[first];
    const char **sc = L->scope, **ex = L->extra;
    int nsc = L->n_scope, nex = L->n_extra;
    L->op = op;
    L->name = F->name;
    L->backward = F->backward;
    L->grad_of = F->grad_of;
    L->scope = F->scope;
    L->n_scope = F->n_scope;
    L->extra = F->extra;
    L->n_extra = F->n_extra;
    pp_node old = {.scope = sc, .n_scope = nsc, .extra = ex, .n_extra = nex};
    PP_TRY(absorb_scopes(g, L, &old, err));
    for (int k = 0; k < n_dead; k++) {
        if (dead[k] < 0 || dead[k] == last) continue;
        PP_TRY(absorb_scopes(g, L, &g->nodes[dead[k]], err));
        g->nodes[dead[k]].dead = true;
    }
    return PP_OK;
}

/* Attributes of n plus extra ones, in the graph's arena. */
static pp_status add_attrs(pp_graph *g, pp_node *n, const pp_attr *extra, int cnt, pp_err *err) {
    pp_attr *a = pp_arena_alloc(&g->arena, sizeof *a * (size_t)(n->n_attrs + cnt));
    if (!a) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (n->n_attrs) memcpy(a, n->attrs, sizeof *a * (size_t)n->n_attrs);
    if (cnt) memcpy(a + n->n_attrs, extra, sizeof *a * (size_t)cnt);
    n->attrs = a;
    n->n_attrs += cnt;
    return PP_OK;
}

/* ---- BatchNormalization into Conv ------------------------------------------------------- */

static pp_status fuse_bn(pp_graph *g, int bn, bool *changed, pp_err *err) {
    pp_node *B = &g->nodes[bn];
    int c = producer(g, B->in[0]);
    if (!is(g, c, PP_OP_CONV) || sole_user(g, B->in[0]) != bn || pp_bn_training(pp_node_attrs(g, B), B->n_out))
        return PP_OK;
    pp_node *C = &g->nodes[c];
    const pp_value *w = &g->values[C->in[1]];
    const pp_value *bias = C->n_in > 2 && C->in[2] >= 0 ? &g->values[C->in[2]] : NULL;
    if (!w->is_const || w->dtype != PP_F32 || (bias && !bias->is_const)) return PP_OK;
    for (int k = 1; k < 5; k++)
        if (!g->values[B->in[k]].is_const || g->values[B->in[k]].dtype != PP_F32) return PP_OK;
    float eps;
    PP_TRY(pp_attr_float(pp_node_attrs(g, B), "epsilon", 1e-5f, &eps, err));
    /* read typed below: give the constants their alignment (pp_value) */
    PP_TRY(pp_value_align(g, C->in[1], err));
    if (bias) PP_TRY(pp_value_align(g, C->in[2], err));
    for (int k = 1; k < 5; k++) PP_TRY(pp_value_align(g, B->in[k], err));
    int64_t m = w->shape.dim[0];
    size_t per = (size_t)(w->nbytes / sizeof(float) / (size_t)m);
    const float *scale = g->values[B->in[1]].data, *beta = g->values[B->in[2]].data;
    const float *mean = g->values[B->in[3]].data, *var = g->values[B->in[4]].data;
    float *nw = malloc(w->nbytes), *nb = malloc(sizeof(float) * (size_t)m);
    if (!nw || !nb) {
        free(nw), free(nb);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    const float *ow = w->data, *ob = bias ? bias->data : NULL;
    for (int64_t o = 0; o < m; o++) {
        double s = (double)scale[o] / sqrt((double)var[o] + (double)eps);
        for (size_t k = 0; k < per; k++) nw[(size_t)o * per + k] = (float)((double)ow[(size_t)o * per + k] * s);
        nb[o] = (float)(((ob ? (double)ob[o] : 0.0) - (double)mean[o]) * s + (double)beta[o]);
    }
    char hint[512];
    int vw, vb;
    snprintf(hint, sizeof hint, "%s.weight_bn", C->name);
    pp_shape bshape = {1, {m}};
    pp_shape wshape = w->shape;
    pp_status s = pp_graph_add_const(g, hint, PP_F32, &wshape, nw, &vw, err);
    snprintf(hint, sizeof hint, "%s.bias_bn", g->nodes[c].name);
    if (s == PP_OK) s = pp_graph_add_const(g, hint, PP_F32, &bshape, nb, &vb, err);
    free(nw), free(nb);
    PP_TRY(s);
    C = &g->nodes[c];
    B = &g->nodes[bn];
    int ins[3] = {C->in[0], vw, vb};
    PP_TRY(set_inputs(g, c, ins, 3, err));
    /* the conv now produces what the BN produced: BN's node dies, the conv
     * moves to its place (the BN output keeps its name if it is an output) */
    int y = B->out[0], x = C->out[0];
    pp_graph_replace_uses(g, y, x);
    PP_TRY(absorb_scopes(g, C, B, err));
    B->dead = true;
    *changed = true;
    return PP_OK;
}

/* ---- a layer scale into Conv ----------------------------------------------------------- */

/* Mul node mu: Conv output * s, s a constant float32 of one value per
 * output channel ([C, 1, ...] or [1, C, 1, ...] against the Conv's [N, C,
 * ...]) or a scalar, every value finite and nonzero (so no infinity or NaN
 * appears or vanishes: x * W * 0 is NaN for an infinite x, x * (W * 0) is
 * not). Folded as BatchNormalization is: W[o] * s[o], bias[o] * s[o], each
 * product rounded once; the Conv takes the Mul's output. */
static pp_status fuse_conv_scale(pp_graph *g, int mu, bool *changed, pp_err *err) {
    pp_node *M = &g->nodes[mu];
    int c = -1, sv = -1;
    for (int k = 0; k < 2 && c < 0; k++) {
        const int p = producer(g, M->in[k]);
        if (is(g, p, PP_OP_CONV) && sole_user(g, M->in[k]) == mu) c = p, sv = M->in[1 - k];
    }
    if (c < 0 || sv < 0 || !g->values[sv].is_const || g->values[sv].dtype != PP_F32) return PP_OK;
    pp_node *C = &g->nodes[c];
    const pp_value *w = &g->values[C->in[1]], *y = &g->values[C->out[0]];
    const pp_value *bias = C->n_in > 2 && C->in[2] >= 0 ? &g->values[C->in[2]] : NULL;
    if (!w->is_const || w->dtype != PP_F32 || (bias && (!bias->is_const || bias->dtype != PP_F32)) ||
        y->shape.rank < 2)
        return PP_OK;
    const int64_t m = w->shape.dim[0];
    const pp_shape *ss = &g->values[sv].shape;
    int64_t cnt;
    PP_TRY(pp_shape_numel(ss, &cnt, err));
    if (cnt != 1 && !per_channel(g, sv, m, y->shape.rank)) return PP_OK; /* else one per channel */
    if (!pp_shape_eq(&g->values[M->out[0]].shape, &y->shape)) return PP_OK;
    PP_TRY(pp_value_align(g, sv, err));
    PP_TRY(pp_value_align(g, C->in[1], err));
    if (bias) PP_TRY(pp_value_align(g, C->in[2], err));
    w = &g->values[C->in[1]];
    bias = C->n_in > 2 && C->in[2] >= 0 ? &g->values[C->in[2]] : NULL;
    const float *sc = g->values[sv].data;
    for (int64_t o = 0; o < cnt; o++)
        if (!isfinite(sc[o]) || sc[o] == 0.0f) return PP_OK;
    const size_t per = (size_t)(w->nbytes / sizeof(float) / (size_t)m);
    float *nw = malloc(w->nbytes), *nb = bias ? malloc(sizeof(float) * (size_t)m) : NULL;
    if (!nw || (bias && !nb)) {
        free(nw), free(nb);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    const float *ow = w->data;
    bool finite = true;
    for (int64_t o = 0; o < m; o++) {
        const float f = sc[cnt == 1 ? 0 : o];
        for (size_t k = 0; k < per; k++) {
            const float v = ow[(size_t)o * per + k];
            nw[(size_t)o * per + k] = v * f;
            finite = finite && (!isfinite(v) || isfinite(v * f));
        }
        if (bias) {
            nb[o] = ((const float *)bias->data)[o] * f;
            finite = finite && (!isfinite(((const float *)bias->data)[o]) || isfinite(nb[o]));
        }
    }
    if (!finite) { /* a product overflowed: leave the Mul */
        free(nw), free(nb);
        return PP_OK;
    }
    char hint[512];
    int vw, vb = -1;
    snprintf(hint, sizeof hint, "%s.weight_scaled", C->name);
    pp_shape wshape = w->shape, bshape = {1, {m}};
    pp_status s = pp_graph_add_const(g, hint, PP_F32, &wshape, nw, &vw, err);
    if (s == PP_OK && nb) {
        snprintf(hint, sizeof hint, "%s.bias_scaled", g->nodes[c].name);
        s = pp_graph_add_const(g, hint, PP_F32, &bshape, nb, &vb, err);
    }
    free(nw), free(nb);
    PP_TRY(s);
    C = &g->nodes[c];
    M = &g->nodes[mu];
    int ins[3] = {C->in[0], vw, vb};
    PP_TRY(set_inputs(g, c, ins, nb ? 3 : 2, err));
    pp_graph_replace_uses(g, M->out[0], C->out[0]);
    PP_TRY(absorb_scopes(g, C, M, err));
    M->dead = true;
    *changed = true;
    return PP_OK;
}

/* ---- a zero Pad into the Conv or AveragePool after it ------------------------------------------ */

/* A constant integer list (int64 or int32) of at most max values into out. */
static bool const_ints(const pp_graph *g, int v, int64_t *out, int max, int *n) {
    if (v < 0 || !g->values[v].is_const) return false;
    const pp_value *c = &g->values[v];
    if (c->dtype != PP_I64 && c->dtype != PP_I32) return false;
    const size_t es = pp_dtype_size(c->dtype), cnt = c->nbytes / es;
    if (cnt > (size_t)max) return false;
    for (size_t i = 0; i < cnt; i++) { /* byte-wise: the constant may be unaligned (pp_value) */
        if (c->dtype == PP_I64) memcpy(&out[i], (const char *)c->data + 8 * i, 8);
        else {
            int32_t y;
            memcpy(&y, (const char *)c->data + 4 * i, 4);
            out[i] = y;
        }
    }
    *n = (int)cnt;
    return true;
}

/* Pad node p, whose only user is a Conv or an AveragePool reading it as its
 * data: torch exports avg_pool2d(padding=1) (count_include_pad, Inception's
 * branch_pool) as Pad + AveragePool, and TensorFlow converters put an
 * explicit Pad before strided convolutions. The Pad then costs as much as a
 * copy of the activation (Inception-v3 at -b 8 on oneDNN: 64 of 462 ms).
 * Folded where the result is the same by definition: mode constant with
 * value +0 (all bits zero, any float type), constant pads >= 0 on the
 * spatial axes only; the user has explicit pads (auto_pad NOTSET), and the
 * pool no ceil_mode and either count_include_pad or no pads of its own (the
 * padded zeros count in the average, so it must count its own pads too).
 * Each side's total stays below the window's extent, as oneDNN's kernels
 * require (a window wholly in the padding). The user takes the Pad's input,
 * the pads added to its own; its name stays, the Pad's scopes are kept. */
static pp_status fuse_pad(pp_graph *g, int p, bool *changed, pp_err *err) {
    const pp_node *P = &g->nodes[p];
    if (P->n_out != 1 || P->n_in < 1 || P->in[0] < 0) return PP_OK;
    const int u = sole_user(g, P->out[0]);
    const bool pool = is(g, u, PP_OP_AVGPOOL);
    if (!pool && !is(g, u, PP_OP_CONV)) return PP_OK;
    const pp_node *U = &g->nodes[u];
    if (U->in[0] != P->out[0] || U->n_in > 3) return PP_OK;
    for (int k = 1; k < U->n_in; k++)
        if (U->in[k] == P->out[0]) return PP_OK;
    const pp_value *x = &g->values[P->in[0]];
    const int r = x->shape.rank, nsp = r - 2;
    if (nsp < 1 || nsp > PP_MAX_SPATIAL) return PP_OK;
    const pp_attrs pa = pp_node_attrs(g, P);
    const char *mode;
    if (pp_attr_string(pa, "mode", "constant", &mode, NULL) != PP_OK || strcmp(mode, "constant")) return PP_OK;
    int64_t pads[2 * PP_MAX_DIMS], axes[PP_MAX_DIMS];
    int np = 0, na = r;
    if (pa.opset < 11) {
        float value;
        if (pp_attr_ints(pa, "pads", pads, 2 * PP_MAX_DIMS, &np, NULL) != PP_OK ||
            pp_attr_float(pa, "value", 0.0f, &value, NULL) != PP_OK || value != 0.0f || signbit(value))
            return PP_OK;
        for (int i = 0; i < r; i++) axes[i] = i;
    } else {
        if (P->n_in < 2 || !const_ints(g, P->in[1], pads, 2 * PP_MAX_DIMS, &np)) return PP_OK;
        if (P->n_in > 2 && P->in[2] >= 0) { /* the value: a constant of all-zero bytes is +0 */
            const pp_value *c = &g->values[P->in[2]];
            if (!c->is_const) return PP_OK;
            for (size_t b = 0; b < c->nbytes; b++)
                if (((const unsigned char *)c->data)[b]) return PP_OK;
        }
        if (P->n_in > 3 && P->in[3] >= 0) {
            if (!const_ints(g, P->in[3], axes, PP_MAX_DIMS, &na)) return PP_OK;
        } else {
            for (int i = 0; i < r; i++) axes[i] = i;
        }
    }
    if (np != 2 * na) return PP_OK;
    int64_t full[2 * PP_MAX_DIMS] = {0};
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
        if (a < 0 || a >= r) return PP_OK;
        full[a] += pads[i], full[r + a] += pads[na + i];
    }
    if (full[0] || full[1] || full[r] || full[r + 1]) return PP_OK;
    for (int i = 0; i < 2 * r; i++)
        if (full[i] < 0 || full[i] > (1 << 20)) return PP_OK;
    /* the user's own geometry */
    const pp_attrs ua = pp_node_attrs(g, U);
    const char *auto_pad;
    int64_t own[2 * PP_MAX_SPATIAL] = {0}, kern[PP_MAX_SPATIAL], dil[PP_MAX_SPATIAL];
    int n_own, nk, nd;
    if (pp_attr_string(ua, "auto_pad", "NOTSET", &auto_pad, NULL) != PP_OK || strcmp(auto_pad, "NOTSET") ||
        pp_attr_ints(ua, "pads", own, 2 * PP_MAX_SPATIAL, &n_own, NULL) != PP_OK ||
        (n_own && n_own != 2 * nsp) ||
        pp_attr_ints(ua, "kernel_shape", kern, PP_MAX_SPATIAL, &nk, NULL) != PP_OK ||
        pp_attr_ints(ua, "dilations", dil, PP_MAX_SPATIAL, &nd, NULL) != PP_OK || (nd && nd != nsp))
        return PP_OK;
    if (!pool) { /* the kernel is the weight's spatial shape */
        const pp_value *w = &g->values[U->in[1]];
        if (w->shape.rank != r) return PP_OK;
        for (int i = 0; i < nsp; i++) kern[i] = w->shape.dim[2 + i];
    } else {
        int64_t ceil_mode, cip;
        if (nk != nsp || pp_attr_int(ua, "ceil_mode", 0, &ceil_mode, NULL) != PP_OK || ceil_mode ||
            pp_attr_int(ua, "count_include_pad", 0, &cip, NULL) != PP_OK)
            return PP_OK;
        for (int i = 0; i < 2 * nsp && !cip; i++)
            if (own[i]) return PP_OK;
    }
    int64_t *sum = pp_arena_alloc(&g->arena, sizeof *sum * (size_t)(2 * nsp));
    if (!sum) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < nsp; i++) {
        const int64_t ext = (nd ? dil[i] : 1) * (kern[i] - 1) + 1;
        sum[i] = own[i] + full[2 + i];
        sum[nsp + i] = own[nsp + i] + full[r + 2 + i];
        if (own[i] < 0 || own[nsp + i] < 0 || sum[i] >= ext || sum[nsp + i] >= ext) return PP_OK;
    }
    /* the user's attributes with pads (and count_include_pad) replaced */
    pp_attr *at = pp_arena_alloc(&g->arena, sizeof *at * (size_t)(U->n_attrs + 2));
    if (!at) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    int n_at = 0;
    for (int k = 0; k < U->n_attrs; k++)
        if (strcmp(U->attrs[k].name, "pads") && (!pool || strcmp(U->attrs[k].name, "count_include_pad")))
            at[n_at++] = U->attrs[k];
    at[n_at++] = (pp_attr){.name = "pads", .type = PP_ATTR_INTS, .ints = sum, .n = 2 * nsp};
    if (pool) at[n_at++] = (pp_attr){.name = "count_include_pad", .type = PP_ATTR_INT, .i = 1};
    int ins[3];
    for (int k = 0; k < U->n_in; k++) ins[k] = U->in[k];
    ins[0] = P->in[0];
    const int n_in = U->n_in;
    PP_TRY(set_inputs(g, u, ins, n_in, err));
    pp_node *W = &g->nodes[u];
    W->attrs = at;
    W->n_attrs = n_at;
    PP_TRY(absorb_scopes(g, W, &g->nodes[p], err));
    g->nodes[p].dead = true;
    *changed = true;
    return PP_OK;
}

/* ---- the mean over every spatial axis is GlobalAveragePool -------------------------------------- */

/* ReduceMean node i over axes {2, ..., r-1} of a float32 tensor of rank 4
 * or 5 (an image's; rank 3 is as often a sequence of tokens, left to
 * ReduceMean, whose channel axis would be the tokens), keepdims 1: timm's squeeze-and-excitation (`x.mean((2, 3),
 * keepdim=True)`) in EfficientNet, MixNet, MobileNetV3 and others, which no
 * backend pools: on oneDNN it ran on the reference kernel at 20x
 * onnxruntime's time (tf_efficientnet_b0 at -b 8: 29 of 117 ms). The same
 * mean by definition; the node keeps its name, and reads only its data. */
static pp_status fuse_spatial_mean(pp_graph *g, int i, bool *changed) {
    pp_node *R = &g->nodes[i];
    if (R->n_in < 1 || R->in[0] < 0 || R->n_out != 1) return PP_OK;
    const pp_value *x = &g->values[R->in[0]];
    const int r = x->shape.rank;
    if (x->dtype != PP_F32 || g->values[R->out[0]].dtype != PP_F32 || r < 4 || r > 5) return PP_OK;
    const pp_attrs a = pp_node_attrs(g, R);
    int64_t keep, axes[PP_MAX_DIMS];
    int na = 0;
    if (pp_attr_int(a, "keepdims", 1, &keep, NULL) != PP_OK || keep != 1) return PP_OK;
    if (a.opset < 18) {
        if (pp_attr_ints(a, "axes", axes, PP_MAX_DIMS, &na, NULL) != PP_OK) return PP_OK;
    } else if (R->n_in < 2 || !const_ints(g, R->in[1], axes, PP_MAX_DIMS, &na)) {
        return PP_OK;
    }
    if (na != r - 2) return PP_OK;
    unsigned seen = 0;
    for (int k = 0; k < na; k++) {
        const int64_t ax = axes[k] < 0 ? axes[k] + r : axes[k];
        if (ax < 2 || ax >= r || (seen & (1u << ax))) return PP_OK;
        seen |= 1u << ax;
    }
    R->op = PP_OP_GLOBALAVGPOOL;
    R->n_in = 1;
    R->attrs = NULL;
    R->n_attrs = 0;
    *changed = true;
    return PP_OK;
}

/* ---- Conv [+ Add] [+ Relu/Clip] ------------------------------------------------------------ */

static pp_status fuse_conv(pp_graph *g, int c, bool *changed, pp_err *err) {
    const pp_op fused = PP_OP_FUSEDCONV;
    int y = g->nodes[c].out[0];
    int user = sole_user(g, y);
    int add = -1, act = -1, z = -1, last = c;
    if (is(g, user, PP_OP_ADD)) {
        const pp_node *A = &g->nodes[user];
        int other = A->in[0] == y ? A->in[1] : A->in[0];
        if (A->in[0] != A->in[1] && g->values[other].dtype == g->values[y].dtype &&
            pp_shape_eq(&g->values[other].shape, &g->values[y].shape)) {
            add = user, z = other, last = add;
            user = sole_user(g, A->out[0]);
        }
    }
    pp_attr extra[3];
    int n_extra = 0;
    if (is(g, user, PP_OP_RELU)) {
        act = user;
        extra[n_extra++] = (pp_attr){.name = "activation", .type = PP_ATTR_STRING, .s = "Relu"};
    } else if (is(g, user, PP_OP_CLIP)) {
        const pp_node *K = &g->nodes[user];
        double lo = -FLT_MAX, hi = FLT_MAX; /* ONNX's defaults: the float range */
        bool ok = true;
        if (K->n_in > 1 && K->in[1] >= 0) ok &= const_scalar(g, K->in[1], &lo);
        if (K->n_in > 2 && K->in[2] >= 0) ok &= const_scalar(g, K->in[2], &hi);
        float flo, fhi;
        ok &= pp_attr_float(pp_node_attrs(g, K), "min", (float)lo, &flo, NULL) == PP_OK;
        ok &= pp_attr_float(pp_node_attrs(g, K), "max", (float)hi, &fhi, NULL) == PP_OK;
        if (ok) {
            act = user;
            extra[n_extra++] = (pp_attr){.name = "activation", .type = PP_ATTR_STRING, .s = "Clip"};
            extra[n_extra++] = (pp_attr){.name = "clip_min", .type = PP_ATTR_FLOAT, .f = flo};
            extra[n_extra++] = (pp_attr){.name = "clip_max", .type = PP_ATTR_FLOAT, .f = fhi};
        }
    }
    if (add < 0 && act < 0) return PP_OK;
    if (act >= 0) last = act;
    const pp_node *C = &g->nodes[c];
    int ins[4] = {C->in[0], C->in[1], C->n_in > 2 ? C->in[2] : -1, z};
    const pp_attr *cattrs = C->attrs;
    int n_cattrs = C->n_attrs;
    int dead[3] = {c, add, act};
    PP_TRY(become(g, last, c, fused, dead, 3, err));
    pp_node *L = &g->nodes[last];
    PP_TRY(set_inputs(g, last, ins, z >= 0 ? 4 : 3, err));
    L->attrs = (pp_attr *)cattrs;
    L->n_attrs = n_cattrs;
    PP_TRY(add_attrs(g, L, extra, n_extra, err));
    *changed = true;
    return PP_OK;
}

/* ---- MatMul + Add -> Gemm ------------------------------------------------------------------- */

static pp_status fuse_matmul_add(pp_graph *g, int mm, bool *changed, pp_err *err) {
    const pp_op gemm = PP_OP_GEMM;
    const pp_node *M = &g->nodes[mm];
    const pp_value *a = &g->values[M->in[0]], *b = &g->values[M->in[1]];
    if (a->shape.rank != 2 || b->shape.rank != 2 || a->dtype != PP_F32) return PP_OK;
    int add = sole_user(g, M->out[0]);
    if (!is(g, add, PP_OP_ADD)) return PP_OK;
    const pp_node *A = &g->nodes[add];
    int c = A->in[0] == M->out[0] ? A->in[1] : A->in[0];
    const pp_value *cv = &g->values[c];
    int64_t n = b->shape.dim[1];
    bool bias = cv->is_const && cv->dtype == PP_F32 &&
                ((cv->shape.rank == 1 && cv->shape.dim[0] == n) ||
                 (cv->shape.rank == 2 && cv->shape.dim[1] == n &&
                  (cv->shape.dim[0] == 1 || cv->shape.dim[0] == a->shape.dim[0])));
    if (!bias || A->in[0] == A->in[1]) return PP_OK;
    int ins[3] = {M->in[0], M->in[1], c};
    int dead[2] = {mm, add};
    PP_TRY(become(g, add, mm, gemm, dead, 2, err));
    pp_node *L = &g->nodes[add];
    PP_TRY(set_inputs(g, add, ins, 3, err));
    L->attrs = NULL;
    L->n_attrs = 0;
    *changed = true;
    return PP_OK;
}

/* the other input of binary node n, given one of them */
static int other_in(const pp_graph *g, int n, int v) {
    const pp_node *N = &g->nodes[n];
    if (N->n_in != 2) return -1;
    return N->in[0] == v ? N->in[1] : N->in[1] == v ? N->in[0] : -1;
}

/* The pattern from node `first` to node `last` (dead[0..n) its nodes)
 * becomes the unary `op` of x, in last's place: no attributes. */
static pp_status become_unary(pp_graph *g, int last, int first, pp_op op, int x, const int *dead, int n, pp_err *err) {
    PP_TRY(become(g, last, first, op, dead, n, err));
    PP_TRY(set_inputs(g, last, &x, 1, err));
    g->nodes[last].attrs = NULL;
    g->nodes[last].n_attrs = 0;
    return PP_OK;
}

/* ---- x * Sigmoid(x) -> SiLU, x * HardSigmoid(x; 1/6, 0.5) -> HardSwish ------------------------ */

/* x * f(x), f node `f` (f32), becomes the unary `op` of x. */
static pp_status fuse_self_gate(pp_graph *g, int f, pp_op op, bool *changed, pp_err *err) {
    int x = g->nodes[f].in[0], s = g->nodes[f].out[0];
    int mul = sole_user(g, s);
    if (!is(g, mul, PP_OP_MUL) || other_in(g, mul, s) != x || g->values[x].dtype != PP_F32) return PP_OK;
    int dead[2] = {f, mul};
    PP_TRY(become_unary(g, mul, f, op, x, dead, 2, err));
    *changed = true;
    return PP_OK;
}

/* torch exports hardswish before opset 14 as x * HardSigmoid(x); ONNX
 * defines HardSwish as exactly that product with alpha 1/6 and beta 0.5.
 * As one op a convolution's kernel can take it as a post-op. */
static pp_status fuse_hardswish(pp_graph *g, int hs, bool *changed, pp_err *err) {
    float alpha, beta;
    pp_attrs a = pp_node_attrs(g, &g->nodes[hs]);
    if (pp_attr_float(a, "alpha", 0.2f, &alpha, NULL) != PP_OK || pp_attr_float(a, "beta", 0.5f, &beta, NULL) != PP_OK ||
        alpha != (float)(1.0 / 6.0) || beta != 0.5f)
        return PP_OK;
    return fuse_self_gate(g, hs, PP_OP_HARDSWISH, changed, err);
}

/* ---- Erf GELU -> Gelu ------------------------------------------------------------------------- */

/* The end of a GELU of x from f (its Erf or Tanh): a = f + 1; m = x * a; o = m * 0.5, or m = x * 0.5 and
 * o = m * a. *last: o's node; n: a, m and the Mul by 0.5 that is not o (-1 where there is none). */
static bool gelu_tail(const pp_graph *g, int f, int x, int *last, int n[3]) {
    double k;
    const int a = sole_user(g, g->nodes[f].out[0]);
    if (!is(g, a, PP_OP_ADD) || !const_scalar(g, other_in(g, a, g->nodes[f].out[0]), &k) || !near(k, 1.0))
        return false;
    const int m = sole_user(g, g->nodes[a].out[0]);
    if (!is(g, m, PP_OP_MUL)) return false;
    const int mo = other_in(g, m, g->nodes[a].out[0]);
    int half;
    if (mo == x) { /* (x * a) * 0.5 */
        *last = sole_user(g, g->nodes[m].out[0]);
        if (!is(g, *last, PP_OP_MUL) || !const_scalar(g, other_in(g, *last, g->nodes[m].out[0]), &k) || !near(k, 0.5))
            return false;
        half = -1;
    } else { /* (x * 0.5) * a */
        half = producer(g, mo);
        if (!is(g, half, PP_OP_MUL) || sole_user(g, mo) != m || other_in(g, half, x) < 0 ||
            !const_scalar(g, other_in(g, half, x), &k) || !near(k, 0.5))
            return false;
        *last = m;
    }
    n[0] = a, n[1] = m, n[2] = half;
    return true;
}

static pp_status fuse_gelu(pp_graph *g, int erf, bool *changed, pp_err *err) {
    const pp_op gelu = PP_OP_GELU;
    /* d = x / sqrt(2) (or x * 1/sqrt(2)); e = Erf(d); a = e + 1; m = x * a; o = m * 0.5
     * (0.5 may also multiply first: m = x * 0.5, o = m * a) */
    int d = producer(g, g->nodes[erf].in[0]);
    double k;
    if (d < 0 || sole_user(g, g->nodes[d].out[0]) != erf) return PP_OK;
    int x = g->nodes[d].in[0];
    if (is(g, d, PP_OP_DIV) && const_scalar(g, g->nodes[d].in[1], &k) && near(k, sqrt(2.0))) {
    } else if (is(g, d, PP_OP_MUL) && ((const_scalar(g, g->nodes[d].in[1], &k) && near(k, 1 / sqrt(2.0))) ||
                                   (x = g->nodes[d].in[1], const_scalar(g, g->nodes[d].in[0], &k) && near(k, 1 / sqrt(2.0))))) {
    } else {
        return PP_OK;
    }
    int last, t[3];
    if (!gelu_tail(g, erf, x, &last, t)) return PP_OK;
    int dead[5] = {d, erf, t[0], t[1], t[2]};
    PP_TRY(become_unary(g, last, d, gelu, x, dead, 5, err));
    *changed = true;
    return PP_OK;
}

/* ---- tanh GELU (GPT-2's and GPT-J's gelu_new) -> Gelu(approximate "tanh") ---------------------- */

/* c = Pow(x, 3); m = c * 0.044715; s = x + m; d = s * sqrt(2 / pi); t = Tanh(d), then gelu_tail's end (either
 * operand order throughout): Gelu's tanh form, one kernel where there were eight; the values differ from the
 * eight f32 roundings by about an ulp of the output. */
static pp_status fuse_gelu_tanh(pp_graph *g, int th, bool *changed, pp_err *err) {
    double k;
    const int d = producer(g, g->nodes[th].in[0]);
    if (!is(g, d, PP_OP_MUL) || sole_user(g, g->nodes[d].out[0]) != th) return PP_OK;
    int sv = -1;
    for (int q = 0; q < 2; q++) /* 0.79788...: sqrt(2 / pi) */
        if (const_scalar(g, g->nodes[d].in[q], &k) && near(k, 0.7978845608028654)) sv = g->nodes[d].in[1 - q];
    const int sn = producer(g, sv);
    if (!is(g, sn, PP_OP_ADD) || sole_user(g, sv) != d) return PP_OK;
    for (int q = 0; q < 2; q++) {
        const int x = g->nodes[sn].in[q], mv = g->nodes[sn].in[1 - q], m = producer(g, mv);
        if (!is(g, m, PP_OP_MUL) || sole_user(g, mv) != sn) continue;
        int cv = -1;
        for (int r = 0; r < 2; r++)
            if (const_scalar(g, g->nodes[m].in[r], &k) && near(k, 0.044715)) cv = g->nodes[m].in[1 - r];
        const int c = producer(g, cv);
        if (!is(g, c, PP_OP_POW) || sole_user(g, cv) != m || g->nodes[c].in[0] != x ||
            !const_scalar(g, g->nodes[c].in[1], &k) || k != 3.0)
            continue;
        int last, t[3];
        if (!gelu_tail(g, th, x, &last, t)) return PP_OK;
        int dead[8] = {c, m, sn, d, th, t[0], t[1], t[2]};
        PP_TRY(become_unary(g, last, c, PP_OP_GELU, x, dead, 8, err));
        const pp_attr at = {.name = "approximate", .type = PP_ATTR_STRING, .s = "tanh"};
        PP_TRY(add_attrs(g, &g->nodes[last], &at, 1, err));
        *changed = true;
        return PP_OK;
    }
    return PP_OK;
}

/* ---- decomposed LayerNorm -> LayerNormalization ------------------------------------------------ */

/* ReduceMean over exactly the last axis, keepdims */
static bool mean_last(const pp_graph *g, int n) {
    if (!is(g, n, PP_OP_REDUCEMEAN)) return false;
    const pp_node *N = &g->nodes[n];
    int r = g->values[N->in[0]].shape.rank;
    int64_t axes[PP_MAX_DIMS];
    int na = 0;
    const pp_attr *ax = pp_attr_find(pp_node_attrs(g, N), "axes");
    if (ax && ax->type == PP_ATTR_INTS && ax->n <= PP_MAX_DIMS) {
        na = ax->n;
        for (int k = 0; k < na; k++) axes[k] = ax->ints[k];
    } else if (N->n_in > 1 && N->in[1] >= 0 && g->values[N->in[1]].is_const &&
               g->values[N->in[1]].dtype == PP_I64 && g->values[N->in[1]].nbytes == 8) {
        na = 1;
        axes[0] = *(const int64_t *)g->values[N->in[1]].data;
    }
    int64_t keep = 1;
    pp_attr_int(pp_node_attrs(g, N), "keepdims", 1, &keep, NULL);
    return na == 1 && (axes[0] == -1 || axes[0] == r - 1) && keep;
}

/* A LayerNormalization scale or shift: an f32 vector of the normalized
 * length, constant or (before the gradient, pp_fuse_train) a weight that
 * trains, a variable until pp_train_params_fix */
static bool ln_param(const pp_graph *g, int v, int64_t len) {
    if (v < 0) return false;
    const pp_value *p = &g->values[v];
    return (p->is_const || p->is_param) && p->dtype == PP_F32 && p->shape.rank == 1 && p->shape.dim[0] == len;
}

/* The fused norm at node n (made by become): its inputs ins[0..cnt), its attributes axis -1 and epsilon alone */
static pp_status last_axis_norm(pp_graph *g, int n, const int *ins, int cnt, double eps, pp_err *err) {
    PP_TRY(set_inputs(g, n, ins, cnt, err));
    pp_node *L = &g->nodes[n];
    L->attrs = NULL;
    L->n_attrs = 0;
    const pp_attr at[2] = {{.name = "axis", .type = PP_ATTR_INT, .i = -1},
                           {.name = "epsilon", .type = PP_ATTR_FLOAT, .f = (float)eps}};
    return add_attrs(g, L, at, 2, err);
}

static pp_status fuse_layernorm(pp_graph *g, int rm, bool *changed, pp_err *err) {
    const pp_op ln = PP_OP_LAYERNORM;
    if (!mean_last(g, rm)) return PP_OK;
    int x = g->nodes[rm].in[0], mu = g->nodes[rm].out[0];
    /* d = x - mu, used by Pow and Div */
    int sub = sole_user(g, mu);
    if (!is(g, sub, PP_OP_SUB) || g->nodes[sub].in[0] != x || g->nodes[sub].in[1] != mu) return PP_OK;
    int dv = g->nodes[sub].out[0];
    int pw = -1, dvn = -1, users[3];
    int n_users = pp_graph_consumers(g, dv, users, 3);
    if (n_users > 3) return PP_OK; /* read by more than Pow and Div */
    for (int u = 0; u < n_users; u++) {
        int i = users[u];
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == dv) {
                if (is(g, i, PP_OP_POW) && k == 0) pw = i;
                else if (is(g, i, PP_OP_DIV) && k == 0) dvn = i;
                else return PP_OK;
            }
    }
    double k;
    if (pw < 0 || dvn < 0 || pp_graph_is_output(g, dv) || !const_scalar(g, g->nodes[pw].in[1], &k) || k != 2.0)
        return PP_OK;
    int rm2 = sole_user(g, g->nodes[pw].out[0]);
    if (!mean_last(g, rm2)) return PP_OK;
    int ad = sole_user(g, g->nodes[rm2].out[0]);
    double eps;
    if (!is(g, ad, PP_OP_ADD) || !const_scalar(g, other_in(g, ad, g->nodes[rm2].out[0]), &eps)) return PP_OK;
    int sq = sole_user(g, g->nodes[ad].out[0]);
    if (!is(g, sq, PP_OP_SQRT) || sole_user(g, g->nodes[sq].out[0]) != dvn || g->nodes[dvn].in[1] != g->nodes[sq].out[0])
        return PP_OK;
    int mul = sole_user(g, g->nodes[dvn].out[0]);
    if (!is(g, mul, PP_OP_MUL)) return PP_OK;
    const int64_t last_dim = g->values[x].shape.dim[g->values[x].shape.rank - 1];
    int gamma = other_in(g, mul, g->nodes[dvn].out[0]);
    if (!ln_param(g, gamma, last_dim)) return PP_OK;
    /* the shift is optional (timm's LayerNorm2dNoBias, caformer's): an Add of
     * anything but a constant of the last dim's length ends the pattern at Mul */
    int add2 = sole_user(g, g->nodes[mul].out[0]);
    int beta = is(g, add2, PP_OP_ADD) ? other_in(g, add2, g->nodes[mul].out[0]) : -1;
    if (beta < 0 || !ln_param(g, beta, last_dim)) add2 = beta = -1;
    const int last = add2 >= 0 ? add2 : mul;
    int dead[9] = {rm, sub, pw, rm2, ad, sq, dvn, mul, add2};
    PP_TRY(become(g, last, rm, ln, dead, 9, err));
    int ins[3] = {x, gamma, beta};
    PP_TRY(last_axis_norm(g, last, ins, beta >= 0 ? 3 : 2, eps, err));
    *changed = true;
    return PP_OK;
}

/* ---- decomposed RMSNorm -> RMSNormalization ---------------------------------------------------- */

/* Hugging Face's LlamaRMSNorm / T5LayerNorm (Mistral, Qwen, Gemma with its
 * 1 + weight folded) as torch exports it: Pow(x, 2) -> ReduceMean over the
 * last axis (keepdims) -> Add eps -> Sqrt -> Reciprocal (or Div of 1 by it)
 * -> Mul with x -> Mul with a weight of the last dim's length, either
 * operand order. Becomes RMSNormalization(x, weight, axis -1, epsilon): one
 * kernel (the row kernels on CUDA, with the residual Add before it) where
 * there were seven, and a half plan no longer keeps the Pow's chain in f32
 * (x^2 of fp16 overflows past 256; the fused kernel sums in double). The
 * values differ from the seven f32 roundings by about an ulp of the output. */
static pp_status fuse_rmsnorm(pp_graph *g, int pw, bool *changed, pp_err *err) {
    double k, eps, one;
    const int x = g->nodes[pw].in[0];
    if (g->values[x].dtype != PP_F32 || g->values[x].shape.rank < 1 || !const_scalar(g, g->nodes[pw].in[1], &k) ||
        k != 2.0)
        return PP_OK;
    const int rm = sole_user(g, g->nodes[pw].out[0]);
    if (!mean_last(g, rm) || g->nodes[rm].in[0] != g->nodes[pw].out[0]) return PP_OK;
    const int ad = sole_user(g, g->nodes[rm].out[0]);
    if (!is(g, ad, PP_OP_ADD) || !const_scalar(g, other_in(g, ad, g->nodes[rm].out[0]), &eps) || !(eps >= 0))
        return PP_OK;
    const int sq = sole_user(g, g->nodes[ad].out[0]);
    if (!is(g, sq, PP_OP_SQRT)) return PP_OK;
    const int sv = g->nodes[sq].out[0], inv = sole_user(g, sv);
    if (!is(g, inv, PP_OP_RECIPROCAL) &&
        !(is(g, inv, PP_OP_DIV) && g->nodes[inv].in[1] == sv && const_scalar(g, g->nodes[inv].in[0], &one) && one == 1.0))
        return PP_OK;
    const int mul = sole_user(g, g->nodes[inv].out[0]);
    if (!is(g, mul, PP_OP_MUL) || other_in(g, mul, g->nodes[inv].out[0]) != x) return PP_OK;
    /* hidden.to(input_dtype) between the two Muls: a Cast of f32 to f32 until simplify removes it (the training
     * graph's fusion runs before simplify) */
    int mv = g->nodes[mul].out[0], mul2 = sole_user(g, mv), nop = -1;
    if (is(g, mul2, PP_OP_CAST) && g->values[g->nodes[mul2].out[0]].dtype == PP_F32)
        nop = mul2, mv = g->nodes[nop].out[0], mul2 = sole_user(g, mv);
    const int gamma = is(g, mul2, PP_OP_MUL) ? other_in(g, mul2, mv) : -1;
    const pp_shape *xs = &g->values[x].shape;
    if (!ln_param(g, gamma, xs->dim[xs->rank - 1]) ||
        !pp_shape_eq(&g->values[g->nodes[mul2].out[0]].shape, xs)) /* (a weight that broadcasts x up: no) */
        return PP_OK;
    int dead[7] = {pw, rm, ad, sq, inv, mul, nop};
    PP_TRY(become(g, mul2, pw, PP_OP_RMSNORM, dead, 7, err));
    int ins[2] = {x, gamma};
    PP_TRY(last_axis_norm(g, mul2, ins, 2, eps, err));
    *changed = true;
    return PP_OK;
}

/* ---- GroupNorm as torch exports it ----------------------------------------------------------- */

/* Whether v is a constant f32 whose every element is `want`. */
static pp_status all_equal(pp_graph *g, int v, float want, bool *yes, pp_err *err) {
    *yes = false;
    if (v < 0 || !g->values[v].is_const || g->values[v].dtype != PP_F32) return PP_OK;
    PP_TRY(pp_value_align(g, v, err));
    const float *p = g->values[v].data;
    for (size_t i = 0; i < g->values[v].nbytes / sizeof(float); i++)
        if (p[i] != want) return PP_OK;
    *yes = true;
    return PP_OK;
}

/* A new [C] constant: v's elements, or C copies of `fill` where v < 0. */
static pp_status channel_const(pp_graph *g, int v, int64_t C, float fill, const char *hint, int *out, pp_err *err) {
    float *d = malloc(sizeof(float) * (size_t)C);
    if (!d) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (v >= 0) memcpy(d, g->values[v].data, sizeof(float) * (size_t)C);
    else
        for (int64_t c = 0; c < C; c++) d[c] = fill;
    const pp_shape sh = {1, {C}};
    pp_status s = pp_graph_add_const(g, hint, PP_F32, &sh, d, out, err);
    free(d);
    return s;
}

/* Node `in`, an InstanceNormalization with scale 1 and bias 0 between two
 * Reshapes, [N, C, ...] -> [N, G, ...] -> back: GroupNormalization of G
 * groups (each (sample, group) slice of the middle value is C/G whole
 * channels). A Mul by a constant per channel after it, then an Add of one,
 * are its scale and bias (absent: 1 and 0). Becomes pp.GroupNorm, which
 * backends can run in any layout of X; its reference kernel gives the bits
 * of the nodes it replaces. */
static pp_status fuse_groupnorm(pp_graph *g, int in, bool *changed, pp_err *err) {
    const int r1 = producer(g, g->nodes[in].in[0]);
    if (!is(g, r1, PP_OP_RESHAPE) || sole_user(g, g->nodes[in].in[0]) != in) return PP_OK;
    const int x = g->nodes[r1].in[0];
    const pp_shape *xs = &g->values[x].shape, *gs = &g->values[g->nodes[in].in[0]].shape;
    if (g->values[x].dtype != PP_F32 || xs->rank < 2 || gs->rank < 3 || gs->dim[0] != xs->dim[0]) return PP_OK;
    const int64_t C = xs->dim[1], G = gs->dim[1];
    if (G < 1 || C % G) return PP_OK;
    const int r2 = sole_user(g, g->nodes[in].out[0]);
    if (!is(g, r2, PP_OP_RESHAPE) || g->nodes[r2].in[0] != g->nodes[in].out[0] ||
        !pp_shape_eq(&g->values[g->nodes[r2].out[0]].shape, xs))
        return PP_OK;
    bool ones, zeros;
    PP_TRY(all_equal(g, g->nodes[in].in[1], 1.0f, &ones, err));
    PP_TRY(all_equal(g, g->nodes[in].in[2], 0.0f, &zeros, err));
    if (!ones || !zeros) return PP_OK;
    float eps;
    PP_TRY(pp_attr_float(pp_node_attrs(g, &g->nodes[in]), "epsilon", 1e-5f, &eps, err));
    /* the affine after it, each step optional */
    int y = g->nodes[r2].out[0], last = r2, sv = -1, bv = -1, nodes[5] = {r1, in, r2, -1, -1};
    const pp_op steps[2] = {PP_OP_MUL, PP_OP_ADD};
    for (int k = 0; k < 2; k++) {
        const int u = sole_user(g, y), o = is(g, u, steps[k]) ? other_in(g, u, y) : -1;
        if (o < 0 || !per_channel(g, o, C, xs->rank) || !pp_shape_eq(&g->values[g->nodes[u].out[0]].shape, xs))
            continue;
        PP_TRY(pp_value_align(g, o, err));
        *(k == 0 ? &sv : &bv) = o;
        nodes[3 + k] = last = u;
        y = g->nodes[u].out[0];
    }
    char hint[512];
    int ins[3] = {x, -1, -1};
    snprintf(hint, sizeof hint, "%s.gn_scale", g->nodes[in].name);
    PP_TRY(channel_const(g, sv, C, 1.0f, hint, &ins[1], err));
    snprintf(hint, sizeof hint, "%s.gn_bias", g->nodes[in].name);
    PP_TRY(channel_const(g, bv, C, 0.0f, hint, &ins[2], err));
    PP_TRY(become(g, last, in, PP_OP_FUSEDGN, nodes, 5, err));
    PP_TRY(set_inputs(g, last, ins, 3, err));
    pp_node *L = &g->nodes[last];
    L->attrs = NULL;
    L->n_attrs = 0;
    const pp_attr at[2] = {{.name = "num_groups", .type = PP_ATTR_INT, .i = G},
                           {.name = "epsilon", .type = PP_ATTR_FLOAT, .f = eps}};
    PP_TRY(add_attrs(g, L, at, 2, err));
    *changed = true;
    return PP_OK;
}

/* ---- chains a backend may run as one kernel ------------------------------------------------ */

/* Ops that open a chain (PP_TR_HEAD: a backend's kernel for them can apply
 * what follows as post-ops) and ops a chain may absorb (PP_TR_POSTOP:
 * elementwise activations and arithmetic, a superset of what any backend
 * absorbs): the op table's traits column. */
static bool chain_head(pp_op op) { return pp_op_has(op, PP_TR_HEAD); }
static bool chain_link(pp_op op) { return pp_op_has(op, PP_TR_POSTOP); }

pp_status pp_fusion_chains(const pp_graph *g, bool *glued, pp_err *err) {
    int *uses = calloc(pp_count(g->n_values) + 1, sizeof *uses);
    if (!uses) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) uses[g->nodes[i].in[k]]++;
    for (int k = 0; k < g->n_outputs; k++) uses[g->outputs[k]] += 2; /* a graph output ends a chain */
    int links = -1; /* nodes absorbed so far by the open chain; -1: none open */
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        glued[i] = false;
        if (i > 0 && links >= 0 && links < PP_CHAIN_LINKS && chain_link(n->op) && n->n_out == 1) {
            const pp_node *prev = &g->nodes[i - 1];
            const int cur = prev->n_out >= 1 ? prev->out[0] : -1;
            bool reads = false;
            for (int k = 0; k < n->n_in; k++) reads = reads || (cur >= 0 && n->in[k] == cur);
            glued[i] = reads && uses[cur] == 1 && pp_shape_eq(&g->values[n->out[0]].shape, &g->values[cur].shape);
        }
        links = glued[i] ? links + 1 : chain_head(n->op) ? 0 : -1;
    }
    free(uses);
    return PP_OK;
}

/* ---- patterns kept whole ------------------------------------------------------------------- */

/* The node that follows node a in an attention pattern: the sole reader of
 * its single output (a graph output or a value read twice ends it), or -1.
 * user[v]: v's reader, -2 where it has several or is a graph output. */
static int attn_next(const pp_graph *g, const int *user, int a, pp_dtype t) {
    const pp_node *n = &g->nodes[a];
    if (n->n_out != 1 || n->out[0] < 0 || g->values[n->out[0]].dtype != t) return -1;
    const int u = user[n->out[0]];
    return u >= 0 && !g->nodes[u].dead ? u : -1;
}

/* Whether shape s broadcasts to `to` alone (each of its dims, right-aligned, to's or 1): pp_broadcast gives `to` */
static bool broadcasts_to(const pp_shape *s, const pp_shape *to) {
    pp_shape o;
    return pp_broadcast(s, to, &o, NULL) == PP_OK && pp_shape_eq(&o, to);
}

int pp_attn_where(const pp_graph *g, int a, int scores, pp_dtype t) {
    const pp_node *n = &g->nodes[a];
    if (n->op != PP_OP_WHERE || n->n_in != 3 || n->n_out != 1 || n->in[0] < 0 || n->in[1] == n->in[2] ||
        (n->in[1] != scores && n->in[2] != scores))
        return -1;
    const int cond = n->in[0], fill = n->in[1] == scores ? n->in[2] : n->in[1];
    double f;
    const pp_shape *ys = &g->values[n->out[0]].shape;
    return g->values[cond].dtype == PP_BOOL && fill >= 0 && g->values[fill].dtype == t &&
                   const_scalar_half(g, fill, &f) && pp_shape_eq(&g->values[scores].shape, ys) &&
                   broadcasts_to(&g->values[cond].shape, ys)
               ? a
               : -1;
}

int pp_attn_mask(const pp_graph *g, int a, int scores, pp_dtype t) {
    const pp_node *n = &g->nodes[a];
    if (n->op != PP_OP_ADD || n->n_in != 2 || n->n_out != 1 || n->in[0] == n->in[1] ||
        (n->in[0] != scores && n->in[1] != scores))
        return -1;
    const int m = n->in[0] == scores ? n->in[1] : n->in[0];
    const pp_shape *ys = &g->values[n->out[0]].shape;
    return m >= 0 && g->values[m].dtype == t && pp_shape_eq(&g->values[scores].shape, ys) &&
                   broadcasts_to(&g->values[m].shape, ys)
               ? m
               : -1;
}

/* A frame around a mask (torch's views of the scores): Reshape node r of the scores [N, ..., S, T] into
 * [F0, F1, ..., S, T] (F0 * F1 = N, the other dims kept), an Add of a mask there (pp_attn_mask), a Reshape back,
 * each read by the next alone: BART's [B * H, S, T] as [B, H, S, T], Swin's shifted windows [B * W, H, S, T] as
 * [B, W, H, S, T]. The Reshape back, or -1. */
static int attn_frame(const pp_graph *g, const int *user, int r, int scores, pp_dtype t) {
    const pp_node *n = &g->nodes[r];
    if (n->op != PP_OP_RESHAPE || n->n_in < 1 || n->in[0] != scores || n->n_out != 1 || n->out[0] < 0) return -1;
    const pp_shape *xs = &g->values[scores].shape;
    if (!pp_attn_frame_shape(xs, &g->values[n->out[0]].shape)) return -1;
    const int ad = attn_next(g, user, r, t);
    if (ad < 0 || pp_attn_mask(g, ad, n->out[0], t) < 0) return -1;
    const int r2 = attn_next(g, user, ad, t);
    const pp_node *b = r2 >= 0 ? &g->nodes[r2] : NULL;
    return b && b->op == PP_OP_RESHAPE && b->n_in >= 1 && b->in[0] == g->nodes[ad].out[0] && b->n_out == 1 &&
                   b->out[0] >= 0 && pp_shape_eq(&g->values[b->out[0]].shape, xs)
               ? r2
               : -1;
}

/* Whether value v is a constant of type t that scales the scores x [..., H, S, T] per head (SwinV2's logit
 * scale [H, 1, 1]: each dim, right-aligned, 1 but the -3rd, which is H > 1) */
static bool const_per_head(const pp_graph *g, int v, int x, pp_dtype t) {
    const pp_value *c = &g->values[v];
    return c->is_const && c->dtype == t && pp_attn_head_shape(&c->shape, &g->values[x].shape);
}

/* The last node of the attention pattern that MatMul a opens, or -1:
 * MatMul -> [Where (pp_attn_where)] -> [Mul by a constant scalar (either
 * side), or by one per head (const_per_head) | Div by a scalar] -> [Where, if none before] -> [Add of a mask
 * (pp_attn_mask)] -> [a frame around one (attn_frame)] -> Softmax
 * over the last axis -> MatMul reading the
 * probabilities as its left
 * operand, every link read by the next alone, one type throughout: f32, or
 * (a half plan, ppcc --precision) f16 or bf16, the scale a half constant. */
static int attn_tail(const pp_graph *g, const int *user, int a) {
    const pp_node *m1 = &g->nodes[a];
    if (m1->op != PP_OP_MATMUL || m1->n_in != 2 || m1->in[0] < 0) return -1;
    const pp_dtype t = g->values[m1->in[0]].dtype;
    if (t != PP_F32 && t != PP_F16 && t != PP_BF16) return -1;
    for (int k = 0; k < 2; k++)
        if (m1->in[k] < 0 || g->values[m1->in[k]].dtype != t || g->values[m1->in[k]].shape.rank < 2) return -1;
    int b = attn_next(g, user, a, t), cur = m1->out[0];
    double c;
    const int wh = b >= 0 ? pp_attn_where(g, b, cur, t) : -1; /* a Where before the scale (GPT-J's) */
    if (wh >= 0) cur = g->nodes[wh].out[0], b = attn_next(g, user, wh, t);
    if (b >= 0 && (g->nodes[b].op == PP_OP_MUL || g->nodes[b].op == PP_OP_DIV)) {
        const pp_node *sc = &g->nodes[b];
        const int prev = cur;
        const bool ok = sc->n_in == 2 && ((sc->in[0] == prev && const_scalar_half(g, sc->in[1], &c)) ||
                                          (sc->op == PP_OP_MUL && sc->in[1] == prev && const_scalar_half(g, sc->in[0], &c)) ||
                                          (sc->op == PP_OP_MUL && (sc->in[0] == prev || sc->in[1] == prev) &&
                                           const_per_head(g, sc->in[sc->in[0] == prev], prev, t)));
        if (ok) cur = sc->out[0];
        b = ok ? attn_next(g, user, b, t) : -1;
    }
    if (wh < 0 && b >= 0 && pp_attn_where(g, b, cur, t) >= 0) /* a Where after it (GPT-2's, DistilBERT's) */
        cur = g->nodes[b].out[0], b = attn_next(g, user, b, t);
    if (b >= 0 && g->nodes[b].op == PP_OP_ADD) { /* an additive mask: BERT's padding, Llama's causal + padding */
        const bool ok = pp_attn_mask(g, b, cur, t) >= 0;
        if (ok) cur = g->nodes[b].out[0];
        b = ok ? attn_next(g, user, b, t) : -1;
    }
    if (b >= 0 && g->nodes[b].op == PP_OP_RESHAPE) { /* BART's mask in a per-head view; Swin's in windows */
        const int r2 = attn_frame(g, user, b, cur, t);
        b = r2 >= 0 ? attn_next(g, user, r2, t) : -1;
    }
    if (b < 0 || g->nodes[b].op != PP_OP_SOFTMAX) return -1;
    const pp_node *sm = &g->nodes[b];
    int64_t outer, len, inner;
    if (pp_softmax_split(pp_node_attrs(g, sm), &g->values[sm->in[0]].shape, &outer, &len, &inner, NULL) != PP_OK ||
        inner != 1)
        return -1;
    const int m2 = attn_next(g, user, b, t);
    if (m2 < 0 || g->nodes[m2].op != PP_OP_MATMUL || g->nodes[m2].n_in != 2 || g->nodes[m2].in[0] != sm->out[0])
        return -1;
    const int v = g->nodes[m2].in[1];
    if (v < 0 || g->values[v].dtype != t || g->values[v].shape.rank < 2 || g->nodes[m2].n_out != 1 ||
        g->nodes[m2].out[0] < 0 || g->values[g->nodes[m2].out[0]].dtype != t)
        return -1;
    return m2;
}

/* The Mul or Div of MatMul a's left operand (Q) by a constant scalar, read
 * by a alone (torch's q / sqrt(d)), which the CUDA kernel applies as it
 * reads Q; -1: none. */
static int attn_prescale(const pp_graph *g, const int *user, int a) {
    const int q = g->nodes[a].in[0], p = q >= 0 && user[q] == a ? g->values[q].producer : -1;
    if (p < 0 || p >= a) return -1;
    const pp_node *s = &g->nodes[p];
    double c;
    if (s->dead || (s->op != PP_OP_MUL && s->op != PP_OP_DIV) || s->n_in != 2 || s->n_out != 1) return -1;
    const int x = const_scalar_half(g, s->in[1], &c) ? s->in[0]
                  : s->op == PP_OP_MUL && const_scalar_half(g, s->in[0], &c) ? s->in[1] : -1;
    return x >= 0 && !g->values[x].is_const && g->values[x].dtype == g->values[q].dtype ? p : -1;
}

pp_status pp_attention_chains(const pp_graph *g, bool *keep, int *tail, pp_err *err) {
    int *user = malloc((pp_count(g->n_values) + 1) * sizeof *user);
    if (!user) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) user[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v >= 0) user[v] = user[v] == -1 || user[v] == i ? i : -2;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) user[g->outputs[k]] = -2; /* a graph output ends a pattern */
    for (int i = 0; i < g->n_nodes; i++) keep[i] = false;
    for (int i = 0; i < g->n_nodes; i++) {
        tail[i] = g->nodes[i].dead ? -1 : attn_tail(g, user, i);
        const int p = tail[i] >= 0 ? attn_prescale(g, user, i) : -1; /* Q's scale with it */
        for (int j = (p >= 0 ? p : i) + 1; j <= tail[i]; j++) keep[j] = true;
    }
    free(user);
    return PP_OK;
}

/* ---- the pass ----------------------------------------------------------------------------------- */

/* The fusions that are the ops' own semantics (LayerNorm, RMSNorm, GELU in
 * its erf and tanh forms, SiLU) at node i, which both pp_fuse_train and pp_fuse run; *took: node i
 * is the kind one of them starts from. */
static pp_status fuse_own_ops(pp_graph *g, int i, bool *took, bool *changed, pp_err *err) {
    *took = true;
    if (is(g, i, PP_OP_REDUCEMEAN)) return fuse_layernorm(g, i, changed, err);
    if (is(g, i, PP_OP_POW)) return fuse_rmsnorm(g, i, changed, err);
    if (is(g, i, PP_OP_ERF)) return fuse_gelu(g, i, changed, err);
    if (is(g, i, PP_OP_TANH)) return fuse_gelu_tanh(g, i, changed, err);
    if (is(g, i, PP_OP_SIGMOID)) return fuse_self_gate(g, i, PP_OP_SILU, changed, err);
    *took = false;
    return PP_OK;
}

pp_status pp_fuse_train(pp_graph *g, pp_err *err) {
    bool changed = false, took;
    PP_TRY(pp_graph_index_uses(g, err));
    for (int i = 0; i < g->n_nodes; i++) PP_TRY(fuse_own_ops(g, i, &took, &changed, err));
    pp_graph_compact(g);
    return changed ? pp_graph_infer(g, err) : PP_OK;
}

pp_status pp_fuse(pp_graph *g, pp_err *err) {
    bool changed = false;
    PP_TRY(pp_graph_index_uses(g, err)); /* consumers without scanning the graph; compact drops it */
    for (int i = 0; i < g->n_nodes; i++)
        if (is(g, i, PP_OP_BATCHNORM)) PP_TRY(fuse_bn(g, i, &changed, err));
    for (int i = 0; i < g->n_nodes; i++)
        if (is(g, i, PP_OP_MUL)) PP_TRY(fuse_conv_scale(g, i, &changed, err));
    for (int i = 0; i < g->n_nodes; i++) {
        bool took;
        PP_TRY(fuse_own_ops(g, i, &took, &changed, err));
        if (took) continue;
        if (is(g, i, PP_OP_HARDSIGMOID)) PP_TRY(fuse_hardswish(g, i, &changed, err));
        else if (is(g, i, PP_OP_MATMUL)) PP_TRY(fuse_matmul_add(g, i, &changed, err));
        else if (is(g, i, PP_OP_INSTANCENORM)) PP_TRY(fuse_groupnorm(g, i, &changed, err));
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (is(g, i, PP_OP_PAD)) PP_TRY(fuse_pad(g, i, &changed, err));
        else if (is(g, i, PP_OP_REDUCEMEAN)) PP_TRY(fuse_spatial_mean(g, i, &changed));
    for (int i = 0; i < g->n_nodes; i++)
        if (is(g, i, PP_OP_CONV)) PP_TRY(fuse_conv(g, i, &changed, err));
    pp_graph_compact(g);
    /* shapes and costs of the new nodes */
    return changed ? pp_graph_infer(g, err) : PP_OK;
}
