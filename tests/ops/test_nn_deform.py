"""deform_im2col: compiled to C against the NumPy reference (offset groups, mask, strides, pads,
dilations, samples outside the image); zero offsets give plain im2col windows; integral offsets
shift the windows by hand; errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(6)


def _attrs(**kw):
    a = {"kernel": (2, 3), "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "offset_group": 1}
    a.update(kw)
    return a


@pytest.mark.parametrize("attrs", [
    _attrs(),
    _attrs(strides=(2, 1), pads=(1, 0, 1, 2), dilations=(1, 2)),
    _attrs(offset_group=2),
])
@pytest.mark.parametrize("with_mask", [False, True])
def test_compiled_matches_reference(attrs, with_mask):
    x = RNG.standard_normal((2, 4, 6, 7)).astype(np.float32)
    kh, kw = attrs["kernel"]
    h = (6 + attrs["pads"][0] + attrs["pads"][2] - attrs["dilations"][0] * (kh - 1) - 1) // attrs["strides"][0] + 1
    w = (7 + attrs["pads"][1] + attrs["pads"][3] - attrs["dilations"][1] * (kw - 1) - 1) // attrs["strides"][1] + 1
    g = attrs["offset_group"]
    offset = (RNG.standard_normal((2, g * 2 * kh * kw, h, w)) * 2.5).astype(np.float32)   # some fall outside
    mask = RNG.random((2, g * kh * kw, h, w)).astype(np.float32) if with_mask else None
    check_op("deform_im2col", [x, offset, mask], attrs, rtol=1e-5, atol=1e-5)


def test_zero_and_integral_offsets_by_hand():
    x = np.arange(2 * 4 * 5, dtype=np.float32).reshape(1, 2, 4, 5)
    zero = np.zeros((1, 2 * 2 * 2, 3, 4), np.float32)
    attrs = _attrs(kernel=(2, 2))
    cols = check_op("deform_im2col", [x, zero], attrs)[0]                      # (1, 2, 2, 2, 3, 4)
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(cols[0, :, i, j], x[0, :, i:i + 3, j:j + 4])
    # offset (+1, -1) on every tap: each window moves one row down and one column left
    shifted = zero.copy()
    shifted[:, 0::2], shifted[:, 1::2] = 1.0, -1.0
    cols = check_op("deform_im2col", [x, shifted], attrs)[0]
    padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 0)))        # rows past the end and columns before 0 read 0
    np.testing.assert_array_equal(cols[0, :, 0, 0], padded[0, :, 1:4, 0:4])


@pytest.mark.parametrize("types, message", [
    ([TensorType((1, 2, 4, 4), "float32"), TensorType((1, 8, 3, 2), "float32"), None], "offset has shape"),
    ([TensorType((1, 2, 4, 4), "float32"), TensorType((1, 8, 3, 3), "float32"),
      TensorType((1, 3, 3, 3), "float32")], "mask has shape"),
    ([TensorType((1, 2, 4), "float32"), TensorType((1, 8, 3, 3), "float32"), None], "2-D"),
])
def test_errors(types, message):
    with pytest.raises(OpError, match=message):
        get("deform_im2col").infer_types(types, _attrs(kernel=(2, 2)))
