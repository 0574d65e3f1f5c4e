/* onnx_export.c: every stage of a staged graph as its own ONNX model
 * (ppcc --export-stages DIR), so that any ONNX runtime can run the split.
 *
 * DIR receives stage_K.onnx for each stage K, stage_K.onnx.data beside it
 * when the stage has weights of PP_EXPORT_EXTERNAL_MIN bytes or more (ONNX
 * external data, 64-byte aligned), and stages.json, which says how the stages
 * connect. Stage K's graph inputs are the tensors the plan hands it (the
 * model's inputs for stage 0), its graph outputs the tensors it hands on (the
 * model's outputs for the last stage), under the plan's names and in the
 * plan's order, so stage K+1's inputs are exactly stage K's outputs. A tensor
 * that only passes through a stage (a skip connection) is both an input and
 * an output of it.
 *
 * Each model keeps the source model's IR version and ai.onnx opset. Ops the
 * fusion pass made are written back as standard ops of that opset:
 * pp.FusedConv as Conv [+ Add] [+ Relu or Clip], pp.SiLU as Sigmoid + Mul,
 * pp.GroupNorm as Reshape, InstanceNormalization, Reshape, Mul and Add,
 * Gemm (from MatMul + Add) as Gemm, which every opset has, and
 * LayerNormalization (opset 17), Gelu (opset 20; its tanh form too),
 * RMSNormalization (opset 23) and HardSwish (opset 14)
 * as themselves where the opset has them, else as the decomposition the
 * fusion matched. Folded
 * constants and BatchNormalization folded into a Conv's weights are plain
 * initializers.
 *
 * Output is whole or absent: everything goes into a fresh directory beside
 * DIR, which is renamed to DIR at the end. DIR may be absent, an empty
 * directory, or a directory holding only an earlier export (stages.json and
 * stage_* files), which is replaced; anything else is refused. No file name
 * comes from the model: tensor names only appear inside the files. */
#define _GNU_SOURCE /* mkdtemp */
#include "backend.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/kernels.h"
#include "onnx/onnx.pb-c.h"
#include "../ir/json.h"

typedef struct {
    pp_arena a;
    const pp_graph *g;
    pp_err *err;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int *init_stage; /* value -> last stage whose initializers hold it */
    int stage;
    int gen;         /* counter for generated names */
    FILE *data;      /* stage_K.onnx.data, opened on the first large weight */
    char data_path[4200], data_name[64];
    size_t data_off;
    char *dec_out; /* emit_f32: the decomposition's output and type instead of the node's (NULL: the node's) */
    pp_dtype dec_dt;
} ex;

#define A(n) pp_arena_alloc(&x->a, (n))

static pp_status oom(ex *x) { return PP_FAIL(x->err, PP_ENOMEM, "out of memory"); }

static bool grow(ex *x, void ***arr, size_t *n, size_t *cap) {
    if (*n < *cap) return true;
    size_t nc = *cap ? 2 * *cap : 64;
    void **p = realloc(*arr, nc * sizeof *p);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    (void)x;
    return true;
}

/* A name no value of the graph has and no earlier generated name had. */
static char *fresh_name(ex *x, const char *base, const char *what) {
    char buf[1024];
    for (;;) {
        snprintf(buf, sizeof buf, "%s/pp_%s_%d", base, what, x->gen++);
        if (pp_graph_find(x->g, buf) < 0) return pp_arena_strdup(&x->a, buf);
    }
}

/* ---- tensors ------------------------------------------------------------------------------ */

static Onnx__TensorProto *tensor_inline(ex *x, const char *name, pp_dtype dt, const pp_shape *sh,
                                        const void *data, size_t nbytes) {
    Onnx__TensorProto *t = A(sizeof *t);
    int64_t *d = A(sizeof(int64_t) * pp_count(sh->rank));
    if (!t || !d) return NULL;
    onnx__tensor_proto__init(t);
    memcpy(d, sh->dim, sizeof(int64_t) * (size_t)sh->rank);
    t->n_dims = (size_t)sh->rank;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = (int32_t)dt;
    t->name = (char *)name;
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = (uint8_t *)(nbytes ? data : (const void *)"");
    return t;
}

static Onnx__StringStringEntryProto *kv(ex *x, const char *k, const char *v) {
    Onnx__StringStringEntryProto *e = A(sizeof *e);
    if (!e) return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = pp_arena_strdup(&x->a, k);
    e->value = pp_arena_strdup(&x->a, v);
    return e->key && e->value ? e : NULL;
}

/* Constant value v as an initializer of the current stage (once per stage). */
static pp_status add_const(ex *x, int v) {
    if (x->init_stage[v] == x->stage) return PP_OK;
    x->init_stage[v] = x->stage;
    const pp_value *val = &x->g->values[v];
    if (val->dtype == PP_STRING || !pp_dtype_bits(val->dtype))
        return PP_FAIL(x->err, PP_EUNSUP, "constant '%s' is of type %s, which --export-stages cannot write",
                       val->name, pp_dtype_name(val->dtype));
    Onnx__TensorProto *t = tensor_inline(x, val->name, val->dtype, &val->shape, val->data, val->nbytes);
    if (!t) return oom(x);
    if (val->nbytes >= PP_EXPORT_EXTERNAL_MIN) {
        if (!x->data) {
            x->data = fopen(x->data_path, "wb");
            if (!x->data)
                return PP_FAIL(x->err, PP_EIO, "cannot create '%s': %s", x->data_path, strerror(errno));
            x->data_off = 0;
        }
        size_t off = pp_align_up(x->data_off, 64);
        static const char zeros[64];
        if (off > x->data_off && fwrite(zeros, 1, off - x->data_off, x->data) != off - x->data_off)
            return PP_FAIL(x->err, PP_EIO, "cannot write '%s': %s", x->data_path, strerror(errno));
        if (fwrite(val->data, 1, val->nbytes, x->data) != val->nbytes)
            return PP_FAIL(x->err, PP_EIO, "cannot write '%s': %s", x->data_path, strerror(errno));
        x->data_off = off + val->nbytes;
        char o[32], l[32];
        snprintf(o, sizeof o, "%zu", off);
        snprintf(l, sizeof l, "%zu", val->nbytes);
        t->has_raw_data = 0;
        t->raw_data = (ProtobufCBinaryData){0, NULL};
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        t->external_data = A(3 * sizeof *t->external_data);
        if (!t->external_data) return oom(x);
        t->external_data[0] = kv(x, "location", x->data_name);
        t->external_data[1] = kv(x, "offset", o);
        t->external_data[2] = kv(x, "length", l);
        if (!t->external_data[0] || !t->external_data[1] || !t->external_data[2]) return oom(x);
        t->n_external_data = 3;
    }
    if (!grow(x, (void ***)&x->inits, &x->n_inits, &x->cap_inits)) return oom(x);
    x->inits[x->n_inits++] = t;
    return PP_OK;
}

