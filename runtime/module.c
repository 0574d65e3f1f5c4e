/* module.c: finding and opening a backend's shared module (module.h). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

/* The folder of the running executable (no trailing slash), or "" when
 * /proc/self/exe cannot be read. */
static void exe_dir(char *dir, size_t cap) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    dir[0] = '\0';
    if (n <= 0) return;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(dir, cap, "%s", buf);
}

bool pprt_module_find(const char *file, const char *env, char *path, size_t cap, char *why, size_t why_cap) {
    const char *e = env ? getenv(env) : NULL;
    if (why && why_cap) why[0] = '\0';
    if (e && *e) { /* named explicitly: that file or nothing */
        snprintf(path, cap, "%s", e);
        if (access(e, R_OK) == 0) return true;
        if (why && why_cap) snprintf(why, why_cap, "module %s not found (%s names it)", e, env);
        return false;
    }
    char dir[PATH_MAX];
    exe_dir(dir, sizeof dir);
    if (!*dir) {
        snprintf(path, cap, "%s", file);
        if (why && why_cap) snprintf(why, why_cap, "module %s not found (/proc/self/exe unreadable; %s names it)", file, env);
        return false;
    }
    static const char *const where[] = {"%s/%s", "%s/../lib/pprt/%s"};
    char tried[2 * PATH_MAX + 8];
    size_t len = 0;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(path, cap, where[i], dir, file);
        if (len < sizeof tried) {
            int w = snprintf(tried + len, sizeof tried - len, "%s%s", i ? ", " : "", path);
            if (w > 0) len += (size_t)w;
        }
        if (access(path, R_OK) == 0) return true;
    }
    if (why && why_cap) snprintf(why, why_cap, "module %s not found (looked for %s; %s names it)", file, tried, env);
    return false;
}

pp_status pprt_module_open(const char *file, const char *env, const char *entry, void **sym, char *path, size_t cap,
                           pp_err *err) {
    char why[sizeof err->msg];
    *sym = NULL;
    if (!pprt_module_find(file, env, path, cap, why, sizeof why)) return PP_FAIL(err, PP_EUNSUP, "%s", why);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return PP_FAIL(err, PP_EUNSUP, "cannot load module %s: %s", path, why ? why : "dlopen failed");
    }
    dlerror();
    *sym = dlsym(h, entry);
    if (!*sym) {
        const char *why = dlerror();
        pp_status st = PP_FAIL(err, PP_EUNSUP, "module %s has no entry point %s: %s", path, entry, why ? why : "not found");
        dlclose(h); /* (after the message: dlerror's text may go with it) */
        return st;
    }
    return PP_OK;
}
