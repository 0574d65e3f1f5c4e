/* microbatch.c: filling and draining boundary messages, and run statistics,
 * shared by the threaded and the MPI drivers (see microbatch.h). */
#include <stdlib.h>
#include <string.h>

#include "microbatch.h"

int64_t pprt_mb_size(const pprt_plan *p) { return p->batch > 0 ? p->batch : 1; }

int64_t pprt_mb_count(const pprt_plan *p, int64_t n) {
    int64_t b = pprt_mb_size(p);
    return n > 0 ? (n + b - 1) / b : 0;
}

/* Samples of micro-batch mb that exist among n. */
static int64_t mb_have(int64_t b, int64_t n, int64_t mb) {
    int64_t left = n - mb * b;
    return left < 0 ? 0 : left < b ? left : b;
}

void pprt_mb_fill(const pprt_plan *p, const pprt_array *inputs, int64_t n, int64_t mb, void *msg) {
    const pprt_stage *st = &p->stages[0];
    int64_t b = pprt_mb_size(p), have = mb_have(b, n, mb);
    for (int i = 0; i < p->n_inputs; i++) {
        size_t sb = p->inputs[i].sample_bytes;
        unsigned char *dst = (unsigned char *)msg + st->in.off[i];
        if (have > 0)
            memcpy(dst, (const unsigned char *)inputs[i].data + (size_t)(mb * b) * sb, (size_t)have * sb);
        if (have < b) memset(dst + (size_t)have * sb, 0, (size_t)(b - have) * sb);
    }
}

void pprt_mb_drain_stage(const pprt_plan *p, int s, bool local, const void *msg, int64_t n, int64_t mb,
                         const pprt_array *outputs) {
    const pprt_stage *st = &p->stages[s];
    int64_t b = pprt_mb_size(p), have = mb_have(b, n, mb);
    for (int i = 0; i < p->n_outputs && have > 0; i++) {
        const pprt_io *o = &p->outputs[i];
        if (o->stage != s || (o->slot >= pprt_local_first(st)) != local) continue;
        size_t sb = o->sample_bytes;
        memcpy((unsigned char *)outputs[i].data + (size_t)(mb * b) * sb,
               (const unsigned char *)msg + st->out.off[o->slot], (size_t)have * sb);
    }
}

void pprt_mb_drain(const pprt_plan *p, const void *msg, int64_t n, int64_t mb, const pprt_array *outputs) {
    pprt_mb_drain_stage(p, p->n_stages - 1, false, msg, n, mb, outputs);
}

int64_t pprt_nearest_rank(int64_t m, int pct) {
    /* ceil(pct * m / 100) in integers: no rounding at exact ranks */
    const int64_t r = (m * pct + 99) / 100;
    return r < 1 ? 1 : r > m ? m : r;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

pp_status pprt_stats_fill(pprt_stats *st, int64_t n, int64_t m, int64_t batch, double wall_s, int stages,
                          int replicas, const double *busy, const double *t_start, const double *t_end,
                          pp_err *err) {
    st->samples = n;
    st->micro_batches = m;
    st->replicas = replicas;
    st->wall_s = wall_s;
    st->samples_per_s = wall_s > 0 ? (double)n / wall_s : 0;
    st->n_stages = stages;
    st->stages = calloc(pp_count(stages), sizeof *st->stages);
    if (!st->stages) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    double total = 0, lanes = (double)replicas * wall_s;
    for (int i = 0; i < stages; i++) {
        total += busy[i];
        st->stages[i].busy_s = busy[i];
        st->stages[i].utilization = lanes > 0 ? busy[i] / lanes : 0;
    }
    st->bubble = lanes > 0 ? 1.0 - total / ((double)stages * lanes) : 0;
    st->latency_mean_ms = st->latency_median_ms = st->latency_p90_ms = st->latency_p95_ms = st->latency_p99_ms = 0;
    st->steady_samples_per_s = 0;
    st->latency_ms = NULL;
    if (m < 1) return PP_OK;
    /* steady state: the samples finished after the first micro-batch out,
     * over the time from its end to the last one's (no fill, no drain) */
    int64_t first = 0, last = 0;
    for (int64_t i = 1; i < m; i++) {
        if (t_end[i] < t_end[first]) first = i;
        if (t_end[i] > t_end[last]) last = i;
    }
    const int64_t in_first = mb_have(batch > 0 ? batch : 1, n, first);
    if (m >= 2 && t_end[last] > t_end[first])
        st->steady_samples_per_s = (double)(n - in_first) / (t_end[last] - t_end[first]);
    /* per micro-batch, in micro-batch order (kept: the trace lists them) */
    double *lat = malloc((size_t)m * sizeof *lat), *sorted = malloc((size_t)m * sizeof *sorted);
    if (!lat || !sorted) {
        free(lat), free(sorted);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    double sum = 0;
    for (int64_t i = 0; i < m; i++) sum += sorted[i] = lat[i] = 1e3 * (t_end[i] - t_start[i]);
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
    st->latency_mean_ms = sum / (double)m;
    st->latency_median_ms = sorted[pprt_nearest_rank(m, 50) - 1];
    st->latency_p90_ms = sorted[pprt_nearest_rank(m, 90) - 1];
    st->latency_p95_ms = sorted[pprt_nearest_rank(m, 95) - 1];
    st->latency_p99_ms = sorted[pprt_nearest_rank(m, 99) - 1];
    st->latency_ms = lat;
    free(sorted);
    return PP_OK;
}
