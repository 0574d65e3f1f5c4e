/* backend_cuda.c: the CUDA backends in the registry (backend.h):
 *   cuda-emu  the step list of plan_cuda.c run on the host by emu.c; built
 *             always (it needs no CUDA), the oracle of the GPU engine;
 *   cuda      the step list on GPUs (exec_cuda.c), in builds with CUDA: a
 *             stand-in row here, the CUDA module's table (module_cuda.c, in
 *             pprt_cuda.so) once a stage or --backend asks for it; then
 *             unavailable where no device answers, with the driver's words.
 * Their command-line options come from options.c. Both keep their messages
 * on a device: the links (link/link.h) put them in the memory spaces of
 * mem_cuda.c (GPUs, in the module) and mem_emu.c (the emulated devices,
 * host memory registered as theirs) and copy them between spaces. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../backend.h"
#include "../module.h"
#include "cuda_backend.h"
#include "cuplan.h"
#include "mem_emu.h"

#ifdef PPRT_HAVE_CUDA_MODULE

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool tried;                   /* the module was asked for */
static const pprt_cuda_module *mod;  /* and loaded */
static pp_err load_err;              /* else why not */

const pprt_cuda_module *pprt_cuda_module_get(pp_err *err) {
    pthread_mutex_lock(&mu);
    if (!tried) {
        tried = true;
        void *sym;
        char path[PATH_MAX];
        if (pprt_module_open(PPRT_CUDA_MODULE_FILE, PPRT_CUDA_MODULE_ENV, PPRT_CUDA_MODULE_ENTRY, &sym, path,
                             sizeof path, &load_err) == PP_OK) {
            const pprt_cuda_module *(*entry)(void);
            memcpy(&entry, &sym, sizeof entry); /* POSIX: dlsym's object pointer is the function */
            const pprt_cuda_module *m = entry();
            static const unsigned layout[] = PPRT_CUDA_MODULE_LAYOUT;
            _Static_assert(sizeof layout == sizeof m->layout, "PPRT_CUDA_MODULE_LAYOUT and pprt_cuda_module.layout");
            if (!m || m->abi != PPRT_MODULE_ABI || !m->version || strcmp(m->version, PPRT_VERSION) || !m->backend)
                PP_FAIL(&load_err, PP_EUNSUP, "module %s was built for another pprt (module ABI %d, pprt %s; this "
                        "pprt: ABI %d, %s): install pprt and its modules together", path, m ? m->abi : -1,
                        m && m->version ? m->version : "?", PPRT_MODULE_ABI, PPRT_VERSION);
            else if (memcmp(m->layout, layout, sizeof layout))
                PP_FAIL(&load_err, PP_EUNSUP, "module %s was built from other sources than this pprt (the tables "
                        "they share differ: a stale build?): build or install pprt and its modules together", path);
            else
                mod = m;
        }
    }
    const pprt_cuda_module *m = mod;
    pthread_mutex_unlock(&mu);
    if (!m && err) *err = load_err;
    return m;
}

static const pprt_backend *cuda_load(pp_err *err) {
    const pprt_cuda_module *m = pprt_cuda_module_get(err);
    return m ? m->backend : NULL;
}

/* Without loading: why the module cannot be (not found, or a load that
 * failed), else NULL (whether a GPU answers is the module's to say). */
static const char *stub_unavailable(void) {
    static char why[sizeof load_err.msg];
    pthread_mutex_lock(&mu);
    const bool failed = tried && !mod;
    pthread_mutex_unlock(&mu);
    if (failed) {
        snprintf(why, sizeof why, "%s", load_err.msg);
        return why;
    }
    char path[PATH_MAX];
    if (mod || pprt_module_find(PPRT_CUDA_MODULE_FILE, PPRT_CUDA_MODULE_ENV, path, sizeof path, why, sizeof why))
        return NULL;
    return why;
}

/* The registry's row until the module is loaded: what listing it needs,
 * and load. */
const pprt_backend pprt_backend_cuda = {
    .name = "cuda",
    .what = "GPUs: cuDNN graphs, cuBLASLt matmuls, pprt's kernels, host fallback (docs/cuda.md); module "
            PPRT_CUDA_MODULE_FILE ", loaded when a stage runs on it",
    .unavailable = stub_unavailable,
    .route = pcu_op_route,
    .mem = PPRT_MEM_DEVICE,
    .opts = &pprt_cuda_opts,
    .load = cuda_load,
};

#endif

/* The CUDA libraries' versions, from the module when it is loaded; else
 * where it is, without loading it. */
static void cuda_describe(FILE *f) {
#ifdef PPRT_HAVE_CUDA_MODULE
    pthread_mutex_lock(&mu);
    const pprt_cuda_module *m = mod;
    const bool failed = tried && !mod;
    pthread_mutex_unlock(&mu);
    char v[PATH_MAX + 128], why[sizeof load_err.msg];
    if (m) m->versions(v, sizeof v);
    else if (failed) snprintf(v, sizeof v, "%s", load_err.msg);
    else if (pprt_module_find(PPRT_CUDA_MODULE_FILE, PPRT_CUDA_MODULE_ENV, v, PATH_MAX, why, sizeof why))
        snprintf(v + strlen(v), sizeof v - strlen(v), " (not loaded: pprt --backend cuda --version loads it and "
                 "names its CUDA libraries)");
    else snprintf(v, sizeof v, "%s", why);
    fprintf(f, "  cuda: %s\n", v);
#else
    fprintf(f, "  cuda: built without CUDA (--backend cuda-emu only)\n");
#endif
}

/* The emulator takes every precision the engine does, and as the engine
 * changes only the libraries' compute types (every tensor stays f32), so
 * does the emulator: its products read A and B rounded as cuBLASLt's
 * compute type reads them (pcu_lt_round). cuDNN's engines at tf32, bf16 and
 * fp16 may or may not round a convolution's inputs to TF32 (which engine
 * heuristics pick decides): the emulator's convolutions stay f32. */
static bool emu_precision(pprt_precision pr, bool *here) {
    *here = pr == PPRT_F32 || pr == PPRT_TF32 || pr == PPRT_BF16 || pr == PPRT_FP16;
    return true;
}

const pprt_backend pprt_backend_cuda_emu = {
    .name = "cuda-emu",
    .what = "the cuda backend's step list run on the host (docs/cuda.md): how CI checks it without a GPU",
    .route = pcu_op_route,
    .exec = &pprt_exec_cuda_emu,
    .mem = PPRT_MEM_DEVICE,
    .space = &pprt_mem_cuda_emu,
    .precision = emu_precision,
    .describe = cuda_describe,
    .opts = &pprt_cuda_opts,
};
