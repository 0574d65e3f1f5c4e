/* views.c: nodes that move bytes without arithmetic.
 *
 * Views. Reshape, Flatten, Squeeze, Unsqueeze and a Transpose that moves
 * only 1-long axes rename bytes: where the input is an arena tensor that
 * dies there, the output takes over its bytes (an alias in the arena plan)
 * and the node runs as nothing; elsewhere (a received input, a sent
 * output, an input read again later) one copy of the bytes, threaded. An
 * input in a oneDNN layout stays in it where the reshape allows
 * (build_view_laid). A Transpose that moves the last axis is a oneDNN
 * reorder, threaded; one that keeps it is whole rows copied by our kernel
 * (runtime/dnnl/kernels/permute.h), threaded too (oneDNN's reorder of that view is
 * slower still: cait_xxs24 at -b 8 ran at 5-7 samples/s with it, 10 on the
 * reference kernel).
 * PPRT_DNNL_VIEWS=0: always copy.
 * Slice (unit steps): a reorder from a sub-memory of the plain input. */
#include "../../ir/shape_nn.h"
#include "../../ir/op_fns.h"
#include "dnnl_exec.h"
#include "kernels/pad.h"
#include "kernels/permute.h"
#include "kernels/rowcopy.h"

/* Whether Transpose perm of shape s keeps the bytes in place: the axes
 * longer than 1 keep their order, so only 1-long axes move. */
static bool moves_no_bytes(const pp_shape *s, const int64_t *perm) {
    int64_t prev = -1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[perm[i]] == 1) continue;
        if (perm[i] < prev) return false;
        prev = perm[i];
    }
    return true;
}

/* Whether output out of node ni may take over input in's arena bytes: both
 * arena tensors, the input written and read last here, the output no alias
 * yet (the node then runs as nothing). */
static bool takes_over(const pprt_exec *x, int in, int out, int ni) {
    return x->tn.kind[in] == PPRT_ACTIVATION && x->tn.kind[out] == PPRT_ACTIVATION && !x->tn.ghost[in] &&
           x->tn.last[in] == ni && x->tn.alias[out] < 0;
}

static void run_rows(void *ctx, void *const io[N_IO], int team) {
    pprt_rowcopy_run(ctx, io[IO_SRC], io[IO_DST], team);
}

static void run_permute(void *ctx, void *const io[N_IO], int team) {
    pprt_permute_run(ctx, io[IO_SRC], io[IO_DST], team);
}

static void run_pad(void *ctx, void *const io[N_IO], int team) { pprt_pad_run(ctx, io[IO_SRC], io[IO_DST], team); }

/* A step of pprt's row copies c */
static pp_status rows_step(pprt_exec *x, const pprt_rowcopy *c, step *st, pp_err *err) {
    return dn_own_step(x, run_rows, c, sizeof *c, NULL, "pprt:rowcopy", st, err);
}

/* A step copying `bytes` from sm to dm as they lie: our row copy, threaded. */
static pp_status push_copy(pprt_exec *x, dnnl_memory_t sm, dnnl_memory_t dm, size_t bytes, pp_err *err) {
    step st;
    PP_TRY(rows_step(x, &(pprt_rowcopy){.rows = 1, .row_bytes = bytes}, &st, err));
    st.nargs = 2;
    st.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, sm};
    st.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dm};
    return dn_push_own(x, st, err);
}

/* A Transpose that does move bytes: one oneDNN reorder from a strided view
 * of the (plain) input to the plain output, threaded like the other nodes
 * (the reference kernel copies element by element on one thread). */
