/* steps.c: the step list of the oneDNN executor and the memories its steps
 * read and write (dnnl_exec.h). A node becomes steps: its primitive, the
 * reorders that bring a source into the layout the primitive wants or its
 * output out of it, residual copies, and steps of pprt's own kernels
 * (Winograd, SiLU, NaN passes). Memories over tensors get their bytes per
 * run (received and sent tensors), once the arena is planned (activations),
 * or at once (weights); shared buffers hold reorder targets and the
 * scratchpad, sized for the largest. */
#include <stdlib.h>
#include <string.h>

#include <dnnl_debug.h>

#include "dnnl_exec.h"
#include "../pool.h"

pp_status dn_fail(pp_err *err, const char *what, dnnl_status_t s) {
    return PP_FAIL(err, s == dnnl_unimplemented ? PP_EUNSUP : PP_ERUNTIME, "oneDNN %s: %s", what,
                   dnnl_status2str(s));
}

bool dn_grow(void **a, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *n = realloc(*a, (size_t)nc * elem);
    if (!n) return false;
    *a = n;
    *cap = nc;
    return true;
}

/* Plain row-major f32 descriptor over dims (rank 0: one element). */
pp_status dn_plain_md(const int64_t *dims, int nd, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d, s;
    if (nd == 0) {
        d[0] = 1;
        nd = 1;
    } else {
        for (int i = 0; i < nd; i++) d[i] = dims[i];
    }
    dnnl_dim_t st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        s[i] = st;
        st *= d[i] > 0 ? d[i] : 1;
    }
    DN(dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, s), "memory descriptor");
    return PP_OK;
}

/* A descriptor of element type dt whose layout the primitive picks. */
pp_status dn_any_md(const int64_t *dims, int nd, dnnl_data_type_t dt, dnnl_memory_desc_t *md, pp_err *err) {
    dnnl_dims_t d;
    for (int i = 0; i < nd; i++) d[i] = dims[i];
    DN(dnnl_memory_desc_init_by_tag(md, nd, d, dt, dnnl_format_tag_any), "memory descriptor");
    return PP_OK;
}

/* The plain f32 descriptor of tensor tid. Every descriptor this executor
 * makes is f32: a tensor of another element type never gets one (a reorder
 * through it would move 4 bytes per element whatever its size). */
pp_status dn_tensor_plain(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err) {
    if (T(x, tid)->dtype != PP_F32)
        return PP_FAIL(err, PP_EUNSUP, "tensor '%s' is %s, not f32", T(x, tid)->name,
                       pp_dtype_name(T(x, tid)->dtype));
    return dn_plain_md(T(x, tid)->shape.dim, T(x, tid)->shape.rank, md, err);
}

/* The layout tensor tid is stored in. */
pp_status dn_tensor_layout(const pprt_exec *x, int tid, dnnl_memory_desc_t *md, pp_err *err) {
    if (x->tn.blocked[tid]) {
        *md = x->tn.lay[tid];
        return PP_OK;
    }
    return dn_tensor_plain(x, tid, md, err);
}

