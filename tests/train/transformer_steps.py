#!/usr/bin/env python3
"""One training step of three small transformers, ppcc --train against
PyTorch autograd: a ViT (patch-embedding Conv, class token, position
embedding, two pre-norm nn.TransformerEncoderLayer; nn.MultiheadAttention's
export: Slice, Transpose, batched MatMul), timm's VisionTransformer when timm
imports (Split and Squeeze of the qkv, Gather of the class token, Expand),
HF BertForSequenceClassification (2 layers, hidden 64; embeddings by Gather
of data indices), HF GPT2LMHeadModel (2 layers, hidden 64, causal mask by
Where, embeddings tied to the head, its tanh GELU fused by ppcc,
token-level cross-entropy over logits [N, V, T]) and HF LlamaForCausalLM
(2 layers, hidden 64, grouped key-value heads, rotary embeddings, SwiGLU,
its written-out RMSNorm fused into RMSNormalization by ppcc). Random weights, exported as for training (TrainingMode.TRAINING,
no constant folding, opset 14); the Dropout modules (p = 0) are replaced by
Identity before the export, Dropout's rule being another part's. The ViT
again exported at opset 17, where torch writes LayerNormalization (its
gradient pp.LayerNormGrad, on the own kernel on cuda-emu).

The loss and EVERY weight's gradient are compared at -pp 1, 2 and 4 on the
reference kernels, at -pp 1 on oneDNN and at -pp 1 and 2 on cuda-emu (the
CUDA step list; its two splits must give the same bits, and no node may run
on its host fallback: --cuda-explain at -pp 2): the loss within rtol 1e-4; a
gradient g against autograd's w elementwise within
    |g - w| <= 1e-3 |w| + 1e-5 max(max|w|, 1e-3 M)
with M the largest gradient of any weight of the model (the float32 sums of
the attention and LayerNorm backward run in another order on each side; a
gradient that is 0 but for rounding, as a key projection's bias is under
softmax, compares at M's scale). The worst error seen, beyond the rtol and
over the largest gradient, is printed: 4e-7 on a Zen 4 VM, where the bound
is 1e-5. A model whose library does not import is skipped, and says so.
On oneDNN the -pp 1 step also runs with its two training routes off
(PPRT_DNNL_WEIGHT_T=0 PPRT_DNNL_GELU_GRAD=0), against autograd the same way,
and PPRT_DNNL_VERBOSE=2 must show them taken: Transposes of weights that
their products read through (every model: nn.Linear's MatMul(X,
Transpose(W)), GPT-2's tied head) and Gelu's gradient on oneDNN (all but
GPT-2, whose tanh GELU's gradient rule is written in ops, and Llama, which
has none).
Four AdamW steps of each at -pp 2 on oneDNN and cuda-emu with the executors
kept across the steps (the default; runtime/keep.h) give the bits of
executors made every step (PPRT_TRAIN_FRESH=1).
Usage: transformers.py PPCC PPRT WORK"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import check_same_outputs, check_step, file_name, host_steps, step_run  # noqa: E402,F401

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_transformers")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

RTOL, ATOL_OF_MAX = 1e-3, 1e-5
# cuda-emu: the CUDA step list (its backward ops on their CUDA steps), at -pp 1 and 2, which must
# give the same bits
RUNS = (("ref", 1), ("ref", 2), ("ref", 4), ("dnnl", 1), ("cuda-emu", 1), ("cuda-emu", 2))
worst = {}


def no_dropout(mod):
    for name, child in mod.named_children():
        if isinstance(child, nn.Dropout):
            setattr(mod, name, nn.Identity())
        else:
            no_dropout(child)
    return mod


def one_step(name, mod, x, labels, opset=14, reads=True, gelu=True, fewer=False):
    """cross-entropy of mod(x) (classes on axis 1) against labels: ppcc/pprt vs autograd."""
    t0 = time.time()
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    mod = no_dropout(mod)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(mod, (x,), path, input_names=["x"], output_names=["out"], opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    np.save(os.path.join(d, "data", "x.npy"), x.numpy())
    np.save(os.path.join(d, "data", "labels.npy"), labels.numpy())
    mod.train()
    mod.zero_grad()
    want_loss = F.cross_entropy(mod(x), labels)
    want_loss.backward()
    check(all(p.grad is not None for p in mod.parameters()), f"{name}: a weight without a torch gradient")
    want = {n: p.grad.numpy() for n, p in mod.named_parameters() if p.grad is not None}
    err = 0.0
    for be, pp in RUNS:
        tag = f"{name} -pp {pp} on {be}"
        o = step_run(PPCC, PPRT, path, d, x.shape[0], pp, be, tag)
        if o is None:
            continue
        err = max(err, check_step(o, want_loss.item(), want, tag, RTOL, ATOL_OF_MAX))
    err = max(err, dnnl_routes(name, d, want_loss.item(), want, reads, gelu))
    err = max(err, row_order(name, path, d, x.shape[0], want_loss.item(), want, fewer))
    gemm_not_transposed(name, path, d, x.shape[0])
    check_same_outputs(*(os.path.join(d, f"out_cuda-emu_pp{pp}") for pp in (1, 2)), f"{name}: cuda-emu at -pp 1, 2")
    if os.path.exists(os.path.join(d, "pp2.plan")):
        h = host_steps(PPRT, os.path.join(d, "pp2.plan"), os.path.join(d, "data"))
        check(h == 0, f"{name}: {h} steps on the host fallback at -pp 2 on cuda-emu (--cuda-explain), want 0")
    kept_steps(name, d)
    worst[name] = err
    print(f"{name}: {len(want)} weights, worst error beyond rtol {err:.2e} of the largest gradient, "
          f"{time.time() - t0:.1f} s", flush=True)


def gemm_not_transposed(name, path, d, batch):
    """After simplify no Transpose reads a Gemm's output: a weight's gradient through its Linear's Transpose(W),
    (X^T dY)^T, is the Gemm dY^T X (passes/simplify.c), whose gradients the runs above checked."""
    import subprocess
    r = subprocess.run([PPCC, path, "--train", "--loss", "cross-entropy:out", "-b", str(batch), "--dump-ir=simplify",
                        "-q", "-o", os.path.join(d, "dump.plan")], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: ppcc --dump-ir: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    nodes = [ln.split() for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("%") and " <- " in ln]
    gemm = {f[3].split(":")[0] for f in nodes if f[2] == "Gemm"}
    bad = [f[3] for f in nodes if f[2] == "Transpose" and f[5].rstrip(",") in gemm]
    check(bool(gemm) and not bad, f"{name}: {len(gemm)} Gemms, Transposes of their outputs: {bad[:3]}")


def row_order(name, path, d, batch, want_loss, want, fewer):
    """passes/rows.c on the forward graph before its gradient: with the pass (every run above) a model of
    batch-first nn.MultiheadAttention has fewer Transposes in its training graph than with --disable-pass rows
    (fewer: whether it must; the others need not change), and the step without the pass matches autograd too."""
    import subprocess
    counts = []
    for extra in ([], ["--disable-pass", "rows"]):
        r = subprocess.run([PPCC, path, "--train", "--loss", "cross-entropy:out", "-b", str(batch), "--dump-ir", "-q",
                            "-o", os.path.join(d, "rows.plan" if extra else "dump.plan")] + extra,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: ppcc --dump-ir {' '.join(extra)}: exit {r.returncode}: "
              f"{r.stderr.strip()[-300:]}")
        counts.append(sum(ln.split()[2] == "Transpose" for ln in (r.stdout + r.stderr).splitlines()
                          if ln.startswith("%") and " <- " in ln))
    check(counts[0] < counts[1] if fewer else counts[0] <= counts[1],
          f"{name}: {counts[0]} Transposes in the training graph with the row-order pass, {counts[1]} without")
    o = os.path.join(d, "rows_off")
    r = subprocess.run([PPRT, os.path.join(d, "rows.plan"), os.path.join(d, "data"), "-o", o, "-q", "--backend", "ref"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: without the row-order pass: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    print(f"{name}: Transposes in the training graph {counts[1]} -> {counts[0]} with the row-order pass", flush=True)
    return check_step(o, want_loss, want, f"{name} -pp 1 on ref without the row-order pass", RTOL, ATOL_OF_MAX) \
        if not r.returncode else 0.0


def dnnl_routes(name, d, want_loss, want, reads, gelu):
    """oneDNN's two training routes (runtime/dnnl/matmul.c, eltwise.c): the -pp 1 step with the products
    reading each Linear's weight through its Transpose (the Transpose then runs as nothing) and Gelu's gradient
    on oneDNN's eltwise backward (PPRT_DNNL_VERBOSE=2 shows which), taken where the model has them, and the step
    with both off (PPRT_DNNL_WEIGHT_T=0 PPRT_DNNL_GELU_GRAD=0) against autograd as well."""
    import subprocess
    plan, data = os.path.join(d, "pp1.plan"), os.path.join(d, "data")
    r = subprocess.run([PPRT, plan, data, "-o", os.path.join(d, "routes_on"), "-q", "--backend", "dnnl"],
                       capture_output=True, text=True, env={**os.environ, "PPRT_DNNL_VERBOSE": "2"})
    check(r.returncode == 0, f"{name}: dnnl, verbose: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    lines = r.stderr.splitlines()
    n_read = sum("its products read its input" in ln and "Transpose" in ln for ln in lines)
    n_gelu = sum("pp.UnaryGrad" in ln and " jit:" in ln for ln in lines)
    check((n_read > 0) == reads, f"{name}: {n_read} Transposes of weights read through by their products, "
          f"want {'some' if reads else 'none'}")
    check((n_gelu > 0) == gelu, f"{name}: {n_gelu} Gelu gradients on oneDNN, want {'some' if gelu else 'none'}")
    o = os.path.join(d, "routes_off")
    r = subprocess.run([PPRT, plan, data, "-o", o, "-q", "--backend", "dnnl"], capture_output=True, text=True,
                       env={**os.environ, "PPRT_DNNL_WEIGHT_T": "0", "PPRT_DNNL_GELU_GRAD": "0"})
    check(r.returncode == 0, f"{name}: dnnl, routes off: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return check_step(o, want_loss, want, f"{name} -pp 1 on dnnl, routes off", RTOL, ATOL_OF_MAX) if not \
        r.returncode else 0.0


def kept_steps(name, d):
    """4 AdamW steps of the -pp 2 plan on dnnl and cuda-emu with the executors kept across steps (runtime/keep.h:
    oneDNN's reordered weights and the CUDA weight space made again after each update; the LayerNorms', the
    attention's and the embeddings' weights among them) against executors made every step: the same bits."""
    import subprocess
    plan = os.path.join(d, "pp2.plan")
    for be in ("dnnl", "cuda-emu"):
        outs = []
        for fresh in ("0", "1"):
            o = os.path.join(d, f"kept_{be}_{fresh}")
            r = subprocess.run([PPRT, plan, os.path.join(d, "data"), "--steps", "4", "--optimizer", "adamw", "--lr",
                                "1e-2", "--backend", be, "--save-weights", o, "-q"], capture_output=True, text=True,
                               env={**os.environ, "PPRT_TRAIN_FRESH": fresh})
            check(r.returncode == 0, f"{name}: 4 steps on {be}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            outs.append(o)
        check(all(os.path.isdir(o) and os.listdir(o) for o in outs), f"{name} on {be}: no trained weights")
        check_same_outputs(*outs, f"{name}: 4 steps on {be}, kept executors against fresh ones")


torch.manual_seed(0)


# ---- a ViT of our own, over nn.MultiheadAttention ---------------------------------------------
class ViT(nn.Module):
    def __init__(self, img=16, patch=4, dim=64, heads=4, depth=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation="gelu",
                                                               batch_first=True, norm_first=True) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)[:, 0])


one_step("vit", ViT(), torch.randn(4, 3, 16, 16), torch.tensor([1, 7, 3, 3]), fewer=True)
# the same ViT exported at opset 17: its LayerNorms as LayerNormalization, their gradients pp.LayerNormGrad
torch.manual_seed(3)
one_step("vit_opset17", ViT(), torch.randn(4, 3, 16, 16), torch.tensor([2, 0, 5, 9]), opset=17, fewer=True)

try:
    from timm.models.vision_transformer import VisionTransformer
except Exception as e:  # noqa: BLE001
    print(f"timm ViT skipped: timm does not import ({type(e).__name__})")
else:
    one_step("vit_timm", VisionTransformer(img_size=16, patch_size=4, embed_dim=64, depth=2, num_heads=4, mlp_ratio=2,
                                           num_classes=10), torch.randn(4, 3, 16, 16), torch.tensor([0, 9, 2, 2]))

# ---- HF BERT and GPT-2 ------------------------------------------------------------------------
try:
    from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
except Exception as e:  # noqa: BLE001
    print(f"BERT and GPT-2 skipped: transformers does not import ({type(e).__name__})")
else:
    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = BertForSequenceClassification(BertConfig(
                vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                max_position_embeddings=32, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))

        def forward(self, ids):
            return self.m(input_ids=ids).logits

    ids = torch.randint(0, 100, (4, 12))
    ids[0, :3] = ids[1, 5]  # repeated tokens: their embedding rows sum
    one_step("bert", Bert(), ids, torch.tensor([2, 0, 1, 1]))

    class GPT2(nn.Module):
        """logits [N, V, T]: classes on axis 1, as ppcc's cross-entropy and torch's take them"""

        def __init__(self):
            super().__init__()
            self.m = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=32, n_embd=64, n_layer=2, n_head=2,
                                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits.transpose(1, 2)

    ids = torch.randint(0, 100, (4, 12))
    # GPT-2's GELU, the tanh formula written out: ppcc fuses it into Gelu(approximate "tanh") since 2026-12-06,
    # whose gradient rule is written in ops (no pp.UnaryGrad to put on oneDNN)
    one_step("gpt2", GPT2(), ids, torch.roll(ids, -1, 1), gelu=False)

try:
    from transformers import LlamaConfig, LlamaForCausalLM
except Exception as e:  # noqa: BLE001
    print(f"Llama skipped: transformers has no Llama ({type(e).__name__})")
else:
    class Llama(nn.Module):
        """HF's LlamaForCausalLM (2 layers, hidden 64, 4 query and 2 key-value heads): its RMSNorm written out,
        which ppcc fuses into RMSNormalization (its gradient pp.RMSNormGrad's rule), rotary embeddings, SwiGLU,
        the causal mask; logits [N, V, T]"""

        def __init__(self):
            super().__init__()
            self.m = LlamaForCausalLM(LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128,
                                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                  max_position_embeddings=32))

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits.transpose(1, 2)

    ids = torch.randint(0, 100, (4, 12))
    one_step("llama", Llama(), ids, torch.roll(ids, -1, 1), gelu=False)  # (SiLU, no GELU)
    import subprocess
    r = subprocess.run([PPCC, os.path.join(WORK, "llama", "model.onnx"), "--train", "--loss", "cross-entropy:out",
                        "-b", "4", "--dump-ir", "-q", "-o", os.devnull], capture_output=True, text=True)
    n_rms = sum(" RMSNormalization " in ln and " <- " in ln for ln in r.stdout.splitlines())
    check(r.returncode == 0 and n_rms == 5, f"llama: {n_rms} RMSNormalization nodes in the training graph, want 5 "
          f"(2 layers x 2 and the final norm; exit {r.returncode})")

testlib.finish("train_transformers")