static pp_status build_transpose(pprt_exec *x, const pprt_node *n, const int64_t *perm, pp_err *err) {
    const pp_shape *s = &T(x, n->in[0])->shape;
    dnnl_dims_t d, st;
    int64_t ist[PP_MAX_DIMS];
    pp_shape_strides(s, ist);
    for (int i = 0; i < s->rank; i++) d[i] = s->dim[perm[i]], st[i] = ist[perm[i]];
    dnnl_memory_desc_t from, to;
    DN(dnnl_memory_desc_init_by_strides(&from, s->rank, d, dnnl_f32, st), "memory descriptor");
    PP_TRY(dn_tensor_plain(x, n->out[0], &to, err));
    dnnl_memory_t sm, dm;
    post po;
    PP_TRY(dn_plain_view(x, n->in[0], &from, &sm, err));
    PP_TRY(dn_bind_output(x, n->out[0], &to, &dm, &po, err));
    PP_TRY(dn_push_reorder(x, sm, dm, STEP_MAIN, err));
    return dn_push_post(x, &po, err);
}

/* A Transpose whose input is stored in a oneDNN layout, or whose output may
 * be (its readers take any layout): the input's bytes seen with the
 * output's dims (the layout's axes permuted) are a layout of the output.
 * Where the output may be stored so and the input dies here, it takes over
 * the input's bytes and the node runs as nothing (timm's LayerNorm2d,
 * [N, C, H, W] stored channels-last, permuted to [N, H, W, C] before a
 * layer normalization, and back before a convolution: a plain tensor, then
 * channels-last again); elsewhere one reorder into the output (plain, or
 * that layout where it may be stored in one). A blocked input with inner
 * blocks is first reordered to plain in a shared buffer: reorders from such
 * a permuted layout need not have a JIT kernel. */
static pp_status build_transpose_laid(pprt_exec *x, const pprt_node *n, const int64_t *perm, pp_err *err) {
    const int in = n->in[0], out = n->out[0], ni = (int)(n - x->st->nodes);
    const int rank = T(x, in)->shape.rank;
    int inv[DNNL_MAX_NDIMS];
    for (int i = 0; i < rank; i++) inv[perm[i]] = i;
    dnnl_memory_desc_t cur, seen, plain;
    PP_TRY(dn_tensor_layout(x, in, &cur, err));
    PP_TRY(dn_tensor_plain(x, out, &plain, err));
    const bool inner = cur.format_kind == dnnl_blocked && cur.format_desc.blocking.inner_nblks > 0;
    const dnnl_memory_desc_t blk = cur;
    const bool dies = takes_over(x, in, out, ni);
    if (inner && x->tn.flex[out] && dies && moves_no_bytes(&T(x, in)->shape, perm)) {
        /* only 1-long axes move: the blocked layout permuted holds the same bytes */
        DN(dnnl_memory_desc_permute_axes(&seen, &blk, inv), "permuted memory descriptor");
        x->tn.alias[out] = in;
        x->tn.blocked[out] = true, x->tn.lay[out] = seen;
        return PP_OK;
    }
    if (inner) PP_TRY(dn_tensor_plain(x, in, &cur, err)); /* through a plain copy (below) */
    DN(dnnl_memory_desc_permute_axes(&seen, &cur, inv), "permuted memory descriptor");
    const bool keep = dnnl_memory_desc_equal(&seen, &plain) || x->tn.flex[out];
    if (!inner && keep && dies) {
        x->tn.alias[out] = in;
        if (!dnnl_memory_desc_equal(&seen, &plain)) x->tn.blocked[out] = true, x->tn.lay[out] = seen;
        return PP_OK;
    }
    dnnl_memory_t sm, dm;
    post po;
    if (inner && keep) {
        /* the output in that layout holds the input's plain bytes: one reorder
         * of the input into them (a view of a depthwise convolution's
         * nChw8c output on AVX2, PVT-v2's tokens on the way back) */
        PP_TRY(dn_tensor_mem(x, in, &blk, &sm, err));
        PP_TRY(dn_bind_output(x, out, &seen, &dm, &po, err)); /* stored as seen: nothing after */
        PP_TRY(dn_tensor_mem(x, out, &cur, &dm, err));
        PP_TRY(dn_push_reorder(x, sm, dm, STEP_MAIN, err));
        return dn_push_post(x, &po, err);
    }
    if (inner) {
        dnnl_memory_t copy;
        PP_TRY(dn_bind_input(x, in, &cur, SLOT_SRC, &copy, err));
        PP_TRY(dn_slot_mem(x, &seen, SLOT_SRC, &sm, err));
    } else {
        PP_TRY(dn_tensor_mem(x, in, &seen, &sm, err));
    }
    PP_TRY(dn_bind_output(x, out, keep ? &seen : &plain, &dm, &po, err));
    /* (keep is an input without inner blocks here) the same layout: its bytes copied */
    if (keep) PP_TRY(push_copy(x, sm, dm, dnnl_memory_desc_get_size(&seen), err));
    else PP_TRY(dn_push_reorder(x, sm, dm, STEP_MAIN, err));
    return dn_push_post(x, &po, err);
}

