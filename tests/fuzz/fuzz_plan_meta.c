/* fuzz_plan_meta.c: structure-aware libFuzzer target for the plan loader and
 * the reference kernels. An input is a plan's metadata (the plan.proto
 * message); the target wraps it in a plan file with a valid header, a
 * weights section of the size the message names (a fixed pattern, at most
 * 1 MiB) and correct XXH3 checksums, so mutations reach the checks behind
 * the checksums instead of dying at them (fuzz_plan, which mutates whole
 * files, rarely gets past them). A plan that loads runs on the reference
 * kernels, then through the CUDA backend's planner, lint and emulator
 * (cuda-emu), when its work is bounded (every node's cost, from the shared cost
 * functions, under 2e6 operations and 64 MiB, the plan's under 8e6): no crash, leak, hang or
 * undefined behaviour, whatever the message says.
 *
 * The custom mutator unpacks the message and changes one field the way a
 * forger would (a dim, a dtype, a tensor kind, offset or size, a node's
 * tensor ids, its op, an attribute, the batch, an arena size, the recv and
 * send lists), or falls back to libFuzzer's byte mutations of the packed
 * message. Seeds: the metadata of real plans (run.sh cuts it out of them). */
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../../plan/plan_format.h"
#include "../../runtime/backend.h"
#include "../../runtime/pprt.h"
#include "plan.pb-c.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MAX_WEIGHTS ((size_t)1 << 20)
#define MAX_OPS 2e6 /* per node; and 8e6 per plan */
#define MAX_BYTES ((double)(64 << 20))

/* ---- the plan file around a metadata message ------------------------------------------ */

static unsigned char *wrap(const uint8_t *meta, size_t meta_len, size_t *len) {
    Ppplan__Plan *m = ppplan__plan__unpack(NULL, meta_len, meta);
    size_t wbytes = m ? (size_t)m->weights_bytes : 0;
    bool ref = m && m->n_sources > 0;
    if (m) ppplan__plan__free_unpacked(m, NULL);
    if (wbytes > MAX_WEIGHTS) return NULL;
    size_t woff = (PP_PLAN_HEADER_SIZE + meta_len + PP_PLAN_ALIGN - 1) / PP_PLAN_ALIGN * PP_PLAN_ALIGN;
    *len = woff + wbytes;
    unsigned char *b = calloc(1, *len);
    if (!b) return NULL;
    memcpy(b + PP_PLAN_HEADER_SIZE, meta, meta_len);
    for (size_t i = 0; i < wbytes; i++) b[woff + i] = (unsigned char)(i * 37 + 11); /* floats of every size */
    memcpy(b, PP_PLAN_MAGIC, 8);
    pp_put_u32(b + 8, PP_PLAN_VERSION);
    pp_put_u32(b + 12, PP_PLAN_HEADER_SIZE);
    pp_put_u64(b + 16, *len);
    pp_put_u32(b + 24, PP_PLAN_NSECTIONS);
    pp_put_u32(b + 28, ref ? PP_PLAN_FLAG_REF_WEIGHTS : 0);
    const uint64_t off[2] = {PP_PLAN_HEADER_SIZE, woff}, size[2] = {meta_len, wbytes};
    for (int i = 0; i < 2; i++) {
        unsigned char *s = b + 32 + 32 * i;
        pp_put_u32(s, i ? PP_SECTION_WEIGHTS : PP_SECTION_META);
        pp_put_u64(s + 8, off[i]);
        pp_put_u64(s + 16, size[i]);
        pp_put_u64(s + 24, XXH3_64bits(b + off[i], size[i]));
    }
    pp_put_u64(b + PP_PLAN_HDRSUM_OFF, XXH3_64bits(b, PP_PLAN_HDRSUM_OFF));
    return b;
}

/* ---- running what loads --------------------------------------------------------------- */

