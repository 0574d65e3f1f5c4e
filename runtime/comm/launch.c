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

int pprt_mpi_env_rank(void) {
    for (int i = 0; rank_vars[i]; i++) {
        const char *v = getenv(rank_vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < 1000000) return (int)r;
    }
    return -1;
}

int pprt_mpi_env_local_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "MV2_COMM_WORLD_LOCAL_SIZE", "PMI_LOCAL_SIZE", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 1 && r < 1000000) return (int)r;
    }
    return 1;
}
