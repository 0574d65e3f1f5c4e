/* options.c: the oneDNN executor's settings, from PPRT_DNNL_* environment
 * variables, read once per process (pprt_dnnl_opts in dnnl_exec.h). The
 * table below is the one list of them: name, default, the values taken and
 * what they do; docs/dnnl.md repeats it for users. An unset or empty
 * variable takes the default; any other value outside what the row takes is
 * an error naming the variable and the value (pprt exits 2). docs/dnnl.md says
 * which are for users and which are test hooks (a second path the suite
 * checks); the A/B switches of pprt's own kernels are gone (issue 53), their
 * questions settled by the measurements in docs/design-notes.md. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../isa.h"
#include "dnnl_exec.h"

typedef enum {
    OPT_FLAG, /* 0 or 1 (bool) */
    OPT_WORD, /* one of two words: the first sets the bool, the second clears it */
    OPT_INT,  /* a whole number in [lo, hi] (int64_t) */
    OPT_NUM,  /* a finite number in [lo, hi] (double) */
} opt_kind;

typedef struct opt {
    const char *name;
    opt_kind kind;
    size_t off; /* of the field in pprt_dnnl_opts */
    const char *dflt;
    const char *words; /* OPT_WORD: "first|second"; OPT_INT: the only values taken, if not a range ("0|2|4") */
    double lo, hi;
    const char *meaning;
} opt;