pp_status dn_new_mem(pprt_exec *x, const dnnl_memory_desc_t *md, void *handle, dnnl_memory_t *out,
                     pp_err *err) {
    if (!ROOM(x->mems)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    DN(dnnl_memory_create(out, md, x->eng, handle), "memory");
    x->mems.a[x->mems.n++] = *out;
    return PP_OK;
}

/* A memory over tensor tid's bytes, seen through md. */
pp_status dn_tensor_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out,
                        pp_err *err) {
    const int kind = x->tn.kind[tid];
    const bool varies = kind == PPRT_RECV || kind == PPRT_SEND;
    /* Every oneDNN memory over a tensor's own bytes is f32 (bf16 copies go
     * through shared buffers), but for a bf16 tensor a product of bf16
     * values reads in place of its f32 copy (halfprod.c), seen as bf16; one
     * over a message slot or a weight must not reach past the tensor's
     * bytes, which its neighbours own. */
    if (T(x, tid)->dtype != PP_F32 && !(T(x, tid)->dtype == PP_BF16 && md->data_type == dnnl_bf16))
        return PP_FAIL(err, PP_EUNSUP, "tensor '%s' is %s, not f32", T(x, tid)->name, pp_dtype_name(T(x, tid)->dtype));
    if (kind != PPRT_ACTIVATION && dnnl_memory_desc_get_size(md) > T(x, tid)->nbytes)
        return PP_FAIL(err, PP_ERUNTIME, "tensor '%s': a %zu-byte oneDNN memory over its %zu bytes", T(x, tid)->name,
                       dnnl_memory_desc_get_size(md), T(x, tid)->nbytes);
    PP_TRY(dn_new_mem(x, md, kind == PPRT_WEIGHT ? x->ptr[tid] : DNNL_MEMORY_NONE, out, err));
    if (varies) {
        if (!ROOM(x->binds)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->binds.a[x->binds.n++] = (bind){*out, tid, false};
    } else if (kind == PPRT_ACTIVATION) {
        if (!ROOM(x->abinds)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
        x->abinds.a[x->abinds.n++] = (bind){*out, tid, false};
        size_t b = dnnl_memory_desc_get_size(md);
        if (b > x->tn.need[tid]) x->tn.need[tid] = b;
    }
    return PP_OK;
}

/* A memory in shared buffer `slot` (its handle is set once the buffers are allocated). */
pp_status dn_slot_mem(pprt_exec *x, const dnnl_memory_desc_t *md, int slot, dnnl_memory_t *out,
                      pp_err *err) {
    PP_TRY(dn_new_mem(x, md, DNNL_MEMORY_NONE, out, err));
    if (!ROOM(x->patches)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->patches.a[x->patches.n++] = (patch){*out, slot};
    size_t b = dnnl_memory_desc_get_size(md);
    if (b > x->slot.bytes[slot]) x->slot.bytes[slot] = b;
    return PP_OK;
}

/* A zeroed, 64-aligned buffer the executor owns, not counted among its buffers (owned_bytes). */
static void *owned_alloc(pprt_exec *x, size_t bytes) {
    void *b = NULL;
    if (!ROOM(x->owned)) return NULL;
    if (!(b = pprt_pool_alloc(bytes))) return NULL;
    memset(b, 0, bytes);
    x->owned.a[x->owned.n++] = b;
    return b;
}

void *dn_own_alloc(pprt_exec *x, size_t bytes) {
    void *b = owned_alloc(x, bytes);
    if (b) x->bytes.owned += bytes;
    return b;
}

/* ---- steps ------------------------------------------------------------------------------ */

static pp_status push_step(pprt_exec *x, dnnl_primitive_desc_t pd, int kind, const dnnl_exec_arg_t *args,
                           int nargs, pp_err *err) {
    if (!ROOM(x->steps)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    step s = {.kind = kind, .nargs = nargs, .threads = x->bld.threads};
    memcpy(s.args, args, (size_t)nargs * sizeof *args);
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sp && dnnl_memory_desc_get_size(sp) > 0) {
        dnnl_memory_t m;
        PP_TRY(dn_slot_mem(x, sp, SLOT_SCRATCH, &m, err));
        s.args[s.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m};
    }
    DN(dnnl_primitive_create(&s.prim, pd), "primitive");
    x->steps.a[x->steps.n++] = s;
    return PP_OK;
}

/* Create the primitive of pd (then destroyed) as a step; pd is destroyed either way. */
pp_status dn_push_pd(pprt_exec *x, dnnl_primitive_desc_t pd, int kind, const dnnl_exec_arg_t *args,
                     int nargs, pp_err *err) {
    pp_status s = push_step(x, pd, kind, args, nargs, err);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

pp_status dn_push_reorder(pprt_exec *x, dnnl_memory_t src, dnnl_memory_t dst, int kind, pp_err *err) {
    const dnnl_memory_desc_t *smd, *dmd;
    DN(dnnl_memory_get_memory_desc(src, &smd), "memory query");
    DN(dnnl_memory_get_memory_desc(dst, &dmd), "memory query");
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, smd, x->eng, dmd, x->eng, x->attr_reorder), "reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    return dn_push_pd(x, pd, kind, a, 2, err);
}

/* A weight (constant) tensor in the layout `want`: reordered now, once, into an owned buffer. */
pp_status dn_weight_mem(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                        dnnl_memory_t *out, pp_err *err) {
    if (dnnl_memory_desc_equal(from, want)) return dn_tensor_mem(x, tid, want, out, err);
    size_t bytes = dnnl_memory_desc_get_size(want);
    if (x->o.share_weights) {
        PP_TRY(dn_wshare_get(x, tid, from, want, out, err));
        x->bytes.weights += bytes;
        return PP_OK;
    }
    void *buf = dn_own_alloc(x, bytes);
    if (!buf) return PP_FAIL(err, PP_ENOMEM, "cannot allocate %zu bytes for a reordered weight", bytes);
    x->bytes.weights += bytes;
    PP_TRY(dn_reorder_weight(x, tid, from, want, buf, out, err));
    if (!ROOM(x->wre)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    x->wre.a[x->wre.n++] = (dn_wre){tid, *from, *want, buf}; /* reload does it again */
    return PP_OK;
}

pp_status dn_reorder_into(pprt_exec *x, const dnnl_memory_desc_t *from, const void *bytes,
                          const dnnl_memory_desc_t *want, void *buf, pp_err *err) {
    dnnl_memory_t src = NULL, dst = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_status_t s = dnnl_memory_create(&src, from, x->eng, (void *)bytes);
    if (s == dnnl_success) s = dnnl_memory_create(&dst, want, x->eng, buf);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&pd, from, x->eng, want, x->eng, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&r, pd);
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    if (s == dnnl_success) s = dnnl_primitive_execute(r, x->strm, 2, a);
    if (s == dnnl_success) s = dnnl_stream_wait(x->strm);
    if (r) dnnl_primitive_destroy(r);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (dst) dnnl_memory_destroy(dst);
    if (src) dnnl_memory_destroy(src);
    DN(s, "weight reorder (reload)");
    return PP_OK;
}

pp_status dn_reorder_weight(pprt_exec *x, int tid, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *want,
                            void *buf, dnnl_memory_t *out, pp_err *err) {
    dnnl_memory_t src;
    PP_TRY(dn_tensor_mem(x, tid, from, &src, err));
    PP_TRY(dn_new_mem(x, want, buf, out, err));
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, from, x->eng, want, x->eng, NULL), "weight reorder");
    dnnl_primitive_t r;
    dnnl_status_t s = dnnl_primitive_create(&r, pd);
    dnnl_primitive_desc_destroy(pd);
    DN(s, "weight reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, *out}};
    s = dnnl_primitive_execute(r, x->strm, 2, a);
    if (s == dnnl_success) s = dnnl_stream_wait(x->strm);
    dnnl_primitive_destroy(r);
    DN(s, "weight reorder");
    return PP_OK;
}

/* Input tensor tid, seen through `cur` (its layout, or a view of its plain
 * bytes), as the primitive wants it: its own memory when `cur` is `want`,
 * else a reorder (every run) into shared buffer `slot`. */
pp_status dn_bind_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *cur, const dnnl_memory_desc_t *want,
                       int slot, dnnl_memory_t *out, pp_err *err) {
    if (dnnl_memory_desc_equal(cur, want)) return dn_tensor_mem(x, tid, want, out, err);
    dnnl_memory_t src;
    PP_TRY(dn_tensor_mem(x, tid, cur, &src, err));
    PP_TRY(dn_slot_mem(x, want, slot, out, err));
    return dn_push_reorder(x, src, *out, STEP_REORDER, err);
}

pp_status dn_bind_input(pprt_exec *x, int tid, const dnnl_memory_desc_t *want, int slot, dnnl_memory_t *out,
                        pp_err *err) {
    dnnl_memory_desc_t cur;
    PP_TRY(dn_tensor_layout(x, tid, &cur, err));
    return dn_bind_view(x, tid, &cur, want, slot, out, err);
}

/* Input tensor tid read through md, a view of its plain bytes with other
 * dims (matrices, [outer, n, inner]): for consumers that never let the
 * tensor take another layout, so it is plain. */
pp_status dn_plain_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, dnnl_memory_t *out, pp_err *err) {
    if (x->tn.blocked[tid]) return PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, tid)->name);
    return dn_tensor_mem(x, tid, md, out, err);
}

