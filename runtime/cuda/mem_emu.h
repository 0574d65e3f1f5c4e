/* mem_emu.h: the emulated device space of cuda-emu (mem_emu.c): what the
 * executor, the emulated NCCL (comm/p2p_emu.c) and the tests use beyond the
 * space's table (mem.h). */
#ifndef PPRT_CUDA_MEM_EMU_H
#define PPRT_CUDA_MEM_EMU_H

#include "../mem.h"

/* The emulated machine's devices. */
#define PPRT_EMU_DEVICES 4

extern const pprt_mem_ops pprt_mem_cuda_emu;

/* Whether [p, p + n) lies in memory of emulated device dev; else an error
 * naming `what` and where it lies instead. */
pp_status pprt_emu_check(const void *p, size_t n, int dev, const char *what, pp_err *err);

/* Run fn(arg) on the stream's thread, in order with its copies (the
 * emulated NCCL's sends and receives); fn may block. */
pp_status pprt_emu_call(pprt_stream *s, void (*fn)(void *arg), void *arg, pp_err *err);

/* Copies queued so far, by kind, and their bytes (the tests' evidence that
 * messages cross spaces where, and only where, they should). */
typedef struct pprt_emu_counts {
    long h2d, d2h, d2d, peer;
    double bytes;
} pprt_emu_counts;
void pprt_emu_counts_get(pprt_emu_counts *c);

#endif
