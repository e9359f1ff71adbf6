"""Random ops on the host: RandomUniform, RandomNormal, their *Like forms, Bernoulli,
Multinomial and training-mode Dropout.

Each call draws new values from NumPy's PCG64 generator.  The `seed` attribute (a float in
ONNX) makes a node reproducible: the generator is then seeded with the seed's bits at every
call, so one node with one seed gives the same values on each call and in every process.
Without a seed every call draws fresh values.  ONNX leaves the generator free, so the values
need not match another runtime's; the distributions are what the spec names.
"""
from __future__ import annotations

import struct

import numpy as np

from . import HostContext, host_op

_FLOAT_TYPES = ("float16", "float32", "float64")


def generator(attrs: dict) -> np.random.Generator:
    """A generator seeded from the `seed` attribute (its float64 bits), or from fresh entropy."""
    seed = attrs.get("seed")
    if seed is None:
        return np.random.default_rng()
    bits = struct.unpack("<Q", struct.pack("<d", float(seed)))[0]
    return np.random.default_rng(bits)


def _dtype(ctx: HostContext, attrs: dict, default: np.dtype, allowed: tuple[str, ...] = _FLOAT_TYPES) -> np.dtype:
    """The output dtype from the `dtype` attribute (an ONNX element type), else `default`."""
    from onnx import helper
    code = attrs.get("dtype")
    if code is None:
        dtype = np.dtype(default)
    else:
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(int(code)))
        except Exception:
            raise ctx.error(f"dtype {code} is not an ONNX element type") from None
    if dtype.name not in allowed:
        raise ctx.error(f"output dtype {dtype.name} is not supported; use one of {', '.join(allowed)}")
    return dtype


def _shape(ctx: HostContext, attrs: dict) -> tuple[int, ...]:
    shape = attrs.get("shape")
    if shape is None:
        raise ctx.error("the 'shape' attribute is required")
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ctx.error(f"shape {list(dims)} has a negative dimension")
    return dims


def _uniform(attrs: dict, shape: tuple, dtype: np.dtype) -> np.ndarray:
    low, high = float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0))
    return generator(attrs).uniform(low, high, size=shape).astype(dtype)


def _normal(attrs: dict, shape: tuple, dtype: np.dtype) -> np.ndarray:
    mean, scale = float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0))
    return generator(attrs).normal(mean, scale, size=shape).astype(dtype)


def _float_input(ctx: HostContext, value) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise ctx.error(f"the input must be a numeric tensor, got dtype {a.dtype.name}")
    return a


@host_op("RandomUniform")
def random_uniform(ctx, inputs, attrs):
    """Values uniform in [low, high) of the given shape (float32 unless dtype says)."""
    return [_uniform(attrs, _shape(ctx, attrs), _dtype(ctx, attrs, np.dtype(np.float32)))]


@host_op("RandomNormal")
def random_normal(ctx, inputs, attrs):
    """Values from N(mean, scale^2) of the given shape (float32 unless dtype says)."""
    return [_normal(attrs, _shape(ctx, attrs), _dtype(ctx, attrs, np.dtype(np.float32)))]


@host_op("RandomUniformLike")
def random_uniform_like(ctx, inputs, attrs):
    """RandomUniform with the input's shape (and dtype, unless dtype says)."""
    x = _float_input(ctx, inputs[0])
    default = x.dtype if x.dtype.name in _FLOAT_TYPES else np.dtype(np.float32)
    return [_uniform(attrs, x.shape, _dtype(ctx, attrs, default))]


@host_op("RandomNormalLike")
def random_normal_like(ctx, inputs, attrs):
    """RandomNormal with the input's shape (and dtype, unless dtype says)."""
    x = _float_input(ctx, inputs[0])
    default = x.dtype if x.dtype.name in _FLOAT_TYPES else np.dtype(np.float32)
    return [_normal(attrs, x.shape, _dtype(ctx, attrs, default))]


@host_op("Bernoulli")
def bernoulli(ctx, inputs, attrs):
    """1 with probability p (the input's element), else 0, in dtype (default the input's)."""
    p = _float_input(ctx, inputs[0])
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1 or np.isnan(p).any()):
        raise ctx.error("Bernoulli probabilities must lie in [0, 1]")
    allowed = _FLOAT_TYPES + ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    dtype = _dtype(ctx, attrs, p.dtype, allowed)
    return [(generator(attrs).random(size=p.shape) < p).astype(dtype)]


@host_op("Multinomial")
def multinomial(ctx, inputs, attrs):
    """sample_size class indices per row of X [batch, classes], drawn with probabilities
    softmax(X[row]) (X holds unnormalized log-probabilities); int32 unless dtype says int64."""
    x = _float_input(ctx, inputs[0]).astype(np.float64)
    if x.ndim != 2:
        raise ctx.error(f"the input must be [batch_size, class_size], got shape {list(x.shape)}")
    samples = int(attrs.get("sample_size", 1))
    if samples < 1:
        raise ctx.error(f"sample_size must be positive, got {samples}")
    dtype = _dtype(ctx, attrs, np.dtype(np.int32), ("int32", "int64"))
    batch, classes = x.shape
    if classes == 0:
        raise ctx.error("the input has no classes to sample from")
    cdf = np.cumsum(np.exp(x - x.max(axis=1, keepdims=True)), axis=1)
    u = generator(attrs).random(size=(batch, samples)) * cdf[:, -1:]
    out = np.stack([np.searchsorted(cdf[r], u[r], side="right") for r in range(batch)]) if batch \
        else np.zeros((0, samples), dtype=np.int64)
    return [np.minimum(out, classes - 1).astype(dtype)]


@host_op("Dropout")
def dropout(ctx, inputs, attrs):
    """Training-mode Dropout (opset 12+; the converter hands it here only then): each element is
    kept with probability 1 - ratio and scaled by 1 / (1 - ratio); the mask says which were kept."""
    x = inputs[0]
    ratio = float(np.asarray(inputs[1]).reshape(-1)[0]) if len(inputs) > 1 and inputs[1] is not None else 0.5
    training = len(inputs) > 2 and inputs[2] is not None and bool(np.asarray(inputs[2]).reshape(-1)[0])
    if not 0.0 <= ratio < 1.0:
        raise ctx.error(f"ratio must be in [0, 1), got {ratio}")
    if not training or ratio == 0.0:
        return [x, np.ones(x.shape, dtype=bool)]
    mask = generator(attrs).uniform(0.0, 1.0, size=x.shape) >= ratio
    return [(x * mask / (1.0 - ratio)).astype(x.dtype), mask]
