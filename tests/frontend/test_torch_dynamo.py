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


def _matches_eager(module, args, atol: float = 1e-4) -> None:
    """torch.compile's outputs match eager PyTorch's, and no graph was left to eager PyTorch."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = _compiled(module, args)
    _no_fallback(caught)
    for got, want in zip(outs, eager(module, args)):
        np.testing.assert_allclose(got, want, atol=atol, rtol=0)


def test_cnn_matches_eager():
    _matches_eager(_cnn(), (torch.randn(2, 3, 8, 8),))


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
    _matches_eager(enc, (torch.randn(2, 5, 16),))


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


@pytest.mark.parametrize("buckets, want", [((), {(2, 8), (3, 8), (5, 8)}),
                                           (None, {(2, 8), (1, 8), (4, 8)})], ids=["per_shape", "buckets"])
def test_changing_batch_sizes_run_compiled_code(monkeypatch, buckets, want):
    """After a second input shape dynamo hands over a shape-generic graph; the backend compiles it
    once per concrete shape instead of leaving it to eager PyTorch, or, with batch buckets (the
    default), once per bucket: 3 runs as 2 + 1 and 5 as 4 + 1."""
    built = []
    original = torch_dynamo._Variant.__init__

    def counting(self, gm, inputs, *rest):
        built.append(tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor) and x.ndim == 2
                           and not isinstance(x, nn.Parameter)))
        original(self, gm, inputs, *rest)

    monkeypatch.setattr(torch_dynamo._Variant, "__init__", counting)
    module = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    options = {} if buckets is None else {"options": {"batch_buckets": buckets}}
    fast = torch.compile(module, backend="tensorforge", **options)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in (2, 3, 5, 3, 7):
            x = torch.randn(batch, 8)
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)
    assert not [w for w in caught if "eager" in str(w.message)]
    shapes = {s for shapes in built for s in shapes}
    assert want <= shapes and (buckets is not None or shapes == want)      # 7 = 4 + 2 + 1: nothing new


def test_a_graph_that_mixes_batch_rows_is_not_cut():
    """x - x.mean(0) reads every row: batch 3 runs as one variant, equal to eager."""
    class Centered(nn.Module):
        def forward(self, x):
            return torch.relu(x - x.mean(0, keepdim=True))

    module = Centered().eval()
    fast = torch.compile(module, backend="tensorforge", dynamic=True)
    with torch.no_grad():
        for batch in (3, 5):
            x = torch.randn(batch, 6)
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)


def test_updated_buffer_recompiles_and_weights_convert_once(monkeypatch):
    """Weights are converted to arrays when a graph compiles, never per call; an in-place update
    of a batch-norm buffer (folded into the convolution) is seen on the next call."""
    converted = []
    original = torch_dynamo.to_numpy
    monkeypatch.setattr(torch_dynamo, "to_numpy", lambda t: converted.append(t) or original(t))
    module, x = _cnn(), torch.randn(2, 3, 8, 8)
    fast = torch.compile(module, backend="tensorforge")
    with torch.no_grad():
        fast(x)
        baked = len(converted)
        for _ in range(3):
            fast(x)
        assert len(converted) == baked
        module[1].running_var.add_(1.0)
        got = fast(x).numpy()
    np.testing.assert_allclose(got, eager(module, (x,))[0], atol=1e-4, rtol=0)
    assert len(converted) == 2 * baked      # the recompile bakes the same weights (buffers too)
    with torch.no_grad():
        module[1].running_mean.add_(1.0)    # and so sees a second update
        got = fast(x).numpy()
    np.testing.assert_allclose(got, eager(module, (x,))[0], atol=1e-4, rtol=0)
    assert len(converted) == 3 * baked


def test_two_instances_of_one_module_class_compile_once_each(monkeypatch):
    """Dynamo hands two instances of one module class the same graph (their parameters are its
    inputs): calls that alternate between them run a variant per instance, not a recompile per
    call, and an in-place update of one instance's weight recompiles that one only."""
    built = []
    original = torch_dynamo._Variant.__init__
    monkeypatch.setattr(torch_dynamo._Variant, "__init__",
                        lambda self, *args, **kwargs: built.append(1) or original(self, *args, **kwargs))
    torch.manual_seed(0)
    first, second = (nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3)).eval() for _ in range(2))
    fast_first = torch.compile(first, backend="tensorforge")
    fast_second = torch.compile(second, backend="tensorforge")
    x = torch.randn(2, 8)
    with torch.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(fast_first(x).numpy(), first(x).numpy(), atol=1e-5, rtol=0)
            np.testing.assert_allclose(fast_second(x).numpy(), second(x).numpy(), atol=1e-5, rtol=0)
        assert len(built) == 2
        second[0].weight.mul_(-1.0)
        for _ in range(2):
            np.testing.assert_allclose(fast_first(x).numpy(), first(x).numpy(), atol=1e-5, rtol=0)
            np.testing.assert_allclose(fast_second(x).numpy(), second(x).numpy(), atol=1e-5, rtol=0)
    assert len(built) == 3


