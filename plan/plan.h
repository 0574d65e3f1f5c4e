/* plan.h: the plan file library (plan/), which both tools link: ppcc writes
 * plans with pp_plan_file_write, pprt maps and verifies them with
 * pprt_plan_load into the pprt_plan below (its types keep the runtime's
 * prefix: they are what the runtime runs). docs/plan-format.md is the
 * format; plan_format.h its fixed header, plan.proto its metadata.
 *
 * Depends on ir/base.h (pp_base) only: never on the IR graph, the passes or
 * the runtime. */
#ifndef PP_PLAN_H
#define PP_PLAN_H

#include "../ir/base.h"
#include "../ir/optim.h"

/* ---- a loaded plan ------------------------------------------------------------- */

enum { PPRT_ACTIVATION = 0, PPRT_WEIGHT = 1, PPRT_RECV = 2, PPRT_SEND = 3 };

typedef struct pprt_tdesc {
    const char *name;
    pp_dtype dtype;
    pp_shape shape;
    int kind;             /* PPRT_* */
    size_t offset;        /* arena offset, weights offset (source -1) or offset in
                             p->sources[source], or message slot */
    size_t nbytes;
    /* PPRT_WEIGHT only: -1 in the plan's weights section, else an EXTERNAL
     * tensor of a --ref-weights plan, read from p->sources[source]; and its
     * bytes, 64-aligned: NULL until pprt_stage_weights for an EXTERNAL one
     * that lies misaligned in its file (executors call it at create). */
    int source;
    const unsigned char *data;
    bool copy;            /* data is an aligned copy that pprt_stage_weights made (owned) */
    /* PPRT_WEIGHT: a trainer bound data to its own buffer and changes its
     * bytes between runs (runtime/train.c): an executor that derives anything
     * from the values redoes it at pprt_exec_ops.reload, or refuses to */
    bool varies;
    /* PPRT_WEIGHT that varies: a device optimizer (runtime/dopt.h) writes
     * the executors' device copies, so a reload leaves them alone */
    bool resident;
} pprt_tdesc;

typedef struct pprt_node {
    pp_op op;
    const char *name;
    int n_in, n_out;
    const int32_t *in, *out; /* tensor ids; -1 = absent optional input */
    pp_attr *attrs;
    int n_attrs;
    double flops;
    bool chain; /* a backend may run it in the kernel of the node before it (ppcc's fusion chains) */
    int pattern; /* PP_PATTERN_* (ir.h): it opens a pattern ppcc kept whole in this stage; 0: none */
} pprt_node;

/* A boundary message: a list of tensors laid out 64-byte aligned in one buffer. */
typedef struct pprt_msg_layout {
    int n;
    const pprt_tdesc **t; /* slot -> tensor description (of the stage that owns the list) */
    size_t *off;          /* slot -> byte offset */
    size_t bytes;         /* total */
} pprt_msg_layout;

typedef struct pprt_stage {
    int index;
    int n_tensors;
    pprt_tdesc *t;
    int n_nodes;
    pprt_node *nodes;
    size_t arena_bytes;
    int n_recv, n_send;
    const int32_t *recv, *send;
    pprt_msg_layout in, out;
    double flops;
    size_t weight_bytes;
    const char *backend; /* where ppcc --placement put it ("": pprt's choice) */
    int device;          /* and on which device (-1: any) */
    /* a training plan: the last n_stash slots of a forward stage's out
     * layout, and of a backward stage's in layout, are its device's stash:
     * kept on the device between the two (runtime/train.c), sent nowhere */
    int n_stash;
    /* a training plan's backward stage: the n_local slots of its out layout
     * from pprt_local_first (the last ones, but for a zb-h1 plan's n_wkeep)
     * are plan outputs (its device's weight gradients) that leave the
     * pipeline here, not at the last stage (pprt_io.stage, .slot) */
    int n_local;
    /* a zb-h1 plan's backward stage: the last n_wkeep slots of its out layout
     * (after the n_local) are what its device's W stage reads, kept for it */
    int n_wkeep;
} pprt_stage;

static inline int pprt_local_first(const pprt_stage *st) { return st->out.n - st->n_wkeep - st->n_local; }

typedef struct pprt_io {
    const char *name;
    pp_dtype dtype;
    pp_shape shape;       /* dim 0 = micro-batch */
    size_t sample_bytes;  /* bytes of one sample (shape without dim 0) */
    /* an output: the stage whose outgoing message has it, and its slot there
     * (the last stage's slot i for output i, but in a training plan with
     * device-local gradients, pprt_stage.n_local) */
    int stage, slot;
} pprt_io;

