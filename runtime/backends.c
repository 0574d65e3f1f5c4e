/* backends.c: the registry (backend.h): the rows of backends.def, then what
 * pprt_backend_register adds. A module backend's row is its stand-in until
 * its module is loaded, then the module's table (module.h). */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define PPRT_BACKEND(n) extern const pprt_backend pprt_backend_##n;
#include "backends.def"
#undef PPRT_BACKEND

static const pprt_backend *builtin[] = {
#define PPRT_BACKEND(n) &pprt_backend_##n,
#include "backends.def"
#undef PPRT_BACKEND
};
enum { N_BUILTIN = sizeof builtin / sizeof builtin[0], MAX_EXTRA = 16 };

static const pprt_backend *extra[MAX_EXTRA];
static int n_extra;

int pprt_backend_count(void) { return N_BUILTIN + n_extra; }

const pprt_backend *pprt_backend_at(int i) {
    if (i < 0 || i >= pprt_backend_count()) return NULL;
    return i < N_BUILTIN ? builtin[i] : extra[i - N_BUILTIN];
}

/* Row i with its module loaded (a module backend's stand-in: the module's
 * table replaces it); NULL with err filled when the module cannot be. */
static const pprt_backend *loaded(int i, pp_err *err) {
    const pprt_backend *b = pprt_backend_at(i);
    if (!b || !b->load) return b;
    const pprt_backend *m = b->load(err);
    if (!m) return NULL;
    if (i < N_BUILTIN) builtin[i] = m;
    else extra[i - N_BUILTIN] = m;
    return m;
}

static int index_of(const char *name) {
    for (int i = 0; i < pprt_backend_count(); i++)
        if (!strcmp(pprt_backend_at(i)->name, name)) return i;
    return -1;
}

const pprt_backend *pprt_backend_find(const char *name) {
    const int i = index_of(name);
    if (i < 0) return NULL;
    pp_err e = {0};
    const pprt_backend *m = loaded(i, &e);
    return m ? m : pprt_backend_at(i); /* the stand-in: its unavailable() says why */
}

const pprt_backend *pprt_backend_default(void) {
    for (int i = 0; i < N_BUILTIN; i++)
        if (!builtin[i]->unavailable || !builtin[i]->unavailable()) return builtin[i];
    return builtin[N_BUILTIN - 1];
}

const pprt_backend *pprt_backend_fallback(void) {
    for (int i = 0; i < N_BUILTIN; i++)
        if (builtin[i]->run_node && builtin[i]->mem == PPRT_MEM_HOST) return builtin[i];
    return NULL;
}

pp_status pprt_backend_register(const pprt_backend *b, pp_err *err) {
    if (!b || !b->name || !b->exec)
        return PP_FAIL(err, PP_EINVAL, "a backend needs a name and an executor table");
    if (index_of(b->name) >= 0) return PP_FAIL(err, PP_EINVAL, "backend '%s' is already registered", b->name);
    if (n_extra == MAX_EXTRA) return PP_FAIL(err, PP_EUNSUP, "at most %d backends can be registered", MAX_EXTRA);
    extra[n_extra++] = b;
    return PP_OK;
}

void pprt_backend_names(char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < pprt_backend_count() && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", pprt_backend_at(i)->name);
        if (w < 0) break;
        len += (size_t)w;
    }
}

const pprt_mem_ops *pprt_backend_space(const pprt_backend *b) {
    return b->mem == PPRT_MEM_DEVICE && b->space ? b->space : &pprt_mem_host;
}

/* The device index of stage s among the plan's devices: s, but in a
 * training plan the device whose ops it runs (forward stage d, backward
 * stage 2P-1-d and W stage 2P+d of device d share one GPU). */
static int device_index(const pprt_plan *p, int s) {
    const int P = p->train_devices;
    if (P <= 0) return s;
    return s < P ? s : s < 2 * P ? 2 * P - 1 - s : s - 2 * P;
}

pp_status pprt_stage_place(const pprt_plan *p, int s, const pprt_backend *b, int local_rank, pprt_place *out,
                           pp_err *err) {
    *out = pprt_place_host();
    if (b->mem != PPRT_MEM_DEVICE) return PP_OK;
    if (!b->space) return PP_FAIL(err, PP_ERUNTIME, "internal: backend '%s' keeps its messages on a device but names "
                                  "no memory space", b->name);
    out->mem = b->space;
    pp_err e = {0};
    /* without a local rank (threads), a training plan's device index stands in for it */
    const int idx = local_rank >= 0 || p->train_devices <= 0 ? local_rank : device_index(p, s);
    if (b->space->device(&p->stages[s], idx, &out->device, &e) != PP_OK)
        return PP_FAIL(err, e.code, "stage %d on %s: %s", s, b->name, e.msg);
    return PP_OK;
}

pp_status pprt_stage_place_replica(const pprt_plan *p, int s, const pprt_backend *b, int r, pprt_place *out,
                                   pp_err *err) {
    if (r <= 0) return pprt_stage_place(p, s, b, -1, out, err);
    const int per = p->train_devices > 0 ? p->train_devices : p->n_stages;
    return pprt_stage_place(p, s, b, r * per + device_index(p, s), out, err);
}

void pprt_node_ctx_free(pprt_node_ctx *c) { pprt_scratch_free(&c->scratch); }

pp_status pprt_stage_backend_resolve(const pprt_plan *p, int s, const pprt_backend *override, const pprt_backend **out,
                                     pp_err *err) {
    const char *name = p->stages[s].backend ? p->stages[s].backend : "";
    const pprt_backend *b = override ? override : !*name || !strcmp(name, "cpu") ? pprt_backend_default()
                                                                               : pprt_backend_find(name);
    if (!b) {
        char names[256];
        pprt_backend_names(names, sizeof names);
        const char *like = pp_backend_suggest(name);
        if (like && !pprt_backend_find(like)) like = NULL;
        return PP_FAIL(err, PP_EUNSUP,
                       "stage %d is placed on backend '%s' (ppcc --placement), which this pprt does not have (it has: "
                       "%s%s%s%s); pprt --backend NAME runs every stage on another", s, name, names,
                       like ? "; did you mean '" : "", like ? like : "", like ? "'?" : "");
    }
    if (!strcmp(name, "cpu") && !override && b->mem != PPRT_MEM_HOST) b = pprt_backend_fallback();
    if (b->load) { /* a module backend's stand-in (--backend, a listing): its module now */
        pp_err e = {0};
        const pprt_backend *m = loaded(index_of(b->name), &e);
        if (!m) return PP_FAIL(err, e.code, "stage %d on backend '%s': %s", s, b->name, e.msg);
        b = m;
    }
    *out = b;
    return PP_OK;
}

pp_status pprt_stage_backend(const pprt_plan *p, int s, const pprt_backend *override, const pprt_backend **out,
                             pp_err *err) {
    const pprt_backend *b;
    PP_TRY(pprt_stage_backend_resolve(p, s, override, &b, err));
    const char *why = b->unavailable ? b->unavailable() : NULL;
    if (why)
        return PP_FAIL(err, PP_EUNSUP, "stage %d: backend '%s' is not available here: %s", s, b->name, why);
    *out = b;
    return PP_OK;
}
