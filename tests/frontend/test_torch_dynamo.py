"""torch.compile(model, backend="tensorforge"): compiled graphs match eager, updated weights
recompile, unsupported ops fall back to eager with one warning line naming them."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch.compile backend needs torch")

from torch import nn  # noqa: E402
from torch_helpers import eager, workloads  # noqa: E402

from tensorforge.frontend import torch_dynamo  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch_dynamo.register()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled(module, args, **kwargs):
    fast = torch.compile(module.eval(), backend="tensorforge", **kwargs)
    with torch.no_grad():
        out = fast(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in outs]


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 4 * 4, 10)).eval()


def test_cnn_matches_eager():
    module, x = _cnn(), torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = _compiled(module, (x,))
    _no_fallback(caught)
    for got, want in zip(outs, eager(module, (x,))):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def _no_fallback(caught) -> None:
    assert not [str(w.message) for w in caught if "eager PyTorch" in str(w.message)]


def test_dqn_and_transformer_encoder_match_eager():
    """The encoder in eval mode under no_grad takes PyTorch's fused fast path: it is decomposed
    and compiled, not left to eager."""
    module, feeds = workloads().get("dqn")
    x = torch.from_numpy(feeds["frames"])
    np.testing.assert_allclose(_compiled(module, (x,))[0], eager(module, (x,))[0], atol=1e-4, rtol=0)
    torch._dynamo.reset()
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2,
                                enable_nested_tensor=False).eval()
    src = torch.randn(2, 5, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _compiled(enc, (src,))[0]
    _no_fallback(caught)
    np.testing.assert_allclose(got, eager(enc, (src,))[0], atol=1e-4, rtol=0)


def test_updated_weight_recompiles():
    module, x = _cnn(), torch.randn(2, 3, 8, 8)
    fast = torch.compile(module, backend="tensorforge")
    with torch.no_grad():
        fast(x)
        module[0].weight.mul_(2.0)           # in place: same object, new version
        got = fast(x).numpy()
    np.testing.assert_allclose(got, eager(module, (x,))[0], atol=1e-4, rtol=0)


def test_unsupported_op_falls_back_with_one_line():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x) + 1

    x = torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _compiled(Odd(), (x,))[0]
    np.testing.assert_allclose(got, (torch.special.bessel_j0(x) + 1).numpy())
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "\n" not in ours[0]
    assert "runs in eager PyTorch" in ours[0] and "aten.special_bessel_j0.default" in ours[0]


def test_changing_batch_sizes_run_compiled_code(monkeypatch):
    """After a second input shape dynamo hands over a shape-generic graph; the backend compiles it
    once per concrete shape instead of leaving it to eager PyTorch."""
    built = []
    original = torch_dynamo._Variant.__init__

    def counting(self, gm, inputs, target, threads):
        built.append(tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor) and x.ndim == 2
                           and not isinstance(x, nn.Parameter)))
        original(self, gm, inputs, target, threads)

    monkeypatch.setattr(torch_dynamo._Variant, "__init__", counting)
    module = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    fast = torch.compile(module, backend="tensorforge")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 8)
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)
    assert not [w for w in caught if "eager" in str(w.message)]
    assert {(3, 8), (5, 8)} <= {s for shapes in built for s in shapes}
