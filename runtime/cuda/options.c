/* options.c: the CUDA backends' options (cuda_backend.h), read by cuda-emu
 * and by the CUDA module's executor alike. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuplan.h"

static pprt_cuda_cfg cfg = {.graphs = true, .conv_fusion = false, .wide_copies = true, .overlap = true,
                            .half_products = true, .sdpa = true, .tactics_path = "auto"};

pprt_cuda_cfg *pprt_cuda_config(void) { return &cfg; }

/* --devices LIST: up to PPRT_CUDA_MAX_DEVICES GPU numbers 0..1023. */
static pp_status set_devices(void *base, const char *name, const char *v, pp_err *err) {
    pprt_cuda_cfg *c = base;
    int n = 0;
    for (const char *p = v; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 1023 || (*end && *end != ',') || n == PPRT_CUDA_MAX_DEVICES)
            return PP_FAIL(err, PP_EINVAL, "%s needs up to %d GPU numbers 0..1023 separated by commas, got '%s'", name,
                           PPRT_CUDA_MAX_DEVICES, v);
        c->devices[n++] = (int)d;
        p = *end ? end + 1 : end;
    }
    c->n_devices = n;
    return PP_OK;
}

/* --cuda-host-ops LIST: op types by their ONNX names. */
static pp_status set_host_ops(void *base, const char *name, const char *v, pp_err *err) {
    pprt_cuda_cfg *c = base;
    char buf[256];
    if (strlen(v) >= sizeof buf)
        return PP_FAIL(err, PP_EINVAL, "%s needs a list of op types such as Conv,MatMul (at most %zu characters)", name,
                       sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        pp_op op;
        if (!pp_op_lookup(t, &op)) return PP_FAIL(err, PP_EINVAL, "%s: '%s' is not an op type pprt knows", name, t);
        c->host_op[op] = true;
    }
    return PP_OK;
}

/* --cuda-tactics auto|off|FILE: a FILE is read and checked at once (a
 * malformed table is refused before anything runs, naming its line). */
static pp_status set_tactics(void *base, const char *name, const char *v, pp_err *err) {
    pprt_cuda_cfg *c = base;
    pcu_tactics_free(&c->tactics_file);
    c->tactics_path = v;
    if (!strcmp(v, "auto") || !strcmp(v, "off")) {
        c->tactics = v[0] == 'a' ? PPRT_TACTICS_AUTO : PPRT_TACTICS_OFF;
        return PP_OK;
    }
    c->tactics = PPRT_TACTICS_FILE;
    pp_err e = {0};
    if (pcu_tactics_read(v, &c->tactics_file, &e) != PP_OK) return PP_WRAP(err, &e, e.code, "%s: %s", name, e.msg);
    return PP_OK;
}

/* --cuda-layout nchw|nhwc|auto */
static pp_status set_layout(void *base, const char *name, const char *v, pp_err *err) {
    (void)name, (void)err;
    pprt_cuda_cfg *c = base;
    c->layout = !strcmp(v, "nchw") ? PCU_LAYOUT_NCHW : !strcmp(v, "nhwc") ? PCU_LAYOUT_NHWC : PCU_LAYOUT_AUTO;
    return PP_OK;
}

/* The on|off options: their bool by name. */
static pp_status set_on_off(void *base, const char *name, const char *v, pp_err *err) {
    (void)err;
    pprt_cuda_cfg *c = base;
    const bool on = !strcmp(v, "on");
    if (!strcmp(name, "--cuda-graphs")) c->graphs = on;
    else if (!strcmp(name, "--cuda-wide-copies")) c->wide_copies = on;
    else if (!strcmp(name, "--cuda-overlap")) c->overlap = on;
    else if (!strcmp(name, "--cuda-row-kernels")) c->row_kernels = on;
    else if (!strcmp(name, "--cuda-fused-attention")) c->fused_attention = on;
    else if (!strcmp(name, "--cuda-stride-views")) c->stride_views = on;
    else if (!strcmp(name, "--cuda-wide-elementwise")) c->wide_elementwise = on;
    else if (!strcmp(name, "--cuda-half-products")) c->half_products = on;
    else if (!strcmp(name, "--cuda-sdpa")) c->sdpa = on;
    else c->conv_fusion = on;
    return PP_OK;
}

