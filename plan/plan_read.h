/* plan_read.h: private to the plan reader's three files (not for its users,
 * who include plan.h): plan_read.c maps the file, checks its header, parses
 * the metadata and the plan's inputs and outputs, and frees a plan;
 * plan_verify.c verifies each stage and the chain of messages between them;
 * plan_sources.c opens, hashes and guards a --ref-weights plan's source files
 * and copies the weights that lie misaligned in them. */
#ifndef PP_PLAN_READ_H
#define PP_PLAN_READ_H

#include "plan.h"
#include "plan.pb-c.h"
#include "plan_format.h"

#define MAX_COUNT (1 << 24)
#define KIND_EXTERNAL 4 /* plan.proto Tensor.EXTERNAL: a PPRT_WEIGHT with a source */

/* plan_read.c */
/* n bytes (16-aligned) from the metadata's arena (pprt_plan.meta_arena),
 * freed with the plan; NULL: out of memory. */
void *pprt_plan_meta_alloc(void *arena, size_t n);
pp_status pprt_plan_read_shape(const int64_t *d, size_t n, pp_shape *s, const char *what, pp_err *err);

/* plan_verify.c */
/* Verify stage si of the metadata and fill st (p: the plan read so far). */
pp_status pprt_plan_read_stage(const Ppplan__Stage *m, int si, const pprt_plan *p, pprt_stage *st, pp_err *err);
/* Plan inputs -> stage 0 -> ... -> last stage -> plan outputs match slot for
 * slot in type and shape. */
pp_status pprt_plan_check_chain(const pprt_plan *p, pp_err *err);

/* plan_sources.c */
/* Open and map each source of m (none: nothing to do), at its recorded path
 * or, with model, at model and beside it; p->sources[0..p->n_sources) are
 * freed by pprt_plan_sources_close from the first on. */
pp_status pprt_plan_open_sources(pprt_plan *p, const Ppplan__Plan *m, const char *model, pp_err *err);
/* The sources' hashes, once every EXTERNAL tensor is known to lie inside its
 * file: the bytes the plan reads there, then the whole file. */
pp_status pprt_plan_verify_sources(const pprt_plan *p, const Ppplan__Plan *m, pp_err *err);
/* Unguard, unmap and close every source; free p->sources. */
void pprt_plan_sources_close(pprt_plan *p);

#endif
