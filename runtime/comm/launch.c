/* launch.c: is this process one rank of an MPI job? Read from the variables
 * the launchers set (Open MPI, MPICH/Hydra and other PMI launchers, PMIx,
 * MVAPICH), so it needs no MPI library: a build without MPI uses it to refuse
 * to run under mpirun rather than run the whole plan K times. */
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"

static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                        "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE", NULL};
static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "MV2_COMM_WORLD_RANK", NULL};

const char *pprt_mpi_launcher_env(void) {
    static char buf[160];
    for (int i = 0; size_vars[i]; i++) {
        const char *v = getenv(size_vars[i]);
        if (v && *v) {
            snprintf(buf, sizeof buf, "%s=%.100s", size_vars[i], v);
            return buf;
        }
    }
    return NULL;
}

/* The first of vars holding a whole number in lo .. 999999, else -1. */
static int env_first(const char *const *vars, long lo) {
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= lo && r < 1000000) return (int)r;
    }
    return -1;
}

int pprt_mpi_env_rank(void) { return env_first(rank_vars, 0); }

int pprt_mpi_env_local_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "MV2_COMM_WORLD_LOCAL_SIZE", "PMI_LOCAL_SIZE", NULL};
    const int n = env_first(vars, 1);
    return n > 0 ? n : 1;
}

int pprt_mpi_env_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                                       "PMI_LOCAL_RANK", "SLURM_LOCALID", NULL};
    return env_first(vars, 0);
}