def test_weights_held_as_graph_attributes():
    """With dynamo's install_free_tensors the weights reach the backend as attributes of the
    graph module (get_attr nodes), not as inputs: they compile as constants, and an in-place
    update is still seen."""
    module, x = _cnn(), torch.randn(2, 3, 8, 8)
    with torch._dynamo.config.patch(install_free_tensors=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge")
        with torch.no_grad():
            np.testing.assert_allclose(fast(x).numpy(), eager(module, (x,))[0], atol=1e-4, rtol=0)
            module[0].weight.mul_(-1.0)
            got = fast(x).numpy()
    _no_fallback(caught)
    np.testing.assert_allclose(got, eager(module, (x,))[0], atol=1e-4, rtol=0)


def test_inputs_in_grad_mode_inference_mode_and_strided():
    """Inputs that require grad (grad mode on), inference tensors and non-contiguous views all
    run compiled; the outputs carry no autograd history."""
    module = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    fast = torch.compile(module, backend="tensorforge")
    x = torch.randn(5, 8, requires_grad=True)
    got = fast(x)
    assert not got.requires_grad
    np.testing.assert_allclose(got.numpy(), eager(module, (x.detach(),))[0], atol=1e-5, rtol=0)
    with torch.inference_mode():
        y = torch.randn(5, 8)
        np.testing.assert_allclose(fast(y).numpy(), eager(module, (y.clone(),))[0], atol=1e-5, rtol=0)
    z = torch.randn(8, 5).t()               # a transposed view: strides (1, 5)
    with torch.no_grad():
        np.testing.assert_allclose(fast(z).numpy(), eager(module, (z.contiguous(),))[0], atol=1e-5, rtol=0)


def test_inference_tensor_weights_fall_back_with_one_line():
    """Weights made under inference_mode keep no version counter, so updates to them could not be
    seen: the graph runs in eager PyTorch, with a warning that says why."""
    with torch.inference_mode():
        module = nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()
        x = torch.randn(2, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(module, backend="tensorforge")(x)
        want = module(x)
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "inference tensors" in ours[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kwargs", [{}, {"batch_first": True, "num_layers": 2}, {"bidirectional": True, "bias": False}])
def test_lstm_compiles_with_allow_rnn(kwargs):
    """With dynamo's allow_rnn, nn.LSTM reaches the backend as PyTorch's one-layer oneDNN op per
    layer and direction, which compiles to lstm_cell steps instead of falling back."""
    torch.manual_seed(0)
    module = nn.LSTM(6, 5, **kwargs).eval()
    x = torch.randn(3, 4, 6)
    with torch._dynamo.config.patch(allow_rnn=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge")
        with torch.no_grad():
            got, (h, c) = fast(x)
    _no_fallback(caught)
    want, (want_h, want_c) = module(x)
    for a, b in ((got, want), (h, want_h), (c, want_c)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-5, rtol=0)


def test_flattened_linear_layers_become_one_product():
    """nn.Linear on a [batch, seq, features] input reaches the backend as view, addmm, view; it
    is compiled as one product on the 3-D input (no reshapes around it), like the ONNX export."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tensorforge.frontend.torch_convert import convert_graph
    from tensorforge.frontend.torch_decomp import decompositions
    from tensorforge.frontend.torch_linear import fold_flattened_linears
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8, bias=False)).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        traced = make_fx(lambda t: module(t), decomposition_table=decompositions())(x)
        # as the backend traces it: views become view_copy, W^T a clone of permute_copy
        functional = make_fx(torch.func.functionalize(lambda t: module(t), remove="mutations_and_views"),
                             decomposition_table=decompositions())(x)
    assert fold_flattened_linears(functional.graph) == 2
    assert fold_flattened_linears(traced.graph) == 2
    attrs = {n.target: getattr(traced, n.target).detach().numpy() for n in traced.graph.nodes if n.op == "get_attr"}
    placeholder = next(n for n in traced.graph.nodes if n.op == "placeholder")
    graph = convert_graph(traced.graph, {placeholder.name: ("input", None)}, "linears", attributes=attrs)
    assert not [n.op for n in graph.nodes if n.op in ("reshape", "dense")]
    flat = torch.randn(10, 16)                 # a 2-D input has nothing to fold
    with torch.no_grad():
        assert fold_flattened_linears(make_fx(lambda t: module(t), decomposition_table=decompositions())(flat).graph) == 0
    np.testing.assert_allclose(_compiled(module, (x,))[0], eager(module, (x,))[0], atol=1e-5, rtol=0)


def test_batched_matmul_becomes_one_product():
    """torch.matmul on [batch, heads, seq, dim] operands (attention's q k^T) reaches the backend
    as view(bmm(view(expand(q)), view(expand(k^T)))); it compiles as one 4-D matmul."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tensorforge.frontend.torch_convert import convert_graph
    from tensorforge.frontend.torch_decomp import decompositions
    from tensorforge.frontend.torch_linear import fold_flattened_linears

    class Scores(nn.Module):
        def forward(self, q, k):
            return torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / 2.0, dim=-1)

    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    with torch.no_grad():
        traced = make_fx(torch.func.functionalize(Scores(), remove="mutations_and_views"),
                         decomposition_table=decompositions())(q, k)
    assert fold_flattened_linears(traced.graph) == 1
    inputs = {n.name: ("input", None) for n in traced.graph.nodes if n.op == "placeholder"}
    graph = convert_graph(traced.graph, inputs, "scores")
    assert [n.op for n in graph.nodes].count("matmul") == 1
    assert "reshape" not in [n.op for n in graph.nodes]
    np.testing.assert_allclose(_compiled(Scores(), (q, k))[0], eager(Scores(), (q, k))[0], atol=1e-5, rtol=0)


def test_training_mode_runs_in_eager_pytorch():
    """A module in training mode (random dropout, batch statistics that update the running
    ones) is left to eager PyTorch with one warning line: its semantics stay PyTorch's."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5)).train()
    x = torch.randn(2, 3, 6, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            torch.compile(module, backend="tensorforge")(x)
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "runs in eager PyTorch" in ours[0] and "\n" not in ours[0]
    assert module[1].num_batches_tracked.item() == 1 and module[1].running_mean.abs().sum() > 0


def test_buffer_updated_in_place_runs_in_eager_pytorch():
    """A forward that updates a buffer in place cannot be a compiled graph (which returns only
    its outputs): it runs in eager PyTorch, with one warning, and compiling it does not run the
    update an extra time."""

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros(1))

        def forward(self, x):
            self.calls.add_(1.0)
            return x * 2.0

    module, x = Counter().eval(), torch.randn(3)
    fast = torch.compile(module, backend="tensorforge")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            for _ in range(3):
                np.testing.assert_allclose(fast(x).numpy(), (x * 2.0).numpy())
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "in place" in ours[0]
    assert module.calls.item() == 3.0


def test_the_variants_of_a_graph_hold_the_weights_they_derive_alike_once(monkeypatch):
    """Three batch sizes compile three variants; each derives the layers' transposed, packed
    weights again, and all three hold one array of each."""
    from tensorforge.graph.passes.share_equal_params import MIN_BYTES
    built = []
    original = torch_dynamo._Variant.__init__

    def keeping(self, *args):
        original(self, *args)
        built.append(self)

    monkeypatch.setattr(torch_dynamo._Variant, "__init__", keeping)
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 64)).eval()
    fast = torch.compile(module, backend="tensorforge")
    with torch.no_grad():
        for batch in (16, 32, 64):
            x = torch.randn(batch, 256)
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)
    assert len(built) == 3
    held = [{id(a) for a in v.model.executor.params.values() if a.nbytes >= MIN_BYTES} for v in built]
    assert held[0] and held[0] == held[1] == held[2]


def _variants_built(monkeypatch, key) -> list:
    """A list that gets `key(inputs)` of every variant the backend compiles from now on."""
    built: list = []
    original = torch_dynamo._Variant.__init__

    def counting(self, gm, inputs, *rest):
        built.append(key(inputs))
        original(self, gm, inputs, *rest)

    monkeypatch.setattr(torch_dynamo._Variant, "__init__", counting)
    return built


def test_sequence_buckets_pad_a_symbolic_length(monkeypatch):
    """options={"sequence_buckets": ...} with a shape-generic graph: lengths that are not buckets
    run padded to the next one (the first one also exactly, to check), so 5, 7, 12, 3 compile
    the buckets 8 and 16 and the check's 5, and every result matches eager."""
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(8, 8)

        def forward(self, x, mask):
            scores = self.query(x) @ x.transpose(1, 2) + (1.0 - mask[:, None, :].float()) * -1e9
            return scores.softmax(-1) @ x

    built = _variants_built(monkeypatch, lambda inputs: tuple(
        x.shape[1] for x in inputs if isinstance(x, torch.Tensor) and x.dtype == torch.int64))
    torch.manual_seed(0)
    module = Attention().eval()
    fast = torch.compile(module, backend="tensorforge", dynamic=True, options={"sequence_buckets": (8, 16)})
    with torch.no_grad():
        for n in (5, 7, 12, 3, 16):
            x, mask = torch.randn(2, n, 8), torch.ones(2, n, dtype=torch.int64)
            mask[0, n // 2:] = 0
            np.testing.assert_allclose(fast(x, mask).numpy(), module(x, mask).numpy(), rtol=1e-4, atol=1e-5)
    assert sorted(built) == [(5,), (8,), (16,)]


def test_by_default_a_length_that_keeps_changing_gets_buckets(monkeypatch):
    """With no options, a shape-generic graph whose length has taken 8 values pads the next
    ones to the automatic buckets (16, 32, ...) once 3 padded calls matched their exact
    lengths: the generic graph's first 8 lengths compile as they come, the next 3 compile
    themselves and the bucket 16, and the last, 14 and 15, compile nothing; every result
    matches eager."""
    class Attention(nn.Module):
        def forward(self, x, mask):
            scores = x @ x.transpose(1, 2) + (1.0 - mask[:, None, :].float()) * -1e9
            return scores.softmax(-1) @ x

    built = _variants_built(monkeypatch, lambda inputs: next(
        x.shape[1] for x in inputs if isinstance(x, torch.Tensor) and x.dtype == torch.int64))
    module = Attention().eval()
    fast = torch.compile(module, backend="tensorforge", dynamic=True)
    torch.manual_seed(0)
    with torch.no_grad():
        for n in range(2, 16):
            x, mask = torch.randn(2, n, 8), torch.ones(2, n, dtype=torch.int64)
            mask[1, n // 2:] = 0
            np.testing.assert_allclose(fast(x, mask).numpy(), module(x, mask).numpy(), rtol=1e-4, atol=1e-5)
    assert sorted(built) == [*range(2, 14), 16], built       # (dynamo's first graph, for 2, is static)


class _Selector(nn.Module):
    """Rows kept by a score run through a head; a constant made in forward; a masked update;
    nonzero's indices."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.head = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        h = self.body(x).relu() * torch.tensor(2.0)
        h[h > 1.5] += 0.25                      # a masked update: a where, in the backend's own trace
        keep = h.sum(-1) > 6.0
        return self.head(h[keep]), torch.nonzero(keep).squeeze(-1)


@pytest.mark.parametrize("free_tensors", [False, True], ids=["weights_as_inputs", "weights_held"])
def test_sizes_the_data_gives_compile_staged(monkeypatch, free_tensors):
    """With dynamo's capture_dynamic_output_shape_ops, x[mask] and nonzero stay in the graph (an
    unbacked size). The backend runs it staged (the selections on the host between compiled
    stretches) instead of leaving the whole graph to eager PyTorch; a new count re-traces nothing,
    and an updated weight still recompiles."""
    module = _Selector().eval()
    traced = []
    real = torch_dynamo.staged_program
    monkeypatch.setattr(torch_dynamo, "staged_program", lambda *a: traced.append(1) or real(*a))
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(12, 8, generator=gen) * (0.5 + 0.3 * k) for k in range(6)]
    counts = set()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, install_free_tensors=free_tensors), \
            warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge")
        for x in xs:
            got, want = fast(x), module(x)
            counts.add(len(want[1]))
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5, rtol=0)
        assert len(traced) == 1 and len(counts) > 2          # one trace serves every count
        module.head.weight.mul_(-1.0)
        got = fast(xs[0])
        np.testing.assert_allclose(got[0].numpy(), module(xs[0])[0].numpy(), atol=1e-5, rtol=0)
    assert len(traced) == 2
    _no_fallback(caught)


def test_a_size_the_data_gives_with_no_host_form_falls_back_with_one_line():
    class Repeat(nn.Module):
        def forward(self, x, n):
            return torch.repeat_interleave(x, n) * 2

    x, n = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2, 0, 3])
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _compiled(Repeat(), (x, n))[0]
    np.testing.assert_allclose(got, (torch.repeat_interleave(x, n) * 2).numpy())
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "\n" not in ours[0] and "runs in eager PyTorch" in ours[0], ours
    assert "repeat_interleave" in ours[0]


def test_an_input_updated_in_place_is_written_back(monkeypatch):
    """A graph that writes into a tensor it is given (a cache passed in and updated in place;
    `y[y > 1] += 0.5` cut by dynamo at the selection, so the second graph updates the tensor the
    first one made) compiles: the new values are extra outputs, copied into the caller's tensor
    after each call."""
    class Cache(nn.Module):
        def forward(self, x, cache):
            cache[:, 1] = x * 2.0
            return cache.sum(1)

    class Bump(nn.Module):
        def forward(self, x):
            y = x * 2.0
            y[y > 1] += 0.5
            return y - 1.0

    gen = torch.Generator().manual_seed(2)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        fast = torch.compile(Cache(), backend="tensorforge")
        for _ in range(3):
            x, cache = torch.randn(3, 4, generator=gen), torch.randn(3, 2, 4, generator=gen)
            mine, theirs = cache.clone(), cache.clone()
            got, want = fast(x, mine), Cache()(x, theirs)
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
        bump = torch.compile(Bump(), backend="tensorforge")
        for _ in range(3):
            x = torch.randn(5, 3, generator=gen)
            np.testing.assert_allclose(bump(x).numpy(), Bump()(x).numpy(), atol=1e-6, rtol=0)
    _no_fallback(caught)


def test_norms_over_the_batchs_own_statistics_compile():
    """InstanceNorm2d, and BatchNorm2d without running statistics, normalize by the statistics of
    the input itself even in eval mode: dynamo's trace reaches a batch norm in training mode with
    no running statistics to update, which compiles (it fell back to eager PyTorch)."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 6, 3), nn.InstanceNorm2d(6, affine=True), nn.ReLU(),
                           nn.BatchNorm2d(6, track_running_stats=False)).eval()
    _matches_eager(module, (torch.randn(2, 3, 8, 8),))


def test_numbers_dynamo_passes_as_tensors_are_constants_of_each_variant():
    """With dynamic=True dynamo passes a module's float attributes (a LayerNorm's eps, a dropout
    probability) as 0-d tensors read by .item(): the graph could not be traced (it failed the
    user's call, then fell back to eager PyTorch). They are constants of each variant now, keyed
    by value: a changed eps compiles a new variant."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Dropout(0.1), nn.ReLU()).eval()
    gen = torch.Generator().manual_seed(3)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge", dynamic=True)
        for n in (3, 5, 3):
            x = torch.randn(n, 8, generator=gen) * 1e-2
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), atol=1e-5, rtol=0)
        module[1].eps = 1e-1                    # large beside the inputs' variance: the outputs move
        x = torch.randn(4, 8, generator=gen) * 1e-2
        np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), atol=1e-5, rtol=0)
    _no_fallback(caught)


def test_a_number_read_out_of_a_tensor_the_graph_is_handed_falls_back_with_one_line():
    """`.item()` of a 0-d tensor dynamo hands over at a graph break (not an attribute of a
    module: a value per call could mean a compile per call) leaves that graph to eager PyTorch,
    with the warning; the call itself succeeds (it failed inside the backend before)."""
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor(2.0))

        def forward(self, x):
            return x * self.w.item() + 1

    module = Scale().eval()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge", dynamic=True)
        for n in (3, 5):
            x = torch.randn(n, 4)
            np.testing.assert_allclose(fast(x).numpy(), module(x).numpy(), atol=1e-6, rtol=0)
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert ours and all("runs in eager PyTorch" in m and "\n" not in m for m in ours)


def test_a_failure_of_the_backend_itself_leaves_the_graph_to_eager_pytorch(monkeypatch):
    """An error the backend did not foresee is a warning that asks for a report, and the user's
    call still runs (in eager PyTorch), instead of dynamo's BackendCompilerFailed."""
    def broken(*args, **kwargs):
        raise AttributeError("something the backend did not foresee")

    monkeypatch.setattr(torch_dynamo, "CompiledGraph", broken)
    module, x = _cnn(), torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _compiled(module, (x,))[0]
    np.testing.assert_allclose(got, eager(module, (x,))[0], atol=1e-5, rtol=0)
    ours = [str(w.message) for w in caught if "tensorforge" in str(w.message)]
    assert len(ours) == 1 and "AttributeError: something the backend did not foresee" in ours[0]
    assert "please report" in ours[0] and "\n" not in ours[0]
