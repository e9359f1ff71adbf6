"""Random PyTorch modules for differential testing of the PyTorch paths: seeded nn.Modules that
combine what users write (convs of every kind, norms, pools, interpolation, slicing and
concatenation, permutes into nn.Linear, attention through scaled_dot_product_attention, LSTMs
and GRUs, in-place activations, selections whose size only the data gives: x[mask], nonzero,
masked_select; slice assignments, masked updates, max/min over a dim, scatter_add), run through `from_torch` (torch.export) or
`torch.compile(backend="tensorforge")` and compared with eager PyTorch.

    module, args = random_module(seed)        # torch.nn.Module in eval mode, (input tensor,)
    python -m tensorforge.testing.random_torch --seeds 0:100 [--compile [--capture-dynamic]] [--dynamic]

The module is a list of steps that `forward` interprets: each step names an op, the values it
reads (by index into the values computed so far) and its layers (held in an nn.ModuleList), so
the same seed rebuilds the same module.  Generation keeps the shapes of the values, as
random_models.py does for ONNX graphs.  `--dynamic` marks the batch dimension dynamic
(torch.export.Dim) and calls the compiled model with batches 3, 1 and 5.  Through
torch.compile, a graph the backend leaves to eager PyTorch fails the seed; `--capture-dynamic`
keeps the selections in dynamo's graphs (capture_dynamic_output_shape_ops) instead of breaking
the graph around them.

Needs the [torch] extra.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .random_models import campaign

RTOL = 1e-4
ATOL = 1e-4       # times max(1, max |eager|)
BATCHES = (3, 1, 5)


class _Gen:
    """The module under construction: its steps, layers and the shapes of its values."""

    def __init__(self, seed: int):
        import torch
        self.rng = np.random.default_rng(seed)
        self.torch = torch
        self.steps: list[tuple] = []        # (op, input indices, layer index or None, extra)
        self.layers: list = []
        self.shapes: list[tuple] = []

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def layer(self, module) -> int:
        self.layers.append(module)
        return len(self.layers) - 1

    def add(self, op: str, inputs: list[int], shape: tuple, layer: int | None = None, extra=None) -> int:
        self.steps.append((op, tuple(inputs), layer, extra))
        self.shapes.append(tuple(int(d) for d in shape))
        return len(self.shapes) - 1

    def pick(self) -> int:
        if self.rng.random() < 0.6:
            return len(self.shapes) - 1
        return int(self.rng.integers(len(self.shapes)))


def _conv_out(size: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


# ---- steps on images (N, C, H, W) ---------------------------------------------------------------

def _conv(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n, c, h, w = g.shapes[v]
    k = g.choice([1, 3, 3, 5] if min(h, w) >= 5 else [1, 3])
    s = g.choice([1, 1, 2])
    d = 2 if k == 3 and g.rng.random() < 0.15 else 1
    p = g.choice([0, d * (k - 1) // 2, d * (k - 1) // 2])
    oh, ow = _conv_out(h, k, s, p, d), _conv_out(w, k, s, p, d)
    if oh < 1 or ow < 1:
        return None
    groups = c if g.rng.random() < 0.2 else 1
    cout = c * g.choice([1, 2]) if groups > 1 else g.choice([3, 8, 16, 17, 32])
    layer = g.layer(nn.Conv2d(c, cout, k, stride=s, padding=p, dilation=d, groups=groups,
                              bias=bool(g.rng.random() < 0.7)))
    return g.add("layer", [v], (n, cout, oh, ow), layer)


def _conv_transpose(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n, c, h, w = g.shapes[v]
    if h * w > 24 * 24:
        return None
    k, s, p, op = g.choice([(2, 2, 0, 0), (4, 2, 1, 0), (3, 2, 1, 1), (3, 1, 1, 0)])
    cout = g.choice([3, 8, 16])
    layer = g.layer(nn.ConvTranspose2d(c, cout, k, stride=s, padding=p, output_padding=op))
    return g.add("layer", [v], (n, cout, s * (h - 1) + k - 2 * p + op, s * (w - 1) + k - 2 * p + op), layer)


def _norm(g: _Gen, v: int) -> int:
    nn = g.torch.nn
    n, c, h, w = g.shapes[v]
    kind = g.choice(["batch", "batch", "group", "instance", "layer"])
    if kind in ("group", "instance") and h * w == 1:      # PyTorch refuses a norm over one element
        kind = "batch"
    if kind == "batch":
        bn = nn.BatchNorm2d(c)
        with g.torch.no_grad():
            bn.running_mean.copy_(g.torch.tensor(0.1 * g.rng.standard_normal(c), dtype=g.torch.float32))
            bn.running_var.copy_(g.torch.tensor(0.5 + g.rng.random(c), dtype=g.torch.float32))
            bn.weight.copy_(g.torch.tensor(1 + 0.2 * g.rng.standard_normal(c), dtype=g.torch.float32))
            bn.bias.copy_(g.torch.tensor(0.1 * g.rng.standard_normal(c), dtype=g.torch.float32))
        module = bn
    elif kind == "group" and c % 2 == 0:
        module = nn.GroupNorm(g.choice([x for x in (1, 2, 4) if c % x == 0]), c)
    elif kind == "instance":
        module = nn.InstanceNorm2d(c, affine=True)
    else:
        module = nn.LayerNorm(w)
    return g.add("layer", [v], (n, c, h, w), g.layer(module))


def _pool(g: _Gen, v: int) -> int | None:
    n, c, h, w = g.shapes[v]
    kind = g.choice(["max", "avg", "adaptive", "mean"])
    if kind == "adaptive":
        size = g.choice([1, 2])
        if min(h, w) < size:
            return None
        return g.add("adaptive_avg_pool2d", [v], (n, c, size, size), extra=size)
    if kind == "mean":
        return g.add("mean_hw", [v], (n, c, 1, 1))
    k = g.choice([2, 3])
    s = g.choice([1, 2])
    p = k // 2 if k == 3 and g.rng.random() < 0.5 else 0
    oh, ow = _conv_out(h, k, s, p), _conv_out(w, k, s, p)
    if oh < 1 or ow < 1:
        return None
    return g.add(f"{kind}_pool2d", [v], (n, c, oh, ow), extra=(k, s, p))


def _interpolate(g: _Gen, v: int) -> int | None:
    n, c, h, w = g.shapes[v]
    if h * w > 20 * 20:
        return None
    mode = g.choice(["nearest", "bilinear", "bilinear-ac"])
    return g.add("interpolate", [v], (n, c, 2 * h, 2 * w), extra=mode)


def _cat(g: _Gen, v: int) -> int | None:
    shape = g.shapes[v]
    others = [k for k, s in enumerate(g.shapes) if len(s) == 4 and s[0] == shape[0] and s[2:] == shape[2:]]
    o = g.choice(others)
    return g.add("cat", [v, o], (shape[0], shape[1] + g.shapes[o][1], *shape[2:]))


def _slice(g: _Gen, v: int) -> int | None:
    n, c, h, w = g.shapes[v]
    if c >= 2 and g.rng.random() < 0.5:
        return g.add("chunk_first", [v], (n, c - c // 2, h, w))      # x.chunk(2, 1)[0]
    if h < 3:
        return None
    return g.add("rows", [v], (n, c, h - 2, w))                   # x[:, :, 1:-1]


def _se(g: _Gen, v: int) -> int:
    nn = g.torch.nn
    n, c, h, w = g.shapes[v]
    mid = max(1, c // 4)
    gate = g.layer(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, mid, 1), nn.ReLU(inplace=True),
                                 nn.Conv2d(mid, c, 1), nn.Hardsigmoid()))
    return g.add("gate", [v], (n, c, h, w), gate)


def _channels_last_linear(g: _Gen, v: int) -> int:
    nn = g.torch.nn
    n, c, h, w = g.shapes[v]
    units = g.choice([8, 16, 24])
    return g.add("permuted_linear", [v], (n, units, h, w), g.layer(nn.Linear(c, units)))


def _flatten_linear(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n = g.shapes[v][0]
    size = int(np.prod(g.shapes[v][1:]))
    if size > 4096:
        return None
    units = g.choice([10, 32])
    return g.add("flatten_linear", [v], (n, units), g.layer(nn.Linear(size, units)))


def _to_tokens(g: _Gen, v: int) -> int:
    n, c, h, w = g.shapes[v]
    return g.add("tokens", [v], (n, h * w, c))            # x.flatten(2).transpose(1, 2)


def _pixel_shuffle(g: _Gen, v: int) -> int | None:
    n, c, h, w = g.shapes[v]
    if c % 4:
        return None
    return g.add("pixel_shuffle", [v], (n, c // 4, 2 * h, 2 * w))


def _pad(g: _Gen, v: int) -> int:
    n, c, h, w = g.shapes[v]
    pads = tuple(int(x) for x in g.rng.integers(0, 3, 4))
    mode = g.choice(["constant", "reflect", "replicate"])
    if mode == "reflect" and (max(pads[:2]) >= w or max(pads[2:]) >= h):
        mode = "constant"
    return g.add("pad", [v], (n, c, h + pads[2] + pads[3], w + pads[0] + pads[1]), extra=(pads, mode))


def _adaptive(g: _Gen, v: int) -> int | None:
    """Adaptive average or max pooling to a size that need not divide the input's."""
    n, c, h, w = g.shapes[v]
    oh, ow = int(g.rng.integers(1, min(h, 7) + 1)), int(g.rng.integers(1, min(w, 7) + 1))
    return g.add(g.choice(["adaptive_avg", "adaptive_max"]), [v], (n, c, oh, ow), extra=(oh, ow))


