#!/usr/bin/env python3
"""The models tests/cuda/fused_attention.sh runs with --cuda-fused-attention
on and off, written with onnx.helper, random weights:
  vit.onnx: two ViT-like encoder blocks (torch 1.13's MultiheadAttention
      export: LayerNorm, the QKV product, Reshape/Transpose/Gather into
      heads, q * scale, MatMul with k transposed, Softmax, MatMul with v,
      the heads back, the output product, residual, MLP with ReLU), x
      [batch, 197, 192], 3 heads of 64: two fused patterns;
  small.onnx: the patterns' variants, each its own output:
      a: [batch, 4, 5, 8] MatMul, Div by sqrt(8), Softmax, MatMul (fused;
         its Softmax and last MatMul are module 'asm', where the test cuts);
      b: one query row (S = 1) against 33 keys, the scores times a scalar
         on the Mul's left, head dim 16, Dv 24 (fused);
      c: K's operand broadcast over the batch (a weight [1, 16, 40]), no
         scale, 70 queries (fused);
      d: Llama's head dim of 128, 40 queries and keys, a Div by sqrt(128)
         (the kernel's wide geometry: tiles of 32 query rows and 16 keys;
         fused);
      e: the scores also a graph output (not a pattern);
      f: an Add of a constant mask [5, 5] (0 or -1e9) between the product
         and the Softmax, broadcast over the batch and the heads (fused);
      g: BERT's padding mask, an input [batch, 1, 1, 5] (0 or -1e9) added
         after a Div by sqrt(8) (fused);
      h: Llama's causal-plus-padding mask, an input [batch, 1, 5, 5] of 0
         and float32's lowest (-3.4e38), one query row all lowest (a uniform
         softmax, not NaN), after a Mul by a scalar (fused);
      i: the mask added before the Div (Add, Div, Softmax: not a pattern);
      j: DistilBERT's masked_fill, Where(padding [batch, 1, 1, 5] bool, float32's
         lowest, scores) after the Div (fused);
      k: GPT-J's, Where(causal [5, 5] bool constant, scores, float32's lowest)
         before the Div, then BERT's additive padding mask (fused);
      l: head dim 136 (over the kernel's 128: not fused);
      m: BART's frame: q, k and v as [batch * 4, 5, 8], the scores times a
         scalar, reshaped to [batch, 4, 5, 5], Llama's mask (h's) added,
         reshaped back, Softmax, MatMul (fused), the output [batch, 4, 5, 8];
      n: Swin's shifted windows: q, k and v as [batch * 2, 2, 5, 8] (2
         windows of 2 heads), the scores times a scalar, a bias per head
         [2, 5, 5] added, reshaped to [batch, 2, 2, 5, 5], a mask per window
         [2, 1, 5, 5] (0 or -100) added, reshaped back, Softmax, MatMul
         (fused: the windowed mask), the output [batch, 4, 5, 8];
      o: SwinV2's scale per head: q, k and v as n's, the scores times a
         constant [2, 1, 1] (0.9 and 3.5), n's bias added, Softmax, MatMul
         (fused), the output [batch, 4, 5, 8].
Inputs DIR/data/*.npy (3 samples; NaN and +-inf among sample 1's and 2's
values, so some score rows are NaN).
With `wide`, only wide.onnx (the GPU day's timing of the kernel's wide
geometry): a Llama-7B-shaped attention, q [batch, 32, 512, 128], k given
transposed [batch, 32, 128, 512], v, a Div by sqrt(128), a causal mask of
float32's lowest added, Softmax, MatMul; DIR/data_wide: 4 samples.
usage: fattn_models.py DIR [wide]"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(5454)
n = helper.make_node


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def v(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def w(*shape, s=0.05):
    return (rng.standard_normal(shape) * s).astype(np.float32)


def save(g, name):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name))


if len(sys.argv) > 2 and sys.argv[2] == "wide":
    H, S, Dh = 32, 512, 128
    causal = np.where(np.triu(np.ones((S, S), bool), 1), np.finfo(np.float32).min, 0).astype(np.float32)
    nodes = [n("MatMul", ["q", "k"], ["s0"], name="/w/MatMul"), n("Div", ["s0", "sq"], ["s1"], name="/w/Div"),
             n("Add", ["s1", "causal"], ["s2"], name="/w/Add"), n("Softmax", ["s2"], ["p"], name="/w/Softmax", axis=-1),
             n("MatMul", ["p", "v"], ["y"], name="/w/MatMul_1")]
    ins = {"q": ["batch", H, S, Dh], "k": ["batch", H, Dh, S], "v": ["batch", H, S, Dh]}
    save(helper.make_graph(nodes, "wide", [v(k, s) for k, s in ins.items()], [v("y", ["batch", H, S, Dh])],
                           initializer=[c("sq", np.array(np.sqrt(Dh), np.float32)), c("causal", causal)]), "wide.onnx")
    os.makedirs(os.path.join(d, "data_wide"), exist_ok=True)
    for k, s in ins.items():
        np.save(os.path.join(d, "data_wide", k + ".npy"), rng.standard_normal([4] + s[1:]).astype(np.float32))
    sys.exit(0)
os.makedirs(os.path.join(d, "data_vit"), exist_ok=True)
os.makedirs(os.path.join(d, "data_small"), exist_ok=True)

# ---- vit.onnx -----------------------------------------------------------------------------------
E, H, S, Dh = 192, 3, 197, 64
inits = [c("shape_heads", np.array([0, S, 3, H, Dh], np.int64)), c("shape_back", np.array([0, S, E], np.int64)),
         c("scale", np.array(1 / np.sqrt(Dh), np.float32)), c("i0", np.array(0, np.int64)),
         c("i1", np.array(1, np.int64)), c("i2", np.array(2, np.int64))]
nodes = []
x = "x"
for L in range(2):
    p = f"/encoder/layer_{L}"
    inits += [c(f"ln1g{L}", (1 + w(E)).astype(np.float32)), c(f"ln1b{L}", w(E)), c(f"wqkv{L}", w(E, 3 * E)),
              c(f"bqkv{L}", w(3 * E)), c(f"wo{L}", w(E, E)), c(f"bo{L}", w(E)),
              c(f"ln2g{L}", (1 + w(E)).astype(np.float32)), c(f"ln2b{L}", w(E)), c(f"w1{L}", w(E, 2 * E)),
              c(f"b1{L}", w(2 * E)), c(f"w2{L}", w(2 * E, E)), c(f"b2{L}", w(E))]
    t = lambda s: f"{p}_{s}"  # noqa: E731
    nodes += [
        n("LayerNormalization", [x, f"ln1g{L}", f"ln1b{L}"], [t("ln1")], name=f"{p}/ln_1/LayerNormalization",
          axis=-1, epsilon=1e-6),
        n("MatMul", [t("ln1"), f"wqkv{L}"], [t("qkv0")], name=f"{p}/self_attention/MatMul"),
        n("Add", [t("qkv0"), f"bqkv{L}"], [t("qkv")], name=f"{p}/self_attention/Add"),
        n("Reshape", [t("qkv"), "shape_heads"], [t("qkv5")], name=f"{p}/self_attention/Reshape"),
        n("Transpose", [t("qkv5")], [t("qkvT")], name=f"{p}/self_attention/Transpose", perm=[2, 0, 3, 1, 4]),
        n("Gather", [t("qkvT"), "i0"], [t("q")], name=f"{p}/self_attention/Gather", axis=0),
        n("Gather", [t("qkvT"), "i1"], [t("k")], name=f"{p}/self_attention/Gather_1", axis=0),
        n("Gather", [t("qkvT"), "i2"], [t("v")], name=f"{p}/self_attention/Gather_2", axis=0),
        n("Mul", [t("q"), "scale"], [t("qs")], name=f"{p}/self_attention/Mul"),
        n("Transpose", [t("k")], [t("kT")], name=f"{p}/self_attention/Transpose_1", perm=[0, 1, 3, 2]),
        n("MatMul", [t("qs"), t("kT")], [t("sc")], name=f"{p}/self_attention/MatMul_1"),
        n("Softmax", [t("sc")], [t("pr")], name=f"{p}/self_attention/Softmax", axis=-1),
        n("MatMul", [t("pr"), t("v")], [t("ctx")], name=f"{p}/self_attention/MatMul_2"),
        n("Transpose", [t("ctx")], [t("ctxT")], name=f"{p}/self_attention/Transpose_2", perm=[0, 2, 1, 3]),
        n("Reshape", [t("ctxT"), "shape_back"], [t("ctx2")], name=f"{p}/self_attention/Reshape_1"),
        n("MatMul", [t("ctx2"), f"wo{L}"], [t("o0")], name=f"{p}/self_attention/MatMul_3"),
        n("Add", [t("o0"), f"bo{L}"], [t("o")], name=f"{p}/self_attention/Add_1"),
        n("Add", [t("o"), x], [t("r1")], name=f"{p}/Add"),
        n("LayerNormalization", [t("r1"), f"ln2g{L}", f"ln2b{L}"], [t("ln2")], name=f"{p}/ln_2/LayerNormalization",
          axis=-1, epsilon=1e-6),
        n("MatMul", [t("ln2"), f"w1{L}"], [t("h0")], name=f"{p}/mlp/MatMul"),
        n("Add", [t("h0"), f"b1{L}"], [t("h1")], name=f"{p}/mlp/Add"),
        n("Relu", [t("h1")], [t("h2")], name=f"{p}/mlp/Relu"),
        n("MatMul", [t("h2"), f"w2{L}"], [t("h3")], name=f"{p}/mlp/MatMul_1"),
        n("Add", [t("h3"), f"b2{L}"], [t("h4")], name=f"{p}/mlp/Add_1"),
        n("Add", [t("h4"), t("r1")], [t(f"out")], name=f"{p}/Add_1"),
    ]
    x = t("out")
nodes.append(n("Identity", [x], ["y"], name="/out/Identity"))
save(helper.make_graph(nodes, "vit", [v("x", ["batch", S, E])], [v("y", ["batch", S, E])], initializer=inits),
     "vit.onnx")
xv = rng.standard_normal((3, S, E)).astype(np.float32)
xv[1, 7, 11] = np.nan  # a NaN token: its rows NaN from the first block on
xv[2, 9, 3] = np.inf
np.save(os.path.join(d, "data_vit", "x.npy"), xv)

# ---- small.onnx ---------------------------------------------------------------------------------
inits = [c("sqrt8", np.array(np.sqrt(8), np.float32)), c("sqrt128", np.array(np.sqrt(128), np.float32)),
         c("s16", np.array([0.25], np.float32)), c("to3q", np.array([-1, 5, 8], np.int64)),
         c("to3k", np.array([-1, 8, 5], np.int64)), c("to4s", np.array([-1, 4, 5, 5], np.int64)),
         c("to3s", np.array([-1, 5, 5], np.int64)), c("to4y", np.array([-1, 4, 5, 8], np.int64)),
         c("to4q", np.array([-1, 2, 5, 8], np.int64)), c("to4k", np.array([-1, 2, 8, 5], np.int64)),
         c("to5s", np.array([-1, 2, 2, 5, 5], np.int64)), c("to4w", np.array([-1, 2, 5, 5], np.int64)),
         c("bias", (rng.standard_normal((2, 5, 5)) * 2).astype(np.float32)),
         c("wmask", np.where(rng.random((2, 1, 5, 5)) < 0.4, -100, 0).astype(np.float32)),
         c("lscale", np.array([0.9, 3.5], np.float32).reshape(2, 1, 1)),
         c("kc", w(1, 16, 40, s=0.5)), c("mask", np.where(rng.random((5, 5)) < 0.3, -1e9, 0).astype(np.float32)),
         c("low", np.array(np.finfo(np.float32).min, np.float32)), c("causal", np.tril(np.ones((5, 5), bool)))]
nodes = [
    n("MatMul", ["qa", "ka"], ["sa"], name="/a/MatMul"),
    n("Div", ["sa", "sqrt8"], ["sa2"], name="/a/Div"),
    n("Softmax", ["sa2"], ["pa"], name="/asm/Softmax", axis=-1),
    n("MatMul", ["pa", "va"], ["ya"], name="/asm/MatMul_1"),
    n("MatMul", ["qb", "kb"], ["sb"], name="/b/MatMul"),
    n("Mul", ["s16", "sb"], ["sb2"], name="/b/Mul"),
    n("Softmax", ["sb2"], ["pb"], name="/b/Softmax", axis=-1),
    n("MatMul", ["pb", "vb"], ["yb"], name="/b/MatMul_1"),
    n("MatMul", ["qc", "kc"], ["sc"], name="/c/MatMul"),
    n("Softmax", ["sc"], ["pc"], name="/c/Softmax", axis=2),
    n("MatMul", ["pc", "vc"], ["yc"], name="/c/MatMul_1"),
    n("MatMul", ["qd", "kd"], ["sd0"], name="/d/MatMul"),
    n("Div", ["sd0", "sqrt128"], ["sd"], name="/d/Div"),
    n("Softmax", ["sd"], ["pd"], name="/d/Softmax", axis=-1),
    n("MatMul", ["pd", "vd"], ["yd"], name="/d/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["se"], name="/e/MatMul"),
    n("Softmax", ["se"], ["pe"], name="/e/Softmax", axis=-1),
    n("MatMul", ["pe", "va"], ["ye"], name="/e/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["sf"], name="/f/MatMul"),
    n("Add", ["sf", "mask"], ["sf2"], name="/f/Add"),
    n("Softmax", ["sf2"], ["pf"], name="/f/Softmax", axis=-1),
    n("MatMul", ["pf", "va"], ["yf"], name="/f/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["sg"], name="/g/MatMul"),
    n("Div", ["sg", "sqrt8"], ["sg2"], name="/g/Div"),
    n("Add", ["mg", "sg2"], ["sg3"], name="/g/Add"),
    n("Softmax", ["sg3"], ["pg"], name="/g/Softmax", axis=-1),
    n("MatMul", ["pg", "va"], ["yg"], name="/g/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["sh"], name="/h/MatMul"),
    n("Mul", ["sh", "s16"], ["sh2"], name="/h/Mul"),
    n("Add", ["sh2", "mh"], ["sh3"], name="/h/Add"),
    n("Softmax", ["sh3"], ["ph"], name="/h/Softmax", axis=-1),
    n("MatMul", ["ph", "va"], ["yh"], name="/h/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["si"], name="/i/MatMul"),
    n("Add", ["si", "mg"], ["si2"], name="/i/Add"),
    n("Div", ["si2", "sqrt8"], ["si3"], name="/i/Div"),
    n("Softmax", ["si3"], ["pi"], name="/i/Softmax", axis=-1),
    n("MatMul", ["pi", "va"], ["yi"], name="/i/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["sj"], name="/j/MatMul"),
    n("Div", ["sj", "sqrt8"], ["sj2"], name="/j/Div"),
    n("Where", ["cj", "low", "sj2"], ["sj3"], name="/j/Where"),
    n("Softmax", ["sj3"], ["pj"], name="/j/Softmax", axis=-1),
    n("MatMul", ["pj", "va"], ["yj"], name="/j/MatMul_1"),
    n("MatMul", ["qa", "ka"], ["sk"], name="/k/MatMul"),
    n("Where", ["causal", "sk", "low"], ["sk2"], name="/k/Where"),
    n("Div", ["sk2", "sqrt8"], ["sk3"], name="/k/Div"),
    n("Add", ["sk3", "mg"], ["sk4"], name="/k/Add"),
    n("Softmax", ["sk4"], ["pk"], name="/k/Softmax", axis=-1),
    n("MatMul", ["pk", "va"], ["yk"], name="/k/MatMul_1"),
    n("MatMul", ["ql", "kl"], ["sl"], name="/l/MatMul"),
    n("Softmax", ["sl"], ["pl"], name="/l/Softmax", axis=-1),
    n("MatMul", ["pl", "vl"], ["yl"], name="/l/MatMul_1"),
    n("Reshape", ["qa", "to3q"], ["qm"], name="/m/Reshape"),
    n("Reshape", ["ka", "to3k"], ["km"], name="/m/Reshape_1"),
    n("Reshape", ["va", "to3q"], ["vm"], name="/m/Reshape_2"),
    n("MatMul", ["qm", "km"], ["sm"], name="/m/MatMul"),
    n("Mul", ["sm", "s16"], ["sm2"], name="/m/Mul"),
    n("Reshape", ["sm2", "to4s"], ["sm3"], name="/m/Reshape_3"),
    n("Add", ["sm3", "mh"], ["sm4"], name="/m/Add"),
    n("Reshape", ["sm4", "to3s"], ["sm5"], name="/m/Reshape_4"),
    n("Softmax", ["sm5"], ["pm"], name="/m/Softmax", axis=-1),
    n("MatMul", ["pm", "vm"], ["ym3"], name="/m/MatMul_1"),
    n("Reshape", ["ym3", "to4y"], ["ym"], name="/m/Reshape_5"),
    n("Reshape", ["qa", "to4q"], ["qn"], name="/n/Reshape"),
    n("Reshape", ["ka", "to4k"], ["kn"], name="/n/Reshape_1"),
    n("Reshape", ["va", "to4q"], ["vn"], name="/n/Reshape_2"),
    n("MatMul", ["qn", "kn"], ["sn"], name="/n/MatMul"),
    n("Mul", ["sn", "s16"], ["sn2"], name="/n/Mul"),
    n("Add", ["sn2", "bias"], ["sn3"], name="/n/Add"),
    n("Reshape", ["sn3", "to5s"], ["sn4"], name="/n/Reshape_3"),
    n("Add", ["sn4", "wmask"], ["sn5"], name="/n/Add_1"),
    n("Reshape", ["sn5", "to4w"], ["sn6"], name="/n/Reshape_4"),
    n("Softmax", ["sn6"], ["pn"], name="/n/Softmax", axis=-1),
    n("MatMul", ["pn", "vn"], ["yn4"], name="/n/MatMul_1"),
    n("Reshape", ["yn4", "to4y"], ["yn"], name="/n/Reshape_5"),
    n("Reshape", ["qa", "to4q"], ["qo"], name="/o/Reshape"),
    n("Reshape", ["ka", "to4k"], ["ko"], name="/o/Reshape_1"),
    n("Reshape", ["va", "to4q"], ["vo"], name="/o/Reshape_2"),
    n("MatMul", ["qo", "ko"], ["so"], name="/o/MatMul"),
    n("Mul", ["so", "lscale"], ["so2"], name="/o/Mul"),
    n("Add", ["so2", "bias"], ["so3"], name="/o/Add"),
    n("Softmax", ["so3"], ["po"], name="/o/Softmax", axis=-1),
    n("MatMul", ["po", "vo"], ["yo4"], name="/o/MatMul_1"),
    n("Reshape", ["yo4", "to4y"], ["yo"], name="/o/Reshape_3"),
]
ins = {"qa": ["batch", 4, 5, 8], "ka": ["batch", 4, 8, 5], "va": ["batch", 4, 5, 8],
       "qb": ["batch", 2, 1, 16], "kb": ["batch", 2, 16, 33], "vb": ["batch", 2, 33, 24],
       "qc": ["batch", 70, 16], "vc": ["batch", 40, 64],
       "qd": ["batch", 2, 40, 128], "kd": ["batch", 2, 128, 40], "vd": ["batch", 2, 40, 128],
       "ql": ["batch", 1, 3, 136], "kl": ["batch", 1, 136, 4], "vl": ["batch", 1, 4, 136],
       "mg": ["batch", 1, 1, 5], "mh": ["batch", 1, 5, 5], "cj": ["batch", 1, 1, 5]}
outs = [v("ya", ["batch", 4, 5, 8]), v("yb", ["batch", 2, 1, 24]), v("yc", ["batch", 70, 64]),
        v("yd", ["batch", 2, 40, 128]), v("se", ["batch", 4, 5, 5]), v("ye", ["batch", 4, 5, 8]),
        v("yf", ["batch", 4, 5, 8]), v("yg", ["batch", 4, 5, 8]), v("yh", ["batch", 4, 5, 8]),
        v("yi", ["batch", 4, 5, 8]), v("yj", ["batch", 4, 5, 8]), v("yk", ["batch", 4, 5, 8]),
        v("yl", ["batch", 1, 3, 136]), v("ym", ["batch", 4, 5, 8]),
        v("yn", ["batch", 4, 5, 8]), v("yo", ["batch", 4, 5, 8])]
vin = [v(k, s) for k, s in ins.items() if k != "cj"] + \
    [helper.make_tensor_value_info("cj", TensorProto.BOOL, ins["cj"])]
save(helper.make_graph(nodes, "small", vin, outs, initializer=inits), "small.onnx")
for k, s in ins.items():
    a = (rng.standard_normal([3] + s[1:]) * 1.5).astype(np.float32)
    if k == "qa":
        a[1, 0, 2, 3] = np.nan  # a NaN score row
        a[2, 1, 0, 0] = np.inf  # +inf and -inf scores: a NaN row
    if k == "kb":
        a[1, 0, 5, :] = -np.inf  # sample 1, head 0: every key's element 5 -inf: all scores +-inf, a NaN row
    if k == "mg":  # padding: keys masked per sample (the last two in sample 0, one in sample 1, none in 2)
        a = np.zeros(a.shape, np.float32)
        a[0, ..., 3:] = -1e9
        a[1, ..., 1] = -1e9
    if k == "mh":  # causal plus padding at float32's lowest; sample 2's query row 2 masked whole
        low = np.finfo(np.float32).min
        a = np.where(np.triu(np.ones((5, 5), bool), 1), low, 0).astype(np.float32) * np.ones((3, 1, 1, 1), np.float32)
        a[1, 0, :, 4] = low
        a[2, 0, 2, :] = low
        a = a.astype(np.float32)
    if k == "cj":  # padding as masked_fill's condition: True where masked (sample 2's keys all masked: a uniform row)
        a = np.zeros(a.shape, bool)
        a[0, ..., 4] = True
        a[2] = True
    np.save(os.path.join(d, "data_small", k + ".npy"), a)