/* Plain input tensor tid seen through md, converted to want (md with another
 * element type) by a reorder into shared buffer `slot` every run, or itself
 * when want is md. */
pp_status dn_cast_view(pprt_exec *x, int tid, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *want,
                       int slot, dnnl_memory_t *out, pp_err *err) {
    if (x->tn.blocked[tid]) return PP_FAIL(err, PP_ERUNTIME, "'%s' is not plain", T(x, tid)->name);
    return dn_bind_view(x, tid, md, want, slot, out, err);
}

pp_status dn_bind_output(pprt_exec *x, int tid, const dnnl_memory_desc_t *have, dnnl_memory_t *out, post *po,
                         pp_err *err) {
    po->src = NULL;
    dnnl_memory_desc_t plain;
    PP_TRY(dn_tensor_plain(x, tid, &plain, err));
    if (x->tn.flex[tid] && !dnnl_memory_desc_equal(have, &plain)) {
        x->tn.blocked[tid] = true;
        x->tn.lay[tid] = *have;
        return dn_tensor_mem(x, tid, have, out, err);
    }
    if (dnnl_memory_desc_equal(have, &plain)) return dn_tensor_mem(x, tid, &plain, out, err);
    PP_TRY(dn_slot_mem(x, have, SLOT_DST, out, err));
    po->src = *out;
    return dn_tensor_mem(x, tid, &plain, &po->dst, err);
}

