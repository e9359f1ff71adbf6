"""Layout ops (reshape, flatten, squeeze, unsqueeze, transpose, expand, concat, split, tile,
slice, pad, depth_to_space, space_to_depth): the TE compute compiled to C against the NumPy
reference, hand-checked values where the semantics are subtle, and errors for bad attributes."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 5)).astype("float32")
XI = RNG.integers(-100, 100, (3, 4, 5)).astype("int64")


def infer(name, *types, **attrs):
    return get(name).infer_types(list(types), attrs)


@pytest.mark.parametrize("shape, allowzero, want", [
    ((0, -1), 0, (3, 20)), ((5, 4, 3), 0, (5, 4, 3)), ((-1,), 0, (60,)), ((1, 3, 1, 20), 0, (1, 3, 1, 20)),
])
def test_reshape(shape, allowzero, want):
    out = check_op("reshape", [X], {"shape": shape, "allowzero": allowzero})
    assert out[0].shape == want


def test_reshape_allowzero_keeps_literal_zero():
    empty = np.zeros((0, 3, 4), "float32")
    assert check_op("reshape", [empty], {"shape": (3, 4, 0), "allowzero": 1})[0].shape == (3, 4, 0)


def test_flatten_squeeze_unsqueeze_transpose_expand():
    check_op("flatten", [X], {"axis": 2})
    check_op("flatten", [XI], {"axis": 0})
    check_op("flatten", [X], {"axis": -1})
    check_op("squeeze", [X[:1, :, :1]], {"axes": (0, -1)})
    check_op("squeeze", [X[:1, :, :1]], {})
    check_op("unsqueeze", [X], {"axes": (0, -1, 2)})
    check_op("transpose", [X], {"perm": (2, 0, 1)})
    check_op("transpose", [XI], {})
    check_op("expand", [X[:, :1]], {"shape": (2, 1, 1, 1, 5)})
    check_op("expand", [XI[0, 0]], {"shape": (4, 1)})


def test_concat_split_tile():
    check_op("concat", [X, X[:, :2], X[:, :0]], {"axis": 1})
    check_op("concat", [XI, XI], {"axis": -1})
    out = check_op("split", [X], {"sizes": (1, 0, 3), "axis": 1})
    assert [o.shape[1] for o in out] == [1, 0, 3]
    check_op("split", [XI], {"sizes": (2, 3), "axis": -1})
    check_op("tile", [X.astype("int8")], {"repeats": (1, 2, 3)})


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ((1,), (3,), None, None),
    ((-1, 10), (-100, 0), (2, 1), (-2, -1)),             # negative steps, clamped ends
    ((0, -3), (2 ** 62, 2 ** 62), (0, -1), (2, 1)),      # huge ends clamp to the size
    ((5,), (1,), (2,), (1,)),                            # empty result
])
def test_slice(starts, ends, axes, steps):
    check_op("slice", [X], {"starts": starts, "ends": ends, "axes": axes, "steps": steps})


def test_slice_hand_checked():
    x = np.arange(10, dtype="int32")
    got = check_op("slice", [x], {"starts": (-1,), "ends": (-(2 ** 63),), "steps": (-3,)})[0]
    np.testing.assert_array_equal(got, [9, 6, 3, 0])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(mode):
    check_op("pad", [X], {"pads": (0, 2, -1, 1, 7, 1), "mode": mode, "value": 1.5}, interpreter=True)
    check_op("pad", [XI], {"pads": (1, 0, 0, 0, 0, 2), "mode": mode, "value": 7})


def test_pad_reflect_hand_checked():
    x = np.array([1, 2, 3], "float32")
    got = check_op("pad", [x], {"pads": (4, 4), "mode": "reflect"})[0]
    np.testing.assert_array_equal(got, [1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3])


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("before, after", [(0, 0), (1, 2), (3, 3), (2, 0)])
def test_pad_rows_of_vectors_equal_numpy(mode, before, after):
    """Rows long enough for vectors (40 columns): a single reflection or an edge copy written
    with clamps, which loop partitioning drops in the middle of each row; exact either way."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    x = RNG.standard_normal((2, 3, 5, 40)).astype("float32")
    b = GraphBuilder("pad")
    pads = (0, 0, 1, before, 0, 0, 2, after)
    g = b.finish([b.add1("pad", [b.input("x", x.shape, "float32")], {"pads": pads, "mode": mode})])
    model = tensorforge.compile(g, target="c")
    want = np.pad(x, [(0, 0), (0, 0), (1, 2), (before, after)], mode="reflect" if mode == "reflect" else "edge")
    np.testing.assert_array_equal(model(x)[0], want)


