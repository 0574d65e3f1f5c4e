/* pool.h: large host buffers kept for reuse from one run to the next.
 *
 * Training runs the pipeline once a step (runtime/train.c): every step its
 * executors' arenas, the links' messages and the stash are allocated anew
 * and freed at its end. glibc hands blocks that large to the kernel and
 * back (mmap), so each step faulted its pages in again: on ResNet-50 at
 * batch 8 about 2 s of system time a step on the AMD Zen 4 VM, a quarter of
 * the step's CPU time. While the trainer keeps the pool (pprt_pool_keep), a
 * freed block of 1 MiB or more waits in it for an allocation of exactly its
 * size, which the next step makes in the same order; pprt_pool_trim, once a
 * step, gives back those no allocation took since the last trim, so the
 * memory held is the step's own. Outside a kept pool, and always under
 * AddressSanitizer (so that it still sees every use after free), these are
 * posix_memalign and free. */
#ifndef PPRT_POOL_H
#define PPRT_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "../ir/base.h"

/* 64-byte aligned, uninitialized; NULL when out of memory. */
void *pprt_pool_alloc(size_t bytes);
/* Only for pprt_pool_alloc's blocks (NULL allowed). */
void pprt_pool_free(void *p);
/* On: freed large blocks wait for reuse. Off: they are freed, and so are
 * those waiting. */
void pprt_pool_keep(bool on);
/* Free the waiting blocks no allocation took since the last trim. */
void pprt_pool_trim(void);
/* False where the pool never keeps a block (AddressSanitizer builds). */
bool pprt_pool_enabled(void);
/* Blocks taken from the pool, and bytes waiting in it (for tests). */
void pprt_pool_counts(long *reused, size_t *waiting);

/* Device memory (a space's alloc and free, mem.h: the links' device
 * messages) kept the same way, under the same keep and trim, any size: a
 * freed block waits for an allocation of its size on its space and device,
 * the longest-waiting first, so a step that allocates in the order the last
 * one freed (links are made and destroyed in one order) gets the very same
 * addresses. A stage's CUDA graphs bake in its messages' addresses
 * (gcache.h): with them the kept executors of a training run replay the
 * graphs they captured in earlier steps instead of capturing new ones. */
struct pprt_mem_ops;
pp_status pprt_pool_dev_alloc(const struct pprt_mem_ops *mem, int dev, size_t bytes, void **p, pp_err *err);
void pprt_pool_dev_free(const struct pprt_mem_ops *mem, int dev, void *p);

#endif
