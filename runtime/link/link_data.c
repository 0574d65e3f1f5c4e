/* link_data.c: the two ends of a pipeline as links (link.h). The source
 * cuts micro-batches out of the input arrays into stage 0's incoming
 * message; the sink copies the last stage's outgoing message into the
 * output arrays. Each owns the one buffer it lends: host memory, pinned by
 * the device space of the stage it serves when that stage is on a device
 * (link_stage.c then copies between it and the device). Where the last
 * stage's message is exactly one output's samples (one output, at offset 0,
 * nothing else) and the stage is on the host, the sink lends each whole
 * micro-batch's place in the output array instead of its buffer: the stage
 * writes the output there and nothing is copied (the kernels' threads, not
 * one memcpy, then first touch those fresh pages: a third of LR-ASPP's -pp 1
 * time on 2 cores went to that copy). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "../microbatch.h"
#include "link.h"

typedef struct {
    pprt_link base;
    const pprt_plan *p;
    const pprt_array *arrays;
    int64_t n, next; /* samples; the next tag (source) */
    int warmup;
    double *times;   /* per micro-batch past the warm-up, or NULL */
    void (*done)(void *ctx, int64_t count);
    void *done_ctx;
    int64_t count;
    void *buf;
    const pprt_mem_ops *pin; /* the space whose pinned memory buf is, or NULL */
    atomic_bool closed; /* close may come from another thread (a pump's failure, the stop) */
    bool lent;
    bool direct;      /* sink: lend places in the output array (see the top) */
    int64_t acquired; /* sink: buffers lent so far (the stage runs micro-batches in order) */
    void *lent_buf;   /* sink: what was lent */
    const pprt_output_hook *take; /* sink: outputs handed over instead of written (pprt_link_sink_take) */
    int64_t mb0;      /* sink: the run's index of this share's first micro-batch */
} data_link;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pp_status closed_or_busy(const data_link *d, pp_err *err) {
    if (atomic_load(&d->closed)) return PP_FAIL(err, PP_ERUNTIME, "link closed (pipeline stopped)");
    return PP_FAIL(err, PP_ERUNTIME, "internal: the pipeline's end has one buffer, and it is lent out");
}

static pp_status wrong_side(pp_err *err) {
    return PP_FAIL(err, PP_ERUNTIME, "internal: a pipeline's end is used from the wrong side");
}

static pp_status src_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    data_link *d = (data_link *)l;
    if (atomic_load(&d->closed) || d->lent) return closed_or_busy(d, err);
    const int64_t k = d->next++, mb = k < d->warmup ? 0 : k - d->warmup;
    if (d->times && k >= d->warmup) d->times[mb] = now();
    pprt_mb_fill(d->p, d->arrays, d->n, mb, d->buf);
    d->lent = true;
    *buf = d->buf;
    *tag = k;
    return PP_OK;
}

static pp_status src_release(pprt_link *l, void *buf, pp_err *err) {
    data_link *d = (data_link *)l;
    if (buf != d->buf) return wrong_side(err);
    d->lent = false;
    return PP_OK;
}

/* Where micro-batch k's message goes: its place in the output array where
 * lending it is allowed (not a warm-up copy, a whole micro-batch, 64-byte
 * aligned), else the sink's buffer. */
static void *sink_place(const data_link *d, int64_t k) {
    if (!d->direct || k < d->warmup) return d->buf;
    const int64_t b = pprt_mb_size(d->p), mb = k - d->warmup;
    if ((mb + 1) * b > d->n) return d->buf;
    unsigned char *at = (unsigned char *)d->arrays[0].data + (size_t)(mb * b) * d->p->outputs[0].sample_bytes;
    return (uintptr_t)at % 64 ? d->buf : at;
}

static pp_status sink_acquire(pprt_link *l, void **buf, pp_err *err) {
    data_link *d = (data_link *)l;
    if (atomic_load(&d->closed) || d->lent) return closed_or_busy(d, err);
    d->lent = true;
    *buf = d->lent_buf = sink_place(d, d->acquired++);
    return PP_OK;
}

