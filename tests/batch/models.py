#!/usr/bin/env python3
"""The batch check on real models whose samples stay apart in ways the
analysis has to see through (issue 53), and one that truly mixes them:

  - DeBERTa-v3 (transformers' DebertaV2 with microsoft/deberta-v3-small's
    attention: relative positions in 256 buckets, shared key projections,
    c2p and p2c): its relative-position projections are tiled over a
    merged batch x heads axis, `.repeat(batch, 1, 1)` against queries
    [batch*heads, seq, dim]. Hidden 768 and 4 layers, so that at the
    analysis' batch of 7 the projections are over ppcc's folding budget and
    stay ops of the graph (copies the analysis follows from the Tile on);
  - XLNet (xlnet-base-cased's layout: sequence first, the batch on axis 1,
    relative attention through Einsums and the reshape-slice-reshape
    relative shift; hidden 768, 2 layers, sequence 64, for the same reason:
    the positional Einsum over the expanded position table stays an op);
  - CLIP's text encoder (openai/clip-vit-base-patch32's text config, eos
    token 2: the pooler gathers last_hidden_state[arange(batch),
    input_ids.argmax(-1)], an arange over the batch used as an index into
    the batch axis; hidden 64, 2 layers).

Each is built from its config with random weights (nothing is downloaded),
exported by torch with a dynamic batch and sequence, compiled without
--allow-batch-mixing at -b 2, -pp 1 and 2, and run by pprt on 5 samples
(three micro-batches, the last padded; one sample's attention mask padded
at the end, one at the start) against onnxruntime on all 5 at once: every
output within atol 1e-4 + rtol 1e-4 (measured: 1.5e-6 at most).

  - GC ViT (timm 0.9.2's gcvit_xxtiny), which truly mixes samples
    (`q_global.repeat(B // B_, 1, 1, 1)` pairs window j with sample j mod B),
    stays refused, naming the Tile.

Usage: models.py WORKDIR (env: PPCC, PPRT). About 45 s on 2 idle cores, exports
included."""
import os
import subprocess
import sys
import time
import warnings

import numpy as np

try:
    import onnxruntime as ort
    import torch
    import transformers
except ImportError as e:  # the venv lacks them: not a failure of ppcc
    print(f"batch models: skipped ({e})", file=sys.stderr)
    sys.exit(77)

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
os.chdir(work)
warnings.simplefilter("ignore")
torch.set_num_threads(2)
RTOL = ATOL = 1e-4
SAMPLES = 5
failures = []
count = 0


class Wrap(torch.nn.Module):
    """(input_ids, attention_mask) -> the outputs listed."""

    def __init__(self, m, outs):
        super().__init__()
        self.m, self.outs = m, outs

    def forward(self, input_ids, attention_mask):
        o = self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)
        return tuple(o[i] for i in self.outs)


