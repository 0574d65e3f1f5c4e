/* train_memory.c: what each device of a training plan holds under pprt.
 *
 * Device d of a training plan (passes/partition_train.c) runs stages d and
 * 2P-1-d. Its memory, estimated from what pprt holds (runtime/train.c,
 * sched.c, stash.c):
 *   the weights: the plan's copy, and the trainer's weights, averaged
 *   gradients and the buffers of the optimizer the plan records (none for
 *   plain SGD, SGD's momentum, AdamW's two moments): 3 to 5 x the weight
 *   bytes;
 *   the two stages' arenas;
 *   the messages its stages send: a forward stage's outgoing link holds
 *   as many as the schedule keeps in flight (pprt's --depth: P + 1 under
 *   1F1B, M + 1 under GPipe), each with the stash as its tail (the stage
 *   writes it there, the FIFO copies it out), a backward stage's two; the
 *   last stage's single buffer at the outputs and the first's at the inputs
 *   go to device 0;
 *   its stash, once per micro-batch in flight: 1F1B keeps min(P - d, M),
 *   GPipe M.
 * Not counted: the data, the libraries, what a backend prepares (oneDNN's
 * reordered weights: pprt --stats-json says how many bytes).
 * bench/train_memory.py sets these figures against a pprt run's peak
 * resident memory; `ppcc --report` prints them and `--max-batch` and
 * `--search` hold them against the caps.
 *
 * --memory-model cuda: what a GPU would hold for the same plan (no GPU
 * backward runs yet: a projection, as PyTorch's mixed precision and
 * ColossalAI keep it), with N the elements of the device's weights that
 * train (f32; its other constants kept once, as they are) and h the bytes
 * of --precision (4, or 2 for bf16 and fp16):
 *   the weights' state: f32 master weights 4N, a working copy hN under
 *   half precision (none in f32: the master is the working copy), the
 *   step's gradients hN (each micro-batch's weight gradients added into
 *   them in place: they do not travel with the messages), the optimizer's
 *   buffers in f32 (AdamW 8N); --zero 1 divides the optimizer's buffers,
 *   and under half precision the master weights, over o->replicas (each
 *   replica updates its shard and gathers the working copy: ZeRO-1 as
 *   DeepSpeed and ColossalAI have it; the gradients stay whole);
 *   the two stages' arenas, the stash and the messages at precision: every
 *   f32 value at h bytes (the arena's peak scaled whole);
 *   the stash once per micro-batch kept, as above, kept in place (not a
 *   message's tail);
 *   the messages both ways, each end's own buffer and one more in flight:
 *   2 x (forward in + forward out + gradient in + gradient out); device 0
 *   also twice the inputs (as given) and the outputs less its gradients;
 *   a cut inside a device (the last device's forward to its backward, or
 *   -pp 1's) held once;
 *   the kernel workspace (PP_TRAIN_CUDA_WORKSPACE).
 * A zb-h1 plan (g->train_split_w), both models: device d's backward stage
 * lowers into B and W, each with an arena up to its own highest activation
 * (backend/lower.c), counted instead of the stage's one; what B keeps for W
 * (g->wkeep[d]) rides at the end of B's outgoing message (its buffers, as
 * the stash in the forward's), is W's incoming message, and waits in
 * entries until W runs: with the stash under 1F1B's cap (a micro-batch is
 * held until its W ran, so the stash's and W's entries together are at most
 * the cap: counted as the cap times the larger), one under GPipe (W right
 * after its B). Measured against pprt by bench/train_memory.py --zb-h1.
 * The CUDA context and the framework are --reserve's, off the cap
 * (PP_TRAIN_CUDA_RESERVE when none is given). tests/train/memory_model.py checks
 * the terms; tests/cuda/train_memory_gpu.py sets the whole beside PyTorch's
 * peak on a GPU. */
#include <stdio.h>
#include <string.h>

#include "passes.h"

static double stash_of(const pp_graph *g, int d) { return g->stash ? (double)g->stash[d].bytes : 0; }

static double link_msg(const pp_graph *g, int s) { /* stage s -> s+1's buffer */
    const int P = g->train_devices;
    double out = (double)g->stage_info[s].send + (s < P ? stash_of(g, s) : 0);
    double in = (double)g->stage_info[s + 1].recv + (s + 1 >= P ? stash_of(g, 2 * P - 2 - s) : 0);
    return out > in ? out : in;
}

/* Whether value x is among vals[0..n). */
static bool among(const int *vals, int n, int x) {
    for (int i = 0; i < n; i++)
        if (vals[i] == x) return true;
    return false;
}

/* The bytes of values vals[0..n) with every f32 value at h bytes; under
 * --precision a half value that is a Cast of an f32 value also among them
 * (the policy's rounding, passes/precision.c) counts once, in the f32
 * one's bytes at h. */
