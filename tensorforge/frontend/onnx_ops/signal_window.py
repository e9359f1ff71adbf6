"""ONNX HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (opset 17) -> constants.

Their outputs depend only on scalar inputs (a size, sample rate, band edges) that must be known
when the model is converted, so each is computed here in float64 and becomes a constant of the
requested output_datatype:

    w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),   N = size (periodic) or size - 1 (symmetric)
    Hann (0.5, 0.5, 0), Hamming (25/46, 21/46, 0), Blackman (0.42, 0.5, 0.08)

MelWeightMatrix [dft_length // 2 + 1, num_mel_bins] holds triangular filters whose corners are
num_mel_bins + 2 points evenly spaced on the mel scale mel(f) = 2595 log10(1 + f / 700) between
the band edges (the step being the span over num_mel_bins + 2, as the ONNX reference and ONNX
Runtime compute it), each mapped to spectrogram bin floor((dft_length + 1) f / sample_rate).
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from .elemwise_util import onnx_dtype

COSINE_SUMS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
               "BlackmanWindow": (0.42, 0.5, 0.08)}


def _scalar(ctx, v: Value | None, what: str) -> float:
    if v is None:
        raise ValueError(f"the input {what} is required")
    value = np.asarray(ctx.value_of(v, what))
    if value.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {value.shape}")
    return value.reshape(()).item()


def cosine_window(kind: str, size: int, periodic: bool) -> np.ndarray:
    """The float64 window of `size` samples for one of COSINE_SUMS."""
    a0, a1, a2 = COSINE_SUMS[kind]
    span = size if periodic else size - 1
    n = np.arange(size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        phase = 2 * np.pi * n / span
        return a0 - a1 * np.cos(phase) + a2 * np.cos(2 * phase)


@converter(*COSINE_SUMS, since=17)
def convert_window(ctx, inputs: list, attrs: dict) -> Value:
    size = int(_scalar(ctx, inputs[0], "size"))
    if size < 1:
        raise ValueError(f"size must be positive, got {size}")
    dtype = onnx_dtype(ctx, int(attrs.get("output_datatype", 1)))
    return ctx.const(cosine_window(ctx.op_type, size, bool(attrs.get("periodic", 1))).astype(dtype))


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: int, lower_hz: float,
                      upper_hz: float) -> np.ndarray:
    """The float64 [dft_length // 2 + 1, num_mel_bins] matrix of triangular mel filters."""
    def mel(f: float) -> float:
        return 2595 * np.log10(1 + f / 700)

    low, high = mel(lower_hz), mel(upper_hz)
    points = low + np.arange(num_mel_bins + 2) * (high - low) / (num_mel_bins + 2)
    hertz = 700 * (10 ** (points / 2595) - 1)
    corners = np.floor((dft_length + 1) * hertz / sample_rate).astype(np.int64)
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        left, center, right = corners[i:i + 3]
        if center == left:
            out[center, i] = 1.0
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    return out


@converter("MelWeightMatrix", since=17)
def convert_mel_weight_matrix(ctx, inputs: list, attrs: dict) -> Value:
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    bins, length, rate, low, high = (_scalar(ctx, v, n) for v, n in zip((list(inputs) + [None] * 5)[:5], names))
    bins, length, rate = int(bins), int(length), int(rate)
    if bins < 1 or length < 1 or rate < 1:
        raise ValueError(f"num_mel_bins ({bins}), dft_length ({length}) and sample_rate ({rate}) must be positive")
    if not 0 <= low < high <= rate / 2:
        raise ValueError(f"the band edges must satisfy 0 <= lower_edge_hertz ({low}) < upper_edge_hertz ({high}) "
                         f"<= sample_rate / 2 ({rate / 2})")
    dtype = onnx_dtype(ctx, int(attrs.get("output_datatype", 1)))
    return ctx.const(mel_weight_matrix(bins, length, rate, float(low), float(high)).astype(dtype))