static bool bounded(const pprt_plan *p) {
    double total = 0;
    for (int s = 0; s < p->n_stages; s++) {
        const pprt_stage *st = &p->stages[s];
        if ((double)st->arena_bytes > MAX_BYTES) return false;
        for (int k = 0; k < st->n_nodes; k++) {
            const pprt_node *n = &st->nodes[k];
            pp_tinfo in[PP_MAX_INPUTS], out[PP_MAX_OUTPUTS];
            for (int i = 0; i < n->n_in; i++) {
                const pprt_tdesc *t = n->in[i] >= 0 ? &st->t[n->in[i]] : NULL;
                in[i] = t ? (pp_tinfo){t->dtype, t->shape, t->data} : (pp_tinfo){PP_UNDEFINED, {0}, NULL};
            }
            for (int i = 0; i < n->n_out; i++) {
                const pprt_tdesc *t = &st->t[n->out[i]];
                out[i] = (pp_tinfo){t->dtype, t->shape, NULL};
            }
            pp_cost c = pp_node_cost(n->op, (pp_attrs){n->attrs, n->n_attrs, p->opset}, in, n->n_in, out, n->n_out);
            if (!(c.flops <= MAX_OPS) || !(c.bytes <= MAX_BYTES) || !((total += c.flops + c.bytes / 4) <= 4 * MAX_OPS))
                return false;
            for (int i = 0; i < n->n_out; i++) /* ops whose cost functions count little (copies, gathers) */
                if ((double)st->t[n->out[i]].nbytes > MAX_BYTES) return false;
        }
    }
    for (int i = 0; i < p->n_inputs; i++)
        if ((double)p->inputs[i].sample_bytes > MAX_BYTES) return false;
    return true;
}

