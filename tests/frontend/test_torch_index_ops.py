"""from_torch on the ATen ops users' modules bring beyond the paper's workloads, each against torch
eager: F.interpolate (upsample_*), nn.GroupNorm (native_group_norm), nn.InstanceNorm2d and
BatchNorm2d without running statistics (_native_batch_norm_legit.no_stats), reflection and
replication padding (index.Tensor), advanced indexing, flip (bidirectional RNNs), repeat, cumsum,
softplus and mish (log1p), expm1.  Each was "not supported" before; the random-module campaign
(tensorforge/testing/random_torch.py) found them."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_helpers import Fn, check_from_torch  # noqa: E402


@pytest.mark.parametrize("kwargs", [
    dict(scale_factor=2, mode="nearest"), dict(scale_factor=3, mode="nearest-exact"), dict(size=(7, 11), mode="nearest"),
    dict(scale_factor=2, mode="bilinear", align_corners=False), dict(scale_factor=2, mode="bilinear", align_corners=True),
    dict(size=(9, 4), mode="bilinear", align_corners=False), dict(scale_factor=2, mode="bicubic", align_corners=False),
    dict(scale_factor=1.5, mode="bilinear", align_corners=False)])
def test_interpolate(kwargs):
    check_from_torch(Fn(lambda x: F.interpolate(x, **kwargs)), (torch.randn(2, 3, 5, 6),))


def test_interpolate_1d_linear():
    check_from_torch(Fn(lambda x: F.interpolate(x, scale_factor=2, mode="linear")), (torch.randn(1, 4, 9),))


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(affine):
    torch.manual_seed(0)
    norm = nn.GroupNorm(4, 8, affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    check_from_torch(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), norm, nn.SiLU()), (torch.randn(2, 3, 9, 7),))


@pytest.mark.parametrize("batch", [1, 3])
def test_instance_norm_and_batch_statistics(batch):
    torch.manual_seed(0)
    check_from_torch(nn.Sequential(nn.InstanceNorm2d(4, affine=True), nn.ReLU(),
                                   nn.BatchNorm2d(4, track_running_stats=False)), (torch.randn(batch, 4, 6, 5),))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_padding_modes(mode):
    check_from_torch(Fn(lambda x: F.pad(x, (1, 2, 2, 0), mode=mode) * 2), (torch.randn(1, 3, 5, 6),))


def test_advanced_indexing_flip_repeat_cumsum():
    rows = torch.tensor([2, 0, -1])
    cols = torch.tensor([[1], [3]])

    def f(x):
        picked = x[:, rows]                 # one index tensor, a negative position
        block = x[0, cols, rows]            # two broadcast indices on adjacent axes: (2, 3, W)
        return picked.flip(1, 3), block.repeat(1, 2, 1), torch.cumsum(x, dim=2)

    check_from_torch(Fn(f), (torch.randn(2, 4, 5, 6),))


def test_softplus_mish_expm1():
    # expm1 grows to 2e4 at the inputs' tails (x near 10): float32's last bit there is 2e-3
    torch.manual_seed(0)
    check_from_torch(Fn(lambda x: (F.softplus(x), F.mish(x), torch.expm1(x))), (torch.randn(3, 7) * 3,), rtol=1e-6)


def test_bidirectional_gru():
    torch.manual_seed(0)
    gru = nn.GRU(6, 8, batch_first=True, bidirectional=True)
    check_from_torch(Fn(lambda x: gru(x)[0]), (torch.randn(2, 5, 6),))


def test_boolean_mask_through_torch_compile():
    """x[mask] through torch.compile: dynamo leaves the op to PyTorch and compiles the rest
    (from_torch runs it on the host between compiled stretches: test_torch_staged.py)."""
    module = Fn(lambda x: (x * 2)[x > 0].sum() + x.mean())
    x = torch.randn(5, 4)
    compiled = torch.compile(module, backend="tensorforge")
    torch.testing.assert_close(compiled(x), module(x))


@pytest.mark.parametrize("size", [(4, 3), (7, 7), 2])
def test_adaptive_pools_with_unequal_windows(size):
    """Adaptive average and max pooling where the output does not divide the input (9x7 to 4x3:
    windows of 3 and 2 rows that overlap): products with averaging matrices, and maxima over
    gathered window positions."""
    check_from_torch(Fn(lambda x: (F.adaptive_avg_pool2d(x, size), F.adaptive_max_pool2d(x, size))),
                     (torch.randn(2, 3, 9, 7),))


def test_statistics_norms_and_selu():
    def f(x):
        return (x.var(dim=(2, 3), keepdim=True), x.std(1), x.var(1, correction=0), F.normalize(x, dim=1),
                x.norm(dim=-1), torch.linalg.vector_norm(x, ord=3, dim=1), F.cosine_similarity(x, x.flip(1), dim=1),
                F.selu(x))
    check_from_torch(Fn(f), (torch.randn(2, 4, 5, 6),))


def test_selections_sorting_and_rounding():
    index = torch.tensor([[[0, 2, 1]], [[3, 3, 0]]])

    def f(x):
        values, positions = x.topk(3, dim=-1)
        ascending, order = x.sort(dim=1)
        return (values, positions, ascending, order, torch.roll(x, 2, 1), x.index_select(2, torch.tensor([4, 0])),
                torch.gather(x, 1, index.expand(2, 1, 3)), torch.round(x * 3), torch.trunc(x * 3), torch.frac(x * 3),
                torch.atan2(x, x.flip(2)))
    check_from_torch(Fn(f), (torch.randn(2, 4, 5),))


def test_diagonal():
    check_from_torch(Fn(lambda x: (torch.diagonal(x), torch.diagonal(x, 1, 0, 2), torch.diagonal(x, -2, 1, 2))),
                     (torch.randn(4, 5, 6),))


def test_as_strided_view_of_the_whole_tensor():
    """as_strided in row-major order (strides of size-1 axes free): a reshape; another stride is
    refused with the node and its sizes."""
    check_from_torch(Fn(lambda x: (x * 2).as_strided((2, 8, 1, 1), (8, 1, 8, 8)) + 1), (torch.randn(2, 8),))
    from tensorforge.frontend import from_torch
    with pytest.raises(NotImplementedError, match="as_strided with size"):
        from_torch(Fn(lambda x: (x * 2).as_strided((3, 3), (1, 2))), (torch.randn(2, 8),))
