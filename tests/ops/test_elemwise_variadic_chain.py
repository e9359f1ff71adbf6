"""A NaN-propagating maximum or minimum reads its left operand three times; in the chain of an
ONNX Max or Min with many inputs the operand is bound once, so the expression grows linearly (it
grew as 3^n: 22 s to compile an 8-input Max, minutes for 12).  The values, NaNs included, are
NumPy's.  (Separate maximum nodes inlined into one kernel: tests/tir/test_inline_binding.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder


@pytest.mark.parametrize("op, ref", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_twelve_input_max_and_min_with_nans(op, ref):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((7, 33)).astype(np.float32) for _ in range(12)]
    arrays[3][0, 0] = np.nan
    arrays[11][2, 5] = np.nan
    arrays[0][4, 4] = np.nan
    b = GraphBuilder("chain")
    xs = [b.input(f"x{k}", a.shape, "float32") for k, a in enumerate(arrays)]
    y = b.add1(op, xs)
    model = tensorforge.compile(b.finish([y]), target="c")
    want = arrays[0]
    for a in arrays[1:]:
        want = ref(want, a)
    for got in model(*arrays):
        np.testing.assert_array_equal(got, want)
    assert "({ " in model.source           # the operand bound once (a statement expression)
