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

pp_status pprt_trace_write(const char *path, const pprt_plan *p, const pprt_trace *t, pp_err *err) {
    pp_outfile out;
    PP_TRY(pp_outfile_open(&out, path, err));
    FILE *f = out.f;
#define US(x) (1e6 * ((x) - t->t0))
    fprintf(f, "{\"displayTimeUnit\": \"ms\",\n \"otherData\": {\"producer\": \"pprt %s\", \"stages\": %d, "
               "\"replicas\": %d, \"micro_batch\": %lld, \"wall_s\": %.6f, \"bubble\": %.6f",
            PPRT_VERSION, p->n_stages, t->replicas, (long long)p->batch, t->wall_s, t->bubble);
    /* the latencies pprt's percentiles are taken over (--stats-json), so anyone can check them */
    if (t->latency_ms) {
        fprintf(f, ",\n  \"latency_ms\": [");
        for (int64_t j = 0; j < t->n_latency; j++) fprintf(f, "%s%.6f", j ? ", " : "", t->latency_ms[j]);
        fprintf(f, "]");
    }
    fprintf(f, "},\n \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"pprt\"}}");
    for (int i = 0; i < t->n_tracks; i++) {
        const pprt_trace_track *k = &t->tracks[i];
        char name[96];
        /* "[rank R: ]stage S[, replica K]" (a rank under mpirun; replicas when there are several) */
        int len = k->rank < 0 ? 0 : snprintf(name, sizeof name, "rank %d: ", k->rank);
        len += snprintf(name + len, sizeof name - (size_t)len, "stage %d", k->stage);
        if (t->replicas > 1) snprintf(name + len, sizeof name - (size_t)len, ", replica %d", k->replica);
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                i + 1, name);
        fprintf(f, ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": "
                   "{\"sort_index\": %d}}", i + 1, i);
    }
    for (int i = 0; i < t->n_tracks; i++) {
        const pprt_trace_track *k = &t->tracks[i];
        const pprt_stage *st = &p->stages[k->stage];
        for (int64_t j = 0; j < k->n; j++) {
            const double *r = k->t + (size_t)j * PPRT_TRACE_T;
            int64_t mb = k->mb0 + j;
            fprintf(f, ",\n{\"name\": \"micro-batch %lld\", \"cat\": \"micro-batch\", \"ph\": \"X\", \"pid\": 1, "
                       "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"micro_batch\": %lld, \"stage\": %d, "
                       "\"waited_us\": %.3f}}",
                    (long long)mb, i + 1, US(r[1]), 1e6 * (r[3] - r[1]), (long long)mb, k->stage, 1e6 * (r[1] - r[0]));
            if (j < k->n_node_mb) {
                double at = r[2];
                const double *ns = k->node_s + (size_t)j * (size_t)k->n_nodes;
                for (int q = 0; q < k->n_nodes && q < st->n_nodes; q++) {
                    if (ns[q] <= 0) continue; /* absorbed into another node's kernel */
                    double d = fmin(ns[q], r[3] - at); /* inside its micro-batch, whatever the rounding */
                    if (d <= 0) break;
                    fprintf(f, ",\n{\"name\": ");
                    pp_json_str(f, st->nodes[q].name);
                    fprintf(f, ", \"cat\": \"node\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": "
                               "%.3f, \"args\": {\"op\": \"%s\"}}",
                            i + 1, US(at), 1e6 * d, pp_op_table[st->nodes[q].op].name);
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
            fprintf(f, ",\n{\"name\": \"boundary %d->%d\", \"cat\": \"message\", \"ph\": \"s\", \"id\": %lld, "
                       "\"pid\": 1, \"tid\": %d, \"ts\": %.3f}",
                    k->stage, k->stage + 1, id, i + 1, US(r[3] - back));
            fprintf(f, ",\n{\"name\": \"boundary %d->%d\", \"cat\": \"message\", \"ph\": \"f\", \"id\": %lld, "
                       "\"pid\": 1, \"tid\": %d, \"ts\": %.3f}",
                    k->stage, k->stage + 1, id, nx + 1, US(fmax(rr[0], r[3])));
        }
    }
    fprintf(f, "\n]}\n");
#undef US
    return pp_outfile_commit(&out, !ferror(f), err);
}
