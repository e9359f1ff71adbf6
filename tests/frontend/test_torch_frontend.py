"""from_torch (torch.export -> core ATen -> Graph) against torch eager: the paper's workloads as
torch.nn modules (small sizes where the architecture allows), nn.TransformerEncoder and nn.LSTM,
and the errors for what is not supported."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch")

from torch import nn  # noqa: E402
from torch_helpers import check_from_torch, workloads  # noqa: E402

from tensorforge.frontend import from_torch  # noqa: E402
from tensorforge.frontend.onnx import UnsupportedOpsError  # noqa: E402


@pytest.fixture(scope="module")
def models():
    return workloads()


def _get(models, name: str):
    module, feeds = models.get(name, seed=0)
    return module, tuple(torch.from_numpy(a) for a in feeds.values())


def test_dqn(models):
    check_from_torch(*_get(models, "dqn"))


def test_dcgan_generator_small(models):
    torch.manual_seed(0)
    gen = models.DCGANGenerator(latent=16, width=8)
    models.randomize_batch_norms(gen, torch.Generator().manual_seed(1))
    check_from_torch(gen, (torch.randn(2, 16, 1, 1),))


def test_bert_layers_small(models):
    torch.manual_seed(0)

    class SmallBert(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 32)
            self.layers = nn.ModuleList(models.EncoderLayer(32, 4, 64) for _ in range(2))

        def forward(self, ids):
            x = self.emb(ids)
            for layer in self.layers:
                x = layer(x)
            return x

    check_from_torch(SmallBert(), (torch.randint(0, 50, (2, 9)),))


def test_lstm_language_model_small():
    torch.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.lstm = nn.Embedding(40, 16), nn.LSTM(16, 16, num_layers=2)
            self.decoder = nn.Linear(16, 40)

        def forward(self, tokens):
            return self.decoder(self.lstm(self.embedding(tokens))[0])

    check_from_torch(LM(), (torch.randint(0, 40, (6, 2)),))


def test_lstm_returns_output_and_states():
    torch.manual_seed(0)
    check_from_torch(nn.LSTM(8, 12, num_layers=2, batch_first=True), (torch.randn(3, 5, 8),))


def test_transformer_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    check_from_torch(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(2, 7, 32),))


def test_small_ops_mix():
    """Elementwise ops with scalars, integer promotion, slicing, select, cat, pads, reductions."""
    torch.manual_seed(0)

    class Mix(nn.Module):
        def forward(self, x, k):
            y = torch.cat([x[:, 1:3] * 2.0 - 1, x[:, ::2].sqrt()], dim=1) / 3
            z = nn.functional.pad(y, (1, 2)).mean(dim=-1, keepdim=True) + x.select(1, 0).unsqueeze(1).amax(-1, True)
            w = torch.where(x > 0.5, x.rsqrt(), -x) ** 3
            return z, w.sum(dim=(0, 1)), (k + 1) / 2, nn.functional.gelu(x, approximate="tanh").clamp(0.1, 0.4)

    check_from_torch(Mix(), (torch.rand(3, 4, 5) + 0.1, torch.arange(6).reshape(2, 3)))


@pytest.mark.slow
def test_resnet18(models):
    module, (x,) = _get(models, "resnet18")
    check_from_torch(module, (x[:, :, :64, :64].contiguous(),), atol=1e-4)


@pytest.mark.slow
def test_mobilenet_v1(models):
    module, (x,) = _get(models, "mobilenet_v1")       # 28 layers: atol 1e-3
    check_from_torch(module, (x[:, :, :64, :64].contiguous(),), atol=1e-3)


@pytest.mark.slow
def test_bert_small_full_width(models):
    module, (ids,) = _get(models, "bert_encoder")
    check_from_torch(module, (ids[:, :32].contiguous(),))


@pytest.mark.slow
def test_lstm_language_model(models):
    module, (tokens,) = _get(models, "lstm_lm")
    check_from_torch(module, (tokens,))


def test_unsupported_op_names_op_and_node():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x) + torch.special.i1e(x)

    with pytest.raises(UnsupportedOpsError) as info:
        from_torch(Odd(), (torch.randn(3, 4),))
    text = str(info.value)
    assert "aten.special_bessel_j0.default: nodes special_bessel_j0" in text
    assert "aten.special_i1e.default: nodes special_i1e" in text


def test_dynamic_batch_and_sequence_length_transformer_encoder():
    """torch.export.Dim stays a symbol: one compile, called with other batch sizes and sequence
    lengths, each matching eager; a shape outside the Dim's range is a clear error."""
    import numpy as np

    import tensorforge
    from tensorforge.frontend.torch import TorchProgram
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.0)
    enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=64)
    program = from_torch(enc, (torch.randn(2, 5, 16),), dynamic_shapes={"src": {0: batch, 1: seq}})
    assert isinstance(program, TorchProgram)
    model = tensorforge.compile(program)
    for b, t in ((1, 3), (4, 9), (2, 5), (1, 3)):
        x = torch.randn(b, t, 16)
        with torch.no_grad():
            want = enc(x).numpy()
        np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)
    assert model.info["specializations"] == 3
    with pytest.raises(ValueError, match="input 'src': dimension 0 .* is 9, outside the range"):
        model(np.zeros((9, 3, 16), np.float32))
    with pytest.raises(ValueError, match=r"input 'src': expected shape \[.*, .*, 16\], got \(2, 3, 8\)"):
        model(np.zeros((2, 3, 8), np.float32))


