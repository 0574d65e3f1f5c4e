/* ir.h: the compiler's central types: the graph of values and nodes that the
 * frontend builds, the passes transform and split, and the backend lowers.
 *
 * A graph owns an arena for names and attribute arrays; nodes and values live
 * in growable arrays and are referred to by index (never by pointer, so they
 * may move). Nodes are kept in one topological order at all times. Constant
 * bytes are never copied: a value's data points into memory owned by the
 * frontend (the parsed model, the mmapped model file, or an mmapped external
 * file), kept alive by the graph through `keep`.
 *
 * The runtime never includes this file; what compiler and runtime share is in
 * base.h (types, op enum, shape functions). */
#ifndef PP_IR_H
#define PP_IR_H

#include <stdio.h>

#include "base.h"
#include "optim.h"

/* ---- arena: many small allocations freed at once ------------------------------- */

typedef struct pp_arena_chunk pp_arena_chunk;
typedef struct pp_arena {
    pp_arena_chunk *head;
} pp_arena;

void *pp_arena_alloc(pp_arena *a, size_t n); /* zeroed, 16-aligned; NULL on OOM */
char *pp_arena_strdup(pp_arena *a, const char *s);
void pp_arena_free(pp_arena *a);

/* ---- values and nodes ----------------------------------------------------------- */

typedef struct pp_value {
    const char *name;
    pp_dtype dtype;
    pp_shape shape;
    int producer;        /* node index; -1 for graph inputs and constants */
    bool is_input;       /* graph input (fed by data) */
    bool is_const;       /* initializer or folded constant: data is valid */
    const void *data;    /* constant bytes, little-endian, nbytes long */
    size_t nbytes;
    /* data is a large initializer read in place from the mapped model file and
     * may be misaligned for its type: only byte-wise use (hash, memcmp, the
     * plan writer) is allowed until pp_value_align (what reads it typed). */
    bool unaligned;
    int n_uses;          /* consumer count, maintained by pp_graph_link */
    bool is_output;      /* a graph output (kept by pp_graph_add_output and pp_graph_replace_uses) */
    /* a weight that trains (ppcc --train, passes/autodiff.c): until the
     * gradient graph is built it is a variable (is_const false, so that no
     * pass folds it into another constant), with data its initial value */
    bool is_param;
    /* a constant pprt writes back after each training step (a training-mode
     * BatchNorm's running statistic, output as NAME.running): it keeps its
     * name, so no pass merges it with another constant of equal bytes */
    bool is_state;
    /* one of the model's initializers (not a Constant node's value, nor one
     * ppcc made): only these train */
    bool is_initializer;
    /* the value of an ONNX Constant node, not an initializer: a constant of
     * the computation, never a weight that trains */
    bool from_node;
    int64_t arena_off;   /* activation offset in its stage's arena (memplan), -1 none */
    /* an ONNX sequence, known at compile time (passes/unroll.c): its
     * elements are the values seq[0..n_seq); dtype is theirs. Sequences
     * exist only while the infer pass unrolls: no op of a plan reads one. */
    bool is_seq;
    int n_seq;
    int *seq;
} pp_value;

/* A subgraph (a Loop's body, an If's branch) as the frontend read it, kept
 * until the infer pass instantiates it (passes/unroll.c). Its values are
 * referred to by pp_subref: a local slot (the subgraph's formal inputs are
 * slots 0..n_in-1, then each node output in order), a constant of the graph
 * (the subgraph's initializers and Constant nodes), or a free variable: a
 * value of an enclosing scope, which the owning node takes as its extra
 * input in[n_in_node - n_free + idx]. */
typedef enum pp_subref_kind { PP_SUB_NONE, PP_SUB_LOCAL, PP_SUB_CONST, PP_SUB_FREE } pp_subref_kind;
typedef struct pp_subref {
    pp_subref_kind kind;
    int idx;
} pp_subref;

typedef struct pp_subnode {
    pp_op op;
    const char *name;
    int n_in, n_out;
    pp_subref *in;
    int *out;            /* local slots */
    pp_attr *attrs;
    int n_attrs;
} pp_subnode;

typedef struct pp_subgraph {
    const char *name;
    int n_in, n_out;     /* formal inputs (local slots 0..n_in-1), outputs */
    pp_subref *out;
    int n_nodes;
    pp_subnode *nodes;
    int n_locals;
    const char **local_names;
    int n_free;          /* free variables: the owning node's last n_free inputs */
    const char **free_names;
} pp_subgraph;