pp_status dn_push_post(pprt_exec *x, const post *po, pp_err *err) {
    return po->src ? dn_push_reorder(x, po->src, po->dst, STEP_REORDER, err) : PP_OK;
}

pp_status dn_new_attr(dnnl_primitive_attr_t *a, pp_err *err) {
    DN(dnnl_primitive_attr_create(a), "attributes");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(*a, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*a);
        *a = NULL;
        return dn_fail(err, "attributes", s);
    }
    return PP_OK;
}

/* Every tensor of the node is f32 (absent inputs aside) and non-empty. */
pp_status dn_need_f32_nonempty(const pprt_exec *x, const pprt_node *n, pp_err *err) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && (!f32(x, n->in[k]) || numel_of(&T(x, n->in[k])->shape) == 0))
            return unsup(err, "an input is not a non-empty f32 tensor");
    if (!f32(x, n->out[0]) || numel_of(&T(x, n->out[0])->shape) == 0)
        return unsup(err, "the output is not a non-empty f32 tensor");
    for (int k = 1; k < n->n_out; k++)
        if (!unused(x, n->out[k])) return unsup(err, "an optional output is used");
    return PP_OK;
}

pp_status dn_plain_pd(pprt_exec *x, const_dnnl_op_desc_t d, const char *what, dnnl_primitive_desc_t *pd,
                      pp_err *err) {
    dnnl_primitive_attr_t attr;
    PP_TRY(dn_new_attr(&attr, err));
    return dn_finish_pd(x, d, attr, NULL, dnnl_success, PP_OK, what, pd, err);
}

/* Whether primitive descriptor pd runs one of oneDNN's JIT kernels. */
bool dn_jit_impl(const_dnnl_primitive_desc_t pd) {
    const char *impl = "ref";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return strncmp(impl, "jit", 3) == 0;
}

/* Whether pd runs oneDNN's reference implementation ("ref:any"): a loop
 * that recomputes every element's offsets, hundreds of times slower than its
 * JIT kernels (on AMD Zen 5 with one thread: Swin-T's attention products
 * with their bias post-op broadcast over the windows, 1.6 s against 2 ms;
 * RegNetY's per-sample, per-channel scales (a binary Mul over a channel
 * block of 8) 250 ms against 0.75 ms on pprt's kernel for the model's 16;
 * a Softmax over an axis before the last, 15 ms against 1.7 ms). The binary,
 * matmul and softmax builders refuse it: the node runs without its
 * post-ops, else on pprt's own kernel. tests/dnnl checks that no node of its
 * models runs one. */
