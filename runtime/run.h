/* run.h: what both drivers of a run share (sched.c: the stages as threads
 * of this process; comm/sched_mpi.c: one stage per MPI rank), internal to
 * the runtime. The host's side of it (host.c) here; the public part of
 * host.c (pprt_cpus_allowed, pprt_device_kind, pprt_rss_now,
 * pprt_rank_cores) is in pprt.h. */
#ifndef PPRT_RUN_H
#define PPRT_RUN_H

#include <stddef.h>

#include "pprt.h"

/* ---- the host (host.c) ------------------------------------------------------------------ */

/* "0-3,8": the n CPUs of ids (increasing) as ranges, into buf; ending in
 * ",..." where the rest does not fit. */
void pprt_cpu_list(const int *ids, int n, char *buf, size_t cap);
/* The process's peak resident set so far, bytes (getrusage; 0 where that fails). */
size_t pprt_peak_rss(void);

#endif