/* A generated constant of type dt and shape sh from `data` (copied), as an
 * initializer; its name into *name. */
static pp_status add_array(ex *x, const char *base, const char *what, pp_dtype dt, const pp_shape *sh,
                           const void *data, char **name) {
    int64_t n = 1;
    for (int d = 0; d < sh->rank; d++) n *= sh->dim[d];
    const size_t nb = (size_t)n * pp_dtype_size(dt);
    void *d = A(nb ? nb : 1);
    if (!d) return oom(x);
    if (nb) memcpy(d, data, nb);
    *name = fresh_name(x, base, what);
    Onnx__TensorProto *t = *name ? tensor_inline(x, *name, dt, sh, d, nb) : NULL;
    if (!t || !grow(x, (void ***)&x->inits, &x->n_inits, &x->cap_inits)) return oom(x);
    x->inits[x->n_inits++] = t;
    return PP_OK;
}

/* A generated scalar constant (Clip bounds, the decompositions' numbers) of
 * float type dt, as an initializer; its name into *name. */
static pp_status add_scalar(ex *x, const char *base, const char *what, pp_dtype dt, double v, int rank,
                            char **name) {
    const float f = (float)v;
    const pp_shape sh = {rank, {1}};
    if (dt == PP_F16 || dt == PP_BF16) { /* a half plan's (ppcc --precision): rounded as pprt's Cast rounds */
        uint16_t h;
        const pp_shape one = {1, {1}};
        pp_attr to = {.name = "to", .type = PP_ATTR_INT, .i = (int64_t)dt};
        pprt_tensor tin = {PP_F32, one, (void *)&f}, tout = {dt, one, &h};
        pprt_scratch scratch = {0};
        pp_err e = {0};
        const pp_status s = pprt_ref_kernels[PP_OP_CAST]((pp_attrs){&to, 1, 17}, &tin, 1, &tout, 1, &scratch, &e);
        pprt_scratch_free(&scratch);
        if (s != PP_OK) return PP_FAIL(x->err, s, "'%s': the %s constant: %s", base, what, e.msg);
        return add_array(x, base, what, dt, &sh, &h, name);
    }
    if (dt != PP_F32 && dt != PP_F64)
        return PP_FAIL(x->err, PP_EUNSUP, "'%s': a %s constant of type %s cannot be written", base, what,
                       pp_dtype_name(dt));
    return add_array(x, base, what, dt, &sh, dt == PP_F32 ? (const void *)&f : (const void *)&v, name);
}

/* ---- nodes -------------------------------------------------------------------------------- */

/* The attribute as ONNX's; arrays and strings are not copied: they must live
 * until the model is packed (the graph's, or the exporter's arena). */
static Onnx__AttributeProto *attr_of(ex *x, const pp_attr *a) {
    Onnx__AttributeProto *p = A(sizeof *p);
    if (!p) return NULL;
    onnx__attribute_proto__init(p);
    p->name = (char *)a->name;
    p->has_type = 1;
    switch (a->type) {
    case PP_ATTR_INT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, p->has_i = 1, p->i = a->i;
        break;
    case PP_ATTR_FLOAT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, p->has_f = 1, p->f = a->f;
        break;
    case PP_ATTR_STRING:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, p->has_s = 1;
        p->s = (ProtobufCBinaryData){strlen(a->s), (uint8_t *)a->s};
        break;
    case PP_ATTR_INTS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        p->n_ints = (size_t)a->n, p->ints = (int64_t *)a->ints;
        break;
    case PP_ATTR_FLOATS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        p->n_floats = (size_t)a->n, p->floats = (float *)a->floats;
        break;
    case PP_ATTR_STRINGS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        p->n_strings = (size_t)a->n;
        p->strings = A(sizeof *p->strings * pp_count(a->n));
        if (!p->strings) return NULL;
        for (int k = 0; k < a->n; k++)
            p->strings[k] = (ProtobufCBinaryData){strlen(a->strs[k]), (uint8_t *)a->strs[k]};
        break;
    case PP_ATTR_TENSOR:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        p->t = tensor_inline(x, "", a->t_dtype, &a->t_shape, a->t_data, a->t_nbytes);
        if (!p->t) return NULL;
        break;
    case PP_ATTR_GRAPH: /* a Loop or If body: none is left once the infer pass unrolled them */
        return NULL;
    }
    return p;
}

static pp_attr attr_int(const char *name, int64_t v) { return (pp_attr){.name = name, .type = PP_ATTR_INT, .i = v}; }
static pp_attr attr_float(const char *name, float v) { return (pp_attr){.name = name, .type = PP_ATTR_FLOAT, .f = v}; }

/* Append a node: op, name, inputs and outputs (NULL entries: absent optional
 * inputs, written as ""), attributes (skipping the names in `drop`). */
