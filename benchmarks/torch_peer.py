"""PyTorch as a peer for whole models: an ONNX graph (the model zoo's) rebuilt as a
`torch.nn.Module` that runs every node with the PyTorch op a user would write, so that
benchmarks/e2e.py can time PyTorch beside tensorforge and ONNX Runtime on the same weights.

    module = to_torch(onnx_model)             # eager: one Python call per node
    found = variants(onnx_model, feeds)       # eager, jit.freeze, jit.optimize_for_inference (+NHWC)
    peer = fastest(found)                     # the quickest of them at the current thread count
    outputs = peer(*found.inputs)             # a tuple of tensors, in graph output order
    found = module_variants(module, inputs)   # the same modes for a torch.nn.Module a user wrote

Converters are registered per ONNX op type with `@converter("Relu")`.  A converter runs once,
when the module is built: it reads the node's attributes and constant inputs (shapes, axes) and
returns the function that computes the node from its input tensors on every call.  Initializers
and Constant nodes become buffers, and so does what a node computes from constants alone (a
weight the exporter sliced), once, when the module is built.  The table covers the ops of the zoo
(`tensorforge.testing.models`) and what exporters write around them in real models (shape
arithmetic, masks, casts, slices, pads, resizes, clips); an op outside it (If, GRU, ...), or an
attribute value a converter does not implement, raises NotImplementedError naming the op, the
node and the opset, before anything runs.

Why not onnx2torch: it needs torchvision, which does not import with the installed torch; this
converter is short, so what the peer runs is plain to see.  Why trace and freeze: the eager module
pays Python and dispatcher time per node (hundreds of nodes in BERT), which a PyTorch user removes
with TorchScript; `torch.jit.freeze` also folds batch norm into the preceding convolution and
turns weights into constants, and `torch.jit.optimize_for_inference` adds oneDNN layouts.  CNNs
also get each of these in channels_last (NHWC) memory order, as PyTorch's CPU performance guide
advises.  `variants` keeps the modes that agree with eager and `fastest` times them, so the peer
is PyTorch at its best on this machine, not at its slowest.
"""
from __future__ import annotations

import copy
import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

try:
    import torch
    from torch.nn import functional as F
except ImportError as exc:  # pragma: no cover - e2e.py reports the torch column as n/a
    raise ImportError("the PyTorch peer needs PyTorch: pip install torch") from exc

# A converter: (node context) -> the function computing the node's outputs from its input tensors.
Kernel = Callable[[list], object]
_CONVERTERS: dict[str, Callable[["Node"], Kernel]] = {}


def converter(*op_types: str) -> Callable:
    """Register a converter for ONNX op types (default domain)."""

    def register(fn: Callable) -> Callable:
        for t in op_types:
            if t in _CONVERTERS:
                raise ValueError(f"torch peer: converter for {t} registered twice")
            _CONVERTERS[t] = fn
        return fn

    return register


def supported_ops() -> list[str]:
    return sorted(_CONVERTERS)


@dataclass
class Node:
    """What a converter sees: the node, its attributes, its constant inputs and the opset."""
    proto: object                       # onnx.NodeProto
    attrs: dict
    consts: list                        # per input: np.ndarray when an initializer, else None
    opset: int
    owner: "OnnxTorchModule"

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def inputs(self) -> list[str]:
        return list(self.proto.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.proto.output)

    def has_input(self, k: int) -> bool:
        return len(self.proto.input) > k and self.proto.input[k] != ""

    def has_output(self, k: int) -> bool:
        return len(self.proto.output) > k and self.proto.output[k] != ""

    def const(self, k: int, what: str) -> np.ndarray:
        """Input k as an array; it must be an initializer (a shape, axes, a weight)."""
        if not self.has_input(k) or self.consts[k] is None:
            self.unsupported(f"its {what} (input {k}) is computed at run time; only constants are supported")
        return self.consts[k]

    def unsupported(self, why: str):
        raise NotImplementedError(f"torch peer: ONNX op {self.op_type} (node {self.proto.name!r}, "
                                  f"opset {self.opset}) is not supported: {why}")

    def reject(self, **allowed) -> None:
        """Raise when an attribute is set to a value the converter does not implement; `allowed`
        maps attribute name to the accepted values (a tuple)."""
        for name, values in allowed.items():
            if name in self.attrs and self.attrs[name] not in values:
                self.unsupported(f"attribute {name}={self.attrs[name]!r} (supported: {values})")