static double at_precision(const pp_graph *g, const int *vals, int n, double h) {
    double b = 0;
    for (int i = 0; i < n; i++) {
        const pp_value *v = &g->values[vals[i]];
        if ((v->dtype == PP_F16 || v->dtype == PP_BF16) && h < 4 && v->producer >= 0) {
            const pp_node *c = &g->nodes[v->producer];
            if (c->op == PP_OP_CAST && c->n_in > 0 && g->values[c->in[0]].dtype == PP_F32 && among(vals, n, c->in[0]))
                continue;
        }
        b += v->dtype == PP_F32 ? (double)v->nbytes * h / 4 : (double)v->nbytes;
    }
    return b;
}

static double bound_at(const pp_graph *g, int s, double h) {
    return s >= 0 && s < g->n_stages - 1 ? at_precision(g, g->bounds[s].vals, g->bounds[s].n, h) : 0;
}

/* The device model's messages of device d (the comment at the top). */
static double cuda_msgs(const pp_graph *g, int d, double h) {
    const int P = g->train_devices, b = 2 * P - 1 - d;
    double msgs = 0;
    if (d > 0) msgs += 2 * (bound_at(g, d - 1, h) + bound_at(g, b, h)); /* forward in, gradient out */
    if (d < P - 1) msgs += 2 * (bound_at(g, d, h) + bound_at(g, b - 1, h)); /* forward out, gradient in */
    else msgs += bound_at(g, d, h);                                           /* its forward to its backward */
    if (d == 0) {
        const pp_boundary *own = g->local ? &g->local[0] : NULL;
        const double outs = (double)g->stage_info[b].send - (own ? (double)own->bytes : 0);
        msgs += 2 * ((double)g->stage_info[0].recv + (outs > 0 ? outs : 0));
    }
    return msgs;
}

static void host_memory(const pp_graph *g, const pp_compile_opts *o, int d, pp_train_mem *m) {
    const int P = g->train_devices, M = o->micro_batches > 0 ? o->micro_batches : 1, b = 2 * P - 1 - d;
    const double w = m->weights;
    m->master = w, m->working = w, m->grads = w, m->optim = pp_optim_buffers(&o->train.optim) * w;
    m->state = PP_TRAIN_WEIGHT_COPIES(&o->train.optim) * w;
    m->stash = stash_of(g, d);
    const double fwd = link_msg(g, d);
    double bwd = b < 2 * P - 1 ? 2 * link_msg(g, b) : 0;
    if (d == 0) bwd += (double)g->stage_info[b].send + (double)g->stage_info[0].recv; /* the ends */
    m->msgs_1f1b = (P + 1) * fwd + bwd;
    m->msgs_gpipe = (M + 1) * fwd + bwd;
}

static void cuda_memory(const pp_graph *g, const pp_compile_opts *o, int d, pp_train_mem *m) {
    const pp_train_opts *t = &o->train;
    const bool half = pp_train_dtype(t) != PP_F32;
    /* n: the weights that train (f32); the other constants (BatchNorm's
     * running statistics, shapes) are kept once, with the master weights */
    const double h = half ? 2 : 4, n = (double)g->stage_info[d].trained / 4, rest = m->weights - 4 * n;
    const int shards = t->zero && o->replicas > 1 ? o->replicas : 1;
    m->master = 4 * n / (half ? shards : 1) + (rest > 0 ? rest : 0);
    m->working = half ? h * n : 0;
    m->grads = h * n;
    m->optim = pp_optim_buffers(&t->optim) * 4 * n / shards;
    m->state = m->master + m->working + m->grads + m->optim;
    m->arenas *= h / 4;
    m->stash = g->stash ? at_precision(g, g->stash[d].vals, g->stash[d].n, h) : 0;
    m->workspace = PP_TRAIN_CUDA_WORKSPACE;
    m->msgs_1f1b = m->msgs_gpipe = cuda_msgs(g, d, h);
}

/* zb-h1: the arena of stage s's B part (w false) or W part (w true): up to the highest activation its nodes
 * make, as backend/lower.c sizes each part's */
static double part_arena(const pp_graph *g, int s, bool w) {
    size_t end = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->stage != s || n->wpass != w) continue;
        for (int k = 0; k < n->n_out; k++) {
            const pp_value *v = n->out[k] >= 0 ? &g->values[n->out[k]] : NULL;
            if (!v || v->arena_off < 0) continue;
            const size_t e = (size_t)v->arena_off + pp_align_up(v->nbytes, 64);
            if (e > end) end = e;
        }
    }
    return (double)end;
}

/* zb-h1: what device d's W stage adds (the comment at the top): B's and W's arenas in place of the whole backward
 * stage's, what B keeps for W in B's outgoing buffers and as W's incoming message; its entries are counted with
 * the stash (pp_train_memory). h: the bytes of an f32 value (the cuda model's precision). */
