/* chan_queue.c: the in-process channel: a bounded ring of (message, tag)
 * pairs under a mutex, with one condition variable per direction. */
#include <pthread.h>
#include <stdlib.h>

#include "chan.h"

typedef struct {
    pprt_chan base;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    int cap, head, count;
    bool closed;
    void **msg;
    int64_t *tag;
} queue;

static pp_status q_send(pprt_chan *c, void *msg, int64_t tag, pp_err *err) {
    queue *q = (queue *)c;
    pthread_mutex_lock(&q->mu);
    while (q->count == q->cap && !q->closed) pthread_cond_wait(&q->not_full, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return PP_FAIL(err, PP_ERUNTIME, "channel closed (pipeline stopped)");
    }
    int slot = (q->head + q->count) % q->cap;
    q->msg[slot] = msg;
    q->tag[slot] = tag;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return PP_OK;
}

static pp_status q_recv(pprt_chan *c, void **msg, int64_t *tag, pp_err *err) {
    queue *q = (queue *)c;
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed) pthread_cond_wait(&q->not_empty, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return PP_FAIL(err, PP_ERUNTIME, "channel closed (pipeline stopped)");
    }
    *msg = q->msg[q->head];
    *tag = q->tag[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return PP_OK;
}

static void q_close(pprt_chan *c) {
    queue *q = (queue *)c;
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

static void q_destroy(pprt_chan *c) {
    queue *q = (queue *)c;
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->msg);
    free(q->tag);
    free(q);
}

static const pprt_chan_ops queue_ops = {q_send, q_recv, q_close, q_destroy};

pp_status pprt_queue_create(int capacity, pprt_chan **out, pp_err *err) {
    *out = NULL;
    if (capacity < 1) return PP_FAIL(err, PP_EINVAL, "queue capacity must be >= 1, got %d", capacity);
    queue *q = calloc(1, sizeof *q);
    if (!q) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    q->msg = calloc((size_t)capacity, sizeof *q->msg);
    q->tag = calloc((size_t)capacity, sizeof *q->tag);
    if (!q->msg || !q->tag) {
        free(q->msg);
        free(q->tag);
        free(q);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    q->base.ops = &queue_ops;
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    *out = &q->base;
    return PP_OK;
}