bool dn_ref_impl(const_dnnl_primitive_desc_t pd) {
    const char *impl = "ref";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return strncmp(impl, "ref", 3) == 0;
}

/* The layout oneDNN's convolutions pick on this CPU for a source of nd
 * (4 or 5) dims (a 64-channel 3x3 convolution over 28 pixels a side, any
 * layout): channels last on AVX-512's brgconv kernels, 8-channel blocks on
 * AVX2's. A fixed probe, so the answer depends on the CPU (and
 * ONEDNN_MAX_CPU_ISA) alone; dnnl_format_tag_undef where it is none of
 * dn_fast_layout's. */
static dnnl_format_tag_t conv_tag(pprt_exec *x, int nd) {
    static const dnnl_format_tag_t tags[2][3] = {{dnnl_aBcd16b, dnnl_aBcd8b, dnnl_acdb},
                                                 {dnnl_aBcde16b, dnnl_aBcde8b, dnnl_acdeb}};
    dnnl_memory_desc_t src, w, dst, cand;
    const dnnl_dims_t sd = {1, 64, 28, 28, 28}, wd = {64, 64, 3, 3, 3}, one = {1, 1, 1}, pad = {1, 1, 1};
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_format_tag_t tag = dnnl_format_tag_undef;
    if (dnnl_memory_desc_init_by_tag(&src, nd, sd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&w, nd, wd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dst, nd, sd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &w, NULL,
                                           &dst, one, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, x->eng, NULL) != dnnl_success)
        return tag;
    const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    for (int k = 0; k < 3 && tag == dnnl_format_tag_undef; k++)
        if (dnnl_memory_desc_init_by_tag(&cand, nd, sd, dnnl_f32, tags[nd - 4][k]) == dnnl_success &&
            dnnl_memory_desc_equal(&cand, got))
            tag = tags[nd - 4][k];
    dnnl_primitive_desc_destroy(pd);
    return tag;
}

/* The first of the layouts oneDNN's JIT kernels read (AVX-512's 16-channel
 * blocks, AVX2's 8, channels last; `unpadded`: only those whose blocks divide
 * the channels; `conv_first`: the one convolutions pick on this CPU before
 * the others) in which make() builds a descriptor that `fast` accepts: it
 * replaces *pd, and *src becomes that layout; the return value says whether
 * one did. For a 4-D or 5-D source whose own layout gets a slow kernel
 * (pools), or whose kernel must not depend on its source's layout
 * (BatchNormalization). */
bool dn_fast_layout(pprt_exec *x, dnnl_memory_desc_t *src, bool unpadded, bool conv_first, dn_pd_make *make,
                    void *ctx, bool (*fast)(const_dnnl_primitive_desc_t), dnnl_primitive_desc_t *pd) {
    static const dnnl_format_tag_t tags[2][3] = {{dnnl_aBcd16b, dnnl_aBcd8b, dnnl_acdb},
                                                 {dnnl_aBcde16b, dnnl_aBcde8b, dnnl_acdeb}};
    static const int block[3] = {16, 8, 1};
    const int nd = src->ndims;
    if (nd < 4 || nd > 5) return false;
    int order[4] = {0, 1, 2, -1};
    if (conv_first) {
        const dnnl_format_tag_t first = conv_tag(x, nd);
        for (int k = 0; k < 3; k++)
            if (tags[nd - 4][k] == first) order[0] = k, order[k] = 0;
    }
    for (int j = 0; j < 3; j++) {
        const int k = order[j];
        dnnl_memory_desc_t blk;
        dnnl_primitive_desc_t bpd = NULL;
        pp_err e = {0};
        if ((unpadded && src->dims[1] % block[k] != 0) ||
            dnnl_memory_desc_init_by_tag(&blk, nd, src->dims, src->data_type, tags[nd - 4][k]) != dnnl_success ||
            make(x, &blk, ctx, &bpd, &e) != PP_OK)
            continue;
        if (!fast(bpd)) {
            dnnl_primitive_desc_destroy(bpd);
            continue;
        }
        dnnl_primitive_desc_destroy(*pd);
        *pd = bpd;
        *src = blk;
        return true;
    }
    return false;
}