static void w_memory(const pp_graph *g, int d, double h, pp_train_mem *m) {
    const int P = g->train_devices, b = 2 * P - 1 - d;
    const double scale = h / 4;
    m->wkeep = h < 4 ? at_precision(g, g->wkeep[d].vals, g->wkeep[d].n, h) : (double)g->wkeep[d].bytes;
    m->arenas += (part_arena(g, b, false) + part_arena(g, b, true) - (double)g->stage_info[b].arena) * scale;
    /* W's incoming message; the tail of B's outgoing buffers (the sink's one, a backward link's two). W's
     * outgoing message (the weights' gradients) is the part of B's that an unsplit plan sends: counted there */
    const double msgs = m->wkeep + (d == 0 ? 1 : 2) * m->wkeep;
    m->msgs_1f1b += msgs, m->msgs_gpipe += msgs;
}

void pp_train_memory(const pp_graph *g, const pp_compile_opts *o, int d, pp_train_mem *m) {
    const int P = g->train_devices, M = o->micro_batches > 0 ? o->micro_batches : 1, b = 2 * P - 1 - d;
    memset(m, 0, sizeof *m);
    m->weights = (double)g->stage_info[d].params;
    m->arenas = (double)(g->stage_info[d].arena + g->stage_info[b].arena);
    m->keep_1f1b = P - d < M ? P - d : M;
    const bool cuda = o->train.memory_model == PP_TRAIN_MEM_CUDA;
    if (cuda) cuda_memory(g, o, d, m);
    else host_memory(g, o, d, m);
    if (g->train_split_w && g->wkeep) w_memory(g, d, cuda && pp_train_dtype(&o->train) != PP_F32 ? 2 : 4, m);
    const double base = m->state + m->arenas + m->workspace;
    const double kept = m->wkeep > m->stash ? m->wkeep : m->stash;
    m->total_1f1b = base + m->keep_1f1b * kept + m->msgs_1f1b;
    m->total_gpipe = base + M * m->stash + m->wkeep + m->msgs_gpipe;
    m->est_ms = g->stage_info[d].est_ms + g->stage_info[b].est_ms;
}

void pp_train_memory_describe(const pp_compile_opts *o, char *buf, size_t n) {
    const pp_train_opts *t = &o->train;
    const int nb = pp_optim_buffers(&t->optim);
    if (t->memory_model != PP_TRAIN_MEM_CUDA) {
        snprintf(buf, n, "%d x the weights (the plan's, the trainer's, gradients, %d optimizer buffer%s), the two "
                 "stages' arenas, the stash kept and the messages", 3 + nb, nb, nb == 1 ? "" : "s");
        return;
    }
    const bool half = pp_train_dtype(t) != PP_F32;
    const char *p = pp_precision_name(t->optim.precision);
    char z[64] = "";
    if (t->zero && o->search) snprintf(z, sizeof z, " / each row's dp (ZeRO-1)");
    else if (t->zero) snprintf(z, sizeof z, " / %d replica%s (ZeRO-1)", o->replicas, o->replicas == 1 ? "" : "s");
    snprintf(buf, n, "cuda model at %s: f32 master weights%s%s, %s gradients, %d f32 optimizer buffer%s%s, the two "
             "stages' arenas, the stash kept and the messages both ways at %s, %.1f MB of workspace; %.1f MB "
             "reserved", p, half && t->zero ? z : "", half ? (pp_train_dtype(t) == PP_F16 ? " and an fp16 working copy" :
             " and a bf16 working copy") : "", p, nb, nb == 1 ? "" : "s", t->zero ? z : "", p,
             PP_TRAIN_CUDA_WORKSPACE / 1e6, (double)o->reserve / 1e6);
}

pp_dtype pp_train_dtype(const pp_train_opts *t) {
    return t->optim.precision == PP_PREC_BF16 ? PP_BF16 : t->optim.precision == PP_PREC_FP16 ? PP_F16 : PP_F32;
}

pp_status pp_train_memory_opts(pp_compile_opts *o, pp_err *err) {
    const pp_train_opts *t = &o->train;
    if (!o->train_on && (t->memory_model || t->zero))
        return PP_FAIL(err, PP_EINVAL, "--%s is an option of --train", t->memory_model ? "memory-model" : "zero");
    if (t->zero && t->memory_model != PP_TRAIN_MEM_CUDA)
        return PP_FAIL(err, PP_EINVAL, "--zero 1 is a figure of the device memory model: give --memory-model cuda "
                       "(pprt's replicas each keep the whole optimizer state)");
    if (t->memory_model == PP_TRAIN_MEM_CUDA && !o->reserve_set) o->reserve = PP_TRAIN_CUDA_RESERVE;
    return PP_OK;
}

double pp_train_update_s(double bytes, int M, const pp_optim *opt, const pp_target *t) {
    const double touches = 3.0 + (3.0 + 2.0 * pp_optim_buffers(opt)) / (M > 0 ? M : 1);
    return t->mem_gbps > 0 ? bytes * touches / (t->mem_gbps * 1e9) : 0;
}
