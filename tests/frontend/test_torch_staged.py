"""from_torch on modules whose sizes depend on their data (frontend/torch_staged.py): x[mask],
torch.nonzero, torch.masked_select, alone and chained, with weights, with a symbolic batch, with
empty selections; each call's outputs against torch eager on inputs the export never saw."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

from torch import nn  # noqa: E402
from torch_helpers import Fn, eager  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_torch  # noqa: E402
from tensorforge.frontend.torch_staged import StagedTorchProgram  # noqa: E402
from tensorforge.staged import StagedTorchModel  # noqa: E402


class Filter(nn.Module):
    """Rows whose score clears a threshold, through a linear head; a detector's post-processing."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.score = nn.Linear(8, 1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        keep = self.score(x).squeeze(-1) > 0
        rows = x[keep]
        return self.head(rows).relu(), rows.size(0) * torch.ones(1), torch.nonzero(keep)


def _check(model, module, args, atol=1e-5):
    got = model(*[a.numpy() for a in args])
    want = eager(module, args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, atol=atol, rtol=1e-5)


def test_mask_nonzero_and_masked_select_match_eager_on_new_data():
    def f(x):
        y = x[x.sum(-1) > 0]
        return (y * 2).view(y.size(0), 2, 4).mean(1), torch.nonzero(x > 0.5), torch.masked_select(x, x < -1).sum()

    module = Fn(f)
    program = from_torch(module, (torch.randn(6, 8),))
    assert isinstance(program, StagedTorchProgram)
    assert program.host_ops == ["aten.index.Tensor", "aten.masked_select.default", "aten.nonzero.default"]
    model = tensorforge.compile(program)
    assert isinstance(model, StagedTorchModel)
    gen = torch.Generator().manual_seed(1)
    for _ in range(4):
        _check(model, module, (torch.randn(6, 8, generator=gen),))


def test_selected_rows_through_weights_run_on_batch_buckets():
    """The selected rows lead the next stretch's only input, and a linear layer keeps rows apart:
    a count that is not a bucket runs as chunks of the buckets, so new counts compile nothing."""
    module = Filter().eval()
    model = tensorforge.compile(from_torch(module, (torch.randn(16, 8),)))
    gen = torch.Generator().manual_seed(2)
    for _ in range(8):
        _check(model, module, (torch.randn(16, 8, generator=gen),))
    stretch = model.info["stages"][1]
    assert stretch["batch_split"]["symbol"] is not None
    # 8 calls, counts 0..16: the stretch compiled only buckets (1, 2, 4, 8, 16 and the empty one)
    assert stretch["specializations"] <= 7, stretch


def test_empty_selection():
    module = Filter().eval()
    model = tensorforge.compile(from_torch(module, (torch.randn(16, 8),)))
    x = -torch.ones(16, 8) * 100 * torch.sign(module.score.weight.detach())    # every score far below 0
    assert not (module.score(x) > 0).any()
    _check(model, module, (x,))


def test_symbolic_batch_and_mask():
    module = Filter().eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    program = from_torch(module, (torch.randn(16, 8),), dynamic_shapes={"x": {0: batch}})
    model = tensorforge.compile(program)
    gen = torch.Generator().manual_seed(3)
    for rows in (16, 3, 40, 1):
        _check(model, module, (torch.randn(rows, 8, generator=gen),))
    with pytest.raises(ValueError, match=r"input 'x'.*outside the range \[1, 64\]"):
        model(np.zeros((65, 8), np.float32))


def test_mask_of_an_input_and_chained_selections():
    def f(x, m):
        a = x[m]                    # a mask given by the caller, over the first two axes
        b = a[a[:, 0] > 0]          # a selection of a selection
        return b.exp(), torch.nonzero(m)

    module = Fn(f)
    x, m = torch.randn(3, 4, 5), torch.rand(3, 4) > 0.5
    model = tensorforge.compile(from_torch(module, (x, m)))
    gen = torch.Generator().manual_seed(4)
    for _ in range(3):
        _check(model, module, (torch.randn(3, 4, 5, generator=gen), torch.rand(3, 4, generator=gen) > 0.3))
    with pytest.raises(TypeError, match=r"input 'xs_1': expected dtype bool, got float32"):
        model(x.numpy(), m.float().numpy())


def test_a_size_read_from_a_selection():
    """torch.zeros(n) with n the count of a selection: the stretch reads the size from the
    selection's shape, so the selection is passed to it even where nothing else reads it."""
    module = Fn(lambda x: torch.zeros(x[x > 0].size(0), 3) + x.sum())
    model = tensorforge.compile(from_torch(module, (torch.randn(10),)))
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        _check(model, module, (torch.randn(10, generator=gen),))


def test_ops_of_several_outputs_after_a_selection():
    """A layer norm and a top-k over the selected rows: ops whose value is a tuple (decomposed
    layer norm, topk's values and indices) belong to the stretch like any other."""
    torch.manual_seed(0)
    norm = nn.LayerNorm(8)
    module = Fn(lambda x: (norm(x[x[:, 0] > 0]).topk(3, dim=-1).values, x.mean(0)))
    model = tensorforge.compile(from_torch(module, (torch.randn(12, 8),)))
    gen = torch.Generator().manual_seed(6)
    for _ in range(3):
        _check(model, module, (torch.randn(12, 8, generator=gen),))


