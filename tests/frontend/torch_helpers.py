"""Shared by the PyTorch frontend tests: load benchmarks/exports/models.py (the paper's
workloads as torch.nn modules) and compare a compiled graph with torch eager."""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "exports" / "models.py"


def workloads():
    """The benchmarks/exports/models module (needs torch)."""
    name = "tf_export_models"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MODELS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # the module's dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def eager(module, args) -> list[np.ndarray]:
    import torch
    with torch.no_grad():
        out = module.eval()(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    flat = []
    for o in outs:
        flat.extend(o if isinstance(o, (tuple, list)) else (o,))
    return [o.numpy() for o in flat]


def check_from_torch(module, args, atol: float = 1e-4, rtol: float = 0.0) -> None:
    """from_torch + compile + call matches torch eager on every output."""
    import tensorforge
    from tensorforge.frontend import from_torch
    expected = eager(module, args)
    model = tensorforge.compile(from_torch(module, args))
    got = model(*[a.numpy() for a in args])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, atol=atol, rtol=rtol)


def Fn(fn, *constants):
    """An nn.Module whose forward is `fn(*inputs, *constants)`, the constants held as buffers
    (they become the graph's params)."""
    return _fn_class()(fn, *constants)


@functools.cache
def _fn_class():
    from torch import nn

    class Fn(nn.Module):
        def __init__(self, fn, *constants):
            super().__init__()
            self.fn = fn
            for k, c in enumerate(constants):
                self.register_buffer(f"c{k}", c)

        def forward(self, *xs):
            return self.fn(*xs, *self.buffers())

    return Fn
