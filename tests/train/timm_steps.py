#!/usr/bin/env python3
"""One training step of small versions of the four timm models the notes
name, ppcc --train against PyTorch autograd: each built with the timm class
(and flags) of the giant, at a tiny depth and width:
  swinv2_large_window12to16_192to256: SwinTransformerV2 (cosine attention:
    F.normalize = ReduceL2, the logit scale's Clip, the continuous position
    bias MLP), 2 stages of 1 block, window 4, embed 16;
  convnext_xlarge: ConvNeXt, 4 stages of 1 block, dims 8..32 (LayerNorm2d,
    7x7 depthwise Conv, layer scale);
  tf_efficientnet_l2: tf_efficientnet_b0 (the same EfficientNet class and
    'same' padding, BatchNorm in training mode; 4 images of 64x64, since
    BatchNorm over 2 x 1 x 1 values is too ill-conditioned to compare) with the L2's training
    dropout 0.5 before the classifier (pp.Dropout's seeded mask, given to
    PyTorch as the mask it is: tests/train/trainlib.py);
  eva_giant_patch14_336: Eva, patch 14, depth 2, embed 32, the giant's MLP
    ratio 6144/1408.
Random weights (drop_path 0), exported as for training (TrainingMode.TRAINING,
no constant folding, opset 14). The loss and every weight's gradient at -pp 1
and 2 on the reference kernels and on cuda-emu (the CUDA step list, whose two
splits must give the same bits): the loss within rtol 1e-4; a gradient g
against autograd's w elementwise within
    |g - w| <= 1e-3 |w| + 3e-4 max(max|w|, 1e-3 M)
with M the largest gradient of the model (float sums in another order on
each side; a BatchNorm bias whose gradient is a sum that cancels to almost
0, as in EfficientNet's first block, shows that order: 1.3e-4 of its
largest on a Zen 4 VM, 4 images of 64x64; SwinV2, ConvNeXt and EVA stay
within 1.3e-7). The worst error seen is printed. Skipped without timm.
About 20 s.
Usage: timm_steps.py PPCC PPRT WORK"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import testlib  # noqa: E402
from testlib import check  # noqa: E402
from trainlib import check_same_outputs, check_step, mask, step_run  # noqa: E402

PPCC, PPRT, WORK = sys.argv[1:4]
testlib.start(WORK, "train_timm")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    import timm  # noqa: F401
    from timm.models.convnext import ConvNeXt
    from timm.models.eva import Eva
    from timm.models.swin_transformer_v2 import SwinTransformerV2
except Exception as e:  # noqa: BLE001
    print(f"skipped: timm does not import ({type(e).__name__})")
    sys.exit(77)

RTOL, ATOL_OF_MAX = 1e-3, 3e-4
SEED, COUNTER = 5, 3


def one_step(name, mod, x, labels, drop_before=None):
    """cross-entropy of mod(x) against labels; drop_before: the module whose input a training Dropout of the
    export drops (the oracle multiplies it by pp.Dropout's mask instead)"""
    t0 = time.time()
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    mod.train()
    torch.onnx.export(mod, (x,), path, input_names=["x"], output_names=["out"], opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    np.save(os.path.join(d, "data", "x.npy"), x.numpy())
    np.save(os.path.join(d, "data", "labels.npy"), labels.numpy())
    hook = None
    drops = [(n.name, n) for n in onnx.load(path).graph.node if n.op_type == "Dropout"]
    if drop_before is not None:
        np.save(os.path.join(d, "data", "dropout_seed.npy"), np.array([SEED, COUNTER], np.int64))
        from onnx import numpy_helper
        consts = {o: n for n in onnx.load(path).graph.node for o in n.output}
        live = [(nm, n) for nm, n in drops
                if float(numpy_helper.to_array(consts[n.input[1]].attribute[0].t)) > 0]
        check(len(live) == 1, f"{name}: {len(live)} Dropouts with a ratio, want 1")
        dname, dn = live[0]
        ratio = float(numpy_helper.to_array(consts[dn.input[1]].attribute[0].t))
        mod.drop_rate = 0.0  # the oracle: the mask below instead of torch's own draw

        def pre(m, inp):
            return (inp[0] * torch.tensor(mask(dname, ratio, SEED, COUNTER, tuple(inp[0].shape))),)
        hook = drop_before.register_forward_pre_hook(pre)
    mod.zero_grad()
    want_loss = F.cross_entropy(mod(x), labels)
    want_loss.backward()
    if hook:
        hook.remove()
    want = {n: p.grad.numpy() for n, p in mod.named_parameters() if p.grad is not None}
    check(len(want) == len(list(mod.parameters())), f"{name}: a weight without a torch gradient")
    err = 0.0
    # on the reference kernels and on cuda-emu (the CUDA step list), whose -pp 1 and 2 give the same bits
    for pp, be in ((1, "ref"), (2, "ref"), (1, "cuda-emu"), (2, "cuda-emu")):
        tag = f"{name} -pp {pp} on {be}"
        o = step_run(PPCC, PPRT, path, d, x.shape[0], pp, be, tag)
        if o is None:
            continue
        err = max(err, check_step(o, want_loss.item(), want, tag, RTOL, ATOL_OF_MAX))
    check_same_outputs(*(os.path.join(d, f"out_cuda-emu_pp{pp}") for pp in (1, 2)), f"{name}: cuda-emu at -pp 1, 2")
    print(f"{name}: {len(want)} weights, worst error beyond rtol {err:.2e} of the largest gradient, "
          f"{time.time() - t0:.1f} s", flush=True)


torch.manual_seed(0)
one_step("swinv2", SwinTransformerV2(img_size=32, patch_size=4, window_size=4, embed_dim=16, depths=(1, 1),
                                     num_heads=(2, 4), pretrained_window_sizes=(3, 3), drop_path_rate=0.0,
                                     num_classes=10),
         torch.randn(2, 3, 32, 32), torch.tensor([3, 8]))
one_step("convnext", ConvNeXt(depths=(1, 1, 1, 1), dims=(8, 16, 24, 32), num_classes=10),
         torch.randn(2, 3, 32, 32), torch.tensor([1, 4]))
eff = timm.create_model("tf_efficientnet_b0", pretrained=False, num_classes=10, drop_rate=0.5)
one_step("efficientnet", eff, torch.randn(4, 3, 64, 64), torch.tensor([9, 0, 3, 3]), drop_before=eff.classifier)
one_step("eva", Eva(img_size=28, patch_size=14, embed_dim=32, depth=2, num_heads=2, mlp_ratio=6144 / 1408,
                    num_classes=10), torch.randn(2, 3, 28, 28), torch.tensor([2, 6]))

testlib.finish("train_timm")
