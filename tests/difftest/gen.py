"""Random ONNX graphs for the differential tester (run.py).

A graph is grown from its inputs one op at a time, each op reading values
made earlier (the last one most often, any older one as a skip connection,
so values are read by several stages). Every op keeps the batch on dim 0 and
acts on the other axes, so the graph computes each sample on its own and may
be cut into micro-batches. The ops are the project's: elementwise math with
broadcasts, normalizations, Softmax, reductions, CumSum, TopK, convolutions
and pools (whose outputs oneDNN keeps in blocked layouts), MatMul / Gemm /
Einsum (batched, attention-like), the views (Reshape, Flatten, Squeeze,
Unsqueeze, Transpose, Expand), Concat, Split, Slice, Gather, Pad, Tile,
Trilu, Resize, and int64 / bool tensors (token ids, masks, casts) that live
long enough to cross cuts. Some values in the middle are graph outputs too.

Discrete results (comparisons, casts to integers, ArgMax) are taken only of
values every implementation computes bit for bit alike (graph inputs and
what views, Relu, Abs, Neg, Max, Min, Where and casts make of them): of a
computed float, a difference in the last bit could flip them, which would be
noise, not a bug. Magnitudes are kept small (a Tanh or a LayerNorm when a
value may have grown) so that rtol 1e-3 / atol 1e-4 hold.

Nodes are named /blkK/Op_i (K grows every few nodes) so that --split-at and
the params policy have modules to work with."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
# other element types that exact values take through casts (and views) across cuts
OTHER = (TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8, TensorProto.FLOAT16, TensorProto.DOUBLE)
EXACT_UNARY = ("Relu", "Abs", "Neg", "Identity")
# normalizations' epsilon: with the default 1e-5, a channel of nearly equal
# values (saturated sigmoids) scales f32 rounding up to 300 times, past any
# fair tolerance (both onnxruntime and pprt 1e-4 from the float64 answer)
EPS = 1e-2


class Val:
    def __init__(self, name, shape, dtype, exact, mag=3.0, arr=None):
        self.name, self.shape, self.dtype, self.exact, self.mag = name, tuple(shape), dtype, exact, mag
        self.arr = arr  # a constant's values (not a graph value)

    @property
    def rank(self):
        return len(self.shape)


class Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.opset = int(self.rng.choice([13, 17, 18, 20, 21]))
        self.nodes, self.inits, self.inputs, self.vals = [], [], [], []
        self.n = 0
        self.block = 0
        self.vocab = 0

    # ---- plumbing -----------------------------------------------------------------------------
    def name(self, op):
        self.n += 1
        if self.rng.random() < 0.25:
            self.block += 1
        return f"/blk{self.block}/{op}_{self.n}"

    def const(self, arr, dtype=None):
        arr = np.asarray(arr, dtype=dtype)
        nm = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(arr, nm))
        return nm

    def weight(self, *shape, scale=None):
        fan = shape[0] if len(shape) < 2 else int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan, 1))
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32))

    def ints(self, *v):
        return self.const(np.array(v, np.int64))

    def op(self, op, ins, shape, dtype=F, exact=False, mag=3.0, n_out=1, **attrs):
        outs = [f"v{self.n + 1}_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.name(op), **attrs))
        v = Val(outs[0], shape, dtype, exact, mag)
        self.vals.append(v)
        return v

    def add_input(self, shape, dtype):
        nm = f"in{len(self.inputs)}"
        self.inputs.append((nm, shape, dtype))
        v = Val(nm, ["N"] + list(shape[1:]), dtype, True, 3.0)
        self.vals.append(v)
        return v

    def pick(self, pred=lambda v: True, recent=0.6):
        c = [v for v in self.vals if pred(v) and v.shape[0] == "N"]
        if not c:
            return None
        if self.rng.random() < recent:
            return c[-1]
        return c[int(self.rng.integers(len(c)))]

    def floats(self, v):
        return v.dtype == F

    def tame(self, v):
        """A bounded version of v."""
        if v.mag <= 8:
            return v
        return self.op("Tanh", [v.name], v.shape, mag=1.0)

    def choose(self, xs):
        return xs[int(self.rng.integers(len(xs)))]

    # ---- the ops ------------------------------------------------------------------------------
    def unary(self):
        v = self.pick(self.floats)
        ops = ["Relu", "LeakyRelu", "Elu", "Sigmoid", "HardSigmoid", "Tanh", "Softplus", "Erf",
               "Abs", "Neg", "Identity", "Clip", "Exp", "Log", "Sqrt", "Reciprocal", "SiLU", "GeluErf",
               "Dropout", "Floor"]
        ops += ["HardSwish"] if self.opset >= 14 else []
        ops += ["Gelu"] if self.opset >= 20 else []
        o = self.choose(ops)
        if o in ("Exp",):
            t = self.op("Tanh", [v.name], v.shape, mag=1.0)
            return self.op("Exp", [t.name], v.shape, mag=3.0)
        if o in ("Log", "Sqrt", "Reciprocal"):
            a = self.op("Abs", [v.name], v.shape, exact=v.exact, mag=v.mag)
            p = self.op("Add", [a.name, self.const(np.float32(1.0))], v.shape, mag=v.mag + 1)
            return self.op(o, [p.name], v.shape, mag=max(1.0, np.sqrt(v.mag)))
        if o == "SiLU":
            s = self.op("Sigmoid", [v.name], v.shape, mag=1.0)
            return self.op("Mul", [v.name, s.name], v.shape, mag=v.mag)
        if o == "GeluErf":  # the decomposed GELU the fusion pass looks for
            d = self.op("Div", [v.name, self.const(np.float32(1.4142135))], v.shape, mag=v.mag)
            e = self.op("Erf", [d.name], v.shape, mag=1.0)
            a = self.op("Add", [e.name, self.const(np.float32(1.0))], v.shape, mag=2.0)
            m = self.op("Mul", [v.name, a.name], v.shape, mag=2 * v.mag)
            return self.op("Mul", [m.name, self.const(np.float32(0.5))], v.shape, mag=v.mag)
        if o == "Floor":  # discrete: exact values only
            if not v.exact:
                return self.op("Relu", [v.name], v.shape, exact=v.exact, mag=v.mag)
            return self.op("Floor", [v.name], v.shape, exact=True, mag=v.mag)
        if o == "Clip":
            return self.op("Clip", [v.name, self.const(np.float32(-1.5)), self.const(np.float32(2.0))], v.shape,
                           exact=v.exact, mag=2.0)
        if o == "LeakyRelu":
            return self.op(o, [v.name], v.shape, mag=v.mag, alpha=0.1)
        if o == "Dropout":
            return self.op(o, [v.name], v.shape, exact=v.exact, mag=v.mag)
        bounded = {"Sigmoid": 1, "HardSigmoid": 1, "Tanh": 1, "Erf": 1}
        return self.op(o, [v.name], v.shape, exact=v.exact and o in EXACT_UNARY, mag=bounded.get(o, v.mag + 1))

    def bcast_partner(self, v):
        """A float operand that broadcasts against v: another value of its
        shape, or a constant with some axes of size 1 (or fewer axes)."""
        same = [u for u in self.vals if u.dtype == F and u.shape == v.shape and u is not v]
        if same and self.rng.random() < 0.5:
            return self.choose(same)
        r = v.rank
        keep = int(self.rng.integers(1, r + 1)) if r > 1 else 1
        shape = [d if self.rng.random() < 0.7 else 1 for d in v.shape[r - keep:]]
        shape = [1 if d == "N" else d for d in shape]
        arr = self.rng.standard_normal(shape).astype(np.float32)
        return Val(self.const(arr), shape, F, True, 3.0, arr)

    def binary(self):
        v = self.tame(self.pick(self.floats))
        bv = self.tame(self.bcast_partner(v))
        b, bmag = bv.name, bv.mag
        o = self.choose(["Add", "Sub", "Mul", "Max", "Min", "Div", "PRelu", "Pow", "Where"])
        if o == "Div" and bv.arr is not None:
            return self.op("Div", [v.name, self.const(np.abs(bv.arr) + 1)], v.shape, mag=v.mag)
        if o == "Div":
            a = self.op("Abs", [b], bv.shape, mag=bmag)
            p = self.op("Add", [a.name, self.const(np.float32(1.0))], a.shape, mag=bmag + 1)
            return self.op("Div", [v.name, p.name], v.shape, mag=v.mag)
        if o == "PRelu":
            slope = self.weight(*([v.shape[1]] + [1] * (v.rank - 2)), scale=0.3) if v.rank >= 2 else self.weight(1)
            return self.op("PRelu", [v.name, slope], v.shape, mag=v.mag)
        if o == "Pow":
            s = self.op("Sigmoid", [v.name], v.shape, mag=1.0)
            return self.op("Pow", [s.name, self.const(np.float32(self.choose([2.0, 0.5, 3.0])))], v.shape, mag=1.0)
        if o == "Where":
            c = self.mask_for(v)
            return self.op("Where", [c, v.name, b], v.shape, mag=max(v.mag, bmag))
        exact = v.exact and o in ("Max", "Min") and bv.exact
        mag = v.mag * bmag if o == "Mul" else v.mag + bmag
        return self.op(o, [v.name, b], v.shape, exact=exact, mag=mag)

    def mask_for(self, v):
        """A bool tensor that broadcasts to v: an old mask when there is one
        (so it crosses cuts), else a comparison of an exact value."""
        old = [u for u in self.vals if u.dtype == BOOL and len(u.shape) <= v.rank and
               all(a in (1, b) or a == b for a, b in zip(u.shape[::-1], v.shape[::-1]))]
        if old and self.rng.random() < 0.7:
            return self.choose(old).name
        src = [u for u in self.vals if u.exact and u.dtype == F and u.shape == v.shape]
        if src:
            return self.compare(self.choose(src)).name
        return self.const(self.rng.random([1 if d == "N" else d for d in v.shape]) < 0.5)

    def compare(self, v=None):
        v = v or self.pick(lambda u: u.exact and u.dtype == F)
        if v is None:
            return None
        o = self.choose(["Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
        m = self.op(o, [v.name, self.const(np.float32(self.rng.uniform(-0.5, 0.5)))], v.shape, dtype=BOOL, exact=True)
        if self.rng.random() < 0.3:
            m = self.op("Not", [m.name], v.shape, dtype=BOOL, exact=True)
        return m

    def bool_logic(self):
        a = self.pick(lambda u: u.dtype == BOOL)
        if a is None:
            return self.compare()
        b = self.pick(lambda u: u.dtype == BOOL and u.shape == a.shape, recent=0.3)
        return self.op(self.choose(["And", "Or", "Xor"]), [a.name, b.name], a.shape, dtype=BOOL, exact=True)

    def ints_path(self):
        """int64 values: ids through arithmetic, exact floats cast to int64 and back."""
        v = self.pick(lambda u: u.dtype == I64)
        if v is not None and self.rng.random() < 0.5:
            if self.rng.random() < 0.5:
                return self.op("Cast", [v.name], v.shape, dtype=F, exact=True, mag=float(self.vocab or 8), to=F)
            o = self.choose(["Add", "Mul", "Sub"])
            k = self.ints(int(self.rng.integers(1, 3)))
            return self.op(o, [v.name, k], v.shape, dtype=I64, exact=True, mag=v.mag * 3)
        f = self.pick(lambda u: u.exact and u.dtype == F)
        if f is None:
            return None
        fl = self.op("Floor", [f.name], f.shape, exact=True, mag=f.mag)
        return self.op("Cast", [fl.name], f.shape, dtype=I64, exact=True, mag=f.mag, to=I64)

    def other_types(self):
        """Exact floats cast to int32, int8, uint8, float16 or double (whole
        numbers in range), or such a value cast back to float."""
        v = self.pick(lambda u: u.dtype in OTHER)
        if v is not None and self.rng.random() < 0.5:
            return self.op("Cast", [v.name], v.shape, dtype=F, exact=True, mag=v.mag, to=F)
        f = self.pick(lambda u: u.exact and u.dtype == F)
        if f is None:
            return None
        t = OTHER[int(self.rng.integers(len(OTHER)))]
        lo = 0.0 if t == TensorProto.UINT8 else -100.0
        c = self.op("Clip", [f.name, self.const(np.float32(lo)), self.const(np.float32(100))], f.shape, exact=True, mag=100)
        fl = self.op("Floor", [c.name], f.shape, exact=True, mag=100)
        return self.op("Cast", [fl.name], f.shape, dtype=t, exact=True, mag=100, to=t)

    def embed(self):
        ids = self.pick(lambda u: u.dtype == I64 and u.name.startswith("in"))
        if ids is None:
            return None
        d = int(self.choose([4, 8, 12]))
        return self.op("Gather", [self.weight(self.vocab, d, scale=1.0), ids.name], ids.shape + (d,), mag=3.0)

    def norm(self):
        v = self.pick(lambda u: u.dtype == F and u.rank >= 2)
        if v is None:
            return None
        kinds = ["BN"] + (["IN"] if v.rank >= 3 else []) + (["LN"] if self.opset >= 17 else []) + \
                (["GN"] if v.rank >= 3 and self.opset >= 21 and v.shape[1] % 2 == 0 else [])
        k = self.choose(kinds)
        c = v.shape[1]
        if k == "BN":
            ps = [self.weight(c, scale=0.3), self.weight(c, scale=0.3), self.weight(c, scale=0.3),
                  self.const(self.rng.uniform(0.5, 2, c).astype(np.float32))]
            return self.op("BatchNormalization", [v.name] + ps, v.shape, mag=v.mag * 2 + 1)
        if k == "IN":
            return self.op("InstanceNormalization", [v.name, self.weight(c, scale=1), self.weight(c, scale=1)], v.shape, mag=4.0,
                           epsilon=EPS)
        if k == "GN":
            return self.op("GroupNormalization", [v.name, self.weight(c, scale=1), self.weight(c, scale=1)], v.shape,
                           mag=4.0, num_groups=2, epsilon=EPS)
        axis = -int(self.rng.integers(1, v.rank))
        tail = v.shape[axis:]
        return self.op("LayerNormalization", [v.name, self.weight(*tail, scale=1), self.weight(*tail, scale=0.5)],
                       v.shape, mag=4.0, axis=axis, epsilon=EPS)

    def softmax(self):
        v = self.pick(lambda u: u.dtype == F and u.rank >= 2)
        if v is None:
            return None
        axis = int(self.rng.integers(1, v.rank)) * int(self.choose([1, -1])) if self.rng.random() < 0.5 else -1
        if axis < 0:
            axis = v.rank + axis if v.rank + axis >= 1 else -1
        return self.op(self.choose(["Softmax", "LogSoftmax"]), [self.tame(v).name], v.shape, mag=8.0, axis=axis)

    def reduce(self):
        v = self.pick(lambda u: u.dtype == F and u.rank >= 2)
        if v is None:
            return None
        o = self.choose(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare",
                         "ReduceLogSumExp", "CumSum", "TopK", "ArgMax"])
        axes = sorted(self.rng.choice(np.arange(1, v.rank), size=int(self.rng.integers(1, v.rank)), replace=False).tolist())
        if o == "CumSum":
            return self.op("CumSum", [v.name, self.const(np.int64(axes[0]))], v.shape, mag=v.mag * v.shape[axes[0]],
                           reverse=int(self.rng.integers(2)))
        if o in ("TopK", "ArgMax"):
            ax = axes[0]
            if o == "ArgMax" and v.exact:
                keep = int(self.rng.integers(2))
                sh = list(v.shape)
                sh[ax:ax + 1] = [1] if keep else []
                return self.op("ArgMax", [v.name], sh, dtype=I64, exact=True, mag=float(v.shape[ax]), axis=ax, keepdims=keep)
            k = int(self.rng.integers(1, v.shape[ax] + 1))
            sh = list(v.shape)
            sh[ax] = k
            node = self.op("TopK", [v.name, self.ints(k)], sh, mag=v.mag, n_out=2, axis=ax)
            return node
        keep = int(self.rng.integers(2))
        sh = [d if i not in axes else 1 for i, d in enumerate(v.shape)] if keep else \
            [d for i, d in enumerate(v.shape) if i not in axes]
        src = self.tame(v) if o in ("ReduceSum", "ReduceSumSquare", "ReduceLogSumExp", "ReduceL2") else v
        cnt = int(np.prod([v.shape[a] for a in axes]))
        mag = {"ReduceMean": src.mag, "ReduceMax": src.mag, "ReduceMin": src.mag}.get(o, src.mag * cnt)
        if o in ("ReduceSum",) or self.opset >= 18:
            return self.op(o, [src.name, self.ints(*axes)], sh, mag=mag, keepdims=keep)
        return self.op(o, [src.name], sh, mag=mag, axes=axes, keepdims=keep)

    def image(self):
        """Conv-family ops on a rank-4 (or rank-3) value."""
        v = self.pick(lambda u: u.dtype == F and u.rank in (3, 4) and all(d >= 3 for d in u.shape[2:]))
        if v is None:
            return None
        v = self.tame(v)
        c, sp = v.shape[1], list(v.shape[2:])
        o = self.choose(["Conv", "Conv", "ConvBN", "ConvRes", "ConvTranspose", "MaxPool", "AveragePool", "Global",
                         "Resize"])
        nsp = len(sp)
        if o in ("Conv", "ConvBN", "ConvRes"):
            k = int(self.choose([1, 3, 3, 5])) if min(sp) >= 5 else int(self.choose([1, 3]))
            s = int(self.choose([1, 1, 2]))
            dil = int(self.choose([1, 1, 2])) if k == 3 and min(sp) >= 5 else 1
            p = (k // 2) * dil if self.rng.random() < 0.8 else 0
            group = c if (self.rng.random() < 0.25 and o != "ConvRes") else 1
            co = c if (group > 1 or o == "ConvRes") else int(self.choose([4, 8, 16]))
            if o == "ConvRes":
                s = 1
                p = (k // 2) * dil
            ins = [v.name, self.weight(co, c // group, *([k] * nsp))]
            if self.rng.random() < 0.6:
                ins.append(self.weight(co, scale=0.2))
            out = [(d + 2 * p - dil * (k - 1) - 1) // s + 1 for d in sp]
            y = self.op("Conv", ins, (v.shape[0], co, *out), mag=4.0, kernel_shape=[k] * nsp, strides=[s] * nsp,
                        pads=[p] * 2 * nsp, dilations=[dil] * nsp, group=group)
            if o == "ConvBN":
                ps = [self.weight(co, scale=0.3), self.weight(co, scale=0.3), self.weight(co, scale=0.3),
                      self.const(self.rng.uniform(0.5, 2, co).astype(np.float32))]
                y = self.op("BatchNormalization", [y.name] + ps, y.shape, mag=6.0)
            if o == "ConvRes":
                y = self.op("Add", [y.name, v.name], y.shape, mag=y.mag + v.mag)
            act = self.choose(["Relu", "Relu", "Relu6", "Sigmoid", None])
            if act == "Relu6":
                y = self.op("Clip", [y.name, self.const(np.float32(0)), self.const(np.float32(6))], y.shape, mag=6.0)
            elif act:
                y = self.op(act, [y.name], y.shape, mag=y.mag)
            return y
        if o == "ConvTranspose":
            co = int(self.choose([2, 4, 8]))
            k, s = (2, 2) if self.rng.random() < 0.5 else (3, 1)
            p = 0 if k == 2 else 1
            out = [(d - 1) * s - 2 * p + k for d in sp]
            return self.op("ConvTranspose", [v.name, self.weight(c, co, *([k] * nsp))], (v.shape[0], co, *out), mag=4.0,
                           kernel_shape=[k] * nsp, strides=[s] * nsp, pads=[p] * 2 * nsp)
        if o in ("MaxPool", "AveragePool"):
            k, s, p = (2, 2, 0) if self.rng.random() < 0.5 else (3, int(self.choose([1, 2])), 1)
            ceil = int(self.rng.integers(2)) if p == 0 else 0
            f = np.ceil if ceil else np.floor
            out = [int(f((d + 2 * p - k) / s)) + 1 for d in sp]
            if ceil:  # the last window must start inside the input (or its head padding)
                out = [o_ - 1 if (o_ - 1) * s >= d + p else o_ for o_, d in zip(out, sp)]
            attrs = dict(kernel_shape=[k] * nsp, strides=[s] * nsp, pads=[p] * 2 * nsp, ceil_mode=ceil)
            if o == "AveragePool":
                attrs["count_include_pad"] = int(self.rng.integers(2))
            return self.op(o, [v.name], (v.shape[0], c, *out), mag=v.mag, **attrs)
        if o == "Global":
            g = self.choose(["GlobalAveragePool", "GlobalMaxPool"])
            return self.op(g, [v.name], (v.shape[0], c) + (1,) * nsp, mag=v.mag)
        scales = [1.0, 1.0] + [2.0] * nsp
        mode = self.choose(["nearest", "linear"])
        return self.op("Resize", [v.name, "", self.const(np.array(scales, np.float32))], (v.shape[0], c, *[2 * d for d in sp]),
                       mag=v.mag, mode=mode)

    def matmul(self):
        v = self.pick(lambda u: u.dtype == F and u.rank >= 2)
        if v is None:
            return None
        v = self.tame(v)
        k = v.shape[-1]
        o = self.choose(["MatMul", "MatMulBias", "Gemm", "Attention", "Einsum"])
        if o == "Gemm" and v.rank == 2:
            n = int(self.choose([3, 8, 16]))
            return self.op("Gemm", [v.name, self.weight(n, k), self.weight(n, scale=0.2)], (v.shape[0], n), mag=4.0, transB=1)
        if o == "Attention" and v.rank == 3:
            q = self.op("MatMul", [v.name, self.weight(k, k)], v.shape, mag=4.0)
            kt = self.op("Transpose", [v.name], (v.shape[0], k, v.shape[1]), exact=v.exact, mag=v.mag, perm=[0, 2, 1])
            s = self.op("MatMul", [q.name, kt.name], (v.shape[0], v.shape[1], v.shape[1]), mag=16.0)
            sc = self.op("Mul", [s.name, self.const(np.float32(1.0 / max(k, 1)))], s.shape, mag=4.0)
            a = self.op("Softmax", [sc.name], s.shape, mag=1.0, axis=-1)
            return self.op("MatMul", [a.name, v.name], v.shape, mag=v.mag)
        if o == "Einsum" and v.rank == 3:
            n = int(self.choose([4, 8]))
            return self.op("Einsum", [v.name, self.weight(k, n)], (v.shape[0], v.shape[1], n), mag=4.0,
                           equation="bij,jk->bik")
        n = int(self.choose([3, 8, 16]))
        y = self.op("MatMul", [v.name, self.weight(k, n)], v.shape[:-1] + (n,), mag=4.0)
        if o == "MatMulBias":
            y = self.op("Add", [y.name, self.weight(n, scale=0.2)], y.shape, mag=4.0)
        return y

    def view(self):
        v = self.pick(lambda u: u.rank >= 2)
        if v is None:
            return None
        r, sh = v.rank, list(v.shape)
        o = self.choose(["Reshape", "Flatten", "Unsqueeze", "Squeeze", "Transpose", "Expand", "Identity"])
        kw = dict(dtype=v.dtype, exact=v.exact, mag=v.mag)
        if o == "Reshape":
            rest = int(np.prod(sh[1:]))
            if r >= 3 and self.rng.random() < 0.5:  # merge two neighbouring axes
                i = int(self.rng.integers(1, r - 1))
                new = sh[:i] + [sh[i] * sh[i + 1]] + sh[i + 2:]
            else:  # split the non-batch part into factors
                fs = [d for d in range(2, rest) if rest % d == 0]
                a = self.choose(fs) if fs else rest
                new = [sh[0], a, rest // a] if fs else [sh[0], rest]
            tgt = [0 if self.rng.random() < 0.5 else -1] + new[1:]
            if self.rng.random() < 0.4 and tgt[0] == 0:
                j = int(self.rng.integers(1, len(new)))
                tgt[j] = -1
            return self.op("Reshape", [v.name, self.ints(*tgt)], new, **kw)
        if o == "Flatten":
            return self.op("Flatten", [v.name], (sh[0], int(np.prod(sh[1:]))), axis=1, **kw)
        if o == "Unsqueeze" and r < 5:
            ax = int(self.rng.integers(1, r + 1))
            return self.op("Unsqueeze", [v.name, self.ints(ax)], sh[:ax] + [1] + sh[ax:], **kw)
        ones = [i for i in range(1, r) if sh[i] == 1]
        if o == "Squeeze" and ones:
            ax = self.choose(ones)
            return self.op("Squeeze", [v.name, self.ints(ax)], sh[:ax] + sh[ax + 1:], **kw)
        if o == "Expand" and ones:
            ax = self.choose(ones)
            new = list(sh)
            new[ax] = int(self.choose([2, 3]))
            return self.op("Expand", [v.name, self.ints(*[1 if d == "N" else d for d in new])], new, **kw)
        if o == "Identity":
            return self.op("Identity", [v.name], sh, **kw)
        perm = [0] + (1 + self.rng.permutation(r - 1)).tolist()
        return self.op("Transpose", [v.name], [sh[p] for p in perm], perm=perm, **kw)

    def data_movement(self):
        v = self.pick(lambda u: u.rank >= 2)
        if v is None:
            return None
        r, sh = v.rank, list(v.shape)
        ax = int(self.rng.integers(1, r))
        kw = dict(dtype=v.dtype, exact=v.exact, mag=v.mag)
        o = self.choose(["Concat", "Split", "Slice", "Gather", "Pad", "Tile", "Trilu"])
        if o == "Concat":
            others = [u for u in self.vals if u.dtype == v.dtype and u.rank == r and
                      all(a == b for i, (a, b) in enumerate(zip(u.shape, sh)) if i != ax)]
            u = self.choose(others)
            ins = [v.name, u.name] if self.rng.random() < 0.5 else [u.name, v.name, v.name]
            total = sum(next(x for x in self.vals if x.name == n).shape[ax] for n in ins)
            return self.op("Concat", ins, sh[:ax] + [total] + sh[ax + 1:], axis=ax, **kw)
        if o == "Split" and sh[ax] >= 2:
            a = int(self.rng.integers(1, sh[ax]))
            outs = self.op("Split", [v.name, self.ints(a, sh[ax] - a)], sh[:ax] + [a] + sh[ax + 1:], n_out=2, axis=ax, **kw)
            second = Val(outs.name[:-2] + "_1", sh[:ax] + [sh[ax] - a] + sh[ax + 1:], v.dtype, v.exact, v.mag)
            self.vals.append(second)
            return second
        if o == "Slice" and sh[ax] >= 2:
            step = int(self.choose([1, 1, 2, -1]))
            if step > 0:
                s0 = int(self.rng.integers(0, sh[ax] - 1))
                e0 = int(self.rng.integers(s0 + 1, sh[ax] + 1))
                n = len(range(s0, e0, step))
            else:
                s0, e0 = sh[ax] - 1, -sh[ax] - 1
                n = sh[ax]
            return self.op("Slice", [v.name, self.ints(s0), self.ints(e0), self.ints(ax), self.ints(step)],
                           sh[:ax] + [n] + sh[ax + 1:], **kw)
        if o == "Gather":
            k = int(self.rng.integers(1, 4))
            idx = self.rng.integers(-sh[ax], sh[ax], size=k)
            if self.rng.random() < 0.3:  # a scalar index drops the axis
                return self.op("Gather", [v.name, self.const(np.int64(idx[0]))], sh[:ax] + sh[ax + 1:], axis=ax, **kw)
            return self.op("Gather", [v.name, self.const(idx.astype(np.int64))], sh[:ax] + [k] + sh[ax + 1:], axis=ax, **kw)
        if o == "Pad" and v.dtype == F:
            mode = self.choose(["constant", "reflect", "edge"])
            b, e = int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))
            if mode == "reflect":
                b, e = min(b, sh[ax] - 1), min(e, sh[ax] - 1)
            pads = [0] * (2 * r)
            pads[ax], pads[r + ax] = b, e
            return self.op("Pad", [v.name, self.ints(*pads)], sh[:ax] + [sh[ax] + b + e] + sh[ax + 1:], mode=mode, **kw)
        if o == "Tile":
            reps = [1] * r
            reps[ax] = int(self.choose([2, 3]))
            return self.op("Tile", [v.name, self.ints(*reps)], sh[:ax] + [sh[ax] * reps[ax]] + sh[ax + 1:], **kw)
        if o == "Trilu" and r >= 3 and self.opset >= 14 and v.dtype in (F, I64):
            return self.op("Trilu", [v.name, self.const(np.int64(int(self.rng.integers(-1, 2))))], sh,
                           upper=int(self.rng.integers(2)), **kw)
        return self.op("Identity", [v.name], sh, **kw)

    # ---- the whole graph ----------------------------------------------------------------------
    def build(self, n_ops):
        kind = self.choose(["image", "image", "seq", "flat"])
        if kind == "image":
            c = int(self.choose([1, 3, 4, 8]))
            h = int(self.rng.integers(5, 13))
            self.add_input(["N", c, h, int(self.rng.integers(5, 13))], F)
        elif kind == "seq":
            self.add_input(["N", int(self.rng.integers(2, 9)), int(self.choose([4, 8, 16]))], F)
        else:
            self.add_input(["N", int(self.choose([5, 8, 16, 32]))], F)
        if self.rng.random() < 0.4:  # token ids: an int64 input (embeddings, int arithmetic)
            self.vocab = int(self.rng.integers(5, 40))
            self.add_input(["N", int(self.rng.integers(2, 9))], I64)
        if self.rng.random() < 0.3:  # a second float input of the first's shape
            first = self.vals[0]
            self.add_input(list(first.shape), F)
        makers = [(self.unary, 4), (self.binary, 4), (self.norm, 1.5), (self.softmax, 1), (self.reduce, 1.5),
                  (self.image, 6 if kind == "image" else 0.3), (self.matmul, 2), (self.view, 3),
                  (self.data_movement, 3), (self.compare, 0.7), (self.bool_logic, 0.5), (self.ints_path, 1), (self.other_types, 1.5),
                  (self.embed, 1.5 if self.vocab else 0)]
        w = np.array([m[1] for m in makers], float)
        tries = 0
        while len(self.nodes) < n_ops and tries < 10 * n_ops:
            tries += 1
            m = makers[int(self.rng.choice(len(makers), p=w / w.sum()))][0]
            v = m()
            if v is not None and v.dtype == F and v.mag > 1e3:
                self.tame(v)
        # outputs: the last float value, and a few others (some read later too)
        outs = [next(v for v in reversed(self.vals) if v.dtype == F)]
        if outs[0].name.startswith("in"):
            outs = [self.op("Relu", [outs[0].name], outs[0].shape, exact=True)]
        for v in self.rng.permutation(len(self.vals))[: int(self.rng.integers(0, 4))]:
            u = self.vals[int(v)]
            if u not in outs and not u.name.startswith("in") and (u.dtype == F or u.exact):
                outs.append(u)
        return outs

    def model(self, n_ops):
        outs = self.build(n_ops)
        # drop what no output needs
        need = {o.name for o in outs}
        keep = []
        for nd in reversed(self.nodes):
            if any(o in need for o in nd.output):
                keep.append(nd)
                need.update(i for i in nd.input if i)
        keep.reverse()
        used = set(need)
        inputs = [helper.make_tensor_value_info(n, dt, s) for n, s, dt in self.inputs if n in used]
        if not inputs:  # every output came from constants alone: make the first input used
            return None
        g = helper.make_graph(keep, "difftest", inputs,
                              [helper.make_tensor_value_info(o.name, o.dtype, list(o.shape)) for o in outs],
                              initializer=[t for t in self.inits if t.name in used])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="ppcc-difftest")
        m.ir_version = 8
        return m


def make(seed, n_ops=None):
    """A random model (ModelProto) and the vocabulary of its int64 input (0: none)."""
    g = Graph(seed)
    n = n_ops or int(g.rng.integers(4, 40))
    return g.model(n), g.vocab