static pp_status emit(ex *x, const char *op, const char *name, char *const *in, int n_in, char *const *out,
                      int n_out, const pp_attr *attrs, int n_attrs, const char *const *drop) {
    Onnx__NodeProto *n = A(sizeof *n);
    char **i = A(sizeof(char *) * pp_count(n_in)), **o = A(sizeof(char *) * pp_count(n_out));
    Onnx__AttributeProto **ap = A(sizeof *ap * pp_count(n_attrs));
    if (!n || !i || !o || !ap) return oom(x);
    onnx__node_proto__init(n);
    for (int k = 0; k < n_in; k++) i[k] = in[k] ? in[k] : "";
    for (int k = 0; k < n_out; k++) o[k] = out[k];
    n->n_input = (size_t)n_in, n->input = i;
    n->n_output = (size_t)n_out, n->output = o;
    n->op_type = (char *)op;
    n->name = (char *)name;
    int na = 0;
    for (int k = 0; k < n_attrs; k++) {
        bool skip = false;
        for (int d = 0; drop && drop[d]; d++) skip |= !strcmp(drop[d], attrs[k].name);
        if (skip) continue;
        if (!(ap[na++] = attr_of(x, &attrs[k]))) return oom(x);
    }
    n->n_attribute = (size_t)na, n->attribute = ap;
    if (!grow(x, (void ***)&x->nodes, &x->n_nodes, &x->cap_nodes)) return oom(x);
    x->nodes[x->n_nodes++] = n;
    return PP_OK;
}

static char *vname(ex *x, int v) { return v < 0 ? NULL : (char *)x->g->values[v].name; }

/* A decomposition's output and element type: node n's, or emit_f32's f32 stand-ins */
static char *dec_out(ex *x, const pp_node *n) { return x->dec_out ? x->dec_out : vname(x, n->out[0]); }
static pp_dtype dec_dt(ex *x, const pp_node *n) { return x->dec_out ? x->dec_dt : x->g->values[n->in[0]].dtype; }

/* Node i's inputs (constants added as initializers) into in[]. */
static pp_status node_inputs(ex *x, const pp_node *n, char **in) {
    for (int k = 0; k < n->n_in; k++) {
        in[k] = vname(x, n->in[k]);
        if (n->in[k] >= 0 && x->g->values[n->in[k]].is_const) PP_TRY(add_const(x, n->in[k]));
    }
    return PP_OK;
}

/* pp.FusedConv(X, W, B [, Z]) -> Conv [-> Add Z] [-> Relu | Clip] */
static pp_status emit_fusedconv(ex *x, const pp_node *n, char **in) {
    const char *act = "";
    float lo = -INFINITY, hi = INFINITY;
    pp_attrs as = pp_node_attrs(x->g, n);
    PP_TRY(pp_attr_string(as, "activation", "", &act, x->err));
    PP_TRY(pp_attr_float(as, "clip_min", -INFINITY, &lo, x->err));
    PP_TRY(pp_attr_float(as, "clip_max", INFINITY, &hi, x->err));
    bool add = n->n_in > 3 && n->in[3] >= 0;
    char *out = vname(x, n->out[0]);
    char *y = (add || *act) ? fresh_name(x, out, "conv") : out;
    static const char *const drop[] = {"activation", "clip_min", "clip_max", NULL};
    if (!y) return oom(x);
    PP_TRY(emit(x, "Conv", n->name, in, n->n_in > 3 ? 3 : n->n_in, &y, 1, n->attrs, n->n_attrs, drop));
    if (add) {
        char *s = *act ? fresh_name(x, out, "add") : out;
        char *ai[2] = {y, in[3]};
        char *nm = fresh_name(x, n->name, "Add");
        if (!s || !nm) return oom(x);
        PP_TRY(emit(x, "Add", nm, ai, 2, &s, 1, NULL, 0, NULL));
        y = s;
    }
    if (!*act) return PP_OK;
    char *nm = fresh_name(x, n->name, act);
    if (!nm) return oom(x);
    if (!strcmp(act, "Relu")) return emit(x, "Relu", nm, &y, 1, &out, 1, NULL, 0, NULL);
    if (x->g->opset < 11) { /* Clip-6: bounds as attributes */
        pp_attr at[2];
        int na = 0;
        if (isfinite(lo)) at[na++] = attr_float("min", lo);
        if (isfinite(hi)) at[na++] = attr_float("max", hi);
        return emit(x, "Clip", nm, &y, 1, &out, 1, at, na, NULL);
    }
    pp_dtype dt = x->g->values[n->out[0]].dtype;
    char *ci[3] = {y, NULL, NULL};
    if (isfinite(lo)) PP_TRY(add_scalar(x, out, "min", dt, lo, 0, &ci[1]));
    if (isfinite(hi)) PP_TRY(add_scalar(x, out, "max", dt, hi, 0, &ci[2]));
    return emit(x, "Clip", nm, ci, 3, &out, 1, NULL, 0, NULL);
}

/* pp.SiLU(X) -> X * Sigmoid(X) */
static pp_status emit_silu(ex *x, const pp_node *n, char **in) {
    char *out = vname(x, n->out[0]);
    char *s = fresh_name(x, out, "sigmoid"), *nm = fresh_name(x, n->name, "Mul");
    if (!s || !nm) return oom(x);
    PP_TRY(emit(x, "Sigmoid", n->name, in, 1, &s, 1, NULL, 0, NULL));
    char *mi[2] = {in[0], s};
    return emit(x, "Mul", nm, mi, 2, &out, 1, NULL, 0, NULL);
}

/* HardSwish(X) -> X * HardSigmoid(X; alpha 1/6, beta 0.5), for opsets before 14 */
static pp_status emit_hardswish_ops(ex *x, const pp_node *n, char **in) {
    char *out = vname(x, n->out[0]);
    char *s = fresh_name(x, out, "hardsigmoid"), *nm = fresh_name(x, n->name, "Mul");
    if (!s || !nm) return oom(x);
    const pp_attr at[2] = {attr_float("alpha", (float)(1.0 / 6.0)), attr_float("beta", 0.5f)};
    PP_TRY(emit(x, "HardSigmoid", n->name, in, 1, &s, 1, at, 2, NULL));
    char *mi[2] = {in[0], s};
    return emit(x, "Mul", nm, mi, 2, &out, 1, NULL, 0, NULL);
}

/* One step of a decomposition: op over in[0..n_in) into a fresh value (or
 * `out` when given); its name in *res. */
static pp_status step(ex *x, const pp_node *n, const char *op, char *const *in, int n_in, char *out,
                      const pp_attr *at, int n_at, char **res) {
    char *y = out ? out : fresh_name(x, vname(x, n->out[0]), op);
    char *nm = fresh_name(x, n->name, op);
    if (!y || !nm) return oom(x);
    PP_TRY(emit(x, op, nm, in, n_in, &y, 1, at, n_at, NULL));
    *res = y;
    return PP_OK;
}

