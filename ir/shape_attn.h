/* shape_attn.h: the parsers of RotaryEmbedding's and Attention's inputs and
 * attributes, shared by shape inference (ir/shape_attn.c) and the reference
 * kernels (runtime/cpu/ref_attn.c), so the two read them the same way.
 * Internal to ir/ and runtime/cpu/. */
#ifndef PP_SHAPE_ATTN_H
#define PP_SHAPE_ATTN_H

#include "base.h"

/* RotaryEmbedding(X, cos_cache, sin_cache[, position_ids]). X is
 * [B, H, S, D] (4-D) or [B, S, H*D] (3-D, attribute num_heads = H); the
 * first `rot` values of each head are rotated (rotary_embedding_dim, default
 * D), as two halves or, with `interleaved`, as even/odd pairs. The caches
 * are [max_pos, rot/2] indexed by position_ids [B, S], or [B, S, rot/2]. */
typedef struct pp_rope {
    int64_t B, H, S, D, rot;
    bool three_d, interleaved, has_pos;
} pp_rope;

pp_status pp_rope_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_rope *r, pp_err *err);

/* Attention(Q, K, V[, attn_mask, past_key, past_value, nonpad_kv_seqlen]):
 * Q [B, Hq, Sq, D] or [B, Sq, Hq*D]; K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv]
 * (or 3-D with q_num_heads / kv_num_heads); past_key/past_value [B, Hkv, P,
 * D|Dv] are prepended to K and V (T = P + Skv keys in all). Query head h
 * reads key/value head h / (Hq / Hkv) (GQA, MQA). The mask (bool: false
 * masks out; float: added) broadcasts to [B, Hq, Sq, T], its last dim
 * possibly shorter (the rest masked). */
typedef struct pp_attn {
    int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv;
    bool three_d, causal, has_mask, mask_bool, has_nonpad;
    float scale, softcap;
    int qk_mode;                        /* qk_matmul_output_mode, 0..3 */
    pp_shape mask;                      /* the mask's shape, right-aligned to rank 4 */
} pp_attn;

pp_status pp_attn_parse(pp_attrs a, const pp_tinfo *in, int n_in, pp_attn *t, pp_err *err);

#endif