/* Whether a Transpose of a plain input should leave its output in the
 * permuted layout: where every reader takes any layout and the layout is
 * channels-last (the axis moved to the end is the second, a convolution's
 * channels), the one its readers are likely to want. */
static bool channels_last(const pprt_exec *x, const pprt_node *n, const int64_t *perm) {
    const int r = T(x, n->in[0])->shape.rank;
    if (!x->tn.flex[n->out[0]] || r < 3 || perm[0] != 0 || perm[1] != r - 1) return false;
    for (int i = 2; i < r; i++)
        if (perm[i] != i - 1) return false;
    return true;
}

/* A Transpose that keeps the last axis: whole rows copied by our kernel
 * (runtime/dnnl/kernels/permute.h) on the stage's threads. */
static pp_status build_rows(pprt_exec *x, const pprt_node *n, const int64_t *perm, pp_err *err) {
    const pp_shape *s = &T(x, n->in[0])->shape;
    pprt_permute k;
    if (!pprt_permute_plan(s->dim, s->rank, perm, sizeof(float), &k)) return unsup(err, "not a row copy");
    step st;
    PP_TRY(dn_own_step(x, run_permute, &k, sizeof k, NULL, "pprt:permute_rows", &st, err));
    return dn_push_own_io(x, st, n->in[0], n->out[0], err);
}

/* Whether md holds the bytes of plain (same dims) in the same places: no
 * inner blocks or padding, no offset, and every axis longer than 1 at its
 * plain stride (a reshaped layout may give a 1-long axis any stride). */
static bool same_as_plain(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *plain) {
    if (dnnl_memory_desc_equal(md, plain)) return true;
    if (md->format_kind != dnnl_blocked || md->ndims != plain->ndims || md->data_type != plain->data_type ||
        md->offset0 != 0 || md->format_desc.blocking.inner_nblks != 0)
        return false;
    for (int i = 0; i < md->ndims; i++)
        if (md->dims[i] != plain->dims[i] || md->padded_dims[i] != md->dims[i] || md->padded_offsets[i] != 0 ||
            (md->dims[i] > 1 && md->format_desc.blocking.strides[i] != plain->format_desc.blocking.strides[i]))
            return false;
    return true;
}

/* A view whose input is stored in a oneDNN layout (view_any): the input's
 * layout reshaped to the output's dims (dnnl_memory_desc_reshape: axes
 * split, merged where dense, 1-long ones added or dropped) is a layout of
 * the output. Where the output may be stored so (its readers take any
 * layout, or it is plain) and the input dies here, the output takes over
 * the input's bytes and the node runs as nothing: PVT-v2's [N, C, H*W]
 * tokens, permuted from a product's [N, H*W, C] (a view, channels last),
 * seen as [N, C, H, W] for the depthwise convolution, which reads and
 * writes channels-last as they are, then back. Elsewhere one copy into
 * that layout (our row copy), or one reorder into plain; where no layout
 * of the output is the input's reshaped (channel blocks merged with the
 * spatial axes), a reorder of the input into plain, over the output's
 * bytes. */