# -- the module ------------------------------------------------------------------------------------
class OnnxTorchModule(torch.nn.Module):
    """Runs an ONNX graph node by node with PyTorch ops.  forward(*inputs) takes the graph inputs
    (not the initializers) in graph order and returns a tuple of the graph outputs."""

    def __init__(self, model, channels_last: bool = False):
        super().__init__()
        self.channels_last = channels_last
        from onnx import helper, numpy_helper

        graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self._check_supported(graph)
        arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in arrays]
        self.output_names = [o.name for o in graph.output]
        # constant name -> buffer attribute (ONNX names may hold characters attributes can't)
        self._buffers_of: dict[str, str] = {}

        def constant(name: str, array: np.ndarray) -> None:
            """A constant of the graph (an initializer, a Constant node's value, what a node
            computes from constants): a buffer, and seen as constant by the converters after it."""
            arrays[name] = array
            attr = f"const{len(self._buffers_of)}"
            self.register_buffer(attr, _layout(torch.from_numpy(np.array(array)), channels_last), persistent=False)
            self._buffers_of[name] = attr

        for name, array in list(arrays.items()):
            constant(name, array)
        self._steps: list[tuple[Kernel, list[str], list[str]]] = []
        for proto in graph.node:
            if proto.op_type == "Constant" and proto.domain in ("", "ai.onnx"):
                constant(proto.output[0], _constant_value(proto))
                continue
            attrs = {a.name: _attr_value(helper, a) for a in proto.attribute}
            consts = [arrays.get(name) for name in proto.input]
            node = Node(proto, attrs, consts, self.opset, self)
            kernel = _CONVERTERS[proto.op_type](node)
            if proto.input and all(name == "" or name in arrays for name in proto.input):
                # computed from constants only (a weight sliced or transposed by the exporter):
                # computed once, here, and a constant for the converters after it
                with torch.no_grad():
                    result = kernel([torch.from_numpy(np.array(arrays[n])) if n else None for n in proto.input])
                for name, value in zip(proto.output, result if isinstance(result, (tuple, list)) else (result,)):
                    if name:
                        constant(name, value.numpy())
                continue
            self._steps.append((kernel, list(proto.input), list(proto.output)))

    def _check_supported(self, graph) -> None:
        missing = [n for n in graph.node if n.domain not in ("", "ai.onnx")
                   or (n.op_type not in _CONVERTERS and n.op_type != "Constant")]
        if missing:
            listed = ", ".join(f"{n.op_type if n.domain in ('', 'ai.onnx') else n.domain + '.' + n.op_type} "
                               f"(node {n.name!r}, opset {self.opset})" for n in missing[:10])
            raise NotImplementedError(
                f"torch peer: no PyTorch conversion for ONNX op(s) {listed}"
                f"{' ...' if len(missing) > 10 else ''}; supported: {', '.join(supported_ops())}")

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise TypeError(f"the model takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                            f"got {len(inputs)}")
        env = {name: getattr(self, attr) for name, attr in self._buffers_of.items()}
        env.update(zip(self.input_names, (_layout(x, self.channels_last) for x in inputs)))
        for kernel, ins, outs in self._steps:
            result = kernel([env[n] if n else None for n in ins])
            if not isinstance(result, (tuple, list)):
                result = (result,)
            for name, value in zip(outs, result):
                if name:
                    env[name] = value
        return tuple(env[n] for n in self.output_names)


def _constant_value(proto) -> np.ndarray:
    """The value of an ONNX Constant node (any of its value attributes)."""
    from onnx import helper, numpy_helper
    (attr,) = proto.attribute
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    if attr.name in ("value_float", "value_floats"):
        return np.array(value, np.float32)
    if attr.name in ("value_int", "value_ints"):
        return np.array(value, np.int64)
    raise NotImplementedError(f"torch peer: Constant node {proto.name!r} with attribute {attr.name}")


def _attr_value(helper, attr):
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return tuple(v.decode() if isinstance(v, bytes) else v for v in value)
    return value


def _layout(t: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """4-d tensors in NHWC memory order when asked (the values and shapes stay NCHW); oneDNN's
    convolutions prefer it, which is why PyTorch's CPU tuning guide recommends it for CNNs."""
    return t.contiguous(memory_format=torch.channels_last) if channels_last and t.dim() == 4 else t


def to_torch(model, channels_last: bool = False) -> OnnxTorchModule:
    """The ONNX ModelProto as an eager torch.nn.Module in eval mode; with `channels_last`, 4-d
    weights are stored and 4-d inputs converted (on every call) to NHWC memory order."""
    return OnnxTorchModule(model, channels_last).eval()


# -- elementwise -----------------------------------------------------------------------------------
_UNARY = {"Relu": torch.relu, "Tanh": torch.tanh, "Erf": torch.erf, "Sigmoid": torch.sigmoid, "Sqrt": torch.sqrt,
          "Exp": torch.exp, "Log": torch.log, "Abs": torch.abs, "Neg": torch.neg, "Reciprocal": torch.reciprocal,
          "Not": torch.logical_not, "HardSwish": F.hardswish, "Identity": lambda x: x}
_BINARY = {"Add": torch.add, "Mul": torch.mul, "Sub": torch.sub, "Pow": torch.pow, "Equal": torch.eq,
           "Greater": torch.gt, "GreaterOrEqual": torch.ge, "Less": torch.lt, "LessOrEqual": torch.le,
           "And": torch.logical_and, "Or": torch.logical_or,
           # ONNX divides integers truncating, as C does
           "Div": lambda a, b: torch.div(a, b, rounding_mode="trunc") if not a.is_floating_point() else a / b}


@converter(*_UNARY)
def _unary(node: Node) -> Kernel:
    fn = _UNARY[node.op_type]
    return lambda xs: fn(xs[0])


@converter(*_BINARY)
def _binary(node: Node) -> Kernel:
    fn = _BINARY[node.op_type]          # NumPy broadcasting, as ONNX's multidirectional one
    return lambda xs: fn(xs[0], xs[1])


# -- matrix products -------------------------------------------------------------------------------
@converter("MatMul")
def _matmul(node: Node) -> Kernel:
    return lambda xs: torch.matmul(xs[0], xs[1])          # NumPy matmul semantics, as ONNX


@converter("Gemm")
def _gemm(node: Node) -> Kernel:
    """Y = alpha * A' B' + beta * C.  The exporter's case (transB=1, alpha=beta=1, C of length N)
    is torch.nn.functional.linear, which is what a torch.nn.Linear runs."""
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    trans_a, trans_b = int(node.attrs.get("transA", 0)), int(node.attrs.get("transB", 0))
    has_c = node.has_input(2)

    def product(a, b):
        a = a.t() if trans_a else a
        return F.linear(a, b) if trans_b else torch.matmul(a, b)

    if trans_b and alpha == 1.0 and (not has_c or beta == 1.0):
        if not has_c:
            return lambda xs: F.linear(xs[0].t() if trans_a else xs[0], xs[1])
        c = node.consts[2]
        if c is not None and c.ndim == 1:
            return lambda xs: F.linear(xs[0].t() if trans_a else xs[0], xs[1], xs[2])

    def general(xs):
        y = product(xs[0], xs[1])
        y = y * alpha if alpha != 1.0 else y
        if has_c:
            y = y + (xs[2] * beta if beta != 1.0 else xs[2])
        return y

    return general


# -- convolution and pooling -----------------------------------------------------------------------
def _spatial_pads(node: Node, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                  in_shape: Sequence[int]) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial axis, with ONNX's auto_pad resolved for this input shape."""
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    n = len(kernel)
    if auto_pad == "NOTSET":
        pads = list(node.attrs.get("pads", (0,) * (2 * n)))
        return [(int(pads[i]), int(pads[i + n])) for i in range(n)]
    if auto_pad == "VALID":
        return [(0, 0)] * n
    out = []
    for size, k, s, d in zip(in_shape, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        out.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    return out


def _static_pads(node: Node, kernel, strides, dilations) -> list[tuple[int, int]] | None:
    """The padding when it does not depend on the input shape (auto_pad NOTSET or VALID)."""
    if node.attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        return _spatial_pads(node, kernel, strides, dilations, ())
    return None


def _f_pad(pads: list[tuple[int, int]]) -> list[int]:
    """ONNX per-axis (begin, end) pairs as torch.nn.functional.pad's list (last axis first)."""
    flat: list[int] = []
    for begin, end in reversed(pads):
        flat += [begin, end]
    return flat


def _window(node: Node, w_shape_or_kernel: Sequence[int]):
    kernel = [int(k) for k in node.attrs.get("kernel_shape", w_shape_or_kernel)]
    n = len(kernel)
    strides = [int(s) for s in node.attrs.get("strides", (1,) * n)]
    dilations = [int(d) for d in node.attrs.get("dilations", (1,) * n)]
    return kernel, strides, dilations


_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


@converter("Conv")
def _conv(node: Node) -> Kernel:
    w = node.consts[1]
    kernel, strides, dilations = _window(node, w.shape[2:] if w is not None else ())
    if not kernel:
        node.unsupported("the kernel shape is neither an attribute nor a constant weight")
    conv = _CONV.get(len(kernel)) or node.unsupported(f"{len(kernel)}-d convolution")
    node.reject(auto_pad=_AUTO_PADS)
    group = int(node.attrs.get("group", 1))
    static = _static_pads(node, kernel, strides, dilations)

    def run(xs):
        x = xs[0]
        pads = static or _spatial_pads(node, kernel, strides, dilations, x.shape[2:])
        if all(b == e for b, e in pads):
            padding = [b for b, _ in pads]
        else:                                   # torch pads symmetrically; pad the rest by hand
            x, padding = F.pad(x, _f_pad(pads)), 0
        return conv(x, xs[1], xs[2] if len(xs) > 2 else None, strides, padding, dilations, group)

    return run


@converter("ConvTranspose")
def _conv_transpose(node: Node) -> Kernel:
    """ONNX pads crop the full transposed convolution, as torch's `padding` does when the two
    sides agree; unequal sides are cropped by slicing."""
    w = node.const(1, "weight")
    kernel, strides, dilations = _window(node, w.shape[2:])
    conv_t = _CONV_T.get(len(kernel)) or node.unsupported(f"{len(kernel)}-d transposed convolution")
    node.reject(auto_pad=("NOTSET", "VALID"))
    if "output_shape" in node.attrs:
        node.unsupported("attribute output_shape (give pads and output_padding instead)")
    n = len(kernel)
    pads = list(node.attrs.get("pads", (0,) * (2 * n))) if node.attrs.get("auto_pad", "NOTSET") == "NOTSET" \
        else [0] * (2 * n)
    begin, end = pads[:n], pads[n:]
    out_pad = [int(p) for p in node.attrs.get("output_padding", (0,) * n)]
    group = int(node.attrs.get("group", 1))
    if begin == end:
        return lambda xs: conv_t(xs[0], xs[1], xs[2] if len(xs) > 2 else None, strides, begin, out_pad,
                                 group, dilations)

    def cropped(xs):
        y = conv_t(xs[0], xs[1], xs[2] if len(xs) > 2 else None, strides, 0, out_pad, group, dilations)
        index = [slice(None), slice(None)] + [slice(b, y.shape[2 + i] - e) for i, (b, e) in enumerate(zip(begin, end))]
        return y[tuple(index)]

    return cropped


@converter("MaxPool")
def _max_pool(node: Node) -> Kernel:
    kernel, strides, dilations = _window(node, ())
    pool = _MAX_POOL.get(len(kernel)) or node.unsupported(f"{len(kernel)}-d pooling")
    node.reject(auto_pad=_AUTO_PADS)
    if node.has_output(1):
        node.unsupported("the Indices output")
    ceil = bool(node.attrs.get("ceil_mode", 0))     # torch's rule for the last window is ONNX's

    static = _static_pads(node, kernel, strides, dilations)

    def run(xs):
        x = xs[0]
        pads = static or _spatial_pads(node, kernel, strides, dilations, x.shape[2:])
        if all(b == e and 2 * b <= k for (b, e), k in zip(pads, kernel)):
            padding = [b for b, _ in pads]
        elif ceil:
            node.unsupported("ceil_mode with asymmetric padding")
        else:                                   # padded cells never win: pad with -inf by hand
            x, padding = F.pad(x, _f_pad(pads), value=float("-inf")), 0
        return pool(x, kernel, strides, padding, dilations, ceil_mode=ceil)

    return run


@converter("GlobalAveragePool")
def _global_average_pool(node: Node) -> Kernel:
    return lambda xs: torch.mean(xs[0], dim=list(range(2, xs[0].dim())), keepdim=True)


# -- normalization ---------------------------------------------------------------------------------
@converter("BatchNormalization")
def _batch_norm(node: Node) -> Kernel:
    """Inference batch norm with the running statistics (torch.jit.freeze folds it into a
    preceding convolution)."""
    node.reject(training_mode=(0,), spatial=(1,))
    if any(node.has_output(k) for k in (1, 2)):
        node.unsupported("the running-statistics outputs (training mode)")
    eps = float(node.attrs.get("epsilon", 1e-5))
    return lambda xs: F.batch_norm(xs[0], xs[3], xs[4], xs[1], xs[2], False, 0.0, eps)


@converter("LayerNormalization")
def _layer_norm(node: Node) -> Kernel:
    axis, eps = int(node.attrs.get("axis", -1)), float(node.attrs.get("epsilon", 1e-5))
    if node.has_output(1) or node.has_output(2):
        node.unsupported("the Mean and InvStdDev outputs")

    def run(xs):
        x, scale = xs[0], xs[1]
        bias = xs[2] if len(xs) > 2 else None
        shape = x.shape[axis % x.dim():]
        if scale.shape == shape and (bias is None or bias.shape == shape):
            return F.layer_norm(x, shape, scale, bias, eps)
        y = F.layer_norm(x, shape, None, None, eps) * scale      # scale/bias merely broadcastable
        return y + bias if bias is not None else y

    return run


@converter("Softmax")
def _softmax(node: Node) -> Kernel:
    if node.opset >= 13:
        axis = int(node.attrs.get("axis", -1))
        return lambda xs: F.softmax(xs[0], dim=axis)
    axis = int(node.attrs.get("axis", 1))

    def coerced(xs):                    # before opset 13: softmax over the axes from `axis` on
        x = xs[0]
        return F.softmax(x.reshape(int(np.prod(x.shape[:axis % x.dim()])), -1), dim=1).reshape(x.shape)

    return coerced


# -- recurrent -------------------------------------------------------------------------------------
_LSTM_DEFAULT_ACTIVATIONS = ("sigmoid", "tanh", "tanh")
# ONNX stacks the gates i, o, f, c; torch.nn.LSTM stacks i, f, g (= c), o.
_ONNX_TO_TORCH_GATES = (0, 2, 3, 1)


@converter("LSTM")
def _lstm(node: Node) -> Kernel:
    """ONNX LSTM -> torch.nn.LSTM with the weights re-stacked into torch's gate order.
    Y [seq, dirs, batch, hidden] is torch's output [seq, batch, dirs * hidden] unfolded."""
    node.reject(direction=("forward", "bidirectional"), layout=(0,), input_forget=(0,))
    if "clip" in node.attrs:
        node.unsupported("attribute clip")
    activations = tuple(a.lower() for a in node.attrs.get("activations", ()))
    if activations and activations not in (_LSTM_DEFAULT_ACTIVATIONS, _LSTM_DEFAULT_ACTIVATIONS * 2):
        node.unsupported(f"activations {node.attrs['activations']} (only Sigmoid, Tanh, Tanh)")
    for k, what in ((4, "sequence_lens"), (7, "peepholes (P)")):
        if node.has_input(k):
            node.unsupported(f"input {what}")
    w, r = node.const(1, "W"), node.const(2, "R")
    b = node.const(3, "B") if node.has_input(3) else None
    dirs, hidden = w.shape[0], int(node.attrs.get("hidden_size", r.shape[-1]))
    lstm = torch.nn.LSTM(w.shape[2], hidden, bidirectional=dirs == 2)

    def gates(m: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([np.split(m, 4)[g] for g in _ONNX_TO_TORCH_GATES]).copy())

    with torch.no_grad():
        for d in range(dirs):
            suffix = "_l0" + ("_reverse" if d == 1 else "")
            getattr(lstm, "weight_ih" + suffix).copy_(gates(w[d]))
            getattr(lstm, "weight_hh" + suffix).copy_(gates(r[d]))
            bias = b[d] if b is not None else np.zeros(8 * hidden, np.float32)
            getattr(lstm, "bias_ih" + suffix).copy_(gates(bias[:4 * hidden]))
            getattr(lstm, "bias_hh" + suffix).copy_(gates(bias[4 * hidden:]))
    lstm.requires_grad_(False)
    node.owner.add_module(f"lstm{len(list(node.owner.children()))}", lstm)

    def run(xs):
        x = xs[0]
        h0 = xs[5] if len(xs) > 5 else None
        c0 = xs[6] if len(xs) > 6 else None
        if h0 is None and c0 is None:
            y, (h, c) = lstm(x)
        else:
            zeros = x.new_zeros(dirs, x.shape[1], hidden)
            y, (h, c) = lstm(x, (h0 if h0 is not None else zeros, c0 if c0 is not None else zeros))
        y = y.reshape(x.shape[0], x.shape[1], dirs, hidden).transpose(1, 2)
        return y, h, c

    return run


# -- indexing and shapes ---------------------------------------------------------------------------
@converter("Gather")
def _gather(node: Node) -> Kernel:
    axis = int(node.attrs.get("axis", 0))

    def run(xs):
        data, idx = xs[0], xs[1]
        ax = axis % data.dim()
        idx = torch.where(idx < 0, idx + data.shape[ax], idx)          # ONNX allows negative indices
        picked = torch.index_select(data, ax, idx.reshape(-1))
        return picked.reshape(data.shape[:ax] + idx.shape + data.shape[ax + 1:])

    return run


@converter("Reshape")
def _reshape(node: Node) -> Kernel:
    const = node.consts[1]                  # a constant, or a shape computed at run time
    allow_zero = int(node.attrs.get("allowzero", 0))

    def run(xs):
        x = xs[0]                       # 0 copies the input's dimension unless allowzero is set
        target = [int(d) for d in (const if const is not None else xs[1].tolist())]
        return x.reshape([x.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(target)])

    return run


@converter("Flatten")
def _flatten(node: Node) -> Kernel:
    axis = int(node.attrs.get("axis", 1))

    def run(xs):
        x = xs[0]
        a = axis % x.dim() if axis < 0 else axis
        if a == 0:
            return x.reshape(1, -1)
        if a == x.dim():
            return x.reshape(-1, 1)
        return torch.flatten(torch.flatten(x, a), 0, a - 1)    # always 2-d: (d0..d[a-1], rest)

    return run


@converter("Transpose")
def _transpose(node: Node) -> Kernel:
    perm = node.attrs.get("perm")
    return lambda xs: xs[0].permute(list(perm) if perm is not None else list(range(xs[0].dim() - 1, -1, -1)))


@converter("Squeeze")
def _squeeze(node: Node) -> Kernel:
    if node.opset >= 13:
        axes = [int(a) for a in node.const(1, "axes")] if node.has_input(1) else None
    else:
        axes = list(node.attrs["axes"]) if "axes" in node.attrs else None
    if axes is None:
        return lambda xs: torch.squeeze(xs[0])
    return lambda xs: torch.squeeze(xs[0], tuple(axes))


# -- the rest of what exporters write (real models: shape arithmetic, masks, resizes, pads) --------
_DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32, 7: torch.int64,
           9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16}


def _int_list(node: Node, k: int, attr: str, xs=None) -> list[int] | None:
    """Input k (opsets that moved the attribute to an input) or attribute `attr` as ints; from
    the run-time tensor in `xs` when the input is computed; None when absent."""
    if node.has_input(k):
        const = node.consts[k]
        if const is None:
            return None if xs is None else [int(v) for v in xs[k].tolist()]
        return [int(v) for v in np.asarray(const).reshape(-1)]
    return [int(v) for v in node.attrs[attr]] if attr in node.attrs else None


@converter("Cast")
def _cast(node: Node) -> Kernel:
    dtype = _DTYPES.get(int(node.attrs["to"])) or node.unsupported(f"cast to ONNX type {node.attrs['to']}")
    return lambda xs: xs[0].to(dtype)


@converter("Concat")
def _concat(node: Node) -> Kernel:
    axis = int(node.attrs["axis"])
    return lambda xs: torch.cat([x for x in xs if x is not None], dim=axis)


@converter("Unsqueeze")
def _unsqueeze(node: Node) -> Kernel:
    def run(xs):
        x = xs[0]
        axes = _int_list(node, 1, "axes", xs)
        rank = x.dim() + len(axes)
        for a in sorted(a % rank for a in axes):
            x = x.unsqueeze(a)
        return x

    return run


@converter("Shape")
def _shape(node: Node) -> Kernel:
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return lambda xs: torch.tensor(xs[0].shape[start:end], dtype=torch.int64)


@converter("ConstantOfShape")
def _constant_of_shape(node: Node) -> Kernel:
    from onnx import numpy_helper
    value = numpy_helper.to_array(node.attrs["value"]) if "value" in node.attrs else np.zeros(1, np.float32)
    fill = torch.from_numpy(np.array(value).reshape(()))
    return lambda xs: fill.expand([int(d) for d in xs[0].tolist()]).clone()


@converter("Slice")
def _slice(node: Node) -> Kernel:
    def run(xs):
        x = xs[0]
        if node.opset < 10:
            starts, ends = list(node.attrs["starts"]), list(node.attrs["ends"])
            axes, steps = list(node.attrs.get("axes", range(len(starts)))), [1] * len(starts)
        else:
            starts, ends = _int_list(node, 1, "", xs), _int_list(node, 2, "", xs)
            axes = _int_list(node, 3, "", xs) or list(range(len(starts)))
            steps = _int_list(node, 4, "", xs) or [1] * len(starts)
        for a, b, e, st in zip(axes, starts, ends, steps):
            a, n = a % x.dim(), x.shape[a % x.dim()]
            b, e = b + n if b < 0 else b, e + n if e < 0 else e
            if st > 0:
                picked = range(max(0, min(n, b)), max(0, min(n, e)), st)
            elif st < 0:                # ONNX clamps a backward slice to [n - 1, -1]
                picked = range(max(-1, min(n - 1, b)), max(-1, min(n - 1, e)), st)
            else:
                node.unsupported("a step of 0")
            x = torch.index_select(x, a, torch.tensor(list(picked), dtype=torch.int64))
        return x

    return run


@converter("Split")
def _split(node: Node) -> Kernel:
    axis, count = int(node.attrs.get("axis", 0)), len(node.outputs)

    def run(xs):
        x = xs[0]
        sizes = _int_list(node, 1, "split", xs)
        if sizes is None:
            n = x.shape[axis]
            each = -(-n // count)
            sizes = [min(each, n - k * each) for k in range(count)]
        return torch.split(x, sizes, dim=axis)

    return run


@converter("Expand")
def _expand(node: Node) -> Kernel:
    def run(xs):                        # bidirectional broadcasting, as NumPy's
        return xs[0].expand(torch.broadcast_shapes(xs[0].shape, tuple(int(d) for d in xs[1].tolist())))

    return run


@converter("Where")
def _where(node: Node) -> Kernel:
    return lambda xs: torch.where(xs[0], xs[1], xs[2])


@converter("Clip")
def _clip(node: Node) -> Kernel:
    def run(xs):
        if node.opset < 11:
            lo, hi = node.attrs.get("min"), node.attrs.get("max")
        else:
            lo = xs[1] if len(xs) > 1 and xs[1] is not None else None
            hi = xs[2] if len(xs) > 2 and xs[2] is not None else None
        return torch.clamp(xs[0], lo, hi)

    return run


@converter("HardSigmoid")
def _hard_sigmoid(node: Node) -> Kernel:
    alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
    return lambda xs: torch.clamp(xs[0] * alpha + beta, 0.0, 1.0)


@converter("Gelu")
def _gelu(node: Node) -> Kernel:
    approximate = node.attrs.get("approximate", "none")
    return lambda xs: F.gelu(xs[0], approximate=approximate)


@converter("LogSoftmax")
def _log_softmax(node: Node) -> Kernel:
    if node.opset < 13:
        node.unsupported("opset below 13 (softmax over flattened axes)")
    axis = int(node.attrs.get("axis", -1))
    return lambda xs: F.log_softmax(xs[0], dim=axis)


@converter("ReduceMean")
def _reduce_mean(node: Node) -> Kernel:
    keep = bool(node.attrs.get("keepdims", 1))

    def run(xs):
        axes = _int_list(node, 1, "axes", xs) if node.opset >= 18 else node.attrs.get("axes")
        if not axes:
            return torch.mean(xs[0], dim=list(range(xs[0].dim())), keepdim=keep)
        return torch.mean(xs[0], dim=[int(a) for a in axes], keepdim=keep)

    return run


@converter("AveragePool")
def _average_pool(node: Node) -> Kernel:
    kernel, strides, _ = _window(node, ())
    node.reject(auto_pad=("NOTSET", "VALID"))
    pads = list(node.attrs.get("pads", (0,) * (2 * len(kernel))))
    n = len(kernel)
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    if pads[:n] != pads[n:] or any(2 * p > k for p, k in zip(pads[:n], kernel)):
        node.unsupported(f"pads {pads} (only symmetric ones up to half the kernel)")
    include = bool(node.attrs.get("count_include_pad", 0))
    ceil = bool(node.attrs.get("ceil_mode", 0))
    return lambda xs: pool(xs[0], kernel, strides, pads[:n], ceil, include)


@converter("Pad")
def _pad(node: Node) -> Kernel:
    mode = node.attrs.get("mode", "constant")
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}
    if mode not in modes:
        node.unsupported(f"mode {mode!r}")
    if node.has_input(3):
        node.unsupported("the axes input")

    def run(xs):
        x = xs[0]
        pads = _int_list(node, 1, "pads", xs) if node.opset >= 11 else list(node.attrs["pads"])
        r = x.dim()
        pairs = list(zip(pads[:r], pads[r:]))
        while pairs and pairs[0] == (0, 0) and mode != "constant":
            pairs.pop(0)                # reflect / replicate pad the trailing axes only
        value = 0.0
        if node.opset >= 11 and node.has_input(2):
            value = float(xs[2].reshape(-1)[0]) if xs[2] is not None else 0.0
        elif "value" in node.attrs:
            value = float(node.attrs["value"])
        flat = _f_pad(pairs)
        return F.pad(x, flat, mode=modes[mode], value=value) if mode == "constant" else F.pad(x, flat, mode=modes[mode])

    return run


@converter("Resize")
def _resize(node: Node) -> Kernel:
    mode = node.attrs.get("mode", "nearest")
    ctm = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = node.attrs.get("nearest_mode", "round_prefer_floor")
    if mode == "nearest" and not (ctm == "asymmetric" and nearest == "floor"):
        node.unsupported(f"nearest with {ctm} and {nearest} (only asymmetric and floor, as torch's nearest)")
    if mode == "linear" and ctm not in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        node.unsupported(f"linear with {ctm}")
    if mode not in ("nearest", "linear"):
        node.unsupported(f"mode {mode!r}")
    if node.opset < 11:
        node.unsupported("opset below 11")

    def run(xs):
        x = xs[0]
        sizes = _int_list(node, 3, "", xs) if node.has_input(3) else None
        spatial = {1: "linear", 2: "bilinear", 3: "trilinear"}[x.dim() - 2]
        kwargs = {"mode": "nearest"} if mode == "nearest" else \
            {"mode": spatial, "align_corners": ctm == "align_corners"}
        if sizes is not None:
            return F.interpolate(x, size=sizes[2:], **kwargs)
        scales = [float(v) for v in xs[2].tolist()]
        return F.interpolate(x, scale_factor=scales[2:], recompute_scale_factor=False, **kwargs)

    return run


@converter("DepthToSpace")
def _depth_to_space(node: Node) -> Kernel:
    b, mode = int(node.attrs["blocksize"]), node.attrs.get("mode", "DCR")

    def run(xs):
        x = xs[0]
        if mode == "CRD":
            return F.pixel_shuffle(x, b)
        n, c, h, w = x.shape
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
        return y.reshape(n, c // (b * b), h * b, w * b)

    return run


@converter("InstanceNormalization")
def _instance_norm(node: Node) -> Kernel:
    eps = float(node.attrs.get("epsilon", 1e-5))
    return lambda xs: F.instance_norm(xs[0], weight=xs[1], bias=xs[2], eps=eps)


# -- making it fast --------------------------------------------------------------------------------
# How the module runs: eager, or traced with the example inputs and then frozen (weights and
# shapes become constants; batch norm folds into convolutions) or optimized for inference (freeze
# plus oneDNN layouts for convolutions).  Each also in NHWC memory order ("+channels_last") when
# the model has 4-d tensors.
MODES = ("eager", "jit.freeze", "jit.optimize_for_inference")
CHANNELS_LAST = "+channels_last"


def modes_for(model) -> list[str]:
    """MODES, plus their channels_last twins when an input or initializer of `model` is 4-d."""
    graph = model.graph
    four_d = any(len(t.dims) == 4 for t in graph.initializer) or \
        any(len(i.type.tensor_type.shape.dim) == 4 for i in graph.input)
    return list(MODES) + ([m + CHANNELS_LAST for m in MODES] if four_d else [])


@dataclass
class Peer:
    """A runnable variant of the model and its mode, e.g. "jit.freeze+channels_last"; calls run
    under torch.inference_mode()."""
    fn: Callable
    mode: str
    timings_ms: dict = field(default_factory=dict)     # mode -> median ms when `fastest` chose

    def __call__(self, *inputs):
        with torch.inference_mode():
            return self.fn(*inputs)


def variant(model, inputs: Sequence, mode: str) -> Callable:
    """The ONNX model in PyTorch, run the way `mode` says (one of `modes_for(model)`)."""
    base = mode.removesuffix(CHANNELS_LAST)
    if base not in MODES:
        raise ValueError(f"unknown torch peer mode {mode!r}; choose from {', '.join(modes_for(model))}")
    return _run_as(to_torch(model, channels_last=mode.endswith(CHANNELS_LAST)), inputs, base)


def _run_as(module: torch.nn.Module, inputs: Sequence, base: str) -> Callable:
    """`module` itself (eager), or traced and frozen (jit.freeze), or frozen and optimized for
    inference (jit.optimize_for_inference)."""
    if base == "eager":
        return module
    with torch.no_grad(), warnings.catch_warnings():
        # Tracing under no_grad, not inference_mode: inference tensors must not become constants.
        # The trace is specialized to these input shapes on purpose (the benchmark's), so its
        # warnings about shape-dependent Python values, and TorchScript's deprecation notice
        # (torch.compile is the successor; TorchScript is still what ships in torch), are noise here.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(module, tuple(inputs), check_trace=False).eval()
        frozen = torch.jit.freeze(traced)
        return frozen if base == "jit.freeze" else torch.jit.optimize_for_inference(frozen)


@dataclass
class Variants:
    """The modes that built and agree with the eager module, the inputs (graph order) they were
    built for, and why the other modes were left out."""
    fns: dict
    inputs: list
    rejected: dict


def variants(model, feeds: dict, modes: Sequence[str] | None = None, rtol: float = 1e-4,
             atol: float = 1e-4) -> Variants:
    """Build each mode (default: `modes_for(model)`) for the inputs `feeds` (name -> array) and
    check it against the eager module.  A mode that fails to build or run, or disagrees, is left
    out with the reason (TorchScript passes are not guaranteed to preserve every graph)."""
    reference = to_torch(model)
    inputs = [torch.from_numpy(np.asarray(feeds[n])) for n in reference.input_names]
    return _checked_variants(reference, lambda mode: variant(model, inputs, mode), inputs,
                             modes or modes_for(model), rtol, atol)


def _checked_variants(reference: Callable, build: Callable[[str], Callable], inputs: list, modes: Sequence[str],
                      rtol: float, atol: float) -> Variants:
    """Build each mode with `build(mode)` and keep those that run and agree with `reference`."""
    with torch.inference_mode():
        expected = reference(*inputs)
    fns, rejected = {}, {}
    for mode in modes:
        try:
            fn = build(mode)
            with torch.inference_mode():
                got = fn(*inputs)
                got = fn(*inputs)       # the second run takes TorchScript's optimized plan
        except Exception as exc:        # noqa: BLE001 - any failure only removes this mode
            rejected[mode] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            continue
        got = got if isinstance(got, tuple) else (got,)
        bad = [k for k, (a, b) in enumerate(zip(got, expected)) if not torch.allclose(a, b, rtol=rtol, atol=atol)]
        if len(got) != len(expected) or bad:
            rejected[mode] = f"outputs {bad} differ from eager beyond rtol={rtol}, atol={atol}"
            continue
        fns[mode] = fn
    return Variants(fns, inputs, rejected)


class _UserModule(torch.nn.Module):
    """A user's module with the peer's calling convention: outputs as a tuple and, in
    channels_last mode, 4-d inputs converted to NHWC memory order (the module's weights too)."""

    def __init__(self, module: torch.nn.Module, channels_last: bool):
        super().__init__()
        self.module, self.channels_last = module, channels_last
        if channels_last:
            self.module = copy.deepcopy(module).to(memory_format=torch.channels_last)

    def forward(self, *inputs):
        if self.channels_last:
            inputs = tuple(_layout(x, True) if x.dim() == 4 and x.is_floating_point() else x for x in inputs)
        out = self.module(*inputs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def module_variants(module: torch.nn.Module, inputs: Sequence[np.ndarray], modes: Sequence[str] | None = None,
                    rtol: float = 1e-4, atol: float = 1e-4) -> Variants:
    """`variants` for a torch.nn.Module the user wrote (benchmarks/exports/models.py) instead of
    an ONNX graph: the same modes, channels_last twins when a weight or input is 4-d, each
    checked against the module in eager mode.  `inputs` in the module's argument order."""
    module = module.eval()
    tensors = [torch.from_numpy(np.asarray(x)) for x in inputs]
    four_d = any(p.dim() == 4 for p in module.parameters()) or any(t.dim() == 4 for t in tensors)
    wanted = modes or list(MODES) + ([m + CHANNELS_LAST for m in MODES] if four_d else [])

    def build(mode: str) -> Callable:
        base = mode.removesuffix(CHANNELS_LAST)
        if base not in MODES:
            raise ValueError(f"unknown torch peer mode {mode!r}; choose from {', '.join(wanted)}")
        return _run_as(_UserModule(module, mode.endswith(CHANNELS_LAST)), tensors, base)

    return _checked_variants(_UserModule(module, False), build, tensors, wanted, rtol, atol)


def _median_ms(fn: Callable, inputs: Sequence, repeat: int, warmup_s: float) -> float:
    with torch.inference_mode():
        for _ in range(3):              # the TorchScript profiling executor optimizes after 2 runs
            fn(*inputs)
        end = time.perf_counter() + warmup_s
        while time.perf_counter() < end:
            fn(*inputs)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def fastest(found: Variants, rounds: int = 3, repeat: int = 5, warmup_s: float = 0.02) -> Peer:
    """The quickest of the working variants at the current torch.get_num_threads() (the choice
    can differ between thread counts, so call this once per setting).  The variants take turns
    for `rounds` rounds, so that a burst of load on the machine does not decide alone."""
    if not found.fns:
        raise RuntimeError(f"torch peer: no mode works: {found.rejected}")
    samples: dict[str, list[float]] = {mode: [] for mode in found.fns}
    for _ in range(rounds):
        for mode, fn in found.fns.items():
            samples[mode].append(_median_ms(fn, found.inputs, repeat, warmup_s))
    timings = {mode: statistics.median(ms) for mode, ms in samples.items()}
    best = min(timings, key=timings.get)
    return Peer(found.fns[best], best, timings)
