"""from_torch on ATen ops that were "not supported" before, each against torch eager: acosh,
asinh, atanh, log2, log10, bitwise and / or / xor, fill, copy, grid_sampler_2d (F.grid_sample),
col2im (F.fold), _adaptive_avg_pool3d and _embedding_bag, and the cases that stay refused."""
from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_helpers import Fn, check_from_torch, eager  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_torch  # noqa: E402
from tensorforge.frontend.torch import convert_program  # noqa: E402


def graph_ops(module, *args) -> list[str]:
    return [n.op for n in from_torch(module, args).nodes]


# -- elementwise ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_inverse_hyperbolic_and_log2_log10(dtype):
    torch.manual_seed(0)
    if dtype == torch.int64:
        x = torch.randint(1, 1000, (3, 5))
        fn = Fn(lambda x: (torch.acosh(x), torch.asinh(x), torch.log2(x), torch.log10(x)))
    else:
        x = torch.rand(3, 5, dtype=dtype) * 4 + 1
        fn = Fn(lambda x: (torch.acosh(x), torch.asinh(x - 3), torch.atanh(x / 5 - 0.5), torch.log2(x),
                           torch.log10(x)))
    check_from_torch(fn, (x,), atol=1e-6, rtol=1e-6)


def test_log2_log10_of_exact_powers():
    x = torch.tensor([1.0, 2.0, 8.0, 1024.0, 10.0, 1000.0, 0.5])
    check_from_torch(Fn(lambda x: (torch.log2(x), torch.log10(x))), (x,), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_integers(name, dtype):
    torch.manual_seed(0)
    low = 0 if dtype == torch.uint8 else -100
    x, y = torch.randint(low, 100, (3, 4), dtype=dtype), torch.randint(low, 100, (4,), dtype=dtype)
    op = getattr(torch, name)
    fn = Fn(lambda x, y: (op(x, y), op(x, 0b1011), op(y, x)))
    check_from_torch(fn, (x, y), atol=0)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_bools_and_mixed(name):
    torch.manual_seed(0)
    a, b = torch.rand(3, 4) > 0.5, torch.rand(3, 4) > 0.5
    i = torch.randint(-8, 8, (3, 4), dtype=torch.int32)
    op = getattr(torch, name)
    fn = Fn(lambda a, b, i: (op(a, b), op(a, True), op(a, i), op(i, 5)))
    check_from_torch(fn, (a, b, i), atol=0)


def test_bitwise_operators():
    torch.manual_seed(0)
    x, y = torch.randint(-50, 50, (2, 5)), torch.randint(-50, 50, (2, 5))
    check_from_torch(Fn(lambda x, y: (x & y, x | 6, x ^ y, (x > 0) & (y > 0))), (x, y), atol=0)


def test_copy_broadcasts_and_casts():
    torch.manual_seed(0)
    x, y, z = torch.rand(2, 3), torch.rand(3, dtype=torch.float64), torch.randint(-5, 5, (2, 3))

    def fn(x, y, z):
        a, b = x.clone(), x.clone()
        a.copy_(y)
        b.copy_(z)
        return a, b, torch.ops.aten.copy(x, x * 2)

    check_from_torch(Fn(fn), (x, y, z), atol=0)
    assert "copy" not in graph_ops(Fn(lambda x, y: x.clone().copy_(y)), x, y)


def _kept(*ops):
    """torch.export's default decompositions less `ops`: keeps nodes that from_torch would lower."""
    from torch.export import default_decompositions
    table = default_decompositions()
    for o in ops:
        table.pop(o)
    return table


def test_fill_scalar_and_tensor():
    """fill is lowered to full_like by the default decompositions; kept here, it reaches its converter."""
    torch.manual_seed(0)
    x, v = torch.rand(2, 3), torch.tensor(1.5, dtype=torch.float64)
    module = Fn(lambda x, v: (torch.fill(x, 2.5), torch.fill(x, v), torch.fill(x.to(torch.int32), 7), x + 1))
    aten = torch.ops.aten
    program = torch.export.export(module, (x, v)).run_decompositions(_kept(aten.fill.Scalar, aten.fill.Tensor))
    assert {str(n.target) for n in program.graph.nodes} >= {"aten.fill.Scalar", "aten.fill.Tensor"}
    got = tensorforge.compile(convert_program(program, "fill"))(x.numpy(), v.numpy())
    for g, e in zip(got, eager(module, (x, v)), strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(torch.from_numpy(g), torch.from_numpy(e), atol=0, rtol=0)


# -- grid_sample ---------------------------------------------------------------------------------

# PyTorch and the graph op (ONNX's definition) differ here: see grid_sampler_2d in torch_ops/nn.py
REFUSED = {("bicubic", "border", False), ("bicubic", "border", True), ("nearest", "reflection", False)}
GRID_CASES = [c for c in itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"],
                                           [False, True]) if c not in REFUSED]


def _grid(*shape, reach: float = 1.6, dtype=torch.float32):
    """A seeded grid of `shape` with coordinates in [-reach, reach]: some outside the input."""
    torch.manual_seed(1)
    return (torch.rand(*shape, dtype=dtype) * 2 - 1) * reach


@pytest.mark.parametrize("mode,padding_mode,align_corners", GRID_CASES)
def test_grid_sample(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 6), _grid(2, 4, 7, 2)
    module = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners))
    check_from_torch(module, (x, grid), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode,padding_mode", [(m, p) for m, p, align in GRID_CASES if align and m != "nearest"])
def test_grid_sample_far_outside_float64(mode, padding_mode):
    torch.manual_seed(0)
    x, grid = torch.randn(1, 2, 4, 3, dtype=torch.float64), _grid(1, 6, 5, 2, reach=4.0, dtype=torch.float64)
    module = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=True))
    check_from_torch(module, (x, grid), atol=1e-10)