/* Unrolling state of a Loop node (passes/unroll.c). */
typedef struct pp_loop_state {
    int64_t iter;        /* iterations instantiated so far */
    int n_scan;
    int **scan;          /* per scan output: the value of each iteration */
    int scan_cap;
} pp_loop_state;

typedef struct pp_node {
    pp_op op;
    const char *name;    /* verbatim from the model: it carries the module scope */
    int *in;             /* value indices; -1 = absent optional input */
    int n_in;
    int *out;
    int n_out;
    pp_attr *attrs;
    int n_attrs;
    int stage;           /* set by partitioning; -1 before */
    pp_cost cost;        /* set by pp_graph_infer */
    /* module scope from the name: qualified module paths, outermost first
     * ("/layer1/layer1.0/conv1/Conv" -> layer1, layer1.0, layer1.0.conv1);
     * n_scope == 0: glue (an op written as a function in forward()) */
    const char **scope;
    int n_scope;
    const char **extra;  /* scopes of nodes fused into this one (bn1 in conv1) */
    int n_extra;
    bool recovered;      /* outside every module the split names (report) */
    bool chain;          /* runs in the kernel of the node before it where a backend can (partition:
                          * pp_fusion_chains; never the first node of a stage) */
    uint8_t pattern;     /* PP_PATTERN_*: this node opens a pattern ppcc kept whole in its stage (partition:
                          * pp_attention_chains), which a backend may run as one kernel; 0: none */
    bool dead;           /* to be removed by pp_graph_compact */
    double prof_s;       /* measured seconds per micro-batch (ppcc --profile), < 0 if none */
    double update_s;     /* ppcc --train's split: the per-micro-batch share of updating the weights it reads
                          * first (gradient sum and optimizer step; partition_train.c), added to its time */
    /* > 0: the inputs are constants, but folding was estimated at this many
     * operations, over the fold pass's budget: the node runs at run time */
    double fold_skipped;
    pp_loop_state *loop; /* a Loop being unrolled (passes/unroll.c), else NULL */
    int src;             /* index of the node in the model's graph (messages); -1: made by ppcc */
    /* ppcc --train: a node of the backward graph, emitted by the gradient
     * rule of the forward node named grad_of (passes/autodiff.c; NULL for a
     * forward node and the loss). The split puts it in the stage of that
     * node: a stage owns the forward and the backward of its ops. */
    bool backward;
    const char *grad_of;
    /* ppcc --train --schedule zb-h1: a backward node that no input gradient
     * needs (it makes weight gradients alone): its device's W stage runs it,
     * off the chain of stages (passes/partition_train.c) */
    bool wpass;
} pp_node;

/* Where a stage runs (ppcc --placement): a backend's name as pprt knows it
 * ("dnnl", "ref", "cuda"; "cpu": the best CPU backend pprt has) and a
 * device index (-1: any). An empty name: pprt's choice. */
typedef struct pp_place {
    char backend[32];
    int device;
} pp_place;

/* What the cost model says about one stage (filled after memory planning). */
typedef struct pp_stage_info {
    int ops, first, last;      /* node count and index range */
    size_t params;             /* weight bytes (each constant once per stage) */
    size_t trained;            /* a training plan's forward stage: the bytes of the weights that train it reads */
    double flops;
    size_t arena;              /* activation arena: the peak of live activations */
    size_t recv, send;         /* boundary message bytes in and out */
    size_t memory;             /* params + arena + depth x (recv + send) */
    double est_ms;             /* compute (roofline) + sending the boundary */
    pp_place place;            /* where it runs (ppcc --placement) */
} pp_stage_info;

/* A stage boundary: the values that cross from stages <= i to stages > i. */
typedef struct pp_boundary {
    int *vals;
    int n;
    size_t bytes;
} pp_boundary;