#define F(field) offsetof(pprt_dnnl_opts, field)
static const opt opts[] = {
    {"PPRT_DNNL_VERBOSE", OPT_INT, F(verbose), "0", NULL, 0, 2,
     "1: per stage, the nodes on oneDNN, absorbed and on the reference kernels, the reorders and copies per "
     "micro-batch and the memory taken; 2: also each node's kernels and why a node was declined"},
    {"PPRT_DNNL_LAYOUT", OPT_WORD, F(propagate), "blocked", "blocked|plain", 0, 0,
     "blocked: a tensor that only oneDNN nodes read stays in the layout its producer prefers; plain: every tensor "
     "row-major"},
    {"PPRT_DNNL_FUSE", OPT_FLAG, F(fuse), "1", NULL, 0, 0,
     "a convolution or matrix product absorbs the chained eltwise and binary nodes after it as post-ops"},
    {"PPRT_DNNL_RESIDUAL", OPT_WORD, F(residual_sum), "sum", "sum|binary", 0, 0,
     "pp.FusedConv's residual by a sum post-op (in place where it dies there) or by a binary add post-op"},
    {"PPRT_DNNL_INPLACE", OPT_FLAG, F(inplace), "1", NULL, 0, 0,
     "an output takes over the bytes of an input that dies there (residual sums, eltwise, binary)"},
    {"PPRT_DNNL_SMALL_US", OPT_NUM, F(small_us), "100", NULL, 0, 1e9,
     "microseconds of estimated work below which a primitive runs on one thread"},
    {"PPRT_DNNL_WINO", OPT_FLAG, F(wino), "1", NULL, 0, 0,
     "3x3 stride-1 f32 convolutions by Winograd (oneDNN's on AVX-512, pprt's own below)"},
    {"PPRT_DNNL_WINO_TILE", OPT_INT, F(wino_tile), "0", "0|2|4", 0, 4,
     "pprt's Winograd kernel: 0 picks F(2x2,3x3) or F(4x4,3x3) per node, 2 or 4 forces one"},
    {"PPRT_DNNL_CONV_BLOCKED", OPT_FLAG, F(conv_blocked), "1", NULL, 0, 0,
     "2-D f32 convolutions in channel blocks (nChw16c on AVX-512, nChw8c below) where their channels fill "
     "blocks, a JIT kernel takes it, and the plan's group of tensors around them meets only layout-free ops "
     "(the same on every stage, so splits stay bit-identical); 0: oneDNN's choice for each node alone"},
    {"PPRT_DNNL_VIEWS", OPT_FLAG, F(views), "1", NULL, 0, 0,
     "Reshape, Flatten, Squeeze, Unsqueeze and byte-preserving Transposes take over their input's bytes"},
    {"PPRT_DNNL_ROWS_MAX", OPT_INT, F(rows_max), "4096", NULL, 0, 1e15,
     "matrix products with constant weights and fewer rows run as 1x1 convolutions (0: never; unset: 4096 "
     "below AVX-512, 0 on AVX-512 CPUs; matmul.c)"},
    {"PPRT_DNNL_KEEP_SEND", OPT_FLAG, F(keep_send), "1", NULL, 0, 0,
     "a tensor the stage sends and also reads stays in the arena in its layout, copied into the message once "
     "(unset: not in a training plan, exec.c)"},
    {"PPRT_DNNL_SHARE_WEIGHTS", OPT_FLAG, F(share_weights), "1", NULL, 0, 0,
     "the executors of one stage in this process (--replicas) share its reordered weights: one copy, made by the "
     "first to need it; 0: each its own"},
    {"PPRT_DNNL_SILU", OPT_FLAG, F(silu), "1", NULL, 0, 0,
     "pp.SiLU on pprt's own kernel where it wins (f32 on AVX2 and AVX-512 CPUs), else oneDNN's swish"},
    {"PPRT_DNNL_WEIGHT_T", OPT_FLAG, F(weight_t), "1", NULL, 0, 0,
     "a matrix product whose B is a 2-D Transpose of a weight reads the weight, packed once per load and "
     "reload (the Transpose runs as nothing where every reader does so); 0: B copied by the Transpose each run"},
    {"PPRT_DNNL_OPERAND_T", OPT_FLAG, F(operand_t), "1", NULL, 0, 0,
     "a batched matrix product whose operand is a Transpose of a plain activation's last two axes reads that "
     "activation through swapped strides (the Transpose runs as nothing where every reader does so); 0: copied"},
    {"PPRT_DNNL_HALF_PRODUCTS", OPT_FLAG, F(half_products), "1", NULL, 0, 0,
     "in an f32 run, a product whose operands hold bf16 values widened by a Cast (a training plan at --precision "
     "bf16) computes on oneDNN's bf16 kernels with f32 sums where the CPU has them (halfprod.c); 0: in f32"},
    {"PPRT_DNNL_HALF_WEIGHTS", OPT_FLAG, F(half_weights), "1", NULL, 0, 0,
     "with PPRT_DNNL_HALF_PRODUCTS, a product's operand that is a weight's rounding to bf16 is the weight "
     "reordered to bf16 in the kernel's layout once a step (at load and reload), not the rounding reordered each "
     "micro-batch (halfprod.c); 0: each micro-batch"},
    {"PPRT_DNNL_CASTS", OPT_FLAG, F(casts), "1", NULL, 0, 0,
     "Casts between f32 and bf16 or f16 on pprt's vector kernel (kernels/cast.c, the reference's bits); 0: the "
     "reference kernel's loops (in ranges over the stage's threads from 32768 elements)"},
    {"PPRT_DNNL_GELU_GRAD", OPT_FLAG, F(gelu_grad), "1", NULL, 0, 0,
     "pp.UnaryGrad of Gelu on oneDNN's eltwise backward in f32; 0: the reference kernel (double) in parts"},
};
#undef F

/* The value v of row o into *out; false when o does not take it. */
static bool parse(const opt *o, const char *v, pprt_dnnl_opts *out) {
    char *field = (char *)out + o->off, *end;
    switch (o->kind) {
    case OPT_FLAG:
        if (strcmp(v, "0") && strcmp(v, "1")) return false;
        *(bool *)field = v[0] == '1';
        return true;
    case OPT_WORD: {
        const char *bar = strchr(o->words, '|');
        const size_t n1 = (size_t)(bar - o->words);
        const bool first = strlen(v) == n1 && !strncmp(v, o->words, n1);
        if (!first && strcmp(v, bar + 1)) return false;
        *(bool *)field = first;
        return true;
    }
    case OPT_INT: {
        errno = 0;
        const long long n = strtoll(v, &end, 10);
        if (errno || end == v || *end || n < o->lo || n > o->hi) return false;
        if (o->words) { /* one of a list, as written there */
            char list[64], item[64];
            snprintf(list, sizeof list, "|%s|", o->words);
            snprintf(item, sizeof item, "|%s|", v);
            if (!strstr(list, item)) return false;
        }
        *(int64_t *)field = n;
        return true;
    }
    case OPT_NUM: {
        errno = 0;
        const double d = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(d) || d < o->lo || d > o->hi) return false;
        *(double *)field = d;
        return true;
    }
    }
    return false;
}

