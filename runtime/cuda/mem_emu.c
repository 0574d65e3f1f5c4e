/* mem_emu.c: the emulated device space of cuda-emu (mem.h, mem_emu.h).
 *
 * Device memory is host memory registered as belonging to an emulated
 * device (PPRT_EMU_DEVICES of them); pinned memory is host memory
 * registered as pinned. Every copy checks both ends against the registry:
 * a device end must lie in that device's memory, a host end in pinned
 * memory, as the links promise and as cudaMemcpyAsync needs to be
 * asynchronous. A stream is a thread that runs its queue in order (memcpy,
 * or a call of the emulated NCCL); an event is the count of operations
 * queued on its stream when it was recorded. PPRT_EMU_DELAY_US (a number)
 * makes every stream operation wait that long first, which widens the
 * windows a missing wait on an event would leave open (the tests use it).
 *
 * Peer access between emulated devices: PPRT_EMU_PEER unset or "all"
 * (every device maps every other's memory), "none", or a list "0>1,2>1"
 * (device 0 maps device 1's memory, ...). A copy between two devices must
 * be queued on a stream of a device that maps the other end (it fails
 * otherwise, naming the devices), so the links' choice of side, and their
 * staging through pinned memory where neither maps the other, are checked.
 * A device describes itself (pprt_dev_desc) as "cuda-emu", compute 9.0,
 * 132 SMs, unless PPRT_EMU_SMS="DEV:N,..." gives device DEV N SMs: a way
 * to give a stage another device than its neighbours. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_backend.h"
#include "mem_emu.h"

enum { EMU_DEVICE = 1, EMU_PINNED = 2 };

typedef struct {
    const unsigned char *base;
    size_t n;
    int dev, kind;
} region;

typedef struct op {
    struct op *next;
    void *dst;
    const void *src;
    size_t n;
    void (*fn)(void *);
    void *arg;
} op;

struct pprt_stream {
    int dev; /* the emulated device it belongs to */
    pthread_t th;
    pthread_cond_t work, done_cv;
    op *head, **tail;
    uint64_t queued, done;
    bool stop;
    long delay_us;
};

struct pprt_event {
    pprt_stream *s;
    uint64_t seq;
};

/* One lock for the registry, the streams' queues and the events. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static region *regs;
static int n_regs, cap_regs;
static pprt_emu_counts counts;

static int find(const void *p, size_t n) {
    const unsigned char *q = p;
    for (int i = 0; i < n_regs; i++)
        if (q >= regs[i].base && q + n <= regs[i].base + regs[i].n && q + n >= q) return i;
    return -1;
}

static pp_status reg_add(const void *p, size_t n, int dev, int kind, pp_err *err) {
    pthread_mutex_lock(&mu);
    if (n_regs == cap_regs) {
        int cap = cap_regs ? 2 * cap_regs : 64;
        region *r = realloc(regs, (size_t)cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&mu);
            return PP_FAIL(err, PP_ENOMEM, "out of memory");
        }
        regs = r, cap_regs = cap;
    }
    regs[n_regs++] = (region){p, n, dev, kind};
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

static void reg_del(const void *p) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_regs; i++)
        if (regs[i].base == p) {
            regs[i] = regs[--n_regs];
            break;
        }
    if (n_regs == 0) {
        free(regs);
        regs = NULL, cap_regs = 0;
    }
    pthread_mutex_unlock(&mu);
}

/* Where [p, p+n) lies, in words (mu held). */
static void where(const void *p, size_t n, char *buf, size_t cap) {
    int i = find(p, n);
    if (i < 0) snprintf(buf, cap, "host memory that is not pinned, or memory of no single allocation");
    else if (regs[i].kind == EMU_PINNED) snprintf(buf, cap, "pinned host memory");
    else snprintf(buf, cap, "memory of emulated device %d", regs[i].dev);
}

/* [p, p+n) is memory of device dev (PPRT_ON_HOST: pinned) (mu held). */
static bool is(const void *p, size_t n, int dev) {
    int i = find(p, n);
    return i >= 0 && (dev == PPRT_ON_HOST ? regs[i].kind == EMU_PINNED : regs[i].kind == EMU_DEVICE && regs[i].dev == dev);
}

pp_status pprt_emu_check(const void *p, size_t n, int dev, const char *what, pp_err *err) {
    pthread_mutex_lock(&mu);
    bool ok = is(p, n ? n : 1, dev);
    char w[96];
    if (!ok) where(p, n ? n : 1, w, sizeof w);
    pthread_mutex_unlock(&mu);
    if (!ok) return PP_FAIL(err, PP_ERUNTIME, "cuda-emu: %s (%zu bytes) is not in the memory of emulated device %d but in %s",
                            what, n, dev, w);
    return PP_OK;
}

void pprt_emu_counts_get(pprt_emu_counts *c) {
    pthread_mutex_lock(&mu);
    *c = counts;
    pthread_mutex_unlock(&mu);
}

/* ---- memory ------------------------------------------------------------------------------------ */

