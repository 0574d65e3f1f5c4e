/* backend.h: staged IR -> plan file. lower.c builds the plan metadata (the
 * plan.proto message) and the weights layout; pp_plan_write hands them to
 * the plan library (plan/plan_write.c), which writes them behind the fixed
 * header of plan_format.h, atomically. */
#ifndef PP_BACKEND_H
#define PP_BACKEND_H

#include "../ir/ir.h"

struct Ppplan__Plan;

typedef struct pp_lowered {
    const pp_graph *g;
    struct Ppplan__Plan *plan; /* allocated in arena */
    int64_t *weight_off;       /* value -> offset in the weights section, -1 if none */
    size_t weights_bytes;
    size_t ref_bytes;          /* bytes of EXTERNAL tensors (ref_model), each once */
    pp_arena arena;
} pp_lowered;

/* Lower a partitioned, memory-planned graph. options and producer are copied
 * into the plan's provenance. ref_model (NULL: none) is the path of the model
 * file g was imported from: every used constant of PP_REF_MIN bytes or more
 * whose bytes lie in the mapped model file or one of its external data files
 * becomes an EXTERNAL tensor that names the file instead of a copy in the
 * weights section (ppcc --ref-weights; docs/plan-format.md). */
#define PP_REF_MIN (64u << 10)
pp_status pp_lower(const pp_graph *g, const char *options, const char *producer, const char *ref_model,
                   pp_lowered *l, pp_err *err);
void pp_lowered_free(pp_lowered *l);

/* Write the plan file: to a temporary name beside `path`, then renamed, so the
 * file is whole or absent. */
pp_status pp_plan_write(const pp_lowered *l, const char *path, pp_err *err);

/* Every stage as an ONNX model in directory dir (ppcc --export-stages):
 * stage_K.onnx, stage_K.onnx.data (weights of PP_EXPORT_EXTERNAL_MIN bytes
 * or more, as ONNX external data) and stages.json (how they connect);
 * written into a new directory beside dir that is then renamed to it, so dir
 * holds the whole export or is left as it was. dir may be absent, empty, or
 * an earlier export (replaced); anything else is refused (onnx_export.c). */
#define PP_EXPORT_EXTERNAL_MIN 1024u
pp_status pp_export_stages(const pp_graph *g, const char *dir, const char *producer, pp_err *err);
/* Before any work: what pp_export_stages(dir) would refuse now (something
 * that no export wrote at dir, a missing parent folder), as it would. */
pp_status pp_export_stages_check(const char *dir, pp_err *err);

#endif