/* LayerNormalization(X, gamma[, beta]) over the last axis, as the ops the
 * fusion pass matched (for opsets before 17, which have no LayerNormalization). */
static pp_status emit_layernorm_ops(ex *x, const pp_node *n, char **in) {
    float eps;
    int64_t axis;
    pp_attrs as = pp_node_attrs(x->g, n);
    PP_TRY(pp_attr_float(as, "epsilon", 1e-5f, &eps, x->err));
    PP_TRY(pp_attr_int(as, "axis", -1, &axis, x->err));
    int rank = x->g->values[n->in[0]].shape.rank;
    if (axis != -1 && axis != rank - 1)
        return PP_FAIL(x->err, PP_EUNSUP, "node '%s': LayerNormalization over axis %lld cannot be written for "
                       "opset %d", n->name, (long long)axis, x->g->opset);
    const bool shift = n->n_in > 2 && n->in[2] >= 0; /* none: the pattern ended at Mul */
    pp_dtype dt = dec_dt(x, n);
    int64_t *last = A(sizeof *last); /* the written attribute points at it until the model is packed */
    if (!last) return oom(x);
    *last = -1;
    pp_attr red[2] = {{.name = "axes", .type = PP_ATTR_INTS, .ints = last, .n = 1}, attr_int("keepdims", 1)};
    char *two, *e, *mu, *d, *p, *var, *ve, *sd, *nrm, *m;
    PP_TRY(add_scalar(x, vname(x, n->out[0]), "two", dt, 2.0, 0, &two));
    PP_TRY(add_scalar(x, vname(x, n->out[0]), "eps", dt, eps, 0, &e));
    PP_TRY(step(x, n, "ReduceMean", in, 1, NULL, red, 2, &mu));
    char *a1[2] = {in[0], mu};
    PP_TRY(step(x, n, "Sub", a1, 2, NULL, NULL, 0, &d));
    char *a2[2] = {d, two};
    PP_TRY(step(x, n, "Pow", a2, 2, NULL, NULL, 0, &p));
    PP_TRY(step(x, n, "ReduceMean", &p, 1, NULL, red, 2, &var));
    char *a3[2] = {var, e};
    PP_TRY(step(x, n, "Add", a3, 2, NULL, NULL, 0, &ve));
    PP_TRY(step(x, n, "Sqrt", &ve, 1, NULL, NULL, 0, &sd));
    char *a4[2] = {d, sd};
    PP_TRY(step(x, n, "Div", a4, 2, NULL, NULL, 0, &nrm));
    char *a5[2] = {nrm, in[1]};
    PP_TRY(step(x, n, "Mul", a5, 2, shift ? NULL : dec_out(x, n), NULL, 0, &m));
    if (!shift) return PP_OK;
    char *a6[2] = {m, in[2]};
    return step(x, n, "Add", a6, 2, dec_out(x, n), NULL, 0, &m);
}

/* pp.GroupNorm(X, scale, bias) -> the nodes the fusion pass matched:
 * Reshape to [N, G, -1], InstanceNormalization (scale 1, bias 0), Reshape
 * back, Mul by scale and Add of bias as [C, 1, ...]. Valid in every opset. */
static pp_status emit_groupnorm_ops(ex *x, const pp_node *n) {
    char *in[1] = {vname(x, n->in[0])}; /* scale and bias are written reshaped, not as they are */
    if (x->g->values[n->in[0]].is_const) PP_TRY(add_const(x, n->in[0]));
    pp_attrs as = pp_node_attrs(x->g, n);
    int64_t G;
    float eps;
    PP_TRY(pp_attr_int(as, "num_groups", 1, &G, x->err));
    PP_TRY(pp_attr_float(as, "epsilon", 1e-5f, &eps, x->err));
    const pp_value *xv = &x->g->values[n->in[0]];
    const pp_shape *xs = &xv->shape;
    const pp_dtype dt = xv->dtype;
    char *base = vname(x, n->out[0]);
    /* the shapes: [0, G, -1] and X's with 0 (copy) for the batch */
    const int64_t grouped[3] = {0, G, -1};
    int64_t back[PP_MAX_DIMS];
    back[0] = 0;
    for (int d = 1; d < xs->rank; d++) back[d] = xs->dim[d];
    const pp_shape s3 = {1, {3}}, sr = {1, {xs->rank}}, sg = {1, {G}};
    pp_shape sc = {xs->rank - 1, {0}};
    sc.dim[0] = xs->dim[1];
    for (int d = 1; d < sc.rank; d++) sc.dim[d] = 1;
    float *ones = A(sizeof(float) * (size_t)G), *zeros = A(sizeof(float) * (size_t)G);
    if (!ones || !zeros) return oom(x);
    for (int64_t k = 0; k < G; k++) ones[k] = 1.0f, zeros[k] = 0.0f;
    char *shp1, *shp2, *one, *zero, *scale, *bias, *r1, *nrm, *r2, *m;
    if (dt != PP_F32)
        return PP_FAIL(x->err, PP_EUNSUP, "node '%s': pp.GroupNorm of type %s cannot be written", n->name,
                       pp_dtype_name(dt));
    PP_TRY(add_array(x, base, "groups_shape", PP_I64, &s3, grouped, &shp1));
    PP_TRY(add_array(x, base, "shape", PP_I64, &sr, back, &shp2));
    PP_TRY(add_array(x, base, "ones", dt, &sg, ones, &one));
    PP_TRY(add_array(x, base, "zeros", dt, &sg, zeros, &zero));
    PP_TRY(add_array(x, base, "scale", dt, &sc, x->g->values[n->in[1]].data, &scale));
    PP_TRY(add_array(x, base, "bias", dt, &sc, x->g->values[n->in[2]].data, &bias));
    char *a1[2] = {in[0], shp1};
    PP_TRY(step(x, n, "Reshape", a1, 2, NULL, NULL, 0, &r1));
    char *a2[3] = {r1, one, zero};
    const pp_attr ea = attr_float("epsilon", eps);
    PP_TRY(step(x, n, "InstanceNormalization", a2, 3, NULL, &ea, 1, &nrm));
    char *a3[2] = {nrm, shp2};
    PP_TRY(step(x, n, "Reshape", a3, 2, NULL, NULL, 0, &r2));
    char *a4[2] = {r2, scale};
    PP_TRY(step(x, n, "Mul", a4, 2, NULL, NULL, 0, &m));
    char *a5[2] = {m, bias};
    return step(x, n, "Add", a5, 2, vname(x, n->out[0]), NULL, 0, &m);
}

