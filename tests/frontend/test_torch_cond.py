"""from_torch on torch.cond: both branches are converted inline and a `where` on the predicate
picks each output (torch.cond gives the branches' outputs the same shapes and dtypes); a
predicate known when the graph is built converts the branch it picks only.  Each against torch
eager, on inputs that take both branches."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

from torch import nn  # noqa: E402
from torch_helpers import Fn, eager  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_torch  # noqa: E402


class Gate(nn.Module):
    """Two heads, one chosen per call by the sign of the input's sum; two outputs per branch,
    and a nested cond in the false branch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 6)

    def forward(self, x):
        def yes(x):
            h = self.a(x).relu()
            return h, h.sum(-1)

        def no(x):
            h = torch.cond(x.mean() > -0.3, lambda x: self.b(x) * 2, lambda x: self.b(x).tanh(), (x,))
            return h, h.amax(-1)

        y, s = torch.cond(x.sum() > 0, yes, no, (x,))
        return y + 1, s


def _check(model, module, x):
    got = model(x.numpy())
    want = eager(module, (x,))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)


def test_a_data_predicate_picks_per_call():
    module = Gate().eval()
    model = tensorforge.compile(from_torch(module, (torch.randn(3, 6),)))
    taken = set()
    gen = torch.Generator().manual_seed(1)
    for k in range(12):
        x = torch.randn(3, 6, generator=gen) + (0.4 if k % 3 == 0 else -0.6 if k % 3 == 1 else -0.1)
        taken.add((bool(x.sum() > 0), bool(x.mean() > -0.3)))
        _check(model, module, x)
    assert len(taken) >= 3                      # the true branch and both of the nested one


def test_a_predicate_known_when_built_converts_one_branch():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    flag = torch.tensor(True)
    module = Fn(lambda x, f: torch.cond(f, lambda x: a(x), lambda x: b(x) * 3, (x,)), flag)
    graph = from_torch(module, (torch.randn(2, 4),))
    assert [n.op for n in graph.nodes].count("dense") == 1 and "where" not in [n.op for n in graph.nodes]
    x = torch.randn(2, 4)
    np.testing.assert_allclose(tensorforge.compile(graph)(x.numpy())[0], eager(module, (x,))[0], atol=1e-5)


def test_with_a_dynamic_batch():
    module = Gate().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    model = tensorforge.compile(from_torch(module, (torch.randn(3, 6),), dynamic_shapes={"x": {0: batch}}))
    gen = torch.Generator().manual_seed(2)
    for n, shift in ((5, 0.5), (2, -0.7), (7, 0.0)):
        _check(model, module, torch.randn(n, 6, generator=gen) + shift)


def test_an_unsupported_op_in_a_branch_is_named():
    from tensorforge.frontend.onnx import UnsupportedOpsError
    module = Fn(lambda x: torch.cond(x.sum() > 0, lambda x: torch.special.bessel_j0(x), lambda x: x * 2, (x,)))
    with pytest.raises(UnsupportedOpsError, match=r"aten.special_bessel_j0.default"):
        from_torch(module, (torch.randn(3),))


def test_through_torch_compile():
    """Dynamo keeps torch.cond in its graph; the backend's trace holds the branches as graph
    modules, converted where the cond is (they failed the user's call before)."""
    import warnings

    from tensorforge.frontend import torch_dynamo
    torch_dynamo.register()
    torch._dynamo.reset()
    module = Gate().eval()
    gen = torch.Generator().manual_seed(3)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge")
        for shift in (0.5, -0.7, -0.1):
            x = torch.randn(3, 6, generator=gen) + shift
            for g, w in zip(fast(x), module(x)):
                np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5, rtol=0)
    torch._dynamo.reset()
    assert not [str(w.message) for w in caught if "eager PyTorch" in str(w.message)]