static pp_status build_view_laid(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0], out = n->out[0], ni = (int)(n - x->st->nodes);
    const pp_shape *os = &T(x, out)->shape;
    dnnl_memory_desc_t cur, seen, plain;
    PP_TRY(dn_tensor_layout(x, in, &cur, err));
    PP_TRY(dn_tensor_plain(x, out, &plain, err));
    dnnl_dims_t d;
    for (int i = 0; i < os->rank; i++) d[i] = os->dim[i];
    const bool ok = os->rank > 0 && dnnl_memory_desc_reshape(&seen, &cur, os->rank, d) == dnnl_success;
    const bool is_plain = ok && same_as_plain(&seen, &plain);
    if (is_plain) seen = plain;
    const bool take = ok && (is_plain || x->tn.flex[out]);
    if (take && takes_over(x, in, out, ni)) {
        x->tn.alias[out] = in;
        if (!is_plain) x->tn.blocked[out] = true, x->tn.lay[out] = seen;
        return PP_OK;
    }
    dnnl_memory_t sm, dm;
    post po;
    if (take) { /* the same bytes in the same layout: our row copy, threaded */
        PP_TRY(dn_tensor_mem(x, in, &seen, &sm, err));
        PP_TRY(dn_bind_output(x, out, &seen, &dm, &po, err));
        PP_TRY(push_copy(x, sm, dm, dnnl_memory_desc_get_size(&seen), err));
        return dn_push_post(x, &po, err);
    }
    if (ok) { /* into plain */
        PP_TRY(dn_tensor_mem(x, in, &seen, &sm, err));
        PP_TRY(dn_bind_output(x, out, &plain, &dm, &po, err));
        PP_TRY(dn_push_reorder(x, sm, dm, STEP_MAIN, err));
        return dn_push_post(x, &po, err);
    }
    /* the input's dims in plain order are the output's bytes */
    dnnl_memory_desc_t in_plain;
    PP_TRY(dn_tensor_plain(x, in, &in_plain, err));
    PP_TRY(dn_tensor_mem(x, in, &cur, &sm, err));
    PP_TRY(dn_tensor_mem(x, out, &in_plain, &dm, err)); /* the output stays plain */
    return dn_push_reorder(x, sm, dm, STEP_MAIN, err);
}

/* A node that only renames the bytes of its input runs as nothing: its
 * output takes over the input's arena bytes (an alias, see dn_plan_arena)
 * where the input is a plain arena tensor that dies there. Elsewhere
 * (a received input, a sent output, an input read later) one copy of the
 * bytes (our row copy, threaded). A Transpose that moves bytes is a
 * reorder or our row copies; an input stored in a oneDNN layout,
 * build_view_laid or build_transpose_laid. */
static pp_status build_view(pprt_exec *x, const pprt_node *n, pp_err *err) {
    if (!x->o.views) return unsup(err, "views are off (PPRT_DNNL_VIEWS=0)");
    const int in = n->in[0], out = n->out[0], ni = (int)(n - x->st->nodes);
    if (!f32(x, in) || !f32(x, out) || numel_of(&T(x, in)->shape) == 0)
        return unsup(err, "not a non-empty f32 tensor");
    if (T(x, in)->nbytes != T(x, out)->nbytes) return unsup(err, "input and output sizes differ");
    if (n->op == PP_OP_TRANSPOSE) {
        const pp_shape *s = &T(x, in)->shape;
        int64_t perm[PP_MAX_DIMS];
        /* a bad perm is the reference kernel's to report */
        if (pp_transpose_perm(attrs_of(x, n), s->rank, perm, err) != PP_OK) return unsup(err, "bad 'perm'");
        if (x->tn.blocked[in] || channels_last(x, n, perm))
            return build_transpose_laid(x, n, perm, err);
        if (!moves_no_bytes(s, perm)) {
            /* rows stay whole: our row copies, threaded (oneDNN's reorder of such a view is slower) */
            if (perm[s->rank - 1] == s->rank - 1) return build_rows(x, n, perm, err);
            return build_transpose(x, n, perm, err);
        }
    } else if (x->tn.blocked[in]) {
        return build_view_laid(x, n, err);
    }
    if (!takes_over(x, in, out, ni)) { /* the same bytes, copied */
        dnnl_memory_desc_t plain;
        dnnl_memory_t sm, dm;
        post po;
        PP_TRY(dn_tensor_plain(x, out, &plain, err));
        PP_TRY(dn_plain_view(x, in, &plain, &sm, err));
        PP_TRY(dn_bind_output(x, out, &plain, &dm, &po, err));
        return push_copy(x, sm, dm, T(x, out)->nbytes, err);
    }
    x->tn.alias[out] = in;
    return PP_OK;
}