/* Gelu(X; approximate "tanh") = X * 0.5 * (1 + Tanh(sqrt(2 / pi) * (X + 0.044715 X^3))), as the ops the
 * fusion pass matched (GPT-2's gelu_new), for opsets before 20. */
static pp_status emit_gelu_tanh_ops(ex *x, const pp_node *n, char **in) {
    const pp_dtype dt = dec_dt(x, n);
    char *base = vname(x, n->out[0]), *three, *c, *k, *one, *half, *p, *m, *sum, *d, *t, *a, *h;
    PP_TRY(add_scalar(x, base, "three", dt, 3.0, 0, &three));
    PP_TRY(add_scalar(x, base, "cubic", dt, 0.044715, 0, &c));
    PP_TRY(add_scalar(x, base, "sqrt_2_over_pi", dt, 0.7978845608028654, 0, &k));
    PP_TRY(add_scalar(x, base, "one", dt, 1.0, 0, &one));
    PP_TRY(add_scalar(x, base, "half", dt, 0.5, 0, &half));
    char *a1[2] = {in[0], three};
    PP_TRY(step(x, n, "Pow", a1, 2, NULL, NULL, 0, &p));
    char *a2[2] = {p, c};
    PP_TRY(step(x, n, "Mul", a2, 2, NULL, NULL, 0, &m));
    char *a3[2] = {in[0], m};
    PP_TRY(step(x, n, "Add", a3, 2, NULL, NULL, 0, &sum));
    char *a4[2] = {sum, k};
    PP_TRY(step(x, n, "Mul", a4, 2, NULL, NULL, 0, &d));
    PP_TRY(step(x, n, "Tanh", &d, 1, NULL, NULL, 0, &t));
    char *a5[2] = {t, one};
    PP_TRY(step(x, n, "Add", a5, 2, NULL, NULL, 0, &a));
    char *a6[2] = {in[0], half};
    PP_TRY(step(x, n, "Mul", a6, 2, NULL, NULL, 0, &h));
    char *a7[2] = {h, a};
    return step(x, n, "Mul", a7, 2, dec_out(x, n), NULL, 0, &h);
}

/* RMSNormalization(X, scale) over the last axis, as the ops the fusion pass matched (Hugging Face's
 * LlamaRMSNorm), for opsets before 23: Pow 2, ReduceMean (its axes an input from opset 18), Add eps, Sqrt,
 * Reciprocal, Mul by X, Mul by the scale. */
static pp_status emit_rmsnorm_ops(ex *x, const pp_node *n, char **in) {
    float eps;
    int64_t axis;
    pp_attrs as = pp_node_attrs(x->g, n);
    PP_TRY(pp_attr_float(as, "epsilon", 1e-5f, &eps, x->err));
    PP_TRY(pp_attr_int(as, "axis", -1, &axis, x->err));
    const int rank = x->g->values[n->in[0]].shape.rank;
    if (axis != -1 && axis != rank - 1)
        return PP_FAIL(x->err, PP_EUNSUP, "node '%s': RMSNormalization over axis %lld cannot be written for "
                       "opset %d", n->name, (long long)axis, x->g->opset);
    const pp_dtype dt = dec_dt(x, n);
    char *base = vname(x, n->out[0]), *two, *e, *axes = NULL, *p, *var, *ve, *sd, *inv, *nrm;
    int64_t *last = A(sizeof *last); /* (a written attribute points at it until the model is packed) */
    if (!last) return oom(x);
    *last = -1;
    const pp_attr red[2] = {{.name = "axes", .type = PP_ATTR_INTS, .ints = last, .n = 1}, attr_int("keepdims", 1)};
    const pp_shape one = {1, {1}};
    PP_TRY(add_scalar(x, base, "two", dt, 2.0, 0, &two));
    PP_TRY(add_scalar(x, base, "eps", dt, eps, 0, &e));
    if (x->g->opset >= 18) PP_TRY(add_array(x, base, "axes", PP_I64, &one, last, &axes));
    char *a1[2] = {in[0], two};
    PP_TRY(step(x, n, "Pow", a1, 2, NULL, NULL, 0, &p));
    char *a2[2] = {p, axes};
    PP_TRY(step(x, n, "ReduceMean", a2, axes ? 2 : 1, NULL, axes ? red + 1 : red, axes ? 1 : 2, &var));
    char *a3[2] = {var, e};
    PP_TRY(step(x, n, "Add", a3, 2, NULL, NULL, 0, &ve));
    PP_TRY(step(x, n, "Sqrt", &ve, 1, NULL, NULL, 0, &sd));
    PP_TRY(step(x, n, "Reciprocal", &sd, 1, NULL, NULL, 0, &inv));
    char *a4[2] = {in[0], inv};
    PP_TRY(step(x, n, "Mul", a4, 2, NULL, NULL, 0, &nrm));
    char *a5[2] = {nrm, in[1]};
    return step(x, n, "Mul", a5, 2, dec_out(x, n), NULL, 0, &nrm);
}

