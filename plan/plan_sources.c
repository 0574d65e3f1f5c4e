/* plan_sources.c: the files a --ref-weights plan reads weights from
 * (docs/plan-format.md, "Weights referenced in the model's files"): each
 * opened and mapped at load (a regular file of the recorded size), hashed
 * once the rest of the plan is verified, guarded against being cut short
 * while pprt runs (SIGBUS), compared again after the run; and the aligned
 * copies of the weights that lie misaligned in them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#include "plan_read.h"

/* ---- weights files that change under a running plan -------------------------
 *
 * A --ref-weights plan maps files that pprt does not own. Another process may
 * cut one short while stages read it: a read past the new end raises SIGBUS
 * in whichever thread made it (a stage thread, an OpenMP thread of oneDNN's,
 * a copy at executor create). The handler below maps zeros over the rest of
 * that file's mapping, records where, and returns, so the read completes and
 * the run goes on; pprt_plan_sources_unchanged then refuses the run. Faults
 * elsewhere go to the handler that was there before (or kill as SIGBUS does).
 * A file overwritten in place is found by the same check (times and XXH3). */

enum { GUARDS = 4096 };
static struct {
    _Atomic uintptr_t lo, hi; /* a source's mapping, whole pages; hi 0: a free slot */
    size_t *_Atomic cut;      /* its pprt_source.cut */
} guards[GUARDS];
static pthread_mutex_t guards_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_prev;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static long guard_page;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARDS; i++) {
        uintptr_t lo = atomic_load(&guards[i].lo), hi = atomic_load(&guards[i].hi);
        size_t *cut = atomic_load(&guards[i].cut);
        if (a < lo || a >= hi || !cut) continue;
        uintptr_t page = a & ~(uintptr_t)(guard_page - 1);
        /* the raw system call: async-signal-safe, and no interposer */
        if (syscall(SYS_mmap, page, hi - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            (long)MAP_FAILED)
            break;
        size_t off = page - lo, old = __atomic_load_n(cut, __ATOMIC_RELAXED);
        while (off < old && !__atomic_compare_exchange_n(cut, &old, off, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        errno = saved;
        return;
    }
    errno = saved;
    if (guard_prev.sa_flags & SA_SIGINFO) {
        guard_prev.sa_sigaction(sig, si, ctx);
    } else if (guard_prev.sa_handler != SIG_DFL && guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
    } else { /* the default action: the faulting access repeats, and kills */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGBUS, &dfl, NULL);
    }
}

static void guard_install(void) {
    guard_page = sysconf(_SC_PAGESIZE);
    if (guard_page <= 0) guard_page = 4096;
    struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &guard_prev);
}

static void guard_add(struct pprt_source *src) {
    pthread_once(&guard_once, guard_install);
    src->cut = SIZE_MAX;
    uintptr_t lo = (uintptr_t)src->map, hi = lo + ((src->len + (size_t)guard_page - 1) & ~((size_t)guard_page - 1));
    pthread_mutex_lock(&guards_mu);
    for (int i = 0; i < GUARDS; i++)
        if (!atomic_load(&guards[i].hi)) {
            atomic_store(&guards[i].cut, &src->cut);
            atomic_store(&guards[i].lo, lo);
            atomic_store(&guards[i].hi, hi);
            break;
        }
    pthread_mutex_unlock(&guards_mu);
}

static void guard_remove(const struct pprt_source *src) {
    pthread_mutex_lock(&guards_mu);
    for (int i = 0; i < GUARDS; i++)
        if (atomic_load(&guards[i].cut) == &src->cut) {
            atomic_store(&guards[i].hi, 0);
            atomic_store(&guards[i].lo, 0);
            atomic_store(&guards[i].cut, NULL);
        }
    pthread_mutex_unlock(&guards_mu);
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

pp_status pprt_plan_sources_unchanged(const pprt_plan *p, pp_err *err) {
    for (int i = 0; i < p->n_sources; i++) {
        const struct pprt_source *src = &p->sources[i];
        size_t cut = __atomic_load_n(&src->cut, __ATOMIC_RELAXED);
        if (cut != SIZE_MAX)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' was cut short while pprt read it (a read at byte %zu of its "
                           "%zu failed): the run used weights that are not the plan's, so no outputs are "
                           "written", src->path, cut, src->len);
        struct stat sb;
        if (fstat(src->fd, &sb) != 0 || (uint64_t)sb.st_size != src->size || (uint64_t)sb.st_ino != src->ino ||
            (uint64_t)sb.st_dev != src->dev || ns_of(sb.st_mtim) != src->mtime_ns || ns_of(sb.st_ctim) != src->ctime_ns)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' changed while pprt ran (now %lld bytes, modification time %+.3f s "
                           "from the one at load): the run may have read weights that are not the plan's, so no "
                           "outputs are written", src->path, (long long)sb.st_size,
                           (double)(ns_of(sb.st_mtim) - src->mtime_ns) / 1e9);
        uint64_t h = XXH3_64bits(src->map, src->len);
        if (h != src->xxh3)
            return PP_FAIL(err, PP_ERUNTIME,
                           "the weights file '%s' changed while pprt ran (XXH3 %016llx, %016llx at load): the run "
                           "read weights that are not the plan's, so no outputs are written", src->path,
                           (unsigned long long)h, (unsigned long long)src->xxh3);
    }
    return PP_OK;
}

