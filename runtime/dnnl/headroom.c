/* headroom.c: room in the address space under ulimit -v (headroom.h). */
#include "headroom.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t as_limit, data_limit; /* 0: none */
static size_t stack_bytes;
static _Thread_local int team; /* OpenMP threads this thread's team has had */

static size_t soft_limit(int which) {
    struct rlimit r;
    if (getrlimit(which, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
    return (size_t)r.rlim_cur;
}

static void init(void) {
    as_limit = soft_limit(RLIMIT_AS);
    data_limit = soft_limit(RLIMIT_DATA);
    /* glibc gives threads arenas of their own, each growing by reserving
     * 64 MiB of address space at a time: one small malloc could then take
     * all the room reserved for oneDNN. One arena grows as it is used. */
    if (as_limit || data_limit) mallopt(M_ARENA_MAX, 1);
    /* libgomp's threads get the default pthread stack: RLIMIT_STACK, else 2 MiB */
    size_t st = soft_limit(RLIMIT_STACK);
    stack_bytes = st && st <= ((size_t)1 << 30) ? st : (size_t)2 << 20;
}

/* Before main, so before any thread has an arena. */
__attribute__((constructor)) static void init_early(void) { pthread_once(&once, init); }

bool pprt_headroom_limited(void) {
    pthread_once(&once, init);
    return as_limit || data_limit;
}

size_t pprt_headroom_team(int threads, bool commit) {
    pthread_once(&once, init);
    if (threads <= team) return 0;
    size_t more = (size_t)(threads - (team > 1 ? team : 1)) * (stack_bytes + ((size_t)1 << 20));
    if (commit) team = threads;
    return more;
}

pp_status pprt_headroom_enter(size_t need, pp_err *err) {
    if (!pprt_headroom_limited()) return PP_OK;
    pthread_mutex_lock(&mu);
    /* writable and private, so RLIMIT_DATA counts it too; never touched */
    void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, need);
        return PP_OK;
    }
    pthread_mutex_unlock(&mu);
    return PP_FAIL(err, PP_ENOMEM, "out of memory: oneDNN may need up to %.0f MiB more here, and cannot map them",
                   (double)need / 1048576);
}

void pprt_headroom_leave(void) {
    if (pprt_headroom_limited()) pthread_mutex_unlock(&mu);
}
