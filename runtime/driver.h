/* driver.h: how pprt runs a plan, chosen once at start-up: as threads of
 * this process (sched.c: every stage here) or as MPI ranks
 * (comm/driver_mpi.c: one stage per rank). pprt's main loads the plan and
 * the data, runs, writes and reports through this table, with no branch of
 * its own on which driver it has. */
#ifndef PPRT_DRIVER_H
#define PPRT_DRIVER_H

#include <stdio.h>

#include "pprt.h"

typedef struct pprt_driver pprt_driver;
struct pprt_train_opts;
struct pprt_train_dist;

typedef struct pprt_driver_ops {
    const char *name;
    /* After the plan is loaded: take this process's part of it (MPI: the
     * rank's stage); NULL: nothing to do. */
    pp_status (*bind)(pprt_driver *d, const pprt_plan *p, pp_err *err);
    /* Whether this process reads the data, and writes the outputs and the
     * report (the threaded driver: both). */
    bool (*reads_data)(const pprt_driver *d);
    bool (*writes_outputs)(const pprt_driver *d);
    /* The cores one stage's threads may share with `*sharers` stages of
     * this process (for --threads' oversubscription check). */
    void (*cores)(const pprt_driver *d, const pprt_plan *p, long *cores, long *sharers);
    /* As pprt_run: on the process that reads the data, inputs and *n are
     * the data; elsewhere *n receives the sample count. */
    pp_status (*run)(pprt_driver *d, const pprt_plan *p, const pprt_array *inputs, int64_t *n, pprt_array *outputs,
                     const pprt_run_opts *o, pprt_stats *stats, pp_err *err);
    /* Training (train.h): this process's part of the ranks (MPI: the
     * plan and the options compared across the ranks first); NULL: the
     * trainer runs every stage here, on threads. */
    pp_status (*train)(pprt_driver *d, const pprt_plan *p, const struct pprt_train_opts *o, const pprt_run_opts *ro,
                       struct pprt_train_dist *out, pp_err *err);
    /* An extra line of the report, or NULL. */
    void (*describe)(const pprt_driver *d, const pprt_plan *p, FILE *f);
    /* End the run with status s and return the process's exit code. A
     * failure is printed here (MPI: and every other rank is told and ends
     * too). Frees the driver. */
    int (*finish)(pprt_driver *d, pp_status s, const pp_err *err);
} pprt_driver_ops;

struct pprt_driver {
    const pprt_driver_ops *ops;
};

/* Every stage a thread of this process. */
pprt_driver *pprt_driver_threads(void);

/* One stage per rank, when an MPI launcher started this process: MPI is
 * initialized (argc, argv may change). A build without MPI refuses, saying
 * how to get it. */
/* What carries a boundary between two device stages on two ranks (pprt
 * --transport): AUTO is NCCL when every stage is on a GPU (backend cuda, a
 * build with NCCL), else MPI; MPI stages device buffers through pinned host
 * memory on both sides; NCCL sends them GPU to GPU (cuda-emu: an emulation
 * of NCCL over MPI, comm/p2p_emu.c). A boundary with a host stage at either
 * end always goes over MPI. */
enum { PPRT_TRANSPORT_AUTO = 0, PPRT_TRANSPORT_MPI, PPRT_TRANSPORT_NCCL };

typedef struct pprt_mpi_cfg {
    int replicas;      /* data-parallel pipelines (>= 1) */
    double timeout_s;  /* silence from a rank after which it is presumed dead */
    const char *agree; /* the options every rank must share, as text (comm.h), or NULL */
    int transport;     /* PPRT_TRANSPORT_* */
} pprt_mpi_cfg;
pp_status pprt_driver_mpi(int *argc, char ***argv, const pprt_mpi_cfg *c, pprt_driver **out, pp_err *err);

#endif
