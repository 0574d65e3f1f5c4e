/* train_memory.c: what each device of a training plan holds under pprt.
 *
 * Device d of a training plan (passes/partition_train.c) runs stages d and
 * 2P-1-d. Its memory, estimated from what pprt holds (runtime/train.c,
 * sched.c, stash.c):
 *   the weights: the plan's copy, and the trainer's weights, averaged
 *   gradients and two optimizer buffers (momentum, or AdamW's moments;
 *   kept whatever the optimizer), 5 x the weight bytes;
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
 * `--search` hold them against the caps. */
#include "passes.h"

static double stash_of(const pp_graph *g, int d) { return g->stash ? (double)g->stash[d].bytes : 0; }

static double link_msg(const pp_graph *g, int s) { /* stage s -> s+1's buffer */
    const int P = g->train_devices;
    double out = (double)g->stage_info[s].send + (s < P ? stash_of(g, s) : 0);
    double in = (double)g->stage_info[s + 1].recv + (s + 1 >= P ? stash_of(g, 2 * P - 2 - s) : 0);
    return out > in ? out : in;
}

void pp_train_memory(const pp_graph *g, const pp_compile_opts *o, int d, pp_train_mem *m) {
    const int P = g->train_devices, M = o->micro_batches > 0 ? o->micro_batches : 1, b = 2 * P - 1 - d;
    m->weights = (double)g->stage_info[d].params;
    m->arenas = (double)(g->stage_info[d].arena + g->stage_info[b].arena);
    m->stash = stash_of(g, d);
    m->keep_1f1b = P - d < M ? P - d : M;
    const double fwd = link_msg(g, d);
    double bwd = b < 2 * P - 1 ? 2 * link_msg(g, b) : 0;
    if (d == 0) bwd += (double)g->stage_info[b].send + (double)g->stage_info[0].recv; /* the ends */
    m->msgs_1f1b = (P + 1) * fwd + bwd;
    m->msgs_gpipe = (M + 1) * fwd + bwd;
    const double base = PP_TRAIN_WEIGHT_COPIES * m->weights + m->arenas;
    m->total_1f1b = base + m->keep_1f1b * m->stash + m->msgs_1f1b;
    m->total_gpipe = base + M * m->stash + m->msgs_gpipe;
    m->est_ms = g->stage_info[d].est_ms + g->stage_info[b].est_ms;
}

double pp_train_update_s(double bytes, int M, const pp_target *t) {
    const double touches = 3.0 + 7.0 / (M > 0 ? M : 1);
    return t->mem_gbps > 0 ? bytes * touches / (t->mem_gbps * 1e9) : 0;
}