#define CFG(field) offsetof(pprt_cuda_cfg, field)
static const pp_opt rows[] = {
    {.names = "--devices", .kind = PP_OPT_CUSTOM, .arg = "LIST", .off = PP_OPT_NOFIELD,
     .section = "the cuda and cuda-emu backends", .what = "a list of GPU numbers such as 0,1", .set = set_devices,
     .help = "cuda, cuda-emu: stage i runs on GPU LIST[i % count] (e.g. 0,1; stages may share a GPU, each with its "
             "own stream; with --replicas, replica k's stage i is number k P + i, P the plan's stages, or a training "
             "plan's devices); under mpirun the rank with local rank r on LIST[r % count]; default: stage i (local "
             "rank r) on GPU i (r) % GPUs, or where ppcc --placement put it"},
    {.names = "--cuda-graphs", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "on", .set = set_on_off,
     .help = "replay each stage as a CUDA graph after its first micro-batch"},
    {.names = "--cuda-sync", .kind = PP_OPT_FLAG, .off = CFG(sync_each),
     .help = "synchronize after every step, so an asynchronous fault names its node"},
    {.names = "--cuda-explain", .kind = PP_OPT_FLAG, .off = CFG(explain),
     .help = "cuda: one line per convolution and product on stderr: the cuDNN engine or cuBLASLt algorithm it "
             "took, fused or not, and the engines refused and why; cuda, cuda-emu: one line per own-kernel step "
             "(its node and kernel)"},
    {.names = "--cuda-conv-fusion", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "off", .set = set_on_off,
     .help = "cuda: a convolution's bias, residual Add and ReLU in pprt's epilogue kernel after the convolution "
             "alone (off) or in its cuDNN graph (on: other engines; on an H200 some dropped NaN inputs, "
             "docs/cuda.md)"},
    {.names = "--cuda-wide-copies", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "on", .set = set_on_off,
     .help = "cuda, cuda-emu: strided copies (Transpose, Slice, Concat, Gather, ...) with their dims merged and 16 "
             "bytes a thread where aligned (on), or an element a thread over the dims as given (off)"},
    {.names = "--cuda-overlap", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "on", .set = set_on_off,
     .help = "cuda, cuda-emu: the inputs cut and uploaded, the outputs downloaded and written on threads of their "
             "own through max(2, --depth) buffers a direction while the first and last stages compute (on: 1.09 "
             "to 1.60x off on an H200, the same bytes, docs/cuda.md), or through one buffer on the stage's thread "
             "(off)"},
    {.names = "--cuda-row-kernels", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "off", .set = set_on_off,
     .help = "cuda, cuda-emu: Softmax, LogSoftmax, LayerNorm and RMSNorm over the last axis (rows up to 4096 floats) in one "
             "launch of a block per row, the row read once into shared memory, f32 exp, a residual Add before a "
             "LayerNorm inside its launch (on), or rows in lanes over three launches (off: 1.5 % faster on ViT-B/16 "
             "on an H200 before the Add was taken in, docs/cuda.md)"},
    {.names = "--cuda-fused-attention", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD,
     .words = "on|off", .dflt = "off", .set = set_on_off,
     .help = "cuda, cuda-emu: each attention pattern ppcc kept in one stage (MatMul, a Mul or Div by a scalar or a Mul per head, a "
             "Where of masked_fill, an Add of a mask, a mask in BART's or Swin's Reshape of the scores, Softmax over the last axis, "
             "MatMul; head dims up to 128, f32 or a half plan's type) as one kernel with the softmax online "
             "(on; not yet timed on a GPU), or a product, a softmax and a product (off)"},
    {.names = "--cuda-sdpa", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD, .words = "on|off",
     .dflt = "on", .set = set_on_off,
     .help = "cuda: a fused attention step of a half plan (--cuda-fused-attention on, ppcc --precision fp16|bf16; "
             "heads of 8 to 128 in multiples of 8, contiguous, 16-byte strides) on cuDNN's fused-attention engine "
             "(tensor cores; the scale folded into one multiplier, the probabilities rounded to the half type before "
             "the second product) where one takes it, else on pprt's kernel (on; not yet run on a GPU), or always "
             "on pprt's kernel (off); cuda-emu always runs pprt's kernel"},
    {.names = "--cuda-stride-views", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD,
     .words = "on|off", .dflt = "off", .set = set_on_off,
     .help = "cuda, cuda-emu: a Transpose, Slice, Split or Gather of one constant index whose output only "
             "products (MatMul, fused attention) and other such nodes read as the products' transposes, leading "
             "dims, offsets and batch strides over its source, no copy (on; the same bytes on cuda-emu, not yet "
             "timed on a GPU), or a strided copy (off)"},
    {.names = "--cuda-wide-elementwise", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD,
     .words = "on|off", .dflt = "off", .set = set_on_off,
     .help = "cuda, cuda-emu: unary and binary elementwise nodes of f32 (f16, bf16) whose innermost dim is a "
             "multiple of 4 (8), read whole or broadcast and 16-byte aligned, 16 bytes a thread with 16-byte loads "
             "and stores (on; the same bytes, not yet timed on a GPU), or an element a thread (off)"},
    {.names = "--cuda-half-products", .kind = PP_OPT_WORD, .arg = "on|off", .off = PP_OPT_NOFIELD,
     .words = "on|off", .dflt = "on", .set = set_on_off,
     .help = "cuda, cuda-emu: a mixed-precision training plan's products (ppcc --train --precision bf16|fp16) "
             "whose operands are Casts from the half type read the half tensors in place and write their output "
             "Cast's half tensor, cuBLASLt 16BF/16F and cuDNN BFLOAT16/HALF with f32 sums, those Casts skipped "
             "(on; the bits of off on cuda-emu, not yet run on a GPU), or the products in f32 on the f32 copies "
             "(off); --cuda-explain counts them"},
    {.names = "--cuda-layout", .kind = PP_OPT_WORD, .arg = "nchw|nhwc|auto", .off = PP_OPT_NOFIELD,
     .words = "nchw|nhwc|auto", .dflt = "auto", .set = set_layout,
     .help = "cuda, cuda-emu: an inference plan's 2-D convolutions and the pools and elementwise nodes between "
             "them channels-last, the messages and outputs NCHW (nhwc), all NCHW (nchw), or nhwc for half plans "
             "(ppcc --precision fp16|bf16: tensor-core engines) and nchw for f32 ones (auto); docs/cuda.md"},
    {.names = "--cuda-tactics", .kind = PP_OPT_CUSTOM, .arg = "auto|off|FILE", .off = PP_OPT_NOFIELD,
     .what = "auto, off or a tactic table file", .dflt = "auto", .set = set_tactics,
     .help = "cuda: each convolution's cuDNN engine from a table of engines timed on a GPU, by the convolution's "
             "signature (auto: the table built in for this GPU and cuDNN, where there is one; FILE: a table "
             "test_dnn --tune wrote), or cuDNN's heuristics alone (off, and any signature the table lacks); "
             "docs/cuda.md"},
    {.names = "--cuda-host-only", .kind = PP_OPT_FLAG, .off = CFG(host_only),
     .help = "cuda, cuda-emu: every node on the host fallback (a test of that path)"},
    {.names = "--cuda-host-ops", .kind = PP_OPT_CUSTOM, .arg = "LIST", .off = PP_OPT_NOFIELD,
     .what = "a list of op types such as Conv,MatMul", .set = set_host_ops,
     .help = "cuda, cuda-emu: the nodes of these op types (e.g. Conv,MatMul) on the host fallback, as when cuDNN "
             "or cuBLASLt has no engine for them (a test of that path)"},
};
#undef CFG

