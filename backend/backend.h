/* backend.h: staged IR -> plan file. lower.c builds the plan metadata (the
 * plan.proto message) and the weights layout; plan_write.c serializes them
 * behind the fixed header of plan_format.h, atomically. */
#ifndef PP_BACKEND_H
#define PP_BACKEND_H

#include "../ir/ir.h"

struct Ppplan__Plan;

typedef struct pp_lowered {
    const pp_graph *g;
    struct Ppplan__Plan *plan; /* allocated in arena */
    int64_t *weight_off;       /* value -> offset in the weights section, -1 if none */
    size_t weights_bytes;
    pp_arena arena;
} pp_lowered;

/* Lower a partitioned, memory-planned graph. options and producer are copied
 * into the plan's provenance. */
pp_status pp_lower(const pp_graph *g, const char *options, const char *producer, pp_lowered *l,
                   pp_err *err);
void pp_lowered_free(pp_lowered *l);

/* Write the plan file: to a temporary name beside `path`, then renamed, so the
 * file is whole or absent. */
pp_status pp_plan_write(const pp_lowered *l, const char *path, pp_err *err);

#endif
