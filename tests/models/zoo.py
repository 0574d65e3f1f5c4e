#!/usr/bin/python3
"""zoo.py - registry and ONNX exporter for models people split with pipeline
parallelism (random weights only: nothing is ever downloaded).

Usage:
  zoo.py list                      names, one per line: NAME<TAB>fast|slow
  zoo.py export NAME OUTDIR [--batch B] [--seed S] [--opset N]
                [--no-expected] [--no-torch] [--ort-mem-limit-gb G]
                [--threads T] [--input-size C,H,W]

export writes
  OUTDIR/model.onnx              input "input", output "output", dim 0 named
                                 "batch" (dynamic); models whose weights are
                                 over 1.5 GB keep them in OUTDIR/model.onnx.data
                                 (ONNX external data, one file). The
                                 transformers (Hugging Face configs, kind
                                 "transformer" in meta.json) take input_ids
                                 and attention_mask [batch, seq], both dims
                                 dynamic, and name their output as the model
                                 does (logits, last_hidden_state)
  OUTDIR/data/input.npy          seeded random float32 image batch (int64
                                 token ids for the GPT); the transformers:
                                 data/input_ids.npy, data/attention_mask.npy
                                 (4 samples; sample 1 padded over its last
                                 quarter, sample 3 over its first 2 tokens)
  OUTDIR/expected/output.npy     onnxruntime's output on model.onnx: the
                                 reference for ppcc/pprt (not written with
                                 --no-expected, or when onnxruntime would need
                                 more than --ort-mem-limit-gb); NAME.npy for
                                 a transformer's output NAME
  OUTDIR/torch/output.npy        PyTorch's output on the same input (not
                                 written with --no-torch)
  OUTDIR/meta.json               name, params, onnx_ops {op: count}, opset,
                                 input_shape, torch_vs_ort_max_abs_err,
                                 (transformers) kind and compile_args, plus
                                 timings, file sizes, output statistics, the
                                 batch-1 check and any export errors
Exit status 0 on success; on failure meta.json holds "error" and the status
is 1.

Export: torch.onnx.export, eval mode, do_constant_folding=True, opset 13 or
the lowest opset >= 13 that exports (recorded in meta.json with the errors
of the lower ones). Weights: the architecture's default init with torch
seeded, then made "non-trivial" so a compiler that drops or swaps them shows
up: every BatchNorm gets random running stats and affine params (as
export_torchvision.py does, so BN folding is exercised), LayerNorm /
GroupNorm affine params are perturbed, zero-initialised tensors (ViT heads,
class tokens, biases) get small random values and tiny layer-scale
constants (ConvNeXt's 1e-6) become O(0.1).
The onnxruntime check also reruns the model at batch 1 on input[:1] (at
batch 2 on the input twice when --batch is 1): pprt runs micro-batches, so
the batch axis must really be dynamic; meta.json "rebatch_check" holds the
max abs difference to the matching rows of expected/output.npy.
"""
import argparse
import collections
import gc
import importlib.util
import inspect
import json
import math
import os
import shutil
import sys
import time
import traceback
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EXTERNAL_DATA_BYTES = int(1.5 * 1024 ** 3)
OPSETS = list(range(13, 18))          # torch 1.13 exports up to opset 17


# ---------------------------------------------------------------------------
# hand-written models

def _double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True))


class UpConvT(nn.Module):
    """ConvTranspose2d x2 upsampling, concat skip, double conv."""

    def __init__(self, cin, cskip, cout):
        super().__init__()
        self.upsample = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv = _double_conv(cout + cskip, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([self.upsample(x), skip], dim=1))


class UpNearest(nn.Module):
    """Nearest x2 upsampling + 1x1 conv, concat skip, double conv."""

    def __init__(self, cin, cskip, cout):
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.reduce = nn.Conv2d(cin, cout, 1)
        self.conv = _double_conv(cout + cskip, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([self.reduce(self.upsample(x)), skip],
                                   dim=1))