typedef struct pprt_plan {
    const char *producer, *model_hash, *options;
    uint32_t version;     /* plan format version (plan_format.h) */
    /* compiled with ppcc --allow-batch-mixing over a node that mixes samples
     * across the batch axis: that node and how (NULL: none) */
    const char *batch_mixing;
    /* ppcc --train: stages s and 2 x train_devices - 1 - s are the forward
     * and the backward of one device's ops; 0: not a training plan */
    int train_devices;
    /* ppcc --train --schedule zb-h1: train_devices W stages follow the chain's
     * n_stages in `stages` (device d's at n_stages + d): its backward's
     * weight-gradient part, off the chain; 0: none */
    int n_wstages;
    /* a training plan's optimizer as ppcc --train recorded it (has_optim
     * false: a plan from before it was recorded; optim then the defaults) */
    bool has_optim;
    pp_optim optim;
    /* ppcc --precision bf16|fp16 of an inference plan (pp_train_precision's numbering): the half storage
     * passes/precision.c decided; 0: f32 */
    int precision;
    int64_t batch;        /* micro-batch size; 0: unbatched (inputs are whole tensors, one run) */
    int opset;            /* ai.onnx opset: passed to shape functions and kernels */
    int n_inputs, n_outputs;
    pprt_io *inputs, *outputs;
    /* graph inputs ppcc froze to their initializers (the model gave them
     * one): pprt_data_load refuses data for them */
    int n_frozen;
    char *const *frozen;
    int n_stages;
    pprt_stage *stages;
    const unsigned char *weights; /* mmapped, never copied */
    size_t weights_bytes;
    size_t file_bytes;
    /* the files a --ref-weights plan reads weights from, mapped and verified
     * (size and XXH3) at load */
    int n_sources;
    struct pprt_source {
        const char *path; /* where it was read (the plan's path, or under --model) */
        const unsigned char *map;
        size_t len;
        /* for pprt_plan_sources_unchanged: the open file, its identity and
         * times at load, its XXH3, and the offset of the first page read
         * past its end (SIZE_MAX: none; set by pprt's SIGBUS handler, which
         * maps zeros there so that the run goes on to its end) */
        int fd;
        uint64_t dev, ino, size, xxh3;
        int64_t mtime_ns, ctime_ns;
        size_t cut;
    } *sources;
    /* ownership */
    void *map;
    size_t map_len;
    void *meta;   /* unpacked plan.proto message */
    void *meta_arena; /* the memory it (and the nodes' attributes) lives in */
    void *alloc;  /* one block holding the arrays above */
} pprt_plan;

/* Map and verify a plan file. Every offset, size, id, op, attribute and shape
 * is checked before anything runs; failures say "expected X, got Y". A
 * --ref-weights plan's source files are mapped and checked too: found at the
 * paths the plan records, or, with model (NULL: none), at model for the model
 * file and beside it for its external data files. */
pp_status pprt_plan_load(const char *path, const char *model, pprt_plan **out, pp_err *err);
/* Whether every file a --ref-weights plan reads weights from is as it was
 * at load: never cut short under a reading thread (a SIGBUS that pprt's
 * handler turned into zeros), the same size, modification and change times,
 * and XXH3. PP_ERUNTIME naming the file otherwise: the run read weights that
 * are not the plan's, and its outputs must not be written. pprt_run and
 * pprt_run_mpi call it after the last micro-batch. */
pp_status pprt_plan_sources_unchanged(const pprt_plan *p, pp_err *err);
/* Same over bytes in memory (copied); used by tests and the fuzz target. */
pp_status pprt_plan_load_mem(const void *buf, size_t len, pprt_plan **out, pp_err *err);
void pprt_plan_free(pprt_plan *p);
/* The loader's arena check (exposed for tests): slot i is live over node
 * indices [start[i], max(start[i], end[i])] and holds bytes [off[i], off[i] +
 * size[i]); 1 when two slots overlap in both (*a < *b, the first found), 0
 * when none do, -1 out of memory. Empty slots overlap nothing. O(n log n). */
int pprt_slots_overlap(int n, const int *start, const int *end, const size_t *off, const size_t *size, int *a,
                       int *b);
/* Make every weight of stage `stage` addressable (tdesc.data set, 64-aligned):
 * EXTERNAL weights that lie misaligned in their file are copied once. Called
 * by the executors at create, on the stage's own thread; idempotent; calls for
 * different stages may run at once. */
pp_status pprt_stage_weights(const pprt_plan *p, int stage, pp_err *err);
/* The same for the one tensor tid of the stage (any kind: only a weight
 * without data is copied), for an executor that copies as it goes. */
pp_status pprt_stage_weight(const pprt_plan *p, int stage, int tid, pp_err *err);
/* Free such a copy of weight tid of stage `stage` (data back to NULL), for an
 * executor that has what it needs of it (oneDNN reordered it into its own
 * layout). A later pprt_stage_weights copies it again. */
void pprt_stage_weight_release(const pprt_plan *p, int stage, int tid);

/* ---- writing (ppcc) -------------------------------------------------------------- */

struct Ppplan__Plan;

/* A constant of the weights section: nbytes of data at byte offset offset. */
typedef struct pp_plan_weight {
    uint64_t offset;
    const void *data;
    size_t nbytes;
} pp_plan_weight;

/* Write a plan file: the header, the metadata message meta, and a weights
 * section of weights_bytes bytes holding w[0..n) (offsets increasing, zero
 * bytes between); to a temporary name beside `path`, then renamed, so the
 * file is whole or absent. The header's flags say --ref-weights when meta
 * names sources. */
pp_status pp_plan_file_write(const struct Ppplan__Plan *meta, const pp_plan_weight *w, size_t n,
                             size_t weights_bytes, const char *path, pp_err *err);

#endif
