/* options.c: the CUDA backends' options (cuda_backend.h), read by cuda-emu
 * and by the CUDA module's executor alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

static pprt_cuda_cfg cfg = {.graphs = true, .conv_fusion = false, .wide_copies = true};

pprt_cuda_cfg *pprt_cuda_config(void) { return &cfg; }

const char pprt_cuda_usage[] =
    "  --devices LIST    cuda, cuda-emu: stage i runs on GPU LIST[i % count] (e.g. 0,1; stages may\n"
    "                    share a GPU, each with its own stream); under mpirun the rank with local\n"
    "                    rank r on LIST[r % count]; default: stage i (local rank r) on GPU i (r) %\n"
    "                    GPUs, or where ppcc --placement put it\n"
    "  --cuda-graphs on|off  replay each stage as a CUDA graph after its first micro-batch (default on)\n"
    "  --cuda-sync       synchronize after every step, so an asynchronous fault names its node\n"
    "  --cuda-explain    cuda: one line per convolution and product on stderr: the cuDNN engine or\n"
    "                    cuBLASLt algorithm it took, fused or not, and the engines refused and why\n"
    "  --cuda-conv-fusion on|off  cuda: a convolution's bias, residual Add and ReLU in pprt's epilogue\n"
    "                    kernel after the convolution alone (off, the default) or in its cuDNN graph\n"
    "                    (on: other engines; on an H200 some dropped NaN inputs, docs/cuda.md)\n"
    "  --cuda-wide-copies on|off  cuda, cuda-emu: strided copies (Transpose, Slice, Concat, Gather, ...)\n"
    "                    with their dims merged and 16 bytes a thread where aligned (on, the default),\n"
    "                    or an element a thread over the dims as given (off)\n"
    "  --cuda-host-only  cuda, cuda-emu: every node on the host fallback (a test of that path)\n"
    "  --cuda-host-ops LIST  cuda, cuda-emu: the nodes of these op types (e.g. Conv,MatMul) on the host\n"
    "                    fallback, as when cuDNN or cuBLASLt has no engine for them (a test of that path)\n";

/* An on|off option's value into *flag (true for on); -1 with msg filled when it is neither. */
static int on_off(const char *name, const char *v, bool *flag, char *msg, size_t cap) {
    if (!v || (strcmp(v, "on") && strcmp(v, "off"))) {
        snprintf(msg, cap, "%s needs on or off, got %s", name, v ? v : "nothing");
        return -1;
    }
    *flag = !strcmp(v, "on");
    return 1;
}

int pprt_cuda_option(int argc, char **argv, int *i, char *msg, size_t cap) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--cuda-sync")) {
        cfg.sync_each = true;
        return 1;
    }
    if (!strcmp(a, "--cuda-host-only")) {
        cfg.host_only = true;
        return 1;
    }
    if (!strcmp(a, "--cuda-explain")) {
        cfg.explain = true;
        return 1;
    }
    if (!strcmp(a, "--cuda-host-ops")) {
        char buf[256];
        if (!v || !*v || strlen(v) >= sizeof buf) {
            snprintf(msg, cap, "--cuda-host-ops needs a list of op types such as Conv,MatMul");
            return -1;
        }
        snprintf(buf, sizeof buf, "%s", v);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            pp_op op;
            if (!pp_op_lookup(t, &op)) {
                snprintf(msg, cap, "--cuda-host-ops: '%s' is not an op type pprt knows", t);
                return -1;
            }
            cfg.host_op[op] = true;
        }
        (*i)++;
        return 1;
    }
    if (!strcmp(a, "--cuda-conv-fusion") || !strcmp(a, "--cuda-graphs") || !strcmp(a, "--cuda-wide-copies")) {
        bool on;
        if (on_off(a, v, &on, msg, cap) < 0) return -1;
        if (!strcmp(a, "--cuda-graphs")) cfg.graphs = on;
        else if (!strcmp(a, "--cuda-wide-copies")) cfg.wide_copies = on;
        else cfg.conv_fusion = on;
        (*i)++;
        return 1;
    }
    if (strcmp(a, "--devices")) return 0;
    if (!v || !*v) {
        snprintf(msg, cap, "--devices needs a list of GPU numbers such as 0,1");
        return -1;
    }
    int n = 0;
    for (const char *p = v; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 1023 || (*end && *end != ',') || n == PPRT_CUDA_MAX_DEVICES) {
            snprintf(msg, cap, "--devices needs up to %d GPU numbers 0..1023 separated by commas, got '%s'",
                     PPRT_CUDA_MAX_DEVICES, v);
            return -1;
        }
        cfg.devices[n++] = (int)d;
        p = *end ? end + 1 : end;
    }
    cfg.n_devices = n;
    (*i)++;
    return 1;
}

unsigned char *pprt_cuda_host_nodes(const pprt_stage *st) {
    unsigned char *hn = calloc(pp_count(st->n_nodes) + 1, 1);
    for (int i = 0; hn && i < st->n_nodes; i++) hn[i] = cfg.host_op[st->nodes[i].op];
    return hn;
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