def _roll(g: _Gen, v: int) -> int:
    """torch.roll over the rows and columns (Swin's shifted windows)."""
    n, c, h, w = g.shapes[v]
    return g.add("roll", [v], (n, c, h, w), extra=(int(g.rng.integers(1, h + 1)), int(g.rng.integers(1, w + 1))))


def _stats_norm(g: _Gen, v: int) -> int:
    """Normalization written by hand: (x - mean) / std over the channels, or F.normalize."""
    return g.add(g.choice(["standardize", "l2_normalize"]), [v], g.shapes[v])


# ---- steps on any rank ---------------------------------------------------------------------------

_ACTIVATIONS = ["relu", "relu_", "gelu", "gelu_tanh", "silu", "hardswish", "leaky_relu", "elu", "sigmoid", "tanh",
                "softplus", "mish", "clamp", "selu", "relu6", "logsigmoid"]


def _activation(g: _Gen, v: int) -> int:
    return g.add("act", [v], g.shapes[v], extra=g.choice(_ACTIVATIONS))


def _residual(g: _Gen, v: int) -> int | None:
    same = [k for k, s in enumerate(g.shapes) if s == g.shapes[v] and k != v]
    if not same:
        return g.add("scale_shift", [v], g.shapes[v], extra=(float(g.rng.uniform(0.5, 1.5)), float(g.rng.normal())))
    return g.add(g.choice(["add", "mul", "sub"]), [v, g.choice(same)], g.shapes[v])