def nontrivial(model, seed):
    """Default init leaves biases 0 and norms' scales 1: randomize them a little."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            flat = p.flatten()
            if flat.numel() > 1 and bool((flat == flat[0]).all()):
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


def hf_model(name):
    if name == "deberta_v3":
        cfg = transformers.DebertaV2Config(
            vocab_size=1000, hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
            intermediate_size=256, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
            relative_attention=True, position_buckets=256, max_relative_positions=-1,
            norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"],
            position_biased_input=False, layer_norm_eps=1e-7, pad_token_id=0)
        return transformers.DebertaV2Model(cfg), ["last_hidden_state"], 16
    if name == "xlnet":
        cfg = transformers.XLNetConfig(vocab_size=1000, d_model=768, n_layer=2, n_head=12, d_inner=256,
                                       ff_activation="gelu", attn_type="bi", use_mems_eval=False)
        return transformers.XLNetModel(cfg), ["last_hidden_state"], 64
    cfg = transformers.CLIPTextConfig(vocab_size=1000, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      max_position_embeddings=77, hidden_act="quick_gelu",
                                      pad_token_id=1, bos_token_id=0, eos_token_id=2)
    return transformers.CLIPTextModel(cfg), ["last_hidden_state", "pooler_output"], 16


def export_hf(name):
    torch.manual_seed(0)
    m, outs, seq = hf_model(name)
    nontrivial(m, 1)
    model = Wrap(m.eval(), list(range(len(outs)))).eval()
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(3, 1000, (2, seq), generator=gen)
    mask = torch.ones(2, seq, dtype=torch.int64)
    path = name + ".onnx"
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    dyn.update({o: {0: "batch"} for o in outs})
    torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                      output_names=outs, dynamic_axes=dyn, opset_version=14, do_constant_folding=True)
    # the data: 5 samples, sample 1 padded over its last quarter, sample 3 over its first two positions
    ids = torch.randint(3, 1000, (SAMPLES, seq), generator=gen).numpy()
    mask = np.ones((SAMPLES, seq), np.int64)
    mask[1, seq - seq // 4:] = 0
    mask[3, :2] = 0
    return path, seq, {"input_ids": ids, "attention_mask": mask}


def check_hf(name):
    global count
    t0 = time.time()
    path, seq, feeds = export_hf(name)
    d = name + "_data"
    os.makedirs(d, exist_ok=True)
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    worst = 0.0
    for pp in ("1", "2"):
        count += 1
        plan = f"{name}_pp{pp}.plan"
        r = subprocess.run([PPCC, path, "-b", "2", "--dim", f"seq={seq}", "-pp", pp, "-q", "-o", plan],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name} -pp {pp}: refused: {r.stderr.strip()[:600]}")
            continue
        out = f"{name}_out{pp}"
        r = subprocess.run([PPRT, plan, d, "-q", "-o", out], capture_output=True, text=True)
        os.remove(plan)
        if r.returncode != 0:
            failures.append(f"{name} -pp {pp}: pprt exit {r.returncode}: {r.stderr.strip()[:300]}")
            continue
        for k, v in want.items():
            got = np.load(os.path.join(out, k + ".npy"))
            if got.shape != v.shape or not np.allclose(got, v, rtol=RTOL, atol=ATOL):
                failures.append(f"{name} -pp {pp}: output {k} differs from onnxruntime on {SAMPLES} samples "
                                f"(shape {got.shape} vs {v.shape}, max error "
                                f"{np.abs(got - v).max() if got.shape == v.shape else 'n/a'})")
            else:
                worst = max(worst, float(np.abs(got - v).max()))
    print(f"batch models: {name}: -pp 1 and 2, {SAMPLES} samples in micro-batches of 2, max error "
          f"{worst:.2g} ({time.time() - t0:.0f} s)", file=sys.stderr)


for name in ("deberta_v3", "xlnet", "clip_text"):
    check_hf(name)

# GC ViT mixes samples: refused at its Tile of the global queries
try:
    import timm
except ImportError:
    timm = None
    print("batch models: timm not importable, GC ViT skipped", file=sys.stderr)
if timm is not None:
    count += 1
    t0 = time.time()
    torch.manual_seed(0)
    m = timm.create_model("gcvit_xxtiny", pretrained=False, num_classes=10, exportable=True).eval()
    torch.onnx.export(m, torch.randn(2, 3, 224, 224), "gcvit.onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=14,
                      do_constant_folding=True)
    for b in ("1", "2"):
        r = subprocess.run([PPCC, "gcvit.onnx", "-b", b, "-q", "-o", "gcvit.plan"], capture_output=True, text=True)
        words = ["Tile) mixes samples", "it repeats the batch axis", "--allow-batch-mixing"]
        missing = [w for w in words if w not in r.stderr]
        if r.returncode != 2 or missing:
            failures.append(f"gcvit_xxtiny -b {b}: exit {r.returncode} (want 2), missing {missing}: "
                            f"{r.stderr.strip()[:500]!r}")
    print(f"batch models: gcvit_xxtiny refused ({time.time() - t0:.0f} s)", file=sys.stderr)

for f in failures:
    print("FAIL:", f)
print(f"batch models: {count - len(failures)} of {count} cases pass")
sys.exit(1 if failures else 0)
