"""from_torch on writes into positions (scatter, scatter_add, scatter_reduce, index_put in its
forms: x[idx] = v, x[:, idx] += v, x[mask] = v, index_fill, index_copy, index_add), sliding
windows (unfold) and lookups in sorted lists (searchsorted, bucketize), each against torch eager
(frontend/torch_ops/scatter.py).  Each was "not supported" before."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

from torch_helpers import Fn, check_from_torch  # noqa: E402


def _x(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape)


def test_scatter_forms():
    index = torch.tensor([[0, 2, 1, 0], [1, 1, 3, 2]])       # repeats: combined by the reduction

    def f(x, src, idx):
        return (x.scatter(1, idx, src), x.scatter(1, idx, 2.5), x.scatter_add(1, idx, src),
                torch.zeros(2, 5).scatter_add(1, idx, src[:, :4]),
                x.scatter_reduce(1, idx, src, "amax"), x.scatter_reduce(1, idx, src, "amin", include_self=False),
                x.scatter_reduce(1, idx, src, "prod"), x.scatter_reduce(1, idx, src, "sum", include_self=False),
                x.scatter(0, idx[:, :2] % 2, src[:, :2]))
    # src larger than the index: PyTorch reads only the index's corner of it
    check_from_torch(Fn(f, index), (_x(2, 5), _x(3, 6) * 2), rtol=1e-6)


def test_scatter_int64_amax_without_self():
    index = torch.tensor([[0, 0, 2]])
    check_from_torch(Fn(lambda x, i: x.scatter_reduce(1, i, x[:, :3] * 3, "amax", include_self=False), index),
                     (torch.tensor([[5, -4, 2, 7]]),))


def test_index_put_integer_indices():
    rows, cols = torch.tensor([0, 3, -1]), torch.tensor([1, 0, 2])

    def f(x, r, c):
        a = x.clone()
        a[r] = 0.5                     # whole rows, one value
        b = x.clone()
        b[:, c] = x[:, :3] * 2         # columns of every row, values per position
        d = x.clone()
        d[r, c] = torch.tensor([1.0, 2.0, 3.0])
        e = x.index_put((r,), torch.ones(4), accumulate=True)
        return a, b, d, e, x.index_fill(1, c, -1.0), x.index_add(0, torch.tensor([1, 1]), x[:2]), \
            x.index_copy(1, torch.tensor([3, 0]), x[:, 1:3])
    check_from_torch(Fn(f, rows, cols), (_x(5, 4),), rtol=1e-6)


def test_index_put_on_a_middle_axis():
    idx = torch.tensor([[2, 0], [1, 1]])

    def f(x, i):
        y = x.clone()
        y[:, i] = x[:, :2, None, :].expand(3, 2, 2, 6) * 3     # values broadcast to (3, 2, 2, 6)
        return y
    check_from_torch(Fn(f, idx), (_x(3, 4, 6),), rtol=1e-6)


def test_index_put_with_a_mask():
    def f(x):
        a = x.clone()
        a[a < 0] = 0.0
        b = x.clone()
        b[x[:, 0] > 0] = torch.arange(4.0)      # one row written to every selected row
        c = x.clone()
        c[x[:, 1] < 0] = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
        d = x.clone()
        d.index_put_((x[:, 2] > 0,), torch.tensor(3.0), accumulate=True)
        return a, b, c, d
    check_from_torch(Fn(f), (_x(6, 4),))


def test_index_put_with_a_value_per_selected_position():
    """x[mask] = v with one value (row) per selected position, the count given by v's shape:
    each masked position reads the value of its rank among the selected ones; with a slice
    before the mask, with a 2-D mask, with accumulate."""
    def f(x, m, v, m2, w):
        a = x.index_put((m,), v)
        b = x.index_put((m,), v, accumulate=True)
        y = x.reshape(2, 3, 4).clone()
        y[:, m2] = w                            # w: (2, count, 4) or (count, 4), broadcast over the 2
        z = x.reshape(3, 8).clone()
        z[m2] = v[:2, :1]                       # one value per selected row (2 of 3), broadcast along it
        return a, b, y, z

    gen = torch.Generator().manual_seed(3)
    for m, m2 in ((torch.tensor([True, False, True, False, True, False]), torch.tensor([False, True, True])),
                  (torch.tensor([False, False, True, True, True, False]), torch.tensor([True, True, False]))):
        v, w = torch.randn(3, 4, generator=gen), torch.randn(2, 2, 4, generator=gen)
        check_from_torch(Fn(f), (_x(6, 4), m, v, m2, w))
    check_from_torch(Fn(lambda x, m, v: x.index_put((m,), v)), (_x(6, 4), torch.zeros(6, dtype=torch.bool),
                                                                 torch.zeros(0, 4)))


@pytest.mark.parametrize("dim,size,step", [(1, 4, 2), (-1, 3, 1), (0, 2, 3)])
def test_unfold(dim, size, step):
    check_from_torch(Fn(lambda x: x.unfold(dim, size, step) * 2), (_x(5, 9, 7),))


def test_searchsorted_and_bucketize():
    bounds = torch.tensor([-1.0, -0.25, 0.0, 0.5, 2.0])
    rows = torch.sort(torch.randn(3, 6), dim=-1).values

    def f(x, b, r):
        return (torch.bucketize(x, b), torch.bucketize(x, b, right=True), torch.searchsorted(b, x),
                torch.searchsorted(b, x, side="right", out_int32=True), torch.searchsorted(r, x[:3, :4].contiguous()),
                torch.bucketize(torch.tensor([0.0, 0.5, 3.0]), b))
    x = _x(4, 5)
    x[0, :3] = torch.tensor([-1.0, 0.0, 2.0])          # values equal to boundaries: left and right differ
    check_from_torch(Fn(f, bounds, rows), (x,))


def test_masked_updates_of_selected_values_stay_static():
    """x[mask] += v and x[mask] = f(y[mask]) export as an index_put of values computed from the
    selection; with element-wise f that is where(mask, f(y), x): a static graph, no staging."""
    from tensorforge.frontend import from_torch
    from tensorforge.graph.ir import Graph

    def f(x, y):
        a = x.clone()
        a[x > 1] += 10.0
        b = x.clone()
        m = x[:, 0] > 0
        b[m] = torch.sigmoid(y[m]) * 2 + x[m] - torch.tensor([1.0, 2.0, 3.0])
        c = x.clone()
        c[y < 0] *= -0.5
        return a, b, c

    module = Fn(f)
    args = (_x(5, 3), _x(5, 3).flip(0))
    assert isinstance(from_torch(module, args), Graph)
    check_from_torch(module, args)


def test_slice_and_select_assignments():
    """y[:, 2:4] = z, y[:, 1] = ..., y[::2, 0] = c, y[1:, -1] = ...: functionalization writes
    them as slice_scatter and select_scatter (and copy)."""
    def f(x, z):
        y = x.clone()
        y[:, 1] = z[:, 0]
        y[:, 2:4] = z
        y[::2, 0] = 7.0
        y[1:, -1] = x[:-1, 0] * 2
        y[:, 3:6:2] = -z
        return y
    check_from_torch(Fn(f), (_x(5, 6), _x(5, 2) + 1))


def test_masked_scatter():
    def f(x, y):
        return x.masked_scatter(x > 0, y * 10), x.masked_scatter(x[:, :1] < 0, torch.arange(40.0).view(5, 8))
    check_from_torch(Fn(f), (_x(5, 4), _x(6, 4)))