/* Output yi of node n takes over the bytes of its input xi (stored as xmd)
 * where n is xi's last reader and yi will be stored as the primitive writes
 * it (dst_md equal to xmd; arena activations both): no second buffer to
 * fill, so fewer bytes through the caches. For primitives that allow dst ==
 * src (oneDNN's eltwise, binary with src0, and a convolution's sum post-op
 * with its residual). PPRT_DNNL_INPLACE=0: never. */
pp_status dn_write_in_place(pprt_exec *x, const pprt_node *n, int xi, const dnnl_memory_desc_t *xmd, int yi,
                            const dnnl_memory_desc_t *dst_md, pp_err *err) {
    dnnl_memory_desc_t yp;
    PP_TRY(dn_tensor_plain(x, yi, &yp, err));
    if (x->o.inplace && x->tn.last[xi] == (int)(n - x->st->nodes) && x->tn.kind[xi] == PPRT_ACTIVATION &&
        x->tn.kind[yi] == PPRT_ACTIVATION && !x->tn.ghost[xi] && x->tn.alias[yi] < 0 &&
        dnnl_memory_desc_equal(xmd, dst_md) && (x->tn.flex[yi] || dnnl_memory_desc_equal(dst_md, &yp)))
        x->tn.alias[yi] = xi;
    return PP_OK;
}


/* ---- steps of our own kernels ------------------------------------------------------------ */

pp_status dn_own_step(pprt_exec *x, dn_run_fn *run, const void *ctx, size_t size, void (*drop)(void *),
                      const char *impl, step *s, pp_err *err) {
    *s = (step){.kind = STEP_MAIN, .run = run, .drop = drop, .impl = impl};
    if (size == 0) {
        s->ctx = (void *)ctx;
        return PP_OK;
    }
    /* the executor's (dn_rollback frees it with the steps after a mark) */
    if (!(s->ctx = owned_alloc(x, size))) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    memcpy(s->ctx, ctx, size);
    return PP_OK;
}

pp_status dn_push_own(pprt_exec *x, step s, pp_err *err) {
    if (s.prim || !s.run) return PP_FAIL(err, PP_ERUNTIME, "internal: a step of pprt's kernels names none");
    if (!ROOM(x->steps)) return PP_FAIL(err, PP_ENOMEM, "out of memory");
    s.threads = x->bld.threads;
    x->steps.a[x->steps.n++] = s;
    return PP_OK;
}

pp_status dn_push_own_io(pprt_exec *x, step s, int in, int out, pp_err *err) {
    dnnl_memory_desc_t from, to;
    PP_TRY(dn_tensor_plain(x, in, &from, err));
    PP_TRY(dn_tensor_plain(x, out, &to, err));
    dnnl_memory_t sm, dm;
    post po;
    PP_TRY(dn_plain_view(x, in, &from, &sm, err));
    PP_TRY(dn_bind_output(x, out, &to, &dm, &po, err));
    s.nargs = 2;
    s.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    s.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    PP_TRY(dn_push_own(x, s, err));
    return dn_push_post(x, &po, err);
}

/* (dnnl_exec.h) */
bool dn_own_layout(const dnnl_memory_desc_t *md, pprt_layout *l) {
    if ((md->data_type != dnnl_f32 && md->data_type != dnnl_bf16) || md->format_kind != dnnl_blocked ||
        md->offset0 != 0 || md->ndims < 2 || md->ndims > 5)
        return false;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    const int nd = md->ndims;
    int64_t S = 1;
    for (int d = 2; d < nd; d++) S *= md->dims[d];
    *l = (pprt_layout){.N = md->dims[0], .C = md->dims[1], .S = S, .stride_n = b->strides[0],
                             .stride_c = b->strides[1]};
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1) l->vec = b->inner_blks[0];
    else if (b->inner_nblks == 0) l->vec = b->strides[1] == 1 ? l->C : 1;
    else return false;
    /* the spatial dims packed, the innermost with the stride of one channel vector (plain: 1) */
    int64_t want = l->vec;
    for (int d = nd - 1; d >= 2; want *= md->dims[d], d--)
        if (md->dims[d] > 1 && b->strides[d] != want) return false;
    return l->vec == 1 ? l->stride_c >= S : true;
}