class UNet(nn.Module):
    """Small U-Net: [B,3,64,64] -> [B,2,64,64] logits. Three down levels
    (64, 32, 16), a bottleneck at 8x8, three up levels; every level's skip
    is concatenated. up1/up3 upsample with ConvTranspose, up2 with nearest
    Resize so both paths are covered."""

    def __init__(self, cin=3, ncls=2, w=16):
        super().__init__()
        self.down1 = _double_conv(cin, w)            # 64x64
        self.pool1 = nn.MaxPool2d(2)
        self.down2 = _double_conv(w, 2 * w)          # 32x32
        self.pool2 = nn.MaxPool2d(2)
        self.down3 = _double_conv(2 * w, 4 * w)      # 16x16
        self.pool3 = nn.MaxPool2d(2)
        self.bottleneck = _double_conv(4 * w, 8 * w)  # 8x8
        self.up1 = UpConvT(8 * w, 4 * w, 4 * w)      # -> 16x16
        self.up2 = UpNearest(4 * w, 2 * w, 2 * w)    # -> 32x32
        self.up3 = UpConvT(2 * w, w, w)              # -> 64x64
        self.head = nn.Conv2d(w, ncls, 1)
        # He init keeps activations O(1) through the 14 Conv+BN+ReLU layers
        # (PyTorch's default init shrinks them ~2x per layer)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(self.pool1(d1))
        d3 = self.down3(self.pool2(d2))
        b = self.bottleneck(self.pool3(d3))
        u = self.up1(b, d3)
        u = self.up2(u, d2)
        u = self.up3(u, d1)
        return self.head(u)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, seq_len):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        # constant lower-triangular mask, applied with masked_fill(-inf)
        # (exports as a constant-folded Where)
        self.register_buffer("mask", torch.tril(
            torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len))

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.reshape(B, T, self.n_head, hd).transpose(1, 2)
        k = k.reshape(B, T, self.n_head, hd).transpose(1, 2)
        v = v.reshape(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_head, seq_len):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, seq_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Small GPT-style decoder: int64 token ids [B,32] -> logits
    [B,32,512]. Token + learned positional embedding, 4 pre-LN blocks of
    causal self-attention + GELU MLP, final LayerNorm, LM head."""

    def __init__(self, vocab=512, d_model=128, n_head=4, n_layer=4,
                 seq_len=32):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Parameter(torch.randn(seq_len, d_model) * 0.5)
        self.blocks = nn.ModuleList(
            [Block(d_model, n_head, seq_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


# ---------------------------------------------------------------------------
# registry

class Spec:
    def __init__(self, name, tag, source, build, input_shape=(3, 224, 224),
                 input_kind="image", vocab=None, notes="", output=None,
                 samples=None):
        self.name = name
        self.tag = tag              # "fast" | "slow"
        self.source = source        # "torchvision" | "timm" | "zoo.py"
        self.build = build          # () -> nn.Module (random weights)
        # per sample, without batch; None: taken from the built model
        self.input_shape = tuple(input_shape) if input_shape else None
        # "image" | "tokens" | "hf" (input_ids + attention_mask, both
        # [batch, seq] with seq = input_shape[0], dynamic; output `output`)
        self.input_kind = input_kind
        self.vocab = vocab
        self.notes = notes
        self.output = output or "output"
        self.samples = samples      # "hf": samples in data/ (--batch ignored)


REGISTRY = collections.OrderedDict()


def register(spec):
    REGISTRY[spec.name] = spec


def _tv(name):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return build


for _name, _notes in [
        ("resnet50", "Conv/BN/ReLU, residual Adds"),
        ("mobilenet_v3_small", "depthwise convs, HardSwish/HardSigmoid SE"),
        ("efficientnet_b0", "SiLU, sigmoid squeeze-excitation"),
        ("regnet_y_400mf", "group convs, SE"),
        ("densenet121", "dense-block concatenations"),
        ("convnext_tiny", "7x7 depthwise, LayerNorm, GELU, permutes, "
                          "layer scale"),
        ("swin_t", "shifted-window attention, roll, LayerNorm"),
        ("vit_b_16", "ViT: LayerNorm (decomposed at opset 13), GELU, "
                     "attention matmuls")]:
    register(Spec(_name, "fast", "torchvision", _tv(_name), notes=_notes))

class SegOut(nn.Module):
    """A torchvision segmentation model's 'out' map (its own forward returns
    a dict), computed as that forward does, with the backbone and the
    classifier as this module's own top-level modules (what the `params`
    policy splits)."""

    def __init__(self, m):
        super().__init__()
        self.backbone, self.classifier = m.backbone, m.classifier
        self.lraspp = type(m).__name__ == "LRASPP"   # its head takes the backbone's whole dict

    def forward(self, x):
        f = self.backbone(x)
        y = self.classifier(f if self.lraspp else f["out"])
        return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def _tv_seg(name):
    def build():
        import torchvision
        return SegOut(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None,
                                                                      num_classes=21, aux_loss=False))
    return build


# The torchvision sweep (tag "tvsweep", not in CI: run_zoo.py WORK --tag
# tvsweep): the classification families the fast tag leaves out, and the
# semantic segmentation models (bilinear Resize back to the input's size).
for _name, _shape in [("alexnet", None), ("vgg11_bn", None), ("squeezenet1_1", None), ("googlenet", None),
                      ("inception_v3", (3, 299, 299)), ("shufflenet_v2_x0_5", None), ("mnasnet0_5", None),
                      ("mobilenet_v2", None), ("mobilenet_v3_large", None), ("resnext50_32x4d", None),
                      ("wide_resnet50_2", None), ("regnet_x_400mf", None), ("efficientnet_v2_s", None),
                      ("vit_b_32", None), ("swin_v2_t", None), ("maxvit_t", None)]:
    register(Spec("tv_" + _name, "tvsweep", "torchvision", _tv(_name), input_shape=_shape or (3, 224, 224),
                  notes="torchvision sweep, random weights"))
for _name in ("fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"):
    register(Spec("tv_" + _name, "tvsweep", "torchvision", _tv_seg(_name), input_shape=(3, 224, 224),
                  notes="torchvision segmentation, 21 classes, random weights"))


register(Spec("unet", "fast", "zoo.py", lambda: UNet(),
              input_shape=(3, 64, 64),
              notes="3 down / 3 up levels, concat skips, ConvTranspose and "
                    "nearest Resize"))
register(Spec("gpt", "fast", "zoo.py", lambda: GPT(), input_shape=(32,),
              input_kind="tokens", vocab=512,
              notes="4 pre-LN causal attention blocks, d_model 128, "
                    "4 heads, vocab 512, seq 32"))


# Hugging Face transformers (random weights from a config; nothing is
# downloaded): inputs input_ids and attention_mask [batch, seq], both axes
# dynamic; 4 samples, one padded at the end and one at the start, compiled
# by run_zoo.py with -b 2 --dim seq=SEQ.
class HFWrap(nn.Module):
    """(input_ids, attention_mask) -> the model's first output."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      return_dict=False)[0]