/* What row o takes, for the error message. */
static void takes(const opt *o, char *buf, size_t n) {
    switch (o->kind) {
    case OPT_FLAG: snprintf(buf, n, "0 or 1"); break;
    case OPT_WORD:
        snprintf(buf, n, "%.*s or %s", (int)strcspn(o->words, "|"), o->words, strchr(o->words, '|') + 1);
        break;
    case OPT_INT:
        if (o->words) { /* "0|2|4" as "0, 2 or 4" */
            size_t k = 0;
            for (const char *c = o->words; *c && k + 5 < n; c++)
                if (*c != '|') buf[k++] = *c;
                else k += (size_t)snprintf(buf + k, n - k, "%s", strchr(c + 1, '|') ? ", " : " or ");
            buf[k] = '\0';
        }
        else snprintf(buf, n, "a whole number from %.0f to %.0f", o->lo, o->hi);
        break;
    case OPT_NUM: snprintf(buf, n, "a number from %.0f to %.0f", o->lo, o->hi); break;
    }
}

static pprt_dnnl_opts parsed;
static pp_status parsed_status;
static pp_err parsed_err;
static pthread_once_t parsed_once = PTHREAD_ONCE_INIT;

extern char **environ;

/* A PPRT_DNNL_* variable that no row reads (a typo, or one removed, as
 * FOLLOW, RELU, GUARD and the own kernels' switches were): an error naming
 * it, never ignored. */
static bool unknown_var(void) {
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "PPRT_DNNL_", 10) != 0) continue;
        const size_t len = strcspn(*e, "=");
        bool known = false;
        for (size_t i = 0; i < sizeof opts / sizeof opts[0] && !known; i++)
            known = strlen(opts[i].name) == len && !strncmp(opts[i].name, *e, len);
        if (known) continue;
        parsed_status = PP_FAIL(&parsed_err, PP_EINVAL, "environment variable %.*s: the oneDNN backend has no such "
                                "setting (docs/dnnl.md lists those it has, and those removed); "
                                "unset it", (int)len, *e);
        return true;
    }
    return false;
}

static void read_env(void) {
    if (unknown_var()) return;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const opt *o = &opts[i];
        if (!parse(o, o->dflt, &parsed)) { /* a row whose default it does not take: a bug here */
            parsed_status = PP_FAIL(&parsed_err, PP_ERUNTIME, "%s: its default '%s' is not valid", o->name, o->dflt);
            return;
        }
        const char *v = getenv(o->name);
        /* unset, the route of matrix products as convolutions is off on AVX-512 CPUs (matmul.c) */
        if (o->off == offsetof(pprt_dnnl_opts, rows_max) && (!v || !*v) && pprt_cpu_isa() >= PPRT_ISA_AVX512)
            parsed.rows_max = 0;
        if (o->off == offsetof(pprt_dnnl_opts, keep_send)) parsed.keep_send_auto = !v || !*v;
        if (!v || !*v || parse(o, v, &parsed)) continue;
        char t[96];
        takes(o, t, sizeof t);
        parsed_status = PP_FAIL(&parsed_err, PP_EINVAL, "environment variable %s=%s: expected %s (default %s: %s)",
                                o->name, v, t, o->dflt, o->meaning);
        return;
    }
}

pp_status pprt_dnnl_opts_read(pprt_dnnl_opts *o, pp_err *err) {
    pthread_once(&parsed_once, read_env);
    if (parsed_status != PP_OK) {
        if (err) *err = parsed_err;
        return parsed_status;
    }
    *o = parsed;
    return PP_OK;
}
