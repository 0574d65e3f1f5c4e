/* engine.c: the one thread per process that talks MPI (see engine.h).
 *
 * Its loop, with the mutex held except while it sleeps: post the queued
 * requests, MPI_Test the posted ones, receive control messages (heartbeats,
 * aborts, the set-up and final messages), send heartbeats, and check that
 * every other rank was heard from within the timeout. It sleeps on a
 * condition variable between rounds: briefly while a thread waits on it,
 * a little longer while transfers are in flight (so they progress while the
 * stage computes), longer still when idle.
 *
 * Ending on a failure: the rank that fails prints its error, sends an abort
 * message to every other rank and waits (at most 3 s, or the timeout if
 * shorter) for their acknowledgements; a rank that receives an abort prints
 * what stopped it, acknowledges, and exits with the same code. Exits go
 * through _exit from this thread: the stage thread may be inside a kernel. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

enum { ENGINE_RUN, ENGINE_ABORT, ENGINE_EXIT };
enum { REQ_SEND, REQ_RECV, REQ_BARRIER };

#define PIECE ((size_t)1 << 30) /* bytes per MPI call: counts are ints */

struct pprt_mpi_req {
    pprt_mpi_req *next;
    int kind, peer, tag;
    bool detached, done;
    unsigned char *buf;
    size_t bytes;
    int n_parts, n_done;
    MPI_Request *parts;
    MPI_Request part0;
    pprt_ctrl ctrl; /* the body of a control message */
    char what[200];
};

double pprt_mpi_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pprt_mpi_describe(const pprt_mpi *m, int rank, char *buf, size_t n) {
    if (m->stages <= 0) snprintf(buf, n, "rank %d", rank);
    else if (m->replicas <= 1) snprintf(buf, n, "rank %d (stage %d)", rank, rank % m->stages);
    else snprintf(buf, n, "rank %d (stage %d, replica %d)", rank, rank % m->stages, rank / m->stages);
}

/* One line on stderr, prefixed with this rank. */
static void say(const pprt_mpi *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const pprt_mpi *m, const char *fmt, ...) {
    char me[64], line[1024];
    pprt_mpi_describe(m, m->rank, me, sizeof me);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pprt: %s: %s\n", me, line);
    fflush(stderr);
}

static void mpi_msg(int rc, char *buf, size_t n) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) len = 0;
    s[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = 0;
    snprintf(buf, n, "%s (MPI error %d)", len ? s : "unknown error", rc);
}

static void wake_engine(pprt_mpi *m) { pthread_cond_signal(&m->wake); }

/* ---- requests (mu held) -------------------------------------------------------- */

static pprt_mpi_req *req_new(int kind, void *buf, size_t bytes, int peer, int tag) {
    int parts = bytes > PIECE ? (int)((bytes + PIECE - 1) / PIECE) : 1;
    pprt_mpi_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->parts = parts > 1 ? calloc((size_t)parts, sizeof *r->parts) : &r->part0;
    if (!r->parts) {
        free(r);
        return NULL;
    }
    for (int j = 0; j < parts; j++) r->parts[j] = MPI_REQUEST_NULL;
    r->kind = kind;
    r->buf = buf;
    r->bytes = bytes;
    r->peer = peer;
    r->tag = tag;
    r->n_parts = parts;
    return r;
}

static void req_free(pprt_mpi_req *r) {
    if (!r) return;
    if (r->parts != &r->part0) free(r->parts);
    free(r);
}

static void enqueue(pprt_mpi *m, pprt_mpi_req *r) {
    r->next = NULL;
    *m->pending_tail = r;
    m->pending_tail = &r->next;
    wake_engine(m);
}

static void begin_abort(pprt_mpi *m, int code, int dead, const char *msg);

