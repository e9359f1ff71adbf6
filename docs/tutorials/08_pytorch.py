"""Lesson 8: models from PyTorch, through `from_torch` and through `torch.compile`.

`from_torch(module, example_inputs)` traces the module with `torch.export`, lowers it to the core
ATen ops and converts those; the weights become constants, so batch norms fold into the convs and
weight layouts are chosen once.  What it returns depends on the shapes:

- a `Graph` when every shape is static, compiled as any ONNX model's graph is;
- a `TorchProgram` when `dynamic_shapes` makes a dimension symbolic (a `torch.export.Dim`): each
  new shape compiles on its first call, a batch runs in batch buckets, and a shape outside the
  Dim's range is refused;
- a `StagedTorchProgram` when a size comes from the data (`x[mask]`, `torch.nonzero`,
  `torch.unique`, an integer `.item()`): those ops run in NumPy between compiled stretches.

`torch.cond` converts by predication (both branches, a `where` on the predicate).  And
`torch.compile(model, backend="tensorforge")` gives the same compiler to dynamo: each graph it
captures is compiled, and a graph with something unsupported runs in eager PyTorch with a
one-line warning.

This lesson runs each on a small module and checks every output against eager PyTorch.  It
needs the [torch] extra.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from torch import nn

import tensorforge
from tensorforge.frontend import from_torch, torch_dynamo

SIZE = int(os.environ.get("TUTORIAL_SIZE", "128"))      # image side; the tests use a small one
torch.manual_seed(0)


def same(name: str, got, want, atol: float = 1e-4) -> None:
    """Assert that our outputs (NumPy arrays or tensors) match eager PyTorch's, and say so."""
    got = [np.asarray(g.numpy() if hasattr(g, "numpy") else g) for g in got]
    want = [w.detach().numpy() for w in (want if isinstance(want, (tuple, list)) else (want,))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, atol=atol, rtol=1e-4)
    print(f"{name}: matches eager PyTorch")


# -- 1. a static graph, then a symbolic batch ------------------------------------------------------
classifier = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                           nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                           nn.Linear(32, 10)).eval()
image = torch.randn(1, 3, SIZE, SIZE)
graph = from_torch(classifier, (image,))
print(f"static: {type(graph).__name__} of {len(graph.nodes)} nodes")
with torch.no_grad():
    same("static classifier", tensorforge.compile(graph)(image.numpy()), classifier(image))

batch = torch.export.Dim("batch", min=1, max=16)
program = from_torch(classifier, (torch.randn(2, 3, SIZE, SIZE),), dynamic_shapes=({0: batch},))
print(f"symbolic: {program!r}")
model = tensorforge.compile(program)
with torch.no_grad():
    for n in (1, 3, 5):
        images = torch.randn(n, 3, SIZE, SIZE)
        same(f"batch {n}", model(images.numpy()), classifier(images))
# batch 3 ran as 2 + 1 and batch 5 as 4 + 1, on the specializations for the buckets
print(f"batch buckets: {model.info['batch_split']['runs_as']}")
try:
    model(torch.randn(17, 3, SIZE, SIZE).numpy())
except Exception as err:                      # outside the Dim's range: refused, with the reason
    print(f"batch 17: {type(err).__name__}: {err}")


# -- 2. sizes the data gives: a detector's head on the positions it keeps -------------------------
class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.score = nn.Linear(32, 1)
        self.head = nn.Linear(32, 4)

    def forward(self, image):
        tokens = self.backbone(image).flatten(2).transpose(1, 2).reshape(-1, 32)
        scores = self.score(tokens).squeeze(-1)
        keep = scores > scores.mean()                    # about half the positions, a new count per image
        return self.head(tokens[keep]), torch.nonzero(keep).squeeze(-1)


detector = Detector().eval()
staged = from_torch(detector, (image,))
print(f"data-dependent: {staged!r}")
model = tensorforge.compile(staged)
with torch.no_grad():
    for k in range(3):
        picture = torch.randn(1, 3, SIZE, SIZE)
        got = model(picture.numpy())
        same(f"detector, image {k} ({got[0].shape[0]} positions kept)", got, detector(picture))


# -- 3. .item() as a size, and torch.cond -----------------------------------------------------------
class Trim(nn.Module):
    """Padding trimmed to the batch's longest sequence."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, lengths):
        n = lengths.max().item()                         # runs on the host; the rest is compiled per n
        return self.proj(x[:, :n]).relu().sum(1) / n


trim = Trim().eval()
model = tensorforge.compile(from_torch(trim, (torch.randn(2, 12, 8), torch.tensor([3, 5]))))
with torch.no_grad():
    for lengths in ([3, 5], [9, 2], [3, 5]):
        x = torch.randn(2, 12, 8)
        same(f"trimmed to {max(lengths)}", model(x.numpy(), np.array(lengths)), trim(x, torch.tensor(lengths)))
print(f"specializations of the trimmed stretch: {model.info['stages'][1]['specializations']}")  # 5 and 9


class Gate(nn.Module):
    """One of two heads, picked by the data: both run, and a where keeps one."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda x: self.a(x).relu(), lambda x: self.b(x).tanh(), (x,))


gate = Gate().eval()
gated = from_torch(gate, (torch.randn(4, 8),))
print(f"torch.cond: {[n.op for n in gated.nodes if n.op in ('where', 'dense')]}")
model = tensorforge.compile(gated)
with torch.no_grad():
    for shift in (0.5, -0.5):
        x = torch.randn(4, 8) + shift
        same(f"torch.cond, mean {float(x.mean()):+.2f}", model(x.numpy()), gate(x))


# -- 4. torch.compile ---------------------------------------------------------------------------------
torch_dynamo.register()          # an installed tensorforge registers "tensorforge" by its entry point
torch._dynamo.config.capture_dynamic_output_shape_ops = True    # keep x[mask] in dynamo's graphs
with warnings.catch_warnings(record=True) as caught, torch.no_grad():
    warnings.simplefilter("always")
    fast = torch.compile(classifier, backend="tensorforge", dynamic=True)
    for n in (2, 3):
        images = torch.randn(n, 3, SIZE, SIZE)
        same(f"torch.compile, batch {n}", [fast(images)], classifier(images))
    fast_detector = torch.compile(detector, backend="tensorforge")
    for k in range(2):
        picture = torch.randn(1, 3, SIZE, SIZE)
        same(f"torch.compile detector, image {k}", fast_detector(picture), detector(picture))
fallbacks = [str(w.message) for w in caught if "eager PyTorch" in str(w.message)]
assert not fallbacks, fallbacks
print("torch.compile: every graph compiled, none left to eager PyTorch")
