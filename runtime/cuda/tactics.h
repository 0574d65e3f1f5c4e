/* tactics.h: the convolution tactic cache (issue 54). On a GPU, test_dnn
 * --tune times every deterministic engine configuration cuDNN's heuristics
 * offer for each convolution signature (the heuristics' own knob settings)
 * and writes the fastest within the fixed workspace as one line of a table;
 * the table is committed per GPU model and cuDNN version
 * (runtime/cuda/tactics/<GPU>_cc<major><minor>_cudnn<version>.tsv, the
 * name test_dnn --capture gives a device description) and built into
 * pprt, and the CUDA executor takes a convolution's engine from it by
 * signature alone, so a split never changes which engine runs (the
 * heuristics' order, the fallback where a signature is missing, is a
 * function of the signature too). `pprt --cuda-tactics auto|off|FILE`.
 *
 * A table is text, one tactic a line, '#' lines comments, fields split by
 * tabs: the signature (pcu_conv_signature), the engine's global index, its
 * knob choices ("-" or TYPE:VALUE,... as cudnnBackendKnobType_t numbers),
 * the workspace in bytes and the measured time in microseconds. Plain C:
 * the parser and the signatures are tested without a GPU (test_tactics);
 * turning a tactic into an execution plan is dnn.c's. */
#ifndef PPRT_CUDA_TACTICS_H
#define PPRT_CUDA_TACTICS_H

#include <stddef.h>
#include <stdint.h>

#include "cuplan.h"

#define PCU_TACTIC_SIG 240
#define PCU_TACTIC_KNOBS 16

typedef struct pcu_tactic {
    char sig[PCU_TACTIC_SIG];
    int64_t gidx;
    int n_knobs;
    int64_t knob_type[PCU_TACTIC_KNOBS], knob_value[PCU_TACTIC_KNOBS];
    int64_t workspace;
    double us;
} pcu_tactic;

typedef struct pcu_tactics {
    pcu_tactic *t; /* sorted by signature, no two the same */
    int n;
} pcu_tactics;

/* Convolution step c's signature: everything that decides its cuDNN graph
 * (kind, dims, pads, strides, dilations, groups, the epilogue when fused)
 * and strict f32 or not; nothing that depends on where it runs. Returns
 * false when buf (PCU_TACTIC_SIG bytes) is too short. */
bool pcu_conv_signature(const pcu_conv *c, bool fused, bool strict, char *buf, size_t n);

/* Parse a table (len bytes of text; `what` names it in messages): a line
 * that is not a tactic, a field out of range or a signature twice is
 * refused, naming the line. */
pp_status pcu_tactics_parse(const char *text, size_t len, const char *what, pcu_tactics *out, pp_err *err);
pp_status pcu_tactics_read(const char *path, pcu_tactics *out, pp_err *err);
const pcu_tactic *pcu_tactics_find(const pcu_tactics *t, const char *sig);
void pcu_tactics_free(pcu_tactics *t);
/* One table line for t (with its newline); false when buf is too short. */
bool pcu_tactic_line(const pcu_tactic *t, char *buf, size_t n);

/* The tables built into pprt (runtime/cuda/tactics/, generated at build
 * time): the one named `name` (<GPU>_cc<major><minor>_cudnn<version>, the
 * GPU's name through pp_file_name), or NULL; pcu_tactics_builtin_count and
 * _at list them (test_tactics parses each). */
const char *pcu_tactics_builtin(const char *name, size_t *len);
int pcu_tactics_builtin_count(void);
const char *pcu_tactics_builtin_at(int i, const char **text, size_t *len);

#endif