/* Map source i of a --ref-weights plan: a regular file of the recorded size.
 * Its hashes are checked by pprt_plan_verify_sources, once the whole plan has been
 * verified (every EXTERNAL tensor inside the recorded size): a plan that
 * claims a huge file is refused by what is cheap before anything is read. */
static pp_status open_source(const Ppplan__Source *ms, int i, const char *model, struct pprt_source *src,
                             pp_err *err) {
    char path[4096];
    const char *loc = ms->location ? ms->location : "";
    int n;
    if (!model) {
        n = snprintf(path, sizeof path, "%s", ms->path ? ms->path : "");
    } else if (!*loc) {
        n = snprintf(path, sizeof path, "%s", model);
    } else {
        const char *slash = strrchr(model, '/');
        n = slash ? snprintf(path, sizeof path, "%.*s/%s", (int)(slash - model), model, loc)
                  : snprintf(path, sizeof path, "%s", loc);
    }
    if (n < 0 || (size_t)n >= sizeof path || !path[0])
        return PP_FAIL(err, PP_EINVAL, "weights source %d: expected a path of 1..%zu bytes", i, sizeof path - 1);
    src->path = strdup(path);
    if (!src->path) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    const char *what = *loc ? "external data file" : "model file";
    int fd;
    struct stat sb;
    pp_err e = {0};
    if (pp_open_read(path, *loc ? "the external data file" : "the model file", 0, &fd, &sb, &e) != PP_OK)
        return PP_FAIL(err, e.code, "%s: this --ref-weights plan reads its weights from it (pprt --model FILE "
                       "names where the model is now)", e.msg);
    if ((uint64_t)sb.st_size != ms->size || ms->size == 0) {
        close(fd);
        return PP_FAIL(err, PP_EINVAL,
                       "the %s '%s' has %lld bytes, the plan was compiled from one of %llu: not the "
                       "same file (recompile the plan, or pass pprt --model the original)",
                       what, path, (long long)sb.st_size, (unsigned long long)ms->size);
    }
    void *map = mmap(NULL, (size_t)ms->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        close(fd);
        return PP_FAIL(err, e == ENOMEM ? PP_ENOMEM : PP_EIO, "cannot map the %s '%s' (%llu bytes): %s", what, path,
                       (unsigned long long)ms->size, strerror(e));
    }
    src->map = map;
    src->len = (size_t)ms->size;
    /* kept open: pprt_plan_sources_unchanged compares the file with this */
    src->fd = fd;
    src->dev = (uint64_t)sb.st_dev, src->ino = (uint64_t)sb.st_ino, src->size = (uint64_t)sb.st_size;
    src->mtime_ns = ns_of(sb.st_mtim), src->ctime_ns = ns_of(sb.st_ctim);
    src->xxh3 = ms->xxh3;
    guard_add(src); /* before the first read: the file may be cut short already */
    return PP_OK;
}

pp_status pprt_plan_open_sources(pprt_plan *p, const Ppplan__Plan *m, const char *model, pp_err *err) {
    if (!m->n_sources) return PP_OK;
    p->sources = calloc(m->n_sources, sizeof *p->sources);
    if (!p->sources) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n_sources; i++) p->sources[i].fd = -1;
    for (size_t i = 0; i < m->n_sources; i++) {
        p->n_sources = (int)i + 1; /* freed with the plan from here on */
        PP_TRY(open_source(m->sources[i], (int)i, model, &p->sources[i], err));
    }
    return PP_OK;
}