static pp_status emu_device(const pprt_stage *st, int local_rank, int *dev, pp_err *err) {
    return pcu_pick_device(st, local_rank, PPRT_EMU_DEVICES, dev, err);
}

static pp_status emu_alloc_kind(int dev, size_t bytes, int kind, void **p, pp_err *err) {
    *p = NULL;
    if (kind == EMU_DEVICE && (dev < 0 || dev >= PPRT_EMU_DEVICES))
        return PP_FAIL(err, PP_EINVAL, "cuda-emu: no emulated device %d (it has %d)", dev, PPRT_EMU_DEVICES);
    if (posix_memalign(p, 256, bytes ? bytes : 256) != 0) {
        *p = NULL;
        return PP_FAIL(err, PP_ENOMEM, "cuda-emu: cannot allocate %zu bytes", bytes);
    }
    /* fresh device memory holds anything: never zeros anyone may rely on */
    memset(*p, 0xA5, bytes ? bytes : 256);
    pp_status s = reg_add(*p, bytes ? bytes : 256, dev, kind, err);
    if (s != PP_OK) {
        free(*p);
        *p = NULL;
    }
    return s;
}

static pp_status emu_alloc(int dev, size_t bytes, void **p, pp_err *err) {
    return emu_alloc_kind(dev, bytes, EMU_DEVICE, p, err);
}

static pp_status emu_alloc_pinned(size_t bytes, void **p, pp_err *err) {
    return emu_alloc_kind(PPRT_ON_HOST, bytes, EMU_PINNED, p, err);
}

static void emu_free_pinned(void *p) {
    if (!p) return;
    reg_del(p);
    free(p);
}

static void emu_free(int dev, void *p) {
    (void)dev;
    emu_free_pinned(p);
}

/* ---- streams and events ------------------------------------------------------------------------ */

static void *stream_main(void *arg) {
    pprt_stream *s = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&s->work, &mu);
        if (!s->head) break;
        op *o = s->head;
        s->head = o->next;
        if (!s->head) s->tail = &s->head;
        pthread_mutex_unlock(&mu);
        if (s->delay_us > 0) {
            struct timespec ts = {s->delay_us / 1000000, (s->delay_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (o->fn) o->fn(o->arg);
        else memcpy(o->dst, o->src, o->n);
        free(o);
        pthread_mutex_lock(&mu);
        s->done++;
        pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static pp_status emu_stream_new(int dev, pprt_stream **out, pp_err *err) {
    *out = NULL;
    pprt_stream *s = calloc(1, sizeof *s);
    if (!s) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    s->dev = dev;
    s->tail = &s->head;
    const char *d = getenv("PPRT_EMU_DELAY_US");
    s->delay_us = d ? atol(d) : 0;
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done_cv);
        free(s);
        return PP_FAIL(err, PP_ERUNTIME, "cuda-emu: cannot start a stream thread");
    }
    *out = s;
    return PP_OK;
}

static void emu_stream_free(pprt_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&mu);
    s->stop = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&mu);
    pthread_join(s->th, NULL); /* after the queue ran out */
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done_cv);
    free(s);
}

static pp_status enqueue(pprt_stream *s, op *o) {
    o->next = NULL;
    *s->tail = o;
    s->tail = &o->next;
    s->queued++;
    pthread_cond_signal(&s->work);
    return PP_OK;
}