/* Whether a Reshape, Flatten, Squeeze or Unsqueeze reads its input in any
 * layout: where it keeps the first two axes longer than 1 (batch and
 * channels) as they are and only splits, merges, adds or drops later ones
 * or 1-long ones, so that a channels-last or channel-blocked layout of the
 * input, reshaped, is a layout of the output (build_view_laid); others (a
 * Flatten into [N, C*H*W]) read it plain, as their producer then writes it. */
static bool view_any(const pprt_exec *x, const pprt_node *n) {
    const pp_shape *a = &T(x, n->in[0])->shape, *b = &T(x, n->out[0])->shape;
    if (!x->o.views || a->rank < 3 || b->rank < 3) return false;
    /* the first two axes longer than 1 (1-long ones come and go as Unsqueeze and Squeeze move them) */
    int64_t ka[2] = {0, 0}, kb[2] = {0, 0};
    for (int i = 0, k = 0; i < a->rank && k < 2; i++)
        if (a->dim[i] != 1) ka[k++] = a->dim[i];
    for (int i = 0, k = 0; i < b->rank && k < 2; i++)
        if (b->dim[i] != 1) kb[k++] = b->dim[i];
    return ka[0] == kb[0] && ka[1] == kb[1];
}

/* A Slice with unit steps: one oneDNN reorder from a sub-memory of the
 * plain input (the window at its offset, the input's strides) to the plain
 * output, threaded (the reference kernel copies on one thread). ViT's three
 * per layer take the query, key and value out of one [197, 1, 2304] product. */
static pp_status build_slice(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0], out = n->out[0];
    if (!f32(x, in) || !f32(x, out) || numel_of(&T(x, out)->shape) == 0)
        return unsup(err, "not a non-empty f32 tensor");
    if (x->tn.blocked[in]) return unsup(err, "its input is in a blocked layout");
    pp_tinfo ti[5];
    if (n->n_in > 5) return unsup(err, "more than 5 inputs");
    for (int k = 0; k < n->n_in; k++) ti[k] = dn_tinfo(x, n->in[k]);
    pp_slice sl;
    /* starts and ends are constants in every plan ppcc writes; anything else is the reference kernel's */
    if (pp_slice_parse(attrs_of(x, n), ti, n->n_in, &sl, err) != PP_OK) return unsup(err, "not a constant window");
    const pp_shape *s = &T(x, in)->shape;
    if (!pp_shape_eq(&sl.out, &T(x, out)->shape)) return unsup(err, "the window is not the output's shape");
    dnnl_dims_t dims, offs;
    for (int d = 0; d < s->rank; d++) {
        if (sl.step[d] != 1) return unsup(err, "a step other than 1");
        dims[d] = sl.out.dim[d], offs[d] = sl.first[d];
    }
    dnnl_memory_desc_t whole, part, to;
    PP_TRY(dn_tensor_plain(x, in, &whole, err));
    DN(dnnl_memory_desc_init_submemory(&part, &whole, dims, offs), "sub-memory descriptor");
    PP_TRY(dn_tensor_plain(x, out, &to, err));
    dnnl_memory_t sm, dm;
    post po;
    PP_TRY(dn_plain_view(x, in, &part, &sm, err));
    PP_TRY(dn_bind_output(x, out, &to, &dm, &po, err));
    PP_TRY(dn_push_reorder(x, sm, dm, STEP_MAIN, err));
    return dn_push_post(x, &po, err);
}

/* Pad: pprt's row copies and fills (runtime/dnnl/kernels/pad.h) on the stage's
 * threads; a computed value or pads: the reference kernel. */
