/* driver_threads.c: the threaded driver (driver.h): every stage a thread
 * of this process, run by pprt_run (sched.c). */
#include <stdio.h>

#include "driver.h"

static bool yes(const pprt_driver *d) { return (void)d, true; }

static void thread_cores(const pprt_driver *d, const pprt_plan *p, long *cores, long *sharers) {
    (void)d;
    *cores = pprt_cpus_allowed(NULL, 0);
    *sharers = p->n_stages;
}

static pp_status thread_run(pprt_driver *d, const pprt_plan *p, const pprt_array *inputs, int64_t *n,
                            pprt_array *outputs, const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    (void)d;
    return pprt_run(p, inputs, *n, outputs, o, stats, err);
}

static int thread_finish(pprt_driver *d, pp_status s, const pp_err *err) {
    (void)d;
    if (s == PP_OK) return 0;
    fprintf(stderr, "pprt: error: %s\n", err->msg);
    return pp_exit_code(s);
}

static const pprt_driver_ops threads_ops = {
    .name = "threads",
    .reads_data = yes,
    .writes_outputs = yes,
    .cores = thread_cores,
    .run = thread_run,
    .finish = thread_finish,
};

static pprt_driver threads_driver = {&threads_ops};

pprt_driver *pprt_driver_threads(void) { return &threads_driver; }