def _hf(cls_name, cfg_name, **cfg):
    def build():
        import transformers
        config = getattr(transformers, cfg_name)(**cfg)
        config.use_cache = False
        return HFWrap(getattr(transformers, cls_name)(config))
    return build


_TINY_DEC = dict(vocab_size=2048, hidden_size=256, intermediate_size=688,
                 num_hidden_layers=4, num_attention_heads=8,
                 max_position_embeddings=512)
# BART-large's default config (BartConfig()), and for CI a small one: 2+2
# layers, d_model 512 (8 heads, feed-forward 2048), BART's vocabulary of
# 50265 (its logits and embeddings stay as large as the real model's). Its
# export is 270 MB: at d_model 1024 it was 630 MB, and every plan a copy, too
# much of CI's disk for what the larger width adds (the slow `bart` has it)
_BART_SMALL = dict(encoder_layers=2, decoder_layers=2, d_model=512,
                   encoder_attention_heads=8, decoder_attention_heads=8,
                   encoder_ffn_dim=2048, decoder_ffn_dim=2048)
for _name, _tag, _cls, _cfg, _kw, _seq, _out, _notes in [
        ("llama", "fast", "LlamaForCausalLM", "LlamaConfig",
         dict(_TINY_DEC, num_key_value_heads=4), 32, "logits",
         "Llama-style decoder: RMSNorm, rotary embedding (Cos/Sin), GQA "
         "(8 query / 4 key-value heads), SwiGLU; 4 layers, hidden 256"),
        ("mistral", "fast", "MistralForCausalLM", "MistralConfig",
         dict(_TINY_DEC, num_key_value_heads=2, sliding_window=16), 32,
         "logits", "Mistral-style decoder: as llama, 2 key-value heads, "
                   "sliding-window causal mask (16 of 32 positions)"),
        ("gptj", "fast", "GPTJForCausalLM", "GPTJConfig",
         dict(vocab_size=2048, n_embd=256, n_layer=4, n_head=8,
              rotary_dim=16, n_positions=512), 32, "logits",
         "GPT-J-style decoder: parallel attention + MLP, partial "
         "interleaved rotary (its export: Loop, SplitToSequence, "
         "ConcatFromSequence); 4 layers, hidden 256"),
        ("distilbert", "fast", "DistilBertModel", "DistilBertConfig", {}, 128,
         "last_hidden_state", "DistilBERT, default config (6 layers, "
                              "hidden 768), bool attention mask"),
        ("bart_small", "fast", "BartForConditionalGeneration", "BartConfig",
         _BART_SMALL, 32, "logits",
         "BART encoder-decoder, BART's vocabulary (50265), 2+2 layers, "
         "d_model 512; decoder inputs shifted from input_ids"),
        ("bart", "slow", "BartForConditionalGeneration", "BartConfig", {},
         32, "logits", "BART, default config (12+12 layers, d_model 1024: "
                       "BART-large's shape, 406M params, external data)")]:
    register(Spec(_name, _tag, "transformers", _hf(_cls, _cfg, **_kw),
                  input_shape=(_seq,), input_kind="hf", vocab=2048,
                  notes=_notes, output=_out, samples=4))

