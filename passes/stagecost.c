/* stagecost.c: what each stage of the chosen split costs, from the real
 * boundaries and memory plan: weights (each constant once per stage),
 * activation arena, boundary messages in and out, memory, FLOPs and an
 * estimated time per micro-batch. Memory caps are checked here on the real
 * figures (the partitioner worked with estimates). */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static size_t msg_bytes(const pp_graph *g, const int *vals, int n) {
    size_t b = 0;
    for (int i = 0; i < n; i++) b = pp_align_up(b, 64) + g->values[vals[i]].nbytes;
    return pp_align_up(b, 64);
}

/* A training plan: device d's weights updated, per micro-batch, in its
 * backward stage 2P-1-d (pp_train_update_s; the split priced them so).
 * seen: a scratch int per value. */
static void train_updates(pp_graph *g, const pp_compile_opts *o, int *seen) {
    const int P = g->train_devices;
    if (P <= 0 || g->n_stages != 2 * P) return;
    for (int v = 0; v < g->n_values; v++) seen[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        const int d = n->stage;
        if (d < 0 || d >= P) continue;
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v < 0 || !g->values[v].is_param || seen[v] == d) continue;
            seen[v] = d;
            g->stage_info[d].trained += g->values[v].nbytes;
            const pp_target t = pp_stage_target(o, 2 * P - 1 - d);
            g->stage_info[2 * P - 1 - d].est_ms +=
                1e3 * pp_train_update_s((double)g->values[v].nbytes, o->micro_batches, &o->train.optim, &t);
        }
    }
}

/* --memory-model cuda: a training plan's caps hold each device's 1F1B total
 * (passes/train_memory.c; a stage's own f32 figure is no bound of a device
 * at half precision). */
static pp_status device_caps(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    for (int d = 0; d < g->train_devices; d++) {
        const size_t cap = pp_stage_cap(o, d);
        pp_train_mem m;
        pp_train_memory(g, o, d, &m);
        if (!cap || m.total_1f1b <= (double)cap) continue;
        g->over_stage = d, g->over_need = m.total_1f1b, g->over_cap = (double)cap;
        return PP_FAIL(err, PP_EINVAL,
                       "training device %d needs %.1f MB under 1F1B (the weights' state %.1f, arenas %.1f, "
                       "%d x the stash of %.1f, messages %.1f, workspace %.1f) against its cap of %.1f MB: over by "
                       "%.1f MB", d, m.total_1f1b / 1e6, m.state / 1e6, m.arenas / 1e6, m.keep_1f1b, m.stash / 1e6,
                       m.msgs_1f1b / 1e6, m.workspace / 1e6, (double)cap / 1e6, (m.total_1f1b - (double)cap) / 1e6);
    }
    return PP_OK;
}

pp_status pp_stage_costs(pp_graph *g, const pp_compile_opts *o, pp_err *err) {
    int p = g->n_stages;
    free(g->stage_info);
    g->stage_info = calloc((size_t)p, sizeof *g->stage_info);
    int *seen = malloc(sizeof(int) * pp_count(g->n_values));
    if (!g->stage_info || !seen) {
        free(seen);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) seen[v] = -1;
    for (int s = 0; s < p; s++) g->stage_info[s].first = g->stage_info[s].last = -1; /* a stage may hold no node */
    g->act_total = 0;
    for (int v = 0; v < g->n_values; v++)
        if (!g->values[v].is_const && g->values[v].producer >= 0) g->act_total += g->values[v].nbytes;
    for (int i = 0; i < g->n_nodes; i++) {
        const pp_node *n = &g->nodes[i];
        pp_stage_info *si = &g->stage_info[n->stage];
        if (si->first < 0) si->first = i;
        si->last = i;
        si->ops++;
        si->flops += n->cost.flops;
        const pp_target t = pp_stage_target(o, n->stage);
        si->est_ms += 1e3 * pp_node_time(n, &t);
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || !g->values[v].is_const || seen[v] == n->stage) continue;
            seen[v] = n->stage;
            si->params += g->values[v].nbytes;
        }
    }
    train_updates(g, o, seen);
    for (int s = 0; s < p; s++) {
        pp_stage_info *si = &g->stage_info[s];
        si->arena = g->stage_arena[s];
        si->recv = s == 0 ? msg_bytes(g, g->inputs, g->n_inputs)
                          : msg_bytes(g, g->bounds[s - 1].vals, g->bounds[s - 1].n);
        si->send = s == p - 1 ? msg_bytes(g, g->outputs, g->n_outputs)
                              : msg_bytes(g, g->bounds[s].vals, g->bounds[s].n);
        /* a training plan: a backward stage's outgoing message ends in its
         * device's own gradients (g->local), which go nowhere; the last
         * stage's outputs are the others' less the other devices' gradients */
        const int P = g->train_devices;
        for (int d = 0; g->local && d < P; d++)
            if (s == 2 * P - 1 - d && s < p - 1) si->send += g->local[d].bytes;
            else if (s == p - 1 && d != 0) si->send -= g->local[d].bytes;
        const size_t local = g->local && s >= P ? g->local[2 * P - 1 - s].bytes : 0;
        si->memory = si->params + si->arena + (size_t)o->depth * (si->recv + si->send);
        if (s < p - 1) si->est_ms += 1e3 * (double)(si->send - local) / (pp_cut_link_gbps(o, p, s) * 1e9);
        si->place = pp_stage_place(o, s);
    }
    free(seen);
    if (g->train_devices && o->train.memory_model == PP_TRAIN_MEM_CUDA) return device_caps(g, o, err);
    for (int s = 0; s < p; s++) {
        size_t cap = pp_stage_cap(o, s);
        if (cap && g->stage_info[s].memory > cap) {
            g->over_stage = s;
            g->over_need = (double)g->stage_info[s].memory;
            g->over_cap = (double)cap;
            return PP_FAIL(err, PP_EINVAL,
                           "stage %d needs %.1f MB (weights %.1f, activations %.1f, boundary "
                           "buffers %.1f) against its cap of %.1f MB: over by %.1f MB",
                           s, g->stage_info[s].memory / 1e6, g->stage_info[s].params / 1e6,
                           g->stage_info[s].arena / 1e6,
                           (double)o->depth * (double)(g->stage_info[s].recv + g->stage_info[s].send) / 1e6,
                           cap / 1e6, (g->stage_info[s].memory - cap) / 1e6);
        }
    }
    return PP_OK;
}