static pp_status build_pad(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0], out = n->out[0];
    if (!f32(x, in) || !f32(x, out) || numel_of(&T(x, out)->shape) == 0 || numel_of(&T(x, in)->shape) == 0)
        return unsup(err, "not non-empty f32 tensors");
    if (x->tn.blocked[in]) return unsup(err, "its input is in a blocked layout");
    pp_tinfo ti[4];
    if (n->n_in > 4) return unsup(err, "more than 4 inputs");
    for (int k = 0; k < n->n_in; k++) ti[k] = dn_tinfo(x, n->in[k]);
    pp_pad pd;
    if (pp_pad_parse(attrs_of(x, n), ti, n->n_in, &pd, err) != PP_OK) return unsup(err, "not constant pads");
    if (pd.mode == PPRT_PAD_CONSTANT && !pd.value_known) return unsup(err, "a computed constant value");
    const pp_shape *s = &T(x, in)->shape;
    if (!pp_shape_eq(&pd.out, &T(x, out)->shape)) return unsup(err, "the pads do not give the output's shape");
    pprt_pad k;
    if (!pprt_pad_plan(s->dim, pd.out.dim, pd.begin, s->rank, pd.mode, pd.value, &k))
        return unsup(err, "its rank or pads");
    step st;
    PP_TRY(dn_own_step(x, run_pad, &k, sizeof k, NULL, "pprt:pad", &st, err));
    return dn_push_own_io(x, st, in, out, err);
}

/* Split: each output its window along the axis of every outer index of the
 * input, pprt's strided row copies (runtime/dnnl/kernels/rowcopy.h) on the stage's
 * threads. The outputs' shapes (checked by ppcc) give the windows. */
static pp_status build_split(pprt_exec *x, const pprt_node *n, pp_err *err) {
    const int in = n->in[0];
    if (!f32(x, in) || numel_of(&T(x, in)->shape) == 0) return unsup(err, "not a non-empty f32 tensor");
    if (x->tn.blocked[in]) return unsup(err, "its input is in a blocked layout");
    const pp_shape *s = &T(x, in)->shape;
    int64_t axis64;
    int axis;
    if (pp_attr_int(attrs_of(x, n), "axis", 0, &axis64, err) != PP_OK ||
        pp_norm_axis(axis64, s->rank, "attribute 'axis'", &axis, err) != PP_OK)
        return unsup(err, "its axis");
    int64_t outer = 1, inner = 1, at = 0;
    for (int d = 0; d < axis; d++) outer *= s->dim[d];
    for (int d = axis + 1; d < s->rank; d++) inner *= s->dim[d];
    for (int k = 0; k < n->n_out; k++) {
        const pp_shape *o = &T(x, n->out[k])->shape;
        if (!f32(x, n->out[k]) || o->rank != s->rank) return unsup(err, "an output's type or rank");
        for (int d = 0; d < s->rank; d++)
            if (d != axis && o->dim[d] != s->dim[d]) return unsup(err, "an output's shape");
        at += o->dim[axis];
    }
    if (at != s->dim[axis]) return unsup(err, "the outputs do not cover the axis");
    at = 0;
    for (int k = 0; k < n->n_out; k++) {
        const int out = n->out[k];
        const int64_t len = T(x, out)->shape.dim[axis];
        if (outer * len * inner == 0) continue;
        const pprt_rowcopy c = {.rows = (size_t)outer, .row_bytes = (size_t)(len * inner) * sizeof(float),
                                .src_stride = (size_t)(s->dim[axis] * inner) * sizeof(float),
                                .dst_stride = (size_t)(len * inner) * sizeof(float),
                                .src_off = (size_t)(at * inner) * sizeof(float)};
        step st;
        PP_TRY(rows_step(x, &c, &st, err));
        at += len;
        PP_TRY(dn_push_own_io(x, st, in, out, err));
    }
    return PP_OK;
}

/* a Reshape and its kin read a oneDNN layout where view_any says so (build_view_laid) */
const dn_family dn_view = {.build = build_view, .any_in = 1u << 0, .any_if = view_any, .view = true};
/* a Transpose reads its input in any layout (build_transpose_laid) */
const dn_family dn_transpose = {.build = build_view, .any_in = 1u << 0, .view = true};
const dn_family dn_split = {.build = build_split};
const dn_family dn_pad = {.build = build_pad};
const dn_family dn_slice = {.build = build_slice};