@pytest.mark.parametrize("mode,padding_mode,align_corners", [c for c in GRID_CASES if c[0] == "nearest"])
def test_grid_sample_nearest_rounds_ties_as_pytorch(mode, padding_mode, align_corners):
    """Multiples of 1/4 in [-2, 2] land on pixel centres and on the edges between pixels (ties)."""
    torch.manual_seed(0)
    ticks = torch.linspace(-2, 2, 17)
    grid = torch.stack(torch.meshgrid(ticks, ticks, indexing="ij"), -1)[None]
    x = torch.randn(1, 2, 4, 8)
    module = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners))
    check_from_torch(module, (x, grid), atol=0)


def test_grid_sample_is_one_op():
    torch.manual_seed(0)
    x, grid = torch.randn(1, 1, 3, 3), _grid(1, 2, 2, 2)
    assert graph_ops(Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)), x, grid) == ["grid_sample"]


@pytest.mark.parametrize("mode,padding_mode,align_corners", sorted(REFUSED))
def test_grid_sample_refuses_modes_that_differ_from_pytorch(mode, padding_mode, align_corners):
    x, grid = torch.randn(1, 1, 3, 3), _grid(1, 2, 2, 2)
    module = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners))
    with pytest.raises(NotImplementedError, match=f"mode='{mode}'"):
        from_torch(module, (x, grid))


# -- col2im (F.fold) -----------------------------------------------------------------------------

@pytest.mark.parametrize("output_size,kernel,stride,padding,dilation", [
    ((4, 5), (2, 2), (1, 1), (0, 0), (1, 1)),
    ((4, 6), (2, 2), (2, 2), (1, 1), (1, 1)),
    ((7, 6), (3, 2), (2, 1), (1, 0), (1, 2)),
])
def test_fold(output_size, kernel, stride, padding, dilation):
    fold = nn.Fold(output_size, kernel, dilation=dilation, padding=padding, stride=stride)
    blocks = 1
    for size, k, s, p, d in zip(output_size, kernel, stride, padding, dilation):
        blocks *= (size + 2 * p - d * (k - 1) - 1) // s + 1
    torch.manual_seed(0)
    x = torch.randn(2, 3 * kernel[0] * kernel[1], blocks)
    check_from_torch(fold, (x,), atol=1e-5)
    check_from_torch(fold, (x[0],), atol=1e-5)          # unbatched
    assert graph_ops(fold, x) == ["col2im"]


# -- adaptive_avg_pool3d -------------------------------------------------------------------------