/* Each source is the file the plan was compiled from: first the bytes the
 * plan reads there (used_xxh3: their cost is that of the weights, which are
 * read anyway), so that another file of the same size is refused without
 * reading the rest of it; then the whole file (xxh3), so a model changed
 * elsewhere (a small weight the plan copied, the graph) is refused too. */
pp_status pprt_plan_verify_sources(const pprt_plan *p, const Ppplan__Plan *m, pp_err *err) {
    size_t cap = 0;
    for (int s = 0; s < p->n_stages + p->n_wstages; s++) cap += (size_t)p->stages[s].n_tensors;
    pp_range *rs = malloc(sizeof *rs * (cap ? cap : 1));
    if (!rs) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pp_status st = PP_OK;
    for (int i = 0; i < p->n_sources && st == PP_OK; i++) {
        const struct pprt_source *src = &p->sources[i];
        const char *what = m->sources[i]->location && *m->sources[i]->location ? "external data file" : "model file";
        size_t n = 0;
        for (int s = 0; s < p->n_stages + p->n_wstages; s++)
            for (int k = 0; k < p->stages[s].n_tensors; k++) {
                const pprt_tdesc *t = &p->stages[s].t[k];
                if (t->source == i) rs[n++] = (pp_range){t->offset, t->nbytes};
            }
        uint64_t want = m->sources[i]->used_xxh3, h;
        if (want && (h = pp_ranges_xxh3(src->map, rs, n)) != want)
            st = PP_FAIL(err, PP_EINVAL,
                         "the %s '%s': the bytes this plan reads there (%zu tensor%s) have XXH3 %016llx, the plan "
                         "was compiled from ones with %016llx: the file changed, or is another one (recompile the "
                         "plan, or pass pprt --model the original)",
                         what, src->path, n, n == 1 ? "" : "s", (unsigned long long)h, (unsigned long long)want);
        else if ((h = XXH3_64bits(src->map, src->len)), __atomic_load_n(&src->cut, __ATOMIC_RELAXED) != SIZE_MAX)
            st = PP_FAIL(err, PP_EINVAL, "the %s '%s' was cut short while pprt read it: the file changed "
                         "(recompile the plan, or pass pprt --model the original)", what, src->path);
        else if (h != m->sources[i]->xxh3)
            st = PP_FAIL(err, PP_EINVAL,
                         "the %s '%s' has XXH3 %016llx, the plan was compiled from one with %016llx: "
                         "the file changed (recompile the plan, or pass pprt --model the original)",
                         what, src->path, (unsigned long long)h, (unsigned long long)m->sources[i]->xxh3);
    }
    free(rs);
    return st;
}

void pprt_plan_sources_close(pprt_plan *p) {
    for (int i = 0; i < p->n_sources; i++) {
        if (p->sources[i].map) {
            guard_remove(&p->sources[i]);
            munmap((void *)p->sources[i].map, p->sources[i].len);
        }
        if (p->sources[i].fd >= 0) close(p->sources[i].fd);
        free((char *)p->sources[i].path);
    }
    free(p->sources);
}

pp_status pprt_stage_weight(const pprt_plan *p, int stage, int tid, pp_err *err) {
    pprt_tdesc *t = &p->stages[stage].t[tid]; /* the plan is const to its users; this fills a cache */
    if (t->kind != PPRT_WEIGHT || t->data) return PP_OK;
    /* mapped, not malloc'ed: freed copies go back to the system at once
     * (malloc would keep many of them in its heap) */
    void *d = mmap(NULL, t->nbytes ? t->nbytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
        return PP_FAIL(err, PP_ENOMEM, "stage %d: cannot allocate %zu bytes for weight '%s'", stage,
                       t->nbytes, t->name);
    memcpy(d, p->sources[t->source].map + t->offset, t->nbytes);
    t->data = d;
    t->copy = true;
    return PP_OK;
}

pp_status pprt_stage_weights(const pprt_plan *p, int stage, pp_err *err) {
    for (int i = 0; i < p->stages[stage].n_tensors; i++) PP_TRY(pprt_stage_weight(p, stage, i, err));
    return PP_OK;
}

void pprt_stage_weight_release(const pprt_plan *p, int stage, int tid) {
    pprt_tdesc *t = &p->stages[stage].t[tid];
    if (!t->copy) return;
    munmap((void *)t->data, t->nbytes ? t->nbytes : 1);
    t->data = NULL;
    t->copy = false;
}