def test_dynamic_batch_lstm():
    """nn.LSTM with a symbolic batch (torch.export specializes nn.LSTM's sequence length itself:
    a Dim on it is "Constraints violated")."""
    import numpy as np

    import tensorforge
    torch.manual_seed(0)
    lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True).eval()

    class Last(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x):
            return self.lstm(x)[0]

    module = Last().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    model = tensorforge.compile(from_torch(module, (torch.randn(2, 6, 8),), dynamic_shapes={"x": {0: batch}}))
    for b in (2, 5, 1):
        x = torch.randn(b, 6, 8)
        with torch.no_grad():
            want = module(x).numpy()
        np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", [dict(), dict(min=0)])
def test_dim_without_an_upper_bound(dim):
    """A Dim with no max (torch gives it an integer infinity, which calls itself finite) and one
    that admits an empty batch."""
    import numpy as np

    import tensorforge
    module = nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()
    model = tensorforge.compile(from_torch(module, (torch.randn(4, 8),),
                                           dynamic_shapes={"input": {0: torch.export.Dim("batch", **dim)}}))
    for rows in (3, 1, 100) + ((0,) if dim else ()):
        x = torch.randn(rows, 8)
        with torch.no_grad():
            want = module(x).numpy()
        np.testing.assert_allclose(model(x)[0], want, rtol=1e-5, atol=1e-5)


def test_rejects_a_non_module():
    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        from_torch(lambda x: x, (torch.randn(2),))


def test_weights_are_params_and_inputs_are_user_inputs():
    torch.manual_seed(0)
    graph = from_torch(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4).eval()), (torch.randn(2, 3),))
    assert [v.shape for v in graph.inputs] == [(2, 3)]
    assert graph.params and all(v not in graph.inputs for v in graph.params)


def test_spatial_mean_and_max_are_global_pooling():
    """AdaptiveAvgPool2d(1) (a mean over H and W, kept) and amax over every spatial axis become
    global pooling, which runs on the convolution's blocked layout; other means stay reductions."""

    class Pools(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.pool = nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1)

        def forward(self, x):
            y = self.conv(x)
            return self.pool(y), y.amax(dim=(2, 3), keepdim=True), y.mean(dim=1)

    torch.manual_seed(0)
    module, args = Pools().eval(), (torch.randn(2, 3, 9, 9),)
    ops = [n.op for n in from_torch(module, args).nodes]
    assert ops.count("global_avg_pool") == 1 and ops.count("global_max_pool") == 1 and ops.count("reduce_mean") == 1
    check_from_torch(module, args, atol=1e-5)


def test_linear_on_a_batch_of_sequences_is_one_product():
    """from_torch folds nn.Linear on a [batch, seq, features] input (view, addmm, view after the
    decompositions) back into one product on the 3-D input, as the torch.compile backend does."""
    torch.manual_seed(0)
    module, args = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval(), (torch.randn(2, 5, 16),)
    ops = [n.op for n in from_torch(module, args).nodes]
    assert "reshape" not in ops and "dense" not in ops
    check_from_torch(module, args, atol=1e-5)