def test_ops_whose_size_only_data_gives_and_that_have_no_host_form_are_refused():
    from tensorforge.frontend.onnx import UnsupportedOpsError
    with pytest.raises(UnsupportedOpsError, match=r"aten.repeat_interleave.Tensor"):
        from_torch(Fn(lambda x, n: torch.repeat_interleave(x, n) * 2), (torch.randn(3), torch.tensor([1, 2, 0])))
    with pytest.raises(NotImplementedError, match=r"a float one that only arithmetic reads"):
        from_torch(Fn(lambda x: torch.clamp(x, max=x.max().item())), (torch.randn(3),))


class Trim(nn.Module):
    """Padding trimmed to the longest sequence of the batch: `.item()` used as a size (a slice's
    end, arange's length) and as a number."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(8, 8)

    def forward(self, x, lengths):
        n = lengths.max().item()
        y = self.proj(x[:, :n]).relu()
        return y.sum(1) / n, torch.arange(n) * 2


def test_item_used_as_a_size():
    """The stretch after the `.item()` is specialized on its value (read on the host), so the
    slice and arange it sizes are static there; a value seen before compiles nothing, and one
    past the padded length is clamped by the slice as in PyTorch."""
    module = Trim().eval()
    model = tensorforge.compile(from_torch(module, (torch.randn(2, 10, 8), torch.tensor([3, 5]))))
    gen = torch.Generator().manual_seed(10)
    for lengths in ([3, 5], [7, 2], [5, 1], [12, 4]):
        _check(model, module, (torch.randn(2, 10, 8, generator=gen), torch.tensor(lengths)))
    assert model.info["host_ops"] == ["aten._local_scalar_dense.default"]
    assert model.info["stages"][1]["specializations"] == 3         # 5, 7 and 12
    with pytest.raises(TypeError, match="expected dtype int64"):
        model(np.zeros((2, 10, 8), np.float32), np.array([1.0, 2.0], np.float32))


def test_unique_with_inverse_and_counts():
    """torch.unique: the values, each element's position among them and the counts; the values'
    count is the data's, and the stretch after it (a head over the distinct values) runs per count."""
    def f(x):
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        return (values * 2).exp(), inverse, counts.float() / x.numel(), torch.unique(x.round()).sum()

    module = Fn(f)
    model = tensorforge.compile(from_torch(module, ((torch.randn(5, 4) * 3).round(),)))
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):
        _check(model, module, ((torch.randn(5, 4, generator=gen) * 3).round(),))
    with pytest.raises(NotImplementedError, match=r"sorted=False"):
        from_torch(Fn(lambda x: torch.unique(x, sorted=False) * 2), (torch.tensor([2.0, 1.0, 2.0]),))


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive(dim):
    """torch.unique_consecutive: runs of equal elements (of equal slices along `dim`), each run's
    index per element and the runs' lengths; NaNs start runs of their own."""
    def f(x):
        values, inverse, counts = torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
        return values * 2, inverse, counts, torch.unique_consecutive(x, dim=dim).sum()

    module = Fn(f)
    model = tensorforge.compile(from_torch(module, ((torch.rand(6, 4) * 2).floor(),)))
    gen = torch.Generator().manual_seed(8)
    for k in range(4):
        x = (torch.rand(6, 4, generator=gen) * (1 + k)).floor()
        x[1] = x[0]                                  # a repeated row for dim=0
        if k == 3 and dim is None:
            x[2, 1:3] = float("nan")
        _check(model, module, (x,))


def test_selected_rows_written_back_after_a_layer():
    """y[keep] = head(x[keep]): the values are one row per kept position, from a layer (not an
    element-wise function the masked-update rewrite turns into a where), so the index_put runs in
    the stretch after the selection, where the count is known."""
    torch.manual_seed(0)
    head = nn.Linear(8, 8)

    def f(x):
        keep = x[:, 0] > 0
        y = x.clone()
        y[keep] = head(x[keep]).tanh()
        return y * 2

    module = Fn(f)
    model = tensorforge.compile(from_torch(module, (torch.randn(10, 8),)))
    gen = torch.Generator().manual_seed(9)
    for _ in range(4):
        _check(model, module, (torch.randn(10, 8, generator=gen),))


def test_an_item_with_no_known_bounds():
    """Without an op that bounds it (arange does: n >= 0), an .item()'s symbol ranges over every
    integer; the program was refused while reading that range."""
    module = Fn(lambda x, lengths: x[:, :lengths.max().item()].sum(1))
    model = tensorforge.compile(from_torch(module, (torch.randn(2, 10, 3), torch.tensor([3, 5]))))
    for lengths in ([3, 5], [8, 1]):
        _check(model, module, (torch.randn(2, 10, 3), torch.tensor(lengths)))


def test_a_float_item_read_by_arithmetic_is_an_input_of_the_next_stretch():
    """x / x.abs().max().item(): the float is a 0-d input of the stretch after it, not a
    constant, so a new value compiles nothing."""
    def f(x):
        s = x.abs().max().item()
        return x / s, (x * s > 1.0).float(), x - s

    module = Fn(f)
    model = tensorforge.compile(from_torch(module, (torch.randn(4, 3),)))
    gen = torch.Generator().manual_seed(11)
    for k in range(3):
        _check(model, module, (torch.randn(4, 3, generator=gen) * (k + 1),))
    assert [stage["specializations"] for stage in model.info["stages"]] == [1, 1]
