/* trace.c: the pipeline's timeline as Chrome trace event JSON (pprt --trace
 * FILE), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * The drivers (sched.c, comm/sched_mpi.c) record into pprt_trace_track
 * arrays allocated before the run; this file only frees and writes them,
 * after the run. The JSON, in the documented "JSON Object Format":
 *   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
 * with one process (pid 1) and one thread per track (tid = track + 1,
 * named by metadata events "thread_name", ordered by "thread_sort_index"):
 *   - a complete event ("ph": "X") per micro-batch on each track, from when
 *     the stage started it to when it finished; the gaps between them are
 *     the stage waiting (the bubble: fill, drain, imbalance);
 *   - with node times, a complete event per node nested in it, laid end to
 *     end from when the stage's kernels started, each as long as the
 *     executor measured (what it does between nodes shows as the span's
 *     remainder);
 *   - a flow ("ph": "s" on the sending track, "f" on the receiving one,
 *     bound to the next span there) per micro-batch and boundary.
 * Timestamps are microseconds from the run's start. otherData carries the
 * run's figures, among them "latency_ms": each timed micro-batch's latency
 * in micro-batch order, the values --stats-json's percentiles are taken of. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/json.h"
#include "pprt.h"

int64_t pprt_trace_node_mbs(int n_nodes, int64_t n) {
    if (n_nodes < 1) return 0;
    int64_t cap = PPRT_TRACE_NODE_CAP / n_nodes;
    return n < cap ? n : cap;
}

void pprt_trace_free(pprt_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->n_tracks; i++) {
        free(t->tracks[i].t);
        free(t->tracks[i].node_s);
    }
    free(t->tracks);
    free(t);
}

/* the track of (stage, replica), or -1 */
static int track_of(const pprt_trace *t, int stage, int replica) {
    for (int i = 0; i < t->n_tracks; i++)
        if (t->tracks[i].stage == stage && t->tracks[i].replica == replica) return i;
    return -1;
}

/* An event of pid 1: {"name", ["cat",] "ph", ["id" when id >= 0,] "pid", "tid"} (the caller adds the
 * rest: "ts", "dur", "args"); the name is not copied (it outlives the event). NULL when out of memory. */
static cJSON *event(pp_json *j, const char *name, const char *cat, const char *ph, long long id, int tid) {
    cJSON *e = pp_json_begin(j);
    if (e) {
        /* referenced, not copied: most events name a node of the plan */
        cJSON *n = cJSON_CreateStringReference(name);
        if (!n || !cJSON_AddItemToObjectCS(e, "name", n)) {
            cJSON_Delete(n);
            j->oom = true;
        }
    }
    if (cat) pp_json_add_string(j, e, "cat", cat);
    pp_json_add_string(j, e, "ph", ph);
    if (id >= 0) pp_json_add_number(j, e, "id", (double)id);
    pp_json_add_number(j, e, "pid", 1);
    pp_json_add_number(j, e, "tid", tid);
    return e;
}