const pp_opt_table pprt_cuda_opts = {rows, (int)(sizeof rows / sizeof *rows), &cfg};

bool pprt_cuda_overlap_ends(void) { return cfg.overlap; }

unsigned char *pprt_cuda_host_nodes(const pprt_stage *st) {
    unsigned char *hn = calloc(pp_count(st->n_nodes) + 1, 1);
    for (int i = 0; hn && i < st->n_nodes; i++) hn[i] = cfg.host_op[st->nodes[i].op];
    return hn;
}

pp_status pprt_cuda_plan_stage(const pprt_plan *p, const pprt_stage *st, const unsigned char *host_node,
                               struct pcu_plan *pl, pp_err *err) {
    const pcu_plan_opts po = {.host_only = cfg.host_only, .host_node = host_node, .narrow_copies = !cfg.wide_copies,
                              .row_blocks = cfg.row_kernels, .fused_attention = cfg.fused_attention,
                              .stride_views = cfg.stride_views, .wide_elementwise = cfg.wide_elementwise,
                              .f32_products = !cfg.half_products,
                              .nhwc = pcu_layout_nhwc(p, cfg.layout)};
    PP_TRY(pcu_plan_build(p, st, &po, pl, err));
    return pcu_lint(pl, err);
}

pp_status pcu_pick_device(const pprt_stage *st, int local_rank, int count, int *dev, pp_err *err) {
    const int idx = local_rank >= 0 ? local_rank : st->index;
    *dev = cfg.n_devices  ? cfg.devices[idx % cfg.n_devices]
           : st->device >= 0 ? st->device /* ppcc --placement STAGE:cuda:DEVICE */
                            : idx % (count > 0 ? count : 1);
    if (*dev >= count)
        return PP_FAIL(err, PP_EINVAL, "stage %d is placed on GPU %d (%s), but this machine has %d", st->index, *dev,
                       cfg.n_devices ? "--devices" : "ppcc --placement", count);
    return PP_OK;
}
