/* comm.h: running a plan's stages on MPI ranks (`mpirun -np K pprt ...`).
 *
 * Rank r of K*R runs stage r % K of replica r / K. Rank 0 reads the data and
 * hands each replica its contiguous share of micro-batches; the last rank of
 * replica 0 (rank K-1, the "writer") gathers the outputs, in input order, and
 * the statistics. Boundary messages move with MPI_Isend/MPI_Irecv, at least
 * --depth buffers on each side of a boundary, so transfers overlap compute.
 *
 * One thread per rank (the engine, engine.c) makes every MPI call: it posts
 * and tests requests, sends heartbeats to every other rank and watches
 * theirs. A rank that fails tells every other at once (an abort message); a
 * rank that dies or hangs in MPI is noticed when nothing came from it for the
 * timeout. Either way every rank exits nonzero within the timeout, naming the
 * rank and the operation, never hanging.
 *
 * pprt_mpi_launcher_env and pprt_mpi_env_rank work in every build; the rest
 * exists only when the build found MPI (PPRT_HAVE_MPI). */
#ifndef PPRT_COMM_H
#define PPRT_COMM_H

#include "../pprt.h"

/* The environment variable (NAME=VALUE) saying an MPI launcher started this
 * process (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...), or
 * NULL. Points into a static buffer. */
const char *pprt_mpi_launcher_env(void);
/* This process's rank as the launcher's environment gives it, -1 if none. */
int pprt_mpi_env_rank(void);
/* Ranks of the job on this machine, from the launcher's variables (1 when unknown). */
int pprt_mpi_env_local_size(void);
/* This process's rank among them (-1 when unknown). */
int pprt_mpi_env_local_rank(void);

#ifdef PPRT_HAVE_MPI

typedef struct pprt_mpi pprt_mpi;

typedef struct pprt_mpi_opts {
    int replicas;     /* data-parallel pipelines (>= 1) */
    double timeout_s; /* silence from a rank after which it is presumed dead */
    /* the options that change what a run computes or reports, as text
     * ("--backend dnnl --precision f32 ..."; NULL: none): rank 0 compares
     * every rank's with its own, and a difference is an error on every rank */
    const char *agree;
    int transport;    /* PPRT_TRANSPORT_* (driver.h) */
} pprt_mpi_opts;

/* MPI_Init_thread, MPI_ERRORS_RETURN on MPI_COMM_WORLD, start the engine. */
pp_status pprt_mpi_start(int *argc, char ***argv, const pprt_mpi_opts *o, pprt_mpi **out, pp_err *err);
int pprt_mpi_rank(const pprt_mpi *m);
int pprt_mpi_size(const pprt_mpi *m);
/* Assign this rank its stage and replica: the plan's stages times --replicas
 * must equal the number of ranks. */
pp_status pprt_mpi_bind(pprt_mpi *m, const pprt_plan *p, pp_err *err);
bool pprt_mpi_reads_data(const pprt_mpi *m);    /* rank 0 */
bool pprt_mpi_writes_outputs(const pprt_mpi *m); /* rank K-1 */

/* Run this rank's part of the pipeline. On rank 0, inputs and *n are the
 * data (as for pprt_run); elsewhere they are ignored and *n receives the
 * sample count. On the writer, outputs and stats are filled as by pprt_run
 * (outputs in input order, busy time per stage summed over the replicas,
 * utilization and bubble over stages x replicas x wall); elsewhere outputs
 * stay NULL and stats zero. */
pp_status pprt_run_mpi(pprt_mpi *m, const pprt_plan *p, const pprt_array *inputs, int64_t *n,
                       pprt_array *outputs, const pprt_run_opts *o, pprt_stats *stats, pp_err *err);

/* End this rank and return its exit code; `s` is its status (on the writer,
 * the final one: outputs written, --check done). A success everywhere: the
 * writer's verdict goes to every rank, all pass a final barrier, MPI is
 * finalized. A failure: this rank prints it, tells every other rank (which
 * print what stopped them and exit with the same code), waits briefly for
 * their acknowledgements and ends the process. The caller prints nothing. */
int pprt_mpi_finish(pprt_mpi *m, pp_status s, const pp_err *err);

/* Training (train_mpi.c): after pprt_mpi_bind on a ppcc --train plan (a
 * rank per device of each replica), the plan and options compared across
 * the ranks, and *out set up for pprt_train (train.h). */
struct pprt_train_opts;
struct pprt_train_dist;
pp_status pprt_train_mpi(pprt_mpi *m, const pprt_plan *p, const struct pprt_train_opts *o, const pprt_run_opts *ro,
                         struct pprt_train_dist *out, pp_err *err);

#endif
#endif