/* (dnnl_exec.h) */
pp_status dn_push_own_any(pprt_exec *x, step st, size_t bytes, int xi, const dnnl_memory_desc_t *src_md, int yi,
                          const dnnl_memory_desc_t *dst_md, bool *taken, pp_err *err) {
    dnnl_memory_t sm, dm;
    post out;
    *taken = false;
    PP_TRY(dn_bind_output(x, yi, dst_md, &dm, &out, err));
    PP_TRY(dn_bind_input(x, xi, src_md, SLOT_SRC, &sm, err));
    st.nargs = 2;
    st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    PP_TRY(dn_push_own(x, st, err));
    *taken = true;
    x->bytes.owned += bytes;
    return dn_push_post(x, &out, err);
}

static void run_fix(void *ctx, void *const io[N_IO], int team) {
    pprt_nanfix_run(ctx, io[IO_SRC], io[IO_DST], team);
}

pp_status dn_push_fix(pprt_exec *x, const pprt_nanfix *f, dnnl_memory_t src, dnnl_memory_t dst, pp_err *err) {
    static const char *names[] = {"?", "pprt:clamp", "pprt:nan_rows", "pprt:maxpool_nan"};
    step s;
    PP_TRY(dn_own_step(x, run_fix, f, sizeof *f, NULL, f->kind > 0 && f->kind < 4 ? names[f->kind] : "?", &s, err));
    s.nargs = 2;
    s.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
    s.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
    return dn_push_own(x, s, err);
}

/* A NaN-keeping clamp to [lo, hi] over every float of md's buffer (a
 * blocked layout's padding too: it stays 0 when lo <= 0 <= hi, which the
 * callers check). */
pprt_nanfix dn_clamp_fix(const dnnl_memory_desc_t *md, float lo, float hi) {
    const bool bf16 = md->data_type == dnnl_bf16;
    return (pprt_nanfix){.kind = PPRT_NANFIX_CLAMP, .n = dnnl_memory_desc_get_size(md) / (bf16 ? 2 : sizeof(float)),
                         .lo = lo, .hi = hi, .bf16 = bf16};
}


/* A step of our own kernels, on the bytes its memories point at now and on
 * the calling thread's OpenMP team (set for the step by the run loop). */
static dnnl_status_t run_own(const step *s) {
    void *io[N_IO] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < s->nargs; i++) {
        const int a = s->args[i].arg;
        const int k = a == DNNL_ARG_SRC          ? IO_SRC
                      : a == DNNL_ARG_DST        ? IO_DST
                      : a == DNNL_ARG_SCRATCHPAD ? IO_SCRATCH
                      : a == DNNL_ARG_SRC_2      ? IO_SRC_2
                                                 : IO_OTHER;
        dnnl_status_t ds = dnnl_memory_get_data_handle(s->args[i].memory, &io[k]);
        if (ds != dnnl_success) return ds;
    }
    s->run(s->ctx, io, dn_team());
    return dnnl_success;
}

dnnl_status_t dn_run_step(const step *s, dnnl_stream_t strm) {
    return s->prim ? dnnl_primitive_execute(s->prim, strm, s->nargs, s->args) : run_own(s);
}

/* The end of a primitive's set-up: when it went well so far (s, r), attach
 * po (NULL: none) to attr and create *pd for op descriptor d; po and attr
 * are destroyed either way, and the first failure is reported (what names
 * the primitive). */
pp_status dn_finish_pd(pprt_exec *x, const_dnnl_op_desc_t d, dnnl_primitive_attr_t attr, dnnl_post_ops_t po,
                       dnnl_status_t s, pp_status r, const char *what, dnnl_primitive_desc_t *pd, pp_err *err) {
    *pd = NULL;
    if (s == dnnl_success && r == PP_OK && po) s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (s == dnnl_success && r == PP_OK) s = dnnl_primitive_desc_create(pd, d, attr, x->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    PP_TRY(r);
    DN(s, what);
    return PP_OK;
}