def _softmax(g: _Gen, v: int) -> int:
    return g.add("softmax", [v], g.shapes[v], extra=int(g.rng.integers(1, len(g.shapes[v]))))


def _glu_prelu(g: _Gen, v: int) -> int | None:
    shape = g.shapes[v]
    if g.rng.random() < 0.5 and shape[1] % 2 == 0:
        return g.add("glu", [v], (shape[0], shape[1] // 2, *shape[2:]))
    return g.add("layer", [v], shape, g.layer(g.torch.nn.PReLU(shape[1])))


# ---- steps on sequences (N, T, D) ---------------------------------------------------------------

def _linear(g: _Gen, v: int) -> int:
    nn = g.torch.nn
    n, t, d = g.shapes[v]
    units = g.choice([16, 32, 48])
    return g.add("layer", [v], (n, t, units), g.layer(nn.Linear(d, units, bias=bool(g.rng.random() < 0.8))))


def _layer_norm(g: _Gen, v: int) -> int:
    n, t, d = g.shapes[v]
    return g.add("layer", [v], (n, t, d), g.layer(g.torch.nn.LayerNorm(d)))


def _attention(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n, t, d = g.shapes[v]
    heads = g.choice([h for h in (1, 2, 4) if d % h == 0])
    if g.rng.random() < 0.5:
        return g.add("mha", [v], (n, t, d), g.layer(nn.MultiheadAttention(d, heads, batch_first=True)))
    return g.add("sdpa", [v], (n, t, d), g.layer(nn.Linear(d, 3 * d)), extra=(heads, bool(g.rng.random() < 0.3)))


def _recurrent(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n, t, d = g.shapes[v]
    if t > 48:
        return None
    hidden = g.choice([8, 16, 32])
    bidir = bool(g.rng.random() < 0.3)
    cls = g.choice([nn.LSTM, nn.GRU])
    layers = g.choice([1, 1, 2])
    return g.add("rnn", [v], (n, t, hidden * (2 if bidir else 1)),
                 g.layer(cls(d, hidden, num_layers=layers, batch_first=True, bidirectional=bidir)))


def _conv1d(g: _Gen, v: int) -> int | None:
    nn = g.torch.nn
    n, t, d = g.shapes[v]
    k = g.choice([1, 3, 5])
    if t < k:
        return None
    units = g.choice([16, 32])
    return g.add("conv1d_tokens", [v], (n, t, units), g.layer(nn.Conv1d(d, units, k, padding=k // 2)))


def _rms_norm(g: _Gen, v: int) -> int:
    """x * rsqrt(mean(x^2) + eps) * weight, as LLaMA-style models write it."""
    n, t, d = g.shapes[v]
    weight = g.layer(g.torch.nn.Linear(d, d, bias=False))     # only its diagonal is used, as a scale
    return g.add("rms_norm", [v], (n, t, d), weight)


def _topk_mean(g: _Gen, v: int) -> int | None:
    n, t, d = g.shapes[v]
    k = int(g.rng.integers(1, min(d, 8) + 1))
    return g.add("topk_mean", [v], (n, t, 1), extra=k)


def _masked_attention(g: _Gen, v: int) -> int:
    """Attention with a causal mask from torch.triu and masked_fill, scores by einsum."""
    n, t, d = g.shapes[v]
    return g.add("masked_attention", [v], (n, t, d), g.layer(g.torch.nn.Linear(d, 3 * d)))


def _cumsum(g: _Gen, v: int) -> int:
    return g.add("cumsum", [v], g.shapes[v], extra=int(g.rng.integers(1, len(g.shapes[v]))))


def _masked_rows(g: _Gen, v: int) -> int:
    """The tokens whose first feature is above 0, through a linear layer, summed, added back to
    every token: x[mask] (a count only the data gives) feeding weights, then a reduction."""
    n, t, d = g.shapes[v]
    return g.add("masked_rows", [v], (n, t, d), g.layer(g.torch.nn.Linear(d, d)))


def _masked_select_sum(g: _Gen, v: int) -> int:
    """x + 0.01 * the sum of the elements above 1 (torch.masked_select)."""
    return g.add("masked_select_sum", [v], g.shapes[v])


def _nonzero_gather(g: _Gen, v: int) -> int:
    """The positions where the first channel is positive (torch.nonzero), every channel gathered
    there and averaged, added back as a per-channel shift."""
    return g.add("nonzero_gather", [v], g.shapes[v])


def _slice_assign(g: _Gen, v: int) -> int | None:
    """y[:, :, a:b] = x[:, :, :b - a] * 0.5 on a copy (slice_scatter after functionalization)."""
    size = g.shapes[v][2]
    if size < 3:
        return None
    a = int(g.rng.integers(0, size - 1))
    b = int(g.rng.integers(a + 1, size + 1))
    return g.add("slice_assign", [v], g.shapes[v], extra=(a, b))


def _masked_update(g: _Gen, v: int) -> int:
    """y[y > 1] += 0.5 on a copy: a masked update of the selected values (a where)."""
    return g.add("masked_update", [v], g.shapes[v])


def _max_center(g: _Gen, v: int) -> int:
    """x - x.max(-1, keepdim=True).values + 0.1 * x.min(-1).values[..., None] (max.dim, min.dim)."""
    return g.add("max_center", [v], g.shapes[v])


def _scatter_add(g: _Gen, v: int) -> int:
    """zeros.scatter_add(-1, idx, x) with repeated positions in idx, plus x."""
    d = g.shapes[v][-1]
    return g.add("scatter_add", [v], g.shapes[v], extra=tuple(int(i) for i in g.rng.integers(0, d, d)))


_IMAGE = [(_conv, 5), (_conv_transpose, 1), (_norm, 2), (_pool, 2), (_interpolate, 1), (_cat, 1), (_slice, 1),
          (_se, 1), (_channels_last_linear, 1), (_flatten_linear, 1), (_to_tokens, 1), (_pixel_shuffle, 1), (_pad, 1),
          (_activation, 3), (_residual, 2), (_softmax, 1), (_adaptive, 1), (_roll, 1), (_stats_norm, 1), (_glu_prelu, 1),
          (_masked_select_sum, 0.5), (_nonzero_gather, 0.5), (_slice_assign, 0.5), (_masked_update, 0.5)]
_SEQUENCE = [(_linear, 4), (_layer_norm, 2), (_attention, 2), (_recurrent, 1), (_conv1d, 1), (_activation, 3),
             (_residual, 2), (_softmax, 1), (_cumsum, 1), (_rms_norm, 1), (_topk_mean, 1), (_masked_attention, 1),
             (_glu_prelu, 1), (_masked_rows, 1), (_masked_select_sum, 0.5), (_max_center, 0.5),
             (_scatter_add, 0.5), (_masked_update, 0.5)]
_OTHER = [(_activation, 3), (_residual, 2), (_softmax, 1)]


def _run_step(torch, layers, op: str, xs: list, layer: int | None, extra):
    """The value of one step (forward's interpreter)."""
    F = torch.nn.functional
    x = xs[0]
    if op == "layer":
        return layers[layer](x)
    if op == "act":
        return {"relu": F.relu, "relu_": lambda t: torch.relu_(t.clone()), "gelu": F.gelu,
                "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "hardswish": F.hardswish,
                "leaky_relu": lambda t: F.leaky_relu(t, 0.1), "elu": F.elu, "sigmoid": torch.sigmoid,
                "tanh": torch.tanh, "softplus": F.softplus, "mish": F.mish,
                "clamp": lambda t: t.clamp(-1.0, 2.0), "selu": F.selu, "relu6": F.relu6,
                "logsigmoid": F.logsigmoid}[extra](x)
    if op in ("add", "mul", "sub"):
        return getattr(torch, op)(x, xs[1])
    if op == "scale_shift":
        return x * extra[0] + extra[1]
    if op == "softmax":
        return torch.softmax(x, dim=extra)
    if op == "adaptive_avg_pool2d":
        return F.adaptive_avg_pool2d(x, extra)
    if op == "mean_hw":
        return x.mean((2, 3), keepdim=True)
    if op == "max_pool2d":
        return F.max_pool2d(x, extra[0], extra[1], extra[2])
    if op == "avg_pool2d":
        return F.avg_pool2d(x, extra[0], extra[1], extra[2])
    if op == "interpolate":
        if extra == "nearest":
            return F.interpolate(x, scale_factor=2, mode="nearest")
        return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=extra == "bilinear-ac")
    if op == "cat":
        return torch.cat([x, xs[1]], dim=1)
    if op == "chunk_first":
        return x.chunk(2, dim=1)[0]
    if op == "rows":
        return x[:, :, 1:-1]
    if op == "gate":
        return x * layers[layer](x)
    if op == "permuted_linear":
        return layers[layer](x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
    if op == "flatten_linear":
        return layers[layer](x.flatten(1))
    if op == "tokens":
        return x.flatten(2).transpose(1, 2)
    if op == "pixel_shuffle":
        return F.pixel_shuffle(x, 2)
    if op == "pad":
        return F.pad(x, extra[0], mode=extra[1])
    if op == "mha":
        return layers[layer](x, x, x, need_weights=False)[0]
    if op == "sdpa":
        heads, causal = extra
        n, t, d = x.shape
        q, k, v = layers[layer](x).view(n, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return o.transpose(1, 2).reshape(n, t, d)
    if op == "rnn":
        return layers[layer](x)[0]
    if op == "conv1d_tokens":
        return layers[layer](x.transpose(1, 2)).transpose(1, 2)
    if op == "cumsum":
        return torch.cumsum(x, dim=extra)
    if op == "adaptive_avg":
        return F.adaptive_avg_pool2d(x, extra)
    if op == "adaptive_max":
        return F.adaptive_max_pool2d(x, extra)
    if op == "roll":
        return torch.roll(x, shifts=extra, dims=(2, 3))
    if op == "standardize":
        return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-3)
    if op == "l2_normalize":
        return F.normalize(x, dim=1)
    if op == "glu":
        return F.glu(x, dim=1)
    if op == "rms_norm":
        scale = torch.diagonal(layers[layer].weight)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * scale
    if op == "topk_mean":
        return x.topk(extra, dim=-1).values.mean(-1, keepdim=True)
    if op == "masked_attention":
        n, t, d = x.shape
        q, k, v = layers[layer](x).chunk(3, dim=-1)
        scores = torch.einsum("btd,bsd->bts", q, k) / (d ** 0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
    if op == "slice_assign":
        a, b = extra
        y = x.clone()
        y[:, :, a:b] = x[:, :, :b - a] * 0.5
        return y
    if op == "masked_update":
        y = x.clone()
        y[y > 1] += 0.5
        return y
    if op == "max_center":
        return x - x.max(-1, keepdim=True).values + 0.1 * x.min(-1).values[..., None]
    if op == "scatter_add":
        index = torch.tensor(extra).expand(x.shape)
        return x + torch.zeros_like(x).scatter_add(-1, index, x)
    if op == "masked_rows":
        # a feature itself, not a sum: a sum after a layer norm is 0 up to rounding, and which
        # side of 0 it falls on would differ between any two correct implementations
        rows = x[x[..., 0] > 0]
        return x + layers[layer](rows).relu().sum(0) * 0.1
    if op == "masked_select_sum":
        return x + 0.01 * torch.masked_select(x, x > 1).sum()
    if op == "nonzero_gather":
        where = torch.nonzero(x[0, 0] > 0)
        picked = x[:, :, where[:, 0], where[:, 1]]
        return x + 0.1 * picked.sum(-1)[..., None, None] / x.shape[2] / x.shape[3]
    raise ValueError(f"unknown step {op}")


def random_module(seed: int, steps: int | None = None):
    """(module in eval mode, (input tensor,)) from `seed`: an image (N, C, H, W) or a sequence
    (N, T, D) goes through 3 to 14 random steps; the module returns the last value and, sometimes,
    an earlier one too."""
    import torch
    g = _Gen(seed)
    torch.manual_seed(seed)
    if g.rng.random() < 0.7:
        shape: tuple = (int(g.choice([1, 2])), int(g.choice([3, 4, 8, 16])), int(g.rng.integers(6, 25)),
                        int(g.rng.integers(6, 25)))
    else:
        shape = (int(g.choice([1, 2])), int(g.choice([5, 16, 33])), int(g.choice([16, 32, 48])))
    g.shapes.append(shape)
    g.steps.append(("input", (), None, None))
    steps = int(g.rng.integers(3, 15)) if steps is None else steps
    done = tries = 0
    while done < steps and tries < 20 * steps:
        tries += 1
        v = g.pick()
        rank = len(g.shapes[v])
        if int(np.prod(g.shapes[v])) > 1 << 16:
            continue
        ops = _IMAGE if rank == 4 else _SEQUENCE if rank == 3 else _OTHER
        weights = np.array([w for _, w in ops], np.float64)
        fn = ops[int(g.rng.choice(len(ops), p=weights / weights.sum()))][0]
        if fn(g, v) is not None:
            done += 1
    outputs = [len(g.shapes) - 1]
    if len(g.shapes) > 2 and g.rng.random() < 0.3:
        outputs.insert(0, int(g.rng.integers(1, len(g.shapes) - 1)))
    module = _make_module(g.steps, g.layers, outputs).eval()
    x = torch.tensor(g.rng.standard_normal(shape), dtype=torch.float32)
    return module, (x,)


def _module_class():
    import torch

    class RandomModule(torch.nn.Module):
        """The steps of random_module, interpreted in forward."""

        def __init__(self, steps, layers, outputs):
            super().__init__()
            self.steps = steps
            self.layers = torch.nn.ModuleList(layers)
            self.outputs = outputs

        def forward(self, x):
            values = [x]
            for op, inputs, layer, extra in self.steps[1:]:
                values.append(_run_step(torch, self.layers, op, [values[k] for k in inputs], layer, extra))
            outs = tuple(values[k] for k in self.outputs)
            return outs if len(outs) > 1 else outs[0]

    return RandomModule


def _make_module(steps, layers, outputs):
    return _module_class()(steps, layers, outputs)


def describe(module) -> str:
    return " ".join(op if op != "layer" else type(module.layers[layer]).__name__
                    for op, _, layer, _ in module.steps[1:])


def _compare(got, want, where: str) -> None:
    import torch
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(want), f"{where}: {len(got)} outputs, eager has {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        b = b.detach().numpy()
        assert a.shape == b.shape, f"{where}, output {k}: shape {a.shape} != eager's {b.shape}"
        scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL * scale, err_msg=f"{where}, output {k}")


def check(seed: int, compile_backend: bool = False, dynamic: bool = False, target: str = "c -mcpu=native",
          capture_dynamic: bool = False) -> None:
    """Compile seed's module with from_torch (or, with `compile_backend`, through
    torch.compile(backend="tensorforge")) and compare with eager PyTorch; `dynamic`: the batch
    dimension dynamic, called with BATCHES.  Through torch.compile, a graph the backend leaves to
    eager PyTorch fails the check (the modules use only ops it supports); `capture_dynamic` sets
    dynamo's capture_dynamic_output_shape_ops, so that x[mask] and nonzero stay in its graphs."""
    import torch
    if compile_backend:
        import warnings
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=capture_dynamic), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _check(seed, True, dynamic, target)
        eager = [str(w.message) for w in caught if "runs in eager PyTorch" in str(w.message)]
        if eager:
            raise AssertionError(f"seed {seed}: {eager[0]}")
        return
    _check(seed, False, dynamic, target)


def _check(seed: int, compile_backend: bool, dynamic: bool, target: str) -> None:
    import torch

    from .. import driver
    module, (x,) = random_module(seed)
    calls = [x]
    if dynamic:
        gen = torch.Generator().manual_seed(seed + 1)
        calls = [torch.randn((n, *x.shape[1:]), generator=gen) for n in BATCHES]
    with torch.no_grad():
        if compile_backend:
            compiled = torch.compile(module, backend="tensorforge", dynamic=dynamic or None,
                                     options={"target": target})
            run = compiled
        else:
            from ..frontend import from_torch
            shapes = None
            example = x
            if dynamic:
                # with a range, or with none (torch bounds it by an integer infinity)
                batch = torch.export.Dim("batch", min=1, max=64) if seed % 2 else torch.export.Dim("batch")
                shapes = {"x": {0: batch}}
                # an example batch of 2: torch.export specializes a dimension that is 1 in the example
                example = torch.cat([x, x]) if x.shape[0] == 1 else x
            model = driver.compile(from_torch(module, (example,), dynamic_shapes=shapes), target=target,
                                        progress=False)

            def run(t):
                outs = model(t.numpy())
                return tuple(torch.from_numpy(np.asarray(o)) for o in outs)
        for t in calls:
            _compare(run(t), module(t), f"seed {seed}, batch {t.shape[0]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0:50", help="START:STOP (or one seed)")
    ap.add_argument("--compile", action="store_true", help='through torch.compile(backend="tensorforge")')
    ap.add_argument("--dynamic", action="store_true", help="a dynamic batch, called with batches "
                    + ", ".join(map(str, BATCHES)))
    ap.add_argument("--capture-dynamic", action="store_true",
                    help="with --compile: dynamo keeps x[mask] and nonzero in its graphs")
    ap.add_argument("--target", default="c -mcpu=native")
    ap.add_argument("--show", action="store_true", help="print each module's steps")
    args = ap.parse_args(argv)

    def label(seed: int) -> tuple[str, str]:
        module, _ = random_module(seed)
        return f"{len(module.steps) - 1} steps", describe(module)

    return campaign(args.seeds, lambda seed: check(seed, args.compile, args.dynamic, args.target, args.capture_dynamic), label,
                    "eager PyTorch", args.show)


if __name__ == "__main__":
    sys.exit(main())