typedef struct pp_graph {
    pp_arena arena;
    pp_node *nodes;
    int n_nodes, cap_nodes;
    pp_value *values;
    int n_values, cap_values;
    int *inputs, n_inputs, cap_inputs;    /* graph inputs, model order */
    int *outputs, n_outputs, cap_outputs; /* graph outputs, model order */
    /* name -> value index (open addressing, power-of-two size) */
    int *hash;
    int hash_cap;
    /* value -> the nodes reading it, while a rewriting pass has it built
     * (pp_graph_index_uses); NULL otherwise */
    struct pp_uses *uses;
    /* filled by partitioning / memplan */
    int n_stages;
    pp_boundary *bounds;     /* n_stages - 1 entries */
    size_t *stage_arena;     /* arena bytes per stage */
    pp_stage_info *stage_info; /* n_stages entries (passes/stagecost.c) */
    size_t act_total;        /* sum of all activation bytes (memplan's baseline) */
    double split_cost;       /* a min-max policy's bottleneck (its estimate), -1 for custom splits */
    /* a training plan (ppcc --train): stages s and 2 x train_devices - 1 - s
     * are the forward and the backward of one device's ops; 0: not one */
    int train_devices;
    /* a training plan's optimizer (ppcc --train's options; the plan records it) */
    pp_optim optim;
    /* an inference plan's storage precision (ppcc --precision bf16|fp16 without --train: passes/precision.c's
     * pp_infer_autocast stored the products and the values between them in half; pp_train_precision's
     * numbering); 0: f32 */
    int precision;
    /* per device of a training plan: the values its forward stage keeps for
     * its backward stage, on the device (passes/boundary.c); NULL otherwise */
    pp_boundary *stash;
    /* per device of a training plan: the outputs its backward stage makes
     * that no later stage reads (its weights' gradients): they leave the
     * pipeline there, device-local, instead of travelling down the chain to
     * the last stage (passes/boundary.c); NULL otherwise */
    pp_boundary *local;
    /* --schedule zb-h1 (train_split_w): per device, what its W stage reads
     * that is not a constant (made or received by its backward stage B, which
     * keeps it for W after its send list: passes/boundary.c); NULL otherwise */
    bool train_split_w;
    pp_boundary *wkeep;
    /* when a split fails its memory caps: the stage that overflows most (in
     * the closest split), its estimated bytes and its cap; over_stage -1
     * otherwise (set by partition and stage costs) */
    int over_stage;
    double over_need, over_cap;
    /* the module paths the model names, as imported (before any pass removed
     * or fused a node): every node's scopes and the module part of every
     * dotted initializer name ("layer1.0.bn1" of "layer1.0.bn1.weight");
     * sorted, distinct (passes/scope.c) */
    const char **modules;
    int n_modules;
    /* the doubled names ppcc gave nested containers' children before it named
     * modules as PyTorch does ("stages.1.blocks.blocks.0" for
     * "stages.1.blocks.0"), sorted by the old name: accepted with a warning
     * (passes/scope.c) */
    struct pp_module_alias *aliases;
    int n_aliases;
    /* the frontend's storage that constant data points into */
    void *keep;
    void (*keep_free)(void *);
    /* the mapped model file that large initializers' data points into (NULL
     * when none does, or the model was parsed from memory) */
    const void *model_map;
    size_t model_map_len;
    /* external data: the model's directory, and the files mapped from it */
    const char *model_dir;
    int n_maps;
    struct pp_map {
        const char *location;
        void *addr;
        size_t len;
    } *maps;
    /* graph inputs that the model also gives an initializer (a default value
     * in ONNX from IR version 4): ppcc freezes them to it, and records them
     * in the plan so that pprt refuses data for them; frozen_default: the
     * model's IR version makes them overridable defaults (ppcc warns) */
    const char **frozen;
    int n_frozen;
    bool frozen_default;
    /* provenance */
    char model_hash[17];     /* XXH3-64 of the model file, hex */
    int64_t batch;           /* micro-batch size the shapes were fixed to */
    bool batch_fixed;        /* some input's dim 0 is a number in the model, not a symbol */
    /* set by pp_batch_check under --allow-batch-mixing: the first node that
     * mixes samples across the batch axis and why (NULL: none) */
    const char *batch_mixing;
    int opset;               /* ai.onnx opset of the model */
    int64_t ir_version;      /* the model's ONNX IR version (ppcc --export-stages writes it back) */
} pp_graph;

static inline pp_attrs pp_node_attrs(const pp_graph *g, const pp_node *n) {
    return (pp_attrs){n->attrs, n->n_attrs, g->opset};
}

void pp_graph_init(pp_graph *g);
void pp_graph_free(pp_graph *g);
/* A copy of src's values, nodes, inputs and outputs (before partitioning)
 * to transform on its own: names, attributes and constant bytes stay src's,
 * so src must outlive it; pp_graph_free frees only what the copy made. */
pp_status pp_graph_clone(const pp_graph *src, pp_graph *dst, pp_err *err);
/* The same copy, which also reads src's module scopes and aliases (the
 * split's policies need them) without owning them: free it with
 * pp_graph_free_borrowed, which leaves them to src. */
pp_status pp_graph_clone_borrowed(const pp_graph *src, pp_graph *dst, pp_err *err);
void pp_graph_free_borrowed(pp_graph *g);