/* Gelu(X) = X * (Erf(X / sqrt 2) + 1) * 0.5, for opsets before 20. */
static pp_status emit_gelu_ops(ex *x, const pp_node *n, char **in) {
    const char *approx = "none";
    PP_TRY(pp_attr_string(pp_node_attrs(x->g, n), "approximate", "none", &approx, x->err));
    if (!strcmp(approx, "tanh")) return emit_gelu_tanh_ops(x, n, in);
    if (strcmp(approx, "none"))
        return PP_FAIL(x->err, PP_EUNSUP, "node '%s': Gelu with approximate='%s' cannot be written for opset %d",
                       n->name, approx, x->g->opset);
    pp_dtype dt = dec_dt(x, n);
    char *r2, *one, *half, *d, *e, *a, *m;
    PP_TRY(add_scalar(x, vname(x, n->out[0]), "sqrt2", dt, sqrt(2.0), 0, &r2));
    PP_TRY(add_scalar(x, vname(x, n->out[0]), "one", dt, 1.0, 0, &one));
    PP_TRY(add_scalar(x, vname(x, n->out[0]), "half", dt, 0.5, 0, &half));
    char *a1[2] = {in[0], r2};
    PP_TRY(step(x, n, "Div", a1, 2, NULL, NULL, 0, &d));
    PP_TRY(step(x, n, "Erf", &d, 1, NULL, NULL, 0, &e));
    char *a2[2] = {e, one};
    PP_TRY(step(x, n, "Add", a2, 2, NULL, NULL, 0, &a));
    char *a3[2] = {in[0], a};
    PP_TRY(step(x, n, "Mul", a3, 2, NULL, NULL, 0, &m));
    char *a4[2] = {m, half};
    return step(x, n, "Mul", a4, 2, dec_out(x, n), NULL, 0, &m);
}

/* A half plan's saturating Cast (ppcc's pp_finite: finite values past the half type's range to its largest
 * finite) as ONNX ops: Where(IsInf(X), X, Clip(X, -max, max)) then the Cast, so onnxruntime gives pprt's
 * values (a plain Cast turns a mask of -3.4e38 into -inf, and a fully masked row into NaN). */
static pp_status emit_finite_cast(ex *x, const pp_node *n, char **in, char **out) {
    const pp_dtype to = x->g->values[n->out[0]].dtype;
    const double big = to == PP_F16 ? 65504.0 : 3.3895313892515355e38;
    char *base = vname(x, n->out[0]), *lo, *hi, *c, *isinf, *w;
    if (x->g->opset < 11) {
        const pp_attr at[2] = {attr_float("min", (float)-big), attr_float("max", (float)big)};
        PP_TRY(step(x, n, "Clip", in, 1, NULL, at, 2, &c));
    } else {
        PP_TRY(add_scalar(x, base, "lo", PP_F32, -big, 0, &lo));
        PP_TRY(add_scalar(x, base, "hi", PP_F32, big, 0, &hi));
        char *a1[3] = {in[0], lo, hi};
        PP_TRY(step(x, n, "Clip", a1, 3, NULL, NULL, 0, &c));
    }
    PP_TRY(step(x, n, "IsInf", in, 1, NULL, NULL, 0, &isinf));
    char *a2[3] = {isinf, in[0], c};
    PP_TRY(step(x, n, "Where", a2, 3, NULL, NULL, 0, &w));
    static const char *const own[] = {"pp_finite", NULL};
    return emit(x, "Cast", n->name, &w, 1, out, 1, n->attrs, n->n_attrs, own);
}

/* Node n of a half plan (f16 / bf16) written as a decomposition fn in f32 between Casts: pprt computes these
 * fused ops in f32 inside and rounds the output once, where onnxruntime would run the decomposition in half
 * (x^2 of fp16 overflows past 256, x^3 past 40; it has no bf16 Pow). f32 nodes: fn as it is. */
static pp_status emit_f32(ex *x, const pp_node *n, char **in, pp_status (*fn)(ex *, const pp_node *, char **)) {
    const pp_dtype dt = x->g->values[n->in[0]].dtype;
    if (dt != PP_F16 && dt != PP_BF16) return fn(x, n, in);
    char **in32 = A(sizeof(char *) * pp_count(n->n_in)), *out = vname(x, n->out[0]), *y32 = fresh_name(x, out, "f32");
    if (!in32 || !y32) return oom(x);
    const pp_attr to32 = attr_int("to", PP_F32), to = attr_int("to", dt);
    for (int k = 0; k < n->n_in; k++) {
        in32[k] = in[k];
        if (in[k] && n->in[k] >= 0 && x->g->values[n->in[k]].dtype == dt)
            PP_TRY(step(x, n, "Cast", &in[k], 1, NULL, &to32, 1, &in32[k]));
    }
    x->dec_out = y32, x->dec_dt = PP_F32;
    const pp_status s = fn(x, n, in32);
    x->dec_out = NULL;
    PP_TRY(s);
    return step(x, n, "Cast", &y32, 1, out, &to, 1, &y32);
}

static pp_status emit_node(ex *x, const pp_node *n) {
    if (n->op == PP_OP_FUSEDGN) return emit_groupnorm_ops(x, n);
    char **in = A(sizeof(char *) * pp_count(n->n_in)), **out = A(sizeof(char *) * pp_count(n->n_out));
    if (!in || !out) return oom(x);
    PP_TRY(node_inputs(x, n, in));
    for (int k = 0; k < n->n_out; k++) out[k] = vname(x, n->out[k]);
    const char *op = pp_op_table[n->op].name;
    if (n->op == PP_OP_FUSEDCONV) return emit_fusedconv(x, n, in);
    if (n->op == PP_OP_SILU) return emit_silu(x, n, in);
    if (!strcmp(op, "LayerNormalization") && x->g->opset < 17) return emit_f32(x, n, in, emit_layernorm_ops);
    if (!strcmp(op, "Gelu") && x->g->opset < 20) return emit_f32(x, n, in, emit_gelu_ops);
    if (n->op == PP_OP_RMSNORM && x->g->opset < 23) return emit_f32(x, n, in, emit_rmsnorm_ops);
    int64_t finite = 0;
    (void)pp_attr_int(pp_node_attrs(x->g, n), "pp_finite", 0, &finite, NULL);
    if (n->op == PP_OP_CAST && finite && x->g->values[n->in[0]].dtype == PP_F32) return emit_finite_cast(x, n, in, out);
    if (n->op == PP_OP_HARDSWISH && x->g->opset < 14) return emit_hardswish_ops(x, n, in);
    if (!strncmp(op, "pp.", 3))
        return PP_FAIL(x->err, PP_EUNSUP, "node '%s': op %s has no ONNX form", n->name, op);
    static const char *const own[] = {"pp_finite", NULL}; /* ppcc's own attributes: no ONNX form */
    return emit(x, op, n->name, in, n->n_in, out, n->n_out, n->attrs, n->n_attrs, own);
}