static pp_status sink_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    data_link *d = (data_link *)l;
    if (buf != d->lent_buf) return wrong_side(err);
    if (buf != sink_place(d, tag))
        return PP_FAIL(err, PP_ERUNTIME, "internal: micro-batch %lld reached the sink out of order", (long long)tag);
    d->lent = false;
    if (tag < d->warmup) return PP_OK; /* a warm-up copy: dropped */
    const int64_t mb = tag - d->warmup;
    if (d->take) PP_TRY(d->take->take(d->take->ctx, d->mb0 + mb, buf, err));
    else if (buf == d->buf) pprt_mb_drain(d->p, buf, d->n, mb, d->arrays); /* else written in place */
    if (d->times) d->times[mb] = now();
    d->count++;
    if (d->done) d->done(d->done_ctx, d->count);
    return PP_OK;
}

static pp_status no_acquire(pprt_link *l, void **buf, pp_err *err) { return (void)l, (void)buf, wrong_side(err); }
static pp_status no_submit(pprt_link *l, void *buf, int64_t tag, pp_err *err) {
    return (void)l, (void)buf, (void)tag, wrong_side(err);
}
static pp_status no_receive(pprt_link *l, void **buf, int64_t *tag, pp_err *err) {
    return (void)l, (void)buf, (void)tag, wrong_side(err);
}
static pp_status no_release(pprt_link *l, void *buf, pp_err *err) { return (void)l, (void)buf, wrong_side(err); }

static void data_close(pprt_link *l) { atomic_store(&((data_link *)l)->closed, true); }

static void data_destroy(pprt_link *l) {
    data_link *d = (data_link *)l;
    if (!d) return;
    if (d->pin) d->pin->free_pinned(d->buf);
    else free(d->buf);
    free(d);
}

static const pprt_link_ops source_ops = {no_acquire, no_submit, src_receive, src_release, NULL, data_close,
                                         data_destroy};
static const pprt_link_ops sink_ops = {sink_acquire, sink_submit, no_receive, no_release, NULL, data_close,
                                       data_destroy};

static pp_status data_new(const pprt_link_ops *ops, const pprt_plan *p, const pprt_array *arrays, int64_t n,
                          int warmup, double *times, size_t bytes, const pprt_mem_ops *pin, pprt_link **out,
                          pp_err *err) {
    *out = NULL;
    data_link *d = calloc(1, sizeof *d);
    if (!d) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (pin) {
        pp_status s = pin->alloc_pinned(bytes, &d->buf, err);
        if (s != PP_OK) {
            free(d);
            return s;
        }
    } else if (posix_memalign(&d->buf, 64, bytes ? bytes : 64) != 0) {
        free(d);
        return PP_FAIL(err, PP_ENOMEM, "cannot allocate a %zu-byte message", bytes);
    }
    d->pin = pin;
    d->base = (pprt_link){ops, pprt_place_host(), pprt_place_host(), bytes, 1, false, NULL};
    d->p = p;
    d->arrays = arrays;
    d->n = n;
    d->warmup = warmup;
    d->times = times;
    *out = &d->base;
    return PP_OK;
}

pp_status pprt_link_source(const pprt_plan *p, const pprt_array *inputs, int64_t n, int warmup, double *t_start,
                           const pprt_mem_ops *pin, pprt_link **out, pp_err *err) {
    PP_TRY(data_new(&source_ops, p, inputs, n, warmup, t_start, p->stages[0].in.bytes, pin, out, err));
    (*out)->fills = true;
    return PP_OK;
}

pp_status pprt_link_sink(const pprt_plan *p, const pprt_array *outputs, int64_t n, int warmup, double *t_end,
                         void (*done)(void *ctx, int64_t count), void *done_ctx, const pprt_mem_ops *pin,
                         pprt_link **out, pp_err *err) {
    PP_TRY(data_new(&sink_ops, p, outputs, n, warmup, t_end, p->stages[p->n_stages - 1].out.bytes, pin, out, err));
    data_link *d = (data_link *)*out;
    d->done = done;
    d->done_ctx = done_ctx;
    const pprt_msg_layout *m = &p->stages[p->n_stages - 1].out;
    d->direct = !pin && p->n_outputs == 1 && m->n == 1 && m->off[0] == 0 && p->outputs[0].stage == p->n_stages - 1 &&
                m->bytes == (size_t)pprt_mb_size(p) * p->outputs[0].sample_bytes;
    return PP_OK;
}

void pprt_link_sink_take(pprt_link *sink, const pprt_output_hook *take, int64_t mb0) {
    data_link *d = (data_link *)sink;
    d->take = take, d->mb0 = mb0, d->direct = false;
}
