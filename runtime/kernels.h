/* kernels.h: the kernel interface: one function per op of ops.def, over plain
 * tensors. Shapes and attributes were validated by pp_infer (ir/shape.c)
 * before any kernel runs, so kernels may trust them; they still fail cleanly
 * (never abort) on what shape inference cannot see.
 *
 * Implementations: runtime/cpu/ref_kernels.c (plain C reference, the oracle).
 * Later backends (oneDNN, CUDA) provide tables of the same shape. */
#ifndef PPRT_KERNELS_H
#define PPRT_KERNELS_H

#include "../ir/base.h"

typedef struct pprt_tensor {
    pp_dtype dtype;   /* PP_UNDEFINED marks an absent optional input */
    pp_shape shape;
    void *data;       /* contiguous, row-major, 64-byte aligned */
} pprt_tensor;

/* Per-thread scratch memory that kernels may use (im2col buffers, ...). */
typedef struct pprt_scratch {
    void *p;
    size_t cap;
} pprt_scratch;

/* Returns scratch of at least n bytes (64-aligned), or NULL when out of memory. */
void *pprt_scratch_get(pprt_scratch *s, size_t n);
void pprt_scratch_free(pprt_scratch *s);

typedef pp_status (*pprt_kernel_fn)(pp_attrs attrs, const pprt_tensor *in, int n_in,
                                    pprt_tensor *out, int n_out, pprt_scratch *scratch,
                                    pp_err *err);

/* The reference table, indexed by pp_op. */
extern const pprt_kernel_fn pprt_ref_kernels[PP_OP_COUNT];

/* A Cast of f32 x to half type t (f16, bf16; others: nothing) with ppcc's
 * attribute pp_finite (a half plan's Casts, passes/precision.c): elements
 * [a, b) of y that rounded to an infinity from a finite x become t's largest
 * finite of that sign (fp16 65504, bf16 3.39e38), as ppcc converts
 * constants (runtime/cpu/ref_math.c; the oneDNN executor after its vector
 * Cast, runtime/dnnl/gradref.c). */
void pprt_half_finite(const float *x, void *y, pp_dtype t, int64_t a, int64_t b);

#endif