static void run(const pprt_plan *p) {
    const int64_t n = p->batch > 0 ? p->batch : 1;
    pprt_array *ins = calloc(pp_count(p->n_inputs), sizeof *ins), *outs = calloc(pp_count(p->n_outputs), sizeof *outs);
    bool ok = ins && outs;
    for (int i = 0; ok && i < p->n_inputs; i++) {
        size_t bytes = p->inputs[i].sample_bytes * (size_t)n;
        unsigned char *d = malloc(bytes ? bytes : 1);
        ok = d != NULL;
        /* small integers in every type: valid indices and shapes where they are read as such */
        for (size_t k = 0; d && k < bytes; k++) d[k] = (unsigned char)(k % 3);
        ins[i] = (pprt_array){d, n};
    }
    /* the reference kernels, then the CUDA backend's planner, lint and emulator */
    static const char *const backends[] = {"ref", "cuda-emu"};
    for (int b = 0; ok && b < 2; b++) {
        pprt_run_opts o = {.depth = 1, .pin = false, .backend = pprt_backend_find(backends[b]), .threads = 1,
                           .quiet = true};
        pprt_stats st = {0};
        pp_err err = {0};
        if (pprt_run(p, ins, n, outs, &o, &st, &err) == PP_OK)
            for (int i = 0; i < p->n_outputs; i++) free(outs[i].data);
        free(st.stages);
        free(st.node_ms);
        free(st.latency_ms);
    }
    for (int i = 0; ins && i < p->n_inputs; i++) free(ins[i].data);
    free(ins);
    free(outs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len;
    unsigned char *file = wrap(data, size, &len);
    if (!file) return 0;
    pprt_plan *p = NULL;
    pp_err err = {0};
    if (pprt_plan_load_mem(file, len, &p, &err) == PP_OK) {
        if (bounded(p)) run(p);
        pprt_plan_free(p);
    }
    free(file);
    return 0;
}

/* ---- the structure-aware mutator -------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}
static size_t pick(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* A new value near v, or one of the values forgers try. */
static int64_t nudge(int64_t v) {
    static const int64_t edge[] = {0, 1, -1, 2, 3, 7, 64, 255, 4096, 65535, INT32_MAX, (int64_t)1 << 32, INT64_MAX,
                                   INT64_MIN};
    switch (pick(4)) { /* wrapping, in unsigned arithmetic */
    case 0: return (int64_t)((uint64_t)v + 1);
    case 1: return (int64_t)((uint64_t)v - 1);
    case 2: return (int64_t)((uint64_t)v * 2);
    default: return edge[pick(sizeof edge / sizeof *edge)];
    }
}

static void mutate_int64(int64_t *a, size_t n) {
    if (n) a[pick(n)] = nudge(a[pick(n)]);
}
static void mutate_int32(int32_t *a, size_t n) {
    if (n) a[pick(n)] = (int32_t)nudge(a[pick(n)]);
}

static void mutate_attr(Ppplan__Attr *a) {
    switch (pick(5)) {
    case 0: a->i = nudge(a->i); break;
    case 1: {
        static const float edge[] = {0, -0.0f, 1, -1, 0.5f, 3, 1e30f, -1e30f, NAN, INFINITY, -INFINITY, 1e-40f};
        a->f = pick(2) ? -a->f * 3 : edge[pick(sizeof edge / sizeof *edge)];
        break;
    }
    case 2: mutate_int64(a->ints, a->n_ints); break;
    case 3: a->type = (int32_t)(1 + pick(6)); break;
    default:
        if (a->n_floats) a->floats[pick(a->n_floats)] = pick(2) ? NAN : -1e30f;
        else mutate_int64(a->t_shape, a->n_t_shape);
        break;
    }
}

/* Nodes whose op name now points at pp_op_table's, and their own names. */
#define MAX_SWAPS 4
static Ppplan__Node *swapped[MAX_SWAPS];
static char *swapped_op[MAX_SWAPS];
static int n_swaps;

/* One structured change to m; false when m offers nothing to change. */
static bool mutate_plan(Ppplan__Plan *m) {
    if (!m->n_stages) return false;
    Ppplan__Stage *st = m->stages[pick(m->n_stages)];
    switch (pick(10)) {
    case 0: case 1: { /* a tensor */
        if (!st->n_tensors) return false;
        Ppplan__Tensor *t = st->tensors[pick(st->n_tensors)];
        switch (pick(5)) {
        case 0: mutate_int64(t->shape, t->n_shape); break;
        case 1: t->dtype = (int32_t)pick(24); break;
        case 2: t->kind = (Ppplan__Tensor__Kind)pick(5); break;
        case 3: t->offset = (uint64_t)nudge((int64_t)t->offset); break;
        default: t->nbytes = (uint64_t)nudge((int64_t)t->nbytes); break;
        }
        return true;
    }
    case 2: case 3: { /* a node's tensor ids */
        if (!st->n_nodes) return false;
        Ppplan__Node *n = st->nodes[pick(st->n_nodes)];
        if (pick(2)) mutate_int32(n->inputs, n->n_inputs);
        else mutate_int32(n->outputs, n->n_outputs);
        return true;
    }
    case 4: { /* a node's op: another known one (the unpacked name is put back before freeing) */
        if (!st->n_nodes || n_swaps == MAX_SWAPS) return false;
        Ppplan__Node *n = st->nodes[pick(st->n_nodes)];
        swapped[n_swaps] = n, swapped_op[n_swaps++] = n->op;
        n->op = (char *)pp_op_table[pick(PP_OP_COUNT)].name;
        return true;
    }
    case 5: case 6: { /* an attribute */
        if (!st->n_nodes) return false;
        Ppplan__Node *n = st->nodes[pick(st->n_nodes)];
        if (!n->n_attrs) return false;
        mutate_attr(n->attrs[pick(n->n_attrs)]);
        return true;
    }
    case 7: /* the batch, the opset */
        if (pick(2)) m->batch = nudge(m->batch);
        else m->opset = (int32_t)(pick(2) ? nudge(m->opset) : 7 + (int64_t)pick(21));
        return true;
    case 8: /* the arena */
        st->arena_bytes = (uint64_t)nudge((int64_t)st->arena_bytes);
        return true;
    default: /* the message slots */
        if (pick(2)) mutate_int32(st->recv, st->n_recv);
        else mutate_int32(st->send, st->n_send);
        return true;
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    rng_state = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    Ppplan__Plan *m = pick(4) ? ppplan__plan__unpack(NULL, size, data) : NULL; /* 1 in 4: bytes */
    if (!m) return LLVMFuzzerMutate(data, size, max_size);
    size_t out = 0;
    n_swaps = 0;
    int changes = 1 + (int)pick(3);
    bool changed = false;
    for (int k = 0; k < changes; k++) changed |= mutate_plan(m);
    if (changed && ppplan__plan__get_packed_size(m) <= max_size) out = ppplan__plan__pack(m, data);
    while (n_swaps > 0) n_swaps--, swapped[n_swaps]->op = swapped_op[n_swaps];
    ppplan__plan__free_unpacked(m, NULL);
    return out ? out : LLVMFuzzerMutate(data, size, max_size);
}
