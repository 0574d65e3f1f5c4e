/* mem.c: host memory as a space (mem.h), and what every space shares. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mem.h"
#include "pool.h"

static pp_status host_device(const pprt_stage *st, int local_rank, int *dev, pp_err *err) {
    (void)st, (void)local_rank, (void)err;
    *dev = PPRT_ON_HOST;
    return PP_OK;
}

static pp_status host_alloc(int dev, size_t bytes, void **p, pp_err *err) {
    (void)dev;
    if (!(*p = pprt_pool_alloc(bytes))) {
        return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes of host memory", bytes);
    }
    return PP_OK;
}

static void host_free(int dev, void *p) {
    (void)dev;
    pprt_pool_free(p);
}

static pp_status host_alloc_pinned(size_t bytes, void **p, pp_err *err) { return host_alloc(0, bytes, p, err); }

const pprt_mem_ops pprt_mem_host = {
    .name = "host",
    .kind = PPRT_MEM_HOST,
    .host_addressable = true,
    .device = host_device,
    .alloc = host_alloc,
    .free = host_free,
    .alloc_pinned = host_alloc_pinned,
    .free_pinned = pprt_pool_free,
};

void pprt_place_name(const pprt_place *p, char *buf, size_t n) {
    if (pprt_place_is_host(p)) snprintf(buf, n, "host");
    else snprintf(buf, n, "%s device %d", p->mem->name, p->device);
}

pp_status pprt_event_poll(const pprt_mem_ops *mem, pprt_event *e, const atomic_bool *stop,
                          pp_status (*poll)(void *ctx, pp_err *err), void *ctx, pp_err *err) {
    long nap_ns = 10000;
    for (;;) {
        bool done = false;
        PP_TRY(mem->query(e, &done, err));
        /* an error, or a close, that completed the event (an aborted transfer) counts too */
        if (poll) PP_TRY(poll(ctx, err));
        if (stop && atomic_load(stop)) return PP_FAIL(err, PP_ERUNTIME, "link closed (pipeline stopped)");
        if (done) return PP_OK;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000) nap_ns *= 2;
    }
}
