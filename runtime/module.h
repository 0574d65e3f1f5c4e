/* module.h: the backends built as shared modules (a backend whose libraries
 * are too heavy to map in every run: the CUDA backend's cudart, cuBLASLt,
 * cuDNN and NCCL). pprt links none of their libraries; the registry's row
 * of such a backend is a stand-in (backend.h: load) that opens the module
 * with dlopen the first time a stage is placed on it or --backend names it.
 *
 * Where a module is looked for, first found wins:
 *   1. the environment variable the backend names (PPRT_CUDA_MODULE), a path;
 *   2. beside the executable (the build tree: build/pprt_cuda.so);
 *   3. ../lib/pprt/ from the executable's folder (cmake --install: bin/pprt,
 *      lib/pprt/pprt_cuda.so).
 * The executable's folder comes from /proc/self/exe. */
#ifndef PPRT_MODULE_H
#define PPRT_MODULE_H

#include <stddef.h>

#include "../ir/base.h"

/* Bumped whenever a table a module hands the registry changes (backend.h,
 * exec.h, mem.h, the module's own entry struct): a module built against
 * other headers is refused by name rather than called. */
#define PPRT_MODULE_ABI 1

/* Where module `file` would be loaded from (see above) into path; false
 * when no candidate exists, with why (when not NULL) saying so: "module
 * /x.so not found (PPRT_CUDA_MODULE names it)", or the places looked in.
 * Loads nothing. */
bool pprt_module_find(const char *file, const char *env, char *path, size_t cap, char *why, size_t why_cap);

/* Open module `file` (found as above; RTLD_NOW, so a library or symbol it
 * lacks fails here, not mid-run) and return its symbol `entry` in *sym;
 * the path it was opened from in path. A failure names the path and
 * dlerror()'s words ("libcublasLt.so.13: cannot open shared object file:
 * No such file or directory"), with PP_EUNSUP. Never unloaded. */
pp_status pprt_module_open(const char *file, const char *env, const char *entry, void **sym, char *path, size_t cap,
                           pp_err *err);

#endif