/* ---- graphs and models ---------------------------------------------------------------------- */

static Onnx__ValueInfoProto *value_info(ex *x, int v) {
    const pp_value *val = &x->g->values[v];
    Onnx__ValueInfoProto *vi = A(sizeof *vi);
    Onnx__TypeProto *tp = A(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = A(sizeof *tt);
    Onnx__TensorShapeProto *sp = A(sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = A(sizeof *dims * pp_count(val->shape.rank));
    if (!vi || !tp || !tt || !sp || !dims) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int d = 0; d < val->shape.rank; d++) {
        if (!(dims[d] = A(sizeof **dims))) return NULL;
        onnx__tensor_shape_proto__dimension__init(dims[d]);
        dims[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[d]->dim_value = val->shape.dim[d];
    }
    sp->n_dim = (size_t)val->shape.rank, sp->dim = dims;
    tt->has_elem_type = 1, tt->elem_type = (int32_t)val->dtype, tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
    vi->name = (char *)val->name, vi->type = tp;
    return vi;
}

/* The values stage s receives and sends, as the plan has them. */
static void stage_io(const pp_graph *g, int s, const int **in, int *n_in, const int **out, int *n_out) {
    *in = s == 0 ? g->inputs : g->bounds[s - 1].vals;
    *n_in = s == 0 ? g->n_inputs : g->bounds[s - 1].n;
    *out = s == g->n_stages - 1 ? g->outputs : g->bounds[s].vals;
    *n_out = s == g->n_stages - 1 ? g->n_outputs : g->bounds[s].n;
}

static pp_status write_file(const char *path, const void *buf, size_t len, pp_err *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return PP_FAIL(err, PP_EIO, "cannot create '%s': %s", path, strerror(errno));
    bool ok = fwrite(buf, 1, len, f) == len;
    ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok) return PP_FAIL(err, PP_EIO, "cannot write '%s': %s", path, strerror(errno));
    return PP_OK;
}

static pp_status export_stage(ex *x, const char *tmpdir, const char *producer, int s, int *n_written) {
    const pp_graph *g = x->g;
    x->stage = s;
    x->n_nodes = x->n_inits = 0;
    snprintf(x->data_name, sizeof x->data_name, "stage_%d.onnx.data", s);
    if (snprintf(x->data_path, sizeof x->data_path, "%s/%s", tmpdir, x->data_name) >= (int)sizeof x->data_path)
        return PP_FAIL(x->err, PP_EINVAL, "--export-stages: the directory name is too long");
    x->data = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].stage == s) PP_TRY(emit_node(x, &g->nodes[i]));
    if (x->data) {
        bool ok = fflush(x->data) == 0 && fsync(fileno(x->data)) == 0;
        ok &= fclose(x->data) == 0;
        x->data = NULL;
        if (!ok) return PP_FAIL(x->err, PP_EIO, "cannot write '%s': %s", x->data_path, strerror(errno));
        (*n_written)++;
    }
    const int *in, *out;
    int n_in, n_out;
    stage_io(g, s, &in, &n_in, &out, &n_out);
    Onnx__ValueInfoProto **vin = A(sizeof *vin * pp_count(n_in)), **vout = A(sizeof *vout * pp_count(n_out));
    if (!vin || !vout) return oom(x);
    for (int k = 0; k < n_in; k++)
        if (!(vin[k] = value_info(x, in[k]))) return oom(x);
    for (int k = 0; k < n_out; k++)
        if (!(vout[k] = value_info(x, out[k]))) return oom(x);
    char gname[64], doc[256];
    snprintf(gname, sizeof gname, "stage_%d", s);
    snprintf(doc, sizeof doc, "stage %d of %d, exported by %s", s, g->n_stages, producer);
    Onnx__GraphProto gp;
    onnx__graph_proto__init(&gp);
    gp.name = gname;
    gp.n_node = x->n_nodes, gp.node = x->nodes;
    gp.n_initializer = x->n_inits, gp.initializer = x->inits;
    gp.n_input = (size_t)n_in, gp.input = vin;
    gp.n_output = (size_t)n_out, gp.output = vout;
    Onnx__OperatorSetIdProto os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = "", os.has_version = 1, os.version = g->opset;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1, m.ir_version = g->ir_version > 0 ? g->ir_version : 8;
    m.n_opset_import = 1, m.opset_import = &osp;
    m.producer_name = "ppcc";
    m.producer_version = (char *)producer;
    m.doc_string = doc;
    m.graph = &gp;
    size_t len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return oom(x);
    onnx__model_proto__pack(&m, buf);
    char path[4200];
    if (snprintf(path, sizeof path, "%s/stage_%d.onnx", tmpdir, s) >= (int)sizeof path) {
        free(buf);
        return PP_FAIL(x->err, PP_EINVAL, "--export-stages: the directory name is too long");
    }
    pp_status st = write_file(path, buf, len, x->err);
    free(buf);
    if (st == PP_OK) (*n_written)++;
    return st;
}

/* ---- stages.json ------------------------------------------------------------------------------ */

static void json_tensors(pp_json *j, cJSON *parent, const char *key, const pp_graph *g, const int *vals, int n) {
    cJSON *arr = pp_json_add_array(j, parent, key);
    for (int k = 0; k < n; k++) {
        const pp_value *val = &g->values[vals[k]];
        cJSON *t = pp_json_add_tensor(j, arr, val->name, val->dtype, &val->shape, val->nbytes);
        if (val->producer < 0) pp_json_add_string(j, t, "produced_by", "input");
        else pp_json_add_number(j, t, "produced_by", g->nodes[val->producer].stage);
    }
}