# timm giants (only when timm is importable). Each entry: zoo name, timm
# names to try in order (names differ between timm versions).
TIMM_GIANTS = [
    ("swinv2_large_window12to16_192to256",
     ["swinv2_large_window12to16_192to256",
      "swinv2_large_window12to16_192to256_22kft1k"]),
    ("convnext_xlarge", ["convnext_xlarge", "convnext_xlarge_in22ft1k"]),
    ("tf_efficientnet_l2", ["tf_efficientnet_l2", "tf_efficientnet_l2_ns"]),
    ("eva_giant_patch14_336", ["eva_giant_patch14_336",
                               "eva_giant_patch14_clip_224",
                               "eva_giant_patch14_224"]),
]


def _timm_resolve(candidates):
    import timm
    avail = set(timm.list_models())
    for c in candidates:
        if c in avail:
            return c
    raise RuntimeError(f"timm {timm.__version__} has none of {candidates}")


def _timm_input_shape(model):
    cfg = getattr(model, "pretrained_cfg", None) or \
        getattr(model, "default_cfg", None) or {}
    return tuple(cfg.get("input_size", (3, 224, 224)))


def _timm_build(candidates):
    def build():
        import timm
        name = _timm_resolve(candidates)
        return timm.create_model(name, pretrained=False, num_classes=10,
                                 exportable=True)
    return build


# The timm sweep (tag "sweep", not run by CI): the smallest model of nearly
# every architecture family timm 0.9.2 has, at its native input size, to
# find the ops and patterns the CI zoo does not hold (attention variants,
# relative positions, LSTMs, Fold, SAME padding, odd normalizations).
# `run_zoo.py WORK --tag sweep` checks them; docs/design-notes.md has the
# results.
TIMM_SWEEP = """
    volo_d1_224 sequencer2d_s levit_128s eva02_tiny_patch14_224 mvitv2_tiny
    botnet26t_256 halonet26t lambda_resnet26t haloregnetz_b coatnet_nano_rw_224
    maxvit_nano_rw_256 maxxvit_rmlp_nano_rw_256 coat_lite_tiny crossvit_tiny_240
    convit_tiny cait_xxs24_224 tnt_s_patch16_224 xcit_nano_12_p16_224
    efficientformer_l1 efficientformerv2_s0 edgenext_xx_small mobilevit_xxs
    mobilevitv2_050 focalnet_tiny_srf gcvit_xxtiny davit_tiny nest_tiny
    pit_ti_224 pvt_v2_b0 twins_svt_small twins_pcpvt_small visformer_tiny
    swinv2_cr_tiny_224 swinv2_tiny_window8_256 vit_relpos_small_patch16_224
    beit_base_patch16_224 deit3_small_patch16_224
    deit_tiny_distilled_patch16_224 flexivit_small vit_tiny_r_s16_p8_224
    mixer_s32_224 gmlp_ti16_224 resmlp_12_224 poolformer_s12 caformer_s18
    convnext_atto convnextv2_atto convmixer_768_32 tresnet_m
    tf_efficientnet_b0 tf_mixnet_s efficientnet_b0_gn efficientnetv2_rw_t
    gc_efficientnetv2_rw_t tinynet_e fbnetv3_b mobilenetv3_small_050
    tf_mobilenetv3_small_minimal_100 ghostnet_050 rexnet_100 eca_nfnet_l0
    nf_regnet_b0 resnetv2_50d_gn resnetv2_50x1_bit gernet_s repvgg_a2
    regnetz_b16 gcresnext26ts eca_resnext26ts bat_resnext26ts regnetx_002
    regnety_002 res2net50_14w_8s resnest14d skresnet18 seresnext26d_32x4d
    ecaresnet26t resnet18d legacy_seresnet18 dpn48b ese_vovnet19b_dw dla34
    dla46x_c hrnet_w18_small cspresnet50 cspdarknet53 cs3darknet_focus_s
    densenetblur121d inception_v3 inception_v4 legacy_xception
""".split()