pp_status pprt_trace_write(const char *path, const pprt_plan *p, const pprt_trace *t, pp_err *err) {
#define US(x) (1e6 * ((x) - t->t0))
    /* the head, its last member the array the events are streamed into: a run keeps up to
     * PPRT_TRACE_NODE_CAP node spans per stage, too many to hold as one tree */
    pp_json h;
    cJSON *root = pp_json_begin(&h);
    pp_json_add_string(&h, root, "displayTimeUnit", "ms");
    cJSON *other = pp_json_add_object(&h, root, "otherData");
    char producer[64];
    snprintf(producer, sizeof producer, "pprt %s", PPRT_VERSION);
    pp_json_add_string(&h, other, "producer", producer);
    pp_json_add_number(&h, other, "stages", p->n_stages);
    pp_json_add_number(&h, other, "replicas", t->replicas);
    pp_json_add_number(&h, other, "micro_batch", (double)p->batch);
    pp_json_add_round(&h, other, "wall_s", t->wall_s, 6);
    pp_json_add_round(&h, other, "bubble", t->bubble, 6);
    /* the latencies pprt's percentiles are taken over (--stats-json), so anyone can check them */
    if (t->latency_ms) {
        cJSON *lat = pp_json_add_array(&h, other, "latency_ms");
        for (int64_t j = 0; j < t->n_latency; j++) pp_json_add_round(&h, lat, NULL, t->latency_ms[j], 6);
    }
    pp_json_add_array(&h, root, "traceEvents");
    pp_json_stream s;
    PP_TRY(pp_json_stream_open(&s, path, &h, err));
    pp_json e;
    cJSON *a = event(&e, "process_name", NULL, "M", -1, 0);
    pp_json_add_string(&e, pp_json_add_object(&e, a, "args"), "name", "pprt");
    pp_json_stream_add(&s, &e);
    char names[2][96];
    for (int i = 0; i < t->n_tracks; i++) {
        const pprt_trace_track *k = &t->tracks[i];
        char *name = names[0];
        /* "[rank R: ]stage S[, replica K]" (a rank under mpirun; replicas when there are several) */
        int len = k->rank < 0 ? 0 : snprintf(name, sizeof names[0], "rank %d: ", k->rank);
        len += snprintf(name + len, sizeof names[0] - (size_t)len, "stage %d", k->stage);
        if (t->replicas > 1) snprintf(name + len, sizeof names[0] - (size_t)len, ", replica %d", k->replica);
        a = event(&e, "thread_name", NULL, "M", -1, i + 1);
        pp_json_add_string(&e, pp_json_add_object(&e, a, "args"), "name", name);
        pp_json_stream_add(&s, &e);
        a = event(&e, "thread_sort_index", NULL, "M", -1, i + 1);
        pp_json_add_number(&e, pp_json_add_object(&e, a, "args"), "sort_index", i);
        pp_json_stream_add(&s, &e);
    }
    for (int i = 0; i < t->n_tracks; i++) {
        const pprt_trace_track *k = &t->tracks[i];
        const pprt_stage *st = &p->stages[k->stage];
        for (int64_t j = 0; j < k->n; j++) {
            const double *r = k->t + (size_t)j * PPRT_TRACE_T;
            int64_t mb = k->mb0 + j;
            snprintf(names[0], sizeof names[0], "micro-batch %lld", (long long)mb);
            a = event(&e, names[0], "micro-batch", "X", -1, i + 1);
            pp_json_add_round(&e, a, "ts", US(r[1]), 3);
            pp_json_add_round(&e, a, "dur", 1e6 * (r[3] - r[1]), 3);
            cJSON *args = pp_json_add_object(&e, a, "args");
            pp_json_add_number(&e, args, "micro_batch", (double)mb);
            pp_json_add_number(&e, args, "stage", k->stage);
            pp_json_add_round(&e, args, "waited_us", 1e6 * (r[1] - r[0]), 3);
            pp_json_stream_add(&s, &e);
            if (j < k->n_node_mb) {
                double at = r[2];
                const double *ns = k->node_s + (size_t)j * (size_t)k->n_nodes;
                for (int q = 0; q < k->n_nodes && q < st->n_nodes; q++) {
                    if (ns[q] <= 0) continue; /* absorbed into another node's kernel */
                    double d = fmin(ns[q], r[3] - at); /* inside its micro-batch, whatever the rounding */
                    if (d <= 0) break;
                    a = event(&e, st->nodes[q].name, "node", "X", -1, i + 1);
                    pp_json_add_round(&e, a, "ts", US(at), 3);
                    pp_json_add_round(&e, a, "dur", 1e6 * d, 3);
                    pp_json_add_string(&e, pp_json_add_object(&e, a, "args"), "op", pp_op_table[st->nodes[q].op].name);
                    pp_json_stream_add(&s, &e);
                    at += d;
                }
            }
            /* the message to the next stage: from the end of this span to the next span there */
            int nx = k->stage + 1 < p->n_stages ? track_of(t, k->stage + 1, k->replica) : -1;
            if (nx < 0) continue;
            const pprt_trace_track *K = &t->tracks[nx];
            int64_t jj = mb - K->mb0;
            if (jj < 0 || jj >= K->n) continue;
            const double *rr = K->t + (size_t)jj * PPRT_TRACE_T;
            long long id = (long long)(k->stage * 1000003LL + mb) * 64 + k->replica % 64;
            double dur = r[3] - r[1], back = fmin(0.5e-6, dur / 2);
            snprintf(names[1], sizeof names[1], "boundary %d->%d", k->stage, k->stage + 1);
            /* "s" on the sending track, "f" on the receiving one */
            for (int end = 0; end < 2; end++) {
                a = event(&e, names[1], "message", end ? "f" : "s", id, (end ? nx : i) + 1);
                pp_json_add_round(&e, a, "ts", end ? US(fmax(rr[0], r[3])) : US(r[3] - back), 3);
                pp_json_stream_add(&s, &e);
            }
        }
    }
#undef US
    return pp_json_stream_close(&s, true, err);
}