static pp_status write_json(const pp_graph *g, const char *tmpdir, const char *producer, pp_err *err) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/stages.json", tmpdir) >= (int)sizeof path)
        return PP_FAIL(err, PP_EINVAL, "--export-stages: the directory name is too long");
    pp_json j;
    /* version 2: dtypes by name ("f32"); version 1 wrote ONNX's enum numbers */
    cJSON *root = pp_json_begin_format(&j, "ppcc-stages", 2);
    pp_json_add_string(&j, root, "producer", producer);
    pp_json_add_number(&j, root, "ir_version", (double)g->ir_version);
    pp_json_add_number(&j, root, "opset", g->opset);
    pp_json_add_number(&j, root, "micro_batch", (double)g->batch);
    cJSON *ins = pp_json_add_array(&j, root, "model_inputs");
    for (int k = 0; k < g->n_inputs; k++) pp_json_add_string(&j, ins, NULL, g->values[g->inputs[k]].name);
    cJSON *outs = pp_json_add_array(&j, root, "model_outputs");
    for (int k = 0; k < g->n_outputs; k++) pp_json_add_string(&j, outs, NULL, g->values[g->outputs[k]].name);
    cJSON *stages = pp_json_add_array(&j, root, "stages");
    for (int s = 0; s < g->n_stages; s++) {
        const int *in, *out;
        int n_in, n_out, n_ops = 0;
        stage_io(g, s, &in, &n_in, &out, &n_out);
        for (int i = 0; i < g->n_nodes; i++) n_ops += g->nodes[i].stage == s;
        char model[32];
        snprintf(model, sizeof model, "stage_%d.onnx", s);
        cJSON *st = pp_json_add_object(&j, stages, NULL);
        pp_json_add_number(&j, st, "index", s);
        pp_json_add_string(&j, st, "model", model);
        pp_json_add_number(&j, st, "ops", n_ops);
        json_tensors(&j, st, "inputs", g, in, n_in);
        json_tensors(&j, st, "outputs", g, out, n_out);
    }
    return pp_json_write(&j, path, true, err);
}

/* ---- the directory ---------------------------------------------------------------------------- */

/* A file name an export writes: stages.json, stage_N.onnx, stage_N.onnx.data. */
static bool ours(const char *name) {
    if (!strcmp(name, "stages.json")) return true;
    if (strncmp(name, "stage_", 6)) return false;
    const char *p = name + 6;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".onnx") || !strcmp(p, ".onnx.data");
}

/* Remove the files of an export in dir (only ours), then dir itself. */
static void remove_export(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4200];
        while ((e = readdir(d)))
            if (ours(e->d_name)) {
                if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* What is at `dir` now: 0 nothing, 1 an empty directory or an earlier
 * export (replaceable), or fails naming what is in the way. */
static pp_status check_target(const char *dir, int *what, pp_err *err) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) {
            *what = 0;
            return PP_OK;
        }
        return PP_FAIL(err, PP_EIO, "--export-stages: cannot use '%s': %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return PP_FAIL(err, PP_EIO, "--export-stages: '%s' exists and is not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return PP_FAIL(err, PP_EIO, "--export-stages: cannot read '%s': %s", dir, strerror(errno));
    struct dirent *e;
    const char *foreign = NULL;
    char name[256];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !ours(e->d_name)) {
            snprintf(name, sizeof name, "%s", e->d_name);
            foreign = name;
            break;
        }
    closedir(d);
    if (foreign)
        return PP_FAIL(err, PP_EIO, "--export-stages: '%s' exists and holds '%s', which no export wrote: "
                       "name a new or empty directory", dir, foreign);
    *what = 1;
    return PP_OK;
}

/* dir without its trailing slashes into target (4100 bytes), checked: a
 * name that can be replaced, nothing foreign there, its folder there;
 * *what as check_target's. */
static pp_status export_target(const char *dir, char *target, int *what, pp_err *err) {
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    if (dl == 0 || dl > 4000) return PP_FAIL(err, PP_EINVAL, "--export-stages: bad directory name '%s'", dir);
    snprintf(target, 4100, "%.*s", (int)dl, dir);
    if (!strcmp(target, "/") || !strcmp(target, ".") || !strcmp(target, "..") ||
        (dl >= 3 && !strcmp(target + dl - 3, "/..")) || (dl >= 2 && !strcmp(target + dl - 2, "/.")))
        return PP_FAIL(err, PP_EINVAL, "--export-stages: '%s' cannot be replaced; name a new directory", dir);
    PP_TRY(check_target(target, what, err));
    return pp_outpath_folder_check(target, err);
}

pp_status pp_export_stages_check(const char *dir, pp_err *err) {
    char target[4100];
    int what = 0;
    return export_target(dir, target, &what, err);
}

pp_status pp_export_stages(const pp_graph *g, const char *dir, const char *producer, pp_err *err) {
    char target[4100];
    int what = 0;
    PP_TRY(export_target(dir, target, &what, err));
    char tmp[4200], old[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", target);
    if (!mkdtemp(tmp))
        return PP_FAIL(err, PP_EIO, "--export-stages: cannot create a directory beside '%s': %s", target,
                       strerror(errno));
    ex x = {.g = g, .err = err};
    x.init_stage = malloc(sizeof(int) * pp_count(g->n_values));
    pp_status s = x.init_stage ? PP_OK : oom(&x);
    for (int v = 0; s == PP_OK && v < g->n_values; v++) x.init_stage[v] = -1;
    int written = 0;
    for (int st = 0; s == PP_OK && st < g->n_stages; st++) s = export_stage(&x, tmp, producer, st, &written);
    if (x.data) fclose(x.data);
    if (s == PP_OK) s = write_json(g, tmp, producer, err);
    free(x.nodes);
    free(x.inits);
    free(x.init_stage);
    pp_arena_free(&x.a);
    if (s == PP_OK && what == 1) { /* an earlier export or an empty directory: move it aside */
        snprintf(old, sizeof old, "%s.old-XXXXXX", target);
        if (!mkdtemp(old) || rename(target, old) != 0)
            s = PP_FAIL(err, PP_EIO, "--export-stages: cannot move the old '%s' aside: %s", target, strerror(errno));
    }
    if (s == PP_OK && rename(tmp, target) != 0) {
        s = PP_FAIL(err, PP_EIO, "--export-stages: cannot rename '%s' to '%s': %s", tmp, target, strerror(errno));
        if (what == 1) rename(old, target); /* put the old one back */
    }
    if (s != PP_OK) {
        remove_export(tmp);
        return s;
    }
    if (what == 1) remove_export(old);
    return PP_OK;
}