if importlib.util.find_spec("timm") is not None:
    for _name, _cands in TIMM_GIANTS:
        register(Spec(_name, "slow", "timm", _timm_build(_cands),
                      input_shape=None,   # native size, from pretrained_cfg
                      notes="timm, num_classes=10, random weights"))
    for _name in TIMM_SWEEP:
        register(Spec(_name, "sweep", "timm", _timm_build([_name]),
                      input_shape=None,
                      notes="timm sweep, num_classes=10, random weights"))


# ---------------------------------------------------------------------------
# weights

def make_nontrivial(model, seed):
    """Randomize what default init leaves trivial. Returns counts."""
    g = torch.Generator().manual_seed(seed + 2)
    counts = collections.Counter()
    norm_params = set()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                # Ranges from export_torchvision.py: a random resnet50 gives
                # outputs of order 1..10.
                c = m.num_features
                if m.running_mean is not None:
                    m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(c, generator=g) * 0.7 + 0.5)
                    norm_params.add(id(m.weight))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(c, generator=g) * 0.1)
                    norm_params.add(id(m.bias))
                counts["batchnorm"] += 1
            elif isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                w, b = getattr(m, "weight", None), getattr(m, "bias", None)
                if w is not None:
                    w.copy_(torch.rand(w.shape, generator=g) * 0.4 + 0.8)
                    norm_params.add(id(w))
                if b is not None:
                    b.copy_(torch.randn(b.shape, generator=g) * 0.05)
                    norm_params.add(id(b))
                counts["layernorm"] += 1
        for m in model.modules():
            for pname, p in m.named_parameters(recurse=False):
                if (id(p) in norm_params or p.numel() < 2
                        or not p.is_floating_point()):
                    continue
                if p.max().item() != p.min().item():
                    continue
                c = p.flatten()[0].item()
                if c == 0.0:
                    if pname == "weight" and p.dim() >= 2:
                        bound = 1.0 / math.sqrt(p[0].numel())
                        p.copy_((torch.rand(p.shape, generator=g) * 2 - 1)
                                * bound)
                        counts["zero_weight"] += 1
                    else:
                        p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                        counts["zero_tensor"] += 1
                elif abs(c) < 1e-3:       # layer scale (1e-6, 1e-5)
                    p.copy_(torch.rand(p.shape, generator=g) * 0.2 + 0.1)
                    counts["layer_scale"] += 1
                norm_params.add(id(p))
    return dict(counts)


# ---------------------------------------------------------------------------
# export

def _export(model, args, path, opsets, in_names, out_names, dyn):
    errors = {}
    for opset in opsets:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kw = {}
                # torch 2.9+ exports through dynamo by default; the zoo's
                # graphs (and their expected outputs) come from the
                # TorchScript exporter, which torch 1.13 has alone
                if "dynamo" in inspect.signature(torch.onnx.export).parameters:
                    kw["dynamo"] = False
                torch.onnx.export(
                    model, args, path, opset_version=opset,
                    input_names=in_names, output_names=out_names,
                    dynamic_axes=dyn, do_constant_folding=True,
                    training=torch.onnx.TrainingMode.EVAL, **kw)
            return opset, errors
        except Exception as e:            # noqa: BLE001 - report and retry
            msg = f"{type(e).__name__}: {e}".strip()
            errors[str(opset)] = msg[:2000]
            print(f"  opset {opset} failed: {msg[:300]}", file=sys.stderr)
    raise RuntimeError("torch.onnx.export failed at every opset "
                       + json.dumps(errors))


