"""from_torch on reductions and elementwise ops that were "not supported" before, each against
torch eager: max / min (over a dim with indices, and over every element), var_mean and
std_mean, median, kthvalue, cumprod, linalg.det, isinf / isnan, hypot and rrelu in eval mode.
Inputs whose indices are compared have no equal values (randn, or a permutation for int64)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_helpers import Fn, check_from_torch  # noqa: E402

from tensorforge.frontend import from_torch  # noqa: E402


def distinct(dtype, *shape):
    """A seeded tensor of `shape` with no two equal elements."""
    torch.manual_seed(0)
    if dtype == torch.int64:
        n = 1
        for d in shape:
            n *= d
        return (torch.randperm(n) - n // 2).reshape(shape)
    return torch.randn(*shape, dtype=dtype)


def graph_ops(fn, *args) -> list[str]:
    return [n.op for n in from_torch(Fn(fn), args).nodes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), (0, False), (-3, True)])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim(name, dim, keepdim, dtype):
    x = distinct(dtype, 3, 5, 4)
    check_from_torch(Fn(lambda x: tuple(getattr(x, name)(dim, keepdim=keepdim))), (x,), atol=0)


def test_max_min_dim_computes_only_the_outputs_read():
    x = distinct(torch.float32, 4, 6)
    check_from_torch(Fn(lambda x: (x.max(1).values, x.min(0, keepdim=True).indices)), (x,), atol=0)
    ops = graph_ops(lambda x: (x.max(1).values, x.min(0).indices), x)
    assert "reduce_max" in ops and "argmin" in ops
    assert "argmax" not in ops and "reduce_min" not in ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_max_min_all_elements(dtype):
    x = distinct(dtype, 2, 3, 5)
    check_from_torch(Fn(lambda x: (x.max(), x.min(), torch.max(x[0]), torch.min(x[:, 1]))), (x,), atol=0)


@pytest.mark.parametrize("dim,keepdim", [(1, False), ([0, 2], True), (-1, True), (None, False), (None, True)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_mean_std_mean(dim, keepdim, correction):
    x = distinct(torch.float32, 3, 4, 5)
    check_from_torch(Fn(lambda x: (*torch.var_mean(x, dim, correction=correction, keepdim=keepdim),
                                   *torch.std_mean(x, dim, correction=correction, keepdim=keepdim))), (x,), atol=1e-5)


def test_var_mean_defaults_and_float64():
    x = distinct(torch.float64, 6, 7)
    check_from_torch(Fn(lambda x: (*torch.var_mean(x), *torch.std_mean(x, -2, unbiased=False))), (x,), atol=1e-12)


def test_var_mean_mean_only():
    x = distinct(torch.float32, 4, 6)
    check_from_torch(Fn(lambda x: torch.var_mean(x, 1)[1]), (x,), atol=1e-6)
    assert "mul" not in graph_ops(lambda x: torch.var_mean(x, 1)[1], x)   # no squared deviations


def test_isinf_isnan():
    x = torch.tensor([[1.0, float("inf"), -float("inf")], [float("nan"), 0.0, -3.5]])
    check_from_torch(Fn(lambda x: (torch.isinf(x), torch.isnan(x), torch.isinf(x * 2).logical_not())), (x,), atol=0)
    n = torch.arange(6).reshape(2, 3)
    check_from_torch(Fn(lambda n: (torch.isinf(n), torch.isnan(n))), (n,), atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hypot(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(3, 4, dtype=dtype) * 5, torch.randn(4, dtype=dtype) * 5
    check_from_torch(Fn(lambda a, b: (torch.hypot(a, b), torch.hypot(b, a * 0))), (a, b), rtol=1e-6, atol=0)


def test_hypot_does_not_overflow_or_underflow():
    """Squares of 3e19 overflow float32 and squares of 1e-30 underflow it; C's hypot (and torch's)
    scale instead. 0 beside 0 is 0; an infinity wins over a NaN."""
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([3e19, -3e19, 1e-30, 0.0, inf, nan, -inf, 3e38, 1.0])
    b = torch.tensor([4e19, 1.0, 1e-30, 0.0, nan, -inf, 2.0, 3e38, nan])
    check_from_torch(Fn(lambda a, b: torch.hypot(a, b)), (a, b), rtol=1e-6, atol=0)


def test_rrelu_eval():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    check_from_torch(nn.Sequential(nn.Linear(8, 8), nn.RReLU(0.1, 0.3)), (x,), atol=1e-5)
    check_from_torch(Fn(lambda x: F.rrelu(x, training=False)), (x,), atol=0)
    assert "leaky_relu" in graph_ops(lambda x: F.rrelu(x, 0.2, 0.4, training=False), x)


def test_rrelu_training_is_refused():
    with pytest.raises(NotImplementedError, match="rrelu in training mode"):
        from_torch(Fn(lambda x: F.rrelu(x, training=True)), (torch.randn(2, 3),))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), (0, True), (-2, False)])
def test_median_dim(dim, keepdim, dtype):
    x = distinct(dtype, 5, 4, 7)           # odd (5, 7) and even (4) lengths: the lower median
    check_from_torch(Fn(lambda x: tuple(x.median(dim, keepdim=keepdim))), (x,), atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("shape", [(6,), (3, 4), (3, 5)])
def test_median_all_elements(shape, dtype):
    x = distinct(dtype, *shape)
    check_from_torch(Fn(lambda x: (x.median(), torch.median(x * 2))), (x,), atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("k,dim,keepdim", [(1, -1, False), (3, 1, True), (5, 1, False), (2, 0, False), (4, -1, True)])
def test_kthvalue(k, dim, keepdim, dtype):
    x = distinct(dtype, 3, 6, 4)
    check_from_torch(Fn(lambda x: tuple(x.kthvalue(k, dim, keepdim=keepdim))), (x,), atol=0)


def test_kthvalue_values_only():
    x = distinct(torch.float32, 4, 9)
    check_from_torch(Fn(lambda x: torch.kthvalue(x, 7).values * 2), (x,), atol=0)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(dim):
    torch.manual_seed(0)
    x = 1 + torch.rand(3, 4, 5) * 0.2 - 0.1
    n = torch.randint(-3, 4, (3, 4, 5))
    check_from_torch(Fn(lambda x, n: (torch.cumprod(x, dim), torch.cumprod(n, dim), torch.cumprod(n.int(), dim),
                                      torch.cumprod(n, dim, dtype=torch.float32))), (x, n), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_det(dtype):
    torch.manual_seed(0)
    m = torch.randn(2, 3, 4, 4, dtype=dtype)
    check_from_torch(Fn(lambda m: (torch.linalg.det(m), torch.det(m[0, 0, :3, :3]))), (m,), rtol=1e-5, atol=1e-6)


def test_det_lu_factors_are_refused():
    with pytest.raises(NotImplementedError, match="only the determinant"):
        from_torch(Fn(lambda m: torch.ops.aten._linalg_det(m)[1]), (torch.randn(3, 3),))


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
@pytest.mark.parametrize("rows", [(4, 6), (30, 7)])
def test_cdist(p, rows):
    """Every p; with more than 25 rows the p = 2 distance takes PyTorch's product form."""
    torch.manual_seed(0)
    n, m = rows
    x1, x2 = torch.randn(2, n, 5), torch.randn(2, m, 5)
    if p == 0.0:
        x2[:, :, :2] = x1[:, :1, :2]           # some coordinates equal: p = 0 counts the others
    check_from_torch(Fn(lambda a, b: torch.cdist(a, b, p=p)), (x1, x2), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5])
def test_pdist(p):
    torch.manual_seed(0)
    check_from_torch(Fn(lambda x: F.pdist(x, p=p)), (torch.randn(7, 5),), atol=1e-4, rtol=1e-5)
