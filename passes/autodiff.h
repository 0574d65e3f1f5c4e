/* autodiff.h: the gradient of a graph (ppcc --train), built in the IR.
 *
 * pp_train_params marks the weights that train (is_param: variables to the
 * fold pass, so that no folded copy of a weight hides it from its
 * gradient); after the infer pass, pp_autodiff appends the loss and, node by
 * node in reverse order, the backward nodes each op's gradient rule emits,
 * and makes the graph's outputs the loss, the output a built-in loss reads
 * (the logits, for accuracy), and the gradient of every weight that trains
 * ("<weight>.grad"). What comes out is an ordinary graph, a
 * function of the inputs, the labels and the weights, which every later pass
 * (fold, simplify, fuse, the split) treats as it treats any other.
 *
 * A rule is kept with its op's row in the op table: PP_GRAD(ENUM, rule,
 * slots) beside the PP_OP row (ir/ops*.def); slots is the mask of the input
 * slots a gradient flows into (Clip's bounds, Resize's scales and the like
 * are outside it, and an initializer used only there stays a constant). A
 * float unary op's rule is its derivative formula, PP_UNARY_GRAD in
 * ir/ops_unary.def, run by the generated pp.UnaryGrad. An op without a rule
 * on the path from a weight to the loss is refused by name.
 * docs/training.md explains the whole. */
#ifndef PP_AUTODIFF_H
#define PP_AUTODIFF_H

#include "../ir/ir.h"

typedef enum pp_loss_kind {
    PP_LOSS_NONE = 0,
    PP_LOSS_OUTPUT,        /* the named output is already the scalar loss */
    PP_LOSS_CROSS_ENTROPY, /* mean over the batch of -log softmax(output)[label]; labels int64 [N] */
    PP_LOSS_MSE,           /* mean over every element of (output - target)^2; target as output */
} pp_loss_kind;

#define PP_MAX_FREEZE 64
#define PP_MAX_RECOMPUTE 128 /* devices: a training plan has at most PP_MAX_SPLITS + 1 stages, two per device */

typedef struct pp_train_opts {
    pp_loss_kind loss;
    const char *loss_output; /* the graph output the loss reads */
    int n_freeze;            /* --freeze: module paths or weight names kept fixed */
    const char *freeze[PP_MAX_FREEZE];
    /* --recompute all | D[,D..]: devices whose backward stage computes their
     * forward again from the stage's inputs instead of keeping its
     * activations (passes/partition_train.c); recompute_all: every device */
    bool recompute_all;
    int n_recompute;
    int recompute[PP_MAX_RECOMPUTE];
    /* --schedule 1f1b|gpipe|zb-h1 (PP_TRAIN_SCHED_*): zb-h1 splits each
     * device's backward into B (the input gradients, on the chain) and W (the
     * weight gradients, a stage of its own off the chain: split_w) */
    int schedule;
    pp_optim optim;          /* the optimizer the plan records (ir/optim.h: its own option table) */
    /* (--precision is optim.precision: the plan records it; the device
     * memory model, passes/train_memory.c, stores activations, gradients
     * and messages at it: pp_train_dtype) */
    /* --memory-model host|cuda (PP_TRAIN_MEM_*): what passes/train_memory.c
     * counts for a device: pprt's process on a CPU, or a GPU's memory */
    int memory_model;
    /* --zero 0|1: 1 = ZeRO-1 in the device model: the optimizer's state
     * (and the f32 master weights under half precision) divided over the
     * data-parallel replicas */
    int zero;
} pp_train_opts;

enum { PP_TRAIN_MEM_HOST = 0, PP_TRAIN_MEM_CUDA = 1 };

enum { PP_TRAIN_SCHED_1F1B = 0, PP_TRAIN_SCHED_GPIPE = 1, PP_TRAIN_SCHED_ZBH1 = 2 };

/* The names the gradient graph gives what it adds. */
#define PP_LOSS_NAME "loss"
#define PP_LABELS_NAME "labels"
#define PP_TARGET_NAME "target"
#define PP_GRAD_SUFFIX ".grad"
#define PP_RUNNING_SUFFIX ".running" /* a training-mode BatchNorm's running statistic, for its initializer */

/* --precision bf16|fp16 (passes/precision.c; nothing under f32): before the
 * autodiff, each Conv, ConvTranspose, MatMul and Gemm made to read its float
 * inputs and write its output rounded to the half type (Casts to it and back
 * to f32); after it, the backward's readers of such an f32 copy given their
 * own Cast of the half value, so the forward keeps the half value for them. */
pp_status pp_train_autocast(pp_graph *g, const pp_train_opts *t, pp_err *err);
pp_status pp_train_autocast_stash(pp_graph *g, const pp_train_opts *t, pp_err *err);
/* ppcc --precision bf16|fp16 without --train (precision: pp_train_precision's numbering), after the fusions and
 * before the split: the products, and the ops with a half path reading their values, store in half; Casts at the
 * graph's inputs and outputs and before the ops without one; constants converted at compile time (nearest even).
 * Records the precision in g->precision. */
pp_status pp_infer_autocast(pp_graph *g, int precision, pp_err *err);

/* Whether --recompute names device d (or is all). */
bool pp_train_recomputes(const pp_train_opts *t, int d);