def test_depth_space():
    x = RNG.standard_normal((2, 8, 3, 2)).astype("float32")
    for mode in ("DCR", "CRD"):
        y = check_op("depth_to_space", [x], {"blocksize": 2, "mode": mode})[0]
        back = check_op("space_to_depth", [y], {"blocksize": 2, "mode": mode})[0]
        np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("block, b", [(8, 2), (16, 3)])
def test_depth_to_space_on_blocked_data_moves_whole_blocks(block, b):
    """DCR depth_to_space on NCHW[k]c data is the blocked layout of the NCHW result, compiled as
    in the reference."""
    from tensorforge.ops.nn_conv_nchwc import to_nchwc
    x = RNG.standard_normal((2, 2 * block * b * b, 3, 4)).astype("float32")
    want = check_op("depth_to_space", [x], {"blocksize": b, "mode": "DCR"})[0]
    got = check_op("depth_to_space", [to_nchwc(x, block)], {"blocksize": b, "mode": "DCR"})[0]
    np.testing.assert_array_equal(got, to_nchwc(want, block))


@pytest.mark.parametrize("name, types, attrs, message", [
    ("reshape", [TensorType((2, 3), "float32")], {"shape": (4, -1)}, "cannot reshape"),
    ("reshape", [TensorType((2, 3), "float32")], {"shape": (-1, -1)}, "more than one -1"),
    ("squeeze", [TensorType((2, 3), "float32")], {"axes": (0,)}, "not 1"),
    ("transpose", [TensorType((2, 3), "float32")], {"perm": (0, 0)}, "not a permutation"),
    ("concat", [TensorType((2, 3), "float32"), TensorType((2, 4), "float32")], {"axis": 0}, "does not match"),
    ("split", [TensorType((2, 3), "float32")], {"sizes": (1, 1), "axis": 1}, "add up"),
    ("slice", [TensorType((2, 3), "float32")], {"starts": (0,), "ends": (1,), "steps": (0,)}, "step 0"),
    ("pad", [TensorType((2, 3), "float32")], {"pads": (1, 1), "mode": "constant"}, r"2 \* rank"),
    ("pad", [TensorType((2, 3), "float32")], {"pads": (0, 0, 0, 0), "mode": "mirror"}, "mode"),
    ("depth_to_space", [TensorType((1, 3, 2, 2), "float32")], {"blocksize": 2}, "divisible"),
    ("expand", [TensorType((2, 3), "float32")], {"shape": (4, 3)}, "broadcast"),
])
def test_errors(name, types, attrs, message):
    with pytest.raises(OpError, match=message):
        infer(name, *types, **attrs)


def test_concat_of_many_inputs_selects_through_a_balanced_tree():
    """An element of a concat of n inputs costs about log2(n) comparisons (an LSTM's output joins
    one value per time step), and every input still lands in its place."""
    from tensorforge import te
    from tensorforge.ir.expr import Select

    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, k % 4)).astype("float32") for k in range(9)]   # sizes 0..3, one empty
    check_op("concat", xs, {"axis": 1})

    def depth(e) -> int:
        return 1 + max(depth(e.true_value), depth(e.false_value)) if isinstance(e, Select) else 0

    parts = [te.placeholder((1, 4), "float32", name=f"x{k}") for k in range(35)]
    out = get("concat").build_compute(parts, {"axis": 0})[0]
    assert depth(out.op.body[0]) == 6                    # ceil(log2(35)), not 34
