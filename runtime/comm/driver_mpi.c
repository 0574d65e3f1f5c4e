/* driver_mpi.c: the MPI driver (driver.h): one stage per rank, over the
 * engine of engine.c and the pipeline of sched_mpi.c. In a build without
 * MPI it only refuses, saying how to get it. */
#include <stdio.h>
#include <stdlib.h>

#include "../driver.h"
#include "comm.h"

#ifdef PPRT_HAVE_MPI

typedef struct {
    pprt_driver base;
    pprt_mpi *m;
    int replicas;
} mpi_driver;

static pprt_mpi *M(const pprt_driver *d) { return ((const mpi_driver *)d)->m; }

static pp_status mpi_bind(pprt_driver *d, const pprt_plan *p, pp_err *err) { return pprt_mpi_bind(M(d), p, err); }
static bool mpi_reads(const pprt_driver *d) { return pprt_mpi_reads_data(M(d)); }
static bool mpi_writes(const pprt_driver *d) { return pprt_mpi_writes_outputs(M(d)); }

static void mpi_cores(const pprt_driver *d, const pprt_plan *p, long *cores, long *sharers) {
    (void)d, (void)p;
    *cores = pprt_rank_cores(pprt_mpi_env_local_size());
    *sharers = 1;
}

static pp_status mpi_run(pprt_driver *d, const pprt_plan *p, const pprt_array *inputs, int64_t *n,
                         pprt_array *outputs, const pprt_run_opts *o, pprt_stats *stats, pp_err *err) {
    return pprt_run_mpi(M(d), p, inputs, n, outputs, o, stats, err);
}

static pp_status mpi_train(pprt_driver *d, const pprt_plan *p, const struct pprt_train_opts *o,
                           const pprt_run_opts *ro, struct pprt_train_dist *out, pp_err *err) {
    return pprt_train_mpi(M(d), p, o, ro, out, err);
}

static void mpi_describe(const pprt_driver *d, const pprt_plan *p, FILE *f) {
    const int r = ((const mpi_driver *)d)->replicas;
    fprintf(f, "mpi: %d ranks, %d replica%s of %d stage%s (busy summed over replicas, utilization and bubble "
               "over stages x replicas)\n", pprt_mpi_size(M(d)), r, r == 1 ? "" : "s", p->n_stages,
            p->n_stages == 1 ? "" : "s");
}

static int mpi_finish(pprt_driver *d, pp_status s, const pp_err *err) {
    fflush(stdout);
    int rc = pprt_mpi_finish(M(d), s, err); /* prints an error itself */
    free(d);
    return rc;
}

static const pprt_driver_ops mpi_ops = {
    .name = "mpi",
    .bind = mpi_bind,
    .reads_data = mpi_reads,
    .writes_outputs = mpi_writes,
    .cores = mpi_cores,
    .run = mpi_run,
    .train = mpi_train,
    .describe = mpi_describe,
    .finish = mpi_finish,
};

pp_status pprt_driver_mpi(int *argc, char ***argv, const pprt_mpi_cfg *c, pprt_driver **out, pp_err *err) {
    *out = NULL;
    mpi_driver *d = calloc(1, sizeof *d);
    if (!d) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    pprt_mpi_opts mo = {.replicas = c->replicas, .timeout_s = c->timeout_s, .agree = c->agree,
                        .transport = c->transport};
    pp_status s = pprt_mpi_start(argc, argv, &mo, &d->m, err);
    if (s != PP_OK) {
        free(d);
        return s;
    }
    d->base.ops = &mpi_ops;
    d->replicas = c->replicas;
    *out = &d->base;
    return PP_OK;
}

#else

pp_status pprt_driver_mpi(int *argc, char ***argv, const pprt_mpi_cfg *c, pprt_driver **out, pp_err *err) {
    (void)argc, (void)argv, (void)c;
    *out = NULL;
    const char *launcher = pprt_mpi_launcher_env();
    return PP_FAIL(err, PP_EUNSUP,
                   "this pprt was built without MPI, so it cannot run under mpirun (the environment has %s); "
                   "rebuild it with MPI (apt-get install libopenmpi-dev openmpi-bin, then cmake -DPP_WITH_MPI=ON)",
                   launcher ? launcher : "no launcher variable");
}

#endif