/* --loss SPEC: cross-entropy:OUTPUT, mse:OUTPUT or OUTPUT. */
pp_status pp_loss_parse(const char *spec, pp_train_opts *t, pp_err *err);

/* Mark the weights that train: float initializers (not the values of
 * Constant nodes) used in a slot a gradient flows into, less those --freeze
 * names. Refuses a --freeze pattern that matches nothing, and a model
 * without a weight left to train. */
pp_status pp_train_params(pp_graph *g, const pp_train_opts *t, pp_err *err);

/* Append the loss and the backward graph; the outputs become the loss and
 * the weights' gradients. The graph must be inferred. The weights stay
 * variables to fold, simplify and fuse (which must neither fold a copy of a
 * weight that training changes, nor merge two weights that start equal, nor
 * fold a BatchNormalization into a weight); pp_train_params_fix makes them
 * constants for the split and the plan, where they are the stages' weights
 * (is_param stays set). */
pp_status pp_autodiff(pp_graph *g, const pp_train_opts *t, pp_err *err);
void pp_train_params_fix(pp_graph *g);

/* Dropout in training mode with a nonzero ratio (both constants) becomes
 * pp.Dropout(X, dropout_seed) -> (Y, mask), its mask a counter-based hash of
 * (seed, the node's name, counter, element), and the plan gains the int64
 * [2] input PP_DROPOUT_SEED_NAME = {seed, counter} that pprt --epochs feeds
 * per micro-batch (a negative counter turns dropout off). Runs before the
 * infer pass (passes/grad_math.c). A Dropout whose mask output is read is
 * refused. One in training mode with ratio 0 (its mask unread) becomes an
 * Identity, so that no copy of its input is kept for the backward. */
#define PP_DROPOUT_SEED_NAME "dropout_seed"
pp_status pp_train_dropout(pp_graph *g, pp_err *err);

/* ---- for the gradient rules (passes/grad_*.c) ----------------------------------------- */

typedef struct pp_ad pp_ad;
typedef pp_status (*pp_grad_rule)(pp_ad *ad, int node, pp_err *err);

/* The graph being differentiated. */
pp_graph *pp_ad_graph(pp_ad *ad);
/* The gradient of node's output k (a value index), or -1: none reaches it. */
int pp_ad_gy(pp_ad *ad, int node, int k);
/* Whether the value needs a gradient (a weight that trains, or computed from one). */
bool pp_ad_wants(pp_ad *ad, int value);
/* Add grad to the gradient of value (an Add node when it has one already). */
pp_status pp_ad_give(pp_ad *ad, int value, int grad, pp_err *err);
/* Emit a backward node of the node being differentiated: op over in[0..n_in)
 * (-1: absent), with attributes a[0..n_a) (copied), n_out outputs whose
 * value indices go to out[] (may be NULL when n_out is 1 and out1 is given);
 * shapes are inferred at once. */
pp_status pp_ad_emit(pp_ad *ad, pp_op op, const int *in, int n_in, const pp_attr *a, int n_a, int *out,
                     int n_out, pp_err *err);
/* One-output shorthands. */
pp_status pp_ad_op1(pp_ad *ad, pp_op op, int x, int *y, pp_err *err);
pp_status pp_ad_op2(pp_ad *ad, pp_op op, int a, int b, int *y, pp_err *err);
/* A float32 scalar constant (shape []); an int64 vector: pp_graph_add_ints(pp_ad_graph(ad), ...). */
pp_status pp_ad_scalar(pp_ad *ad, float v, int *out, pp_err *err);
/* Sum g over axes[0..n) (keepdims 0 or 1). */
pp_status pp_ad_reduce_sum(pp_ad *ad, int g, const int64_t *axes, int n, bool keepdims, int *out, pp_err *err);
/* g reshaped to shape. */
pp_status pp_ad_reshape(pp_ad *ad, int g, const pp_shape *shape, int *out, pp_err *err);
/* g, which has the broadcast shape of an op's output, summed back to the
 * shape of value x (NumPy broadcasting undone). */
pp_status pp_ad_unbroadcast(pp_ad *ad, int g, int x, int *out, pp_err *err);
/* Transpose with perm. */
pp_status pp_ad_transpose(pp_ad *ad, int x, const int64_t *perm, int n, int *out, pp_err *err);
/* Attribute builders (the name must outlive the call: a literal). */
pp_attr pp_ad_attr_int(const char *name, int64_t v);
pp_attr pp_ad_attr_ints(const char *name, const int64_t *v, int n);
pp_attr pp_ad_attr_float(const char *name, float v);
pp_attr pp_ad_attr_str(const char *name, const char *s);
/* A failure of the rule for node, naming it. */
pp_status pp_ad_fail(pp_ad *ad, int node, pp_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The rule table, generated from the PP_GRAD rows. */
typedef struct pp_grad_row {
    pp_grad_rule rule;  /* NULL: the op has none */
    unsigned slots;     /* input slots a gradient flows into */
} pp_grad_row;
extern const pp_grad_row pp_grad_table[PP_OP_COUNT];

/* the rules (declared from the rows) */
#define PP_GRAD(E, RULE, SLOTS) pp_status RULE(pp_ad *ad, int node, pp_err *err);
#define PP_OP(e, name, mi, ma, no, tr)
#include "../ir/ops.def"
#undef PP_OP
#undef PP_GRAD
pp_status pp_grad_unary(pp_ad *ad, int node, pp_err *err);

#endif