/* New value; fails on a duplicate name. *idx receives its index. */
pp_status pp_graph_add_value(pp_graph *g, const char *name, int *idx, pp_err *err);
int pp_graph_find(const pp_graph *g, const char *name); /* -1 when absent */
/* New node with room for n_in inputs and n_out outputs (filled by the caller). */
pp_status pp_graph_add_node(pp_graph *g, pp_op op, const char *name, int n_in, int n_out,
                            int *idx, pp_err *err);
/* The same, placed at position `at` of the node order (the nodes from `at`
 * on move one place later; producers are refreshed by pp_graph_verify). */
pp_status pp_graph_insert_node(pp_graph *g, int at, pp_op op, const char *name, int n_in,
                               int n_out, int *idx, pp_err *err);
/* Control flow and sequence ops (ops_control.def): unrolled by the infer
 * pass, never past it. */
bool pp_op_is_control(pp_op op);
pp_status pp_graph_add_input(pp_graph *g, int v, pp_err *err);
pp_status pp_graph_add_output(pp_graph *g, int v, pp_err *err);

/* Fill in[]/out[] (sized n->n_in / n->n_out) with the node's tensor infos. */
void pp_node_tinfo(const pp_graph *g, const pp_node *n, pp_tinfo *in, pp_tinfo *out);
/* "Conv" node name for messages: "'name' (#idx, Op)" into buf. */
const char *pp_node_desc(const pp_graph *g, int idx, char *buf, size_t n);

/* Recount uses, set producers, and check structure: every value has at most
 * one producer, inputs are defined before use (topological order), outputs are
 * defined. Errors name the node. */
pp_status pp_graph_verify(pp_graph *g, pp_err *err);
/* Infer every node's output types and shapes, and its cost. */
pp_status pp_graph_infer(pp_graph *g, pp_err *err);
/* The same for node i alone (its inputs must be inferred already). */
pp_status pp_node_infer(pp_graph *g, int i, pp_err *err);

/* Parameter bytes of a node: sum of its constant inputs. */
size_t pp_node_param_bytes(const pp_graph *g, const pp_node *n);

/* ---- rewriting (used by the passes) ---------------------------------------------- */

/* New constant value; `data` (nbytes) is copied into the graph's arena. The
 * name is `hint` made unique with a numeric suffix. */
pp_status pp_graph_add_const(pp_graph *g, const char *hint, pp_dtype dt, const pp_shape *sh,
                             const void *data, int *idx, pp_err *err);
/* A new int64 constant of shape [n] (a shape, axes, starts: what Reshape, Slice, ReduceSum read). */
pp_status pp_graph_add_ints(pp_graph *g, const char *hint, const int64_t *v, int n, int *idx, pp_err *err);
/* Give value v's constant bytes their type's alignment (an arena copy, only
 * when `unaligned`): call before reading a constant's elements typed. */
pp_status pp_value_align(pp_graph *g, int v, pp_err *err);
/* Make every use of value `from` (node inputs, graph outputs) use `to`. When
 * `from` is a graph output, the two values swap names, so the graph's output
 * keeps the name users know. */
void pp_graph_replace_uses(pp_graph *g, int from, int to);
/* Drop the nodes whose `dead` flag is set, keeping the order; producers and
 * use counts are recomputed by pp_graph_verify. Drops the use index (node
 * indices change). */
void pp_graph_compact(pp_graph *g);
/* Number of nodes reading value v (any input slot). */
int pp_graph_count_uses(const pp_graph *g, int v);
bool pp_graph_is_output(const pp_graph *g, int v);

/* The use index: for each value, the nodes that read it, so that a pass
 * rewriting the graph finds consumers without scanning every node (which
 * made simplify and fuse quadratic in nodes). Built in O(nodes + inputs);
 * pp_graph_replace_uses keeps it; a pass that points a node's inputs at
 * other values reports each with pp_graph_note_use; pp_graph_compact and
 * pp_graph_free drop it. Lists may hold stale entries (dead nodes, nodes no
 * longer reading the value): the readers check each entry. */
pp_status pp_graph_index_uses(pp_graph *g, pp_err *err);
void pp_graph_drop_uses(pp_graph *g);
pp_status pp_graph_note_use(pp_graph *g, int v, int node, pp_err *err);
/* The live (not dead) nodes reading v, each once: up to max of them into
 * out[]; returns how many there are, counting at most max + 1. Uses the
 * index when built, else scans the nodes. */
int pp_graph_consumers(const pp_graph *g, int v, int *out, int max);

/* Print the IR, one line per op (ir/dump.c; format in docs/ir.md). */
void pp_dump_ir(FILE *f, const pp_graph *g, const char *title);

#endif