/* A failure the engine found: this rank aborts. */
static void engine_fail(pprt_mpi *m, int dead, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void engine_fail(pprt_mpi *m, int dead, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    begin_abort(m, 1, dead, msg);
}

/* Queue a control message from the engine itself (mu held). */
static void queue_ctrl(pprt_mpi *m, int peer, int type, int code, const char *text) {
    pprt_mpi_req *r = req_new(REQ_SEND, NULL, sizeof(pprt_ctrl), peer, PPRT_TAG_CTRL);
    if (!r) return; /* out of memory while failing: the deadline ends it */
    r->buf = (unsigned char *)&r->ctrl;
    r->detached = true;
    r->ctrl.type = type;
    r->ctrl.src = m->rank;
    r->ctrl.code = code;
    if (text) snprintf(r->ctrl.text, sizeof r->ctrl.text, "%s", text);
    snprintf(r->what, sizeof r->what, "sending a control message to rank %d", peer);
    enqueue(m, r);
}

/* This rank failed: print, tell every rank, wait for their acknowledgements. */
static void begin_abort(pprt_mpi *m, int code, int dead, const char *msg) {
    if (m->phase != ENGINE_RUN) return;
    say(m, "error: %s", msg);
    m->phase = ENGINE_ABORT;
    m->exit_code = code;
    m->exit_deadline = pprt_mpi_now() + (m->timeout_s < 3.0 ? m->timeout_s : 3.0);
    m->heartbeats = m->watch = false;
    for (int q = 0; q < m->size; q++) {
        m->acked[q] = q == m->rank || q == dead;
        if (!m->acked[q]) queue_ctrl(m, q, PPRT_CTRL_ABORT, code, msg);
    }
}

static void die(pprt_mpi *m) {
    fflush(stdout);
    fflush(stderr);
    _exit(m->exit_code);
}

static void post(pprt_mpi *m, pprt_mpi_req *r) {
    int rc = MPI_SUCCESS;
    const char *fn = "MPI_Ibarrier";
    if (r->kind == REQ_BARRIER) {
        rc = MPI_Ibarrier(MPI_COMM_WORLD, &r->parts[0]);
    } else {
        fn = r->kind == REQ_SEND ? "MPI_Isend" : "MPI_Irecv";
        for (int j = 0; j < r->n_parts && rc == MPI_SUCCESS; j++) {
            size_t off = (size_t)j * PIECE, len = r->bytes - off < PIECE ? r->bytes - off : PIECE;
            if (r->kind == REQ_SEND)
                rc = MPI_Isend(r->buf + off, (int)len, MPI_BYTE, r->peer, r->tag, MPI_COMM_WORLD, &r->parts[j]);
            else
                rc = MPI_Irecv(r->buf + off, (int)len, MPI_BYTE, r->peer, r->tag, MPI_COMM_WORLD, &r->parts[j]);
        }
    }
    if (rc != MPI_SUCCESS) {
        char e[MPI_MAX_ERROR_STRING + 32];
        mpi_msg(rc, e, sizeof e);
        engine_fail(m, -1, "%s failed while %s: %s", fn, r->what, e);
    }
}

/* Whether all pieces of r completed. */
static bool test(pprt_mpi *m, pprt_mpi_req *r, double now) {
    for (int j = 0; j < r->n_parts; j++) {
        if (r->parts[j] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Test(&r->parts[j], &flag, &st);
        if (rc != MPI_SUCCESS) {
            char e[MPI_MAX_ERROR_STRING + 32];
            mpi_msg(rc, e, sizeof e);
            engine_fail(m, -1, "MPI_Test failed while %s: %s", r->what, e);
            return false;
        }
        if (!flag) continue;
        r->parts[j] = MPI_REQUEST_NULL;
        r->n_done++;
        if (r->kind == REQ_RECV) {
            size_t off = (size_t)j * PIECE, want = r->bytes - off < PIECE ? r->bytes - off : PIECE;
            int got = -1;
            MPI_Get_count(&st, MPI_BYTE, &got);
            if (got < 0 || (size_t)got != want) {
                engine_fail(m, -1, "%d bytes arrived while %s, expected %zu (do all ranks run the same plan?)",
                            got, r->what, want);
                return false;
            }
            m->last_heard[r->peer] = now;
        }
    }
    return r->n_done == r->n_parts;
}

/* ---- control messages (mu held) -------------------------------------------------- */

static void deliver(pprt_mpi *m, const pprt_ctrl *c) {
    if (m->mbox_n == m->mbox_cap) {
        int cap = m->mbox_cap ? 2 * m->mbox_cap : 16;
        pprt_ctrl *nb = realloc(m->mbox, (size_t)cap * sizeof *nb);
        if (!nb) {
            engine_fail(m, -1, "out of memory for control messages");
            return;
        }
        m->mbox = nb;
        m->mbox_cap = cap;
    }
    m->mbox[m->mbox_n++] = *c;
    pthread_cond_broadcast(&m->changed);
}

static void handle(pprt_mpi *m, pprt_ctrl *c, int src, double now) {
    if (src < 0 || src >= m->size) return;
    m->last_heard[src] = now;
    c->src = src;
    c->text[sizeof c->text - 1] = 0;
    char who[64];
    pprt_mpi_describe(m, src, who, sizeof who);
    switch (c->type) {
    case PPRT_CTRL_HB:
        break;
    case PPRT_CTRL_ABORT: {
        int code = c->code > 0 && c->code < 126 ? c->code : 1;
        if (m->phase == ENGINE_RUN) {
            say(m, "stopped: %s failed: %s", who, c->text);
            m->phase = ENGINE_EXIT;
            m->exit_code = code;
            m->exit_deadline = now + 1.0;
            m->heartbeats = m->watch = false;
            pprt_mpi_req *r = req_new(REQ_SEND, NULL, sizeof(pprt_ctrl), src, PPRT_TAG_CTRL);
            if (r) {
                r->buf = (unsigned char *)&r->ctrl;
                r->ctrl.type = PPRT_CTRL_ACK;
                r->ctrl.src = m->rank;
                snprintf(r->what, sizeof r->what, "acknowledging the abort of rank %d", src);
                m->exit_req = r;
                enqueue(m, r);
            }
        } else {
            if (m->phase == ENGINE_ABORT) m->acked[src] = true; /* failing too: it will not ack */
            queue_ctrl(m, src, PPRT_CTRL_ACK, 0, NULL);
        }
        break;
    }
    case PPRT_CTRL_ACK:
        m->acked[src] = true;
        break;
    case PPRT_CTRL_PING: {
        pprt_mpi_req *r = req_new(REQ_SEND, NULL, sizeof(pprt_ctrl), src, PPRT_TAG_CTRL);
        if (!r) {
            engine_fail(m, -1, "out of memory");
            break;
        }
        r->buf = (unsigned char *)&r->ctrl;
        r->detached = true;
        r->ctrl.type = PPRT_CTRL_PONG;
        r->ctrl.src = m->rank;
        r->ctrl.t[0] = c->t[0];
        r->ctrl.t[1] = pprt_mpi_now();
        snprintf(r->what, sizeof r->what, "answering the clock probe of %s", who);
        enqueue(m, r);
        break;
    }
    default:
        deliver(m, c);
    }
}

static void heartbeat(pprt_mpi *m, double now) {
    if (!m->heartbeats || now - m->last_hb < m->hb_s) return;
    m->last_hb = now;
    for (int q = 0; q < m->size && m->phase == ENGINE_RUN; q++) {
        if (q == m->rank) continue;
        int rc = MPI_SUCCESS, flag = 1;
        if (m->hb_req[q] != MPI_REQUEST_NULL) rc = MPI_Test(&m->hb_req[q], &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && flag)
            rc = MPI_Isend(&m->hb_msg, sizeof m->hb_msg, MPI_BYTE, q, PPRT_TAG_CTRL, MPI_COMM_WORLD, &m->hb_req[q]);
        if (rc != MPI_SUCCESS) {
            char e[MPI_MAX_ERROR_STRING + 32], who[64];
            mpi_msg(rc, e, sizeof e);
            pprt_mpi_describe(m, q, who, sizeof who);
            engine_fail(m, q, "sending a heartbeat to %s failed: %s", who, e);
        }
    }
}

/* What this rank was doing with rank q, for the message saying q is gone. */
static const char *doing_with(const pprt_mpi *m, int q) {
    for (const pprt_mpi_req *r = m->active; r; r = r->next)
        if (r->peer == q && !r->detached) return r->what;
    for (const pprt_mpi_req *r = m->pending; r; r = r->next)
        if (r->peer == q && !r->detached) return r->what;
    return m->waiting_for ? m->waiting_for : "no transfer with it was pending";
}

static void watch(pprt_mpi *m, double now) {
    if (!m->watch) return;
    for (int q = 0; q < m->size; q++) {
        if (q == m->rank || now - m->last_heard[q] <= m->timeout_s) continue;
        char who[64];
        pprt_mpi_describe(m, q, who, sizeof who);
        engine_fail(m, q, "%s is not responding: nothing came from it for %.1f s (--mpi-timeout %g); "
                    "this rank was %s; presumed dead", who, now - m->last_heard[q], m->timeout_s,
                    doing_with(m, q));
        return;
    }
}

static void timed_sleep(pprt_mpi *m, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long ns = ts.tv_nsec + (long)(seconds * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&m->wake, &m->mu, &ts);
}

static void *engine_main(void *arg) {
    pprt_mpi *m = arg;
    pthread_mutex_lock(&m->mu);
    int rc = MPI_Irecv(&m->ctrl_in, sizeof m->ctrl_in, MPI_BYTE, MPI_ANY_SOURCE, PPRT_TAG_CTRL,
                       MPI_COMM_WORLD, &m->ctrl_req);
    if (rc != MPI_SUCCESS) {
        char e[MPI_MAX_ERROR_STRING + 32];
        mpi_msg(rc, e, sizeof e);
        engine_fail(m, -1, "MPI_Irecv of control messages failed: %s", e);
    }
    int idle = 0; /* rounds without progress while a thread waits: the nap doubles */
    while (!m->stop) {
        double now = pprt_mpi_now();
        bool busy = false;
        while (m->pending) {
            pprt_mpi_req *r = m->pending;
            m->pending = r->next;
            if (!m->pending) m->pending_tail = &m->pending;
            post(m, r);
            r->next = m->active;
            m->active = r;
            busy = true;
        }
        for (pprt_mpi_req **pp = &m->active; *pp;) {
            pprt_mpi_req *r = *pp;
            if (!test(m, r, now)) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            r->done = true;
            if (r->detached) req_free(r);
            busy = true;
            pthread_cond_broadcast(&m->changed);
        }
        while (m->ctrl_req != MPI_REQUEST_NULL) {
            int flag = 0;
            MPI_Status st;
            rc = MPI_Test(&m->ctrl_req, &flag, &st);
            if (rc != MPI_SUCCESS) {
                char e[MPI_MAX_ERROR_STRING + 32];
                mpi_msg(rc, e, sizeof e);
                m->ctrl_req = MPI_REQUEST_NULL;
                engine_fail(m, -1, "receiving control messages failed: %s", e);
                break;
            }
            if (!flag) break;
            handle(m, &m->ctrl_in, st.MPI_SOURCE, now);
            busy = true;
            rc = MPI_Irecv(&m->ctrl_in, sizeof m->ctrl_in, MPI_BYTE, MPI_ANY_SOURCE, PPRT_TAG_CTRL,
                           MPI_COMM_WORLD, &m->ctrl_req);
            if (rc != MPI_SUCCESS) {
                char e[MPI_MAX_ERROR_STRING + 32];
                mpi_msg(rc, e, sizeof e);
                m->ctrl_req = MPI_REQUEST_NULL;
                engine_fail(m, -1, "MPI_Irecv of control messages failed: %s", e);
            }
        }
        heartbeat(m, now);
        watch(m, now);
        if (m->phase == ENGINE_ABORT) {
            bool all = true;
            for (int q = 0; q < m->size; q++) all = all && m->acked[q];
            if (all || now > m->exit_deadline) die(m);
        } else if (m->phase == ENGINE_EXIT) {
            if ((m->exit_req && m->exit_req->done) || now > m->exit_deadline) die(m);
        }
        if (busy || m->new_wait) {
            idle = 0;
            m->new_wait = false;
            if (busy) continue;
        }
        /* a waiting thread: 20 us, doubling to 1.3 ms while nothing happens;
         * transfers in flight: 0.5 ms, so they progress during compute */
        double nap = 5e-3;
        if (m->waiters > 0 || m->phase != ENGINE_RUN) nap = 20e-6 * (double)(1 << (idle < 6 ? idle++ : 6));
        else if (m->active) nap = 500e-6;
        if (m->heartbeats) {
            double to_hb = m->last_hb + m->hb_s - now;
            if (to_hb < nap) nap = to_hb > 0 ? to_hb : 0;
        }
        if (nap > 0) timed_sleep(m, nap);
    }
    /* stopping (after the final barrier): nothing more will come */
    double until = pprt_mpi_now() + 1.0;
    if (m->ctrl_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&m->ctrl_req);
        int flag = 0;
        while (!flag && MPI_Test(&m->ctrl_req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && pprt_mpi_now() < until) {
        }
    }
    for (int q = 0; q < m->size; q++) {
        int flag = 0;
        while (m->hb_req[q] != MPI_REQUEST_NULL && !flag && pprt_mpi_now() < until &&
               MPI_Test(&m->hb_req[q], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS) {
        }
        if (m->hb_req[q] != MPI_REQUEST_NULL) MPI_Request_free(&m->hb_req[q]); /* completes on its own */
    }
    while (m->active && pprt_mpi_now() < until) { /* detached control messages still going out */
        for (pprt_mpi_req **pp = &m->active; *pp;) {
            pprt_mpi_req *r = *pp;
            if (!test(m, r, pprt_mpi_now())) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            r->done = true;
            if (r->detached) req_free(r);
        }
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- the other threads' side --------------------------------------------------- */

static pp_status queue_req(pprt_mpi *m, int kind, void *buf, size_t bytes, int peer, int tag,
                           pprt_mpi_req **out, pp_err *err, const char *what, va_list ap) {
    *out = NULL;
    if (peer < 0 || peer >= m->size || peer == m->rank)
        return PP_FAIL(err, PP_ERUNTIME, "internal: transfer with rank %d from rank %d", peer, m->rank);
    pprt_mpi_req *r = req_new(kind, buf, bytes, peer, tag);
    if (!r) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    vsnprintf(r->what, sizeof r->what, what, ap);
    pthread_mutex_lock(&m->mu);
    enqueue(m, r);
    pthread_mutex_unlock(&m->mu);
    *out = r;
    return PP_OK;
}

pp_status pprt_mpi_isend(pprt_mpi *m, const void *buf, size_t bytes, int peer, int tag,
                         pprt_mpi_req **out, pp_err *err, const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    pp_status s = queue_req(m, REQ_SEND, (void *)buf, bytes, peer, tag, out, err, what, ap);
    va_end(ap);
    return s;
}

pp_status pprt_mpi_irecv(pprt_mpi *m, void *buf, size_t bytes, int peer, int tag,
                         pprt_mpi_req **out, pp_err *err, const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    pp_status s = queue_req(m, REQ_RECV, buf, bytes, peer, tag, out, err, what, ap);
    va_end(ap);
    return s;
}

/* Wait for r until the deadline (<= 0: none); whether it completed. */
static bool wait_until(pprt_mpi *m, pprt_mpi_req *r, double deadline) {
    pthread_mutex_lock(&m->mu);
    m->waiters++;
    m->new_wait = true;
    const char *before = m->waiting_for;
    m->waiting_for = r->what;
    wake_engine(m);
    while (!r->done) {
        if (deadline <= 0) {
            pthread_cond_wait(&m->changed, &m->mu);
            continue;
        }
        double left = deadline - pprt_mpi_now();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + (long)((left < 0.1 ? left : 0.1) * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&m->changed, &m->mu, &ts);
    }
    bool done = r->done;
    m->waiters--;
    m->waiting_for = before;
    pthread_mutex_unlock(&m->mu);
    return done;
}

pp_status pprt_mpi_wait(pprt_mpi *m, pprt_mpi_req *r, pp_err *err) {
    (void)err;
    wait_until(m, r, 0);
    req_free(r);
    return PP_OK;
}

bool pprt_mpi_wait_until(pprt_mpi *m, pprt_mpi_req *r, double deadline) {
    if (!wait_until(m, r, deadline)) return false;
    req_free(r);
    return true;
}

bool pprt_mpi_test(pprt_mpi *m, pprt_mpi_req *r) {
    pthread_mutex_lock(&m->mu);
    bool d = r->done;
    pthread_mutex_unlock(&m->mu);
    return d;
}

pp_status pprt_mpi_send_ctrl(pprt_mpi *m, int peer, int type, const pprt_ctrl *body, pp_err *err) {
    if (peer < 0 || peer >= m->size || peer == m->rank)
        return PP_FAIL(err, PP_ERUNTIME, "internal: control message to rank %d from rank %d", peer, m->rank);
    pprt_mpi_req *r = req_new(REQ_SEND, NULL, sizeof(pprt_ctrl), peer, PPRT_TAG_CTRL);
    if (!r) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (body) r->ctrl = *body;
    r->ctrl.type = type;
    r->ctrl.src = m->rank;
    r->buf = (unsigned char *)&r->ctrl;
    r->detached = true;
    snprintf(r->what, sizeof r->what, "sending a control message to rank %d", peer);
    pthread_mutex_lock(&m->mu);
    enqueue(m, r);
    pthread_mutex_unlock(&m->mu);
    return PP_OK;
}

pp_status pprt_mpi_wait_ctrl(pprt_mpi *m, int type, int src, pprt_ctrl *out, const char *what, pp_err *err) {
    (void)err;
    pthread_mutex_lock(&m->mu);
    m->waiters++;
    m->new_wait = true;
    const char *before = m->waiting_for;
    m->waiting_for = what;
    wake_engine(m);
    for (;;) {
        int i = 0;
        while (i < m->mbox_n && !(m->mbox[i].type == type && (src < 0 || m->mbox[i].src == src))) i++;
        if (i < m->mbox_n) {
            *out = m->mbox[i];
            memmove(&m->mbox[i], &m->mbox[i + 1], (size_t)(m->mbox_n - i - 1) * sizeof *m->mbox);
            m->mbox_n--;
            break;
        }
        pthread_cond_wait(&m->changed, &m->mu);
    }
    m->waiters--;
    m->waiting_for = before;
    pthread_mutex_unlock(&m->mu);
    return PP_OK;
}

/* ---- start, bind, finish ------------------------------------------------------- */

int pprt_mpi_rank(const pprt_mpi *m) { return m->rank; }
int pprt_mpi_size(const pprt_mpi *m) { return m->size; }
bool pprt_mpi_reads_data(const pprt_mpi *m) { return m->rank == 0; }
bool pprt_mpi_writes_outputs(const pprt_mpi *m) { return m->stages > 0 && m->rank == m->writer; }

static void mpi_free(pprt_mpi *m) {
    if (!m) return;
    for (pprt_mpi_req *r = m->pending, *nx; r; r = nx) {
        nx = r->next;
        req_free(r);
    }
    free(m->last_heard);
    free(m->hb_req);
    free(m->acked);
    free(m->mbox);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->wake);
    pthread_cond_destroy(&m->changed);
    free(m);
}

pp_status pprt_mpi_start(int *argc, char ***argv, const pprt_mpi_opts *o, pprt_mpi **out, pp_err *err) {
    *out = NULL;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return PP_FAIL(err, PP_ERUNTIME, "MPI_Init_thread failed (MPI error %d)", rc);
    if (provided < MPI_THREAD_SERIALIZED)
        return PP_FAIL(err, PP_ERUNTIME, "the MPI library gives thread level %d; pprt needs "
                       "MPI_THREAD_SERIALIZED (%d)", provided, MPI_THREAD_SERIALIZED);
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pprt_mpi *m = calloc(1, sizeof *m);
    if (!m) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    if (rc != MPI_SUCCESS) {
        free(m);
        char e[MPI_MAX_ERROR_STRING + 32];
        mpi_msg(rc, e, sizeof e);
        return PP_FAIL(err, PP_ERUNTIME, "setting up MPI_COMM_WORLD failed: %s", e);
    }
    m->replicas = o->replicas;
    m->timeout_s = o->timeout_s;
    if (o->agree && strlen(o->agree) >= sizeof m->agree) {
        free(m);
        return PP_FAIL(err, PP_EINVAL, "internal: %zu bytes of options to compare, room for %zu",
                       strlen(o->agree), sizeof m->agree - 1);
    }
    snprintf(m->agree, sizeof m->agree, "%s", o->agree ? o->agree : "");
    m->transport = o->transport;
    m->hb_s = o->timeout_s / 5 < 1.0 ? o->timeout_s / 5 : 1.0;
    if (gethostname(m->host, sizeof m->host - 1) != 0) snprintf(m->host, sizeof m->host, "?");
    m->pending_tail = &m->pending;
    m->ctrl_req = MPI_REQUEST_NULL;
    m->last_heard = calloc((size_t)m->size, sizeof *m->last_heard);
    m->hb_req = calloc((size_t)m->size, sizeof *m->hb_req);
    m->acked = calloc((size_t)m->size, sizeof *m->acked);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->wake, &ca);
    pthread_cond_init(&m->changed, &ca);
    pthread_condattr_destroy(&ca);
    if (!m->last_heard || !m->hb_req || !m->acked) {
        mpi_free(m);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    double now = pprt_mpi_now();
    for (int q = 0; q < m->size; q++) {
        m->last_heard[q] = now;
        m->hb_req[q] = MPI_REQUEST_NULL;
    }
    m->hb_msg.type = PPRT_CTRL_HB;
    m->hb_msg.src = m->rank;
    m->last_hb = now - m->hb_s;
    m->heartbeats = m->watch = true;
    m->phase = ENGINE_RUN;
    if (pthread_create(&m->th, NULL, engine_main, m) != 0) {
        mpi_free(m);
        return PP_FAIL(err, PP_ERUNTIME, "cannot start the MPI engine thread");
    }
    m->th_started = true;
    *out = m;
    return PP_OK;
}

pp_status pprt_mpi_bind(pprt_mpi *m, const pprt_plan *p, pp_err *err) {
    /* a training plan (ppcc --train): a rank per device, which runs the device's forward and backward
     * stage (comm/train_mpi.c); rank 0 (device 0 of replica 0, the pipeline's both ends) writes */
    const bool train = p->train_devices > 0;
    int K = train ? p->train_devices : p->n_stages, R = m->replicas;
    if ((int64_t)K * R != m->size)
        return PP_FAIL(err, PP_EINVAL, "the plan has %d %s%s and --replicas is %d, so mpirun -np "
                       "must be %d (%s x replicas); it started %d rank%s", K, train ? "device" : "stage",
                       K == 1 ? "" : "s", R, K * R, train ? "devices" : "stages", m->size, m->size == 1 ? "" : "s");
    pthread_mutex_lock(&m->mu);
    m->stages = K;
    m->stage = m->rank % K;
    m->replica = m->rank / K;
    m->writer = train ? 0 : K - 1;
    pthread_mutex_unlock(&m->mu);
    return PP_OK;
}

int pprt_mpi_finish(pprt_mpi *m, pp_status s, const pp_err *err) {
    int code = pp_exit_code(s);
    bool writer = pprt_mpi_writes_outputs(m);
    if (s != PP_OK && !(writer && m->run_complete)) {
        pthread_mutex_lock(&m->mu);
        begin_abort(m, code, -1, err && err->msg[0] ? err->msg : "failed");
        wake_engine(m);
        for (;;) pthread_cond_wait(&m->changed, &m->mu); /* the engine ends the process */
    }
    pp_err e = {0};
    if (writer) {
        if (s != PP_OK) say(m, "error: %s", err->msg);
        pprt_ctrl c = {0};
        c.code = code;
        if (s != PP_OK) snprintf(c.text, sizeof c.text, "%.400s", err->msg);
        for (int q = 0; q < m->size; q++)
            if (q != m->rank && pprt_mpi_send_ctrl(m, q, PPRT_CTRL_DONE, &c, &e) != PP_OK) {
                pthread_mutex_lock(&m->mu);
                begin_abort(m, 1, -1, e.msg);
                for (;;) pthread_cond_wait(&m->changed, &m->mu);
            }
    } else {
        char what[128], who[64];
        pprt_mpi_describe(m, m->writer, who, sizeof who);
        snprintf(what, sizeof what, "waiting for the final result from %s", who);
        pprt_ctrl c;
        pprt_mpi_wait_ctrl(m, PPRT_CTRL_DONE, m->writer, &c, what, &e);
        code = c.code >= 0 && c.code < 126 ? c.code : 1;
    }
    /* from here on nobody watches heartbeats: every rank has its verdict */
    pthread_mutex_lock(&m->mu);
    m->heartbeats = m->watch = false;
    pprt_mpi_req *b = req_new(REQ_BARRIER, NULL, 0, -1, 0);
    if (b) {
        snprintf(b->what, sizeof b->what, "in the final barrier");
        enqueue(m, b);
    }
    pthread_mutex_unlock(&m->mu);
    if (!b || !wait_until(m, b, pprt_mpi_now() + m->timeout_s)) {
        say(m, "error: the final barrier did not complete within %g s (--mpi-timeout): a rank is gone",
            m->timeout_s);
        fflush(stdout);
        _exit(1);
    }
    req_free(b);
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    wake_engine(m);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->th, NULL);
    MPI_Finalize();
    mpi_free(m);
    return code;
}
