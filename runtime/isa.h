/* isa.h: the x86 vector ISA that pprt's own CPU kernels and the oneDNN
 * executor's kernel choices may assume: what the CPU has, capped as oneDNN
 * caps itself by ONEDNN_MAX_CPU_ISA (or its older name DNNL_MAX_CPU_ISA).
 * One variable thus moves oneDNN and pprt together onto the AVX2 paths, and
 * the tests run those paths on AVX-512 machines too (docs/design-notes.md,
 * "What pprt promises about bits"). */
#ifndef PPRT_ISA_H
#define PPRT_ISA_H

#include <stdbool.h>

typedef enum {
    PPRT_ISA_BASE,   /* no AVX2 and FMA (or not x86), or capped below them */
    PPRT_ISA_AVX2,   /* AVX2 and FMA, no AVX-512 (or capped at AVX2) */
    PPRT_ISA_AVX512, /* AVX-512 F and BW and VL and DQ (oneDNN's avx512_core) */
} pprt_isa;

/* Read once; later calls return the same. */
pprt_isa pprt_cpu_isa(void);
/* "avx512", "avx2", "base". */
const char *pprt_isa_name(pprt_isa isa);
/* Whether the cap variable lowered what the CPU has. */
bool pprt_isa_capped(void);
/* Whether the CPU has AVX512_BF16's conversion (vcvtneps2bf16), for the
 * kernels that round to bf16 (bf16x16.h); not capped: the other way gives
 * the same bits. */
bool pprt_cpu_avx512bf16(void);
/* Whether the CPU has F16C's float16 conversions (every AVX2 CPU has them; a
 * VM may hide them), for kernels/cast.c's AVX2 path; not capped. */
bool pprt_cpu_f16c(void);
/* Whether the cap variable leaves AMX to kernels that use it: unset, ALL,
 * DEFAULT or a name with AMX in it (AVX512_CORE_AMX...); AVX512_CORE_BF16
 * and below do not. (What the CPU has is the kernel's own check.) */
bool pprt_isa_amx_allowed(void);

#endif
