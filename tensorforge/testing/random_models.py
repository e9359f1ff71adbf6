"""Random ONNX models for differential testing: seeded graphs of the ops real networks combine
(convs of every kind, transposed convs, norms, pools, resizes, layout changes, element-wise
chains with broadcasts, products and attention-like products of two run-time tensors), so that
what the graph passes, the fusion and the layout propagation do to *combinations* of ops is
checked against ONNX Runtime.  The conformance suite runs each op alone, the zoo and the real
models a few fixed combinations; a value kept in the blocked layout flowing into a Pad, a
concatenation of a blocked and a plain value, a reduction fused after a transposed conv are
what neither draws.

    model, feeds = random_model(seed)          # onnx.ModelProto, {"x": array}
    python -m tensorforge.testing.random_models --seeds 0:200 [--threads 2] [--dynamic]

Generation keeps a pool of values with known shapes.  Each step picks a value (recent ones
more often, so chains grow deep, older ones sometimes, so values fan out to several readers)
and an op its rank and size allow, and adds the result to the pool.  Binary ops pair a value
with another of the same shape from the pool or with a constant of a broadcastable shape.  The
model's outputs are the last value and, sometimes, one other: a value read inside the graph
and also returned.  Weights are scaled by 1 / sqrt(fan-in) and nonlinearities kept bounded,
so activations stay near unit scale and one tolerance fits every model.

The command line compiles each seed's model, compares its outputs with ONNX Runtime's
(`RTOL`, `ATOL` times the output's scale) and prints one line per seed, failures with the
error, then the seeds that failed.
"""
from __future__ import annotations

import argparse
import math
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

OPSET = 17
RTOL = 1e-3
ATOL = 1e-4      # times max(1, max |reference|)
BF16_TOLERANCE = 0.1    # rtol and atol (times the scale): bfloat16 keeps 8 bits; a wrong layout is off by O(1)
QDQ_TOLERANCE = 0.1     # the same for QDQ models: a few steps of ACT_SCALE, carried through later ops
MAX_OFF_FRACTION = 0.005    # ... with this share of the elements allowed outside (see check)
COMPARISON_FLIPS = 2        # float32 elements allowed off in a model with comparisons (see check)


@dataclass
class _Builder:
    """The graph under construction: nodes, initializers and the pool of (name, shape) values."""
    rng: np.random.Generator
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    pool: list = field(default_factory=list)
    count: int = 0
    quantized: bool = False      # convs and products in the QDQ form of quantization tools


    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array: np.ndarray, stem: str = "c") -> str:
        from onnx import numpy_helper
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], shape: tuple, pooled: bool = True, **attrs) -> str:
        """Add a node; its float32 output joins the pool unless `pooled` is False (a comparison's
        booleans, a float16 cast: values only the next node of a pattern reads)."""
        from onnx import helper
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        if pooled:
            self.pool.append((out, tuple(int(d) for d in shape)))
        return out

    def weights(self, shape: tuple, fan_in: int) -> str:
        return self.const((self.rng.standard_normal(shape) / math.sqrt(max(1, fan_in))).astype(np.float32), "w")

    def pick(self) -> tuple:
        """A value of the pool: the newest with probability 0.6, else any."""
        if self.rng.random() < 0.6:
            return self.pool[-1]
        return self.pool[int(self.rng.integers(len(self.pool)))]

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]