pp_status pprt_emu_call(pprt_stream *s, void (*fn)(void *arg), void *arg, pp_err *err) {
    op *o = calloc(1, sizeof *o);
    if (!o) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    o->fn = fn, o->arg = arg;
    pthread_mutex_lock(&mu);
    enqueue(s, o);
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

static bool emu_maps(int x, int y);

static pp_status emu_copy(pprt_stream *s, void *dst, int dst_dev, const void *src, int src_dev, size_t n, pp_err *err) {
    if (n == 0) return PP_OK;
    op *o = calloc(1, sizeof *o);
    if (!o) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    o->dst = dst, o->src = src, o->n = n;
    pthread_mutex_lock(&mu);
    const bool ok_src = is(src, n, src_dev), ok_dst = is(dst, n, dst_dev);
    if (!ok_src || !ok_dst) {
        char w[96];
        const bool bad_src = !ok_src;
        where(bad_src ? src : dst, n, w, sizeof w);
        const int want = bad_src ? src_dev : dst_dev;
        pthread_mutex_unlock(&mu);
        free(o);
        char d[48];
        if (want == PPRT_ON_HOST) snprintf(d, sizeof d, "pinned host memory");
        else snprintf(d, sizeof d, "memory of emulated device %d", want);
        return PP_FAIL(err, PP_ERUNTIME, "cuda-emu: a copy of %zu bytes %s %s but the %s is in %s", n,
                       bad_src ? "from" : "to", d, bad_src ? "source" : "destination", w);
    }
    if (src_dev >= 0 && dst_dev >= 0 && src_dev != dst_dev) {
        const int other = s->dev == src_dev ? dst_dev : src_dev;
        if ((s->dev != src_dev && s->dev != dst_dev) || !emu_maps(s->dev, other)) {
            pthread_mutex_unlock(&mu);
            free(o);
            return PP_FAIL(err, PP_ERUNTIME, "cuda-emu: a peer copy from emulated device %d to %d queued on a stream "
                           "of device %d, which does not map device %d's memory (PPRT_EMU_PEER=%s): a direct copy "
                           "goes from the side that maps the other, else through pinned memory", src_dev, dst_dev,
                           s->dev, other, getenv("PPRT_EMU_PEER") ? getenv("PPRT_EMU_PEER") : "all");
        }
    }
    if (src_dev == PPRT_ON_HOST) counts.h2d++;
    else if (dst_dev == PPRT_ON_HOST) counts.d2h++;
    else if (src_dev == dst_dev) counts.d2d++;
    else counts.peer++;
    counts.bytes += (double)n;
    enqueue(s, o);
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

/* PPRT_EMU_PEER: whether emulated device x maps device y's memory. */
static bool emu_maps(int x, int y) {
    if (x == y) return true;
    const char *v = getenv("PPRT_EMU_PEER");
    if (!v || !*v || !strcmp(v, "all")) return true;
    for (const char *p = v; *p;) {
        int a = -1, b = -1, n = 0;
        if (sscanf(p, "%d>%d%n", &a, &b, &n) == 2 && a == x && b == y) return true;
        const char *c = strchr(p, ',');
        if (!c) break;
        p = c + 1;
    }
    return false;
}

static int emu_peer(int a, int b) {
    return emu_maps(a, b) ? PPRT_PEER_SRC : emu_maps(b, a) ? PPRT_PEER_DST : PPRT_PEER_STAGED;
}

typedef struct {
    pprt_stream *s;
    uint64_t seq;
} wait_arg;

static void run_wait(void *arg) {
    wait_arg *w = arg;
    pthread_mutex_lock(&mu);
    while (w->s && w->s->done < w->seq) pthread_cond_wait(&w->s->done_cv, &mu);
    pthread_mutex_unlock(&mu);
    free(w);
}

static pp_status emu_stream_wait(pprt_stream *s, pprt_event *e, pp_err *err) {
    wait_arg *w = malloc(sizeof *w);
    if (!w) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pthread_mutex_lock(&mu);
    *w = (wait_arg){e->s, e->seq}; /* the event as recorded now, as cudaStreamWaitEvent takes it */
    pthread_mutex_unlock(&mu);
    pp_status st = pprt_emu_call(s, run_wait, w, err);
    if (st != PP_OK) free(w);
    return st;
}

static void emu_describe(int dev, pprt_dev_desc *d) {
    *d = (pprt_dev_desc){.cc_major = 9, .cc_minor = 0, .sms = 132};
    snprintf(d->name, sizeof d->name, "cuda-emu");
    snprintf(d->libs, sizeof d->libs, "emulated (no CUDA library)");
    const char *v = getenv("PPRT_EMU_SMS");
    for (const char *p = v; p && *p;) {
        int a = -1, n = 0;
        if (sscanf(p, "%d:%d", &a, &n) == 2 && a == dev && n > 0) d->sms = n;
        const char *c = strchr(p, ',');
        if (!c) break;
        p = c + 1;
    }
}

static pp_status emu_event_new(int dev, pprt_event **e, pp_err *err) {
    (void)dev;
    *e = calloc(1, sizeof **e);
    return *e ? PP_OK : PP_FAIL(err, PP_ENOMEM, "out of memory");
}

static void emu_event_free(pprt_event *e) { free(e); }

static pp_status emu_record(pprt_event *e, pprt_stream *s, pp_err *err) {
    (void)err;
    pthread_mutex_lock(&mu);
    e->s = s;
    e->seq = s->queued;
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

static pp_status emu_query(pprt_event *e, bool *done, pp_err *err) {
    (void)err;
    pthread_mutex_lock(&mu);
    *done = !e->s || e->s->done >= e->seq;
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

static pp_status emu_wait(pprt_event *e, pp_err *err) {
    (void)err;
    pthread_mutex_lock(&mu);
    while (e->s && e->s->done < e->seq) pthread_cond_wait(&e->s->done_cv, &mu);
    pthread_mutex_unlock(&mu);
    return PP_OK;
}

const pprt_mem_ops pprt_mem_cuda_emu = {
    .name = "cuda-emu",
    .kind = PPRT_MEM_DEVICE,
    .host_addressable = true,
    .device = emu_device,
    .alloc = emu_alloc,
    .free = emu_free,
    .alloc_pinned = emu_alloc_pinned,
    .free_pinned = emu_free_pinned,
    .stream_new = emu_stream_new,
    .stream_free = emu_stream_free,
    .copy = emu_copy,
    .peer = emu_peer,
    .stream_wait = emu_stream_wait,
    .describe = emu_describe,
    .event_new = emu_event_new,
    .event_free = emu_event_free,
    .record = emu_record,
    .query = emu_query,
    .wait = emu_wait,
    .overlap_ends = pprt_cuda_overlap_ends,
};
