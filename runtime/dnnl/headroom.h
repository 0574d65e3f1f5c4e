/* headroom.h: room in the address space for a library that cannot fail
 * cleanly when memory runs out (oneDNN: its C++ allocations throw
 * std::bad_alloc through its C API, and a failed mmap of a JIT code buffer
 * makes it write through a null pointer). Under a limit (ulimit -v: the
 * soft RLIMIT_AS, or ulimit -d: RLIMIT_DATA) the executor reserves room
 * before each call that may allocate, and fails cleanly when there is none;
 * without a limit these cost nothing. Calls are serialized under a limit,
 * so that two stages never count on the same free bytes. A memory cgroup's
 * limit is not seen here: its OOM killer ends the process. */
#ifndef PPRT_HEADROOM_H
#define PPRT_HEADROOM_H

#include "../../ir/base.h"

/* What a oneDNN node build or first run may take at once (measured: up to
 * 20 MiB of JIT code, reorders and caches per node on ResNet-50; a new
 * malloc arena adds 64 MiB, which glibc gives up on gracefully). */
#define PPRT_HEADROOM_BYTES ((size_t)64 << 20)

/* Whether the process runs under an address-space or data limit. */
bool pprt_headroom_limited(void);
/* The bytes `threads` OpenMP threads that this thread may still start take
 * for their stacks (0 once its team had that many threads; `commit` records
 * that it has them now). */
size_t pprt_headroom_team(int threads, bool commit);
/* Under a limit: wait for the other callers, then check that `need` bytes
 * can still be mapped. PP_OK (then call pprt_headroom_leave after the
 * library call) or PP_ENOMEM saying how much is free of the limit. */
pp_status pprt_headroom_enter(size_t need, pp_err *err);
void pprt_headroom_leave(void);

#endif