def _conv_out(size: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


ACT_SCALE = 0.05      # activations quantized to int8 steps of this size (|x| up to 6.35)


def _quantize(b: _Builder, x: str, shape: tuple, signed: bool, pooled: bool = False) -> str:
    """QuantizeLinear then DequantizeLinear of activation `x` with a per-tensor scale (an int8
    value with zero point 0, or uint8 with 128): what a quantization tool writes around an input."""
    zero = np.int8(0) if signed else np.uint8(128)
    scale, zp = b.const(np.float32(ACT_SCALE), "sx"), b.const(zero, "zx")
    q = b.node("QuantizeLinear", [x, scale, zp], shape, pooled=False)
    return b.node("DequantizeLinear", [q, scale, zp], shape, pooled=pooled)


def _quantized_weight(b: _Builder, w: np.ndarray, axis: int) -> str:
    """Per-output-channel symmetric int8 weight `w` (channels along `axis`), dequantized."""
    other = tuple(k for k in range(w.ndim) if k != axis)
    scale = (np.max(np.abs(w), axis=other) / 127 + 1e-8).astype(np.float32)
    shaped = scale.reshape([-1 if k == axis else 1 for k in range(w.ndim)])
    q = np.clip(np.round(w / shaped), -127, 127).astype(np.int8)
    return b.node("DequantizeLinear", [b.const(q, "wq"), b.const(scale, "sw"), b.const(np.zeros_like(scale, np.int8), "zw")],
                  w.shape, pooled=False, axis=axis)


def _quantized_bias(b: _Builder, bias: np.ndarray, weight_scale: np.ndarray) -> str:
    """An int32 bias with scale s_x * s_w per channel, dequantized (the tools' form)."""
    scale = (ACT_SCALE * weight_scale).astype(np.float32)
    q = np.round(bias / scale).astype(np.int32)
    return b.node("DequantizeLinear", [b.const(q, "bq"), b.const(scale, "sb")], bias.shape, pooled=False, axis=0)


def _requantized(b: _Builder, y: str, shape: tuple) -> str:
    """The product's output quantized and dequantized again (maybe through a relu first)."""
    if b.rng.random() < 0.5:
        y = b.node("Relu", [y], shape, pooled=False)
    return _quantize(b, y, shape, signed=bool(b.rng.random() < 0.5), pooled=True)


# ---- ops on images (N, C, H, W) ---------------------------------------------------------------

def _conv(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    k = b.choice([1, 3, 3, 5, 7] if min(h, w) >= 7 else [1, 3])
    s = b.choice([1, 1, 2])
    d = 2 if k == 3 and b.rng.random() < 0.15 else 1
    p = b.choice([0, (d * (k - 1)) // 2, (d * (k - 1)) // 2])
    oh, ow = _conv_out(h, k, s, p, d), _conv_out(w, k, s, p, d)
    if oh < 1 or ow < 1:
        return None
    kind = b.rng.random()
    if kind < 0.2:                                   # depthwise, sometimes with a multiplier
        group, cout = c, c * b.choice([1, 1, 2])
    elif kind < 0.3 and c % 2 == 0:
        group = b.choice([g for g in (2, 4) if c % g == 0])
        cout = group * b.choice([1, 3, 8])
    else:
        group, cout = 1, b.choice([1, 3, 8, 16, 17, 24, 32, 48])
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "dilations": [d, d], "group": group}
    if b.quantized and b.rng.random() < 0.7:
        w = (b.rng.standard_normal((cout, c // group, k, k)) / math.sqrt(c // group * k * k)).astype(np.float32)
        wscale = np.max(np.abs(w), axis=(1, 2, 3)) / 127 + 1e-8
        inputs = [_quantize(b, x, shape, signed=bool(b.rng.random() < 0.5)), _quantized_weight(b, w, 0),
                  _quantized_bias(b, b.rng.standard_normal(cout).astype(np.float32) * 0.1, wscale)]
        y = b.node("Conv", inputs, (n, cout, oh, ow), pooled=False, **attrs)
        return _requantized(b, y, (n, cout, oh, ow))
    inputs = [x, b.weights((cout, c // group, k, k), c // group * k * k)]
    if b.rng.random() < 0.7:
        inputs.append(b.const(b.rng.standard_normal(cout).astype(np.float32) * 0.1, "bias"))
    return b.node("Conv", inputs, (n, cout, oh, ow), **attrs)


def _conv_transpose(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    if h * w > 32 * 32 or min(h, w) < 2:       # ONNX Runtime refuses a 1x1 image with a 1x1 kernel
        return None
    k, s = b.choice([(2, 2), (3, 2), (4, 2), (3, 1), (1, 3)])
    p = b.choice([0, k // 2]) if k > s else 0
    op = 1 if k == 3 and s == 2 and p == 1 and b.rng.random() < 0.5 else 0
    cout = b.choice([1, 3, 8, 16, 20, 32])
    oh, ow = (s * (h - 1) + k - 2 * p + op, s * (w - 1) + k - 2 * p + op)
    inputs = [x, b.weights((c, cout, k, k), c * k * k // (s * s) or 1),
              b.const(b.rng.standard_normal(cout).astype(np.float32) * 0.1, "bias")]
    return b.node("ConvTranspose", inputs, (n, cout, oh, ow), kernel_shape=[k, k], strides=[s, s], pads=[p] * 4,
                  output_padding=[op, op])


def _batch_norm(b: _Builder, x: str, shape: tuple) -> str:
    c = shape[1]
    scale = b.const((1 + 0.2 * b.rng.standard_normal(c)).astype(np.float32), "gamma")
    bias = b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32), "beta")
    mean = b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32), "mean")
    var = b.const((0.5 + b.rng.random(c)).astype(np.float32), "var")
    return b.node("BatchNormalization", [x, scale, bias, mean, var], shape, epsilon=1e-5)


def _pool(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    kind = b.rng.random()
    if kind < 0.25:
        return b.node(b.choice(["GlobalAveragePool", "GlobalMaxPool"]), [x], (n, c, 1, 1))
    k = b.choice([2, 3])
    s = b.choice([1, 2, k])
    p = b.choice([0, k // 2]) if k == 3 else 0
    oh, ow = _conv_out(h, k, s, p), _conv_out(w, k, s, p)
    if oh < 1 or ow < 1:
        return None
    if kind < 0.65:
        return b.node("MaxPool", [x], (n, c, oh, ow), kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
    return b.node("AveragePool", [x], (n, c, oh, ow), kernel_shape=[k, k], strides=[s, s], pads=[p] * 4,
                  count_include_pad=int(b.rng.random() < 0.5))


def _resize(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    if h * w > 24 * 24:
        return None
    mode = b.choice(["nearest", "linear"])
    scales = b.const(np.array([1, 1, 2, 2], np.float32), "scales")
    attrs = {"mode": mode}
    if mode == "linear":
        attrs["coordinate_transformation_mode"] = b.choice(["half_pixel", "align_corners", "asymmetric"])
    return b.node("Resize", [x, "", scales], (n, c, 2 * h, 2 * w), **attrs)


def _pad(b: _Builder, x: str, shape: tuple) -> str:
    n, c, h, w = shape
    t, l_, bo, r = (int(v) for v in b.rng.integers(0, 3, 4))
    mode = b.choice(["constant", "constant", "reflect", "edge"])
    if mode == "reflect" and (max(t, bo) >= h or max(l_, r) >= w):
        mode = "constant"
    pads = b.const(np.array([0, 0, t, l_, 0, 0, bo, r], np.int64), "pads")
    return b.node("Pad", [x, pads], (n, c, h + t + bo, w + l_ + r), mode=mode)


def _concat(b: _Builder, x: str, shape: tuple) -> str:
    others = [v for v in b.pool if len(v[1]) == 4 and v[1][0] == shape[0] and v[1][2:] == shape[2:]]
    other = b.choice(others)
    names, shapes = [x, other[0]], [shape, other[1]]
    if b.rng.random() < 0.5:
        names.reverse()
        shapes.reverse()
    return b.node("Concat", names, (shape[0], shape[1] + other[1][1], *shape[2:]), axis=1)


def _slice_channels(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    if c < 2:
        return None
    axis = b.choice([1, 1, 2, 3])
    size = shape[axis]
    if size < 2:
        return None
    start = int(b.rng.integers(0, size - 1))
    end = int(b.rng.integers(start + 1, size + 1))
    out = list(shape)
    out[axis] = end - start
    return b.node("Slice", [x, b.const(np.array([start], np.int64), "st"), b.const(np.array([end], np.int64), "en"),
                            b.const(np.array([axis], np.int64), "ax")], tuple(out))


def _squeeze_excite(b: _Builder, x: str, shape: tuple) -> str:
    """x * sigmoid(conv(relu(conv(mean over H, W)))): a squeeze-and-excitation gate."""
    n, c, h, w = shape
    mid = max(1, c // 4)
    m = b.node("ReduceMean", [x], (n, c, 1, 1), axes=[2, 3], keepdims=1)
    r = b.node("Conv", [m, b.weights((mid, c, 1, 1), c)], (n, mid, 1, 1), kernel_shape=[1, 1])
    r = b.node("Relu", [r], (n, mid, 1, 1))
    g = b.node("Conv", [r, b.weights((c, mid, 1, 1), mid)], (n, c, 1, 1), kernel_shape=[1, 1])
    g = b.node("Sigmoid", [g], (n, c, 1, 1))
    return b.node("Mul", [x, g], shape)


def _depth_space(b: _Builder, x: str, shape: tuple) -> str | None:
    n, c, h, w = shape
    if c % 4 == 0 and b.rng.random() < 0.6:
        return b.node("DepthToSpace", [x], (n, c // 4, 2 * h, 2 * w), blocksize=2, mode=b.choice(["DCR", "CRD"]))
    if h % 2 == 0 and w % 2 == 0:
        return b.node("SpaceToDepth", [x], (n, 4 * c, h // 2, w // 2), blocksize=2)
    return None


def _norm(b: _Builder, x: str, shape: tuple) -> str:
    n, c, h, w = shape
    if b.rng.random() < 0.5:
        return b.node("InstanceNormalization", [x, b.const((1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                                b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32))],
                      shape, epsilon=1e-5)
    return b.node("LayerNormalization", [x, b.const((1 + 0.1 * b.rng.standard_normal(w)).astype(np.float32)),
                                         b.const((0.1 * b.rng.standard_normal(w)).astype(np.float32))],
                  shape, axis=-1, epsilon=1e-5)


def _softmax_channels(b: _Builder, x: str, shape: tuple) -> str:
    return b.node(b.choice(["Softmax", "LogSoftmax"]), [x], shape, axis=b.choice([1, -1]))


def _nhwc_round_trip(b: _Builder, x: str, shape: tuple) -> str:
    """Transpose to NHWC, an element-wise op or a product over channels there, and back."""
    n, c, h, w = shape
    t = b.node("Transpose", [x], (n, h, w, c), perm=[0, 2, 3, 1])
    if b.rng.random() < 0.5:
        cout = b.choice([4, 8, 16])
        t = b.node("MatMul", [t, b.weights((c, cout), c)], (n, h, w, cout))
        c = cout
    else:
        t = b.node("Mul", [t, b.const((1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32))], (n, h, w, c))
    return b.node("Transpose", [t], (n, c, h, w), perm=[0, 3, 1, 2])


def _to_sequence(b: _Builder, x: str, shape: tuple) -> str:
    """(N, C, H, W) -> (N, H * W, C): tokens, as a vision transformer's patch embedding makes them."""
    n, c, h, w = shape
    r = b.node("Reshape", [x, b.const(np.array([0, c, h * w], np.int64), "shape")], (n, c, h * w))
    return b.node("Transpose", [r], (n, h * w, c), perm=[0, 2, 1])


def _flatten_dense(b: _Builder, x: str, shape: tuple) -> str | None:
    n = shape[0]
    size = int(np.prod(shape[1:]))
    if size > 4096:
        return None
    f = b.node("Flatten", [x], (n, size), axis=1)
    units = b.choice([10, 16, 33, 64])
    if b.rng.random() < 0.5:
        return b.node("Gemm", [f, b.weights((units, size), size), b.const(np.zeros(units, np.float32) + 0.1)],
                      (n, units), transB=1)
    return b.node("MatMul", [f, b.weights((size, units), size)], (n, units))


# ---- ops on any rank ---------------------------------------------------------------------------

_UNARY = ["Relu", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Elu", "Softplus",
          "Abs", "Neg", "Erf", "Gelu-erf", "SiLU"]


def _unary(b: _Builder, x: str, shape: tuple) -> str:
    op = b.choice(_UNARY)
    if op == "LeakyRelu":
        return b.node(op, [x], shape, alpha=float(b.choice([0.01, 0.1, 0.2])))
    if op == "Clip":
        lo, hi = b.choice([(0.0, 6.0), (-1.0, 1.0), (-0.5, 2.0)])
        return b.node(op, [x, b.const(np.float32(lo)), b.const(np.float32(hi))], shape)
    if op == "Gelu-erf":                   # as torch.onnx.export writes nn.GELU
        d = b.node("Div", [x, b.const(np.float32(math.sqrt(2)))], shape)
        e = b.node("Erf", [d], shape)
        a = b.node("Add", [e, b.const(np.float32(1))], shape)
        m = b.node("Mul", [x, a], shape)
        return b.node("Mul", [m, b.const(np.float32(0.5))], shape)
    if op == "SiLU":
        return b.node("Mul", [x, b.node("Sigmoid", [x], shape)], shape)
    return b.node(op, [x], shape)


def _broadcast_shape(b: _Builder, shape: tuple) -> tuple:
    """A shape that broadcasts to `shape`: per channel, per last axis, a scalar, or all but the batch."""
    rank = len(shape)
    options = [(), (1, *shape[1:])]       # never the batch: a dynamic model's varies
    if rank >= 2:
        options.append((shape[-1],))
    if rank == 4:
        options += [(shape[1], 1, 1), (1, shape[1], 1, 1), (1, 1, shape[2], 1)]
    if rank >= 3:
        options.append((shape[-2], 1))
    return b.choice(options)


def _binary(b: _Builder, x: str, shape: tuple) -> str:
    op = b.choice(["Add", "Add", "Mul", "Sub", "Max", "Min", "Div"])
    same = [v for v in b.pool if v[1] == shape and v[0] != x]
    if op != "Div" and same and b.rng.random() < 0.5:
        other = b.choice(same)[0]
    else:
        cshape = _broadcast_shape(b, shape)
        values = b.rng.standard_normal(cshape).astype(np.float32)
        if op == "Div":
            values = (np.sign(values) + (values == 0)) * (0.5 + np.abs(values))
        other = b.const(values.astype(np.float32))
    ins = [x, other] if b.rng.random() < 0.7 or op == "Div" else [other, x]
    return b.node(op, ins, shape)


def _reduce(b: _Builder, x: str, shape: tuple) -> str | None:
    rank = len(shape)
    if rank < 2:
        return None
    axis = int(b.rng.integers(1, rank))
    keep = int(b.rng.random() < 0.7)
    op = b.choice(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"])
    out = tuple(1 if k == axis else d for k, d in enumerate(shape)) if keep else \
        tuple(d for k, d in enumerate(shape) if k != axis)
    if op == "ReduceSum":      # opset 13 on: axes as an input
        return b.node(op, [x, b.const(np.array([axis], np.int64), "axes")], out, keepdims=keep)
    return b.node(op, [x], out, axes=[axis], keepdims=keep)


def _split(b: _Builder, x: str, shape: tuple) -> str | None:
    """Split along an axis into two parts of a random size; both parts are kept, the second
    joined back by a later op or returned."""
    from onnx import helper
    if len(shape) < 2:
        return None
    axis = int(b.rng.integers(1, len(shape)))
    if shape[axis] < 2:
        return None
    first = int(b.rng.integers(1, shape[axis]))
    outs = [b.name("split_"), b.name("split_")]
    sizes = [first, shape[axis] - first]
    b.nodes.append(helper.make_node("Split", [x, b.const(np.array(sizes, np.int64), "sizes")], outs, axis=axis))
    for o, size in zip(outs, sizes):
        b.pool.append((o, tuple(size if k == axis else d for k, d in enumerate(shape))))
    return outs[-1]


def _select(b: _Builder, x: str, shape: tuple) -> str:
    """Where(x > t, x, a * x): a comparison and a select, as leaky activations and masks export."""
    cond = b.node(b.choice(["Greater", "Less", "GreaterOrEqual"]), [x, b.const(np.float32(b.choice([0.0, 0.5])))],
                  shape, pooled=False)
    alt = b.node("Mul", [x, b.const(np.float32(0.1))], shape)
    return b.node("Where", [cond, x, alt] if b.rng.random() < 0.5 else [cond, alt, x], shape)


def _math(b: _Builder, x: str, shape: tuple) -> str:
    """Bounded arithmetic with the ops that need a safe domain: Sqrt, Reciprocal, Log, Pow, Exp."""
    kind = b.choice(["sqrt", "reciprocal", "log", "pow", "exp", "cast"])
    if kind == "pow":
        return b.node("Pow", [x, b.const(np.float32(b.choice([2.0, 3.0])))], shape)
    if kind == "exp":
        return b.node("Exp", [b.node("Tanh", [x], shape)], shape)
    if kind == "cast":           # through float16 and back, as mixed-precision exports do
        h = b.node("Cast", [x], shape, pooled=False, to=10)
        return b.node("Cast", [h], shape, to=1)
    pos = b.node("Add", [b.node("Abs", [x], shape), b.const(np.float32(1.0))], shape)
    return b.node({"sqrt": "Sqrt", "reciprocal": "Reciprocal", "log": "Log"}[kind], [pos], shape)


def _reshape_axes(b: _Builder, x: str, shape: tuple) -> str | None:
    """Unsqueeze then Squeeze, a Reshape that merges the last two axes, or a Tile/Expand."""
    kind = b.choice(["unsqueeze", "merge", "tile", "expand", "cumsum"])
    rank = len(shape)
    if kind == "unsqueeze":
        axis = int(b.rng.integers(0, rank + 1))
        u = b.node("Unsqueeze", [x, b.const(np.array([axis], np.int64), "axes")], shape[:axis] + (1,) + shape[axis:])
        return b.node("Squeeze", [u, b.const(np.array([axis], np.int64), "axes")], shape)
    if kind == "merge" and rank >= 3:
        merged = shape[:-2] + (shape[-2] * shape[-1],)
        return b.node("Reshape", [x, b.const(np.array([0] * (rank - 2) + [-1], np.int64), "shape")], merged)
    if kind == "tile" and np.prod(shape) <= 1 << 14:
        reps = [1] * rank
        reps[-1] = 2
        return b.node("Tile", [x, b.const(np.array(reps, np.int64), "reps")], shape[:-1] + (2 * shape[-1],))
    if kind == "expand" and 1 in shape[1:]:
        axis = 1 + list(shape[1:]).index(1)
        target = tuple(3 if k == axis else d for k, d in enumerate(shape))
        ones = [3 if k == axis else 1 for k in range(rank)]       # broadcast keeps the other sizes
        return b.node("Expand", [x, b.const(np.array(ones, np.int64), "shape")], target)
    if kind == "cumsum" and rank >= 2:
        axis = int(b.rng.integers(1, rank))
        return b.node("CumSum", [x, b.const(np.array(axis, np.int64), "axis")], shape)
    return None


def _view_by_shape(b: _Builder, x: str, shape: tuple) -> str | None:
    """x.view(x.size(0), -1) or x.view(x.size(0), x.size(1), -1) as torch.onnx.export writes it:
    the sizes taken from Shape at run time (with a symbolic batch, a shape computed per call)."""
    from onnx import helper
    rank = len(shape)
    if rank < 3:
        return None
    keep = b.choice([1, 2])
    sh = b.name("shape_")
    b.nodes.append(helper.make_node("Shape", [x], [sh]))
    parts = []
    for axis in range(keep):
        g = b.name("gather_")
        b.nodes.append(helper.make_node("Gather", [sh, b.const(np.array(axis, np.int64), "idx")], [g], axis=0))
        u = b.name("unsqueeze_")
        b.nodes.append(helper.make_node("Unsqueeze", [g, b.const(np.array([0], np.int64), "axes")], [u]))
        parts.append(u)
    target = b.name("concat_")
    b.nodes.append(helper.make_node("Concat", parts + [b.const(np.array([-1], np.int64), "rest")], [target], axis=0))
    out = shape[:keep] + (int(np.prod(shape[keep:])),)
    return b.node("Reshape", [x, target], out)


# ---- ops on sequences (N, T, D) ------------------------------------------------------------------

def _linear(b: _Builder, x: str, shape: tuple) -> str:
    n, t, d = shape
    units = b.choice([16, 32, 48, 64, 96])
    if b.quantized and b.rng.random() < 0.7:
        w = (b.rng.standard_normal((d, units)) / math.sqrt(d)).astype(np.float32)
        y = b.node("MatMul", [_quantize(b, x, shape, signed=bool(b.rng.random() < 0.5)), _quantized_weight(b, w, 1)],
                   (n, t, units), pooled=False)
        return _requantized(b, y, (n, t, units))
    y = b.node("MatMul", [x, b.weights((d, units), d)], (n, t, units))
    if b.rng.random() < 0.7:
        y = b.node("Add", [y, b.const((0.1 * b.rng.standard_normal(units)).astype(np.float32), "bias")], (n, t, units))
    return y


def _attention(b: _Builder, x: str, shape: tuple) -> str:
    """softmax(q k^T / sqrt(d)) v over `heads` heads, q, k, v projections of x."""
    n, t, d = shape
    heads = b.choice([h for h in (1, 2, 4) if d % h == 0])
    hd = d // heads

    def heads_of(perm: list[int], out_shape: tuple) -> str:
        p = b.node("MatMul", [x, b.weights((d, d), d)], (n, t, d))
        r = b.node("Reshape", [p, b.const(np.array([0, 0, heads, hd], np.int64), "shape")], (n, t, heads, hd))
        return b.node("Transpose", [r], out_shape, perm=perm)

    q = heads_of([0, 2, 1, 3], (n, heads, t, hd))
    k = heads_of([0, 2, 3, 1], (n, heads, hd, t))
    v = heads_of([0, 2, 1, 3], (n, heads, t, hd))
    s = b.node("MatMul", [q, k], (n, heads, t, t))
    s = b.node("Mul", [s, b.const(np.float32(1 / math.sqrt(hd)))], (n, heads, t, t))
    p = b.node("Softmax", [s], (n, heads, t, t), axis=-1)
    o = b.node("MatMul", [p, v], (n, heads, t, hd))
    o = b.node("Transpose", [o], (n, t, heads, hd), perm=[0, 2, 1, 3])
    return b.node("Reshape", [o, b.const(np.array([0, 0, d], np.int64), "shape")], (n, t, d))


def _seq_layer_norm(b: _Builder, x: str, shape: tuple) -> str:
    d = shape[-1]
    return b.node("LayerNormalization", [x, b.const((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32)),
                                         b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32))],
                  shape, axis=-1, epsilon=1e-5)


def _conv1d(b: _Builder, x: str, shape: tuple) -> str | None:
    """A 1-D conv over the last axis with the middle one as channels (a sequence transposed to
    (N, D, T), an audio model's features)."""
    n, c, length = shape
    k = b.choice([1, 3, 5, 16] if length >= 16 else [1, 3])
    s = b.choice([1, 1, 2, 4])
    p = b.choice([0, k // 2])
    group = c if b.rng.random() < 0.2 else 1
    cout = c if group > 1 else b.choice([8, 16, 32, 48])
    out = _conv_out(length, k, s, p)
    if out < 1:
        return None
    inputs = [x, b.weights((cout, c // group, k), c // group * k),
              b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32), "bias")]
    return b.node("Conv", inputs, (n, cout, out), kernel_shape=[k], strides=[s], pads=[p, p], group=group)


def _recurrent(b: _Builder, x: str, shape: tuple) -> str | None:
    """nn.LSTM / nn.GRU with batch_first as torch.onnx.export writes them: (N, T, D) transposed to
    (T, N, D), the ONNX op (forward or both directions), its (T, dirs, N, H) output back to
    (N, T, dirs * H)."""
    n, t, d = shape
    if t > 64:
        return None
    op = b.choice(["LSTM", "GRU"])
    hidden = b.choice([8, 16, 32])
    dirs = b.choice([1, 1, 2])
    gates = 4 if op == "LSTM" else 3
    tx = b.node("Transpose", [x], (t, n, d), perm=[1, 0, 2])
    w = b.weights((dirs, gates * hidden, d), d)
    r = b.weights((dirs, gates * hidden, hidden), hidden)
    bias = b.const((0.1 * b.rng.standard_normal((dirs, 2 * gates * hidden))).astype(np.float32), "bias")
    attrs: dict = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward"}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    y = b.node(op, [tx, w, r, bias], (t, dirs, n, hidden), **attrs)
    y = b.node("Transpose", [y], (n, t, dirs, hidden), perm=[2, 0, 1, 3])
    return b.node("Reshape", [y, b.const(np.array([0, 0, dirs * hidden], np.int64), "shape")], (n, t, dirs * hidden))


def _group_norm(b: _Builder, x: str, shape: tuple) -> str | None:
    """nn.GroupNorm as torch.onnx.export writes it: a reshape to (N, G, -1), an instance norm
    with unit scale, the reshape back and a per-channel scale and shift."""
    n, c, h, w = shape
    groups = [g for g in (2, 4, 8) if c % g == 0 and g < c]
    if not groups:
        return None
    g = b.choice(groups)
    r = b.node("Reshape", [x, b.const(np.array([0, g, -1], np.int64), "shape")], (n, g, c // g * h * w))
    r = b.node("InstanceNormalization", [r, b.const(np.ones(g, np.float32)), b.const(np.zeros(g, np.float32))],
               (n, g, c // g * h * w), epsilon=1e-5)
    r = b.node("Reshape", [r, b.const(np.array([0, c, h, w], np.int64), "shape")], shape)
    r = b.node("Mul", [r, b.const((1 + 0.1 * b.rng.standard_normal((c, 1, 1))).astype(np.float32))], shape)
    return b.node("Add", [r, b.const((0.1 * b.rng.standard_normal((c, 1, 1))).astype(np.float32))], shape)


def _seq_transpose(b: _Builder, x: str, shape: tuple) -> str:
    n, t, d = shape
    return b.node("Transpose", [x], (n, d, t), perm=[0, 2, 1])


_IMAGE_OPS = [(_conv, 5), (_conv_transpose, 1), (_batch_norm, 2), (_pool, 2), (_resize, 1), (_pad, 1),
              (_concat, 2), (_slice_channels, 1), (_squeeze_excite, 1), (_depth_space, 1), (_norm, 1),
              (_softmax_channels, 1), (_nhwc_round_trip, 1), (_to_sequence, 1), (_flatten_dense, 1), (_group_norm, 1),
              (_unary, 4), (_binary, 3), (_reduce, 1), (_split, 1), (_select, 1), (_math, 1), (_reshape_axes, 1),
              (_view_by_shape, 1)]
_SEQUENCE_OPS = [(_linear, 4), (_attention, 2), (_seq_layer_norm, 2), (_seq_transpose, 1), (_conv1d, 2),
                 (_recurrent, 1), (_unary, 3),
                 (_binary, 3), (_reduce, 1), (_split, 1), (_select, 1), (_math, 1), (_reshape_axes, 1),
                 (_view_by_shape, 1)]
_OTHER_OPS = [(_unary, 3), (_binary, 3), (_reduce, 1), (_split, 1), (_select, 1), (_math, 1), (_reshape_axes, 1)]


def _ops_for(rank: int) -> list:
    return _IMAGE_OPS if rank == 4 else _SEQUENCE_OPS if rank == 3 else _OTHER_OPS


def random_model(seed: int, steps: int | None = None, dynamic: bool = False, quantized: bool = False):
    """(onnx.ModelProto, {"x": input array}) of a random model from `seed` (the same seed gives the
    same model on every machine).  Images (N, C, H, W) or sequences (N, T, D) come in; `steps` ops
    (default 4 to 20) are drawn as the module docstring says.  `dynamic`: the same model with its
    batch dimension a symbol ("batch"; the outputs' shapes unstated), which any batch size fits:
    the reshapes copy the batch (0 in their shapes) and the expands broadcast it.  `quantized`:
    most convs and products in the QDQ form (int8 activations, per-channel int8 weights, int32
    biases, the output quantized again), as ONNX Runtime's quantization tool writes them."""
    from onnx import TensorProto, checker, helper
    rng = np.random.default_rng(seed)
    b = _Builder(rng, quantized=quantized)
    if rng.random() < 0.75:
        shape: tuple = (int(b.choice([1, 1, 2])), int(b.choice([1, 3, 4, 8, 16, 24, 32])),
                        int(rng.integers(5, 33)), int(rng.integers(5, 33)))
    else:
        shape = (int(b.choice([1, 2])), int(b.choice([7, 16, 31, 64])), int(b.choice([16, 32, 48, 64])))
    b.pool.append(("x", shape))
    steps = int(rng.integers(4, 21)) if steps is None else steps
    done = 0
    tries = 0
    while done < steps and tries < 20 * steps:
        tries += 1
        name, vshape = b.pick()
        if int(np.prod(vshape)) > 1 << 17 or 0 in vshape:
            continue
        ops = _ops_for(len(vshape))
        weights = np.array([w for _, w in ops], np.float64)
        fn = ops[int(rng.choice(len(ops), p=weights / weights.sum()))][0]
        if fn(b, name, vshape) is not None:
            done += 1
    outputs = [b.pool[-1]]
    inner = [v for v in b.pool[1:-1]]
    if inner and rng.random() < 0.3:
        outputs.insert(0, inner[int(rng.integers(len(inner)))])
    declared = ("batch", *shape[1:]) if dynamic else shape
    graph = helper.make_graph(
        b.nodes, f"random_{seed}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, declared)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None] * len(s) if dynamic else s) for n, s in outputs],
        b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    checker.check_model(model)
    x = rng.standard_normal(shape).astype(np.float32)
    return model, {"x": x}


def describe(model) -> str:
    """The model's ops in order, one word each: what a failing seed's line shows."""
    return " ".join(n.op_type for n in model.graph.node)


def random_records(graph, target: str, seed: int, threads: int | None = None) -> list:
    """Tuning records that give each tunable task of `graph` a random point of its knob space, as
    if the tuner had measured it fastest: the compiled model must compute the same with any
    point (tuning picks knob values, it never changes what is computed)."""
    import random

    from ..autotune.records import Record
    from ..autotune.task import extract_tasks
    rng = random.Random(seed)
    return [Record(task, task.config_space.random(rng).to_json(), costs=(1e-3,), threads=threads)
            for task in extract_tasks(graph, target)]


DYNAMIC_BATCHES = (3, 1, 5)     # a bucket, the smallest, and one that runs as chunks of buckets


def check(seed: int, threads: int | None = None, target: str = "c -mcpu=native", dynamic: bool = False,
          precision: str = "fp32", quantized: bool = False, tuned: bool = False, run: bool = True) -> None:
    """Compile seed's model, run it, and compare with ONNX Runtime: AssertionError on a mismatch
    (any exception from the compile or the call propagates).  `dynamic`: the model with a
    symbolic batch, compiled once and called with each of DYNAMIC_BATCHES.  `precision` "bf16":
    convs and products in bfloat16 (compile's precision), compared within BF16_TOLERANCE.
    `quantized`: the QDQ model (random_model's), within QDQ_TOLERANCE: a rounding tie that falls
    the other way moves a value by one step.  `tuned`: compiled with `random_records` (a random
    knob point for every tunable task).  `run` False: compile only (a target whose device this
    machine lacks, such as "cuda -arch=sm_90": its compiler must accept every kernel)."""
    import onnxruntime as ort

    from .. import driver
    from ..frontend import from_onnx
    model, feeds = random_model(seed, dynamic=dynamic, quantized=quantized)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    graph = from_onnx(model)
    records = random_records(graph, target, seed, threads) if tuned else None
    compiled = driver.compile(graph, target=target, threads=threads, precision=precision, records=records,
                                   progress=False)
    if not run:
        return
    rtol, atol = (RTOL, ATOL) if precision == "fp32" else (BF16_TOLERANCE, BF16_TOLERANCE)
    if quantized:
        rtol, atol = max(rtol, QDQ_TOLERANCE), max(atol, QDQ_TOLERANCE)
    calls = [feeds["x"]]
    if dynamic:
        rng = np.random.default_rng(seed + 1)
        calls = [rng.standard_normal((n, *feeds["x"].shape[1:])).astype(np.float32) for n in DYNAMIC_BATCHES]
    compares = any(n.op_type in ("Greater", "Less", "GreaterOrEqual") for n in model.graph.node)
    for x in calls:
        try:
            want = sess.run(None, {"x": x})
        except Exception:         # noqa: BLE001 - a model ONNX Runtime refuses at this batch
            if x.shape == feeds["x"].shape:
                raise
            continue              # (a constant that spans an axis the batch reaches: not batch-generic)
        got = compiled(x)
        for k, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape, f"seed {seed}, batch {x.shape[0]}, output {k}: shape {g.shape} != {w.shape}"
            scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
            where = f"seed {seed}, batch {x.shape[0]}, output {k} ({model.graph.output[k].name})"
            off = ~np.isclose(g, w, rtol=rtol, atol=atol * scale)
            if precision == "fp32" and not quantized:
                # a value within float32 rounding of a comparison's threshold may select the
                # other side of a Where: at most COMPARISON_FLIPS elements, in a model that compares
                if off.sum() > (COMPARISON_FLIPS if compares else 0):
                    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)
                continue
            # bfloat16 and int8 steps move values across a comparison's threshold (a Where, a
            # max pool's tie) now and then: a few elements may differ, the rest must be close
            assert off.mean() <= MAX_OFF_FRACTION, \
                f"{where}: {int(off.sum())} of {off.size} elements differ, e.g. {g[off][:4]} against {w[off][:4]}"



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0:50", help="START:STOP (or one seed)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--target", default="c -mcpu=native")
    ap.add_argument("--show", action="store_true", help="print each model's ops")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--quantized", action="store_true", help="convs and products in the QDQ form")
    ap.add_argument("--tuned", action="store_true", help="a random knob point for every tunable task")
    ap.add_argument("--dynamic", action="store_true", help="a symbolic batch, called with batches "
                    + ", ".join(map(str, DYNAMIC_BATCHES)))
    ap.add_argument("--compile-only", action="store_true",
                    help="compile without running (a target whose device is missing: cuda -arch=sm_90)")
    args = ap.parse_args(argv)

    def label(seed: int) -> tuple[str, str]:
        model, _ = random_model(seed, dynamic=args.dynamic, quantized=args.quantized)
        return f"{len(model.graph.node)} nodes", describe(model)

    return campaign(args.seeds, lambda seed: check(seed, args.threads, args.target, args.dynamic, args.precision,
                                                   args.quantized, args.tuned, run=not args.compile_only),
                    label, "ONNX Runtime", args.show, outcome="compile" if args.compile_only else None)


def campaign(seeds: str, check_one, label, peer: str, show: bool = False, outcome: str | None = None) -> int:
    """Run `check_one(seed)` for the seeds of "START:STOP" (or one seed), one line per seed (with
    `label(seed)`'s size and, on a failure or with `show`, its ops), every failure reported and
    the run going on; the failed seeds last, after how many seeds `outcome` ("match PEER" by
    default).  Returns the exit status (1 when any failed)."""
    lo, _, hi = seeds.partition(":")
    chosen = range(int(lo), int(hi)) if hi else [int(lo)]
    failed = []
    for seed in chosen:
        size, ops = label(seed)
        try:
            check_one(seed)
            print(f"seed {seed}: ok ({size})" + (f"  {ops}" if show else ""), flush=True)
        except Exception as e:       # noqa: BLE001 - a campaign reports every failure and goes on
            failed.append(seed)
            first = str(e).strip().splitlines()
            print(f"seed {seed}: FAIL {type(e).__name__}: {' '.join(first[:6])[:600]}\n    ops: {ops}", flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc(limit=-4)
    print(f"{len(chosen) - len(failed)} of {len(chosen)} seeds {outcome or 'match ' + peer}" +
          (f"; failed: {' '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