@pytest.mark.parametrize("shape,output_size", [
    ((2, 3, 4, 4, 4), 1), ((2, 3, 4, 4, 4), 2), ((2, 4, 6, 4, 4), (3, 2, 1)), ((3, 6, 4, 2), (2, 4, 1)),
])
def test_adaptive_avg_pool3d(shape, output_size):
    torch.manual_seed(0)
    check_from_torch(nn.AdaptiveAvgPool3d(output_size), (torch.randn(*shape),), atol=1e-5)


def test_adaptive_avg_pool3d_refuses_unequal_windows():
    with pytest.raises(NotImplementedError, match="does not divide"):
        from_torch(nn.AdaptiveAvgPool3d((3, 2, 2)), (torch.randn(1, 2, 4, 4, 4),))


# -- embedding bag -------------------------------------------------------------------------------

class Bag(nn.Module):
    """nn.EmbeddingBag with its offsets held as a buffer (constants of the exported program)."""

    def __init__(self, offsets, **kwargs):
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(10, 4, **kwargs)
        self.register_buffer("offsets", torch.tensor(offsets))

    def forward(self, indices, weights=None):
        return self.bag(indices, self.offsets, per_sample_weights=weights)


INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets,include_last_offset", [
    ([0, 2, 3, 7], False), ([0, 4, 4, 9], False),        # the second has an empty bag
    ([0, 2, 3, 7, 9], True), ([0, 0, 5, 9], True),
])
def test_embedding_bag(mode, offsets, include_last_offset):
    bag = Bag(offsets, mode=mode, include_last_offset=include_last_offset)
    check_from_torch(bag, (INDICES,), atol=1e-6)


def test_embedding_bag_per_sample_weights():
    torch.manual_seed(0)
    weights = torch.rand(len(INDICES))
    check_from_torch(Bag([0, 3, 3, 5], mode="sum"), (INDICES, weights), atol=1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_2d_input(mode):
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    check_from_torch(bag, (torch.randint(0, 10, (4, 3)),), atol=1e-6)


def test_embedding_bag_refusals():
    offsets = torch.tensor([0, 2])
    with pytest.raises(NotImplementedError, match="offsets of an embedding bag must be constants"):
        from_torch(nn.EmbeddingBag(10, 3), (INDICES, offsets))
    with pytest.raises(NotImplementedError, match="padding_idx"):
        from_torch(Bag([0, 2], padding_idx=0), (INDICES,))
    weight = torch.randn(10, 3)
    second = Fn(lambda i: torch.ops.aten._embedding_bag(weight, i, torch.tensor([0, 4]), mode=2)[3])
    with pytest.raises(NotImplementedError, match="only the first output"):
        from_torch(second, (INDICES,))


# core ATen op families with no converter, and why: a change that drops a converter fails below
_NOT_CONVERTED = {
    # training: backward passes and dropout
    "_adaptive_avg_pool2d_backward", "avg_pool2d_backward", "convolution_backward", "embedding_dense_backward",
    "max_pool2d_with_indices_backward", "native_dropout", "native_group_norm_backward",
    "native_layer_norm_backward",
    # random draws, complex FFTs, strides and storage
    "rand", "randn", "randperm", "_fft_c2r", "_fft_r2c", "sym_storage_offset", "sym_stride",
    "sym_is_contiguous", "resize_",
    # decomposed into other ops before conversion; nonzero and .item() run on the host (torch_staged.py)
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad2d", "replication_pad3d",
    "adaptive_avg_pool1d", "nonzero", "_local_scalar_dense",
}


def test_core_aten_ops_have_converters():
    """Every op family PyTorch tags core (among all registered ATen ops) has a converter, or a
    reason above not to."""
    from tensorforge.frontend.torch_convert import _CONVERTERS, PASSTHROUGH, SIZE_QUERIES, _load_converters
    _load_converters()
    core = set()
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        name, _, overload = full[len("aten::"):].partition(".")
        op = getattr(getattr(torch.ops.aten, name, None), overload or "default", None)
        if op is not None and torch.Tag.core in op.tags:
            core.add(name)
    missing = {n for n in core if n not in _CONVERTERS and n not in PASSTHROUGH and n not in SIZE_QUERIES}
    assert missing <= _NOT_CONVERTED, sorted(missing - _NOT_CONVERTED)
    assert len(core) - len(missing) >= 139