def _hf_inputs(spec, batch, gen):
    """input_ids and attention_mask [batch, seq]: sample 1 padded over its
    last quarter, sample 3 over its first two positions."""
    seq = spec.input_shape[0]
    ids = torch.randint(0, spec.vocab, (batch, seq), generator=gen,
                        dtype=torch.int64)
    mask = torch.ones((batch, seq), dtype=torch.int64)
    if batch > 1:
        mask[1, seq - seq // 4:] = 0
    if batch > 3:
        mask[3, :2] = 0
    return collections.OrderedDict(input_ids=ids, attention_mask=mask)


def export_model(name, outdir, batch=2, seed=0, opset=None,
                 no_expected=False, ort_mem_limit_gb=20.0, threads=2,
                 no_torch=False, input_size=None):
    spec = REGISTRY[name]
    meta = collections.OrderedDict(name=name, tag=spec.tag,
                                   source=spec.source, notes=spec.notes)
    meta["versions"] = {"torch": torch.__version__}
    secs = collections.OrderedDict()
    meta["seconds"] = secs
    t_all = time.time()

    def progress(msg):
        print(f"[zoo] {name}: {msg} ({time.time() - t_all:.0f}s)",
              file=sys.stderr, flush=True)

    def save_meta():
        secs["total"] = round(time.time() - t_all, 2)
        with open(os.path.join(outdir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")

    os.makedirs(outdir, exist_ok=True)
    for sub in ("data", "expected", "torch"):
        shutil.rmtree(os.path.join(outdir, sub), ignore_errors=True)
    for f in ("model.onnx", "model.onnx.data", "meta.json"):
        if os.path.exists(os.path.join(outdir, f)):
            os.remove(os.path.join(outdir, f))
    try:
        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        np.random.seed(seed)

        t = time.time()
        progress("building")
        model = spec.build()
        if spec.source == "timm":
            import timm
            meta["versions"]["timm"] = timm.__version__
            cfg = getattr(model, "pretrained_cfg", None) or {}
            meta["timm_name"] = cfg.get("architecture")
            meta["timm_tag"] = cfg.get("tag")
            in_shape = _timm_input_shape(model)
        else:
            in_shape = spec.input_shape
        if input_size:
            in_shape = tuple(input_size)
        if spec.source == "torchvision":
            import torchvision
            meta["versions"]["torchvision"] = torchvision.__version__
        meta["reinitialized"] = make_nontrivial(model, seed)
        model.eval()
        nparams = sum(p.numel() for p in model.parameters())
        meta["params"] = nparams
        weight_bytes = sum(p.numel() * p.element_size()
                           for p in model.parameters()) + \
            sum(b.numel() * b.element_size() for b in model.buffers())
        meta["weight_bytes"] = weight_bytes
        secs["build"] = round(time.time() - t, 2)
        progress(f"built, {nparams} params")

        gen = torch.Generator().manual_seed(seed + 1)
        out_name = spec.output
        if spec.input_kind == "hf":
            batch = spec.samples or batch
            feeds = _hf_inputs(spec, batch, gen)
            dyn = {k: {0: "batch", 1: "seq"} for k in feeds}
            dyn[out_name] = {0: "batch", 1: "seq"}
            meta["kind"] = "transformer"
            meta["compile_args"] = ["-b", "2", "--dim",
                                    f"seq={spec.input_shape[0]}"]
            import transformers
            meta["versions"]["transformers"] = transformers.__version__
        else:
            if spec.input_kind == "tokens":
                x = torch.randint(0, spec.vocab, (batch,) + tuple(in_shape),
                                  generator=gen, dtype=torch.int64)
            else:
                x = torch.randn((batch,) + tuple(in_shape), generator=gen)
            feeds = collections.OrderedDict(input=x)
            dyn = {"input": {0: "batch"}, out_name: {0: "batch"}}
        x = next(iter(feeds.values()))
        meta["input_shape"] = list(x.shape)
        meta["input_dtype"] = str(x.numpy().dtype)

        os.makedirs(os.path.join(outdir, "data"), exist_ok=True)
        for k, v in feeds.items():
            np.save(os.path.join(outdir, "data", k + ".npy"), v.numpy())
        y_torch = None
        if no_torch:
            meta["torch_forward"] = "skipped (--no-torch)"
        else:
            progress(f"PyTorch forward on {list(x.shape)}")
            t = time.time()
            with torch.no_grad():
                y = model(*feeds.values())
            if isinstance(y, (tuple, list)):
                y = y[0]
            if isinstance(y, dict):
                y = next(iter(y.values()))
            y_torch = y.float().numpy()
            del y
            secs["torch_forward"] = round(time.time() - t, 2)
            meta["output_shape"] = list(y_torch.shape)
            meta["torch_output_stats"] = _stats(y_torch)
            os.makedirs(os.path.join(outdir, "torch"), exist_ok=True)
            np.save(os.path.join(outdir, "torch", out_name + ".npy"), y_torch)

        # export into a scratch dir: models over 2 GB make torch write one
        # external file per initializer; we re-save as model.onnx(.data)
        tmp = os.path.join(outdir, ".export_tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        model_path = os.path.join(outdir, "model.onnx")
        progress("torch.onnx.export")
        t = time.time()
        opsets = [opset] if opset else OPSETS
        # No autograd while tracing: otherwise the trace keeps every
        # activation alive (tf_efficientnet_l2 went past 17 GB). Except with
        # nn.MultiheadAttention: under no_grad torch 1.13 takes its fast path
        # (aten::_native_multi_head_attention), which has no ONNX export.
        mha = any(isinstance(m, (nn.MultiheadAttention,
                                 nn.TransformerEncoderLayer))
                  for m in model.modules())
        if not mha:
            for p in model.parameters():
                p.requires_grad_(False)
        with torch.set_grad_enabled(mha):
            used, errs = _export(model, tuple(feeds.values()),
                                 os.path.join(tmp, "model.onnx"), opsets,
                                 list(feeds), [out_name], dyn)
        secs["export"] = round(time.time() - t, 2)
        meta["opset"] = used
        if errs:
            meta["opset_errors"] = errs
        del model
        gc.collect()

        import onnx
        meta["versions"]["onnx"] = onnx.__version__
        t = time.time()
        tmp_files = os.listdir(tmp)
        if weight_bytes > EXTERNAL_DATA_BYTES or len(tmp_files) > 1:
            progress("re-saving with external data")
            m = onnx.load(os.path.join(tmp, "model.onnx"),
                          load_external_data=True)
            shutil.rmtree(tmp)   # free the disk before writing again
            onnx.save_model(m, model_path, save_as_external_data=True,
                            all_tensors_to_one_file=True,
                            location="model.onnx.data", size_threshold=1024)
            del m
            gc.collect()
            os.chmod(model_path + ".data", 0o644)   # onnx writes it 0600
            meta["external_data"] = "model.onnx.data"
        else:
            os.replace(os.path.join(tmp, "model.onnx"), model_path)
            shutil.rmtree(tmp)
            meta["external_data"] = None
        secs["save"] = round(time.time() - t, 2)
        meta["onnx_bytes"] = os.path.getsize(model_path) + (
            os.path.getsize(model_path + ".data")
            if meta["external_data"] else 0)

        mp = onnx.load(model_path, load_external_data=False)
        counts = collections.Counter(n.op_type for n in mp.graph.node)
        meta["onnx_nodes"] = sum(counts.values())
        meta["onnx_ops"] = dict(sorted(counts.items()))
        meta["onnx_initializers"] = len(mp.graph.initializer)
        meta["io"] = {
            "inputs": [_vi(v) for v in mp.graph.input],
            "outputs": [_vi(v) for v in mp.graph.output]}
        del mp

        meta["torch_vs_ort_max_abs_err"] = None
        est_gb = 3.0 * weight_bytes / 1024 ** 3
        if no_expected:
            meta["expected"] = "skipped (--no-expected)"
        elif est_gb > ort_mem_limit_gb:
            meta["expected"] = (f"skipped: onnxruntime estimated at "
                                f"{est_gb:.1f} GB > {ort_mem_limit_gb} GB")
        else:
            import onnxruntime as ort
            meta["versions"]["onnxruntime"] = ort.__version__
            progress("onnxruntime")
            t = time.time()
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(model_path, so,
                                        providers=["CPUExecutionProvider"])
            xin = {k: v.numpy() for k, v in feeds.items()}
            y_ort = sess.run([out_name], xin)[0]
            secs["ort"] = round(time.time() - t, 2)
            os.makedirs(os.path.join(outdir, "expected"), exist_ok=True)
            np.save(os.path.join(outdir, "expected", out_name + ".npy"),
                    y_ort)
            meta["expected"] = "onnxruntime"
            meta["output_shape"] = list(y_ort.shape)
            meta["output_stats"] = _stats(y_ort)
            if y_torch is not None:
                err = float(np.max(np.abs(y_ort.astype(np.float64)
                                          - y_torch.astype(np.float64))))
                meta["torch_vs_ort_max_abs_err"] = err
                meta["torch_vs_ort_rel_err"] = err / max(
                    float(np.max(np.abs(y_torch))), 1e-30)
            # run again at another batch size (1, or 2 when batch is 1):
            # the batch axis must really be dynamic, pprt runs micro-batches
            b2 = 1 if batch > 1 else 2
            x2 = {k: v[:1] if batch > 1 else np.concatenate([v, v])
                  for k, v in xin.items()}
            rb = {"batch": b2}
            try:
                y2 = sess.run([out_name], x2)[0]
                ref = y_ort[:1] if batch > 1 else np.concatenate(
                    [y_ort, y_ort])
                rb["max_abs_err"] = float(np.max(np.abs(
                    y2.astype(np.float64) - ref.astype(np.float64))))
            except Exception as e:        # noqa: BLE001
                rb["max_abs_err"] = None
                rb["error"] = f"{type(e).__name__}: {e}"[:2000]
            meta["rebatch_check"] = rb
            del sess
        progress("done")
        save_meta()
        return meta
    except Exception as e:                # noqa: BLE001 - recorded in meta
        meta["error"] = f"{type(e).__name__}: {e}"[:4000]
        meta["traceback"] = traceback.format_exc()[-4000:]
        shutil.rmtree(os.path.join(outdir, ".export_tmp"), ignore_errors=True)
        save_meta()
        return meta


def _stats(a):
    a = a.astype(np.float64)
    return {"mean": float(a.mean()), "std": float(a.std()),
            "max_abs": float(np.abs(a).max()),
            "finite": bool(np.isfinite(a).all())}


def _vi(v):
    dims = [d.dim_param if d.dim_param else d.dim_value
            for d in v.type.tensor_type.shape.dim]
    import onnx
    return {"name": v.name,
            "dtype": onnx.TensorProto.DataType.Name(
                v.type.tensor_type.elem_type),
            "shape": dims}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="registered models and their tags")
    ex = sub.add_parser("export", help="export one model")
    ex.add_argument("name")
    ex.add_argument("outdir")
    ex.add_argument("--batch", type=int, default=2)
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--opset", type=int, default=None,
                    help="only this opset (default: lowest of 13..17 that "
                         "exports)")
    ex.add_argument("--no-expected", action="store_true",
                    help="skip onnxruntime (no expected/ outputs)")
    ex.add_argument("--no-torch", action="store_true",
                    help="skip the PyTorch forward (no torch/ output, no "
                         "torch_vs_ort check): halves the time of giants")
    ex.add_argument("--ort-mem-limit-gb", type=float, default=20.0,
                    help="skip onnxruntime when 3x the weights exceed this")
    ex.add_argument("--threads", type=int,
                    default=int(os.environ.get("ZOO_THREADS", "2")))
    ex.add_argument("--input-size", default=None,
                    help="C,H,W of an image model's input instead of its "
                         "own (timm: its pretrained_cfg's)")
    args = ap.parse_args()

    if args.cmd == "list":
        for name, spec in REGISTRY.items():
            print(f"{name}\t{spec.tag}")
        return 0
    if args.name not in REGISTRY:
        print(f"error: unknown model '{args.name}' (zoo.py list)",
              file=sys.stderr)
        return 2
    meta = export_model(args.name, args.outdir, batch=args.batch,
                        seed=args.seed, opset=args.opset,
                        no_expected=args.no_expected,
                        ort_mem_limit_gb=args.ort_mem_limit_gb,
                        threads=args.threads, no_torch=args.no_torch,
                        input_size=[int(v) for v in args.input_size.split(",")]
                        if args.input_size else None)
    if "error" in meta:
        print(f"{args.name}: FAILED: {meta['error'][:1000]}", file=sys.stderr)
        return 1
    ops = " ".join(f"{k}:{v}" for k, v in meta["onnx_ops"].items())
    print(f"{args.name}: opset {meta['opset']}, {meta['params']} params, "
          f"{meta['onnx_bytes']} bytes, input {meta['input_shape']} -> "
          f"output {meta.get('output_shape')}, torch-vs-ort max abs err "
          f"{meta['torch_vs_ort_max_abs_err']}, "
          f"{meta['seconds']['total']}s")
    print(f"  ops: {ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
