"""What the training tests share: the file a plan output lands in, and a
weight's gradient read back from pprt's outputs with its presence and shape
checked."""
import os

import numpy as np

from testlib import check


def file_name(name):
    """The file name pprt gives a tensor name (ir/base.c pp_file_name): any
    character outside [A-Za-z0-9._-] becomes '_'."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def read_grad(out_dir, weight, shape, what):
    """pprt's gradient of `weight` in out_dir, or None (a failed check says
    why) when it is missing or not of `shape`."""
    f = os.path.join(out_dir, file_name(weight + ".grad") + ".npy")
    check(os.path.exists(f), f"{what}: no gradient of '{weight}' among {sorted(os.listdir(out_dir))}")
    if not os.path.exists(f):
        return None
    g = np.load(f)
    check(g.shape == tuple(shape), f"{what}: '{weight}' gradient shape {g.shape}, want {tuple(shape)}")
    return g if g.shape == tuple(shape) else None
